/*
 * ckpt_disk.c - data directory, page-cache dropping and the disk bounds of
 * the checkpoint workload (ckpt_disk.h).
 *
 * Design
 *   Two measures of the same disk, on a file of the checkpoint's size
 *   made of random bytes (so that no layer below, a compressing or
 *   deduplicating virtual disk, can cheat):
 *
 *   - through the page cache, the way RocksDB's SST writer streams a
 *     checkpoint: 1 MiB writes and one fdatasync (timed together), then 1
 *     MiB reads after POSIX_FADV_DONTNEED;
 *   - the device as fio --direct=1 measures it: the bytes written, then
 *     read, with O_DIRECT in 4 MiB requests, DIRECT_STREAMS of them in
 *     flight (threads taking the next 4 MiB of the file in turn), the
 *     write followed by one fdatasync inside the timing.  A restore reads
 *     with O_DIRECT too.
 *
 *   On this VM neither is the disk alone: a file just written is still
 *   in the host's memory, and the guest's own page cache runs fast or slow
 *   with whether it gets memory just freed (docs/benchmarks-history.md,
 *   Checkpoints).  Each method won in some runs, so the bound of each
 *   direction is the better of the two, the most this disk gave in the
 *   run; both are reported.
 *
 *   The data directory is removed on every way out: atexit covers exit()
 *   and harness_die; a fatal signal runs `rm -rf` in a child (fork and
 *   execv are async-signal-safe, a tree walk is not), then re-raises.
 *
 * Invariants
 *   1. Only the directory made by ckpt_dir_create (and what the caller
 *      names under it) is ever removed.
 *   2. Pages are dropped only after an fdatasync of the file: DONTNEED
 *      skips dirty pages, which would leave them in memory.
 */
#define _GNU_SOURCE
#include "tools/bench/ckpt_disk.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/bench/harness.h"
#include "tools/bench/keys.h"

#define BLOCK (1u << 20) /* as RocksDB's file writer buffer and emdb's row blocks */
#define DIRECT_BLOCK (4u << 20) /* a direct request: past 4 MiB the disk gives no more */
#define DIRECT_STREAMS 4u

static char data_dir[4096];

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	if (remove(path) != 0 && errno != ENOENT)
		harness_die("remove %s: %s", path, strerror(errno));
	return 0;
}

