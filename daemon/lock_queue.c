/*
 * lock_queue.c: the lock table's waiters: queue, tries, wake-ups, hand-over.
 *
 * What each event means for a waiter (a round's end, its timer, a release
 * heard, a hold given up) is decided by daemon/waiter.c, whose header
 * lists the waiter's states and their transitions; this file carries the
 * steps out: rounds on the masters, timers, answers, subscriptions.
 *
 * Waiting is first in, first out: only the oldest waiting LOCK of a
 * name (the head) asks the masters, and only when the holds this daemon
 * has of the name leave it room (none for an exclusive head, no
 * exclusive one for a shared head, fewer than the limit for a counted
 * head); the others wait without polling.  A head that is granted makes
 * the next one head at once, so shared heads are granted one after the
 * other, and an exclusive waiter stops the shared ones behind it.
 * When a session of this daemon releases a name that has a head, the
 * lease is handed over: one round gives the key the head's token where
 * it still holds the old one, so it is never free in between.  A LOCK
 * with wait=0 (and TRYLOCK) is one attempt at once and never queues.
 * Waking a new head is always deferred to its timer, never done inside
 * the call that made it head.
 *
 * Holders elsewhere (another daemon, a lease-mode lock, a foreign
 * Redlock client): while a name has queued waiters this daemon is
 * subscribed to its release channel on every master, and a release
 * announced there wakes the head at once.  Without a message the head
 * retries when the holder's lease, as reported by the quorum, runs out
 * (plus a jitter of up to lock.retry_delay_ms): a lease that expired
 * announces nothing.
 *
 * No lost wake-up.  A refused try that waits marks the name on each
 * master that refused it, and every release that deletes a mark
 * announces it (daemon/redlock.h, redlock_release: clean-ups too).  A
 * master publishes only to the subscribers it has, so a try counts on
 * its mark only when it reaches a master after that master confirmed
 * the subscription: when a wait starts, the head's next try is held
 * until the subscription is confirmed on every master whose subscriber
 * link is up (or for one round deadline at most, lock_watch), and each
 * later confirmation (a subscriber link that came back, or one slower
 * than that deadline) makes the head try again.  The head's tries
 * before (the first, uncontended one) cost nothing more: a release
 * between them and the confirmed subscription is found by the try after
 * it.  The other ways a name changes hands: a hand-over's swap leaves
 * the mark in place (the name is never free, and the new holder's
 * release announces); a BREAK announces every token it ends, and an
 * ungate its gate, mark or none (a writer counts its gate as closed
 * wherever an answer of its rounds was not counted, daemon/waiter.c, so
 * that no gate it did not hear of outlives its wait unannounced); the
 * channel is left only once no LOCK of the name queues here.  What is
 * left is the holder's expiry, which announces nothing and which the
 * fallback (its ttl plus jitter) covers.
 *
 * Turns: hand-overs alone would keep a busy name inside one daemon for
 * ever, since a swap announces nothing.  A grant tells how many clients
 * are subscribed to the name's channel; when other daemons are among
 * them, this daemon hands over only as many times as it had waiters when
 * its turn began, then releases with an announcement and keeps its own
 * head back for about one round deadline, so that another daemon's head
 * takes the next turn.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bsd/sys/tree.h>
#include <event2/event.h>
#include <event2/event_struct.h>

#include "conf/conf.h"
#include "daemon/ctx.h"
#include "daemon/lease.h"
#include "daemon/lock.h"
#include "daemon/lock_table.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/redlock.h"
#include "daemon/stats.h"
#include "daemon/util.h"
#include "daemon/waiter.h"
#include "daemon/xmalloc.h"
#include "proto/proto.h"

static size_t   lock_nwaiters; /* waiters queued */
static uint64_t lock_epoch = 1; /* bumped when a queue or a hold changes (lock_changed) */
static struct waiter *lock_head(struct lock *lk);

static struct waiter_env waiter_env_now(void);
static void waiter_try(struct waiter *w, bool pick);

size_t
lock_count_waiters(void)
{
    return lock_nwaiters;
}

/*
 * Whether w stands in its name's line.  A LOCK of one name always does.
 * A set's member does only while every member before it (in the
 * canonical order) is the ready head of its name: a set keeps its place
 * in the queues of the names up to the first one it waits for, and lets
 * the LOCKs behind it in the later ones go, so that it never makes a
 * LOCK wait that it waits for itself (a session holding a name of the
 * set, asking for a later one).  Each answer looks only at names below
 * w's, so the question always ends; it is kept until the queues or the
 * holds change (lock_changed).
 */
static bool
waiter_in_line(struct waiter *w)
{
    const struct lock_set *set = w->set;
    bool ok = true;
    size_t i;

    if (set == NULL) {
        return true;
    }
    if (w->line_epoch == lock_epoch) {
        return w->in_line;
    }
    for (i = 0; ok && set->member[i] != w; i++) {
        struct waiter *m = set->member[i];

        ok = m->lock != NULL && m == lock_ready_head(m->lock);
    }
    w->line_epoch = lock_epoch;
    w->in_line = ok;
    return ok;
}

void
lock_changed(void)
{
    lock_epoch++;
    lock_set_changed();
}

uint64_t
lock_epoch_now(void)
{
    return lock_epoch;
}

/*
 * The oldest waiter that queues (not a wait=0 attempt) and stands in
 * line, or NULL; kept until the queues or the holds change
 * (lock_changed), so that looking again costs nothing.
 */
