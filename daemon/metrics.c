/*
 * metrics.c: Prometheus text exposition at GET /metrics, over HTTP with
 * libevent's evhttp, on metrics.listen.
 *
 * The families are the rows of the report table (daemon/report.h), the
 * one STATS is written from, read when a scrape arrives, so the two
 * always agree; proto/PROTOCOL.md (STATS) and README.md ("Metrics") map
 * one onto the other.  Format: text 0.0.4, one HELP and one TYPE line
 * per family, names prefixed "redlockd_", counters ending in "_total",
 * durations in seconds.
 *
 * The server answers /metrics, and / (the status page,
 * daemon/status_page.h, which writes it), to GET and HEAD, 405 to the
 * other methods evhttp knows (it answers 501 to the rest itself), and
 * 404 to every other path.  evhttp bounds what a client may
 * send (headers, body) and closes a connection that makes no progress
 * for METRICS_TIMEOUT_S, in either direction.
 *
 * evhttp (libevent 2.1) bounds neither the number of connections nor
 * the whole time of a request: its timeout restarts with every byte.
 * This module keeps its own record of each connection (struct
 * metrics_conn): evhttp_set_bevcb() lets it make every accepted
 * connection's bufferevent, and once evhttp has given that bufferevent
 * its socket (later in the same turn of the loop) the record finds
 * evhttp's connection, which is the argument of the bufferevent's
 * callbacks, and asks evhttp to tell it when the connection closes
 * (evhttp_connection_set_closecb).  A request not answered within
 * metrics.request_timeout_ms of its first byte (of the accept, for the
 * first) has its connection shut down.  A shut-down socket reads as the
 * end of stream, and evhttp then frees the connection itself.
 *
 * The limit (metrics_conn_admit): at most metrics.max_connections
 * connections in all, and at most half of them (rounded up) from one
 * address group: an IPv4 /24, all of 127/8 as one, an IPv6 /64 (an
 * IPv4-mapped address counts as IPv4).  A connection past either is not
 * refused: the slowest connection in the way is shut down to make room
 * (evicted): of the new one's group when that group holds its share,
 * else of the group that holds the most.  Slowest means the one whose
 * request has been under way longest (its first byte, or the accept,
 * came longest ago), else the one idle longest.  So a slowloris client,
 * which must hold connections open to do harm, loses the oldest of them
 * to each newcomer, while a scraper's request, answered in a turn or
 * two of the loop, is the newest in the table while it lasts; and a
 * source flooding its own group can evict only within it while the
 * other groups stay within their share.  Only connections that began
 * their present state in this very turn of the loop are never evicted
 * (a burst of them would otherwise evict one another before any was
 * read); a newcomer that finds nothing else to evict in its way is
 * answered 503 and shut down, which takes more than its group's share
 * (or the whole table) of connections accepted at once.
 *
 * Why not a filter bufferevent, whose free hook would tell the close
 * without the callbacks' argument: evhttp 2.1 queues a reply while
 * writing is disabled and then enables writing, which a filter does not
 * act on, so replies stall (a keep-alive connection's second one, and
 * every "Connection: close" one, were never sent when this was tried);
 * and past that, evhttp would take a reply as written once the filter
 * had passed it on, and shut the socket before the bytes left.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/util.h>

#include "conf/conf.h"
#include "daemon/authlimit.h"
#include "daemon/ctx.h"
#include "daemon/layout.h"
#include "daemon/fdbudget.h"
#include "daemon/listener.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/metrics.h"
#include "daemon/report.h"
#include "daemon/stats.h"
#include "daemon/status_page.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"

#define METRICS_PATH            "/metrics"
#define METRICS_CONTENT_TYPE    "text/plain; version=0.0.4; charset=utf-8"
#define METRICS_TIMEOUT_S       10      /* idle read or write, then closed */
#define METRICS_MAX_HEADERS     8192    /* request line and headers, bytes */
#define METRICS_MAX_BODY        1024    /* request body, bytes (GET has none) */

