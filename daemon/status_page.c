/*
 * status_page.c: the status page (daemon/status_page.h), written into an
 * evbuffer from the other modules' read-only views.
 *
 * The layout is fixed: a header line (version, uptime, the time), the
 * quorum, the masters, the held names, the waiting LOCKs, the recent
 * events, each a section with a table.  The tables' colours are part of
 * what the browser test checks (tests/check_page.c, tests/png_bands.py):
 * the held names' table is STATUS_PAGE_HELD_WIDTH pixels wide, its
 * header row STATUS_PAGE_HELD_HEAD and its rows alternately
 * STATUS_PAGE_HELD_ODD and STATUS_PAGE_HELD_EVEN, colours used nowhere
 * else on the page.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "conf/conf.h"
#include "daemon/ctx.h"
#include "daemon/events.h"
#include "daemon/lock.h"
#include "daemon/master.h"
#include "daemon/redlock.h"
#include "daemon/stats.h"
#include "daemon/status_page.h"
#include "daemon/util.h"

#define STATUS_PAGE_HELD_WIDTH  "960"       /* px */
#define STATUS_PAGE_HELD_HEAD   "#1f5fa8"   /* the held table's header row */
#define STATUS_PAGE_HELD_ODD    "#fff3c4"   /* its 1st, 3rd, ... rows */
#define STATUS_PAGE_HELD_EVEN   "#ffd966"   /* its 2nd, 4th, ... rows */

static const char status_page_css[] =
    "body{font-family:'DejaVu Sans',sans-serif;font-size:14px;margin:16px;"
    "color:#111;background:#fff}"
    "h1{font-size:20px;margin:0 0 4px 0}"
    "h2{font-size:16px;margin:18px 0 6px 0}"
    "p{margin:4px 0}"
    "table{border-collapse:collapse;border-spacing:0}"
    "th,td{padding:4px 8px;text-align:left;vertical-align:top;border:0}"
    "th{color:#fff}"
    "td.n{text-align:right}"
    "table.t{min-width:600px}"
    "table.t th{background:#555}"
    "table.t tr:nth-child(odd) td{background:#f2f2f2}"
    "table.t tr:nth-child(even) td{background:#e2e2e2}"
    "table.held{width:" STATUS_PAGE_HELD_WIDTH "px;table-layout:fixed}"
    "table.held th{background:" STATUS_PAGE_HELD_HEAD "}"
    "table.held tr.hold:nth-child(odd) td{background:" STATUS_PAGE_HELD_ODD "}"
    "table.held tr.hold:nth-child(even) td{background:" STATUS_PAGE_HELD_EVEN "}"
    "table.held td{overflow-wrap:anywhere}"
    ".ok{color:#0a6b1f;font-weight:bold}"
    ".bad{color:#b00020;font-weight:bold}"
    ".warn{color:#8a5a00;font-weight:bold}"
    ".more{font-style:italic}"
    ".quiet{color:#555}";

enum status_page_health
status_page_health(const struct master_stats *st, bool counted)
{
    if (counted) {
        return STATUS_PAGE_COUNTED;
    }
    if (st->state == MASTER_DOWN) {
        return STATUS_PAGE_DOWN;
    }
    if (st->state != MASTER_UP) {
        return STATUS_PAGE_CONNECTING;
    }
    if (st->duplicate_of >= 0) {
        return STATUS_PAGE_DUPLICATE;
    }
    if (st->quarantine_ms > 0) {
        return STATUS_PAGE_QUARANTINED;
    }
    return STATUS_PAGE_NOT_COUNTED;
}

const char *
status_page_health_name(enum status_page_health h)
{
    switch (h) {
    case STATUS_PAGE_COUNTED:
        return "up";
    case STATUS_PAGE_QUARANTINED:
        return "quarantined";
    case STATUS_PAGE_DUPLICATE:
        return "duplicate";
    case STATUS_PAGE_NOT_COUNTED:
        return "not counted";
    case STATUS_PAGE_CONNECTING:
        return "connecting";
    case STATUS_PAGE_DOWN:
        break;
    }
    return "down";
}

