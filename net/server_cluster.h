/*
 * net/server_cluster.h - emdb-server as one node of a cluster: the cluster
 * file, the secret and the node link (net/node_link.h) at start, and the
 * wait for the cluster to form before any client listener opens.
 *
 * A server without cluster_file has no link (s->link NULL) and behaves as
 * a single node; every function here is then a no-op returning 0.
 *
 * Decision (docs/cluster.md): a node opens its client listeners, and so
 * writes its port file, only once the cluster is ready, so no client ever
 * reaches a node that cannot yet route its requests.  Peers' requests that
 * arrive before the cluster layer installs its serve function are answered
 * BUSY by the link.
 */
#ifndef EMDB_NET_SERVER_CLUSTER_H
#define EMDB_NET_SERVER_CLUSTER_H

#include <stddef.h>

typedef struct server server;

/* Read cluster_file and cluster_secret_file, create the link (its UCX
 * listener binds this rank's address; connecting starts).  Main thread,
 * from server_create.  Returns 0, or -1 with the reason in err. */
int server_cluster_open(server *s, char *err, size_t errlen);

/* Wait until every node is reachable and agrees, at most
 * cluster_start_timeout_ms, while still answering SIGTERM/SIGINT.  Returns
 * 0 when ready, -1 (logged, naming the node and the reason) otherwise. */
int server_cluster_wait(server *s);

/* Every tick (main thread): a peer that connected again since the last
 * tick restarted, so the owner tickets it held here are freed
 * (cluster_peer_lost).  Safe without a link. */
void server_cluster_tick(server *s);

/* Close the link (calls in flight end CLOSED); after the I/O threads
 * stopped.  Safe without a link. */
void server_cluster_close(server *s);

#endif
