/*
 * redlock_holders.c: who holds a name, read from a quorum (STATUS), and
 * BREAK, an administrator's removal of every holder with the fencing
 * counters raised past them.
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

/* One holder as one master named it (status). */
struct redlock_holder {
    char    kind;                   /* its record's kind letter */
    char    id[UTIL_TOKEN_HEX + 1]; /* "" exclusive, a permit's index, a token */
    int64_t pttl;                   /* its time left there, ms, or -1 */
    bool    mine;                   /* it holds the token asked about */
    char    who[REDLOCK_WHO_MAX + 1];  /* its token there (cut), "" when unknown */
    int64_t age_ms;                 /* time since its grant there, ms; -1: no label */
    int64_t fence;                  /* its label's fence, 0 when none */
    bool    fence_pending;          /* its label says a fence is to come ('-') */
    char    label[REDLOCK_LABEL_MAX + 1]; /* its label's text, "" when none */
};

/*
 * Read a label as the status and break scripts give it ("<age> <fence>
 * <text>", the fence '-' while a fenced grant's write-back is to come;
 * info NUL-terminated after info_len bytes) into h's age_ms, fence,
 * fence_pending and label; an empty or unreadable one leaves them
 * unknown (age -1, fence 0, label "").
 */
static void
redlock_label_parse(struct redlock_holder *h, const char *info, size_t info_len)
{
    long long age, fence = 0;
    int off = 0, foff = 0;
    bool pending = false;

    h->age_ms = -1;
    h->fence = 0;
    h->fence_pending = false;
    memset(h->label, 0, sizeof(h->label));
    /* The script wrote it from a label of at most 64 printable bytes; trust no more. */
    if (info_len > 0 && info_len < 128 && info[info_len] == '\0'
        && sscanf(info, "%lld %n", &age, &foff) == 1 && foff > 0) {
        if (info[foff] == '-' && info[foff + 1] == ' ') {
            pending = true;
            off = foff + 2;
        } else if (sscanf(info + foff, "%lld %n", &fence, &off) == 1 && off > 0) {
            off += foff;
        } else {
            off = 0;
        }
    }
    if (off > 0 && age >= 0 && fence >= 0 && info_len - (size_t)off <= REDLOCK_LABEL_MAX
        && util_printable_word(info + off, info_len - (size_t)off)) {
        h->age_ms = age;
        h->fence = fence;
        h->fence_pending = pending;
        memcpy(h->label, info + off, info_len - (size_t)off);
        h->label[info_len - (size_t)off] = '\0';
    }
}

/*
 * Keep one holder a master named.  who is its token there, info its
 * label as the status script gives it ("<age> <fence> <text>", or empty).
 */
static void
redlock_holder_add(struct redlock_status_op *op, char kind, const char *id, size_t id_len,
                   int64_t pttl, bool mine, const char *who, size_t who_len,
                   const char *info, size_t info_len)
{
    struct redlock_holder *h;

    if (op->nholders == op->holders_cap) {
        op->holders_cap = op->holders_cap == 0 ? 8 : op->holders_cap * 2;
        op->holders = xreallocarray(op->holders, op->holders_cap, sizeof(*op->holders));
    }
    h = &op->holders[op->nholders++];
    h->kind = kind;
    memcpy(h->id, id, id_len);
    h->id[id_len] = '\0';
    h->pttl = pttl;
    h->mine = mine;
    snprintf(h->who, sizeof(h->who), "%.*s", (int)who_len, who);
    redlock_label_parse(h, info, info_len);
}

