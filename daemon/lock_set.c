/*
 * lock_set.c: several names at once (LOCK n1 .. nk), held all or none.
 *
 * A set LOCK is one waiter per name (struct lock_set in lock_table.h),
 * each at the tail of its name's queue, queued in one step: the daemon
 * is single-threaded, so the order in which LOCKs arrive is one order
 * over every queue, and the oldest LOCK of the daemon heads every queue
 * it is in.  The set asks the masters only when it heads every one of
 * its names (lock_set_ready), so a single-name LOCK queued behind it in
 * any queue waits for it, and it waits for any LOCK queued before it:
 * first in, first out on every name, and no cycle of waiting.  Each
 * master gets the whole set in one script that writes all of it or
 * nothing (redlock_acquire_set), in the canonical order of the names,
 * the same in every daemon; a try that did not win releases whatever it
 * got and holds nothing while it waits.  A set is never handed over one
 * name at a time: a hold given up with a set at the head of its queue is
 * released, and the set looks again.  PROTOCOL.md section 6, "Several
 * names at once", has the safety and progress argument, and
 * proto/model/ the model that checks it.
 *
 * A granted set is one hold per name (struct hold_set), renewed by the
 * watchdog as any hold; losing any one loses the set: the client hears
 * one LOST naming it, and the other names are released on the next loop
 * turn (not inside the lease module's callback, which may still be
 * reading them).  UNLOCK and EXTEND of several names answer once for
 * the set (struct lock_multi).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

_Static_assert(PROTO_SET_MAX == REDLOCK_SET_MAX, "a set's names: one limit");

/* Canonical order of two names: their bytes, then the shorter first. */
static int
lock_name_cmp(const struct lock_name *a, const struct lock_name *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->s, b->s, n);

    return c != 0 ? c : (a->len > b->len) - (a->len < b->len);
}

