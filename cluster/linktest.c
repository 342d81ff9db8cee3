/*
 * cluster/linktest.c - both sides of a linktest (cluster.h "Linktest",
 * docs/cluster.md): the home side keeps rounds of ECHO messages in flight
 * through the link, timed, with no engine and no client in between; the
 * owner's side (linktest_echo, from serve.c's dispatch) answers them.
 *
 * Invariants:
 *   1. Everything is checked in linktest_submit, before anything is sent;
 *      a refusal (INVALID, BUSY, NOMEM) changes nothing and done never
 *      runs.  Once accepted, done runs exactly once, on the link's
 *      thread.
 *   2. One linktest per node at a time: cl->linktest_busy is taken in
 *      submit and given back right before done runs.
 *   3. After submit the test lives on the link's thread only (started
 *      there through the link's post), so its slots, counters and
 *      deadline need no lock.  Each of the `depth` slots holds one round:
 *      its n calls and the count of those not yet ended; a round counts
 *      when the last one ends, and the slot starts the next round unless
 *      the duration is over or a call failed.
 *   4. A call may end inside call_owned (the link failed to send it):
 *      a slot's count holds one extra unit while its round is being
 *      issued, so a round never ends before all its calls were made.
 *   5. Bytes are counted as the link counts them: every frame plus the
 *      link's frame_overhead, for the rounds that counted only.
 *   6. The frames are made once and lent to the link (call_lent,
 *      reply_lent) where it can borrow: a request frame per message of
 *      the test, a reply frame per size on the owner (cl->echo_frames,
 *      the link's thread only; LT_ECHO_CACHE of them, each at most
 *      LT_ECHO_KEEP_MAX bytes: a larger one is made per message).  A frame is counted (lt_frame.refs): one
 *      for its keeper, one per message the link still reads it for; its
 *      zeros are calloc's, so no stale heap byte reaches a peer, and none
 *      is written per message.  A link that cannot borrow gets a fresh
 *      copy per message (call_owned, reply_owned).
 *
 * State changes: cl->linktest_busy, cl->echo_frames, the test's own
 * block (freed at the end).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/clock.h"
#include "base/error_int.h"
#include "cluster/cluster_int.h"

typedef struct lt_test lt_test;

/* A frame lent to the link (invariant 6). */
struct lt_frame {
	_Atomic uint32_t refs;
	uint32_t reserved;
	uint64_t epoch;      /* a reply frame's header's */
	size_t len;
	_Alignas(8) uint8_t data[];
};

/* A new frame of len zero bytes, one reference (the caller's). */
static lt_frame *lt_frame_new(size_t len)
{
	lt_frame *f = emdb_calloc(1, sizeof(*f) + len);
	if (f) {
		atomic_init(&f->refs, 1);
		f->len = len;
	}
	return f;
}

/* Drop one reference (the link's release, or a keeper's). */
static void lt_frame_put(void *arg)
{
	lt_frame *f = arg;
	if (f && atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1)
		emdb_free(f);
}

static void lt_frame_get(lt_frame *f)
{
	atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}

/* One message of a round as sent: the request frame's and the reply
 * payload's sizes, the overhead left out. */
typedef struct lt_msg {
	uint32_t rank;
	uint32_t reply_len;  /* the reply's ECHO payload */
	size_t frame;        /* the request frame        */
	size_t counted_req;  /* frame + overhead         */
	size_t counted_rep;  /* reply frame + overhead   */
	lt_frame *req;       /* the request, encoded once (invariant 6) */
} lt_msg;

typedef struct lt_call {
	cluster_call call;   /* first: a call's address is its record's */
	struct lt_slot *slot;
} lt_call;

typedef struct lt_slot {
	lt_test *t;
	uint32_t left;       /* calls of the round not ended (+1 while issuing) */
	bool failed;         /* one of them did not come back */
	lt_call *calls;      /* [n] */
} lt_slot;

struct lt_test {
	cluster *cl;
	cluster_req *req;
	uint32_t n, depth, busy_slots;
	uint64_t start_ns, end_ns, last_ns;
	uint64_t rounds, bytes_sent, bytes_received;
	int status;          /* the first error */
	char msg[256];
	lt_msg *msgs;        /* [n] */
	lt_slot *slots;      /* [depth] */
};

static void lt_free(lt_test *t)
{
	if (!t)
		return;
	for (uint32_t s = 0; t->slots && s < t->depth; s++)
		emdb_free(t->slots[s].calls);
	for (uint32_t i = 0; t->msgs && i < t->n; i++)
		lt_frame_put(t->msgs[i].req);
	emdb_free(t->slots);
	emdb_free(t->msgs);
	emdb_free(t);
}

