/*
 * test_step.c - the synchronous-step barrier (db/step.h) by itself, as
 * emdb-server and the mem:// client drive it: waiters are callbacks, the
 * arrival that fills a step owns it and applies it once, and every other
 * waiter hears the result exactly once, from whichever thread decided it.
 *
 * What is checked: nothing is applied and nobody is answered before the
 * last arrival; then the Update runs once and every waiter gets its
 * result; another worker count is refused with the step left as it was;
 * a step past its deadline, a closed barrier and a withdrawn waiter answer
 * with the caller's status and say how many arrived, applying nothing; a
 * result decided elsewhere (a remote node's) reaches the waiters without
 * the apply hook; a callback may call the barrier again; and, with the
 * real engine, threads meeting in step_wait advance the table's step by
 * one and withdraw alone when their timeout passes.  Sequenced arrivals
 * (a worker's rank, session and step number): a resend while waiting
 * takes the earlier arrival's place (BUSY to it) and is counted once; a
 * resend after the step applied is answered with its rows at once and
 * counted nowhere, so the next step still waits for every worker; an
 * older step is refused INVALID; a failed step's number may come again;
 * a new session of the rank starts afresh.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <emdb/db.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "db/step.h"
#include "tests/lib/helpers.h"

/* ---- a fake Update and recording waiters ----------------------------- */

typedef struct fake_update {
	int calls;
	uint32_t table;
	int rc; /* what it returns */
	uint64_t rows;
	int failed; /* the failed hook's calls */
	char failed_msg[256];
} fake_update;

static int fake_apply(void *arg, uint32_t table, uint64_t *rows)
{
	fake_update *f = arg;
	f->calls++;
	f->table = table;
	*rows = f->rows;
	return f->rc ? emdb__seterr(f->rc, "the fake Update failed") : EMDB_OK;
}

static void fake_failed(void *arg, const char *msg)
{
	fake_update *f = arg;
	f->failed++;
	snprintf(f->failed_msg, sizeof(f->failed_msg), "%s", msg);
}

typedef struct answer {
	int calls;
	int status;
	uint64_t rows;
	char msg[256];
} answer;

static void record(void *arg, int status, uint64_t rows, const char *msg)
{
	answer *a = arg;
	a->calls++;
	a->status = status;
	a->rows = rows;
	snprintf(a->msg, sizeof(a->msg), "%s", msg);
}

static step_barrier *barrier(fake_update *f)
{
	step_hooks h = { .apply = fake_apply, .arg = f, .failed = fake_failed };
	step_barrier *b = NULL;
	cr_assert_eq(step_barrier_create(&h, &b), EMDB_OK);
	return b;
}

/* A waiter recording into a, owned by owner. */
static int arrive(step_barrier *b, uint32_t table, uint32_t workers, answer *a, uint64_t owner,
		  uint64_t deadline, step **full)
{
	step_waiter w = { record, a, owner, { 0 } };
	return step_arrive(b, table, workers, &w, deadline, full);
}

Test(step, applied_once_when_the_last_arrives)
{
	fake_update f = { .rows = 7 };
	step_barrier *b = barrier(&f);
	answer a[2] = { 0 };
	step *full = NULL;
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(arrive(b, 5, 3, &a[i], (uint64_t)i + 1, 0, &full), EMDB_OK);
		cr_assert_null(full, "arrival %d filled a step of 3", i);
	}
	cr_assert_eq(step_waiting(b), 2);
	cr_assert_eq(f.calls, 0, "applied before the last arrival");
	cr_assert_eq(a[0].calls + a[1].calls, 0, "answered before the last arrival");

	answer last = { 0 };
	cr_assert_eq(arrive(b, 5, 3, &last, 3, 0, &full), EMDB_OK);
	cr_assert_not_null(full);
	cr_assert_eq(step_waiting(b), 0);
	uint64_t rows = 0;
	cr_assert_eq(step_apply(b, full, &rows), EMDB_OK);
	cr_assert_eq(rows, 7);
	cr_assert_eq(f.calls, 1);
	cr_assert_eq(f.table, 5);
	cr_assert_eq(last.calls, 0, "the arrival that filled the step is answered by step_apply");
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(a[i].calls, 1, "waiter %d answered %d times", i, a[i].calls);
		cr_assert_eq(a[i].status, EMDB_OK);
		cr_assert_eq(a[i].rows, 7);
	}
	/* The next step of the same table opens afresh. */
	cr_assert_eq(arrive(b, 5, 2, &a[0], 1, 0, &full), EMDB_OK);
	cr_assert_null(full);
	cr_assert_eq(arrive(b, 5, 2, &last, 2, 0, &full), EMDB_OK);
	cr_assert_not_null(full);
	cr_assert_eq(step_apply(b, full, NULL), EMDB_OK);
	cr_assert_eq(f.calls, 2);
	cr_assert_eq(a[0].calls, 2);
	step_barrier_destroy(b);
}

