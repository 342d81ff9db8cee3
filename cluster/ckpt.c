/*
 * cluster/ckpt.c - cluster checkpoints: a checkpoint asked of any node
 * checkpoints every node at the same step boundary, and a manifest
 * written last names the parts (docs/cluster.md "Cluster checkpoints").
 *
 * The coordinator (rank CLUSTER_COORDINATOR) runs one cluster checkpoint
 * at a time, in phases sent to every node in ring order (the driver in
 * phases.h):
 *   HOLD   each node stops starting Updates (UPDATE, PUSH_UPDATE, the
 *          Update of a synchronous step; LOAD and the table changes
 *          ALTER, CREATE and DROP too) as a home node: they are deferred,
 *          not refused; it answers once the Updates it had started have
 *          ended on every owner (drained).  When every node answered, no
 *          Update is in flight anywhere, and since every Update reaches
 *          every node, every table is at the same step on every node.
 *   WRITE  each node writes its part (the server's checkpoint job, in its
 *          own store) and answers once the part is durable: its id and
 *          rows.
 *   then the coordinator writes the manifest (ops->publish), LAST, and
 *   END    (commit) lets Updates go again on every node; on any failure
 *          before the manifest, END (abort) does, and each node deletes the
 *          part it wrote.
 * A restore (CKPT_RESTORE) runs HOLD, then LOAD (each node reads every
 * part and stages the rows it owns; nothing changes yet), then SWAP (each
 * node replaces its tables at once), then END; a LOAD that fails anywhere
 * ends it with END (abort), which forgets what was staged everywhere: all
 * or none.  A node other than the coordinator forwards the request
 * (CKPT_ASK, CKPT_RESTORE) and answers its client with the coordinator's
 * result.
 *
 * Invariants:
 *   1. A node's gate holds Updates only between a HOLD and its END, or
 *      until the HOLD's timeout_ms passed (cluster_tick), so a coordinator
 *      that dies never stops training for longer than that; and the
 *      coordinator waits for a node's part (WRITE, LOAD) that long at
 *      most, so a node that hangs fails the checkpoint, naming it.
 *   2. A deferred Update is started when the gate opens, exactly once;
 *      its done runs exactly once (with the error if it cannot start).
 *   3. The manifest is written only after every node's WRITE answered
 *      with a durable part; without it the checkpoint is invisible
 *      (restore and listing read manifests only).
 *   4. Every run answers its origin exactly once.
 *   5. The manifest holds the coordinator's workers' last applied steps
 *      (db/step.h) as they are while Updates are held, so at the parts'
 *      step boundary; a restore's SWAP puts them back on the coordinator.
 *
 * State changes: the gate (under ckpt_state.mu); the nodes' stores and the
 * manifests, through cluster_ckpt_ops.
 */
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/clock.h"
#include "base/error_int.h"
#include "cluster/cluster_int.h"
#include "cluster/phases.h"
#include "db/step.h"

#define HOLD_MS_DEFAULT 600000u /* cluster_ckpt_set_ops's hold_ms 0 */

typedef struct run run;

struct run {
	cluster *cl;
	phases *p;
	uint32_t kind;
	uint64_t id;
	uint16_t phase;            /* PROTO_NODE_CKPT_HOLD, _WRITE or _LOAD, _SWAP, _END */
	bool restore;              /* HOLD, LOAD, SWAP, END; else HOLD, WRITE, END */
	bool commit;               /* END: the manifest is written / the tables swapped */
	cluster_ckpt_part *parts;  /* [nodes] */
	char final_msg[300];
	int final_status;
};

/* What CKPT_WRITE's part is written for: a peer's request, or the
 * coordinator's own part of run. */
typedef struct part_token {
	cluster *cl;
	cluster_responder *r;
	run *run;
	uint16_t op;               /* PROTO_NODE_CKPT_WRITE or _LOAD */
	uint32_t kind;
	uint64_t id;
} part_token;

