/*
 * check_metrics.c: the Prometheus endpoint (metrics.listen), end to end.
 *
 * Real redis-server masters and the real daemon on free loopback ports
 * (tests/harness.h), scraped over a plain TCP socket by the harness's
 * small HTTP client (h_http; no curl needed).  Checked: the content
 * type and the text format 0.0.4 (HELP/TYPE, names, labels and their
 * escapes, grouping), counters that move with LOCK, TRYLOCK BUSY,
 * re-entry, TIMEOUT, lease grants and lost locks and equal STATS at the
 * same moment, the latency histogram (cumulative, _count equal to the
 * acquisitions), a master's up going 1 -> 0 when it is killed, 404, 405
 * and HEAD, label values escaped, a stalled HTTP client closed by the
 * timeout, metrics.max_connections and its per-address-group half (the
 * slowest connection in the way closed to make room, within the new
 * one's group or the fullest; every scrape answered during a slowloris
 * attack), metrics.request_timeout_ms (a client that trickles its
 * request is closed; keep-alive scrapes are not), and a daemon that
 * refuses to start when metrics.listen's port is taken.  The report table both outputs are written from
 * (daemon/report.h, linked in) is checked row by row: its rules, and
 * every row in STATS and in /metrics with the same value.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <check.h>

#include "daemon/layout.h"
#include "daemon/report.h"
#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define TEST_TIMEOUT_S  60
#define CONTENT_TYPE    "text/plain; version=0.0.4; charset=utf-8"
#define METRICS_IDLE_S  10      /* daemon/metrics.c: METRICS_TIMEOUT_S */
#define MT_KEEPALIVE_GET "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"

/* The metrics port of the current test's daemon. */
static int mt_port;

/* ---- HTTP (the harness's client, h_http) ---- */

/* method path HTTP/1.1 with Connection: close. */
static int
mt_request(const char *method, const char *path, struct h_http_resp *r)
{
    char req[512];

    snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
             "Connection: close\r\n\r\n", method, path, mt_port);
    return h_http(mt_port, req, r);
}

/* GET /metrics that must succeed with 200; the body is returned (caller frees). */
static char *
mt_scrape(void)
{
    char *body = h_metrics_scrape(mt_port);

    ck_assert_msg(body != NULL, "GET /metrics failed (the reason is above)");
    return body;
}

/*
 * The value of header name (case-insensitive) in a header block, copied
 * into out (size bytes).  Returns false when there is none.
 */
static bool
mt_header(const char *head, const char *name, char *out, size_t size)
{
    size_t nlen = strlen(name);
    const char *line = strstr(head, "\r\n");

    while (line != NULL && line[2] != '\0') {
        const char *end;

        line += 2;
        end = strstr(line, "\r\n");
        if (end == NULL) {
            return false;
        }
        if (strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
            const char *v = line + nlen + 1;

            while (*v == ' ') {
                v++;
            }
            snprintf(out, size, "%.*s", (int)(end - v), v);
            return true;
        }
        line = end;
    }
    return false;
}

/* ---- reading the exposition ---- */

/* h_metric_value() that must find the series; its value as an integer. */
static long long
mt_int(const char *body, const char *series)
{
    double v = 0;

    ck_assert_msg(h_metric_value(body, series, &v), "no sample '%s' in /metrics", series);
    ck_assert_msg(v == (double)(long long)v, "'%s' is %g, not an integer", series, v);
    return (long long)v;
}

/* A STATS value that must be there. */
static long long
mt_stat(const char *name)
{
    long long v = -1;

    ck_assert_msg(h_stat_once(name, &v) == 0, "STATS has no '%s'", name);
    return v;
}

/* A metric family seen while checking the format. */
struct mt_family {
    char name[128];     /* as in # TYPE */
    char type[32];      /* counter, gauge, histogram */
    bool help;          /* a # HELP line came */
    bool closed;        /* samples of another family came after its own */
};

static bool
mt_name_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'
           || (!first && c >= '0' && c <= '9');
}

/* The family a sample name belongs to (histograms: _bucket, _sum, _count). */
static struct mt_family *
mt_family_of(struct mt_family *fam, size_t n, const char *name)
{
    static const char *const suffixes[] = { "_bucket", "_sum", "_count" };
    size_t i, k;

    for (i = 0; i < n; i++) {
        size_t flen = strlen(fam[i].name);

        if (strcmp(fam[i].name, name) == 0) {
            return &fam[i];
        }
        if (strcmp(fam[i].type, "histogram") != 0 || strncmp(fam[i].name, name, flen) != 0) {
            continue;
        }
        for (k = 0; k < 3; k++) {
            if (strcmp(name + flen, suffixes[k]) == 0) {
                return &fam[i];
            }
        }
    }
    return NULL;
}

/*
 * Check body against the text format 0.0.4 as redlockd promises it:
 * every line a HELP, a TYPE or a sample; one HELP and one TYPE per
 * family, before its samples, which come together; names prefixed
 * redlockd_, counters ending in _total; labels name="value" with only
 * \\, \" and \n escapes; a float value and no timestamp; a final LF.
 * Fails the test with the line at fault.
 */
static void
mt_check_format(const char *body)
{
    struct mt_family fam[128];
    struct mt_family *cur = NULL;
    size_t nfam = 0, lineno = 0;
    const char *p = body;

    ck_assert_msg(body[0] != '\0' && body[strlen(body) - 1] == '\n',
                  "the exposition does not end with a LF");
    while (*p != '\0') {
        const char *eol = strchr(p, '\n');
        char line[1024], name[128];
        size_t len = (size_t)(eol - p), i = 0;

        lineno++;
        ck_assert_msg(len < sizeof(line), "line %zu too long", lineno);
        memcpy(line, p, len);
        line[len] = '\0';
        p = eol + 1;
        if (strncmp(line, "# HELP ", 7) == 0 || strncmp(line, "# TYPE ", 7) == 0) {
            char kind = line[2], type[32] = "";
            struct mt_family *f;

            ck_assert_msg(sscanf(line + 7, "%127s %31s", name, type) >= 1,
                          "line %zu: '%s'", lineno, line);
            ck_assert_msg(strncmp(name, "redlockd_", 9) == 0,
                          "line %zu: family '%s' lacks the redlockd_ prefix", lineno, name);
            f = NULL;
            for (i = 0; i < nfam; i++) {
                if (strcmp(fam[i].name, name) == 0) {
                    f = &fam[i];
                }
            }
            if (f == NULL) {
                ck_assert_msg(nfam < sizeof(fam) / sizeof(fam[0]), "too many families");
                f = &fam[nfam++];
                memset(f, 0, sizeof(*f));
                snprintf(f->name, sizeof(f->name), "%s", name);
            }
            if (kind == 'H') {
                ck_assert_msg(!f->help, "line %zu: a second HELP for %s", lineno, name);
                ck_assert_msg(strlen(line) > 8 + strlen(name), "line %zu: empty HELP", lineno);
                f->help = true;
            } else {
                ck_assert_msg(f->type[0] == '\0', "line %zu: a second TYPE for %s",
                              lineno, name);
                ck_assert_msg(strcmp(type, "counter") == 0 || strcmp(type, "gauge") == 0
                              || strcmp(type, "histogram") == 0,
                              "line %zu: type '%s'", lineno, type);
                snprintf(f->type, sizeof(f->type), "%s", type);
                if (strcmp(type, "counter") == 0) {
                    size_t nl = strlen(name);

                    ck_assert_msg(nl > 6 && strcmp(name + nl - 6, "_total") == 0,
                                  "line %zu: counter %s does not end in _total", lineno, name);
                }
            }
            continue;
        }
        ck_assert_msg(line[0] != '#' && line[0] != '\0', "line %zu: '%s'", lineno, line);
        /* A sample: name, labels, value. */
        while (mt_name_char(line[i], i == 0)) {
            i++;
        }
        ck_assert_msg(i > 0 && i < sizeof(name), "line %zu: bad name in '%s'", lineno, line);
        memcpy(name, line, i);
        name[i] = '\0';
        {
            struct mt_family *f = mt_family_of(fam, nfam, name);

            ck_assert_msg(f != NULL && f->type[0] != '\0' && f->help,
                          "line %zu: sample %s before its HELP and TYPE", lineno, name);
            ck_assert_msg(!f->closed, "line %zu: samples of %s are not together", lineno,
                          name);
            if (cur != NULL && cur != f) {
                cur->closed = true;
            }
            cur = f;
        }
        if (line[i] == '{') {
            i++;
            while (line[i] != '}') {
                size_t start = i;

                while (mt_name_char(line[i], i == start)) {
                    i++;
                }
                ck_assert_msg(i > start && line[i] == '=' && line[i + 1] == '"',
                              "line %zu: bad label in '%s'", lineno, line);
                i += 2;
                while (line[i] != '"') {
                    ck_assert_msg(line[i] != '\0', "line %zu: open label value", lineno);
                    if (line[i] == '\\') {
                        ck_assert_msg(line[i + 1] == '\\' || line[i + 1] == '"'
                                      || line[i + 1] == 'n',
                                      "line %zu: bad escape in '%s'", lineno, line);
                        i++;
                    }
                    i++;
                }
                i++;
                if (line[i] == ',') {
                    i++;
                }
                ck_assert_msg(line[i] != '\0', "line %zu: open label set", lineno);
            }
            i++;
        }
        ck_assert_msg(line[i] == ' ', "line %zu: no space before the value", lineno);
        {
            char *end;

            strtod(line + i + 1, &end);
            ck_assert_msg(end != line + i + 1 && *end == '\0',
                          "line %zu: bad value (or a timestamp) in '%s'", lineno, line);
        }
    }
    for (size_t k = 0; k < nfam; k++) {
        ck_assert_msg(fam[k].type[0] != '\0' && fam[k].help, "%s lacks HELP or TYPE",
                      fam[k].name);
    }
}

/* ---- tests ---- */

