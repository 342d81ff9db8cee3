/*
 * test_server_ckpt.c - checkpoints and restore through emdb-server and the
 * client library, black box: every optimizer restored bit for bit, an
 * incremental chain, list / delete / retention, `--restore latest` at the
 * start of a second server on the same data dir, automatic checkpoints,
 * and the errors a user meets (UNSUPPORTED, BUSY, INVALID, AUTH).
 *
 * Every server listens on loopback with an ephemeral port and a Unix
 * socket (tests/lib/client_server.h) and keeps its checkpoints in a fresh
 * --data-dir under /tmp; the .fini fixture kills the servers and removes
 * the directories, also after a failed assertion.
 */
#define _XOPEN_SOURCE 700
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/client.h>
#include <emdb/db.h>

#include "tests/lib/client_server.h"
#include "tests/lib/helpers.h"
#include "tests/lib/store_util.h"
#include "tests/lib/tmpdir.h"

static test_server srv, srv2;
static char data_dir[64];
static char exit_log[64]; /* expect_exit's log, removed by stop_all */

#define OK(call) cr_assert_eq((call), EMDB_OK, "%s: %s", #call, emdb_client_last_error())
#define CALL_MS 60000 /* the clients' call timeout */
#define FAILS(call, code, needle)                                                          \
	do {                                                                               \
		int rc_ = (call);                                                          \
		cr_assert_eq(rc_, (code), "%s gave %s: %s", #call, emdb_err_name(rc_),     \
			     emdb_client_last_error());                                    \
		cr_assert(strstr(emdb_client_last_error(), (needle)), "%s: '%s' lacks '%s'", \
			  #call, emdb_client_last_error(), (needle));                      \
	} while (0)

/* ---- fixtures ------------------------------------------------------- */


static void make_data_dir(void)
{
	strcpy(data_dir, "/tmp/emdb-ckpt-test-XXXXXX");
	cr_assert_not_null(mkdtemp(data_dir), "mkdtemp: %s", strerror(errno));
}

/* Start srv on data_dir with the extra flags (NULL-terminated, may be NULL). */
static void start_on_data_dir(test_server *s, const char *const *extra)
{
	const char *argv[24] = { "--data-dir", data_dir };
	int n = 2;
	for (int i = 0; extra && extra[i] && n < 22; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	test_server_start(s, argv);
}

static void start_persist(void)
{
	make_data_dir();
	start_on_data_dir(&srv, NULL);
}

static void start_plain(void)
{
	data_dir[0] = 0;
	test_server_start(&srv, NULL);
}

static void stop_all(void)
{
	test_server_stop(&srv);
	test_server_stop(&srv2);
	if (data_dir[0]) {
		tmpdir_remove(data_dir);
		data_dir[0] = 0;
	}
	if (exit_log[0]) {
		unlink(exit_log);
		exit_log[0] = 0;
	}
}

/* An orderly stop (SHUTDOWN): the server waits for a running job and
 * closes its store; its exit status must be 0. */
static void shutdown_and_reap(test_server *s, emdb_client *c)
{
	OK(emdb_client_shutdown(c));
	emdb_client_close(c);
	int st = -1;
	for (int i = 0; i < 3000 && s->pid > 0; i++) {
		if (waitpid(s->pid, &st, WNOHANG) == s->pid)
			s->pid = 0;
		else
			test_sleep_ms(10);
	}
	cr_assert_eq(s->pid, 0, "the server did not exit after SHUTDOWN: %s", test_server_log_tail(s));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status 0x%x: %s", st,
		  test_server_log_tail(s));
}

/* ---- tables, training, snapshots ------------------------------------- */

static uint32_t create_table(emdb_client *c, const char *name, uint32_t dim, emdb_opt_kind opt,
			     uint64_t seed)
{
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, name);
	cfg.dim = dim;
	cr_assert_eq(emdb_optimizer_defaults(opt, &cfg.optimizer), EMDB_OK);
	cfg.optimizer.lr = 0.05;
	cfg.init = (emdb_init){ EMDB_INIT_UNIFORM, -0.5, 0.5 };
	cfg.seed = seed;
	uint32_t id;
	OK(emdb_client_table_create(c, &cfg, &id));
	return id;
}

/* One training step on ids[0..n): gradients that depend on (id, round),
 * pushed, then the table updated. */
static void train(emdb_client *c, uint32_t t, uint32_t dim, const uint64_t *ids, size_t n,
		  uint32_t round)
{
	float *g = emdb_malloc(n * dim * sizeof(float));
	cr_assert_not_null(g);
	for (size_t i = 0; i < n; i++)
		for (uint32_t k = 0; k < dim; k++)
			g[i * dim + k] = (float)((int)((scramble(ids[i] * 31 + round * 7 + k) % 2001)) - 1000) / 997.0f;
	OK(emdb_client_push(c, t, ids, n, dim, g));
	OK(emdb_client_update(c, t, NULL));
	emdb_free(g);
}

/* Insert ids (Prefetch), nothing else. */
static void insert(emdb_client *c, uint32_t t, const uint64_t *ids, size_t n)
{
	emdb_client_ticket *tk;
	OK(emdb_client_prefetch(c, t, ids, n, &tk));
	emdb_client_ticket_free(tk);
}

/* Everything a user can read of a table for a set of IDs. */
typedef struct snap {
	uint32_t dim, per_row;
	size_t n;
	float *vec;
	uint8_t *found;
	float *state;
	uint8_t *sfound;
	uint64_t step, rows;
} snap;

