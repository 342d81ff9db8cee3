/*
 * test_cli_alter.c - `table alter TABLE KEY=VALUE...` against a live
 * server: the new values show in `table describe` (text and --json) and
 * in the command's own output; keys fixed at creation, keys the optimizer
 * does not take, bad numbers and no keys at all are usage errors (exit 2)
 * that change nothing; values the server refuses come back as its
 * INVALID (exit 1), nothing changed.
 */
#define _GNU_SOURCE /* tests/lib/tmpdir.h: nftw */
#include "tests/lib/cli_run.h"

Test(cli_alter, changes_show_in_describe, .init = srv_up, .fini = srv_down)
{
	cli_ok(ARGS("table", "create", "ads", "8", "optimizer=adam", "lr=0.002"));
	cli_run r = CLI("table", "alter", "ads", "lr=0.0005", "beta2=0.95");
	EXPECT(r, 0);
	expect_has(r.out, "altered table ads (id 1): lr=0.0005 eps=1e-08 beta1=0.9 beta2=0.95");
	run_free(&r);
	r = CLI_JSON("table", "describe", "ads");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert_eq(jnum(v, "optimizer.lr"), 0.0005);
	cr_assert_eq(jnum(v, "optimizer.beta2"), 0.95);
	cr_assert_eq(jnum(v, "optimizer.beta1"), 0.9);
	run_free(&r);

	cli_ok(ARGS("table", "create", "ctr", "3", "optimizer=ftrl"));
	r = CLI_JSON("table", "alter", "ctr", "alpha=0.2", "l1=0.5");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jbool(v, "ok"), true);
	cr_assert_str_eq(jstr(v, "optimizer.kind"), "ftrl");
	cr_assert_eq(jnum(v, "optimizer.lr"), 0.2);
	cr_assert_eq(jnum(v, "optimizer.l1"), 0.5);
	run_free(&r);
	r = CLI("table", "describe", "ctr");
	EXPECT(r, 0);
	expect_has(r.out, "optimizer: ftrl\nlr: 0.2\n");
	expect_has(r.out, "l1: 0.5\n");
	run_free(&r);
}

Test(cli_alter, refusals_change_nothing, .init = srv_up, .fini = srv_down)
{
	cli_ok(ARGS("table", "create", "ads", "8", "optimizer=adagrad", "lr=0.03"));
	const char *const *cases[] = {
		ARGS("table", "alter", "ads"),
		ARGS("table", "alter", "ads", "optimizer=sgd"),
		ARGS("table", "alter", "ads", "initial_accumulator=1"),
		ARGS("table", "alter", "ads", "seed=3"),
		ARGS("table", "alter", "ads", "beta1=0.5"), /* adagrad has no beta1 */
		ARGS("table", "alter", "ads", "lr=fast"),
		ARGS("table", "alter", "ads", "lr=0.1", "lr=0.2"),
		ARGS("table", "alter", "ads", "colour=red"),
		ARGS("table", "alter", "ads", "lr"),
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cli_run r = run_srv(true, cases[i]);
		expect_json_error(&r, 2, "USAGE");
		run_free(&r);
	}
	cli_run r = CLI("table", "alter", "ads", "initial_accumulator=1");
	expect_has(r.err, "initial_accumulator is fixed when the table is created");
	run_free(&r);
	cli_fails(ARGS("table", "alter", "ads", "lr=-1"), 1, "INVALID");
	cli_fails(ARGS("table", "alter", "nosuch", "lr=1"), 1, "NO_TABLE");
	r = CLI_JSON("table", "describe", "ads");
	EXPECT(r, 0);
	cr_assert_eq(jnum(json_out(&r), "optimizer.lr"), 0.03, "a refused alter changed lr");
	run_free(&r);
}