/* True when every master's redlockd_master_last_rtt_seconds is a number. */
static bool
mt_cond_rtt_known(void *arg)
{
    struct h_http_resp r;
    char series[128];
    bool known = true;
    size_t i;
    double v;

    (void)arg;
    if (mt_request("GET", "/metrics", &r) != 0) {
        return false;
    }
    for (i = 0; i < NMASTERS && known; i++) {
        snprintf(series, sizeof(series),
                 "redlockd_master_last_rtt_seconds{master=\"%zu\",addr=\"127.0.0.1:%d\"}",
                 i, h_master_port(i));
        known = h_metric_value(r.body, series, &v) && v == v;
    }
    h_http_free(&r);
    return known;
}

/* 200 with the 0.0.4 content type, a well-formed exposition, every promised family. */
START_TEST(metrics_format)
{
    static const char *const families[] = {
        "redlockd_build_info", "redlockd_uptime_seconds", "redlockd_connections",
        "redlockd_descriptors_open", "redlockd_descriptor_limit",
        "redlockd_connections_accepted_total", "redlockd_connections_rejected_total",
        "redlockd_auth_failures_total", "redlockd_auth_held_total",
        "redlockd_clients_timed_out_total",
        "redlockd_clients_closed_output_total", "redlockd_locks_held", "redlockd_waiters",
        "redlockd_acquisitions_total", "redlockd_grants_total", "redlockd_fenced_grants_total",
        "redlockd_acquire_latency_seconds", "redlockd_releases_total",
        "redlockd_handovers_total", "redlockd_yields_total", "redlockd_renewals_total",
        "redlockd_locks_lost_total", "redlockd_extends_total", "redlockd_subscriptions",
        "redlockd_pubsub_wakeups_total", "redlockd_fallback_retries_total", "redlockd_masters",
        "redlockd_quorum", "redlockd_masters_up", "redlockd_masters_quarantined",
        "redlockd_master_up", "redlockd_master_subscriber_up", "redlockd_master_quarantined",
        "redlockd_master_quarantine_remaining_seconds", "redlockd_master_last_rtt_seconds",
        "redlockd_master_requests_total", "redlockd_master_errors_total",
        "redlockd_master_reconnects_total", "redlockd_master_restarts_total",
        "redlockd_master_tls_failures_total",
        "redlockd_masters_duplicate", "redlockd_masters_evicting",
        "redlockd_master_duplicate", "redlockd_master_evicting_policy",
        "redlockd_shared_grants_total", "redlockd_counted_grants_total",
        "redlockd_kind_refusals_total", "redlockd_keys_restored_total",
        "redlockd_watches_total", "redlockd_watching", "redlockd_breaks_total",
        "redlockd_labels_truncated_total", "redlockd_master_layout_counted",
        "redlockd_master_layout_refusals_total", "redlockd_master_daemons_seen",
    };
    struct h_http_resp r;
    char ct[128], series[256], stat[64], *body;
    size_t i;
    double v;
    int fd;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .metrics_port = &mt_port);
    ck_assert_int_eq(mt_request("GET", "/metrics", &r), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(mt_header(r.head, "Content-Type", ct, sizeof(ct)), "no Content-Type");
    ck_assert_str_eq(ct, CONTENT_TYPE);
    mt_check_format(r.body);
    for (i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
        snprintf(series, sizeof(series), "# TYPE %s ", families[i]);
        ck_assert_msg(strstr(r.body, series) != NULL, "no family %s", families[i]);
    }
    ck_assert_int_eq(mt_int(r.body, "redlockd_masters"), NMASTERS);
    /* The descriptors open: at least the masters' two links each, under the limit. */
    ck_assert_msg(mt_int(r.body, "redlockd_descriptors_open") >= 2 * NMASTERS
                  && mt_int(r.body, "redlockd_descriptors_open")
                         < mt_int(r.body, "redlockd_descriptor_limit"),
                  "redlockd_descriptors_open %lld, redlockd_descriptor_limit %lld",
                  mt_int(r.body, "redlockd_descriptors_open"),
                  mt_int(r.body, "redlockd_descriptor_limit"));
    snprintf(series, sizeof(series), "redlockd_build_info{version=\"%s\",layout=\"%d\","
             "layout_oldest=\"%d\"} 1\n", REDLOCKD_VERSION, REDLOCKD_LAYOUT,
             REDLOCKD_LAYOUT_OLDEST);
    ck_assert_msg(strstr(r.body, series) != NULL, "no %s", series);
    ck_assert_int_eq(mt_int(r.body, "redlockd_quorum"), NMASTERS / 2 + 1);
    ck_assert_int_eq(mt_int(r.body, "redlockd_masters_up"), NMASTERS);
    for (i = 0; i < NMASTERS; i++) {
        snprintf(series, sizeof(series), "redlockd_master_up{master=\"%zu\",addr=\"127.0.0.1:%d\"}",
                 i, h_master_port(i));
        ck_assert_int_eq(mt_int(r.body, series), 1);
        snprintf(series, sizeof(series),
                 "redlockd_master_quarantined{master=\"%zu\",addr=\"127.0.0.1:%d\"}",
                 i, h_master_port(i));
        ck_assert_int_eq(mt_int(r.body, series), 0);
        snprintf(series, sizeof(series),
                 "redlockd_master_duplicate{master=\"%zu\",addr=\"127.0.0.1:%d\"}",
                 i, h_master_port(i));
        ck_assert_int_eq(mt_int(r.body, series), 0);
        snprintf(series, sizeof(series),
                 "redlockd_master_evicting_policy{master=\"%zu\",addr=\"127.0.0.1:%d\"}",
                 i, h_master_port(i));
        ck_assert_int_eq(mt_int(r.body, series), 0);
        /* No request sent yet: no round trip (STATS says -1). */
        snprintf(series, sizeof(series),
                 "redlockd_master_last_rtt_seconds{master=\"%zu\",addr=\"127.0.0.1:%d\"}",
                 i, h_master_port(i));
        ck_assert_msg(h_metric_value(r.body, series, &v) && v != v, "%s %g, expected NaN", series, v);
        snprintf(stat, sizeof(stat), "master.%zu.rtt_us", i);
        ck_assert_int_eq(mt_stat(stat), -1);
    }
    ck_assert_msg(h_metric_value(r.body, "redlockd_uptime_seconds", &v) && v > 0 && v < 60,
                  "uptime %g", v);
    h_http_free(&r);

    /* After a LOCK every master has answered a request: a real round trip. */
    fd = expect_tcp();
    EXPECT_PREFIX(fd, "LOCK f", "OK f validity=");
    ck_assert_msg(h_wait_until(mt_cond_rtt_known, NULL, 5000),
                  "some master's last round trip is still NaN after a LOCK");
    body = mt_scrape();
    mt_check_format(body);
    for (i = 0; i < NMASTERS; i++) {
        snprintf(series, sizeof(series),
                 "redlockd_master_last_rtt_seconds{master=\"%zu\",addr=\"127.0.0.1:%d\"}",
                 i, h_master_port(i));
        ck_assert_msg(h_metric_value(body, series, &v) && v > 0 && v < 1, "%s %g", series, v);
        snprintf(series, sizeof(series),
                 "redlockd_master_requests_total{master=\"%zu\",addr=\"127.0.0.1:%d\"}",
                 i, h_master_port(i));
        ck_assert_int_ge(mt_int(body, series), 1);
    }
    free(body);
    close(fd);
}
END_TEST

/* Counters move with LOCK, TRYLOCK BUSY, re-entry, lease grants; /metrics equals STATS. */
START_TEST(metrics_counts_match_stats)
{
    static const struct { const char *series, *stat; } pairs[] = {
        { "redlockd_acquisitions_total{outcome=\"ok\"}", "acquire_ok" },
        { "redlockd_acquisitions_total{outcome=\"reentered\"}", "acquire_reentered" },
        { "redlockd_acquisitions_total{outcome=\"busy\"}", "acquire_busy" },
        { "redlockd_acquisitions_total{outcome=\"timeout\"}", "acquire_timeout" },
        { "redlockd_acquisitions_total{outcome=\"noquorum\"}", "acquire_noquorum" },
        { "redlockd_grants_total{mode=\"session\"}", "session_grants" },
        { "redlockd_grants_total{mode=\"lease\"}", "lease_grants" },
        { "redlockd_fenced_grants_total", "fenced_grants" },
        { "redlockd_releases_total", "releases" },
        { "redlockd_locks_held", "locks_held" },
        { "redlockd_waiters", "waiters" },
        { "redlockd_extends_total{result=\"ok\"}", "extends_ok" },
        { "redlockd_locks_lost_total{reason=\"renew\"}", "locks_lost_renew" },
        { "redlockd_masters_up", "masters_up" },
    };
    char *body;
    int a, b;
    size_t i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .metrics_port = &mt_port);
    body = mt_scrape();
    ck_assert_int_eq(mt_int(body, "redlockd_acquisitions_total{outcome=\"ok\"}"), 0);
    ck_assert_int_eq(mt_int(body, "redlockd_locks_held"), 0);
    free(body);

    a = expect_tcp();
    b = expect_tcp();
    EXPECT_PREFIX(a, "LOCK m", "OK m validity=");
    EXPECT_PREFIX(b, "TRYLOCK m", "BUSY m ttl=");
    EXPECT_PREFIX(a, "LOCK m", "OK m validity=");            /* re-entry */
    EXPECT_PREFIX(b, "LOCK n mode=lease ttl=5000 fence", "OK n token=");

    body = mt_scrape();
    ck_assert_int_eq(mt_int(body, "redlockd_acquisitions_total{outcome=\"ok\"}"), 2);
    ck_assert_int_eq(mt_int(body, "redlockd_acquisitions_total{outcome=\"busy\"}"), 1);
    ck_assert_int_eq(mt_int(body, "redlockd_acquisitions_total{outcome=\"reentered\"}"), 1);
    ck_assert_int_eq(mt_int(body, "redlockd_grants_total{mode=\"session\"}"), 1);
    ck_assert_int_eq(mt_int(body, "redlockd_grants_total{mode=\"lease\"}"), 1);
    ck_assert_int_eq(mt_int(body, "redlockd_fenced_grants_total"), 1);
    ck_assert_int_eq(mt_int(body, "redlockd_locks_held"), 1);
    for (i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        ck_assert_msg(mt_int(body, pairs[i].series) == mt_stat(pairs[i].stat),
                      "%s is %lld, STATS %s is %lld", pairs[i].series,
                      mt_int(body, pairs[i].series), pairs[i].stat, mt_stat(pairs[i].stat));
    }
    free(body);

    EXPECT_REPLY(a, "UNLOCK m", "OK m holds=1");
    EXPECT_REPLY(a, "UNLOCK m", "OK m holds=0");
    body = mt_scrape();
    ck_assert_int_eq(mt_int(body, "redlockd_locks_held"), 0);
    ck_assert_int_eq(mt_int(body, "redlockd_releases_total"), 1);
    for (i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        ck_assert_msg(mt_int(body, pairs[i].series) == mt_stat(pairs[i].stat),
                      "%s is %lld, STATS %s is %lld", pairs[i].series,
                      mt_int(body, pairs[i].series), pairs[i].stat, mt_stat(pairs[i].stat));
    }
    free(body);
    close(a);
    close(b);
}
END_TEST