/* The answer to a connection past metrics.max_connections, sent as it is. */
static const char metrics_busy[] =
    "HTTP/1.1 503 Service Unavailable\r\n"
    "Content-Type: text/plain; charset=utf-8\r\n"
    "Content-Length: 40\r\n"
    "Connection: close\r\n"
    "\r\n"
    "too many connections to /metrics: retry\n";

/* A connection's address group (metrics_group_of), as authlimit_group() writes it. */
struct metrics_group_key {
    char text[AUTHLIMIT_SOURCE_MAX];    /* "" for a peer that cannot be read (one group) */
};

/* One address group with counted connections (metrics_groups). */
struct metrics_group {
    struct metrics_group     *next;     /* in metrics_groups */
    struct metrics_group_key  key;
    int64_t                   nconns;   /* its counted connections (0 only while one
                                           is admitted: metrics_conn_admit) */
    struct metrics_conn      *victim;   /* scratch of metrics_conn_victim() */
};

/* Where a connection is in its life (struct metrics_conn). */
enum metrics_conn_state {
    METRICS_CONN_NEW,       /* accepted; evhttp has not given it its socket yet */
    METRICS_CONN_REQUEST,   /* a request is read or answered: the deadline runs */
    METRICS_CONN_IDLE,      /* keep-alive between requests: evhttp's idle timeout */
    METRICS_CONN_CLOSING    /* refused or past its deadline: shut down, evhttp frees it */
};

/*
 * One connection to /metrics.  Made with its bufferevent in
 * metrics_bev_cb(); freed when evhttp closes the connection
 * (metrics_close_cb), or by metrics_stop().
 */
struct metrics_conn {
    struct metrics_conn      *prev;     /* in metrics_conns */
    struct metrics_conn      *next;     /* in metrics_conns */
    struct bufferevent       *bev;      /* the connection's; evhttp owns it */
    struct evhttp_connection *evcon;    /* evhttp's connection; NULL while NEW */
    struct evbuffer_cb_entry *in_cb;    /* metrics_input_cb on bev's input; NULL while NEW */
    struct event             *timer;    /* the set-up while NEW, then the request deadline */
    enum metrics_conn_state   state;    /* see the enum */
    bool                      counted;  /* takes a place (set up, neither refused,
                                           evicted nor past its deadline) */
    struct metrics_group     *group;    /* its address group while counted, else NULL */
    uint64_t                  since;    /* when state began: metrics_entries then, an
                                           order (two set-ups in one turn can fall in
                                           one microsecond, and must not tie) */
    struct timeval            turn;     /* the loop's cached time then: its turn */
};

/* The server; NULL when metrics are off or not started. */
static struct evhttp *metrics_http;
static struct evconnlistener *metrics_listener; /* its socket, owned by metrics_http */
static struct metrics_conn *metrics_conns;      /* every connection, newest first */
static struct metrics_group *metrics_groups;    /* groups with counted connections */
static uint64_t metrics_entries;        /* states begun by any connection, ever */
/* metrics.max_connections, and the share of them one address group may hold. */
#define METRICS_MAX_CONNS   (ctx.conf->metrics_max_connections)
#define METRICS_GROUP_SHARE ((METRICS_MAX_CONNS + 1) / 2)
static struct log_every metrics_closes_log;    /* lines on refusals and deadlines */
static uint64_t metrics_logged_rejected;    /* stats.metrics_rejected at that line */
static uint64_t metrics_logged_timed_out;   /* stats.metrics_timed_out at that line */
static uint64_t metrics_logged_evicted;     /* stats.metrics_evicted at that line */

/* Append s as a label value: backslash, double quote and LF escaped. */
static void
metrics_escape(struct evbuffer *out, const char *s)
{
    const char *run = s;

    for (; *s != '\0'; s++) {
        const char *esc = *s == '\\' ? "\\\\" : *s == '"' ? "\\\"" : *s == '\n' ? "\\n" : NULL;

        if (esc != NULL) {
            evbuffer_add(out, run, (size_t)(s - run));
            evbuffer_add(out, esc, 2);
            run = s + 1;
        }
    }
    evbuffer_add(out, run, (size_t)(s - run));
}

