/*
 * test_cluster_ckpt.c - cluster checkpoints with emdb-server processes on
 * loopback (tests/lib/cluster_harness.h), every node sharing one
 * cluster_checkpoint_dir, as an operator uses them:
 *   - a checkpoint asked of a node that is not the coordinator, of a
 *     3-node cluster, restored with `--restore latest` on 2 nodes gives
 *     bit-identical rows, optimizer state and steps on every table, and a
 *     checkpoint of those 2 restored on 3 nodes too; the listing and
 *     INFO on a node show the cluster checkpoints;
 *   - an incremental cluster checkpoint (each part extends the node's
 *     last) of 2 nodes restores on 3 bit for bit;
 *   - a checkpoint taken while a client trains through a home node
 *     (bounded count and time) holds every table at one step on every
 *     node: restored on 2 nodes, the rows are bit for bit those of the
 *     same training replayed on one engine up to that step;
 *   - with a node stopped (SIGSTOP) while the checkpoint runs, the
 *     checkpoint fails naming it and is not listed or restorable (no
 *     manifest); once the node is killed and restarted with --restore
 *     latest and the cluster restored, the next one works;
 *   - RESTORE asked of a node of a running cluster puts every node back
 *     at the checkpoint, bit for bit; one of a checkpoint that is not
 *     there changes nothing;
 *   - CLI `checkpoint` on a node of a cluster takes a cluster checkpoint,
 *     and CLI `restore latest` restores it on every node;
 *   - with checkpoint_every_steps and checkpoint_keep K on every node,
 *     training through the nodes takes automatic cluster checkpoints, K
 *     manifests are kept, the newest restores bit for bit, each node's
 *     store keeps K parts, and an orphan part (one that no manifest
 *     names, as a coordinator that died before its manifest leaves) is
 *     never listed or restored and is deleted by retention;
 *   - checkpoint_every_seconds on every node takes cluster checkpoints by
 *     the clock;
 *   - the manifest holds each ranked worker's last synchronous step (its
 *     rank, step 1, its rows), and a cluster restored with --restore
 *     takes them on at its coordinator.
 *
 * Every wait is bounded; the fixture kills every node and removes the
 * checkpoint directory, also after a failed assertion.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include <emdb/checkpoint.h>
#include <emdb/client.h>
#include <emdb/db.h>

#include "checkpoint/cluster_ckpt.h"
#include "tests/lib/cli_run.h"
/* GCC's range analysis, with this file's paths in view, believes a
 * node's socket path may overflow the URI buffer of ch_client; it cannot
 * (both are fixed sizes under /tmp). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "tests/lib/cluster_harness.h"
#pragma GCC diagnostic pop
#include "tests/lib/tmpdir.h"

#define READY_MS 20000
#define DIM_A 16
#define DIM_B 8
#define NIDS 600

static char ckdir[64];

static void init(void)
{
	strcpy(ckdir, "/tmp/emdb-cckpt-XXXXXX");
	cr_assert_not_null(mkdtemp(ckdir));
}

static void fini(void)
{
	ch_stop_all();
	tmpdir_remove(ckdir);
	ckdir[0] = 0;
}

/* A cluster of n nodes on ckdir with these settings besides (NULL: none;
 * at most 8), restoring the latest checkpoint when restore is set. */
static void start_with(int n, bool restore, const char *const *more)
{
	ch_stop_all();
	ch_init(n);
	const char *extra[24] = { "--node-timeout-ms",
				  "1000",
				  "--cluster-start-timeout-ms",
				  "15000",
				  "--cluster-checkpoint-timeout-ms",
				  "8000",
				  "--cluster-checkpoint-dir",
				  ckdir };
	size_t k = 8;
	for (size_t i = 0; more && more[i]; i++) {
		cr_assert_lt(k, 22);
		extra[k++] = more[i];
	}
	if (restore) {
		extra[k++] = "--restore";
		extra[k++] = "latest";
	}
	extra[k] = NULL;
	for (int i = 0; i < n; i++)
		ch_spawn(i, NULL, extra);
	for (int i = 0; i < n; i++)
		ch_wait_ready(i, READY_MS);
}

static void start(int n, bool restore)
{
	start_with(n, restore, NULL);
}

static emdb_table_config cfg_of(const char *name, uint32_t dim, emdb_opt_kind k)
{
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	snprintf(c.name, sizeof(c.name), "%s", name);
	c.dim = dim;
	cr_assert_eq(emdb_optimizer_defaults(k, &c.optimizer), 0);
	c.init = (emdb_init){ EMDB_INIT_NORMAL, 0, 0.05 };
	c.seed = 7;
	return c;
}

