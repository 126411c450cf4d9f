/*
 * health.c: what each master says about itself (INFO, persistence,
 * memory policy, its clock), the restart and clock quarantines that
 * follow, and duplicate detection.  See daemon/health.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "conf/conf.h"
#include "daemon/ctx.h"
#include "daemon/drift.h"
#include "daemon/health.h"
#include "daemon/log.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"

/* What one master said about itself.  Owned by this module (the array). */
struct health {
    size_t              index;      /* position in the config */
    bool                up;         /* its command link is up */
    char                run_id[41]; /* INFO server run_id, "" before the first */
    bool                run_id_now; /* run_id was read on the live command link */
    long long           uptime_s;   /* INFO server uptime on this connect; -1: unread */
    int                 aof;        /* INFO persistence aof_enabled: 1, 0, -1 unread */
    char                appendfsync[16]; /* CONFIG GET appendfsync, "" when unread */
    bool                fsync_refusal_logged;   /* the refusal was logged once */
    bool                persist_refusal_logged; /* INFO persistence's, likewise */
    bool                memory_refusal_logged;  /* INFO memory's, likewise */
    char                maxmemory_policy[32];   /* INFO memory, "" when unread */
    int64_t             quarantine_until_us; /* its answers count after */
    int64_t             clock_until_us;      /* clock quarantine: its answers count
                                                after (lock.clock_check) */
    struct event       *quarantine_timer;    /* logs the end of either quarantine */
    struct drift_ref    clock;      /* the last reading of its clock (daemon/drift.h) */
    bool                clock_bad_logged;    /* an answer without its TIME was logged
                                                on this connection */
    bool                exempt_pending;      /* its "persists every write" note waits
                                                for health_exempt_cb */
    struct health_counts counts;
};

static struct health     *healths;
static size_t             nhealths;
static int64_t            health_quarantine_ms; /* the caller's, ms */

/*
 * Masters that come up together (every master at the daemon's start) are
 * exempt from the restart quarantine for the same reason: their notes are
 * gathered for this long and logged as one line naming them all.
 */
#define HEALTH_EXEMPT_NOTE_MS   250
static struct event      *health_exempt_timer;  /* logs the gathered notes */

/* Each question's words (at most HEALTH_ASK_WORDS). */
static const char *const health_words[HEALTH_NASKS][HEALTH_ASK_WORDS] = {
    [HEALTH_INFO_SERVER] = { "INFO", "server" },
    [HEALTH_INFO_PERSISTENCE] = { "INFO", "persistence" },
    [HEALTH_APPENDFSYNC] = { "CONFIG", "GET", "appendfsync" },
    [HEALTH_INFO_MEMORY] = { "INFO", "memory" },
};

/* The answer of a script whose body answered nil (the wrapper's table ends before it). */
static redisReply health_nil_answer = { .type = REDIS_REPLY_NIL };

static void health_quarantine_arm(struct health *h, int64_t now);

static const char *
health_name(const struct health *h)
{
    return ctx.conf->masters[h->index].spec;
}

static void
health_quarantine_cb(evutil_socket_t fd, short what_ev, void *arg)
{
    struct health *h = arg;
    int64_t now = util_now_us();
    bool restart = h->quarantine_until_us != 0 && h->quarantine_until_us <= now;
    bool clock = h->clock_until_us != 0 && h->clock_until_us <= now;

    (void)fd;
    (void)what_ev;
    if (restart) {
        h->quarantine_until_us = 0;
    }
    if (clock) {
        h->clock_until_us = 0;
    }
    if (restart || clock) {
        log_info("master %s: %s quarantine over: %s", health_name(h),
                 restart && clock ? "restart and clock" : restart ? "restart" : "clock",
                 h->quarantine_until_us > now ? "still in restart quarantine"
                 : h->clock_until_us > now ? "still in clock quarantine"
                 : "its answers count toward a quorum");
    }
    health_quarantine_arm(h, now);
}

/*
 * Log the gathered "persists every write" notes (health_quarantine_begin):
 * one master's with its uptime, several in one short line (make run's
 * five start together).
 */
