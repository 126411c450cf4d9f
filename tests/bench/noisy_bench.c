/*
 * noisy_bench.c: the noisy-neighbour row of `make bench`,
 * build/redlock-noisy (tests/bench/README.md, "The noisy-neighbour row").
 *
 * Does one client's load cost another client its lock, or its latency?
 * Against one daemon (TCP), in one event loop:
 *
 *     holders    --hold-conns connections holding --locks session locks
 *                between them (LOCK bench-noisy-<pid>-<i> ttl=<ttl>, all
 *                granted before the phases start); the daemon's watchdog
 *                renews each about every ttl/3; a "! LOST" line counts
 *     probe      one connection from 127.0.0.1, in a thread of its own
 *                (blocking, with the client library, so that the flood's
 *                replies, read by the event loop, never delay its
 *                timing), that every --probe-ms sends TRYLOCK
 *                bench-noisy-<pid>-probe, times it (sent to its answer
 *                read, CLOCK_MONOTONIC; an answer other than OK is timed
 *                too, and counted as a probe error) and UNLOCKs it
 *     flooders   --flood-conns connections, connection i bound to the
 *                source address 127.0.2.<1 + i mod --sources> and flooding
 *                one verb, the verbs taken in turn (--verbs, default
 *                watch,status,list): WATCH of a fresh name (and UNWATCH
 *                of the name watched --watch-keep WATCHes earlier, so the
 *                watches stay bounded), STATUS of one of the held names,
 *                or LIST bench-noisy-<pid>- (every held name, one step);
 *                each sends --rate requests a second, in bursts every
 *                --burst-ms, with at most --window of them unanswered
 *                (the rest are held back and counted, never queued
 *                without bound)
 *     stats      one connection sending STATS at each phase boundary and
 *                every NOISY_SAMPLE_MS during the flood (the most reads in
 *                flight, waiting, and in the read class's queue)
 *
 * Phases: quiet (--quiet seconds: the probe alone with the locks held),
 * flood (--flood seconds: the probe and the flooders), then the flooders
 * stop and --settle ms pass (renewal rounds in flight end) before the
 * last STATS.  The STATS counters are read at the start of the quiet
 * phase, at its end (the start of the flood), at the end of the flood
 * and after the settle; the flood's figures run from the start of the
 * flood to after the settle.
 *
 * The result is one JSON line on stdout (diagnostics on stderr):
 *
 *     {"mode":"noisy","locks":...,"held":...,"quiet_p50_us":...,
 *      "flood_p99_us":...,"flood_renewals_failed":...,...}
 *
 * with, per phase (quiet_, flood_): probes, p50_us, p99_us, max_us,
 * probe_errors, probe_late (ticks skipped while the last probe was still
 * unanswered), renewals_ok, renewals_failed, locks_lost, reconnects (sum
 * of master.<i>.reconnects); for the flood: the requests sent, answered
 * and refused per verb, held_back, pushes, list_lines, and the deltas of
 * STATS reads_refused, reads_waited, read_wait_us, reads_timed_out,
 * queue_read_written, queue_read_wait_us, queue_read_expired,
 * queue_renew_written, queue_renew_wait_us, queue_renew_expired, and the
 * sampled maxima max_reads_in_flight, max_reads_waiting,
 * max_queue_read_depth; lost ("! LOST" lines of the holders) and errors
 * (unexpected replies, closed connections; not the LOST lines).
 *
 * Exit status: 0 when the run happened (its figures may miss their
 * targets; the JSON line says how), 1 when it could not start (a
 * connection failed, the locks were not all granted within
 * NOISY_GRANT_MS), 2 on a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "client/client.h"

#define NOISY_NAME_MAX      96          /* lock names we build */
#define NOISY_FIFO          512         /* requests unanswered per connection, at most */
#define NOISY_SAMPLE_MS     250         /* STATS sampling during the flood */
#define NOISY_GRANT_MS      60000       /* deadline for every held lock's OK */
#define NOISY_PROBES_MAX    100000      /* probe latencies kept per phase */
#define NOISY_CONNS_MAX     1000        /* --flood-conns and --hold-conns upper bound */
#define NOISY_SOURCES_MAX   250         /* --sources upper bound (127.0.2.1 ..) */
#define NOISY_HOLD_DEPTH    64          /* LOCKs pipelined per holder connection */
#define NOISY_VERBS_MAX     8           /* entries of --verbs */

/* What a request was, so that its reply is read right (the FIFO of a connection). */
enum noisy_req {
    NOISY_REQ_LOCK,
    NOISY_REQ_WATCH,
    NOISY_REQ_UNWATCH,
    NOISY_REQ_STATUS,
    NOISY_REQ_LIST,
    NOISY_REQ_STATS
};

/* What a connection is for. */
enum noisy_role {
    NOISY_HOLDER,
    NOISY_FLOOD_WATCH,
    NOISY_FLOOD_STATUS,
    NOISY_FLOOD_LIST,
    NOISY_STATS
};

/* The phases of the run, in order. */
enum noisy_phase {
    NOISY_SETUP,        /* connecting, taking the locks */
    NOISY_QUIET,        /* the probe alone */
    NOISY_FLOOD,        /* the probe and the flooders */
    NOISY_SETTLE,       /* the flooders stopped; renewal rounds in flight end */
    NOISY_DONE
};

/* Flood verbs by index: requests sent, answered, refused. */
enum { NOISY_V_WATCH, NOISY_V_STATUS, NOISY_V_LIST, NOISY_NV };

static const char *const noisy_verb_names[NOISY_NV] = { "watch", "status", "list" };

