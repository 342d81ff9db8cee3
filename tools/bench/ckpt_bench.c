/*
 * ckpt_bench.c - the driver and the report of emdb-bench --workload
 * checkpoint (ckpt_bench.h, docs/benchmarks.md "Checkpoints").
 *
 * Design
 *   One run, phases ordered so that memory stays bounded and every bound
 *   is measured next to the figure it divides:
 *
 *     0. after MEM_IDLE_S idle, the memory a restore of the table needs,
 *        made by emdb_table_reserve in a fresh emdb_db and timed (the
 *        memory bound, wl_ckpt.h), then freed
 *     1. the checkpointed table (rows x dim, the optimizer asked for),
 *        preloaded, then every row pushed and updated once so that weights
 *        and optimizer state are all nonzero
 *     2. three rounds of: a FULL checkpoint, timed; the disk bounds on a
 *        file of exactly its bytes in the same directory (ckpt_disk.c);
 *        the same bytes through RocksDB's SST writer alone, with the
 *        checkpoint's options and two writers (ckpt_sst.c); every file of
 *        the store dropped from the page cache, then the restore of that
 *        checkpoint into a fresh emdb_db, timed, checked against the
 *        original on a sample of rows, closed
 *     3. 1% of the rows changed, INCREMENTAL checkpoint; 10% more (other
 *        rows) changed, INCREMENTAL again
 *     4. Pull alone, Pull while a FULL checkpoint runs, Pull alone
 *     5. the table and its store closed and removed; the Update-pause
 *        table (pause_rows x dim 16, SGD) with its own store: a push and
 *        Update loop while a FULL and an INCREMENTAL checkpoint run
 *
 *   Each figure of the rounds is the best of its three, as everywhere in
 *   emdb-bench: on a shared virtual machine other tenants and the host only
 *   ever slow a run down.  Rounds interleave a job and the bound it is
 *   divided by, so a slow minute of the machine does not fall on one side,
 *   and the store's files are dropped from the page cache before each timed
 *   write or read, so that the job and its bound both fill the page cache
 *   from memory just freed: on a virtual machine whose host takes free
 *   memory back, writing into memory the host must fault in again is
 *   several times slower than writing into memory just freed, and which
 *   one a side got would decide the ratio.
 *
 *   Where the first write of memory costs more than reading the disk (a
 *   virtual machine whose host backs guest memory only when the guest
 *   first writes it, and takes freed memory back within seconds), a
 *   restore, which must write all of its table, is bound by that and not
 *   by the disk.  So the restore is also shown against the slower of the
 *   read bound and the memory bound; the goal stays on the read bound.
 *   The memory bound is taken once, before anything else, on memory idle
 *   long enough to be cold (a restore at start-up gets nothing else):
 *   memory freed less than about 10 s before still fills several times
 *   faster, so taking it between the rounds would measure what the last
 *   round left warm.
 *
 *   Memory peaks during a restore at the table twice (the original and the
 *   restored copy), plus what the page cache keeps.  MB are 1e6 bytes.
 *
 * Invariants
 *   1. Exit status as the rest of emdb-bench: 0 after printing figures,
 *      missed goals included; 1 (harness_die) for a failure.
 *   2. The data directory is gone when ckpt_bench_run returns or the
 *      process exits (ckpt_disk.c).
 */
#include "tools/bench/ckpt_bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <emdb/checkpoint.h>

#include "checkpoint/store_int.h"
#include "tools/bench/ckpt_disk.h"
#include "tools/bench/ckpt_sst.h"
#include "tools/bench/harness.h"
#include "tools/bench/preload.h"
#include "tools/bench/wl_ckpt.h"

#define VERIFY_ROWS 4096u
#define ROUNDS 3 /* full checkpoint, disk bounds, restore: best of 3 */
#define POOL_IDS (1u << 20)
#define MAX_FIGS 30
#define MEM_IDLE_S 10.0 /* before the memory bound: freed memory goes back to the host */

/* ---- the report -------------------------------------------------------- */

typedef struct ckpt_fig {
	const char *key;        /* JSON "figure"                               */
	const char *label;      /* human table                                 */
	double value;
	const char *unit;
	const char *peer;       /* bound or peer it is compared with; NULL: none */
	double peer_value;      /* in `unit`                                   */
	char goal_op;           /* '>': ratio >= goal; '<': value < goal; 0: none */
	double goal;
	double seconds;         /* the job's or measurement's time; 0: n/a     */
	double cpu;             /* CPU seconds of the job's thread; 0: n/a     */
	uint64_t bytes, rows;   /* what it wrote or read; 0: n/a                */
} ckpt_fig;

