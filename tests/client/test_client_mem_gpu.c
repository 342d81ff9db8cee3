/*
 * test_client_mem_gpu.c - a mem:// trainer's device memory through the
 * client library: Pull output and Push input that are memory of the hot
 * rows' device (the test tier's buffers, db/tier_test.h, standing in for
 * cudaMalloc'ed memory) go through emdb_client_* to the engine untouched,
 * a Pull by ticket is gathered straight into them, and the rows stay
 * what a database without a replica holds, bit for bit.
 */
#include <emdb/client.h>

#include "tests/lib/hot_twin.h"

#define OK(x) cr_assert_eq((x), EMDB_OK, "%s", emdb_last_error())

Test(client_mem_gpu, device_memory_through_a_mem_handle)
{
	twin w;
	emdb_client *c;
	emdb_client_ticket *ct;
	emdb_ticket *ta;
	uint64_t ids[N];
	float a[N * DIM], g[N * DIM];
	float *dev, *dgrad;
	hot_stats h0, h1;
	tier *tr;

	twin_open(&w, 64, 0, 1);
	warm(&w);
	OK(emdb_client_wrap(w.db, NULL, &c));
	tr = hot_tier(table_of(&w)->hot);
	dev = tier_test_buffer(tr, sizeof(a));
	dgrad = tier_test_buffer(tr, sizeof(g));
	cr_assert(dev && dgrad);

	batch(ids, 8000);
	OK(emdb_prefetch(w.ref, w.t, ids, N, &ta));
	OK(emdb_client_prefetch(c, w.t, ids, N, &ct));
	h0 = hstats(&w);
	OK(emdb_pull_ticket(w.ref, w.t, ta, DIM, a));
	OK(emdb_client_pull_ticket(c, w.t, ct, DIM, dev));
	h1 = hstats(&w);
	cr_assert(!memcmp(a, dev, sizeof(a)), "the rows in device memory");
	cr_assert_eq(h1.rows_direct - h0.rows_direct, (uint64_t)N, "gathered straight into it");

	grads_for(5, g, N);
	memcpy(dgrad, g, sizeof(g));
	OK(emdb_push_ticket(w.ref, w.t, ta, DIM, g));
	OK(emdb_client_push_ticket(c, w.t, ct, DIM, dgrad));
	OK(emdb_update(w.ref, w.t, NULL));
	OK(emdb_client_update(c, w.t, NULL));
	assert_same(&w, ids, N);
	check_replica(&w);

	emdb_ticket_free(ta);
	emdb_client_ticket_free(ct);
	emdb_client_close(c);
	tier_test_free_buffer(tr, dev);
	tier_test_free_buffer(tr, dgrad);
	twin_close(&w);
}
