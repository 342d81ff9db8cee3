/*
 * listen.c - TCP and Unix listeners on libevent's evconnlistener.
 *
 * Invariants:
 *   1. A listener owns its socket (closed with it) and, for Unix, removes
 *      the path it created, and only that path.
 *   2. A failing accept pauses the listener for PAUSE_MS; it never spins.
 *
 * State changes: listener_open_* and listener_close; the pause timer.
 */
#define _GNU_SOURCE /* struct ucred, SO_PEERCRED */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include <emdb/alloc.h>

#include "net/listen.h"
#include "net/log.h"

#define PAUSE_MS 100

struct listener {
	struct evconnlistener *lev;
	struct event *resume;
	listener_cb cb;
	void *arg;
	bool is_unix;
	char path[108];
};

bool listen_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_UNIX)
		return true;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return true;
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
			return in6->sin6_addr.s6_addr[12] == 127;
	}
	return false;
}

/* "1.2.3.4:port", "[::1]:port", or for the Unix socket "unix:uid=U:pid=P"
 * (SO_PEERCRED): the part before the last colon is the peer's address,
 * the key failed AUTH is throttled by (net/auth_limit.h), so a local
 * user guessing tokens holds back only that user, not the admin. */
static void peer_name(int fd, const struct sockaddr *sa, char *buf, size_t n)
{
	char host[INET6_ADDRSTRLEN] = "?";
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, n, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, n, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		struct ucred cr;
		socklen_t len = sizeof(cr);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0)
			snprintf(buf, n, "unix:uid=%u:pid=%d", (unsigned)cr.uid, (int)cr.pid);
		else
			snprintf(buf, n, "unix:uid=?:pid=?");
	}
}

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
		      int salen, void *arg)
{
	listener *l = arg;
	char peer[64];
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	if (!sa || salen <= 0)
		sa = (struct sockaddr *)&un;
	peer_name(fd, sa, peer, sizeof(peer));
	if (sa->sa_family != AF_UNIX) {
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	l->cb(l->arg, fd, l->is_unix || listen_is_loopback(sa), peer);
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	listener *l = arg;
	evconnlistener_enable(l->lev);
}

static void on_error(struct evconnlistener *lev, void *arg)
{
	listener *l = arg;
	int e = EVUTIL_SOCKET_ERROR();
	log_warn("accept on %s: %s: pausing %d ms", l->is_unix ? l->path : "tcp", strerror(e),
		 PAUSE_MS);
	evconnlistener_disable(lev);
	struct timeval tv = { 0, PAUSE_MS * 1000 };
	event_add(l->resume, &tv);
}

static int wrap(struct event_base *base, int fd, int backlog, listener_cb cb, void *arg,
		bool is_unix, const char *path, listener **out, char *err, size_t errlen)
{
	listener *l = emdb_calloc(1, sizeof(*l));
	if (!l) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	l->cb = cb;
	l->arg = arg;
	l->is_unix = is_unix;
	if (path)
		snprintf(l->path, sizeof(l->path), "%s", path);
	l->resume = evtimer_new(base, on_resume, l);
	l->lev = evconnlistener_new(base, on_accept, l, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
				    backlog, fd);
	if (!l->resume || !l->lev) {
		snprintf(err, errlen, "cannot set up the listener");
		if (l->lev)
			evconnlistener_free(l->lev);
		else
			close(fd);
		if (l->resume)
			event_free(l->resume);
		emdb_free(l);
		return -1;
	}
	evconnlistener_set_error_cb(l->lev, on_error);
	*out = l;
	return 0;
}

int listen_tcp_socket(const char *addr, uint16_t port, int backlog, int *out, uint16_t *bound, char *err,
		      size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	char portstr[8];
	snprintf(portstr, sizeof(portstr), "%u", port);
	int rc = getaddrinfo(addr, portstr, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "bind address '%s': %s", addr, gai_strerror(rc));
		return -1;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		freeaddrinfo(ai);
		return -1;
	}
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, backlog) < 0) {
		snprintf(err, errlen, "listen on %s:%u: %s", addr, port, strerror(errno));
		close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	*bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						: ((struct sockaddr_in *)&ss)->sin_port);
	*out = fd;
	return 0;
}

int listener_open_tcp(struct event_base *base, const char *addr, uint16_t port, int backlog,
		      listener_cb cb, void *arg, listener **out, uint16_t *bound, char *err,
		      size_t errlen)
{
	int fd;
	if (listen_tcp_socket(addr, port, backlog, &fd, bound, err, errlen) < 0)
		return -1;
	return wrap(base, fd, backlog, cb, arg, false, NULL, out, err, errlen);
}

int listener_open_unix(struct event_base *base, const char *path, int backlog, listener_cb cb,
		       void *arg, listener **out, char *err, size_t errlen)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(un.sun_path)) {
		snprintf(err, errlen, "unix socket path too long: %s", path);
		return -1;
	}
	strcpy(un.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket", path);
			close(fd);
			return -1;
		}
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int live = probe >= 0 && connect(probe, (struct sockaddr *)&un, sizeof(un)) == 0;
		if (probe >= 0)
			close(probe);
		if (live) {
			snprintf(err, errlen, "%s: another server is listening there", path);
			close(fd);
			return -1;
		}
		unlink(path);
	}
	if (bind(fd, (struct sockaddr *)&un, sizeof(un)) < 0 || listen(fd, backlog) < 0) {
		snprintf(err, errlen, "listen on %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return wrap(base, fd, backlog, cb, arg, true, path, out, err, errlen);
}

void listener_close(listener *l)
{
	if (!l)
		return;
	evconnlistener_free(l->lev);
	event_free(l->resume);
	if (l->is_unix)
		unlink(l->path);
	emdb_free(l);
}
