/*
 * test_tier.c - the conformance suite of the tier interface (db/tier.h),
 * run against every backend compiled in: host, test and, where CUDA was
 * built, cuda (skipped with the reason when this machine has no device or
 * driver).  Each case is written once (TIER_CASE) and expanded per
 * backend.  Rows are compared bit for bit with a reference computed here
 * from the per-row rules of db/optim_math.h and db/init_math.h, the same
 * functions the engine's Update runs.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include <emdb/error.h>

#include "db/init_math.h"
#include "db/optim_math.h"
#include "db/tier.h"
#include "db/tier_test.h"
#include "tests/lib/helpers.h"

#define DIM 12
#define RPC 8       /* rows per chunk */
#define CHUNKS 4

static tier_config cfg_for(emdb_opt_kind opt, uint32_t replicas)
{
	tier_config c;

	memset(&c, 0, sizeof(c));
	c.dim = DIM;
	c.opt = opt;
	c.rows_per_chunk = RPC;
	c.max_chunks = CHUNKS;
	c.max_pending = RPC * CHUNKS;
	c.replicas = replicas;
	return c;
}

/* Opens a tier of `kind`, or skips the test saying why it cannot run. */
static tier *open_or_skip(tier_kind kind, const tier_config *c)
{
	char why[200];
	tier *t = NULL;
	int rc;

	if (!tier_available(kind, why, sizeof(why)))
		cr_skip_test("%s tier: %s", tier_kind_name(kind), why);
	rc = tier_open(kind, c, &t);
	if (rc == EMDB_ERR_UNSUPPORTED) /* e.g. two replicas, one device */
		cr_skip_test("%s tier: %s", tier_kind_name(kind), emdb_last_error());
	cr_assert_eq(rc, EMDB_OK, "%s", emdb_last_error());
	return t;
}

static void ref_step(emdb_opt_kind k, const emdb_opt_scalars *sc, float *row, const float *g)
{
	switch (k) {
	case EMDB_OPT_SGD:
		emdb_opt_sgd_row(sc, DIM, row, g);
		break;
	case EMDB_OPT_ADAGRAD:
		emdb_opt_adagrad_row(sc, DIM, row, g);
		break;
	case EMDB_OPT_ROWWISE_ADAGRAD:
		emdb_opt_rowwise_adagrad_row(sc, DIM, row, g);
		break;
	case EMDB_OPT_ADAM:
		emdb_opt_adam_row(sc, DIM, row, g);
		break;
	case EMDB_OPT_FTRL:
		emdb_opt_ftrl_row(sc, DIM, row, g);
		break;
	}
}

#define TIER_CASE(name) \
	static void name(tier_kind kind); \
	Test(tier_host, name) { name(TIER_HOST); } \
	Test(tier_test, name) { name(TIER_TEST); } \
	Test(tier_cuda, name) { name(TIER_CUDA); } \
	static void name(tier_kind kind)

TIER_CASE(rows_round_trip_and_bad_slots)
{
	tier_config c = cfg_for(EMDB_OPT_ADAM, 2);
	tier *t = open_or_skip(kind, &c);
	uint32_t rf = tier_row_floats(&c);
	uint64_t slots[5] = { 3, 0, 7, 9, 15 };
	float in[5 * 3 * DIM], out[5 * 3 * DIM];
	uint64_t bad = 16; /* chunk 2: not allocated */

	cr_assert_eq(rf, 3 * DIM);
	cr_assert_eq(tier_chunk_alloc(t, 0), EMDB_OK);
	cr_assert_eq(tier_chunk_alloc(t, 1), EMDB_OK);
	cr_assert_eq(tier_chunk_alloc(t, 1), EMDB_ERR_INVALID, "a chunk twice");
	cr_assert_eq(tier_chunk_alloc(t, CHUNKS), EMDB_ERR_INVALID, "past max_chunks");
	for (uint32_t i = 0; i < 5 * rf; i++)
		in[i] = test_val(1, i);
	cr_assert_eq(tier_put_rows(t, slots, 5, in), EMDB_OK, "%s", emdb_last_error());
	for (uint32_t r = 0; r < 2; r++) {
		memset(out, 0, sizeof(out));
		cr_assert_eq(tier_get_rows(t, r, slots, 5, out), EMDB_OK);
		cr_assert(!memcmp(in, out, 5 * rf * sizeof(float)), "replica %u", r);
	}
	/* A fresh chunk's rows are zero. */
	cr_assert_eq(tier_get_rows(t, 0, (uint64_t[]){ 1 }, 1, out), EMDB_OK);
	for (uint32_t i = 0; i < rf; i++)
		cr_assert_eq(out[i], 0.0f);
	cr_assert_eq(tier_put_rows(t, &bad, 1, in), EMDB_ERR_INVALID);
	cr_assert_eq(tier_gather(t, 0, &bad, 1, out, false), EMDB_ERR_INVALID);
	cr_assert_eq(tier_get_rows(t, 2, slots, 1, out), EMDB_ERR_INVALID, "replica 2 of 2");
	tier_close(t);
}

