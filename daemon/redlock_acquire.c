/*
 * redlock_acquire.c: taking a record on a quorum of masters (Redis
 * distributed-locks page, "The Redlock algorithm"), a hand-over's swap
 * of the old holder's token for the next one's, the fencing counter's
 * raise and write-back, and the compare-and-delete release.
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

/*
 * The text of a release (or a hand-over's swap) that a quorum answered
 * without confirming: confirmed masters held the token (at says where),
 * and the masters that did not answer, named, may hold it still.
 */
static void
redlock_unconfirmed_error(struct redlock_verdict *res, struct round *r, size_t confirmed,
                          const char *at)
{
    size_t used = redlock_append(res->error, sizeof(res->error), 0, "%zu of %zu masters "
                                 "confirmed the token%s, and the ones that did not answer "
                                 "may hold it: ", confirmed, master_count(), at);

    round_describe_failures(r, res->error + used, sizeof(res->error) - used);
}

/* Read a grant {1, subscribers, branch} (branch an enum redlock_branch). */
static bool
redlock_grant_of(const struct master_reply *reply, int64_t *v, int64_t *subs,
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
    return *v == 1 && *subs >= 0
           && *branch >= REDLOCK_BRANCH_SET && *branch <= REDLOCK_BRANCH_OURS;
}

/* A master holds the name as another kind: {'kind', what}.  Copies what into out. */
static bool
redlock_kind_of(const struct master_reply *reply, char *out, size_t size)
{
    const struct master_reply *e0, *e1;
    size_t len;
    const char *str;

    if (master_reply_type(reply) != MASTER_REPLY_ARRAY || master_reply_elements(reply) != 2
        || master_reply_type(e0 = master_reply_element(reply, 0)) != MASTER_REPLY_STRING
        || master_reply_type(e1 = master_reply_element(reply, 1)) != MASTER_REPLY_STRING
        || strcmp(master_reply_str(e0, NULL), "kind") != 0) {
        return false;
    }
    str = master_reply_str(e1, &len);
    snprintf(out, size, "%.*s", (int)(len < size ? len : size - 1), str);
    return true;
}

/*
 * A holder's token as a 64-bit FNV-1a hash of its bytes, so that refusals
 * from several masters can be told apart by who made them.  Two tokens
 * with one hash would count as one holder: the waiter would wait for
 * that holder's ttl, as it did before refusals named anyone.
 */
