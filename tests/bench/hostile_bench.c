/*
 * hostile_bench.c: the hostile row of `make bench`, build/redlock-hostile
 * (tests/bench/README.md, "The hostile row").
 *
 * Can strangers on the same host keep a legitimate client out?  Against
 * one daemon with auth.password set, a TLS listener, a Unix socket that
 * asks for AUTH too, /metrics, and a low descriptor limit:
 *
 *     legitimate clients, one thread each: TCP and TLS from 127.0.0.1,
 *                and the Unix socket; every --interval-ms each connects,
 *                sends AUTH with the right password, LOCK
 *                bench-hostile-<pid>-<transport>, UNLOCK, and closes.
 *                An attempt is admitted when AUTH and LOCK were answered
 *                OK within --timeout-ms of its start; its latency runs
 *                from the start of the connect to the LOCK's OK read
 *                (CLOCK_MONOTONIC); --legit-source binds the TCP and
 *                TLS ones to another local address (another address
 *                group: the easy case).  They start --lead-ms before the
 *                attacks (a service that was running when an attack
 *                began: the daemon knows its address by then).
 *     scraper    a thread GETting /metrics every --scrape-ms (a 200
 *                within --timeout-ms, or a failure)
 *     attacks    one epoll loop, for --attack-s seconds, all at once
 *                (--attacks picks some of them):
 *       guess      --guess-conns connections at once, each from the next
 *                  of --guess-addrs addresses 127.16.0.0 and up (bind()
 *                  before connect()), sending AUTH with a wrong password
 *                  and opening the next as soon as the daemon answered or
 *                  closed it
 *       pool       --pool-conns silent connections (connect, send
 *                  nothing) from each of --pool-addrs addresses
 *                  127.0.5.<1..>, each opened again as soon as the daemon
 *                  closes it
 *       fds        --fd-conns idle connections from 127.0.6.<1..8>
 *                  (silent; with --fd-auth they send the right AUTH
 *                  first: a client holding the password), opened again
 *                  when closed
 *       slowloris  --slow-conns connections to /metrics from 127.0.4.<1..4>,
 *                  each sending one byte of a request that never ends
 *                  every --slow-ms, opened again when closed
 *                (pool, fds and slowloris connections are opened again
 *                --reopen-ms after they closed, default 0: at once)
 *     stats      the daemon's STATS (over the Unix socket, with AUTH)
 *                just before the attacks and --settle-ms after them
 *
 * The result is one JSON line on stdout (diagnostics on stderr):
 *
 *     {"mode":"hostile","attack_s":...,"tcp_attempts":...,"tcp_admitted":...,
 *      "tcp_within_1s":...,"tcp_p50_us":...,...,"scrapes":...,...}
 *
 * For each transport (tcp_, tls_, unix_), over the attempts started
 * while the attacks ran: attempts, admitted, within_1s (admitted with a
 * latency <= 1 s), p50_us, p99_us, max_us (of the admitted), and why the
 * others failed (fail_connect, fail_tls, fail_limit: ERR LIMIT, closed to
 * make room or refused, fail_auth: another answer than OK to AUTH,
 * fail_lock, fail_closed: the daemon closed it, fail_timeout); and
 * lead_attempts, lead_admitted, lead_max_us, first_us (the very first
 * attempt's latency, -1 when it was not admitted) for the lead before
 * the attacks.  Then scrapes, scrapes_ok, scrape_max_us; the attacks'
 * own counts (guesses_sent, guesses_wrong: answered ERR AUTH wrong
 * password, guesses_closed, pool_opened, fd_opened, slow_opened,
 * connect_failed); the STATS deltas (auth_failures, auth_held,
 * unauthenticated_evicted, rejected_clients, metrics_rejected,
 * metrics_timed_out), stats_window_s (from the STATS before to the one
 * after: the window of those deltas) and guess_groups (address groups
 * the guesses came from: 1, 127/8).
 *
 * Exit status: 0 when the run happened (its figures may miss their
 * targets), 1 when it could not (no STATS before the attacks, no
 * attempt made), 2 on a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "client/client.h"

#define HOSTILE_ATTEMPTS_MAX  100000      /* attempts kept per transport */
#define HOSTILE_ATTACK_MAX    20000       /* attack connections at once, at most */
#define HOSTILE_REOPEN_MS     10          /* a connect that failed at once: retry after */
#define HOSTILE_STATS_MS      10000       /* deadline for a STATS */
#define HOSTILE_NSTATS        8           /* counters read */
#define HOSTILE_SLOW_ADDRS    4           /* slowloris source addresses */
#define HOSTILE_FD_ADDRS      8           /* fds source addresses */

/* The legitimate clients' transports. */
enum hostile_transport { HOSTILE_TCP, HOSTILE_TLS, HOSTILE_UNIX, HOSTILE_NT };

static const char *const hostile_tnames[HOSTILE_NT] = { "tcp", "tls", "unix" };

/* Why an attempt was not admitted. */
enum hostile_fail {
    HOSTILE_OK,
    HOSTILE_F_CONNECT,      /* the connect failed or timed out */
    HOSTILE_F_TLS,          /* the handshake failed or timed out */
    HOSTILE_F_LIMIT,        /* answered ERR LIMIT (closed to make room, or refused) */
    HOSTILE_F_AUTH,         /* AUTH answered other than OK or ERR LIMIT */
    HOSTILE_F_LOCK,         /* LOCK answered other than OK */
    HOSTILE_F_CLOSED,       /* the daemon closed it before the LOCK's OK */
    HOSTILE_F_TIMEOUT,      /* no answer by the attempt's deadline */
    HOSTILE_NF
};

