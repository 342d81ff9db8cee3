/*
 * alloc_int.h - what the engine's own modules may ask of the allocator
 * beyond emdb/alloc.h.  Internal to libemdb.
 */
#ifndef EMDB_ALLOC_INT_H
#define EMDB_ALLOC_INT_H

#include <stddef.h>

/* The bytes emdb_map(size) counts against the limit (its rounding to
 * pages): what a caller adds up to check a growth before mapping any of
 * it. */
size_t emdb__map_bytes(size_t size);

/* EMDB_OK when `need` more bytes fit under the memory limit now (always,
 * without a limit); else NOMEM, with a message naming `what` (the
 * subject of "needs about N MB more", such as "table 'ads': room for 1000
 * rows"), the need, the limit and the bytes in use.  A check before allocating, so that a refused call
 * maps nothing: racing threads may still take the room meanwhile, which
 * the allocations themselves then refuse. */
int emdb__check_limit(size_t need, const char *what);

#endif