/* Cumulative buckets, _count = acquisitions, a TIMEOUT in the right bucket; = STATS. */
START_TEST(metrics_histogram)
{
    static const char *const les[] = {
        "0.001", "0.002", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1",
        "2.5", "5", "10", "+Inf",
    };
    static const char *const stat_les[] = {
        "1", "2", "5", "10", "25", "50", "100", "250", "500", "1000", "2500", "5000",
        "10000", "inf",
    };
    static const char *const outcomes[] = { "ok", "reentered", "busy", "timeout", "noquorum" };
    char series[128], *body;
    long long prev = 0, bucket, count, acquisitions = 0;
    double sum;
    int a, b, i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .metrics_port = &mt_port);
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_PREFIX(a, "LOCK h", "OK h validity=");                /* ok */
    EXPECT_PREFIX(a, "TRYLOCK h", "OK h validity=");             /* reentered */
    EXPECT_PREFIX(b, "TRYLOCK h", "BUSY h ttl=");                /* busy */
    EXPECT_REPLY(b, "LOCK h wait=300", "TIMEOUT h");             /* timeout, >= 300 ms */
    EXPECT_PREFIX(b, "LOCK g", "OK g validity=");                /* ok */
    EXPECT_PREFIX(b, "LOCK x ttl=1", "ERR PROTO ");               /* not an acquisition */

    body = mt_scrape();
    for (i = 0; i < 14; i++) {
        snprintf(series, sizeof(series), "redlockd_acquire_latency_seconds_bucket{le=\"%s\"}",
                 les[i]);
        bucket = mt_int(body, series);
        ck_assert_msg(bucket >= prev, "bucket le=%s (%lld) below the one before (%lld)",
                      les[i], bucket, prev);
        snprintf(series, sizeof(series), "acquire_latency_ms_le_%s", stat_les[i]);
        ck_assert_msg(mt_stat(series) == bucket, "STATS %s is %lld, /metrics says %lld",
                      series, mt_stat(series), bucket);
        prev = bucket;
    }
    count = mt_int(body, "redlockd_acquire_latency_seconds_count");
    for (i = 0; i < 5; i++) {
        snprintf(series, sizeof(series), "redlockd_acquisitions_total{outcome=\"%s\"}",
                 outcomes[i]);
        acquisitions += mt_int(body, series);
    }
    ck_assert_int_eq(acquisitions, 5);
    ck_assert_int_eq(count, acquisitions);
    ck_assert_int_eq(prev, count);                               /* +Inf */
    ck_assert_int_eq(mt_stat("acquire_latency_count"), count);
    /* The TIMEOUT waited 300 ms: one observation above 0.25 s, and in the sum. */
    ck_assert_int_le(mt_int(body, "redlockd_acquire_latency_seconds_bucket{le=\"0.25\"}"),
                     count - 1);
    ck_assert_msg(h_metric_value(body, "redlockd_acquire_latency_seconds_sum", &sum) && sum >= 0.3,
                  "sum %g", sum);
    ck_assert_msg((long long)(sum * 1e6 + 0.5) == mt_stat("acquire_latency_sum_us"),
                  "sum %.6f s, STATS acquire_latency_sum_us %lld", sum,
                  mt_stat("acquire_latency_sum_us"));
    free(body);
    close(a);
    close(b);
}
END_TEST

struct mt_master_cond {
    size_t    i;        /* master index */
    long long want;     /* redlockd_master_up wanted */
};

static bool
mt_cond_master_up(void *arg)
{
    struct mt_master_cond *c = arg;
    char series[128], *body;
    struct h_http_resp r;
    double v = -1;

    if (mt_request("GET", "/metrics", &r) != 0) {
        return false;
    }
    body = r.body;
    snprintf(series, sizeof(series), "redlockd_master_up{master=\"%zu\",addr=\"127.0.0.1:%d\"}",
             c->i, h_master_port(c->i));
    h_metric_value(body, series, &v);
    h_http_free(&r);
    return v == (double)c->want;
}

/* A killed master's up goes 1 -> 0, the others stay 1, and STATS agrees. */
START_TEST(metrics_master_down)
{
    struct mt_master_cond c = { 2, 1 };
    char series[128], stat[64], *body;
    size_t i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .metrics_port = &mt_port);
    ck_assert(mt_cond_master_up(&c));
    ck_assert_int_eq(h_kill_master(2), 0);
    c.want = 0;
    ck_assert_msg(h_wait_until(mt_cond_master_up, &c, 5000),
                  "redlockd_master_up for master 2 did not go to 0 within 5 s");
    body = mt_scrape();
    for (i = 0; i < NMASTERS; i++) {
        snprintf(series, sizeof(series),
                 "redlockd_master_up{master=\"%zu\",addr=\"127.0.0.1:%d\"}", i,
                 h_master_port(i));
        snprintf(stat, sizeof(stat), "master.%zu.up", i);
        ck_assert_int_eq(mt_int(body, series), i == 2 ? 0 : 1);
        ck_assert_int_eq(mt_stat(stat), i == 2 ? 0 : 1);
    }
    ck_assert_int_eq(mt_int(body, "redlockd_masters_up"), NMASTERS - 1);
    free(body);
}
END_TEST

/* LOST by reason: renew (keys deleted behind our back), quorum (3 masters killed). */
START_TEST(metrics_locks_lost_by_reason)
{
    char *line, *body;
    size_t i;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .metrics_port = &mt_port);
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK r ttl=900", "OK r validity=");
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "DEL r"), 0);
    }
    line = h_read_line(a, 900 + H_PROMPT_MS);  /* the renewal at ttl/3 is denied */
    ck_assert_msg(line != NULL && strcmp(line, "! LOST r reason=renew") == 0, "got '%s'",
                  line != NULL ? line : "(nothing)");
    free(line);

    EXPECT_PREFIX(a, "LOCK q ttl=900", "OK q validity=");
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
    }
    line = h_read_line(a, 900 + H_PROMPT_MS);  /* no quorum before the validity ends */
    ck_assert_msg(line != NULL && strcmp(line, "! LOST q reason=quorum") == 0, "got '%s'",
                  line != NULL ? line : "(nothing)");
    free(line);

    body = mt_scrape();
    ck_assert_int_eq(mt_int(body, "redlockd_locks_lost_total{reason=\"renew\"}"), 1);
    ck_assert_int_eq(mt_int(body, "redlockd_locks_lost_total{reason=\"quorum\"}"), 1);
    ck_assert_int_eq(mt_int(body, "redlockd_locks_lost_total{reason=\"shutdown\"}"), 0);
    ck_assert_int_eq(mt_stat("locks_lost_renew"), 1);
    ck_assert_int_eq(mt_stat("locks_lost_quorum"), 1);
    ck_assert_int_eq(mt_stat("locks_lost_shutdown"), 0);
    ck_assert_int_eq(mt_stat("locks_lost"), 2);
    ck_assert_int_ge(mt_int(body, "redlockd_renewals_total{result=\"failed\"}"), 2);
    ck_assert_int_eq(mt_int(body, "redlockd_renewals_total{result=\"failed\"}"),
                     mt_stat("renewals_failed"));
    free(body);
    close(a);
}
END_TEST

/* ---- the report table (daemon/report.h) ---- */

/*
 * The rows that are in one output only, on purpose.  A row in STATS
 * without a metrics family, or in /metrics without a STATS name, fails
 * metrics_table_rules unless it is named here.
 */
static const char *const mt_stats_only[] = {
    "locks_lost",       /* in /metrics the sum of redlockd_locks_lost_total */
    "duplicate_of",     /* per master; in /metrics redlockd_master_duplicate */
};
static const char *const mt_metrics_only[] = {
    "redlockd_master_quarantined",  /* STATS: master.<i>.quarantine_ms > 0 */
    "redlockd_master_duplicate",    /* STATS: master.<i>.duplicate_of >= 0 */
};
#define MT_NSTATS_ONLY      (sizeof(mt_stats_only) / sizeof(mt_stats_only[0]))
#define MT_NMETRICS_ONLY    (sizeof(mt_metrics_only) / sizeof(mt_metrics_only[0]))

/* True when name (may be NULL: false) is one of list's n strings. */
static bool
mt_listed(const char *const *list, size_t n, const char *name)
{
    size_t i;

    for (i = 0; name != NULL && i < n; i++) {
        if (strcmp(list[i], name) == 0) {
            return true;
        }
    }
    return false;
}

/* True when rows a and b both have a family, the same one. */
static bool
mt_same_family(const struct report_row *a, const struct report_row *b)
{
    return a->family != NULL && b->family != NULL && strcmp(a->family, b->family) == 0;
}

