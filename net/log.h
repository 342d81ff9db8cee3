/*
 * net/log.h - the server's log: one line per event, with a UTC timestamp and
 * a level, to stderr or to a file.
 *
 *   2026-11-21T23:59:59.123Z [info] listening on 127.0.0.1:7878
 *
 * Thread safety: every function may be called from any thread.  A line is
 * written with one write(2), so lines from different threads never mix.
 */
#ifndef EMDB_NET_LOG_H
#define EMDB_NET_LOG_H

typedef enum log_level {
	LOG_DEBUG = 0,
	LOG_INFO = 1,
	LOG_WARN = 2,
	LOG_ERROR = 3,
} log_level;

/* Lines below `level` are dropped.  Default LOG_INFO. */
void log_set_level(log_level level);
log_level log_get_level(void);

/* "debug", "info", "warn", "error" <-> level.  log_level_parse returns -1
 * for an unknown name. */
const char *log_level_name(log_level level);
int log_level_parse(const char *name);

/* Send lines to `path` (opened for appending, created 0644), or to stderr
 * when path is NULL or "".  Returns 0, or -errno when the file cannot be
 * opened (the previous destination stays). */
int log_open(const char *path);
/* Close the log file, if any; later lines go to stderr. */
void log_close(void);

void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