/*
 * The HELP and TYPE lines of a family.  help is a constant of this file
 * and holds neither a backslash nor a LF (which HELP would need escaped).
 */
static void
metrics_family(struct evbuffer *out, const char *name, const char *type, const char *help)
{
    evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/*
 * A bucket bound of ms milliseconds as seconds, written the short way
 * ("0.005", "1", "2.5"), into buf (size bytes).
 */
static void
metrics_le(char *buf, size_t size, int64_t ms)
{
    size_t len;

    snprintf(buf, size, "%lld.%03lld", (long long)(ms / 1000), (long long)(ms % 1000));
    len = strlen(buf);
    while (len > 0 && buf[len - 1] == '0') {
        buf[--len] = '\0';
    }
    if (len > 0 && buf[len - 1] == '.') {
        buf[--len] = '\0';
    }
}

/* "name{master="i",addr="..."} " for master i, ready for the value. */
static void
metrics_master_sample(struct evbuffer *out, const char *name, size_t i)
{
    evbuffer_add_printf(out, "%s{master=\"%zu\",addr=\"", name, i);
    metrics_escape(out, master_name(master_at(i)));
    evbuffer_add(out, "\"} ", 3);
}

/* The samples of the acquire latency histogram's family (its HELP and TYPE written). */
static void
metrics_write_latency(struct evbuffer *out, const char *name)
{
    struct report_latency h;
    char le[32], sum[32];
    size_t i;

    report_latency(&h);
    for (i = 0; i < STATS_LATENCY_NBOUNDS; i++) {
        metrics_le(le, sizeof(le), stats_latency_bound_ms(i));
        evbuffer_add_printf(out, "%s_bucket{le=\"%s\"} %llu\n", name, le,
                            (unsigned long long)h.le[i]);
    }
    report_seconds_text(h.sum_us, sum, sizeof(sum));
    evbuffer_add_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %s\n%s_count %llu\n", name,
                        (unsigned long long)h.le[STATS_LATENCY_NBOUNDS], name, sum, name,
                        (unsigned long long)h.le[STATS_LATENCY_NBOUNDS]);
}

/*
 * The per-master families of the report table: one sample per master,
 * from one snapshot of every master's counters.
 */
static void
metrics_write_masters(struct evbuffer *out, struct report_snap *snap)
{
    struct master_stats ms[CONF_MASTERS_MAX];
    const struct report_row *row;
    size_t i, k, n = snap->masters;
    char v[32];

    if (n > CONF_MASTERS_MAX) {
        n = CONF_MASTERS_MAX;   /* the config allows no more */
    }
    for (i = 0; i < n; i++) {
        master_get_stats(master_at(i), &ms[i]);
    }
    for (k = 0; k < report_master_nrows; k++) {
        row = &report_master_rows[k];
        if (row->family == NULL) {
            continue;
        }
        metrics_family(out, row->family, report_type_name(row->type), row->help);
        for (i = 0; i < n; i++) {
            snap->master = &ms[i];
            report_metric_text(row, snap, v, sizeof(v));
            metrics_master_sample(out, row->family, i);
            evbuffer_add_printf(out, "%s\n", v);
        }
    }
    snap->master = NULL;
}

/*
 * The whole exposition: build info and the descriptors open, then every
 * row of the report table (daemon/report.h) that has a family, in its
 * order, then the masters'.  The descriptors open are counted here, once
 * per scrape, and are not in STATS: the count lists /proc/self/fd, in
 * time proportional to them, and a client can send STATS at any rate.
 */
