/*
 * check.c - the check of a checkpoint store at open: the catalog
 * (CATALOG, catalog.c), the manifests in emdb_meta and the row data
 * in emdb_rows must tell the same story before the store is used.
 *
 * RocksDB alone cannot be trusted to say that a checkpoint never existed:
 * with its default recovery a damaged write-ahead-log record and everything
 * after it vanish without an error.  So the absence of a manifest proves
 * nothing, and nothing is deleted on it.
 *
 * Invariants:
 *   1. Every check runs before any change: a store that fails one is
 *      refused with CORRUPT, a message naming the store, every damaged
 *      checkpoint and file, and how to proceed, and is left as it was.
 *   2. Rows and manifests are dropped at open only for ids the catalog
 *      lists as pending (a checkpoint that never completed, a deletion
 *      that did not finish), or, with accept_loss, for what the operator
 *      explicitly gave up: rows whose checkpoint lost its manifest.
 *   3. Ids to drop go into the catalog's pending list before they are
 *      dropped, so a crash in the middle repeats the drop, never forgets it.
 *   4. A store written before the catalog existed (no CATALOG, but
 *      manifests or rows) gets one built from its manifests; its rows
 *      without a manifest are taken as unfinished checkpoints, the rule
 *      that store was written under (RocksDB replayed its WAL strictly, so
 *      its manifests are complete).
 *
 * State changes: st->cat, the catalog file, emdb_meta and emdb_rows, all
 * in store_check_open's last part, after the checks.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "checkpoint/store_int.h"

/* What the store holds under one checkpoint id. */
typedef struct seen {
	uint64_t id;
	uint64_t sum;       /* manifest checksum                         */
	bool manifest;      /* a manifest is in emdb_meta                */
	bool manifest_ok;   /* ... and it decodes and checks             */
	bool wants_rows;    /* ... and it names row blocks               */
	bool rows;          /* row keys of this id are in emdb_rows      */
} seen;

typedef struct check {
	seen *v;
	size_t n, cap;
	char msg[2048];     /* what is damaged, "; "-separated           */
	size_t len;
} check;

static seen *seen_get(check *k, uint64_t id)
{
	for (size_t i = 0; i < k->n; i++)
		if (k->v[i].id == id)
			return &k->v[i];
	if (k->n == k->cap) {
		size_t nc = k->cap ? k->cap * 2 : 32;
		seen *nv = emdb_realloc(k->v, nc * sizeof(*nv));
		if (!nv)
			return NULL;
		k->v = nv;
		k->cap = nc;
	}
	k->v[k->n] = (seen){ .id = id };
	return &k->v[k->n++];
}

static void damage(check *k, const char *fmt, ...)
{
	if (k->len + 8 >= sizeof(k->msg))
		return;
	if (k->len)
		k->len += (size_t)snprintf(k->msg + k->len, sizeof(k->msg) - k->len, "; ");
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(k->msg + k->len, sizeof(k->msg) - k->len, fmt, ap);
	va_end(ap);
	k->len = w < 0 ? k->len : k->len + (size_t)w;
	if (k->len >= sizeof(k->msg) - 1) {
		k->len = sizeof(k->msg) - 1;
		memcpy(k->msg + sizeof(k->msg) - 5, "...", 4);
	}
}

/* Every manifest key in emdb_meta. */
static int scan_manifests(emdb_store *st, check *k)
{
	rocksdb_iterator_t *it = rocksdb_create_iterator_cf(st->db, st->ropts, STORE_CF_META(st));
	uint8_t first[META_KEY_CKPT_LEN];
	store_key_ckpt(first, 0);
	int rc = EMDB_OK;
	for (rocksdb_iter_seek(it, (const char *)first, sizeof(first)); rc == EMDB_OK && rocksdb_iter_valid(it);
	     rocksdb_iter_next(it)) {
		size_t klen, vlen;
		const uint8_t *key = (const uint8_t *)rocksdb_iter_key(it, &klen);
		uint64_t id = store_key_ckpt_id(key, klen);
		if (!id)
			break;
		const uint8_t *val = (const uint8_t *)rocksdb_iter_value(it, &vlen);
		seen *s = seen_get(k, id);
		if (!s) {
			rc = EMDB_ERR_NOMEM;
			break;
		}
		s->manifest = true;
		s->sum = manifest_sum(val, vlen);
		manifest m;
		if (manifest_decode(val, vlen, &m) != EMDB_OK) {
			damage(k, "checkpoint %llu: its manifest fails its checks (%s)", (unsigned long long)id,
			       emdb_last_error());
			continue;
		}
		s->manifest_ok = m.info.id == id;
		if (!s->manifest_ok)
			damage(k, "checkpoint %llu: its manifest names checkpoint %llu", (unsigned long long)id,
			       (unsigned long long)m.info.id);
		for (uint32_t i = 0; i < m.info.tables; i++)
			s->wants_rows |= m.tables[i].blocks > 0;
		manifest_free(&m);
	}
	return store_iter_end(it, rc, "reading the manifests");
}