static struct waiter *
lock_head(struct lock *lk)
{
    struct waiter *w;

    if (lk->head_epoch == lock_epoch) {
        return lk->head;
    }
    TAILQ_FOREACH(w, &lk->waiters, link) {
        if (!W_ONCE(w) && waiter_in_line(w)) {
            break;
        }
    }
    lk->head = w;
    lk->head_epoch = lock_epoch;
    return w;
}

/* The head, when this daemon's holds leave it room to ask the masters; else NULL. */
struct waiter *
lock_ready_head(struct lock *lk)
{
    struct waiter *w = lock_head(lk);

    return w != NULL && waiter_room(w->life.kind, lk->nholders, lk->nexclusive, lk->limit)
           ? w : NULL;
}

/*
 * The ttl of the first exclusive LOCK queued here for lk (its gate's, on
 * the masters), or 0 when none is queued.
 */
static int64_t
lock_queued_exclusive(const struct lock *lk)
{
    struct waiter *w;

    TAILQ_FOREACH(w, &lk->waiters, link) {
        if (!W_ONCE(w) && w->life.kind == REDLOCK_EXCLUSIVE) {
            return w->life.ttl_ms;
        }
    }
    return 0;
}

/* The label w writes with its record on the masters: only one asked for. */
static const char *
waiter_label(const struct waiter *w)
{
    return w->label_asked && w->label[0] != '\0' ? w->label : NULL;
}

/* The record a waiter's next try asks for. */
static void
waiter_rec(const struct waiter *w, struct redlock_rec *rec)
{
    rec->base = w->key;
    rec->base_len = w->key_len;
    rec->kind = w->life.kind;
    rec->slot = w->slot;
    rec->limit = w->limit;
    rec->labelled = waiter_label(w) != NULL;
    rec->delay_ms = w->delay_ms;
}

/* A permit for a counted head to propose: one no hold of this daemon has (waiter_pick_permit). */
static unsigned
lock_pick_slot(struct lock *lk)
{
    unsigned char mine[(REDLOCK_LIMIT_MAX + 7) / 8];
    struct hold *h;

    memset(mine, 0, sizeof(mine));
    TAILQ_FOREACH(h, &lk->holders, lock_link) {
        mine[h->lease.rec.slot / 8] |= (unsigned char)(1u << (h->lease.rec.slot % 8));
    }
    return waiter_pick_permit(mine, lk->limit, &lk->next_slot);
}

/*
 * Let a waiter look again: from its timer on the next loop turn, or,
 * when its round is in flight (that round may have run before what woke
 * it), at once after the round if it finds the name busy.
 */
void
waiter_rouse(struct waiter *w)
{
    w = W_LEAD(w);      /* a set looks again as a whole */
    if (waiter_wake(&w->life)) {
        event_active(&w->retry, EV_TIMEOUT, 0);
    }
}

/* Let the name's head, if any and if this daemon's holds leave it room, look again. */
void
lock_wake_head(struct lock *lk)
{
    struct waiter *w = lock_ready_head(lk);

    if (w != NULL) {
        waiter_rouse(w);
    }
}

/*
 * The hand-over round ended: answer the releaser (OK only where a
 * quorum still held its token and swapped it), then the waiter.
 */
static void
lock_handover_done(const struct redlock_acquire_result *res, void *arg)
{
    struct lock_handover *ho = arg;
    struct waiter *w = ho->waiter;
    struct redlock_release_result rel = { .v = res->v };
    struct redlock_rec rec;

    /*
     * Masters that missed the round may still hold the old token.  One
     * that is only late runs the swap before anything sent after it (a
     * connection keeps its order), so only a failed one needs the release.
     */
    if (res->failed > 0) {
        waiter_rec(w, &rec);
        rec.labelled = true;    /* the old holder's label, if it had one */
        redlock_release(&rec, ho->old_token, NULL, NULL);
    }
    rel.v.confirmed = res->swapped;
    rel.v.outcome = res->released;
    if (res->v.outcome == REDLOCK_GRANTED && rel.v.outcome == REDLOCK_RELEASED) {
        stats.handovers++;
    }
    if (ho->op != NULL) {
        lock_unlock_done(&rel, ho->op);
    }
    free(ho);
    waiter_acquired(res, w);
}

/*
 * Give up a hold (UNLOCK to zero, or its session closed): hand it over
 * to the head waiter, yield the name to another daemon's turn, or
 * compare-and-delete it on every master (waiter_give_up decides).  op,
 * when not NULL, is the UNLOCK to answer once the masters did.  Frees
 * the hold.
 */
