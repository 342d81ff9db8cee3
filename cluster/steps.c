/*
 * cluster/steps.c - synchronous steps across nodes (UPDATE with workers >=
 * 2, emdb_client_update_sync, with the W workers spread over the nodes).
 *
 * One node, the coordinator (rank CLUSTER_COORDINATOR), counts every
 * step's arrivals in its step barrier (db/step.h, the one barrier of the
 * engine, whose counting and applying halves are apart for this): a
 * worker's UPDATE arrives at its home node, which sends the coordinator
 * one STEP_ARRIVE (or arrives itself when it is the coordinator).  The
 * arrival that makes W owns the full step and applies it everywhere with
 * one routed UPDATE (route.c: every node, the ring); the result then
 * answers every arrival of the step, each through its home node.
 *
 * Invariants:
 *   1. Every owner applies a step exactly once, after all W workers
 *      arrived: the barrier hands the full step to exactly one arrival,
 *      which sends exactly one UPDATE to each node.
 *   2. An arrival is keyed by its worker: (home rank + 1) << 48 | the
 *      worker's key on its home node (a connection id).  A worker that
 *      arrives again while its earlier arrival still waits in an open step
 *      (a resend after a timeout) replaces it, so it is counted once; the
 *      earlier request is answered BUSY ("superseded").  A ranked
 *      worker's numbered step (STEP_ARRIVE_SEQ: seq, session, rank) is
 *      keyed by the barrier instead (db/step.h, sequenced arrivals): a
 *      resend on any connection, even after its step applied, is counted
 *      once.
 *   3. A worker whose connection closes leaves its step (STEP_LEAVE to the
 *      coordinator): its arrival is withdrawn and answered CLOSED.
 *   4. Every arrival is answered exactly once: by the barrier (the step's
 *      result, its expiry, its close) or, for the completing one, by the
 *      end of the routed UPDATE.
 *
 * State changes: the coordinator's barrier; the engines through the
 * routed UPDATE.
 */
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/clock.h"
#include "base/error_int.h"
#include "cluster/cluster_int.h"
#include "db/step.h"

/* Slack beyond a step's own timeout before a home node gives up on the
 * coordinator's answer, and the wait when a step has no timeout. */
#define STEP_CALL_SLACK_MS 5000u
#define STEP_CALL_FOREVER_MS (24u * 3600u * 1000u)

/* One arrival waiting at the coordinator: a local request or a peer's. */
typedef struct arrival {
	cluster *cl;
	cluster_req *req;       /* local: answered by finishing it */
	cluster_responder *r;   /* remote: answered by a reply     */
	uint32_t table;
	uint16_t op;            /* remote: STEP_ARRIVE or STEP_ARRIVE_SEQ */
} arrival;

/* The routed UPDATE of a full step. */
typedef struct applying {
	cluster_req upd;
	step *full;
	arrival *last; /* the arrival that completed it */
} applying;

static int never_apply(void *arg, uint32_t table, uint64_t *rows)
{
	return emdb__seterr(EMDB_ERR_INTERNAL, "cluster steps are applied by a routed UPDATE");
}

int steps_open(cluster *cl)
{
	step_hooks h = { .apply = never_apply, .arg = cl };
	return step_barrier_create(&h, &cl->steps);
}

void cluster_drain(cluster *cl)
{
	cluster_serve_drain(cl); /* the requests queued answered first */
	if (cl && cl->steps)
		step_close(cl->steps, EMDB_ERR_CLOSED, "before the node's cluster layer closed", "the node is closing");
}

void steps_close(cluster *cl)
{
	if (!cl->steps)
		return;
	cluster_drain(cl);
	step_barrier_destroy(cl->steps);
	cl->steps = NULL;
}

void cluster_tick(cluster *cl, uint64_t now_ns)
{
	step_expire(cl->steps, now_ns, EMDB_ERR_TIMEOUT, "within the step's timeout");
	ckpt_tick(cl, now_ns);
}

