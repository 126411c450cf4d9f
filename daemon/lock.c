/*
 * lock.c: the lock table, leases and waiters.
 *
 * The table maps a name to its entry in a red-black tree ordered by the
 * name's bytes (the RB_ macros of <bsd/sys/tree.h>, as OpenBSD's
 * daemons and tmux keep their ordered sets): O(log n) per request
 * whatever names clients choose, and a walk in name order that resumes
 * from any name in O(log n) (RB_NFIND), which LIST's steps use.  An
 * entry lives while this daemon holds the name or has waiters on it.
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
 * wherever an answer of its rounds was not counted, waiter_acquired, so
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
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/redlock.h"
#include "daemon/stats.h"
#include "daemon/util.h"
#include "daemon/waiter.h"
#include "daemon/xmalloc.h"
#include "proto/proto.h"

#if PROTO_LABEL_MAX != REDLOCK_LABEL_MAX
#error "a label of the protocol must fit the masters' record of it"
#endif
/*
 * Every key of the table (lock.key_prefix, at most CONF_KEY_PREFIX_MAX
 * bytes, and a name) fits the engine's: its calls never refuse one, so
 * the table does not check their returns.
 */
#if CONF_KEY_PREFIX_MAX + PROTO_NAME_MAX > REDLOCK_KEY_MAX
#error "lock.key_prefix and a name must fit a key of the masters"
#endif

/*
 * One name.  Owned by the table; freed when it has neither holder nor
 * waiters.  key holds key_prefix + name; name points into key.
 */
struct lock {
    RB_ENTRY(lock)      entry;      /* in lock_table */
    char               *key;        /* malloc'd: prefix + name, NUL-terminated */
    size_t              key_len;    /* bytes in key */
    const char         *name;       /* key + prefix length */
    size_t              name_len;   /* bytes in name */
    TAILQ_HEAD(, hold)  holders;    /* this daemon's session-mode holds of it */
    size_t              nholders;   /* entries in holders */
    size_t              nexclusive; /* of them, exclusive */
    bool                counted;    /* the kind asked for here: counted (else the
                                       exclusive/shared family) */
    unsigned            limit;      /* counted: the limit */
    unsigned            next_slot;  /* counted: the permit to propose next */
    TAILQ_HEAD(, waiter) waiters;   /* pending LOCKs, oldest first */
    size_t              nwaiters;   /* entries in waiters */
    size_t              nqueued;    /* of them, not wait=0 */
    bool                watched;    /* subscribed to the name's release channel:
                                       from the first of them that had to wait
                                       until nqueued drops to 0 */
    size_t              turn_left;  /* local hand-overs left in this daemon's turn */
    bool                remote;     /* other daemons were seen waiting at the last grant */
    int64_t             yield_until_us; /* after yielding: the head waits until then */
    int64_t             subscribe_until_us; /* the release channel's subscription started
                                       (lock_watch) and is not confirmed everywhere:
                                       the head's next try waits for it until then;
                                       0 when not waiting for it */
    char                yield_token[UTIL_TOKEN_HEX]; /* the lease released by the yield */
};

/*
 * A session-mode hold: a lease (daemon/lease.h, which owns its fields)
 * and who holds it.  Owned by this module; freed when released or lost.
 */
struct hold {
    struct lease        lease;      /* the lease on the masters; key borrowed from lock */
    struct lock        *lock;       /* the name's entry */
    struct lock_client *client;     /* the session that holds it */
    TAILQ_ENTRY(hold)   client_link;/* in client->holds */
    TAILQ_ENTRY(hold)   lock_link;  /* in lock->holders */
    unsigned            holds;      /* re-entrant count, >= 1 */
    int64_t             granted_us; /* monotonic time of the grant (LIST's held_ms) */
    char                label[REDLOCK_LABEL_MAX + 1]; /* who holds it, for people */
};

/*
 * A pending LOCK.  Owned by this module; freed when answered.  Its state,
 * and everything the queue's decisions read, is its life (daemon/waiter.h,
 * which moves it on); the rest is what the I/O needs.  A waiter keeps its
 * own copy of the key so that a cancelled waiter whose round is still in
 * flight can clean up after its entry is gone.
 */
