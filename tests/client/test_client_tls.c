/*
 * test_client_tls.c - TLS between the client library and emdb-server, as a
 * user sets it up: a private CA signs the server's certificate, the server
 * gets tls_cert_file and tls_key_file, clients connect to tls://HOST:PORT
 * with ?ca= naming that CA.
 *
 * What is checked: every byte of big pipelined Pulls and Pushes (and a
 * Push-and-Update) arrives intact through TLS (compared with the same
 * operations on an in-process engine), with the server's output buffer limit small enough that it
 * stops reading and must resume with input that OpenSSL already holds; a
 * connection whose reply filled the socket, once the client has read it
 * all, is answered the request OpenSSL read ahead and, after that, the
 * next one it sends (the server still watches its socket); the Unix
 * socket of a TLS server stays plain; a certificate from an untrusted
 * CA, or issued to another name, fails the connect with AUTH; a plain
 * client on the TLS port and a TLS client on a plain port fail promptly
 * while the server goes on serving; with tls_ca_file only clients with a
 * certificate from that CA get in; SIGHUP rotates the certificate for new
 * connections (and a broken new key keeps the old one), and so does a
 * CONFIG SET of the certificate and its key together; a TCP client that
 * never starts its handshake is closed at the handshake timeout; a server with a
 * missing or mismatched key refuses to start and says why; busy polling on
 * both sides answers as the engine does and keeps the client's deadline.
 *
 * The certificates are made for each test by tests/lib/tls_pki.h.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/client.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include <openssl/ssl.h>

#include "protocol/proto.h"
#include "tests/lib/client_server.h"
#include "tests/lib/tls_pki.h"

#define OK(call) cr_assert_eq((call), EMDB_OK, "%s: %s", #call, emdb_client_last_error())

extern char **environ;

static test_server srv;
static char pki[64]; /* the certificates' directory (tests/lib/tls_pki.h) */

/* A server with the certificate NAME.pem and its key, and extra flags. */
static void start_tls(const char *name, const char *const *extra)
{
	const char *argv[24] = { "--tls-cert-file", NULL, "--tls-key-file", NULL };
	char cert[64], key[64];
	snprintf(cert, sizeof(cert), "%s.pem", name);
	snprintf(key, sizeof(key), "%s.key", name);
	argv[1] = tls_pki_path(pki, cert);
	argv[3] = tls_pki_path(pki, key);
	int n = 4;
	for (int i = 0; extra && extra[i] && n < 22; i++)
		argv[n++] = extra[i];
	test_server_start(&srv, argv);
}

static void setup(void)
{
	tls_pki_make(pki);
}

static void teardown(void)
{
	test_server_stop(&srv);
	unlink(tls_pki_path(pki, "bad.log"));
	unlink(tls_pki_path(pki, "live.pem"));
	unlink(tls_pki_path(pki, "live.key"));
	tls_pki_remove(pki);
}

TestSuite(client_tls, .init = setup, .fini = teardown, .timeout = 120);

static int try_connect(const char *uri, emdb_client **c)
{
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.timeout_ms = 20000;
	o.connect_timeout_ms = 10000;
	return emdb_client_connect(uri, &o, c);
}

