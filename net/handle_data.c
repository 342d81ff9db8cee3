/*
 * handle_data.c - the data plane: PREFETCH, TICKET_FREE, PULL, PUSH,
 * UPDATE, LOOKUP, READ_STATE, PUSH_UPDATE, PULL_WEIGHTED, PUSH_WEIGHTED
 * (PULL's and PUSH's handlers with the engine's weighted calls).
 *
 * Requests are used where they lie: ids, offsets and gradients are the
 * decoder's pointers into the connection's input buffer, handed to the
 * engine as they are.  Replies that carry vectors are laid out in the
 * output buffer first (proto_*_resp_begin) and the engine writes the
 * floats straight into them, so a vector crosses memory once on its way
 * to the socket.
 *
 * Invariants:
 *   1. A handler that changes state reserves its reply (and, for
 *      PREFETCH, the ticket slot) before calling the engine; after a
 *      successful engine call nothing can fail, so a request is either
 *      applied and acknowledged or refused and not applied.
 *   2. A wire ticket is resolved only within the connection that created
 *      it (net/tickets.h).
 *   3. A reply never exceeds max_frame; the check happens before any
 *      memory is reserved for it.  A reply sized from the request's dim
 *      (PULL, LOOKUP) is reserved only once the table is known to exist
 *      with that dim (check_dim), so a request the engine would refuse
 *      on its face reserves nothing; one refused later (a bad ticket or
 *      offsets, NOMEM) cancels, which gives the room back (net/obuf.h).
 *
 * An UPDATE of a synchronous step (workers >= 2) joins the server's step
 * barrier (db/step.h) and is answered when its step completes, maybe from
 * another thread, through an io_completion (net/loop.h).
 *
 * PUSH_UPDATE is PUSH's checks and UPDATE's reply around one engine call;
 * like an UPDATE it counts as one step for the automatic checkpoints.
 *
 * State changes: the engine (rows, gradients, steps), c->tickets, the
 * step count of the automatic checkpoints (UPDATE, PUSH_UPDATE,
 * net/checkpoint.h), the server's open steps and c->answers_owed.
 */
#include <stdio.h>

#include <emdb/alloc.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include "cluster/cluster.h"
#include "db/step.h"
#include "net/checkpoint.h"
#include "net/conn.h"
#include "net/handle.h"
#include "net/handle_int.h"
#include "net/log.h"
#include "net/loop.h"
#include "net/server.h"
#include "net/stats.h"

/* Reserve the reply laid out by a *_resp_begin function: ask its size with
 * a NULL buffer, check it against max_frame, evaluate `check` (the
 * request's own checks that need no reply room, EMDB_OK or an error),
 * and only then reserve.  *p gets the space, *len its size. */
#define RESERVE_VEC_REPLY(c, p, len, begin_call_null, check)                                \
	__extension__({                                                                     \
		int rc_ = (begin_call_null);                                                \
		if (rc_ == EMDB_ERR_INVALID)                                                \
			rc_ = handle_fail(EMDB_ERR_LIMIT, "the reply would exceed 4 GiB");  \
		else if (rc_ == EMDB_ERR_LIMIT)                                             \
			rc_ = handle_check_reply((c), (len));                               \
		if (rc_ == EMDB_OK)                                                         \
			rc_ = (check);                                                      \
		if (rc_ == EMDB_OK && !((p) = conn_reply_reserve((c), (len))))              \
			rc_ = EMDB_ERR_NOMEM;                                               \
		rc_;                                                                        \
	})

/* A decoder gives NULL for an empty array; the engine would take NULL for
 * a caller bug (INVALID) where an empty batch deserves BATCH, as it gets
 * in process.  Empty arrays therefore point here. */
static const uint64_t no_u64[1];
static float no_f32[1];
static uint8_t no_u8[1];
#define OR_EMPTY(p, empty) ((p) ? (p) : (empty))

static emdb_db *db_of(conn *c)
{
	return c->srv->db;
}

/* The table exists and dim is its dim, as the engine would check: done
 * before a reply sized from dim is reserved (invariant 3), so that a wrong
 * dim cannot make the server set aside up to max_frame for nothing. */
