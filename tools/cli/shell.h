/*
 * shell.h - emdb-cli's read-eval loops: the interactive shell on a
 * terminal (libedit: line editing, history, Tab completion) and the
 * plain loop over piped input.
 */
#ifndef EMDB_CLI_SHELL_H
#define EMDB_CLI_SHELL_H

#include <stdio.h>

#include "tools/cli/session.h"

/* Split one typed line into words and run it.  Blank lines and lines
 * whose first character (after blanks) is '#' do nothing (CLI_OK). */
cli_status shell_line(cli_session *s, const char *line);

/* The interactive shell on stdin/stdout, until quit, exit or end of
 * input (^D).  History lives in $EMDB_CLI_HISTFILE if set (empty: none),
 * else ~/.emdb_history, else (no HOME) nowhere.  Returns the exit status:
 * 0. */
int shell_interactive(cli_session *s);

/* Run the lines of `in` without an editor or a prompt, until quit, exit
 * or end of input; every line runs, whatever the ones before did.
 * Returns the exit status: the highest status of its commands (0 all
 * succeeded, 1 one failed, 2 one was misused). */
int shell_piped(cli_session *s, FILE *in);

#endif
