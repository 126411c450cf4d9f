/*
 * command_reply.c: what a session hears from the lock table, written as
 * replies: one writer per verb (LOCK and TRYLOCK, UNLOCK, EXTEND,
 * STATUS, BREAK), the pushed "! LOST" line, and the delivery receipt
 * of a lease-mode grant (released when its OK provably never reached
 * the client).  See daemon/command.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "daemon/command.h"
#include "daemon/command_conn.h"
#include "daemon/ctx.h"
#include "daemon/lock.h"
#include "daemon/log.h"
#include "daemon/readq.h"
#include "daemon/session.h"
#include "daemon/stats.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"
#include "proto/proto.h"

/* The kind= word of each kind of hold, in replies and LIST lines. */
const char *const command_kind_words[] = {
    [LOCK_KIND_EXCLUSIVE] = "exclusive",
    [LOCK_KIND_SHARED] = "shared",
    [LOCK_KIND_COUNTED] = "counted",
};

static void command_lost_cb(struct lock_client *lc, const char *name, size_t name_len,
                            const char *reason);
static void command_acquired(struct lock_client *lc, const struct lock_acquire_result *res);
static void command_released(struct lock_client *lc, const struct lock_release_result *res);
static void command_extended(struct lock_client *lc, const struct lock_extend_result *res);
static void command_broken(struct lock_client *lc, const struct lock_break_result *res);

/* What a session hears from the lock table: one reply writer per verb. */
const struct lock_hooks command_lock_hooks = {
    .acquired = command_acquired,
    .released = command_released,
    .extended = command_extended,
    .status = command_status_done,
    .broken = command_broken,
    .checked = command_check_done,
    .lost = command_lost_cb,
};

/* A counted hold's words: "limit=N", and "permit=I" when permit >= 0. */
static void
command_reply_counted(struct proto_reply *r, enum lock_kind kind, unsigned limit, int permit)
{
    if (kind == LOCK_KIND_COUNTED) {
        proto_reply_int(r, "limit", limit);
        if (permit >= 0) {
            proto_reply_int(r, "permit", permit);
        }
    }
}

/*
 * The reply to an outcome that every verb answers alike (TIMEOUT,
 * NOTHELD and the errors) into r; the others ("OK name" and so on)
 * only as a bare word and name, which no verb gives.  False for
 * CANCELLED: nobody is to be answered.
 */
static bool
command_reply_verdict(struct proto_reply *r, const struct lock_verdict *v)
{
    static const char *const words[] = {
        [LOCK_OK] = "OK", [LOCK_BUSY] = "BUSY", [LOCK_TIMEOUT] = "TIMEOUT",
        [LOCK_NOTHELD] = "NOTHELD", [LOCK_HELD] = "HELD", [LOCK_FREE] = "FREE",
    };

    switch (v->outcome) {
    case LOCK_OK:
    case LOCK_BUSY:
    case LOCK_TIMEOUT:
    case LOCK_NOTHELD:
    case LOCK_HELD:
    case LOCK_FREE:
        proto_reply_start(r, words[v->outcome]);
        proto_reply_words(r, v->name, v->name_len);
        break;
    case LOCK_NOQUORUM:
        proto_reply_error(r, PROTO_ERR_NOQUORUM, v->error);
        break;
    case LOCK_CONFLICT:
        proto_reply_error(r, PROTO_ERR_PROTO, v->error);
        break;
    case LOCK_SHUTDOWN:
        proto_reply_error(r, PROTO_ERR_SHUTDOWN, v->error);
        break;
    case LOCK_LIMIT:
    case LOCK_FAILED:
        proto_reply_error(r, PROTO_ERR_LIMIT, v->error);
        break;
    case LOCK_WRONG_KIND:
        proto_reply_error(r, PROTO_ERR_KIND, v->error);
        break;
    case LOCK_CANCELLED:
        return false;
    }
    return true;
}

/*
 * The start of a verb's reply: the session's command, with r started by
 * command_reply_verdict(); NULL when nothing is to be written (the
 * session closed meanwhile, and c may be gone; or CANCELLED).
 */
static struct command *
command_reply_begin(struct lock_client *lc, const struct lock_verdict *v,
                    struct proto_reply *r)
{
    struct command *c = COMMAND_OF(lc, lc);

    if (!session_request_done(c->s) || !command_reply_verdict(r, v)) {
        return NULL;
    }
    return c;
}

/* Send r (ended here; a no-op for an error reply) and go on to the next request. */
static void
command_reply_send(struct command *c, struct proto_reply *r)
{
    proto_reply_end(r);
    session_reply(c->s, r);
    session_next(c->s);
}

