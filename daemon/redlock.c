/*
 * redlock.c: the Redlock algorithm: scripts, quorum and validity
 * arithmetic, and the four operations built on rounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/redlock.h"
#include "daemon/round.h"
#include "daemon/util.h"

/*
 * Acquire: SET NX PX; when the key already holds our token (a retry
 * after a set that landed late) renew it; otherwise report its PTTL so
 * that BUSY can say how long the holder has left.  pcall: a key of
 * another type is someone else's, not an error of ours.
 *
 * Hand-over: with ARGV[3], the token of a lease being released, a key
 * that still holds that token is given the new token in the same step,
 * so that it is never free for an outsider in between.
 */
static const char redlock_acquire_lua[] =
    "if ARGV[3] and redis.pcall('GET', KEYS[1]) == ARGV[3] then\n"
    "  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
    "  return 1\n"
    "end\n"
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n"
    "  return 1\n"
    "end\n"
    "if redis.pcall('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  return 1\n"
    "end\n"
    "return {redis.call('PTTL', KEYS[1])}\n";

/* Release: compare-and-delete. */
static const char redlock_release_lua[] =
    "if redis.pcall('GET', KEYS[1]) == ARGV[1] then\n"
    "  return redis.call('DEL', KEYS[1])\n"
    "end\n"
    "return 0\n";

/* Extend n keys: compare-and-PEXPIRE each; never SET. */
static const char redlock_extend_lua[] =
    "local out = {}\n"
    "for i = 1, #KEYS do\n"
    "  if redis.pcall('GET', KEYS[i]) == ARGV[2 * i - 1] then\n"
    "    redis.call('PEXPIRE', KEYS[i], ARGV[2 * i])\n"
    "    out[i] = 1\n"
    "  else\n"
    "    out[i] = 0\n"
    "  end\n"
    "end\n"
    "return out\n";

/* Status: {pttl, 1 if the value is our token}; pttl -2 when absent. */
static const char redlock_status_lua[] =
    "local pttl = redis.call('PTTL', KEYS[1])\n"
    "if pttl == -2 then\n"
    "  return {-2, 0}\n"
    "end\n"
    "if redis.pcall('GET', KEYS[1]) == ARGV[1] then\n"
    "  return {pttl, 1}\n"
    "end\n"
    "return {pttl, 0}\n";

static int    script_acquire, script_release, script_extend, script_status;
static double redlock_drift_factor = 0.01;

/* Per-operation state; freed in its done callback. */
struct redlock_op {
    redlock_done_fn cb;             /* caller's callback */
    void           *arg;            /* caller's argument */
    int64_t         ttl_ms;         /* acquire: the lease asked for */
    size_t          yes;            /* masters that granted / confirmed */
    size_t          nheld;          /* masters where someone else holds it */
    size_t          self;           /* status: masters holding our token */
    int64_t         pttls[];        /* per master: holder's pttl */
};

/* Batched extend state; freed in its done callback. */
struct redlock_extend_op {
    redlock_extend_fn cb;           /* caller's callback */
    void             *arg;          /* caller's argument */
    size_t            n;            /* items */
    size_t            at_quorum;    /* items confirmed by a quorum so far */
    uint8_t          *confirmed;    /* per item */
    uint8_t          *denied;       /* per item */
};

void
redlock_init(double drift_factor)
{
    redlock_drift_factor = drift_factor;
    script_acquire = master_script(redlock_acquire_lua);
    script_release = master_script(redlock_release_lua);
    script_extend = master_script(redlock_extend_lua);
    script_status = master_script(redlock_status_lua);
}

void
redlock_set_drift(double drift_factor)
{
    redlock_drift_factor = drift_factor;
}

size_t
redlock_quorum(size_t nmasters)
{
    return nmasters / 2 + 1;
}

int64_t
redlock_drift_us(int64_t ttl_ms, double drift_factor)
{
    return (int64_t)((double)ttl_ms * drift_factor * 1000.0) + 2000;
}

