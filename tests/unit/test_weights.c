/*
 * test_weights.c - per-sample weights of pooled Pull and Push
 * (emdb_pull_bags_weighted, emdb_push_bags_weighted), as torch's
 * EmbeddingBag(mode='sum') with per_sample_weights: a bag is the sum of
 * w_i * row_i, and its backward gives each ID w_i * grad_bag.  Checked
 * against a reference computed here from the rows, by IDs and by ticket;
 * weights of 1 give the unweighted sum bit for bit; MEAN with weights and
 * NULL weights are refused and change nothing.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include <emdb/db.h>

#include "tests/lib/helpers.h"

#define D 5
#define NB 6
#define N 14

/* Bags {0..3} {} {4..8} {9} {10..12} {13}; IDs repeat within and across
 * bags, and 0 and 2^64-1 are among them. */
static const uint64_t ids[N] = { 7, 0, 7, UINT64_MAX, 3, 3, 9, 0, 11, 5, 7, 8, 9, 2 };
static const uint64_t offs[NB + 1] = { 0, 4, 4, 9, 10, 13, 14 };
static const float w[N] = { 0.5f, -2, 1.25f, 0, 3, 3, -0.75f, 1, 0.125f, 2.5f, 1, -1, 0.3f, 4 };

static void close_to(float got, float want, const char *what, int i)
{
	float tol = 1e-5f * (1 + fabsf(want));
	cr_assert(fabsf(got - want) <= tol, "%s %d: %.9g, reference %.9g", what, i, (double)got,
		  (double)want);
}

Test(weights, pull_is_the_weighted_sum_of_each_bag)
{
	emdb_db *db = open_db(4);
	uint32_t t = make_table(db, "w", D, EMDB_OPT_ADAGRAD, EMDB_INIT_UNIFORM, -1, 1);
	float rows[N * D], got[NB * D], via_ticket[NB * D];
	cr_assert_eq(emdb_pull(db, t, ids, N, D, rows), 0);
	cr_assert_eq(emdb_pull_bags_weighted(db, t, ids, N, offs, NB, EMDB_POOL_SUM, w, D, got), 0, "%s",
		     emdb_last_error());
	for (int b = 0; b < NB; b++)
		for (int c = 0; c < D; c++) {
			float s = 0;
			for (uint64_t i = offs[b]; i < offs[b + 1]; i++)
				s += w[i] * rows[i * D + c];
			close_to(got[b * D + c], s, "bag", b);
		}
	for (int c = 0; c < D; c++)
		cr_assert_eq(got[1 * D + c], 0.0f, "an empty bag is zeros");

	emdb_ticket *tk;
	cr_assert_eq(emdb_prefetch(db, t, ids, N, &tk), 0);
	cr_assert_eq(emdb_pull_bags_weighted_ticket(db, t, tk, offs, NB, EMDB_POOL_SUM, w, D, via_ticket), 0);
	cr_assert_eq(memcmp(got, via_ticket, sizeof(got)), 0, "by ticket and by IDs differ");

	/* Weights of 1 are the plain SUM, bit for bit. */
	float ones[N], plain[NB * D];
	for (int i = 0; i < N; i++)
		ones[i] = 1;
	cr_assert_eq(emdb_pull_bags(db, t, ids, N, offs, NB, EMDB_POOL_SUM, D, plain), 0);
	cr_assert_eq(emdb_pull_bags_weighted(db, t, ids, N, offs, NB, EMDB_POOL_SUM, ones, D, got), 0);
	cr_assert_eq(memcmp(got, plain, sizeof(got)), 0);
	emdb_ticket_free(tk);
	emdb_db_close(db);
}

/* SGD with lr 1 from zeros: a row ends as minus the sum of what it was
 * pushed, here w_i * grad_bag over its positions. */
Test(weights, push_gives_each_id_its_weight_times_the_bag_gradient)
{
	emdb_db *db = open_db(4);
	uint32_t t = make_sgd_lr1_table(db, D);
	float g[NB * D];
	for (int i = 0; i < NB * D; i++)
		g[i] = (float)(i % 7) - 2.5f;
	cr_assert_eq(emdb_push_bags_weighted(db, t, ids, N, offs, NB, EMDB_POOL_SUM, w, D, g), 0, "%s",
		     emdb_last_error());
	cr_assert_eq(emdb_update(db, t, NULL), 0);

	uint64_t uniq[9] = { 0, 2, 3, 5, 7, 8, 9, 11, UINT64_MAX };
	float got[9 * D];
	cr_assert_eq(emdb_lookup(db, t, uniq, 9, D, got, NULL), 0);
	for (int u = 0; u < 9; u++)
		for (int c = 0; c < D; c++) {
			float want = 0;
			for (int b = 0; b < NB; b++)
				for (uint64_t i = offs[b]; i < offs[b + 1]; i++)
					if (ids[i] == uniq[u])
						want -= w[i] * g[b * D + c];
			close_to(got[u * D + c], want, "row", u);
		}

	/* By ticket: the same rows as by IDs, on a twin table. */
	emdb_table_config cfg;
	cr_assert_eq(emdb_table_get_config(db, t, &cfg), 0);
	strcpy(cfg.name, "twin");
	uint32_t t2;
	cr_assert_eq(emdb_table_create(db, &cfg, &t2), 0);
	emdb_ticket *tk;
	cr_assert_eq(emdb_prefetch(db, t2, ids, N, &tk), 0);
	cr_assert_eq(emdb_push_bags_weighted_ticket(db, t2, tk, offs, NB, EMDB_POOL_SUM, w, D, g), 0);
	cr_assert_eq(emdb_update(db, t2, NULL), 0);
	float twin[9 * D];
	cr_assert_eq(emdb_lookup(db, t2, uniq, 9, D, twin, NULL), 0);
	cr_assert_eq(memcmp(got, twin, sizeof(got)), 0, "by ticket and by IDs differ");
	emdb_ticket_free(tk);
	emdb_db_close(db);
}

/* torch refuses per_sample_weights outside mode='sum'; so does emdb, and
 * a refused call inserts no row and pushes nothing. */
Test(weights, mean_with_weights_and_null_weights_are_refused)
{
	emdb_db *db = open_db(4);
	uint32_t t = make_sgd_lr1_table(db, D);
	float out[NB * D], g[NB * D] = { 0 };
	cr_assert_eq(emdb_pull_bags_weighted(db, t, ids, N, offs, NB, EMDB_POOL_MEAN, w, D, out),
		     EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "need pooling SUM"), "%s", emdb_last_error());
	cr_assert_eq(emdb_push_bags_weighted(db, t, ids, N, offs, NB, EMDB_POOL_MEAN, w, D, g),
		     EMDB_ERR_INVALID);
	cr_assert_eq(emdb_pull_bags_weighted(db, t, ids, N, offs, NB, EMDB_POOL_SUM, NULL, D, out),
		     EMDB_ERR_INVALID);
	cr_assert_eq(emdb_push_bags_weighted(db, t, ids, N, offs, NB, EMDB_POOL_SUM, NULL, D, g),
		     EMDB_ERR_INVALID);
	uint64_t bad_offs[NB + 1] = { 0, 4, 4, 9, 10, 13, 15 };
	cr_assert_eq(emdb_push_bags_weighted(db, t, ids, N, bad_offs, NB, EMDB_POOL_SUM, w, D, g),
		     EMDB_ERR_INVALID);
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.rows, 0, "a refused call inserted rows");
	cr_assert_eq(info.stats.pending_rows, 0, "a refused call pushed gradients");
	cr_assert_eq(info.stats.calls_push, 0);
	emdb_db_close(db);
}
