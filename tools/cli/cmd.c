/*
 * cmd.c - the table of emdb-cli's commands, the dispatcher, and the local
 * commands help and quit.
 *
 * Invariants:
 *   1. cmds[] is the only list of commands.  The dispatcher, `help`,
 *      `help COMMAND` and completion (complete.c) read it; none keeps a
 *      list of its own, so a row added here is dispatched, documented
 *      and completed at once.
 *   2. A handler runs only with its number of arguments in range, and,
 *      for a command that needs the server, over a connection whose role
 *      is at least the row's: the server would refuse it too (AUTH), but
 *      saying which role is needed before sending helps an operator more.
 *   3. A command name is one or more words; the longest row name that
 *      matches the first words of a line wins, matched ignoring case.
 *
 * State changes: `current`, the row being run (single-threaded), and
 * s->quit (quit, exit).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <strings.h>

#include "tools/cli/cmd.h"
#include "tools/cli/cmd_int.h"

static const cli_cmd cmds[] = {
	{ "ping", "", "check that the server answers, and how fast", NULL, EMDB_ROLE_READER, 0, 0,
	  cmd_ping, { CLI_COMP_NONE } },
	{ "info", "[SECTION]", "the server's report (INFO), all of it or one section",
	  "SECTION is server, clients, memory, ops, tables, persistence, tier, cluster\n"
	  "or all; without it, the default sections.  Lines are \"key: value\" under\n"
	  "\"# Section\" headings; with --json an object per section, values as\n"
	  "strings.",
	  EMDB_ROLE_READER, 0, 1, cmd_info, { CLI_COMP_INFO_SECTION, CLI_COMP_NONE } },
	{ "stats", "", "the database's statistics, summed over its tables",
	  "Tables, bytes allocated now and at peak, then the sums over every\n"
	  "table of rows, bytes, calls and IDs per operation (step is the\n"
	  "largest step of any table).",
	  EMDB_ROLE_READER, 0, 0, cmd_stats, { CLI_COMP_NONE } },
	{ "cluster info", "", "the cluster this server belongs to, one row per node",
	  "The server's rank, the cluster's state (forming, ready, degraded),\n"
	  "partitions and epoch, this node's rows and bytes, then per node its\n"
	  "address, state (self, connecting, up, down, refused) and what this\n"
	  "server's node link sent to and received from it: bytes and messages\n"
	  "(its own counters, headers included), calls made, failed and timed\n"
	  "out, requests served; then why a node not up is not.  A single node\n"
	  "says it is not part of a cluster.",
	  EMDB_ROLE_READER, 0, 0, cmd_cluster_info, { CLI_COMP_NONE } },
	{ "cluster linktest", "[--seconds S] [--depth D] [--request B] [--reply B]",
	  "measure this server's links to the other nodes",
	  "For S seconds (default 1, at most 10) the server keeps D rounds in\n"
	  "flight (default 1, at most 64), each round one message to every other\n"
	  "node of B bytes (--request, default 4096) answered with B bytes\n"
	  "(--reply, default 4096); K, M, G multiply by 1024.  Sizes count as the\n"
	  "nodes' link counters do (cluster info), headers included.  The\n"
	  "messages go through the nodes' own link, threads and serve path, with\n"
	  "no table and no engine: a check of the network between nodes, as\n"
	  "iperf is.  Prints rounds/s, MB/s (both ways) and microseconds per\n"
	  "message.  The server needs protocol version 5.",
	  EMDB_ROLE_ADMIN, 0, 8, cmd_cluster_linktest, { CLI_COMP_NONE } },
	{ "config get", "PATTERN", "the settings whose name matches PATTERN",
	  "PATTERN is a key or a glob (\"*\" for every setting, \"max_*\");\n"
	  "tokens read <hidden>.  The keys are those of docs/server.md.",
	  EMDB_ROLE_TRAINER, 1, 1, cmd_config_get, { CLI_COMP_CONFIG_KEY, CLI_COMP_NONE } },
	{ "config set", "KEY VALUE [KEY VALUE...]", "change settings while the server runs",
	  "Only the keys marked run time in docs/server.md can change (emdb-server\n"
	  "--help marks them with *).  Sizes take K, M, G, T.  Several pairs are\n"
	  "applied together or, when one is refused, not at all; a new TLS\n"
	  "certificate goes with its key:\n"
	  "  config set tls_cert_file /etc/emdb/new.crt tls_key_file /etc/emdb/new.key\n"
	  "Naming a tls_* key reloads the TLS files for new connections.\n"
	  "Quote a VALUE with blanks: config set log_level \"debug\".",
	  EMDB_ROLE_ADMIN, 2, 2 * EMDB_CLIENT_CONFIG_SET_MAX, cmd_config_set,
	  { CLI_COMP_CONFIG_KEY, CLI_COMP_NONE, CLI_COMP_REPEAT } },
	{ "table create", "NAME DIM [KEY=VALUE...]", "create a table of DIM floats per row",
	  "NAME is 1..63 of [A-Za-z0-9_.-]; DIM 1..65536.  Options:\n"
	  "  optimizer=sgd|adagrad|rowwise_adagrad|adam|ftrl   (sgd)\n"
	  "  lr= eps= beta1= beta2= lr_decay= initial_accumulator= beta= l1= l2=\n"
	  "      hyperparameters of the optimizer (alpha= is lr); each optimizer\n"
	  "      starts from its defaults (docs/engine.md) and takes only its own\n"
	  "  init=zeros|uniform:LOW,HIGH|normal:MEAN,STD       initial values (zeros)\n"
	  "  seed=N            the initializer's seed (0)\n"
	  "  default=zeros|init  what lookup gives an ID the table lacks (zeros)\n"
	  "Example: table create ads 64 optimizer=adam lr=0.001 init=uniform:-0.05,0.05",
	  EMDB_ROLE_ADMIN, 2, -1, cmd_table_create,
	  { CLI_COMP_NONE, CLI_COMP_NONE, CLI_COMP_TABLE_OPTION } },
	{ "table describe", "NAME|ID", "a table's configuration and statistics",
	  "The table is found by name first; a number that names no table is\n"
	  "taken as a table id.",
	  EMDB_ROLE_READER, 1, 1, cmd_table_describe, { CLI_COMP_TABLE, CLI_COMP_NONE } },
	{ "table list", "", "every table: id, name, dim, optimizer, rows, step", NULL,
	  EMDB_ROLE_READER, 0, 0, cmd_table_list, { CLI_COMP_NONE } },
	{ "table drop", "NAME|ID", "drop a table and all its rows",
	  "The table is found as by table describe.  There is no undo.",
	  EMDB_ROLE_ADMIN, 1, 1, cmd_table_drop, { CLI_COMP_TABLE, CLI_COMP_NONE } },
	{ "table reserve", "NAME|ID ROWS", "make room for ROWS rows before training starts",
	  "ROWS counts the rows the table holds too.  The index is grown so that\n"
	  "inserting up to ROWS IDs resizes nothing, and the memory of ROWS rows\n"
	  "is mapped and backed now, so those inserts take no page fault; rows,\n"
	  "values and steps stay as they are.  ROWS is a whole number with an\n"
	  "optional k, M or G (thousands, millions, billions): 40M is 40000000.\n"
	  "It takes as long as writing that memory once (seconds per 10M rows\n"
	  "where first touch is slow), on threads of the server's own (its\n"
	  "other requests are served meanwhile): reserve before training.  The command waits for it without --timeout's\n"
	  "limit.  The server needs protocol version 2.",
	  EMDB_ROLE_ADMIN, 2, 2, cmd_table_reserve, { CLI_COMP_TABLE, CLI_COMP_NONE } },
	{ "table alter", "NAME|ID KEY=VALUE...", "change a table's optimizer hyperparameters now",
	  "KEY is one of the optimizer's run-time hyperparameters: lr (alpha= for\n"
	  "ftrl), eps, beta1, beta2, lr_decay, beta, l1, l2, as the optimizer\n"
	  "takes them (table describe lists them with their values).  The next\n"
	  "Update uses the new values; an Update running now finishes with the\n"
	  "old ones.  A checkpoint keeps them.  optimizer, initial_accumulator,\n"
	  "init, seed and default are fixed at creation.  Prints the table's\n"
	  "hyperparameters after the change.  The server needs protocol version 3.\n"
	  "Example: table alter ads lr=0.0005",
	  EMDB_ROLE_TRAINER, 2, -1, cmd_table_alter,
	  { CLI_COMP_TABLE, CLI_COMP_TABLE_OPTION, CLI_COMP_TABLE_OPTION } },
	{ "lookup", "TABLE ID...", "print the vectors of IDs, and whether the table holds them",
	  "Read-only: an ID the table does not hold is not inserted and shows\n"
	  "the table's lookup default.  IDs are unsigned 64-bit, decimal or 0x hex.",
	  EMDB_ROLE_READER, 2, -1, cmd_lookup, { CLI_COMP_TABLE, CLI_COMP_NONE } },
	{ "export", "TABLE FILE [--no-state]", "write a table's IDs and rows to a file",
	  "Scans the table page by page (every row it holds throughout, exactly\n"
	  "once; training may go on) into FILE: a 64-byte header, then per row\n"
	  "its ID (u64), vector (dim f32) and optimizer state (f32), little-\n"
	  "endian (docs/cli.md, \"Row files\"; numpy reads it with one dtype).\n"
	  "--no-state writes the vectors alone.  Prints the rows and the steps\n"
	  "the pages saw.  The server needs protocol version 3.",
	  EMDB_ROLE_TRAINER, 2, 3, cmd_export, { CLI_COMP_TABLE, CLI_COMP_NONE } },
	{ "import", "TABLE FILE [--no-state]", "write the rows of a file made by export into a table",
	  "TABLE must exist with the file's dim (create it first: table create);\n"
	  "IDs it lacks are inserted, held ones overwritten.  With the file's\n"
	  "state (the default) the table's optimizer must be the file's; with\n"
	  "--no-state only the vectors are written (new rows start with the\n"
	  "initial state, held ones keep theirs).  Loaded page by page: after a\n"
	  "failure the error says how many rows went in.",
	  EMDB_ROLE_TRAINER, 2, 3, cmd_import, { CLI_COMP_TABLE, CLI_COMP_NONE } },
	{ "checkpoint", "[full|incremental] [--no-wait]", "write a checkpoint of every table",
	  "full (the default) writes every row; incremental only the rows created\n"
	  "or updated since the server's previous checkpoint or restore.  Training\n"
	  "goes on meanwhile; Updates pause only for the switch (milliseconds).\n"
	  "Waits for the job, with a progress bar when stderr is a terminal, then\n"
	  "prints the checkpoint's id, tables, rows, MB, seconds, MB/s and the\n"
	  "pause.  --no-wait prints the job's number at once (follow it with job).\n"
	  "The server needs --data-dir.",
	  EMDB_ROLE_ADMIN, 0, 2, cmd_checkpoint,
	  { CLI_COMP_CKPT_KIND, CLI_COMP_CKPT_KIND, CLI_COMP_NONE } },
	{ "checkpoint list", "", "the checkpoints in the server's store, oldest first",
	  "ID, kind, parent (what an incremental extends), created (local time),\n"
	  "tables, rows and MB written in it, and its largest table step.",
	  EMDB_ROLE_READER, 0, 0, cmd_checkpoint_list, { CLI_COMP_NONE } },
	{ "checkpoint delete", "ID", "delete a checkpoint from the store",
	  "Refused (BUSY) while an incremental checkpoint extends it: delete\n"
	  "that one first.",
	  EMDB_ROLE_ADMIN, 1, 1, cmd_checkpoint_delete, { CLI_COMP_NONE } },
	{ "restore", "ID|latest [--no-wait]", "replace every table with a checkpoint",
	  "Loads the checkpoint (an incremental with its chain), checks it, and\n"
	  "only then replaces every table at once: tables created since go too.\n"
	  "On any failure the tables stay as they were.  Waits with a progress\n"
	  "bar, as checkpoint does; --no-wait prints the job's number at once.",
	  EMDB_ROLE_ADMIN, 1, 2, cmd_restore,
	  { CLI_COMP_CKPT_ID, CLI_COMP_CKPT_ID, CLI_COMP_NONE } },
	{ "job", "[N]", "how a checkpoint or restore job goes, or how it ended",
	  "N is the number checkpoint --no-wait printed; without it, the newest\n"
	  "job.  Kind, state, phase, rows and MB done of the totals, seconds,\n"
	  "then the checkpoint written or restored, or the error.  The server\n"
	  "remembers its last 16 jobs.",
	  EMDB_ROLE_READER, 0, 1, cmd_job, { CLI_COMP_NONE } },
	{ "shutdown", "", "ask the server to exit",
	  "The server stops accepting, answers what it has received, and exits.\n"
	  "The connection closes; a shell says so at its next command.",
	  EMDB_ROLE_ADMIN, 0, 0, cmd_shutdown, { CLI_COMP_NONE } },
	{ "help", "[COMMAND]", "list the commands, or explain one (help table: all table commands)",
	  NULL, EMDB_ROLE_NONE, 0, 2, cmd_help,
	  { CLI_COMP_COMMAND, CLI_COMP_COMMAND, CLI_COMP_COMMAND } },
	{ "quit", "", "leave the shell", NULL, EMDB_ROLE_NONE, 0, 0, cmd_quit, { CLI_COMP_NONE } },
	{ "exit", "", "leave the shell", NULL, EMDB_ROLE_NONE, 0, 0, cmd_quit, { CLI_COMP_NONE } },
};
#define N_CMDS (sizeof(cmds) / sizeof(cmds[0]))

static const cli_cmd *current;

const cli_cmd *cmd_table(size_t *n)
{
	*n = N_CMDS;
	return cmds;
}

const char *cmd_role_name(emdb_role role)
{
	switch (role) {
	case EMDB_ROLE_NONE:
		return "-";
	case EMDB_ROLE_READER:
		return "reader";
	case EMDB_ROLE_TRAINER:
		return "trainer";
	case EMDB_ROLE_ADMIN:
		return "admin";
	}
	return "?";
}

/* How many words of argv[argc] the name `name` takes: its word count if
 * they all match (ignoring case), else 0.  With prefix, argv may end
 * before name does (help's matching of "table" to "table create"). */
