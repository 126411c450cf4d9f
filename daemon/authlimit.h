/*
 * authlimit.h: wrong AUTH passwords counted per source, so that
 * guessing from one place slows to a trickle and fills no log.
 *
 * A source is a TCP peer's IPv4 address, or the /64 of its IPv6 address
 * (an IPv4-mapped one counting as the IPv4 address), or "unix uid=<n>"
 * for the Unix socket.  Each has a token bucket: AUTHLIMIT_BURST wrong
 * passwords at once, then one more every AUTHLIMIT_REFILL_MS.  While a
 * source has no token left, its AUTHs are refused without being compared
 * with any password, the right one included, so that no guess is
 * learned from; a right password never takes a token.
 *
 * Sources live in a table of AUTHLIMIT_SOURCES entries; when it is full
 * the entry seen longest ago is taken over, so an attacker with more
 * addresses than that gets more tries: a per-address limit slows one
 * machine, not a botnet (the password's length must).
 *
 * The log: each wrong password is logged while its source has tokens
 * (at most AUTHLIMIT_BURST lines, then one a refill); refusals are
 * summed per source and logged at most once per LOG_EVERY_US (log.h), so
 * that a guesser cannot crowd other lines (BREAK's audit lines) out of
 * a rate-limited journal.
 */
#ifndef REDLOCKD_AUTHLIMIT_H
#define REDLOCKD_AUTHLIMIT_H

#include <stddef.h>
#include <stdint.h>

#define AUTHLIMIT_BURST      10      /* wrong passwords a source may send at once */
#define AUTHLIMIT_REFILL_MS  1000    /* one more token after this long, ms */
#define AUTHLIMIT_SOURCES    1024    /* sources remembered */
#define AUTHLIMIT_SOURCE_MAX 64      /* a source's text, NUL included */

/*
 * Write into out (size bytes) the source of a session whose peer is
 * described as listener.c writes it: "1.2.3.4:5678" gives "1.2.3.4",
 * "[2001:db8::1:2:3:4]:5678" gives "[2001:db8::]/64", "[::ffff:1.2.3.4]:5"
 * gives "1.2.3.4", "unix uid=7 pid=9" gives "unix uid=7".
 */
void authlimit_source(const char *peer, char *out, size_t size);

/*
 * May an AUTH from source be compared now?  Returns 0 when it may, or
 * the ms until the source has a token again; a refusal is counted for
 * the source's summary line (logged here when due, with id and peer,
 * the session's number and address, naming the one refused now).
 * now_us is CLOCK_MONOTONIC (util_now_us).
 */
int64_t authlimit_check(const char *source, int64_t now_us, unsigned long long id,
                        const char *peer);

/* A wrong password from source: takes one of its tokens. */
void authlimit_failed(const char *source, int64_t now_us);

#endif /* REDLOCKD_AUTHLIMIT_H */
