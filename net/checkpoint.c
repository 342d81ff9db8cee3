/*
 * checkpoint.c - the server's persistence as the rest of the server sees it:
 * opening and closing the store and the job thread, the restore at start,
 * and the calls behind CHECKPOINT, RESTORE, JOB_STATUS, CHECKPOINT_LIST,
 * CHECKPOINT_DELETE and INFO.  Running jobs is checkpoint_job.c's.
 *
 * Invariants:
 *   1. p->st is NULL exactly when data_dir is empty; then every call
 *      answers UNSUPPORTED with the same message, and nothing else runs
 *      (no thread, no store).
 *   2. Everything in struct ckpts marked "under lock" is read and
 *      written with p->lock held; the step counter alone is atomic, so an
 *      UPDATE or PUSH_UPDATE costs one relaxed add.
 *   3. A refused call changes nothing: checks (kind, checkpoint id, a
 *      running job) come before a job is accepted; a delete runs under the
 *      lock, so no job starts in the middle of it.
 *   4. The store is closed only after the job thread ended, and the thread
 *      ends only once no job is accepted and not run (a job a client was
 *      told about always runs, even at shutdown).
 *
 * State changes: ckpts_open/close (store, thread), the job calls (via
 * checkpoint_job.c), ckpts_delete (the store), ckpts_configure (settings).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "net/checkpoint_int.h"
#include "net/log.h"
#include "net/stats.h"
#include "protocol/proto.h"

static const char off_msg[] = "persistence is off: start emdb-server with --data-dir DIR";

static int off(char *err, size_t errlen)
{
	snprintf(err, errlen, "%s", off_msg);
	return EMDB_ERR_UNSUPPORTED;
}

static void settings_locked(ckpts *p, const ckpts_settings *set)
{
	p->set = *set;
	atomic_store(&p->steps_due, set->every_steps);
}

int ckpts_open(emdb_db *db, const char *data_dir, bool accept_loss, const ckpts_settings *set,
		 ckpts **out, char *err, size_t errlen)
{
	ckpts *p = emdb_calloc(1, sizeof(*p));
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return EMDB_ERR_NOMEM;
	}
	p->db = db;
	p->next_job = 1;
	p->last_ckpt_ns = stats_now_ns();
	snprintf(p->dir, sizeof(p->dir), "%s", data_dir);
	if (data_dir[0]) {
		emdb_store_options so = EMDB_STORE_OPTIONS_INIT;
		so.accept_loss = accept_loss;
		int rc = emdb_store_open_ex(data_dir, &so, &p->st);
		if (rc != EMDB_OK) {
			snprintf(err, errlen, "cannot open the checkpoint store in data_dir %s: %s: %s",
				 data_dir, emdb_err_name(rc), emdb_last_error());
			emdb_free(p);
			return rc;
		}
		if (emdb_store_damage(p->st)[0])
			log_warn("checkpoint store %s opened with accept_data_loss: gave up %s", data_dir,
				 emdb_store_damage(p->st));
		size_t n = 0;
		emdb_store_list(p->st, NULL, 0, &n);
		log_info("checkpoint store %s open: %zu checkpoint%s", data_dir, n, n == 1 ? "" : "s");
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->wake, &ca);
	pthread_condattr_destroy(&ca);
	settings_locked(p, set);
	*out = p;
	return EMDB_OK;
}

/* "latest" -> 0, a positive decimal -> itself; -1 otherwise. */
static int parse_restore(const char *s, uint64_t *id)
{
	if (!strcmp(s, "latest")) {
		*id = 0;
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (s[0] < '0' || s[0] > '9' || *end || errno || v == 0)
		return -1;
	*id = v;
	return 0;
}

int ckpts_restore_at_start(ckpts *p, const char *restore, char *err, size_t errlen)
{
	uint64_t id;
	if (!restore[0])
		return EMDB_OK;
	if (!p->st) {
		snprintf(err, errlen, "restore %s: there is no checkpoint store: set data_dir", restore);
		return EMDB_ERR_UNSUPPORTED;
	}
	if (parse_restore(restore, &id) < 0) {
		snprintf(err, errlen, "restore: '%s' is neither \"latest\" nor a checkpoint id", restore);
		return EMDB_ERR_INVALID;
	}
	size_t n = 0;
	int rc = emdb_store_list(p->st, NULL, 0, &n);
	if (rc == EMDB_OK && n == 0 && id == 0) {
		log_info("restore latest: the store in %s holds no checkpoint, nothing to restore: starting empty",
			 p->dir);
		return EMDB_OK;
	}
	emdb_ckpt_info info;
	if (rc == EMDB_OK)
		rc = emdb_store_get(p->st, id, &info);
	if (rc != EMDB_OK) {
		snprintf(err, errlen, "restore %s from %s: %s", restore, p->dir, emdb_last_error());
		return rc;
	}
	uint64_t no;
	pthread_mutex_lock(&p->lock);
	rc = ckpts__queue_locked(p, PROTO_JOB_RESTORE, info.id, false, &no, err, errlen);
	if (rc == EMDB_OK) {
		rc = ckpts__run_locked(p);
		if (rc != EMDB_OK)
			snprintf(err, errlen, "restore of checkpoint %" PRIu64 " from %s failed: %s",
				 info.id, p->dir, ckpts__slot(p, no)->message);
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int ckpts_start(ckpts *p, char *err, size_t errlen)
{
	if (!p->st)
		return EMDB_OK;
	/* SIGTERM and SIGINT stay with the main thread. */
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	int rc = pthread_create(&p->thread, NULL, ckpts__thread, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start the checkpoint job thread: %s", strerror(rc));
		return EMDB_ERR_NOMEM;
	}
	p->started = true;
	return EMDB_OK;
}

void ckpts_close(ckpts *p)
{
	if (!p)
		return;
	if (p->started) {
		pthread_mutex_lock(&p->lock);
		p->stopping = true;
		if (p->cur)
			log_info("shutdown: waiting for job %" PRIu64 " (%s) to finish", p->cur_no,
				 ckpts__kind_name(ckpts__slot(p, p->cur_no)->kind));
		pthread_cond_signal(&p->wake);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->thread, NULL);
	}
	if (p->st) {
		emdb_store_close(p->st);
		log_info("checkpoint store %s closed", p->dir);
	}
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->lock);
	emdb_free(p);
}

void ckpts_configure(ckpts *p, const ckpts_settings *set)
{
	pthread_mutex_lock(&p->lock);
	settings_locked(p, set);
	pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->lock);
}

