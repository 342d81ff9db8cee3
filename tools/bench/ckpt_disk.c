/*
 * ckpt_disk.c - data directory, page-cache dropping and the disk bounds of
 * the checkpoint workload (ckpt_disk.h).
 *
 * Design
 *   The bounds are what the same disk gives a program that does nothing
 *   but stream one file, the way a checkpoint streams its SST file: write
 *   in large blocks through the page cache and fdatasync once at the end
 *   (the sync is inside the timing, as a checkpoint's is), then read it
 *   back in large blocks after POSIX_FADV_DONTNEED, so the read comes from
 *   the device and not from memory.  The data is random bytes so that no
 *   layer below (a compressing or deduplicating virtual disk) can cheat.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/bench/harness.h"
#include "tools/bench/keys.h"

#define BLOCK (1u << 20) /* as RocksDB's file writer buffer and emdb's row blocks */

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
	unlink(path);
	if (got != bytes)
		harness_die("%s: read %llu bytes back, wrote %llu", path,
			    (unsigned long long)got, (unsigned long long)bytes);
}

void ckpt_disk_bound_rep(const char *dir, uint64_t bytes, ckpt_disk_bw *best)
{
	char path[4200];
	uint64_t *buf = aligned_alloc(4096, BLOCK);
	keys_rng r = { 0xd15c + (uint64_t)best->reps };
	double w, rd, cpu;

	if (!buf)
		harness_die("out of memory");
	for (size_t i = 0; i < BLOCK / sizeof(uint64_t); i++)
		buf[i] = keys_rng_next(&r);
	snprintf(path, sizeof(path), "%s/disk-bound", dir);
	bound_once(path, bytes, buf, &w, &rd, &cpu);
	free(buf);
	harness_log("disk bounds on %.2f GB: write %.0f MB/s (%.2f s with the sync, CPU "
		    "%.2f s), read %.0f MB/s (%.2f s)", (double)bytes / 1e9,
		    (double)bytes / w / 1e6, w, cpu, (double)bytes / rd / 1e6, rd);
	if (!best->reps || w < best->write_s)
		best->write_s = w;
	if (!best->reps || rd < best->read_s)
		best->read_s = rd;
	best->reps++;
	best->bytes = bytes;
	best->write_mbs = (double)bytes / best->write_s / 1e6;
	best->read_mbs = (double)bytes / best->read_s / 1e6;
}
