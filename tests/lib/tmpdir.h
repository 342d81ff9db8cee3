/*
 * tmpdir.h - removing a test's temporary directory tree (a server's
 * --data-dir, a checkpoint store), one way for every test; needs no
 * Criterion, so the plain-runner tests use it too.  The including file
 * defines _GNU_SOURCE or _XOPEN_SOURCE (for nftw's FTW_DEPTH) before its
 * first #include.
 */
#ifndef EMDB_TEST_TMPDIR_H
#define EMDB_TEST_TMPDIR_H

#if !defined(_GNU_SOURCE) && !defined(_XOPEN_SOURCE)
#error "define _GNU_SOURCE or _XOPEN_SOURCE before the first #include to use tests/lib/tmpdir.h"
#endif

#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

static int tmpdir_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	remove(path);
	return 0; /* go on with the rest */
}

/* Remove dir and everything under it (NULL or "" is a no-op).  Returns 0
 * when nothing of it is left, -1 otherwise. */
static inline int tmpdir_remove(const char *dir)
{
	struct stat sb;
	if (!dir || !dir[0])
		return 0;
	nftw(dir, tmpdir_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return stat(dir, &sb) == 0 ? -1 : 0;
}

#endif
