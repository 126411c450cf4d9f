/*
 * watch.c: WATCH entries, their reads of the masters and their pushes.
 *
 * The entries are in a tsearch(3) tree keyed by name, as the lock table
 * is.  An entry has at most one read in flight; a message heard during
 * it makes one more read after it, so that copies of one announcement
 * from every master cost two reads, not one per copy.
 */
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "conf/conf.h"
#include "daemon/ctx.h"
#include "daemon/lock.h"
#include "daemon/log.h"
#include "daemon/redlock.h"
#include "daemon/stats.h"
#include "daemon/util.h"
#include "daemon/watch.h"
#include "daemon/xmalloc.h"

#define WATCH_BACKOFF_MAX_US  2000000   /* longest retry delay of a read without quorum */
#define WATCH_EXPIRY_MARGIN_US 20000    /* read an expiring name this long after the
                                           quorum's ttl (a read still finding it held
                                           only sets the next one) */

/* What was last pushed of a name: a push happens when this changes. */
struct watch_seen {
    bool     held;                          /* HELD, else FREE */
    char     kind;                          /* held: the holders' record letter */
    size_t   holders;                       /* held: how many */
    unsigned limit;                         /* held, counted: the limit */
    int64_t  fence;                         /* held: the shown holder's fence */
    char     holder[REDLOCK_WHO_MAX + 1];   /* held: the shown holder's token */
    char     label[REDLOCK_LABEL_MAX + 1];  /* held: the shown holder's label */
};

/*
 * One watched name.  Owned by this module; freed when its last watcher
 * left and no read is in flight.  name points into key.
 */
struct watch_name {
    char               *key;        /* malloc'd: prefix + name, NUL-terminated */
    size_t              key_len;    /* bytes in key */
    const char         *name;       /* key + prefix length */
    size_t              name_len;   /* bytes in name */
    struct watcher_list watchers;   /* who watches it */
    size_t              n;          /* entries in watchers */
    bool                reading;    /* a read of the masters is in flight, or waits
                                       for its turn (job) */
    bool                again;      /* a message came during the read: read again */
    bool                known;      /* seen holds a state a quorum gave */
    bool                subscribed; /* its changes channel is wanted (one count) */
    bool                settling;   /* new: read once more a round deadline after the
                                       first read (the SUBSCRIBE is surely taken) */
    struct watch_seen   seen;       /* the last state pushed */
    struct event        timer;      /* the next read: expiry, backoff, settling */
    int64_t             backoff_us; /* delay of the next read after no quorum */
    struct readq_job    job;        /* its read's turn (daemon/readq.h) */
};

/* One session watching one name.  Owned by this module. */
struct watcher {
    struct watch_name   *wn;            /* the name */
    struct watch_client *client;        /* the session */
    TAILQ_ENTRY(watcher) name_link;     /* in wn->watchers */
    TAILQ_ENTRY(watcher) client_link;   /* in client->watchers */
    bool                 synced;        /* it was told the current state */
};

static void              *watch_root;   /* tsearch tree of struct watch_name */

static void watch_read(struct watch_name *wn);
static void watch_changed(const char *key, size_t key_len);

static int
watch_cmp(const void *a, const void *b)
{
    const struct watch_name *x = a, *y = b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);

    if (c != 0) {
        return c;
    }
    return (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

static struct watch_name *
watch_find_key(const char *key, size_t key_len)
{
    struct watch_name probe;
    void *found;

    probe.key = (char *)(uintptr_t)key;
    probe.key_len = key_len;
    found = tfind(&probe, &watch_root, watch_cmp);
    return found != NULL ? *(struct watch_name **)found : NULL;
}

void
watch_init(void)
{
    redlock_on_change(watch_changed);
}

void
watch_client_init(struct watch_client *c, watch_push_fn push, struct readq_client *reads)
{
    memset(c, 0, sizeof(*c));
    c->push = push;
    c->reads = reads;
    TAILQ_INIT(&c->watchers);
}

/* Read the name again in delay_us (0: on the next loop turn). */
static void
watch_read_in(struct watch_name *wn, int64_t delay_us)
{
    struct timeval tv = { (time_t)(delay_us / 1000000), (suseconds_t)(delay_us % 1000000) };

    event_del(&wn->timer);
    event_add(&wn->timer, &tv);
}

static void
watch_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    watch_read(arg);
}

/* Free an entry that has no watcher and no read in flight. */
static void
watch_put(struct watch_name *wn)
{
    if (wn->n > 0 || wn->reading) {
        return;
    }
    event_del(&wn->timer);
    tdelete(wn, &watch_root, watch_cmp);
    free(wn->key);
    free(wn);
}

