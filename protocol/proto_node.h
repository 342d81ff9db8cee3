/*
 * protocol/proto_node.h - the node-to-node protocol: the frames a cluster's
 * nodes exchange (cluster/, docs/protocol.md "Node-to-node").
 *
 * A node-to-node frame is a 32-byte header (proto_node_hdr) and a body of
 * hdr.body_len bytes, little-endian, body lengths and array offsets
 * multiples of 8, as for client frames (protocol/proto.h), so that arrays
 * are used in place.  It differs from a client frame in three ways:
 *   - its magic is "EMDN", so a node frame sent to a client port (or the
 *     reverse) is refused by the first four bytes;
 *   - it carries the partition map's epoch and the table, which every node
 *     checks before anything else (a frame of another epoch is refused);
 *   - it has no request id: the transport (cluster/link.h) pairs each
 *     request with its reply.
 *
 * Opcodes are the rows of PROTO_NODE_OP_MAP, in the 0x0600 range that
 * protocol/proto.h reserves for them; each row names the codec of its
 * request and of its response, one of:
 *   EMPTY  no body;
 *   SEL    a selection of rows: an owner's ticket or IDs (proto_node_sel);
 *   GRADS  a selection and its gradients (proto_node_grads);
 *   STEP   one arrival at a synchronous step (proto_node_step);
 *   ADMIN  one phase of a table change applied on every node (proto_node_admin);
 *   TICKET an owner's ticket handle and count (proto_node_ticket);
 *   VECS   n rows of floats and optionally n found bytes (proto_node_vecs);
 *   ROWS   a count of rows (proto_node_rows);
 *   SCAN   one page asked of an owner's rows (proto_node_scan);
 *   PAGE   that page: IDs, vectors, optionally state (proto_node_page);
 *   LOAD   rows written at their owner (proto_node_load);
 *   STATS  a node's statistics of a table or of all (proto_node_stats);
 *   CKPT   one phase of a cluster checkpoint (proto_node_ckpt);
 *   ECHO   opaque bytes, and in a request the reply's length (proto_node_echo).
 * A response with status < 0 has the error body instead (a message).
 *
 * Encoding (proto_node_encode) follows protocol/proto.h's convention
 * (EMDB_OK / LIMIT with the size needed / INVALID).  An array pointer left
 * NULL with a nonzero count is reserved in the frame instead of copied,
 * and proto_node_where tells where each array landed, so that a sender
 * gathers rows or the engine writes floats straight into the frame.  With
 * where given such an array is left as it is (the caller writes every
 * byte of it before the frame leaves: no zeroing of a megabyte that is
 * overwritten at once); with where NULL it is zeroed.
 *
 * Decoding (proto_node_decode) checks the whole frame: header, the opcode
 * known and of the right direction, status, then the body against the
 * opcode's codec, every count against the bytes present with overflow-safe
 * arithmetic, zero padding and reserved fields, no trailing bytes, and the
 * relations the frame itself can contradict (a ticket and IDs at once, a
 * gradient row index past the rows sent, per-opcode fields that must be 0).
 * It refuses with EMDB_ERR_PROTOCOL and a message naming opcode and field.
 * The frame must be 8-aligned (INVALID otherwise: a caller bug).  Pointers
 * in the result point into the frame.  What needs the node's state (the
 * epoch, the table, an owner ticket's count) is the receiver's to check.
 *
 * Threads: every function is reentrant.
 */
#ifndef EMDB_PROTO_NODE_H
#define EMDB_PROTO_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/db.h>

#include "protocol/proto.h"

#define PROTO_NODE_MAGIC 0x4E444D45u /* "EMDN" read as a LE u32 */
#define PROTO_NODE_VERSION 1
#define PROTO_NODE_HDR_SIZE 32
#define PROTO_NODE_FLAG_RESPONSE 0x01
/* The largest node frame (header included) a link carries; the link
 * refuses a larger one before sending it (net/node_link.h). */
#define PROTO_NODE_FRAME_MAX (1ull << 31)