static void lt_fail(lt_test *t, int rc, const char *why)
{
	if (t->status)
		return;
	t->status = rc;
	snprintf(t->msg, sizeof(t->msg), "linktest: %s", why);
}

static void lt_finish(lt_test *t)
{
	cluster_req *req = t->req;
	cluster *cl = t->cl;
	req->rounds = t->rounds;
	req->elapsed_ns = t->last_ns > t->start_ns ? t->last_ns - t->start_ns : 0;
	req->bytes_sent = t->bytes_sent;
	req->bytes_received = t->bytes_received;
	int status = t->status;
	char msg[256];
	snprintf(msg, sizeof(msg), "%s", t->msg);
	lt_free(t);
	atomic_store(&cl->linktest_busy, false);
	cluster__finish(req, status, "%s", msg);
}

static void slot_issue(lt_slot *sl);

/* The last call of a slot's round ended (invariant 3). */
static void slot_done(lt_slot *sl)
{
	lt_test *t = sl->t;
	uint64_t now = emdb__now_ns();
	t->last_ns = now;
	if (!sl->failed) {
		t->rounds++;
		for (uint32_t i = 0; i < t->n; i++) {
			t->bytes_sent += t->msgs[i].counted_req;
			t->bytes_received += t->msgs[i].counted_rep;
		}
	}
	if (!t->status && now < t->end_ns) {
		slot_issue(sl);
		return;
	}
	if (--t->busy_slots == 0)
		lt_finish(t);
}

static void slot_release(lt_slot *sl)
{
	if (--sl->left == 0)
		slot_done(sl);
}

/* A reply, or the link's error (link thread). */
static void lt_reply(cluster_call *call, int rc, const uint8_t *frame, size_t len)
{
	lt_call *c = (lt_call *)call;
	lt_slot *sl = c->slot;
	lt_test *t = sl->t;
	const lt_msg *m = &t->msgs[c - sl->calls];
	if (rc == EMDB_OK) {
		proto_node_msg d;
		uint8_t *copy;
		rc = cluster__decode(frame, len, &d, &copy);
		if (rc == EMDB_OK && (d.hdr.opcode != PROTO_NODE_ECHO || !(d.hdr.flags & PROTO_NODE_FLAG_RESPONSE)))
			rc = emdb__seterr(EMDB_ERR_PROTOCOL, "node %u answered an ECHO with %s", m->rank,
					  proto_node_op_name(d.hdr.opcode));
		else if (rc == EMDB_OK && d.hdr.status < 0)
			rc = emdb__seterr(d.hdr.status, "node %u: %.*s", m->rank, (int)d.u.err.len,
					  d.u.err.p ? d.u.err.p : "");
		else if (rc == EMDB_OK && len + t->cl->link.frame_overhead != m->counted_rep)
			rc = emdb__seterr(EMDB_ERR_PROTOCOL, "node %u answered %zu bytes, %zu were asked", m->rank,
					  len + t->cl->link.frame_overhead, m->counted_rep);
		emdb_free(copy);
	}
	if (rc) {
		sl->failed = true;
		lt_fail(t, rc, emdb_last_error());
	}
	slot_release(sl);
}

/* Send one round (link thread; invariant 4). */
static void slot_issue(lt_slot *sl)
{
	lt_test *t = sl->t;
	cluster *cl = t->cl;
	sl->failed = false;
	sl->left = t->n + 1;
	for (uint32_t i = 0; i < t->n; i++) {
		const lt_msg *m = &t->msgs[i];
		lt_call *c = &sl->calls[i];
		int rc = t->status; /* an earlier call of this round failed at once */
		if (rc == EMDB_OK) {
			memset(&c->call, 0, sizeof(c->call));
			c->call.done = lt_reply;
			c->call.arg = c;
			c->slot = sl;
			lt_frame_get(m->req);
			rc = cluster__call_lent(cl, m->rank, m->req->data, m->frame, &c->call, lt_frame_put, m->req);
		}
		if (rc) {
			sl->failed = true;
			if (rc != t->status)
				lt_fail(t, rc, emdb_last_error());
			sl->left--;
		}
	}
	slot_release(sl);
}

static void lt_start(void *arg)
{
	lt_test *t = arg;
	t->start_ns = t->last_ns = emdb__now_ns();
	t->end_ns = t->start_ns + t->req->duration_ns;
	t->busy_slots = t->depth;
	for (uint32_t s = 0; s < t->depth; s++)
		slot_issue(&t->slots[s]);
}

