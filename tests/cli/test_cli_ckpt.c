/*
 * test_cli_ckpt.c - emdb-cli's checkpoint commands as a script uses them
 * (checkpoint, checkpoint list, restore, job, checkpoint delete, their
 * --json output and their usage errors) against a server with a store in
 * a fresh data directory, and against one without a store.
 *
 * Servers and emdb-cli runs as in tests/lib/cli_run.h.
 */
#define _GNU_SOURCE /* tests/lib/tmpdir.h: nftw */
#include "tests/lib/cli_run.h"

/* ---- checkpoints ------------------------------------------------------------ */

/* A server with a store in a fresh directory of its own.  The directory
 * is removed by srv_down_persist (.fini, which runs after a failed
 * assertion too) and, should the start itself fail, at exit. */
static char data_dir[64];

static void data_dir_remove(void)
{
	tmpdir_remove(data_dir);
	data_dir[0] = 0;
}

static void srv_up_persist(void)
{
	strcpy(data_dir, "/tmp/emdb-cli-ckpt-XXXXXX");
	cr_assert_not_null(mkdtemp(data_dir), "mkdtemp: %s", strerror(errno));
	atexit(data_dir_remove);
	const char *const flags[] = { "--data-dir", data_dir, NULL };
	test_server_start(&srv, flags);
}

static void srv_down_persist(void)
{
	test_server_stop(&srv);
	data_dir_remove();
}

/* Insert the rows first..first+n-1 of table `name` (a Prefetch inserts). */
static void insert_rows(const char *name, uint64_t first, size_t n)
{
	emdb_client *c;
	cr_assert_eq(emdb_client_connect(srv.tcp_uri, NULL, &c), 0, "%s", emdb_client_last_error());
	uint32_t t;
	cr_assert_eq(emdb_client_table_find(c, name, &t), 0);
	uint64_t *ids = emdb_malloc(n * sizeof(*ids));
	cr_assert_not_null(ids);
	for (size_t i = 0; i < n; i++)
		ids[i] = first + i;
	emdb_client_ticket *tk = NULL;
	int rc = emdb_client_prefetch(c, t, ids, n, &tk);
	cr_assert_eq(rc, 0, "prefetch: %s", emdb_client_last_error());
	emdb_client_ticket_free(tk);
	emdb_free(ids);
	emdb_client_close(c);
}

/* Run `job N` until the job is no longer running; its last JSON. */
static jv *job_until_done(const char *n)
{
	for (int tries = 0; tries < 600; tries++) {
		cli_run r = CLI_JSON("job", n);
		EXPECT(r, 0);
		jv *v = json_out(&r);
		run_free(&r);
		if (strcmp(jstr(v, "state"), "running"))
			return v;
		test_sleep_ms(50);
	}
	cr_assert_fail("job %s still running after 30 s", n);
	return NULL;
}

