/*
 * emdb/checkpoint.h - checkpoints of an emdb database in embedded RocksDB:
 * full and incremental snapshots, restore, listing, deletion, retention.
 *
 * This header is the manual of libemdb_checkpoint, which sits above the
 * engine (libemdb) and links RocksDB and xxhash.  The on-disk layout
 * (column families, keys, value encodings, magic numbers and versions) is
 * docs/checkpoint.md; RocksDB's own `ldb` reads it.
 *
 * Model
 *   A store (emdb_store) is one RocksDB database in a directory.  It holds
 *   any number of checkpoints, each named by an id that grows from 1 and is
 *   never reused in that store.  A checkpoint holds, for every table live at
 *   the moment it was taken: the schema (emdb_table_config with optimizer
 *   hyperparameters and initializer), the table id, the step counter, and
 *   for every row its ID, its vector and its optimizer state.  Gradients
 *   pushed but not yet applied by an Update are not part of a checkpoint.
 *
 *   FULL writes every row.  INCREMENTAL writes only the rows created or
 *   updated since the previous checkpoint of this database (its parent): a
 *   restore of an incremental loads its chain, the nearest full checkpoint
 *   and every incremental after it, and ends exactly in the state of the
 *   last link.  The previous checkpoint is the last one this emdb_db took
 *   or restored; with none, an incremental checkpoint is refused.
 *   A table that did not exist at the parent is written whole.
 *
 * Consistency
 *   A checkpoint captures every table at one instant (the switch): no row
 *   from before an Update beside a row from after it, no torn row, every
 *   table at exactly the step it had at that instant.  The switch waits for
 *   Updates in progress and makes new Updates wait while it runs; it does
 *   not copy rows, so it takes microseconds to milliseconds
 *   (emdb_progress.switch_ns says how long).  After it, the rows are
 *   written while Prefetch, Pull, Push, Lookup and Update all go on: an
 *   Update that is about to change a row the checkpoint has not written yet
 *   first keeps a copy of the row as it was at the switch (copy on write),
 *   so the checkpoint's memory overhead is bounded by the rows updated
 *   while it runs.
 *
 * Durability
 *   A checkpoint becomes visible (listed, restorable) only when it is
 *   complete: its row blocks are written into an SST file, synced,
 *   ingested, and only then its manifest (with checksums and counts) is
 *   written with a synced write.  A crash at any moment leaves every
 *   earlier checkpoint intact; the pieces of an unfinished one are removed
 *   the next time the store is opened.  Restore checks the manifest's
 *   checksum, every block's checksum and the counts of rows and blocks
 *   against the manifest before it changes anything: a damaged checkpoint
 *   fails with EMDB_ERR_CORRUPT and a message naming what is wrong.
 *
 * Jobs
 *   Checkpoints and restores are jobs: emdb_job_checkpoint or
 *   emdb_job_restore prepares one, emdb_job_run does its work on the
 *   calling thread (a checkpoint also writes on one helper thread of its own,
 *   at nice 19 so that serving threads come first, and a restore reads and
 *   loads rows on up to seven, one for every two blocks of a table; all
 *   are joined before it returns), and emdb_job_progress can be read from
 *   any thread meanwhile.  One job runs at a time per
 *   emdb_db: emdb_job_run fails with BUSY while another is running.
 *
 * A full disk
 *   A checkpoint, delete or retention that cannot write fails with NOSPACE
 *   (IO for other write failures) and changes nothing visible.  RocksDB
 *   then refuses writes until it is reopened: the store does that itself,
 *   at the next call that finds space on the file system and no job of the
 *   store running, so the store works again once space is freed.
 *
 * Threads
 *   A store may be used from any number of threads.  emdb_store_close needs
 *   no job or other call on the store in flight.
 */
#ifndef EMDB_CHECKPOINT_H
#define EMDB_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include <emdb/db.h>
#include <emdb/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct emdb_store emdb_store;
typedef struct emdb_job emdb_job;

typedef enum emdb_ckpt_kind {
	EMDB_CKPT_FULL = 1,
	EMDB_CKPT_INCREMENTAL = 2,
} emdb_ckpt_kind;

/* "full", "incremental"; NULL for an unknown kind. */
const char *emdb_ckpt_kind_name(emdb_ckpt_kind kind);