struct ckpt_state {
	pthread_mutex_t mu;
	/* the gate, under mu */
	bool held;
	uint64_t held_id;
	uint64_t deadline_ns;
	uint64_t inflight;                 /* Updates started here, not ended */
	void (*drained)(void *arg);        /* HOLD's answer, once inflight is 0 */
	void *drained_arg;
	cluster_req *dhead, *dtail;        /* deferred, linked through priv */
	uint64_t part_of, part_id;         /* this node's part of checkpoint part_of */
	bool running;                      /* the coordinator runs one */
	/* set once, before requests */
	cluster_ckpt_ops ops;
	bool have_ops;
	void *ctx;
	uint32_t hold_ms;
};

int ckpt_open(cluster *cl)
{
	cl->ckpt = emdb_calloc(1, sizeof(*cl->ckpt));
	if (!cl->ckpt)
		return emdb__seterr(EMDB_ERR_NOMEM, "cluster checkpoint state");
	pthread_mutex_init(&cl->ckpt->mu, NULL);
	cl->ckpt->hold_ms = HOLD_MS_DEFAULT;
	return EMDB_OK;
}

void ckpt_close(cluster *cl)
{
	if (!cl->ckpt)
		return;
	pthread_mutex_destroy(&cl->ckpt->mu);
	emdb_free(cl->ckpt);
	cl->ckpt = NULL;
}

void cluster_ckpt_set_ops(cluster *cl, const cluster_ckpt_ops *ops, void *ctx, uint32_t hold_ms)
{
	ckpt_state *s = cl->ckpt;
	pthread_mutex_lock(&s->mu);
	s->have_ops = ops != NULL;
	if (ops)
		s->ops = *ops;
	s->ctx = ctx;
	s->hold_ms = hold_ms ? hold_ms : HOLD_MS_DEFAULT;
	pthread_mutex_unlock(&s->mu);
}

/* ---- the gate -------------------------------------------------------------- */

static bool gated_op(const cluster_req *req)
{
	/* LOAD (import) writes rows as an Update does: held too, so that each
	 * part holds a load whole or not at all.  A table change that alters
	 * what a part holds (ALTER's hyperparameters, CREATE, DROP) is held
	 * too, so that no checkpoint holds it on some nodes and not on
	 * others. */
	switch (req->op) {
	case CLUSTER_UPDATE:
	case CLUSTER_PUSH_UPDATE:
	case CLUSTER_LOAD:
	case CLUSTER_TABLE_ALTER:
	case CLUSTER_TABLE_CREATE:
	case CLUSTER_TABLE_DROP:
		return true;
	default:
		return false;
	}
}

/* req no longer counts as in flight: its own done back in place, and
 * the HOLD waiting for the drain, if this was the last, returned. */
static void (*gate_leave(ckpt_state *s, cluster_req *req, void **arg))(void *)
{
	req->done = req->gated_done;
	req->gated_done = NULL;
	void (*drained)(void *) = NULL;
	*arg = NULL;
	pthread_mutex_lock(&s->mu);
	if (--s->inflight == 0 && s->drained) {
		drained = s->drained;
		*arg = s->drained_arg;
		s->drained = NULL;
	}
	pthread_mutex_unlock(&s->mu);
	return drained;
}

static void gate_done(cluster_req *req)
{
	void *arg;
	void (*drained)(void *) = gate_leave(req->priv_cluster->ckpt, req, &arg);
	req->done(req);
	if (drained)
		drained(arg);
}

int ckpt_gate_enter(cluster *cl, cluster_req *req)
{
	if (!gated_op(req))
		return 0;
	ckpt_state *s = cl->ckpt;
	pthread_mutex_lock(&s->mu);
	if (s->held) {
		req->priv = NULL;
		if (s->dtail)
			s->dtail->priv = req;
		else
			s->dhead = req;
		s->dtail = req;
		pthread_mutex_unlock(&s->mu);
		return 1;
	}
	s->inflight++;
	pthread_mutex_unlock(&s->mu);
	req->priv_cluster = cl;
	req->gated_done = req->done;
	req->done = gate_done;
	return 0;
}

