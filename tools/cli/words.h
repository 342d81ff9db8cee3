/*
 * words.h - splitting a typed command line into words, as a shell does:
 * blanks separate words, 'single quotes' keep everything literally,
 * "double quotes" allow \" \\ \n \t, and outside quotes a backslash keeps
 * the next character.  So `config set log_file "/tmp/my log"` has four
 * words.
 */
#ifndef EMDB_CLI_WORDS_H
#define EMDB_CLI_WORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cli_words {
	char **v;      /* n words, then NULL; point into buf */
	int n;
	bool trailing; /* the line ends in a blank (or is empty): the next
			  word has not begun, which completion needs */
	char *buf;
} cli_words;

/* Split line into *w.  Returns 0, or -1 with *err set to a static
 * message (an unterminated quote; out of memory) and *w empty.  On
 * success free *w with words_free (emdb_free inside). */
int words_split(const char *line, cli_words *w, const char **err);
void words_free(cli_words *w);

/* Read a whole word as an unsigned 64-bit integer, decimal or 0x hex (no
 * sign, no trailing text, no overflow).  Returns false when it is not one. */
bool words_u64(const char *word, uint64_t *out);

/* A count of things (rows): a words_u64 number, or a decimal one with a
 * k (or K), M or G suffix for thousands, millions, billions, as
 * emdb-bench's --rows reads it: "40M" is 40000000.  No fractions, no
 * overflow.  Returns false when the word is not one. */
bool words_count(const char *word, uint64_t *out);

#endif
