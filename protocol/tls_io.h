/*
 * protocol/tls_io.h - moving the wire's frames through an OpenSSL
 * connection: the shared part of TLS in emdb-server (net/tls.h) and the
 * client library (client/net.c).
 *
 * Both sides keep their sockets non-blocking and wait for readiness
 * themselves (an event loop, or poll() to a deadline); these calls never
 * block.  They answer as recv(2) and sendmsg(2) do on a non-blocking
 * socket, which the callers already handle: bytes moved, end of stream,
 * or -1 with errno EAGAIN (and what to poll for before the retry: TLS
 * may have to write before it can read on, or the other way round) or a
 * failure for good (EPROTO, EPIPE) whose text tls_io_error() gives.
 *
 * Thread safety: an SSL object is used by one thread at a time (OpenSSL's
 * rule); the callers serialize.  The error text is per thread, like
 * OpenSSL's error queue.
 */
#ifndef EMDB_PROTOCOL_TLS_IO_H
#define EMDB_PROTOCOL_TLS_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <openssl/ssl.h>

/* Records carry at most this much plaintext; sends of smaller pieces are
 * gathered up to it, so that pipelined small replies cost one record and
 * one system call, not one per piece. */
#define TLS_IO_RECORD 16384u

/* A BIO over socket fd (not owned: freeing the BIO leaves fd open) that
 * sends with MSG_NOSIGNAL, so that writing to a peer that has gone raises
 * EPIPE instead of killing the process with SIGPIPE: the client library
 * cannot ignore that signal on behalf of its host program.  NULL when out
 * of memory.  Hand it to SSL_set_bio (which then owns it). */
BIO *tls_io_socket_bio(int fd);

/* Send from iov[0..n) (n >= 1, the first iovec not empty), as sendmsg(2):
 * the bytes of the front sent (> 0), or -1 with errno EAGAIN (*want:
 * POLLOUT or POLLIN, what the socket must become first) or EPROTO / EPIPE
 * (for good).  A retry after EAGAIN must offer the same unsent bytes
 * first (OpenSSL's rule; it may offer more after them): callers resend
 * from their queue, which does.  Past an EAGAIN the first record is in
 * OpenSSL's hands and goes out before anything else.  The SSL must have
 * TLS_IO_MODES. */
ssize_t tls_io_sendv(SSL *ssl, const struct iovec *iov, int n, short *want);

/* Receive up to len bytes into p, as recv(2): the bytes (> 0), 0 at the
 * end of the stream, or -1 with errno EAGAIN (*want as above) or EPROTO. */
ssize_t tls_io_recv(SSL *ssl, void *p, size_t len, short *want);

/* Bytes OpenSSL holds that the socket will not signal again: decrypted
 * data not yet read, or received bytes of a record not yet processed.  A
 * caller that stops reading with these left must come back without
 * waiting for the socket. */
bool tls_io_pending(const SSL *ssl);

/* The modes tls_io_sendv needs, for SSL_CTX_set_mode. */
#define TLS_IO_MODES (SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER)

/* What both sides set on their context: TLS 1.2 or newer, no
 * renegotiation, a peer's hang-up without close_notify taken as the end
 * of the stream (frames carry their lengths, so truncation cannot pass
 * for a whole frame), TLS_IO_MODES, and reading ahead (whole records
 * per system call rather than a header, then a body). */
void tls_io_ctx_setup(SSL_CTX *ctx);

/* Why the last call on this thread failed for good (or a handshake
 * failed): OpenSSL's reason, the errno text, or "connection closed". */
const char *tls_io_error(void);

/* The newest error in this thread's OpenSSL queue, as text ("no detail"
 * when empty), and the queue cleared: for the setup calls (loading a
 * certificate, a key, a CA file) that report through the queue. */
const char *tls_io_reason(void);

/* Drive the handshake one step (SSL_do_handshake): 0 once it is done, or
 * -1 with errno EAGAIN (*want as above) or EPROTO. */
int tls_io_handshake(SSL *ssl, short *want);

#endif
