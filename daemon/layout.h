/*
 * layout.h: the layout of the keys on the masters, versioned, and
 * whether this daemon may serve beside the other daemons on each master.
 *
 * The layout is what the scripts write on the masters and how they read
 * it: the keys of every kind of hold, their values, the channels
 * (proto/PROTOCOL.md, section 9).  Two daemons that read each other's
 * records differently can both grant a name: a daemon of one layout must
 * never grant beside a daemon whose records it cannot read.  So every
 * master carries a registry, the sorted set "<lock.key_prefix> layout",
 * with one member per daemon that used it: its id, its layout, the
 * oldest layout whose records it still writes and honours, since when,
 * how long it may go on holding what it granted after it was last seen
 * (its window), its release and its host, scored by the end of that
 * window on the master's clock.  Every daemon writes its own member,
 * prunes those whose window has ended and reads the rest, in its command
 * link's handshake and every LAYOUT_BEAT_MS after it (the script
 * daemon/scripts/layout.lua, which answers each member as two strings, the
 * id, and a value, "layout oldest since window seen release host").
 * Daemons older than the registry are seen by their subscriber links (the
 * channel LAYOUT_LEGACY_CHANNEL, which daemons with the registry no
 * longer subscribe: theirs is "<lock.key_prefix> subscribed") and
 * entered as "legacy" by whoever sees them.
 *
 * A master's answers count for this daemon (layout_counts) only when its
 * registry, read no longer than LAYOUT_FRESH_MS before the request was
 * sent, showed nobody this daemon cannot serve beside (layout_judge, the
 * compatibility rule of PROTOCOL.md section 9).  Fresh matters: a daemon
 * that was paused must read the registry again before it grants, since
 * a newer daemon may have stopped writing its layout's records
 * meanwhile; the window a daemon writes covers its longest lease plus
 * that freshness, so that a newer daemon stops honouring an older
 * layout only when none of its grants can be valid any more.
 *
 * This module decides; daemon/master.c sends the script and hands the
 * answers here (it reads them with hiredis, this module does not).
 * Masters are named by their index in the config.  Times: *_us are
 * CLOCK_MONOTONIC microseconds (daemon/util.h), *_ms on a master's
 * clock are ms since the epoch from its TIME; durations are ms.
 */
