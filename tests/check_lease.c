/*
 * check_lease.c: the lease state machine (daemon/lease.c) without Redis.
 *
 * The suite links every daemon object and replaces the Redlock engine's
 * I/O with GNU ld's --wrap (see the Makefile): redlock_extend only
 * records the batch and its callback, so that a test can answer it
 * later with a crafted struct redlock_extend_result; redlock_restore and
 * redlock_expire_at only record their calls; master_count is 5.  The
 * verdicts themselves come from the real redlock_renewal_verdict().  A
 * real libevent base drives the lease module's timer.
 *
 * Times: ttl 300 ms, so renewal at ttl/3 = 100 ms, drift 0.01 * 300 ms +
 * 2 ms = 5 ms, validity start + 295 ms, guard ttl/5 = 60 ms: a lease
 * without a confirmed renewal is reported lost at start + 235 ms.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "daemon/lease.h"
#include "daemon/log.h"
#include "daemon/redlock.h"
#include "daemon/stats.h"
#include "daemon/util.h"
#include "tests/runner.h"

#define T_MASTERS       5
#define T_TTL_MS        300
#define T_DRIFT_US      5000                    /* 300 ms * 0.01 + 2 ms */
#define T_VALIDITY_US   (T_TTL_MS * 1000 - T_DRIFT_US)
#define T_RENEW_US      (T_TTL_MS * 1000 / 3)   /* 100 ms */
#define T_GUARD_US      (T_TTL_MS * 200)        /* ttl/5: 60 ms */
#define T_WINDOW_US     20000                   /* lease.c renews up to 20 ms early */
#define T_MAX_CALLS     32
#define T_MAX_ITEMS     16
#define T_KEY_MAX       64

static const char t_token[] = "0123456789abcdef0123456789abcdef";

/* One captured redlock_extend() call. */
struct t_extend {
    size_t              n;                          /* items */
    char                key[T_MAX_ITEMS][T_KEY_MAX];/* copies of the keys */
    size_t              key_len[T_MAX_ITEMS];       /* their lengths */
    char                token[T_MAX_ITEMS][UTIL_TOKEN_HEX + 1]; /* copies of the tokens */
    int64_t             ttl_ms[T_MAX_ITEMS];        /* ttls asked for */
    redlock_extend_fn   cb;                         /* the lease module's callback */
    void               *arg;                        /* and its argument */
    int64_t             at_us;                      /* when it was called */
    bool                answered;                   /* the test called cb */
};

/* One captured redlock_restore() item. */
struct t_restore {
    char     key[T_KEY_MAX];    /* copy of the key */
    char     token[UTIL_TOKEN_HEX + 1]; /* copy of the token */
    int64_t  validity_end_us;   /* validity end asked for */
    uint16_t masters;           /* mask asked for */
};

/* One captured redlock_expire_at() call. */
struct t_expire {
    char    key[T_KEY_MAX];     /* copy of the key */
    char    token[UTIL_TOKEN_HEX + 1]; /* copy of the token */
    int64_t validity_end_us;    /* validity end asked for */
};

static struct event_base *t_base;
static struct t_extend    t_extends[T_MAX_CALLS];
static int                t_nextend;          /* redlock_extend calls that succeeded */
static int                t_extend_attempts;  /* including failed ones */
static bool               t_extend_fail;      /* make redlock_extend return -1 */
static int64_t            t_extend_fail_us;   /* when it last did, monotonic us */
static struct t_restore   t_restores[T_MAX_CALLS];
static int                t_nrestore_items;   /* items over every restore call */
static int                t_nrestore_calls;   /* redlock_restore calls */
static struct t_expire    t_expires[T_MAX_CALLS];
static int                t_nexpire;          /* redlock_expire_at calls */
static struct lease      *t_lost[T_MAX_CALLS];/* leases given to the lost callback */
static enum lease_state   t_lost_state[T_MAX_CALLS];   /* their state then */
static enum lease_reason  t_lost_reason[T_MAX_CALLS];  /* their reason then */
static int                t_nlost;            /* lost callbacks */
static bool               t_free_in_lost;     /* the lost callback frees the lease */
static struct lease      *t_end_in_lost;      /* the lost callback ends this lease */
static struct lease       t_leases[8];        /* leases of the current test */

int __wrap_redlock_extend(const struct redlock_extend_item *items, size_t n,
                          redlock_extend_fn cb, void *arg);
int __wrap_redlock_restore(const struct redlock_restore_item *items, size_t n);
int __wrap_redlock_expire_at(const struct redlock_rec *rec, const char *token,
                             int64_t validity_end_us);
size_t __wrap_master_count(void);

int
__wrap_redlock_extend(const struct redlock_extend_item *items, size_t n,
                      redlock_extend_fn cb, void *arg)
{
    struct t_extend *e;
    size_t i;

    t_extend_attempts++;
    if (t_extend_fail) {
        t_extend_fail_us = util_now_us();
        return -1;
    }
    ck_assert_int_lt(t_nextend, T_MAX_CALLS);
    ck_assert_uint_le(n, T_MAX_ITEMS);
    e = &t_extends[t_nextend++];
    memset(e, 0, sizeof(*e));
    e->n = n;
    for (i = 0; i < n; i++) {
        ck_assert_uint_lt(items[i].rec->base_len, T_KEY_MAX);
        memcpy(e->key[i], items[i].rec->base, items[i].rec->base_len);
        e->key_len[i] = items[i].rec->base_len;
        memcpy(e->token[i], items[i].token, UTIL_TOKEN_HEX);
        e->ttl_ms[i] = items[i].ttl_ms;
    }
    e->cb = cb;
    e->arg = arg;
    e->at_us = util_now_us();
    return 0;
}

