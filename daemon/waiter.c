/*
 * waiter.c: what each event means for a pending LOCK (see waiter.h).
 *
 * Pure: no I/O, no clock, no randomness of its own, no allocation.  The
 * rules are those of lock_queue.c's header comment: first in, first out;
 * no lost wake-up; turns between daemons.
 */
#include <stddef.h>
#include <stdint.h>

#include "daemon/waiter.h"

void
waiter_life_init(struct waiter_life *wl, enum redlock_kind kind, int64_t ttl_ms,
                 int64_t wait_ms, bool trylock, bool draining, int64_t start_us)
{
    *wl = (struct waiter_life){ 0 };
    wl->kind = kind;
    wl->ttl_ms = ttl_ms;
    /* A client whose input ended cannot wait: one attempt. */
    wl->wait = trylock ? WAITER_ONCE_BUSY
               : wait_ms == 0 || draining ? WAITER_ONCE_TIMEOUT : WAITER_QUEUES;
    wl->deadline_us = WAITER_ONCE(wl) ? start_us
                      : wait_ms < 0 ? INT64_MAX : start_us + wait_ms * 1000;
    wl->state = WAITER_QUEUED;
    wl->timer = WAITER_TIMER_RETRY;
}

bool
waiter_room(enum redlock_kind kind, size_t nholders, size_t nexclusive, unsigned limit)
{
    switch (kind) {
    case REDLOCK_EXCLUSIVE:
    case REDLOCK_SHARED:
        return nexclusive == 0;
    default:
        return nholders < limit;
    }
}

enum waiter_fit
waiter_kind_fits(bool name_counted, unsigned name_limit, size_t nholders, bool req_counted,
                 unsigned req_limit)
{
    if (name_counted == req_counted && (!req_counted || name_limit == req_limit)) {
        return WAITER_FITS;
    }
    return nholders > 0 ? WAITER_HELD_AS : WAITER_WAITED_AS;
}

unsigned
waiter_pick_permit(const unsigned char *held, unsigned limit, unsigned *next)
{
    unsigned j, s;

    for (j = 0; j < limit; j++) {
        s = (*next + j) % limit;
        if (!(held[s / 8] & (1u << (s % 8)))) {
            *next = (s + 1) % limit;
            return s;
        }
    }
    return *next;
}

/* Its try goes to the masters. */
static void
waiter_trying(struct waiter_life *wl)
{
    wl->state = WAITER_ACQUIRING;
    wl->blocker = 0;
}

/* Between tries, for the reason timer. */
static void
waiter_waiting(struct waiter_life *wl, enum waiter_timer timer)
{
    wl->state = WAITER_WAITING;
    wl->timer = timer;
}

/* No try due: only the deadline (or a wake-up) ends the wait. */
static void
waiter_queued(struct waiter_life *wl)
{
    wl->state = WAITER_QUEUED;
    wl->timer = WAITER_TIMER_RETRY;
}

/* The time of a timer delay_us from now: never after the wait= deadline. */
static int64_t
waiter_at(const struct waiter_life *wl, const struct waiter_env *env, int64_t delay_us)
{
    if (delay_us < 0) {
        delay_us = 0;
    }
    if (delay_us > wl->deadline_us - env->now_us) {
        return wl->deadline_us > env->now_us ? wl->deadline_us : env->now_us;
    }
    return env->now_us + delay_us;
}

/*
 * A delay before a next try, us: at most half the ttl while a master
 * holds its gate, so that the gate (set for one ttl) is renewed by the
 * next try before it lapses.
 */
static int64_t
waiter_gate_delay(const struct waiter_life *wl, int64_t delay_us)
{
    return wl->gated && delay_us > wl->ttl_ms * 1000 / 2 ? wl->ttl_ms * 1000 / 2 : delay_us;
}