typedef struct emdb_ckpt_info {
	uint64_t id;
	emdb_ckpt_kind kind;
	uint32_t tables;       /* tables it holds                             */
	uint64_t parent;       /* INCREMENTAL: the checkpoint it extends; 0 for FULL */
	uint64_t base;         /* the FULL checkpoint its chain starts at (itself for FULL) */
	uint64_t created_ms;   /* Unix time of the switch, milliseconds        */
	uint64_t duration_ms;  /* switch to manifest                           */
	uint64_t max_step;     /* the largest table step it holds              */
	uint64_t rows;         /* rows written in this checkpoint              */
	uint64_t rows_total;   /* rows of the state it restores (whole chain)  */
	uint64_t bytes;        /* bytes of row blocks written                  */
} emdb_ckpt_info;

/* ------------------------------------------------------------------ */
/* Store                                                               */
/* ------------------------------------------------------------------ */

typedef struct emdb_store_options {
	uint32_t size;        /* sizeof(emdb_store_options): set by the INIT macro */
	uint32_t accept_loss; /* 1: open a damaged store with what can be read */
	uint32_t read_only;   /* 1: read an existing store only (see below) */
} emdb_store_options;

#define EMDB_STORE_OPTIONS_INIT { sizeof(emdb_store_options), 0, 0 }

/* Open (creating when missing) the store in directory `dir`, check it, and
 * remove the leftovers of checkpoints a crash interrupted (only those the
 * store's catalog records as unfinished).  The check: RocksDB replays its
 * write-ahead log strictly, and the catalog (<dir>/CATALOG), the
 * manifests and the row data must agree (every checkpoint reported
 * complete still has its manifest, with the recorded checksum, and its
 * rows).  Errors: INVALID (dir NULL or empty, bad options), IO (RocksDB
 * could not open it: the message has RocksDB's reason, e.g. a lock held by
 * another process), NOSPACE, CORRUPT (the store is damaged: the message
 * names the store, each damaged checkpoint or file, and how to proceed;
 * nothing was changed; or the directory holds a RocksDB database that is
 * not an emdb store, or of a newer format version), NOMEM.
 * opt may be NULL (the defaults).  With opt->accept_loss, a damaged store
 * is opened anyway: RocksDB keeps its log up to the first damaged record,
 * the checkpoints that are whole stay, and the rest (checkpoints whose
 * manifest or rows are gone, rows no manifest names) is dropped;
 * emdb_store_damage says what.  With opt->read_only, an existing store
 * is opened for listing and restoring only, without RocksDB's lock, so
 * that several processes may read a store that another one writes (the
 * parts of a cluster checkpoint, docs/cluster.md): nothing is created,
 * checked against the catalog or repaired, it sees the store as it was
 * when opened, and checkpoints, deletes and retention on it fail with
 * INVALID; restore still checks every manifest and block checksum.
 * Errors then: INVALID (no store in dir).  Close with emdb_store_close. */
int emdb_store_open_ex(const char *dir, const emdb_store_options *opt, emdb_store **out);
/* emdb_store_open_ex with the defaults. */
int emdb_store_open(const char *dir, emdb_store **out);
void emdb_store_close(emdb_store *st); /* NULL is a no-op */

/* What an open with accept_loss found damaged and gave up ("" when
 * nothing); valid until emdb_store_close. */
const char *emdb_store_damage(const emdb_store *st);

/* EMDB_OK, or the code (NOSPACE, IO) of a write failure the store has not
 * recovered from yet: until it has, checkpoints, deletes and retention
 * fail and reading goes on (see "A full disk" above).  Thread-safe. */
int emdb_store_state(const emdb_store *st);

/* The directory the store was opened in; valid until emdb_store_close. */
const char *emdb_store_dir(const emdb_store *st);

/* The complete checkpoints, oldest first: up to `cap` into out (may be
 * NULL when cap is 0), the total count into *n.  Errors: IO, CORRUPT (a
 * manifest fails its checksum). */
int emdb_store_list(emdb_store *st, emdb_ckpt_info *out, size_t cap, size_t *n);

/* One checkpoint; id 0 means the latest.  Errors: NO_TABLE is never used
 * here: an id that is not in the store gives INVALID ("no checkpoint 7"),
 * an empty store with id 0 gives INVALID too. */
int emdb_store_get(emdb_store *st, uint64_t id, emdb_ckpt_info *out);

/* Delete checkpoint `id`: its manifest first (so it is never half
 * visible), then its rows.  Errors: INVALID (no such checkpoint), BUSY
 * (an incremental checkpoint in the store extends it: delete that one
 * first; the message names it), IO, NOSPACE (the file system is full:
 * the checkpoint is still there).  Once the manifest is gone the call
 * succeeds; rows that a full disk kept it from dropping are dropped by a
 * later call once there is space again. */