int
__wrap_redlock_restore(const struct redlock_restore_item *items, size_t n)
{
    size_t i;

    t_nrestore_calls++;
    for (i = 0; i < n; i++) {
        struct t_restore *r;

        ck_assert_int_lt(t_nrestore_items, T_MAX_CALLS);
        r = &t_restores[t_nrestore_items++];
        memset(r, 0, sizeof(*r));
        ck_assert_uint_lt(items[i].rec->base_len, T_KEY_MAX);
        memcpy(r->key, items[i].rec->base, items[i].rec->base_len);
        memcpy(r->token, items[i].token, UTIL_TOKEN_HEX);
        r->validity_end_us = items[i].validity_end_us;
        r->masters = items[i].masters;
    }
    return 0;
}

int
__wrap_redlock_expire_at(const struct redlock_rec *rec, const char *token,
                         int64_t validity_end_us)
{
    struct t_expire *x;

    ck_assert_int_lt(t_nexpire, T_MAX_CALLS);
    x = &t_expires[t_nexpire++];
    memset(x, 0, sizeof(*x));
    ck_assert_uint_lt(rec->base_len, T_KEY_MAX);
    memcpy(x->key, rec->base, rec->base_len);
    memcpy(x->token, token, UTIL_TOKEN_HEX);
    x->validity_end_us = validity_end_us;
    return 0;
}

size_t
__wrap_master_count(void)
{
    return T_MASTERS;
}

static void
t_lost_cb(struct lease *l)
{
    ck_assert_int_lt(t_nlost, T_MAX_CALLS);
    t_lost[t_nlost] = l;
    t_lost_state[t_nlost] = l->state;
    t_lost_reason[t_nlost] = l->reason;
    t_nlost++;
    if (t_end_in_lost != NULL) {
        lease_end(t_end_in_lost);
        t_end_in_lost = NULL;
    }
    if (t_free_in_lost) {
        free(l);
    }
}

static void
t_setup(void)
{
    size_t i;

    t_base = event_base_new();
    ck_assert_ptr_nonnull(t_base);
    log_set_level(LOG_ERROR);
    redlock_set_drift(0.01);
    lease_init(t_base, t_lost_cb);
    memset(&stats, 0, sizeof(stats));
    memset(t_leases, 0, sizeof(t_leases));
    for (i = 0; i < sizeof(t_leases) / sizeof(t_leases[0]); i++) {
        t_leases[i].state = LEASE_RELEASED;     /* not started: lease_end ignores it */
    }
    t_nextend = t_extend_attempts = 0;
    t_extend_fail = false;
    t_nrestore_items = t_nrestore_calls = 0;
    t_nexpire = 0;
    t_nlost = 0;
    t_free_in_lost = false;
    t_end_in_lost = NULL;
}

/* End every lease, let each pending batch see its slots empty (it is freed), stop. */
static void
t_teardown(void)
{
    struct redlock_extend_result res;
    uint8_t zero8[T_MAX_ITEMS] = { 0 };
    uint16_t zero16[T_MAX_ITEMS] = { 0 };
    size_t i;
    int k;

    for (i = 0; i < sizeof(t_leases) / sizeof(t_leases[0]); i++) {
        lease_end(&t_leases[i]);
    }
    memset(&res, 0, sizeof(res));
    res.confirmed = res.denied = zero8;
    res.absent = zero16;
    res.error = "";
    for (k = 0; k < t_nextend; k++) {
        if (!t_extends[k].answered) {
            t_extends[k].answered = true;
            res.n = t_extends[k].n;
            t_extends[k].cb(&res, t_extends[k].arg);
        }
    }
    lease_stop();
    event_base_free(t_base);
    t_base = NULL;
}

static void
t_wake_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

/*
 * Run the event loop until *counter reaches target or ms pass.  A timer
 * at the deadline bounds each blocking turn.  Returns whether it did.
 */
static bool
t_run_until(const int *counter, int target, int64_t ms)
{
    int64_t deadline = util_now_us() + ms * 1000;
    struct event *wake = evtimer_new(t_base, t_wake_cb, NULL);
    struct timeval tv;

    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    evtimer_add(wake, &tv);
    while ((counter == NULL || *counter < target) && util_now_us() < deadline) {
        event_base_loop(t_base, EVLOOP_ONCE);
    }
    event_free(wake);
    return counter == NULL || *counter >= target;
}

/* Run the event loop for ms. */
static void
t_run_for(int64_t ms)
{
    t_run_until(NULL, 0, ms);
}

/* Wait without running the event loop until now >= when_us. */
static void
t_sleep_until(int64_t when_us)
{
    int64_t now;

    while ((now = util_now_us()) < when_us) {
        struct timespec ts;
        int64_t d = when_us - now;

        ts.tv_sec = (time_t)(d / 1000000);
        ts.tv_nsec = (long)(d % 1000000) * 1000;
        nanosleep(&ts, NULL);
    }
}

/*
 * An exclusive record of key (a string that lives for the whole test),
 * in a ring of slots so that several may be in use at once.
 */
static const struct redlock_rec *
t_rec(const char *key)
{
    static struct redlock_rec recs[16];
    static size_t next;
    struct redlock_rec *r = &recs[next++ % 16];

    r->base = key;
    r->base_len = strlen(key);
    r->kind = REDLOCK_EXCLUSIVE;
    r->slot = 0;
    r->limit = 0;
    return r;
}

/* Start t_leases[i] with key, ttl T_TTL_MS, from a round that began at start_us. */
static struct lease *
t_start(size_t i, const char *key, int64_t start_us)
{
    struct lease *l = &t_leases[i];

    lease_start(l, t_rec(key), t_token, T_TTL_MS, 7, start_us,
                start_us + T_VALIDITY_US);
    return l;
}

/* Slot of key in a captured batch, or -1. */
static int
t_slot(const struct t_extend *e, const char *key)
{
    size_t i;

    for (i = 0; i < e->n; i++) {
        if (e->key_len[i] == strlen(key) && memcmp(e->key[i], key, e->key_len[i]) == 0) {
            return (int)i;
        }
    }
    return -1;
}

