/*
 * cluster/phases.c - the coordinator's driver of a transaction across
 * nodes (phases.h): one phase at a time on every node in ring order, each
 * node's status collected, the next phase the caller's.
 *
 * Invariants:
 *   1. While a phase runs, `pending` counts the nodes taking part that
 *      have not answered, plus one for phases_run itself; whoever brings
 *      it to 0 calls ops.next, so ops.next runs once per phase, after
 *      every node's answer (or failure) and after phases_run sent every
 *      frame.
 *   2. `status` changes once, from EMDB_OK to the first failure, with its
 *      node and why (a compare-and-swap: answers arrive concurrently).
 *   3. calls[rank] belongs to the link from the send until its done().
 *
 * State changes: pending, status, ok[] (the nodes' answers, one slot per
 * node); the origin is answered once, in phases_end.
 */
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "cluster/cluster_int.h"
#include "cluster/phases.h"

typedef struct phase_call {
	cluster_call call;
	phases *p;
	uint32_t rank;
} phase_call;

struct phases {
	cluster *cl;
	phases_ops ops;
	void *arg;
	phases_origin origin;
	uint16_t op;      /* the phase running */
	bool tolerant;
	_Atomic uint32_t pending;
	_Atomic int status;
	uint32_t failed;  /* the node of status */
	char why[240];
	uint8_t *ok;      /* [nodes] */
	phase_call *calls; /* [nodes] */
};

phases *phases_new(cluster *cl, const phases_ops *ops, void *arg, const phases_origin *origin)
{
	phases *p = emdb_calloc(1, sizeof(*p));
	if (p) {
		p->ok = emdb_calloc(cl->nodes, 1);
		p->calls = emdb_calloc(cl->nodes, sizeof(*p->calls));
	}
	if (!p || !p->ok || !p->calls) {
		phases_free(p);
		emdb__seterr(EMDB_ERR_NOMEM, "a transaction across nodes");
		return NULL;
	}
	p->cl = cl;
	p->ops = *ops;
	p->arg = arg;
	p->origin = *origin;
	atomic_store(&p->status, EMDB_OK);
	return p;
}

void phases_free(phases *p)
{
	if (!p)
		return;
	emdb_free(p->ok);
	emdb_free(p->calls);
	emdb_free(p);
}

void *phases_arg(const phases *p)
{
	return p->arg;
}

void phases_fail(phases *p, uint32_t rank, int status, const char *why)
{
	int expect = EMDB_OK;
	if (atomic_compare_exchange_strong(&p->status, &expect, status)) {
		p->failed = rank;
		snprintf(p->why, sizeof(p->why), "%s", why && why[0] ? why : emdb_strerror(status));
	}
}

int phases_status(const phases *p)
{
	return atomic_load(&((phases *)p)->status);
}

uint32_t phases_failed_node(const phases *p)
{
	return p->failed;
}

const char *phases_why(const phases *p)
{
	return p->why;
}

bool phases_ok(const phases *p, uint32_t rank)
{
	return rank < p->cl->nodes && p->ok[rank];
}

/* Node rank's part of the phase ended (invariant 1). */
static void part_end(phases *p, uint32_t rank, int status, const char *why)
{
	if (status < 0 && !p->tolerant)
		phases_fail(p, rank, status, why);
	else if (rank < p->cl->nodes)
		p->ok[rank] = 1;
	if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1)
		p->ops.next(p);
}

void phases_local_done(phases *p, int status, const char *why)
{
	part_end(p, p->cl->rank, status, why);
}

/* A peer's answer to a request of op: its status (the link's rc, a frame
 * that is no answer of op: PROTOCOL, or the peer's), with why (the link's
 * or the decoder's message after "who: ", or the peer's); on success *m
 * (valid while *copy and the frame live: emdb_free(*copy) after). */
static int read_answer(int rc, const uint8_t *frame, size_t len, uint16_t op, const char *who, proto_node_msg *m,
		       uint8_t **copy, char *why, size_t whylen)
{
	*copy = NULL;
	if (rc == EMDB_OK) {
		rc = cluster__decode(frame, len, m, copy);
		if (rc == EMDB_OK && (!(m->hdr.flags & PROTO_NODE_FLAG_RESPONSE) || m->hdr.opcode != op))
			rc = emdb__seterr(EMDB_ERR_PROTOCOL, "answered node %s with node %s", proto_node_op_name(op),
					  proto_node_op_name(m->hdr.opcode));
		if (rc == EMDB_OK && (rc = m->hdr.status) < 0) {
			snprintf(why, whylen, "%.*s", (int)m->u.err.len, m->u.err.p ? m->u.err.p : "");
			return rc;
		}
	}
	if (rc < 0)
		snprintf(why, whylen, "%s%s%s", who, who[0] ? ": " : "", emdb_last_error());
	return rc;
}