static void snap_take(emdb_client *c, uint32_t t, const uint64_t *ids, size_t n, snap *s)
{
	emdb_table_info info;
	OK(emdb_client_table_describe(c, t, &info));
	s->dim = info.config.dim;
	s->per_row = emdb_optimizer_state_floats(info.config.optimizer.kind, s->dim);
	s->n = n;
	s->step = info.stats.step;
	s->rows = info.stats.rows;
	s->vec = emdb_malloc(n * s->dim * sizeof(float));
	s->found = emdb_malloc(n);
	s->state = emdb_malloc((n * s->per_row + 1) * sizeof(float));
	s->sfound = emdb_malloc(n);
	cr_assert(s->vec && s->found && s->state && s->sfound);
	OK(emdb_client_lookup(c, t, ids, n, s->dim, s->vec, s->found));
	OK(emdb_client_read_state(c, t, ids, n, s->per_row, s->state, s->sfound));
}

static void snap_free(snap *s)
{
	emdb_free(s->vec);
	emdb_free(s->found);
	emdb_free(s->state);
	emdb_free(s->sfound);
	memset(s, 0, sizeof(*s));
}

static bool snap_equal(const snap *a, const snap *b)
{
	return a->n == b->n && a->dim == b->dim && a->per_row == b->per_row && a->step == b->step &&
	       a->rows == b->rows && !memcmp(a->vec, b->vec, a->n * a->dim * sizeof(float)) &&
	       !memcmp(a->found, b->found, a->n) &&
	       !memcmp(a->state, b->state, a->n * a->per_row * sizeof(float)) &&
	       !memcmp(a->sfound, b->sfound, a->n);
}

/* Bit-exact comparison with a message that says what differs. */
static void snap_assert_equal(const snap *want, const snap *got, const char *what)
{
	cr_assert_eq(got->step, want->step, "%s: step %llu, expected %llu", what,
		     (unsigned long long)got->step, (unsigned long long)want->step);
	cr_assert_eq(got->rows, want->rows, "%s: %llu rows, expected %llu", what,
		     (unsigned long long)got->rows, (unsigned long long)want->rows);
	for (size_t i = 0; i < want->n; i++) {
		cr_assert_eq(got->found[i], want->found[i], "%s: found[%zu]", what, i);
		cr_assert_eq(memcmp(got->vec + i * want->dim, want->vec + i * want->dim,
				    want->dim * sizeof(float)), 0, "%s: vector of row %zu differs", what, i);
		cr_assert_eq(got->sfound[i], want->sfound[i], "%s: state found[%zu]", what, i);
		cr_assert_eq(memcmp(got->state + i * want->per_row, want->state + i * want->per_row,
				    want->per_row * sizeof(float)), 0,
			     "%s: optimizer state of row %zu differs", what, i);
	}
	cr_assert(snap_equal(want, got), "%s", what);
}

static void ids_from(uint64_t *ids, size_t n, uint64_t first)
{
	for (size_t i = 0; i < n; i++)
		ids[i] = scramble(first + i);
}

/* Table "big": BIG_ROWS rows of dim 64, tens of MB, so that a full
 * checkpoint of it takes long enough to be caught running. */
#define BIG_ROWS 100000

static uint32_t big_table(emdb_client *c, emdb_opt_kind opt)
{
	uint32_t t = create_table(c, "big", 64, opt, 1);
	uint64_t *ids = emdb_malloc(BIG_ROWS * sizeof(*ids));
	cr_assert_not_null(ids);
	ids_from(ids, BIG_ROWS, 1);
	insert(c, t, ids, BIG_ROWS);
	emdb_free(ids);
	return t;
}

/* ---- every optimizer, FULL, bit for bit ------------------------------ */

#define N_OPT 5
#define N_OLD 40
#define N_NEW 12