/*
 * Answer captured batch k: per slot, confirmed, denied and absent (arrays
 * of the batch's size), the round from start_us to end_us.
 */
static void
t_answer(int k, const uint8_t *confirmed, const uint8_t *denied, const uint16_t *absent,
         int64_t start_us, int64_t end_us)
{
    struct redlock_extend_result res;
    struct t_extend *e = &t_extends[k];

    ck_assert_int_lt(k, t_nextend);
    ck_assert(!e->answered);
    memset(&res, 0, sizeof(res));
    res.n = e->n;
    res.confirmed = confirmed;
    res.denied = denied;
    res.absent = absent;
    res.answered = T_MASTERS;
    res.start_us = start_us;
    res.end_us = end_us;
    res.error = "";
    e->answered = true;
    e->cb(&res, e->arg);
}

/* Answer a one-item batch k with the same counts for its slot. */
static void
t_answer1(int k, uint8_t confirmed, uint8_t denied, uint16_t absent, int64_t start_us,
          int64_t end_us)
{
    ck_assert_uint_eq(t_extends[k].n, 1);
    t_answer(k, &confirmed, &denied, &absent, start_us, end_us);
}

/* Start one lease now and wait for its first renewal batch (index 0). */
static struct lease *
t_start_renewing(int64_t *start_us)
{
    struct lease *l;

    *start_us = util_now_us();
    l = t_start(0, "lk:a", *start_us);
    ck_assert(t_run_until(&t_nextend, 1, 2000));
    ck_assert_int_eq(l->state, LEASE_RENEWING);
    return l;
}

START_TEST(test_start_held)
{
    int64_t now = util_now_us();
    struct lease *a = t_start(0, "lk:a", now);
    struct lease *b;

    ck_assert_int_eq(a->state, LEASE_HELD);
    ck_assert_uint_eq(lease_count(), 1);
    ck_assert(memcmp(a->rec.base, "lk:a", 4) == 0);
    ck_assert_uint_eq(a->rec.base_len, 4);
    ck_assert_int_eq(a->rec.kind, REDLOCK_EXCLUSIVE);
    ck_assert_str_eq(a->token, t_token);
    ck_assert_int_eq(a->ttl_ms, T_TTL_MS);
    ck_assert_int_eq(a->fence, 7);
    ck_assert_int_eq(a->validity_end_us, now + T_VALIDITY_US);
    ck_assert_int_eq(a->renew_at_us, now + T_RENEW_US);
    ck_assert_ptr_null(a->batch);
    ck_assert(lease_valid(a, now));
    ck_assert(lease_valid(a, now + T_VALIDITY_US - T_GUARD_US - 1));
    ck_assert(!lease_valid(a, now + T_VALIDITY_US - T_GUARD_US));
    ck_assert_int_eq(lease_validity_left_ms(a, now), T_VALIDITY_US / 1000);
    ck_assert_int_eq(lease_validity_left_ms(a, now + T_VALIDITY_US + 1), 0);
    b = t_start(1, "lk:b", now);
    ck_assert_int_eq(b->state, LEASE_HELD);
    ck_assert_uint_eq(lease_count(), 2);
    /* Nothing is renewed before ttl/3 less the batching window. */
    t_run_for(40);
    ck_assert_int_eq(t_extend_attempts, 0);
    ck_assert_int_eq(a->state, LEASE_HELD);
    ck_assert_int_eq(t_nlost, 0);
}
END_TEST

START_TEST(test_timer_renewing)
{
    int64_t start;
    struct lease *l = t_start_renewing(&start);
    struct t_extend *e = &t_extends[0];

    ck_assert_int_eq(t_nextend, 1);
    ck_assert_uint_eq(e->n, 1);
    ck_assert_uint_eq(e->key_len[0], 4);
    ck_assert_str_eq(e->key[0], "lk:a");
    ck_assert_str_eq(e->token[0], t_token);
    ck_assert_int_eq(e->ttl_ms[0], T_TTL_MS);
    ck_assert_int_ge(e->at_us, start + T_RENEW_US - T_WINDOW_US);
    ck_assert_ptr_nonnull(l->batch);
    ck_assert_uint_eq(lease_count(), 1);
    ck_assert(lease_valid(l, util_now_us()));
    /* A lease in flight is not sent again. */
    t_run_for(30);
    ck_assert_int_eq(t_nextend, 1);
    ck_assert_int_eq(l->state, LEASE_RENEWING);
}
END_TEST

START_TEST(test_renewed)
{
    int64_t start, t1;
    struct lease *l = t_start_renewing(&start);

    t1 = t_extends[0].at_us;
    t_answer1(0, 3, 0, 0, t1, t1 + 1000);
    ck_assert_int_eq(l->state, LEASE_HELD);
    ck_assert_int_eq(l->validity_end_us, t1 + T_TTL_MS * 1000 - T_DRIFT_US);
    ck_assert_int_eq(l->renew_at_us, t1 + T_RENEW_US);
    ck_assert_ptr_null(l->batch);
    ck_assert(!l->quorum_trouble);
    ck_assert_uint_eq(stats.renewals_ok, 1);
    ck_assert_uint_eq(stats.renewals_failed, 0);
    ck_assert_int_eq(t_nrestore_calls, 0);
    ck_assert_int_eq(t_nexpire, 0);
    ck_assert_int_eq(t_nlost, 0);
    ck_assert_uint_eq(lease_count(), 1);
    /* The next renewal comes ttl/3 after the confirmed round began. */
    ck_assert(t_run_until(&t_nextend, 2, 2000));
    ck_assert_int_ge(t_extends[1].at_us, t1 + T_RENEW_US - T_WINDOW_US);
    ck_assert_int_eq(l->state, LEASE_RENEWING);
    t_answer1(1, 5, 0, 0, t_extends[1].at_us, t_extends[1].at_us + 500);
    ck_assert_int_eq(l->state, LEASE_HELD);
    ck_assert_uint_eq(stats.renewals_ok, 2);
}
END_TEST

