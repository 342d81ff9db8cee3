/*
 * emdb/client.h - the emdb client library: every database operation, from
 * any thread, over TCP, a Unix socket, or straight into the engine.
 *
 * This header is the manual of libemdb_client.  A new user copies
 * docs/example_trainer.c first.
 *
 * Building
 *   #include <emdb/client.h>; link libemdb_client (pkg-config emdb-client:
 *   the shared library, or with --static libemdb_client.a, -lssl -lcrypto
 *   -lpthread; CMake: target emdb_client, or emdb::emdb_client once
 *   installed).  It carries tcp://, tls:// and unix:// and links no engine
 *   and no RocksDB.  mem:// runs the engine in this process and is a
 *   library of its own: link libemdb_client_mem too (CMake target
 *   emdb_client_mem; by hand libemdb_client_mem.a with
 *   -Wl,--undefined=cl_mem_backend_linked, then libemdb_checkpoint.a,
 *   libemdb.a, libemdb_base.a, RocksDB, xxhash, -lm).  Without it mem://
 *   and emdb_client_wrap fail with EMDB_ERR_UNSUPPORTED.  The library
 *   starts no thread until a handle is opened.
 *
 * Call order
 *   emdb_client_connect (or emdb_client_wrap) -> any calls, from any
 *   threads -> free every future and ticket -> emdb_client_close.
 *
 * Connecting
 *   emdb_client_connect() takes a URI:
 *
 *     tcp://HOST[:PORT][?QUERY]     HOST a name, IPv4 address or [IPv6];
 *                                   PORT defaults to 7878
 *     tls://HOST[:PORT][?QUERY]     the same over TLS, to a server with
 *                                   tls_cert_file (docs/server.md)
 *     unix:///ABSOLUTE/PATH[?QUERY] a Unix stream socket
 *     mem://[NAME][?QUERY]          the engine in this process, no server
 *
 *   QUERY is key=value pairs joined by '&', values percent-encoded:
 *     token=SECRET     the AUTH token (tcp, unix)
 *     timeout=MS       default request timeout, as options.timeout_ms
 *     name=TEXT        the client name sent in HELLO (tcp, unix)
 *     ca=PATH          tls: PEM file of the CAs to trust instead of the
 *                      system's store (a private CA, a self-signed server)
 *     cert=PATH, key=PATH  tls: a client certificate and its key, for a
 *                      server that requires one (its tls_ca_file)
 *   An unknown key is an error (EMDB_ERR_INVALID), so a typo is not ignored.
 *   A token or name in emdb_client_options wins over the URI's; a
 *   ?timeout= in the URI wins over options.timeout_ms.
 *
 *   A unix:// socket asks the kernel for an EMDB_CLIENT_UNIX_SNDBUF-byte
 *   send buffer (capped by net.core.wmem_max), so a 1 MiB Push crosses
 *   in one go; emdb-server does the same for its replies
 *   (unix_send_buffer, docs/server.md).  TCP sizes its own buffers.
 *
 *   On tls:// connect first completes a TLS handshake (TLS 1.2 or newer)
 *   and checks the server's certificate: signed by a trusted CA, valid
 *   now, and issued to HOST (its DNS name or IP address, as written in
 *   the URI).  A certificate that fails fails the connect with
 *   EMDB_ERR_AUTH and OpenSSL's reason; a peer that does not speak TLS,
 *   with EMDB_ERR_PROTOCOL.  From then on the handle works as over
 *   tcp://, every byte encrypted (Pull's vectors are decrypted into `out`
 *   directly, as over tcp:// they are received into it).
 *
 *   On tcp://, tls:// and unix:// connect performs the handshake: HELLO (protocol
 *   versions, client name), then AUTH with the token whenever a token is
 *   given or the server requires one.  The role the token grants (reader,
 *   trainer, admin; docs/protocol.md) limits what the handle may do; a
 *   call beyond it fails with EMDB_ERR_AUTH and the connection stays open.
 *
 *   mem:// opens an emdb_db (emdb/db.h) inside this process and calls it
 *   directly: the same API with no socket, no copy and no server, for a
 *   single-machine trainer or a test.  "mem://" alone gives a private
 *   database; "mem://NAME" shares one database between every handle of
 *   this process that names it, freed when the last such handle closes.
 *   A mem:// handle has the admin role; token and name are ignored.
 *   emdb_client_wrap() does the same over a database the caller opened.
 *
 * Calls
 *   Every operation has a synchronous form, emdb_client_X(), which returns
 *   when the operation is complete, and the data-plane operations also an
 *   asynchronous one, emdb_client_X_async(), which submits the request and
 *   returns an emdb_future at once; emdb_future_wait() or
 *   emdb_future_poll() then gives its result.  A trainer submits the
 *   Prefetch of batch i+1, computes batch i, then waits:
 *
 *     f = emdb_client_prefetch_async(c, t, ids_next, n, &tk_next);
 *     ... pull, compute and push batch i with tk ...
 *     rc = emdb_future_wait(f, -1); emdb_future_free(f);
 *
 *   Any number of requests may be in flight on one handle, from one thread
 *   or many: they are pipelined on the one connection and their responses
 *   matched by request id.  Requests in flight at the same time may be
 *   executed in any order; to make one operation see the effect of another
 *   (a Pull after a Push, an Update after the Pushes of a step), wait for
 *   the first before submitting the second.  A synchronous call returns
 *   only after its operation, so consecutive synchronous calls of one
 *   thread are executed in order.
 *
 * Buffers (the lifetime rule)
 *   A synchronous call uses the caller's arrays only during the call.
 *   An asynchronous call keeps the pointers it was given, to its inputs
 *   (ids, offsets, grads) and to its outputs (out, found, ticket, rows),
 *   until its future is complete (wait or poll returned something other
 *   than EMDB_FUTURE_PENDING) or freed: until then the inputs must stay valid
 *   and unchanged, and the outputs valid and untouched.  The outputs are
 *   written only while the request completes, and never after its future
 *   was freed or its request timed out.  Output contents are unspecified
 *   when the operation failed.
 *
 *   Vectors are packed row-major, n * dim floats, row i for ids[i], as in
 *   emdb/db.h.  Over a socket, Push sends ids and gradients from the
 *   caller's arrays without copying them, and Pull receives vectors from
 *   the socket straight into `out`.
 *
 * Threads
 *   Every function may be called from any number of threads at once on the
 *   same handle, except emdb_client_close (no other call on the handle may
 *   be in flight, and its futures and tickets must have been freed).  One
 *   future is waited on, polled and freed by one thread at a time; one
 *   ticket may be used by many threads at once, and is freed once, after
 *   the last request using it completed.  A tcp:// or unix:// handle runs
 *   one receiving thread for asynchronous calls; a synchronous call that
 *   finds no other thread reading the socket reads its own response (and
 *   any other response that arrives before it), which saves two thread
 *   hand-offs per call; a mem:// handle runs options.mem_threads worker
 *   threads for asynchronous calls (its synchronous calls run on the
 *   caller's thread).  emdb_client_close stops and joins them.
 *
 * Errors
 *   Functions return EMDB_OK (0) or a negative emdb_err of emdb/error.h.
 *   The codes the engine returns (NO_TABLE, DIM, BATCH, ...) arrive as
 *   they are: the wire status is the emdb_err value.  The client adds:
 *     EMDB_ERR_INVALID   a bad argument or URI, detected before sending;
 *     EMDB_ERR_CLOSED    the server went away (or the handle was broken
 *                        by an earlier I/O failure: see below);
 *     EMDB_ERR_TIMEOUT   no response within the request's timeout;
 *     EMDB_ERR_AUTH      bad token, or an operation beyond the role;
 *     EMDB_ERR_PROTOCOL  the peer does not speak the protocol;
 *     EMDB_ERR_UNSUPPORTED  no common protocol version, an operation
 *                        that has no meaning on this transport, or one
 *                        newer than the server (emdb_client_push_update
 *                        or emdb_client_table_reserve on a
 *                        protocol-version-1 server, the _weighted calls
 *                        on a server older than version 3): refused
 *                        before sending, the handle stays usable;
 *     EMDB_ERR_IO        a socket call failed (message has errno's text);
 *     EMDB_ERR_LIMIT     a request larger than the server accepts.
 *   With the code comes a message, the server's own when the server
 *   refused the request: emdb_client_last_error() returns it, per thread.
 *   A handle whose connection failed (the server closed it or died, a
 *   frame could not be sent or parsed, or a response stalled half-way for
 *   longer than the timeout) is broken for good: every request in flight
 *   and every later call fails with EMDB_ERR_CLOSED, promptly, never a
 *   hang.  Close it and connect again.  A request that failed with CLOSED
 *   or TIMEOUT may or may not have been executed by the server.
 *
 * Timeouts
 *   Each request has a deadline: submission time plus the handle's timeout
 *   (options.timeout_ms, default 30 s, 0 = none; emdb_client_set_timeout).
 *   When no response arrived by then the request completes with
 *   EMDB_ERR_TIMEOUT, its response is discarded when it comes, and the
 *   handle stays usable.  A response already arriving is received to the
 *   end; a frame that stops arriving half-way for a whole timeout breaks
 *   the handle.  Sending waits for socket space until the deadline too.
 *   mem:// calls do not time out once running.
 */