TIER_CASE(init_matches_the_rules)
{
	static const emdb_opt_kind opts[] = { EMDB_OPT_SGD, EMDB_OPT_ADAGRAD,
					      EMDB_OPT_ROWWISE_ADAGRAD, EMDB_OPT_ADAM, EMDB_OPT_FTRL };
	emdb_init inits[3] = { { EMDB_INIT_ZEROS, 0, 0 }, { EMDB_INIT_UNIFORM, -0.5, 0.25 },
			       { EMDB_INIT_NORMAL, 0.1, 0.02 } };

	for (size_t o = 0; o < 5; o++)
		for (size_t k = 0; k < 3; k++) {
			tier_config c = cfg_for(opts[o], 1);
			tier *t = open_or_skip(kind, &c);
			uint32_t rf = tier_row_floats(&c);
			uint64_t slots[3] = { 2, 5, 6 }, ids[3] = { 1, 1ull << 40, 77 };
			emdb_optimizer opt;
			float got[3 * 3 * DIM], want[3 * DIM];

			cr_assert_eq(emdb_optimizer_defaults(opts[o], &opt), EMDB_OK);
			opt.initial_accumulator = 0.25;
			cr_assert_eq(tier_chunk_alloc(t, 0), EMDB_OK);
			cr_assert_eq(tier_init_rows(t, slots, ids, 3, &inits[k], &opt, 99, 4), EMDB_OK,
				     "%s", emdb_last_error());
			cr_assert_eq(tier_get_rows(t, 0, slots, 3, got), EMDB_OK);
			for (int i = 0; i < 3; i++) {
				memset(want, 0, sizeof(want));
				emdb_init_row(inits[k].kind, inits[k].a, inits[k].b, 99, 4, ids[i], DIM,
					      want);
				emdb_opt_init_state(opts[o], &opt, DIM, want + DIM);
				cr_assert(!memcmp(got + i * rf, want, rf * sizeof(float)),
					  "optimizer %zu init %zu row %d", o, k, i);
			}
			opt.kind = opts[(o + 1) % 5];
			cr_assert_eq(tier_init_rows(t, slots, ids, 3, &inits[k], &opt, 99, 4),
				     EMDB_ERR_INVALID, "another optimizer's state");
			tier_close(t);
		}
}

TIER_CASE(gather_with_duplicates)
{
	tier_config c = cfg_for(EMDB_OPT_ADAGRAD, 1);
	tier *t = open_or_skip(kind, &c);
	uint32_t rf = tier_row_floats(&c);
	uint64_t all[RPC], slots[6] = { 5, 1, 5, 5, 0, 7 };
	float rows[RPC * 2 * DIM], out[6 * DIM];

	cr_assert_eq(tier_chunk_alloc(t, 0), EMDB_OK);
	for (uint32_t i = 0; i < RPC; i++)
		all[i] = i;
	for (uint32_t i = 0; i < RPC * rf; i++)
		rows[i] = test_val(2, i);
	cr_assert_eq(tier_put_rows(t, all, RPC, rows), EMDB_OK);
	cr_assert_eq(tier_gather(t, 0, slots, 6, out, false), EMDB_OK, "%s", emdb_last_error());
	for (int i = 0; i < 6; i++)
		cr_assert(!memcmp(out + i * DIM, rows + slots[i] * rf, DIM * sizeof(float)),
			  "entry %d", i);
	cr_assert_eq(tier_gather(t, 0, slots, 6, NULL, false), EMDB_ERR_INVALID);
	tier_close(t);
}

/* Keys and output in the tier's own memory (host memory for host and
 * test; device memory for CUDA, checked by emdb-gpu-test). */
TIER_CASE(gather_dev_checks_slots_it_cannot_see_first)
{
	tier_config c = cfg_for(EMDB_OPT_SGD, 1);
	tier *t;
	uint64_t all[RPC], slots[3] = { 6, 2, 6 }, bad[3] = { 1, 8, 3 };
	float rows[RPC * DIM], out[3 * DIM];

	if (kind == TIER_CUDA)
		cr_skip_test("cuda tier: keys in device memory are checked by emdb-gpu-test");
	t = open_or_skip(kind, &c);
	cr_assert_eq(tier_chunk_alloc(t, 0), EMDB_OK);
	for (uint32_t i = 0; i < RPC; i++)
		all[i] = i;
	for (int k = 0; k < RPC * DIM; k++)
		rows[k] = test_val(13, k);
	cr_assert_eq(tier_put_rows(t, all, RPC, rows), EMDB_OK);
	cr_assert_eq(tier_gather_dev(t, 0, slots, 3, out), EMDB_OK, "%s", emdb_last_error());
	for (int i = 0; i < 3; i++)
		cr_assert(!memcmp(out + i * DIM, rows + slots[i] * DIM, DIM * sizeof(float)));
	/* Slot 8 is in chunk 1, not allocated: its row is NaN, the others
	 * are gathered or not, and the call says INVALID. */
	cr_assert_eq(tier_gather_dev(t, 0, bad, 3, out), EMDB_ERR_INVALID);
	for (int k = 0; k < DIM; k++)
		cr_assert(out[DIM + k] != out[DIM + k], "NaN");
	cr_assert_eq(tier_gather_dev(t, 0, slots, 3, out), EMDB_OK, "the tier goes on");
	tier_close(t);
}