/* idx[0..n-1]: the names' indices in canonical order (n <= PROTO_SET_MAX). */
static void
lock_set_order(const struct lock_name *names, size_t n, size_t *idx)
{
    size_t i, j, t;

    for (i = 0; i < n; i++) {
        idx[i] = i;
        for (j = i; j > 0 && lock_name_cmp(&names[idx[j]], &names[idx[j - 1]]) < 0; j--) {
            t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    }
}

/* The names as given, one space between two: malloc'd, NUL-terminated; its length in *len. */
static char *
lock_set_text(const struct lock_name *names, size_t n, size_t *len)
{
    size_t i, total = 0;
    char *text, *p;

    for (i = 0; i < n; i++) {
        total += names[i].len + 1;
    }
    p = text = xmalloc(total);
    for (i = 0; i < n; i++) {
        memcpy(p, names[i].s, names[i].len);
        p += names[i].len;
        *p++ = ' ';
    }
    p[-1] = '\0';
    *len = total - 1;
    return text;
}

/* The exclusive record of the set's member i, as its hold will have it. */
static void
lock_set_rec(const struct waiter *lead, size_t i, struct redlock_rec *rec)
{
    const struct waiter *m = lead->set->member[i];

    rec->base = m->key;
    rec->base_len = m->key_len;
    rec->kind = REDLOCK_EXCLUSIVE;
    rec->slot = 0;
    rec->limit = 0;
    rec->labelled = lead->label_asked && lead->label[0] != '\0';
    rec->delay_ms = lead->delay_ms;
}

bool
lock_set_ready(const struct lock_set *set)
{
    size_t i;

    for (i = 0; i < set->n; i++) {
        const struct waiter *m = set->member[i];

        if (m->lock == NULL || m != lock_ready_head(m->lock)) {
            return false;
        }
    }
    return true;
}

static const char *lock_set_fence_text(const int64_t *fences, size_t n, char *out,
                                       size_t size);

/* A fenced set's grant being given its fences, one name at a time, all at once. */
struct lock_set_fencing {
    struct waiter      *lead;       /* whose round won */
    size_t              left;       /* names whose fence is still to come */
    struct redlock_acquire_result res; /* the set's round's, then the worst fence's */
    struct lock_set_fence {
        struct lock_set_fencing *f; /* back to this */
        size_t          i;          /* the member */
    }                   job[];      /* one per member */
};

/* One name's fence came (or failed); the last one ends the set's round. */
static void
lock_set_fenced(const struct redlock_acquire_result *res, void *arg)
{
    struct lock_set_fence *job = arg;
    struct lock_set_fencing *f = job->f;
    struct waiter *lead = f->lead;

    if (res->v.outcome == REDLOCK_GRANTED) {
        lead->set->fences[job->i] = res->fence;
    } else if (f->res.v.outcome == REDLOCK_GRANTED) {
        /* No fence, no grant: the set's round ends as this name's did (LATE, NOQUORUM). */
        f->res.v.outcome = res->v.outcome;
        memcpy(f->res.v.error, res->v.error, sizeof(f->res.v.error));
    }
    if (--f->left > 0) {
        return;
    }
    waiter_acquired(&f->res, lead);
    free(f);
}

/*
 * A set's round ended.  Claims made for it are noted (dropped when it
 * goes).  A fenced set that won gets each name's fence (raised and
 * written back, as a fenced LOCK's, all names at once); otherwise the
 * round's end is the waiter's.
 */
static void
lock_set_won(const struct redlock_acquire_result *res, void *arg)
{
    struct waiter *lead = arg;
    struct lock_set *set = lead->set;
    struct lock_set_fencing *f;
    struct redlock_rec rec;
    size_t i;

    /*
     * A master that refused a waiting try may have claimed names for it,
     * and one that answered after the round was decided (or not at all)
     * is not heard: every try that not every master granted counts.
     */
    if (res->claimed || (!W_ONCE(lead) && res->v.confirmed < master_count())) {
        set->claimed = true;
    }
    if (res->v.outcome != REDLOCK_GRANTED || !lead->fence) {
        waiter_acquired(res, lead);
        return;
    }
    f = xcalloc(1, sizeof(*f) + set->n * sizeof(f->job[0]));
    f->lead = lead;
    f->left = set->n;
    f->res = *res;
    for (i = 0; i < set->n; i++) {
        f->job[i].f = f;
        f->job[i].i = i;
    }
    for (i = 0; i < set->n; i++) {
        lock_set_rec(lead, i, &rec);
        if (redlock_fence_grant(&rec, lead->token, res, lock_set_fenced, &f->job[i]) != 0) {
            struct redlock_acquire_result bad = *res;

            bad.v.outcome = REDLOCK_NOQUORUM;
            snprintf(bad.v.error, sizeof(bad.v.error), "a name's fence could not be asked for");
            lock_set_fenced(&bad, &f->job[i]);
        }
    }
}

#ifdef REDLOCKD_FAULT_SET_BY_NAME
/*
 * The fault suite's negative control for sets (tests/faults/README.md,
 * "Sets"), never in the daemon: a set taken one name at a time, one
 * Redlock round per name in the order the client gave them, keeping
 * every name it won while it waits for the next (hold and wait).  A
 * refused name is asked again after retry_delay_ms, the names already
 * won again with it (the same token: renewed), until the wait= runs
 * out; only then is everything released.  Two daemons taking {p,q} and
 * {q,p} deadlock.
 */
struct lock_set_chain {
    struct waiter      *lead;
    size_t              k;          /* the place, in the client's order, being taken */
    redlock_acquire_fn  done;       /* the set's round's end */
    struct redlock_acquire_result res; /* this pass: the first name's, the earliest end */
    struct event        retry;
};

static void lock_set_chain_next(struct lock_set_chain *ch);

static void
lock_set_chain_cb(const struct redlock_acquire_result *res, void *arg)
{
    struct lock_set_chain *ch = arg;
    struct waiter *lead = ch->lead;
    struct timeval tv;

    tv.tv_sec = ctx.conf->retry_delay_ms / 1000;
    tv.tv_usec = (ctx.conf->retry_delay_ms % 1000) * 1000;
    if (res->v.outcome == REDLOCK_GRANTED) {
        if (ch->k == 0) {
            ch->res = *res;
        } else if (res->validity_end_us < ch->res.validity_end_us) {
            ch->res.validity_end_us = res->validity_end_us;
        }
        if (++ch->k < lead->set->n) {
            /* The next name after a pause, as a client taking them one by one would. */
            evtimer_add(&ch->retry, &tv);
            return;
        }
        res = &ch->res;
    } else if (res->v.outcome == REDLOCK_BUSY && !W_ONCE(lead)
               && lead->life.state != WAITER_CANCELLED
               && util_now_us() < lead->life.deadline_us) {
        ch->k = 0;      /* hold what was won; take it all again, in order */
        evtimer_add(&ch->retry, &tv);
        return;
    }
    ch->done(res, lead);
    free(ch);
}

static void
lock_set_chain_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    lock_set_chain_next(arg);
}