typedef struct ckpt_report {
	ckpt_fig figs[MAX_FIGS];
	int n;
	char cmdline[1024];
	char sizes[1024];
} ckpt_report;

static ckpt_fig *add_fig(ckpt_report *r, const char *key, const char *label,
			 double value, const char *unit)
{
	ckpt_fig *f;

	if (r->n == MAX_FIGS)
		harness_die("too many checkpoint figures");
	f = &r->figs[r->n++];
	memset(f, 0, sizeof(*f));
	f->key = key;
	f->label = label;
	f->value = value;
	f->unit = unit;
	return f;
}

static void set_peer(ckpt_fig *f, const char *peer, double value, char goal_op, double goal)
{
	f->peer = peer;
	f->peer_value = value;
	f->goal_op = goal_op;
	f->goal = goal;
}

static double fig_ratio(const ckpt_fig *f)
{
	return f->peer && f->peer_value > 0 ? f->value / f->peer_value : -1;
}

/* 1 met, 0 missed, -1 no goal. */
static int fig_met(const ckpt_fig *f)
{
	if (f->goal_op == '<')
		return f->value < f->goal;
	if (f->goal_op == '>')
		return fig_ratio(f) >= f->goal;
	return -1;
}

static void print_json(const ckpt_report *r)
{
	for (int i = 0; i < r->n; i++) {
		const ckpt_fig *f = &r->figs[i];
		printf("{\"workload\":\"checkpoint\",\"figure\":\"%s\",\"value\":%.6g,\"unit\":\"%s\"",
		       f->key, f->value, f->unit);
		if (f->peer)
			printf(",\"peer\":\"%s\",\"peer_value\":%.6g,\"ratio\":%.4f", f->peer,
			       f->peer_value, fig_ratio(f));
		if (f->goal_op)
			printf(",\"goal\":\"%s%g\",\"met\":%s",
			       f->goal_op == '<' ? "value<" : "ratio>=", f->goal,
			       fig_met(f) ? "true" : "false");
		if (f->seconds > 0)
			printf(",\"seconds\":%.4f", f->seconds);
		if (f->cpu > 0)
			printf(",\"cpu_seconds\":%.4f", f->cpu);
		if (f->bytes)
			printf(",\"bytes\":%llu", (unsigned long long)f->bytes);
		if (f->rows)
			printf(",\"rows\":%llu", (unsigned long long)f->rows);
		printf("}\n");
	}
}

static void print_table(const ckpt_report *r)
{
	int missed = 0;

	printf("%s\n%s\n\n", r->cmdline, r->sizes);
	printf("%-30s %10s %-5s %8s  %-30s %10s %7s %7s\n", "figure", "value", "unit",
	       "cpu/wall", "bound / peer", "value", "ratio", "goal");
	for (int i = 0; i < r->n; i++) {
		const ckpt_fig *f = &r->figs[i];
		char goal[16] = "", ratio[16] = "", peer[16] = "", cpu[16] = "";
		int met = fig_met(f);

		if (f->goal_op)
			snprintf(goal, sizeof(goal), "%s%g", f->goal_op == '<' ? "<" : ">=", f->goal);
		if (f->peer) {
			snprintf(peer, sizeof(peer), "%.4g", f->peer_value);
			snprintf(ratio, sizeof(ratio), "%.3f", fig_ratio(f));
		}
		if (f->cpu > 0 && f->seconds > 0)
			snprintf(cpu, sizeof(cpu), "%.2f", f->cpu / f->seconds);
		printf("%-30s %10.4g %-5s %8s  %-30s %10s %7s %7s %s\n", f->label, f->value,
		       f->unit, cpu, f->peer ? f->peer : "", peer, ratio, goal,
		       met == 1 ? "met" : met == 0 ? "MISSED" : "");
		missed += met == 0;
	}
	printf("\n%d goal(s) missed\n", missed);
}

/* ---- the run ----------------------------------------------------------- */

static emdb_store *open_store(const char *dir, const char *name, char *path, size_t cap)
{
	emdb_store *st;
	int rc;

	snprintf(path, cap, "%s/%s", dir, name);
	rc = emdb_store_open(path, &st);
	if (rc != EMDB_OK)
		preload_die_engine("emdb_store_open", rc);
	return st;
}

/* Seconds per row written by a checkpoint job, in microseconds. */
static double us_per_row(const ckpt_run *c)
{
	return c->info.rows ? c->seconds * 1e6 / (double)c->info.rows : 0;
}

