/*
 * job_int.h - a checkpoint or restore job: what it was asked to do and
 * its progress, shared by job.c, write.c and restore.c.
 * Progress fields are written by the running job and read by any thread,
 * each with atomic loads and stores.
 */
#ifndef EMDB_JOB_INT_H
#define EMDB_JOB_INT_H

#include <stdint.h>

#include <emdb/checkpoint.h>

#include "base/clock.h"

#define JOB_RESTORE 3 /* beside EMDB_CKPT_FULL and EMDB_CKPT_INCREMENTAL */

struct emdb_job {
	emdb_db *db;
	emdb_store *st;
	int kind;             /* EMDB_CKPT_FULL, EMDB_CKPT_INCREMENTAL, JOB_RESTORE */
	uint64_t restore_id;  /* JOB_RESTORE: 0 = latest */
	int ran;              /* atomic: emdb_job_run was called */
	int running;          /* atomic */
	/* progress, atomic */
	uint32_t phase;
	uint64_t rows_done, rows_total, bytes_done, bytes_total;
	uint64_t start_ns, end_ns, switch_ns, cow_rows, ckpt_id;
};

#define JOB_SET(j, f, v) __atomic_store_n(&(j)->f, (v), __ATOMIC_RELAXED)
#define JOB_ADD(j, f, v) __atomic_fetch_add(&(j)->f, (v), __ATOMIC_RELAXED)

/* The bodies of emdb_job_run (write.c, restore.c). */
int ckpt_write_run(emdb_job *job, emdb_ckpt_info *info);
int ckpt_restore_run(emdb_job *job, emdb_ckpt_info *info);

#endif
