/*
 * emdb/error.h - the one error enum of emdb.
 *
 * Every emdb function that can fail returns an int: EMDB_OK (0) on success or
 * one of the negative EMDB_ERR_* codes below.  The list is generated from a
 * single X-macro so that the enum, emdb_strerror() and emdb_err_name() can
 * never disagree.  Codes are part of the wire protocol (later issues send
 * them to clients), so a code's number never changes once released; new codes
 * are appended at the end.
 *
 * Besides the code, a failing call leaves a human-readable message with the
 * particulars ("table 'ads': dim 32 given, table has 64") in a thread-local
 * buffer, readable with emdb_last_error() until the next failing call on the
 * same thread.
 */
#ifndef EMDB_ERROR_H
#define EMDB_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message) */
#define EMDB_ERRNO_MAP(X)                                                     \
	X(OK, 0, "success")                                                     \
	X(INVALID, -1, "invalid argument")                                      \
	X(NOMEM, -2, "out of memory")                                           \
	X(NO_TABLE, -3, "no such table")                                        \
	X(EXISTS, -4, "already exists")                                         \
	X(DIM, -5, "dimension mismatch")                                        \
	X(BATCH, -6, "batch size out of range")                                 \
	X(TICKET, -7, "ticket does not belong to this table")                   \
	X(LIMIT, -8, "configured limit exceeded")                               \
	X(IO, -9, "input/output error")                                         \
	X(PROTOCOL, -10, "protocol error")                                      \
	X(AUTH, -11, "not authorized")                                          \
	X(CLOSED, -12, "connection closed")                                     \
	X(TIMEOUT, -13, "timed out")                                            \
	X(BUSY, -14, "resource busy")                                           \
	X(CORRUPT, -15, "data corrupt")                                         \
	X(UNSUPPORTED, -16, "not supported")                                    \
	X(INTERNAL, -17, "internal error")                                     \
	X(NOSPACE, -18, "no space left on device")                             \
	X(NODE, -19, "a cluster node did not answer")

typedef enum emdb_err {
#define EMDB_ERR_ENUM_(name, value, msg) EMDB_ERR_##name = (value),
	EMDB_ERRNO_MAP(EMDB_ERR_ENUM_)
#undef EMDB_ERR_ENUM_
} emdb_err;

/* Alias: EMDB_OK reads better than EMDB_ERR_OK at call sites. */
#define EMDB_OK EMDB_ERR_OK

/* Static description of a code ("dimension mismatch"); never NULL, also for
 * unknown codes ("unknown error").  Thread-safe. */
const char *emdb_strerror(int err);

/* The code's symbolic name without prefix ("DIM"); "UNKNOWN" for unknown
 * codes.  Thread-safe. */
const char *emdb_err_name(int err);

/* The detailed message of the last failing emdb call on this thread, or ""
 * when none failed yet.  The pointer stays valid until the next emdb call on
 * the same thread; copy it to keep it. */
const char *emdb_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
