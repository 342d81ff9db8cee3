/*
 * client/mem_step.h - synchronous steps for mem:// (UPDATE with workers
 * n >= 2, as emdb-server runs them: docs/protocol.md, UPDATE).
 *
 * In process a step is a meeting of threads: each caller blocks until n
 * callers have joined the step of the same table, the last one applies the
 * Update once, and all return its result.  The steps of a database are
 * shared by every handle on it: one mem_steps per private database (or
 * wrapped one) in its handle, one per mem://NAME database in its registry
 * entry.
 *
 * Thread safety: mem_step_run may be called from any thread.
 */
#ifndef EMDB_CLIENT_MEM_STEP_H
#define EMDB_CLIENT_MEM_STEP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/db.h>

typedef struct mem_step mem_step;

typedef struct mem_steps {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a step completed or gave up; CLOCK_MONOTONIC */
	mem_step *open;      /* steps still waiting for workers */
} mem_steps;

void mem_steps_init(mem_steps *s);
/* No thread may be inside mem_step_run. */
void mem_steps_destroy(mem_steps *s);

/* Join the step of `table` (0: every table) for `workers` (>= 2) and wait
 * until it completes, or timeout_ms (0: no limit) passed with it still
 * short of workers, in which case this caller withdraws.  Returns the
 * Update's result (*rows set when not NULL) for every caller of the step;
 * else INVALID (another workers count than the open step's) or TIMEOUT,
 * with msg filled, or NOMEM. */
int mem_step_run(mem_steps *s, emdb_db *db, uint32_t table, uint32_t workers, uint32_t timeout_ms,
		 uint64_t *rows, char *msg, size_t msglen);

#endif