static void
metrics_write(struct evbuffer *out)
{
    const struct report_row *row;
    struct report_snap snap;
    char v[32];
    size_t k;

    report_snapshot(&snap);
    metrics_family(out, "redlockd_build_info", "gauge",
                   "Always 1; the release and the layout of the keys on the masters "
                   "(its version, and the oldest it runs beside) are labels.");
    evbuffer_add_printf(out, "redlockd_build_info{version=\"");
    metrics_escape(out, REDLOCKD_VERSION);
    evbuffer_add_printf(out, "\",layout=\"%d\",layout_oldest=\"%d\"} 1\n", REDLOCKD_LAYOUT,
                        REDLOCKD_LAYOUT_OLDEST);
    metrics_family(out, "redlockd_descriptors_open", "gauge",
                   "Descriptors the daemon has open now (clients, masters, listeners, "
                   "/metrics), against redlockd_descriptor_limit; the limit when none is left "
                   "to count them with, -1 when they cannot be counted (no /proc).");
    evbuffer_add_printf(out, "redlockd_descriptors_open %lld\n",
                        (long long)fdbudget_open((int64_t)stats.descriptor_limit));
    for (k = 0; k < report_nrows; k++) {
        row = &report_rows[k];
        if (row->family == NULL) {
            continue;
        }
        if (row->help != NULL) {
            metrics_family(out, row->family, report_type_name(row->type), row->help);
        }
        if (row->type == REPORT_HISTOGRAM) {
            metrics_write_latency(out, row->family);
            continue;
        }
        report_metric_text(row, &snap, v, sizeof(v));
        if (row->label != NULL) {
            evbuffer_add_printf(out, "%s{%s=\"%s\"} %s\n", row->family, row->label,
                                row->label_value, v);
        } else {
            evbuffer_add_printf(out, "%s %s\n", row->family, v);
        }
    }
    metrics_write_masters(out, &snap);
}

/*
 * Send the reply with body (not freed here).  evhttp 2.1 would send the
 * body to a HEAD request as well: for HEAD only its Content-Length goes.
 */
static void
metrics_send(struct evhttp_request *req, int code, const char *reason, struct evbuffer *body)
{
    char len[32];

    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
        snprintf(len, sizeof(len), "%zu", evbuffer_get_length(body));
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Length", len);
        evhttp_send_reply(req, code, reason, NULL);
        return;
    }
    evhttp_send_reply(req, code, reason, body);
}

/* A reply with a plain-text body. */
static void
metrics_reply(struct evhttp_request *req, int code, const char *reason, const char *text)
{
    struct evbuffer *body = evbuffer_new();

    if (body == NULL || evbuffer_add(body, text, strlen(text)) != 0) {
        xmalloc_fail("a /metrics reply");
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; charset=utf-8");
    metrics_send(req, code, reason, body);
    evbuffer_free(body);
}

/* ---- connections: the limit and the request deadline ---- */

/*
 * A line on evicted, refused and timed-out connections, at most one per
 * LOG_EVERY_US, with the counts since the line before.
 */
static void
metrics_log_closes(void)
{
    uint64_t held;

    if (!log_every_due(&metrics_closes_log, util_now_us(), &held)) {
        return;
    }
    log_warn("/metrics: %llu slow connections closed to make room for new ones and %llu "
             "refused, past metrics.max_connections (%lld, %lld from one address group), and "
             "%llu closed past metrics.request_timeout_ms (%lld ms) since the last such line",
             (unsigned long long)(stats.metrics_evicted - metrics_logged_evicted),
             (unsigned long long)(stats.metrics_rejected - metrics_logged_rejected),
             (long long)METRICS_MAX_CONNS, (long long)METRICS_GROUP_SHARE,
             (unsigned long long)(stats.metrics_timed_out - metrics_logged_timed_out),
             (long long)ctx.conf->metrics_request_timeout_ms);
    metrics_logged_evicted = stats.metrics_evicted;
    metrics_logged_rejected = stats.metrics_rejected;
    metrics_logged_timed_out = stats.metrics_timed_out;
}

/*
 * The address group of the peer of socket fd into *key, by the rule of
 * AUTH and the client slots (authlimit_group): an IPv4 /24 (127/8
 * whole), an IPv6 /64, an IPv4-mapped IPv6 address as IPv4.  A peer that
 * cannot be read, or of another family, is the group "".
 */
static void
metrics_group_of(int fd, struct metrics_group_key *key)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char host[INET6_ADDRSTRLEN], peer[INET6_ADDRSTRLEN + 8];

    memset(key, 0, sizeof(*key));
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &len) != 0) {
        return;
    }
    if (ss.ss_family == AF_INET
        && inet_ntop(AF_INET, &((const struct sockaddr_in *)&ss)->sin_addr, host,
                     sizeof(host)) != NULL) {
        snprintf(peer, sizeof(peer), "%s:0", host);
    } else if (ss.ss_family == AF_INET6
               && inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&ss)->sin6_addr, host,
                            sizeof(host)) != NULL) {
        snprintf(peer, sizeof(peer), "[%s]:0", host);
    } else {
        return;
    }
    authlimit_group(peer, key->text, sizeof(key->text));
}

