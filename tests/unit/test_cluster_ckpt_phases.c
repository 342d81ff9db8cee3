/*
 * test_cluster_ckpt_phases.c - the cluster layer's checkpoint phases
 * (cluster/ckpt.c) on a 3-node cluster in one process
 * (tests/lib/cluster_mem.h), with stand-in parts that the test completes
 * or fails at will:
 *   - a checkpoint asked of a node that is not the coordinator writes
 *     every node's part at the same step and the manifest once, after
 *     every part;
 *   - an Update asked while a part is being written waits (the link idle,
 *     it has not run) and runs once the checkpoint ended, one step later;
 *   - a part that fails fails the checkpoint naming its node, the others'
 *     parts are deleted, no manifest is written, and Updates go on;
 *   - a table change (ALTER of the hyperparameters, CREATE) asked while a
 *     part is being written waits as an Update does, and applies on every
 *     node once the checkpoint ended: every part holds the old values;
 *   - a ranked worker's applied step is in the manifest (publish), and
 *     after a restore onto a new cluster its resend is answered with that
 *     step's rows, not applied again;
 *   - a hold whose coordinator never ends it lets Updates go at its
 *     timeout (cluster_tick); a hold from a node that is not the
 *     coordinator is refused.
 */
#include <criterion/criterion.h>
#include <emdb/alloc.h>
#include <pthread.h>
#include <string.h>

#include "base/clock.h"
#include "db/step.h"
#include "protocol/proto_node.h"
#include "tests/lib/cluster_mem.h"

enum { OK_NOW, DEFER, FAIL };

typedef struct fake {
	memnet *net;
	uint32_t rank, table;
	int mode;
	_Atomic(void *) token;   /* DEFER: the part to complete */
	uint64_t step_at_write;
	double lr_at_write;
	int dropped;
	uint64_t dropped_part;
	int published;
	cluster_ckpt_part parts[3];
} fake;

static fake f[3];

static int fk_write(void *ctx, uint32_t kind, uint64_t id, void *token)
{
	fake *k = ctx;
	(void)kind, (void)id;
	emdb_table_info ti;
	cr_assert_eq(emdb_table_describe(memnet_db(k->net, k->rank), k->table, &ti), 0);
	k->step_at_write = ti.stats.step;
	emdb_table_config c;
	cr_assert_eq(emdb_table_get_config(memnet_db(k->net, k->rank), k->table, &c), 0);
	k->lr_at_write = c.optimizer.lr;
	if (k->mode == DEFER)
		atomic_store(&k->token, token);
	else if (k->mode == FAIL)
		cluster_ckpt_part_done(memnet_cl(k->net, k->rank), token, EMDB_ERR_IO, 0, 0, "disk on fire");
	else
		cluster_ckpt_part_done(memnet_cl(k->net, k->rank), token, EMDB_OK, 100 + k->rank, 7, NULL);
	return EMDB_OK;
}

static void fk_drop(void *ctx, uint64_t part)
{
	fake *k = ctx;
	k->dropped++;
	k->dropped_part = part;
}

static int fk_next(void *ctx, uint64_t *id)
{
	fake *k = ctx;
	*id = (uint64_t)k->published + 1;
	return EMDB_OK;
}

/* The workers' steps the last manifest held (publish's), and what a
 * restore's swap hands back. */
static step_seq_rec published_seqs[4];
static size_t n_published_seqs;

static int fk_publish(void *ctx, uint64_t id, uint32_t kind, const cluster_ckpt_part *parts, uint32_t n,
		      const step_seq_rec *seqs, size_t nseqs, char *why, size_t whylen)
{
	fake *k = ctx;
	(void)id, (void)kind, (void)why, (void)whylen;
	cr_assert_eq(n, 3);
	cr_assert_leq(nseqs, 4);
	if (nseqs)
		memcpy(published_seqs, seqs, nseqs * sizeof(*seqs));
	n_published_seqs = nseqs;
	memcpy(k->parts, parts, sizeof(k->parts));
	k->published++;
	return EMDB_OK;
}

static int fk_resolve(void *ctx, uint64_t id, uint64_t *out)
{
	(void)ctx;
	*out = id;
	return EMDB_OK;
}

static int fk_load(void *ctx, uint64_t id, void *token)
{
	fake *k = ctx;
	(void)id;
	cluster_ckpt_part_done(memnet_cl(k->net, k->rank), token, EMDB_OK, 1, 0, NULL);
	return EMDB_OK;
}