/* A waiter whose callback leaves another message on the thread. */
static void record_and_fail(void *arg, int status, uint64_t rows, const char *msg)
{
	record(arg, status, rows, msg);
	emdb__seterr(EMDB_ERR_INVALID, "a callback's own failure");
}

Test(step, a_failed_update_reaches_every_waiter)
{
	fake_update f = { .rc = EMDB_ERR_NO_TABLE };
	step_barrier *b = barrier(&f);
	answer a = { 0 }, a2 = { 0 }, last = { 0 };
	step *full;
	step_waiter w2 = { record_and_fail, &a2, 3, { 0 } };
	cr_assert_eq(arrive(b, 0, 3, &a, 1, 0, &full), EMDB_OK);
	cr_assert_eq(step_arrive(b, 0, 3, &w2, 0, &full), EMDB_OK);
	cr_assert_eq(arrive(b, 0, 3, &last, 2, 0, &full), EMDB_OK);
	cr_assert_eq(step_apply(b, full, NULL), EMDB_ERR_NO_TABLE);
	cr_assert_str_eq(emdb_last_error(), "no such table: the fake Update failed");
	cr_assert_eq(f.calls, 1);
	cr_assert_eq(f.table, 0, "table 0: the Update of every table");
	cr_assert_eq(a.calls, 1);
	cr_assert_eq(a.status, EMDB_ERR_NO_TABLE);
	cr_assert_str_eq(a.msg, "no such table: the fake Update failed", "the engine's message, unchanged");
	cr_assert_eq(a2.calls, 1);
	cr_assert_str_eq(a2.msg, a.msg);
	step_barrier_destroy(b);
}

Test(step, another_worker_count_is_refused_and_changes_nothing)
{
	fake_update f = { 0 };
	step_barrier *b = barrier(&f);
	answer a = { 0 }, x = { 0 };
	step *full;
	cr_assert_eq(arrive(b, 1, 3, &a, 1, 0, &full), EMDB_OK);
	cr_assert_eq(arrive(b, 1, 2, &x, 2, 0, &full), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "says 2 workers, the open step 3"), "%s", emdb_last_error());
	cr_assert_null(full);
	cr_assert_eq(arrive(b, 1, 1, &x, 2, 0, &full), EMDB_ERR_INVALID);
	cr_assert_eq(arrive(b, 1, 0, &x, 2, 0, &full), EMDB_ERR_INVALID);
	cr_assert_eq(step_waiting(b), 1);
	cr_assert_eq(x.calls, 0, "a refused arrival is never answered");
	/* Another table has steps of its own. */
	cr_assert_eq(arrive(b, 2, 2, &x, 2, 0, &full), EMDB_OK);
	cr_assert_null(full);
	cr_assert_eq(step_waiting(b), 2);
	step_close(b, EMDB_ERR_CLOSED, "at the end of the test", "closed");
	cr_assert_eq(a.calls, 1);
	cr_assert_eq(x.calls, 1);
	cr_assert_eq(f.calls, 0);
	step_barrier_destroy(b);
}

