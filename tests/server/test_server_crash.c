/*
 * test_server_crash.c - crash safety of checkpoints, black box: an
 * emdb-server trains a table, starts a checkpoint, and is killed with
 * SIGKILL at a different moment of it each round (before, during the
 * switch, the write, the sync, after); it is then restarted with
 * `--restore latest` on the same data dir, and what it restored must be
 * exactly one complete checkpoint: the step of the newest checkpoint the
 * store lists, and every row and optimizer slot bit-identical to the state
 * the table had at that step.
 *
 * Rows come in cohorts that join at fixed steps (so the table grows from
 * 40k to 130k rows, and the checkpoints the kills land in have different
 * sizes); every row of a cohort receives the same gradients, so an
 * in-process engine training one row per cohort the same way (the mirror)
 * gives the exact bytes of every row at every step.  A row from
 * another step, a torn row or a missing row shows as a difference.
 * A second test has clients pushing, updating and pulling through the
 * server while checkpoints run: every Pull sees one step, and every
 * checkpoint restores to exactly its step.
 * Servers listen on loopback and a Unix socket (tests/lib/client_server.h)
 * and are killed by the test, also when it fails.
 */
#define _XOPEN_SOURCE 700
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/client.h>
#include <emdb/db.h>

#include "tests/lib/client_server.h"
#include "tests/lib/helpers.h"
#include "tests/lib/tmpdir.h"

#define ROWS 60000
#define DIM 32
#define STEPS_MAX 256
#define ROUNDS 9

static test_server srv;
static char data_dir[64];

#define OK(call) cr_assert_eq((call), EMDB_OK, "%s: %s", #call, emdb_client_last_error())


static void setup(void)
{
	strcpy(data_dir, "/tmp/emdb-crash-XXXXXX");
	cr_assert_not_null(mkdtemp(data_dir));
}

static void teardown(void)
{
	test_server_stop(&srv);
	if (data_dir[0])
		tmpdir_remove(data_dir);
}

/* Rows come in cohorts: cohort k is first pushed at step first_step[k]
 * and from then on at every step with every other row; so the table grows
 * between checkpoints and the state at step S is a function of S alone. */
#define COHORTS_MAX 12
typedef struct cohorts {
	uint32_t n;
	uint32_t first_step[COHORTS_MAX];
	uint64_t size[COHORTS_MAX];
	uint64_t *ids[COHORTS_MAX];
} cohorts;

static void cohorts_init(cohorts *co, uint32_t n, uint64_t size0, uint64_t grow, uint32_t every)
{
	co->n = n;
	for (uint32_t k = 0; k < n; k++) {
		co->first_step[k] = 1 + every * k;
		co->size[k] = size0 + grow * k;
		co->ids[k] = malloc(co->size[k] * sizeof(uint64_t));
		for (uint64_t i = 0; i < co->size[k]; i++)
			co->ids[k][i] = scramble((uint64_t)k * 10000000 + i);
	}
}

static void cohorts_free(cohorts *co)
{
	for (uint32_t k = 0; k < co->n; k++)
		free(co->ids[k]);
}

/* The mirror: one row per cohort, trained exactly like that cohort's rows
 * on the server; state[k][s] holds row k's vector and optimizer state
 * after step s. */
typedef struct mirror {
	emdb_db *db;
	uint32_t t;
	uint32_t sf;
	float state[COHORTS_MAX][STEPS_MAX + 1][DIM * 3];
} mirror;

static void grad_of(uint32_t step, float *g)
{
	for (int i = 0; i < DIM; i++)
		g[i] = (float)((int)((step * 7 + (uint32_t)i) % 11) - 5) / 8.0f;
}

