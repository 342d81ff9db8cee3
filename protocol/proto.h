/*
 * protocol/proto.h - the one encoder/decoder of emdb's binary wire protocol.
 *
 * The server (net/), the C client (client/), the node-to-node path and the
 * tests all build and parse frames with this module and nothing else.  The
 * specification, with every header and body as an OFFSET / SIZE / MEANING
 * table, is docs/protocol.md; this header is the manual of the C API.
 * No socket I/O happens here: callers move bytes, this module gives them
 * meaning.
 *
 * Frames
 *   A frame is a 24-byte header (proto_hdr) followed by hdr.body_len bytes
 *   of body.  Everything is little-endian.  Body lengths are multiples of 8,
 *   and inside a body every u64 and float array starts at a multiple of 8
 *   from the body start, so a body that sits at an 8-aligned address (as the
 *   frames of proto_reader always do) can be used in place: decoders return
 *   `const uint64_t *` and `const float *` pointing into the body, never
 *   copies.  This requires a little-endian host (checked at compile time).
 *
 * Encoders
 *   Every encoder writes a whole frame (header and body) for request id `id`
 *   and follows one convention:
 *
 *     int proto_X_encode(uint8_t *buf, size_t cap, uint64_t id,
 *                        const proto_X *m, size_t *len);
 *
 *   EMDB_OK: the frame is in buf[0 .. *len).
 *   EMDB_ERR_LIMIT: cap is too small; nothing useful was written and *len
 *     holds the frame size needed.  Calling with buf NULL and cap 0 is the
 *     way to ask for the size (and then emdb_last_error() is left alone:
 *     servers ask once per reply).
 *   EMDB_ERR_INVALID: m cannot be encoded (a NULL array with a nonzero
 *     count, a name too long, counts that contradict each other, a body over
 *     4 GiB); *len is 0 and emdb_last_error() says why.
 *   Encoders never produce a frame that the matching decoder refuses.
 *   They write header version proto_op_version(opcode): the version that
 *   defined the opcode's layout, so a frame is the same bytes on every
 *   connection that may carry it (see Versions below).
 *   buf needs no particular alignment except for the *_resp_begin
 *   functions, which hand out float pointers into it (8-aligned buf).
 *
 *   Requests that carry big arrays (PREFETCH, PULL, PUSH, PUSH_UPDATE,
 *   LOOKUP, READ_STATE) also have a scatter-gather encoder, proto_X_req_iov, that
 *   fills a proto_iov with the header and fixed part plus references to the
 *   caller's arrays, for writev() without copying ids or gradients.
 *   Responses that carry vectors (PULL, LOOKUP, READ_STATE) have a
 *   proto_X_resp_begin that writes everything but the floats and returns
 *   where the engine should write them, straight into the output buffer.
 *
 * Decoders
 *     int proto_X_decode(const proto_hdr *h, const uint8_t *body, proto_X *m);
 *
 *   h comes from proto_hdr_decode (or a proto_frame) and body points at its
 *   h->body_len bytes, 8-aligned.  The decoder checks every count and length
 *   against body_len with overflow-safe arithmetic before it touches an
 *   array, checks that padding and reserved fields are zero and that no
 *   bytes trail.  Pointers it stores in *m (arrays, proto_str) point into
 *   body and stay valid as long as body does; nothing is allocated.
 *   EMDB_OK: *m is filled.
 *   EMDB_ERR_PROTOCOL: the body is malformed; emdb_last_error() names the
 *     message, field, offset and sizes.  *m is unspecified.
 *   EMDB_ERR_INVALID: a caller bug, not the peer's: h is for another opcode
 *     or direction, a response decoder got an error frame (status < 0:
 *     use proto_err_decode), or body is not 8-aligned.
 *   Decoders check the layout only.  Meaning (a known optimizer kind, a dim
 *   that matches the table, offsets that never decrease) is the engine's to
 *   check, and the server answers such a request with the engine's error
 *   while the connection stays open.  A decoding failure, by contrast, means
 *   the peer does not speak the protocol: answer with the error, then close.
 *
 *   Strings (proto_str) are (pointer, length), not NUL-terminated, except
 *   table names, which are copied into char[EMDB_NAME_MAX] and are.
 *
 * Versions
 *   This build speaks versions PROTO_VERSION_MIN..PROTO_VERSION_MAX.  HELLO
 *   fixes a connection's version: the highest both peers speak.  Each
 *   opcode's layout belongs to the version that defined it
 *   (proto_op_version), and every frame carries that version in its
 *   header, whatever the connection's: version 2 added PUSH_UPDATE and
 *   TABLE_RESERVE and nothing else, so on a version-2 connection a PING
 *   still says 1; version 3 added PULL_WEIGHTED, PUSH_WEIGHTED,
 *   TABLE_ALTER, TABLE_SCAN and TABLE_LOAD; version 4 added WORKER;
 *   version 5 added LINKTEST.  A receiver refuses a frame whose version is not its
 *   opcode's (proto_hdr_decode) or is above the connection's
 *   (proto_reader's pin, the server's check): to a version-1 peer a
 *   PUSH_UPDATE or a TABLE_RESERVE does not exist.
 *
 * Threads
 *   Every function is reentrant; none keeps global state.  A proto_reader
 *   belongs to one thread at a time.  Errors are reported like the engine's:
 *   a negative emdb_err plus a thread-local emdb_last_error() message.
 */
#ifndef EMDB_PROTO_H
#define EMDB_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <emdb/checkpoint.h>
#include <emdb/db.h>
#include <emdb/error.h>

/* ------------------------------------------------------------------ */
/* Constants                                                           */
/* ------------------------------------------------------------------ */

#define PROTO_MAGIC 0x42444D45u   /* the bytes "EMDB" read as a LE u32 */
#define PROTO_VERSION_MIN 1       /* oldest version this build speaks  */
#define PROTO_VERSION_MAX 5       /* newest version this build speaks  */
#define PROTO_HDR_SIZE 24
#define PROTO_ALIGN 8             /* body lengths and array offsets    */

#define PROTO_FLAG_RESPONSE 0x01  /* header flags: the only defined bit */

/* Suggested body limit before AUTH succeeds (proto_reader_set_max_body):
 * HELLO and AUTH fit easily, nothing big gets buffered for a stranger. */
#define PROTO_PREAUTH_BODY_MAX 4096u

#define PROTO_NAME_MAX 255        /* client/server names, INFO sections,
				     config keys and patterns (bytes)  */
#define PROTO_TOKEN_MAX 1024      /* AUTH token (bytes)                */
#define PROTO_ERRMSG_MAX 1024     /* proto_err_encode truncates here   */
#define PROTO_TABLE_NAME_MAX (EMDB_NAME_MAX - 1) /* 63 bytes, no NUL   */

/* HELLO response flags */
#define PROTO_HELLO_AUTH_REQUIRED 0x0001 /* send AUTH before anything else */

/* LOOKUP request and response flags */
#define PROTO_LOOKUP_FOUND 0x0001 /* request: send found[]; response: found[] follows */