static const char *const hostile_fnames[HOSTILE_NF] = {
    "ok", "fail_connect", "fail_tls", "fail_limit", "fail_auth", "fail_lock", "fail_closed",
    "fail_timeout"
};

/* One attempt of a legitimate client. */
struct hostile_attempt {
    int64_t start_ms;       /* when its connect began, client_now_ms() */
    int64_t latency_us;     /* connect to the LOCK's OK; -1 when not admitted */
    enum hostile_fail fail; /* HOSTILE_OK when admitted */
};

/* One legitimate client: a thread; its attempts are read after it is joined. */
struct hostile_legit {
    enum hostile_transport  t;              /* its transport */
    pthread_t               thread;         /* the thread */
    size_t                  n;              /* attempts made */
    struct hostile_attempt *a;              /* HOSTILE_ATTEMPTS_MAX of them */
    char                    last_err[160];  /* the last failure's reason, for people */
};

/* What an attack connection is. */
enum hostile_kind { HOSTILE_GUESS, HOSTILE_POOL, HOSTILE_FD, HOSTILE_SLOW };

/* One attack connection slot; owned by the attack loop. */
struct hostile_conn {
    enum hostile_kind kind;         /* its attack */
    int               fd;           /* the socket, -1 when closed */
    bool              connected;    /* its connect finished */
    bool              sent;         /* its AUTH went (guess, fd with --fd-auth) */
    int64_t           reopen_ms;    /* closed: open again at; -1 when open */
    int64_t           next_byte_ms; /* slowloris: its next byte at */
    uint32_t          addr;         /* its source address, host order */
    size_t            pos;          /* slowloris: bytes of its request sent */
};

/* The run's settings (the command line) and shared state. */
static struct {
    char     target[64];            /* TCP "127.0.0.1:port" */
    char     tls_target[64];        /* TLS "127.0.0.1:port" */
    char     tls_ca[4096];          /* the CA of the daemon's certificate */
    char     unix_path[4096];       /* the Unix socket */
    int      port;                  /* TCP port */
    int      metrics_port;          /* /metrics port */
    char     password[256];         /* auth.password */
    char     legit_source[64];      /* TCP and TLS clients bind() here; "": 127.0.0.1 */
    double   attack_s;              /* seconds of attacks */
    int64_t  lead_ms;               /* legitimate clients before the attacks */
    int64_t  settle_ms;             /* after the attacks, before the last STATS */
    int64_t  interval_ms;           /* a legitimate attempt every */
    int64_t  scrape_ms;             /* a scrape every */
    int64_t  timeout_ms;            /* an attempt's or a scrape's deadline */
    int64_t  slow_ms;               /* slowloris: a byte every */
    int64_t  reopen_ms;             /* pool, fds, slowloris: open a closed one again after */
    int      guess_conns;           /* guessing connections at once */
    int      guess_addrs;           /* addresses they cycle through */
    int      pool_conns;            /* silent connections per pool address */
    int      pool_addrs;            /* pool addresses */
    int      fd_conns;              /* idle connections */
    bool     fd_auth;               /* they AUTH first */
    int      slow_conns;            /* slowloris connections */
    bool     on[4];                 /* the attacks run, by enum hostile_kind */
    atomic_bool stop;               /* the legitimate clients and the scraper end */
    _Atomic int64_t attack_start_ms; /* when the attacks began (0: not yet) */
    int64_t  attack_end_ms;         /* when they ended */
} hb;

/* The attack loop's counts (its thread only, read after it is joined). */
static struct {
    long long guesses_sent, guesses_wrong, guesses_closed, guesses_other;
    long long pool_opened, fd_opened, slow_opened, connect_failed, evicted_seen;
    long long fd_authed;
    int       max_open;
} hc;

/* Scrapes (the scraper thread only, read after it is joined). */
static struct {
    long long scrapes, ok, lead_scrapes, lead_ok;
    int64_t   max_us;
    char      last_err[160];
} hs;

