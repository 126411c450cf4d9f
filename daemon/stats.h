/*
 * stats.h: the daemon's counters, shown by STATS and by /metrics.
 *
 * One global struct; each counter is written by the one module named in
 * its comment, from the event loop's thread.  Every counter is read
 * through one table, daemon/report.c, from which the session module
 * renders STATS and the metrics module /metrics: a new counter is a
 * field here and a row there.
 */
#ifndef REDLOCKD_STATS_H
#define REDLOCKD_STATS_H

#include <stddef.h>
#include <stdint.h>

/*
 * Upper bounds of the acquire latency histogram's buckets, in ms; one
 * more bucket, +Inf, follows the last.  An observation goes into the
 * first bucket whose bound it does not exceed.
 */
#define STATS_LATENCY_BOUNDS_MS 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000
#define STATS_LATENCY_NBOUNDS   13  /* bounds in STATS_LATENCY_BOUNDS_MS */

struct stats {
    int64_t  start_us;           /* main: monotonic start time */
    uint64_t connections;        /* session: open now */
    uint64_t connections_total;  /* session: accepted since start */
    uint64_t rejected_clients;   /* listener: refused by max_clients */
    uint64_t rejected_descriptors; /* listener: of those, for the descriptor limit (past the
                                      client slots it leaves, or out of descriptors and
                                      refused from the spare one; /metrics' too) */
    uint64_t client_slots;       /* listener: client slots in effect: limits.max_clients,
                                    or fewer when the descriptor limit leaves fewer */
    uint64_t descriptor_limit;   /* listener: RLIMIT_NOFILE's soft value read at start
                                    and reload (after raising it to the hard one);
                                    0 when there is none */
    uint64_t accept_failures;    /* listener: accept(2) failed (out of descriptors:
                                    accepting paused) */
    uint64_t auth_failures;      /* session: wrong AUTH passwords */
    uint64_t auth_held;          /* session: AUTHs that waited for their turn (authlimit.h) */
    uint64_t tls_handshake_failures; /* session: TLS clients whose handshake failed */
    uint64_t clients_timed_out;  /* session: request line not finished in time */
    uint64_t clients_closed_output; /* session: replies not read, or too many */
    uint64_t metrics_rejected;   /* metrics: /metrics connections refused by
                                    metrics.max_connections (none to evict) */
    uint64_t metrics_evicted;    /* metrics: slow /metrics connections closed to
                                    make room for a new one */
    uint64_t metrics_timed_out;  /* metrics: /metrics connections closed at
                                    metrics.request_timeout_ms */
    int64_t  metrics_connections; /* metrics: /metrics connections holding a place
                                    now (metrics.max_connections counts them) */
    uint64_t labels_truncated;   /* session: default holder labels cut to 64 bytes */
    uint64_t acquire_ok;         /* lock: LOCK/TRYLOCK granted (first grant) */
    uint64_t acquire_reentered;  /* lock: LOCK on a name already held */
    uint64_t acquire_busy;       /* lock: TRYLOCK answered BUSY */
    uint64_t acquire_timeout;    /* lock: LOCK answered TIMEOUT */
    uint64_t acquire_noquorum;   /* lock: LOCK/TRYLOCK answered NOQUORUM */
    uint64_t releases;           /* lock: leases released on the masters */
    uint64_t handovers;          /* lock: leases handed to the next waiter */
    uint64_t yields;             /* lock: releases announced to let other daemons in */
    uint64_t breaks;             /* lock: BREAKs that ended a lock */
    uint64_t renewals_ok;        /* lease: leases renewed */
    uint64_t renewals_failed;    /* lease: renewals without a quorum */
    uint64_t keys_restored;      /* redlock: lock keys put back on a master that lost them */
    uint64_t locks_lost;         /* lease: LOST pushed */
    uint64_t locks_lost_renew;   /* lease: of them, reason=renew */
    uint64_t locks_lost_quorum;  /* lease: of them, reason=quorum */
    uint64_t locks_lost_gone;    /* lease: of them, reason=gone */
    uint64_t locks_lost_shutdown;/* lease: of them, reason=shutdown */
    uint64_t locks_lost_broken;  /* lease: of them, reason=broken */
    uint64_t fenced_grants;      /* lock: grants that carried a fence */
    uint64_t shared_grants;      /* lock: grants of a shared hold */
    uint64_t counted_grants;     /* lock: grants of a permit of a counted name */
    uint64_t set_grants;         /* lock: grants of a set of names (LOCK n1 n2 ..) */
    uint64_t kind_refusals;      /* lock: LOCKs answered ERR KIND */
    uint64_t lease_grants;       /* lock: mode=lease grants */
    uint64_t extends_ok;         /* lock: EXTEND answered OK */
    uint64_t extends_notheld;    /* lock: EXTEND answered NOTHELD */
    uint64_t check_current;      /* lock: CHECK answered CURRENT */
    uint64_t check_stale;        /* lock: CHECK answered STALE */
    uint64_t pubsub_wakeups;     /* lock: waiters woken by a release announcement */
    uint64_t fallback_retries;   /* lock: retries timed by the holder's ttl */
    uint64_t watches;            /* watch: WATCH requests accepted */
    uint64_t watching;           /* watch: WATCHes open now */
    uint64_t reads_refused;      /* session: STATUS/WATCH over limits.reads_per_second */
    uint64_t reads_waited;       /* readq: reads that waited for a slot of
                                    limits.max_reads_in_flight */
    uint64_t read_wait_us;       /* readq: those waits' sum, us */
    uint64_t reads_timed_out;    /* command: STATUS answered ERR LIMIT after waiting
                                    limits.read_wait_ms for a slot */
    uint64_t list_steps;         /* lock: LIST steps (pages of up to 1024 names) made */
    uint64_t list_visited;       /* lock: lock table entries those steps looked at */
    /*
     * The acquire latency histogram (stats_observe_acquire): the
     * LOCK/TRYLOCK answers counted by acquire_ok, _reentered, _busy,
     * _timeout and _noquorum, by the time from lock_acquire() to the
     * answer.  Session-mode grants are session_grants in STATS:
     * acquire_ok - lease_grants.
     */
    uint64_t acquire_latency[STATS_LATENCY_NBOUNDS + 1]; /* lock: answers per bucket, not
                                                            cumulative; the last is +Inf */
    uint64_t acquire_latency_sum_us; /* lock: sum of those latencies, us */
};

extern struct stats stats;

/* Bound i (0 <= i < STATS_LATENCY_NBOUNDS) of the latency buckets, ms. */
static inline int64_t
stats_latency_bound_ms(size_t i)
{
    static const int64_t bounds[STATS_LATENCY_NBOUNDS] = { STATS_LATENCY_BOUNDS_MS };

    return bounds[i];
}

/* Count one answered LOCK/TRYLOCK that took us microseconds (< 0 counts as 0). */
static inline void
stats_observe_acquire(int64_t us)
{
    size_t i = 0;

    if (us < 0) {
        us = 0;
    }
    while (i < STATS_LATENCY_NBOUNDS && us > stats_latency_bound_ms(i) * 1000) {
        i++;
    }
    stats.acquire_latency[i]++;
    stats.acquire_latency_sum_us += (uint64_t)us;
}

/* Answered LOCK/TRYLOCKs in the histogram (its _count), the sum of the buckets. */
static inline uint64_t
stats_acquire_latency_count(void)
{
    uint64_t n = 0;
    size_t i;

    for (i = 0; i <= STATS_LATENCY_NBOUNDS; i++) {
        n += stats.acquire_latency[i];
    }
    return n;
}

#endif /* REDLOCKD_STATS_H */
