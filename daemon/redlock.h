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
    REDLOCK_LATE,       /* acquire: a quorum granted, but too little validity
                           was left when the round ended (it is not a grant) */
    REDLOCK_RELEASED,   /* release: a quorum confirmed the compare-and-delete */
    REDLOCK_GONE,       /* release: a quorum answered, but fewer than a quorum
                           still held our token (it was no longer a lock) */
    REDLOCK_NOTHELD,    /* extend: a quorum did not confirm within validity */
    REDLOCK_NOQUORUM    /* fewer than a quorum of masters answered */
};

/* What a batched renewal came to for one lease (redlock_renewal_verdict). */
enum redlock_renewal {
    REDLOCK_RENEWED,    /* a quorum confirmed within the validity: a new lease */
    REDLOCK_DENIED,     /* a majority of the masters do not hold our token */
    REDLOCK_TOO_LATE,   /* a quorum confirmed, but after the validity ended */
    REDLOCK_UNDECIDED   /* too few answers to tell; try again while valid */
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
    size_t  swapped;                    /* acquire with old_token (a hand-over):
                                           masters where the key still held
                                           old_token and was given the new one */
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
    const uint8_t *denied;      /* per item: masters where it is not ours
                                   (someone else's value, or no key) */
    const uint16_t *absent;     /* per item: bit i set when counted master i
                                   answered that the key does not exist */
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

/*
 * The acquire script's answer: which branch granted the key on a
 * master (for a hand-over's releaser, only SWAPPED confirms its token).
 */
enum redlock_branch {
    REDLOCK_BRANCH_SET = 1,     /* the key was free: SET NX */
    REDLOCK_BRANCH_SWAPPED = 2, /* the key held old_token: given the new one */
    REDLOCK_BRANCH_OURS = 3     /* the key held our token already: PEXPIRE */
};

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
 * Acquire key with token for ttl_ms.  GRANTED when a quorum set the key
 * (or already held our token) and, when the callback runs, validity is
 * left: at least 1 ms, or, with fence, at least one round deadline
 * (lock.node_timeout_ms: a later grant's round may begin that long
 * before this lease's keys expire, and each of its counter increments
 * must come after the write-back).  A quorum that granted too late is
 * LATE.  On any other outcome
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
 * (redlock_release_verdict): RELEASED when a quorum confirmed the
 * delete of our token (res->confirmed counts them), GONE when a quorum
 * answered but fewer than a quorum still held the token, NOQUORUM when
 * fewer than a quorum answered.  announce: a master
 * that deleted the key publishes on key + REDLOCK_CHANNEL_SUFFIX, which
 * wakes the waiters of every daemon subscribed to it (a real release;
 * the clean-up after a failed grant does not announce, so that two
 * contenders that split the vote do not wake each other in step).
 * Returns 0 or -1 (no callback).
 */
int redlock_release(const char *key, size_t key_len, const char *token, bool announce,
                    redlock_done_fn cb, void *arg);

/*
 * Fire and forget, for a lost lease: on every master where key still
 * holds token, set its expiry to the end of the validity the holder was
 * told (validity_end_us, monotonic) plus the drift allowance of what is
 * left, at least 1 ms, with the compare-and-PEXPIRE of EXTEND; a key
 * that is gone stays gone.  A renewal that failed may have pushed the
 * key a whole ttl further on a minority of masters; this brings it back,
 * so the name is free again when the lease would have ended.  Returns
 * 0, or -1 when out of memory.
 */
int redlock_expire_at(const char *key, size_t key_len, const char *token,
                      int64_t validity_end_us);

/*
 * The verdict on one lease of a batched renewal: confirmed and denied
 * are its counts out of nmasters, start_us and end_us the round's
 * monotonic start and decision, validity_end_us the end of the lease's
 * current validity.  RENEWED when a quorum confirmed before the validity
 * ended; *new_end_us is then start + ttl - drift (the lease is renewed
 * from the moment the round began, as an acquire is).  DENIED when more
 * than nmasters - quorum masters answered that the key is not ours (no
 * quorum can confirm it any more).  TOO_LATE when a quorum confirmed
 * after the validity ended (a renewal never revives an expired lease).
 * UNDECIDED otherwise.  Pure arithmetic; no I/O.
 */
enum redlock_renewal redlock_renewal_verdict(size_t confirmed, size_t denied, size_t nmasters,
                                             int64_t start_us, int64_t end_us,
                                             int64_t ttl_ms, int64_t validity_end_us,
                                             int64_t *new_end_us);

/*
 * The verdict on a compare-and-delete (or a hand-over's swap of the old
 * token) out of nmasters: RELEASED when confirmed >= quorum, GONE when
 * answered >= quorum but confirmed < quorum, NOQUORUM otherwise.  Pure.
 */
enum redlock_outcome redlock_release_verdict(size_t answered, size_t confirmed,
                                             size_t nmasters);

/* One key to put back on the masters that lost it (redlock_restore). */
struct redlock_restore_item {
    const char *key;            /* full Redis key */
    size_t      key_len;        /* bytes in key */
    const char *token;          /* owner token, UTIL_TOKEN_HEX bytes */
    int64_t     validity_end_us;/* monotonic end of the lease's validity */
    uint16_t    masters;        /* bit i: master i answered that the key is absent */
};

/*
 * Put renewed leases back where a master lost them: on each master named
 * in an item's mask, SET key token NX PX <validity left, ms> (set only
 * if absent; an item whose validity is over is skipped), one script call
 * per master for all its keys.  Call only for leases a quorum confirmed
 * in this same turn of the event loop: a confirmed quorum holds the
 * token, and every other quorum intersects it, so nobody else can hold
 * the name before the validity ends, and a key set to expire by then
 * grants nothing that was not ours.  Fire and forget; each key set is
 * counted in stats.keys_restored.  Returns 0, or -1 when out of memory.
 */
int redlock_restore(const struct redlock_restore_item *items, size_t n);

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
 * Never re-creates a key that is gone.  The round waits for every
 * master (or its deadline), so that the result also says where a key
 * is missing (res->absent).  The caller decides, per item, with
 * redlock_renewal_verdict().  Returns 0 or -1 (no callback).
 */
int redlock_extend(const struct redlock_extend_item *items, size_t n,
                   redlock_extend_fn cb, void *arg);

#endif /* REDLOCKD_REDLOCK_H */