Test(step, a_step_past_its_deadline_fails_for_all_and_applies_nothing)
{
	fake_update f = { 0 };
	step_barrier *b = barrier(&f);
	answer a[2] = { 0 }, other = { 0 };
	step *full;
	cr_assert_eq(arrive(b, 4, 3, &a[0], 1, 1000, &full), EMDB_OK);
	cr_assert_eq(arrive(b, 4, 3, &a[1], 2, 0, &full), EMDB_OK);
	cr_assert_eq(arrive(b, 6, 2, &other, 3, 0, &full), EMDB_OK); /* no deadline */
	cr_assert_eq(step_expire(b, 999, EMDB_ERR_TIMEOUT, "within the test's limit"), 0);
	cr_assert_eq(a[0].calls + a[1].calls, 0);
	cr_assert_eq(step_expire(b, 1000, EMDB_ERR_TIMEOUT, "within the test's limit"), 1);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(a[i].calls, 1);
		cr_assert_eq(a[i].status, EMDB_ERR_TIMEOUT);
		cr_assert_str_eq(a[i].msg,
				 "synchronous step of table 4: 2 of 3 workers arrived within the test's limit; nothing applied");
	}
	cr_assert_eq(f.failed, 1, "the failed hook runs once per step");
	cr_assert_str_eq(f.failed_msg, a[0].msg);
	cr_assert_eq(f.calls, 0);
	cr_assert_eq(other.calls, 0, "a step without a deadline waits");
	cr_assert_eq(step_waiting(b), 1);
	cr_assert_eq(step_expire(b, UINT64_MAX, EMDB_ERR_TIMEOUT, "ever"), 0);
	step_close(b, EMDB_ERR_CLOSED, "at the end of the test", "closed");
	step_barrier_destroy(b);
}

