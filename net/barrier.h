/*
 * net/barrier.h - synchronous steps: UPDATE requests with workers n >= 2
 * wait until n of them have arrived for the same table id, then the
 * Update is applied once and all n are answered (docs/protocol.md,
 * UPDATE).
 *
 * A step is a list of waiting requests (thread, connection id, request
 * id) behind one mutex.  Joining never blocks a thread: the request that
 * completes a step takes the waiters out, applies the Update and posts
 * each waiter's reply to the waiter's I/O thread (io_thread_post_reply);
 * the others are answered from there.  Steps that time out, and every step
 * at shutdown, are answered the same way with an error.
 *
 * Thread safety: every function may be called from any thread.
 */
#ifndef EMDB_NET_BARRIER_H
#define EMDB_NET_BARRIER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct io_thread io_thread;

typedef struct barrier_waiter {
	io_thread *t;     /* the connection's I/O thread */
	uint64_t conn_id; /* conn.id */
	uint64_t req_id;  /* the UPDATE's request id */
} barrier_waiter;

typedef struct barrier_step barrier_step;

typedef struct barriers {
	pthread_mutex_t lock;
	barrier_step *open; /* list of steps waiting for workers */
	_Atomic uint64_t waiting; /* requests waiting, all steps (INFO) */
	bool closed;        /* barriers_fail(all) ran: joins are refused */
} barriers;

void barriers_init(barriers *b);
/* Frees the steps left; their requests get no answer (the threads are gone). */
void barriers_destroy(barriers *b);

/* The request w joins the step of `table` for `workers` (>= 2), which
 * opens now if none is, with its deadline timeout_ns from now (0: none).
 * Returns EMDB_OK and *done false: w waits.  EMDB_OK and *done true: w
 * completed the step; *out (free with barrier_step_free) holds its
 * waiters, w last, for the caller to apply the Update and answer with
 * barrier_answer.  Errors, w not added, with msg filled: INVALID (workers
 * differs from the open step's), NOMEM, CLOSED (shutting down). */
int barriers_join(barriers *b, uint32_t table, uint32_t workers, const barrier_waiter *w,
		  uint64_t timeout_ns, bool *done, barrier_step **out, char *msg, size_t msglen);

/* The connection is gone: withdraw its waiting requests.  Returns how
 * many. */
unsigned barriers_leave(barriers *b, uint64_t conn_id);

/* Answer every request of the steps past their deadline at `now_ns` (all
 * of them when `all`, and then refuse later joins with CLOSED) with
 * status and a message naming what was missing, and close those steps. */
void barriers_fail(barriers *b, uint64_t now_ns, bool all, int status, const char *why);

/* Post the same answer (status, rows, message when status < 0) to every
 * waiter of a completed step but `self` (NULL: none), whom the caller
 * answers itself. */
void barrier_answer(const barrier_step *s, const barrier_waiter *self, int status, uint64_t rows,
		    const char *msg);
void barrier_step_free(barrier_step *s);

#endif