/* {limit, then kind, id, pttl, mine, who, label per holder}: keep each holder. */
static enum round_verdict
redlock_status_reply(struct round *r, size_t i, const struct master_reply *reply,
                     void *arg)
{
    struct redlock_status_op *op = arg;
    size_t ne = master_reply_elements(reply), j, len, id_len, who_len, info_len;
    const struct master_reply *e[6];
    const char *kind, *id, *who, *info;

    if (master_reply_type(reply) != MASTER_REPLY_ARRAY || ne < 1 || (ne - 1) % 6 != 0
        || master_reply_type(master_reply_element(reply, 0)) != MASTER_REPLY_INTEGER) {
        round_fail(r, i, "unexpected answer to the status script");
        return ROUND_CONTINUE;
    }
    for (j = 1; j < ne; j += 6) {
        for (len = 0; len < 6; len++) {
            e[len] = master_reply_element(reply, j + len);
        }
        if (master_reply_type(e[0]) != MASTER_REPLY_STRING
            || master_reply_type(e[1]) != MASTER_REPLY_STRING
            || master_reply_type(e[2]) != MASTER_REPLY_INTEGER
            || master_reply_type(e[3]) != MASTER_REPLY_INTEGER
            || master_reply_type(e[4]) != MASTER_REPLY_STRING
            || master_reply_type(e[5]) != MASTER_REPLY_STRING
            || (kind = master_reply_str(e[0], &len), len != 1)
            || strchr("xpsd", kind[0]) == NULL
            || (id = master_reply_str(e[1], &id_len), id_len > UTIL_TOKEN_HEX)
            || master_reply_integer(e[2]) < -1) {
            round_fail(r, i, "unexpected answer to the status script");
            return ROUND_CONTINUE;
        }
        who = master_reply_str(e[4], &who_len);
        info = master_reply_str(e[5], &info_len);
        if (who_len > REDLOCK_WHO_MAX) {
            who_len = REDLOCK_WHO_MAX;
        }
        redlock_holder_add(op, kind[0], id, id_len, master_reply_integer(e[2]),
                           master_reply_integer(e[3]) == 1, who, who_len, info, info_len);
    }
    if (master_reply_integer(master_reply_element(reply, 0)) > (int64_t)op->limit) {
        op->limit = (unsigned)master_reply_integer(master_reply_element(reply, 0));
    }
    return ROUND_CONTINUE;
}

/*
 * What a status shows of one holder, from the entries [j, k) the masters
 * gave of it (one per master): the token that a quorum (q) of them hold,
 * and from that token's entries its label, its fence (the written-back
 * one where it is not 0; pending when none is and an entry says a fenced
 * grant's is to come) and the least time held any of them says (each
 * on its own clock).  When no token is on a quorum (two contenders split
 * the masters, a hand-over half done), nothing is shown of any: a
 * minority's label is nobody's.
 */
static void
redlock_holder_show(const struct redlock_holder *hs, size_t j, size_t k, size_t q,
                    struct redlock_status_result *res)
{
    size_t i, m, n;

    /* Whole arrays: watchers compare states byte for byte. */
    memset(res->label, 0, sizeof(res->label));
    memset(res->holder, 0, sizeof(res->holder));
    res->held_ms = -1;
    res->holder_fence = 0;
    res->fence_pending = false;
    for (i = j; i < k; i++) {
        for (n = 0, m = j; m < k; m++) {
            n += hs[i].who[0] != '\0' && strcmp(hs[i].who, hs[m].who) == 0;
        }
        if (n >= q) {
            break;
        }
    }
    if (i == k) {
        return;
    }
    snprintf(res->holder, sizeof(res->holder), "%s", hs[i].who);
    for (i = j; i < k; i++) {
        if (hs[i].age_ms < 0 || strcmp(hs[i].who, res->holder) != 0) {
            continue;
        }
        if (res->label[0] == '\0') {
            memcpy(res->label, hs[i].label, sizeof(res->label));
        }
        if (res->held_ms < 0 || hs[i].age_ms < res->held_ms) {
            res->held_ms = hs[i].age_ms;
        }
        if (hs[i].fence > res->holder_fence) {
            res->holder_fence = hs[i].fence;
        }
        res->fence_pending = res->fence_pending || hs[i].fence_pending;
    }
    /* Written back anywhere: that fence is the grant's. */
    res->fence_pending = res->fence_pending && res->holder_fence == 0;
}

/* The longest any master says holder entries [j, k) have held, ms, or -1. */
static int64_t
redlock_holder_age(const struct redlock_holder *hs, size_t j, size_t k)
{
    int64_t age = -1;

    for (; j < k; j++) {
        if (hs[j].age_ms > age) {
            age = hs[j].age_ms;
        }
    }
    return age;
}

