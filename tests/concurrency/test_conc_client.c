/*
 * test_conc_client.c - one client handle shared by many threads, over
 * mem:// and over unix:// to an emdb-server of the same build (plain
 * runner under ThreadSanitizer, see tests/lib/plain_runner.h; the server is
 * then the TSan one too).
 *
 * 1. Threads prefetch asynchronously, pull and push through tickets on one
 *    handle, some abandoning futures before they complete; after they join,
 *    one Update gives the same rows as the same pushes made directly on an
 *    engine by one thread.  Over a socket this mixes synchronous calls that
 *    read their own responses with the receiving thread, handing the
 *    socket's read side back and forth (client/net.c, invariant 2).
 * 2. Async futures freed while still queued never write their buffers.
 * 3. The same over tls:// (a certificate of tests/lib/tls_pki.h): the sender
 *    and the reader then share one SSL under the handle's tls_lock; with
 *    the server on libevent and on io_uring.
 * 4. Threads of one mem:// handle meet in synchronous steps
 *    (emdb_client_update_sync): one Update per round, the same answer for
 *    all, rows as an engine gives them round by round.
 */
#define _GNU_SOURCE /* nftw in tests/lib/tmpdir.h */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/client.h>

#include "tests/lib/helpers.h"
#include "tests/lib/server_spawn.h"
#include "tests/lib/tls_pki.h"
#include "tests/lib/tmpdir.h"

enum { THREADS = 4, ROUNDS = 20, BATCH = 256, POOL = 1000, DIM = 8 };

typedef struct worker {
	emdb_client *c;
	uint32_t table;
	int tid;
} worker;

static void batch_ids(int tid, int round, uint64_t *ids)
{
	for (int i = 0; i < BATCH; i++)
		ids[i] = scramble((uint64_t)((tid * 131 + round * 17 + i * 7) % POOL));
}

static void batch_grads(int tid, int round, float *g)
{
	for (int i = 0; i < BATCH * DIM; i++)
		g[i] = (float)((tid + round + i) % 5) * 0.25f - 0.5f;
}

static void *work(void *arg)
{
	worker *w = arg;
	uint64_t ids[BATCH], next_ids[BATCH];
	static _Thread_local float g[BATCH * DIM], out[BATCH * DIM], junk[BATCH * DIM];
	emdb_client_ticket *tk = NULL, *next = NULL;

	batch_ids(w->tid, 0, ids);
	cr_assert_eq(emdb_client_prefetch(w->c, w->table, ids, BATCH, &tk), 0, "%s", emdb_client_last_error());
	for (int r = 0; r < ROUNDS; r++) {
		/* Prefetch batch r+1 while batch r is used. */
		emdb_future *f = NULL;
		if (r + 1 < ROUNDS) {
			batch_ids(w->tid, r + 1, next_ids);
			f = emdb_client_prefetch_async(w->c, w->table, next_ids, BATCH, &next);
		}
		/* A pull nobody waits for: freed at once, abandoned. */
		emdb_future_free(emdb_client_pull_ticket_async(w->c, w->table, tk, DIM, junk));
		cr_assert_eq(emdb_client_pull_ticket(w->c, w->table, tk, DIM, out), 0);
		batch_grads(w->tid, r, g);
		cr_assert_eq(emdb_client_push_ticket(w->c, w->table, tk, DIM, g), 0);
		emdb_client_ticket_free(tk);
		tk = NULL;
		if (f) {
			cr_assert_eq(emdb_future_wait(f, -1), 0);
			emdb_future_free(f);
			tk = next;
			next = NULL;
		}
	}
	emdb_client_ticket_free(tk);
	return NULL;
}

/* Every row of the pool through c's table tc equals the engine ref's table
 * tr, within float summation order. */
static void expect_rows_as_engine(emdb_client *c, uint32_t tc, emdb_db *ref, uint32_t tr)
{
	uint64_t all[POOL];
	static float a[POOL * DIM], b[POOL * DIM];
	for (int i = 0; i < POOL; i++)
		all[i] = scramble((uint64_t)i);
	cr_assert_eq(emdb_client_lookup(c, tc, all, POOL, DIM, a, NULL), 0);
	cr_assert_eq(emdb_lookup(ref, tr, all, POOL, DIM, b, NULL), 0);
	for (int i = 0; i < POOL * DIM; i++)
		cr_assert(fabsf(a[i] - b[i]) <= 1e-5f * (1 + fabsf(b[i])), "value %d: %g vs %g", i, a[i], b[i]);
}

/* Test 1 on handle c: the workers, one Update, then every row against
 * the same pushes on a plain engine. */
static void shared_handle_equals_engine(emdb_client *c)
{
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "t");
	cfg.dim = DIM;
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ADAGRAD, &cfg.optimizer), 0);
	cfg.init = (emdb_init){ EMDB_INIT_UNIFORM, -0.1, 0.1 };
	uint32_t tc;
	cr_assert_eq(emdb_client_table_create(c, &cfg, &tc), 0);

	pthread_t th[THREADS];
	worker w[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (worker){ c, tc, i };
		pthread_create(&th[i], NULL, work, &w[i]);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(emdb_client_update(c, tc, NULL), 0);

	/* The same pushes, serially, on a plain engine. */
	emdb_db *ref = open_db(64);
	uint32_t tr;
	cr_assert_eq(emdb_table_create(ref, &cfg, &tr), 0);
	uint64_t ids[BATCH];
	static float g[BATCH * DIM];
	for (int i = 0; i < THREADS; i++)
		for (int r = 0; r < ROUNDS; r++) {
			batch_ids(i, r, ids);
			batch_grads(i, r, g);
			cr_assert_eq(emdb_push(ref, tr, ids, BATCH, DIM, g), 0);
		}
	cr_assert_eq(emdb_update(ref, tr, NULL), 0);

	expect_rows_as_engine(c, tc, ref, tr);
	emdb_db_close(ref);
}

