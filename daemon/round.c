/*
 * round.c: fan-out to every master, one deadline, one decision.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "conf/conf.h"
#include "daemon/ctx.h"
#include "daemon/health.h"
#include "daemon/layout.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/round.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"

#define ROUND_WHY_MAX 160

/* Per-master slot of a round. */
struct round_master {
    struct round    *round;          /* back pointer for the reply callback */
    enum round_slot  state;          /* what became of this master */
    bool             waiting;        /* a callback from master.c is still due */
    bool             sent;           /* the request was handed to the link */
    bool             replied;        /* a reply came back (an error reply too); a
                                        callback without one: the link failed */
    struct master_req *req;          /* the request, while waiting (master_withdraw) */
    int64_t          quarantine_ms;  /* restart quarantine left at the send; 0: none */
    int64_t          clock_ms;       /* clock quarantine left at the send; 0: none */
    bool             layout_ok;      /* its layout verdict counted at the send */
    char             why[ROUND_WHY_MAX]; /* failure reason when FAILED */
};

/*
 * A round.  Owned by itself: allocated by round_start(), freed when it
 * is decided and no master callback is still due.
 */
struct round {
    struct event        deadline;    /* the one timer of the round */
    round_reply_fn      reply_cb;    /* classify an answer, may be NULL */
    round_done_fn       done_cb;     /* decision, may be NULL */
    void               *arg;         /* callbacks' argument */
    bool                decided;     /* done has been called (or is running) */
    size_t              waiting;     /* master callbacks still due */
    size_t              nmasters;    /* slots in masters[] */
    size_t              answered;    /* slots ROUND_ANSWERED */
    size_t              quarantined; /* answers not counted: restart quarantine */
    size_t              duplicates;  /* masters not asked: the same server as
                                        another master */
    int64_t             quarantine_ms; /* longest quarantine left among those, ms */
    size_t              clocked;     /* answers not counted: clock quarantine */
    int64_t             clock_ms;    /* longest clock quarantine left among those, ms */
    size_t              layout_refused; /* answers not counted: the layout registry */
    bool                layout_daemon; /* a daemon in a registry (or a member that
                                          cannot be read) among the reasons, not
                                          only reads missing or too old */
    char               *layout_why;  /* the first reason read, malloc'd; NULL: none */
    size_t              finished;    /* slots not ROUND_PENDING */
    int64_t             start_us;    /* monotonic, before the first send */
    int64_t             end_us;      /* monotonic, at the decision */
    int64_t             timeout_ms;  /* deadline used, for texts */
    size_t              nargs;       /* args count */
    const char        **args;        /* copies, in one block with the bytes */
    size_t             *lens;        /* lengths of args */
    struct round_master masters[];   /* one per master */
};

static size_t             rounds_live;
static size_t             rounds_undecided;

int64_t
round_timeout_us(void)
{
    return ctx.conf->node_timeout_ms * 1000;
}

/* Note why master i of r is not counted by its layout registry (layout_why). */
static void
round_layout_note(struct round *r, size_t i)
{
    bool refused;
    const char *why = layout_why(i, r->start_us, &refused);

    r->layout_daemon |= refused;
    if (r->layout_why == NULL && why[0] != '\0') {
        r->layout_why = xstrdup(why);
    }
}

static void
round_release(struct round *r)
{
    if (!r->decided || r->waiting > 0) {
        return;
    }
    event_del(&r->deadline);
    free(r->args);
    free(r->layout_why);
    free(r);
    rounds_live--;
}

static void
round_decide(struct round *r)
{
    size_t i;

    if (r->decided) {
        return;
    }
    r->decided = true;
    rounds_undecided--;
    r->end_us = util_now_us();
    event_del(&r->deadline);
    /*
     * What is still unwritten in a master's queue is not written now:
     * what the caller sends next (a release of this round's token) may
     * be written first there, and must not be overtaken by what it
     * undoes.  Renewals and releases stay (daemon/master.h).
     */
    r->waiting++;
    for (i = 0; i < r->nmasters; i++) {
        if (r->masters[i].waiting) {
            master_withdraw(r->masters[i].req);
        }
    }
    r->waiting--;
    if (r->done_cb != NULL) {
        r->done_cb(r, r->arg);
    }
    round_release(r);
}

/*
 * The deadline passed, or a zero-time activation after round_start().
 * Replies may already be in the sockets while the loop was busy
 * elsewhere: read them first, so that they count.  The extra reference
 * keeps r allocated while master callbacks run.
 */
static void
round_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    struct round *r = arg;
    size_t i;

    (void)fd;
    (void)what;
    r->waiting++;
    for (i = 0; i < r->nmasters && !r->decided; i++) {
        if (r->masters[i].waiting) {
            master_poll(master_at(i));
        }
    }
    r->waiting--;
    if (!r->decided) {
        round_decide(r);
    } else {
        round_release(r);
    }
}