Test(step, a_withdrawn_waiter_is_answered_and_the_others_wait)
{
	fake_update f = { .rows = 3 };
	step_barrier *b = barrier(&f);
	answer a = { 0 }, a2 = { 0 }, c = { 0 }, last = { 0 };
	step *full;
	/* Owner 1 has two requests in the step, owner 2 one. */
	cr_assert_eq(arrive(b, 9, 4, &a, 1, 0, &full), EMDB_OK);
	cr_assert_eq(arrive(b, 9, 4, &c, 2, 0, &full), EMDB_OK);
	cr_assert_eq(arrive(b, 9, 4, &a2, 1, 0, &full), EMDB_OK);
	cr_assert_eq(step_leave(b, 7, EMDB_ERR_CLOSED, "before it left"), 0);
	cr_assert_eq(step_leave(b, 1, EMDB_ERR_CLOSED, "before it left"), 2);
	cr_assert_eq(a.calls, 1);
	cr_assert_eq(a2.calls, 1);
	cr_assert_eq(a.status, EMDB_ERR_CLOSED);
	cr_assert_str_eq(a.msg, "synchronous step of table 9: 3 of 4 workers arrived before it left; nothing applied");
	cr_assert_eq(c.calls, 0);
	cr_assert_eq(step_waiting(b), 1);
	/* The step still needs three more. */
	answer more[2] = { 0 };
	for (uint64_t o = 3; o < 5; o++) {
		cr_assert_eq(arrive(b, 9, 4, &more[o - 3], o, 0, &full), EMDB_OK);
		cr_assert_null(full, "a withdrawn waiter still counted");
	}
	cr_assert_eq(arrive(b, 9, 4, &last, 5, 0, &full), EMDB_OK);
	cr_assert_not_null(full);
	cr_assert_eq(step_apply(b, full, NULL), EMDB_OK);
	cr_assert_eq(c.calls, 1);
	cr_assert_eq(c.status, EMDB_OK);
	cr_assert_eq(c.rows, 3);
	cr_assert_eq(more[0].calls + more[1].calls, 2);
	cr_assert_eq(a.calls, 1, "a withdrawn waiter was answered twice");
	cr_assert_eq(f.calls, 1);

	/* Its last waiter gone, a step closes: the next one opens afresh,
	 * with another worker count if wanted. */
	cr_assert_eq(arrive(b, 9, 3, &a, 1, 0, &full), EMDB_OK);
	cr_assert_eq(step_leave(b, 1, EMDB_ERR_TIMEOUT, "in time"), 1);
	cr_assert_eq(step_waiting(b), 0);
	cr_assert_eq(arrive(b, 9, 2, &a, 1, 0, &full), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(step_leave(b, 1, EMDB_ERR_TIMEOUT, "in time"), 1);
	step_barrier_destroy(b);
}

Test(step, close_answers_every_step_and_refuses_later_arrivals)
{
	fake_update f = { 0 };
	step_barrier *b = barrier(&f);
	answer a = { 0 }, x = { 0 };
	step *full;
	cr_assert_eq(arrive(b, 1, 2, &a, 1, 0, &full), EMDB_OK);
	step_close(b, EMDB_ERR_CLOSED, "before the server shut down", "the server is shutting down");
	cr_assert_eq(a.calls, 1);
	cr_assert_eq(a.status, EMDB_ERR_CLOSED);
	cr_assert(strstr(a.msg, "1 of 2 workers arrived before the server shut down"), "%s", a.msg);
	cr_assert_eq(arrive(b, 1, 2, &x, 2, 0, &full), EMDB_ERR_CLOSED);
	cr_assert_str_eq(emdb_last_error(), "connection closed: the server is shutting down");
	cr_assert_eq(x.calls, 0);
	cr_assert_eq(f.calls, 0);
	step_barrier_destroy(b);
}

/* The arrival that fills the step may come from elsewhere (a remote
 * node's, fed in by a cluster layer) and the result be decided there:
 * step_finish answers the waiters without the local apply hook. */
Test(step, a_result_decided_elsewhere_reaches_the_waiters)
{
	fake_update f = { 0 };
	step_barrier *b = barrier(&f);
	answer a = { 0 }, remote = { 0 };
	step *full;
	cr_assert_eq(arrive(b, 3, 2, &a, 1, 0, &full), EMDB_OK);
	cr_assert_eq(arrive(b, 3, 2, &remote, 1000, 0, &full), EMDB_OK);
	cr_assert_not_null(full);
	step_finish(full, EMDB_OK, 5, NULL);
	cr_assert_eq(a.calls, 1);
	cr_assert_eq(a.status, EMDB_OK);
	cr_assert_eq(a.rows, 5);
	cr_assert_str_eq(a.msg, "");
	cr_assert_eq(f.calls, 0);
	step_barrier_destroy(b);
}

/* A waiter's callback runs outside the barrier's lock: it may arrive at
 * the next step at once (a worker that loops). */
typedef struct reentrant {
	step_barrier *b;
	int calls;
	int rc;
} reentrant;

static void arrive_again(void *arg, int status, uint64_t rows, const char *msg)
{
	reentrant *r = arg;
	(void)status;
	(void)rows;
	(void)msg;
	if (r->calls++)
		return;
	step *full;
	step_waiter w = { arrive_again, r, 1, { 0 } };
	r->rc = step_arrive(r->b, 1, 2, &w, 0, &full);
}

Test(step, a_callback_may_call_the_barrier)
{
	fake_update f = { 0 };
	step_barrier *b = barrier(&f);
	reentrant r = { b, 0, -1 };
	step_waiter w = { arrive_again, &r, 1, { 0 } };
	step *full;
	answer last = { 0 };
	cr_assert_eq(step_arrive(b, 1, 2, &w, 0, &full), EMDB_OK);
	cr_assert_eq(arrive(b, 1, 2, &last, 2, 0, &full), EMDB_OK);
	cr_assert_eq(step_apply(b, full, NULL), EMDB_OK);
	cr_assert_eq(r.rc, EMDB_OK);
	cr_assert_eq(step_waiting(b), 1, "the callback's arrival opened the next step");
	step_close(b, EMDB_ERR_CLOSED, "at the end of the test", "closed");
	cr_assert_eq(r.calls, 2);
	step_barrier_destroy(b);
}

/* ---- the blocking form, with the engine ------------------------------ */

#define THREADS 3

typedef struct sync_worker {
	step_barrier *b;
	uint32_t table;
	uint32_t timeout_ms;
	uint64_t rows;
	int rc;
	char msg[256];
} sync_worker;

static void *sync_main(void *arg)
{
	sync_worker *w = arg;
	w->rc = step_wait(w->b, w->table, THREADS, NULL, w->timeout_ms, &w->rows);
	snprintf(w->msg, sizeof(w->msg), "%s", w->rc ? emdb_last_error() : "");
	return NULL;
}

Test(step, threads_meet_in_step_wait_and_the_engine_updates_once, .timeout = 60)
{
	emdb_db *db = open_db(4);
	uint32_t t = make_sgd_lr1_table(db, 4);
	uint64_t ids[2] = { 0, UINT64_MAX };
	float g[8] = { 1, 1, 1, 1, 2, 2, 2, 2 };
	cr_assert_eq(emdb_push(db, t, ids, 2, 4, g), EMDB_OK);
	step_hooks h = { .apply = step_apply_update, .arg = db };
	step_barrier *b;
	cr_assert_eq(step_barrier_create(&h, &b), EMDB_OK);
	sync_worker w[THREADS];
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (sync_worker){ .b = b, .table = t, .timeout_ms = 60000 };
		cr_assert_eq(pthread_create(&th[i], NULL, sync_main, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < THREADS; i++) {
		cr_assert_eq(w[i].rc, EMDB_OK, "thread %d: %s", i, w[i].msg);
		cr_assert_eq(w[i].rows, 2, "thread %d was told %llu rows", i, (unsigned long long)w[i].rows);
	}
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), EMDB_OK);
	cr_assert_eq(info.stats.step, 1, "the Update ran %llu times", (unsigned long long)info.stats.step);
	cr_assert_eq(step_waiting(b), 0);
	step_barrier_destroy(b);
	emdb_db_close(db);
}