#ifndef EMDB_CLIENT_H
#define EMDB_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <emdb/checkpoint.h>
#include <emdb/db.h>
#include <emdb/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct emdb_client emdb_client;               /* one connection  */
typedef struct emdb_future emdb_future;               /* one async request */
typedef struct emdb_client_ticket emdb_client_ticket; /* a Prefetch's result */

#define EMDB_CLIENT_DEFAULT_PORT 7878

/* ------------------------------------------------------------------ */
/* Connecting                                                          */
/* ------------------------------------------------------------------ */

/* The role AUTH granted.  Roles nest: each may do all that the ones below
 * it may.  Values are those of the wire protocol. */
typedef enum emdb_role {
	EMDB_ROLE_NONE = 0,    /* not authenticated                        */
	EMDB_ROLE_READER = 1,  /* Lookup, describe, list, stats, info, ping */
	EMDB_ROLE_TRAINER = 2, /* the data plane, config get               */
	EMDB_ROLE_ADMIN = 3,   /* everything                               */
} emdb_role;

/* SO_SNDBUF of a unix:// connection, bytes. */
#define EMDB_CLIENT_UNIX_SNDBUF (4 << 20)

typedef struct emdb_client_options {
	uint32_t size;               /* sizeof(emdb_client_options): set by INIT */
	uint32_t timeout_ms;         /* request deadline; 0 = none; default 30000 */
	uint32_t connect_timeout_ms; /* connect + handshake; 0 = none; default 10000 */
	uint32_t mem_threads;        /* mem:// async workers, 0..64; 0 runs async
					calls at submission; default 2 */
	const char *token;           /* AUTH token, overrides ?token=; NULL = URI's */
	const char *client_name;     /* HELLO name; NULL = ?name= or "emdb-client" */
	const emdb_db_config *mem_config; /* database config of a mem:// handle
					     that opens its database; NULL =
					     defaults */
	/* tls:// only; each overrides the URI's ?ca=, ?cert=, ?key=. */
	const char *tls_ca_file;     /* PEM CAs to trust; NULL = URI's, else the
					system's default store */
	const char *tls_cert_file;   /* PEM client certificate (chain), for a
					server with tls_ca_file; NULL = URI's */
	const char *tls_key_file;    /* its PEM private key; NULL = URI's */
	/* Sockets: a synchronous call polls the socket for its response
	 * this long (0..10000 us) before it sleeps in the kernel,
	 * so an answer that comes within the window costs no wake-up (with
	 * a server that polls too, busy_poll_us in docs/server.md, a single
	 * Lookup over a Unix socket took 6 us at p50 against 46 us).  The
	 * price is the calling thread's CPU while it waits.  0 (default):
	 * sleep at once.  Asynchronous calls always sleep; mem:// ignores
	 * it. */
	uint32_t busy_poll_us;
	/* This handle's pushes are those of worker `worker_rank` (0 ..
	 * EMDB_WORKERS_MAX - 1) of a data-parallel trainer: the database
	 * sums the gradients of different workers of a step per row in rank
	 * order, whatever order their pushes arrive in (emdb_push_as in
	 * emdb/db.h; docs/cluster.md "Determinism").  Give each worker its
	 * own handle and a stable rank (torch.distributed's).  Default
	 * EMDB_WORKER_NONE: pushes summed in arrival order.  Over a socket
	 * the connection declares it right after the handshake (WORKER,
	 * protocol version 4); a server that speaks only an older version
	 * fails the connect with UNSUPPORTED. */
	uint32_t worker_rank;
} emdb_client_options;

