/*
 * net/listen.h - the server's listening sockets (TCP and Unix), on the main
 * thread's event_base.
 *
 * Accepted sockets are handed to a callback, already non-blocking and
 * close-on-exec, with TCP_NODELAY set on TCP.  When accept(2) fails for
 * want of descriptors (EMFILE, ENFILE) or memory, the listener pauses for
 * a moment instead of spinning, and says so in the log.
 */
#ifndef EMDB_NET_LISTEN_H
#define EMDB_NET_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct event_base;
typedef struct listener listener;

/* fd is the caller's; peer/loopback describe the remote end. */
typedef void (*listener_cb)(void *arg, int fd, bool loopback, const char *peer);

/* Listen on addr:port (IPv4 or IPv6 literal, or "localhost"); port 0 picks
 * a free port, reported in *bound.  Returns 0, or -1 with err filled. */
int listener_open_tcp(struct event_base *base, const char *addr, uint16_t port, int backlog,
		      listener_cb cb, void *arg, listener **out, uint16_t *bound, char *err,
		      size_t errlen);
/* The socket alone, for a caller with an accept loop of its own (the
 * /metrics endpoint's evhttp): non-blocking, close-on-exec, listening on
 * addr:port (port 0 picks one, reported in *bound).  Returns 0 with *out
 * the caller's, or -1 with err filled ("listen on ADDR:PORT: reason"). */
int listen_tcp_socket(const char *addr, uint16_t port, int backlog, int *out, uint16_t *bound, char *err,
		      size_t errlen);
/* Whether sa is the Unix socket, 127.0.0.0/8, ::1 or a v4-mapped
 * 127.x address. */
bool listen_is_loopback(const struct sockaddr *sa);
/* Listen on a Unix socket at path.  A stale socket file (nobody accepts
 * on it) is replaced; a live one is an error.  Returns 0 or -1. */
int listener_open_unix(struct event_base *base, const char *path, int backlog, listener_cb cb,
		       void *arg, listener **out, char *err, size_t errlen);
/* Stop accepting; a Unix listener also removes its socket file.  NULL is
 * a no-op. */
void listener_close(listener *l);

#endif
