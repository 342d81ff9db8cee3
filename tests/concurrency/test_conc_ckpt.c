/*
 * test_conc_ckpt.c - checkpoints while the database is in use: a trainer
 * pushes and updates (also in one call), a reader pulls, an inserter prefetches new IDs, and
 * checkpoints (full and incremental) run meanwhile.  Every checkpoint must
 * restore to one step exactly, reads are never torn, and Updates never
 * stop for the length of a checkpoint.  Runs under ThreadSanitizer too
 * (tests/lib/plain_runner.h).
 */
#define _GNU_SOURCE /* tests/lib/tmpdir.h: nftw */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <emdb/checkpoint.h>
#include <emdb/db.h>

#include "tests/lib/helpers.h"
#include "tests/lib/tmpdir.h"

#define ROWS 20000
#define DIM 8
#define BATCH 4000

typedef struct shared {
	emdb_db *db;
	uint32_t tab, grow;
	atomic_int stop;
	atomic_int torn;         /* a pull saw rows from different steps */
	atomic_ullong steps;
	atomic_ullong inserted;
} shared;

static uint64_t rid(uint64_t i)
{
	return scramble(i) | 1; /* anything but a dense range */
}

/* Every step adds -0.5 to every element of every row: after step s each
 * value is exactly -0.5 * s.  Every other step ends with its last batch
 * pushed and applied in one call (emdb_push_update: the batch's rows
 * applied straight from the gradients, in the same pass as the rows
 * pushed before it), the others with a push and an Update. */
static void *trainer(void *arg)
{
	shared *s = arg;
	uint64_t *ids = malloc(BATCH * 8);
	float *g = malloc(BATCH * DIM * 4);
	for (int i = 0; i < BATCH * DIM; i++)
		g[i] = 1.0f;
	for (uint64_t step = 0; !atomic_load(&s->stop); step++) {
		int fused = 0;
		for (uint64_t b = 0; b < ROWS; b += BATCH) {
			for (uint64_t i = 0; i < BATCH; i++)
				ids[i] = rid(b + i);
			fused = step % 2 && b + BATCH >= ROWS;
			int rc = fused ? emdb_push_update(s->db, s->tab, ids, BATCH, DIM, g, NULL)
				       : emdb_push(s->db, s->tab, ids, BATCH, DIM, g);
			if (rc != EMDB_OK)
				atomic_store(&s->torn, 100);
		}
		if (!fused)
			emdb_update(s->db, s->tab, NULL);
		atomic_fetch_add(&s->steps, 1);
	}
	free(ids);
	free(g);
	return NULL;
}

static void *reader(void *arg)
{
	shared *s = arg;
	uint64_t *ids = malloc(1000 * 8);
	float *out = malloc(1000 * DIM * 4);
	uint64_t x = 7;
	while (!atomic_load(&s->stop)) {
		for (int i = 0; i < 1000; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			ids[i] = rid((x >> 33) % ROWS);
		}
		emdb_pull(s->db, s->tab, ids, 1000, DIM, out);
		for (int i = 0; i < 1000 * DIM; i++)
			if (out[i] != out[0])
				atomic_store(&s->torn, 1);
	}
	free(ids);
	free(out);
	return NULL;
}

/* New IDs keep arriving in a second table, with pushes and Updates. */
static void *inserter(void *arg)
{
	shared *s = arg;
	uint64_t ids[256];
	float g[256 * DIM];
	for (int i = 0; i < 256 * DIM; i++)
		g[i] = 0.25f;
	uint64_t next = 0;
	while (!atomic_load(&s->stop)) {
		if (next >= 200000) /* from here on existing rows only: checkpoints and lookups stay small */
			next = 0;
		for (int i = 0; i < 256; i++)
			ids[i] = rid(next++);
		emdb_ticket *t = NULL;
		if (emdb_prefetch(s->db, s->grow, ids, 256, &t) == EMDB_OK) {
			emdb_push_ticket(s->db, s->grow, t, DIM, g);
			emdb_ticket_free(t);
		}
		if (next % 2048 == 0)
			emdb_update(s->db, s->grow, NULL);
		if (next > atomic_load(&s->inserted))
			atomic_store(&s->inserted, next);
	}
	return NULL;
}

