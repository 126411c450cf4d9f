/*
 * redlock.c: the Redlock algorithm: scripts, quorum and validity
 * arithmetic, and the four operations built on rounds.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/redlock.h"
#include "daemon/round.h"
#include "daemon/stats.h"
#include "daemon/util.h"

/*
 * Acquire: SET NX PX; when the key already holds our token (a retry
 * after a set that landed late) renew it; otherwise report its PTTL so
 * that BUSY can say how long the holder has left.  pcall: a key of
 * another type is someone else's, not an error of ours.
 *
 * Hand-over: with ARGV[4], the token of a lease being released, a key
 * that still holds that token is given the new token in the same step,
 * so that it is never free for an outsider in between.
 *
 * A grant answers {v, n, b}: v is 1, or with KEYS[2] (the name's fence
 * counter, INCRed by the grant) the counter's new value; n is how many
 * clients are subscribed to ARGV[3], the name's release channel, which
 * tells the daemon whether other daemons are waiting; b is the branch
 * that granted (enum redlock_branch: 1 set on a free key, 2 swapped from
 * ARGV[4], 3 ours already), so that a hand-over's releaser learns where
 * its own token was really there to hand over.  A counter that is
 * not an integer undoes the grant and answers an error naming the key.
 */
static const char redlock_acquire_lua[] =
    "local granted = false\n"
    "if ARGV[4] and redis.pcall('GET', KEYS[1]) == ARGV[4] then\n"
    "  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
    "  granted = 2\n"
    "elseif redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n"
    "  granted = 1\n"
    "elseif redis.pcall('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  granted = 3\n"
    "end\n"
    "if not granted then\n"
    "  return {redis.call('PTTL', KEYS[1])}\n"
    "end\n"
    "local v = 1\n"
    "if KEYS[2] then\n"
    "  v = redis.pcall('INCR', KEYS[2])\n"
    "  if type(v) ~= 'number' then\n"
    "    redis.call('DEL', KEYS[1])\n"
    "    return redis.error_reply('fence counter ' .. KEYS[2] .. ' is not an integer')\n"
    "  end\n"
    "end\n"
    "return {v, redis.call('PUBSUB', 'NUMSUB', ARGV[3])[2], granted}\n";

/*
 * Fence write-back: raise the counter to ARGV[1] unless it is higher
 * already (set-if-greater); never lowers it.
 */
static const char redlock_fence_lua[] =
    "local v = redis.pcall('GET', KEYS[1])\n"
    "if type(v) == 'table' then\n"
    "  return redis.error_reply('fence counter ' .. KEYS[1] .. ' is not a string')\n"
    "end\n"
    "local c = 0\n"
    "if v then\n"
    "  c = tonumber(v)\n"
    "  if c == nil then\n"
    "    return redis.error_reply('fence counter ' .. KEYS[1] .. ' is not an integer')\n"
    "  end\n"
    "end\n"
    "if c < tonumber(ARGV[1]) then\n"
    "  redis.call('SET', KEYS[1], ARGV[1])\n"
    "end\n"
    "return 1\n";

/*
 * Extend one lease by its token (EXTEND): compare-and-PEXPIRE, answering
 * the PTTL the key had before (-1: no expiry), or -3 when it is not ours.
 * Never SET: a key that is gone stays gone.
 */
static const char redlock_extend_one_lua[] =
    "if redis.pcall('GET', KEYS[1]) == ARGV[1] then\n"
    "  local left = redis.call('PTTL', KEYS[1])\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  return left\n"
    "end\n"
    "return -3\n";

/*
 * Release: compare-and-delete, answering 1 when deleted.  With ARGV[2],
 * a deleted key is announced on ARGV[2], the name's channel, with the
 * released token (dead from now on) as the message, so that waiters
 * elsewhere try at once and can tell the masters' copies of one
 * announcement apart from a new one.
 */
static const char redlock_release_lua[] =
    "if redis.pcall('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "  if ARGV[2] then\n"
    "    redis.call('PUBLISH', ARGV[2], ARGV[1])\n"
    "  end\n"
    "  return 1\n"
    "end\n"
    "return 0\n";