/* Several steps of each optimizer, with duplicate rows in every batch:
 * the tier's rows equal the reference bit for bit. */
TIER_CASE(scatter_add_and_step_every_optimizer)
{
	static const emdb_opt_kind opts[] = { EMDB_OPT_SGD, EMDB_OPT_ADAGRAD,
					      EMDB_OPT_ROWWISE_ADAGRAD, EMDB_OPT_ADAM, EMDB_OPT_FTRL };

	for (size_t o = 0; o < 5; o++) {
		tier_config c = cfg_for(opts[o], 1);
		tier *t = open_or_skip(kind, &c);
		uint32_t rf = tier_row_floats(&c);
		uint64_t all[2 * RPC];
		float ref[2 * RPC * 3 * DIM], got[2 * RPC * 3 * DIM];
		emdb_optimizer opt;

		cr_assert_eq(emdb_optimizer_defaults(opts[o], &opt), EMDB_OK);
		opt.lr = 0.05;
		opt.l1 = 0.001;
		opt.l2 = 0.01;
		cr_assert_eq(tier_chunk_alloc(t, 0), EMDB_OK);
		cr_assert_eq(tier_chunk_alloc(t, 1), EMDB_OK);
		for (uint32_t i = 0; i < 2 * RPC; i++) {
			all[i] = i;
			for (uint32_t k = 0; k < DIM; k++)
				ref[i * rf + k] = test_val(3, i * DIM + k);
			emdb_opt_init_state(opts[o], &opt, DIM, ref + i * rf + DIM);
		}
		cr_assert_eq(tier_put_rows(t, all, 2 * RPC, ref), EMDB_OK);
		for (uint64_t step = 1; step <= 5; step++) {
			/* Two pushes a step; row 3 three times in the first. */
			uint64_t b1[5] = { 3, 9, 3, 14, 3 }, b2[3] = { 9, 0, (step * 5) % 16 };
			float g1[5 * DIM], g2[3 * DIM], acc[2 * RPC][DIM];
			bool has[2 * RPC] = { false };
			emdb_opt_scalars sc;

			for (uint32_t k = 0; k < 5 * DIM; k++)
				g1[k] = test_val((uint32_t)(10 * step + o), k);
			for (uint32_t k = 0; k < 3 * DIM; k++)
				g2[k] = test_val((uint32_t)(20 * step + o), k);
			cr_assert_eq(tier_scatter_add(t, 0, b1, 5, g1), EMDB_OK, "%s", emdb_last_error());
			cr_assert_eq(tier_scatter_add(t, 0, b2, 3, g2), EMDB_OK);
			cr_assert_eq(tier_pending(t), b2[2] == 3 || b2[2] == 9 || b2[2] == 14 ||
				     b2[2] == 0 ? 4u : 5u);
			/* The reference: within a push, duplicates summed in batch
			 * order, then added to the accumulator. */
			memset(acc, 0, sizeof(acc));
			for (int p = 0; p < 2; p++) {
				const uint64_t *b = p ? b2 : b1;
				const float *g = p ? g2 : g1;
				int n = p ? 3 : 5;
				float sum[2 * RPC][DIM];
				bool in[2 * RPC] = { false };

				for (int i = 0; i < n; i++) {
					for (int k = 0; k < DIM; k++)
						sum[b[i]][k] = in[b[i]] ? sum[b[i]][k] + g[i * DIM + k] :
									  g[i * DIM + k];
					in[b[i]] = true;
				}
				for (int r = 0; r < 2 * RPC; r++)
					if (in[r]) {
						for (int k = 0; k < DIM; k++)
							acc[r][k] += sum[r][k];
						has[r] = true;
					}
			}
			emdb_opt_scalars_for_step(&opt, step, DIM, &sc);
			for (int r = 0; r < 2 * RPC; r++)
				if (has[r])
					ref_step(opts[o], &sc, ref + r * rf, acc[r]);
			cr_assert_eq(tier_step(t, &sc), b2[2] == 3 || b2[2] == 9 || b2[2] == 14 ||
				     b2[2] == 0 ? 4 : 5);
			cr_assert_eq(tier_pending(t), 0u);
		}
		cr_assert_eq(tier_get_rows(t, 0, all, 2 * RPC, got), EMDB_OK);
		for (uint32_t i = 0; i < 2 * RPC; i++)
			cr_assert(!memcmp(got + i * rf, ref + i * rf, rf * sizeof(float)),
				  "%s row %u differs from the reference", emdb_optimizer_name(opts[o]), i);
		tier_close(t);
	}
}

/* Gradients pushed to two replicas, reduced, stepped: both replicas equal
 * the reference that sums replica 0's and replica 1's gradients. */