void
hold_give_up(struct hold *h, struct lock_op *op)
{
    struct lock *lk = h->lock;
    struct waiter *w = lock_head(lk);
    struct waiter_env env = waiter_env_now();
    struct waiter_give_up_step st;
    struct lock_handover *ho;
    struct redlock_rec rec;
    /* Ended without UNLOCK (op NULL: closed, shut down): its lock-delay applies. */
    bool delay = op == NULL && h->lease.rec.delay_ms > 0;

    if (delay || (w != NULL && w->set != NULL)) {
        /*
         * No hand-over, no turn: nobody gets it during the delay; and a
         * set takes its names all at once, never one by hand-over
         * (released, and woken).
         */
        w = NULL;
    }
    st = waiter_give_up(w != NULL ? &w->life : NULL, h->lease.rec.kind, lock_stopping,
                        lk->remote, lk->turn_left, ctx.conf->node_timeout_ms * 1000, &env);
    lk->turn_left = st.turn_left;
    if (st.what == WAITER_GIVE_UP_YIELD) {
        stats.yields++;
        lk->yield_until_us = st.yield_until_us;
        memcpy(lk->yield_token, h->lease.token, UTIL_TOKEN_HEX);
    }
    if (st.what == WAITER_GIVE_UP_HAND_OVER) {
        ho = xmalloc(sizeof(*ho));
        ho->waiter = w;
        ho->op = op;
        memcpy(ho->old_token, h->lease.token, sizeof(ho->old_token));
        event_del(&w->retry);
        w->slot = h->lease.rec.slot;    /* a permit: the head takes this one */
        waiter_rec(w, &rec);
        redlock_acquire(&rec, w->token, w->life.ttl_ms, h->lease.token,
                        (w->fence ? REDLOCK_ACQUIRE_FENCE : 0) | REDLOCK_ACQUIRE_PEERS,
                        w->gate_id, waiter_label(w), lock_handover_done, ho);
    } else if (delay) {
        redlock_release_delayed(&h->lease.rec, h->lease.token, h->lease.rec.delay_ms, NULL,
                                NULL);
    } else {
        redlock_release(&h->lease.rec, h->lease.token, op != NULL ? lock_unlock_done : NULL,
                        op);
    }
    stats.releases++;
    hold_drop(h);
}

/* Detach one waiter from its entry (the entry may be freed); was_head: it headed its queue. */
static void
waiter_unqueue_one(struct waiter *w, bool was_head)
{
    struct lock *lk = w->lock;

    if (lk == NULL) {
        return;
    }
    TAILQ_REMOVE(&lk->waiters, w, link);
    lock_changed();
    lk->nwaiters--;
    lock_nwaiters--;
    w->lock = NULL;
    if (!W_ONCE(w) && --lk->nqueued == 0 && lk->watched) {
        lk->watched = false;
        lk->subscribe_until_us = 0;
        redlock_watch(lk->key, lk->key_len, false);
    }
    if (was_head) {
        lock_wake_head(lk);     /* the next in line may try now */
    }
    lock_put(lk);
}

/* Detach a waiter from its entry, a set's lead from every one of its names'. */
void
waiter_unqueue(struct waiter *w)
{
    size_t i;

    bool heads[REDLOCK_SET_MAX];

    if (w->set == NULL) {
        waiter_unqueue_one(w, w->lock != NULL && w == lock_head(w->lock));
        return;
    }
    /*
     * Which members head their queues, found before any of them goes: a
     * member stands in line only behind the ones before it, so once they
     * are gone it would not look like the head it was, and the LOCK
     * behind it would not be woken.
     */
    for (i = 0; i < w->set->n; i++) {
        struct waiter *m = w->set->member[i];

        heads[i] = m->lock != NULL && m == lock_head(m->lock);
    }
    for (i = 0; i < w->set->n; i++) {
        waiter_unqueue_one(w->set->member[i], heads[i]);
    }
}

void
waiter_free(struct waiter *w)
{
    if (w->set != NULL && (w->life.gated || w->set->claimed)) {
        /* A set's gates: where a master said so, or may have, unheard (lock_set_won). */
        for (size_t i = 0; i < w->set->n; i++) {
            redlock_ungate(w->set->member[i]->key, w->set->member[i]->key_len, w->gate_id);
        }
    } else if (w->life.gated) {
        redlock_ungate(w->key, w->key_len, w->gate_id);
    }
    if (w->ghost[0] != '\0' && w->set != NULL) {
        lock_set_release(w, w->ghost, true);
    } else if (w->ghost[0] != '\0') {
        /* Wherever the ghost landed and was not taken over (another permit, say). */
        lock_abandon(w->key + w->name_off, w->key_len - w->name_off, w->ghost);
    }
    waiter_unqueue(w);
    if (w->set != NULL) {
        lock_set_free(w);
    }
    event_del(&w->retry);
    free(w->noquorum);
    free(w);
}

/* The waiter's LOCK/TRYLOCK is answered with an outcome STATS counts: its latency. */
void
waiter_observe(const struct waiter *w)
{
    stats_observe_acquire(util_now_us() - w->start_us);
}

/* Answer the waiter's client and free the waiter. */
void
waiter_finish(struct waiter *w, enum lock_outcome outcome, int64_t ttl_ms,
              const char *error)
{
    struct lock_client *c = w->client;
    struct lock_acquire_result res;
    char name[PROTO_NAME_MAX];
    char *owned = NULL, *text = NULL;

    /* Free first: the hook may start the client's next operation. */
    if (error != NULL && error == w->noquorum) {
        owned = w->noquorum;        /* the text outlives the waiter */
        w->noquorum = NULL;
    }
    memset(&res, 0, sizeof(res));
    res.v.outcome = outcome;
    if (w->set != NULL) {
        text = w->set->text;        /* the set's names outlive it */
        res.v.name = text;
        res.v.name_len = w->set->text_len;
        w->set->text = NULL;
    } else {
        res.v.name_len = w->key_len - w->name_off;
        memcpy(name, w->key + w->name_off, res.v.name_len);
        res.v.name = name;
    }
    res.permit = -1;
    res.busy_ttl_ms = ttl_ms;
    res.delayed = outcome == LOCK_BUSY && w->delayed;
    res.v.error = error;
    c->waiter = NULL;
    waiter_free(w);
    c->hooks->acquired(c, &res);
    free(owned);
    free(text);
}

