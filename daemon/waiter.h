/*
 * waiter.h: a pending LOCK's life, decided apart from carried out.
 *
 * The lock table (daemon/lock_queue.c) keeps a queue of pending LOCKs
 * per name and does their I/O: rounds on the masters, timers, answers.
 * What each event means for a waiter is decided here, by functions that
 * read the waiter's life (struct waiter_life, owned by the waiter they
 * are embedded in), move it to its next state, and return the step the
 * table carries out.  They do no I/O, read no clock and draw no random
 * number of their own (the caller passes the time and a draw), so that
 * tests/check_waiter.c checks every transition without Redis or
 * libevent, as tests/check_lease.c checks the lease's.
 *
 * States (enum waiter_state) and what moves a waiter between them:
 *
 *   (new) --LOCK, one attempt or the ready head-------------> ACQUIRING
 *   (new) --LOCK behind others, or no room here------------> QUEUED
 *   QUEUED, WAITING --timer, the ready head----------------> ACQUIRING
 *   QUEUED, WAITING --timer, yielded or not subscribed yet-> WAITING (YIELD, SUBSCRIBE)
 *   QUEUED, WAITING --timer, not the ready head------------> QUEUED
 *   QUEUED, WAITING --timer past wait=---------------------> (answered)
 *   QUEUED, WAITING --woken (head, room, release heard)----> WAITING (NOW)
 *   WAITING (HOLDER) --another token's release------------> WAITING (JITTER)
 *   QUEUED, WAITING --a local hold let go, same record-----> HANDING_OVER
 *   ACQUIRING, HANDING_OVER --round ended-------------------> waiter_on_round()
 *       granted: (answered OK); a refusal it may wait out: WAITING (why in
 *       enum waiter_timer); another permit free: ACQUIRING again; else
 *       (answered BUSY, TIMEOUT, NOQUORUM, KIND, SHUTDOWN)
 *   ACQUIRING, HANDING_OVER --client closed----------------> CANCELLED
 *   CANCELLED --round ended--------------------------------> (token abandoned,
 *                                                           answered CANCELLED)
 *   QUEUED, WAITING --client closed, or daemon stops-------> (answered)
 *
 * A waiter whose input ended (drain) keeps its state; its deadline
 * becomes now.
 *
 * The policy's other decisions live here too: whether a name's holds
 * here leave a head of a kind room to ask the masters (waiter_room),
 * whether a LOCK's kind fits the name's (waiter_kind_fits), which permit
 * a counted head proposes (waiter_pick_permit), a hold given up going to
 * the head, to another daemon's turn or to the masters (waiter_give_up),
 * and the turn a grant starts.
 */
#ifndef REDLOCKD_WAITER_H
#define REDLOCKD_WAITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/redlock.h"

/* Where a waiter is in its life. */
enum waiter_state {
    WAITER_QUEUED,          /* no try due: behind the head, or the head without
                               room here; its timer is its wait= deadline only */
    WAITER_WAITING,         /* between tries: its timer brings the next one
                               (why: enum waiter_timer) */
    WAITER_ACQUIRING,       /* its own try is on the masters */
    WAITER_HANDING_OVER,    /* a released hold's swap to it is on the masters */
    WAITER_CANCELLED        /* its client closed during a round: out of the
                               queue; the round's end abandons its token */
};

/* WAITING: what its timer waits for, which decides what may cut it short. */
enum waiter_timer {
    WAITER_TIMER_NOW,       /* woken: it tries on the next loop turn */
    WAITER_TIMER_RETRY,     /* a random delay within lock.retry_delay_ms; any
                               release announced wakes it */
    WAITER_TIMER_JITTER,    /* a random delay that only its blocker's release
                               cuts short (after a split vote, or another
                               token's announcement) */
    WAITER_TIMER_HOLDER,    /* the holder's ttl plus jitter: no announcement
                               came; a retry from it is a fallback retry */
    WAITER_TIMER_BACKOFF,   /* after NOQUORUM: an exponential backoff */
    WAITER_TIMER_YIELD,     /* this daemon yielded its turn to another daemon */
    WAITER_TIMER_SUBSCRIBE  /* the name's release channel is not confirmed on
                               every master yet */
};

