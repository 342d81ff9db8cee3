/*
 * write.c - taking a checkpoint: the switch, the scan of the rows to
 * write, writing them as row blocks into one SST file, ingesting it, and
 * the manifest that makes the checkpoint visible.
 *
 * The switch holds every table's rows_lock and update_lock for writing at
 * once, so no Update is between its steps anywhere; for each table it
 * notes the step and the row count (rows are numbered densely in
 * allocation order), flips the dirty generation and installs the
 * copy-on-write store.  Nothing is copied there.  Afterwards each table's
 * index is walked to learn the ID of every row the checkpoint wants
 * (ids[r] by row number), and the rows are written in row-number order in
 * blocks, at most 1 MiB of rows read per rows_lock (read) hold, with the
 * copy kept by an Update preferred over the live row (segment.c).  A table of four
 * blocks or more is cut into up to 64 segments at block boundaries, each
 * its own SST file, which the job's thread and one helper thread (at
 * lower priority) claim one after another: the work is CPU-bound (copies
 * in RocksDB and in the kernel), and one core wrote at half the disk's
 * speed.  All files are ingested in one call.
 *
 * Invariants:
 *   1. Every row numbered below snap_rows is in the index by the time the
 *      scan visits its shard: a row number is taken and the row inserted
 *      and initialized under the same shard lock, which the scan takes
 *      after the switch.  So the rows below snap_rows are exactly the
 *      table's rows at the switch, and a full checkpoint writes snap_rows
 *      of them (checked).
 *   2. A row is written with its bytes at the switch: either no Update has
 *      touched it since (the live row, read under rows_lock), or the first
 *      Update to touch it kept a copy first (ckpt_track.h).
 *   3. Nothing is visible before the manifest; on any failure the
 *      temporary files are removed, ingested rows are dropped, and the dirty
 *      marks of the failed checkpoint are merged back so the next
 *      incremental one still includes those rows.
 *
 * State changes: tables' ck fields (switch and end, holding rows_lock for
 * writing); the store (ingest, manifest); db_ckpt(db)->last on success.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <emdb/alloc.h>

#include "base/alloc_int.h"
#include "base/error_int.h"
#include "checkpoint/job_int.h"
#include "checkpoint/segment.h"
#include "checkpoint/store_int.h"
#include "db/db_int.h"


typedef struct wtable {
	tbl *t;
	ckpt_cow *cow;
	uint64_t snap_rows;
	uint64_t step;
	emdb_table_config cfg; /* at the switch: hyperparameters in force at step */
	bool delta;            /* only changed rows, relative to the parent */
	uint64_t *ids;         /* [snap_rows] by row number (mapped lazily)  */
	uint64_t wanted;       /* rows the scan found to write              */
	manifest_table rec;
} wtable;

typedef struct wctx {
	emdb_job *job;
	emdb_store *st;
	uint64_t id;
	wtable *w;
	uint32_t n;
	ckpt_seg *segs;        /* [COW_SEGS_MAX * n]: the segments written so far */
	uint32_t n_segs;
	bool ingested;
} wctx;

static int cmp_tbl(const void *a, const void *b)
{
	uint32_t x = (*(tbl *const *)a)->id, y = (*(tbl *const *)b)->id;
	return x < y ? -1 : x > y;
}

/* ---- switch ---------------------------------------------------------- */

