/*
 * authlimit.h: how many AUTH passwords may be checked, and the line in
 * which an AUTH waits until it may be.
 *
 * A wrong password takes a token from each bucket on its path; an AUTH
 * is compared with the passwords only while every bucket on its path has
 * a token, and waits (held, unanswered) until then, in arrival order.
 * The right password takes no token.  So a guesser learns nothing more
 * by sending faster or from more connections, and a client with the
 * right password behind the same address is not refused: it waits its
 * turn, which comes at the latest when the guesses ahead of it in line
 * are checked.
 *
 * The path of an AUTH:
 * - its address group (authlimit_group): an IPv4 /24 (all of 127/8 as
 *   one), an IPv6 /64, or "unix uid=<n>": AUTHLIMIT_BURST tokens, one
 *   more every AUTHLIMIT_REFILL_MS;
 * - for IPv6, its /48 too, with the same bucket;
 * - the daemon's bucket: AUTHLIMIT_DAEMON_BURST tokens, one more every
 *   AUTHLIMIT_DAEMON_REFILL_US: guesses spread over any number of groups
 *   are bounded as well.
 * Except: an exact address (an IPv4 address, an IPv6 /64, a Unix uid)
 * that gave the right password within AUTHLIMIT_KNOWN_MS is "known": its
 * AUTHs take its own bucket (the same size) in place of its group's and
 * its /48's, so clients that have been let in from an address before are
 * not held behind strangers guessing from elsewhere in their group.  The
 * daemon's bucket stays on every path.
 *
 * Buckets live in a table of AUTHLIMIT_ENTRIES entries, open addressing
 * over a keyed hash (daemon/keyhash.h) probing AUTHLIMIT_PROBE slots.  An
 * entry is given up only when its bucket is full again (it then holds
 * nothing a new one would not) and it is not a known address; a group
 * that finds no slot shares the overflow bucket, the same size as one
 * group's.  So no address ever gets a fresh bucket by pushing its own out.
 *
 * The log, daemon-wide: a wrong password is logged while the daemon's log
 * bucket has a line left (AUTHLIMIT_LOG_BURST, then one a second), the
 * rest summed; AUTHs that waited are summed in one line per LOG_EVERY_US
 * (log.h).  So a guesser cannot crowd other lines (BREAK's audit lines)
 * out of a rate-limited journal.
 */
#ifndef REDLOCKD_AUTHLIMIT_H
#define REDLOCKD_AUTHLIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

struct event_base;

#define AUTHLIMIT_BURST            10       /* wrong passwords a group may send at once */
#define AUTHLIMIT_REFILL_MS        1000     /* one more token after this long, ms */
#define AUTHLIMIT_DAEMON_BURST     100      /* wrong passwords from everywhere at once */
#define AUTHLIMIT_DAEMON_REFILL_US 10000    /* one more every this long (100 a second), us */
#define AUTHLIMIT_KNOWN_MS         600000   /* an address that gave the right password stays
                                               known this long, ms */
#define AUTHLIMIT_ENTRIES          4096     /* buckets remembered */
#define AUTHLIMIT_PROBE            8        /* slots looked at for one */
#define AUTHLIMIT_LOG_BURST        10       /* wrong-password lines at once, then one a second */
#define AUTHLIMIT_SOURCE_MAX       64       /* a group's or address's text, NUL included */

/*
 * Write into out (size bytes) the address group of a peer described as
 * listener.c writes it: "1.2.3.4:5678" gives "1.2.3.0/24",
 * "127.9.9.9:1" gives "127.0.0.0/8", "[2001:db8::1:2:3:4]:5678" gives
 * "[2001:db8::]/64", "[::ffff:1.2.3.4]:5" gives "1.2.3.0/24", "unix
 * uid=7 pid=9" gives "unix uid=7".  Anything else is its own group.
 * Connections before AUTH are counted per group too (daemon/admit.h).
 */
void authlimit_group(const char *peer, char *out, size_t size);

/*
 * The admission group of a new connection from peer (daemon/admit.h),
 * into out: "known <address>" when its exact address (an IPv4 address,
 * an IPv6 /64, a Unix uid) gave the right password within
 * AUTHLIMIT_KNOWN_MS, and true; else its address group, and false.
 */
bool authlimit_admission(const char *peer, int64_t now_us, char *out, size_t size);

/* Called once the AUTH of w may be checked (never from inside authlimit_begin). */
struct authlimit_waiter;
typedef void (*authlimit_ready_fn)(struct authlimit_waiter *w);

/*
 * An AUTH in line.  Owned by the caller (a session's command state),
 * which must cancel it before freeing it.  Zeroed: not in line.
 */
struct authlimit_waiter {
    TAILQ_ENTRY(authlimit_waiter) link;     /* in the line */
    authlimit_ready_fn ready;               /* set by authlimit_begin */
    bool               queued;              /* in the line */
    const char        *peer;        /* the session's peer text, not owned: it outlives
                                       the waiter (cancelled before its session goes) */
};

/* The timer that serves the line runs on base (once, at start). */
void authlimit_init(struct event_base *base);

/*
 * An AUTH from peer arrived.  Returns true when it may be checked now;
 * else w is put in line (ready is called once its turn has come, later,
 * from the event loop, unless it is cancelled) and false is returned;
 * peer is kept by pointer meanwhile and must stay valid until then.
 * An AUTH with a token also waits, to keep arrival order, when an AUTH in
 * line may have its token by now (the line's turn is due).
 */
bool authlimit_begin(struct authlimit_waiter *w, const char *peer, authlimit_ready_fn ready);

/* Take w out of the line, if it is in it (idempotent; its session closed). */
void authlimit_cancel(struct authlimit_waiter *w);

/*
 * The us until an AUTH from peer may be checked (every bucket on its
 * path has a token), 0 when it may now.  Pure: nothing is counted.
 * now_us is CLOCK_MONOTONIC (util_now_us), as for the two below.
 */
int64_t authlimit_wait(const char *peer, int64_t now_us);

/*
 * The AUTH of peer, checked, had a wrong password: a token is taken from
 * each bucket on its path, and the line "client <id> (<peer>): wrong
 * AUTH password, closing" is logged within the log bucket.
 */
void authlimit_failed(const char *peer, unsigned long long id, int64_t now_us);

/*
 * The AUTH of peer had the right password: its exact address is known
 * from now for AUTHLIMIT_KNOWN_MS (unless the table has no room: it then
 * stays on its group's path).
 */
void authlimit_passed(const char *peer, int64_t now_us);

/* AUTHs in line now (STATS auth_waiting). */
size_t authlimit_waiting(void);

#endif /* REDLOCKD_AUTHLIMIT_H */