/* The state of a read, as pushes show it. */
static void
watch_state_of(const struct watch_name *wn, const struct redlock_status_result *res,
               struct watch_state *st)
{
    memset(st, 0, sizeof(*st));
    st->name = wn->name;
    st->name_len = wn->name_len;
    st->held = res->v.outcome == REDLOCK_HELD;
    if (!st->held) {
        return;
    }
    st->kind = res->kind == REDLOCK_SHARED ? "shared"
               : res->kind == REDLOCK_PERMIT ? "counted" : "exclusive";
    st->holders = res->holders;
    st->limit = res->limit;
    st->label = res->label[0] != '\0' ? res->label : NULL;
    st->held_ms = res->held_ms;
    if (st->label == NULL) {
        /* A hold of this daemon whose label lives here only. */
        (void)lock_hold_label(wn->name, wn->name_len, res->holder, &st->label, &st->held_ms);
    }
    st->fence = res->holder_fence;
}

/* What of a read decides whether it is a change. */
static void
watch_seen_of(const struct redlock_status_result *res, struct watch_seen *seen)
{
    memset(seen, 0, sizeof(*seen));
    seen->held = res->v.outcome == REDLOCK_HELD;
    if (!seen->held) {
        return;
    }
    seen->kind = (char)res->kind;
    seen->holders = res->holders;
    seen->limit = res->limit;
    seen->fence = res->holder_fence;
    memcpy(seen->holder, res->holder, sizeof(seen->holder));
    memcpy(seen->label, res->label, sizeof(seen->label));
}

static void
watch_read_done(const struct redlock_status_result *res, void *arg)
{
    struct watch_name *wn = arg;
    struct watch_seen seen;
    struct watch_state st;
    struct watcher *w, *next;
    bool changed;
    int64_t delay;

    /*
     * The slot goes on first, while the entry still counts as reading:
     * the next read let in may answer other sessions at once, and one of
     * them may UNWATCH this name; watch_put() keeps wn for us meanwhile.
     */
    readq_done(&wn->job);
    wn->reading = false;
    if (wn->n == 0) {
        watch_put(wn);
        return;
    }
    if ((res->v.outcome != REDLOCK_HELD && res->v.outcome != REDLOCK_FREE)
        || (res->v.outcome == REDLOCK_HELD && res->fence_pending)) {
        /*
         * Nothing true to say yet: no quorum, or a fenced grant whose fence
         * is not written back (its holder has not been told; watchers hear
         * it with its fence, and the write-back announces itself, as does
         * the release of a grant that fails).  Read again after a backoff.
         */
        wn->backoff_us = wn->backoff_us == 0 ? ctx.conf->retry_delay_ms * 1000
                         : wn->backoff_us * 2;
        if (wn->backoff_us > WATCH_BACKOFF_MAX_US) {
            wn->backoff_us = WATCH_BACKOFF_MAX_US;
        }
        watch_read_in(wn, wn->again ? 0 : wn->backoff_us);
        wn->again = false;
        return;
    }
    wn->backoff_us = 0;
    watch_seen_of(res, &seen);
    changed = !wn->known || memcmp(&seen, &wn->seen, sizeof(seen)) != 0;
    wn->seen = seen;
    wn->known = true;
    watch_state_of(wn, res, &st);
    for (w = TAILQ_FIRST(&wn->watchers); w != NULL; w = next) {
        next = TAILQ_NEXT(w, name_link);
        if (changed || !w->synced) {
            w->synced = true;
            w->client->push(w->client, &st);
        }
    }
    if (wn->again) {
        wn->again = false;
        watch_read_in(wn, 0);
    } else if (wn->settling) {
        wn->settling = false;
        watch_read_in(wn, ctx.conf->node_timeout_ms * 1000);
    } else if (res->v.outcome == REDLOCK_HELD && res->holders_ttl_ms >= 0) {
        /* An expiry announces nothing: look when the quorum said it ends. */
        delay = res->holders_ttl_ms * 1000 + WATCH_EXPIRY_MARGIN_US
                + util_random(ctx.conf->retry_delay_ms * 1000);
        watch_read_in(wn, delay);
    } else {
        event_del(&wn->timer);
    }
}

/* The read's turn came (daemon/readq.h): read the name on the masters. */
static void
watch_read_start(struct readq_job *j, void *arg)
{
    struct watch_name *wn = arg;

    (void)j;
    if (redlock_status(wn->key, wn->key_len, NULL, watch_read_done, wn) != 0) {
        wn->reading = false;
        readq_done(&wn->job);
        log_warn("watch %s: its key is too long to read; trying again", wn->key);
        watch_read_in(wn, WATCH_BACKOFF_MAX_US);
    }
}

/*
 * Read the name on the masters when its oldest watcher's session has
 * its turn (now, mostly), or after the read in flight.
 */
static void
watch_read(struct watch_name *wn)
{
    struct watcher *first = TAILQ_FIRST(&wn->watchers);

    if (wn->reading) {
        wn->again = wn->again || !wn->job.waiting;  /* a waiting read will see it */
        return;
    }
    if (first == NULL) {
        return;     /* nobody to tell */
    }
    wn->reading = true;
    if (readq_ask(first->client->reads, &wn->job, watch_read_start, wn)) {
        watch_read_start(&wn->job, wn);
    }
}

/* A message on a name's channel: read the name again if it is watched. */
static void
watch_changed(const char *key, size_t key_len)
{
    struct watch_name *wn = watch_find_key(key, key_len);

    if (wn != NULL && wn->n > 0) {
        watch_read(wn);
    }
}