/* One connection to the daemon; owned by noisy_conns. */
struct noisy_conn {
    enum noisy_role     role;               /* what it does */
    struct bufferevent *bev;                /* the connection */
    bool                up;                 /* connected */
    bool                dead;               /* closed: sends nothing more */
    uint8_t             fifo[NOISY_FIFO];   /* enum noisy_req of the requests unanswered */
    size_t              head;               /* the oldest in fifo */
    size_t              n;                  /* how many */
    size_t              flood_out;          /* of them, flood requests (not UNWATCH) */
    bool                in_list;            /* reading a LIST's lines (until END) */
    double              credit;             /* flood: requests it may send now */
    uint64_t            seq;                /* flood: WATCHes sent (the next fresh name) */
    size_t              lock_next;          /* holder: the next of its names to LOCK */
    size_t              lock_end;           /* holder: one past its last name */
    char                source[32];         /* the address it is bound to ("" none) */
};

/* Probe latencies of one phase (us), and what went wrong. */
struct noisy_probe {
    int64_t  *us;               /* TRYLOCK sent to OK read */
    size_t    n;                /* stored */
    uint64_t  errors;           /* TRYLOCK not answered OK, or UNLOCK not OK */
    uint64_t  late;             /* ticks skipped: the last probe was still unanswered */
};

/* The STATS figures read at one moment. */
struct noisy_snap {
    bool      ok;                       /* read */
    long long renewals_ok, renewals_failed, locks_lost, reconnects;
    long long reads_refused, reads_waited, read_wait_us, reads_timed_out;
    long long reads_in_flight, reads_waiting, queue_read_depth;
    long long queue_read_written, queue_read_wait_us, queue_read_expired;
    long long queue_renew_written, queue_renew_wait_us, queue_renew_expired;
};

/* Command-line settings; static storage. */
static struct {
    const char *target;         /* HOST:PORT */
    long        locks;          /* session locks held */
    long        hold_conns;     /* connections holding them */
    long        ttl_ms;         /* their ttl */
    long        flood_conns;    /* flooding connections */
    long        sources;        /* source addresses they spread over */
    double      rate;           /* requests a second per flooding connection */
    long        window;         /* unanswered flood requests per connection, at most */
    long        watch_keep;     /* WATCHes kept before each is UNWATCHed */
    long        burst_ms;       /* the flooders send what their rate allows every this */
    double      quiet_s;        /* the quiet phase */
    double      flood_s;        /* the flood phase */
    long        settle_ms;      /* after the flood, before the last STATS */
    long        probe_ms;       /* the probe's period */
    int         verbs[NOISY_VERBS_MAX]; /* --verbs, in turn over the flooders */
    size_t      nverbs;
} noisy_opt;

static struct event_base   *noisy_base;
static struct noisy_conn   *noisy_conns;
static size_t               noisy_nconns;
static struct noisy_conn   *noisy_stats_conn;
static enum noisy_phase     noisy_phase = NOISY_SETUP;
static struct noisy_probe   noisy_probes[2];    /* [0] quiet, [1] flood; the probe
                                                   thread's until it is joined */
static atomic_int           noisy_phase_now;    /* noisy_phase, for the probe thread */
static atomic_int           noisy_probe_state;  /* 0 connecting, 1 up, -1 failed */
static pthread_t            noisy_probe_thread;
static char                 noisy_probe_name[NOISY_NAME_MAX]; /* its lock */
static struct noisy_snap    noisy_snaps[4];     /* quiet start, flood start, flood end, settled */
static struct noisy_snap    noisy_cur;          /* the STATS being read */
static struct noisy_snap    noisy_max;          /* the most seen in the flood's samples */
static int                  noisy_stats_for[NOISY_FIFO]; /* per STATS unanswered, in order:
                                                   the snapshot it fills (-1: a sample) */
static size_t               noisy_stats_head, noisy_stats_n;
static uint64_t             noisy_sent[NOISY_NV], noisy_answered[NOISY_NV];
static uint64_t             noisy_refused[NOISY_NV];   /* ERR LIMIT ... reads_per_second */
static uint64_t             noisy_timed_out[NOISY_NV]; /* ERR LIMIT ... read_wait_ms */
static uint64_t             noisy_other_err[NOISY_NV]; /* any other ERR */
static uint64_t             noisy_held_back, noisy_pushes, noisy_list_lines;
static uint64_t             noisy_held, noisy_lost, noisy_errors;
static size_t               noisy_connected;
static int64_t              noisy_last_tick_us;
static struct event        *noisy_tick_ev, *noisy_sample_ev, *noisy_phase_ev;
static int64_t              noisy_phase_start_us;
static double               noisy_phase_len_s[2]; /* measured: quiet, flood */

static void noisy_next_phase(void);

static int64_t
noisy_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static struct timeval
noisy_tv(int64_t ms)
{
    struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
                          .tv_usec = (suseconds_t)(ms % 1000 * 1000) };

    return tv;
}

/* An unexpected reply or event: counted, and the first few printed. */
static void
noisy_error(const char *what, const char *line)
{
    if (noisy_errors++ < 10) {
        fprintf(stderr, "redlock-noisy: %s: '%s'\n", what, line != NULL ? line : "");
    }
}