uint64_t
redlock_token_id(const char *s, size_t len)
{
    uint64_t h = 14695981039346656037ULL;
    size_t i;

    for (i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/*
 * The most masters that one token refused on, among the nheld refusals;
 * *id (when not NULL) gets that token's redlock_token_id (0 when none).
 */
static size_t
redlock_top_holder(const struct redlock_acquire_op *op, uint64_t *id)
{
    size_t i, j, same, most = 0;

    if (id != NULL) {
        *id = 0;
    }
    for (i = 0; i < op->nheld; i++) {
        same = 0;
        for (j = 0; j < op->nheld; j++) {
            same += op->who[j] == op->who[i];
        }
        if (same > most) {
            most = same;
            if (id != NULL) {
                *id = op->who[i];
            }
        }
    }
    return most;
}

/* Whether e is the string word, byte for byte. */
static bool
redlock_reply_is(const struct master_reply *e, const char *word)
{
    size_t len, wlen = strlen(word);
    const char *str;

    if (master_reply_type(e) != MASTER_REPLY_STRING) {
        return false;
    }
    str = master_reply_str(e, &len);
    return len == wlen && memcmp(str, word, wlen) == 0;
}

/*
 * The rest of a permit's refusal, {.., .., held, shortest pttl,
 * index...}: note which permits this master holds, and whether it has
 * one free.  Returns NULL, or what is wrong with it (op unchanged).
 */
static const char *
redlock_permits_of(struct redlock_acquire_op *op, const struct master_reply *reply)
{
    size_t ne = master_reply_elements(reply), j;
    int64_t held, shortest, idx;

    if (ne < 4 || master_reply_type(master_reply_element(reply, 2)) != MASTER_REPLY_INTEGER
        || master_reply_type(master_reply_element(reply, 3)) != MASTER_REPLY_INTEGER) {
        return "the acquire script refused a permit without the count of permits held";
    }
    held = master_reply_integer(master_reply_element(reply, 2));
    shortest = master_reply_integer(master_reply_element(reply, 3));
    if (held < 0 || (size_t)held != ne - 4 || held > (int64_t)op->limit || shortest < -1) {
        return "the acquire script refused a permit with a wrong count of permits held";
    }
    for (j = 4; j < ne; j++) {
        const struct master_reply *e = master_reply_element(reply, j);

        if (master_reply_type(e) != MASTER_REPLY_INTEGER
            || (idx = master_reply_integer(e)) < 0 || idx >= (int64_t)op->limit) {
            return "the acquire script refused a permit naming a permit outside the limit";
        }
    }
    for (j = 4; j < ne; j++) {
        op->live[master_reply_integer(master_reply_element(reply, j))]++;
    }
    op->nlists++;
    if (held < (int64_t)op->limit) {
        op->nopen++;                        /* another permit is free here */
    } else {
        op->pttls[op->npttl++] = shortest;  /* full: until its first permit frees */
    }
    return NULL;
}

/*
 * The words after an exclusive refusal's {pttl, who}, at most one of each
 * (acquire.lua, acquire_set.lua): 'gate', this master closed our gate
 * (shared holders refused us); 'shared', shared holders refused us and
 * another's gate is there; 'claim', a set claimed names for us here.
 * Returns NULL, or what is wrong with them (op unchanged).
 */
static const char *
redlock_refusal_words(struct redlock_acquire_op *op, const struct master_reply *reply)
{
    size_t ne = master_reply_elements(reply), j;
    bool gate = false, shared = false, claim = false;

    if (ne > 5) {
        return "the acquire script refused with unexpected elements";
    }
    for (j = 2; j < ne; j++) {
        const struct master_reply *e = master_reply_element(reply, j);
        bool *seen = redlock_reply_is(e, "gate") ? &gate : redlock_reply_is(e, "shared")
                     ? &shared : redlock_reply_is(e, "claim") ? &claim : NULL;

        if (seen == NULL || *seen || (gate && shared)) {
            return "the acquire script refused with unexpected elements";
        }
        *seen = true;
    }
    op->gated = op->gated || gate;
    op->readers = op->readers || gate || shared;
    op->claimed = op->claimed || claim;
    return NULL;
}

/*
 * A refusal (see the acquire script): {pttl, who}, or for an exclusive
 * request kept out by shared holders {left, who}, {left, who, 'gate'} or
 * {left, who, 'shared'} (a waiting one: the gate closed for it, or another's),
 * or for a permit {pttl, who, held, shortest pttl, index...}.  Notes it
 * in op.  Returns NULL, or what is wrong with the answer (op unchanged):
 * a master whose refusal cannot be read is a failed master, never a
 * holder.
 */
static const char *
redlock_refusal_of(struct redlock_acquire_op *op, const struct master_reply *reply)
{
    const struct master_reply *e0, *e1;
    size_t ne = master_reply_elements(reply), who_len;
    const char *who, *why;
    int64_t pttl;

    if (master_reply_type(reply) != MASTER_REPLY_ARRAY || ne < 1
        || master_reply_type(e0 = master_reply_element(reply, 0)) != MASTER_REPLY_INTEGER) {
        return "unexpected answer to the acquire script";
    }
    if ((pttl = master_reply_integer(e0)) < -1) {
        return "the acquire script refused with a pttl below -1";
    }
    if (ne < 2 || master_reply_type(e1 = master_reply_element(reply, 1)) != MASTER_REPLY_STRING) {
        return "unexpected answer to the acquire script (neither a grant nor a refusal "
               "that names the holder's token)";
    }
    who = master_reply_str(e1, &who_len);
    if (op->kind == REDLOCK_PERMIT) {
        if ((why = redlock_permits_of(op, reply)) != NULL) {
            return why;
        }
    } else if (op->kind == REDLOCK_EXCLUSIVE && ne > 2) {
        if ((why = redlock_refusal_words(op, reply)) != NULL) {
            return why;
        }
    } else if (ne != 2) {
        return "the acquire script refused with unexpected elements";
    }
    if (op->kind != REDLOCK_PERMIT) {
        op->pttls[op->npttl++] = pttl;
    }
    op->who[op->nheld++] = redlock_token_id(who, who_len);
    if (who_len > sizeof(REDLOCK_DELAY_MARK) - 1
        && memcmp(who, REDLOCK_DELAY_MARK, sizeof(REDLOCK_DELAY_MARK) - 1) == 0) {
        op->delay_id = op->who[op->nheld - 1];  /* a lock-delay, not a holder */
    }
    if (who_len > sizeof(REDLOCK_CLAIM_MARK) - 1
        && memcmp(who, REDLOCK_CLAIM_MARK, sizeof(REDLOCK_CLAIM_MARK) - 1) == 0) {
        op->claim_id = op->who[op->nheld - 1];  /* a waiting set's claim, not a holder */
    }
    return NULL;
}

static enum round_verdict
redlock_acquire_reply(struct round *r, size_t i, const struct master_reply *reply,
                      void *arg)
{
    struct redlock_acquire_op *op = arg;
    size_t n = master_count(), q = redlock_quorum(n);
    int64_t v, subs, branch;
    char what[sizeof(op->kind_text)];
    const char *why;

    op->seen++;
    if (redlock_grant_of(reply, &v, &subs, &branch)) {
        op->b.yes++;
        if (branch == REDLOCK_BRANCH_SWAPPED) {
            op->swapped++;
        }
        if (subs > op->subscribers) {
            op->subscribers = subs;
        }
    } else if (redlock_kind_of(reply, what, sizeof(what))) {
        if (op->nkind++ == 0) {
            memcpy(op->kind_text, what, sizeof(what));
        }
    } else if (master_reply_type(reply) == MASTER_REPLY_ERROR) {
        round_fail(r, i, master_reply_str(reply, NULL));
        log_warn("master %s: acquire script: %s", master_name(master_at(i)),
                 master_reply_str(reply, NULL));
        return ROUND_CONTINUE;
    } else if ((why = redlock_refusal_of(op, reply)) != NULL) {
        round_fail(r, i, why);
        log_warn("master %s: %s (answer type %d, %zu elements)",
                 master_name(master_at(i)), why, (int)master_reply_type(reply),
                 master_reply_elements(reply));
        return ROUND_CONTINUE;
    }
    /*
     * Decided: granted (for a hand-over, once a quorum swapped the old
     * token, so the releaser learns whether its lease was still there;
     * else at the end of the round), or so many refused that no quorum
     * is possible and the answers still due cannot change whether one
     * token refused on a quorum (res->split): it already did, or it
     * could not even if every one of them named it.  Answers that
     * failed in the round never reach us and count as due, so such a
     * round waits for the round's own end at most.
     */
    if (op->b.yes >= q && (!op->handover || op->swapped >= q)) {
        return ROUND_DECIDED;
    }
    if (op->nheld + op->nkind > n - q) {
        size_t top = redlock_top_holder(op, NULL);

        if (top >= q || top + (n - op->seen) < q) {
            return ROUND_DECIDED;
        }
    }
    return ROUND_CONTINUE;
}

/*
 * A master took the write-back: 1, it confirmed (a grant's record still
 * holds its token there; a BREAK's write-back has no record); 0, the
 * grant's record is gone there (fence.lua).
 */
static enum round_verdict
redlock_fence_reply(struct round *r, size_t i, const struct master_reply *reply, void *arg)
{
    struct redlock_op *op = ((struct redlock_fence_wb *)arg)->op;
    size_t n = master_count(), q = redlock_quorum(n);
    long long v;

    if (master_reply_type(reply) != MASTER_REPLY_INTEGER
        || ((v = master_reply_integer(reply)) != 0 && v != 1)) {
        round_fail(r, i, master_reply_type(reply) == MASTER_REPLY_ERROR
                         ? master_reply_str(reply, NULL)
                         : "unexpected answer to the fence script");
        return ROUND_CONTINUE;
    }
    if (v == 0) {
        round_fail(r, i, "the grant's record is gone there");
        op->no++;
        return op->no > n - q ? ROUND_DECIDED : ROUND_CONTINUE;
    }
    return ++op->yes >= q ? ROUND_DECIDED : ROUND_CONTINUE;
}

/*
 * "A reply saying OK is true when it is sent": a grant must still have
 * validity left when it is reported; a fenced one a round deadline of
 * it (see redlock_acquire in redlock.h).  Otherwise it is LATE.
 */
static void
redlock_check_left(struct redlock_acquire_result *res)
{
    int64_t now = util_now_us(), min_left = res->fence > 0 ? round_timeout_us() : 1000;

    if (res->v.outcome == REDLOCK_GRANTED && res->validity_end_us <= now + min_left) {
        res->v.outcome = REDLOCK_LATE;
    }
    /* A fenced grant is told within its span, or not at all (redlock_fence_span_us). */
    if (res->v.outcome == REDLOCK_GRANTED && res->fence > 0
        && now - res->v.start_us >= redlock_fence_span_us()) {
        res->v.outcome = REDLOCK_LATE;
    }
}

int64_t
redlock_fence_span_us(void)
{
    return REDLOCK_FENCE_ROUNDS * round_timeout_us();
}

/* The end of an acquire: the caller's callback, then its state is freed. */
static void
redlock_acquire_end(struct redlock_acquire_op *op)
{
    op->cb(&op->res, op->b.arg);
    free(op->live);
    free(op->wb);
    free(op);
}

void
redlock_fence_error(const struct redlock_fence_wb *wb, struct round *r,
                    struct redlock_verdict *v)
{
    size_t n = master_count(), q = redlock_quorum(n);
    int used;

    v->outcome = REDLOCK_NOQUORUM;
    used = snprintf(v->error, sizeof(v->error),
                    "fence write-back: %zu of %zu masters confirmed%s, quorum is %zu: ",
                    wb->op->yes, n, wb->record ? " the grant's record" : "", q);
    round_describe_failures(r, v->error + used, sizeof(v->error) - (size_t)used);
}

/*
 * A grant's write-back ended: the grant stands only if a majority has
 * the fence and still holds its record as it took it.
 */
static void
redlock_acquire_written(struct redlock_fence_wb *wb, struct round *r)
{
    struct redlock_acquire_op *op = (struct redlock_acquire_op *)(void *)wb->op;

    if (op->b.yes >= redlock_quorum(master_count())) {
        op->res.fence = wb->fence;
        redlock_check_left(&op->res);
    } else {
        redlock_fence_error(wb, r, &op->res.v);
    }
    redlock_acquire_end(op);
}

/* The write-back's round ended. */
static void
redlock_fence_done(struct round *r, void *arg)
{
    struct redlock_fence_wb *wb = arg;

    wb->done(wb, r);
}

/*
 * Write the largest counter seen back to every master, set-if-greater,
 * before the grant is reported: any later grant's quorum intersects the
 * majority that confirms this, so it counts from above this value.  A
 * grant's write-back (op->keys) also asks each master whether the
 * grant's record still holds its token, in the same script call: a
 * grant that a BREAK, an expiry or another holder ended between its
 * raise and its write-back is not confirmed there, and without a
 * majority of confirmations it is not reported (PROTOCOL.md section 10).
 */
void
redlock_fence_write_back(struct redlock_fence_wb *wb)
{
    char value[24];
    const char *args[7];
    size_t lens[7], nkeys = 1, n;

    wb->op->yes = 0;
    wb->op->no = 0;
    args[0] = wb->fence_key;
    lens[0] = wb->fence_key_len;
    if (wb->record) {
        args[nkeys] = wb->keys.rec;
        lens[nkeys++] = wb->keys.rec_len;
        if (wb->label_key_len > 0) {
            args[nkeys] = wb->label_key;
            lens[nkeys++] = wb->label_key_len;
        }
    }
    n = nkeys;
    args[n] = value;
    lens[n++] = (size_t)snprintf(value, sizeof(value), "%lld", (long long)wb->fence);
    if (wb->record) {
        args[n] = wb->token;
        lens[n++] = UTIL_TOKEN_HEX;
        args[n] = wb->keys.kind;
        lens[n++] = 1;
        if (wb->label_key_len > 0) {
            args[n] = wb->base;
            lens[n++] = wb->base_len;
        }
    }
    if (round_start(redlock_scripts.fence, nkeys, n, args, lens, redlock_fence_reply,
                    redlock_fence_done, wb) != 0) {
        xmalloc_fail("a fence write-back");
    }
}

/* A master raised the counter (its new value) or had lost the grant's record (0). */
static enum round_verdict
redlock_raise_reply(struct round *r, size_t i, const struct master_reply *reply, void *arg)
{
    struct redlock_acquire_op *op = arg;
    size_t n = master_count(), q = redlock_quorum(n);
    long long v;

    if (master_reply_type(reply) != MASTER_REPLY_INTEGER
        || (v = master_reply_integer(reply)) < 0) {
        /* An error names what is wrong there (a counter that is not an integer). */
        round_fail(r, i, master_reply_type(reply) == MASTER_REPLY_ERROR
                         ? master_reply_str(reply, NULL)
                         : "unexpected answer to the raise script");
        return ROUND_CONTINUE;
    }
    if (v == 0) {
        round_fail(r, i, "the grant's record is gone there");
        op->b.no++;
    } else {
        op->b.yes++;
        if (v > op->wb->fence) {
            op->wb->fence = v;
        }
    }
    return op->b.yes >= q || op->b.no > n - q ? ROUND_DECIDED : ROUND_CONTINUE;
}

/* The raise ended: with a quorum, write its largest counter back. */
static void
redlock_raise_done(struct round *r, void *arg)
{
    struct redlock_acquire_op *op = arg;
    size_t n = master_count(), q = redlock_quorum(n);
    int used;

    if (op->b.yes >= q) {
        redlock_fence_write_back(op->wb);
        return;
    }
    op->res.v.outcome = REDLOCK_NOQUORUM;
    used = snprintf(op->res.v.error, sizeof(op->res.v.error),
                    "fence raise: %zu of %zu masters raised the counter where the grant "
                    "held, quorum is %zu: ", op->b.yes, n, q);
    round_describe_failures(r, op->res.v.error + used,
                            sizeof(op->res.v.error) - (size_t)used);
    redlock_acquire_end(op);
}

/*
 * A fenced grant was won: raise the counter on every master where the
 * record still holds the token, and take the largest value a quorum
 * answered.  The increments come after the decision, so they come after
 * every grant confirmed before this one was won (PROTOCOL.md section 10).
 */
static void
redlock_fence_raise(struct redlock_acquire_op *op)
{
    struct redlock_fence_wb *wb = op->wb;
    const char *args[6];
    size_t lens[6];

    op->b.yes = 0;
    op->b.no = 0;
    wb->fence = 0;
    args[0] = wb->fence_key;
    lens[0] = wb->fence_key_len;
    args[1] = wb->keys.rec;
    lens[1] = wb->keys.rec_len;
    args[2] = wb->token;
    lens[2] = UTIL_TOKEN_HEX;
    args[3] = wb->keys.kind;
    lens[3] = 1;
    args[4] = wb->keys.aux;
    lens[4] = wb->keys.aux_len;
    args[5] = REDLOCK_ANNOUNCE;
    lens[5] = sizeof(REDLOCK_ANNOUNCE) - 1;
    if (round_start(redlock_scripts.raise, 2, 6, args, lens, redlock_raise_reply, redlock_raise_done,
                    op) != 0) {
        xmalloc_fail("a fence raise");
    }
}

/*
 * A permit worth trying after ours was refused: the one the fewest
 * answering masters hold, from the next after ours on (so that
 * contenders spread), or -1 when every master that listed its permits
 * holds every one.
 */
static int
redlock_free_slot(const struct redlock_acquire_op *op)
{
    unsigned j, s, best = 0;
    uint16_t fewest = UINT16_MAX;

    if (op->kind != REDLOCK_PERMIT || op->nlists == 0) {
        return -1;
    }
    for (j = 1; j <= op->limit; j++) {
        s = (op->slot + j) % op->limit;
        if (op->live[s] < fewest) {
            fewest = op->live[s];
            best = s;
        }
    }
    return fewest < op->nlists ? (int)best : -1;
}

static void
redlock_acquire_done(struct round *r, void *arg)
{
    struct redlock_acquire_op *op = arg;
    struct redlock_acquire_result *res = &op->res;
    size_t n = master_count(), q = redlock_quorum(n), i;
    int64_t start = round_start_us(r), validity;

    memset(res, 0, sizeof(*res));
    redlock_result_begin(&res->v, r);
    for (i = 0; i < n; i++) {
        res->failed += round_slot(r, i) == ROUND_FAILED;   /* for a hand-over's clean-up */
    }
    res->unanswered = round_unanswered(r);
    res->v.confirmed = op->b.yes;
    res->swapped = op->swapped;
    res->subscribers = (size_t)op->subscribers;
    validity = redlock_validity_us(op->ttl_ms, round_end_us(r) - start,
                                   redlock_drift_factor);
    if (op->b.yes >= q && validity > 0) {
        res->v.outcome = REDLOCK_GRANTED;
        res->validity_end_us = start + op->ttl_ms * 1000
                               - redlock_drift_us(op->ttl_ms, redlock_drift_factor);
    } else if (op->nkind > n - q) {
        /* So many hold it as another kind that no quorum of this kind is possible. */
        res->v.outcome = REDLOCK_KIND;
        snprintf(res->v.error, sizeof(res->v.error), "%s", op->kind_text);
    } else if (op->nheld + op->nkind > n - q || res->v.answered >= q) {
        /* A few masters of another kind (left over, or a minority) only refuse. */
        res->v.outcome = REDLOCK_BUSY;
        res->busy_ttl_ms = redlock_holder_ttl(op->pttls, op->npttl, op->b.yes + op->nopen, q);
        /*
         * Split unless one token refused on a quorum: masters that
         * granted us, did not answer, or hold another kind (a minority)
         * count for no token.
         */
        res->split = redlock_top_holder(op, &res->holder_id) < q;
        if (res->split) {
            res->holder_id = 0;
        }
        res->delayed = !res->split && op->delay_id != 0 && res->holder_id == op->delay_id;
        res->claim_held = !res->split && op->claim_id != 0 && res->holder_id == op->claim_id;
    } else {
        res->v.outcome = REDLOCK_NOQUORUM;
    }
    res->free_slot = redlock_free_slot(op);
    res->gated = op->gated;
    res->readers = op->readers;
    res->claimed = op->claimed;
    if (res->v.answered < q && res->v.outcome != REDLOCK_KIND) {
        redlock_fill_error(&res->v, r);     /* also for a hand-over's releaser */
    }
    if (op->handover) {
        /* The releaser's verdict: only masters that swapped held its token. */
        res->released = redlock_release_verdict(res->v.answered, op->swapped, n);
        if (res->released == REDLOCK_NOQUORUM && res->v.answered >= q
            && res->v.outcome != REDLOCK_KIND) {
            redlock_unconfirmed_error(&res->v, r, op->swapped, " at the hand-over");
        }
    }
    if (res->v.outcome == REDLOCK_GRANTED && op->wb != NULL) {
        redlock_fence_raise(op);
        return;
    }
    redlock_check_left(res);
    redlock_acquire_end(op);
}

/*
 * A fenced acquire's raise and write-back: the counter's key (a permit
 * counts on its own counter, the other kinds on the name's), the
 * record's keys and token, and with a label its key and the name's.
 */
static struct redlock_fence_wb *
redlock_acquire_wb(struct redlock_acquire_op *op, const struct redlock_rec *rec,
                   const struct redlock_keys *k, const char *token, bool labelled)
{
    struct redlock_fence_wb *wb = xcalloc(1, sizeof(*wb));
    const char *on = rec->kind == REDLOCK_PERMIT ? k->rec : rec->base;
    size_t on_len = rec->kind == REDLOCK_PERMIT ? k->rec_len : rec->base_len;

    wb->op = &op->b;
    wb->done = redlock_acquire_written;
    wb->record = true;
    wb->fence_key_len = redlock_derived(wb->fence_key, on, on_len, REDLOCK_FENCE_SUFFIX);
    wb->keys = *k;
    memcpy(wb->token, token, UTIL_TOKEN_HEX);
    if (labelled) {
        /* The write-back puts the fence into the label as well. */
        wb->label_key_len = redlock_derived(wb->label_key, k->rec, k->rec_len,
                                            REDLOCK_LABEL_SUFFIX);
        memcpy(wb->label_key + wb->label_key_len, token, UTIL_TOKEN_HEX);
        wb->label_key_len += UTIL_TOKEN_HEX;
        memcpy(wb->base, rec->base, rec->base_len);
        wb->base_len = rec->base_len;
    }
    return wb;
}

int
redlock_acquire(const struct redlock_rec *rec, const char *token, int64_t ttl_ms,
                const char *old_token, unsigned flags, const char *gate,
                const char *label, redlock_acquire_fn cb, void *arg)
{
    struct redlock_acquire_op *op;
    struct redlock_keys k;
    char ttl[24], delay[24];
    const char *args[14];
    size_t lens[14], nkeys, n = 0, label_len = label != NULL ? strlen(label) : 0;

    if (rec->kind == REDLOCK_ANY || redlock_keys_of(rec, &k) != 0
        || (rec->kind == REDLOCK_PERMIT && (rec->limit == 0 || rec->limit > REDLOCK_LIMIT_MAX
                                            || rec->slot >= rec->limit))) {
        return -1;
    }
    op = redlock_op_new(sizeof(*op), sizeof(op->pttls[0]) + sizeof(op->who[0]), arg);
    op->who = (uint64_t *)(op->pttls + master_count());
    op->cb = cb;
    op->ttl_ms = ttl_ms;
    op->handover = old_token != NULL && (flags & REDLOCK_ACQUIRE_ADOPT) == 0;
    op->kind = rec->kind;
    op->slot = rec->slot;
    op->limit = rec->limit;
    if (rec->kind == REDLOCK_PERMIT) {
        op->live = xcalloc(rec->limit, sizeof(*op->live));
    }
    /* KEYS: the name, the record, then the counter when fenced. */
    args[n] = rec->base;
    lens[n++] = rec->base_len;
    args[n] = k.rec;
    lens[n++] = k.rec_len;
    if ((flags & REDLOCK_ACQUIRE_FENCE) != 0) {
        op->wb = redlock_acquire_wb(op, rec, &k, token, label_len > 0);
        args[n] = op->wb->fence_key;
        lens[n++] = op->wb->fence_key_len;
    }
    nkeys = n;
    /* ARGV: token, ttl, peers, old token, kind, limit, wait, label, gate[, delay]. */
    args[n] = token;
    lens[n++] = UTIL_TOKEN_HEX;
    args[n] = ttl;
    lens[n++] = (size_t)snprintf(ttl, sizeof(ttl), "%lld",
                                 (long long)redlock_record_ms(rec, ttl_ms));
    args[n] = (flags & REDLOCK_ACQUIRE_PEERS) != 0 ? "1" : "";
    lens[n++] = (flags & REDLOCK_ACQUIRE_PEERS) != 0 ? 1 : 0;
    args[n] = old_token != NULL ? old_token : "";
    lens[n++] = old_token != NULL ? UTIL_TOKEN_HEX : 0;
    args[n] = k.kind;
    lens[n++] = 1;
    args[n] = k.limit;
    lens[n++] = k.limit_len;
    args[n] = (flags & REDLOCK_ACQUIRE_GATED) != 0 ? "2"
              : (flags & REDLOCK_ACQUIRE_WAIT) != 0 ? "1" : "0";
    lens[n++] = 1;
    args[n] = label != NULL ? label : "";
    lens[n++] = label_len;
    /* A first try's gate is its token: nothing to send then. */
    gate = gate != NULL && rec->kind == REDLOCK_EXCLUSIVE && (flags & REDLOCK_ACQUIRE_WAIT) != 0
           && memcmp(gate, token, UTIL_TOKEN_HEX) != 0 ? gate : "";
    args[n] = gate;
    lens[n++] = strlen(gate);
    if (rec->kind == REDLOCK_EXCLUSIVE
        && (rec->delay_ms > 0 || (flags & REDLOCK_ACQUIRE_TAKE_CLAIM) != 0)) {
        /* A hold with a lock-delay keeps it on the masters: the delay's ms. */
        args[n] = delay;
        lens[n++] = rec->delay_ms > 0 ? (size_t)snprintf(delay, sizeof(delay), "%lld",
                                                         (long long)rec->delay_ms) : 0;
    }
    if (rec->kind == REDLOCK_EXCLUSIVE && (flags & REDLOCK_ACQUIRE_TAKE_CLAIM) != 0) {
        args[n] = "1";
        lens[n++] = 1;
    }
    if (round_start(redlock_scripts.acquire, nkeys, n, args, lens, redlock_acquire_reply,
                    redlock_acquire_done, op) != 0) {
        xmalloc_fail("an acquire's round");
    }
    return 0;
}

int
redlock_fence_grant(const struct redlock_rec *rec, const char *token,
                    const struct redlock_acquire_result *won, redlock_acquire_fn cb, void *arg)
{
    struct redlock_acquire_op *op;
    struct redlock_keys k;

    if (rec->kind != REDLOCK_EXCLUSIVE || redlock_keys_of(rec, &k) != 0
        || won->v.outcome != REDLOCK_GRANTED) {
        return -1;
    }
    op = redlock_op_new(sizeof(*op), sizeof(op->pttls[0]) + sizeof(op->who[0]), arg);
    op->who = (uint64_t *)(op->pttls + master_count());
    op->cb = cb;
    op->kind = REDLOCK_EXCLUSIVE;
    op->res = *won;
    op->wb = redlock_acquire_wb(op, rec, &k, token, rec->labelled);
    redlock_fence_raise(op);
    return 0;
}

int
redlock_acquire_set(const char *const *bases, const size_t *base_lens, size_t n,
                    const char *token, int64_t ttl_ms, int64_t delay_ms, const char *old_token,
                    unsigned flags, const char *label, const char *id, redlock_acquire_fn cb,
                    void *arg)
{
    struct redlock_acquire_op *op;
    const char *args[REDLOCK_SET_MAX + 8];
    size_t lens[REDLOCK_SET_MAX + 8], i, na;
    char ttl[24], delay[24];

    if (n < 2 || n > REDLOCK_SET_MAX) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        if (base_lens[i] == 0 || base_lens[i] > REDLOCK_KEY_MAX) {
            return -1;
        }
        args[i] = bases[i];
        lens[i] = base_lens[i];
    }
    op = redlock_op_new(sizeof(*op), sizeof(op->pttls[0]) + sizeof(op->who[0]), arg);
    op->who = (uint64_t *)(op->pttls + master_count());
    op->cb = cb;
    op->ttl_ms = ttl_ms;
    op->kind = REDLOCK_EXCLUSIVE;
    /* ARGV: token, ttl, wait, old token, label, the labels' fence, delay, the set's id. */
    na = n;
    args[na] = token;
    lens[na++] = UTIL_TOKEN_HEX;
    args[na] = ttl;
    /* A hold with a lock-delay writes its records for ttl + delay (redlock_record_ms). */
    lens[na++] = (size_t)snprintf(ttl, sizeof(ttl), "%lld",
                                  (long long)(ttl_ms + (delay_ms > 0 ? delay_ms : 0)));
    args[na] = (flags & REDLOCK_ACQUIRE_GATED) != 0 ? "2"
               : (flags & REDLOCK_ACQUIRE_WAIT) != 0 ? "1" : "0";
    lens[na++] = 1;
    old_token = (flags & REDLOCK_ACQUIRE_ADOPT) != 0 ? old_token : NULL;
    args[na] = old_token != NULL ? old_token : "";
    lens[na++] = old_token != NULL ? UTIL_TOKEN_HEX : 0;
    args[na] = label != NULL ? label : "";
    lens[na++] = label != NULL ? strlen(label) : 0;
    args[na] = (flags & REDLOCK_ACQUIRE_FENCE) != 0 ? "-" : "0";
    lens[na++] = 1;
    args[na] = delay;
    lens[na++] = delay_ms > 0 ? (size_t)snprintf(delay, sizeof(delay), "%lld",
                                                 (long long)delay_ms) : 0;
    /* The set's id names its claims; a first try's is its token: nothing to send then. */
    id = id != NULL && memcmp(id, token, UTIL_TOKEN_HEX) != 0 ? id : "";
    args[na] = id;
    lens[na++] = strlen(id);
    if (round_start(redlock_scripts.acquire_set, n, na, args, lens, redlock_acquire_reply,
                    redlock_acquire_done, op) != 0) {
        xmalloc_fail("a set acquire's round");
    }
    return 0;
}

int
redlock_unclaim(const char *const *bases, const size_t *base_lens, size_t n, const char *id)
{
    const char *args[REDLOCK_SET_MAX + 2];
    size_t lens[REDLOCK_SET_MAX + 2], i;
    char claim[sizeof(REDLOCK_CLAIM_MARK) + UTIL_TOKEN_HEX];

    if (n > REDLOCK_SET_MAX) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        args[i] = bases[i];
        lens[i] = base_lens[i];
    }
    args[n] = claim;
    lens[n] = (size_t)snprintf(claim, sizeof(claim), "%s%.*s", REDLOCK_CLAIM_MARK,
                               UTIL_TOKEN_HEX, id);
    args[n + 1] = REDLOCK_ANNOUNCE;
    lens[n + 1] = sizeof(REDLOCK_ANNOUNCE) - 1;
    if (round_start(redlock_scripts.unclaim, n, n + 2, args, lens, NULL, NULL, NULL) != 0) {
        xmalloc_fail("an unclaim's round");
    }
    return 0;
}

