/*
 * drift.h: does a master's clock keep time with this daemon's?
 *
 * Redis expires a key at an absolute time of the master's wall clock
 * (PX is turned into "now + ms" when the key is written), so a master
 * whose wall clock is stepped forward, by a bad NTP server or a virtual
 * machine's resume, drops every lock key early, and one stepped back
 * keeps them late.  Redlock's safety assumes that the masters' clocks
 * all advance at nearly the same rate as the client's (Redis
 * distributed-locks page, "Safety arguments": the drift allowance); a
 * step breaks that assumption silently, which is the hole Martin
 * Kleppmann's critique of Redlock points at.
 *
 * Every answer a master gives carries its TIME (daemon/master_eval.c wraps
 * every script).  This module compares two such readings of one master
 * against CLOCK_MONOTONIC: the master read its clock at some moment
 * between the send of the request and the read of its answer, so
 * between two readings its clock must have advanced by at least (send
 * of the second - read of the first) and at most (read of the second -
 * send of the first), give or take a drift allowance: drift_factor of
 * that span, but of no more than the shortest lease (lock.min_ttl_ms),
 * plus 2 ms.  A reading outside that interval is a step.  The interval
 * is exact: network delay, a slow master or a paused daemon only widen
 * it, so none of them is ever taken for a step.  The allowance stops
 * growing at the shortest lease's drift so that an old reference (a
 * daemon idle for minutes, a master unreachable for a while) hides no
 * step larger than a lease's own drift allowance (daemon/redlock.h);
 * daemon/master.c keeps references young with a TIME now and then.
 *
 * What it cannot see: a step smaller than the allowance; a step while
 * no reading is held (before the first answer after the daemon's
 * start, or after the check was turned on by a reload); a clock that
 * runs fast or slow by less than the allowance per span between two
 * readings (drift_factor, plus 2 ms per span: steady readings a second
 * apart pass a clock up to 0.2 % off on top of drift_factor); a step
 * that is undone before the next reading.  It can take for a step what
 * is only a rate difference over a long span: a master unread for G
 * seconds whose oscillator differs from the daemon's by r (say 50 ppm
 * without NTP) looks stepped by G * r, and is quarantined (the safe
 * side).  The daemon's own clock is CLOCK_MONOTONIC, which a wall-clock
 * step does not move; it stops while the daemon's machine is suspended,
 * which makes every master look stepped forward (the quarantine that
 * follows is safe).
 */
#ifndef REDLOCKD_DRIFT_H
#define REDLOCKD_DRIFT_H

#include <stdbool.h>
#include <stdint.h>

/*
 * The last reading of one master's clock.  Embedded in the master's
 * record (daemon/health.c) and written only by drift_check() and
 * drift_forget(); zero it to start without one.
 */
struct drift_ref {
    bool    set;        /* a reading is held */
    int64_t master_us;  /* the master's TIME, us of its wall clock */
    int64_t sent_us;    /* monotonic: the request that read it was sent */
    int64_t read_us;    /* monotonic: its answer was read */
};

/* What drift_check() found. */
struct drift_step {
    int64_t step_us;    /* how far the reading lies outside what the
                           daemon's clock allows: > 0 ahead, < 0 behind,
                           0 within it */
    int64_t elapsed_us; /* the master's clock between the two readings */
    int64_t since_us;   /* the daemon's: read of the first to read of the
                           second (monotonic) */
    int64_t allowed_us; /* the drift allowed on top of the round trips */
};

/*
 * Compare a new reading of a master's clock (master_us, its TIME in us;
 * the request sent at sent_us and answered at read_us, both
 * CLOCK_MONOTONIC us, sent_us <= read_us) with ref, the previous one,
 * allowing drift_factor (lock.drift_factor, e.g. 0.01) of the elapsed
 * time, counted up to span_max_us (us; lock.min_ttl_ms), plus 2 ms.
 * Fills *out (step_us 0 when ref held no reading) and makes the new
 * reading the reference.  Returns true when the reading is a step
 * (out->step_us != 0).  O(1), no allocation.
 */
bool drift_check(struct drift_ref *ref, int64_t master_us, int64_t sent_us, int64_t read_us,
                 double drift_factor, int64_t span_max_us, struct drift_step *out);

/* Drop the reference (the master is another server now): the next reading starts over. */
void drift_forget(struct drift_ref *ref);

#endif /* REDLOCKD_DRIFT_H */
