/*
 * test_client_step.c - synchronous steps (emdb_client_update_sync): the
 * Update of a data-parallel step applied once, when every worker has
 * pushed, as the trainers' workers would use it: each worker on its own
 * connection to an emdb-server, or as threads of one process over mem://.
 *
 * What is checked, against a server: early workers wait (their calls stay
 * pending and the rows stay as they were) until the last arrives; then
 * all get the same answer, the table's step advances by one, and the rows
 * equal the in-process engine's after the same pushes and one Update; a
 * worker naming another worker count is refused while the step stays
 * open; a step that does not fill in update_barrier_timeout_ms answers
 * TIMEOUT and applies nothing; a worker whose connection closes leaves
 * the step; a shutdown answers waiting workers CLOSED; INFO counts the
 * waiting.  Over mem://, threads of one handle, and handles of one named
 * database, meet the same way.  Ranked workers number their steps: one
 * whose call timed out after its arrival reached the server, and which
 * calls again after the step applied, gets that step's answer and is not
 * counted in the next step.
 *
 * Every server is started on loopback with an ephemeral port and a Unix
 * socket in a temporary directory, and is killed in the test's .fini.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/client.h>
#include <emdb/db.h>

#include "tests/lib/client_server.h"
#include "tests/lib/helpers.h"

#define DIM 8
#define N_IDS 64
#define WORKERS 3

static test_server srv;

static void srv_start(void)
{
	test_server_start(&srv, NULL);
}

static void srv_stop(void)
{
	test_server_stop(&srv);
}

#define OK(call) cr_assert_eq((call), EMDB_OK, "%s: %s", #call, emdb_client_last_error())
#define CALL_MS 60000 /* the clients' call timeout */

static uint32_t create_table(emdb_client *c)
{
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	uint32_t id;
	strcpy(cfg.name, "emb");
	cfg.dim = DIM;
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ADAGRAD, &cfg.optimizer), 0);
	cfg.init = (emdb_init){ EMDB_INIT_UNIFORM, -1, 1 };
	cfg.seed = 11;
	OK(emdb_client_table_create(c, &cfg, &id));
	return id;
}

/* Worker w's batch: overlapping IDs, gradients of its own. */
static void batch(int w, uint64_t *ids, float *grads)
{
	for (int i = 0; i < N_IDS; i++) {
		ids[i] = (uint64_t)(i * 3 + w * 16);
		for (int d = 0; d < DIM; d++)
			grads[i * DIM + d] = 0.01f * (float)((w + 1) * (d + 1)) - 0.005f * (float)(i % 7);
	}
}

static void push_batch(emdb_client *c, uint32_t t, int w)
{
	uint64_t ids[N_IDS];
	float g[N_IDS * DIM];
	batch(w, ids, g);
	OK(emdb_client_push(c, t, ids, N_IDS, DIM, g));
}

/* Rows of every ID the workers touch, in a fixed order. */
static void pull_all(emdb_client *c, uint32_t t, float *out)
{
	uint64_t ids[N_IDS * WORKERS];
	float g[N_IDS * DIM];
	for (int w = 0; w < WORKERS; w++)
		batch(w, ids + w * N_IDS, g);
	OK(emdb_client_pull(c, t, ids, N_IDS * WORKERS, DIM, out));
}

static uint64_t table_step(emdb_client *c, uint32_t t)
{
	emdb_table_info info;
	OK(emdb_client_table_describe(c, t, &info));
	return info.stats.step;
}

static long long info_waiting(emdb_client *c)
{
	char *text;
	OK(emdb_client_info(c, "clients", &text));
	const char *p = strstr(text, "updates_waiting: ");
	cr_assert_not_null(p, "%s", text);
	long long v = atoll(p + strlen("updates_waiting: "));
	emdb_free(text);
	return v;
}

/* The state after every worker's push and one Update, from mem://. */
static void expected_rows(float *out)
{
	emdb_client *mem = test_client_open("mem://", CALL_MS);
	uint32_t t = create_table(mem);
	for (int w = 0; w < WORKERS; w++)
		push_batch(mem, t, w);
	OK(emdb_client_update(mem, t, NULL));
	pull_all(mem, t, out);
	emdb_client_close(mem);
}