START_TEST(test_renewed_restore)
{
    int64_t start, t1;
    struct lease *l = t_start_renewing(&start);

    t1 = t_extends[0].at_us;
    /* 3 confirmed, masters 1 and 3 answered that the key is absent. */
    t_answer1(0, 3, 2, 0x000a, t1, t1 + 1000);
    ck_assert_int_eq(l->state, LEASE_HELD);
    ck_assert_int_eq(l->validity_end_us, t1 + T_VALIDITY_US);
    ck_assert_int_eq(t_nrestore_calls, 1);
    ck_assert_int_eq(t_nrestore_items, 1);
    ck_assert_str_eq(t_restores[0].key, "lk:a");
    ck_assert_str_eq(t_restores[0].token, t_token);
    ck_assert_uint_eq(t_restores[0].masters, 0x000a);
    ck_assert_int_eq(t_restores[0].validity_end_us, l->validity_end_us);
    ck_assert_uint_eq(stats.renewals_ok, 1);
    ck_assert_int_eq(t_nlost, 0);
}
END_TEST

START_TEST(test_denied)
{
    int64_t start, t1, old_end;
    struct lease *l = t_start_renewing(&start);

    t1 = t_extends[0].at_us;
    old_end = l->validity_end_us;
    t_answer1(0, 0, 3, 0x0007, t1, t1 + 1000);
    ck_assert_int_eq(l->state, LEASE_LOST);
    ck_assert_int_eq(l->reason, LEASE_REASON_RENEW);
    ck_assert_int_eq(t_nlost, 1);
    ck_assert_ptr_eq(t_lost[0], l);
    ck_assert_int_eq(t_lost_state[0], LEASE_LOST);
    ck_assert_int_eq(t_lost_reason[0], LEASE_REASON_RENEW);
    ck_assert_int_eq(t_nexpire, 1);
    ck_assert_str_eq(t_expires[0].key, "lk:a");
    ck_assert_str_eq(t_expires[0].token, t_token);
    ck_assert_int_eq(t_expires[0].validity_end_us, old_end);
    ck_assert_int_eq(l->validity_end_us, old_end);
    ck_assert_int_eq(t_nrestore_calls, 0);
    ck_assert_uint_eq(stats.locks_lost, 1);
    ck_assert_uint_eq(stats.locks_lost_renew, 1);
    ck_assert_uint_eq(stats.renewals_failed, 1);
    ck_assert_uint_eq(stats.renewals_ok, 0);
    ck_assert_uint_eq(lease_count(), 0);
    ck_assert(!lease_valid(l, util_now_us()));
    ck_assert(!lease_check(l, util_now_us()));
    /* Nothing more happens to it: no renewal, no second report. */
    t_run_for(T_TTL_MS);
    ck_assert_int_eq(t_nextend, 1);
    ck_assert_int_eq(t_nlost, 1);
    ck_assert_int_eq(t_nexpire, 1);
}
END_TEST

START_TEST(test_denied_boundary)
{
    int64_t start, t1;
    struct lease *l = t_start_renewing(&start);

    /* 2 confirmed, 2 denied, 1 silent: a quorum may still confirm: undecided. */
    t1 = t_extends[0].at_us;
    t_answer1(0, 2, 2, 0, t1, t1 + 1000);
    ck_assert_int_eq(l->state, LEASE_HELD);
    ck_assert_int_eq(t_nlost, 0);
    ck_assert(l->quorum_trouble);
}
END_TEST

START_TEST(test_too_late)
{
    int64_t start, t1, old_end;
    struct lease *l = t_start_renewing(&start);

    t1 = t_extends[0].at_us;
    old_end = l->validity_end_us;
    /* Every master confirmed, but the round ended at the validity's end. */
    t_answer1(0, 5, 0, 0x0001, t1, old_end);
    ck_assert_int_eq(l->state, LEASE_LOST);
    ck_assert_int_eq(l->reason, LEASE_REASON_RENEW);
    ck_assert_int_eq(l->validity_end_us, old_end);
    ck_assert_int_eq(t_nlost, 1);
    ck_assert_int_eq(t_nexpire, 1);
    ck_assert_int_eq(t_expires[0].validity_end_us, old_end);
    ck_assert_int_eq(t_nrestore_calls, 0);
    ck_assert_uint_eq(stats.locks_lost, 1);
    ck_assert_uint_eq(stats.locks_lost_renew, 1);
    ck_assert_uint_eq(stats.renewals_ok, 0);
    ck_assert_uint_eq(stats.renewals_failed, 1);
    ck_assert_uint_eq(lease_count(), 0);
}
END_TEST

