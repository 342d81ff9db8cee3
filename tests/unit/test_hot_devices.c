/*
 * test_hot_devices.c - several devices in one node (db/hot_serve.c
 * invariant 6), with the test tier (db/tier_test.h) standing in for two
 * GPUs: a push whose gradients are in device k's memory scatters its hot
 * rows' sums into replica k only, and the step reduces the replicas'
 * accumulators (tier_reduce; NCCL all-reduce on CUDA) before stepping.
 *
 * What a user relies on: after pushes landing on different devices,
 * every replica and the host are bit-identical to a database without a
 * replica, and the step ran on the devices from the reduced sums (not a
 * replay); a refused reduce replays the host's sums and loses no row; a
 * row pushed from two devices in one step is replayed, still identical;
 * a Pull into device 1's memory gathers there and is counted there.
 */
#include "tests/lib/hot_twin.h"

/* The hot rows of batch(): HOT ids, each twice in a batch of N. */
static void push_from(twin *w, emdb_db *db, const uint64_t *ids, const float *g, float *devbuf)
{
	if (devbuf && db == w->db) {
		memcpy(devbuf, g, (size_t)N * DIM * sizeof(float));
		g = devbuf;
	}
	cr_assert_eq(emdb_push(db, w->t, ids, N, DIM, g), 0, "%s", emdb_last_error());
}

/* Two batches of N / 2 with disjoint hot rows: lo takes hot ids 0 ..
 * HOT/2 - 1, hi the others, each twice, and new cold rows every third;
 * ids is lo then hi. */
static void halves(uint64_t *ids, uint64_t cold_from)
{
	for (size_t i = 0; i < N / 2; i++) {
		ids[i] = i % 3 ? scramble(i % (HOT / 2)) : scramble(cold_from + i);
		ids[N / 2 + i] = i % 3 ? scramble(HOT / 2 + i % (HOT / 2)) : scramble(cold_from + N + i);
	}
}

Test(hot_devices, pushes_on_two_devices_reduce_to_the_hosts_sums)
{
	twin w;
	uint64_t ids[N];
	float g[N * DIM];
	tier *tr;
	float *on0, *on1;

	twin_open(&w, 64, 0, 2);
	warm(&w);
	tr = hot_tier(table_of(&w)->hot);
	on0 = tier_test_buffer_on(tr, 0, sizeof(g));
	on1 = tier_test_buffer_on(tr, 1, sizeof(g));
	cr_assert(on0 && on1);
	cr_assert(tier_ptr_in_tier(tr, 1, on1) && !tier_ptr_in_tier(tr, 0, on1),
		  "a buffer of device 1 is device 1's memory only");
	cr_assert_eq(hot_ptr_replica(table_of(&w)->hot, on1), 1);

	for (int s = 30; s < 36; s++) {
		emdb_tier_info a, b;
		emdb_tier_device_info d0a, d0b, d1a, d1b;
		const uint64_t *lo = ids, *hi = ids + N / 2;
		float g2[N * DIM];
		tier_stats t0, t1;

		/* Two pushes in one step, of disjoint hot rows: the first from
		 * device 0 (or host memory), the second from device 1. */
		halves(ids, 12000 + (uint64_t)s * 2 * N);
		grads_for(s, g, N);
		grads_for(s + 100, g2, N);
		cr_assert_eq(emdb_table_tier(w.db, w.t, &a), 0);
		cr_assert_eq(emdb_table_tier_device(w.db, w.t, 0, &d0a), 0);
		cr_assert_eq(emdb_table_tier_device(w.db, w.t, 1, &d1a), 0);
		t0 = tstats(&w);
		for (int d = 0; d < 2; d++) {
			emdb_db *db = d ? w.db : w.ref;
			float *first = s % 2 ? on0 : NULL;

			if (d && first)
				memcpy(first, g, (N / 2) * DIM * sizeof(float));
			cr_assert_eq(emdb_push(db, w.t, lo, N / 2, DIM, d && first ? first : g), 0, "%s",
				     emdb_last_error());
			if (d)
				memcpy(on1, g2, (N / 2) * DIM * sizeof(float));
			cr_assert_eq(emdb_push(db, w.t, hi, N / 2, DIM, d ? on1 : g2), 0, "%s",
				     emdb_last_error());
			cr_assert_eq(emdb_update(db, w.t, NULL), 0);
		}
		t1 = tstats(&w);
		cr_assert_eq(emdb_table_tier(w.db, w.t, &b), 0);
		cr_assert_eq(emdb_table_tier_device(w.db, w.t, 0, &d0b), 0);
		cr_assert_eq(emdb_table_tier_device(w.db, w.t, 1, &d1b), 0);
		cr_assert(d0b.rows_scattered > d0a.rows_scattered && d1b.rows_scattered > d1a.rows_scattered,
			  "step %d: each device took its own push's rows", s);
		cr_assert_eq((d0b.rows_scattered - d0a.rows_scattered) +
				     (d1b.rows_scattered - d1a.rows_scattered),
			     b.rows_scattered - a.rows_scattered, "each row scattered into one device");
		cr_assert_eq(b.steps_device - a.steps_device, 1u, "step %d: stepped on the devices", s);
		cr_assert_eq(b.steps_reduced - a.steps_reduced, 1u, "step %d: reduced first", s);
		cr_assert_eq(b.steps_replayed, a.steps_replayed, "step %d: nothing replayed", s);
		cr_assert_gt(t1.bytes_d2d, t0.bytes_d2d, "the reduce moved the accumulators");
		check_replica(&w); /* both replicas equal the host, bit for bit */
		assert_same(&w, ids, N);
	}
	/* Pull by ticket into device 1's memory: every row gathered on
	 * device 1, counted there. */
	{
		emdb_ticket *ta, *tb;
		emdb_tier_device_info d0a, d0b, d1a, d1b;
		float a[N * DIM];

		cr_assert_eq(emdb_prefetch(w.ref, w.t, ids, N, &ta), 0);
		cr_assert_eq(emdb_prefetch(w.db, w.t, ids, N, &tb), 0);
		cr_assert_eq(emdb_table_tier_device(w.db, w.t, 0, &d0a), 0);
		cr_assert_eq(emdb_table_tier_device(w.db, w.t, 1, &d1a), 0);
		cr_assert_eq(emdb_pull_ticket(w.ref, w.t, ta, DIM, a), 0);
		cr_assert_eq(emdb_pull_ticket(w.db, w.t, tb, DIM, on1), 0, "%s", emdb_last_error());
		cr_assert(!memcmp(a, on1, sizeof(a)));
		cr_assert_eq(emdb_table_tier_device(w.db, w.t, 0, &d0b), 0);
		cr_assert_eq(emdb_table_tier_device(w.db, w.t, 1, &d1b), 0);
		cr_assert_eq(d1b.rows_gathered - d1a.rows_gathered, (uint64_t)N);
		cr_assert_eq(d0b.rows_gathered, d0a.rows_gathered);
		emdb_ticket_free(ta);
		emdb_ticket_free(tb);
	}
	tier_test_free_buffer(tr, on0);
	tier_test_free_buffer(tr, on1);
	twin_close(&w);
}

