/*
 * net_tls.c - the bench's TLS certificate (net_tls.h).
 *
 * Design
 *   Self-signed and marked as a CA, so that the one file is both what
 *   emdb-server presents (tls_cert_file) and what the client trusts
 *   (?ca=); its subjectAltName is the address the bench dials, so the
 *   client's name check passes as it would in production.  A day of
 *   validity: the file lives as long as the run.
 */
#include "tools/bench/net_tls.h"

#include <stdio.h>
#include <string.h>

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "tools/bench/harness.h"
#include "tools/bench/net_server.h"

static void add_ext(X509 *x, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!e || !X509_add_ext(x, e, -1))
		harness_die("TLS certificate: extension %s", value);
	X509_EXTENSION_free(e);
}

static void write_pem(const char *dir, const char *file, X509 *cert, EVP_PKEY *key)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (strcmp(dir, net_servers_dir()) == 0) /* removed at exit with it */
		net_servers_file(file);
	FILE *f = fopen(path, "w");
	if (!f || !(cert ? PEM_write_X509(f, cert) : PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL)))
		harness_die("cannot write %s", path);
	fclose(f);
}

void net_tls_make_cert(const char *dir)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	if (!key || !x)
		harness_die("TLS certificate: out of memory");
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), 86400);
	X509_set_pubkey(x, key);
	X509_NAME *name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"emdb-bench", -1, -1, 0);
	X509_set_issuer_name(x, name);
	add_ext(x, NID_basic_constraints, "critical,CA:TRUE");
	add_ext(x, NID_subject_alt_name, "IP:127.0.0.1");
	if (X509_sign(x, key, EVP_sha256()) <= 0)
		harness_die("TLS certificate: cannot sign");
	write_pem(dir, "bench-tls.pem", x, NULL);
	write_pem(dir, "bench-tls.key", NULL, key);
	X509_free(x);
	EVP_PKEY_free(key);
}
