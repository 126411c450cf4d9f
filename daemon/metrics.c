/*
 * metrics.c: Prometheus text exposition at GET /metrics, over HTTP with
 * libevent's evhttp, on metrics.listen.
 *
 * The values are read when a scrape arrives, from the same places STATS
 * reads them (daemon/stats.h, the lock table, master_get_stats()), so the
 * two always agree; proto/PROTOCOL.md (STATS) and README.md ("Metrics")
 * map one onto the other.  Format: text 0.0.4, one HELP and one TYPE line
 * per family, names prefixed "redlockd_", counters ending in "_total",
 * durations in seconds.
 *
 * The server answers /metrics to GET and HEAD, 405 to the other methods
 * evhttp knows (it answers 501 to the rest itself), and 404 to every
 * other path.  evhttp bounds what a client may
 * send (headers, body) and closes a connection that makes no progress
 * for METRICS_TIMEOUT_S, in either direction.
 */
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/util.h>

#include "conf/conf.h"
#include "daemon/lock.h"
#include "daemon/listener.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/metrics.h"
#include "daemon/redlock.h"
#include "daemon/stats.h"
#include "daemon/util.h"

#define METRICS_PATH            "/metrics"
#define METRICS_CONTENT_TYPE    "text/plain; version=0.0.4; charset=utf-8"
#define METRICS_TIMEOUT_S       10      /* idle read or write, then closed */
#define METRICS_MAX_HEADERS     8192    /* request line and headers, bytes */
#define METRICS_MAX_BODY        1024    /* request body, bytes (GET has none) */

/* The server; NULL when metrics are off or not started. */
static struct evhttp *metrics_http;

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

/* A family of one sample without labels: a counter or a gauge. */
static void
metrics_one(struct evbuffer *out, const char *name, const char *type, const char *help,
            uint64_t v)
{
    metrics_family(out, name, type, help);
    evbuffer_add_printf(out, "%s %llu\n", name, (unsigned long long)v);
}

/* One sample with one label whose value is a constant needing no escapes. */
static void
metrics_labelled(struct evbuffer *out, const char *name, const char *label,
                 const char *value, uint64_t v)
{
    evbuffer_add_printf(out, "%s{%s=\"%s\"} %llu\n", name, label, value,
                        (unsigned long long)v);
}