static void
health_exempt_cb(evutil_socket_t fd, short what_ev, void *arg)
{
    char names[1024];
    size_t i, n = 0, used = 0, left_out = 0;
    const struct health *one = NULL;

    (void)fd;
    (void)what_ev;
    (void)arg;
    names[0] = '\0';
    for (i = 0; i < nhealths; i++) {
        struct health *h = &healths[i];
        int w;

        if (!h->exempt_pending) {
            continue;
        }
        h->exempt_pending = false;
        one = h;
        n++;
        w = snprintf(names + used, sizeof(names) - used, "%s%s", n > 1 ? ", " : "",
                     health_name(h));
        if (w < 0 || (size_t)w >= sizeof(names) - used) {
            names[used] = '\0';
            left_out++;
        } else {
            used += (size_t)w;
        }
    }
    if (n == 1) {
        log_info("no restart quarantine for %s: just started (up %lld s), but it persists "
                 "every write (appendfsync always)", health_name(one), one->uptime_s);
    } else if (n > 1) {
        log_info("no restart quarantine for %s%s: just started, but each persists every write "
                 "(appendfsync always)", names, left_out > 0 ? " and more" : "");
    }
}

void
health_start(void)
{
    size_t i;

    health_exempt_timer = evtimer_new(ctx.base, health_exempt_cb, NULL);
    if (health_exempt_timer == NULL) {
        xmalloc_fail("the timer of the masters' persistence notes");
    }
    nhealths = ctx.conf->nmasters;
    healths = xcalloc(nhealths, sizeof(*healths));
    for (i = 0; i < nhealths; i++) {
        struct health *h = &healths[i];

        h->index = i;
        h->uptime_s = -1;
        h->aof = -1;
        h->counts.duplicate_of = -1;
        h->quarantine_timer = evtimer_new(ctx.base, health_quarantine_cb, h);
        if (h->quarantine_timer == NULL) {
            xmalloc_fail("a master's quarantine timer");
        }
    }
}

void
health_apply(const struct conf *prev)
{
    const struct conf *conf = ctx.conf;
    int64_t now = util_now_us();
    size_t i, ended = 0, clocked = 0;
    bool check_on = conf->clock_check && !prev->clock_check;

    for (i = 0; i < nhealths; i++) {
        struct health *h = &healths[i];

        if (check_on) {
            /* Turned on: a reference read long ago starts over (drift.h). */
            drift_forget(&h->clock);
        }
        if (!conf->restart_quarantine && h->quarantine_until_us > now) {
            /* Turned off: the operator says no master lost locks. */
            h->quarantine_until_us = 0;
            ended++;
        }
        if (!conf->clock_check && h->clock_until_us > now) {
            h->clock_until_us = 0;
            clocked++;
        }
        health_quarantine_arm(h, now);
    }
    if (ended > 0) {
        log_info("lock.restart_quarantine is off now: the restart quarantine of %zu "
                 "master%s ends at once; their answers count toward a quorum", ended,
                 ended == 1 ? "" : "s");
    }
    if (clocked > 0) {
        log_info("lock.clock_check is off now: the clock quarantine of %zu master%s ends "
                 "at once; their answers count toward a quorum", clocked,
                 clocked == 1 ? "" : "s");
    }
}

void
health_set_quarantine_ms(int64_t ms)
{
    health_quarantine_ms = ms;
}

void
health_stop(void)
{
    size_t i;

    if (health_exempt_timer != NULL) {
        health_exempt_cb(-1, 0, NULL);      /* the notes still gathered */
        event_free(health_exempt_timer);
        health_exempt_timer = NULL;
    }
    for (i = 0; i < nhealths; i++) {
        if (healths[i].quarantine_timer != NULL) {
            event_free(healths[i].quarantine_timer);
        }
    }
    free(healths);
    healths = NULL;
    nhealths = 0;
}

size_t
health_ask_argv(enum health_ask ask, const char **argv, size_t *lens)
{
    size_t n;

    for (n = 0; n < HEALTH_ASK_WORDS && health_words[ask][n] != NULL; n++) {
        argv[n] = health_words[ask][n];
        lens[n] = strlen(argv[n]);
    }
    return n;
}

/*
 * Work out again which masters are the same server as one listed
 * before them (health_duplicate_of): among the up command links that
 * read a run_id, the first entry with a given run_id counts, each later
 * one is its duplicate.  Called when a command link comes up or goes
 * down, never per request.  O(masters^2), at most 15 * 15.
 */
