/*
 * test_server_metrics.c - emdb-server's Prometheus endpoint, black box:
 * scraped as Prometheus scrapes it (a plain HTTP GET of /metrics), its
 * figures checked against the requests the test made, failing ones
 * included; the body checked by `promtool check metrics` where promtool
 * is installed (Debian's prometheus package); only GET /metrics answered;
 * nothing listening unless metrics_port is set, loopback unless told
 * otherwise; a port that cannot be had refused at start with its reason.
 *
 * Every server is killed by the .fini fixture, after a failed assertion
 * too, and its data directory removed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/client.h>
#include <emdb/error.h>

#include "tests/lib/client_server.h"
#include "tests/lib/http_scrape.h"
#include "tests/lib/tmpdir.h"

#define OK(call) cr_assert_eq((call), EMDB_OK, "%s: %s", #call, emdb_client_last_error())
#define CALL_MS 60000

static test_server srv;
static emdb_client *cl;
static int reserved = -1;        /* the socket holding the metrics port until the server has it */
static char data_dir[64];
static char scratch[64];         /* promtool's input and output, exit logs */

static void stop_all(void)
{
	if (cl)
		emdb_client_close(cl);
	cl = NULL;
	test_server_stop(&srv);
	if (reserved >= 0)
		close(reserved);
	reserved = -1;
	if (data_dir[0])
		tmpdir_remove(data_dir);
	data_dir[0] = 0;
	if (scratch[0])
		tmpdir_remove(scratch);
	scratch[0] = 0;
}

TestSuite(metrics, .fini = stop_all, .timeout = 180);

/* ---- a port for the endpoint ---------------------------------------- */

/* A free loopback port, held by a bound (not listening) SO_REUSEADDR
 * socket so that no other test is handed it meanwhile; the server, which
 * also sets SO_REUSEADDR, can still listen on it.  Released by stop_all. */
static uint16_t reserve_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0, "socket: %s", strerror(errno));
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0, "bind: %s", strerror(errno));
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	reserved = fd;
	return ntohs(a.sin_port);
}

/* Start srv with the endpoint on a free port (returned) and the extra
 * flags (NULL-terminated, may be NULL). */
