/*
 * lease.c: leases, their state machine, one timer, one heap, batched
 * renewals.  See lease.h for the states and their transitions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "daemon/lease.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/redlock.h"
#include "daemon/stats.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"

#define LEASE_BATCH_MAX   512           /* keys in one script call */
#define LEASE_WINDOW_US   20000         /* renew up to 20 ms early to batch */
#define LEASE_NO_INDEX    SIZE_MAX
#define LEASE_GUARD_US    250000        /* report LOST up to this long before validity ends */

/*
 * A renewal in flight.  Owned by this module: freed when its round is
 * decided.  A lease that leaves RENEWING meanwhile clears its slot.
 */
struct lease_batch {
    size_t        n;                        /* slots used */
    struct lease *leases[LEASE_BATCH_MAX];  /* NULL once no longer RENEWING */
};

static struct event      *lease_timer;
static lease_lost_fn      lease_lost_cb;
static struct lease     **lease_heap;       /* min-heap on due_us */
static size_t             lease_len;        /* leases in the heap */
static size_t             lease_cap;        /* slots allocated */

static void lease_timer_cb(evutil_socket_t fd, short what, void *arg);

void
lease_init(struct event_base *base, lease_lost_fn lost)
{
    lease_lost_cb = lost;
    lease_timer = evtimer_new(base, lease_timer_cb, NULL);
    if (lease_timer != NULL) {
        /*
         * The highest priority (daemon/server.c makes two): after a
         * pause of the daemon, the leases whose validity ended in it are
         * reported lost before any other callback of the loop iteration
         * that finds them, so before any request that waited in a
         * socket is answered.
         */
        event_priority_set(lease_timer, 0);
    }
}

void
lease_stop(void)
{
    if (lease_timer != NULL) {
        event_free(lease_timer);
        lease_timer = NULL;
    }
    free(lease_heap);
    lease_heap = NULL;
    lease_len = lease_cap = 0;
}

size_t
lease_count(void)
{
    return lease_len;
}

const char *
lease_reason_name(enum lease_reason why)
{
    switch (why) {
    case LEASE_REASON_RENEW:
        return "renew";
    case LEASE_REASON_QUORUM:
        return "quorum";
    case LEASE_REASON_GONE:
        return "gone";
    case LEASE_REASON_SHUTDOWN:
        return "shutdown";
    case LEASE_REASON_BROKEN:
        return "broken";
    }
    return "unknown";
}

static void
lease_heap_set(size_t i, struct lease *l)
{
    lease_heap[i] = l;
    l->heap_index = i;
}

static void
lease_heap_up(size_t i)
{
    struct lease *l = lease_heap[i];

    while (i > 0) {
        size_t parent = (i - 1) / 2;

        if (lease_heap[parent]->due_us <= l->due_us) {
            break;
        }
        lease_heap_set(i, lease_heap[parent]);
        i = parent;
    }
    lease_heap_set(i, l);
}

static void
lease_heap_down(size_t i)
{
    struct lease *l = lease_heap[i];

    for (;;) {
        size_t child = 2 * i + 1;

        if (child >= lease_len) {
            break;
        }
        if (child + 1 < lease_len && lease_heap[child + 1]->due_us < lease_heap[child]->due_us) {
            child++;
        }
        if (l->due_us <= lease_heap[child]->due_us) {
            break;
        }
        lease_heap_set(i, lease_heap[child]);
        i = child;
    }
    lease_heap_set(i, l);
}

static void
lease_heap_push(struct lease *l)
{
    if (lease_len == lease_cap) {
        lease_cap = lease_cap ? 2 * lease_cap : 64;
        lease_heap = xreallocarray(lease_heap, lease_cap, sizeof(*lease_heap));
    }
    lease_heap_set(lease_len++, l);
    lease_heap_up(l->heap_index);
}

static void
lease_heap_remove(struct lease *l)
{
    size_t i = l->heap_index;
    struct lease *last;

    if (i == LEASE_NO_INDEX) {
        return;
    }
    l->heap_index = LEASE_NO_INDEX;
    last = lease_heap[--lease_len];
    if (last != l) {
        lease_heap_set(i, last);
        lease_heap_up(i);
        lease_heap_down(last->heap_index);
    }
}

/* Re-key a lease in the heap after its due time changed. */
static void
lease_heap_update(struct lease *l)
{
    lease_heap_up(l->heap_index);
    lease_heap_down(l->heap_index);
}

/* Arm the timer for the earliest due lease. */
static void
lease_arm(void)
{
    int64_t delay;
    struct timeval tv;

    if (lease_timer == NULL) {
        return;
    }
    if (lease_len == 0) {
        evtimer_del(lease_timer);
        return;
    }
    delay = lease_heap[0]->due_us - util_now_us();
    if (delay < 0) {
        delay = 0;
    }
    tv.tv_sec = (time_t)(delay / 1000000);
    tv.tv_usec = (suseconds_t)(delay % 1000000);
    evtimer_add(lease_timer, &tv);
}

