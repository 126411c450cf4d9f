/*
 * master.c: the links to the Redis masters.
 *
 * With daemon/redisev.c (the transport: a libevent bufferevent, plain or
 * TLS, with hiredis's reader and formatter), the only file that includes
 * hiredis.  What this code relies on (daemon/redisev.h): a failed
 * connect calls the connect callback with ok false and the link is
 * freed after it; when a connected link fails every pending callback
 * runs with a NULL reply, then the disconnect callback, and the link is
 * freed when it returns; drops requested in the connect callback are
 * deferred to the master's timer.
 *
 * Host names are resolved with libevent's evdns before every connect,
 * so the event loop never blocks in getaddrinfo(3); the link is given
 * the numeric address.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <hiredis/hiredis.h>

#include "conf/conf.h"
#include "daemon/drift.h"
#include "daemon/flush.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/redisev.h"
#include "daemon/tls.h"
#include "daemon/util.h"

#define MASTER_SCRIPTS_MAX      16
#define MASTER_BATCH_MAX        128     /* requests in one batch call, at most */
#define MASTER_BACKOFF_MIN_MS   100
#define MASTER_BACKOFF_MAX_MS   5000
#define MASTER_ARGV_STACK       16
#define MASTER_WHY_MAX          256
#define MASTER_STEP_AUTH        (-1)    /* handshake step: AUTH */
#define MASTER_STEP_INFO        (-2)    /* handshake step: INFO server */
#define MASTER_STEP_PERSIST     (-3)    /* handshake step: INFO persistence */
#define MASTER_STEP_FSYNC       (-4)    /* handshake step: CONFIG GET appendfsync */
#define MASTER_STEP_MEMORY      (-5)    /* handshake step: INFO memory */
#define MASTER_CLOCK_TICK_MS    250     /* how often the clock keeper looks */
#define MASTER_CLOCK_FRESH_MS   1000    /* a clock reading older than this is renewed
                                           with a TIME (master_keeper_cb) */

/* For log lines: which of a master's two links. */
#define MASTER_LINK_WHAT(k)     ((k)->subscriber ? " (subscriber)" : "")

/*
 * One connection to a master: the command link (scripts) or the
 * subscriber link (release announcements; a connection in subscribed
 * mode takes no other commands).  Each connects, authenticates and
 * reconnects on its own.
 */
struct master_link {
    struct master      *master;     /* the master it belongs to */
    const struct conf_addr *addr;   /* address, points into the conf */
    bool                subscriber; /* the subscriber link */
    enum master_state   state;      /* connection state */
    struct redisev     *ac;         /* live link (daemon/redisev.h), NULL when down */
    struct event       *timer;      /* connect deadline, or reconnect delay */
    int64_t             backoff_ms; /* next reconnect delay before jitter */
    int                 pending;    /* handshake replies still expected */
    int                 inflight;   /* requests sent on ac, not answered yet */
    int64_t             progress_us;/* last reply, or when inflight left 0 */
    bool                ever_up;    /* has been up once (for reconnects) */
    bool                drop_now;   /* drop requested where it cannot be done:
                                       the timer does it, with why */
    bool                resolving;  /* an evdns lookup is in flight */
    struct evdns_getaddrinfo_request *dns_req; /* that lookup, to cancel */
    char                why[MASTER_WHY_MAX]; /* last failure, for status text */
};

/*
 * The per-lock requests of one loop iteration to one master, sent as one
 * call of the batch script at the iteration's end (daemon/flush.h), in
 * the order they were made.  Owned by its master; the requests in it by
 * the batch until they are sent.
 */
struct master_batch {
    struct flush_entry  fe;         /* listed while requests wait */
    struct master_req  *head;       /* the first request; NULL when empty */
    struct master_req **tail;       /* where the next one goes */
    size_t              n;          /* requests in it */
};

/* A batch sent: its requests, until its answer (or the link's loss) comes. */
struct master_batch_req {
    struct master      *m;          /* the master it was sent to */
    struct master_req  *items;      /* its requests, in order (linked by next) */
    size_t              n;          /* how many */
    bool                retried;    /* NOSCRIPT retry with EVAL done */
    int64_t             sent_us;    /* monotonic send time */
};

/*
 * One master.  Owned by this module (the masters array); freed by
 * master_stop().
 */
struct master {
    size_t              index;      /* position in the config */
    const struct conf_addr *addr;   /* address, points into the conf */
    struct master_link  cmd;        /* scripts */
    struct master_link  sub;        /* SUBSCRIBE */
    char                status[MASTER_WHY_MAX + 16]; /* master_status_text buffer */
    char                sha[MASTER_SCRIPTS_MAX][41]; /* SCRIPT LOAD answers, per master */
    char                run_id[41]; /* INFO server run_id, "" before the first */
    bool                run_id_now; /* run_id was read on the live command link */
    long long           uptime_s;   /* INFO server uptime on this connect; -1: unread */
    int                 aof;        /* INFO persistence aof_enabled: 1, 0, -1 unread */
    char                appendfsync[16]; /* CONFIG GET appendfsync, "" when unread */
    bool                fsync_refusal_logged;   /* the refusal was logged once */
    bool                persist_refusal_logged; /* INFO persistence's, likewise */
    bool                memory_refusal_logged;  /* INFO memory's, likewise */
    char                maxmemory_policy[32];   /* INFO memory, "" when unread */
    int64_t             quarantine_until_us; /* monotonic; its answers count after */
    int64_t             clock_until_us;      /* monotonic: clock quarantine, its answers
                                                count after (lock.clock_check) */
    struct event       *quarantine_timer;    /* logs the end of either quarantine */
    struct drift_ref    clock;      /* the last reading of its clock (daemon/drift.h) */
    bool                clock_bad_logged;    /* an answer without its TIME was logged
                                                on this connection */
    bool                clock_probing;       /* a TIME of the clock keeper is in
                                                flight on the command link */
    int64_t             clock_probe_sent_us; /* monotonic: when it was sent */
    struct master_stats stats;      /* counters (duplicate_of, evicting too) */
    struct master_batch batch;      /* per-lock requests waiting for the iteration's end */
};

/* Per master, where a channel's subscription stands. */
enum master_sub_state {
    MASTER_SUB_NONE,        /* not subscribed */
    MASTER_SUB_SUBSCRIBING, /* SUBSCRIBE sent, not confirmed */
    MASTER_SUB_ON,          /* subscribed */
    MASTER_SUB_LEAVING      /* UNSUBSCRIBE sent, not confirmed */
};

/*
 * A channel the daemon wants, or still has to leave.  Owned by this
 * module; freed once it is unwanted and left on every master.  At most
 * one SUBSCRIBE or UNSUBSCRIBE per channel and master is in flight:
 * a re-SUBSCRIBE sent before the UNSUBSCRIBE's confirmation would have
 * its own confirmation taken for the leave's.
 */
struct master_chan {
    TAILQ_ENTRY(master_chan) link;  /* in master_chans */
    unsigned            wanted;     /* master_subscribe() calls not yet undone */
    uint8_t             state[CONF_MASTERS_MAX]; /* enum master_sub_state, per master */
    size_t              len;        /* bytes in name */
    char                name[];     /* the channel */
};

/* Subscribed by every subscriber link and never left, so that the link
 * never drops out of subscribed mode (and its handshake has an answer to
 * wait for). */
#define MASTER_SENTINEL_CHANNEL "redlockd keep-subscribed"

/* One request in flight on a master; freed after its callback. */
struct master_req {
    struct master_req  *next;       /* in its master's batch, or in a batch in flight */
    struct master      *m;          /* the master it was sent to */
    master_reply_fn     cb;         /* caller's callback */
    void               *arg;        /* caller's argument */
    int                 script;     /* script id */
    size_t              nkeys;      /* keys among args */
    size_t              nargs;      /* args count */
    const char *const  *args;       /* caller's args (kept alive by caller) */
    const size_t       *lens;       /* their lengths */
    bool                retried;    /* NOSCRIPT retry with EVAL done */
    int64_t             sent_us;    /* monotonic send time */
};

static struct event_base *master_base;
static struct evdns_base *master_dns;       /* only when a master has a host name */
static const struct conf *master_conf;
static int64_t            master_quarantine_ms; /* how long a restarted master is
                                                   kept out, ms (the caller's) */
static struct master     *masters;
static size_t             nmasters;
static struct event      *master_keeper;    /* the clock keeper's periodic timer */

static void master_keeper_cb(evutil_socket_t fd, short what, void *arg);

static char *script_text[MASTER_SCRIPTS_MAX];  /* wrapped (MASTER_CLOCK_HEAD/_TAIL);
                                                  live until exit */
static bool        script_clock[MASTER_SCRIPTS_MAX];   /* its answers carry the clock */
static const char *script_op[MASTER_SCRIPTS_MAX];      /* its operation in the batch
                                                          script, or NULL */
static int         script_batch = -1;                  /* the batch script's id */

/*
 * The batch formatted last (redisFormatCommandArgv's output, freed with
 * redisFreeCommand), kept so that the next master asked the very same
 * requests, as every master usually is in one loop iteration, is sent
 * these bytes instead of a new formatting (master_batch_write).  Owned
 * here; NULL when none.
 */
static char       *batch_cmd;
static size_t      batch_cmd_len;                      /* bytes in batch_cmd */
static int         nscripts;

static void master_batch_cb(struct redisev *ac, void *r, void *privdata);
static void master_batch_send(struct master *m, bool in_loop);
static void master_batch_add(struct master *m, struct master_req *req);
static void master_batch_fail(struct master *m, struct master_req *items, const char *why);

static TAILQ_HEAD(, master_chan) master_chans = TAILQ_HEAD_INITIALIZER(master_chans);
static size_t             master_nwanted;   /* channels wanted now */
static master_message_fn  master_message_cb;

static void master_connect(struct master_link *m);
static void master_sub_cb(struct redisev *ac, void *r, void *privdata);
static void master_sub_link_up(struct master_link *k);
static void master_sub_link_down(struct master_link *k);
static void master_timer_cb(evutil_socket_t fd, short what, void *arg);
static void master_check_silence(struct master_link *k);
static void master_link_lost(struct master_link *k);
static void master_dups_update(void);
static void master_quarantine_begin(struct master *m);
static void master_quarantine_arm(struct master *m, int64_t now);
static int64_t master_any_quarantine_left_ms(const struct master *m, int64_t now_us);

