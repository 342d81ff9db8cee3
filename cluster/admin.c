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
 * The phases run through the driver in phases.h.  A node other than the
 * coordinator forwards the change (TABLE_ADMIN) and answers its client
 * with the coordinator's result.  While a cluster checkpoint holds
 * Updates (ckpt.c), a CREATE, DROP or ALTER asked of a node waits there
 * until the checkpoint ended, so that every node's part holds the same
 * tables and hyperparameters.
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
#include "cluster/phases.h"
#include "db/db_cluster.h"

#define ADMIN_CALL_MS 60000u /* a forwarded change may queue behind others */
#define RESERVE_MS 600000u   /* a RESERVE's COMMIT maps memory */

/* The phase after ABORT: the undo of a CREATE that failed at COMMIT
 * somewhere (a COMMIT of DROP where it was applied). */
#define PHASE_UNDO (PROTO_NODE_TABLE_ABORT + 1)

typedef struct txn txn;

struct txn {
	txn *next;
	cluster *cl;
	phases *p;
	proto_node_admin a;
	uint32_t asked;        /* the action asked (a.action is DROP in an undo) */
	uint32_t table;        /* header table: DROP and RESERVE */
	uint16_t phase;        /* PROTO_NODE_TABLE_PREPARE, _COMMIT, _ABORT, PHASE_UNDO */
	_Atomic uint32_t max_id; /* PREPARE of CREATE: the largest next id */
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

static void max_id_at_least(txn *t, uint32_t next)
{
	uint32_t cur = atomic_load(&t->max_id);
	while (next > cur && !atomic_compare_exchange_weak(&t->max_id, &cur, next))
		;
}

/* This node's part of the phase (phases_ops.local). */
static int txn_local(phases *p, const proto_node_msg *m)
{
	txn *t = phases_arg(p);
	uint32_t next;
	int rc = local_phase(t->cl, m->hdr.opcode, &t->a, t->table, &next);
	if (rc == EMDB_OK)
		max_id_at_least(t, next);
	return rc;
}

/* A node's answer (phases_ops.answer): PREPARE's next id. */
static void txn_answer(phases *p, uint32_t rank, const proto_node_msg *m)
{
	txn *t = phases_arg(p);
	(void)rank;
	if (m->hdr.opcode == PROTO_NODE_TABLE_PREPARE)
		max_id_at_least(t, (uint32_t)m->u.rows.rows);
}

/* Run phase op of the change on the nodes in take (NULL: every node). */
static void txn_phase(txn *t, uint16_t op, const uint8_t *take)
{
	proto_node_msg m = { .hdr = cluster__hdr(t->cl, op, t->table, false) };
	m.u.admin = t->a;
	uint64_t deadline = 0;
	if (t->a.action == PROTO_NODE_ADMIN_RESERVE && op == PROTO_NODE_TABLE_COMMIT)
		deadline = emdb__now_ns() + RESERVE_MS * 1000000ull;
	phases_run(t->p, &m, take, op == PROTO_NODE_TABLE_ABORT, deadline);
}

/* Answer the origin, then start the next queued transaction. */
static void txn_end(txn *t)
{
	cluster *cl = t->cl;
	int status = phases_status(t->p);
	char msg[300] = "";
	if (status)
		snprintf(msg, sizeof(msg), "table %s refused by node %u: %s", action_name(t->asked),
			 phases_failed_node(t->p), phases_why(t->p));
	uint32_t id = t->asked == PROTO_NODE_ADMIN_CREATE ? t->a.id : t->table;
	phases_end(t->p, status, id, msg);
	admin_state *as = cl->admin;
	pthread_mutex_lock(&as->mu);
	as->head = t->next;
	if (!as->head)
		as->tail = NULL;
	txn *next = as->head;
	pthread_mutex_unlock(&as->mu);
	emdb_free(t);
	if (next)
		txn_start(next);
}

/* A phase is over on every node: decide the next one (phases_ops.next,
 * invariant 2). */
static void txn_next(phases *p)
{
	txn *t = phases_arg(p);
	cluster *cl = t->cl;
	int status = phases_status(p);
	uint8_t take[cl->nodes];
	if (t->phase == PROTO_NODE_TABLE_PREPARE) {
		if (status == EMDB_OK && t->a.action == PROTO_NODE_ADMIN_CREATE)
			t->a.id = atomic_load(&t->max_id);
		for (uint32_t r = 0; r < cl->nodes; r++)
			take[r] = status == EMDB_OK || phases_ok(p, r);
		t->phase = status == EMDB_OK ? PROTO_NODE_TABLE_COMMIT : PROTO_NODE_TABLE_ABORT;
		txn_phase(t, t->phase, take);
		return;
	}
	if (t->phase == PROTO_NODE_TABLE_COMMIT && status != EMDB_OK && t->a.action == PROTO_NODE_ADMIN_CREATE) {
		/* Undo where it was applied: a DROP of the new id there. */
		uint32_t undo = 0;
		for (uint32_t r = 0; r < cl->nodes; r++) {
			take[r] = phases_ok(p, r) && r != cl->rank;
			undo += take[r];
		}
		if (phases_ok(p, cl->rank))
			emdb_table_drop(cl->db, t->a.id);
		t->a.action = PROTO_NODE_ADMIN_DROP;
		t->table = t->a.id;
		if (undo) {
			t->phase = PHASE_UNDO;
			txn_phase(t, PROTO_NODE_TABLE_COMMIT, take);
			return;
		}
	}
	txn_end(t);
}

static const phases_ops txn_ops = { txn_local, txn_answer, txn_next };

static void txn_start(txn *t)
{
	pthread_mutex_lock(&t->cl->admin->mu);
	t->a.txn = t->cl->admin->next_txn++;
	pthread_mutex_unlock(&t->cl->admin->mu);
	t->phase = PROTO_NODE_TABLE_PREPARE;
	txn_phase(t, PROTO_NODE_TABLE_PREPARE, NULL);
}

/* Queue a change at the coordinator, answered to origin; starts it when
 * none runs. */
static int txn_queue(cluster *cl, const phases_origin *origin, const proto_node_admin *a, uint32_t table)
{
	txn *t = emdb_calloc(1, sizeof(*t));
	if (!t)
		return emdb__seterr(EMDB_ERR_NOMEM, "a table change");
	if (!(t->p = phases_new(cl, &txn_ops, t, origin))) {
		emdb_free(t);
		return EMDB_ERR_NOMEM;
	}
	t->cl = cl;
	t->a = *a;
	t->asked = a->action;
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

/* The result of a local request's change, run here or at the
 * coordinator: its id (CREATE) or its error. */
static void admin_done(void *arg, int status, uint64_t id, const char *msg)
{
	cluster_req *req = arg;
	req->table_out = status == EMDB_OK && req->op == CLUSTER_TABLE_CREATE ? (uint32_t)id : 0;
	cluster__finish(req, status, "%s", msg);
}

static int admin_start(cluster *cl, cluster_req *req);

int admin_submit(cluster *cl, cluster_req *req)
{
	if (ckpt_gate_enter(cl, req)) /* a cluster checkpoint holds table changes */
		return EMDB_OK;
	int rc = admin_start(cl, req);
	if (rc)
		ckpt_gate_cancel(cl, req);
	return rc;
}

static int admin_start(cluster *cl, cluster_req *req)
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
	phases_origin origin = { .done = admin_done, .arg = req };
	if (rc == EMDB_OK && cl->rank == CLUSTER_COORDINATOR)
		rc = txn_queue(cl, &origin, &a, table);
	else if (rc == EMDB_OK) {
		proto_node_msg m = { .hdr = cluster__hdr(cl, PROTO_NODE_TABLE_ADMIN, table, false) };
		m.u.admin = a;
		rc = phases_ask(cl, &m, emdb__now_ns() + ADMIN_CALL_MS * 1000000ull, "node 0 (the table coordinator)",
				admin_done, req);
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
		else if ((rc = txn_queue(cl, &(phases_origin){ .r = r, .op = op, .table = m->hdr.table }, &m->u.admin,
					      m->hdr.table)) == EMDB_OK)
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