static void job_fig(ckpt_fig *f, const ckpt_run *c, uint64_t rows)
{
	f->seconds = c->seconds;
	f->cpu = c->cpu_thread;
	f->bytes = c->info.bytes;
	f->rows = rows;
}

/* What phases 1-4 measured. */
typedef struct table_results {
	emdb_table_info info;
	ckpt_run full, rest, inc[2];
	ckpt_mem_run mem;       /* the memory of a restored table, made once, cold */
	ckpt_disk_bw bw;
	ckpt_sst_bw sst;
	ckpt_pull_result pull;
} table_results;

static void table_figs(const ckpt_bench_opts *o, const table_results *t, ckpt_report *rep)
{
	const ckpt_run *i1 = &t->inc[0], *i10 = &t->inc[1];
	double marginal = 0, fixed = 0; /* incremental time = fixed + marginal * rows */
	ckpt_fig *f;

	if (i10->info.rows > i1->info.rows) {
		marginal = (i10->seconds - i1->seconds) / (double)(i10->info.rows - i1->info.rows);
		fixed = i1->seconds - marginal * (double)i1->info.rows;
	}
	snprintf(rep->sizes, sizeof(rep->sizes),
		 "checkpointed table: %llu rows x dim %u, %s: %.0f B a row in memory "
		 "(vectors %.2f GB, optimizer state %.2f GB, index %.2f GB); full "
		 "checkpoint %.2f GB",
		 (unsigned long long)o->rows, o->dim, emdb_optimizer_name(o->opt),
		 (double)(t->info.stats.bytes_vectors + t->info.stats.bytes_optimizer) /
			 (double)o->rows,
		 (double)t->info.stats.bytes_vectors / 1e9,
		 (double)t->info.stats.bytes_optimizer / 1e9,
		 (double)t->info.stats.bytes_index / 1e9, (double)t->full.info.bytes / 1e9);

	f = add_fig(rep, "disk_write", "disk write bound", t->bw.write_mbs, "MB/s");
	f->bytes = t->bw.bytes;
	f = add_fig(rep, "disk_read", "disk read bound", t->bw.read_mbs, "MB/s");
	f->bytes = t->bw.bytes;
	f = add_fig(rep, "disk_write_direct", "  write, O_DIRECT", t->bw.direct_write_mbs, "MB/s");
	f->seconds = t->bw.direct_write_s, f->bytes = t->bw.direct_bytes;
	f = add_fig(rep, "disk_read_direct", "  read, O_DIRECT", t->bw.direct_read_mbs, "MB/s");
	f->seconds = t->bw.direct_read_s, f->bytes = t->bw.direct_bytes;
	f = add_fig(rep, "disk_write_cache", "  write, page cache", t->bw.cache_write_mbs, "MB/s");
	f->seconds = t->bw.cache_write_s, f->bytes = t->bw.bytes;
	f = add_fig(rep, "disk_read_cache", "  read, page cache", t->bw.cache_read_mbs, "MB/s");
	f->seconds = t->bw.cache_read_s, f->bytes = t->bw.bytes;
	f = add_fig(rep, "sst_write", "  SST writer alone, 2 threads", t->sst.mbs, "MB/s");
	f->seconds = t->sst.seconds, f->bytes = t->sst.bytes;
	f = add_fig(rep, "full", "full checkpoint",
		    (double)t->full.info.bytes / t->full.seconds / 1e6, "MB/s");
	set_peer(f, "disk write bound", t->bw.write_mbs, '>', 0.60);
	job_fig(f, &t->full, t->full.info.rows);
	f = add_fig(rep, "full_vs_sst", "  the same", (double)t->full.info.bytes / t->full.seconds / 1e6,
		    "MB/s");
	set_peer(f, "SST writer alone", t->sst.mbs, 0, 0);
	double rest_mbs = (double)t->rest.info.bytes / t->rest.seconds / 1e6;
	double mem_mbs = (double)t->rest.info.bytes / t->mem.seconds / 1e6;
	f = add_fig(rep, "restore", "restore (from disk)", rest_mbs, "MB/s");
	set_peer(f, "disk read bound", t->bw.read_mbs, '>', 0.50);
	job_fig(f, &t->rest, t->rest.info.rows_total);
	f = add_fig(rep, "restore_memory", "  making its memory", mem_mbs, "MB/s");
	f->seconds = t->mem.seconds;
	f = add_fig(rep, "restore_vs_slower", "  the restore again", rest_mbs, "MB/s");
	set_peer(f, "slower of read and memory", fmin(t->bw.read_mbs, mem_mbs), 0, 0);
	f = add_fig(rep, "incremental_1pct", "incremental, 1% changed", i1->seconds, "s");
	set_peer(f, "full checkpoint", t->full.seconds, 0, 0);
	job_fig(f, i1, i1->info.rows);
	f = add_fig(rep, "incremental_10pct", "incremental, 10% changed", i10->seconds, "s");
	set_peer(f, "full checkpoint", t->full.seconds, 0, 0);
	job_fig(f, i10, i10->info.rows);
	f = add_fig(rep, "incremental_per_row", "incremental us/row at 10%", us_per_row(i10),
		    "us");
	set_peer(f, "incremental us/row at 1%", us_per_row(i1), 0, 0);
	f = add_fig(rep, "incremental_marginal", "incremental us/extra row", marginal * 1e6,
		    "us");
	set_peer(f, "full checkpoint us/row", us_per_row(&t->full), 0, 0);
	add_fig(rep, "incremental_fixed", "incremental fixed cost", fixed, "s");
	f = add_fig(rep, "pull_during", "pull during a full checkpoint", t->pull.during / 1e6,
		    "M/s");
	set_peer(f, "pull without (mean)", (t->pull.alone_before + t->pull.alone_after) / 2e6,
		 '>', 0.80);
	f->seconds = t->pull.ck.seconds;
	f = add_fig(rep, "pull_during_per_core", "  the same per core-second",
		    t->pull.core_during > 0 ? t->pull.during / t->pull.core_during / 1e6 : 0,
		    "M/s");
	set_peer(f, "pull without, per core-second",
		 t->pull.core_alone > 0
			 ? (t->pull.alone_before + t->pull.alone_after) / 2e6 / t->pull.core_alone
			 : 0,
		 0, 0);
}