static void phase_reply(cluster_call *call, int rc, const uint8_t *frame, size_t len)
{
	phase_call *pc = call->arg;
	phases *p = pc->p;
	char why[240] = "";
	proto_node_msg m;
	uint8_t *copy;
	rc = read_answer(rc, frame, len, p->op, "", &m, &copy, why, sizeof(why));
	if (rc >= 0 && p->ops.answer)
		p->ops.answer(p, pc->rank, &m);
	emdb_free(copy);
	part_end(p, pc->rank, rc, why);
}

void phases_run(phases *p, const proto_node_msg *m, const uint8_t *take, bool tolerant, uint64_t deadline_ns)
{
	cluster *cl = p->cl;
	uint32_t n = 0;
	for (uint32_t r = 0; r < cl->nodes; r++) {
		n += !take || take[r];
		p->ok[r] = 0;
	}
	p->op = m->hdr.opcode;
	p->tolerant = tolerant;
	atomic_store(&p->pending, n + 1);
	uint8_t *buf = NULL;
	size_t len = 0;
	int enc = cluster__encode(m, &buf, &len, NULL);
	for (uint32_t k = 1; k < cl->nodes; k++) {
		uint32_t r = (cl->rank + k) % cl->nodes;
		if (take && !take[r])
			continue;
		phase_call *pc = &p->calls[r];
		memset(pc, 0, sizeof(*pc));
		pc->p = p;
		pc->rank = r;
		pc->call.done = phase_reply;
		pc->call.arg = pc;
		pc->call.deadline_ns = deadline_ns;
		int rc = enc ? enc : cluster__call(cl, r, buf, len, &pc->call);
		if (rc)
			part_end(p, r, rc, emdb_last_error());
	}
	emdb_free(buf);
	if (!take || take[cl->rank]) {
		int rc = p->ops.local(p, m);
		if (rc < 0)
			part_end(p, cl->rank, rc, emdb_last_error());
		else if (rc != PHASES_LATER)
			part_end(p, cl->rank, EMDB_OK, NULL);
	}
	part_end(p, UINT32_MAX, EMDB_OK, NULL); /* phases_run's own count */
}

void phases_end(phases *p, int status, uint64_t value, const char *msg)
{
	const phases_origin *o = &p->origin;
	if (o->done)
		o->done(o->arg, status, status ? 0 : value, status && msg ? msg : "");
	else
		cluster__reply_rows(p->cl, o->r, o->op, o->table, status, value, msg);
	phases_free(p);
}

/* ---- a node that is not the coordinator ---------------------------------- */

typedef struct ask_call {
	cluster_call call;
	phases_done_fn done;
	void *arg;
	uint16_t op;
	char who[64];
} ask_call;

static void ask_reply(cluster_call *call, int rc, const uint8_t *frame, size_t len)
{
	ask_call *a = call->arg;
	char why[256] = "";
	proto_node_msg m;
	uint8_t *copy;
	rc = read_answer(rc, frame, len, a->op, a->who, &m, &copy, why, sizeof(why));
	uint64_t value = rc >= 0 ? m.u.rows.rows : 0;
	emdb_free(copy);
	a->done(a->arg, rc, value, why);
	emdb_free(a);
}

int phases_ask(cluster *cl, const proto_node_msg *m, uint64_t deadline_ns, const char *who, phases_done_fn done,
	       void *arg)
{
	ask_call *a = emdb_calloc(1, sizeof(*a));
	if (!a)
		return emdb__seterr(EMDB_ERR_NOMEM, "a request to the coordinator");
	a->done = done;
	a->arg = arg;
	a->op = m->hdr.opcode;
	snprintf(a->who, sizeof(a->who), "%s", who);
	a->call.done = ask_reply;
	a->call.arg = a;
	a->call.deadline_ns = deadline_ns;
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc = cluster__encode(m, &buf, &len, NULL);
	if (rc == EMDB_OK)
		rc = cluster__call_owned(cl, CLUSTER_COORDINATOR, buf, len, &a->call);
	else
		emdb_free(buf);
	if (rc)
		emdb_free(a);
	return rc;
}