/* Hear the name's changes channel on every master. */
static void
watch_subscribe(struct watch_name *wn)
{
    wn->subscribed = true;
    if (redlock_watch_changes(wn->key, wn->key_len, true) != 0) {
        wn->subscribed = false;
        log_warn("watch %s: its key is too long to subscribe; changes are seen at expiry "
                 "only", wn->key);
    }
}

/* A new entry for name, subscribed and being read. */
static struct watch_name *
watch_name_new(const char *name, size_t name_len)
{
    size_t plen = strlen(ctx.conf->key_prefix);
    struct watch_name *wn = xcalloc(1, sizeof(*wn));

    wn->key = xmalloc(plen + name_len + 1);
    memcpy(wn->key, ctx.conf->key_prefix, plen);
    memcpy(wn->key + plen, name, name_len);
    wn->key[plen + name_len] = '\0';
    wn->key_len = plen + name_len;
    wn->name = wn->key + plen;
    wn->name_len = name_len;
    TAILQ_INIT(&wn->watchers);
    evtimer_assign(&wn->timer, ctx.base, watch_timer_cb, wn);
    if (tsearch(wn, &watch_root, watch_cmp) == NULL) {
        xmalloc_fail("a watched name's entry");
    }
    watch_subscribe(wn);
    /*
     * A change made while the SUBSCRIBE is on its way is heard by no
     * one: read once more when the subscription has surely been taken
     * (a round deadline after the first read).
     */
    wn->settling = true;
    watch_read(wn);
    return wn;
}

int
watch_add(struct watch_client *c, const char *name, size_t name_len, const char **error)
{
    size_t plen = strlen(ctx.conf->key_prefix);
    char key[REDLOCK_KEY_MAX + 1];
    struct watch_name *wn;
    struct watcher *w;

    if (plen + name_len > REDLOCK_KEY_MAX) {
        *error = "the lock's key is too long (lock.key_prefix + name)";
        return -1;
    }
    memcpy(key, ctx.conf->key_prefix, plen);
    memcpy(key + plen, name, name_len);
    wn = watch_find_key(key, plen + name_len);
    if (wn != NULL) {
        TAILQ_FOREACH(w, &c->watchers, client_link) {
            if (w->wn == wn) {
                /*
                 * Watched already: one watch, told the state once and every
                 * change since; a repeated WATCH asks the masters nothing.
                 */
                return 1;
            }
        }
    }
    if ((int64_t)c->n >= ctx.conf->max_locks_per_client) {
        *error = "this session watches as many names as it may hold locks "
                 "(limits.max_locks_per_client)";
        return -1;
    }
    if ((int64_t)stats.watching >= ctx.conf->max_watches) {
        *error = "the daemon's sessions have as many WATCHes open as it allows "
                 "(limits.max_watches)";
        return -1;
    }
    w = xcalloc(1, sizeof(*w));
    if (wn == NULL) {
        wn = watch_name_new(name, name_len);
    }
    if (!wn->subscribed) {
        /*
         * An entry its last watcher left while a read was in flight: its
         * subscription went with that watcher; take it again.
         */
        watch_subscribe(wn);
        wn->settling = true;
    }
    w->wn = wn;
    w->client = c;
    TAILQ_INSERT_TAIL(&wn->watchers, w, name_link);
    wn->n++;
    TAILQ_INSERT_TAIL(&c->watchers, w, client_link);
    c->n++;
    stats.watches++;
    stats.watching++;
    if (!wn->reading) {
        /* The new watcher hears the state as a quorum gives it now. */
        watch_read_in(wn, 0);
    }
    return 0;
}

/* End one watch; the entry goes with its last watcher. */
static void
watch_free_watcher(struct watcher *w)
{
    struct watch_name *wn = w->wn;
    struct watch_client *c = w->client;

    bool moved = wn->job.waiting && wn->job.owner == c->reads;

    if (moved) {
        readq_cancel(&wn->job);     /* it waited in this session's turn */
        wn->reading = false;
    }
    TAILQ_REMOVE(&wn->watchers, w, name_link);
    wn->n--;
    TAILQ_REMOVE(&c->watchers, w, client_link);
    c->n--;
    stats.watching--;
    free(w);
    if (moved && wn->n > 0) {
        watch_read(wn);             /* in the next watcher's turn */
    }
    if (wn->n == 0) {
        if (wn->subscribed) {
            redlock_watch_changes(wn->key, wn->key_len, false);
            wn->subscribed = false;
        }
        watch_put(wn);
    }
}

void
watch_remove(struct watch_client *c, const char *name, size_t name_len)
{
    struct watcher *w;

    TAILQ_FOREACH(w, &c->watchers, client_link) {
        if (w->wn->name_len == name_len && memcmp(w->wn->name, name, name_len) == 0) {
            watch_free_watcher(w);
            return;
        }
    }
}

void
watch_client_close(struct watch_client *c)
{
    struct watcher *w;

    while ((w = TAILQ_FIRST(&c->watchers)) != NULL) {
        watch_free_watcher(w);
    }
}
