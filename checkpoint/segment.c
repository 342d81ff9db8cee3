/*
 * segment.c - the writer of one segment of a table (segment.h):
 * reads the wanted rows under rows_lock in row-number order, copies them
 * (or the copy an Update kept) into 4 MiB row blocks, and puts the blocks
 * into its own SST file.
 *
 * Invariants:
 *   1. Blocks are full except the last of the segment: a block is carried
 *      over from one rows_lock hold to the next.  So a segment of k times
 *      rows_per_block wanted rows writes exactly k blocks, which is how the
 *      two writers of a table know their block numbers before they start.
 *   2. The segment's cursor moves past a row only after the row was copied
 *      under rows_lock, so an Update keeps a copy of exactly the rows not
 *      yet copied (ckpt_track.h).
 *   3. The helper writer runs at nice 19: serving threads come first and
 *      it takes the CPU they leave; the job's own thread, at normal
 *      priority, claims segments too, so the checkpoint waits on a starved
 *      helper at most for the one segment (1/64 of a big table) it holds.
 *   4. The kernel is asked to start writing the file back every
 *      SYNC_EVERY bytes, so the disk works while rows are encoded instead
 *      of all at the final sync (which SstFileWriter's finish does).
 *
 * State changes: the segment's cursor (cow->cursor[which]); its file.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "checkpoint/segment.h"

#define SCAN_PER_LOCK (64u << 10)   /* row numbers looked at per rows_lock hold */
/* (and at most CKPT_HOLD_BYTES of rows copied per hold, segment.h) */
#define SYNC_EVERY (32u << 20)      /* start writeback after this many bytes    */

typedef struct seg_io {
	rocksdb_sstfilewriter_t *sst;
	int fd;                /* the same file, for sync_file_range */
	uint64_t unsynced;
	off_t synced;
	uint8_t *block;
} seg_io;

uint32_t ckpt_rows_per_block(uint32_t row_floats)
{
	uint32_t n = (uint32_t)((CKPT_BLOCK_BYTES - BLOCK_HDR_LEN) / (8 + (size_t)row_floats * 4));
	return n ? n : 1;
}

static void start_writeback(seg_io *io)
{
	struct stat sb;
	io->unsynced = 0;
	if (io->fd < 0 || fstat(io->fd, &sb) != 0 || sb.st_size <= io->synced)
		return;
	sync_file_range(io->fd, io->synced, sb.st_size - io->synced, SYNC_FILE_RANGE_WRITE);
	io->synced = sb.st_size;
}

static int open_file(ckpt_seg *s, seg_io *io)
{
	size_t n = strlen(s->st->tmp_dir) + 80;
	s->path = emdb_malloc(n);
	if (!s->path)
		return EMDB_ERR_NOMEM;
	snprintf(s->path, n, "%s/ckpt-%llu-%u-%u.sst", s->st->tmp_dir, (unsigned long long)s->ckpt,
		 s->t->id, s->which);
	rocksdb_envoptions_t *env = rocksdb_envoptions_create();
	io->sst = rocksdb_sstfilewriter_create(env, s->st->rows_opts);
	rocksdb_envoptions_destroy(env);
	char *err = NULL;
	rocksdb_sstfilewriter_open(io->sst, s->path, &err);
	int rc = store_rocks_err(err, "creating a checkpoint SST file");
	if (rc == EMDB_OK)
		io->fd = open(s->path, O_RDONLY | O_CLOEXEC);
	return rc;
}

static int put_block(ckpt_seg *s, seg_io *io, uint32_t n, uint32_t rf)
{
	int rc = EMDB_OK;
	if (!io->sst && (rc = open_file(s, io)) != EMDB_OK)
		return rc;
	uint64_t no = s->first_block + s->blocks;
	s->hashes[no] = block_seal(io->block, n, rf);
	size_t len = block_size(n, rf);
	uint8_t key[ROW_KEY_LEN];
	store_key_row(key, s->ckpt, s->t->id, no);
	char *err = NULL;
	rocksdb_sstfilewriter_put(io->sst, (const char *)key, sizeof(key), (const char *)io->block, len, &err);
	if ((rc = store_rocks_err(err, "writing a row block")) != EMDB_OK)
		return rc;
	io->unsynced += len;
	if (io->unsynced >= SYNC_EVERY)
		start_writeback(io);
	s->blocks++;
	s->rows += n;
	s->bytes += len;
	JOB_ADD(s->job, rows_done, n);
	JOB_ADD(s->job, bytes_done, len);
	return EMDB_OK;
}

