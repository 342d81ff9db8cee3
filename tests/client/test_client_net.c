/*
 * test_client_net.c - the client against a live emdb-server, where things
 * go wrong or get busy: the server dies (CLOSED, never a hang), stalls
 * (TIMEOUT, and the handle recovers), refuses a token or a role (AUTH),
 * speaks something else (PROTOCOL); many threads share one handle; many
 * requests are in flight at once; the Prefetch of batch i+1 overlaps the
 * work on batch i; the example trainer runs against the server, also as
 * two data-parallel workers whose steps meet (one Update a step); busy
 * polling (busy_poll_us) finds requests without the I/O thread sleeping;
 * PUSH_UPDATE and TABLE_RESERVE (protocol version 2) are refused unsent
 * by a handle whose server speaks only version 1, and the weighted Pull
 * and Push (version 3) by one whose server speaks only 2 (stand-in
 * servers here).
 *
 * Every server is started on loopback with an ephemeral port and a Unix
 * socket in a temporary directory, and is killed in the test's .fini.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <emdb/alloc.h>
#include <emdb/client.h>
#include <emdb/db.h>

#include "protocol/proto.h"
#include "tests/lib/client_server.h"
#include "tests/lib/helpers.h"

static test_server srv;

static void srv_start(void)
{
	test_server_start(&srv, NULL);
}

static void srv_start_auth(void)
{
	static const char *const flags[] = { "--admin-token", "adm1n", "--trainer-token", "tr@in/er",
					     "--reader-token", "reader", NULL };
	test_server_start(&srv, flags);
}

static void srv_start_small_frames(void)
{
	static const char *const flags[] = { "--max-frame", "65536", NULL };
	test_server_start(&srv, flags);
}

static void srv_stop(void)
{
	test_server_stop(&srv);
}

#define OK(call) cr_assert_eq((call), EMDB_OK, "%s: %s", #call, emdb_client_last_error())

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint32_t create_table(emdb_client *c, const char *name, uint32_t dim)
{
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	uint32_t id;
	strcpy(cfg.name, name);
	cfg.dim = dim;
	cfg.init = (emdb_init){ EMDB_INIT_UNIFORM, -1, 1 };
	cfg.seed = 7;
	OK(emdb_client_table_create(c, &cfg, &id));
	return id;
}

/* ---- the server goes away ------------------------------------------ */

Test(client_net, server_killed_gives_closed, .init = srv_start, .fini = srv_stop, .timeout = 60)
{
	emdb_client *c = test_client_open(srv.tcp_uri, 0); /* no timeout: only CLOSED can end a wait */
	emdb_client *u = test_client_open(srv.unix_uri, 0);
	OK(emdb_client_ping(c));
	OK(emdb_client_ping(u));
	uint32_t t = create_table(c, "t", 4);

	/* Requests in flight when the server dies complete with CLOSED. */
	test_server_pause(&srv);
	emdb_future *f = NULL;
	uint32_t dummy;
	emdb_future *fs[8];
	uint64_t ids[4] = { 1, 2, 3, 4 };
	float out[16];
	for (int i = 0; i < 8; i++)
		fs[i] = emdb_client_pull_async(i % 2 ? c : u, t, ids, 4, 4, out);
	cr_assert_eq(emdb_future_wait(fs[0], 100), EMDB_FUTURE_PENDING);
	cr_assert_eq(emdb_future_poll(fs[1]), EMDB_FUTURE_PENDING);
	double t0 = now_s();
	test_server_stop(&srv);
	for (int i = 0; i < 8; i++) {
		int rc = emdb_future_wait(fs[i], 10000);
		cr_assert_eq(rc, EMDB_ERR_CLOSED, "future %d: %s (%s)", i, emdb_err_name(rc),
			     emdb_client_last_error());
		cr_assert(strstr(emdb_client_last_error(), "connection"), "%s", emdb_client_last_error());
		emdb_future_free(fs[i]);
	}
	cr_assert_lt(now_s() - t0, 5.0, "CLOSED took %.1f s", now_s() - t0);

	/* And every later call fails at once, sync or async. */
	t0 = now_s();
	cr_assert_eq(emdb_client_ping(c), EMDB_ERR_CLOSED);
	cr_assert_eq(emdb_client_table_find(u, "x", &dummy), EMDB_ERR_CLOSED);
	f = emdb_client_update_async(c, t, NULL);
	cr_assert_eq(emdb_future_wait(f, -1), EMDB_ERR_CLOSED);
	emdb_future_free(f);
	cr_assert_lt(now_s() - t0, 1.0);
	emdb_client_close(c);
	emdb_client_close(u);
}