/* How long a waiter waits, and what a refusal answers. */
enum waiter_wait {
    WAITER_QUEUES,          /* queued until granted, or wait= ends (TIMEOUT) */
    WAITER_ONCE_TIMEOUT,    /* one attempt; a refusal answers TIMEOUT (wait=0,
                               or a client whose input ended) */
    WAITER_ONCE_BUSY        /* one attempt; a refusal answers BUSY (TRYLOCK) */
};

/* How a waiter's LOCK is answered (the table maps these to its own outcomes). */
enum waiter_answer {
    WAITER_ANSWER_OK,
    WAITER_ANSWER_BUSY,         /* TRYLOCK refused; ttl_ms: the holder's time left */
    WAITER_ANSWER_TIMEOUT,
    WAITER_ANSWER_NOQUORUM,     /* the text: the last attempt's */
    WAITER_ANSWER_KIND,         /* the text: what the masters said the name is */
    WAITER_ANSWER_SHUTDOWN,
    WAITER_ANSWER_CANCELLED
};

/*
 * What the policy knows of one waiter.  Embedded in the table's waiter,
 * which owns it; every field but the request's is written only by the
 * functions below.
 */
struct waiter_life {
    /* the request, fixed when it is queued (waiter_life_init) */
    enum waiter_wait    wait;       /* how long it waits */
    enum redlock_kind   kind;       /* the record it asks for */
    int64_t             ttl_ms;     /* lease asked for, ms */
    /* state */
    enum waiter_state   state;
    enum waiter_timer   timer;      /* WAITING: why its timer is set */
    int64_t             deadline_us;/* CLOCK_MONOTONIC end of wait=, INT64_MAX: none;
                                       pulled to now when the client's input ends */
    /* facts */
    bool                gated;      /* exclusive: a master may hold its gate closed;
                                       the table opens it when the waiter goes */
    bool                woken;      /* a release was announced during its round */
    bool                broken;     /* a BREAK deleted its token during its round */
    bool                noquorum;   /* its last attempt lacked a quorum of answers */
    uint64_t            woken_id;   /* redlock_token_id of the last release heard during
                                       its round */
    uint64_t            blocker;    /* HOLDER: redlock_token_id of the exclusive holder
                                       a quorum refused it for; 0: none known */
    unsigned            hops;       /* a permit: other permits tried since it woke */
    int64_t             backoff_us; /* the next delay after NOQUORUM, 0: none yet */
};

/* One attempt only (TRYLOCK, wait=0, a client whose input ended): never queued behind. */
#define WAITER_ONCE(wl)     ((wl)->wait != WAITER_QUEUES)

/* In a round (its own try or a hand-over): its answer comes from the round's end. */
#define WAITER_IN_ROUND(wl) ((wl)->state == WAITER_ACQUIRING \
                             || (wl)->state == WAITER_HANDING_OVER \
                             || (wl)->state == WAITER_CANCELLED)

#define WAITER_BACKOFF_MAX_US 500000 /* longest retry delay after NOQUORUM */
#define WAITER_PERMIT_HOPS    3      /* other permits a counted LOCK tries at once
                                        when its own was taken, before it waits */

/*
 * What the caller gives every decision: the time and the randomness
 * (so that tests can fix both), and the one setting the policy reads.
 */
struct waiter_env {
    int64_t   now_us;               /* CLOCK_MONOTONIC, util_now_us() */
    int64_t   retry_delay_us;       /* lock.retry_delay_ms, in us */
    int64_t (*draw)(int64_t max);   /* uniform in 0..max inclusive (util_random) */
};

/*
 * Start a waiter's life for a LOCK made at start_us (CLOCK_MONOTONIC):
 * wait_ms < 0 waits for ever, 0 is one attempt (TIMEOUT), trylock one
 * attempt (BUSY); draining (the client's input ended) makes any LOCK one
 * attempt.  The state is QUEUED until waiter_start() says otherwise.
 */