Test(step, step_wait_withdraws_alone_when_its_timeout_passes, .timeout = 60)
{
	emdb_db *db = open_db(4);
	uint32_t t = make_sgd_lr1_table(db, 4);
	step_hooks h = { .apply = step_apply_update, .arg = db };
	step_barrier *b;
	cr_assert_eq(step_barrier_create(&h, &b), EMDB_OK);
	uint64_t rows = 99;
	int rc = step_wait(b, t, 2, NULL, 50, &rows);
	cr_assert_eq(rc, EMDB_ERR_TIMEOUT, "%s", emdb_err_name(rc));
	char want[200];
	snprintf(want, sizeof(want),
		 "timed out: synchronous step of table %u: 1 of 2 workers arrived within the handle's timeout; nothing applied",
		 t);
	cr_assert_str_eq(emdb_last_error(), want);
	cr_assert_eq(step_waiting(b), 0);
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), EMDB_OK);
	cr_assert_eq(info.stats.step, 0);
	step_barrier_destroy(b);
	emdb_db_close(db);
}

/* ---- sequenced arrivals ----------------------------------------------- */

static int arrive_seq(step_barrier *b, uint32_t table, uint32_t workers, answer *a, uint64_t owner,
		      uint32_t rank, uint64_t session, uint64_t seq, step **full)
{
	step_waiter w = { record, a, owner, { seq, session, rank } };
	return step_arrive(b, table, workers, &w, 0, full);
}