/*
 * A lease-mode grant whose OK is on its way to the client: what its
 * delivery receipt needs to release it.  Owned by the receipt; freed
 * when it is given.
 */
struct command_grant {
    char    token[UTIL_TOKEN_HEX];  /* the lease's token */
    size_t  name_len;               /* bytes in name */
    char    name[];                 /* the lock's name */
};

/*
 * The receipt of a lease-mode grant's OK.  Not delivered: nobody knows
 * the token, so the lease is released on the masters now
 * (lock_abandon) rather than at its ttl.  A reply that may have been
 * read is kept: the client would use a lock it no longer holds.
 */
static void
command_grant_receipt(struct session *s, void *arg, bool delivered)
{
    struct command_grant *g = arg;

    if (!delivered) {
        log_info("client %llu (%s): the OK of lease %.*s never reached the client; "
                 "releasing it", session_id(s), session_peer(s), (int)g->name_len, g->name);
        lock_abandon(g->name, g->name_len, g->token);
    }
    free(g);
}

/* Write r, the OK of the lease-mode grant res, with a delivery receipt. */
static void
command_reply_grant(struct session *s, const struct proto_reply *r,
                    const struct lock_acquire_result *res)
{
    struct command_grant *g = xmalloc(sizeof(*g) + res->v.name_len);

    memcpy(g->token, res->token, UTIL_TOKEN_HEX);
    g->name_len = res->v.name_len;
    memcpy(g->name, res->v.name, res->v.name_len);
    session_reply_tracked(s, r, command_grant_receipt, g);
}

static void
command_acquired(struct lock_client *lc, const struct lock_acquire_result *res)
{
    struct command *c = COMMAND_OF(lc, lc);
    struct session *s = c->s;
    const struct lock_verdict *v = &res->v;
    struct proto_reply r;

    if (!session_request_done(s)) {
        /* Closed (c may be gone now). */
        if (v->outcome == LOCK_OK && res->token != NULL) {
            /* A lease-mode grant nobody will read: release it now. */
            lock_abandon(v->name, v->name_len, res->token);
        }
        return;
    }
    if (v->outcome == LOCK_OK) {
        proto_reply_start(&r, "OK");
        proto_reply_words(&r, v->name, v->name_len);
        if (res->token != NULL) {
            proto_reply_str(&r, "token", res->token);
        }
        proto_reply_int(&r, "validity", res->validity_ms);
        if (res->token == NULL) {
            proto_reply_int(&r, "holds", res->holds);
        }
        if (res->fences != NULL) {
            proto_reply_str(&r, "fence", res->fences);
        } else if (res->fence > 0) {
            proto_reply_int(&r, "fence", res->fence);
        }
        if (res->kind != LOCK_KIND_EXCLUSIVE) {
            proto_reply_str(&r, "kind", command_kind_words[res->kind]);
        }
        command_reply_counted(&r, res->kind, res->limit, res->permit);
    } else if (v->outcome == LOCK_BUSY) {
        proto_reply_start(&r, "BUSY");
        proto_reply_words(&r, v->name, v->name_len);
        proto_reply_int(&r, "ttl", res->busy_ttl_ms);
        if (res->delayed) {
            /* No holder: a lock-delay; a key=value, which old clients skip. */
            proto_reply_int(&r, "delayed", res->busy_ttl_ms);
        }
    } else if (!command_reply_verdict(&r, v)) {
        return;
    }
    proto_reply_end(&r);        /* a no-op for the error replies, already ended */
    if (v->outcome == LOCK_OK && res->token != NULL) {
        command_reply_grant(s, &r, res);    /* released if it never reaches the client */
    } else {
        session_reply(s, &r);
    }
    session_next(s);
}

/* UNLOCK ended: "OK name [holds=]" (holds= in session mode), or the verdict. */
static void
command_released(struct lock_client *lc, const struct lock_release_result *res)
{
    struct proto_reply r;
    struct command *c = command_reply_begin(lc, &res->v, &r);

    if (c == NULL) {
        return;
    }
    if (res->v.outcome == LOCK_OK && res->mode != LOCK_MODE_LEASE) {
        proto_reply_int(&r, "holds", res->holds);
    }
    command_reply_send(c, &r);
}

/* EXTEND ended: "OK name validity=", or the verdict. */
static void
command_extended(struct lock_client *lc, const struct lock_extend_result *res)
{
    struct proto_reply r;
    struct command *c = command_reply_begin(lc, &res->v, &r);

    if (c == NULL) {
        return;
    }
    if (res->v.outcome == LOCK_OK) {
        proto_reply_int(&r, "validity", res->validity_ms);
    }
    command_reply_send(c, &r);
}

