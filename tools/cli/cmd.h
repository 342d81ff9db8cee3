/*
 * cmd.h - emdb-cli's commands: the one table that the dispatcher, `help`,
 * `help COMMAND` and completion all read.  A new command is a new row
 * (and its handler): nothing else needs to learn about it.
 */
#ifndef EMDB_CLI_CMD_H
#define EMDB_CLI_CMD_H

#include <emdb/client.h>

#include "tools/cli/session.h"

/* What completion offers for an argument. */
typedef enum cli_comp {
	CLI_COMP_NONE = 0,
	CLI_COMP_COMMAND,      /* a command name, word by word (help) */
	CLI_COMP_TABLE,        /* a table name, fetched from the server */
	CLI_COMP_TABLE_OPTION, /* KEY=VALUE of table create (tableopt.h) */
	CLI_COMP_INFO_SECTION, /* server, clients, memory, ops, tables, all */
	CLI_COMP_CONFIG_KEY,   /* a setting's name, fetched from the server */
	CLI_COMP_REPEAT,       /* at comp[r]: argument i >= r completes as
				  comp[i % r] (KEY VALUE pairs) */
	CLI_COMP_CKPT_KIND,    /* full, incremental, --no-wait, and the
				  subcommands of checkpoint */
	CLI_COMP_CKPT_ID,      /* latest, --no-wait */
} cli_comp;

#define CLI_COMP_ARGS 3

/* A handler gets the words after the command's name.  c is the session's
 * connection, already made, for commands whose role is above NONE; NULL
 * for the local ones. */
typedef cli_status (*cli_handler)(cli_session *s, emdb_client *c, int argc, char **argv);

typedef struct cli_cmd {
	const char *name;     /* one or more words: "ping", "table create" */
	const char *synopsis; /* its arguments: "NAME DIM [KEY=VALUE...]" */
	const char *summary;  /* one line, for `help` */
	const char *help;     /* more lines, for `help COMMAND`; may be NULL */
	emdb_role role;       /* least role; NONE: runs without a server */
	int min_args;         /* words after the name */
	int max_args;         /* -1: no limit */
	cli_handler run;
	cli_comp comp[CLI_COMP_ARGS]; /* argument i; the last one also
					 applies to every later argument */
} cli_cmd;

/* The rows, in help order, and their count. */
const cli_cmd *cmd_table(size_t *n);

/* The row that the first words of argv name, matched case-insensitively,
 * the longest name winning; *used gets how many words the name took.
 * NULL when none does. */
const cli_cmd *cmd_find(int argc, char *const *argv, int *used);

/* Run one command (argv[argc], argc > 0): find it, check the number of
 * arguments and the role, connect if it needs the server, run it.  Every
 * error is reported through the session.  Returns its status. */
cli_status cmd_run(cli_session *s, int argc, char **argv);

/* The widest "NAME SYNOPSIS" of the rows, for aligning lists of them. */
int cmd_usage_width(void);

/* The name of a role: "reader", ...; "-" for NONE. */
const char *cmd_role_name(emdb_role role);

#endif