static int fk_swap(void *ctx, step_seq_rec **seqs, size_t *nseqs)
{
	(void)ctx;
	*seqs = NULL;
	*nseqs = n_published_seqs;
	if (n_published_seqs) {
		*seqs = emdb_malloc(n_published_seqs * sizeof(**seqs));
		cr_assert_not_null(*seqs);
		memcpy(*seqs, published_seqs, n_published_seqs * sizeof(**seqs));
	}
	return EMDB_OK;
}

static void fk_discard(void *ctx)
{
	(void)ctx;
}

static const cluster_ckpt_ops fk_ops = { fk_write, fk_drop, fk_next, fk_publish, fk_resolve, fk_load, fk_swap,
					 fk_discard };

/* A finished request or checkpoint, waited for with a bound. */
typedef struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	int status;
	uint64_t id;
	char msg[300];
} waiter;

static waiter ck, up;

static void waiter_init(waiter *w)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
}

static void waiter_end(waiter *w, int status, uint64_t id, const char *msg)
{
	pthread_mutex_lock(&w->mu);
	w->status = status;
	w->id = id;
	snprintf(w->msg, sizeof(w->msg), "%s", msg ? msg : "");
	w->done = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static bool waiter_wait(waiter *w)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 20;
	pthread_mutex_lock(&w->mu);
	while (!w->done && pthread_cond_timedwait(&w->cv, &w->mu, &ts) == 0)
		;
	bool done = w->done;
	pthread_mutex_unlock(&w->mu);
	return done;
}

static void ck_done(void *arg, int status, uint64_t id, const char *msg)
{
	waiter_end(arg, status, id, msg);
}

static cluster_req upd;

static void upd_done(cluster_req *req)
{
	waiter_end(&up, req->status, req->rows, req->msg);
}

static memnet *net;
static uint32_t table;

static void setup(void)
{
	net = memnet_open(3, 0);
	cr_assert_not_null(net);
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "t");
	cfg.dim = 4;
	cluster_req c = { .op = CLUSTER_TABLE_CREATE, .cfg = &cfg };
	cr_assert_eq(cluster_run(memnet_cl(net, 1), &c), EMDB_OK, "%s", c.msg);
	table = c.table_out;
	for (uint32_t r = 0; r < 3; r++) {
		memset(&f[r], 0, sizeof(f[r]));
		f[r] = (fake){ .net = net, .rank = r, .table = table, .mode = OK_NOW };
		cluster_ckpt_set_ops(memnet_cl(net, r), &fk_ops, &f[r], 1000);
	}
	waiter_init(&ck);
	waiter_init(&up);
}

static void teardown(void)
{
	memnet_close(net);
	net = NULL;
}

static int update_now(uint32_t on)
{
	cluster_req u = { .op = CLUSTER_UPDATE, .table = table };
	int rc = cluster_run(memnet_cl(net, on), &u);
	return rc ? rc : u.status;
}

static uint64_t step_of(uint32_t r)
{
	emdb_table_info ti;
	cr_assert_eq(emdb_table_describe(memnet_db(net, r), table, &ti), 0);
	return ti.stats.step;
}

/* A checkpoint asked of node `on`, stopped while node 2 writes its part:
 * the part's token, for cluster_ckpt_part_done.  Bounded. */
static void *node2_writing(uint32_t on)
{
	f[2].mode = DEFER;
	atomic_store(&f[2].token, NULL);
	cr_assert_eq(cluster_ckpt_start(memnet_cl(net, on), 1, ck_done, &ck), EMDB_OK);
	for (int i = 0; i < 2000 && !atomic_load(&f[2].token); i++)
		memnet_quiesce(net);
	void *tok = atomic_load(&f[2].token);
	cr_assert_not_null(tok, "node 2 was never asked for its part");
	return tok;
}

/* Node 2's part written: the checkpoint ends, then what it held runs
 * (what: the assertion's words). */
static void release_node2(void *tok, const char *what)
{
	cluster_ckpt_part_done(memnet_cl(net, 2), tok, EMDB_OK, 102, 7, NULL);
	cr_assert(waiter_wait(&ck));
	cr_assert_eq(ck.status, EMDB_OK, "%s", ck.msg);
	cr_assert(waiter_wait(&up), "%s never ran", what);
	cr_assert_eq(up.status, EMDB_OK, "%s", up.msg);
}