TIER_CASE(reduce_across_replicas)
{
	tier_config c = cfg_for(EMDB_OPT_ADAM, 2);
	tier *t = open_or_skip(kind, &c);
	uint32_t rf = tier_row_floats(&c);
	uint64_t all[RPC], s0[2] = { 1, 4 }, s1[2] = { 4, 6 };
	float ref[RPC * 3 * DIM], got[RPC * 3 * DIM], g0[2 * DIM], g1[2 * DIM];
	emdb_optimizer opt;
	emdb_opt_scalars sc;

	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ADAM, &opt), EMDB_OK);
	cr_assert_eq(tier_chunk_alloc(t, 0), EMDB_OK);
	for (uint32_t i = 0; i < RPC; i++) {
		all[i] = i;
		for (uint32_t k = 0; k < rf; k++)
			ref[i * rf + k] = k < DIM ? test_val(4, i * DIM + k) : 0.0f;
	}
	cr_assert_eq(tier_put_rows(t, all, RPC, ref), EMDB_OK);
	for (int k = 0; k < 2 * DIM; k++) {
		g0[k] = test_val(5, k);
		g1[k] = test_val(6, k);
	}
	cr_assert_eq(tier_scatter_add(t, 0, s0, 2, g0), EMDB_OK);
	cr_assert_eq(tier_scatter_add(t, 1, s1, 2, g1), EMDB_OK);
	cr_assert_eq(tier_reduce(t), EMDB_OK, "%s", emdb_last_error());
	emdb_opt_scalars_for_step(&opt, 1, DIM, &sc);
	cr_assert_eq(tier_step(t, &sc), 3);
	{
		float a1[DIM], a4[DIM], a6[DIM];

		for (int k = 0; k < DIM; k++) {
			a1[k] = g0[k];
			a4[k] = g0[DIM + k] + g1[k];
			a6[k] = g1[DIM + k];
		}
		ref_step(EMDB_OPT_ADAM, &sc, ref + 1 * rf, a1);
		ref_step(EMDB_OPT_ADAM, &sc, ref + 4 * rf, a4);
		ref_step(EMDB_OPT_ADAM, &sc, ref + 6 * rf, a6);
	}
	for (uint32_t r = 0; r < 2; r++) {
		cr_assert_eq(tier_get_rows(t, r, all, RPC, got), EMDB_OK);
		cr_assert(!memcmp(got, ref, RPC * rf * sizeof(float)), "replica %u", r);
	}
	tier_close(t);
}

/* Past max_pending distinct rows a scatter-add is refused whole; the
 * rows pushed before it are stepped as if it never came. */
TIER_CASE(pending_limit_changes_nothing)
{
	tier_config c = cfg_for(EMDB_OPT_SGD, 1);
	tier *t;
	uint64_t a[3] = { 0, 1, 2 }, b[4] = { 2, 3, 4, 3 }, all[RPC];
	float ga[3 * DIM], gb[4 * DIM], ref[RPC * DIM], got[RPC * DIM];
	emdb_optimizer opt;
	emdb_opt_scalars sc;

	c.max_pending = 4;
	t = open_or_skip(kind, &c);
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_SGD, &opt), EMDB_OK);
	cr_assert_eq(tier_chunk_alloc(t, 0), EMDB_OK);
	for (uint32_t i = 0; i < RPC; i++)
		all[i] = i;
	for (int k = 0; k < RPC * DIM; k++)
		ref[k] = test_val(7, k);
	for (int k = 0; k < 3 * DIM; k++)
		ga[k] = test_val(8, k);
	for (int k = 0; k < 4 * DIM; k++)
		gb[k] = test_val(9, k);
	cr_assert_eq(tier_put_rows(t, all, RPC, ref), EMDB_OK);
	cr_assert_eq(tier_scatter_add(t, 0, a, 3, ga), EMDB_OK);
	cr_assert_eq(tier_scatter_add(t, 0, b, 4, gb), EMDB_ERR_LIMIT, "5 distinct rows > 4");
	cr_assert_eq(tier_pending(t), 3u);
	/* Row 3 was inserted then rolled back: a new push of it still works. */
	cr_assert_eq(tier_scatter_add(t, 0, b + 1, 1, gb + DIM), EMDB_OK);
	emdb_opt_scalars_for_step(&opt, 1, DIM, &sc);
	cr_assert_eq(tier_step(t, &sc), 4);
	for (int i = 0; i < 3; i++)
		emdb_opt_sgd_row(&sc, DIM, ref + i * DIM, ga + i * DIM);
	emdb_opt_sgd_row(&sc, DIM, ref + 3 * DIM, gb + DIM);
	cr_assert_eq(tier_get_rows(t, 0, all, RPC, got), EMDB_OK);
	cr_assert(!memcmp(got, ref, sizeof(ref)));
	tier_close(t);
}