void ckpts_note_step(ckpts *p)
{
	if (!p->st)
		return;
	uint64_t n = atomic_fetch_add_explicit(&p->steps, 1, memory_order_relaxed) + 1;
	uint64_t due = atomic_load_explicit(&p->steps_due, memory_order_relaxed);
	if (due && n == due) {
		pthread_mutex_lock(&p->lock);
		pthread_cond_signal(&p->wake);
		pthread_mutex_unlock(&p->lock);
	}
}

/* ---- the calls of the handlers ---------------------------------------- */

int ckpts_checkpoint(ckpts *p, emdb_ckpt_kind kind, uint64_t *job, char *err, size_t errlen)
{
	if (!p->st)
		return off(err, errlen);
	if (kind != EMDB_CKPT_FULL && kind != EMDB_CKPT_INCREMENTAL) {
		snprintf(err, errlen, "unknown checkpoint kind %u: 1 is full, 2 incremental", (unsigned)kind);
		return EMDB_ERR_INVALID;
	}
	pthread_mutex_lock(&p->lock);
	int rc = ckpts__queue_locked(p, (uint32_t)kind, 0, false, job, err, errlen);
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int ckpts_restore(ckpts *p, uint64_t ckpt, uint64_t *job, char *err, size_t errlen)
{
	if (!p->st)
		return off(err, errlen);
	/* BUSY before INVALID: while a job runs, its checkpoint is not listed
	 * yet, and "wait" is the useful answer. */
	emdb_ckpt_info info;
	int rc = EMDB_OK;
	pthread_mutex_lock(&p->lock);
	if (!p->cur && (rc = emdb_store_get(p->st, ckpt, &info)) != EMDB_OK)
		snprintf(err, errlen, "%s", emdb_last_error());
	if (rc == EMDB_OK)
		rc = ckpts__queue_locked(p, PROTO_JOB_RESTORE, p->cur ? 0 : info.id, false, job, err,
					   errlen);
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* Job `job`'s status with the running job's live progress; caller holds
 * the lock and has checked that the job is remembered. */
static void status_locked(ckpts *p, uint64_t job, ckpts_job_status *out)
{
	*out = *ckpts__slot(p, job);
	if (job == p->cur_no)
		emdb_job_progress(p->cur, &out->progress);
}

int ckpts_checkpoint_then(ckpts *p, emdb_ckpt_kind kind, ckpts_end_fn fn, void *arg, uint64_t *job, char *err,
			  size_t errlen)
{
	if (!p->st)
		return off(err, errlen);
	pthread_mutex_lock(&p->lock);
	if (kind == EMDB_CKPT_INCREMENTAL && !p->have_base)
		kind = EMDB_CKPT_FULL;
	int rc = ckpts__queue_locked(p, (uint32_t)kind, 0, false, job, err, errlen);
	if (rc == EMDB_OK) {
		p->cur_end = fn;
		p->cur_end_arg = arg;
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int ckpts_job_begin(ckpts *p, uint32_t kind, uint64_t *job, char *err, size_t errlen)
{
	if (!p->st)
		return off(err, errlen);
	pthread_mutex_lock(&p->lock);
	*job = ckpts__begin_locked(p, kind);
	pthread_mutex_unlock(&p->lock);
	return EMDB_OK;
}

void ckpts_job_end(ckpts *p, uint64_t job, int rc, const emdb_ckpt_info *info, const char *msg)
{
	pthread_mutex_lock(&p->lock);
	ckpts_job_status *s = ckpts__slot(p, job);
	if (s->job == job) {
		s->progress.phase = rc == EMDB_OK ? EMDB_PHASE_DONE : EMDB_PHASE_FAILED;
		if (rc == EMDB_OK) {
			s->state = PROTO_JOB_DONE;
			s->result = *info;
			s->progress.ckpt_id = info->id;
		} else {
			s->state = PROTO_JOB_FAILED;
			s->error = rc;
			snprintf(s->message, sizeof(s->message), "%s", msg ? msg : "");
		}
	}
	pthread_mutex_unlock(&p->lock);
}

void ckpts_forget_base(ckpts *p)
{
	pthread_mutex_lock(&p->lock);
	p->have_base = false;
	p->chain = 0;
	pthread_mutex_unlock(&p->lock);
}

void ckpts_set_auto(ckpts *p, void (*fn)(void *arg, emdb_ckpt_kind kind), void *arg)
{
	pthread_mutex_lock(&p->lock);
	p->auto_fn = fn;
	p->auto_arg = arg;
	pthread_mutex_unlock(&p->lock);
}

int ckpts_status(ckpts *p, uint64_t job, ckpts_job_status *out, char *err, size_t errlen)
{
	if (!p->st)
		return off(err, errlen);
	int rc = EMDB_OK;
	pthread_mutex_lock(&p->lock);
	uint64_t newest = p->next_job - 1;
	uint64_t oldest = newest > CKPTS_JOBS_KEPT ? newest - CKPTS_JOBS_KEPT + 1 : 1;
	if (job == 0)
		job = newest;
	if (job == 0) {
		memset(out, 0, sizeof(*out));
		out->state = PROTO_JOB_IDLE;
	} else if (job > newest || job < oldest) {
		if (newest)
			snprintf(err, errlen, "job %" PRIu64 " is not known: the server remembers jobs %" PRIu64
				 "..%" PRIu64, job, oldest, newest);
		else
			snprintf(err, errlen, "job %" PRIu64 " is not known: no job has run yet", job);
		rc = EMDB_ERR_INVALID;
	} else {
		status_locked(p, job, out);
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int ckpts_list(ckpts *p, emdb_ckpt_info **out, size_t *n, char *err, size_t errlen)
{
	*out = NULL;
	*n = 0;
	if (!p->st)
		return off(err, errlen);
	/* Checkpoints may come and go between the two calls: retry until
	 * the count holds still. */
	size_t want = 0;
	int rc = emdb_store_list(p->st, NULL, 0, &want);
	while (rc == EMDB_OK) {
		size_t cap = want + 4, got = 0;
		emdb_ckpt_info *v = emdb_malloc(cap * sizeof(*v));
		if (!v) {
			snprintf(err, errlen, "out of memory for %zu checkpoint records", cap);
			return EMDB_ERR_NOMEM;
		}
		rc = emdb_store_list(p->st, v, cap, &got);
		if (rc == EMDB_OK && got <= cap) {
			if (got)
				*out = v;
			else
				emdb_free(v);
			*n = got;
			return EMDB_OK;
		}
		emdb_free(v);
		want = got;
	}
	snprintf(err, errlen, "%s", emdb_last_error());
	return rc;
}

int ckpts_delete(ckpts *p, uint64_t ckpt, char *err, size_t errlen)
{
	if (!p->st)
		return off(err, errlen);
	pthread_mutex_lock(&p->lock);
	int rc;
	if (p->cur) {
		snprintf(err, errlen, "job %" PRIu64 " (%s) is running: delete checkpoints once it ended",
			 p->cur_no, ckpts__kind_name(ckpts__slot(p, p->cur_no)->kind));
		rc = EMDB_ERR_BUSY;
	} else {
		rc = emdb_store_delete(p->st, ckpt);
		if (rc != EMDB_OK)
			snprintf(err, errlen, "%s", emdb_last_error());
	}
	pthread_mutex_unlock(&p->lock);
	if (rc == EMDB_OK)
		log_info("checkpoint %" PRIu64 " deleted", ckpt);
	return rc;
}

void ckpts_report_get(ckpts *p, ckpts_report *r)
{
	memset(r, 0, sizeof(*r));
	r->enabled = p->st != NULL;
	snprintf(r->data_dir, sizeof(r->data_dir), "%s", p->dir);
	if (p->st) {
		r->store_error = emdb_store_list(p->st, NULL, 0, &r->checkpoints);
		if (r->store_error != EMDB_OK)
			r->checkpoints = 0;
		else
			r->store_error = emdb_store_state(p->st);
		r->have_last = r->checkpoints && emdb_store_get(p->st, 0, &r->last) == EMDB_OK;
	}
	pthread_mutex_lock(&p->lock);
	uint64_t job = p->cur ? p->cur_no : p->next_job - 1;
	if (job) {
		r->have_job = true;
		status_locked(p, job, &r->job);
	}
	r->settings = p->set;
	r->steps_since = atomic_load(&p->steps);
	r->auto_checkpoints = p->auto_count;
	r->checkpoint = p->totals[0];
	r->restore = p->totals[1];
	pthread_mutex_unlock(&p->lock);
}
