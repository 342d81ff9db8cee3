/*
 * rows_in.h - rows written into a private table by ID, the way a restore
 * does it: every ID resolved with insertion in one batch, each row (its
 * vector and optimizer state) copied in byte for byte, new rows not
 * initialized.  Shared by restore.c (a checkpoint's blocks) and
 * cluster_restore.c (the rows of a cluster checkpoint's parts this node
 * keeps).
 *
 * A rows_in is the scratch of one writer, reused from batch to batch;
 * zero-initialize it before the first rows_in_put and give it back with
 * rows_in_free.  Not thread-safe: one writer each.
 */
#ifndef EMDB_ROWS_IN_H
#define EMDB_ROWS_IN_H

#include <stddef.h>
#include <stdint.h>

#include "db/table.h"

typedef struct rows_in {
	uint64_t *ids, *locs, *hash;
	uint32_t *order, *start;
	size_t cap;          /* rows the arrays hold */
	uint32_t shards_cap; /* shards start[] holds */
} rows_in;

/* Write n rows of row_bytes each (rows[i] for ids[i]; ids need not be
 * aligned) into t, which nobody else uses yet.  EMDB_OK, or NOMEM / LIMIT
 * (table_resolve_prepare) with nothing inserted. */
int rows_in_put(rows_in *r, tbl *t, const void *ids, const void *rows, size_t n, size_t row_bytes);

/* Free the scratch; r may be put to use again afterwards. */
void rows_in_free(rows_in *r);

#endif
