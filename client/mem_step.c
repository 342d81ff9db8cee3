/*
 * mem_step.c - synchronous steps of mem:// (see mem_step.h).
 *
 * Invariants:
 *   1. At most one open step per table; an open step has 1 <= n < workers
 *      callers waiting in it.
 *   2. The caller that brings n to workers takes the step out of `open`
 *      (full) and applies the Update without the lock; the others wait
 *      for `done` and, once full, no longer time out.  The last of the
 *      workers to read the result frees the step (left counts them).
 *   3. A caller that times out before the step is full withdraws (n--);
 *      the one that brings n to 0 removes and frees the step.
 *
 * State changes: the open list and the steps, under lock.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "client/mem_step.h"

struct mem_step {
	mem_step *next;
	uint32_t table, workers, n, left;
	bool full, done;
	int rc;
	uint64_t rows;
	char msg[256];
};

void mem_steps_init(mem_steps *s)
{
	pthread_condattr_t a;
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &a);
	pthread_condattr_destroy(&a);
}

void mem_steps_destroy(mem_steps *s)
{
	mem_step *next;
	for (mem_step *p = s->open; p; p = next) {
		next = p->next;
		emdb_free(p);
	}
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
}

static void unlink_step(mem_steps *s, mem_step *p)
{
	for (mem_step **q = &s->open; *q; q = &(*q)->next)
		if (*q == p) {
			*q = p->next;
			return;
		}
}

/* The last caller: apply, publish, wake the others.  Called with the lock
 * held; drops it around the engine call. */
static int complete(mem_steps *s, mem_step *p, emdb_db *db, uint64_t *rows, char *msg, size_t msglen)
{
	p->full = true;
	unlink_step(s, p);
	pthread_mutex_unlock(&s->lock);
	uint64_t r = 0;
	int rc = p->table ? emdb_update(db, p->table, &r) : emdb_update_all(db, &r);
	if (rc != EMDB_OK)
		snprintf(msg, msglen, "%s", emdb_last_error());
	pthread_mutex_lock(&s->lock);
	p->rc = rc;
	p->rows = r;
	snprintf(p->msg, sizeof(p->msg), "%s", rc != EMDB_OK ? msg : "");
	p->done = true;
	p->left = p->workers - 1;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (rows)
		*rows = r;
	return rc;
}

int mem_step_run(mem_steps *s, emdb_db *db, uint32_t table, uint32_t workers, uint32_t timeout_ms,
		 uint64_t *rows, char *msg, size_t msglen)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}

	pthread_mutex_lock(&s->lock);
	mem_step *p = s->open;
	while (p && p->table != table)
		p = p->next;
	if (p && p->workers != workers) {
		snprintf(msg, msglen, "synchronous step of table %u: this UPDATE says %u workers, the open step %u",
			 table, workers, p->workers);
		pthread_mutex_unlock(&s->lock);
		return EMDB_ERR_INVALID;
	}
	if (!p) {
		p = emdb_calloc(1, sizeof(*p));
		if (!p) {
			pthread_mutex_unlock(&s->lock);
			snprintf(msg, msglen, "no memory for a synchronous step");
			return EMDB_ERR_NOMEM;
		}
		p->table = table;
		p->workers = workers;
		p->next = s->open;
		s->open = p;
	}
	if (++p->n == workers)
		return complete(s, p, db, rows, msg, msglen);
	while (!p->done) {
		int w = timeout_ms && !p->full ? pthread_cond_timedwait(&s->cond, &s->lock, &until)
					       : pthread_cond_wait(&s->cond, &s->lock);
		if (w == ETIMEDOUT && !p->full && !p->done) {
			snprintf(msg, msglen,
				 "synchronous step of table %u: %u of %u workers arrived within the handle's timeout; nothing applied",
				 table, p->n, workers);
			if (--p->n == 0) {
				unlink_step(s, p);
				emdb_free(p);
			}
			pthread_mutex_unlock(&s->lock);
			return EMDB_ERR_TIMEOUT;
		}
	}
	int rc = p->rc;
	if (rows)
		*rows = p->rows;
	if (rc != EMDB_OK)
		snprintf(msg, msglen, "%s", p->msg);
	bool last = --p->left == 0;
	pthread_mutex_unlock(&s->lock);
	if (last)
		emdb_free(p);
	return rc;
}