static void
round_reply_cb(struct master *m, const struct master_reply *reply,
               const char *error, void *arg)
{
    struct round_master *slot = arg;
    struct round *r = slot->round;
    enum round_verdict verdict = ROUND_CONTINUE;
    size_t i = master_index(m);
    int64_t clock_ms;

    slot->waiting = false;
    slot->replied = reply != NULL;
    r->waiting--;
    if (r->decided) {
        /* A late reply to a round already decided: ignored. */
        log_debug("master %s: late reply ignored", master_name(m));
        round_release(r);
        return;
    }
    if (reply == NULL) {
        slot->state = ROUND_FAILED;
        snprintf(slot->why, sizeof(slot->why), "%s", error);
    } else if (master_reply_type(reply) == MASTER_REPLY_ERROR) {
        slot->state = ROUND_FAILED;
        snprintf(slot->why, sizeof(slot->why), "error (%.100s)",
                 master_reply_str(reply, NULL));
    } else if ((clock_ms = health_clock_quarantine_left_ms(master_index(m), util_now_us())) > 0
               || slot->clock_ms > 0) {
        /*
         * Its clock stepped, before the send or shown by this very
         * answer (or another one read since): its keys may have expired
         * early or late.
         */
        if (clock_ms < slot->clock_ms) {
            clock_ms = slot->clock_ms;
        }
        slot->state = ROUND_FAILED;
        snprintf(slot->why, sizeof(slot->why), "quarantined after a clock step "
                 "(%lld ms left; lock.clock_check)", (long long)clock_ms);
        r->clocked++;
        if (clock_ms > r->clock_ms) {
            r->clock_ms = clock_ms;
        }
    } else if (!slot->layout_ok || !layout_counts(i, r->start_us)) {
        /*
         * Its layout registry, read shortly before the send, shows a
         * daemon that may not read our records or write records we read
         * (daemon/layout.h), or it was not read recently enough (the
         * reason was kept at the send: a read answered since may say
         * nothing against it any more).
         */
        slot->state = ROUND_FAILED;
        snprintf(slot->why, sizeof(slot->why), "not counted by its layout registry");
        r->layout_refused++;
        round_layout_note(r, i);
    } else if (slot->quarantine_ms > 0) {
        /* It ran the script, but may have lost locks in its restart. */
        slot->state = ROUND_FAILED;
        snprintf(slot->why, sizeof(slot->why), "quarantined after a restart "
                 "(%lld ms left; lock.restart_quarantine)", (long long)slot->quarantine_ms);
        r->quarantined++;
        if (slot->quarantine_ms > r->quarantine_ms) {
            r->quarantine_ms = slot->quarantine_ms;
        }
    } else {
        slot->state = ROUND_ANSWERED;
        if (r->reply_cb != NULL) {
            verdict = r->reply_cb(r, i, reply, r->arg);
        }
        if (slot->state == ROUND_ANSWERED) {
            r->answered++;
        }
    }
    r->finished++;
    if (verdict == ROUND_DECIDED || r->finished == r->nmasters) {
        round_decide(r);
    }
}

int
round_start(int script, size_t nkeys, size_t nargs,
            const char *const *args, const size_t *lens,
            round_reply_fn reply_cb, round_done_fn done_cb, void *arg)
{
    size_t n = master_count(), i, bytes = 0;
    int dup;
    struct round *r;
    struct timeval tv;
    struct master_shared shared = { NULL, 0, "" };
    char *p;

    r = xcalloc(1, sizeof(*r) + n * sizeof(r->masters[0]));
    for (i = 0; i < nargs; i++) {
        bytes += lens[i];
    }
    r->args = xmalloc(nargs * (sizeof(*r->args) + sizeof(*r->lens)) + bytes + 1);
    r->lens = (size_t *)(r->args + nargs);
    p = (char *)(r->lens + nargs);
    for (i = 0; i < nargs; i++) {
        memcpy(p, args[i], lens[i]);
        r->args[i] = p;
        r->lens[i] = lens[i];
        p += lens[i];
    }
    r->nargs = nargs;
    r->reply_cb = reply_cb;
    r->done_cb = done_cb;
    r->arg = arg;
    r->nmasters = n;
    r->timeout_ms = ctx.conf->node_timeout_ms;
    event_assign(&r->deadline, ctx.base, -1, 0, round_deadline_cb, r);
    rounds_live++;
    rounds_undecided++;

    r->start_us = util_now_us();
    for (i = 0; i < n; i++) {
        struct round_master *slot = &r->masters[i];
        struct master *m = master_at(i);

        slot->round = r;
        /*
         * Read at the round's start, before the send: the script runs
         * after it, so a master out of quarantine then is out of it when
         * the script runs.
         */
        slot->quarantine_ms = health_quarantine_left_ms(master_index(m), r->start_us);
        slot->clock_ms = health_clock_quarantine_left_ms(master_index(m), r->start_us);
        slot->layout_ok = layout_counts(master_index(m), r->start_us);
        if (!slot->layout_ok) {
            round_layout_note(r, master_index(m));
        }
        dup = health_duplicate_of(master_index(m));
        if (dup >= 0) {
            /*
             * The same server as master dup, which is asked: asking it
             * twice would run the script twice, and the second run would
             * see the first one's effect (a release finding the key
             * already deleted).  Not sent, not counted.
             */
            slot->state = ROUND_FAILED;
            snprintf(slot->why, sizeof(slot->why), "same server as %s (run_id %.8s...), "
                     "not asked", master_name(master_at((size_t)dup)), health_run_id(master_index(m)));
            r->duplicates++;
            r->finished++;
        } else if (master_eval(m, script, nkeys, nargs, r->args, r->lens, &shared,
                               round_reply_cb, slot, &slot->req) == 0) {
            slot->sent = true;
            slot->waiting = true;
            r->waiting++;
        } else {
            slot->state = ROUND_FAILED;
            snprintf(slot->why, sizeof(slot->why), "%s", master_status_text(m));
            r->finished++;
        }
    }
    master_shared_free(&shared);
    if (r->finished == n) {
        /* Nothing was sent: decide on the next loop iteration, not here. */
        event_active(&r->deadline, EV_TIMEOUT, 0);
    } else {
        tv.tv_sec = (time_t)(r->timeout_ms / 1000);
        tv.tv_usec = (suseconds_t)((r->timeout_ms % 1000) * 1000);
        event_add(&r->deadline, &tv);
    }
    return 0;
}