static void wait_waiting(emdb_client *c, long long want)
{
	for (int i = 0; i < 500 && info_waiting(c) != want; i++)
		test_sleep_ms(10);
	cr_assert_eq(info_waiting(c), want, "INFO updates_waiting");
}

Test(client_step, applied_once_when_every_worker_has_pushed, .init = srv_start, .fini = srv_stop,
     .timeout = 120)
{
	emdb_client *c[WORKERS], *watch = test_client_open(srv.tcp_uri, CALL_MS);
	for (int w = 0; w < WORKERS; w++)
		c[w] = test_client_open(w % 2 ? srv.unix_uri : srv.tcp_uri, CALL_MS);
	uint32_t t = create_table(watch);
	static float before[N_IDS * WORKERS * DIM], now[N_IDS * WORKERS * DIM],
		want[N_IDS * WORKERS * DIM];
	pull_all(watch, t, before);
	for (int w = 0; w < WORKERS; w++)
		push_batch(c[w], t, w);

	uint64_t rows[WORKERS] = { 0 };
	emdb_future *f[WORKERS - 1];
	for (int w = 0; w < WORKERS - 1; w++) {
		f[w] = emdb_client_update_sync_async(c[w], t, WORKERS, &rows[w]);
		cr_assert_not_null(f[w]);
	}
	wait_waiting(watch, WORKERS - 1);
	for (int w = 0; w < WORKERS - 1; w++)
		cr_assert_eq(emdb_future_wait(f[w], 100), EMDB_FUTURE_PENDING, "worker %d did not wait", w);
	pull_all(watch, t, now);
	cr_assert(memcmp(before, now, sizeof(now)) == 0, "rows changed before the step was complete");
	cr_assert_eq(table_step(watch, t), 0);

	OK(emdb_client_update_sync(c[WORKERS - 1], t, WORKERS, &rows[WORKERS - 1]));
	for (int w = 0; w < WORKERS - 1; w++) {
		cr_assert_eq(emdb_future_wait(f[w], -1), EMDB_OK, "worker %d: %s", w, emdb_client_last_error());
		emdb_future_free(f[w]);
	}
	for (int w = 0; w < WORKERS; w++)
		cr_assert_eq(rows[w], rows[WORKERS - 1], "worker %d was told %llu rows", w,
			     (unsigned long long)rows[w]);
	cr_assert_gt(rows[0], 0);
	cr_assert_eq(table_step(watch, t), 1, "the step was applied once");
	cr_assert_eq(info_waiting(watch), 0);
	pull_all(watch, t, now);
	expected_rows(want);
	cr_assert(memcmp(now, want, sizeof(now)) == 0, "rows differ from one Update after all pushes");

	/* The next step works the same, all workers calling at once. */
	for (int w = 0; w < WORKERS; w++)
		push_batch(c[w], t, w);
	emdb_future *g[WORKERS];
	for (int w = 0; w < WORKERS; w++)
		g[w] = emdb_client_update_sync_async(c[w], t, WORKERS, NULL);
	for (int w = 0; w < WORKERS; w++) {
		cr_assert_eq(emdb_future_wait(g[w], -1), EMDB_OK, "%s", emdb_client_last_error());
		emdb_future_free(g[w]);
	}
	cr_assert_eq(table_step(watch, t), 2);
	/* One worker: a plain Update. */
	OK(emdb_client_update_sync(c[0], t, 1, NULL));
	cr_assert_eq(table_step(watch, t), 3);
	for (int w = 0; w < WORKERS; w++)
		emdb_client_close(c[w]);
	emdb_client_close(watch);
}

static emdb_client *ranked_open(const char *uri, uint32_t rank, uint32_t timeout_ms)
{
	emdb_client *c = NULL;
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.timeout_ms = timeout_ms;
	o.worker_rank = rank;
	int rc = emdb_client_connect(uri, &o, &c);
	cr_assert_eq(rc, EMDB_OK, "connect %s: %s", uri, emdb_client_last_error());
	return c;
}

