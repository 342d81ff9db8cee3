/*
 * cluster/admin.c - table changes across nodes: TABLE_CREATE, TABLE_DROP,
 * TABLE_RESERVE and TABLE_ALTER asked of any node apply on every node,
 * all or none.
 *
 * One node, the coordinator (rank CLUSTER_COORDINATOR), runs every change
 * as a numbered transaction, one at a time in arrival order (a queue), in
 * two phases sent to every node in ring order:
 *   PREPARE  each node checks that it can apply the change (CREATE: the
 *            configuration is valid, the name free, room under
 *            max_tables, and it answers the id it would give next; DROP
 *            and RESERVE: the table exists; ALTER: the engine would take
 *            the new values, emdb__table_check_alter);
 *   COMMIT   when every node said yes: each applies it (CREATE under the
 *            largest id any node would give, so that every node numbers
 *            the table alike and node-to-node frames can name it);
 *   ABORT    when one said no: the others forget it, and the change is
 *            refused with that node's error, applied nowhere.
 * A node other than the coordinator forwards the change (TABLE_ADMIN) and
 * answers its client with the coordinator's result.
 *
 * Invariants:
 *   1. One transaction runs at a time; table ids are agreed, never
 *      assumed, so ids stay equal on every node even after a node gave
 *      out one that another did not (a failed COMMIT).
 *   2. A COMMIT that fails on some node after others applied it (only
 *      NOMEM can: PREPARE checked the rest) is undone where it was
 *      applied for CREATE (the table is dropped again) and reported with
 *      the failing node; a DROP or RESERVE cannot be undone and is
 *      reported as applied on the other nodes.  ALTER cannot fail at
 *      COMMIT once PREPARE passed (the table cannot be dropped meanwhile:
 *      one change runs at a time).
 *   4. ALTER applies on each node at a step boundary of that node
 *      (emdb_table_alter waits for a running Update).  Every node
 *      applies it before the change is answered, so an Update asked after
 *      the answer uses the new values everywhere; an Update already in
 *      flight from another home node may meet some nodes before the
 *      change and others after (docs/cluster.md "Table changes").
 *   3. Every transaction answers its origin exactly once.
 *
 * State changes: the engines' table registries; the queue under mu.
 */
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/clock.h"
#include "base/error_int.h"
#include "cluster/cluster_int.h"
#include "db/db_cluster.h"

#define ADMIN_CALL_MS 60000u /* a forwarded change may queue behind others */

typedef struct txn txn;

typedef struct txn_call {
	cluster_call call;
	txn *t;
	uint32_t rank;
} txn_call;

struct txn {
	txn *next;
	cluster *cl;
	cluster_req *req;      /* origin: a local request, or */
	cluster_responder *r;  /* a peer's TABLE_ADMIN          */
	proto_node_admin a;
	uint32_t table;        /* header table: DROP and RESERVE */
	uint16_t phase;        /* PROTO_NODE_TABLE_PREPARE, _COMMIT, _ABORT */
	_Atomic uint32_t pending;
	_Atomic int status;
	char msg[240];
	_Atomic uint32_t max_id; /* PREPARE of CREATE: the largest next id */
	uint8_t *ok;           /* [nodes]: the phase succeeded there */
	txn_call *calls;       /* [nodes] */
};

struct admin_state {
	pthread_mutex_t mu;
	txn *head, *tail;
	uint64_t next_txn;
};

int admin_open(cluster *cl)
{
	cl->admin = emdb_calloc(1, sizeof(*cl->admin));
	if (!cl->admin)
		return emdb__seterr(EMDB_ERR_NOMEM, "cluster admin state");
	pthread_mutex_init(&cl->admin->mu, NULL);
	cl->admin->next_txn = 1;
	return EMDB_OK;
}

void admin_close(cluster *cl)
{
	if (!cl->admin)
		return;
	pthread_mutex_destroy(&cl->admin->mu);
	emdb_free(cl->admin);
	cl->admin = NULL;
}

static const char *action_name(uint32_t action)
{
	switch (action) {
	case PROTO_NODE_ADMIN_CREATE:
		return "create";
	case PROTO_NODE_ADMIN_DROP:
		return "drop";
	case PROTO_NODE_ADMIN_ALTER:
		return "alter";
	default:
		return "reserve";
	}
}

/* ---- one node's part of a phase ------------------------------------------- */

/* Run phase op of change a (table: DROP/RESERVE) on this node's engine;
 * *next the id this node would give next (PREPARE of CREATE). */
