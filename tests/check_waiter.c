/*
 * check_waiter.c: a pending LOCK's life (daemon/waiter.c) without Redis,
 * libevent or a clock: every transition of waiter.h's table, fed events
 * and a fixed time and random draw.
 *
 * The draw returns max * t_draw_num / t_draw_den (max by default), so a
 * test knows exactly where a jittered timer lands.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "daemon/waiter.h"
#include "tests/runner.h"

#define T_NOW_US    1000000000          /* an arbitrary CLOCK_MONOTONIC time */
#define T_RETRY_US  50000               /* lock.retry_delay_ms 50 */
#define T_TTL_MS    30000
#define T_WAIT_MS   10000               /* wait=10000 */

static int64_t t_draw_num = 1, t_draw_den = 1;

static int64_t
t_draw(int64_t max)
{
    return max * t_draw_num / t_draw_den;
}

static struct waiter_env
t_env(int64_t now_us)
{
    struct waiter_env env = { now_us, T_RETRY_US, t_draw };

    return env;
}

/* A waiter that queues (wait=T_WAIT_MS) for kind, started at T_NOW_US. */
static struct waiter_life
t_queued(enum redlock_kind kind)
{
    struct waiter_life wl;

    t_draw_num = t_draw_den = 1;
    waiter_life_init(&wl, kind, T_TTL_MS, T_WAIT_MS, false, false, T_NOW_US);
    return wl;
}

/* A round's end refused BUSY by holder id with ttl ms left, the name watched. */
static struct waiter_round_end
t_busy(uint64_t id, int64_t ttl_ms)
{
    struct waiter_round_end r = { .outcome = REDLOCK_BUSY, .watched = true, .free_slot = -1,
                                  .holder_id = id, .ttl_ms = ttl_ms };

    return r;
}

START_TEST(life_init_wait_modes)
{
    struct waiter_life wl;

    waiter_life_init(&wl, REDLOCK_EXCLUSIVE, T_TTL_MS, -1, false, false, T_NOW_US);
    ck_assert_int_eq(wl.wait, WAITER_QUEUES);
    ck_assert(wl.deadline_us == INT64_MAX);
    ck_assert_int_eq(wl.state, WAITER_QUEUED);
    waiter_life_init(&wl, REDLOCK_EXCLUSIVE, T_TTL_MS, 0, false, false, T_NOW_US);
    ck_assert_int_eq(wl.wait, WAITER_ONCE_TIMEOUT);
    ck_assert(wl.deadline_us == T_NOW_US);
    waiter_life_init(&wl, REDLOCK_EXCLUSIVE, T_TTL_MS, 5000, true, false, T_NOW_US);
    ck_assert_int_eq(wl.wait, WAITER_ONCE_BUSY);
    waiter_life_init(&wl, REDLOCK_EXCLUSIVE, T_TTL_MS, 5000, false, true, T_NOW_US);
    ck_assert_int_eq(wl.wait, WAITER_ONCE_TIMEOUT);     /* its input ended: one attempt */
    waiter_life_init(&wl, REDLOCK_EXCLUSIVE, T_TTL_MS, 5000, false, false, T_NOW_US);
    ck_assert(wl.deadline_us == T_NOW_US + 5000000);
}
END_TEST

START_TEST(room_by_kind)
{
    ck_assert(waiter_room(REDLOCK_EXCLUSIVE, 0, 0, 0));
    ck_assert(waiter_room(REDLOCK_EXCLUSIVE, 3, 0, 0));     /* behind shared holds: asks */
    ck_assert(!waiter_room(REDLOCK_EXCLUSIVE, 1, 1, 0));
    ck_assert(waiter_room(REDLOCK_SHARED, 2, 0, 0));
    ck_assert(!waiter_room(REDLOCK_SHARED, 1, 1, 0));
    ck_assert(waiter_room(REDLOCK_PERMIT, 2, 0, 3));
    ck_assert(!waiter_room(REDLOCK_PERMIT, 3, 0, 3));
}
END_TEST