void ckpt_tree_remove(const char *path)
{
	if (nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
		harness_die("remove %s: %s", path, strerror(errno));
}

void ckpt_dir_remove(void)
{
	if (!data_dir[0])
		return;
	ckpt_tree_remove(data_dir);
	data_dir[0] = 0;
}

static void on_signal(int sig)
{
	if (data_dir[0]) {
		pid_t pid = fork();
		if (pid == 0) {
			char *argv[] = { "rm", "-rf", "--", data_dir, NULL };
			execv("/bin/rm", argv);
			_exit(127);
		}
		if (pid > 0)
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

const char *ckpt_dir_create(const char *parent)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	struct sigaction sa;
	int n = snprintf(data_dir, sizeof(data_dir), "%s/emdb-bench-ckpt-XXXXXX",
			 parent ? parent : "/tmp");

	if (n < 0 || (size_t)n >= sizeof(data_dir))
		harness_die("--dir: path too long");
	if (!mkdtemp(data_dir))
		harness_die("mkdtemp %s: %s", data_dir, strerror(errno));
	atexit(ckpt_dir_remove);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	return data_dir;
}

static uint64_t dropped_bytes;

static int drop_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	int fd;

	(void)ftw;
	if (flag != FTW_F || !S_ISREG(sb->st_mode))
		return 0;
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0; /* removed meanwhile (RocksDB's own files come and go) */
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	dropped_bytes += (uint64_t)sb->st_size;
	return 0;
}

uint64_t ckpt_tree_drop_cache(const char *path)
{
	dropped_bytes = 0;
	if (nftw(path, drop_one, 16, FTW_PHYS) != 0)
		harness_die("walk %s: %s", path, strerror(errno));
	return dropped_bytes;
}

static void write_all(int fd, const char *buf, size_t n, const char *path)
{
	while (n > 0) {
		ssize_t w = write(fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			harness_die("write %s: %s", path, w < 0 ? strerror(errno) : "wrote nothing");
		buf += w;
		n -= (size_t)w;
	}
}

/* One repetition: *write_s and *read_s of a file of `bytes` at path. */
static void bound_once(const char *path, uint64_t bytes, uint64_t *buf, double *write_s,
		       double *read_s, double *write_cpu)
{
	uint64_t left, got = 0;
	double t0, cpu0 = harness_cpu_thread();
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);

	if (fd < 0)
		harness_die("create %s: %s", path, strerror(errno));
	t0 = harness_now();
	for (left = bytes; left > 0;) {
		size_t n = left < BLOCK ? (size_t)left : BLOCK;
		buf[0] ^= left; /* no two blocks alike */
		write_all(fd, (const char *)buf, n, path);
		left -= n;
	}
	if (fdatasync(fd) != 0)
		harness_die("fdatasync %s: %s", path, strerror(errno));
	*write_s = harness_now() - t0;
	*write_cpu = harness_cpu_thread() - cpu0;
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);

	fd = open(path, O_RDONLY);
	if (fd < 0)
		harness_die("open %s: %s", path, strerror(errno));
	t0 = harness_now();
	for (;;) {
		ssize_t n = read(fd, buf, BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			harness_die("read %s: %s", path, strerror(errno));
		if (n == 0)
			break;
		got += (uint64_t)n;
	}
	*read_s = harness_now() - t0;
	close(fd);
	if (got != bytes)
		harness_die("%s: read %llu bytes back, wrote %llu", path,
			    (unsigned long long)got, (unsigned long long)bytes);
}

typedef struct direct_job {
	int fd;
	int writing;
	const char *path;
	const void *src;           /* DIRECT_BLOCK of data to write    */
	uint64_t blocks;           /* DIRECT_BLOCK requests in the file */
	atomic_uint_fast64_t next; /* the next request to issue         */
	atomic_uint_fast64_t done; /* bytes moved                       */
} direct_job;

static void direct_stream(void *arg, unsigned t)
{
	direct_job *j = arg;
	char *buf = j->writing ? NULL : aligned_alloc(4096, DIRECT_BLOCK);

	(void)t;
	if (!j->writing && !buf)
		harness_die("out of memory");
	for (;;) {
		uint64_t b = atomic_fetch_add(&j->next, 1);
		off_t off = (off_t)(b * DIRECT_BLOCK);
		size_t at = 0;

		if (b >= j->blocks)
			break;
		while (at < DIRECT_BLOCK) {
			ssize_t n = j->writing ? pwrite(j->fd, (const char *)j->src + at,
							DIRECT_BLOCK - at, off + (off_t)at)
					       : pread(j->fd, buf + at, DIRECT_BLOCK - at,
						       off + (off_t)at);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				harness_die("%s %s (O_DIRECT): %s", j->writing ? "write" : "read",
					    j->path, n < 0 ? strerror(errno) : "short");
			at += (size_t)n;
		}
		atomic_fetch_add(&j->done, DIRECT_BLOCK);
	}
	free(buf);
}

/* One direct pass over the file at path: its seconds (a write's with its
 * fdatasync), or 0 where the file system refuses O_DIRECT (tmpfs). */
static double direct_pass(const char *path, uint64_t blocks, const void *src, int writing)
{
	direct_job j = { .writing = writing, .path = path, .src = src, .blocks = blocks };
	double t0;

	j.fd = open(path, (writing ? O_CREAT | O_TRUNC | O_WRONLY : O_RDONLY) | O_DIRECT, 0600);
	if (j.fd < 0 && errno == EINVAL)
		return 0;
	if (j.fd < 0)
		harness_die("open %s with O_DIRECT: %s", path, strerror(errno));
	atomic_init(&j.next, 0);
	atomic_init(&j.done, 0);
	t0 = harness_now();
	harness_parallel(DIRECT_STREAMS, direct_stream, &j);
	if (writing && fdatasync(j.fd) != 0)
		harness_die("fdatasync %s: %s", path, strerror(errno));
	t0 = harness_now() - t0;
	close(j.fd);
	if (atomic_load(&j.done) != blocks * DIRECT_BLOCK)
		harness_die("%s: moved %llu bytes with O_DIRECT, expected %llu", path,
			    (unsigned long long)atomic_load(&j.done),
			    (unsigned long long)(blocks * DIRECT_BLOCK));
	return t0;
}

static void keep_best(double s, double *best, int first)
{
	if (first || s < *best)
		*best = s;
}

void ckpt_disk_bound_rep(const char *dir, uint64_t bytes, ckpt_disk_bw *best)
{
	char path[4200];
	uint64_t *buf = aligned_alloc(4096, DIRECT_BLOCK);
	uint64_t blocks = (bytes + DIRECT_BLOCK - 1) / DIRECT_BLOCK, dbytes = blocks * DIRECT_BLOCK;
	keys_rng r = { 0xd15c + (uint64_t)best->reps };
	double w, rd, cpu, dw, dr;
	int first = !best->reps;

	if (!buf)
		harness_die("out of memory");
	for (size_t i = 0; i < DIRECT_BLOCK / sizeof(uint64_t); i++)
		buf[i] = keys_rng_next(&r);
	snprintf(path, sizeof(path), "%s/disk-bound", dir);
	bound_once(path, bytes, buf, &w, &rd, &cpu);
	dw = direct_pass(path, blocks, buf, 1);
	dr = dw > 0 ? direct_pass(path, blocks, NULL, 0) : 0;
	unlink(path);
	free(buf);
	harness_log("disk bounds on %.2f GB through the page cache: write %.0f MB/s (%.2f s with "
		    "the sync, CPU %.2f s), read %.0f MB/s (%.2f s)", (double)bytes / 1e9,
		    (double)bytes / w / 1e6, w, cpu, (double)bytes / rd / 1e6, rd);
	if (dw > 0 && dr > 0) {
		harness_log("disk bounds with O_DIRECT: write %.0f MB/s (%.2f s with the sync), "
			    "read %.0f MB/s (%.2f s)", (double)dbytes / dw / 1e6, dw,
			    (double)dbytes / dr / 1e6, dr);
		keep_best(dw, &best->direct_write_s, first);
		keep_best(dr, &best->direct_read_s, first);
		best->direct_bytes = dbytes;
		best->direct_write_mbs = (double)dbytes / best->direct_write_s / 1e6;
		best->direct_read_mbs = (double)dbytes / best->direct_read_s / 1e6;
	} else if (first) {
		harness_log("the file system under %s refuses O_DIRECT: the disk bounds are the "
			    "page cache's alone", dir);
	}
	keep_best(w, &best->cache_write_s, first);
	keep_best(rd, &best->cache_read_s, first);
	best->reps++;
	best->bytes = bytes;
	best->cache_write_mbs = (double)bytes / best->cache_write_s / 1e6;
	best->cache_read_mbs = (double)bytes / best->cache_read_s / 1e6;
	best->write_mbs = best->direct_write_mbs > best->cache_write_mbs ? best->direct_write_mbs
									 : best->cache_write_mbs;
	best->read_mbs = best->direct_read_mbs > best->cache_read_mbs ? best->direct_read_mbs
								      : best->cache_read_mbs;
}