static int64_t
hostile_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Sleep until the monotonic time at_ms (client_now_ms()), or not at all. */
static void
hostile_sleep_until(int64_t at_ms)
{
    int64_t left = at_ms - client_now_ms();
    struct timespec ts;

    if (left > 0) {
        ts.tv_sec = left / 1000;
        ts.tv_nsec = (left % 1000) * 1000000;
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
}

/* ---- the legitimate clients ---- */

/* Read one reply line (pushes skipped) by deadline: HOSTILE_OK, or why not. */
static enum hostile_fail
hostile_reply(struct client *c, int64_t deadline, bool *ok)
{
    enum client_read r;

    do {
        r = client_read_line(c, deadline);
    } while (r == CLIENT_LINE && client_is_push(c->line));
    if (r == CLIENT_LINE) {
        *ok = client_is_status(c->line, "OK");
        return HOSTILE_OK;
    }
    return r == CLIENT_TIMEOUT ? HOSTILE_F_TIMEOUT : HOSTILE_F_CLOSED;
}

/*
 * Connect c to the daemon's TCP or TLS port from hb.legit_source before
 * deadline (bind() first).  0, or -1 with c->err.
 */
static int
hostile_connect_from(struct client *c, const char *port_text, int64_t deadline)
{
    struct sockaddr_in src, dst;
    struct pollfd pfd;
    int fd, err = 0, fl;
    socklen_t len = sizeof(err);
    int64_t left;

    memset(&src, 0, sizeof(src));
    src.sin_family = AF_INET;
    memset(&dst, 0, sizeof(dst));
    dst.sin_family = AF_INET;
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    dst.sin_port = htons((uint16_t)atoi(port_text));
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || inet_pton(AF_INET, hb.legit_source, &src.sin_addr) != 1
        || bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0
        || (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) != 0 && errno != EINPROGRESS)) {
        goto fail;
    }
    pfd.fd = fd;
    pfd.events = POLLOUT;
    do {
        left = deadline - client_now_ms();
        pfd.revents = 0;
    } while (left > 0 && poll(&pfd, 1, (int)left) < 0 && errno == EINTR);
    if (!(pfd.revents & (POLLOUT | POLLERR | POLLHUP))
        || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0
        || (fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        errno = err != 0 ? err : ETIMEDOUT;
        goto fail;
    }
    client_init(c, fd, 0);
    return 0;
fail:
    snprintf(c->err, sizeof(c->err), "connect from %s: %s", hb.legit_source, strerror(errno));
    if (fd >= 0) {
        close(fd);
    }
    return -1;
}

/* One attempt: connect, AUTH, LOCK, UNLOCK, close. */
static void
hostile_attempt(struct hostile_legit *l, struct hostile_attempt *a)
{
    struct client c;
    struct client_tls_opts tls = { .ca_file = hb.tls_ca };
    char line[512];
    int64_t t0 = hostile_now_us(), deadline;
    enum hostile_fail f;
    bool ok = false;

    a->start_ms = client_now_ms();
    a->latency_us = -1;
    deadline = a->start_ms + hb.timeout_ms;
    client_init(&c, -1, 0);
    if (l->t != HOSTILE_UNIX && hb.legit_source[0] != '\0') {
        if (hostile_connect_from(&c, strrchr(l->t == HOSTILE_TLS ? hb.tls_target : hb.target,
                                             ':') + 1, deadline) != 0) {
            a->fail = HOSTILE_F_CONNECT;
            goto out;
        }
    } else if ((l->t == HOSTILE_UNIX ? client_connect_unix(&c, hb.unix_path, deadline)
                : client_connect_tcp(&c, l->t == HOSTILE_TLS ? hb.tls_target : hb.target,
                                     deadline)) != 0) {
        a->fail = HOSTILE_F_CONNECT;
        goto out;
    }
    if (l->t == HOSTILE_TLS && client_start_tls(&c, "127.0.0.1", &tls, deadline) != 0) {
        a->fail = errno == ETIMEDOUT ? HOSTILE_F_TIMEOUT : HOSTILE_F_TLS;
        goto out;
    }
    snprintf(line, sizeof(line), "AUTH %s", hb.password);
    if (client_send(&c, line, deadline) != 0) {
        a->fail = HOSTILE_F_CLOSED;
        goto out;
    }
    if ((f = hostile_reply(&c, deadline, &ok)) != HOSTILE_OK || !ok) {
        a->fail = f != HOSTILE_OK ? f : client_is_err(c.line, "LIMIT") ? HOSTILE_F_LIMIT
                                                                       : HOSTILE_F_AUTH;
        goto out;
    }
    snprintf(line, sizeof(line), "LOCK bench-hostile-%ld-%s", (long)getpid(),
             hostile_tnames[l->t]);
    if (client_send(&c, line, deadline) != 0) {
        a->fail = HOSTILE_F_CLOSED;
        goto out;
    }
    if ((f = hostile_reply(&c, deadline, &ok)) != HOSTILE_OK || !ok) {
        a->fail = f != HOSTILE_OK ? f : client_is_err(c.line, "LIMIT") ? HOSTILE_F_LIMIT
                                                                       : HOSTILE_F_LOCK;
        goto out;
    }
    a->latency_us = hostile_now_us() - t0;
    a->fail = HOSTILE_OK;
    snprintf(line, sizeof(line), "UNLOCK bench-hostile-%ld-%s", (long)getpid(),
             hostile_tnames[l->t]);
    if (client_send(&c, line, deadline) == 0) {
        (void)hostile_reply(&c, deadline, &ok);
    }
out:
    if (a->fail != HOSTILE_OK) {
        snprintf(l->last_err, sizeof(l->last_err), "%s: %.130s", hostile_fnames[a->fail],
                 a->fail == HOSTILE_F_AUTH || a->fail == HOSTILE_F_LOCK
                 || a->fail == HOSTILE_F_LIMIT ? c.line : c.err);
    }
    client_close(&c);
}

static void *
hostile_legit_main(void *arg)
{
    struct hostile_legit *l = arg;
    int64_t next = client_now_ms();

    while (!atomic_load(&hb.stop) && l->n < HOSTILE_ATTEMPTS_MAX) {
        hostile_attempt(l, &l->a[l->n]);
        l->n++;
        next += hb.interval_ms;
        if (next < client_now_ms()) {
            next = client_now_ms();     /* a slow attempt: the next one at once */
        }
        hostile_sleep_until(next);
    }
    return NULL;
}

