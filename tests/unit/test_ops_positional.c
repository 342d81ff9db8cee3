/*
 * test_ops_positional.c - the engine's positional forms (db/db_cluster.h),
 * what a cluster home node runs its local part with: a batch that is part
 * of a larger request, whose rows are written to (Pull, Lookup, state
 * reads) or whose gradients are read from (Push, Push+Update) the
 * request's own buffers at the part's request positions.
 *
 * What the home node relies on: each form gives bit for bit what the
 * plain call gives on a gathered copy, scattered back (outputs, found
 * flags, rows and optimizer state afterwards), by IDs and by ticket, with
 * duplicate and absent IDs; it writes no position outside the part; and
 * bad input (no positions, a position past the gradients) is refused and
 * changes nothing.
 *
 * The reference runs in a database of its own (initial values depend on
 * the table's id, so the twin tables have the same id).
 */
#include <stdlib.h>

#include <emdb/db.h>

#include "db/db_cluster.h"
#include "tests/lib/helpers.h"

enum { DIM = 8, R = 96, N = R / 3, STEPS = 4 };

#define SENTINEL 0x7f

typedef struct twin {
	emdb_db *ref, *db;
	uint32_t tref, t;
	uint32_t sf; /* state floats per row */
} twin;

static void twin_open(twin *w)
{
	w->ref = open_db(4);
	w->db = open_db(4);
	w->tref = make_table(w->ref, "t", DIM, EMDB_OPT_ADAM, EMDB_INIT_UNIFORM, -0.5, 0.5);
	w->t = make_table(w->db, "t", DIM, EMDB_OPT_ADAM, EMDB_INIT_UNIFORM, -0.5, 0.5);
	cr_assert_eq(w->tref, w->t);
	w->sf = emdb_optimizer_state_floats(EMDB_OPT_ADAM, DIM);
}

static void twin_close(twin *w)
{
	emdb_db_close(w->ref);
	emdb_db_close(w->db);
}

/* Step s's request: IDs with duplicates; the part is every third
 * position, ascending, as a home node's split gives it. */
static void request(int s, uint64_t *req, uint32_t *pos, uint64_t *ids)
{
	for (uint32_t i = 0; i < R; i++)
		req[i] = scramble((uint64_t)(i * 7 + s * 5) % 40);
	for (uint32_t k = 0; k < N; k++) {
		pos[k] = 3 * k + 1;
		ids[k] = req[pos[k]];
	}
}

static void grads_of(int s, float *g)
{
	for (uint32_t i = 0; i < R * DIM; i++)
		g[i] = (float)((i * 13 + (uint32_t)s * 7) % 29) * 0.01f - 0.14f;
}

static void gather(float *dst, const float *src, const uint32_t *pos, uint32_t w)
{
	for (uint32_t k = 0; k < N; k++)
		memcpy(dst + (size_t)k * w, src + (size_t)pos[k] * w, w * sizeof(float));
}

/* The reference's part scattered into a request-sized buffer of
 * sentinels: what the positional form must leave there. */
static void scatter(float *dst, const float *src, const uint32_t *pos, uint32_t w)
{
	memset(dst, SENTINEL, (size_t)R * w * sizeof(float));
	for (uint32_t k = 0; k < N; k++)
		memcpy(dst + (size_t)pos[k] * w, src + (size_t)k * w, w * sizeof(float));
}

/* Every row and optimizer state of the IDs seen, equal in both. */
static void expect_same_tables(twin *w)
{
	uint64_t all[40];
	static float a[40 * 64], b[40 * 64];
	for (uint32_t i = 0; i < 40; i++)
		all[i] = scramble(i);
	cr_assert_eq(emdb_lookup(w->ref, w->tref, all, 40, DIM, a, NULL), 0);
	cr_assert_eq(emdb_lookup(w->db, w->t, all, 40, DIM, b, NULL), 0);
	cr_assert(memcmp(a, b, 40 * DIM * sizeof(float)) == 0, "rows differ");
	cr_assert_eq(emdb_read_state(w->ref, w->tref, all, 40, a, NULL), 0);
	cr_assert_eq(emdb_read_state(w->db, w->t, all, 40, b, NULL), 0);
	cr_assert(memcmp(a, b, 40 * w->sf * sizeof(float)) == 0, "optimizer state differs");
}