/* Which checkpoint ids have row data: one seek per id.  Only keys matter
 * here: a row block that fails its checksum is restore's to report (for
 * the checkpoint that needs it), not a reason to refuse the whole store. */
static int scan_rows(emdb_store *st, check *k)
{
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_readoptions_set_verify_checksums(ro, 0);
	rocksdb_readoptions_set_fill_cache(ro, 0);
	rocksdb_iterator_t *it = rocksdb_create_iterator_cf(st->db, ro, STORE_CF_ROWS(st));
	int rc = EMDB_OK;
	rocksdb_iter_seek_to_first(it);
	while (rc == EMDB_OK && rocksdb_iter_valid(it)) {
		size_t klen;
		const char *key = rocksdb_iter_key(it, &klen);
		uint64_t ck, blk;
		uint32_t tb;
		if (store_key_row_decode((const uint8_t *)key, klen, &ck, &tb, &blk) != EMDB_OK) {
			damage(k, "emdb_rows holds a key of %zu bytes that is no row key", klen);
			break;
		}
		seen *s = seen_get(k, ck);
		if (!s) {
			rc = EMDB_ERR_NOMEM;
			break;
		}
		s->rows = true;
		if (ck == UINT64_MAX)
			break;
		uint8_t next[ROW_KEY_LEN];
		store_key_row(next, ck + 1, 0, 0);
		rocksdb_iter_seek(it, (const char *)next, sizeof(next));
	}
	rc = store_iter_end(it, rc, "scanning the row data");
	rocksdb_readoptions_destroy(ro);
	return rc;
}

/* The verdict on each id: keep it complete, drop it, or (damage) neither. */
typedef enum fate { KEEP, DROP, LOST } fate;

static fate judge(check *k, const store_catalog *cat, bool legacy, const seen *s)
{
	unsigned long long id = (unsigned long long)s->id;
	uint64_t sum = 0;
	bool pending = false;
	bool listed = !legacy && catalog_has(cat, s->id, &sum, &pending);
	if (listed && pending)
		return DROP; /* never reported complete, or being deleted */
	bool whole = s->manifest_ok && (s->rows || !s->wants_rows);
	if (legacy) {
		if (!s->manifest)
			return DROP; /* invariant 4 */
		if (!whole)
			damage(k, "checkpoint %llu: its row data is missing", id);
		return whole ? KEEP : LOST;
	}
	if (!listed) {
		if (s->manifest)
			damage(k, "checkpoint %llu: a manifest the catalog does not list", id);
		else
			damage(k, "row data of checkpoint %llu, which neither the catalog nor a manifest names", id);
		return whole ? KEEP : LOST; /* kept (adopted) only with accept_loss */
	}
	if (!s->manifest) {
		damage(k, "checkpoint %llu: its manifest is missing from RocksDB", id);
		return LOST;
	}
	if (s->manifest_ok && s->sum != sum) {
		damage(k, "checkpoint %llu: its manifest is not the one the catalog recorded", id);
		return LOST;
	}
	if (s->manifest_ok && !whole)
		damage(k, "checkpoint %llu: its row data is missing", id);
	return whole ? KEEP : LOST;
}

static int drop_one(emdb_store *st, const seen *s)
{
	int rc = s->manifest ? store_drop_manifest(st, s->id) : EMDB_OK;
	if (rc == EMDB_OK && s->rows)
		rc = store_drop_rows(st, s->id);
	return rc;
}

