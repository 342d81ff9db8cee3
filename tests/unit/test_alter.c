/*
 * test_alter.c - hyperparameters changed at run time (emdb_table_alter):
 * the next Update applies the new values bit for bit as the optimizer's
 * own rule computes them (db/optim_math.h) from the rows and state the
 * previous step left; describe shows them; refusals (another kind or
 * initial_accumulator, values creation refuses) change nothing; and a
 * checkpoint keeps the values in force at its step, which a restore
 * brings back.
 */
#define _GNU_SOURCE /* tests/lib/tmpdir.h: nftw */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/checkpoint.h>
#include <emdb/db.h>

#include "db/optim_math.h"
#include "tests/lib/helpers.h"
#include "tests/lib/tmpdir.h"

#define D 4
#define N 3

static const uint64_t ids[N] = { 0, 5, UINT64_MAX };

static void grads(int step, float *g)
{
	for (int k = 0; k < N * D; k++)
		g[k] = (float)((k * 7 + step * 3) % 11) * 0.125f - 0.6f;
}

static void step_with(emdb_db *db, uint32_t t, int step)
{
	float g[N * D];
	grads(step, g);
	cr_assert_eq(emdb_push(db, t, ids, N, D, g), 0, "%s", emdb_last_error());
	cr_assert_eq(emdb_update(db, t, NULL), 0);
}

/* rows[i] = weights then state of ids[i], as the engine lays a row out. */
static void read_rows(emdb_db *db, uint32_t t, float rows[N][3 * D])
{
	float v[N * D], st[N * 2 * D];
	cr_assert_eq(emdb_pull(db, t, ids, N, D, v), 0);
	cr_assert_eq(emdb_read_state(db, t, ids, N, st, NULL), 0);
	for (int i = 0; i < N; i++) {
		memcpy(rows[i], v + i * D, D * sizeof(float));
		memcpy(rows[i] + D, st + i * 2 * D, 2 * D * sizeof(float));
	}
}

/* Adam's rule for step `step` with optimizer o on copies of rows. */
static void reference(const emdb_optimizer *o, uint64_t step, float rows[N][3 * D], int gstep)
{
	emdb_opt_scalars sc;
	float g[N * D];
	grads(gstep, g);
	emdb_opt_scalars_for_step(o, step, D, &sc);
	for (int i = 0; i < N; i++)
		emdb_opt_adam_row(&sc, D, rows[i], g + i * D);
}

Test(alter, the_next_update_uses_the_new_values_bit_for_bit)
{
	emdb_db *db = open_db(4);
	uint32_t t = make_table(db, "a", D, EMDB_OPT_ADAM, EMDB_INIT_UNIFORM, -0.5, 0.5);
	step_with(db, t, 1);
	step_with(db, t, 2);
	float before[N][3 * D], want[N][3 * D], old_rule[N][3 * D], got[N][3 * D];
	read_rows(db, t, before);

	emdb_table_config cfg;
	cr_assert_eq(emdb_table_get_config(db, t, &cfg), 0);
	emdb_optimizer old = cfg.optimizer, o = cfg.optimizer;
	o.lr = 0.0037;
	o.beta1 = 0.8;
	o.beta2 = 0.99;
	o.eps = 1e-6;
	cr_assert_eq(emdb_table_alter(db, t, &o), 0, "%s", emdb_last_error());
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.config.optimizer.lr, 0.0037);
	cr_assert_eq(info.config.optimizer.beta1, 0.8);
	cr_assert_eq(info.config.optimizer.beta2, 0.99);
	cr_assert_eq(info.config.optimizer.eps, 1e-6);
	cr_assert_eq(info.stats.step, 2, "alter is not a step");
	read_rows(db, t, got);
	cr_assert_eq(memcmp(got, before, sizeof(got)), 0, "alter touched rows or state");

	step_with(db, t, 3);
	read_rows(db, t, got);
	memcpy(want, before, sizeof(want));
	reference(&o, 3, want, 3);
	cr_assert_eq(memcmp(got, want, sizeof(got)), 0, "step 3 is not Adam's rule with the new values");
	memcpy(old_rule, before, sizeof(old_rule));
	reference(&old, 3, old_rule, 3);
	cr_assert_neq(memcmp(got, old_rule, sizeof(got)), 0, "the old values give the same rows");

	/* Back to the old values: step 4 follows them. */
	cr_assert_eq(emdb_table_alter(db, t, &old), 0);
	memcpy(want, got, sizeof(want));
	step_with(db, t, 4);
	read_rows(db, t, got);
	reference(&old, 4, want, 4);
	cr_assert_eq(memcmp(got, want, sizeof(got)), 0, "step 4");
	emdb_db_close(db);
}

