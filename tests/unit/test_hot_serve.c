/*
 * test_hot_serve.c - Pull, Push, Update and Prefetch through the device
 * replica of the hot rows (db/hot.h, db/hot_serve.c), with the test tier
 * (db/tier_test.h) standing in for the GPU.
 *
 * What a user relies on: with gpu_memory set, Pull (plain and pooled, by
 * IDs and by ticket), Push and Update give exactly what a database
 * without a replica gives, bit for bit, under duplicates, a full device
 * and failing device operations; and the device paths are the ones taken
 * (the hot set's and the tier's counters say so): Pull gathers hot and
 * staged rows from the replica, Push scatters hot rows' sums into the
 * device's accumulators and Update steps the replica from them, Prefetch
 * stages its batch so that the Pull copies nothing to the device, and
 * device memory passed as Pull output or Push input is used in place.
 */
#include <math.h>

#include "tests/lib/hot_twin.h"

/* The six Pull forms on ids (k = 0..2: plain, pooled MEAN, weighted SUM;
 * by IDs, or by ticket when tk) into out. */
static void pull_form(emdb_db *db, uint32_t t, int k, const uint64_t *ids, emdb_ticket *tk, float *out)
{
	uint64_t off[BAGS + 1];
	float wts[N];

	offsets_for(off);
	for (size_t i = 0; i < N; i++)
		wts[i] = 0.25f + (float)(i % 5) * 0.5f;
	if (k == 0)
		cr_assert_eq(tk ? emdb_pull_ticket(db, t, tk, DIM, out) : emdb_pull(db, t, ids, N, DIM, out),
			     0, "%s", emdb_last_error());
	else if (k == 1)
		cr_assert_eq(tk ? emdb_pull_bags_ticket(db, t, tk, off, BAGS, EMDB_POOL_MEAN, DIM, out)
				: emdb_pull_bags(db, t, ids, N, off, BAGS, EMDB_POOL_MEAN, DIM, out),
			     0, "%s", emdb_last_error());
	else
		cr_assert_eq(tk ? emdb_pull_bags_weighted_ticket(db, t, tk, off, BAGS, EMDB_POOL_SUM, wts, DIM,
								 out)
				: emdb_pull_bags_weighted(db, t, ids, N, off, BAGS, EMDB_POOL_SUM, wts, DIM,
							  out),
			     0, "%s", emdb_last_error());
}

Test(hot_serve, pull_gathers_hot_rows_from_the_replica)
{
	twin w;
	uint64_t ids[N];
	float a[N * DIM], b[N * DIM];

	twin_open(&w, 64, 0, 2);
	warm(&w);
	batch(ids, 5000);
	for (int k = 0; k < 3; k++) {
		hot_stats h0 = hstats(&w), h1;
		tier_stats t0 = tstats(&w), t1;

		pull_form(w.ref, w.t, k, ids, NULL, a);
		pull_form(w.db, w.t, k, ids, NULL, b);
		cr_assert(!memcmp(a, b, (k ? BAGS : N) * DIM * sizeof(float)), "form %d differs", k);
		h1 = hstats(&w);
		t1 = tstats(&w);
		cr_assert_eq(h1.rows_gathered - h0.rows_gathered, 2u * HOT,
			     "form %d: every hot position read from the replica (%llu)", k,
			     (unsigned long long)(h1.rows_gathered - h0.rows_gathered));
		cr_assert_eq(t1.bytes_d2h - t0.bytes_d2h, 2u * HOT * DIM * sizeof(float));
		cr_assert_eq(h1.fallbacks, h0.fallbacks);
	}
	/* By ticket: its Prefetch staged the cold rows too. */
	emdb_ticket *ta, *tb;

	cr_assert_eq(emdb_prefetch(w.ref, w.t, ids, N, &ta), 0);
	cr_assert_eq(emdb_prefetch(w.db, w.t, ids, N, &tb), 0);
	for (int k = 0; k < 3; k++) {
		hot_stats h0, h1;

		h0 = hstats(&w);
		pull_form(w.ref, w.t, k, NULL, ta, a);
		pull_form(w.db, w.t, k, NULL, tb, b);
		h1 = hstats(&w);
		cr_assert(!memcmp(a, b, (k ? BAGS : N) * DIM * sizeof(float)), "ticket form %d differs", k);
		cr_assert_eq(h1.rows_gathered - h0.rows_gathered, (uint64_t)N, "every row from the tier");
	}
	emdb_ticket_free(ta);
	emdb_ticket_free(tb);
	twin_close(&w);
}

