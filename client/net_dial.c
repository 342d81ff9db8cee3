/*
 * net_dial.c - connecting a tcp://, tls:// or unix:// handle (net_int.h):
 * name resolution, a non-blocking connect bounded by the connect timeout,
 * and for tls:// the context and the handshake.
 *
 * Design
 *   Every step waits with poll() to the one deadline of emdb_client_connect,
 *   so a server that accepts and then says nothing (or a TLS peer that
 *   stalls mid-handshake) costs the caller connect_timeout_ms at most.
 *   The server's certificate must be signed by a trusted CA (the ?ca= file
 *   or the system's) and name the host as written in the URI: a DNS name,
 *   or an IP address.  A certificate that fails is AUTH; a peer that does
 *   not speak TLS is PROTOCOL.
 *
 * Invariants
 *   1. On success n->fd is connected and, for tls://, n->ssl has finished
 *      its handshake; on failure whatever was made is left in n for
 *      net_state_free.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "client/net_int.h"
#include "protocol/tls_io.h"

/* Requests are written whole, so Nagle's delay would only add latency to
 * pipelined small requests. */
static void tcp_nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Wait for a non-blocking connect() to finish. */
static int connect_wait(int fd, uint64_t deadline, const char *peer)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int r;
	do
		r = poll(&p, 1, ms_until(deadline));
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return cl_seterr(EMDB_ERR_TIMEOUT, "emdb_client_connect: %s: connect timed out", peer);
	int err = 0;
	socklen_t len = sizeof(err);
	if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err)
		return cl_seterr(EMDB_ERR_IO, "emdb_client_connect: %s: %s", peer, strerror(err));
	return EMDB_OK;
}

static int dial(net_state *n, const cl_uri *u, uint64_t deadline)
{
	if (u->kind == CL_URI_UNIX) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", u->path);
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return cl_seterr(EMDB_ERR_IO, "emdb_client_connect: socket: %s", strerror(errno));
		int sndbuf = EMDB_CLIENT_UNIX_SNDBUF;
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)); /* best effort */
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			if (errno != EINPROGRESS && errno != EAGAIN) {
				int e = errno;
				close(fd);
				return cl_seterr(EMDB_ERR_IO, "emdb_client_connect: %s: %s", n->peer, strerror(e));
			}
			int rc = connect_wait(fd, deadline, n->peer);
			if (rc != EMDB_OK) {
				close(fd);
				return rc;
			}
		}
		n->fd = fd;
		return EMDB_OK;
	}

	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *ai;
	char port[8];
	snprintf(port, sizeof(port), "%u", u->port);
	int g = getaddrinfo(u->host, port, &hints, &res);
	if (g != 0)
		return cl_seterr(EMDB_ERR_IO, "emdb_client_connect: cannot resolve '%s': %s", u->host,
				 gai_strerror(g));
	int rc = EMDB_ERR_IO;
	for (ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			rc = cl_seterr(EMDB_ERR_IO, "emdb_client_connect: socket: %s", strerror(errno));
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			rc = EMDB_OK;
		else if (errno == EINPROGRESS)
			rc = connect_wait(fd, deadline, n->peer);
		else
			rc = cl_seterr(EMDB_ERR_IO, "emdb_client_connect: %s: %s", n->peer, strerror(errno));
		if (rc == EMDB_OK) {
			tcp_nodelay(fd);
			n->fd = fd;
			break;
		}
		close(fd);
		if (rc == EMDB_ERR_TIMEOUT)
			break;
	}
	freeaddrinfo(res);
	return rc;
}

/* The context of a tls:// handle: whom to trust, and what to show a server
 * that asks for a client certificate. */
