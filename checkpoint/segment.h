/*
 * segment.h - writing one segment of a table into its own SST file:
 * the rows numbered r0 .. r1-1 that the checkpoint wants, as row blocks
 * with consecutive numbers from first_block.  A table is written as one
 * segment, or as up to COW_SEGS_MAX that the job's thread and a helper
 * claim one after another (write.c).
 */
#ifndef EMDB_CKPT_SEGMENT_H
#define EMDB_CKPT_SEGMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "checkpoint/job_int.h"
#include "checkpoint/store_int.h"
#include "db/table.h"

/* Target size of one row block: a restore reads each block with one
 * direct read, and this virtual disk delivers direct reads of 4 MiB
 * faster than of 1 MiB (docs/benchmarks.md, "Checkpoints"). */
#define CKPT_BLOCK_BYTES (4u << 20)
/* At most this many bytes of rows are copied per rows_lock hold, whatever
 * the block size: an Update waits for one hold (the Update pause). */
#define CKPT_HOLD_BYTES (1u << 20)

typedef struct ckpt_seg {
	/* in */
	emdb_job *job;
	emdb_store *st;
	uint64_t ckpt;
	tbl *t;
	ckpt_cow *cow;
	const uint64_t *ids;   /* by row number, for the rows wanted */
	uint64_t r0, r1;
	uint32_t which;        /* the segment's number: its cow cursor */
	uint64_t first_block;
	uint64_t *hashes;      /* the table's block hashes, by block number */
	/* out */
	char *path;            /* the SST file, when one was written */
	uint64_t blocks, rows, bytes;
	int rc;
	char msg[512];         /* the error message (threads have their own) */
} ckpt_seg;

/* Rows per block of a table with rows of row_floats floats. */
uint32_t ckpt_rows_per_block(uint32_t row_floats);

/* Write the segment; sets rc (and msg). */
void *ckpt_seg_write(void *seg);
/* Lower the calling thread's priority (nice 19): for the helper writer,
 * so that serving threads get the CPU when they want it. */
void ckpt_seg_lower_priority(void);

/* Remove the segment's temporary file (if still there) and free path. */
void ckpt_seg_cleanup(ckpt_seg *s);

#endif