Test(alter, refusals_change_nothing)
{
	emdb_db *db = open_db(4);
	uint32_t t = make_table(db, "a", D, EMDB_OPT_ADAGRAD, EMDB_INIT_UNIFORM, -0.5, 0.5);
	emdb_table_config cfg;
	cr_assert_eq(emdb_table_get_config(db, t, &cfg), 0);
	emdb_optimizer o = cfg.optimizer;
	o.kind = EMDB_OPT_SGD;
	cr_assert_eq(emdb_table_alter(db, t, &o), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "cannot become sgd"), "%s", emdb_last_error());
	o = cfg.optimizer;
	o.initial_accumulator = 0.5;
	cr_assert_eq(emdb_table_alter(db, t, &o), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "initial_accumulator is fixed"), "%s", emdb_last_error());
	o = cfg.optimizer;
	o.lr = NAN;
	cr_assert_eq(emdb_table_alter(db, t, &o), EMDB_ERR_INVALID);
	o = cfg.optimizer;
	o.lr = -1;
	cr_assert_eq(emdb_table_alter(db, t, &o), EMDB_ERR_INVALID);
	o = cfg.optimizer;
	o.eps = -1;
	cr_assert_eq(emdb_table_alter(db, t, &o), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_table_alter(db, t, NULL), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_table_alter(db, t + 7, &cfg.optimizer), EMDB_ERR_NO_TABLE);
	emdb_table_config now;
	cr_assert_eq(emdb_table_get_config(db, t, &now), 0);
	cr_assert_eq(memcmp(&now.optimizer, &cfg.optimizer, sizeof(now.optimizer)), 0,
		     "a refused alter changed the optimizer");
	emdb_db_close(db);
}

/* A checkpoint records the values in force at its step: a restore brings
 * back those, not the ones altered after it. */
Test(alter, a_checkpoint_keeps_the_values_in_force)
{
	char dir[] = "/tmp/emdb-alter-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	emdb_store *st = NULL;
	cr_assert_eq(emdb_store_open(dir, &st), 0, "%s", emdb_last_error());
	emdb_db *db = open_db(4);
	uint32_t t = make_table(db, "a", D, EMDB_OPT_ADAM, EMDB_INIT_UNIFORM, -0.5, 0.5);
	step_with(db, t, 1);
	emdb_table_config cfg;
	cr_assert_eq(emdb_table_get_config(db, t, &cfg), 0);
	emdb_optimizer o = cfg.optimizer;
	o.lr = 0.0125;
	cr_assert_eq(emdb_table_alter(db, t, &o), 0);
	emdb_ckpt_info info;
	cr_assert_eq(emdb_checkpoint(db, st, EMDB_CKPT_FULL, &info), 0, "%s", emdb_last_error());
	o.lr = 0.5;
	cr_assert_eq(emdb_table_alter(db, t, &o), 0);
	step_with(db, t, 2);

	cr_assert_eq(emdb_restore(db, st, info.id, NULL), 0, "%s", emdb_last_error());
	emdb_table_config back;
	cr_assert_eq(emdb_table_find(db, "a", &t), 0);
	cr_assert_eq(emdb_table_get_config(db, t, &back), 0);
	cr_assert_eq(back.optimizer.lr, 0.0125, "restored lr %g", back.optimizer.lr);
	/* And in a database that never saw the alter. */
	emdb_db *db2 = open_db(4);
	cr_assert_eq(emdb_restore(db2, st, info.id, NULL), 0, "%s", emdb_last_error());
	cr_assert_eq(emdb_table_find(db2, "a", &t), 0);
	cr_assert_eq(emdb_table_get_config(db2, t, &back), 0);
	cr_assert_eq(back.optimizer.lr, 0.0125);
	emdb_db_close(db2);
	emdb_db_close(db);
	emdb_store_close(st);
	cr_assert_eq(tmpdir_remove(dir), 0);
}
