/*
 * test_scan.c - a table's rows out and in (emdb_table_scan,
 * emdb_table_load): a scan in pages returns every row exactly once, IDs 0
 * and 2^64-1 included, with its vector and optimizer state as Lookup and
 * read_state give them, also when rows are inserted and Updates run
 * between pages; a load writes vectors and state that read back bit for
 * bit, keeps a row's last copy when an ID repeats, leaves state alone
 * without one, lets pending gradients apply on top, and reaches the next
 * incremental checkpoint; refusals change nothing.
 */
#define _GNU_SOURCE /* tests/lib/tmpdir.h: nftw */
#include <stdlib.h>
#include <string.h>

#include <emdb/checkpoint.h>
#include <emdb/db.h>

#include "tests/lib/helpers.h"
#include "tests/lib/tmpdir.h"

#define D 4
#define SF (2 * D) /* Adam */
#define NROWS 3000

static uint64_t id_of(size_t i)
{
	return i == 0 ? 0 : i == 1 ? UINT64_MAX : scramble(i);
}

/* Rows id_of(0 .. n) with a step of gradients, so state is not zero. */
static void fill(emdb_db *db, uint32_t t, size_t from, size_t n)
{
	uint64_t *ids = malloc(n * 8);
	float *g = malloc(n * D * 4);
	for (size_t i = 0; i < n; i++) {
		ids[i] = id_of(from + i);
		for (int k = 0; k < D; k++)
			g[i * D + k] = (float)((i + (size_t)k) % 7) * 0.25f - 0.75f;
	}
	cr_assert_eq(emdb_push(db, t, ids, n, D, g), 0, "%s", emdb_last_error());
	cr_assert_eq(emdb_update(db, t, NULL), 0);
	free(ids);
	free(g);
}

typedef struct seen {
	uint64_t *ids;
	size_t n, cap;
} seen;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* One page: every row it gives must be the table's row now. */
static uint64_t page(emdb_db *db, uint32_t t, uint64_t cursor, size_t max, seen *s, uint64_t *step)
{
	uint64_t ids[256], next = 77;
	float v[256 * D], st[256 * SF], v2[256 * D], st2[256 * SF];
	size_t n = 9999;
	cr_assert_leq(max, 256);
	cr_assert_eq(emdb_table_scan(db, t, cursor, max, D, ids, v, st, &n, &next, step), 0, "%s",
		     emdb_last_error());
	cr_assert_leq(n, max);
	if (n) {
		uint8_t found[256];
		cr_assert_eq(emdb_lookup(db, t, ids, n, D, v2, found), 0);
		cr_assert_eq(emdb_read_state(db, t, ids, n, st2, NULL), 0);
		for (size_t i = 0; i < n; i++)
			cr_assert(found[i], "scan gave ID %llu, which the table lacks", (unsigned long long)ids[i]);
		cr_assert_eq(memcmp(v, v2, n * D * 4), 0, "vectors differ from Lookup's");
		cr_assert_eq(memcmp(st, st2, n * SF * 4), 0, "state differs from read_state's");
	}
	for (size_t i = 0; i < n; i++) {
		if (s->n == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 1024;
			s->ids = realloc(s->ids, s->cap * 8);
		}
		s->ids[s->n++] = ids[i];
	}
	return next;
}

/* Sorted, no ID twice; every id_of(0 .. want) there. */
static void exactly_once(seen *s, size_t want)
{
	qsort(s->ids, s->n, 8, cmp_u64);
	for (size_t i = 1; i < s->n; i++)
		cr_assert_neq(s->ids[i], s->ids[i - 1], "ID %llu returned twice", (unsigned long long)s->ids[i]);
	for (size_t i = 0; i < want; i++) {
		uint64_t id = id_of(i);
		cr_assert_not_null(bsearch(&id, s->ids, s->n, 8, cmp_u64), "ID %llu never returned",
				   (unsigned long long)id);
	}
}

Test(scan, every_row_exactly_once_in_pages)
{
	emdb_db *db = open_db(16);
	uint32_t t = make_table(db, "s", D, EMDB_OPT_ADAM, EMDB_INIT_UNIFORM, -1, 1);
	fill(db, t, 0, NROWS);
	seen s = { 0 };
	uint64_t cursor = 0, step = 0;
	int pages = 0;
	do {
		cursor = page(db, t, cursor, 97, &s, &step);
		cr_assert_eq(step, 1, "the page's step");
		cr_assert_lt(++pages, 1000, "the scan does not end");
	} while (cursor);
	cr_assert_eq(pages, (NROWS + 96) / 97);
	cr_assert_eq(s.n, NROWS);
	exactly_once(&s, NROWS);
	free(s.ids);

	/* Without state: the vectors alone, the same IDs. */
	uint64_t ids[256], next;
	float v[256 * D];
	size_t n;
	cr_assert_eq(emdb_table_scan(db, t, 0, 256, D, ids, v, NULL, &n, &next, NULL), 0);
	cr_assert_eq(n, 256);
	cr_assert_eq(next, 256);
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.calls_pull, 0, "a scan counted as a Pull");
	emdb_db_close(db);
}