/* Opcode ranges (docs/protocol.md, "Opcodes").  Reserved ranges belong to
 * later issues; no opcode in them is valid yet. */
#define PROTO_OP_RANGE_CONN 0x0000    /* connection and server          */
#define PROTO_OP_RANGE_TABLE 0x0100   /* tables and statistics          */
#define PROTO_OP_RANGE_DATA 0x0200    /* data plane                     */
#define PROTO_OP_RANGE_PERSIST 0x0300 /* checkpoints, restore and their jobs */
#define PROTO_OP_RANGE_HOTSET 0x0400  /* reserved: hot-set report, RESHARD, EXPIRE */
#define PROTO_OP_RANGE_CLUSTER 0x0500 /* cluster view, membership, the link between nodes */
#define PROTO_OP_RANGE_NODE 0x0600    /* reserved: node-to-node row exchange */
#define PROTO_OP_RANGE_PRIVATE 0xF000 /* 0xF000..0xFFFF: never assigned by emdb */

/* ------------------------------------------------------------------ */
/* Roles and opcodes                                                   */
/* ------------------------------------------------------------------ */

/* A connection's role, granted by AUTH.  Roles nest: each one may do all
 * that the roles below it may. */
typedef enum proto_role {
	PROTO_ROLE_NONE = 0,    /* not authenticated: HELLO and AUTH only    */
	PROTO_ROLE_READER = 1,  /* inference: LOOKUP, stats, info            */
	PROTO_ROLE_TRAINER = 2, /* training: the data plane, CONFIG_GET      */
	PROTO_ROLE_ADMIN = 3,   /* everything                                */
} proto_role;

/* The one table of opcodes.  Every layer that depends on an opcode
 * expands this table instead of keeping its own switch:
 *   X(NAME, name, value, version, least role allowed, request, response)
 * NAME gives PROTO_OP_NAME and the name on the wire's documentation;
 * `name` names the opcode's codec (proto_<name>_req_encode, ...,
 * proto_<name>_resp_decode, the proto_msg members <name>_req and
 * <name>_resp) and the server's handler (handle_<name>, net/handle_int.h);
 * `version` is the protocol version that defined its layout
 * (proto_op_version); request and response are BODY (a codec of its own)
 * or EMPTY (proto_empty_encode / proto_empty_decode).
 * Adding an opcode: a row here, its codec, its handler; the client's
 * calls have their own table (client/client_int.h, CL_OP_MAP). */
#define PROTO_OP_MAP(X)                                                                   \
	X(HELLO, hello, 0x0001, 1, PROTO_ROLE_NONE, BODY, BODY)                           \
	X(AUTH, auth, 0x0002, 1, PROTO_ROLE_NONE, BODY, BODY)                             \
	X(PING, ping, 0x0003, 1, PROTO_ROLE_READER, BODY, BODY)                           \
	X(INFO, info, 0x0004, 1, PROTO_ROLE_READER, BODY, BODY)                           \
	X(CONFIG_GET, config_get, 0x0005, 1, PROTO_ROLE_TRAINER, BODY, BODY)              \
	X(CONFIG_SET, config_set, 0x0006, 1, PROTO_ROLE_ADMIN, BODY, EMPTY)               \
	X(SHUTDOWN, shutdown, 0x0007, 1, PROTO_ROLE_ADMIN, EMPTY, EMPTY)                  \
	X(WORKER, worker, 0x0008, 4, PROTO_ROLE_TRAINER, BODY, EMPTY)                     \
	X(TABLE_CREATE, table_create, 0x0100, 1, PROTO_ROLE_ADMIN, BODY, BODY)            \
	X(TABLE_DROP, table_drop, 0x0101, 1, PROTO_ROLE_ADMIN, BODY, EMPTY)               \
	X(TABLE_DESCRIBE, table_describe, 0x0102, 1, PROTO_ROLE_READER, BODY, BODY)       \
	X(TABLE_LIST, table_list, 0x0103, 1, PROTO_ROLE_READER, EMPTY, BODY)              \
	X(STATS, stats, 0x0104, 1, PROTO_ROLE_READER, EMPTY, BODY)                        \
	X(TABLE_RESERVE, table_reserve, 0x0105, 2, PROTO_ROLE_ADMIN, BODY, EMPTY)         \
	X(TABLE_ALTER, table_alter, 0x0106, 3, PROTO_ROLE_TRAINER, BODY, EMPTY)           \
	X(TABLE_SCAN, table_scan, 0x0107, 3, PROTO_ROLE_TRAINER, BODY, BODY)              \
	X(TABLE_LOAD, table_load, 0x0108, 3, PROTO_ROLE_TRAINER, BODY, EMPTY)             \
	X(PREFETCH, prefetch, 0x0200, 1, PROTO_ROLE_TRAINER, BODY, BODY)                  \
	X(TICKET_FREE, ticket_free, 0x0201, 1, PROTO_ROLE_TRAINER, BODY, EMPTY)           \
	X(PULL, pull, 0x0202, 1, PROTO_ROLE_TRAINER, BODY, BODY)                          \
	X(PUSH, push, 0x0203, 1, PROTO_ROLE_TRAINER, BODY, EMPTY)                         \
	X(UPDATE, update, 0x0204, 1, PROTO_ROLE_TRAINER, BODY, BODY)                      \
	X(LOOKUP, lookup, 0x0205, 1, PROTO_ROLE_READER, BODY, BODY)                       \
	X(READ_STATE, read_state, 0x0206, 1, PROTO_ROLE_TRAINER, BODY, BODY)              \
	X(PUSH_UPDATE, push_update, 0x0207, 2, PROTO_ROLE_TRAINER, BODY, BODY)            \
	X(PULL_WEIGHTED, pull_weighted, 0x0208, 3, PROTO_ROLE_TRAINER, BODY, BODY)        \
	X(PUSH_WEIGHTED, push_weighted, 0x0209, 3, PROTO_ROLE_TRAINER, BODY, EMPTY)       \
	X(CHECKPOINT, checkpoint, 0x0300, 1, PROTO_ROLE_ADMIN, BODY, BODY)                \
	X(RESTORE, restore, 0x0301, 1, PROTO_ROLE_ADMIN, BODY, BODY)                      \
	X(JOB_STATUS, job_status, 0x0302, 1, PROTO_ROLE_READER, BODY, BODY)               \
	X(CHECKPOINT_LIST, checkpoint_list, 0x0303, 1, PROTO_ROLE_READER, EMPTY, BODY)    \
	X(CHECKPOINT_DELETE, checkpoint_delete, 0x0304, 1, PROTO_ROLE_ADMIN, BODY, EMPTY)   \
	X(LINKTEST, linktest, 0x0500, 5, PROTO_ROLE_ADMIN, BODY, BODY)

typedef enum proto_op {
	/* Only in a response with status < 0 and an error body: the peer
	 * could not tell which request a malformed frame was (bad magic,
	 * unknown opcode, ...).  The connection is closed after it. */
	PROTO_OP_NONE = 0x0000,
#define PROTO_OP_ENUM_(NAME, name, value, ver, role, req, resp) PROTO_OP_##NAME = (value),
	PROTO_OP_MAP(PROTO_OP_ENUM_)
#undef PROTO_OP_ENUM_
} proto_op;