static int check_dim(conn *c, uint32_t table, uint32_t dim)
{
	emdb_table_config cfg;
	int rc = emdb_table_get_config(db_of(c), table, &cfg);
	if (rc)
		return rc;
	if (dim != cfg.dim)
		return handle_fail(EMDB_ERR_DIM, "table '%s': dim %u given, table has %u", cfg.name, dim,
				   cfg.dim);
	return EMDB_OK;
}

static int ticket_of(conn *c, uint64_t handle, const emdb_ticket **out)
{
	*out = tickets_get(&c->tickets, handle);
	if (!*out)
		return handle_fail(EMDB_ERR_TICKET,
				   "ticket 0x%llx is not a live ticket of this connection",
				   (unsigned long long)handle);
	return EMDB_OK;
}

int handle_prefetch(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_prefetch_req m;
	int rc = proto_prefetch_req_decode(h, body, &m);
	if (rc)
		return rc;
	uint32_t max = (uint32_t)atomic_load_explicit(&c->srv->rt.max_tickets, memory_order_relaxed);
	if (c->tickets.live >= max)
		return handle_fail(EMDB_ERR_LIMIT,
				   "%u tickets are live on this connection (max_tickets): free some first",
				   c->tickets.live);
	/* Make sure a free slot exists before the engine inserts anything. */
	if ((rc = tickets_reserve(&c->tickets)))
		return rc;
	proto_prefetch_resp r = { .ticket = 1, .table = m.table };
	size_t len;
	proto_prefetch_resp_encode(NULL, 0, h->id, &r, &len);
	uint8_t *p = conn_reply_reserve(c, len);
	if (!p)
		return EMDB_ERR_NOMEM;
	emdb_ticket *t;
	rc = emdb_prefetch(db_of(c), m.table, OR_EMPTY(m.ids, no_u64), m.n, &t);
	if (rc) {
		obuf_cancel(&c->out);
		return rc;
	}
	rc = tickets_add(&c->tickets, t, UINT32_MAX, &r.ticket);
	if (rc) { /* impossible: a slot was made free above */
		emdb_ticket_free(t);
		obuf_cancel(&c->out);
		return rc;
	}
	atomic_fetch_add_explicit(&c->t->n_tickets, 1, memory_order_relaxed);
	r.count = (uint32_t)emdb_ticket_count(t);
	proto_prefetch_resp_encode(p, len, h->id, &r, &len);
	obuf_commit(&c->out, len);
	return HANDLED_OK;
}

int handle_ticket_free(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_ticket_free_req m;
	int rc = proto_ticket_free_req_decode(h, body, &m);
	if (rc)
		return rc;
	uint8_t *p = conn_reply_reserve(c, PROTO_HDR_SIZE);
	if (!p)
		return EMDB_ERR_NOMEM;
	if (tickets_free(&c->tickets, m.ticket) != EMDB_OK) {
		obuf_cancel(&c->out);
		return handle_fail(EMDB_ERR_TICKET, "ticket 0x%llx is not a live ticket of this connection",
				   (unsigned long long)m.ticket);
	}
	atomic_fetch_sub_explicit(&c->t->n_tickets, 1, memory_order_relaxed);
	size_t len;
	proto_empty_encode(p, PROTO_HDR_SIZE, h->id, h->opcode, true, &len);
	obuf_commit(&c->out, len);
	return HANDLED_OK;
}

/* With a ticket, a weighted request's n_weights is the ticket's count
 * (the decoder checked it against n_ids otherwise). */
static int check_weights(const emdb_ticket *t, const float *weights, uint32_t n_weights)
{
	if (t && weights && n_weights != emdb_ticket_count(t))
		return handle_fail(EMDB_ERR_BATCH, "%u weights for a ticket of %zu IDs", n_weights,
				   emdb_ticket_count(t));
	return EMDB_OK;
}

/* PULL, and PULL_WEIGHTED with weights[n_weights] (never NULL then): the
 * reply laid out first, the engine writing the rows into it. */
