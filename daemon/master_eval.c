/*
 * master_eval.c: the requests sent to the masters over their command
 * links: the scripts' registry and the clock wrapper, EVALSHA with one
 * NOSCRIPT retry as EVAL, the batch of one loop iteration sent as one
 * call, and the replies.  See daemon/master.h; the links themselves
 * are daemon/master.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "conf/conf.h"
#include "daemon/ctx.h"
#include "daemon/flush.h"
#include "daemon/health.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/master_link.h"
#include "daemon/redisev.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"

#define MASTER_BATCH_MAX        128     /* requests in one batch call, at most */
#define MASTER_ARGV_STACK       16

/*
 * A script registered with its clock is sent wrapped so that its answer
 * carries the master's clock, read just before the script's own body
 * runs: {us, answer} (TIME in microseconds, an integer: a Lua number
 * holds it exactly; then the body's answer; a nil answer ends the
 * table, so only one element comes back).  master_clock_read() takes
 * the wrapper off and checks the clock: callers see the body's answer
 * alone.  The body runs as a function, so its top-level return
 * statements are unchanged, and it may read the time as rl_clock_us
 * (master.h, master_script).  Without its clock, a script only gets
 * rl_clock_us false, and its answer comes back as it is.
 */
#define MASTER_CLOCK_HEAD   "local rl_clock_us = redis.call('TIME')\n" \
                            "rl_clock_us = tonumber(rl_clock_us[1]) * 1000000" \
                            " + tonumber(rl_clock_us[2])\n" \
                            "local rl_answer = (function()\n"
#define MASTER_CLOCK_TAIL   "\nend)()\n" \
                            "return {rl_clock_us, rl_answer}\n"
#define MASTER_NOCLOCK_HEAD "local rl_clock_us = false\n"

static char *script_text[MASTER_SCRIPTS_MAX];  /* wrapped (MASTER_CLOCK_HEAD/_TAIL);
                                                  live until exit */
static bool        script_clock[MASTER_SCRIPTS_MAX];   /* its answers carry the clock */
static const char *script_op[MASTER_SCRIPTS_MAX];      /* its operation in the batch
                                                          script, or NULL */
static enum master_class script_class[MASTER_SCRIPTS_MAX]; /* its queue's class */
static int         script_batch = -1;                  /* the batch script's id */

/*
 * The batch formatted last (redisFormatCommandArgv's output, freed with
 * redisFreeCommand), kept so that the next master asked the very same
 * requests, as every master usually is in one loop iteration, is sent
 * these bytes instead of a new formatting (master_batch_write).  Owned
 * here; NULL when none.
 */
static char       *batch_cmd;
static size_t      batch_cmd_len;                      /* bytes in batch_cmd */
static int         nscripts;

static void master_batch_cb(struct redisev *ac, void *r, void *privdata);
static void master_reply_cb(struct redisev *ac, void *r, void *privdata);
static void master_queue_write(struct master *m, bool in_loop);
static void master_queue_add(struct master *m, struct master_req *req);

int
master_script(const char *text, bool clock)
{
    const char *head_text = clock ? MASTER_CLOCK_HEAD : MASTER_NOCLOCK_HEAD;
    const char *tail_text = clock ? MASTER_CLOCK_TAIL : "";
    size_t head = strlen(head_text), len = strlen(text), tail = strlen(tail_text);
    char *wrapped;

    if (nscripts == MASTER_SCRIPTS_MAX) {
        return -1;
    }
    wrapped = xmalloc(head + len + tail + 1);
    memcpy(wrapped, head_text, head);
    memcpy(wrapped + head, text, len);
    memcpy(wrapped + head + len, tail_text, tail + 1);
    if (master_load(wrapped) != nscripts) {
        free(wrapped);
        return -1;
    }
    script_text[nscripts] = wrapped;
    script_clock[nscripts] = clock;
    script_class[nscripts] = MASTER_CLASS_LOCK;
    return nscripts++;
}

int
master_script_class(int script, enum master_class cls)
{
    if (script < 0 || script >= nscripts || (int)cls < 0 || cls >= MASTER_CLASSES) {
        return -1;
    }
    script_class[script] = cls;
    return 0;
}