/* Phases 1-4 on the checkpointed table. */
static void run_table(const ckpt_bench_opts *o, const char *dir, table_results *t)
{
	char path[4200];
	emdb_table_config cfg;
	ckpt_run run;
	keys_source src;
	keys_perm perm;
	pool p;
	uint64_t changed[2] = { o->rows / 100 ? o->rows / 100 : 1, o->rows / 10 ? o->rows / 10 : 1 };
	uint64_t full_id;
	uint32_t table;
	emdb_db *db = preload_db_open(), *copy;
	emdb_store *st;

	memset(t, 0, sizeof(*t));
	preload_config(&cfg, "ckpt", o->dim, o->opt, EMDB_INIT_UNIFORM);
	wl_ckpt_memory(&cfg, o->rows, MEM_IDLE_S, &t->mem);
	preload_table(db, &cfg, o->rows, o->threads, &table);
	wl_ckpt_touch(db, table, o->dim, NULL, 0, o->rows, o->threads);
	preload_describe(db, table, &t->info);
	st = open_store(dir, "store", path, sizeof(path));

	for (int i = 0; i < ROUNDS; i++) {
		ckpt_tree_drop_cache(path);
		wl_ckpt_take(db, st, EMDB_CKPT_FULL, &run);
		if (i == 0 || run.seconds < t->full.seconds)
			t->full = run;
		full_id = run.info.id;
		ckpt_tree_drop_cache(path);
		ckpt_disk_bound_rep(dir, run.info.bytes, &t->bw);
		ckpt_sst_bound_rep(dir, st->rows_opts, run.info.bytes, 2, &t->sst);
		harness_log("dropped %.2f GB of store files from the page cache",
			    (double)ckpt_tree_drop_cache(path) / 1e9);
		copy = wl_ckpt_restore(st, full_id, &run);
		wl_ckpt_verify(db, copy, table, o->rows, VERIFY_ROWS);
		emdb_db_close(copy);
		if (i == 0 || run.seconds < t->rest.seconds)
			t->rest = run;
	}

	keys_perm_init(&perm, o->rows, 0xc4e7);
	for (int i = 0; i < 2; i++) {
		wl_ckpt_touch(db, table, o->dim, &perm, i ? changed[0] : 0, changed[i], o->threads);
		wl_ckpt_take(db, st, EMDB_CKPT_INCREMENTAL, &t->inc[i]);
	}

	keys_source_init(&src, KEYS_UNIFORM, o->rows);
	pool_init(&p, &src, 1, o->batch, POOL_IDS, 0, 11);
	wl_ckpt_pull(db, table, o->dim, st, &p, o->seconds, &t->pull);
	pool_free(&p);
	emdb_store_close(st);
	emdb_db_close(db);
	ckpt_tree_remove(path);
}