START_TEST(kind_fits_by_family)
{
    ck_assert_int_eq(waiter_kind_fits(false, 0, 2, false, 0), WAITER_FITS);
    ck_assert_int_eq(waiter_kind_fits(true, 3, 1, true, 3), WAITER_FITS);
    ck_assert_int_eq(waiter_kind_fits(true, 3, 1, true, 4), WAITER_HELD_AS);
    ck_assert_int_eq(waiter_kind_fits(true, 3, 0, true, 4), WAITER_WAITED_AS);
    ck_assert_int_eq(waiter_kind_fits(false, 0, 1, true, 2), WAITER_HELD_AS);
    ck_assert_int_eq(waiter_kind_fits(true, 2, 0, false, 0), WAITER_WAITED_AS);
}
END_TEST

START_TEST(pick_permit_rotates_and_skips_held)
{
    unsigned char held[2] = { 0, 0 };
    unsigned next = 2;

    ck_assert_uint_eq(waiter_pick_permit(held, 4, &next), 2);
    ck_assert_uint_eq(next, 3);
    ck_assert_uint_eq(waiter_pick_permit(held, 4, &next), 3);
    ck_assert_uint_eq(next, 0);         /* round the limit */
    held[0] = 0x03;                     /* permits 0 and 1 held here */
    ck_assert_uint_eq(waiter_pick_permit(held, 4, &next), 2);
    ck_assert_uint_eq(next, 3);
    held[0] = 0x0f;                     /* every permit held here */
    ck_assert_uint_eq(waiter_pick_permit(held, 4, &next), 3);
    ck_assert_uint_eq(next, 3);
    held[0] = 0x00;
    held[1] = 0x01;                     /* permit 8 of 10 */
    next = 8;
    ck_assert_uint_eq(waiter_pick_permit(held, 10, &next), 9);
}
END_TEST

START_TEST(start_try_queue_refuse)
{
    struct waiter_life wl = t_queued(REDLOCK_EXCLUSIVE);

    ck_assert_int_eq(waiter_start(&wl, true, false), WAITER_START_TRY);
    ck_assert_int_eq(wl.state, WAITER_ACQUIRING);
    wl = t_queued(REDLOCK_EXCLUSIVE);
    ck_assert_int_eq(waiter_start(&wl, false, true), WAITER_START_QUEUE);
    ck_assert_int_eq(wl.state, WAITER_QUEUED);
    /* A shared TRYLOCK never overtakes an exclusive LOCK queued here... */
    waiter_life_init(&wl, REDLOCK_SHARED, T_TTL_MS, 0, true, false, T_NOW_US);
    ck_assert_int_eq(waiter_start(&wl, true, true), WAITER_START_REFUSE);
    ck_assert_int_eq(waiter_refusal(&wl), WAITER_ANSWER_BUSY);
    /* ...and with none queued, tries at once even when not the head. */
    ck_assert_int_eq(waiter_start(&wl, false, false), WAITER_START_TRY);
    /* A shared LOCK that queues waits its turn behind the exclusive one. */
    wl = t_queued(REDLOCK_SHARED);
    ck_assert_int_eq(waiter_start(&wl, false, true), WAITER_START_QUEUE);
}
END_TEST

START_TEST(wake_outside_and_inside_round)
{
    struct waiter_life wl = t_queued(REDLOCK_EXCLUSIVE);

    waiter_start(&wl, false, false);
    ck_assert(waiter_wake(&wl));
    ck_assert_int_eq(wl.state, WAITER_WAITING);
    ck_assert_int_eq(wl.timer, WAITER_TIMER_NOW);
    ck_assert(!wl.woken);
    wl = t_queued(REDLOCK_EXCLUSIVE);
    waiter_start(&wl, true, false);
    ck_assert(!waiter_wake(&wl));       /* in its round: remembered */
    ck_assert(wl.woken);
    ck_assert_int_eq(wl.state, WAITER_ACQUIRING);
}
END_TEST

