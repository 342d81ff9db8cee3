/*
 * checkpoint/cluster_restore.c - one node's restore of a cluster
 * checkpoint (cman_restore, checkpoint/cluster_ckpt.h): every part read,
 * the rows this node's partition map gives it kept, then swapped in.
 *
 * Invariants:
 *   1. The database is not touched before the swap: the new tables are
 *      private until db_replace_tables publishes them at once; any failure
 *      before frees them and changes nothing (as restore.c).
 *   2. Nothing unchecked is kept: each part is restored whole into a
 *      private engine by emdb_restore (every manifest and block checksum,
 *      every count), after its identity was compared with the checksum
 *      the cluster manifest recorded for it; parts must agree on every
 *      table (id, name, dim, optimizer) and its step, and each table's
 *      step must be the manifest's.
 *   3. A kept row is its vector and its optimizer state, byte for byte;
 *      every ID belongs to exactly one old part (one owner), so no row is
 *      written twice.
 *   4. The restored database has no base for an incremental checkpoint
 *      (its rows came from other stores): the next one is full.
 *
 * State changes: the database's tables (swap) and db_ckpt(db)->last.
 */
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "checkpoint/cluster_ckpt.h"
#include "checkpoint/rows_in.h"
#include "db/db_int.h"

#define PAGE 65536

typedef struct stage {
	tbl **t;      /* [m->n_tables], by the manifest's table order */
	uint32_t n;
	rows_in in;   /* the kept rows' way into s->t */
} stage;

static void stage_free(stage *s, bool tables)
{
	for (uint32_t i = 0; tables && i < s->n; i++)
		if (s->t[i])
			table_release(s->t[i]);
	emdb_free(s->t);
	rows_in_free(&s->in);
}

static const cman_table *find_table(const cman *m, uint32_t id, uint32_t *at)
{
	for (uint32_t i = 0; i < m->n_tables; i++)
		if (m->tables[i].id == id) {
			*at = i;
			return &m->tables[i];
		}
	return NULL;
}

/* The rows of part r's table `id` (in private engine src) that keep
 * keeps, into s->t[at]. */
static int take_table(stage *s, emdb_db *src, uint32_t id, uint32_t at, cman_keep_fn keep, void *arg,
		      uint64_t *kept)
{
	tbl *t = s->t[at];
	uint32_t dim = t->dim, sf = t->state_floats;
	size_t width = (size_t)dim + sf;
	float *vecs = emdb_malloc((size_t)PAGE * dim * sizeof(float));
	float *state = emdb_malloc((size_t)PAGE * (sf ? sf : 1) * sizeof(float));
	float *rows = emdb_malloc((size_t)PAGE * width * sizeof(float));
	uint64_t *ids = emdb_malloc((size_t)PAGE * 8), *mine = emdb_malloc((size_t)PAGE * 8);
	int rc = vecs && state && rows && ids && mine ? EMDB_OK : emdb__seterr(EMDB_ERR_NOMEM, "a cluster restore");
	emdb_db_config dbc;
	emdb_db_get_config(src, &dbc);
	size_t page = dbc.max_batch < PAGE ? dbc.max_batch : PAGE;
	uint64_t cursor = 0;
	do {
		size_t n = 0;
		if (rc == EMDB_OK)
			rc = emdb_table_scan(src, id, cursor, page, dim, ids, vecs, sf ? state : NULL, &n, &cursor, NULL);
		size_t k = 0;
		for (size_t i = 0; rc == EMDB_OK && i < n; i++) {
			if (!keep(arg, ids[i]))
				continue;
			mine[k] = ids[i];
			memcpy(rows + k * width, vecs + i * dim, dim * sizeof(float));
			if (sf)
				memcpy(rows + k * width + dim, state + i * sf, sf * sizeof(float));
			k++;
		}
		if (rc == EMDB_OK)
			rc = rows_in_put(&s->in, t, mine, rows, k, width * sizeof(float));
		*kept += k;
	} while (rc == EMDB_OK && cursor);
	emdb_free(vecs);
	emdb_free(state);
	emdb_free(rows);
	emdb_free(ids);
	emdb_free(mine);
	return rc;
}

/* Part r: checked against the manifest, restored into a private engine,
 * its tables compared and its kept rows staged (invariant 2). */