/* Write us microseconds (>= 0) as seconds, exactly: "1.234567". */
static void
metrics_seconds(struct evbuffer *out, int64_t us)
{
    evbuffer_add_printf(out, "%lld.%06lld", (long long)(us / 1000000),
                        (long long)(us % 1000000));
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

/* The acquire latency histogram (daemon/stats.h), cumulative buckets. */
static void
metrics_write_latency(struct evbuffer *out)
{
    static const char name[] = "redlockd_acquire_latency_seconds";
    uint64_t cum = 0;
    char le[32];
    size_t i;

    metrics_family(out, name, "histogram",
                   "Time from taking up a LOCK or TRYLOCK to its answer, for the answers "
                   "counted by redlockd_acquisitions_total.");
    for (i = 0; i < STATS_LATENCY_NBOUNDS; i++) {
        cum += stats.acquire_latency[i];
        metrics_le(le, sizeof(le), stats_latency_bound_ms(i));
        evbuffer_add_printf(out, "%s_bucket{le=\"%s\"} %llu\n", name, le,
                            (unsigned long long)cum);
    }
    cum += stats.acquire_latency[STATS_LATENCY_NBOUNDS];
    evbuffer_add_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    evbuffer_add_printf(out, "%s_sum ", name);
    metrics_seconds(out, (int64_t)stats.acquire_latency_sum_us);
    evbuffer_add_printf(out, "\n%s_count %llu\n", name, (unsigned long long)cum);
}

/* The per-master families, from one snapshot of every master's counters. */
static void
metrics_write_masters(struct evbuffer *out)
{
    struct master_stats ms[CONF_MASTERS_MAX];
    size_t i, n = master_count();

    if (n > CONF_MASTERS_MAX) {
        n = CONF_MASTERS_MAX;   /* the config allows no more */
    }
    for (i = 0; i < n; i++) {
        master_get_stats(master_at(i), &ms[i]);
    }
    metrics_family(out, "redlockd_master_up", "gauge",
                   "1 when the command connection to the master is up (handshake done).");
    for (i = 0; i < n; i++) {
        metrics_master_sample(out, "redlockd_master_up", i);
        evbuffer_add_printf(out, "%d\n", ms[i].state == MASTER_UP);
    }
    metrics_family(out, "redlockd_master_subscriber_up", "gauge",
                   "1 when the subscriber connection to the master is up.");
    for (i = 0; i < n; i++) {
        metrics_master_sample(out, "redlockd_master_subscriber_up", i);
        evbuffer_add_printf(out, "%d\n", ms[i].sub_up);
    }
    metrics_family(out, "redlockd_master_quarantined", "gauge",
                   "1 while the master is in restart quarantine (its answers do not count).");
    for (i = 0; i < n; i++) {
        metrics_master_sample(out, "redlockd_master_quarantined", i);
        evbuffer_add_printf(out, "%d\n", ms[i].quarantine_ms > 0);
    }
    metrics_family(out, "redlockd_master_quarantine_remaining_seconds", "gauge",
                   "Restart quarantine left; 0 when the master's answers count.");
    for (i = 0; i < n; i++) {
        metrics_master_sample(out, "redlockd_master_quarantine_remaining_seconds", i);
        metrics_seconds(out, ms[i].quarantine_ms > 0 ? ms[i].quarantine_ms * 1000 : 0);
        evbuffer_add(out, "\n", 1);
    }
    metrics_family(out, "redlockd_master_duplicate", "gauge",
                   "1 while the master is the same server (run_id) as one listed before "
                   "it (its answers do not count).");
    for (i = 0; i < n; i++) {
        metrics_master_sample(out, "redlockd_master_duplicate", i);
        evbuffer_add_printf(out, "%d\n", ms[i].duplicate_of >= 0);
    }
    metrics_family(out, "redlockd_master_evicting_policy", "gauge",
                   "1 when the master's last connect found maxmemory set with a "
                   "maxmemory-policy other than noeviction (lock keys may be evicted).");
    for (i = 0; i < n; i++) {
        metrics_master_sample(out, "redlockd_master_evicting_policy", i);
        evbuffer_add_printf(out, "%d\n", ms[i].evicting);
    }
    metrics_family(out, "redlockd_master_last_rtt_seconds", "gauge",
                   "Round trip of the last request to the master; NaN before the first.");
    for (i = 0; i < n; i++) {
        metrics_master_sample(out, "redlockd_master_last_rtt_seconds", i);
        if (ms[i].rtt_us < 0) {
            evbuffer_add(out, "NaN\n", 4);
        } else {
            metrics_seconds(out, ms[i].rtt_us);
            evbuffer_add(out, "\n", 1);
        }
    }
    metrics_family(out, "redlockd_master_requests_total", "counter",
                   "Requests sent to the master.");
    for (i = 0; i < n; i++) {
        metrics_master_sample(out, "redlockd_master_requests_total", i);
        evbuffer_add_printf(out, "%llu\n", (unsigned long long)ms[i].requests);
    }
    metrics_family(out, "redlockd_master_errors_total", "counter",
                   "Requests to the master that could not be sent, lost their connection "
                   "or got an error reply (timeouts are not counted).");
    for (i = 0; i < n; i++) {
        metrics_master_sample(out, "redlockd_master_errors_total", i);
        evbuffer_add_printf(out, "%llu\n", (unsigned long long)ms[i].errors);
    }
    metrics_family(out, "redlockd_master_reconnects_total", "counter",
                   "Connections to the master made after the first.");
    for (i = 0; i < n; i++) {
        metrics_master_sample(out, "redlockd_master_reconnects_total", i);
        evbuffer_add_printf(out, "%llu\n", (unsigned long long)ms[i].reconnects);
    }
    metrics_family(out, "redlockd_master_restarts_total", "counter",
                   "Restarts of the master seen on reconnect (a new run_id).");
    for (i = 0; i < n; i++) {
        metrics_master_sample(out, "redlockd_master_restarts_total", i);
        evbuffer_add_printf(out, "%llu\n", (unsigned long long)ms[i].restarts);
    }
}

/* The whole exposition. */
static void
metrics_write(struct evbuffer *out)
{
    size_t n = master_count();
    struct master_summary sum;
    static const char lost[] = "redlockd_locks_lost_total";
    static const char acq[] = "redlockd_acquisitions_total";

    master_tally(&sum);
    metrics_family(out, "redlockd_build_info", "gauge", "Always 1; the version is a label.");
    evbuffer_add_printf(out, "redlockd_build_info{version=\"");
    metrics_escape(out, REDLOCKD_VERSION);
    evbuffer_add(out, "\"} 1\n", 5);
    metrics_family(out, "redlockd_uptime_seconds", "gauge", "Time since the daemon started.");
    evbuffer_add_printf(out, "redlockd_uptime_seconds ");
    metrics_seconds(out, util_now_us() - stats.start_us);
    evbuffer_add(out, "\n", 1);

    metrics_one(out, "redlockd_connections", "gauge", "Client connections open now.",
                stats.connections);
    metrics_one(out, "redlockd_connections_accepted_total", "counter",
                "Client connections accepted.", stats.connections_total);
    metrics_one(out, "redlockd_connections_rejected_total", "counter",
                "Client connections refused because of limits.max_clients.",
                stats.rejected_clients);
    metrics_one(out, "redlockd_auth_failures_total", "counter",
                "AUTH requests with a wrong password.", stats.auth_failures);
    metrics_one(out, "redlockd_clients_timed_out_total", "counter",
                "Connections closed because a line was not completed in time.",
                stats.clients_timed_out);
    metrics_one(out, "redlockd_clients_closed_output_total", "counter",
                "Connections closed because they did not read their replies.",
                stats.clients_closed_output);

    metrics_one(out, "redlockd_locks_held", "gauge",
                "Session-mode locks held now by this daemon's sessions (lease-mode locks "
                "live on the masters only and are not counted).", lock_count_held());
    metrics_one(out, "redlockd_waiters", "gauge", "LOCK requests waiting now.",
                lock_count_waiters());
    metrics_family(out, acq, "counter",
                   "LOCK and TRYLOCK requests by answer: ok (granted by the masters), "
                   "reentered, busy, timeout, noquorum.");
    metrics_labelled(out, acq, "outcome", "ok", stats.acquire_ok);
    metrics_labelled(out, acq, "outcome", "reentered", stats.acquire_reentered);
    metrics_labelled(out, acq, "outcome", "busy", stats.acquire_busy);
    metrics_labelled(out, acq, "outcome", "timeout", stats.acquire_timeout);
    metrics_labelled(out, acq, "outcome", "noquorum", stats.acquire_noquorum);
    metrics_family(out, "redlockd_grants_total", "counter",
                   "Grants by the masters by mode: session (bound to the connection) "
                   "or lease (mode=lease, a token).");
    metrics_labelled(out, "redlockd_grants_total", "mode", "session",
                     stats.acquire_ok - stats.lease_grants);
    metrics_labelled(out, "redlockd_grants_total", "mode", "lease", stats.lease_grants);
    metrics_one(out, "redlockd_fenced_grants_total", "counter",
                "Grants that carried a fencing token.", stats.fenced_grants);
    metrics_one(out, "redlockd_shared_grants_total", "counter",
                "Grants of a shared hold.", stats.shared_grants);
    metrics_one(out, "redlockd_counted_grants_total", "counter",
                "Grants of a permit of a counted name (limit=N).", stats.counted_grants);
    metrics_one(out, "redlockd_kind_refusals_total", "counter",
                "LOCKs refused with ERR KIND: the name is held or waited for as another kind.",
                stats.kind_refusals);
    metrics_write_latency(out);

    metrics_one(out, "redlockd_releases_total", "counter",
                "Locks released on the masters (hand-overs included).", stats.releases);
    metrics_one(out, "redlockd_handovers_total", "counter",
                "Locks handed straight to the next waiting session of this daemon.",
                stats.handovers);
    metrics_one(out, "redlockd_yields_total", "counter",
                "Releases announced instead of a hand-over, to let other daemons in.",
                stats.yields);
    metrics_family(out, "redlockd_renewals_total", "counter",
                   "Lease renewals by the watchdog: ok (confirmed by a quorum) or failed.");
    metrics_labelled(out, "redlockd_renewals_total", "result", "ok", stats.renewals_ok);
    metrics_labelled(out, "redlockd_renewals_total", "result", "failed",
                     stats.renewals_failed);
    metrics_one(out, "redlockd_keys_restored_total", "counter",
                "Lock keys put back on a master that had lost them, while a quorum held "
                "the lease.", stats.keys_restored);
    metrics_family(out, lost, "counter", "! LOST lines sent, by reason.");
    metrics_labelled(out, lost, "reason", "renew", stats.locks_lost_renew);
    metrics_labelled(out, lost, "reason", "quorum", stats.locks_lost_quorum);
    metrics_labelled(out, lost, "reason", "gone", stats.locks_lost_gone);
    metrics_labelled(out, lost, "reason", "shutdown", stats.locks_lost_shutdown);
    metrics_family(out, "redlockd_extends_total", "counter", "EXTEND requests by answer.");
    metrics_labelled(out, "redlockd_extends_total", "result", "ok", stats.extends_ok);
    metrics_labelled(out, "redlockd_extends_total", "result", "notheld",
                     stats.extends_notheld);
    metrics_one(out, "redlockd_subscriptions", "gauge",
                "Release channels subscribed now (names with queued waiters).",
                redlock_subscriptions());
    metrics_one(out, "redlockd_pubsub_wakeups_total", "counter",
                "Waiters woken by a release announcement.", stats.pubsub_wakeups);
    metrics_one(out, "redlockd_fallback_retries_total", "counter",
                "Retries timed by the holder's remaining ttl (no announcement came).",
                stats.fallback_retries);

    metrics_one(out, "redlockd_masters", "gauge", "Masters configured.", n);
    metrics_one(out, "redlockd_quorum", "gauge", "Masters needed for a quorum.",
                redlock_quorum(n));
    metrics_one(out, "redlockd_masters_up", "gauge", "Masters connected now.", sum.up);
    metrics_one(out, "redlockd_masters_quarantined", "gauge",
                "Masters in restart quarantine now.", sum.quarantined);
    metrics_one(out, "redlockd_masters_duplicate", "gauge",
                "Masters up now that are the same server as one listed before them "
                "(same run_id; their answers do not count).", sum.duplicate);
    metrics_one(out, "redlockd_masters_evicting", "gauge",
                "Masters whose last connect found maxmemory set with a policy other "
                "than noeviction.", sum.evicting);
    metrics_write_masters(out);
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

    if (body == NULL) {
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    evbuffer_add(body, text, strlen(text));
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; charset=utf-8");
    metrics_send(req, code, reason, body);
    evbuffer_free(body);
}

/* Every request: /metrics to GET and HEAD, else 404 or 405. */
static void
metrics_request_cb(struct evhttp_request *req, void *arg)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
    struct evbuffer *body;

    (void)arg;
    if (path == NULL || strcmp(path, METRICS_PATH) != 0) {
        metrics_reply(req, HTTP_NOTFOUND, "Not Found", "not found: try GET /metrics\n");
        return;
    }
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        evhttp_add_header(headers, "Allow", "GET, HEAD");
        metrics_reply(req, HTTP_BADMETHOD, "Method Not Allowed",
                      "method not allowed: /metrics answers GET and HEAD\n");
        return;
    }
    body = evbuffer_new();
    if (body == NULL) {
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    metrics_write(body);
    evhttp_add_header(headers, "Content-Type", METRICS_CONTENT_TYPE);
    evhttp_add_header(headers, "Cache-Control", "no-store");
    metrics_send(req, HTTP_OK, "OK", body);
    evbuffer_free(body);
}

int
metrics_start(struct event_base *base, const struct conf *conf)
{
    const struct conf_addr *a = &conf->metrics;
    struct evhttp_bound_socket *bound = NULL;
    struct evconnlistener *lev;
    char why[160];

    if (a->spec[0] == '\0') {
        return 0;
    }
    metrics_http = evhttp_new(base);
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
    lev = listener_bind_inet(base, a, NULL, why, sizeof(why));
    if (lev != NULL) {
        bound = evhttp_bind_listener(metrics_http, lev);   /* frees lev with the server */
        if (bound == NULL) {
            evconnlistener_free(lev);
            snprintf(why, sizeof(why), "cannot listen: evhttp refused the socket");
        }
    }
    if (bound == NULL) {
        log_error("metrics.listen %s: %s", a->spec, why);
        evhttp_free(metrics_http);
        metrics_http = NULL;
        return -1;
    }
    log_info("metrics on http://%s%s", a->spec, METRICS_PATH);
    return 0;
}

void
metrics_stop(void)
{
    if (metrics_http != NULL) {
        evhttp_free(metrics_http);     /* closes the socket and every connection */
        metrics_http = NULL;
    }
}