#define EMDB_CLIENT_BUSY_POLL_MAX_US 10000u

#define EMDB_CLIENT_OPTIONS_INIT \
	{ sizeof(emdb_client_options), 30000, 10000, 2, NULL, NULL, NULL, NULL, NULL, NULL, 0, EMDB_WORKER_NONE }

/* Connect to the database at `uri` (see the top of this file) and, over a
 * socket, perform HELLO and AUTH.  opts may be NULL for the defaults;
 * nothing it points to is kept after the call.  On success *out owns the handle: close
 * it with emdb_client_close.  On failure *out is NULL.
 * Errors: INVALID (bad URI or option; the message says which part),
 * NOMEM, IO (name resolution, socket, connect refused: errno's text),
 * TIMEOUT (connect_timeout_ms passed), CLOSED (the server hung up during
 * the handshake), UNSUPPORTED (no common protocol version), AUTH (the
 * server refused the token, or requires one and none was given; tls://:
 * the server's certificate failed verification, or the server refused
 * ours), PROTOCOL (tls://: the peer does not speak TLS; a CA, certificate
 * or key file that cannot be loaded is INVALID), and for mem:// the errors
 * of emdb_db_open. */
int emdb_client_connect(const char *uri, const emdb_client_options *opts,
			emdb_client **out);

/* A mem:// handle over a database the caller opened and keeps owning: db
 * must outlive the handle, and emdb_client_close does not close it.  The
 * caller may keep calling the engine on db directly at the same time.
 * opts may be NULL; only size, timeout_ms, mem_threads and worker_rank
 * are read.
 * Errors: INVALID (db or out NULL, bad option), NOMEM. */
int emdb_client_wrap(emdb_db *db, const emdb_client_options *opts,
		     emdb_client **out);

/* Close the connection, stop the handle's threads and free it.  Call it
 * once, with no other call on the handle in flight and after freeing
 * every future and ticket of the handle (anything else is undefined
 * behaviour).  Works on a broken handle too.  NULL is a no-op. */
void emdb_client_close(emdb_client *c);

/* The role AUTH granted.  ADMIN for mem://, and over a socket to a server
 * configured without tokens (such a server serves only loopback and Unix
 * socket clients, all as admins, and ignores a token). */
emdb_role emdb_client_role(const emdb_client *c);

/* The server's name and version from HELLO ("emdb 0.1.0"), or
 * "emdb (in-process)" for mem://.  Valid until emdb_client_close. */
const char *emdb_client_server(const emdb_client *c);

/* The largest batch of IDs the server accepts in one request (HELLO, or
 * the database's max_batch for mem://); larger batches fail with BATCH. */
uint32_t emdb_client_max_batch(const emdb_client *c);

/* The wire protocol version HELLO settled on with the server: the highest
 * both speak (docs/protocol.md, "Versions"), 1 or 2 in this build; for
 * mem://, which has no wire, the newest this build speaks (2).  An
 * operation newer than the version (PUSH_UPDATE and TABLE_RESERVE need 2)
 * fails with UNSUPPORTED without being sent. */
int emdb_client_protocol_version(const emdb_client *c);

/* Set the timeout of requests submitted from now on (0 = none).  Requests
 * already in flight keep their deadline.  Thread-safe. */
void emdb_client_set_timeout(emdb_client *c, uint32_t timeout_ms);
/* The timeout requests submitted now get (0 = none): the URI's ?timeout=,
 * options.timeout_ms, or the last emdb_client_set_timeout.  Thread-safe. */
uint32_t emdb_client_timeout(const emdb_client *c);

/* The message of the last client call that failed on this thread, or ""
 * when none failed yet: for a failure found by the client it names the
 * function ("emdb_client_pull: ..."), for a request the server or the
 * engine refused it is their message ("dimension mismatch: table 'ads':
 * ..."), for a lost connection it says how.  The pointer stays valid
 * until the next client call on this thread; copy it to keep it.  (The
 * engine's own emdb_last_error() is separate and not set by the client.) */
const char *emdb_client_last_error(void);

/* ------------------------------------------------------------------ */
/* Server and connection                                               */
/* ------------------------------------------------------------------ */

/* Round trip to the server (mem://: returns at once).  Errors: CLOSED,
 * TIMEOUT, AUTH.  Role: reader. */
int emdb_client_ping(emdb_client *c);

/* The server's INFO text: "# Section" headings and "key: value" lines.
 * section: NULL or "" for the default sections, "all", or one section's
 * name (docs/protocol.md).  On success *text is a NUL-terminated string
 * that the caller frees with emdb_free() (emdb/alloc.h).
 * Errors: INVALID (text NULL, unknown section), NOMEM, CLOSED, TIMEOUT,
 * AUTH.  Role: reader. */
int emdb_client_info(emdb_client *c, const char *section, char **text);

/* One configuration setting. */
typedef struct emdb_client_kv {
	const char *key;   /* NUL-terminated */
	const char *value; /* NUL-terminated */
} emdb_client_kv;

/* The settings whose key matches `pattern` (a key, or a glob: "*" is all).
 * On success *kv is an array of *n pairs in one allocated block (the
 * strings included) that the caller frees with one emdb_free(*kv); with
 * no match *n is 0 and *kv a valid empty block, freed the same way.
 * mem:// knows the read-only keys of emdb_db_config (shards, chunk_bytes,
 * max_batch, max_tables).  Errors: INVALID, NOMEM, CLOSED, TIMEOUT, AUTH.
 * Role: trainer. */
int emdb_client_config_get(emdb_client *c, const char *pattern,
			   emdb_client_kv **kv, size_t *n);