void waiter_life_init(struct waiter_life *wl, enum redlock_kind kind, int64_t ttl_ms,
                      int64_t wait_ms, bool trylock, bool draining, int64_t start_us);

/*
 * Whether this daemon's holds of a name leave a LOCK of kind room to ask
 * the masters: nholders holds here, nexclusive of them exclusive, limit
 * the name's limit (counted).  No exclusive hold for an exclusive or a
 * shared head (an exclusive head behind shared holds of this daemon asks
 * anyway: the masters refuse it, and close the gate so that no new
 * shared holder gets in), fewer than the limit for a permit.
 */
bool waiter_room(enum redlock_kind kind, size_t nholders, size_t nexclusive, unsigned limit);

/* Whether a LOCK's kind fits the kind a name has here (waiter_kind_fits). */
enum waiter_fit {
    WAITER_FITS,            /* the same family (and limit) */
    WAITER_HELD_AS,         /* no: held here as another kind (ERR KIND, "is held") */
    WAITER_WAITED_AS        /* no: only waited for here as another kind */
};

/*
 * A name has here the kind its first request asked for: counted with
 * name_limit, or else the exclusive/shared family; nholders holds of it
 * are kept here.  A LOCK asking for counted with req_limit, or the
 * other family, fits when both are the same family and, counted, the
 * same limit: one name is one kind of lock on the masters.
 */
enum waiter_fit waiter_kind_fits(bool name_counted, unsigned name_limit, size_t nholders,
                                 bool req_counted, unsigned req_limit);

/*
 * The permit a counted head proposes: the first one from *next (in
 * 0..limit-1) on, going round, that is not set in held (a bitmap of
 * limit bits: the permits this daemon holds); *next moves past it, so
 * that heads spread over the permits.  When every permit is held here,
 * *next itself (the masters refuse it).  limit >= 1.
 */
unsigned waiter_pick_permit(const unsigned char *held, unsigned limit, unsigned *next);

/* What a new LOCK does first (waiter_start). */
enum waiter_start_step {
    WAITER_START_REFUSE,    /* answer at once (waiter_refusal): a shared attempt
                               behind an exclusive LOCK queued here */
    WAITER_START_TRY,       /* ask the masters now (state ACQUIRING) */
    WAITER_START_QUEUE      /* wait (QUEUED): behind others, or held here */
};

/*
 * A new LOCK is in the queue.  ready_head: it is the oldest that queues
 * and the name's holds here leave it room; exclusive_queued: an
 * exclusive LOCK already queues here for the name.
 */
enum waiter_start_step waiter_start(struct waiter_life *wl, bool ready_head,
                                    bool exclusive_queued);

/*
 * How a waiter that may not wait (or whose wait ran out) is answered:
 * TRYLOCK BUSY, NOQUORUM when its last attempt lacked a quorum, else
 * TIMEOUT.
 */
enum waiter_answer waiter_refusal(const struct waiter_life *wl);

/*
 * Something may have freed room for the waiter (it became head, a local
 * hold went, a release was announced, its subscription was confirmed).
 * Returns true when the caller must run its timer now (state WAITING,
 * timer NOW); false when it is in a round (it then retries at once if
 * that round finds the name busy) or cancelled.
 */
bool waiter_wake(struct waiter_life *wl);

/* What a waiter's timer leads to (waiter_on_timer). */
struct waiter_timer_step {
    enum {
        WAITER_TIMER_NOTHING,   /* in a round, or cancelled: the round decides */
        WAITER_TIMER_EXPIRE,    /* answer waiter_refusal(): its wait= ran out */
        WAITER_TIMER_REARM,     /* set the timer at at_us (WAITING) */
        WAITER_TIMER_QUEUE,     /* not the ready head: wait (QUEUED) */
        WAITER_TIMER_TRY        /* ask the masters (ACQUIRING) */
    } what;
    int64_t at_us;              /* REARM: CLOCK_MONOTONIC time of the timer */
    bool    subscribed;         /* the name's subscription is no longer waited for:
                                   clear it (lock->subscribe_until_us = 0) */
    bool    fallback;           /* TRY: no announcement came before the holder's
                                   ttl ran out (STATS fallback_retries) */
};

