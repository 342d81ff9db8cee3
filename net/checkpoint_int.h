/*
 * net/checkpoint_int.h - the layout of the server's persistence, shared by
 * checkpoint.c (life cycle, the calls of the handlers, INFO) and
 * checkpoint_job.c (accepting, running and logging jobs; the job thread and
 * the automatic checkpoints).  Private to those two files.
 */
#ifndef EMDB_NET_PERSIST_INT_H
#define EMDB_NET_PERSIST_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <emdb/checkpoint.h>
#include <emdb/db.h>

#include "net/checkpoint.h"

struct ckpts {
	emdb_db *db;
	emdb_store *st;             /* NULL: persistence is off */
	char dir[1024];

	pthread_mutex_t lock;
	pthread_cond_t wake;        /* job thread: a job was queued, steps are due, stop, new settings */
	pthread_t thread;
	bool started;

	/* under lock */
	bool stopping;
	ckpts_job_status jobs[CKPTS_JOBS_KEPT]; /* job n in slot (n - 1) % CKPTS_JOBS_KEPT */
	uint64_t next_job;          /* the next job's number, from 1 */
	emdb_job *cur;              /* the accepted job, until it ended; NULL: none */
	uint64_t cur_no;            /* its number; 0 when cur is NULL */
	bool cur_auto;              /* started by the automatic trigger */
	ckpts_settings set;
	bool have_base;             /* a checkpoint this process took or restored: an
				       incremental one has something to extend */
	bool force_full;            /* the last incremental failed: the next automatic one is full */
	uint32_t chain;             /* incremental checkpoints since the last full one */
	uint64_t last_ckpt_ns;      /* monotonic: the last checkpoint's start, or the open */
	uint64_t auto_count;        /* automatic checkpoints started */
	ckpts_end_fn cur_end;       /* the accepted job's end callback, or NULL */
	void *cur_end_arg;
	void (*auto_fn)(void *arg, emdb_ckpt_kind kind); /* ckpts_set_auto */
	void *auto_arg;
	ckpts_totals totals[2];     /* [0] checkpoints, [1] restores that ended */

	_Atomic uint64_t steps;     /* UPDATEs and PUSH_UPDATEs since the last checkpoint started */
	_Atomic uint64_t steps_due; /* set.every_steps, for ckpts_note_step */
};

/* The slot of job `no` (>= 1). */
static inline ckpts_job_status *ckpts__slot(ckpts *p, uint64_t no)
{
	return &p->jobs[(no - 1) % CKPTS_JOBS_KEPT];
}

/* "full checkpoint", "incremental checkpoint", "restore". */
const char *ckpts__kind_name(uint32_t kind);

/* Number a new job of kind (PROTO_JOB_*) and fill its slot: RUNNING,
 * phase pending.  Caller holds the lock.  Returns its number. */
uint64_t ckpts__begin_locked(ckpts *p, uint32_t kind);

/* Accept a job (caller holds the lock): prepare it, number it, fill its
 * slot (RUNNING, phase pending) and wake the job thread.  kind is a
 * PROTO_JOB_* value; ckpt is the checkpoint to restore.  Errors: BUSY,
 * INVALID, NOMEM, with the reason in err. */
int ckpts__queue_locked(ckpts *p, uint32_t kind, uint64_t ckpt, bool automatic,
			  uint64_t *no, char *err, size_t errlen);

/* Run the accepted job to its end on the calling thread (caller holds the
 * lock, which is released while the job runs), log it, apply retention,
 * and record its status.  Returns the job's result. */
int ckpts__run_locked(ckpts *p);

/* The job thread. */
void *ckpts__thread(void *arg);

#endif
