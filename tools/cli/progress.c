/*
 * progress.c - the progress line of checkpoint and restore, and its
 * drawing on a terminal (progress.h).
 *
 * A line is built from pieces, left to right:
 *
 *   HEAD     "write  420000/1000000 rows"   always
 *   BAR      " [#########           ]"      10..40 cells, when there is room
 *   PERCENT  "  42%"                        when a total is known
 *   RATE     "  45.2 MB/s"
 *   LEFT     "  0:12 left"
 *
 * Invariants:
 *   1. progress_line reads nothing but its arguments: the same figures
 *      and width always give the same text (the unit tests rely on it).
 *   2. The line never reaches the terminal's last column (a terminal that
 *      wraps there would break the redraw in place): the bar gets only
 *      the room the text leaves, then LEFT, RATE and PERCENT go in that
 *      order, then HEAD is cut.
 *   3. Nothing divides by zero and no figure is made up: a total of 0 is
 *      "unknown" (no bar, no percentage, no time left), a done count above
 *      its total reads as the total, and a rate needs elapsed time.
 *   4. Text is assembled in local buffers and copied into the caller's
 *      only at the end (gcc's -fsanitize=undefined makes -Wformat-truncation
 *      suspect a caller's buffer, as in out.c).
 *
 * State changes: a cli_bar's `shown`, by bar_draw and bar_clear.
 */
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "tools/cli/progress.h"

#define BAR_MIN 10
#define BAR_MAX 40
#define PIECE 96

void progress_hms(char *buf, size_t cap, uint64_t s)
{
	char tmp[32];
	if (s >= 100 * 3600)
		snprintf(tmp, sizeof(tmp), ">99h");
	else if (s >= 3600)
		snprintf(tmp, sizeof(tmp), "%u:%02u:%02u", (unsigned)(s / 3600),
			 (unsigned)(s / 60 % 60), (unsigned)(s % 60));
	else
		snprintf(tmp, sizeof(tmp), "%u:%02u", (unsigned)(s / 60), (unsigned)(s % 60));
	if (cap > 0) {
		size_t n = strnlen(tmp, cap - 1);
		memcpy(buf, tmp, n);
		buf[n] = 0;
	}
}

static uint64_t clamp(uint64_t done, uint64_t total)
{
	return total && done > total ? total : done;
}

/* The fraction done, from the bytes or else the rows; < 0 unknown. */
static double fraction(const cli_progress *p)
{
	if (p->bytes_total)
		return (double)clamp(p->bytes_done, p->bytes_total) / (double)p->bytes_total;
	if (p->rows_total)
		return (double)clamp(p->rows_done, p->rows_total) / (double)p->rows_total;
	return -1;
}

/* Seconds left at the rate so far; < 0 unknown (invariant 3). */
static double seconds_left(const cli_progress *p)
{
	uint64_t done, total;
	if (p->bytes_total) {
		done = clamp(p->bytes_done, p->bytes_total);
		total = p->bytes_total;
	} else if (p->rows_total) {
		done = clamp(p->rows_done, p->rows_total);
		total = p->rows_total;
	} else {
		return -1;
	}
	if (done == total)
		return 0;
	if (done == 0 || p->elapsed_ns == 0)
		return -1;
	return (double)(total - done) * ((double)p->elapsed_ns / 1e9) / (double)done;
}

static void piece_rate(char *buf, const cli_progress *p)
{
	if (p->elapsed_ns == 0) {
		snprintf(buf, PIECE, "  -- MB/s");
		return;
	}
	double mbs = (double)p->bytes_done / 1e6 / ((double)p->elapsed_ns / 1e9);
	snprintf(buf, PIECE, "  %.1f MB/s", mbs);
}

static void piece_left(char *buf, const cli_progress *p)
{
	double s = seconds_left(p);
	char hms[32] = "--:--";
	if (s >= 0) {
		uint64_t whole = s > 1e9 ? (uint64_t)1e9 : (uint64_t)s;
		progress_hms(hms, sizeof(hms), whole + (s > (double)whole)); /* round up */
	}
	snprintf(buf, PIECE, "  %s left", hms);
}

static void piece_head(char *buf, const cli_progress *p)
{
	const char *phase = p->phase ? p->phase : "";
	unsigned long long done = clamp(p->rows_done, p->rows_total);
	if (p->rows_total)
		snprintf(buf, PIECE, "%-6s %llu/%llu rows", phase, done,
			 (unsigned long long)p->rows_total);
	else
		snprintf(buf, PIECE, "%-6s %llu rows", phase, done);
}

size_t progress_line(char *buf, size_t cap, const cli_progress *p, int width)
{
	char head[PIECE], bar[BAR_MAX + 8] = "", pct[PIECE] = "", rate[PIECE], left[PIECE];
	char line[4 * PIECE + sizeof(bar)];
	if (width < 20)
		width = 80;
	size_t room = (size_t)width - 1; /* invariant 2 */
	double frac = fraction(p);

	piece_head(head, p);
	piece_rate(rate, p);
	piece_left(left, p);
	if (frac >= 0)
		snprintf(pct, sizeof(pct), " %3u%%", (unsigned)(frac * 100));

	size_t text = strlen(head) + strlen(pct) + strlen(rate) + strlen(left);
	if (frac >= 0 && text + 3 + BAR_MIN <= room) {
		size_t cells = room - text - 3;
		cells = cells > BAR_MAX ? BAR_MAX : cells;
		size_t full = (size_t)(frac * (double)cells);
		bar[0] = ' ';
		bar[1] = '[';
		memset(bar + 2, '#', full);
		memset(bar + 2 + full, ' ', cells - full);
		bar[2 + cells] = ']';
		bar[3 + cells] = 0;
	}
	/* Drop pieces from the right while too wide (invariant 2). */
	char *drop[] = { left, rate, pct };
	for (size_t i = 0; i < 3 && text > room; i++) {
		text -= strlen(drop[i]);
		drop[i][0] = 0;
	}
	snprintf(line, sizeof(line), "%s%s%s%s%s", head, bar, pct, rate, left);
	size_t n = strlen(line);
	n = n > room ? room : n;
	if (cap == 0)
		return 0;
	n = n < cap - 1 ? n : cap - 1;
	memcpy(buf, line, n);
	buf[n] = 0;
	return n;
}

/* ---- drawing ---------------------------------------------------------- */

void bar_init(cli_bar *b, FILE *f)
{
	b->f = f;
	b->tty = isatty(fileno(f)) == 1;
	b->shown = false;
}

static int term_width(FILE *f)
{
	struct winsize ws;
	if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 80;
}

void bar_draw(cli_bar *b, const cli_progress *p)
{
	char line[512];
	if (!b->tty)
		return;
	int width = term_width(b->f);
	progress_line(line, sizeof(line), p, width > 500 ? 500 : width);
	fprintf(b->f, "\r%s\033[K", line);
	fflush(b->f);
	b->shown = true;
}

void bar_clear(cli_bar *b)
{
	if (!b->tty || !b->shown)
		return;
	fputs("\r\033[K", b->f);
	fflush(b->f);
	b->shown = false;
}
