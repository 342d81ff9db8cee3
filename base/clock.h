/*
 * clock.h - the monotonic clock every layer measures with (the engine's
 * auto-checkpoint timing of Update, checkpoint and restore progress).
 * Header only, in the base layer so that the engine need not call into
 * checkpoint code for the time.
 */
#ifndef EMDB_CLOCK_H
#define EMDB_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds of CLOCK_MONOTONIC: for intervals, never for dates. */
static inline uint64_t emdb__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
