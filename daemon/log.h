/*
 * log.h: leveled log lines on stderr.
 *
 * One line per event: "<level> <message>".  The timestamp is left to
 * journald (redlockd runs under systemd); lines are written with a single
 * write(2) so they do not interleave.  Untrusted bytes must be escaped by
 * the caller (proto_escape) before they reach a format string argument.
 */
#ifndef REDLOCKD_LOG_H
#define REDLOCKD_LOG_H

#include <stdbool.h>

/* Levels, most severe first (the order of enum conf_log_level). */
enum log_level {
    LOG_ERROR,
    LOG_WARN,
    LOG_INFO,
    LOG_DEBUG
};

/* Set the most verbose level that is written.  The default is LOG_INFO. */
void log_set_level(enum log_level level);

/* True when a line at this level would be written (to skip costly formatting). */
bool log_enabled(enum log_level level);

/* Write one line at a level; printf-style format, no trailing newline needed. */
void log_write(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_error(...) log_write(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_write(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_write(LOG_INFO, __VA_ARGS__)
#define log_debug(...) do { if (log_enabled(LOG_DEBUG)) { log_write(LOG_DEBUG, __VA_ARGS__); } } while (0)

#endif /* REDLOCKD_LOG_H */