/* Send one line and remember what it was. */
static void
noisy_send(struct noisy_conn *c, enum noisy_req req, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
noisy_send(struct noisy_conn *c, enum noisy_req req, const char *fmt, ...)
{
    va_list ap;

    if (c->dead || c->n == NOISY_FIFO) {
        noisy_error("request not sent (connection closed or its queue full)", NULL);
        return;
    }
    va_start(ap, fmt);
    evbuffer_add_vprintf(bufferevent_get_output(c->bev), fmt, ap);
    va_end(ap);
    evbuffer_add(bufferevent_get_output(c->bev), "\n", 1);
    c->fifo[(c->head + c->n++) % NOISY_FIFO] = (uint8_t)req;
}

/* The oldest unanswered request is answered. */
static enum noisy_req
noisy_pop(struct noisy_conn *c)
{
    enum noisy_req req = (enum noisy_req)c->fifo[c->head];

    c->head = (c->head + 1) % NOISY_FIFO;
    c->n--;
    return req;
}

/* ---- the holders ---- */

static void
noisy_hold_more(struct noisy_conn *c)
{
    while (c->lock_next < c->lock_end && c->n < NOISY_HOLD_DEPTH) {
        noisy_send(c, NOISY_REQ_LOCK, "LOCK bench-noisy-%ld-%zu ttl=%ld", (long)getpid(),
                   c->lock_next++, noisy_opt.ttl_ms);
    }
}

/* ---- the probe ---- */

static int
noisy_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

/* Enter phase p (main thread); the probe thread sees it too. */
static void
noisy_set_phase(enum noisy_phase p)
{
    noisy_phase = p;
    atomic_store(&noisy_phase_now, (int)p);
}

/* The probe's next reply line (pushes skipped), or NULL (counted in p). */
static const char *
noisy_probe_read(struct client *c, struct noisy_probe *p, const char *what)
{
    enum client_read r;

    do {
        r = client_read_line(c, client_now_ms() + NOISY_GRANT_MS);
    } while (r == CLIENT_LINE && client_is_push(c->line));
    if (r != CLIENT_LINE) {
        p->errors++;
        fprintf(stderr, "redlock-noisy: probe %s: %s\n", what,
                r == CLIENT_TIMEOUT ? "no answer" : r == CLIENT_EOF ? "closed" : c->err);
        return NULL;
    }
    return c->line;
}

/* One probe: TRYLOCK timed, then UNLOCK.  Returns -1 when the connection is gone. */
static int
noisy_probe_once(struct client *c, struct noisy_probe *p)
{
    char line[NOISY_NAME_MAX + 16];
    const char *got;
    int64_t t0;

    snprintf(line, sizeof(line), "TRYLOCK %s", noisy_probe_name);
    t0 = noisy_now_us();
    if (client_send(c, line, client_now_ms() + NOISY_GRANT_MS) != 0
        || (got = noisy_probe_read(c, p, "TRYLOCK")) == NULL) {
        return -1;
    }
    /* Every answer is timed: an error after a stall is the worst probe, not none. */
    if (p->n < NOISY_PROBES_MAX) {
        p->us[p->n++] = noisy_now_us() - t0;
    }
    if (strncmp(got, "OK ", 3) != 0) {
        if (p->errors++ < 3) {
            fprintf(stderr, "redlock-noisy: probe TRYLOCK: '%s'\n", got);
        }
        return 0;
    }
    snprintf(line, sizeof(line), "UNLOCK %s", noisy_probe_name);
    if (client_send(c, line, client_now_ms() + NOISY_GRANT_MS) != 0
        || (got = noisy_probe_read(c, p, "UNLOCK")) == NULL) {
        return -1;
    }
    if (strncmp(got, "OK ", 3) != 0) {
        p->errors++;
        fprintf(stderr, "redlock-noisy: probe UNLOCK: '%s'\n", got);
    }
    return 0;
}

/*
 * The probe thread: connect, then every --probe-ms of the quiet and
 * flood phases one probe (a tick that finds the last one unanswered is
 * skipped and counted late), until the main thread says NOISY_DONE.
 */
static void *
noisy_probe_main(void *arg)
{
    struct client c;
    struct timespec ts;
    int64_t period = noisy_opt.probe_ms * 1000, next, now;
    int one = 1, ph;
    struct noisy_probe *p;

    (void)arg;
    client_init(&c, -1, 0);
    if (client_connect_tcp(&c, noisy_opt.target, client_now_ms() + NOISY_GRANT_MS) != 0) {
        fprintf(stderr, "redlock-noisy: probe: %s\n", c.err);
        atomic_store(&noisy_probe_state, -1);
        return NULL;
    }
    (void)setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    atomic_store(&noisy_probe_state, 1);
    next = noisy_now_us();
    while ((ph = atomic_load(&noisy_phase_now)) != NOISY_DONE) {
        p = &noisy_probes[ph == NOISY_FLOOD];
        if ((ph == NOISY_QUIET || ph == NOISY_FLOOD) && noisy_probe_once(&c, p) != 0) {
            break;
        }
        next += period;
        for (now = noisy_now_us(); next <= now; next += period) {
            p->late += ph == NOISY_QUIET || ph == NOISY_FLOOD;
        }
        ts.tv_sec = (time_t)(next / 1000000);
        ts.tv_nsec = (long)(next % 1000000 * 1000);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
    }
    client_close(&c);
    return NULL;
}

/* ---- the flooders ---- */

/* Send what a flooder's credit allows, at most its window unanswered. */
static void
noisy_flood_send(struct noisy_conn *c)
{
    long pid = (long)getpid();
    size_t idx = (size_t)(c - noisy_conns);

    while (c->credit >= 1.0) {
        c->credit -= 1.0;
        if (c->flood_out >= (size_t)noisy_opt.window || c->n + 2 > NOISY_FIFO) {
            noisy_held_back++;
            continue;
        }
        c->flood_out++;
        switch (c->role) {
        case NOISY_FLOOD_WATCH:
            noisy_sent[NOISY_V_WATCH]++;
            noisy_send(c, NOISY_REQ_WATCH, "WATCH bench-noisy-%ld-w%zu-%" PRIu64, pid, idx,
                       c->seq);
            if (c->seq >= (uint64_t)noisy_opt.watch_keep) {
                noisy_send(c, NOISY_REQ_UNWATCH, "UNWATCH bench-noisy-%ld-w%zu-%" PRIu64, pid,
                           idx, c->seq - (uint64_t)noisy_opt.watch_keep);
            }
            c->seq++;
            break;
        case NOISY_FLOOD_STATUS:
            noisy_sent[NOISY_V_STATUS]++;
            noisy_send(c, NOISY_REQ_STATUS, "STATUS bench-noisy-%ld-%" PRIu64, pid,
                       c->seq++ % (uint64_t)noisy_opt.locks);
            break;
        default:
            noisy_sent[NOISY_V_LIST]++;
            noisy_send(c, NOISY_REQ_LIST, "LIST bench-noisy-%ld-", pid);
            break;
        }
    }
}

static void
noisy_flood_tick(evutil_socket_t fd, short what, void *arg)
{
    int64_t now = noisy_now_us();
    double add = (double)(now - noisy_last_tick_us) / 1e6 * noisy_opt.rate;
    size_t i;

    (void)fd;
    (void)what;
    (void)arg;
    noisy_last_tick_us = now;
    if (noisy_phase != NOISY_FLOOD) {
        return;
    }
    for (i = 0; i < noisy_nconns; i++) {
        struct noisy_conn *c = &noisy_conns[i];

        if (c->role == NOISY_FLOOD_WATCH || c->role == NOISY_FLOOD_STATUS
            || c->role == NOISY_FLOOD_LIST) {
            c->credit += add;
            noisy_flood_send(c);
        }
    }
}

/* The verb index of a flood request. */
static int
noisy_verb_of(enum noisy_req req)
{
    return req == NOISY_REQ_WATCH ? NOISY_V_WATCH : req == NOISY_REQ_STATUS ? NOISY_V_STATUS
                                                                          : NOISY_V_LIST;
}

/* A flood request's reply (for LIST: its END or its error). */
static void
noisy_flood_answer(struct noisy_conn *c, enum noisy_req req, const char *line)
{
    int v = noisy_verb_of(req);

    c->flood_out--;
    if (client_is_err(line, "LIMIT")) {
        if (strstr(line, "reads_per_second") != NULL) {
            noisy_refused[v]++;
        } else if (strstr(line, "read_wait_ms") != NULL) {
            noisy_timed_out[v]++;
        } else {
            noisy_other_err[v]++;
        }
    } else if (strncmp(line, "ERR", 3) == 0) {
        noisy_other_err[v]++;
    } else {
        noisy_answered[v]++;
    }
}

/* ---- STATS ---- */

static void
noisy_stats_ask(int snap)
{
    if (snap < 0 && noisy_stats_n > 0) {
        return;     /* a sample while a STATS is unanswered: skip it */
    }
    noisy_stats_for[(noisy_stats_head + noisy_stats_n++) % NOISY_FIFO] = snap;
    noisy_send(noisy_stats_conn, NOISY_REQ_STATS, "STATS");
}

/* One "STAT name value" line into noisy_cur. */
static void
noisy_stats_line(const char *line)
{
    static const struct {
        const char *name;
        size_t      off;
    } rows[] = {
#define NOISY_ROW(f) { #f, offsetof(struct noisy_snap, f) }
        NOISY_ROW(renewals_ok), NOISY_ROW(renewals_failed), NOISY_ROW(locks_lost),
        NOISY_ROW(reads_refused), NOISY_ROW(reads_waited), NOISY_ROW(read_wait_us),
        NOISY_ROW(reads_timed_out), NOISY_ROW(reads_in_flight), NOISY_ROW(reads_waiting),
        NOISY_ROW(queue_read_depth), NOISY_ROW(queue_read_written),
        NOISY_ROW(queue_read_wait_us), NOISY_ROW(queue_read_expired),
        NOISY_ROW(queue_renew_written), NOISY_ROW(queue_renew_wait_us),
        NOISY_ROW(queue_renew_expired),
#undef NOISY_ROW
    };
    char name[96];
    long long v;
    size_t i, len;

    if (sscanf(line, "STAT %95s %lld", name, &v) != 2) {
        return;     /* a value that is no number (version, addresses) */
    }
    len = strlen(name);
    if (strncmp(name, "master.", 7) == 0 && len > 11
        && strcmp(name + len - 11, ".reconnects") == 0) {
        noisy_cur.reconnects += v;
        return;
    }
    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        if (strcmp(name, rows[i].name) == 0) {
            *(long long *)(void *)((char *)&noisy_cur + rows[i].off) = v;
            return;
        }
    }
}

