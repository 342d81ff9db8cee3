/*
 * db/step.h - synchronous steps: the Update of a data-parallel step
 * applied once, when `workers` callers have arrived for the same table
 * (docs/protocol.md, UPDATE with workers >= 2; emdb_client_update_sync).
 * emdb-server and the mem:// client both run their steps here.
 *
 * A step has two halves, kept apart so that arrivals from elsewhere (a
 * remote node's, in a cluster) can be fed in and the Update applied by
 * whoever owns it:
 *   counting  step_arrive adds a waiter; the arrival that makes `workers`
 *             takes the full step out of the barrier and owns it;
 *   applying  its owner calls step_apply (the barrier's apply hook once,
 *             then the result to every waiter) or step_finish (a result
 *             decided elsewhere: an error, a remote node's answer).
 *
 * Waiters are callbacks, as libuv's uv_work_t after_work_cb: each waiter
 * (but the arrival that completes the step, which takes its result from
 * step_apply's return) gets exactly one call of its `done`, with the
 * step's result, or an error when its step fails (step_expire,
 * step_close) or it is withdrawn (step_leave).  `done` runs on the thread
 * that decided the result, never under the barrier's lock, and owns the
 * waiter's `arg` from then on.
 *
 * Sequenced arrivals (a resend is never counted twice).  An arrival may
 * name its worker: a rank, the worker's session (its client handle, a
 * random number) and the step number the worker is in (its seq, 1, 2,
 * ... per table).  The barrier then keeps, per table and rank, the last
 * applied seq and its rows, and the seq that waits or is being applied:
 *   - the same seq again while it waits: the resend replaces the earlier
 *     arrival (answered BUSY, "superseded"), counted once;
 *   - the same seq again after its step applied: answered at once with
 *     that step's rows, counted nowhere;
 *   - the same seq while its step is being applied: BUSY, ask again;
 *   - an older seq than the last applied or waiting one: INVALID, "from
 *     the past" (only the last applied result is kept);
 *   - a newer seq while an older one of the worker waits: INVALID;
 *   - another session of the rank (the worker restarted): starts afresh,
 *     replacing a waiting arrival of the old session.
 * A failed step (expired, withdrawn, closed, its Update failed) applied
 * nothing, so its seq may come again as a new arrival.  Arrivals without
 * a seq (seq 0) are counted as they come, as before sequences existed.
 *
 * Errors are negative emdb_err codes with a message in emdb_last_error()
 * (emdb/error.h); a refused call changes nothing.  Every function may be
 * called from any thread.  The barrier starts no thread and reads no
 * clock: deadlines and "now" are the caller's, in one monotonic clock.
 */
#ifndef EMDB_DB_STEP_H
#define EMDB_DB_STEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct step_barrier step_barrier;
typedef struct step step; /* a full step, owned by the arrival that filled it */

/* A waiter's answer: status EMDB_OK and rows updated, or an error with
 * msg (never NULL; "" on success).  msg is valid only during the call. */
typedef void (*step_done_fn)(void *arg, int status, uint64_t rows, const char *msg);

/* Who arrives, for sequenced arrivals (above); all zero: unsequenced. */
typedef struct step_seq {
	uint64_t seq;     /* the worker's step number, >= 1; 0: unsequenced */
	uint64_t session; /* the worker's session: another one starts afresh */
	uint32_t worker;  /* the worker's rank, < EMDB_WORKERS_MAX */
} step_seq;

typedef struct step_waiter {
	step_done_fn done;
	void *arg;
	uint64_t owner; /* step_leave withdraws waiters by it: a connection,
			   a caller (unique among the barrier's waiters) */
	step_seq id;    /* optional: a sequenced arrival */
} step_waiter;

/* The step's Update: of `table`, or of every table when it is 0; *rows
 * the rows updated.  Returns EMDB_OK or an emdb_err with its message in
 * emdb_last_error(). */
typedef int (*step_apply_fn)(void *arg, uint32_t table, uint64_t *rows);

typedef struct step_hooks {
	step_apply_fn apply; /* required */
	void *arg;           /* apply's and failed's */
	/* Optional: a step failed (step_expire, step_close) with msg, once
	 * per step, before its waiters hear of it (for a log). */
	void (*failed)(void *arg, const char *msg);
} step_hooks;

/* One worker's last applied step on a table: what a checkpoint keeps so
 * that, restored, the worker's resend of that step is answered, not
 * counted again. */
