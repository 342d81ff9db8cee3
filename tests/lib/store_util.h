/*
 * store_util.h - what the checkpoint store's damage and full-disk tests
 * share: a store of checkpoints whose steps tell them apart, RocksDB
 * opened raw (its C API, as an outside tool would) to damage or inspect
 * what emdb wrote, and byte patterns found and flipped in files.
 * Needs Criterion (tests/helpers.h).
 */
#ifndef EMDB_TEST_STORE_UTIL_H
#define EMDB_TEST_STORE_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include <emdb/checkpoint.h>
#include <emdb/db.h>

#include "tests/lib/helpers.h"

#define SU_DIM 16

/* A database with table "t" of `rows` rows (SGD, lr 1). */
static inline emdb_db *su_db(uint32_t *table, uint64_t rows)
{
	emdb_db *db = open_db(4);
	*table = make_sgd_lr1_table(db, SU_DIM);
	uint64_t *ids = malloc(rows * 8);
	float *v = malloc(rows * SU_DIM * 4);
	for (uint64_t i = 0; i < rows; i++)
		ids[i] = scramble(i);
	cr_assert_eq(emdb_pull(db, *table, ids, rows, SU_DIM, v), 0, "%s", emdb_last_error());
	free(ids);
	free(v);
	return db;
}

/* One Update (the table's step goes up by one), then a full checkpoint:
 * checkpoint k of a fresh table has step k.  Returns emdb_checkpoint's rc. */
static inline int su_step_and_checkpoint(emdb_db *db, emdb_store *st, uint32_t table, emdb_ckpt_info *info)
{
	cr_assert_eq(emdb_update(db, table, NULL), 0, "%s", emdb_last_error());
	return emdb_checkpoint(db, st, EMDB_CKPT_FULL, info);
}

/* The step of table "t" after restoring checkpoint id (0 = latest) from st
 * into a fresh database; asserts the restore succeeds. */
static inline uint64_t su_restored_step(emdb_store *st, uint64_t id)
{
	emdb_db *db = open_db(4);
	cr_assert_eq(emdb_restore(db, st, id, NULL), 0, "restore %llu: %s", (unsigned long long)id,
		     emdb_last_error());
	uint32_t t;
	cr_assert_eq(emdb_table_find(db, "t", &t), 0);
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	emdb_db_close(db);
	return info.stats.step;
}

/* RocksDB under <dir>/rocksdb opened with emdb's three column families;
 * cf[1] is emdb_meta, cf[2] emdb_rows. */
typedef struct su_raw {
	rocksdb_t *db;
	rocksdb_options_t *opts;
	rocksdb_column_family_handle_t *cf[3];
} su_raw;

static inline void su_raw_open(const char *dir, su_raw *r)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/rocksdb", dir);
	r->opts = rocksdb_options_create();
	const char *names[3] = { "default", "emdb_meta", "emdb_rows" };
	const rocksdb_options_t *o[3] = { r->opts, r->opts, r->opts };
	char *err = NULL;
	r->db = rocksdb_open_column_families(r->opts, path, 3, names, o, r->cf, &err);
	cr_assert_null(err, "raw open of %s: %s", path, err);
}

static inline void su_raw_close(su_raw *r)
{
	for (int i = 0; i < 3; i++)
		rocksdb_column_family_handle_destroy(r->cf[i]);
	rocksdb_close(r->db);
	rocksdb_options_destroy(r->opts);
}

/* Remove the manifest of checkpoint id behind the store's back (what a
 * WAL record RocksDB skipped at recovery did to a manifest in it). */
static inline void su_raw_drop_manifest(su_raw *r, uint64_t id)
{
	uint8_t key[13] = { 'c', 'k', 'p', 't', ':' };
	for (int i = 0; i < 8; i++)
		key[5 + i] = (uint8_t)(id >> (56 - 8 * i));
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
	char *err = NULL;
	rocksdb_delete_cf(r->db, wo, r->cf[1], (const char *)key, sizeof(key), &err);
	cr_assert_null(err, "%s", err);
	rocksdb_writeoptions_destroy(wo);
}

/* Row keys of checkpoint id in emdb_rows. */
static inline uint64_t su_raw_rows(su_raw *r, uint64_t id)
{
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_iterator_t *it = rocksdb_create_iterator_cf(r->db, ro, r->cf[2]);
	uint8_t k[8];
	for (int i = 0; i < 8; i++)
		k[i] = (uint8_t)(id >> (56 - 8 * i));
	uint64_t n = 0;
	for (rocksdb_iter_seek(it, (const char *)k, 8); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t kl;
		const char *key = rocksdb_iter_key(it, &kl);
		if (kl < 8 || memcmp(key, k, 8) != 0)
			break;
		n++;
	}
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	return n;
}

/* Offset of the first `pat` in file path at or after `from`; -1 if none. */
static inline off_t su_find(const char *path, const void *pat, size_t plen, off_t from)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	fseeko(f, 0, SEEK_END);
	off_t len = ftello(f);
	fseeko(f, 0, SEEK_SET);
	char *buf = malloc(len > 0 ? (size_t)len : 1);
	off_t at = -1;
	if (len > 0 && fread(buf, 1, (size_t)len, f) == (size_t)len)
		for (off_t i = from; i + (off_t)plen <= len && at < 0; i++)
			if (memcmp(buf + i, pat, plen) == 0)
				at = i;
	free(buf);
	fclose(f);
	return at;
}

static inline void su_flip(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	cr_assert_geq(fd, 0, "%s", path);
	uint8_t b;
	cr_assert_eq(pread(fd, &b, 1, at), 1);
	b ^= 0x5a;
	cr_assert_eq(pwrite(fd, &b, 1, at), 1);
	close(fd);
}

/* The RocksDB files of the store in dir whose names end in `suffix`
 * (".log", ".sst"), in name order (same-width numbers: numeric order, so
 * the newest last): full paths into names[0..n), at most cap.  Returns n. */
static inline size_t su_files(const char *dir, const char *suffix, char names[][512], size_t cap)
{
	char d[400];
	snprintf(d, sizeof(d), "%s/rocksdb", dir);
	DIR *dd = opendir(d);
	cr_assert_not_null(dd);
	struct dirent *e;
	size_t n = 0, sl = strlen(suffix);
	while ((e = readdir(dd)) != NULL && n < cap) {
		size_t l = strlen(e->d_name);
		if (l > sl && l < 100 && !strcmp(e->d_name + l - sl, suffix))
			snprintf(names[n++], 512, "%s/%s", d, e->d_name);
	}
	closedir(dd);
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			char t[512];
			memcpy(t, names[j], 512);
			memcpy(names[j], names[j - 1], 512);
			memcpy(names[j - 1], t, 512);
		}
	return n;
}

#endif