void ckpt_gate_cancel(cluster *cl, cluster_req *req)
{
	if (!gated_op(req) || req->done != gate_done)
		return;
	void *arg;
	void (*drained)(void *) = gate_leave(cl->ckpt, req, &arg);
	if (drained)
		drained(arg);
}

/* Hold the gate for checkpoint id; fn(arg) runs once nothing is in flight
 * (maybe before this returns).  Refused (BUSY) while held for another. */
static int gate_hold(cluster *cl, uint64_t id, uint32_t timeout_ms, void (*fn)(void *), void *arg)
{
	ckpt_state *s = cl->ckpt;
	pthread_mutex_lock(&s->mu);
	if (s->held && s->held_id != id) {
		uint64_t other = s->held_id;
		pthread_mutex_unlock(&s->mu);
		return emdb__seterr(EMDB_ERR_BUSY, "node %u is held for cluster checkpoint %llu", cl->rank,
				    (unsigned long long)other);
	}
	if (s->drained) {
		pthread_mutex_unlock(&s->mu);
		return emdb__seterr(EMDB_ERR_BUSY, "node %u is already draining for cluster checkpoint %llu",
				    cl->rank, (unsigned long long)id);
	}
	s->held = true;
	s->held_id = id;
	s->deadline_ns = emdb__now_ns() + (uint64_t)timeout_ms * 1000000ull;
	bool now = s->inflight == 0;
	if (!now) {
		s->drained = fn;
		s->drained_arg = arg;
	}
	pthread_mutex_unlock(&s->mu);
	if (now)
		fn(arg);
	return EMDB_OK;
}

/* Open the gate (id 0: whatever holds it) and start what waited
 * (invariant 2).  The part of an aborted checkpoint is deleted. */
static void gate_release(cluster *cl, uint64_t id, bool abort)
{
	ckpt_state *s = cl->ckpt;
	uint64_t drop = 0;
	pthread_mutex_lock(&s->mu);
	if (!s->held || (id && s->held_id != id)) {
		pthread_mutex_unlock(&s->mu);
		return;
	}
	s->held = false;
	if (abort && s->part_of == s->held_id)
		drop = s->part_id;
	s->part_of = s->part_id = 0;
	cluster_req *q = s->dhead;
	s->dhead = s->dtail = NULL;
	bool have_ops = s->have_ops;
	pthread_mutex_unlock(&s->mu);
	if (drop && have_ops)
		s->ops.drop_part(s->ctx, drop);
	while (q) {
		cluster_req *next = q->priv;
		q->priv = NULL;
		if (cluster_submit(cl, q) != EMDB_OK) {
			char why[sizeof(q->msg)];
			snprintf(why, sizeof(why), "%s", q->msg);
			cluster__finish(q, q->status ? q->status : EMDB_ERR_INTERNAL, "%s", why);
		}
		q = next;
	}
}

void ckpt_tick(cluster *cl, uint64_t now_ns)
{
	ckpt_state *s = cl->ckpt;
	pthread_mutex_lock(&s->mu);
	bool expired = s->held && now_ns >= s->deadline_ns;
	uint64_t id = s->held_id;
	pthread_mutex_unlock(&s->mu);
	if (expired)
		gate_release(cl, id, true);
}

/* ---- a node's part of WRITE ------------------------------------------------- */

static int start_part(cluster *cl, part_token *tk)
{
	ckpt_state *s = cl->ckpt;
	pthread_mutex_lock(&s->mu);
	bool ok = s->have_ops && s->held && s->held_id == tk->id;
	bool have_ops = s->have_ops;
	pthread_mutex_unlock(&s->mu);
	if (!have_ops)
		return emdb__seterr(EMDB_ERR_UNSUPPORTED,
				    "node %u has no cluster checkpoint store (cluster_checkpoint_dir is not set)", cl->rank);
	if (!ok)
		return emdb__seterr(EMDB_ERR_INVALID, "node %u does not hold Updates for cluster checkpoint %llu",
				    cl->rank, (unsigned long long)tk->id);
	if (tk->op == PROTO_NODE_CKPT_LOAD)
		return s->ops.load(s->ctx, tk->id, tk);
	return s->ops.write_part(s->ctx, tk->kind, tk->id, tk);
}