/*
 * The rules of one table (report_rows, or report_master_rows when
 * per_master): each row in both outputs unless listed above; STATS
 * names unique; a family's rows together, the first with the HELP, one
 * type, labelled apart when there are several; names as the text format
 * wants them.
 */
static void
mt_check_rows(const struct report_row *rows, size_t n, bool per_master)
{
    size_t i, k, nfam;

    ck_assert_int_gt(n, 0);
    for (i = 0; i < n; i++) {
        const struct report_row *r = &rows[i];
        const struct report_row *prev = NULL;
        const char *what = r->stat != NULL ? r->stat : r->family;
        size_t flen;

        ck_assert_msg(what != NULL, "row %zu is in neither output", i);
        ck_assert_msg(r->read != NULL, "%s: no reader", what);
        ck_assert_msg(r->stat != NULL || mt_listed(mt_metrics_only, MT_NMETRICS_ONLY, r->family),
                      "%s is in /metrics only: give it a STATS name", what);
        ck_assert_msg(r->family != NULL || mt_listed(mt_stats_only, MT_NSTATS_ONLY, r->stat),
                      "STATS %s has no metrics family: give it one", what);
        for (k = 0; k < i; k++) {
            ck_assert_msg(r->stat == NULL || rows[k].stat == NULL
                          || strcmp(r->stat, rows[k].stat) != 0, "STATS %s twice", r->stat);
        }
        if (r->family == NULL) {
            ck_assert_msg(r->help == NULL && r->label == NULL && r->type != REPORT_HISTOGRAM,
                          "STATS-only %s has a HELP, a label or a histogram", what);
            continue;
        }
        flen = strlen(r->family);
        ck_assert_msg(strncmp(r->family, "redlockd_", 9) == 0, "%s lacks redlockd_", what);
        ck_assert_msg((r->type == REPORT_COUNTER)
                      == (flen > 6 && strcmp(r->family + flen - 6, "_total") == 0),
                      "%s: counters end in _total, and only they", r->family);
        ck_assert_msg(r->type != REPORT_HISTOGRAM || (!per_master && r->label == NULL),
                      "%s: a histogram is a row of its own in the daemon's table", r->family);
        for (k = i, nfam = 0; k-- > 0;) {
            if (rows[k].family != NULL && prev == NULL) {
                prev = &rows[k];
            }
            if (mt_same_family(&rows[k], r)) {
                nfam++;
                ck_assert_msg(r->label == NULL || rows[k].label_value == NULL
                              || strcmp(r->label_value, rows[k].label_value) != 0,
                              "%s{%s=\"%s\"} twice", r->family, r->label, r->label_value);
            }
        }
        if (prev == NULL || !mt_same_family(prev, r)) {
            ck_assert_msg(nfam == 0, "the rows of %s do not follow each other", r->family);
            ck_assert_msg(r->help != NULL && r->help[0] != '\0', "%s: its first row has no HELP",
                          r->family);
            ck_assert_msg(strpbrk(r->help, "\\\n") == NULL, "%s: HELP with \\ or LF", r->family);
        } else {
            ck_assert_msg(r->help == NULL, "%s: HELP on a row after its first", r->family);
            ck_assert_msg(r->type == prev->type, "%s: rows of two types", r->family);
            ck_assert_msg(r->label != NULL && prev->label != NULL
                          && strcmp(r->label, prev->label) == 0,
                          "%s: its rows are not told apart by one label", r->family);
        }
        for (k = 0, nfam = 0; k < n; k++) {
            nfam += mt_same_family(&rows[k], r);
        }
        ck_assert_msg(per_master ? nfam == 1 && r->label == NULL
                                 : (nfam > 1) == (r->label != NULL && r->label_value != NULL),
                      "%s: %zu rows, label %s", r->family, nfam,
                      r->label != NULL ? r->label : "none");
    }
}

/* The report table keeps its rules (no daemon needed). */
START_TEST(metrics_table_rules)
{
    mt_check_rows(report_rows, report_nrows, false);
    mt_check_rows(report_master_rows, report_master_nrows, true);
}
END_TEST

/* The STATS lines on fd, names and values, up to END. */
struct mt_stats {
    char   *line[512];  /* "name value", malloc'd */
    size_t  n;          /* lines in line[] */
};

/* Free st's lines; st can be read into again. */
static void
mt_stats_free(struct mt_stats *st)
{
    while (st->n > 0) {
        free(st->line[--st->n]);
    }
}

/*
 * Send STATS on fd and keep its lines in st (free with mt_stats_free);
 * a reply that is not STAT lines then END fails the test.
 */
static void
mt_stats_read(int fd, struct mt_stats *st)
{
    char *line;

    st->n = 0;
    ck_assert_int_eq(h_send(fd, "STATS"), 0);
    while ((line = h_read_line(fd, CMD_MS)) != NULL && strcmp(line, "END") != 0) {
        ck_assert_msg(strncmp(line, "STAT ", 5) == 0 && strchr(line + 5, ' ') != NULL,
                      "STATS line '%s'", line);
        ck_assert_msg(st->n < sizeof(st->line) / sizeof(st->line[0]), "too many STATS lines");
        memmove(line, line + 5, strlen(line + 5) + 1);
        st->line[st->n++] = line;
    }
    ck_assert_msg(line != NULL, "STATS did not end with END");
    free(line);
}

/* The value of STATS name, or NULL. */
static const char *
mt_stats_get(const struct mt_stats *st, const char *name)
{
    size_t i, len = strlen(name);

    for (i = 0; i < st->n; i++) {
        if (strncmp(st->line[i], name, len) == 0 && st->line[i][len] == ' ') {
            return st->line[i] + len + 1;
        }
    }
    return NULL;
}

/* True when a and b are the same expositions but for the uptime. */
static bool
mt_same_but_uptime(const char *a, const char *b)
{
    static const char up[] = "redlockd_uptime_seconds ";

    while (*a != '\0' && *b != '\0') {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");

        if ((la != lb || memcmp(a, b, la) != 0)
            && (strncmp(a, up, sizeof(up) - 1) != 0 || strncmp(b, up, sizeof(up) - 1) != 0)) {
            return false;
        }
        a += la + (a[la] != '\0');
        b += lb + (b[lb] != '\0');
    }
    return *a == *b;
}

/*
 * Row r of the table: its HELP and TYPE in body (help from the family's
 * first row), and STATS name's value equal to series' in body, read just
 * before STATS (a duration in ms may have grown since).
 */
static void
mt_check_row_value(const struct report_row *r, const char *help, const char *body,
                   const struct mt_stats *st, const char *name, const char *series)
{
    char want[1024];
    const char *sv = name != NULL ? mt_stats_get(st, name) : NULL;
    long long s = sv != NULL ? strtoll(sv, NULL, 10) : 0;
    double mv = 0;

    ck_assert_msg(name == NULL || sv != NULL, "STATS lacks %s", name);
    if (r->family == NULL) {
        return;
    }
    snprintf(want, sizeof(want), "# HELP %s %s\n# TYPE %s %s\n", r->family, help, r->family,
             report_type_name(r->type));
    ck_assert_msg(strstr(body, want) != NULL, "/metrics lacks '%s'", want);
    ck_assert_msg(h_metric_value(body, series, &mv), "/metrics lacks %s", series);
    if (name == NULL) {
        return;
    }
    if (r->unit == REPORT_NUMBER) {
        ck_assert_msg(mv == (double)s, "%s is %g, STATS %s is %lld", series, mv, name, s);
    } else if (s < 0 || mv != mv) {
        ck_assert_msg(s == -1 && mv != mv, "%s is %g, STATS %s is %lld", series, mv, name, s);
    } else if (r->unit == REPORT_US) {
        ck_assert_msg((long long)(mv * 1e6 + 0.5) == s, "%s is %g s, STATS %s is %lld us",
                      series, mv, name, s);
    } else {
        ck_assert_msg(s >= (long long)(mv * 1e3) && s < (long long)(mv * 1e3) + 5000,
                      "%s is %g s, STATS %s is %lld ms", series, mv, name, s);
    }
}

/* The HELP of row i's family: that of its first row. */
static const char *
mt_row_help(const struct report_row *rows, size_t i)
{
    while (rows[i].help == NULL && i > 0 && mt_same_family(&rows[i - 1], &rows[i])) {
        i--;
    }
    return rows[i].help;
}

/* True when STATS name is one the table accounts for. */
static bool
mt_stat_known(const char *name)
{
    size_t k, len;
    const char *rest;
    char *end;

    /* The build's identity: labels of redlockd_build_info (the id: STATS only). */
    if (strcmp(name, "version") == 0 || strcmp(name, "layout") == 0
        || strcmp(name, "layout_oldest") == 0 || strcmp(name, "daemon_id") == 0) {
        return true;
    }
    for (k = 0; k < report_nrows; k++) {
        const char *stat = report_rows[k].stat;

        len = stat != NULL ? strlen(stat) : 0;
        if (stat == NULL || strncmp(name, stat, len) != 0) {
            continue;
        }
        rest = name + len;
        if (*rest == '\0' && report_rows[k].type != REPORT_HISTOGRAM) {
            return true;
        }
        if (report_rows[k].type == REPORT_HISTOGRAM
            && (strcmp(rest, "_count") == 0 || strcmp(rest, "_sum_us") == 0
                || strncmp(rest, "_ms_le_", 7) == 0)) {
            return true;
        }
    }
    if (strncmp(name, "master.", 7) != 0) {
        return false;
    }
    strtoul(name + 7, &end, 10);
    if (end == name + 7 || *end != '.') {
        return false;
    }
    if (strcmp(end + 1, "addr") == 0) {
        return true;
    }
    for (k = 0; k < report_master_nrows; k++) {
        if (report_master_rows[k].stat != NULL
            && strcmp(end + 1, report_master_rows[k].stat) == 0) {
            return true;
        }
    }
    return false;
}