/* proto_node_sel.flags */
#define PROTO_NODE_SEL_FOUND 0x1  /* LOOKUP: send found[] back */
/* proto_node_grads.flags */
#define PROTO_NODE_GRADS_MAPPED 0x1 /* row_of[n] and scale[n_rows] follow */
#define PROTO_NODE_GRADS_WEIGHTED 0x2 /* with MAPPED: scale[n], one weight per position */
/* proto_node_vecs.flags */
#define PROTO_NODE_VECS_FOUND 0x1
/* proto_node_scan.flags */
#define PROTO_NODE_SCAN_STATE 0x1 /* the page carries optimizer state */

/* proto_node_admin.action */
enum {
	PROTO_NODE_ADMIN_CREATE = 1,
	PROTO_NODE_ADMIN_DROP = 2,
	PROTO_NODE_ADMIN_RESERVE = 3,
	PROTO_NODE_ADMIN_ALTER = 4,
};

/* X(NAME, name, value, request codec, response codec)
 *   PREFETCH      resolve (insert) IDs at their owner -> the owner's ticket
 *   PULL          rows of an owner ticket or of IDs -> their vectors
 *   PUSH          gradients for an owner ticket or IDs
 *   PUSH_UPDATE   a PUSH and the table's Update in one (n may be 0)
 *   UPDATE        the table's Update (table 0: every table) -> rows
 *   LOOKUP        read-only rows of IDs -> vectors (and found)
 *   READ_STATE    optimizer state of IDs -> state floats and found
 *   TICKET_FREE   free an owner ticket
 *   STEP_ARRIVE   a worker's UPDATE of a synchronous step, to the step's
 *                 coordinator -> the step's rows once applied everywhere
 *   STEP_LEAVE    that worker's connection closed: withdraw its arrival
 *   TABLE_ADMIN   a table change asked of the coordinator by any node
 *   TABLE_PREPARE phase 1 of a table change: check, hold -> the node's id
 *   TABLE_COMMIT  phase 2: apply what PREPARE held
 *   TABLE_ABORT   phase 2 after a refusal: forget what PREPARE held
 *   SCAN          one page of the owner's rows of a table (its cursor)
 *   LOAD          rows (and state) written at their owner
 *   TABLE_STATS   the owner's statistics of a table (table 0: of all)
 *   CKPT_ASK      a cluster checkpoint asked of the coordinator by any
 *                 node -> the cluster checkpoint's id once its manifest
 *                 is written
 *   CKPT_HOLD     phase 1: hold new Updates, drain those in flight
 *   CKPT_WRITE    phase 2: write this node's part -> its part (id, rows)
 *   CKPT_END      phase 3: let Updates go; an abort deletes the part (or
 *                 forgets the rows a LOAD staged)
 *   CKPT_RESTORE  a restore of cluster checkpoint id (0: the newest) asked
 *                 of the coordinator by any node -> the id restored
 *   CKPT_LOAD     restore phase 2 (after HOLD): read every part, stage
 *                 the rows this node owns
 *   CKPT_SWAP     restore phase 3: replace every table with the staged
 *   PUSH_RANKED   PUSH as worker `rank` of a synchronous step: summed in
 *                 rank order at the owner (db/gradrank.h)
 *   STEP_ARRIVE_SEQ  STEP_ARRIVE of a ranked worker's numbered step (seq,
 *                 session, rank): a resend is counted once, a resend of
 *                 an applied step answered with its rows (db/step.h)
 *   ECHO          a linktest message (cluster/linktest.h): the owner
 *                 answers reply_len zero bytes, reading nothing of the
 *                 request's payload; no engine, no table */