static int name_match(const char *name, int argc, char *const *argv, bool prefix)
{
	int k = 0;
	const char *p = name;
	while (*p) {
		size_t len = strcspn(p, " ");
		if (k == argc)
			return prefix ? k : 0;
		if (strlen(argv[k]) != len || strncasecmp(argv[k], p, len))
			return 0;
		k++;
		p += len;
		p += *p == ' ';
	}
	return k;
}

const cli_cmd *cmd_find(int argc, char *const *argv, int *used)
{
	const cli_cmd *best = NULL;
	int best_k = 0;
	for (size_t i = 0; i < N_CMDS; i++) {
		int k = name_match(cmds[i].name, argc, argv, false);
		if (k > best_k) {
			best = &cmds[i];
			best_k = k;
		}
	}
	*used = best_k;
	return best;
}

static void full_usage(const cli_cmd *cmd, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s%s%s", cmd->name, cmd->synopsis[0] ? " " : "", cmd->synopsis);
}

int cmd_usage_width(void)
{
	int wide = 0;
	for (size_t i = 0; i < N_CMDS; i++) {
		char usage[256];
		full_usage(&cmds[i], usage, sizeof(usage));
		int len = (int)strlen(usage);
		wide = len > wide ? len : wide;
	}
	return wide;
}

