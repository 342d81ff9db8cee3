/*
 * db_int.h - what the operation files need from the database handle:
 * taking a reference on a live table by id.  Internal to libemdb.
 */
#ifndef EMDB_DB_INT_H
#define EMDB_DB_INT_H

#include <emdb/db.h>

#include "db/table.h"

/* *out = live table `id` with one more reference (drop with
 * table_release).  Errors: INVALID (db NULL), NO_TABLE. */
int db_table_get(emdb_db *db, uint32_t id, tbl **out);

/* A reference on every live table, in creation order: *out is an
 * emdb_malloc'd array of *n tables, each to be released with table_release,
 * then the array freed with emdb_free.  Errors: NOMEM. */
int db_tables_snapshot(emdb_db *db, tbl ***out, uint32_t *n);

/* What the database remembers for checkpoints: the last checkpoint it
 * took or restored (the parent of the next incremental one) and in which
 * store; `busy` is set while a job runs (atomic). */
typedef struct db_ckpt_state {
	uint64_t last;
	uint8_t store_uuid[16];
	int busy;
} db_ckpt_state;

db_ckpt_state *db_ckpt(emdb_db *db);

/* Replace every live table with v[0..n) at once (restore).  The registry
 * takes over the reference on each of v; the old tables' references are
 * released.  Errors: LIMIT (n > max_tables), NOMEM; nothing changes then. */
int db_replace_tables(emdb_db *db, tbl **v, uint32_t n);

/* Check a table configuration as emdb_table_create does.  INVALID with
 * the message naming the field. */
int db_check_table_config(const emdb_table_config *c);

#endif