enum waiter_start_step
waiter_start(struct waiter_life *wl, bool ready_head, bool exclusive_queued)
{
    if (WAITER_ONCE(wl) && wl->kind == REDLOCK_SHARED && exclusive_queued) {
        /* A shared attempt never overtakes an exclusive LOCK queued here. */
        return WAITER_START_REFUSE;
    }
    if (WAITER_ONCE(wl) || ready_head) {
        waiter_trying(wl);
        return WAITER_START_TRY;
    }
    waiter_queued(wl);
    return WAITER_START_QUEUE;
}

enum waiter_answer
waiter_refusal(const struct waiter_life *wl)
{
    if (wl->wait == WAITER_ONCE_BUSY) {
        return WAITER_ANSWER_BUSY;
    }
    return wl->noquorum ? WAITER_ANSWER_NOQUORUM : WAITER_ANSWER_TIMEOUT;
}

bool
waiter_wake(struct waiter_life *wl)
{
    if (WAITER_IN_ROUND(wl)) {
        /* That round may have run before what woke it: retry at once if busy. */
        wl->woken = true;
        return false;
    }
    waiter_waiting(wl, WAITER_TIMER_NOW);
    return true;
}

struct waiter_timer_step
waiter_on_timer(struct waiter_life *wl, const struct waiter_env *env, bool ready_head,
                int64_t yield_until_us, int64_t subscribe_until_us, bool watch_ready)
{
    struct waiter_timer_step st = { .what = WAITER_TIMER_NOTHING };
    enum waiter_timer was = wl->timer;

    if (WAITER_IN_ROUND(wl)) {
        return st;
    }
    if (env->now_us >= wl->deadline_us) {
        st.what = WAITER_TIMER_EXPIRE;
        return st;
    }
    if (ready_head && env->now_us < yield_until_us) {
        /* Yielded: another daemon goes first. */
        waiter_waiting(wl, WAITER_TIMER_YIELD);
        st.what = WAITER_TIMER_REARM;
        st.at_us = waiter_at(wl, env, yield_until_us - env->now_us);
        return st;
    }
    if (ready_head && subscribe_until_us != 0) {
        if (env->now_us < subscribe_until_us && !watch_ready) {
            /* Not heard everywhere yet: the confirmation wakes it (waiter_on_subscribed). */
            waiter_waiting(wl, WAITER_TIMER_SUBSCRIBE);
            st.what = WAITER_TIMER_REARM;
            st.at_us = waiter_at(wl, env, subscribe_until_us - env->now_us);
            return st;
        }
        st.subscribed = true;   /* confirmed, or no longer waited for */
    }
    if (ready_head) {
        st.fallback = wl->state == WAITER_WAITING && was == WAITER_TIMER_HOLDER;
        wl->hops = 0;
        waiter_trying(wl);
        st.what = WAITER_TIMER_TRY;
        return st;
    }
    waiter_queued(wl);
    st.what = WAITER_TIMER_QUEUE;
    return st;
}

struct waiter_release_step
waiter_on_release(struct waiter_life *wl, const struct waiter_env *env,
                  const struct waiter_release *rel)
{
    struct waiter_release_step st = { .what = WAITER_RELEASE_IGNORE };
    bool between = wl->state == WAITER_WAITING;

    if (rel->yielding) {
        if (rel->own_yield) {
            return st;          /* our own yield's announcement: the head's timer is set */
        }
        st.end_yield = true;    /* another daemon's turn ended: ours again */
    }
    if (rel->own_retired) {
        return st;              /* the clean-up of the head's own last try: for the others */
    }
    if (between && wl->timer == WAITER_TIMER_JITTER
        && (wl->blocker == 0 || rel->id != wl->blocker)) {
        return st;              /* its try is due within the jitter anyway */
    }
    /*
     * Every master announces the same release, and each copy says that
     * its master has let the key go.  The first wakes the head; a copy
     * that comes while the head's try is in flight makes it try again at
     * once if that try finds the name busy (the masters process the
     * release and our try in any order); copies that come while it
     * waits to try again do nothing more (the wake-up is pending).  So a
     * release makes at most one try per master that announced it, and
     * none is lost.
     */
    if (rel->repeat) {
        if (!WAITER_IN_ROUND(wl) && !(between && wl->timer == WAITER_TIMER_HOLDER)) {
            return st;          /* the wake-up of the first copy is pending */
        }
    } else {
        st.first_copy = true;
    }
    if (between && wl->timer == WAITER_TIMER_HOLDER && wl->blocker != 0
        && rel->id != wl->blocker) {
        /*
         * Not the holder it waits for, which a quorum still held at its
         * last try: most likely another waiter's clean-up of a partial
         * grant, which frees nothing; or the release of a holder that
         * took over from its own by a hand-over.  Try within the jitter,
         * not at once: waiters that wait for one holder and whose tries
         * clean up after each other would otherwise wake each other in
         * step for its whole ttl.
         */
        waiter_waiting(wl, WAITER_TIMER_JITTER);
        st.what = WAITER_RELEASE_REARM;
        st.at_us = waiter_at(wl, env, waiter_gate_delay(wl, env->draw(env->retry_delay_us)));
        return st;
    }
    wl->woken_id = rel->id;
    st.what = waiter_wake(wl) ? WAITER_RELEASE_WAKE : WAITER_RELEASE_IGNORE;
    return st;
}