TIER_CASE(apply_direct_and_freed_chunks)
{
	tier_config c = cfg_for(EMDB_OPT_FTRL, 1);
	tier *t = open_or_skip(kind, &c);
	uint32_t rf = tier_row_floats(&c);
	uint64_t s[3] = { 2, 9, 5 }, dup[2] = { 2, 2 }, gone = 9, keep[2] = { 2, 5 };
	float rows[3 * 3 * DIM], g[3 * DIM], got[3 * 3 * DIM];
	emdb_optimizer opt;
	emdb_opt_scalars sc;

	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_FTRL, &opt), EMDB_OK);
	cr_assert_eq(tier_chunk_alloc(t, 0), EMDB_OK);
	cr_assert_eq(tier_chunk_alloc(t, 1), EMDB_OK);
	for (int i = 0; i < 3; i++) {
		for (int k = 0; k < DIM; k++)
			rows[i * rf + k] = test_val(10, i * DIM + k);
		emdb_opt_init_state(EMDB_OPT_FTRL, &opt, DIM, rows + i * rf + DIM);
	}
	for (int k = 0; k < 3 * DIM; k++)
		g[k] = test_val(11, k);
	cr_assert_eq(tier_put_rows(t, s, 3, rows), EMDB_OK);
	emdb_opt_scalars_for_step(&opt, 1, DIM, &sc);
	cr_assert_eq(tier_apply(t, &sc, dup, 2, g), EMDB_ERR_INVALID, "a slot twice");
	cr_assert_eq(tier_apply(t, &sc, s, 3, g), EMDB_OK, "%s", emdb_last_error());
	for (int i = 0; i < 3; i++)
		emdb_opt_ftrl_row(&sc, DIM, rows + i * rf, g + i * DIM);
	cr_assert_eq(tier_get_rows(t, 0, s, 3, got), EMDB_OK);
	cr_assert(!memcmp(got, rows, 3 * rf * sizeof(float)));
	/* A gradient for a row whose chunk is freed is dropped at the step. */
	cr_assert_eq(tier_scatter_add(t, 0, s, 3, g), EMDB_OK);
	tier_chunk_free(t, 1);
	cr_assert_eq(tier_put_rows(t, &gone, 1, rows), EMDB_ERR_INVALID);
	emdb_opt_scalars_for_step(&opt, 2, DIM, &sc);
	cr_assert_eq(tier_step(t, &sc), 2, "the freed row is not stepped");
	emdb_opt_ftrl_row(&sc, DIM, rows, g);
	emdb_opt_ftrl_row(&sc, DIM, rows + 2 * rf, g + 2 * DIM);
	cr_assert_eq(tier_get_rows(t, 0, keep, 2, got), EMDB_OK);
	cr_assert(!memcmp(got, rows, rf * sizeof(float)));
	cr_assert(!memcmp(got + rf, rows + 2 * rf, rf * sizeof(float)));
	tier_close(t);
}

/* The test backend only: capacity, byte counters, injected failures. */
TIER_CASE(discard_empties_accumulators_without_a_step)
{
	tier_config c = cfg_for(EMDB_OPT_SGD, 1);
	tier *t = open_or_skip(kind, &c);
	uint64_t s[3] = { 1, 4, 1 };
	float rows[2 * DIM], g[3 * DIM], out[2 * DIM], want[2 * DIM];
	emdb_opt_scalars sc;
	emdb_optimizer opt;

	cr_assert_eq(tier_chunk_alloc(t, 0), EMDB_OK);
	for (int k = 0; k < 2 * DIM; k++)
		rows[k] = test_val(21, k);
	for (int k = 0; k < 3 * DIM; k++)
		g[k] = test_val(22, k);
	cr_assert_eq(tier_put_rows(t, s, 2, rows), EMDB_OK);
	cr_assert_eq(tier_scatter_add(t, 0, s, 3, g), EMDB_OK);
	cr_assert_eq(tier_pending(t), 2u);
	cr_assert_eq(tier_discard(t), EMDB_OK);
	cr_assert_eq(tier_pending(t), 0u);
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_SGD, &opt), EMDB_OK);
	emdb_opt_scalars_for_step(&opt, 1, DIM, &sc);
	cr_assert_eq(tier_step(t, &sc), 0, "nothing left to step");
	cr_assert_eq(tier_get_rows(t, 0, s, 2, out), EMDB_OK);
	cr_assert(!memcmp(out, rows, sizeof(out)), "discarded gradients changed no row");
	/* Only what is scattered after the discard is stepped. */
	cr_assert_eq(tier_scatter_add(t, 0, s + 1, 1, g + DIM), EMDB_OK);
	cr_assert_eq(tier_step(t, &sc), 1);
	memcpy(want, rows, sizeof(want));
	ref_step(EMDB_OPT_SGD, &sc, want + DIM, g + DIM);
	cr_assert_eq(tier_get_rows(t, 0, s, 2, out), EMDB_OK);
	cr_assert(!memcmp(out, want, sizeof(out)));
	tier_close(t);
}

TIER_CASE(host_memory_is_not_the_tiers)
{
	tier_config c = cfg_for(EMDB_OPT_SGD, 1);
	tier *t = open_or_skip(kind, &c);
	float host[DIM] = { 1.0f }, back[DIM];

	cr_assert(!tier_ptr_in_tier(t, 0, host), "a host array");
	cr_assert(!tier_ptr_in_tier(t, 0, NULL));
	cr_assert_eq(tier_copy_in(t, 0, back, host, sizeof(host)), EMDB_ERR_INVALID,
		     "copy into host memory as if it were the tier's");
	cr_assert_eq(tier_copy_out(t, 0, back, host, sizeof(host)), EMDB_ERR_INVALID);
	tier_close(t);
}