/* The group of key, made (with no connection) when there is none. */
static struct metrics_group *
metrics_group_get(const struct metrics_group_key *key)
{
    struct metrics_group *g;

    for (g = metrics_groups; g != NULL; g = g->next) {
        if (memcmp(&g->key, key, sizeof(*key)) == 0) {
            return g;
        }
    }
    g = xcalloc(1, sizeof(*g));
    g->key = *key;
    g->next = metrics_groups;
    metrics_groups = g;
    return g;
}

/* Free g when no connection counts in it. */
static void
metrics_group_put(struct metrics_group *g)
{
    struct metrics_group **p;

    if (g->nconns > 0) {
        return;
    }
    for (p = &metrics_groups; *p != NULL; p = &(*p)->next) {
        if (*p == g) {
            *p = g->next;
            break;
        }
    }
    free(g);
}

/* c takes a place, in group g (from metrics_group_get). */
static void
metrics_conn_count(struct metrics_conn *c, struct metrics_group *g)
{
    c->counted = true;
    c->group = g;
    g->nconns++;
    stats.metrics_connections++;
}

/* c gives its place up (nothing when it holds none). */
static void
metrics_conn_uncount(struct metrics_conn *c)
{
    if (!c->counted) {
        return;
    }
    c->counted = false;
    stats.metrics_connections--;
    c->group->nconns--;
    metrics_group_put(c->group);
    c->group = NULL;
}

/*
 * c enters state now: its place in the order for metrics_conn_slower(),
 * the turn for metrics_conn_evictable().
 */
static void
metrics_conn_enter(struct metrics_conn *c, enum metrics_conn_state state)
{
    c->state = state;
    c->since = ++metrics_entries;
    event_base_gettimeofday_cached(bufferevent_get_base(c->bev), &c->turn);
}

/*
 * c may be evicted: it holds a place, and began its request (or its
 * wait for the next) before this turn of the loop (now, its cached time).
 */
static bool
metrics_conn_evictable(const struct metrics_conn *c, const struct timeval *now)
{
    return c->counted && (c->state == METRICS_CONN_REQUEST || c->state == METRICS_CONN_IDLE)
           && (c->turn.tv_sec != now->tv_sec || c->turn.tv_usec != now->tv_usec);
}

/* a is slower than b (NULL: anything is): a request under way first, then the oldest. */
static bool
metrics_conn_slower(const struct metrics_conn *a, const struct metrics_conn *b)
{
    if (b == NULL) {
        return true;
    }
    if (a->state != b->state) {
        return a->state == METRICS_CONN_REQUEST;
    }
    return a->since < b->since;
}

/*
 * The connection to evict for a newcomer of group g, or NULL when there
 * is none to evict: g's slowest when g holds its share; else, when every
 * place is taken, the slowest of the group that holds the most (of
 * those with one to evict); else NULL (there is room).  *room is set to
 * whether a place is needed.  One pass over the connections, one over
 * the groups.
 */