typedef struct step_seq_rec {
	uint32_t table, worker;
	uint64_t session;
	uint64_t applied; /* its seq, >= 1 */
	uint64_t rows;    /* that step's rows */
} step_seq_rec;

/* Every worker's last applied step into *out (emdb_malloc'd, emdb_free;
 * NULL when *n is 0), in no set order.  Errors: NOMEM. */
int step_seq_export(step_barrier *b, step_seq_rec **out, size_t *n);
/* A restore: every worker's last applied step becomes v[0..n)'s (none
 * for a worker not there).  A worker whose arrival waits or is being
 * applied keeps it (the restore came between).  Errors, nothing changed:
 * INVALID (a worker over EMDB_WORKERS_MAX, seq 0, table 0), NOMEM. */
int step_seq_import(step_barrier *b, const step_seq_rec *v, size_t n);

/* The engine's Update of an emdb_db (arg), for step_hooks.apply. */
int step_apply_update(void *db, uint32_t table, uint64_t *rows);

/* A barrier with these hooks (copied).  Free with step_barrier_destroy.
 * Errors: NOMEM. */
int step_barrier_create(const step_hooks *h, step_barrier **out);
/* No waiter may be left (their callbacks would never run): close or
 * drain first.  NULL is a no-op. */
void step_barrier_destroy(step_barrier *b);

/* Waiter w arrives at the step of `table` (0: every table) for `workers`
 * (>= 2), which opens now if none is, with deadline_ns (0: none, else on
 * the caller's clock) for step_expire.  Returns EMDB_OK with *full NULL:
 * w waits.  EMDB_OK with *full set: w completed the step and is not
 * among its waiters; the caller owns *full and ends it with step_apply or
 * step_finish.  A sequenced w (w->id.seq != 0) that resends an applied
 * step is answered through its `done`, before this returns EMDB_OK with
 * *full NULL, and counted nowhere; one that resends a waiting arrival
 * takes its place (the earlier waiter's `done` gets BUSY).  Errors, w not
 * added: INVALID (workers < 2, or not the open step's count, a worker
 * rank over EMDB_WORKERS_MAX, or a seq from the past: see above), BUSY
 * (w's step is being applied: ask again), NOMEM, CLOSED (step_close
 * ran). */
int step_arrive(step_barrier *b, uint32_t table, uint32_t workers, const step_waiter *w,
		uint64_t deadline_ns, step **full);

/* Apply s's Update once with the barrier's hook, answer every waiter of s
 * with its result, free s.  Returns the result for the arrival that
 * completed s (*rows set; on error emdb_last_error() holds the message). */
int step_apply(step_barrier *b, step *s, uint64_t *rows);
/* Answer every waiter of s with (status, rows, msg) and free s, applying
 * nothing here: an error (nothing applied), or a result decided elsewhere.
 * Status EMDB_OK records s's sequenced arrivals as applied with rows. */
void step_finish(step *s, int status, uint64_t rows, const char *msg);

/* Withdraw every waiting waiter of `owner`: each is answered with status
 * and "synchronous step of table T: N of W workers arrived <why>; nothing
 * applied".  A step left empty closes.  Returns how many were withdrawn
 * (0: none waits; one in a full step gets that step's result). */
unsigned step_leave(step_barrier *b, uint64_t owner, int status, const char *why);

/* Fail the steps whose deadline is at or before now_ns: their waiters are
 * answered with status and the message of step_leave.  Returns how many
 * steps failed. */
unsigned step_expire(step_barrier *b, uint64_t now_ns, int status, const char *why);
/* Fail every open step so, and refuse later arrivals with CLOSED and
 * `refusal` (copied): no answer can follow the close. */
void step_close(step_barrier *b, int status, const char *why, const char *refusal);

/* Waiters in open steps (the server's INFO updates_waiting). */
uint64_t step_waiting(const step_barrier *b);

/* The blocking form, for callers that are threads (mem://): arrive, and
 * wait for the step's result, or until timeout_ms (0: no limit) passed
 * with the step still short of workers; then withdraw with TIMEOUT
 * ("... within the handle's timeout; nothing applied").  Returns the
 * step's result (*rows set when not NULL) or an error of step_arrive.
 * id may be NULL (unsequenced). */
int step_wait(step_barrier *b, uint32_t table, uint32_t workers, const step_seq *id, uint32_t timeout_ms,
	      uint64_t *rows);

#endif