/* Set one setting at run time (docs/server.md lists the keys and which
 * of them may change while the server runs; `emdb-server --help` too).
 * Errors: INVALID (unknown key, bad value), UNSUPPORTED (mem://), CLOSED,
 * TIMEOUT, AUTH.  Role: admin. */
int emdb_client_config_set(emdb_client *c, const char *key, const char *value);

/* Set n settings at once, keys[i] to values[i]: the server applies all of
 * them or, when one is refused, none, and the message names the one.
 * Settings that only make sense together need this: a new TLS
 * certificate and its key (docs/server.md, "TLS").  1 <= n <=
 * EMDB_CLIENT_CONFIG_SET_MAX; the arrays are read during the call only.
 * Errors: as emdb_client_config_set, and INVALID for n out of range or a
 * NULL key or value.  Role: admin. */
#define EMDB_CLIENT_CONFIG_SET_MAX 64u
int emdb_client_config_set_many(emdb_client *c, size_t n, const char *const *keys,
				const char *const *values);

/* Ask the server to exit.  EMDB_OK means the server accepted; it closes
 * the connection soon after, so later calls fail with CLOSED.
 * Errors: UNSUPPORTED (mem://), CLOSED, TIMEOUT, AUTH.  Role: admin. */
int emdb_client_shutdown(emdb_client *c);

/* ------------------------------------------------------------------ */
/* Tables and statistics                                               */
/* ------------------------------------------------------------------ */

/* As emdb_table_create, emdb_table_drop, emdb_table_find,
 * emdb_table_describe, emdb_table_list and emdb_db_get_stats of
 * emdb/db.h, with the same arguments, results and errors, plus the
 * transport errors above.  out arguments that emdb/db.h allows to be NULL
 * may be NULL here too.  Roles: create and drop admin, the others reader. */
int emdb_client_table_create(emdb_client *c, const emdb_table_config *cfg,
			     uint32_t *out_id);
int emdb_client_table_drop(emdb_client *c, uint32_t table);
int emdb_client_table_find(emdb_client *c, const char *name, uint32_t *out_id);
int emdb_client_table_describe(emdb_client *c, uint32_t table,
			       emdb_table_info *out);
int emdb_client_table_list(emdb_client *c, uint32_t *ids, size_t cap,
			   size_t *n_out);
int emdb_client_stats(emdb_client *c, emdb_db_stats *out);

/* Change a table's optimizer hyperparameters while it serves, for a
 * learning-rate schedule: emdb_table_alter of emdb/db.h.  opt is the
 * table's optimizer as emdb_client_table_describe gives it, with new
 * values for any of lr, eps, beta1, beta2, lr_decay, beta, l1, l2; kind
 * and initial_accumulator must stay as they are.  It takes effect at a
 * step boundary: an Update in progress finishes with the old values, the
 * next one uses the new; table describe shows them, and a checkpoint
 * keeps them.  Synchronous only.  Errors: NO_TABLE; INVALID (opt NULL,
 * another kind or initial_accumulator, a value the engine refuses at
 * creation, with its message; nothing changes); UNSUPPORTED over a socket
 * to a server older than protocol version 3 (refused before sending).
 * Role: trainer (a training script drives its own schedule). */
int emdb_client_table_alter(emdb_client *c, uint32_t table,
			    const emdb_optimizer *opt);

/* Scan and load: a table's rows out and in (emdb_table_scan and
 * emdb_table_load of emdb/db.h, whose rules hold: read them there).
 *
 * emdb_client_table_scan fetches one page: start with cursor 0, pass
 * *next_cursor back in, stop when it is 0.  Every row the table holds for
 * the whole scan comes back exactly once; each page is consistent at one
 * step (*step_out, may be NULL); a page may be short, even empty, before
 * the end.  The caller provides room for max_rows rows: ids[max_rows],
 * vecs[max_rows * dim] and, when per_row > 0, state[max_rows * per_row],
 * per_row being emdb_optimizer_state_floats(kind, dim) of the table (0:
 * no state; another width fails with DIM); *n_out gets the rows written.
 * Over a socket a page must fit the server's frame (max_rows * (8 + 4*dim
 * + 4*per_row) bytes, under max_frame): LIMIT otherwise, ask for fewer.
 *
 * emdb_client_table_load writes vecs[n * dim] to ids[n], inserting the
 * IDs the table lacks, and with per_row > 0 state[n * per_row] as their
 * optimizer state (per_row must then be the table's width; 0: vectors
 * only, new rows get the initial state, held rows keep theirs).
 *
 * Both are synchronous; the arrays are borrowed during the call.  Errors:
 * the engine's (NO_TABLE, BATCH, DIM, INVALID, NOMEM) and the
 * transport's; UNSUPPORTED over a socket to a server older than protocol
 * version 3 (refused before sending).  Role: trainer. */
int emdb_client_table_scan(emdb_client *c, uint32_t table, uint64_t cursor,
			   size_t max_rows, uint32_t dim, uint32_t per_row,
			   uint64_t *ids, float *vecs, float *state,
			   size_t *n_out, uint64_t *next_cursor,
			   uint64_t *step_out);
int emdb_client_table_load(emdb_client *c, uint32_t table, const uint64_t *ids,
			   size_t n, uint32_t dim, const float *vecs,
			   uint32_t per_row, const float *state);

/* Make room for `rows` rows in table `table`, the rows it holds included,
 * before training starts: emdb_table_reserve of emdb/db.h (every index
 * shard grown so that its share of that many IDs fits without a resize,
 * the row chunks for that many rows mapped and their memory backed), so
 * that inserting up to that many IDs pays neither an index resize nor a
 * page fault.  The table still grows past `rows` on demand; asking for no
 * more room than the table has does nothing.  Rows, values and steps are
 * not changed.
 *
 * Synchronous only, like the other table administration calls (mem://
 * runs it on the caller's thread).  It returns once the memory is backed,
 * which takes about as long as writing it once (3 s for 10M rows of 64
 * floats where first touch is slow, on 2 vCPUs): give the handle a timeout that covers it
 * (emdb_client_set_timeout, 0 = none) or the call fails with TIMEOUT
 * while the server goes on reserving.  The server runs it on a thread of
 * its own and answers the connection's later requests meanwhile, so the
 * handle stays usable from other threads; the backing takes a core, so
 * reserve before training, not per batch.
 *
 * Errors: the engine's, with its message: NO_TABLE; LIMIT (more rows than
 * a table can hold); NOMEM (the room would go over the server's
 * max_memory, or the memory the machine has available, checked before anything
 * is mapped; or an allocation failed: the room made before it stays).
 * UNSUPPORTED over a socket to a server that speaks only protocol version
 * 1 (emdb_client_protocol_version below 2: TABLE_RESERVE is version 2's):
 * the call fails at once, nothing is sent, and the handle stays usable.
 * The transport errors above.  Thread-safe like every call; other calls
 * on the table, from any thread, may run meanwhile.  Role: admin. */