static void mirror_init(mirror *m, const emdb_table_config *cfg, const cohorts *co)
{
	emdb_db_open(NULL, &m->db);
	cr_assert_eq(emdb_table_create(m->db, cfg, &m->t), 0);
	m->sf = emdb_optimizer_state_floats(cfg->optimizer.kind, DIM);
	float g[DIM];
	for (uint32_t s = 1; s <= STEPS_MAX; s++) {
		grad_of(s, g);
		for (uint32_t k = 0; k < co->n; k++) {
			uint64_t id = k + 1;
			if (co->first_step[k] <= s)
				cr_assert_eq(emdb_push(m->db, m->t, &id, 1, DIM, g), 0);
		}
		cr_assert_eq(emdb_update(m->db, m->t, NULL), 0);
		for (uint32_t k = 0; k < co->n; k++) {
			uint64_t id = k + 1;
			cr_assert_eq(emdb_lookup(m->db, m->t, &id, 1, DIM, m->state[k][s], NULL), 0);
			cr_assert_eq(emdb_read_state(m->db, m->t, &id, 1, m->state[k][s] + DIM, NULL), 0);
		}
	}
}

static emdb_client *connect_to(void)
{
	emdb_client *c = NULL;
	OK(emdb_client_connect(srv.unix_uri, NULL, &c));
	return c;
}

/* One training step on the server: the step's gradient to every row of
 * every cohort started by then. */
static void server_step(emdb_client *c, uint32_t t, uint32_t step, const cohorts *co)
{
	enum { B = 20000 };
	static float g[B * DIM];
	float one[DIM];
	grad_of(step, one);
	for (int i = 0; i < B; i++)
		memcpy(g + (size_t)i * DIM, one, sizeof(one));
	for (uint32_t k = 0; k < co->n; k++) {
		if (co->first_step[k] > step)
			continue;
		for (uint64_t b = 0; b < co->size[k]; b += B) {
			size_t n = co->size[k] - b < B ? co->size[k] - b : B;
			OK(emdb_client_push(c, t, co->ids[k] + b, n, DIM, g));
		}
	}
	OK(emdb_client_update(c, t, NULL));
}

/* The server's table must be exactly the mirror at its step: every row of
 * the cohorts started by then, each equal to its cohort's mirror row, and
 * no row of a later cohort.  Returns the step. */
static uint64_t check_state(emdb_client *c, uint32_t t, const mirror *m, const cohorts *co)
{
	emdb_table_info ti;
	OK(emdb_client_table_describe(c, t, &ti));
	uint64_t step = ti.stats.step, want_rows = 0;
	cr_assert_leq(step, STEPS_MAX);
	for (uint32_t k = 0; k < co->n; k++)
		if (co->first_step[k] <= step)
			want_rows += co->size[k];
	cr_assert_eq(ti.stats.rows, want_rows, "step %llu: %llu rows, expected %llu",
		     (unsigned long long)step, (unsigned long long)ti.stats.rows, (unsigned long long)want_rows);
	for (uint32_t k = 0; k < co->n; k++) {
		uint64_t n = co->size[k];
		bool alive = co->first_step[k] <= step;
		float *v = malloc((size_t)n * DIM * 4), *st = malloc((size_t)n * (m->sf ? m->sf : 1) * 4);
		uint8_t *found = malloc(n);
		OK(emdb_client_lookup(c, t, co->ids[k], n, DIM, v, found));
		if (alive)
			OK(emdb_client_read_state(c, t, co->ids[k], n, m->sf, st, NULL));
		for (uint64_t i = 0; i < n; i++) {
			cr_assert_eq(found[i], alive, "cohort %u row %llu: found %d at step %llu", k,
				     (unsigned long long)i, found[i], (unsigned long long)step);
			if (!alive)
				continue;
			cr_assert_eq(memcmp(v + i * DIM, m->state[k][step], DIM * 4), 0,
				     "cohort %u row %llu is not its step-%llu vector", k, (unsigned long long)i,
				     (unsigned long long)step);
			cr_assert_eq(memcmp(st + i * m->sf, m->state[k][step] + DIM, m->sf * 4), 0,
				     "cohort %u row %llu's optimizer state is not step %llu's", k,
				     (unsigned long long)i, (unsigned long long)step);
		}
		free(v);
		free(st);
		free(found);
	}
	return step;
}

static void start(bool restore)
{
	const char *argv[] = { "--data-dir", data_dir, "--restore", "latest", NULL };
	if (!restore)
		argv[2] = NULL;
	test_server_start(&srv, argv);
}

