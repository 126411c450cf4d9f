/*
 * watchdog.c: one timer, one heap, batched renewals.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "daemon/lock.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/redlock.h"
#include "daemon/stats.h"
#include "daemon/util.h"
#include "daemon/watchdog.h"

#define WATCHDOG_BATCH_MAX   512           /* keys in one script call */
#define WATCHDOG_WINDOW_US   20000         /* renew up to 20 ms early to batch */
#define WATCHDOG_NO_INDEX    SIZE_MAX
#define WATCHDOG_GUARD_US    250000        /* report LOST up to this long before validity ends */

/*
 * A renewal in flight.  Owned by this module: freed when its round is
 * decided.  A lease removed meanwhile clears its slot.
 */
struct watchdog_batch {
    size_t        n;                        /* slots used */
    struct lease *leases[WATCHDOG_BATCH_MAX]; /* NULL once removed */
};

static struct event_base *wd_base;
static struct event      *wd_timer;
static double             wd_drift = 0.01;
static struct lease     **wd_heap;          /* min-heap on due_us */
static size_t             wd_len;           /* leases in the heap */
static size_t             wd_cap;           /* slots allocated */

static void watchdog_timer_cb(evutil_socket_t fd, short what, void *arg);

void
watchdog_set_drift(double drift_factor)
{
    wd_drift = drift_factor;
}

void
watchdog_init(struct event_base *base, double drift_factor)
{
    wd_base = base;
    wd_drift = drift_factor;
    wd_timer = evtimer_new(base, watchdog_timer_cb, NULL);
}

void
watchdog_stop(void)
{
    if (wd_timer != NULL) {
        event_free(wd_timer);
        wd_timer = NULL;
    }
    free(wd_heap);
    wd_heap = NULL;
    wd_len = wd_cap = 0;
}

size_t
watchdog_count(void)
{
    return wd_len;
}

static void
heap_set(size_t i, struct lease *l)
{
    wd_heap[i] = l;
    l->heap_index = i;
}

static void
heap_up(size_t i)
{
    struct lease *l = wd_heap[i];

    while (i > 0) {
        size_t parent = (i - 1) / 2;

        if (wd_heap[parent]->due_us <= l->due_us) {
            break;
        }
        heap_set(i, wd_heap[parent]);
        i = parent;
    }
    heap_set(i, l);
}

static void
heap_down(size_t i)
{
    struct lease *l = wd_heap[i];

    for (;;) {
        size_t child = 2 * i + 1;

        if (child >= wd_len) {
            break;
        }
        if (child + 1 < wd_len && wd_heap[child + 1]->due_us < wd_heap[child]->due_us) {
            child++;
        }
        if (l->due_us <= wd_heap[child]->due_us) {
            break;
        }
        heap_set(i, wd_heap[child]);
        i = child;
    }
    heap_set(i, l);
}

static int
heap_push(struct lease *l)
{
    if (wd_len == wd_cap) {
        size_t cap = wd_cap ? 2 * wd_cap : 64;
        struct lease **h = realloc(wd_heap, cap * sizeof(*h));

        if (h == NULL) {
            return -1;
        }
        wd_heap = h;
        wd_cap = cap;
    }
    heap_set(wd_len++, l);
    heap_up(l->heap_index);
    return 0;
}

static void
heap_remove(struct lease *l)
{
    size_t i = l->heap_index;
    struct lease *last;

    if (i == WATCHDOG_NO_INDEX) {
        return;
    }
    l->heap_index = WATCHDOG_NO_INDEX;
    last = wd_heap[--wd_len];
    if (last != l) {
        heap_set(i, last);
        heap_up(i);
        heap_down(last->heap_index);
    }
}

/* Re-key a lease in the heap after its due time changed. */
static void
heap_update(struct lease *l)
{
    heap_up(l->heap_index);
    heap_down(l->heap_index);
}

/* Arm the timer for the earliest due lease. */
static void
watchdog_arm(void)
{
    int64_t delay;
    struct timeval tv;

    if (wd_len == 0) {
        evtimer_del(wd_timer);
        return;
    }
    delay = wd_heap[0]->due_us - util_now_us();
    if (delay < 0) {
        delay = 0;
    }
    tv.tv_sec = (time_t)(delay / 1000000);
    tv.tv_usec = (suseconds_t)(delay % 1000000);
    evtimer_add(wd_timer, &tv);
}

/* When a lease not confirmed by then is reported lost. */
static int64_t
watchdog_lost_at(const struct lease *l)
{
    int64_t guard = l->ttl_ms * 200;    /* ttl/5, in us */

    if (guard > WATCHDOG_GUARD_US) {
        guard = WATCHDOG_GUARD_US;
    }
    return l->validity_end_us - guard;
}

bool
watchdog_valid(const struct lease *l, int64_t now_us)
{
    return now_us < watchdog_lost_at(l);
}

