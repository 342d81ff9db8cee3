/*
 * ckpt_sst.h - the SST-writer bound of emdb-bench --workload checkpoint:
 * what RocksDB's SstFileWriter alone sustains on the data directory's
 * disk, with the checkpoint's options, block size and writer count.
 */
#ifndef EMDB_BENCH_CKPT_SST_H
#define EMDB_BENCH_CKPT_SST_H

#include <stdint.h>

#include <rocksdb/c.h>

typedef struct ckpt_sst_bw {
	int reps;
	uint64_t bytes;   /* written by the best repetition (whole values) */
	double seconds;   /* best repetition, each file's finish (sync) in */
	double mbs;       /* bytes / seconds, 1e6 bytes per MB            */
} ckpt_sst_bw;

/* One repetition: `writers` threads each write their share of `bytes` as
 * one SST file under dir (opts: the store's rows options, as the
 * checkpoint's writers use them), in values of 4 MiB of incompressible
 * data under increasing keys, and finish it (RocksDB syncs the file); the
 * files are unlinked afterwards.  Nothing else is done: no rows copied,
 * no block checksums of emdb's, no writeback hints.  *best (zeroed before
 * the first call) keeps the fastest repetition.  Exits the process on a
 * RocksDB error. */
void ckpt_sst_bound_rep(const char *dir, const rocksdb_options_t *opts, uint64_t bytes,
			unsigned writers, ckpt_sst_bw *best);

#endif