static int pull_rows(conn *c, const proto_hdr *h, const proto_pull_req *m, const float *weights,
		     uint32_t n_weights)
{
	const emdb_ticket *t = NULL;
	int rc;
	if (m->ticket && (rc = ticket_of(c, m->ticket, &t)))
		return rc;
	if ((rc = check_weights(t, weights, n_weights)))
		return rc;
	size_t n_rows = m->n_bags ? m->n_bags : t ? emdb_ticket_count(t) : m->n_ids;
	if (n_rows > UINT32_MAX)
		return handle_fail(EMDB_ERR_LIMIT, "%zu rows in one reply", n_rows);

	bool weighted = weights != NULL;
	int (*begin)(uint8_t *, size_t, uint64_t, uint32_t, uint32_t, float **, size_t *) =
		weighted ? proto_pull_weighted_resp_begin : proto_pull_resp_begin;
	uint8_t *p = NULL;
	float *vecs = NULL;
	size_t len = 0;
	rc = RESERVE_VEC_REPLY(c, p, len, begin(NULL, 0, h->id, (uint32_t)n_rows, m->dim, &vecs, &len),
			       check_dim(c, m->table, m->dim));
	if (rc)
		return rc;
	begin(p, len, h->id, (uint32_t)n_rows, m->dim, &vecs, &len);

	emdb_db *db = db_of(c);
	emdb_pool pool = (emdb_pool)m->pool;
	const uint64_t *ids = OR_EMPTY(m->ids, no_u64);
	vecs = OR_EMPTY(vecs, no_f32);
	if (weighted && t)
		rc = emdb_pull_bags_weighted_ticket(db, m->table, t, m->offsets, m->n_bags, pool, weights,
						    m->dim, vecs);
	else if (weighted)
		rc = emdb_pull_bags_weighted(db, m->table, ids, m->n_ids, m->offsets, m->n_bags, pool, weights,
					     m->dim, vecs);
	else if (t && m->n_bags)
		rc = emdb_pull_bags_ticket(db, m->table, t, m->offsets, m->n_bags, pool, m->dim, vecs);
	else if (t)
		rc = emdb_pull_ticket(db, m->table, t, m->dim, vecs);
	else if (m->n_bags)
		rc = emdb_pull_bags(db, m->table, ids, m->n_ids, m->offsets, m->n_bags, pool, m->dim, vecs);
	else
		rc = emdb_pull(db, m->table, ids, m->n_ids, m->dim, vecs);
	if (rc) {
		obuf_cancel(&c->out);
		return rc;
	}
	obuf_commit(&c->out, len);
	return HANDLED_OK;
}

int handle_pull(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_pull_req m;
	int rc = proto_pull_req_decode(h, body, &m);
	return rc ? rc : pull_rows(c, h, &m, NULL, 0);
}

int handle_pull_weighted(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_pull_weighted_req m;
	int rc = proto_pull_weighted_req_decode(h, body, &m);
	return rc ? rc : pull_rows(c, h, &m.pull, OR_EMPTY(m.weights, no_f32), m.n_weights);
}

/* What PUSH, PUSH_WEIGHTED and PUSH_UPDATE check before the engine: the
 * ticket is one of this connection's, and without bags it gets one row
 * of gradients per ID, with weights one weight per ID (the decoder
 * cannot know the ticket's count).  *t is NULL for IDs. */
static int push_ticket(conn *c, const proto_push_req *m, const float *weights, uint32_t n_weights,
		       const emdb_ticket **t)
{
	int rc;
	*t = NULL;
	if (m->ticket && (rc = ticket_of(c, m->ticket, t)))
		return rc;
	if (*t && !m->n_bags && m->n_rows != emdb_ticket_count(*t))
		return handle_fail(EMDB_ERR_BATCH, "%u gradient rows for a ticket of %zu IDs", m->n_rows,
				   emdb_ticket_count(*t));
	return check_weights(*t, weights, n_weights);
}

/* PUSH, and PUSH_WEIGHTED with weights[n_weights] (never NULL then): an
 * empty reply. */
