/*
 * report.c - prints emdb-bench's records as a table for people or as JSON
 * lines for scripts.
 *
 * Design
 *   A ratio is always workload / anchor, both measured in this process and
 *   run, with the same thread count, batch, dim and ID distribution, so a
 *   figure means the same on any machine: what fraction of what the memory
 *   system (or the naive design) allows the engine reaches.  Absolute rates
 *   are printed too, but only the ratios carry goals.
 *
 *   JSON objects are flat (one key per figure) so that `jq` one-liners and
 *   spreadsheets take them as they are; per_thread is the only array.
 *
 * Invariants
 *   1. Every record prints as exactly one JSON line.
 *   2. A goal is checked only where the anchor and workload rates are both
 *      positive; goals_failed lists the ratio keys that fell short.
 */
#include "tools/bench/report.h"

#include <string.h>

void report_record_init(report_record *r, const char *workload, unsigned threads,
			uint32_t batch, uint32_t dim, uint64_t rows, keys_dist dist)
{
	memset(r, 0, sizeof(*r));
	r->workload = workload;
	r->threads = threads;
	r->batch = batch;
	r->dim = dim;
	r->rows = rows;
	r->dist = dist;
	r->new_frac = -1;
	r->unique_frac = -1;
	r->resizes = -1;
}

void report_add_anchor(report_record *r, const char *key, const char *ratio_key,
		       const char *label, double per_sec, double goal)
{
	report_anchor *a;

	if (r->n_anchors == REPORT_MAX_ANCHORS)
		return;
	a = &r->anchors[r->n_anchors++];
	a->key = key;
	a->ratio_key = ratio_key;
	a->label = label;
	a->per_sec = per_sec;
	a->goal = goal;
}

static double ratio(const report_record *r, const report_anchor *a)
{
	return a->per_sec > 0 ? r->res.best / a->per_sec : 0;
}

static int missed(const report_record *r, const report_anchor *a)
{
	return a->goal > 0 && a->per_sec > 0 && r->res.best > 0 &&
	       ratio(r, a) < a->goal;
}

int report_goals_missed(const report_record *recs, int n)
{
	int k = 0;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < recs[i].n_anchors; j++)
			k += missed(&recs[i], &recs[i].anchors[j]);
	return k;
}