static void reply_empty(cluster *cl, cluster_responder *r, uint16_t op)
{
	proto_node_msg rep = { .hdr = cluster__hdr(cl, op, 0, true) };
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc = cluster__encode(&rep, &buf, &len, NULL);
	cluster__reply(cl, r, op, 0, buf, len, rc);
}

/* This node's part of a SWAP; an error names nothing (the caller does).
 * The coordinator takes on the checkpoint's workers' steps, so that a
 * ranked worker's resend of a step the checkpoint holds is answered, not
 * applied again (invariant 5). */
static int swap_here(cluster *cl)
{
	ckpt_state *s = cl->ckpt;
	if (!s->have_ops)
		return emdb__seterr(EMDB_ERR_UNSUPPORTED, "no cluster checkpoint store here");
	step_seq_rec *seqs = NULL;
	size_t n = 0;
	int rc = s->ops.swap(s->ctx, &seqs, &n);
	if (rc == EMDB_OK && cl->rank == CLUSTER_COORDINATOR)
		rc = step_seq_import(cl->steps, seqs, n);
	emdb_free(seqs);
	return rc;
}

int cluster_ckpt_steps_restored(cluster *cl, const step_seq_rec *seqs, size_t n)
{
	return cl->rank == CLUSTER_COORDINATOR ? step_seq_import(cl->steps, seqs, n) : EMDB_OK;
}

/* END: Updates go again; an abort forgets what a LOAD staged (and the
 * gate deletes a part written). */
static void end_here(cluster *cl, uint64_t id, bool commit)
{
	ckpt_state *s = cl->ckpt;
	if (!commit && s->have_ops)
		s->ops.discard(s->ctx);
	gate_release(cl, id, !commit);
}

void cluster_ckpt_part_done(cluster *cl, void *token, int status, uint64_t part, uint64_t rows, const char *msg)
{
	part_token *tk = token;
	ckpt_state *s = cl->ckpt;
	if (status == EMDB_OK && tk->op == PROTO_NODE_CKPT_WRITE) {
		pthread_mutex_lock(&s->mu);
		s->part_of = tk->id;
		s->part_id = part;
		pthread_mutex_unlock(&s->mu);
	}
	if (tk->run) {
		if (status == EMDB_OK)
			tk->run->parts[cl->rank] = (cluster_ckpt_part){ cl->rank, part, rows };
		phases_local_done(tk->run->p, status, msg);
	} else if (status == EMDB_OK && tk->op == PROTO_NODE_CKPT_LOAD) {
		reply_empty(cl, tk->r, PROTO_NODE_CKPT_LOAD);
	} else if (status == EMDB_OK) {
		proto_node_msg rep = { .hdr = cluster__hdr(cl, PROTO_NODE_CKPT_WRITE, 0, true) };
		rep.u.ckpt = (proto_node_ckpt){ .kind = tk->kind, .id = tk->id, .part = part, .rows = rows };
		uint8_t *buf = NULL;
		size_t len = 0;
		int rc = cluster__encode(&rep, &buf, &len, NULL);
		cluster__reply(cl, tk->r, PROTO_NODE_CKPT_WRITE, 0, buf, len, rc);
	} else {
		emdb__seterr(status, "%s", msg ? msg : emdb_strerror(status));
		cluster__reply(cl, tk->r, tk->op, 0, NULL, 0, status);
	}
	emdb_free(tk);
}

/* ---- the coordinator's run ----------------------------------------------------- */

/* A node's answer (phases_ops.answer): WRITE's part. */
static void run_answer_of(phases *p, uint32_t rank, const proto_node_msg *m)
{
	run *ru = phases_arg(p);
	if (m->hdr.opcode == PROTO_NODE_CKPT_WRITE)
		ru->parts[rank] = (cluster_ckpt_part){ rank, m->u.ckpt.part, m->u.ckpt.rows };
}