static void answer(arrival *a, int status, uint64_t rows, const char *msg)
{
	cluster *cl = a->cl;
	if (a->req) {
		a->req->rows = rows;
		cluster__finish(a->req, status, "%s", msg);
	} else {
		cluster__reply_rows(cl, a->r, a->op, a->table, status, rows, msg);
	}
	emdb_free(a);
}

static void waiter_done(void *arg, int status, uint64_t rows, const char *msg)
{
	answer(arg, status, rows, msg);
}

static void applied(cluster_req *upd)
{
	applying *ap = (applying *)upd;
	step_finish(ap->full, upd->status, upd->rows, upd->msg);
	answer(ap->last, upd->status, upd->rows, upd->msg);
	emdb_free(ap);
}

/* Arrival a of worker key (invariant 2), numbered by id (seq 0: not).
 * Returns EMDB_OK (a will be answered, maybe already was) or an error (a
 * is not taken). */
static int arrive(cluster *cl, uint32_t table, uint32_t workers, uint64_t key, const step_seq *id,
		  uint32_t timeout_ms, arrival *a)
{
	emdb_table_config cfg;
	int rc = table ? emdb_table_get_config(cl->db, table, &cfg) : EMDB_OK;
	if (rc)
		return rc;
	applying *ap = emdb_calloc(1, sizeof(*ap));
	if (!ap)
		return emdb__seterr(EMDB_ERR_NOMEM, "a synchronous step of %u workers", workers);
	if (!id->seq) /* a numbered one is the barrier's to match */
		step_leave(cl->steps, key, EMDB_ERR_BUSY, "superseded: the same worker arrived again");
	step_waiter w = { waiter_done, a, key, *id };
	uint64_t deadline = timeout_ms ? emdb__now_ns() + timeout_ms * 1000000ull : 0;
	step *full;
	rc = step_arrive(cl->steps, table, workers, &w, deadline, &full);
	if (rc || !full) {
		emdb_free(ap);
		return rc;
	}
	ap->full = full;
	ap->last = a;
	ap->upd.op = CLUSTER_UPDATE;
	ap->upd.table = table;
	ap->upd.done = applied;
	rc = route_submit(cl, &ap->upd);
	if (rc) {
		step_finish(full, rc, 0, ap->upd.msg);
		emdb_free(ap);
	}
	return rc; /* on error a is the caller's to answer */
}

/* ---- the home node -------------------------------------------------------- */

static void step_reply(cluster_call *call, int rc, const uint8_t *frame, size_t len)
{
	cluster_req *req = cluster__req_of(call);
	uint16_t op = req->seq ? PROTO_NODE_STEP_ARRIVE_SEQ : PROTO_NODE_STEP_ARRIVE;
	if (cluster__take_reply(req, rc, frame, len, op, "node 0 (the step coordinator)", &req->rows))
		cluster__finish(req, EMDB_OK, NULL);
}

static uint64_t worker_key(uint32_t rank, uint64_t worker)
{
	return (uint64_t)(rank + 1) << 48 | (worker & ((1ull << 48) - 1));
}

static void leave_sent(cluster_call *call, int rc, const uint8_t *frame, size_t len)
{
	(void)cluster__req_of(call);
}

static void leave(cluster *cl, uint64_t key)
{
	step_leave(cl->steps, key, EMDB_ERR_CLOSED, "before a worker's connection closed");
}

void cluster_step_leave(cluster *cl, uint64_t worker)
{
	uint64_t key = worker_key(cl->rank, worker);
	if (cl->rank == CLUSTER_COORDINATOR) {
		leave(cl, key);
		return;
	}
	proto_node_msg m = { .hdr = cluster__hdr(cl, PROTO_NODE_STEP_LEAVE, 0, false) };
	m.u.step.worker = key;
	/* Lost, the arrival stays until its step ends or times out. */
	(void)cluster__send_for(cl, CLUSTER_COORDINATOR, &m, NULL, leave_sent, 0);
}

