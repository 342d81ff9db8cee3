/*
 * test_ckpt.c - checkpoints through the engine's API (emdb/checkpoint.h):
 * bit-exact round trips with every optimizer, incremental chains,
 * restore atomicity, corruption, deletion and retention, and the layout
 * as RocksDB's own ldb tool reads it.
 */
#define _GNU_SOURCE /* tests/lib/tmpdir.h: nftw */
#include <dirent.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/checkpoint.h>
#include <emdb/db.h>

#include "tests/lib/helpers.h"
#include "tests/lib/tmpdir.h"

/* ---- fixtures -------------------------------------------------------- */

static char *make_tmpdir(void)
{
	char *d = strdup("/tmp/emdb-ckpt-XXXXXX");
	cr_assert_not_null(mkdtemp(d));
	return d;
}

static void rm_rf(const char *d)
{
	cr_assert_eq(tmpdir_remove(d), 0, "%s is still there", d);
}

static emdb_store *open_store(const char *dir)
{
	emdb_store *st = NULL;
	int rc = emdb_store_open(dir, &st);
	cr_assert_eq(rc, 0, "store_open: %s", emdb_last_error());
	return st;
}

static const emdb_opt_kind all_opts[] = { EMDB_OPT_SGD, EMDB_OPT_ADAGRAD, EMDB_OPT_ROWWISE_ADAGRAD,
					  EMDB_OPT_ADAM, EMDB_OPT_FTRL };
#define N_OPTS 5
#define DIM 8

/* Push gradients to n IDs drawn from [0, range) and Update every table. */
static void train(emdb_db *db, uint32_t table, uint64_t range, size_t n, uint32_t salt)
{
	uint64_t *ids = malloc(n * 8);
	float *g = malloc(n * DIM * 4);
	for (size_t i = 0; i < n; i++) {
		ids[i] = scramble((i * 7919 + salt * 104729) % range);
		for (int k = 0; k < DIM; k++)
			g[i * DIM + k] = (float)((int)((i + k + salt) % 13) - 6) / 8.0f;
	}
	cr_assert_eq(emdb_push(db, table, ids, n, DIM, g), 0, "%s", emdb_last_error());
	cr_assert_eq(emdb_update(db, table, NULL), 0);
	free(ids);
	free(g);
}

/* Everything a table holds for IDs scramble(0 .. range): vectors, state,
 * found flags, and the table's step and row count. */
typedef struct snap {
	uint64_t range, step, rows;
	uint32_t sf;
	float *vec, *state;
	uint8_t *found;
} snap;

static void take(emdb_db *db, uint32_t table, uint64_t range, snap *s)
{
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, table, &info), 0, "%s", emdb_last_error());
	s->range = range;
	s->step = info.stats.step;
	s->rows = info.stats.rows;
	s->sf = emdb_optimizer_state_floats(info.config.optimizer.kind, DIM);
	uint64_t *ids = malloc(range * 8);
	for (uint64_t i = 0; i < range; i++)
		ids[i] = scramble(i);
	s->vec = malloc(range * DIM * 4);
	s->state = malloc(range * (s->sf ? s->sf : 1) * 4);
	s->found = malloc(range);
	cr_assert_eq(emdb_lookup(db, table, ids, range, DIM, s->vec, s->found), 0);
	uint8_t *f2 = malloc(range);
	cr_assert_eq(emdb_read_state(db, table, ids, range, s->state, f2), 0);
	free(f2);
	free(ids);
}

static void drop_snap(snap *s)
{
	free(s->vec);
	free(s->state);
	free(s->found);
}

static void assert_same(const snap *a, const snap *b, const char *what)
{
	cr_assert_eq(a->step, b->step, "%s: step %llu vs %llu", what, (unsigned long long)a->step,
		     (unsigned long long)b->step);
	cr_assert_eq(a->rows, b->rows, "%s: rows %llu vs %llu", what, (unsigned long long)a->rows,
		     (unsigned long long)b->rows);
	cr_assert_eq(memcmp(a->found, b->found, a->range), 0, "%s: found flags differ", what);
	cr_assert_eq(memcmp(a->vec, b->vec, a->range * DIM * 4), 0, "%s: vectors differ", what);
	cr_assert_eq(memcmp(a->state, b->state, a->range * a->sf * 4), 0, "%s: optimizer state differs",
		     what);
}

