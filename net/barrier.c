/*
 * barrier.c - synchronous steps of UPDATE (see barrier.h).
 *
 * Invariants:
 *   1. At most one open step per table id; an open step has 1 <= n <
 *      workers waiters, w[0..n) in arrival order, each a request that has
 *      had no answer yet.
 *   2. A step leaves the list exactly once, under the lock: complete (the
 *      joiner that made n reach workers owns it), failed (barriers_fail),
 *      or emptied (barriers_leave); whoever takes it out answers its
 *      waiters, outside the lock, and frees it.
 *   3. `waiting` is the sum of n over the open steps.
 *   4. Once barriers_fail(all) has run, no step opens or completes: no
 *      reply can be posted to a thread that a shutdown is stopping.
 *
 * State changes: the open list, under lock.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "net/barrier.h"
#include "net/log.h"
#include "net/loop.h"
#include "net/stats.h"
#include "protocol/proto.h"

struct barrier_step {
	barrier_step *next;
	uint32_t table, workers, n, cap;
	uint64_t deadline_ns; /* 0: none */
	barrier_waiter *w;    /* [cap], grown as workers arrive: a step's
				 memory follows its waiters, not its count */
};

void barriers_init(barriers *b)
{
	memset(b, 0, sizeof(*b));
	pthread_mutex_init(&b->lock, NULL);
}

void barriers_destroy(barriers *b)
{
	barrier_step *next;
	for (barrier_step *s = b->open; s; s = next) {
		next = s->next;
		barrier_step_free(s);
	}
	b->open = NULL;
	pthread_mutex_destroy(&b->lock);
}

void barrier_step_free(barrier_step *s)
{
	if (s)
		emdb_free(s->w);
	emdb_free(s);
}

/* Room for one more waiter in s.  Returns 0, or -1 (NOMEM). */
static int make_room(barrier_step *s)
{
	if (s->n < s->cap)
		return 0;
	uint32_t cap = s->cap ? s->cap * 2 : 4;
	if (cap > s->workers)
		cap = s->workers;
	barrier_waiter *w = emdb_realloc(s->w, (size_t)cap * sizeof(*w));
	if (!w)
		return -1;
	s->w = w;
	s->cap = cap;
	return 0;
}

static void unlink_step(barriers *b, barrier_step *s)
{
	for (barrier_step **p = &b->open; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			s->next = NULL;
			return;
		}
}

int barriers_join(barriers *b, uint32_t table, uint32_t workers, const barrier_waiter *w,
		  uint64_t timeout_ns, bool *done, barrier_step **out, char *msg, size_t msglen)
{
	int rc = EMDB_OK;
	*done = false;
	*out = NULL;
	pthread_mutex_lock(&b->lock);
	barrier_step *s = b->open;
	while (s && s->table != table)
		s = s->next;
	if (b->closed) {
		rc = EMDB_ERR_CLOSED;
		snprintf(msg, msglen, "the server is shutting down");
	} else if (s && s->workers != workers) {
		rc = EMDB_ERR_INVALID;
		snprintf(msg, msglen, "synchronous step of table %u: this UPDATE says %u workers, the open step %u",
			 table, workers, s->workers);
	} else if (!s) {
		s = emdb_calloc(1, sizeof(*s));
		if (s) {
			s->table = table;
			s->workers = workers;
			s->deadline_ns = timeout_ns ? stats_now_ns() + timeout_ns : 0;
		}
		if (s && make_room(s) < 0) {
			barrier_step_free(s);
			s = NULL;
		}
		if (!s) {
			rc = EMDB_ERR_NOMEM;
		} else {
			s->next = b->open;
			b->open = s;
		}
	} else if (make_room(s) < 0) {
		rc = EMDB_ERR_NOMEM;
	}
	if (rc == EMDB_ERR_NOMEM)
		snprintf(msg, msglen, "no memory for a synchronous step of %u workers", workers);
	if (rc == EMDB_OK) {
		s->w[s->n++] = *w;
		if (s->n == s->workers) {
			unlink_step(b, s);
			atomic_fetch_sub(&b->waiting, s->n - 1);
			*done = true;
			*out = s;
		} else {
			atomic_fetch_add(&b->waiting, 1);
		}
	}
	pthread_mutex_unlock(&b->lock);
	return rc;
}

unsigned barriers_leave(barriers *b, uint64_t conn_id)
{
	unsigned gone = 0;
	barrier_step *empty = NULL;
	pthread_mutex_lock(&b->lock);
	barrier_step *next;
	for (barrier_step *s = b->open; s; s = next) {
		next = s->next;
		uint32_t k = 0;
		for (uint32_t i = 0; i < s->n; i++)
			if (s->w[i].conn_id != conn_id)
				s->w[k++] = s->w[i];
		gone += s->n - k;
		s->n = k;
		if (k == 0) {
			unlink_step(b, s);
			s->next = empty;
			empty = s;
		}
	}
	atomic_fetch_sub(&b->waiting, gone);
	pthread_mutex_unlock(&b->lock);
	for (barrier_step *s = empty; s; s = next) {
		next = s->next;
		barrier_step_free(s);
	}
	return gone;
}

void barriers_fail(barriers *b, uint64_t now_ns, bool all, int status, const char *why)
{
	barrier_step *failed = NULL, *next;
	if (!all && atomic_load(&b->waiting) == 0)
		return;
	pthread_mutex_lock(&b->lock);
	b->closed |= all;
	for (barrier_step *s = b->open; s; s = next) {
		next = s->next;
		if (all || (s->deadline_ns && now_ns >= s->deadline_ns)) {
			unlink_step(b, s);
			atomic_fetch_sub(&b->waiting, s->n);
			s->next = failed;
			failed = s;
		}
	}
	pthread_mutex_unlock(&b->lock);
	for (barrier_step *s = failed; s; s = next) {
		next = s->next;
		char msg[200];
		snprintf(msg, sizeof(msg), "synchronous step of table %u: %u of %u workers arrived %s; nothing applied",
			 s->table, s->n, s->workers, why);
		log_warn("%s", msg);
		barrier_answer(s, NULL, status, 0, msg);
		barrier_step_free(s);
	}
}

void barrier_answer(const barrier_step *s, const barrier_waiter *self, int status, uint64_t rows,
		    const char *msg)
{
	io_reply r = { .opcode = PROTO_OP_UPDATE, .status = status, .rows = rows };
	if (status < 0)
		snprintf(r.msg, sizeof(r.msg), "%s", msg ? msg : "");
	for (uint32_t i = 0; i < s->n; i++) {
		if (self && s->w[i].conn_id == self->conn_id && s->w[i].req_id == self->req_id)
			continue;
		r.conn_id = s->w[i].conn_id;
		r.req_id = s->w[i].req_id;
		if (io_thread_post_reply(s->w[i].t, &r) < 0)
			log_warn("conn %llu: no memory to answer UPDATE %llu of a synchronous step; its client will time out",
				 (unsigned long long)r.conn_id, (unsigned long long)r.req_id);
	}
}
