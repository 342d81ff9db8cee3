/*
 * checkpoint_job.c - the jobs of the server's persistence: accepting one,
 * running it (on the job thread, or on the main thread for the restore at
 * start), logging it, keeping its status, retention, and the automatic
 * checkpoints.
 *
 * Invariants:
 *   1. At most one job is accepted and not ended: p->cur.  It is set by
 *      ckpts__queue_locked and cleared only by ckpts__run_locked,
 *      both under p->lock, so a second start, a delete or a retention
 *      pass can never overlap it.
 *   2. A job's slot says RUNNING from its acceptance to its end, and then
 *      DONE or FAILED with its final progress, result or error; the
 *      emdb_job is freed only after its slot is final and p->cur cleared,
 *      so a status reader holding the lock never sees a freed job.
 *   3. emdb_job_run runs without p->lock: status, list and INFO are
 *      served while a job runs.
 *   4. An automatic checkpoint is FULL when this process has no
 *      checkpoint an incremental can extend, when the last incremental
 *      failed, or when the checkpoint_full_every - 1 checkpoints since the
 *      last full one were incremental; otherwise INCREMENTAL.
 *   5. The step count and the clock of the automatic trigger restart when
 *      a checkpoint starts running and after a successful restore.
 *
 * State changes: p->cur, p->cur_no, p->next_job, the job slots, the
 * automatic-trigger state (have_base, force_full, chain, last_ckpt_ns,
 * steps, auto_count), the totals, the store (retention).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "net/checkpoint_int.h"
#include "net/log.h"
#include "net/stats.h"
#include "protocol/proto.h"

#define TICK_NS 1000000000ull /* the job thread looks at the clock at least this often */

const char *ckpts__kind_name(uint32_t kind)
{
	switch (kind) {
	case PROTO_JOB_CHECKPOINT_FULL:
		return "full checkpoint";
	case PROTO_JOB_CHECKPOINT_INCREMENTAL:
		return "incremental checkpoint";
	case PROTO_JOB_RESTORE:
		return "restore";
	}
	return "job";
}

uint64_t ckpts__begin_locked(ckpts *p, uint32_t kind)
{
	uint64_t n = p->next_job++;
	ckpts_job_status *s = ckpts__slot(p, n);
	memset(s, 0, sizeof(*s));
	s->job = n;
	s->kind = kind;
	s->state = PROTO_JOB_RUNNING;
	s->progress.phase = EMDB_PHASE_PENDING;
	return n;
}

int ckpts__queue_locked(ckpts *p, uint32_t kind, uint64_t ckpt, bool automatic,
			  uint64_t *no, char *err, size_t errlen)
{
	if (p->cur) {
		snprintf(err, errlen, "job %" PRIu64 " (%s) is running: wait for it (JOB_STATUS %" PRIu64 ")",
			 p->cur_no, ckpts__kind_name(ckpts__slot(p, p->cur_no)->kind), p->cur_no);
		return EMDB_ERR_BUSY;
	}
	if (kind == PROTO_JOB_CHECKPOINT_INCREMENTAL && !p->have_base) {
		snprintf(err, errlen,
			 "an incremental checkpoint extends the last checkpoint this server took or restored, and there is none yet: take a full one first");
		return EMDB_ERR_INVALID;
	}
	emdb_job *j = NULL;
	int rc = kind == PROTO_JOB_RESTORE
			 ? emdb_job_restore(p->db, p->st, ckpt, &j)
			 : emdb_job_checkpoint(p->db, p->st, (emdb_ckpt_kind)kind, &j);
	if (rc != EMDB_OK) {
		snprintf(err, errlen, "%s", emdb_last_error());
		return rc;
	}
	uint64_t n = ckpts__begin_locked(p, kind);
	ckpts__slot(p, n)->progress.ckpt_id = kind == PROTO_JOB_RESTORE ? ckpt : 0;
	p->cur = j;
	p->cur_no = n;
	p->cur_auto = automatic;
	p->cur_end = NULL;
	p->cur_end_arg = NULL;
	if (automatic)
		p->auto_count++;
	pthread_cond_signal(&p->wake);
	*no = n;
	return EMDB_OK;
}

/* ---- running -------------------------------------------------------- */

static double mb(uint64_t bytes)
{
	return (double)bytes / 1e6;
}