Test(server_ckpt, full_checkpoint_restores_every_optimizer_bit_exact, .init = start_persist,
     .fini = stop_all, .timeout = 120)
{
	static const emdb_opt_kind kinds[N_OPT] = { EMDB_OPT_SGD, EMDB_OPT_ADAGRAD,
						   EMDB_OPT_ROWWISE_ADAGRAD, EMDB_OPT_ADAM, EMDB_OPT_FTRL };
	static const uint32_t dims[N_OPT] = { 4, 5, 3, 7, 2 };
	emdb_client *c = test_client_open(srv.tcp_uri, CALL_MS);
	uint32_t t[N_OPT];
	uint64_t ids[N_OLD + N_NEW];
	ids_from(ids, N_OLD + N_NEW, 1000);
	char name[32];
	for (int k = 0; k < N_OPT; k++) {
		snprintf(name, sizeof(name), "t_%s", emdb_optimizer_name(kinds[k]));
		t[k] = create_table(c, name, dims[k], kinds[k], 100 + (uint64_t)k);
		insert(c, t[k], ids, N_OLD);
		for (uint32_t r = 0; r < 3; r++)
			train(c, t[k], dims[k], ids + r * 5, N_OLD - r * 10, r);
	}

	emdb_ckpt_info ck;
	OK(emdb_client_checkpoint(c, EMDB_CKPT_FULL, &ck));
	cr_assert_eq(ck.kind, EMDB_CKPT_FULL);
	cr_assert_eq(ck.tables, N_OPT);
	cr_assert_eq(ck.parent, 0);
	cr_assert_eq(ck.base, ck.id);
	cr_assert_eq(ck.rows, N_OPT * N_OLD);
	cr_assert_eq(ck.rows_total, N_OPT * N_OLD);
	cr_assert_eq(ck.max_step, 3);

	snap at_ckpt[N_OPT], later;
	for (int k = 0; k < N_OPT; k++)
		snap_take(c, t[k], ids, N_OLD + N_NEW, &at_ckpt[k]);

	/* Keep training, with rows the checkpoint never saw. */
	for (int k = 0; k < N_OPT; k++) {
		insert(c, t[k], ids + N_OLD, N_NEW);
		train(c, t[k], dims[k], ids, N_OLD + N_NEW, 9);
		train(c, t[k], dims[k], ids + 20, 10, 10);
		snap_take(c, t[k], ids, N_OLD + N_NEW, &later);
		cr_assert(!snap_equal(&at_ckpt[k], &later), "training after the checkpoint changed nothing");
		snap_free(&later);
	}

	/* Restore through the other socket and compare everything. */
	emdb_client *u = test_client_open(srv.unix_uri, CALL_MS);
	emdb_ckpt_info rs;
	OK(emdb_client_restore(u, ck.id, &rs));
	cr_assert_eq(rs.id, ck.id);
	for (int k = 0; k < N_OPT; k++) {
		snap_take(c, t[k], ids, N_OLD + N_NEW, &later);
		snap_assert_equal(&at_ckpt[k], &later, emdb_optimizer_name(kinds[k]));
		for (size_t i = N_OLD; i < N_OLD + N_NEW; i++)
			cr_assert_eq(later.found[i], 0, "a row inserted after the checkpoint survived");
		snap_free(&later);
		snap_free(&at_ckpt[k]);
	}

	/* The last job is the restore, and INFO says so. */
	emdb_job_status st;
	OK(emdb_client_job_status(c, 0, &st));
	cr_assert_eq(st.kind, EMDB_JOB_RESTORE);
	cr_assert_eq(st.state, EMDB_JOB_DONE);
	cr_assert_eq(st.result.id, ck.id);
	cr_assert_eq(st.job, 2);
	OK(emdb_client_job_status(c, 1, &st));
	cr_assert_eq(st.kind, EMDB_JOB_CHECKPOINT_FULL);
	cr_assert_eq(st.progress.phase, EMDB_PHASE_DONE);
	cr_assert_eq(st.progress.rows_done, N_OPT * N_OLD);
	char *text;
	OK(emdb_client_info(c, "persistence", &text));
	cr_assert(strstr(text, "# Persistence\nenabled: yes\n"), "%s", text);
	cr_assert(strstr(text, "checkpoints: 1\n"), "%s", text);
	cr_assert(strstr(text, "store_error: none\n"), "%s", text);
	cr_assert(strstr(text, "job_kind: restore\njob_state: done\n"), "%s", text);
	emdb_free(text);
	emdb_client_close(u);
	emdb_client_close(c);
}

/* ---- an incremental chain -------------------------------------------- */

#define CH_BASE 100
#define CH_TOTAL 200

Test(server_ckpt, incremental_chain_restores_each_link, .init = start_persist, .fini = stop_all,
     .timeout = 120)
{
	emdb_client *c = test_client_open(srv.tcp_uri, CALL_MS);
	uint32_t ta = create_table(c, "ada", 4, EMDB_OPT_ADAGRAD, 1);
	uint32_t tb = create_table(c, "adam", 3, EMDB_OPT_ADAM, 2);
	uint64_t ids[CH_TOTAL];
	ids_from(ids, CH_TOTAL, 5000);
	emdb_ckpt_info link[4];
	snap at[4][2];

	insert(c, ta, ids, CH_BASE);
	insert(c, tb, ids, CH_BASE);
	train(c, ta, 4, ids, CH_BASE, 0);
	train(c, tb, 3, ids, CH_BASE, 0);
	FAILS(emdb_client_checkpoint(c, (emdb_ckpt_kind)3, NULL), EMDB_ERR_INVALID, "kind");
	OK(emdb_client_checkpoint(c, EMDB_CKPT_FULL, &link[0]));
	snap_take(c, ta, ids, CH_TOTAL, &at[0][0]);
	snap_take(c, tb, ids, CH_TOTAL, &at[0][1]);

	/* Link 1: 20 rows inserted and trained, 30 old rows updated. */
	insert(c, ta, ids + CH_BASE, 20);
	train(c, ta, 4, ids + CH_BASE - 30, 50, 1);
	train(c, tb, 3, ids, 30, 1);
	OK(emdb_client_checkpoint(c, EMDB_CKPT_INCREMENTAL, &link[1]));
	snap_take(c, ta, ids, CH_TOTAL, &at[1][0]);
	snap_take(c, tb, ids, CH_TOTAL, &at[1][1]);
	/* Link 2: only some of link 1's new rows; table b untouched. */
	train(c, ta, 4, ids + CH_BASE, 10, 2);
	OK(emdb_client_checkpoint(c, EMDB_CKPT_INCREMENTAL, &link[2]));
	snap_take(c, ta, ids, CH_TOTAL, &at[2][0]);
	snap_take(c, tb, ids, CH_TOTAL, &at[2][1]);
	/* Link 3: new rows in b (inserted, not trained), a few old ones of a. */
	insert(c, tb, ids + CH_BASE, 5);
	train(c, ta, 4, ids, 5, 3);
	OK(emdb_client_checkpoint(c, EMDB_CKPT_INCREMENTAL, &link[3]));
	snap_take(c, ta, ids, CH_TOTAL, &at[3][0]);
	snap_take(c, tb, ids, CH_TOTAL, &at[3][1]);

	for (int i = 1; i < 4; i++) {
		cr_assert_eq(link[i].kind, EMDB_CKPT_INCREMENTAL);
		cr_assert_eq(link[i].parent, link[i - 1].id);
		cr_assert_eq(link[i].base, link[0].id);
		cr_assert_lt(link[i].rows, link[i].rows_total, "link %d wrote every row", i);
	}
	cr_assert_eq(link[3].rows_total, (CH_BASE + 20) + (CH_BASE + 5));
	cr_assert_leq(link[2].rows, 10, "link 2 wrote %llu rows for 10 changed",
		      (unsigned long long)link[2].rows);

	/* More training, then back to the end of the chain, then to link 1. */
	insert(c, ta, ids + 150, 50);
	train(c, ta, 4, ids, CH_TOTAL, 4);
	train(c, tb, 3, ids, CH_BASE, 4);
	snap now;
	OK(emdb_client_restore(c, link[3].id, NULL));
	snap_take(c, ta, ids, CH_TOTAL, &now);
	snap_assert_equal(&at[3][0], &now, "link 3, table a");
	snap_free(&now);
	snap_take(c, tb, ids, CH_TOTAL, &now);
	snap_assert_equal(&at[3][1], &now, "link 3, table b");
	snap_free(&now);
	OK(emdb_client_restore(c, link[1].id, NULL));
	snap_take(c, ta, ids, CH_TOTAL, &now);
	snap_assert_equal(&at[1][0], &now, "link 1, table a");
	snap_free(&now);
	snap_take(c, tb, ids, CH_TOTAL, &now);
	snap_assert_equal(&at[1][1], &now, "link 1, table b");
	snap_free(&now);

	/* The list shows the chain. */
	emdb_ckpt_info *list;
	size_t n;
	OK(emdb_client_checkpoint_list(c, &list, &n));
	cr_assert_eq(n, 4);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(memcmp(&list[i], &link[i], sizeof(link[i])), 0, "list entry %zu", i);
	emdb_free(list);
	for (int i = 0; i < 4; i++) {
		snap_free(&at[i][0]);
		snap_free(&at[i][1]);
	}
	emdb_client_close(c);
}

