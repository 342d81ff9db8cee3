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
 *   2. A started server is in the table until net_server_stop reaped it;
 *      an adopted child (net_servers_adopt) until net_servers_release.
 */
#include "tools/bench/net_server.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/bench/harness.h"

#define MAX_CHILDREN 16
#define MAX_FILES 32

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

const char *net_servers_file(const char *name)
{
	return add_file(name);
}

static int free_slot(void)
{
	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] <= 0)
			return i;
	harness_die("too many servers");
}

void net_servers_adopt(pid_t pid)
{
	children[free_slot()] = pid;
}

static pid_t spawn(const char *const *argv, const char *log)
{
	pid_t parent = getpid(), pid;
	int slot = free_slot();

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

void net_servers_release(pid_t pid)
{
	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] == pid)
			children[i] = 0;
}

/* Wait until the server accepts a connection (up to 20 s; a cluster node
 * listens only once the cluster formed). */
/* The end of a server's log on stderr: the log goes with the temporary
 * directory at exit. */
static void show_log(const char *log)
{
	char buf[2048];
	FILE *f = fopen(log, "r");
	if (!f)
		return;
	if (fseek(f, 0, SEEK_END) == 0 && ftell(f) > (long)sizeof(buf) - 1)
		fseek(f, -(long)sizeof(buf) + 1, SEEK_END);
	else
		fseek(f, 0, SEEK_SET);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	fprintf(stderr, "--- %s:\n%s\n---\n", log, buf);
}

static void wait_up(net_server *s, const char *what, const char *log, const char *portfile)
{
	for (int tries = 0; tries < 2000; tries++) {
		int st, fd;
		if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
			net_servers_release(s->pid);
			s->pid = 0;
			show_log(log);
			harness_die("%s exited at start (status 0x%x)", what, st);
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
	show_log(log);
	harness_die("%s did not start listening within 20 s", what);
}

/* Spawn emdb-server with I/O backend `backend` on transport tr, its files
 * named emdb-<tag>.*, extra arguments appended (NULL-terminated, may be
 * NULL); do not wait. */
static void emdb_spawn(net_server *s, net_transport tr, const char *backend, int tls, const char *tag,
		       const char *const *extra)
{
#ifndef EMDB_SERVER_BIN
	(void)s;
	(void)tr;
	(void)backend;
	(void)tls;
	(void)tag;
	(void)extra;
	harness_die("emdb-server is not part of this build");
#else
	char name[64], cert[128], key[128];
	memset(s, 0, sizeof(*s));
	snprintf(name, sizeof(name), "emdb-%s.log", tag);
	s->log = add_file(name);
	snprintf(name, sizeof(name), "emdb-%s.port", tag);
	s->portfile = add_file(name);
	const char *argv[40] = { EMDB_SERVER_BIN, "--log-level", "warn", "--log-file", s->log,
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
	s->tls = tls;
	if (tr == NET_TCP) {
		argv[argc++] = "--bind";
		argv[argc++] = "127.0.0.1";
		argv[argc++] = "--port";
		argv[argc++] = "0";
		argv[argc++] = "--port-file";
		argv[argc++] = s->portfile;
	} else {
		snprintf(name, sizeof(name), "emdb-%s.sock", tag);
		snprintf(s->sock, sizeof(s->sock), "%s", add_file(name));
		argv[argc++] = "--bind";
		argv[argc++] = "";
		argv[argc++] = "--unix-socket";
		argv[argc++] = s->sock;
	}
	for (int i = 0; extra && extra[i]; i++) {
		if (argc >= 39)
			harness_die("too many emdb-server arguments");
		argv[argc++] = extra[i];
	}
	argv[argc] = NULL;
	s->tr = tr;
	s->pid = spawn(argv, s->log);
#endif
}

/* Wait until s accepts connections, then set its URI. */
static void emdb_wait(net_server *s, const char *what)
{
	char cert[128];
	wait_up(s, what, s->log, s->tr == NET_TCP ? s->portfile : NULL);
	snprintf(cert, sizeof(cert), "%s/bench-tls.pem", tmpdir);
	if (s->tr == NET_TCP && s->tls)
		snprintf(s->uri, sizeof(s->uri), "tls://127.0.0.1:%u?name=emdb-bench&ca=%s", s->port, cert);
	else if (s->tr == NET_TCP)
		snprintf(s->uri, sizeof(s->uri), "tcp://127.0.0.1:%u?name=emdb-bench", s->port);
	else
		snprintf(s->uri, sizeof(s->uri), "unix://%s?name=emdb-bench", s->sock);
}

void net_server_start_emdb(net_server *s, net_transport tr, const char *backend, int tls)
{
	char tag[32];
	snprintf(tag, sizeof(tag), "%s%s", backend, tls ? "-tls" : "");
	emdb_spawn(s, tr, backend, tls, tag, NULL);
	emdb_wait(s, "emdb-server");
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	size_t len = strlen(text);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len)
		harness_die("%s: %s", path, strerror(errno));
	close(fd);
}

void net_server_start_cluster(net_server *s, int n, net_transport tr, const char *const *extra)
{
	char text[1024], rank[NET_CLUSTER_MAX][12], tag[32], what[64];
	const char *file = add_file("cluster"), *secret = add_file("cluster.secret");
	size_t len;

	if (n < 1 || n > NET_CLUSTER_MAX)
		harness_die("a cluster of %d nodes: 1..%d on one machine", n, NET_CLUSTER_MAX);
	len = (size_t)snprintf(text, sizeof(text), "# emdb-bench --cluster\ncluster_id emdb-bench-%d\n",
			       (int)getpid());
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len, "node %d 127.0.0.1:%u\n", i,
					net_free_port());
	write_file(file, text, 0644);
	/* A fresh secret per run: 32 random bytes, hex. */
	uint8_t key[32];
	if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key))
		harness_die("getrandom: %s", strerror(errno));
	for (size_t i = 0; i < sizeof(key); i++)
		snprintf(text + 2 * i, 3, "%02x", key[i]);
	strcat(text, "\n");
	write_file(secret, text, 0600);
	/* Every node at once: each waits for the others before it listens. */
	for (int i = 0; i < n; i++) {
		snprintf(rank[i], sizeof(rank[i]), "%d", i);
		snprintf(tag, sizeof(tag), "node%d", i);
		const char *args[16] = { "--cluster-file", file, "--cluster-rank", rank[i],
					 "--cluster-secret-file", secret };
		int argc = 6;
		for (int k = 0; extra && extra[k] && argc < 15; k++)
			args[argc++] = extra[k];
		args[argc] = NULL;
		emdb_spawn(&s[i], tr, "libevent", 0, tag, args);
	}
	for (int i = 0; i < n; i++) {
		snprintf(what, sizeof(what), "emdb-server node %d of %d", i, n);
		emdb_wait(&s[i], what);
	}
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
		net_servers_release(s->pid);
		s->pid = 0;
	}
}
