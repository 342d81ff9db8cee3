/*
 * test_hot_stats.c - what an operator reads of a table's device replica
 * (emdb_table_tier, emdb_table_tier_device: the figures INFO's tier
 * section and /metrics' emdb_tier_* families print), with the test tier
 * (db/tier_test.h) standing in for two GPUs.
 *
 * What a user relies on: the figures count what happened, exactly: hot
 * rows and device memory on each device, rows gathered by Pull (from
 * device 0 for host output), rows scattered by Push
 * (into device 0 for host gradients), Updates stepped on the device
 * (reduced across devices) or replayed, rows staged by Prefetch,
 * host fallbacks; a device out of range and a table without a replica
 * are refused; a failed device shows failed and no device.
 */
#include "tests/lib/hot_twin.h"

static emdb_tier_info tinfo(twin *w)
{
	emdb_tier_info ti;

	cr_assert_eq(emdb_table_tier(w->db, w->t, &ti), 0, "%s", emdb_last_error());
	return ti;
}

static emdb_tier_device_info dinfo(twin *w, uint32_t d)
{
	emdb_tier_device_info di;

	cr_assert_eq(emdb_table_tier_device(w->db, w->t, d, &di), 0, "%s", emdb_last_error());
	return di;
}

/* One step on both twins: Prefetch of ids (a ticket), Push of g on it,
 * Update; the twins stay equal. */
static void step(twin *w, const uint64_t *ids, const float *g)
{
	for (int d = 0; d < 2; d++) {
		emdb_db *db = d ? w->db : w->ref;
		emdb_ticket *tk;

		cr_assert_eq(emdb_prefetch(db, w->t, ids, N, &tk), 0, "%s", emdb_last_error());
		cr_assert_eq(emdb_push_ticket(db, w->t, tk, DIM, g), 0, "%s", emdb_last_error());
		cr_assert_eq(emdb_update(db, w->t, NULL), 0, "%s", emdb_last_error());
		emdb_ticket_free(tk);
	}
}