/* Push of each form, one per step, duplicates in every batch: the
 * replica steps from the device's accumulators, and equals the host. */
Test(hot_serve, push_scatters_and_update_steps_from_the_device)
{
	twin w;
	uint64_t ids[N], off[BAGS + 1];
	float g[N * DIM], wts[N];

	twin_open(&w, 64, 0, 2);
	warm(&w);
	offsets_for(off);
	for (size_t i = 0; i < N; i++)
		wts[i] = 1.5f - (float)(i % 3) * 0.5f;
	for (int s = 10; s < 16; s++) {
		hot_stats h0 = hstats(&w), h1;

		batch(ids, 1000 + (uint64_t)s * COLD);
		grads_for(s, g, N);
		for (int d = 0; d < 2; d++) {
			emdb_db *db = d ? w.db : w.ref;
			emdb_ticket *tk;
			int rc;

			cr_assert_eq(emdb_prefetch(db, w.t, ids, N, &tk), 0);
			if (s % 3 == 0)
				rc = emdb_push_ticket(db, w.t, tk, DIM, g);
			else if (s % 3 == 1)
				rc = emdb_push_bags(db, w.t, ids, N, off, BAGS, EMDB_POOL_MEAN, DIM, g);
			else
				rc = emdb_push_bags_weighted_ticket(db, w.t, tk, off, BAGS, EMDB_POOL_SUM, wts,
								    DIM, g);
			cr_assert_eq(rc, 0, "%s", emdb_last_error());
			cr_assert_eq(emdb_update(db, w.t, NULL), 0);
			emdb_ticket_free(tk);
		}
		h1 = hstats(&w);
		cr_assert_eq(h1.rows_scattered - h0.rows_scattered, (uint64_t)HOT, "step %d: %llu", s,
			     (unsigned long long)(h1.rows_scattered - h0.rows_scattered));
		cr_assert_eq(h1.steps_device - h0.steps_device, 1u, "step %d: stepped on the device", s);
		cr_assert_eq(h1.steps_replayed, h0.steps_replayed, "step %d: nothing replayed", s);
		check_replica(&w);
		assert_same(&w, ids, N);
	}
	/* Two pushes of the same hot rows in one step: the device's sum
	 * would differ from the host's, so the host's sums are replayed. */
	{
		hot_stats h0 = hstats(&w), h1;

		batch(ids, 9000);
		grads_for(3, g, N);
		for (int d = 0; d < 2; d++) {
			emdb_db *db = d ? w.db : w.ref;

			cr_assert_eq(emdb_push(db, w.t, ids, N, DIM, g), 0);
			cr_assert_eq(emdb_push(db, w.t, ids, HOT, DIM, g + DIM), 0);
			cr_assert_eq(emdb_update(db, w.t, NULL), 0);
		}
		h1 = hstats(&w);
		cr_assert_eq(h1.steps_replayed - h0.steps_replayed, 1u);
		cr_assert_eq(h1.steps_device, h0.steps_device);
		check_replica(&w);
		assert_same(&w, ids, N);
	}
	twin_close(&w);
}

/* One push and Update of a fresh batch in both twins; the tier's next
 * operation after `skip` fails with err first (0: none). */
static void push_step(twin *w, int s, uint32_t skip, int err)
{
	uint64_t ids[N];
	float g[N * DIM];

	batch(ids, 20000 + (uint64_t)s * COLD);
	grads_for(s, g, N);
	for (int d = 0; d < 2; d++) {
		emdb_db *db = d ? w->db : w->ref;

		if (d && err)
			tier_test_fail_after(hot_tier(table_of(w)->hot), skip, err);
		cr_assert_eq(emdb_push(db, w->t, ids, N, DIM, g), 0, "%s", emdb_last_error());
		cr_assert_eq(emdb_update(db, w->t, NULL), 0);
	}
	assert_same(w, ids, N);
}