static void log_end(uint64_t no, uint32_t kind, int rc, const char *msg, const emdb_progress *pr,
		    const emdb_ckpt_info *info)
{
	double secs = (double)pr->elapsed_ns / 1e9;
	if (rc != EMDB_OK) {
		log_error("job %" PRIu64 ": %s failed after %.3f s (phase %s): %s: %s", no,
			  ckpts__kind_name(kind), secs, emdb_job_phase_name(pr->phase),
			  emdb_err_name(rc), msg);
		return;
	}
	double rate = secs > 0 ? mb(pr->bytes_done) / secs : 0;
	if (kind == PROTO_JOB_RESTORE)
		log_info("job %" PRIu64 ": restore of checkpoint %" PRIu64 " (%s) done: %u tables, %" PRIu64
			 " rows, %.1f MB in %.3f s, %.1f MB/s",
			 no, info->id, emdb_ckpt_kind_name(info->kind) ? emdb_ckpt_kind_name(info->kind) : "?",
			 info->tables, info->rows_total, mb(pr->bytes_done), secs, rate);
	else
		log_info("job %" PRIu64 ": %s %" PRIu64 " done: %u tables, %" PRIu64 " rows (%" PRIu64
			 " in its chain), %.1f MB in %.3f s, %.1f MB/s, switch %.3f ms, %" PRIu64
			 " rows copied on write",
			 no, ckpts__kind_name(kind), info->id, info->tables, info->rows, info->rows_total,
			 mb(info->bytes), secs, rate, (double)pr->switch_ns / 1e6, pr->cow_rows);
}

/* checkpoint_keep after a successful checkpoint; runs while the job is
 * still p->cur, so nothing else touches the store's checkpoints. */
static void retain(ckpts *p, uint32_t keep)
{
	uint32_t deleted = 0;
	if (!keep)
		return;
	int rc = emdb_store_retain(p->st, keep, &deleted);
	if (rc != EMDB_OK)
		log_warn("checkpoint_keep %u: retention failed: %s: %s", keep, emdb_err_name(rc),
			 emdb_last_error());
	else if (deleted)
		log_info("checkpoint_keep %u: deleted %u old checkpoint%s", keep, deleted,
			 deleted == 1 ? "" : "s");
}

/* A job's end in the totals of its direction (INFO, /metrics). */
static void total_locked(ckpts *p, uint32_t kind, int rc, const emdb_progress *pr,
			 const emdb_ckpt_info *info)
{
	bool restore = kind == PROTO_JOB_RESTORE;
	ckpts_totals *t = &p->totals[restore];
	if (rc != EMDB_OK) {
		t->failed++;
		return;
	}
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	t->done++;
	t->have_last = true;
	t->last_ns = pr->elapsed_ns;
	t->last_bytes = restore ? pr->bytes_done : info->bytes;
	t->last_rows = restore ? info->rows_total : info->rows;
	t->last_end_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
	t->ns += t->last_ns;
	t->bytes += t->last_bytes;
	t->rows += t->last_rows;
}

/* Invariants 4 and 5: what a job's end means for the automatic trigger. */
static void account_locked(ckpts *p, uint32_t kind, int rc)
{
	bool ckpt = kind != PROTO_JOB_RESTORE;
	if (rc != EMDB_OK) {
		if (kind == PROTO_JOB_CHECKPOINT_INCREMENTAL)
			p->force_full = true;
		return;
	}
	p->have_base = true;
	p->force_full = false;
	if (kind == PROTO_JOB_CHECKPOINT_INCREMENTAL)
		p->chain++;
	else
		p->chain = 0;
	if (!ckpt) {
		atomic_store(&p->steps, 0);
		p->last_ckpt_ns = stats_now_ns();
	}
}