void
status_page_escape(struct evbuffer *out, const char *s, size_t len)
{
    const char *run = s, *end = s + len;
    char hex[8];

    for (; s < end; s++) {
        unsigned char c = (unsigned char)*s;
        const char *esc = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;"
                          : c == '"' ? "&quot;" : c == '\'' ? "&#39;" : NULL;

        if (esc == NULL && c >= 0x20 && c <= 0x7e) {
            continue;
        }
        evbuffer_add(out, run, (size_t)(s - run));
        if (esc != NULL) {
            evbuffer_add(out, esc, strlen(esc));
        } else {
            snprintf(hex, sizeof(hex), "\\x%02x", c);
            evbuffer_add(out, hex, 4);
        }
        run = s + 1;
    }
    evbuffer_add(out, run, (size_t)(s - run));
}

/* status_page_escape() of a NUL-terminated string (NULL or "": "-"). */
static void
status_page_text(struct evbuffer *out, const char *s)
{
    if (s == NULL || *s == '\0') {
        evbuffer_add(out, "-", 1);
        return;
    }
    status_page_escape(out, s, strlen(s));
}

/*
 * A holder's label, NUL-terminated (NULL or "": "-"), or, when
 * auth.show_labels keeps labels for admin sessions (the page has no
 * session, so it has no admin right), a word saying so.
 */
static void
status_page_label(struct evbuffer *out, const char *label)
{
    if (ctx.conf->show_labels != CONF_LABELS_ALL) {
        evbuffer_add_printf(out, "<span class=\"quiet\">hidden</span>");
        return;
    }
    status_page_text(out, label);
}

/* A duration of ms milliseconds for people: "850 ms", "12.3 s", "4 min 3 s", "2 h 5 min". */
static void
status_page_duration(struct evbuffer *out, int64_t ms)
{
    if (ms < 0) {
        evbuffer_add_printf(out, "-");
    } else if (ms < 1000) {
        evbuffer_add_printf(out, "%lld ms", (long long)ms);
    } else if (ms < 60 * 1000) {
        evbuffer_add_printf(out, "%lld.%lld s", (long long)(ms / 1000),
                            (long long)(ms % 1000 / 100));
    } else if (ms < 3600 * 1000) {
        evbuffer_add_printf(out, "%lld min %lld s", (long long)(ms / 60000),
                            (long long)(ms % 60000 / 1000));
    } else if (ms < 86400LL * 1000) {
        evbuffer_add_printf(out, "%lld h %lld min", (long long)(ms / 3600000),
                            (long long)(ms % 3600000 / 60000));
    } else {
        evbuffer_add_printf(out, "%lld d %lld h", (long long)(ms / 86400000),
                            (long long)(ms % 86400000 / 3600000));
    }
}

/* A wall-clock time as UTC, "2026-11-29 19:45:12 UTC". */
static void
status_page_wall(struct evbuffer *out, time_t t)
{
    struct tm tm;
    char buf[40];

    if (gmtime_r(&t, &tm) == NULL || strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC",
                                              &tm) == 0) {
        evbuffer_add_printf(out, "-");
        return;
    }
    evbuffer_add_printf(out, "%s", buf);
}

/* The kind of a hold for people: "exclusive", "shared", "counted (permit 2 of 5)". */
static void
status_page_kind(struct evbuffer *out, const struct lock_listing *e)
{
    switch (e->kind) {
    case LOCK_KIND_SHARED:
        evbuffer_add_printf(out, "shared");
        break;
    case LOCK_KIND_COUNTED:
        if (e->held && e->permit >= 0) {
            evbuffer_add_printf(out, "counted (permit %d of %u)", e->permit, e->limit);
        } else {
            evbuffer_add_printf(out, "counted (limit %u)", e->limit);
        }
        break;
    case LOCK_KIND_EXCLUSIVE:
        evbuffer_add_printf(out, "exclusive");
        break;
    }
}

/* ---- the sections ---- */

