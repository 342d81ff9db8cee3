/*
 * test_store_nospace.c - the checkpoint store on a full file system: every
 * checkpoint, delete and retention that needs space fails with NOSPACE (no
 * abort inside RocksDB), what was there stays restorable, and once space
 * is freed the same store handle works again without being reopened.
 *
 * The file system is a 20 MiB tmpfs mounted for the test (root only: the
 * test skips, saying so, elsewhere, tests/fullfs.h), filled by a 6 MiB
 * ballast file (another user of the disk, who frees it at the end), the
 * store's own checkpoints and then a filler file.  The mount goes with the
 * test's process, also after a failed assertion or a crash.
 */
#define _GNU_SOURCE /* tests/tmpdir.h: nftw; tests/fullfs.h: MNT_DETACH */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <emdb/checkpoint.h>
#include <emdb/db.h>

#include "tests/lib/store_util.h" /* first: Criterion */
#include "tests/lib/fullfs.h"

#define ROWS 40000 /* about 2.9 MB of row data per checkpoint */
#define MAX_CKPTS 20

static fullfs fs;

static void setup(void)
{
	fullfs_setup(&fs, 20);
}

static void teardown(void)
{
	fullfs_teardown(&fs);
}

static size_t count(emdb_store *st)
{
	size_t n = 0;
	cr_assert_eq(emdb_store_list(st, NULL, 0, &n), 0, "%s", emdb_last_error());
	return n;
}

static void expect_ok_or_nospace(int rc, const char *what)
{
	cr_assert(rc == EMDB_OK || rc == EMDB_ERR_NOSPACE, "%s: rc %d (%s)", what, rc, emdb_last_error());
	if (rc == EMDB_ERR_NOSPACE)
		cr_assert(strstr(emdb_last_error(), "o space left"), "%s: %s", what, emdb_last_error());
}

TestSuite(store_nospace, .init = setup, .fini = teardown, .timeout = 240);

Test(store_nospace, a_full_disk_gives_nospace_and_the_store_recovers)
{
	if (!fs.mounted)
		cr_skip_test("needs root to mount a 20 MiB tmpfs (uid %d)", (int)geteuid());
	emdb_store *st;
	cr_assert_eq(emdb_store_open(fs.data, &st), 0, "%s", emdb_last_error());
	uint32_t t;
	emdb_db *db = su_db(&t, ROWS);

	/* Another user of the disk holds 6 MiB, which it frees at the end;
	 * checkpoints fill the rest. */
	fullfs_ballast(fs.ballast, 6);

	/* Checkpoints until the store fills the disk. */
	int rc = EMDB_OK;
	size_t made = 0;
	for (int i = 0; i < MAX_CKPTS && rc == EMDB_OK; i++) {
		rc = su_step_and_checkpoint(db, st, t, NULL);
		made += rc == EMDB_OK;
	}
	cr_assert_eq(rc, EMDB_ERR_NOSPACE, "the checkpoint that did not fit: rc %d (%s)", rc,
		     emdb_last_error());
	cr_assert_geq(made, 2);
	cr_assert_eq(count(st), made, "the failed checkpoint left nothing visible");

	/* Nothing left at all: every step that writes fails cleanly. */
	off_t filled = fullfs_fill(fs.filler, 65536, 1024);
	rc = su_step_and_checkpoint(db, st, t, NULL);
	cr_assert_eq(rc, EMDB_ERR_NOSPACE, "checkpoint on a full disk: rc %d (%s)", rc, emdb_last_error());
	emdb_ckpt_info list[MAX_CKPTS];
	size_t n = 0;
	cr_assert_eq(emdb_store_list(st, list, MAX_CKPTS, &n), 0);
	expect_ok_or_nospace(emdb_store_delete(st, list[0].id), "delete on a full disk");
	expect_ok_or_nospace(emdb_store_retain(st, 1, NULL), "retention on a full disk");

	/* Room for a small file but not for RocksDB's flush and compaction:
	 * RocksDB itself fails and stops taking writes.  Which room that is
	 * depends on the sizes of its files, so try one page more each time. */
	int refused = 0;
	for (int pages = 1; pages <= 8; pages++) {
		cr_assert_eq(truncate(fs.filler, filled > 4096 * pages ? filled - 4096 * pages : 0), 0);
		cr_assert_eq(emdb_store_list(st, list, MAX_CKPTS, &n), 0);
		if (n > 1) {
			rc = emdb_store_delete(st, list[0].id);
			expect_ok_or_nospace(rc, "delete on a nearly full disk");
			refused += rc != EMDB_OK;
		}
		rc = su_step_and_checkpoint(db, st, t, NULL);
		expect_ok_or_nospace(rc, "checkpoint on a nearly full disk");
		refused += rc != EMDB_OK;
		fullfs_fill(fs.filler, 4096, 4096);
	}
	cr_assert_gt(refused, 0, "the disk was never full enough to refuse anything");
	rc = emdb_store_state(st);
	cr_assert(rc == EMDB_OK || rc == EMDB_ERR_NOSPACE, "store state %d", rc);

	/* Reading goes on: the newest checkpoint restores. */
	emdb_ckpt_info newest;
	cr_assert_eq(emdb_store_get(st, 0, &newest), 0, "%s", emdb_last_error());
	cr_assert_eq(su_restored_step(st, 0), newest.max_step);

	/* Space back: the same handle works again, without a reopen. */
	cr_assert_eq(unlink(fs.ballast), 0);
	cr_assert_eq(unlink(fs.filler), 0);
	cr_assert_eq(emdb_store_retain(st, 1, NULL), 0, "retention with space: %s", emdb_last_error());
	cr_assert_eq(count(st), 1);
	emdb_ckpt_info info;
	cr_assert_eq(su_step_and_checkpoint(db, st, t, &info), 0, "checkpoint with space: %s",
		     emdb_last_error());
	cr_assert_eq(count(st), 2);
	cr_assert_eq(su_restored_step(st, 0), info.max_step);
	cr_assert_eq(emdb_store_state(st), EMDB_OK, "recovered");
	emdb_db_close(db);
	emdb_store_close(st);

	/* And the store opens cleanly again. */
	cr_assert_eq(emdb_store_open(fs.data, &st), 0, "%s", emdb_last_error());
	cr_assert_eq(count(st), 2);
	emdb_store_close(st);
}