/* True for the opcodes of PROTO_OP_MAP (not PROTO_OP_NONE). */
bool proto_op_known(uint16_t op);
/* True for the opcodes a connection of `version` has: known, and defined
 * by that version or an earlier one (proto_op_version); version 0 means
 * any this build speaks. */
bool proto_op_known_at(uint16_t op, uint8_t version);
/* "PULL", ...; "NONE" for 0; "UNKNOWN" for anything else.  Static. */
const char *proto_op_name(uint16_t op);
/* May a connection of `role` send request `op`?  False for unknown
 * opcodes and PROTO_OP_NONE. */
bool proto_op_allowed(proto_role role, uint16_t op);
/* "none", "reader", "trainer", "admin"; "unknown" otherwise. */
const char *proto_role_name(proto_role role);
/* The protocol version that defined op's layout, which every frame of op
 * (request, response, error response) carries in its header: the
 * version column of PROTO_OP_MAP (2 for PUSH_UPDATE and TABLE_RESERVE, 3
 * for PULL_WEIGHTED and PUSH_WEIGHTED), and 1 for HELLO, NONE and unknown
 * opcodes.  A connection of version v may carry op
 * only when proto_op_version(op) <= v. */
uint8_t proto_op_version(uint16_t op);

/* ------------------------------------------------------------------ */
/* Header                                                              */
/* ------------------------------------------------------------------ */

typedef struct proto_hdr {
	uint8_t version;   /* proto_op_version(opcode)                      */
	uint8_t flags;     /* PROTO_FLAG_RESPONSE or 0                      */
	uint16_t opcode;   /* proto_op                                      */
	int32_t status;    /* 0 in requests; EMDB_OK or an emdb_err in responses */
	uint64_t id;       /* chosen by the client, echoed in the response  */
	uint32_t body_len; /* bytes after the header, a multiple of 8       */
} proto_hdr;

static inline bool proto_hdr_is_response(const proto_hdr *h)
{
	return (h->flags & PROTO_FLAG_RESPONSE) != 0;
}

/* Write h as 24 bytes, verbatim (no checks). */
void proto_hdr_encode(uint8_t out[PROTO_HDR_SIZE], const proto_hdr *h);

/* Parse and check the header at p[0..len).
 * Returns
 *   EMDB_OK                *h holds the header; the frame is
 *                          PROTO_HDR_SIZE + h->body_len bytes long.
 *   > 0                    len < 24: that many more bytes are needed.
 *   EMDB_ERR_PROTOCOL      bad magic, nonzero reserved flag bits, opcode
 *                          unknown (or NONE in a request or with status 0),
 *                          a version other than proto_op_version(opcode),
 *                          nonzero status in a request, positive status
 *                          in a response, body_len not a multiple of 8;
 *   EMDB_ERR_UNSUPPORTED   a version outside PROTO_VERSION_MIN..MAX;
 *   EMDB_ERR_LIMIT         body_len > max_body.
 * On an error, *h still holds the raw fields when the magic was right (so a
 * server can echo the id), and is zeroed otherwise.  Never reads past
 * p[len-1] or past p[23].  Whether the version suits the connection
 * (not above the one HELLO chose) is the caller's to check. */
int proto_hdr_decode(const uint8_t *p, size_t len, proto_hdr *h, uint32_t max_body);

/* ------------------------------------------------------------------ */
/* Bodies shared by many opcodes                                       */
/* ------------------------------------------------------------------ */

typedef struct proto_str {
	const char *p; /* not NUL-terminated; NULL allowed when len is 0 */
	uint32_t len;
} proto_str;

static inline proto_str proto_cstr(const char *s)
{
	proto_str r = { s, 0 };
	while (s && s[r.len])
		r.len++;
	return r;
}

/* Error response (any opcode, or PROTO_OP_NONE; status < 0).  The message
 * is emdb_last_error() on the server, truncated to PROTO_ERRMSG_MAX bytes.
 * proto_err_encode: status must be negative, msg may be NULL.
 * proto_err_decode: h must be a response with status < 0. */
int proto_err_encode(uint8_t *buf, size_t cap, uint64_t id, uint16_t op, int status,
		     const char *msg, size_t *len);
int proto_err_decode(const proto_hdr *h, const uint8_t *body, proto_str *msg);

/* Empty bodies: requests SHUTDOWN, TABLE_LIST, STATS, CHECKPOINT_LIST;
 * responses (status 0) CONFIG_SET, SHUTDOWN, TABLE_DROP, TABLE_RESERVE,
 * TABLE_ALTER, TABLE_LOAD,
 * TICKET_FREE, PUSH, PUSH_WEIGHTED, CHECKPOINT_DELETE.  The decoder checks
 * that the opcode has an empty body in that direction and body_len is 0. */
int proto_empty_encode(uint8_t *buf, size_t cap, uint64_t id, uint16_t op, bool response,
		       size_t *len);
int proto_empty_decode(const proto_hdr *h);

/* ------------------------------------------------------------------ */
/* Connection and server                                               */
/* ------------------------------------------------------------------ */

/* HELLO: the first frame of a connection, in both directions always with
 * header version 1.  The server answers with the highest version both
 * speak (no later frame may carry a higher one) or with UNSUPPORTED and
 * closes.
 * Decoder: 1 <= ver_min <= ver_max, name.len <= PROTO_NAME_MAX. */
typedef struct proto_hello_req {
	uint16_t ver_min, ver_max; /* versions the client speaks            */
	proto_str name;            /* client name for the server's log      */
} proto_hello_req;

typedef struct proto_hello_resp {
	uint16_t version;   /* chosen, >= 1                                   */
	uint16_t flags;     /* PROTO_HELLO_AUTH_REQUIRED                      */
	uint32_t max_body;  /* the server's body limit once authenticated     */
	uint32_t max_batch; /* the most IDs one request may carry             */
	proto_str server;   /* "emdb 0.1.0", <= PROTO_NAME_MAX bytes          */
} proto_hello_resp;

int proto_hello_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_hello_req *m,
			   size_t *len);
int proto_hello_req_decode(const proto_hdr *h, const uint8_t *body, proto_hello_req *m);
int proto_hello_resp_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_hello_resp *m,
			    size_t *len);
int proto_hello_resp_decode(const proto_hdr *h, const uint8_t *body, proto_hello_resp *m);

/* AUTH: a token (<= PROTO_TOKEN_MAX bytes, may be empty) -> the role it
 * grants.  Decoder: role is READER, TRAINER or ADMIN. */
typedef struct proto_auth_req {
	proto_str token;
} proto_auth_req;

typedef struct proto_auth_resp {
	proto_role role;
} proto_auth_resp;

int proto_auth_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_auth_req *m,
			  size_t *len);
int proto_auth_req_decode(const proto_hdr *h, const uint8_t *body, proto_auth_req *m);
int proto_auth_resp_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_auth_resp *m,
			   size_t *len);
int proto_auth_resp_decode(const proto_hdr *h, const uint8_t *body, proto_auth_resp *m);

