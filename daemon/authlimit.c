/*
 * authlimit.c: token buckets of wrong AUTH passwords, and the line of
 * AUTHs waiting for a token.
 *
 * Each bucket is kept as one time (util_gcra_wait()): a wrong password
 * moves it one refill later, and the bucket is empty while it is more
 * than burst - 1 refills ahead of now.  The line is one FIFO for the
 * whole daemon, served by one timer: each turn walks it in order and
 * lets in every AUTH whose path has a token by then (taking the tokens
 * is for authlimit_failed, once the password was compared), so AUTHs of
 * one group are served in arrival order and a group with tokens is not
 * held behind one without.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "daemon/authlimit.h"
#include "daemon/keyhash.h"
#include "daemon/log.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"

#define AUTHLIMIT_KEY_MAX (AUTHLIMIT_SOURCE_MAX + 2)   /* "g " or "k " and a text */
#define AUTHLIMIT_PATH_MAX 3                            /* buckets on a path */

/* One bucket: a group's, an IPv6 /48's, or a known address's. */
struct authlimit_entry {
    char    key[AUTHLIMIT_KEY_MAX]; /* "g <group>" or "k <address>"; "" when free */
    int64_t tat_us;                 /* the bucket, as a time (see above), monotonic us */
    int64_t known_until_us;         /* "k" entries: known until then */
};

/* What an AUTH's path is made of, worked out from its peer once. */
struct authlimit_keys {
    char group[AUTHLIMIT_KEY_MAX];  /* "g <group>" */
    char site[AUTHLIMIT_KEY_MAX];   /* "g <IPv6 /48>", or "" */
    char known[AUTHLIMIT_KEY_MAX];  /* "k <exact address>" */
};

static struct authlimit_entry authlimit_table[AUTHLIMIT_ENTRIES];
static struct authlimit_entry authlimit_overflow = { "overflow", 0, 0 };
static struct authlimit_entry authlimit_daemon = { "daemon", 0, 0 };

static TAILQ_HEAD(, authlimit_waiter) authlimit_line = TAILQ_HEAD_INITIALIZER(authlimit_line);
static size_t authlimit_nline;
static struct authlimit_waiter *authlimit_cursor;  /* next to look at in a walk, or NULL */
static struct event *authlimit_timer;
static int64_t authlimit_due_us = INT64_MAX;   /* no AUTH in line can be checked before
                                                  this (the timer is set for it) */
static bool    authlimit_walk_added;           /* an AUTH joined the line during a walk */

static int64_t  authlimit_log_tat;          /* the wrong-password lines' bucket */
static uint64_t authlimit_log_dropped;      /* wrong-password lines not written since */
static struct log_every authlimit_drop_log; /* the line that sums them */
static struct log_every authlimit_held_log; /* the line that sums AUTHs that waited */

/* The exact address and the group of peer; *site gets the IPv6 /48 or "". */
static void
authlimit_parse(const char *peer, char *exact, char *group, char *site, size_t size)
{
    const char *end = strrchr(peer, ':');
    char host[INET6_ADDRSTRLEN + 1];
    struct in6_addr a6;
    struct in_addr a4;
    unsigned char *b;
    size_t len;

    site[0] = '\0';
    if (strncmp(peer, "unix ", 5) == 0) {
        const char *pid = strstr(peer, " pid=");

        snprintf(exact, size, "%.*s", (int)(pid != NULL ? pid - peer : (long)strlen(peer)),
                 peer);
        snprintf(group, size, "%s", exact);
        return;
    }
    if (peer[0] == '[' && end != NULL && end[-1] == ']') {
        len = (size_t)(end - 1 - (peer + 1));
        snprintf(host, sizeof(host), "%.*s", (int)(len < sizeof(host) ? len : 0), peer + 1);
    } else {
        snprintf(host, sizeof(host), "%.*s",
                 (int)(end != NULL ? end - peer : (long)strlen(peer)), peer);
    }
    if (inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_V4MAPPED(&a6)) {
        /* An IPv4 client of an IPv6 socket is the same source as on an IPv4 one. */
        memcpy(&a4, &a6.s6_addr[12], 4);
        inet_ntop(AF_INET, &a4, host, sizeof(host));
    } else if (inet_pton(AF_INET6, host, &a6) == 1) {
        /* One IPv6 host usually has a whole /64: that is its address. */
        memset(&a6.s6_addr[8], 0, 8);
        inet_ntop(AF_INET6, &a6, host, sizeof(host));
        snprintf(exact, size, "[%s]/64", host);
        snprintf(group, size, "%s", exact);
        memset(&a6.s6_addr[6], 0, 2);
        inet_ntop(AF_INET6, &a6, host, sizeof(host));
        snprintf(site, size, "[%s]/48", host);
        return;
    }
    if (inet_pton(AF_INET, host, &a4) != 1) {
        snprintf(exact, size, "%s", host);  /* something else: its own group */
        snprintf(group, size, "%s", host);
        return;
    }
    snprintf(exact, size, "%s", host);
    b = (unsigned char *)&a4.s_addr;
    if (b[0] == 127) {
        snprintf(group, size, "127.0.0.0/8");   /* every local user has all of it */
    } else {
        snprintf(group, size, "%u.%u.%u.0/24", b[0], b[1], b[2]);
    }
}