static void do_switch(wctx *c, uint64_t parent)
{
	uint64_t t0 = emdb__now_ns();
	for (uint32_t i = 0; i < c->n; i++) {
		pthread_rwlock_wrlock(&c->w[i].t->rows_lock);
		pthread_rwlock_wrlock(&c->w[i].t->update_lock);
	}
	for (uint32_t i = 0; i < c->n; i++) {
		wtable *w = &c->w[i];
		tbl *t = w->t;
		w->step = t->step;
		w->cfg = t->cfg; /* emdb_table_alter needs rows_lock: stable here */
		w->snap_rows = chunk_rows(&t->rows);
		w->delta = parent && t->ck.base_ckpt == parent;
		w->cow->snap_rows = w->snap_rows;
		w->cow->base_rows = w->delta ? t->ck.base_rows : 0;
		w->cow->old_gen = t->ck.gen;
		t->ck.gen ^= 1;
		t->ck.cow = w->cow;
	}
	for (uint32_t i = c->n; i-- > 0;) {
		pthread_rwlock_unlock(&c->w[i].t->update_lock);
		pthread_rwlock_unlock(&c->w[i].t->rows_lock);
	}
	JOB_SET(c->job, switch_ns, emdb__now_ns() - t0);
}

/* Detach the copy-on-write stores; on success forget the old dirty
 * generation and move each table's base, on failure merge it back. */
static void end_tables(wctx *c, bool ok)
{
	for (uint32_t i = 0; i < c->n; i++) {
		wtable *w = &c->w[i];
		tbl *t = w->t;
		if (!w->cow)
			continue;
		pthread_rwlock_wrlock(&t->rows_lock);
		if (t->ck.cow == w->cow) {
			t->ck.cow = NULL;
			uint32_t old = w->cow->old_gen, cur = t->ck.gen;
			uint64_t chunks = chunk_count(&t->rows);
			for (uint64_t k = 0; k < chunks; k++) {
				uint64_t *o = chunk_marks(&t->rows, (uint32_t)k, old);
				uint64_t *nw = chunk_marks(&t->rows, (uint32_t)k, cur);
				for (uint32_t x = 0; x < t->rows.mark_words; x++) {
					if (!ok && o[x])
						__atomic_fetch_or(&nw[x], o[x], __ATOMIC_RELAXED);
					o[x] = 0;
				}
			}
			if (ok) {
				t->ck.base_ckpt = c->id;
				t->ck.base_rows = w->snap_rows;
			}
		}
		pthread_rwlock_unlock(&t->rows_lock);
	}
}

/* ---- scan ------------------------------------------------------------ */

static int scan_visit(void *ctx, uint64_t id, uint64_t loc)
{
	wtable *w = ctx;
	uint64_t r = chunk_row_number(&w->t->rows, loc);
	if (ckpt_cow_wants(w->cow, &w->t->rows, r, loc)) {
		w->ids[r] = id;
		w->wanted++;
	}
	return 0;
}

static int scan_table(wctx *c, wtable *w)
{
	if (w->snap_rows) {
		w->ids = emdb_map(w->snap_rows * sizeof(uint64_t));
		if (!w->ids)
			return EMDB_ERR_NOMEM;
		/* The walk writes ids[] in random order holding each shard's
		 * read lock: write the memory once first, holding nothing, or
		 * the walk of the first shard pays for all of it (80 MB of
		 * first-touch memory at 10M rows, 130-190 ms on this VM) while
		 * pushes and prefetches of new IDs wait for that shard.  Not
		 * emdb_map_populate: while it ran, an Update stalled as long
		 * (the kernel's mmap lock, which the Update's allocations need,
		 * is held through it). */
		memset(w->ids, 0, w->snap_rows * sizeof(uint64_t));
	}
	dit_foreach(w->t->index, scan_visit, w);
	if (!w->delta && w->wanted != w->snap_rows)
		return emdb__seterr(EMDB_ERR_INTERNAL, "table '%s': %llu rows numbered, %llu found in the index",
				    w->t->cfg.name, (unsigned long long)w->snap_rows,
				    (unsigned long long)w->wanted);
	size_t rf = w->t->dim + w->t->state_floats;
	JOB_ADD(c->job, rows_total, w->wanted);
	JOB_ADD(c->job, bytes_total, w->wanted * (8 + rf * 4));
	return EMDB_OK;
}

/* ---- write ----------------------------------------------------------- */

/* Cut a table into nseg segments of whole blocks: bound[i] is the first
 * row of segment i, first[i] its first block. */
