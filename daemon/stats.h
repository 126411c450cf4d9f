/*
 * stats.h: the daemon's counters, shown by STATS.
 *
 * One global struct; each counter is written by the one module named in
 * its comment and read by the session module for STATS.
 */
#ifndef REDLOCKD_STATS_H
#define REDLOCKD_STATS_H

#include <stdint.h>

struct stats {
    int64_t  start_us;           /* main: monotonic start time */
    uint64_t connections;        /* session: open now */
    uint64_t connections_total;  /* session: accepted since start */
    uint64_t rejected_clients;   /* listener: refused by max_clients */
    uint64_t auth_failures;      /* session: wrong AUTH passwords */
    uint64_t clients_timed_out;  /* session: request line not finished in time */
    uint64_t clients_closed_output; /* session: replies not read, or too many */
    uint64_t acquire_ok;         /* lock: LOCK/TRYLOCK granted (first grant) */
    uint64_t acquire_reentered;  /* lock: LOCK on a name already held */
    uint64_t acquire_busy;       /* lock: TRYLOCK answered BUSY */
    uint64_t acquire_timeout;    /* lock: LOCK answered TIMEOUT */
    uint64_t acquire_noquorum;   /* lock: LOCK/TRYLOCK answered NOQUORUM */
    uint64_t releases;           /* lock: leases released on the masters */
    uint64_t handovers;          /* lock: leases handed to the next waiter */
    uint64_t yields;             /* lock: releases announced to let other daemons in */
    uint64_t renewals_ok;        /* watchdog: leases renewed */
    uint64_t renewals_failed;    /* watchdog: renewals without a quorum */
    uint64_t locks_lost;         /* lock: LOST pushed */
    uint64_t fenced_grants;      /* lock: grants that carried a fence */
    uint64_t lease_grants;       /* lock: mode=lease grants */
    uint64_t extends_ok;         /* lock: EXTEND answered OK */
    uint64_t extends_notheld;    /* lock: EXTEND answered NOTHELD */
    uint64_t pubsub_wakeups;     /* lock: waiters woken by a release announcement */
    uint64_t fallback_retries;   /* lock: retries timed by the holder's ttl */
};

extern struct stats stats;

#endif /* REDLOCKD_STATS_H */
