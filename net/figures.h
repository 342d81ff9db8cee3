/*
 * net/figures.h - the server's figures, gathered in one place for every
 * report that shows them: INFO's text (net/info.c) and the Prometheus
 * endpoint (net/metrics_text.c), so the two never count a thing two ways.
 *
 * Every call reads without blocking a serving thread: the I/O threads'
 * counters are relaxed atomics (a sum may be a request or two behind,
 * never torn), the engine's figures come from its thread-safe calls.  Any
 * thread, once the server's I/O threads are set up (server_start).
 */
#ifndef EMDB_NET_FIGURES_H
#define EMDB_NET_FIGURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/db.h>

#include "net/loop.h"
#include "net/stats.h"

typedef struct server server;

/* The sum over the I/O threads of the _Atomic uint64_t at offset `off` of
 * io_thread; FIGURES_SUM(s, bytes_in) names the field. */
uint64_t figures_thread_sum(server *s, size_t off);
#define FIGURES_SUM(s, field) figures_thread_sum((s), offsetof(io_thread, field))

/* Per-operation counters and latency buckets of all I/O threads, indexed
 * as stats_op_index; out is overwritten. */
void figures_ops(server *s, op_summary out[STATS_OPS]);

/* Error replies by code of all I/O threads (stats_code_name); out is
 * overwritten. */
void figures_codes(server *s, uint64_t out[STATS_CODES]);

/* Failed AUTH (net/auth_limit.h) under the rules CONFIG SET last left:
 * wrong tokens checked, AUTH refused unchecked from throttled addresses,
 * and the addresses throttled now. */
void figures_auth(server *s, uint64_t *failures, uint64_t *throttled, uint64_t *addresses);

/* The process's resident set, bytes; -1 when /proc cannot tell. */
long figures_rss_bytes(void);

/* Every live table described (configuration and statistics), in creation
 * order: *out is emdb_malloc'd (free with emdb_free; NULL when *n is 0).
 * A table dropped while this runs is left out.  Errors: NOMEM. */
int figures_tables(server *s, emdb_table_info **out, size_t *n);

/* All the memory a table holds: vectors, optimizer state, index,
 * gradients and overhead. */
uint64_t figures_table_bytes(const emdb_table_stats *st);

/* A figure of a table's device replica (docs/gpu.md), named once for
 * INFO's tier section (`name=`) and /metrics (emdb_tier_NAME, with
 * `_total` for a counter): the uint64_t at offset `off` of emdb_tier_info
 * (per table) or of emdb_tier_device_info (per device). */
typedef struct tier_figure {
	const char *name;
	size_t off;
	bool counter;
	const char *help;
} tier_figure;

extern const tier_figure figures_tier_table[];
extern const size_t figures_tier_table_n;
extern const tier_figure figures_tier_device[];
extern const size_t figures_tier_device_n;

static inline uint64_t figures_tier_get(const tier_figure *f, const void *info)
{
	return *(const uint64_t *)(const void *)((const char *)info + f->off);
}

#endif