static uint32_t opt_table(emdb_db *db, int k)
{
	char name[32];
	snprintf(name, sizeof(name), "t_%s", emdb_optimizer_name(all_opts[k]));
	return make_table(db, name, DIM, all_opts[k], EMDB_INIT_UNIFORM, -0.5, 0.5);
}

/* ---- round trip ------------------------------------------------------ */

Test(ckpt, full_round_trip_every_optimizer_bit_exact)
{
	char *dir = make_tmpdir();
	emdb_store *st = open_store(dir);
	emdb_db *db = open_db(8);
	uint32_t t[N_OPTS];
	snap at[N_OPTS], now;
	for (int k = 0; k < N_OPTS; k++) {
		t[k] = opt_table(db, k);
		for (uint32_t s = 0; s < 4; s++)
			train(db, t[k], 3000, 2000, s);
	}
	emdb_ckpt_info info;
	cr_assert_eq(emdb_checkpoint(db, st, EMDB_CKPT_FULL, &info), 0, "%s", emdb_last_error());
	cr_assert_eq(info.id, 1);
	cr_assert_eq(info.kind, EMDB_CKPT_FULL);
	cr_assert_eq(info.tables, N_OPTS);
	cr_assert_eq(info.max_step, 4);
	for (int k = 0; k < N_OPTS; k++)
		take(db, t[k], 4000, &at[k]);
	cr_assert_eq(info.rows, at[0].rows * N_OPTS);

	/* Keep training, insert more rows, create and drop tables. */
	for (int k = 0; k < N_OPTS; k++)
		for (uint32_t s = 10; s < 13; s++)
			train(db, t[k], 4000, 2500, s);
	make_table(db, "later", DIM, EMDB_OPT_SGD, EMDB_INIT_ZEROS, 0, 0);
	cr_assert_eq(emdb_table_drop(db, t[1]), 0);

	emdb_ckpt_info rinfo;
	cr_assert_eq(emdb_restore(db, st, 0, &rinfo), 0, "%s", emdb_last_error());
	cr_assert_eq(rinfo.id, 1);
	size_t n;
	cr_assert_eq(emdb_table_list(db, NULL, 0, &n), 0);
	cr_assert_eq(n, N_OPTS, "tables created after the checkpoint are gone, dropped ones back");
	for (int k = 0; k < N_OPTS; k++) {
		take(db, t[k], 4000, &now);
		assert_same(&at[k], &now, emdb_optimizer_name(all_opts[k]));
		drop_snap(&now);
		emdb_table_info ti;
		cr_assert_eq(emdb_table_describe(db, t[k], &ti), 0);
		cr_assert_eq(ti.config.optimizer.kind, all_opts[k]);
		cr_assert_eq(ti.config.init.kind, EMDB_INIT_UNIFORM);
		cr_assert_eq(ti.config.seed, 1234);
	}
	/* Training goes on from the restored state exactly as from the
	 * original: a fresh database restored from the same checkpoint and
	 * trained the same way ends bit-identical. */
	emdb_db *db2 = open_db(32);
	cr_assert_eq(emdb_restore(db2, st, 1, NULL), 0, "%s", emdb_last_error());
	for (int k = 0; k < N_OPTS; k++) {
		train(db, t[k], 5000, 1000, 99);
		train(db2, t[k], 5000, 1000, 99);
		snap a, b;
		take(db, t[k], 5000, &a);
		take(db2, t[k], 5000, &b);
		assert_same(&a, &b, "trained after restore");
		drop_snap(&a);
		drop_snap(&b);
		drop_snap(&at[k]);
	}
	/* New tables get ids after the restored ones. */
	uint32_t nid = make_table(db2, "fresh", DIM, EMDB_OPT_SGD, EMDB_INIT_ZEROS, 0, 0);
	cr_assert_gt(nid, t[N_OPTS - 1]);
	emdb_db_close(db2);
	emdb_db_close(db);
	emdb_store_close(st);
	rm_rf(dir);
	free(dir);
}