/* A STATS ended: its figures go where it was asked for. */
static void
noisy_stats_end(void)
{
    int snap = noisy_stats_for[noisy_stats_head];

    noisy_stats_head = (noisy_stats_head + 1) % NOISY_FIFO;
    noisy_stats_n--;
    noisy_cur.ok = true;
    if (snap >= 0) {
        noisy_snaps[snap] = noisy_cur;
        if (snap == 3) {
            noisy_set_phase(NOISY_DONE);
            event_base_loopbreak(noisy_base);
        }
    } else {
#define NOISY_MAX(f) (noisy_max.f = noisy_cur.f > noisy_max.f ? noisy_cur.f : noisy_max.f)
        NOISY_MAX(reads_in_flight);
        NOISY_MAX(reads_waiting);
        NOISY_MAX(queue_read_depth);
#undef NOISY_MAX
    }
    memset(&noisy_cur, 0, sizeof(noisy_cur));
}

static void
noisy_sample_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (noisy_phase == NOISY_FLOOD) {
        noisy_stats_ask(-1);
    }
}

/* ---- replies ---- */

static void
noisy_line(struct noisy_conn *c, const char *line)
{
    enum noisy_req req;

    if (client_is_push(line)) {
        if (strncmp(line, "! LOST", 6) == 0) {
            if (noisy_lost++ < 3) {
                fprintf(stderr, "redlock-noisy: %s\n", line);
            }
        } else {
            noisy_pushes++;
        }
        return;
    }
    if (c->n == 0) {
        noisy_error("a reply to nothing", line);
        return;
    }
    req = (enum noisy_req)c->fifo[c->head];
    if (req == NOISY_REQ_LIST || req == NOISY_REQ_STATS) {
        /* Many lines: until END (or an error instead). */
        if (strcmp(line, "END") != 0 && strncmp(line, "ERR", 3) != 0) {
            if (req == NOISY_REQ_STATS) {
                noisy_stats_line(line);
            } else {
                noisy_list_lines++;
            }
            return;
        }
    }
    (void)noisy_pop(c);
    switch (req) {
    case NOISY_REQ_LOCK:
        if (strncmp(line, "OK ", 3) == 0) {
            noisy_held++;
            if (noisy_held == (uint64_t)noisy_opt.locks && noisy_phase == NOISY_SETUP
                && noisy_connected == noisy_nconns) {
                noisy_next_phase();
            }
        } else {
            noisy_error("LOCK", line);
        }
        noisy_hold_more(c);
        break;
    case NOISY_REQ_WATCH:
    case NOISY_REQ_STATUS:
    case NOISY_REQ_LIST:
        noisy_flood_answer(c, req, line);
        break;
    case NOISY_REQ_UNWATCH:
        if (strncmp(line, "OK ", 3) != 0) {
            noisy_error("UNWATCH", line);
        }
        break;
    case NOISY_REQ_STATS:
        if (strcmp(line, "END") != 0) {
            noisy_error("STATS", line);
        }
        noisy_stats_end();
        break;
    }
}