/* Cancel an evdns lookup in flight (its callback sees EVUTIL_EAI_CANCEL). */
static void
master_cancel_dns(struct master_link *m)
{
    struct evdns_getaddrinfo_request *req = m->dns_req;

    if (m->resolving) {
        m->resolving = false;
        m->dns_req = NULL;
        if (req != NULL) {
            evdns_getaddrinfo_cancel(req);
        }
    }
}

static bool
master_host_is_numeric(const char *host)
{
    struct in6_addr a6;
    struct in_addr a4;

    return inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
}

/*
 * A script registered with its clock is sent wrapped so that its answer
 * carries the master's clock, read just before the script's own body
 * runs: {us, answer} (TIME in microseconds, an integer: a Lua number
 * holds it exactly; then the body's answer; a nil answer ends the
 * table, so only one element comes back).  master_clock_read() takes
 * the wrapper off and checks the clock: callers see the body's answer
 * alone.  The body runs as a function, so its top-level return
 * statements are unchanged, and it may read the time as rl_clock_us
 * (master.h, master_script).  Without its clock, a script only gets
 * rl_clock_us false, and its answer comes back as it is.
 */
#define MASTER_CLOCK_HEAD   "local rl_clock_us = redis.call('TIME')\n" \
                            "rl_clock_us = tonumber(rl_clock_us[1]) * 1000000" \
                            " + tonumber(rl_clock_us[2])\n" \
                            "local rl_answer = (function()\n"
#define MASTER_CLOCK_TAIL   "\nend)()\n" \
                            "return {rl_clock_us, rl_answer}\n"
#define MASTER_NOCLOCK_HEAD "local rl_clock_us = false\n"

int
master_script(const char *text, bool clock)
{
    const char *head_text = clock ? MASTER_CLOCK_HEAD : MASTER_NOCLOCK_HEAD;
    const char *tail_text = clock ? MASTER_CLOCK_TAIL : "";
    size_t head = strlen(head_text), len = strlen(text), tail = strlen(tail_text);
    char *wrapped;

    if (nscripts == MASTER_SCRIPTS_MAX || (wrapped = malloc(head + len + tail + 1)) == NULL) {
        return -1;
    }
    memcpy(wrapped, head_text, head);
    memcpy(wrapped + head, text, len);
    memcpy(wrapped + head + len, tail_text, tail + 1);
    script_text[nscripts] = wrapped;
    script_clock[nscripts] = clock;
    return nscripts++;
}

int
master_script_batch(int script, int batch, const char *op)
{
    if (script < 0 || script >= nscripts || batch < 0 || batch >= nscripts
        || !script_clock[batch] || op == NULL) {
        return -1;
    }
    script_batch = batch;
    script_op[script] = op;
    return 0;
}

static struct master_link *
master_by_ac(const struct redisev *ac)
{
    size_t i;

    for (i = 0; i < nmasters; i++) {
        if (masters[i].cmd.ac == ac) {
            return &masters[i].cmd;
        }
        if (masters[i].sub.ac == ac) {
            return &masters[i].sub;
        }
    }
    return NULL;
}

static void
master_schedule(struct master_link *m, int64_t ms)
{
    struct timeval tv;

    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    evtimer_add(m->timer, &tv);
}

/* Arm the reconnect timer: backoff doubling from 100 ms to 5 s, +-50% jitter. */
static void
master_schedule_reconnect(struct master_link *m)
{
    int64_t delay;

    delay = m->backoff_ms / 2 + util_random(m->backoff_ms);
    m->backoff_ms *= 2;
    if (m->backoff_ms > MASTER_BACKOFF_MAX_MS) {
        m->backoff_ms = MASTER_BACKOFF_MAX_MS;
    }
    log_debug("master %s: reconnect in %lld ms", m->addr->spec, (long long)delay);
    master_schedule(m, delay);
}

/*
 * Forget the live link and free it.  The pending callbacks run with
 * NULL (they see m->ac != their link and report the loss); when called
 * from a reply callback the free is deferred by daemon/redisev.c until it
 * returns.  Never called from the connect callback.
 */
static void
master_drop(struct master_link *m, const char *why)
{
    struct redisev *ac = m->ac;

    if (m->state == MASTER_UP) {
        log_warn("master %s%s: down: %s", m->addr->spec, MASTER_LINK_WHAT(m), why);
    } else if (strcmp(m->why, why) != 0) {
        log_warn("master %s%s: %s", m->addr->spec, MASTER_LINK_WHAT(m), why);
    } else {
        log_debug("master %s%s: %s (again)", m->addr->spec, MASTER_LINK_WHAT(m), why);
    }
    snprintf(m->why, sizeof(m->why), "%s", why);
    m->ac = NULL;
    m->state = MASTER_DOWN;
    m->inflight = 0;
    master_link_lost(m);
    if (m->subscriber) {
        master_sub_link_down(m);
    }
    evtimer_del(m->timer);
    master_cancel_dns(m);
    if (ac != NULL) {
        redisev_free(ac);
    }
    master_schedule_reconnect(m);
}

/*
 * The command link is down: the restart quarantine is read again (INFO)
 * on the next connect, so it says nothing until then (STATS, STATUS=).
 * A clock quarantine goes on: it is about the keys the master holds.
 */
static void
master_link_lost(struct master_link *k)
{
    if (!k->subscriber) {
        k->master->quarantine_until_us = 0;
        k->master->run_id_now = false;
        master_quarantine_arm(k->master, util_now_us());
        master_dups_update();
    }
}

/* The handshake is complete: the link takes requests. */
static void
master_link_up(struct master_link *m)
{
    m->state = MASTER_UP;
    m->inflight = 0;
    m->progress_us = util_now_us();
    m->backoff_ms = MASTER_BACKOFF_MIN_MS;
    m->why[0] = '\0';
    evtimer_del(m->timer);
    if (m->ever_up && !m->subscriber) {
        m->master->stats.reconnects++;
    }
    m->ever_up = true;
    if (!m->subscriber) {
        m->master->clock_bad_logged = false;    /* logged once per connection */
    }
    log_info("master %s%s: up", m->addr->spec, MASTER_LINK_WHAT(m));
    if (m->subscriber) {
        master_sub_link_up(m);
    } else {
        master_quarantine_begin(m->master);
        master_dups_update();
    }
}

/*
 * Work out again which masters are the same server as one listed
 * before them (master_duplicate_of): among the up command links that
 * read a run_id, the first entry with a given run_id counts, each later
 * one is its duplicate.  Called when a command link comes up or goes
 * down, never per request.  O(masters^2), at most 15 * 15.
 */
static void
master_dups_update(void)
{
    size_t i, j;
    int dup, was;

    for (i = 0; i < nmasters; i++) {
        struct master *m = &masters[i];

        dup = -1;
        if (m->cmd.state == MASTER_UP && m->run_id_now) {
            for (j = 0; j < i; j++) {
                if (masters[j].cmd.state == MASTER_UP && masters[j].run_id_now
                    && strcmp(masters[j].run_id, m->run_id) == 0) {
                    dup = (int)j;
                    break;
                }
            }
        }
        was = m->stats.duplicate_of;
        if (dup == was) {
            continue;
        }
        m->stats.duplicate_of = dup;
        if (dup >= 0) {
            log_warn("master %s (masters entry %zu) is the same Redis server as %s "
                     "(entry %d): both report run_id %.8s...; only %s counts toward a "
                     "quorum, so one server cannot be counted twice; list each server "
                     "once in masters", m->addr->spec, i, masters[dup].addr->spec, dup,
                     m->run_id, masters[dup].addr->spec);
        } else if (m->cmd.state == MASTER_UP) {
            log_info("master %s (masters entry %zu) is no longer the same server as %s "
                     "(entry %d) among the up masters: its answers count again",
                     m->addr->spec, i, masters[was].addr->spec, was);
        }
    }
}

/*
 * Find "<field>:<value>\r\n" in an INFO text and copy value (at most
 * size - 1 bytes, NUL-terminated).  Returns false when it is missing.
 */
static bool
master_info_field(const char *info, size_t len, const char *field, char *out, size_t size)
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
 * master_quarantine_begin).  Returns 0, or -1 with the reason in why.
 */