/* ---- the scraper ---- */

static void
hostile_scrape_one(void)
{
    struct client c;
    char req[128];
    int64_t t0 = hostile_now_us(), deadline = client_now_ms() + hb.timeout_ms, us;
    bool lead = client_now_ms() < hb.attack_start_ms || hb.attack_start_ms == 0;
    bool ok = false;
    enum client_read r;
    char addr[64], status[96] = "";

    snprintf(addr, sizeof(addr), "127.0.0.1:%d", hb.metrics_port);
    snprintf(req, sizeof(req), "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close"
             "\r\n\r\n");
    client_init(&c, -1, 0);
    if (client_connect_tcp(&c, addr, deadline) == 0
        && client_write(&c, req, strlen(req), deadline) == 0
        && client_read_line(&c, deadline) == CLIENT_LINE) {
        snprintf(status, sizeof(status), "%.80s", c.line);
        ok = strncmp(c.line, "HTTP/1.1 200", 12) == 0 || strncmp(c.line, "HTTP/1.0 200", 12) == 0;
        /* the body, to its end */
        while (ok && (r = client_read_line(&c, deadline)) == CLIENT_LINE) {
        }
        if (ok && r != CLIENT_EOF) {
            ok = false;
        }
    }
    if (!ok) {
        snprintf(hs.last_err, sizeof(hs.last_err), "%.150s", status[0] != '\0' ? status : c.err);
    }
    client_close(&c);
    us = hostile_now_us() - t0;
    if (lead) {
        hs.lead_scrapes++;
        hs.lead_ok += ok;
        return;
    }
    hs.scrapes++;
    hs.ok += ok;
    if (ok && us > hs.max_us) {
        hs.max_us = us;
    }
}

static void *
hostile_scraper_main(void *arg)
{
    int64_t next = client_now_ms();

    (void)arg;
    while (!atomic_load(&hb.stop)) {
        hostile_scrape_one();
        next += hb.scrape_ms;
        if (next < client_now_ms()) {
            next = client_now_ms();
        }
        hostile_sleep_until(next);
    }
    return NULL;
}

/* ---- the attacks ---- */

static struct hostile_conn *hostile_conns;
static int hostile_nconns;
static int hostile_ep = -1;
static uint32_t hostile_next_guess;     /* index of the next guessing address */

/* The i-th guessing address: 127.16.0.0 and up, skipping .0 and .255. */
static uint32_t
hostile_guess_addr(uint32_t i)
{
    return (127u << 24) | (16u << 16) | ((i / 254) % 65536) << 8 | (1 + i % 254);
}

static void
hostile_close(struct hostile_conn *c, int64_t reopen_ms)
{
    if (c->fd >= 0) {
        epoll_ctl(hostile_ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }
    c->reopen_ms = reopen_ms;
}

/* Open c again: a non-blocking connect from its address (a new one for a guess). */
static void
hostile_open(struct hostile_conn *c, int64_t now)
{
    struct sockaddr_in src, dst;
    struct epoll_event ev;
    int one = 1;

    if (c->kind == HOSTILE_GUESS) {
        c->addr = hostile_guess_addr(hostile_next_guess++ % (uint32_t)hb.guess_addrs);
    }
    c->connected = c->sent = false;
    c->pos = 0;
    c->reopen_ms = -1;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        hc.connect_failed++;
        c->reopen_ms = now + HOSTILE_REOPEN_MS;
        return;
    }
    (void)setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
    memset(&src, 0, sizeof(src));
    src.sin_family = AF_INET;
    src.sin_addr.s_addr = htonl(c->addr);
    memset(&dst, 0, sizeof(dst));
    dst.sin_family = AF_INET;
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    dst.sin_port = htons((uint16_t)(c->kind == HOSTILE_SLOW ? hb.metrics_port : hb.port));
    if (bind(c->fd, (struct sockaddr *)&src, sizeof(src)) != 0
        || (connect(c->fd, (struct sockaddr *)&dst, sizeof(dst)) != 0 && errno != EINPROGRESS)) {
        hc.connect_failed++;
        hostile_close(c, now + HOSTILE_REOPEN_MS);
        return;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
    ev.data.ptr = c;
    if (epoll_ctl(hostile_ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        hc.connect_failed++;
        hostile_close(c, now + HOSTILE_REOPEN_MS);
        return;
    }
    switch (c->kind) {
    case HOSTILE_GUESS: break;
    case HOSTILE_POOL: hc.pool_opened++; break;
    case HOSTILE_FD: hc.fd_opened++; break;
    case HOSTILE_SLOW: hc.slow_opened++; c->next_byte_ms = now; break;
    }
}

/* Send s whole on c's non-blocking socket (short lines: one write). */
static bool
hostile_put(struct hostile_conn *c, const char *s, size_t len)
{
    return send(c->fd, s, len, MSG_NOSIGNAL) == (ssize_t)len;
}

/* c's socket has an event. */
static void
hostile_event(struct hostile_conn *c, uint32_t events, int64_t now)
{
    struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };
    char buf[4096], line[512];
    int err = 0;
    socklen_t len = sizeof(err);
    ssize_t n;

    if (!c->connected && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            hc.connect_failed++;
            hostile_close(c, now + HOSTILE_REOPEN_MS);
            return;
        }
        c->connected = true;
        /* only the readable side is of interest from now on */
        epoll_ctl(hostile_ep, EPOLL_CTL_MOD, c->fd, &ev);
        if (c->kind == HOSTILE_GUESS) {
            n = snprintf(line, sizeof(line), "AUTH wrong-%08x-%lld\r\n", c->addr,
                         hc.guesses_sent);
            if (hostile_put(c, line, (size_t)n)) {
                hc.guesses_sent++;
                c->sent = true;
            }
        } else if (c->kind == HOSTILE_FD && hb.fd_auth) {
            n = snprintf(line, sizeof(line), "AUTH %s\r\n", hb.password);
            c->sent = hostile_put(c, line, (size_t)n);
        }
    }
    if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        return;
    }
    n = recv(c->fd, buf, sizeof(buf) - 1, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
    }
    if (n > 0) {
        buf[n] = '\0';
        if (strstr(buf, "ERR LIMIT") != NULL) {
            hc.evicted_seen++;
        }
        if (c->kind == HOSTILE_GUESS) {
            if (strncmp(buf, "ERR AUTH wrong password", 23) == 0) {
                hc.guesses_wrong++;
            } else {
                hc.guesses_other++;
            }
            hostile_close(c, now);          /* the next guess at once */
        } else if (c->kind == HOSTILE_FD && hb.fd_auth && strncmp(buf, "OK", 2) == 0) {
            hc.fd_authed++;                 /* stays open, idle */
        } else if (c->kind == HOSTILE_SLOW) {
            hostile_close(c, now + hb.reopen_ms);   /* answered (408, 503): again */
        }
        return;
    }
    /* closed by the daemon (or reset) */
    if (c->kind == HOSTILE_GUESS) {
        hc.guesses_closed++;
    }
    hostile_close(c, c->kind == HOSTILE_GUESS ? now : now + hb.reopen_ms);
}

