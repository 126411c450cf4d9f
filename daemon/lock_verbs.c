/*
 * lock_verbs.c: UNLOCK, EXTEND, STATUS and BREAK: what a client asks of
 * a name it holds, or of any name by its token; and BREAK's
 * announcements, which end the holds and the grants in flight that they
 * name.
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
#include "daemon/events.h"
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

/* An UNLOCK or STATUS op for name, with its own copy of the key. */
struct lock_op *
lock_op_new(struct lock_client *c, const char *name, size_t name_len)
{
    size_t plen = strlen(ctx.conf->key_prefix);
    struct lock_op *op = xmalloc(sizeof(*op) + plen + name_len + 1);

    op->client = c;
    op->holder_self = false;
    op->by_token = false;
    op->fence = 0;
    op->permit = -1;
    op->key_len = lock_key_write(op->key, name, name_len);
    op->name_off = plen;
    return op;
}

/* The name's record for an op by token: whichever kind holds it. */
static const struct redlock_rec *
lock_op_rec(const struct lock_op *op, struct redlock_rec *rec)
{
    rec->base = op->key;
    rec->base_len = op->key_len;
    rec->kind = REDLOCK_ANY;
    rec->slot = 0;
    rec->limit = 0;
    rec->labelled = true;       /* a lease's label is not known here */
    return rec;
}

/* Name v after the op (the name lives in op: free it after the hook). */
static void
lock_op_name(const struct lock_op *op, struct lock_verdict *v)
{
    v->name = op->key + op->name_off;
    v->name_len = op->key_len - op->name_off;
}

/*
 * A session's UNLOCK could not confirm its token (why: GONE or QUORUM;
 * detail says how, for the log): the hold is lost, and the client hears
 * it before the answer.
 */
static void
lock_op_lost(struct lock_op *op, enum lease_reason why, const char *detail)
{
    lease_note_lost(why);
    log_warn("lock %s: lost (%s) at UNLOCK: %s", op->key, lease_reason_name(why), detail);
    events_note(EVENTS_LOST, op->key + op->name_off, op->key_len - op->name_off, NULL,
                lease_reason_name(why));
    op->client->hooks->lost(op->client, op->key + op->name_off, op->key_len - op->name_off,
                     lease_reason_name(why));
}

/*
 * An UNLOCK's release (or a hand-over's verdict on the released lease)
 * ended: answer the op's client OK only where a quorum confirmed its
 * token, else NOTHELD (a session's hold is then reported lost first) or
 * NOQUORUM; frees the op.  arg: the struct lock_op.
 */
void
lock_unlock_done(const struct redlock_release_result *rr, void *arg)
{
    struct lock_op *op = arg;
    struct lock_release_result res;
    struct lock *lk;
    char detail[64];

    memset(&res, 0, sizeof(res));
    switch (rr->v.outcome) {
    case REDLOCK_RELEASED:
        res.v.outcome = LOCK_OK;
        res.holds = 0;
        res.mode = op->by_token ? LOCK_MODE_LEASE : LOCK_MODE_UNKNOWN;
        break;
    case REDLOCK_GONE:
        /*
         * The answers show that fewer than a quorum still held the
         * token: whatever the client did since the keys went (evicted,
         * flushed, a master restarted) was not under the lock.  A
         * session's hold is reported lost before the answer.
         */
        if (!op->by_token) {
            snprintf(detail, sizeof(detail), "%zu of %zu masters still held it",
                     rr->v.confirmed, master_count());
            lock_op_lost(op, LEASE_REASON_GONE, detail);
        }
        res.v.outcome = LOCK_NOTHELD;
        break;
    default:
        if (!op->by_token) {
            /*
             * Not confirmed either: the session's hold is gone (nothing
             * renews it now) and its keys expire by their ttl.
             */
            lock_op_lost(op, LEASE_REASON_QUORUM, rr->v.error);
            res.v.outcome = LOCK_NOTHELD;
            break;
        }
        res.v.outcome = LOCK_NOQUORUM;
        res.v.error = rr->v.error;
        break;
    }
    if (op->by_token && rr->v.confirmed > 0) {
        /* Our own waiters need not wait for the announcement. */
        lk = lock_find(op->key + op->name_off, op->key_len - op->name_off);
        if (lk != NULL) {
            lock_wake_head(lk);
        }
    }
    lock_op_name(op, &res.v);
    op->client->hooks->released(op->client, &res);
    free(op);
}