static int
master_info(struct master *m, const redisReply *reply, char *why, size_t size)
{
    char run_id[sizeof(m->run_id)], uptime_text[24], *end;
    long long uptime_s;

    if (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_STATUS) {
        snprintf(why, size, "INFO server answered a reply of type %d", reply->type);
        return -1;
    }
    if (!master_info_field(reply->str, reply->len, "run_id", run_id, sizeof(run_id))) {
        snprintf(why, size, "INFO server: no run_id (or one over 40 bytes)");
        return -1;
    }
    if (!master_info_field(reply->str, reply->len, "uptime_in_seconds", uptime_text,
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
    if (m->run_id[0] != '\0' && strcmp(m->run_id, run_id) != 0) {
        /* Another process, perhaps on another machine: its clock is read afresh. */
        drift_forget(&m->clock);
        m->stats.restarts++;
        log_warn("master %s: restarted (run_id %.8s... now %.8s..., up %lld s)",
                 m->addr->spec, m->run_id, run_id, uptime_s);
    }
    snprintf(m->run_id, sizeof(m->run_id), "%s", run_id);
    m->run_id_now = true;
    m->uptime_s = uptime_s;
    return 0;
}

/* INFO persistence: aof_enabled (0 or 1). */
static void
master_persist_info(struct master *m, const redisReply *reply)
{
    char aof[8];

    if ((reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS)
        && master_info_field(reply->str, reply->len, "aof_enabled", aof, sizeof(aof))) {
        m->aof = strcmp(aof, "1") == 0;
    }
}

/* CONFIG GET appendfsync: ["appendfsync", "always"]. */
static void
master_fsync_info(struct master *m, const redisReply *reply)
{
    const redisReply *v;

    if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2
        && (v = reply->element[1])->type == REDIS_REPLY_STRING) {
        snprintf(m->appendfsync, sizeof(m->appendfsync), "%.*s", (int)v->len, v->str);
    }
}

/*
 * INFO memory: a maxmemory with a policy that evicts keys may drop lock
 * keys when the master is full, which ends those locks without anyone
 * being told.  Warned at every connect while it is so.
 */
static void
master_memory_info(struct master *m, const redisReply *reply)
{
    char maxmem[24], *end;
    long long bytes;

    m->stats.evicting = false;
    m->stats.maxmemory = 0;
    m->maxmemory_policy[0] = '\0';
    if ((reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_STATUS)
        || !master_info_field(reply->str, reply->len, "maxmemory", maxmem, sizeof(maxmem))
        || !master_info_field(reply->str, reply->len, "maxmemory_policy",
                              m->maxmemory_policy, sizeof(m->maxmemory_policy))) {
        return;
    }
    errno = 0;
    bytes = strtoll(maxmem, &end, 10);
    if (errno != 0 || *end != '\0' || bytes < 0) {
        return;
    }
    m->stats.maxmemory = bytes;
    if (bytes > 0 && strcmp(m->maxmemory_policy, "noeviction") != 0) {
        m->stats.evicting = true;
        log_warn("master %s: maxmemory is %lld bytes with maxmemory-policy %s: when it is "
                 "full, Redis may evict lock keys, which ends those locks silently; set "
                 "maxmemory-policy noeviction (or maxmemory 0) on every master",
                 m->addr->spec, bytes, m->maxmemory_policy);
    }
}

/* A refused INFO persistence, CONFIG GET appendfsync or INFO memory. */
static void
master_refused(struct master *m, int step, const char *err)
{
    if (step == MASTER_STEP_FSYNC && !m->fsync_refusal_logged
        && master_conf->restart_quarantine) {
        m->fsync_refusal_logged = true;
        log_warn("master %s: CONFIG GET appendfsync refused (%.100s): appendfsync cannot "
                 "be read, so the daemon cannot tell that the master persists every "
                 "write, and a restart quarantine still applies to it (grant the ACL "
                 "user +config|get to exempt a master with appendfsync always)",
                 m->addr->spec, err);
    } else if (step == MASTER_STEP_PERSIST && !m->persist_refusal_logged
               && master_conf->restart_quarantine) {
        m->persist_refusal_logged = true;
        log_warn("master %s: INFO persistence refused (%.100s): whether it persists every "
                 "write cannot be read, so a restart quarantine still applies to it",
                 m->addr->spec, err);
    } else if (step == MASTER_STEP_MEMORY && !m->memory_refusal_logged) {
        m->memory_refusal_logged = true;
        log_warn("master %s: INFO memory refused (%.100s): an evicting maxmemory-policy "
                 "cannot be noticed", m->addr->spec, err);
    }
}

static void
master_quarantine_cb(evutil_socket_t fd, short what_ev, void *arg)
{
    struct master *m = arg;
    int64_t now = util_now_us();
    bool restart = m->quarantine_until_us != 0 && m->quarantine_until_us <= now;
    bool clock = m->clock_until_us != 0 && m->clock_until_us <= now;

    (void)fd;
    (void)what_ev;
    if (restart) {
        m->quarantine_until_us = 0;
    }
    if (clock) {
        m->clock_until_us = 0;
    }
    if (restart || clock) {
        log_info("master %s: %s quarantine over: %s", m->addr->spec,
                 restart && clock ? "restart and clock" : restart ? "restart" : "clock",
                 m->quarantine_until_us > now ? "still in restart quarantine"
                 : m->clock_until_us > now ? "still in clock quarantine"
                 : "its answers count toward a quorum");
    }
    master_quarantine_arm(m, now);
}

/* Arm the timer that logs the end of m's quarantines (the later one), if any. */
static void
master_quarantine_arm(struct master *m, int64_t now)
{
    int64_t until = m->quarantine_until_us > m->clock_until_us ? m->quarantine_until_us
                                                               : m->clock_until_us;
    int64_t left_us = until - now;
    struct timeval tv;

    if (m->quarantine_timer == NULL) {
        return;
    }
    evtimer_del(m->quarantine_timer);
    if (left_us > 0) {
        tv.tv_sec = (time_t)(left_us / 1000000);
        tv.tv_usec = (suseconds_t)(left_us % 1000000);
        evtimer_add(m->quarantine_timer, &tv);
    }
}

/*
 * The handshake of the command link is complete: with
 * lock.restart_quarantine keep the master's answers out of every
 * quorum until it has been up for master_quarantine_ms: by then every
 * lock it may have lost in its restart has expired on the other masters
 * (Redis distributed-locks page, "Performance, crash recovery and
 * fsync": delayed restarts).  A master that fsyncs every write before
 * answering (aof_enabled:1, appendfsync always) lost nothing and is not
 * quarantined.  The uptime is in whole seconds of the master's wall
 * clock (it may say 1 s after a few ms), so its start is taken as late
 * as it can have been: now - (uptime - 1 s).
 */
static void
master_quarantine_begin(struct master *m)
{
    int64_t now = util_now_us(), max_ttl = master_quarantine_ms, until, left_ms;
    long long surely_up_s;
    char when[32], reason[96];

    m->quarantine_until_us = 0;
    master_quarantine_arm(m, now);
    if (!master_conf->restart_quarantine || m->uptime_s < 0) {
        return;
    }
    /*
     * Redis computes uptime_in_seconds from whole-second wall-clock
     * stamps, so it can say 1 when only a few ms have passed: the master
     * has been up for more than uptime - 1 s, no more can be assumed
     * (the fault suite caught a quarantine that ended a second early).
     */
    surely_up_s = m->uptime_s > 0 ? m->uptime_s - 1 : 0;
    if (surely_up_s > (max_ttl + 999) / 1000) {
        return;     /* up long enough; no overflow below */
    }
    until = now - (int64_t)surely_up_s * 1000000 + max_ttl * 1000;
    if (until <= now) {
        return;
    }
    if (m->aof == 1 && strcmp(m->appendfsync, "always") == 0) {
        log_info("master %s: up for %lld s only, but it persists every write before "
                 "answering (aof_enabled:1, appendfsync always), so its restart lost no "
                 "lock: no restart quarantine", m->addr->spec, m->uptime_s);
        return;
    }
    if (m->aof < 0) {
        snprintf(reason, sizeof(reason), "INFO persistence was refused");
    } else if (m->aof == 0) {
        snprintf(reason, sizeof(reason), "it has no append-only file (aof_enabled:0)");
    } else if (m->appendfsync[0] == '\0') {
        snprintf(reason, sizeof(reason), "its appendfsync cannot be read "
                 "(CONFIG GET refused)");
    } else {
        snprintf(reason, sizeof(reason), "appendfsync is %s, not always", m->appendfsync);
    }
    m->quarantine_until_us = until;
    left_ms = (until - now + 999) / 1000;
    util_clock_after(left_ms, when, sizeof(when));
    log_warn("master %s: up for %lld s only, less than lock.max_ttl_ms plus drift "
             "(%lld ms), and %s: quarantined for %lld ms, until about %s; its answers "
             "do not count toward a quorum until then (lock.restart_quarantine)",
             m->addr->spec, m->uptime_s, (long long)max_ttl, reason, (long long)left_ms,
             when);
    master_quarantine_arm(m, now);
}

static void
master_handshake_cb(struct redisev *ac, void *r, void *privdata)
{
    redisReply *reply = r;
    struct master_link *m = master_by_ac(ac);
    int step = (int)(intptr_t)privdata;   /* MASTER_STEP_*, else script id */
    char why[MASTER_WHY_MAX];

    if (m == NULL || reply == NULL || m->state != MASTER_HANDSHAKE) {
        return;     /* dropped meanwhile; the drop did the bookkeeping */
    }
    m->progress_us = util_now_us();
    if (step == MASTER_STEP_PERSIST || step == MASTER_STEP_FSYNC
        || step == MASTER_STEP_MEMORY) {
        /* Nice to know, never needed for the link (an ACL may refuse them). */
        if (reply->type == REDIS_REPLY_ERROR) {
            master_refused(m->master, step, reply->str);
        } else if (step == MASTER_STEP_PERSIST) {
            master_persist_info(m->master, reply);
        } else if (step == MASTER_STEP_FSYNC) {
            master_fsync_info(m->master, reply);
        } else {
            master_memory_info(m->master, reply);
        }
    } else if (reply->type == REDIS_REPLY_ERROR && step == MASTER_STEP_INFO
        && !master_conf->restart_quarantine) {
        /* Only needed for the quarantine (an ACL user without +info). */
        log_warn("master %s: INFO server refused (%.100s): restarts, and a server "
                 "listed twice in masters, will not be noticed", m->addr->spec, reply->str);
    } else if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(why, sizeof(why), "%s refused: %.100s",
                 step == MASTER_STEP_AUTH ? "AUTH" :
                 step == MASTER_STEP_INFO ? "INFO server" : "SCRIPT LOAD", reply->str);
        m->master->stats.errors++;
        master_drop(m, why);
        return;
    }
    if (step == MASTER_STEP_INFO && reply->type != REDIS_REPLY_ERROR) {
        if (master_info(m->master, reply, why, sizeof(why)) != 0) {
            m->master->stats.errors++;
            master_drop(m, why);
            return;
        }
    } else if (step >= 0) {
        if (reply->type != REDIS_REPLY_STRING || reply->len != 40) {
            m->master->stats.errors++;
            master_drop(m, "SCRIPT LOAD answered something other than a sha1");
            return;
        }
        memcpy(m->master->sha[step], reply->str, 40);
        m->master->sha[step][40] = '\0';
    }
    if (--m->pending == 0) {
        master_link_up(m);
    }
}