#define PROTO_NODE_OP_MAP(X)                                          \
	X(PREFETCH, prefetch, 0x0600, SEL, TICKET)                    \
	X(PULL, pull, 0x0601, SEL, VECS)                              \
	X(PUSH, push, 0x0602, GRADS, EMPTY)                           \
	X(PUSH_UPDATE, push_update, 0x0603, GRADS, ROWS)              \
	X(UPDATE, update, 0x0604, EMPTY, ROWS)                        \
	X(LOOKUP, lookup, 0x0605, SEL, VECS)                          \
	X(READ_STATE, read_state, 0x0606, SEL, VECS)                  \
	X(TICKET_FREE, ticket_free, 0x0607, SEL, EMPTY)               \
	X(STEP_ARRIVE, step_arrive, 0x0608, STEP, ROWS)               \
	X(STEP_LEAVE, step_leave, 0x0609, STEP, EMPTY)                \
	X(TABLE_ADMIN, table_admin, 0x0610, ADMIN, ROWS)              \
	X(TABLE_PREPARE, table_prepare, 0x0611, ADMIN, ROWS)          \
	X(TABLE_COMMIT, table_commit, 0x0612, ADMIN, EMPTY)           \
	X(TABLE_ABORT, table_abort, 0x0613, ADMIN, EMPTY)             \
	X(SCAN, scan, 0x0614, SCAN, PAGE)                             \
	X(LOAD, load, 0x0615, LOAD, EMPTY)                            \
	X(TABLE_STATS, table_stats, 0x0616, EMPTY, STATS)             \
	X(CKPT_ASK, ckpt_ask, 0x0620, CKPT, ROWS)                     \
	X(CKPT_HOLD, ckpt_hold, 0x0621, CKPT, EMPTY)                  \
	X(CKPT_WRITE, ckpt_write, 0x0622, CKPT, CKPT)                 \
	X(CKPT_END, ckpt_end, 0x0623, CKPT, EMPTY)                    \
	X(CKPT_RESTORE, ckpt_restore, 0x0624, CKPT, ROWS)             \
	X(CKPT_LOAD, ckpt_load, 0x0625, CKPT, EMPTY)                  \
	X(CKPT_SWAP, ckpt_swap, 0x0626, CKPT, EMPTY)                  \
	X(PUSH_RANKED, push_ranked, 0x0630, GRADS, EMPTY)             \
	X(STEP_ARRIVE_SEQ, step_arrive_seq, 0x0631, STEP, ROWS)        \
	X(ECHO, echo, 0x0640, ECHO, ECHO)

typedef enum proto_node_op {
	/* Only in an error response to a frame whose opcode could not be
	 * trusted (bad magic, unknown opcode). */
	PROTO_NODE_NONE = 0,
#define PROTO_NODE_ENUM_(NAME, name, value, rq, rs) PROTO_NODE_##NAME = (value),
	PROTO_NODE_OP_MAP(PROTO_NODE_ENUM_)
#undef PROTO_NODE_ENUM_
} proto_node_op;

bool proto_node_op_known(uint16_t op);
/* "PULL", ...; "UNKNOWN" for anything else.  Static. */
const char *proto_node_op_name(uint16_t op);

typedef struct proto_node_hdr {
	uint8_t version;   /* PROTO_NODE_VERSION */
	uint8_t flags;     /* PROTO_NODE_FLAG_RESPONSE or 0 */
	uint16_t opcode;
	int32_t status;    /* 0 in requests; EMDB_OK or an emdb_err in responses */
	uint32_t table;    /* the table concerned; 0: every table or none */
	uint64_t epoch;    /* the sender's partition map epoch */
	uint32_t body_len;
} proto_node_hdr;

/* SEL: n positions of one owner, by its ticket (ids NULL, n the ticket's
 * count) or by IDs.  dim: the table's dim for PULL and LOOKUP, else 0.
 * PREFETCH, LOOKUP and READ_STATE take IDs only; TICKET_FREE a ticket
 * and n 0; flags only PROTO_NODE_SEL_FOUND, only in LOOKUP. */
typedef struct proto_node_sel {
	uint64_t ticket;
	uint32_t n;
	uint32_t dim;
	uint32_t flags;
	const uint64_t *ids; /* [n] when ticket is 0 */
} proto_node_sel;