static void local_held(void *arg)
{
	run *ru = arg;
	phases_local_done(ru->p, EMDB_OK, NULL);
}

/* This node's part of a phase (phases_ops.local). */
static int run_local(phases *p, const proto_node_msg *m)
{
	run *ru = phases_arg(p);
	cluster *cl = ru->cl;
	uint16_t op = m->hdr.opcode;
	int rc = EMDB_OK;
	if (op == PROTO_NODE_CKPT_HOLD) {
		rc = gate_hold(cl, ru->id, cl->ckpt->hold_ms, local_held, ru);
	} else if (op == PROTO_NODE_CKPT_WRITE || op == PROTO_NODE_CKPT_LOAD) {
		part_token *tk = emdb_calloc(1, sizeof(*tk));
		if (!tk)
			return emdb__seterr(EMDB_ERR_NOMEM, "a checkpoint part");
		*tk = (part_token){ .cl = cl, .run = ru, .op = op, .kind = ru->kind, .id = ru->id };
		if ((rc = start_part(cl, tk)))
			emdb_free(tk);
	} else if (op == PROTO_NODE_CKPT_SWAP) {
		return swap_here(cl);
	} else {
		end_here(cl, ru->id, ru->commit);
		return EMDB_OK;
	}
	return rc ? rc : PHASES_LATER;
}

/* Run phase op on every node. */
static void run_phase(run *ru, uint16_t op)
{
	cluster *cl = ru->cl;
	ckpt_state *s = cl->ckpt;
	proto_node_msg m = { .hdr = cluster__hdr(cl, op, 0, false) };
	m.u.ckpt = (proto_node_ckpt){ .kind = ru->kind, .id = ru->id };
	ru->phase = op;
	if (op == PROTO_NODE_CKPT_HOLD)
		m.u.ckpt.timeout_ms = s->hold_ms;
	if (op == PROTO_NODE_CKPT_END && ru->commit)
		m.u.ckpt.flags = PROTO_NODE_CKPT_COMMIT;
	uint64_t deadline = 0;
	if (op == PROTO_NODE_CKPT_WRITE || op == PROTO_NODE_CKPT_LOAD) /* a part: up to hold_ms */
		deadline = emdb__now_ns() + (uint64_t)s->hold_ms * 1000000ull;
	phases_run(ru->p, &m, NULL, op == PROTO_NODE_CKPT_END, deadline);
}

static void run_free(run *ru)
{
	emdb_free(ru->parts);
	emdb_free(ru);
}

static void run_answer(run *ru)
{
	ckpt_state *s = ru->cl->ckpt;
	pthread_mutex_lock(&s->mu);
	s->running = false;
	pthread_mutex_unlock(&s->mu);
	phases_end(ru->p, ru->final_status, ru->id, ru->final_msg);
	run_free(ru);
}

/* A phase is over on every node: the next one (phases_ops.next,
 * invariant 3). */
