/*
 * net_server.c - emdb-server and redis-server as child processes of
 * emdb-bench (net_server.h).
 *
 * Design
 *   A server is a child that dies with the bench: PR_SET_PDEATHSIG covers
 *   a bench killed by SIGKILL, the atexit handler covers exit() (and
 *   harness_die), and handlers for SIGINT, SIGTERM, SIGHUP and SIGPIPE kill
 *   the children, remove the temporary directory and re-raise the signal.
 *   The pids live in a fixed table so that the signal handler needs only
 *   async-signal-safe calls (kill, unlink, rmdir).
 *
 * Invariants
 *   1. Servers bind 127.0.0.1 or a Unix socket under the bench's own
 *      temporary directory; redis-server runs with --save "" and
 *      --appendonly no, so nothing is written to disk.
 *   2. A started server is in the table until net_server_stop reaped it.
 */
#include "tools/bench/net_server.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/bench/harness.h"

#define MAX_CHILDREN 8
#define MAX_FILES 16

static volatile pid_t children[MAX_CHILDREN];
static char tmpdir[64];
static char files[MAX_FILES][200]; /* removed at exit: sockets, logs */
static volatile int n_files;

static void cleanup_files(void)
{
	for (int i = 0; i < n_files; i++)
		unlink(files[i]);
	if (tmpdir[0])
		rmdir(tmpdir);
}

static void kill_children(void)
{
	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] > 0)
			kill(children[i], SIGKILL);
}

static void at_exit(void)
{
	kill_children();
	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] > 0) {
			while (waitpid(children[i], NULL, 0) < 0 && errno == EINTR)
				;
			children[i] = 0;
		}
	cleanup_files();
}

static void on_signal(int sig)
{
	kill_children();
	cleanup_files();
	signal(sig, SIG_DFL);
	raise(sig);
}

void net_servers_init(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	struct sigaction sa;

	strcpy(tmpdir, "/tmp/emdb-bench-XXXXXX");
	if (!mkdtemp(tmpdir))
		harness_die("mkdtemp: %s", strerror(errno));
	atexit(at_exit);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

const char *net_servers_dir(void)
{
	return tmpdir;
}

static const char *add_file(const char *name)
{
	if (n_files == MAX_FILES)
		harness_die("too many server files");
	snprintf(files[n_files], sizeof(files[0]), "%s/%s", tmpdir, name);
	return files[n_files++];
}

static pid_t spawn(const char *const *argv, const char *log)
{
	pid_t parent = getpid(), pid;
	int slot = -1;

	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] <= 0) {
			slot = i;
			break;
		}
	if (slot < 0)
		harness_die("too many servers");
	pid = fork();
	if (pid < 0)
		harness_die("fork: %s", strerror(errno));
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR), logfd;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		dup2(devnull, 0);
		logfd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (logfd >= 0) {
			dup2(logfd, 1);
			dup2(logfd, 2);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	children[slot] = pid;
	return pid;
}

static void forget(pid_t pid)
{
	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] == pid)
			children[i] = 0;
}

/* Wait until the server accepts a connection (up to 20 s). */
static void wait_up(net_server *s, const char *what, const char *log, const char *portfile)
{
	for (int tries = 0; tries < 2000; tries++) {
		int st, fd;
		if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
			forget(s->pid);
			s->pid = 0;
			harness_die("%s exited at start (status 0x%x); see %s", what, st, log);
		}
		if (portfile && !s->port) {
			FILE *f = fopen(portfile, "r");
			unsigned port = 0;
			if (f) {
				if (fscanf(f, "%u", &port) != 1)
					port = 0;
				fclose(f);
			}
			if (port > 0 && port < 65536)
				s->port = (uint16_t)port;
		}
		if (s->port || s->sock[0]) {
			fd = net_connect(s->port, s->sock[0] ? s->sock : NULL);
			if (fd >= 0) {
				close(fd);
				return;
			}
		}
		harness_sleep(0.010);
	}
	harness_die("%s did not start listening within 20 s; see %s", what, log);
}