/* A call of round_after(): what to call, with what. */
struct round_later {
    round_later_fn fn;          /* the caller's function */
    void          *arg;         /* its argument */
};

static void
round_later_cb(evutil_socket_t fd, short what, void *arg)
{
    struct round_later l = *(struct round_later *)arg;

    (void)fd;
    (void)what;
    free(arg);
    l.fn(l.arg);
}

int
round_after(int64_t delay_us, round_later_fn fn, void *arg)
{
    struct round_later *l = xmalloc(sizeof(*l));
    struct timeval tv;

    l->fn = fn;
    l->arg = arg;
    tv.tv_sec = (time_t)(delay_us / 1000000);
    tv.tv_usec = (suseconds_t)(delay_us % 1000000);
    if (event_base_once(ctx.base, -1, EV_TIMEOUT, round_later_cb, l, &tv) != 0) {
        xmalloc_fail("a timer between two rounds");
    }
    return 0;
}

void
round_fail(struct round *r, size_t master, const char *why)
{
    struct round_master *slot = &r->masters[master];

    slot->state = ROUND_FAILED;
    snprintf(slot->why, sizeof(slot->why), "%s", why);
}

enum round_slot
round_slot(const struct round *r, size_t master)
{
    return r->masters[master].state;
}

size_t
round_answered(const struct round *r)
{
    return r->answered;
}

size_t
round_unanswered(const struct round *r)
{
    size_t i, n = 0;

    for (i = 0; i < r->nmasters; i++) {
        n += r->masters[i].sent && !r->masters[i].waiting && !r->masters[i].replied;
    }
    return n;
}

size_t
round_quarantined(const struct round *r, int64_t *left_ms)
{
    if (left_ms != NULL) {
        *left_ms = r->quarantine_ms;
    }
    return r->quarantined;
}

size_t
round_clock_quarantined(const struct round *r, int64_t *left_ms)
{
    if (left_ms != NULL) {
        *left_ms = r->clock_ms;
    }
    return r->clocked;
}

size_t
round_layout_refused(const struct round *r, const char **why, bool *daemon)
{
    if (why != NULL) {
        *why = r->layout_why != NULL ? r->layout_why : "";
    }
    if (daemon != NULL) {
        *daemon = r->layout_daemon;
    }
    return r->layout_refused;
}

size_t
round_duplicates(const struct round *r)
{
    return r->duplicates;
}

int64_t
round_start_us(const struct round *r)
{
    return r->start_us;
}

int64_t
round_end_us(const struct round *r)
{
    return r->end_us;
}

char *
round_describe_failures(const struct round *r, char *buf, size_t size)
{
    size_t i, used = 0;
    int n;

    buf[0] = '\0';
    for (i = 0; i < r->nmasters && used < size; i++) {
        const struct round_master *slot = &r->masters[i];

        if (slot->state == ROUND_ANSWERED) {
            continue;
        }
        if (slot->state == ROUND_PENDING) {
            n = snprintf(buf + used, size - used, "%s%s timeout after %lld ms",
                         used ? "; " : "", master_name(master_at(i)),
                         (long long)r->timeout_ms);
        } else {
            n = snprintf(buf + used, size - used, "%s%s %s",
                         used ? "; " : "", master_name(master_at(i)), slot->why);
        }
        if (n < 0) {
            break;
        }
        used += (size_t)n;
    }
    return buf;
}

size_t
round_live(void)
{
    return rounds_live;
}

size_t
round_undecided(void)
{
    return rounds_undecided;
}