cli_status cmd_usage(cli_session *s, const char *fmt, ...)
{
	char why[512], usage[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	full_usage(current, usage, sizeof(usage));
	return session_error(s, CLI_USAGE, "USAGE", "%s; usage: %s", why, usage);
}

double cmd_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

cli_status cmd_ok(cli_session *s)
{
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_close(&w);
	} else {
		printf("OK\n");
	}
	return CLI_OK;
}

/* No row named by argv: say why, naming the subcommands when the first
 * word is a group ("table frob"). */
static cli_status unknown(cli_session *s, int argc, char **argv)
{
	char subs[256];
	size_t len = 0;
	subs[0] = 0;
	for (size_t i = 0; i < N_CMDS; i++) {
		const char *sp = strchr(cmds[i].name, ' ');
		if (sp && name_match(cmds[i].name, 1, argv, true) == 1 && len < sizeof(subs))
			len += (size_t)snprintf(subs + len, sizeof(subs) - len, "%s%s", len ? ", " : "",
						sp + 1);
	}
	if (!len)
		return session_error(s, CLI_USAGE, "USAGE", "unknown command '%s'; try help", argv[0]);
	if (argc == 1)
		return session_error(s, CLI_USAGE, "USAGE", "'%s' needs a subcommand: %s", argv[0], subs);
	return session_error(s, CLI_USAGE, "USAGE", "unknown command '%s %s'; '%s' takes %s", argv[0],
			     argv[1], argv[0], subs);
}