/* PING: the response echoes the request's bytes. */
typedef struct proto_ping {
	proto_str data;
} proto_ping;
typedef proto_ping proto_ping_req;
typedef proto_ping proto_ping_resp;

int proto_ping_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_ping *m,
			  size_t *len);
int proto_ping_req_decode(const proto_hdr *h, const uint8_t *body, proto_ping *m);
int proto_ping_resp_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_ping *m,
			   size_t *len);
int proto_ping_resp_decode(const proto_hdr *h, const uint8_t *body, proto_ping *m);

/* WORKER (version 4): the connection's pushes are those of worker `rank`
 * of a data-parallel trainer (emdb_push_as), or of none with
 * EMDB_WORKER_NONE.  Decoder: rank < EMDB_WORKERS_MAX or
 * EMDB_WORKER_NONE, reserved word zero. */
typedef struct proto_worker_req {
	uint32_t rank;
} proto_worker_req;

int proto_worker_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_worker_req *m,
			    size_t *len);
int proto_worker_req_decode(const proto_hdr *h, const uint8_t *body, proto_worker_req *m);

/* INFO: section name ("" = default, "all", or one section) -> text of
 * "# Section" headings and "key: value" lines, '\n'-terminated. */
typedef struct proto_info_req {
	proto_str section; /* <= PROTO_NAME_MAX bytes */
} proto_info_req;

typedef struct proto_info_resp {
	proto_str text;
} proto_info_resp;

int proto_info_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_info_req *m,
			  size_t *len);
int proto_info_req_decode(const proto_hdr *h, const uint8_t *body, proto_info_req *m);
int proto_info_resp_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_info_resp *m,
			   size_t *len);
int proto_info_resp_decode(const proto_hdr *h, const uint8_t *body, proto_info_resp *m);

/* CONFIG_GET: a key or glob pattern ("*" = all) -> key/value pairs. */
typedef struct proto_config_get_req {
	proto_str pattern; /* <= PROTO_NAME_MAX bytes */
} proto_config_get_req;

typedef struct proto_kv {
	proto_str key; /* <= PROTO_NAME_MAX bytes */
	proto_str val;
} proto_kv;

/* A list of key/value pairs, the body of a CONFIG_GET response and of a
 * CONFIG_SET request.  Encoding reads kv[0..n) or, when kv is NULL, copies
 * raw (so a decoded message re-encodes).  Decoding sets n, raw and raw_len
 * (the validated entries) and kv = NULL; walk the pairs with
 * proto_kv_list_next. */
typedef struct proto_kv_list {
	uint32_t n;
	const proto_kv *kv;
	const uint8_t *raw;
	size_t raw_len;
} proto_kv_list;

/* Iterate the pairs: start with *pos = 0; returns true and fills *kv
 * while pairs remain.  On a decoded message the pointers point into the
 * body; on one built for encoding (kv set) it walks kv[0..n). */
bool proto_kv_list_next(const proto_kv_list *m, size_t *pos, proto_kv *kv);

typedef proto_kv_list proto_config_get_resp;

int proto_config_get_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_config_get_req *m, size_t *len);
int proto_config_get_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_config_get_req *m);
int proto_config_get_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_config_get_resp *m, size_t *len);
int proto_config_get_resp_decode(const proto_hdr *h, const uint8_t *body,
				 proto_config_get_resp *m);

/* CONFIG_SET: one or more key (<= PROTO_NAME_MAX bytes) = value pairs,
 * at most PROTO_CONFIG_SET_MAX, which the server applies together or not
 * at all (a proto_kv_list).  Empty response. */
#define PROTO_CONFIG_SET_MAX 64u
typedef proto_kv_list proto_config_set_req;

int proto_config_set_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_config_set_req *m, size_t *len);
int proto_config_set_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_config_set_req *m);

/* ------------------------------------------------------------------ */
/* Tables and statistics                                               */
/* ------------------------------------------------------------------ */

/* TABLE_CREATE: the full table configuration -> the new table's id.
 * The decoder sets cfg.size = sizeof(emdb_table_config) and copies the
 * name (1..63 bytes, no NUL) into cfg.name; enum fields are copied as
 * sent and left for emdb_table_create to judge. */
typedef struct proto_table_create_req {
	emdb_table_config cfg;
} proto_table_create_req;

typedef struct proto_table_create_resp {
	uint32_t table;
} proto_table_create_resp;

int proto_table_create_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				  const proto_table_create_req *m, size_t *len);
int proto_table_create_req_decode(const proto_hdr *h, const uint8_t *body,
				  proto_table_create_req *m);
int proto_table_create_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				   const proto_table_create_resp *m, size_t *len);
int proto_table_create_resp_decode(const proto_hdr *h, const uint8_t *body,
				   proto_table_create_resp *m);

/* TABLE_DROP: table id.  Empty response. */
typedef struct proto_table_drop_req {
	uint32_t table;
} proto_table_drop_req;

int proto_table_drop_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_table_drop_req *m, size_t *len);
int proto_table_drop_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_table_drop_req *m);

/* TABLE_RESERVE (version 2): table id, rows -> empty response.  Room for
 * `rows` rows in all (emdb_table_reserve); any u64 is well-formed, the
 * engine judges it.  Decoder: the 4 reserved bytes after the id are zero,
 * the body is exactly 16 bytes. */
typedef struct proto_table_reserve_req {
	uint32_t table;
	uint64_t rows;
} proto_table_reserve_req;

int proto_table_reserve_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				   const proto_table_reserve_req *m, size_t *len);
int proto_table_reserve_req_decode(const proto_hdr *h, const uint8_t *body,
				   proto_table_reserve_req *m);

/* TABLE_ALTER (version 3): table id, optimizer -> empty response
 * (emdb_table_alter).  The optimizer crosses as its kind (u32, 4
 * reserved bytes) and its nine hyperparameters as f64 in the config
 * block's order; values are carried as sent, the engine judges them. */
typedef struct proto_table_alter_req {
	uint32_t table;
	emdb_optimizer opt;
} proto_table_alter_req;

int proto_table_alter_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_table_alter_req *m, size_t *len);
int proto_table_alter_req_decode(const proto_hdr *h, const uint8_t *body,
				 proto_table_alter_req *m);

/* TABLE_SCAN (version 3): one page of emdb_table_scan: table, dim (the
 * table's), cursor, max_rows, flags (PROTO_SCAN_STATE: send each row's
 * optimizer state) -> the next cursor (0: the scan is over), the step the
 * page is consistent at, and n rows: ids[n], vecs[n*dim], and with state
 * state[n*per_row] (per_row 0 without).  The response's arrays lie in
 * place in the body, ids first (invariant 1 of proto_data.c). */
#define PROTO_SCAN_STATE 0x0001u
typedef struct proto_table_scan_req {
	uint32_t table;
	uint32_t dim;
	uint64_t cursor;
	uint32_t max_rows;
	uint32_t flags;
} proto_table_scan_req;