Test(server_crash, sigkill_during_checkpoints_leaves_one_complete_checkpoint,
     .init = setup, .fini = teardown, .timeout = 600)
{
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "crash");
	cfg.dim = DIM;
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ADAM, &cfg.optimizer), 0);
	cfg.init.kind = EMDB_INIT_ZEROS;
	cohorts co;
	cohorts_init(&co, 10, 40000, 2000, 3); /* 40k rows, then 2k, 4k, ... more every 3 steps */
	mirror *m = calloc(1, sizeof(*m));
	mirror_init(m, &cfg, &co);

	start(false);
	emdb_client *c = connect_to();
	uint32_t t;
	OK(emdb_client_table_create(c, &cfg, &t));
	server_step(c, t, 1, &co);
	OK(emdb_client_checkpoint(c, EMDB_CKPT_FULL, NULL));
	uint64_t step = 1;
	/* Kill delays in ms after the checkpoint request: from "not started"
	 * to "long done", so the kill lands in every phase some round. */
	static const int delay_ms[ROUNDS] = { 0, 2, 6, 15, 40, 80, 160, 280, 400 };
	int killed_running = 0;
	unsigned phases = 0;
	for (int r = 0; r < ROUNDS; r++) {
		for (int k = 0; k < 2; k++)
			server_step(c, t, (uint32_t)++step, &co);
		uint64_t job = 0;
		OK(emdb_client_checkpoint_start(c, r % 3 == 2 ? EMDB_CKPT_FULL : EMDB_CKPT_INCREMENTAL, &job));
		test_sleep_ms(delay_ms[r]);
		emdb_job_status js;
		if (emdb_client_job_status(c, job, &js) == EMDB_OK && js.state == EMDB_JOB_RUNNING) {
			killed_running++;
			phases |= 1u << js.progress.phase;
		}
		cr_log_info("round %d: kill after %d ms, job %s in phase %s", r, delay_ms[r],
			    js.state == EMDB_JOB_RUNNING ? "running" : "finished",
			    emdb_job_phase_name(js.progress.phase));
		kill(srv.pid, SIGKILL);
		emdb_client_close(c);
		while (waitpid(srv.pid, NULL, 0) < 0 && errno == EINTR)
			;
		srv.pid = 0;
		test_server_stop(&srv);

		start(true);
		c = connect_to();
		emdb_ckpt_info *list;
		size_t n;
		OK(emdb_client_checkpoint_list(c, &list, &n));
		cr_assert_gt(n, 0);
		uint64_t newest_step = list[n - 1].max_step;
		emdb_free(list);
		uint64_t got = check_state(c, t, m, &co);
		cr_assert_eq(got, newest_step, "round %d: restored step %llu, newest checkpoint holds %llu",
			     r, (unsigned long long)got, (unsigned long long)newest_step);
		cr_assert(got == step || got + 2 == step || got < step,
			  "round %d: restored step %llu is from the future (trained to %llu)", r,
			  (unsigned long long)got, (unsigned long long)step);
		step = got; /* training resumes from the restored step */
	}
	cr_assert_gt(killed_running, 0, "no kill landed while a checkpoint was running");
	cr_log_info("kills during a running checkpoint: %d, phases 0x%x", killed_running, phases);
	/* The store is still healthy: a last checkpoint, a clean restore. */
	server_step(c, t, (uint32_t)++step, &co);
	emdb_ckpt_info info;
	OK(emdb_client_checkpoint(c, EMDB_CKPT_INCREMENTAL, &info));
	OK(emdb_client_restore(c, 0, NULL));
	cr_assert_eq(check_state(c, t, m, &co), step);
	emdb_client_close(c);
	cohorts_free(&co);
	emdb_db_close(m->db);
	free(m);
}

/* ---- clients training and reading while checkpoints run ---------------- */

typedef struct live {
	const char *uri;
	uint32_t t;
	const cohorts *co;
	const mirror *m;
	atomic_int stop;
	atomic_int bad;      /* a pull saw rows of different steps or a torn row */
	atomic_uint step;    /* steps the trainer finished */
	atomic_ulong pulls;
} live;