static enum round_verdict
redlock_release_reply(struct round *r, size_t i, const struct master_reply *reply,
                      void *arg)
{
    struct redlock_release_op *op = arg;

    size_t n = master_count(), q = redlock_quorum(n);

    if (master_reply_type(reply) != MASTER_REPLY_INTEGER) {
        round_fail(r, i, "unexpected answer to the release script");
    } else if (op == NULL) {
        return ROUND_CONTINUE;
    } else if (master_reply_integer(reply) == 1) {
        op->b.yes++;
    } else {
        op->b.no++;
    }
    /*
     * Decided once the verdict cannot change (redlock_release_verdict):
     * a quorum confirmed (RELEASED), or so many found no key that no
     * quorum can (GONE).  The request reached every master already; the
     * later answers are only not waited for.
     */
    return op != NULL && (op->b.yes >= q || op->b.no > n - q) ? ROUND_DECIDED : ROUND_CONTINUE;
}

enum redlock_outcome
redlock_release_verdict(size_t answered, size_t confirmed, size_t nmasters)
{
    size_t q = redlock_quorum(nmasters);

    if (confirmed >= q) {
        return REDLOCK_RELEASED;
    }
    /* Gone only if not even every silent master holding it could make a quorum. */
    return confirmed + (nmasters - (answered < nmasters ? answered : nmasters)) < q
           ? REDLOCK_GONE : REDLOCK_NOQUORUM;
}