/* A request's device part enqueued, its host part meanwhile, one wait:
 * the same rows and sums as the synchronous calls, on every backend,
 * with the buffers from tier_host_alloc (pinned for CUDA). */
TIER_CASE(submitted_work_equals_the_synchronous_calls)
{
	tier_config c = cfg_for(EMDB_OPT_ADAGRAD, 1);
	tier *t = open_or_skip(kind, &c), *u = open_or_skip(kind, &c);
	uint32_t rf = tier_row_floats(&c);
	uint64_t s[6] = { 3, 9, 3, 0, 14, 9 };
	float rows[6 * 2 * DIM], g[6 * DIM], want[6 * DIM], a[2 * 2 * DIM * 6], b[2 * 2 * DIM * 6];
	float *out = tier_host_alloc(t, sizeof(want)), *pg = tier_host_alloc(t, sizeof(g));
	tier_job *j1 = NULL, *j2 = NULL;
	tier_stats st;
	emdb_optimizer opt;
	emdb_opt_scalars sc;

	cr_assert(out && pg);
	cr_assert_eq(rf, 2 * DIM);
	for (int k = 0; k < 6 * 2 * DIM; k++)
		rows[k] = fabsf(test_val(31, k));
	for (int k = 0; k < 6 * DIM; k++)
		pg[k] = g[k] = test_val(32, k);
	for (tier **x = (tier *[]){ t, u, NULL }; *x; x++) {
		cr_assert_eq(tier_chunk_alloc(*x, 0), EMDB_OK);
		cr_assert_eq(tier_chunk_alloc(*x, 1), EMDB_OK);
		cr_assert_eq(tier_put_rows(*x, (uint64_t[]){ 3, 9, 0, 14 }, 4, rows), EMDB_OK);
	}
	cr_assert_eq(tier_gather(u, 0, s, 6, want, false), EMDB_OK);
	cr_assert_eq(tier_gather_submit(t, 0, s, 6, out, &j1), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(tier_scatter_submit(t, 0, s, 6, pg, &j2), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(tier_pending(t), 4u, "the pending rows are known at submit");
	cr_assert_eq(tier_job_wait(t, j1), EMDB_OK);
	cr_assert(!memcmp(out, want, sizeof(want)), "the gathered rows");
	cr_assert_eq(tier_job_wait(t, j2), EMDB_OK);
	cr_assert_eq(tier_scatter_add(u, 0, s, 6, g), EMDB_OK);
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ADAGRAD, &opt), EMDB_OK);
	emdb_opt_scalars_for_step(&opt, 1, DIM, &sc);
	cr_assert_eq(tier_step(t, &sc), 4);
	cr_assert_eq(tier_step(u, &sc), 4);
	cr_assert_eq(tier_get_rows(t, 0, (uint64_t[]){ 3, 9, 0, 14 }, 4, a), EMDB_OK);
	cr_assert_eq(tier_get_rows(u, 0, (uint64_t[]){ 3, 9, 0, 14 }, 4, b), EMDB_OK);
	cr_assert(!memcmp(a, b, 4 * rf * sizeof(float)), "stepped from the submitted sums");
	/* Submit checks as the synchronous calls do, and enqueues nothing. */
	cr_assert_eq(tier_gather_submit(t, 0, (uint64_t[]){ 16 }, 1, out, &j1), EMDB_ERR_INVALID);
	cr_assert_null(j1);
	cr_assert_eq(tier_scatter_submit(t, 1, s, 1, pg, &j2), EMDB_ERR_INVALID, "replica 1 of 1");
	cr_assert_null(j2);
	tier_stats_get(t, &st);
	cr_assert_eq(st.jobs, 2u);
	cr_assert(st.host_bufs >= 2u);
	cr_assert(st.host_pinned > 0u, "the two buffers are the tier's");
	tier_host_free(t, out);
	tier_host_free(t, pg);
	/* Freed buffers are kept and handed out again, not pinned anew. */
	{
		tier_stats st2;

		tier_stats_get(t, &st);
		out = tier_host_alloc(t, sizeof(want));
		tier_stats_get(t, &st2);
		cr_assert_not_null(out);
		cr_assert_eq(st2.host_bufs, st.host_bufs + 1);
		cr_assert_eq(st2.host_pinned, st.host_pinned);
		tier_host_free(t, out);
	}
	tier_close(t);
	tier_close(u);
}

/* The test tier runs a job at its wait (or at the tier's next operation,
 * as a stream would): what the caller does between is observable. */
static void count_wait(void *ctx)
{
	(*(int *)ctx)++;
}