static int write_rows(ckpt_seg *s, seg_io *io)
{
	tbl *t = s->t;
	uint32_t rf = t->dim + t->state_floats;
	size_t row_bytes = (size_t)rf * 4;
	uint32_t per_block = ckpt_rows_per_block(rf);
	uint32_t per_hold = (uint32_t)(CKPT_HOLD_BYTES / row_bytes) ? (uint32_t)(CKPT_HOLD_BYTES / row_bytes) : 1;
	uint8_t *ids = io->block + BLOCK_HDR_LEN;
	uint8_t *rows = ids + (size_t)per_block * 8;
	uint32_t n = 0;
	int rc = EMDB_OK;
	for (uint64_t r = s->r0; rc == EMDB_OK && r < s->r1;) {
		uint64_t stop = r + SCAN_PER_LOCK < s->r1 ? r + SCAN_PER_LOCK : s->r1;
		uint32_t full = per_block - n > per_hold ? n + per_hold : per_block;
		pthread_rwlock_rdlock(&t->rows_lock);
		while (r < stop && n < full) {
			uint64_t loc = chunk_loc_of(&t->rows, r);
			if (ckpt_cow_wants(s->cow, &t->rows, r, loc)) {
				const void *src = ckpt_cow_find(s->cow, r);
				memcpy(ids + (size_t)n * 8, &s->ids[r], 8);
				memcpy(rows + (size_t)n * row_bytes, src ? src : table_row(t, loc), row_bytes);
				n++;
			}
			r++;
		}
		__atomic_store_n(&s->cow->cursor[s->which], r, __ATOMIC_RELAXED);
		pthread_rwlock_unlock(&t->rows_lock);
		if (__atomic_load_n(&s->cow->failed, __ATOMIC_RELAXED))
			return emdb__seterr(EMDB_ERR_NOMEM,
					    "table '%s': no memory to keep rows Updates changed during the checkpoint",
					    t->cfg.name);
		if (n == per_block) {
			rc = put_block(s, io, n, rf);
			n = 0;
		}
	}
	if (rc == EMDB_OK && n) {
		memmove(ids + (size_t)n * 8, rows, (size_t)n * row_bytes); /* rows follow the ids */
		rc = put_block(s, io, n, rf);
	}
	if (rc == EMDB_OK && io->sst) {
		char *err = NULL;
		rocksdb_sstfilewriter_finish(io->sst, &err); /* syncs the file */
		rc = store_rocks_err(err, "finishing a checkpoint SST file");
	}
	return rc;
}

void *ckpt_seg_write(void *arg)
{
	ckpt_seg *s = arg;
	seg_io io = { .fd = -1 };
	io.block = emdb_malloc(CKPT_BLOCK_BYTES + 4096);
	s->rc = io.block ? write_rows(s, &io) : EMDB_ERR_NOMEM;
	if (s->rc != EMDB_OK)
		snprintf(s->msg, sizeof(s->msg), "%s", emdb_last_error());
	if (io.sst)
		rocksdb_sstfilewriter_destroy(io.sst);
	if (io.fd >= 0)
		close(io.fd);
	emdb_free(io.block);
	return NULL;
}

void ckpt_seg_lower_priority(void)
{
	/* Linux applies a thread id's nice value to that thread alone. */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
}

void ckpt_seg_cleanup(ckpt_seg *s)
{
	if (s->path) {
		unlink(s->path);
		emdb_free(s->path);
		s->path = NULL;
	}
}
