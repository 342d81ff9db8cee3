/*
 * uri.h - parsing the connection URIs of emdb/client.h (tcp://, tls://,
 * unix://, mem://).  Internal to the client library; the tests use it directly.
 */
#ifndef EMDB_CLIENT_URI_H
#define EMDB_CLIENT_URI_H

#include <stdbool.h>
#include <stdint.h>

typedef enum cl_uri_kind {
	CL_URI_TCP = 1,
	CL_URI_UNIX = 2,
	CL_URI_MEM = 3,
	CL_URI_TLS = 4, /* TCP carrying TLS */
} cl_uri_kind;

#define CL_URI_HOST_MAX 256
#define CL_URI_PATH_MAX 108 /* sizeof(sun_path) on Linux, NUL included */

typedef struct cl_uri {
	cl_uri_kind kind;
	char host[CL_URI_HOST_MAX]; /* tcp: name or address, IPv6 without [] */
	uint16_t port;              /* tcp: EMDB_CLIENT_DEFAULT_PORT if absent */
	char path[CL_URI_PATH_MAX]; /* unix: absolute path */
	char name[64];              /* mem: shared database name, "" = private */
	char *token;                /* ?token=, percent-decoded; NULL if absent */
	char *client_name;          /* ?name=, percent-decoded; NULL if absent */
	char *tls_ca;               /* tls: ?ca=, CA file; NULL: the system's */
	char *tls_cert, *tls_key;   /* tls: ?cert=, ?key=, client certificate */
	bool has_timeout;           /* ?timeout= given */
	uint32_t timeout_ms;
} cl_uri;

/* Parse s into *u.  Errors: INVALID (the message names the offending
 * part), NOMEM; on error nothing needs freeing.  On success free the
 * strings with cl_uri_free. */
int cl_uri_parse(const char *s, cl_uri *u);
void cl_uri_free(cl_uri *u);

#endif
