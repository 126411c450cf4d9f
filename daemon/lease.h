/*
 * lease.h: a lock this daemon holds on a quorum of masters, its renewal
 * (the watchdog) and its state machine.
 *
 * The design Redisson calls the "watchdog": while a session holds a
 * lock, the daemon extends its lease every ttl/3.  One min-heap of
 * leases, keyed by the next moment each needs attention (its renewal,
 * or the moment it is reported lost), drives one libevent timer for the
 * whole daemon.  When it fires, every lease due within a small window
 * goes into one batched renewal (one script call per master covering
 * many keys; daemon/redlock.h), and the Redlock engine gives a verdict
 * per lease (redlock_renewal_verdict): the quorum and validity
 * arithmetic lives there, not here.  A renewal never re-acquires.
 *
 * States and transitions (every other event is ignored, in particular a
 * renewal's answer that arrives for a lease no longer HELD/RENEWING):
 *
 *   lease_start        -> HELD
 *   HELD     -- due (ttl/3 after the last confirmed start) --> RENEWING
 *   RENEWING -- verdict RENEWED --> HELD (new validity; keys a counted
 *               master lost are put back: redlock_restore)
 *   RENEWING -- verdict UNDECIDED --> HELD (retry soon, while valid)
 *   RENEWING -- verdict DENIED or TOO_LATE --> LOST (reason renew)
 *   HELD or RENEWING -- the guard before the validity's end passes
 *               without a confirmation --> LOST (renew, or quorum when
 *               the last renewals lacked a quorum of answers)
 *   HELD or RENEWING -- lease_lose(why) --> LOST (gone, shutdown)
 *   HELD or RENEWING -- lease_end() --> RELEASED
 *
 * A lease found LOST by the module (timer or verdict) has its keys
 * brought back to the end of its validity (redlock_expire_at), is
 * counted in stats, and is handed to the owner's lost callback, which
 * must stop using it (it may free its memory during the callback).
 *
 * Ownership: the owner (the lock table) allocates struct lease inside
 * its own record and frees it after lease_end() or the lost callback;
 * every field is written only by this module.
 */
#ifndef REDLOCKD_LEASE_H
#define REDLOCKD_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/redlock.h"
#include "daemon/util.h"

struct event_base;
struct lease_batch;

/* Where a lease is in its life. */
enum lease_state {
    LEASE_IDLE,         /* never started (a zeroed struct) */
    LEASE_HELD,         /* valid; no renewal in flight */
    LEASE_RENEWING,     /* valid; a renewal in flight */
    LEASE_LOST,         /* reported lost: not exclusive any more */
    LEASE_RELEASED      /* given up by its holder (lease_end) */
};

/* Why a lease was lost: the reason= of the "! LOST" push. */
enum lease_reason {
    LEASE_REASON_RENEW,     /* a renewal was denied or confirmed too late */
    LEASE_REASON_QUORUM,    /* too few masters answered before validity ended */
    LEASE_REASON_GONE,      /* a quorum answered that the token is not there
                               (found at UNLOCK or a hand-over) */
    LEASE_REASON_SHUTDOWN,  /* the daemon is stopping */
    LEASE_REASON_BROKEN     /* an operator's BREAK ended it (through any daemon) */
};

/* A held lease.  Embedded in its owner's record; see Ownership above. */
struct lease {
    enum lease_state    state;          /* see above */
    enum lease_reason   reason;         /* LOST: why */
    struct redlock_rec  rec;            /* its record on the masters; rec.base
                                           is borrowed from the owner, valid
                                           while the lease is */
    char                token[UTIL_TOKEN_HEX + 1]; /* value on the masters */
    int64_t             ttl_ms;         /* lease written to the masters, ms */
    int64_t             fence;          /* fencing token of the grant, 0 if none */
    int64_t             validity_end_us;/* monotonic end of validity */
    int64_t             renew_at_us;    /* next renewal, monotonic */
    int64_t             due_us;         /* heap key: renewal or loss, monotonic */
    size_t              heap_index;     /* position in the heap */
    struct lease_batch *batch;          /* RENEWING: the renewal in flight */
    size_t              batch_slot;     /* index in batch */
    bool                quorum_trouble; /* the last renewal lacked a quorum of answers */
};

/* Called when the module finds a lease lost (state LOST, reason set). */
typedef void (*lease_lost_fn)(struct lease *l);

/*
 * Set the event base and the owner's lost callback.  Call once.  The
 * module's timer takes priority 0, the highest, when the base has more
 * than one (daemon/server.c): after the daemon was paused (SIGSTOP, a
 * stalled machine) past some leases' validity, they are reported lost
 * before anything else happens on their sessions.
 */
void lease_init(struct event_base *base, lease_lost_fn lost);

/*
 * Start a lease granted by a round that began at start_us (monotonic)
 * with validity until validity_end_us: HELD, first renewal at start +
 * ttl/3.  rec is copied; rec->base must stay valid until the lease ends;
 * token is UTIL_TOKEN_HEX bytes, copied.  O(log n).
 */
void lease_start(struct lease *l, const struct redlock_rec *rec, const char *token,
                 int64_t ttl_ms, int64_t fence, int64_t start_us, int64_t validity_end_us);

/*
 * True while the lease may still be used at now_us (monotonic): HELD or
 * RENEWING and before the end of its validity less a guard (ttl/5, at
 * most 250 ms), the moment it is reported lost without a confirmed
 * renewal, so that LOST reaches the client before the validity it was
 * told ends (unless this daemon was paused past it; proto/SAFETY.md).
 */
bool lease_valid(const struct lease *l, int64_t now_us);

/*
 * Check the lease at now_us: when it is HELD or RENEWING but no longer
 * valid (the timer has not run yet, after a pause), it is lost now, with
 * the lost callback called before this returns.  Returns lease_valid().
 */
bool lease_check(struct lease *l, int64_t now_us);

/*
 * The holder found the lease lost (why: GONE, SHUTDOWN or BROKEN): LOST, no
 * more renewals, counted in stats; the lost callback is not called (the
 * caller reports it).  The keys are not touched.  Only from HELD or
 * RENEWING.
 */
void lease_lose(struct lease *l, enum lease_reason why);

/*
 * Count a lease lost after it ended (a release that found its token
 * gone from a quorum): the same counters as lease_lose().
 */
void lease_note_lost(enum lease_reason why);

/* The holder gives the lease up: RELEASED, no more renewals.  The keys are not touched. */
void lease_end(struct lease *l);

/* Validity left at now_us, ms (0 when over). */
int64_t lease_validity_left_ms(const struct lease *l, int64_t now_us);

/* The reason= word of a LOST push: "renew", "quorum", "gone", "shutdown", "broken". */
const char *lease_reason_name(enum lease_reason why);

/* Leases HELD or RENEWING now. */
size_t lease_count(void);

/* Release the heap and the timer (at exit, after every lease ended). */
void lease_stop(void);

#endif /* REDLOCKD_LEASE_H */