static int
redlock_holder_cmp(const void *a, const void *b)
{
    const struct redlock_holder *x = a, *y = b;

    if (x->kind != y->kind) {
        return x->kind < y->kind ? -1 : 1;
    }
    return strcmp(x->id, y->id);
}

/* How much a kind ranks when a master holds several (a mix left by hand). */
static int
redlock_kind_rank(char kind)
{
    return kind == REDLOCK_EXCLUSIVE ? 3 : kind == REDLOCK_PERMIT ? 2 : 1;
}

/*
 * Decide a status: group the holders the masters named by (kind, id);
 * a holder counts when fewer than a quorum see it absent (nobody could
 * take its place now), as an exclusive key does for HELD.
 */
static void
redlock_status_done(struct round *r, void *arg)
{
    struct redlock_status_op *op = arg;
    struct redlock_status_result res;
    size_t q = redlock_quorum(master_count()), j, k, present, mine;
    int64_t ttl, age, shown_age = -2;
    bool shown_mine = false;

    memset(&res, 0, sizeof(res));
    redlock_result_begin(&res.v, r);
    res.v.outcome = REDLOCK_FREE;
    res.held_ms = -1;
    if (res.v.answered < q) {
        res.v.outcome = REDLOCK_NOQUORUM;
        redlock_fill_error(&res.v, r);
        op->nholders = 0;
    }
    if (op->nholders > 0) {
        qsort(op->holders, op->nholders, sizeof(*op->holders), redlock_holder_cmp);
    }
    for (j = 0; j < op->nholders; j = k) {
        present = 0;
        mine = 0;
        for (k = j; k < op->nholders && redlock_holder_cmp(&op->holders[j], &op->holders[k]) == 0
             && present < master_count(); k++) {
            op->pttls[present++] = op->holders[k].pttl;
            mine += op->holders[k].mine;
        }
        if (res.v.answered - present >= q) {
            continue;       /* a quorum sees it gone: not a holder */
        }
        ttl = redlock_holder_ttl(op->pttls, present, res.v.answered - present, q);
        if (op->holders[j].kind == 'd') {
            res.delayed_ms = ttl;   /* a lock-delay on enough masters: no holder */
            continue;
        }
        if (res.v.outcome == REDLOCK_HELD
            && redlock_kind_rank(op->holders[j].kind) < redlock_kind_rank((char)res.kind)) {
            continue;
        }
        if (res.v.outcome != REDLOCK_HELD || op->holders[j].kind != (char)res.kind) {
            res.v.outcome = REDLOCK_HELD;
            res.kind = (enum redlock_kind)op->holders[j].kind;
            res.holders = 0;
            res.holders_ttl_ms = 0;
            res.owner_self = false;
            res.v.confirmed = 0;
            shown_age = -2;
            shown_mine = false;
        }
        res.holders++;
        if (res.holders_ttl_ms != REDLOCK_NO_EXPIRY && (ttl == REDLOCK_NO_EXPIRY || ttl > res.holders_ttl_ms)) {
            res.holders_ttl_ms = ttl;
        }
        if (mine >= q) {
            res.owner_self = true;
            res.v.confirmed = mine;
        }
        /* Show the asker's own hold, else the one held longest. */
        age = redlock_holder_age(op->holders, j, k);
        if (!shown_mine && (mine >= q || age > shown_age)) {
            redlock_holder_show(op->holders, j, k, q, &res);
            shown_age = age;
            shown_mine = mine >= q;
        }
    }
    res.limit = res.kind == REDLOCK_PERMIT ? op->limit : 0;
    op->cb(&res, op->b.arg);
    free(op->holders);
    free(op);
}

