/*
 * session.h - one emdb-cli session: where it connects and how, its
 * connection (made when a command first needs it, dropped when lost,
 * remade by the next command), how a command reports an error, and the
 * names that completion offers.
 *
 * Single-threaded: everything here runs on the shell's thread.
 */
#ifndef EMDB_CLI_SESSION_H
#define EMDB_CLI_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/client.h>

#define CLI_DEFAULT_URI "tcp://127.0.0.1:7878"

/* What a command ends with; in one-shot mode, the exit status. */
typedef enum cli_status {
	CLI_OK = 0,
	CLI_FAIL = 1,  /* the server or the connection refused it */
	CLI_USAGE = 2, /* the command line itself was wrong */
} cli_status;

/* A list of names fetched from the server for completion, with the time
 * it was fetched. */
typedef struct cli_names {
	char **v;       /* n strings, one emdb_malloc'd block with v */
	size_t n;
	uint64_t at_ms; /* CLOCK_MONOTONIC; 0 = never fetched */
} cli_names;

typedef struct cli_session {
	const char *uri;        /* borrowed: argv or CLI_DEFAULT_URI */
	char shown_uri[256];    /* uri without its ?query, which may hold a token */
	emdb_client_options opts; /* opts.token borrowed from argv or environ */
	bool json;              /* --json: one JSON object per command */
	bool interactive;       /* a shell: notes about lost connections */
	bool quit;              /* set by quit/exit */
	emdb_client *c;         /* NULL while not connected */
	cli_names tables;       /* table names, refetched after a few seconds */
	cli_names config_keys;  /* setting names, fetched once per connection */
	char prompt[300];
} cli_session;

/* Fill *s; nothing is connected yet.  Timeouts in milliseconds, 0 =
 * none: timeout_ms for each request, connect_ms for connecting and the
 * handshake. */
void session_init(cli_session *s, const char *uri, const char *token, uint32_t timeout_ms,
		  uint32_t connect_ms, bool json, bool interactive);

/* Close the connection and free the caches. */
void session_close(cli_session *s);

/* The connection, made now if there is none.  On failure the error is
 * reported (session_fail) and NULL returned.  Valid until the next
 * session call that may drop it (session_fail, session_disconnect). */
emdb_client *session_client(cli_session *s);

/* Drop the connection (after SHUTDOWN, say); the next command reconnects. */
void session_disconnect(cli_session *s);

/* Report the failure rc of a client call, with emdb_client_last_error()
 * as its message: "(error) NAME: message" on stderr, and in JSON mode an
 * error object on stdout.  When rc says the connection is gone (CLOSED,
 * IO, PROTOCOL) the handle is dropped, and in a shell a note says the next
 * command reconnects.  Returns CLI_FAIL. */
cli_status session_fail(cli_session *s, int rc);

/* Report an error of the given NAME ("USAGE", "AUTH", ...) with a
 * printf-style message, as session_fail does.  Returns status. */
cli_status session_error(cli_session *s, cli_status status, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The table names (completion), fetched again when older than a few
 * seconds; only over an existing connection, never connecting.  Failures
 * are silent (a Tab must not print in the middle of a line): the result
 * is then what was cached.  *names stays valid until the next call. */
void session_table_names(cli_session *s, char ***names, size_t *n);

/* The names of the server's settings (completion), as above; empty when
 * the role may not read them. */
void session_config_keys(cli_session *s, char ***names, size_t *n);

/* Forget the cached table names, after this session created or dropped
 * a table. */
void session_forget_tables(cli_session *s);

/* The shell's prompt: "URI> ", or "URI (not connected)> ". */
const char *session_prompt(cli_session *s);

#endif