/*
 * Hear releases of the name made anywhere, from now until its queue is
 * empty.  Not done for a LOCK that finds the name free here: most are
 * granted at once, and subscribing first would double the masters'
 * work of every uncontended LOCK (a SUBSCRIBE, then an UNSUBSCRIBE).
 * Until every master whose subscriber link is up confirmed it, a
 * refusal's mark could be deleted by a release that publishes to
 * nobody: the head's next try waits for the confirmations
 * (waiter_on_timer, lock_subscribed), one round deadline at most, so
 * that a slow or dead subscriber link never stalls a waiter for long
 * (its confirmation, when it comes, makes the head try again).
 * Nothing when the name is watched already.
 */
static void
lock_watch(struct lock *lk)
{
    if (lk->watched) {
        return;
    }
    lk->watched = true;
    redlock_watch(lk->key, lk->key_len, true);
    if (!redlock_watch_ready(lk->key, lk->key_len)) {
        lk->subscribe_until_us = util_now_us() + ctx.conf->node_timeout_ms * 1000;
    }
}

/* Run the waiter's timer at at_us (CLOCK_MONOTONIC; the policy kept it within wait=). */
static void
waiter_timer_at(struct waiter *w, int64_t at_us)
{
    int64_t delay_us = at_us - util_now_us();
    struct timeval tv;

    if (delay_us < 0) {
        delay_us = 0;
    }
    tv.tv_sec = (time_t)(delay_us / 1000000);
    tv.tv_usec = (suseconds_t)(delay_us % 1000000);
    event_add(&w->retry, &tv);
}

/* What every decision of the policy is given: now, the retry jitter, the draw. */
static struct waiter_env
waiter_env_now(void)
{
    struct waiter_env env = { util_now_us(), ctx.conf->retry_delay_ms * 1000, util_random };

    return env;
}

/* Queued: subscribe to the name's releases, and arm the timer for wait= (none for wait=inf). */
void
waiter_wait(struct waiter *w)
{
    size_t i;

    if (!W_ONCE(w) && w->set != NULL) {
        for (i = 0; i < w->set->n; i++) {
            lock_watch(w->set->member[i]->lock);
        }
    } else if (!W_ONCE(w)) {
        lock_watch(w->lock);
    }
    if (w->life.deadline_us != INT64_MAX) {
        waiter_timer_at(w, w->life.deadline_us);
    }
}

/*
 * Answer the waiter with a refusal or an end the policy chose (answer,
 * not OK), counted in STATS.  ttl_ms: BUSY's holder time left; text:
 * KIND's, or NOQUORUM's (NULL: the one kept from the last attempt).
 */
void
waiter_refuse(struct waiter *w, enum waiter_answer answer, int64_t ttl_ms, const char *text)
{
    switch (answer) {
    case WAITER_ANSWER_BUSY:
        stats.acquire_busy++;
        waiter_observe(w);
        waiter_finish(w, LOCK_BUSY, ttl_ms, NULL);
        return;
    case WAITER_ANSWER_NOQUORUM:
        stats.acquire_noquorum++;
        waiter_observe(w);
        waiter_finish(w, LOCK_NOQUORUM, 0, text != NULL ? text : w->noquorum);
        return;
    case WAITER_ANSWER_KIND:
        stats.kind_refusals++;
        waiter_observe(w);
        waiter_finish(w, LOCK_WRONG_KIND, 0, text);
        return;
    case WAITER_ANSWER_SHUTDOWN:
        waiter_finish(w, LOCK_SHUTDOWN, 0, "the daemon is stopping");
        return;
    case WAITER_ANSWER_CANCELLED:
        waiter_finish(w, LOCK_CANCELLED, 0, NULL);
        return;
    case WAITER_ANSWER_TIMEOUT:
    default:
        stats.acquire_timeout++;
        waiter_observe(w);
        waiter_finish(w, LOCK_TIMEOUT, 0, NULL);
        return;
    }
}

/*
 * The waiter's timer: a retry, a wake-up (it became head, or the local
 * holder let go), or its wait= deadline; waiter_on_timer says which.
 */
static void
waiter_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct waiter *w = arg;
    struct waiter_env env = waiter_env_now();
    struct waiter_timer_step st;
    struct lock *lk = w->lock, *m;
    int64_t yield_until = 0, subscribe_until = 0;
    bool ready, watch_ready = true;
    size_t i, n = w->set != NULL ? w->set->n : 1;

    (void)fd;
    (void)what;
    if (lk == NULL) {
        return;     /* cancelled in a round: its end answers it */
    }
    /* A set: ready when it heads every name; held back by any name's yield or subscription. */
    ready = w->set != NULL ? lock_set_ready(w->set) : w == lock_ready_head(lk);
    for (i = 0; i < n; i++) {
        m = w->set != NULL ? w->set->member[i]->lock : lk;
        yield_until = m->yield_until_us > yield_until ? m->yield_until_us : yield_until;
        if (m->subscribe_until_us != 0) {
            subscribe_until = m->subscribe_until_us > subscribe_until ? m->subscribe_until_us
                              : subscribe_until;
            watch_ready = watch_ready && redlock_watch_ready(m->key, m->key_len);
        }
    }
    if (!ready && w->set != NULL) {
        lock_set_let_by(w->set);
    }
    st = waiter_on_timer(&w->life, &env, ready, yield_until, subscribe_until,
                         ready && subscribe_until != 0 && watch_ready);
    for (i = 0; st.subscribed && i < n; i++) {
        (w->set != NULL ? w->set->member[i]->lock : lk)->subscribe_until_us = 0;
    }
    switch (st.what) {
    case WAITER_TIMER_EXPIRE:
        waiter_refuse(w, waiter_refusal(&w->life), 0, NULL);
        break;
    case WAITER_TIMER_REARM:
        waiter_timer_at(w, st.at_us);
        break;
    case WAITER_TIMER_QUEUE:
        waiter_wait(w);
        break;
    case WAITER_TIMER_TRY:
        if (st.fallback) {
            stats.fallback_retries++;     /* no announcement came in time */
        }
        waiter_try(w, true);
        break;
    case WAITER_TIMER_NOTHING:
        break;
    }
}