Test(cluster_ckpt_phases, every_part_then_the_manifest, .init = setup, .fini = teardown, .timeout = 60)
{
	for (int s = 0; s < 3; s++)
		cr_assert_eq(update_now((uint32_t)s), EMDB_OK);
	cr_assert_eq(cluster_ckpt_start(memnet_cl(net, 2), 1, ck_done, &ck), EMDB_OK, "%s", emdb_last_error());
	cr_assert(waiter_wait(&ck));
	cr_assert_eq(ck.status, EMDB_OK, "%s", ck.msg);
	cr_assert_eq(ck.id, 1);
	cr_assert_eq(f[0].published, 1, "the coordinator writes the manifest once");
	for (uint32_t r = 0; r < 3; r++) {
		cr_assert_eq(f[r].step_at_write, 3, "node %u wrote its part at step %llu", r,
			     (unsigned long long)f[r].step_at_write);
		cr_assert_eq(f[0].parts[r].rank, r);
		cr_assert_eq(f[0].parts[r].part, 100 + r);
		cr_assert_eq(f[0].parts[r].rows, 7);
		cr_assert_eq(f[r].dropped, 0);
	}
	/* One at a time: a second one while none runs works too. */
	waiter_init(&ck);
	cr_assert_eq(cluster_ckpt_start(memnet_cl(net, 0), 2, ck_done, &ck), EMDB_OK);
	cr_assert(waiter_wait(&ck));
	cr_assert_eq(ck.status, EMDB_OK, "%s", ck.msg);
	cr_assert_eq(ck.id, 2);
}

Test(cluster_ckpt_phases, updates_wait_while_a_part_is_written, .init = setup, .fini = teardown, .timeout = 60)
{
	cr_assert_eq(update_now(0), EMDB_OK);
	void *tok = node2_writing(1);
	upd = (cluster_req){ .op = CLUSTER_UPDATE, .table = table, .done = upd_done };
	cr_assert_eq(cluster_submit(memnet_cl(net, 1), &upd), EMDB_OK, "%s", upd.msg);
	memnet_quiesce(net);
	pthread_mutex_lock(&up.mu);
	bool ran = up.done;
	pthread_mutex_unlock(&up.mu);
	cr_assert(!ran, "an Update ran while node 2 wrote its part");
	cr_assert_eq(step_of(1), 1);
	release_node2(tok, "the held Update");
	for (uint32_t r = 0; r < 3; r++) {
		cr_assert_eq(f[r].step_at_write, 1);
		cr_assert_eq(step_of(r), 2, "node %u", r);
	}
}

static double lr_on(uint32_t r)
{
	emdb_table_config c;
	cr_assert_eq(emdb_table_get_config(memnet_db(net, r), table, &c), 0);
	return c.optimizer.lr;
}

static bool up_done(void)
{
	pthread_mutex_lock(&up.mu);
	bool ran = up.done;
	pthread_mutex_unlock(&up.mu);
	return ran;
}

Test(cluster_ckpt_phases, table_changes_wait_while_a_part_is_written, .init = setup, .fini = teardown,
     .timeout = 60)
{
	double lr0 = lr_on(0);
	void *tok = node2_writing(1);
	/* An ALTER asked of a node that is not the coordinator while node 2
	 * writes its part. */
	emdb_table_config cfg;
	cr_assert_eq(emdb_table_get_config(memnet_db(net, 0), table, &cfg), 0);
	emdb_optimizer o = cfg.optimizer;
	o.lr = lr0 / 4;
	upd = (cluster_req){ .op = CLUSTER_TABLE_ALTER, .table = table, .opt = &o, .done = upd_done };
	cr_assert_eq(cluster_submit(memnet_cl(net, 1), &upd), EMDB_OK, "%s", upd.msg);
	memnet_quiesce(net);
	cr_assert(!up_done(), "an ALTER ran while node 2 wrote its part");
	for (uint32_t r = 0; r < 3; r++)
		cr_assert_eq(lr_on(r), lr0, "node %u has the new lr while node 2 writes its part", r);
	release_node2(tok, "the held ALTER");
	for (uint32_t r = 0; r < 3; r++) {
		cr_assert_eq(f[r].lr_at_write, lr0, "node %u's part holds lr %g", r, f[r].lr_at_write);
		cr_assert_eq(lr_on(r), lr0 / 4, "node %u has lr %g after the checkpoint", r, lr_on(r));
	}

	/* A CREATE asked of the coordinator waits as well. */
	emdb_table_config c2 = EMDB_TABLE_CONFIG_INIT;
	strcpy(c2.name, "later");
	c2.dim = 4;
	waiter_init(&ck);
	waiter_init(&up);
	tok = node2_writing(0);
	upd = (cluster_req){ .op = CLUSTER_TABLE_CREATE, .cfg = &c2, .done = upd_done };
	cr_assert_eq(cluster_submit(memnet_cl(net, 0), &upd), EMDB_OK, "%s", upd.msg);
	memnet_quiesce(net);
	cr_assert(!up_done(), "a CREATE ran while node 2 wrote its part");
	uint32_t none;
	cr_assert_neq(emdb_table_find(memnet_db(net, 0), "later", &none), EMDB_OK);
	release_node2(tok, "the held CREATE");
	for (uint32_t r = 0; r < 3; r++) {
		uint32_t id;
		cr_assert_eq(emdb_table_find(memnet_db(net, r), "later", &id), EMDB_OK, "node %u", r);
	}
}