static void
lock_set_chain_next(struct lock_set_chain *ch)
{
    const struct lock_set *set = ch->lead->set;
    struct redlock_acquire_result bad;
    struct redlock_rec rec;
    size_t i;

    for (i = 0; i + 1 < set->n && set->given[i] != ch->k; i++) {
        continue;
    }
    memset(&rec, 0, sizeof(rec));
    rec.base = set->member[i]->key;
    rec.base_len = set->member[i]->key_len;
    rec.kind = REDLOCK_EXCLUSIVE;
    if (redlock_acquire(&rec, ch->lead->token, ch->lead->life.ttl_ms, NULL,
                        REDLOCK_ACQUIRE_WAIT, NULL, NULL, lock_set_chain_cb, ch) != 0) {
        memset(&bad, 0, sizeof(bad));
        bad.v.outcome = REDLOCK_NOQUORUM;
        lock_set_chain_cb(&bad, ch);
    }
}
#endif

void
lock_set_try(struct waiter *lead)
{
#ifdef REDLOCKD_FAULT_SET_BY_NAME
    struct lock_set_chain *ch = xcalloc(1, sizeof(*ch));

    ch->lead = lead;
    ch->done = lead->fence ? lock_set_won : waiter_acquired;
    evtimer_assign(&ch->retry, ctx.base, lock_set_chain_retry_cb, ch);
    lock_set_chain_next(ch);
#else
    const struct lock_set *set = lead->set;
    const char *bases[PROTO_SET_MAX], *old = NULL;
    size_t lens[PROTO_SET_MAX], i;
    unsigned flags = W_ONCE(lead) ? 0
                     : REDLOCK_ACQUIRE_WAIT | (lead->life.gated ? REDLOCK_ACQUIRE_GATED : 0);

    for (i = 0; i < set->n; i++) {
        bases[i] = set->member[i]->key;
        lens[i] = set->member[i]->key_len;
    }
    if (lead->ghost[0] != '\0') {
        old = lead->ghost;     /* an earlier try of ours that may have landed: take it over */
        flags |= REDLOCK_ACQUIRE_ADOPT;
    }
    if (lead->fence) {
        flags |= REDLOCK_ACQUIRE_FENCE;
    }
    if (redlock_acquire_set(bases, lens, set->n, lead->token, lead->life.ttl_ms,
                            lead->delay_ms, old, flags,
                            lead->label_asked && lead->label[0] != '\0' ? lead->label : NULL,
                            lead->gate_id, lock_set_won, lead) != 0) {
        waiter_finish(lead, LOCK_FAILED, 0, "a set the engine refused");
    }
#endif
}

void
lock_set_release(struct waiter *lead, const char *token, bool abandon)
{
    const struct lock_set *set = lead->set;
    struct redlock_rec rec;
    size_t i;

    for (i = 0; i < set->n; i++) {
        const struct waiter *m = set->member[i];

        if (abandon) {
            lock_abandon(m->key + m->name_off, m->key_len - m->name_off, token);
            continue;
        }
        lock_set_rec(lead, i, &rec);
        redlock_release(&rec, token, NULL, NULL);
    }
}

void
lock_set_free(struct waiter *lead)
{
    struct lock_set *set = lead->set;
    const char *bases[REDLOCK_SET_MAX];
    size_t lens[REDLOCK_SET_MAX], i;

    lock_set_listed(set, false);
    if (set->claimed) {
        /* Granted or given up: what it claimed goes (a minority may keep claims). */
        for (i = 0; i < set->n; i++) {
            bases[i] = set->member[i]->key;
            lens[i] = set->member[i]->key_len;
        }
        redlock_unclaim(bases, lens, set->n, lead->gate_id);
    }

    for (i = 1; i < set->n; i++) {
        struct waiter *m = set->member[i];

        event_del(&m->retry);
        free(m->noquorum);
        free(m);
    }
    free(set->text);
    free(set);
    lead->set = NULL;
}

/* The next loop turn after a hold of the set was lost: give up the others. */
static void
hold_set_reap_cb(evutil_socket_t fd, short what, void *arg)
{
    struct hold_set *hs = arg;
    struct hold *rest[PROTO_SET_MAX];
    size_t i, n = 0;

    (void)fd;
    (void)what;
    for (i = 0; i < hs->n; i++) {
        if (hs->hold[i] != NULL) {
            rest[n++] = hs->hold[i];
        }
    }
    /* The last one given up frees hs. */
    for (i = 0; i < n; i++) {
        hold_give_up(rest[i], NULL);
    }
}

