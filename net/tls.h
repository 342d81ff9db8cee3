/*
 * net/tls.h - TLS on emdb-server's TCP connections (OpenSSL).
 *
 * With tls_cert_file and tls_key_file configured, every connection
 * accepted on the TCP listener speaks TLS (1.2 or newer) and nothing
 * else; the Unix socket stays plain (it never leaves the machine, and its
 * file mode guards it).  With tls_ca_file, TCP clients must also present
 * a certificate signed by one of those CAs.  Roles still come from AUTH
 * tokens: TLS makes the token and the rows private on the wire, it does
 * not replace them.
 *
 * Both I/O backends carry TLS: the io_uring one polls a TLS connection's
 * socket through the ring and reads and writes it with the same
 * non-blocking calls as libevent (net/loop.h, io_read_burst, io_flush).
 *
 * Certificates are rotated by replacing the files and sending the server
 * SIGHUP, or by a CONFIG SET of the paths (tls_server_reload, called with
 * the server's cfg_lock held in both cases): connections accepted from
 * then on get the new ones, those open keep theirs.  A reload that fails
 * keeps the old.
 *
 * Thread safety: the tls_server is shared by every I/O thread
 * (tls_server_accept) and the main thread (reload, describe); its context
 * is swapped under its lock, and each SSL holds a reference to the
 * context it was made from.  A connection's SSL is used by its I/O thread
 * only.
 */
#ifndef EMDB_NET_TLS_H
#define EMDB_NET_TLS_H

#include <openssl/ssl.h>

#include "net/config.h"

typedef struct tls_server tls_server;

/* Make OpenSSL allocate through emdb_malloc, so that its buffers (a TLS
 * connection's records) count in max_memory with the rest of the
 * connection buffers and fail cleanly at the limit.  Call first thing in
 * main, before anything calls OpenSSL.  Returns 0, or -1 when OpenSSL has
 * allocated already (then it keeps the C library's malloc). */
int tls_use_emdb_alloc(void);

/* The context for cfg's certificate, key and client CAs.  *out is NULL
 * when cfg configures no TLS.  Returns 0, or -1 with the reason in err
 * (a file that cannot be read, a key that does not match the
 * certificate, ...).  Free with tls_server_free. */
int tls_server_create(const net_config *cfg, tls_server **out, char *err, size_t errlen);
void tls_server_free(tls_server *ts);

/* Read cfg's files again and use them for every connection accepted
 * from now on.  Returns 0, or -1 with the reason in err and the context
 * in use unchanged. */
int tls_server_reload(tls_server *ts, const net_config *cfg, char *err, size_t errlen);

/* One line for the log and INFO, into buf: the certificate's subject and
 * expiry, and whether client certificates are required.  The whole line
 * fits in TLS_DESCRIBE_MAX bytes. */
#define TLS_DESCRIBE_MAX (CONFIG_PATH_MAX + 512)
void tls_server_describe(tls_server *ts, char *buf, size_t len);

/* Successful reloads since start. */
uint64_t tls_server_reloads(tls_server *ts);

/* A server-side SSL over socket fd (not owned), handshake still to come:
 * the first tls_io_recv drives it.  NULL when out of memory.  Free with
 * SSL_free. */
SSL *tls_server_accept(tls_server *ts, int fd);

#endif