/* {holders deleted, the raised counter, the first holder's label}: keep the most. */
static enum round_verdict
redlock_break_reply(struct round *r, size_t i, const struct master_reply *reply, void *arg)
{
    struct redlock_break_op *op = arg;
    const struct master_reply *e[4];
    struct redlock_holder h;
    size_t len;
    const char *info;

    if (master_reply_type(reply) != MASTER_REPLY_ARRAY || master_reply_elements(reply) != 4
        || master_reply_type(e[0] = master_reply_element(reply, 0)) != MASTER_REPLY_INTEGER
        || master_reply_type(e[1] = master_reply_element(reply, 1)) != MASTER_REPLY_INTEGER
        || master_reply_type(e[2] = master_reply_element(reply, 2)) != MASTER_REPLY_STRING
        || master_reply_type(e[3] = master_reply_element(reply, 3)) != MASTER_REPLY_INTEGER
        || master_reply_integer(e[0]) < 0 || master_reply_integer(e[1]) < 1
        || master_reply_integer(e[3]) < 0 || master_reply_integer(e[3]) > REDLOCK_LIMIT_MAX) {
        round_fail(r, i, master_reply_type(reply) == MASTER_REPLY_ERROR
                         ? master_reply_str(reply, NULL)
                         : "unexpected answer to the break script");
        if (master_reply_type(reply) == MASTER_REPLY_ERROR) {
            log_warn("master %s: break script: %s", master_name(master_at(i)),
                     master_reply_str(reply, NULL));
        }
        return ROUND_CONTINUE;
    }
    op->b.yes++;
    if ((size_t)master_reply_integer(e[0]) > op->res.deleted) {
        op->res.deleted = (size_t)master_reply_integer(e[0]);
    }
    if (master_reply_integer(e[1]) > op->wb.fence) {
        op->wb.fence = master_reply_integer(e[1]);
    }
    if ((unsigned)master_reply_integer(e[3]) > op->limit) {
        op->limit = (unsigned)master_reply_integer(e[3]);
    }
    info = master_reply_str(e[2], &len);
    if (op->res.label[0] == '\0' && len > 0) {
        redlock_label_parse(&h, info, len);
        memcpy(op->res.label, h.label, sizeof(op->res.label));
    }
    return ROUND_CONTINUE;
}

/* A master took the second raise: keep the largest counter. */
static enum round_verdict
redlock_reraise_reply(struct round *r, size_t i, const struct master_reply *reply, void *arg)
{
    struct redlock_break_op *op = arg;

    if (master_reply_type(reply) != MASTER_REPLY_INTEGER || master_reply_integer(reply) < 1) {
        round_fail(r, i, "unexpected answer to the raise script");
        return ROUND_CONTINUE;
    }
    op->b.yes++;
    if (master_reply_integer(reply) > op->wb.fence) {
        op->wb.fence = master_reply_integer(reply);
    }
    return ROUND_CONTINUE;
}

/* The end of a BREAK: the caller's callback, then its state is freed. */
static void
redlock_break_end(struct redlock_break_op *op)
{
    op->cb(&op->res, op->b.arg);
    free(op);
}

/* The BREAK's write-back ended: RELEASED with the counter when a majority took it. */
static void
redlock_break_written(struct redlock_fence_wb *wb, struct round *r)
{
    struct redlock_break_op *op = (struct redlock_break_op *)(void *)wb->op;

    if (op->b.yes >= redlock_quorum(master_count())) {
        op->res.fence_after = wb->fence;
    } else {
        redlock_fence_error(wb, r, &op->res.v);
    }
    redlock_break_end(op);
}

/* The second raise ended: with a quorum, write its largest counter back, then OK. */
static void
redlock_reraise_done(struct round *r, void *arg)
{
    struct redlock_break_op *op = arg;
    struct redlock_verdict *v = &op->res.v;
    size_t n = master_count(), q = redlock_quorum(n);
    int used;

    if (op->b.yes < q) {
        v->outcome = REDLOCK_NOQUORUM;
        used = snprintf(v->error, sizeof(v->error), "fence raise: %zu of %zu masters "
                        "raised the counter, quorum is %zu: ", op->b.yes, n, q);
        round_describe_failures(r, v->error + used, sizeof(v->error) - (size_t)used);
        redlock_break_end(op);
        return;
    }
    redlock_fence_write_back(&op->wb);
}

/*
 * The second raise of a BREAK: every grant its first round broke has
 * been told its fence by now, or never will be (redlock_fence_span_us),
 * and each of those fences was written back to a majority first.
 */