void
waiter_grant_lease(struct waiter *w, const struct redlock_acquire_result *res,
                   struct lock_acquire_result *out)
{
    struct lock_client *c = w->client;
    char token[UTIL_TOKEN_HEX + 1];

    /* Nothing to keep: the lock is the keys on the masters and the token. */
    stats.lease_grants++;
    memcpy(token, w->token, sizeof(token));
    out->token = token;
    out->validity_ms = (res->validity_end_us - util_now_us()) / 1000;
    waiter_observe(w);
    c->waiter = NULL;
    waiter_free(w);
    c->hooks->acquired(c, out);
}

/* Turn a granted waiter into the entry's lease and answer OK; handover: its
 * round was a hand-over (the daemon's turn goes on). */
static void
waiter_grant(struct waiter *w, const struct redlock_acquire_result *res, bool handover)
{
    struct lock *lk = w->lock;
    struct lock_client *c = w->client;
    struct lock_acquire_result out;
    struct redlock_rec rec;
    struct hold *h, *old;

    stats.acquire_ok++;
    if (res->fence > 0) {
        stats.fenced_grants++;
    }
    if (w->life.kind == REDLOCK_SHARED) {
        stats.shared_grants++;
    } else if (w->life.kind == REDLOCK_PERMIT) {
        stats.counted_grants++;
    }
    waiter_rec(w, &rec);
    memset(&out, 0, sizeof(out));
    out.v.outcome = LOCK_OK;
    out.v.name = lk->name;
    out.v.name_len = lk->name_len;
    out.fence = res->fence;
    out.kind = lock_kind_of(w->life.kind);
    out.limit = w->limit;
    out.permit = w->life.kind == REDLOCK_PERMIT ? (int)w->slot : -1;
    if (w->lease_mode) {
        char name[PROTO_NAME_MAX];

        memcpy(name, lk->name, lk->name_len);   /* the entry may go with the waiter */
        out.v.name = name;
        waiter_grant_lease(w, res, &out);
        return;
    }
    h = xcalloc(1, sizeof(*h));
    if ((old = lock_same_record(lk, &rec)) != NULL) {
        /*
         * A quorum granted us a record we believed held here: the old
         * lease's keys are gone from a majority (masters restarted
         * empty), so it is no longer exclusive.
         */
        log_warn("lock %s: granted again while held here; the older lease is lost",
                 lk->key);
        hold_lost(old, LEASE_REASON_QUORUM);
    }
    /* Our own subscription counts while this name has one. */
    lk->remote = res->subscribers > (lk->watched ? 1u : 0u);
    if (!handover) {
        /* A new turn: one hand-over for each session queued behind. */
        lk->turn_left = waiter_turn(&w->life, lk->nqueued);
    }
    rec.base = lk->key;     /* the lease borrows the entry's key */
    lease_start(&h->lease, &rec, w->token, w->life.ttl_ms, res->fence, res->v.start_us,
                res->validity_end_us);
    h->granted_us = res->v.start_us;
    memcpy(h->label, w->label, sizeof(h->label));
    hold_insert(h, lk, c);
    out.holds = 1;
    out.validity_ms = lease_validity_left_ms(&h->lease, util_now_us());
    waiter_observe(w);
    c->waiter = NULL;
    waiter_free(w);
    c->hooks->acquired(c, &out);
}

/*
 * A release of the waiter's token was sent: its next try takes a new
 * one.  The release may reach a master late (after a new link's
 * requests, or held up in the network), and a compare-and-delete that
 * matched a later grant of the same token would delete it there, behind
 * the daemon's back.  ghost: a master's link failed after the try was
 * sent, so its record may also land there without the release (the
 * failed link cannot carry it): the old token becomes the ghost, which
 * the next tries take over instead of waiting out its ttl.  False, the
 * waiter answered, when getrandom failed.
 */
static bool
waiter_retire_token(struct waiter *w, bool ghost)
{
    if (ghost) {
        memcpy(w->ghost, w->token, sizeof(w->ghost));
    }
    memcpy(w->retired, w->token, sizeof(w->retired));
    if (util_token(w->token) == 0) {
        return true;
    }
    waiter_finish(w, LOCK_FAILED, 0, "getrandom failed");
    return false;
}

/* Whether every name the waiter queues for is subscribed to (lock_watch). */
static bool
waiter_watched(const struct waiter *w)
{
    size_t i;

    if (w->set == NULL) {
        return w->lock == NULL || w->lock->watched;
    }
    for (i = 0; i < w->set->n; i++) {
        if (w->set->member[i]->lock != NULL && !w->set->member[i]->lock->watched) {
            return false;
        }
    }
    return true;
}