void
authlimit_group(const char *peer, char *out, size_t size)
{
    char exact[AUTHLIMIT_SOURCE_MAX], site[AUTHLIMIT_SOURCE_MAX];

    authlimit_parse(peer, exact, out, site, size < sizeof(exact) ? size : sizeof(exact));
}

static struct authlimit_entry *authlimit_known(const char *known_key, int64_t now_us);

bool
authlimit_admission(const char *peer, int64_t now_us, char *out, size_t size)
{
    char exact[AUTHLIMIT_SOURCE_MAX], group[AUTHLIMIT_SOURCE_MAX], site[AUTHLIMIT_SOURCE_MAX];
    char key[AUTHLIMIT_KEY_MAX];

    authlimit_parse(peer, exact, group, site, AUTHLIMIT_SOURCE_MAX);
    snprintf(key, sizeof(key), "k %s", exact);
    if (authlimit_known(key, now_us) != NULL) {
        snprintf(out, size, "known %s", exact);
        return true;
    }
    snprintf(out, size, "%s", group);
    return false;
}

static void
authlimit_keys(const char *peer, struct authlimit_keys *k)
{
    char exact[AUTHLIMIT_SOURCE_MAX], group[AUTHLIMIT_SOURCE_MAX], site[AUTHLIMIT_SOURCE_MAX];

    authlimit_parse(peer, exact, group, site, AUTHLIMIT_SOURCE_MAX);
    snprintf(k->group, sizeof(k->group), "g %s", group);
    snprintf(k->known, sizeof(k->known), "k %s", exact);
    if (site[0] != '\0') {
        snprintf(k->site, sizeof(k->site), "g %s", site);
    } else {
        k->site[0] = '\0';
    }
}

/* An entry holds nothing a fresh one would not: it may be given up. */
static bool
authlimit_spent(const struct authlimit_entry *e, int64_t now_us)
{
    return e->tat_us <= now_us && e->known_until_us <= now_us;
}

/*
 * The entry of key.  When it has none: NULL if create is false and a
 * slot is free (its bucket is full); else a new entry in a free or spent
 * slot; else (every slot looked at holds a bucket in use) the overflow
 * bucket, or NULL for a "k" key (an address that cannot be remembered
 * is not known).
 */
static struct authlimit_entry *
authlimit_find(const char *key, bool create, int64_t now_us)
{
    size_t i = (size_t)(keyhash(key, strlen(key)) % AUTHLIMIT_ENTRIES), k;
    struct authlimit_entry *e, *slot = NULL;

    for (k = 0; k < AUTHLIMIT_PROBE; k++) {
        e = &authlimit_table[(i + k) % AUTHLIMIT_ENTRIES];
        if (e->key[0] != '\0' && strcmp(e->key, key) == 0) {
            return e;
        }
        if (slot == NULL && (e->key[0] == '\0' || authlimit_spent(e, now_us))) {
            slot = e;
        }
    }
    if (slot == NULL) {
        return key[0] == 'k' ? NULL : &authlimit_overflow;
    }
    if (!create) {
        return NULL;
    }
    memset(slot, 0, sizeof(*slot));
    snprintf(slot->key, sizeof(slot->key), "%s", key);
    slot->tat_us = now_us;
    return slot;
}

