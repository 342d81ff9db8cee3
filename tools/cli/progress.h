/*
 * progress.h - the progress bar of emdb-cli's long commands (checkpoint,
 * restore): one line on a terminal, redrawn in place while a job runs.
 *
 * progress_line is a pure function of its arguments (tests call it
 * directly); the cli_bar functions draw its result on a stream, and only
 * when that stream is a terminal.
 */
#ifndef EMDB_CLI_PROGRESS_H
#define EMDB_CLI_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What one line shows.  A total of 0 means not known yet. */
typedef struct cli_progress {
	const char *phase;     /* "write", "read", ...; NULL shows nothing */
	uint64_t rows_done, rows_total;
	uint64_t bytes_done, bytes_total;
	uint64_t elapsed_ns;   /* since the job started */
} cli_progress;

/* Format one line of at most width-1 columns (so that a terminal does
 * not wrap it; width < 20 is taken as 80) into buf[cap]:
 *
 *   write  420000/1000000 rows [#########           ]  42%  45.2 MB/s  0:12 left
 *
 * The fraction is bytes_done/bytes_total, or the rows' when the bytes'
 * total is unknown; with neither total there is no bar and no
 * percentage.  The rate is bytes (MB = 10^6 bytes) per elapsed second;
 * time left is the remaining bytes at that rate, or the remaining rows at
 * the rows' rate when the bytes' total is unknown; "--:--" when it
 * cannot be told (no total, nothing done yet, no time elapsed).  The bar
 * (10..40 cells) is drawn only in the room the text leaves; when even the
 * text is too wide, time left, rate and percentage go in that order, and
 * the rest is cut at the width.  buf is always NUL-terminated when
 * cap > 0.  Returns strlen(buf). */
size_t progress_line(char *buf, size_t cap, const cli_progress *p, int width);

/* "0:07", "12:34", "1:02:03" (hours past 99 read ">99h"). */
void progress_hms(char *buf, size_t cap, uint64_t seconds);

/* A bar drawn on a stream, in place ("\r", the line, erase to the end).
 * When the stream is not a terminal nothing is ever drawn. */
typedef struct cli_bar {
	FILE *f;
	bool tty;   /* f is a terminal: draw */
	bool shown; /* a line is on the screen: clear it before other output */
} cli_bar;

/* Start a bar on f (stderr), finding out whether it is a terminal. */
void bar_init(cli_bar *b, FILE *f);

/* Redraw the bar with p, as wide as the terminal is now. */
void bar_draw(cli_bar *b, const cli_progress *p);

/* Erase the bar's line, leaving the cursor at its start. */
void bar_clear(cli_bar *b);

#endif
