/*
 * test_cli_pty.c - emdb-cli's interactive shell, driven through a
 * pseudo-terminal as a person would: typed commands and their output,
 * Tab completion of a command, of a table name and of a table option
 * (checked by running the completed line), the list Tab shows when a word
 * is ambiguous, `help table`, errors, the history file and its recall in
 * a later session, a lost server and the reconnection, ^D and quit, and
 * the progress bar of a checkpoint: drawn in place, erased before the
 * result.
 *
 * Every test kills its shell (SIGKILL if still running) and its server in
 * .fini, which Criterion runs after a failed assertion too; both also die
 * with the test process (PR_SET_PDEATHSIG).
 */
#define _GNU_SOURCE /* tests/lib/tmpdir.h: nftw */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <emdb/client.h>

#include "tests/lib/client_server.h"
#include "tests/lib/tmpdir.h"

typedef struct term {
	pid_t pid;
	int fd;         /* the pty's master side */
	char *buf;      /* everything the shell wrote, NUL-terminated */
	size_t len;
	size_t mark;    /* term_expect searches from here */
	char dir[64];   /* HOME, holding the history file */
	char hist[128]; /* EMDB_CLI_HISTFILE; "" leaves it unset */
	bool no_home;   /* start the shell without HOME */
} term;

static test_server srv;
static term tm = { .fd = -1 };

static void term_stop(term *t)
{
	if (t->pid > 0) {
		kill(t->pid, SIGKILL);
		while (waitpid(t->pid, NULL, 0) < 0 && errno == EINTR)
			;
		t->pid = 0;
	}
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	free(t->buf);
	t->buf = NULL;
	t->len = t->mark = 0;
}

static void setup_dir(void)
{
	tm = (term){ .fd = -1 };
	strcpy(tm.dir, "/tmp/emdb-cli-pty-XXXXXX");
	cr_assert_not_null(mkdtemp(tm.dir));
	snprintf(tm.hist, sizeof(tm.hist), "%s/history", tm.dir);
}

static void setup(void)
{
	setup_dir();
	test_server_start(&srv, NULL);
}

/* As setup, with a server that keeps checkpoints in tm.dir/data. */
static void setup_persist(void)
{
	setup_dir();
	char data[128];
	snprintf(data, sizeof(data), "%s/data", tm.dir);
	const char *const flags[] = { "--data-dir", data, NULL };
	test_server_start(&srv, flags);
}

static void teardown(void)
{
	term_stop(&tm);
	test_server_stop(&srv);
	if (tm.dir[0]) {
		char path[128];
		snprintf(path, sizeof(path), "%s/.emdb_history", tm.dir);
		unlink(path);
		snprintf(tm.hist, sizeof(tm.hist), "%s/history", tm.dir);
		unlink(tm.hist);
		snprintf(path, sizeof(path), "%s/data", tm.dir);
		tmpdir_remove(path);
		rmdir(tm.dir);
		tm.dir[0] = 0;
	}
}

/* Start emdb-cli on a new pseudo-terminal, with extra flags (may be NULL). */
static void term_start(term *t, const char *const *flags)
{
	const char *argv[16] = { EMDB_CLI_BIN, "-u", srv.tcp_uri };
	int argc = 3;
	for (int i = 0; flags && flags[i]; i++)
		argv[argc++] = flags[i];
	argv[argc] = NULL;
	struct winsize ws = { .ws_row = 50, .ws_col = 200 };
	pid_t parent = getpid();
	t->pid = forkpty(&t->fd, NULL, NULL, &ws);
	cr_assert_geq(t->pid, 0, "forkpty: %s", strerror(errno));
	if (t->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		if (t->no_home)
			unsetenv("HOME");
		else
			setenv("HOME", tm.dir, 1);
		if (t->hist[0])
			setenv("EMDB_CLI_HISTFILE", t->hist, 1);
		else
			unsetenv("EMDB_CLI_HISTFILE");
		setenv("TERM", "xterm", 1);
		unsetenv("EMDB_CLI_TOKEN");
		execv(EMDB_CLI_BIN, (char *const *)argv);
		_exit(127);
	}
	fcntl(t->fd, F_SETFL, fcntl(t->fd, F_GETFL) | O_NONBLOCK);
	t->buf = calloc(1, 1);
	t->len = t->mark = 0;
}

/* What the shell wrote, with escape sequences and control characters made
 * visible, for failure messages. */
