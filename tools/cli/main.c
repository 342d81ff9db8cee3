/*
 * main.c - emdb-cli's command line: the flags, then one of three modes.
 *
 *   emdb-cli [FLAGS] COMMAND ARGS...   one-shot: run COMMAND, exit with its status
 *   emdb-cli [FLAGS]                   a shell on a terminal (libedit)
 *   ... | emdb-cli [FLAGS]             commands read line by line from a pipe
 *
 * Invariants:
 *   1. Flags end at the first word that is not one (or after "--"), so a
 *      command's own arguments are never taken for flags.
 *   2. Exit status: 0 success, 1 a command failed (the server refused it
 *      or could not be reached), 2 a usage error (bad flag, unknown
 *      command, wrong arguments).  The piped mode exits with the highest
 *      status of its commands; the shell with 0.
 *
 * State changes: none beyond the session's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli/cmd.h"
#include "tools/cli/session.h"
#include "tools/cli/shell.h"
#include "tools/cli/words.h"

#ifndef EMDB_CLI_VERSION
#define EMDB_CLI_VERSION "unknown"
#endif

static void usage(FILE *f)
{
	fprintf(f,
		"usage: emdb-cli [FLAGS] [COMMAND ARGS...]\n"
		"\n"
		"The emdb admin shell.  With a COMMAND, run it and exit (status 0 ok,\n"
		"1 error, 2 usage error); without, a shell on a terminal, or the\n"
		"commands of a pipe, one per line.\n"
		"\n"
		"flags:\n"
		"  -u, --uri URI       server (default %s); also unix:///PATH,\n"
		"                      mem://; ?token=... works as --token\n"
		"  --token TOKEN       AUTH token (default: $EMDB_CLI_TOKEN)\n"
		"  --timeout MS        request and connect timeout, 0 = none (default:\n"
		"                      30000 per request, 10000 to connect)\n"
		"  --json              one JSON object per command on stdout\n"
		"  -h, --help          this text\n"
		"  --version           print the version\n"
		"\n"
		"commands (`emdb-cli help COMMAND` for details):\n",
		CLI_DEFAULT_URI);
	size_t n;
	const cli_cmd *cmds = cmd_table(&n);
	int wide = cmd_usage_width();
	for (size_t i = 0; i < n; i++) {
		char u[256];
		snprintf(u, sizeof(u), "%s%s%s", cmds[i].name, cmds[i].synopsis[0] ? " " : "",
			 cmds[i].synopsis);
		fprintf(f, "  %-*s  %s\n", wide, u, cmds[i].summary);
	}
}

/* Does argv[*i] name the flag (short may be NULL)?  Then *val is its
 * value, from "--flag=V" or the next word (NULL when missing). */
static bool flag(int argc, char **argv, int *i, const char *shortf, const char *longf,
		 const char **val)
{
	const char *a = argv[*i];
	size_t ll = strlen(longf);
	if (!strncmp(a, longf, ll) && a[ll] == '=') {
		*val = a + ll + 1;
		return true;
	}
	if (strcmp(a, longf) && (!shortf || strcmp(a, shortf)))
		return false;
	*val = *i + 1 < argc ? argv[++*i] : NULL;
	return true;
}

static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "emdb-cli: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (emdb-cli --help for usage)\n");
	return CLI_USAGE;
}

int main(int argc, char **argv)
{
	const char *uri = NULL;
	const char *token = getenv("EMDB_CLI_TOKEN");
	uint32_t timeout_ms = 30000, connect_ms = 10000;
	bool json = false;
	int i;

	if (token && !token[0])
		token = NULL;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v;
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (a[0] != '-' || !a[1]) /* invariant 1 */
			break;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(a, "--version")) {
			printf("emdb-cli %s\n", EMDB_CLI_VERSION);
			return 0;
		}
		if (!strcmp(a, "--json")) {
			json = true;
		} else if (flag(argc, argv, &i, "-u", "--uri", &v)) {
			if (!v || !v[0])
				return bad_usage("%s needs a URI", a);
			uri = v;
		} else if (flag(argc, argv, &i, NULL, "--token", &v)) {
			if (!v)
				return bad_usage("%s needs a token", a);
			token = v[0] ? v : NULL;
		} else if (flag(argc, argv, &i, NULL, "--timeout", &v)) {
			uint64_t ms;
			if (!v || !words_u64(v, &ms) || ms > UINT32_MAX)
				return bad_usage("--timeout needs milliseconds, not '%s'", v ? v : "");
			timeout_ms = connect_ms = (uint32_t)ms;
		} else {
			return bad_usage("unknown flag '%s'", a);
		}
	}

	cli_session s;
	int status;
	if (i < argc) {
		session_init(&s, uri, token, timeout_ms, connect_ms, json, false);
		status = (int)cmd_run(&s, argc - i, argv + i);
	} else if (isatty(STDIN_FILENO)) {
		session_init(&s, uri, token, timeout_ms, connect_ms, json, true);
		status = shell_interactive(&s);
	} else {
		session_init(&s, uri, token, timeout_ms, connect_ms, json, false);
		status = shell_piped(&s, stdin);
	}
	session_close(&s);
	fflush(stdout);
	return status;
}
