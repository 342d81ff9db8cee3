/*
 * test_optim.c - the optimizers through the public engine API, as a
 * trainer drives them: Pull, Push (duplicates within a batch and across
 * pushes), Update, read the weights and the optimizer state back.
 *
 * The test keeps its own model of every row: the initial value from the
 * documented formula (db/init_math.h, checked on its own by test_init.c),
 * the accumulated gradient summed in float in arrival order, and the
 * documented update rule of docs/engine.md written out here again.  Every
 * weight and every state float the engine returns must equal the model bit
 * for bit, and a row not pushed since the last Update must come back
 * bit-identical to what it was.  Each step has small pushes full of
 * duplicates and a wide one of 1176 distinct rows, so that both ways an
 * Update applies a shard are checked: alone (a shard of many rows, with
 * few shards) and gathered with other shards of few rows (many shards).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <emdb/db.h>

#include "db/init_math.h"

#define DIM 7        /* not a multiple of the vector width */
#define WIDE0 24     /* rows WIDE0..NIDS-1: one wide push every step */
#define NIDS 1200    /* the wide push: 1176 rows, so that one shard holds
		      * enough to be applied alone (ops_update.c,
		      * APPLY_ALONE_ROWS) and 64 shards fill more than
		      * one gathered run (APPLY_GROUP_ROWS) */
#define STEPS 6
#define MAXSF (2 * DIM)

static uint32_t bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

/* Deterministic gradients in [-1, 1), not exact in binary (so the order
 * of summation shows in the last bits). */
static float data(uint32_t a, uint32_t b, uint32_t c)
{
	uint64_t x = ((uint64_t)a * 1000003u + b) * 1000033u + c + 17;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (float)((double)(x >> 11) / 4503599627370496.0 - 1.0) * 0.7f;
}

/* ---- the model ------------------------------------------------------- */

typedef struct model_row {
	uint64_t id;
	int exists;        /* inserted by the engine by now        */
	int pushed;        /* holds a gradient since the last Update */
	float w[DIM];
	float st[MAXSF];   /* state in the documented layout        */
	float g[DIM];      /* accumulated gradient                  */
} model_row;

typedef struct model {
	emdb_table_config cfg;
	uint32_t table;
	uint64_t step;
	uint32_t sf;
	model_row rows[NIDS];
} model;

static void model_insert(model *m, model_row *r)
{
	const emdb_optimizer *o = &m->cfg.optimizer;
	float acc0 = (float)o->initial_accumulator;

	emdb_init_row(m->cfg.init.kind, m->cfg.init.a, m->cfg.init.b, m->cfg.seed, m->table,
		      r->id, DIM, r->w);
	for (uint32_t i = 0; i < MAXSF; i++)
		r->st[i] = 0.0f;
	if (o->kind == EMDB_OPT_ADAGRAD)
		for (uint32_t c = 0; c < DIM; c++)
			r->st[c] = acc0;
	if (o->kind == EMDB_OPT_ROWWISE_ADAGRAD)
		r->st[0] = acc0;
	if (o->kind == EMDB_OPT_FTRL)
		for (uint32_t c = 0; c < DIM; c++)
			r->st[DIM + c] = acc0;
	r->exists = 1;
}

/* The documented rule for one row at step t. */
static void model_rule(const emdb_optimizer *o, uint64_t t, float *w, float *st, const float *g)
{
	float lr = (float)o->lr, eps = (float)o->eps;

	switch (o->kind) {
	case EMDB_OPT_SGD:
		for (int c = 0; c < DIM; c++)
			w[c] = fmaf(-lr, g[c], w[c]);
		break;
	case EMDB_OPT_ADAGRAD: {
		float clr = (float)(o->lr / (1.0 + ((double)t - 1.0) * o->lr_decay));
		for (int c = 0; c < DIM; c++) {
			st[c] = fmaf(g[c], g[c], st[c]);
			w[c] = fmaf(-clr, g[c] / (sqrtf(st[c]) + eps), w[c]);
		}
		break;
	}
	case EMDB_OPT_ROWWISE_ADAGRAD: {
		float q = 0.0f;
		for (int c = 0; c < DIM; c++)
			q = fmaf(g[c], g[c], q);
		st[0] = st[0] + q / (float)DIM;
		float mult = lr / (sqrtf(st[0]) + eps);
		for (int c = 0; c < DIM; c++)
			w[c] = fmaf(-mult, g[c], w[c]);
		break;
	}
	case EMDB_OPT_ADAM: {
		float step_size = (float)(o->lr * sqrt(1.0 - pow(o->beta2, (double)t)) /
					  (1.0 - pow(o->beta1, (double)t)));
		float omb1 = (float)(1.0 - o->beta1), omb2 = (float)(1.0 - o->beta2);
		float *mm = st, *vv = st + DIM;
		for (int c = 0; c < DIM; c++) {
			mm[c] = fmaf(g[c] - mm[c], omb1, mm[c]);
			vv[c] = fmaf(fmaf(g[c], g[c], -vv[c]), omb2, vv[c]);
			w[c] = fmaf(-step_size, mm[c] / (sqrtf(vv[c]) + eps), w[c]);
		}
		break;
	}
	case EMDB_OPT_FTRL: {
		float alpha = lr, beta = (float)o->beta, l1 = (float)o->l1, l2 = (float)o->l2;
		float *z = st, *n = st + DIM;
		for (int c = 0; c < DIM; c++) {
			float n1 = fmaf(g[c], g[c], n[c]);
			float sigma = (sqrtf(n1) - sqrtf(n[c])) / alpha;
			z[c] = z[c] + fmaf(-sigma, w[c], g[c]);
			n[c] = n1;
			float den = (beta + sqrtf(n1)) / alpha + l2;
			float d = fabsf(z[c]) - l1;
			w[c] = d > 0.0f ? (z[c] > 0.0f ? -(d / den) : d / den) : 0.0f;
		}
		break;
	}
	}
}

