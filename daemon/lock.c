/*
 * lock.c: the lock table: names, this daemon's session holds of them,
 * the sessions' lives (drain, close, shutdown) and LIST.
 *
 * The table maps a name to its entry in a red-black tree ordered by the
 * name's bytes (the RB_ macros of <bsd/sys/tree.h>, as OpenBSD's
 * daemons and tmux keep their ordered sets): O(log n) per request
 * whatever names clients choose, and a walk in name order that resumes
 * from any name in O(log n) (RB_NFIND), which LIST's steps use.  An
 * entry lives while this daemon holds the name or has waiters on it.
 *
 * The module is three files around one private header (lock_table.h,
 * which defines the entry, the hold and the waiter): this one owns the
 * table and the holds; lock_queue.c the waiters (what each event means
 * for one is decided by daemon/waiter.c); lock_verbs.c UNLOCK, EXTEND,
 * STATUS and BREAK.
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

bool            lock_stopping; /* lock_set_shutdown() was called */
static RB_HEAD(lock_tree, lock) lock_table = RB_INITIALIZER(&lock_table); /* by name */
static size_t   lock_nheld;    /* holds alive */
static size_t   lock_nnames;   /* entries in lock_table */

static void lock_lease_lost(struct lease *l);

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
lock_count_names(void)
{
    return lock_nnames;
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

/* The entry of name, or NULL when this daemon neither holds nor waits for it. */
struct lock *
lock_find(const char *name, size_t name_len)
{
    struct lock probe;

    probe.name = name;
    probe.name_len = name_len;
    return RB_FIND(lock_tree, &lock_table, &probe);
}

/* Write key_prefix + name and a NUL into out; returns the key's length. */
size_t
lock_key_write(char *out, const char *name, size_t name_len)
{
    size_t plen = strlen(ctx.conf->key_prefix);

    memcpy(out, ctx.conf->key_prefix, plen);
    memcpy(out + plen, name, name_len);
    out[plen + name_len] = '\0';
    return plen + name_len;
}

/* The entry of name, made (with no holder and no waiter) when there is none. */
struct lock *
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
    lock_nnames++;
    return lk;
}

/* Free an entry that has nothing left in it. */
void
lock_put(struct lock *lk)
{
    if (lk->nholders > 0 || lk->nwaiters > 0) {
        return;
    }
    RB_REMOVE(lock_tree, &lock_table, lk);
    lock_nnames--;
    free(lk->key);
    free(lk);
}

/* Answer c's verb with an outcome and nothing more (its other fields 0, permit -1). */
void
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
enum redlock_kind
lock_record_kind(enum lock_kind kind)
{
    return kind == LOCK_KIND_SHARED ? REDLOCK_SHARED
           : kind == LOCK_KIND_COUNTED ? REDLOCK_PERMIT : REDLOCK_EXCLUSIVE;
}

/* The kind of hold of a record letter: the inverse of lock_record_kind(). */
enum lock_kind
lock_kind_of(enum redlock_kind kind)
{
    return kind == REDLOCK_SHARED ? LOCK_KIND_SHARED
           : kind == REDLOCK_PERMIT ? LOCK_KIND_COUNTED : LOCK_KIND_EXCLUSIVE;
}

/* The words a kind of hold is called in texts, with its article. */
const char *
lock_kind_word(enum redlock_kind kind)
{
    return kind == REDLOCK_SHARED ? "a shared" : kind == REDLOCK_PERMIT ? "a counted"
           : "an exclusive";
}

/*
 * The text of ERR KIND for name, from what a master said ("limit=3",
 * "exclusive", "shared") or this daemon knows.
 */
void
lock_kind_text(char *out, size_t size, const char *name, size_t name_len, const char *what)
{
    snprintf(out, size, "%.*s is held %s%.32s", (int)name_len, name,
             strncmp(what, "limit=", 6) == 0 ? "with " : "", what);
}

/*
 * Whether a request of this kind and limit fits the kind the name has
 * here (its holds and waiters); when not, the text of ERR KIND.
 */
