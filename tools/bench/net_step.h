/*
 * net_step.h - emdb-bench --net --workload step: synchronous steps of
 * data-parallel workers (emdb_client_update_sync) against the way
 * trainers do without them.
 */
#ifndef EMDB_BENCH_NET_STEP_H
#define EMDB_BENCH_NET_STEP_H

#include <stdint.h>

#include "tools/bench/pool.h"

typedef struct net_step_result {
	unsigned workers;
	double steps_per_sec;      /* emdb_client_update_sync, best repetition */
	double peer_steps_per_sec; /* barrier in the trainer, plain Update      */
} net_step_result;

/* `workers` threads, each on a connection of its own to uri, pushing its
 * batches of p (thread t's slice) into `table` of dimension dim; one step
 * is every worker's push and the step's Update.  Measured two ways, in
 * alternating repetitions of about seconds / 6 each, the best of three:
 * each worker calling emdb_client_update_sync; and the peer, the workers
 * meeting at a pthread barrier, worker 0 calling emdb_client_update, and
 * all meeting again before the next push (a barrier in the trainer's own
 * process, the cheapest a trainer could have).  Exits the process on any
 * error. */
void net_step_measure(const char *uri, uint32_t table, uint32_t dim, const pool *p, unsigned workers,
		      double seconds, net_step_result *out);

#endif
