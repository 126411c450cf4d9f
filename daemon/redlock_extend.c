/*
 * redlock_extend.c: keeping leases alive: the batched renewal of many
 * records in one round (extend never re-creates an expired record),
 * one record's extension, a release at a lease's end, and the restore
 * of records on masters that lost them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/redlock.h"
#include "daemon/redlock_op.h"
#include "daemon/round.h"
#include "daemon/stats.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"

/* Batched extend state; freed in its done callback. */
struct redlock_extend_op {
    redlock_extend_fn cb;           /* caller's callback */
    void             *arg;          /* caller's argument */
    size_t            n;            /* items */
    uint8_t          *confirmed;    /* per item */
    uint8_t          *denied;       /* per item */
    uint16_t         *absent;       /* per item: masters without the key */
};

/* A restore sent to one master: its own copy of the args; freed when answered. */
struct redlock_restore_req {
    size_t       n;         /* keys */
    const char **args;      /* n records, then five words per record (into bytes) */
    size_t      *lens;      /* bytes of each arg */
    char         bytes[];   /* the keys, tokens and px texts */
};

/* Extend one lease by token: count confirmations, keep their old pttls. */
static enum round_verdict
redlock_extend_one_reply(struct round *r, size_t i, const struct master_reply *reply,
                         void *arg)
{
    struct redlock_extend_one_op *op = arg;
    size_t n = master_count(), q = redlock_quorum(n);
    long long v;

    if (master_reply_type(reply) != MASTER_REPLY_INTEGER
        || (v = master_reply_integer(reply)) < -3 || v == -2) {
        round_fail(r, i, "unexpected answer to the extend script");
        return ROUND_CONTINUE;
    }
    if (v == -3) {
        op->b.no++;
    } else {
        op->pttls[op->b.yes++] = v;
    }
    return op->b.yes >= q || op->b.no > n - q ? ROUND_DECIDED : ROUND_CONTINUE;
}

static void
redlock_extend_one_done(struct round *r, void *arg)
{
    struct redlock_extend_one_op *op = arg;
    struct redlock_extend_one_result res;
    size_t n = master_count(), q = redlock_quorum(n);
    int64_t elapsed = round_end_us(r) - round_start_us(r), left_ms, left_us;

    memset(&res, 0, sizeof(res));
    redlock_result_begin(&res.v, r);
    res.v.confirmed = op->b.yes;
    if (op->b.yes >= q) {
        /*
         * The lock stayed exclusive until fewer than a quorum of the old
         * keys remained: the q-th longest old pttl among the confirmers,
         * less drift.  The round must have ended within that.
         */
        qsort(op->pttls, op->b.yes, sizeof(op->pttls[0]), redlock_cmp_pttl);
        left_ms = op->pttls[op->b.yes - q];
        left_us = left_ms == REDLOCK_NO_EXPIRY ? INT64_MAX
                  : left_ms * 1000 - redlock_drift_us(left_ms, redlock_drift_factor);
        if (elapsed < left_us
            && redlock_validity_us(op->ttl_ms, elapsed, redlock_drift_factor) > 0) {
            res.v.outcome = REDLOCK_GRANTED;
            res.validity_end_us = res.v.start_us + op->ttl_ms * 1000
                                  - redlock_drift_us(op->ttl_ms, redlock_drift_factor);
        } else {
            res.v.outcome = REDLOCK_NOTHELD;
        }
    } else if (op->b.no > n - q) {
        res.v.outcome = REDLOCK_NOTHELD;
    } else {
        res.v.outcome = REDLOCK_NOQUORUM;
        redlock_fill_error(&res.v, r);
    }
    op->cb(&res, op->b.arg);
    free(op);
}

int
redlock_extend_one(const char *base, size_t base_len, const char *token, int64_t ttl_ms,
                   redlock_extend_one_fn cb, void *arg)
{
    struct redlock_extend_one_op *op;
    char ttl[24];
    const char *args[5] = { base, token, ttl, "?", "" };
    size_t lens[5] = { base_len, UTIL_TOKEN_HEX, 0, 1, 0 };

    if (base_len > REDLOCK_KEY_MAX) {
        return -1;
    }
    op = redlock_op_new(sizeof(*op), sizeof(op->pttls[0]), arg);
    op->cb = cb;
    op->ttl_ms = ttl_ms;
    lens[2] = (size_t)snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
    if (round_start(redlock_scripts.extend_one, 1, 5, args, lens, redlock_extend_one_reply,
                    redlock_extend_one_done, op) != 0) {
        xmalloc_fail("an extend round");
    }
    return 0;
}

