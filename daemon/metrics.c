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
#include "daemon/listener.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/metrics.h"
#include "daemon/report.h"
#include "daemon/stats.h"

#define METRICS_PATH            "/metrics"
#define METRICS_CONTENT_TYPE    "text/plain; version=0.0.4; charset=utf-8"
#define METRICS_TIMEOUT_S       10      /* idle read or write, then closed */
#define METRICS_MAX_HEADERS     8192    /* request line and headers, bytes */
#define METRICS_MAX_BODY        1024    /* request body, bytes (GET has none) */

/* The server; NULL when metrics are off or not started. */
static struct evhttp *metrics_http;
static struct evconnlistener *metrics_listener; /* its socket, owned by metrics_http */

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
 * The whole exposition: build info, then every row of the report table
 * (daemon/report.h) that has a family, in its order, then the masters'.
 */
static void
metrics_write(struct evbuffer *out)
{
    const struct report_row *row;
    struct report_snap snap;
    char v[32];
    size_t k;

    report_snapshot(&snap);
    metrics_family(out, "redlockd_build_info", "gauge", "Always 1; the version is a label.");
    evbuffer_add_printf(out, "redlockd_build_info{version=\"");
    metrics_escape(out, REDLOCKD_VERSION);
    evbuffer_add(out, "\"} 1\n", 5);
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
    log_info("metrics on http://%s%s", a->spec, METRICS_PATH);
    return 0;
}

void
metrics_stop(void)
{
    if (metrics_http != NULL) {
        listener_unguard(metrics_listener);
        metrics_listener = NULL;
        evhttp_free(metrics_http);     /* closes the socket and every connection */
        metrics_http = NULL;
    }
}