static void *live_trainer(void *arg)
{
	live *l = arg;
	emdb_client *c = NULL;
	if (emdb_client_connect(l->uri, NULL, &c) != EMDB_OK) {
		atomic_store(&l->bad, 2);
		return NULL;
	}
	enum { B = 20000 };
	float *g = malloc((size_t)B * DIM * 4);
	for (uint32_t s = atomic_load(&l->step) + 1; s <= STEPS_MAX && !atomic_load(&l->stop); s++) {
		float one[DIM];
		grad_of(s, one);
		for (int i = 0; i < B; i++)
			memcpy(g + (size_t)i * DIM, one, sizeof(one));
		for (uint64_t b = 0; b < ROWS; b += B)
			if (emdb_client_push(c, l->t, l->co->ids[0] + b, B, DIM, g) != EMDB_OK)
				atomic_store(&l->bad, 3);
		if (emdb_client_update(c, l->t, NULL) != EMDB_OK)
			atomic_store(&l->bad, 4);
		atomic_store(&l->step, s);
	}
	free(g);
	emdb_client_close(c);
	return NULL;
}

static void *live_reader(void *arg)
{
	live *l = arg;
	emdb_client *c = NULL;
	if (emdb_client_connect(l->uri, NULL, &c) != EMDB_OK) {
		atomic_store(&l->bad, 2);
		return NULL;
	}
	enum { N = 512 };
	uint64_t ids[N];
	float *v = malloc((size_t)N * DIM * 4);
	uint64_t x = 99;
	while (!atomic_load(&l->stop)) {
		for (int i = 0; i < N; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			ids[i] = l->co->ids[0][(x >> 33) % ROWS];
		}
		if (emdb_client_pull(c, l->t, ids, N, DIM, v) != EMDB_OK) {
			atomic_store(&l->bad, 5);
			break;
		}
		/* one Pull sees one step: all rows equal, and equal to a step */
		for (int i = 1; i < N; i++)
			if (memcmp(v, v + (size_t)i * DIM, DIM * 4) != 0)
				atomic_store(&l->bad, 1);
		bool known = false;
		for (uint32_t s = 0; s <= STEPS_MAX && !known; s++)
			known = memcmp(v, l->m->state[0][s], DIM * 4) == 0;
		if (!known)
			atomic_store(&l->bad, 1);
		atomic_fetch_add(&l->pulls, 1);
	}
	free(v);
	emdb_client_close(c);
	return NULL;
}

Test(server_crash, clients_pull_and_push_while_checkpoints_run, .init = setup, .fini = teardown,
     .timeout = 600)
{
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "live");
	cfg.dim = DIM;
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ADAGRAD, &cfg.optimizer), 0);
	cohorts co;
	cohorts_init(&co, 1, ROWS, 0, 1);
	mirror *m = calloc(1, sizeof(*m));
	mirror_init(m, &cfg, &co);
	start(false);
	emdb_client *c = connect_to();
	live l = { .uri = srv.unix_uri, .co = &co, .m = m };
	OK(emdb_client_table_create(c, &cfg, &l.t));
	server_step(c, l.t, 1, &co);
	atomic_store(&l.step, 1);

	pthread_t th[2];
	pthread_create(&th[0], NULL, live_trainer, &l);
	pthread_create(&th[1], NULL, live_reader, &l);
	enum { CKPTS = 6 };
	emdb_ckpt_info info[CKPTS];
	for (int k = 0; k < CKPTS; k++) {
		unsigned before = atomic_load(&l.step);
		OK(emdb_client_checkpoint(c, k % 3 ? EMDB_CKPT_INCREMENTAL : EMDB_CKPT_FULL, &info[k]));
		for (int w = 0; w < 2000 && atomic_load(&l.step) < before + 2 && atomic_load(&l.step) < STEPS_MAX; w++)
			test_sleep_ms(5);
	}
	atomic_store(&l.stop, 1);
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	cr_assert_eq(atomic_load(&l.bad), 0, "a client saw a torn or mixed state (code %d)", atomic_load(&l.bad));
	cr_assert_gt(atomic_load(&l.pulls), 0);
	for (int k = 0; k < CKPTS; k++) {
		emdb_ckpt_info got;
		OK(emdb_client_restore(c, info[k].id, &got));
		cr_assert_eq(check_state(c, l.t, m, &co), info[k].max_step, "checkpoint %llu",
			     (unsigned long long)info[k].id);
	}
	emdb_client_close(c);
	cohorts_free(&co);
	emdb_db_close(m->db);
	free(m);
}