Test(hot_serve, failing_device_operations_lose_nothing)
{
	twin w;
	uint64_t ids[N];
	float a[N * DIM], b[N * DIM];
	emdb_tier_info ti;
	hot_stats h0, h1;

	twin_open(&w, 64, 0, 1);
	warm(&w);

	/* The scatter runs out of memory: that step is replayed. */
	h0 = hstats(&w);
	push_step(&w, 1, 0, EMDB_ERR_NOMEM);
	h1 = hstats(&w);
	cr_assert_eq(h1.steps_replayed - h0.steps_replayed, 1u);
	cr_assert_eq(h1.fallbacks - h0.fallbacks, 1u);
	check_replica(&w);

	/* The device refuses the optimizer step: replayed instead. */
	h0 = h1;
	push_step(&w, 2, 1, EMDB_ERR_NOMEM); /* op 0: the scatter, op 1: the step */
	h1 = hstats(&w);
	cr_assert_eq(h1.steps_replayed - h0.steps_replayed, 1u);
	cr_assert_eq(h1.steps_device, h0.steps_device);
	check_replica(&w);

	/* A step that works again after them. */
	h0 = h1;
	push_step(&w, 3, 0, 0);
	h1 = hstats(&w);
	cr_assert_eq(h1.steps_device - h0.steps_device, 1u);
	check_replica(&w);

	/* Pull's gather fails: the host serves the same floats. */
	batch(ids, 20000);
	tier_test_fail_after(hot_tier(table_of(&w)->hot), 0, EMDB_ERR_NOMEM);
	h0 = hstats(&w);
	cr_assert_eq(emdb_pull(w.db, w.t, ids, N, DIM, b), 0);
	cr_assert_eq(emdb_pull(w.ref, w.t, ids, N, DIM, a), 0);
	cr_assert(!memcmp(a, b, sizeof(a)));
	h1 = hstats(&w);
	cr_assert_eq(h1.fallbacks - h0.fallbacks, 1u);
	cr_assert_eq(h1.rows_gathered, h0.rows_gathered);

	/* The device fails in the scatter: dropped at the step, host goes on. */
	push_step(&w, 4, 0, EMDB_ERR_IO);
	cr_assert_eq(emdb_table_tier(w.db, w.t, &ti), 0);
	cr_assert(ti.failed);
	for (int s = 5; s < 5 + HOT_REVISE_STEPS; s++)
		push_step(&w, s, 0, 0);
	cr_assert_eq(emdb_pull(w.db, w.t, ids, N, DIM, b), 0);
	cr_assert_eq(emdb_pull(w.ref, w.t, ids, N, DIM, a), 0);
	cr_assert(!memcmp(a, b, sizeof(a)));
	twin_close(&w);
}

Test(hot_serve, prefetch_stages_its_batch_for_the_pull)
{
	twin w;
	uint64_t ids[N], more[4 * COLD];
	float a[N * DIM], b[N * DIM];
	emdb_ticket *ta, *tb;
	hot_stats h0, h1;
	tier_stats t0, t1, t2;

	twin_open(&w, 64, 0, 1);
	warm(&w);
	batch(ids, 7000);
	h0 = hstats(&w);
	t0 = tstats(&w);
	cr_assert_eq(emdb_prefetch(w.ref, w.t, ids, N, &ta), 0);
	cr_assert_eq(emdb_prefetch(w.db, w.t, ids, N, &tb), 0);
	h1 = hstats(&w);
	t1 = tstats(&w);
	cr_assert_eq(h1.rows_staged - h0.rows_staged, (uint64_t)COLD, "each cold row once");
	cr_assert(t1.bytes_h2d > t0.bytes_h2d, "staged: copied to the device");

	cr_assert_eq(emdb_pull_ticket(w.ref, w.t, ta, DIM, a), 0);
	cr_assert_eq(emdb_pull_ticket(w.db, w.t, tb, DIM, b), 0);
	cr_assert(!memcmp(a, b, sizeof(a)));
	t2 = tstats(&w);
	h0 = h1;
	h1 = hstats(&w);
	cr_assert_eq(t2.bytes_h2d, t1.bytes_h2d, "the Pull copied nothing to the device");
	cr_assert_eq(h1.rows_gathered - h0.rows_gathered, (uint64_t)N);

	/* An Update in between: the staged rows are stale, the host serves
	 * them (and its rows changed: the pushed gradients applied). */
	{
		float g[N * DIM];

		grads_for(7, g, N);
		cr_assert_eq(emdb_push_ticket(w.ref, w.t, ta, DIM, g), 0);
		cr_assert_eq(emdb_push_ticket(w.db, w.t, tb, DIM, g), 0);
		cr_assert_eq(emdb_update(w.ref, w.t, NULL), 0);
		cr_assert_eq(emdb_update(w.db, w.t, NULL), 0);
	}
	h0 = hstats(&w);
	cr_assert_eq(emdb_pull_ticket(w.ref, w.t, ta, DIM, a), 0);
	cr_assert_eq(emdb_pull_ticket(w.db, w.t, tb, DIM, b), 0);
	cr_assert(!memcmp(a, b, sizeof(a)));
	h1 = hstats(&w);
	cr_assert_eq(h1.rows_gathered - h0.rows_gathered, 2u * HOT, "only the members: %llu",
		     (unsigned long long)(h1.rows_gathered - h0.rows_gathered));
	emdb_ticket_free(ta);
	emdb_ticket_free(tb);

	/* More cold rows than free slots (64 - 32 members): as many as fit
	 * are staged, the rest read from the host. */
	for (size_t i = 0; i < 4 * COLD; i++)
		more[i] = scramble(30000 + i);
	h0 = hstats(&w);
	cr_assert_eq(emdb_prefetch(w.ref, w.t, more, 4 * COLD, &ta), 0);
	cr_assert_eq(emdb_prefetch(w.db, w.t, more, 4 * COLD, &tb), 0);
	h1 = hstats(&w);
	cr_assert_eq(h1.rows_staged - h0.rows_staged, 64u - h1.rows, "the free slots, no more");
	cr_assert_eq(emdb_pull_ticket(w.ref, w.t, ta, DIM, a), 0);
	cr_assert_eq(emdb_pull_ticket(w.db, w.t, tb, DIM, b), 0);
	cr_assert(!memcmp(a, b, 4 * COLD * DIM * sizeof(float)));
	emdb_ticket_free(ta);
	emdb_ticket_free(tb);
	twin_close(&w);
}

