/*
 * tier_test.h - controls of the test backend (db/tier_test.c), the
 * stand-in for a device in tests without a GPU: host memory with a tiny
 * capacity (tier_config.test_chunks chunks), byte counters (tier_stats)
 * and injected failures.
 */
#ifndef EMDB_TIER_TEST_H
#define EMDB_TIER_TEST_H

#include <stdint.h>

#include "db/tier.h"

/* The backend operation `after` operations from now (0: the next) fails
 * with err: EMDB_ERR_NOMEM (a full device: the call changes nothing) or
 * EMDB_ERR_IO (a failed device: the tier enters its sticky error state).
 * err 0 cancels.  t must be a TIER_TEST tier. */
void tier_test_fail_after(tier *t, uint32_t after, int err);

/* Asynchronous work (tier.h: tier_gather_submit, tier_scatter_submit):
 * the test tier defers a submitted job's work to its tier_job_wait, as
 * a device runs it while the caller goes on, so what the caller did in
 * between is observable: fn(ctx) is called at the start of every wait
 * of a deferred job, before its work runs (NULL: none).  Submit passes
 * the failure countdown as one operation, as the synchronous call does;
 * tier_test_fail_wait makes the next wait fail with IO (a device that
 * fails while the job runs). */
typedef void (*tier_test_wait_fn)(void *ctx);
void tier_test_on_wait(tier *t, tier_test_wait_fn fn, void *ctx);
void tier_test_fail_wait(tier *t);

/* Backend operations run so far, failed ones included. */
uint64_t tier_test_calls(const tier *t);

/* Memory the test tier calls its own, as a CUDA tier calls device
 * memory: tier_ptr_in_tier accepts pointers into it, tier_copy_in/out
 * copy to and from it, tier_gather writes into it with out_in_tier.  The
 * stand-in for a GPU trainer's buffers (mem:// device pointers).  At most
 * TIER_TEST_BUFFERS at once; NULL when full or out of memory.  Freed by
 * tier_test_free_buffer or with the tier. */
#define TIER_TEST_BUFFERS 8
void *tier_test_buffer(tier *t, size_t bytes);
/* The same, memory of one replica's device only (replica -1: of every
 * one, as tier_test_buffer), as a GPU's memory is one device's. */
void *tier_test_buffer_on(tier *t, int replica, size_t bytes);
void tier_test_free_buffer(tier *t, void *p);

#endif