Test(hot_stats, two_devices_count_what_was_served)
{
	twin w;
	uint64_t ids[N];
	float g[N * DIM], a[N * DIM], b[N * DIM];
	emdb_tier_info t0, t1;
	emdb_tier_device_info d0, d1, e0, e1;
	emdb_ticket *tk;

	twin_open(&w, 64, 0, 2);
	warm(&w);
	t0 = tinfo(&w);
	cr_assert_str_eq(t0.tier, "test");
	cr_assert_eq(t0.devices, 2u);
	cr_assert(!t0.failed);
	cr_assert_eq(t0.hot_rows, (uint64_t)HOT, "the HOT prefetched rows are the replica");
	cr_assert_eq(t0.hot_capacity, 64u);
	d0 = dinfo(&w, 0);
	d1 = dinfo(&w, 1);
	cr_assert_eq(d0.device, 0);
	cr_assert_eq(d1.device, 1);
	cr_assert_eq(d0.hot_rows, (uint64_t)HOT);
	cr_assert_eq(d1.hot_rows, (uint64_t)HOT);
	cr_assert(d0.bytes_device > 0 && d0.bytes_device == d1.bytes_device);
	cr_assert_eq(d0.bytes_device + d1.bytes_device, t0.bytes_device);

	/* Pull into host memory: the hot positions (2 * HOT of N) read from
	 * device 0's copy, nothing from device 1's. */
	batch(ids, 5000);
	cr_assert_eq(emdb_pull(w.ref, w.t, ids, N, DIM, a), 0);
	cr_assert_eq(emdb_pull(w.db, w.t, ids, N, DIM, b), 0, "%s", emdb_last_error());
	cr_assert(!memcmp(a, b, sizeof(a)));
	t1 = tinfo(&w);
	e0 = dinfo(&w, 0);
	e1 = dinfo(&w, 1);
	cr_assert_eq(t1.rows_gathered - t0.rows_gathered, 2u * HOT);
	cr_assert_eq(e0.rows_gathered - d0.rows_gathered, 2u * HOT);
	cr_assert_eq(e1.rows_gathered, d1.rows_gathered);
	cr_assert_eq(t1.rows_direct, t0.rows_direct, "host output: nothing direct");
	cr_assert_eq(t1.fallbacks, t0.fallbacks);

	/* A step: Prefetch stages the cold rows, Push scatters the HOT
	 * distinct hot rows into both devices, Update steps from them. */
	t0 = t1;
	d0 = e0;
	d1 = e1;
	batch(ids, 6000);
	grads_for(21, g, N);
	step(&w, ids, g);
	t1 = tinfo(&w);
	e0 = dinfo(&w, 0);
	e1 = dinfo(&w, 1);
	cr_assert_eq(t1.rows_staged - t0.rows_staged, (uint64_t)COLD, "the distinct cold rows staged");
	cr_assert_eq(t1.rows_scattered - t0.rows_scattered, (uint64_t)HOT);
	cr_assert_eq(e0.rows_scattered - d0.rows_scattered, (uint64_t)HOT, "host gradients: device 0");
	cr_assert_eq(e1.rows_scattered, d1.rows_scattered, "reduced into device 1, not scattered");
	cr_assert_eq(t1.steps_device - t0.steps_device, 1u);
	cr_assert_eq(t1.steps_reduced - t0.steps_reduced, 1u, "two devices: reduced before the step");
	cr_assert_eq(t1.steps_replayed, t0.steps_replayed);
	cr_assert_eq(t1.row_steps - t0.row_steps, (uint64_t)HOT, "HOT rows stepped (on every device, counted once)");
	check_replica(&w);
	assert_same(&w, ids, N);

	/* Two pushes of the same rows in one step: replayed, counted. */
	t0 = t1;
	for (int d = 0; d < 2; d++) {
		emdb_db *db = d ? w.db : w.ref;

		cr_assert_eq(emdb_push(db, w.t, ids, N, DIM, g), 0);
		cr_assert_eq(emdb_push(db, w.t, ids, N, DIM, g), 0);
		cr_assert_eq(emdb_update(db, w.t, NULL), 0);
	}
	t1 = tinfo(&w);
	cr_assert_eq(t1.steps_replayed - t0.steps_replayed, 1u);
	cr_assert_eq(t1.steps_device, t0.steps_device);
	check_replica(&w);

	/* A refused gather: the host serves, and it is counted. */
	t0 = t1;
	tier_test_fail_after(hot_tier(table_of(&w)->hot), 0, EMDB_ERR_NOMEM);
	cr_assert_eq(emdb_pull(w.ref, w.t, ids, N, DIM, a), 0);
	cr_assert_eq(emdb_pull(w.db, w.t, ids, N, DIM, b), 0);
	cr_assert(!memcmp(a, b, sizeof(a)));
	t1 = tinfo(&w);
	cr_assert_eq(t1.fallbacks - t0.fallbacks, 1u);
	cr_assert_eq(t1.rows_gathered, t0.rows_gathered);

	/* Out of range, and a Prefetch ticket's Pull still works. */
	{
		emdb_tier_device_info x;

		cr_assert_eq(emdb_table_tier_device(w.db, w.t, 2, &x), EMDB_ERR_INVALID);
		cr_assert_eq(emdb_table_tier_device(w.db, w.t, 0, NULL), EMDB_ERR_INVALID);
		cr_assert_eq(emdb_table_tier_device(w.db, 99, 0, &x), EMDB_ERR_NO_TABLE);
	}
	cr_assert_eq(emdb_prefetch(w.db, w.t, ids, N, &tk), 0);
	cr_assert_eq(emdb_pull_ticket(w.db, w.t, tk, DIM, b), 0);
	emdb_ticket_free(tk);
	twin_close(&w);
}

Test(hot_stats, no_replica_and_failed_device)
{
	twin w;
	uint64_t ids[N];
	float g[N * DIM];
	emdb_tier_info ti;
	emdb_tier_device_info di;

	twin_open(&w, 64, 0, 2);
	/* The twin without a replica: host, no device, all zero. */
	cr_assert_eq(emdb_table_tier(w.ref, w.t, &ti), 0);
	cr_assert_str_eq(ti.tier, "host");
	cr_assert(ti.devices == 0 && !ti.failed && ti.hot_rows == 0 && ti.rows_gathered == 0 &&
		  ti.rows_scattered == 0 && ti.steps_device == 0 && ti.fallbacks == 0);
	cr_assert_eq(emdb_table_tier_device(w.ref, w.t, 0, &di), EMDB_ERR_INVALID);

	/* A device failing for good: dropped at the next step boundary. */
	warm(&w);
	tier_test_fail_after(hot_tier(table_of(&w)->hot), 0, EMDB_ERR_IO);
	batch(ids, 7000);
	grads_for(5, g, N);
	step(&w, ids, g);
	assert_same(&w, ids, N);
	ti = tinfo(&w);
	cr_assert(ti.failed, "the failed device shows");
	cr_assert_eq(ti.devices, 0u);
	cr_assert_eq(ti.hot_rows, 0u);
	cr_assert_eq(ti.bytes_device, 0u);
	cr_assert_eq(emdb_table_tier_device(w.db, w.t, 0, &di), EMDB_ERR_INVALID);
	twin_close(&w);
}