/* GRADS: n positions by ticket or IDs, and n_rows rows of dim gradient
 * floats.  Plain (flags 0): n_rows == n, position i takes row i.  MAPPED:
 * position i takes row row_of[i] (< n_rows) scaled by scale[row_of[i]]:
 * the backward of a pooled Pull, each bag's gradient sent once.  MAPPED |
 * WEIGHTED: scale has n entries and position i takes row row_of[i] times
 * scale[i], its per-sample weight (the backward of PULL_WEIGHTED).
 * PUSH_UPDATE is plain only.  PUSH_RANKED is PUSH (any of its forms) from
 * worker `rank` (< EMDB_WORKERS_MAX) of a synchronous step
 * (emdb_push_as), the only opcode that carries it. */
typedef struct proto_node_grads {
	uint64_t ticket;
	uint32_t n;
	uint32_t dim;
	uint32_t n_rows;
	uint32_t flags;
	const uint64_t *ids;    /* [n] when ticket is 0 */
	const uint32_t *row_of; /* [n] when MAPPED */
	const float *scale;     /* [n_rows] when MAPPED; [n] with WEIGHTED */
	const float *grads;     /* [n_rows * dim] */
	uint32_t rank;          /* PUSH_RANKED only, else 0 */
} proto_node_grads;

/* STEP: worker `worker` (a key unique in the cluster: its home node's rank
 * and the worker's own key there) arrives at the table's step for
 * `workers` (>= 2); timeout_ms 0: none.  STEP_LEAVE: workers and
 * timeout_ms 0, the worker leaves whatever step it waits in.
 * STEP_ARRIVE_SEQ adds 24 bytes: seq (>= 1), session, rank (<
 * EMDB_WORKERS_MAX) and a reserved zero u32; the others carry none
 * (their seq, session and rank decode as 0). */
typedef struct proto_node_step {
	uint32_t workers;
	uint32_t timeout_ms;
	uint64_t worker;
	uint64_t seq;     /* STEP_ARRIVE_SEQ only */
	uint64_t session; /* STEP_ARRIVE_SEQ only */
	uint32_t rank;    /* STEP_ARRIVE_SEQ only */
} proto_node_step;

/* ADMIN: one table change, numbered txn by its coordinator.  CREATE
 * carries the configuration and, from COMMIT on, the id every node gives
 * the table (`id`); DROP, RESERVE and ALTER name the table in the header,
 * RESERVE carries rows and ALTER the new optimizer values. */
typedef struct proto_node_admin {
	uint32_t action;
	uint32_t id;
	uint64_t txn;
	uint64_t rows;
	emdb_table_config cfg; /* CREATE only */
	emdb_optimizer opt;    /* ALTER only */
} proto_node_admin;

/* proto_node_ckpt.flags */
#define PROTO_NODE_CKPT_COMMIT 0x1 /* CKPT_END: the manifest is written; else abort */

/* CKPT: one phase of cluster checkpoint `id` (0 in CKPT_ASK, whose
 * coordinator numbers it; CKPT_RESTORE may ask for 0, the newest) of kind
 * 1 (full) or 2 (incremental; restores send 1).
 * CKPT_HOLD carries timeout_ms (> 0): the node lets Updates go by itself
 * after it, should the coordinator never end the checkpoint.  The
 * response of CKPT_WRITE carries the part (this node's checkpoint id in
 * its store, nonzero) and its rows; every other field that its opcode does
 * not use is 0. */
typedef struct proto_node_ckpt {
	uint32_t kind;
	uint32_t flags;
	uint64_t id;
	uint64_t part;
	uint64_t rows;
	uint32_t timeout_ms;
} proto_node_ckpt;

typedef struct proto_node_ticket {
	uint64_t handle; /* nonzero */
	uint32_t count;
} proto_node_ticket;

typedef struct proto_node_vecs {
	uint32_t n;
	uint32_t width;        /* floats per row: dim, or state floats */
	uint32_t flags;        /* PROTO_NODE_VECS_FOUND */
	const float *vecs;     /* [n * width] */
	const uint8_t *found;  /* [n] when FOUND */
} proto_node_vecs;