/* ---- driving the engine ---------------------------------------------- */

static model_row *row_of(model *m, uint64_t id)
{
	for (int i = 0; i < NIDS; i++)
		if (m->rows[i].id == id)
			return &m->rows[i];
	cr_assert_fail("id %llx not in the model", (unsigned long long)id);
	return NULL;
}

/* Push `n` positions (indexes into the model's IDs) with gradients drawn
 * from (step, push), and mirror it in the model. */
static void push(emdb_db *db, model *m, const int *pos, size_t n, uint32_t push_no)
{
	uint64_t ids[NIDS];
	float g[NIDS * DIM];

	cr_assert_leq(n, NIDS);
	for (size_t i = 0; i < n; i++) {
		ids[i] = m->rows[pos[i]].id;
		for (int c = 0; c < DIM; c++)
			g[i * DIM + c] = data((uint32_t)m->step * 16 + push_no, (uint32_t)i, (uint32_t)c);
	}
	cr_assert_eq(emdb_push(db, m->table, ids, n, DIM, g), EMDB_OK, "%s", emdb_last_error());
	/* Arrival order: batch order, one push after the other. */
	for (size_t i = 0; i < n; i++) {
		model_row *r = row_of(m, ids[i]);
		if (!r->exists)
			model_insert(m, r);
		if (!r->pushed)
			for (int c = 0; c < DIM; c++)
				r->g[c] = 0.0f;
		for (int c = 0; c < DIM; c++)
			r->g[c] = r->g[c] + g[i * DIM + c];
		r->pushed = 1;
	}
}

static void update(emdb_db *db, model *m)
{
	uint64_t rows = 99, want = 0;

	cr_assert_eq(emdb_update(db, m->table, &rows), EMDB_OK, "%s", emdb_last_error());
	m->step++;
	for (int i = 0; i < NIDS; i++) {
		model_row *r = &m->rows[i];
		if (!r->pushed)
			continue;
		model_rule(&m->cfg.optimizer, m->step, r->w, r->st, r->g);
		r->pushed = 0;
		want++;
	}
	cr_assert_eq(rows, want, "step %llu: %llu rows updated, want %llu",
		     (unsigned long long)m->step, (unsigned long long)rows,
		     (unsigned long long)want);
}

/* Every existing row's weights and state against the model, bit for bit,
 * read without inserting anything (Lookup and read_state). */
static void check(emdb_db *db, model *m, const char *when)
{
	uint64_t ids[NIDS];
	float w[NIDS * DIM], st[NIDS * MAXSF + 1];
	uint8_t found[NIDS];
	const char *name = emdb_optimizer_name(m->cfg.optimizer.kind);

	for (int i = 0; i < NIDS; i++)
		ids[i] = m->rows[i].id;
	cr_assert_eq(emdb_lookup(db, m->table, ids, NIDS, DIM, w, found), EMDB_OK, "%s",
		     emdb_last_error());
	cr_assert_eq(emdb_read_state(db, m->table, ids, NIDS, st, NULL), EMDB_OK, "%s",
		     emdb_last_error());
	for (int i = 0; i < NIDS; i++) {
		const model_row *r = &m->rows[i];
		cr_assert_eq(found[i], r->exists, "%s %s: id %llx found %d", name, when,
			     (unsigned long long)r->id, found[i]);
		if (!r->exists)
			continue;
		for (int c = 0; c < DIM; c++)
			cr_assert_eq(bits(w[i * DIM + c]), bits(r->w[c]),
				     "%s %s step %llu: id %llx w[%d] = %a, model %a", name, when,
				     (unsigned long long)m->step, (unsigned long long)r->id, c,
				     w[i * DIM + c], r->w[c]);
		for (uint32_t k = 0; k < m->sf; k++)
			cr_assert_eq(bits(st[i * m->sf + k]), bits(r->st[k]),
				     "%s %s step %llu: id %llx state[%u] = %a, model %a", name,
				     when, (unsigned long long)m->step, (unsigned long long)r->id, k,
				     st[i * m->sf + k], r->st[k]);
	}
}