Test(cli, checkpoint_list_restore_job_delete, .init = srv_up_persist, .fini = srv_down_persist)
{
	cli_ok(ARGS("table", "create", "ads", "8", "init=uniform:-1,1", "seed=3"));
	cli_ok(ARGS("table", "create", "ctr", "4"));
	insert_rows("ads", 1, 1000);
	insert_rows("ctr", 1, 200);

	/* Nothing yet: an empty list, and an incremental has no parent. */
	cli_run r = CLI("checkpoint", "list");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "(no checkpoints)\n");
	run_free(&r);
	cli_fails(ARGS("checkpoint", "incremental"), 1, "INVALID");

	/* A full checkpoint (the default kind); no bar on a stderr that is
	 * not a terminal. */
	r = CLI("checkpoint");
	EXPECT(r, 0);
	expect_has(r.out, "checkpoint 1 (full): 2 tables, 1200 rows, ");
	expect_has(r.out, " MB/s; Updates paused ");
	cr_assert_str_eq(r.err, "", "stderr: %s", r.err);
	run_free(&r);

	/* 50 new rows, then an incremental of them alone. */
	insert_rows("ads", 5001, 50);
	r = CLI_JSON("checkpoint", "incremental");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert(jbool(v, "ok"));
	cr_assert_eq(jnum(v, "checkpoint.id"), 2);
	cr_assert_str_eq(jstr(v, "checkpoint.kind"), "incremental");
	cr_assert_eq(jnum(v, "checkpoint.parent"), 1);
	cr_assert_eq(jnum(v, "checkpoint.base"), 1);
	cr_assert_eq(jnum(v, "checkpoint.tables"), 2);
	cr_assert_eq(jnum(v, "checkpoint.rows"), 50);
	cr_assert_eq(jnum(v, "checkpoint.rows_total"), 1250);
	cr_assert_gt(jnum(v, "checkpoint.bytes"), 0);
	cr_assert_geq(jnum(v, "seconds"), 0);
	cr_assert_geq(jnum(v, "switch_ms"), 0);
	jget(v, "mb_per_s");
	double job_incr = jnum(v, "job");
	run_free(&r);

	r = CLI("checkpoint", "list");
	EXPECT(r, 0);
	expect_has(r.out, "ID  KIND");
	expect_has(r.out, "CREATED");
	expect_has(r.out, "MAX_STEP");
	cr_assert_not_null(strstr(r.out, "     1  full         "), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "     2  incremental       1  "), "%s", r.out);
	run_free(&r);
	r = CLI_JSON("checkpoint", "list");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jget(v, "checkpoints")->n, 2);
	cr_assert_eq(jnum(v, "checkpoints.0.id"), 1);
	cr_assert_str_eq(jstr(v, "checkpoints.0.kind"), "full");
	cr_assert_eq(jnum(v, "checkpoints.0.rows"), 1200);
	cr_assert_eq(jnum(v, "checkpoints.1.parent"), 1);
	cr_assert_gt(jnum(v, "checkpoints.1.created_ms"), 1.6e12, "Unix milliseconds");
	run_free(&r);

	/* Changes after the checkpoint, which restore latest undoes. */
	insert_rows("ads", 9001, 7);
	cli_ok(ARGS("table", "create", "scratch", "2"));
	r = CLI("restore", "latest");
	EXPECT(r, 0);
	expect_has(r.out, "restored checkpoint 2 (incremental, chain from 1): 2 tables, 1250 rows");
	run_free(&r);
	r = CLI_JSON("table", "list");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jget(v, "tables")->n, 2, "scratch is gone: %s", r.out);
	cr_assert_str_eq(jstr(v, "tables.0.name"), "ads");
	cr_assert_eq(jnum(v, "tables.0.rows"), 1050);
	cr_assert_eq(jnum(v, "tables.1.rows"), 200);
	run_free(&r);

	/* Back to the full one, by id. */
	r = CLI_JSON("restore", "1");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jnum(v, "restored.id"), 1);
	cr_assert_str_eq(jstr(v, "restored.kind"), "full");
	cr_assert_eq(jnum(v, "restored.tables"), 2);
	cr_assert_eq(jnum(v, "restored.rows_total"), 1200);
	double job_restore = jnum(v, "job");
	cr_assert_gt(job_restore, job_incr);
	run_free(&r);

	/* job: the newest by default, or one by number. */
	r = CLI("job");
	EXPECT(r, 0);
	expect_has(r.out, "kind: restore\nstate: done\nphase: done\n");
	expect_has(r.out, "result: checkpoint 1 (full), 2 tables, 1200 rows");
	run_free(&r);
	char num[32];
	snprintf(num, sizeof(num), "%.0f", job_incr);
	r = CLI_JSON("job", num);
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jnum(v, "job"), job_incr);
	cr_assert_str_eq(jstr(v, "kind"), "checkpoint_incremental");
	cr_assert_str_eq(jstr(v, "state"), "done");
	cr_assert_str_eq(jstr(v, "progress.phase"), "done");
	cr_assert_eq(jnum(v, "result.id"), 2);
	cr_assert_eq(jnum(v, "result.rows"), 50);
	run_free(&r);
	r = CLI_JSON("job", "999");
	expect_json_error(&r, 1, "INVALID");
	run_free(&r);

	/* --no-wait: the job's number at once, then `job N` follows it. */
	r = CLI("checkpoint", "full", "--no-wait");
	EXPECT(r, 0);
	unsigned long long nw = 0;
	cr_assert_eq(sscanf(r.out, "started job %llu (checkpoint_full)", &nw), 1, "%s", r.out);
	run_free(&r);
	snprintf(num, sizeof(num), "%llu", nw);
	v = job_until_done(num);
	cr_assert_str_eq(jstr(v, "state"), "done");
	cr_assert_eq(jnum(v, "result.id"), 3);
	cr_assert_eq(jnum(v, "result.rows"), 1200);

	/* Deleting: the full one is needed by its incremental. */
	cli_fails(ARGS("checkpoint", "delete", "1"), 1, "BUSY");
	r = CLI("checkpoint", "delete", "2");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "deleted checkpoint 2\n");
	run_free(&r);
	r = CLI_JSON("checkpoint", "delete", "1");
	EXPECT(r, 0);
	cr_assert_eq(jnum(json_out(&r), "id"), 1);
	run_free(&r);
	r = CLI_JSON("checkpoint", "delete", "1");
	expect_json_error(&r, 1, "INVALID");
	run_free(&r);
	r = CLI_JSON("checkpoint", "list");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jget(v, "checkpoints")->n, 1);
	cr_assert_eq(jnum(v, "checkpoints.0.id"), 3);
	run_free(&r);
	cli_fails(ARGS("restore", "2"), 1, "INVALID");

	/* restore --no-wait. */
	r = CLI_JSON("restore", "latest", "--no-wait");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_str_eq(jstr(v, "kind"), "restore");
	snprintf(num, sizeof(num), "%.0f", jnum(v, "job"));
	run_free(&r);
	v = job_until_done(num);
	cr_assert_str_eq(jstr(v, "state"), "done");
	cr_assert_eq(jnum(v, "result.id"), 3);
}

