/*
 * complete.h - what Tab offers in the shell: command names word by word,
 * then each argument as its row in the command table says (table names,
 * table options, INFO sections, setting names).  Independent of the line
 * editor: shell.c turns the candidates into an edit.
 */
#ifndef EMDB_CLI_COMPLETE_H
#define EMDB_CLI_COMPLETE_H

#include <stddef.h>

#include "tools/cli/session.h"

typedef struct cli_matches {
	char **v;          /* n whole words that may replace the current one */
	size_t n;
	size_t cap;
	size_t word_start; /* where the current word begins in the line */
} cli_matches;

/* The candidates for the word that ends `line` (the text before the
 * cursor), in the order of their source, without duplicates.  May ask the
 * server for table or setting names over the session's connection
 * (cached; never connects).  Free *m with complete_free. */
void complete_line(cli_session *s, const char *line, cli_matches *m);
void complete_free(cli_matches *m);

#endif
