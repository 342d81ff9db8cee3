/*
 * checkpoint.c - the client's checkpoint and restore calls (emdb/client.h,
 * "Checkpoints and restore"): each start, status, list and delete is one
 * request through cl_call like every other call; waiting for a job is
 * polling its status until it ends.
 *
 * Invariants:
 *   1. Arguments are checked before anything is sent (future.c's
 *      check_args: an unknown kind, a NULL output): a refused call sends
 *      nothing.
 *   2. emdb_client_job_wait follows one job: when asked for job 0 it pins
 *      the number of the newest job at its first poll, so a job started
 *      later by someone else is never mistaken for it.
 *   3. A FAILED job's error is the call's result and its message becomes
 *      the thread's emdb_client_last_error(); a transport failure while
 *      polling is returned as it is.
 *
 * State changes: none in the client; the server's jobs and store.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <stdbool.h>

#include <emdb/alloc.h>
#include <emdb/client.h>

#include "client/client_int.h"

#define POLL_MS_DEFAULT 50

int emdb_client_checkpoint_start(emdb_client *c, emdb_ckpt_kind kind, uint64_t *job)
{
	CL_ARGS(CL_CHECKPOINT, "emdb_client_checkpoint_start");
	a.arg = (uint64_t)(uint32_t)kind;
	a.job_out = job;
	return cl_call(c, &a);
}

int emdb_client_restore_start(emdb_client *c, uint64_t id, uint64_t *job)
{
	CL_ARGS(CL_RESTORE, "emdb_client_restore_start");
	a.arg = id;
	a.job_out = job;
	return cl_call(c, &a);
}

int emdb_client_job_status(emdb_client *c, uint64_t job, emdb_job_status *out)
{
	CL_ARGS(CL_JOB_STATUS, "emdb_client_job_status");
	a.arg = job;
	a.job = out;
	return cl_call(c, &a);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(uint32_t ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int emdb_client_job_wait(emdb_client *c, uint64_t job, int64_t timeout_ms, uint32_t poll_ms,
			 void (*progress)(void *arg, const emdb_job_status *st), void *arg,
			 emdb_job_status *out)
{
	emdb_job_status *st = emdb_malloc(sizeof(*st));
	if (!st)
		return cl_seterr(EMDB_ERR_NOMEM, "emdb_client_job_wait: out of memory");
	uint64_t start = now_ms();
	uint32_t poll = poll_ms ? poll_ms : POLL_MS_DEFAULT;
	bool seen = false;
	int rc;
	for (;;) {
		rc = emdb_client_job_status(c, job, st);
		if (rc != EMDB_OK)
			break;
		seen = true;
		if (progress)
			progress(arg, st);
		if (st->state == EMDB_JOB_IDLE) {
			rc = cl_seterr(EMDB_ERR_INVALID, "emdb_client_job_wait: no job has run on this server");
			break;
		}
		job = st->job; /* invariant 2 */
		if (st->state == EMDB_JOB_DONE)
			break;
		if (st->state == EMDB_JOB_FAILED) {
			rc = st->error < 0 ? st->error : EMDB_ERR_INTERNAL;
			cl_setmsg(st->message);
			break;
		}
		uint64_t waited = now_ms() - start;
		if (timeout_ms >= 0 && waited >= (uint64_t)timeout_ms) {
			rc = cl_seterr(EMDB_ERR_TIMEOUT, "emdb_client_job_wait: job %llu still running after %lld ms",
				       (unsigned long long)st->job, (long long)timeout_ms);
			break;
		}
		uint32_t nap = poll;
		if (timeout_ms >= 0 && (uint64_t)timeout_ms - waited < nap)
			nap = (uint32_t)((uint64_t)timeout_ms - waited);
		sleep_ms(nap);
	}
	if (out && seen)
		*out = *st;
	emdb_free(st);
	return rc;
}

/* After a start call's rc and job number: wait for the job, and deliver
 * what it wrote or restored. */
static int start_and_wait(emdb_client *c, int rc, uint64_t job, emdb_ckpt_info *info)
{
	if (rc != EMDB_OK)
		return rc;
	emdb_job_status *st = emdb_malloc(sizeof(*st));
	if (!st)
		return cl_seterr(EMDB_ERR_NOMEM, "out of memory");
	rc = emdb_client_job_wait(c, job, -1, 0, NULL, NULL, st);
	if (rc == EMDB_OK && info)
		*info = st->result;
	emdb_free(st);
	return rc;
}

int emdb_client_checkpoint(emdb_client *c, emdb_ckpt_kind kind, emdb_ckpt_info *info)
{
	uint64_t job = 0;
	int rc = emdb_client_checkpoint_start(c, kind, &job);
	return start_and_wait(c, rc, job, info);
}

int emdb_client_restore(emdb_client *c, uint64_t id, emdb_ckpt_info *info)
{
	uint64_t job = 0;
	int rc = emdb_client_restore_start(c, id, &job);
	return start_and_wait(c, rc, job, info);
}

int emdb_client_checkpoint_list(emdb_client *c, emdb_ckpt_info **out, size_t *n)
{
	CL_ARGS(CL_CKPT_LIST, "emdb_client_checkpoint_list");
	a.ckpts = out;
	a.n_out = n;
	return cl_call(c, &a);
}

int emdb_client_checkpoint_delete(emdb_client *c, uint64_t id)
{
	CL_ARGS(CL_CKPT_DELETE, "emdb_client_checkpoint_delete");
	a.arg = id;
	return cl_call(c, &a);
}