static struct metrics_conn *
metrics_conn_victim(const struct metrics_group *g, const struct timeval *now, bool *room)
{
    struct metrics_group *h, *most = NULL;
    struct metrics_conn *c;

    *room = g->nconns >= METRICS_GROUP_SHARE
            || stats.metrics_connections >= METRICS_MAX_CONNS;
    if (!*room) {
        return NULL;
    }
    for (h = metrics_groups; h != NULL; h = h->next) {
        h->victim = NULL;
    }
    for (c = metrics_conns; c != NULL; c = c->next) {
        if (metrics_conn_evictable(c, now) && metrics_conn_slower(c, c->group->victim)) {
            c->group->victim = c;
        }
    }
    if (g->nconns >= METRICS_GROUP_SHARE) {
        return g->victim;
    }
    for (h = metrics_groups; h != NULL; h = h->next) {
        if (h->victim != NULL && (most == NULL || h->nconns > most->nconns)) {
            most = h;
        }
    }
    return most != NULL ? most->victim : NULL;
}

/* Forget c: out of the list and the count, its timer and itself freed. */
static void
metrics_conn_free(struct metrics_conn *c)
{
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        metrics_conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    metrics_conn_uncount(c);
    event_free(c->timer);
    free(c);
}

/* The record of evhttp's connection evcon, or NULL. */
static struct metrics_conn *
metrics_conn_find(const struct evhttp_connection *evcon)
{
    struct metrics_conn *c;

    for (c = metrics_conns; c != NULL; c = c->next) {
        if (c->evcon == evcon) {
            return c;
        }
    }
    return NULL;
}

/* A request begins (its first byte came, or the connection was accepted). */
static void
metrics_conn_begin(struct metrics_conn *c)
{
    int64_t ms = ctx.conf->metrics_request_timeout_ms;
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000 * 1000) };

    metrics_conn_enter(c, METRICS_CONN_REQUEST);
    evtimer_add(c->timer, &tv);
}

/*
 * End c's connection: shut its socket down both ways, and give its
 * place up at once.  evhttp reads the end of stream (or fails its next
 * write) and frees the connection, which calls metrics_close_cb.
 */
static void
metrics_conn_shut(struct metrics_conn *c)
{
    metrics_conn_uncount(c);
    c->state = METRICS_CONN_CLOSING;
    evtimer_del(c->timer);
    (void)shutdown(bufferevent_getfd(c->bev), SHUT_RDWR);
}

/* Bytes came into c's input: the first of a request when c was idle. */
static void
metrics_input_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct metrics_conn *c = arg;

    (void)buf;
    if (info->n_added > 0 && c->state == METRICS_CONN_IDLE) {
        metrics_conn_begin(c);
    }
}

/*
 * evhttp wrote a reply to the kernel: c's request is over.  A request
 * whose bytes came already begins now; else c waits, idle.
 */
static void
metrics_done_cb(struct evhttp_request *req, void *arg)
{
    struct metrics_conn *c = arg;

    (void)req;
    if (c->state != METRICS_CONN_REQUEST) {
        return;
    }
    if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0) {
        metrics_conn_begin(c);
        return;
    }
    metrics_conn_enter(c, METRICS_CONN_IDLE);
    evtimer_del(c->timer);
}

/* evhttp closes c's connection (and frees it and the bufferevent next). */
static void
metrics_close_cb(struct evhttp_connection *evcon, void *arg)
{
    struct metrics_conn *c = arg;

    (void)evcon;
    if (c->in_cb != NULL) {
        evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->in_cb);
    }
    metrics_conn_free(c);
}

/*
 * Give c a place, evicting another connection when one is in the way
 * (see the file comment).  Returns false when c must be refused: no
 * connection in its way may be evicted.
 */
static bool
metrics_conn_admit(struct metrics_conn *c)
{
    struct metrics_group_key key;
    struct metrics_group *g;
    struct metrics_conn *victim;
    struct timeval now;
    bool room;

    metrics_group_of(bufferevent_getfd(c->bev), &key);
    g = metrics_group_get(&key);
    event_base_gettimeofday_cached(bufferevent_get_base(c->bev), &now);
    victim = metrics_conn_victim(g, &now, &room);
    if (room) {
        if (victim == NULL) {
            metrics_group_put(g);
            return false;
        }
        stats.metrics_evicted++;
        metrics_log_closes();
        metrics_conn_shut(victim);  /* may free g, when it was victim's, and its last */
        g = metrics_group_get(&key);
    }
    metrics_conn_count(c, g);
    return true;
}