/* When a lease not confirmed by then is reported lost. */
static int64_t
lease_lost_at(const struct lease *l)
{
    int64_t guard = l->ttl_ms * 200;    /* ttl/5, in us */

    if (guard > LEASE_GUARD_US) {
        guard = LEASE_GUARD_US;
    }
    return l->validity_end_us - guard;
}

bool
lease_valid(const struct lease *l, int64_t now_us)
{
    return (l->state == LEASE_HELD || l->state == LEASE_RENEWING) && now_us < lease_lost_at(l);
}

int64_t
lease_validity_left_ms(const struct lease *l, int64_t now_us)
{
    return l->validity_end_us > now_us ? (l->validity_end_us - now_us) / 1000 : 0;
}

/* When the lease next needs attention. */
static void
lease_set_due(struct lease *l)
{
    int64_t lost_at = lease_lost_at(l);

    if (l->state == LEASE_RENEWING || l->renew_at_us > lost_at) {
        l->due_us = lost_at;
    } else {
        l->due_us = l->renew_at_us;
    }
}

void
lease_start(struct lease *l, const struct redlock_rec *rec, const char *token,
            int64_t ttl_ms, int64_t fence, int64_t start_us, int64_t validity_end_us)
{
    memset(l, 0, sizeof(*l));
    l->state = LEASE_HELD;
    l->rec = *rec;
    memcpy(l->token, token, UTIL_TOKEN_HEX);
    l->token[UTIL_TOKEN_HEX] = '\0';
    l->ttl_ms = ttl_ms;
    l->fence = fence;
    l->validity_end_us = validity_end_us;
    l->renew_at_us = start_us + ttl_ms * 1000 / 3;
    l->heap_index = LEASE_NO_INDEX;
    lease_set_due(l);
    lease_heap_push(l);
    if (l->heap_index == 0) {
        lease_arm();
    }
}

/* Leave HELD/RENEWING for state: out of the heap and any batch. */
static void
lease_leave(struct lease *l, enum lease_state state)
{
    bool was_top = l->heap_index == 0;

    if (l->batch != NULL) {
        l->batch->leases[l->batch_slot] = NULL;
        l->batch = NULL;
    }
    lease_heap_remove(l);
    l->state = state;
    if (was_top) {
        lease_arm();
    }
}

void
lease_end(struct lease *l)
{
    if (l->state == LEASE_HELD || l->state == LEASE_RENEWING) {
        lease_leave(l, LEASE_RELEASED);
    }
}

void
lease_lose(struct lease *l, enum lease_reason why)
{
    if (l->state != LEASE_HELD && l->state != LEASE_RENEWING) {
        return;
    }
    lease_leave(l, LEASE_LOST);
    l->reason = why;
    lease_note_lost(why);
}

void
lease_note_lost(enum lease_reason why)
{
    stats.locks_lost++;
    switch (why) {
    case LEASE_REASON_RENEW:
        stats.locks_lost_renew++;
        break;
    case LEASE_REASON_QUORUM:
        stats.locks_lost_quorum++;
        break;
    case LEASE_REASON_GONE:
        stats.locks_lost_gone++;
        break;
    case LEASE_REASON_SHUTDOWN:
        stats.locks_lost_shutdown++;
        break;
    case LEASE_REASON_BROKEN:
        stats.locks_lost_broken++;
        break;
    }
}

/*
 * The module found the lease lost: LOST, its keys brought back to the
 * end of the validity it was told (not deleted: a holder that has not
 * read LOST yet keeps its window; a failed renewal may have pushed them
 * a whole ttl further on the masters that still answered), then the
 * owner hears of it.
 */
static void
lease_found_lost(struct lease *l, enum lease_reason why)
{
    lease_lose(l, why);
    log_warn("lock %.*s: lost (%s)", (int)l->rec.base_len, l->rec.base, lease_reason_name(why));
    redlock_expire_at(&l->rec, l->token, l->validity_end_us);
    lease_lost_cb(l);
}

/* The reason for a lease whose validity ran out unconfirmed. */
static enum lease_reason
lease_expiry_reason(const struct lease *l)
{
    return l->quorum_trouble ? LEASE_REASON_QUORUM : LEASE_REASON_RENEW;
}

bool
lease_check(struct lease *l, int64_t now_us)
{
    if (l->state != LEASE_HELD && l->state != LEASE_RENEWING) {
        return false;
    }
    if (now_us >= lease_lost_at(l)) {
        lease_found_lost(l, lease_expiry_reason(l));
        return false;
    }
    return true;
}