Test(concurrency, shared_client_handle_equals_engine)
{
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.mem_threads = 2;
	emdb_client *c;
	cr_assert_eq(emdb_client_connect("mem://", &o, &c), 0, "%s", emdb_client_last_error());
	shared_handle_equals_engine(c);
	emdb_client_close(c);
}

/* Test 4: synchronous steps over mem://, threads sharing one handle: each
 * round every thread pushes, then calls emdb_client_update_sync; the
 * rounds are steps, one Update each, and the rows end as on an engine
 * given each round's pushes and then one Update. */
typedef struct stepper {
	emdb_client *c;
	uint32_t table;
	int tid;
	uint64_t rows[ROUNDS];
} stepper;

static void *step_work(void *arg)
{
	stepper *w = arg;
	uint64_t ids[BATCH];
	static _Thread_local float g[BATCH * DIM];
	for (int r = 0; r < ROUNDS; r++) {
		batch_ids(w->tid, r, ids);
		batch_grads(w->tid, r, g);
		cr_assert_eq(emdb_client_push(w->c, w->table, ids, BATCH, DIM, g), 0);
		cr_assert_eq(emdb_client_update_sync(w->c, w->table, THREADS, &w->rows[r]), 0, "%s",
			     emdb_client_last_error());
	}
	return NULL;
}

Test(concurrency, mem_threads_step_together)
{
	emdb_client *c;
	cr_assert_eq(emdb_client_connect("mem://", NULL, &c), 0, "%s", emdb_client_last_error());
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "t");
	cfg.dim = DIM;
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ADAGRAD, &cfg.optimizer), 0);
	cfg.init = (emdb_init){ EMDB_INIT_UNIFORM, -0.1, 0.1 };
	uint32_t tc, tr;
	cr_assert_eq(emdb_client_table_create(c, &cfg, &tc), 0);
	pthread_t th[THREADS];
	static stepper w[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (stepper){ .c = c, .table = tc, .tid = i };
		pthread_create(&th[i], NULL, step_work, &w[i]);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);

	emdb_db *ref = open_db(64);
	cr_assert_eq(emdb_table_create(ref, &cfg, &tr), 0);
	uint64_t ids[BATCH];
	static float g[BATCH * DIM];
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < THREADS; i++) {
			batch_ids(i, r, ids);
			batch_grads(i, r, g);
			cr_assert_eq(emdb_push(ref, tr, ids, BATCH, DIM, g), 0);
		}
		uint64_t rows;
		cr_assert_eq(emdb_update(ref, tr, &rows), 0);
		for (int i = 0; i < THREADS; i++)
			cr_assert_eq(w[i].rows[r], rows, "round %d, thread %d", r, i);
	}
	emdb_table_info info;
	cr_assert_eq(emdb_client_table_describe(c, tc, &info), 0);
	cr_assert_eq(info.stats.step, ROUNDS);
	expect_rows_as_engine(c, tc, ref, tr);
	emdb_db_close(ref);
	emdb_client_close(c);
}

#ifdef EMDB_SERVER_BIN
/* The same over a Unix socket, or over TLS when pki names the directory of
 * tests/lib/tls_pki.h's files, on the server's I/O backend `backend`.  The
 * server dies with this process if an assertion aborts it (server_spawn:
 * PR_SET_PDEATHSIG). */
static void over_server(const char *pki, const char *backend)
{
	char dir[] = "/tmp/emdb-conc-client-XXXXXX", sock[64], log[64], portfile[64], uri[256];
	cr_assert_not_null(mkdtemp(dir), "mkdtemp");
	snprintf(sock, sizeof(sock), "%s/emdb.sock", dir);
	snprintf(log, sizeof(log), "%s/server.log", dir);
	snprintf(portfile, sizeof(portfile), "%s/port", dir);
	const char *argv[20] = { server_bin(), "--bind", "127.0.0.1", "--port", "0", "--port-file", portfile,
				 "--unix-socket", sock, "--io-threads", "2", "--log-file", log,
				 "--io-backend", backend };
	if (pki) {
		argv[15] = "--tls-cert-file";
		argv[16] = tls_pki_path(pki, "srv.pem");
		argv[17] = "--tls-key-file";
		argv[18] = tls_pki_path(pki, "srv.key");
	}
	pid_t pid;
	unsigned port = server_spawn(argv, log, portfile, sock, 20000, &pid);

	emdb_client *c;
	if (pki)
		snprintf(uri, sizeof(uri), "tls://127.0.0.1:%u?ca=%s", port, tls_pki_path(pki, "ca.pem"));
	else
		snprintf(uri, sizeof(uri), "unix://%s", sock);
	cr_assert_eq(emdb_client_connect(uri, NULL, &c), 0, "%s", emdb_client_last_error());
	shared_handle_equals_engine(c);
	emdb_client_close(c);
	kill(pid, SIGTERM);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "emdb-server ended with status 0x%x: %s", st,
		  server_log_tail(log));
	tmpdir_remove(dir);
}

Test(concurrency, shared_net_handle_equals_engine)
{
	over_server(NULL, "libevent");
}

Test(concurrency, shared_tls_handle_equals_engine)
{
	char pki[64];
	tls_pki_make(pki);
	over_server(pki, "libevent");
	tls_pki_remove(pki);
}

/* TLS connections on the io_uring backend: polls through the ring, reads
 * and writes by non-blocking calls (net/loop_uring.c). */
Test(concurrency, shared_tls_handle_equals_engine_uring)
{
	char pki[64];
	tls_pki_make(pki);
	over_server(pki, "uring");
	tls_pki_remove(pki);
}
#endif
