/*
 * redlock.h: the Redlock algorithm over N independent masters.
 *
 * Source: the Redis distributed-locks page ("Distributed Locks with
 * Redis", redis.io/docs/manual/patterns/distributed-locks), section "The
 * Redlock Algorithm", and the project's safety notes, proto/SAFETY.md.
 *
 * Key layout, compatible with redsync, node-redlock and redlock-rb: the
 * key is a plain string set with SET key token NX PX ttl; the token is a
 * 128-bit random value in hex; release is compare-and-delete; extend is
 * compare-and-PEXPIRE and never re-creates a key.
 *
 * Each operation is one round (daemon/round.h).  Results are delivered
 * through a callback from the event loop, never from inside the call.
 */
#ifndef REDLOCKD_REDLOCK_H
#define REDLOCKD_REDLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REDLOCK_ERROR_MAX 1024      /* room for a NOQUORUM text */

/*
 * Names derived from a lock's key.  A space can never be part of a lock
 * name (PROTOCOL.md section 2), so neither can collide with any lock's
 * key, whatever lock.key_prefix is.
 */
#define REDLOCK_FENCE_SUFFIX   " fence"     /* key of the name's fence counter */
#define REDLOCK_CHANNEL_SUFFIX " released"  /* pub/sub channel announcing releases */

/* Longest lock key: lock.key_prefix (<= 256) + a name (<= 250).  The
 * operations refuse a longer key (-1). */
#define REDLOCK_KEY_MAX        512
/* Room for a key plus either suffix and a NUL. */
#define REDLOCK_DERIVED_MAX    (REDLOCK_KEY_MAX + 16)
#define REDLOCK_NO_EXPIRY (-1)      /* a busy key that has no ttl */

/* Outcome of an acquire or status round. */
enum redlock_outcome {
    REDLOCK_GRANTED,    /* acquire: a quorum granted with validity > 0 */
    REDLOCK_BUSY,       /* acquire: not granted, someone holds the key */
    REDLOCK_HELD,       /* status: a quorum does not see the key free */
    REDLOCK_FREE,       /* status: a quorum sees the key free */
    REDLOCK_RELEASED,   /* release: a quorum no longer holds our token */
    REDLOCK_NOTHELD,    /* extend: a quorum did not confirm within validity */
    REDLOCK_NOQUORUM    /* fewer than a quorum of masters answered */
};

/* The result of one acquire, release or status round. */
struct redlock_result {
    enum redlock_outcome outcome;       /* see above */
    int64_t start_us;                   /* monotonic, before the first send */
    int64_t validity_end_us;            /* GRANTED: start + ttl - drift, us */
    int64_t ttl_ms;                     /* BUSY/HELD: the holder's remaining
                                           time as seen by a quorum, ms, or
                                           REDLOCK_NO_EXPIRY */
    bool    owner_self;                 /* HELD: our token is on a quorum */
    size_t  confirmed;                  /* masters that granted (acquire),
                                           deleted our key (release), extended
                                           it (extend) or hold our token
                                           (status) */
    size_t  subscribers;                /* GRANTED: the most clients subscribed
                                           to the name's release channel on a
                                           granting master (other daemons'
                                           waiters, and ours) */
    int64_t fence;                      /* GRANTED with fence: the fencing
                                           token, written back to a majority;
                                           0 otherwise */
    size_t  answered;                   /* masters that answered */
    char    error[REDLOCK_ERROR_MAX];   /* when fewer than a quorum answered:
                                           who failed and how */
};

typedef void (*redlock_done_fn)(const struct redlock_result *res, void *arg);

/* One lease in a batched extend. */
struct redlock_extend_item {
    const char *key;            /* full Redis key */
    size_t      key_len;        /* bytes in key */
    const char *token;          /* owner token, UTIL_TOKEN_HEX bytes */
    int64_t     ttl_ms;         /* new lease, ms */
};

/* The result of a batched extend: per item, how many masters said what. */
struct redlock_extend_result {
    size_t         n;           /* items */
    const uint8_t *confirmed;   /* per item: masters that extended it */
    const uint8_t *denied;      /* per item: masters where it is not ours */
    size_t         answered;    /* masters that answered */
    int64_t        start_us;    /* monotonic, before the first send */
    int64_t        end_us;      /* monotonic, at the decision */
    const char    *error;       /* who failed and how ("" if none) */
};

typedef void (*redlock_extend_fn)(const struct redlock_extend_result *res, void *arg);

/*
 * Register the scripts with daemon/master.h and keep the algorithm's
 * parameters.  Call once before master_start().
 */
void redlock_init(double drift_factor);

/*
 * Release announcements (redlock_release with announce).  fn is called
 * for each message a master delivers on a watched key's channel: key is
 * the lock's key, token the released lease's token (as published; any
 * bytes, any length, when someone else published there).
 */
typedef void (*redlock_released_fn)(const char *key, size_t key_len,
                                    const char *token, size_t token_len);

void redlock_on_release(redlock_released_fn fn);

/*
 * Start (on) or stop (!on) hearing release announcements for key on
 * every master: a SUBSCRIBE to key + REDLOCK_CHANNEL_SUFFIX on each
 * master's subscriber link (daemon/master.h).  Returns 0, or -1 when out
 * of memory (then only the holder's ttl times the retries).
 */