static int apply(emdb_store *st, check *k, const fate *f, store_catalog *next)
{
	/* Invariant 3: everything to drop is pending on disk first. */
	for (size_t i = 0; i < k->n; i++)
		if (f[i] != KEEP)
			next->pending[next->n_pending++] = k->v[i].id;
		else
			next->done[next->n_done++] = (catalog_entry){ k->v[i].id, k->v[i].sum };
	int rc = catalog_store(st, next);
	if (rc != EMDB_OK)
		return rc;
	catalog_free(&st->cat);
	st->cat = *next;
	memset(next, 0, sizeof(*next));
	for (size_t i = 0; i < k->n; i++) {
		if (f[i] == KEEP)
			continue;
		/* A failure here (a full disk) leaves the id pending: the next
		 * open drops it; the store itself is usable. */
		if (drop_one(st, &k->v[i]) == EMDB_OK)
			cat_edit_locked(st, k->v[i].id, CAT_NONE, 0);
	}
	return EMDB_OK;
}

static int cmp_seen(const void *a, const void *b)
{
	uint64_t x = ((const seen *)a)->id, y = ((const seen *)b)->id;
	return x < y ? -1 : x > y;
}

int store_check_open(emdb_store *st, bool accept_loss, bool hdr_was_missing)
{
	check k = { 0 };
	store_catalog cat;
	bool absent = false, cat_damaged = false, present = false;
	int rc = catalog_load(st->cat_path, &cat, &absent);
	if (rc == EMDB_ERR_CORRUPT) {
		damage(&k, "%s", emdb_last_error());
		cat_damaged = true;
		rc = EMDB_OK;
	}
	if (rc == EMDB_OK)
		rc = scan_manifests(st, &k);
	if (rc == EMDB_OK)
		rc = scan_rows(st, &k);
	fate *f = rc == EMDB_OK ? emdb_calloc(k.n ? k.n : 1, sizeof(*f)) : NULL;
	if (rc == EMDB_OK && !f)
		rc = EMDB_ERR_NOMEM;
	if (rc != EMDB_OK)
		goto out;
	if (k.n)
		qsort(k.v, k.n, sizeof(*k.v), cmp_seen);

	present = !absent && !cat_damaged;
	if (present && hdr_was_missing)
		damage(&k, "the store header is missing from RocksDB although %s exists", st->cat_path);
	else if (present && memcmp(cat.uuid, st->hdr.uuid, 16) != 0)
		damage(&k, "%s belongs to another store (its uuid differs from the store header's)", st->cat_path);
	/* Without a catalog to go by, a damaged one is rebuilt like a legacy
	 * store's, except that nothing is taken as unfinished. */
	for (size_t i = 0; i < k.n; i++) {
		f[i] = judge(&k, &cat, !present, &k.v[i]);
		if (cat_damaged && !k.v[i].manifest)
			f[i] = LOST;
	}
	for (uint32_t i = 0; present && i < cat.n_done; i++) {
		bool there = false;
		for (size_t j = 0; j < k.n && !there; j++)
			there = k.v[j].id == cat.done[i].id;
		if (!there)
			damage(&k, "checkpoint %llu: its manifest and its row data are missing from RocksDB",
			       (unsigned long long)cat.done[i].id);
	}
	if (k.len && !accept_loss) {
		rc = store_refuse(st, "the checkpoints that are whole and drop the rest", "Damaged: ", k.msg);
		goto out;
	}
	if (k.len) {
		size_t l = strlen(k.msg) + 1;
		st->damage = emdb_malloc(l);
		if (st->damage)
			memcpy(st->damage, k.msg, l);
	}

	store_catalog next = { 0 };
	memcpy(next.uuid, st->hdr.uuid, 16);
	next.next_id = st->hdr.next_id;
	if (present && cat.next_id > next.next_id)
		next.next_id = cat.next_id;
	if (k.n && k.v[k.n - 1].id >= next.next_id)
		next.next_id = k.v[k.n - 1].id + 1;
	next.done = emdb_malloc((k.n + 1) * sizeof(*next.done));
	next.pending = emdb_malloc((k.n + 1) * sizeof(*next.pending));
	if (!next.done || !next.pending) {
		catalog_free(&next);
		rc = EMDB_ERR_NOMEM;
		goto out;
	}
	rc = apply(st, &k, f, &next);
	catalog_free(&next);
out:
	catalog_free(&cat); /* zeroed when absent or damaged */
	emdb_free(f);
	emdb_free(k.v);
	return rc;
}