bool
waiter_on_subscribed(struct waiter_life *wl)
{
    if (wl->state == WAITER_WAITING && wl->timer == WAITER_TIMER_JITTER) {
        return false;
    }
    return waiter_wake(wl);
}

/*
 * Whether a master may hold the waiter's gate closed after this round.
 * A master closed it when it said so; one whose answer the round did
 * not count (it came after the decision, or never) may have closed it
 * too, unbeknown, when shared holders refused us elsewhere or when no
 * quorum answered: count it as closed, so that the grant or the end of
 * the wait opens it.  Unopened, it would keep every shared request out
 * for a whole ttl while the name is free, and its expiry announces
 * nothing.
 */
static bool
waiter_gated_after(const struct waiter_life *wl, const struct waiter_round_end *r,
                   bool handover)
{
    return wl->gated || r->gated
           || (wl->kind == REDLOCK_EXCLUSIVE && !WAITER_ONCE(wl) && !handover && r->uncounted
               && (r->readers || r->outcome == REDLOCK_NOQUORUM));
}

/* The round's step answers the waiter. */
static struct waiter_round_step
waiter_answer(struct waiter_round_step st, enum waiter_answer answer, int64_t ttl_ms)
{
    st.what = WAITER_ROUND_ANSWER;
    st.answer = answer;
    st.ttl_ms = ttl_ms;
    return st;
}

/*
 * A LOCK that may still wait met NOQUORUM: retry with a jittered
 * exponential backoff, from lock.retry_delay_ms doubling to
 * WAITER_BACKOFF_MAX_US (masters that restart come back within it).
 */
static struct waiter_round_step
waiter_backoff(struct waiter_life *wl, const struct waiter_env *env, struct waiter_round_step st)
{
    if (wl->backoff_us == 0) {
        wl->backoff_us = env->retry_delay_us;
    } else if (wl->backoff_us < WAITER_BACKOFF_MAX_US) {
        wl->backoff_us *= 2;
    }
    if (wl->backoff_us > WAITER_BACKOFF_MAX_US) {
        wl->backoff_us = WAITER_BACKOFF_MAX_US;
    }
    wl->noquorum = true;
    st.keep_noquorum = true;
    waiter_waiting(wl, WAITER_TIMER_BACKOFF);
    st.what = WAITER_ROUND_RETRY;
    st.at_us = waiter_at(wl, env, waiter_gate_delay(wl, wl->backoff_us / 2
                                                        + env->draw(wl->backoff_us / 2 + 1)));
    return st;
}

/*
 * Refused with a quorum of answers, and it may wait: when to try again.
 * At once when a release was announced meanwhile (woken); when the
 * holder's lease runs out (a release announced before then wakes it
 * sooner), plus jitter; after a random delay when no single token
 * refused on a quorum (split: as far as the answers tell, the records
 * in the way are partial grants of contenders that split the vote, which
 * they give back at once, or leftovers of several holders) or its key
 * never expires.  After a split, an announcement (another contender's
 * clean-up, most likely) neither cuts the random delay short nor, heard
 * during the round, makes it 0: that delay is what takes the contenders
 * out of step, and it is within the retry jitter anyway.
 */