static void
master_connect_cb(struct redisev *ac, bool ok)
{
    struct master_link *m = master_by_ac(ac);
    const struct redisev *cac = ac;
    const char *user, *pass;
    int i, rc = REDIS_OK;

    if (m == NULL) {
        return;
    }
    if (!ok) {
        char why[MASTER_WHY_MAX];

        /* The link is freed when this callback returns. */
        m->ac = NULL;
        m->state = MASTER_DOWN;
        snprintf(why, sizeof(why), "%s",
                 redisev_errstr(cac)[0] ? redisev_errstr(cac) : "connect failed");
        if (redisev_tls_failed(cac)) {
            /* Counted each time; logged as a warning when the reason is new. */
            m->master->stats.tls_failures++;
            if (strcmp(m->why, why) != 0) {
                log_warn("master %s%s: %s", m->addr->spec, MASTER_LINK_WHAT(m), why);
            } else {
                log_debug("master %s%s: %s (again)", m->addr->spec, MASTER_LINK_WHAT(m), why);
            }
        } else {
            log_debug("master %s: connect failed: %s", m->addr->spec, why);
        }
        snprintf(m->why, sizeof(m->why), "%s", why);
        evtimer_del(m->timer);
        master_schedule_reconnect(m);
        return;
    }
    m->state = MASTER_HANDSHAKE;
    m->pending = 0;
    pass = master_conf->redis_password;
    user = master_conf->redis_username;
    if (pass != NULL && pass[0] != '\0') {
        if (user != NULL && user[0] != '\0') {
            rc = redisev_command(ac, master_handshake_cb,
                                   (void *)(intptr_t)MASTER_STEP_AUTH,
                                   "AUTH %s %s", user, pass);
        } else {
            rc = redisev_command(ac, master_handshake_cb,
                                   (void *)(intptr_t)MASTER_STEP_AUTH, "AUTH %s", pass);
        }
        m->pending++;
    }
    if (m->subscriber) {
        /* Up once the sentinel's subscription is confirmed (master_sub_cb). */
        if (rc == REDIS_OK) {
            rc = redisev_command(ac, NULL, NULL, "SUBSCRIBE %s",
                                   MASTER_SENTINEL_CHANNEL);
            m->pending++;
        }
    }
    if (!m->subscriber && rc == REDIS_OK) {
        /* Restarts, duplicates, the quarantine, eviction (master_info and after). */
        m->master->run_id_now = false;
        m->master->uptime_s = -1;
        m->master->aof = -1;
        m->master->appendfsync[0] = '\0';
        rc = redisev_command(ac, master_handshake_cb, (void *)(intptr_t)MASTER_STEP_INFO,
                               "INFO server");
        m->pending++;
        if (rc == REDIS_OK) {
            rc = redisev_command(ac, master_handshake_cb,
                                   (void *)(intptr_t)MASTER_STEP_PERSIST, "INFO persistence");
            m->pending++;
        }
        if (rc == REDIS_OK) {
            rc = redisev_command(ac, master_handshake_cb,
                                   (void *)(intptr_t)MASTER_STEP_FSYNC,
                                   "CONFIG GET appendfsync");
            m->pending++;
        }
        if (rc == REDIS_OK) {
            rc = redisev_command(ac, master_handshake_cb,
                                   (void *)(intptr_t)MASTER_STEP_MEMORY, "INFO memory");
            m->pending++;
        }
    }
    for (i = 0; !m->subscriber && i < nscripts && rc == REDIS_OK; i++) {
        rc = redisev_command(ac, master_handshake_cb, (void *)(intptr_t)i,
                               "SCRIPT LOAD %s", script_text[i]);
        m->pending++;
    }
    if (rc != REDIS_OK) {
        /* Cannot free the context here: let the timer drop it. */
        m->drop_now = true;
        snprintf(m->why, sizeof(m->why), "handshake could not be sent");
        event_active(m->timer, EV_TIMEOUT, 0);
    }
}

static void
master_disconnect_cb(struct redisev *ac)
{
    struct master_link *m = master_by_ac(ac);

    if (m == NULL) {
        return;     /* a link we dropped ourselves */
    }
    /* The link is freed when this returns. */
    m->ac = NULL;
    if (m->state == MASTER_HANDSHAKE && strncmp(redisev_errstr(ac), "TLS", 3) == 0) {
        /*
         * In TLS 1.3 the server checks the client's certificate after the
         * client finished its side of the handshake: a refusal comes as
         * an alert on the first read.  Counted and named as a handshake
         * failure.
         */
        char why[MASTER_WHY_MAX];

        m->master->stats.tls_failures++;
        snprintf(why, sizeof(why), "TLS handshake failed: %s", redisev_errstr(ac) + 5);
        if (strcmp(m->why, why) != 0) {
            log_warn("master %s%s: %s", m->addr->spec, MASTER_LINK_WHAT(m), why);
        }
        snprintf(m->why, sizeof(m->why), "%s", why);
    } else {
        snprintf(m->why, sizeof(m->why), "connection lost (%s)",
                 redisev_errstr(ac)[0] ? redisev_errstr(ac) : "closed by peer");
    }
    if (m->state == MASTER_UP) {
        log_warn("master %s%s: down: %s", m->addr->spec, MASTER_LINK_WHAT(m), m->why);
    }
    m->state = MASTER_DOWN;
    m->inflight = 0;
    master_link_lost(m);
    if (m->subscriber) {
        master_sub_link_down(m);
    }
    evtimer_del(m->timer);
    master_schedule_reconnect(m);
}

/*
 * The socket address of a Unix path or a numeric host; -1 when it does
 * not parse (the config checked it).
 */
static int
master_sockaddr(const struct conf_addr *addr, const char *numeric_host,
                struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    if (addr->is_unix) {
        struct sockaddr_un *un = (struct sockaddr_un *)ss;

        un->sun_family = AF_UNIX;
        snprintf(un->sun_path, sizeof(un->sun_path), "%s", addr->path);
        *len = sizeof(*un);
    } else if (strchr(numeric_host, ':') != NULL) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)addr->port);
        if (inet_pton(AF_INET6, numeric_host, &in6->sin6_addr) != 1) {
            return -1;
        }
        *len = sizeof(*in6);
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;

        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)addr->port);
        if (inet_pton(AF_INET, numeric_host, &in->sin_addr) != 1) {
            return -1;
        }
        *len = sizeof(*in);
    }
    return 0;
}

/* Connect to a Unix path or a numeric host (never a name: that blocks). */
static void
master_connect_to(struct master_link *m, const char *numeric_host)
{
    struct redisev_opts opts;
    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    struct redisev *ac;
    char why[MASTER_WHY_MAX];

    if (master_sockaddr(m->addr, numeric_host, &ss, &sslen) != 0) {
        snprintf(m->why, sizeof(m->why), "bad address %.80s", numeric_host);
        m->state = MASTER_DOWN;
        evtimer_del(m->timer);
        master_schedule_reconnect(m);
        return;
    }
    memset(&opts, 0, sizeof(opts));
    opts.addr = (const struct sockaddr *)&ss;
    opts.addrlen = sslen;
    opts.ssl = NULL;
    if (m->addr->tls) {
        const char *name = master_conf->redis_tls_server_name;

        opts.ssl = tls_client_session_new(name != NULL && name[0] != '\0' ? name
                                                                          : m->addr->host);
        if (opts.ssl == NULL) {
            snprintf(m->why, sizeof(m->why), "cannot create a TLS session");
            m->state = MASTER_DOWN;
            evtimer_del(m->timer);
            master_schedule_reconnect(m);
            return;
        }
    }
    opts.subscriber = m->subscriber;
    opts.on_connect = master_connect_cb;
    opts.on_disconnect = master_disconnect_cb;
    opts.on_push = master_sub_cb;
    opts.data = m;
    ac = redisev_connect(master_base, &opts, why, sizeof(why));
    if (ac == NULL) {
        snprintf(m->why, sizeof(m->why), "%s", why);
        log_debug("master %s: connect failed: %s", m->addr->spec, why);
        m->state = MASTER_DOWN;
        evtimer_del(m->timer);
        master_schedule_reconnect(m);
        return;
    }
    m->ac = ac;
    m->state = MASTER_CONNECTING;
    m->drop_now = false;
    if (!evtimer_pending(m->timer, NULL)) {
        master_schedule(m, master_conf->connect_timeout_ms);
    }
}

static void
master_resolved_cb(int err, struct evutil_addrinfo *res, void *arg)
{
    struct master_link *m = arg;
    char host[INET6_ADDRSTRLEN];
    const void *addr;

    if (err == EVUTIL_EAI_CANCEL) {
        return;     /* master_cancel_dns() did the bookkeeping */
    }
    m->resolving = false;
    m->dns_req = NULL;
    if (err != 0 || res == NULL) {
        snprintf(m->why, sizeof(m->why), "cannot resolve %.80s: %.50s", m->addr->host,
                 err != 0 ? evutil_gai_strerror(err) : "no address");
        log_debug("master %s: %s", m->addr->spec, m->why);
        if (res != NULL) {
            evutil_freeaddrinfo(res);
        }
        m->state = MASTER_DOWN;
        evtimer_del(m->timer);
        master_schedule_reconnect(m);
        return;
    }
    if (res->ai_family == AF_INET6) {
        addr = &((struct sockaddr_in6 *)res->ai_addr)->sin6_addr;
    } else {
        addr = &((struct sockaddr_in *)res->ai_addr)->sin_addr;
    }
    inet_ntop(res->ai_family, addr, host, sizeof(host));
    evutil_freeaddrinfo(res);
    master_connect_to(m, host);
}

/* Begin a connect attempt; the connect deadline covers DNS and handshake. */
static void
master_connect(struct master_link *m)
{
    struct evutil_addrinfo hints;
    struct evdns_getaddrinfo_request *req;

    if (m->addr->is_unix || master_host_is_numeric(m->addr->host)) {
        master_connect_to(m, m->addr->host);
        return;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    m->state = MASTER_CONNECTING;
    m->resolving = true;
    master_schedule(m, master_conf->connect_timeout_ms);
    req = evdns_getaddrinfo(master_dns, m->addr->host, NULL, &hints, master_resolved_cb, m);
    if (m->resolving) {
        m->dns_req = req;   /* NULL when the callback already ran */
    }
}

/*
 * A request was sent on k: count it, and make sure the link's timer
 * watches for silence (master_check_silence).
 */
static void
master_link_sent(struct master_link *k)
{
    if (k->inflight++ == 0) {
        k->progress_us = util_now_us();
    }
    if (!evtimer_pending(k->timer, NULL)) {
        master_schedule(k, master_conf->down_after_ms);
    }
}

/* A reply arrived on k at now_us; answered says whether it ends a request. */
static void
master_link_answered(struct master_link *k, bool answered, int64_t now_us)
{
    k->progress_us = now_us;
    if (answered && k->inflight > 0) {
        k->inflight--;
    }
}

/*
 * The timer of an up link.  A master that stopped answering while its
 * connection stays open (SIGSTOP, a partition without a reset) would
 * pile up requests for ever: with requests pending and no reply for
 * redis.down_after_ms, drop the link, so that the pending requests fail
 * at once and reconnecting (with backoff) begins.  Replies already in
 * the socket are read first, so that a daemon that was itself paused
 * does not blame its masters.
 */
static void
master_check_silence(struct master_link *k)
{
    int64_t silent_ms;
    char why[MASTER_WHY_MAX];

    if (k->ac != NULL && k->inflight > 0) {
        redisev_read(k->ac);
    }
    if (k->state != MASTER_UP || k->ac == NULL || k->inflight == 0) {
        return;
    }
    silent_ms = (util_now_us() - k->progress_us) / 1000;
    if (silent_ms < master_conf->down_after_ms) {
        master_schedule(k, master_conf->down_after_ms - silent_ms);
        return;
    }
    snprintf(why, sizeof(why), "no reply for %lld ms with %d requests pending "
             "(redis.down_after_ms)", (long long)silent_ms, k->inflight);
    master_drop(k, why);
}

/* The master's one timer: reconnect when down, or the connect deadline. */
static void
master_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct master_link *m = arg;
    char why[MASTER_WHY_MAX];

    (void)fd;
    (void)what;
    switch (m->state) {
    case MASTER_DOWN:
        master_connect(m);
        break;
    case MASTER_CONNECTING:
    case MASTER_HANDSHAKE:
        if (m->drop_now) {
            snprintf(why, sizeof(why), "%s", m->why);
        } else if (m->ac != NULL && redisev_tls_handshaking(m->ac)) {
            /* A plain Redis waits for the end of a line that never comes. */
            m->master->stats.tls_failures++;
            snprintf(why, sizeof(why), "TLS handshake failed: no answer within %lld ms "
                     "(redis.connect_timeout_ms); is it a TLS port?",
                     (long long)master_conf->connect_timeout_ms);
        } else {
            snprintf(why, sizeof(why), "connect timeout after %lld ms",
                     (long long)master_conf->connect_timeout_ms);
        }
        master_drop(m, why);
        break;
    case MASTER_UP:
        if (m->drop_now) {
            m->drop_now = false;
            snprintf(why, sizeof(why), "%s", m->why);
            master_drop(m, why);
            break;
        }
        master_check_silence(m);
        break;
    }
}