Test(ops_positional, every_form_equals_the_plain_call_on_a_copy)
{
	twin w;
	twin_open(&w);
	uint64_t req[R], ids[N];
	uint32_t pos[N];
	static float g[R * DIM], part[N * 64], want[R * 64], got[R * 64];
	for (int s = 0; s < STEPS; s++) {
		request(s, req, pos, ids);
		grads_of(s, g);
		emdb_ticket *tr, *td;
		cr_assert_eq(emdb_prefetch(w.ref, w.tref, ids, N, &tr), 0);
		cr_assert_eq(emdb_prefetch(w.db, w.t, ids, N, &td), 0);

		/* Pull by IDs and by ticket. */
		cr_assert_eq(emdb_pull(w.ref, w.tref, ids, N, DIM, part), 0);
		scatter(want, part, pos, DIM);
		memset(got, SENTINEL, sizeof(got));
		cr_assert_eq(emdb__pull_at(w.db, w.t, ids, N, NULL, DIM, pos, got), 0, "%s", emdb_last_error());
		cr_assert(memcmp(want, got, R * DIM * sizeof(float)) == 0, "step %d: pull by IDs", s);
		memset(got, SENTINEL, sizeof(got));
		cr_assert_eq(emdb__pull_at(w.db, w.t, NULL, 0, td, DIM, pos, got), 0, "%s", emdb_last_error());
		cr_assert(memcmp(want, got, R * DIM * sizeof(float)) == 0, "step %d: pull by ticket", s);

		/* Push: by IDs (the positions as rows, no scale), by ticket. */
		gather(part, g, pos, DIM);
		if (s % 2 == 0) {
			cr_assert_eq(emdb_push(w.ref, w.tref, ids, N, DIM, part), 0);
			cr_assert_eq(emdb__push_mapped_as(w.db, w.t, EMDB_WORKER_NONE, ids, N, NULL, pos, NULL, NULL, R, DIM,
							  g),
				     0, "%s", emdb_last_error());
		} else {
			cr_assert_eq(emdb_push_ticket(w.ref, w.tref, tr, DIM, part), 0);
			cr_assert_eq(emdb__push_mapped_as(w.db, w.t, EMDB_WORKER_NONE, NULL, 0, td, pos, NULL, NULL, R, DIM,
							  g),
				     0, "%s", emdb_last_error());
		}

		/* Push+Update, by IDs and by ticket in turn: it applies the
		 * push above too. */
		uint64_t rr = 0, rd = 0;
		if (s % 2 == 0) {
			cr_assert_eq(emdb_push_update_ticket(w.ref, w.tref, tr, DIM, part, &rr), 0);
			cr_assert_eq(emdb__push_update_at(w.db, w.t, NULL, 0, td, DIM, pos, g, &rd), 0, "%s",
				     emdb_last_error());
		} else {
			cr_assert_eq(emdb_push_update(w.ref, w.tref, ids, N, DIM, part, &rr), 0);
			cr_assert_eq(emdb__push_update_at(w.db, w.t, ids, N, NULL, DIM, pos, g, &rd), 0, "%s",
				     emdb_last_error());
		}
		cr_assert_eq(rr, rd, "step %d: %llu rows updated, the reference %llu", s, (unsigned long long)rd,
			     (unsigned long long)rr);
		emdb_ticket_free(tr);
		emdb_ticket_free(td);
		expect_same_tables(&w);
	}

	/* Lookup and state reads of held and absent IDs, found flags at the
	 * positions, nothing written elsewhere. */
	request(0, req, pos, ids);
	for (uint32_t k = 0; k < N; k += 4)
		ids[k] = scramble(1000 + k);
	uint8_t fpart[N], fwant[R], fgot[R];
	cr_assert_eq(emdb_lookup(w.ref, w.tref, ids, N, DIM, part, fpart), 0);
	scatter(want, part, pos, DIM);
	memset(fwant, SENTINEL, R);
	for (uint32_t k = 0; k < N; k++)
		fwant[pos[k]] = fpart[k];
	memset(got, SENTINEL, sizeof(got));
	memset(fgot, SENTINEL, R);
	cr_assert_eq(emdb__lookup_at(w.db, w.t, ids, N, DIM, pos, got, fgot), 0, "%s", emdb_last_error());
	cr_assert(memcmp(want, got, R * DIM * sizeof(float)) == 0, "lookup rows");
	cr_assert(memcmp(fwant, fgot, R) == 0, "lookup found flags");
	cr_assert_eq(fgot[pos[0]], 0, "an absent ID found");
	cr_assert_eq(fgot[pos[1]], 1, "a held ID not found");

	cr_assert_eq(emdb_read_state(w.ref, w.tref, ids, N, part, fpart), 0);
	scatter(want, part, pos, w.sf);
	memset(fwant, SENTINEL, R);
	for (uint32_t k = 0; k < N; k++)
		fwant[pos[k]] = fpart[k];
	memset(got, SENTINEL, sizeof(got));
	memset(fgot, SENTINEL, R);
	cr_assert_eq(emdb__read_state_at(w.db, w.t, ids, N, pos, got, fgot), 0, "%s", emdb_last_error());
	cr_assert(memcmp(want, got, R * w.sf * sizeof(float)) == 0, "state read");
	cr_assert(memcmp(fwant, fgot, R) == 0, "state read's found flags");
	twin_close(&w);
}

Test(ops_positional, bad_input_is_refused_and_changes_nothing)
{
	twin w;
	twin_open(&w);
	uint64_t req[R], ids[N];
	uint32_t pos[N];
	static float g[R * DIM], out[R * 64];
	request(0, req, pos, ids);
	grads_of(0, g);
	uint8_t found[R];
	uint64_t rows = 0;
	cr_assert_eq(emdb__pull_at(w.db, w.t, ids, N, NULL, DIM, NULL, out), EMDB_ERR_INVALID);
	cr_assert_eq(emdb__lookup_at(w.db, w.t, ids, N, DIM, NULL, out, found), EMDB_ERR_INVALID);
	cr_assert_eq(emdb__read_state_at(w.db, w.t, ids, N, NULL, out, found), EMDB_ERR_INVALID);
	cr_assert_eq(emdb__push_update_at(w.db, w.t, ids, N, NULL, DIM, NULL, g, &rows), EMDB_ERR_INVALID);
	/* A position past the gradients given: refused before anything. */
	uint32_t bad[N];
	memcpy(bad, pos, sizeof(bad));
	bad[N - 1] = R;
	cr_assert_eq(emdb__push_mapped_as(w.db, w.t, EMDB_WORKER_NONE, ids, N, NULL, bad, NULL, NULL, R, DIM, g),
		     EMDB_ERR_INVALID);
	emdb_table_info a;
	cr_assert_eq(emdb_table_describe(w.db, w.t, &a), 0);
	cr_assert_eq(a.stats.rows, 0, "%llu rows after refused calls", (unsigned long long)a.stats.rows);
	cr_assert_eq(a.stats.step, 0);
	expect_same_tables(&w);
	twin_close(&w);
}