static void check_restored(emdb_store *st, uint64_t id, uint32_t tab, uint32_t grow)
{
	emdb_db *r = open_db(8);
	emdb_ckpt_info info;
	cr_assert_eq(emdb_restore(r, st, id, &info), 0, "restore %llu: %s", (unsigned long long)id,
		     emdb_last_error());
	emdb_table_info ti;
	cr_assert_eq(emdb_table_describe(r, tab, &ti), 0);
	cr_assert_eq(ti.stats.rows, ROWS);
	float want = -0.5f * (float)ti.stats.step;
	uint64_t *ids = malloc(ROWS * 8);
	float *v = malloc((size_t)ROWS * DIM * 4);
	for (uint64_t i = 0; i < ROWS; i++)
		ids[i] = rid(i);
	cr_assert_eq(emdb_lookup(r, tab, ids, ROWS, DIM, v, NULL), 0);
	for (size_t i = 0; i < (size_t)ROWS * DIM; i++)
		cr_assert_eq(v[i], want, "checkpoint %llu at step %llu: row %zu holds %g, not %g",
			     (unsigned long long)id, (unsigned long long)ti.stats.step, i / DIM, (double)v[i],
			     (double)want);
	/* The growing table: exactly the rows counted.  A Prefetch batch in
	 * flight at the switch may be in part (Prefetch never waits), so the
	 * rows are those inserted before that batch plus some of it. */
	cr_assert_eq(emdb_table_describe(r, grow, &ti), 0);
	uint64_t n = ti.stats.rows, span = n + 256;
	uint64_t *gids = malloc(span * 8);
	float *gv = malloc(span * DIM * 4);
	uint8_t *found = malloc(span);
	for (uint64_t i = 0; i < span; i++)
		gids[i] = rid(i);
	cr_assert_eq(emdb_lookup(r, grow, gids, span, DIM, gv, found), 0);
	uint64_t held = 0;
	for (uint64_t i = 0; i < span; i++) {
		held += found[i];
		if (i + 256 < n)
			cr_assert(found[i], "row %llu of %llu missing", (unsigned long long)i,
				  (unsigned long long)n);
	}
	cr_assert_eq(held, n);
	free(gids);
	free(gv);
	free(found);
	free(ids);
	free(v);
	emdb_db_close(r);
}

Test(conc_ckpt, checkpoints_while_training_are_consistent)
{
	char dir[] = "/tmp/emdb-cc-XXXXXX";
	cr_assert(mkdtemp(dir));
	emdb_store *st = NULL;
	cr_assert_eq(emdb_store_open(dir, &st), 0);
	shared s;
	memset(&s, 0, sizeof(s));
	s.db = open_db(8);
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	strcpy(c.name, "steady");
	c.dim = DIM;
	c.optimizer.lr = 0.5;
	cr_assert_eq(emdb_table_create(s.db, &c, &s.tab), 0);
	s.grow = make_table(s.db, "growing", DIM, EMDB_OPT_ADAM, EMDB_INIT_UNIFORM, -1, 1);
	{ /* all ROWS exist before training starts */
		uint64_t *ids = malloc(ROWS * 8);
		for (uint64_t i = 0; i < ROWS; i++)
			ids[i] = rid(i);
		emdb_ticket *t;
		cr_assert_eq(emdb_prefetch(s.db, s.tab, ids, ROWS, &t), 0);
		emdb_ticket_free(t);
		free(ids);
	}
	pthread_t th[3];
	pthread_create(&th[0], NULL, trainer, &s);
	pthread_create(&th[1], NULL, reader, &s);
	pthread_create(&th[2], NULL, inserter, &s);

	uint64_t ids[6];
	for (int k = 0; k < 6; k++) {
		uint64_t before = atomic_load(&s.steps);
		emdb_ckpt_info info;
		int rc = emdb_checkpoint(s.db, st, k % 3 ? EMDB_CKPT_INCREMENTAL : EMDB_CKPT_FULL, &info);
		cr_assert_eq(rc, 0, "checkpoint %d: %s", k, emdb_last_error());
		ids[k] = info.id;
		/* wait for a couple of steps so each link sees changes; sleep
		 * while waiting: a spinning wait took a core from the trainer */
		while (atomic_load(&s.steps) < before + 2)
			nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
	atomic_store(&s.stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(atomic_load(&s.torn), 0, "a pull saw a torn or mixed state");
	for (int k = 0; k < 6; k++)
		check_restored(st, ids[k], s.tab, s.grow);
	emdb_db_close(s.db);
	emdb_store_close(st);
	cr_assert_eq(tmpdir_remove(dir), 0, "%s is still there", dir);
}