static struct waiter_round_step
waiter_retry(struct waiter_life *wl, const struct waiter_env *env,
             const struct waiter_round_end *r, bool woken, struct waiter_round_step st)
{
    int64_t delay = env->draw(env->retry_delay_us);
    enum waiter_timer timer = WAITER_TIMER_RETRY;

    if (!r->watched) {
        /*
         * Subscribed only now: a release made between this round and the
         * subscription would never be heard, so try once more as soon as
         * the subscription is confirmed (waiter_on_timer waits for it).
         */
        st.watch = true;
        delay = 0;
        timer = WAITER_TIMER_NOW;
    } else if (r->outcome == REDLOCK_BUSY && r->split) {
        timer = WAITER_TIMER_JITTER;
    } else if (woken && (wl->kind != REDLOCK_EXCLUSIVE || r->holder_id == 0
                         || r->holder_id == wl->woken_id)) {
        delay = 0;
        timer = WAITER_TIMER_NOW;
    } else if (woken) {
        timer = WAITER_TIMER_JITTER;    /* another token's release: see waiter_on_release */
    } else if (r->outcome == REDLOCK_BUSY && r->ttl_ms > 0) {
        timer = WAITER_TIMER_HOLDER;
        /* A permit or a shared hold may get in when any holder leaves. */
        wl->blocker = wl->kind == REDLOCK_EXCLUSIVE ? r->holder_id : 0;
        delay += r->ttl_ms * 1000;
    }
    waiter_waiting(wl, timer);
    st.what = WAITER_ROUND_RETRY;
    st.at_us = waiter_at(wl, env, waiter_gate_delay(wl, delay));
    return st;
}

struct waiter_round_step
waiter_on_round(struct waiter_life *wl, const struct waiter_env *env,
                const struct waiter_round_end *r)
{
    struct waiter_round_step st = { .what = WAITER_ROUND_ANSWER };
    bool handover = wl->state == WAITER_HANDING_OVER, woken = wl->woken;

    wl->woken = false;
    wl->gated = waiter_gated_after(wl, r, handover);
    if (wl->state == WAITER_CANCELLED) {
        /*
         * Granted or not, nobody takes it now: release it where it may
         * have landed, announced, and wake our own next head when done
         * (a grant made during a hand-over must not stall the next
         * waiter for the whole ttl).
         */
        st.abandon = true;
        return waiter_answer(st, WAITER_ANSWER_CANCELLED, 0);
    }
    if (r->stopping) {
        st.release = true;
        return waiter_answer(st, WAITER_ANSWER_SHUTDOWN, 0);
    }
    if (wl->broken) {
        /*
         * A BREAK deleted this token on some master while the round ran:
         * whatever the round says, it is no lock (its fence may be above
         * the BREAK's).  Nothing of it stays; try again, if it may wait.
         */
        wl->broken = false;
        st.release = st.retire = true;
        st.ghost = r->unanswered;
        if (WAITER_ONCE(wl) || env->now_us >= wl->deadline_us) {
            return waiter_answer(st, waiter_refusal(wl), 0);
        }
        waiter_waiting(wl, WAITER_TIMER_RETRY);
        st.what = WAITER_ROUND_RETRY;
        st.at_us = waiter_at(wl, env, env->draw(env->retry_delay_us));
        return st;
    }
    /* GRANTED has validity left (redlock.h; a late grant is LATE). */
    if (r->outcome == REDLOCK_GRANTED) {
        st.what = WAITER_ROUND_GRANT;
        return st;
    }
    /*
     * Not granted: release everywhere, a set may have landed late (and
     * announced where it deletes a mark: whoever it refused meanwhile
     * must hear that it is gone); the next try takes a new token.
     */
    st.release = st.retire = true;
    st.ghost = r->unanswered;
    if (r->outcome == REDLOCK_KIND) {
        return waiter_answer(st, WAITER_ANSWER_KIND, 0);
    }
    if (r->outcome == REDLOCK_BUSY && wl->kind == REDLOCK_PERMIT && r->free_slot >= 0
        && wl->hops < WAITER_PERMIT_HOPS) {
        /* Ours was taken, another one was free on the masters that answered: try it now. */
        wl->hops++;
        waiter_trying(wl);
        st.what = WAITER_ROUND_HOP;
        st.slot = (unsigned)r->free_slot;
        return st;
    }
    if (r->outcome == REDLOCK_NOQUORUM) {
        if (WAITER_ONCE(wl) || env->now_us >= wl->deadline_us) {
            return waiter_answer(st, WAITER_ANSWER_NOQUORUM, 0);
        }
        return waiter_backoff(wl, env, st);
    }
    wl->noquorum = false;       /* this attempt had a quorum of answers */
    wl->backoff_us = 0;
    if (wl->wait == WAITER_ONCE_BUSY) {
        return waiter_answer(st, WAITER_ANSWER_BUSY,
                             r->outcome == REDLOCK_BUSY ? r->ttl_ms : 0);
    }
    if (env->now_us >= wl->deadline_us) {
        return waiter_answer(st, WAITER_ANSWER_TIMEOUT, 0);
    }
    return waiter_retry(wl, env, r, woken, st);
}