void
hold_set_lost(struct hold *h)
{
    struct hold_set *hs = h->set;

    if (hs->left > 1) {
        event_active(&hs->reap, EV_TIMEOUT, 0);
    }
    hold_drop(h);
}

void
lock_set_grant(struct waiter *lead, const struct redlock_acquire_result *res)
{
    struct lock_set *set = lead->set;
    struct lock_client *c = lead->client;
    struct lock_acquire_result out;
    struct redlock_rec rec;
    struct hold_set *hs;
    struct hold *h, *old;
    struct lock *lk;
    char *text = set->text, fences[REDLOCK_SET_MAX * 21];
    int64_t given[REDLOCK_SET_MAX];
    size_t i;

    stats.acquire_ok++;
    stats.set_grants++;
    if (lead->fence) {
        stats.fenced_grants++;
    }
    set->text = NULL;       /* the answer's name: ours now */
    memset(&out, 0, sizeof(out));
    out.v.outcome = LOCK_OK;
    out.v.name = text;
    out.v.name_len = set->text_len;
    out.kind = LOCK_KIND_EXCLUSIVE;
    out.permit = -1;
    if (lead->fence) {
        for (i = 0; i < set->n; i++) {
            given[set->given[i]] = set->fences[i];
        }
        out.fences = lock_set_fence_text(given, set->n, fences, sizeof(fences));
    }
    if (lead->lease_mode) {
        waiter_grant_lease(lead, res, &out);
        free(text);
        return;
    }
    hs = xcalloc(1, sizeof(*hs) + set->n * sizeof(hs->hold[0]));
    hs->n = hs->left = set->n;
    hs->text = text;
    hs->text_len = set->text_len;
    evtimer_assign(&hs->reap, ctx.base, hold_set_reap_cb, hs);
    for (i = 0; i < set->n; i++) {
        lk = set->member[i]->lock;
        lock_set_rec(lead, i, &rec);
        rec.base = lk->key;     /* the lease borrows the entry's key */
        if ((old = lock_same_record(lk, &rec)) != NULL) {
            /* As for one name (waiter_grant): the older lease's keys are gone. */
            log_warn("lock %s: granted again in a set while held here; the older lease "
                     "is lost", lk->key);
            hold_lost(old, LEASE_REASON_QUORUM);
        }
        lk->remote = false;
        lk->turn_left = waiter_turn(&lead->life, lk->nqueued);
        h = xcalloc(1, sizeof(*h));
        lease_start(&h->lease, &rec, lead->token, lead->life.ttl_ms,
                    lead->fence ? set->fences[i] : 0, res->v.start_us, res->validity_end_us);
        h->granted_us = res->v.start_us;
        memcpy(h->label, lead->label, sizeof(h->label));
        hold_insert(h, lk, c);
        h->set = hs;
        h->set_index = i;
        hs->hold[i] = h;
    }
    out.holds = 1;
    out.validity_ms = lease_validity_left_ms(&hs->hold[0]->lease, util_now_us());
    waiter_observe(lead);
    c->waiter = NULL;
    waiter_free(lead);
    c->hooks->acquired(c, &out);
}

/* The fences (n of them, in the client's order) as "5,9", into out; returns out. */
static const char *
lock_set_fence_text(const int64_t *fences, size_t n, char *out, size_t size)
{
    size_t i, used = 0;

    out[0] = '\0';
    for (i = 0; i < n && used < size; i++) {
        used += (size_t)snprintf(out + used, size - used, "%s%lld", i > 0 ? "," : "",
                                 (long long)fences[i]);
    }
    return out;
}

/*
 * What the session holds of the names: the set that is exactly them
 * (any order), or NULL, *held counting the names it holds at all and
 * *one being one of those holds.  A set already lost (its other names
 * about to go) is given up now.
 */
static struct hold_set *
lock_set_held(struct lock_client *c, const struct lock_name *names, size_t n, size_t *held,
              struct hold **one)
{
    struct hold_set *hs = NULL;
    struct lock *lk;
    struct hold *h;
    size_t i;