/*
 * The set-up, in the turn of the loop that accepted the connection,
 * after evhttp gave the bufferevent its socket and made its connection:
 * that connection is the argument of the bufferevent's callbacks.  Then
 * either a 503 and the end (no place: metrics_conn_admit) or the first
 * request's deadline.  Drops the reference metrics_bev_cb took.
 */
static void
metrics_conn_setup(struct metrics_conn *c)
{
    struct bufferevent *bev = c->bev;
    bufferevent_event_cb eventcb = NULL;
    void *cbarg = NULL;

    bufferevent_getcb(bev, NULL, NULL, &eventcb, &cbarg);
    if (eventcb == NULL || cbarg == NULL || bufferevent_getfd(bev) < 0
        || evhttp_connection_get_bufferevent(cbarg) != bev) {
        /* evhttp failed to set the connection up and has freed it already. */
        metrics_conn_free(c);
        bufferevent_decref(bev);
        return;
    }
    c->evcon = cbarg;
    evhttp_connection_set_closecb(c->evcon, metrics_close_cb, c);
    c->in_cb = evbuffer_add_cb(bufferevent_get_input(bev), metrics_input_cb, c);
    bufferevent_decref(bev);    /* evhttp holds its own */
    if (c->in_cb == NULL) {
        xmalloc_fail("a /metrics connection's read callback");
    }
    if (!metrics_conn_admit(c)) {
        stats.metrics_rejected++;
        metrics_log_closes();
        (void)send(bufferevent_getfd(bev), metrics_busy, sizeof(metrics_busy) - 1,
                   MSG_DONTWAIT | MSG_NOSIGNAL);
        metrics_conn_shut(c);
        return;
    }
    metrics_conn_begin(c);
}

/* c's timer: the set-up while NEW, else the request's deadline. */
static void
metrics_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct metrics_conn *c = arg;

    (void)fd;
    (void)what;
    if (c->state == METRICS_CONN_NEW) {
        metrics_conn_setup(c);
    } else if (c->state == METRICS_CONN_REQUEST) {
        stats.metrics_timed_out++;
        metrics_log_closes();
        metrics_conn_shut(c);
    }
}

/*
 * evhttp accepted a connection and asks for its bufferevent: a socket
 * bufferevent (given the socket by evhttp, closing it when freed) and
 * its record, which takes a place at the set-up (the peer is known
 * then).  The set-up runs in this turn of the loop, before any byte is
 * read.
 */
static struct bufferevent *
metrics_bev_cb(struct event_base *base, void *arg)
{
    struct metrics_conn *c = xcalloc(1, sizeof(*c));

    (void)arg;
    c->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    c->timer = evtimer_new(base, metrics_timer_cb, c);
    if (c->bev == NULL || c->timer == NULL) {
        xmalloc_fail("a /metrics connection");
    }
    bufferevent_incref(c->bev);     /* stays valid until the set-up */
    c->state = METRICS_CONN_NEW;
    c->next = metrics_conns;
    if (metrics_conns != NULL) {
        metrics_conns->prev = c;
    }
    metrics_conns = c;
    event_active(c->timer, EV_TIMEOUT, 1);
    return c->bev;
}

/* ---- requests ---- */