/* ---- list, delete, retention ------------------------------------------ */

static size_t list_ids(emdb_client *c, uint64_t *out, size_t cap)
{
	emdb_ckpt_info *list;
	size_t n;
	OK(emdb_client_checkpoint_list(c, &list, &n));
	for (size_t i = 0; i < n && i < cap; i++)
		out[i] = list[i].id;
	emdb_free(list);
	return n;
}

Test(server_ckpt, list_delete_and_retention, .init = start_persist, .fini = stop_all, .timeout = 120)
{
	emdb_client *c = test_client_open(srv.tcp_uri, CALL_MS);
	uint32_t t = create_table(c, "t", 4, EMDB_OPT_SGD, 3);
	uint64_t ids[20], got[8];
	ids_from(ids, 20, 1);
	insert(c, t, ids, 20);

	emdb_ckpt_info *list = (emdb_ckpt_info *)1;
	size_t n = 99;
	OK(emdb_client_checkpoint_list(c, &list, &n));
	cr_assert_eq(n, 0);
	emdb_free(list);

	emdb_ckpt_info a, b;
	OK(emdb_client_checkpoint(c, EMDB_CKPT_FULL, &a));
	train(c, t, 4, ids, 5, 0);
	OK(emdb_client_checkpoint(c, EMDB_CKPT_INCREMENTAL, &b));
	cr_assert_eq(list_ids(c, got, 8), 2);
	cr_assert_eq(got[0], a.id);
	cr_assert_eq(got[1], b.id);

	char num[32];
	snprintf(num, sizeof(num), "%llu", (unsigned long long)b.id);
	FAILS(emdb_client_checkpoint_delete(c, a.id), EMDB_ERR_BUSY, num);
	FAILS(emdb_client_checkpoint_delete(c, 9999), EMDB_ERR_INVALID, "9999");
	cr_assert_eq(list_ids(c, got, 8), 2, "a refused delete deleted something");
	OK(emdb_client_checkpoint_delete(c, b.id));
	OK(emdb_client_checkpoint_delete(c, a.id));
	cr_assert_eq(list_ids(c, got, 8), 0);
	FAILS(emdb_client_restore(c, 0, NULL), EMDB_ERR_INVALID, "checkpoint");

	/* Retention: the newest two stay. */
	FAILS(emdb_client_config_set(c, "checkpoint_keep", "two"), EMDB_ERR_INVALID, "checkpoint_keep");
	OK(emdb_client_config_set(c, "checkpoint_keep", "2"));
	emdb_ckpt_info x[3];
	for (int i = 0; i < 3; i++) {
		train(c, t, 4, ids, 20, (uint32_t)i + 1);
		OK(emdb_client_checkpoint(c, EMDB_CKPT_FULL, &x[i]));
	}
	cr_assert_eq(list_ids(c, got, 8), 2);
	cr_assert_eq(got[0], x[1].id);
	cr_assert_eq(got[1], x[2].id);
	/* An incremental chain is kept whole while its last link is kept. */
	OK(emdb_client_config_set(c, "checkpoint_keep", "1"));
	train(c, t, 4, ids, 3, 7);
	emdb_ckpt_info y;
	OK(emdb_client_checkpoint(c, EMDB_CKPT_INCREMENTAL, &y));
	cr_assert_eq(list_ids(c, got, 8), 2);
	cr_assert_eq(got[0], x[2].id);
	cr_assert_eq(got[1], y.id);
	OK(emdb_client_config_set(c, "checkpoint_keep", "0"));
	OK(emdb_client_checkpoint(c, EMDB_CKPT_FULL, NULL));
	cr_assert_eq(list_ids(c, got, 8), 3);

	/* Start-only keys stay as they are. */
	FAILS(emdb_client_config_set(c, "data_dir", "/tmp/elsewhere"), EMDB_ERR_INVALID, "data_dir");
	FAILS(emdb_client_config_set(c, "restore", "latest"), EMDB_ERR_INVALID, "restore");
	emdb_client_close(c);
}

