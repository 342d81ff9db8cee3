/*
 * tls_pki.h - a small PKI for the TLS tests, made with OpenSSL's API in a
 * fresh temporary directory (P-256 keys, valid from an hour ago for a
 * day), so that no test depends on the openssl command or on files kept in
 * the tree.
 *
 * tls_pki_make(dir) writes NAME.pem (certificate) and NAME.key (private
 * key) for:
 *   ca         the CA the tests trust
 *   rogue      another CA, trusted by nobody
 *   srv        a server certificate for localhost and 127.0.0.1, by ca
 *   named      a server certificate for the name localhost only, by ca
 *   client     a client certificate (CN trainer-7), by ca
 *   rogue_srv  a server certificate for localhost and 127.0.0.1, by rogue
 * tls_pki_remove(dir) removes them and the directory.
 */
#ifndef EMDB_TESTS_TLS_PKI_H
#define EMDB_TESTS_TLS_PKI_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/pem.h>
#include <openssl/x509v3.h>

typedef struct tls_cred {
	EVP_PKEY *key;
	X509 *cert;
} tls_cred;

static inline void tls_pki_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	cr_assert_not_null(e, "extension %s", value);
	X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
}

/* A certificate for cn: a CA's when ca is NULL (self-signed), else one
 * that ca signs, with subjectAltName san (NULL for none). */
static inline tls_cred tls_pki_cred(const char *cn, const tls_cred *ca, const char *san)
{
	static long serial = 1;
	tls_cred c = { EVP_EC_gen("P-256"), X509_new() };
	cr_assert(c.key && c.cert, "cannot make a key or certificate");
	X509_set_version(c.cert, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(c.cert), serial++);
	X509_gmtime_adj(X509_getm_notBefore(c.cert), -3600);
	X509_gmtime_adj(X509_getm_notAfter(c.cert), 86400);
	X509_set_pubkey(c.cert, c.key);
	X509_NAME *name = X509_get_subject_name(c.cert);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509 *issuer = ca ? ca->cert : c.cert;
	X509_set_issuer_name(c.cert, X509_get_subject_name(issuer));
	if (!ca) {
		tls_pki_ext(c.cert, issuer, NID_basic_constraints, "critical,CA:TRUE");
		tls_pki_ext(c.cert, issuer, NID_key_usage, "critical,keyCertSign,cRLSign");
	} else if (san) {
		tls_pki_ext(c.cert, issuer, NID_subject_alt_name, san);
	}
	cr_assert(X509_sign(c.cert, ca ? ca->key : c.key, EVP_sha256()) > 0, "cannot sign %s", cn);
	return c;
}

/* dir/file, in one of eight rotating static buffers. */
static inline const char *tls_pki_path(const char *dir, const char *file)
{
	static char paths[8][128];
	static int next;
	char *p = paths[next++ % 8];
	snprintf(p, 128, "%s/%s", dir, file);
	return p;
}

/* Write c to dir/NAME.pem and dir/NAME.key, and free it. */
static inline void tls_pki_save(tls_cred *c, const char *dir, const char *name)
{
	char file[64];
	snprintf(file, sizeof(file), "%s.pem", name);
	FILE *f = fopen(tls_pki_path(dir, file), "w");
	cr_assert_not_null(f, "%s/%s", dir, file);
	cr_assert(PEM_write_X509(f, c->cert));
	fclose(f);
	snprintf(file, sizeof(file), "%s.key", name);
	f = fopen(tls_pki_path(dir, file), "w");
	cr_assert_not_null(f, "%s/%s", dir, file);
	cr_assert(PEM_write_PrivateKey(f, c->key, NULL, NULL, 0, NULL, NULL));
	fclose(f);
	X509_free(c->cert);
	EVP_PKEY_free(c->key);
}

static const char *const tls_pki_names[] = { "srv", "named", "client", "rogue_srv", "ca", "rogue" };

/* Make the directory (dir gets its name, 64 bytes) and the files above. */
static inline void tls_pki_make(char dir[64])
{
	strcpy(dir, "/tmp/emdb-tls-test-XXXXXX");
	cr_assert_not_null(mkdtemp(dir), "mkdtemp");
	tls_cred ca = tls_pki_cred("emdb test CA", NULL, NULL);
	tls_cred rogue = tls_pki_cred("some other CA", NULL, NULL);
	tls_cred leaf[] = {
		tls_pki_cred("localhost", &ca, "DNS:localhost,IP:127.0.0.1"),
		tls_pki_cred("localhost", &ca, "DNS:localhost"),
		tls_pki_cred("trainer-7", &ca, NULL),
		tls_pki_cred("localhost", &rogue, "DNS:localhost,IP:127.0.0.1"),
	};
	for (size_t i = 0; i < 4; i++)
		tls_pki_save(&leaf[i], dir, tls_pki_names[i]);
	tls_pki_save(&ca, dir, "ca");
	tls_pki_save(&rogue, dir, "rogue");
}

static inline void tls_pki_remove(const char *dir)
{
	char file[64];
	if (!dir[0])
		return;
	for (size_t i = 0; i < sizeof(tls_pki_names) / sizeof(tls_pki_names[0]); i++) {
		snprintf(file, sizeof(file), "%s.pem", tls_pki_names[i]);
		unlink(tls_pki_path(dir, file));
		snprintf(file, sizeof(file), "%s.key", tls_pki_names[i]);
		unlink(tls_pki_path(dir, file));
	}
	rmdir(dir);
}

#endif