static int push_rows(conn *c, const proto_hdr *h, const proto_push_req *m, const float *weights,
		     uint32_t n_weights)
{
	const emdb_ticket *t;
	int rc;
	if ((rc = push_ticket(c, m, weights, n_weights, &t)))
		return rc;
	uint8_t *p = conn_reply_reserve(c, PROTO_HDR_SIZE);
	if (!p)
		return EMDB_ERR_NOMEM;

	emdb_db *db = db_of(c);
	emdb_pool pool = (emdb_pool)m->pool;
	const uint64_t *ids = OR_EMPTY(m->ids, no_u64);
	const float *g = OR_EMPTY(m->grads, no_f32);
	if (c->worker_rank != EMDB_WORKER_NONE) {
		emdb_push_batch b = { .ids = ids, .n = m->n_ids, .ticket = t, .offsets = m->n_bags ? m->offsets : NULL,
				      .n_bags = m->n_bags, .pool = pool, .weights = weights, .dim = m->dim, .grads = g };
		rc = emdb_push_as(db, m->table, c->worker_rank, &b);
	} else if (weights && t)
		rc = emdb_push_bags_weighted_ticket(db, m->table, t, m->offsets, m->n_bags, pool, weights,
						    m->dim, g);
	else if (weights)
		rc = emdb_push_bags_weighted(db, m->table, ids, m->n_ids, m->offsets, m->n_bags, pool, weights,
					     m->dim, g);
	else if (t && m->n_bags)
		rc = emdb_push_bags_ticket(db, m->table, t, m->offsets, m->n_bags, pool, m->dim, g);
	else if (t)
		rc = emdb_push_ticket(db, m->table, t, m->dim, g);
	else if (m->n_bags)
		rc = emdb_push_bags(db, m->table, ids, m->n_ids, m->offsets, m->n_bags, pool, m->dim, g);
	else
		rc = emdb_push(db, m->table, ids, m->n_ids, m->dim, g);
	if (rc) {
		obuf_cancel(&c->out);
		return rc;
	}
	size_t len;
	proto_empty_encode(p, PROTO_HDR_SIZE, h->id, h->opcode, true, &len);
	obuf_commit(&c->out, len);
	return HANDLED_OK;
}

int handle_push(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_push_req m;
	int rc = proto_push_req_decode(h, body, &m);
	return rc ? rc : push_rows(c, h, &m, NULL, 0);
}

int handle_push_weighted(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_push_weighted_req m;
	int rc = proto_push_weighted_req_decode(h, body, &m);
	return rc ? rc : push_rows(c, h, &m.push, OR_EMPTY(m.weights, no_f32), m.n_weights);
}

/* The reply of an UPDATE applied at once or of a PUSH_UPDATE (rows
 * updated): reserved before the engine runs (invariant 1), then either
 * cancelled or written and counted as one step for the automatic
 * checkpoints. */
static int rows_reply_encode(const proto_hdr *h, uint8_t *p, size_t cap, uint64_t rows,
			     size_t *len)
{
	proto_update_resp r = { rows };
	return h->opcode == PROTO_OP_PUSH_UPDATE ? proto_push_update_resp_encode(p, cap, h->id, &r, len)
						 : proto_update_resp_encode(p, cap, h->id, &r, len);
}

static uint8_t *rows_reply_reserve(conn *c, const proto_hdr *h, size_t *len)
{
	rows_reply_encode(h, NULL, 0, 0, len);
	return conn_reply_reserve(c, *len);
}

static int rows_reply_finish(conn *c, const proto_hdr *h, uint8_t *p, size_t len, int rc,
			     uint64_t rows)
{
	if (rc) {
		obuf_cancel(&c->out);
		return rc;
	}
	rows_reply_encode(h, p, len, rows, &len);
	obuf_commit(&c->out, len);
	ckpts_note_step(c->srv->ckpts);
	return HANDLED_OK;
}

