/*
 * restore.c - restoring a checkpoint: read its chain (the full
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
 *   4. Rows are inserted by the readers in any interleaving but each gets
 *      the next row number, so a restored table numbers its rows densely
 *      from 0, and its dirty tracking starts clean with the restored
 *      checkpoint as base: the next incremental checkpoint extends it.
 *   5. The readers of one link work on disjoint block ranges (a link holds
 *      each ID once) and are joined before the next link starts, so
 *      invariant 3 holds with several readers.
 *
 * State changes: the database's tables (swap) and db_ckpt(db)->last.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "checkpoint/job_int.h"
#include "checkpoint/rows_in.h"
#include "checkpoint/store_int.h"
#include "db/db_int.h"

#define MAX_CHAIN 100000
#define READERS 8 /* threads reading one link: the caller and seven more */

typedef struct rctx {
	emdb_job *job;
	emdb_store *st;
	manifest *chain;   /* [len], oldest (the full one) first */
	uint32_t len;
	tbl **out;         /* [final.tables] */
	uint32_t n_out;
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

/* One reader of a link: it claims ranges of the link's blocks one after
 * another (shared cursor), with its own scratch. */
typedef struct rworker {
	rctx *c;
	tbl *t;
	uint64_t ck;
	const manifest_table *rec;
	uint64_t *next;        /* shared: the next range to claim */
	uint64_t ranges;       /* the link's blocks in this many ranges */
	uint64_t *hashes;      /* [rec->blocks], shared, own indices only */
	uint64_t rows, bytes;
	int rc;
	char msg[512];
	rows_in in;            /* its own scratch */
} rworker;

/* Check one block and load it: EMDB_OK, or an error with its message. */
static int take_block(rworker *w, const char *k, size_t klen, const char *v, size_t vlen, uint64_t want)
{
	uint64_t kc, kb;
	uint32_t kt;
	block_view b;
	uint32_t rf = w->t->dim + w->t->state_floats;
	unsigned long long ck = (unsigned long long)w->ck;
	int rc = store_key_row_decode((const uint8_t *)k, klen, &kc, &kt, &kb);
	if (rc == EMDB_OK && (kc != w->ck || kt != w->rec->id || kb != want))
		return emdb__seterr(EMDB_ERR_CORRUPT, "checkpoint %llu, table %u: block %llu is missing", ck,
				    w->rec->id, (unsigned long long)want);
	if (rc == EMDB_OK && block_decode((const uint8_t *)v, vlen, &b) != EMDB_OK) {
		char why[256];
		snprintf(why, sizeof(why), "%s", emdb_last_error());
		return emdb__seterr(EMDB_ERR_CORRUPT, "checkpoint %llu, table %u, block %llu: %s", ck,
				    w->rec->id, (unsigned long long)want, why);
	}
	if (rc == EMDB_OK && b.row_floats != rf)
		return emdb__seterr(EMDB_ERR_CORRUPT, "checkpoint %llu, table %u: rows of %u floats, table has %u",
				    ck, w->rec->id, b.row_floats, rf);
	if (rc == EMDB_OK)
		rc = rows_in_put(&w->in, w->t, b.ids, b.rows, b.n, (size_t)b.row_floats * 4);
	if (rc == EMDB_OK) {
		w->hashes[want] = b.hash;
		w->rows += b.n;
		w->bytes += vlen;
		JOB_ADD(w->c->job, rows_done, b.n);
		JOB_ADD(w->c->job, bytes_done, vlen);
	}
	return rc;
}

/* Read blocks [b0, b1) (and, for the last range, check that nothing
 * follows them). */
static int read_blocks(rworker *w, uint64_t b0, uint64_t b1, bool last)
{
	uint8_t lo[ROW_KEY_LEN], hi[ROW_KEY_LEN];
	store_key_row(lo, w->ck, w->rec->id, b0);
	if (last)
		store_key_row(hi, w->ck, w->rec->id + 1, 0);
	else
		store_key_row(hi, w->ck, w->rec->id, b1);
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	/* Each row block carries its own XXH3, checked below; RocksDB's block
	 * checksums over the same bytes more than doubled restore's CPU. */
	rocksdb_readoptions_set_verify_checksums(ro, 0);
	rocksdb_readoptions_set_fill_cache(ro, 0);
	/* No RocksDB read-ahead: blocks are about 4 MiB, each read in one
	 * pread, and the kernel reads ahead of a sequential file by itself;
	 * RocksDB's prefetch buffer only added a copy of every byte. */
	rocksdb_readoptions_set_readahead_size(ro, 0);
	rocksdb_readoptions_set_iterate_upper_bound(ro, (const char *)hi, sizeof(hi));
	rocksdb_iterator_t *it = rocksdb_create_iterator_cf(w->c->st->db, ro, STORE_CF_ROWS(w->c->st));
	int rc = EMDB_OK;
	uint64_t b = b0;
	for (rocksdb_iter_seek(it, (const char *)lo, sizeof(lo)); rc == EMDB_OK && rocksdb_iter_valid(it);
	     rocksdb_iter_next(it)) {
		size_t klen, vlen;
		const char *k = rocksdb_iter_key(it, &klen);
		const char *v = rocksdb_iter_value(it, &vlen);
		if (b == b1)
			rc = emdb__seterr(EMDB_ERR_CORRUPT, "checkpoint %llu, table %u: more blocks than the %llu of its manifest",
					  (unsigned long long)w->ck, w->rec->id, (unsigned long long)w->rec->blocks);
		else
			rc = take_block(w, k, klen, v, vlen, b);
		if (rc == EMDB_OK)
			b++;
	}
	char *err = NULL;
	rocksdb_iter_get_error(it, &err);
	if (rc == EMDB_OK)
		rc = store_rocks_err(err, "reading checkpoint rows");
	else if (err)
		rocksdb_free(err);
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	if (rc == EMDB_OK && b != b1)
		rc = emdb__seterr(EMDB_ERR_CORRUPT, "checkpoint %llu, table %u: block %llu is missing",
				  (unsigned long long)w->ck, w->rec->id, (unsigned long long)b);
	return rc;
}

static void *read_ranges(void *arg)
{
	rworker *w = arg;
	uint64_t blocks = w->rec->blocks, q;
	int rc = EMDB_OK;
	while (rc == EMDB_OK && (q = __atomic_fetch_add(w->next, 1, __ATOMIC_RELAXED)) < w->ranges)
		rc = read_blocks(w, blocks * q / w->ranges, blocks * (q + 1) / w->ranges, q + 1 == w->ranges);
	if (rc != EMDB_OK) {
		__atomic_store_n(w->next, w->ranges, __ATOMIC_RELAXED); /* the others stop too */
		snprintf(w->msg, sizeof(w->msg), "%s", emdb_last_error());
	}
	w->rc = rc;
	return NULL;
}

/* Read the blocks link `ck` wrote for table rec->id, checking them: the
 * blocks are cut into ranges that the calling thread and READERS-1
 * threads of the job claim one after another, so that one reads while
 * another loads (the files are read synchronously), the CPU work of
 * loading runs on every core, and a slow reader does not hold the others
 * up at the end. */
static int load_link(rctx *c, tbl *t, uint64_t ck, const manifest_table *rec)
{
	/* A reader for every two blocks, up to READERS; eight ranges a
	 * reader, or a block each where there are fewer blocks. */
	uint32_t nw = rec->blocks / 2 > READERS ? READERS : rec->blocks / 2 ? (uint32_t)(rec->blocks / 2) : 1;
	uint64_t next = 0, ranges = rec->blocks < 8 * nw ? (rec->blocks ? rec->blocks : 1) : 8 * nw;
	rworker w[READERS];
	pthread_t th[READERS];
	bool started[READERS] = { false };
	uint64_t *hashes = emdb_malloc((rec->blocks ? rec->blocks : 1) * 8);
	if (!hashes)
		return EMDB_ERR_NOMEM;
	memset(w, 0, sizeof(w));
	for (uint32_t i = 0; i < nw; i++)
		w[i] = (rworker){ .c = c, .t = t, .ck = ck, .rec = rec, .next = &next, .ranges = ranges,
				  .hashes = hashes };
	for (uint32_t i = 1; i < nw; i++)
		started[i] = pthread_create(&th[i], NULL, read_ranges, &w[i]) == 0;
	read_ranges(&w[0]);
	for (uint32_t i = 1; i < nw; i++)
		if (started[i])
			pthread_join(th[i], NULL);
	int rc = EMDB_OK;
	uint64_t rows = 0, bytes = 0, hash = 0;
	for (uint32_t i = 0; i < nw; i++) {
		if (rc == EMDB_OK && w[i].rc != EMDB_OK)
			rc = emdb__seterr(w[i].rc, "%s", w[i].msg);
		rows += w[i].rows;
		bytes += w[i].bytes;
		rows_in_free(&w[i].in);
	}
	for (uint64_t b = 0; rc == EMDB_OK && b < rec->blocks; b++)
		hash = store_hash_chain(hash, hashes[b]);
	emdb_free(hashes);
	if (rc == EMDB_OK && (rows != rec->rows || bytes != rec->bytes || hash != rec->hash))
		rc = emdb__seterr(EMDB_ERR_CORRUPT,
				  "checkpoint %llu, table %u: found %llu rows in %llu bytes, the manifest says %llu in %llu (or their checksums differ)",
				  (unsigned long long)ck, rec->id, (unsigned long long)rows,
				  (unsigned long long)bytes, (unsigned long long)rec->rows,
				  (unsigned long long)rec->bytes);
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
	rc = dit_presize(t->index, fin->rows_total);
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
	emdb_free(c.out);
	for (uint32_t l = 0; l < c.len; l++)
		manifest_free(&c.chain[l]);
	emdb_free(c.chain);
	return rc;
}