START_TEST(test_undecided_then_quorum_lost)
{
    int64_t start, t1, old_end, now;
    struct lease *l = t_start_renewing(&start);

    t1 = t_extends[0].at_us;
    old_end = l->validity_end_us;
    t_answer1(0, 2, 0, 0, t1, t1 + 1000);
    now = util_now_us();
    ck_assert_int_eq(l->state, LEASE_HELD);
    ck_assert(l->quorum_trouble);
    ck_assert_int_eq(l->validity_end_us, old_end);
    /* The retry comes sooner than ttl/3 (at most ttl/10). */
    ck_assert_int_le(l->renew_at_us, now + T_TTL_MS * 1000 / 10);
    ck_assert_int_lt(l->renew_at_us, now + T_RENEW_US);
    ck_assert_uint_eq(stats.renewals_failed, 1);
    ck_assert_uint_eq(stats.renewals_ok, 0);
    ck_assert_int_eq(t_nlost, 0);
    ck_assert_uint_eq(lease_count(), 1);
    ck_assert(t_run_until(&t_nextend, 2, 2000));
    ck_assert_int_eq(l->state, LEASE_RENEWING);
    ck_assert_int_lt(t_extends[1].at_us, old_end - T_GUARD_US);
    /* No answer: when the guard before the validity's end passes, it is lost. */
    ck_assert(t_run_until(&t_nlost, 1, 2000));
    ck_assert_int_ge(util_now_us(), old_end - T_GUARD_US);
    ck_assert_int_eq(l->state, LEASE_LOST);
    ck_assert_int_eq(l->reason, LEASE_REASON_QUORUM);
    ck_assert_ptr_eq(t_lost[0], l);
    ck_assert_int_eq(t_lost_reason[0], LEASE_REASON_QUORUM);
    ck_assert_int_eq(t_nexpire, 1);
    ck_assert_int_eq(t_expires[0].validity_end_us, old_end);
    ck_assert_uint_eq(stats.locks_lost, 1);
    ck_assert_uint_eq(stats.locks_lost_quorum, 1);
    ck_assert_uint_eq(stats.locks_lost_renew, 0);
    ck_assert_uint_eq(lease_count(), 0);
    /* The retry's late answer, even a confirmation, changes nothing. */
    t_answer1(1, 5, 0, 0x0003, t_extends[1].at_us, util_now_us());
    ck_assert_int_eq(l->state, LEASE_LOST);
    ck_assert_int_eq(t_nlost, 1);
    ck_assert_int_eq(t_nrestore_calls, 0);
    ck_assert_uint_eq(stats.renewals_ok, 0);
}
END_TEST

START_TEST(test_undecided_then_renewed)
{
    int64_t start, t1, t2;
    struct lease *l = t_start_renewing(&start);

    t1 = t_extends[0].at_us;
    t_answer1(0, 1, 1, 0, t1, t1 + 1000);
    ck_assert(l->quorum_trouble);
    ck_assert(t_run_until(&t_nextend, 2, 2000));
    t2 = t_extends[1].at_us;
    t_answer1(1, 3, 0, 0, t2, t2 + 1000);
    ck_assert_int_eq(l->state, LEASE_HELD);
    ck_assert(!l->quorum_trouble);
    ck_assert_int_eq(l->validity_end_us, t2 + T_VALIDITY_US);
    ck_assert_int_eq(l->renew_at_us, t2 + T_RENEW_US);
    ck_assert_uint_eq(stats.renewals_ok, 1);
    ck_assert_uint_eq(stats.renewals_failed, 1);
}
END_TEST

START_TEST(test_undecided_past_guard)
{
    int64_t now = util_now_us();
    struct lease *l = &t_leases[0];

    /* Renewal due at once; lost at now + 50 ms. */
    lease_start(l, t_rec("lk:a"), t_token, T_TTL_MS, 0, now - T_RENEW_US,
                now + 50000 + T_GUARD_US);
    ck_assert(t_run_until(&t_nextend, 1, 2000));
    ck_assert_int_eq(l->state, LEASE_RENEWING);
    /* The answer comes after the guard passed, before the timer ran. */
    t_sleep_until(now + 50000);
    t_answer1(0, 2, 1, 0, t_extends[0].at_us, util_now_us());
    ck_assert_int_eq(l->state, LEASE_LOST);
    ck_assert_int_eq(l->reason, LEASE_REASON_QUORUM);
    ck_assert_int_eq(t_nlost, 1);
    ck_assert_int_eq(t_nexpire, 1);
    ck_assert_int_eq(t_expires[0].validity_end_us, now + 50000 + T_GUARD_US);
    ck_assert_uint_eq(stats.locks_lost_quorum, 1);
    ck_assert_uint_eq(lease_count(), 0);
    t_run_for(50);
    ck_assert_int_eq(t_nlost, 1);
}
END_TEST

START_TEST(test_timeout_renew_reason)
{
    int64_t start;
    struct lease *l = t_start_renewing(&start);

    /* The first renewal never answers: lost at the guard, reason renew. */
    ck_assert(t_run_until(&t_nlost, 1, 2000));
    ck_assert_int_ge(util_now_us(), start + T_VALIDITY_US - T_GUARD_US);
    ck_assert_int_eq(l->state, LEASE_LOST);
    ck_assert_int_eq(l->reason, LEASE_REASON_RENEW);
    ck_assert_uint_eq(stats.locks_lost_renew, 1);
    ck_assert_int_eq(t_nexpire, 1);
}
END_TEST

START_TEST(test_end_while_renewing)
{
    int64_t start, t1, end;
    struct lease *l = t_start_renewing(&start);

    end = l->validity_end_us;
    lease_end(l);
    ck_assert_int_eq(l->state, LEASE_RELEASED);
    ck_assert_ptr_null(l->batch);
    ck_assert_uint_eq(lease_count(), 0);
    ck_assert(!lease_valid(l, util_now_us()));
    /* The renewal's late confirmation finds it released. */
    t1 = t_extends[0].at_us;
    t_answer1(0, 3, 0, 0x0003, t1, t1 + 1000);
    ck_assert_int_eq(l->state, LEASE_RELEASED);
    ck_assert_int_eq(l->validity_end_us, end);
    ck_assert_int_eq(t_nlost, 0);
    ck_assert_int_eq(t_nrestore_calls, 0);
    ck_assert_int_eq(t_nexpire, 0);
    ck_assert_uint_eq(stats.renewals_ok, 0);
    ck_assert_uint_eq(stats.locks_lost, 0);
    t_run_for(T_TTL_MS);
    ck_assert_int_eq(t_nextend, 1);
    ck_assert_int_eq(t_nlost, 0);
}
END_TEST

