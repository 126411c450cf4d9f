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
#include "daemon/flush.h"
#include "daemon/health.h"
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
#define MASTER_STEP_ASK(a)      (-2 - (int)(a)) /* handshake step: health_ask a */
#define MASTER_STEP_IS_ASK(s)   ((s) <= -2)
#define MASTER_ASK_OF(s)        ((enum health_ask)(-2 - (s)))
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
    bool                clock_probing;       /* a TIME of the clock keeper is in
                                                flight on the command link */
    int64_t             clock_probe_sent_us; /* monotonic: when it was sent */
    struct master_stats stats;      /* counters (daemon/health.c keeps its own) */
    struct master_batch batch;      /* per-lock requests waiting for the iteration's end */
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

static const struct master_hooks *master_hooks;  /* the subscriber links' user */

static void master_connect(struct master_link *m);
static void master_sub_cb(struct redisev *ac, void *r, void *privdata);
static void master_timer_cb(evutil_socket_t fd, short what, void *arg);
static void master_check_silence(struct master_link *k);
static void master_link_lost(struct master_link *k);

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
 * A link is no longer usable (the caller already logged why and
 * forgot or freed its redisev): what it was up for ends (the command
 * link's restart quarantine says nothing until its next connect,
 * daemon/health.h; the subscriber link's channels are subscribed again
 * when it is back), and reconnecting with backoff begins.  The one
 * tail of master_drop() and of a connection the master closed.
 */
static void
master_link_down(struct master_link *k)
{
    k->state = MASTER_DOWN;
    k->inflight = 0;
    master_link_lost(k);
    evtimer_del(k->timer);
    master_cancel_dns(k);
    master_schedule_reconnect(k);
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
    if (ac != NULL) {
        redisev_free(ac);
    }
    master_link_down(m);
}

