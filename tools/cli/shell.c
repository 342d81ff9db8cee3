/*
 * shell.c - the interactive shell (libedit's native API: EditLine and
 * History) and the piped loop (shell.h).
 *
 * Invariants:
 *   1. The history file is written after every line entered, so a shell
 *      killed by a signal (^C) or a lost terminal keeps what was typed.
 *      libedit writes it with mode 0600.
 *   2. Tab never prints unless the candidates cannot extend the word:
 *      one candidate replaces the word (plus a blank, unless it ends in
 *      '=' or ':', where a value follows), several extend it to their
 *      common prefix, and only when that adds nothing are they listed.
 *   3. stdout is flushed after every command, so its output and the
 *      errors on stderr appear in the order they happened even when both
 *      go to pipes.
 *
 * State changes: the EditLine and History live for one
 * shell_interactive call; the session's connection is made at its start
 * so that the first prompt says whether the server answers.
 */
#include <errno.h>
#include <histedit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>

#include "tools/cli/cmd.h"
#include "tools/cli/complete.h"
#include "tools/cli/shell.h"
#include "tools/cli/words.h"

#define HISTORY_LINES 1000
#define LIST_WIDTH 78 /* columns for the list of candidates */

cli_status shell_line(cli_session *s, const char *line)
{
	const char *p = line + strspn(line, " \t\r\n");
	if (!*p || *p == '#')
		return CLI_OK;
	cli_words w;
	const char *err;
	if (words_split(line, &w, &err) < 0)
		return session_error(s, CLI_USAGE, "USAGE", "%s", err);
	cli_status st = cmd_run(s, w.n, w.v);
	words_free(&w);
	fflush(stdout); /* invariant 3 */
	return st;
}

/* ---- piped input ------------------------------------------------------ */

/* One line of f into *buf (grown with emdb_realloc), without its newline.
 * Returns false at end of input with nothing read. */
static bool read_line(FILE *f, char **buf, size_t *cap)
{
	size_t len = 0;
	if (!*buf) {
		*cap = 256;
		*buf = emdb_malloc(*cap);
		if (!*buf)
			return false;
	}
	for (;;) {
		if (!fgets(*buf + len, (int)(*cap - len), f))
			return len > 0;
		len += strlen(*buf + len);
		if (len && (*buf)[len - 1] == '\n') {
			(*buf)[--len] = 0;
			return true;
		}
		if (len + 1 < *cap) /* end of input without a newline */
			continue;
		char *p = emdb_realloc(*buf, *cap * 2);
		if (!p)
			return true; /* run what fits; the rest comes as a next line */
		*buf = p;
		*cap *= 2;
	}
}

int shell_piped(cli_session *s, FILE *in)
{
	char *line = NULL;
	size_t cap = 0;
	cli_status worst = CLI_OK;
	while (!s->quit && read_line(in, &line, &cap)) {
		cli_status st = shell_line(s, line);
		if (st > worst)
			worst = st;
	}
	emdb_free(line);
	return (int)worst;
}

/* ---- the interactive shell ------------------------------------------- */

static cli_session *session_of(EditLine *el)
{
	void *p = NULL;
	el_get(el, EL_CLIENTDATA, &p);
	return p;
}

static char *prompt(EditLine *el)
{
	return (char *)session_prompt(session_of(el));
}

/* Print the candidates in columns under the line being edited. */
static void list_matches(FILE *out, const cli_matches *m)
{
	size_t width = 0;
	for (size_t i = 0; i < m->n; i++) {
		size_t len = strlen(m->v[i]);
		width = len > width ? len : width;
	}
	width += 2;
	size_t cols = width < LIST_WIDTH ? LIST_WIDTH / width : 1;
	fputc('\n', out);
	for (size_t i = 0; i < m->n; i++) {
		bool eol = (i + 1) % cols == 0 || i + 1 == m->n;
		if (eol)
			fprintf(out, "%s\n", m->v[i]);
		else
			fprintf(out, "%-*s", (int)width, m->v[i]);
	}
	fflush(out);
}

static void replace_word(EditLine *el, size_t cur_len, const char *with, size_t with_len)
{
	char buf[512];
	if (with_len >= sizeof(buf))
		return;
	memcpy(buf, with, with_len);
	buf[with_len] = 0;
	el_deletestr(el, (int)cur_len);
	el_insertstr(el, buf);
}

