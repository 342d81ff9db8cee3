/*
 * report.h - the figures emdb-bench prints: one record per measured
 * workload configuration, each with the anchors it is a ratio to.
 */
#ifndef EMDB_BENCH_REPORT_H
#define EMDB_BENCH_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "tools/bench/harness.h"
#include "tools/bench/keys.h"

#define REPORT_MAX_ANCHORS 4

typedef struct report_anchor {
	const char *key;       /* JSON field of the anchor's rate ("random_access_per_sec") */
	const char *ratio_key; /* JSON field of the ratio ("ratio_random_access")          */
	const char *label;     /* human table: "random-access bound"                       */
	double per_sec;        /* the anchor's rate                                         */
	double goal;           /* ratio the workload should reach; 0 when none             */
} report_anchor;

typedef struct report_record {
	const char *workload;  /* prefetch, pull, lookup, push */
	const char *optimizer; /* NULL where it does not matter */
	unsigned threads;
	uint32_t batch;
	uint32_t dim;
	uint64_t rows;         /* table rows when the measurement started */
	keys_dist dist;
	double zipf_s;         /* exponent, when dist is Zipf */
	double zipf_share;     /* share of the top 2.2% measured on the drawn IDs */
	double new_frac;       /* prefetch: fraction of IDs inserted; < 0 if n/a */
	double unique_frac;    /* push: rows updated per ID pushed; < 0 if n/a */
	int64_t resizes;       /* prefetch: index shard resizes while measured; < 0 if n/a */
	uint64_t reserved_rows; /* pf_reserved: the room emdb_table_reserve made; 0 if none */
	harness_result res;
	int n_anchors;
	report_anchor anchors[REPORT_MAX_ANCHORS];
} report_record;

/* A record with no anchors and the n/a markers set. */
void report_record_init(report_record *r, const char *workload, unsigned threads,
			uint32_t batch, uint32_t dim, uint64_t rows, keys_dist dist);

void report_add_anchor(report_record *r, const char *key, const char *ratio_key,
		       const char *label, double per_sec, double goal);

typedef struct report_meta {
	long cores;
	double seconds;
	const char *init; /* the tables' row initializer */
	double load1;     /* 1-minute load average before the run: other tenants */
	int json;
} report_meta;

/* The human table (all records), or one JSON object per record and line. */
void report_print(FILE *f, const report_meta *m, const report_record *recs, int n);

/* Goals missed over all records (ratio below goal). */
int report_goals_missed(const report_record *recs, int n);

#endif