cli_status cmd_run(cli_session *s, int argc, char **argv)
{
	int used;
	const cli_cmd *cmd = cmd_find(argc, argv, &used);
	if (!cmd)
		return unknown(s, argc, argv);
	current = cmd;
	int nargs = argc - used;
	if (nargs < cmd->min_args || (cmd->max_args >= 0 && nargs > cmd->max_args))
		return cmd_usage(s, "wrong number of arguments for '%s'", cmd->name);
	emdb_client *c = NULL;
	if (cmd->role > EMDB_ROLE_NONE) {
		c = session_client(s);
		if (!c)
			return CLI_FAIL;
		emdb_role have = emdb_client_role(c);
		if (have < cmd->role) /* invariant 2 */
			return session_error(s, CLI_FAIL, "AUTH",
					     "'%s' needs the %s role; this connection has the %s role",
					     cmd->name, cmd_role_name(cmd->role), cmd_role_name(have));
	}
	return cmd->run(s, c, nargs, argv + used);
}

/* ---- help, quit ------------------------------------------------------ */

static void help_json_row(jw *w, const cli_cmd *cmd, bool details)
{
	jw_obj(w, NULL);
	jw_str(w, "name", cmd->name);
	jw_str(w, "synopsis", cmd->synopsis);
	jw_str(w, "summary", cmd->summary);
	if (details)
		jw_str(w, "help", cmd->help ? cmd->help : "");
	jw_str(w, "role", cmd_role_name(cmd->role));
	jw_obj_end(w);
}