/* ---- restore at start ------------------------------------------------- */

/* Run emdb-server with argv and expect it to exit with `status` within
 * 30 s; its log is in `log`. */
static void expect_exit(const char *const *argv, const char *log, int status)
{
	pid_t p = fork();
	cr_assert_geq(p, 0);
	if (p == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	int st = 0;
	for (int i = 0; i < 3000; i++) {
		if (waitpid(p, &st, WNOHANG) == p)
			break;
		test_sleep_ms(10);
		if (i == 2999) {
			kill(p, SIGKILL);
			waitpid(p, NULL, 0);
			cr_assert_fail("emdb-server did not exit: %s", server_log_tail(log));
		}
	}
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == status, "exit status 0x%x, expected %d: %s", st,
		  status, server_log_tail(log));
}

Test(server_ckpt, restore_latest_at_start_on_the_same_data_dir, .init = start_persist,
     .fini = stop_all, .timeout = 180)
{
	emdb_client *c = test_client_open(srv.tcp_uri, CALL_MS);
	uint32_t t = create_table(c, "emb", 6, EMDB_OPT_ADAM, 11);
	uint64_t ids[80];
	ids_from(ids, 80, 77);
	insert(c, t, ids, 60);
	train(c, t, 6, ids, 60, 0);
	emdb_ckpt_info full, incr;
	OK(emdb_client_checkpoint(c, EMDB_CKPT_FULL, &full));
	snap at_full, at_incr, got;
	snap_take(c, t, ids, 80, &at_full);
	insert(c, t, ids + 60, 20);
	train(c, t, 6, ids + 30, 50, 1);
	OK(emdb_client_checkpoint(c, EMDB_CKPT_INCREMENTAL, &incr));
	snap_take(c, t, ids, 80, &at_incr);
	train(c, t, 6, ids, 80, 2); /* not checkpointed: lost on restart */
	shutdown_and_reap(&srv, c);

	/* A second server on the same directory, restoring the latest. */
	static const char *const latest[] = { "--restore", "latest", NULL };
	start_on_data_dir(&srv2, latest);
	c = test_client_open(srv2.unix_uri, CALL_MS);
	uint32_t t2;
	OK(emdb_client_table_find(c, "emb", &t2));
	cr_assert_eq(t2, t, "the table keeps its id");
	snap_take(c, t2, ids, 80, &got);
	snap_assert_equal(&at_incr, &got, "restored at start");
	snap_free(&got);
	emdb_job_status st;
	OK(emdb_client_job_status(c, 0, &st));
	cr_assert_eq(st.job, 1);
	cr_assert_eq(st.kind, EMDB_JOB_RESTORE);
	cr_assert_eq(st.state, EMDB_JOB_DONE);
	cr_assert_eq(st.result.id, incr.id);
	/* The restored checkpoint is one an incremental may extend. */
	train(c, t2, 6, ids, 10, 3);
	emdb_ckpt_info next;
	OK(emdb_client_checkpoint(c, EMDB_CKPT_INCREMENTAL, &next));
	cr_assert_eq(next.parent, incr.id);
	test_server_stop(&srv2);
	emdb_client_close(c);

	/* By id: the full checkpoint. */
	char id[32];
	snprintf(id, sizeof(id), "%llu", (unsigned long long)full.id);
	const char *const by_id[] = { "--restore", id, NULL };
	start_on_data_dir(&srv2, by_id);
	c = test_client_open(srv2.tcp_uri, CALL_MS);
	snap_take(c, t, ids, 80, &got);
	snap_assert_equal(&at_full, &got, "restored at start by id");
	snap_free(&got);
	emdb_client_close(c);
	test_server_stop(&srv2);

	/* A checkpoint that is not there: the server says so and exits 1. */
	const char *log = exit_log;
	snprintf(exit_log, sizeof(exit_log), "/tmp/emdb-ckpt-test-%d.log", (int)getpid());
	const char *const bad[] = { server_bin(), "--bind", "127.0.0.1", "--port", "0", "--data-dir",
				    data_dir, "--restore", "77", NULL };
	expect_exit(bad, log, 1);
	cr_assert(strstr(server_log_tail(log), "restore 77"), "%s", server_log_tail(log));
	const char *const no_dir[] = { server_bin(), "--bind", "127.0.0.1", "--port", "0", "--restore",
				       "latest", NULL };
	expect_exit(no_dir, log, 1);
	cr_assert(strstr(server_log_tail(log), "data_dir"), "%s", server_log_tail(log));

	snap_free(&at_full);
	snap_free(&at_incr);
}

/* A store that lost a complete checkpoint's manifest (as a damaged WAL
 * record did) is not taken for an older one: the server refuses to start,
 * saying what is damaged and how to proceed; with --accept-data-loss 1 it
 * starts from what is whole and logs what it gave up. */