START_TEST(test_end_then_denied)
{
    int64_t start, t1;
    struct lease *l = t_start_renewing(&start);

    lease_end(l);
    t1 = t_extends[0].at_us;
    t_answer1(0, 0, 5, 0x001f, t1, t1 + 1000);
    ck_assert_int_eq(l->state, LEASE_RELEASED);
    ck_assert_int_eq(t_nlost, 0);
    ck_assert_int_eq(t_nexpire, 0);
    ck_assert_uint_eq(stats.renewals_failed, 0);
    ck_assert_uint_eq(stats.locks_lost, 0);
}
END_TEST

START_TEST(test_lose_gone_while_renewing)
{
    int64_t start, t1;
    struct lease *l = t_start_renewing(&start);

    lease_lose(l, LEASE_REASON_GONE);
    ck_assert_int_eq(l->state, LEASE_LOST);
    ck_assert_int_eq(l->reason, LEASE_REASON_GONE);
    ck_assert_ptr_null(l->batch);
    ck_assert_uint_eq(lease_count(), 0);
    ck_assert_int_eq(t_nlost, 0);      /* the caller reports it */
    ck_assert_int_eq(t_nexpire, 0);    /* the keys are not touched */
    ck_assert_uint_eq(stats.locks_lost, 1);
    ck_assert_uint_eq(stats.locks_lost_gone, 1);
    t1 = t_extends[0].at_us;
    t_answer1(0, 5, 0, 0x0001, t1, t1 + 1000);
    ck_assert_int_eq(l->state, LEASE_LOST);
    ck_assert_int_eq(l->reason, LEASE_REASON_GONE);
    ck_assert_int_eq(t_nlost, 0);
    ck_assert_int_eq(t_nrestore_calls, 0);
    ck_assert_uint_eq(stats.renewals_ok, 0);
    /* Losing or ending it again changes nothing. */
    lease_lose(l, LEASE_REASON_SHUTDOWN);
    lease_end(l);
    ck_assert_int_eq(l->state, LEASE_LOST);
    ck_assert_int_eq(l->reason, LEASE_REASON_GONE);
    ck_assert_uint_eq(stats.locks_lost, 1);
    ck_assert_uint_eq(stats.locks_lost_shutdown, 0);
    t_run_for(T_TTL_MS);
    ck_assert_int_eq(t_nextend, 1);
    ck_assert_int_eq(t_nlost, 0);
}
END_TEST

START_TEST(test_lose_shutdown_held)
{
    struct lease *l = t_start(0, "lk:a", util_now_us());

    lease_lose(l, LEASE_REASON_SHUTDOWN);
    ck_assert_int_eq(l->state, LEASE_LOST);
    ck_assert_int_eq(l->reason, LEASE_REASON_SHUTDOWN);
    ck_assert_uint_eq(stats.locks_lost, 1);
    ck_assert_uint_eq(stats.locks_lost_shutdown, 1);
    ck_assert_uint_eq(lease_count(), 0);
    lease_note_lost(LEASE_REASON_GONE);
    ck_assert_uint_eq(stats.locks_lost, 2);
    ck_assert_uint_eq(stats.locks_lost_gone, 1);
    t_run_for(T_RENEW_US / 1000 + 30);
    ck_assert_int_eq(t_extend_attempts, 0);
    ck_assert_int_eq(t_nlost, 0);
}
END_TEST

START_TEST(test_check_past_guard)
{
    int64_t now = util_now_us();
    struct lease *l = &t_leases[0];
    struct lease *ok = t_start(1, "lk:b", now);

    /* Lost at now + 10 ms, before its renewal (now + 100 ms). */
    lease_start(l, t_rec("lk:a"), t_token, T_TTL_MS, 0, now,
                now + 10000 + T_GUARD_US);
    ck_assert(lease_check(l, now));
    ck_assert(lease_check(ok, now));
    ck_assert_int_eq(t_nlost, 0);
    /* The loop does not run: the timer cannot have found it. */
    t_sleep_until(now + 10000);
    ck_assert(!lease_valid(l, util_now_us()));
    ck_assert(!lease_check(l, util_now_us()));
    ck_assert_int_eq(t_nlost, 1);
    ck_assert_ptr_eq(t_lost[0], l);
    ck_assert_int_eq(t_lost_state[0], LEASE_LOST);
    ck_assert_int_eq(t_lost_reason[0], LEASE_REASON_RENEW);
    ck_assert_int_eq(t_nexpire, 1);
    ck_assert_str_eq(t_expires[0].key, "lk:a");
    ck_assert_int_eq(t_expires[0].validity_end_us, now + 10000 + T_GUARD_US);
    ck_assert_uint_eq(stats.locks_lost, 1);
    ck_assert_uint_eq(stats.locks_lost_renew, 1);
    ck_assert_uint_eq(lease_count(), 1);
    /* A second check reports nothing; the timer does not find it again. */
    ck_assert(!lease_check(l, util_now_us()));
    ck_assert_int_eq(t_nlost, 1);
    t_run_for(30);
    ck_assert_int_eq(t_nlost, 1);
    /* Unaffected: held, or renewing if a slow machine reached its ttl/3 meanwhile. */
    ck_assert(ok->state == LEASE_HELD || ok->state == LEASE_RENEWING);
    ck_assert(lease_check(ok, util_now_us()));
}
END_TEST

START_TEST(test_timer_finds_lost)
{
    int64_t now = util_now_us();
    struct lease *l = &t_leases[0];

    /* The validity ends before the first renewal is due: the timer reports it. */
    lease_start(l, t_rec("lk:a"), t_token, T_TTL_MS, 0, now,
                now + 30000 + T_GUARD_US);
    ck_assert(t_run_until(&t_nlost, 1, 2000));
    ck_assert_int_ge(util_now_us(), now + 30000);
    ck_assert_int_eq(l->state, LEASE_LOST);
    ck_assert_int_eq(l->reason, LEASE_REASON_RENEW);
    ck_assert_int_eq(t_extend_attempts, 0);
    ck_assert_int_eq(t_nexpire, 1);
}
END_TEST