/*
 * The waiter's timer ran (env->now_us).  ready_head: it is the name's
 * ready head; yield_until_us: this daemon yielded its turn until then
 * (0: not); subscribe_until_us: the subscription waits for confirmations
 * until then (0: not waited for); watch_ready: every master whose
 * subscriber link is up confirmed it.
 */
struct waiter_timer_step waiter_on_timer(struct waiter_life *wl, const struct waiter_env *env,
                                         bool ready_head, int64_t yield_until_us,
                                         int64_t subscribe_until_us, bool watch_ready);

/* What a release announced on a name's channel means for its ready head. */
struct waiter_release {
    bool     yielding;          /* env->now_us is before the name's yield end */
    bool     own_yield;         /* the token is the one this daemon's yield released */
    bool     own_retired;       /* the token is the head's own last try's */
    bool     repeat;            /* the token is the last one heard (another master's
                                   copy of the same release) */
    uint64_t id;                /* redlock_token_id of the token */
};

/* What the table does about a release (waiter_on_release). */
struct waiter_release_step {
    enum {
        WAITER_RELEASE_IGNORE,  /* nothing */
        WAITER_RELEASE_WAKE,    /* wake the head (waiter_wake was called) */
        WAITER_RELEASE_REARM    /* set its timer at at_us (WAITING, JITTER) */
    } what;
    int64_t at_us;              /* REARM: CLOCK_MONOTONIC time of the timer */
    bool    end_yield;          /* another daemon's turn ended: clear the yield */
    bool    first_copy;         /* the first copy of a release: remember its token,
                                   count it (STATS pubsub_wakeups) */
};

/*
 * A release was announced for the name whose ready head this is.  Every
 * master announces the same release; the first copy wakes the head, a
 * copy during its round makes it retry at once if the round finds the
 * name busy, later copies do nothing; a waiter waiting out the jitter
 * wakes only for its blocker; one waiting for its holder's ttl that hears
 * another token (most likely another waiter's clean-up, which frees
 * nothing) tries within the jitter instead of at once.
 */
struct waiter_release_step waiter_on_release(struct waiter_life *wl,
                                             const struct waiter_env *env,
                                             const struct waiter_release *rel);

/* Every master confirmed the name's subscription: wake the head unless it
 * waits out the jitter.  Returns waiter_wake()'s answer, false when not woken. */
bool waiter_on_subscribed(struct waiter_life *wl);

/* What a round's end told (a summary of struct redlock_acquire_result). */
struct waiter_round_end {
    enum redlock_outcome outcome;
    bool     stopping;          /* the daemon is stopping */
    bool     uncounted;         /* a master's answer was not counted (answered <
                                   the masters configured) */
    bool     readers;           /* shared holders refused it */
    bool     gated;             /* a master said it closed the gate */
    bool     split;             /* BUSY, but no single token refused on a quorum */
    bool     unanswered;        /* a master's link failed with the try sent */
    bool     watched;           /* the name's release channel is subscribed already */
    int      free_slot;         /* BUSY permit: one free on the masters, else -1 */
    uint64_t holder_id;         /* BUSY: redlock_token_id of the refusing holder, 0 */
    int64_t  ttl_ms;            /* BUSY: the holder's time left, ms (0: none) */
};

