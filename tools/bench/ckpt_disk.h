/*
 * ckpt_disk.h - the disk side of emdb-bench --workload checkpoint: its
 * data directory, the sequential write and read bounds of the disk under
 * it, and dropping a directory's files from the page cache.
 */
#ifndef EMDB_BENCH_CKPT_DISK_H
#define EMDB_BENCH_CKPT_DISK_H

#include <stdint.h>

/* Create a fresh directory parent/emdb-bench-ckpt-XXXXXX (parent NULL:
 * /tmp) and return its path (static storage, valid until exit).  It and
 * everything under it are removed by ckpt_dir_remove, at exit (atexit, so
 * harness_die too) and on SIGINT, SIGTERM, SIGHUP and SIGQUIT.  Exits the
 * process when it cannot be created.  Call once. */
const char *ckpt_dir_create(const char *parent);

/* Remove the directory of ckpt_dir_create with its contents now; then a
 * no-op. */
void ckpt_dir_remove(void);

/* Remove path and everything under it; a missing path is not an error.
 * Exits the process when something cannot be removed. */
void ckpt_tree_remove(const char *path);

/* fdatasync, then posix_fadvise(POSIX_FADV_DONTNEED), every regular file
 * under path, so the next reads of them come from the disk.  Returns the
 * bytes of the files. */
uint64_t ckpt_tree_drop_cache(const char *path);

typedef struct ckpt_disk_bw {
	uint64_t bytes;        /* checkpoint size; 0 before the first repetition */
	uint64_t direct_bytes; /* moved by each direct pass: bytes rounded up to
				* whole 4 MiB requests                         */
	int reps;
	/* Best repetition of each; MB = 1e6 bytes; writes include the sync. */
	double direct_write_s, direct_read_s;   /* O_DIRECT, 4 x 4 MiB in flight */
	double direct_write_mbs, direct_read_mbs;
	double cache_write_s, cache_read_s;     /* page cache, 1 MiB, one thread */
	double cache_write_mbs, cache_read_mbs;
	/* The bounds: the better of the two methods in each direction. */
	double write_mbs, read_mbs;
} ckpt_disk_bw;

/* One repetition of the sequential rates of the disk holding dir, on a
 * file of `bytes` of incompressible data at dir/disk-bound:
 *   - through the page cache: written in 1 MiB blocks and
 *     fdatasync'ed (timed together), dropped from the page cache, read
 *     back in 1 MiB blocks (timed);
 *   - the device: rewritten with O_DIRECT in 4 MiB requests, four in
 *     flight, and fdatasync'ed (timed together), then read back the same
 *     way (timed).
 * The file is unlinked at the end.  *best (zeroed before the first call)
 * keeps the best of each over the repetitions, and as the bounds the
 * better method in each direction.  Where the file system refuses
 * O_DIRECT (tmpfs), the direct figures are 0 and the bounds the page
 * cache's.  Exits the process on any other I/O error. */
void ckpt_disk_bound_rep(const char *dir, uint64_t bytes, ckpt_disk_bw *best);

#endif