Test(hot_devices, a_refused_reduce_replays_the_hosts_sums)
{
	twin w;
	uint64_t ids[N];
	float g[N * DIM];
	tier *tr;
	float *on1;
	emdb_tier_info a, b;

	twin_open(&w, 64, 0, 2);
	warm(&w);
	tr = hot_tier(table_of(&w)->hot);
	on1 = tier_test_buffer_on(tr, 1, sizeof(g));
	cr_assert(on1);
	batch(ids, 15000);
	grads_for(7, g, N);
	push_from(&w, w.ref, ids, g, NULL);
	push_from(&w, w.db, ids, g, on1);
	cr_assert_eq(emdb_table_tier(w.db, w.t, &a), 0);
	/* The step's first device operation is the reduce: refused (a full
	 * device: nothing changes), so the step replays the host's sums. */
	tier_test_fail_after(tr, 0, EMDB_ERR_NOMEM);
	cr_assert_eq(emdb_update(w.ref, w.t, NULL), 0);
	cr_assert_eq(emdb_update(w.db, w.t, NULL), 0);
	cr_assert_eq(emdb_table_tier(w.db, w.t, &b), 0);
	cr_assert(!b.failed);
	cr_assert_eq(b.steps_replayed - a.steps_replayed, 1u);
	cr_assert_eq(b.steps_device, a.steps_device);
	cr_assert_eq(b.steps_reduced, a.steps_reduced);
	cr_assert_eq(b.hot_rows, (uint64_t)HOT, "no row lost from the replica");
	check_replica(&w);
	assert_same(&w, ids, N);

	/* The same rows pushed from both devices in one step: not one
	 * push's sum, so replayed; still identical everywhere. */
	{
		float *on0 = tier_test_buffer_on(tr, 0, sizeof(g));

		cr_assert(on0);
		a = b;
		grads_for(8, g, N);
		push_from(&w, w.ref, ids, g, NULL);
		push_from(&w, w.ref, ids, g, NULL);
		push_from(&w, w.db, ids, g, on0);
		push_from(&w, w.db, ids, g, on1);
		cr_assert_eq(emdb_update(w.ref, w.t, NULL), 0);
		cr_assert_eq(emdb_update(w.db, w.t, NULL), 0);
		cr_assert_eq(emdb_table_tier(w.db, w.t, &b), 0);
		cr_assert_eq(b.steps_replayed - a.steps_replayed, 1u);
		check_replica(&w);
		assert_same(&w, ids, N);
		tier_test_free_buffer(tr, on0);
	}
	tier_test_free_buffer(tr, on1);
	twin_close(&w);
}