START_TEST(timer_paths)
{
    struct waiter_life wl = t_queued(REDLOCK_EXCLUSIVE);
    struct waiter_env env = t_env(T_NOW_US + 1000);
    struct waiter_timer_step st;

    waiter_start(&wl, true, false);
    st = waiter_on_timer(&wl, &env, true, 0, 0, true);
    ck_assert_int_eq(st.what, WAITER_TIMER_NOTHING);    /* in a round: it decides */
    wl = t_queued(REDLOCK_EXCLUSIVE);
    waiter_start(&wl, false, false);
    /* Not the ready head: back to the queue. */
    st = waiter_on_timer(&wl, &env, false, 0, 0, true);
    ck_assert_int_eq(st.what, WAITER_TIMER_QUEUE);
    ck_assert_int_eq(wl.state, WAITER_QUEUED);
    /* Yielded: rearmed at the yield's end. */
    st = waiter_on_timer(&wl, &env, true, T_NOW_US + 200000, 0, true);
    ck_assert_int_eq(st.what, WAITER_TIMER_REARM);
    ck_assert(st.at_us == T_NOW_US + 200000);
    ck_assert_int_eq(wl.timer, WAITER_TIMER_YIELD);
    /* ...never past wait=. */
    st = waiter_on_timer(&wl, &env, true, T_NOW_US + 60000000, 0, true);
    ck_assert(st.at_us == wl.deadline_us);
    /* Subscription not confirmed: waits for it, until its deadline. */
    st = waiter_on_timer(&wl, &env, true, 0, T_NOW_US + 300000, false);
    ck_assert_int_eq(st.what, WAITER_TIMER_REARM);
    ck_assert(st.at_us == T_NOW_US + 300000);
    ck_assert_int_eq(wl.timer, WAITER_TIMER_SUBSCRIBE);
    ck_assert(!st.subscribed);
    /* Confirmed: tries, and the subscription is no longer waited for. */
    st = waiter_on_timer(&wl, &env, true, 0, T_NOW_US + 300000, true);
    ck_assert_int_eq(st.what, WAITER_TIMER_TRY);
    ck_assert(st.subscribed);
    ck_assert(!st.fallback);
    ck_assert_int_eq(wl.state, WAITER_ACQUIRING);
    /* Past its subscription deadline: tries without it. */
    wl = t_queued(REDLOCK_EXCLUSIVE);
    waiter_start(&wl, false, false);
    env.now_us = T_NOW_US + 400000;
    st = waiter_on_timer(&wl, &env, true, 0, T_NOW_US + 300000, false);
    ck_assert_int_eq(st.what, WAITER_TIMER_TRY);
    ck_assert(st.subscribed);
    /* Its wait= ran out. */
    wl = t_queued(REDLOCK_EXCLUSIVE);
    waiter_start(&wl, false, false);
    env.now_us = wl.deadline_us;
    st = waiter_on_timer(&wl, &env, true, 0, 0, true);
    ck_assert_int_eq(st.what, WAITER_TIMER_EXPIRE);
    ck_assert_int_eq(waiter_refusal(&wl), WAITER_ANSWER_TIMEOUT);
}
END_TEST

START_TEST(timer_after_holder_is_fallback)
{
    struct waiter_life wl = t_queued(REDLOCK_EXCLUSIVE);
    struct waiter_env env = t_env(T_NOW_US);
    struct waiter_round_end r = t_busy(7, 2000);
    struct waiter_round_step rs;
    struct waiter_timer_step st;

    waiter_start(&wl, true, false);
    rs = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(rs.what, WAITER_ROUND_RETRY);
    ck_assert_int_eq(wl.timer, WAITER_TIMER_HOLDER);
    ck_assert(rs.at_us == T_NOW_US + T_RETRY_US + 2000000);
    ck_assert(wl.blocker == 7);
    env.now_us = rs.at_us;
    st = waiter_on_timer(&wl, &env, true, 0, 0, true);
    ck_assert_int_eq(st.what, WAITER_TIMER_TRY);
    ck_assert(st.fallback);         /* no announcement came in time */
    ck_assert(wl.blocker == 0);
}
END_TEST