int64_t
redlock_validity_us(int64_t ttl_ms, int64_t elapsed_us, double drift_factor)
{
    return ttl_ms * 1000 - elapsed_us - redlock_drift_us(ttl_ms, drift_factor);
}

static int
redlock_cmp_pttl(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    /* No expiry sorts last: it is the longest wait. */
    if (x == REDLOCK_NO_EXPIRY) {
        x = INT64_MAX;
    }
    if (y == REDLOCK_NO_EXPIRY) {
        y = INT64_MAX;
    }
    return (x > y) - (x < y);
}

int64_t
redlock_holder_ttl(int64_t *pttls, size_t nheld, size_t nfree, size_t quorum)
{
    size_t need;

    if (nfree >= quorum || nheld == 0) {
        return 0;
    }
    need = quorum - nfree;
    if (need > nheld) {
        need = nheld;   /* too few answers to know more: the longest seen */
    }
    qsort(pttls, nheld, sizeof(*pttls), redlock_cmp_pttl);
    return pttls[need - 1];
}

static struct redlock_op *
redlock_op_new(redlock_done_fn cb, void *arg, int64_t ttl_ms)
{
    struct redlock_op *op;

    op = calloc(1, sizeof(*op) + master_count() * sizeof(op->pttls[0]));
    if (op != NULL) {
        op->cb = cb;
        op->arg = arg;
        op->ttl_ms = ttl_ms;
    }
    return op;
}

static void
redlock_fill_error(struct redlock_result *res, struct round *r)
{
    size_t n = master_count();
    int used;

    used = snprintf(res->error, sizeof(res->error),
                    "%zu of %zu masters answered, quorum is %zu: ",
                    round_answered(r), n, redlock_quorum(n));
    round_describe_failures(r, res->error + used, sizeof(res->error) - (size_t)used);
}

/* Start a result from a decided round: times and answers. */
static void
redlock_result_begin(struct redlock_result *res, struct round *r)
{
    memset(res, 0, sizeof(*res));
    res->start_us = round_start_us(r);
    res->answered = round_answered(r);
}

/* Read an integer pttl out of a one-element array answer. */
static bool
redlock_pttl_of(const struct master_reply *reply, int64_t *pttl)
{
    const struct master_reply *e;

    if (master_reply_type(reply) != MASTER_REPLY_ARRAY
        || master_reply_elements(reply) < 1) {
        return false;
    }
    e = master_reply_element(reply, 0);
    if (master_reply_type(e) != MASTER_REPLY_INTEGER) {
        return false;
    }
    *pttl = master_reply_integer(e);
    return *pttl >= -1;
}

static enum round_verdict
redlock_acquire_reply(struct round *r, size_t i, const struct master_reply *reply,
                      void *arg)
{
    struct redlock_op *op = arg;
    size_t n = master_count(), q = redlock_quorum(n);
    int64_t pttl;

    if (master_reply_type(reply) == MASTER_REPLY_INTEGER
        && master_reply_integer(reply) == 1) {
        op->yes++;
    } else if (redlock_pttl_of(reply, &pttl)) {
        op->pttls[op->nheld++] = pttl;
    } else {
        round_fail(r, i, "unexpected answer to the acquire script");
        log_warn("master %s: unexpected answer to the acquire script (type %d)",
                 master_name(master_at(i)), (int)master_reply_type(reply));
        return ROUND_CONTINUE;
    }
    /* Decided: granted, or so many hold it that no quorum is possible. */
    if (op->yes >= q || op->nheld > n - q) {
        return ROUND_DECIDED;
    }
    return ROUND_CONTINUE;
}

