/*
 * test_cli_export.c - `export TABLE FILE` and `import TABLE FILE` against
 * a live server: a trained table exported and imported into a new table
 * gives identical rows (vectors and optimizer state, IDs 0 and 2^64-1
 * among them), the file is the documented format (header fields, one
 * record per row), --no-state moves vectors alone, and a file that does
 * not fit the table, or is cut short, is refused with nothing written.
 */
#define _GNU_SOURCE /* tests/lib/tmpdir.h: nftw */
#include "tests/lib/cli_run.h"
#include "tests/lib/helpers.h"

#define D 6
#define SF (2 * D) /* Adam */
#define N 5000     /* two pages of export and import */

static char dir[64];

static void up(void)
{
	srv_up();
	snprintf(dir, sizeof(dir), "/tmp/emdb-export-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void down(void)
{
	tmpdir_remove(dir);
	srv_down();
}

#define OK(call) cr_assert_eq((call), EMDB_OK, "%s: %s", #call, emdb_client_last_error())

static uint64_t id_of(int i)
{
	return i == 0 ? 0 : i == 1 ? UINT64_MAX : scramble((uint64_t)i);
}

Test(cli_export, export_then_import_gives_identical_rows, .init = up, .fini = down)
{
	emdb_client *c = test_client_open(srv.tcp_uri, 30000);
	cli_ok(ARGS("table", "create", "src", "6", "optimizer=adam", "init=uniform:-1,1", "seed=5"));
	uint32_t src, dst;
	OK(emdb_client_table_find(c, "src", &src));
	static uint64_t ids[N];
	static float g[N * D], v1[N * D], v2[N * D], s1[N * SF], s2[N * SF];
	for (int i = 0; i < N; i++)
		ids[i] = id_of(i);
	for (int step = 0; step < 3; step++) {
		for (int k = 0; k < N * D; k++)
			g[k] = (float)((k + step) % 9) * 0.125f - 0.5f;
		OK(emdb_client_push(c, src, ids, N, D, g));
		OK(emdb_client_update(c, src, NULL));
	}
	char file[128];
	snprintf(file, sizeof(file), "%s/src.rows", dir);
	cli_run r = CLI("export", "src", file);
	EXPECT(r, 0);
	expect_has(r.out, "exported 5000 rows of table src to ");
	expect_has(r.out, "with optimizer state, step 3");
	run_free(&r);

	/* The documented format: header, then N records. */
	FILE *f = fopen(file, "rb");
	cr_assert_not_null(f);
	uint8_t h[64];
	cr_assert_eq(fread(h, 1, 64, f), 64);
	cr_assert_eq(memcmp(h, "EMDBROWS", 8), 0);
	uint32_t u32;
	uint64_t u64;
	memcpy(&u32, h + 8, 4);
	cr_assert_eq(u32, 1, "format version");
	memcpy(&u32, h + 12, 4);
	cr_assert_eq(u32, D);
	memcpy(&u32, h + 16, 4);
	cr_assert_eq(u32, SF);
	memcpy(&u32, h + 20, 4);
	cr_assert_eq(u32, EMDB_OPT_ADAM);
	memcpy(&u64, h + 24, 8);
	cr_assert_eq(u64, 3, "first step");
	memcpy(&u64, h + 40, 8);
	cr_assert_eq(u64, N);
	fseek(f, 0, SEEK_END);
	cr_assert_eq(ftell(f), 64 + (long)N * (8 + 4 * D + 4 * SF));
	fclose(f);

	cli_ok(ARGS("table", "create", "dst", "6", "optimizer=adam"));
	r = CLI_JSON("import", "dst", file);
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert_eq(jnum(v, "rows"), N);
	cr_assert_eq(jbool(v, "state"), true);
	run_free(&r);
	OK(emdb_client_table_find(c, "dst", &dst));
	OK(emdb_client_lookup(c, src, ids, N, D, v1, NULL));
	OK(emdb_client_lookup(c, dst, ids, N, D, v2, NULL));
	cr_assert_eq(memcmp(v1, v2, sizeof(v1)), 0, "imported vectors differ");
	OK(emdb_client_read_state(c, src, ids, N, SF, s1, NULL));
	OK(emdb_client_read_state(c, dst, ids, N, SF, s2, NULL));
	cr_assert_eq(memcmp(s1, s2, sizeof(s1)), 0, "imported state differs");
	emdb_table_info info;
	OK(emdb_client_table_describe(c, dst, &info));
	cr_assert_eq(info.stats.rows, N);

	/* Vectors alone, into an SGD table; with state it is refused. */
	cli_ok(ARGS("table", "create", "plain", "6"));
	r = CLI("import", "plain", file);
	EXPECT(r, 1);
	expect_has(r.err, "import with --no-state");
	run_free(&r);
	OK(emdb_client_table_describe(c, 3, &info));
	cr_assert_eq(info.stats.rows, 0, "a refused import wrote rows");
	cli_ok(ARGS("import", "plain", file, "--no-state"));
	OK(emdb_client_lookup(c, 3, ids, N, D, v2, NULL));
	cr_assert_eq(memcmp(v1, v2, sizeof(v1)), 0);

	/* --no-state export: vectors alone; a wrong dim and a cut file. */
	char file2[128];
	snprintf(file2, sizeof(file2), "%s/plain.rows", dir);
	r = CLI_JSON("export", "plain", file2, "--no-state");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jnum(v, "rows"), N);
	cr_assert_eq(jbool(v, "state"), false);
	run_free(&r);
	cli_ok(ARGS("table", "create", "wide", "7"));
	cli_fails(ARGS("import", "wide", file2), 1, "DIM");
	cr_assert_eq(truncate(file2, 64 + 100 * (8 + 4 * D) + 5), 0);
	cli_fails(ARGS("import", "plain", file2), 1, "INVALID");
	cli_fails(ARGS("export", "nosuch", file2), 1, "NO_TABLE");
	r = run_srv(true, ARGS("export", "src", file2, "--frob"));
	expect_json_error(&r, 2, "USAGE");
	run_free(&r);
	OK(emdb_client_table_describe(c, 4, &info));
	cr_assert_eq(info.stats.rows, 0, "a refused import wrote rows");
	emdb_client_close(c);
}
