/*
 * store_int.h - the store handle's insides, for the checkpoint writer
 * (write.c) and the restore (restore.c).  Internal to libemdb_checkpoint.
 *
 * Directory layout: <dir>/rocksdb is the RocksDB database (column
 * families emdb_meta and emdb_rows, docs/checkpoint.md); <dir>/tmp holds
 * SST files being written, which are moved into RocksDB by ingestion;
 * <dir>/CATALOG is the store's own record of its checkpoints
 * (catalog.c), cross-checked against RocksDB at open (check.c).
 */
#ifndef EMDB_STORE_INT_H
#define EMDB_STORE_INT_H

#include <pthread.h>
#include <stdbool.h>

#include <rocksdb/c.h>

#include <emdb/checkpoint.h>

#include "checkpoint/format.h"

struct emdb_store {
	char *dir;
	char *db_dir;                 /* <dir>/rocksdb */
	char *tmp_dir;                /* <dir>/tmp     */
	rocksdb_t *db;                /* NULL after a failed reopen; under db_lock */
	pthread_rwlock_t db_lock;     /* read: any use of db; write: reopening it */
	int failed;                   /* atomic: IO or NOSPACE after a write failure */
	rocksdb_options_t *opts;
	rocksdb_options_t *rows_opts; /* rows CF; also the SST writer's */
	rocksdb_options_t *meta_opts;
	rocksdb_column_family_handle_t *cf[3]; /* default, meta, rows */
	rocksdb_writeoptions_t *wsync;
	rocksdb_readoptions_t *ropts;
	rocksdb_flushoptions_t *fwait; /* flush and wait: manifests out of the WAL */
	pthread_mutex_t mu;           /* header, catalog, manifests, deletes */
	store_hdr hdr;
	store_catalog cat;            /* under mu: what CATALOG says         */
	char *cat_path;               /* <dir>/CATALOG                       */
	char *cat_tmp;                /* <dir>/CATALOG.tmp                   */
	char *damage;                 /* what accept_loss gave up at open, or NULL */
	bool read_only;               /* emdb_store_options.read_only      */
	uint64_t *redo;               /* under mu: deleted ids whose rows are */
	size_t n_redo;                /* still to drop (a full disk)         */
};

#define STORE_CF_META(st) ((st)->cf[1])
#define STORE_CF_ROWS(st) ((st)->cf[2])

/* INVALID naming what when st was opened read-only; else EMDB_OK. */
int store_refuse_read_only(const emdb_store *st, const char *what);

/* Turn a RocksDB error string (freed here) into EMDB_ERR_IO or
 * EMDB_ERR_CORRUPT (RocksDB's "Corruption:" errors) with a message that
 * starts with `what`.  Returns EMDB_OK when err is NULL. */
int store_rocks_err(char *err, const char *what);

/* Mark the store failed when rc is an I/O failure of RocksDB (which then
 * refuses writes until reopened); returns rc. */
int store_failed(emdb_store *st, int rc);

/* Every use of st->db is between store_enter and store_leave (jobs hold
 * it for their whole run).  store_enter first reopens a failed store when
 * there is space again; its errors: the failure's code (NOSPACE, IO) when
 * the store is closed and could not be reopened yet. */
int store_enter(emdb_store *st);
void store_leave(emdb_store *st);

/* CORRUPT: the store in st->dir is damaged, with what to do (accepting the
 * loss keeps `kept`), then what + detail. */
int store_refuse(const emdb_store *st, const char *kept, const char *what, const char *detail);

/* Destroy an iterator; rc, or else its error (store_rocks_err with what). */
int store_iter_end(rocksdb_iterator_t *it, int rc, const char *what);

/* Take the next checkpoint id and record it as pending in the catalog
 * (synced), so that its rows may be dropped if it never completes. */
int store_take_id(emdb_store *st, uint64_t *id);

/* Write m's manifest with a synced write, flush it out of the WAL into an
 * SST file, then record the checkpoint as complete in the catalog: only
 * then is it visible.  On failure the manifest is removed again (best
 * effort; the id stays pending, so the next open finishes the job). */
int store_publish(emdb_store *st, const manifest *m);

/* A checkpoint that failed: drop its rows and its pending mark. */
void store_abandon(emdb_store *st, uint64_t id, bool ingested);

/* ---- the catalog (catalog.c) ---- */

typedef enum cat_list { CAT_NONE, CAT_DONE, CAT_PENDING } cat_list;

/* Read the catalog at path; *absent true (and EMDB_OK) when there is none.
 * CORRUPT names the file when it fails its checks. */
int catalog_load(const char *path, store_catalog *c, bool *absent);
/* Replace st's catalog file by c (write, fsync, rename, fsync the dir). */
int catalog_store(const emdb_store *st, const store_catalog *c);
/* Whether id is in c; *sum (done) and *pending say where. */
bool catalog_has(const store_catalog *c, uint64_t id, uint64_t *sum, bool *pending);
/* Move id into list `to` (CAT_NONE: out of both), on disk then in st->cat.
 * The caller holds st->mu (or is opening st). */
int cat_edit_locked(emdb_store *st, uint64_t id, cat_list to, uint64_t sum);

/* ---- the check at open (check.c) ---- */

/* Cross-check the catalog, the manifests and the row data; refuse a store
 * whose parts disagree (CORRUPT, nothing changed) unless accept_loss, then
 * finish what was unfinished.  st->db and st->hdr are open and loaded. */
int store_check_open(emdb_store *st, bool accept_loss, bool hdr_was_missing);

/* Delete manifest id (synced) and flush the meta column family. */
int store_drop_manifest(emdb_store *st, uint64_t id);

/* A flush of emdb_meta (wait): what was written leaves the WAL. */
int store_flush_meta(emdb_store *st);

/* Read and check manifest `id` (0 = the latest).  INVALID when absent. */
int store_manifest(emdb_store *st, uint64_t id, manifest *m);

/* Remove the rows of checkpoint `id` (the manifest must be gone or never
 * written). */
int store_drop_rows(emdb_store *st, uint64_t id);

/* Move the finished SST files paths[0..n) into the rows column family,
 * all at once or none. */
int store_ingest(emdb_store *st, const char *const *paths, size_t n);

#endif