/* What the policy reads of a round's end. */
static struct waiter_round_end
waiter_round_end(const struct waiter *w, const struct redlock_acquire_result *res)
{
    struct waiter_round_end r = {
        .outcome = res->v.outcome,
        .stopping = lock_stopping,
        .uncounted = res->v.answered < master_count(),
        .readers = res->readers,
        .gated = res->gated,
        .split = res->split,
        .unanswered = res->unanswered > 0,
        .watched = W_ONCE(w) || waiter_watched(w),
        .free_slot = res->free_slot,
        .holder_id = res->holder_id,
        .ttl_ms = res->busy_ttl_ms,
    };

    return r;
}

/* A round of the waiter ended (its own try, or a hand-over to it): carry out the policy's step. */
void
waiter_acquired(const struct redlock_acquire_result *res, void *arg)
{
    struct waiter *w = arg;
    struct waiter_env env = waiter_env_now();
    struct waiter_round_end r = waiter_round_end(w, res);
    bool handover = w->life.state == WAITER_HANDING_OVER;
    struct waiter_round_step st = waiter_on_round(&w->life, &env, &r);
    struct redlock_rec rec;
    char text[PROTO_NAME_MAX + 64];

    w->delayed = res->v.outcome == REDLOCK_BUSY && res->delayed;
    if (res->v.outcome == REDLOCK_BUSY && res->claim_held && w->set == NULL) {
        /*
         * Refused by a waiting set's claim (no hold: the set waits for a
         * later name).  After its own ttl of that, it takes the claim
         * over: the set may wait for a name this client holds.
         */
        if (w->claim_since_us == 0) {
            w->claim_since_us = env.now_us;
        } else if (env.now_us - w->claim_since_us >= w->life.ttl_ms * 1000) {
            w->take_claim = true;
        }
    } else if (res->v.outcome != REDLOCK_GRANTED) {
        w->claim_since_us = 0;
        w->take_claim = false;
    }

    waiter_rec(w, &rec);
    if (st.abandon && w->set != NULL) {
        lock_set_release(w, w->token, true);
    } else if (st.abandon) {
        /* Released where it may have landed, announced; our next head wakes when done. */
        lock_abandon(w->key + w->name_off, w->key_len - w->name_off, w->token);
    }
    if (st.release && w->set != NULL) {
        lock_set_release(w, w->token, false);
    } else if (st.release) {
        redlock_release(&rec, w->token, NULL, NULL);
    }
    if (st.retire && !waiter_retire_token(w, st.ghost)) {
        return;
    }
    if (st.keep_noquorum) {
        free(w->noquorum);
        w->noquorum = xstrdup(res->v.error);
    } else if (!w->life.noquorum) {
        free(w->noquorum);      /* this attempt had a quorum of answers */
        w->noquorum = NULL;
    }
    if (st.watch && w->set != NULL) {
        for (size_t i = 0; i < w->set->n; i++) {
            lock_watch(w->set->member[i]->lock);
        }
    } else if (st.watch) {
        lock_watch(w->lock);
    }
    switch (st.what) {
    case WAITER_ROUND_GRANT:
        if (w->set != NULL) {
            lock_set_grant(w, res);
        } else {
            waiter_grant(w, res, handover);
        }
        break;
    case WAITER_ROUND_HOP:
        w->slot = st.slot;
        waiter_try(w, false);
        break;
    case WAITER_ROUND_RETRY:
        /* Refused by a claim: look again once its ttl of claims is over, not the claim's. */
        waiter_timer_at(w, w->claim_since_us != 0
                           && w->claim_since_us + w->life.ttl_ms * 1000 < st.at_us
                           ? w->claim_since_us + w->life.ttl_ms * 1000 : st.at_us);
        break;
    case WAITER_ROUND_ANSWER:
        if (st.answer == WAITER_ANSWER_KIND && w->set != NULL) {
            snprintf(text, sizeof(text), "a name of the set is held with %.*s; a set's "
                     "names are held exclusively", 32, res->v.error);
        } else if (st.answer == WAITER_ANSWER_KIND) {
            lock_kind_text(text, sizeof(text), w->key + w->name_off,
                           w->key_len - w->name_off, res->v.error);
        }
        waiter_refuse(w, st.answer, st.ttl_ms,
                      st.answer == WAITER_ANSWER_KIND ? text
                      : st.answer == WAITER_ANSWER_NOQUORUM
                        && res->v.outcome == REDLOCK_NOQUORUM ? res->v.error : NULL);
        break;
    }
}

/*
 * Ask the masters (the policy moved the waiter to ACQUIRING).  A permit
 * proposes one this daemon does not hold (pick), or the one a refusal
 * pointed to (w->slot).  A LOCK that queues marks the name as waited for
 * where it is refused (an exclusive one may close the gate against new
 * shared holders); with others queued behind it, a grant also tells
 * whether other daemons wait (turns: hold_give_up).
 */
static void
waiter_try(struct waiter *w, bool pick)
{
    struct redlock_rec rec;
    unsigned flags = w->fence ? REDLOCK_ACQUIRE_FENCE : 0;
    const char *old = NULL;

    if (w->set != NULL) {
        lock_set_try(w);
        return;
    }

    if (!W_ONCE(w)) {
        flags |= REDLOCK_ACQUIRE_WAIT | (w->life.gated ? REDLOCK_ACQUIRE_GATED : 0);
    }
    if (w->lock != NULL && w->lock->nqueued > 1) {
        flags |= REDLOCK_ACQUIRE_PEERS;
    }
    if (w->life.kind == REDLOCK_PERMIT && pick && w->lock != NULL) {
        w->slot = lock_pick_slot(w->lock);
    }
    waiter_rec(w, &rec);
    if (w->ghost[0] != '\0') {
        old = w->ghost;     /* an earlier try of ours that may have landed: take it over */
        flags |= REDLOCK_ACQUIRE_ADOPT;
    }
    if (w->take_claim) {
        flags |= REDLOCK_ACQUIRE_TAKE_CLAIM;
    }
    redlock_acquire(&rec, w->token, w->life.ttl_ms, old, flags, w->gate_id, waiter_label(w),
                    waiter_acquired, w);
}