Test(client_step, a_resend_after_the_step_applied_is_answered_not_counted, .init = srv_start,
     .fini = srv_stop, .timeout = 120)
{
	emdb_client *a = ranked_open(srv.unix_uri, 0, 300), *b = ranked_open(srv.tcp_uri, 1, CALL_MS),
		    *watch = test_client_open(srv.tcp_uri, CALL_MS);
	uint32_t t = create_table(watch);
	push_batch(a, t, 0);
	push_batch(b, t, 1);
	/* a's call gives up on the client side; its arrival stays in the step. */
	int rc = emdb_client_update_sync(a, t, 2, NULL);
	cr_assert_eq(rc, EMDB_ERR_TIMEOUT, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	wait_waiting(watch, 1);
	uint64_t rows_b = 0, rows_a = 0;
	OK(emdb_client_update_sync(b, t, 2, &rows_b));
	cr_assert_gt(rows_b, 0);
	cr_assert_eq(table_step(watch, t), 1);

	/* a resends step 1: the applied step's answer, counted nowhere. */
	OK(emdb_client_update_sync(a, t, 2, &rows_a));
	cr_assert_eq(rows_a, rows_b, "the resend was told %llu rows, the step updated %llu",
		     (unsigned long long)rows_a, (unsigned long long)rows_b);
	cr_assert_eq(info_waiting(watch), 0, "the resend waits in the next step");
	cr_assert_eq(table_step(watch, t), 1, "the resend was applied again");

	/* Step 2 still waits for both workers. */
	emdb_client_set_timeout(a, CALL_MS);
	push_batch(a, t, 0);
	emdb_future *f = emdb_client_update_sync_async(a, t, 2, NULL);
	cr_assert_not_null(f);
	wait_waiting(watch, 1);
	cr_assert_eq(emdb_future_wait(f, 100), EMDB_FUTURE_PENDING, "step 2 applied with one worker");
	cr_assert_eq(table_step(watch, t), 1);
	OK(emdb_client_update_sync(b, t, 2, NULL));
	cr_assert_eq(emdb_future_wait(f, -1), EMDB_OK, "%s", emdb_client_last_error());
	emdb_future_free(f);
	cr_assert_eq(table_step(watch, t), 2);
	emdb_client_close(a);
	emdb_client_close(b);
	emdb_client_close(watch);
}

Test(client_step, another_worker_count_is_refused, .init = srv_start, .fini = srv_stop, .timeout = 120)
{
	emdb_client *a = test_client_open(srv.unix_uri, CALL_MS),
		    *b = test_client_open(srv.unix_uri, CALL_MS), *d = test_client_open(srv.tcp_uri, CALL_MS);
	uint32_t t = create_table(a);
	emdb_future *f = emdb_client_update_sync_async(a, t, 3, NULL);
	wait_waiting(d, 1);
	cr_assert_eq(emdb_client_update_sync(b, t, 2, NULL), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_client_last_error(), "2 workers"), "%s", emdb_client_last_error());
	cr_assert_eq(emdb_client_update_sync(b, t, 0, NULL), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_client_update_sync(b, t, EMDB_CLIENT_UPDATE_WORKERS_MAX + 1, NULL), EMDB_ERR_INVALID);
	cr_assert_null(emdb_client_update_sync_async(b, t, 0, NULL));
	cr_assert_eq(emdb_client_update_sync(b, 999, 3, NULL), EMDB_ERR_NO_TABLE);
	cr_assert_eq(emdb_future_poll(f), EMDB_FUTURE_PENDING, "the open step was disturbed");
	/* The step is still open for 3. */
	emdb_future *g = emdb_client_update_sync_async(b, t, 3, NULL);
	OK(emdb_client_update_sync(d, t, 3, NULL));
	cr_assert_eq(emdb_future_wait(f, -1), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(emdb_future_wait(g, -1), EMDB_OK, "%s", emdb_client_last_error());
	emdb_future_free(f);
	emdb_future_free(g);
	cr_assert_eq(table_step(d, t), 1);
	emdb_client_close(a);
	emdb_client_close(b);
	emdb_client_close(d);
}

Test(client_step, a_step_short_of_workers_times_out_and_applies_nothing, .init = srv_start,
     .fini = srv_stop, .timeout = 120)
{
	emdb_client *a = test_client_open(srv.unix_uri, CALL_MS), *b = test_client_open(srv.unix_uri, CALL_MS);
	uint32_t t = create_table(a);
	static float before[N_IDS * WORKERS * DIM], now[N_IDS * WORKERS * DIM];
	pull_all(a, t, before);
	push_batch(a, t, 0);
	OK(emdb_client_config_set(a, "update_barrier_timeout_ms", "300"));
	emdb_future *f = emdb_client_update_sync_async(a, t, 2, NULL);
	int rc = emdb_future_wait(f, 10000);
	cr_assert_eq(rc, EMDB_ERR_TIMEOUT, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "1 of 2 workers"), "%s", emdb_client_last_error());
	emdb_future_free(f);
	pull_all(b, t, now);
	cr_assert(memcmp(before, now, sizeof(now)) == 0, "a step that timed out changed rows");
	cr_assert_eq(table_step(b, t), 0);
	cr_assert_eq(info_waiting(b), 0);
	/* The gradient is still there for the next Update. */
	uint64_t rows = 0;
	OK(emdb_client_update(b, t, &rows));
	cr_assert_eq(rows, N_IDS);
	emdb_client_close(a);
	emdb_client_close(b);
}