/* Every request: /metrics and / (the status page) to GET and HEAD, else 404 or 405. */
static void
metrics_request_cb(struct evhttp_request *req, void *arg)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
    struct metrics_conn *c = metrics_conn_find(evhttp_request_get_connection(req));
    struct evbuffer *body;
    bool page;

    (void)arg;
    if (c != NULL) {
        evhttp_request_set_on_complete_cb(req, metrics_done_cb, c);
        if (c->state == METRICS_CONN_CLOSING) {
            /* Read before the shut-down took: the write fails and evhttp closes. */
            metrics_reply(req, HTTP_SERVUNAVAIL, "Service Unavailable",
                          "too many connections to /metrics: retry\n");
            return;
        }
    }
    page = path != NULL && strcmp(path, STATUS_PAGE_PATH) == 0;
    if (path == NULL || (!page && strcmp(path, METRICS_PATH) != 0)) {
        metrics_reply(req, HTTP_NOTFOUND, "Not Found",
                      "not found: try GET /metrics, or GET / for the status page\n");
        return;
    }
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        evhttp_add_header(headers, "Allow", "GET, HEAD");
        metrics_reply(req, HTTP_BADMETHOD, "Method Not Allowed",
                      page ? "method not allowed: / answers GET and HEAD\n"
                           : "method not allowed: /metrics answers GET and HEAD\n");
        return;
    }
    body = evbuffer_new();
    if (body == NULL) {
        xmalloc_fail("a /metrics reply");
    }
    if (page) {
        status_page_write(body);
        evhttp_add_header(headers, "Content-Type", STATUS_PAGE_CONTENT_TYPE);
        evhttp_add_header(headers, "Content-Security-Policy", STATUS_PAGE_CSP);
        evhttp_add_header(headers, "X-Content-Type-Options", "nosniff");
    } else {
        metrics_write(body);
        evhttp_add_header(headers, "Content-Type", METRICS_CONTENT_TYPE);
    }
    evhttp_add_header(headers, "Cache-Control", "no-store");
    metrics_send(req, HTTP_OK, "OK", body);
    evbuffer_free(body);
}

int
metrics_start(void)
{
    const struct conf_addr *a = &ctx.conf->metrics;
    struct evhttp_bound_socket *bound = NULL;
    struct evconnlistener *lev;
    char why[160];

    if (a->spec[0] == '\0') {
        return 0;
    }
    metrics_http = evhttp_new(ctx.base);
    if (metrics_http == NULL) {
        log_error("metrics.listen %s: cannot create the HTTP server", a->spec);
        return -1;
    }
    /* Every method reaches metrics_request_cb, which answers 405 (not evhttp's 501). */
    evhttp_set_allowed_methods(metrics_http,
                               EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST
                               | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS
                               | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
    evhttp_set_max_headers_size(metrics_http, METRICS_MAX_HEADERS);
    evhttp_set_max_body_size(metrics_http, METRICS_MAX_BODY);
    evhttp_set_timeout(metrics_http, METRICS_TIMEOUT_S);
    evhttp_set_gencb(metrics_http, metrics_request_cb, NULL);
    evhttp_set_bevcb(metrics_http, metrics_bev_cb, NULL);
    lev = listener_bind_inet(ctx.base, a, NULL, why, sizeof(why));
    if (lev != NULL) {
        bound = evhttp_bind_listener(metrics_http, lev);   /* frees lev with the server */
        if (bound == NULL) {
            evconnlistener_free(lev);
            snprintf(why, sizeof(why), "cannot listen: evhttp refused the socket");
        } else {
            metrics_listener = lev;
            (void)listener_guard(lev);  /* pauses with the others out of descriptors */
        }
    }
    if (bound == NULL) {
        log_error("metrics.listen %s: %s", a->spec, why);
        evhttp_free(metrics_http);
        metrics_http = NULL;
        return -1;
    }
    log_info("metrics on http://%s%s, the status page on http://%s%s", a->spec, METRICS_PATH,
             a->spec, STATUS_PAGE_PATH);
    return 0;
}

void
metrics_stop(void)
{
    struct bufferevent *bev;

    if (metrics_http != NULL) {
        listener_unguard(metrics_listener);
        metrics_listener = NULL;
        evhttp_free(metrics_http);     /* closes the socket and every connection */
        metrics_http = NULL;
    }
    /* Only connections accepted in this turn of the loop, not set up, are left. */
    while (metrics_conns != NULL) {
        bev = metrics_conns->state == METRICS_CONN_NEW ? metrics_conns->bev : NULL;
        metrics_conn_free(metrics_conns);
        if (bev != NULL) {
            bufferevent_decref(bev);
        }
    }
}