void
waiter_enqueue(struct waiter *w, struct lock *lk)
{
    lock_changed();
    w->lock = lk;
    evtimer_assign(&w->retry, ctx.base, waiter_timer_cb, w);
    TAILQ_INSERT_TAIL(&lk->waiters, w, link);
    lk->nwaiters++;
    lock_nwaiters++;
    if (!W_ONCE(w)) {
        lk->nqueued++;
    }
}

/*
 * The client asks again for a name it holds in session mode (h): the
 * same kind, limit and fence only (else CONFLICT); the masters see one
 * lock, only the count changes.
 */
static void
lock_reenter(struct lock_client *c, struct hold *h, const char *name, size_t name_len,
             const struct lock_request *req, int64_t start_us)
{
    enum redlock_kind kind = lock_record_kind(req->kind);
    struct lock_acquire_result res;
    char text[PROTO_NAME_MAX + 96];

    if (h->lease.rec.kind != kind) {
        snprintf(text, sizeof(text), "this session holds %.*s as %s lock; a re-entrant "
                 "LOCK must ask for the same kind (UNLOCK it first)", (int)name_len, name,
                 lock_kind_word(h->lease.rec.kind));
        lock_reply(c, LOCK_VERB_ACQUIRE, LOCK_CONFLICT, name, name_len, text);
        return;
    }
    if (kind == REDLOCK_PERMIT && h->lease.rec.limit != req->limit) {
        snprintf(text, sizeof(text), "this session holds %.*s with limit=%u; a re-entrant "
                 "LOCK must ask for the same limit (UNLOCK it first)", (int)name_len, name,
                 h->lease.rec.limit);
        lock_reply(c, LOCK_VERB_ACQUIRE, LOCK_CONFLICT, name, name_len, text);
        return;
    }
    if (req->fence && h->lease.fence == 0) {
        lock_reply(c, LOCK_VERB_ACQUIRE, LOCK_CONFLICT, name, name_len,
                   "this session holds the lock without a fence; a re-entrant LOCK "
                   "cannot add one (UNLOCK it first)");
        return;
    }
    /* Re-entry: the masters see one lock; only the count changes. */
    h->holds++;
    stats.acquire_reentered++;
    stats_observe_acquire(util_now_us() - start_us);
    memset(&res, 0, sizeof(res));
    res.v.outcome = LOCK_OK;
    res.v.name = name;
    res.v.name_len = name_len;
    res.holds = h->holds;
    res.fence = h->lease.fence;
    res.kind = req->kind;
    res.limit = h->lease.rec.limit;
    res.permit = kind == REDLOCK_PERMIT ? (int)h->lease.rec.slot : -1;
    res.validity_ms = lease_validity_left_ms(&h->lease, util_now_us());
    c->hooks->acquired(c, &res);
}