Test(client_net, server_killed_while_idle, .init = srv_start, .fini = srv_stop, .timeout = 60)
{
	emdb_client *c = test_client_open(srv.tcp_uri, 30000);
	uint32_t t = create_table(c, "t", 4);
	emdb_client_ticket *tk;
	uint64_t ids[3] = { 5, 6, 7 };
	OK(emdb_client_prefetch(c, t, ids, 3, &tk));
	test_server_stop(&srv);
	double t0 = now_s();
	float out[12];
	int rc = emdb_client_pull_ticket(c, t, tk, 4, out);
	cr_assert_eq(rc, EMDB_ERR_CLOSED, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	cr_assert_lt(now_s() - t0, 5.0);
	emdb_client_ticket_free(tk); /* on a broken handle: only memory */
	emdb_client_close(c);
}

/* ---- timeouts ------------------------------------------------------ */

Test(client_net, timeout_then_recovery, .init = srv_start, .fini = srv_stop, .timeout = 60)
{
	emdb_client *c = test_client_open(srv.tcp_uri, 300);
	uint32_t t = create_table(c, "t", 4);
	uint64_t ids[2] = { 1, 2 };
	float out[8], want[8];
	OK(emdb_client_pull(c, t, ids, 2, 4, want));
	/* One live ticket per connection: a leaked one would show. */
	OK(emdb_client_config_set(c, "max_tickets", "1"));

	test_server_pause(&srv);
	double t0 = now_s();
	int rc = emdb_client_ping(c);
	double took = now_s() - t0;
	cr_assert_eq(rc, EMDB_ERR_TIMEOUT, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	cr_assert(took >= 0.25 && took < 3.0, "timed out after %.2f s", took);

	/* Async: a short wait says PENDING, the deadline says TIMEOUT and
	 * the result stays; freeing a pending future abandons it. */
	memset(out, 0, sizeof(out));
	emdb_future *f = emdb_client_pull_async(c, t, ids, 2, 4, out);
	cr_assert_eq(emdb_future_wait(f, 50), EMDB_FUTURE_PENDING);
	cr_assert_eq(emdb_future_wait(f, -1), EMDB_ERR_TIMEOUT);
	cr_assert_eq(emdb_future_poll(f), EMDB_ERR_TIMEOUT);
	emdb_future_free(f);
	emdb_client_ticket *tk = NULL;
	emdb_future *g = emdb_client_prefetch_async(c, t, ids, 2, &tk);
	emdb_future_free(g); /* its ticket is released when the response comes */

	emdb_client_set_timeout(c, 10000);
	test_server_resume(&srv);
	/* The late responses are dropped; the handle works again. */
	OK(emdb_client_ping(c));
	OK(emdb_client_pull(c, t, ids, 2, 4, out));
	cr_assert_eq(memcmp(out, want, sizeof(out)), 0);
	cr_assert_null(tk);
	/* The abandoned Prefetch's ticket was freed on the server, or this
	 * one would exceed max_tickets. */
	OK(emdb_client_prefetch(c, t, ids, 2, &tk));
	emdb_client_ticket_free(tk);
	OK(emdb_client_prefetch(c, t, ids, 2, &tk));
	emdb_client_ticket_free(tk);
	emdb_client_close(c);
}

Test(client_net, connect_timeout, .init = srv_start, .fini = srv_stop, .timeout = 60)
{
	emdb_client *c;
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.connect_timeout_ms = 300;
	test_server_pause(&srv); /* the kernel accepts, nobody answers HELLO */
	double t0 = now_s();
	int rc = emdb_client_connect(srv.tcp_uri, &o, &c);
	cr_assert_eq(rc, EMDB_ERR_TIMEOUT, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	cr_assert_lt(now_s() - t0, 3.0);
	cr_assert_null(c);
	test_server_resume(&srv);
}

/* ---- authentication and roles -------------------------------------- */

Test(client_net, auth, .init = srv_start_auth, .fini = srv_stop, .timeout = 60)
{
	emdb_client *c = (emdb_client *)1;
	char uri[512];

	int rc = emdb_client_connect(srv.tcp_uri, NULL, &c);
	cr_assert_eq(rc, EMDB_ERR_AUTH, "no token: %s (%s)", emdb_err_name(rc), emdb_client_last_error());
	cr_assert_null(c);
	cr_assert(strstr(emdb_client_last_error(), "token"), "%s", emdb_client_last_error());
	snprintf(uri, sizeof(uri), "%s?token=wrong", srv.tcp_uri);
	rc = emdb_client_connect(uri, NULL, &c);
	cr_assert_eq(rc, EMDB_ERR_AUTH, "wrong token: %s (%s)", emdb_err_name(rc), emdb_client_last_error());
	snprintf(uri, sizeof(uri), "%s?token=wrong", srv.unix_uri);
	cr_assert_eq(emdb_client_connect(uri, NULL, &c), EMDB_ERR_AUTH);

	/* admin through the options, over the Unix socket */
	emdb_client *adm;
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.token = "adm1n";
	OK(emdb_client_connect(srv.unix_uri, &o, &adm));
	cr_assert_eq(emdb_client_role(adm), EMDB_ROLE_ADMIN);
	uint32_t t = create_table(adm, "t", 4);

	/* trainer: the data plane, not the admin plane; percent-encoded token */
	emdb_client *tr;
	snprintf(uri, sizeof(uri), "%s?token=tr%%40in%%2Fer", srv.tcp_uri);
	OK(emdb_client_connect(uri, NULL, &tr));
	cr_assert_eq(emdb_client_role(tr), EMDB_ROLE_TRAINER);
	uint64_t ids[3] = { 1, 2, 3 };
	float v[12], g[12] = { 0 };
	OK(emdb_client_pull(tr, t, ids, 3, 4, v));
	OK(emdb_client_push(tr, t, ids, 3, 4, g));
	OK(emdb_client_update(tr, t, NULL));
	uint64_t rows = 0;
	OK(emdb_client_push_update(tr, t, ids, 3, 4, g, &rows));
	cr_assert_eq(rows, 3);
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "nope");
	cfg.dim = 4;
	rc = emdb_client_table_create(tr, &cfg, NULL);
	cr_assert_eq(rc, EMDB_ERR_AUTH, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	cr_assert_eq(emdb_client_config_set(tr, "log_level", "info"), EMDB_ERR_AUTH);
	cr_assert_eq(emdb_client_shutdown(tr), EMDB_ERR_AUTH);
	OK(emdb_client_ping(tr)); /* a refused call leaves the connection open */

	/* reader: lookups and reads only */
	emdb_client *rd;
	snprintf(uri, sizeof(uri), "%s?token=reader", srv.tcp_uri);
	OK(emdb_client_connect(uri, NULL, &rd));
	cr_assert_eq(emdb_client_role(rd), EMDB_ROLE_READER);
	uint8_t found[3];
	OK(emdb_client_lookup(rd, t, ids, 3, 4, v, found));
	cr_assert_eq(found[0], 1);
	emdb_table_info info;
	OK(emdb_client_table_describe(rd, t, &info));
	cr_assert_eq(emdb_client_pull(rd, t, ids, 3, 4, v), EMDB_ERR_AUTH);
	cr_assert_eq(emdb_client_push(rd, t, ids, 3, 4, g), EMDB_ERR_AUTH);
	/* a reader's Push-and-Update: refused, no row or step changed */
	float v2[12], g1[12];
	for (int i = 0; i < 12; i++)
		g1[i] = 1.0f;
	OK(emdb_client_lookup(rd, t, ids, 3, 4, v, NULL));
	cr_assert_eq(emdb_client_push_update(rd, t, ids, 3, 4, g1, &rows), EMDB_ERR_AUTH);
	cr_assert(strstr(emdb_client_last_error(), "reader"), "%s", emdb_client_last_error());
	emdb_future *fr = emdb_client_push_update_async(rd, t, ids, 3, 4, g1, NULL);
	cr_assert_eq(emdb_future_wait(fr, -1), EMDB_ERR_AUTH);
	emdb_future_free(fr);
	OK(emdb_client_lookup(rd, t, ids, 3, 4, v2, NULL));
	cr_assert_eq(memcmp(v, v2, sizeof(v)), 0, "a refused Push-and-Update changed rows");
	OK(emdb_client_table_describe(rd, t, &info));
	cr_assert_eq(info.stats.step, 2, "the trainer's Update and Push-and-Update only");
	cr_assert_eq(info.stats.pending_rows, 0);
	emdb_client_ticket *tk = (emdb_client_ticket *)1;
	cr_assert_eq(emdb_client_prefetch(rd, t, ids, 3, &tk), EMDB_ERR_AUTH);
	cr_assert_null(tk);
	OK(emdb_client_ping(rd));

	emdb_client_close(rd);
	emdb_client_close(tr);
	emdb_client_close(adm);
}

/* ---- a peer that is not an emdb server ----------------------------- */

typedef struct fake_server {
	int lfd;
	char path[108];
	const char *reply; /* bytes sent after reading the HELLO; NULL: hang up */
	pthread_t th;
} fake_server;

static void *fake_main(void *arg)
{
	fake_server *fs = arg;
	int fd = accept(fs->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	char buf[512];
	if (fs->reply) {
		ssize_t k = recv(fd, buf, sizeof(buf), 0);
		(void)k;
		k = send(fd, fs->reply, strlen(fs->reply), MSG_NOSIGNAL);
		(void)k;
		while (recv(fd, buf, sizeof(buf), 0) > 0) /* until the client gives up */
			;
	}
	close(fd);
	return NULL;
}

/* A listening Unix socket at /tmp/emdb-<what>-<pid>.sock, its path in
 * path[108]. */
static int unix_listener(char *path, const char *what)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(path, sizeof(sa.sun_path), "/tmp/emdb-%s-%d.sock", what, (int)getpid());
	unlink(path);
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 4), 0);
	return fd;
}

/* Join the peer's thread, then close and remove its listener. */
static void peer_stop(pthread_t th, int lfd, const char *path)
{
	pthread_join(th, NULL);
	close(lfd);
	unlink(path);
}

static void fake_start(fake_server *fs, const char *reply)
{
	fs->reply = reply;
	fs->lfd = unix_listener(fs->path, "fake");
	cr_assert_eq(pthread_create(&fs->th, NULL, fake_main, fs), 0);
}

static void fake_stop(fake_server *fs)
{
	peer_stop(fs->th, fs->lfd, fs->path);
}

Test(client_net, peer_not_speaking_the_protocol, .timeout = 60)
{
	fake_server fs;
	char uri[160];
	emdb_client *c;

	fake_start(&fs, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
	snprintf(uri, sizeof(uri), "unix://%s", fs.path);
	int rc = emdb_client_connect(uri, NULL, &c);
	cr_assert_eq(rc, EMDB_ERR_PROTOCOL, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	fake_stop(&fs);

	fake_start(&fs, NULL); /* accepts and hangs up */
	rc = emdb_client_connect(uri, NULL, &c);
	cr_assert_eq(rc, EMDB_ERR_CLOSED, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	fake_stop(&fs);
}

/* ---- a server that speaks protocol version 1 only ------------------ */

/* A stand-in for an emdb-server built before version 2: it answers HELLO
 * with version 1 and serves PING, PREFETCH and TICKET_FREE; any other
 * frame, PUSH_UPDATE and TABLE_RESERVE above all, it refuses as such a
 * server would
 * (PROTOCOL, opcode NONE, then it hangs up).  Its reader is pinned at
 * version 1.  It records what it saw; the test asserts on the main thread.
 * Started with version 2 (old_start) it stands for a server built before
 * version 3 the same way: HELLO says 2, the reader is pinned at 2. */
typedef struct v1_server {
	int lfd;
	char path[108];
	pthread_t th;
	uint16_t version;                  /* the version its HELLO chooses */
	uint16_t offered_min, offered_max; /* the client's HELLO */
	int hellos, pings, prefetches, ticket_frees, refused;
	char why[256];                     /* what it refused */
} v1_server;

static bool v1_send(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t k = send(fd, p, len, MSG_NOSIGNAL);
		if (k <= 0)
			return false;
		p += k;
		len -= (size_t)k;
	}
	return true;
}

/* Answer one request; false: refuse it and hang up. */
static bool v1_answer(v1_server *vs, int fd, const proto_frame *f)
{
	static uint64_t out[512]; /* 8-aligned; one thread uses it */
	uint8_t *buf = (uint8_t *)out;
	size_t len = 0;
	proto_msg m;
	if (proto_msg_decode(&f->hdr, f->body, &m) != EMDB_OK)
		return false;
	switch (f->hdr.opcode) {
	case PROTO_OP_HELLO: {
		vs->hellos++;
		vs->offered_min = m.hello_req.ver_min;
		vs->offered_max = m.hello_req.ver_max;
		proto_hello_resp r = { vs->version, 0, 1u << 20, 1u << 16, proto_cstr("emdb-v1-fake") };
		proto_hello_resp_encode(buf, sizeof(out), f->hdr.id, &r, &len);
		break;
	}
	case PROTO_OP_PING:
		vs->pings++;
		proto_ping_resp_encode(buf, sizeof(out), f->hdr.id, &m.ping_req, &len);
		break;
	case PROTO_OP_PREFETCH: {
		vs->prefetches++;
		proto_prefetch_resp r = { 0x77, m.prefetch_req.n, m.prefetch_req.table };
		proto_prefetch_resp_encode(buf, sizeof(out), f->hdr.id, &r, &len);
		break;
	}
	case PROTO_OP_TICKET_FREE:
		vs->ticket_frees++;
		proto_empty_encode(buf, sizeof(out), f->hdr.id, PROTO_OP_TICKET_FREE, true, &len);
		break;
	default:
		return false;
	}
	return len && v1_send(fd, buf, len);
}

static void *v1_main(void *arg)
{
	v1_server *vs = arg;
	int fd = accept(vs->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	proto_reader r;
	if (proto_reader_init(&r, false, 1u << 20) != EMDB_OK) {
		close(fd);
		return NULL;
	}
	proto_reader_set_version(&r, (uint8_t)vs->version);
	for (bool open = true; open;) {
		uint8_t *p;
		size_t n;
		if (proto_reader_space(&r, &p, &n) != EMDB_OK)
			break;
		ssize_t k = recv(fd, p, n, 0);
		if (k <= 0)
			break;
		proto_reader_commit(&r, (size_t)k);
		proto_frame *f;
		int rc;
		while (open && (rc = proto_reader_next(&r, &f)) == 1) {
			open = v1_answer(vs, fd, f);
			if (!open) {
				vs->refused++;
				snprintf(vs->why, sizeof(vs->why), "a %s request",
					 proto_op_name(f->hdr.opcode));
			}
			proto_frame_free(f);
		}
		if (open && rc < 0) {
			const char *msg;
			proto_reader_error(&r, NULL, NULL, &msg);
			vs->refused++;
			snprintf(vs->why, sizeof(vs->why), "%s", msg);
			open = false;
		}
	}
	if (vs->refused) {
		uint8_t buf[128] __attribute__((aligned(8)));
		size_t len;
		if (proto_err_encode(buf, sizeof(buf), 0, PROTO_OP_NONE, EMDB_ERR_PROTOCOL,
				     "unknown opcode", &len) == EMDB_OK)
			v1_send(fd, buf, len);
	}
	proto_reader_destroy(&r);
	close(fd);
	return NULL;
}

static void old_start(v1_server *vs, uint16_t version)
{
	memset(vs, 0, sizeof(*vs));
	vs->version = version;
	vs->lfd = unix_listener(vs->path, "v1");
	cr_assert_eq(pthread_create(&vs->th, NULL, v1_main, vs), 0);
}

static void v1_stop(v1_server *vs)
{
	peer_stop(vs->th, vs->lfd, vs->path);
}

/* UNSUPPORTED, with the message naming the opcode (a string literal). */
#define EXPECT_V1_REFUSAL(rc, op)                                                             \
	do {                                                                                  \
		int rc_ = (rc);                                                               \
		cr_assert_eq(rc_, EMDB_ERR_UNSUPPORTED, "%s: %s", emdb_err_name(rc_),         \
			     emdb_client_last_error());                                       \
		cr_assert(strstr(emdb_client_last_error(),                                    \
				 "the server speaks protocol version 1; " op " needs version 2"), \
			  "%s", emdb_client_last_error());                                    \
	} while (0)

/* Start the fake version-1 server and connect to it over its Unix socket:
 * HELLO settles on version 1. */
static emdb_client *old_connect(v1_server *vs, uint16_t version)
{
	char uri[160];
	emdb_client *c;
	old_start(vs, version);
	snprintf(uri, sizeof(uri), "unix://%s", vs->path);
	int rc = emdb_client_connect(uri, NULL, &c);
	cr_assert_eq(rc, EMDB_OK, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	cr_assert_eq(emdb_client_protocol_version(c), version);
	return c;
}

static emdb_client *v1_connect(v1_server *vs)
{
	return old_connect(vs, 1);
}

/* PUSH_UPDATE is protocol version 2's.  Against a server that speaks only
 * version 1, every form of emdb_client_push_update fails at once with
 * UNSUPPORTED, nothing reaches the server (which would take the frame for
 * an unknown opcode and hang up), and the handle goes on working. */
Test(client_net, push_update_against_a_version_1_server_is_refused_unsent, .timeout = 60)
{
	v1_server vs;
	emdb_client *c = v1_connect(&vs);
	cr_assert_str_eq(emdb_client_server(c), "emdb-v1-fake");
	OK(emdb_client_ping(c));

	uint64_t ids[3] = { 1, 2, 3 }, rows = 77;
	float g[12] = { 0 };
	EXPECT_V1_REFUSAL(emdb_client_push_update(c, 1, ids, 3, 4, g, &rows), "PUSH_UPDATE");
	cr_assert_eq(rows, 77, "rows_out written on a refusal");
	emdb_future *f = emdb_client_push_update_async(c, 1, ids, 3, 4, g, &rows);
	cr_assert_not_null(f);
	EXPECT_V1_REFUSAL(emdb_future_wait(f, 5000), "PUSH_UPDATE");
	emdb_future_free(f);
	emdb_client_ticket *tk = NULL;
	OK(emdb_client_prefetch(c, 1, ids, 3, &tk));
	EXPECT_V1_REFUSAL(emdb_client_push_update_ticket(c, 1, tk, 4, g, &rows), "PUSH_UPDATE");
	f = emdb_client_push_update_ticket_async(c, 1, tk, 4, g, NULL);
	EXPECT_V1_REFUSAL(emdb_future_wait(f, 5000), "PUSH_UPDATE");
	emdb_future_free(f);
	emdb_client_ticket_free(tk);
	OK(emdb_client_ping(c)); /* still connected, still in step */
	emdb_client_close(c);
	v1_stop(&vs);

	cr_assert_eq(vs.hellos, 1);
	cr_assert_eq(vs.offered_min, 1);
	cr_assert_eq(vs.offered_max, 5, "the client offers versions 1..5");
	cr_assert_eq(vs.refused, 0, "the server refused a frame: %s", vs.why);
	cr_assert_eq(vs.pings, 2);
	cr_assert_eq(vs.prefetches, 1);
	cr_assert_eq(vs.ticket_frees, 1);
}

/* TABLE_RESERVE is protocol version 2's too: against a server that speaks
 * only version 1, emdb_client_table_reserve fails at once with
 * UNSUPPORTED, nothing reaches the server, and the handle goes on
 * working. */
Test(client_net, table_reserve_against_a_version_1_server_is_refused_unsent, .timeout = 60)
{
	v1_server vs;
	emdb_client *c = v1_connect(&vs);
	OK(emdb_client_ping(c));
	EXPECT_V1_REFUSAL(emdb_client_table_reserve(c, 1, 40000000), "TABLE_RESERVE");
	EXPECT_V1_REFUSAL(emdb_client_table_reserve(c, 0, 0), "TABLE_RESERVE");
	cr_assert(strstr(emdb_client_last_error(), "emdb_client_table_reserve"), "%s",
		  emdb_client_last_error());
	OK(emdb_client_ping(c)); /* still connected, still in step */
	emdb_client_close(c);
	v1_stop(&vs);

	cr_assert_eq(vs.hellos, 1);
	cr_assert_eq(vs.refused, 0, "the server refused a frame: %s", vs.why);
	cr_assert_eq(vs.pings, 2, "a frame other than the two PINGs reached the server");
}

/* The per-sample weights are protocol version 3's (PULL_WEIGHTED,
 * PUSH_WEIGHTED).  Against a server that speaks only version 2, every
 * form of the weighted calls fails at once with UNSUPPORTED, nothing
 * reaches the server, and the handle goes on working. */
Test(client_net, weighted_calls_against_a_version_2_server_are_refused_unsent, .timeout = 60)
{
	v1_server vs;
	emdb_client *c = old_connect(&vs, 2);
	OK(emdb_client_ping(c));
	uint64_t ids[3] = { 1, 2, 3 }, offs[3] = { 0, 1, 3 };
	float w[3] = { 1, 2, 3 }, out[8], g[8] = { 0 };
	const char *want = "the server speaks protocol version 2; PULL_WEIGHTED needs version 3";
	int rc = emdb_client_pull_bags_weighted(c, 1, ids, 3, offs, 2, EMDB_POOL_SUM, w, 4, out);
	cr_assert_eq(rc, EMDB_ERR_UNSUPPORTED, "%s", emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), want), "%s", emdb_client_last_error());
	rc = emdb_client_push_bags_weighted(c, 1, ids, 3, offs, 2, EMDB_POOL_SUM, w, 4, g);
	cr_assert_eq(rc, EMDB_ERR_UNSUPPORTED);
	cr_assert(strstr(emdb_client_last_error(), "PUSH_WEIGHTED needs version 3"), "%s",
		  emdb_client_last_error());
	emdb_future *f = emdb_client_push_bags_weighted_async(c, 1, ids, 3, offs, 2, EMDB_POOL_SUM, w, 4, g);
	cr_assert_eq(emdb_future_wait(f, 5000), EMDB_ERR_UNSUPPORTED);
	emdb_future_free(f);
	emdb_client_ticket *tk = NULL;
	OK(emdb_client_prefetch(c, 1, ids, 3, &tk));
	rc = emdb_client_pull_bags_weighted_ticket(c, 1, tk, offs, 2, EMDB_POOL_SUM, w, 4, out);
	cr_assert_eq(rc, EMDB_ERR_UNSUPPORTED);
	f = emdb_client_pull_bags_weighted_ticket_async(c, 1, tk, offs, 2, EMDB_POOL_SUM, w, 4, out);
	cr_assert_eq(emdb_future_wait(f, 5000), EMDB_ERR_UNSUPPORTED);
	emdb_future_free(f);
	emdb_client_ticket_free(tk);
	emdb_optimizer o;
	emdb_optimizer_defaults(EMDB_OPT_SGD, &o);
	cr_assert_eq(emdb_client_table_alter(c, 1, &o), EMDB_ERR_UNSUPPORTED);
	cr_assert(strstr(emdb_client_last_error(), "TABLE_ALTER needs version 3"), "%s",
		  emdb_client_last_error());
	size_t n_rows = 9;
	uint64_t next = 9;
	cr_assert_eq(emdb_client_table_scan(c, 1, 0, 3, 4, 0, ids, out, NULL, &n_rows, &next, NULL),
		     EMDB_ERR_UNSUPPORTED);
	cr_assert_eq(n_rows, 0);
	cr_assert_eq(emdb_client_table_load(c, 1, ids, 2, 4, out, 0, NULL), EMDB_ERR_UNSUPPORTED);
	cr_assert(strstr(emdb_client_last_error(), "TABLE_LOAD needs version 3"), "%s",
		  emdb_client_last_error());
	OK(emdb_client_ping(c)); /* still connected, still in step */
	emdb_client_close(c);
	v1_stop(&vs);

	cr_assert_eq(vs.hellos, 1);
	cr_assert_eq(vs.refused, 0, "the server refused a frame: %s", vs.why);
	cr_assert_eq(vs.pings, 2);
	cr_assert_eq(vs.prefetches, 1);
	cr_assert_eq(vs.ticket_frees, 1);
}

/* A server of this build and mem:// both give version 5, and PUSH_UPDATE
 * and TABLE_RESERVE (version 2's) and the weighted Pull (version 3's) go
 * through. */
Test(client_net, protocol_version_5_with_a_server_of_this_build, .init = srv_start,
     .fini = srv_stop, .timeout = 60)
{
	const char *uris[] = { srv.tcp_uri, srv.unix_uri, "mem://" };
	for (size_t i = 0; i < 3; i++) {
		emdb_client *c = test_client_open(uris[i], 30000);
		cr_assert_eq(emdb_client_protocol_version(c), 5, "%s", uris[i]);
		uint32_t t = create_table(c, "v3", 4);
		uint64_t ids[3] = { 1, 2, 1 }, rows = 0, offs[2] = { 0, 3 };
		float g[12] = { 0 }, w[3] = { 1, 1, 1 }, out[4];
		OK(emdb_client_push_update(c, t, ids, 3, 4, g, &rows));
		cr_assert_eq(rows, 2, "%s", uris[i]);
		OK(emdb_client_table_reserve(c, t, 1000));
		OK(emdb_client_pull_bags_weighted(c, t, ids, 3, offs, 1, EMDB_POOL_SUM, w, 4, out));
		OK(emdb_client_table_drop(c, t));
		emdb_client_close(c);
	}
}

/* ---- many threads, one handle -------------------------------------- */

#define THREADS 8
#define ITERS 150
#define TDIM 16
#define TN 64

typedef struct shared_ctx {
	emdb_client *c;
	uint32_t table;
	const float *want; /* initial rows of IDs 0..1023 */
	int failures;
} shared_ctx;

static void *hammer(void *arg)
{
	shared_ctx *s = arg;
	uint64_t ids[TN];
	float out[TN * TDIM], g[TN * TDIM];
	uint8_t found[TN];
	unsigned seed = (unsigned)(uintptr_t)&ids;
	memset(g, 0, sizeof(g));
	for (int it = 0; it < ITERS; it++) {
		for (int i = 0; i < TN; i++)
			ids[i] = (uint64_t)(rand_r(&seed) % 1024);
		int rc = EMDB_OK;
		emdb_client_ticket *tk = NULL;
		switch (it % 5) {
		case 0:
			rc = emdb_client_pull(s->c, s->table, ids, TN, TDIM, out);
			break;
		case 1:
			rc = emdb_client_prefetch(s->c, s->table, ids, TN, &tk);
			if (rc == EMDB_OK)
				rc = emdb_client_pull_ticket(s->c, s->table, tk, TDIM, out);
			if (rc == EMDB_OK)
				rc = emdb_client_push_ticket(s->c, s->table, tk, TDIM, g);
			emdb_client_ticket_free(tk);
			break;
		case 2:
			rc = emdb_client_lookup(s->c, s->table, ids, TN, TDIM, out, found);
			break;
		case 3: {
			emdb_future *f = emdb_client_pull_async(s->c, s->table, ids, TN, TDIM, out);
			rc = emdb_future_wait(f, -1);
			emdb_future_free(f);
			break;
		}
		default:
			rc = emdb_client_ping(s->c);
			break;
		}
		if (rc != EMDB_OK) {
			__atomic_fetch_add(&s->failures, 1, __ATOMIC_RELAXED);
			continue;
		}
		if (it % 5 == 4)
			continue;
		/* Rows never change (no Update): each must be the ID's
		 * initial row, whichever thread's request it answered. */
		for (int i = 0; i < TN; i++)
			if (memcmp(out + i * TDIM, s->want + ids[i] * TDIM, TDIM * sizeof(float))) {
				__atomic_fetch_add(&s->failures, 1, __ATOMIC_RELAXED);
				break;
			}
	}
	return NULL;
}

static void threads_share_one_handle(const char *uri)
{
	emdb_client *c = test_client_open(uri, 30000);
	uint32_t t = create_table(c, "shared", TDIM);
	/* The initial rows, from a pull of all IDs (Lookup in case 2 would
	 * return defaults for IDs not inserted yet, so insert them all). */
	static uint64_t all[1024];
	static float want[1024 * TDIM];
	for (int i = 0; i < 1024; i++)
		all[i] = (uint64_t)i;
	OK(emdb_client_pull(c, t, all, 1024, TDIM, want));

	shared_ctx s = { c, t, want, 0 };
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, hammer, &s), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(s.failures, 0, "%d requests failed or got wrong rows", s.failures);

	emdb_table_info info;
	OK(emdb_client_table_describe(c, t, &info));
	/* 1 + per thread ITERS/5 * (pull + pull_ticket + async pull) */
	cr_assert_eq(info.stats.calls_pull, 1 + THREADS * (ITERS / 5) * 3);
	cr_assert_eq(info.stats.calls_lookup, THREADS * (ITERS / 5));
	cr_assert_eq(info.stats.calls_prefetch, THREADS * (ITERS / 5));
	emdb_client_close(c);
}

Test(client_net, threads_share_one_handle_tcp, .init = srv_start, .fini = srv_stop, .timeout = 120)
{
	threads_share_one_handle(srv.tcp_uri);
}

Test(client_net, threads_share_one_handle_unix, .init = srv_start, .fini = srv_stop, .timeout = 120)
{
	threads_share_one_handle(srv.unix_uri);
}

Test(client_net, threads_share_one_handle_mem, .timeout = 120)
{
	threads_share_one_handle("mem://");
}

/* ---- pipelining ---------------------------------------------------- */

static void many_in_flight(const char *uri)
{
	enum { REQS = 500, PN = 32, PD = 8 };
	emdb_client *c = test_client_open(uri, 30000);
	uint32_t t = create_table(c, "p", PD);
	static uint64_t ids[REQS][PN];
	static float out[REQS][PN * PD], want[PN * PD];
	emdb_future *f[REQS];
	for (int r = 0; r < REQS; r++) {
		for (int i = 0; i < PN; i++)
			ids[r][i] = (uint64_t)(r * 7 + i);
		f[r] = emdb_client_pull_async(c, t, ids[r], PN, PD, out[r]);
	}
	/* Waited for in reverse order: each response found its request. */
	for (int r = REQS - 1; r >= 0; r--) {
		cr_assert_eq(emdb_future_wait(f[r], -1), EMDB_OK, "%s", emdb_client_last_error());
		emdb_future_free(f[r]);
	}
	for (int r = 0; r < REQS; r += 37) {
		OK(emdb_client_pull(c, t, ids[r], PN, PD, want));
		cr_assert_eq(memcmp(out[r], want, sizeof(want)), 0, "request %d got another's rows", r);
	}
	emdb_client_close(c);
}

Test(client_net, many_requests_in_flight_tcp, .init = srv_start, .fini = srv_stop, .timeout = 120)
{
	many_in_flight(srv.tcp_uri);
}

Test(client_net, many_requests_in_flight_mem, .timeout = 120)
{
	many_in_flight("mem://");
}

/* ---- big frames: partial writes and reads, zero-copy paths --------- */

Test(client_net, big_batches, .init = srv_start, .fini = srv_stop, .timeout = 120)
{
	enum { BN = 200000, BD = 32 };
	emdb_client *c = test_client_open(srv.tcp_uri, 60000);
	uint32_t t = create_table(c, "big", BD);
	uint64_t *ids = malloc(BN * sizeof(uint64_t));
	float *v = malloc((size_t)BN * BD * sizeof(float));
	float *w = malloc((size_t)BN * BD * sizeof(float));
	emdb_db *db = open_db(64);
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "big");
	cfg.dim = BD;
	cfg.init = (emdb_init){ EMDB_INIT_UNIFORM, -1, 1 };
	cfg.seed = 7;
	uint32_t te;
	cr_assert_eq(emdb_table_create(db, &cfg, &te), 0);
	for (size_t i = 0; i < BN; i++)
		ids[i] = scramble(i);
	for (size_t i = 0; i < (size_t)BN * BD; i++)
		w[i] = (float)(i % 13) * 0.01f;
	OK(emdb_client_push(c, t, ids, BN, BD, w)); /* 32 MB of gradients out */
	cr_assert_eq(emdb_push(db, te, ids, BN, BD, w), 0);
	OK(emdb_client_update(c, t, NULL));
	cr_assert_eq(emdb_update(db, te, NULL), 0);
	OK(emdb_client_pull(c, t, ids, BN, BD, v)); /* 25 MB of vectors in */
	cr_assert_eq(emdb_pull(db, te, ids, BN, BD, w), 0);
	cr_assert_eq(memcmp(v, w, (size_t)BN * BD * sizeof(float)), 0);
	emdb_db_close(db);
	free(ids);
	free(v);
	free(w);
	emdb_client_close(c);
}

Test(client_net, request_over_the_server_frame_limit, .init = srv_start_small_frames, .fini = srv_stop,
     .timeout = 60)
{
	emdb_client *c = test_client_open(srv.tcp_uri, 10000);
	uint32_t t = create_table(c, "t", 8);
	static uint64_t ids[4096];
	static float g[4096 * 8];
	int rc = emdb_client_push(c, t, ids, 4096, 8, g); /* 160 KB > 64 KB */
	cr_assert_eq(rc, EMDB_ERR_LIMIT, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	OK(emdb_client_push(c, t, ids, 512, 8, g)); /* the handle is fine */
	emdb_client_close(c);
}

/* ---- Prefetch of batch i+1 while batch i trains -------------------- */

static void prefetch_overlap(const char *uri)
{
	enum { STEPS = 12, BN = 256, BD = 8 };
	emdb_client *c = test_client_open(uri, 30000);
	uint32_t t = create_table(c, "o", BD);
	emdb_db *db = open_db(64);
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "o");
	cfg.dim = BD;
	cfg.init = (emdb_init){ EMDB_INIT_UNIFORM, -1, 1 };
	cfg.seed = 7;
	uint32_t te;
	cr_assert_eq(emdb_table_create(db, &cfg, &te), 0);

	static uint64_t ids[STEPS][BN];
	static float v[BN * BD], ve[BN * BD], g[BN * BD];
	for (int s = 0; s < STEPS; s++)
		for (int i = 0; i < BN; i++)
			ids[s][i] = scramble((uint64_t)(s * 100 + i) % 700);

	emdb_client_ticket *cur = NULL, *next = NULL;
	OK(emdb_client_prefetch(c, t, ids[0], BN, &cur));
	for (int s = 0; s < STEPS; s++) {
		emdb_future *f = s + 1 < STEPS ? emdb_client_prefetch_async(c, t, ids[s + 1], BN, &next) : NULL;
		/* batch s, while batch s+1 is being resolved */
		OK(emdb_client_pull_ticket(c, t, cur, BD, v));
		cr_assert_eq(emdb_pull(db, te, ids[s], BN, BD, ve), 0);
		cr_assert_eq(memcmp(v, ve, sizeof(v)), 0, "step %d", s);
		for (int i = 0; i < BN * BD; i++)
			g[i] = v[i] * 0.5f;
		OK(emdb_client_push_ticket(c, t, cur, BD, g));
		cr_assert_eq(emdb_push(db, te, ids[s], BN, BD, g), 0);
		OK(emdb_client_update(c, t, NULL));
		cr_assert_eq(emdb_update(db, te, NULL), 0);
		emdb_client_ticket_free(cur);
		cur = NULL;
		if (f) {
			OK(emdb_future_wait(f, -1));
			emdb_future_free(f);
			cr_assert_not_null(next);
			cr_assert_eq(emdb_client_ticket_count(next), BN);
			cur = next;
			next = NULL;
		}
	}
	emdb_db_close(db);
	emdb_client_close(c);
}

Test(client_net, prefetch_next_batch_while_training_tcp, .init = srv_start, .fini = srv_stop, .timeout = 120)
{
	prefetch_overlap(srv.tcp_uri);
}

Test(client_net, prefetch_next_batch_while_training_unix, .init = srv_start, .fini = srv_stop, .timeout = 120)
{
	prefetch_overlap(srv.unix_uri);
}

Test(client_net, prefetch_next_batch_while_training_mem, .timeout = 120)
{
	prefetch_overlap("mem://");
}

/* ---- admin plane --------------------------------------------------- */

Test(client_net, config_and_shutdown, .init = srv_start, .fini = srv_stop, .timeout = 60)
{
	emdb_client *c = test_client_open(srv.tcp_uri, 10000);
	emdb_client_kv *kv;
	size_t n;
	OK(emdb_client_config_set(c, "log_level", "debug"));
	OK(emdb_client_config_get(c, "log_level", &kv, &n));
	cr_assert_eq(n, 1);
	cr_assert_str_eq(kv[0].value, "debug");
	emdb_free(kv);
	int rc = emdb_client_config_set(c, "no_such_key", "1");
	cr_assert_eq(rc, EMDB_ERR_INVALID, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	cr_assert_eq(emdb_client_config_set(c, "port", "1"), EMDB_ERR_INVALID); /* not at run time */
	OK(emdb_client_config_get(c, "*token*", &kv, &n));
	for (size_t i = 0; i < n; i++)
		cr_assert(strcmp(kv[i].value, "adm1n"), "a token leaked");
	emdb_free(kv);

	/* Several settings at once: all of them, or none when one is refused. */
	const char *k2[] = { "max_tickets", "no_such_key" }, *v2[] = { "7", "1" };
	rc = emdb_client_config_set_many(c, 2, k2, v2);
	cr_assert_eq(rc, EMDB_ERR_INVALID, "%s", emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "no_such_key"), "%s", emdb_client_last_error());
	OK(emdb_client_config_get(c, "max_tickets", &kv, &n));
	cr_assert_str_neq(kv[0].value, "7", "a refused CONFIG SET applied its first pair");
	emdb_free(kv);
	const char *k3[] = { "max_tickets", "log_level" }, *v3[] = { "7", "warn" };
	OK(emdb_client_config_set_many(c, 2, k3, v3));
	OK(emdb_client_config_get(c, "max_tickets", &kv, &n));
	cr_assert_str_eq(kv[0].value, "7");
	emdb_free(kv);
	OK(emdb_client_config_get(c, "log_level", &kv, &n));
	cr_assert_str_eq(kv[0].value, "warn");
	emdb_free(kv);
	cr_assert_eq(emdb_client_config_set_many(c, 0, k3, v3), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_client_config_set_many(c, EMDB_CLIENT_CONFIG_SET_MAX + 1, k3, v3), EMDB_ERR_INVALID);
	/* TLS is fixed at start: a plain server cannot be switched to it. */
	const char *k4[] = { "tls_cert_file", "tls_key_file" }, *v4[] = { "/nonexistent.crt", "/nonexistent.key" };
	rc = emdb_client_config_set_many(c, 2, k4, v4);
	cr_assert_eq(rc, EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_client_last_error(), "TLS is off"), "%s", emdb_client_last_error());

	OK(emdb_client_shutdown(c));
	for (int i = 0; i < 1000 && test_server_alive(&srv); i++)
		test_sleep_ms(10);
	cr_assert(!test_server_alive(&srv), "the server still runs after SHUTDOWN");
	rc = emdb_client_ping(c);
	cr_assert_eq(rc, EMDB_ERR_CLOSED, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	emdb_client_close(c);
}

/* ---- the example trainer ------------------------------------------- */

#ifdef EMDB_TRAINER_BIN
/* Start the example trainer for 8 steps on uri; `more` are its further
 * arguments (workers and rank), "" for none. */
static FILE *start_trainer(const char *uri, const char *more)
{
	/* mem:// needs the build that links libemdb_client_mem; the plain
	 * one is what a user who talks to a server builds. */
	const char *bin = strncmp(uri, "mem://", 6) == 0 ? EMDB_TRAINER_MEM_BIN : EMDB_TRAINER_BIN;
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "'%s' '%s' 8 %s 2>&1", bin, uri, more);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	return p;
}