static void run_next(phases *p)
{
	run *ru = phases_arg(p);
	cluster *cl = ru->cl;
	int status = phases_status(p);
	if (ru->phase == PROTO_NODE_CKPT_END) {
		run_answer(ru);
		return;
	}
	if (status == EMDB_OK && ru->phase == PROTO_NODE_CKPT_HOLD) {
		run_phase(ru, ru->restore ? PROTO_NODE_CKPT_LOAD : PROTO_NODE_CKPT_WRITE);
		return;
	}
	if (status == EMDB_OK && ru->phase == PROTO_NODE_CKPT_LOAD) { /* staged everywhere */
		run_phase(ru, PROTO_NODE_CKPT_SWAP);
		return;
	}
	if (ru->phase == PROTO_NODE_CKPT_SWAP) {
		/* A node that failed its swap (memory) cannot be undone on the
		 * others: reported, naming it, as a table DROP is. */
		ru->commit = status == EMDB_OK;
	} else if (status == EMDB_OK) { /* every part is durable: the manifest, last */
		char why[200] = "";
		step_seq_rec *seqs = NULL;
		size_t nseqs = 0;
		int rc = step_seq_export(cl->steps, &seqs, &nseqs);
		if (rc)
			snprintf(why, sizeof(why), "%s", emdb_last_error());
		else
			rc = cl->ckpt->ops.publish(cl->ckpt->ctx, ru->id, ru->kind, ru->parts, cl->nodes, seqs, nseqs, why,
						   sizeof(why));
		emdb_free(seqs);
		if (rc)
			phases_fail(p, cl->rank, rc, why);
		else
			ru->commit = true;
		status = phases_status(p);
	}
	ru->final_status = status;
	if (status)
		snprintf(ru->final_msg, sizeof(ru->final_msg), "cluster checkpoint %llu: node %u: %s",
			 (unsigned long long)ru->id, phases_failed_node(p), phases_why(p));
	run_phase(ru, PROTO_NODE_CKPT_END);
}

static const phases_ops run_ops = { run_local, run_answer_of, run_next };

static int run_start(cluster *cl, uint32_t kind, bool restore, uint64_t id, const phases_origin *origin)
{
	ckpt_state *s = cl->ckpt;
	if (cl->rank != CLUSTER_COORDINATOR)
		return emdb__seterr(EMDB_ERR_INVALID, "node %u is not the checkpoint coordinator (node %u is)", cl->rank,
				    CLUSTER_COORDINATOR);
	if (kind != 1 && kind != 2)
		return emdb__seterr(EMDB_ERR_INVALID, "checkpoint kind %u: 1 is full, 2 incremental", kind);
	run *ru = emdb_calloc(1, sizeof(*ru));
	if (ru)
		ru->parts = emdb_calloc(cl->nodes, sizeof(*ru->parts));
	if (!ru || !ru->parts) {
		if (ru)
			run_free(ru);
		return emdb__seterr(EMDB_ERR_NOMEM, "a cluster checkpoint");
	}
	if (!(ru->p = phases_new(cl, &run_ops, ru, origin))) {
		run_free(ru);
		return EMDB_ERR_NOMEM;
	}
	pthread_mutex_lock(&s->mu);
	int rc = EMDB_OK;
	if (!s->have_ops)
		rc = emdb__seterr(EMDB_ERR_UNSUPPORTED,
				  "node %u (the checkpoint coordinator) has no cluster checkpoint store: set "
				  "cluster_checkpoint_dir on every node",
				  cl->rank);
	else if (s->running)
		rc = emdb__seterr(EMDB_ERR_BUSY, "a cluster checkpoint is running: wait for it");
	else
		s->running = true;
	pthread_mutex_unlock(&s->mu);
	if (rc == EMDB_OK && (rc = restore ? s->ops.resolve(s->ctx, id, &ru->id) : s->ops.next_id(s->ctx, &ru->id))) {
		pthread_mutex_lock(&s->mu);
		s->running = false;
		pthread_mutex_unlock(&s->mu);
	}
	if (rc) {
		phases_free(ru->p);
		run_free(ru);
		return rc;
	}
	ru->cl = cl;
	ru->kind = kind;
	ru->restore = restore;
	run_phase(ru, PROTO_NODE_CKPT_HOLD);
	return EMDB_OK;
}

/* ---- a node that is not the coordinator ------------------------------------------ */