START_TEST(round_cancelled_stopping)
{
    struct waiter_life wl = t_queued(REDLOCK_EXCLUSIVE);
    struct waiter_env env = t_env(T_NOW_US);
    struct waiter_round_end r = { .outcome = REDLOCK_GRANTED, .watched = true, .free_slot = -1 };
    struct waiter_round_step st;

    waiter_start(&wl, true, false);
    ck_assert(!waiter_cancel(&wl));
    ck_assert_int_eq(wl.state, WAITER_CANCELLED);
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(st.what, WAITER_ROUND_ANSWER);
    ck_assert_int_eq(st.answer, WAITER_ANSWER_CANCELLED);
    ck_assert(st.abandon);          /* granted or not: nobody takes it */
    wl = t_queued(REDLOCK_EXCLUSIVE);
    waiter_start(&wl, true, false);
    r.stopping = true;
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(st.answer, WAITER_ANSWER_SHUTDOWN);
    ck_assert(st.release);
    ck_assert(!st.abandon);
    /* Outside a round, a close is answered at once. */
    wl = t_queued(REDLOCK_EXCLUSIVE);
    waiter_start(&wl, false, false);
    ck_assert(waiter_cancel(&wl));
}
END_TEST

START_TEST(round_broken_grant_is_no_lock)
{
    struct waiter_life wl = t_queued(REDLOCK_EXCLUSIVE);
    struct waiter_env env = t_env(T_NOW_US);
    struct waiter_round_end r = { .outcome = REDLOCK_GRANTED, .watched = true, .free_slot = -1,
                                  .unanswered = true };
    struct waiter_round_step st;

    waiter_start(&wl, true, false);
    waiter_broken(&wl);
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(st.what, WAITER_ROUND_RETRY);
    ck_assert(st.release && st.retire && st.ghost);
    ck_assert(!wl.broken);
    ck_assert(st.at_us == T_NOW_US + T_RETRY_US);
    /* A BREAK heard outside a round changes nothing: the next try takes a new token. */
    wl = t_queued(REDLOCK_EXCLUSIVE);
    waiter_start(&wl, false, false);
    waiter_broken(&wl);
    ck_assert(!wl.broken);
    /* One attempt: refused (TRYLOCK BUSY with no ttl). */
    waiter_life_init(&wl, REDLOCK_EXCLUSIVE, T_TTL_MS, 0, true, false, T_NOW_US);
    waiter_start(&wl, true, false);
    waiter_broken(&wl);
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(st.what, WAITER_ROUND_ANSWER);
    ck_assert_int_eq(st.answer, WAITER_ANSWER_BUSY);
    ck_assert(st.ttl_ms == 0);
}
END_TEST

START_TEST(round_granted_and_kind)
{
    struct waiter_life wl = t_queued(REDLOCK_EXCLUSIVE);
    struct waiter_env env = t_env(T_NOW_US);
    struct waiter_round_end r = { .outcome = REDLOCK_GRANTED, .watched = true, .free_slot = -1 };
    struct waiter_round_step st;

    waiter_start(&wl, true, false);
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(st.what, WAITER_ROUND_GRANT);
    ck_assert(!st.release && !st.retire);
    wl = t_queued(REDLOCK_EXCLUSIVE);
    waiter_start(&wl, true, false);
    r.outcome = REDLOCK_KIND;
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(st.answer, WAITER_ANSWER_KIND);
    ck_assert(st.release && st.retire && !st.ghost);
}
END_TEST

START_TEST(round_permit_hops_then_waits)
{
    struct waiter_life wl = t_queued(REDLOCK_PERMIT);
    struct waiter_env env = t_env(T_NOW_US);
    struct waiter_round_end r = t_busy(0, 1000);
    struct waiter_round_step st;
    unsigned i;

    waiter_start(&wl, true, false);
    r.free_slot = 2;
    for (i = 0; i < WAITER_PERMIT_HOPS; i++) {
        st = waiter_on_round(&wl, &env, &r);
        ck_assert_int_eq(st.what, WAITER_ROUND_HOP);
        ck_assert_uint_eq(st.slot, 2);
        ck_assert(st.retire);
        ck_assert_int_eq(wl.state, WAITER_ACQUIRING);
    }
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(st.what, WAITER_ROUND_RETRY);   /* hopped enough: waits */
    ck_assert_int_eq(wl.timer, WAITER_TIMER_HOLDER);
    ck_assert(wl.blocker == 0);     /* a permit: any holder leaving lets it in */
}
END_TEST

