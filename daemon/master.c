/*
 * master.c: the links to the Redis masters: connect, handshake,
 * reconnect with backoff, silence and drop; the subscriber links'
 * answers (handed to daemon/channel.c through the hooks).  The requests
 * sent over the command links are daemon/master_eval.c's; the clock
 * keeper and the layout registry's reads daemon/master_keeper.c's; what a master says about itself in the
 * handshake is judged by daemon/health.c.
 *
 * With daemon/redisev.c (the transport: a libevent bufferevent, plain or
 * TLS, with hiredis's reader and formatter), daemon/master_eval.c,
 * daemon/master_keeper.c and daemon/health.c, the only files that include hiredis.  What this code
 * relies on (daemon/redisev.h): a failed connect calls the connect
 * callback with ok false and the link is freed after it; when a
 * connected link fails every pending callback runs with a NULL reply,
 * then the disconnect callback, and the link is freed when it returns;
 * drops requested in the connect callback are deferred to the master's
 * timer.
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
#include "daemon/ctx.h"
#include "daemon/flush.h"
#include "daemon/health.h"
#include "daemon/layout.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/master_link.h"
#include "daemon/redisev.h"
#include "daemon/tls.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"

#define MASTER_BACKOFF_MIN_MS   100
#define MASTER_BACKOFF_MAX_MS   5000
#define MASTER_STEP_AUTH        (-1)    /* handshake step: AUTH */
#define MASTER_STEP_LAYOUT      (-2)    /* handshake step: the layout registry */
#define MASTER_STEP_ASK(a)      (-3 - (int)(a)) /* handshake step: health_ask a */
#define MASTER_STEP_IS_ASK(s)   ((s) <= -3)
#define MASTER_ASK_OF(s)        ((enum health_ask)(-3 - (s)))



/* Subscribed by every subscriber link and never left, so that the link
 * never drops out of subscribed mode (and its handshake has an answer to
 * wait for): lock.key_prefix + LAYOUT_SENTINEL_SUFFIX.  Daemons older
 * than the layout registry subscribe another one, by which the registry
 * sees them (daemon/layout.h). */
static char master_sentinel[300];

static struct evdns_base *master_dns;       /* only when a master has a host name */
static struct master     *masters;
static size_t             nmasters;



static const struct master_hooks *master_hooks;  /* the subscriber links' user */
static const char        *master_loads[MASTER_SCRIPTS_MAX]; /* SCRIPT LOADed at every
                                                               handshake (master_load) */
static int                master_nloads;

static void master_connect(struct master_link *m);
static void master_sub_cb(struct redisev *ac, void *r, void *privdata);
static void master_timer_cb(evutil_socket_t fd, short what, void *arg);
static void master_check_silence(struct master_link *k);

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
    struct master_queue *q = &k->master->queue;

    k->state = MASTER_DOWN;
    k->inflight = 0;
    if (!k->subscriber && q->fe.fn != NULL
        && q->n[MASTER_CLASS_RENEW] + q->n[MASTER_CLASS_LOCK] + q->n[MASTER_CLASS_READ] > 0) {
        flush_join(&q->fe);     /* what waits to be written fails there, with why */
    }
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
void
master_link_lost(struct master_link *k)
{
    if (!k->subscriber) {
        health_link_down(k->master->index);
    } else if (master_hooks != NULL) {
        master_hooks->sub_down(k->master->index);
    }
}