typedef struct proto_table_scan_resp {
	uint64_t next_cursor;
	uint64_t step;
	uint32_t n;
	uint32_t dim;
	uint32_t per_row;
	const uint64_t *ids;
	const float *vecs;   /* n * dim */
	const float *state;  /* n * per_row; NULL when per_row is 0 */
} proto_table_scan_resp;

int proto_table_scan_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_table_scan_req *m, size_t *len);
int proto_table_scan_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_table_scan_req *m);
int proto_table_scan_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_table_scan_resp *m, size_t *len);
int proto_table_scan_resp_decode(const proto_hdr *h, const uint8_t *body,
				 proto_table_scan_resp *m);

/* TABLE_LOAD (version 3): emdb_table_load: table, dim, n, per_row (0:
 * vectors only; else the table's state floats per row, which the server
 * checks), ids[n], vecs[n*dim], state[n*per_row] -> empty response. */
typedef struct proto_table_load_req {
	uint32_t table;
	uint32_t dim;
	uint32_t n;
	uint32_t per_row;
	const uint64_t *ids;
	const float *vecs;
	const float *state;
} proto_table_load_req;

int proto_table_load_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_table_load_req *m, size_t *len);
int proto_table_load_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_table_load_req *m);

/* TABLE_DESCRIBE: by id, or by name when table is 0 (a nonzero table with
 * a name is malformed) -> emdb_table_info. */
typedef struct proto_table_describe_req {
	uint32_t table;
	char name[EMDB_NAME_MAX]; /* NUL-terminated, "" when table != 0 */
} proto_table_describe_req;

typedef struct proto_table_describe_resp {
	emdb_table_info info; /* config.name as for TABLE_CREATE */
} proto_table_describe_resp;

int proto_table_describe_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				    const proto_table_describe_req *m, size_t *len);
int proto_table_describe_req_decode(const proto_hdr *h, const uint8_t *body,
				    proto_table_describe_req *m);
int proto_table_describe_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				     const proto_table_describe_resp *m, size_t *len);
int proto_table_describe_resp_decode(const proto_hdr *h, const uint8_t *body,
				     proto_table_describe_resp *m);

/* TABLE_LIST: (empty request) -> the live tables in creation order.
 * An entry has exactly its wire layout (72 bytes), so the decoder points
 * `entries` into the body; it has checked that every name is 0..63 bytes
 * without NUL followed by zeros, so entries[i].name is a C string.  The
 * encoder takes name from entries[i].name (NUL-terminated, <= 63 bytes),
 * computes name_len itself and zero-fills the rest. */
typedef struct proto_table_entry {
	uint32_t id;
	uint32_t name_len;
	char name[EMDB_NAME_MAX];
} proto_table_entry;

typedef struct proto_table_list_resp {
	uint32_t n;
	const proto_table_entry *entries;
} proto_table_list_resp;

int proto_table_list_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_table_list_resp *m, size_t *len);
int proto_table_list_resp_decode(const proto_hdr *h, const uint8_t *body,
				 proto_table_list_resp *m);

/* STATS: (empty request) -> emdb_db_stats. */
typedef struct proto_stats_resp {
	emdb_db_stats stats;
} proto_stats_resp;

int proto_stats_resp_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_stats_resp *m,
			    size_t *len);
int proto_stats_resp_decode(const proto_hdr *h, const uint8_t *body, proto_stats_resp *m);

/* ------------------------------------------------------------------ */
/* Data plane                                                          */
/* ------------------------------------------------------------------ */

/* Scatter-gather form of a request: iov[0..n) covers the whole frame, len
 * bytes.  The header and fixed part live in scratch, the arrays are the
 * caller's own memory, which must stay unchanged until the frame is sent.
 * iov points into the struct itself: do not copy or move a filled
 * proto_iov. */
#define PROTO_IOV_MAX 8
#define PROTO_IOV_SCRATCH 128
typedef struct proto_iov {
	struct iovec iov[PROTO_IOV_MAX];
	int n;
	size_t len;
	uint8_t scratch[PROTO_IOV_SCRATCH];
} proto_iov;

/* After writev() sent `sent` bytes of v, drop them from the front so that
 * the next writev(v->iov, v->n) sends the rest.  Returns the bytes left. */
size_t proto_iov_advance(proto_iov *v, size_t sent);

/* TABLE_LOAD's scatter-gather encoder (its body is above, with the
 * tables'): ids, vectors and state referenced where they lie. */
int proto_table_load_req_iov(proto_iov *v, uint64_t id, const proto_table_load_req *m);

/* Tickets cross the wire as opaque nonzero u64 handles owned by the
 * connection that sent the PREFETCH; 0 in PULL/PUSH means "IDs follow".
 * Closing the connection frees its tickets. */

/* PREFETCH: table, ids[n] -> ticket handle for its `count` IDs. */
typedef struct proto_prefetch_req {
	uint32_t table;
	uint32_t n;
	const uint64_t *ids;
} proto_prefetch_req;

typedef struct proto_prefetch_resp {
	uint64_t ticket;
	uint32_t count;
	uint32_t table;
} proto_prefetch_resp;

int proto_prefetch_req_encode(uint8_t *buf, size_t cap, uint64_t id,
			      const proto_prefetch_req *m, size_t *len);
int proto_prefetch_req_iov(proto_iov *v, uint64_t id, const proto_prefetch_req *m);
int proto_prefetch_req_decode(const proto_hdr *h, const uint8_t *body, proto_prefetch_req *m);
int proto_prefetch_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
			       const proto_prefetch_resp *m, size_t *len);
int proto_prefetch_resp_decode(const proto_hdr *h, const uint8_t *body,
			       proto_prefetch_resp *m);

/* TICKET_FREE: handle.  Empty response. */
typedef struct proto_ticket_free_req {
	uint64_t ticket;
} proto_ticket_free_req;

int proto_ticket_free_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_ticket_free_req *m, size_t *len);
int proto_ticket_free_req_decode(const proto_hdr *h, const uint8_t *body,
				 proto_ticket_free_req *m);

/* PULL: the rows of a ticket (n_ids 0) or of ids[n_ids] (ticket 0),
 * optionally pooled: n_bags > 0 sends offsets[n_bags + 1] and pool
 * (EMDB_POOL_SUM/MEAN, passed through for the engine to check); with
 * n_bags 0, pool must be 0 and offsets is NULL.
 * Response: n_rows * dim floats (n_rows = n_bags when pooled, else the
 * number of IDs).  vecs sits at body offset PROTO_PULL_RESP_VECS_OFF, so a
 * client may read the floats from the socket straight into its own array. */
typedef struct proto_pull_req {
	uint32_t table;
	uint32_t dim;
	uint64_t ticket;
	uint32_t n_ids;
	const uint64_t *ids;
	uint32_t n_bags;
	uint32_t pool;
	const uint64_t *offsets;
} proto_pull_req;

#define PROTO_PULL_RESP_VECS_OFF 8
typedef struct proto_pull_resp {
	uint32_t n_rows;
	uint32_t dim;
	const float *vecs; /* n_rows * dim */
} proto_pull_resp;

int proto_pull_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_pull_req *m,
			  size_t *len);