static int take_part(stage *s, emdb_db *db, const char *dir, const cman *m, uint32_t r, cman_keep_fn keep,
		     void *arg, uint64_t *kept)
{
	const cman_part *p = &m->parts[r];
	char *pdir = cman_part_dir(dir, r);
	if (!pdir)
		return emdb__seterr(EMDB_ERR_NOMEM, "a cluster restore");
	emdb_store_options so = EMDB_STORE_OPTIONS_INIT;
	so.read_only = 1;
	emdb_store *st = NULL;
	emdb_db *src = NULL;
	emdb_ckpt_info info;
	emdb_db_config dbc;
	emdb_db_get_config(db, &dbc);
	int rc = emdb_store_open_ex(pdir, &so, &st);
	if (rc == EMDB_OK && (rc = emdb_store_get(st, p->part, &info)) != EMDB_OK)
		rc = EMDB_ERR_CORRUPT;
	if (rc == EMDB_OK && cman_part_sum(&info) != p->sum)
		rc = emdb__seterr(EMDB_ERR_CORRUPT, "checkpoint %llu in %s is not the part the manifest names",
				  (unsigned long long)p->part, pdir);
	if (rc == EMDB_OK)
		rc = emdb_db_open(&dbc, &src);
	if (rc == EMDB_OK)
		rc = emdb_restore(src, st, p->part, &info);
	if (rc != EMDB_OK) {
		char why[1024];
		snprintf(why, sizeof(why), "%s", emdb_last_error());
		rc = emdb__seterr(rc == EMDB_ERR_NOMEM || rc == EMDB_ERR_LIMIT ? rc : EMDB_ERR_CORRUPT,
				  "part of rank %u (checkpoint %llu in %s): %s", r, (unsigned long long)p->part, pdir,
				  why);
	}
	emdb_store_close(st);
	uint32_t ids[CMAN_TABLES_MAX > 4096 ? 4096 : CMAN_TABLES_MAX];
	size_t nt = 0;
	if (rc == EMDB_OK && (rc = emdb_table_list(src, ids, 4096, &nt)) == EMDB_OK && nt != m->n_tables)
		rc = emdb__seterr(EMDB_ERR_CORRUPT, "part of rank %u holds %zu tables, the manifest %u", r, nt,
				  m->n_tables);
	for (size_t i = 0; rc == EMDB_OK && i < nt; i++) {
		uint32_t at;
		const cman_table *ct = find_table(m, ids[i], &at);
		emdb_table_info ti;
		if ((rc = emdb_table_describe(src, ids[i], &ti)))
			break;
		const emdb_table_config cfg = ti.config;
		const emdb_table_stats ts = ti.stats;
		if (!ct || ts.step != ct->step) {
			rc = emdb__seterr(EMDB_ERR_CORRUPT, "part of rank %u: table '%s' (%u) at step %llu, the manifest %s",
					  r, cfg.name, ids[i], (unsigned long long)ts.step,
					  ct ? "names another step" : "does not name it");
			break;
		}
		tbl *t = s->t[at];
		if (!t) {
			if ((rc = table_create(&cfg, ids[i], &dbc, &s->t[at])) != EMDB_OK)
				break;
			s->t[at]->step = ct->step;
		} else if (strcmp(t->cfg.name, cfg.name) || t->dim != cfg.dim ||
			   t->cfg.optimizer.kind != cfg.optimizer.kind) {
			rc = emdb__seterr(EMDB_ERR_CORRUPT, "parts disagree on table %u: '%s' in one, '%s' in rank %u's",
					  ids[i], t->cfg.name, cfg.name, r);
			break;
		}
		rc = take_table(s, src, ids[i], at, keep, arg, kept);
	}
	emdb_db_close(src);
	emdb_free(pdir);
	return rc;
}

struct cman_staged {
	stage s;
	uint64_t rows;
};

void cman_discard(cman_staged *st)
{
	if (!st)
		return;
	stage_free(&st->s, true);
	emdb_free(st);
}

int cman_stage(emdb_db *db, const char *dir, const cman *m, cman_keep_fn keep, void *arg, cman_staged **out,
	       uint64_t *rows_out)
{
	*out = NULL;
	if (rows_out)
		*rows_out = 0;
	cman_staged *st = emdb_calloc(1, sizeof(*st));
	if (!st)
		return emdb__seterr(EMDB_ERR_NOMEM, "a cluster restore");
	stage *s = &st->s;
	s->n = m->n_tables;
	s->t = emdb_calloc(s->n ? s->n : 1, sizeof(*s->t));
	int rc = s->t ? EMDB_OK : emdb__seterr(EMDB_ERR_NOMEM, "a cluster restore");
	for (uint32_t r = 0; rc == EMDB_OK && r < m->nodes; r++)
		rc = take_part(s, db, dir, m, r, keep, arg, &st->rows);
	for (uint32_t i = 0; rc == EMDB_OK && i < s->n; i++) {
		if (!s->t[i]) /* with no part naming it: no node held one; cannot be */
			rc = emdb__seterr(EMDB_ERR_CORRUPT, "table %u of the manifest is in no part", m->tables[i].id);
		else
			s->t[i]->ck.base_rows = chunk_rows(&s->t[i]->rows);
	}
	if (rc) {
		cman_discard(st);
		return rc;
	}
	/* The scratch is not needed past here. */
	rows_in_free(&s->in);
	if (rows_out)
		*rows_out = st->rows;
	*out = st;
	return EMDB_OK;
}

int cman_swap(emdb_db *db, cman_staged *st)
{
	int rc = db_replace_tables(db, st->s.t, st->s.n);
	if (rc == EMDB_OK) {
		db_ckpt(db)->last = 0; /* invariant 4 */
		stage_free(&st->s, false);
		emdb_free(st);
	}
	return rc;
}

int cman_restore(emdb_db *db, const char *dir, const cman *m, cman_keep_fn keep, void *arg, uint64_t *rows_out)
{
	cman_staged *st;
	int rc = cman_stage(db, dir, m, keep, arg, &st, rows_out);
	if (rc == EMDB_OK && (rc = cman_swap(db, st)))
		cman_discard(st);
	return rc;
}
