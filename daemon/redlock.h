/*
 * redlock.h: the Redlock algorithm over N independent masters.
 *
 * Source: the Redis distributed-locks page ("Distributed Locks with
 * Redis", redis.io/docs/manual/patterns/distributed-locks), section "The
 * Redlock Algorithm", and the safety notes in shared/SAFETY.md.
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
#define REDLOCK_NO_EXPIRY (-1)      /* a busy key that has no ttl */

/* Outcome of an acquire or status round. */
enum redlock_outcome {
    REDLOCK_GRANTED,    /* acquire: a quorum granted with validity > 0 */
    REDLOCK_BUSY,       /* acquire: not granted, someone holds the key */
    REDLOCK_HELD,       /* status: a quorum does not see the key free */
    REDLOCK_FREE,       /* status: a quorum sees the key free */
    REDLOCK_RELEASED,   /* release: a quorum no longer holds our token */
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
 * Returns 0, or -1 when memory ran out (no callback).
 */
int redlock_acquire(const char *key, size_t key_len, const char *token,
                    int64_t ttl_ms, const char *old_token, redlock_done_fn cb, void *arg);

/*
 * Compare-and-delete key on every master.  cb may be NULL.  Outcome
 * RELEASED when a quorum answered (deleted, or the key was not ours),
 * NOQUORUM otherwise.  Returns 0 or -1 (no callback).
 */
int redlock_release(const char *key, size_t key_len, const char *token,
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