static int local_phase(cluster *cl, uint16_t op, const proto_node_admin *a, uint32_t table, uint32_t *next)
{
	emdb_table_config cfg;
	*next = 0;
	if (op == PROTO_NODE_TABLE_ABORT)
		return EMDB_OK;
	if (op == PROTO_NODE_TABLE_PREPARE) {
		if (a->action == PROTO_NODE_ADMIN_CREATE)
			return emdb__table_check_create(cl->db, &a->cfg, next);
		if (a->action == PROTO_NODE_ADMIN_ALTER)
			return emdb__table_check_alter(cl->db, table, &a->opt);
		return emdb_table_get_config(cl->db, table, &cfg);
	}
	switch (a->action) {
	case PROTO_NODE_ADMIN_CREATE:
		return emdb__table_create_as(cl->db, &a->cfg, a->id);
	case PROTO_NODE_ADMIN_DROP:
		return emdb_table_drop(cl->db, table);
	case PROTO_NODE_ADMIN_ALTER:
		return emdb_table_alter(cl->db, table, &a->opt);
	default:
		return emdb_table_reserve(cl->db, table, a->rows);
	}
}

/* ---- the coordinator's transaction ------------------------------------------ */

static void txn_start(txn *t);

static void txn_free(txn *t)
{
	emdb_free(t->ok);
	emdb_free(t->calls);
	emdb_free(t);
}

/* Answer the origin, then start the next queued transaction. */
static void txn_end(txn *t)
{
	cluster *cl = t->cl;
	int status = atomic_load(&t->status);
	uint32_t id = t->a.action == PROTO_NODE_ADMIN_CREATE ? t->a.id : t->table;
	if (t->req) {
		t->req->table_out = status ? 0 : id;
		cluster__finish(t->req, status, "%s", t->msg);
	} else {
		cluster__reply_rows(cl, t->r, PROTO_NODE_TABLE_ADMIN, t->table, status, id, t->msg);
	}
	admin_state *as = cl->admin;
	pthread_mutex_lock(&as->mu);
	as->head = t->next;
	if (!as->head)
		as->tail = NULL;
	txn *next = as->head;
	pthread_mutex_unlock(&as->mu);
	txn_free(t);
	if (next)
		txn_start(next);
}

static void txn_fail(txn *t, uint32_t rank, int status, const char *why)
{
	int expect = EMDB_OK;
	if (atomic_compare_exchange_strong(&t->status, &expect, status))
		snprintf(t->msg, sizeof(t->msg), "table %s refused by node %u: %s", action_name(t->a.action), rank, why);
}

static void phase_send(txn *t, uint16_t op);

/* A phase is over on every node: decide the next one (invariant 2). */
static void phase_over(txn *t)
{
	cluster *cl = t->cl;
	int status = atomic_load(&t->status);
	if (t->phase == PROTO_NODE_TABLE_PREPARE) {
		if (status == EMDB_OK) {
			if (t->a.action == PROTO_NODE_ADMIN_CREATE)
				t->a.id = atomic_load(&t->max_id);
			phase_send(t, PROTO_NODE_TABLE_COMMIT);
		} else {
			phase_send(t, PROTO_NODE_TABLE_ABORT);
		}
		return;
	}
	if (t->phase == PROTO_NODE_TABLE_COMMIT && status != EMDB_OK && t->a.action == PROTO_NODE_ADMIN_CREATE) {
		/* Undo where it was applied: a DROP of the new id there. */
		for (uint32_t r = 0; r < cl->nodes; r++) {
			if (!t->ok[r])
				continue;
			if (r == cl->rank)
				emdb_table_drop(cl->db, t->a.id);
			t->ok[r] = r != cl->rank;
		}
		t->a.action = PROTO_NODE_ADMIN_DROP;
		t->table = t->a.id;
		uint32_t undo = 0;
		for (uint32_t r = 0; r < cl->nodes; r++)
			undo += t->ok[r];
		if (undo) {
			t->phase = PROTO_NODE_TABLE_ABORT + 1; /* the undo */
			phase_send(t, PROTO_NODE_TABLE_COMMIT);
			return;
		}
	}
	if (t->phase == PROTO_NODE_TABLE_ABORT + 1)
		t->a.action = PROTO_NODE_ADMIN_CREATE; /* answer as the create it was */
	txn_end(t);
}

static void part_done(txn *t)
{
	if (atomic_fetch_sub_explicit(&t->pending, 1, memory_order_acq_rel) == 1)
		phase_over(t);
}