int handle_push_update(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_push_update_req m;
	int rc = proto_push_update_req_decode(h, body, &m);
	if (rc)
		return rc;
	const emdb_ticket *t;
	if ((rc = push_ticket(c, &m, NULL, 0, &t)))
		return rc;
	size_t len;
	uint8_t *p = rows_reply_reserve(c, h, &len);
	if (!p)
		return EMDB_ERR_NOMEM;
	uint64_t rows = 0;
	m.grads = OR_EMPTY(m.grads, no_f32);
	if (t)
		rc = emdb_push_update_ticket(db_of(c), m.table, t, m.dim, m.grads, &rows);
	else
		rc = emdb_push_update(db_of(c), m.table, OR_EMPTY(m.ids, no_u64), m.n_ids, m.dim,
				      m.grads, &rows);
	return rows_reply_finish(c, h, p, len, rc, rows);
}

/* An UPDATE waiting in a synchronous step (db/step.h): the step's
 * waiter, whose answer comes back to the connection's I/O thread as an
 * io_completion (net/loop.h).  Allocated before it joins, so that an
 * answer can always be posted. */
typedef struct step_answer {
	io_completion done; /* first: the record's address is its own */
	io_thread *t;
	uint64_t req_id;
	int status;
	uint64_t rows;
	char msg[240];
} step_answer;

/* On the connection's I/O thread: the UPDATE's response (status 0, rows)
 * or its error reply; c NULL: the connection has gone. */
static void step_answer_done(conn *c, io_completion *w)
{
	step_answer *a = (step_answer *)w;
	proto_update_resp r = { a->rows };
	if (c && (a->status < 0 || HANDLE_REPLY(c, a->req_id, proto_update_resp_encode, &r) != EMDB_OK))
		conn_reply_err(c, a->req_id, PROTO_OP_UPDATE, a->status < 0 ? a->status : EMDB_ERR_NOMEM,
			       a->status < 0 ? a->msg : "no memory for the reply");
	emdb_free(a);
}

/* On whichever thread decided the step's result. */
static void step_answered(void *arg, int status, uint64_t rows, const char *msg)
{
	step_answer *a = arg;
	a->status = status;
	a->rows = rows;
	snprintf(a->msg, sizeof(a->msg), "%s", msg);
	io_thread_post(a->t, &a->done);
}

void handle_conn_gone(conn *c)
{
	if (c->srv->cluster) /* its arrival waits at the step coordinator */
		cluster_step_leave(c->srv->cluster, c->id);
	unsigned n = step_leave(c->srv->steps, c->id, EMDB_ERR_CLOSED, "before a worker's connection closed");
	if (n)
		log_info("conn %llu (%s): closed with %u UPDATEs of synchronous steps waiting: withdrawn",
			 (unsigned long long)c->id, c->peer, n);
}

/* UPDATE with workers >= 2: join the table's step.  The request that
 * completes it applies the Update once and is answered here like any
 * request; the step's other requests are answered through their
 * connections' threads (step_answered); the others get no reply now. */
static int update_step(conn *c, const proto_hdr *h, const proto_update_req *m)
{
	if (m->workers > PROTO_UPDATE_WORKERS_MAX)
		return handle_fail(EMDB_ERR_INVALID, "UPDATE: %u workers, at most %u", m->workers,
				   PROTO_UPDATE_WORKERS_MAX);
	if (m->seq && c->worker_rank == EMDB_WORKER_NONE)
		return handle_fail(EMDB_ERR_INVALID,
				   "UPDATE: a step number needs the connection's worker rank (WORKER) first");
	emdb_table_config cfg;
	int rc = m->table ? emdb_table_get_config(db_of(c), m->table, &cfg) : EMDB_OK;
	if (rc)
		return rc;
	server *s = c->srv;
	step_answer *a = emdb_calloc(1, sizeof(*a));
	if (!a)
		return handle_fail(EMDB_ERR_NOMEM, "no memory for a synchronous step of %u workers", m->workers);
	io_completion_init(&a->done, c, step_answer_done);
	a->t = c->t;
	a->req_id = h->id;
	step_waiter w = { step_answered, a, c->id, { m->seq, m->session, m->seq ? c->worker_rank : 0 } };
	uint64_t timeout_ns = atomic_load(&s->rt.update_barrier_timeout_ms) * 1000000ull;
	step *full;
	rc = step_arrive(s->steps, m->table, m->workers, &w, timeout_ns ? stats_now_ns() + timeout_ns : 0, &full);
	if (rc == EMDB_OK && !full) {
		c->answers_owed++;
		return HANDLED_OK;
	}
	emdb_free(a); /* refused, or completing the step: not a waiter */
	if (rc)
		return rc;
	/* Invariant 1: the reply's room first; without it the step fails
	 * for all, nothing applied. */
	proto_update_resp r = { 0 };
	size_t len;
	proto_update_resp_encode(NULL, 0, h->id, &r, &len);
	uint8_t *p = conn_reply_reserve(c, len);
	if (!p) {
		const char *why = "no memory for the reply of the synchronous step's last UPDATE; nothing applied";
		step_finish(full, EMDB_ERR_NOMEM, 0, why);
		return handle_fail(EMDB_ERR_NOMEM, "%s", why);
	}
	rc = step_apply(s->steps, full, &r.rows);
	if (rc) {
		obuf_cancel(&c->out);
		return rc; /* this request's error reply, as the others get */
	}
	ckpts_note_step(s->ckpts);
	proto_update_resp_encode(p, len, h->id, &r, &len);
	obuf_commit(&c->out, len);
	return HANDLED_OK;
}

