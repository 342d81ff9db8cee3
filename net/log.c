/*
 * log.c - timestamped, levelled log lines to stderr or a file.
 *
 * Invariants:
 *   1. A line is formatted into a stack buffer and written with a single
 *      write(2) on an O_APPEND descriptor, so concurrent lines never
 *      interleave and no lock is taken on the hot path.
 *   2. log_fd is STDERR_FILENO or a descriptor this module opened; it is
 *      swapped atomically and the old file closed only by log_open and
 *      log_close, which the server calls from its main thread.
 *
 * State changes: level (log_set_level), log_fd (log_open, log_close).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "net/log.h"

#define LINE_MAX_BYTES 2048

static _Atomic int min_level = LOG_INFO;
static _Atomic int log_fd = STDERR_FILENO;

static const char *const level_names[] = { "debug", "info", "warn", "error" };

void log_set_level(log_level level)
{
	atomic_store(&min_level, (int)level);
}

log_level log_get_level(void)
{
	return (log_level)atomic_load(&min_level);
}

const char *log_level_name(log_level level)
{
	if ((int)level < 0 || (int)level > LOG_ERROR)
		return "?";
	return level_names[level];
}

int log_level_parse(const char *name)
{
	for (int i = 0; i <= LOG_ERROR; i++)
		if (strcasecmp(name, level_names[i]) == 0)
			return i;
	if (strcasecmp(name, "warning") == 0)
		return LOG_WARN;
	return -1;
}

int log_open(const char *path)
{
	int fd = STDERR_FILENO;

	if (path && path[0]) {
		fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return -errno;
	}
	int old = atomic_exchange(&log_fd, fd);
	if (old != STDERR_FILENO)
		close(old);
	return 0;
}

void log_close(void)
{
	log_open(NULL);
}

void log_msg(log_level level, const char *fmt, ...)
{
	if ((int)level < atomic_load_explicit(&min_level, memory_order_relaxed))
		return;

	char line[LINE_MAX_BYTES];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ [%s] ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec, ts.tv_nsec / 1000000, log_level_name(level));
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	size_t len = (size_t)n + (size_t)m;
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';

	int fd = atomic_load_explicit(&log_fd, memory_order_acquire);
	const char *p = line;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		p += w;
		len -= (size_t)w;
	}
}
