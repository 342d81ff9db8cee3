/*
 * tls.c - the server's TLS context (net/tls.h).
 *
 * Design
 *   One SSL_CTX for the process, built at start from the configured PEM
 *   files and checked there (certificate, key, their match, the client
 *   CAs), so that a mistake stops the server with a message instead of
 *   failing every handshake later.  Each accepted TCP connection gets an
 *   SSL in accept state over the MSG_NOSIGNAL socket BIO of tls_io.h;
 *   the I/O thread's libevent callbacks then read and write through
 *   tls_io (net/loop_event.c).
 *
 *   The context's common settings (versions, modes, read-ahead, and an
 *   unexpected EOF taken as the end of the stream) are tls_io_ctx_setup's.
 *
 * Invariants
 *   1. The context is complete before any connection is accepted and never
 *      changes afterwards (shared by the I/O threads without a lock).
 */
#include "net/tls.h"

#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509.h>

#include <emdb/alloc.h>

#include "protocol/tls_io.h"

struct tls_server {
	SSL_CTX *ctx;
	char describe[CONFIG_PATH_MAX + 512];
};

static void describe(tls_server *ts, const net_config *cfg)
{
	X509 *x = SSL_CTX_get0_certificate(ts->ctx);
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
	snprintf(ts->describe, sizeof(ts->describe), "certificate %s, valid until %s%s%s", subject, expiry,
		 cfg->tls_ca_file[0] ? "; client certificates required, CAs from " : "",
		 cfg->tls_ca_file[0] ? cfg->tls_ca_file : "");
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
	ERR_clear_error();
	ts->ctx = SSL_CTX_new(TLS_server_method());
	if (!ts->ctx) {
		snprintf(err, errlen, "TLS: cannot create a context: %s", tls_io_reason());
		goto fail;
	}
	tls_io_ctx_setup(ts->ctx);
	if (SSL_CTX_use_certificate_chain_file(ts->ctx, cfg->tls_cert_file) != 1) {
		snprintf(err, errlen, "TLS: tls_cert_file %s: %s", cfg->tls_cert_file, tls_io_reason());
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ts->ctx, cfg->tls_key_file, SSL_FILETYPE_PEM) != 1) {
		snprintf(err, errlen, "TLS: tls_key_file %s: %s", cfg->tls_key_file, tls_io_reason());
		goto fail;
	}
	if (SSL_CTX_check_private_key(ts->ctx) != 1) {
		snprintf(err, errlen, "TLS: tls_key_file %s does not match tls_cert_file %s: %s",
			 cfg->tls_key_file, cfg->tls_cert_file, tls_io_reason());
		goto fail;
	}
	if (cfg->tls_ca_file[0]) {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->tls_ca_file);
		if (!names || SSL_CTX_load_verify_locations(ts->ctx, cfg->tls_ca_file, NULL) != 1) {
			sk_X509_NAME_pop_free(names, X509_NAME_free);
			snprintf(err, errlen, "TLS: tls_ca_file %s: %s", cfg->tls_ca_file, tls_io_reason());
			goto fail;
		}
		SSL_CTX_set_client_CA_list(ts->ctx, names);
		SSL_CTX_set_verify(ts->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	describe(ts, cfg);
	*out = ts;
	return 0;
fail:
	tls_server_free(ts);
	return -1;
}

void tls_server_free(tls_server *ts)
{
	if (!ts)
		return;
	SSL_CTX_free(ts->ctx);
	emdb_free(ts);
}

const char *tls_server_describe(const tls_server *ts)
{
	return ts->describe;
}

SSL *tls_server_accept(tls_server *ts, int fd)
{
	SSL *ssl = SSL_new(ts->ctx);
	BIO *b = ssl ? tls_io_socket_bio(fd) : NULL;
	if (!b) {
		SSL_free(ssl);
		return NULL;
	}
	SSL_set_bio(ssl, b, b);
	SSL_set_accept_state(ssl);
	return ssl;
}
