/*
 * master_keeper.c: the clock keeper and the layout registry's reads, of
 * the master module (daemon/master_link.h).  Every MASTER_CLOCK_TICK_MS
 * the keeper sends each master that is up the layout registry's
 * heartbeat when it is due (daemon/layout.h), and, with
 * lock.clock_check, a TIME when its clock reading is old
 * (daemon/health.h, daemon/drift.h).  The registry's answer is read here
 * for the handshake too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "conf/conf.h"
#include "daemon/ctx.h"
#include "daemon/health.h"
#include "daemon/layout.h"
#include "daemon/master.h"
#include "daemon/master_link.h"
#include "daemon/redisev.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"

#define MASTER_CLOCK_TICK_MS    250     /* how often the clock keeper looks */
#define MASTER_CLOCK_FRESH_MS   1000    /* a clock reading older than this is renewed
                                           with a TIME (master_keeper_cb) */

static struct event *master_keeper;     /* the clock keeper's periodic timer */

/*
 * Send master m the layout registry's script (daemon/layout.h) on its
 * command link, answered to fn with privdata.  Returns REDIS_OK or
 * REDIS_ERR.
 */
int
master_layout_send(struct master *m, redisev_reply_fn fn, void *privdata)
{
    const char *argv[4 + LAYOUT_ARGS];
    size_t lens[4 + LAYOUT_ARGS], n;
    char key[300];   /* lock.key_prefix: 256 bytes at most */
    int klen;

    klen = snprintf(key, sizeof(key), "%s%s", ctx.conf->key_prefix, LAYOUT_KEY_SUFFIX);
    argv[0] = "EVAL";
    argv[1] = layout_script();
    argv[2] = "1";
    argv[3] = key;
    n = layout_args(argv + 4, lens + 4);
    lens[0] = 4;
    lens[1] = strlen(argv[1]);
    lens[2] = 1;
    lens[3] = (size_t)klen;
    m->layout_sent_us = util_now_us();
    layout_sent(m->index, m->layout_sent_us);
    return redisev_command_argv(m->cmd.ac, fn, privdata, (int)(4 + n), argv, lens);
}

/*
 * Read the registry's answer {TIME's seconds, microseconds, id, value,
 * ...} of a read sent at sent_us, hand its TIME to the clock check and
 * the rest to daemon/layout.c.  An error reply (an ACL
 * that forbids the registry, say) or a member that cannot be read is a
 * verdict that refuses, with the reason.  Returns 0, or -1 when the
 * answer is not of that shape at all (the caller drops the link).
 */
int
master_layout_read(struct master *m, const redisReply *reply, int64_t sent_us)
{
    struct layout_entry *entries;
    char bad[LAYOUT_WHY_MAX];
    redisReply time = { 0 };
    long long now_ms;
    size_t n, k;

    if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(bad, sizeof(bad), "its layout registry answered an error: %.150s (the "
                 "EVAL of daemon/scripts/layout.lua on key '%.40s%s'; a NOPERM means the "
                 "ACL user lacks one of +eval +time +zadd +zrem +zrange +zremrangebyscore "
                 "+pexpire +pubsub|numsub, a WRONGTYPE that the key holds something else)",
                 reply->str, ctx.conf->key_prefix, LAYOUT_KEY_SUFFIX);
        layout_answer(m->index, m->addr->spec, sent_us, 0, NULL, 0, bad);
        return 0;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 || reply->elements % 2 != 0
        || reply->element[0]->type != REDIS_REPLY_STRING
        || reply->element[1]->type != REDIS_REPLY_STRING) {
        return -1;
    }
    /* The master's TIME, as the clock keeper's TIME would give it. */
    time.type = REDIS_REPLY_ARRAY;
    time.elements = 2;
    time.element = reply->element;
    health_clock_time(m->index, &time, sent_us, util_now_us());
    now_ms = strtoll(reply->element[0]->str, NULL, 10) * 1000
             + strtoll(reply->element[1]->str, NULL, 10) / 1000;
    n = reply->elements / 2 - 1;
    entries = xcalloc(n ? n : 1, sizeof(*entries));
    bad[0] = '\0';
    for (k = 0; k < n; k++) {
        const redisReply *f = reply->element[2 + 2 * k], *v = reply->element[3 + 2 * k];

        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) {
            snprintf(bad, sizeof(bad), "its layout registry answered a member that is not "
                     "a string");
            break;
        }
        if (layout_parse(f->str, f->len, v->str, v->len, &entries[k], bad,
                         sizeof(bad)) != 0) {
            char what[LAYOUT_WHY_MAX];

            snprintf(what, sizeof(what), "%s", bad);
            snprintf(bad, sizeof(bad), "its layout registry '%.40s%s' has %.300s (if no "
                     "redlockd wrote it, find it with ZRANGE and delete it with ZREM)",
                     ctx.conf->key_prefix, LAYOUT_KEY_SUFFIX, what);
            break;
        }
    }
    layout_answer(m->index, m->addr->spec, sent_us, now_ms, entries, k,
                  bad[0] != '\0' ? bad : NULL);
    free(entries);
    return 0;
}