/* True when metrics family name is one the table accounts for. */
static bool
mt_family_known(const char *name)
{
    size_t k;

    /* Written by daemon/metrics.c itself, not from the table. */
    if (strcmp(name, "redlockd_build_info") == 0 || strcmp(name, "redlockd_descriptors_open") == 0) {
        return true;
    }
    for (k = 0; k < report_nrows; k++) {
        if (report_rows[k].family != NULL && strcmp(report_rows[k].family, name) == 0) {
            return true;
        }
    }
    for (k = 0; k < report_master_nrows; k++) {
        if (report_master_rows[k].family != NULL
            && strcmp(report_master_rows[k].family, name) == 0) {
            return true;
        }
    }
    return false;
}

/*
 * Every row of the report table in both outputs with the same value,
 * with its HELP and TYPE, and nothing in either output that is not a
 * row's (so a value written by hand into one output only fails here).
 * The counters for WATCH, BREAK, holder labels and LOST reason=broken
 * are all there, 0 at the start, by the names the docs promise.
 */
START_TEST(metrics_table_in_both_outputs)
{
    static const struct { const char *series, *type, *stat; } fresh[] = {
        { "redlockd_watches_total", "counter", "watches" },
        { "redlockd_watching", "gauge", "watching" },
        { "redlockd_breaks_total", "counter", "breaks" },
        { "redlockd_labels_truncated_total", "counter", "labels_truncated" },
        { "redlockd_locks_lost_total{reason=\"broken\"}", "counter", "locks_lost_broken" },
    };
    struct mt_stats st = { .n = 0 };
    char series[256], *body = NULL, *again = NULL;
    const struct report_row *r;
    const char *p;
    long long conns = -1;
    size_t i, k;
    int fd, tries;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .metrics_port = &mt_port);
    fd = expect_tcp();
    /* Our connection is the only one (the start-up's STATS may still be closing). */
    for (tries = 0; tries < 100 && (h_stat(fd, "connections", &conns) != 0 || conns != 1);
         tries++) {
        h_sleep_ms(20);
    }
    ck_assert_int_eq(conns, 1);
    /* A scrape, STATS, and a second scrape equal to the first: nothing moved between. */
    for (tries = 0; tries < 20; tries++) {
        free(body);
        free(again);
        mt_stats_free(&st);
        body = mt_scrape();
        /* The scrape's connection counted in its own body; STATS once it has gone. */
        expect_wait_stat_on(fd, "metrics_connections", 0);
        mt_stats_read(fd, &st);
        again = mt_scrape();
        if (mt_same_but_uptime(body, again)) {
            break;
        }
        h_sleep_ms(100);
    }
    ck_assert_msg(tries < 20, "the counters of an idle daemon kept moving");
    mt_check_format(body);

    for (k = 0; k < report_nrows; k++) {
        r = &report_rows[k];
        if (r->type == REPORT_HISTOGRAM) {
            char name[128];

            /* Its _count; metrics_histogram compares the buckets. */
            snprintf(name, sizeof(name), "%s_count", r->stat);
            snprintf(series, sizeof(series), "%s_count", r->family);
            mt_check_row_value(r, r->help, body, &st, name, series);
            continue;
        }
        if (r->label != NULL) {
            snprintf(series, sizeof(series), "%s{%s=\"%s\"}", r->family, r->label,
                     r->label_value);
        } else {
            snprintf(series, sizeof(series), "%s", r->family != NULL ? r->family : "");
        }
        if (r->stat != NULL && strcmp(r->stat, "metrics_connections") == 0) {
            /* The scrape counts its own connection; STATS was read after it closed. */
            mt_check_row_value(r, mt_row_help(report_rows, k), body, &st, NULL, series);
            ck_assert_int_eq(h_metric_int(body, series), 1);
            ck_assert_str_eq(mt_stats_get(&st, r->stat), "0");
            continue;
        }
        mt_check_row_value(r, mt_row_help(report_rows, k), body, &st, r->stat, series);
    }
    for (i = 0; i < NMASTERS; i++) {
        for (k = 0; k < report_master_nrows; k++) {
            char name[64];

            r = &report_master_rows[k];
            snprintf(name, sizeof(name), "master.%zu.%s", i, r->stat != NULL ? r->stat : "");
            snprintf(series, sizeof(series), "%s{master=\"%zu\",addr=\"127.0.0.1:%d\"}",
                     r->family != NULL ? r->family : "", i, h_master_port(i));
            mt_check_row_value(r, r->help, body, &st, r->stat != NULL ? name : NULL, series);
        }
    }

    /* Nothing outside the table. */
    for (i = 0; i < st.n; i++) {
        char name[128];

        snprintf(name, sizeof(name), "%.*s", (int)strcspn(st.line[i], " "), st.line[i]);
        ck_assert_msg(mt_stat_known(name), "STATS %s is no row of the report table", name);
    }
    for (p = strstr(body, "# TYPE "); p != NULL; p = strstr(p + 1, "\n# TYPE ")) {
        char name[128];

        p += p[0] == '\n';
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(p + 7, " "), p + 7);
        ck_assert_msg(mt_family_known(name), "/metrics %s is no row of the report table", name);
    }

    /* The new counters, by name, 0 in both. */
    for (i = 0; i < sizeof(fresh) / sizeof(fresh[0]); i++) {
        char type[160];

        snprintf(type, sizeof(type), "# TYPE %.*s %s\n", (int)strcspn(fresh[i].series, "{"),
                 fresh[i].series, fresh[i].type);
        ck_assert_msg(strstr(body, type) != NULL, "/metrics lacks '%s'", type);
        ck_assert_int_eq(mt_int(body, fresh[i].series), 0);
        ck_assert_msg(mt_stats_get(&st, fresh[i].stat) != NULL
                      && strcmp(mt_stats_get(&st, fresh[i].stat), "0") == 0,
                      "STATS %s is not 0", fresh[i].stat);
    }
    mt_stats_free(&st);
    free(body);
    free(again);
    close(fd);
}
END_TEST

/* 404 elsewhere, 405 with Allow for other methods, HEAD without a body. */
START_TEST(metrics_paths_and_methods)
{
    struct h_http_resp r;
    char v[128];

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .metrics_port = &mt_port);
    ck_assert_int_eq(mt_request("GET", "/other", &r), 0);
    ck_assert_int_eq(r.status, 404);
    h_http_free(&r);
    ck_assert_int_eq(mt_request("GET", "/metrics/x", &r), 0);
    ck_assert_int_eq(r.status, 404);
    h_http_free(&r);
    ck_assert_int_eq(mt_request("POST", "/metrics", &r), 0);
    ck_assert_int_eq(r.status, 405);
    ck_assert_msg(mt_header(r.head, "Allow", v, sizeof(v)) && strcmp(v, "GET, HEAD") == 0,
                  "Allow: '%s'", v);
    h_http_free(&r);
    ck_assert_int_eq(mt_request("DELETE", "/metrics", &r), 0);
    ck_assert_int_eq(r.status, 405);
    h_http_free(&r);
    ck_assert_int_eq(mt_request("HEAD", "/metrics", &r), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(mt_header(r.head, "Content-Type", v, sizeof(v))
                  && strcmp(v, CONTENT_TYPE) == 0, "Content-Type: '%s'", v);
    ck_assert_int_eq(r.body_len, 0);
    ck_assert_msg(mt_header(r.head, "Content-Length", v, sizeof(v)) && atoi(v) > 1000,
                  "HEAD: Content-Length '%s'", v);
    h_http_free(&r);
    ck_assert_int_eq(mt_request("HEAD", "/other", &r), 0);
    ck_assert_int_eq(r.status, 404);
    ck_assert_int_eq(r.body_len, 0);
    h_http_free(&r);
    /* A query string does not change the path. */
    ck_assert_int_eq(mt_request("GET", "/metrics?x=1", &r), 0);
    ck_assert_int_eq(r.status, 200);
    h_http_free(&r);
    /* A header block over the limit is refused, and the daemon still serves. */
    {
        char *big = malloc(20000);

        ck_assert_ptr_nonnull(big);
        snprintf(big, 20000, "GET /metrics HTTP/1.1\r\nX-Pad: %0*d\r\nConnection: close\r\n\r\n",
                 16000, 0);
        if (h_http(mt_port, big, &r) == 0) {
            ck_assert_msg(r.status >= 400 && r.status < 500, "an oversized request got %d",
                          r.status);
            h_http_free(&r);
        }   /* else closed without an answer: refused as well */
        free(big);
    }
    free(mt_scrape());
}
END_TEST

/*
 * A client that sends half a request and stops is closed by evhttp's
 * idle timeout (the request deadline set beyond it, so that the idle
 * timeout is what closes it).
 */
START_TEST(metrics_stalled_client_closed)
{
    struct h_daemon_opts opts;
    int fd, lock;
    int64_t t0;

    memset(&opts, 0, sizeof(opts));
    opts.metrics_request_timeout_ms = 60000;
    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &opts, .metrics_port = &mt_port);
    fd = h_connect_port(mt_port);
    ck_assert_msg(fd >= 0, "cannot connect to the metrics port");
    ck_assert_int_eq(h_send_raw(fd, "GET /metr", 9), 0);
    t0 = h_now_ms();
    /* Meanwhile the daemon serves lock clients and other scrapes. */
    lock = expect_tcp();
    EXPECT_PREFIX(lock, "LOCK s", "OK s validity=");
    free(mt_scrape());
    ck_assert_msg(h_expect_eof(fd, (METRICS_IDLE_S + 5) * 1000),
                  "a stalled HTTP client was not closed within %d s", METRICS_IDLE_S + 5);
    ck_assert_msg(h_now_ms() - t0 >= (METRICS_IDLE_S - 1) * 1000,
                  "closed after %lld ms, before the timeout", (long long)(h_now_ms() - t0));
    close(fd);
    close(lock);
}
END_TEST