/* Table `name` created through node i; its id. */
static uint32_t create_on(int i, const char *name, uint32_t dim, emdb_opt_kind k)
{
	emdb_client *c = ch_client(i);
	emdb_table_config cfg = cfg_of(name, dim, k);
	uint32_t t;
	cr_assert_eq(emdb_client_table_create(c, &cfg, &t), EMDB_OK, "%s", emdb_client_last_error());
	emdb_client_close(c);
	return t;
}

static uint64_t id_of(size_t i)
{
	return i * 0x9E3779B97F4A7C15ull + 3; /* spread over every owner */
}

/* Step s of the deterministic training: push gradients for a window of
 * the IDs, then Update.  grads depends on (s, i) only. */
static int train_step(emdb_client *c, uint32_t t, uint32_t dim, int s)
{
	static _Thread_local uint64_t ids[200];
	static _Thread_local float g[200 * DIM_A];
	for (size_t i = 0; i < 200; i++) {
		ids[i] = id_of(((size_t)s * 37 + i * 3) % NIDS);
		for (uint32_t d = 0; d < dim; d++)
			g[i * dim + d] = 0.01f * (float)((s + (int)i + (int)d) % 11) - 0.05f;
	}
	int rc = emdb_client_push(c, t, ids, 200, dim, g);
	return rc ? rc : emdb_client_update(c, t, NULL);
}

/* The same on one engine. */
static void train_step_local(emdb_db *db, uint32_t t, uint32_t dim, int s)
{
	static uint64_t ids[200];
	static float g[200 * DIM_A];
	for (size_t i = 0; i < 200; i++) {
		ids[i] = id_of(((size_t)s * 37 + i * 3) % NIDS);
		for (uint32_t d = 0; d < dim; d++)
			g[i * dim + d] = 0.01f * (float)((s + (int)i + (int)d) % 11) - 0.05f;
	}
	cr_assert_eq(emdb_push(db, t, ids, 200, dim, g), 0);
	cr_assert_eq(emdb_update(db, t, NULL), 0);
}

/* What a user compares: every ID's row and optimizer state of a table,
 * and the table's step on every node. */
typedef struct snap {
	float *rows, *state;
	uint8_t found[NIDS];
	uint64_t step;
} snap;

static void take(snap *sn, int nodes, uint32_t t, uint32_t dim, emdb_opt_kind k)
{
	uint64_t ids[NIDS];
	for (size_t i = 0; i < NIDS; i++)
		ids[i] = id_of(i);
	uint32_t sf = emdb_optimizer_state_floats(k, dim);
	sn->rows = malloc((size_t)NIDS * dim * 4);
	sn->state = malloc((size_t)NIDS * sf * 4);
	cr_assert(sn->rows && sn->state);
	emdb_client *c = ch_client(nodes - 1);
	cr_assert_eq(emdb_client_lookup(c, t, ids, NIDS, dim, sn->rows, sn->found), EMDB_OK, "%s",
		     emdb_client_last_error());
	cr_assert_eq(emdb_client_read_state(c, t, ids, NIDS, sf, sn->state, NULL), EMDB_OK, "%s",
		     emdb_client_last_error());
	emdb_client_close(c);
	for (int i = 0; i < nodes; i++) {
		emdb_table_info ti;
		c = ch_client(i);
		cr_assert_eq(emdb_client_table_describe(c, t, &ti), EMDB_OK, "node %d: %s", i, emdb_client_last_error());
		emdb_client_close(c);
		if (i == 0)
			sn->step = ti.stats.step;
		cr_assert_eq(ti.stats.step, sn->step, "table %u: node %d at step %llu, node 0 at %llu", t, i,
			     (unsigned long long)ti.stats.step, (unsigned long long)sn->step);
	}
}

static void same(const snap *a, const snap *b, uint32_t dim, emdb_opt_kind k, const char *what)
{
	uint32_t sf = emdb_optimizer_state_floats(k, dim);
	cr_assert_eq(a->step, b->step, "%s: step %llu, the source's %llu", what, (unsigned long long)b->step,
		     (unsigned long long)a->step);
	cr_assert(memcmp(a->found, b->found, NIDS) == 0, "%s: another set of rows", what);
	cr_assert(memcmp(a->rows, b->rows, (size_t)NIDS * dim * 4) == 0, "%s: rows differ", what);
	cr_assert(memcmp(a->state, b->state, (size_t)NIDS * sf * 4) == 0, "%s: optimizer state differs", what);
}

