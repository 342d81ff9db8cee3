/*
 * metrics.c - the /metrics endpoint's HTTP side: its socket, evhttp, its
 * thread, and the answer to each request (net/metrics.h).
 *
 * Invariants:
 *   1. The event_base and evhttp are touched by the metrics thread alone
 *      from metrics_start's pthread_create until metrics_stop's join;
 *      the main thread reaches it only through stop_fd (an eventfd), so
 *      libevent needs no locking of its own here.
 *   2. A request is answered exactly once, on that thread, and never
 *      blocks: the figures are read without locks a serving thread holds
 *      for long (net/figures.h).
 *   3. The thread blocks SIGTERM, SIGINT and SIGHUP: they reach the main
 *      thread, as for the I/O threads.
 *
 * State changes: metrics_start (socket, thread), metrics_stop (all).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "net/listen.h"
#include "net/log.h"
#include "net/metrics.h"
#include "net/server.h"

#define METRICS_BACKLOG 64
#define METRICS_TIMEOUT_S 10    /* a scrape's request must come within this */
#define METRICS_MAX_HEADERS 8192 /* bytes of request line and headers */
#define METRICS_MAX_BODY 1024    /* a GET has none: anything larger is refused */

struct metrics {
	server *srv;
	struct event_base *base;
	struct evhttp *http;
	struct event *ev_stop;
	int stop_fd;
	uint16_t port;
	bool loopback; /* bound to a loopback address */
	pthread_t tid;
	bool started;
};

/* A short plain-text answer: errors, and the reason a method or path is
 * refused. */
static void reply_text(struct evhttp_request *req, int code, const char *reason, const char *text)
{
	struct evbuffer *b = evbuffer_new();
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Content-Type", "text/plain; charset=utf-8");
	if (b)
		evbuffer_add(b, text, strlen(text));
	evhttp_send_reply(req, code, reason, b);
	if (b)
		evbuffer_free(b);
}

static void on_request(struct evhttp_request *req, void *arg)
{
	metrics *m = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	if (!path || strcmp(path, METRICS_PATH) != 0) {
		reply_text(req, HTTP_NOTFOUND, "Not Found", "emdb serves only GET " METRICS_PATH " here\n");
		return;
	}
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
		reply_text(req, HTTP_BADMETHOD, "Method Not Allowed", METRICS_PATH " answers GET and HEAD only\n");
		return;
	}
	struct evbuffer *body = evbuffer_new();
	int rc = body ? metrics_render(m->srv, body) : EMDB_ERR_NOMEM;
	if (rc != EMDB_OK) {
		log_warn("metrics: cannot build the answer: %s", emdb_err_name(rc));
		reply_text(req, HTTP_INTERNAL, "Internal Server Error", "out of memory\n");
	} else {
		struct evkeyvalq *h = evhttp_request_get_output_headers(req);
		evhttp_add_header(h, "Content-Type", METRICS_CONTENT_TYPE);
		if (cmd == EVHTTP_REQ_HEAD) {
			/* evhttp 2.1 would send a body after a HEAD's headers: the
			 * length alone, as GET would give it. */
			char len[32];
			snprintf(len, sizeof(len), "%zu", evbuffer_get_length(body));
			evhttp_add_header(h, "Content-Length", len);
			evhttp_send_reply(req, HTTP_OK, "OK", NULL);
		} else {
			evhttp_send_reply(req, HTTP_OK, "OK", body);
		}
	}
	if (body)
		evbuffer_free(body);
}

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
	metrics *m = arg;
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));
	(void)r;
	(void)what;
	event_base_loopbreak(m->base);
}

static void *run(void *arg)
{
	metrics *m = arg;
	event_base_dispatch(m->base);
	return NULL;
}

/* What metrics_start built, in reverse; the thread is not running. */
static void release(metrics *m)
{
	if (m->http)
		evhttp_free(m->http); /* closes the bound socket and open connections */
	if (m->ev_stop)
		event_free(m->ev_stop);
	if (m->base)
		event_base_free(m->base);
	if (m->stop_fd >= 0)
		close(m->stop_fd);
	emdb_free(m);
}

/* The evhttp on m->base, its limits, and the socket it accepts on. */
static int open_http(metrics *m, const net_config *cfg, char *err, size_t errlen)
{
	char why[512];
	int fd;
	m->http = evhttp_new(m->base);
	if (!m->http) {
		snprintf(err, errlen, "metrics endpoint: cannot set up evhttp");
		return -1;
	}
	/* Every method reaches on_request, which answers 405 itself: evhttp
	 * would say 501 for a method it was not told of. */
	evhttp_set_allowed_methods(m->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
						    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
						    EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_timeout(m->http, METRICS_TIMEOUT_S);
	evhttp_set_max_headers_size(m->http, METRICS_MAX_HEADERS);
	evhttp_set_max_body_size(m->http, METRICS_MAX_BODY);
	evhttp_set_gencb(m->http, on_request, m);
	if (listen_tcp_socket(cfg->metrics_address, (uint16_t)cfg->metrics_port, METRICS_BACKLOG, &fd,
			      &m->port, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "metrics endpoint (metrics_address, metrics_port): %s", why);
		return -1;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	m->loopback = getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
		      listen_is_loopback((struct sockaddr *)&ss);
	if (!evhttp_accept_socket_with_handle(m->http, fd)) {
		close(fd);
		snprintf(err, errlen, "metrics endpoint: evhttp cannot accept on its socket");
		return -1;
	}
	return 0;
}

int metrics_start(server *s, metrics **out, char *err, size_t errlen)
{
	net_config cfg;
	server_config_copy(s, &cfg);
	*out = NULL;
	if (!cfg.metrics_port)
		return 0;
	metrics *m = emdb_calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "metrics endpoint: out of memory");
		return -1;
	}
	m->srv = s;
	m->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	m->base = m->stop_fd >= 0 ? event_base_new() : NULL;
	m->ev_stop = m->base ? event_new(m->base, m->stop_fd, EV_READ, on_stop, m) : NULL;
	if (!m->ev_stop || event_add(m->ev_stop, NULL) != 0) {
		snprintf(err, errlen, "metrics endpoint: cannot create its event loop");
		release(m);
		return -1;
	}
	if (open_http(m, &cfg, err, errlen) < 0) {
		release(m);
		return -1;
	}
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	int rc = pthread_create(&m->tid, NULL, run, m);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		snprintf(err, errlen, "metrics endpoint: cannot start its thread: %s", strerror(rc));
		release(m);
		return -1;
	}
	m->started = true;
	bool v6 = strchr(cfg.metrics_address, ':') != NULL;
	log_info("metrics: serving http://%s%s%s:%u" METRICS_PATH "%s", v6 ? "[" : "", cfg.metrics_address,
		 v6 ? "]" : "", m->port,
		 m->loopback ? "" : " (not loopback: anyone who reaches it reads the figures)");
	*out = m;
	return 0;
}

void metrics_stop(metrics *m)
{
	if (!m)
		return;
	if (m->started) {
		uint64_t one = 1;
		ssize_t w = write(m->stop_fd, &one, sizeof(one));
		(void)w;
		pthread_join(m->tid, NULL);
	}
	release(m);
}
