/*
 * layout.c: the layout registry's verdicts, per master (daemon/layout.h).
 *
 * The rule itself is layout_judge(), a pure function; the rest keeps, per
 * master, the last verdict and when the read it came from was sent, so
 * that a verdict counts for LAYOUT_FRESH_MS and no longer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "daemon/layout.h"
#include "daemon/log.h"
#include "daemon/scripts.h"
#include "daemon/xmalloc.h"

/* Per master: what its registry said at the last read. */
struct layout_master {
    bool     read;              /* a verdict since the last connect */
    bool     serve;             /* that verdict */
    bool     inflight;          /* a heartbeat is on its way */
    int64_t  read_sent_us;      /* when the read of that verdict was sent */
    int64_t  read_window_ms;    /* the window that read wrote */
    int64_t  last_sent_us;      /* when the last heartbeat was sent */
    int64_t  sent_window_ms;    /* the window the heartbeat on its way writes */
    char     why[LAYOUT_WHY_MAX];   /* the verdict's reason when it refuses */
    char     logged[64];        /* what the last refusal logged was: kind and
                                   daemon; "" when the verdict serves */
    struct layout_view view;    /* what the registry showed (STATS); read and
                                   refused are derived (layout_get_view) */
};

static struct layout_master *layout_masters;    /* one per master */
static size_t  layout_n;                        /* masters */
static char    layout_id[LAYOUT_ID_LEN + 1];    /* this daemon's id, hex */
static int64_t layout_window_ms = 3600000;      /* layout_set_window_ms */
static bool    layout_probe;                    /* redlockd --reach */
static char    layout_head[64];     /* the script's ARGV[2]: "layout oldest since window" */
static char    layout_tail[128];    /* ARGV[3]: "release host:pid" */
static char    layout_legacy[64];   /* ARGV[5]: legacy daemons' "layout oldest since window" */
static char    layout_whybuf[LAYOUT_WHY_MAX];   /* layout_why()'s text when it is made */

/* Parse a decimal integer of at most 18 digits from *p (len bytes left);
 * advance past it and one following space.  Returns 0 or -1. */
static int
layout_word_int(const char **p, const char *end, int64_t *out)
{
    const char *s = *p;
    int64_t v = 0;
    int digits = 0;

    while (s < end && *s >= '0' && *s <= '9') {
        if (++digits > 18) {
            return -1;
        }
        v = v * 10 + (*s - '0');
        s++;
    }
    if (digits == 0 || (s < end && *s != ' ')) {
        return -1;
    }
    *out = v;
    *p = s < end ? s + 1 : s;
    return 0;
}

/* Copy one word (up to a space or the end) into buf (size bytes), cut
 * to fit: these words only name a daemon. */
static int
layout_word_str(const char **p, const char *end, char *buf, size_t size)
{
    const char *s = *p;
    size_t n = 0;

    while (s + n < end && s[n] != ' ') {
        n++;
    }
    if (n == 0) {
        return -1;
    }
    snprintf(buf, size, "%.*s", (int)n, s);
    *p = s + n < end ? s + n + 1 : s + n;
    return 0;
}

int
layout_parse(const char *id, size_t idlen, const char *value, size_t len,
             struct layout_entry *e, char *why, size_t size)
{
    const char *p = value, *end = value + len;
    int64_t layout, oldest;

    memset(e, 0, sizeof(*e));
    if (idlen == 0) {
        snprintf(why, size, "a member with an empty id");
        return -1;
    }
    snprintf(e->id, sizeof(e->id), "%.*s", (int)idlen, id);
    if (layout_word_int(&p, end, &layout) != 0 || layout_word_int(&p, end, &oldest) != 0
        || layout_word_int(&p, end, &e->since_ms) != 0
        || layout_word_int(&p, end, &e->window_ms) != 0
        || layout_word_int(&p, end, &e->seen_ms) != 0
        || layout_word_str(&p, end, e->release, sizeof(e->release)) != 0
        || layout_word_str(&p, end, e->host, sizeof(e->host)) != 0
        || layout < 1 || layout > 1000000 || oldest < 1 || oldest > layout) {
        snprintf(why, size, "a member of id '%s', read as '%.*s', that is not \"layout "
                 "oldest since window seen release host\" (numbers, layout >= oldest >= 1) "
                 "after its id", e->id, (int)(len > 80 ? 80 : len), value);
        return -1;
    }
    e->layout = (int)layout;
    e->oldest = (int)oldest;
    return 0;
}