static uint16_t start_with_metrics(const char *const *extra)
{
	static char port_arg[16];
	uint16_t port = reserve_port();
	snprintf(port_arg, sizeof(port_arg), "%u", port);
	const char *argv[24] = { "--metrics-port", port_arg };
	int n = 2;
	for (int i = 0; extra && extra[i] && n < 22; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	test_server_start(&srv, argv);
	cl = test_client_open(srv.tcp_uri, CALL_MS);
	return port;
}

/* ---- the server's listening sockets, from /proc ----------------------- */

typedef struct listening {
	char addr[64]; /* as /proc/net/tcp writes it: "0100007F" */
	unsigned port;
} listening;

/* The TCP sockets pid listens on (at most max), by matching its
 * descriptors' socket inodes against /proc/net/tcp{,6}. */
static size_t listening_of(pid_t pid, listening *out, size_t max)
{
	unsigned long inodes[256];
	size_t n_in = 0, n = 0;
	char path[64], link[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	cr_assert_not_null(d, "%s: %s", path, strerror(errno));
	for (struct dirent *e; (e = readdir(d)) && n_in < 256;) {
		char fdpath[320];
		snprintf(fdpath, sizeof(fdpath), "%s/%s", path, e->d_name);
		ssize_t k = readlink(fdpath, link, sizeof(link) - 1);
		if (k <= 0)
			continue;
		link[k] = '\0';
		unsigned long ino;
		if (sscanf(link, "socket:[%lu]", &ino) == 1)
			inodes[n_in++] = ino;
	}
	closedir(d);
	const char *tables[] = { "/proc/net/tcp", "/proc/net/tcp6" };
	for (size_t t = 0; t < 2; t++) {
		FILE *f = fopen(tables[t], "r");
		if (!f)
			continue;
		char line[512];
		while (fgets(line, sizeof(line), f) && n < max) {
			char local[64];
			unsigned port, st;
			unsigned long ino;
			if (sscanf(line, " %*d: %63[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x %*s %*s %*s %*s %*s %lu", local,
				   &port, &st, &ino) != 4 || st != 0x0A)
				continue;
			for (size_t i = 0; i < n_in; i++)
				if (inodes[i] == ino) {
					snprintf(out[n].addr, sizeof(out[n].addr), "%s", local);
					out[n++].port = port;
				}
		}
		fclose(f);
	}
	return n;
}

/* ---- tests ---------------------------------------------------------- */

/* The figures a user would check against what was done: requests by
 * operation, failures by operation and by code, latency histograms,
 * tables, connections, traffic. */
Test(metrics, counts_match_the_requests_made)
{
	uint16_t port = start_with_metrics(NULL);
	for (int i = 0; i < 3; i++)
		OK(emdb_client_ping(cl));
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	snprintf(cfg.name, sizeof(cfg.name), "clicks");
	cfg.dim = 4;
	uint32_t t;
	OK(emdb_client_table_create(cl, &cfg, &t));
	cr_assert_eq(emdb_client_table_create(cl, &cfg, NULL), EMDB_ERR_EXISTS, "second create of 'clicks'");
	uint64_t ids[5] = { 1, 2, 3, 4, 5 };
	float out[5 * 4];
	OK(emdb_client_pull(cl, t, ids, 5, 4, out));
	cr_assert_eq(emdb_client_pull(cl, 999, ids, 5, 4, out), EMDB_ERR_NO_TABLE, "pull of table 999");
	cr_assert_eq(emdb_client_pull(cl, 998, ids, 1, 4, out), EMDB_ERR_NO_TABLE, "pull of table 998");

	http_resp r = scrape(port);
	const char *b = r.body;
	EXPECT_SAMPLE(b, "emdb_requests_total{op=\"ping\"}", 3);
	EXPECT_SAMPLE(b, "emdb_request_errors_total{op=\"ping\"}", 0);
	EXPECT_SAMPLE(b, "emdb_requests_total{op=\"table_create\"}", 2);
	EXPECT_SAMPLE(b, "emdb_request_errors_total{op=\"table_create\"}", 1);
	EXPECT_SAMPLE(b, "emdb_requests_total{op=\"pull\"}", 3);
	EXPECT_SAMPLE(b, "emdb_request_errors_total{op=\"pull\"}", 2);
	EXPECT_SAMPLE(b, "emdb_requests_total{op=\"lookup\"}", 0);
	EXPECT_SAMPLE(b, "emdb_errors_total{code=\"EXISTS\"}", 1);
	EXPECT_SAMPLE(b, "emdb_errors_total{code=\"NO_TABLE\"}", 2);
	EXPECT_SAMPLE(b, "emdb_errors_total{code=\"NOMEM\"}", 0);
	/* The histogram of PING: cumulative, ending in +Inf == _count == 3. */
	EXPECT_SAMPLE(b, "emdb_request_duration_seconds_bucket{op=\"ping\",le=\"+Inf\"}", 3);
	EXPECT_SAMPLE(b, "emdb_request_duration_seconds_count{op=\"ping\"}", 3);
	cr_assert_geq(value_of(b, "emdb_request_duration_seconds_sum{op=\"ping\"}"), 0);
	double prev = 0;
	int buckets = 0;
	for (const char *p = strstr(b, "emdb_request_duration_seconds_bucket{op=\"ping\""); p;
	     p = strstr(p + 1, "emdb_request_duration_seconds_bucket{op=\"ping\"")) {
		double v = strtod(strchr(p, ' ') + 1, NULL);
		cr_assert_geq(v, prev, "buckets must be cumulative: %.120s", p);
		prev = v;
		buckets++;
	}
	cr_assert_gt(buckets, 10);
	/* No histogram for an operation never called. */
	cr_assert_null(strstr(b, "emdb_request_duration_seconds_count{op=\"lookup\"}"));

	EXPECT_SAMPLE(b, "emdb_tables", 1);
	EXPECT_SAMPLE(b, "emdb_table_rows{table=\"clicks\"}", 5);
	EXPECT_SAMPLE(b, "emdb_table_ids_total{table=\"clicks\",op=\"pull\"}", 5);
	cr_assert_gt(value_of(b, "emdb_table_memory_bytes{table=\"clicks\"}"), 0);
	/* No gpu_memory: the table is in host memory only (docs/gpu.md). */
	EXPECT_SAMPLE(b, "emdb_tier_devices{table=\"clicks\"}", 0);
	EXPECT_SAMPLE(b, "emdb_tier_device_failed{table=\"clicks\"}", 0);
	EXPECT_SAMPLE(b, "emdb_tier_steps_device_total{table=\"clicks\"}", 0);
	EXPECT_SAMPLE(b, "emdb_tier_fallbacks_total{table=\"clicks\"}", 0);
	cr_assert_null(strstr(b, "emdb_tier_rows_gathered_total"), "no device, no per-device family");
	/* The scrape is not a client connection. */
	EXPECT_SAMPLE(b, "emdb_connections", 1);
	EXPECT_SAMPLE(b, "emdb_connections_accepted_total", 1);
	EXPECT_SAMPLE(b, "emdb_connections_refused_total", 0);
	cr_assert_gt(value_of(b, "emdb_received_bytes_total"), 0);
	cr_assert_gt(value_of(b, "emdb_sent_bytes_total"), 5 * 4 * sizeof(float));
	cr_assert_gt(value_of(b, "emdb_memory_used_bytes"), 0);
	EXPECT_SAMPLE(b, "emdb_persistence_enabled", 0);
	cr_assert(strstr(b, "# TYPE emdb_request_duration_seconds histogram\n"), "%s", b);
	cr_assert(strstr(b, "# TYPE emdb_requests_total counter\n"));
	http_free(&r);

	/* A second scrape sees the next request, and nothing of the first
	 * scrape; and a refusal before any handler: garbage on a fresh
	 * connection, answered PROTOCOL and closed. */
	OK(emdb_client_ping(cl));
	int raw = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(srv.port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(connect(raw, (struct sockaddr *)&a, sizeof(a)), 0);
	char junk[64];
	memset(junk, 'x', sizeof(junk));
	cr_assert_eq(send(raw, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
	char sink[256];
	for (uint64_t end = http_now_ms() + HTTP_WAIT_MS;;) {
		struct pollfd p = { raw, POLLIN, 0 };
		cr_assert_lt(http_now_ms(), end, "the server did not close a connection that sent garbage");
		if (poll(&p, 1, 100) > 0 && recv(raw, sink, sizeof(sink), 0) <= 0)
			break;
	}
	close(raw);
	r = scrape(port);
	EXPECT_SAMPLE(r.body, "emdb_requests_total{op=\"ping\"}", 4);
	EXPECT_SAMPLE(r.body, "emdb_connections_accepted_total", 2);
	EXPECT_SAMPLE(r.body, "emdb_protocol_errors_total", 1);
	EXPECT_SAMPLE(r.body, "emdb_errors_total{code=\"PROTOCOL\"}", 1);
	EXPECT_SAMPLE(r.body, "emdb_errors_total{code=\"NO_TABLE\"}", 2);
	http_free(&r);
}

#define PINGS 2000

static void *pinger(void *arg)
{
	emdb_client *c = arg;
	for (int i = 0; i < PINGS; i++)
		if (emdb_client_ping(c) != EMDB_OK)
			return (void *)1;
	return NULL;
}

/* Scrapes while requests run on the I/O thread: each sees a count no
 * lower than the one before (never torn, never going back), and once the
 * requests are done the count is exact. */
Test(metrics, scrapes_while_requests_run)
{
	uint16_t port = start_with_metrics(NULL);
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, pinger, cl), 0);
	double prev = 0;
	for (int i = 0; i < 50; i++) {
		http_resp r = scrape(port);
		double v = value_of(r.body, "emdb_requests_total{op=\"ping\"}");
		http_free(&r);
		cr_assert_geq(v, prev, "scrape %d: %g PINGs after %g", i, v, prev);
		cr_assert_leq(v, PINGS);
		prev = v;
	}
	void *failed;
	pthread_join(th, &failed);
	cr_assert_null(failed, "a PING failed: %s", emdb_client_last_error());
	http_resp r = scrape(port);
	EXPECT_SAMPLE(r.body, "emdb_requests_total{op=\"ping\"}", PINGS);
	EXPECT_SAMPLE(r.body, "emdb_request_duration_seconds_count{op=\"ping\"}", PINGS);
	http_free(&r);
}

/* Checkpoint and restore figures, totals and last, with a store. */
Test(metrics, checkpoint_and_restore_figures)
{
	strcpy(data_dir, "/tmp/emdb-metrics-test-XXXXXX");
	cr_assert_not_null(mkdtemp(data_dir));
	const char *extra[] = { "--data-dir", data_dir, NULL };
	uint16_t port = start_with_metrics(extra);
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	snprintf(cfg.name, sizeof(cfg.name), "ads");
	cfg.dim = 8;
	uint32_t t;
	OK(emdb_client_table_create(cl, &cfg, &t));
	uint64_t ids[100];
	for (int i = 0; i < 100; i++)
		ids[i] = (uint64_t)i * 7 + 1;
	emdb_client_ticket *tk;
	OK(emdb_client_prefetch(cl, t, ids, 100, &tk));
	emdb_client_ticket_free(tk);

	http_resp r = scrape(port);
	EXPECT_SAMPLE(r.body, "emdb_persistence_enabled", 1);
	EXPECT_SAMPLE(r.body, "emdb_checkpoints_stored", 0);
	EXPECT_SAMPLE(r.body, "emdb_checkpoint_jobs_total{result=\"done\"}", 0);
	cr_assert_null(strstr(r.body, "emdb_checkpoint_last_rows"), "no checkpoint yet: no last one");
	http_free(&r);

	emdb_ckpt_info ck, rs;
	OK(emdb_client_checkpoint(cl, EMDB_CKPT_FULL, &ck));
	OK(emdb_client_restore(cl, 0, &rs));
	cr_assert_eq(emdb_client_restore(cl, 77, NULL), EMDB_ERR_INVALID, "restore of a checkpoint not held");
	r = scrape(port);
	const char *b = r.body;
	EXPECT_SAMPLE(b, "emdb_checkpoints_stored", 1);
	EXPECT_SAMPLE(b, "emdb_checkpoint_store_ok", 1);
	EXPECT_SAMPLE(b, "emdb_checkpoint_jobs_total{result=\"done\"}", 1);
	EXPECT_SAMPLE(b, "emdb_checkpoint_jobs_total{result=\"failed\"}", 0);
	EXPECT_SAMPLE(b, "emdb_checkpoint_last_rows", 100);
	EXPECT_SAMPLE(b, "emdb_checkpoint_rows_total", 100);
	EXPECT_SAMPLE(b, "emdb_checkpoint_last_bytes", (double)ck.bytes);
	cr_assert_gt(ck.bytes, 0);
	EXPECT_SAMPLE(b, "emdb_restore_jobs_total{result=\"done\"}", 1);
	EXPECT_SAMPLE(b, "emdb_restore_last_rows", 100);
	cr_assert_gt(value_of(b, "emdb_restore_last_bytes"), 0);
	cr_assert_gt(value_of(b, "emdb_checkpoint_last_duration_seconds"), 0);
	cr_assert_geq(value_of(b, "emdb_checkpoint_duration_seconds_total"),
		      value_of(b, "emdb_checkpoint_last_duration_seconds"));
	cr_assert_gt(value_of(b, "emdb_checkpoint_last_created_timestamp_seconds"), 1.7e9);
	EXPECT_SAMPLE(b, "emdb_checkpoint_job_running", 0);
	EXPECT_SAMPLE(b, "emdb_requests_total{op=\"checkpoint\"}", 1);
	EXPECT_SAMPLE(b, "emdb_table_rows{table=\"ads\"}", 100);
	http_free(&r);
}

/* Only GET (and HEAD) of /metrics: another path is 404, another method
 * 405 with the methods allowed; neither disturbs the next scrape.  The
 * endpoint ends with the server's orderly shutdown. */
Test(metrics, only_get_metrics_is_served)
{
	uint16_t port = start_with_metrics(NULL);
	http_resp r = http_do(port, "GET", "/");
	cr_assert_eq(r.status, 404, "GET /: %d", r.status);
	http_free(&r);
	r = http_do(port, "GET", "/metricsx");
	cr_assert_eq(r.status, 404);
	http_free(&r);
	r = http_do(port, "POST", "/metrics");
	cr_assert_eq(r.status, 405, "POST /metrics: %d", r.status);
	cr_assert(strstr(r.allow, "GET"), "Allow: '%s'", r.allow);
	http_free(&r);
	r = http_do(port, "DELETE", "/metrics");
	cr_assert_eq(r.status, 405);
	http_free(&r);
	r = http_do(port, "HEAD", "/metrics");
	cr_assert_eq(r.status, 200);
	cr_assert_eq(r.len, 0, "HEAD has no body");
	http_free(&r);
	/* A query string does not change the path. */
	r = http_do(port, "GET", "/metrics?x=1");
	cr_assert_eq(r.status, 200);
	http_free(&r);
	r = scrape(port);
	cr_assert(strstr(r.body, "emdb_build_info{version=\"emdb "), "%s", r.body);
	http_free(&r);
	OK(emdb_client_ping(cl)); /* the server serves on */

	/* SIGTERM with a scraper's connection open and silent: the endpoint
	 * stops with the server, which exits 0 with a clean log (a leak or a
	 * race of its thread would show there under a sanitizer). */
	int idle = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(connect(idle, (struct sockaddr *)&a, sizeof(a)), 0);
	emdb_client_close(cl);
	cl = NULL;
	cr_assert_eq(kill(srv.pid, SIGTERM), 0);
	int st = -1;
	for (uint64_t end = http_now_ms() + 30000; http_now_ms() < end; test_sleep_ms(10))
		if (waitpid(srv.pid, &st, WNOHANG) == srv.pid) {
			srv.pid = 0;
			break;
		}
	close(idle);
	cr_assert_eq(srv.pid, 0, "the server did not exit within 30 s of SIGTERM: %s", test_server_log_tail(&srv));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status 0x%x: %s", st, test_server_log_tail(&srv));
	cr_assert_null(strstr(test_server_log_tail(&srv), "Sanitizer"), "%s", test_server_log_tail(&srv));
	cr_assert_null(strstr(test_server_log_tail(&srv), "[error]"), "%s", test_server_log_tail(&srv));
}

/* Off unless metrics_port is set: the server listens on its TCP port and
 * nothing else; on, the endpoint listens on loopback by default. */
Test(metrics, off_by_default_and_loopback_when_on)
{
	test_server_start(&srv, NULL);
	listening l[8];
	size_t n = listening_of(srv.pid, l, 8);
	cr_assert_eq(n, 1, "%zu TCP listeners without metrics_port (expected only the client port)", n);
	cr_assert_eq(l[0].port, srv.port);
	cr_assert_null(strstr(server_log_tail(srv.log), "metrics:"), "%s", server_log_tail(srv.log));
	cl = test_client_open(srv.tcp_uri, CALL_MS);
	emdb_client_kv *kv = NULL;
	size_t nk = 0;
	OK(emdb_client_config_get(cl, "metrics_*", &kv, &nk));
	bool saw_port = false, saw_addr = false;
	for (size_t i = 0; i < nk; i++) {
		if (!strcmp(kv[i].key, "metrics_port")) {
			saw_port = true;
			cr_assert_str_eq(kv[i].value, "0");
		} else if (!strcmp(kv[i].key, "metrics_address")) {
			saw_addr = true;
			cr_assert_str_eq(kv[i].value, "127.0.0.1");
		}
	}
	emdb_free(kv);
	cr_assert(saw_port && saw_addr, "CONFIG GET metrics_* gave %zu keys", nk);
	emdb_client_close(cl);
	cl = NULL;
	test_server_stop(&srv);

	uint16_t port = start_with_metrics(NULL);
	n = listening_of(srv.pid, l, 8);
	cr_assert_eq(n, 2, "%zu TCP listeners with metrics_port", n);
	bool found = false;
	for (size_t i = 0; i < n; i++)
		if (l[i].port == port) {
			found = true;
			cr_assert_str_eq(l[i].addr, "0100007F", "metrics bound to %s, not 127.0.0.1", l[i].addr);
		}
	cr_assert(found, "nothing listens on metrics port %u", port);
	char want[96];
	snprintf(want, sizeof(want), "metrics: serving http://127.0.0.1:%u/metrics", port);
	cr_assert(strstr(server_log_tail(srv.log), want), "%s", server_log_tail(srv.log));
}

/* Run the server binary with args (NULL-terminated) to its exit, its
 * output into log; returns the wait status. */
static int run_to_exit(const char *const *args, const char *log)
{
	const char *argv[24] = { server_bin() };
	int n = 1;
	for (int i = 0; args[i] && n < 23; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int devnull = open("/dev/null", O_RDWR);
		dup2(devnull, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	srv.pid = pid; /* killed by stop_all should the test fail first */
	int st = 0;
	for (int waited = 0; waited < 30000; waited += 10) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			srv.pid = 0;
			return st;
		}
		test_sleep_ms(10);
	}
	cr_assert_fail("emdb-server %s did not exit within 30 s: %s", args[0], server_log_tail(log));
	return -1;
}

/* A port that cannot be had stops the start with a message saying which
 * setting and why; so do a port out of range and an address of no
 * interface of this machine. */
Test(metrics, a_bad_port_is_refused_at_start)
{
	strcpy(scratch, "/tmp/emdb-metrics-test-XXXXXX");
	cr_assert_not_null(mkdtemp(scratch));
	char log[128];
	snprintf(log, sizeof(log), "%s/server.log", scratch);

	const char *range[] = { "--port", "0", "--metrics-port", "70000", NULL };
	int st = run_to_exit(range, log);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status 0x%x", st);
	cr_assert(strstr(server_log_tail(log), "metrics_port: 70000 is outside 0..65535"), "%s",
		  server_log_tail(log));

	/* A port another socket listens on. */
	int busy = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	cr_assert_eq(bind(busy, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(busy, 1), 0);
	cr_assert_eq(getsockname(busy, (struct sockaddr *)&a, &len), 0);
	reserved = busy; /* closed by stop_all */
	char port[16];
	snprintf(port, sizeof(port), "%u", ntohs(a.sin_port));
	const char *in_use[] = { "--port", "0", "--metrics-port", port, NULL };
	st = run_to_exit(in_use, log);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status 0x%x", st);
	char want[128];
	snprintf(want, sizeof(want), "listen on 127.0.0.1:%s: Address already in use", port);
	cr_assert(strstr(server_log_tail(log), want), "%s", server_log_tail(log));
	cr_assert(strstr(server_log_tail(log), "metrics"), "%s", server_log_tail(log));

	/* An address of no interface here (TEST-NET-1). */
	const char *bad_addr[] = { "--port", "0", "--metrics-port", port, "--metrics-address", "192.0.2.1", NULL };
	st = run_to_exit(bad_addr, log);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status 0x%x", st);
	snprintf(want, sizeof(want), "listen on 192.0.2.1:%s: Cannot assign requested address", port);
	cr_assert(strstr(server_log_tail(log), want), "%s", server_log_tail(log));
}

/* promtool, from Debian's prometheus package, if installed. */
static const char *promtool(void)
{
	static char path[512];
	const char *env = getenv("PATH");
	char dirs[4096];
	snprintf(dirs, sizeof(dirs), "%s:/usr/bin:/usr/local/bin", env ? env : "");
	for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(path, sizeof(path), "%s/promtool", d);
		if (access(path, X_OK) == 0)
			return path;
	}
	return NULL;
}

/* The body, with every family there is (a store, a checkpoint, a
 * restore, a table, failures), passes `promtool check metrics`: the
 * format and Prometheus's naming rules. */
Test(metrics, promtool_accepts_the_body)
{
	const char *tool = promtool();
	if (!tool)
		cr_skip_test("promtool not found (Debian package prometheus; tools/deps.sh installs it): format not checked");
	strcpy(data_dir, "/tmp/emdb-metrics-test-XXXXXX");
	cr_assert_not_null(mkdtemp(data_dir));
	strcpy(scratch, "/tmp/emdb-metrics-test-XXXXXX");
	cr_assert_not_null(mkdtemp(scratch));
	const char *extra[] = { "--data-dir", data_dir, NULL };
	uint16_t port = start_with_metrics(extra);
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	snprintf(cfg.name, sizeof(cfg.name), "user.emb-1");
	cfg.dim = 4;
	uint32_t t;
	OK(emdb_client_table_create(cl, &cfg, &t));
	uint64_t ids[3] = { 1, 2, 3 };
	float out[3 * 4];
	OK(emdb_client_pull(cl, t, ids, 3, 4, out));
	OK(emdb_client_lookup(cl, t, ids, 3, 4, out, NULL));
	cr_assert_eq(emdb_client_pull(cl, t, ids, 3, 8, out), EMDB_ERR_DIM);
	OK(emdb_client_checkpoint(cl, EMDB_CKPT_FULL, NULL));
	OK(emdb_client_restore(cl, 0, NULL));

	http_resp r = scrape(port);
	char in[128], res[128];
	snprintf(in, sizeof(in), "%s/metrics.txt", scratch);
	snprintf(res, sizeof(res), "%s/promtool.out", scratch);
	FILE *f = fopen(in, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(r.body, 1, r.len, f), r.len);
	fclose(f);
	http_free(&r);

	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int i = open(in, O_RDONLY), o = open(res, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(i, 0);
		dup2(o, 1);
		dup2(o, 2);
		execl(tool, "promtool", "check", "metrics", (char *)NULL);
		_exit(127);
	}
	int st = 0;
	int waited = 0;
	while (waitpid(pid, &st, WNOHANG) != pid && waited < 60000) {
		test_sleep_ms(10);
		waited += 10;
	}
	if (waited >= 60000) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		cr_assert_fail("promtool did not finish within 60 s");
	}
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "promtool check metrics: status 0x%x: %s", st,
		  server_log_tail(res));
}
