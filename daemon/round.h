/*
 * round.h: one Redlock round: a script sent to every master at once,
 * one deadline for the whole round, a tally, a single decision.
 *
 * The round is the unit that acquire, release, extend and status share
 * (Redis distributed-locks page, "The Redlock algorithm", steps 1-3):
 * the clock is read on CLOCK_MONOTONIC before the first send, every
 * master receives the request at once (hiredis coalesces the writes),
 * and a single libevent timer of node_timeout_ms ends the round.  The
 * caller classifies each answer and may decide early (for example when a
 * quorum has granted); the round then calls done exactly once.
 *
 * Restart quarantine: a master quarantined when the round starts
 * (health_quarantine_left_ms) receives the request like the others, but
 * its answer is recorded as ROUND_FAILED ("quarantined ...") and never
 * reaches the caller's classifier, so no quorum counts it.  A clock
 * quarantine (health_clock_quarantine_left_ms) is asked for both at the
 * start and when the answer is read, so the answer that showed the step
 * is not counted either.  A duplicate, a config entry that is the same
 * Redis server as another one (health_duplicate_of, read at the round's
 * start), is not sent the request at all, since the script would run
 * twice on one server: "same server as ... (run_id ...), not asked".
 *
 * Late replies: a round lives until every master's callback has come
 * back, so a reply that arrives after the decision finds the round
 * still allocated, marked decided, and is ignored.
 */
#ifndef REDLOCKD_ROUND_H
#define REDLOCKD_ROUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct master_reply;
struct round;

/* What became of one master in a round. */
enum round_slot {
    ROUND_PENDING,      /* no answer yet (a timeout, once decided) */
    ROUND_ANSWERED,     /* a well-formed answer, counted by the caller */
    ROUND_FAILED        /* not sent, connection failed, or a bad answer */
};

/* What the reply callback tells the round. */
enum round_verdict {
    ROUND_CONTINUE,     /* keep waiting for the others */
    ROUND_DECIDED       /* the outcome is known: call done now */
};

/*
 * Called for each master's answer that arrives before the decision.
 * reply is never NULL here (transport failures are recorded by the
 * round).  The callback classifies it: the round records ROUND_ANSWERED
 * unless the callback called round_fail() for this master.
 */
typedef enum round_verdict (*round_reply_fn)(struct round *r, size_t master,
                                             const struct master_reply *reply,
                                             void *arg);

/* Called once when the round is decided; r is valid only during the call. */
typedef void (*round_done_fn)(struct round *r, void *arg);

/* The deadline of a round started now, us: lock.node_timeout_ms of ctx.conf
 * (daemon/ctx.h), read when the round starts; rounds run on ctx.base. */
int64_t round_timeout_us(void);

/*
 * Start a round: send script (an id from master_script()) with
 * args[0..nargs-1], the first nkeys being keys, to every master.  The
 * args are copied.  reply_cb may be NULL (every answer counts as
 * ROUND_ANSWERED); done_cb may be NULL (fire and forget, as for the
 * release after a failed acquire).
 *
 * The decision is always delivered from the event loop, never from
 * inside round_start().  Returns 0 (out of memory aborts,
 * daemon/xmalloc.h; the int is kept for its callers).
 */
int round_start(int script, size_t nkeys, size_t nargs,
                const char *const *args, const size_t *lens,
                round_reply_fn reply_cb, round_done_fn done_cb, void *arg);

typedef void (*round_later_fn)(void *arg);

/*
 * Call fn(arg) from the event loop once delay_us (monotonic) have
 * passed: a wait between two rounds of one operation.  Returns 0 (out
 * of memory aborts, daemon/xmalloc.h; the int is kept for its callers).
 * A call still pending when the daemon stops is dropped.
 */
int round_after(int64_t delay_us, round_later_fn fn, void *arg);

/* Mark master i's answer as failed, with a reason for error texts. */
void round_fail(struct round *r, size_t master, const char *why);

/* State of master i. */
enum round_slot round_slot(const struct round *r, size_t master);

/* Masters with ROUND_ANSWERED. */
size_t round_answered(const struct round *r);

/*
 * Masters that were sent the request and whose link failed before a
 * reply came: they may run it later (what waits in a stopped master's
 * socket runs when it continues), and a request sent after it cannot
 * follow it on that link.  A master that is only late (still waiting)
 * is not counted: what is sent next follows on its link, in order.
 */
size_t round_unanswered(const struct round *r);

/*
 * Answers that arrived but were not counted because their master was in
 * restart quarantine; the longest quarantine left among those, ms, in
 * *left_ms when it is not NULL (0 when none).
 */
size_t round_quarantined(const struct round *r, int64_t *left_ms);

/*
 * Answers that arrived but were not counted because their master was in
 * clock quarantine when the round started or when the answer was read
 * (health_clock_quarantine_left_ms); the longest quarantine left among
 * those, ms, in *left_ms when it is not NULL (0 when none).
 */
size_t round_clock_quarantined(const struct round *r, int64_t *left_ms);

/*
 * How many masters of r answered but did not count because their layout
 * registry refused this daemon, or was not read recently enough
 * (daemon/layout.h); *why (when why is not NULL) gets the first reason
 * known (read at the send, else at the answer; "" when none was), valid
 * as long as r; *daemon (when not NULL) whether a daemon in a registry
 * or a member that cannot be read was among the reasons.
 */
size_t round_layout_refused(const struct round *r, const char **why, bool *daemon);

/* Masters not asked: duplicates of another master (the same server). */
size_t round_duplicates(const struct round *r);

/* Monotonic start time (just before the first send), us. */
int64_t round_start_us(const struct round *r);

/* Monotonic time of the decision, us. */
int64_t round_end_us(const struct round *r);

/*
 * Describe the masters that did not answer, for ERR NOQUORUM:
 * "127.0.0.1:7003 down (Connection refused); 127.0.0.1:7004 timeout
 * after 50 ms".  Writes at most size bytes with NUL into buf; returns buf.
 */
char *round_describe_failures(const struct round *r, char *buf, size_t size);

/* Rounds allocated now (decided or not), for STATS and leak checks. */
size_t round_live(void);

/* Rounds not decided yet (each ends by its deadline). */
size_t round_undecided(void);

#endif /* REDLOCKD_ROUND_H */