/* Prepare one link of m; -1 when out of memory. */
static int
master_link_init(struct master *m, struct master_link *k, bool subscriber)
{
    k->master = m;
    k->addr = m->addr;
    k->subscriber = subscriber;
    k->state = MASTER_DOWN;
    k->backoff_ms = MASTER_BACKOFF_MIN_MS;
    snprintf(k->why, sizeof(k->why), "not connected yet");
    k->timer = evtimer_new(master_base, master_timer_cb, k);
    if (k->timer == NULL) {
        log_error("out of memory allocating a timer");
        return -1;
    }
    return 0;
}

int
master_start(struct event_base *base, const struct conf *conf)
{
    struct timeval tv;
    size_t i;

    master_base = base;
    master_conf = conf;
    nmasters = conf->nmasters;
    masters = calloc(nmasters, sizeof(*masters));
    if (masters == NULL) {
        log_error("out of memory allocating %zu masters", nmasters);
        return -1;
    }
    for (i = 0; i < nmasters; i++) {
        struct master *m = &masters[i];

        m->index = i;
        m->addr = &conf->masters[i];
        m->stats.rtt_us = -1;
        m->stats.duplicate_of = -1;
        m->uptime_s = -1;
        m->aof = -1;
        if (master_link_init(m, &m->cmd, false) != 0
            || master_link_init(m, &m->sub, true) != 0) {
            return -1;
        }
        m->quarantine_timer = evtimer_new(base, master_quarantine_cb, m);
        if (m->quarantine_timer == NULL) {
            log_error("out of memory allocating a timer");
            return -1;
        }
    }
    for (i = 0; i < nmasters; i++) {
        if (!masters[i].addr->is_unix && !master_host_is_numeric(masters[i].addr->host)
            && master_dns == NULL) {
            master_dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
            if (master_dns == NULL) {
                log_error("cannot start the DNS resolver for master host names");
                return -1;
            }
        }
    }
    master_keeper = event_new(base, -1, EV_PERSIST, master_keeper_cb, NULL);
    if (master_keeper == NULL) {
        log_error("out of memory allocating a timer");
        return -1;
    }
    tv.tv_sec = 0;
    tv.tv_usec = MASTER_CLOCK_TICK_MS * 1000;
    event_add(master_keeper, &tv);
    for (i = 0; i < nmasters; i++) {
        master_connect(&masters[i].cmd);
        master_connect(&masters[i].sub);
    }
    return 0;
}