/* Raw snapshot of every existing row, to compare untouched rows by bits. */
static void snapshot(emdb_db *db, model *m, float *w, float *st)
{
	uint64_t ids[NIDS];

	for (int i = 0; i < NIDS; i++)
		ids[i] = m->rows[i].id;
	cr_assert_eq(emdb_lookup(db, m->table, ids, NIDS, DIM, w, NULL), EMDB_OK);
	cr_assert_eq(emdb_read_state(db, m->table, ids, NIDS, st, NULL), EMDB_OK);
}

static void run(const emdb_optimizer *opt, uint32_t shards)
{
	static model m; /* big for the stack of Criterion's worker */
	emdb_db_config dc = EMDB_DB_CONFIG_INIT;
	emdb_db *db = NULL;

	memset(&m, 0, sizeof(m));
	dc.shards = shards;
	cr_assert_eq(emdb_db_open(&dc, &db), EMDB_OK, "%s", emdb_last_error());

	/* A first table, so that the one under test does not have id 1 and
	 * the table id is seen to enter the initial values. */
	emdb_table_config other = EMDB_TABLE_CONFIG_INIT;
	strcpy(other.name, "other");
	other.dim = 3;
	cr_assert_eq(emdb_table_create(db, &other, NULL), EMDB_OK, "%s", emdb_last_error());

	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "t");
	cfg.dim = DIM;
	cfg.optimizer = *opt;
	cfg.init.kind = EMDB_INIT_UNIFORM;
	cfg.init.a = -0.1;
	cfg.init.b = 0.1;
	cfg.seed = 0x5eed5eed5eedull;
	m.cfg = cfg;
	cr_assert_eq(emdb_table_create(db, &cfg, &m.table), EMDB_OK, "%s", emdb_last_error());
	m.sf = emdb_optimizer_state_floats(opt->kind, DIM);
	cr_assert_leq(m.sf, MAXSF);
	for (int i = 0; i < NIDS; i++)
		m.rows[i].id = (uint64_t)i * 0x9e3779b97f4a7c15ull;
	m.rows[1].id = UINT64_MAX;
	m.rows[2].id = 1ull << 32;

	/* Rows 0..15 come in through Pull, 16..23 later through Push. */
	uint64_t ids[16];
	float pulled[16 * DIM];
	for (int i = 0; i < 16; i++)
		ids[i] = m.rows[i].id;
	cr_assert_eq(emdb_pull(db, m.table, ids, 16, DIM, pulled), EMDB_OK, "%s",
		     emdb_last_error());
	for (int i = 0; i < 16; i++) {
		model_insert(&m, &m.rows[i]);
		for (int c = 0; c < DIM; c++)
			cr_assert_eq(bits(pulled[i * DIM + c]), bits(m.rows[i].w[c]),
				     "initial value of id %llx col %d", (unsigned long long)ids[i], c);
	}
	check(db, &m, "after insert");

	static float w_before[NIDS * DIM], st_before[NIDS * MAXSF + 1];
	static float w_after[NIDS * DIM], st_after[NIDS * MAXSF + 1];
	for (uint32_t s = 1; s <= STEPS; s++) {
		/* Duplicates inside a batch (position 0 three times, 5 twice)
		 * and across pushes (0, 1, 3 and 5 again in the second).  On
		 * even steps the first push stops after 7 positions, so 9 and
		 * 2 skip those steps; 4, 6, 8, 10, 12, 14 and 15 are never
		 * pushed; 16.. arrive through Push one more per step. */
		static const int a[] = { 0, 3, 0, 5, 7, 0, 5, 9, 1, 2 };
		static const int b[] = { 3, 0, 11, 5, 13, 1 };
		int late[WIDE0 - 16];
		size_t n_late = 0;
		int touched[NIDS];

		if (s == 3) {
			/* An Update with nothing pushed changes no row but
			 * still advances the step that Adam's bias correction
			 * and Adagrad's decay see. */
			uint64_t rows = 99;
			cr_assert_eq(emdb_update(db, m.table, &rows), EMDB_OK);
			cr_assert_eq(rows, 0);
			m.step++;
			check(db, &m, "after an empty update");
		}
		push(db, &m, a, s % 2 == 0 ? 7 : 10, 1);
		push(db, &m, b, sizeof(b) / sizeof(b[0]), 2);
		for (int i = 16; i < WIDE0 && (uint32_t)(i - 16) < s; i++)
			late[n_late++] = i;
		push(db, &m, late, n_late, 3);
		/* A wide push: with one shard (or a few) its shard holds
		 * enough rows for the pass to apply it by itself, with many
		 * shards a few rows each, gathered into runs (ops_update.c). */
		int wide[NIDS - WIDE0];
		for (int i = WIDE0; i < NIDS; i++)
			wide[i - WIDE0] = i;
		push(db, &m, wide, NIDS - WIDE0, 4);
		check(db, &m, "after push (no change before Update)");

		snapshot(db, &m, w_before, st_before);
		for (int i = 0; i < NIDS; i++)
			touched[i] = m.rows[i].pushed;
		update(db, &m);
		check(db, &m, "after update");

		/* Rows that got no gradient this step: bit-identical. */
		snapshot(db, &m, w_after, st_after);
		for (int i = 0; i < NIDS; i++) {
			if (touched[i] || !m.rows[i].exists)
				continue;
			cr_assert_eq(memcmp(w_before + i * DIM, w_after + i * DIM, DIM * sizeof(float)),
				     0, "untouched id %llx changed", (unsigned long long)m.rows[i].id);
			cr_assert_eq(memcmp(st_before + i * m.sf, st_after + i * m.sf,
					    m.sf * sizeof(float)),
				     0, "untouched id %llx state changed",
				     (unsigned long long)m.rows[i].id);
		}
	}

	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, m.table, &info), EMDB_OK);
	cr_expect_eq(info.stats.step, m.step);
	cr_expect_eq(info.stats.pending_rows, 0);
	emdb_db_close(db);
}

