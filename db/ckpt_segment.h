/*
 * ckpt_segment.h - writing one segment of a table into its own SST file:
 * the rows numbered r0 .. r1-1 that the checkpoint wants, as row blocks
 * with consecutive numbers from first_block.  A table is written as one
 * segment, or as two written at once by two threads (ckpt_write.c).
 */
#ifndef EMDB_CKPT_SEGMENT_H
#define EMDB_CKPT_SEGMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "db/job_int.h"
#include "db/store_int.h"
#include "db/table.h"

#define CKPT_BLOCK_BYTES (1u << 20) /* target size of one row block */

typedef struct ckpt_seg {
	/* in */
	emdb_job *job;
	emdb_store *st;
	uint64_t ckpt;
	tbl *t;
	ckpt_cow *cow;
	const uint64_t *ids;   /* by row number, for the rows wanted */
	uint64_t r0, r1;
	uint32_t which;        /* the cow cursor this writer advances */
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

/* Write the segment; sets rc (and msg).  Usable as a thread's body. */
void *ckpt_seg_write(void *seg);

/* Remove the segment's temporary file (if still there) and free path. */
void ckpt_seg_cleanup(ckpt_seg *s);

#endif