/* Run on the coordinator, or forward op (CKPT_ASK, CKPT_RESTORE) to it. */
static int start_or_ask(cluster *cl, uint16_t op, uint32_t kind, uint64_t id, cluster_ckpt_done_fn done, void *arg)
{
	bool restore = op == PROTO_NODE_CKPT_RESTORE;
	if (!done)
		return emdb__seterr(EMDB_ERR_INVALID, "cluster checkpoint: no done callback");
	if (cl->rank == CLUSTER_COORDINATOR)
		return run_start(cl, kind, restore, id, &(phases_origin){ .done = done, .arg = arg });
	if (kind != 1 && kind != 2)
		return emdb__seterr(EMDB_ERR_INVALID, "checkpoint kind %u: 1 is full, 2 incremental", kind);
	proto_node_msg m = { .hdr = cluster__hdr(cl, op, 0, false) };
	m.u.ckpt.kind = kind;
	m.u.ckpt.id = id;
	/* The coordinator's hold, the parts and the manifest: within about
	 * two holds (hold_ms is the same on every node). */
	return phases_ask(cl, &m, emdb__now_ns() + 3ull * cl->ckpt->hold_ms * 1000000ull,
			  "node 0 (the checkpoint coordinator)", done, arg);
}

int cluster_ckpt_start(cluster *cl, uint32_t kind, cluster_ckpt_done_fn done, void *arg)
{
	return start_or_ask(cl, PROTO_NODE_CKPT_ASK, kind, 0, done, arg);
}

int cluster_ckpt_restore(cluster *cl, uint64_t id, cluster_ckpt_done_fn done, void *arg)
{
	return start_or_ask(cl, PROTO_NODE_CKPT_RESTORE, 1, id, done, arg);
}

/* ---- a peer's frames ------------------------------------------------------------- */

typedef struct held_reply {
	cluster *cl;
	cluster_responder *r;
} held_reply;

static void peer_held_empty(void *arg)
{
	held_reply *h = arg;
	reply_empty(h->cl, h->r, PROTO_NODE_CKPT_HOLD);
	emdb_free(h);
}

void ckpt_serve(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	uint16_t op = m->hdr.opcode;
	const proto_node_ckpt *c = &m->u.ckpt;
	int rc;
	if (op == PROTO_NODE_CKPT_ASK || op == PROTO_NODE_CKPT_RESTORE) {
		if ((rc = run_start(cl, c->kind, op == PROTO_NODE_CKPT_RESTORE, c->id,
				    &(phases_origin){ .r = r, .op = op })) == EMDB_OK)
			return;
		cluster__reply(cl, r, op, 0, NULL, 0, rc);
		return;
	}
	if (from != CLUSTER_COORDINATOR) {
		rc = emdb__seterr(EMDB_ERR_PROTOCOL, "node %u sent node %s: only node %u coordinates checkpoints", from,
				  proto_node_op_name(op), CLUSTER_COORDINATOR);
		cluster__reply(cl, r, op, 0, NULL, 0, rc);
		return;
	}
	if (op == PROTO_NODE_CKPT_HOLD) {
		held_reply *h = emdb_calloc(1, sizeof(*h));
		rc = h ? EMDB_OK : emdb__seterr(EMDB_ERR_NOMEM, "a checkpoint hold");
		if (h) {
			*h = (held_reply){ cl, r };
			if ((rc = gate_hold(cl, c->id, c->timeout_ms, peer_held_empty, h)))
				emdb_free(h);
		}
		if (rc)
			cluster__reply(cl, r, op, 0, NULL, 0, rc);
		return;
	}
	if (op == PROTO_NODE_CKPT_SWAP) {
		if ((rc = swap_here(cl)))
			cluster__reply(cl, r, op, 0, NULL, 0, rc);
		else
			reply_empty(cl, r, op);
		return;
	}
	if (op == PROTO_NODE_CKPT_WRITE || op == PROTO_NODE_CKPT_LOAD) {
		part_token *tk = emdb_calloc(1, sizeof(*tk));
		rc = tk ? EMDB_OK : emdb__seterr(EMDB_ERR_NOMEM, "a checkpoint part");
		if (tk) {
			*tk = (part_token){ .cl = cl, .r = r, .op = op, .kind = c->kind, .id = c->id };
			if ((rc = start_part(cl, tk)))
				emdb_free(tk);
		}
		if (rc)
			cluster__reply(cl, r, op, 0, NULL, 0, rc);
		return;
	}
	end_here(cl, c->id, c->flags & PROTO_NODE_CKPT_COMMIT);
	reply_empty(cl, r, op);
}