int proto_pull_req_iov(proto_iov *v, uint64_t id, const proto_pull_req *m);
int proto_pull_req_decode(const proto_hdr *h, const uint8_t *body, proto_pull_req *m);
int proto_pull_resp_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_pull_resp *m,
			   size_t *len);
/* Write the response frame except its floats into buf (8-aligned) and set
 * *vecs to where the n_rows * dim floats go (inside buf).  Same return
 * convention as the encoders; *vecs is set only on EMDB_OK. */
int proto_pull_resp_begin(uint8_t *buf, size_t cap, uint64_t id, uint32_t n_rows,
			  uint32_t dim, float **vecs, size_t *len);
int proto_pull_resp_decode(const proto_hdr *h, const uint8_t *body, proto_pull_resp *m);

/* PUSH: gradients for a ticket or ids, optionally per bag, as PULL.
 * grads holds n_rows * dim floats.  The decoder checks n_rows == n_bags
 * when pooled and n_rows == n_ids for plain IDs; with a ticket and no bags
 * only the server knows the ticket's count and MUST check n_rows against
 * it before calling the engine.  Empty response. */
typedef struct proto_push_req {
	uint32_t table;
	uint32_t dim;
	uint64_t ticket;
	uint32_t n_ids;
	const uint64_t *ids;
	uint32_t n_bags;
	uint32_t pool;
	const uint64_t *offsets;
	uint32_t n_rows;
	const float *grads;
} proto_push_req;

int proto_push_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_push_req *m,
			  size_t *len);
int proto_push_req_iov(proto_iov *v, uint64_t id, const proto_push_req *m);
int proto_push_req_decode(const proto_hdr *h, const uint8_t *body, proto_push_req *m);

/* PULL_WEIGHTED and PUSH_WEIGHTED (version 3): a pooled PULL or PUSH with
 * per-sample weights (emdb_pull_bags_weighted, emdb_push_bags_weighted):
 * the body of PULL or PUSH with n_bags >= 1 and n_weights floats after
 * the offsets, one per ID.  The decoder checks n_bags >= 1 and, for IDs,
 * n_weights == n_ids; with a ticket only the server knows its count and
 * MUST check n_weights against it.  A PULL_WEIGHTED response is PULL's
 * body; PUSH_WEIGHTED's is empty. */
typedef struct proto_pull_weighted_req {
	proto_pull_req pull;   /* n_bags >= 1 */
	uint32_t n_weights;
	const float *weights;
} proto_pull_weighted_req;
typedef proto_pull_resp proto_pull_weighted_resp;
typedef struct proto_push_weighted_req {
	proto_push_req push;   /* n_bags >= 1 */
	uint32_t n_weights;
	const float *weights;
} proto_push_weighted_req;

int proto_pull_weighted_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				   const proto_pull_weighted_req *m, size_t *len);
int proto_pull_weighted_req_iov(proto_iov *v, uint64_t id, const proto_pull_weighted_req *m);
int proto_pull_weighted_req_decode(const proto_hdr *h, const uint8_t *body,
				   proto_pull_weighted_req *m);
int proto_pull_weighted_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				    const proto_pull_weighted_resp *m, size_t *len);
int proto_pull_weighted_resp_begin(uint8_t *buf, size_t cap, uint64_t id, uint32_t n_rows,
				   uint32_t dim, float **vecs, size_t *len);
int proto_pull_weighted_resp_decode(const proto_hdr *h, const uint8_t *body,
				    proto_pull_weighted_resp *m);
int proto_push_weighted_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				   const proto_push_weighted_req *m, size_t *len);
int proto_push_weighted_req_iov(proto_iov *v, uint64_t id, const proto_push_weighted_req *m);
int proto_push_weighted_req_decode(const proto_hdr *h, const uint8_t *body,
				   proto_push_weighted_req *m);

/* UPDATE: table id, or 0 for every table -> rows updated.  workers 0 or
 * 1: applied at once; n >= 2: a synchronous step, applied once n UPDATEs
 * of the same table and n have arrived, all answered then (the server's
 * limit: PROTO_UPDATE_WORKERS_MAX).
 *
 * A step's UPDATE may carry its step number (version 4, 8 + 16 bytes):
 * seq (>= 1) and session, the sending worker's per-table step number and
 * its handle's random session, for a connection that declared its rank
 * (WORKER).  The server then counts a resend of the same seq once and
 * answers a resend of an applied step with that step's rows (docs/
 * protocol.md, "Step numbers").  seq 0 is not sent: the body is then 8
 * bytes.  Decoder: seq >= 1 and workers >= 2 when present. */
#define PROTO_UPDATE_WORKERS_MAX 65536u
typedef struct proto_update_req {
	uint32_t table;
	uint32_t workers;
	uint64_t seq;     /* 0: none (the 8-byte body) */
	uint64_t session; /* with seq only */
} proto_update_req;

typedef struct proto_update_resp {
	uint64_t rows;
} proto_update_resp;

int proto_update_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_update_req *m,
			    size_t *len);
int proto_update_req_decode(const proto_hdr *h, const uint8_t *body, proto_update_req *m);
int proto_update_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
			     const proto_update_resp *m, size_t *len);
int proto_update_resp_decode(const proto_hdr *h, const uint8_t *body, proto_update_resp *m);

/* PUSH_UPDATE: a PUSH and then an UPDATE of the same table as one request
 * (emdb_push_update): the step advances once.  The request is PUSH's body
 * without bags: the decoder refuses n_bags or pool other than 0, so n_rows
 * is n_ids, or with a ticket the ticket's count, which the server MUST
 * check as for PUSH.  The response is UPDATE's: the rows updated.  The
 * functions are PUSH's and UPDATE's own, for this opcode. */
typedef proto_push_req proto_push_update_req;
typedef proto_update_resp proto_push_update_resp;

int proto_push_update_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_push_update_req *m, size_t *len);
int proto_push_update_req_iov(proto_iov *v, uint64_t id, const proto_push_update_req *m);
int proto_push_update_req_decode(const proto_hdr *h, const uint8_t *body,
				 proto_push_update_req *m);
int proto_push_update_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				  const proto_push_update_resp *m, size_t *len);
int proto_push_update_resp_decode(const proto_hdr *h, const uint8_t *body,
				  proto_push_update_resp *m);

/* LOOKUP: table, dim, ids[n], want_found -> n * dim floats and, when asked
 * for, found[n] (1 where the ID is held).  The response carries found iff
 * found != NULL (encode) / is set non-NULL (decode). */
typedef struct proto_lookup_req {
	uint32_t table;
	uint32_t dim;
	uint32_t n;
	bool want_found;
	const uint64_t *ids;
} proto_lookup_req;

#define PROTO_LOOKUP_RESP_VECS_OFF 16
typedef struct proto_lookup_resp {
	uint32_t n;
	uint32_t dim;
	const float *vecs;    /* n * dim */
	const uint8_t *found; /* n bytes of 0/1, or NULL */
} proto_lookup_resp;

int proto_lookup_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_lookup_req *m,
			    size_t *len);