Test(client_step, a_closed_connection_leaves_the_step, .init = srv_start, .fini = srv_stop, .timeout = 120)
{
	emdb_client *a = test_client_open(srv.unix_uri, CALL_MS),
		    *b = test_client_open(srv.unix_uri, CALL_MS), *d = test_client_open(srv.tcp_uri, CALL_MS);
	uint32_t t = create_table(b);
	emdb_future *f = emdb_client_update_sync_async(a, t, 2, NULL);
	wait_waiting(b, 1);
	emdb_future_free(f);
	emdb_client_close(a);
	wait_waiting(b, 0);
	emdb_future *g = emdb_client_update_sync_async(b, t, 2, NULL);
	wait_waiting(d, 1);
	cr_assert_eq(emdb_future_poll(g), EMDB_FUTURE_PENDING, "the closed worker still counted");
	OK(emdb_client_update_sync(d, t, 2, NULL));
	cr_assert_eq(emdb_future_wait(g, -1), EMDB_OK, "%s", emdb_client_last_error());
	emdb_future_free(g);
	cr_assert_eq(table_step(d, t), 1);
	emdb_client_close(b);
	emdb_client_close(d);
}

Test(client_step, shutdown_answers_waiting_workers, .init = srv_start, .fini = srv_stop, .timeout = 120)
{
	emdb_client *a = test_client_open(srv.unix_uri, CALL_MS), *b = test_client_open(srv.unix_uri, CALL_MS);
	uint32_t t = create_table(a);
	emdb_future *f = emdb_client_update_sync_async(a, t, 2, NULL);
	wait_waiting(b, 1);
	OK(emdb_client_shutdown(b));
	int rc = emdb_future_wait(f, 20000);
	cr_assert_eq(rc, EMDB_ERR_CLOSED, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "shut down"), "%s", emdb_client_last_error());
	emdb_future_free(f);
	emdb_client_close(a);
	emdb_client_close(b);
}

/* ---- mem:// --------------------------------------------------------- */

typedef struct mem_worker {
	emdb_client *c;
	uint32_t t;
	int w;
	uint64_t rows;
	int rc;
} mem_worker;

static void *mem_worker_main(void *arg)
{
	mem_worker *x = arg;
	for (int step = 0; step < 5 && x->rc == EMDB_OK; step++) {
		uint64_t ids[N_IDS];
		float g[N_IDS * DIM];
		batch(x->w, ids, g);
		x->rc = emdb_client_push(x->c, x->t, ids, N_IDS, DIM, g);
		if (x->rc == EMDB_OK)
			x->rc = emdb_client_update_sync(x->c, x->t, WORKERS, &x->rows);
	}
	return NULL;
}

