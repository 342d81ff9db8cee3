/*
 * net/cluster_ckpt.h - emdb-server's side of cluster checkpoints
 * (docs/cluster.md "Cluster checkpoints"): the store of each node's parts
 * and the manifests in cluster_checkpoint_dir, the cluster layer's
 * cluster_ckpt_ops over net/checkpoint.h, the restore at start onto this
 * cluster's node count, and what CHECKPOINT, CHECKPOINT_LIST,
 * CHECKPOINT_DELETE and RESTORE do on a node of a cluster.
 *
 * Active only on a node with both cluster_file and cluster_checkpoint_dir
 * (s->cckpt not NULL); elsewhere the functions are not called and the
 * server checkpoints itself alone, as before.
 *
 * Errors: EMDB_OK or an emdb_err with the reason in err[errlen].
 */
#ifndef EMDB_NET_CLUSTER_CKPT_H
#define EMDB_NET_CLUSTER_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/checkpoint.h>

#include "net/cluster_conf.h"
#include "net/config.h"

typedef struct server server;

/* Where this node's checkpoint store is on a cluster with
 * cluster_checkpoint_dir: <dir>/rank-<rank> into buf; false (buf
 * untouched) when the node keeps its store in data_dir as a server alone. */
bool cckpt_store_dir(const net_config *c, char *buf, size_t len);

/* The `restore` setting on a node of a cluster: the newest complete
 * cluster checkpoint ("latest") or the one named, restored onto this
 * cluster's node count and partition map (this node keeps the rows it
 * owns).  "latest" with none logs that and returns EMDB_OK.  Main thread,
 * before the link exists.  Errors: INVALID, CORRUPT, IO, NOMEM. */
int cckpt_restore_at_start(server *s, const cluster_conf *conf, char *err, size_t errlen);

/* Install the operations on s->cluster and the automatic trigger; from
 * server_cluster_open once the cluster layer is open.  Errors: NOMEM. */
int cckpt_attach(server *s, const cluster_conf *conf, char *err, size_t errlen);
/* After the link closed.  Safe when not attached. */
void cckpt_detach(server *s);

/* CHECKPOINT on a cluster node: a cluster checkpoint of every node, as
 * job *job of this server (JOB_STATUS follows it).  Errors: BUSY,
 * UNSUPPORTED, NODE, INVALID, NOMEM. */
int cckpt_checkpoint(server *s, emdb_ckpt_kind kind, uint64_t *job, char *err, size_t errlen);
/* RESTORE on a cluster node: cluster checkpoint id (0: the newest)
 * restored on every node, all or none, as job *job.  Errors: as
 * cckpt_checkpoint. */
int cckpt_restore(server *s, uint64_t id, uint64_t *job, char *err, size_t errlen);
/* CHECKPOINT_LIST: the complete cluster checkpoints, oldest first (id,
 * kind, tables, created_ms, max_step, rows and rows_total summed over the
 * parts); *out emdb_malloc'd.  Errors: IO, CORRUPT, NOMEM. */
int cckpt_list(server *s, emdb_ckpt_info **out, size_t *n, char *err, size_t errlen);
/* What INFO's persistence section shows on a cluster node (docs/server.md):
 * the directory, how many cluster checkpoints it holds and the newest. */
typedef struct cckpt_report {
	char dir[CONFIG_PATH_MAX];
	int error;                 /* EMDB_OK, or the listing's error (why in err) */
	char err[256];
	size_t count;
	emdb_ckpt_info last;       /* when count > 0, as cckpt_list gives it */
} cckpt_report;
void cckpt_report_get(server *s, cckpt_report *r);
/* CHECKPOINT_DELETE: remove the manifest of cluster checkpoint id (its
 * parts go with retention).  Errors: INVALID, IO. */
int cckpt_delete(server *s, uint64_t id, char *err, size_t errlen);

#endif