static void
status_page_head(struct evbuffer *out, int64_t now_us)
{
    evbuffer_add_printf(out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"refresh\" content=\"%d\">"
        "<meta name=\"viewport\" content=\"width=device-width\">"
        "<link rel=\"icon\" href=\"data:,\">"
        "<title>redlockd %s</title><style>%s</style></head>\n<body>\n",
        STATUS_PAGE_REFRESH_S, REDLOCKD_VERSION, status_page_css);
    evbuffer_add_printf(out, "<h1>redlockd %s</h1>\n<p class=\"quiet\" id=\"about\">up ",
                        REDLOCKD_VERSION);
    status_page_duration(out, (now_us - stats.start_us) / 1000);
    evbuffer_add_printf(out, ", pid %ld; this page at ", (long)getpid());
    status_page_wall(out, time(NULL));
    evbuffer_add_printf(out, ", reloaded every %d s. Counters: <a href=\"/metrics\">/metrics"
                        "</a>.</p>\n", STATUS_PAGE_REFRESH_S);
}

static void
status_page_quorum(struct evbuffer *out)
{
    struct master_summary sum;
    size_t n = master_count(), q = redlock_quorum(n);
    bool reachable;

    master_tally(&sum);
    reachable = sum.counted >= q;
    if (reachable) {
        /* The margin, as the log says it (daemon/reach_watch.c); amber when it is 0. */
        evbuffer_add_printf(out, "<h2>Quorum</h2>\n<p id=\"quorum\"><span class=\"%s\">"
                            "quorum reachable: %zu count, %zu more may fail</span>; ",
                            sum.counted > q ? "ok" : "warn", sum.counted, sum.counted - q);
    } else {
        evbuffer_add_printf(out, "<h2>Quorum</h2>\n<p id=\"quorum\"><span class=\"bad\">"
                            "NO QUORUM</span>: ");
    }
    evbuffer_add_printf(out, "%zu of %zu masters up and counted, quorum %zu", sum.counted, n,
                        q);
    if (sum.up != sum.counted) {
        evbuffer_add_printf(out, " (%zu up, of which %zu quarantined, %zu duplicate, "
                            "%zu not counted for their layout registry)", sum.up,
                            sum.quarantined, sum.duplicate, sum.layout_refused);
    }
    evbuffer_add_printf(out, ".</p>\n");
}

static void
status_page_masters(struct evbuffer *out)
{
    struct master_stats st;
    enum status_page_health h;
    size_t i, n = master_count();
    int64_t now = util_now_us();

    evbuffer_add_printf(out, "<h2>Masters</h2>\n<table class=\"t\" id=\"masters\"><tr>"
                        "<th>#</th><th>address</th><th>health</th><th>detail</th>"
                        "<th>subscriber</th><th title=\"the last request's, while the "
                        "command link is up\">round trip</th><th>errors</th>"
                        "<th title=\"connections made again after the first\">"
                        "reconnects made</th></tr>\n");
    for (i = 0; i < n; i++) {
        struct master *m = master_at(i);

        master_get_stats(m, &st);
        h = status_page_health(&st, master_counted(i, now));
        evbuffer_add_printf(out, "<tr class=\"master\"><td class=\"n\">%zu</td><td>", i);
        status_page_text(out, master_name(m));
        evbuffer_add_printf(out, "</td><td class=\"%s\">%s</td><td>",
                            h == STATUS_PAGE_COUNTED ? "ok"
                            : h == STATUS_PAGE_DOWN ? "bad" : "warn",
                            status_page_health_name(h));
        status_page_text(out, master_status_text(m));
        if (st.duplicate_of >= 0) {
            evbuffer_add_printf(out, " (same server as #%d)", st.duplicate_of);
        }
        if (st.evicting) {
            evbuffer_add_printf(out, "; its maxmemory-policy may evict lock keys");
        }
        evbuffer_add_printf(out, "</td><td>%s</td><td class=\"n\">",
                            st.sub_up ? "up" : "down");
        if (st.rtt_us >= 0 && st.state == MASTER_UP) {     /* else stale: the link is not up */
            evbuffer_add_printf(out, "%lld.%03lld ms", (long long)(st.rtt_us / 1000),
                                (long long)(st.rtt_us % 1000));
        } else {
            evbuffer_add_printf(out, "-");
        }
        evbuffer_add_printf(out, "</td><td class=\"n\">%llu</td><td class=\"n\">%llu</td>"
                            "</tr>\n", (unsigned long long)st.errors,
                            (unsigned long long)st.reconnects);
    }
    evbuffer_add_printf(out, "</table>\n");
}