enum layout_verdict
layout_judge(int mine, int oldest, const struct layout_entry *e, int64_t now_ms, char *why,
             size_t size)
{
    if (now_ms > e->seen_ms + e->window_ms || e->layout == mine) {
        return LAYOUT_BESIDE;
    }
    if (e->layout < mine) {
        if (oldest <= e->layout) {
            return LAYOUT_BESIDE;
        }
        snprintf(why, size, "daemon %s (%s, release %s) writes layout %d, seen %" PRId64
                 " ms ago, and this daemon's layout %d runs beside layouts %d and later "
                 "only: stop or upgrade it (its member is kept %" PRId64 " ms after it was "
                 "last seen)", e->id, e->host, e->release, e->layout, now_ms - e->seen_ms,
                 mine, oldest, e->window_ms);
        return LAYOUT_OLDER;
    }
    if (e->oldest > mine) {
        snprintf(why, size, "daemon %s (%s, release %s) writes layout %d and no longer "
                 "writes layout %d's records (it runs beside layouts %d and later), seen %"
                 PRId64 " ms ago: upgrade this daemon", e->id, e->host, e->release,
                 e->layout, mine, e->oldest, now_ms - e->seen_ms);
        return LAYOUT_NEWER_STOPPED;
    }
    if (e->since_ms != 0 && now_ms < e->since_ms + e->window_ms) {
        snprintf(why, size, "daemon %s (%s, release %s, layout %d) writes layout %d's "
                 "records again only since %" PRId64 " ms ago: what it granted before "
                 "may be valid for %" PRId64 " ms more", e->id, e->host, e->release,
                 e->layout, mine, now_ms - e->since_ms, e->since_ms + e->window_ms - now_ms);
        return LAYOUT_NEWER_SINCE;
    }
    return LAYOUT_BESIDE;
}

static void
layout_format_args(void)
{
    char host[64];

    if (gethostname(host, sizeof(host)) != 0) {
        snprintf(host, sizeof(host), "unknown");
    }
    host[sizeof(host) - 1] = '\0';
    for (char *c = host; *c != '\0'; c++) {
        if (*c == ' ') {
            *c = '_';
        }
    }
    snprintf(layout_head, sizeof(layout_head), "%d %d 0 %" PRId64, REDLOCKD_LAYOUT,
             REDLOCKD_LAYOUT_OLDEST, layout_window_ms);
    snprintf(layout_tail, sizeof(layout_tail), "%s %s:%ld", REDLOCKD_VERSION, host,
             (long)getpid());
    snprintf(layout_legacy, sizeof(layout_legacy), "1 1 0 %lld", LAYOUT_LEGACY_WINDOW_MS);
}

int
layout_start(size_t nmasters)
{
    unsigned char raw[LAYOUT_ID_LEN / 2];
    size_t i;

    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
        log_error("getrandom: %s (the daemon's layout registry id)", strerror(errno));
        return -1;
    }
    for (i = 0; i < sizeof(raw); i++) {
        snprintf(layout_id + 2 * i, 3, "%02x", raw[i]);
    }
    layout_masters = xcalloc(nmasters ? nmasters : 1, sizeof(*layout_masters));
    layout_n = nmasters;
    layout_format_args();
    return 0;
}

void
layout_stop(void)
{
    free(layout_masters);
    layout_masters = NULL;
    layout_n = 0;
}

void
layout_set_window_ms(int64_t ms)
{
    size_t i;

    if (ms > layout_window_ms) {
        for (i = 0; i < layout_n; i++) {
            layout_masters[i].last_sent_us = INT64_MIN / 2;     /* due at once */
        }
    }
    layout_window_ms = ms;
    layout_format_args();
}

void
layout_set_probe(bool probe)
{
    layout_probe = probe;
}

const char *
layout_self_id(void)
{
    return layout_id;
}

const char *
layout_script(void)
{
    return REDLOCK_LUA_LAYOUT;
}

size_t
layout_args(const char **argv, size_t *lens)
{
    argv[0] = layout_probe ? "" : layout_id;
    argv[1] = layout_head;
    argv[2] = layout_tail;
    argv[3] = LAYOUT_LEGACY_CHANNEL;
    argv[4] = layout_legacy;
    for (size_t i = 0; i < LAYOUT_ARGS; i++) {
        lens[i] = strlen(argv[i]);
    }
    return LAYOUT_ARGS;
}

void
layout_connecting(size_t i)
{
    struct layout_master *m = &layout_masters[i];

    m->read = false;
    m->inflight = false;
}