/* Its output to the end: it must exit 0 with a falling loss. */
static void finish_trainer(FILE *p)
{
	char line[256], all[8192] = "";
	double first = -1, last = -1;
	while (fgets(line, sizeof(line), p)) {
		strncat(all, line, sizeof(all) - strlen(all) - 1);
		int step;
		double loss;
		if (sscanf(line, "step %d loss %lf", &step, &loss) == 2) {
			if (first < 0)
				first = loss;
			last = loss;
		}
	}
	int st = pclose(p);
	cr_assert_eq(st, 0, "trainer exited with status %d:\n%s", st, all);
	cr_assert(first > 0 && last < first, "the loss did not fall:\n%s", all);
}
#endif

static void run_trainer(const char *uri)
{
#ifndef EMDB_TRAINER_BIN
	(void)uri;
	cr_skip_test("emdb-example-trainer is not part of this build");
#else
	finish_trainer(start_trainer(uri, ""));
#endif
}

/* Two data-parallel workers, two processes: each step's Update happens
 * once, when both have pushed, so 8 steps of both make 8 Updates. */
Test(client_net, example_trainer_two_workers, .init = srv_start, .fini = srv_stop, .timeout = 120)
{
#ifndef EMDB_TRAINER_BIN
	cr_skip_test("emdb-example-trainer is not part of this build");
#else
	FILE *a = start_trainer(srv.unix_uri, "2 0");
	FILE *b = start_trainer(srv.tcp_uri, "2 1");
	finish_trainer(a);
	finish_trainer(b);
	emdb_client *c = test_client_open(srv.unix_uri, 10000);
	uint32_t t;
	OK(emdb_client_table_find(c, "example", &t));
	emdb_table_info info;
	OK(emdb_client_table_describe(c, t, &info));
	cr_assert_eq(info.stats.step, 8, "%llu Updates for 8 steps of 2 workers",
		     (unsigned long long)info.stats.step);
	emdb_client_close(c);
#endif
}