/* When the lease next needs attention. */
static void
watchdog_set_due(struct lease *l)
{
    int64_t lost_at = watchdog_lost_at(l);

    if (l->batch != NULL || l->renew_at_us > lost_at) {
        l->due_us = lost_at;
    } else {
        l->due_us = l->renew_at_us;
    }
}

int
watchdog_add(struct lease *l, int64_t start_us)
{
    l->renew_at_us = start_us + l->ttl_ms * 1000 / 3;
    l->batch = NULL;
    l->quorum_trouble = false;
    l->heap_index = WATCHDOG_NO_INDEX;
    watchdog_set_due(l);
    if (heap_push(l) != 0) {
        log_error("watchdog: out of memory watching a new lease");
        return -1;
    }
    if (l->heap_index == 0) {
        watchdog_arm();
    }
    return 0;
}

void
watchdog_remove(struct lease *l)
{
    bool was_top = l->heap_index == 0;

    if (l->batch != NULL) {
        l->batch->leases[l->batch_slot] = NULL;
        l->batch = NULL;
    }
    heap_remove(l);
    if (was_top) {
        watchdog_arm();
    }
}

static void
watchdog_renewed(const struct redlock_extend_result *res, void *arg)
{
    struct watchdog_batch *b = arg;
    size_t n = master_count(), q = redlock_quorum(n), j;
    int64_t now = util_now_us();

    for (j = 0; j < b->n; j++) {
        struct lease *l = b->leases[j];

        if (l == NULL) {
            continue;   /* released or lost while the round ran */
        }
        l->batch = NULL;
        if (res->confirmed[j] >= q && res->end_us < l->validity_end_us) {
            /* Confirmed by a quorum within the validity: a new lease from start. */
            l->validity_end_us = res->start_us + l->ttl_ms * 1000
                                 - redlock_drift_us(l->ttl_ms, wd_drift);
            l->renew_at_us = res->start_us + l->ttl_ms * 1000 / 3;
            l->quorum_trouble = false;
            stats.renewals_ok++;
        } else if (res->denied[j] > n - q || !watchdog_valid(l, now)) {
            /*
             * A majority no longer holds our token, or the validity ended
             * first: "renew" when masters answered (late or no), "quorum"
             * when too few of them answered at all.
             */
            stats.renewals_failed++;
            lock_lost(l, res->denied[j] > n - q || res->confirmed[j] >= q
                         ? "renew" : "quorum");
            continue;
        } else {
            /* Too few answers: try again soon, while validity lasts. */
            int64_t left = watchdog_lost_at(l) - now;
            int64_t retry = l->ttl_ms * 1000 / 10;

            if (retry > left / 3) {
                retry = left / 3;
            }
            stats.renewals_failed++;
            if (!l->quorum_trouble) {
                size_t len;
                const char *key = lock_lease_key(l, &len);

                log_warn("lock %.*s: renewal without a quorum (%s); retrying for %lld ms",
                         (int)len, key, res->error, (long long)(left / 1000));
            }
            l->quorum_trouble = true;
            l->renew_at_us = now + retry;
        }
        watchdog_set_due(l);
        heap_update(l);
    }
    free(b);
    watchdog_arm();
}

static void
watchdog_send(struct watchdog_batch *b)
{
    struct redlock_extend_item items[WATCHDOG_BATCH_MAX];
    size_t j;

    for (j = 0; j < b->n; j++) {
        struct lease *l = b->leases[j];

        items[j].key = lock_lease_key(l, &items[j].key_len);
        items[j].token = l->token;
        items[j].ttl_ms = l->ttl_ms;
    }
    if (redlock_extend(items, b->n, watchdog_renewed, b) != 0) {
        /* Out of memory: leave them for the next tick. */
        for (j = 0; j < b->n; j++) {
            b->leases[j]->batch = NULL;
            b->leases[j]->renew_at_us = util_now_us() + 10000;
            watchdog_set_due(b->leases[j]);
            heap_update(b->leases[j]);
        }
        free(b);
    }
}

static void
watchdog_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    int64_t now = util_now_us();
    struct watchdog_batch *b = NULL;
    struct lease *l;

    (void)fd;
    (void)what;
    (void)arg;
    while (wd_len > 0) {
        l = wd_heap[0];
        if (!watchdog_valid(l, now)) {
            /* Validity over and not renewed in time (also after a pause). */
            lock_lost(l, l->quorum_trouble ? "quorum" : "renew");
            continue;
        }
        if (l->batch != NULL || l->renew_at_us > now + WATCHDOG_WINDOW_US) {
            break;
        }
        if (b == NULL) {
            b = calloc(1, sizeof(*b));
            if (b == NULL) {
                log_error("watchdog: out of memory; retrying");
                break;
            }
        }
        l->batch = b;
        l->batch_slot = b->n;
        b->leases[b->n++] = l;
        watchdog_set_due(l);
        heap_down(0);
        if (b->n == WATCHDOG_BATCH_MAX) {
            watchdog_send(b);
            b = NULL;
        }
    }
    if (b != NULL) {
        watchdog_send(b);
    }
    watchdog_arm();
}