Test(tier_test, jobs_run_at_the_wait_in_submission_order)
{
	tier_config c = cfg_for(EMDB_OPT_SGD, 1);
	tier *t = open_or_skip(TIER_TEST, &c);
	uint64_t s[2] = { 1, 6 };
	float rows[2 * DIM], *out = tier_host_alloc(t, sizeof(rows)), g[2 * DIM], acc_rows[2 * DIM];
	tier_job *j = NULL, *k = NULL;
	tier_stats st0, st1;
	emdb_optimizer opt;
	emdb_opt_scalars sc;
	int waits = 0;

	cr_assert_eq(tier_chunk_alloc(t, 0), EMDB_OK);
	for (int i = 0; i < 2 * DIM; i++) {
		rows[i] = test_val(41, i);
		g[i] = test_val(42, i);
	}
	cr_assert_eq(tier_put_rows(t, s, 2, rows), EMDB_OK);
	tier_test_on_wait(t, count_wait, &waits);
	for (int i = 0; i < 2 * DIM; i++)
		out[i] = NAN;
	cr_assert_eq(tier_gather_submit(t, 0, s, 2, out, &j), EMDB_OK);
	cr_assert(isnan(out[0]) && isnan(out[2 * DIM - 1]), "nothing written before the wait");
	cr_assert_eq(waits, 0);
	cr_assert_eq(tier_job_wait(t, j), EMDB_OK);
	cr_assert_eq(waits, 1, "the hook ran at the wait, before the work");
	cr_assert(!memcmp(out, rows, sizeof(rows)));
	/* A later operation runs the jobs before it, as a stream does: the
	 * step sees the scattered sums although the wait comes after it. */
	cr_assert_eq(tier_scatter_submit(t, 0, s, 2, g, &k), EMDB_OK);
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_SGD, &opt), EMDB_OK);
	emdb_opt_scalars_for_step(&opt, 1, DIM, &sc);
	cr_assert_eq(tier_step(t, &sc), 2);
	cr_assert_eq(tier_job_wait(t, k), EMDB_OK);
	cr_assert_eq(waits, 1, "the job had run already: no hook");
	memcpy(acc_rows, rows, sizeof(rows));
	ref_step(EMDB_OPT_SGD, &sc, acc_rows, g);
	ref_step(EMDB_OPT_SGD, &sc, acc_rows + DIM, g + DIM);
	cr_assert_eq(tier_get_rows(t, 0, s, 2, out), EMDB_OK);
	cr_assert(!memcmp(out, acc_rows, sizeof(rows)));
	/* The device fails while a job runs: IO at the wait, failed for good. */
	tier_stats_get(t, &st0);
	cr_assert_eq(tier_gather_submit(t, 0, s, 2, out, &j), EMDB_OK);
	tier_test_fail_wait(t);
	cr_assert_eq(tier_job_wait(t, j), EMDB_ERR_IO);
	tier_stats_get(t, &st1);
	cr_assert(st1.failed);
	cr_assert_eq(st1.bytes_d2h, st0.bytes_d2h, "nothing came back");
	cr_assert_eq(tier_gather_submit(t, 0, s, 2, out, &j), EMDB_ERR_IO);
	tier_host_free(t, out);
	tier_close(t);
}

/* The test tier's buffers stand in for a trainer's device memory. */
Test(tier_test, buffers_are_the_tiers_memory)
{
	tier_config c = cfg_for(EMDB_OPT_SGD, 2);
	tier *t = NULL;
	tier_stats st;
	uint64_t s[2] = { 3, 1 };
	float rows[2 * DIM], host[2 * DIM], *buf[TIER_TEST_BUFFERS + 1];

	cr_assert_eq(tier_open(TIER_TEST, &c, &t), EMDB_OK);
	for (int k = 0; k < TIER_TEST_BUFFERS; k++)
		cr_assert_not_null(buf[k] = tier_test_buffer(t, sizeof(rows)));
	cr_assert_null(tier_test_buffer(t, 8), "at most TIER_TEST_BUFFERS");
	cr_assert(tier_ptr_in_tier(t, 1, buf[0] + 2 * DIM - 1) && !tier_ptr_in_tier(t, 0, buf[0] + 2 * DIM),
		  "inside the buffer, not past it");
	cr_assert(!tier_ptr_in_tier(t, 2, buf[0]), "replica 2 of 2");
	cr_assert_eq(tier_chunk_alloc(t, 0), EMDB_OK);
	for (int k = 0; k < 2 * DIM; k++)
		rows[k] = test_val(31, k);
	cr_assert_eq(tier_put_rows(t, s, 2, rows), EMDB_OK);
	cr_assert_eq(tier_gather(t, 1, s, 2, buf[1], true), EMDB_OK);
	cr_assert_eq(tier_copy_out(t, 0, host, buf[1], sizeof(host)), EMDB_OK);
	cr_assert(!memcmp(host, rows, sizeof(host)));
	cr_assert_eq(tier_copy_in(t, 0, buf[2], host, sizeof(host)), EMDB_OK);
	cr_assert(!memcmp(buf[2], rows, sizeof(rows)));
	tier_stats_get(t, &st);
	cr_assert_eq(st.bytes_d2d, sizeof(rows), "the gather stayed in the tier");
	cr_assert_eq(st.bytes_d2h, sizeof(rows));
	tier_test_free_buffer(t, buf[3]);
	cr_assert(!tier_ptr_in_tier(t, 0, buf[3]), "freed");
	tier_test_fail_after(t, 0, EMDB_ERR_NOMEM);
	cr_assert_eq(tier_copy_in(t, 0, buf[2], host, sizeof(host)), EMDB_ERR_NOMEM);
	tier_close(t); /* frees the others */
}