/* ---- incremental chains ---------------------------------------------- */

Test(ckpt, incremental_chain_restores_each_link_exactly)
{
	char *dir = make_tmpdir();
	emdb_store *st = open_store(dir);
	emdb_db *db = open_db(4);
	uint32_t a = opt_table(db, 3); /* adam */
	uint32_t b = opt_table(db, 0); /* sgd */
	enum { LINKS = 4 };
	snap sa[LINKS], sb[LINKS];
	uint64_t ids[LINKS];
	uint64_t range = 2000;
	for (int l = 0; l < LINKS; l++) {
		/* Between links: new rows (range grows), some updated, most untouched. */
		train(db, a, range, 300, (uint32_t)l);
		if (l != 2)
			train(db, b, range, 200, (uint32_t)l + 50);
		emdb_ckpt_info info;
		int rc = emdb_checkpoint(db, st, l ? EMDB_CKPT_INCREMENTAL : EMDB_CKPT_FULL, &info);
		cr_assert_eq(rc, 0, "link %d: %s", l, emdb_last_error());
		ids[l] = info.id;
		cr_assert_eq(info.parent, l ? ids[l - 1] : 0);
		cr_assert_eq(info.base, ids[0]);
		if (l)
			cr_assert_lt(info.rows, info.rows_total, "an incremental writes only changed rows");
		take(db, a, range + 500, &sa[l]);
		take(db, b, range + 500, &sb[l]);
		cr_assert_eq(info.rows_total, sa[l].rows + sb[l].rows);
		range += 400;
	}
	/* A table created after the full checkpoint is written whole in the
	 * incremental that first sees it. */
	uint32_t c = make_table(db, "late", DIM, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, -1, 1);
	train(db, c, 100, 50, 7);
	train(db, a, range, 300, 77);
	emdb_ckpt_info last;
	cr_assert_eq(emdb_checkpoint(db, st, EMDB_CKPT_INCREMENTAL, &last), 0, "%s", emdb_last_error());
	snap sc, sa_last;
	take(db, c, 100, &sc);
	take(db, a, range + 500, &sa_last);

	for (int l = 0; l < LINKS; l++) {
		emdb_db *r = open_db(16);
		cr_assert_eq(emdb_restore(r, st, ids[l], NULL), 0, "link %d: %s", l, emdb_last_error());
		snap x;
		take(r, a, sa[l].range, &x);
		assert_same(&sa[l], &x, "table a");
		drop_snap(&x);
		take(r, b, sb[l].range, &x);
		assert_same(&sb[l], &x, "table b");
		drop_snap(&x);
		emdb_db_close(r);
		drop_snap(&sa[l]);
		drop_snap(&sb[l]);
	}
	emdb_db *r = open_db(16);
	cr_assert_eq(emdb_restore(r, st, 0, NULL), 0, "%s", emdb_last_error());
	snap x;
	take(r, c, 100, &x);
	assert_same(&sc, &x, "late table");
	drop_snap(&x);
	take(r, a, sa_last.range, &x);
	assert_same(&sa_last, &x, "table a at the last link");
	drop_snap(&x);

	/* The restored database extends the chain: its next incremental
	 * holds only what changed since. */
	train(r, b, 50, 10, 3);
	emdb_ckpt_info more;
	cr_assert_eq(emdb_checkpoint(r, st, EMDB_CKPT_INCREMENTAL, &more), 0, "%s", emdb_last_error());
	cr_assert_eq(more.parent, last.id);
	cr_assert_leq(more.rows, 10);
	emdb_db_close(r);
	drop_snap(&sc);
	drop_snap(&sa_last);
	emdb_db_close(db);
	emdb_store_close(st);
	rm_rf(dir);
	free(dir);
}