Test(server_ckpt, a_damaged_store_refuses_to_start_until_the_loss_is_accepted, .init = start_persist,
     .fini = stop_all, .timeout = 120)
{
	emdb_client *c = test_client_open(srv.tcp_uri, CALL_MS);
	uint32_t t = create_table(c, "emb", 4, EMDB_OPT_SGD, 5);
	uint64_t ids[50];
	ids_from(ids, 50, 1);
	insert(c, t, ids, 50);
	emdb_ckpt_info older, newer;
	OK(emdb_client_checkpoint(c, EMDB_CKPT_FULL, &older));
	train(c, t, 4, ids, 50, 1);
	OK(emdb_client_checkpoint(c, EMDB_CKPT_FULL, &newer));
	shutdown_and_reap(&srv, c);
	su_raw raw;
	su_raw_open(data_dir, &raw);
	su_raw_drop_manifest(&raw, newer.id);
	su_raw_close(&raw);

	snprintf(exit_log, sizeof(exit_log), "/tmp/emdb-ckpt-test-%d.log", (int)getpid());
	const char *const argv[] = { server_bin(), "--bind", "127.0.0.1", "--port", "0", "--data-dir",
				     data_dir, "--restore", "latest", NULL };
	expect_exit(argv, exit_log, 1);
	char want[64];
	snprintf(want, sizeof(want), "checkpoint %llu: its manifest is missing", (unsigned long long)newer.id);
	const char *tail = server_log_tail(exit_log);
	cr_assert(strstr(tail, want) && strstr(tail, data_dir) && strstr(tail, "--accept-data-loss 1"), "%s",
		  tail);

	static const char *const accept[] = { "--restore", "latest", "--accept-data-loss", "1", NULL };
	start_on_data_dir(&srv2, accept);
	c = test_client_open(srv2.tcp_uri, CALL_MS);
	uint64_t listed[4];
	cr_assert_eq(list_ids(c, listed, 4), 1);
	cr_assert_eq(listed[0], older.id);
	emdb_job_status st;
	OK(emdb_client_job_status(c, 0, &st));
	cr_assert_eq(st.state, EMDB_JOB_DONE);
	cr_assert_eq(st.result.id, older.id, "the loss accepted, latest is the older checkpoint");
	cr_assert(strstr(test_server_log_tail(&srv2), "accept_data_loss"), "%s", test_server_log_tail(&srv2));
	emdb_client_close(c);
}

Test(server_ckpt, restore_latest_on_an_empty_store_starts_empty, .fini = stop_all, .timeout = 60)
{
	make_data_dir();
	static const char *const latest[] = { "--restore", "latest", NULL };
	start_on_data_dir(&srv, latest);
	emdb_client *c = test_client_open(srv.tcp_uri, CALL_MS);
	size_t n = 9;
	OK(emdb_client_table_list(c, NULL, 0, &n));
	cr_assert_eq(n, 0);
	emdb_job_status st;
	OK(emdb_client_job_status(c, 0, &st));
	cr_assert_eq(st.state, EMDB_JOB_IDLE, "no job ran");
	cr_assert_eq(st.job, 0);
	cr_assert(strstr(test_server_log_tail(&srv), "nothing to restore"), "%s",
		  test_server_log_tail(&srv));
	emdb_client_close(c);
}

/* ---- automatic checkpoints --------------------------------------------- */

/* Wait until the store holds at least `want` checkpoints and no job runs. */
static size_t wait_for_checkpoints(emdb_client *c, size_t want, int seconds)
{
	size_t n = 0;
	for (int i = 0; i < seconds * 20; i++) {
		uint64_t got[64];
		n = list_ids(c, got, 64);
		emdb_job_status st;
		OK(emdb_client_job_status(c, 0, &st));
		if (n >= want && st.state != EMDB_JOB_RUNNING)
			break;
		test_sleep_ms(50);
	}
	return n;
}

static void start_every_steps(void)
{
	static const char *const flags[] = { "--checkpoint-every-steps", "3", "--checkpoint-full-every",
					     "2", NULL };
	make_data_dir();
	start_on_data_dir(&srv, flags);
}

Test(server_ckpt, automatic_checkpoints_every_steps, .init = start_every_steps, .fini = stop_all,
     .timeout = 120)
{
	emdb_client *c = test_client_open(srv.tcp_uri, CALL_MS);
	uint32_t t = create_table(c, "t", 4, EMDB_OPT_ROWWISE_ADAGRAD, 5);
	uint64_t ids[30];
	ids_from(ids, 30, 9);
	insert(c, t, ids, 30);
	train(c, t, 4, ids, 30, 0);
	train(c, t, 4, ids, 10, 1);
	cr_assert_eq(wait_for_checkpoints(c, 0, 1), 0, "2 steps of 3 started a checkpoint");
	train(c, t, 4, ids, 10, 2);
	cr_assert_geq(wait_for_checkpoints(c, 1, 30), 1, "no checkpoint after 3 steps: %s",
		      test_server_log_tail(&srv));
	for (uint32_t r = 3; r < 6; r++)
		train(c, t, 4, ids + r, 10, r);
	cr_assert_geq(wait_for_checkpoints(c, 2, 30), 2, "no second checkpoint: %s",
		      test_server_log_tail(&srv));

	emdb_ckpt_info *list;
	size_t n;
	OK(emdb_client_checkpoint_list(c, &list, &n));
	cr_assert_eq(list[0].kind, EMDB_CKPT_FULL, "the first automatic checkpoint is full");
	cr_assert_eq(list[1].kind, EMDB_CKPT_INCREMENTAL, "full_every 2: the second is incremental");
	cr_assert_eq(list[1].parent, list[0].id);
	emdb_free(list);
	char *text;
	OK(emdb_client_info(c, "persistence", &text));
	cr_assert(strstr(text, "checkpoint_every_steps: 3\n"), "%s", text);
	cr_assert(strstr(text, "automatic_checkpoints: "), "%s", text);
	emdb_free(text);

	/* Off again: steps no longer start checkpoints. */
	OK(emdb_client_config_set(c, "checkpoint_every_steps", "0"));
	size_t before = wait_for_checkpoints(c, 0, 1);
	for (uint32_t r = 0; r < 7; r++)
		train(c, t, 4, ids, 5, 10 + r);
	test_sleep_ms(300);
	cr_assert_eq(wait_for_checkpoints(c, 0, 1), before);
	emdb_client_close(c);
}