/* True when GET /metrics answers 200. */
static bool
mt_cond_serving(void *arg)
{
    struct h_http_resp r;
    bool ok;

    (void)arg;
    if (mt_request("GET", "/metrics", &r) != 0) {
        return false;
    }
    ok = r.status == 200;
    h_http_free(&r);
    return ok;
}

/*
 * Read one response from a keep-alive connection within timeout_ms: the
 * head up to its blank line, then Content-Length bytes of body.
 * Returns the status code, or -1 (closed, timed out, no length).
 */
static int
mt_read_response(int fd, int64_t timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    char head[4096], len[32];
    size_t used = 0;
    long body = -1;
    int status = -1;

    for (;;) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        int64_t left = deadline - h_now_ms();
        ssize_t n;

        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0) {
            return -1;
        }
        if (body < 0) {
            n = recv(fd, head + used, 1, 0);    /* byte by byte: no byte of the body */
            if (n <= 0) {
                return -1;
            }
            used++;
            if (used >= 4 && memcmp(head + used - 4, "\r\n\r\n", 4) == 0) {
                head[used] = '\0';
                if (sscanf(head, "HTTP/1.1 %d", &status) != 1
                    || !mt_header(head, "Content-Length", len, sizeof(len))) {
                    return -1;
                }
                body = atol(len);
            } else if (used + 1 >= sizeof(head)) {
                return -1;
            }
        } else {
            char buf[4096];

            n = recv(fd, buf, body < (long)sizeof(buf) ? (size_t)body : sizeof(buf), 0);
            if (n <= 0) {
                return -1;
            }
            body -= n;
        }
        if (body == 0) {
            return status;
        }
    }
}

/*
 * Wait until STATS metrics_connections, read over the lock port fd, is
 * n: every connection made to the metrics port before has been set up by
 * the daemon (and any it evicted or closed given its place up), in an
 * earlier turn of its loop than any made after (daemon/metrics.c spares
 * a connection from eviction in the turn it began its state).
 */
static void
mt_wait_conns(int fd, long long n)
{
    expect_wait_stat_on(fd, "metrics_connections", n);
}

/* A new connection to the metrics port that sends half a request (under way from now). */
static int
mt_half_request(void)
{
    int fd = h_connect_port(mt_port);

    ck_assert_msg(fd >= 0, "cannot connect to the metrics port");
    ck_assert_int_eq(h_send_raw(fd, "GET /metr", 9), 0);
    return fd;
}

/* A new keep-alive connection whose first scrape was answered 200: idle from now. */
static int
mt_idle_keepalive(void)
{
    int fd = h_connect_port(mt_port);

    ck_assert_msg(fd >= 0, "cannot connect to the metrics port");
    ck_assert_int_eq(h_send_raw(fd, MT_KEEPALIVE_GET, strlen(MT_KEEPALIVE_GET)), 0);
    ck_assert_int_eq(mt_read_response(fd, H_HTTP_MS), 200);
    return fd;
}

/* STATS name over fd, which must be there. */
static long long
mt_stat_on(int fd, const char *name)
{
    long long v = -1;

    ck_assert_msg(h_stat(fd, name, &v) == 0, "no STATS %s", name);
    return v;
}

/* Close fd with a reset (SO_LINGER 0): what it had not sent or read is dropped. */
static void
mt_reset(int fd)
{
    struct linger lg = { 1, 0 };

    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    close(fd);
}

/*
 * A scraper that resets its connections (SO_LINGER 0), one in the
 * middle of a request and one idle with its last answer unread, gives
 * their places back: metrics_connections returns to 0, the next scrape
 * is answered 200 with nothing evicted, and the lock port serves.
 */
START_TEST(metrics_reset_gives_place_back)
{
    struct h_daemon_opts opts;
    int half, idle, lock;

    memset(&opts, 0, sizeof(opts));
    opts.metrics_max_connections = 4;       /* 2 for the group of 127/8 */
    opts.metrics_request_timeout_ms = 60000;    /* no deadline closes them meanwhile */
    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &opts, .metrics_port = &mt_port);
    lock = expect_tcp();
    half = mt_half_request();
    idle = h_connect_port(mt_port);
    ck_assert_msg(idle >= 0, "cannot connect to the metrics port");
    ck_assert_int_eq(h_send_raw(idle, MT_KEEPALIVE_GET, strlen(MT_KEEPALIVE_GET)), 0);
    mt_wait_conns(lock, 2);
    mt_reset(half);
    mt_reset(idle);         /* its answer, if it came, unread */
    mt_wait_conns(lock, 0);
    ck_assert_msg(mt_cond_serving(NULL), "a scrape after the resets was not answered 200");
    ck_assert_int_eq(mt_stat_on(lock, "metrics_evicted"), 0);
    EXPECT_PREFIX(lock, "LOCK rst", "OK rst validity=");
    close(lock);
}
END_TEST

/*
 * metrics.max_connections: 4, hence 2 from one address group (all of
 * 127/8 is one).  The group full, a new connection is not refused: the
 * slowest connection of the group is closed to make room, and the new
 * one's scrape gets 200.  Slowest: a request under way (even one newer)
 * before a keep-alive connection that idles, then the one idle longest.
 * The other stays open; each eviction is counted, nothing is refused,
 * and the lock port serves meanwhile.  (Before eviction, the third
 * connection here was answered 503.)
 */
START_TEST(metrics_connection_cap)
{
    struct h_daemon_opts opts;
    int idle, half, idle2, lock;

    memset(&opts, 0, sizeof(opts));
    opts.metrics_max_connections = 4;
    /* No request deadline cuts the slow ones during the test's steps. */
    opts.metrics_request_timeout_ms = 60000;
    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &opts, .metrics_port = &mt_port);
    lock = expect_tcp();
    idle = mt_idle_keepalive();
    half = mt_half_request();
    mt_wait_conns(lock, 2);
    /* The group holds its 2: a scrape closes the request under way, not the older idle one. */
    ck_assert_msg(mt_cond_serving(NULL), "a scrape past the group's share was not answered 200");
    ck_assert_msg(h_expect_eof(half, H_PROMPT_MS), "the request under way was not closed");
    ck_assert_msg(h_quiet(idle, 50), "the idle connection was closed");
    ck_assert_int_eq(mt_stat_on(lock, "metrics_evicted"), 1);
    EXPECT_PREFIX(lock, "LOCK cap", "OK cap validity=");
    /* Two idle ones (the scrape's place given up first): the one idle longest goes. */
    mt_wait_conns(lock, 1);
    idle2 = mt_idle_keepalive();
    mt_wait_conns(lock, 2);
    ck_assert_msg(mt_cond_serving(NULL), "a scrape past the group's share was not answered 200");
    ck_assert_msg(h_expect_eof(idle, H_PROMPT_MS),
                  "the connection idle longest was not closed");
    ck_assert_msg(h_quiet(idle2, 50), "the connection idle a shorter time was closed");
    ck_assert_int_eq(mt_stat_on(lock, "metrics_evicted"), 2);
    ck_assert_int_eq(mt_stat_on(lock, "metrics_rejected"), 0);
    /* The keep-alive connection left still scrapes. */
    ck_assert_int_eq(h_send_raw(idle2, MT_KEEPALIVE_GET, strlen(MT_KEEPALIVE_GET)), 0);
    ck_assert_int_eq(mt_read_response(idle2, H_HTTP_MS), 200);
    EXPECT_PREFIX(lock, "UNLOCK cap", "OK cap");
    close(half);
    close(idle);
    close(idle2);
    close(lock);
}
END_TEST

#define MT_SLOW_CONNS   40      /* slowloris connections */
#define MT_SLOW_SOURCES 8       /* from 127.0.0.2 .. 127.0.0.9 */
#define MT_SLOW_BYTE_MS 500     /* one byte of each this often */
#define MT_SCRAPES      20      /* one every MT_SLOW_BYTE_MS */

/*
 * The slowloris attacker, in a child process until it is killed (at
 * most 60 s): MT_SLOW_CONNS connections from MT_SLOW_SOURCES loopback
 * addresses, each sending one byte of an endless request header every
 * MT_SLOW_BYTE_MS (their times spread over that period), each re-opened
 * at its next byte when the daemon closed it (a 503 or an eviction
 * alike).
 */