static int tls_context(net_state *n, const char *ca, const char *cert, const char *key)
{
	ERR_clear_error();
	SSL_CTX *x = n->tls_ctx = SSL_CTX_new(TLS_client_method());
	if (!x)
		return cl_seterr(EMDB_ERR_NOMEM, "emdb_client_connect: TLS context: %s", tls_io_reason());
	tls_io_ctx_setup(x);
	SSL_CTX_set_verify(x, SSL_VERIFY_PEER, NULL);
	if (ca ? SSL_CTX_load_verify_locations(x, ca, NULL) != 1 : SSL_CTX_set_default_verify_paths(x) != 1)
		return cl_seterr(EMDB_ERR_INVALID, "emdb_client_connect: TLS CA file %s: %s",
				 ca ? ca : "(the system's)", tls_io_reason());
	if (!cert != !key)
		return cl_seterr(EMDB_ERR_INVALID, "emdb_client_connect: a TLS client certificate needs both "
				 "cert and key, not only %s", cert ? "cert" : "key");
	if (cert && SSL_CTX_use_certificate_chain_file(x, cert) != 1)
		return cl_seterr(EMDB_ERR_INVALID, "emdb_client_connect: TLS certificate %s: %s", cert,
				 tls_io_reason());
	if (key && (SSL_CTX_use_PrivateKey_file(x, key, SSL_FILETYPE_PEM) != 1 ||
		    SSL_CTX_check_private_key(x) != 1))
		return cl_seterr(EMDB_ERR_INVALID, "emdb_client_connect: TLS key %s: %s", key, tls_io_reason());
	return EMDB_OK;
}

/* The TLS handshake on the connected socket, to the deadline.  The
 * server's certificate must name host (a DNS name, or the IP address as
 * written). */
static int tls_handshake(net_state *n, const char *host, uint64_t deadline)
{
	SSL *s = n->ssl = SSL_new(n->tls_ctx);
	BIO *b = s ? tls_io_socket_bio(n->fd) : NULL;
	if (!b)
		return cl_seterr(EMDB_ERR_NOMEM, "emdb_client_connect: out of memory for TLS");
	SSL_set_bio(s, b, b);
	SSL_set_connect_state(s);
	unsigned char ip[16];
	bool is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
	if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), host) != 1
		  : SSL_set1_host(s, host) != 1 || SSL_set_tlsext_host_name(s, host) != 1)
		return cl_seterr(EMDB_ERR_NOMEM, "emdb_client_connect: TLS: %s", tls_io_reason());
	for (;;) {
		short want = POLLIN;
		if (tls_io_handshake(s, &want) == 0)
			return EMDB_OK;
		if (errno != EAGAIN) {
			bool cert = SSL_get_verify_result(s) != X509_V_OK;
			return cl_seterr(cert ? EMDB_ERR_AUTH : EMDB_ERR_PROTOCOL,
					 "emdb_client_connect: %s: TLS handshake failed: %s", n->peer, tls_io_error());
		}
		struct pollfd p = { .fd = n->fd, .events = want };
		int w = ms_until(deadline);
		int k = w == 0 ? 0 : poll(&p, 1, w);
		if (k == 0)
			return cl_seterr(EMDB_ERR_TIMEOUT, "emdb_client_connect: %s: TLS handshake timed out", n->peer);
		if (k < 0 && errno != EINTR)
			return cl_seterr(EMDB_ERR_IO, "emdb_client_connect: %s: poll: %s", n->peer, strerror(errno));
	}
}

int net_dial(net_state *n, const cl_uri *u, const emdb_client_options *o, uint64_t deadline)
{
	int rc = EMDB_OK;
	if (u->kind == CL_URI_TLS)
		rc = tls_context(n, o->tls_ca_file ? o->tls_ca_file : u->tls_ca,
				 o->tls_cert_file ? o->tls_cert_file : u->tls_cert,
				 o->tls_key_file ? o->tls_key_file : u->tls_key);
	if (rc == EMDB_OK)
		rc = dial(n, u, deadline);
	if (rc != EMDB_OK)
		return rc;
	if (n->tls_ctx)
		return tls_handshake(n, u->host, deadline);
	int fl = fcntl(n->fd, F_GETFL);
	if (fl < 0 || fcntl(n->fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return cl_seterr(EMDB_ERR_IO, "emdb_client_connect: fcntl: %s", strerror(errno));
	return EMDB_OK;
}