Test(client_net, example_trainer_tcp, .init = srv_start, .fini = srv_stop, .timeout = 120)
{
	run_trainer(srv.tcp_uri);
	run_trainer(srv.tcp_uri); /* a second run finds the table */
}

Test(client_net, example_trainer_unix, .init = srv_start, .fini = srv_stop, .timeout = 120)
{
	run_trainer(srv.unix_uri);
}

Test(client_net, example_trainer_mem, .timeout = 120)
{
	run_trainer("mem://");
}

/* The trainer built against libemdb_client alone links no engine: asked
 * for mem:// it fails to connect, saying which library it lacks. */
Test(client_net, example_trainer_without_mem, .timeout = 120)
{
#ifndef EMDB_TRAINER_BIN
	cr_skip_test("emdb-example-trainer is not part of this build");
#else
	char cmd[1024], line[256], all[4096] = "";
	snprintf(cmd, sizeof(cmd), "'%s' mem:// 8 2>&1", EMDB_TRAINER_BIN);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p))
		strncat(all, line, sizeof(all) - strlen(all) - 1);
	int st = pclose(p);
	cr_assert_neq(st, 0, "the trainer without mem:// ran:\n%s", all);
	cr_assert_not_null(strstr(all, "mem:// needs libemdb_client_mem"), "its error:\n%s", all);
