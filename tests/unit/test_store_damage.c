/*
 * test_store_damage.c - a damaged checkpoint store is refused, never taken
 * for an empty or older one, and nothing is deleted on its account; the
 * explicit accept_loss option opens it with what is whole.
 *
 * The damage is done from outside, as a bad disk or a lost write would:
 * a flipped byte in RocksDB's write-ahead log, a manifest removed from
 * RocksDB behind the store's back, a damaged or missing catalog file.
 */
#define _GNU_SOURCE /* tests/tmpdir.h: nftw */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/checkpoint.h>
#include <emdb/db.h>

#include "tests/lib/store_util.h"
#include "tests/lib/tmpdir.h"

#define ROWS 20000 /* about 1.4 MB of row data per checkpoint */

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/emdb-damage-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	tmpdir_remove(dir);
}

/* Three complete checkpoints, ids 1..3 with steps 1..3; the store closed. */
static void three_checkpoints(void)
{
	emdb_store *st;
	cr_assert_eq(emdb_store_open(dir, &st), 0, "%s", emdb_last_error());
	uint32_t t;
	emdb_db *db = su_db(&t, ROWS);
	for (int i = 1; i <= 3; i++) {
		emdb_ckpt_info info;
		cr_assert_eq(su_step_and_checkpoint(db, st, t, &info), 0, "%s", emdb_last_error());
		cr_assert_eq(info.id, (uint64_t)i);
	}
	emdb_db_close(db);
	emdb_store_close(st);
}

/* Row blocks of checkpoints 1..3 in the store in d, read with RocksDB's
 * own API (which replays and flushes the WAL: use a copy where the WAL
 * must stay as it is). */
static uint64_t row_keys(const char *d)
{
	su_raw raw;
	su_raw_open(d, &raw);
	uint64_t n = 0;
	for (uint64_t id = 1; id <= 3; id++)
		n += su_raw_rows(&raw, id);
	su_raw_close(&raw);
	return n;
}

/* row_keys of a copy of the store, which stays untouched. */
static uint64_t row_keys_of_copy(void)
{
	char copy[96], cmd[256];
	snprintf(copy, sizeof(copy), "%s-copy", dir);
	snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s'", dir, copy);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	uint64_t n = row_keys(copy);
	tmpdir_remove(copy);
	return n;
}

static int open_with(bool accept_loss, emdb_store **st)
{
	emdb_store_options o = EMDB_STORE_OPTIONS_INIT;
	o.accept_loss = accept_loss;
	*st = NULL;
	return emdb_store_open_ex(dir, &o, st);
}

static size_t count(emdb_store *st)
{
	size_t n = 0;
	cr_assert_eq(emdb_store_list(st, NULL, 0, &n), 0, "%s", emdb_last_error());
	return n;
}

static void assert_refused(int rc, const char *what)
{
	cr_assert_eq(rc, EMDB_ERR_CORRUPT, "open after %s: rc %d (%s)", what, rc, emdb_last_error());
	const char *m = emdb_last_error();
	cr_assert(strstr(m, dir), "the message names the store: %s", m);
	cr_assert(strstr(m, "accept"), "the message says how to proceed: %s", m);
}

TestSuite(store_damage, .init = setup, .fini = teardown);

/* Three checkpoints, then the manifest of `id` removed behind the store's
 * back: the open is refused, naming it, and its rows stay. */
static void lose_manifest_and_expect_refusal(uint64_t id)
{
	three_checkpoints();
	su_raw raw;
	su_raw_open(dir, &raw);
	uint64_t rows = su_raw_rows(&raw, id);
	cr_assert_gt(rows, 0);
	su_raw_drop_manifest(&raw, id);
	su_raw_close(&raw);
	emdb_store *st;
	assert_refused(open_with(false, &st), "a manifest removed");
	char want[64];
	snprintf(want, sizeof(want), "checkpoint %llu: its manifest is missing", (unsigned long long)id);
	cr_assert(strstr(emdb_last_error(), want), "%s", emdb_last_error());
	su_raw_open(dir, &raw);
	cr_assert_eq(su_raw_rows(&raw, id), rows, "the rows of checkpoint %llu are untouched",
		     (unsigned long long)id);
	su_raw_close(&raw);
}

/* The reporter's case: a byte flipped inside a manifest record of the WAL.
 * Where manifests are still in the WAL, the open must refuse; where they
 * were flushed out of it, a damaged WAL record cannot take one with it.
 * Either way no checkpoint is lost and no row data is deleted. */
Test(store_damage, a_damaged_wal_record_loses_no_checkpoint)
{
	three_checkpoints();
	uint64_t rows_before = row_keys_of_copy();
	char wal[8][512];
	size_t nw = su_files(dir, ".log", wal, 8);
	bool flipped_manifest = false;
	for (size_t i = 0; i < nw && !flipped_manifest; i++) {
		off_t at = su_find(wal[i], "EMDBCKPT", 8, 0); /* the oldest manifest in the WAL */
		if (at >= 0) {
			su_flip(wal[i], at + 20);
			flipped_manifest = true;
		}
	}
	emdb_store *st;
	int rc = open_with(false, &st);
	if (flipped_manifest) {
		assert_refused(rc, "a flipped byte in a manifest record of the WAL");
	} else {
		cr_assert_eq(rc, 0, "no manifest in the WAL, nothing damaged: %s", emdb_last_error());
		cr_assert_eq(count(st), 3);
		cr_assert_eq(su_restored_step(st, 0), 3, "latest is still checkpoint 3");
		emdb_store_close(st);
	}
	uint64_t rows_after = row_keys(dir);
	cr_assert_eq(rows_after, rows_before, "row data was deleted at open: %llu -> %llu row blocks",
		     (unsigned long long)rows_before, (unsigned long long)rows_after);
}