/*
 * Extend n keys: compare-and-PEXPIRE each; never SET.  Per key: 1
 * extended, 0 someone else's value, 2 no such key (a master that lost
 * it, for redlock_restore).
 */
static const char redlock_extend_lua[] =
    "local out = {}\n"
    "for i = 1, #KEYS do\n"
    "  local v = redis.pcall('GET', KEYS[i])\n"
    "  if v == ARGV[2 * i - 1] then\n"
    "    redis.call('PEXPIRE', KEYS[i], ARGV[2 * i])\n"
    "    out[i] = 1\n"
    "  elseif v == false then\n"
    "    out[i] = 2\n"
    "  else\n"
    "    out[i] = 0\n"
    "  end\n"
    "end\n"
    "return out\n";

/*
 * Restore: put keys back where a master lost them, only where absent,
 * each with its own expiry: KEYS[i] gets ARGV[2i-1] for ARGV[2i] ms.
 * Answers how many were set.
 */
static const char redlock_restore_lua[] =
    "local n = 0\n"
    "for i = 1, #KEYS do\n"
    "  if redis.call('SET', KEYS[i], ARGV[2 * i - 1], 'NX', 'PX', ARGV[2 * i]) then\n"
    "    n = n + 1\n"
    "  end\n"
    "end\n"
    "return n\n";

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
static int    script_fence, script_extend_one, script_restore;
static double redlock_drift_factor = 0.01;

static size_t redlock_derived(char *out, const char *key, size_t key_len,
                              const char *suffix);
static redlock_released_fn redlock_released_cb;

/* Per-operation state; freed in its done callback. */
struct redlock_op {
    redlock_done_fn cb;             /* caller's callback */
    void           *arg;            /* caller's argument */
    int64_t         ttl_ms;         /* acquire/extend: the lease asked for */
    size_t          yes;            /* masters that granted / confirmed */
    size_t          swapped;        /* acquire: grants that swapped the old token */
    size_t          no;             /* extend: masters where it is not ours */
    size_t          nheld;          /* masters where someone else holds it */
    size_t          self;           /* status: masters holding our token */
    bool            fenced;         /* acquire: with a fencing counter */
    bool            handover;       /* acquire: with an old token to swap */
    int64_t         fence;          /* acquire: largest counter among grants */
    int64_t         subscribers;    /* acquire: most release-channel subscribers seen */
    struct redlock_result res;      /* acquire: kept across the write-back */
    char           *fence_key;      /* acquire: the counter's key, malloc'd */
    size_t          fence_key_len;  /* bytes in fence_key */
    int64_t         pttls[];        /* per master: holder's pttl */
};

/* Batched extend state; freed in its done callback. */
struct redlock_extend_op {
    redlock_extend_fn cb;           /* caller's callback */
    void             *arg;          /* caller's argument */
    size_t            n;            /* items */
    uint8_t          *confirmed;    /* per item */
    uint8_t          *denied;       /* per item */
    uint16_t         *absent;       /* per item: masters without the key */
};

void
redlock_init(double drift_factor)
{
    redlock_drift_factor = drift_factor;
    script_acquire = master_script(redlock_acquire_lua);
    script_release = master_script(redlock_release_lua);
    script_extend = master_script(redlock_extend_lua);
    script_status = master_script(redlock_status_lua);
    script_fence = master_script(redlock_fence_lua);
    script_extend_one = master_script(redlock_extend_one_lua);
    script_restore = master_script(redlock_restore_lua);
}

/* A message on a channel: strip the suffix back to the lock's key. */
static void
redlock_message(const char *channel, size_t len, const char *msg, size_t msg_len)
{
    size_t slen = sizeof(REDLOCK_CHANNEL_SUFFIX) - 1;

    if (redlock_released_cb != NULL && len > slen
        && memcmp(channel + len - slen, REDLOCK_CHANNEL_SUFFIX, slen) == 0) {
        redlock_released_cb(channel, len - slen, msg, msg_len);
    }
}

