/*
 * test_cluster_hot.c - a cluster whose owners keep a device replica of
 * their hot rows (docs/gpu.md, "Across nodes"), with the test tier
 * (db/tier_test.h) standing in for each owner's GPU: 2 and 3 nodes in
 * one process (tests/lib/cluster_mem.h).
 *
 * What a user relies on: cluster Pull (plain by ticket, pooled by IDs),
 * Push and Update give exactly what the same cluster without replicas
 * gives, bit for bit, and every row and optimizer state equals one
 * engine's; the owners served them through the device paths (their
 * tables' counters: rows gathered from the replica, sums scattered into
 * it, Updates stepped from them, no step replayed), every replica equals
 * its host rows, and what crossed between host and device was staged
 * in the tier's own host memory (pinned on CUDA: tier_host_alloc),
 * with the device work queued while the owner did its host part.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "tests/lib/hot_twin.h"
#include "tests/lib/cluster_mem.h"
#include "tests/lib/cluster_req.h"

enum { NH = 24, NC = 16, NB = 2 * NH + NC, NBAGS = 8, STEPS = HOT_REVISE_STEPS + 5 };

/* Step s's batch: the NH hot ids twice (duplicates in one request) and
 * NC fresh cold ones, interleaved. */
static void step_ids(int s, uint64_t *ids)
{
	size_t k = 0;

	for (int i = 0; i < NH; i++) {
		ids[k++] = 1000 + 7 * (uint64_t)i;
		if (i < NC)
			ids[k++] = 50000 + (uint64_t)s * NC + (uint64_t)i;
		ids[k++] = 1000 + 7 * (uint64_t)(NH - 1 - i);
	}
	cr_assert_eq(k, (size_t)NB);
}

/* Every table's replica on every node equals its host rows; returns the
 * nodes' tier figures summed, and their tiers' stats summed. */
static emdb_tier_info owners(memnet *net, uint32_t nodes, uint32_t table, tier_stats *ts)
{
	emdb_tier_info sum = { 0 }, ti;

	memset(ts, 0, sizeof(*ts));
	for (uint32_t r = 0; r < nodes; r++) {
		twin w = { .db = memnet_db(net, r), .t = table };
		tbl *t = table_of(&w);
		tier_stats one;

		cr_assert_eq(emdb_table_tier(w.db, table, &ti), 0);
		cr_assert(!ti.failed);
		check_replica(&w); /* each member, bit for bit */
		sum.hot_rows += ti.hot_rows;
		sum.rows_gathered += ti.rows_gathered;
		sum.rows_scattered += ti.rows_scattered;
		sum.rows_staged += ti.rows_staged;
		sum.steps_device += ti.steps_device;
		sum.steps_replayed += ti.steps_replayed;
		sum.fallbacks += ti.fallbacks;
		tier_stats_get(hot_tier(t->hot), &one);
		ts->jobs += one.jobs;
		ts->jobs_async += one.jobs_async;
		ts->host_bufs += one.host_bufs;
	}
	return sum;
}