static void
mt_slowloris(void)
{
    static const char head[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    int fd[MT_SLOW_CONNS];
    size_t sent[MT_SLOW_CONNS];
    int64_t next[MT_SLOW_CONNS], start = h_now_ms(), stop = start + 60000;
    size_t i, k;

    for (i = 0; i < MT_SLOW_CONNS; i++) {
        fd[i] = -1;
        next[i] = start + (int64_t)i * MT_SLOW_BYTE_MS / MT_SLOW_CONNS;
    }
    while (h_now_ms() < stop) {
        struct pollfd pfd;
        char from[32], c;

        for (i = 0, k = 1; k < MT_SLOW_CONNS; k++) {
            if (next[k] < next[i]) {
                i = k;
            }
        }
        if (next[i] > h_now_ms()) {
            h_sleep_ms(next[i] - h_now_ms());  /* pacing: the attack's own rhythm */
        }
        next[i] += MT_SLOW_BYTE_MS;
        pfd.fd = fd[i];
        pfd.events = POLLIN;
        if (fd[i] >= 0 && poll(&pfd, 1, 0) == 1) {
            close(fd[i]);   /* an answer or the end: closed by the daemon */
            fd[i] = -1;
        }
        if (fd[i] < 0) {
            snprintf(from, sizeof(from), "127.0.0.%zu", 2 + i % MT_SLOW_SOURCES);
            fd[i] = h_tcp_connect(from, "127.0.0.1", mt_port, 0);
            sent[i] = 0;
        }
        if (fd[i] < 0) {
            continue;
        }
        c = sent[i] < sizeof(head) - 1 ? head[sent[i]] : 'a';
        if (send(fd[i], &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
            close(fd[i]);
            fd[i] = -1;
            continue;
        }
        sent[i]++;
    }
}

/* STATS metrics_evicted + metrics_rejected >= 1 (a build without the first: the second). */
static bool
mt_cond_table_full(void *arg)
{
    long long evicted = 0, rejected = 0;

    (void)arg;
    (void)h_stat_once("metrics_evicted", &evicted);
    return h_stat_once("metrics_rejected", &rejected) == 0 && evicted + rejected >= 1;
}

/*
 * A slowloris attack on /metrics at the defaults (metrics.max_connections
 * 16, 8 from one address group): 40 connections from 8 loopback
 * addresses, each sending a byte every 500 ms and re-opened at its next
 * byte when closed.  A scraper meanwhile, one GET every 500 ms on a new connection
 * for 10 s: every scrape is answered 200 (before eviction, 5 to 12 of 20
 * got 503).  The attack's connections are the ones closed, counted in
 * metrics_evicted and told by the log's line.
 */
START_TEST(metrics_slowloris_scrapes_served)
{
    char statuses[MT_SCRAPES * 5 + 1] = "";
    int failed = 0, i, lock;
    pid_t attacker;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .metrics_port = &mt_port);
    lock = expect_tcp();
    attacker = fork();
    ck_assert_int_ge(attacker, 0);
    if (attacker == 0) {
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        mt_slowloris();
        _exit(0);
    }
    /* The attack holds every place it may before the first scrape. */
    if (!h_wait_until(mt_cond_table_full, NULL, 5000)) {
        kill(attacker, SIGKILL);
        waitpid(attacker, NULL, 0);
        ck_abort_msg("the slowloris connections never filled /metrics's places");
    }
    for (i = 0; i < MT_SCRAPES; i++) {
        struct h_http_resp r;
        int64_t t0 = h_now_ms();
        int status = 0;

        if (mt_request("GET", "/metrics", &r) == 0) {
            status = r.status;
            h_http_free(&r);
        }
        failed += status != 200;
        snprintf(statuses + strlen(statuses), sizeof(statuses) - strlen(statuses), " %d", status);
        if (h_now_ms() - t0 < MT_SLOW_BYTE_MS) {
            h_sleep_ms(MT_SLOW_BYTE_MS - (h_now_ms() - t0));    /* pacing: the scraper's */
        }
    }
    kill(attacker, SIGKILL);
    ck_assert_int_eq(waitpid(attacker, NULL, 0), attacker);
    ck_assert_msg(failed == 0, "%d of %d scrapes under the slowloris attack failed:%s", failed,
                  MT_SCRAPES, statuses);
    ck_assert_int_ge(mt_stat_on(lock, "metrics_evicted"), 1);
    ck_assert_msg(h_wait_log(0, "slow connections closed to make room", H_PROMPT_MS),
                  "no log line on the evictions");
    EXPECT_PREFIX(lock, "LOCK sl", "OK sl validity=");
    close(lock);
}
END_TEST

/* A new connection from ::1 to the metrics port that sends half a request; -1: no IPv6. */
static int
mt_half_request6(void)
{
    struct sockaddr_in6 sa;
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        return -1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sin6_family = AF_INET6;
    sa.sin6_addr = in6addr_loopback;
    sa.sin6_port = htons((uint16_t)mt_port);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    ck_assert_int_eq(h_send_raw(fd, "GET /metr", 9), 0);
    return fd;
}

/*
 * Start the daemon (REDLOCKD_BIN) with a config of the test's own,
 * <name>.yml in the test directory, written from fmt (printf-style), its
 * log in <name>.log (into logp, size bytes); wait until /metrics serves
 * on mt_port.  Returns its pid (the caller stops it).
 */
static pid_t __attribute__((format(printf, 4, 5)))
mt_spawn_own(const char *name, char *logp, size_t size, const char *fmt, ...)
{
    const char *bin = getenv("REDLOCKD_BIN");
    const char *argv[4];
    char conf[512];
    va_list ap;
    FILE *f;
    pid_t pid;

    snprintf(conf, sizeof(conf), "%s/%s.yml", h_dir(), name);
    snprintf(logp, size, "%s/%s.log", h_dir(), name);
    f = fopen(conf, "w");
    ck_assert_ptr_nonnull(f);
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
    argv[0] = bin != NULL && bin[0] != '\0' ? bin : "./build/redlockd";
    argv[1] = "-c";
    argv[2] = conf;
    argv[3] = NULL;
    pid = h_spawn(argv, logp);
    ck_assert_int_gt(pid, 0);
    ck_assert_msg(h_wait_until(mt_cond_serving, NULL, H_START_MS),
                  "no /metrics within %d ms (see %s)", H_START_MS, logp);
    return pid;
}

/*
 * Address groups: metrics.listen on [::] (dual stack), max_connections 5,
 * so 3 from one group.  ::1 (an IPv6 /64) holds 2 slow connections,
 * 127.0.0.1 (127/8, IPv4-mapped here) its 3.  Six more slow ones from
 * 127.0.0.1 each close the oldest of 127/8, never one of ::1's; a scrape
 * from 127.0.0.1 is answered.  A third from ::1, within its share while
 * every place is taken, closes the oldest of the group that holds the
 * most (127/8).  (Before per-group shares and eviction, the newcomers
 * were answered 503 and nothing was closed.)
 */
START_TEST(metrics_groups_evict_their_own)
{
    char logp[512], peer[64];
    int six[3], four[10], lock, tcp_port;
    size_t i;
    pid_t pid;
    int status;

    EXPECT_SETUP();
    mt_port = h_free_port();
    tcp_port = h_free_port();
    ck_assert_int_gt(mt_port, 0);
    ck_assert_int_gt(tcp_port, 0);
    /* /metrics needs no master up: one Unix socket that does not exist. */
    pid = mt_spawn_own("groups", logp, sizeof(logp),
                       "listen:\n  tcp: \"127.0.0.1:%d\"\n  unix: \"\"\nmasters:\n"
                       "  - \"unix:%s/no-master.sock\"\nmetrics:\n  listen: \"[::]:%d\"\n"
                       "  allow_remote: true\n  max_connections: 5\n"
                       "  request_timeout_ms: 60000\n"
                       "lock:\n  restart_quarantine: false\n", tcp_port, h_dir(), mt_port);
    six[0] = mt_half_request6();
    if (six[0] < 0) {
        fprintf(stderr, "metrics_groups_evict_their_own: skipped, no IPv6 loopback (%s)\n",
                strerror(errno));
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        return;
    }
    lock = h_connect_port(tcp_port);
    ck_assert_msg(lock >= 0, "cannot connect to the lock port");
    six[1] = mt_half_request6();
    ck_assert_int_ge(six[1], 0);
    /*
     * Each step waits for the daemon to have set the newcomer up (STATS
     * metrics_connections or metrics_evicted moved): the connections are
     * accepted in their own turns of the loop, as the test means them,
     * however late a loaded machine delivers them.
     */
    for (i = 0; i < 3; i++) {
        four[i] = mt_half_request();
    }
    mt_wait_conns(lock, 5);
    /* Every place is taken; 127/8 holds its share: its own go, oldest first. */
    for (i = 3; i < 9; i++) {
        four[i] = mt_half_request();
        expect_wait_stat_on(lock, "metrics_evicted", (long long)i - 2);
        snprintf(peer, sizeof(peer), "127.0.0.1 newcomer %zu", i);
        ck_assert_msg(h_expect_eof(four[i - 3], H_PROMPT_MS), "%s: the oldest of 127/8 stayed",
                      peer);
        ck_assert_msg(h_quiet(six[0], 0) && h_quiet(six[1], 0), "%s closed one of ::1's", peer);
    }
    ck_assert_msg(mt_cond_serving(NULL), "a scrape from 127/8 at its share was not answered");
    ck_assert_msg(h_expect_eof(four[6], H_PROMPT_MS), "the scrape did not close 127/8's oldest");
    ck_assert_msg(h_quiet(six[0], 50) && h_quiet(six[1], 0), "the scrape closed one of ::1's");
    /* The scrape is over (its place given up): one more from 127/8 takes the last place. */
    mt_wait_conns(lock, 4);
    four[9] = mt_half_request();
    mt_wait_conns(lock, 5);
    ck_assert_msg(h_quiet(four[7], 50), "127/8 within its share closed its own");
    ck_assert_int_eq(mt_stat_on(lock, "metrics_evicted"), 7);
    /* ::1 within its share, every place taken: the group that holds the most loses its oldest. */
    six[2] = mt_half_request6();
    ck_assert_int_ge(six[2], 0);
    expect_wait_stat_on(lock, "metrics_evicted", 8);
    ck_assert_msg(h_expect_eof(four[7], H_PROMPT_MS), "::1's third did not close 127/8's oldest");
    ck_assert_msg(h_quiet(four[8], 50) && h_quiet(four[9], 0), "127/8's newer ones were closed");
    for (i = 0; i < 3; i++) {
        ck_assert_msg(h_quiet(six[i], 0), "::1's connection %zu was closed", i);
    }
    ck_assert_int_eq(mt_stat_on(lock, "metrics_evicted"), 8);
    ck_assert_int_eq(mt_stat_on(lock, "metrics_rejected"), 0);
    for (i = 0; i < 3; i++) {
        close(six[i]);
    }
    for (i = 0; i < 10; i++) {
        close(four[i]);
    }
    close(lock);
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %d",
                  h_decode_status(status));
}
END_TEST

/*
 * metrics.request_timeout_ms: 1500, evhttp's idle timeout 10 s.  A
 * client that sends a byte of its request every 300 ms (never idle) is
 * closed at the deadline; keep-alive scrapes spread over more than the
 * deadline are each answered (the deadline is per request).
 */
