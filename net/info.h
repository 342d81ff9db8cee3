/*
 * net/info.h - the text of INFO: "# Section" headings and "key: value"
 * lines, like Redis's INFO.  Sections: server, clients, memory, ops,
 * tables, persistence, cluster; "" or "all" gives every one.  docs/server.md lists the keys.
 */
#ifndef EMDB_NET_INFO_H
#define EMDB_NET_INFO_H

#include <stddef.h>

#include "cluster/cluster.h"

typedef struct server server;

/* Build the text of `section` into *out (emdb_malloc'd, NUL-terminated,
 * *len bytes without the NUL; free with emdb_free).  per_node: every
 * node's statistics (CLUSTER_TABLE_STATS of table 0) for the cluster
 * section's rows and bytes per node, or NULL when they were not asked
 * (shown as unknown).  Errors: INVALID (unknown section), NOMEM.  Any
 * thread. */
int info_build(server *s, const char *section, const cluster_node_stats *per_node, char **out, size_t *len);


#endif