START_TEST(test_valid_after_end)
{
    int64_t now = util_now_us();
    struct lease *l = t_start(0, "lk:a", now);

    ck_assert(lease_valid(l, now));
    lease_end(l);
    ck_assert_int_eq(l->state, LEASE_RELEASED);
    ck_assert(!lease_valid(l, now));
    ck_assert(!lease_check(l, now));
    ck_assert(!lease_check(l, now + T_TTL_MS * 1000));
    ck_assert_int_eq(t_nlost, 0);
    ck_assert_int_eq(t_nexpire, 0);
    ck_assert_uint_eq(lease_count(), 0);
    ck_assert_uint_eq(stats.locks_lost, 0);
    t_run_for(T_RENEW_US / 1000 + 30);
    ck_assert_int_eq(t_extend_attempts, 0);
}
END_TEST

START_TEST(test_reason_names)
{
    ck_assert_str_eq(lease_reason_name(LEASE_REASON_RENEW), "renew");
    ck_assert_str_eq(lease_reason_name(LEASE_REASON_QUORUM), "quorum");
    ck_assert_str_eq(lease_reason_name(LEASE_REASON_GONE), "gone");
    ck_assert_str_eq(lease_reason_name(LEASE_REASON_SHUTDOWN), "shutdown");
    ck_assert_str_eq(lease_reason_name((enum lease_reason)99), "unknown");
}
END_TEST

START_TEST(test_batch_one_released)
{
    int64_t now = util_now_us(), t1;
    struct lease *a = t_start(0, "lk:a", now);
    struct lease *b = t_start(1, "lk:b", now + 5000);
    struct lease *c = t_start(2, "lk:c", now + 10000);
    struct t_extend *e = &t_extends[0];
    uint8_t conf[3] = { 3, 3, 3 }, den[3] = { 0, 0, 0 };
    uint16_t abs[3] = { 0x0010, 0x0010, 0x0010 };

    /* Due within the batching window of one another: one batch. */
    ck_assert(t_run_until(&t_nextend, 1, 2000));
    ck_assert_uint_eq(e->n, 3);
    ck_assert_int_ge(t_slot(e, "lk:a"), 0);
    ck_assert_int_ge(t_slot(e, "lk:b"), 0);
    ck_assert_int_ge(t_slot(e, "lk:c"), 0);
    ck_assert_int_eq(a->state, LEASE_RENEWING);
    ck_assert_int_eq(b->state, LEASE_RENEWING);
    ck_assert_int_eq(c->state, LEASE_RENEWING);
    lease_end(b);
    ck_assert_uint_eq(lease_count(), 2);
    t1 = e->at_us;
    t_answer(0, conf, den, abs, t1, t1 + 1000);
    ck_assert_int_eq(a->state, LEASE_HELD);
    ck_assert_int_eq(c->state, LEASE_HELD);
    ck_assert_int_eq(b->state, LEASE_RELEASED);
    ck_assert_int_eq(a->validity_end_us, t1 + T_VALIDITY_US);
    ck_assert_int_eq(c->validity_end_us, t1 + T_VALIDITY_US);
    ck_assert_int_eq(b->validity_end_us, now + 5000 + T_VALIDITY_US);
    ck_assert_uint_eq(stats.renewals_ok, 2);
    ck_assert_int_eq(t_nrestore_calls, 1);
    ck_assert_int_eq(t_nrestore_items, 2);
    ck_assert_str_ne(t_restores[0].key, "lk:b");
    ck_assert_str_ne(t_restores[1].key, "lk:b");
    ck_assert_int_eq(t_nlost, 0);
    ck_assert_uint_eq(lease_count(), 2);
}
END_TEST

START_TEST(test_batch_mixed)
{
    int64_t now = util_now_us(), t1, b_end;
    struct lease *a = t_start(0, "lk:a", now);
    struct lease *b = t_start(1, "lk:b", now);
    struct lease *c = t_start(2, "lk:c", now);
    struct t_extend *e = &t_extends[0];
    uint8_t conf[3], den[3];
    uint16_t abs[3] = { 0, 0, 0 };
    int sa, sb, sc;

    ck_assert(t_run_until(&t_nextend, 1, 2000));
    ck_assert_uint_eq(e->n, 3);
    sa = t_slot(e, "lk:a");
    sb = t_slot(e, "lk:b");
    sc = t_slot(e, "lk:c");
    ck_assert(sa >= 0 && sb >= 0 && sc >= 0);
    conf[sa] = 3;   /* renewed */
    den[sa] = 0;
    conf[sb] = 1;   /* denied */
    den[sb] = 4;
    conf[sc] = 2;   /* undecided */
    den[sc] = 1;
    b_end = b->validity_end_us;
    t1 = e->at_us;
    t_answer(0, conf, den, abs, t1, t1 + 1000);
    ck_assert_int_eq(a->state, LEASE_HELD);
    ck_assert(!a->quorum_trouble);
    ck_assert_int_eq(b->state, LEASE_LOST);
    ck_assert_int_eq(b->reason, LEASE_REASON_RENEW);
    ck_assert_int_eq(c->state, LEASE_HELD);
    ck_assert(c->quorum_trouble);
    ck_assert_int_eq(t_nlost, 1);
    ck_assert_ptr_eq(t_lost[0], b);
    ck_assert_int_eq(t_nexpire, 1);
    ck_assert_str_eq(t_expires[0].key, "lk:b");
    ck_assert_int_eq(t_expires[0].validity_end_us, b_end);
    ck_assert_uint_eq(stats.renewals_ok, 1);
    ck_assert_uint_eq(stats.renewals_failed, 2);
    ck_assert_uint_eq(lease_count(), 2);
    /* c retries soon, alone. */
    ck_assert(t_run_until(&t_nextend, 2, 2000));
    ck_assert_uint_eq(t_extends[1].n, 1);
    ck_assert_str_eq(t_extends[1].key[0], "lk:c");
}
END_TEST