static void
redlock_release_done(struct round *r, void *arg)
{
    struct redlock_release_op *op = arg;
    struct redlock_release_result res;

    redlock_result_begin(&res.v, r);
    res.v.confirmed = op->b.yes;
    res.v.outcome = redlock_release_verdict(res.v.answered, res.v.confirmed, master_count());
    if (res.v.outcome == REDLOCK_NOQUORUM && res.v.answered >= redlock_quorum(master_count())) {
        redlock_unconfirmed_error(&res.v, r, res.v.confirmed, "");
    } else if (res.v.outcome == REDLOCK_NOQUORUM) {
        redlock_fill_error(&res.v, r);
    }
    op->cb(&res, op->b.arg);
    free(op);
}

/* A release, and with delay_ms > 0 the lock-delay it starts (ARGV[6]). */
static int
redlock_release_with(const struct redlock_rec *rec, const char *token, int64_t delay_ms,
                     redlock_release_fn cb, void *arg)
{
    struct redlock_release_op *op = NULL;
    struct redlock_keys k;
    char delay[24];
    const char *args[7] = { k.rec, token, REDLOCK_ANNOUNCE, k.kind, k.aux, k.label, delay };
    size_t lens[7] = { 0, UTIL_TOKEN_HEX, sizeof(REDLOCK_ANNOUNCE) - 1, 1, 0, 1, 0 };

    if (redlock_keys_of(rec, &k) != 0) {
        return -1;
    }
    lens[0] = k.rec_len;
    lens[4] = k.aux_len;
    if (delay_ms > 0) {
        lens[6] = (size_t)snprintf(delay, sizeof(delay), "%lld", (long long)delay_ms);
    }
    if (cb != NULL) {
        op = redlock_op_new(sizeof(*op), 0, arg);
        op->cb = cb;
    }
    /* Sent to every master; answered once a verdict is sure (redlock_release_reply). */
    if (round_start(redlock_scripts.release, 1, delay_ms > 0 ? 7 : 6, args, lens,
                    redlock_release_reply, cb != NULL ? redlock_release_done : NULL, op) != 0) {
        xmalloc_fail("a release's round");
    }
    return 0;
}

