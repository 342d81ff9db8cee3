/*
 * net/stats.h - per-operation counters and latency histograms.
 *
 * Each I/O thread owns one op_stats and is its only writer; INFO sums the
 * threads' copies while they run (relaxed atomics: a sum may be a request
 * or two behind, never torn).  Latencies go into log2 buckets of
 * nanoseconds, which is enough for the p50 and p99 INFO reports: a
 * percentile is reported as the upper edge of its bucket, so within a
 * factor of two above the truth.  /metrics (net/metrics.h) exports the
 * same buckets as Prometheus histograms.
 *
 * Besides the per-operation rows, each thread counts the error replies it
 * sent by code (EMDB_ERRNO_MAP), whatever the operation: a request that
 * succeeds pays nothing for it, an error reply one relaxed atomic add.
 */
#ifndef EMDB_NET_STATS_H
#define EMDB_NET_STATS_H

#include <stddef.h>
#include <stdint.h>

#include <emdb/error.h>

#define STATS_OPS 40     /* dense op indexes, see stats_op_index      */
#define STATS_BUCKETS 40 /* bucket b: latency in [2^b, 2^(b+1)) ns   */

/* Error codes: index -code for every code of EMDB_ERRNO_MAP but OK; index
 * 0 holds codes outside the map. */
enum {
	STATS_CODES = 0
#define STATS_CODE_COUNT_(name, value, msg) +1
	EMDB_ERRNO_MAP(STATS_CODE_COUNT_)
#undef STATS_CODE_COUNT_
};

typedef struct op_counter {
	_Atomic uint64_t calls;
	_Atomic uint64_t errors;
	_Atomic uint64_t ns_total;
	_Atomic uint64_t hist[STATS_BUCKETS];
} op_counter;

typedef struct op_stats {
	op_counter op[STATS_OPS];
	_Atomic uint64_t codes[STATS_CODES]; /* error replies by code */
} op_stats;

/* A plain snapshot, for reporting. */
typedef struct op_summary {
	uint64_t calls, errors, ns_total;
	uint64_t hist[STATS_BUCKETS];
} op_summary;

/* Dense index of a wire opcode (0 for anything unknown, the "other" row),
 * and its name for reports.  Indexes 1 .. stats_op_known() - 1 are the
 * opcodes of PROTO_OP_MAP, in its order. */
unsigned stats_op_index(uint16_t opcode);
const char *stats_op_name(unsigned index);
unsigned stats_op_known(void);
/* The name in lower case ("table_create"), as INFO and /metrics show it,
 * into buf[len]. */
void stats_op_label(unsigned index, char *buf, size_t len);

/* The error code's name ("NOMEM") of a codes[] index; "UNKNOWN" for 0. */
const char *stats_code_name(unsigned index);

/* Record one request of `opcode` that took `ns`, failed or not. */
void stats_record(op_stats *s, uint16_t opcode, uint64_t ns, int failed);

/* One error reply with `status` (< 0) was sent, whatever the operation. */
void stats_record_error(op_stats *s, int status);

/* out[index] += s's counters. */
void stats_add(op_summary out[STATS_OPS], const op_stats *s);
/* codes[index] += s's error replies by code. */
void stats_add_codes(uint64_t codes[STATS_CODES], const op_stats *s);

/* Upper edge, in ns, of the bucket holding percentile p (0 < p < 1); 0
 * when there were no calls. */
uint64_t stats_percentile(const op_summary *o, double p);

/* Monotonic clock in ns. */
uint64_t stats_now_ns(void);

#endif
