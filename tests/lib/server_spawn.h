/*
 * server_spawn.h - the one way black-box tests start emdb-server.
 *
 * server_spawn forks and execs the server with the caller's arguments,
 * sends its output to a log file, makes it die with the test process
 * (PR_SET_PDEATHSIG), and waits until it listens: the --port-file holds a
 * whole line and the Unix socket exists.  Stopping it (kill, reap, remove
 * files) stays with the caller's fixture, which Criterion runs after a
 * failed assertion too, so no server outlives its test.
 *
 * server_bin() is the binary to run: $EMDB_TEST_SERVER when set (e.g. a
 * ThreadSanitizer build of the server under the same tests), otherwise the
 * build's own EMDB_SERVER_BIN.
 */
#ifndef EMDB_TEST_SERVER_SPAWN_H
#define EMDB_TEST_SERVER_SPAWN_H

#ifdef EMDB_PLAIN_RUNNER
#include "tests/lib/plain_runner.h"
#else
#include <criterion/criterion.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef EMDB_SERVER_BIN
static inline const char *server_bin(void)
{
	const char *env = getenv("EMDB_TEST_SERVER");
	return env && *env ? env : EMDB_SERVER_BIN;
}
#endif

static inline void server_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The last cap - 1 bytes of a file into buf, NUL-terminated ("" when it
 * cannot be read).  Returns buf. */
static inline const char *server_file_tail(const char *path, char *buf, size_t cap)
{
	buf[0] = 0;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return buf;
	off_t end = lseek(fd, 0, SEEK_END);
	off_t from = end > (off_t)cap - 1 ? end - (off_t)cap + 1 : 0;
	ssize_t k = pread(fd, buf, cap - 1, from);
	buf[k > 0 ? k : 0] = 0;
	close(fd);
	return buf;
}

/* The last 2 KiB of a log file, for failure messages (static buffer). */
static inline const char *server_log_tail(const char *log)
{
	static char tail[2048];
	return server_file_tail(log, tail, sizeof(tail));
}

/* Fork and exec argv[0] with argv (NULL-terminated), its output appended
 * to `log`, dying with the test process; does not wait.  Returns its pid. */
static inline pid_t server_fork(const char *const *argv, const char *log)
{
	pid_t parent = getpid();
	pid_t p = fork();
	cr_assert_geq(p, 0, "fork: %s", strerror(errno));
	if (p == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		int devnull = open("/dev/null", O_RDWR);
		dup2(devnull, 0);
		int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (logfd >= 0) {
			dup2(logfd, 1);
			dup2(logfd, 2);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return p;
}

/* Start argv[0] with argv (NULL-terminated) and wait up to `wait_ms` until
 * it listens on the port written to `portfile` and on `sock`.  Returns the
 * TCP port and sets *pid.  On failure the process is killed and reaped,
 * *pid is 0, and the test fails with the log's tail. */
static inline unsigned server_spawn(const char *const *argv, const char *log, const char *portfile,
				    const char *sock, long wait_ms, pid_t *pid)
{
	pid_t p = server_fork(argv, log);
	*pid = p;
	for (long waited = 0; waited < wait_ms; waited += 10) {
		int st;
		if (waitpid(p, &st, WNOHANG) == p) {
			*pid = 0;
			cr_assert_fail("emdb-server exited at start (status 0x%x): %s", st, server_log_tail(log));
		}
		FILE *f = fopen(portfile, "r");
		unsigned port = 0;
		if (f) {
			char nl = 0;
			if (fscanf(f, "%u%c", &port, &nl) < 2 || nl != '\n')
				port = 0;
			fclose(f);
		}
		struct stat sb;
		if (port > 0 && port < 65536 && stat(sock, &sb) == 0)
			return port;
		server_sleep_ms(10);
	}
	kill(p, SIGKILL);
	while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
		;
	*pid = 0;
	cr_assert_fail("emdb-server did not start listening within %ld ms: %s", wait_ms, server_log_tail(log));
	return 0;
}

#endif