START_TEST(metrics_request_deadline)
{
    static const char head[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    struct h_daemon_opts opts;
    long long timed_out = -1;
    int64_t t0, closed_at = -1;
    int fd, lock, i;

    memset(&opts, 0, sizeof(opts));
    opts.metrics_request_timeout_ms = 1500;
    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &opts, .metrics_port = &mt_port);
    lock = expect_tcp();

    t0 = h_now_ms();
    fd = h_connect_port(mt_port);
    ck_assert_msg(fd >= 0, "cannot connect to the metrics port");
    ck_assert_int_eq(h_send_raw(fd, head, sizeof(head) - 1), 0);
    while (closed_at < 0 && h_now_ms() - t0 < 8000) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        char c;

        if (send(fd, "a", 1, MSG_NOSIGNAL) != 1) {
            closed_at = h_now_ms();     /* reset: the daemon closed it */
            break;
        }
        if (poll(&pfd, 1, 300) == 1) {
            ssize_t n = recv(fd, &c, 1, 0);

            ck_assert_msg(n <= 0, "the trickling client got an answer");
            closed_at = h_now_ms();
        }
    }
    ck_assert_msg(closed_at >= 0, "a trickling client was still open after %lld ms",
                  (long long)(h_now_ms() - t0));
    ck_assert_msg(closed_at - t0 >= 1300, "closed after %lld ms, before the deadline",
                  (long long)(closed_at - t0));
    ck_assert_msg(closed_at - t0 <= 1500 + 1500, "closed after %lld ms, long after the deadline",
                  (long long)(closed_at - t0));
    close(fd);
    ck_assert_int_eq(h_stat(lock, "metrics_timed_out", &timed_out), 0);
    ck_assert_int_eq(timed_out, 1);

    /* Keep-alive: four scrapes 600 ms apart on one connection, all answered. */
    fd = h_connect_port(mt_port);
    ck_assert_msg(fd >= 0, "cannot connect to the metrics port");
    for (i = 0; i < 4; i++) {
        if (i > 0) {
            h_sleep_ms(600);    /* pacing: the connection outlives the deadline */
        }
        ck_assert_int_eq(h_send_raw(fd, MT_KEEPALIVE_GET, strlen(MT_KEEPALIVE_GET)), 0);
        ck_assert_int_eq(mt_read_response(fd, H_HTTP_MS), 200);
    }
    close(fd);
    EXPECT_PREFIX(lock, "LOCK dl", "OK dl validity=");
    close(lock);
}
END_TEST

/*
 * A label value with a double quote, a backslash and a LF (a master's
 * Unix socket path, which need not exist) is escaped as the format says.
 * The daemon is started here with a config of its own (the harness
 * writes TCP masters only), and needs no master up to serve /metrics.
 */
START_TEST(metrics_label_escapes)
{
    char logp[512], want[512], *body;
    pid_t pid;
    int status;

    EXPECT_SETUP();
    mt_port = h_free_port();
    ck_assert_int_gt(mt_port, 0);
    /* YAML "we\"ird\\na\nme.sock": the path is we"ird\na<LF>me.sock. */
    pid = mt_spawn_own("escapes", logp, sizeof(logp),
                       "listen:\n  tcp: \"127.0.0.1:%d\"\n  unix: \"\"\nmasters:\n"
                       "  - \"unix:%s/we\\\"ird\\\\na\\nme.sock\"\nmetrics:\n"
                       "  listen: \"127.0.0.1:%d\"\nlock:\n  restart_quarantine: false\n",
                       h_free_port(), h_dir(), mt_port);
    body = mt_scrape();
    mt_check_format(body);
    snprintf(want, sizeof(want),
             "redlockd_master_up{master=\"0\",addr=\"unix:%s/we\\\"ird\\\\na\\nme.sock\"} 0\n",
             h_dir());
    ck_assert_msg(strstr(body, want) != NULL, "no line '%s' in:\n%s", want, body);
    free(body);
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %d",
                  h_decode_status(status));
}
END_TEST

/*
 * metrics.listen's port taken: the daemon says so and does not start.
 * A start the test expects to fail prints nothing (make check shows no
 * start-failure lines for tests that pass).
 */
START_TEST(metrics_port_taken)
{
    struct h_daemon_opts opts;
    char want[128], log[65536], errpath[512];
    FILE *f;
    size_t n;
    int fd, errfd, saved, rc, port;

    EXPECT_SETUP(.masters = NMASTERS);
    fd = h_tcp_listen(htonl(INADDR_LOOPBACK), 1, &port);
    ck_assert_msg(fd >= 0, "cannot listen on 127.0.0.1: %s", strerror(errno));
    memset(&opts, 0, sizeof(opts));
    opts.metrics_port = port;
    opts.start_fails = true;
    snprintf(errpath, sizeof(errpath), "%s/stderr", h_dir());
    errfd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_int_ge(errfd, 0);
    fflush(stderr);
    saved = dup(2);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_eq(dup2(errfd, 2), 2);
    rc = h_start_daemon(&opts);
    fflush(stderr);
    ck_assert_int_eq(dup2(saved, 2), 2);
    close(saved);
    close(errfd);
    ck_assert_msg(rc != 0, "redlockd started with metrics.listen taken");
    f = fopen(errpath, "r");
    ck_assert_ptr_nonnull(f);
    n = fread(log, 1, sizeof(log) - 1, f);
    log[n] = '\0';
    fclose(f);
    ck_assert_msg(n == 0, "the expected failed start printed:\n%s", log);
    ck_assert_msg(h_daemon_count() == 0, "a daemon is counted as started");
    f = fopen(h_daemon_log_path(), "r");
    ck_assert_ptr_nonnull(f);
    n = fread(log, 1, sizeof(log) - 1, f);
    log[n] = '\0';
    fclose(f);
    snprintf(want, sizeof(want), "error metrics.listen 127.0.0.1:%d: cannot listen: "
             "Address already in use", opts.metrics_port);
    ck_assert_msg(strstr(log, want) != NULL, "the log lacks '%s':\n%s", want, log);
    close(fd);
}
END_TEST

#define MT_FD_LIMIT   200   /* the daemon's descriptor limit, soft and hard */
#define MT_FD_CLIENTS 40    /* TCP clients opened on top of the test's own */

/*
 * redlockd_descriptor_limit (STATS descriptor_limit) is the limit the
 * daemon runs under, and redlockd_descriptors_open, the count an alert
 * divides by it, follows the daemon's descriptors: 40 more clients raise
 * it by at least 40 and stay under the limit, and closing them brings it
 * back.
 */
START_TEST(metrics_descriptors_against_limit)
{
    struct h_daemon_opts o = { .nofile = MT_FD_LIMIT };
    int fds[MT_FD_CLIENTS], fd, i;
    long long before, during, after = -1;
    int64_t deadline;
    char *body;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .metrics_port = &mt_port, .opts = &o);
    fd = expect_tcp();
    expect_wait_stat_on(fd, "connections", 1);
    expect_wait_stat_on(fd, "descriptor_limit", MT_FD_LIMIT);
    body = mt_scrape();
    ck_assert_int_eq(mt_int(body, "redlockd_descriptor_limit"), MT_FD_LIMIT);
    before = mt_int(body, "redlockd_descriptors_open");
    free(body);
    ck_assert_msg(before > 2 * NMASTERS && before < MT_FD_LIMIT,
                  "redlockd_descriptors_open %lld with %d masters and one client", before,
                  NMASTERS);
    for (i = 0; i < MT_FD_CLIENTS; i++) {
        fds[i] = expect_tcp();
    }
    expect_wait_stat_on(fd, "connections", 1 + MT_FD_CLIENTS);
    body = mt_scrape();
    during = mt_int(body, "redlockd_descriptors_open");
    free(body);
    ck_assert_msg(during >= before + MT_FD_CLIENTS && during < MT_FD_LIMIT,
                  "redlockd_descriptors_open %lld with %d clients more, %lld before", during,
                  MT_FD_CLIENTS, before);
    for (i = 0; i < MT_FD_CLIENTS; i++) {
        close(fds[i]);
    }
    expect_wait_stat_on(fd, "connections", 1);
    deadline = h_now_ms() + H_PROMPT_MS;
    while (h_now_ms() < deadline) {
        body = mt_scrape();
        after = mt_int(body, "redlockd_descriptors_open");
        free(body);
        if (after <= before) {
            break;
        }
        h_sleep_ms(20);
    }
    ck_assert_msg(after <= before, "redlockd_descriptors_open %lld once the clients closed, "
                  "%lld before them", after, before);
    close(fd);
}
END_TEST

static Suite *
metrics_suite(void)
{
    Suite *s = suite_create("redlockd Prometheus metrics");

    expect_add_case(s, "metrics_format", metrics_format, h_end, TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_counts_match_stats", metrics_counts_match_stats, h_end,
                    TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_histogram", metrics_histogram, h_end, TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_master_down", metrics_master_down, h_end, TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_locks_lost_by_reason", metrics_locks_lost_by_reason, h_end,
                    TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_table_rules", metrics_table_rules, h_end, TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_table_in_both_outputs", metrics_table_in_both_outputs, h_end,
                    TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_paths_and_methods", metrics_paths_and_methods, h_end,
                    TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_stalled_client_closed", metrics_stalled_client_closed, h_end,
                    TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_connection_cap", metrics_connection_cap, h_end,
                    TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_reset_gives_place_back", metrics_reset_gives_place_back,
                    h_end, TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_slowloris_scrapes_served", metrics_slowloris_scrapes_served,
                    h_end, TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_groups_evict_their_own", metrics_groups_evict_their_own,
                    h_end, TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_request_deadline", metrics_request_deadline, h_end,
                    TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_label_escapes", metrics_label_escapes, h_end, TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_port_taken", metrics_port_taken, h_end, TEST_TIMEOUT_S);
    expect_add_case(s, "metrics_descriptors_against_limit", metrics_descriptors_against_limit,
                    h_end, TEST_TIMEOUT_S);
    return s;
}

const struct runner runner_main = { "check_metrics", metrics_suite, h_suite_init, h_suite_cleanup };
