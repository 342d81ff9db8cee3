/*
 * ckpt_restore.c - restoring a checkpoint: read its chain (the full
 * checkpoint it starts from and every incremental up to it) into new
 * tables, check everything, then swap them in for all the database's
 * tables at once.
 *
 * Invariants:
 *   1. The database is not touched before the swap: the new tables are
 *      private to the job until db_replace_tables publishes them in one
 *      critical section; any failure before frees them and changes
 *      nothing.
 *   2. Nothing unchecked is loaded: manifests pass their checksum, every
 *      block its checksum and shape, blocks of each table and link come
 *      with consecutive numbers 0..blocks-1, and the rows, blocks and
 *      block-hash chain of each link, and the row count of each table at
 *      the end, equal what the manifests say.  Anything else is CORRUPT.
 *   3. Links are applied oldest first, so a row written by several links
 *      ends with the bytes of the newest: the state at the last link.
 *   4. Rows are inserted in the order they were written (row-number
 *      order), so a restored table numbers its rows densely from 0, and
 *      its dirty tracking starts clean with the restored checkpoint as
 *      base: the next incremental checkpoint extends it.
 *
 * State changes: the database's tables (swap) and db_ckpt(db)->last.
 */
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>

#include "db/db_int.h"
#include "db/error_int.h"
#include "db/job_int.h"
#include "db/store_int.h"
#include "db/store_readahead.h"

#define MAX_CHAIN 100000

typedef struct rctx {
	emdb_job *job;
	emdb_store *st;
	manifest *chain;   /* [len], oldest (the full one) first */
	uint32_t len;
	store_ra *ra;      /* page-cache hints ahead of the reads */
	tbl **out;         /* [final.tables] */
	uint32_t n_out;
	/* batch scratch, sized for the largest block */
	uint64_t *ids, *locs, *hash;
	uint32_t *order, *start;
	size_t cap;
} rctx;

static int load_chain(rctx *c, uint64_t id)
{
	manifest m;
	int rc = store_manifest(c->st, id, &m);
	if (rc != EMDB_OK)
		return rc;
	uint32_t cap = 0;
	for (;;) {
		if (c->len == cap) {
			uint32_t nc = cap ? cap * 2 : 8;
			manifest *v = emdb_realloc(c->chain, nc * sizeof(*v));
			if (!v) {
				manifest_free(&m);
				return EMDB_ERR_NOMEM;
			}
			c->chain = v;
			cap = nc;
		}
		c->chain[c->len++] = m;
		if (m.info.kind == EMDB_CKPT_FULL)
			break;
		uint64_t parent = m.info.parent;
		if (c->len == MAX_CHAIN)
			return emdb__seterr(EMDB_ERR_CORRUPT, "checkpoint chain longer than %d links", MAX_CHAIN);
		rc = store_manifest(c->st, parent, &m);
		if (rc != EMDB_OK)
			return rc == EMDB_ERR_INVALID
				       ? emdb__seterr(EMDB_ERR_CORRUPT,
						      "checkpoint %llu needs checkpoint %llu, which is missing",
						      (unsigned long long)c->chain[c->len - 1].info.id,
						      (unsigned long long)parent)
				       : rc;
	}
	for (uint32_t i = 0; i < c->len / 2; i++) { /* oldest first */
		manifest tmp = c->chain[i];
		c->chain[i] = c->chain[c->len - 1 - i];
		c->chain[c->len - 1 - i] = tmp;
	}
	return EMDB_OK;
}

static const manifest_table *find_rec(const manifest *m, uint32_t id)
{
	for (uint32_t i = 0; i < m->info.tables; i++)
		if (m->tables[i].id == id)
			return &m->tables[i];
	return NULL;
}

static int grow_scratch(rctx *c, size_t n, uint32_t shards)
{
	if (n <= c->cap)
		return EMDB_OK;
	emdb_free(c->ids);
	emdb_free(c->locs);
	emdb_free(c->hash);
	emdb_free(c->order);
	emdb_free(c->start);
	c->ids = emdb_malloc(n * 8);
	c->locs = emdb_malloc(n * 8);
	c->hash = emdb_malloc(n * 8);
	c->order = emdb_malloc(n * 4);
	c->start = emdb_malloc(((size_t)shards + 1) * 4);
	c->cap = c->ids && c->locs && c->hash && c->order && c->start ? n : 0;
	return c->cap ? EMDB_OK : EMDB_ERR_NOMEM;
}