/* Rows inserted and Updates run between pages: every row present from
 * the start still comes exactly once; no ID ever comes twice. */
Test(scan, exactly_once_while_training_goes_on)
{
	emdb_db *db = open_db(16);
	uint32_t t = make_table(db, "s", D, EMDB_OPT_ADAM, EMDB_INIT_UNIFORM, -1, 1);
	fill(db, t, 0, NROWS);
	seen s = { 0 };
	uint64_t cursor = 0, step = 0, last = 0;
	int pages = 0;
	do {
		cursor = page(db, t, cursor, 200, &s, &step);
		cr_assert_geq(step, last, "steps go back");
		last = step;
		if (pages < 10)
			fill(db, t, NROWS + (size_t)pages * 100, 150); /* 100 new IDs, 50 held ones */
		cr_assert_lt(++pages, 1000);
	} while (cursor);
	cr_assert_geq(s.n, NROWS);
	exactly_once(&s, NROWS);
	free(s.ids);
	emdb_db_close(db);
}

Test(scan, refusals)
{
	emdb_db *db = open_db(4);
	uint32_t t = make_table(db, "s", D, EMDB_OPT_ADAM, EMDB_INIT_ZEROS, 0, 0);
	uint64_t ids[8], next = 5;
	float v[8 * D], st[8 * SF];
	size_t n = 5;
	/* An empty table: one empty page, and the scan is over. */
	cr_assert_eq(emdb_table_scan(db, t, 0, 8, D, ids, v, st, &n, &next, NULL), 0);
	cr_assert_eq(n, 0);
	cr_assert_eq(next, 0);
	fill(db, t, 0, 20);
	cr_assert_eq(emdb_table_scan(db, t, 21, 8, D, ids, v, st, &n, &next, NULL), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "scan again from 0"), "%s", emdb_last_error());
	cr_assert_eq(emdb_table_scan(db, t, 0, 8, D + 1, ids, v, st, &n, &next, NULL), EMDB_ERR_DIM);
	cr_assert_eq(emdb_table_scan(db, t, 0, 0, D, ids, v, st, &n, &next, NULL), EMDB_ERR_BATCH);
	cr_assert_eq(emdb_table_scan(db, t, 0, 8, D, NULL, v, st, &n, &next, NULL), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_table_scan(db, t + 1, 0, 8, D, ids, v, st, &n, &next, NULL), EMDB_ERR_NO_TABLE);
	cr_assert_eq(emdb_table_scan(db, t, 20, 8, D, ids, v, st, &n, &next, NULL), 0, "the end is a cursor");
	cr_assert_eq(n, 0);
	cr_assert_eq(next, 0);
	cr_assert_eq(emdb_table_load(db, t, ids, 0, D, v, NULL), EMDB_ERR_BATCH);
	cr_assert_eq(emdb_table_load(db, t, ids, 8, D + 1, v, NULL), EMDB_ERR_DIM);
	cr_assert_eq(emdb_table_load(db, t, NULL, 8, D, v, NULL), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_table_load(db, t, ids, 8, D, NULL, NULL), EMDB_ERR_INVALID);
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.rows, 20, "a refusal inserted rows");
	emdb_db_close(db);
}