static void against_a_cluster_without_replicas(uint32_t nodes)
{
	emdb_db_config dc = EMDB_DB_CONFIG_INIT;
	memnet *hnet, *plain;
	emdb_db *ref;
	emdb_table_config cfg = table_cfg("emb", EMDB_OPT_ADAM);
	uint32_t rt, ct;
	uint64_t ids[NB], off[NBAGS + 1], all[STEPS * NB], seed = 7;
	static float a[NB * DIM], b[NB * DIM], c[NB * DIM], g[NB * DIM];
	emdb_tier_info ti;
	tier_stats ts;

	hot_use_tier(TIER_TEST, 0, 1);
	dc.gpu_memory = 64 * ROW_BYTES; /* every hot row fits on each owner */
	hnet = memnet_open_cfg(nodes, 64, &dc);
	plain = memnet_open(nodes, 64);
	cr_assert(hnet && plain);
	cr_assert_eq(emdb_db_open(NULL, &ref), 0);
	cr_assert_eq(emdb_table_create(ref, &cfg, &rt), 0);
	ct = cl_create(hnet, 0, &cfg);
	cr_assert_eq(cl_create(plain, 0, &cfg), ct);
	cr_assert_eq(ct, rt);
	for (int s = 0; s < STEPS; s++) {
		uint32_t home = (uint32_t)s % nodes;
		cluster_ticket *tk[2];
		emdb_ticket *rtk;

		step_ids(s, ids);
		memcpy(all + (size_t)s * NB, ids, sizeof(ids));
		make_grads(g, NB * DIM, &seed);
		make_offsets(off, NBAGS, NB, &seed);
		/* Prefetch: a promise of use, counted by the owners' hot sets
		 * and staged into their replicas. */
		cr_assert_eq(emdb_prefetch(ref, rt, ids, NB, &rtk), 0);
		for (int k = 0; k < 2; k++) {
			cluster_req pf = { .op = CLUSTER_PREFETCH, .table = ct, .ids = ids, .n = NB };

			run_req(k ? hnet : plain, home, &pf, EMDB_OK);
			tk[k] = pf.ticket_out;
		}
		/* Pull by ticket, plain. */
		cr_assert_eq(emdb_pull_ticket(ref, rt, rtk, DIM, a), 0);
		for (int k = 0; k < 2; k++) {
			cluster_req pl = { .op = CLUSTER_PULL, .table = ct, .dim = DIM, .ticket = tk[k],
					   .out = k ? c : b };

			run_req(k ? hnet : plain, home, &pl, EMDB_OK);
		}
		SAME(b, c, sizeof(b), "a Pull by ticket through the replicas");
		SAME(a, c, sizeof(a), "a Pull by ticket");
		/* Pull by IDs, pooled. */
		for (int k = 0; k < 2; k++) {
			cluster_req pl = { .op = CLUSTER_PULL, .table = ct, .dim = DIM, .ids = ids, .n = NB,
					   .offsets = off, .n_bags = NBAGS, .pool = EMDB_POOL_SUM,
					   .out = k ? c : b };

			run_req(k ? hnet : plain, home, &pl, EMDB_OK);
		}
		SAME(b, c, NBAGS * DIM * sizeof(float), "a pooled Pull through the replicas");
		/* Push by IDs, then Update. */
		cr_assert_eq(emdb_push(ref, rt, ids, NB, DIM, g), 0);
		cr_assert_eq(emdb_update(ref, rt, NULL), 0);
		for (int k = 0; k < 2; k++) {
			memnet *net = k ? hnet : plain;
			cluster_req ps = { .op = CLUSTER_PUSH, .table = ct, .dim = DIM, .ids = ids, .n = NB,
					   .grads = g };
			cluster_req up = { .op = CLUSTER_UPDATE, .table = ct };

			run_req(net, home, &ps, EMDB_OK);
			run_req(net, (home + 1) % nodes, &up, EMDB_OK);
		}
		emdb_ticket_free(rtk);
		cluster_ticket_free(memnet_cl(plain, home), tk[0]);
		cluster_ticket_free(memnet_cl(hnet, home), tk[1]);
	}
	memnet_quiesce(hnet);
	same_rows(hnet, nodes, ref, rt, ct, all, STEPS * NB, 2 * DIM);
	same_rows(plain, nodes, ref, rt, ct, all, STEPS * NB, 2 * DIM);

	/* The owners served through their replicas. */
	ti = owners(hnet, nodes, ct, &ts);
	cr_log_info("%u nodes: hot_rows %llu gathered %llu scattered %llu staged %llu steps_device %llu "
		    "jobs %llu (async %llu) host buffers %llu", nodes, (unsigned long long)ti.hot_rows,
		    (unsigned long long)ti.rows_gathered, (unsigned long long)ti.rows_scattered,
		    (unsigned long long)ti.rows_staged, (unsigned long long)ti.steps_device,
		    (unsigned long long)ts.jobs, (unsigned long long)ts.jobs_async,
		    (unsigned long long)ts.host_bufs);
	cr_assert(ti.hot_rows >= (uint64_t)NH, "the hot ids (and cold ones that fit) are the "
		  "owners' replicas' rows (%llu)", (unsigned long long)ti.hot_rows);
	cr_assert(ti.rows_gathered >= 2 * (uint64_t)NH * 2 * (STEPS - HOT_REVISE_STEPS),
		  "Pulls read the hot rows from the replicas (%llu)", (unsigned long long)ti.rows_gathered);
	cr_assert(ti.rows_scattered >= (uint64_t)NH * (STEPS - HOT_REVISE_STEPS),
		  "Pushes scattered the hot rows' sums (%llu)", (unsigned long long)ti.rows_scattered);
	cr_assert(ti.steps_device >= (uint64_t)(STEPS - HOT_REVISE_STEPS), "Updates stepped the replicas");
	cr_assert_eq(ti.steps_replayed, 0u, "no step replayed the host's sums");
	cr_assert_eq(ti.fallbacks, 0u);
	cr_assert(ti.rows_staged > 0, "Prefetch staged the cold rows");
	cr_assert(ts.jobs_async >= 2 * (uint64_t)(STEPS - HOT_REVISE_STEPS),
		  "gathers and scatters were queued while the owner did its host part");
	cr_assert(ts.host_bufs >= 2 * ts.jobs, "staged through the tier's host memory");

	memnet_close(hnet);
	memnet_close(plain);
	emdb_db_close(ref);
	hot_use_tier(TIER_CUDA, 0, 0);
}

Test(cluster_hot, two_nodes_with_replicas_equal_two_without)
{
	against_a_cluster_without_replicas(2);
}

Test(cluster_hot, three_nodes_with_replicas_equal_three_without)
{
	against_a_cluster_without_replicas(3);
}