static int refuse(cluster_req *req, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(cluster_req *req, int rc, const char *fmt, ...)
{
	char why[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	emdb__seterr(rc, "linktest: %s", why);
	cluster__set_msg(req, rc, NULL);
	return rc;
}

/* The frame sizes of message q (invariant 5): a counted size below the
 * smallest ECHO or off its grid rounds up. */
static int lt_size(const cluster *cl, cluster_req *req, uint32_t i, lt_msg *m)
{
	const cluster_linktest_msg *q = &req->msgs[i];
	uint64_t ovh = cl->link.frame_overhead, min_req = PROTO_NODE_HDR_SIZE + 8, min_rep = PROTO_NODE_HDR_SIZE;
	if (q->rank >= cl->nodes || q->rank == cl->rank)
		return refuse(req, EMDB_ERR_INVALID, "message %u goes to rank %u: another node of this %u-node cluster "
				  "is needed (this node is rank %u)", i, q->rank, cl->nodes, cl->rank);
	if (q->req_bytes > PROTO_NODE_FRAME_MAX + ovh || q->rep_bytes > PROTO_NODE_FRAME_MAX + ovh)
		return refuse(req, EMDB_ERR_INVALID,
			      "message %u of %llu / %llu bytes: a node frame is at most %llu bytes (+%llu of the link's)",
			      i, (unsigned long long)q->req_bytes, (unsigned long long)q->rep_bytes,
			      (unsigned long long)PROTO_NODE_FRAME_MAX, (unsigned long long)ovh);
	uint64_t rq = q->req_bytes > ovh + min_req ? q->req_bytes - ovh : min_req;
	uint64_t rp = q->rep_bytes > ovh + min_rep ? q->rep_bytes - ovh : min_rep;
	rq = (rq + 7) & ~7ull;
	rp = (rp + 7) & ~7ull;
	*m = (lt_msg){ .rank = q->rank, .reply_len = (uint32_t)(rp - PROTO_NODE_HDR_SIZE), .frame = (size_t)rq,
		       .counted_req = (size_t)(rq + ovh), .counted_rep = (size_t)(rp + ovh) };
	return EMDB_OK;
}

int linktest_submit(cluster *cl, cluster_req *req)
{
	req->rounds = req->elapsed_ns = req->bytes_sent = req->bytes_received = 0;
	if (!req->duration_ns || req->duration_ns > LINKTEST_NS_MAX)
		return refuse(req, EMDB_ERR_INVALID, "a duration of %.3f s: more than 0, at most %.0f s",
			      (double)req->duration_ns / 1e9, (double)LINKTEST_NS_MAX / 1e9);
	if (!req->depth || req->depth > LINKTEST_MAX)
		return refuse(req, EMDB_ERR_INVALID, "depth %u: 1 to %u rounds in flight", req->depth, LINKTEST_MAX);
	if (!req->n || req->n > LINKTEST_MAX || !req->msgs)
		return refuse(req, EMDB_ERR_INVALID, "%zu messages per round: 1 to %u", req->n, LINKTEST_MAX);
	if (cl->nodes < 2)
		return refuse(req, EMDB_ERR_INVALID, "a cluster of one node has no link to test");
	lt_test *t = emdb_calloc(1, sizeof(*t));
	if (!t || !(t->msgs = emdb_calloc(req->n, sizeof(*t->msgs))) ||
	    !(t->slots = emdb_calloc(req->depth, sizeof(*t->slots)))) {
		lt_free(t);
		return refuse(req, EMDB_ERR_NOMEM, "no memory for a test of %u x %zu messages", req->depth, req->n);
	}
	t->cl = cl;
	t->req = req;
	t->n = (uint32_t)req->n;
	t->depth = req->depth;
	uint64_t round = 0;
	for (uint32_t i = 0; i < t->n; i++) {
		int rc = lt_size(cl, req, i, &t->msgs[i]);
		if (rc) {
			lt_free(t);
			return rc;
		}
		round += t->msgs[i].frame + t->msgs[i].reply_len + PROTO_NODE_HDR_SIZE;
	}
	if (round * t->depth > LINKTEST_INFLIGHT_MAX) {
		lt_free(t);
		return refuse(req, EMDB_ERR_INVALID, "%u rounds of %llu bytes in flight: at most %llu bytes", req->depth,
			      (unsigned long long)round, (unsigned long long)LINKTEST_INFLIGHT_MAX);
	}
	for (uint32_t i = 0; i < t->n; i++) {
		lt_msg *m = &t->msgs[i];
		proto_node_msg q = { .hdr = cluster__hdr(cl, PROTO_NODE_ECHO, 0, false) };
		q.u.echo = (proto_node_echo){ .reply_len = m->reply_len,
					      .len = (uint32_t)(m->frame - PROTO_NODE_HDR_SIZE - 8) };
		proto_node_where at; /* the payload: calloc's zeros */
		size_t len;
		int rc = (m->req = lt_frame_new(m->frame)) ? proto_node_encode(m->req->data, m->frame, &q, &len, &at)
							   : emdb__seterr(EMDB_ERR_NOMEM, "a %zu-byte echo", m->frame);
		if (rc) {
			lt_free(t);
			return refuse(req, rc, "message %u: %s", i, emdb_last_error());
		}
	}
	for (uint32_t s = 0; s < t->depth; s++) {
		t->slots[s].t = t;
		if (!(t->slots[s].calls = emdb_calloc(t->n, sizeof(lt_call)))) {
			lt_free(t);
			return refuse(req, EMDB_ERR_NOMEM, "no memory for a test of %u x %zu messages", req->depth, req->n);
		}
	}
	if (atomic_exchange(&cl->linktest_busy, true)) {
		lt_free(t);
		return refuse(req, EMDB_ERR_BUSY, "one runs on this node already: try again when it ends");
	}
	cl->link.ops->post(cl->link.ctx, lt_start, t);
	return EMDB_OK;
}

/* ---- the owner's side ------------------------------------------------- */

/* The reply frame of `len` bytes at this node's epoch, with one reference
 * for the caller: kept for the next echoes of that size (invariant 6),
 * unless it is larger than LT_ECHO_KEEP_MAX (a node does not hold
 * gigabytes for a test long over).  NULL on NOMEM (message set). */
static lt_frame *echo_frame(cluster *cl, size_t len)
{
	for (uint32_t k = 0; k < LT_ECHO_CACHE; k++) {
		lt_frame *f = cl->echo_frames[k];
		if (f && f->len == len && f->epoch == cl->map.epoch) {
			lt_frame_get(f);
			return f;
		}
	}
	proto_node_msg rep = { .hdr = cluster__hdr(cl, PROTO_NODE_ECHO, 0, true) };
	rep.u.echo = (proto_node_echo){ .len = (uint32_t)(len - PROTO_NODE_HDR_SIZE) };
	proto_node_where at; /* the payload: calloc's zeros */
	lt_frame *f = lt_frame_new(len);
	if (!f) {
		emdb__seterr(EMDB_ERR_NOMEM, "an echo of %zu bytes", len);
		return NULL;
	}
	if (proto_node_encode(f->data, len, &rep, &len, &at)) {
		lt_frame_put(f);
		return NULL;
	}
	f->epoch = cl->map.epoch;
	if (len > LT_ECHO_KEEP_MAX)
		return f;
	uint32_t k = cl->echo_next++ % LT_ECHO_CACHE;
	lt_frame_put(cl->echo_frames[k]);
	lt_frame_get(f);
	cl->echo_frames[k] = f;
	return f;
}

void linktest_echo(cluster *cl, cluster_responder *r, const proto_node_msg *m)
{
	size_t len = PROTO_NODE_HDR_SIZE + (size_t)m->u.echo.reply_len;
	lt_frame *f = echo_frame(cl, len);
	if (!f) {
		cluster__reply(cl, r, PROTO_NODE_ECHO, 0, NULL, 0, EMDB_ERR_NOMEM);
		return;
	}
	if (cl->link.ops->reply_lent) {
		cl->link.ops->reply_lent(cl->link.ctx, r, f->data, len, lt_frame_put, f);
		return;
	}
	uint8_t *copy = emdb_malloc(len);
	if (copy)
		memcpy(copy, f->data, len);
	else
		emdb__seterr(EMDB_ERR_NOMEM, "an echo of %zu bytes", len);
	lt_frame_put(f);
	cluster__reply(cl, r, PROTO_NODE_ECHO, 0, copy, len, copy ? EMDB_OK : EMDB_ERR_NOMEM);
}

void linktest_close(cluster *cl)
{
	for (uint32_t k = 0; k < LT_ECHO_CACHE; k++) {
		lt_frame_put(cl->echo_frames[k]);
		cl->echo_frames[k] = NULL;
	}
}