/* Load one block's rows into t. */
static int load_block(rctx *c, tbl *t, const block_view *b)
{
	int rc = grow_scratch(c, b->n, t->shards);
	if (rc != EMDB_OK)
		return rc;
	memcpy(c->ids, b->ids, (size_t)b->n * 8);
	dit_plan plan = { 0, c->hash, c->order, c->start };
	rc = table_resolve_prepare(t, c->ids, b->n, &plan);
	if (rc != EMDB_OK)
		return rc;
	table_resolve_commit_raw(t, c->ids, &plan, c->locs, NULL);
	size_t row_bytes = (size_t)b->row_floats * 4;
	for (uint32_t i = 0; i < b->n; i++)
		memcpy(table_row(t, c->locs[i]), b->rows + i * row_bytes, row_bytes);
	return EMDB_OK;
}

/* Read the blocks link `ck` wrote for table rec->id, checking them. */
static int load_link(rctx *c, tbl *t, uint64_t ck, const manifest_table *rec)
{
	uint8_t lo[ROW_KEY_LEN], hi[ROW_KEY_LEN];
	store_key_row(lo, ck, rec->id, 0);
	store_key_row(hi, ck, rec->id + 1, 0);
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_readoptions_set_verify_checksums(ro, 1);
	rocksdb_readoptions_set_fill_cache(ro, 0);
	rocksdb_readoptions_set_readahead_size(ro, 8u << 20);
	rocksdb_readoptions_set_iterate_upper_bound(ro, (const char *)hi, sizeof(hi));
	rocksdb_iterator_t *it = rocksdb_create_iterator_cf(c->st->db, ro, STORE_CF_ROWS(c->st));
	uint64_t blocks = 0, rows = 0, bytes = 0, hash = 0;
	uint32_t rf = t->dim + t->state_floats;
	int rc = EMDB_OK;
	for (rocksdb_iter_seek(it, (const char *)lo, sizeof(lo)); rc == EMDB_OK && rocksdb_iter_valid(it);
	     rocksdb_iter_next(it)) {
		size_t klen, vlen;
		const char *k = rocksdb_iter_key(it, &klen);
		const char *v = rocksdb_iter_value(it, &vlen);
		uint64_t kc, kb;
		uint32_t kt;
		block_view b;
		rc = store_key_row_decode((const uint8_t *)k, klen, &kc, &kt, &kb);
		if (rc == EMDB_OK && (kc != ck || kt != rec->id || kb != blocks))
			rc = emdb__seterr(EMDB_ERR_CORRUPT, "checkpoint %llu, table %u: block %llu is missing",
					  (unsigned long long)ck, rec->id, (unsigned long long)blocks);
		if (rc == EMDB_OK && block_decode((const uint8_t *)v, vlen, &b) != EMDB_OK) {
			char why[256];
			snprintf(why, sizeof(why), "%s", emdb_last_error());
			rc = emdb__seterr(EMDB_ERR_CORRUPT, "checkpoint %llu, table %u, block %llu: %s",
					  (unsigned long long)ck, rec->id, (unsigned long long)blocks, why);
		}
		if (rc == EMDB_OK && b.row_floats != rf)
			rc = emdb__seterr(EMDB_ERR_CORRUPT, "checkpoint %llu, table %u: rows of %u floats, table has %u",
					  (unsigned long long)ck, rec->id, b.row_floats, rf);
		if (rc == EMDB_OK)
			rc = load_block(c, t, &b);
		if (rc != EMDB_OK)
			break;
		blocks++;
		rows += b.n;
		bytes += vlen;
		hash = store_hash_chain(hash, b.hash);
		JOB_ADD(c->job, rows_done, b.n);
		JOB_ADD(c->job, bytes_done, vlen);
		store_ra_consumed(c->ra, ck, vlen);
	}
	char *err = NULL;
	rocksdb_iter_get_error(it, &err);
	if (rc == EMDB_OK)
		rc = store_rocks_err(err, "reading checkpoint rows");
	else if (err)
		rocksdb_free(err);
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	if (rc == EMDB_OK && (blocks != rec->blocks || rows != rec->rows || bytes != rec->bytes ||
			      hash != rec->hash))
		rc = emdb__seterr(EMDB_ERR_CORRUPT,
				  "checkpoint %llu, table %u: found %llu blocks with %llu rows, the manifest says %llu with %llu (or their checksums differ)",
				  (unsigned long long)ck, rec->id, (unsigned long long)blocks,
				  (unsigned long long)rows, (unsigned long long)rec->blocks,
				  (unsigned long long)rec->rows);
	return rc;
}

