/*
 * net_tls.h - the certificate of emdb-bench --net tls: one self-signed
 * P-256 certificate for 127.0.0.1, made with OpenSSL's API in the bench's
 * temporary directory, which the server presents and the client trusts.
 */
#ifndef EMDB_BENCH_NET_TLS_H
#define EMDB_BENCH_NET_TLS_H

/* Write dir/bench-tls.pem and dir/bench-tls.key.  Exits the process on
 * failure. */
void net_tls_make_cert(const char *dir);

#endif
