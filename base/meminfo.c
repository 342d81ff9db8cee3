/*
 * meminfo.c - reading fields of /proc/meminfo (meminfo.h).
 *
 * Invariants:
 *   1. One open and one pass over the file per call, however many fields
 *      are asked for, so that fields that belong together (HugePages_Free
 *      and HugePages_Rsvd) come from the same moment.
 *   2. The file is opened close-on-exec: a server that starts children
 *      does not leak it to them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/meminfo.h"

void meminfo_read(const char *const *keys, long *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = -1;
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return;
	char line[256];
	while (fgets(line, sizeof(line), f))
		for (size_t i = 0; i < n; i++) {
			size_t k = strlen(keys[i]);
			if (out[i] < 0 && !strncmp(line, keys[i], k) && line[k] == ':') {
				out[i] = strtol(line + k + 1, NULL, 10);
				break;
			}
		}
	fclose(f);
}