int
master_script_batch(int script, int batch, const char *op)
{
    if (script < 0 || script >= nscripts || batch < 0 || batch >= nscripts
        || !script_clock[batch] || op == NULL) {
        return -1;
    }
    script_batch = batch;
    script_op[script] = op;
    return 0;
}

/* shared holds an EVALSHA that m can be sent as it is. */
static bool
master_shared_fits(const struct master_shared *shared, const struct master *m, int script)
{
    return shared != NULL && shared->cmd != NULL && strcmp(shared->sha, m->sha[script]) == 0;
}

/*
 * Send req as EVALSHA, or as EVAL when use_eval.  shared, when not NULL
 * and use_eval is false, holds (or receives) the EVALSHA formatted once
 * for every master.  Returns REDIS_OK/ERR.
 */
static int
master_send(struct master *m, struct master_req *req, bool use_eval,
            struct master_shared *shared)
{
    const char *stack_argv[MASTER_ARGV_STACK];
    size_t stack_lens[MASTER_ARGV_STACK];
    const char **argv = stack_argv;
    size_t *lens = stack_lens;
    size_t argc = req->nargs + 3, i;
    char nkeys[24];
    int rc;

    if (use_eval) {
        shared = NULL;      /* the script's text, for this master alone */
    }
    if (master_shared_fits(shared, m, req->script)) {
        /* Formatted for an earlier master of the round: only copied. */
        return redisev_formatted(m->cmd.ac, master_reply_cb, req, shared->cmd,
                                          shared->len);
    }
    if (argc > MASTER_ARGV_STACK) {
        argv = xreallocarray(NULL, argc, sizeof(*argv));
        lens = xreallocarray(NULL, argc, sizeof(*lens));
    }
    argv[0] = use_eval ? "EVAL" : "EVALSHA";
    lens[0] = strlen(argv[0]);
    argv[1] = use_eval ? script_text[req->script] : m->sha[req->script];
    lens[1] = strlen(argv[1]);
    lens[2] = (size_t)snprintf(nkeys, sizeof(nkeys), "%zu", req->nkeys);
    argv[2] = nkeys;
    for (i = 0; i < req->nargs; i++) {
        argv[i + 3] = req->args[i];
        lens[i + 3] = req->lens[i];
    }
    if (shared != NULL && shared->cmd == NULL) {
        int len = redisFormatCommandArgv(&shared->cmd, (int)argc, argv, lens);

        if (len < 0) {
            xmalloc_fail("a script's command for the masters");
        }
        shared->len = (size_t)len;
        memcpy(shared->sha, m->sha[req->script], sizeof(shared->sha));
    }
    if (master_shared_fits(shared, m, req->script)) {
        rc = redisev_formatted(m->cmd.ac, master_reply_cb, req, shared->cmd,
                                        shared->len);
    } else {
        rc = redisev_command_argv(m->cmd.ac, master_reply_cb, req, (int)argc, argv, lens);
    }
    if (argv != stack_argv) {
        free(argv);
        free(lens);
    }
    return rc;
}

/*
 * A request on ac got no reply (the link was lost or dropped): why, in
 * why, and from now on the master is down when ac is its live link
 * (these callbacks run before the disconnect callback, so rounds started
 * in them see it down too).
 */
static void
master_request_lost(struct master *m, struct redisev *ac, char *why, size_t size)
{
    m->stats.errors++;
    if (m->cmd.ac != ac && m->cmd.why[0] != '\0') {
        /* We dropped the link (master_drop): its reason. */
        snprintf(why, size, "%s", m->cmd.why);
    } else {
        snprintf(why, size, "connection lost (%s)",
                 redisev_errstr(ac)[0] ? redisev_errstr(ac) : "closed");
    }
    if (m->cmd.ac == ac && m->cmd.state == MASTER_UP) {
        log_warn("master %s: down: %s", m->addr->spec, why);
        m->cmd.state = MASTER_DOWN;
        master_link_lost(&m->cmd);
        snprintf(m->cmd.why, sizeof(m->cmd.why), "%s", why);
    }
}

/*
 * A call on ac was answered (or lost) at now_us: on the live link it
 * frees room, so what waits in m's queue is written at the iteration's
 * end (and what waits when the link is lost is failed there).
 */