/* A mem:// trainer's device buffers (the test tier's own memory) as Pull
 * output and Push input. */
Test(hot_serve, device_pointers_as_pull_output_and_push_input)
{
	twin w;
	uint64_t ids[N], off[BAGS + 1];
	float a[N * DIM], g[N * DIM], host[N * DIM];
	emdb_ticket *ta, *tb;
	tier *tr;
	float *dev, *dgrad;
	hot_stats h0, h1;
	tier_stats t0, t1;

	twin_open(&w, 64, 0, 1);
	warm(&w);
	tr = hot_tier(table_of(&w)->hot);
	dev = tier_test_buffer(tr, sizeof(a));
	dgrad = tier_test_buffer(tr, sizeof(g));
	cr_assert(dev && dgrad);
	cr_assert(tier_ptr_in_tier(tr, 0, dev + 5) && !tier_ptr_in_tier(tr, 0, host),
		  "the tier tells its memory from the host's");
	offsets_for(off);
	batch(ids, 8000);

	/* Every row staged or hot: gathered straight into device memory. */
	cr_assert_eq(emdb_prefetch(w.ref, w.t, ids, N, &ta), 0);
	cr_assert_eq(emdb_prefetch(w.db, w.t, ids, N, &tb), 0);
	h0 = hstats(&w);
	t0 = tstats(&w);
	cr_assert_eq(emdb_pull_ticket(w.ref, w.t, ta, DIM, a), 0);
	cr_assert_eq(emdb_pull_ticket(w.db, w.t, tb, DIM, dev), 0, "%s", emdb_last_error());
	h1 = hstats(&w);
	t1 = tstats(&w);
	cr_assert(!memcmp(a, dev, sizeof(a)));
	cr_assert_eq(h1.rows_direct - h0.rows_direct, (uint64_t)N);
	cr_assert_eq(t1.bytes_d2h, t0.bytes_d2h, "no row crossed to the host");
	cr_assert_eq(t1.bytes_h2d, t0.bytes_h2d);
	cr_assert_eq(t1.bytes_d2d - t0.bytes_d2d, (uint64_t)N * DIM * sizeof(float));

	/* Pooled, and rows the tier does not hold: assembled on the host,
	 * then one copy into device memory. */
	pull_form(w.ref, w.t, 1, NULL, ta, a);
	pull_form(w.db, w.t, 1, NULL, tb, dev);
	cr_assert(!memcmp(a, dev, BAGS * DIM * sizeof(float)));
	for (size_t i = 0; i < N; i++)
		ids[i] = scramble(40000 + i);
	t0 = tstats(&w);
	cr_assert_eq(emdb_pull(w.ref, w.t, ids, N, DIM, a), 0);
	cr_assert_eq(emdb_pull(w.db, w.t, ids, N, DIM, dev), 0);
	cr_assert(!memcmp(a, dev, sizeof(a)));
	t1 = tstats(&w);
	cr_assert_eq(t1.bytes_h2d - t0.bytes_h2d, sizeof(a), "one copy into the device buffer");

	/* Gradients in device memory. */
	grads_for(11, g, N);
	memcpy(dgrad, g, sizeof(g));
	t0 = tstats(&w);
	cr_assert_eq(emdb_push_ticket(w.ref, w.t, ta, DIM, g), 0);
	cr_assert_eq(emdb_push_ticket(w.db, w.t, tb, DIM, dgrad), 0, "%s", emdb_last_error());
	t1 = tstats(&w);
	cr_assert_eq(t1.bytes_d2h - t0.bytes_d2h, sizeof(g), "the gradients copied to the host once");
	cr_assert_eq(emdb_update(w.ref, w.t, NULL), 0);
	cr_assert_eq(emdb_update(w.db, w.t, NULL), 0);
	batch(ids, 8000);
	assert_same(&w, ids, N);
	check_replica(&w);
	emdb_ticket_free(ta);
	emdb_ticket_free(tb);
	tier_test_free_buffer(tr, dev);
	tier_test_free_buffer(tr, dgrad);
	twin_close(&w);
}