int redlock_watch(const char *key, size_t key_len, bool on);

/* Change the drift factor (reload). */
void redlock_set_drift(double drift_factor);

/* The quorum for n masters: n/2 + 1. */
size_t redlock_quorum(size_t nmasters);

/* Clock drift allowance for a ttl: ttl * drift_factor + 2 ms, in us. */
int64_t redlock_drift_us(int64_t ttl_ms, double drift_factor);

/*
 * Validity left after a round that took elapsed_us: ttl - elapsed -
 * drift, in us (may be zero or negative: then the lock is not granted).
 */
int64_t redlock_validity_us(int64_t ttl_ms, int64_t elapsed_us, double drift_factor);

/*
 * The holder's remaining time as seen by a quorum: given the pttl of the
 * key on each of nheld masters that hold it (REDLOCK_NO_EXPIRY for none)
 * and nfree masters where the key is free (or ours), the time until
 * enough keys expire that a quorum is free.  pttls is sorted in place.
 * Returns 0 when a quorum is free already, REDLOCK_NO_EXPIRY when one of
 * the keys needed never expires.
 */
int64_t redlock_holder_ttl(int64_t *pttls, size_t nheld, size_t nfree, size_t quorum);

/*
 * Acquire key with token for ttl_ms.  Granted when a quorum set the key
 * (or already held our token) and validity > 0.  On any other outcome
 * the caller must release (redlock_release) on every master, since a
 * set may have landed after the deadline.
 *
 * old_token, when not NULL, makes it a hand-over: on each master a key
 * that still holds old_token is given token at once (compare-and-swap),
 * so the key is never free between the two holders.  Every master that
 * answered then no longer holds old_token; res->answered tells the
 * releaser whether a quorum did (res->error names the others).
 *
 * fence: each granting master also increments the name's counter (key
 * + REDLOCK_FENCE_SUFFIX); the largest value among the masters that
 * granted before the decision is then written back, set-if-greater, to
 * every master, and the grant is reported only once a majority confirmed
 * that (res->fence); otherwise the outcome is NOQUORUM and the caller
 * releases as for any failed grant.  Any two majorities intersect, so a
 * later grant (which needs the key free on a quorum, i.e. after this
 * lease was released or expired) increments at least one counter that
 * holds this value: fences strictly increase, as long as no master loses
 * acknowledged writes.  Source: Kleppmann, "How to do distributed
 * locking" (2016) for the need; the quorum argument is PROTOCOL.md's.
 *
 * Returns 0, or -1 when memory ran out (no callback).
 */
int redlock_acquire(const char *key, size_t key_len, const char *token, int64_t ttl_ms,
                    const char *old_token, bool fence, redlock_done_fn cb, void *arg);

/*
 * Compare-and-delete key on every master.  cb may be NULL.  Outcome
 * RELEASED when a quorum answered (res->confirmed counts the masters
 * where our key was deleted), NOQUORUM otherwise.  announce: a master
 * that deleted the key publishes on key + REDLOCK_CHANNEL_SUFFIX, which
 * wakes the waiters of every daemon subscribed to it (a real release;
 * the clean-up after a failed grant does not announce, so that two
 * contenders that split the vote do not wake each other in step).
 * Returns 0 or -1 (no callback).
 */
int redlock_release(const char *key, size_t key_len, const char *token, bool announce,
                    redlock_done_fn cb, void *arg);

/*
 * Fire and forget: on every master where key holds token, set its
 * expiry to ms from now (at least 1 ms) with the compare-and-PEXPIRE of
 * EXTEND; a key that is gone stays gone.  For a lost lease: a renewal
 * that failed may still have extended the key on a minority of masters
 * by a whole ttl, which this brings back to the end of the validity.
 * Returns 0, or -1 when out of memory.
 */
int redlock_expire_by(const char *key, size_t key_len, const char *token, int64_t ms);

/*
 * Extend one lease by its token (EXTEND of a lease-mode lock): on each
 * master, PEXPIRE the key to ttl_ms if it holds token; never re-creates
 * a key.  GRANTED (validity_end_us of the new lease) when a quorum
 * confirmed and the round ended within the validity the lock still had
 * (the quorum's old pttl less drift); NOTHELD when a quorum cannot
 * confirm (a majority do not hold token) or the validity had run out;
 * NOQUORUM when too few answered to tell.  Returns 0 or -1 (no callback).
 */
int redlock_extend_one(const char *key, size_t key_len, const char *token, int64_t ttl_ms,
                       redlock_done_fn cb, void *arg);

/*
 * Read the key on every master: HELD (owner_self when our token is on a
 * quorum; token may be NULL) with the holder's ttl, FREE, or NOQUORUM.
 * Returns 0 or -1 (no callback).
 */
int redlock_status(const char *key, size_t key_len, const char *token,
                   redlock_done_fn cb, void *arg);

/*
 * Compare-and-PEXPIRE n keys on every master in one script call each.
 * Never re-creates a key that is gone.  The caller decides, per item,
 * whether a quorum confirmed within the lease's remaining validity.
 * Returns 0 or -1 (no callback).
 */
int redlock_extend(const struct redlock_extend_item *items, size_t n,
                   redlock_extend_fn cb, void *arg);

#endif /* REDLOCKD_REDLOCK_H */