static void
master_answered(struct master *m, const struct redisev *ac, int64_t now_us)
{
    struct master_queue *q = &m->queue;

    if (m->cmd.ac == ac) {
        master_link_answered(&m->cmd, true, now_us);
    }
    if (q->n[MASTER_CLASS_RENEW] + q->n[MASTER_CLASS_LOCK] + q->n[MASTER_CLASS_READ] > 0) {
        flush_join(&q->fe);
    }
}

/*
 * reply says the master's script cache was flushed (NOSCRIPT) and the
 * request was not retried yet on its live link ac: mark it retried; the
 * caller sends the script's text once, within the same deadline.
 */
static bool
master_noscript(struct master *m, const struct redisev *ac, const redisReply *reply,
                bool *retried)
{
    if (reply->type != REDIS_REPLY_ERROR || *retried || m->cmd.ac != ac
        || strncmp(reply->str, "NOSCRIPT", 8) != 0) {
        return false;
    }
    *retried = true;
    log_debug("master %s: NOSCRIPT, retrying with EVAL", m->addr->spec);
    return true;
}

static void
master_reply_cb(struct redisev *ac, void *r, void *privdata)
{
    redisReply *reply = r;
    const redisReply *answer;
    struct master_req *req = privdata;
    struct master *m = req->m;
    int64_t now = util_now_us();
    char why[MASTER_WHY_MAX];

    master_answered(m, ac, now);
    if (reply == NULL) {
        master_request_lost(m, ac, why, sizeof(why));
        req->cb(m, NULL, why, req->arg);
        free(req);
        return;
    }
    m->stats.rtt_us = now - req->sent_us;
    if (master_noscript(m, ac, reply, &req->retried)
        && master_send(m, req, true, NULL) == REDIS_OK) {
        master_link_sent(&m->cmd);
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        m->stats.errors++;
        req->cb(m, (const struct master_reply *)reply, NULL, req->arg);
    } else if (!script_clock[req->script]) {
        req->cb(m, (const struct master_reply *)reply, NULL, req->arg);
    } else if ((answer = health_clock_read(m->index, reply, req->sent_us, now)) == NULL) {
        m->stats.errors++;
        req->cb(m, NULL, "answered without its clock (the script's wrapper is missing)",
                req->arg);
    } else {
        req->cb(m, (const struct master_reply *)answer, NULL, req->arg);
    }
    free(req);
}