void
lock_acquire(struct lock_client *c, const char *name, size_t name_len,
             const struct lock_request *req)
{
    struct lock *lk;
    struct waiter *w;
    struct hold *h = NULL;
    char limit[PROTO_NAME_MAX * 2 + 192];
    int64_t start_us = util_now_us(), ttl;
    enum redlock_kind kind = lock_record_kind(req->kind);

    if (lock_stopping) {
        lock_reply(c, LOCK_VERB_ACQUIRE, LOCK_SHUTDOWN, name, name_len, "the daemon is stopping");
        return;
    }
    lk = lock_find(name, name_len);
    if (lk != NULL && (h = client_hold(c, lk)) != NULL
        && !lease_check(&h->lease, util_now_us())) {
        /* Its validity ran out before the timer said so: lost (reported), not re-entered. */
        lk = lock_find(name, name_len);
        h = NULL;
    }
    if (h != NULL && h->set != NULL && h->set->reported) {
        hold_set_settle(h);     /* part of a set lost already: gone now */
        lk = lock_find(name, name_len);
        h = NULL;
    }
    if (!req->lease_mode && h != NULL && h->set != NULL) {
        lock_set_conflict(limit, sizeof(limit), h, "a LOCK");
        lock_reply(c, LOCK_VERB_ACQUIRE, LOCK_CONFLICT, name, name_len, limit);
        return;
    }
    if (!req->lease_mode && h != NULL) {
        lock_reenter(c, h, name, name_len, req, start_us);
        return;
    }
    if (lk != NULL && !lock_kind_fits(lk, req, limit, sizeof(limit))) {
        stats.kind_refusals++;
        lock_reply(c, LOCK_VERB_ACQUIRE, LOCK_WRONG_KIND, name, name_len, limit);
        return;
    }
    if (!req->lease_mode && (int64_t)c->nholds >= ctx.conf->max_locks_per_client) {
        snprintf(limit, sizeof(limit), "this session holds %zu locks (limits.max_locks_per_client)",
                 c->nholds);
        lock_reply(c, LOCK_VERB_ACQUIRE, LOCK_LIMIT, name, name_len, limit);
        return;
    }
    lk = lock_get(name, name_len);
    if (lk->nholders == 0 && lk->nwaiters == 0) {
        /* A new entry: the name is of the kind its first request asks for. */
        lk->counted = req->kind == LOCK_KIND_COUNTED;
        lk->limit = lk->counted ? req->limit : 0;
        lk->next_slot = lk->counted ? (unsigned)util_random(req->limit) : 0;
    }
    w = xcalloc(1, sizeof(*w) + lk->key_len + 1);
    if (util_token(w->token) != 0) {
        free(w);
        lock_put(lk);
        lock_reply(c, LOCK_VERB_ACQUIRE, LOCK_FAILED, name, name_len, "getrandom failed");
        return;
    }
    memcpy(w->gate_id, w->token, sizeof(w->gate_id));
    memcpy(w->key, lk->key, lk->key_len + 1);
    w->key_len = lk->key_len;
    w->name_off = lk->key_len - lk->name_len;
    w->lock = lk;
    w->client = c;
    snprintf(w->label, sizeof(w->label), "%.*s",
             (int)(req->label_len < REDLOCK_LABEL_MAX ? req->label_len : REDLOCK_LABEL_MAX),
             req->label != NULL ? req->label : "");
    w->label_asked = req->label_asked;
    w->delay_ms = kind == REDLOCK_EXCLUSIVE && !req->lease_mode ? req->delay_ms : 0;
    w->lease_mode = req->lease_mode;
    w->fence = req->fence || ctx.conf->fence == CONF_FENCE_ALWAYS;
    w->limit = lk->limit;
    w->start_us = start_us;
    /* A client whose input ended cannot wait: one attempt (lock_client_drain). */
    waiter_life_init(&w->life, kind, req->ttl_ms, req->wait_ms, req->trylock, c->draining,
                     start_us);
    waiter_enqueue(w, lk);
    c->waiter = w;
    ttl = lock_queued_exclusive(lk);
    switch (waiter_start(&w->life, w == lock_ready_head(lk), ttl > 0)) {
    case WAITER_START_REFUSE:
        /* A shared attempt never overtakes an exclusive LOCK queued here (its gate's ttl). */
        waiter_refuse(w, waiter_refusal(&w->life), ttl, NULL);
        break;
    case WAITER_START_TRY:
        waiter_try(w, true);
        break;
    case WAITER_START_QUEUE:
        waiter_wait(w);     /* behind others, or held here */
        break;
    }
}

void
lock_released(const char *key, size_t key_len, const char *token, size_t token_len)
{
    size_t plen = strlen(ctx.conf->key_prefix);
    struct lock *lk;
    struct waiter *w;
    struct waiter_release rel;
    struct waiter_release_step st;
    struct waiter_env env;

    if (key_len <= plen || memcmp(key, ctx.conf->key_prefix, plen) != 0) {
        return;
    }
    lk = lock_find(key + plen, key_len - plen);
    w = lk != NULL ? lock_ready_head(lk) : NULL;
    if (w == NULL) {
        return;
    }
    w = W_LEAD(w);      /* a set hears its names' releases as one */
    rel.yielding = util_now_us() < lk->yield_until_us;
    rel.own_yield = util_equal_secret(token, token_len, lk->yield_token, UTIL_TOKEN_HEX);
    rel.own_retired = util_equal_secret(token, token_len, w->retired, UTIL_TOKEN_HEX);
    rel.repeat = token_len == UTIL_TOKEN_HEX
                 && util_equal_secret(token, token_len, w->woken_by, UTIL_TOKEN_HEX);
    rel.id = redlock_token_id(token, token_len);
    env = waiter_env_now();
    st = waiter_on_release(&w->life, &env, &rel);
    if (st.end_yield) {
        lk->yield_until_us = 0;     /* another daemon's turn ended: ours again */
    }
    if (st.first_copy) {
        if (token_len == UTIL_TOKEN_HEX) {
            memcpy(w->woken_by, token, UTIL_TOKEN_HEX);
        }
        stats.pubsub_wakeups++;
    }
    if (st.what == WAITER_RELEASE_WAKE) {
        event_active(&w->retry, EV_TIMEOUT, 0);
    } else if (st.what == WAITER_RELEASE_REARM) {
        waiter_timer_at(w, st.at_us);
    }
}

/*
 * A master confirmed the subscription to key's release channel.  While
 * the head's try waits for the subscription (lock_watch), the last
 * confirmation needed lets it go; any later one (a subscriber link that
 * came back, whose master's announcements were lost meanwhile, or one
 * that came after the deadline) makes the head try again, as an
 * announcement would.
 */
void
lock_subscribed(const char *key, size_t key_len)
{
    size_t plen = strlen(ctx.conf->key_prefix);
    struct lock *lk;
    struct waiter *w;

    if (key_len <= plen || memcmp(key, ctx.conf->key_prefix, plen) != 0) {
        return;
    }
    lk = lock_find(key + plen, key_len - plen);
    if (lk == NULL || !lk->watched) {
        return;
    }
    if (lk->subscribe_until_us != 0) {
        if (!redlock_watch_ready(lk->key, lk->key_len)) {
            return;     /* more confirmations to come */
        }
        lk->subscribe_until_us = 0;
    }
    w = lock_ready_head(lk);
    if (w != NULL && waiter_on_subscribed(&W_LEAD(w)->life)) {
        w = W_LEAD(w);
        event_active(&w->retry, EV_TIMEOUT, 0);
    }
}