int emdb_client_table_reserve(emdb_client *c, uint32_t table, uint64_t rows);

/* ------------------------------------------------------------------ */
/* Checkpoints and restore (docs/checkpoint.md)                        */
/* ------------------------------------------------------------------ */

/* A checkpoint or restore runs as a job on the server, one at a time, in
 * the background: the starting call returns the job's number at once and
 * emdb_client_job_status / emdb_client_job_wait follow it.  Pull, Lookup,
 * Prefetch, Push and Update are served meanwhile (docs/checkpoint.md).
 * The server keeps the status of its last 16 jobs.
 * Over mem:// these calls fail with UNSUPPORTED (an in-process database
 * has no store; use emdb/checkpoint.h directly). */

typedef enum emdb_job_kind {
	EMDB_JOB_NONE = 0,
	EMDB_JOB_CHECKPOINT_FULL = 1,
	EMDB_JOB_CHECKPOINT_INCREMENTAL = 2,
	EMDB_JOB_RESTORE = 3,
} emdb_job_kind;

typedef enum emdb_job_state {
	EMDB_JOB_IDLE = 0,    /* job 0 asked and no job ever ran */
	EMDB_JOB_RUNNING = 1,
	EMDB_JOB_DONE = 2,
	EMDB_JOB_FAILED = 3,
} emdb_job_state;

typedef struct emdb_job_status {
	uint64_t job;             /* the job's number, from 1              */
	emdb_job_kind kind;
	emdb_job_state state;
	emdb_progress progress;   /* emdb/checkpoint.h                     */
	emdb_ckpt_info result;    /* DONE: the checkpoint written/restored */
	int error;                /* FAILED: the emdb_err                  */
	char message[1024];       /* FAILED: the reason, NUL-terminated    */
} emdb_job_status;

/* Start a checkpoint of every table (FULL or INCREMENTAL); *job (may be
 * NULL) gets its number.  Errors: UNSUPPORTED (the server runs without a
 * data_dir, or mem://), BUSY (a job is running: its number is in the
 * message), INVALID (unknown kind), CLOSED, TIMEOUT, AUTH.  Role: admin. */
int emdb_client_checkpoint_start(emdb_client *c, emdb_ckpt_kind kind, uint64_t *job);

/* Start replacing every table with checkpoint `id` (0 = the latest).
 * Errors: as emdb_client_checkpoint_start, plus INVALID (no such
 * checkpoint).  Role: admin. */
int emdb_client_restore_start(emdb_client *c, uint64_t id, uint64_t *job);

/* The status of job `job` (0 = the newest).  Errors: INVALID (a job the
 * server does not remember), CLOSED, TIMEOUT, AUTH.  Role: reader. */
int emdb_client_job_status(emdb_client *c, uint64_t job, emdb_job_status *out);

/* Poll the status of `job` every poll_ms (0 = 50 ms) until it is DONE or
 * FAILED or timeout_ms passed (< 0 = no limit).  Returns EMDB_OK when it
 * is DONE, the job's error when it FAILED (and the message becomes
 * emdb_client_last_error()), TIMEOUT when still running; *out (may be
 * NULL) gets the last status seen.  When `progress` is not NULL it is
 * called with every status polled (for progress bars). */
int emdb_client_job_wait(emdb_client *c, uint64_t job, int64_t timeout_ms, uint32_t poll_ms,
			 void (*progress)(void *arg, const emdb_job_status *st), void *arg,
			 emdb_job_status *out);

/* Start and wait: a checkpoint, or a restore.  *info (may be NULL) gets
 * what was written or restored. */
int emdb_client_checkpoint(emdb_client *c, emdb_ckpt_kind kind, emdb_ckpt_info *info);
int emdb_client_restore(emdb_client *c, uint64_t id, emdb_ckpt_info *info);

/* The complete checkpoints in the server's store, oldest first.  On
 * success *out is an array of *n entries that the caller frees with
 * emdb_free() (a valid empty block when *n is 0).  Errors: UNSUPPORTED,
 * NOMEM, CLOSED, TIMEOUT, AUTH.  Role: reader. */
int emdb_client_checkpoint_list(emdb_client *c, emdb_ckpt_info **out, size_t *n);

/* Delete one checkpoint.  Errors: INVALID (no such checkpoint), BUSY (an
 * incremental checkpoint extends it, or a job is running), NOSPACE or IO
 * (the store could not write; the checkpoint is still there), UNSUPPORTED,
 * CLOSED, TIMEOUT, AUTH.  Role: admin. */
int emdb_client_checkpoint_delete(emdb_client *c, uint64_t id);

/* ---- Cluster: the link between nodes (docs/cluster.md "Linktest") ----
 *
 * A linktest measures the node-to-node path of the node this handle is
 * connected to, as `ceph tell osd.N bench` or iperf do for theirs: that
 * node keeps `depth` rounds of messages in flight for duration_ms, each
 * round being msgs[0 .. n) (a request of request_bytes to node `rank`,
 * answered with reply_bytes), through its own link (its thread, framing,
 * authenticated UCX endpoints, the peers' serve path), with no table, no
 * engine and no client in between.  Sizes are frames as the nodes' INFO
 * cluster counters count them (link header included); a size below the
 * smallest message or off its 8-byte grid is rounded up, and the bytes
 * reported are those sent. */