static void cut_segments(const wtable *w, uint32_t per_block, uint64_t blocks, uint32_t nseg,
			 uint64_t *bound, uint64_t *first)
{
	for (uint32_t i = 0; i < nseg; i++)
		first[i] = blocks * i / nseg;
	bound[0] = 0;
	bound[nseg] = w->snap_rows;
	if (!w->delta) { /* every row is wanted */
		for (uint32_t i = 1; i < nseg; i++)
			bound[i] = first[i] * per_block;
		return;
	}
	uint64_t seen = 0;
	uint32_t i = 1;
	for (uint64_t r = 0; r < w->snap_rows && i < nseg; r++) {
		if (!ckpt_cow_wants(w->cow, &w->t->rows, r, chunk_loc_of(&w->t->rows, r)))
			continue;
		if (seen++ == first[i] * per_block)
			bound[i++] = r;
	}
	while (i < nseg)
		bound[i++] = w->snap_rows;
}

typedef struct seg_claims {
	ckpt_seg *sg;
	uint32_t n;
	uint32_t next; /* atomic */
} seg_claims;

static void write_claims(seg_claims *q)
{
	uint32_t i;
	while ((i = __atomic_fetch_add(&q->next, 1, __ATOMIC_RELAXED)) < q->n)
		ckpt_seg_write(&q->sg[i]);
}

static void *helper(void *arg)
{
	ckpt_seg_lower_priority();
	write_claims(arg);
	return NULL;
}

/* Write one table: a table of four blocks or more as up to COW_SEGS_MAX
 * segments of whole blocks, each its own SST file, claimed one after
 * another by the job's thread and a helper thread. */
static int write_table(wctx *c, wtable *w)
{
	tbl *t = w->t;
	uint32_t per_block = ckpt_rows_per_block(t->dim + t->state_floats);
	uint64_t blocks = (w->wanted + per_block - 1) / per_block;
	uint64_t *hashes = emdb_malloc((blocks ? blocks : 1) * 8);
	if (!hashes)
		return EMDB_ERR_NOMEM;
	/* Segments of 8 blocks or more, two at least from 4 blocks on. */
	uint32_t nseg = blocks < 4 ? 1 : blocks < 16 ? 2 : blocks / 8 < COW_SEGS_MAX ? (uint32_t)(blocks / 8) : COW_SEGS_MAX;
	uint64_t bound[COW_SEGS_MAX + 1], first[COW_SEGS_MAX];
	cut_segments(w, per_block, blocks, nseg, bound, first);
	ckpt_seg *sg = &c->segs[c->n_segs];
	c->n_segs += nseg;
	for (uint32_t i = 0; i < nseg; i++)
		sg[i] = (ckpt_seg){ .job = c->job, .st = c->st, .ckpt = c->id, .t = t, .cow = w->cow,
				    .ids = w->ids, .r0 = bound[i], .r1 = bound[i + 1], .which = i,
				    .first_block = first[i], .hashes = hashes };
	/* Publish the segments to Updates (they read them under rows_lock). */
	pthread_rwlock_wrlock(&t->rows_lock);
	for (uint32_t i = 0; i < nseg; i++) {
		w->cow->bound[i] = bound[i];
		__atomic_store_n(&w->cow->cursor[i], bound[i], __ATOMIC_RELAXED);
	}
	w->cow->bound[nseg] = UINT64_MAX;
	w->cow->nseg = nseg;
	pthread_rwlock_unlock(&t->rows_lock);

	seg_claims q = { sg, nseg, 0 };
	pthread_t th;
	bool threaded = nseg > 1 && pthread_create(&th, NULL, helper, &q) == 0;
	write_claims(&q);
	if (threaded)
		pthread_join(th, NULL);
	int rc = EMDB_OK;
	for (uint32_t i = 0; i < nseg; i++) {
		if (rc == EMDB_OK && sg[i].rc != EMDB_OK)
			rc = emdb__seterr(sg[i].rc, "%s", sg[i].msg);
		if (rc == EMDB_OK && i + 1 < nseg && sg[i].blocks != first[i + 1] - first[i])
			rc = emdb__seterr(EMDB_ERR_INTERNAL, "table '%s': segment %u wrote %llu blocks, not %llu",
					  t->cfg.name, i, (unsigned long long)sg[i].blocks,
					  (unsigned long long)(first[i + 1] - first[i]));
		w->rec.blocks += sg[i].blocks;
		w->rec.rows += sg[i].rows;
		w->rec.bytes += sg[i].bytes;
	}
	if (rc == EMDB_OK && (w->rec.blocks != blocks || w->rec.rows != w->wanted))
		rc = emdb__seterr(EMDB_ERR_INTERNAL,
				  "table '%s': wrote %llu rows in %llu blocks, expected %llu in %llu",
				  t->cfg.name, (unsigned long long)w->rec.rows, (unsigned long long)w->rec.blocks,
				  (unsigned long long)w->wanted, (unsigned long long)blocks);
	for (uint64_t b = 0; rc == EMDB_OK && b < blocks; b++)
		w->rec.hash = store_hash_chain(w->rec.hash, hashes[b]);
	emdb_free(hashes);
	return rc;
}

