/*
 * meminfo.h - fields of the kernel's /proc/meminfo, for the reserve's
 * "is there room" check and the huge page pool's readings
 * (emdb_alloc_pool_free).  Internal to emdb: the base layer and the layers above it.
 */
#ifndef EMDB_MEMINFO_H
#define EMDB_MEMINFO_H

#include <stddef.h>

/* The numbers of fields keys[0..n) ("MemAvailable", "HugePages_Free"...)
 * into out[0..n), as the kernel writes them (kB, or pages for the huge
 * page counts), read in one pass; -1 for a field not there, every one
 * -1 where the file cannot be read. */
void meminfo_read(const char *const *keys, long *out, size_t n);

#endif