/* Add n slots of kind, with source addresses from addr(i). */
static void
hostile_add(enum hostile_kind kind, int n, uint32_t base, int naddrs)
{
    int i;

    for (i = 0; i < n && hostile_nconns < HOSTILE_ATTACK_MAX; i++) {
        struct hostile_conn *c = &hostile_conns[hostile_nconns++];

        c->kind = kind;
        c->fd = -1;
        c->reopen_ms = 0;
        c->addr = base + (uint32_t)(naddrs > 0 ? i % naddrs : 0);
    }
}

/* The attack loop, from hb.attack_start_ms to hb.attack_end_ms. */
static void
hostile_attack(void)
{
    static const char slow_req[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    struct epoll_event evs[256];
    int64_t now;
    int i, n, open;

    hostile_conns = calloc(HOSTILE_ATTACK_MAX, sizeof(*hostile_conns));
    hostile_ep = epoll_create1(EPOLL_CLOEXEC);
    if (hostile_conns == NULL || hostile_ep < 0) {
        fprintf(stderr, "redlock-hostile: no memory or no epoll\n");
        return;
    }
    if (hb.on[HOSTILE_GUESS]) {
        hostile_add(HOSTILE_GUESS, hb.guess_conns, 0, 0);
    }
    if (hb.on[HOSTILE_POOL]) {
        hostile_add(HOSTILE_POOL, hb.pool_conns * hb.pool_addrs, (127u << 24) | (5u << 8) | 1,
                    hb.pool_addrs);
    }
    if (hb.on[HOSTILE_FD]) {
        hostile_add(HOSTILE_FD, hb.fd_conns, (127u << 24) | (6u << 8) | 1, HOSTILE_FD_ADDRS);
    }
    if (hb.on[HOSTILE_SLOW]) {
        hostile_add(HOSTILE_SLOW, hb.slow_conns, (127u << 24) | (4u << 8) | 1,
                    HOSTILE_SLOW_ADDRS);
    }
    while ((now = client_now_ms()) < hb.attack_end_ms) {
        open = 0;
        for (i = 0; i < hostile_nconns; i++) {
            struct hostile_conn *c = &hostile_conns[i];

            if (c->fd < 0 && c->reopen_ms >= 0 && c->reopen_ms <= now) {
                hostile_open(c, now);
            }
            if (c->fd >= 0) {
                open++;
                if (c->kind == HOSTILE_SLOW && c->connected && c->next_byte_ms <= now) {
                    char b = c->pos < sizeof(slow_req) - 1 ? slow_req[c->pos] : 'a';

                    if (hostile_put(c, &b, 1)) {
                        c->pos++;
                    }
                    c->next_byte_ms = now + hb.slow_ms;
                }
            }
        }
        if (open > hc.max_open) {
            hc.max_open = open;
        }
        n = epoll_wait(hostile_ep, evs, (int)(sizeof(evs) / sizeof(evs[0])), 5);
        now = client_now_ms();
        for (i = 0; i < n; i++) {
            struct hostile_conn *c = evs[i].data.ptr;

            if (c->fd >= 0) {
                hostile_event(c, evs[i].events, now);
            }
        }
    }
    for (i = 0; i < hostile_nconns; i++) {
        hostile_close(&hostile_conns[i], -1);
    }
    close(hostile_ep);
    free(hostile_conns);
}

/* ---- STATS ---- */

static const char *const hostile_stat_names[HOSTILE_NSTATS] = {
    "auth_failures", "auth_held", "unauthenticated_evicted", "rejected_clients",
    "metrics_rejected", "metrics_timed_out", "clients", "unauthenticated"
};

/* The counters of STATS over the Unix socket (AUTH first); -1 for one absent.  0 or -1. */
static int
hostile_stats(long long v[HOSTILE_NSTATS])
{
    struct client c;
    char line[300], name[96];
    long long x;
    int64_t deadline = client_now_ms() + HOSTILE_STATS_MS;
    bool ok = false;
    int i;

    for (i = 0; i < HOSTILE_NSTATS; i++) {
        v[i] = -1;
    }
    client_init(&c, -1, 0);
    snprintf(line, sizeof(line), "AUTH %s", hb.password);
    if (client_connect_unix(&c, hb.unix_path, deadline) != 0 || client_send(&c, line, deadline)
        || client_read_line(&c, deadline) != CLIENT_LINE || !client_is_status(c.line, "OK")
        || client_send(&c, "STATS", deadline) != 0) {
        fprintf(stderr, "redlock-hostile: STATS: %s\n", c.err[0] != '\0' ? c.err : c.line);
        client_close(&c);
        return -1;
    }
    while (client_read_line(&c, deadline) == CLIENT_LINE) {
        if (client_is_status(c.line, "END")) {
            ok = true;
            break;
        }
        if (sscanf(c.line, "STAT %95s %lld", name, &x) == 2) {
            for (i = 0; i < HOSTILE_NSTATS; i++) {
                if (strcmp(name, hostile_stat_names[i]) == 0) {
                    v[i] = x;
                }
            }
        }
    }
    client_close(&c);
    return ok ? 0 : -1;
}

/* ---- the result ---- */

static int
hostile_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

/* The q-quantile of n sorted values (nearest rank); 0 when none. */
static int64_t
hostile_q(const int64_t *v, size_t n, double q)
{
    size_t k;

    if (n == 0) {
        return 0;
    }
    k = (size_t)(q * (double)n + 0.999999);
    return v[k == 0 ? 0 : k > n ? n - 1 : k - 1];
}

/* One transport's fields of the JSON line. */
static void
hostile_print_transport(const struct hostile_legit *l)
{
    const char *t = hostile_tnames[l->t];
    int64_t *lat = malloc((l->n + 1) * sizeof(*lat)), lead_max = 0;
    size_t i, n = 0, attempts = 0, within = 0, lead = 0, lead_ok = 0;
    long long fails[HOSTILE_NF] = { 0 };

    for (i = 0; i < l->n; i++) {
        const struct hostile_attempt *a = &l->a[i];

        if (a->start_ms < hb.attack_start_ms) {
            lead++;
            lead_ok += a->fail == HOSTILE_OK;
            if (a->latency_us > lead_max) {
                lead_max = a->latency_us;
            }
            continue;
        }
        if (a->start_ms >= hb.attack_end_ms) {
            continue;
        }
        attempts++;
        fails[a->fail]++;
        if (a->fail == HOSTILE_OK && lat != NULL) {
            lat[n++] = a->latency_us;
            within += a->latency_us <= 1000000;
        }
    }
    if (lat != NULL) {
        qsort(lat, n, sizeof(*lat), hostile_cmp);
    }
    printf(",\"%s_attempts\":%zu,\"%s_admitted\":%zu,\"%s_within_1s\":%zu,\"%s_p50_us\":%lld,"
           "\"%s_p99_us\":%lld,\"%s_max_us\":%lld", t, attempts, t, n, t, within, t,
           (long long)hostile_q(lat, n, 0.5), t, (long long)hostile_q(lat, n, 0.99), t,
           (long long)(n > 0 ? lat[n - 1] : 0));
    for (i = 1; i < HOSTILE_NF; i++) {
        printf(",\"%s_%s\":%lld", t, hostile_fnames[i], fails[i]);
    }
    printf(",\"%s_lead_attempts\":%zu,\"%s_lead_admitted\":%zu,\"%s_lead_max_us\":%lld,"
           "\"%s_first_us\":%lld", t, lead, t, lead_ok, t, (long long)lead_max, t,
           (long long)(l->n > 0 ? l->a[0].latency_us : -1));
    if (l->last_err[0] != '\0') {
        fprintf(stderr, "redlock-hostile: %s: last failure: %s\n", t, l->last_err);
    }
    free(lat);
}

/* ---- the command line ---- */

static void
hostile_usage(void)
{
    fprintf(stderr, "usage: redlock-hostile --target HOST:PORT --tls-target HOST:PORT --tls-ca FILE"
            "\n    --unix PATH --metrics-port N --password PW [--attack-s S] [--lead-ms MS]\n"
            "    [--settle-ms MS] [--interval-ms MS] [--scrape-ms MS] [--timeout-ms MS]\n"
            "    [--attacks guess,pool,fds,slowloris] [--guess-conns N] [--guess-addrs N]\n"
            "    [--pool-conns N] [--pool-addrs N] [--fd-conns N] [--fd-auth]\n"
            "    [--slow-conns N] [--slow-ms MS] [--legit-source IPV4] [--reopen-ms MS]\n");
}

/* Parse --attacks: a comma list of guess, pool, fds, slowloris (or all, none).  0 or -1. */
static int
hostile_parse_attacks(const char *s)
{
    static const char *const names[4] = { "guess", "pool", "fds", "slowloris" };
    char buf[128], *tok, *save = NULL;
    int i;

    snprintf(buf, sizeof(buf), "%s", s);
    memset(hb.on, 0, sizeof(hb.on));
    for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "all") == 0) {
            memset(hb.on, 1, sizeof(hb.on));
            continue;
        }
        if (strcmp(tok, "none") == 0) {
            continue;
        }
        for (i = 0; i < 4 && strcmp(tok, names[i]) != 0; i++) {
        }
        if (i == 4) {
            return -1;
        }
        hb.on[i] = true;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "target", required_argument, NULL, 't' },
        { "tls-target", required_argument, NULL, 'T' },
        { "tls-ca", required_argument, NULL, 'C' },
        { "unix", required_argument, NULL, 'u' },
        { "metrics-port", required_argument, NULL, 'm' },
        { "password", required_argument, NULL, 'p' },
        { "attack-s", required_argument, NULL, 's' },
        { "lead-ms", required_argument, NULL, 'l' },
        { "settle-ms", required_argument, NULL, 'S' },
        { "interval-ms", required_argument, NULL, 'i' },
        { "scrape-ms", required_argument, NULL, 'r' },
        { "timeout-ms", required_argument, NULL, 'o' },
        { "attacks", required_argument, NULL, 'a' },
        { "guess-conns", required_argument, NULL, 'g' },
        { "guess-addrs", required_argument, NULL, 'G' },
        { "pool-conns", required_argument, NULL, 'q' },
        { "pool-addrs", required_argument, NULL, 'Q' },
        { "fd-conns", required_argument, NULL, 'f' },
        { "fd-auth", no_argument, NULL, 'F' },
        { "slow-conns", required_argument, NULL, 'w' },
        { "slow-ms", required_argument, NULL, 'W' },
        { "legit-source", required_argument, NULL, 'L' },
        { "reopen-ms", required_argument, NULL, 'R' },
        { NULL, 0, NULL, 0 }
    };
    struct hostile_legit legit[HOSTILE_NT];
    pthread_t scraper;
    struct rlimit rl;
    long long before[HOSTILE_NSTATS], after[HOSTILE_NSTATS];
    int64_t stats0_ms, stats1_ms;
    char host[64], port[16], names[64];
    bool have_after;
    int ch, i;

    hb.attack_s = 10;
    hb.lead_ms = 1000;
    hb.settle_ms = 1000;
    hb.interval_ms = 100;
    hb.scrape_ms = 500;
    hb.timeout_ms = 5000;
    hb.slow_ms = 500;
    hb.guess_conns = 200;
    hb.guess_addrs = 4000;
    hb.pool_conns = 64;
    hb.pool_addrs = 4;
    hb.fd_conns = 612;
    hb.slow_conns = 40;
    memset(hb.on, 1, sizeof(hb.on));
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 't': snprintf(hb.target, sizeof(hb.target), "%s", optarg); break;
        case 'T': snprintf(hb.tls_target, sizeof(hb.tls_target), "%s", optarg); break;
        case 'C': snprintf(hb.tls_ca, sizeof(hb.tls_ca), "%s", optarg); break;
        case 'u': snprintf(hb.unix_path, sizeof(hb.unix_path), "%s", optarg); break;
        case 'm': hb.metrics_port = atoi(optarg); break;
        case 'p': snprintf(hb.password, sizeof(hb.password), "%s", optarg); break;
        case 's': hb.attack_s = atof(optarg); break;
        case 'l': hb.lead_ms = atoll(optarg); break;
        case 'S': hb.settle_ms = atoll(optarg); break;
        case 'i': hb.interval_ms = atoll(optarg); break;
        case 'r': hb.scrape_ms = atoll(optarg); break;
        case 'o': hb.timeout_ms = atoll(optarg); break;
        case 'a':
            if (hostile_parse_attacks(optarg) != 0) {
                hostile_usage();
                return 2;
            }
            break;
        case 'g': hb.guess_conns = atoi(optarg); break;
        case 'G': hb.guess_addrs = atoi(optarg); break;
        case 'q': hb.pool_conns = atoi(optarg); break;
        case 'Q': hb.pool_addrs = atoi(optarg); break;
        case 'f': hb.fd_conns = atoi(optarg); break;
        case 'F': hb.fd_auth = true; break;
        case 'w': hb.slow_conns = atoi(optarg); break;
        case 'W': hb.slow_ms = atoll(optarg); break;
        case 'R': hb.reopen_ms = atoll(optarg); break;
        case 'L': snprintf(hb.legit_source, sizeof(hb.legit_source), "%s", optarg); break;
        default: hostile_usage(); return 2;
        }
    }
    if (optind != argc || hb.target[0] == '\0' || hb.tls_target[0] == '\0'
        || hb.tls_ca[0] == '\0' || hb.unix_path[0] == '\0' || hb.metrics_port <= 0
        || hb.password[0] == '\0' || hb.attack_s <= 0 || hb.interval_ms <= 0
        || hb.scrape_ms <= 0 || hb.timeout_ms <= 0 || hb.guess_addrs <= 0
        || hb.pool_addrs <= 0 || hb.pool_addrs > 250 || hb.reopen_ms < 0
        || client_split_addr(hb.target, host, sizeof(host), port, sizeof(port)) != 0) {
        hostile_usage();
        return 2;
    }
    hb.port = atoi(port);
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* Many connections of our own: the soft descriptor limit up to the hard one. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    memset(legit, 0, sizeof(legit));
    for (i = 0; i < HOSTILE_NT; i++) {
        legit[i].t = (enum hostile_transport)i;
        legit[i].a = calloc(HOSTILE_ATTEMPTS_MAX, sizeof(*legit[i].a));
        if (legit[i].a == NULL) {
            fprintf(stderr, "redlock-hostile: no memory\n");
            return 1;
        }
    }
    /* The legitimate clients and the scraper first: a service already running. */
    for (i = 0; i < HOSTILE_NT; i++) {
        if (pthread_create(&legit[i].thread, NULL, hostile_legit_main, &legit[i]) != 0) {
            fprintf(stderr, "redlock-hostile: pthread_create failed\n");
            return 1;
        }
    }
    if (pthread_create(&scraper, NULL, hostile_scraper_main, NULL) != 0) {
        fprintf(stderr, "redlock-hostile: pthread_create failed\n");
        return 1;
    }
    hostile_sleep_until(client_now_ms() + hb.lead_ms);
    stats0_ms = client_now_ms();
    if (hostile_stats(before) != 0) {
        fprintf(stderr, "redlock-hostile: no STATS before the attacks\n");
        atomic_store(&hb.stop, true);
        return 1;
    }
    hb.attack_start_ms = client_now_ms();
    hb.attack_end_ms = hb.attack_start_ms + (int64_t)(hb.attack_s * 1000);
    hostile_attack();
    hb.attack_end_ms = client_now_ms();
    atomic_store(&hb.stop, true);
    for (i = 0; i < HOSTILE_NT; i++) {
        pthread_join(legit[i].thread, NULL);
    }
    pthread_join(scraper, NULL);
    hostile_sleep_until(hb.attack_end_ms + hb.settle_ms);
    have_after = hostile_stats(after) == 0;
    stats1_ms = client_now_ms();
    snprintf(names, sizeof(names), "%s%s%s%s", hb.on[HOSTILE_GUESS] ? ",guess" : "",
             hb.on[HOSTILE_POOL] ? ",pool" : "",
             hb.on[HOSTILE_FD] ? (hb.fd_auth ? ",fds-auth" : ",fds") : "",
             hb.on[HOSTILE_SLOW] ? ",slowloris" : "");
    printf("{\"mode\":\"hostile\",\"legit_source\":\"%s\",\"attack_s\":%.3f,"
           "\"interval_ms\":%lld,\"attacks\":\"%s\"",
           hb.legit_source[0] != '\0' ? hb.legit_source : "127.0.0.1",
           (double)(hb.attack_end_ms - hb.attack_start_ms) / 1000.0, (long long)hb.interval_ms,
           names[0] != '\0' ? names + 1 : "none");
    for (i = 0; i < HOSTILE_NT; i++) {
        hostile_print_transport(&legit[i]);
    }
    printf(",\"scrapes\":%lld,\"scrapes_ok\":%lld,\"scrape_max_us\":%lld,\"lead_scrapes\":%lld,"
           "\"lead_scrapes_ok\":%lld", hs.scrapes, hs.ok, (long long)hs.max_us, hs.lead_scrapes,
           hs.lead_ok);
    printf(",\"reopen_ms\":%lld", (long long)hb.reopen_ms);
    printf(",\"guess_conns\":%d,\"guess_addrs\":%d,\"guess_groups\":1,\"pool_conns\":%d,"
           "\"pool_addrs\":%d,\"fd_conns\":%d,\"slow_conns\":%d", hb.on[HOSTILE_GUESS]
           ? hb.guess_conns : 0, hb.guess_addrs, hb.on[HOSTILE_POOL] ? hb.pool_conns : 0,
           hb.pool_addrs, hb.on[HOSTILE_FD] ? hb.fd_conns : 0,
           hb.on[HOSTILE_SLOW] ? hb.slow_conns : 0);
    printf(",\"guesses_sent\":%lld,\"guesses_wrong\":%lld,\"guesses_closed\":%lld,"
           "\"guesses_other\":%lld,\"pool_opened\":%lld,\"fd_opened\":%lld,\"fd_authed\":%lld,"
           "\"slow_opened\":%lld,\"connect_failed\":%lld,\"limit_lines_seen\":%lld,"
           "\"max_open\":%d", hc.guesses_sent, hc.guesses_wrong, hc.guesses_closed,
           hc.guesses_other, hc.pool_opened, hc.fd_opened, hc.fd_authed, hc.slow_opened,
           hc.connect_failed, hc.evicted_seen, hc.max_open);
    for (i = 0; i < HOSTILE_NSTATS - 2; i++) {
        printf(",\"%s\":%lld", hostile_stat_names[i],
               have_after && before[i] >= 0 && after[i] >= 0 ? after[i] - before[i] : -1LL);
    }
    printf(",\"stats_window_s\":%.3f,\"stats_after\":%s}\n",
           (double)(stats1_ms - stats0_ms) / 1000.0, have_after ? "true" : "false");
    for (i = 0; i < HOSTILE_NT; i++) {
        free(legit[i].a);
    }
    if (hs.last_err[0] != '\0') {
        fprintf(stderr, "redlock-hostile: scrape: last failure: %s\n", hs.last_err);
    }
    return legit[HOSTILE_TCP].n + legit[HOSTILE_TLS].n + legit[HOSTILE_UNIX].n > 0 ? 0 : 1;
}
