/*
 * net/metrics.h - the Prometheus endpoint: GET /metrics over HTTP, in the
 * text exposition format (version 0.0.4), on a port of its own.
 *
 * Off unless metrics_port is set (net/config.h); it then listens on
 * metrics_address, 127.0.0.1 unless told otherwise.  It has no
 * authentication of its own: binding to loopback is the protection, and
 * an operator who binds it elsewhere exposes the figures (never a row, a
 * token or a setting's value) to whoever reaches that address.
 *
 * Served by libevent's evhttp on a thread and event_base of its own, so a
 * scrape never waits for, nor holds up, an I/O thread or the main
 * thread's accepts: it reads the figures the way INFO does
 * (net/figures.h) and answers.  Only GET (and HEAD) of /metrics: any
 * other path is 404, any other method 405.
 *
 * Life cycle (main thread): metrics_start in server_start, once the I/O
 * threads run; metrics_stop before the checkpoint store and the engine
 * close (server_run at shutdown, or server_destroy).
 */
#ifndef EMDB_NET_METRICS_H
#define EMDB_NET_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct evbuffer;
typedef struct server server;
typedef struct metrics metrics;

#define METRICS_PATH "/metrics"
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Listen on metrics_address:metrics_port of s's configuration and start
 * serving.  *out is NULL when metrics_port is 0 (off).  Returns 0, or -1
 * with the reason in err ("metrics endpoint: listen on ADDR:PORT:
 * Address already in use") and nothing left running. */
int metrics_start(server *s, metrics **out, char *err, size_t errlen);

/* Stop serving, join the thread, close the socket and free m (open
 * scrapes are dropped).  NULL is a no-op. */
void metrics_stop(metrics *m);

/* Append the exposition text of s's figures to out (net/metrics_text.c;
 * docs/server.md lists every metric).  Returns EMDB_OK or NOMEM (out then
 * holds a partial text to discard).  Any thread. */
int metrics_render(server *s, struct evbuffer *out);

#endif