Test(tier_test, capacity_counters_and_failures)
{
	tier_config c = cfg_for(EMDB_OPT_SGD, 1);
	tier *t = NULL;
	tier_stats st;
	uint64_t s[2] = { 0, 1 };
	float rows[2 * DIM], out[2 * DIM];
	emdb_opt_scalars sc;
	emdb_optimizer opt;

	c.test_chunks = 2;
	cr_assert_eq(tier_open(TIER_TEST, &c, &t), EMDB_OK);
	cr_assert_eq(tier_chunk_alloc(t, 0), EMDB_OK);
	cr_assert_eq(tier_chunk_alloc(t, 3), EMDB_OK);
	cr_assert_eq(tier_chunk_alloc(t, 1), EMDB_ERR_NOMEM, "capacity is 2 chunks");
	tier_chunk_free(t, 3);
	tier_stats_get(t, &st);
	cr_assert_eq(st.chunks, 1u);
	cr_assert_eq(st.bytes_in_use, (uint64_t)RPC * DIM * sizeof(float));
	for (int k = 0; k < 2 * DIM; k++)
		rows[k] = test_val(12, k);
	cr_assert_eq(tier_put_rows(t, s, 2, rows), EMDB_OK);
	cr_assert_eq(tier_gather(t, 0, s, 2, out, false), EMDB_OK);
	tier_stats_get(t, &st);
	cr_assert_eq(st.bytes_h2d, 2u * DIM * sizeof(float));
	cr_assert_eq(st.bytes_d2h, 2u * DIM * sizeof(float));

	/* An injected NOMEM changes nothing and the tier goes on. */
	tier_test_fail_after(t, 0, EMDB_ERR_NOMEM);
	cr_assert_eq(tier_chunk_alloc(t, 1), EMDB_ERR_NOMEM);
	cr_assert_eq(tier_chunk_alloc(t, 1), EMDB_OK);
	tier_test_fail_after(t, 1, EMDB_ERR_NOMEM);
	cr_assert_eq(tier_scatter_add(t, 0, s, 2, rows), EMDB_OK, "the first op passes");
	cr_assert_eq(tier_scatter_add(t, 0, s, 2, rows), EMDB_ERR_NOMEM, "the second fails");
	cr_assert_eq(tier_pending(t), 2u);
	tier_test_fail_after(t, 0, EMDB_ERR_NOMEM);
	cr_assert_eq(tier_scatter_add(t, 0, (uint64_t[]){ 9 }, 1, rows), EMDB_ERR_NOMEM);
	cr_assert_eq(tier_pending(t), 2u, "a refused scatter leaves no row pending");

	/* An injected IO fails the tier for good. */
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_SGD, &opt), EMDB_OK);
	emdb_opt_scalars_for_step(&opt, 1, DIM, &sc);
	tier_test_fail_after(t, 0, EMDB_ERR_IO);
	cr_assert_eq(tier_step(t, &sc), EMDB_ERR_IO);
	cr_assert_eq(tier_gather(t, 0, s, 2, out, false), EMDB_ERR_IO, "sticky");
	cr_assert_eq(tier_chunk_alloc(t, 2), EMDB_ERR_IO);
	tier_stats_get(t, &st);
	cr_assert(st.failed);
	cr_assert(tier_test_calls(t) >= 8);
	tier_close(t);
}

Test(tier, kinds_and_bad_config)
{
	tier_config c = cfg_for(EMDB_OPT_SGD, 1);
	tier *t = (tier *)1;
	char why[200];

	cr_assert(tier_compiled(TIER_HOST));
	cr_assert(tier_compiled(TIER_TEST));
	cr_assert(tier_available(TIER_HOST, why, sizeof(why)));
	if (!tier_compiled(TIER_CUDA)) {
		cr_assert(!tier_available(TIER_CUDA, why, sizeof(why)));
		cr_assert(strstr(why, "not compiled"), "%s", why);
		cr_assert_eq(tier_open(TIER_CUDA, &c, &t), EMDB_ERR_UNSUPPORTED);
		cr_assert_null(t);
	} else if (!tier_available(TIER_CUDA, why, sizeof(why))) {
		cr_assert(why[0], "a reason is given");
		cr_assert_eq(tier_open(TIER_CUDA, &c, &t), EMDB_ERR_UNSUPPORTED);
	}
	c.dim = 0;
	cr_assert_eq(tier_open(TIER_HOST, &c, &t), EMDB_ERR_INVALID);
	c.dim = 4;
	c.replicas = 0;
	cr_assert_eq(tier_open(TIER_HOST, &c, &t), EMDB_ERR_INVALID);
}
