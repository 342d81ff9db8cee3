/*
 * client_server.h - starting and always stopping an emdb-server for
 * the client's black-box tests.
 *
 * The server listens on 127.0.0.1 with an ephemeral port (--port 0, read
 * back from --port-file) and on a Unix socket in a fresh temporary
 * directory.  It is killed by test_server_stop, which the tests run as
 * their .fini fixture (Criterion runs it after a failed assertion too), and
 * it dies with the test process in any case (PR_SET_PDEATHSIG), so no
 * server outlives its test.  Without EMDB_SERVER_BIN (no emdb-server in
 * the build) test_server_start skips the test.

 */
#ifndef EMDB_TEST_CLIENT_SERVER_H
#define EMDB_TEST_CLIENT_SERVER_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <emdb/client.h>

#include "tests/lib/server_spawn.h"

typedef struct test_server {
	pid_t pid;
	uint16_t port;
	char dir[64];
	char sock[128];
	char log[128];
	char tcp_uri[256];
	char unix_uri[256];
} test_server;

static inline void test_sleep_ms(long ms)
{
	server_sleep_ms(ms);
}

/* A client of uri whose calls time out after timeout_ms; the test fails
 * where it cannot connect. */
static inline emdb_client *test_client_open(const char *uri, uint32_t timeout_ms)
{
	emdb_client *c = NULL;
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.timeout_ms = timeout_ms;
	int rc = emdb_client_connect(uri, &o, &c);
	cr_assert_eq(rc, EMDB_OK, "connect %s: %s", uri, emdb_client_last_error());
	return c;
}

/* The last lines of the server's log, for failure messages. */
static inline const char *test_server_log_tail(const test_server *s)
{
	return server_log_tail(s->log);
}

/* Kill and reap the server, remove its files.  Idempotent. */
static inline void test_server_stop(test_server *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
			;
		s->pid = 0;
	}
	if (s->dir[0]) {
		char p[160];
		unlink(s->sock);
		snprintf(p, sizeof(p), "%s/port", s->dir);
		unlink(p);
		unlink(s->log);
		rmdir(s->dir);
		s->dir[0] = 0;
	}
}

/* Start emdb-server with the extra flags in extra[] (NULL-terminated, may
 * be NULL) and wait until both listeners are up. */
static inline void test_server_start(test_server *s, const char *const *extra)
{
#ifndef EMDB_SERVER_BIN
	(void)extra;
	memset(s, 0, sizeof(*s));
	cr_skip_test("emdb-server is not part of this build");
#else
	memset(s, 0, sizeof(*s));
	strcpy(s->dir, "/tmp/emdb-client-test-XXXXXX");
	cr_assert_not_null(mkdtemp(s->dir), "mkdtemp: %s", strerror(errno));
	snprintf(s->sock, sizeof(s->sock), "%s/emdb.sock", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/server.log", s->dir);
	char portfile[160];
	snprintf(portfile, sizeof(portfile), "%s/port", s->dir);

	const char *argv[48] = {
		server_bin(), "--bind", "127.0.0.1", "--port", "0", "--port-file", portfile,
		"--unix-socket", s->sock, "--io-threads", "2", "--log-level", "info", "--log-file", s->log,
	};
	int argc = 15;
	for (int i = 0; extra && extra[i] && argc < 46; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;

	/* Up to 20 s: sanitizer builds start slowly. */
	unsigned port = server_spawn(argv, s->log, portfile, s->sock, 20000, &s->pid);
	s->port = (uint16_t)port;
	snprintf(s->tcp_uri, sizeof(s->tcp_uri), "tcp://127.0.0.1:%u", port);
	snprintf(s->unix_uri, sizeof(s->unix_uri), "unix://%s", s->sock);
#endif
}

/*
 * Criterion 2.4's runner process, running tests in parallel (--jobs 2 under
 * ctest), sometimes leaks a 48-byte block of its own (allocated inside
 * libcriterion under criterion_run_all_tests, in no test's code), which
 * LeakSanitizer reports as a failure of the whole binary.  So leak checking
 * is switched off for the runner's thread once it starts; the tests run in
 * worker processes, where it stays on.
 */
#if defined(__SANITIZE_ADDRESS__)
#include <criterion/hooks.h>
#include <sanitizer/lsan_interface.h>
ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	(void)set;
	__lsan_disable();
}
#endif

/* SIGSTOP the server and wait until the kernel shows it stopped, so that
 * nothing sent from now on is answered until test_server_resume. */
static inline void test_server_pause(const test_server *s)
{
	char path[64], buf[512];
	kill(s->pid, SIGSTOP);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)s->pid);
	for (int tries = 0; tries < 500; tries++) {
		FILE *f = fopen(path, "r");
		size_t k = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		if (f)
			fclose(f);
		buf[k] = 0;
		const char *rp = strrchr(buf, ')'); /* "pid (comm) S ..." */
		if (rp && rp[1] == ' ' && rp[2] == 'T')
			return;
		test_sleep_ms(2);
	}
	cr_assert_fail("emdb-server did not stop on SIGSTOP");
}

static inline void test_server_resume(const test_server *s)
{
	kill(s->pid, SIGCONT);
}

/* Does the server process still run?  (Reaps it when it exited.) */
static inline int test_server_alive(test_server *s)
{
	if (s->pid > 0 && waitpid(s->pid, NULL, WNOHANG) == s->pid)
		s->pid = 0;
	return s->pid > 0;
}

#endif