static void phase_reply(cluster_call *call, int rc, const uint8_t *frame, size_t len)
{
	txn_call *tc = call->arg;
	txn *t = tc->t;
	char why[200];
	if (rc < 0) {
		snprintf(why, sizeof(why), "%s", emdb_last_error());
	} else {
		proto_node_msg m;
		uint8_t *copy;
		rc = cluster__decode(frame, len, &m, &copy);
		if (rc == EMDB_OK && !(m.hdr.flags & PROTO_NODE_FLAG_RESPONSE))
			rc = emdb__seterr(EMDB_ERR_PROTOCOL, "a request where its answer belongs");
		if (rc)
			snprintf(why, sizeof(why), "%s", emdb_last_error());
		else if ((rc = m.hdr.status) < 0)
			snprintf(why, sizeof(why), "%.*s", (int)m.u.err.len, m.u.err.p ? m.u.err.p : "");
		else if (m.hdr.opcode == PROTO_NODE_TABLE_PREPARE) {
			uint32_t next = (uint32_t)m.u.rows.rows, cur = atomic_load(&t->max_id);
			while (next > cur && !atomic_compare_exchange_weak(&t->max_id, &cur, next))
				;
		}
		emdb_free(copy);
	}
	if (rc < 0 && t->phase != PROTO_NODE_TABLE_ABORT)
		txn_fail(t, tc->rank, rc, why);
	else
		t->ok[tc->rank] = 1;
	part_done(t);
}

/* Send phase op to every node that takes part in it (every node, or for
 * ABORT and the undo those that succeeded before), in ring order, and
 * run this node's part. */
static void phase_send(txn *t, uint16_t op)
{
	cluster *cl = t->cl;
	bool only_ok = op == PROTO_NODE_TABLE_ABORT || t->phase == PROTO_NODE_TABLE_ABORT + 1;
	uint8_t take[cl->nodes];
	uint32_t n = 0;
	for (uint32_t r = 0; r < cl->nodes; r++) {
		take[r] = !only_ok || t->ok[r];
		n += take[r];
		t->ok[r] = 0;
	}
	if (t->phase != PROTO_NODE_TABLE_ABORT + 1)
		t->phase = op;
	atomic_store(&t->pending, n + 1);
	proto_node_msg m = { .hdr = cluster__hdr(cl, op, t->table, false) };
	m.u.admin = t->a;
	uint8_t *buf = NULL;
	size_t len = 0;
	int enc = cluster__encode(&m, &buf, &len, NULL);
	for (uint32_t k = 1; k < cl->nodes; k++) {
		uint32_t r = (cl->rank + k) % cl->nodes;
		if (!take[r])
			continue;
		txn_call *tc = &t->calls[r];
		memset(tc, 0, sizeof(*tc));
		tc->t = t;
		tc->rank = r;
		tc->call.done = phase_reply;
		tc->call.arg = tc;
		if (t->a.action == PROTO_NODE_ADMIN_RESERVE && op == PROTO_NODE_TABLE_COMMIT)
			tc->call.deadline_ns = emdb__now_ns() + 600ull * 1000000000ull; /* it maps memory */
		int rc = enc ? enc : cluster__call(cl, r, buf, len, &tc->call);
		if (rc) {
			if (op != PROTO_NODE_TABLE_ABORT)
				txn_fail(t, r, rc, emdb_last_error());
			part_done(t);
		}
	}
	emdb_free(buf);
	if (take[cl->rank]) {
		uint32_t next;
		int rc = local_phase(cl, t->phase == PROTO_NODE_TABLE_ABORT + 1 ? PROTO_NODE_TABLE_COMMIT : op, &t->a,
				     t->table, &next);
		if (rc && op != PROTO_NODE_TABLE_ABORT)
			txn_fail(t, cl->rank, rc, emdb_last_error());
		else {
			t->ok[cl->rank] = 1;
			uint32_t cur = atomic_load(&t->max_id);
			while (next > cur && !atomic_compare_exchange_weak(&t->max_id, &cur, next))
				;
		}
		part_done(t);
	}
	part_done(t);
}

static void txn_start(txn *t)
{
	atomic_store(&t->status, EMDB_OK);
	pthread_mutex_lock(&t->cl->admin->mu);
	t->a.txn = t->cl->admin->next_txn++;
	pthread_mutex_unlock(&t->cl->admin->mu);
	t->phase = 0;
	phase_send(t, PROTO_NODE_TABLE_PREPARE);
}