static void
lease_renewed(const struct redlock_extend_result *res, void *arg)
{
    struct lease_batch *b = arg;
    struct redlock_restore_item restore[LEASE_BATCH_MAX];
    size_t n = master_count(), nrestore = 0, j;
    int64_t now = util_now_us(), new_end = 0;

    for (j = 0; j < b->n; j++) {
        struct lease *l = b->leases[j];

        if (l == NULL) {
            continue;   /* released or lost while the round ran: a late reply */
        }
        l->batch = NULL;
        l->state = LEASE_HELD;
        switch (redlock_renewal_verdict(res->confirmed[j], res->denied[j], n, res->start_us,
                                        res->end_us, l->ttl_ms, l->validity_end_us,
                                        &new_end)) {
        case REDLOCK_RENEWED:
            l->validity_end_us = new_end;
            l->renew_at_us = res->start_us + l->ttl_ms * 1000 / 3;
            l->quorum_trouble = false;
            stats.renewals_ok++;
            if (res->absent[j] != 0) {
                /* A counted master lost the key: put it back while a quorum holds it. */
                restore[nrestore].rec = &l->rec;
                restore[nrestore].token = l->token;
                restore[nrestore].validity_end_us = l->validity_end_us;
                restore[nrestore].masters = res->absent[j];
                nrestore++;
            }
            break;
        case REDLOCK_DENIED:
        case REDLOCK_TOO_LATE:
            stats.renewals_failed++;
            lease_found_lost(l, LEASE_REASON_RENEW);
            continue;
        case REDLOCK_UNDECIDED:
            stats.renewals_failed++;
            if (!lease_valid(l, now)) {
                lease_found_lost(l, LEASE_REASON_QUORUM);
                continue;
            } else {
                /* Too few answers: try again soon, while validity lasts. */
                int64_t left = lease_lost_at(l) - now;
                int64_t retry = l->ttl_ms * 1000 / 10;

                if (retry > left / 3) {
                    retry = left / 3;
                }
                if (!l->quorum_trouble) {
                    log_warn("lock %.*s: renewal without a quorum (%s); retrying for %lld ms",
                             (int)l->rec.base_len, l->rec.base, res->error, (long long)(left / 1000));
                }
                l->quorum_trouble = true;
                l->renew_at_us = now + retry;
            }
            break;
        }
        lease_set_due(l);
        lease_heap_update(l);
    }
    if (nrestore > 0) {
        redlock_restore(restore, nrestore);
    }
    free(b);
    lease_arm();
}

static void
lease_send(struct lease_batch *b)
{
    struct redlock_extend_item items[LEASE_BATCH_MAX];
    size_t j, k;

    /*
     * A lost callback run while the batch was built may have ended a
     * lease already in it (its slot is NULL): close the gaps first.
     */
    for (j = 0, k = 0; j < b->n; j++) {
        if (b->leases[j] != NULL) {
            b->leases[k] = b->leases[j];
            b->leases[k]->batch_slot = k;
            k++;
        }
    }
    b->n = k;
    if (b->n == 0) {
        free(b);
        return;
    }
    for (j = 0; j < b->n; j++) {
        struct lease *l = b->leases[j];

        items[j].rec = &l->rec;
        items[j].token = l->token;
        items[j].ttl_ms = l->ttl_ms;
    }
    if (redlock_extend(items, b->n, lease_renewed, b) != 0) {
        /* Out of memory: leave them for the next tick. */
        for (j = 0; j < b->n; j++) {
            struct lease *l = b->leases[j];

            l->batch = NULL;
            l->state = LEASE_HELD;
            l->renew_at_us = util_now_us() + LEASE_WINDOW_US + 10000;   /* not this turn */
            lease_set_due(l);
            lease_heap_update(l);
        }
        free(b);
    }
}

static void
lease_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    int64_t now = util_now_us();
    struct lease_batch *b = NULL;
    struct lease *l;

    (void)fd;
    (void)what;
    (void)arg;
    while (lease_len > 0) {
        l = lease_heap[0];
        if (!lease_check(l, now)) {
            continue;   /* validity over and not renewed in time (also after a pause) */
        }
        if (l->state == LEASE_RENEWING || l->renew_at_us > now + LEASE_WINDOW_US) {
            break;
        }
        if (b == NULL) {
            b = xcalloc(1, sizeof(*b));
        }
        l->state = LEASE_RENEWING;
        l->batch = b;
        l->batch_slot = b->n;
        b->leases[b->n++] = l;
        lease_set_due(l);
        lease_heap_down(0);
        if (b->n == LEASE_BATCH_MAX) {
            lease_send(b);
            b = NULL;
        }
    }
    if (b != NULL) {
        lease_send(b);
    }
    lease_arm();
}