    /*
     * First the holds whose lease ran out (reported lost now) and the sets
     * already lost: gone before anything is counted, so that nothing
     * counted below is freed by a later name's loss.
     */
    for (i = 0; i < n; i++) {
        lk = lock_find(names[i].s, names[i].len);
        h = lk != NULL ? client_hold(c, lk) : NULL;
        if (h != NULL && lease_check(&h->lease, util_now_us()) && h->set != NULL
            && h->set->reported) {
            hold_set_reap_cb(-1, 0, h->set);
        }
    }
    *held = 0;
    *one = NULL;
    for (i = 0; i < n; i++) {
        lk = lock_find(names[i].s, names[i].len);
        h = lk != NULL ? client_hold(c, lk) : NULL;
        if (h == NULL) {
            continue;
        }
        if (++*held == 1) {
            hs = h->set;
        } else if (h->set != hs) {
            hs = NULL;
        }
        *one = h;
    }
    return *held == n && hs != NULL && hs->n == n ? hs : NULL;
}

void
hold_set_settle(struct hold *h)
{
    if (h->set != NULL && h->set->reported) {
        hold_set_reap_cb(-1, 0, h->set);
    }
}

void
lock_set_conflict(char *out, size_t size, const struct hold *h, const char *verb)
{
    if (h->set != NULL) {
        snprintf(out, size, "this session holds %.*s as part of the set %.*s; %s names that "
                 "set exactly, or none of it (UNLOCK it first)", (int)h->lock->name_len,
                 h->lock->name, (int)h->set->text_len, h->set->text, verb);
    } else {
        snprintf(out, size, "this session holds %.*s on its own; %s of several names takes "
                 "none that the session holds (UNLOCK it first)", (int)h->lock->name_len,
                 h->lock->name, verb);
    }
}

/* The session asks again for a set it holds: only the count changes. */
static void
lock_set_reenter(struct lock_client *c, struct hold_set *hs, const struct lock_name *names,
                 const char *text, size_t len, const struct lock_request *req,
                 int64_t start_us)
{
    struct lock_acquire_result res;
    char fences[REDLOCK_SET_MAX * 21];
    int64_t given[REDLOCK_SET_MAX];
    size_t i;

    given[0] = 0;
    for (i = 0; i < hs->n; i++) {
        given[i] = client_hold(c, lock_find(names[i].s, names[i].len))->lease.fence;
    }
    if (req->fence && given[0] == 0) {
        lock_reply(c, LOCK_VERB_ACQUIRE, LOCK_CONFLICT, text, len,
                   "this session holds the set without a fence; a re-entrant LOCK "
                   "cannot add one (UNLOCK it first)");
        return;
    }
    for (i = 0; i < hs->n; i++) {
        hs->hold[i]->holds++;
    }
    stats.acquire_reentered++;
    stats_observe_acquire(util_now_us() - start_us);
    memset(&res, 0, sizeof(res));
    res.v.outcome = LOCK_OK;
    res.v.name = text;
    res.v.name_len = len;
    res.holds = hs->hold[0]->holds;
    res.kind = LOCK_KIND_EXCLUSIVE;
    res.permit = -1;
    res.validity_ms = lease_validity_left_ms(&hs->hold[0]->lease, util_now_us());
    if (given[0] > 0) {
        res.fences = lock_set_fence_text(given, hs->n, fences, sizeof(fences));
    }
    c->hooks->acquired(c, &res);
}

/* Whether every name fits an exclusive request here; else the text of ERR KIND in out. */
static bool
lock_set_fits(const struct lock_name *names, size_t n, const struct lock_request *req,
              char *out, size_t size)
{
    struct lock *lk;
    size_t i;

    for (i = 0; i < n; i++) {
        lk = lock_find(names[i].s, names[i].len);
        if (lk != NULL && !lock_kind_fits(lk, req, out, size)) {
            return false;
        }
    }
    return true;
}

/* A new waiter for the set's name nm, queued at the tail of its name's queue. */
static struct waiter *
lock_set_member(struct lock_client *c, const struct lock_name *nm, const struct lock_request *req,
                int64_t start_us)
{
    struct lock *lk = lock_get(nm->s, nm->len);
    struct waiter *w = xcalloc(1, sizeof(*w) + lk->key_len + 1);

    memcpy(w->key, lk->key, lk->key_len + 1);
    w->key_len = lk->key_len;
    w->name_off = lk->key_len - lk->name_len;
    w->client = c;
    snprintf(w->label, sizeof(w->label), "%.*s",
             (int)(req->label_len < REDLOCK_LABEL_MAX ? req->label_len : REDLOCK_LABEL_MAX),
             req->label != NULL ? req->label : "");
    w->label_asked = req->label_asked;
    w->lease_mode = req->lease_mode;
    w->start_us = start_us;
    waiter_life_init(&w->life, REDLOCK_EXCLUSIVE, req->ttl_ms, req->wait_ms, req->trylock,
                     c->draining, start_us);
    waiter_enqueue(w, lk);
    return w;
}