/* v in decimal into out (room for 20 digits); returns the digits' count. */
static size_t
master_decimal(char *out, size_t v)
{
    char rev[24];
    size_t n = 0, i;

    do {
        rev[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    for (i = 0; i < n; i++) {
        out[i] = rev[n - 1 - i];
    }
    return n;
}

/* Whether the n bytes at *p are mark, v in decimal and CRLF; moves *p past them. */
static bool
master_resp_head(const char **p, const char *end, char mark, size_t v)
{
    char head[32];
    size_t n = 0;

    head[n++] = mark;
    n += master_decimal(head + n, v);
    head[n++] = '\r';
    head[n++] = '\n';
    if ((size_t)(end - *p) < n || memcmp(*p, head, n) != 0) {
        return false;
    }
    *p += n;
    return true;
}

/* Whether cmd (len bytes, as redisFormatCommandArgv made it) is argv exactly. */
static bool
master_resp_is(const char *cmd, size_t len, size_t argc, const char **argv,
               const size_t *lens)
{
    const char *p = cmd, *end = cmd + len;
    size_t i;

    if (!master_resp_head(&p, end, '*', argc)) {
        return false;
    }
    for (i = 0; i < argc; i++) {
        if (!master_resp_head(&p, end, '$', lens[i]) || (size_t)(end - p) < lens[i] + 2
            || memcmp(p, argv[i], lens[i]) != 0 || p[lens[i]] != '\r'
            || p[lens[i] + 1] != '\n') {
            return false;
        }
        p += lens[i] + 2;
    }
    return p == end;
}

/*
 * Send b: EVALSHA (or EVAL when use_eval) of the batch script, its KEYS
 * every request's keys in order, its ARGV per request the operation, how
 * many keys and arguments it has, and its arguments
 * (daemon/scripts/batch.lua).  The bytes of the last batch formatted are
 * sent again when they are this one's (the other masters of the same
 * loop iteration), compared byte for byte, so that a batch is formatted
 * once for all of them.  Returns REDIS_OK/ERR.
 */
static int
master_batch_write(struct master *m, struct master_batch_req *b, bool use_eval)
{
    const struct master_req *req;
    size_t argc = 3 + 3 * b->n, nkeys = 0, i, j, k, a;
    const char **argv;
    size_t *lens;
    char (*nums)[3][24];        /* the call's key count, then per request its two counts */
    char *cmd;
    void *block;
    int rc, len;

    for (req = b->items; req != NULL; req = req->next) {
        argc += req->nargs;
        nkeys += req->nkeys;
    }
    block = xmalloc(argc * (sizeof(*argv) + sizeof(*lens)) + (b->n + 1) * sizeof(*nums));
    argv = block;
    lens = (size_t *)(argv + argc);
    nums = (char (*)[3][24])(lens + argc);
    argv[0] = use_eval ? "EVAL" : "EVALSHA";
    lens[0] = strlen(argv[0]);
    argv[1] = use_eval ? script_text[script_batch] : m->sha[script_batch];
    lens[1] = strlen(argv[1]);
    argv[2] = nums[0][0];
    lens[2] = master_decimal(nums[0][0], nkeys);
    k = 3;
    a = 3 + nkeys;
    for (req = b->items, i = 1; req != NULL; req = req->next, i++) {
        for (j = 0; j < req->nkeys; j++) {
            argv[k] = req->args[j];
            lens[k++] = req->lens[j];
        }
        argv[a] = script_op[req->script];
        lens[a++] = strlen(script_op[req->script]);
        argv[a] = nums[i][0];
        lens[a++] = master_decimal(nums[i][0], req->nkeys);
        argv[a] = nums[i][1];
        lens[a++] = master_decimal(nums[i][1], req->nargs - req->nkeys);
        for (j = req->nkeys; j < req->nargs; j++) {
            argv[a] = req->args[j];
            lens[a++] = req->lens[j];
        }
    }
    if (batch_cmd != NULL && master_resp_is(batch_cmd, batch_cmd_len, argc, argv, lens)) {
        rc = redisev_formatted(m->cmd.ac, master_batch_cb, b, batch_cmd, batch_cmd_len);
    } else if ((len = redisFormatCommandArgv(&cmd, (int)argc, argv, lens)) < 0) {
        rc = REDIS_ERR;
    } else {
        rc = redisev_formatted(m->cmd.ac, master_batch_cb, b, cmd, (size_t)len);
        if (batch_cmd != NULL) {
            redisFreeCommand(batch_cmd);
        }
        batch_cmd = cmd;
        batch_cmd_len = (size_t)len;
    }
    free(block);
    return rc;
}

/*
 * The answer to a batch: each request gets its own element, as the
 * answer its script alone would have given (the clock, read once for the
 * whole batch, is checked once); a reply without an element per request
 * fails them all.
 */
static void
master_batch_cb(struct redisev *ac, void *r, void *privdata)
{
    redisReply *reply = r;
    const redisReply *answer, *e;
    struct master_batch_req *b = privdata;
    struct master *m = b->m;
    struct master_req *req;
    int64_t now = util_now_us();
    char why[MASTER_WHY_MAX];
    size_t i;

    master_answered(m, ac, now);
    if (reply == NULL) {
        master_request_lost(m, ac, why, sizeof(why));
        master_requests_fail(m, b->items, why);
        free(b);
        return;
    }
    m->stats.rtt_us = now - b->sent_us;
    if (master_noscript(m, ac, reply, &b->retried) && master_batch_write(m, b, true) == REDIS_OK) {
        master_link_sent(&m->cmd);
        return;
    }
    /* An error for the whole call is every request's answer. */
    answer = reply->type == REDIS_REPLY_ERROR
             ? reply : health_clock_read(m->index, reply, b->sent_us, now);
    if (answer == NULL) {
        snprintf(why, sizeof(why), "answered without its clock (the script's wrapper is "
                 "missing)");
    } else if (answer != reply
               && (answer->type != REDIS_REPLY_ARRAY || answer->elements != b->n)) {
        snprintf(why, sizeof(why), "answered a batch of %zu requests with a reply of type "
                 "%d and %zu elements", b->n, answer->type,
                 answer->type == REDIS_REPLY_ARRAY ? answer->elements : (size_t)0);
        answer = NULL;
    }
    if (answer == NULL) {
        m->stats.errors++;
        master_requests_fail(m, b->items, why);
        free(b);
        return;
    }
    for (i = 0; (req = b->items) != NULL; i++) {
        b->items = req->next;
        e = answer == reply ? reply : answer->element[i];
        if (e->type == REDIS_REPLY_ERROR) {
            m->stats.errors++;
        }
        req->cb(m, (const struct master_reply *)e, NULL, req->arg);
        free(req);
    }
    free(b);
}

/* Requests waiting in m's queue, every class. */
static size_t
master_queued(const struct master *m)
{
    const struct master_queue *q = &m->queue;

    return q->n[MASTER_CLASS_RENEW] + q->n[MASTER_CLASS_LOCK] + q->n[MASTER_CLASS_READ];
}

/* Whether m's command link takes a call now. */
static bool
master_has_room(const struct master *m)
{
    return m->cmd.state == MASTER_UP && m->cmd.ac != NULL && !m->cmd.drop_now
           && m->cmd.inflight < ctx.conf->max_pending;
}

/* Take req out of its queue: it is written (or failed) now. */
static void
master_queue_remove(struct master *m, struct master_req *req, int64_t now)
{
    struct master_queue *q = &m->queue;

    TAILQ_REMOVE(&q->q[req->cls], req, qlink);
    req->queued = false;
    q->n[req->cls]--;
    q->written[req->cls]++;
    q->wait_us[req->cls] += (uint64_t)(now - req->queued_us);
}

/*
 * The next call from m's queue, linked by next, not taken out of it yet:
 * the head of the first class that has one; when it is of a batched
 * script, with it every request of a batched script that follows it at
 * the heads of its class and the classes after it, up to
 * MASTER_BATCH_MAX.  Returns the first request, its count in *n.
 */
static struct master_req *
master_queue_next(struct master *m, size_t *n)
{
    struct master_queue *q = &m->queue;
    struct master_req *first = NULL, **tail = &first, *req;
    int c;

    *n = 0;
    for (c = 0; c < MASTER_CLASSES && *n < MASTER_BATCH_MAX; c++) {
        for (req = TAILQ_FIRST(&q->q[c]); req != NULL && *n < MASTER_BATCH_MAX;
             req = TAILQ_NEXT(req, qlink)) {
            if (script_op[req->script] == NULL) {
                if (*n == 0) {
                    req->next = NULL;
                    *n = 1;
                    return req;     /* a script of its own: alone */
                }
                break;
            }
            *tail = req;
            tail = &req->next;
            ++*n;
        }
        if (req != NULL) {
            break;      /* what comes next is not batched: it goes in its own call */
        }
    }
    *tail = NULL;
    return first;
}

/*
 * Fail what waited in m's queue past its round's deadline: that round
 * has ended, and the daemon's backlog is not the master's answer.
 * Callbacks run: only from the loop.
 */
static void
master_queue_expire(struct master *m, int64_t now)
{
    struct master_queue *q = &m->queue;
    struct master_req *req, *stale = NULL, **tail = &stale;
    int64_t limit_us = ctx.conf->node_timeout_ms * 1000;
    char why[MASTER_WHY_MAX];
    int c;

    for (c = 0; c < MASTER_CLASSES; c++) {
        while ((req = TAILQ_FIRST(&q->q[c])) != NULL && now - req->queued_us >= limit_us) {
            TAILQ_REMOVE(&q->q[c], req, qlink);
            req->queued = false;
            q->n[c]--;
            q->expired[c]++;
            req->next = NULL;
            *tail = req;
            tail = &req->next;
        }
    }
    if (stale != NULL) {
        snprintf(why, sizeof(why), "not written within %lld ms: the daemon's queue to this "
                 "master was full (redis.max_pending calls unanswered)",
                 (long long)ctx.conf->node_timeout_ms);
        master_requests_fail(m, stale, why);
    }
}

/*
 * Write the call that starts at items (n requests, linked by next):
 * one request as its own script, more as one call of the batch script.
 * Returns REDIS_OK, or REDIS_ERR when the connection refused the write
 * (nothing was written; out of memory aborts).
 */
static int
master_call_write(struct master *m, struct master_req *items, size_t n, int64_t now)
{
    struct master_batch_req *b;
    struct master_req *req;
    int rc;

    for (req = items; req != NULL; req = req->next) {
        req->sent_us = now;
    }
    if (n == 1) {
        return master_send(m, items, false, NULL);
    }
    b = xmalloc(sizeof(*b));
    b->m = m;
    b->items = items;
    b->n = n;
    b->retried = false;
    b->sent_us = now;
    if ((rc = master_batch_write(m, b, false)) != REDIS_OK) {
        free(b);
    }
    return rc;
}

/*
 * Write what m's queue holds while the command link has room: the
 * first class first (master_queue_next).  Called at the end of the loop
 * iteration (in_loop: callbacks may run, so what waited past its
 * deadline is failed, and when m is not up, or a write fails, every
 * request left gets its callback with the reason), and from inside a
 * caller's request before it writes its own (then nothing fails here:
 * what cannot be written stays queued for the iteration's end), so that
 * a master sees the requests of a class in the order they were made.
 */
static void
master_queue_write(struct master *m, bool in_loop)
{
    struct master_req *items, *req, *next;
    int64_t now = util_now_us();
    bool up = m->cmd.state == MASTER_UP && m->cmd.ac != NULL && !m->cmd.drop_now;
    size_t n;

    if (in_loop) {
        master_queue_expire(m, now);
    }
    while (master_queued(m) > 0 && master_has_room(m)) {
        items = master_queue_next(m, &n);
        if (master_call_write(m, items, n, now) != REDIS_OK) {
            m->stats.errors++;
            if (!in_loop) {
                return;     /* stays queued: the iteration's end tries again */
            }
            log_warn("master %s: the connection refused the write",
                     m->addr->spec);
            up = false;
            break;
        }
        for (req = items; req != NULL; req = next) {
            next = req->next;
            master_queue_remove(m, req, now);
            req->next = next;
        }
        master_link_sent(&m->cmd);
    }
    if (in_loop && !up && master_queued(m) > 0) {
        items = master_queue_take(m);
        master_requests_fail(m, items, m->cmd.state == MASTER_UP
                             ? "the connection refused the write"
                             : master_status_text(m));
        return;
    }
    if (master_queued(m) == 0) {
        flush_leave(&m->queue.fe);
    }
}

/* The flush list's writer for a master's queue. */
static void
master_queue_flush(struct flush_entry *fe)
{
    master_queue_write((struct master *)((char *)fe - offsetof(struct master, queue.fe)),
                       true);
}

/* Queue req in its class of m's queue, written at the iteration's end. */
static void
master_queue_add(struct master *m, struct master_req *req)
{
    struct master_queue *q = &m->queue;
    int c;

    if (q->fe.fn == NULL) {
        for (c = 0; c < MASTER_CLASSES; c++) {
            TAILQ_INIT(&q->q[c]);
        }
        flush_entry_init(&q->fe, master_queue_flush);
    }
    TAILQ_INSERT_TAIL(&q->q[req->cls], req, qlink);
    req->queued = true;
    q->n[req->cls]++;
    flush_join(&q->fe);
    if (q->n[req->cls] >= MASTER_BATCH_MAX) {
        master_queue_write(m, false);
    }
}

void
master_queue_stats(enum master_class cls, uint64_t *depth, uint64_t *written,
                   uint64_t *wait_us, uint64_t *expired)
{
    uint64_t d = 0, w = 0, us = 0, e = 0;
    size_t i;
    const struct master *m;

    for (i = 0; i < master_count(); i++) {
        m = master_at(i);
        d += m->queue.n[cls];
        w += m->queue.written[cls];
        us += m->queue.wait_us[cls];
        e += m->queue.expired[cls];
    }
    if (depth != NULL) {
        *depth = d;
    }
    if (written != NULL) {
        *written = w;
    }
    if (wait_us != NULL) {
        *wait_us = us;
    }
    if (expired != NULL) {
        *expired = e;
    }
}

void
master_shared_free(struct master_shared *shared)
{
    if (shared->cmd != NULL) {
        redisFreeCommand(shared->cmd);
        shared->cmd = NULL;
    }
}

int
master_eval(struct master *m, int script, size_t nkeys, size_t nargs,
            const char *const *args, const size_t *lens,
            struct master_shared *shared, master_reply_fn cb, void *arg,
            struct master_req **taken)
{
    struct master_req *req;

    if (m->cmd.state != MASTER_UP || m->cmd.ac == NULL) {
        m->stats.errors++;
        return -1;
    }
    if (m->cmd.drop_now) {
        m->stats.errors++;
        return -1;
    }
    req = xmalloc(sizeof(*req));
    req->m = m;
    req->cb = cb;
    req->arg = arg;
    req->script = script;
    req->nkeys = nkeys;
    req->nargs = nargs;
    req->args = args;
    req->lens = lens;
    req->retried = false;
    req->cls = script_class[script];
    req->queued = false;
    req->queued_us = util_now_us();
    req->sent_us = req->queued_us;
    req->next = NULL;
    m->stats.requests++;
    if (script_op[script] == NULL && master_has_room(m)) {
        master_queue_write(m, false);   /* what was asked before this goes before it */
        if (master_queued(m) == 0 && master_has_room(m)) {
            if (master_send(m, req, false, shared) == REDIS_OK) {
                master_link_sent(&m->cmd);
                if (taken != NULL) {
                    *taken = req;
                }
                return 0;
            }
        }
    }
    master_queue_add(m, req);
    if (taken != NULL) {
        *taken = req;
    }
    return 0;
}

void
master_withdraw(struct master_req *req)
{
    struct master *m = req->m;
    struct master_queue *q = &m->queue;

    if (!req->queued || req->cls == MASTER_CLASS_RENEW) {
        return;
    }
    TAILQ_REMOVE(&q->q[req->cls], req, qlink);
    req->queued = false;
    q->n[req->cls]--;
    q->expired[req->cls]++;
    req->cb(m, NULL, "withdrawn unwritten: its round was decided while it waited in the "
            "daemon's queue", req->arg);
    free(req);
}

void
master_poll(struct master *m)
{
    if (m->cmd.ac != NULL && m->cmd.state == MASTER_UP) {
        redisev_read(m->cmd.ac);
    }
}

enum master_reply_type
master_reply_type(const struct master_reply *r)
{
    const redisReply *reply = (const redisReply *)r;

    switch (reply->type) {
    case REDIS_REPLY_STRING:
        return MASTER_REPLY_STRING;
    case REDIS_REPLY_STATUS:
        return MASTER_REPLY_STATUS;
    case REDIS_REPLY_INTEGER:
        return MASTER_REPLY_INTEGER;
    case REDIS_REPLY_NIL:
        return MASTER_REPLY_NIL;
    case REDIS_REPLY_ERROR:
        return MASTER_REPLY_ERROR;
    case REDIS_REPLY_ARRAY:
        return MASTER_REPLY_ARRAY;
    default:
        return MASTER_REPLY_OTHER;
    }
}

long long
master_reply_integer(const struct master_reply *r)
{
    return ((const redisReply *)r)->integer;
}

const char *
master_reply_str(const struct master_reply *r, size_t *len)
{
    const redisReply *reply = (const redisReply *)r;

    if (len != NULL) {
        *len = reply->str != NULL ? reply->len : 0;
    }
    return reply->str != NULL ? reply->str : "";
}

size_t
master_reply_elements(const struct master_reply *r)
{
    const redisReply *reply = (const redisReply *)r;

    return reply->type == REDIS_REPLY_ARRAY ? reply->elements : 0;
}

const struct master_reply *
master_reply_element(const struct master_reply *r, size_t i)
{
    return (const struct master_reply *)((const redisReply *)r)->element[i];
}


void
master_eval_stop(void)
{
    if (batch_cmd != NULL) {
        redisFreeCommand(batch_cmd);
        batch_cmd = NULL;
    }
}
