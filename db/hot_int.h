/*
 * hot_int.h - the layout of a hot set (db/hot.h), shared by its two
 * files: db/hot.c (membership, counting, the step boundary) and
 * db/hot_serve.c (Pull, Push and Prefetch through the tier).
 */
#ifndef EMDB_HOT_INT_H
#define EMDB_HOT_INT_H

#include <pthread.h>

#include "db/hot.h"

#define HOT_COUNTERS_MAX (1u << 22)
#define HOT_ROWS_PER_CHUNK 4096u

struct hot {
	struct hot_members m;     /* first: hot_is_member reads it (hot.h)   */
	tier *tier;               /* NULL once the device failed             */
	hot_config cfg;
	emdb_optimizer opt;
	uint32_t dim, rf;
	uint64_t cap_rows;        /* rows the budget and the counters allow  */
	uint32_t rpc, max_chunks, chunks;
	uint32_t *free_slots;     /* [cap_rows] slots free in chunks held    */
	uint32_t nfree;
	uint64_t *mloc;           /* [cap_rows] members, dense               */
	uint32_t *mslot;          /* [cap_rows]                              */
	uint32_t nmem;
	/* Counters: open addressing, loc -> count (mu). */
	pthread_mutex_t mu;
	uint32_t ccap;            /* power of two                             */
	uint32_t cn;
	uint64_t *cloc;
	uint32_t *ccount;
	/* This pass's records (hot_record). */
	uint64_t rcap;
	uint64_t rn;              /* atomic                                   */
	int overflow;             /* atomic                                   */
	uint32_t *rslot;
	float *rgrad;
	hot_choose_fn choose;
	/* The serving paths (db/hot_serve.c). */
	pthread_mutex_t tmu;      /* the tier: one caller at a time; held by
				     hot_step throughout, so pushes never see
				     the membership change                    */
	uint32_t dev_gen;         /* accumulator generation (table.h acc_gen)
				     whose hot gradients the device takes now */
	bool exact[2];            /* generation g's hot gradients are all in
				     the device's accumulators, each row's
				     sum bit for bit the host's               */
	uint64_t round;           /* hot_step calls so far                    */
	uint64_t *pround;         /* [slots] round + 1 that scattered slot    */
	float *psum;              /* [slots * dim] the sum scattered there    */
	uint32_t npushed;         /* slots scattered this round               */
	bool acc_dirty;           /* hot_serve.c invariant 5                  */
	uint32_t *pcall;          /* [slots] the hot_push call that last saw it */
	uint32_t calls;
	uint64_t epoch;           /* atomic: bumped by hot_step and
				     hot_rows_written; staged rows of an
				     older epoch are stale                    */
	uint32_t *lent;           /* [cap_rows] free slots lent to staging    */
	uint32_t nlent;
	tier *zombie;             /* a failed tier dropped while jobs on it
				     were outstanding: closed by the last
				     wait (hot_serve.c invariant 7)           */
	uint32_t jobs_out;        /* submitted, not yet waited for            */
	hot_stats st;
	uint64_t *dev_gathered;   /* [replicas] hot_device_stats, under tmu  */
	uint64_t *dev_scattered;  /* [replicas]                               */
};

/* db/hot_serve.c, for hot.c: set up and free the serving state (NOMEM),
 * and the step boundary's part: lent slots back, and the replica's step
 * from the device's accumulators when they are exact (returns 1, 0 when
 * the caller must replay the host's sums after discarding them, or a
 * negative IO).  tmu held. */
int hot_serve_init(hot *h);
void hot_serve_free(hot *h);
void hot_serve_unlend(hot *h);
int hot_serve_step(hot *h, const emdb_opt_scalars *sc, uint64_t nrec, uint32_t gen);
void hot_serve_next(hot *h, uint32_t gen);
/* Empty the device's accumulators (a refusal leaves them dirty, retried
 * later: hot_serve.c invariant 5).  Returns IO or OK. */
int hot_serve_discard(hot *h);
/* Close a tier the device failed on (drop_device), now or, with jobs
 * outstanding, at the last one's wait.  tmu held. */
void hot_serve_close_tier(hot *h, tier *t);

/* hot.c, for hot_serve.c: a free slot (allocating a chunk when none is
 * left), UINT32_MAX when the device is full; *io set on a device
 * failure. */
uint32_t hot_take_slot(hot *h, int *io);

#endif