#ifndef REDLOCKD_LAYOUT_H
#define REDLOCKD_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The layout this build reads and writes, and the oldest one it can run
 * beside (it writes and honours that one's records too).  A test build
 * may set them with -DREDLOCKD_LAYOUT=N -DREDLOCKD_LAYOUT_OLDEST=M.
 */
#ifndef REDLOCKD_LAYOUT
#define REDLOCKD_LAYOUT         1
#endif
#ifndef REDLOCKD_LAYOUT_OLDEST
#define REDLOCKD_LAYOUT_OLDEST  1
#endif

#define LAYOUT_BEAT_MS          1000    /* how often the registry is written and read */
#define LAYOUT_FRESH_MS         3000    /* a verdict counts this long after its
                                           request was sent */
#define LAYOUT_ID_LEN           16      /* hex characters of a daemon's id */
#define LAYOUT_KEY_SUFFIX       " layout"   /* the registry: lock.key_prefix + this */
/* What daemons older than the registry subscribe on every master. */
#define LAYOUT_LEGACY_CHANNEL   "redlockd keep-subscribed"
/* What daemons with the registry subscribe instead (never left), after
 * lock.key_prefix: inside the channels that the ACL gives the daemon, and
 * never the legacy channel, whatever the prefix (it has a space where the
 * legacy channel has a '-'). */
#define LAYOUT_SENTINEL_SUFFIX  " subscribed"
#define LAYOUT_LEGACY_FIELD     "legacy"
/* The window entered for legacy daemons: they say nothing of themselves,
 * so it covers the longest lock.max_ttl_ms any release accepts (one day)
 * with any drift, twice. */
#define LAYOUT_LEGACY_WINDOW_MS (2 * 86400000LL)
#define LAYOUT_WHY_MAX          512

/* One member of a registry, parsed (layout_parse).  The words id,
 * release and host only name the daemon: longer ones are cut to fit. */
struct layout_entry {
    char     id[40];            /* a daemon's id, or "legacy" */
    int      layout;            /* the layout it reads and writes */
    int      oldest;            /* the oldest layout it runs beside */
    int64_t  since_ms;          /* master ms since when oldest holds; 0: since its start */
    int64_t  window_ms;         /* how long after seen_ms it may hold grants, ms */
    int64_t  seen_ms;           /* master ms when it last wrote its member */
    char     release[40];       /* its release, "0.2.0" */
    char     host[72];          /* its host name and pid, "-" for legacy */
};

/*
 * Parse one registry member as the script answers it: its id (idlen
 * bytes) and its value (len bytes: "layout oldest since window seen
 * release host", words separated by one space, later words allowed and
 * ignored: the first seven words of a member are the same in every
 * release) into *e.  Returns 0, or -1 with what is wrong in why (size
 * bytes), naming the id: a number that is not one, layout < oldest or
 * oldest < 1, a word missing.
 */
int layout_parse(const char *id, size_t idlen, const char *value, size_t len,
                 struct layout_entry *e, char *why, size_t size);

/* What the compatibility rule says of one other daemon. */
enum layout_verdict {
    LAYOUT_BESIDE,              /* this daemon may serve beside it */
    LAYOUT_NEWER_STOPPED,       /* newer, and no longer writes this layout's records */
    LAYOUT_NEWER_SINCE,         /* newer, writes them again, but only lately */
    LAYOUT_OLDER,               /* older than the oldest this daemon runs beside */
    LAYOUT_UNREADABLE           /* the registry cannot be read (layout_answer's bad) */
};

/*
 * The compatibility rule (proto/PROTOCOL.md, section 9): may a daemon of
 * layout mine, which runs beside layouts from oldest on, serve beside
 * the daemon of entry e at master time now_ms?  Pure.  Returns
 * LAYOUT_BESIDE, or why not with the reason in why (size bytes), naming
 * e's daemon.  An entry whose window has passed is no one: LAYOUT_BESIDE.
 */
enum layout_verdict layout_judge(int mine, int oldest, const struct layout_entry *e,
                                 int64_t now_ms, char *why, size_t size);

/* Prepare nmasters masters' state and this daemon's id (getrandom(2)).
 * Returns 0, or -1 (logged). */
int layout_start(size_t nmasters);

/* Free everything. */
void layout_stop(void);

/*
 * This daemon's window, ms: its longest lease (the largest
 * lock.max_ttl_ms applied since start, with its drift allowance) plus
 * LAYOUT_FRESH_MS with drift.  Called at start and on every reload.  A
 * larger window than the masters were last told makes every master's
 * heartbeat due at once, and no master counts (layout_counts) until a
 * read that wrote it has answered there: a longer lease granted before
 * would outlive the member the others see.
 */
void layout_set_window_ms(int64_t ms);

/* Read only: a probe (redlockd --reach) writes no member of its own. */
void layout_set_probe(bool probe);

/* This daemon's id: LAYOUT_ID_LEN hex characters, static. */
const char *layout_self_id(void);

/* The script (daemon/scripts/layout.lua), a static string. */
const char *layout_script(void);

/*
 * The script's arguments (after KEYS[1], the registry, which the caller
 * builds from lock.key_prefix): written into argv and lens, room for
 * LAYOUT_ARGS; the strings are static until the next call.  Returns
 * their count.
 */
#define LAYOUT_ARGS 5
size_t layout_args(const char **argv, size_t *lens);

/* Master i's command link is connecting: what it showed is unread now. */
void layout_connecting(size_t i);

/*
 * A registry read of master i (name: its address, for the log), sent at
 * sent_us (layout_sent); it answered at now_ms on its clock with n
 * entries, or bad is not NULL: what is wrong (a member that cannot be
 * read, an error reply), which refuses the master until a read without
 * one.  The entries are the caller's.  A refusal is logged as a warning
 * once per daemon and kind of refusal, and its end once.
 */
void layout_answer(size_t i, const char *name, int64_t sent_us, int64_t now_ms,
                   const struct layout_entry *entries, size_t n, const char *bad);

/* The heartbeat of master i is due at now (none in flight, the last one
 * sent LAYOUT_BEAT_MS ago or more). */
bool layout_due(size_t i, int64_t now);

/* A heartbeat of master i is on its way (sent, not answered). */
bool layout_inflight(size_t i);

/* Master i's heartbeat was sent at now / failed (no answer). */
void layout_sent(size_t i, int64_t now);
void layout_failed(size_t i);

/* Master i's answers count at now: its last verdict serves, was read
 * from a request sent less than LAYOUT_FRESH_MS before now, and that
 * read wrote this daemon's window as it is now. */
bool layout_counts(size_t i, int64_t now);

/*
 * Why master i's answers do not count at now, "" when they do.  The
 * string is this module's: valid until the next layout_answer() or
 * layout_why() call.  *refused (when not NULL) is set when a daemon in
 * the registry, or a member that cannot be read, is the reason (not a
 * read that is missing or too old).
 */
const char *layout_why(size_t i, int64_t now, bool *refused);

/* What master i's registry showed at its last read. */
struct layout_view {
    bool     read;              /* a read answered since the last connect */
    size_t   daemons;           /* live members, this daemon's included */
    int      lowest, highest;   /* layouts among them; 0 before any read */
    bool     legacy;            /* a legacy daemon among them */
    bool     refused;           /* the verdict refuses (not fresh: layout_counts) */
    uint64_t refusals;          /* reads whose verdict refused, since start */
};
void layout_get_view(size_t i, struct layout_view *v);

#endif /* REDLOCKD_LAYOUT_H */
