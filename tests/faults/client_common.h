/*
 * client_common.h: what the fault suite's client programs share
 * (rmw_client.c, the clients of the lock; break_client.c, the operator
 * that BREAKs): their start-up (the event log, the random numbers, a
 * SIGTERM that stops them), the log itself, pauses that SIGTERM cuts
 * short, and the parsing of their command lines.
 *
 * The log is the one the checker (checker.c) reads: one line per
 * write(2) with O_APPEND, so that a SIGKILL loses at most the line being
 * written; times are CLOCK_MONOTONIC microseconds, one clock for the
 * whole machine, so that the lines of every process compare.
 *
 * State is the process's own (a program is one client): the log, the
 * random state and cc_stop.
 */
#ifndef REDLOCKD_TESTS_FAULTS_CLIENT_COMMON_H
#define REDLOCKD_TESTS_FAULTS_CLIENT_COMMON_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CC_ADDR_MAX     64      /* a daemon's address, "ADDR:PORT", NUL included */
#define CC_LINE_MAX     2048    /* longest line logged (a reply is at most this long,
                                   PROTOCOL.md 4) */
#define CC_EXIT_USAGE   2       /* exit status: bad usage */
#define CC_EXIT_LOG     4       /* exit status: the log could not be written */

/* Set by SIGTERM (cc_start installs the handler): the program stops. */
extern volatile sig_atomic_t cc_stop;

/*
 * Start a client program named prog (for messages): open its log at
 * log_path (created 0644, O_APPEND), seed the random numbers from the
 * clock and the pid, set cc_stop on SIGTERM without SA_RESTART (so that
 * the signal cuts a blocked read or a pause short), ignore SIGPIPE.
 * Returns 0, or CC_EXIT_LOG when the log cannot be opened (the reason
 * printed to stderr).
 */
int cc_start(const char *prog, const char *log_path);

/* Microseconds on CLOCK_MONOTONIC. */
int64_t cc_now_us(void);

/* A number in lo..hi, inclusive (xorshift64; lo when hi <= lo). */
long cc_random(long lo, long hi);

/*
 * Sleep ms milliseconds (nothing when ms <= 0).  With stop_aborts, a
 * SIGTERM ends it early and it returns false (also when cc_stop was
 * already set); otherwise it sleeps the whole time and returns true.
 */
bool cc_sleep_ms(long ms, bool stop_aborts);

/*
 * Append one line, printf-formatted, with a newline added (cut to
 * CC_LINE_MAX + 254 bytes), to the log with a single write.  A client
 * that cannot log is useless to the checker: a failed write ends the
 * process with CC_EXIT_LOG.
 */
__attribute__((format(printf, 1, 2)))
void cc_log(const char *fmt, ...);

/* Copy a daemon line into a log field (size bytes, NUL included): spaces stay, other
   bytes outside printable ASCII become '?'. */
void cc_printable(const char *in, char *out, size_t size);

/* A non-negative decimal number; usage() (which must not return) on anything else. */
long cc_number(const char *s, void (*usage)(void));

/*
 * A -p list: daemons, each "PORT" (on 127.0.0.1) or "ADDR:PORT",
 * separated by commas (list is cut up by strtok_r), after the n already
 * in addrs ("ADDR:PORT") and ports, at most max in all.  Returns the new
 * count; usage() (which must not return) for an entry that is not a
 * daemon, or one too many.
 */
size_t cc_daemon_list(char *list, char (*addrs)[CC_ADDR_MAX], int *ports, size_t n, size_t max,
                      void (*usage)(void));

#endif /* REDLOCKD_TESTS_FAULTS_CLIENT_COMMON_H */