typedef struct emdb_linktest_msg {
	uint32_t rank;           /* another node of the cluster            */
	uint32_t reserved;       /* 0                                      */
	uint64_t request_bytes;  /* at most 2^31 + the link's header        */
	uint64_t reply_bytes;
} emdb_linktest_msg;

typedef struct emdb_linktest_result {
	uint64_t rounds;         /* rounds whose every reply came back     */
	uint64_t elapsed_ns;     /* from the first send to the last reply  */
	uint64_t bytes_sent;     /* of those rounds, as the link counts    */
	uint64_t bytes_received;
} emdb_linktest_result;

/* Run a linktest on the node and wait for its end (duration_ms plus the
 * rounds in flight; the handle's timeout counts from then).  Errors:
 * INVALID (duration 0 or over 10000 ms, depth or n outside 1..64, a rank
 * that is this node's or no node's, a size over the frame limit, more
 * than 1 GiB in flight: nothing is sent); BUSY (a linktest runs on that
 * node); NODE (a peer failed or did not answer within the node's
 * node_timeout_ms; the message names it); UNSUPPORTED (the server is not
 * part of a cluster, mem://, or a server older than protocol version 5);
 * the transport errors.  Role: admin. */
int emdb_client_linktest(emdb_client *c, const emdb_linktest_msg *msgs, size_t n, uint32_t depth,
			 uint32_t duration_ms, emdb_linktest_result *out);

/* ------------------------------------------------------------------ */
/* Tickets                                                             */
/* ------------------------------------------------------------------ */

/* A ticket is the result of a Prefetch: the server's (or, for mem://, the
 * engine's) resolved locations of a batch of IDs, used by the *_ticket
 * calls so that Pull and Push skip the index.  It belongs to the handle
 * that made it and is valid only with that handle.
 *
 * emdb_client_ticket_free releases it: over a socket it sends TICKET_FREE
 * without waiting for the answer (the server also frees a connection's
 * tickets when it closes); on a broken handle it only frees the memory.
 * Free every ticket before emdb_client_close, and not while a request
 * using it is in flight.  NULL is a no-op. */
void emdb_client_ticket_free(emdb_client_ticket *t);
size_t emdb_client_ticket_count(const emdb_client_ticket *t); /* IDs in it */
uint32_t emdb_client_ticket_table(const emdb_client_ticket *t); /* its table */

/* ------------------------------------------------------------------ */
/* Data plane, synchronous                                             */
/* ------------------------------------------------------------------ */

/* Each call mirrors the engine call of emdb/db.h with the same name and
 * the same rules (batch sizes, offsets of bags, packing, duplicates), and
 * returns the engine's errors plus those of the transport.  The ticket
 * forms take a ticket of this handle; the engine checks it belongs to
 * `table` (EMDB_ERR_TICKET).  Roles: lookup reader, the others trainer. */

/* Resolve (and insert) ids[n]; on success *out is a new ticket, freed
 * with emdb_client_ticket_free.  On failure *out is NULL. */
int emdb_client_prefetch(emdb_client *c, uint32_t table, const uint64_t *ids,
			 size_t n, emdb_client_ticket **out);

int emdb_client_pull(emdb_client *c, uint32_t table, const uint64_t *ids,
		     size_t n, uint32_t dim, float *out);
int emdb_client_pull_ticket(emdb_client *c, uint32_t table,
			    const emdb_client_ticket *t, uint32_t dim, float *out);
int emdb_client_pull_bags(emdb_client *c, uint32_t table, const uint64_t *ids,
			  size_t n, const uint64_t *offsets, size_t n_bags,
			  emdb_pool pool, uint32_t dim, float *out);
int emdb_client_pull_bags_ticket(emdb_client *c, uint32_t table,
				 const emdb_client_ticket *t,
				 const uint64_t *offsets, size_t n_bags,
				 emdb_pool pool, uint32_t dim, float *out);

int emdb_client_push(emdb_client *c, uint32_t table, const uint64_t *ids,
		     size_t n, uint32_t dim, const float *grads);
int emdb_client_push_ticket(emdb_client *c, uint32_t table,
			    const emdb_client_ticket *t, uint32_t dim,
			    const float *grads);
int emdb_client_push_bags(emdb_client *c, uint32_t table, const uint64_t *ids,
			  size_t n, const uint64_t *offsets, size_t n_bags,
			  emdb_pool pool, uint32_t dim, const float *grads);
int emdb_client_push_bags_ticket(emdb_client *c, uint32_t table,
				 const emdb_client_ticket *t,
				 const uint64_t *offsets, size_t n_bags,
				 emdb_pool pool, uint32_t dim,
				 const float *grads);

/* Pooled Pull and its backward with per-sample weights, as
 * emdb_pull_bags_weighted and emdb_push_bags_weighted of emdb/db.h
 * (torch.nn.EmbeddingBag's per_sample_weights): weights holds one float
 * per ID (n, or the ticket's count), pooling must be EMDB_POOL_SUM
 * (INVALID otherwise, as torch).  weights is borrowed like ids.  Over a
 * socket they are protocol version 3's (PULL_WEIGHTED, PUSH_WEIGHTED):
 * to a server that speaks an older version (emdb_client_protocol_version
 * below 3) they fail at once with UNSUPPORTED, nothing is sent, and the
 * handle stays usable.  Role: trainer. */
int emdb_client_pull_bags_weighted(emdb_client *c, uint32_t table,
				   const uint64_t *ids, size_t n,
				   const uint64_t *offsets, size_t n_bags,
				   emdb_pool pool, const float *weights,
				   uint32_t dim, float *out);
int emdb_client_pull_bags_weighted_ticket(emdb_client *c, uint32_t table,
					  const emdb_client_ticket *t,
					  const uint64_t *offsets,
					  size_t n_bags, emdb_pool pool,
					  const float *weights, uint32_t dim,
					  float *out);
int emdb_client_push_bags_weighted(emdb_client *c, uint32_t table,
				   const uint64_t *ids, size_t n,
				   const uint64_t *offsets, size_t n_bags,
				   emdb_pool pool, const float *weights,
				   uint32_t dim, const float *grads);
