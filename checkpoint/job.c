/*
 * job.c - checkpoint and restore jobs: preparing, running one at a time
 * per database, progress, and the one-call conveniences.
 *
 * Invariants:
 *   1. At most one job runs per emdb_db (db_ckpt(db)->busy, taken with a
 *      compare-and-swap); a second emdb_job_run fails with BUSY at once.
 *   2. A job runs at most once; its progress stays readable until freed,
 *      and its phase ends DONE or FAILED.
 *
 * State changes: the job's fields; the database's busy flag.
 */
#include <time.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "checkpoint/job_int.h"
#include "checkpoint/store_int.h"
#include "db/db_int.h"

static int job_new(emdb_db *db, emdb_store *st, int kind, uint64_t id, emdb_job **out)
{
	if (!db || !st || !out)
		return emdb__seterr(EMDB_ERR_INVALID, "job: NULL database, store or out");
	emdb_job *j = emdb_calloc(1, sizeof(*j));
	if (!j)
		return EMDB_ERR_NOMEM;
	j->db = db;
	j->st = st;
	j->kind = kind;
	j->restore_id = id;
	*out = j;
	return EMDB_OK;
}

int emdb_job_checkpoint(emdb_db *db, emdb_store *st, emdb_ckpt_kind kind, emdb_job **out)
{
	if (kind != EMDB_CKPT_FULL && kind != EMDB_CKPT_INCREMENTAL)
		return emdb__seterr(EMDB_ERR_INVALID, "unknown checkpoint kind %d", (int)kind);
	if (st && store_refuse_read_only(st, "checkpoint"))
		return EMDB_ERR_INVALID;
	return job_new(db, st, (int)kind, 0, out);
}

int emdb_job_restore(emdb_db *db, emdb_store *st, uint64_t id, emdb_job **out)
{
	return job_new(db, st, JOB_RESTORE, id, out);
}

int emdb_job_run(emdb_job *job, emdb_ckpt_info *info)
{
	if (!job)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_job_run: job is NULL");
	if (__atomic_exchange_n(&job->ran, 1, __ATOMIC_ACQ_REL))
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_job_run: this job has already run");
	db_ckpt_state *ck = db_ckpt(job->db);
	int idle = 0;
	if (!__atomic_compare_exchange_n(&ck->busy, &idle, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
		JOB_SET(job, phase, EMDB_PHASE_FAILED);
		return emdb__seterr(EMDB_ERR_BUSY, "another checkpoint or restore of this database is running");
	}
	__atomic_store_n(&job->running, 1, __ATOMIC_RELEASE);
	JOB_SET(job, start_ns, emdb__now_ns());
	emdb_ckpt_info tmp;
	int rc = store_enter(job->st);
	if (rc == EMDB_OK) {
		rc = job->kind == JOB_RESTORE ? ckpt_restore_run(job, info ? info : &tmp)
					      : ckpt_write_run(job, info ? info : &tmp);
		store_leave(job->st);
	}
	JOB_SET(job, end_ns, emdb__now_ns());
	JOB_SET(job, phase, rc == EMDB_OK ? EMDB_PHASE_DONE : EMDB_PHASE_FAILED);
	__atomic_store_n(&job->running, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&ck->busy, 0, __ATOMIC_RELEASE);
	return rc;
}

void emdb_job_progress(const emdb_job *j, emdb_progress *out)
{
#define LD_(f) __atomic_load_n(&j->f, __ATOMIC_RELAXED)
	out->phase = (emdb_job_phase)LD_(phase);
	out->rows_done = LD_(rows_done);
	out->rows_total = LD_(rows_total);
	out->bytes_done = LD_(bytes_done);
	out->bytes_total = LD_(bytes_total);
	out->switch_ns = LD_(switch_ns);
	out->cow_rows = LD_(cow_rows);
	out->ckpt_id = LD_(ckpt_id);
	uint64_t start = LD_(start_ns), end = LD_(end_ns);
#undef LD_
	out->elapsed_ns = !start ? 0 : (end ? end : emdb__now_ns()) - start;
}

void emdb_job_free(emdb_job *job)
{
	emdb_free(job);
}

/* The rest of a one-call job: run it if it was prepared, then free it. */
static int run_once(int rc, emdb_job *j, emdb_ckpt_info *info)
{
	if (rc == EMDB_OK) {
		rc = emdb_job_run(j, info);
		emdb_job_free(j);
	}
	return rc;
}

int emdb_checkpoint(emdb_db *db, emdb_store *st, emdb_ckpt_kind kind, emdb_ckpt_info *info)
{
	emdb_job *j = NULL;
	int rc = emdb_job_checkpoint(db, st, kind, &j);
	return run_once(rc, j, info);
}

int emdb_restore(emdb_db *db, emdb_store *st, uint64_t id, emdb_ckpt_info *info)
{
	emdb_job *j = NULL;
	int rc = emdb_job_restore(db, st, id, &j);
	return run_once(rc, j, info);
}

const char *emdb_job_phase_name(emdb_job_phase phase)
{
	static const char *const names[] = { "pending", "switch", "scan", "write", "sync",
					     "read", "swap", "done", "failed" };
	return (unsigned)phase < sizeof(names) / sizeof(names[0]) ? names[phase] : "unknown";
}
