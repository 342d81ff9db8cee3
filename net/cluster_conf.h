/*
 * net/cluster_conf.h - the cluster file: a cluster's static membership,
 * the same file on every node (docs/cluster.md).
 *
 *   # comments and blank lines are ignored
 *   cluster_id  ads-training
 *   partitions  1024             # optional, default 1024
 *   node 0 10.0.0.1:7900
 *   node 1 10.0.0.2:7900
 *   node 2 [fe80::1]:7900        # IPv6 literals in brackets
 *
 * Every rank 0 .. N-1 appears exactly once (in any order), no address twice.
 * The membership hash is a SHA-256 over a canonical text of the whole
 * membership (id, partitions, each rank's address in rank order), so two
 * files that differ only in comments, blanks or line order agree, and any
 * other difference shows at the handshake (net/node_link.h).
 *
 * Ownership: cluster_conf_parse/load fill a caller's struct whose nodes
 * array is emdb_malloc'd; cluster_conf_free releases it.  Plain values,
 * any thread.
 */
#ifndef EMDB_NET_CLUSTER_CONF_H
#define EMDB_NET_CLUSTER_CONF_H

#include <stddef.h>
#include <stdint.h>

#define CLUSTER_ID_MAX 64          /* bytes of cluster_id, NUL included */
#define CLUSTER_HOST_MAX 256       /* bytes of a host, NUL included */
#define CLUSTER_MAX_NODES 1024
#define CLUSTER_PARTITIONS_DEFAULT 1024u
#define CLUSTER_PARTITIONS_MAX (1u << 20)
#define CLUSTER_HASH_LEN 32

typedef struct cluster_node {
	char host[CLUSTER_HOST_MAX]; /* as written, brackets removed */
	uint16_t port;
} cluster_node;

typedef struct cluster_conf {
	char id[CLUSTER_ID_MAX];
	uint32_t partitions;         /* P, >= nodes */
	uint32_t nodes;              /* N */
	cluster_node *node;          /* [N], indexed by rank */
	uint8_t hash[CLUSTER_HASH_LEN]; /* membership hash */
} cluster_conf;

/* Parse the text of a cluster file (`name` is used in messages).  Returns
 * 0, or -1 with "NAME:LINE: reason" (or "NAME: reason") in err and *out
 * untouched. */
int cluster_conf_parse(const char *text, size_t len, const char *name, cluster_conf *out, char *err,
		       size_t errlen);
/* Read and parse the file at path; the same contract. */
int cluster_conf_load(const char *path, cluster_conf *out, char *err, size_t errlen);
/* Release what a successful parse allocated; *c becomes empty. */
void cluster_conf_free(cluster_conf *c);

/* "host:port" of a rank ("[v6]:port" for an IPv6 literal) into buf. */
void cluster_conf_addr(const cluster_conf *c, uint32_t rank, char *buf, size_t len);

#endif