static emdb_client *connect_ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static emdb_client *connect_ok(const char *fmt, ...)
{
	char uri[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(uri, sizeof(uri), fmt, ap);
	va_end(ap);
	emdb_client *c = NULL;
	int rc = try_connect(uri, &c);
	cr_assert_eq(rc, EMDB_OK, "%s: %s (server log: %s)", uri, emdb_client_last_error(),
		     test_server_log_tail(&srv));
	return c;
}

static uint32_t create_table(emdb_client *c, uint32_t dim)
{
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	uint32_t id;
	strcpy(cfg.name, "emb");
	cfg.dim = dim;
	cfg.init = (emdb_init){ EMDB_INIT_UNIFORM, -1, 1 };
	cfg.seed = 11;
	OK(emdb_client_table_create(c, &cfg, &id));
	return id;
}

/* ---- data through TLS ----------------------------------------------- */

#define DIM 64u
#define BATCH 4096u
#define INFLIGHT 24u

/* Pushes of BATCH IDs (1 MiB of gradients each, many records), an Update,
 * then INFLIGHT pipelined Pulls of 1 MiB each against an output buffer
 * limit of 256 KiB: the server pauses reading this connection and must
 * pick up again from what OpenSSL holds.  Every float must equal the
 * in-process engine's for the same calls. */
static void train_and_compare(emdb_client *net)
{
	emdb_client *mem;
	OK(emdb_client_connect("mem://", NULL, &mem));
	uint32_t tn = create_table(net, DIM), tm = create_table(mem, DIM);

	uint64_t *ids = emdb_malloc(BATCH * INFLIGHT * sizeof(uint64_t));
	float *g = emdb_malloc(BATCH * DIM * sizeof(float));
	float *a = emdb_malloc((size_t)BATCH * INFLIGHT * DIM * sizeof(float));
	float *b = emdb_malloc((size_t)BATCH * INFLIGHT * DIM * sizeof(float));
	cr_assert(ids && g && a && b);
	for (size_t i = 0; i < BATCH * INFLIGHT; i++)
		ids[i] = (i * 2654435761u) % 50000u + (i & 1) * (1ull << 40);
	for (size_t i = 0; i < BATCH * DIM; i++)
		g[i] = (float)((int)(i % 97) - 48) / 1024.0f;

	for (uint32_t step = 0; step < 3; step++) {
		OK(emdb_client_push(net, tn, ids + step * BATCH, BATCH, DIM, g));
		OK(emdb_client_push(mem, tm, ids + step * BATCH, BATCH, DIM, g));
		OK(emdb_client_update(net, tn, NULL));
		OK(emdb_client_update(mem, tm, NULL));
	}
	/* A Push-and-Update through TLS equals a Push then an Update. */
	uint64_t rows_net = 0, rows_mem = 1;
	OK(emdb_client_push_update(net, tn, ids + 3 * BATCH, BATCH, DIM, g, &rows_net));
	OK(emdb_client_push(mem, tm, ids + 3 * BATCH, BATCH, DIM, g));
	OK(emdb_client_update(mem, tm, &rows_mem));
	cr_assert_eq(rows_net, rows_mem);
	emdb_future *f[INFLIGHT];
	for (uint32_t k = 0; k < INFLIGHT; k++) {
		f[k] = emdb_client_pull_async(net, tn, ids + k * BATCH, BATCH, DIM, a + (size_t)k * BATCH * DIM);
		cr_assert_not_null(f[k]);
	}
	for (uint32_t k = 0; k < INFLIGHT; k++) {
		cr_assert_eq(emdb_future_wait(f[k], -1), EMDB_OK, "pull %u: %s", k, emdb_client_last_error());
		emdb_future_free(f[k]);
	}
	OK(emdb_client_pull(mem, tm, ids, BATCH * INFLIGHT, DIM, b));
	cr_assert(memcmp(a, b, (size_t)BATCH * INFLIGHT * DIM * sizeof(float)) == 0,
		  "the rows pulled through TLS differ from the engine's");

	emdb_free(ids);
	emdb_free(g);
	emdb_free(a);
	emdb_free(b);
	emdb_client_close(mem);
}

/* The server runs the I/O backend asked for: with uring, INFO says so, or,
 * where io_uring cannot be set up here, the log says it fell back. */
static void check_backend(emdb_client *c, const char *backend)
{
	char *info;
	OK(emdb_client_info(c, "server", &info));
	char want[64];
	snprintf(want, sizeof(want), "io_backend: %s", backend);
	if (!strstr(info, want))
		cr_assert(!strcmp(backend, "uring") && strstr(test_server_log_tail(&srv), "using libevent"),
			  "%s", info);
	emdb_free(info);
}

static void rows_cross_intact_on(const char *backend)
{
	const char *const extra[] = { "--output-buffer-limit", "256K", "--io-backend", backend, NULL };
	start_tls("srv", extra);
	emdb_client *c = connect_ok("tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "ca.pem"));
	check_backend(c, backend);
	train_and_compare(c);
	emdb_client_close(c);

	/* The DNS name of the certificate works as well as its address, and
	 * the options name the CA as well as the URI does. */
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.tls_ca_file = tls_pki_path(pki, "ca.pem");
	char uri[128];
	snprintf(uri, sizeof(uri), "tls://localhost:%u", srv.port);
	OK(emdb_client_connect(uri, &o, &c));
	uint32_t t;
	OK(emdb_client_table_find(c, "emb", &t));
	emdb_client_close(c);
}

Test(client_tls, rows_cross_intact)
{
	rows_cross_intact_on("libevent");
}

Test(client_tls, rows_cross_intact_uring)
{
	rows_cross_intact_on("uring");
}

/* Hundreds of small requests in flight: the client's records (one per
 * request) arrive many at a time and OpenSSL reads them ahead, and the
 * server, pausing every few replies (16 KiB output limit), stops with
 * requests that OpenSSL has already read off the socket.  It must come
 * back for them by itself: the socket will not say they are there, and
 * the client sends nothing more until they are answered. */
#define SMALL_N 32u
#define SMALL_REQS 600u

static void small_requests_on(const char *backend)
{
	const char *const extra[] = { "--output-buffer-limit", "16K", "--io-backend", backend, NULL };
	start_tls("srv", extra);
	emdb_client *c = connect_ok("tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "ca.pem"));
	check_backend(c, backend);
	emdb_client *mem;
	OK(emdb_client_connect("mem://", NULL, &mem));
	uint32_t tn = create_table(c, DIM), tm = create_table(mem, DIM);
	uint64_t *ids = emdb_malloc(SMALL_N * SMALL_REQS * sizeof(uint64_t));
	float *a = emdb_malloc((size_t)SMALL_N * SMALL_REQS * DIM * sizeof(float));
	float *b = emdb_malloc((size_t)SMALL_N * SMALL_REQS * DIM * sizeof(float));
	emdb_future **f = emdb_malloc(SMALL_REQS * sizeof(*f));
	cr_assert(ids && a && b && f);
	for (size_t i = 0; i < SMALL_N * SMALL_REQS; i++)
		ids[i] = i * 7919u;
	for (int round = 0; round < 3; round++) {
		for (uint32_t k = 0; k < SMALL_REQS; k++)
			f[k] = emdb_client_pull_async(c, tn, ids + k * SMALL_N, SMALL_N, DIM,
						      a + (size_t)k * SMALL_N * DIM);
		for (uint32_t k = 0; k < SMALL_REQS; k++) {
			cr_assert_eq(emdb_future_wait(f[k], 15000), EMDB_OK, "round %d, pull %u: %s", round, k,
				     emdb_client_last_error());
			emdb_future_free(f[k]);
		}
	}
	OK(emdb_client_pull(mem, tm, ids, SMALL_N * SMALL_REQS, DIM, b));
	cr_assert(memcmp(a, b, (size_t)SMALL_N * SMALL_REQS * DIM * sizeof(float)) == 0);
	emdb_free(f);
	emdb_free(ids);
	emdb_free(a);
	emdb_free(b);
	emdb_client_close(mem);
	emdb_client_close(c);
}

Test(client_tls, small_pipelined_requests_all_answered)
{
	small_requests_on("libevent");
}

Test(client_tls, small_pipelined_requests_all_answered_uring)
{
	small_requests_on("uring");
}

/* ---- reading resumed after a full socket ---------------------------- */

/* A TLS client of the test's own (OpenSSL over a blocking socket whose
 * every wait ends after 20 s), so that the test, not a receiving thread,
 * decides when replies are read. */
typedef struct raw_tls {
	int fd;
	SSL_CTX *ctx;
	SSL *ssl;
} raw_tls;

static void raw_write(raw_tls *r, const void *p, size_t len)
{
	for (size_t off = 0, w = 0; off < len; off += w)
		cr_assert_eq(SSL_write_ex(r->ssl, (const uint8_t *)p + off, len - off, &w), 1,
			     "TLS write failed");
}

/* Exactly len bytes; false when the server sent none for 20 s (or the
 * connection ended). */
static bool raw_read(raw_tls *r, void *p, size_t len)
{
	for (size_t off = 0, got = 0; off < len; off += got)
		if (SSL_read_ex(r->ssl, (uint8_t *)p + off, len - off, &got) != 1)
			return false;
	return true;
}

/* The next frame: its header into *h, its body (at most cap bytes) into
 * body.  False as raw_read. */
static bool raw_frame(raw_tls *r, proto_hdr *h, void *body, size_t cap)
{
	uint8_t hb[PROTO_HDR_SIZE];
	if (!raw_read(r, hb, sizeof(hb)))
		return false;
	cr_assert_eq(proto_hdr_decode(hb, sizeof(hb), h, UINT32_MAX), 0);
	cr_assert_leq(h->body_len, cap);
	return raw_read(r, body, h->body_len);
}

/* Connected to srv over TLS, HELLO done.  The receive buffer is fixed
 * small before connecting, so a reply the test does not read fills the
 * socket. */
static void raw_open(raw_tls *r)
{
	r->fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(r->fd, 0);
	int rcvbuf = 64 << 10;
	struct timeval tv = { 20, 0 };
	cr_assert_eq(setsockopt(r->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
	cr_assert_eq(setsockopt(r->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	cr_assert_eq(setsockopt(r->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)srv.port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(connect(r->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	r->ctx = SSL_CTX_new(TLS_client_method());
	cr_assert_not_null(r->ctx);
	cr_assert_eq(SSL_CTX_load_verify_locations(r->ctx, tls_pki_path(pki, "ca.pem"), NULL), 1);
	SSL_CTX_set_verify(r->ctx, SSL_VERIFY_PEER, NULL);
	r->ssl = SSL_new(r->ctx);
	cr_assert_not_null(r->ssl);
	SSL_set_fd(r->ssl, r->fd);
	cr_assert_eq(SSL_connect(r->ssl), 1, "TLS handshake failed");

	uint8_t buf[256];
	size_t len;
	proto_hello_req hello = { PROTO_VERSION_MIN, PROTO_VERSION_MAX, proto_cstr("raw") };
	cr_assert_eq(proto_hello_req_encode(buf, sizeof(buf), 1, &hello, &len), EMDB_OK);
	raw_write(r, buf, len);
	proto_hdr h;
	cr_assert(raw_frame(r, &h, buf, sizeof(buf)), "no answer to HELLO");
	cr_assert_eq(h.status, EMDB_OK);
}

static void raw_close(raw_tls *r)
{
	SSL_free(r->ssl);
	SSL_CTX_free(r->ctx);
	close(r->fd);
}

#define BIG_IDS 16384u
#define BIG_DIM 256u /* BIG_IDS rows: a 16 MiB reply, more than sockets hold */

/* Send Pull request `id` of ids[n] from table t (dim BIG_DIM). */
static void raw_pull(raw_tls *r, uint64_t id, uint32_t t, const uint64_t *ids, uint32_t n)
{
	proto_pull_req m = { .table = t, .dim = BIG_DIM, .n_ids = n, .ids = ids };
	size_t len = 0;
	cr_assert_eq(proto_pull_req_encode(NULL, 0, id, &m, &len), EMDB_ERR_LIMIT);
	uint8_t *buf = emdb_malloc(len);
	cr_assert_not_null(buf);
	cr_assert_eq(proto_pull_req_encode(buf, len, id, &m, &len), EMDB_OK);
	raw_write(r, buf, len);
	emdb_free(buf);
}

/* Read Pull reply `id` of n rows and check them against what adm pulls
 * of the same ids: the rows a user asked for, not merely an answer. */
static void raw_check_pull(raw_tls *r, emdb_client *adm, uint64_t id, uint32_t t, const uint64_t *ids,
			   uint32_t n, const char *what)
{
	size_t bytes = (size_t)n * BIG_DIM * sizeof(float);
	uint8_t *body = emdb_malloc(PROTO_PULL_RESP_VECS_OFF + bytes);
	float *want = emdb_malloc(bytes);
	cr_assert(body && want);
	proto_hdr h;
	cr_assert(raw_frame(r, &h, body, PROTO_PULL_RESP_VECS_OFF + bytes),
		  "%s: no answer within 20 s (server log: %s)", what, test_server_log_tail(&srv));
	cr_assert_eq(h.id, id, "%s", what);
	cr_assert_eq(h.status, EMDB_OK, "%s", what);
	cr_assert_eq(h.body_len, PROTO_PULL_RESP_VECS_OFF + bytes, "%s", what);
	OK(emdb_client_pull(adm, t, ids, n, BIG_DIM, want));
	cr_assert(memcmp(body + PROTO_PULL_RESP_VECS_OFF, want, bytes) == 0, "%s: rows differ", what);
	emdb_free(body);
	emdb_free(want);
}

/* The server stops reading a connection whose replies pass its output
 * buffer limit, and sends until the socket is full; once the client has
 * read everything, the server picks up where it stopped, with the
 * request OpenSSL read ahead, and then must keep watching the socket for
 * the next one.  A reply of 16 MiB that the client does not read fills
 * the socket for sure; with one I/O thread, INFO answers only after the
 * server's attempt to send it ended, so no timing decides which path the
 * server takes. */
static void reading_resumes_on(const char *backend)
{
	const char *const extra[] = { "--output-buffer-limit", "16K", "--io-backend", backend,
				      "--io-threads", "1", NULL };
	start_tls("srv", extra);
	emdb_client *adm = connect_ok("%s", srv.unix_uri);
	check_backend(adm, backend);
	uint32_t t = create_table(adm, BIG_DIM);
	uint64_t *ids = emdb_malloc(BIG_IDS * sizeof(uint64_t));
	cr_assert_not_null(ids);
	for (uint32_t i = 0; i < BIG_IDS; i++)
		ids[i] = (uint64_t)i * 7919u;
	const uint64_t second[] = { 5 }, third[] = { 77 };

	raw_tls r;
	raw_open(&r);
	raw_pull(&r, 2, t, ids, BIG_IDS);
	raw_pull(&r, 3, t, second, 1);
	bool paused = false;
	for (int i = 0; i < 400 && !paused; i++) {
		char *info;
		OK(emdb_client_info(adm, "clients", &info));
		paused = strstr(info, "connections_paused: 1\n") != NULL;
		emdb_free(info);
		if (!paused)
			test_sleep_ms(50);
	}
	cr_assert(paused, "the server never paused the connection (server log: %s)", test_server_log_tail(&srv));

	raw_check_pull(&r, adm, 2, t, ids, BIG_IDS, "the big Pull");
	raw_check_pull(&r, adm, 3, t, second, 1, "the Pull sent behind it");
	/* The server has read all it was sent: this request reaches it only
	 * if it still watches the socket. */
	raw_pull(&r, 4, t, third, 1);
	raw_check_pull(&r, adm, 4, t, third, 1, "the Pull sent after the pause");

	raw_close(&r);
	emdb_free(ids);
	emdb_client_close(adm);
}

Test(client_tls, reading_resumes_after_a_full_socket)
{
	reading_resumes_on("libevent");
}

Test(client_tls, reading_resumes_after_a_full_socket_uring)
{
	reading_resumes_on("uring");
}

Test(client_tls, unix_socket_stays_plain)
{
	start_tls("srv", NULL);
	emdb_client *c = connect_ok("%s", srv.unix_uri);
	uint32_t t = create_table(c, 8);
	emdb_client_close(c);
	c = connect_ok("tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "ca.pem"));
	uint32_t found;
	OK(emdb_client_table_find(c, "emb", &found));
	cr_assert_eq(found, t);
	emdb_client_close(c);
}

/* ---- whom the client trusts ----------------------------------------- */

Test(client_tls, untrusted_or_misnamed_certificate_is_refused)
{
	start_tls("srv", NULL);
	char uri[256];
	emdb_client *c = NULL;

	/* No ?ca=: the system's CAs do not know ours. */
	snprintf(uri, sizeof(uri), "tls://127.0.0.1:%u", srv.port);
	cr_assert_eq(try_connect(uri, &c), EMDB_ERR_AUTH, "%s", emdb_client_last_error());
	cr_assert_null(c);
	cr_assert(strstr(emdb_client_last_error(), "certificate verify failed"), "%s",
		  emdb_client_last_error());

	/* Another CA. */
	snprintf(uri, sizeof(uri), "tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "rogue.pem"));
	cr_assert_eq(try_connect(uri, &c), EMDB_ERR_AUTH, "%s", emdb_client_last_error());
	test_server_stop(&srv);

	/* Our CA, but the certificate names localhost only: 127.0.0.1 is not
	 * its name, localhost is. */
	start_tls("named", NULL);
	snprintf(uri, sizeof(uri), "tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "ca.pem"));
	cr_assert_eq(try_connect(uri, &c), EMDB_ERR_AUTH, "%s", emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "mismatch"), "%s", emdb_client_last_error());
	c = connect_ok("tls://localhost:%u?ca=%s", srv.port, tls_pki_path(pki, "ca.pem"));
	emdb_client_close(c);

	/* A server whose certificate a rogue CA signed. */
	test_server_stop(&srv);
	start_tls("rogue_srv", NULL);
	snprintf(uri, sizeof(uri), "tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "ca.pem"));
	cr_assert_eq(try_connect(uri, &c), EMDB_ERR_AUTH, "%s", emdb_client_last_error());
}

Test(client_tls, bad_client_settings_are_invalid)
{
	emdb_client *c = NULL;
	char uri[256];
	snprintf(uri, sizeof(uri), "tls://127.0.0.1:1?ca=%s/nonexistent.pem", pki);
	cr_assert_eq(try_connect(uri, &c), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_client_last_error(), "nonexistent.pem"), "%s", emdb_client_last_error());
	snprintf(uri, sizeof(uri), "tls://127.0.0.1:1?cert=%s", tls_pki_path(pki, "client.pem"));
	cr_assert_eq(try_connect(uri, &c), EMDB_ERR_INVALID);
	cr_assert_eq(try_connect("tcp://127.0.0.1:1?ca=/x.pem", &c), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_client_last_error(), "tls://"), "%s", emdb_client_last_error());
}

/* ---- mixing TLS and plain ------------------------------------------- */

Test(client_tls, plain_and_tls_do_not_mix)
{
	start_tls("srv", NULL);
	char uri[256];
	emdb_client *c = NULL;

	/* A plain client on the TLS port: the server drops it, the client
	 * fails, nobody hangs. */
	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", srv.port);
	int rc = try_connect(uri, &c);
	cr_assert(rc == EMDB_ERR_CLOSED || rc == EMDB_ERR_PROTOCOL, "%d: %s", rc, emdb_client_last_error());
	cr_assert_null(c);

	/* The server goes on serving TLS clients. */
	c = connect_ok("tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "ca.pem"));
	OK(emdb_client_ping(c));
	emdb_client_close(c);
	cr_assert(strstr(test_server_log_tail(&srv), "wrong version number"), "%s", test_server_log_tail(&srv));
	test_server_stop(&srv);

	/* A TLS client on a plain server. */
	test_server_start(&srv, NULL);
	snprintf(uri, sizeof(uri), "tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "ca.pem"));
	rc = try_connect(uri, &c);
	cr_assert(rc == EMDB_ERR_PROTOCOL || rc == EMDB_ERR_CLOSED, "%d: %s", rc, emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "TLS handshake failed"), "%s", emdb_client_last_error());
}

/* A TCP client that never starts its TLS handshake holds its slot only
 * until handshake_timeout_ms: the TIMEOUT reply cannot reach it (there is
 * no session to carry it), so the server closes at once instead of
 * waiting out the two seconds of grace a reply gets to drain.  The bound
 * below (1.5 s for a 100 ms deadline) is far from both. */
static void silent_tcp_client_closed(const char *backend)
{
	const char *const extra[] = { "--handshake-timeout-ms", "100", "--io-backend", backend, NULL };
	start_tls("srv", extra);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)srv.port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 10000), 1, "not closed within 10 s");
	char b;
	cr_assert_leq(recv(fd, &b, 1, 0), 0, "the server sent bytes to a client with no TLS session");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert_lt(s, 1.5, "closed after %.2f s: the reply's grace was waited out", s);
	close(fd);
	emdb_client *c = connect_ok("tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "ca.pem"));
	char *info;
	OK(emdb_client_info(c, "clients", &info));
	cr_assert(strstr(info, "handshake_timeouts: 1"), "%s", info);
	emdb_free(info);
	emdb_client_close(c);
}

Test(client_tls, silent_tcp_client_closed_at_the_handshake_timeout)
{
	silent_tcp_client_closed("libevent");
}

Test(client_tls, silent_tcp_client_closed_at_the_handshake_timeout_uring)
{
	silent_tcp_client_closed("uring");
}

/* ---- client certificates -------------------------------------------- */

Test(client_tls, client_certificate_required)
{
	const char *extra[] = { "--tls-ca-file", tls_pki_path(pki, "ca.pem"), NULL };
	start_tls("srv", extra);
	char uri[512];
	emdb_client *c = NULL;

	/* Without a certificate: refused (in TLS 1.3 the server says so
	 * after the client's side of the handshake, so it surfaces at HELLO). */
	snprintf(uri, sizeof(uri), "tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "ca.pem"));
	int rc = try_connect(uri, &c);
	cr_assert(rc == EMDB_ERR_AUTH || rc == EMDB_ERR_CLOSED || rc == EMDB_ERR_PROTOCOL, "%d: %s", rc,
		  emdb_client_last_error());
	cr_assert_null(c);
	cr_assert(strstr(emdb_client_last_error(), "certificate"), "%s", emdb_client_last_error());

	/* With a certificate from another CA: refused too. */
	snprintf(uri, sizeof(uri), "tls://127.0.0.1:%u?ca=%s&cert=%s&key=%s", srv.port, tls_pki_path(pki, "ca.pem"),
		 tls_pki_path(pki, "rogue_srv.pem"), tls_pki_path(pki, "rogue_srv.key"));
	rc = try_connect(uri, &c);
	cr_assert_neq(rc, EMDB_OK);
	cr_assert_null(c);

	/* With ours: in, and it works. */
	c = connect_ok("tls://127.0.0.1:%u?ca=%s&cert=%s&key=%s", srv.port, tls_pki_path(pki, "ca.pem"),
		       tls_pki_path(pki, "client.pem"), tls_pki_path(pki, "client.key"));
	create_table(c, 4);
	emdb_client_close(c);
	/* The Unix socket asks for no certificate. */
	c = connect_ok("%s", srv.unix_uri);
	OK(emdb_client_ping(c));
	emdb_client_close(c);
}

/* ---- rotating the certificate ---------------------------------------- */

static void copy_file(const char *from, const char *to)
{
	char buf[8192];
	FILE *in = fopen(from, "r"), *out = fopen(to, "w");
	cr_assert(in && out, "copy %s to %s", from, to);
	size_t k;
	while ((k = fread(buf, 1, sizeof(buf), in)) > 0)
		cr_assert_eq(fwrite(buf, 1, k, out), k);
	fclose(in);
	fclose(out);
}

/* Connect to uri until it works (the reload is asynchronous to kill());
 * fails after 10 s. */
static emdb_client *connect_eventually(const char *uri)
{
	emdb_client *c = NULL;
	for (int i = 0; i < 200; i++) {
		if (try_connect(uri, &c) == EMDB_OK)
			return c;
		test_sleep_ms(50);
	}
	cr_assert_fail("%s never worked: %s (server log: %s)", uri, emdb_client_last_error(),
		       test_server_log_tail(&srv));
	return NULL;
}

/* Files replaced in place, then SIGHUP: new connections get the new
 * certificate, open ones carry on, INFO counts the reload; a reload with a
 * broken key keeps the certificate in use. */
Test(client_tls, sighup_rotates_the_certificate)
{
	copy_file(tls_pki_path(pki, "srv.pem"), tls_pki_path(pki, "live.pem"));
	copy_file(tls_pki_path(pki, "srv.key"), tls_pki_path(pki, "live.key"));
	start_tls("live", NULL);
	char ours[256], theirs[256];
	snprintf(ours, sizeof(ours), "tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "ca.pem"));
	snprintf(theirs, sizeof(theirs), "tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "rogue.pem"));
	emdb_client *old = connect_ok("%s", ours);

	copy_file(tls_pki_path(pki, "rogue_srv.pem"), tls_pki_path(pki, "live.pem"));
	copy_file(tls_pki_path(pki, "rogue_srv.key"), tls_pki_path(pki, "live.key"));
	cr_assert_eq(kill(srv.pid, SIGHUP), 0);
	emdb_client *c = connect_eventually(theirs);
	OK(emdb_client_ping(old)); /* made before the reload: untouched */
	emdb_client *no = NULL;
	cr_assert_eq(try_connect(ours, &no), EMDB_ERR_AUTH, "%s", emdb_client_last_error());
	char *info;
	OK(emdb_client_info(c, "server", &info));
	cr_assert(strstr(info, "tls_reloads: 1"), "%s", info);
	cr_assert(strstr(info, "tls: certificate /CN=localhost"), "%s", info);
	emdb_free(info);

	/* A key that does not parse: the reload fails, the log says so, and
	 * the certificate in use stays. */
	FILE *f = fopen(tls_pki_path(pki, "live.key"), "w");
	cr_assert_not_null(f);
	fputs("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n", f);
	fclose(f);
	cr_assert_eq(kill(srv.pid, SIGHUP), 0);
	for (int i = 0; i < 200 && !strstr(test_server_log_tail(&srv), "TLS reload failed"); i++)
		test_sleep_ms(50);
	cr_assert(strstr(test_server_log_tail(&srv), "TLS reload failed"), "%s", test_server_log_tail(&srv));
	emdb_client *again = connect_ok("%s", theirs);
	emdb_client_close(again);
	emdb_client_close(c);
	emdb_client_close(old);
	unlink(tls_pki_path(pki, "live.pem"));
	unlink(tls_pki_path(pki, "live.key"));
}

/* CONFIG SET of the certificate and its key together, from an admin
 * client: new connections get the new certificate, open ones carry on,
 * CONFIG GET shows the new paths.  A certificate set without its key does
 * not match the key in use and changes nothing; TLS cannot be turned off. */
Test(client_tls, config_set_rotates_the_certificate)
{
	start_tls("srv", NULL);
	char ours[256], theirs[256];
	snprintf(ours, sizeof(ours), "tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "ca.pem"));
	snprintf(theirs, sizeof(theirs), "tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "rogue.pem"));
	emdb_client *admin = connect_ok("%s", ours);

	char cert_path[128], key_path[128];
	snprintf(cert_path, sizeof(cert_path), "%s", tls_pki_path(pki, "rogue_srv.pem"));
	snprintf(key_path, sizeof(key_path), "%s", tls_pki_path(pki, "rogue_srv.key"));
	const char *keys[] = { "tls_cert_file", "tls_key_file" };
	const char *vals[] = { cert_path, key_path };
	int rc = emdb_client_config_set(admin, keys[0], vals[0]);
	cr_assert_eq(rc, EMDB_ERR_INVALID, "a certificate without its key was taken");
	emdb_client *still = connect_ok("%s", ours);
	emdb_client_close(still);

	OK(emdb_client_config_set_many(admin, 2, keys, vals));
	emdb_client *c = connect_ok("%s", theirs);
	emdb_client *no = NULL;
	cr_assert_eq(try_connect(ours, &no), EMDB_ERR_AUTH, "%s", emdb_client_last_error());
	OK(emdb_client_ping(admin)); /* made before the change: untouched */
	emdb_client_kv *kv;
	size_t n;
	OK(emdb_client_config_get(c, "tls_cert_file", &kv, &n));
	cr_assert_eq(n, 1);
	cr_assert_str_eq(kv[0].value, vals[0]);
	emdb_free(kv);
	char *info;
	OK(emdb_client_info(c, "server", &info));
	cr_assert(strstr(info, "tls_reloads: 1"), "%s", info);
	emdb_free(info);

	const char *empty[] = { "", "" };
	rc = emdb_client_config_set_many(admin, 2, keys, empty);
	cr_assert_eq(rc, EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_client_last_error(), "cannot be turned off"), "%s", emdb_client_last_error());
	emdb_client *after = connect_ok("%s", theirs);
	emdb_client_close(after);
	emdb_client_close(c);
	emdb_client_close(admin);
}

/* ---- the server's own settings -------------------------------------- */

/* Run emdb-server with args until it exits; returns its exit status and
 * leaves its log (stderr) in log. */
static int run_server(const char *const *args, const char *log)
{
#ifndef EMDB_SERVER_BIN
	(void)args, (void)log;
	cr_skip_test("emdb-server is not part of this build");
	return 0;
#else
	const char *argv[16] = { server_bin(), "--port", "0", "--unix-socket", "" };
	int n = 5;
	for (int i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	cr_assert_eq(posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	int st;
	for (int i = 0; i < 300; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		test_sleep_ms(100);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	cr_assert_fail("emdb-server with a bad TLS setting did not exit");
	return 0;
#endif
}

Test(client_tls, bad_server_settings_stop_the_start)
{
	char log[128], text[4096];
	snprintf(log, sizeof(log), "%s/bad.log", pki);
	struct {
		const char *args[8];
		const char *says;
	} cases[] = {
		{ { "--tls-cert-file", tls_pki_path(pki, "srv.pem"), NULL }, "tls_key_file" },
		{ { "--tls-cert-file", tls_pki_path(pki, "missing.pem"), "--tls-key-file", tls_pki_path(pki, "srv.key"), NULL },
		  "missing.pem" },
		{ { "--tls-cert-file", tls_pki_path(pki, "srv.pem"), "--tls-key-file", tls_pki_path(pki, "client.key"), NULL },
		  "mismatch" },
		{ { "--tls-cert-file", tls_pki_path(pki, "srv.pem"), "--tls-key-file", tls_pki_path(pki, "srv.key"),
		    "--tls-ca-file", tls_pki_path(pki, "missing-ca.pem"), NULL },
		  "missing-ca.pem" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int st = run_server(cases[i].args, log);
		cr_assert_neq(st, 0, "case %zu: the server started", i);
		FILE *f = fopen(log, "r");
		cr_assert_not_null(f);
		size_t k = fread(text, 1, sizeof(text) - 1, f);
		text[k] = 0;
		fclose(f);
		cr_assert(strstr(text, cases[i].says), "case %zu: the log does not name %s: %s", i, cases[i].says,
			  text);
	}
	unlink(log);
}

/* Busy polling through TLS: the server polls (busy_poll_us) and so does
 * the client (emdb_client_options.busy_poll_us, which over TLS polls the
 * socket, OpenSSL's buffer included); synchronous Lookups, one at a time,
 * answer what the engine answers, and the client's deadline still holds
 * while the server is stopped. */
Test(client_tls, busy_polling_on_both_sides)
{
	const char *const extra[] = { "--busy-poll-us", "1000", NULL };
	start_tls("srv", extra);
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.busy_poll_us = 1000;
	o.timeout_ms = 20000;
	char uri[512];
	snprintf(uri, sizeof(uri), "tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "ca.pem"));
	emdb_client *c, *mem;
	OK(emdb_client_connect(uri, &o, &c));
	OK(emdb_client_connect("mem://", NULL, &mem));
	uint32_t tn = create_table(c, DIM), tm = create_table(mem, DIM);
	enum { N = 64 };
	uint64_t ids[N];
	float a[DIM], b[DIM], rows[N * DIM];
	for (uint64_t i = 0; i < N; i++)
		ids[i] = 100 + 13 * i;
	OK(emdb_client_pull(c, tn, ids, N, DIM, rows));
	OK(emdb_client_pull(mem, tm, ids, N, DIM, rows));
	for (int i = 0; i < N; i++) {
		OK(emdb_client_lookup(c, tn, &ids[i], 1, DIM, a, NULL));
		OK(emdb_client_lookup(mem, tm, &ids[i], 1, DIM, b, NULL));
		cr_assert(memcmp(a, b, sizeof(a)) == 0, "lookup %d differs", i);
	}
	emdb_client_set_timeout(c, 300);
	test_server_pause(&srv);
	int rc = emdb_client_ping(c);
	test_server_resume(&srv);
	cr_assert_eq(rc, EMDB_ERR_TIMEOUT, "%s", emdb_err_name(rc));
	emdb_client_close(mem);
	emdb_client_close(c);
}