START_TEST(test_batch_window)
{
    int64_t now = util_now_us();
    struct lease *a = t_start(0, "lk:a", now);
    struct lease *b = t_start(1, "lk:b", now + 10000);
    struct lease *c = &t_leases[2];

    /* c is due a second later: not in a's batch. */
    lease_start(c, t_rec("lk:c"), t_token, 3000, 0, now, now + 2965000);
    ck_assert(t_run_until(&t_nextend, 1, 2000));
    ck_assert_uint_eq(t_extends[0].n, 2);
    ck_assert_int_ge(t_slot(&t_extends[0], "lk:a"), 0);
    ck_assert_int_ge(t_slot(&t_extends[0], "lk:b"), 0);
    ck_assert_int_eq(a->state, LEASE_RENEWING);
    ck_assert_int_eq(b->state, LEASE_RENEWING);
    ck_assert_int_eq(c->state, LEASE_HELD);
}
END_TEST

START_TEST(test_lost_cb_frees)
{
    struct lease *l = malloc(sizeof(*l));
    int64_t now = util_now_us(), t1;

    ck_assert_ptr_nonnull(l);
    t_free_in_lost = true;
    lease_start(l, t_rec("lk:a"), t_token, T_TTL_MS, 0, now,
                now + T_VALIDITY_US);
    ck_assert(t_run_until(&t_nextend, 1, 2000));
    t1 = t_extends[0].at_us;
    t_answer1(0, 0, 3, 0, t1, t1 + 1000);
    ck_assert_int_eq(t_nlost, 1);
    ck_assert_int_eq(t_lost_state[0], LEASE_LOST);
    ck_assert_uint_eq(lease_count(), 0);
}
END_TEST

START_TEST(test_extend_fails)
{
    int64_t now = util_now_us();
    struct lease *l = t_start(0, "lk:a", now);

    /*
     * redlock_extend out of memory: back to HELD, tried again soon, but
     * after the batching window (20 ms), so that the timer does not pick
     * the same leases again in the same turn and spin.
     */
    t_extend_fail = true;
    ck_assert(t_run_until(&t_extend_attempts, 1, 2000));
    ck_assert_int_eq(l->state, LEASE_HELD);
    ck_assert_ptr_null(l->batch);
    ck_assert_int_eq(t_extend_attempts, 1);
    ck_assert_int_gt(l->renew_at_us, t_extend_fail_us + 20000);
    ck_assert_int_le(l->renew_at_us, t_extend_fail_us + 40000);
    t_extend_fail = false;
    ck_assert(t_run_until(&t_nextend, 1, 2000));
    ck_assert_int_eq(l->state, LEASE_RENEWING);
    ck_assert_int_eq(t_nlost, 0);
}
END_TEST

/*
 * While the timer builds a batch, a lease found lost in the same turn
 * calls the lost callback; when that callback ends another lease already
 * put in the batch (its slot becomes NULL), the batch is sent without it
 * (lease_send dereferenced the NULL slot before).
 */
START_TEST(test_lost_cb_ends_batched)
{
    int64_t now = util_now_us();
    struct lease *a = &t_leases[0];
    struct lease *b = &t_leases[1];

    /* a: renewal due 10 ms ago (first on the heap); b: lost 5 ms ago. */
    lease_start(a, t_rec("lk:a"), t_token, T_TTL_MS, 0, now - T_RENEW_US - 10000,
                now - T_RENEW_US - 10000 + T_VALIDITY_US);
    lease_start(b, t_rec("lk:b"), t_token, T_TTL_MS, 0, now,
                now - 5000 + T_GUARD_US);
    t_end_in_lost = a;
    t_run_for(30);
    ck_assert_int_eq(t_nlost, 1);
    ck_assert_int_eq(a->state, LEASE_RELEASED);
    ck_assert_int_eq(b->state, LEASE_LOST);
}
END_TEST

static Suite *
lease_suite(void)
{
    Suite *s = suite_create("lease");
    TCase *tc = tcase_create("state machine");

    tcase_add_checked_fixture(tc, t_setup, t_teardown);
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_start_held);
    tcase_add_test(tc, test_timer_renewing);
    tcase_add_test(tc, test_renewed);
    tcase_add_test(tc, test_renewed_restore);
    tcase_add_test(tc, test_denied);
    tcase_add_test(tc, test_denied_boundary);
    tcase_add_test(tc, test_too_late);
    tcase_add_test(tc, test_undecided_then_quorum_lost);
    tcase_add_test(tc, test_undecided_then_renewed);
    tcase_add_test(tc, test_undecided_past_guard);
    tcase_add_test(tc, test_timeout_renew_reason);
    tcase_add_test(tc, test_end_while_renewing);
    tcase_add_test(tc, test_end_then_denied);
    tcase_add_test(tc, test_lose_gone_while_renewing);
    tcase_add_test(tc, test_lose_shutdown_held);
    tcase_add_test(tc, test_check_past_guard);
    tcase_add_test(tc, test_timer_finds_lost);
    tcase_add_test(tc, test_valid_after_end);
    tcase_add_test(tc, test_reason_names);
    tcase_add_test(tc, test_batch_one_released);
    tcase_add_test(tc, test_batch_mixed);
    tcase_add_test(tc, test_batch_window);
    tcase_add_test(tc, test_lost_cb_frees);
    tcase_add_test(tc, test_extend_fails);
    tcase_add_test(tc, test_lost_cb_ends_batched);
    suite_add_tcase(s, tc);
    return s;
}

const struct runner runner_main = { "check_lease", lease_suite, NULL, NULL };
