/*
 * store_readahead.h - reading a checkpoint's row file ahead of the
 * restore, so that the disk works while the CPU loads rows.
 *
 * Each checkpoint's rows are one SST file (ingested whole), laid out in
 * table order, and restore reads each table's part of each file front to
 * back in the same table order: so the bytes consumed from a checkpoint so
 * far are, give or take the file's small index blocks, its read position.
 * This module keeps a window of the file ahead of that position in the
 * page cache with posix_fadvise(WILLNEED), which the kernel fills
 * asynchronously.  It is only a hint: without it (a file it cannot find or
 * open) restore is as correct, just slower.
 */
#ifndef EMDB_STORE_READAHEAD_H
#define EMDB_STORE_READAHEAD_H

#include <stdint.h>

#include <emdb/checkpoint.h>

typedef struct store_ra store_ra;

/* Hints for the row files of the checkpoints ids[0..n).  NULL when none
 * can be given (that is not an error). */
store_ra *store_ra_open(emdb_store *st, const uint64_t *ids, uint32_t n);
/* `bytes` more of checkpoint ckpt's rows were read. */
void store_ra_consumed(store_ra *ra, uint64_t ckpt, uint64_t bytes);
void store_ra_close(store_ra *ra); /* NULL is a no-op */

#endif
