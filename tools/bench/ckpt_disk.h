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
	uint64_t bytes;      /* file size; 0 before the first repetition  */
	int reps;
	double write_s;      /* writes and the fdatasync, best repetition */
	double read_s;       /* reads from the disk, best repetition      */
	double write_mbs;    /* bytes / write_s, 1e6 bytes per MB        */
	double read_mbs;
} ckpt_disk_bw;

/* One repetition of the sequential bounds of the disk holding dir: a new
 * file of `bytes` written in 1 MiB blocks of incompressible data and
 * fdatasync'ed (timed together), dropped from the page cache, read back in
 * 1 MiB blocks (timed), then unlinked.  *best (zeroed before the first
 * call) keeps the best write and the best read over the repetitions.
 * Exits the process on any I/O error. */
void ckpt_disk_bound_rep(const char *dir, uint64_t bytes, ckpt_disk_bw *best);

#endif
