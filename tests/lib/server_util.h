/*
 * server_util.h - what the emdb-server black-box tests share: starting
 * (and always stopping) a server on an ephemeral loopback port and a Unix
 * socket, raw-socket clients that speak the protocol through
 * protocol/proto.h's encoders and frame reader, and INFO parsing.
 *
 * Every server is started by srv_start and stopped by srv_stop, which the
 * tests run as their .fini fixture, so it runs after a failed assertion
 * too; PR_SET_PDEATHSIG also kills it if the test process dies.
 */
#ifndef EMDB_TEST_SERVER_UTIL_H
#define EMDB_TEST_SERVER_UTIL_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/db.h>

#include "protocol/proto.h"
#include "tests/lib/server_spawn.h"

/* ---- the server process --------------------------------------------- */

typedef struct srv {
	pid_t pid;
	uint16_t port;
	char dir[64];
	char sock[128];
	char log[128];
	char portfile[128];
} srv;

static inline void t_sleep_ms(long ms)
{
	server_sleep_ms(ms);
}

static inline uint64_t t_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The whole log (static buffer, last 64 KiB). */
static inline const char *srv_log(const srv *s)
{
	static char text[65536];
	text[0] = 0;
	int fd = open(s->log, O_RDONLY);
	if (fd < 0)
		return text;
	off_t end = lseek(fd, 0, SEEK_END);
	off_t from = end > (off_t)sizeof(text) - 1 ? end - (off_t)sizeof(text) + 1 : 0;
	ssize_t k = pread(fd, text, sizeof(text) - 1, from);
	text[k > 0 ? k : 0] = 0;
	close(fd);
	return text;
}

/* The server of the running test, for failure messages. */
static srv *t_cur;

/* The last 1.5 KiB of the log, for failure messages. */
static inline const char *srv_log_tail(void)
{
	if (!t_cur || !t_cur->dir[0])
		return "";
	const char *l = srv_log(t_cur);
	size_t n = strlen(l);
	return n > 1536 ? l + n - 1536 : l;
}

/* Kill (SIGKILL) and reap the server, remove its files.  Idempotent. */
static inline void srv_stop(srv *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
			;
		s->pid = 0;
	}
	if (s->dir[0]) {
		unlink(s->sock);
		unlink(s->portfile);
		unlink(s->log);
		rmdir(s->dir);
		s->dir[0] = 0;
	}
}

/* Wait up to ms for the server to exit; returns its wait status, or -1
 * if it still runs. */
static inline int srv_wait_exit(srv *s, long ms)
{
	uint64_t end = t_now_ms() + (uint64_t)ms;
	while (s->pid > 0) {
		int st;
		pid_t r = waitpid(s->pid, &st, WNOHANG);
		if (r == s->pid) {
			s->pid = 0;
			return st;
		}
		if (t_now_ms() > end)
			return -1;
		t_sleep_ms(5);
	}
	return -1;
}

static inline bool srv_alive(srv *s)
{
	return s->pid > 0 && waitpid(s->pid, NULL, WNOHANG) == 0;
}

/* Start emdb-server with extra flags (NULL-terminated, may be NULL) and
 * wait until both listeners are up. */