/* What the two walks of the lock table write into (lock_view). */
struct status_page_walk {
    struct evbuffer *out;   /* the page */
    bool held;              /* this walk writes holds (else waiting LOCKs) */
    size_t rows;            /* rows written, at most STATUS_PAGE_MAX_ROWS */
};

static void
status_page_row_cb(const struct lock_listing *e, void *arg)
{
    struct status_page_walk *w = arg;
    struct evbuffer *out = w->out;

    if (e->held != w->held || w->rows >= STATUS_PAGE_MAX_ROWS) {
        return;     /* the other table's, or past the rows shown (counted) */
    }
    w->rows++;
    if (e->held) {
        evbuffer_add_printf(out, "<tr class=\"hold\"><td>");
        status_page_escape(out, e->name, e->name_len);
        evbuffer_add_printf(out, "</td><td>");
        status_page_kind(out, e);
        evbuffer_add_printf(out, "</td><td class=\"label\">");
        status_page_label(out, e->label);
        evbuffer_add_printf(out, "</td><td class=\"n\">");
        if (e->fence > 0) {
            evbuffer_add_printf(out, "%lld", (long long)e->fence);
        } else {
            evbuffer_add_printf(out, "-");
        }
        evbuffer_add_printf(out, "</td><td class=\"n\">");
        status_page_duration(out, e->held_ms);
        evbuffer_add_printf(out, "</td><td class=\"n\">");
        status_page_duration(out, e->ttl_ms);
        evbuffer_add_printf(out, "</td><td class=\"n\">%zu</td></tr>\n", e->waiters);
        return;
    }
    evbuffer_add_printf(out, "<tr class=\"waiter\"><td>");
    status_page_escape(out, e->name, e->name_len);
    evbuffer_add_printf(out, "</td><td class=\"n\">%zu of %zu</td><td class=\"label\">",
                        e->position, e->waiters);
    status_page_label(out, e->label);
    evbuffer_add_printf(out, "</td><td>");
    status_page_kind(out, e);
    evbuffer_add_printf(out, "</td><td class=\"n\">");
    status_page_duration(out, e->held_ms);
    evbuffer_add_printf(out, "</td></tr>\n");
}

