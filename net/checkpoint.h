/*
 * net/checkpoint.h - the server's persistence: its checkpoint store
 * (emdb/checkpoint.h), the one background thread that runs checkpoint and
 * restore jobs, the status of the last jobs, and the automatic checkpoints.
 *
 * Life cycle (main thread):
 *   ckpts_open        opens the store in data_dir ("" = persistence off:
 *                       every call below then answers UNSUPPORTED);
 *   ckpts_restore_at_start  the `restore` setting, synchronously, before
 *                       the server listens;
 *   ckpts_start       starts the job thread;
 *   ... handlers (any I/O thread) start jobs, read their status, list and
 *   delete checkpoints; UPDATE and PUSH_UPDATE handlers count steps ...
 *   ckpts_close       waits for a running job (logged), joins the thread,
 *                       closes the store.  Call it after the I/O threads
 *                       ended and before emdb_db_close.
 *
 * Jobs
 *   One job runs at a time.  A job is numbered from 1 when it is accepted
 *   and is RUNNING from then until it is DONE or FAILED; starting another
 *   meanwhile is BUSY.  The status of the last CKPTS_JOBS_KEPT jobs is
 *   kept.  Every job's start and end are logged with its figures.
 *
 * Errors: the functions that can fail return EMDB_OK or an emdb_err and
 * write the reason into err[errlen] (for the reply or the log).
 * Thread safety: every function but open/restore_at_start/start/close may
 * be called from any thread.
 */
#ifndef EMDB_NET_PERSIST_H
#define EMDB_NET_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/checkpoint.h>
#include <emdb/db.h>

#define CKPTS_JOBS_KEPT 16
#define CKPTS_MSG_MAX 1024

typedef struct ckpts ckpts;

/* The automatic-checkpoint and retention settings (CONFIG SET may change
 * them while the server runs). */
typedef struct ckpts_settings {
	uint32_t keep;          /* checkpoint_keep; 0 = keep all              */
	uint64_t every_steps;   /* checkpoint_every_steps; 0 = off            */
	uint32_t every_seconds; /* checkpoint_every_seconds; 0 = off          */
	uint32_t full_every;    /* checkpoint_full_every, >= 1                */
} ckpts_settings;

/* A job's status; kind and state take the PROTO_JOB_* values. */
typedef struct ckpts_job_status {
	uint64_t job;
	uint32_t kind;
	uint32_t state;
	emdb_progress progress;
	emdb_ckpt_info result;   /* DONE: the checkpoint written or restored */
	int error;               /* FAILED                                   */
	char message[CKPTS_MSG_MAX];
} ckpts_job_status;

/* The jobs of one direction (checkpoints, or restores) that ended since
 * the process started, the restore at start included. */
typedef struct ckpts_totals {
	uint64_t done, failed;       /* jobs ended DONE, FAILED              */
	uint64_t ns, bytes, rows;    /* summed over the DONE ones            */
	bool have_last;              /* one ended DONE: last_* describe it   */
	uint64_t last_ns, last_bytes, last_rows;
	uint64_t last_end_ms;        /* Unix time it ended, milliseconds     */
} ckpts_totals;

/* What INFO's persistence section and /metrics show. */
typedef struct ckpts_report {
	bool enabled;
	char data_dir[1024];
	size_t checkpoints;          /* in the store; 0 when it cannot be read */
	int store_error;             /* EMDB_OK, the listing's error, or the
					write failure the store has not
					recovered from (emdb_store_state) */
	bool have_last;
	emdb_ckpt_info last;         /* the latest checkpoint in the store */
	bool have_job;
	ckpts_job_status job;      /* the running job, or else the newest one */
	ckpts_settings settings;
	uint64_t steps_since;        /* UPDATEs and PUSH_UPDATEs since the last checkpoint started */
	uint64_t auto_checkpoints;   /* started automatically since start */
	/* Bytes are those of the row blocks written (emdb_ckpt_info.bytes)
	 * or read (emdb_progress.bytes_done); rows those written by the
	 * checkpoint (rows) or restored (rows_total). */
	ckpts_totals checkpoint, restore;
} ckpts_report;

/* Open the store in data_dir (created when missing), or prepare a disabled
 * persistence when data_dir is "".  accept_loss: open a damaged store
 * anyway (emdb_store_options.accept_loss), logging what it gave up.
 * db must outlive it.  Errors: the store's (IO, NOSPACE, CORRUPT: the
 * message names what is damaged and how to proceed), NOMEM. */
int ckpts_open(emdb_db *db, const char *data_dir, bool accept_loss, const ckpts_settings *set,
		 ckpts **out, char *err, size_t errlen);