void net_server_start_emdb(net_server *s, net_transport tr, const char *backend, int tls)
{
#ifndef EMDB_SERVER_BIN
	(void)s;
	(void)tr;
	(void)backend;
	(void)tls;
	harness_die("emdb-server is not part of this build");
#else
	char name[64], cert[128], key[128];
	const char *tag = tls ? "-tls" : "";
	snprintf(name, sizeof(name), "emdb-%s%s.log", backend, tag);
	const char *log = add_file(name);
	snprintf(name, sizeof(name), "emdb-%s%s.port", backend, tag);
	const char *portfile = add_file(name);
	const char *argv[24] = { EMDB_SERVER_BIN, "--log-level", "warn", "--log-file", log,
				 "--io-backend", backend };
	int argc = 7;
	snprintf(cert, sizeof(cert), "%s/bench-tls.pem", tmpdir);
	snprintf(key, sizeof(key), "%s/bench-tls.key", tmpdir);
	if (tls) {
		argv[argc++] = "--tls-cert-file";
		argv[argc++] = cert;
		argv[argc++] = "--tls-key-file";
		argv[argc++] = key;
	}

	memset(s, 0, sizeof(*s));
	if (tr == NET_TCP) {
		argv[argc++] = "--bind";
		argv[argc++] = "127.0.0.1";
		argv[argc++] = "--port";
		argv[argc++] = "0";
		argv[argc++] = "--port-file";
		argv[argc++] = portfile;
	} else {
		snprintf(name, sizeof(name), "emdb-%s.sock", backend);
		snprintf(s->sock, sizeof(s->sock), "%s", add_file(name));
		argv[argc++] = "--bind";
		argv[argc++] = "";
		argv[argc++] = "--unix-socket";
		argv[argc++] = s->sock;
	}
	argv[argc] = NULL;
	s->pid = spawn(argv, log);
	wait_up(s, "emdb-server", log, tr == NET_TCP ? portfile : NULL);
	if (tr == NET_TCP && tls)
		snprintf(s->uri, sizeof(s->uri), "tls://127.0.0.1:%u?name=emdb-bench&ca=%s", s->port, cert);
	else if (tr == NET_TCP)
		snprintf(s->uri, sizeof(s->uri), "tcp://127.0.0.1:%u?name=emdb-bench", s->port);
	else
		snprintf(s->uri, sizeof(s->uri), "unix://%s?name=emdb-bench", s->sock);
#endif
}

int net_server_start_redis(net_server *s, net_transport tr)
{
	const char *log;
	char port[16];
	const char *argv[24] = { NET_REDIS_BIN, "--save", "", "--appendonly", "no",
				 "--daemonize", "no", "--protected-mode", "yes",
				 "--bind", "127.0.0.1", "--loglevel", "warning" };
	int argc = 13;

	memset(s, 0, sizeof(*s));
	if (access(NET_REDIS_BIN, X_OK) != 0)
		return -1;
	log = add_file("redis-server.log");
	argv[argc++] = "--port";
	if (tr == NET_TCP) {
		s->port = net_free_port();
		snprintf(port, sizeof(port), "%u", s->port);
		argv[argc++] = port;
	} else {
		snprintf(s->sock, sizeof(s->sock), "%s", add_file("redis.sock"));
		argv[argc++] = "0";
		argv[argc++] = "--unixsocket";
		argv[argc++] = s->sock;
		argv[argc++] = "--unixsocketperm";
		argv[argc++] = "700";
	}
	argv[argc] = NULL;
	s->pid = spawn(argv, log);
	wait_up(s, "redis-server", log, NULL);
	return 0;
}

void net_server_stop(net_server *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
			;
		forget(s->pid);
		s->pid = 0;
	}
}
