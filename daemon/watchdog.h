/*
 * watchdog.h: lease renewal for every held lock, in batches.
 *
 * The design Redisson calls the "watchdog": while a session holds a
 * lock, the daemon extends its lease every ttl/3.  Here one min-heap of
 * leases, keyed by the next moment each needs attention (its renewal, or
 * the end of its validity), drives one libevent timer for the whole
 * daemon.  When it fires, every lease due within a small window goes
 * into one batched extend (one script call per master covering many
 * keys; daemon/redlock.h).  A renewal counts only when a quorum confirms
 * it before the lease's validity ends; a lease whose validity ends
 * without that is lost (lock_lost), and a lease that a majority of
 * masters no longer holds is lost at once.  Extend never re-acquires.
 */
#ifndef REDLOCKD_WATCHDOG_H
#define REDLOCKD_WATCHDOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct lease;

/* Set the event base and the drift factor. */
void watchdog_init(struct event_base *base, double drift_factor);

/* Change the drift factor for renewals from now on (reload). */
void watchdog_set_drift(double drift_factor);

/*
 * Start watching a new lease whose grant round started at start_us
 * (monotonic): first renewal at start + ttl/3.  O(log n).  Returns 0,
 * or -1 when out of memory (the lease is not watched: do not grant it).
 */
int watchdog_add(struct lease *l, int64_t start_us);

/*
 * True while the lease may still be used at now (monotonic us): before
 * the end of its validity less a guard (ttl/5, at most 250 ms), the
 * moment the watchdog reports it lost if no renewal was confirmed, so
 * that LOST reaches the client before the validity it was told ends.
 */
bool watchdog_valid(const struct lease *l, int64_t now_us);

/* Stop watching a lease (released, lost or dropped).  O(log n). */
void watchdog_remove(struct lease *l);

/* Leases watched now. */
size_t watchdog_count(void);

/* Release the heap (at exit, after every lease is gone). */
void watchdog_stop(void);

#endif /* REDLOCKD_WATCHDOG_H */
