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
#include <stdint.h>

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

/*
 * A kind of line written at most once per LOG_EVERY_US, so that a flood
 * of one event (refused connections, wrong passwords) cannot crowd other
 * lines out of a rate-limited journal: the line says how many events it
 * stands for.  Zeroed: no line written yet.  Owned by the caller.
 */
#define LOG_EVERY_US 10000000   /* 10 s */

struct log_every {
    int64_t  last_us;   /* CLOCK_MONOTONIC us of the last line, 0: none yet */
    uint64_t held;      /* events since then that wrote no line */
};

/*
 * An event of le's kind at now_us (CLOCK_MONOTONIC, util_now_us()).
 * Returns true when its line is due, with *held set to the events held
 * back since the last line (then reset); false when a line was written
 * less than LOG_EVERY_US ago (this event is counted as held back).
 */
bool log_every_due(struct log_every *le, int64_t now_us, uint64_t *held);

#define log_error(...) log_write(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_write(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_write(LOG_INFO, __VA_ARGS__)
#define log_debug(...) do { if (log_enabled(LOG_DEBUG)) { log_write(LOG_DEBUG, __VA_ARGS__); } } while (0)

#endif /* REDLOCKD_LOG_H */