Test(ckpt, incremental_needs_a_previous_checkpoint)
{
	char *dir = make_tmpdir();
	emdb_store *st = open_store(dir);
	emdb_db *db = open_db(4);
	opt_table(db, 0);
	cr_assert_eq(emdb_checkpoint(db, st, EMDB_CKPT_INCREMENTAL, NULL), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "full checkpoint first"), "%s", emdb_last_error());
	size_t n;
	cr_assert_eq(emdb_store_list(st, NULL, 0, &n), 0);
	cr_assert_eq(n, 0, "a refused checkpoint leaves nothing");
	cr_assert_eq(emdb_checkpoint(db, st, EMDB_CKPT_FULL, NULL), 0);
	cr_assert_eq(emdb_store_delete(st, 2), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_store_delete(st, 1), 0);
	cr_assert_eq(emdb_checkpoint(db, st, EMDB_CKPT_INCREMENTAL, NULL), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "deleted"), "%s", emdb_last_error());
	cr_assert_eq(emdb_checkpoint(db, st, (emdb_ckpt_kind)7, NULL), EMDB_ERR_INVALID);
	emdb_db_close(db);
	emdb_store_close(st);
	rm_rf(dir);
	free(dir);
}

/* ---- delete, retain, reopen ------------------------------------------ */

