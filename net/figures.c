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