/* Ranked worker `rank` of 2 (session) at step seq, asked of node
 * 1 + rank. */
typedef struct ranked {
	uint32_t rank;
	uint64_t seq, session;
	uint32_t timeout_ms; /* 0: 20 s */
	int rc;
	uint64_t rows;
	char msg[256];
} ranked;

static void *ranked_main(void *arg)
{
	ranked *w = arg;
	cluster_req r = { .op = CLUSTER_STEP, .table = table, .workers = 2, .worker = 70 + w->rank,
			  .timeout_ms = w->timeout_ms ? w->timeout_ms : 20000,
			  .seq = w->seq, .session = w->session, .rank = w->rank };
	int rc = cluster_run(memnet_cl(net, 1 + w->rank), &r);
	w->rc = rc ? rc : r.status;
	w->rows = r.rows;
	snprintf(w->msg, sizeof(w->msg), "%s", r.msg);
	return NULL;
}

/* Both workers' step seq, each on its own thread (bounded by the step's
 * timeout); the rows they heard. */
static uint64_t both_at(uint64_t seq)
{
	ranked w[2] = { { 0, seq, 0xa11ce, 0, 0, 0, "" }, { 1, seq, 0xb0b, 0, 0, 0, "" } };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, ranked_main, &w[0]), 0);
	ranked_main(&w[1]);
	pthread_join(th, NULL);
	cr_assert_eq(w[0].rc, EMDB_OK, "worker 0, step %llu: %s", (unsigned long long)seq, w[0].msg);
	cr_assert_eq(w[1].rc, EMDB_OK, "worker 1, step %llu: %s", (unsigned long long)seq, w[1].msg);
	cr_assert_eq(w[0].rows, w[1].rows);
	return w[0].rows;
}

Test(cluster_ckpt_phases, a_restored_ranked_step_is_answered_not_counted, .init = setup, .fini = teardown,
     .timeout = 60)
{
	uint64_t ids[8];
	float g[8 * 4];
	for (int i = 0; i < 8; i++)
		ids[i] = (uint64_t)i * 977 + 1;
	for (int i = 0; i < 32; i++)
		g[i] = 0.25f;
	cluster_req p = { .op = CLUSTER_PUSH, .table = table, .dim = 4, .ids = ids, .n = 8, .grads = g };
	cr_assert_eq(cluster_run(memnet_cl(net, 2), &p), EMDB_OK, "%s", p.msg);
	cr_assert_eq(both_at(1), 8);
	n_published_seqs = 0;
	cr_assert_eq(cluster_ckpt_start(memnet_cl(net, 2), 1, ck_done, &ck), EMDB_OK);
	cr_assert(waiter_wait(&ck));
	cr_assert_eq(ck.status, EMDB_OK, "%s", ck.msg);
	cr_assert_eq(n_published_seqs, 2, "the manifest holds %zu workers' steps", n_published_seqs);
	for (size_t i = 0; i < 2; i++) {
		const step_seq_rec *q = &published_seqs[i];
		cr_assert_eq(q->table, table);
		cr_assert_eq(q->session, q->worker ? 0xb0b : 0xa11ce);
		cr_assert_eq(q->applied, 1);
		cr_assert_eq(q->rows, 8);
	}

	/* A new cluster (the coordinator's steps forgotten, as after a
	 * restart), restored from that checkpoint: worker 0's resend of
	 * step 1 is answered at once with its rows and applied nowhere. */
	teardown();
	setup();
	cr_assert_eq(cluster_ckpt_restore(memnet_cl(net, 1), 1, ck_done, &ck), EMDB_OK, "%s", emdb_last_error());
	cr_assert(waiter_wait(&ck));
	cr_assert_eq(ck.status, EMDB_OK, "%s", ck.msg);
	ranked again = { 0, 1, 0xa11ce, 2000, 0, 0, "" }; /* counted, it would wait for worker 1: TIMEOUT */
	ranked_main(&again);
	cr_assert_eq(again.rc, EMDB_OK, "the resend after the restore: %s", again.msg);
	cr_assert_eq(again.rows, 8, "the resend heard %llu rows", (unsigned long long)again.rows);
	for (uint32_t r = 0; r < 3; r++)
		cr_assert_eq(step_of(r), 0, "node %u applied the restored step again", r);
	/* The next step counts. */
	both_at(2);
	for (uint32_t r = 0; r < 3; r++)
		cr_assert_eq(step_of(r), 1, "node %u", r);
}