Test(scan, load_then_read_back)
{
	emdb_db *db = open_db(4);
	uint32_t t = make_table(db, "l", D, EMDB_OPT_ADAM, EMDB_INIT_UNIFORM, -1, 1);
	fill(db, t, 0, 10); /* IDs 0..9 held, with state */
	uint64_t ids[6] = { id_of(3), 1000, UINT64_MAX, 0, 1000, 2000 };
	float v[6 * D], st[6 * SF];
	for (int k = 0; k < 6 * D; k++)
		v[k] = (float)k * 0.5f - 3;
	for (int k = 0; k < 6 * SF; k++)
		st[k] = (float)k * 0.01f;
	cr_assert_eq(emdb_table_load(db, t, ids, 6, D, v, st), 0, "%s", emdb_last_error());
	/* ID 1000 twice: its last row (position 4) stands. */
	uint64_t back[5] = { id_of(3), 1000, UINT64_MAX, 0, 2000 };
	int pos[5] = { 0, 4, 2, 3, 5 };
	float gv[5 * D], gs[5 * SF];
	uint8_t found[5];
	cr_assert_eq(emdb_lookup(db, t, back, 5, D, gv, found), 0);
	cr_assert_eq(emdb_read_state(db, t, back, 5, gs, NULL), 0);
	for (int i = 0; i < 5; i++) {
		cr_assert(found[i]);
		cr_assert_eq(memcmp(gv + i * D, v + pos[i] * D, D * 4), 0, "vector %d", i);
		cr_assert_eq(memcmp(gs + i * SF, st + pos[i] * SF, SF * 4), 0, "state %d", i);
	}
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.rows, 12, "10 held and 2 new IDs");
	cr_assert_eq(info.stats.step, 1, "a load is not a step");

	/* Vectors alone: held rows keep their state, new rows start at the
	 * initial state (zeros for Adam). */
	uint64_t two[2] = { id_of(5), 3000 };
	float s_before[SF], s2[2 * SF];
	cr_assert_eq(emdb_read_state(db, t, two, 1, s_before, NULL), 0);
	cr_assert_eq(emdb_table_load(db, t, two, 2, D, v, NULL), 0);
	cr_assert_eq(emdb_read_state(db, t, two, 2, s2, NULL), 0);
	cr_assert_eq(memcmp(s2, s_before, sizeof(s_before)), 0, "a load without state changed state");
	for (int k = 0; k < SF; k++)
		cr_assert_eq(s2[SF + k], 0.0f);
	emdb_db_close(db);
}

/* Gradients pushed before a load apply to the loaded rows at the next
 * Update (SGD with lr 1: the row is the loaded value minus them). */
Test(scan, pending_gradients_apply_on_top_of_a_load)
{
	emdb_db *db = open_db(4);
	uint32_t t = make_sgd_lr1_table(db, D);
	uint64_t id = 42;
	float g[D] = { 1, 2, 3, 4 }, v[D] = { 10, 20, 30, 40 }, got[D];
	cr_assert_eq(emdb_push(db, t, &id, 1, D, g), 0);
	cr_assert_eq(emdb_table_load(db, t, &id, 1, D, v, NULL), 0);
	cr_assert_eq(emdb_update(db, t, NULL), 0);
	cr_assert_eq(emdb_lookup(db, t, &id, 1, D, got, NULL), 0);
	for (int k = 0; k < D; k++)
		cr_assert_eq(got[k], v[k] - g[k]);
	emdb_db_close(db);
}

/* Loaded rows are changed rows: an incremental checkpoint carries them. */
Test(scan, an_incremental_checkpoint_carries_loaded_rows)
{
	char dir[] = "/tmp/emdb-scan-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	emdb_store *st = NULL;
	cr_assert_eq(emdb_store_open(dir, &st), 0, "%s", emdb_last_error());
	emdb_db *db = open_db(4);
	uint32_t t = make_table(db, "c", D, EMDB_OPT_ADAM, EMDB_INIT_UNIFORM, -1, 1);
	fill(db, t, 0, 500);
	cr_assert_eq(emdb_checkpoint(db, st, EMDB_CKPT_FULL, NULL), 0, "%s", emdb_last_error());
	uint64_t ids[3] = { id_of(7), id_of(300), 0 };
	float v[3 * D], sv[3 * SF];
	for (int k = 0; k < 3 * D; k++)
		v[k] = 100.0f + (float)k;
	for (int k = 0; k < 3 * SF; k++)
		sv[k] = 0.5f + (float)k;
	cr_assert_eq(emdb_table_load(db, t, ids, 3, D, v, sv), 0);
	emdb_ckpt_info inc;
	cr_assert_eq(emdb_checkpoint(db, st, EMDB_CKPT_INCREMENTAL, &inc), 0, "%s", emdb_last_error());
	cr_assert_eq(inc.kind, EMDB_CKPT_INCREMENTAL);

	emdb_db *db2 = open_db(4);
	cr_assert_eq(emdb_restore(db2, st, inc.id, NULL), 0, "%s", emdb_last_error());
	uint32_t t2;
	cr_assert_eq(emdb_table_find(db2, "c", &t2), 0);
	float gv[3 * D], gs[3 * SF];
	cr_assert_eq(emdb_lookup(db2, t2, ids, 3, D, gv, NULL), 0);
	cr_assert_eq(emdb_read_state(db2, t2, ids, 3, gs, NULL), 0);
	cr_assert_eq(memcmp(gv, v, sizeof(v)), 0, "the restored rows are not the loaded ones");
	cr_assert_eq(memcmp(gs, sv, sizeof(sv)), 0);
	emdb_db_close(db2);
	emdb_db_close(db);
	emdb_store_close(st);
	cr_assert_eq(tmpdir_remove(dir), 0);
}