int ckpts__run_locked(ckpts *p)
{
	emdb_job *j = p->cur;
	uint64_t no = p->cur_no;
	bool automatic = p->cur_auto;
	ckpts_job_status *s = ckpts__slot(p, no);
	uint32_t kind = s->kind;
	uint32_t keep = p->set.keep;
	ckpts_end_fn end = p->cur_end;
	void *end_arg = p->cur_end_arg;
	if (kind != PROTO_JOB_RESTORE) {
		atomic_store(&p->steps, 0);
		p->last_ckpt_ns = stats_now_ns();
	}
	pthread_mutex_unlock(&p->lock);

	if (kind == PROTO_JOB_RESTORE)
		log_info("job %" PRIu64 ": restore of checkpoint %" PRIu64 " started", no, s->progress.ckpt_id);
	else
		log_info("job %" PRIu64 ": %s started%s", no, ckpts__kind_name(kind),
			 automatic ? " (automatic)" : "");
	emdb_ckpt_info info;
	memset(&info, 0, sizeof(info));
	int rc = emdb_job_run(j, &info);
	char msg[CKPTS_MSG_MAX] = "";
	if (rc != EMDB_OK)
		snprintf(msg, sizeof(msg), "%s", emdb_last_error()[0] ? emdb_last_error() : emdb_strerror(rc));
	emdb_progress pr;
	emdb_job_progress(j, &pr);
	log_end(no, kind, rc, msg, &pr, &info);
	if (rc == EMDB_OK && kind != PROTO_JOB_RESTORE)
		retain(p, keep);

	pthread_mutex_lock(&p->lock);
	s->progress = pr;
	if (rc == EMDB_OK) {
		s->state = PROTO_JOB_DONE;
		s->result = info;
	} else {
		s->state = PROTO_JOB_FAILED;
		s->error = rc;
		snprintf(s->message, sizeof(s->message), "%s", msg);
	}
	account_locked(p, kind, rc);
	total_locked(p, kind, rc, &pr, &info);
	p->cur = NULL;
	p->cur_no = 0;
	p->cur_end = NULL;
	emdb_job_free(j);
	if (end) {
		pthread_mutex_unlock(&p->lock);
		end(end_arg, rc, &info, msg);
		pthread_mutex_lock(&p->lock);
	}
	return rc;
}

/* ---- the job thread and the automatic trigger ------------------------- */

/* Is an automatic checkpoint due?  Caller holds the lock. */
static bool auto_due_locked(ckpts *p, uint64_t now)
{
	if (p->cur || p->stopping)
		return false;
	if (p->set.every_steps && atomic_load(&p->steps) >= p->set.every_steps)
		return true;
	return p->set.every_seconds &&
	       now - p->last_ckpt_ns >= (uint64_t)p->set.every_seconds * 1000000000ull;
}

static void auto_start_locked(ckpts *p)
{
	uint32_t every = p->set.full_every ? p->set.full_every : 1;
	bool full = !p->have_base || p->force_full || p->chain + 1 >= every;
	uint32_t kind = full ? PROTO_JOB_CHECKPOINT_FULL : PROTO_JOB_CHECKPOINT_INCREMENTAL;
	if (p->auto_fn) { /* a cluster node: its cluster takes it (ckpts_set_auto) */
		void (*fn)(void *, emdb_ckpt_kind) = p->auto_fn;
		void *arg = p->auto_arg;
		atomic_store(&p->steps, 0);
		p->last_ckpt_ns = stats_now_ns();
		p->auto_count++;
		pthread_mutex_unlock(&p->lock);
		fn(arg, (emdb_ckpt_kind)kind);
		pthread_mutex_lock(&p->lock);
		return;
	}
	char err[CKPTS_MSG_MAX];
	uint64_t no;
	int rc = ckpts__queue_locked(p, kind, 0, true, &no, err, sizeof(err));
	if (rc != EMDB_OK) {
		/* Not again at once: the clock and the count start over. */
		log_error("automatic %s could not start: %s: %s", ckpts__kind_name(kind),
			  emdb_err_name(rc), err);
		atomic_store(&p->steps, 0);
		p->last_ckpt_ns = stats_now_ns();
	}
}

static void wait_locked(ckpts *p, uint64_t now)
{
	uint64_t wait = TICK_NS;
	if (p->set.every_seconds) {
		uint64_t due = p->last_ckpt_ns + (uint64_t)p->set.every_seconds * 1000000000ull;
		if (due > now && due - now < wait)
			wait = due - now;
	}
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t at = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + wait;
	ts.tv_sec = (time_t)(at / 1000000000ull);
	ts.tv_nsec = (long)(at % 1000000000ull);
	pthread_cond_timedwait(&p->wake, &p->lock, &ts);
}

void *ckpts__thread(void *arg)
{
	ckpts *p = arg;
	pthread_mutex_lock(&p->lock);
	for (;;) {
		if (p->cur) {
			ckpts__run_locked(p);
			continue;
		}
		if (p->stopping)
			break;
		uint64_t now = stats_now_ns();
		if (auto_due_locked(p, now)) {
			auto_start_locked(p);
			continue;
		}
		wait_locked(p, now);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}