typedef struct proto_node_rows {
	uint64_t rows;
} proto_node_rows;

/* SCAN: up to max_rows (>= 1) rows of the table from the owner's row
 * number `cursor` (emdb_table_scan's cursor there); dim the table's;
 * flags PROTO_NODE_SCAN_STATE or 0. */
typedef struct proto_node_scan {
	uint64_t cursor;
	uint32_t max_rows;
	uint32_t dim;
	uint32_t flags;
} proto_node_scan;

/* PAGE: n rows of dim floats with per_row state floats each (0: no
 * state), the owner's next cursor (0: its rows are done) and its step. */
typedef struct proto_node_page {
	uint32_t n;
	uint32_t dim;
	uint32_t per_row;
	uint64_t next_cursor;
	uint64_t step;
	const uint64_t *ids;  /* [n] */
	const float *vecs;    /* [n * dim] */
	const float *state;   /* [n * per_row] */
} proto_node_page;

/* LOAD: n (>= 1) rows to write at their owner; per_row 0: no state. */
typedef struct proto_node_load {
	uint32_t n;
	uint32_t dim;
	uint32_t per_row;
	const uint64_t *ids;  /* [n] */
	const float *vecs;    /* [n * dim] */
	const float *state;   /* [n * per_row] */
} proto_node_load;

/* STATS: the owner's emdb_table_stats of the header's table (of every
 * table, summed, for table 0) and its engine's allocated bytes. */
typedef struct proto_node_stats {
	emdb_table_stats stats;
	uint64_t alloc_bytes;
} proto_node_stats;

/* ECHO: len bytes of opaque payload (a multiple of 8; NULL: zeros,
 * written by the encoder); in a request also reply_len, the payload
 * bytes wanted back (a multiple of 8, at most PROTO_NODE_FRAME_MAX -
 * PROTO_NODE_HDR_SIZE), 0 in a response.  The header's table is 0. */
typedef struct proto_node_echo {
	uint32_t reply_len;
	uint32_t len;
	const uint8_t *payload; /* [len] */
} proto_node_echo;

/* A decoded frame, or one to encode: the header (body_len ignored by the
 * encoder) and the member of its opcode's codec for its direction; err
 * when status < 0. */
typedef struct proto_node_msg {
	proto_node_hdr hdr;
	union {
		proto_str err;
		proto_node_sel sel;
		proto_node_grads grads;
		proto_node_step step;
		proto_node_admin admin;
		proto_node_ckpt ckpt;
		proto_node_ticket ticket;
		proto_node_vecs vecs;
		proto_node_rows rows;
		proto_node_scan scan;
		proto_node_page page;
		proto_node_load load;
		proto_node_stats stats;
		proto_node_echo echo;
	} u;
} proto_node_msg;

/* Where proto_node_encode put each array (NULL for those absent). */
typedef struct proto_node_where {
	uint64_t *ids;
	uint32_t *row_of;
	float *scale;
	float *floats; /* grads or vecs */
	float *state;  /* PAGE, LOAD */
	uint8_t *found;
} proto_node_where;

/* Encode m (see above).  where may be NULL. */
int proto_node_encode(uint8_t *buf, size_t cap, const proto_node_msg *m, size_t *len,
		      proto_node_where *where);
/* An error reply to a request of op: status < 0, msg truncated at
 * PROTO_ERRMSG_MAX bytes (may be NULL). */
int proto_node_err_encode(uint8_t *buf, size_t cap, uint16_t op, uint32_t table, uint64_t epoch,
			  int status, const char *msg, size_t *len);
/* Decode and check frame[0 .. len) into *m (see above). */
int proto_node_decode(const uint8_t *frame, size_t len, proto_node_msg *m);
/* The opcode in a frame's header, read without checking anything else
 * (where to run it, before it is decoded); PROTO_NODE_NONE when the frame
 * is shorter than a header. */
uint16_t proto_node_peek_op(const uint8_t *frame, size_t len);

#endif