static void
status_page_locks(struct evbuffer *out)
{
    struct status_page_walk w = { out, true, 0 };
    size_t names = lock_count_names(), shown, more;

    if (names == 0) {
        evbuffer_add_printf(out, "<h2>Held here</h2>\n<p id=\"holds\">Nothing is held or "
                            "waited for through this daemon (session mode; a lease-mode lock "
                            "lives on the masters only).</p>\n");
    } else {
        evbuffer_add_printf(out, "<h2>Held here</h2>\n<p id=\"holds\">%zu hold%s of %zu "
                            "name%s held or waited for through this daemon (session mode; a "
                            "lease-mode lock lives on the masters only); a session's lease is "
                            "renewed by the daemon while the session lasts.</p>\n",
                            lock_count_held(), lock_count_held() == 1 ? "" : "s", names,
                            names == 1 ? "" : "s");
    }
    evbuffer_add_printf(out, "<table class=\"held\" id=\"held\"><colgroup>"
                        "<col style=\"width:28%%\"><col style=\"width:14%%\">"
                        "<col style=\"width:20%%\"><col style=\"width:8%%\">"
                        "<col style=\"width:11%%\"><col style=\"width:11%%\">"
                        "<col style=\"width:8%%\"></colgroup>"
                        "<thead><tr class=\"head\"><th>name</th><th>kind</th>"
                        "<th>holder</th><th>fence</th><th>held for</th><th>lease left</th>"
                        "<th>waiters</th></tr></thead><tbody>\n");
    shown = lock_view(STATUS_PAGE_MAX_NAMES, status_page_row_cb, &w);
    evbuffer_add_printf(out, "</tbody></table>\n");
    if (ctx.conf->show_labels != CONF_LABELS_ALL) {
        evbuffer_add_printf(out, "<p class=\"quiet\" id=\"hidden\">Labels hidden: "
                            "auth.show_labels is admin.</p>\n");
    }
    if (w.rows == 0 && names > 0) {     /* names == 0 was said above */
        evbuffer_add_printf(out, "<p class=\"quiet\">Nothing held here.</p>\n");
    }
    if (names > shown) {
        evbuffer_add_printf(out, "<p class=\"more\" id=\"more\">%zu more name%s not shown "
                            "(the page shows the first %d by name; LIST or redlockctl list "
                            "shows them all).</p>\n", names - shown,
                            names - shown == 1 ? "" : "s", STATUS_PAGE_MAX_NAMES);
    }
    if (w.rows == STATUS_PAGE_MAX_ROWS && lock_count_held() > w.rows) {
        more = lock_count_held() - w.rows;
        evbuffer_add_printf(out, "<p class=\"more\" id=\"more-holds\">%zu more hold%s not "
                            "shown (the page shows at most %d holds; LIST or redlockctl list "
                            "shows them all).</p>\n", more, more == 1 ? "" : "s",
                            STATUS_PAGE_MAX_ROWS);
    }

    w.held = false;
    w.rows = 0;
    evbuffer_add_printf(out, "<h2>Waiting here</h2>\n<p>%zu LOCK%s waiting.</p>\n"
                        "<table class=\"t\" id=\"waiting\"><tr><th>name</th><th>place</th>"
                        "<th>label</th><th>kind</th><th>waiting for</th></tr>\n",
                        lock_count_waiters(), lock_count_waiters() == 1 ? "" : "s");
    (void)lock_view(STATUS_PAGE_MAX_NAMES, status_page_row_cb, &w);
    evbuffer_add_printf(out, "</table>\n");
    if (lock_count_waiters() > w.rows) {
        more = lock_count_waiters() - w.rows;
        evbuffer_add_printf(out, "<p class=\"more\" id=\"more-waiting\">%zu more waiting "
                            "LOCK%s not shown (the page shows at most %d, of the first %d "
                            "names; LIST or redlockctl list shows them all).</p>\n", more,
                            more == 1 ? "" : "s", STATUS_PAGE_MAX_ROWS, STATUS_PAGE_MAX_NAMES);
    }
}

static void
status_page_events(struct evbuffer *out, int64_t now_us)
{
    const struct events_entry *e;
    size_t i;

    evbuffer_add_printf(out, "<h2>Recent LOST and BREAK</h2>\n<p>%llu since start; the last "
                        "%d are kept, newest first.</p>\n<table class=\"t\" id=\"events\"><tr>"
                        "<th>when</th><th>ago</th><th>event</th><th>name</th><th>holder</th>"
                        "<th>reason</th></tr>\n", (unsigned long long)events_total(),
                        EVENTS_MAX);
    for (i = 0; (e = events_get(i)) != NULL; i++) {
        evbuffer_add_printf(out, "<tr class=\"event\"><td>");
        status_page_wall(out, e->wall);
        evbuffer_add_printf(out, "</td><td class=\"n\">");
        status_page_duration(out, (now_us - e->at_us) / 1000);
        evbuffer_add_printf(out, "</td><td class=\"%s\">%s</td><td>",
                            e->kind == EVENTS_LOST ? "bad" : "warn", events_kind_name(e->kind));
        status_page_escape(out, e->name, e->name_len);
        evbuffer_add_printf(out, "</td><td class=\"label\">");
        status_page_label(out, e->label);
        evbuffer_add_printf(out, "</td><td>");
        status_page_text(out, e->reason);
        evbuffer_add_printf(out, "</td></tr>\n");
    }
    evbuffer_add_printf(out, "</table>\n");
}

void
status_page_write(struct evbuffer *out)
{
    int64_t now_us = util_now_us();

    status_page_head(out, now_us);
    status_page_quorum(out);
    status_page_masters(out);
    status_page_locks(out);
    status_page_events(out, now_us);
    evbuffer_add_printf(out, "</body></html>\n");
}
