/*
 * cluster/stats.c - statistics of every node (CLUSTER_TABLE_STATS): a
 * table's rows, bytes and counters as each node holds them, or each
 * node's totals over every table, for TABLE_DESCRIBE, STATS and INFO's
 * cluster section on any node; and the owner's side (node TABLE_STATS).
 *
 * Invariants:
 *   1. Every node is asked, in ring order, and answers for itself only;
 *      the sums are the caller's (a table's rows across nodes are the
 *      table's rows, each row living on one node).
 *   2. A node that does not answer (down, unreachable, timed out) or
 *      answers with an error leaves its own per_node[r].status < 0 and
 *      the request still succeeds: a user asking for statistics learns
 *      which node is unknown instead of getting nothing, and an unknown
 *      node is never counted as 0 by the callers.
 *   3. The request fails only when refused on its face here: the table
 *      does not exist on this node (NO_TABLE), or per_node is NULL.
 *
 * State changes: the caller's per_node array; nothing on any engine.
 */
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "cluster/cluster_int.h"

typedef struct stats_op stats_op;

typedef struct stats_call {
	cluster_call call;
	stats_op *op;
	uint32_t rank;
} stats_call;

struct stats_op {
	cluster_req *req;
	_Atomic uint32_t pending;
	stats_call calls[]; /* [nodes] */
};

/* This node's statistics of table (0: of every table, summed). */
static int local_stats(cluster *cl, uint32_t table, emdb_table_stats *out, uint64_t *alloc_bytes)
{
	emdb_db_stats ds;
	int rc = emdb_db_get_stats(cl->db, &ds);
	if (rc)
		return rc;
	*alloc_bytes = ds.alloc_bytes;
	if (!table) {
		*out = ds.total;
		return EMDB_OK;
	}
	emdb_table_info info;
	if ((rc = emdb_table_describe(cl->db, table, &info)))
		return rc;
	*out = info.stats;
	return EMDB_OK;
}

static void op_end(stats_op *op)
{
	if (atomic_fetch_sub_explicit(&op->pending, 1, memory_order_acq_rel) != 1)
		return;
	cluster_req *req = op->req;
	emdb_free(op);
	cluster__finish(req, EMDB_OK, NULL);
}

static void stats_reply(cluster_call *call, int rc, const uint8_t *frame, size_t len)
{
	stats_call *sc = call->arg;
	cluster_node_stats *ns = &sc->op->req->per_node[sc->rank];
	if (rc == EMDB_OK) {
		proto_node_msg m;
		uint8_t *copy = NULL;
		rc = cluster__decode(frame, len, &m, &copy);
		if (rc == EMDB_OK && (m.hdr.opcode != PROTO_NODE_TABLE_STATS || !(m.hdr.flags & PROTO_NODE_FLAG_RESPONSE)))
			rc = EMDB_ERR_PROTOCOL;
		else if (rc == EMDB_OK && m.hdr.status < 0)
			rc = m.hdr.status;
		else if (rc == EMDB_OK) {
			ns->stats = m.u.stats.stats;
			ns->alloc_bytes = m.u.stats.alloc_bytes;
		}
		emdb_free(copy);
	}
	ns->status = rc;
	op_end(sc->op);
}

int stats_submit(cluster *cl, cluster_req *req)
{
	emdb_table_config cfg;
	int rc = EMDB_OK;
	if (!req->per_node)
		rc = emdb__seterr(EMDB_ERR_INVALID, "cluster stats: NULL per_node");
	else if (req->table)
		rc = emdb_table_get_config(cl->db, req->table, &cfg);
	stats_op *op = rc ? NULL : emdb_calloc(1, sizeof(*op) + cl->nodes * sizeof(stats_call));
	if (!rc && !op)
		rc = emdb__seterr(EMDB_ERR_NOMEM, "cluster stats");
	if (rc) {
		cluster__set_msg(req, rc, NULL);
		return rc;
	}
	memset(req->per_node, 0, cl->nodes * sizeof(*req->per_node));
	op->req = req;
	atomic_store(&op->pending, cl->nodes + 1);
	proto_node_msg m = { .hdr = cluster__hdr(cl, PROTO_NODE_TABLE_STATS, req->table, false) };
	uint8_t *buf = NULL;
	size_t len = 0;
	int enc = cluster__encode(&m, &buf, &len, NULL);
	for (uint32_t k = 1; k < cl->nodes; k++) { /* invariant 1: the ring */
		uint32_t r = (cl->rank + k) % cl->nodes;
		stats_call *sc = &op->calls[r];
		sc->op = op;
		sc->rank = r;
		sc->call.done = stats_reply;
		sc->call.arg = sc;
		int crc = enc ? enc : cluster__call(cl, r, buf, len, &sc->call);
		if (crc) {
			req->per_node[r].status = crc;
			op_end(op);
		}
	}
	emdb_free(buf);
	cluster_node_stats *self = &req->per_node[cl->rank];
	self->status = local_stats(cl, req->table, &self->stats, &self->alloc_bytes);
	op_end(op);
	op_end(op);
	return EMDB_OK;
}

int cluster_stats_total(const cluster *cl, const cluster_node_stats *per_node, emdb_table_stats *sum,
			uint64_t *alloc_bytes)
{
	/* Every field is a uint64_t counter: summed as an array. */
	_Static_assert(sizeof(emdb_table_stats) % sizeof(uint64_t) == 0, "emdb_table_stats holds uint64_t only");
	enum { FIELDS = sizeof(emdb_table_stats) / sizeof(uint64_t) };
	uint64_t acc[FIELDS] = { 0 }, alloc = 0, step = 0;
	for (uint32_t r = 0; r < cl->nodes; r++) {
		const cluster_node_stats *ns = &per_node[r];
		if (ns->status < 0)
			return emdb__seterr(ns->status, "node %u did not give its statistics (%s): the cluster's total is unknown",
					    r, emdb_err_name(ns->status));
		uint64_t f[FIELDS];
		memcpy(f, &ns->stats, sizeof(f));
		for (size_t i = 0; i < FIELDS; i++)
			acc[i] += f[i];
		alloc += ns->alloc_bytes;
		step = ns->stats.step > step ? ns->stats.step : step;
	}
	memcpy(sum, acc, sizeof(*sum));
	sum->step = step;
	if (alloc_bytes)
		*alloc_bytes = alloc;
	return EMDB_OK;
}

void stats_serve(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	proto_node_msg rep = { .hdr = cluster__hdr(cl, m->hdr.opcode, m->hdr.table, true) };
	int rc = local_stats(cl, m->hdr.table, &rep.u.stats.stats, &rep.u.stats.alloc_bytes);
	uint8_t *buf = NULL;
	size_t len = 0;
	if (rc == EMDB_OK)
		rc = cluster__encode(&rep, &buf, &len, NULL);
	cluster__reply(cl, r, m->hdr.opcode, m->hdr.table, rc ? NULL : buf, len, rc);
}
