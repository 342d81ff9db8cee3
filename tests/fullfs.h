/*
 * fullfs.h - a small file system to fill: a tmpfs mounted over a fresh
 * directory under /tmp (root only), and files that take its space, for
 * the tests of what the checkpoint store and the server do when the disk
 * is full.  The including file defines _GNU_SOURCE (tests/tmpdir.h) and
 * includes Criterion.
 */
#ifndef EMDB_TEST_FULLFS_H
#define EMDB_TEST_FULLFS_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "tests/tmpdir.h"

/* mkdtemp dir (at least 32 bytes) and mount a tmpfs of `mib` MiB on it,
 * in a mount namespace of this process's own (children it starts share
 * it): the mount goes with the process however it ends, a crash
 * included.  False (the directory made, nothing mounted) when not root or
 * the mount fails: the caller skips, saying so. */
static inline bool fullfs_mount(char *dir, size_t cap, unsigned mib)
{
	snprintf(dir, cap, "/tmp/emdb-fullfs-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	char opt[32];
	snprintf(opt, sizeof(opt), "size=%um", mib);
	return geteuid() == 0 && unshare(CLONE_NEWNS) == 0 &&
	       mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
	       mount("tmpfs", dir, "tmpfs", 0, opt) == 0;
}

/* Unmount (when mounted) and remove dir; for a .fini fixture. */
static inline void fullfs_unmount(char *dir, bool mounted)
{
	if (mounted)
		umount2(dir, MNT_DETACH);
	if (dir[0])
		tmpdir_remove(dir);
	dir[0] = 0;
}

/* Append zeros to path in `chunk`-byte writes, at most `max` of them,
 * then in 512-byte ones, until the file system is full.  Bytes added. */
static inline off_t fullfs_fill(const char *path, size_t chunk, int max)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	static char buf[1 << 20];
	off_t total = 0;
	if (chunk > sizeof(buf))
		chunk = sizeof(buf);
	for (int i = 0; i < max; i++) {
		ssize_t w = write(fd, buf, chunk);
		if (w <= 0) {
			cr_assert(w == 0 || errno == ENOSPC, "%s: %s", path, strerror(errno));
			break;
		}
		total += w;
	}
	for (int i = 0; i < 64; i++) /* the last partial pages */
		if (write(fd, buf, 512) <= 0)
			break;
	close(fd);
	return total;
}

/* A file of exactly mib MiB (another user of the disk); asserts it fits. */
static inline void fullfs_ballast(const char *path, unsigned mib)
{
	cr_assert_eq(fullfs_fill(path, 1 << 20, (int)mib), (off_t)mib << 20, "ballast %s", path);
}

#endif
