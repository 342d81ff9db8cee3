/*
 * tls.c - the server's TLS context (net/tls.h).
 *
 * Design
 *   One SSL_CTX for the process, built at start from the configured PEM
 *   files and checked there (certificate, key, their match, the client
 *   CAs), so that a mistake stops the server with a message instead of
 *   failing every handshake later.  Each accepted TCP connection gets an
 *   SSL in accept state over the MSG_NOSIGNAL socket BIO of tls_io.h;
 *   the I/O thread then reads and writes through tls_io, on either
 *   backend (io_recv and io_sendv of net/loop.c).
 *
 *   The context's common settings (versions, modes, read-ahead, and an
 *   unexpected EOF taken as the end of the stream) are tls_io_ctx_setup's.
 *
 *   A reload (SIGHUP, or a CONFIG SET of a tls_* key) builds a whole new
 *   context from the files, checked
 *   the same way, and only then swaps it in; OpenSSL counts references to
 *   a context, so the old one lives on in the connections made from it.
 *
 * Invariants
 *   1. A context is complete and checked before any connection can be
 *      made from it, and never changes afterwards; ts->ctx is read and
 *      swapped under ts->mu only.
 */
#include "net/tls.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509.h>

#include <emdb/alloc.h>

#include "protocol/tls_io.h"

struct tls_server {
	pthread_mutex_t mu; /* ctx, describe, reloads */
	SSL_CTX *ctx;
	char describe[TLS_DESCRIBE_MAX];
	uint64_t reloads;
};

static void describe(SSL_CTX *ctx, const net_config *cfg, char *out, size_t outlen)
{
	X509 *x = SSL_CTX_get0_certificate(ctx);
	char subject[256] = "?", expiry[64] = "?";
	if (x) {
		X509_NAME_oneline(X509_get_subject_name(x), subject, sizeof(subject));
		BIO *b = BIO_new(BIO_s_mem());
		if (b && ASN1_TIME_print(b, X509_get0_notAfter(x))) {
			int n = BIO_read(b, expiry, (int)sizeof(expiry) - 1);
			expiry[n > 0 ? n : 0] = '\0';
		}
		BIO_free(b);
	}
	snprintf(out, outlen, "certificate %s, valid until %s%s%s", subject, expiry,
		 cfg->tls_ca_file[0] ? "; client certificates required, CAs from " : "",
		 cfg->tls_ca_file[0] ? cfg->tls_ca_file : "");
}

static void *ossl_malloc(size_t n, const char *file, int line)
{
	(void)file, (void)line;
	return emdb_malloc(n);
}

static void *ossl_realloc(void *p, size_t n, const char *file, int line)
{
	(void)file, (void)line;
	return emdb_realloc(p, n);
}

static void ossl_free(void *p, const char *file, int line)
{
	(void)file, (void)line;
	emdb_free(p);
}

int tls_use_emdb_alloc(void)
{
	return CRYPTO_set_mem_functions(ossl_malloc, ossl_realloc, ossl_free) ? 0 : -1;
}

/* A context from cfg's files, checked; NULL with the reason in err. */
static SSL_CTX *build_ctx(const net_config *cfg, char *err, size_t errlen)
{
	ERR_clear_error();
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx) {
		snprintf(err, errlen, "TLS: cannot create a context: %s", tls_io_reason());
		return NULL;
	}
	tls_io_ctx_setup(ctx);
	/* An idle connection gives its record buffers back: thousands of
	 * TLS clients that wait cost a few KiB each, not 2 x 16 KiB+. */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert_file) != 1) {
		snprintf(err, errlen, "TLS: tls_cert_file %s: %s", cfg->tls_cert_file, tls_io_reason());
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key_file, SSL_FILETYPE_PEM) != 1) {
		snprintf(err, errlen, "TLS: tls_key_file %s: %s", cfg->tls_key_file, tls_io_reason());
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		snprintf(err, errlen, "TLS: tls_key_file %s does not match tls_cert_file %s: %s",
			 cfg->tls_key_file, cfg->tls_cert_file, tls_io_reason());
		goto fail;
	}
	if (cfg->tls_ca_file[0]) {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->tls_ca_file);
		if (!names || SSL_CTX_load_verify_locations(ctx, cfg->tls_ca_file, NULL) != 1) {
			sk_X509_NAME_pop_free(names, X509_NAME_free);
			snprintf(err, errlen, "TLS: tls_ca_file %s: %s", cfg->tls_ca_file, tls_io_reason());
			goto fail;
		}
		SSL_CTX_set_client_CA_list(ctx, names);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

int tls_server_create(const net_config *cfg, tls_server **out, char *err, size_t errlen)
{
	*out = NULL;
	if (!cfg->tls_cert_file[0])
		return 0;
	tls_server *ts = emdb_calloc(1, sizeof(*ts));
	if (!ts) {
		snprintf(err, errlen, "TLS: out of memory");
		return -1;
	}
	ts->ctx = build_ctx(cfg, err, errlen);
	if (!ts->ctx) {
		emdb_free(ts);
		return -1;
	}
	pthread_mutex_init(&ts->mu, NULL);
	describe(ts->ctx, cfg, ts->describe, sizeof(ts->describe));
	*out = ts;
	return 0;
}

int tls_server_reload(tls_server *ts, const net_config *cfg, char *err, size_t errlen)
{
	SSL_CTX *ctx = build_ctx(cfg, err, errlen);
	if (!ctx)
		return -1;
	char line[sizeof(ts->describe)];
	describe(ctx, cfg, line, sizeof(line));
	pthread_mutex_lock(&ts->mu);
	SSL_CTX *old = ts->ctx;
	ts->ctx = ctx;
	memcpy(ts->describe, line, sizeof(line));
	ts->reloads++;
	pthread_mutex_unlock(&ts->mu);
	SSL_CTX_free(old); /* connections made from it hold their references */
	return 0;
}

void tls_server_free(tls_server *ts)
{
	if (!ts)
		return;
	SSL_CTX_free(ts->ctx);
	pthread_mutex_destroy(&ts->mu);
	emdb_free(ts);
}

void tls_server_describe(tls_server *ts, char *buf, size_t len)
{
	pthread_mutex_lock(&ts->mu);
	snprintf(buf, len, "%s", ts->describe);
	pthread_mutex_unlock(&ts->mu);
}

uint64_t tls_server_reloads(tls_server *ts)
{
	pthread_mutex_lock(&ts->mu);
	uint64_t n = ts->reloads;
	pthread_mutex_unlock(&ts->mu);
	return n;
}

SSL *tls_server_accept(tls_server *ts, int fd)
{
	pthread_mutex_lock(&ts->mu);
	SSL *ssl = SSL_new(ts->ctx); /* takes a reference to ctx */
	pthread_mutex_unlock(&ts->mu);
	BIO *b = ssl ? tls_io_socket_bio(fd) : NULL;
	if (!b) {
		SSL_free(ssl);
		return NULL;
	}
	SSL_set_bio(ssl, b, b);
	SSL_set_accept_state(ssl);
	return ssl;
}