/* A known address's entry ("k <address>"), or NULL when it is not known now. */
static struct authlimit_entry *
authlimit_known(const char *known_key, int64_t now_us)
{
    size_t i = (size_t)(keyhash(known_key, strlen(known_key)) % AUTHLIMIT_ENTRIES), n;
    struct authlimit_entry *e;

    for (n = 0; n < AUTHLIMIT_PROBE; n++) {
        e = &authlimit_table[(i + n) % AUTHLIMIT_ENTRIES];
        if (strcmp(e->key, known_key) == 0) {
            return e->known_until_us > now_us ? e : NULL;
        }
    }
    return NULL;
}

/*
 * The buckets on the path of an AUTH with keys k into path (created when
 * create, for taking tokens); returns how many (NULL entries are full
 * buckets not remembered).
 */
static size_t
authlimit_path(const struct authlimit_keys *k, bool create, int64_t now_us,
               struct authlimit_entry *path[AUTHLIMIT_PATH_MAX])
{
    size_t n = 0;

    if ((path[n] = authlimit_known(k->known, now_us)) != NULL) {
        n++;
    } else {
        path[n++] = authlimit_find(k->group, create, now_us);
        if (k->site[0] != '\0') {
            path[n++] = authlimit_find(k->site, create, now_us);
        }
    }
    path[n++] = &authlimit_daemon;
    return n;
}

/* The refill interval of bucket e, us: the daemon's, or a group's or address's. */
static int64_t
authlimit_refill_us(const struct authlimit_entry *e)
{
    return e == &authlimit_daemon ? AUTHLIMIT_DAEMON_REFILL_US
                                  : AUTHLIMIT_REFILL_MS * (int64_t)1000;
}

/* us until bucket e has a token, 0 when it has one (NULL: a full bucket). */
static int64_t
authlimit_bucket_wait(const struct authlimit_entry *e, int64_t now_us)
{
    if (e == NULL) {
        return 0;
    }
    return util_gcra_wait(e->tat_us, now_us, authlimit_refill_us(e),
                          e == &authlimit_daemon ? AUTHLIMIT_DAEMON_BURST : AUTHLIMIT_BURST);
}

static int64_t
authlimit_keys_wait(const struct authlimit_keys *k, int64_t now_us)
{
    struct authlimit_entry *path[AUTHLIMIT_PATH_MAX];
    size_t n = authlimit_path(k, false, now_us, path), i;
    int64_t wait = 0, w;

    for (i = 0; i < n; i++) {
        w = authlimit_bucket_wait(path[i], now_us);
        wait = w > wait ? w : wait;
    }
    return wait;
}

int64_t
authlimit_wait(const char *peer, int64_t now_us)
{
    struct authlimit_keys k;

    authlimit_keys(peer, &k);
    return authlimit_keys_wait(&k, now_us);
}

void
authlimit_failed(const char *peer, unsigned long long id, int64_t now_us)
{
    struct authlimit_entry *path[AUTHLIMIT_PATH_MAX];
    struct authlimit_keys k;
    size_t n, i;
    uint64_t held;

    authlimit_keys(peer, &k);
    n = authlimit_path(&k, true, now_us, path);
    for (i = 0; i < n; i++) {
        util_gcra_take(&path[i]->tat_us, now_us, authlimit_refill_us(path[i]));
    }
    if (util_gcra_wait(authlimit_log_tat, now_us, 1000000, AUTHLIMIT_LOG_BURST) == 0) {
        util_gcra_take(&authlimit_log_tat, now_us, 1000000);
        log_warn("client %llu (%s): wrong AUTH password, closing", id, peer);
        return;
    }
    authlimit_log_dropped++;
    if (log_every_due(&authlimit_drop_log, now_us, &held)) {
        log_warn("%llu more wrong AUTH passwords not logged one by one (at most %d lines at "
                 "once, then one a second); the last: client %llu (%s)",
                 (unsigned long long)authlimit_log_dropped, AUTHLIMIT_LOG_BURST, id, peer);
        authlimit_log_dropped = 0;
    }
}

void
authlimit_passed(const char *peer, int64_t now_us)
{
    struct authlimit_keys k;
    struct authlimit_entry *e;

    authlimit_keys(peer, &k);
    if ((e = authlimit_find(k.known, true, now_us)) != NULL) {
        e->known_until_us = now_us + AUTHLIMIT_KNOWN_MS * (int64_t)1000;
    }
}