/* An op that names a token (UNLOCK/EXTEND/STATUS token=). */
static struct lock_op *
lock_op_token(struct lock_client *c, const char *name, size_t name_len, const char *token)
{
    struct lock_op *op = lock_op_new(c, name, name_len);

    op->by_token = true;
    memcpy(op->token, token, UTIL_TOKEN_HEX);
    op->token[UTIL_TOKEN_HEX] = '\0';
    return op;
}

void
lock_release(struct lock_client *c, const char *name, size_t name_len, const char *token)
{
    struct lock *lk;
    struct hold *l;
    struct lock_op *op;
    struct lock_release_result res;
    struct redlock_rec rec;

    if (token != NULL) {
        op = lock_op_token(c, name, name_len, token);
        redlock_release(lock_op_rec(op, &rec), op->token, lock_unlock_done, op);
        stats.releases++;
        return;
    }
    lk = lock_find(name, name_len);
    l = lk != NULL ? client_hold(c, lk) : NULL;
    if (l != NULL && !lease_check(&l->lease, util_now_us())) {
        l = NULL;       /* its validity ran out: reported lost just now */
    }
    if (l != NULL && l->set != NULL && l->set->reported) {
        hold_set_settle(l);     /* part of a set lost already (reported): gone now */
        l = NULL;
    }
    if (l == NULL) {
        lock_reply(c, LOCK_VERB_RELEASE, LOCK_NOTHELD, name, name_len, NULL);
        return;
    }
    if (l->set != NULL) {
        char text[PROTO_NAME_MAX * 2 + 192];

        lock_set_conflict(text, sizeof(text), l, "an UNLOCK");
        lock_reply(c, LOCK_VERB_RELEASE, LOCK_CONFLICT, name, name_len, text);
        return;
    }
    if (l->holds > 1) {
        l->holds--;
        memset(&res, 0, sizeof(res));
        res.v.outcome = LOCK_OK;
        res.v.name = name;
        res.v.name_len = name_len;
        res.holds = l->holds;
        c->hooks->released(c, &res);
        return;
    }
    hold_give_up(l, lock_op_new(c, name, name_len));
}

static void
lock_extend_done(const struct redlock_extend_one_result *rr, void *arg)
{
    struct lock_op *op = arg;
    struct lock_extend_result res;

    memset(&res, 0, sizeof(res));
    switch (rr->v.outcome) {
    case REDLOCK_GRANTED:
        stats.extends_ok++;
        res.v.outcome = LOCK_OK;
        res.validity_ms = (rr->validity_end_us - util_now_us()) / 1000;
        break;
    case REDLOCK_NOTHELD:
        stats.extends_notheld++;
        res.v.outcome = LOCK_NOTHELD;
        /*
         * Not a lock (a minority, or a quorum too late).  Masters that
         * answered after the decision may have extended it too: delete
         * the token everywhere, so that NOTHELD leaves nothing behind.
         */
        struct redlock_rec rec;

        redlock_release(lock_op_rec(op, &rec), op->token, NULL, NULL);
        break;
    default:
        res.v.outcome = LOCK_NOQUORUM;
        res.v.error = rr->v.error;
        break;
    }
    lock_op_name(op, &res.v);
    op->client->hooks->extended(op->client, &res);
    free(op);
}

void
lock_extend(struct lock_client *c, const char *name, size_t name_len, const char *token,
            int64_t ttl_ms)
{
    struct lock_op *op;

    if (token == NULL) {
        stats.extends_notheld++;
        lock_reply(c, LOCK_VERB_EXTEND, LOCK_NOTHELD, name, name_len, NULL);
        return;
    }
    op = lock_op_token(c, name, name_len, token);
    redlock_extend_one(op->key, op->key_len, op->token, ttl_ms, lock_extend_done, op);
}