/* Rows written outside an Update (a load, say): until the next step the
 * replica is stale, and Pull reads the host. */
Test(hot_serve, rows_written_outside_an_update_are_read_from_the_host)
{
	twin w;
	uint64_t id = scramble(3);
	float out[DIM];
	emdb_ticket *tk;
	hot_stats h0, h1;
	tbl *t;

	twin_open(&w, 64, 0, 1);
	warm(&w);
	t = table_of(&w);
	cr_assert_eq(emdb_prefetch(w.db, w.t, &id, 1, &tk), 0);
	cr_assert(hot_is_member(t->hot, tk->locs[0]));
	pthread_rwlock_wrlock(&t->rows_lock);
	for (int k = 0; k < DIM; k++)
		table_row(t, tk->locs[0])[k] = 42.0f + (float)k;
	table_rows_written(t);
	pthread_rwlock_unlock(&t->rows_lock);
	h0 = hstats(&w);
	cr_assert_eq(emdb_pull_ticket(w.db, w.t, tk, DIM, out), 0);
	h1 = hstats(&w);
	for (int k = 0; k < DIM; k++)
		cr_assert_eq(out[k], 42.0f + (float)k, "column %d: the host's new value", k);
	cr_assert_eq(h1.rows_gathered, h0.rows_gathered, "the stale replica served nothing");
	/* The next step copies it again; the replica serves again. */
	cr_assert_eq(emdb_update(w.db, w.t, NULL), 0);
	check_replica(&w);
	cr_assert_eq(emdb_pull_ticket(w.db, w.t, tk, DIM, out), 0);
	cr_assert_eq(out[0], 42.0f);
	cr_assert_eq(hstats(&w).rows_gathered - h1.rows_gathered, 1u);
	emdb_ticket_free(tk);
	twin_close(&w);
}

/* What the test tier's hook sees when a job of the Pull is waited for
 * (db/tier_test.h: the job's work runs after it). */
typedef struct overlap {
	const float *want;       /* the rows, from the twin without replica */
	const float *out;        /* the Pull's output, being written        */
	size_t rows;             /* its rows (N, or BAGS pooled)            */
	size_t cold_done, hot_pending, other;
	int waits;
} overlap;

static void at_wait(void *ctx)
{
	overlap *o = ctx;

	o->waits++;
	o->cold_done = o->hot_pending = o->other = 0;
	if (!o->out)
		return;
	for (size_t i = 0; i < o->rows; i++) {
		const float *r = o->out + i * DIM;

		if (!memcmp(r, o->want + i * DIM, DIM * sizeof(float)))
			o->cold_done++;
		else if (isnan(r[0]))
			o->hot_pending++;
		else
			o->other++;
	}
}