/* ---- the line ---- */

/*
 * Look at the line again at at_us (monotonic; now or earlier: in the
 * next turn of the loop), unless it is to be looked at sooner already.
 */
static void
authlimit_schedule(int64_t at_us, int64_t now_us)
{
    int64_t wait = at_us > now_us ? at_us - now_us : 0;
    struct timeval tv = { (time_t)(wait / 1000000), (suseconds_t)(wait % 1000000) };

    if (at_us >= authlimit_due_us || authlimit_timer == NULL) {
        return;
    }
    authlimit_due_us = at_us;
    evtimer_add(authlimit_timer, &tv);
}

/*
 * The line's turn: every AUTH whose path has a token is let go to be
 * checked, in order; then the timer waits for the first token any of the
 * rest waits for.  A checked wrong password takes its tokens at once
 * (authlimit_failed, from ready), so the AUTHs behind it see them gone.
 */
static void
authlimit_serve(evutil_socket_t fd, short what, void *arg)
{
    struct authlimit_waiter *w;
    struct authlimit_keys k;
    int64_t now = util_now_us(), next = -1, wait;

    (void)fd;
    (void)what;
    (void)arg;
    /* An AUTH that comes during the walk (a ready session reads on) waits its turn. */
    authlimit_due_us = now;
    authlimit_walk_added = false;
    authlimit_cursor = TAILQ_FIRST(&authlimit_line);
    while ((w = authlimit_cursor) != NULL) {
        authlimit_cursor = TAILQ_NEXT(w, link);
        authlimit_keys(w->peer, &k);
        if ((wait = authlimit_keys_wait(&k, now)) > 0) {
            next = next < 0 || wait < next ? wait : next;
            continue;
        }
        TAILQ_REMOVE(&authlimit_line, w, link);
        authlimit_nline--;
        w->queued = false;
        w->ready(w);    /* may cancel others: authlimit_cancel moves the cursor on */
    }
    authlimit_due_us = INT64_MAX;
    if (authlimit_walk_added) {
        authlimit_schedule(now, now);   /* the next turn looks at them */
    } else if (next >= 0) {
        authlimit_schedule(now + next, util_now_us());
    }
}

void
authlimit_init(struct event_base *base)
{
    if (authlimit_timer == NULL) {
        authlimit_timer = evtimer_new(base, authlimit_serve, NULL);
        if (authlimit_timer == NULL) {
            xmalloc_fail("the AUTH line's timer");
        }
    }
}

bool
authlimit_begin(struct authlimit_waiter *w, const char *peer, authlimit_ready_fn ready)
{
    int64_t now = util_now_us(), wait = authlimit_wait(peer, now);
    uint64_t held;

    /*
     * Its path has a token, and none in line can have one before the
     * line's next turn: nobody it could overtake (an AUTH in line that
     * shares a bucket with it would be served first, as the turn is due).
     */
    if (wait == 0 && (TAILQ_EMPTY(&authlimit_line) || now < authlimit_due_us)) {
        return true;
    }
    w->peer = peer;
    w->ready = ready;
    w->queued = true;
    TAILQ_INSERT_TAIL(&authlimit_line, w, link);
    authlimit_nline++;
    authlimit_walk_added = true;    /* (read only by a walk under way) */
    authlimit_schedule(now + wait, now);
    if (log_every_due(&authlimit_held_log, now, &held)) {
        log_warn("AUTH from %s waits for its turn to be checked (wrong passwords from its "
                 "address group or from everywhere used the tokens: %d at once, then one a "
                 "second a group, %d a second in all); %zu in line now, %llu more waited "
                 "since the last such line", peer, AUTHLIMIT_BURST,
                 (int)(1000000 / AUTHLIMIT_DAEMON_REFILL_US), authlimit_nline,
                 (unsigned long long)held);
    }
    return false;
}

void
authlimit_cancel(struct authlimit_waiter *w)
{
    if (!w->queued) {
        return;
    }
    if (authlimit_cursor == w) {
        authlimit_cursor = TAILQ_NEXT(w, link);
    }
    TAILQ_REMOVE(&authlimit_line, w, link);
    authlimit_nline--;
    w->queued = false;
}

size_t
authlimit_waiting(void)
{
    return authlimit_nline;
}