int emdb_client_push_bags_weighted_ticket(emdb_client *c, uint32_t table,
					  const emdb_client_ticket *t,
					  const uint64_t *offsets,
					  size_t n_bags, emdb_pool pool,
					  const float *weights, uint32_t dim,
					  const float *grads);

/* *rows_out (may be NULL) gets the rows updated. */
int emdb_client_update(emdb_client *c, uint32_t table, uint64_t *rows_out);
int emdb_client_update_all(emdb_client *c, uint64_t *rows_out);

/* A Push of grads[n * dim] to ids[n] (or to the IDs of ticket t) and then
 * an Update of the same table, as one request (emdb_push_update of
 * emdb/db.h): the table's step advances once, and the Update applies this
 * batch together with every gradient pushed to the table before it
 * (duplicates summed, as always).  The rows come out bit for bit as
 * emdb_client_push followed by emdb_client_update would leave them, when
 * nothing else pushes to the table meanwhile; the cost is one round trip
 * instead of two, and one pass of the engine over the rows.  A trainer
 * that pushes and updates one batch per step calls this instead of the
 * two.  There is no pooled form: push bags with emdb_client_push_bags,
 * then update.  This is not a synchronous step (emdb_client_update_sync):
 * it applies at once.
 *
 * *rows_out (may be NULL) gets the rows updated.  Over a socket the
 * request counts as one step toward the server's checkpoint_every_steps,
 * as an Update does.  ids, grads and the ticket are borrowed during the
 * call only (the _async forms: until their future completes, per the
 * lifetime rule above); the ticket stays valid and is freed as usual.
 * Thread-safe like every call; pushes from other threads to the same
 * table meanwhile are applied by this Update or the next.
 * Errors: those of emdb_client_push (NO_TABLE, BATCH, DIM, INVALID,
 * NOMEM; TICKET for a ticket of another table) and of the transport;
 * UNSUPPORTED over a socket to a server that speaks only protocol version
 * 1 (emdb_client_protocol_version below 2: the request is protocol
 * version 2's, and such a server would take it for a malformed frame and
 * close the connection): the call fails at once, nothing is sent, and the
 * handle stays usable, so emdb_client_push then emdb_client_update does
 * the same work there (the _async forms return a future already failed
 * with it).  The engine applies nothing on an error it reports: nothing
 * is pushed and the step does not advance (after CLOSED or TIMEOUT the
 * request may or may not have run, as for any request).  Role: trainer. */
int emdb_client_push_update(emdb_client *c, uint32_t table, const uint64_t *ids,
			    size_t n, uint32_t dim, const float *grads,
			    uint64_t *rows_out);
int emdb_client_push_update_ticket(emdb_client *c, uint32_t table,
				   const emdb_client_ticket *t, uint32_t dim,
				   const float *grads, uint64_t *rows_out);

/* A synchronous step of data-parallel training: each of `workers`
 * workers pushes its gradients, then calls this; every call waits until
 * all `workers` calls for the same table (0: every table) have arrived,
 * the Update is then applied once, and all of them return its result
 * (*rows_out the same for all).  So no worker pulls the next batch before
 * every worker's gradients are in and applied.  Each worker calls it once
 * per step.  workers 1 is a plain emdb_client_update.
 *
 * Gradients of one ID pushed by several workers are summed in the order
 * their pushes arrive unless each worker's handle has its rank
 * (emdb_client_options.worker_rank, 0 .. workers - 1): then in rank
 * order, and the step's rows and optimizer state are the same bits
 * whichever worker pushed first, on one node or a cluster.
 *
 * Over a socket the server holds the step: the workers may be any
 * processes, on any connections.  With mem:// the workers are threads of
 * this process using this handle, or handles on the same mem://NAME
 * database; each call blocks its thread (an asynchronous one, a mem_threads
 * worker).
 *
 * Errors: INVALID (workers 0 or over EMDB_CLIENT_UPDATE_WORKERS_MAX, or
 * another workers count than the step already open for the table, which
 * stays open), NO_TABLE, TIMEOUT (the step was still short of workers
 * after the server's update_barrier_timeout_ms, 20 s by default, or with
 * mem:// the handle's timeout: nothing was applied, the gradients stay
 * for the next Update, every worker of the step got TIMEOUT), CLOSED (the
 * server shut down meanwhile), and the errors of emdb_client_update.  A
 * worker whose connection closes leaves the step.  Keep the handle's
 * timeout above update_barrier_timeout_ms: a call the handle gave up on
 * still counts in the server's step until that step ends.
 *
 * Resends.  A ranked handle (emdb_client_options.worker_rank) is one
 * worker and numbers its steps per table: the number advances only when
 * a call succeeds, so calling again after an error (TIMEOUT, CLOSED)
 * resends the same step.  The server (or the mem:// barrier) counts it
 * once: while the earlier arrival waits, the resend takes its place; once
 * that step was applied, the resend returns its result at once (*rows_out
 * the step's) without counting in the next step.  A resend of a step
 * older than the worker's last applied one fails INVALID; BUSY means its
 * step is being applied right now: call again.  A new handle is a new
 * session and numbers from 1.  Without a rank a call resent after its
 * step was applied counts in the next step.  Over a socket numbering
 * needs protocol version 4, as the rank does.
 * Role: trainer. */
#define EMDB_CLIENT_UPDATE_WORKERS_MAX 65536u
int emdb_client_update_sync(emdb_client *c, uint32_t table, uint32_t workers,
			    uint64_t *rows_out);

/* found may be NULL; otherwise it receives n bytes, 1 where the ID is held. */
int emdb_client_lookup(emdb_client *c, uint32_t table, const uint64_t *ids,
		       size_t n, uint32_t dim, float *out, uint8_t *found);

/* As emdb_read_state.  per_row is the caller's
 * emdb_optimizer_state_floats(kind, dim) for the table: state receives
 * n * per_row floats, and a table whose state has another width fails
 * with EMDB_ERR_DIM instead of overrunning state.  found may be NULL. */
int emdb_client_read_state(emdb_client *c, uint32_t table, const uint64_t *ids,
			   size_t n, uint32_t per_row, float *state,
			   uint8_t *found);

/* ------------------------------------------------------------------ */
/* Data plane, asynchronous                                            */
/* ------------------------------------------------------------------ */