/* `restore` is "" (nothing), "latest" or a checkpoint id.  Runs the
 * restore on the calling thread as a job and logs it.  "latest" on an
 * empty store logs that there is nothing to restore and returns EMDB_OK.
 * Errors: UNSUPPORTED (persistence off), INVALID (bad value, no such
 * checkpoint), the restore's own errors. */
int ckpts_restore_at_start(ckpts *p, const char *restore, char *err, size_t errlen);

/* Start the job thread (a no-op when persistence is off).  Errors: NOMEM. */
int ckpts_start(ckpts *p, char *err, size_t errlen);

/* Wait for the running job, stop the thread, close the store, free p.
 * NULL is a no-op. */
void ckpts_close(ckpts *p);

/* New settings, from server_config_set. */
void ckpts_configure(ckpts *p, const ckpts_settings *set);

/* One UPDATE or PUSH_UPDATE request was handled: counts toward
 * checkpoint_every_steps.
 * Cheap: one relaxed atomic add, a wake-up only when the count is due. */
void ckpts_note_step(ckpts *p);

/* Start a checkpoint (EMDB_CKPT_FULL or EMDB_CKPT_INCREMENTAL) or a
 * restore of checkpoint `ckpt` (0 = the latest); *job gets its number.
 * Errors: UNSUPPORTED (off), BUSY (a job runs; the message names it),
 * INVALID (unknown kind; a checkpoint the store does not hold), NOMEM. */
int ckpts_checkpoint(ckpts *p, emdb_ckpt_kind kind, uint64_t *job, char *err, size_t errlen);
int ckpts_restore(ckpts *p, uint64_t ckpt, uint64_t *job, char *err, size_t errlen);

/* The status of job `job` (0 = the newest; state IDLE when no job ever
 * ran).  Errors: UNSUPPORTED, INVALID (a job not remembered). */
int ckpts_status(ckpts *p, uint64_t job, ckpts_job_status *out, char *err, size_t errlen);

/* The checkpoints in the store, oldest first: *out (emdb_malloc'd, free
 * with emdb_free; NULL when *n is 0).  Errors: UNSUPPORTED, the store's,
 * NOMEM. */
int ckpts_list(ckpts *p, emdb_ckpt_info **out, size_t *n, char *err, size_t errlen);

/* Delete checkpoint `ckpt`.  Errors: UNSUPPORTED, BUSY (a job runs, or an
 * incremental checkpoint extends it), INVALID (no such checkpoint), IO. */
int ckpts_delete(ckpts *p, uint64_t ckpt, char *err, size_t errlen);

/* ---- on a node of a cluster (net/cluster_ckpt.c) ------------------- */

/* Runs once on the job thread when a job started by ckpts_checkpoint_then
 * ended (retention applied): rc, and info on success or msg on failure. */
typedef void (*ckpts_end_fn)(void *arg, int rc, const emdb_ckpt_info *info, const char *msg);

/* ckpts_checkpoint for a cluster checkpoint's part: incremental only when
 * asked and this server has a checkpoint to extend (else full), and
 * fn(arg, ...) when it ends.  Errors: as ckpts_checkpoint (fn never runs). */
int ckpts_checkpoint_then(ckpts *p, emdb_ckpt_kind kind, ckpts_end_fn fn, void *arg, uint64_t *job, char *err,
			  size_t errlen);

/* A job this server reports but does not run (a cluster checkpoint it
 * asked for): numbered and RUNNING from ckpts_job_begin until
 * ckpts_job_end, for JOB_STATUS; it does not make other jobs BUSY.
 * kind is a PROTO_JOB_* value.  Errors: UNSUPPORTED. */
int ckpts_job_begin(ckpts *p, uint32_t kind, uint64_t *job, char *err, size_t errlen);
void ckpts_job_end(ckpts *p, uint64_t job, int rc, const emdb_ckpt_info *info, const char *msg);

/* When set, a due automatic checkpoint calls fn(arg, kind) (outside the
 * lock, on the job thread) instead of starting one here: a cluster node
 * asks its cluster for one.  fn NULL: back to local ones. */
void ckpts_set_auto(ckpts *p, void (*fn)(void *arg, emdb_ckpt_kind kind), void *arg);

/* The engine's tables were replaced from elsewhere (a cluster's
 * restore): the next checkpoint of this server is full. */
void ckpts_forget_base(ckpts *p);

/* Fill *r for INFO.  Never fails; a store that cannot be read shows 0. */
void ckpts_report_get(ckpts *p, ckpts_report *r);

#endif
