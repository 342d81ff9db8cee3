/*
 * ckpt_sst.c - the SST-writer bound of the checkpoint workload
 * (ckpt_sst.h).
 *
 * Design
 *   A full checkpoint is RocksDB SST files written by SstFileWriter: the
 *   rows are copied into 4 MiB blocks, hashed, and put as one value each
 *   (checkpoint/segment.c).  This bound is the same writer with the rows' work
 *   taken out: the same options (the store's rows options: no compression,
 *   its block size), the same value size, the same number of writer
 *   threads (the job's and one helper), each finishing its own file, which
 *   syncs it.  What RocksDB's writer and the page cache cost beside the
 *   disk is then in the bound too, as the gathering echo of the network
 *   mode holds the rows' copy: a checkpoint that reaches this bound is
 *   limited by RocksDB's write path, not by emdb's.
 *
 *   Keys are 8-byte big-endian counters, so each file's keys increase as
 *   SstFileWriter requires; the first 8 bytes of each value are the
 *   counter too, so no two values are alike.
 *
 * Invariants
 *   1. Only dir/sst-bound-<t>.sst files are written, and all are unlinked
 *      before the repetition returns.
 */
#include "tools/bench/ckpt_sst.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <emdb/error.h>

#include "checkpoint/store_int.h"
#include "tools/bench/harness.h"
#include "tools/bench/keys.h"

#define VALUE_BYTES (4u << 20) /* a checkpoint's row block (checkpoint/segment.h) */
#define MAX_WRITERS 16u

typedef struct sst_job {
	const char *dir;
	const rocksdb_options_t *opts;
	const uint8_t *value;        /* VALUE_BYTES of random data */
	uint64_t values[MAX_WRITERS]; /* values each writer puts    */
	double secs[MAX_WRITERS];
} sst_job;

/* Exits with RocksDB's error (freed by store_rocks_err), if any. */
static void check_rocks(char *err, const char *what, const char *path)
{
	if (store_rocks_err(err, what) != EMDB_OK)
		harness_die("%s: %s", path, emdb_last_error());
}

static void sst_write(void *arg, unsigned t)
{
	sst_job *j = arg;
	char path[4200];
	char *err = NULL;
	uint8_t *val = malloc(VALUE_BYTES);
	rocksdb_envoptions_t *env = rocksdb_envoptions_create();
	rocksdb_sstfilewriter_t *w = rocksdb_sstfilewriter_create(env, j->opts);
	double t0;

	rocksdb_envoptions_destroy(env);
	if (!val)
		harness_die("out of memory");
	memcpy(val, j->value, VALUE_BYTES);
	snprintf(path, sizeof(path), "%s/sst-bound-%u.sst", j->dir, t);
	t0 = harness_now();
	rocksdb_sstfilewriter_open(w, path, &err);
	check_rocks(err, "creating an SST file", path);
	for (uint64_t i = 0; i < j->values[t]; i++) {
		uint8_t key[8];
		for (int b = 0; b < 8; b++)
			key[b] = (uint8_t)(i >> (56 - 8 * b));
		memcpy(val, key, sizeof(key));
		rocksdb_sstfilewriter_put(w, (const char *)key, sizeof(key), (const char *)val,
					  VALUE_BYTES, &err);
		check_rocks(err, "writing an SST file", path);
	}
	rocksdb_sstfilewriter_finish(w, &err);
	check_rocks(err, "finishing an SST file", path);
	j->secs[t] = harness_now() - t0;
	rocksdb_sstfilewriter_destroy(w);
	unlink(path);
	free(val);
}

void ckpt_sst_bound_rep(const char *dir, const rocksdb_options_t *opts, uint64_t bytes,
			unsigned writers, ckpt_sst_bw *best)
{
	sst_job j = { .dir = dir, .opts = opts };
	uint64_t total = (bytes + VALUE_BYTES - 1) / VALUE_BYTES, done = 0;
	uint64_t *v = malloc(VALUE_BYTES);
	keys_rng r = { 0x557b + (uint64_t)best->reps };
	double slowest = 0;

	if (!v)
		harness_die("out of memory");
	if (writers < 1 || writers > MAX_WRITERS)
		harness_die("SST bound: %u writers (1 to %u)", writers, MAX_WRITERS);
	for (size_t i = 0; i < VALUE_BYTES / sizeof(uint64_t); i++)
		v[i] = keys_rng_next(&r);
	j.value = (const uint8_t *)v;
	for (unsigned t = 0; t < writers; t++)
		j.values[t] = total * (t + 1) / writers - total * t / writers;
	harness_parallel(writers, sst_write, &j);
	for (unsigned t = 0; t < writers; t++) {
		done += j.values[t] * VALUE_BYTES;
		if (j.secs[t] > slowest)
			slowest = j.secs[t];
	}
	free(v);
	harness_log("SST writer alone, %u writer(s): %.2f GB in %.2f s (%.0f MB/s)", writers,
		    (double)done / 1e9, slowest, (double)done / slowest / 1e6);
	if (!best->reps || slowest < best->seconds) {
		best->seconds = slowest;
		best->bytes = done;
		best->mbs = (double)done / slowest / 1e6;
	}
	best->reps++;
}