static const char *printable(const char *s)
{
	static char out[16384];
	size_t o = 0, n = strlen(s);
	if (n > 6000)
		s += n - 6000;
	for (; *s && o + 8 < sizeof(out); s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '\n' || (c >= 0x20 && c < 0x7f))
			out[o++] = (char)c;
		else if (c != '\r')
			o += (size_t)snprintf(out + o, sizeof(out) - o, "<%02x>", c);
	}
	out[o] = 0;
	return out;
}

/* Read what the shell has written; false at end (EIO once it exited). */
static bool term_read(term *t, int timeout_ms)
{
	struct pollfd p = { .fd = t->fd, .events = POLLIN };
	int k = poll(&p, 1, timeout_ms);
	if (k <= 0)
		return true;
	char chunk[4096];
	ssize_t n = read(t->fd, chunk, sizeof(chunk));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n <= 0)
		return false;
	t->buf = realloc(t->buf, t->len + (size_t)n + 1);
	cr_assert_not_null(t->buf);
	memcpy(t->buf + t->len, chunk, (size_t)n);
	t->len += (size_t)n;
	t->buf[t->len] = 0;
	return true;
}

/* Wait (up to 15 s) for `needle` in the output after the mark, and move
 * the mark past it. */
static void term_expect(term *t, const char *needle)
{
	for (int waited = 0;; waited += 20) {
		char *hit = strstr(t->buf + t->mark, needle);
		if (hit) {
			t->mark = (size_t)(hit - t->buf) + strlen(needle);
			return;
		}
		cr_assert_lt(waited, 15000, "no \"%s\" from the shell; it wrote:\n%s", needle,
			     printable(t->buf + t->mark));
		if (!term_read(t, 20))
			cr_assert_not_null(strstr(t->buf + t->mark, needle),
					   "the shell ended without \"%s\"; it wrote:\n%s", needle,
					   printable(t->buf + t->mark));
	}
}

/* Wait until the line editor reads raw keys.  libedit prints its prompt
 * before it leaves canonical mode, and a ^D that the terminal receives
 * in canonical mode is taken by the line discipline as end of file and
 * lost when the mode changes; a person cannot type that fast, a test
 * can.  The master side of a pty sees the slave's modes. */
static void term_wait_editing(term *t)
{
	for (int waited = 0; waited < 10000; waited += 2) {
		struct termios tio;
		cr_assert_eq(tcgetattr(t->fd, &tio), 0, "tcgetattr: %s", strerror(errno));
		if (!(tio.c_lflag & ICANON))
			return;
		test_sleep_ms(2);
	}
	cr_assert_fail("the shell's terminal never left canonical mode");
}

static void term_send(term *t, const char *keys)
{
	term_wait_editing(t);
	size_t len = strlen(keys), off = 0;
	while (off < len) {
		ssize_t w = write(t->fd, keys + off, len - off);
		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			term_read(t, 10);
			continue;
		}
		cr_assert_gt(w, 0, "write to the pty: %s", strerror(errno));
		off += (size_t)w;
	}
}

/* Type keys, then wait for the prompt that follows the command. */
static void term_run(term *t, const char *keys, const char *want)
{
	term_send(t, keys);
	term_expect(t, want);
}

