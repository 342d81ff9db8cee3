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

#endif