static void help_text_row(const cli_cmd *cmd)
{
	char usage[256];
	full_usage(cmd, usage, sizeof(usage));
	printf("%s\n  %s\n", usage, cmd->summary);
	for (const char *p = cmd->help; p && *p;) {
		size_t len = strcspn(p, "\n");
		printf("  %.*s\n", (int)len, p);
		p += len;
		p += *p == '\n';
	}
	if (cmd->role > EMDB_ROLE_NONE)
		printf("  role: %s\n", cmd_role_name(cmd->role));
}

cli_status cmd_help(cli_session *s, emdb_client *c, int argc, char **argv)
{
	jw w;
	if (argc == 0) {
		if (s->json) {
			jw_open(&w, stdout);
			jw_bool(&w, "ok", true);
			jw_arr(&w, "commands");
			for (size_t i = 0; i < N_CMDS; i++)
				help_json_row(&w, &cmds[i], false);
			jw_arr_end(&w);
			jw_close(&w);
			return CLI_OK;
		}
		printf("Commands (help COMMAND for details; Tab completes commands and tables):\n");
		int wide = cmd_usage_width();
		for (size_t i = 0; i < N_CMDS; i++) {
			char usage[256];
			full_usage(&cmds[i], usage, sizeof(usage));
			printf("  %-*s  %s\n", wide, usage, cmds[i].summary);
		}
		return CLI_OK;
	}
	/* Every row whose name begins with the words given: "help table"
	 * explains each table command. */
	const cli_cmd *hits[N_CMDS];
	size_t n = 0;
	for (size_t i = 0; i < N_CMDS; i++) {
		if (name_match(cmds[i].name, argc, argv, true) == argc)
			hits[n++] = &cmds[i];
	}
	if (n == 0)
		return cmd_usage(s, "no command '%s%s%s'", argv[0], argc > 1 ? " " : "",
				 argc > 1 ? argv[1] : "");
	if (s->json) {
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_arr(&w, "commands");
		for (size_t i = 0; i < n; i++)
			help_json_row(&w, hits[i], true);
		jw_arr_end(&w);
		jw_close(&w);
		return CLI_OK;
	}
	for (size_t i = 0; i < n; i++) {
		if (i)
			printf("\n");
		help_text_row(hits[i]);
	}
	return CLI_OK;
}

cli_status cmd_quit(cli_session *s, emdb_client *c, int argc, char **argv)
{
	s->quit = true;
	if (s->json)
		return cmd_ok(s);
	return CLI_OK;
}