static void
redlock_break_reraise(void *arg)
{
    struct redlock_break_op *op = arg;
    char seen[24], limit[16];
    /* The name's key is the counter's without its suffix. */
    const char *args[4] = { op->wb.fence_key, op->wb.fence_key, seen, limit };
    size_t lens[4] = { op->wb.fence_key_len,
                       op->wb.fence_key_len - (sizeof(REDLOCK_FENCE_SUFFIX) - 1), 0, 0 };

    lens[2] = (size_t)snprintf(seen, sizeof(seen), "%lld", (long long)op->wb.fence);
    lens[3] = (size_t)snprintf(limit, sizeof(limit), "%u", op->limit);
    op->b.yes = 0;
    if (round_start(redlock_scripts.reraise, 2, 4, args, lens, redlock_reraise_reply,
                    redlock_reraise_done, op) != 0) {
        xmalloc_fail("a BREAK's second raise");
    }
}

/*
 * The break ran.  With a quorum: wait until every fenced grant whose
 * round began before this one ended has been told its fence or never
 * will be, then raise the counter a second time, above every fence
 * written back meanwhile (PROTOCOL.md, BREAK), and write that back.
 */
static void
redlock_break_done(struct round *r, void *arg)
{
    struct redlock_break_op *op = arg;
    struct redlock_verdict *v = &op->res.v;
    int64_t span = redlock_fence_span_us();

    redlock_result_begin(v, r);
    if (op->b.yes < redlock_quorum(master_count())) {
        v->outcome = REDLOCK_NOQUORUM;
        redlock_fill_error(v, r);
        redlock_break_end(op);
        return;
    }
    v->outcome = REDLOCK_RELEASED;
    v->confirmed = op->b.yes;
    /* Measured on another daemon's clock, which may run drift_factor slow. */
    span += (int64_t)((double)span * 2 * redlock_drift_factor) + 2000;
    if (round_after(span, redlock_break_reraise, op) != 0) {
        xmalloc_fail("a BREAK's wait");
    }
}

int
redlock_break(const char *base, size_t base_len, const char *prefix, redlock_break_fn cb,
              void *arg)
{
    struct redlock_break_op *op;
    char channel[REDLOCK_DERIVED_MAX], bchan[REDLOCK_DERIVED_MAX];
    size_t plen = strlen(prefix);
    const char *args[3] = { base, channel, bchan };
    size_t lens[3];

    if (base_len > REDLOCK_KEY_MAX || plen > REDLOCK_KEY_MAX) {
        return -1;
    }
    op = redlock_op_new(sizeof(*op), 0, arg);
    op->cb = cb;
    op->wb.op = &op->b;
    op->wb.done = redlock_break_written;
    op->wb.fence_key_len = redlock_derived(op->wb.fence_key, base, base_len,
                                           REDLOCK_FENCE_SUFFIX);
    lens[0] = base_len;
    lens[1] = redlock_derived(channel, base, base_len, REDLOCK_CHANNEL_SUFFIX);
    lens[2] = redlock_derived(bchan, prefix, plen, REDLOCK_BROKEN_SUFFIX);
    if (round_start(redlock_scripts.break_lock, 1, 3, args, lens, redlock_break_reply,
                    redlock_break_done, op) != 0) {
        xmalloc_fail("a BREAK's round");
    }
    return 0;
}

int
redlock_status(const char *base, size_t base_len, const char *token,
               redlock_status_fn cb, void *arg)
{
    struct redlock_status_op *op;
    const char *args[2] = { base, token != NULL ? token : "" };
    size_t lens[2] = { base_len, token != NULL ? UTIL_TOKEN_HEX : 0 };

    if (base_len > REDLOCK_KEY_MAX) {
        return -1;
    }
    op = redlock_op_new(sizeof(*op), sizeof(op->pttls[0]), arg);
    op->cb = cb;
    if (round_start(redlock_scripts.status, 1, 2, args, lens, redlock_status_reply,
                    redlock_status_done, op) != 0) {
        xmalloc_fail("a status round");
    }
    return 0;
}