void
lock_acquire_set(struct lock_client *c, const struct lock_name *names, size_t n,
                 const struct lock_request *req)
{
    size_t idx[PROTO_SET_MAX], i, len, held;
    char *text, err[PROTO_NAME_MAX * 2 + 192];
    int64_t start_us = util_now_us();
    struct hold_set *hs;
    struct lock_set *set;
    struct waiter *lead;
    struct hold *one;

    text = lock_set_text(names, n, &len);
    if (lock_stopping) {
        lock_reply(c, LOCK_VERB_ACQUIRE, LOCK_SHUTDOWN, text, len, "the daemon is stopping");
        free(text);
        return;
    }
    hs = lock_set_held(c, names, n, &held, &one);
    if (!req->lease_mode && hs != NULL) {
        lock_set_reenter(c, hs, names, text, len, req, start_us);
        free(text);
        return;
    }
    if (!req->lease_mode && held > 0) {
        lock_set_conflict(err, sizeof(err), one, "a LOCK");
        lock_reply(c, LOCK_VERB_ACQUIRE, LOCK_CONFLICT, text, len, err);
        free(text);
        return;
    }
    if (!lock_set_fits(names, n, req, err, sizeof(err))) {
        stats.kind_refusals++;
        lock_reply(c, LOCK_VERB_ACQUIRE, LOCK_WRONG_KIND, text, len, err);
        free(text);
        return;
    }
    if (!req->lease_mode && (int64_t)(c->nholds + n) > ctx.conf->max_locks_per_client) {
        snprintf(err, sizeof(err), "this session holds %zu locks and the set has %zu names "
                 "(limits.max_locks_per_client)", c->nholds, n);
        lock_reply(c, LOCK_VERB_ACQUIRE, LOCK_LIMIT, text, len, err);
        free(text);
        return;
    }
    set = xcalloc(1, sizeof(*set) + n * sizeof(set->member[0]));
    set->n = n;
    set->text = text;
    set->text_len = len;
    lock_set_order(names, n, idx);
    for (i = 0; i < n; i++) {
        set->member[i] = lock_set_member(c, &names[idx[i]], req, start_us);
        set->member[i]->set = set;
        set->given[i] = idx[i];
    }
    lock_set_listed(set, true);
    lead = set->member[0];
    lead->fence = req->fence || ctx.conf->fence == CONF_FENCE_ALWAYS;
    lead->delay_ms = req->lease_mode ? 0 : req->delay_ms;
    if (util_token(lead->token) != 0) {
        waiter_finish(lead, LOCK_FAILED, 0, "getrandom failed");
        return;
    }
    memcpy(lead->gate_id, lead->token, sizeof(lead->gate_id));  /* names its claims */
    for (i = 1; i < n; i++) {
        memcpy(set->member[i]->token, lead->token, sizeof(lead->token));
    }
    c->waiter = lead;
    switch (waiter_start(&lead->life, lock_set_ready(set), false)) {
    case WAITER_START_REFUSE:
        waiter_refuse(lead, waiter_refusal(&lead->life), 0, NULL);
        break;
    case WAITER_START_TRY:
        lock_set_try(lead);
        break;
    case WAITER_START_QUEUE:
        waiter_wait(lead);
        break;
    }
}

/* ---- the waiting sets, looked at again after each change ---- */

static TAILQ_HEAD(, lock_set) lock_sets = TAILQ_HEAD_INITIALIZER(lock_sets); /* waiting sets */
static struct event lock_reline_ev;    /* lock_reline_cb, made active by lock_set_changed */
static bool     lock_reline_assigned;  /* lock_reline_ev was assigned */
static bool     lock_reline_pending;   /* lock_reline_ev is active */

void
lock_set_let_by(struct lock_set *set)
{
    size_t i;

    if (set->woke_epoch == lock_epoch_now()) {
        return;
    }
    set->woke_epoch = lock_epoch_now();
    for (i = 0; i < set->n; i++) {
        struct waiter *m = set->member[i], *h;

        /*
         * Only a LOCK of one name that sleeps until it is told it heads
         * its queue: a set there is looked at by lock_reline_cb, and a
         * waiter with a timer or a round of its own needs nothing.
         */
        if (m->lock != NULL && (h = lock_ready_head(m->lock)) != NULL && h != m
            && h->set == NULL && h->life.state == WAITER_QUEUED) {
            waiter_rouse(h);
        }
    }
}