/* Submit the request of the synchronous call with the same name and
 * return its future at once (a tcp:// or unix:// submission returns once
 * the request is written to the socket, which waits while the socket
 * buffer is full).  Mind the lifetime rule at the top of this file.
 * An error found at submission (bad argument, broken handle) completes the
 * future with it.  NULL only when the future cannot be allocated
 * (emdb_client_last_error() says so); every emdb_future_* function takes
 * NULL and treats it as a future failed with EMDB_ERR_NOMEM. */
emdb_future *emdb_client_prefetch_async(emdb_client *c, uint32_t table,
					const uint64_t *ids, size_t n,
					emdb_client_ticket **out);
emdb_future *emdb_client_pull_async(emdb_client *c, uint32_t table,
				    const uint64_t *ids, size_t n, uint32_t dim,
				    float *out);
emdb_future *emdb_client_pull_ticket_async(emdb_client *c, uint32_t table,
					   const emdb_client_ticket *t,
					   uint32_t dim, float *out);
emdb_future *emdb_client_pull_bags_async(emdb_client *c, uint32_t table,
					 const uint64_t *ids, size_t n,
					 const uint64_t *offsets, size_t n_bags,
					 emdb_pool pool, uint32_t dim, float *out);
emdb_future *emdb_client_pull_bags_ticket_async(emdb_client *c, uint32_t table,
						const emdb_client_ticket *t,
						const uint64_t *offsets,
						size_t n_bags, emdb_pool pool,
						uint32_t dim, float *out);
emdb_future *emdb_client_push_async(emdb_client *c, uint32_t table,
				    const uint64_t *ids, size_t n, uint32_t dim,
				    const float *grads);
emdb_future *emdb_client_push_ticket_async(emdb_client *c, uint32_t table,
					   const emdb_client_ticket *t,
					   uint32_t dim, const float *grads);
emdb_future *emdb_client_push_bags_async(emdb_client *c, uint32_t table,
					 const uint64_t *ids, size_t n,
					 const uint64_t *offsets, size_t n_bags,
					 emdb_pool pool, uint32_t dim,
					 const float *grads);
emdb_future *emdb_client_push_bags_ticket_async(emdb_client *c, uint32_t table,
						const emdb_client_ticket *t,
						const uint64_t *offsets,
						size_t n_bags, emdb_pool pool,
						uint32_t dim, const float *grads);
emdb_future *emdb_client_pull_bags_weighted_async(emdb_client *c, uint32_t table,
						  const uint64_t *ids, size_t n,
						  const uint64_t *offsets,
						  size_t n_bags, emdb_pool pool,
						  const float *weights, uint32_t dim,
						  float *out);
emdb_future *emdb_client_pull_bags_weighted_ticket_async(
	emdb_client *c, uint32_t table, const emdb_client_ticket *t,
	const uint64_t *offsets, size_t n_bags, emdb_pool pool,
	const float *weights, uint32_t dim, float *out);
emdb_future *emdb_client_push_bags_weighted_async(emdb_client *c, uint32_t table,
						  const uint64_t *ids, size_t n,
						  const uint64_t *offsets,
						  size_t n_bags, emdb_pool pool,
						  const float *weights, uint32_t dim,
						  const float *grads);
emdb_future *emdb_client_push_bags_weighted_ticket_async(
	emdb_client *c, uint32_t table, const emdb_client_ticket *t,
	const uint64_t *offsets, size_t n_bags, emdb_pool pool,
	const float *weights, uint32_t dim, const float *grads);
emdb_future *emdb_client_push_update_async(emdb_client *c, uint32_t table,
					   const uint64_t *ids, size_t n,
					   uint32_t dim, const float *grads,
					   uint64_t *rows_out);
emdb_future *emdb_client_push_update_ticket_async(emdb_client *c, uint32_t table,
						  const emdb_client_ticket *t,
						  uint32_t dim, const float *grads,
						  uint64_t *rows_out);
emdb_future *emdb_client_update_async(emdb_client *c, uint32_t table,
				      uint64_t *rows_out);
emdb_future *emdb_client_update_all_async(emdb_client *c, uint64_t *rows_out);
/* NULL also for invalid workers (emdb_client_last_error says so). */
emdb_future *emdb_client_update_sync_async(emdb_client *c, uint32_t table,
					   uint32_t workers, uint64_t *rows_out);
emdb_future *emdb_client_lookup_async(emdb_client *c, uint32_t table,
				      const uint64_t *ids, size_t n,
				      uint32_t dim, float *out, uint8_t *found);

/* Returned by emdb_future_wait and emdb_future_poll while the request is
 * still in flight.  Positive, so that it never equals EMDB_OK or an
 * emdb_err, which are the results of complete requests. */
#define EMDB_FUTURE_PENDING 1

/* Wait for f to complete, at most timeout_ms milliseconds (< 0: until it
 * completes, which happens at the latest at the request's deadline when
 * the handle has a timeout; 0: do not wait).  Returns the operation's
 * result, EMDB_OK or an emdb_err (whose message then becomes this
 * thread's emdb_client_last_error()), or EMDB_FUTURE_PENDING when
 * timeout_ms passed first: the request is still in flight and f stays
 * valid; wait again, poll, or free it.  Once complete, f keeps its result:
 * waiting again returns it again.  A Prefetch's ticket is stored in its
 * *out when wait or poll first returns EMDB_OK (and *out is set to NULL
 * when they return an error). */
int emdb_future_wait(emdb_future *f, int64_t timeout_ms);

/* emdb_future_wait(f, 0): EMDB_FUTURE_PENDING while in flight, then the
 * result. */
int emdb_future_poll(emdb_future *f);

/* Free f.  If its request is still in flight it is abandoned: its
 * response is discarded when it comes and its output buffers are never
 * written after this returns (it may wait for a response that is being
 * received into them right now).  The ticket of a Prefetch that
 * completed but was never delivered by wait or poll is freed, and that of
 * an abandoned one is released on the server when its response comes.
 * NULL is a no-op. */
void emdb_future_free(emdb_future *f);

#ifdef __cplusplus
}
#endif
#endif
