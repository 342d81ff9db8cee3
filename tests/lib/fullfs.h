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

#include "tests/lib/tmpdir.h"

/* A mounted tmpfs and the paths a test uses on it. */
typedef struct fullfs {
	char mnt[64];
	char data[96];    /* <mnt>/data: the store's directory           */
	char filler[96];  /* <mnt>/filler: takes what space is left       */
	char ballast[96]; /* <mnt>/ballast: another user's file, freed later */
	bool mounted;
} fullfs;

/* mkdtemp f->mnt and mount a tmpfs of `mib` MiB on it, in a mount
 * namespace of this process's own (children it starts share it): the
 * mount goes with the process however it ends, a crash included.
 * f->mounted false (the directory made, nothing mounted) when not root or
 * the mount fails: the test skips, saying so. */
static inline void fullfs_setup(fullfs *f, unsigned mib)
{
	snprintf(f->mnt, sizeof(f->mnt), "/tmp/emdb-fullfs-XXXXXX");
	cr_assert_not_null(mkdtemp(f->mnt));
	snprintf(f->data, sizeof(f->data), "%s/data", f->mnt);
	snprintf(f->filler, sizeof(f->filler), "%s/filler", f->mnt);
	snprintf(f->ballast, sizeof(f->ballast), "%s/ballast", f->mnt);
	char opt[32];
	snprintf(opt, sizeof(opt), "size=%um", mib);
	f->mounted = geteuid() == 0 && unshare(CLONE_NEWNS) == 0 &&
		     mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
		     mount("tmpfs", f->mnt, "tmpfs", 0, opt) == 0;
}

/* Unmount (when mounted) and remove the directory; for a .fini fixture. */
static inline void fullfs_teardown(fullfs *f)
{
	if (f->mounted)
		umount2(f->mnt, MNT_DETACH);
	f->mounted = false;
	if (f->mnt[0])
		tmpdir_remove(f->mnt);
	f->mnt[0] = 0;
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