void
layout_answer(size_t i, const char *name, int64_t sent_us, int64_t now_ms,
              const struct layout_entry *entries, size_t n, const char *bad)
{
    struct layout_master *m = &layout_masters[i];
    struct layout_view *v = &m->view;
    enum layout_verdict verdict = bad != NULL ? LAYOUT_UNREADABLE : LAYOUT_BESIDE;
    char reason[LAYOUT_WHY_MAX - 32], key[sizeof(m->logged)];
    const char *who = "";
    size_t k;

    m->inflight = false;
    m->read = true;
    m->read_sent_us = sent_us;
    m->read_window_ms = m->sent_window_ms;
    m->why[0] = '\0';
    if (bad != NULL) {
        snprintf(m->why, sizeof(m->why), "%s", bad);
    }
    v->daemons = 0;
    v->lowest = v->highest = 0;
    v->legacy = false;
    for (k = 0; k < n; k++) {
        const struct layout_entry *e = &entries[k];

        if (now_ms > e->seen_ms + e->window_ms) {
            continue;
        }
        v->daemons++;
        v->legacy |= strcmp(e->id, LAYOUT_LEGACY_FIELD) == 0;
        if (v->lowest == 0 || e->layout < v->lowest) {
            v->lowest = e->layout;
        }
        if (e->layout > v->highest) {
            v->highest = e->layout;
        }
        if (verdict == LAYOUT_BESIDE && strcmp(e->id, layout_id) != 0
            && (verdict = layout_judge(REDLOCKD_LAYOUT, REDLOCKD_LAYOUT_OLDEST, e, now_ms,
                                       reason, sizeof(reason))) != LAYOUT_BESIDE) {
            snprintf(m->why, sizeof(m->why), "its layout registry shows %s", reason);
            who = e->id;
        }
    }
    m->serve = verdict == LAYOUT_BESIDE;
    if (m->serve) {
        if (m->logged[0] != '\0') {
            log_info("master %s: its layout registry shows no daemon this one cannot serve "
                     "beside any more: counted again", name);
            m->logged[0] = '\0';
        }
        return;
    }
    v->refusals++;
    /* Once per kind of refusal and daemon: the reason's numbers change every read. */
    snprintf(key, sizeof(key), "%d %s", (int)verdict, who);
    if (strcmp(key, m->logged) != 0) {
        log_warn("master %s: not counted: %s", name, m->why);
        snprintf(m->logged, sizeof(m->logged), "%s", key);
    }
}

bool
layout_due(size_t i, int64_t now)
{
    const struct layout_master *m = &layout_masters[i];

    return !m->inflight && now - m->last_sent_us >= LAYOUT_BEAT_MS * 1000LL;
}

bool
layout_inflight(size_t i)
{
    return layout_masters[i].inflight;
}

void
layout_sent(size_t i, int64_t now)
{
    layout_masters[i].inflight = true;
    layout_masters[i].last_sent_us = now;
    layout_masters[i].sent_window_ms = layout_window_ms;
}

void
layout_failed(size_t i)
{
    layout_masters[i].inflight = false;
}

bool
layout_counts(size_t i, int64_t now)
{
    const struct layout_master *m = &layout_masters[i];

    return m->read && m->serve && now - m->read_sent_us < LAYOUT_FRESH_MS * 1000LL
           && m->read_window_ms >= layout_window_ms;
}

const char *
layout_why(size_t i, int64_t now, bool *refused)
{
    const struct layout_master *m = &layout_masters[i];

    if (refused != NULL) {
        *refused = m->read && !m->serve;
    }
    if (!m->read) {
        return "its layout registry is not read yet";
    }
    if (!m->serve) {
        return m->why;
    }
    if (now - m->read_sent_us >= LAYOUT_FRESH_MS * 1000LL) {
        snprintf(layout_whybuf, sizeof(layout_whybuf), "its layout registry was last read "
                 "%" PRId64 " ms ago (a read counts %d ms)",
                 (now - m->read_sent_us) / 1000, LAYOUT_FRESH_MS);
        return layout_whybuf;
    }
    if (m->read_window_ms < layout_window_ms) {
        snprintf(layout_whybuf, sizeof(layout_whybuf), "its layout registry has this "
                 "daemon's window of %" PRId64 " ms, not yet the %" PRId64 " ms of its "
                 "longest lease now (a reload raised lock.max_ttl_ms)", m->read_window_ms,
                 layout_window_ms);
        return layout_whybuf;
    }
    return "";
}

void
layout_get_view(size_t i, struct layout_view *v)
{
    const struct layout_master *m = &layout_masters[i];

    *v = m->view;
    v->read = m->read;
    v->refused = m->read && !m->serve;
}
