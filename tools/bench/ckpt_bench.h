/*
 * ckpt_bench.h - emdb-bench --workload checkpoint: full and incremental
 * checkpoints, restore, the Update pause and Pull under a checkpoint,
 * beside the sequential bandwidth of the same disk measured in the same
 * run (docs/benchmarks.md "Checkpoints").
 */
#ifndef EMDB_BENCH_CKPT_BENCH_H
#define EMDB_BENCH_CKPT_BENCH_H

#include <stdint.h>

#include <emdb/db.h>

#define CKPT_DEFAULT_ROWS 5000000ull        /* dim 64 Adam: 768 B a row, 3.8 GB */
#define CKPT_DEFAULT_PAUSE_ROWS 10000000ull /* dim 16 SGD: 64 B a row */
#define CKPT_PAUSE_DIM 16

typedef struct ckpt_bench_opts {
	uint64_t rows;        /* checkpointed table; 0: CKPT_DEFAULT_ROWS        */
	uint32_t dim;
	emdb_opt_kind opt;
	uint64_t pause_rows;  /* Update-pause table; 0: CKPT_DEFAULT_PAUSE_ROWS  */
	uint32_t batch;       /* IDs per Pull, and per Push of the pause loop    */
	double seconds;       /* each Pull measurement without a checkpoint      */
	unsigned threads;     /* preload and row changes                         */
	const char *dir;      /* parent of the fresh data directory; NULL: /tmp  */
	int json;
	int argc;             /* the command line, printed with the figures      */
	char **argv;
} ckpt_bench_opts;

/* Run the checkpoint workload and print its figures (table or JSON lines)
 * on stdout.  The data directory is removed before it returns, and on
 * every exit path.  Exits the process on failure. */
void ckpt_bench_run(const ckpt_bench_opts *o);

#endif
