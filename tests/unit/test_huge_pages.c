/*
 * test_huge_pages.c - emdb_alloc_set_huge_pages: regions from the kernel's
 * pool of explicit huge pages, or from ordinary memory where TRY finds no
 * room, or a clean NOMEM where ON finds none; a table and a restore in
 * pool memory hold exactly what ordinary memory holds.
 *
 * The pool is the machine's: a test that needs pages in it takes 16 more
 * for its own run where it may (root: /proc/sys/vm/nr_hugepages) and puts
 * the count back in its .fini, and otherwise skips, saying so.  The "no
 * room" cases ask for more than the pool has free, so they hold whatever
 * the pool holds.
 */
#define _GNU_SOURCE /* tests/lib/tmpdir.h: nftw */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/checkpoint.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include "base/alloc_int.h"
#include "tests/lib/helpers.h"
#include "tests/lib/tmpdir.h"

#define HUGE ((size_t)2 << 20)
#define NR_PATH "/proc/sys/vm/nr_hugepages"
#define POOL_NEED 16 /* pages the pool tests use: 32 MiB */

static long meminfo(const char *key)
{
	char line[256];
	long v = -1;
	size_t n = strlen(key);
	FILE *f = fopen("/proc/meminfo", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* Pool pages a new region can still have: free and not promised to a
 * mapping already made (the kernel reserves at mmap, takes at first
 * write). */
static long pool_avail(void)
{
	long f = meminfo("HugePages_Free"), r = meminfo("HugePages_Rsvd");
	return f < 0 || r < 0 ? -1 : f - r;
}

static long read_nr(void)
{
	long v = -1;
	FILE *f = fopen(NR_PATH, "r");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static int write_nr(long v)
{
	FILE *f = fopen(NR_PATH, "w");
	if (!f)
		return -1;
	int ok = fprintf(f, "%ld\n", v) > 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static long nr_before = -1; /* the pool's size before this test grew it */

static void pool_restore(void)
{
	emdb_alloc_set_huge_pages(EMDB_HUGE_OFF);
	if (nr_before >= 0)
		cr_assert_eq(write_nr(nr_before), 0, "could not put vm.nr_hugepages back to %ld", nr_before);
}

/* POOL_NEED free pages in the pool, taken for this run where it lacks
 * them and the file is writable; else the test is skipped. */
static void pool_need(void)
{
	if (pool_avail() >= POOL_NEED)
		return;
	long nr = read_nr();
	if (nr >= 0 && write_nr(nr + POOL_NEED) == 0) {
		nr_before = nr;
		if (pool_avail() >= POOL_NEED)
			return;
	}
	cr_skip_test("no room in the kernel's huge page pool (%ld pages free and not reserved) and %s is not writable "
		     "here: run as root, or reserve pages with sysctl vm.nr_hugepages=%d",
		     pool_avail(), NR_PATH, POOL_NEED);
}

/* More bytes than the pool has free, in whole huge pages. */
static size_t over_the_pool(void)
{
	long free_pages = pool_avail();
	return ((size_t)(free_pages > 0 ? free_pages : 0) + 1) * HUGE;
}

Test(huge_pages, mode_names_and_bad_mode)
{
	cr_assert_eq(emdb_alloc_huge_pages(), EMDB_HUGE_OFF, "off by default");
	cr_assert_str_eq(emdb_huge_pages_name(EMDB_HUGE_OFF), "off");
	cr_assert_str_eq(emdb_huge_pages_name(EMDB_HUGE_TRY), "try");
	cr_assert_str_eq(emdb_huge_pages_name(EMDB_HUGE_ON), "on");
	cr_assert_null(emdb_huge_pages_name((emdb_huge_pages)3));
	cr_assert_eq(emdb_alloc_set_huge_pages(EMDB_HUGE_TRY), EMDB_OK);
	cr_assert_eq(emdb_alloc_huge_pages(), EMDB_HUGE_TRY);
	cr_assert_eq(emdb_alloc_set_huge_pages((emdb_huge_pages)7), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "off, try or on"), "%s", emdb_last_error());
	cr_assert_eq(emdb_alloc_huge_pages(), EMDB_HUGE_TRY, "a bad mode changes nothing");
	emdb_huge_pages m = EMDB_HUGE_TRY;
	cr_assert_eq(emdb_huge_pages_parse("ON", &m), EMDB_OK);
	cr_assert_eq(m, EMDB_HUGE_ON);
	cr_assert_eq(emdb_huge_pages_parse("off", &m), EMDB_OK);
	cr_assert_eq(m, EMDB_HUGE_OFF);
	cr_assert_eq(emdb_huge_pages_parse("always", &m), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_huge_pages_parse(NULL, &m), EMDB_ERR_INVALID);
	cr_assert_eq(m, EMDB_HUGE_OFF, "a bad word changes nothing");
	cr_assert_eq(emdb_alloc_pool_free(), pool_avail(), "the library reads the pool as the test does");
	cr_assert_eq(emdb_alloc_pool_total(), meminfo("HugePages_Total"));
	cr_assert_eq(emdb_alloc_set_huge_pages(EMDB_HUGE_OFF), EMDB_OK);
}

Test(huge_pages, on_without_room_fails_cleanly, .fini = pool_restore)
{
	size_t len = over_the_pool(), used = emdb_alloc_bytes();
	uint64_t maps = emdb_alloc_huge_maps();
	cr_assert_eq(emdb_alloc_set_huge_pages(EMDB_HUGE_ON), EMDB_OK);
	cr_assert_null(emdb_map(len));
	cr_assert(strstr(emdb_last_error(), "vm.nr_hugepages"), "%s", emdb_last_error());
	cr_assert_eq(emdb_alloc_bytes(), used, "a refused region is not counted");
	cr_assert_eq(emdb_alloc_huge_maps(), maps);

	/* A table whose first chunk does not fit fails the call with NOMEM
	 * and is still there, empty, once ordinary memory is allowed. */
	emdb_db *db = open_db(16);
	uint32_t t = make_table(db, "t", 8, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, 0, 1);
	uint64_t id = 42;
	float row[8];
	if (pool_avail() == 0) {
		cr_assert_eq(emdb_pull(db, t, &id, 1, 8, row), EMDB_ERR_NOMEM);
		emdb_table_info info;
		cr_assert_eq(emdb_table_describe(db, t, &info), EMDB_OK);
		cr_assert_eq(info.stats.rows, 0, "nothing half-inserted");
	}
	cr_assert_eq(emdb_alloc_set_huge_pages(EMDB_HUGE_OFF), EMDB_OK);
	cr_assert_eq(emdb_pull(db, t, &id, 1, 8, row), EMDB_OK, "%s", emdb_last_error());
	emdb_db_close(db);
}

Test(huge_pages, try_without_room_takes_ordinary_memory, .fini = pool_restore)
{
	size_t len = over_the_pool(), used = emdb_alloc_bytes();
	uint64_t falls = emdb_alloc_huge_fallbacks();
	cr_assert_eq(emdb_alloc_set_huge_pages(EMDB_HUGE_TRY), EMDB_OK);
	unsigned char *p = emdb_map(len);
	cr_assert_not_null(p, "%s", emdb_last_error());
	cr_assert_eq(emdb_alloc_huge_fallbacks(), falls + 1);
	cr_assert_eq(emdb_alloc_bytes(), used + len);
	cr_assert_eq((uintptr_t)p % HUGE, 0, "aligned to 2 MiB");
	for (size_t off = 0; off < len; off += 4096)
		cr_assert_eq(p[off], 0, "zero-filled");
	memset(p, 0xab, len);
	emdb_unmap(p, len);
	cr_assert_eq(emdb_alloc_bytes(), used);
}

Test(huge_pages, pool_regions_are_counted_and_given_back, .fini = pool_restore)
{
	pool_need();
	long free0 = pool_avail();
	size_t used = emdb_alloc_bytes();
	uint64_t maps = emdb_alloc_huge_maps();
	cr_assert_eq(emdb_alloc_set_huge_pages(EMDB_HUGE_ON), EMDB_OK);
	/* A row chunk just under 2 MiB (2730 rows of 768 bytes) takes one
	 * whole huge page; a region that rounding would grow by more than an
	 * eighth stays in ordinary memory even under ON. */
	size_t chunk = 2730 * 768;
	unsigned char *p = emdb_map(chunk);
	cr_assert_not_null(p, "%s", emdb_last_error());
	cr_assert_eq(emdb_alloc_huge_maps(), maps + 1);
	cr_assert_eq(emdb_alloc_bytes(), used + HUGE);
	cr_assert_eq(pool_avail(), free0 - 1, "one pool page promised at the mapping");
	cr_assert_eq((uintptr_t)p % HUGE, 0);
	for (size_t off = 0; off < chunk; off += 4096)
		cr_assert_eq(p[off], 0, "zero-filled");
	memset(p, 0x5a, chunk);
	emdb_map_populate(p, chunk);
	cr_assert_eq(p[chunk - 1], 0x5a, "populate keeps the bytes");
	unsigned char *small = emdb_map(HUGE + 4096);
	cr_assert_not_null(small, "%s", emdb_last_error());
	cr_assert_eq(emdb_alloc_huge_maps(), maps + 1, "3 MiB of pool for 2 MiB + 4 KiB: not taken");
	emdb_unmap(small, HUGE + 4096);
	emdb_unmap(p, chunk);
	cr_assert_eq(pool_avail(), free0, "the page went back to the pool");
	cr_assert_eq(emdb_alloc_bytes(), used);
}

enum { DIM = 16, N = 30000 };

/* Train a table for three steps; the same IDs and gradients every time. */
static void train(emdb_db *db, uint32_t t)
{
	uint64_t *ids = malloc(N * sizeof(uint64_t));
	float *g = malloc((size_t)N * DIM * sizeof(float));
	for (int step = 0; step < 3; step++) {
		for (int i = 0; i < N; i++) {
			ids[i] = scramble((uint64_t)(i % (N / 2 + step * 1000)));
			for (int c = 0; c < DIM; c++)
				g[i * DIM + c] = 0.01f * (float)((i + c + step) % 7) - 0.03f;
		}
		cr_assert_eq(emdb_push(db, t, ids, N, DIM, g), EMDB_OK, "%s", emdb_last_error());
		cr_assert_eq(emdb_update(db, t, NULL), EMDB_OK, "%s", emdb_last_error());
	}
	free(ids);
	free(g);
}

static float *pull_all(emdb_db *db, uint32_t t)
{
	uint64_t *ids = malloc(N * sizeof(uint64_t));
	float *out = malloc((size_t)N * DIM * sizeof(float));
	for (int i = 0; i < N; i++)
		ids[i] = scramble((uint64_t)i);
	cr_assert_eq(emdb_pull(db, t, ids, N, DIM, out), EMDB_OK, "%s", emdb_last_error());
	free(ids);
	return out;
}

/* 30000 rows of 16 floats and Adam's 32 floats of state (192 B a row):
 * three chunks of 2 MiB, and index arrays, in the pool; the rows, then a
 * checkpoint restored into pool memory, equal a twin table's in ordinary
 * memory bit for bit. */
Test(huge_pages, a_table_and_its_restore_in_pool_memory, .fini = pool_restore)
{
	pool_need();
	long free0 = pool_avail();
	emdb_db *plain = open_db(16);
	uint32_t tp = make_table(plain, "t", DIM, EMDB_OPT_ADAM, EMDB_INIT_NORMAL, 0, 1);
	train(plain, tp);
	float *want = pull_all(plain, tp);

	cr_assert_eq(emdb_alloc_set_huge_pages(EMDB_HUGE_ON), EMDB_OK);
	uint64_t maps = emdb_alloc_huge_maps();
	emdb_db *db = open_db(16);
	uint32_t t = make_table(db, "t", DIM, EMDB_OPT_ADAM, EMDB_INIT_NORMAL, 0, 1);
	train(db, t);
	cr_assert_geq(emdb_alloc_huge_maps() - maps, 3, "the chunks came from the pool");
	cr_assert_lt(pool_avail(), free0);
	float *got = pull_all(db, t);
	cr_assert_eq(memcmp(got, want, (size_t)N * DIM * sizeof(float)), 0);
	free(got);

	char dir[] = "/tmp/emdb-huge-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	emdb_store *st;
	cr_assert_eq(emdb_store_open(dir, &st), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(emdb_checkpoint(db, st, EMDB_CKPT_FULL, NULL), EMDB_OK, "%s", emdb_last_error());
	emdb_db_close(db);
	maps = emdb_alloc_huge_maps();
	emdb_db *back = open_db(16);
	cr_assert_eq(emdb_restore(back, st, 0, NULL), EMDB_OK, "%s", emdb_last_error());
	cr_assert_geq(emdb_alloc_huge_maps() - maps, 3, "the restore's chunks came from the pool");
	got = pull_all(back, t);
	cr_assert_eq(memcmp(got, want, (size_t)N * DIM * sizeof(float)), 0, "restored rows differ");
	emdb_table_info a, b;
	cr_assert_eq(emdb_table_describe(back, t, &a), EMDB_OK);
	cr_assert_eq(emdb_table_describe(plain, tp, &b), EMDB_OK);
	cr_assert_eq(a.stats.rows, b.stats.rows);
	cr_assert_eq(a.stats.step, b.stats.step);
	free(got);
	emdb_db_close(back);
	emdb_store_close(st);
	cr_assert_eq(tmpdir_remove(dir), 0);
	cr_assert_eq(pool_avail(), free0, "every pool page went back");
	free(want);
	emdb_db_close(plain);
}