/* Phase 5: the Update pause. */
static void run_pause(const ckpt_bench_opts *o, const char *dir, ckpt_report *rep)
{
	static const char *keys[CKPT_PAUSE_CKPTS][3] = {
		{ "pause_full", "update_p99_full", "switch_full" },
		{ "pause_incremental", "update_p99_incremental", "switch_incremental" }
	};
	static const char *labels[CKPT_PAUSE_CKPTS][3] = {
		{ "update pause, full", "  Update p99, full", "  switch, full" },
		{ "update pause, incremental", "  Update p99, incremental",
		  "  switch, incremental" }
	};
	char path[4200];
	emdb_table_config cfg;
	ckpt_pause_result res;
	keys_source src;
	pool p;
	uint32_t table;
	emdb_db *db = preload_db_open();
	emdb_store *st;
	size_t len = strlen(rep->sizes);

	preload_config(&cfg, "pause", CKPT_PAUSE_DIM, EMDB_OPT_SGD, EMDB_INIT_UNIFORM);
	preload_table(db, &cfg, o->pause_rows, o->threads, &table);
	st = open_store(dir, "pause", path, sizeof(path));
	keys_source_init(&src, KEYS_UNIFORM, o->pause_rows);
	pool_init(&p, &src, 1, o->batch, POOL_IDS, 0, 13);
	wl_ckpt_pause(db, table, CKPT_PAUSE_DIM, st, &p, &res);
	pool_free(&p);
	emdb_store_close(st);
	emdb_db_close(db);
	ckpt_tree_remove(path);

	snprintf(rep->sizes + len, sizeof(rep->sizes) - len,
		 "\nupdate-pause table: %llu rows x dim %u, sgd; each step a push of %u "
		 "IDs then an Update", (unsigned long long)o->pause_rows, CKPT_PAUSE_DIM,
		 o->batch);
	for (int k = 0; k < CKPT_PAUSE_CKPTS; k++) {
		ckpt_fig *f = add_fig(rep, keys[k][0], labels[k][0], res.max_update_s[k] * 1e3,
				      "ms");
		set_peer(f, "Update without, longest", res.base_max_update_s * 1e3, '<', 50);
		job_fig(f, &res.ck[k], res.ck[k].info.rows);
		f = add_fig(rep, keys[k][1], labels[k][1], res.p99_update_s[k] * 1e3, "ms");
		set_peer(f, "Update without, p99", res.base_p99_update_s * 1e3, 0, 0);
		add_fig(rep, keys[k][2], labels[k][2], (double)res.ck[k].prog.switch_ns / 1e6, "ms");
	}
}

void ckpt_bench_run(const ckpt_bench_opts *opts)
{
	ckpt_bench_opts o = *opts;
	ckpt_report *rep = calloc(1, sizeof(*rep));
	table_results *tr = calloc(1, sizeof(*tr));
	double load[1] = { -1 };
	const char *dir;
	size_t len = 0;

	if (!rep || !tr)
		harness_die("out of memory");
	if (!o.rows)
		o.rows = CKPT_DEFAULT_ROWS;
	if (!o.pause_rows)
		o.pause_rows = CKPT_DEFAULT_PAUSE_ROWS;
	for (int i = 0; i < o.argc && len + 2 < sizeof(rep->cmdline); i++)
		len += (size_t)snprintf(rep->cmdline + len, sizeof(rep->cmdline) - len, "%s%s",
					i ? " " : "", o.argv[i]);
	getloadavg(load, 1);
	dir = ckpt_dir_create(o.dir);
	harness_log("checkpoint workload in %s: %llu rows x dim %u %s, pause table %llu "
		    "rows x dim %u sgd, %u thread(s), load %.2f", dir,
		    (unsigned long long)o.rows, o.dim, emdb_optimizer_name(o.opt),
		    (unsigned long long)o.pause_rows, CKPT_PAUSE_DIM, o.threads, load[0]);
	run_table(&o, dir, tr);
	table_figs(&o, tr, rep);
	run_pause(&o, dir, rep);
	len = strlen(rep->sizes);
	snprintf(rep->sizes + len, sizeof(rep->sizes) - len,
		 "\ndata directory %s; %ld cores, load %.2f before the run; MB = 1e6 bytes",
		 dir, sysconf(_SC_NPROCESSORS_ONLN), load[0]);
	ckpt_dir_remove();
	if (o.json)
		print_json(rep);
	else
		print_table(rep);
	fflush(stdout);
	free(tr);
	free(rep);
}