static void
lock_status_done(const struct redlock_status_result *rr, void *arg)
{
    struct lock_op *op = arg;
    struct lock_status_result res;
    struct lock *lk;

    memset(&res, 0, sizeof(res));
    switch (rr->v.outcome) {
    case REDLOCK_FREE:
        res.v.outcome = LOCK_FREE;
        res.delayed_ms = rr->delayed_ms;
        break;
    case REDLOCK_HELD:
        res.v.outcome = LOCK_HELD;
        res.ttl_ms = rr->holders_ttl_ms;
        res.kind = lock_kind_of(rr->kind);
        res.holders = rr->holders;
        res.limit = rr->limit;
        res.permit = -1;
        res.label = rr->label[0] != '\0' ? rr->label : NULL;
        res.held_ms = rr->held_ms;
        /* By token: only lease-mode tokens are ever handed out. */
        res.owner_self = (op->by_token || op->holder_self) && rr->owner_self;
        if (res.owner_self) {
            res.mode = op->by_token ? LOCK_MODE_LEASE : LOCK_MODE_SESSION;
            res.fence = op->fence;      /* 0 by token: not known */
            res.permit = op->permit;    /* -1 by token: not known */
        }
        break;
    default:
        res.v.outcome = LOCK_NOQUORUM;
        res.v.error = rr->v.error;
        break;
    }
    if (res.v.outcome == LOCK_HELD && res.label == NULL) {
        /* A hold of this daemon whose label lives here only. */
        (void)lock_hold_label(op->key + op->name_off, op->key_len - op->name_off, rr->holder,
                              &res.label, &res.held_ms);
    }
    lk = lock_find(op->key + op->name_off, op->key_len - op->name_off);
    res.waiters = lk != NULL ? lk->nqueued : 0;
    /* Read here, not asked of the masters: the table holds session holds only. */
    res.renewed_here = res.v.outcome == LOCK_HELD && lk != NULL && lk->nholders > 0;
    lock_op_name(op, &res.v);
    op->client->hooks->status(op->client, &res);
    free(op);
}

bool
lock_hold_label(const char *name, size_t name_len, const char *holder,
                const char **label, int64_t *held_ms)
{
    struct lock *lk = lock_find(name, name_len);
    struct hold *h;

    if (lk == NULL || strlen(holder) != UTIL_TOKEN_HEX) {
        return false;
    }
    TAILQ_FOREACH(h, &lk->holders, lock_link) {
        if (memcmp(h->lease.token, holder, UTIL_TOKEN_HEX) == 0 && h->label[0] != '\0') {
            *label = h->label;
            *held_ms = (util_now_us() - h->granted_us) / 1000;
            return true;
        }
    }
    return false;
}

void
lock_status(struct lock_client *c, const char *name, size_t name_len, const char *token)
{
    struct lock *lk = lock_find(name, name_len);
    struct lock_op *op;

    /* A name this daemon does not know needs no table entry: only a key. */
    if (token != NULL) {
        op = lock_op_token(c, name, name_len, token);
    } else {
        op = lock_op_new(c, name, name_len);
        struct hold *h = lk != NULL ? client_hold(c, lk) : NULL;

        if (h != NULL) {
            op->holder_self = true;
            op->fence = h->lease.fence;
            op->permit = h->lease.rec.kind == REDLOCK_PERMIT ? (int)h->lease.rec.slot : -1;
            memcpy(op->token, h->lease.token, sizeof(op->token));
        }
    }
    redlock_status(op->key, op->key_len, op->by_token || op->holder_self ? op->token : NULL,
                   lock_status_done, op);
}