int
redlock_release(const struct redlock_rec *rec, const char *token, redlock_release_fn cb,
                void *arg)
{
    return redlock_release_with(rec, token, 0, cb, arg);
}

int
redlock_release_delayed(const struct redlock_rec *rec, const char *token, int64_t delay_ms,
                        redlock_release_fn cb, void *arg)
{
    if (rec->kind != REDLOCK_EXCLUSIVE) {
        return -1;
    }
    return redlock_release_with(rec, token, delay_ms > 0 ? delay_ms : 1, cb, arg);
}

int
redlock_ungate(const char *base, size_t base_len, const char *token)
{
    char gate[REDLOCK_DERIVED_MAX], channel[REDLOCK_DERIVED_MAX];
    const char *args[3] = { gate, token, channel };
    size_t lens[3] = { 0, UTIL_TOKEN_HEX, 0 };

    if (base_len > REDLOCK_KEY_MAX) {
        return -1;
    }
    lens[0] = redlock_derived(gate, base, base_len, REDLOCK_GATE_SUFFIX);
    lens[2] = redlock_derived(channel, base, base_len, REDLOCK_CHANNEL_SUFFIX);
    if (round_start(redlock_scripts.ungate, 1, 3, args, lens, NULL, NULL, NULL) != 0) {
        xmalloc_fail("an ungate's round");
    }
    return 0;
}