START_TEST(round_noquorum_backs_off)
{
    struct waiter_life wl = t_queued(REDLOCK_EXCLUSIVE);
    struct waiter_env env = t_env(T_NOW_US);
    struct waiter_round_end r = { .outcome = REDLOCK_NOQUORUM, .watched = true, .free_slot = -1 };
    struct waiter_round_step st;
    int64_t expect = T_RETRY_US;
    int i;

    t_draw_num = 0;     /* the smallest draw: half the backoff */
    waiter_start(&wl, true, false);
    for (i = 0; i < 8; i++) {
        st = waiter_on_round(&wl, &env, &r);
        ck_assert_int_eq(st.what, WAITER_ROUND_RETRY);
        ck_assert(st.keep_noquorum);
        ck_assert(wl.noquorum);
        ck_assert_int_eq(wl.timer, WAITER_TIMER_BACKOFF);
        ck_assert(wl.backoff_us == expect);
        ck_assert(st.at_us == T_NOW_US + expect / 2);
        expect = expect * 2 > WAITER_BACKOFF_MAX_US ? WAITER_BACKOFF_MAX_US : expect * 2;
        waiter_on_timer(&wl, &env, true, 0, 0, true);
    }
    /* Its deadline: NOQUORUM, with the text kept. */
    ck_assert_int_eq(waiter_refusal(&wl), WAITER_ANSWER_NOQUORUM);
    /* A refusal with a quorum of answers clears it. */
    r = t_busy(3, 0);
    st = waiter_on_round(&wl, &env, &r);
    ck_assert(!wl.noquorum);
    ck_assert(wl.backoff_us == 0);
    ck_assert_int_eq(waiter_refusal(&wl), WAITER_ANSWER_TIMEOUT);
    /* One attempt: NOQUORUM at once. */
    waiter_life_init(&wl, REDLOCK_EXCLUSIVE, T_TTL_MS, 0, false, false, T_NOW_US);
    waiter_start(&wl, true, false);
    r.outcome = REDLOCK_NOQUORUM;
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(st.answer, WAITER_ANSWER_NOQUORUM);
}
END_TEST

START_TEST(round_refusals_of_one_attempt)
{
    struct waiter_life wl;
    struct waiter_env env = t_env(T_NOW_US);
    struct waiter_round_end r = t_busy(3, 1234);
    struct waiter_round_step st;

    waiter_life_init(&wl, REDLOCK_EXCLUSIVE, T_TTL_MS, 0, true, false, T_NOW_US);
    waiter_start(&wl, true, false);
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(st.answer, WAITER_ANSWER_BUSY);
    ck_assert(st.ttl_ms == 1234);
    waiter_life_init(&wl, REDLOCK_EXCLUSIVE, T_TTL_MS, 0, false, false, T_NOW_US);
    waiter_start(&wl, true, false);
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(st.answer, WAITER_ANSWER_TIMEOUT);
    /* A queued one past its deadline. */
    wl = t_queued(REDLOCK_EXCLUSIVE);
    waiter_start(&wl, true, false);
    env.now_us = wl.deadline_us;
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(st.answer, WAITER_ANSWER_TIMEOUT);
}
END_TEST

START_TEST(round_retry_reasons)
{
    struct waiter_life wl = t_queued(REDLOCK_EXCLUSIVE);
    struct waiter_env env = t_env(T_NOW_US);
    struct waiter_round_end r = t_busy(9, 2000);
    struct waiter_round_step st;

    /* First refusal of a name not watched yet: subscribe and try at once. */
    waiter_start(&wl, true, false);
    r.watched = false;
    st = waiter_on_round(&wl, &env, &r);
    ck_assert(st.watch);
    ck_assert(st.at_us == T_NOW_US);
    ck_assert_int_eq(wl.timer, WAITER_TIMER_NOW);
    r.watched = true;
    /* A split vote: the jitter, whatever was heard. */
    waiter_on_timer(&wl, &env, true, 0, 0, true);
    wl.woken = true;
    wl.woken_id = 9;
    r.split = true;
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(wl.timer, WAITER_TIMER_JITTER);
    ck_assert(st.at_us == T_NOW_US + T_RETRY_US);
    ck_assert(!wl.woken);
    r.split = false;
    /* Woken by the holder that refused it: at once. */
    waiter_on_timer(&wl, &env, true, 0, 0, true);
    wl.woken = true;
    wl.woken_id = 9;
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(wl.timer, WAITER_TIMER_NOW);
    ck_assert(st.at_us == T_NOW_US);
    /* Woken by another token: the jitter. */
    waiter_on_timer(&wl, &env, true, 0, 0, true);
    wl.woken = true;
    wl.woken_id = 4;
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(wl.timer, WAITER_TIMER_JITTER);
    /* A shared waiter woken by anyone: at once. */
    wl = t_queued(REDLOCK_SHARED);
    waiter_start(&wl, true, false);
    wl.woken = true;
    wl.woken_id = 4;
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(wl.timer, WAITER_TIMER_NOW);
    /* No ttl known (LATE, or a key without expiry): a plain retry. */
    waiter_on_timer(&wl, &env, true, 0, 0, true);
    r.outcome = REDLOCK_LATE;
    st = waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(wl.timer, WAITER_TIMER_RETRY);
    ck_assert(st.at_us == T_NOW_US + T_RETRY_US);
}
END_TEST