int emdb_store_delete(emdb_store *st, uint64_t id);

/* Keep the newest `keep` checkpoints (keep >= 1) and every checkpoint one
 * of them needs (the chain of a kept incremental); delete the others.
 * *deleted (may be NULL) gets how many went.  Errors: INVALID, IO,
 * NOSPACE (as emdb_store_delete; those deleted before it stay deleted). */
int emdb_store_retain(emdb_store *st, uint32_t keep, uint32_t *deleted);

/* ------------------------------------------------------------------ */
/* Jobs: checkpoint and restore                                        */
/* ------------------------------------------------------------------ */

typedef enum emdb_job_phase {
	EMDB_PHASE_PENDING = 0, /* prepared, emdb_job_run not called yet     */
	EMDB_PHASE_SWITCH = 1,  /* checkpoint: waiting for the switch        */
	EMDB_PHASE_SCAN = 2,    /* checkpoint: listing the rows to write     */
	EMDB_PHASE_WRITE = 3,   /* checkpoint: writing rows                  */
	EMDB_PHASE_SYNC = 4,    /* checkpoint: sync, ingest, manifest        */
	EMDB_PHASE_READ = 5,    /* restore: reading and checking rows        */
	EMDB_PHASE_SWAP = 6,    /* restore: replacing the tables             */
	EMDB_PHASE_DONE = 7,
	EMDB_PHASE_FAILED = 8,
} emdb_job_phase;

/* "pending", "switch", ... */
const char *emdb_job_phase_name(emdb_job_phase phase);

typedef struct emdb_progress {
	emdb_job_phase phase;
	uint64_t rows_done, rows_total;   /* rows_total is known from SCAN on */
	uint64_t bytes_done, bytes_total;
	uint64_t elapsed_ns;              /* since emdb_job_run started       */
	uint64_t switch_ns;               /* checkpoint: how long the switch held Updates */
	uint64_t cow_rows;                /* checkpoint: rows copied before an Update changed them */
	uint64_t ckpt_id;                 /* checkpoint being written or restored; 0 before known */
} emdb_progress;

/* Prepare a checkpoint of db into st.  Nothing happens until emdb_job_run.
 * The job keeps db and st borrowed: both must outlive it.  Errors:
 * INVALID (NULL, unknown kind), NOMEM.  Free with emdb_job_free. */
int emdb_job_checkpoint(emdb_db *db, emdb_store *st, emdb_ckpt_kind kind, emdb_job **out);

/* Prepare a restore of checkpoint `id` (0 = the latest) from st into db.
 * When it runs, it reads the whole chain into new tables, checks it, and
 * only then replaces every table of db at once (tables created since the
 * checkpoint go too; tickets of replaced tables fail with TICKET).  On any
 * failure db is left exactly as it was.  The restored tables keep their
 * ids, names, schema and steps.  Memory: the old tables live until the
 * swap, so a running database needs room for both. */
int emdb_job_restore(emdb_db *db, emdb_store *st, uint64_t id, emdb_job **out);

/* Do the job on the calling thread; returns when it is complete.  On
 * success *info (may be NULL) describes the checkpoint written or
 * restored.  Errors: BUSY (another job of this db is running), INVALID
 * (incremental with no previous checkpoint; restore of an id not in the
 * store; a job run twice), IO or NOSPACE (the message has RocksDB's or the OS's
 * reason), CORRUPT (restore: a damaged checkpoint; nothing was loaded),
 * NOMEM, LIMIT (restore: more tables than max_tables). */
int emdb_job_run(emdb_job *job, emdb_ckpt_info *info);

/* A consistent-enough view of the job's progress (each field read
 * atomically), from any thread, before, during or after emdb_job_run. */
void emdb_job_progress(const emdb_job *job, emdb_progress *out);

/* Free a job that is not running.  NULL is a no-op. */
void emdb_job_free(emdb_job *job);

/* Convenience: prepare, run and free a checkpoint or a restore. */
int emdb_checkpoint(emdb_db *db, emdb_store *st, emdb_ckpt_kind kind, emdb_ckpt_info *info);
int emdb_restore(emdb_db *db, emdb_store *st, uint64_t id, emdb_ckpt_info *info);

#ifdef __cplusplus
}
#endif
#endif