#endif
}

/* ---- busy polling -------------------------------------------------- */

/* The number after "key: " at the start of a line of INFO's `section`. */
static uint64_t info_u64(emdb_client *c, const char *section, const char *key)
{
	char *info, pat[64];
	OK(emdb_client_info(c, section, &info));
	snprintf(pat, sizeof(pat), "\n%s: ", key);
	const char *p = strstr(info, pat);
	cr_assert_not_null(p, "no %s in %s", key, info);
	uint64_t v = strtoull(p + strlen(pat), NULL, 10);
	emdb_free(info);
	return v;
}

static uint64_t busy_poll_hits(emdb_client *c)
{
	return info_u64(c, "clients", "busy_poll_hits");
}

/* Sequential Lookups, each sent only after the last one's answer: with
 * busy_poll_us off the I/O thread sleeps between them, so no poll finds
 * work; with a window far longer than a round trip, polls find them (run
 * alone here, every one).  Other tests running beside this one can keep
 * the server off the CPU past its window (its clock runs on; the request
 * is then found by the next wait, at once, but not counted), so the test
 * asks for one hit in LOOKUPS_MAX tries or LOOKUPS_MIN_S seconds,
 * whichever is longer (one run of the whole file in about 30 saw none in
 * 500 tries, with another test's server beside it).  The answers are the same
 * either way, and CONFIG SET changes the setting on a running server.  A
 * client may poll for its answers as well (emdb_client_options.
 * busy_poll_us).  One test runs both backends, one after the other, as
 * two polling servers side by side would starve each other. */
