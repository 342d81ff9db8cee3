/*
 * figures.c - the figures INFO and /metrics share, read from the I/O
 * threads, the process and the engine.
 *
 * Invariants:
 *   1. Nothing here writes: a figure is read where it is kept (the
 *      threads' op_stats and counters, /proc, the engine's stats calls).
 *   2. Figures are a snapshot taken field by field, not atomically: sums
 *      may be a request apart.
 *
 * State changes: none.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "net/figures.h"
#include "net/server.h"

uint64_t figures_thread_sum(server *s, size_t off)
{
	uint64_t v = 0;
	for (uint32_t i = 0; i < s->n_threads; i++)
		v += atomic_load_explicit((_Atomic uint64_t *)((char *)&s->threads[i] + off),
					  memory_order_relaxed);
	return v;
}

void figures_ops(server *s, op_summary out[STATS_OPS])
{
	memset(out, 0, sizeof(op_summary) * STATS_OPS);
	for (uint32_t i = 0; i < s->n_threads; i++)
		stats_add(out, &s->threads[i].stats);
}

void figures_codes(server *s, uint64_t out[STATS_CODES])
{
	memset(out, 0, sizeof(uint64_t) * STATS_CODES);
	for (uint32_t i = 0; i < s->n_threads; i++)
		stats_add_codes(out, &s->threads[i].stats);
}

void figures_auth(server *s, uint64_t *failures, uint64_t *throttled, uint64_t *addresses)
{
	auth_rules r = {
		.burst = (uint32_t)atomic_load(&s->rt.auth_fail_burst),
		.window_ms = (uint32_t)atomic_load(&s->rt.auth_fail_window_ms),
	};
	auth_limit_counts(&s->auth, &r, stats_now_ns(), failures, throttled, addresses);
}

long figures_rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, rss = 0;
	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 ? -1 : rss * sysconf(_SC_PAGESIZE);
}

int figures_tables(server *s, emdb_table_info **out, size_t *n)
{
	/* Room for a few created between the count and the listing. */
	size_t cap = 0, got = 0;
	emdb_table_list(s->db, NULL, 0, &cap);
	cap += 8;
	uint32_t *ids = emdb_malloc(cap * sizeof(*ids));
	emdb_table_info *t = emdb_malloc(cap * sizeof(*t));
	if (!ids || !t) {
		emdb_free(ids);
		emdb_free(t);
		return EMDB_ERR_NOMEM;
	}
	emdb_table_list(s->db, ids, cap, &got);
	if (got > cap)
		got = cap;
	size_t k = 0;
	for (size_t i = 0; i < got; i++)
		if (emdb_table_describe(s->db, ids[i], &t[k]) == EMDB_OK)
			k++;
	emdb_free(ids);
	if (!k) {
		emdb_free(t);
		t = NULL;
	}
	*out = t;
	*n = k;
	return EMDB_OK;
}

uint64_t figures_table_bytes(const emdb_table_stats *st)
{
	return st->bytes_vectors + st->bytes_optimizer + st->bytes_index + st->bytes_grads +
	       st->bytes_overhead;
}

#define TFT_(name, field, counter, help) { name, offsetof(emdb_tier_info, field), counter, help }
const tier_figure figures_tier_table[] = {
	TFT_("hot_capacity", hot_capacity, false, "Rows a table's gpu_memory holds on each device"),
	TFT_("rows_direct", rows_direct, true, "Pull rows gathered from the replica straight into a caller's device memory"),
	TFT_("rows_staged", rows_staged, true, "Rows a Prefetch copied into free device slots for its Pull"),
	TFT_("steps_device", steps_device, true, "Updates whose hot rows stepped from the device's accumulators"),
	TFT_("steps_replayed", steps_replayed, true, "Updates that replayed the host's sums on the device instead"),
	TFT_("steps_reduced", steps_reduced, true, "Of steps_device, Updates whose accumulators were reduced across devices first (NCCL all-reduce on CUDA)"),
	TFT_("row_steps", row_steps, true, "Rows stepped on the device by Updates (a row stepped on every device counts once)"),
	TFT_("rows_resynced", rows_resynced, true, "Rows copied again from the host into the replica"),
	TFT_("fallbacks", fallbacks, true, "Serving calls the host took over from the device tier"),
};
#undef TFT_
const size_t figures_tier_table_n = sizeof(figures_tier_table) / sizeof(figures_tier_table[0]);

#define TFD_(name, field, counter, help) { name, offsetof(emdb_tier_device_info, field), counter, help }
const tier_figure figures_tier_device[] = {
	TFD_("hot_rows", hot_rows, false, "Rows of a table held in a device's replica"),
	TFD_("device_bytes", bytes_device, false, "Device memory a table's replica holds on a device"),
	TFD_("rows_gathered", rows_gathered, true, "Pull rows read from a device's replica"),
	TFD_("rows_scattered", rows_scattered, true, "Push rows added to a device's gradient accumulators"),
};
#undef TFD_
const size_t figures_tier_device_n = sizeof(figures_tier_device) / sizeof(figures_tier_device[0]);