static void
noisy_read_cb(struct bufferevent *bev, void *arg)
{
    struct noisy_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t len;
    char *line;

    while ((line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF)) != NULL) {
        noisy_line(c, line);
        free(line);
    }
    if (c->role == NOISY_FLOOD_WATCH || c->role == NOISY_FLOOD_STATUS
        || c->role == NOISY_FLOOD_LIST) {
        noisy_flood_send(c);
    }
}

static void
noisy_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct noisy_conn *c = arg;
    int one = 1;

    if (what & BEV_EVENT_CONNECTED) {
        (void)setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->up = true;
        if (++noisy_connected == noisy_nconns && noisy_held == (uint64_t)noisy_opt.locks
            && noisy_phase == NOISY_SETUP) {
            noisy_next_phase();
        }
        if (c->role == NOISY_HOLDER) {
            noisy_hold_more(c);
        }
        return;
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        fprintf(stderr, "redlock-noisy: connection %zu (%s) %s\n", (size_t)(c - noisy_conns),
                c->source[0] != '\0' ? c->source : "127.0.0.1",
                c->up ? "closed by the daemon" : "could not connect");
        noisy_errors++;
        c->dead = true;
        bufferevent_disable(bev, EV_READ | EV_WRITE);
        if (!c->up) {
            event_base_loopbreak(noisy_base);
        }
    }
}

/* ---- phases ---- */

static void
noisy_phase_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    noisy_next_phase();
}

/* Move to the next phase: read STATS at its start, arm its end. */
static void
noisy_next_phase(void)
{
    int64_t now = noisy_now_us();
    struct timeval tv;
    size_t i;

    switch (noisy_phase) {
    case NOISY_SETUP:
        noisy_set_phase(NOISY_QUIET);
        noisy_stats_ask(0);
        tv = noisy_tv((int64_t)(noisy_opt.quiet_s * 1000));
        break;
    case NOISY_QUIET:
        noisy_phase_len_s[0] = (double)(now - noisy_phase_start_us) / 1e6;
        noisy_set_phase(NOISY_FLOOD);
        noisy_stats_ask(1);
        noisy_last_tick_us = now;
        tv = noisy_tv((int64_t)(noisy_opt.flood_s * 1000));
        break;
    case NOISY_FLOOD:
        noisy_phase_len_s[1] = (double)(now - noisy_phase_start_us) / 1e6;
        noisy_set_phase(NOISY_SETTLE);
        for (i = 0; i < noisy_nconns; i++) {
            noisy_conns[i].credit = 0;
        }
        noisy_stats_ask(2);
        tv = noisy_tv(noisy_opt.settle_ms);
        break;
    default:
        noisy_stats_ask(3);     /* its END ends the loop */
        return;
    }
    noisy_phase_start_us = now;
    event_add(noisy_phase_ev, &tv);
}

/* ---- setup ---- */