/* ---- the job --------------------------------------------------------- */

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Ingest every segment file at once, then the manifest. */
static int publish(wctx *c, const manifest *m)
{
	int rc = EMDB_OK;
	const char **paths = emdb_malloc((c->n_segs ? c->n_segs : 1) * sizeof(*paths));
	if (!paths)
		return EMDB_ERR_NOMEM;
	size_t n = 0;
	for (uint32_t i = 0; i < c->n_segs; i++)
		if (c->segs[i].path)
			paths[n++] = c->segs[i].path;
	if (n) {
		rc = store_ingest(c->st, paths, n);
		c->ingested = rc == EMDB_OK;
	}
	emdb_free(paths);
	if (rc == EMDB_OK)
		rc = store_publish(c->st, m);
	return rc;
}

static int prepare(wctx *c, emdb_job *job, manifest *parent)
{
	db_ckpt_state *ck = db_ckpt(job->db);
	memset(parent, 0, sizeof(*parent));
	if (job->kind == EMDB_CKPT_INCREMENTAL) {
		if (!ck->last || memcmp(ck->store_uuid, c->st->hdr.uuid, 16) != 0)
			return emdb__seterr(EMDB_ERR_INVALID,
					    "no previous checkpoint of this database in this store to extend: take a full checkpoint first");
		int rc = store_manifest(c->st, ck->last, parent);
		if (rc != EMDB_OK)
			return rc == EMDB_ERR_INVALID
				       ? emdb__seterr(EMDB_ERR_INVALID,
						      "the previous checkpoint (%llu) was deleted: take a full checkpoint first",
						      (unsigned long long)ck->last)
				       : rc;
	}
	tbl **v;
	int rc = db_tables_snapshot(job->db, &v, &c->n);
	if (rc != EMDB_OK)
		return rc;
	qsort(v, c->n, sizeof(*v), cmp_tbl);
	c->w = emdb_calloc(c->n ? c->n : 1, sizeof(*c->w));
	c->segs = emdb_calloc(COW_SEGS_MAX * (size_t)(c->n ? c->n : 1), sizeof(*c->segs));
	rc = c->w && c->segs ? EMDB_OK : EMDB_ERR_NOMEM;
	for (uint32_t i = 0; i < c->n; i++) {
		if (c->w)
			c->w[i].t = v[i];
		else
			table_release(v[i]);
	}
	emdb_free(v);
	for (uint32_t i = 0; rc == EMDB_OK && i < c->n; i++) {
		tbl *t = c->w[i].t;
		c->w[i].cow = ckpt_cow_create(((size_t)t->dim + t->state_floats) * 4, &job->cow_rows);
		if (!c->w[i].cow)
			rc = EMDB_ERR_NOMEM;
	}
	if (rc == EMDB_OK)
		rc = store_take_id(c->st, &c->id);
	return rc;
}

