/*
 * test_cli_progress.c - the progress line of emdb-cli (tools/cli/progress.c),
 * as a pure function: what it shows for figures a job reports, at the
 * start, with totals unknown, at the end, and on narrow terminals.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tools/cli/progress.h"

#define SEC 1000000000ull

static const char *line(const cli_progress *p, int width)
{
	static char buf[512];
	size_t n = progress_line(buf, sizeof(buf), p, width);
	cr_assert_eq(n, strlen(buf));
	return buf;
}

static void has(const char *text, const char *needle)
{
	cr_assert_not_null(strstr(text, needle), "expected \"%s\" in \"%s\"", needle, text);
}

Test(progress, halfway_by_bytes)
{
	/* 50 MB of 100 MB in 5 s: 10 MB/s, 5 s left. */
	cli_progress p = { "write", 500, 1000, 50000000, 100000000, 5 * SEC };
	const char *s = line(&p, 100);
	has(s, "write");
	has(s, "500/1000 rows");
	has(s, " 50%");
	has(s, "10.0 MB/s");
	has(s, "0:05 left");
	const char *open = strchr(s, '['), *close = strchr(s, ']');
	cr_assert(open && close && close > open, "no bar in \"%s\"", s);
	size_t cells = (size_t)(close - open - 1), full = 0;
	for (const char *c = open + 1; c < close; c++)
		full += *c == '#';
	cr_assert_geq(cells, 10);
	cr_assert_leq(cells, 40);
	cr_assert_eq(full, cells / 2, "half the bar filled: \"%s\"", s);
	cr_assert_lt(strlen(s), 100);
}

Test(progress, time_left_uses_bytes_not_rows)
{
	/* Rows say 90% but bytes 25%: 3 s for 25% -> 9 s left. */
	cli_progress p = { "write", 900, 1000, 25, 100, 3 * SEC };
	const char *s = line(&p, 120);
	has(s, " 25%");
	has(s, "0:09 left");
}

Test(progress, rows_when_bytes_unknown)
{
	cli_progress p = { "read", 250, 1000, 0, 0, 10 * SEC };
	const char *s = line(&p, 120);
	has(s, "250/1000 rows");
	has(s, " 25%");
	has(s, "0:30 left");
	has(s, "0.0 MB/s");
}

Test(progress, all_zero_at_the_start)
{
	cli_progress p = { "switch", 0, 0, 0, 0, 0 };
	const char *s = line(&p, 80);
	has(s, "switch");
	has(s, "0 rows");
	has(s, "-- MB/s");
	has(s, "--:-- left");
	cr_assert_null(strchr(s, '['), "no bar without a total: \"%s\"", s);
	cr_assert_null(strchr(s, '%'), "no percentage without a total: \"%s\"", s);
	cr_assert_null(strstr(s, "nan"));
	cr_assert_null(strstr(s, "inf"));
}

Test(progress, total_known_nothing_done)
{
	cli_progress p = { "write", 0, 1000, 0, 4096, 2 * SEC };
	const char *s = line(&p, 100);
	has(s, "0/1000 rows");
	has(s, "  0%");
	has(s, "--:-- left");
	has(s, "0.0 MB/s");
}

Test(progress, unknown_total_counts_up)
{
	cli_progress p = { "scan", 123456, 0, 0, 0, 1 * SEC };
	const char *s = line(&p, 80);
	has(s, "scan");
	has(s, "123456 rows");
	has(s, "--:-- left");
	cr_assert_null(strstr(s, "123456/"), "no total: \"%s\"", s);
}

Test(progress, done_is_full)
{
	cli_progress p = { "sync", 1000, 1000, 8000000, 8000000, 2 * SEC };
	const char *s = line(&p, 100);
	has(s, "100%");
	has(s, "0:00 left");
	has(s, "4.0 MB/s");
	cr_assert_null(strstr(s, "[ "), "bar fully drawn: \"%s\"", s);
	cr_assert_not_null(strstr(s, "#]"), "bar fully drawn: \"%s\"", s);
}

Test(progress, overshoot_reads_as_total)
{
	cli_progress p = { "write", 1200, 1000, 150, 100, 1 * SEC };
	const char *s = line(&p, 100);
	has(s, "1000/1000 rows");
	has(s, "100%");
	has(s, "0:00 left");
}

Test(progress, long_times_left)
{
	/* 1% in 100 s: 9900 s = 2:45:00 left; 1 byte of 10^12 in a second: >99h. */
	cli_progress p = { "write", 1, 100, 1, 100, 100 * SEC };
	has(line(&p, 100), "2:45:00 left");
	cli_progress q = { "write", 1, 100, 1, 1000000000000ull, 1 * SEC };
	has(line(&q, 100), ">99h left");
}

Test(progress, never_reaches_the_last_column)
{
	cli_progress p = { "write", 123456789, 987654321, 12345678901ull, 98765432109ull, 77 * SEC };
	for (int w = 20; w <= 200; w++) {
		const char *s = line(&p, w);
		cr_assert_lt((int)strlen(s), w, "width %d: \"%s\" (%zu)", w, s, strlen(s));
		cr_assert_eq(strncmp(s, "write", 5), 0, "width %d: \"%s\"", w, s);
	}
}

Test(progress, narrow_drops_the_bar_then_the_tail)
{
	cli_progress p = { "write", 500, 1000, 50, 100, 5 * SEC };
	const char *s = line(&p, 200);
	cr_assert_not_null(strchr(s, '['));
	has(s, "left");
	/* "write  500/1000 rows  50%  0.0 MB/s  0:05 left" is 46 columns. */
	s = line(&p, 50);
	cr_assert_null(strchr(s, '['), "no room for a bar: \"%s\"", s);
	has(s, "0:05 left");
	s = line(&p, 30);
	cr_assert_null(strstr(s, "left"), "\"%s\"", s);
	has(s, "500/1000 rows");
}

Test(progress, odd_widths_and_buffers)
{
	cli_progress p = { NULL, 5, 10, 0, 0, SEC };
	char small[8];
	cr_assert_eq(progress_line(small, sizeof(small), &p, 80), 7);
	cr_assert_eq(strlen(small), 7);
	cr_assert_eq(progress_line(small, 0, &p, 80), 0);
	/* A width the terminal could not report reads as 80. */
	char buf[256];
	size_t n = progress_line(buf, sizeof(buf), &p, 0);
	cr_assert_gt(n, 0);
	cr_assert_lt(n, 80);
}

Test(progress, hms)
{
	char b[16];
	progress_hms(b, sizeof(b), 0);
	cr_assert_str_eq(b, "0:00");
	progress_hms(b, sizeof(b), 59);
	cr_assert_str_eq(b, "0:59");
	progress_hms(b, sizeof(b), 754);
	cr_assert_str_eq(b, "12:34");
	progress_hms(b, sizeof(b), 3723);
	cr_assert_str_eq(b, "1:02:03");
	progress_hms(b, sizeof(b), 100 * 3600);
	cr_assert_str_eq(b, ">99h");
}