/* Wait (up to 15 s) for the shell to exit; its exit status. */
static int term_wait_exit(term *t)
{
	bool open = true;
	for (int waited = 0; waited < 15000; waited += 20) {
		int st;
		pid_t r = waitpid(t->pid, &st, WNOHANG);
		if (r == t->pid) {
			t->pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
		if (open)
			open = term_read(t, 20);
		else
			test_sleep_ms(20);
	}
	cr_assert_fail("the shell did not exit; it wrote:\n%s", printable(t->buf + t->mark));
	return -1;
}

/* The shell exits with status 0 (under a sanitizer: without a report). */
static void term_exits_ok(term *t)
{
	int st = term_wait_exit(t);
	cr_assert_eq(st, 0, "the shell exited with %d; it wrote:\n%s", st, printable(t->buf + t->mark));
	cr_assert_null(strstr(t->buf, "Sanitizer"), "%s", printable(t->buf));
}

static char *slurp(const char *path)
{
	static char text[65536];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	if (f)
		fclose(f);
	text[n] = 0;
	return text;
}

static const char *prompt(void)
{
	static char p[300];
	snprintf(p, sizeof(p), "%s> ", srv.tcp_uri);
	return p;
}

Test(cli_pty, session, .init = setup, .fini = teardown)
{
	term_start(&tm, NULL);
	term_expect(&tm, prompt());

	term_run(&tm, "ping\r", "PONG");
	term_expect(&tm, prompt());
	term_run(&tm, "table create ads 4 init=uniform:-1,1 seed=3\r", "created table ads (id 1)");
	term_expect(&tm, prompt());

	/* A command's word completes (the line that runs is "table describe
	 * ads"). */
	term_run(&tm, "table des\tads\r", "name: ads");
	term_expect(&tm, "init: uniform:-1,1");
	term_expect(&tm, prompt());

	/* A table name completes, fetched from the server. */
	term_run(&tm, "lookup a\t7\r", "7: not found (default) [0, 0, 0, 0]");
	term_expect(&tm, prompt());
	term_run(&tm, "table res\ta\t2k\r", "reserved room for 2000 rows in table 'ads'");
	term_expect(&tm, prompt());

	/* The first word, case-insensitively, and a table option, which takes
	 * no blank after its '='. */
	term_run(&tm, "TAB\tcreate b 2 optim\tftrl\r", "created table b (id 2)");
	term_expect(&tm, prompt());
	term_run(&tm, "table describe b\r", "optimizer: ftrl");
	term_expect(&tm, prompt());

	/* An ambiguous word lists the candidates, then the line goes on. */
	term_send(&tm, "table \t");
	term_expect(&tm, "create");
	term_expect(&tm, "describe");
	term_expect(&tm, "list");
	term_expect(&tm, "drop");
	term_run(&tm, "list\r", "OPTIMIZER");
	term_expect(&tm, "ads");
	term_expect(&tm, prompt());

	/* help table. */
	term_run(&tm, "help table\r", "table create NAME DIM [KEY=VALUE...]");
	term_expect(&tm, "optimizer=sgd|adagrad|rowwise_adagrad|adam|ftrl");
	term_expect(&tm, "table describe NAME|ID");
	term_expect(&tm, "table list");
	term_expect(&tm, "table drop NAME|ID");
	term_expect(&tm, prompt());

	/* Errors print and the shell goes on. */
	term_run(&tm, "lookup nope 1\r", "(error) NO_TABLE: ");
	term_expect(&tm, prompt());
	term_run(&tm, "frob\r", "(error) USAGE: unknown command 'frob'");
	term_expect(&tm, prompt());
	term_run(&tm, "config set log_level \"debug\"\r", "OK");
	term_expect(&tm, prompt());
	/* config set completes every key of its KEY VALUE pairs. */
	term_run(&tm, "config set log_level info max_tick\t500\r", "OK");
	term_expect(&tm, prompt());
	term_run(&tm, "config get max_tickets\r", "max_tickets: 500");
	term_expect(&tm, prompt());

	term_send(&tm, "quit\r");
	term_exits_ok(&tm);

	/* Every line is in the history file. */
	const char *h = slurp(tm.hist);
	cr_assert_not_null(strstr(h, "ping"), "history: %s", h);
	cr_assert_not_null(strstr(h, "help"), "history: %s", h);
	cr_assert_not_null(strstr(h, "lookup"), "history: %s", h);
}

Test(cli_pty, history_is_recalled_by_the_next_session, .init = setup, .fini = teardown)
{
	term_start(&tm, NULL);
	term_expect(&tm, prompt());
	term_run(&tm, "table list\r", "(no tables)");
	term_expect(&tm, prompt());
	term_send(&tm, "exit\r");
	term_exits_ok(&tm);
	term_stop(&tm);

	term_start(&tm, NULL);
	term_expect(&tm, prompt());
	term_run(&tm, "\x10\x10\r", "(no tables)"); /* ^P ^P: the line before "exit" */
	term_expect(&tm, prompt());
	term_send(&tm, "\x04"); /* ^D on an empty line leaves */
	term_exits_ok(&tm);
}

Test(cli_pty, history_file_defaults_to_home, .init = setup, .fini = teardown)
{
	char home_hist[128];
	snprintf(home_hist, sizeof(home_hist), "%s/.emdb_history", tm.dir);
	tm.hist[0] = 0;
	term_start(&tm, NULL);
	term_expect(&tm, prompt());
	term_run(&tm, "ping\r", "PONG");
	term_expect(&tm, prompt());
	term_send(&tm, "quit\r");
	term_exits_ok(&tm);
	term_stop(&tm);
	cr_assert_not_null(strstr(slurp(home_hist), "ping"), "~/.emdb_history: %s", slurp(home_hist));

	/* Without HOME (and no EMDB_CLI_HISTFILE) there is no history, and
	 * the shell works all the same. */
	unlink(home_hist);
	tm.no_home = true;
	term_start(&tm, NULL);
	term_expect(&tm, prompt());
	term_run(&tm, "ping\r", "PONG");
	term_expect(&tm, prompt());
	term_send(&tm, "quit\r");
	term_exits_ok(&tm);
	cr_assert_neq(access(home_hist, F_OK), 0);
}

Test(cli_pty, lost_server_then_reconnect, .init = setup, .fini = teardown)
{
	char port[16];
	snprintf(port, sizeof(port), "%u", srv.port);
	term_start(&tm, NULL);
	term_expect(&tm, prompt());
	term_run(&tm, "ping\r", "PONG");
	term_expect(&tm, prompt());

	test_server_stop(&srv);
	term_run(&tm, "ping\r", "(error) ");
	term_expect(&tm, "lost; the next command reconnects");
	term_expect(&tm, "(not connected)> ");
	term_run(&tm, "ping\r", "(error) IO: ");
	term_expect(&tm, "(not connected)> ");

	/* A server on the same port again: the next command reconnects. */
	const char *const again[] = { "--port", port, NULL };
	test_server_start(&srv, again);
	cr_assert_eq(srv.port, (uint16_t)atoi(port));
	term_run(&tm, "ping\r", "PONG");
	term_expect(&tm, prompt());
	term_send(&tm, "quit\r");
	term_exits_ok(&tm);
}

Test(cli_pty, shutdown_and_json, .init = setup, .fini = teardown)
{
	const char *const flags[] = { "--json", NULL };
	term_start(&tm, flags);
	term_expect(&tm, prompt());
	term_run(&tm, "ping\r", "{\"ok\":true,\"reply\":\"PONG\"");
	term_expect(&tm, prompt());
	term_run(&tm, "lookup nope 1\r", "{\"ok\":false,\"error\":\"NO_TABLE\"");
	term_expect(&tm, prompt());
	term_run(&tm, "shutdown\r", "{\"ok\":true}");
	term_expect(&tm, "(not connected)> ");
	term_send(&tm, "exit\r");
	term_exits_ok(&tm);
}

Test(cli_pty, unreachable_at_start, .init = setup, .fini = teardown)
{
	test_server_stop(&srv);
	term_start(&tm, NULL);
	term_expect(&tm, "(error) IO: ");
	term_expect(&tm, "(not connected)> ");
	term_run(&tm, "help ping\r", "check that the server answers");
	term_expect(&tm, "(not connected)> ");
	term_send(&tm, "quit\r");
	term_exits_ok(&tm);
}

/* The bar of a checkpoint: redrawn in place ("\r", the line, erase to the
 * end) while the job runs and erased before the result is printed. */
Test(cli_pty, checkpoint_progress_bar, .init = setup_persist, .fini = teardown)
{
	/* Enough rows that the job is still running at the first poll. */
	enum { ROWS = 200000 };
	emdb_client *c;
	cr_assert_eq(emdb_client_connect(srv.tcp_uri, NULL, &c), 0, "%s", emdb_client_last_error());
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "big");
	cfg.dim = 32;
	uint32_t t;
	cr_assert_eq(emdb_client_table_create(c, &cfg, &t), 0, "%s", emdb_client_last_error());
	uint64_t *ids = malloc(ROWS * sizeof(*ids));
	cr_assert_not_null(ids);
	for (uint64_t i = 0; i < ROWS; i++)
		ids[i] = i + 1;
	emdb_client_ticket *tk = NULL;
	cr_assert_eq(emdb_client_prefetch(c, t, ids, ROWS, &tk), 0, "%s", emdb_client_last_error());
	emdb_client_ticket_free(tk);
	free(ids);
	emdb_client_close(c);

	term_start(&tm, NULL);
	term_expect(&tm, prompt());
	/* "checkpoint l<Tab>" completes to the subcommand. */
	term_run(&tm, "checkpoint l\t\r", "(no checkpoints)");
	term_expect(&tm, prompt());

	size_t from = tm.mark;
	term_run(&tm, "checkpoint\r", "checkpoint 1 (full): 1 tables, 200000 rows, ");
	term_expect(&tm, prompt());
	const char *out = tm.buf + from;
	const char *result = strstr(out, "checkpoint 1 (full)");
	const char *bar = strstr(out, " rows");
	cr_assert(bar && bar < result, "no bar before the result:\n%s", printable(out));
	cr_assert_not_null(strstr(out, "\033[K"), "the bar erases its line:\n%s", printable(out));
	/* Erased right before the result: "\r<ESC>[K" then the result. */
	const char *clear = result - 4;
	cr_assert(clear > out && !strncmp(clear, "\r\033[K", 4),
		  "the result does not follow an erased line:\n%s", printable(out));

	term_run(&tm, "restore la\t\r", "restored checkpoint 1 (full): 1 tables, 200000 rows");
	term_expect(&tm, prompt());
	term_send(&tm, "quit\r");
	term_exits_ok(&tm);
}
