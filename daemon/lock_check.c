/*
 * lock_check.c: CHECK, whether one grant of a name (by its fence, or a
 * lease's token) is still the name's current one on a quorum of the
 * masters.  The lock table is not read: the question is the masters'
 * (daemon/redlock_check.c).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "daemon/ctx.h"
#include "daemon/lock.h"
#include "daemon/lock_table.h"
#include "daemon/redlock.h"
#include "daemon/stats.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"

/* A CHECK in flight: who asked, and the name's key (the name at name_off). */
struct lock_check_op {
    struct lock_client *client;     /* who asked */
    size_t  name_off;               /* where the name begins in key */
    size_t  key_len;                /* bytes in key */
    char    key[];                  /* lock.key_prefix + the name, NUL-terminated */
};

/* The masters answered: count it, tell the client, free the op. */
static void
lock_check_done(const struct redlock_check_result *rr, void *arg)
{
    struct lock_check_op *op = arg;
    struct lock_check_result res;
    char text[160];

    memset(&res, 0, sizeof(res));
    res.v.name = op->key + op->name_off;
    res.v.name_len = op->key_len - op->name_off;
    switch (rr->v.outcome) {
    case REDLOCK_HELD:
        stats.check_current++;
        res.v.outcome = LOCK_HELD;
        res.ttl_ms = rr->ttl_ms;
        break;
    case REDLOCK_NOTHELD:
        stats.check_stale++;
        res.v.outcome = LOCK_NOTHELD;
        res.stale = rr->reason == REDLOCK_CHECK_FREE ? LOCK_STALE_FREE
                    : rr->reason == REDLOCK_CHECK_OTHER ? LOCK_STALE_OTHER : LOCK_STALE_MIXED;
        break;
    case REDLOCK_KIND:
        res.v.outcome = LOCK_WRONG_KIND;
        snprintf(text, sizeof(text), "%.*s is held with limit=%u: CHECK by fence= of a "
                 "counted name needs permit=I (each permit has its own fences)",
                 (int)(res.v.name_len > 100 ? 100 : res.v.name_len), res.v.name, rr->limit);
        res.v.error = text;
        break;
    default:
        res.v.outcome = LOCK_NOQUORUM;
        res.v.error = rr->v.error;
        break;
    }
    op->client->hooks->checked(op->client, &res);
    free(op);
}

void
lock_check(struct lock_client *c, const char *name, size_t name_len, const char *token,
           int64_t fence, int permit)
{
    size_t plen = strlen(ctx.conf->key_prefix);
    struct lock_check_op *op = xmalloc(sizeof(*op) + plen + name_len + 1);

    op->client = c;
    op->key_len = lock_key_write(op->key, name, name_len);
    op->name_off = plen;
    if (redlock_check(op->key, op->key_len, token, fence, permit, lock_check_done, op) != 0) {
        /* Not reached: a prefix (<= 256 bytes) and a name (<= 250) always fit. */
        free(op);
        c->hooks->checked(c, &(struct lock_check_result){
            .v = { LOCK_FAILED, name, name_len, "the lock's key is too long" } });
    }
}