int proto_lookup_req_iov(proto_iov *v, uint64_t id, const proto_lookup_req *m);
int proto_lookup_req_decode(const proto_hdr *h, const uint8_t *body, proto_lookup_req *m);
int proto_lookup_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
			     const proto_lookup_resp *m, size_t *len);
/* As proto_pull_resp_begin; *found is set (inside buf) iff with_found. */
int proto_lookup_resp_begin(uint8_t *buf, size_t cap, uint64_t id, uint32_t n, uint32_t dim,
			    bool with_found, float **vecs, uint8_t **found, size_t *len);
int proto_lookup_resp_decode(const proto_hdr *h, const uint8_t *body, proto_lookup_resp *m);

/* READ_STATE: table, ids[n] -> the optimizer state of each ID
 * (per_row = emdb_optimizer_state_floats(kind, dim) floats, layout of
 * docs/engine.md) and found[n], always sent. */
typedef struct proto_read_state_req {
	uint32_t table;
	uint32_t n;
	const uint64_t *ids;
} proto_read_state_req;

#define PROTO_READ_STATE_RESP_STATE_OFF 8
typedef struct proto_read_state_resp {
	uint32_t n;
	uint32_t per_row;
	const float *state;   /* n * per_row */
	const uint8_t *found; /* n */
} proto_read_state_resp;

int proto_read_state_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_read_state_req *m, size_t *len);
int proto_read_state_req_iov(proto_iov *v, uint64_t id, const proto_read_state_req *m);
int proto_read_state_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_read_state_req *m);
int proto_read_state_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_read_state_resp *m, size_t *len);
int proto_read_state_resp_begin(uint8_t *buf, size_t cap, uint64_t id, uint32_t n,
				uint32_t per_row, float **state, uint8_t **found, size_t *len);
int proto_read_state_resp_decode(const proto_hdr *h, const uint8_t *body,
				 proto_read_state_resp *m);

/* ------------------------------------------------------------------ */
/* Persistence: checkpoints, restore, jobs                             */
/* ------------------------------------------------------------------ */

/* A checkpoint or a restore runs on the server as a numbered job (from 1);
 * CHECKPOINT and RESTORE answer with its number at once and JOB_STATUS
 * follows it.  JOB_STATUS kind and state carry these values (the same as
 * emdb_job_kind and emdb_job_state of emdb/client.h). */
enum {
	PROTO_JOB_NONE = 0,
	PROTO_JOB_CHECKPOINT_FULL = 1,        /* EMDB_CKPT_FULL        */
	PROTO_JOB_CHECKPOINT_INCREMENTAL = 2, /* EMDB_CKPT_INCREMENTAL */
	PROTO_JOB_RESTORE = 3,
};
enum {
	PROTO_JOB_IDLE = 0, /* job 0 asked and no job ever ran */
	PROTO_JOB_RUNNING = 1,
	PROTO_JOB_DONE = 2,
	PROTO_JOB_FAILED = 3,
};

/* A checkpoint's description (emdb_ckpt_info of emdb/checkpoint.h)
 * crosses the wire as an 80-byte record with the struct's own layout,
 * field by field.  Values are carried as sent: kind is not judged. */
#define PROTO_CKPT_INFO_SIZE 80

/* CHECKPOINT: kind (EMDB_CKPT_FULL or EMDB_CKPT_INCREMENTAL, judged by
 * the server) -> the job's number. */
typedef struct proto_checkpoint_req {
	uint32_t kind;
} proto_checkpoint_req;

typedef struct proto_checkpoint_resp {
	uint64_t job;
} proto_checkpoint_resp;

int proto_checkpoint_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_checkpoint_req *m, size_t *len);
int proto_checkpoint_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_checkpoint_req *m);
int proto_checkpoint_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_checkpoint_resp *m, size_t *len);
int proto_checkpoint_resp_decode(const proto_hdr *h, const uint8_t *body,
				 proto_checkpoint_resp *m);

/* RESTORE: checkpoint id, 0 = the latest -> the job's number. */
typedef struct proto_restore_req {
	uint64_t ckpt;
} proto_restore_req;

typedef struct proto_restore_resp {
	uint64_t job;
} proto_restore_resp;

int proto_restore_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_restore_req *m,
			     size_t *len);
int proto_restore_req_decode(const proto_hdr *h, const uint8_t *body, proto_restore_req *m);
int proto_restore_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
			      const proto_restore_resp *m, size_t *len);
int proto_restore_resp_decode(const proto_hdr *h, const uint8_t *body, proto_restore_resp *m);

/* JOB_STATUS: job number, 0 = the newest -> its status.  kind, state,
 * progress.phase and the result's kind are carried as sent (u32); message
 * is at most PROTO_ERRMSG_MAX bytes, set when state is FAILED. */
typedef struct proto_job_status_req {
	uint64_t job;
} proto_job_status_req;

typedef struct proto_job_status_resp {
	uint64_t job;
	uint32_t kind;           /* PROTO_JOB_NONE .. PROTO_JOB_RESTORE */
	uint32_t state;          /* PROTO_JOB_IDLE .. PROTO_JOB_FAILED  */
	emdb_progress progress;
	emdb_ckpt_info result;   /* DONE: the checkpoint written or restored */
	int32_t error;           /* FAILED: the emdb_err                      */
	proto_str message;       /* FAILED: the reason                        */
} proto_job_status_resp;

int proto_job_status_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_job_status_req *m, size_t *len);
int proto_job_status_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_job_status_req *m);
int proto_job_status_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_job_status_resp *m, size_t *len);
int proto_job_status_resp_decode(const proto_hdr *h, const uint8_t *body,
				 proto_job_status_resp *m);

/* CHECKPOINT_LIST: (empty request) -> the complete checkpoints, oldest
 * first.  The decoder points ckpts into the body: the records have
 * emdb_ckpt_info's layout (checked at compile time), so they are used in
 * place like TABLE_LIST's entries. */
typedef struct proto_checkpoint_list_resp {
	uint32_t n;
	const emdb_ckpt_info *ckpts;
} proto_checkpoint_list_resp;

int proto_checkpoint_list_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				      const proto_checkpoint_list_resp *m, size_t *len);
int proto_checkpoint_list_resp_decode(const proto_hdr *h, const uint8_t *body,
				      proto_checkpoint_list_resp *m);

/* CHECKPOINT_DELETE: checkpoint id.  Empty response. */
typedef struct proto_checkpoint_delete_req {
	uint64_t ckpt;
} proto_checkpoint_delete_req;

int proto_checkpoint_delete_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				       const proto_checkpoint_delete_req *m, size_t *len);
int proto_checkpoint_delete_req_decode(const proto_hdr *h, const uint8_t *body,
				       proto_checkpoint_delete_req *m);

/* LINKTEST (version 5): the node-to-node path measured from the node
 * asked (docs/cluster.md "Linktest"): for duration_ms, rounds of n
 * messages, depth rounds in flight; each message goes to node `rank`
 * with request_bytes and asks for reply_bytes back (frame sizes as the
 * link counts them).  The records are used in place.  Decoder: n
 * records present, reserved words zero; the bounds (n, depth, duration,
 * sizes, ranks) are the server's to check (INVALID, the connection
 * stays open).  Response: what the test measured. */
