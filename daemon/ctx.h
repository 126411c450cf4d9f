/*
 * ctx.h: the daemon's one context: the event loop, the settings in use
 * and the counters, reached the same way by every module.
 *
 * server.c fills it once at start-up (ctx.base, ctx.conf) and, on a
 * reload that passed every check, points ctx.conf at the new settings
 * before the apply rows run (each is given the old settings too) and
 * frees the old settings after them.  Every other module only reads it, from the event loop's
 * thread: a setting is read at the moment it is used
 * (ctx.conf->node_timeout_ms), never copied, so a reload reaches every
 * user at once.  A module keeps a value of its own only when it derives
 * something from a setting (a timer armed, a pointer into the settings,
 * a sum over them); server.c's reload table has an apply row for it.
 *
 * The counters are the global `stats` (daemon/stats.h), defined beside
 * the context in ctx.c; ctx.stats points at them.
 */
#ifndef REDLOCKD_CTX_H
#define REDLOCKD_CTX_H

struct conf;
struct event_base;
struct stats;

struct daemon_ctx {
    struct event_base *base;    /* the one event loop; set by server.c before any module
                                   starts, NULL before and after */
    const struct conf *conf;    /* the settings in use; owned by server.c, swapped by a
                                   reload, never NULL while the loop runs */
    struct stats      *stats;   /* the counters (&stats) */
};

/* The daemon's context (daemon/ctx.c); written by server.c only. */
extern struct daemon_ctx ctx;

#endif /* REDLOCKD_CTX_H */
