/*
 * util.h: time and randomness, the two things every safety rule leans on.
 *
 * Every duration in redlockd is measured on CLOCK_MONOTONIC (never the
 * wall clock, which may be stepped); owner tokens come from getrandom(2).
 */
#ifndef REDLOCKD_UTIL_H
#define REDLOCKD_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UTIL_TOKEN_BYTES 16                      /* 128 random bits */
#define UTIL_TOKEN_HEX   (2 * UTIL_TOKEN_BYTES)  /* hex characters, no NUL */

/* Microseconds on CLOCK_MONOTONIC since an arbitrary point (boot). */
int64_t util_now_us(void);

/*
 * Fill out with a fresh owner token: 128 bits from getrandom(2) written
 * as UTIL_TOKEN_HEX lowercase hex characters plus a NUL (out must hold
 * UTIL_TOKEN_HEX + 1 bytes).  One getrandom(2) call fills a pool of 64
 * tokens' bytes; no byte serves twice.  The daemon does not fork, so no
 * two processes share the pool.  Returns 0, or -1 when the kernel's random
 * source failed (errno set); the daemon then refuses the grant.
 */
int util_token(char *out);

/*
 * Fill buf with len bytes from getrandom(2), retried on EINTR and short
 * reads (blocks only before the kernel's pool is first initialised).
 * Returns 0, or -1 with errno set.
 */
int util_getrandom(void *buf, size_t len);

/*
 * A uniformly distributed integer in 0..max inclusive (max >= 0), for
 * retry jitter.  Not for secrets: seeded once from getrandom(2).
 */
int64_t util_random(int64_t max);

/*
 * Compare a (alen bytes) with the secret b (blen bytes) in time that
 * depends on blen only, not on where they differ: for owner tokens and
 * the AUTH password, so that response times do not reveal a prefix.
 * Returns true when they are equal.
 */
bool util_equal_secret(const char *a, size_t alen, const char *b, size_t blen);

/*
 * Whether s (len bytes) is one printable word: at least one byte, every
 * one 0x21-0x7E (no space, no control byte).  For labels read back from
 * the masters.
 */
bool util_printable_word(const char *s, size_t len);

/*
 * Write the local wall-clock time ms milliseconds from now, rounded up
 * to the second, as "HH:MM:SS" into buf (size bytes, at least 9), or
 * "?" when it cannot be told.  For messages to people only ("until
 * 21:03:04"); never for a duration.  Returns buf.
 */
char *util_clock_after(int64_t ms, char *buf, size_t size);

/*
 * A token bucket kept as one time, the generic cell rate algorithm's
 * "theoretical arrival time" (tat, CLOCK_MONOTONIC us; 0 for a full
 * bucket): each use moves it interval_us later, from now when it lies
 * in the past, and the bucket is empty while tat is more than burst - 1
 * intervals ahead of now (burst uses at once, then one per interval_us).
 *
 * util_gcra_wait() returns the us until a use conforms, 0 when one does
 * now; util_gcra_take() counts one use (whether or not it conformed).
 */
int64_t util_gcra_wait(int64_t tat_us, int64_t now_us, int64_t interval_us, int64_t burst);
void util_gcra_take(int64_t *tat_us, int64_t now_us, int64_t interval_us);

#endif /* REDLOCKD_UTIL_H */