struct master_req *
master_queue_take(struct master *m)
{
    struct master_queue *q = &m->queue;
    struct master_req *first = NULL, **tail = &first, *req;
    int c;

    if (q->fe.fn == NULL) {
        return NULL;    /* never used */
    }
    for (c = 0; c < MASTER_CLASSES; c++) {
        while ((req = TAILQ_FIRST(&q->q[c])) != NULL) {
            TAILQ_REMOVE(&q->q[c], req, qlink);
            req->queued = false;
            req->next = NULL;
            *tail = req;
            tail = &req->next;
        }
        q->n[c] = 0;
    }
    flush_leave(&q->fe);
    return first;
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
    if (step == MASTER_STEP_LAYOUT) {
        if (master_layout_read(m->master, reply, m->master->layout_sent_us) != 0) {
            m->master->stats.errors++;
            master_drop(m, "the layout registry's answer is not {time, id, value...}");
            return;
        }
    } else if (MASTER_STEP_IS_ASK(step)) {
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
    pass = ctx.conf->redis_password;
    user = ctx.conf->redis_username;
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
                                   master_sentinel);
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
    for (i = 0; !m->subscriber && i < master_nloads && rc == REDIS_OK; i++) {
        rc = redisev_command(ac, master_handshake_cb, (void *)(intptr_t)i,
                               "SCRIPT LOAD %s", master_loads[i]);
        m->pending++;
    }
    if (!m->subscriber && rc == REDIS_OK) {
        /* Up with a verdict on the layouts beside (daemon/layout.h). */
        layout_connecting(m->master->index);
        rc = master_layout_send(m->master, master_handshake_cb,
                                (void *)(intptr_t)MASTER_STEP_LAYOUT);
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
        const char *name = ctx.conf->redis_tls_server_name;

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
    ac = redisev_connect(ctx.base, &opts, why, sizeof(why));
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
        master_schedule(m, ctx.conf->connect_timeout_ms);
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
    master_schedule(m, ctx.conf->connect_timeout_ms);
    req = evdns_getaddrinfo(master_dns, m->addr->host, NULL, &hints, master_resolved_cb, m);
    if (m->resolving) {
        m->dns_req = req;   /* NULL when the callback already ran */
    }
}

/*
 * A request was sent on k: count it, and make sure the link's timer
 * watches for silence (master_check_silence).
 */
void
master_link_sent(struct master_link *k)
{
    if (k->inflight++ == 0) {
        k->progress_us = util_now_us();
    }
    if (!evtimer_pending(k->timer, NULL)) {
        master_schedule(k, ctx.conf->down_after_ms);
    }
}

/* A reply arrived on k at now_us; answered says whether it ends a request. */
void
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
    if (silent_ms < ctx.conf->down_after_ms) {
        master_schedule(k, ctx.conf->down_after_ms - silent_ms);
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
                     (long long)ctx.conf->connect_timeout_ms);
        } else {
            snprintf(why, sizeof(why), "connect timeout after %lld ms",
                     (long long)ctx.conf->connect_timeout_ms);
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

/* Prepare one link of m. */
static void
master_link_init(struct master *m, struct master_link *k, bool subscriber)
{
    k->master = m;
    k->addr = m->addr;
    k->subscriber = subscriber;
    k->state = MASTER_DOWN;
    k->backoff_ms = MASTER_BACKOFF_MIN_MS;
    snprintf(k->why, sizeof(k->why), "not connected yet");
    k->timer = evtimer_new(ctx.base, master_timer_cb, k);
    if (k->timer == NULL) {
        xmalloc_fail("a master link's timer");
    }
}

int
master_start(void)
{
    const struct conf *conf = ctx.conf;
    size_t i;

    nmasters = conf->nmasters;
    masters = xcalloc(nmasters, sizeof(*masters));
    for (i = 0; i < nmasters; i++) {
        struct master *m = &masters[i];

        m->index = i;
        m->addr = &conf->masters[i];
        m->stats.rtt_us = -1;
        master_link_init(m, &m->cmd, false);
        master_link_init(m, &m->sub, true);
    }
    snprintf(master_sentinel, sizeof(master_sentinel), "%.256s%s", conf->key_prefix,
             LAYOUT_SENTINEL_SUFFIX);
    health_start();
    if (layout_start(nmasters) != 0) {
        return -1;
    }
    for (i = 0; i < nmasters; i++) {
        if (!masters[i].addr->is_unix && !master_host_is_numeric(masters[i].addr->host)
            && master_dns == NULL) {
            master_dns = evdns_base_new(ctx.base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
            if (master_dns == NULL) {
                log_error("cannot start the DNS resolver for master host names");
                return -1;
            }
        }
    }
    master_keeper_start();
    for (i = 0; i < nmasters; i++) {
        master_connect(&masters[i].cmd);
        master_connect(&masters[i].sub);
    }
    return 0;
}

void
master_apply(void)
{
    size_t i;

    for (i = 0; i < nmasters; i++) {
        masters[i].addr = &ctx.conf->masters[i];
        masters[i].cmd.addr = masters[i].addr;
        masters[i].sub.addr = masters[i].addr;
    }
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

    master_keeper_stop();
    for (i = 0; i < nmasters; i++) {
        /* Down first, so that no callback below queues anything more here. */
        struct master_req *queued;

        master_link_stop(&masters[i].cmd);
        if ((queued = master_queue_take(&masters[i])) != NULL) {
            master_requests_fail(&masters[i], queued, "the daemon is stopping");
        }
        master_link_stop(&masters[i].sub);
    }
    health_stop();
    layout_stop();
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
            && strcmp(chan->str, master_sentinel) == 0 && --k->pending == 0) {
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

int
master_load(const char *text)
{
    if (master_nloads == MASTER_SCRIPTS_MAX) {
        return -1;
    }
    master_loads[master_nloads] = text;
    return master_nloads++;
}

void
master_requests_fail(struct master *m, struct master_req *items, const char *why)
{
    struct master_req *req;

    while ((req = items) != NULL) {
        items = req->next;
        req->cb(m, NULL, why, req->arg);
        free(req);
    }
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
        bool counts;

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
        counts = layout_counts(i, now);
        sum->layout_refused += !counts;
        sum->counted += master_counted(i, now);
    }
}

bool
master_counted(size_t i, int64_t now_us)
{
    struct health_counts c;

    if (i >= nmasters || masters[i].cmd.state != MASTER_UP) {
        return false;
    }
    health_get_counts(i, &c);
    return health_any_quarantine_left_ms(i, now_us) == 0 && c.duplicate_of < 0
           && layout_counts(i, now_us);
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
    st->clock_readings = c.clock_readings;
    st->duplicate_of = c.duplicate_of;
    st->evicting = c.evicting;
    st->maxmemory = c.maxmemory;
    st->down_known = m->cmd.state == MASTER_DOWN && m->cmd.why[0] != '\0';
    layout_get_view(m->index, &st->layout);
    st->layout_counts = layout_counts(m->index, util_now_us());
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
        } else if (!layout_counts(m->index, util_now_us())) {
            snprintf(mm->status, sizeof(mm->status), "not counted: %s",
                     layout_why(m->index, util_now_us(), NULL));
        } else {
            snprintf(mm->status, sizeof(mm->status), "up");
        }
        break;
    }
    return m->status;
}