int
redlock_expire_at(const struct redlock_rec *rec, const char *token, int64_t validity_end_us)
{
    struct redlock_keys k;
    char ttl[24];
    const char *args[6] = { k.rec, token, ttl, k.kind, k.aux, k.label };
    size_t lens[6] = { 0, UTIL_TOKEN_HEX, 0, 1, 0, 1 };
    int64_t ms = (validity_end_us - util_now_us()) / 1000;

    if (redlock_keys_of(rec, &k) != 0) {
        return -1;
    }
    lens[0] = k.rec_len;
    lens[4] = k.aux_len;
    /* Plus drift, for masters whose clocks run fast. */
    ms += redlock_drift_us(ms > 0 ? ms : 0, redlock_drift_factor) / 1000;
    if (rec->kind == REDLOCK_EXCLUSIVE && rec->delay_ms > 0) {
        /* The hold ended unreleased: its lock-delay runs from that end. */
        return redlock_release_delayed(rec, token, (ms > 0 ? ms : 0) + rec->delay_ms, NULL,
                                       NULL);
    }
    lens[2] = (size_t)snprintf(ttl, sizeof(ttl), "%lld", (long long)(ms > 0 ? ms : 1));
    if (round_start(redlock_scripts.extend_one, 1, 6, args, lens, NULL, NULL, NULL) != 0) {
        xmalloc_fail("an expiry's round");
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

/*
 * Copy len bytes of src to *p (advanced past them) and point *arg and
 * *arg_len at the copy: how the batched scripts lay out their words.
 */
static void
redlock_put(char **p, const char *src, size_t len, const char **arg, size_t *arg_len)
{
    memcpy(*p, src, len);
    *arg = *p;
    *arg_len = len;
    *p += len;
}

/* Bytes the words of one batched record may take: its keys, token, numbers. */
static size_t
redlock_rec_room(const struct redlock_rec *rec)
{
    return 2 * rec->base_len + 64 + UTIL_TOKEN_HEX + 48;
}

int
redlock_extend(const struct redlock_extend_item *items, size_t n,
               redlock_extend_fn cb, void *arg)
{
    struct redlock_extend_op *op;
    struct redlock_keys k;
    const char **args;
    size_t *lens, i, nargs = 6 * n, room = 0;
    char *bytes, *p, ttl[24];
    int rc = -1;

    for (i = 0; i < n; i++) {
        room += redlock_rec_room(items[i].rec);
    }
    op = xcalloc(1, sizeof(*op) + n * sizeof(*op->absent) + 2 * n);
    args = xreallocarray(NULL, nargs, sizeof(*args));
    lens = xreallocarray(NULL, nargs, sizeof(*lens));
    bytes = xmalloc(room);
    op->cb = cb;
    op->arg = arg;
    op->n = n;
    op->absent = (uint16_t *)(op + 1);
    op->confirmed = (uint8_t *)(op->absent + n);
    op->denied = op->confirmed + n;
    /* KEYS: the records; ARGV per record: token, ttl, kind, limit key, label. */
    for (i = 0, p = bytes; i < n; i++) {
        size_t a = n + 5 * i;

        if (redlock_keys_of(items[i].rec, &k) != 0) {
            goto out;
        }
        redlock_put(&p, k.rec, k.rec_len, &args[i], &lens[i]);
        redlock_put(&p, items[i].token, UTIL_TOKEN_HEX, &args[a], &lens[a]);
        redlock_put(&p, ttl, (size_t)snprintf(ttl, sizeof(ttl), "%lld",
                                              (long long)redlock_record_ms(items[i].rec,
                                                                           items[i].ttl_ms)),
                    &args[a + 1], &lens[a + 1]);
        redlock_put(&p, k.kind, 1, &args[a + 2], &lens[a + 2]);
        redlock_put(&p, k.aux, k.aux_len, &args[a + 3], &lens[a + 3]);
        redlock_put(&p, k.label, 1, &args[a + 4], &lens[a + 4]);
    }
    if (round_start(redlock_scripts.extend, n, nargs, args, lens, redlock_extend_reply,
                    redlock_extend_done, op) != 0) {
        xmalloc_fail("a renewal's round");
    }
    rc = 0;
out:
    free(args);
    free(lens);
    free(bytes);
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
    return ((item->masters >> i) & 1u) && item->validity_end_us - now >= 1000
           && item->rec->base_len <= REDLOCK_KEY_MAX;
}

int
redlock_restore(const struct redlock_restore_item *items, size_t n)
{
    size_t nm = master_count(), i, j, k, cnt, size;
    int64_t now = util_now_us();
    struct redlock_keys keys;
    char num[24];

    for (i = 0; i < nm && i < 16; i++) {
        struct redlock_restore_req *req;
        char *p;

        for (j = 0, cnt = 0, size = 0; j < n; j++) {
            if (redlock_restore_wanted(&items[j], i, now)) {
                cnt++;
                size += redlock_rec_room(items[j].rec);
            }
        }
        if (cnt == 0) {
            continue;
        }
        size = (size + 7) & ~(size_t)7;     /* the arrays after the bytes are aligned */
        req = xmalloc(sizeof(*req) + size + 6 * cnt * (sizeof(*req->args) + sizeof(*req->lens)));
        req->n = cnt;
        req->args = (const char **)(void *)(req->bytes + size);
        req->lens = (size_t *)(void *)(req->args + 6 * cnt);
        p = req->bytes;
        /* KEYS: the records; ARGV per record: token, ms, kind, limit key, limit. */
        for (j = 0, k = 0; j < n; j++) {
            const struct redlock_rec *rec = items[j].rec;
            size_t a = cnt + 5 * k;

            if (!redlock_restore_wanted(&items[j], i, now)) {
                continue;
            }
            (void)redlock_keys_of(rec, &keys);      /* cannot fail: base_len was checked */
            redlock_put(&p, keys.rec, keys.rec_len, &req->args[k], &req->lens[k]);
            redlock_put(&p, items[j].token, UTIL_TOKEN_HEX, &req->args[a], &req->lens[a]);
            redlock_put(&p, num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)(
                            (items[j].validity_end_us - now) / 1000)),
                        &req->args[a + 1], &req->lens[a + 1]);
            redlock_put(&p, keys.kind, 1, &req->args[a + 2], &req->lens[a + 2]);
            redlock_put(&p, keys.aux, keys.aux_len, &req->args[a + 3], &req->lens[a + 3]);
            redlock_put(&p, keys.limit, keys.limit_len, &req->args[a + 4], &req->lens[a + 4]);
            k++;
        }
        if (master_eval(master_at(i), redlock_scripts.restore, cnt, 6 * cnt, req->args, req->lens,
                        NULL, redlock_restore_cb, req, NULL) != 0) {
            free(req);
        }
    }
    return 0;
}