/* A damaged WAL record is an error at open, not the silent end of the log
 * (RocksDB's default); accept_loss opens the store with what is whole. */
Test(store_damage, a_damaged_wal_record_fails_the_open)
{
	three_checkpoints();
	/* A record in emdb_meta that stays in the WAL (a raw close does not
	 * flush), then one byte of it flipped. */
	su_raw raw;
	su_raw_open(dir, &raw);
	char val[4096];
	memset(val, 'Q', sizeof(val));
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
	rocksdb_writeoptions_set_sync(wo, 1);
	char *err = NULL;
	rocksdb_put_cf(raw.db, wo, raw.cf[1], "zz-test", 7, val, sizeof(val), &err);
	cr_assert_null(err, "%s", err);
	rocksdb_put_cf(raw.db, wo, raw.cf[1], "zz-test2", 8, "after", 5, &err);
	cr_assert_null(err, "%s", err);
	rocksdb_writeoptions_destroy(wo);
	su_raw_close(&raw);
	char wal[8][512];
	size_t nw = su_files(dir, ".log", wal, 8);
	off_t at = -1;
	size_t i = 0;
	for (; i < nw && at < 0; i++)
		at = su_find(wal[i], "QQQQQQQQ", 8, 0);
	cr_assert_geq(at, 0, "the record is in a WAL file");
	su_flip(wal[i - 1], at + 100);

	emdb_store *st;
	assert_refused(open_with(false, &st), "a damaged WAL record");
	cr_assert(strstr(emdb_last_error(), "RocksDB cannot replay"), "%s", emdb_last_error());

	cr_assert_eq(open_with(true, &st), 0, "accept_loss: %s", emdb_last_error());
	cr_assert_eq(count(st), 3, "the complete checkpoints are all there");
	cr_assert_eq(su_restored_step(st, 0), 3);
	emdb_store_close(st);
	/* What accept_loss accepted is settled: a plain open works again. */
	cr_assert_eq(open_with(false, &st), 0, "%s", emdb_last_error());
	cr_assert_eq(count(st), 3);
	emdb_store_close(st);
}

/* A manifest gone from RocksDB (what a skipped WAL record did before
 * manifests were flushed) is detected from the catalog, not taken as a
 * checkpoint that never completed: its rows stay until the operator
 * accepts the loss, and `latest` is never silently the previous one. */
Test(store_damage, a_lost_manifest_is_refused_not_taken_for_unfinished)
{
	lose_manifest_and_expect_refusal(3);
	emdb_store *st;
	cr_assert_eq(open_with(true, &st), 0, "accept_loss: %s", emdb_last_error());
	cr_assert(strstr(emdb_store_damage(st), "checkpoint 3"), "damage: %s", emdb_store_damage(st));
	cr_assert_eq(count(st), 2);
	cr_assert_eq(su_restored_step(st, 0), 2, "accepted: latest is checkpoint 2 now");
	emdb_store_close(st);
}

/* The same for the oldest checkpoint: the store is not taken for empty. */
Test(store_damage, a_lost_oldest_manifest_is_refused)
{
	lose_manifest_and_expect_refusal(1);
}

/* A damaged catalog is named and refused; accept_loss rebuilds it from
 * the manifests, which keeps every checkpoint. */
Test(store_damage, a_damaged_catalog_is_refused)
{
	three_checkpoints();
	char cat[128];
	snprintf(cat, sizeof(cat), "%s/CATALOG", dir);
	su_flip(cat, 50);
	emdb_store *st;
	assert_refused(open_with(false, &st), "a flipped byte in the catalog");
	cr_assert(strstr(emdb_last_error(), "CATALOG"), "%s", emdb_last_error());
	cr_assert_eq(open_with(true, &st), 0, "accept_loss: %s", emdb_last_error());
	cr_assert_eq(count(st), 3);
	emdb_store_close(st);
}

/* A store written before the catalog existed (none beside it) opens with
 * all its checkpoints, and gets a catalog. */
Test(store_damage, a_store_without_catalog_gets_one)
{
	three_checkpoints();
	char cat[128];
	snprintf(cat, sizeof(cat), "%s/CATALOG", dir);
	cr_assert_eq(unlink(cat), 0);
	emdb_store *st;
	cr_assert_eq(open_with(false, &st), 0, "%s", emdb_last_error());
	cr_assert_eq(count(st), 3);
	cr_assert_eq(su_restored_step(st, 0), 3);
	emdb_store_close(st);
	struct stat sb;
	cr_assert_eq(stat(cat, &sb), 0, "a catalog was written");
}

/* Bad options are refused before anything is touched. */
Test(store_damage, bad_options_are_refused)
{
	emdb_store_options o = { .size = 0, .accept_loss = 1 };
	emdb_store *st = NULL;
	cr_assert_eq(emdb_store_open_ex(dir, &o, &st), EMDB_ERR_INVALID);
	cr_assert_null(st);
}