Test(cluster_ckpt_phases, a_failed_part_aborts_everywhere, .init = setup, .fini = teardown, .timeout = 60)
{
	f[2].mode = FAIL;
	cr_assert_eq(cluster_ckpt_start(memnet_cl(net, 0), 1, ck_done, &ck), EMDB_OK);
	cr_assert(waiter_wait(&ck));
	cr_assert_eq(ck.status, EMDB_ERR_IO);
	cr_assert(strstr(ck.msg, "node 2") && strstr(ck.msg, "disk on fire"), "%s", ck.msg);
	cr_assert_eq(f[0].published, 0, "a manifest for an incomplete checkpoint");
	memnet_quiesce(net);
	cr_assert_eq(f[0].dropped, 1);
	cr_assert_eq(f[0].dropped_part, 100);
	cr_assert_eq(f[1].dropped, 1);
	cr_assert_eq(f[1].dropped_part, 101);
	cr_assert_eq(f[2].dropped, 0);
	cr_assert_eq(update_now(1), EMDB_OK, "Updates are let go after an abort");
}

Test(cluster_ckpt_phases, a_hold_ends_by_its_timeout, .init = setup, .fini = teardown, .timeout = 60)
{
	_Alignas(8) uint8_t frame[128];
	size_t len;
	proto_node_msg m = { .hdr = { PROTO_NODE_VERSION, 0, PROTO_NODE_CKPT_HOLD, 0, 0,
				      cluster_map(memnet_cl(net, 1))->epoch, 0 } };
	m.u.ckpt = (proto_node_ckpt){ .kind = 1, .id = 9, .timeout_ms = 1000 };
	cr_assert_eq(proto_node_encode(frame, sizeof(frame), &m, &len, NULL), EMDB_OK);
	uint8_t *reply;
	size_t rlen;
	proto_node_msg r;
	/* Not from the coordinator: refused, nothing held. */
	cr_assert_eq(memnet_send_raw(net, 2, 1, frame, len, &reply, &rlen), EMDB_OK);
	cr_assert_eq(proto_node_decode(reply, rlen, &r), EMDB_OK);
	cr_assert_eq(r.hdr.status, EMDB_ERR_PROTOCOL);
	emdb_free(reply);
	cr_assert_eq(update_now(1), EMDB_OK);
	/* From the coordinator, never ended. */
	cr_assert_eq(memnet_send_raw(net, 0, 1, frame, len, &reply, &rlen), EMDB_OK);
	cr_assert_eq(proto_node_decode(reply, rlen, &r), EMDB_OK);
	cr_assert_eq(r.hdr.status, EMDB_OK);
	emdb_free(reply);
	upd = (cluster_req){ .op = CLUSTER_UPDATE, .table = table, .done = upd_done };
	cr_assert_eq(cluster_submit(memnet_cl(net, 1), &upd), EMDB_OK);
	memnet_quiesce(net);
	pthread_mutex_lock(&up.mu);
	bool ran = up.done;
	pthread_mutex_unlock(&up.mu);
	cr_assert(!ran, "an Update ran while held");
	cluster_tick(memnet_cl(net, 1), emdb__now_ns() + 2000000000ull);
	cr_assert(waiter_wait(&up), "the hold did not end at its timeout");
	cr_assert_eq(up.status, EMDB_OK, "%s", up.msg);
	cr_assert_eq(step_of(1), 2);
}
