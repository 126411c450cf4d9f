/*
 * status_page.h: the fleet at a glance, as one HTML page, served at
 * GET / on metrics.listen (daemon/metrics.c routes it here).
 *
 * What it shows, read when the request arrives: the daemon's version,
 * uptime and clock; the masters, each with its address, its health (up
 * and counted, quarantined, the same server as another, not counted for
 * its layout registry, connecting, down and why), its subscriber link,
 * its last round trip and its errors; the quorum (masters whose answers
 * count now, of how many, the quorum, and whether a quorum is reachable);
 * the names this daemon's sessions hold, one row per hold (name, kind,
 * holder's label, fencing token, time held, lease left, waiters on the
 * name), and the LOCKs waiting (name, place in line, label, kind, time
 * waited), of at most STATUS_PAGE_MAX_NAMES names and at most
 * STATUS_PAGE_MAX_ROWS rows in each of the two tables, whichever limit
 * comes first (a shared or counted name has a row per hold and per
 * waiter, so names alone would not bound it; the page says how many more
 * names, holds and waiting LOCKs there are); and the recent LOST and
 * BREAK events (daemon/events.h).
 *
 * The page is plain HTML with inline CSS: no script, nothing loaded from
 * anywhere (the answer's Content-Security-Policy says so to the
 * browser), and it reloads itself every STATUS_PAGE_REFRESH_S seconds
 * (<meta http-equiv="refresh">).  Every byte that comes from a client
 * or a master (a name, a label, a reason, a master's address or error)
 * is escaped (status_page_escape).  Labels follow auth.show_labels: the
 * page has no session and so no admin right, and with "admin" it shows
 * none.  It owns no state: it reads the
 * other modules' views (lock_view, master_get_stats, events_get, the
 * counters) and writes.
 */
#ifndef REDLOCKD_STATUS_PAGE_H
#define REDLOCKD_STATUS_PAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "daemon/master.h"

struct evbuffer;

#define STATUS_PAGE_PATH            "/"
#define STATUS_PAGE_CONTENT_TYPE    "text/html; charset=utf-8"
/* What the browser may load for the page: nothing but its own inline CSS. */
#define STATUS_PAGE_CSP             "default-src 'none'; style-src 'unsafe-inline'; " \
                                    "img-src data:; base-uri 'none'; form-action 'none'"
#define STATUS_PAGE_REFRESH_S       5       /* the page reloads itself, seconds */
#define STATUS_PAGE_MAX_NAMES       200     /* names shown; the rest are counted */
/* Rows shown in each of the two tables (holds, waiting LOCKs); the rest are counted. */
#define STATUS_PAGE_MAX_ROWS        500

/* A master's health on the page, from its counters (status_page_health). */
enum status_page_health {
    STATUS_PAGE_COUNTED,        /* up, and its answers count */
    STATUS_PAGE_QUARANTINED,    /* up, in restart or clock quarantine */
    STATUS_PAGE_DUPLICATE,      /* up, the same server as another entry */
    STATUS_PAGE_NOT_COUNTED,    /* up, not counted for its layout registry */
    STATUS_PAGE_CONNECTING,     /* connecting, or its handshake is under way */
    STATUS_PAGE_DOWN            /* down: waiting to connect again */
};

/*
 * A master's health on the page: counted (master_counted(), the rule
 * the quorum line's count adds up, so the two always agree), else why
 * not, from its counters (master_get_stats), the first that applies:
 * down, connecting, a duplicate, quarantined, else not counted (its
 * layout registry).  Pure.
 */
enum status_page_health status_page_health(const struct master_stats *st, bool counted);

/* The health as one word for the page ("counted", "down", ...): a static string. */
const char *status_page_health_name(enum status_page_health h);

/*
 * Append len bytes of s to out as HTML text, safe inside an element or
 * a quoted attribute: & < > " ' as character references, and every byte
 * outside 0x20-0x7E as the four characters \xNN (so no byte a client
 * sent can open markup, end an attribute, or make the page invalid
 * UTF-8).
 */
void status_page_escape(struct evbuffer *out, const char *s, size_t len);

/*
 * Write the whole page, as it is now, into out (appended; the caller
 * owns out).  Its size is bounded: at most STATUS_PAGE_MAX_ROWS holds
 * and STATUS_PAGE_MAX_ROWS waiting LOCKs, of at most STATUS_PAGE_MAX_NAMES
 * names, EVENTS_MAX events, the masters.  The walk still visits every
 * hold and waiter of the names shown, but writes none
 * past the rows.  Never fails (out of memory aborts, daemon/xmalloc.h).
 */
void status_page_write(struct evbuffer *out);

#endif /* REDLOCKD_STATUS_PAGE_H */