/*
 * After changes of the queues or the holds, on the next loop turn: which
 * of a set's members stand in line may have changed without any event on
 * their names (another set's member before them started or stopped
 * standing in line).  Each waiting set outside a round that became ready
 * is woken; one that is not ready lets the LOCKs behind its members by.
 */
static void
lock_reline_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lock_set *set;
    bool ready;

    (void)fd;
    (void)what;
    (void)arg;
    lock_reline_pending = false;
    TAILQ_FOREACH(set, &lock_sets, link) {
        struct waiter *lead = set->member[0];

        if (lead->lock == NULL || WAITER_IN_ROUND(&lead->life)) {
            continue;
        }
        ready = lock_set_ready(set);
        if (ready && !set->was_ready) {
            waiter_rouse(lead);
        } else if (!ready) {
            lock_set_let_by(set);
        }
        set->was_ready = ready;
    }
}

void
lock_set_changed(void)
{
    if (!lock_reline_pending && !TAILQ_EMPTY(&lock_sets)) {
        if (!lock_reline_assigned) {
            evtimer_assign(&lock_reline_ev, ctx.base, lock_reline_cb, NULL);
            lock_reline_assigned = true;
        }
        lock_reline_pending = true;
        event_active(&lock_reline_ev, EV_TIMEOUT, 0);
    }
}

void
lock_set_listed(struct lock_set *set, bool on)
{
    if (on) {
        TAILQ_INSERT_TAIL(&lock_sets, set, link);
    } else {
        TAILQ_REMOVE(&lock_sets, set, link);
    }
}

/* ---- UNLOCK and EXTEND of several names: one answer for the set ---- */

/* An UNLOCK or EXTEND of several names: each name's op answers the proxy. */
struct lock_multi {
    struct lock_client  proxy;      /* the client each name's op answers */
    struct lock_client *client;     /* who asked */
    size_t              left;       /* names not answered yet */
    enum lock_outcome   outcome;    /* the set's so far (lock_multi_note) */
    int64_t             validity_ms;/* EXTEND: the least so far */
    bool                lost_told;  /* the client heard LOST for the set */
    char               *error;      /* malloc'd: the first NOQUORUM text, or NULL */
    char                token[UTIL_TOKEN_HEX + 1]; /* EXTEND: the set's token */
    size_t              text_len;   /* bytes in text */
    char                text[];     /* the names as given */
};

#define LOCK_MULTI_OF(lc) \
    ((struct lock_multi *)(void *)((char *)(lc) - offsetof(struct lock_multi, proxy)))

/* How bad an outcome is for the set: the worst of its names' is the set's. */
static int
lock_multi_rank(enum lock_outcome o)
{
    switch (o) {
    case LOCK_OK:
        return 0;
    case LOCK_NOTHELD:
        return 1;
    case LOCK_NOQUORUM:
        return 2;
    default:
        return 3;
    }
}

/* One name answered; true when it was the last. */
static bool
lock_multi_note(struct lock_multi *m, const struct lock_verdict *v)
{
    if (lock_multi_rank(v->outcome) > lock_multi_rank(m->outcome)) {
        m->outcome = v->outcome;
    }
    if (v->error != NULL && m->error == NULL) {
        m->error = xstrdup(v->error);
    }
    return --m->left == 0;
}

static void
lock_multi_free(struct lock_multi *m)
{
    free(m->error);
    free(m);
}

static void
lock_multi_released(struct lock_client *lc, const struct lock_release_result *rr)
{
    struct lock_multi *m = LOCK_MULTI_OF(lc);
    struct lock_release_result res;

    if (!lock_multi_note(m, &rr->v)) {
        return;
    }
    memset(&res, 0, sizeof(res));
    res.v.outcome = m->outcome;
    res.v.name = m->text;
    res.v.name_len = m->text_len;
    res.v.error = m->outcome == LOCK_OK || m->outcome == LOCK_NOTHELD ? NULL : m->error;
    res.mode = rr->mode;
    m->client->hooks->released(m->client, &res);
    lock_multi_free(m);
}

