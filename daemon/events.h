/*
 * events.h: the recent LOST and BREAK events, for the status page.
 *
 * A bounded ring of the last EVENTS_MAX events, newest first when read:
 * a lease this daemon held that was lost (what its session heard as
 * "! LOST <name> reason=<why>"), and a BREAK this daemon carried out
 * (answered by the masters).  The lock table notes them where it
 * announces them (daemon/lock.c, daemon/lock_verbs.c); the status page
 * (daemon/status_page.h) reads them.  This module owns the ring: a
 * static array, nothing allocated, nothing freed.  An event older than
 * the last EVENTS_MAX is forgotten (events_total still counts it).
 * Everything here runs on the event loop's thread.
 */
#ifndef REDLOCKD_EVENTS_H
#define REDLOCKD_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define EVENTS_MAX          32      /* events kept */
#define EVENTS_NAME_MAX     250     /* longest name kept, bytes (PROTO_NAME_MAX) */
#define EVENTS_LABEL_MAX    64      /* longest label kept, bytes (PROTO_LABEL_MAX) */
#define EVENTS_REASON_MAX   95      /* longest reason kept, bytes (longer is cut) */

/* What happened. */
enum events_kind {
    EVENTS_LOST,        /* a hold of a session of this daemon was lost */
    EVENTS_BREAK        /* a BREAK through this daemon was answered */
};

/* One event, as kept.  Copies: nothing points outside the ring. */
struct events_entry {
    enum events_kind kind;                  /* LOST or BREAK */
    int64_t  at_us;                         /* when, CLOCK_MONOTONIC us (util_now_us) */
    time_t   wall;                          /* when, wall clock (for people only) */
    size_t   name_len;                      /* bytes in name (cut at EVENTS_NAME_MAX) */
    char     name[EVENTS_NAME_MAX + 1];     /* the lock's name, NUL-terminated (a
                                               name holds no NUL) */
    char     label[EVENTS_LABEL_MAX + 1];   /* the holder's label; "" when not known */
    char     reason[EVENTS_REASON_MAX + 1]; /* LOST: its reason word (renew, quorum,
                                               gone, broken, shutdown, ...); BREAK:
                                               "holders=N fence=F", or "no quorum" */
};

/*
 * Note an event now.  name: name_len bytes (not NUL-terminated; more
 * than EVENTS_NAME_MAX are cut); label and reason: NUL-terminated, or
 * NULL for none (cut at their maxima).  Everything is copied.  The
 * oldest event goes when EVENTS_MAX are kept.  O(1); never fails.
 */
void events_note(enum events_kind kind, const char *name, size_t name_len,
                 const char *label, const char *reason);

/* Events kept now: 0..EVENTS_MAX. */
size_t events_count(void);

/*
 * The i-th newest event kept (0: the newest), i < events_count(); NULL
 * past them.  The pointer is into the ring: valid until the next
 * events_note().
 */
const struct events_entry *events_get(size_t i);

/* Events noted since start, forgotten ones included. */
uint64_t events_total(void);

/* "LOST" or "BREAK": a static string. */
const char *events_kind_name(enum events_kind kind);

#endif /* REDLOCKD_EVENTS_H */
