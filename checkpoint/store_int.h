/*
 * store_int.h - the store handle's insides, for the checkpoint writer
 * (write.c) and the restore (restore.c).  Internal to libemdb_checkpoint.
 *
 * Directory layout: <dir>/rocksdb is the RocksDB database (column
 * families emdb_meta and emdb_rows, docs/checkpoint.md); <dir>/tmp holds
 * SST files being written, which are moved into RocksDB by ingestion.
 */
#ifndef EMDB_STORE_INT_H
#define EMDB_STORE_INT_H

#include <pthread.h>

#include <rocksdb/c.h>

#include <emdb/checkpoint.h>

#include "checkpoint/format.h"

struct emdb_store {
	char *dir;
	char *db_dir;                 /* <dir>/rocksdb */
	char *tmp_dir;                /* <dir>/tmp     */
	rocksdb_t *db;
	rocksdb_options_t *opts;
	rocksdb_options_t *rows_opts; /* rows CF; also the SST writer's */
	rocksdb_options_t *meta_opts;
	rocksdb_column_family_handle_t *cf[3]; /* default, meta, rows */
	rocksdb_writeoptions_t *wsync;
	rocksdb_readoptions_t *ropts;
	pthread_mutex_t mu;           /* header (next id), manifests, deletes */
	store_hdr hdr;
};

#define STORE_CF_META(st) ((st)->cf[1])
#define STORE_CF_ROWS(st) ((st)->cf[2])

/* Turn a RocksDB error string (freed here) into EMDB_ERR_IO or
 * EMDB_ERR_CORRUPT (RocksDB's "Corruption:" errors) with a message that
 * starts with `what`.  Returns EMDB_OK when err is NULL. */
int store_rocks_err(char *err, const char *what);

/* Take the next checkpoint id and persist the header (synced). */
int store_take_id(emdb_store *st, uint64_t *id);

/* Write m's manifest with a synced write: the checkpoint is visible. */
int store_publish(emdb_store *st, const manifest *m);

/* Read and check manifest `id` (0 = the latest).  INVALID when absent. */
int store_manifest(emdb_store *st, uint64_t id, manifest *m);

/* Remove the rows of checkpoint `id` (the manifest must be gone or never
 * written). */
int store_drop_rows(emdb_store *st, uint64_t id);

/* Move the finished SST files paths[0..n) into the rows column family,
 * all at once or none. */
int store_ingest(emdb_store *st, const char *const *paths, size_t n);

#endif
