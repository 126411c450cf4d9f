/*
 * reach.h: what the running daemon can reach, said in its log.
 *
 * A daemon whose masters never came up must not look healthy: at start,
 * once every master has been tried (or redis.connect_timeout_ms plus
 * REACH_TICK_MS has passed), and then whenever the set of masters whose
 * answers count changes, the daemon logs
 *
 *   - a warning naming each master that does not count now, with why
 *     (down and the connect error, connecting, quarantined and for how
 *     long, the same server as another entry, refused by the layout
 *     registry), and whether a quorum is reachable with the rest;
 *   - "quorum regained" when a quorum counts again after it did not;
 *   - a line when every master counts (at start, or again).
 *
 * A master counts as in master_tally() (daemon/master.h): up, not
 * quarantined, not a duplicate, counted by the layout registry.  The
 * masters are looked at every REACH_TICK_MS, so a change shorter than
 * that may go unsaid (master.c logs every link's ups and downs itself);
 * what is said is only a change of the set, never a change of a reason
 * alone, so a master that stays down is named once.
 *
 * Deciding apart from doing: reach_decide() (reach.c) is a pure function of the
 * last report and the masters now, checked by tests/check_reach.c
 * without Redis or a clock; reach_start() (reach_watch.c) runs it on a timer and writes
 * the lines.
 */
#ifndef REDLOCKD_REACH_H
#define REDLOCKD_REACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REACH_TICK_MS   500     /* how often the masters are looked at, ms */

/*
 * What was last said.  Owned by its user (reach.c keeps one for the
 * daemon); zero it, then set counted to an array of n bools the user
 * owns, before the first reach_decide().
 */
struct reach_memo {
    bool    told;       /* the first report was made */
    bool    quorum;     /* a quorum counted at the last report */
    size_t  n;          /* masters */
    bool   *counted;    /* per master: it counted at the last report */
};

/* What to say now (reach_decide). */
enum reach_say {
    REACH_QUIET,        /* nothing: not decided yet, or no change */
    REACH_ALL,          /* every master counts: at start, or again */
    REACH_MISSING,      /* warn: these masters do not count (name each, and
                           whether a quorum is reachable) */
};

struct reach_verdict {
    enum reach_say say;
    bool           first;       /* the first report since start */
    bool           regained;    /* a quorum counts again after it did not
                                   (never on the first report) */
    bool           quorum;      /* a quorum counts now */
    size_t         counting;    /* masters that count now */
};

/*
 * Decide what to say, from the masters now: counts[i] says master i's
 * answers count, decided[i] that its state is known (up with its
 * verdict, or down after a connect attempt); quorum is the masters a
 * quorum needs; late says the start grace is over (report even if some
 * master is still undecided).  Before the first report, nothing is said
 * until every master is decided or late.  After it, only a change of
 * the counting set is said.  Updates *memo when it says something
 * (memo->n must equal n).  Pure: no I/O, no clock.
 */
struct reach_verdict reach_decide(struct reach_memo *memo, const bool *counts,
                                  const bool *decided, size_t n, size_t quorum, bool late);

/*
 * Whether master i's state is decided for a report: up with its layout
 * registry read, or down with the reason of a failed connect.  Also what
 * `redlockd --reach` waits for (daemon/server.c).
 */
bool reach_master_decided(size_t i);

/*
 * Start looking at the masters every REACH_TICK_MS on ctx.base
 * (daemon/ctx.h), after master_start().  The start grace ends
 * redis.connect_timeout_ms (as ctx.conf has it now) plus REACH_TICK_MS
 * from now.  Allocation failure aborts (daemon/xmalloc.h).
 */
void reach_start(void);

/* Stop the timer and free the memo; nothing happens when not started. */
void reach_stop(void);

#endif /* REDLOCKD_REACH_H */