Test(ckpt, delete_and_retain_keep_chains_whole)
{
	char *dir = make_tmpdir();
	emdb_store *st = open_store(dir);
	emdb_db *db = open_db(4);
	uint32_t t = opt_table(db, 0);
	/* 1 full, 2 incr, 3 incr, 4 full, 5 incr */
	emdb_ckpt_kind kinds[5] = { EMDB_CKPT_FULL, EMDB_CKPT_INCREMENTAL, EMDB_CKPT_INCREMENTAL,
				    EMDB_CKPT_FULL, EMDB_CKPT_INCREMENTAL };
	for (int i = 0; i < 5; i++) {
		train(db, t, 1000, 100, (uint32_t)i);
		cr_assert_eq(emdb_checkpoint(db, st, kinds[i], NULL), 0, "%s", emdb_last_error());
	}
	cr_assert_eq(emdb_store_delete(st, 4), EMDB_ERR_BUSY);
	cr_assert(strstr(emdb_last_error(), "5"), "names the dependent: %s", emdb_last_error());
	uint32_t gone = 0;
	cr_assert_eq(emdb_store_retain(st, 1, &gone), 0);
	cr_assert_eq(gone, 3, "1-3 go, 4 stays for 5");
	emdb_ckpt_info v[8];
	size_t n;
	cr_assert_eq(emdb_store_list(st, v, 8, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(v[0].id, 4);
	cr_assert_eq(v[1].id, 5);
	cr_assert_eq(emdb_store_retain(st, 0, NULL), EMDB_ERR_INVALID);

	/* Reopen: ids continue, checkpoints still restore. */
	snap before, after;
	take(db, t, 1000, &before);
	emdb_store_close(st);
	st = open_store(dir);
	emdb_ckpt_info info;
	cr_assert_eq(emdb_checkpoint(db, st, EMDB_CKPT_FULL, &info), 0);
	cr_assert_eq(info.id, 6);
	emdb_db *r = open_db(4);
	cr_assert_eq(emdb_restore(r, st, 5, NULL), 0, "%s", emdb_last_error());
	take(r, t, 1000, &after);
	assert_same(&before, &after, "after reopen");
	drop_snap(&before);
	drop_snap(&after);
	cr_assert_eq(emdb_store_get(st, 0, &info), 0);
	cr_assert_eq(info.id, 6);
	cr_assert_eq(emdb_store_get(st, 3, &info), EMDB_ERR_INVALID);
	emdb_db_close(r);
	emdb_db_close(db);
	emdb_store_close(st);
	rm_rf(dir);
	free(dir);
}

/* ---- corruption -------------------------------------------------------- */

/* Path of the largest .sst file under dir/rocksdb (the row data; the
 * manifests have small files of their own), into out. */
static int find_sst(const char *dir, char *out, size_t cap)
{
	char d[512], best[256] = "";
	snprintf(d, sizeof(d), "%s/rocksdb", dir);
	DIR *dd = opendir(d);
	cr_assert_not_null(dd);
	struct dirent *e;
	off_t most = -1;
	while ((e = readdir(dd)) != NULL) {
		size_t l = strlen(e->d_name);
		struct stat sb;
		if (l < 5 || l >= sizeof(best) || strcmp(e->d_name + l - 4, ".sst") ||
		    fstatat(dirfd(dd), e->d_name, &sb, 0) != 0 || sb.st_size <= most)
			continue;
		most = sb.st_size;
		memcpy(best, e->d_name, l + 1);
	}
	closedir(dd);
	snprintf(out, cap, "%s/%s", d, best);
	return best[0] != 0;
}

static void flip_byte(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	cr_assert_geq(fd, 0);
	uint8_t b;
	cr_assert_eq(pread(fd, &b, 1, at), 1);
	b ^= 0x5a;
	cr_assert_eq(pwrite(fd, &b, 1, at), 1);
	close(fd);
}

Test(ckpt, a_flipped_byte_is_reported_and_nothing_is_loaded)
{
	char *dir = make_tmpdir();
	emdb_store *st = open_store(dir);
	emdb_db *db = open_db(4);
	uint32_t t = opt_table(db, 3);
	train(db, t, 20000, 20000, 1);
	cr_assert_eq(emdb_checkpoint(db, st, EMDB_CKPT_FULL, NULL), 0, "%s", emdb_last_error());
	emdb_store_close(st);

	char sst[600];
	cr_assert(find_sst(dir, sst, sizeof(sst)));
	struct stat sb;
	cr_assert_eq(stat(sst, &sb), 0);
	flip_byte(sst, sb.st_size / 3); /* inside the row data */

	/* The database keeps what it has: a different state, so a partial
	 * load would show. */
	train(db, t, 20000, 5000, 2);
	snap before, after;
	take(db, t, 20000, &before);
	st = open_store(dir);
	int rc = emdb_restore(db, st, 0, NULL);
	cr_assert_eq(rc, EMDB_ERR_CORRUPT, "rc %d: %s", rc, emdb_last_error());
	cr_assert(strlen(emdb_last_error()) > 10);
	take(db, t, 20000, &after);
	assert_same(&before, &after, "untouched after a failed restore");
	drop_snap(&before);
	drop_snap(&after);
	emdb_db_close(db);
	emdb_store_close(st);
	rm_rf(dir);
	free(dir);
}

Test(ckpt, a_missing_file_is_reported)
{
	char *dir = make_tmpdir();
	emdb_store *st = open_store(dir);
	emdb_db *db = open_db(4);
	uint32_t t = opt_table(db, 0);
	train(db, t, 5000, 5000, 1);
	cr_assert_eq(emdb_checkpoint(db, st, EMDB_CKPT_FULL, NULL), 0);
	emdb_store_close(st);
	char sst[600];
	cr_assert(find_sst(dir, sst, sizeof(sst)));
	cr_assert_eq(unlink(sst), 0);
	snap before, after;
	take(db, t, 5000, &before);
	emdb_store *st2 = NULL;
	int rc = emdb_store_open(dir, &st2);
	if (rc == EMDB_OK) {
		rc = emdb_restore(db, st2, 0, NULL);
		emdb_store_close(st2);
	}
	cr_assert(rc == EMDB_ERR_CORRUPT || rc == EMDB_ERR_IO, "rc %d", rc);
	cr_assert(strstr(emdb_last_error(), ".sst") || strstr(emdb_last_error(), "missing") ||
		  strstr(emdb_last_error(), "No such file"), "%s", emdb_last_error());
	take(db, t, 5000, &after);
	assert_same(&before, &after, "untouched");
	drop_snap(&before);
	drop_snap(&after);
	emdb_db_close(db);
	rm_rf(dir);
	free(dir);
}

/* ---- the layout, read by RocksDB's ldb --------------------------------- */

Test(ckpt, ldb_reads_manifests_and_rows)
{
	if (system("command -v ldb >/dev/null 2>&1") != 0)
		cr_skip_test("ldb (Debian package rocksdb-tools) is not installed: run tools/deps.sh");
	char *dir = make_tmpdir();
	emdb_store *st = open_store(dir);
	emdb_db *db = open_db(4);
	uint32_t t = make_table(db, "ldbtab", 4, EMDB_OPT_SGD, EMDB_INIT_ZEROS, 0, 0);
	uint64_t id = 0xABCDEF;
	float v[4] = { 1.5f, -2.0f, 0.25f, 8.0f };
	cr_assert_eq(emdb_push(db, t, &id, 1, 4, v), 0);
	cr_assert_eq(emdb_update(db, t, NULL), 0);
	float want[4];
	cr_assert_eq(emdb_lookup(db, t, &id, 1, 4, want, NULL), 0);
	cr_assert_eq(emdb_checkpoint(db, st, EMDB_CKPT_FULL, NULL), 0);
	emdb_store_close(st);

	char cmd[1024], line[8192];
	snprintf(cmd, sizeof(cmd),
		 "ldb --db='%s/rocksdb' --column_family=emdb_rows --hex scan 2>&1", dir);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	int rows = 0;
	char got[8192] = "";
	while (fgets(line, sizeof(line), p)) {
		if (!strncmp(line, "0x", 2)) {
			rows++;
			snprintf(got, sizeof(got), "%s", line);
		}
	}
	pclose(p);
	cr_assert_eq(rows, 1, "one row block: %s", got);
	/* key: ckpt 1, table t, block 0 (big-endian) */
	char key[64];
	snprintf(key, sizeof(key), "0x0000000000000001%08X0000000000000000 : 0x", t);
	cr_assert(!strncmp(got, key, strlen(key)), "key: %s", got);
	/* value: header, the ID (LE), then the floats (LE) */
	const char *val = got + strlen(key);
	char hexid[17], hexrow[33];
	uint8_t b[16];
	memcpy(b, &id, 8);
	for (int i = 0; i < 8; i++)
		sprintf(hexid + 2 * i, "%02X", b[i]);
	memcpy(b, want, 16);
	for (int i = 0; i < 16; i++)
		sprintf(hexrow + 2 * i, "%02X", b[i]);
	cr_assert(!strncmp(val, "454D424B01000000", 16), "block magic: %.16s", val);
	cr_assert(!strncmp(val + 48, hexid, 16), "id: %.16s", val + 48);
	cr_assert(!strncmp(val + 64, hexrow, 32), "row: %.32s vs %s", val + 64, hexrow);

	snprintf(cmd, sizeof(cmd),
		 "ldb --db='%s/rocksdb' --column_family=emdb_meta --hex scan 2>&1 | grep -c '^0x636B70743A'", dir);
	p = popen(cmd, "r");
	cr_assert(fgets(line, sizeof(line), p));
	pclose(p);
	cr_assert_eq(atoi(line), 1, "one manifest under ckpt:");
	emdb_db_close(db);
	rm_rf(dir);
	free(dir);
}

/* ---- one job at a time -------------------------------------------------- */

Test(ckpt, jobs_report_progress_and_run_once)
{
	char *dir = make_tmpdir();
	emdb_store *st = open_store(dir);
	emdb_db *db = open_db(4);
	uint32_t t = opt_table(db, 0);
	train(db, t, 50000, 50000, 1);
	emdb_job *j;
	cr_assert_eq(emdb_job_checkpoint(db, st, EMDB_CKPT_FULL, &j), 0);
	emdb_progress p;
	emdb_job_progress(j, &p);
	cr_assert_eq(p.phase, EMDB_PHASE_PENDING);
	emdb_ckpt_info info;
	cr_assert_eq(emdb_job_run(j, &info), 0);
	emdb_job_progress(j, &p);
	cr_assert_eq(p.phase, EMDB_PHASE_DONE);
	cr_assert_eq(p.rows_done, p.rows_total);
	cr_assert_eq(p.rows_total, info.rows);
	cr_assert_eq(p.bytes_done, info.bytes);
	cr_assert_eq(p.ckpt_id, info.id);
	cr_assert_gt(p.elapsed_ns, 0);
	cr_assert_str_eq(emdb_job_phase_name(p.phase), "done");
	cr_assert_eq(emdb_job_run(j, &info), EMDB_ERR_INVALID);
	emdb_job_free(j);
	emdb_db_close(db);
	emdb_store_close(st);
	rm_rf(dir);
	free(dir);
}

/* ---- copy on write ------------------------------------------------------ */

typedef struct job_arg {
	emdb_job *job;
	emdb_ckpt_info info;
	int rc;
} job_arg;

static void *run_job(void *p)
{
	job_arg *a = p;
	a->rc = emdb_job_run(a->job, &a->info);
	return NULL;
}

/* Updates that land while the rows are being written change the live
 * rows at once, yet the checkpoint holds every row as it was at the
 * switch: the rows they touched first were kept aside. */
Test(ckpt, updates_during_the_write_do_not_leak_into_it)
{
	enum { N = 400000, D = 16, HOT = 2000 };
	char *dir = make_tmpdir();
	emdb_store *st = open_store(dir);
	emdb_db *db = open_db(8);
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	strcpy(c.name, "cow");
	c.dim = D;
	c.optimizer.lr = 1.0;
	uint32_t t;
	cr_assert_eq(emdb_table_create(db, &c, &t), 0);
	uint64_t *ids = malloc((size_t)N * 8);
	for (uint64_t i = 0; i < N; i++)
		ids[i] = scramble(i);
	emdb_ticket *tk;
	cr_assert_eq(emdb_prefetch(db, t, ids, N, &tk), 0);
	emdb_ticket_free(tk);
	float *g = malloc((size_t)HOT * D * 4);
	for (int i = 0; i < HOT * D; i++)
		g[i] = 1.0f;

	int overlapped = 0;
	for (int attempt = 0; attempt < 10 && !overlapped; attempt++) {
		job_arg a = { 0 };
		cr_assert_eq(emdb_job_checkpoint(db, st, EMDB_CKPT_FULL, &a.job), 0);
		pthread_t th;
		pthread_create(&th, NULL, run_job, &a);
		emdb_progress p;
		do
			emdb_job_progress(a.job, &p);
		while (p.phase < EMDB_PHASE_WRITE);
		/* The hot rows are the last ones numbered: written last. */
		for (int k = 0; k < 3; k++) {
			cr_assert_eq(emdb_push(db, t, ids + N - HOT, HOT, D, g), 0);
			cr_assert_eq(emdb_update(db, t, NULL), 0);
		}
		emdb_job_progress(a.job, &p);
		overlapped = p.phase == EMDB_PHASE_WRITE;
		pthread_join(th, NULL);
		cr_assert_eq(a.rc, 0, "%s", emdb_last_error());
		emdb_job_progress(a.job, &p);
		if (overlapped)
			cr_assert_gt(p.cow_rows, 0);
		emdb_job_free(a.job);

		emdb_db *r = open_db(8);
		cr_assert_eq(emdb_restore(r, st, a.info.id, NULL), 0, "%s", emdb_last_error());
		emdb_table_info ti;
		cr_assert_eq(emdb_table_describe(r, t, &ti), 0);
		float want = -(float)ti.stats.step;
		float *v = malloc((size_t)HOT * D * 4);
		cr_assert_eq(emdb_lookup(r, t, ids + N - HOT, HOT, D, v, NULL), 0);
		for (int i = 0; i < HOT * D; i++)
			cr_assert_eq(v[i], want, "step %llu: %g", (unsigned long long)ti.stats.step, (double)v[i]);
		free(v);
		emdb_db_close(r);
	}
	if (!overlapped)
		cr_skip_test("the checkpoint never overlapped an Update on this machine");
	free(ids);
	free(g);
	emdb_db_close(db);
	emdb_store_close(st);
	rm_rf(dir);
	free(dir);
}
