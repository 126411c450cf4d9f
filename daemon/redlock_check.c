/*
 * redlock_check.c: CHECK, whether one grant of a name is its current
 * one on a quorum of the masters: a read of the grant's record on every
 * master (daemon/scripts/check.lua), by its token or by its fence.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/master.h"
#include "daemon/redlock.h"
#include "daemon/redlock_op.h"
#include "daemon/round.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"

/* What a master's check.lua answers in its first element. */
enum redlock_check_state {
    REDLOCK_CHECK_HOLDS = 1,    /* the grant holds its record here */
    REDLOCK_CHECK_SOMEONE = 0,  /* someone else holds the name here */
    REDLOCK_CHECK_NOBODY = 2,   /* nobody holds the name here */
    REDLOCK_CHECK_COUNTED = 3   /* by fence, no permit: the name is counted */
};

/* {state, pttl, limit}: tally it. */
static enum round_verdict
redlock_check_reply(struct round *r, size_t i, const struct master_reply *reply, void *arg)
{
    struct redlock_check_op *op = arg;
    const struct master_reply *e[3];
    size_t k;

    if (master_reply_type(reply) != MASTER_REPLY_ARRAY || master_reply_elements(reply) != 3) {
        round_fail(r, i, master_reply_type(reply) == MASTER_REPLY_ERROR
                         ? master_reply_str(reply, NULL) : "unexpected answer to the check script");
        return ROUND_CONTINUE;
    }
    for (k = 0; k < 3; k++) {
        e[k] = master_reply_element(reply, k);
        if (master_reply_type(e[k]) != MASTER_REPLY_INTEGER) {
            round_fail(r, i, "unexpected answer to the check script");
            return ROUND_CONTINUE;
        }
    }
    switch (master_reply_integer(e[0])) {
    case REDLOCK_CHECK_HOLDS:
        op->pttls[op->b.yes++] = master_reply_integer(e[1]) < 0 ? REDLOCK_NO_EXPIRY
                                 : master_reply_integer(e[1]);
        break;
    case REDLOCK_CHECK_SOMEONE:
        op->b.no++;
        break;
    case REDLOCK_CHECK_NOBODY:
        op->nfree++;
        break;
    case REDLOCK_CHECK_COUNTED:
        op->nkind++;
        if (master_reply_integer(e[2]) > 0 && master_reply_integer(e[2]) <= REDLOCK_LIMIT_MAX
            && (unsigned)master_reply_integer(e[2]) > op->limit) {
            op->limit = (unsigned)master_reply_integer(e[2]);
        }
        break;
    default:
        round_fail(r, i, "unexpected answer to the check script");
        return ROUND_CONTINUE;
    }
    return ROUND_CONTINUE;
}

/*
 * Decide: current when a quorum hold the grant; stale only when fewer
 * than a quorum would hold it even if every master that did not answer
 * held it; in between, too few answered to tell (NOQUORUM).
 */
static void
redlock_check_done(struct round *r, void *arg)
{
    struct redlock_check_op *op = arg;
    struct redlock_check_result res;
    size_t n = master_count(), q = redlock_quorum(n), used;

    memset(&res, 0, sizeof(res));
    redlock_result_begin(&res.v, r);
    res.v.confirmed = op->b.yes;
    if (res.v.answered < q) {
        res.v.outcome = REDLOCK_NOQUORUM;
        redlock_fill_error(&res.v, r);
    } else if (op->b.yes >= q) {
        res.v.outcome = REDLOCK_HELD;
        /* It stops being on a quorum once yes - q + 1 of its records expired. */
        qsort(op->pttls, op->b.yes, sizeof(op->pttls[0]), redlock_cmp_pttl);
        res.ttl_ms = op->pttls[op->b.yes - q];
    } else if (op->b.yes + (n - res.v.answered) >= q) {
        res.v.outcome = REDLOCK_NOQUORUM;
        used = redlock_append(res.v.error, sizeof(res.v.error), 0, "%zu of %zu masters "
                              "confirmed the grant, and the ones that did not answer may "
                              "hold it: ", op->b.yes, n);
        round_describe_failures(r, res.v.error + used, sizeof(res.v.error) - used);
    } else if (op->nkind >= q) {
        res.v.outcome = REDLOCK_KIND;
        res.limit = op->limit;
    } else {
        res.v.outcome = REDLOCK_NOTHELD;
        res.reason = op->nfree >= q ? REDLOCK_CHECK_FREE
                     : op->b.no + op->nkind >= q ? REDLOCK_CHECK_OTHER : REDLOCK_CHECK_MIXED;
    }
    op->cb(&res, op->b.arg);
    free(op);
}

int
redlock_check(const char *base, size_t base_len, const char *token, int64_t fence,
              int permit, redlock_check_fn cb, void *arg)
{
    struct redlock_check_op *op;
    char fence_s[24] = "", permit_s[16] = "";
    const char *args[4] = { base, token != NULL ? token : "", fence_s, permit_s };
    size_t lens[4] = { base_len, token != NULL ? UTIL_TOKEN_HEX : 0, 0, 0 };

    if (base_len > REDLOCK_KEY_MAX) {
        return -1;
    }
    if (token == NULL) {
        lens[2] = (size_t)snprintf(fence_s, sizeof(fence_s), "%lld", (long long)fence);
        if (permit >= 0) {
            lens[3] = (size_t)snprintf(permit_s, sizeof(permit_s), "%d", permit);
        }
    }
    op = redlock_op_new(sizeof(*op), sizeof(op->pttls[0]), arg);
    op->cb = cb;
    if (round_start(redlock_scripts.check, 1, 4, args, lens, redlock_check_reply,
                    redlock_check_done, op) != 0) {
        xmalloc_fail("a check round");
    }
    return 0;
}