/* "12.3M", "950k": rates span six orders of magnitude. */
static const char *human(double v, char *buf, size_t cap)
{
	if (v >= 1e9)
		snprintf(buf, cap, "%.2fG", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, cap, "%.2fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, cap, "%.1fk", v / 1e3);
	else
		snprintf(buf, cap, "%.0f", v);
	return buf;
}

static void print_json(FILE *f, const report_meta *m, const report_record *r)
{
	int first = 1;

	fprintf(f, "{\"workload\":\"%s\",\"threads\":%u,\"batch\":%u,\"dim\":%u,"
		   "\"rows\":%llu,\"distribution\":\"%s\"",
		r->workload, r->threads, r->batch, r->dim,
		(unsigned long long)r->rows, keys_dist_name(r->dist));
	if (r->dist == KEYS_ZIPF)
		fprintf(f, ",\"zipf_s\":%.5f,\"zipf_hot_share\":%.4f",
			r->zipf_s, r->zipf_share);
	if (r->optimizer)
		fprintf(f, ",\"optimizer\":\"%s\"", r->optimizer);
	fprintf(f, ",\"ids_per_sec\":%.0f,\"ids_per_sec_median\":%.0f",
		r->res.best, r->res.median);
	fputs(",\"per_thread\":[", f);
	for (unsigned t = 0; t < r->threads; t++)
		fprintf(f, "%s%.0f", t ? "," : "", r->res.per_thread[t]);
	fputc(']', f);
	if (r->new_frac >= 0)
		fprintf(f, ",\"new_frac\":%.4f", r->new_frac);
	if (r->resizes >= 0)
		fprintf(f, ",\"index_resizes\":%lld", (long long)r->resizes);
	if (r->reserved_rows)
		fprintf(f, ",\"reserved_rows\":%llu", (unsigned long long)r->reserved_rows);
	if (r->unique_frac >= 0)
		fprintf(f, ",\"rows_updated_per_id\":%.4f", r->unique_frac);
	for (int j = 0; j < r->n_anchors; j++) {
		const report_anchor *a = &r->anchors[j];
		fprintf(f, ",\"%s\":%.0f,\"%s\":%.4f", a->key, a->per_sec,
			a->ratio_key, ratio(r, a));
		if (a->goal > 0)
			fprintf(f, ",\"goal_%s\":%.2f", a->ratio_key, a->goal);
	}
	fputs(",\"goals_failed\":[", f);
	for (int j = 0; j < r->n_anchors; j++)
		if (missed(r, &r->anchors[j])) {
			fprintf(f, "%s\"%s\"", first ? "" : ",", r->anchors[j].ratio_key);
			first = 0;
		}
	fprintf(f, "],\"init\":\"%s\",\"cores\":%ld,\"load_before\":%.2f,"
		   "\"core_rtt_ns\":[%.0f,%.0f],\"seconds\":%.2f,\"measure\":\"best of %d\"}\n",
		m->init, m->cores, m->load1, r->res.rtt_ns[0], r->res.rtt_ns[1], m->seconds, HARNESS_REPS);
}

static void print_table(FILE *f, const report_meta *m, const report_record *recs, int n)
{
	char b1[32], b2[32], b3[32];

	fprintf(f, "emdb-bench: %ld cores online (load %.2f before the run); each "
		   "figure is the best of %d repetitions of %.2f s after a warm-up; "
		   "rows initialized %s\n\n",
		m->cores, m->load1, HARNESS_REPS, m->seconds / HARNESS_REPS, m->init);
	fprintf(f, "%-9s %3s %-7s %-8s %10s %5s %4s %9s %9s  %-22s %9s %7s %6s\n",
		"workload", "thr", "dist", "opt", "rows", "batch", "dim",
		"IDs/s", "IDs/s/thr", "anchor", "anchor/s", "ratio", "goal");
	for (int i = 0; i < n; i++) {
		const report_record *r = &recs[i];
		fprintf(f, "%-9s %3u %-7s %-8s %10llu %5u %4u %9s %9s",
			r->workload, r->threads, keys_dist_name(r->dist),
			r->optimizer ? r->optimizer : "-",
			(unsigned long long)r->rows, r->batch, r->dim,
			human(r->res.best, b1, sizeof(b1)),
			human(r->res.best / r->threads, b2, sizeof(b2)));
		if (r->n_anchors == 0)
			fputc('\n', f);
		for (int j = 0; j < r->n_anchors; j++) {
			const report_anchor *a = &r->anchors[j];
			char goal[16] = "";
			if (j > 0)
				fprintf(f, "%-9s %3s %-7s %-8s %10s %5s %4s %9s %9s",
					"", "", "", "", "", "", "", "", "");
			if (a->goal > 0)
				snprintf(goal, sizeof(goal), ">=%.2f", a->goal);
			fprintf(f, "  %-22s %9s %7.3f %6s %s\n", a->label,
				human(a->per_sec, b3, sizeof(b3)), ratio(r, a), goal,
				missed(r, a) ? "MISSED" : a->goal > 0 ? "ok" : "");
		}
	}
	for (int i = 0; i < n; i++)
		if (recs[i].dist == KEYS_ZIPF && recs[i].zipf_s > 0) {
			fprintf(f, "\nzipf over %llu IDs: exponent %.4f, top 2.2%% of "
				   "IDs drew %.1f%% of accesses\n",
				(unsigned long long)recs[i].rows, recs[i].zipf_s,
				100 * recs[i].zipf_share);
			break;
		}
	double lo = 0, hi = 0;
	for (int i = 0; i < n; i++)
		harness_rtt_span(&recs[i].res, &lo, &hi);
	if (hi > 0)
		fprintf(f, "core-to-core round trip before/after the measurements: %.0f-%.0f ns\n", lo, hi);
	/* The placements differ several-fold: name the figures taken far. */
	for (int i = 0, named = 0; hi > 2 * lo && i < n; i++) {
		const report_record *r = &recs[i];
		if (!harness_rtt_far(&r->res, lo))
			continue;
		fprintf(f, "%s%s %u %s%s%s", named++ ? ", " : "  taken with the CPUs far apart (before/after): ",
			r->workload, r->threads, keys_dist_name(r->dist), r->optimizer ? " " : "",
			r->optimizer ? r->optimizer : "");
		fprintf(f, " (%.0f/%.0f)", r->res.rtt_ns[0], r->res.rtt_ns[1]);
	}
	if (hi > 2 * lo)
		fputc('\n', f);
	fprintf(f, "\n%d goal(s) missed\n", report_goals_missed(recs, n));
}

void report_print(FILE *f, const report_meta *m, const report_record *recs, int n)
{
	if (m->json) {
		for (int i = 0; i < n; i++)
			print_json(f, m, &recs[i]);
	} else {
		print_table(f, m, recs, n);
	}
	fflush(f);
}