static void
health_dups_update(void)
{
    size_t i, j;
    int dup, was;

    for (i = 0; i < nhealths; i++) {
        struct health *h = &healths[i];

        dup = -1;
        if (h->up && h->run_id_now) {
            for (j = 0; j < i; j++) {
                if (healths[j].up && healths[j].run_id_now
                    && strcmp(healths[j].run_id, h->run_id) == 0) {
                    dup = (int)j;
                    break;
                }
            }
        }
        was = h->counts.duplicate_of;
        if (dup == was) {
            continue;
        }
        h->counts.duplicate_of = dup;
        if (dup >= 0) {
            log_warn("master %s (masters entry %zu) is the same Redis server as %s "
                     "(entry %d): both report run_id %.8s...; only %s counts toward a "
                     "quorum, so one server cannot be counted twice; list each server "
                     "once in masters", health_name(h), i, health_name(&healths[dup]), dup,
                     h->run_id, health_name(&healths[dup]));
        } else if (h->up) {
            log_info("master %s (masters entry %zu) is no longer the same server as %s "
                     "(entry %d) among the up masters: its answers count again",
                     health_name(h), i, health_name(&healths[was]), was);
        }
    }
}

/*
 * Find "<field>:<value>\r\n" in an INFO text and copy value (at most
 * size - 1 bytes, NUL-terminated).  Returns false when it is missing.
 */
static bool
health_info_field(const char *info, size_t len, const char *field, char *out, size_t size)
{
    size_t flen = strlen(field), i, n;
    const char *p = info, *end = info + len, *nl;

    while (p < end) {
        nl = memchr(p, '\n', (size_t)(end - p));
        n = (size_t)((nl != NULL ? nl : end) - p);
        if (n > flen && memcmp(p, field, flen) == 0 && p[flen] == ':') {
            i = n - flen - 1;
            if (i > 0 && p[flen + 1 + i - 1] == '\r') {
                i--;
            }
            if (i == 0 || i >= size) {
                return false;
            }
            memcpy(out, p + flen + 1, i);
            out[i] = '\0';
            return true;
        }
        p += n + 1;
    }
    return false;
}

/*
 * The INFO server answer of a new connection: note a restart (a new
 * run_id) and keep the run_id (duplicates) and the uptime (the
 * quarantine, decided when the handshake is complete:
 * health_quarantine_begin).  Returns 0, or -1 with the reason in why.
 */
static int
health_info(struct health *h, const redisReply *reply, char *why, size_t size)
{
    char run_id[sizeof(h->run_id)], uptime_text[24], *end;
    long long uptime_s;

    if (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_STATUS) {
        snprintf(why, size, "INFO server answered a reply of type %d", reply->type);
        return -1;
    }
    if (!health_info_field(reply->str, reply->len, "run_id", run_id, sizeof(run_id))) {
        snprintf(why, size, "INFO server: no run_id (or one over 40 bytes)");
        return -1;
    }
    if (!health_info_field(reply->str, reply->len, "uptime_in_seconds", uptime_text,
                           sizeof(uptime_text))) {
        snprintf(why, size, "INFO server: no uptime_in_seconds (or one over 20 digits)");
        return -1;
    }
    errno = 0;
    uptime_s = strtoll(uptime_text, &end, 10);
    if (errno != 0 || *end != '\0' || uptime_s < 0) {
        snprintf(why, size, "INFO server: bad uptime_in_seconds '%.20s'", uptime_text);
        return -1;
    }
    if (h->run_id[0] != '\0' && strcmp(h->run_id, run_id) != 0) {
        /* Another process, perhaps on another machine: its clock is read afresh. */
        drift_forget(&h->clock);
        h->counts.restarts++;
        log_warn("master %s: restarted (run_id %.8s... now %.8s..., up %lld s)",
                 health_name(h), h->run_id, run_id, uptime_s);
    }
    snprintf(h->run_id, sizeof(h->run_id), "%s", run_id);
    h->run_id_now = true;
    h->uptime_s = uptime_s;
    return 0;
}

/* INFO persistence: aof_enabled (0 or 1). */
static void
health_persist_info(struct health *h, const redisReply *reply)
{
    char aof[8];

    if ((reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS)
        && health_info_field(reply->str, reply->len, "aof_enabled", aof, sizeof(aof))) {
        h->aof = strcmp(aof, "1") == 0;
    }
}

/* CONFIG GET appendfsync: ["appendfsync", "always"]. */
static void
health_fsync_info(struct health *h, const redisReply *reply)
{
    const redisReply *v;

    if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2
        && (v = reply->element[1])->type == REDIS_REPLY_STRING) {
        snprintf(h->appendfsync, sizeof(h->appendfsync), "%.*s", (int)v->len, v->str);
    }
}

/*
 * INFO memory: a maxmemory with a policy that evicts keys may drop lock
 * keys when the master is full, which ends those locks without anyone
 * being told.  Warned at every connect while it is so.
 */