Test(cli, checkpoint_usage_errors, .init = srv_up_persist, .fini = srv_down_persist)
{
	const char *const *bad[] = {
		ARGS("checkpoint", "frob"),
		ARGS("checkpoint", "full", "incremental"),
		ARGS("checkpoint", "--no-wait", "--no-wait"),
		ARGS("checkpoint", "full", "--no-wait", "x"),
		ARGS("checkpoint", "delete"),
		ARGS("checkpoint", "delete", "x"),
		ARGS("checkpoint", "delete", "0"),
		ARGS("restore"),
		ARGS("restore", "--no-wait"),
		ARGS("restore", "newest"),
		ARGS("restore", "1", "2"),
		ARGS("job", "first"),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cli_fails(bad[i], 2, "USAGE");
	cli_run r = CLI("checkpoint", "frob");
	expect_has(r.err, "unexpected 'frob'");
	run_free(&r);

	/* A fresh server has run no job. */
	r = CLI("job");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "(no job has run on this server)\n");
	run_free(&r);
	r = CLI_JSON("job");
	EXPECT(r, 0);
	cr_assert_str_eq(jstr(json_out(&r), "state"), "idle");
	run_free(&r);

	r = CLI("help", "checkpoint");
	EXPECT(r, 0);
	expect_has(r.out, "checkpoint [full|incremental] [--no-wait]");
	expect_has(r.out, "checkpoint list\n");
	expect_has(r.out, "checkpoint delete ID");
	run_free(&r);
}

Test(cli, checkpoint_without_a_data_dir, .init = srv_up, .fini = srv_down)
{
	cli_run r = CLI("checkpoint");
	EXPECT(r, 1);
	expect_has(r.err, "(error) UNSUPPORTED: ");
	cr_assert_str_eq(r.out, "");
	run_free(&r);
	r = CLI_JSON("checkpoint", "incremental", "--no-wait");
	expect_json_error(&r, 1, "UNSUPPORTED");
	run_free(&r);
	r = CLI_JSON("checkpoint", "list");
	expect_json_error(&r, 1, "UNSUPPORTED");
	run_free(&r);
	cli_fails(ARGS("restore", "latest"), 1, "UNSUPPORTED");
	cli_fails(ARGS("checkpoint", "delete", "1"), 1, "UNSUPPORTED");

	/* Over mem:// there is no store either. */
	r = run_cli_env(NULL, NULL, ARGS("-u", "mem://", "checkpoint"));
	EXPECT(r, 1);
	expect_has(r.err, "(error) UNSUPPORTED: ");
	run_free(&r);
}
