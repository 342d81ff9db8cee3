/*
 * db/db_cluster.h - what the cluster layer (cluster/) asks of the engine
 * beyond emdb/db.h: the general form of Push that an owner node runs for
 * a home node, and tables created under the id the whole cluster agreed
 * on.  Internal to emdb (libemdb and cluster/); errors and threads as in
 * emdb/db.h.
 */
#ifndef EMDB_DB_CLUSTER_H
#define EMDB_DB_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include <emdb/db.h>

/* Push where position i (of ids[n], or of ticket tk) takes gradient row
 * row_of[i] of grads[n_rows * dim], multiplied by scale[row_of[i]] as it
 * is added (one fused multiply-add, as emdb_push_bags adds a bag's
 * gradient): emdb_push_bags is the case of one row per bag, and a cluster
 * owner given part of a batch's bags gets the same bits as one node.
 * Errors: as emdb_push_bags; INVALID when a row_of is >= n_rows. */
int emdb__push_mapped(emdb_db *db, uint32_t table, const uint64_t *ids, size_t n, const emdb_ticket *tk,
		      const uint32_t *row_of, const float *scale, size_t n_rows, uint32_t dim,
		      const float *grads);
/* Push as worker `rank` of a synchronous step (emdb_push_as;
 * EMDB_WORKER_NONE: none) in any of the forms above: row_of NULL, a
 * plain push (position i takes row i); else emdb__push_mapped (scale) or,
 * with weights set instead, emdb__push_mapped_weighted; with neither,
 * position i takes row row_of[i] as a plain push adds it (a home node's
 * local part, row_of its positions in the request's gradients).  What an
 * owner runs for a home node's PUSH_RANKED (and PUSH). */
int emdb__push_mapped_as(emdb_db *db, uint32_t table, uint32_t rank, const uint64_t *ids, size_t n,
			 const emdb_ticket *tk, const uint32_t *row_of, const float *scale, const float *weights,
			 size_t n_rows, uint32_t dim, const float *grads);

/* emdb__push_mapped with a weight per position instead of a scale per
 * row: position i takes row row_of[i] times weights[i], as
 * emdb_push_bags_weighted adds it, so an owner given part of a weighted
 * batch gets the same bits as one node.  Errors: as emdb__push_mapped. */
int emdb__push_mapped_weighted(emdb_db *db, uint32_t table, const uint64_t *ids, size_t n,
			       const emdb_ticket *tk, const uint32_t *row_of, const float *weights,
			       size_t n_rows, uint32_t dim, const float *grads);

/* The positional forms, for a cluster home node's local part: the batch
 * (ids[n], or ticket tk with ids NULL) is part of a larger request, its
 * position i being the request's position pos[i]; rows are written to
 * (Pull, Lookup, state reads) or gradients read from (Push+Update) row
 * pos[i] of the request's buffer, found[pos[i]] likewise, instead of row
 * i.  Same bits as the plain calls on a copy.  Buffers are host memory.
 * Errors: as emdb_pull, emdb_lookup, emdb_read_state and
 * emdb_push_update; INVALID for NULL pos. */
int emdb__pull_at(emdb_db *db, uint32_t table, const uint64_t *ids, size_t n, const emdb_ticket *tk, uint32_t dim,
		  const uint32_t *pos, float *out);
int emdb__lookup_at(emdb_db *db, uint32_t table, const uint64_t *ids, size_t n, uint32_t dim, const uint32_t *pos,
		    float *out, uint8_t *found);
int emdb__read_state_at(emdb_db *db, uint32_t table, const uint64_t *ids, size_t n, const uint32_t *pos,
			float *state, uint8_t *found);
int emdb__push_update_at(emdb_db *db, uint32_t table, const uint64_t *ids, size_t n, const emdb_ticket *tk,
			 uint32_t dim, const uint32_t *pos, const float *grads, uint64_t *rows_out);

/* emdb_table_create giving the table exactly `id`, which must not have
 * been given before (ids are never reused: EXISTS), so that every node of
 * a cluster numbers a table alike.  Later creates number from id + 1. */
int emdb__table_create_as(emdb_db *db, const emdb_table_config *cfg, uint32_t id);

/* Would emdb_table_create accept cfg now?  EMDB_OK or its error
 * (INVALID, EXISTS, LIMIT); *next_id gets the id it would give. */
int emdb__table_check_create(emdb_db *db, const emdb_table_config *cfg, uint32_t *next_id);

/* Would emdb_table_alter accept opt for the table now?  EMDB_OK or its
 * error (NO_TABLE, INVALID); changes nothing (a cluster's PREPARE). */
int emdb__table_check_alter(emdb_db *db, uint32_t table, const emdb_optimizer *opt);

#endif