void
master_set_conf(const struct conf *conf)
{
    int64_t now = util_now_us();
    size_t i, ended = 0, clocked = 0;
    bool check_on = conf->clock_check && !master_conf->clock_check;

    master_conf = conf;
    for (i = 0; i < nmasters; i++) {
        if (check_on) {
            /* Turned on: a reference read long ago starts over (drift.h). */
            drift_forget(&masters[i].clock);
        }
        masters[i].addr = &conf->masters[i];
        masters[i].cmd.addr = masters[i].addr;
        masters[i].sub.addr = masters[i].addr;
        if (!conf->restart_quarantine && masters[i].quarantine_until_us > now) {
            /* Turned off: the operator says no master lost locks. */
            masters[i].quarantine_until_us = 0;
            ended++;
        }
        if (!conf->clock_check && masters[i].clock_until_us > now) {
            masters[i].clock_until_us = 0;
            clocked++;
        }
        master_quarantine_arm(&masters[i], now);
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
master_set_quarantine_ms(int64_t ms)
{
    master_quarantine_ms = ms;
}

/* Close one link at exit (pending callbacks run with NULL). */
static void
master_link_stop(struct master_link *k)
{
    struct redisev *ac = k->ac;

    k->ac = NULL;
    k->state = MASTER_DOWN;
    master_cancel_dns(k);
    snprintf(k->why, sizeof(k->why), "daemon stopping");
    if (ac != NULL) {
        redisev_close(ac);
    }
    if (k->timer != NULL) {
        event_free(k->timer);
        k->timer = NULL;
    }
}

void
master_stop(void)
{
    struct master_chan *ch;
    size_t i;

    if (master_keeper != NULL) {
        event_free(master_keeper);
        master_keeper = NULL;
    }
    for (i = 0; i < nmasters; i++) {
        struct master_req *queued = masters[i].batch.head;

        /* Down first, so that no callback below queues anything more here. */
        master_link_stop(&masters[i].cmd);
        if (queued != NULL) {
            flush_leave(&masters[i].batch.fe);
            masters[i].batch.head = NULL;
            masters[i].batch.tail = &masters[i].batch.head;
            masters[i].batch.n = 0;
            master_batch_fail(&masters[i], queued, "the daemon is stopping");
        }
        master_link_stop(&masters[i].sub);
        if (masters[i].quarantine_timer != NULL) {
            event_free(masters[i].quarantine_timer);
        }
    }
    while ((ch = TAILQ_FIRST(&master_chans)) != NULL) {
        TAILQ_REMOVE(&master_chans, ch, link);
        free(ch);
    }
    master_nwanted = 0;
    if (batch_cmd != NULL) {
        redisFreeCommand(batch_cmd);
        batch_cmd = NULL;
    }
    free(masters);
    masters = NULL;
    nmasters = 0;
    if (master_dns != NULL) {
        evdns_base_free(master_dns, 0);
        master_dns = NULL;
    }
}

/*
 * Subscriptions.
 */

/* Send (UN)SUBSCRIBE for ch on link k; false when it could not be sent. */
static bool
master_sub_send(struct master_link *k, struct master_chan *ch, bool subscribe)
{
    const char *argv[2];
    size_t lens[2];

    argv[0] = subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE";
    lens[0] = strlen(argv[0]);
    argv[1] = ch->name;
    lens[1] = ch->len;
    /* Answered by a push (master_sub_cb), not through the FIFO. */
    if (redisev_command_argv(k->ac, NULL, NULL, 2, argv, lens) != 0) {
        return false;
    }
    master_link_sent(k);
    return true;
}

static void
master_chan_free_if_done(struct master_chan *ch)
{
    size_t i;

    if (ch->wanted) {
        return;
    }
    for (i = 0; i < nmasters; i++) {
        if (ch->state[i] != MASTER_SUB_NONE) {
            return;
        }
    }
    TAILQ_REMOVE(&master_chans, ch, link);
    free(ch);
}

/* Bring ch on master i to what is wanted, when nothing is in flight. */
static void
master_chan_sync(struct master_chan *ch, size_t i)
{
    struct master_link *k = &masters[i].sub;

    if (k->state != MASTER_UP || k->ac == NULL) {
        return;     /* re-subscribed when the link comes up */
    }
    if (ch->wanted && ch->state[i] == MASTER_SUB_NONE) {
        if (master_sub_send(k, ch, true)) {
            ch->state[i] = MASTER_SUB_SUBSCRIBING;
        }
    } else if (!ch->wanted && ch->state[i] == MASTER_SUB_ON) {
        if (master_sub_send(k, ch, false)) {
            ch->state[i] = MASTER_SUB_LEAVING;
        }
    }
}

static struct master_chan *
master_chan_find(const char *name, size_t len)
{
    struct master_chan *ch;

    TAILQ_FOREACH(ch, &master_chans, link) {
        if (ch->len == len && memcmp(ch->name, name, len) == 0) {
            return ch;
        }
    }
    return NULL;
}

static void
master_sub_link_up(struct master_link *k)
{
    struct master_chan *ch;

    TAILQ_FOREACH(ch, &master_chans, link) {
        master_chan_sync(ch, k->master->index);
    }
}

static void
master_sub_link_down(struct master_link *k)
{
    struct master_chan *ch, *next;
    size_t i = k->master->index;

    for (ch = TAILQ_FIRST(&master_chans); ch != NULL; ch = next) {
        next = TAILQ_NEXT(ch, link);
        ch->state[i] = MASTER_SUB_NONE;
        master_chan_free_if_done(ch);
    }
}

/*
 * Every answer on a subscriber link: the sentinel's confirmation (the
 * end of the handshake), a channel's (un)subscribe confirmation, or a
 * message.
 */
static void
master_sub_cb(struct redisev *ac, void *r, void *privdata)
{
    redisReply *reply = r, *kind, *chan;
    struct master_link *k = privdata;
    struct master_chan *ch;
    size_t i;

    if (reply == NULL || k->ac != ac) {
        return;     /* the link was dropped; the drop reset the states */
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3
        || (kind = reply->element[0])->type != REDIS_REPLY_STRING
        || (chan = reply->element[1])->type != REDIS_REPLY_STRING) {
        k->master->stats.errors++;
        log_warn("master %s (subscriber): unexpected reply of type %d",
                 k->addr->spec, reply->type);
        return;
    }
    master_link_answered(k, k->state == MASTER_UP && strcmp(kind->str, "message") != 0,
                         util_now_us());
    if (k->state == MASTER_HANDSHAKE) {
        if (strcmp(kind->str, "subscribe") == 0
            && strcmp(chan->str, MASTER_SENTINEL_CHANNEL) == 0 && --k->pending == 0) {
            master_link_up(k);
        }
        return;
    }
    if (strcmp(kind->str, "message") == 0) {
        /* The receiver looks the name up anyway: no channel lookup here. */
        if (master_message_cb != NULL && reply->element[2]->type == REDIS_REPLY_STRING) {
            master_message_cb(chan->str, chan->len, reply->element[2]->str,
                              reply->element[2]->len);
        }
        return;
    }
    ch = master_chan_find(chan->str, chan->len);
    i = k->master->index;
    if (ch == NULL) {
        return;
    }
    if (strcmp(kind->str, "subscribe") == 0) {
        ch->state[i] = MASTER_SUB_ON;
    } else if (strcmp(kind->str, "unsubscribe") == 0) {
        ch->state[i] = MASTER_SUB_NONE;
    }
    master_chan_sync(ch, i);
    master_chan_free_if_done(ch);
}

void
master_on_message(master_message_fn cb)
{
    master_message_cb = cb;
}

int
master_subscribe(const char *channel, size_t len)
{
    struct master_chan *ch = master_chan_find(channel, len);
    size_t i;

    if (ch == NULL) {
        ch = calloc(1, sizeof(*ch) + len + 1);
        if (ch == NULL) {
            return -1;
        }
        memcpy(ch->name, channel, len);
        ch->len = len;
        TAILQ_INSERT_TAIL(&master_chans, ch, link);
    }
    if (ch->wanted++ == 0) {
        master_nwanted++;
    }
    for (i = 0; i < nmasters; i++) {
        master_chan_sync(ch, i);
    }
    return 0;
}

void
master_unsubscribe(const char *channel, size_t len)
{
    struct master_chan *ch = master_chan_find(channel, len);
    size_t i;

    if (ch == NULL || ch->wanted == 0 || --ch->wanted > 0) {
        return;     /* another user of the channel still wants it */
    }
    master_nwanted--;
    for (i = 0; i < nmasters; i++) {
        master_chan_sync(ch, i);
    }
    master_chan_free_if_done(ch);
}

size_t
master_subscriptions(void)
{
    return master_nwanted;
}

size_t
master_count(void)
{
    return nmasters;
}

struct master *
master_at(size_t i)
{
    return &masters[i];
}

size_t
master_index(const struct master *m)
{
    return m->index;
}

const char *
master_name(const struct master *m)
{
    return m->addr->spec;
}

void
master_tally(struct master_summary *sum)
{
    int64_t now = util_now_us(), left;
    size_t i;

    memset(sum, 0, sizeof(*sum));
    for (i = 0; i < nmasters; i++) {
        sum->evicting += masters[i].stats.evicting;
        if (masters[i].cmd.state != MASTER_UP) {
            continue;
        }
        sum->up++;
        left = master_any_quarantine_left_ms(&masters[i], now);
        if (left > sum->quarantine_left_ms) {
            sum->quarantine_left_ms = left;
        }
        sum->quarantined += left > 0;
        sum->duplicate += masters[i].stats.duplicate_of >= 0;
        sum->counted += left == 0 && masters[i].stats.duplicate_of < 0;
    }
}

int
master_duplicate_of(const struct master *m)
{
    return m->stats.duplicate_of;
}

const char *
master_run_id(const struct master *m)
{
    return m->run_id;
}

int64_t
master_quarantine_left_ms(const struct master *m, int64_t now_us)
{
    int64_t left = m->quarantine_until_us - now_us;

    return left > 0 ? (left + 999) / 1000 : 0;
}

int64_t
master_clock_quarantine_left_ms(const struct master *m, int64_t now_us)
{
    int64_t left = m->clock_until_us - now_us;

    return left > 0 ? (left + 999) / 1000 : 0;
}

/* The longer of m's two quarantines left at now_us, ms; 0: its answers count. */
static int64_t
master_any_quarantine_left_ms(const struct master *m, int64_t now_us)
{
    int64_t restart = master_quarantine_left_ms(m, now_us);
    int64_t clock = master_clock_quarantine_left_ms(m, now_us);

    return restart > clock ? restart : clock;
}

void
master_get_stats(const struct master *m, struct master_stats *st)
{
    *st = m->stats;
    st->state = m->cmd.state;
    st->quarantine_ms = master_any_quarantine_left_ms(m, util_now_us());
    st->sub_up = m->sub.state == MASTER_UP;
}

const char *
master_status_text(const struct master *m)
{
    struct master *mm = (struct master *)m;
    int64_t left;

    switch (m->cmd.state) {
    case MASTER_DOWN:
        snprintf(mm->status, sizeof(mm->status), "down (%s)", m->cmd.why);
        break;
    case MASTER_CONNECTING:
        snprintf(mm->status, sizeof(mm->status), "connecting");
        break;
    case MASTER_HANDSHAKE:
        snprintf(mm->status, sizeof(mm->status), "connecting (handshake)");
        break;
    case MASTER_UP:
        if (m->cmd.drop_now) {
            snprintf(mm->status, sizeof(mm->status), "being dropped (%s)", m->cmd.why);
        } else if ((left = master_clock_quarantine_left_ms(m, util_now_us())) > 0) {
            snprintf(mm->status, sizeof(mm->status), "quarantined after a clock step "
                     "(%lld ms left)", (long long)left);
        } else if ((left = master_quarantine_left_ms(m, util_now_us())) > 0) {
            snprintf(mm->status, sizeof(mm->status), "quarantined after a restart "
                     "(%lld ms left)", (long long)left);
        } else {
            snprintf(mm->status, sizeof(mm->status), "up");
        }
        break;
    }
    return m->status;
}

static void master_reply_cb(struct redisev *ac, void *r, void *privdata);

/* The answer of a script whose body answered nil (the wrapper's table ends before it). */
static redisReply master_nil_answer = { .type = REDIS_REPLY_NIL };

/*
 * A master's clock stepped (drift.h): its answers stop counting toward
 * any quorum for as long as a restart's would (lock.max_ttl_ms plus
 * drift): by then every lease that may have lost its key on it early
 * has ended everywhere.  Logged and counted.
 */
static void
master_clock_stepped(struct master *m, const struct drift_step *st, int64_t now)
{
    int64_t until = now + master_quarantine_ms * 1000, left_ms = master_quarantine_ms;
    char when[32];

    m->stats.clock_steps++;
    if (until > m->clock_until_us) {
        m->clock_until_us = until;
    }
    util_clock_after(left_ms, when, sizeof(when));
    log_warn("master %s: its clock %s by %lld ms: it advanced %lld ms while this daemon's "
             "advanced %lld ms (round trips and %lld ms of drift allowed), so lock keys on "
             "it %s; its answers do not count toward a quorum for %lld ms, "
             "until about %s (lock.clock_check)", m->addr->spec,
             st->step_us > 0 ? "jumped ahead" : "went back",
             (long long)((st->step_us > 0 ? st->step_us : -st->step_us) / 1000),
             (long long)(st->elapsed_us / 1000), (long long)(st->since_us / 1000),
             (long long)(st->allowed_us / 1000),
             st->step_us > 0 ? "may have expired early" : "may expire late",
             (long long)left_ms, when);
    master_quarantine_arm(m, now);
}

/*
 * A reading of m's clock (clock_us, its TIME) by a request sent at
 * sent_us and answered at now (monotonic): compare it with the last one
 * (daemon/drift.h), the drift allowance growing up to the shortest
 * lease's; with lock.clock_check a step starts the clock quarantine.
 * The reference follows the master with the check off too.
 */
static void
master_clock_note(struct master *m, int64_t clock_us, int64_t sent_us, int64_t now)
{
    struct drift_step st;

    if (drift_check(&m->clock, clock_us, sent_us, now, master_conf->drift_factor,
                    master_conf->min_ttl_ms * 1000, &st)
        && master_conf->clock_check) {
        master_clock_stepped(m, &st, now);
    }
}

/*
 * Take the wrapper off a script's answer (MASTER_CLOCK_HEAD) and check
 * the master's clock in it against the daemon's: the request was sent
 * at sent_us and answered at now (monotonic).  Returns the body's
 * answer, or NULL when reply is not a wrapped answer (logged once per
 * connection).  With lock.clock_check a step starts the clock
 * quarantine before the caller sees the answer, so that this very
 * answer is not counted (daemon/round.c asks at each answer).
 */
static const redisReply *
master_clock_read(struct master *m, const redisReply *reply, int64_t sent_us, int64_t now)
{
    int64_t clock_us = -1;

    if (reply->type == REDIS_REPLY_ARRAY && (reply->elements == 1 || reply->elements == 2)
        && reply->element[0]->type == REDIS_REPLY_INTEGER) {
        clock_us = reply->element[0]->integer;
    }
    if (clock_us <= 0) {
        if (!m->clock_bad_logged) {
            m->clock_bad_logged = true;
            log_warn("master %s: a script's answer did not carry the master's TIME (a reply "
                     "of type %d with %zu elements): not counted; is something other than "
                     "Redis answering on this address?", m->addr->spec, reply->type,
                     reply->type == REDIS_REPLY_ARRAY ? reply->elements : 0);
        }
        return NULL;
    }
    master_clock_note(m, clock_us, sent_us, now);
    return reply->elements == 2 ? reply->element[1] : &master_nil_answer;
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
    long long sec, usec;
    char *end;

    m->clock_probing = false;
    if (m->cmd.ac == ac) {
        master_link_answered(&m->cmd, true, now);
    }
    if (reply == NULL) {
        return;     /* the link went down; the failure is the scripts' to report */
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2
        || reply->element[0]->type != REDIS_REPLY_STRING
        || reply->element[1]->type != REDIS_REPLY_STRING
        || (sec = strtoll(reply->element[0]->str, &end, 10)) <= 0 || *end != '\0'
        || (usec = strtoll(reply->element[1]->str, &end, 10)) < 0 || *end != '\0'
        || usec >= 1000000) {
        if (!m->clock_bad_logged) {
            m->clock_bad_logged = true;
            log_warn("master %s: TIME answered something other than {seconds, "
                     "microseconds} (a reply of type %d): its clock is read from the "
                     "scripts' answers only", m->addr->spec, reply->type);
        }
        return;
    }
    master_clock_note(m, (int64_t)sec * 1000000 + usec, m->clock_probe_sent_us, now);
}

/*
 * The clock keeper (lock.clock_check): every master whose last clock
 * reading is older than MASTER_CLOCK_FRESH_MS is sent a TIME, so that
 * the next answer of a round is compared with a young reference and
 * the drift allowance stays small (daemon/drift.h).  A daemon that is
 * busy reads every clock from the rounds' answers and sends none.
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
    if (!master_conf->clock_check) {
        return;
    }
    for (i = 0; i < nmasters; i++) {
        struct master *m = &masters[i];

        if (m->cmd.state != MASTER_UP || m->cmd.ac == NULL || m->cmd.drop_now
            || m->clock_probing
            || (m->clock.set && now - m->clock.read_us < MASTER_CLOCK_FRESH_MS * 1000)) {
            continue;
        }
        m->clock_probe_sent_us = now;
        if (redisev_command_argv(m->cmd.ac, master_keeper_reply_cb, m, 1, argv, lens) == 0) {
            m->clock_probing = true;
            master_link_sent(&m->cmd);
        }
    }
}

/* shared holds an EVALSHA that m can be sent as it is. */
static bool
master_shared_fits(const struct master_shared *shared, const struct master *m, int script)
{
    return shared != NULL && shared->cmd != NULL && strcmp(shared->sha, m->sha[script]) == 0;
}

/*
 * Send req as EVALSHA, or as EVAL when use_eval.  shared, when not NULL
 * and use_eval is false, holds (or receives) the EVALSHA formatted once
 * for every master.  Returns REDIS_OK/ERR.
 */
static int
master_send(struct master *m, struct master_req *req, bool use_eval,
            struct master_shared *shared)
{
    const char *stack_argv[MASTER_ARGV_STACK];
    size_t stack_lens[MASTER_ARGV_STACK];
    const char **argv = stack_argv;
    size_t *lens = stack_lens;
    size_t argc = req->nargs + 3, i;
    char nkeys[24];
    int rc;

    if (use_eval) {
        shared = NULL;      /* the script's text, for this master alone */
    }
    if (master_shared_fits(shared, m, req->script)) {
        /* Formatted for an earlier master of the round: only copied. */
        return redisev_formatted(m->cmd.ac, master_reply_cb, req, shared->cmd,
                                          shared->len);
    }
    if (argc > MASTER_ARGV_STACK) {
        argv = malloc(argc * sizeof(*argv));
        lens = malloc(argc * sizeof(*lens));
        if (argv == NULL || lens == NULL) {
            free(argv);
            free(lens);
            return REDIS_ERR;
        }
    }
    argv[0] = use_eval ? "EVAL" : "EVALSHA";
    lens[0] = strlen(argv[0]);
    argv[1] = use_eval ? script_text[req->script] : m->sha[req->script];
    lens[1] = strlen(argv[1]);
    lens[2] = (size_t)snprintf(nkeys, sizeof(nkeys), "%zu", req->nkeys);
    argv[2] = nkeys;
    for (i = 0; i < req->nargs; i++) {
        argv[i + 3] = req->args[i];
        lens[i + 3] = req->lens[i];
    }
    if (shared != NULL && shared->cmd == NULL) {
        int len = redisFormatCommandArgv(&shared->cmd, (int)argc, argv, lens);

        if (len >= 0) {
            shared->len = (size_t)len;
            memcpy(shared->sha, m->sha[req->script], sizeof(shared->sha));
        } else {
            shared->cmd = NULL;     /* out of memory: each master formats its own */
        }
    }
    if (master_shared_fits(shared, m, req->script)) {
        rc = redisev_formatted(m->cmd.ac, master_reply_cb, req, shared->cmd,
                                        shared->len);
    } else {
        rc = redisev_command_argv(m->cmd.ac, master_reply_cb, req, (int)argc, argv, lens);
    }
    if (argv != stack_argv) {
        free(argv);
        free(lens);
    }
    return rc;
}

/*
 * A request on ac got no reply (the link was lost or dropped): why, in
 * why, and from now on the master is down when ac is its live link
 * (these callbacks run before the disconnect callback, so rounds started
 * in them see it down too).
 */
static void
master_request_lost(struct master *m, struct redisev *ac, char *why, size_t size)
{
    m->stats.errors++;
    if (m->cmd.ac != ac && m->cmd.why[0] != '\0') {
        /* We dropped the link (master_drop): its reason. */
        snprintf(why, size, "%s", m->cmd.why);
    } else {
        snprintf(why, size, "connection lost (%s)",
                 redisev_errstr(ac)[0] ? redisev_errstr(ac) : "closed");
    }
    if (m->cmd.ac == ac && m->cmd.state == MASTER_UP) {
        log_warn("master %s: down: %s", m->addr->spec, why);
        m->cmd.state = MASTER_DOWN;
        master_link_lost(&m->cmd);
        snprintf(m->cmd.why, sizeof(m->cmd.why), "%s", why);
    }
}

/*
 * reply says the master's script cache was flushed (NOSCRIPT) and the
 * request was not retried yet on its live link ac: mark it retried; the
 * caller sends the script's text once, within the same deadline.
 */
static bool
master_noscript(struct master *m, const struct redisev *ac, const redisReply *reply,
                bool *retried)
{
    if (reply->type != REDIS_REPLY_ERROR || *retried || m->cmd.ac != ac
        || strncmp(reply->str, "NOSCRIPT", 8) != 0) {
        return false;
    }
    *retried = true;
    log_debug("master %s: NOSCRIPT, retrying with EVAL", m->addr->spec);
    return true;
}

static void
master_reply_cb(struct redisev *ac, void *r, void *privdata)
{
    redisReply *reply = r;
    const redisReply *answer;
    struct master_req *req = privdata;
    struct master *m = req->m;
    int64_t now = util_now_us();
    char why[MASTER_WHY_MAX];

    if (m->cmd.ac == ac) {
        master_link_answered(&m->cmd, true, now);
    }
    if (reply == NULL) {
        master_request_lost(m, ac, why, sizeof(why));
        req->cb(m, NULL, why, req->arg);
        free(req);
        return;
    }
    m->stats.rtt_us = now - req->sent_us;
    if (master_noscript(m, ac, reply, &req->retried)
        && master_send(m, req, true, NULL) == REDIS_OK) {
        master_link_sent(&m->cmd);
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        m->stats.errors++;
        req->cb(m, (const struct master_reply *)reply, NULL, req->arg);
    } else if (!script_clock[req->script]) {
        req->cb(m, (const struct master_reply *)reply, NULL, req->arg);
    } else if ((answer = master_clock_read(m, reply, req->sent_us, now)) == NULL) {
        m->stats.errors++;
        req->cb(m, NULL, "answered without its clock (the script's wrapper is missing)",
                req->arg);
    } else {
        req->cb(m, (const struct master_reply *)answer, NULL, req->arg);
    }
    free(req);
}

/* Each request of the list items gets cb(m, NULL, why) and is freed. */
static void
master_batch_fail(struct master *m, struct master_req *items, const char *why)
{
    struct master_req *req;

    while ((req = items) != NULL) {
        items = req->next;
        req->cb(m, NULL, why, req->arg);
        free(req);
    }
}

/* v in decimal into out (room for 20 digits); returns the digits' count. */
static size_t
master_decimal(char *out, size_t v)
{
    char rev[24];
    size_t n = 0, i;

    do {
        rev[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    for (i = 0; i < n; i++) {
        out[i] = rev[n - 1 - i];
    }
    return n;
}

/* Whether the n bytes at *p are mark, v in decimal and CRLF; moves *p past them. */
static bool
master_resp_head(const char **p, const char *end, char mark, size_t v)
{
    char head[32];
    size_t n = 0;

    head[n++] = mark;
    n += master_decimal(head + n, v);
    head[n++] = '\r';
    head[n++] = '\n';
    if ((size_t)(end - *p) < n || memcmp(*p, head, n) != 0) {
        return false;
    }
    *p += n;
    return true;
}

/* Whether cmd (len bytes, as redisFormatCommandArgv made it) is argv exactly. */
static bool
master_resp_is(const char *cmd, size_t len, size_t argc, const char **argv,
               const size_t *lens)
{
    const char *p = cmd, *end = cmd + len;
    size_t i;

    if (!master_resp_head(&p, end, '*', argc)) {
        return false;
    }
    for (i = 0; i < argc; i++) {
        if (!master_resp_head(&p, end, '$', lens[i]) || (size_t)(end - p) < lens[i] + 2
            || memcmp(p, argv[i], lens[i]) != 0 || p[lens[i]] != '\r'
            || p[lens[i] + 1] != '\n') {
            return false;
        }
        p += lens[i] + 2;
    }
    return p == end;
}

/*
 * Send b: EVALSHA (or EVAL when use_eval) of the batch script, its KEYS
 * every request's keys in order, its ARGV per request the operation, how
 * many keys and arguments it has, and its arguments
 * (daemon/scripts/batch.lua).  The bytes of the last batch formatted are
 * sent again when they are this one's (the other masters of the same
 * loop iteration), compared byte for byte, so that a batch is formatted
 * once for all of them.  Returns REDIS_OK/ERR.
 */
static int
master_batch_write(struct master *m, struct master_batch_req *b, bool use_eval)
{
    const struct master_req *req;
    size_t argc = 3 + 3 * b->n, nkeys = 0, i, j, k, a;
    const char **argv;
    size_t *lens;
    char (*nums)[3][24];        /* the call's key count, then per request its two counts */
    char *cmd;
    void *block;
    int rc, len;

    for (req = b->items; req != NULL; req = req->next) {
        argc += req->nargs;
        nkeys += req->nkeys;
    }
    block = malloc(argc * (sizeof(*argv) + sizeof(*lens)) + (b->n + 1) * sizeof(*nums));
    if (block == NULL) {
        return REDIS_ERR;
    }
    argv = block;
    lens = (size_t *)(argv + argc);
    nums = (char (*)[3][24])(lens + argc);
    argv[0] = use_eval ? "EVAL" : "EVALSHA";
    lens[0] = strlen(argv[0]);
    argv[1] = use_eval ? script_text[script_batch] : m->sha[script_batch];
    lens[1] = strlen(argv[1]);
    argv[2] = nums[0][0];
    lens[2] = master_decimal(nums[0][0], nkeys);
    k = 3;
    a = 3 + nkeys;
    for (req = b->items, i = 1; req != NULL; req = req->next, i++) {
        for (j = 0; j < req->nkeys; j++) {
            argv[k] = req->args[j];
            lens[k++] = req->lens[j];
        }
        argv[a] = script_op[req->script];
        lens[a++] = strlen(script_op[req->script]);
        argv[a] = nums[i][0];
        lens[a++] = master_decimal(nums[i][0], req->nkeys);
        argv[a] = nums[i][1];
        lens[a++] = master_decimal(nums[i][1], req->nargs - req->nkeys);
        for (j = req->nkeys; j < req->nargs; j++) {
            argv[a] = req->args[j];
            lens[a++] = req->lens[j];
        }
    }
    if (batch_cmd != NULL && master_resp_is(batch_cmd, batch_cmd_len, argc, argv, lens)) {
        rc = redisev_formatted(m->cmd.ac, master_batch_cb, b, batch_cmd, batch_cmd_len);
    } else if ((len = redisFormatCommandArgv(&cmd, (int)argc, argv, lens)) < 0) {
        rc = REDIS_ERR;
    } else {
        rc = redisev_formatted(m->cmd.ac, master_batch_cb, b, cmd, (size_t)len);
        if (batch_cmd != NULL) {
            redisFreeCommand(batch_cmd);
        }
        batch_cmd = cmd;
        batch_cmd_len = (size_t)len;
    }
    free(block);
    return rc;
}

/*
 * The answer to a batch: each request gets its own element, as the
 * answer its script alone would have given (the clock, read once for the
 * whole batch, is checked once); a reply without an element per request
 * fails them all.
 */
static void
master_batch_cb(struct redisev *ac, void *r, void *privdata)
{
    redisReply *reply = r;
    const redisReply *answer, *e;
    struct master_batch_req *b = privdata;
    struct master *m = b->m;
    struct master_req *req;
    int64_t now = util_now_us();
    char why[MASTER_WHY_MAX];
    size_t i;

    if (m->cmd.ac == ac) {
        master_link_answered(&m->cmd, true, now);
    }
    if (reply == NULL) {
        master_request_lost(m, ac, why, sizeof(why));
        master_batch_fail(m, b->items, why);
        free(b);
        return;
    }
    m->stats.rtt_us = now - b->sent_us;
    if (master_noscript(m, ac, reply, &b->retried) && master_batch_write(m, b, true) == REDIS_OK) {
        master_link_sent(&m->cmd);
        return;
    }
    /* An error for the whole call is every request's answer. */
    answer = reply->type == REDIS_REPLY_ERROR ? reply : master_clock_read(m, reply, b->sent_us,
                                                                            now);
    if (answer == NULL) {
        snprintf(why, sizeof(why), "answered without its clock (the script's wrapper is "
                 "missing)");
    } else if (answer != reply
               && (answer->type != REDIS_REPLY_ARRAY || answer->elements != b->n)) {
        snprintf(why, sizeof(why), "answered a batch of %zu requests with a reply of type "
                 "%d and %zu elements", b->n, answer->type,
                 answer->type == REDIS_REPLY_ARRAY ? answer->elements : (size_t)0);
        answer = NULL;
    }
    if (answer == NULL) {
        m->stats.errors++;
        master_batch_fail(m, b->items, why);
        free(b);
        return;
    }
    for (i = 0; (req = b->items) != NULL; i++) {
        b->items = req->next;
        e = answer == reply ? reply : answer->element[i];
        if (e->type == REDIS_REPLY_ERROR) {
            m->stats.errors++;
        }
        req->cb(m, (const struct master_reply *)e, NULL, req->arg);
        free(req);
    }
    free(b);
}

/*
 * Send what m's batch holds, now: one request as its own script, more as
 * one call of the batch script.  Called at the end of the loop iteration
 * (in_loop: callbacks may run, so when m is not up, or the write fails,
 * each request gets its callback with the reason), and before anything
 * else is sent on the command link, from inside a caller's request
 * (then nothing fails here: what cannot be sent stays queued for the
 * iteration's end), so that the master sees the requests in the order
 * they were made.
 */
static void
master_batch_send(struct master *m, bool in_loop)
{
    struct master_batch *q = &m->batch;
    struct master_batch_req *b = NULL;
    struct master_req *items = q->head, *req;
    int64_t now = util_now_us();
    bool up = m->cmd.state == MASTER_UP && m->cmd.ac != NULL && !m->cmd.drop_now;
    int rc = REDIS_ERR;

    if (items == NULL || (!up && !in_loop)) {
        return;
    }
    if (up) {
        for (req = items; req != NULL; req = req->next) {
            req->sent_us = now;
        }
        if (q->n == 1) {
            rc = master_send(m, items, false, NULL);
        } else if ((b = malloc(sizeof(*b))) != NULL) {
            b->m = m;
            b->items = items;
            b->n = q->n;
            b->retried = false;
            b->sent_us = now;
            if ((rc = master_batch_write(m, b, false)) != REDIS_OK) {
                free(b);
            }
        }
        if (rc != REDIS_OK && !in_loop) {
            return;     /* stays queued: the iteration's end tries again */
        }
    }
    flush_leave(&q->fe);
    q->head = NULL;
    q->tail = &q->head;
    q->n = 0;
    if (rc == REDIS_OK) {
        master_link_sent(&m->cmd);
        return;
    }
    m->stats.errors++;
    master_batch_fail(m, items, up ? "out of memory, or the connection refused the write"
                                   : master_status_text(m));
}

/* The flush list's writer for a master's batch. */
static void
master_batch_flush(struct flush_entry *fe)
{
    master_batch_send((struct master *)((char *)fe - offsetof(struct master, batch.fe)), true);
}

/* Queue req (of a batched script) in m's batch, sent at the iteration's end. */
static void
master_batch_add(struct master *m, struct master_req *req)
{
    struct master_batch *q = &m->batch;

    if (q->tail == NULL) {
        q->tail = &q->head;
        flush_entry_init(&q->fe, master_batch_flush);
    }
    *q->tail = req;
    q->tail = &req->next;
    q->n++;
    flush_join(&q->fe);
    if (q->n >= MASTER_BATCH_MAX) {
        master_batch_send(m, false);
    }
}

void
master_shared_free(struct master_shared *shared)
{
    if (shared->cmd != NULL) {
        redisFreeCommand(shared->cmd);
        shared->cmd = NULL;
    }
}

int
master_eval(struct master *m, int script, size_t nkeys, size_t nargs,
            const char *const *args, const size_t *lens,
            struct master_shared *shared, master_reply_fn cb, void *arg)
{
    struct master_req *req;

    if (m->cmd.state != MASTER_UP || m->cmd.ac == NULL) {
        m->stats.errors++;
        return -1;
    }
    if (m->cmd.inflight >= master_conf->max_pending && !m->cmd.drop_now
        && util_now_us() - m->cmd.progress_us >= master_conf->node_timeout_ms * 1000) {
        /*
         * max_pending unanswered and no reply for a round's deadline: not
         * answering while its connection stays open.  A burst to a master
         * that answers is not this (its replies move progress_us).  The
         * drop runs the pending callbacks, so it is left to the timer:
         * never inside the caller's round_start().
         */
        snprintf(m->cmd.why, sizeof(m->cmd.why), "%d requests unanswered "
                 "(redis.max_pending), last reply %lld ms ago", m->cmd.inflight,
                 (long long)((util_now_us() - m->cmd.progress_us) / 1000));
        m->cmd.drop_now = true;
        event_active(m->cmd.timer, EV_TIMEOUT, 0);
    }
    if (m->cmd.drop_now) {
        m->stats.errors++;
        return -1;
    }
    req = malloc(sizeof(*req));
    if (req == NULL) {
        return -1;
    }
    req->m = m;
    req->cb = cb;
    req->arg = arg;
    req->script = script;
    req->nkeys = nkeys;
    req->nargs = nargs;
    req->args = args;
    req->lens = lens;
    req->retried = false;
    req->sent_us = util_now_us();
    req->next = NULL;
    if (script_op[script] != NULL) {
        master_batch_add(m, req);
        m->stats.requests++;
        return 0;
    }
    master_batch_send(m, false);    /* what was asked before this goes before it */
    if (master_send(m, req, false, shared) != REDIS_OK) {
        free(req);
        m->stats.errors++;
        return -1;
    }
    master_link_sent(&m->cmd);
    m->stats.requests++;
    return 0;
}

void
master_poll(struct master *m)
{
    if (m->cmd.ac != NULL && m->cmd.state == MASTER_UP) {
        redisev_read(m->cmd.ac);
    }
}

enum master_reply_type
master_reply_type(const struct master_reply *r)
{
    const redisReply *reply = (const redisReply *)r;

    switch (reply->type) {
    case REDIS_REPLY_STRING:
        return MASTER_REPLY_STRING;
    case REDIS_REPLY_STATUS:
        return MASTER_REPLY_STATUS;
    case REDIS_REPLY_INTEGER:
        return MASTER_REPLY_INTEGER;
    case REDIS_REPLY_NIL:
        return MASTER_REPLY_NIL;
    case REDIS_REPLY_ERROR:
        return MASTER_REPLY_ERROR;
    case REDIS_REPLY_ARRAY:
        return MASTER_REPLY_ARRAY;
    default:
        return MASTER_REPLY_OTHER;
    }
}

long long
master_reply_integer(const struct master_reply *r)
{
    return ((const redisReply *)r)->integer;
}

const char *
master_reply_str(const struct master_reply *r, size_t *len)
{
    const redisReply *reply = (const redisReply *)r;

    if (len != NULL) {
        *len = reply->str != NULL ? reply->len : 0;
    }
    return reply->str != NULL ? reply->str : "";
}

size_t
master_reply_elements(const struct master_reply *r)
{
    const redisReply *reply = (const redisReply *)r;

    return reply->type == REDIS_REPLY_ARRAY ? reply->elements : 0;
}

const struct master_reply *
master_reply_element(const struct master_reply *r, size_t i)
{
    return (const struct master_reply *)((const redisReply *)r)->element[i];
}