/* A PUSH_UPDATE is a step, as an UPDATE is: three start a checkpoint; a
 * refused one counts nothing. */
Test(server_ckpt, push_update_counts_as_a_step, .init = start_every_steps, .fini = stop_all,
     .timeout = 120)
{
	emdb_client *c = test_client_open(srv.tcp_uri, CALL_MS);
	uint32_t t = create_table(c, "t", 4, EMDB_OPT_SGD, 5);
	uint64_t ids[10];
	float g[50];
	ids_from(ids, 10, 3);
	for (int i = 0; i < 50; i++)
		g[i] = (float)(i % 7) / 8.0f;
	uint64_t rows = 0;
	OK(emdb_client_push_update(c, t, ids, 10, 4, g, &rows));
	cr_assert_eq(rows, 10);
	cr_assert_eq(emdb_client_push_update(c, t, ids, 10, 5, g, NULL), EMDB_ERR_DIM);
	OK(emdb_client_push_update(c, t, ids, 10, 4, g, NULL));
	cr_assert_eq(wait_for_checkpoints(c, 0, 1), 0, "2 steps of 3 started a checkpoint");
	char *text;
	OK(emdb_client_info(c, "persistence", &text));
	cr_assert(strstr(text, "steps_since_checkpoint: 2\n"), "%s", text);
	emdb_free(text);
	OK(emdb_client_push_update(c, t, ids, 10, 4, g, NULL));
	cr_assert_geq(wait_for_checkpoints(c, 1, 30), 1, "no checkpoint after 3 steps: %s",
		      test_server_log_tail(&srv));
	OK(emdb_client_info(c, "ops", &text));
	cr_assert(strstr(text, "op_push_update: calls=4 errors=1"), "%s", text);
	cr_assert_null(strstr(text, "op_update:"), "%s", text);
	emdb_free(text);
	emdb_table_info info;
	OK(emdb_client_table_describe(c, t, &info));
	cr_assert_eq(info.stats.step, 3);
	emdb_client_close(c);
}

static void start_every_second(void)
{
	static const char *const flags[] = { "--checkpoint-every-seconds", "1", NULL };
	make_data_dir();
	start_on_data_dir(&srv, flags);
}

Test(server_ckpt, automatic_checkpoints_every_seconds, .init = start_every_second,
     .fini = stop_all, .timeout = 120)
{
	emdb_client *c = test_client_open(srv.tcp_uri, CALL_MS);
	uint32_t t = create_table(c, "t", 3, EMDB_OPT_SGD, 5);
	uint64_t ids[10];
	ids_from(ids, 10, 3);
	insert(c, t, ids, 10);
	cr_assert_geq(wait_for_checkpoints(c, 2, 30), 2, "%s", test_server_log_tail(&srv));
	OK(emdb_client_config_set(c, "checkpoint_every_seconds", "0"));
	emdb_client_close(c);
}

/* ---- errors --------------------------------------------------------- */

Test(server_ckpt, without_data_dir_everything_is_unsupported, .init = start_plain,
     .fini = stop_all, .timeout = 60)
{
	emdb_client *c = test_client_open(srv.tcp_uri, CALL_MS);
	uint64_t job;
	emdb_job_status st;
	emdb_ckpt_info *list;
	size_t n;
	FAILS(emdb_client_checkpoint_start(c, EMDB_CKPT_FULL, &job), EMDB_ERR_UNSUPPORTED, "--data-dir");
	FAILS(emdb_client_restore_start(c, 0, &job), EMDB_ERR_UNSUPPORTED, "--data-dir");
	FAILS(emdb_client_job_status(c, 0, &st), EMDB_ERR_UNSUPPORTED, "--data-dir");
	FAILS(emdb_client_checkpoint_list(c, &list, &n), EMDB_ERR_UNSUPPORTED, "--data-dir");
	FAILS(emdb_client_checkpoint_delete(c, 1), EMDB_ERR_UNSUPPORTED, "--data-dir");
	FAILS(emdb_client_checkpoint(c, EMDB_CKPT_FULL, NULL), EMDB_ERR_UNSUPPORTED, "persistence is off");
	char *text;
	OK(emdb_client_info(c, "persistence", &text));
	cr_assert(strstr(text, "enabled: no\n"), "%s", text);
	emdb_free(text);
	OK(emdb_client_ping(c));
	emdb_client_close(c);

	emdb_client *m;
	OK(emdb_client_connect("mem://", NULL, &m));
	FAILS(emdb_client_checkpoint_start(m, EMDB_CKPT_FULL, &job), EMDB_ERR_UNSUPPORTED, "mem://");
	FAILS(emdb_client_checkpoint_list(m, &list, &n), EMDB_ERR_UNSUPPORTED, "mem://");
	emdb_client_close(m);
}

static int polls;

static void count_polls(void *arg, const emdb_job_status *st)
{
	(void)arg;
	cr_assert(st->state == EMDB_JOB_RUNNING || st->state == EMDB_JOB_DONE);
	polls++;
}