/* Bound to Tab (invariant 2). */
static unsigned char complete(EditLine *el, int ch)
{
	cli_session *s = session_of(el);
	const LineInfo *li = el_line(el);
	size_t len = (size_t)(li->cursor - li->buffer);
	char *line = emdb_malloc(len + 1);
	if (!line)
		return CC_ERROR;
	memcpy(line, li->buffer, len);
	line[len] = 0;
	cli_matches m;
	complete_line(s, line, &m);
	size_t cur_len = len - m.word_start;
	unsigned char ret = CC_ERROR;
	if (m.n == 1) {
		size_t n = strlen(m.v[0]);
		replace_word(el, cur_len, m.v[0], n);
		if (n && m.v[0][n - 1] != '=' && m.v[0][n - 1] != ':')
			el_insertstr(el, " ");
		ret = CC_REFRESH;
	} else if (m.n > 1) {
		size_t common = strlen(m.v[0]);
		for (size_t i = 1; i < m.n; i++) {
			size_t k = 0;
			while (k < common && m.v[i][k] == m.v[0][k])
				k++;
			common = k;
		}
		if (common > cur_len) {
			replace_word(el, cur_len, m.v[0], common);
			ret = CC_REFRESH;
		} else {
			FILE *out = stdout;
			el_get(el, EL_GETFP, 1, &out);
			list_matches(out, &m);
			ret = CC_REDISPLAY;
		}
	}
	complete_free(&m);
	emdb_free(line);
	return ret;
}

/* Where history lives (shell.h); false for nowhere. */
static bool history_path(char *buf, size_t cap)
{
	const char *env = getenv("EMDB_CLI_HISTFILE");
	if (env) {
		snprintf(buf, cap, "%s", env);
		return env[0] != 0;
	}
	const char *home = getenv("HOME");
	if (!home || !home[0])
		return false;
	return (size_t)snprintf(buf, cap, "%s/.emdb_history", home) < cap;
}

int shell_interactive(cli_session *s)
{
	char hist_file[4096];
	bool have_hist = history_path(hist_file, sizeof(hist_file));
	HistEvent ev;
	History *h = history_init();
	EditLine *el = el_init("emdb-cli", stdin, stdout, stderr);
	if (!h || !el) {
		fprintf(stderr, "emdb-cli: cannot set up the line editor\n");
		if (el)
			el_end(el);
		if (h)
			history_end(h);
		return CLI_FAIL;
	}
	history(h, &ev, H_SETSIZE, HISTORY_LINES);
	history(h, &ev, H_SETUNIQUE, 1);
	if (have_hist)
		history(h, &ev, H_LOAD, hist_file); /* a missing file is a first run */

	el_set(el, EL_CLIENTDATA, (void *)s);
	el_set(el, EL_EDITOR, "emacs");
	el_set(el, EL_SIGNAL, 1);
	el_set(el, EL_PROMPT, prompt);
	el_set(el, EL_HIST, history, h);
	/* The wide form: libedit keeps these pointers, whereas el_set's narrow
	 * EL_ADDFN copies the strings and never frees the copies. */
	el_wset(el, EL_ADDFN, L"emdb-complete", L"complete a command, table or option", complete);
	el_set(el, EL_BIND, "^I", "emdb-complete", NULL);
	el_source(el, NULL); /* the user's ~/.editrc, if any */

	session_client(s); /* the first prompt tells whether it answers */
	while (!s->quit) {
		int count = 0;
		const char *line = el_gets(el, &count);
		if (!line) {
			if (count < 0 && errno == EINTR)
				continue;
			fputc('\n', stdout); /* ^D: leave the next shell prompt on its own line */
			break;
		}
		if (!line[strspn(line, " \t\r\n")])
			continue;
		char *entry = emdb_strdup(line);
		if (!entry)
			continue;
		entry[strcspn(entry, "\r\n")] = 0;
		history(h, &ev, H_ENTER, entry);
		if (have_hist)
			history(h, &ev, H_SAVE, hist_file); /* invariant 1 */
		shell_line(s, entry);
		emdb_free(entry);
	}
	el_end(el);
	history_end(h);
	return CLI_OK;
}