static void
redlock_acquire_done(struct round *r, void *arg)
{
    struct redlock_op *op = arg;
    struct redlock_result res;
    size_t n = master_count(), q = redlock_quorum(n);
    int64_t start = round_start_us(r), validity;

    redlock_result_begin(&res, r);
    validity = redlock_validity_us(op->ttl_ms, round_end_us(r) - start,
                                   redlock_drift_factor);
    if (op->yes >= q && validity > 0) {
        res.outcome = REDLOCK_GRANTED;
        res.validity_end_us = start + op->ttl_ms * 1000
                              - redlock_drift_us(op->ttl_ms, redlock_drift_factor);
    } else if (op->nheld > n - q || res.answered >= q) {
        res.outcome = REDLOCK_BUSY;
        res.ttl_ms = redlock_holder_ttl(op->pttls, op->nheld, op->yes, q);
    } else {
        res.outcome = REDLOCK_NOQUORUM;
    }
    if (res.answered < q) {
        redlock_fill_error(&res, r);     /* also for a hand-over's releaser */
    }
    op->cb(&res, op->arg);
    free(op);
}

int
redlock_acquire(const char *key, size_t key_len, const char *token,
                int64_t ttl_ms, const char *old_token, redlock_done_fn cb, void *arg)
{
    struct redlock_op *op;
    char ttl[24];
    const char *args[4];
    size_t lens[4];

    op = redlock_op_new(cb, arg, ttl_ms);
    if (op == NULL) {
        return -1;
    }
    args[0] = key;
    lens[0] = key_len;
    args[1] = token;
    lens[1] = UTIL_TOKEN_HEX;
    lens[2] = (size_t)snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
    args[2] = ttl;
    args[3] = old_token;
    lens[3] = UTIL_TOKEN_HEX;
    if (round_start(script_acquire, 1, old_token != NULL ? 4 : 3, args, lens,
                    redlock_acquire_reply, redlock_acquire_done, op) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

static enum round_verdict
redlock_release_reply(struct round *r, size_t i, const struct master_reply *reply,
                      void *arg)
{
    (void)arg;
    if (master_reply_type(reply) != MASTER_REPLY_INTEGER) {
        round_fail(r, i, "unexpected answer to the release script");
    }
    return ROUND_CONTINUE;
}

static void
redlock_release_done(struct round *r, void *arg)
{
    struct redlock_op *op = arg;
    struct redlock_result res;
    size_t q = redlock_quorum(master_count());

    redlock_result_begin(&res, r);
    if (res.answered >= q) {
        res.outcome = REDLOCK_RELEASED;
    } else {
        res.outcome = REDLOCK_NOQUORUM;
        redlock_fill_error(&res, r);
    }
    op->cb(&res, op->arg);
    free(op);
}

int
redlock_release(const char *key, size_t key_len, const char *token,
                redlock_done_fn cb, void *arg)
{
    struct redlock_op *op = NULL;
    const char *args[2] = { key, token };
    size_t lens[2] = { key_len, UTIL_TOKEN_HEX };

    if (cb != NULL) {
        op = redlock_op_new(cb, arg, 0);
        if (op == NULL) {
            return -1;
        }
    }
    /* Wait for every master (no early decision): release must reach all. */
    if (round_start(script_release, 1, 2, args, lens, redlock_release_reply,
                    cb != NULL ? redlock_release_done : NULL, op) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

static enum round_verdict
redlock_status_reply(struct round *r, size_t i, const struct master_reply *reply,
                     void *arg)
{
    struct redlock_op *op = arg;
    const struct master_reply *e0, *e1;
    int64_t pttl;

    if (master_reply_type(reply) != MASTER_REPLY_ARRAY
        || master_reply_elements(reply) != 2
        || master_reply_type(e0 = master_reply_element(reply, 0)) != MASTER_REPLY_INTEGER
        || master_reply_type(e1 = master_reply_element(reply, 1)) != MASTER_REPLY_INTEGER) {
        round_fail(r, i, "unexpected answer to the status script");
        return ROUND_CONTINUE;
    }
    pttl = master_reply_integer(e0);
    if (pttl == -2) {
        op->yes++;                      /* free on this master */
    } else {
        op->pttls[op->nheld++] = pttl;
        if (master_reply_integer(e1) == 1) {
            op->self++;
        }
    }
    return ROUND_CONTINUE;
}

static void
redlock_status_done(struct round *r, void *arg)
{
    struct redlock_op *op = arg;
    struct redlock_result res;
    size_t q = redlock_quorum(master_count());

    redlock_result_begin(&res, r);
    if (res.answered < q) {
        res.outcome = REDLOCK_NOQUORUM;
        redlock_fill_error(&res, r);
    } else if (op->yes >= q) {
        res.outcome = REDLOCK_FREE;
    } else {
        res.outcome = REDLOCK_HELD;
        res.owner_self = op->self >= q;
        res.ttl_ms = redlock_holder_ttl(op->pttls, op->nheld, op->yes, q);
    }
    op->cb(&res, op->arg);
    free(op);
}

int
redlock_status(const char *key, size_t key_len, const char *token,
               redlock_done_fn cb, void *arg)
{
    struct redlock_op *op;
    const char *args[2] = { key, token != NULL ? token : "" };
    size_t lens[2] = { key_len, token != NULL ? UTIL_TOKEN_HEX : 0 };

    op = redlock_op_new(cb, arg, 0);
    if (op == NULL) {
        return -1;
    }
    if (round_start(script_status, 1, 2, args, lens, redlock_status_reply,
                    redlock_status_done, op) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

static enum round_verdict
redlock_extend_reply(struct round *r, size_t i, const struct master_reply *reply,
                     void *arg)
{
    struct redlock_extend_op *op = arg;
    size_t q = redlock_quorum(master_count()), j;
    const struct master_reply *e;

    if (master_reply_type(reply) != MASTER_REPLY_ARRAY
        || master_reply_elements(reply) != op->n) {
        round_fail(r, i, "unexpected answer to the extend script");
        return ROUND_CONTINUE;
    }
    for (j = 0; j < op->n; j++) {
        e = master_reply_element(reply, j);
        if (master_reply_type(e) == MASTER_REPLY_INTEGER && master_reply_integer(e) == 1) {
            if (++op->confirmed[j] == q) {
                op->at_quorum++;
            }
        } else {
            op->denied[j]++;
        }
    }
    return op->at_quorum == op->n ? ROUND_DECIDED : ROUND_CONTINUE;
}

static void
redlock_extend_done(struct round *r, void *arg)
{
    struct redlock_extend_op *op = arg;
    struct redlock_extend_result res;
    char failures[REDLOCK_ERROR_MAX];

    res.n = op->n;
    res.confirmed = op->confirmed;
    res.denied = op->denied;
    res.answered = round_answered(r);
    res.start_us = round_start_us(r);
    res.end_us = round_end_us(r);
    res.error = round_describe_failures(r, failures, sizeof(failures));
    op->cb(&res, op->arg);
    free(op);
}

int
redlock_extend(const struct redlock_extend_item *items, size_t n,
               redlock_extend_fn cb, void *arg)
{
    struct redlock_extend_op *op;
    const char **args;
    size_t *lens, i, nargs = 3 * n;
    char *ttls;
    int rc;

    op = calloc(1, sizeof(*op) + 2 * n);
    args = malloc(nargs * sizeof(*args));
    lens = malloc(nargs * sizeof(*lens));
    ttls = malloc(n * 24);
    if (op == NULL || args == NULL || lens == NULL || ttls == NULL) {
        free(op);
        free(args);
        free(lens);
        free(ttls);
        return -1;
    }
    op->cb = cb;
    op->arg = arg;
    op->n = n;
    op->confirmed = (uint8_t *)(op + 1);
    op->denied = op->confirmed + n;
    for (i = 0; i < n; i++) {
        args[i] = items[i].key;
        lens[i] = items[i].key_len;
        args[n + 2 * i] = items[i].token;
        lens[n + 2 * i] = UTIL_TOKEN_HEX;
        args[n + 2 * i + 1] = ttls + 24 * i;
        lens[n + 2 * i + 1] = (size_t)snprintf(ttls + 24 * i, 24, "%lld",
                                               (long long)items[i].ttl_ms);
    }
    rc = round_start(script_extend, n, nargs, args, lens, redlock_extend_reply,
                     redlock_extend_done, op);
    free(args);
    free(lens);
    free(ttls);
    if (rc != 0) {
        free(op);
        return -1;
    }
    return 0;
}