struct waiter {
    struct waiter_life  life;       /* its state and what the policy knows */
    struct lock        *lock;       /* entry, NULL once out of the queue (cancelled) */
    struct lock_client *client;     /* who asked */
    TAILQ_ENTRY(waiter) link;       /* in lock->waiters */
    struct event        retry;      /* its timer: a retry, a wake-up or the wait= deadline */
    char                token[UTIL_TOKEN_HEX + 1]; /* owner token of this try: a new one
                                       once a release of the last one was sent
                                       (waiter_retire_token) */
    char                gate_id[UTIL_TOKEN_HEX + 1]; /* what its gate holds: its first
                                       token, kept across tries */
    char                ghost[UTIL_TOKEN_HEX + 1]; /* the last retired token whose try
                                       was sent on a link that then failed: its
                                       record may land late, and the next tries
                                       take it over (REDLOCK_ACQUIRE_ADOPT);
                                       "" when none */
    int64_t             start_us;   /* monotonic time of lock_acquire(), for the latency */
    bool                lease_mode; /* mode=lease: no lease struct once granted */
    bool                fence;      /* the grant carries a fencing token */
    unsigned            slot;       /* a permit: the one it asks for now */
    unsigned            limit;      /* a permit: the name's limit */
    char                woken_by[UTIL_TOKEN_HEX]; /* token of the last release heard */
    char                retired[UTIL_TOKEN_HEX]; /* the last token it released: its own
                                       clean-up's announcement wakes nobody here */
    char               *noquorum;   /* malloc'd text of the last attempt's NOQUORUM,
                                       while life.noquorum */
    char                label[REDLOCK_LABEL_MAX + 1]; /* the holder's label */
    bool                label_asked;/* written with the record on the masters (label=);
                                       else kept here only */
    size_t              name_off;   /* name = key + name_off */
    size_t              key_len;    /* bytes in key */
    char                key[];      /* prefix + name, NUL-terminated */
};

/* One attempt only (TRYLOCK, wait=0, a client whose input ended): never queued behind. */
#define W_ONCE(w)           WAITER_ONCE(&(w)->life)

/* An UNLOCK, EXTEND or STATUS in flight. */
struct lock_op {
    struct lock_client *client;     /* who asked */
    bool                holder_self;/* STATUS: the client holds the name */
    bool                by_token;   /* UNLOCK/STATUS/EXTEND with token= */
    int64_t             fence;      /* STATUS of the client's hold: its fence */
    int                 permit;     /* STATUS of the client's counted hold: its
                                       permit, else -1 */
    char                token[UTIL_TOKEN_HEX + 1]; /* by_token: the token */
    size_t              name_off;   /* name = key + name_off */
    size_t              key_len;    /* bytes in key */
    char                key[];      /* prefix + name */
};

/* A hand-over in flight: a released lease's keys going to the head waiter. */
struct lock_handover {
    struct waiter      *waiter;     /* who receives the lock */
    struct lock_op     *op;         /* the UNLOCK to answer, or NULL */
    char                old_token[UTIL_TOKEN_HEX + 1]; /* the released lease */
};

/* A token released for nobody (lock_abandon); freed when the masters answered. */
struct lock_orphan {
    size_t              name_len;   /* bytes in name */
    char                name[];     /* the lock's name */
};

static RB_HEAD(lock_tree, lock) lock_table = RB_INITIALIZER(&lock_table); /* by name */
static size_t             lock_nheld;    /* holds alive */
static size_t             lock_nwaiters; /* waiters queued */
static bool               lock_stopping;

static void waiter_try(struct waiter *w, bool pick);
static struct waiter_env waiter_env_now(void);
static void lock_unlock_done(const struct redlock_release_result *rr, void *arg);
static void lock_lease_lost(struct lease *l);
static void lock_broken(const char *key, size_t key_len, const char *tokens,
                        size_t tokens_len);
static void lock_subscribed(const char *key, size_t key_len);

void
lock_init(void)
{
    redlock_on_release(lock_released);
    redlock_on_subscribed(lock_subscribed);
    redlock_on_break(ctx.conf->key_prefix, lock_broken);
    lease_init(ctx.base, lock_lease_lost);
}

void
lock_set_shutdown(void)
{
    lock_stopping = true;
}

void
lock_client_init(struct lock_client *c, const struct lock_hooks *hooks)
{
    memset(c, 0, sizeof(*c));
    c->hooks = hooks;
    TAILQ_INIT(&c->holds);
}

size_t
lock_count_held(void)
{
    return lock_nheld;
}

size_t
lock_count_waiters(void)
{
    return lock_nwaiters;
}