/* One synchronous Lookup per ID of ids[n], each answered as mem's table tm
 * answers it (`how` names the phase in a failure). */
static void lookups_as_mem(emdb_client *c, uint32_t t, emdb_client *mem, uint32_t tm, const uint64_t *ids,
			   int n, const char *how)
{
	float a[8], b[8];
	for (const uint64_t *id = ids; id < ids + n; id++) {
		OK(emdb_client_lookup(c, t, id, 1, 8, a, NULL));
		OK(emdb_client_lookup(mem, tm, id, 1, 8, b, NULL));
		cr_assert(memcmp(a, b, sizeof(a)) == 0, "lookup %llu differs%s", (unsigned long long)*id, how);
	}
}

#define LOOKUPS_MAX 500
#define LOOKUPS_MIN_S 3 /* and for this long at least */
static void busy_poll_on(const char *backend)
{
	const char *const extra[] = { "--io-backend", backend, NULL };
	test_server_start(&srv, extra);
	emdb_client *c = test_client_open(srv.unix_uri, 10000);
	emdb_client *mem = test_client_open("mem://", 0);
	uint32_t tn = create_table(c, "t", 8), tm = create_table(mem, "t", 8);
	float a[8];
	enum { CALLS = 50 };
	uint64_t ids[CALLS];
	float rows[CALLS * 8];
	for (uint64_t i = 0; i < CALLS; i++)
		ids[i] = 1000 + 7 * i;
	OK(emdb_client_pull(c, tn, ids, CALLS, 8, rows));
	OK(emdb_client_pull(mem, tm, ids, CALLS, 8, rows));

	emdb_client_kv *kv;
	size_t n;
	OK(emdb_client_config_get(c, "busy_poll_us", &kv, &n));
	cr_assert(n == 1 && !strcmp(kv[0].value, "0"), "busy_poll_us is off by default");
	emdb_free(kv);
	lookups_as_mem(c, tn, mem, tm, ids, CALLS, "");
	cr_assert_eq(busy_poll_hits(c), 0, "no busy polling while busy_poll_us is 0");

	OK(emdb_client_config_set(c, "busy_poll_us", "10000"));
	cr_assert_eq(emdb_client_config_set(c, "busy_poll_us", "10001"), EMDB_ERR_INVALID,
		     "a window over 10 ms is refused");
	uint64_t before = busy_poll_hits(c), hits;
	int calls = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		lookups_as_mem(c, tn, mem, tm, ids, CALLS, " while polling");
		calls += CALLS;
		hits = busy_poll_hits(c) - before;
		clock_gettime(CLOCK_MONOTONIC, &t1);
	} while (hits == 0 && (calls < LOOKUPS_MAX || t1.tv_sec - t0.tv_sec < LOOKUPS_MIN_S));
	if (hits == 0) {
		OK(emdb_client_config_get(c, "busy_poll_us", &kv, &n));
		cr_assert_fail("none of %d requests in %.0f ms found by polling (%s, busy_poll_us %s)",
			       calls, (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6,
			       backend, n == 1 ? kv[0].value : "?");
	}

	/* A client that polls for its answers too gets the same rows; one
	 * whose window is over the limit is refused at connect. */
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.busy_poll_us = EMDB_CLIENT_BUSY_POLL_MAX_US + 1;
	emdb_client *bad = NULL;
	cr_assert_eq(emdb_client_connect(srv.unix_uri, &o, &bad), EMDB_ERR_INVALID);
	cr_assert_null(bad);
	cr_assert(strstr(emdb_client_last_error(), "busy_poll_us"), "%s", emdb_client_last_error());
	o.busy_poll_us = 1000;
	emdb_client *cp;
	OK(emdb_client_connect(srv.tcp_uri, &o, &cp));
	lookups_as_mem(cp, tn, mem, tm, ids, CALLS, ", client polling");
	/* Its deadline still holds while the server is stopped. */
	emdb_client_set_timeout(cp, 300);
	test_server_pause(&srv);
	int rc = emdb_client_ping(cp);
	test_server_resume(&srv);
	cr_assert_eq(rc, EMDB_ERR_TIMEOUT, "%s", emdb_err_name(rc));
	emdb_client_close(cp);

	OK(emdb_client_config_set(c, "busy_poll_us", "0"));
	test_sleep_ms(50); /* the last window ends */
	before = busy_poll_hits(c);
	for (const uint64_t *id = ids; id < ids + CALLS; id++)
		OK(emdb_client_lookup(c, tn, id, 1, 8, a, NULL));
	/* The CONFIG SET's own reply may open one last window. */
	cr_assert_leq(busy_poll_hits(c) - before, 2, "polling goes on after busy_poll_us 0");
	emdb_client_close(mem);
	emdb_client_close(c);
}