static int restore_table(rctx *c, const manifest_table *fin, const emdb_db_config *dbc, tbl **out)
{
	/* The newest link that wrote the table whole starts its chain. */
	uint32_t first = c->len;
	while (first-- > 0) {
		const manifest_table *r = find_rec(&c->chain[first], fin->id);
		if (!r)
			return emdb__seterr(EMDB_ERR_CORRUPT,
					    "table %u is a delta in a checkpoint whose parent %llu does not hold it",
					    fin->id, (unsigned long long)c->chain[first].info.id);
		if (r->flags & MANIFEST_TABLE_FULL)
			break;
		if (first == 0)
			return emdb__seterr(EMDB_ERR_CORRUPT, "table %u has no full copy in its chain", fin->id);
	}
	int rc = db_check_table_config(&fin->cfg);
	if (rc != EMDB_OK)
		return emdb__seterr(EMDB_ERR_CORRUPT, "manifest: %s", emdb_last_error());
	tbl *t;
	rc = table_create(&fin->cfg, fin->id, dbc, &t);
	if (rc != EMDB_OK)
		return rc;
	t->step = fin->step;
	for (uint32_t l = first; rc == EMDB_OK && l < c->len; l++)
		rc = load_link(c, t, c->chain[l].info.id, find_rec(&c->chain[l], fin->id));
	if (rc == EMDB_OK && chunk_rows(&t->rows) != fin->rows_total)
		rc = emdb__seterr(EMDB_ERR_CORRUPT, "table '%s': %llu rows restored, the manifest says %llu",
				  fin->cfg.name, (unsigned long long)chunk_rows(&t->rows),
				  (unsigned long long)fin->rows_total);
	if (rc != EMDB_OK) {
		table_release(t);
		return rc;
	}
	t->ck.base_rows = chunk_rows(&t->rows);
	*out = t;
	return EMDB_OK;
}

static int check_names(const manifest *m)
{
	for (uint32_t i = 0; i < m->info.tables; i++)
		for (uint32_t j = 0; j < i; j++)
			if (!strcmp(m->tables[i].cfg.name, m->tables[j].cfg.name))
				return emdb__seterr(EMDB_ERR_CORRUPT, "manifest: table name '%s' twice",
						    m->tables[i].cfg.name);
	return EMDB_OK;
}

int ckpt_restore_run(emdb_job *job, emdb_ckpt_info *info)
{
	rctx c;
	memset(&c, 0, sizeof(c));
	c.job = job;
	c.st = job->st;
	JOB_SET(job, phase, EMDB_PHASE_READ);
	int rc = load_chain(&c, job->restore_id);
	const manifest *fin = rc == EMDB_OK ? &c.chain[c.len - 1] : NULL;
	if (rc == EMDB_OK) {
		JOB_SET(job, ckpt_id, fin->info.id);
		for (uint32_t l = 0; l < c.len; l++) {
			JOB_ADD(job, rows_total, c.chain[l].info.rows);
			JOB_ADD(job, bytes_total, c.chain[l].info.bytes);
		}
		rc = check_names(fin);
	}
	if (rc == EMDB_OK) {
		uint64_t ids[64];
		uint32_t k = 0;
		for (uint32_t l = 0; l < c.len && k < 64; l++)
			ids[k++] = c.chain[l].info.id;
		c.ra = store_ra_open(c.st, ids, k);
	}
	if (rc == EMDB_OK) {
		c.out = emdb_calloc(fin->info.tables ? fin->info.tables : 1, sizeof(*c.out));
		if (!c.out)
			rc = EMDB_ERR_NOMEM;
	}
	emdb_db_config dbc;
	emdb_db_get_config(job->db, &dbc);
	for (uint32_t i = 0; rc == EMDB_OK && i < fin->info.tables; i++) {
		rc = restore_table(&c, &fin->tables[i], &dbc, &c.out[i]);
		if (rc == EMDB_OK)
			c.n_out++;
	}
	for (uint32_t i = 0; rc == EMDB_OK && i < c.n_out; i++)
		c.out[i]->ck.base_ckpt = fin->info.id;
	if (rc == EMDB_OK) {
		JOB_SET(job, phase, EMDB_PHASE_SWAP);
		rc = db_replace_tables(job->db, c.out, c.n_out);
	}
	if (rc == EMDB_OK) {
		db_ckpt_state *ck = db_ckpt(job->db);
		ck->last = fin->info.id;
		memcpy(ck->store_uuid, c.st->hdr.uuid, 16);
		*info = fin->info;
	} else {
		for (uint32_t i = 0; i < c.n_out; i++)
			table_release(c.out[i]);
	}
	store_ra_close(c.ra);
	emdb_free(c.out);
	for (uint32_t l = 0; l < c.len; l++)
		manifest_free(&c.chain[l]);
	emdb_free(c.chain);
	emdb_free(c.ids);
	emdb_free(c.locs);
	emdb_free(c.hash);
	emdb_free(c.order);
	emdb_free(c.start);
	return rc;
}