static void
health_memory_info(struct health *h, const redisReply *reply)
{
    char maxmem[24], *end;
    long long bytes;

    h->counts.evicting = false;
    h->counts.maxmemory = 0;
    h->maxmemory_policy[0] = '\0';
    if ((reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_STATUS)
        || !health_info_field(reply->str, reply->len, "maxmemory", maxmem, sizeof(maxmem))
        || !health_info_field(reply->str, reply->len, "maxmemory_policy",
                              h->maxmemory_policy, sizeof(h->maxmemory_policy))) {
        return;
    }
    errno = 0;
    bytes = strtoll(maxmem, &end, 10);
    if (errno != 0 || *end != '\0' || bytes < 0) {
        return;
    }
    h->counts.maxmemory = bytes;
    if (bytes > 0 && strcmp(h->maxmemory_policy, "noeviction") != 0) {
        h->counts.evicting = true;
        log_warn("master %s: maxmemory is %lld bytes with maxmemory-policy %s: when it is "
                 "full, Redis may evict lock keys, which ends those locks silently; set "
                 "maxmemory-policy noeviction (or maxmemory 0) on every master",
                 health_name(h), bytes, h->maxmemory_policy);
    }
}

/* A refused INFO persistence, CONFIG GET appendfsync or INFO memory. */
static void
health_refused(struct health *h, enum health_ask ask, const char *err)
{
    if (ask == HEALTH_APPENDFSYNC && !h->fsync_refusal_logged
        && ctx.conf->restart_quarantine) {
        h->fsync_refusal_logged = true;
        log_warn("master %s: CONFIG GET appendfsync refused (%.100s): appendfsync cannot "
                 "be read, so the daemon cannot tell that the master persists every "
                 "write, and a restart quarantine still applies to it (grant the ACL "
                 "user +config|get to exempt a master with appendfsync always)",
                 health_name(h), err);
    } else if (ask == HEALTH_INFO_PERSISTENCE && !h->persist_refusal_logged
               && ctx.conf->restart_quarantine) {
        h->persist_refusal_logged = true;
        log_warn("master %s: INFO persistence refused (%.100s): whether it persists every "
                 "write cannot be read, so a restart quarantine still applies to it",
                 health_name(h), err);
    } else if (ask == HEALTH_INFO_MEMORY && !h->memory_refusal_logged) {
        h->memory_refusal_logged = true;
        log_warn("master %s: INFO memory refused (%.100s): an evicting maxmemory-policy "
                 "cannot be noticed", health_name(h), err);
    }
}

void
health_connecting(size_t i)
{
    struct health *h = &healths[i];

    h->run_id_now = false;
    h->uptime_s = -1;
    h->aof = -1;
    h->appendfsync[0] = '\0';
}

int
health_answer(size_t i, enum health_ask ask, const redisReply *reply, char *why, size_t size)
{
    struct health *h = &healths[i];

    if (ask != HEALTH_INFO_SERVER) {
        /* Nice to know, never needed for the link (an ACL may refuse them). */
        if (reply->type == REDIS_REPLY_ERROR) {
            health_refused(h, ask, reply->str);
        } else if (ask == HEALTH_INFO_PERSISTENCE) {
            health_persist_info(h, reply);
        } else if (ask == HEALTH_APPENDFSYNC) {
            health_fsync_info(h, reply);
        } else {
            health_memory_info(h, reply);
        }
        return 0;
    }
    if (reply->type == REDIS_REPLY_ERROR && !ctx.conf->restart_quarantine) {
        /* Only needed for the quarantine (an ACL user without +info). */
        log_warn("master %s: INFO server refused (%.100s): restarts, and a server "
                 "listed twice in masters, will not be noticed", health_name(h), reply->str);
        return 0;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(why, size, "INFO server refused: %.100s", reply->str);
        return -1;
    }
    return health_info(h, reply, why, size);
}

/* Arm the timer that logs the end of h's quarantines (the later one), if any. */
static void
health_quarantine_arm(struct health *h, int64_t now)
{
    int64_t until = h->quarantine_until_us > h->clock_until_us ? h->quarantine_until_us
                                                               : h->clock_until_us;
    int64_t left_us = until - now;
    struct timeval tv;

    if (h->quarantine_timer == NULL) {
        return;
    }
    evtimer_del(h->quarantine_timer);
    if (left_us > 0) {
        tv.tv_sec = (time_t)(left_us / 1000000);
        tv.tv_usec = (suseconds_t)(left_us % 1000000);
        evtimer_add(h->quarantine_timer, &tv);
    }
}