/*
 * STATUS ended: "HELD name ttl= owner= [mode=] [fence=] kind= holders=
 * [limit= [permit=]] [label= held_ms=] [renewer=watchdog] [waiters=]", "FREE name
 * [waiters=]", or the verdict.  Its read's slot goes on first.
 */
void
command_status_done(struct lock_client *lc, const struct lock_status_result *res)
{
    struct proto_reply r;
    struct command *c;

    readq_done(&COMMAND_OF(lc, lc)->status);   /* its read ended: the slot goes on */
    if ((c = command_reply_begin(lc, &res->v, &r)) == NULL) {
        return;
    }
    if (res->v.outcome == LOCK_HELD) {
        proto_reply_int(&r, "ttl", res->ttl_ms);
        proto_reply_str(&r, "owner", res->owner_self ? "self" : "other");
        if (res->mode != LOCK_MODE_UNKNOWN) {
            proto_reply_str(&r, "mode", res->mode == LOCK_MODE_LEASE ? "lease" : "session");
        }
        if (res->fence > 0) {
            proto_reply_int(&r, "fence", res->fence);
        }
        proto_reply_str(&r, "kind", command_kind_words[res->kind]);
        proto_reply_int(&r, "holders", (int64_t)res->holders);
        command_reply_counted(&r, res->kind, res->limit, res->permit);
        if (res->label != NULL && (res->owner_self || command_sees_labels(c))) {
            proto_reply_str(&r, "label", res->label);
            proto_reply_int(&r, "held_ms", res->held_ms);
        }
        if (res->renewed_here) {
            proto_reply_str(&r, "renewer", "watchdog");
        }
    }
    if (res->v.outcome == LOCK_FREE && res->delayed_ms != 0) {
        proto_reply_int(&r, "delayed", res->delayed_ms);
    }
    if ((res->v.outcome == LOCK_HELD || res->v.outcome == LOCK_FREE) && res->waiters > 0) {
        proto_reply_int(&r, "waiters", (int64_t)res->waiters);
    }
    command_reply_send(c, &r);
}

/*
 * CHECK ended: "CURRENT name ttl=", "STALE name reason=free|other|mixed",
 * or the verdict.  Its read's slot goes on first.
 */
void
command_check_done(struct lock_client *lc, const struct lock_check_result *res)
{
    static const char *const why[] = {
        [LOCK_STALE_FREE] = "free", [LOCK_STALE_OTHER] = "other", [LOCK_STALE_MIXED] = "mixed",
    };
    struct command *c = COMMAND_OF(lc, lc);
    struct proto_reply r;

    readq_done(&c->status);     /* its read ended: the slot goes on */
    if (!session_request_done(c->s)) {
        return;                 /* closed (c may be gone now) */
    }
    if (res->v.outcome == LOCK_HELD) {
        proto_reply_start(&r, "CURRENT");
        proto_reply_word(&r, res->v.name, res->v.name_len);
        proto_reply_int(&r, "ttl", res->ttl_ms);
    } else if (res->v.outcome == LOCK_NOTHELD) {
        proto_reply_start(&r, "STALE");
        proto_reply_word(&r, res->v.name, res->v.name_len);
        proto_reply_str(&r, "reason", why[res->stale]);
    } else if (!command_reply_verdict(&r, &res->v)) {
        return;
    }
    command_reply_send(c, &r);
}

/* BREAK ended: "OK name holders= fence=", or the verdict. */
static void
command_broken(struct lock_client *lc, const struct lock_break_result *res)
{
    struct proto_reply r;
    struct command *c = command_reply_begin(lc, &res->v, &r);

    if (c == NULL) {
        return;
    }
    if (res->v.outcome == LOCK_OK) {
        proto_reply_int(&r, "holders", (int64_t)res->deleted);
        proto_reply_int(&r, "fence", res->fence_after);
    }
    command_reply_send(c, &r);
}

/* A held lock is gone: push "! LOST <name> reason=<why>". */
static void
command_lost_cb(struct lock_client *lc, const char *name, size_t name_len,
                const char *reason)
{
    struct command *c = COMMAND_OF(lc, lc);
    struct proto_reply r;

    proto_reply_start(&r, "!");
    proto_reply_word(&r, "LOST", 4);
    proto_reply_words(&r, name, name_len);
    proto_reply_str(&r, "reason", reason);
    proto_reply_end(&r);
    session_reply(c->s, &r);
}