/*
 * The answer to a TIME of the clock keeper: {seconds, microseconds} as
 * strings.  A malformed one is logged once per connection and ignored.
 */
static void
master_keeper_reply_cb(struct redisev *ac, void *r, void *privdata)
{
    redisReply *reply = r;
    struct master *m = privdata;
    int64_t now = util_now_us();

    m->clock_probing = false;
    if (m->cmd.ac == ac) {
        master_link_answered(&m->cmd, true, now);
    }
    if (reply == NULL) {
        return;     /* the link went down; the failure is the scripts' to report */
    }
    health_clock_time(m->index, reply, m->clock_probe_sent_us, now);
}

/* The answer to a heartbeat of the layout registry. */
static void
master_layout_cb(struct redisev *ac, void *r, void *privdata)
{
    redisReply *reply = r;
    struct master *m = privdata;

    if (m->cmd.ac == ac) {
        master_link_answered(&m->cmd, true, util_now_us());
    }
    if (reply == NULL) {
        layout_failed(m->index);
        return;     /* the link went down */
    }
    if (master_layout_read(m, reply, m->layout_sent_us) != 0) {
        m->stats.errors++;
        layout_answer(m->index, m->addr->spec, m->layout_sent_us, 0, NULL, 0,
                      "its layout registry answered something other than "
                      "{time, id, value...}");
    }
}

/*
 * The keeper: every LAYOUT_BEAT_MS each master is sent the layout
 * registry's heartbeat, whose answer carries the master's TIME too.  With
 * lock.clock_check, a master whose last clock reading is older than
 * MASTER_CLOCK_FRESH_MS and has no heartbeat on its way is sent a TIME, so that
 * the next answer of a round is compared with a young reference and
 * the drift allowance stays small (daemon/drift.h).  A daemon that is
 * busy reads every clock from the rounds' answers and sends no TIME.
 */
static void
master_keeper_cb(evutil_socket_t fd, short what, void *arg)
{
    const char *argv[1] = { "TIME" };
    const size_t lens[1] = { 4 };
    int64_t now = util_now_us();
    size_t i;

    (void)fd;
    (void)what;
    (void)arg;
    for (i = 0; i < master_count(); i++) {
        struct master *m = master_at(i);

        if (m->cmd.state != MASTER_UP || m->cmd.ac == NULL || m->cmd.drop_now) {
            continue;
        }
        /* The layout registry's heartbeat (daemon/layout.h), which reads the clock too. */
        if (layout_due(i, now)) {
            if (master_layout_send(m, master_layout_cb, m) == REDIS_OK) {
                master_link_sent(&m->cmd);
            } else {
                layout_failed(i);
            }
        }
        if (!ctx.conf->clock_check || m->clock_probing || layout_inflight(i)
            || health_clock_fresh(i, now, MASTER_CLOCK_FRESH_MS)) {
            continue;
        }
        m->clock_probe_sent_us = now;
        if (redisev_command_argv(m->cmd.ac, master_keeper_reply_cb, m, 1, argv, lens) == 0) {
            m->clock_probing = true;
            master_link_sent(&m->cmd);
        }
    }
}

void
master_keeper_start(void)
{
    struct timeval tv = { 0, MASTER_CLOCK_TICK_MS * 1000 };

    master_keeper = event_new(ctx.base, -1, EV_PERSIST, master_keeper_cb, NULL);
    if (master_keeper == NULL) {
        xmalloc_fail("the clock keeper's timer");
    }
    event_add(master_keeper, &tv);
}

void
master_keeper_stop(void)
{
    if (master_keeper != NULL) {
        event_free(master_keeper);
        master_keeper = NULL;
    }
}