static void
lock_break_done(const struct redlock_break_result *rr, void *arg)
{
    struct lock_op *op = arg;
    struct lock_break_result res;
    char why[EVENTS_REASON_MAX + 1];

    memset(&res, 0, sizeof(res));
    snprintf(why, sizeof(why), "no quorum");
    if (rr->v.outcome == REDLOCK_RELEASED) {
        snprintf(why, sizeof(why), "holders=%zu fence=%lld", rr->deleted,
                 (long long)rr->fence_after);
        res.v.outcome = LOCK_OK;
        res.deleted = rr->deleted;
        res.fence_after = rr->fence_after;
        res.label = rr->label[0] != '\0' ? rr->label : NULL;
        if (rr->deleted > 0) {
            stats.breaks++;
        }
        log_warn("BREAK %s: %zu holder%s ended%s%s%s, fence now %lld",
                 op->key + op->name_off, rr->deleted, rr->deleted == 1 ? "" : "s",
                 res.label != NULL ? " (one was " : "", res.label != NULL ? res.label : "",
                 res.label != NULL ? ")" : "", (long long)rr->fence_after);
    } else {
        res.v.outcome = LOCK_NOQUORUM;
        res.v.error = rr->v.error;
        log_warn("BREAK %s: not confirmed by a quorum (masters that ran it ended its holds "
                 "there): %s", op->key + op->name_off, rr->v.error);
    }
    events_note(EVENTS_BREAK, op->key + op->name_off, op->key_len - op->name_off, res.label,
                why);
    lock_op_name(op, &res.v);
    op->client->hooks->broken(op->client, &res);
    free(op);
}

void
lock_break(struct lock_client *c, const char *name, size_t name_len)
{
    struct lock_op *op = lock_op_new(c, name, name_len);

    redlock_break(op->key, op->key_len, ctx.conf->key_prefix, lock_break_done, op);
}

/* Whether token is one of the space-separated words of tokens. */
static bool
lock_token_among(const char *token, const char *tokens, size_t len)
{
    const char *p = tokens, *end = tokens + len, *sp;

    while (p < end) {
        sp = memchr(p, ' ', (size_t)(end - p));
        if (sp == NULL) {
            sp = end;
        }
        if ((size_t)(sp - p) == UTIL_TOKEN_HEX && memcmp(p, token, UTIL_TOKEN_HEX) == 0) {
            return true;
        }
        p = sp + 1;
    }
    return false;
}

/*
 * A master says a BREAK deleted the holds of key with these tokens: each
 * session of ours holding one of them hears LOST reason=broken, and what
 * masters that missed the BREAK keep of its token is deleted.  Every
 * master sends its copy; the later ones find nothing left to do.
 */
void
lock_broken(const char *key, size_t key_len, const char *tokens, size_t tokens_len)
{
    size_t plen = strlen(ctx.conf->key_prefix);
    struct lock *lk;
    struct hold *h;
    struct waiter *w;

    if (key_len <= plen || memcmp(key, ctx.conf->key_prefix, plen) != 0) {
        return;
    }
    lk = lock_find(key + plen, key_len - plen);
    if (lk != NULL) {
        /* A grant in flight whose token was broken is no grant (waiter_broken). */
        TAILQ_FOREACH(w, &lk->waiters, link) {
            /* A set's try is its lead's, with the lead's token (its members keep the first). */
            if (lock_token_among(W_LEAD(w)->token, tokens, tokens_len)) {
                waiter_broken(&W_LEAD(w)->life);
            }
        }
    }
    for (;;) {
        lk = lock_find(key + plen, key_len - plen);
        if (lk == NULL) {
            return;
        }
        TAILQ_FOREACH(h, &lk->holders, lock_link) {
            if (lock_token_among(h->lease.token, tokens, tokens_len)) {
                break;
            }
        }
        if (h == NULL) {
            return;
        }
        if (h->lease.rec.delay_ms > 0) {
            /* What the BREAK missed ends as the hold would: with its lock-delay. */
            redlock_release_delayed(&h->lease.rec, h->lease.token, h->lease.rec.delay_ms,
                                    NULL, NULL);
        } else {
            redlock_release(&h->lease.rec, h->lease.token, NULL, NULL);
        }
        hold_lost(h, LEASE_REASON_BROKEN);      /* may free lk */
    }
}
