/*
 * reach_watch.c: the masters the running daemon cannot count on, said in
 * its log at start and on every change (daemon/reach.h).
 *
 * A timer looks at the masters, asks reach_decide() (daemon/reach.c)
 * what to say, and writes it.  The one memo is this file's.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "conf/conf.h"
#include "daemon/ctx.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/reach.h"
#include "daemon/redlock.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"

#define REACH_WHY_SHOWN 160     /* bytes of one master's reason in a line */
#define REACH_LINE_MAX  3072    /* one report line, bytes (the log's is 4096) */

static struct event     *reach_timer;
static struct reach_memo reach_memo;
static int64_t           reach_late_us;    /* the start grace ends */

bool
reach_master_decided(size_t i)
{
    struct master_stats st;

    master_get_stats(master_at(i), &st);
    return (st.state == MASTER_UP && st.layout.read) || st.down_known;
}

/* Why master i does not count now, into buf. */
static void
reach_why(size_t i, char *buf, size_t size)
{
    struct master_stats st;
    const struct master *m = master_at(i);

    master_get_stats(m, &st);
    if (st.state == MASTER_UP && st.duplicate_of >= 0
        && (size_t)st.duplicate_of < master_count()) {
        snprintf(buf, size, "the same Redis server as %s",
                 master_name(master_at((size_t)st.duplicate_of)));
    } else {
        snprintf(buf, size, "%s", master_status_text(m));
    }
}

/* The warning: which masters do not count, and what that means for a quorum. */
static void
reach_warn_missing(const bool *counts, size_t n, size_t quorum, const struct reach_verdict *v)
{
    char line[REACH_LINE_MAX], why[REACH_WHY_SHOWN + 1];
    size_t i, len = 0, missing = n - v->counting;
    int w;

    for (i = 0; i < n && len < sizeof(line); i++) {
        if (counts[i]) {
            continue;
        }
        reach_why(i, why, sizeof(why));
        w = snprintf(line + len, sizeof(line) - len, "%s%s %s", len > 0 ? "; " : "",
                     master_name(master_at(i)), why);
        len += w > 0 ? (size_t)w : 0;
    }
    if (v->quorum) {
        log_warn("masters not counted (%zu of %zu): %s; quorum %zu reachable: %zu count, "
                 "%zu more may fail", missing, n, line, quorum, v->counting,
                 v->counting - quorum);
    } else {
        log_warn("masters not counted (%zu of %zu): %s; quorum %zu NOT reachable: %zu count, "
                 "every LOCK is refused (ERR NOQUORUM) until %zu more count", missing, n, line,
                 quorum, v->counting, quorum - v->counting);
    }
}

static void
reach_tick_cb(evutil_socket_t fd, short what, void *arg)
{
    bool counts[CONF_MASTERS_MAX], decided[CONF_MASTERS_MAX];
    struct reach_verdict v;
    size_t i, n = reach_memo.n, quorum = redlock_quorum(n);
    int64_t now = util_now_us();

    (void)fd;
    (void)what;
    (void)arg;
    for (i = 0; i < n; i++) {
        counts[i] = master_counted(i, now);
        decided[i] = reach_master_decided(i);
    }
    v = reach_decide(&reach_memo, counts, decided, n, quorum, now >= reach_late_us);
    if (v.regained) {
        log_info("quorum regained: %zu of %zu masters count, quorum %zu", v.counting, n,
                 quorum);
    }
    if (v.say == REACH_ALL) {
        log_info("masters: all %zu count%s, quorum %zu", n, v.first ? "" : " again", quorum);
    } else if (v.say == REACH_MISSING) {
        reach_warn_missing(counts, n, quorum, &v);
    }
}

void
reach_start(void)
{
    struct timeval tv = { REACH_TICK_MS / 1000, (REACH_TICK_MS % 1000) * 1000 };

    memset(&reach_memo, 0, sizeof(reach_memo));
    reach_memo.n = master_count();
    if (reach_memo.n > CONF_MASTERS_MAX) {
        reach_memo.n = CONF_MASTERS_MAX;    /* the config allows no more */
    }
    reach_memo.counted = xcalloc(reach_memo.n > 0 ? reach_memo.n : 1, sizeof(bool));
    reach_late_us = util_now_us() + (ctx.conf->connect_timeout_ms + REACH_TICK_MS) * 1000;
    reach_timer = event_new(ctx.base, -1, EV_PERSIST, reach_tick_cb, NULL);
    if (reach_timer == NULL) {
        xmalloc_fail("the reach timer");
    }
    event_add(reach_timer, &tv);
}

void
reach_stop(void)
{
    if (reach_timer != NULL) {
        event_free(reach_timer);
        reach_timer = NULL;
    }
    free(reach_memo.counted);
    memset(&reach_memo, 0, sizeof(reach_memo));
}