typedef struct proto_linktest_msg {
	uint32_t rank;
	uint32_t reserved;       /* 0 */
	uint64_t request_bytes;
	uint64_t reply_bytes;
} proto_linktest_msg;

#define PROTO_LINKTEST_MSG_SIZE 24

typedef struct proto_linktest_req {
	uint32_t duration_ms;
	uint32_t depth;
	uint32_t n;
	const proto_linktest_msg *msgs; /* [n] */
} proto_linktest_req;

typedef struct proto_linktest_resp {
	uint64_t rounds;
	uint64_t elapsed_ns;     /* first send to last reply */
	uint64_t bytes_sent;     /* of the rounds counted, link headers included */
	uint64_t bytes_received;
} proto_linktest_resp;

int proto_linktest_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_linktest_req *m, size_t *len);
int proto_linktest_req_decode(const proto_hdr *h, const uint8_t *body, proto_linktest_req *m);
int proto_linktest_resp_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_linktest_resp *m, size_t *len);
int proto_linktest_resp_decode(const proto_hdr *h, const uint8_t *body, proto_linktest_resp *m);

/* ------------------------------------------------------------------ */
/* Any message                                                         */
/* ------------------------------------------------------------------ */

/* One member per (opcode, direction) with a body, named after them
 * (ping_req, table_describe_resp, ...: PROTO_OP_MAP's BODY columns); err
 * for status < 0.  Empty bodies use no member. */
typedef union proto_msg {
	proto_str err;
#define PROTO_MSG_MEMBER_BODY(name, dir) proto_##name##_##dir name##_##dir;
#define PROTO_MSG_MEMBER_EMPTY(name, dir)
#define PROTO_MSG_MEMBERS_(NAME, name, value, ver, role, rq, rs) \
	PROTO_MSG_MEMBER_##rq(name, req) PROTO_MSG_MEMBER_##rs(name, resp)
	PROTO_OP_MAP(PROTO_MSG_MEMBERS_)
#undef PROTO_MSG_MEMBERS_
#undef PROTO_MSG_MEMBER_EMPTY
#undef PROTO_MSG_MEMBER_BODY
} proto_msg;

/* Decode any body: the decoder of h's opcode and direction (error body
 * when status < 0, empty-body check where the body is empty). */
int proto_msg_decode(const proto_hdr *h, const uint8_t *body, proto_msg *m);
/* Encode any message: opcode, flags, status and id come from h (body_len
 * and version are ignored); m is read as proto_msg_decode fills it.
 * Decoding a frame and encoding the result gives back the same bytes. */
int proto_msg_encode(uint8_t *buf, size_t cap, const proto_hdr *h, const proto_msg *m,
		     size_t *len);

/* ------------------------------------------------------------------ */
/* Frame reader: the per-connection parser                             */
/* ------------------------------------------------------------------ */

/* A complete frame in one block that the caller owns: free it with
 * proto_frame_free.  body is 8-aligned and lives as long as the frame,
 * so frames can be handed to other threads and answered in any order. */
typedef struct proto_frame {
	proto_hdr hdr;
	uint8_t *body; /* hdr.body_len bytes */
} proto_frame;

void proto_frame_free(proto_frame *f); /* NULL is a no-op */

/* Turns a byte stream into frames.  Small frames are copied once out of a
 * staging buffer; the body of a frame larger than what has arrived is
 * received straight into its own block (proto_reader_space points there),
 * so a big payload is not copied after the socket wrote it.  A header is
 * checked (proto_hdr_decode against max_body, the direction, the pinned
 * version) before any memory is allocated for its body, and a body's block
 * is preallocated only up to 1 MiB and grows as bytes actually arrive.
 *
 * Use, per readable event:
 *     proto_reader_space(r, &p, &n);  n' = read(fd, p, n);
 *     proto_reader_commit(r, n');
 *     while ((rc = proto_reader_next(r, &f)) == 1) handle(f);
 *     if (rc < 0) { proto_reader_error(r, &id, &op, &msg); reply; close; }
 * or proto_reader_feed() for bytes already in memory.
 *
 * Errors are sticky: after one, every call returns it again.
 * Fields are private. */
typedef struct proto_reader {
	uint8_t *buf;      /* staging, emdb_malloc'd */
	size_t cap;
	size_t head, tail; /* unparsed bytes: buf[head .. tail) */
	proto_frame *cur;  /* frame whose body is still arriving */
	size_t cur_have;   /* its body bytes received */
	size_t cur_alloc;  /* its body bytes allocated */
	uint32_t max_body;
	uint8_t version;   /* highest header version accepted; 0 = any */
	bool responses;    /* expect responses (client) or requests (server) */
	int err;
	uint64_t err_id;
	uint16_t err_op;
	char errmsg[256];
} proto_reader;

/* responses: true on a client (every frame must be a response), false on a
 * server.  max_body: the body limit, e.g. PROTO_PREAUTH_BODY_MAX until
 * AUTH succeeds.  Errors: NOMEM.  On error nothing needs destroying. */
int proto_reader_init(proto_reader *r, bool responses, uint32_t max_body);
/* Free the staging buffer and any partial frame.  Frames already returned
 * by proto_reader_next are the caller's and stay valid. */
void proto_reader_destroy(proto_reader *r);
/* Takes effect from the next header parsed. */
void proto_reader_set_max_body(proto_reader *r, uint32_t max_body);
/* The connection's version from now on (after HELLO): a frame whose
 * header version is above it is refused (PROTOCOL, answered with id 0 and
 * PROTO_OP_NONE, as an opcode the connection does not know); 0 = any
 * version this build speaks.  Before HELLO a connection's version is 1. */
void proto_reader_set_version(proto_reader *r, uint8_t version);

/* Where to put the next bytes received, and how many at most.  Call
 * proto_reader_next until it returns 0 before asking for space; then n is
 * never 0.
 * Errors: the sticky error, NOMEM (the reader stays usable). */
int proto_reader_space(proto_reader *r, uint8_t **p, size_t *n);
/* n bytes (at most the space given) were written at the space given. */
void proto_reader_commit(proto_reader *r, size_t n);
/* Copy up to n bytes of data in; returns how many were taken (fewer when
 * frames must be taken out first with proto_reader_next), or a negative
 * error as proto_reader_space. */
long proto_reader_feed(proto_reader *r, const void *data, size_t n);

/* 1: *out is the next complete frame, now the caller's; 0: more bytes
 * needed; < 0: the stream is malformed (the proto_hdr_decode error, or
 * PROTOCOL for a frame of the wrong direction or above the pinned
 * version), or NOMEM for a body block.  Only the header is checked: decode
 * the body with the opcode's decoder. */
int proto_reader_next(proto_reader *r, proto_frame **out);

/* After proto_reader_next failed: the status, and the request id and
 * opcode to answer with (0 and PROTO_OP_NONE when the header could not be
 * trusted) and the message (the reader's copy; valid until destroy). */
int proto_reader_error(const proto_reader *r, uint64_t *id, uint16_t *op, const char **msg);

#endif