/* Threads of one process, each with a handle on mem://NAME or all sharing
 * one handle, run five steps: five Updates, the same answer for all. */
static void mem_threads_meet(bool shared_handle)
{
	emdb_client *h[WORKERS];
	h[0] = test_client_open("mem://steps", CALL_MS);
	for (int w = 1; w < WORKERS; w++)
		h[w] = shared_handle ? h[0] : test_client_open("mem://steps", CALL_MS);
	uint32_t t = create_table(h[0]);
	mem_worker x[WORKERS];
	pthread_t th[WORKERS];
	for (int w = 0; w < WORKERS; w++) {
		x[w] = (mem_worker){ h[w], t, w, 0, EMDB_OK };
		cr_assert_eq(pthread_create(&th[w], NULL, mem_worker_main, &x[w]), 0);
	}
	for (int w = 0; w < WORKERS; w++)
		pthread_join(th[w], NULL);
	for (int w = 0; w < WORKERS; w++) {
		cr_assert_eq(x[w].rc, EMDB_OK, "worker %d: %s", w, emdb_err_name(x[w].rc));
		cr_assert_eq(x[w].rows, x[0].rows);
	}
	cr_assert_eq(table_step(h[0], t), 5);
	for (int w = WORKERS - 1; w >= 0; w--)
		if (w == 0 || !shared_handle)
			emdb_client_close(h[w]);
}

Test(client_step, mem_threads_of_one_handle_meet, .timeout = 120)
{
	mem_threads_meet(true);
}

Test(client_step, mem_handles_of_one_database_meet, .timeout = 120)
{
	mem_threads_meet(false);
}

typedef struct step_call {
	emdb_client *c;
	uint32_t t, workers;
	int rc;
} step_call;

static void *step_call_main(void *arg)
{
	step_call *x = arg;
	x->rc = emdb_client_update_sync(x->c, x->t, x->workers, NULL);
	return NULL;
}

Test(client_step, mem_step_times_out_and_refuses_another_count, .timeout = 120)
{
	emdb_client *c = test_client_open("mem://", CALL_MS);
	uint32_t t = create_table(c);
	push_batch(c, t, 0);
	emdb_client_set_timeout(c, 200);
	int rc = emdb_client_update_sync(c, t, 2, NULL);
	cr_assert_eq(rc, EMDB_ERR_TIMEOUT, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "1 of 2 workers"), "%s", emdb_client_last_error());
	cr_assert_eq(table_step(c, t), 0);

	/* A thread opens a step for 2 and waits in it; a call for 3 is
	 * refused and the step stays open, so a call for 2 completes it.  If
	 * the call for 3 came first (it then times out, and the thread's call
	 * was the one refused), try again. */
	bool refused = false;
	for (int attempt = 0; attempt < 10 && !refused; attempt++) {
		emdb_client_set_timeout(c, CALL_MS);
		step_call x = { c, t, 2, EMDB_OK };
		pthread_t th;
		cr_assert_eq(pthread_create(&th, NULL, step_call_main, &x), 0);
		test_sleep_ms(50);
		emdb_client_set_timeout(c, 300);
		rc = emdb_client_update_sync(c, t, 3, NULL);
		if (rc == EMDB_ERR_INVALID) {
			refused = true;
			cr_assert(strstr(emdb_client_last_error(), "3 workers"), "%s", emdb_client_last_error());
			emdb_client_set_timeout(c, CALL_MS);
			OK(emdb_client_update_sync(c, t, 2, NULL));
		} else {
			cr_assert_eq(rc, EMDB_ERR_TIMEOUT, "%s", emdb_err_name(rc));
		}
		pthread_join(th, NULL);
		if (refused)
			cr_assert_eq(x.rc, EMDB_OK, "%s", emdb_err_name(x.rc));
		else
			cr_assert_eq(x.rc, EMDB_ERR_INVALID, "%s", emdb_err_name(x.rc));
	}
	cr_assert(refused, "a call for 3 workers never met the open step for 2");
	cr_assert_eq(table_step(c, t), 1);
	emdb_client_close(c);
}