Test(server_ckpt, busy_invalid_and_unknown_jobs, .init = start_persist, .fini = stop_all,
     .timeout = 180)
{
	emdb_client *c = test_client_open(srv.tcp_uri, CALL_MS);
	emdb_job_status st;
	OK(emdb_client_job_status(c, 0, &st));
	cr_assert_eq(st.state, EMDB_JOB_IDLE);
	FAILS(emdb_client_job_status(c, 1, &st), EMDB_ERR_INVALID, "no job");
	FAILS(emdb_client_restore_start(c, 0, NULL), EMDB_ERR_INVALID, "checkpoint");
	FAILS(emdb_client_checkpoint_start(c, EMDB_CKPT_INCREMENTAL, NULL), EMDB_ERR_INVALID, "full");
	FAILS(emdb_client_job_wait(c, 0, 1000, 10, NULL, NULL, NULL), EMDB_ERR_INVALID, "no job");

	/* Enough rows that a full checkpoint outlasts a few requests. */
	size_t n = BIG_ROWS;
	uint32_t t = big_table(c, EMDB_OPT_ADAM);

	uint64_t job = 0, other = 0;
	OK(emdb_client_checkpoint_start(c, EMDB_CKPT_FULL, &job));
	cr_assert_eq(job, 1);
	char name[32];
	snprintf(name, sizeof(name), "job %llu", (unsigned long long)job);
	FAILS(emdb_client_checkpoint_start(c, EMDB_CKPT_FULL, &other), EMDB_ERR_BUSY, name);
	FAILS(emdb_client_restore_start(c, 0, &other), EMDB_ERR_BUSY, name);
	FAILS(emdb_client_checkpoint_delete(c, 1), EMDB_ERR_BUSY, name);
	OK(emdb_client_job_status(c, job, &st));
	cr_assert_eq(st.job, job);
	cr_assert_eq(st.kind, EMDB_JOB_CHECKPOINT_FULL);
	cr_assert_eq(st.state, EMDB_JOB_RUNNING, "the job ended before a status request: make the table bigger");
	/* Data-plane requests are served meanwhile. */
	float v[64];
	uint64_t one = scramble(1);
	OK(emdb_client_lookup(c, t, &one, 1, 64, v, NULL));

	emdb_job_status end;
	polls = 0;
	OK(emdb_client_job_wait(c, job, 120000, 5, count_polls, NULL, &end));
	cr_assert_geq(polls, 1);
	cr_assert_eq(end.state, EMDB_JOB_DONE);
	cr_assert_eq(end.result.rows, n);
	cr_assert_eq(end.progress.rows_done, n);
	cr_assert_gt(end.progress.bytes_done, 0);
	cr_assert_eq(end.error, 0);

	FAILS(emdb_client_restore_start(c, 12345, &other), EMDB_ERR_INVALID, "12345");
	FAILS(emdb_client_job_status(c, 7, &st), EMDB_ERR_INVALID, "job 7");
	emdb_client_close(c);
}

Test(server_ckpt, shutdown_waits_for_the_running_job, .init = start_persist, .fini = stop_all,
     .timeout = 180)
{
	emdb_client *c = test_client_open(srv.tcp_uri, CALL_MS);
	size_t n = BIG_ROWS;
	uint32_t t = big_table(c, EMDB_OPT_ADAGRAD);
	uint64_t job;
	OK(emdb_client_checkpoint_start(c, EMDB_CKPT_FULL, &job));
	shutdown_and_reap(&srv, c);
	const char *log = test_server_log_tail(&srv);
	cr_assert(strstr(log, "job 1: full checkpoint 1 done"), "%s", log);
	cr_assert(strstr(log, "checkpoint store") && strstr(log, "closed"), "%s", log);

	/* The checkpoint is complete: a new server restores it. */
	static const char *const latest[] = { "--restore", "latest", NULL };
	start_on_data_dir(&srv2, latest);
	c = test_client_open(srv2.tcp_uri, CALL_MS);
	emdb_table_info info;
	OK(emdb_client_table_describe(c, t, &info));
	cr_assert_eq(info.stats.rows, n);
	emdb_client_close(c);
}

static void start_persist_auth(void)
{
	static const char *const flags[] = { "--admin-token", "adm1n", "--reader-token", "reader", NULL };
	make_data_dir();
	start_on_data_dir(&srv, flags);
}

Test(server_ckpt, a_reader_may_look_but_not_checkpoint, .init = start_persist_auth,
     .fini = stop_all, .timeout = 60)
{
	char uri[300];
	snprintf(uri, sizeof(uri), "%s?token=reader", srv.tcp_uri);
	emdb_client *r = test_client_open(uri, CALL_MS);
	cr_assert_eq(emdb_client_role(r), EMDB_ROLE_READER);
	FAILS(emdb_client_checkpoint_start(r, EMDB_CKPT_FULL, NULL), EMDB_ERR_AUTH, "CHECKPOINT");
	FAILS(emdb_client_restore_start(r, 0, NULL), EMDB_ERR_AUTH, "RESTORE");
	FAILS(emdb_client_checkpoint_delete(r, 1), EMDB_ERR_AUTH, "CHECKPOINT_DELETE");

	snprintf(uri, sizeof(uri), "%s?token=adm1n", srv.unix_uri);
	emdb_client *a = test_client_open(uri, CALL_MS);
	create_table(a, "t", 2, EMDB_OPT_SGD, 1);
	emdb_ckpt_info ck;
	OK(emdb_client_checkpoint(a, EMDB_CKPT_FULL, &ck));

	emdb_job_status st;
	OK(emdb_client_job_status(r, 0, &st));
	cr_assert_eq(st.state, EMDB_JOB_DONE);
	emdb_ckpt_info *list;
	size_t n;
	OK(emdb_client_checkpoint_list(r, &list, &n));
	cr_assert_eq(n, 1);
	cr_assert_eq(list[0].id, ck.id);
	emdb_free(list);
	OK(emdb_client_ping(r));
	emdb_client_close(r);
	emdb_client_close(a);
}
