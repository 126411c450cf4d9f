/*
 * log.c: leveled log lines on stderr.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon/log.h"

#define LOG_LINE_MAX 4096

static enum log_level log_level = LOG_INFO;

static const char *const log_level_names[] = {
    "error", "warn", "info", "debug"
};

void
log_set_level(enum log_level level)
{
    log_level = level;
}

bool
log_enabled(enum log_level level)
{
    return level <= log_level;
}

void
log_write(enum log_level level, const char *fmt, ...)
{
    char line[LOG_LINE_MAX];
    va_list ap;
    int n, m;

    if (!log_enabled(level)) {
        return;
    }
    n = snprintf(line, sizeof(line), "%s ", log_level_names[level]);
    va_start(ap, fmt);
    m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0) {
        m = 0;
    }
    n += m;
    if ((size_t)n > sizeof(line) - 2) {
        n = (int)sizeof(line) - 2;
    }
    line[n++] = '\n';
    /* One write: concurrent lines from other processes do not interleave. */
    (void)!write(STDERR_FILENO, line, (size_t)n);
}

bool
log_every_due(struct log_every *le, int64_t now_us, uint64_t *held)
{
    if (le->last_us != 0 && now_us - le->last_us < LOG_EVERY_US) {
        le->held++;
        return false;
    }
    *held = le->held;
    le->held = 0;
    le->last_us = now_us;
    return true;
}