/*
 * The handshake of the command link is complete: with
 * lock.restart_quarantine keep the master's answers out of every
 * quorum until it has been up for health_quarantine_ms: by then every
 * lock it may have lost in its restart has expired on the other masters
 * (Redis distributed-locks page, "Performance, crash recovery and
 * fsync": delayed restarts).  A master that fsyncs every write before
 * answering (aof_enabled:1, appendfsync always) lost nothing and is not
 * quarantined.  The uptime is in whole seconds of the master's wall
 * clock (it may say 1 s after a few ms), so its start is taken as late
 * as it can have been: now - (uptime - 1 s).
 */
static void
health_quarantine_begin(struct health *h)
{
    int64_t now = util_now_us(), max_ttl = health_quarantine_ms, until, left_ms;
    long long surely_up_s;
    char when[32], reason[96];

    h->quarantine_until_us = 0;
    health_quarantine_arm(h, now);
    if (!ctx.conf->restart_quarantine || h->uptime_s < 0) {
        return;
    }
    /*
     * Redis computes uptime_in_seconds from whole-second wall-clock
     * stamps, so it can say 1 when only a few ms have passed: the master
     * has been up for more than uptime - 1 s, no more can be assumed
     * (the fault suite caught a quarantine that ended a second early).
     */
    surely_up_s = h->uptime_s > 0 ? h->uptime_s - 1 : 0;
    if (surely_up_s > (max_ttl + 999) / 1000) {
        return;     /* up long enough; no overflow below */
    }
    until = now - (int64_t)surely_up_s * 1000000 + max_ttl * 1000;
    if (until <= now) {
        return;
    }
    if (h->aof == 1 && strcmp(h->appendfsync, "always") == 0) {
        /* Logged a moment later, in one line with the others that came up with it. */
        h->exempt_pending = true;
        if (!evtimer_pending(health_exempt_timer, NULL)) {
            struct timeval tv = { 0, HEALTH_EXEMPT_NOTE_MS * 1000 };

            evtimer_add(health_exempt_timer, &tv);
        }
        return;
    }
    if (h->aof < 0) {
        snprintf(reason, sizeof(reason), "INFO persistence was refused");
    } else if (h->aof == 0) {
        snprintf(reason, sizeof(reason), "it has no append-only file (aof_enabled:0)");
    } else if (h->appendfsync[0] == '\0') {
        snprintf(reason, sizeof(reason), "its appendfsync cannot be read "
                 "(CONFIG GET refused)");
    } else {
        snprintf(reason, sizeof(reason), "appendfsync is %s, not always", h->appendfsync);
    }
    h->quarantine_until_us = until;
    left_ms = (until - now + 999) / 1000;
    util_clock_after(left_ms, when, sizeof(when));
    log_warn("master %s: up for %lld s only, less than lock.max_ttl_ms plus drift "
             "(%lld ms), and %s: quarantined for %lld ms, until about %s; its answers "
             "do not count toward a quorum until then (lock.restart_quarantine)",
             health_name(h), h->uptime_s, (long long)max_ttl, reason, (long long)left_ms,
             when);
    health_quarantine_arm(h, now);
}

void
health_link_up(size_t i)
{
    struct health *h = &healths[i];

    h->up = true;
    h->clock_bad_logged = false;    /* logged once per connection */
    health_quarantine_begin(h);
    health_dups_update();
}

void
health_link_down(size_t i)
{
    struct health *h = &healths[i];

    h->up = false;
    h->quarantine_until_us = 0;
    h->run_id_now = false;
    health_quarantine_arm(h, util_now_us());
    health_dups_update();
}

/*
 * A master's clock stepped (drift.h): its answers stop counting toward
 * any quorum for as long as a restart's would (lock.max_ttl_ms plus
 * drift): by then every lease that may have lost its key on it early
 * has ended everywhere.  Logged and counted.
 */
