/*
 * stats.c - per-op counters and log2 latency histograms.
 *
 * Invariants:
 *   1. An op_stats has one writer (its I/O thread); stores are relaxed
 *      atomic adds so that readers on other threads never see torn values.
 *   2. Index 0 is the "other" row: unknown opcodes never reach a handler,
 *      so it stays 0 in practice, but stats_op_index is total.  The same
 *      holds for the codes: index 0 counts a status outside
 *      EMDB_ERRNO_MAP, which no reply should carry.
 *
 * State changes: stats_record and stats_record_error only.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "net/stats.h"
#include "protocol/proto.h"

static const uint16_t op_codes[STATS_OPS] = {
	0,
#define OP_CODE_(NAME, name, value, ver, role, rq, rs) value,
	PROTO_OP_MAP(OP_CODE_)
#undef OP_CODE_
};

enum {
	OPS_KNOWN_ = 0
#define OP_COUNT_(NAME, name, value, ver, role, rq, rs) +1
	PROTO_OP_MAP(OP_COUNT_)
#undef OP_COUNT_
};
_Static_assert(OPS_KNOWN_ + 1 <= STATS_OPS, "STATS_OPS too small for PROTO_OP_MAP");

unsigned stats_op_index(uint16_t opcode)
{
	for (unsigned i = 1; i < STATS_OPS; i++)
		if (op_codes[i] == opcode)
			return i;
	return 0;
}

const char *stats_op_name(unsigned index)
{
	if (index == 0 || index >= STATS_OPS || !op_codes[index])
		return "other";
	return proto_op_name(op_codes[index]);
}

unsigned stats_op_known(void)
{
	return OPS_KNOWN_ + 1;
}

void stats_op_label(unsigned index, char *buf, size_t len)
{
	snprintf(buf, len, "%s", stats_op_name(index));
	for (char *q = buf; *q; q++)
		*q = (char)(*q >= 'A' && *q <= 'Z' ? *q - 'A' + 'a' : *q);
}

const char *stats_code_name(unsigned index)
{
	return index && index < STATS_CODES ? emdb_err_name(-(int)index) : "UNKNOWN";
}

static unsigned bucket_of(uint64_t ns)
{
	unsigned b = ns ? 63u - (unsigned)__builtin_clzll(ns) : 0;
	return b < STATS_BUCKETS ? b : STATS_BUCKETS - 1;
}

void stats_record(op_stats *s, uint16_t opcode, uint64_t ns, int failed)
{
	op_counter *c = &s->op[stats_op_index(opcode)];
	atomic_fetch_add_explicit(&c->calls, 1, memory_order_relaxed);
	if (failed)
		atomic_fetch_add_explicit(&c->errors, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->ns_total, ns, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->hist[bucket_of(ns)], 1, memory_order_relaxed);
}

void stats_record_error(op_stats *s, int status)
{
	unsigned i = status < 0 && -(long)status < STATS_CODES ? (unsigned)-status : 0;
	atomic_fetch_add_explicit(&s->codes[i], 1, memory_order_relaxed);
}

void stats_add(op_summary out[STATS_OPS], const op_stats *s)
{
	for (unsigned i = 0; i < STATS_OPS; i++) {
		const op_counter *c = &s->op[i];
		out[i].calls += atomic_load_explicit(&c->calls, memory_order_relaxed);
		out[i].errors += atomic_load_explicit(&c->errors, memory_order_relaxed);
		out[i].ns_total += atomic_load_explicit(&c->ns_total, memory_order_relaxed);
		for (unsigned b = 0; b < STATS_BUCKETS; b++)
			out[i].hist[b] += atomic_load_explicit(&c->hist[b], memory_order_relaxed);
	}
}

void stats_add_codes(uint64_t codes[STATS_CODES], const op_stats *s)
{
	for (unsigned i = 0; i < STATS_CODES; i++)
		codes[i] += atomic_load_explicit(&s->codes[i], memory_order_relaxed);
}

uint64_t stats_percentile(const op_summary *o, double p)
{
	uint64_t total = 0;
	for (unsigned b = 0; b < STATS_BUCKETS; b++)
		total += o->hist[b];
	if (!total)
		return 0;
	uint64_t rank = (uint64_t)(p * (double)total);
	if (rank >= total)
		rank = total - 1;
	uint64_t seen = 0;
	for (unsigned b = 0; b < STATS_BUCKETS; b++) {
		seen += o->hist[b];
		if (seen > rank)
			return 2ull << b;
	}
	return 2ull << (STATS_BUCKETS - 1);
}

uint64_t stats_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