struct waiter_give_up_step
waiter_give_up(struct waiter_life *head, enum redlock_kind hold_kind, bool stopping,
               bool remote, size_t turn_left, int64_t round_us, const struct waiter_env *env)
{
    struct waiter_give_up_step st = { .what = WAITER_GIVE_UP_RELEASE, .turn_left = turn_left };

    if (stopping || (head != NULL && (head->kind != hold_kind
                                      || head->kind == REDLOCK_SHARED))) {
        head = NULL;    /* nothing to hand over: released, and the head is woken */
    }
    if (head != NULL && remote && turn_left == 0) {
        /* End of this daemon's turn: let another daemon's head in first. */
        st.what = WAITER_GIVE_UP_YIELD;
        st.yield_until_us = env->now_us + round_us / 2 + env->draw(round_us / 2);
        return st;
    }
    if (turn_left > 0) {
        st.turn_left = turn_left - 1;
    }
    if (head != NULL && !WAITER_IN_ROUND(head)) {
        head->state = WAITER_HANDING_OVER;
        head->blocker = 0;
        st.what = WAITER_GIVE_UP_HAND_OVER;
    }
    return st;
}

size_t
waiter_turn(const struct waiter_life *granted, size_t nqueued)
{
    return nqueued > 0 && !WAITER_ONCE(granted) ? nqueued - 1 : nqueued;
}

void
waiter_broken(struct waiter_life *wl)
{
    if (WAITER_IN_ROUND(wl)) {
        wl->broken = true;
    }
}

bool
waiter_drain(struct waiter_life *wl, int64_t now_us)
{
    if (wl->state == WAITER_CANCELLED) {
        return false;
    }
    wl->deadline_us = now_us;
    return !WAITER_IN_ROUND(wl);
}

bool
waiter_cancel(struct waiter_life *wl)
{
    if (WAITER_IN_ROUND(wl)) {
        wl->state = WAITER_CANCELLED;
        return false;
    }
    return true;
}

const char *
waiter_state_name(enum waiter_state state)
{
    static const char *const names[] = {
        "queued", "waiting", "acquiring", "handing-over", "cancelled"
    };

    return (size_t)state < sizeof(names) / sizeof(names[0]) ? names[state] : "?";
}

const char *
waiter_timer_name(enum waiter_timer timer)
{
    static const char *const names[] = {
        "now", "retry", "jitter", "holder", "backoff", "yield", "subscribe"
    };

    return (size_t)timer < sizeof(names) / sizeof(names[0]) ? names[timer] : "?";
}