void
redlock_on_release(redlock_released_fn fn)
{
    redlock_released_cb = fn;
    master_on_message(redlock_message);
}

int
redlock_watch(const char *key, size_t key_len, bool on)
{
    char channel[REDLOCK_DERIVED_MAX];
    size_t len;

    if (key_len > REDLOCK_KEY_MAX) {
        return -1;
    }
    len = redlock_derived(channel, key, key_len, REDLOCK_CHANNEL_SUFFIX);
    if (on) {
        return master_subscribe(channel, len);
    }
    master_unsubscribe(channel, len);
    return 0;
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

/* Append to buf (size bytes in all, used taken) what fmt says; returns the new used. */
static size_t
redlock_append(char *buf, size_t size, size_t used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static size_t
redlock_append(char *buf, size_t size, size_t used, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (used >= size) {
        return used;
    }
    va_start(ap, fmt);
    n = vsnprintf(buf + used, size - used, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return used;
    }
    return used + (size_t)n < size ? used + (size_t)n : size - 1;
}

/*
 * The text of a NOQUORUM.  When answers arrived that do not count
 * (restart quarantine, a server listed twice), it says so first, with
 * how many, until when, and what an operator can do, because "0 of 5
 * answered" would be untrue: the masters did answer.
 */
static void
redlock_fill_error(struct redlock_result *res, struct round *r)
{
    size_t n = master_count(), size = sizeof(res->error), used, nq, nd;
    int64_t left_ms;
    char when[32];

    nq = round_quarantined(r, &left_ms);
    nd = round_duplicates(r);
    if (nq == 0 && nd == 0) {
        used = redlock_append(res->error, size, 0, "%zu of %zu masters answered, quorum is %zu: ",
                              round_answered(r), n, redlock_quorum(n));
        round_describe_failures(r, res->error + used, size - used);
        return;
    }
    used = redlock_append(res->error, size, 0, "%zu of %zu masters answered",
                          round_answered(r) + nq + nd, n);
    if (nq > 0) {
        util_clock_after(left_ms, when, sizeof(when));
        used = redlock_append(res->error, size, used, ", but %zu of them %s in restart "
                              "quarantine (until %s, %lld ms left; a master up less than "
                              "lock.max_ttl_ms may have lost locks in its restart)", nq,
                              nq == 1 ? "is" : "are", when, (long long)left_ms);
    }
    if (nd > 0) {
        used = redlock_append(res->error, size, used, "%s %zu of them %s the same server "
                              "as a master listed before (same run_id)",
                              nq > 0 ? " and" : ", but", nd, nd == 1 ? "is" : "are");
    }
    used = redlock_append(res->error, size, used, "; quorum is %zu counted masters.",
                          redlock_quorum(n));
    if (nq > 0) {
        used = redlock_append(res->error, size, used, " If these masters are new (they hold "
                              "no locks), set lock.restart_quarantine: false and reload "
                              "(systemctl reload redlockd), then set it back to true; "
                              "masters with appendonly yes and appendfsync always are never "
                              "quarantined (the daemon's ACL user needs +config|get to see "
                              "that).");
    }
    if (nd > 0) {
        used = redlock_append(res->error, size, used, " List each Redis server once in "
                              "masters.");
    }
    used = redlock_append(res->error, size, used, " Not counted: ");
    round_describe_failures(r, res->error + used, size - used);
}

/* Start a result from a decided round: times and answers. */
static void
redlock_result_begin(struct redlock_result *res, struct round *r)
{
    memset(res, 0, sizeof(*res));
    res->start_us = round_start_us(r);
    res->answered = round_answered(r);
}

/*
 * Read a grant {v, subscribers, branch} (v == 1, or a fence >= 1 when
 * fenced; branch an enum redlock_branch).
 */
static bool
redlock_grant_of(const struct master_reply *reply, bool fenced, int64_t *v, int64_t *subs,
                 int64_t *branch)
{
    const struct master_reply *e0, *e1, *e2;

    if (master_reply_type(reply) != MASTER_REPLY_ARRAY || master_reply_elements(reply) != 3
        || master_reply_type(e0 = master_reply_element(reply, 0)) != MASTER_REPLY_INTEGER
        || master_reply_type(e1 = master_reply_element(reply, 1)) != MASTER_REPLY_INTEGER
        || master_reply_type(e2 = master_reply_element(reply, 2)) != MASTER_REPLY_INTEGER) {
        return false;
    }
    *v = master_reply_integer(e0);
    *subs = master_reply_integer(e1);
    *branch = master_reply_integer(e2);
    return (fenced ? *v >= 1 : *v == 1) && *subs >= 0
           && *branch >= REDLOCK_BRANCH_SET && *branch <= REDLOCK_BRANCH_OURS;
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
    int64_t pttl, v, subs, branch;

    if (redlock_grant_of(reply, op->fenced, &v, &subs, &branch)) {
        op->yes++;
        if (branch == REDLOCK_BRANCH_SWAPPED) {
            op->swapped++;
        }
        if (op->fenced && v > op->fence) {
            op->fence = v;
        }
        if (subs > op->subscribers) {
            op->subscribers = subs;
        }
    } else if (redlock_pttl_of(reply, &pttl)) {
        op->pttls[op->nheld++] = pttl;
    } else {
        if (master_reply_type(reply) == MASTER_REPLY_ERROR) {
            round_fail(r, i, master_reply_str(reply, NULL));
            log_warn("master %s: acquire script: %s", master_name(master_at(i)),
                     master_reply_str(reply, NULL));
        } else {
            round_fail(r, i, "unexpected answer to the acquire script");
            log_warn("master %s: unexpected answer to the acquire script (type %d)",
                     master_name(master_at(i)), (int)master_reply_type(reply));
        }
        return ROUND_CONTINUE;
    }
    /*
     * Decided: granted (for a hand-over, once a quorum swapped the old
     * token, so the releaser learns whether its lease was still there;
     * else at the end of the round), or so many hold it that no quorum
     * is possible.
     */
    if ((op->yes >= q && (!op->handover || op->swapped >= q)) || op->nheld > n - q) {
        return ROUND_DECIDED;
    }
    return ROUND_CONTINUE;
}

static void
redlock_op_free(struct redlock_op *op)
{
    free(op->fence_key);
    free(op);
}

static enum round_verdict
redlock_fence_reply(struct round *r, size_t i, const struct master_reply *reply, void *arg)
{
    struct redlock_op *op = arg;

    if (master_reply_type(reply) != MASTER_REPLY_INTEGER) {
        round_fail(r, i, master_reply_type(reply) == MASTER_REPLY_ERROR
                         ? master_reply_str(reply, NULL)
                         : "unexpected answer to the fence script");
        return ROUND_CONTINUE;
    }
    return ++op->yes >= redlock_quorum(master_count()) ? ROUND_DECIDED : ROUND_CONTINUE;
}

/*
 * "A reply saying OK is true when it is sent": a grant must still have
 * validity left when it is reported; a fenced one a round deadline of
 * it (see redlock_acquire in redlock.h).  Otherwise it is LATE.
 */
static void
redlock_check_left(struct redlock_result *res)
{
    int64_t min_left = res->fence > 0 ? round_timeout_us() : 1000;

    if (res->outcome == REDLOCK_GRANTED && res->validity_end_us <= util_now_us() + min_left) {
        res->outcome = REDLOCK_LATE;
    }
}

/* The write-back ended: the grant stands only if a majority has the fence. */
static void
redlock_fence_done(struct round *r, void *arg)
{
    struct redlock_op *op = arg;
    size_t n = master_count(), q = redlock_quorum(n);
    int used;

    if (op->yes >= q) {
        op->res.fence = op->fence;
        redlock_check_left(&op->res);
    } else {
        op->res.outcome = REDLOCK_NOQUORUM;
        used = snprintf(op->res.error, sizeof(op->res.error),
                        "fence write-back: %zu of %zu masters confirmed, quorum is %zu: ",
                        op->yes, n, q);
        round_describe_failures(r, op->res.error + used, sizeof(op->res.error) - (size_t)used);
    }
    op->cb(&op->res, op->arg);
    redlock_op_free(op);
}

/*
 * Write the largest counter seen back to every master, set-if-greater,
 * before the grant is reported: any later grant's quorum intersects the
 * majority that confirms this, so it counts from above this value.
 */
static void
redlock_fence_write_back(struct redlock_op *op)
{
    char value[24];
    const char *args[2];
    size_t lens[2];

    op->yes = 0;
    args[0] = op->fence_key;
    lens[0] = op->fence_key_len;
    args[1] = value;
    lens[1] = (size_t)snprintf(value, sizeof(value), "%lld", (long long)op->fence);
    if (round_start(script_fence, 1, 2, args, lens, redlock_fence_reply,
                    redlock_fence_done, op) != 0) {
        op->res.outcome = REDLOCK_NOQUORUM;
        snprintf(op->res.error, sizeof(op->res.error), "fence write-back: out of memory");
        op->cb(&op->res, op->arg);
        redlock_op_free(op);
    }
}

static void
redlock_acquire_done(struct round *r, void *arg)
{
    struct redlock_op *op = arg;
    struct redlock_result *res = &op->res;
    size_t n = master_count(), q = redlock_quorum(n);
    int64_t start = round_start_us(r), validity;

    redlock_result_begin(res, r);
    res->confirmed = op->yes;
    res->swapped = op->swapped;
    res->subscribers = (size_t)op->subscribers;
    validity = redlock_validity_us(op->ttl_ms, round_end_us(r) - start,
                                   redlock_drift_factor);
    if (op->yes >= q && validity > 0) {
        res->outcome = REDLOCK_GRANTED;
        res->validity_end_us = start + op->ttl_ms * 1000
                               - redlock_drift_us(op->ttl_ms, redlock_drift_factor);
    } else if (op->nheld > n - q || res->answered >= q) {
        res->outcome = REDLOCK_BUSY;
        res->ttl_ms = redlock_holder_ttl(op->pttls, op->nheld, op->yes, q);
    } else {
        res->outcome = REDLOCK_NOQUORUM;
    }
    if (res->answered < q) {
        redlock_fill_error(res, r);     /* also for a hand-over's releaser */
    }
    if (res->outcome == REDLOCK_GRANTED && op->fenced) {
        redlock_fence_write_back(op);
        return;
    }
    redlock_check_left(res);
    op->cb(res, op->arg);
    redlock_op_free(op);
}

/*
 * Write key + suffix and a NUL into out, which has room for key_len +
 * strlen(suffix) + 1 bytes (REDLOCK_DERIVED_MAX for any key up to
 * REDLOCK_KEY_MAX); returns the length.
 */
static size_t
redlock_derived(char *out, const char *key, size_t key_len, const char *suffix)
{
    size_t slen = strlen(suffix);

    memcpy(out, key, key_len);
    memcpy(out + key_len, suffix, slen + 1);
    return key_len + slen;
}

int
redlock_acquire(const char *key, size_t key_len, const char *token, int64_t ttl_ms,
                const char *old_token, bool fence, redlock_done_fn cb, void *arg)
{
    struct redlock_op *op;
    char ttl[24], channel[REDLOCK_DERIVED_MAX];
    const char *args[6];
    size_t lens[6], nkeys, n = 0;

    if (key_len > REDLOCK_KEY_MAX) {
        return -1;
    }
    op = redlock_op_new(cb, arg, ttl_ms);
    if (op == NULL) {
        return -1;
    }
    op->fenced = fence;
    op->handover = old_token != NULL;
    /* KEYS: the lock, then the counter when fenced. */
    args[n] = key;
    lens[n++] = key_len;
    if (fence) {
        op->fence_key = malloc(key_len + sizeof(REDLOCK_FENCE_SUFFIX));
        if (op->fence_key == NULL) {
            free(op);
            return -1;
        }
        op->fence_key_len = redlock_derived(op->fence_key, key, key_len,
                                            REDLOCK_FENCE_SUFFIX);
        args[n] = op->fence_key;
        lens[n++] = op->fence_key_len;
    }
    nkeys = n;
    /* ARGV: token, ttl, the release channel, the old token of a hand-over. */
    args[n] = token;
    lens[n++] = UTIL_TOKEN_HEX;
    args[n] = ttl;
    lens[n++] = (size_t)snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
    args[n] = channel;
    lens[n++] = redlock_derived(channel, key, key_len, REDLOCK_CHANNEL_SUFFIX);
    if (old_token != NULL) {
        args[n] = old_token;
        lens[n++] = UTIL_TOKEN_HEX;
    }
    if (round_start(script_acquire, nkeys, n, args, lens, redlock_acquire_reply,
                    redlock_acquire_done, op) != 0) {
        redlock_op_free(op);
        return -1;
    }
    return 0;
}

static enum round_verdict
redlock_release_reply(struct round *r, size_t i, const struct master_reply *reply,
                      void *arg)
{
    struct redlock_op *op = arg;

    if (master_reply_type(reply) != MASTER_REPLY_INTEGER) {
        round_fail(r, i, "unexpected answer to the release script");
    } else if (master_reply_integer(reply) == 1 && op != NULL) {
        op->yes++;
    }
    return ROUND_CONTINUE;
}

enum redlock_outcome
redlock_release_verdict(size_t answered, size_t confirmed, size_t nmasters)
{
    size_t q = redlock_quorum(nmasters);

    if (confirmed >= q) {
        return REDLOCK_RELEASED;
    }
    return answered >= q ? REDLOCK_GONE : REDLOCK_NOQUORUM;
}

static void
redlock_release_done(struct round *r, void *arg)
{
    struct redlock_op *op = arg;
    struct redlock_result res;

    redlock_result_begin(&res, r);
    res.confirmed = op->yes;
    res.outcome = redlock_release_verdict(res.answered, res.confirmed, master_count());
    if (res.outcome == REDLOCK_NOQUORUM) {
        redlock_fill_error(&res, r);
    }
    op->cb(&res, op->arg);
    redlock_op_free(op);
}

int
redlock_release(const char *key, size_t key_len, const char *token, bool announce,
                redlock_done_fn cb, void *arg)
{
    struct redlock_op *op = NULL;
    char channel[REDLOCK_DERIVED_MAX];
    const char *args[3] = { key, token, channel };
    size_t lens[3] = { key_len, UTIL_TOKEN_HEX, 0 };

    if (key_len > REDLOCK_KEY_MAX) {
        return -1;
    }
    if (cb != NULL) {
        op = redlock_op_new(cb, arg, 0);
        if (op == NULL) {
            return -1;
        }
    }
    if (announce) {
        lens[2] = redlock_derived(channel, key, key_len, REDLOCK_CHANNEL_SUFFIX);
    }
    /* Wait for every master (no early decision): release must reach all. */
    if (round_start(script_release, 1, announce ? 3 : 2, args, lens, redlock_release_reply,
                    cb != NULL ? redlock_release_done : NULL, op) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

/* Extend one lease by token: count confirmations, keep their old pttls. */
static enum round_verdict
redlock_extend_one_reply(struct round *r, size_t i, const struct master_reply *reply,
                         void *arg)
{
    struct redlock_op *op = arg;
    size_t n = master_count(), q = redlock_quorum(n);
    long long v;

    if (master_reply_type(reply) != MASTER_REPLY_INTEGER
        || (v = master_reply_integer(reply)) < -3 || v == -2) {
        round_fail(r, i, "unexpected answer to the extend script");
        return ROUND_CONTINUE;
    }
    if (v == -3) {
        op->no++;
    } else {
        op->pttls[op->yes++] = v;
    }
    return op->yes >= q || op->no > n - q ? ROUND_DECIDED : ROUND_CONTINUE;
}

static void
redlock_extend_one_done(struct round *r, void *arg)
{
    struct redlock_op *op = arg;
    struct redlock_result res;
    size_t n = master_count(), q = redlock_quorum(n);
    int64_t elapsed = round_end_us(r) - round_start_us(r), left_ms, left_us;

    redlock_result_begin(&res, r);
    res.confirmed = op->yes;
    if (op->yes >= q) {
        /*
         * The lock stayed exclusive until fewer than a quorum of the old
         * keys remained: the q-th longest old pttl among the confirmers,
         * less drift.  The round must have ended within that.
         */
        qsort(op->pttls, op->yes, sizeof(op->pttls[0]), redlock_cmp_pttl);
        left_ms = op->pttls[op->yes - q];
        left_us = left_ms == REDLOCK_NO_EXPIRY ? INT64_MAX
                  : left_ms * 1000 - redlock_drift_us(left_ms, redlock_drift_factor);
        if (elapsed < left_us
            && redlock_validity_us(op->ttl_ms, elapsed, redlock_drift_factor) > 0) {
            res.outcome = REDLOCK_GRANTED;
            res.validity_end_us = res.start_us + op->ttl_ms * 1000
                                  - redlock_drift_us(op->ttl_ms, redlock_drift_factor);
        } else {
            res.outcome = REDLOCK_NOTHELD;
        }
    } else if (op->no > n - q) {
        res.outcome = REDLOCK_NOTHELD;
    } else {
        res.outcome = REDLOCK_NOQUORUM;
        redlock_fill_error(&res, r);
    }
    op->cb(&res, op->arg);
    redlock_op_free(op);
}

int
redlock_extend_one(const char *key, size_t key_len, const char *token, int64_t ttl_ms,
                   redlock_done_fn cb, void *arg)
{
    struct redlock_op *op;
    char ttl[24];
    const char *args[3] = { key, token, ttl };
    size_t lens[3] = { key_len, UTIL_TOKEN_HEX, 0 };

    op = redlock_op_new(cb, arg, ttl_ms);
    if (op == NULL) {
        return -1;
    }
    lens[2] = (size_t)snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
    if (round_start(script_extend_one, 1, 3, args, lens, redlock_extend_one_reply,
                    redlock_extend_one_done, op) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

int
redlock_expire_at(const char *key, size_t key_len, const char *token, int64_t validity_end_us)
{
    char ttl[24];
    const char *args[3] = { key, token, ttl };
    size_t lens[3] = { key_len, UTIL_TOKEN_HEX, 0 };
    int64_t ms = (validity_end_us - util_now_us()) / 1000;

    /* Plus drift, for masters whose clocks run fast. */
    ms += redlock_drift_us(ms > 0 ? ms : 0, redlock_drift_factor) / 1000;
    lens[2] = (size_t)snprintf(ttl, sizeof(ttl), "%lld", (long long)(ms > 0 ? ms : 1));
    return round_start(script_extend_one, 1, 3, args, lens, NULL, NULL, NULL);
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
        res.confirmed = op->self;
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
    size_t j;
    const struct master_reply *e;

    if (master_reply_type(reply) != MASTER_REPLY_ARRAY
        || master_reply_elements(reply) != op->n) {
        round_fail(r, i, "unexpected answer to the extend script");
        return ROUND_CONTINUE;
    }
    for (j = 0; j < op->n; j++) {
        e = master_reply_element(reply, j);
        if (master_reply_type(e) == MASTER_REPLY_INTEGER && master_reply_integer(e) == 1) {
            op->confirmed[j]++;
        } else {
            op->denied[j]++;
            if (master_reply_type(e) == MASTER_REPLY_INTEGER && master_reply_integer(e) == 2) {
                op->absent[j] |= (uint16_t)(1u << i);
            }
        }
    }
    /* No early decision: the late answers say where a key went missing. */
    return ROUND_CONTINUE;
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
    res.absent = op->absent;
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

    op = calloc(1, sizeof(*op) + n * sizeof(*op->absent) + 2 * n);
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
    op->absent = (uint16_t *)(op + 1);
    op->confirmed = (uint8_t *)(op->absent + n);
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

enum redlock_renewal
redlock_renewal_verdict(size_t confirmed, size_t denied, size_t nmasters, int64_t start_us,
                        int64_t end_us, int64_t ttl_ms, int64_t validity_end_us,
                        int64_t *new_end_us)
{
    size_t q = redlock_quorum(nmasters);

    if (confirmed >= q) {
        if (end_us >= validity_end_us) {
            return REDLOCK_TOO_LATE;
        }
        *new_end_us = start_us + ttl_ms * 1000 - redlock_drift_us(ttl_ms, redlock_drift_factor);
        return REDLOCK_RENEWED;
    }
    return denied > nmasters - q ? REDLOCK_DENIED : REDLOCK_UNDECIDED;
}

/* A restore sent to one master: its own copy of the args; freed when answered. */
struct redlock_restore_req {
    size_t       n;         /* keys */
    const char **args;      /* n keys, then token and px per key (into bytes) */
    size_t      *lens;      /* bytes of each arg */
    char         bytes[];   /* the keys, tokens and px texts */
};

static void
redlock_restore_cb(struct master *m, const struct master_reply *reply, const char *error,
                   void *arg)
{
    struct redlock_restore_req *req = arg;

    if (reply != NULL && master_reply_type(reply) == MASTER_REPLY_INTEGER) {
        stats.keys_restored += (uint64_t)master_reply_integer(reply);
    } else {
        log_warn("master %s: restoring %zu lost lock keys failed: %s", master_name(m), req->n,
                 reply != NULL ? "unexpected answer to the restore script" : error);
    }
    free(req);
}

/* Whether item goes to master i now (named in its mask, validity left). */
static bool
redlock_restore_wanted(const struct redlock_restore_item *item, size_t i, int64_t now)
{
    return ((item->masters >> i) & 1u) && item->validity_end_us - now >= 1000;
}

int
redlock_restore(const struct redlock_restore_item *items, size_t n)
{
    size_t nm = master_count(), i, j, k, cnt, size;
    int64_t now = util_now_us();

    for (i = 0; i < nm && i < 16; i++) {
        struct redlock_restore_req *req;
        char *p;

        for (j = 0, cnt = 0, size = 0; j < n; j++) {
            if (redlock_restore_wanted(&items[j], i, now)) {
                cnt++;
                size += items[j].key_len + UTIL_TOKEN_HEX + 24;
            }
        }
        if (cnt == 0) {
            continue;
        }
        size = (size + 7) & ~(size_t)7;     /* the arrays after the bytes are aligned */
        req = malloc(sizeof(*req) + size + 3 * cnt * (sizeof(*req->args) + sizeof(*req->lens)));
        if (req == NULL) {
            return -1;
        }
        req->n = cnt;
        req->args = (const char **)(void *)(req->bytes + size);
        req->lens = (size_t *)(void *)(req->args + 3 * cnt);
        p = req->bytes;
        for (j = 0, k = 0; j < n; j++) {
            if (!redlock_restore_wanted(&items[j], i, now)) {
                continue;
            }
            memcpy(p, items[j].key, items[j].key_len);
            req->args[k] = p;
            req->lens[k] = items[j].key_len;
            p += items[j].key_len;
            memcpy(p, items[j].token, UTIL_TOKEN_HEX);
            req->args[cnt + 2 * k] = p;
            req->lens[cnt + 2 * k] = UTIL_TOKEN_HEX;
            p += UTIL_TOKEN_HEX;
            req->args[cnt + 2 * k + 1] = p;
            req->lens[cnt + 2 * k + 1] = (size_t)snprintf(
                p, 24, "%lld", (long long)((items[j].validity_end_us - now) / 1000));
            p += 24;
            k++;
        }
        if (master_eval(master_at(i), script_restore, cnt, 3 * cnt, req->args, req->lens,
                        NULL, redlock_restore_cb, req) != 0) {
            free(req);
        }
    }
    return 0;
}