/* Queue a change at the coordinator; starts it when none runs. */
static int txn_queue(cluster *cl, cluster_req *req, cluster_responder *r, const proto_node_admin *a, uint32_t table)
{
	txn *t = emdb_calloc(1, sizeof(*t));
	if (t) {
		t->ok = emdb_calloc(cl->nodes, 1);
		t->calls = emdb_calloc(cl->nodes, sizeof(*t->calls));
	}
	if (!t || !t->ok || !t->calls) {
		if (t)
			txn_free(t);
		return emdb__seterr(EMDB_ERR_NOMEM, "a table change");
	}
	t->cl = cl;
	t->req = req;
	t->r = r;
	t->a = *a;
	t->table = table;
	admin_state *as = cl->admin;
	pthread_mutex_lock(&as->mu);
	bool idle = !as->head;
	if (as->tail)
		as->tail->next = t;
	else
		as->head = t;
	as->tail = t;
	pthread_mutex_unlock(&as->mu);
	if (idle)
		txn_start(t);
	return EMDB_OK;
}

/* ---- a node that is not the coordinator ---------------------------------- */

static void fwd_reply(cluster_call *call, int rc, const uint8_t *frame, size_t len)
{
	cluster_req *req = cluster__req_of(call);
	uint64_t id;
	if (cluster__take_reply(req, rc, frame, len, PROTO_NODE_TABLE_ADMIN, "node 0 (the table coordinator)", &id)) {
		req->table_out = req->op == CLUSTER_TABLE_CREATE ? (uint32_t)id : 0;
		cluster__finish(req, EMDB_OK, NULL);
	}
}

int admin_submit(cluster *cl, cluster_req *req)
{
	proto_node_admin a = { .rows = req->rows_in };
	int rc = EMDB_OK;
	switch (req->op) {
	case CLUSTER_TABLE_CREATE:
		a.action = PROTO_NODE_ADMIN_CREATE;
		if (!req->cfg)
			rc = emdb__seterr(EMDB_ERR_INVALID, "table create: no configuration");
		else if (req->cfg->size == 0 || req->cfg->size > sizeof(a.cfg))
			rc = emdb__seterr(EMDB_ERR_INVALID, "emdb_table_config.size is %u", req->cfg->size);
		else {
			emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
			memcpy(&c, req->cfg, req->cfg->size);
			c.size = sizeof(c);
			a.cfg = c;
		}
		a.rows = 0;
		break;
	case CLUSTER_TABLE_DROP:
		a.action = PROTO_NODE_ADMIN_DROP;
		a.rows = 0;
		break;
	case CLUSTER_TABLE_ALTER:
		a.action = PROTO_NODE_ADMIN_ALTER;
		a.rows = 0;
		if (!req->opt)
			rc = emdb__seterr(EMDB_ERR_INVALID, "table alter: no optimizer");
		else
			a.opt = *req->opt;
		break;
	default:
		a.action = PROTO_NODE_ADMIN_RESERVE;
		break;
	}
	uint32_t table = a.action == PROTO_NODE_ADMIN_CREATE ? 0 : req->table;
	if (rc == EMDB_OK && cl->rank == CLUSTER_COORDINATOR)
		rc = txn_queue(cl, req, NULL, &a, table);
	else if (rc == EMDB_OK) {
		proto_node_msg m = { .hdr = cluster__hdr(cl, PROTO_NODE_TABLE_ADMIN, table, false) };
		m.u.admin = a;
		rc = cluster__send_for(cl, CLUSTER_COORDINATOR, &m, req, fwd_reply,
				       emdb__now_ns() + ADMIN_CALL_MS * 1000000ull);
	}
	if (rc)
		cluster__set_msg(req, rc, NULL);
	return rc;
}

void admin_serve(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	uint16_t op = m->hdr.opcode;
	int rc;
	if (op == PROTO_NODE_TABLE_ADMIN) {
		if (cl->rank != CLUSTER_COORDINATOR)
			rc = emdb__seterr(EMDB_ERR_INVALID, "node %u is not the table coordinator (node %u is)", cl->rank,
					  CLUSTER_COORDINATOR);
		else if ((rc = txn_queue(cl, NULL, r, &m->u.admin, m->hdr.table)) == EMDB_OK)
			return;
		cluster__reply(cl, r, op, m->hdr.table, NULL, 0, rc);
		return;
	}
	if (from != CLUSTER_COORDINATOR) {
		rc = emdb__seterr(EMDB_ERR_PROTOCOL, "node %u sent node %s: only node %u coordinates table changes", from,
				  proto_node_op_name(op), CLUSTER_COORDINATOR);
		cluster__reply(cl, r, op, m->hdr.table, NULL, 0, rc);
		return;
	}
	uint32_t next = 0;
	rc = local_phase(cl, op, &m->u.admin, m->hdr.table, &next);
	cluster__reply_rows(cl, r, op, m->hdr.table, rc, next, NULL);
}