/* k's requests will not be answered: tell whoever the link worked for. */
static void
master_link_lost(struct master_link *k)
{
    if (!k->subscriber) {
        health_link_down(k->master->index);
    } else if (master_hooks != NULL) {
        master_hooks->sub_down(k->master->index);
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
    log_info("master %s%s: up", m->addr->spec, MASTER_LINK_WHAT(m));
    if (!m->subscriber) {
        health_link_up(m->master->index);
    } else if (master_hooks != NULL) {
        master_hooks->sub_up(m->master->index);
    }
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
    if (MASTER_STEP_IS_ASK(step)) {
        /* What the master says about itself (daemon/health.h). */
        if (health_answer(m->master->index, MASTER_ASK_OF(step), reply, why,
                          sizeof(why)) != 0) {
            m->master->stats.errors++;
            master_drop(m, why);
            return;
        }
    } else if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(why, sizeof(why), "%s refused: %.100s",
                 step == MASTER_STEP_AUTH ? "AUTH" : "SCRIPT LOAD", reply->str);
        m->master->stats.errors++;
        master_drop(m, why);
        return;
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
    int a, i, rc = REDIS_OK;

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
    if (!m->subscriber) {
        /* Restarts, duplicates, the quarantine, eviction (daemon/health.h). */
        health_connecting(m->master->index);
        for (a = 0; a < HEALTH_NASKS && rc == REDIS_OK; a++) {
            const char *words[HEALTH_ASK_WORDS];
            size_t lens[HEALTH_ASK_WORDS];
            size_t n = health_ask_argv((enum health_ask)a, words, lens);

            rc = redisev_command_argv(ac, master_handshake_cb,
                                      (void *)(intptr_t)MASTER_STEP_ASK(a), (int)n, words,
                                      lens);
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
    master_link_down(m);
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
        if (master_link_init(m, &m->cmd, false) != 0
            || master_link_init(m, &m->sub, true) != 0) {
            return -1;
        }
    }
    if (health_start(base, conf) != 0) {
        return -1;
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
    size_t i;

    master_conf = conf;
    for (i = 0; i < nmasters; i++) {
        masters[i].addr = &conf->masters[i];
        masters[i].cmd.addr = masters[i].addr;
        masters[i].sub.addr = masters[i].addr;
    }
    health_set_conf(conf);
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
    }
    health_stop();
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

/*
 * Every answer on a subscriber link: the sentinel's confirmation (the
 * end of the handshake), then a channel's (un)subscribe confirmation or
 * a message, handed to the hooks (master_set_hooks).
 */
static void
master_sub_cb(struct redisev *ac, void *r, void *privdata)
{
    redisReply *reply = r, *kind, *chan, *msg;
    struct master_link *k = privdata;

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
    msg = reply->element[2];
    master_link_answered(k, k->state == MASTER_UP && strcmp(kind->str, "message") != 0,
                         util_now_us());
    if (k->state == MASTER_HANDSHAKE) {
        if (strcmp(kind->str, "subscribe") == 0
            && strcmp(chan->str, MASTER_SENTINEL_CHANNEL) == 0 && --k->pending == 0) {
            master_link_up(k);
        }
        return;
    }
    if (master_hooks == NULL) {
        return;
    }
    if (strcmp(kind->str, "message") == 0) {
        if (msg->type == REDIS_REPLY_STRING) {
            master_hooks->message(chan->str, chan->len, msg->str, msg->len);
        }
    } else if (strcmp(kind->str, "subscribe") == 0 || strcmp(kind->str, "unsubscribe") == 0) {
        master_hooks->confirmed(k->master->index, kind->str[0] == 's', chan->str, chan->len);
    }
}

int
master_sub_send(size_t i, bool subscribe, const char *channel, size_t len)
{
    struct master_link *k = &masters[i].sub;
    const char *argv[2];
    size_t lens[2];

    if (k->state != MASTER_UP || k->ac == NULL) {
        return -1;
    }
    argv[0] = subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE";
    lens[0] = strlen(argv[0]);
    argv[1] = channel;
    lens[1] = len;
    /* Answered by a push (master_sub_cb), not through the FIFO. */
    if (redisev_command_argv(k->ac, NULL, NULL, 2, argv, lens) != 0) {
        return -1;
    }
    master_link_sent(k);
    return 0;
}

void
master_set_hooks(const struct master_hooks *hooks)
{
    master_hooks = hooks;
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
        struct health_counts c;

        health_get_counts(i, &c);
        sum->evicting += c.evicting;
        if (masters[i].cmd.state != MASTER_UP) {
            continue;
        }
        sum->up++;
        left = health_any_quarantine_left_ms(i, now);
        if (left > sum->quarantine_left_ms) {
            sum->quarantine_left_ms = left;
        }
        sum->quarantined += left > 0;
        sum->duplicate += c.duplicate_of >= 0;
        sum->counted += left == 0 && c.duplicate_of < 0;
    }
}

void
master_get_stats(const struct master *m, struct master_stats *st)
{
    struct health_counts c;

    health_get_counts(m->index, &c);
    *st = m->stats;
    st->state = m->cmd.state;
    st->quarantine_ms = health_any_quarantine_left_ms(m->index, util_now_us());
    st->sub_up = m->sub.state == MASTER_UP;
    st->restarts = c.restarts;
    st->clock_steps = c.clock_steps;
    st->duplicate_of = c.duplicate_of;
    st->evicting = c.evicting;
    st->maxmemory = c.maxmemory;
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
        } else if ((left = health_clock_quarantine_left_ms(m->index, util_now_us())) > 0) {
            snprintf(mm->status, sizeof(mm->status), "quarantined after a clock step "
                     "(%lld ms left)", (long long)left);
        } else if ((left = health_quarantine_left_ms(m->index, util_now_us())) > 0) {
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
    } else if ((answer = health_clock_read(m->index, reply, req->sent_us, now)) == NULL) {
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
    answer = reply->type == REDIS_REPLY_ERROR
             ? reply : health_clock_read(m->index, reply, b->sent_us, now);
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