Test(client_net, busy_poll_finds_requests_without_sleeping, .fini = srv_stop, .timeout = 60)
{
	busy_poll_on("libevent");
	test_server_stop(&srv);
	busy_poll_on("uring");
}

static uint64_t info_memory(emdb_client *c, const char *key)
{
	return info_u64(c, "memory", key);
}

/* huge_pages from the command line, in CONFIG GET and INFO, changed at run
 * time; a table made under `try` works whether the machine's pool has
 * room (a region from it) or not (a fallback), and INFO counts which. */
Test(client_net, huge_pages_setting, .fini = srv_stop, .timeout = 60)
{
	const char *const extra[] = { "--huge_pages", "try", NULL };
	test_server_start(&srv, extra);
	emdb_client *c = test_client_open(srv.unix_uri, 10000);
	emdb_client_kv *kv;
	size_t n;
	OK(emdb_client_config_get(c, "huge_pages", &kv, &n));
	cr_assert(n == 1 && !strcmp(kv[0].value, "try"), "huge_pages from the command line");
	emdb_free(kv);
	char *info;
	OK(emdb_client_info(c, "memory", &info));
	cr_assert(strstr(info, "\nhuge_pages: try\n"), "%s", info);
	cr_assert(strstr(info, "\nhuge_pages_pool_free: "), "%s", info);
	emdb_free(info);

	uint64_t regions = info_memory(c, "huge_pages_regions"), falls = info_memory(c, "huge_pages_fallbacks");
	uint32_t t = create_table(c, "t", 64);
	enum { ROWS = 20000 }; /* 5 MB of rows: three chunks */
	uint64_t *ids = malloc(ROWS * sizeof(uint64_t));
	float *rows = malloc((size_t)ROWS * 64 * sizeof(float));
	for (uint64_t i = 0; i < ROWS; i++)
		ids[i] = 5 + 3 * i;
	OK(emdb_client_pull(c, t, ids, ROWS, 64, rows));
	cr_assert_geq(info_memory(c, "huge_pages_regions") - regions + info_memory(c, "huge_pages_fallbacks") - falls,
		      3, "every chunk came from the pool or fell back, counted");

	cr_assert_eq(emdb_client_config_set(c, "huge_pages", "always"), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_client_last_error(), "off, try or on"), "%s", emdb_client_last_error());
	OK(emdb_client_config_set(c, "huge_pages", "off"));
	OK(emdb_client_config_get(c, "huge_pages", &kv, &n));
	cr_assert_str_eq(kv[0].value, "off");
	emdb_free(kv);
	regions = info_memory(c, "huge_pages_regions"), falls = info_memory(c, "huge_pages_fallbacks");
	for (uint64_t i = 0; i < ROWS; i++)
		ids[i] = 7 + 3 * i + 100000;
	OK(emdb_client_pull(c, t, ids, ROWS, 64, rows));
	cr_assert_eq(info_memory(c, "huge_pages_regions"), regions, "off takes nothing from the pool");
	cr_assert_eq(info_memory(c, "huge_pages_fallbacks"), falls);
	free(ids);
	free(rows);
	emdb_client_close(c);
}

/* A worker rank needs WORKER, protocol version 4's: against a server that
 * speaks only 3 the connect fails with UNSUPPORTED naming both versions,
 * and the server hears no WORKER frame (it would hang up on it). */
Test(client_net, worker_rank_against_a_version_3_server_is_unsupported, .timeout = 60)
{
	v1_server vs;
	old_start(&vs, 3);
	char uri[160];
	snprintf(uri, sizeof(uri), "unix://%s", vs.path);
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.worker_rank = 1;
	emdb_client *c = (emdb_client *)1;
	int rc = emdb_client_connect(uri, &o, &c);
	cr_assert_eq(rc, EMDB_ERR_UNSUPPORTED, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	cr_assert_null(c);
	cr_assert(strstr(emdb_client_last_error(), "speaks protocol version 3; a worker rank"), "%s",
		  emdb_client_last_error());
	v1_stop(&vs);
	cr_assert_eq(vs.refused, 0, "the server refused a frame: %s", vs.why);
}