static void
lock_multi_extended(struct lock_client *lc, const struct lock_extend_result *er)
{
    struct lock_multi *m = LOCK_MULTI_OF(lc);
    struct lock_extend_result res;

    if (er->v.outcome == LOCK_OK && er->validity_ms < m->validity_ms) {
        m->validity_ms = er->validity_ms;
    }
    if (!lock_multi_note(m, &er->v)) {
        return;
    }
    if (m->outcome != LOCK_OK) {
        /* Not every name was extended: the set is no lock; nothing of it stays. */
        lock_abandon(m->text, m->text_len, m->token);
        m->outcome = LOCK_NOTHELD;
    }
    memset(&res, 0, sizeof(res));
    res.v.outcome = m->outcome;
    res.v.name = m->text;
    res.v.name_len = m->text_len;
    res.v.error = m->outcome == LOCK_OK || m->outcome == LOCK_NOTHELD ? NULL : m->error;
    res.validity_ms = m->validity_ms;
    m->client->hooks->extended(m->client, &res);
    lock_multi_free(m);
}

/* A name's op found the session's hold lost: the client hears it once, for the set. */
static void
lock_multi_lost(struct lock_client *lc, const char *name, size_t name_len, const char *reason)
{
    struct lock_multi *m = LOCK_MULTI_OF(lc);

    (void)name;
    (void)name_len;
    if (!m->lost_told) {
        m->lost_told = true;
        m->client->hooks->lost(m->client, m->text, m->text_len, reason);
    }
}

static const struct lock_hooks lock_multi_hooks = {
    .released = lock_multi_released,
    .extended = lock_multi_extended,
    .lost = lock_multi_lost,
};

static struct lock_multi *
lock_multi_new(struct lock_client *c, const struct lock_name *names, size_t n,
               const char *token)
{
    size_t len;
    char *text = lock_set_text(names, n, &len);
    struct lock_multi *m = xcalloc(1, sizeof(*m) + len + 1);

    lock_client_init(&m->proxy, &lock_multi_hooks);
    m->client = c;
    m->left = n;
    m->outcome = LOCK_OK;
    m->validity_ms = INT64_MAX;
    if (token != NULL) {
        memcpy(m->token, token, UTIL_TOKEN_HEX);
    }
    memcpy(m->text, text, len + 1);
    m->text_len = len;
    free(text);
    return m;
}

void
lock_release_set(struct lock_client *c, const struct lock_name *names, size_t n,
                 const char *token)
{
    struct lock_release_result res;
    struct lock_multi *m;
    struct hold_set *hs;
    struct hold *one, *h, *rest[PROTO_SET_MAX];
    char err[PROTO_NAME_MAX * 2 + 192];
    size_t i, held;

    if (token != NULL) {
        m = lock_multi_new(c, names, n, token);
        for (i = 0; i < n; i++) {
            lock_release(&m->proxy, names[i].s, names[i].len, token);
        }
        return;
    }
    hs = lock_set_held(c, names, n, &held, &one);
    m = lock_multi_new(c, names, n, NULL);
    if (hs == NULL) {
        if (held > 0) {
            lock_set_conflict(err, sizeof(err), one, "an UNLOCK");
        }
        lock_reply(c, LOCK_VERB_RELEASE, held > 0 ? LOCK_CONFLICT : LOCK_NOTHELD, m->text,
                   m->text_len, held > 0 ? err : NULL);
        lock_multi_free(m);
        return;
    }
    if (hs->hold[0]->holds > 1) {
        for (i = 0; i < hs->n; i++) {
            hs->hold[i]->holds--;
        }
        memset(&res, 0, sizeof(res));
        res.v.outcome = LOCK_OK;
        res.v.name = m->text;
        res.v.name_len = m->text_len;
        res.holds = hs->hold[0]->holds;
        c->hooks->released(c, &res);
        lock_multi_free(m);
        return;
    }
    for (i = 0; i < n; i++) {
        rest[i] = hs->hold[i];      /* the last one given up frees hs */
    }
    for (i = 0; i < n; i++) {
        h = rest[i];
        hold_give_up(h, lock_op_new(&m->proxy, h->lock->name, h->lock->name_len));
    }
}

void
lock_extend_set(struct lock_client *c, const struct lock_name *names, size_t n,
                const char *token, int64_t ttl_ms)
{
    struct lock_multi *m;
    size_t i;

    if (token == NULL) {
        stats.extends_notheld++;
        m = lock_multi_new(c, names, n, NULL);
        lock_reply(c, LOCK_VERB_EXTEND, LOCK_NOTHELD, m->text, m->text_len, NULL);
        lock_multi_free(m);
        return;
    }
    m = lock_multi_new(c, names, n, token);
    for (i = 0; i < n; i++) {
        lock_extend(&m->proxy, names[i].s, names[i].len, token, ttl_ms);
    }
}