/* Open connection c, bound to source when it is not NULL.  Returns 0 or -1. */
static int
noisy_open(struct noisy_conn *c, const struct sockaddr_in *to, const char *source)
{
    struct sockaddr_in from;
    evutil_socket_t fd;

    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        fprintf(stderr, "redlock-noisy: socket: %s\n", strerror(errno));
        return -1;
    }
    if (source != NULL) {
        memset(&from, 0, sizeof(from));
        from.sin_family = AF_INET;
        if (inet_pton(AF_INET, source, &from.sin_addr) != 1
            || bind(fd, (const struct sockaddr *)&from, sizeof(from)) != 0) {
            fprintf(stderr, "redlock-noisy: bind %s: %s\n", source, strerror(errno));
            close(fd);
            return -1;
        }
        snprintf(c->source, sizeof(c->source), "%s", source);
    }
    if (evutil_make_socket_nonblocking(fd) != 0) {
        close(fd);
        return -1;
    }
    c->bev = bufferevent_socket_new(noisy_base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (c->bev == NULL) {
        close(fd);
        return -1;
    }
    bufferevent_setcb(c->bev, noisy_read_cb, NULL, noisy_event_cb, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    if (bufferevent_socket_connect(c->bev, (const struct sockaddr *)to, sizeof(*to)) != 0) {
        fprintf(stderr, "redlock-noisy: connect to %s failed\n", noisy_opt.target);
        return -1;
    }
    return 0;
}

static int
noisy_setup(void)
{
    struct sockaddr_in to;
    char host[64], port[16], source[32];
    size_t i, per, k = 0;
    long j;

    if (client_split_addr(noisy_opt.target, host, sizeof(host), port, sizeof(port)) != 0) {
        fprintf(stderr, "redlock-noisy: --target: HOST:PORT\n");
        return -1;
    }
    memset(&to, 0, sizeof(to));
    to.sin_family = AF_INET;
    to.sin_port = htons((uint16_t)atoi(port));
    if (inet_pton(AF_INET, host, &to.sin_addr) != 1) {
        fprintf(stderr, "redlock-noisy: --target: an IPv4 address, not '%s'\n", host);
        return -1;
    }
    noisy_nconns = (size_t)(noisy_opt.hold_conns + noisy_opt.flood_conns) + 1;
    noisy_conns = calloc(noisy_nconns, sizeof(*noisy_conns));
    noisy_probes[0].us = calloc(NOISY_PROBES_MAX, sizeof(int64_t));
    noisy_probes[1].us = calloc(NOISY_PROBES_MAX, sizeof(int64_t));
    if (noisy_conns == NULL || noisy_probes[0].us == NULL || noisy_probes[1].us == NULL) {
        fprintf(stderr, "redlock-noisy: out of memory\n");
        return -1;
    }
    per = (size_t)((noisy_opt.locks + noisy_opt.hold_conns - 1) / noisy_opt.hold_conns);
    for (j = 0; j < noisy_opt.hold_conns; j++, k++) {
        noisy_conns[k].role = NOISY_HOLDER;
        noisy_conns[k].lock_next = (size_t)j * per;
        noisy_conns[k].lock_end = (size_t)j * per + per;
        if (noisy_conns[k].lock_end > (size_t)noisy_opt.locks) {
            noisy_conns[k].lock_end = (size_t)noisy_opt.locks;
        }
        if (noisy_conns[k].lock_next > noisy_conns[k].lock_end) {
            noisy_conns[k].lock_next = noisy_conns[k].lock_end;
        }
    }
    for (j = 0; j < noisy_opt.flood_conns; j++, k++) {
        int v = noisy_opt.verbs[(size_t)j % noisy_opt.nverbs];

        noisy_conns[k].role = v == NOISY_V_WATCH ? NOISY_FLOOD_WATCH
                              : v == NOISY_V_STATUS ? NOISY_FLOOD_STATUS : NOISY_FLOOD_LIST;
    }
    noisy_stats_conn = &noisy_conns[k++];
    noisy_stats_conn->role = NOISY_STATS;
    for (i = 0; i < noisy_nconns; i++) {
        const char *src = NULL;

        if (i >= (size_t)noisy_opt.hold_conns
            && i < (size_t)(noisy_opt.hold_conns + noisy_opt.flood_conns)) {
            snprintf(source, sizeof(source), "127.0.2.%ld",
                     1 + (long)(i - (size_t)noisy_opt.hold_conns) % noisy_opt.sources);
            src = source;
        }
        if (noisy_open(&noisy_conns[i], &to, src) != 0) {
            return -1;
        }
    }
    return 0;
}

/* ---- the result ---- */

static int64_t
noisy_pct(struct noisy_probe *p, int pct)
{
    size_t i;

    if (p->n == 0) {
        return -1;
    }
    i = (p->n * (size_t)pct + 99) / 100;
    return p->us[i > 0 ? i - 1 : 0];
}

static void
noisy_print_phase(const char *name, struct noisy_probe *p, const struct noisy_snap *a,
                  const struct noisy_snap *b, double secs)
{
    qsort(p->us, p->n, sizeof(int64_t), noisy_cmp_i64);
    printf(",\"%s_s\":%.2f,\"%s_probes\":%zu,\"%s_p50_us\":%" PRId64 ",\"%s_p99_us\":%" PRId64
           ",\"%s_max_us\":%" PRId64 ",\"%s_probe_errors\":%" PRIu64 ",\"%s_probe_late\":%"
           PRIu64, name, secs, name, p->n, name, noisy_pct(p, 50), name, noisy_pct(p, 99), name,
           p->n > 0 ? p->us[p->n - 1] : -1, name, p->errors, name, p->late);
    if (a->ok && b->ok) {
        printf(",\"%s_renewals_ok\":%lld,\"%s_renewals_failed\":%lld,\"%s_locks_lost\":%lld"
               ",\"%s_reconnects\":%lld", name, b->renewals_ok - a->renewals_ok, name,
               b->renewals_failed - a->renewals_failed, name, b->locks_lost - a->locks_lost,
               name, b->reconnects - a->reconnects);
    }
}

static void
noisy_print(void)
{
    const struct noisy_snap *f0 = &noisy_snaps[1], *f1 = &noisy_snaps[3];
    size_t v;

    printf("{\"mode\":\"noisy\",\"locks\":%ld,\"held\":%" PRIu64 ",\"ttl_ms\":%ld"
           ",\"flood_conns\":%ld,\"sources\":%ld,\"rate\":%.0f,\"window\":%ld",
           noisy_opt.locks, noisy_held, noisy_opt.ttl_ms, noisy_opt.flood_conns,
           noisy_opt.sources, noisy_opt.rate, noisy_opt.window);
    noisy_print_phase("quiet", &noisy_probes[0], &noisy_snaps[0], &noisy_snaps[1],
                      noisy_phase_len_s[0]);
    noisy_print_phase("flood", &noisy_probes[1], f0, f1, noisy_phase_len_s[1]);
    for (v = 0; v < NOISY_NV; v++) {
        printf(",\"sent_%s\":%" PRIu64 ",\"ok_%s\":%" PRIu64 ",\"refused_%s\":%" PRIu64
               ",\"timed_out_%s\":%" PRIu64 ",\"err_%s\":%" PRIu64, noisy_verb_names[v],
               noisy_sent[v], noisy_verb_names[v], noisy_answered[v], noisy_verb_names[v],
               noisy_refused[v], noisy_verb_names[v], noisy_timed_out[v], noisy_verb_names[v],
               noisy_other_err[v]);
    }
    printf(",\"held_back\":%" PRIu64 ",\"pushes\":%" PRIu64 ",\"list_lines\":%" PRIu64,
           noisy_held_back, noisy_pushes, noisy_list_lines);
    if (f0->ok && f1->ok) {
        printf(",\"reads_refused\":%lld,\"reads_waited\":%lld,\"read_wait_us\":%lld"
               ",\"reads_timed_out\":%lld,\"queue_read_written\":%lld"
               ",\"queue_read_wait_us\":%lld,\"queue_read_expired\":%lld"
               ",\"queue_renew_written\":%lld,\"queue_renew_wait_us\":%lld"
               ",\"queue_renew_expired\":%lld",
               f1->reads_refused - f0->reads_refused, f1->reads_waited - f0->reads_waited,
               f1->read_wait_us - f0->read_wait_us, f1->reads_timed_out - f0->reads_timed_out,
               f1->queue_read_written - f0->queue_read_written,
               f1->queue_read_wait_us - f0->queue_read_wait_us,
               f1->queue_read_expired - f0->queue_read_expired,
               f1->queue_renew_written - f0->queue_renew_written,
               f1->queue_renew_wait_us - f0->queue_renew_wait_us,
               f1->queue_renew_expired - f0->queue_renew_expired);
    }
    printf(",\"max_reads_in_flight\":%lld,\"max_reads_waiting\":%lld"
           ",\"max_queue_read_depth\":%lld,\"lost\":%" PRIu64 ",\"errors\":%" PRIu64 "}\n",
           noisy_max.reads_in_flight, noisy_max.reads_waiting, noisy_max.queue_read_depth,
           noisy_lost, noisy_errors);
    fflush(stdout);
}

/* ---- command line ---- */

static void
noisy_usage(FILE *f)
{
    fprintf(f,
            "usage: redlock-noisy --target HOST:PORT [options]\n"
            "  -T, --target HOST:PORT   the daemon (TCP, IPv4)\n"
            "  -n, --locks N            session locks held (default 1000)\n"
            "  -H, --hold-conns N       connections holding them (default 10)\n"
            "  -t, --ttl MS             their ttl (default 1000)\n"
            "  -c, --flood-conns N      flooding connections (default 24)\n"
            "  -s, --sources K          source addresses 127.0.2.1 .. 127.0.2.K they\n"
            "                           spread over (default 8)\n"
            "  -r, --rate R             requests a second per flooding connection\n"
            "                           (default 1000)\n"
            "  -w, --window N           unanswered requests per flooding connection, at\n"
            "                           most (default 128)\n"
            "  -V, --verbs LIST         the verbs flooded, in turn over the connections\n"
            "                           (default watch,status,list)\n"
            "  -k, --watch-keep N       WATCHes before each is UNWATCHed (default 100)\n"
            "  -q, --quiet SECONDS      the quiet phase (default 10)\n"
            "  -f, --flood SECONDS      the flood phase (default 10)\n"
            "  -S, --settle MS          after the flood, before the last STATS (default 1500)\n"
            "  -p, --probe-ms MS        the probe's period (default 100)\n"
            "  -b, --burst-ms MS        the flooders send what their rate allows in bursts\n"
            "                           this far apart (default 100: 100 requests at once\n"
            "                           at 1000/s)\n"
            "Prints one JSON line (see the head of noisy_bench.c).\n");
}

static int
noisy_parse_verbs(char *spec)
{
    char *save = NULL, *item;
    int v;

    noisy_opt.nverbs = 0;
    for (item = strtok_r(spec, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        for (v = 0; v < NOISY_NV && strcmp(item, noisy_verb_names[v]) != 0; v++) {
        }
        if (v == NOISY_NV || noisy_opt.nverbs == NOISY_VERBS_MAX) {
            fprintf(stderr, "redlock-noisy: --verbs: watch, status or list, at most %d\n",
                    NOISY_VERBS_MAX);
            return -1;
        }
        noisy_opt.verbs[noisy_opt.nverbs++] = v;
    }
    return noisy_opt.nverbs > 0 ? 0 : -1;
}

/* A number of optarg within lo..hi, or -1 with a message. */
static int
noisy_num(const char *opt, double lo, double hi, double *out)
{
    char *end;

    errno = 0;
    *out = strtod(optarg, &end);
    if (errno != 0 || *end != '\0' || optarg[0] == '\0' || !(*out >= lo) || *out > hi) {
        fprintf(stderr, "redlock-noisy: --%s: %g..%g\n", opt, lo, hi);
        return -1;
    }
    return 0;
}

static int
noisy_parse(int argc, char **argv)
{
    static const struct option longs[] = {
        { "target", required_argument, NULL, 'T' },
        { "locks", required_argument, NULL, 'n' },
        { "hold-conns", required_argument, NULL, 'H' },
        { "ttl", required_argument, NULL, 't' },
        { "flood-conns", required_argument, NULL, 'c' },
        { "sources", required_argument, NULL, 's' },
        { "rate", required_argument, NULL, 'r' },
        { "window", required_argument, NULL, 'w' },
        { "verbs", required_argument, NULL, 'V' },
        { "watch-keep", required_argument, NULL, 'k' },
        { "quiet", required_argument, NULL, 'q' },
        { "flood", required_argument, NULL, 'f' },
        { "settle", required_argument, NULL, 'S' },
        { "probe-ms", required_argument, NULL, 'p' },
        { "burst-ms", required_argument, NULL, 'b' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    char verbs[] = "watch,status,list";
    double d;
    int ch;

    noisy_opt.locks = 1000;
    noisy_opt.hold_conns = 10;
    noisy_opt.ttl_ms = 1000;
    noisy_opt.flood_conns = 24;
    noisy_opt.sources = 8;
    noisy_opt.rate = 1000;
    noisy_opt.window = 128;
    noisy_opt.watch_keep = 100;
    noisy_opt.burst_ms = 100;
    noisy_opt.quiet_s = 10;
    noisy_opt.flood_s = 10;
    noisy_opt.settle_ms = 1500;
    noisy_opt.probe_ms = 100;
    (void)noisy_parse_verbs(verbs);
    while ((ch = getopt_long(argc, argv, "T:n:H:t:c:s:r:w:V:k:q:f:S:p:b:h", longs, NULL)) != -1) {
        switch (ch) {
        case 'T':
            noisy_opt.target = optarg;
            break;
        case 'V':
            if (noisy_parse_verbs(optarg) != 0) {
                return -1;
            }
            break;
        case 'h':
            noisy_usage(stdout);
            exit(0);
        case 'n':
            if (noisy_num("locks", 1, 1000000, &d) != 0) {
                return -1;
            }
            noisy_opt.locks = (long)d;
            break;
        case 'H':
        case 'c':
            if (noisy_num(ch == 'H' ? "hold-conns" : "flood-conns", ch == 'H' ? 1 : 0,
                          NOISY_CONNS_MAX, &d) != 0) {
                return -1;
            }
            *(ch == 'H' ? &noisy_opt.hold_conns : &noisy_opt.flood_conns) = (long)d;
            break;
        case 't':
            if (noisy_num("ttl", 1, 86400000, &d) != 0) {
                return -1;
            }
            noisy_opt.ttl_ms = (long)d;
            break;
        case 's':
            if (noisy_num("sources", 1, NOISY_SOURCES_MAX, &d) != 0) {
                return -1;
            }
            noisy_opt.sources = (long)d;
            break;
        case 'r':
            if (noisy_num("rate", 1, 1000000, &noisy_opt.rate) != 0) {
                return -1;
            }
            break;
        case 'w':
            if (noisy_num("window", 1, NOISY_FIFO / 2, &d) != 0) {
                return -1;
            }
            noisy_opt.window = (long)d;
            break;
        case 'k':
            if (noisy_num("watch-keep", 1, 100000, &d) != 0) {
                return -1;
            }
            noisy_opt.watch_keep = (long)d;
            break;
        case 'q':
        case 'f':
            if (noisy_num(ch == 'q' ? "quiet" : "flood", 0.1, 86400, &d) != 0) {
                return -1;
            }
            *(ch == 'q' ? &noisy_opt.quiet_s : &noisy_opt.flood_s) = d;
            break;
        case 'S':
        case 'p':
        case 'b':
            if (noisy_num(ch == 'S' ? "settle" : ch == 'p' ? "probe-ms" : "burst-ms", 1, 3600000,
                          &d) != 0) {
                return -1;
            }
            *(ch == 'S' ? &noisy_opt.settle_ms : ch == 'p' ? &noisy_opt.probe_ms
              : &noisy_opt.burst_ms) = (long)d;
            break;
        default:
            return -1;
        }
    }
    if (optind != argc || noisy_opt.target == NULL) {
        return -1;
    }
    if (noisy_opt.hold_conns > noisy_opt.locks) {
        noisy_opt.hold_conns = noisy_opt.locks;
    }
    return 0;
}

/* The soft RLIMIT_NOFILE up to the hard one (a few hundred connections). */
static void
noisy_raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Nothing happened within NOISY_GRANT_MS of the start: give up. */
static void
noisy_setup_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (noisy_phase == NOISY_SETUP) {
        fprintf(stderr, "redlock-noisy: %" PRIu64 " of %ld locks granted, %zu of %zu "
                "connections up, within %d ms\n", noisy_held, noisy_opt.locks, noisy_connected,
                noisy_nconns, NOISY_GRANT_MS);
        event_base_loopbreak(noisy_base);
    }
}

int
main(int argc, char **argv)
{
    struct event *deadline;
    struct timeval tv;
    size_t i;
    int rc = 0;

    if (noisy_parse(argc, argv) != 0) {
        noisy_usage(stderr);
        return 2;
    }
    noisy_raise_nofile();
    signal(SIGPIPE, SIG_IGN);
    noisy_base = event_base_new();
    if (noisy_base == NULL) {
        fprintf(stderr, "redlock-noisy: event_base_new failed\n");
        return 1;
    }
    noisy_tick_ev = event_new(noisy_base, -1, EV_PERSIST, noisy_flood_tick, NULL);
    noisy_sample_ev = event_new(noisy_base, -1, EV_PERSIST, noisy_sample_tick, NULL);
    noisy_phase_ev = event_new(noisy_base, -1, 0, noisy_phase_cb, NULL);
    deadline = event_new(noisy_base, -1, 0, noisy_setup_deadline, NULL);
    if (noisy_tick_ev == NULL || noisy_sample_ev == NULL || noisy_phase_ev == NULL
        || deadline == NULL || noisy_setup() != 0) {
        return 1;
    }
    snprintf(noisy_probe_name, sizeof(noisy_probe_name), "bench-noisy-%ld-probe",
             (long)getpid());
    if (pthread_create(&noisy_probe_thread, NULL, noisy_probe_main, NULL) != 0) {
        fprintf(stderr, "redlock-noisy: pthread_create failed\n");
        return 1;
    }
    /* The probe is connected before the phases start (its own deadline bounds this). */
    while (atomic_load(&noisy_probe_state) == 0) {
        struct timespec ts = { 0, 1000000 };

        nanosleep(&ts, NULL);
    }
    tv = noisy_tv(noisy_opt.burst_ms);
    event_add(noisy_tick_ev, &tv);
    tv = noisy_tv(NOISY_SAMPLE_MS);
    event_add(noisy_sample_ev, &tv);
    tv = noisy_tv(NOISY_GRANT_MS);
    event_add(deadline, &tv);
    if (atomic_load(&noisy_probe_state) == 1) {
        event_base_dispatch(noisy_base);
    }
    if (noisy_phase != NOISY_DONE) {
        noisy_set_phase(NOISY_DONE);
        (void)pthread_join(noisy_probe_thread, NULL);
        fprintf(stderr, "redlock-noisy: the run did not finish (phase %d)\n", (int)noisy_phase);
        rc = 1;
    } else {
        (void)pthread_join(noisy_probe_thread, NULL);
        noisy_print();
    }
    for (i = 0; i < noisy_nconns; i++) {
        if (noisy_conns[i].bev != NULL) {
            bufferevent_free(noisy_conns[i].bev);
        }
    }
    free(noisy_conns);
    free(noisy_probes[0].us);
    free(noisy_probes[1].us);
    event_free(noisy_tick_ev);
    event_free(noisy_sample_ev);
    event_free(noisy_phase_ev);
    event_free(deadline);
    event_base_free(noisy_base);
    return rc;
}
