/*
 * checkpoint/cluster_ckpt.h - what libemdb_checkpoint gives a cluster's
 * checkpoints (docs/cluster.md "Cluster checkpoints"): the cluster
 * manifest (its codec and its files in a directory every node reads) and
 * the restore of several nodes' parts into one node's engine, keeping the
 * rows its partition map gives it.  For emdb-server (net/) and tests.
 *
 * The directory (the server's cluster_checkpoint_dir) holds
 *   rank-<r>/               node r's own store (emdb/checkpoint.h): its parts
 *   manifests/<id>.ecm      one file per complete cluster checkpoint
 *   manifests/<id>.ecm.tmp  a manifest being written (never read)
 * A manifest file is written to .tmp, synced, renamed and the directory
 * synced: it is there whole or not at all, and it is written only after
 * every part is durable, so a cluster checkpoint without its manifest is
 * invisible to listing and restore.
 *
 * Errors: emdb_err codes with emdb_last_error() set.  Threads: reentrant.
 */
#ifndef EMDB_CHECKPOINT_CLUSTER_CKPT_H
#define EMDB_CHECKPOINT_CLUSTER_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/checkpoint.h>
#include <emdb/db.h>

#define CMAN_MAGIC 0x4D434D45u /* "EMCM" read as a LE u32 */
#define CMAN_VERSION 2           /* 1 still read: no workers' steps */
#define CMAN_ID_MAX 63          /* cluster id bytes */
#define CMAN_ADDR_MAX 255       /* node address bytes */
#define CMAN_PARTITIONS_MAX (1u << 24)
#define CMAN_TABLES_MAX 65536
#define CMAN_SEQS_MAX (1u << 24) /* workers' steps */

typedef struct cman_part {
	uint32_t rank;
	uint64_t part;            /* its checkpoint id in <dir>/rank-<rank> */
	uint64_t rows;            /* rows the part restores */
	uint64_t sum;             /* cman_part_sum of the part's emdb_ckpt_info */
	char addr[CMAN_ADDR_MAX + 1];
} cman_part;

typedef struct cman_table {
	uint32_t id;
	uint64_t step;
} cman_table;

/* A ranked worker's last applied step on a table at the checkpoint
 * (db/step.h's step_seq_rec), so that its resend after a restore is
 * answered, not counted. */
typedef struct cman_seq {
	uint32_t table, worker;
	uint64_t session, seq, rows;
} cman_seq;

typedef struct cman {
	uint64_t id;              /* >= 1, numbered by the coordinator */
	uint32_t kind;            /* 1 full, 2 incremental (as asked) */
	uint64_t created_ms;      /* Unix time the manifest was written */
	char cluster_id[CMAN_ID_MAX + 1];
	uint32_t nodes;           /* N: parts[N], one per rank */
	uint32_t partitions;      /* P: rank_of[P] */
	uint64_t epoch;
	uint32_t *rank_of;
	uint32_t n_tables;
	cman_table *tables;       /* every table's id and step */
	cman_part *parts;
	uint32_t n_seqs;          /* version 2 */
	cman_seq *seqs;
} cman;

/* The checksum a manifest records for a part: XXH3-64 of the fields of
 * its emdb_ckpt_info that identify it (id, kind, parent, created_ms,
 * tables, max_step, rows_total, bytes). */
uint64_t cman_part_sum(const emdb_ckpt_info *info);

/* Encode m into *buf (emdb_malloc'd; emdb_free) of *len bytes: the
 * layout of docs/cluster.md, ending with XXH3-64 of all before it.
 * Errors: INVALID (m breaks a rule the decoder checks), NOMEM. */
int cman_encode(const cman *m, uint8_t **buf, size_t *len);
/* Decode and check p[0..len) into *m (arrays emdb_malloc'd: cman_free).
 * Errors: CORRUPT naming what is wrong (short, magic, version, checksum,
 * a count, a rank, trailing bytes), NOMEM.  *m is zeroed on error. */
int cman_decode(const uint8_t *p, size_t len, cman *m);
void cman_free(cman *m);

/* <dir>/rank-<rank>, emdb_malloc'd (NULL: no memory). */
char *cman_part_dir(const char *dir, uint32_t rank);

/* Write m as <dir>/manifests/<id>.ecm, durably and atomically (above).
 * Errors: EXISTS (that id is taken), IO, NOSPACE, NOMEM, INVALID. */
int cman_write(const char *dir, const cman *m);
/* The ids of the manifests in dir, ascending, into *ids (emdb_malloc'd;
 * NULL when *n is 0); a missing directory holds none.  Errors: IO, NOMEM. */
int cman_list(const char *dir, uint64_t **ids, size_t *n);
/* Read and check manifest id (0: the newest).  Errors: INVALID (none),
 * CORRUPT, IO, NOMEM. */
int cman_read(const char *dir, uint64_t id, cman *m);
/* Delete the manifests but the newest `keep` (>= 1); *deleted may be
 * NULL.  Errors: IO. */
int cman_retain(const char *dir, uint32_t keep, uint32_t *deleted);

/* Does the rank restoring keep this ID?  (owner_of under its map) */
typedef bool (*cman_keep_fn)(void *arg, uint64_t id);

/* Restore the cluster checkpoint m into db: read every part (its store
 * opened read-only, the part's whole chain checked as emdb_restore
 * checks it, and its identity against the manifest's checksum), keep
 * the rows keep() keeps, with their optimizer state, into new tables of
 * the same ids, configurations and steps, and only then replace every
 * table of db at once.  On any failure db is unchanged.  *rows_out (may
 * be NULL) gets the rows kept.  Memory: one part's rows at a time besides
 * the tables built.  Errors: CORRUPT (a part damaged, missing, not the one
 * named, or parts that disagree on a table or its step), IO, NOMEM,
 * LIMIT. */
int cman_restore(emdb_db *db, const char *dir, const cman *m, cman_keep_fn keep, void *arg, uint64_t *rows_out);

/* cman_restore in two steps, for a restore on every node of a running
 * cluster, all or none: cman_stage does all the reading and checking and
 * changes nothing (*out: the tables built, for cman_swap or
 * cman_discard); cman_swap replaces every table of db at once and frees
 * st, or fails (LIMIT, NOMEM) leaving db and st as they were. */
typedef struct cman_staged cman_staged;
int cman_stage(emdb_db *db, const char *dir, const cman *m, cman_keep_fn keep, void *arg, cman_staged **out,
	       uint64_t *rows_out);
int cman_swap(emdb_db *db, cman_staged *st);
void cman_discard(cman_staged *st); /* NULL is a no-op */

#endif