static void snap_free(snap *s)
{
	free(s->rows);
	free(s->state);
}

/* A cluster checkpoint asked of node i; its id. */
static uint64_t checkpoint_on(int i)
{
	emdb_client *c = ch_client(i);
	emdb_ckpt_info info;
	int rc = emdb_client_checkpoint(c, EMDB_CKPT_FULL, &info);
	cr_assert_eq(rc, EMDB_OK, "checkpoint on node %d: %s\n%s", i, emdb_client_last_error(), ch_log(0));
	emdb_client_close(c);
	cr_assert_gt(info.id, 0);
	return info.id;
}

static size_t listed(int i, uint64_t *last)
{
	emdb_client *c = ch_client(i);
	emdb_ckpt_info *v;
	size_t n;
	cr_assert_eq(emdb_client_checkpoint_list(c, &v, &n), EMDB_OK, "%s", emdb_client_last_error());
	*last = n ? v[n - 1].id : 0;
	emdb_free(v);
	emdb_client_close(c);
	return n;
}

Test(cluster_ckpt, three_nodes_to_two_and_two_to_three, .init = init, .fini = fini, .timeout = 240)
{
	start(3, false);
	emdb_client *c0 = ch_client(0), *c1 = ch_client(1);
	emdb_table_config ca = cfg_of("a", DIM_A, EMDB_OPT_ADAM), cb = cfg_of("b", DIM_B, EMDB_OPT_ADAGRAD);
	uint32_t ta, tb;
	cr_assert_eq(emdb_client_table_create(c0, &ca, &ta), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(emdb_client_table_create(c1, &cb, &tb), EMDB_OK, "%s", emdb_client_last_error());
	for (int s = 0; s < 5; s++) {
		cr_assert_eq(train_step(s % 2 ? c1 : c0, ta, DIM_A, s), EMDB_OK, "%s", emdb_client_last_error());
		cr_assert_eq(train_step(s % 2 ? c0 : c1, tb, DIM_B, s), EMDB_OK, "%s", emdb_client_last_error());
	}
	emdb_client_close(c0);
	emdb_client_close(c1);
	snap a3, b3;
	take(&a3, 3, ta, DIM_A, EMDB_OPT_ADAM);
	take(&b3, 3, tb, DIM_B, EMDB_OPT_ADAGRAD);
	cr_assert_eq(a3.step, 5);
	uint64_t id = checkpoint_on(2); /* not the coordinator: forwarded */
	uint64_t last;
	cr_assert_eq(listed(1, &last), 1);
	cr_assert_eq(last, id);
	c0 = ch_client(0); /* training after it is not in it */
	cr_assert_eq(train_step(c0, ta, DIM_A, 9), EMDB_OK, "%s", emdb_client_last_error());
	emdb_client_close(c0);

	start(2, true);
	snap a2, b2;
	take(&a2, 2, ta, DIM_A, EMDB_OPT_ADAM);
	take(&b2, 2, tb, DIM_B, EMDB_OPT_ADAGRAD);
	same(&a3, &a2, DIM_A, EMDB_OPT_ADAM, "3 -> 2, table a");
	same(&b3, &b2, DIM_B, EMDB_OPT_ADAGRAD, "3 -> 2, table b");
	cr_assert(strstr(ch_log(1), "restored cluster checkpoint"), "%s", ch_log(1));
	uint64_t id2 = checkpoint_on(1);
	cr_assert_gt(id2, id);

	start(3, true);
	snap a33, b33;
	take(&a33, 3, ta, DIM_A, EMDB_OPT_ADAM);
	take(&b33, 3, tb, DIM_B, EMDB_OPT_ADAGRAD);
	same(&a3, &a33, DIM_A, EMDB_OPT_ADAM, "2 -> 3, table a");
	same(&b3, &b33, DIM_B, EMDB_OPT_ADAGRAD, "2 -> 3, table b");
	cr_assert_eq(listed(0, &last), 2);
	cr_assert_eq(last, id2);
	emdb_client *ci = ch_client(1);
	char *text = NULL;
	cr_assert_eq(emdb_client_info(ci, "persistence", &text), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert(strstr(text, "cluster_checkpoints: 2\n"), "%s", text);
	char want[64];
	snprintf(want, sizeof(want), "last_cluster_checkpoint_id: %llu\n", (unsigned long long)id2);
	cr_assert(strstr(text, want), "%s", text);
	cr_assert(strstr(text, "last_cluster_checkpoint_step: 5\n"), "%s", text);
	emdb_free(text);
	emdb_client_close(ci);
	/* Tables keep their ids: a new one numbers after them everywhere. */
	emdb_client *c = ch_client(2);
	emdb_table_config cc = cfg_of("c", DIM_B, EMDB_OPT_SGD);
	uint32_t tc;
	cr_assert_eq(emdb_client_table_create(c, &cc, &tc), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_gt(tc, tb);
	emdb_client_close(c);

	/* RESTORE on a running cluster, asked of a node that is not the
	 * coordinator: every node back at the first checkpoint, all at once;
	 * a checkpoint that is not there changes nothing. */
	c0 = ch_client(0);
	cr_assert_eq(train_step(c0, ta, DIM_A, 11), EMDB_OK, "%s", emdb_client_last_error());
	emdb_client_close(c0);
	c = ch_client(1);
	cr_assert_eq(emdb_client_restore(c, id2 + 5, NULL), EMDB_ERR_INVALID, "%s", emdb_client_last_error());
	snap a_bad;
	take(&a_bad, 3, ta, DIM_A, EMDB_OPT_ADAM);
	cr_assert_eq(a_bad.step, a3.step + 1, "a failed restore changed the step");
	emdb_ckpt_info ri;
	cr_assert_eq(emdb_client_restore(c, id, &ri), EMDB_OK, "%s\n%s", emdb_client_last_error(), ch_log(0));
	cr_assert_eq(ri.id, id);
	emdb_client_close(c);
	snap ar, br;
	take(&ar, 3, ta, DIM_A, EMDB_OPT_ADAM);
	take(&br, 3, tb, DIM_B, EMDB_OPT_ADAGRAD);
	same(&a3, &ar, DIM_A, EMDB_OPT_ADAM, "restore on 3 running nodes, table a");
	same(&b3, &br, DIM_B, EMDB_OPT_ADAGRAD, "restore on 3 running nodes, table b");
	c0 = ch_client(2); /* training goes on after it */
	cr_assert_eq(train_step(c0, ta, DIM_A, 12), EMDB_OK, "%s", emdb_client_last_error());
	emdb_client_close(c0);
	snap_free(&a_bad), snap_free(&ar), snap_free(&br);
	snap_free(&a3), snap_free(&b3), snap_free(&a2), snap_free(&b2), snap_free(&a33), snap_free(&b33);
}

Test(cluster_ckpt, incremental_restored_on_more_nodes, .init = init, .fini = fini, .timeout = 240)
{
	start(2, false);
	emdb_client *c = ch_client(1);
	emdb_table_config ca = cfg_of("a", DIM_A, EMDB_OPT_ADAM);
	uint32_t ta;
	cr_assert_eq(emdb_client_table_create(c, &ca, &ta), EMDB_OK, "%s", emdb_client_last_error());
	for (int s = 0; s < 3; s++)
		cr_assert_eq(train_step(c, ta, DIM_A, s), EMDB_OK, "%s", emdb_client_last_error());
	checkpoint_on(0);
	for (int s = 3; s < 5; s++)
		cr_assert_eq(train_step(c, ta, DIM_A, s), EMDB_OK, "%s", emdb_client_last_error());
	emdb_ckpt_info info;
	cr_assert_eq(emdb_client_checkpoint(c, EMDB_CKPT_INCREMENTAL, &info), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(info.kind, EMDB_CKPT_INCREMENTAL);
	snap want;
	take(&want, 2, ta, DIM_A, EMDB_OPT_ADAM);
	cr_assert_eq(train_step(c, ta, DIM_A, 5), EMDB_OK, "%s", emdb_client_last_error());
	emdb_client_close(c);
	start(3, true);
	snap got;
	take(&got, 3, ta, DIM_A, EMDB_OPT_ADAM);
	same(&want, &got, DIM_A, EMDB_OPT_ADAM, "an incremental cluster checkpoint, 2 -> 3");
	snap_free(&want), snap_free(&got);
}

typedef struct trainer {
	uint32_t t;
	int steps;       /* done */
	int rc;
	_Atomic int stop;
} trainer;

static void *trainer_main(void *arg)
{
	trainer *k = arg;
	emdb_client *c = ch_client(1);
	uint64_t end = ch_now_ms() + 20000;
	for (int s = 0; s < 400 && !k->stop && ch_now_ms() < end; s++) {
		if ((k->rc = train_step(c, k->t, DIM_A, s)))
			break;
		k->steps = s + 1;
	}
	emdb_client_close(c);
	return NULL;
}

Test(cluster_ckpt, under_load_one_step_everywhere, .init = init, .fini = fini, .timeout = 240)
{
	start(3, false);
	emdb_table_config ca = cfg_of("a", DIM_A, EMDB_OPT_ADAM);
	uint32_t ta = create_on(0, "a", DIM_A, EMDB_OPT_ADAM);
	trainer k = { .t = ta };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, trainer_main, &k), 0);
	uint64_t end = ch_now_ms() + 10000;
	while (k.steps < 20 && ch_now_ms() < end)
		server_sleep_ms(5);
	checkpoint_on(0);
	int at_ckpt = k.steps;
	k.stop = 1;
	pthread_join(th, NULL);
	cr_assert_eq(k.rc, EMDB_OK, "training failed: %d", k.rc);
	cr_assert_geq(at_ckpt, 20, "training did not get going");

	start(2, true);
	snap got;
	take(&got, 2, ta, DIM_A, EMDB_OPT_ADAM); /* one step on every node */
	cr_assert_geq(got.step, 20);
	cr_assert_leq(got.step, (uint64_t)k.steps);
	/* The same training on one engine up to that step: bit for bit. */
	emdb_db *db;
	cr_assert_eq(emdb_db_open(NULL, &db), 0);
	uint32_t lt;
	cr_assert_eq(emdb_table_create(db, &ca, &lt), 0);
	for (int s = 0; s < (int)got.step; s++)
		train_step_local(db, lt, DIM_A, s);
	uint64_t ids[NIDS];
	for (size_t i = 0; i < NIDS; i++)
		ids[i] = id_of(i);
	uint32_t sf = emdb_optimizer_state_floats(EMDB_OPT_ADAM, DIM_A);
	snap want = { .step = got.step, .rows = malloc(NIDS * DIM_A * 4), .state = malloc((size_t)NIDS * sf * 4) };
	cr_assert_eq(emdb_lookup(db, lt, ids, NIDS, DIM_A, want.rows, want.found), 0);
	cr_assert_eq(emdb_read_state(db, lt, ids, NIDS, want.state, NULL), 0);
	emdb_db_close(db);
	same(&want, &got, DIM_A, EMDB_OPT_ADAM, "under load");
	snap_free(&want), snap_free(&got);
}

Test(cluster_ckpt, stopped_node_leaves_no_checkpoint, .init = init, .fini = fini, .timeout = 240)
{
	start(3, false);
	emdb_client *c0 = ch_client(0);
	emdb_table_config ca = cfg_of("a", DIM_A, EMDB_OPT_SGD);
	uint32_t ta;
	cr_assert_eq(emdb_client_table_create(c0, &ca, &ta), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(train_step(c0, ta, DIM_A, 0), EMDB_OK, "%s", emdb_client_last_error());
	uint64_t good = checkpoint_on(1);

	/* It stops answering: before the HOLD reaches it, or while it writes
	 * its part (a loaded machine); either fails the checkpoint, naming it,
	 * within the node and checkpoint timeouts. */
	kill(ch.node[2].pid, SIGSTOP);
	emdb_ckpt_info info;
	int rc = emdb_client_checkpoint(c0, EMDB_CKPT_FULL, &info);
	cr_assert_eq(rc, EMDB_ERR_NODE, "a checkpoint with node 2 stopped: %d %s", rc, emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "node 2"), "%s", emdb_client_last_error());
	uint64_t last;
	cr_assert_eq(listed(0, &last), 1, "an incomplete cluster checkpoint is listed");
	cr_assert_eq(last, good);
	ch_kill(2);
	const char *again[] = { "--node-timeout-ms", "1000", "--cluster-checkpoint-timeout-ms", "8000",
				"--cluster-checkpoint-dir", ckdir, "--restore", "latest", NULL };
	ch_spawn(2, NULL, again);
	ch_wait_ready(2, READY_MS);
	cr_assert(ch_info_until(0, "ready", 15000), "the cluster is not ready again");
	/* What an operator does after a node restarted: the whole cluster
	 * back at the newest checkpoint, so that every node is at its step. */
	for (int tries = 0; tries < 50; tries++) {
		emdb_client *c = ch_client(1);
		int r = emdb_client_restore(c, 0, &info);
		emdb_client_close(c);
		if (r == EMDB_OK)
			break;
		cr_assert_eq(r, EMDB_ERR_NODE, "%s", emdb_client_last_error());
		server_sleep_ms(100);
	}
	cr_assert_eq(info.id, good);
	uint64_t next = 0;
	for (int tries = 0; tries < 50 && !next; tries++) { /* the others take it back within ~1 s */
		emdb_client *c = ch_client(0);
		if (emdb_client_checkpoint(c, EMDB_CKPT_FULL, &info) == EMDB_OK)
			next = info.id;
		emdb_client_close(c);
		if (!next)
			server_sleep_ms(100);
	}
	cr_assert_gt(next, good, "the next checkpoint after the restart failed: %s", emdb_client_last_error());
	cr_assert_eq(listed(2, &last), 2);
	emdb_client_close(c0);
}

Test(cluster_ckpt, cli_checkpoint_on_a_node, .init = init, .fini = fini, .timeout = 120)
{
	start(2, false);
	emdb_client *c = ch_client(0);
	emdb_table_config ca = cfg_of("a", DIM_A, EMDB_OPT_ADAGRAD);
	uint32_t ta;
	cr_assert_eq(emdb_client_table_create(c, &ca, &ta), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(train_step(c, ta, DIM_A, 0), EMDB_OK, "%s", emdb_client_last_error());
	char uri[200];
	snprintf(uri, sizeof(uri), "unix://%s", ch.node[1].sock);
	cli_run r = run_cli_env(NULL, NULL, ARGS("-u", uri, "checkpoint"));
	EXPECT(r, 0);
	run_free(&r);
	r = run_cli_env(NULL, NULL, ARGS("-u", uri, "checkpoint", "list"));
	EXPECT(r, 0);
	run_free(&r);
	uint64_t last;
	cr_assert_eq(listed(0, &last), 1);
	cr_assert_eq(last, 1);
	cr_assert_eq(train_step(c, ta, DIM_A, 1), EMDB_OK, "%s", emdb_client_last_error());
	r = run_cli_env(NULL, NULL, ARGS("-u", uri, "restore", "latest"));
	EXPECT(r, 0);
	run_free(&r);
	for (int i = 0; i < 2; i++) {
		emdb_client *ci = ch_client(i);
		emdb_table_info ti;
		cr_assert_eq(emdb_client_table_describe(ci, ta, &ti), EMDB_OK, "%s", emdb_client_last_error());
		cr_assert_eq(ti.stats.step, 1, "node %d at step %llu after the restore", i,
			     (unsigned long long)ti.stats.step);
		emdb_client_close(ci);
	}
	emdb_client_close(c);
}

/* The checkpoints (parts) in node r's store, read-only as a restoring
 * node reads it; their ids in ids[0..n). */
static size_t parts_of(int r, uint64_t *ids, size_t cap)
{
	char dir[128];
	snprintf(dir, sizeof(dir), "%s/rank-%d", ckdir, r);
	emdb_store_options o = EMDB_STORE_OPTIONS_INIT;
	o.read_only = 1;
	emdb_store *st;
	cr_assert_eq(emdb_store_open_ex(dir, &o, &st), EMDB_OK, "%s: %s", dir, emdb_last_error());
	emdb_ckpt_info v[64];
	size_t n;
	cr_assert_eq(emdb_store_list(st, v, 64, &n), EMDB_OK, "%s", emdb_last_error());
	emdb_store_close(st);
	for (size_t i = 0; i < n && i < cap; i++)
		ids[i] = v[i].id;
	return n;
}

static bool has(const uint64_t *ids, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

Test(cluster_ckpt, automatic_checkpoints_and_retention, .init = init, .fini = fini, .timeout = 240)
{
	/* An orphan in node 1's store: a part written with no manifest
	 * naming it, as a coordinator that died between the parts and the
	 * manifest leaves. */
	char dir[128];
	snprintf(dir, sizeof(dir), "%s/rank-1", ckdir);
	emdb_store *st;
	cr_assert_eq(emdb_store_open(dir, &st), EMDB_OK, "%s", emdb_last_error());
	emdb_db *odb;
	cr_assert_eq(emdb_db_open(NULL, &odb), 0);
	emdb_table_config co = cfg_of("orphan", DIM_B, EMDB_OPT_SGD);
	uint32_t ot;
	cr_assert_eq(emdb_table_create(odb, &co, &ot), 0);
	emdb_ckpt_info oi;
	cr_assert_eq(emdb_checkpoint(odb, st, EMDB_CKPT_FULL, &oi), EMDB_OK, "%s", emdb_last_error());
	emdb_store_close(st);
	emdb_db_close(odb);
	uint64_t orphan = oi.id;

	/* Every automatic one full, so that each store keeps exactly K. */
	const char *more[] = { "--checkpoint-every-steps", "4", "--checkpoint-keep", "2", "--checkpoint-full-every", "1", NULL };
	start_with(2, false, more);
	emdb_client *c = ch_client(0);
	emdb_table_config ca = cfg_of("a", DIM_A, EMDB_OPT_ADAM);
	uint32_t ta;
	cr_assert_eq(emdb_client_table_create(c, &ca, &ta), EMDB_OK, "%s", emdb_client_last_error());
	uint64_t last = 0;
	cr_assert_eq(listed(0, &last), 0, "the orphan part is listed as a cluster checkpoint");
	emdb_client_close(c);
	uint64_t ids[64];
	size_t np = parts_of(1, ids, 64);
	cr_assert(np == 1 && ids[0] == orphan, "node 1's store before any cluster checkpoint: %zu parts", np);

	/* Three rounds of 8 steps, half through each home node: each node
	 * counts 4 Updates a round, so at least one automatic cluster
	 * checkpoint follows each round (a node that meets another running
	 * skips its own).  Bounded: 15 s per round for a newer one to be
	 * listed. */
	emdb_client *cn[2] = { ch_client(0), ch_client(1) };
	uint64_t prev = 0;
	size_t n = 0;
	for (int round = 0; round < 3; round++) {
		for (int s = round * 8; s < round * 8 + 8; s++)
			cr_assert_eq(train_step(cn[s % 2], ta, DIM_A, s), EMDB_OK, "step %d: %s", s,
				     emdb_client_last_error());
		uint64_t end = ch_now_ms() + 15000;
		while ((n = listed(1, &last), last <= prev) && ch_now_ms() < end)
			server_sleep_ms(50);
		cr_assert_gt(last, prev, "no automatic cluster checkpoint after round %d", round);
		cr_assert_leq(n, 2, "%zu cluster checkpoints listed with checkpoint_keep 2", n);
		prev = last;
	}
	emdb_client_close(cn[0]);
	emdb_client_close(cn[1]);
	cr_assert_geq(last, 3);

	/* Nothing trains now: a manual one, at step 24 (an automatic one
	 * still running meanwhile answers BUSY). */
	uint64_t id = 0;
	for (int tries = 0; tries < 100 && !id; tries++) {
		emdb_client *ci = ch_client(1);
		emdb_ckpt_info info;
		int rc = emdb_client_checkpoint(ci, EMDB_CKPT_FULL, &info);
		emdb_client_close(ci);
		if (rc == EMDB_OK)
			id = info.id;
		else {
			cr_assert_eq(rc, EMDB_ERR_BUSY, "%s", emdb_client_last_error());
			server_sleep_ms(50);
		}
	}
	cr_assert_gt(id, prev);
	cr_assert_eq(listed(0, &last), 2, "checkpoint_keep 2");
	cr_assert_geq(last, id); /* a node's automatic one may come after it */
	for (int r = 0; r < 2; r++) {
		np = parts_of(r, ids, 64);
		cr_assert_leq(np, 2, "node %d's store keeps %zu parts with checkpoint_keep 2", r, np);
	}
	np = parts_of(1, ids, 64);
	cr_assert(!has(ids, np, orphan), "the orphan part %llu is still in node 1's store",
		  (unsigned long long)orphan);

	/* The newest restores on 2 nodes, at step 24, without the orphan's
	 * table. */
	snap before;
	take(&before, 2, ta, DIM_A, EMDB_OPT_ADAM);
	cr_assert_eq(before.step, 24);
	start(2, true);
	snap after;
	take(&after, 2, ta, DIM_A, EMDB_OPT_ADAM);
	same(&before, &after, DIM_A, EMDB_OPT_ADAM, "the newest automatic-era checkpoint");
	snap_free(&before), snap_free(&after);
	emdb_client *ci = ch_client(0);
	uint32_t none;
	cr_assert_neq(emdb_client_table_find(ci, "orphan", &none), EMDB_OK, "the orphan part was restored");
	emdb_client_close(ci);
}

typedef struct worker_arg {
	int node;
	uint32_t rank, table;
	uint64_t rows;
	int rc;
} worker_arg;

/* Ranked worker `rank` (on node `node`): its gradients, then step 1 of
 * 2 workers. */
static void *ranked_worker(void *arg)
{
	worker_arg *w = arg;
	char uri[200];
	snprintf(uri, sizeof(uri), "unix://%s", ch.node[w->node].sock);
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.worker_rank = w->rank;
	emdb_client *c = NULL;
	w->rc = emdb_client_connect(uri, &o, &c);
	uint64_t ids[40];
	float g[40 * DIM_B];
	for (size_t i = 0; i < 40; i++)
		ids[i] = id_of(i * 2 + w->rank);
	for (size_t i = 0; i < 40 * DIM_B; i++)
		g[i] = 0.01f * (float)(i % 7);
	if (w->rc == EMDB_OK)
		w->rc = emdb_client_push(c, w->table, ids, 40, DIM_B, g);
	if (w->rc == EMDB_OK)
		w->rc = emdb_client_update_sync(c, w->table, 2, &w->rows);
	emdb_client_close(c);
	return NULL;
}

Test(cluster_ckpt, ranked_workers_steps_in_the_manifest, .init = init, .fini = fini, .timeout = 240)
{
	start(2, false);
	uint32_t tb = create_on(1, "b", DIM_B, EMDB_OPT_SGD);
	/* Two ranked workers, one per node, meet at step 1 (bounded by the
	 * server's step timeout). */
	worker_arg w[2] = { { 0, 0, tb, 0, -1 }, { 1, 1, tb, 0, -1 } };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, ranked_worker, &w[0]), 0);
	ranked_worker(&w[1]);
	pthread_join(th, NULL);
	cr_assert_eq(w[0].rc, EMDB_OK, "worker 0: %d", w[0].rc);
	cr_assert_eq(w[1].rc, EMDB_OK, "worker 1: %d", w[1].rc);
	cr_assert_eq(w[0].rows, 80);
	uint64_t id = checkpoint_on(1);

	cman m;
	cr_assert_eq(cman_read(ckdir, id, &m), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(m.n_seqs, 2, "the manifest holds %u workers' steps", m.n_seqs);
	bool seen[2] = { false, false };
	for (uint32_t i = 0; i < m.n_seqs; i++) {
		cr_assert_eq(m.seqs[i].table, tb);
		cr_assert_lt(m.seqs[i].worker, 2);
		cr_assert_eq(m.seqs[i].seq, 1);
		cr_assert_eq(m.seqs[i].rows, 80);
		cr_assert_neq(m.seqs[i].session, 0);
		seen[m.seqs[i].worker] = true;
	}
	cr_assert(seen[0] && seen[1], "not every worker's step is in the manifest");
	cman_free(&m);

	start(2, true);
	cr_assert(strstr(ch_log(0), "2 ranked workers' last steps restored"), "rank 0 did not take them on:\n%s",
		  ch_log(0));
	emdb_client *c = ch_client(0);
	emdb_table_info ti;
	cr_assert_eq(emdb_client_table_describe(c, tb, &ti), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(ti.stats.step, 1);
	emdb_client_close(c);
}

Test(cluster_ckpt, automatic_checkpoints_by_the_clock, .init = init, .fini = fini, .timeout = 120)
{
	const char *more[] = { "--checkpoint-every-seconds", "1", NULL };
	start_with(2, false, more);
	uint32_t ta = create_on(1, "a", DIM_A, EMDB_OPT_SGD);
	emdb_client *c = ch_client(1);
	cr_assert_eq(train_step(c, ta, DIM_A, 0), EMDB_OK, "%s", emdb_client_last_error());
	emdb_client_close(c);
	/* checkpoint_every_seconds 1 on each node: cluster checkpoints follow
	 * by themselves, every one at step 1 on every table.  Bounded: 15 s
	 * for two. */
	uint64_t last = 0;
	size_t n = 0;
	uint64_t end = ch_now_ms() + 15000;
	while ((n = listed(0, &last)) < 2 && ch_now_ms() < end)
		server_sleep_ms(50);
	cr_assert_geq(n, 2, "%zu cluster checkpoints by the clock in 15 s", n);
	cman m;
	cr_assert_eq(cman_read(ckdir, last, &m), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(m.nodes, 2);
	cr_assert_eq(m.n_tables, 1);
	cr_assert_eq(m.tables[0].step, 1);
	cman_free(&m);
}