START_TEST(round_gate_caps_delay)
{
    struct waiter_life wl = t_queued(REDLOCK_EXCLUSIVE);
    struct waiter_env env = t_env(T_NOW_US);
    struct waiter_round_end r = t_busy(9, 60000);
    struct waiter_round_step st;

    wl.deadline_us = INT64_MAX;     /* wait=inf: only the gate caps the delay */
    waiter_start(&wl, true, false);
    r.gated = true;
    st = waiter_on_round(&wl, &env, &r);
    ck_assert(wl.gated);
    ck_assert(st.at_us == T_NOW_US + T_TTL_MS * 1000 / 2);  /* renewed before it lapses */
    /* An uncounted master may hold the gate when readers refused us. */
    wl = t_queued(REDLOCK_EXCLUSIVE);
    waiter_start(&wl, true, false);
    r = t_busy(9, 100);
    r.uncounted = true;
    r.readers = true;
    waiter_on_round(&wl, &env, &r);
    ck_assert(wl.gated);
    /* Not for a hand-over's swap, nor for one attempt. */
    wl = t_queued(REDLOCK_EXCLUSIVE);
    waiter_start(&wl, false, false);
    ck_assert_int_eq(waiter_give_up(&wl, REDLOCK_EXCLUSIVE, false, false, 0, 1000000,
                                    &env).what, WAITER_GIVE_UP_HAND_OVER);
    waiter_on_round(&wl, &env, &r);
    ck_assert(!wl.gated);
    waiter_life_init(&wl, REDLOCK_EXCLUSIVE, T_TTL_MS, 0, false, false, T_NOW_US);
    waiter_start(&wl, true, false);
    waiter_on_round(&wl, &env, &r);
    ck_assert(!wl.gated);
}
END_TEST

START_TEST(release_yield_and_own)
{
    struct waiter_life wl = t_queued(REDLOCK_EXCLUSIVE);
    struct waiter_env env = t_env(T_NOW_US);
    struct waiter_release rel = { .yielding = true, .own_yield = true, .id = 5 };
    struct waiter_release_step st;

    waiter_start(&wl, false, false);
    st = waiter_on_release(&wl, &env, &rel);
    ck_assert_int_eq(st.what, WAITER_RELEASE_IGNORE);
    ck_assert(!st.end_yield);
    rel.own_yield = false;          /* another daemon's turn ended */
    rel.own_retired = true;
    st = waiter_on_release(&wl, &env, &rel);
    ck_assert_int_eq(st.what, WAITER_RELEASE_IGNORE);
    ck_assert(st.end_yield);
    rel.own_retired = false;
    st = waiter_on_release(&wl, &env, &rel);
    ck_assert_int_eq(st.what, WAITER_RELEASE_WAKE);
    ck_assert(st.end_yield && st.first_copy);
    ck_assert(wl.woken_id == 5);
    /* Another master's copy of the same release: the wake-up is pending. */
    rel.yielding = false;
    rel.repeat = true;
    st = waiter_on_release(&wl, &env, &rel);
    ck_assert_int_eq(st.what, WAITER_RELEASE_IGNORE);
    ck_assert(!st.first_copy);
    /* ...but during its round, it makes the round's refusal retry at once. */
    waiter_on_timer(&wl, &env, true, 0, 0, true);
    ck_assert_int_eq(wl.state, WAITER_ACQUIRING);
    st = waiter_on_release(&wl, &env, &rel);
    ck_assert(wl.woken);
}
END_TEST