int handle_update(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_update_req m;
	int rc = proto_update_req_decode(h, body, &m);
	if (rc)
		return rc;
	if (m.workers >= 2)
		return update_step(c, h, &m);
	size_t len;
	uint8_t *p = rows_reply_reserve(c, h, &len);
	if (!p)
		return EMDB_ERR_NOMEM;
	uint64_t rows = 0;
	rc = m.table ? emdb_update(db_of(c), m.table, &rows) : emdb_update_all(db_of(c), &rows);
	return rows_reply_finish(c, h, p, len, rc, rows);
}

int handle_lookup(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_lookup_req m;
	int rc = proto_lookup_req_decode(h, body, &m);
	if (rc)
		return rc;
	uint8_t *p = NULL, *found = NULL;
	float *vecs = NULL;
	size_t len = 0;
	rc = RESERVE_VEC_REPLY(c, p, len,
			       proto_lookup_resp_begin(NULL, 0, h->id, m.n, m.dim, m.want_found, &vecs,
						       &found, &len),
			       check_dim(c, m.table, m.dim));
	if (rc)
		return rc;
	proto_lookup_resp_begin(p, len, h->id, m.n, m.dim, m.want_found, &vecs, &found, &len);
	rc = emdb_lookup(db_of(c), m.table, OR_EMPTY(m.ids, no_u64), m.n, m.dim, OR_EMPTY(vecs, no_f32),
			 m.want_found ? OR_EMPTY(found, no_u8) : NULL);
	if (rc) {
		obuf_cancel(&c->out);
		return rc;
	}
	obuf_commit(&c->out, len);
	return HANDLED_OK;
}

int handle_read_state(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_read_state_req m;
	int rc = proto_read_state_req_decode(h, body, &m);
	if (rc)
		return rc;
	emdb_table_config cfg;
	if ((rc = emdb_table_get_config(db_of(c), m.table, &cfg)))
		return rc;
	uint32_t per_row = emdb_optimizer_state_floats(cfg.optimizer.kind, cfg.dim);
	uint8_t *p = NULL, *found = NULL;
	float *state = NULL;
	size_t len = 0;
	rc = RESERVE_VEC_REPLY(c, p, len,
			       proto_read_state_resp_begin(NULL, 0, h->id, m.n, per_row, &state, &found,
							   &len),
			       EMDB_OK);
	if (rc)
		return rc;
	proto_read_state_resp_begin(p, len, h->id, m.n, per_row, &state, &found, &len);
	rc = emdb_read_state(db_of(c), m.table, OR_EMPTY(m.ids, no_u64), m.n, OR_EMPTY(state, no_f32),
			     OR_EMPTY(found, no_u8));
	if (rc) {
		obuf_cancel(&c->out);
		return rc;
	}
	obuf_commit(&c->out, len);
	return HANDLED_OK;
}