/* Order entries by name bytes, then length (a name before its extensions). */
static int
lock_cmp(const struct lock *x, const struct lock *y)
{
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);

    if (c != 0) {
        return c;
    }
    return (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/*
 * The tree's functions, static.  RB_GENERATE_STATIC would mark them
 * __unused, which libbsd leaves undefined on Linux: the attribute is
 * spelled out (not every generated function is called).
 */
RB_GENERATE_INTERNAL(lock_tree, lock, entry, lock_cmp, static __attribute__((unused)))

static struct lock *
lock_find(const char *name, size_t name_len)
{
    struct lock probe;

    probe.name = name;
    probe.name_len = name_len;
    return RB_FIND(lock_tree, &lock_table, &probe);
}

/* Write key_prefix + name and a NUL into out; returns the key's length. */
static size_t
lock_key_write(char *out, const char *name, size_t name_len)
{
    size_t plen = strlen(ctx.conf->key_prefix);

    memcpy(out, ctx.conf->key_prefix, plen);
    memcpy(out + plen, name, name_len);
    out[plen + name_len] = '\0';
    return plen + name_len;
}

/* The entry of name, made (with no holder and no waiter) when there is none. */
static struct lock *
lock_get(const char *name, size_t name_len)
{
    struct lock *lk = lock_find(name, name_len);
    size_t plen = strlen(ctx.conf->key_prefix);

    if (lk != NULL) {
        return lk;
    }
    lk = xcalloc(1, sizeof(*lk));
    lk->key = xmalloc(plen + name_len + 1);
    lk->key_len = lock_key_write(lk->key, name, name_len);
    lk->name = lk->key + plen;
    lk->name_len = name_len;
    TAILQ_INIT(&lk->waiters);
    TAILQ_INIT(&lk->holders);
    RB_INSERT(lock_tree, &lock_table, lk);
    return lk;
}

/* Free an entry that has nothing left in it. */
static void
lock_put(struct lock *lk)
{
    if (lk->nholders > 0 || lk->nwaiters > 0) {
        return;
    }
    RB_REMOVE(lock_tree, &lock_table, lk);
    free(lk->key);
    free(lk);
}

/* The verb a bare verdict answers (lock_reply): whose hook hears it. */
enum lock_verb {
    LOCK_VERB_ACQUIRE,  /* LOCK, TRYLOCK */
    LOCK_VERB_RELEASE,  /* UNLOCK */
    LOCK_VERB_EXTEND,   /* EXTEND */
    LOCK_VERB_STATUS,   /* STATUS */
    LOCK_VERB_BREAK     /* BREAK */
};

/* Answer c's verb with an outcome and nothing more (its other fields 0, permit -1). */
static void
lock_reply(struct lock_client *c, enum lock_verb verb, enum lock_outcome outcome,
           const char *name, size_t name_len, const char *error)
{
    struct lock_verdict v = { outcome, name, name_len, error };

    switch (verb) {
    case LOCK_VERB_ACQUIRE:
        c->hooks->acquired(c, &(struct lock_acquire_result){ .v = v, .permit = -1 });
        break;
    case LOCK_VERB_RELEASE:
        c->hooks->released(c, &(struct lock_release_result){ .v = v });
        break;
    case LOCK_VERB_EXTEND:
        c->hooks->extended(c, &(struct lock_extend_result){ .v = v });
        break;
    case LOCK_VERB_STATUS:
        c->hooks->status(c, &(struct lock_status_result){ .v = v, .permit = -1 });
        break;
    case LOCK_VERB_BREAK:
        c->hooks->broken(c, &(struct lock_break_result){ .v = v });
        break;
    }
}

/* The record letter of a requested kind. */
static enum redlock_kind
lock_record_kind(enum lock_kind kind)
{
    return kind == LOCK_KIND_SHARED ? REDLOCK_SHARED
           : kind == LOCK_KIND_COUNTED ? REDLOCK_PERMIT : REDLOCK_EXCLUSIVE;
}

/* The kind of hold of a record letter: the inverse of lock_record_kind(). */
static enum lock_kind
lock_kind_of(enum redlock_kind kind)
{
    return kind == REDLOCK_SHARED ? LOCK_KIND_SHARED
           : kind == REDLOCK_PERMIT ? LOCK_KIND_COUNTED : LOCK_KIND_EXCLUSIVE;
}

/* The words a kind of hold is called in texts, with its article. */
static const char *
lock_kind_word(enum redlock_kind kind)
{
    return kind == REDLOCK_SHARED ? "a shared" : kind == REDLOCK_PERMIT ? "a counted"
           : "an exclusive";
}

/*
 * The text of ERR KIND for name, from what a master said ("limit=3",
 * "exclusive", "shared") or this daemon knows.
 */
static void
lock_kind_text(char *out, size_t size, const char *name, size_t name_len, const char *what)
{
    snprintf(out, size, "%.*s is held %s%.32s", (int)name_len, name,
             strncmp(what, "limit=", 6) == 0 ? "with " : "", what);
}

/*
 * Whether a request of this kind and limit fits the kind the name has
 * here (its holds and waiters); when not, the text of ERR KIND.
 */
static bool
lock_kind_fits(const struct lock *lk, const struct lock_request *req, char *out, size_t size)
{
    bool counted = req->kind == LOCK_KIND_COUNTED;
    char what[32];

    if (lk->counted == counted && (!counted || lk->limit == req->limit)) {
        return true;
    }
    if (lk->counted) {
        snprintf(what, sizeof(what), "limit=%u", lk->limit);
    } else {
        snprintf(what, sizeof(what), "%s", lk->nexclusive > 0 ? "exclusive" : "shared");
    }
    if (lk->nholders > 0) {
        lock_kind_text(out, size, lk->name, lk->name_len, what);
    } else {
        snprintf(out, size, "%.*s is waited for %s%s", (int)lk->name_len, lk->name,
                 lk->counted ? "with " : "without a limit", lk->counted ? what : "");
    }
    return false;
}

/* An UNLOCK or STATUS op for name, with its own copy of the key. */
static struct lock_op *
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

/* The oldest waiter that queues (not a wait=0 attempt), or NULL. */
static struct waiter *
lock_head(const struct lock *lk)
{
    struct waiter *w;

    TAILQ_FOREACH(w, &lk->waiters, link) {
        if (!W_ONCE(w)) {
            return w;
        }
    }
    return NULL;
}

/* The head, when this daemon's holds leave it room to ask the masters; else NULL. */
static struct waiter *
lock_ready_head(const struct lock *lk)
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

/*
 * The client's session-mode hold of lk, or NULL: looked for in the
 * shorter of the client's holds and the name's (both are usually one
 * long; either may be long: a session with many names, a name with many
 * shared holders).
 */
static struct hold *
client_hold(const struct lock_client *c, const struct lock *lk)
{
    struct hold *h;

    if (lk->nholders <= c->nholds) {
        TAILQ_FOREACH(h, &lk->holders, lock_link) {
            if (h->client == c) {
                return h;
            }
        }
        return NULL;
    }
    TAILQ_FOREACH(h, &c->holds, client_link) {
        if (h->lock == lk) {
            return h;
        }
    }
    return NULL;
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
}

/*
 * A permit for a counted head to propose: the next one, from a point
 * that moves on with each proposal, that no hold of this daemon has.
 */
static unsigned
lock_pick_slot(struct lock *lk)
{
    unsigned char mine[(REDLOCK_LIMIT_MAX + 7) / 8];
    struct hold *h;
    unsigned j, s;

    memset(mine, 0, sizeof(mine));
    TAILQ_FOREACH(h, &lk->holders, lock_link) {
        mine[h->lease.rec.slot / 8] |= (unsigned char)(1u << (h->lease.rec.slot % 8));
    }
    for (j = 0; j < lk->limit; j++) {
        s = (lk->next_slot + j) % lk->limit;
        if (!(mine[s / 8] & (1u << (s % 8)))) {
            lk->next_slot = (s + 1) % lk->limit;
            return s;
        }
    }
    return lk->next_slot;
}

/*
 * Let a waiter look again: from its timer on the next loop turn, or,
 * when its round is in flight (that round may have run before what woke
 * it), at once after the round if it finds the name busy.
 */
static void
waiter_rouse(struct waiter *w)
{
    if (waiter_wake(&w->life)) {
        event_active(&w->retry, EV_TIMEOUT, 0);
    }
}

/* Let the name's head, if any and if this daemon's holds leave it room, look again. */
static void
lock_wake_head(struct lock *lk)
{
    struct waiter *w = lock_ready_head(lk);

    if (w != NULL) {
        waiter_rouse(w);
    }
}

/* Put a new hold (its lease started) in the table and the client's holds. */
static void
hold_insert(struct hold *h, struct lock *lk, struct lock_client *c)
{
    h->lock = lk;
    h->client = c;
    h->holds = 1;
    TAILQ_INSERT_TAIL(&lk->holders, h, lock_link);
    lk->nholders++;
    if (h->lease.rec.kind == REDLOCK_EXCLUSIVE) {
        lk->nexclusive++;
    }
    TAILQ_INSERT_TAIL(&c->holds, h, client_link);
    c->nholds++;
    lock_nheld++;
}

/*
 * Take a hold out of the table and the client, end its lease (unless
 * it is lost already), and free it.  The keys on the masters are not
 * touched here.  The head waiter, if any, is woken to try the masters.
 */
static void
hold_drop(struct hold *h)
{
    struct lock *lk = h->lock;

    lease_end(&h->lease);
    TAILQ_REMOVE(&h->client->holds, h, client_link);
    h->client->nholds--;
    TAILQ_REMOVE(&lk->holders, h, lock_link);
    lk->nholders--;
    if (h->lease.rec.kind == REDLOCK_EXCLUSIVE) {
        lk->nexclusive--;
    }
    lock_wake_head(lk);
    lock_nheld--;
    free(h);
    lock_put(lk);
}

/* Push "! LOST" for a hold to its client (the hold is still there). */
static void
hold_report_lost(struct hold *h, enum lease_reason why)
{
    h->client->hooks->lost(h->client, h->lock->name, h->lock->name_len, lease_reason_name(why));
}

/*
 * This module found a hold lost (why: QUORUM for a grant that replaced
 * it, SHUTDOWN): the lease ends LOST, the client hears it first, then
 * the hold goes.  The keys are not touched here.
 */
static void
hold_lost(struct hold *h, enum lease_reason why)
{
    lease_lose(&h->lease, why);
    log_warn("lock %s: lost (%s)", h->lock->key, lease_reason_name(why));
    hold_report_lost(h, why);
    hold_drop(h);
}

/* The lease module found a hold's lease lost: tell the client, drop the hold. */
static void
lock_lease_lost(struct lease *l)
{
    struct hold *h = (struct hold *)(void *)((char *)l - offsetof(struct hold, lease));

    hold_report_lost(h, l->reason);
    hold_drop(h);
}

static void waiter_acquired(const struct redlock_acquire_result *res, void *arg);

/* The release of an orphaned token ended: our own head may try now. */
static void
lock_orphan_done(const struct redlock_release_result *res, void *arg)
{
    struct lock_orphan *o = arg;
    struct lock *lk;

    if (res->v.confirmed > 0 && (lk = lock_find(o->name, o->name_len)) != NULL) {
        lock_wake_head(lk);
    }
    free(o);
}

void
lock_abandon(const char *name, size_t name_len, const char *token)
{
    struct lock_orphan *o = xmalloc(sizeof(*o) + name_len);
    char key[REDLOCK_DERIVED_MAX];
    struct redlock_rec rec;

    o->name_len = name_len;
    memcpy(o->name, name, name_len);
    rec.base = key;
    rec.base_len = lock_key_write(key, name, name_len);
    rec.kind = REDLOCK_ANY;     /* whichever kind it was granted as */
    rec.slot = 0;
    rec.limit = 0;
    rec.labelled = true;
    redlock_release(&rec, token, lock_orphan_done, o);
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
static void
hold_give_up(struct hold *h, struct lock_op *op)
{
    struct lock *lk = h->lock;
    struct waiter *w = lock_head(lk);
    struct waiter_env env = waiter_env_now();
    struct waiter_give_up_step st;
    struct lock_handover *ho;
    struct redlock_rec rec;

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
    } else {
        redlock_release(&h->lease.rec, h->lease.token, op != NULL ? lock_unlock_done : NULL,
                        op);
    }
    stats.releases++;
    hold_drop(h);
}

/* Detach a waiter from its entry (the entry may be freed). */
static void
waiter_unqueue(struct waiter *w)
{
    struct lock *lk = w->lock;
    bool was_head;

    if (lk == NULL) {
        return;
    }
    was_head = w == lock_head(lk);
    TAILQ_REMOVE(&lk->waiters, w, link);
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

static void
waiter_free(struct waiter *w)
{
    if (w->life.gated) {
        redlock_ungate(w->key, w->key_len, w->gate_id);
    }
    if (w->ghost[0] != '\0') {
        /* Wherever the ghost landed and was not taken over (another permit, say). */
        lock_abandon(w->key + w->name_off, w->key_len - w->name_off, w->ghost);
    }
    waiter_unqueue(w);
    event_del(&w->retry);
    free(w->noquorum);
    free(w);
}

/* The waiter's LOCK/TRYLOCK is answered with an outcome STATS counts: its latency. */
static void
waiter_observe(const struct waiter *w)
{
    stats_observe_acquire(util_now_us() - w->start_us);
}

/* Answer the waiter's client and free the waiter. */
static void
waiter_finish(struct waiter *w, enum lock_outcome outcome, int64_t ttl_ms,
              const char *error)
{
    struct lock_client *c = w->client;
    struct lock_acquire_result res;
    char name[PROTO_NAME_MAX];
    char *owned = NULL;

    /* Free first: the hook may start the client's next operation. */
    if (error != NULL && error == w->noquorum) {
        owned = w->noquorum;        /* the text outlives the waiter */
        w->noquorum = NULL;
    }
    memset(&res, 0, sizeof(res));
    res.v.outcome = outcome;
    res.v.name_len = w->key_len - w->name_off;
    memcpy(name, w->key + w->name_off, res.v.name_len);
    res.v.name = name;
    res.permit = -1;
    res.busy_ttl_ms = ttl_ms;
    res.v.error = error;
    c->waiter = NULL;
    waiter_free(w);
    c->hooks->acquired(c, &res);
    free(owned);
}

/*
 * Hear releases of the name made anywhere, from now until its queue is
 * empty.  Not done for a LOCK that finds the name free here: most are
 * granted at once, and subscribing first would double the masters'
 * work of every uncontended LOCK (a SUBSCRIBE, then an UNSUBSCRIBE).
 * Until every master whose subscriber link is up confirmed it, a
 * refusal's mark could be deleted by a release that publishes to
 * nobody: the head's next try waits for the confirmations
 * (waiter_timer_cb, lock_subscribed), one round deadline at most, so
 * that a slow or dead subscriber link never stalls a waiter for long
 * (its confirmation, when it comes, makes the head try again).
 * Returns true when the subscription starts now.
 */
static bool
lock_watch(struct lock *lk)
{
    if (lk->watched) {
        return false;
    }
    lk->watched = true;
    redlock_watch(lk->key, lk->key_len, true);
    if (!redlock_watch_ready(lk->key, lk->key_len)) {
        lk->subscribe_until_us = util_now_us() + ctx.conf->node_timeout_ms * 1000;
    }
    return true;
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
static void
waiter_wait(struct waiter *w)
{
    if (!W_ONCE(w)) {
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
static void
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
    struct lock *lk = w->lock;
    bool ready;

    (void)fd;
    (void)what;
    if (lk == NULL) {
        return;     /* cancelled in a round: its end answers it */
    }
    ready = w == lock_ready_head(lk);
    st = waiter_on_timer(&w->life, &env, ready, lk->yield_until_us, lk->subscribe_until_us,
                         ready && lk->subscribe_until_us != 0
                         && redlock_watch_ready(lk->key, lk->key_len));
    if (st.subscribed) {
        lk->subscribe_until_us = 0;
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

/*
 * The hold of this daemon on the record rec: the exclusive one, or the
 * one on the same permit; NULL for a shared record (they exclude
 * nobody) or when there is none.
 */
static struct hold *
lock_same_record(const struct lock *lk, const struct redlock_rec *rec)
{
    struct hold *h;

    if (rec->kind == REDLOCK_SHARED) {
        return NULL;
    }
    TAILQ_FOREACH(h, &lk->holders, lock_link) {
        if (h->lease.rec.kind == rec->kind && h->lease.rec.slot == rec->slot) {
            return h;
        }
    }
    return NULL;
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
        /* Nothing to keep: the lock is the keys on the masters and the token. */
        char token[UTIL_TOKEN_HEX + 1], name[PROTO_NAME_MAX];

        stats.lease_grants++;
        memcpy(token, w->token, sizeof(token));
        memcpy(name, lk->name, lk->name_len);   /* the entry may go with the waiter */
        out.v.name = name;
        out.token = token;
        out.validity_ms = (res->validity_end_us - util_now_us()) / 1000;
        waiter_observe(w);
        c->waiter = NULL;
        waiter_free(w);
        c->hooks->acquired(c, &out);
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
        .watched = W_ONCE(w) || w->lock == NULL || w->lock->watched,
        .free_slot = res->free_slot,
        .holder_id = res->holder_id,
        .ttl_ms = res->busy_ttl_ms,
    };

    return r;
}

/* A round of the waiter ended (its own try, or a hand-over to it): carry out the policy's step. */
static void
waiter_acquired(const struct redlock_acquire_result *res, void *arg)
{
    struct waiter *w = arg;
    struct waiter_env env = waiter_env_now();
    struct waiter_round_end r = waiter_round_end(w, res);
    bool handover = w->life.state == WAITER_HANDING_OVER;
    struct waiter_round_step st = waiter_on_round(&w->life, &env, &r);
    struct redlock_rec rec;
    char text[PROTO_NAME_MAX + 64];

    waiter_rec(w, &rec);
    if (st.abandon) {
        /* Released where it may have landed, announced; our next head wakes when done. */
        lock_abandon(w->key + w->name_off, w->key_len - w->name_off, w->token);
    }
    if (st.release) {
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
    if (st.watch) {
        lock_watch(w->lock);
    }
    switch (st.what) {
    case WAITER_ROUND_GRANT:
        waiter_grant(w, res, handover);
        break;
    case WAITER_ROUND_HOP:
        w->slot = st.slot;
        waiter_try(w, false);
        break;
    case WAITER_ROUND_RETRY:
        waiter_timer_at(w, st.at_us);
        break;
    case WAITER_ROUND_ANSWER:
        if (st.answer == WAITER_ANSWER_KIND) {
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
    redlock_acquire(&rec, w->token, w->life.ttl_ms, old, flags, w->gate_id, waiter_label(w),
                    waiter_acquired, w);
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
    char limit[PROTO_NAME_MAX + 96];
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
    w->lease_mode = req->lease_mode;
    w->fence = req->fence || ctx.conf->fence == CONF_FENCE_ALWAYS;
    w->limit = lk->limit;
    w->start_us = start_us;
    /* A client whose input ended cannot wait: one attempt (lock_client_drain). */
    waiter_life_init(&w->life, kind, req->ttl_ms, req->wait_ms, req->trylock, c->draining,
                     start_us);
    evtimer_assign(&w->retry, ctx.base, waiter_timer_cb, w);
    TAILQ_INSERT_TAIL(&lk->waiters, w, link);
    lk->nwaiters++;
    lock_nwaiters++;
    if (!W_ONCE(w)) {
        lk->nqueued++;
    }
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
static void
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
    if (w != NULL && waiter_on_subscribed(&w->life)) {
        event_active(&w->retry, EV_TIMEOUT, 0);
    }
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
    op->client->hooks->lost(op->client, op->key + op->name_off, op->key_len - op->name_off,
                     lease_reason_name(why));
}

static void
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
    if (l == NULL) {
        lock_reply(c, LOCK_VERB_RELEASE, LOCK_NOTHELD, name, name_len, NULL);
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

void
lock_client_drain(struct lock_client *c)
{
    struct waiter *w = c->waiter;

    c->draining = true;
    /* Its deadline is now: answered by its timer, or when its round ends. */
    if (w != NULL && waiter_drain(&w->life, util_now_us())) {
        event_active(&w->retry, EV_TIMEOUT, 0);
    }
}

void
lock_client_close(struct lock_client *c)
{
    struct hold *h;
    struct waiter *w = c->waiter;

    c->closed = true;
    /* The waiter first: a released lock must not go to our own dying waiter. */
    if (w != NULL) {
        bool now = waiter_cancel(&w->life);

        waiter_unqueue(w);
        if (now) {
            waiter_finish(w, LOCK_CANCELLED, 0, NULL);
        }
        /* Otherwise answered (LOCK_CANCELLED) when its round ends. */
    }
    while ((h = TAILQ_FIRST(&c->holds)) != NULL) {
        hold_give_up(h, NULL);
    }
}

void
lock_client_shutdown(struct lock_client *c)
{
    struct hold *h;
    struct waiter *w = c->waiter;

    while ((h = TAILQ_FIRST(&c->holds)) != NULL) {
        /* Tell the holder first, then delete: it must stop before others start. */
        lease_lose(&h->lease, LEASE_REASON_SHUTDOWN);
        hold_report_lost(h, LEASE_REASON_SHUTDOWN);
        hold_give_up(h, NULL);
    }
    if (w != NULL && !WAITER_IN_ROUND(&w->life)) {
        waiter_finish(w, LOCK_SHUTDOWN, 0, "the daemon is stopping");
    }
}

/* ---- who holds what: LIST, BREAK ---- */

/* Tell fn of each hold of lk, then of each queued LOCK, in order. */
static void
lock_list_one(struct lock *lk, int64_t now, lock_list_fn fn, void *arg)
{
    struct lock_listing e;
    struct hold *h;
    struct waiter *w;
    size_t position = 0;

    memset(&e, 0, sizeof(e));
    e.name = lk->name;
    e.name_len = lk->name_len;
    e.waiters = lk->nqueued;
    e.held = true;
    TAILQ_FOREACH(h, &lk->holders, lock_link) {
        e.label = h->label;
        e.client = h->client;
        e.ttl_ms = lease_validity_left_ms(&h->lease, now);
        e.held_ms = (now - h->granted_us) / 1000;
        e.fence = h->lease.fence;
        e.kind = lock_kind_of(h->lease.rec.kind);
        e.limit = h->lease.rec.limit;
        e.permit = h->lease.rec.kind == REDLOCK_PERMIT ? (int)h->lease.rec.slot : -1;
        e.holds = h->holds;
        fn(&e, arg);
    }
    memset(&e, 0, sizeof(e));
    e.name = lk->name;
    e.name_len = lk->name_len;
    e.waiters = lk->nqueued;
    e.permit = -1;
    TAILQ_FOREACH(w, &lk->waiters, link) {
        if (W_ONCE(w)) {
            continue;       /* one attempt, answered at once: not waiting */
        }
        e.label = w->label;
        e.client = w->client;
        e.kind = lock_kind_of(w->life.kind);
        e.limit = w->limit;
        e.position = ++position;
        e.held_ms = (now - w->start_us) / 1000;
        fn(&e, arg);
    }
}

/*
 * The first entry of a LIST step: the first name after `after` (when
 * given), and not before the prefix (names that start with it are
 * contiguous in this order, from the prefix itself on).  O(log n).
 */
static struct lock *
lock_list_first(const char *prefix, size_t prefix_len, const char *after, size_t after_len)
{
    struct lock probe, from;
    struct lock *lk;

    from.name = prefix;
    from.name_len = prefix_len;
    probe.name = after;
    probe.name_len = after_len;
    if (after == NULL || lock_cmp(&probe, &from) < 0) {
        return RB_NFIND(lock_tree, &lock_table, &from);
    }
    /* The name the last step ended on may be gone since: the first one at or after it. */
    lk = RB_NFIND(lock_tree, &lock_table, &probe);
    if (lk != NULL && lock_cmp(lk, &probe) == 0) {
        lk = RB_NEXT(lock_tree, &lock_table, lk);
    }
    return lk;
}

size_t
lock_list(const char *prefix, size_t prefix_len, const char *after, size_t after_len,
          size_t max_names, lock_list_fn fn, void *arg, char *last, size_t *last_len)
{
    int64_t now = util_now_us();
    struct lock *lk, *next, *prev = NULL;
    size_t n = 0;

    if (prefix == NULL) {
        prefix = "";
        prefix_len = 0;
    }
    stats.list_steps++;
    for (lk = lock_list_first(prefix, prefix_len, after, after_len);
         lk != NULL && n < max_names; lk = next) {
        stats.list_visited++;
        if (lk->name_len < prefix_len || memcmp(lk->name, prefix, prefix_len) != 0) {
            break;      /* past the names with the prefix */
        }
        /*
         * A table larger than the caches has each entry, its name and
         * its holds in memory apart: ask for the next ones while this
         * one is written.
         */
        next = RB_NEXT(lock_tree, &lock_table, lk);
        if (next != NULL) {
            __builtin_prefetch(next->name);
            __builtin_prefetch(TAILQ_FIRST(&next->holders));
        }
        lock_list_one(lk, now, fn, arg);
        prev = lk;
        n++;
    }
    if (prev != NULL) {
        *last_len = prev->name_len;
        memcpy(last, prev->name, prev->name_len);
    }
    return n;
}

static void
lock_break_done(const struct redlock_break_result *rr, void *arg)
{
    struct lock_op *op = arg;
    struct lock_break_result res;

    memset(&res, 0, sizeof(res));
    if (rr->v.outcome == REDLOCK_RELEASED) {
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
static void
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
        /* A grant in flight whose token was broken is no grant (waiter_acquired). */
        TAILQ_FOREACH(w, &lk->waiters, link) {
            if (WAITER_IN_ROUND(&w->life) && lock_token_among(w->token, tokens, tokens_len)) {
                w->life.broken = true;
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
        redlock_release(&h->lease.rec, h->lease.token, NULL, NULL);
        hold_lost(h, LEASE_REASON_BROKEN);      /* may free lk */
    }
}