START_TEST(release_jitter_and_holder)
{
    struct waiter_life wl = t_queued(REDLOCK_EXCLUSIVE);
    struct waiter_env env = t_env(T_NOW_US);
    struct waiter_round_end r = t_busy(9, 2000);
    struct waiter_release rel = { .id = 4 };
    struct waiter_release_step st;

    waiter_start(&wl, true, false);
    waiter_on_round(&wl, &env, &r);
    ck_assert_int_eq(wl.timer, WAITER_TIMER_HOLDER);
    /* Another token: within the jitter, not at once. */
    st = waiter_on_release(&wl, &env, &rel);
    ck_assert_int_eq(st.what, WAITER_RELEASE_REARM);
    ck_assert(st.at_us == T_NOW_US + T_RETRY_US);
    ck_assert_int_eq(wl.timer, WAITER_TIMER_JITTER);
    /* In the jitter, others are ignored... */
    rel.id = 6;
    st = waiter_on_release(&wl, &env, &rel);
    ck_assert_int_eq(st.what, WAITER_RELEASE_IGNORE);
    ck_assert(!waiter_on_subscribed(&wl));
    /* ...its blocker's release wakes it. */
    rel.id = 9;
    st = waiter_on_release(&wl, &env, &rel);
    ck_assert_int_eq(st.what, WAITER_RELEASE_WAKE);
    ck_assert_int_eq(wl.timer, WAITER_TIMER_NOW);
    /* Waiting for its holder, the holder's own release wakes it at once. */
    wl = t_queued(REDLOCK_EXCLUSIVE);
    waiter_start(&wl, true, false);
    waiter_on_round(&wl, &env, &r);
    st = waiter_on_release(&wl, &env, &rel);
    ck_assert_int_eq(st.what, WAITER_RELEASE_WAKE);
    /* A repeat while waiting for the holder still counts (its first copy was
     * another token's clean-up). */
    wl = t_queued(REDLOCK_EXCLUSIVE);
    waiter_start(&wl, true, false);
    waiter_on_round(&wl, &env, &r);
    rel.repeat = true;
    st = waiter_on_release(&wl, &env, &rel);
    ck_assert_int_eq(st.what, WAITER_RELEASE_WAKE);
}
END_TEST

START_TEST(subscribed_wakes)
{
    struct waiter_life wl = t_queued(REDLOCK_EXCLUSIVE);

    waiter_start(&wl, false, false);
    ck_assert(waiter_on_subscribed(&wl));
    ck_assert_int_eq(wl.timer, WAITER_TIMER_NOW);
}
END_TEST