bool
lock_kind_fits(const struct lock *lk, const struct lock_request *req, char *out, size_t size)
{
    enum waiter_fit fit = waiter_kind_fits(lk->counted, lk->limit, lk->nholders,
                                           req->kind == LOCK_KIND_COUNTED, req->limit);
    char what[32];

    if (fit == WAITER_FITS) {
        return true;
    }
    if (lk->counted) {
        snprintf(what, sizeof(what), "limit=%u", lk->limit);
    } else {
        snprintf(what, sizeof(what), "%s", lk->nexclusive > 0 ? "exclusive" : "shared");
    }
    if (fit == WAITER_HELD_AS) {
        lock_kind_text(out, size, lk->name, lk->name_len, what);
    } else {
        snprintf(out, size, "%.*s is waited for %s%s", (int)lk->name_len, lk->name,
                 lk->counted ? "with " : "without a limit", lk->counted ? what : "");
    }
    return false;
}

/*
 * The client's session-mode hold of lk, or NULL: looked for in the
 * shorter of the client's holds and the name's (both are usually one
 * long; either may be long: a session with many names, a name with many
 * shared holders).
 */
struct hold *
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

/* Put a new hold (its lease started) in the table and the client's holds. */
void
hold_insert(struct hold *h, struct lock *lk, struct lock_client *c)
{
    h->lock = lk;
    h->client = c;
    h->holds = 1;
    lock_changed();     /* a set queued here may not be ready any more (lock_reline_cb) */
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
void
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
    lock_changed();
    if (h->set != NULL) {
        h->set->hold[h->set_index] = NULL;
        if (--h->set->left == 0) {
            event_del(&h->set->reap);
            free(h->set->text);
            free(h->set);
        }
    }
    lock_wake_head(lk);
    lock_nheld--;
    free(h);
    lock_put(lk);
}

/*
 * Push "! LOST" for a hold to its client (the hold is still there), and
 * note it among the recent events (daemon/events.h).
 */
static void
hold_report_lost(struct hold *h, enum lease_reason why)
{
    const char *name = h->lock->name;
    size_t len = h->lock->name_len;

    if (h->set != NULL) {
        /* A set is lost as one: one LOST naming it. */
        if (h->set->reported) {
            return;
        }
        h->set->reported = true;
        name = h->set->text;
        len = h->set->text_len;
    }
    events_note(EVENTS_LOST, name, len, h->label, lease_reason_name(why));
    h->client->hooks->lost(h->client, name, len, lease_reason_name(why));
}

/*
 * This module found a hold lost (why: QUORUM for a grant that replaced
 * it, SHUTDOWN): the lease ends LOST, the client hears it first, then
 * the hold goes.  The keys are not touched here.
 */
void
hold_lost(struct hold *h, enum lease_reason why)
{
    lease_lose(&h->lease, why);
    log_warn("lock %s: lost (%s)", h->lock->key, lease_reason_name(why));
    hold_report_lost(h, why);
    if (h->set != NULL) {
        hold_set_lost(h);
        return;
    }
    hold_drop(h);
}

/* The lease module found a hold's lease lost: tell the client, drop the hold. */
static void
lock_lease_lost(struct lease *l)
{
    struct hold *h = (struct hold *)(void *)((char *)l - offsetof(struct hold, lease));

    hold_report_lost(h, l->reason);
    if (h->set != NULL) {
        hold_set_lost(h);
        return;
    }
    hold_drop(h);
}

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
    struct lock_orphan *o;
    char key[REDLOCK_DERIVED_MAX];
    struct redlock_rec rec;
    const char *sp = memchr(name, ' ', name_len);

    if (sp != NULL) {
        /* A set's names: each one (a name has no space). */
        lock_abandon(name, (size_t)(sp - name), token);
        lock_abandon(sp + 1, name_len - (size_t)(sp - name) - 1, token);
        return;
    }
    o = xmalloc(sizeof(*o) + name_len);
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
 * The hold of this daemon on the record rec: the exclusive one, or the
 * one on the same permit; NULL for a shared record (they exclude
 * nobody) or when there is none.
 */
struct hold *
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
lock_view(size_t max_names, lock_list_fn fn, void *arg)
{
    int64_t now = util_now_us();
    struct lock *lk;
    size_t n = 0;

    for (lk = RB_MIN(lock_tree, &lock_table); lk != NULL && n < max_names;
         lk = RB_NEXT(lock_tree, &lock_table, lk)) {
        lock_list_one(lk, now, fn, arg);
        n++;
    }
    return n;
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