static emdb_optimizer defaults(emdb_opt_kind kind)
{
	emdb_optimizer o;
	cr_assert_eq(emdb_optimizer_defaults(kind, &o), EMDB_OK);
	return o;
}

Test(optim, sgd)
{
	emdb_optimizer o = defaults(EMDB_OPT_SGD);
	run(&o, 64);
	o.lr = 0.3;
	run(&o, 1);
}

Test(optim, adagrad)
{
	emdb_optimizer o = defaults(EMDB_OPT_ADAGRAD);
	run(&o, 64);
	o.lr = 0.1;
	o.lr_decay = 0.2;
	o.initial_accumulator = 0.25;
	run(&o, 4);
}

Test(optim, rowwise_adagrad)
{
	emdb_optimizer o = defaults(EMDB_OPT_ROWWISE_ADAGRAD);
	run(&o, 64);
	o.lr = 0.2;
	o.initial_accumulator = 0.5;
	run(&o, 2);
}

Test(optim, adam)
{
	emdb_optimizer o = defaults(EMDB_OPT_ADAM);
	run(&o, 64);
	o.lr = 0.05;
	o.beta1 = 0.5;
	o.beta2 = 0.75;
	o.eps = 1e-3;
	run(&o, 8);
}

Test(optim, ftrl)
{
	emdb_optimizer o = defaults(EMDB_OPT_FTRL);
	run(&o, 64);
	o.lr = 0.2;
	o.l1 = 0.3;    /* some weights become exactly 0 */
	o.l2 = 0.1;
	o.beta = 0.5;
	run(&o, 16);
}

/* Bad hyperparameters are refused at table creation, naming the field. */
Test(optim, create_rejects_bad_optimizer)
{
	emdb_db *db = NULL;
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;

	cr_assert_eq(emdb_db_open(NULL, &db), EMDB_OK);
	strcpy(cfg.name, "bad");
	cfg.dim = 4;
	cfg.optimizer = defaults(EMDB_OPT_ADAM);
	cfg.optimizer.beta2 = 1.0;
	cr_expect_eq(emdb_table_create(db, &cfg, NULL), EMDB_ERR_INVALID);
	cr_expect_neq(strstr(emdb_last_error(), "beta2"), NULL, "%s", emdb_last_error());
	cfg.optimizer = defaults(EMDB_OPT_SGD);
	cfg.optimizer.lr = -1;
	cr_expect_eq(emdb_table_create(db, &cfg, NULL), EMDB_ERR_INVALID);
	cr_expect_neq(strstr(emdb_last_error(), "lr"), NULL, "%s", emdb_last_error());
	cfg.optimizer = defaults(EMDB_OPT_SGD);
	cfg.init.kind = EMDB_INIT_NORMAL;
	cfg.init.b = -1;
	cr_expect_eq(emdb_table_create(db, &cfg, NULL), EMDB_ERR_INVALID);
	cr_expect_neq(strstr(emdb_last_error(), "std"), NULL, "%s", emdb_last_error());
	emdb_db_close(db);
}