/* What the table does when a round ended (waiter_on_round). */
struct waiter_round_step {
    enum {
        WAITER_ROUND_GRANT,     /* make the hold (or answer the lease) OK */
        WAITER_ROUND_ANSWER,    /* answer with answer (and ttl_ms) */
        WAITER_ROUND_HOP,       /* try permit slot now (ACQUIRING) */
        WAITER_ROUND_RETRY      /* set the timer at at_us (WAITING, why: wl->timer) */
    } what;
    enum waiter_answer answer;  /* ANSWER */
    int64_t  ttl_ms;            /* ANSWER BUSY: the holder's time left, ms */
    unsigned slot;              /* HOP: the permit to try */
    int64_t  at_us;             /* RETRY: CLOCK_MONOTONIC time of the timer */
    bool     release;           /* compare-and-delete its token everywhere, announced
                                   (a set may land late), before anything else */
    bool     abandon;           /* CANCELLED: release its token as an orphan (lock_abandon) */
    bool     retire;            /* its next try takes a new token (the released one may
                                   reach a master late) */
    bool     ghost;             /* with retire: the old token may still land where a link
                                   failed; the next tries take it over */
    bool     watch;             /* subscribe to the name's release channel now */
    bool     keep_noquorum;     /* keep the round's error text for the answer at the
                                   deadline (wl->noquorum is set) */
};

/*
 * A round of the waiter (its own try, or a hand-over to it: handover)
 * ended with r, at env->now_us.  Decides grant, hop, retry or answer
 * (the comments in waiter.c say why each) and moves the state on.
 */
struct waiter_round_step waiter_on_round(struct waiter_life *wl, const struct waiter_env *env,
                                         const struct waiter_round_end *r);

/* What happens to a hold this daemon gives up (waiter_give_up). */
struct waiter_give_up_step {
    enum {
        WAITER_GIVE_UP_RELEASE,     /* compare-and-delete it on the masters */
        WAITER_GIVE_UP_HAND_OVER,   /* swap it to the head (HANDING_OVER) */
        WAITER_GIVE_UP_YIELD        /* release it, and keep this daemon's head back
                                       until yield_until_us: another daemon's turn */
    } what;
    int64_t yield_until_us;         /* YIELD: CLOCK_MONOTONIC */
    size_t  turn_left;              /* the name's hand-overs left in this turn, after */
};

/*
 * A hold of kind hold_kind is given up here (UNLOCK to zero, or its
 * session closed).  head: the name's head, or NULL; stopping: the daemon
 * is stopping; remote: other daemons waited for the name at the last
 * grant; turn_left: hand-overs left in this daemon's turn; round_us: the
 * round deadline (masters.node_timeout_ms), the yield's scale.  A hand-over
 * needs a head asking for the same record (an exclusive one, or any
 * permit) outside a round; a shared hold is never handed over.  With
 * head, its state moves to HANDING_OVER on HAND_OVER.
 */
struct waiter_give_up_step waiter_give_up(struct waiter_life *head, enum redlock_kind hold_kind,
                                          bool stopping, bool remote, size_t turn_left,
                                          int64_t round_us, const struct waiter_env *env);

/*
 * The hand-overs a grant's new turn allows: one for each LOCK queued
 * behind the grantee.  nqueued: LOCKs that queue for the name (the
 * grantee among them unless it was one attempt).
 */
size_t waiter_turn(const struct waiter_life *granted, size_t nqueued);

/*
 * The client's input ended: the waiter may not wait any more, its
 * deadline is now (env->now_us).  Returns true when the caller must run
 * its timer now (outside a round); false when its round's end answers it.
 */
bool waiter_drain(struct waiter_life *wl, int64_t now_us);

/*
 * The client closed.  Returns true when the caller answers CANCELLED now
 * (outside a round); false when a round is in flight: the state is then
 * CANCELLED, and that round's end abandons the token (waiter_on_round).
 */
bool waiter_cancel(struct waiter_life *wl);

/*
 * A BREAK announced the end of the waiter's token: when a round is in
 * flight, whatever it returns is no lock (its fence may be above the
 * BREAK's), and its end releases it and tries again (waiter_on_round).
 * Nothing outside a round (its next try takes a new token).
 */
void waiter_broken(struct waiter_life *wl);

/* Readable names of a state and a timer, for logs and tests. */
const char *waiter_state_name(enum waiter_state state);
const char *waiter_timer_name(enum waiter_timer timer);

#endif /* REDLOCKD_WAITER_H */