Test(step, a_resend_after_its_step_applied_is_answered_from_memory)
{
	fake_update f = { .rows = 9 };
	step_barrier *b = barrier(&f);
	answer a0 = { 0 }, a1 = { 0 }, again = { 0 }, resent = { 0 };
	step *full = NULL;
	/* Worker 0 arrives for its step 1 and resends it while it waits. */
	cr_assert_eq(arrive_seq(b, 4, 2, &a0, 10, 0, 77, 1, &full), EMDB_OK);
	cr_assert_null(full);
	cr_assert_eq(arrive_seq(b, 4, 2, &resent, 11, 0, 77, 1, &full), EMDB_OK);
	cr_assert_null(full, "a resend while waiting completed the step of 2");
	cr_assert_eq(step_waiting(b), 1, "the resend was counted twice");
	cr_assert_eq(a0.calls, 1, "the replaced arrival is answered");
	cr_assert_eq(a0.status, EMDB_ERR_BUSY);
	/* Worker 1 completes it. */
	cr_assert_eq(arrive_seq(b, 4, 2, &a1, 12, 1, 88, 1, &full), EMDB_OK);
	cr_assert_not_null(full);
	uint64_t rows = 0;
	cr_assert_eq(step_apply(b, full, &rows), EMDB_OK);
	cr_assert_eq(f.calls, 1);
	cr_assert_eq(resent.calls, 1);
	cr_assert_eq(resent.rows, 9);

	/* Worker 0 resends step 1 after it applied: answered at once. */
	f.rows = 5;
	cr_assert_eq(arrive_seq(b, 4, 2, &again, 13, 0, 77, 1, &full), EMDB_OK);
	cr_assert_null(full);
	cr_assert_eq(again.calls, 1, "the resend was not answered");
	cr_assert_eq(again.status, EMDB_OK);
	cr_assert_eq(again.rows, 9, "the resend got %llu rows, not its step's", (unsigned long long)again.rows);
	cr_assert_eq(step_waiting(b), 0, "the resend waits in the next step");
	cr_assert_eq(f.calls, 1);

	/* Step 2 still needs both. */
	answer s2 = { 0 }, s2b = { 0 };
	cr_assert_eq(arrive_seq(b, 4, 2, &s2, 14, 0, 77, 2, &full), EMDB_OK);
	cr_assert_null(full, "step 2 completed with one worker");
	cr_assert_eq(step_waiting(b), 1);
	/* While it waits, step 1 is still the last applied: answered; step 3
	 * is refused (step 2 waits). */
	answer old = { 0 };
	cr_assert_eq(arrive_seq(b, 4, 2, &old, 15, 0, 77, 1, &full), EMDB_OK);
	cr_assert_null(full);
	cr_assert_eq(old.calls, 1);
	cr_assert_eq(old.rows, 9);
	cr_assert_eq(step_waiting(b), 1);
	old = (answer){ 0 };
	cr_assert_eq(arrive_seq(b, 4, 2, &old, 15, 0, 77, 3, &full), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "still waits"), "%s", emdb_last_error());
	cr_assert_eq(old.calls, 0);
	cr_assert_eq(arrive_seq(b, 4, 2, &s2b, 16, 1, 88, 2, &full), EMDB_OK);
	cr_assert_not_null(full);
	cr_assert_eq(step_apply(b, full, &rows), EMDB_OK);
	cr_assert_eq(f.calls, 2);
	/* Step 1 is no longer remembered: refused. */
	cr_assert_eq(arrive_seq(b, 4, 2, &old, 15, 0, 77, 1, &full), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "from the past"), "%s", emdb_last_error());
	cr_assert_eq(old.calls, 0);
	cr_assert_eq(step_waiting(b), 0);
	/* Another table keeps its own sequence. */
	cr_assert_eq(arrive_seq(b, 5, 2, &old, 15, 0, 77, 1, &full), EMDB_OK);
	cr_assert_null(full);
	cr_assert_eq(step_leave(b, 15, EMDB_ERR_CLOSED, "gone"), 1);
	step_barrier_destroy(b);
}

Test(step, a_failed_steps_number_comes_again_and_a_new_session_starts_afresh)
{
	fake_update f = { .rows = 3 };
	step_barrier *b = barrier(&f);
	answer a = { 0 }, c = { 0 };
	step *full = NULL;
	/* Step 1 of worker 0 expires: nothing applied, its number is free. */
	step_waiter w = { record, &a, 1, { 1, 42, 0 } };
	cr_assert_eq(step_arrive(b, 7, 2, &w, 100, &full), EMDB_OK);
	cr_assert_eq(step_expire(b, 200, EMDB_ERR_TIMEOUT, "late"), 1);
	cr_assert_eq(a.status, EMDB_ERR_TIMEOUT);
	cr_assert_eq(arrive_seq(b, 7, 2, &a, 1, 0, 42, 1, &full), EMDB_OK);
	cr_assert_eq(step_waiting(b), 1, "a failed step's number was refused or answered");
	cr_assert_eq(arrive_seq(b, 7, 2, &c, 2, 1, 43, 1, &full), EMDB_OK);
	cr_assert_not_null(full);
	uint64_t rows;
	cr_assert_eq(step_apply(b, full, &rows), EMDB_OK);
	/* A restarted worker 0 (another session) numbers from 1 again. */
	answer d = { 0 };
	cr_assert_eq(arrive_seq(b, 7, 2, &d, 3, 0, 99, 1, &full), EMDB_OK);
	cr_assert_null(full);
	cr_assert_eq(d.calls, 0, "a new session's step 1 was answered from the old one's");
	cr_assert_eq(step_waiting(b), 1);
	/* A rank out of range is refused. */
	cr_assert_eq(arrive_seq(b, 7, 2, &c, 4, EMDB_WORKERS_MAX, 1, 1, &full), EMDB_ERR_INVALID);
	step_close(b, EMDB_ERR_CLOSED, "closing", "closed");
	cr_assert_eq(d.status, EMDB_ERR_CLOSED);
	step_barrier_destroy(b);
}