START_TEST(give_up_turns)
{
    struct waiter_life head = t_queued(REDLOCK_EXCLUSIVE);
    struct waiter_env env = t_env(T_NOW_US);
    struct waiter_give_up_step st;

    waiter_start(&head, false, false);
    /* No head: release. */
    st = waiter_give_up(NULL, REDLOCK_EXCLUSIVE, false, false, 2, 1000000, &env);
    ck_assert_int_eq(st.what, WAITER_GIVE_UP_RELEASE);
    ck_assert_uint_eq(st.turn_left, 1);
    /* Another kind, a shared head, or stopping: release. */
    st = waiter_give_up(&head, REDLOCK_PERMIT, false, false, 0, 1000000, &env);
    ck_assert_int_eq(st.what, WAITER_GIVE_UP_RELEASE);
    st = waiter_give_up(&head, REDLOCK_EXCLUSIVE, true, false, 0, 1000000, &env);
    ck_assert_int_eq(st.what, WAITER_GIVE_UP_RELEASE);
    ck_assert_int_eq(head.state, WAITER_QUEUED);
    /* End of the turn with other daemons waiting: yield for about half a round. */
    t_draw_num = 1;
    t_draw_den = 2;
    st = waiter_give_up(&head, REDLOCK_EXCLUSIVE, false, true, 0, 1000000, &env);
    ck_assert_int_eq(st.what, WAITER_GIVE_UP_YIELD);
    ck_assert(st.yield_until_us == T_NOW_US + 500000 + 250000);
    ck_assert_int_eq(head.state, WAITER_QUEUED);
    /* A turn left: hand over, one fewer left. */
    st = waiter_give_up(&head, REDLOCK_EXCLUSIVE, false, true, 2, 1000000, &env);
    ck_assert_int_eq(st.what, WAITER_GIVE_UP_HAND_OVER);
    ck_assert_uint_eq(st.turn_left, 1);
    ck_assert_int_eq(head.state, WAITER_HANDING_OVER);
    /* The head in a round: released, the turn still counted. */
    st = waiter_give_up(&head, REDLOCK_EXCLUSIVE, false, false, 1, 1000000, &env);
    ck_assert_int_eq(st.what, WAITER_GIVE_UP_RELEASE);
    ck_assert_uint_eq(st.turn_left, 0);
    /* A shared head is never handed a hold. */
    head = t_queued(REDLOCK_SHARED);
    waiter_start(&head, false, false);
    st = waiter_give_up(&head, REDLOCK_SHARED, false, false, 0, 1000000, &env);
    ck_assert_int_eq(st.what, WAITER_GIVE_UP_RELEASE);
    /* A turn: one hand-over per LOCK queued behind the grantee. */
    ck_assert_uint_eq(waiter_turn(&head, 3), 2);
    ck_assert_uint_eq(waiter_turn(&head, 0), 0);
    waiter_life_init(&head, REDLOCK_EXCLUSIVE, T_TTL_MS, 0, false, false, T_NOW_US);
    ck_assert_uint_eq(waiter_turn(&head, 3), 3);
}
END_TEST

START_TEST(drain_pulls_deadline)
{
    struct waiter_life wl = t_queued(REDLOCK_EXCLUSIVE);

    waiter_start(&wl, false, false);
    ck_assert(waiter_drain(&wl, T_NOW_US + 5));
    ck_assert(wl.deadline_us == T_NOW_US + 5);
    wl = t_queued(REDLOCK_EXCLUSIVE);
    waiter_start(&wl, true, false);
    ck_assert(!waiter_drain(&wl, T_NOW_US + 5));     /* its round's end answers it */
    ck_assert(wl.deadline_us == T_NOW_US + 5);
    waiter_cancel(&wl);
    ck_assert(!waiter_drain(&wl, T_NOW_US + 9));
    ck_assert(wl.deadline_us == T_NOW_US + 5);
    ck_assert_str_eq(waiter_state_name(wl.state), "cancelled");
    ck_assert_str_eq(waiter_timer_name(WAITER_TIMER_HOLDER), "holder");
}
END_TEST

static Suite *
waiter_suite(void)
{
    Suite *s = suite_create("waiter");
    TCase *tc = tcase_create("waiter");

    tcase_add_test(tc, life_init_wait_modes);
    tcase_add_test(tc, room_by_kind);
    tcase_add_test(tc, kind_fits_by_family);
    tcase_add_test(tc, pick_permit_rotates_and_skips_held);
    tcase_add_test(tc, start_try_queue_refuse);
    tcase_add_test(tc, wake_outside_and_inside_round);
    tcase_add_test(tc, timer_paths);
    tcase_add_test(tc, timer_after_holder_is_fallback);
    tcase_add_test(tc, round_cancelled_stopping);
    tcase_add_test(tc, round_broken_grant_is_no_lock);
    tcase_add_test(tc, round_granted_and_kind);
    tcase_add_test(tc, round_permit_hops_then_waits);
    tcase_add_test(tc, round_noquorum_backs_off);
    tcase_add_test(tc, round_refusals_of_one_attempt);
    tcase_add_test(tc, round_retry_reasons);
    tcase_add_test(tc, round_gate_caps_delay);
    tcase_add_test(tc, release_yield_and_own);
    tcase_add_test(tc, release_jitter_and_holder);
    tcase_add_test(tc, subscribed_wakes);
    tcase_add_test(tc, give_up_turns);
    tcase_add_test(tc, drain_pulls_deadline);
    suite_add_tcase(s, tc);
    return s;
}

const struct runner runner_main = { "check_waiter", waiter_suite, NULL, NULL };