static inline void srv_start(srv *s, const char *const *extra)
{
	memset(s, 0, sizeof(*s));
	t_cur = s;
#ifndef EMDB_SERVER_BIN
	(void)extra;
	cr_skip_test("emdb-server is not part of this build");
#else
	strcpy(s->dir, "/tmp/emdb-srv-test-XXXXXX");
	cr_assert_not_null(mkdtemp(s->dir), "mkdtemp: %s", strerror(errno));
	snprintf(s->sock, sizeof(s->sock), "%s/emdb.sock", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/server.log", s->dir);
	snprintf(s->portfile, sizeof(s->portfile), "%s/port", s->dir);

	/* server_bin(): EMDB_TEST_SERVER runs another build of the server (a
	 * ThreadSanitizer one, say) under the same tests. */
	const char *argv[64] = {
		server_bin(), "--bind", "127.0.0.1", "--port", "0", "--port-file", s->portfile,
		"--unix-socket", s->sock, "--io-threads", "2", "--log-file", s->log,
	};
	int argc = 13;
	for (int i = 0; extra && extra[i] && argc < 62; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;
	s->port = (uint16_t)server_spawn(argv, s->log, s->portfile, s->sock, 30000, &s->pid);
#endif
}

/* ---- clients -------------------------------------------------------- */

typedef struct cli {
	int fd;
	proto_reader rd;
	uint64_t next_id;
} cli;

static inline void cli_init_fd(cli *c, int fd)
{
	c->fd = fd;
	c->next_id = 1;
	cr_assert_eq(proto_reader_init(&c->rd, true, UINT32_MAX - 7), 0);
}

static inline int cli_try_tcp(cli *c, uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	cli_init_fd(c, fd);
	return 0;
}

static inline void cli_tcp(cli *c, const srv *s)
{
	int rc = cli_try_tcp(c, s->port);
	cr_assert_eq(rc, 0, "connect to 127.0.0.1:%u: %s", s->port, strerror(-rc));
}

static inline void cli_unix(cli *c, const srv *s)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	strcpy(a.sun_path, s->sock);
	cr_assert(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect %s: %s",
		  s->sock, strerror(errno));
	cli_init_fd(c, fd);
}

static inline void cli_close(cli *c)
{
	if (c->fd >= 0) {
		close(c->fd);
		proto_reader_destroy(&c->rd);
	}
	c->fd = -1;
}

/* Send all of buf; returns 0 or -errno (the server may have closed). */
static inline int cli_send_raw(cli *c, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t w = send(c->fd, p, len, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Encode a request with encoder(m) and send it.  Evaluates to its id. */
#define CLI_SEND(c, encoder, m)                                                        \
	__extension__({                                                                \
		uint64_t id_ = (c)->next_id++;                                         \
		size_t len_ = 0;                                                       \
		encoder(NULL, 0, id_, (m), &len_);                                     \
		cr_assert_gt(len_, 0, #encoder ": %s", emdb_last_error());             \
		uint8_t *b_ = malloc(len_);                                            \
		cr_assert_eq(encoder(b_, len_, id_, (m), &len_), 0, #encoder ": %s",   \
			     emdb_last_error());                                       \
		int rc_ = cli_send_raw((c), b_, len_);                                 \
		free(b_);                                                              \
		cr_assert_eq(rc_, 0, "send: %s", strerror(-rc_));                      \
		id_;                                                                   \
	})

static inline uint64_t cli_send_empty(cli *c, uint16_t op)
{
	uint64_t id = c->next_id++;
	uint8_t b[PROTO_HDR_SIZE];
	size_t len;
	cr_assert_eq(proto_empty_encode(b, sizeof(b), id, op, false, &len), 0);
	cr_assert_eq(cli_send_raw(c, b, len), 0);
	return id;
}

/* Next response frame (the caller frees it with proto_frame_free): 1 got
 * one, 0 end of stream, -1 timeout, -2 reader error. */
static inline int cli_recv(cli *c, proto_frame **out, long timeout_ms)
{
	uint64_t end = t_now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		int rc = proto_reader_next(&c->rd, out);
		if (rc == 1)
			return 1;
		if (rc < 0)
			return -2;
		uint64_t now = t_now_ms();
		if (now >= end)
			return -1;
		struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
		int pr = poll(&pfd, 1, (int)(end - now));
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0)
			return -1;
		uint8_t *p;
		size_t n;
		if (proto_reader_space(&c->rd, &p, &n) != 0)
			return -2;
		ssize_t r = recv(c->fd, p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return 0;
		proto_reader_commit(&c->rd, (size_t)r);
	}
}

/* A response that must arrive within 60 s: generous, because the suite
 * also runs against a ThreadSanitizer server, where a push of a million
 * new IDs (load::big_frames) alone takes about 10 s. */
static inline proto_frame *cli_resp(cli *c)
{
	proto_frame *f = NULL;
	int rc = cli_recv(c, &f, 60000);
	cr_assert_eq(rc, 1, "no response (rc %d); server log:\n%s", rc, srv_log_tail());
	return f;
}

/* Expect the response to id: status OK (returned for decoding) or fail. */
static inline proto_frame *cli_ok(cli *c, uint64_t id)
{
	proto_frame *f = cli_resp(c);
	cr_assert_eq(f->hdr.id, id, "response id %llu, expected %llu",
		     (unsigned long long)f->hdr.id, (unsigned long long)id);
	if (f->hdr.status != 0) {
		proto_str m = { 0 };
		proto_err_decode(&f->hdr, f->body, &m);
		cr_assert_fail("request %llu (%s) failed: %s %.*s", (unsigned long long)id,
			 proto_op_name(f->hdr.opcode), emdb_err_name(f->hdr.status), (int)m.len, m.p);
	}
	return f;
}

/* Expect an error response with `status` to id (any id when id is
 * UINT64_MAX); returns the message in msg[cap]. */
static inline void cli_err(cli *c, uint64_t id, int status, char *msg, size_t cap)
{
	proto_frame *f = cli_resp(c);
	if (id != UINT64_MAX)
		cr_assert_eq(f->hdr.id, id, "response id %llu, expected %llu",
			     (unsigned long long)f->hdr.id, (unsigned long long)id);
	cr_assert_eq(f->hdr.status, status, "status %s, expected %s (%s)",
		     emdb_err_name(f->hdr.status), emdb_err_name(status), proto_op_name(f->hdr.opcode));
	proto_str m = { 0 };
	cr_assert_eq(proto_err_decode(&f->hdr, f->body, &m), 0);
	if (msg)
		snprintf(msg, cap, "%.*s", (int)m.len, m.p);
	proto_frame_free(f);
}

/* The server closed the connection (EOF or reset) within 5 s. */
static inline void cli_expect_closed(cli *c)
{
	proto_frame *f = NULL;
	int rc = cli_recv(c, &f, 5000);
	if (rc == 1)
		proto_frame_free(f);
	cr_assert_eq(rc, 0, "connection still open (rc %d)", rc);
}

/* HELLO offering versions lo..hi; returns the version the server chose.
 * From then on the reader refuses any frame of a higher version. */
static inline uint16_t cli_hello_versions(cli *c, uint16_t lo, uint16_t hi, proto_hello_resp *out)
{
	proto_hello_req h = { lo, hi, proto_cstr("test") };
	uint64_t id = CLI_SEND(c, proto_hello_req_encode, &h);
	proto_frame *f = cli_ok(c, id);
	cr_assert_eq(f->hdr.version, 1, "a HELLO response is always of version 1");
	proto_hello_resp r;
	cr_assert_eq(proto_hello_resp_decode(&f->hdr, f->body, &r), 0, "%s", emdb_last_error());
	proto_reader_set_version(&c->rd, (uint8_t)r.version);
	if (out)
		*out = r;
	proto_frame_free(f);
	return r.version;
}

/* HELLO with every version this build speaks: the server, of the same
 * build, chooses the newest. */
static inline void cli_hello(cli *c, proto_hello_resp *out)
{
	uint16_t v = cli_hello_versions(c, PROTO_VERSION_MIN, PROTO_VERSION_MAX, out);
	cr_assert_eq(v, PROTO_VERSION_MAX);
}

static inline proto_role cli_auth(cli *c, const char *token)
{
	proto_auth_req a = { proto_cstr(token) };
	uint64_t id = CLI_SEND(c, proto_auth_req_encode, &a);
	proto_frame *f = cli_ok(c, id);
	proto_auth_resp r;
	cr_assert_eq(proto_auth_resp_decode(&f->hdr, f->body, &r), 0);
	proto_frame_free(f);
	return r.role;
}

/* Connected over TCP and past HELLO (no token: admin on loopback). */
static inline void cli_ready(cli *c, const srv *s)
{
	cli_tcp(c, s);
	cli_hello(c, NULL);
}

static inline void cli_ping(cli *c)
{
	proto_ping p = { proto_cstr("ping!") };
	uint64_t id = CLI_SEND(c, proto_ping_req_encode, &p);
	proto_frame *f = cli_ok(c, id);
	proto_ping r;
	cr_assert_eq(proto_ping_resp_decode(&f->hdr, f->body, &r), 0);
	cr_assert_eq(r.data.len, 5);
	cr_assert_eq(memcmp(r.data.p, "ping!", 5), 0);
	proto_frame_free(f);
}

/* CONFIG SET key value, which must succeed. */
static inline void cli_config_set(cli *c, const char *key, const char *value)
{
	proto_kv kv = { proto_cstr(key), proto_cstr(value) };
	proto_config_set_req s = { 1, &kv, NULL, 0 };
	uint64_t id = CLI_SEND(c, proto_config_set_req_encode, &s);
	proto_frame_free(cli_ok(c, id));
}

/* INFO text of a section (malloc'd, NUL-terminated). */
static inline char *cli_info(cli *c, const char *section)
{
	proto_info_req q = { proto_cstr(section) };
	uint64_t id = CLI_SEND(c, proto_info_req_encode, &q);
	proto_frame *f = cli_ok(c, id);
	proto_info_resp r;
	cr_assert_eq(proto_info_resp_decode(&f->hdr, f->body, &r), 0);
	char *t = malloc(r.text.len + 1);
	memcpy(t, r.text.p, r.text.len);
	t[r.text.len] = 0;
	proto_frame_free(f);
	return t;
}

/* A numeric "key: value" of INFO; -1 when missing. */
static inline long long info_num(const char *text, const char *key)
{
	size_t kl = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (!strncmp(p, key, kl) && p[kl] == ':')
			return atoll(p + kl + 1);
	}
	return -1;
}

static inline long long cli_info_num(cli *c, const char *section, const char *key)
{
	char *t = cli_info(c, section);
	long long v = info_num(t, key);
	free(t);
	return v;
}

/* The same through a fresh connection of its own. */
static inline long long cli_info_num_other(const srv *s, const char *section, const char *key)
{
	cli o;
	cli_ready(&o, s);
	long long v = cli_info_num(&o, section, key);
	cli_close(&o);
	return v;
}

/* SHUTDOWN through an admin connection; the server must exit 0 within
 * 20 s with a clean log (under ASan, a leak or error exits nonzero). */
static inline void srv_shutdown_clean(srv *s, cli *admin)
{
	uint64_t id = cli_send_empty(admin, PROTO_OP_SHUTDOWN);
	proto_frame_free(cli_ok(admin, id));
	int st = srv_wait_exit(s, 20000);
	cr_assert(st != -1, "the server did not exit after SHUTDOWN: %s", srv_log_tail());
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status 0x%x: %s", st, srv_log_tail());
	const char *log = srv_log(s);
	cr_assert_null(strstr(log, "Sanitizer"), "%s", log);
	cr_assert_null(strstr(log, "[error]"), "%s", log);
}

static inline uint32_t cli_create_table(cli *c, const char *name, uint32_t dim)
{
	proto_table_create_req q;
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	snprintf(cfg.name, sizeof(cfg.name), "%s", name);
	cfg.dim = dim;
	cfg.optimizer.lr = 0.5;
	q.cfg = cfg;
	uint64_t id = CLI_SEND(c, proto_table_create_req_encode, &q);
	proto_frame *f = cli_ok(c, id);
	proto_table_create_resp r;
	cr_assert_eq(proto_table_create_resp_decode(&f->hdr, f->body, &r), 0);
	proto_frame_free(f);
	return r.table;
}

static inline emdb_table_info cli_describe(cli *c, uint32_t table)
{
	proto_table_describe_req q = { .table = table };
	uint64_t id = CLI_SEND(c, proto_table_describe_req_encode, &q);
	proto_frame *f = cli_ok(c, id);
	proto_table_describe_resp r;
	cr_assert_eq(proto_table_describe_resp_decode(&f->hdr, f->body, &r), 0);
	proto_frame_free(f);
	return r.info;
}

#endif