static void cleanup(wctx *c, bool ok)
{
	if (c->w)
		end_tables(c, ok);
	for (uint32_t i = 0; i < c->n_segs; i++)
		ckpt_seg_cleanup(&c->segs[i]);
	if (!ok && c->id)
		store_abandon(c->st, c->id, c->ingested);
	for (uint32_t i = 0; c->w && i < c->n; i++) {
		wtable *w = &c->w[i];
		if (w->ids)
			emdb_unmap(w->ids, w->snap_rows * sizeof(uint64_t));
		ckpt_cow_destroy(w->cow);
		table_release(w->t);
	}
	emdb_free(c->w);
	emdb_free(c->segs);
}

static void fill_record(wtable *w)
{
	manifest_table *rec = &w->rec;
	rec->id = w->t->id;
	rec->flags = w->delta ? 0 : MANIFEST_TABLE_FULL;
	rec->step = w->step;
	rec->rows_total = w->snap_rows; /* invariant 1: rows are dense */
	rec->state_floats = w->t->state_floats;
	rec->cfg = w->cfg;
}

int ckpt_write_run(emdb_job *job, emdb_ckpt_info *info)
{
	wctx c;
	manifest parent, m;
	memset(&c, 0, sizeof(c));
	memset(&m, 0, sizeof(m));
	c.job = job;
	c.st = job->st;
	JOB_SET(job, phase, EMDB_PHASE_SWITCH);
	int rc = prepare(&c, job, &parent);
	if (rc == EMDB_OK) {
		JOB_SET(job, ckpt_id, c.id);
		do_switch(&c, parent.info.id);
	}
	uint64_t t0 = emdb__now_ns();
	uint64_t created = now_ms();
	JOB_SET(job, phase, EMDB_PHASE_SCAN);
	for (uint32_t i = 0; rc == EMDB_OK && i < c.n; i++)
		rc = scan_table(&c, &c.w[i]);
	JOB_SET(job, phase, EMDB_PHASE_WRITE);
	for (uint32_t i = 0; rc == EMDB_OK && i < c.n; i++) {
		rc = write_table(&c, &c.w[i]);
		fill_record(&c.w[i]);
	}
	JOB_SET(job, phase, EMDB_PHASE_SYNC);
	if (rc == EMDB_OK) {
		m.tables = emdb_calloc(c.n ? c.n : 1, sizeof(*m.tables));
		if (!m.tables)
			rc = EMDB_ERR_NOMEM;
	}
	if (rc == EMDB_OK) {
		emdb_ckpt_info *in = &m.info;
		in->id = c.id;
		in->kind = (emdb_ckpt_kind)job->kind;
		in->parent = parent.info.id;
		in->base = parent.info.id ? parent.info.base : c.id;
		in->created_ms = created;
		in->tables = c.n;
		for (uint32_t i = 0; i < c.n; i++) {
			m.tables[i] = c.w[i].rec;
			in->rows += m.tables[i].rows;
			in->rows_total += m.tables[i].rows_total;
			in->bytes += m.tables[i].bytes;
			if (m.tables[i].step > in->max_step)
				in->max_step = m.tables[i].step;
		}
		in->duration_ms = (emdb__now_ns() - t0) / 1000000;
		rc = publish(&c, &m);
	}
	if (rc == EMDB_OK) {
		db_ckpt_state *ck = db_ckpt(job->db);
		ck->last = c.id;
		memcpy(ck->store_uuid, c.st->hdr.uuid, 16);
		*info = m.info;
	}
	cleanup(&c, rc == EMDB_OK);
	manifest_free(&m);
	manifest_free(&parent);
	return rc;
}