Test(hot_serve, device_part_runs_while_the_host_part_does)
{
	twin w;
	uint64_t ids[N];
	float a[N * DIM], b[N * DIM], g[N * DIM];
	overlap o = { .want = a, .out = b, .rows = N };
	tier *tt;
	hot_stats h0, h1;
	tier_stats t0, t1;

	twin_open(&w, 64, 0, 1);
	warm(&w);
	tt = hot_tier(table_of(&w)->hot);
	tier_test_on_wait(tt, at_wait, &o);
	batch(ids, 7000);

	/* Pull: the gather of the hot rows is enqueued, the cold rows are
	 * copied on the host, then the one wait, then the hot rows land. */
	for (size_t i = 0; i < N * DIM; i++)
		b[i] = NAN;
	t0 = tstats(&w);
	cr_assert_eq(emdb_pull(w.ref, w.t, ids, N, DIM, a), 0);
	cr_assert_eq(emdb_pull(w.db, w.t, ids, N, DIM, b), 0);
	t1 = tstats(&w);
	cr_assert_eq(o.waits, 1, "one wait per Pull");
	cr_assert_eq(o.hot_pending, 2u * HOT, "the hot rows came after the wait");
	cr_assert_eq(o.cold_done, (size_t)N - 2 * HOT, "the cold rows were copied before it");
	cr_assert_eq(o.other, 0u);
	cr_assert(!memcmp(a, b, sizeof(a)));
	cr_assert_eq(t1.jobs_async - t0.jobs_async, 1u);
	cr_assert_eq(t1.host_bufs - t0.host_bufs, 2u, "slots and rows in the tier's host memory");

	/* Pooled: the bags without a hot row are summed while the gather
	 * runs, the others after the wait, each in request order. */
	{
		uint64_t pids[N], off[BAGS + 1];

		for (size_t i = 0; i < N; i++) /* bags 0-3 hot ids, 4-7 cold */
			pids[i] = i < N / 2 ? scramble(i % HOT) : 7000 + i;
		offsets_for(off);
		for (size_t i = 0; i < BAGS * DIM; i++)
			b[i] = NAN;
		o.waits = 0;
		o.rows = BAGS;
		cr_assert_eq(emdb_pull_bags(w.ref, w.t, pids, N, off, BAGS, EMDB_POOL_SUM, DIM, a), 0);
		cr_assert_eq(emdb_pull_bags(w.db, w.t, pids, N, off, BAGS, EMDB_POOL_SUM, DIM, b), 0);
		cr_assert_eq(o.waits, 1);
		cr_assert_eq(o.hot_pending, (size_t)BAGS / 2, "the hot bags were pooled after the wait");
		cr_assert_eq(o.cold_done, (size_t)BAGS / 2, "the cold bags before it");
		cr_assert_eq(o.other, 0u);
		cr_assert(!memcmp(a, b, BAGS * DIM * sizeof(float)));
		o.rows = N;
	}

	/* Push: the scatter of the hot rows' sums is enqueued before the
	 * host's adds and waited for after them. */
	o.out = NULL;
	o.waits = 0;
	grads_for(7, g, N);
	h0 = hstats(&w);
	for (int d = 0; d < 2; d++) {
		emdb_db *db = d ? w.db : w.ref;

		cr_assert_eq(emdb_push(db, w.t, ids, N, DIM, g), 0);
		cr_assert_eq(emdb_update(db, w.t, NULL), 0);
	}
	h1 = hstats(&w);
	cr_assert_eq(o.waits, 1, "the scatter was still queued when the host's adds were done");
	cr_assert_eq(h1.steps_device - h0.steps_device, 1u);
	cr_assert_eq(h1.rows_scattered - h0.rows_scattered, (uint64_t)HOT);
	check_replica(&w);
	assert_same(&w, ids, N);

	/* The device fails while the Pull's gather runs: the host's rows,
	 * the same floats; the replica is dropped at the next step. */
	o.out = b;
	for (size_t i = 0; i < N * DIM; i++)
		b[i] = NAN;
	cr_assert_eq(emdb_pull(w.ref, w.t, ids, N, DIM, a), 0);
	h0 = hstats(&w);
	tier_test_fail_wait(tt);
	cr_assert_eq(emdb_pull(w.db, w.t, ids, N, DIM, b), 0);
	h1 = hstats(&w);
	cr_assert(!memcmp(a, b, sizeof(a)), "the host served the hot rows");
	cr_assert_eq(h1.fallbacks - h0.fallbacks, 1u);
	cr_assert_eq(h1.rows_gathered, h0.rows_gathered);
	push_step(&w, 8, 0, 0);
	cr_assert(hstats(&w).failed, "dropped at the step");
	assert_same(&w, ids, N);
	twin_close(&w);
}