int steps_submit(cluster *cl, cluster_req *req)
{
	int rc;
	if (req->workers < 2 || req->workers > PROTO_UPDATE_WORKERS_MAX) {
		rc = emdb__seterr(EMDB_ERR_INVALID, "UPDATE: %u workers, a synchronous step has 2..%u", req->workers,
				  PROTO_UPDATE_WORKERS_MAX);
		cluster__set_msg(req, rc, NULL);
		return rc;
	}
	if (req->seq && req->rank >= EMDB_WORKERS_MAX) {
		rc = emdb__seterr(EMDB_ERR_INVALID, "UPDATE: a step number needs the connection's worker rank (WORKER) first");
		cluster__set_msg(req, rc, NULL);
		return rc;
	}
	uint64_t key = worker_key(cl->rank, req->worker);
	step_seq id = { req->seq, req->seq ? req->session : 0, req->seq ? req->rank : 0 };
	if (cl->rank == CLUSTER_COORDINATOR) {
		arrival *a = emdb_calloc(1, sizeof(*a));
		rc = a ? EMDB_OK : emdb__seterr(EMDB_ERR_NOMEM, "a synchronous step's arrival");
		if (a) {
			*a = (arrival){ cl, req, NULL, req->table, 0 };
			if ((rc = arrive(cl, req->table, req->workers, key, &id, req->timeout_ms, a)))
				emdb_free(a);
		}
		if (rc)
			cluster__set_msg(req, rc, NULL);
		return rc;
	}
	emdb_table_config cfg;
	if (req->table && (rc = emdb_table_get_config(cl->db, req->table, &cfg))) {
		cluster__set_msg(req, rc, NULL);
		return rc;
	}
	uint16_t op = id.seq ? PROTO_NODE_STEP_ARRIVE_SEQ : PROTO_NODE_STEP_ARRIVE;
	proto_node_msg m = { .hdr = cluster__hdr(cl, op, req->table, false) };
	m.u.step = (proto_node_step){ req->workers, req->timeout_ms, key, id.seq, id.session, id.worker };
	uint64_t wait_ms = (uint64_t)(req->timeout_ms ? req->timeout_ms : STEP_CALL_FOREVER_MS) + STEP_CALL_SLACK_MS;
	rc = cluster__send_for(cl, CLUSTER_COORDINATOR, &m, req, step_reply, emdb__now_ns() + wait_ms * 1000000ull);
	if (rc)
		cluster__set_msg(req, rc, NULL);
	return rc;
}

/* ---- the coordinator, for a peer ------------------------------------------ */

void steps_serve(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	const proto_node_step *s = &m->u.step;
	int rc;
	if (cl->rank != CLUSTER_COORDINATOR) {
		rc = emdb__seterr(EMDB_ERR_INVALID, "node %u is not the step coordinator (node %u is)", cl->rank,
				  CLUSTER_COORDINATOR);
	} else if ((s->worker >> 48) != from + 1u) {
		rc = emdb__seterr(EMDB_ERR_PROTOCOL, "node %u sent a worker key of node %llu", from,
				  (unsigned long long)(s->worker >> 48) - 1);
	} else if (m->hdr.opcode == PROTO_NODE_STEP_LEAVE) {
		leave(cl, s->worker);
		cluster__reply_rows(cl, r, m->hdr.opcode, m->hdr.table, EMDB_OK, 0, NULL);
		return;
	} else if (s->workers > PROTO_UPDATE_WORKERS_MAX) {
		rc = emdb__seterr(EMDB_ERR_INVALID, "UPDATE: %u workers, at most %u", s->workers,
				  PROTO_UPDATE_WORKERS_MAX);
	} else {
		arrival *a = emdb_calloc(1, sizeof(*a));
		rc = a ? EMDB_OK : emdb__seterr(EMDB_ERR_NOMEM, "a synchronous step's arrival");
		if (a) {
			*a = (arrival){ cl, NULL, r, m->hdr.table, m->hdr.opcode };
			step_seq id = { s->seq, s->session, s->rank }; /* all 0 but in STEP_ARRIVE_SEQ */
			if ((rc = arrive(cl, m->hdr.table, s->workers, s->worker, &id, s->timeout_ms, a)) == EMDB_OK)
				return;
			emdb_free(a);
		}
	}
	cluster__reply(cl, r, m->hdr.opcode, m->hdr.table, NULL, 0, rc);
}
