/*
 * tls_io.c - OpenSSL calls for non-blocking frames (protocol/tls_io.h).
 *
 * Design
 *   Each call makes one SSL_read_ex, SSL_write_ex or SSL_do_handshake and
 *   answers as the system call it stands for would (answer()).  Small
 *   pieces of a send are copied into a per-thread record-sized buffer
 *   first: the frames emdb writes are iovec lists (a header, then
 *   arrays), and one SSL_write per piece would make one record and one
 *   system call per piece.  A piece of a whole record or more is written
 *   in place.
 *
 *   The socket BIO is ours only to pass MSG_NOSIGNAL; OpenSSL's own
 *   writes with write(2), which raises SIGPIPE on a dead peer.
 *
 * Invariants
 *   1. A retry offers the same front bytes: the gathered buffer is a pure
 *      function of the iovecs' front, which the callers keep until sent.
 *   2. Every call clears this thread's OpenSSL error queue first, so an
 *      error is this call's, never an earlier one's left behind.
 */
#include "protocol/tls_io.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>

static __thread char err_text[256];
static __thread unsigned char gather[TLS_IO_RECORD];

static BIO_METHOD *sock_method;
static pthread_once_t sock_once = PTHREAD_ONCE_INIT;

static int sock_write(BIO *b, const char *buf, int len)
{
	int fd = (int)(intptr_t)BIO_get_data(b);
	ssize_t k;
	BIO_clear_retry_flags(b);
	do
		k = send(fd, buf, (size_t)len, MSG_NOSIGNAL);
	while (k < 0 && errno == EINTR);
	if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		BIO_set_retry_write(b);
	return (int)k;
}

static int sock_read(BIO *b, char *buf, int len)
{
	int fd = (int)(intptr_t)BIO_get_data(b);
	ssize_t k;
	BIO_clear_retry_flags(b);
	do
		k = recv(fd, buf, (size_t)len, 0);
	while (k < 0 && errno == EINTR);
	if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		BIO_set_retry_read(b);
	if (k == 0)
		BIO_set_flags(b, BIO_FLAGS_IN_EOF);
	return (int)k;
}

/* FLUSH: nothing is buffered here.  EOF: how OpenSSL tells a peer that
 * hung up (a clean end, with SSL_OP_IGNORE_UNEXPECTED_EOF) from a read
 * error. */
static long sock_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)num, (void)ptr;
	if (cmd == BIO_CTRL_FLUSH)
		return 1;
	if (cmd == BIO_CTRL_EOF)
		return BIO_test_flags(b, BIO_FLAGS_IN_EOF) != 0;
	return 0;
}

static int sock_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static void sock_method_init(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "emdb socket");
	if (m && BIO_meth_set_write(m, sock_write) && BIO_meth_set_read(m, sock_read) &&
	    BIO_meth_set_ctrl(m, sock_ctrl) && BIO_meth_set_create(m, sock_create)) {
		sock_method = m;
		return;
	}
	BIO_meth_free(m);
}

void tls_io_ctx_setup(SSL_CTX *ctx)
{
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_mode(ctx, TLS_IO_MODES);
	SSL_CTX_set_read_ahead(ctx, 1);
}

BIO *tls_io_socket_bio(int fd)
{
	pthread_once(&sock_once, sock_method_init);
	if (!sock_method)
		return NULL;
	BIO *b = BIO_new(sock_method);
	if (b)
		BIO_set_data(b, (void *)(intptr_t)fd);
	return b;
}

/* A call's answer, as the system calls give it: r == 1 is success
 * (moved bytes); otherwise 0 at the end of the stream, or -1 with errno
 * EAGAIN and *want, or EPROTO with the reason kept for tls_io_error. */
static ssize_t answer(SSL *ssl, int r, size_t moved, short *want)
{
	if (r == 1)
		return (ssize_t)moved;
	int e = SSL_get_error(ssl, r);
	int sys = errno;
	switch (e) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		*want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		snprintf(err_text, sizeof(err_text), "connection closed");
		return 0;
	default:
		break;
	}
	unsigned long code = ERR_peek_last_error();
	long verify = SSL_get_verify_result(ssl);
	if (verify != X509_V_OK)
		snprintf(err_text, sizeof(err_text), "certificate verify failed: %s",
			 X509_verify_cert_error_string(verify));
	else if (code)
		ERR_error_string_n(code, err_text, sizeof(err_text));
	else if (e == SSL_ERROR_SYSCALL && sys)
		snprintf(err_text, sizeof(err_text), "%s", strerror(sys));
	else
		snprintf(err_text, sizeof(err_text), "connection closed");
	ERR_clear_error();
	errno = EPROTO;
	return -1;
}

ssize_t tls_io_sendv(SSL *ssl, const struct iovec *iov, int n, short *want)
{
	const void *p = iov[0].iov_base;
	size_t len = iov[0].iov_len;
	if (len < TLS_IO_RECORD && n > 1) {
		len = 0;
		for (int i = 0; i < n && len < TLS_IO_RECORD; i++) {
			size_t k = iov[i].iov_len;
			if (k > TLS_IO_RECORD - len)
				k = TLS_IO_RECORD - len;
			memcpy(gather + len, iov[i].iov_base, k);
			len += k;
		}
		p = gather;
	}
	ERR_clear_error();
	size_t w = 0;
	int r = SSL_write_ex(ssl, p, len, &w);
	ssize_t k = answer(ssl, r, w, want);
	if (k == 0) { /* the peer closed: no more sending */
		errno = EPIPE;
		return -1;
	}
	return k;
}

ssize_t tls_io_recv(SSL *ssl, void *p, size_t len, short *want)
{
	ERR_clear_error();
	size_t got = 0;
	int r = SSL_read_ex(ssl, p, len, &got);
	return answer(ssl, r, got, want);
}

bool tls_io_pending(const SSL *ssl)
{
	return SSL_has_pending(ssl) != 0;
}

int tls_io_handshake(SSL *ssl, short *want)
{
	ERR_clear_error();
	int r = SSL_do_handshake(ssl);
	if (r == 1)
		return 0;
	if (answer(ssl, r, 0, want) == 0) /* closed during the handshake */
		errno = EPROTO;
	return -1;
}

const char *tls_io_reason(void)
{
	unsigned long e = ERR_get_error();
	if (!e)
		return "no detail";
	ERR_error_string_n(e, err_text, sizeof(err_text));
	ERR_clear_error();
	return err_text;
}

const char *tls_io_error(void)
{
	return err_text[0] ? err_text : "unknown TLS error";
}