static void
health_clock_stepped(struct health *h, const struct drift_step *st, int64_t now)
{
    int64_t until = now + health_quarantine_ms * 1000, left_ms = health_quarantine_ms;
    char when[32];

    h->counts.clock_steps++;
    if (until > h->clock_until_us) {
        h->clock_until_us = until;
    }
    util_clock_after(left_ms, when, sizeof(when));
    log_warn("master %s: its clock %s by %lld ms: it advanced %lld ms while this daemon's "
             "advanced %lld ms (round trips and %lld ms of drift allowed), so lock keys on "
             "it %s; its answers do not count toward a quorum for %lld ms, "
             "until about %s (lock.clock_check)", health_name(h),
             st->step_us > 0 ? "jumped ahead" : "went back",
             (long long)((st->step_us > 0 ? st->step_us : -st->step_us) / 1000),
             (long long)(st->elapsed_us / 1000), (long long)(st->since_us / 1000),
             (long long)(st->allowed_us / 1000),
             st->step_us > 0 ? "may have expired early" : "may expire late",
             (long long)left_ms, when);
    health_quarantine_arm(h, now);
}

/*
 * A reading of h's clock (clock_us, its TIME) by a request sent at
 * sent_us and answered at now (monotonic): compare it with the last one
 * (daemon/drift.h), the drift allowance growing up to the shortest
 * lease's; with lock.clock_check a step starts the clock quarantine.
 * The reference follows the master with the check off too.
 */
static void
health_clock_note(struct health *h, int64_t clock_us, int64_t sent_us, int64_t now)
{
    struct drift_step st;

    h->counts.clock_readings++;
    if (drift_check(&h->clock, clock_us, sent_us, now, ctx.conf->drift_factor,
                    ctx.conf->min_ttl_ms * 1000, &st)
        && ctx.conf->clock_check) {
        health_clock_stepped(h, &st, now);
    }
}

const redisReply *
health_clock_read(size_t i, const redisReply *reply, int64_t sent_us, int64_t now)
{
    struct health *h = &healths[i];
    int64_t clock_us = -1;

    if (reply->type == REDIS_REPLY_ARRAY && (reply->elements == 1 || reply->elements == 2)
        && reply->element[0]->type == REDIS_REPLY_INTEGER) {
        clock_us = reply->element[0]->integer;
    }
    if (clock_us <= 0) {
        if (!h->clock_bad_logged) {
            h->clock_bad_logged = true;
            log_warn("master %s: a script's answer did not carry the master's TIME (a reply "
                     "of type %d with %zu elements): not counted; is something other than "
                     "Redis answering on this address?", health_name(h), reply->type,
                     reply->type == REDIS_REPLY_ARRAY ? reply->elements : 0);
        }
        return NULL;
    }
    health_clock_note(h, clock_us, sent_us, now);
    return reply->elements == 2 ? reply->element[1] : &health_nil_answer;
}

void
health_clock_time(size_t i, const redisReply *reply, int64_t sent_us, int64_t now)
{
    struct health *h = &healths[i];
    long long sec, usec;
    char *end;

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2
        || reply->element[0]->type != REDIS_REPLY_STRING
        || reply->element[1]->type != REDIS_REPLY_STRING
        || (sec = strtoll(reply->element[0]->str, &end, 10)) <= 0 || *end != '\0'
        || (usec = strtoll(reply->element[1]->str, &end, 10)) < 0 || *end != '\0'
        || usec >= 1000000) {
        if (!h->clock_bad_logged) {
            h->clock_bad_logged = true;
            log_warn("master %s: TIME answered something other than {seconds, "
                     "microseconds} (a reply of type %d): its clock is read from the "
                     "scripts' answers only", health_name(h), reply->type);
        }
        return;
    }
    health_clock_note(h, (int64_t)sec * 1000000 + usec, sent_us, now);
}

bool
health_clock_fresh(size_t i, int64_t now, int64_t fresh_ms)
{
    const struct health *h = &healths[i];

    return h->clock.set && now - h->clock.read_us < fresh_ms * 1000;
}

int64_t
health_quarantine_left_ms(size_t i, int64_t now)
{
    int64_t left = healths[i].quarantine_until_us - now;

    return left > 0 ? (left + 999) / 1000 : 0;
}

int64_t
health_clock_quarantine_left_ms(size_t i, int64_t now)
{
    int64_t left = healths[i].clock_until_us - now;

    return left > 0 ? (left + 999) / 1000 : 0;
}

int64_t
health_any_quarantine_left_ms(size_t i, int64_t now)
{
    int64_t restart = health_quarantine_left_ms(i, now);
    int64_t clock = health_clock_quarantine_left_ms(i, now);

    return restart > clock ? restart : clock;
}

int
health_duplicate_of(size_t i)
{
    return healths[i].counts.duplicate_of;
}

const char *
health_run_id(size_t i)
{
    return healths[i].run_id;
}

void
health_get_counts(size_t i, struct health_counts *c)
{
    *c = healths[i].counts;
}
