/*
 * lock_table.h: what the lock module's three files share (private to
 * daemon/lock*.c): the entry of a name, a session's hold and a pending
 * LOCK, the module's state, and the functions one file calls in another.
 * daemon/lock.h is the module's interface to the rest of the daemon.
 */
#ifndef REDLOCKD_LOCK_TABLE_H
#define REDLOCKD_LOCK_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bsd/sys/tree.h>
#include <event2/event_struct.h>

#include "daemon/lease.h"
#include "daemon/lock.h"
#include "daemon/redlock.h"
#include "daemon/util.h"
#include "daemon/waiter.h"

/*
 * One name.  Owned by the table; freed when it has neither holder nor
 * waiters.  key holds key_prefix + name; name points into key.
 */
struct lock {
    RB_ENTRY(lock)      entry;      /* in lock_table */
    char               *key;        /* malloc'd: prefix + name, NUL-terminated */
    size_t              key_len;    /* bytes in key */
    const char         *name;       /* key + prefix length */
    size_t              name_len;   /* bytes in name */
    TAILQ_HEAD(, hold)  holders;    /* this daemon's session-mode holds of it */
    size_t              nholders;   /* entries in holders */
    size_t              nexclusive; /* of them, exclusive */
    bool                counted;    /* the kind asked for here: counted (else the
                                       exclusive/shared family) */
    unsigned            limit;      /* counted: the limit */
    unsigned            next_slot;  /* counted: the permit to propose next */
    TAILQ_HEAD(, waiter) waiters;   /* pending LOCKs, oldest first */
    struct waiter      *head;       /* lock_head()'s answer at head_epoch (lock_queue.c) */
    uint64_t            head_epoch; /* the lock_changed() epoch head was found at; 0 none */
    size_t              nwaiters;   /* entries in waiters */
    size_t              nqueued;    /* of them, not wait=0 */
    bool                watched;    /* subscribed to the name's release channel:
                                       from the first of them that had to wait
                                       until nqueued drops to 0 */
    size_t              turn_left;  /* local hand-overs left in this daemon's turn */
    bool                remote;     /* other daemons were seen waiting at the last grant */
    int64_t             yield_until_us; /* after yielding: the head waits until then */
    int64_t             subscribe_until_us; /* the release channel's subscription started
                                       (lock_watch) and is not confirmed everywhere:
                                       the head's next try waits for it until then;
                                       0 when not waiting for it */
    char                yield_token[UTIL_TOKEN_HEX]; /* the lease released by the yield */
};

/*
 * A session-mode hold: a lease (daemon/lease.h, which owns its fields)
 * and who holds it.  Owned by this module; freed when released or lost.
 */
struct hold {
    struct lease        lease;      /* the lease on the masters; key borrowed from lock */
    struct lock        *lock;       /* the name's entry */
    struct lock_client *client;     /* the session that holds it */
    TAILQ_ENTRY(hold)   client_link;/* in client->holds */
    TAILQ_ENTRY(hold)   lock_link;  /* in lock->holders */
    unsigned            holds;      /* re-entrant count, >= 1 */
    struct hold_set    *set;        /* the set it is part of (lock_set.c), or NULL */
    size_t              set_index;  /* its place in set->hold[] */
    int64_t             granted_us; /* monotonic time of the grant (LIST's held_ms) */
    char                label[REDLOCK_LABEL_MAX + 1]; /* who holds it, for people */
};

/*
 * A pending LOCK.  Owned by this module; freed when answered.  Its state,
 * and everything the queue's decisions read, is its life (daemon/waiter.h,
 * which moves it on); the rest is what the I/O needs.  A waiter keeps its
 * own copy of the key so that a cancelled waiter whose round is still in
 * flight can clean up after its entry is gone.
 */
struct waiter {
    struct waiter_life  life;       /* its state and what the policy knows */
    struct lock        *lock;       /* entry, NULL once out of the queue (cancelled) */
    struct lock_client *client;     /* who asked */
    TAILQ_ENTRY(waiter) link;       /* in lock->waiters */
    struct event        retry;      /* its timer: a retry, a wake-up or the wait= deadline */
    char                token[UTIL_TOKEN_HEX + 1]; /* owner token of this try: a new one
                                       once a release of the last one was sent
                                       (waiter_retire_token) */
    char                gate_id[UTIL_TOKEN_HEX + 1]; /* what its gate holds: its first
                                       token, kept across tries */
    char                ghost[UTIL_TOKEN_HEX + 1]; /* the last retired token whose try
                                       was sent on a link that then failed: its
                                       record may land late, and the next tries
                                       take it over (REDLOCK_ACQUIRE_ADOPT);
                                       "" when none */
    int64_t             start_us;   /* monotonic time of lock_acquire(), for the latency */
    bool                lease_mode; /* mode=lease: no lease struct once granted */
    bool                fence;      /* the grant carries a fencing token */
    unsigned            slot;       /* a permit: the one it asks for now */
    unsigned            limit;      /* a permit: the name's limit */
    char                woken_by[UTIL_TOKEN_HEX]; /* token of the last release heard */
    char                retired[UTIL_TOKEN_HEX]; /* the last token it released: its own
                                       clean-up's announcement wakes nobody here */
    char               *noquorum;   /* malloc'd text of the last attempt's NOQUORUM,
                                       while life.noquorum */
    char                label[REDLOCK_LABEL_MAX + 1]; /* the holder's label */
    bool                label_asked;/* written with the record on the masters (label=);
                                       else kept here only */
    struct lock_set    *set;        /* a set LOCK's member (lock_set.c), or NULL for a
                                       LOCK of one name */
    uint64_t            line_epoch; /* a set's member: when in_line was found */
    bool                in_line;    /* a set's member: it stands in its name's line
                                       (waiter_in_line in lock_queue.c) */
    int64_t             delay_ms;   /* the lock-delay its hold asks for, ms; 0: none */
    bool                delayed;    /* its last try was refused by a lock-delay */
    int64_t             claim_since_us; /* CLOCK_MONOTONIC of the first of its tries in a
                                       row that a waiting set's claim refused; 0: none */
    bool                take_claim; /* it waited on claims for its ttl: its next tries
                                       take a claim over (REDLOCK_ACQUIRE_TAKE_CLAIM) */
    size_t              name_off;   /* name = key + name_off */
    size_t              key_len;    /* bytes in key */
    char                key[];      /* prefix + name, NUL-terminated */
};

/*
 * A LOCK of several names (lock_set.c): one waiter per name, each in its
 * name's queue, all with the same token.  The first in canonical order
 * leads: its life alone is moved on by the policy, its timer alone runs,
 * and it alone is the client's waiter; the others only hold their place
 * in their queues, and anything that wakes one wakes the lead.  Owned by
 * the lead; freed with it.
 */
struct lock_set {
    size_t              n;          /* names, 2..PROTO_SET_MAX */
    bool                claimed;    /* a try may have claimed names (or closed gates)
                                       for it somewhere: they are dropped when it goes
                                       (redlock_unclaim, redlock_ungate) */
    bool                was_ready;  /* ready at the last look after a change
                                       (lock_reline_cb) */
    TAILQ_ENTRY(lock_set) link;     /* in the waiting sets (lock_set_listed) */
    uint64_t            woke_epoch; /* the last lock_changed() at which, not ready, it
                                       woke the LOCKs behind its members */
    size_t              given[REDLOCK_SET_MAX]; /* member i's place in the client's list */
    int64_t             fences[REDLOCK_SET_MAX]; /* a fenced grant: member i's fence */
    char               *text;       /* malloc'd: the names as the client gave them,
                                       one space between two (replies, LOST) */
    size_t              text_len;   /* bytes in text */
    struct waiter      *member[];   /* by canonical order (lock_set_order); member[0]
                                       leads */
};

/* The waiter whose life decides for w: its set's lead, or w itself. */
#define W_LEAD(w)           ((w)->set != NULL ? (w)->set->member[0] : (w))

/*
 * The holds of a granted set (lock_set.c): one per name, one lease each,
 * all with the set's token; they are released together, and losing any
 * one loses them all (the client hears one LOST naming the set).  Freed
 * when its last hold is dropped.
 */
struct hold_set {
    size_t              n;          /* names */
    size_t              left;       /* holds not dropped yet */
    bool                reported;   /* the client heard LOST for the set */
    struct event        reap;       /* after a loss: gives up the other holds on the
                                       next loop turn (lock_set.c) */
    char               *text;       /* malloc'd: as struct lock_set's */
    size_t              text_len;   /* bytes in text */
    struct hold        *hold[];     /* by canonical order; NULL once dropped */
};

/* One attempt only (TRYLOCK, wait=0, a client whose input ended): never queued behind. */
#define W_ONCE(w)           WAITER_ONCE(&(w)->life)

/* An UNLOCK, EXTEND or STATUS in flight. */
struct lock_op {
    struct lock_client *client;     /* who asked */
    bool                holder_self;/* STATUS: the client holds the name */
    bool                by_token;   /* UNLOCK/STATUS/EXTEND with token= */
    int64_t             fence;      /* STATUS of the client's hold: its fence */
    int                 permit;     /* STATUS of the client's counted hold: its
                                       permit, else -1 */
    char                token[UTIL_TOKEN_HEX + 1]; /* by_token: the token */
    size_t              name_off;   /* name = key + name_off */
    size_t              key_len;    /* bytes in key */
    char                key[];      /* prefix + name */
};

/* A hand-over in flight: a released lease's keys going to the head waiter. */
struct lock_handover {
    struct waiter      *waiter;     /* who receives the lock */
    struct lock_op     *op;         /* the UNLOCK to answer, or NULL */
    char                old_token[UTIL_TOKEN_HEX + 1]; /* the released lease */
};

/* A token released for nobody (lock_abandon); freed when the masters answered. */
struct lock_orphan {
    size_t              name_len;   /* bytes in name */
    char                name[];     /* the lock's name */
};

/* The verb a bare verdict answers (lock_reply): whose hook hears it. */
enum lock_verb {
    LOCK_VERB_ACQUIRE,  /* LOCK, TRYLOCK */
    LOCK_VERB_RELEASE,  /* UNLOCK */
    LOCK_VERB_EXTEND,   /* EXTEND */
    LOCK_VERB_STATUS,   /* STATUS */
    LOCK_VERB_BREAK     /* BREAK */
};

/* The daemon is stopping: no hand-over, no grant (lock.c owns it). */
extern bool lock_stopping;

/* ---- defined in lock.c ---- */

/* The entry of name, or NULL when this daemon neither holds nor waits for it. */
struct lock *lock_find(const char *name, size_t name_len);

/* Write key_prefix + name and a NUL into out; returns the key's length. */
size_t lock_key_write(char *out, const char *name, size_t name_len);

/* The entry of name, made (with no holder and no waiter) when there is none. */
struct lock *lock_get(const char *name, size_t name_len);

/* Free an entry that has nothing left in it. */
void lock_put(struct lock *lk);

/* Answer c's verb with an outcome and nothing more (its other fields 0, permit -1). */
void lock_reply(struct lock_client *c, enum lock_verb verb, enum lock_outcome outcome,
                const char *name, size_t name_len, const char *error);

/* The record letter of a requested kind. */
enum redlock_kind lock_record_kind(enum lock_kind kind);

/* The kind of hold of a record letter: the inverse of lock_record_kind(). */
enum lock_kind lock_kind_of(enum redlock_kind kind);

/* The words a kind of hold is called in texts, with its article. */
const char *lock_kind_word(enum redlock_kind kind);

/*
 * The text of ERR KIND for name, from what a master said ("limit=3",
 * "exclusive", "shared") or this daemon knows.
 */
void lock_kind_text(char *out, size_t size, const char *name, size_t name_len,
                    const char *what);

/*
 * Whether a request of this kind and limit fits the kind the name has
 * here (its holds and waiters); when not, the text of ERR KIND.
 */
bool lock_kind_fits(const struct lock *lk, const struct lock_request *req, char *out,
                    size_t size);

/*
 * The client's session-mode hold of lk, or NULL: looked for in the
 * shorter of the client's holds and the name's (both are usually one
 * long; either may be long: a session with many names, a name with many
 * shared holders).
 */
struct hold *client_hold(const struct lock_client *c, const struct lock *lk);

/* Put a new hold (its lease started) in the table and the client's holds. */
void hold_insert(struct hold *h, struct lock *lk, struct lock_client *c);

/*
 * Take a hold out of the table and the client, end its lease (unless
 * it is lost already), and free it.  The keys on the masters are not
 * touched here.  The head waiter, if any, is woken to try the masters.
 */
void hold_drop(struct hold *h);

/*
 * This module found a hold lost (why: QUORUM for a grant that replaced
 * it, SHUTDOWN): the lease ends LOST, the client hears it first, then
 * the hold goes.  The keys are not touched here.
 */
void hold_lost(struct hold *h, enum lease_reason why);

/*
 * The hold of this daemon on the record rec: the exclusive one, or the
 * one on the same permit; NULL for a shared record (they exclude
 * nobody) or when there is none.
 */
struct hold *lock_same_record(const struct lock *lk, const struct redlock_rec *rec);

/* ---- defined in lock_queue.c ---- */

/* Let the name's head, if any and if this daemon's holds leave it room, look again. */
void lock_wake_head(struct lock *lk);

/*
 * Give up a hold (UNLOCK to zero, or its session closed): hand it over
 * to the head waiter, yield the name to another daemon's turn, or
 * compare-and-delete it on every master (waiter_give_up decides).  op,
 * when not NULL, is the UNLOCK to answer once the masters did.  Without
 * one (its session closed, the daemon stopping), a hold with a lock-delay
 * is never handed over: it is released with its delay
 * (redlock_release_delayed).  Frees the hold.
 */
void hold_give_up(struct hold *h, struct lock_op *op);

/* Detach a waiter from its entry (the entry may be freed). */
void waiter_unqueue(struct waiter *w);

/* Answer the waiter's client and free the waiter. */
void waiter_finish(struct waiter *w, enum lock_outcome outcome, int64_t ttl_ms,
                   const char *error);

/*
 * A master confirmed the subscription to key's release channel.  While
 * the head's try waits for the subscription (lock_watch), the last
 * confirmation needed lets it go; any later one (a subscriber link that
 * came back, whose master's announcements were lost meanwhile, or one
 * that came after the deadline) makes the head try again, as an
 * announcement would.
 */
void lock_subscribed(const char *key, size_t key_len);

/* The head, when this daemon's holds leave it room to ask the masters; else NULL. */
struct waiter *lock_ready_head(struct lock *lk);

/*
 * A queue or a hold changed: what a set's member found of its line
 * (waiter_in_line) is to be found again.  Called by every change of
 * either (waiter_enqueue, waiter_unqueue, hold_insert, hold_drop).
 */
void lock_changed(void);

/* The number of lock_changed() calls so far (waiter_in_line's memo). */
uint64_t lock_epoch_now(void);

/*
 * Let a waiter look again: from its timer on the next loop turn, or,
 * when its round is in flight, at once after the round if it finds the
 * name busy.  A set's member rouses its lead.
 */
void waiter_rouse(struct waiter *w);

/* ---- defined in lock_set.c (the waiting sets) ---- */

/* A set starts (on) or ends (!on) waiting: it is looked at after each lock_changed(). */
void lock_set_listed(struct lock_set *set, bool on);

/*
 * A queue or a hold changed (lock_changed): on the next loop turn each
 * waiting set looks again (lock_reline_cb).
 */
void lock_set_changed(void);

/*
 * A set that is not ready lets the sleeping single LOCKs behind its
 * members that stand aside go, once per change.
 */
void lock_set_let_by(struct lock_set *set);


/*
 * Put a new waiter (its life started) at the tail of lk's queue, its
 * timer ready; w->lock becomes lk.
 */
void waiter_enqueue(struct waiter *w, struct lock *lk);

/* A round of a waiter ended (its own try, or a hand-over to it): the policy's step. */
void waiter_acquired(const struct redlock_acquire_result *res, void *arg);

/*
 * Free an answered waiter (a set's lead: its members and the set too):
 * out of its queues, its timer stopped, its gate opened and its ghost
 * released.
 */
void waiter_free(struct waiter *w);

/* Queued: subscribe to the names' releases, and arm the timer for wait=. */
void waiter_wait(struct waiter *w);

/*
 * A waiter's LOCK is answered with an outcome STATS counts (answer, not
 * OK): ttl_ms, BUSY's time left; text, KIND's or NOQUORUM's.
 */
void waiter_refuse(struct waiter *w, enum waiter_answer answer, int64_t ttl_ms,
                   const char *text);

/*
 * A lease-mode grant (res) of w: out (its name set by the caller, and
 * valid until this returns) gets the token and the validity, the waiter
 * is freed, and its client hears OK.
 */
void waiter_grant_lease(struct waiter *w, const struct redlock_acquire_result *res,
                        struct lock_acquire_result *out);

/* The client's LOCK of name (the set's text for a set) is answered: its latency. */
void waiter_observe(const struct waiter *w);

/* ---- defined in lock_set.c ---- */

/*
 * Whether every member of the set is the ready head of its name here:
 * only then does the lead ask the masters.
 */
bool lock_set_ready(const struct lock_set *set);

/* Ask the masters for the whole set (the lead's try): one script per master. */
void lock_set_try(struct waiter *lead);

/* The set's round granted it: its holds (or, in lease mode, its token) to the client. */
void lock_set_grant(struct waiter *lead, const struct redlock_acquire_result *res);

/*
 * Release the lead's token on every name of its set (a try that did not
 * win, or a grant not delivered); abandon: as lock_abandon, so that our
 * own heads look again once done.
 */
void lock_set_release(struct waiter *lead, const char *token, bool abandon);

/* Free a set's members but the lead, and the set (the lead's waiter_free). */
void lock_set_free(struct waiter *lead);

/*
 * A hold of a set was lost (its lease, or this module's verdict): the
 * client hears one LOST for the set (unless it heard it already), and
 * the set's other holds are given up (hold_give_up).  Called after h's
 * own LOST was pushed; drops h.
 */
void hold_set_lost(struct hold *h);

/*
 * Before h is used for a request: when h's set was lost already (its
 * client told, its other holds about to be given up on the next loop
 * turn), they are all given up now, h with them.  h may be freed.
 */
void hold_set_settle(struct hold *h);

/*
 * The text of CONFLICT, into out, for verb ("a LOCK", "an UNLOCK") of
 * names that share the session's hold h without being its set.
 */
void lock_set_conflict(char *out, size_t size, const struct hold *h, const char *verb);

/* ---- defined in lock_verbs.c ---- */

/* An UNLOCK or STATUS op for name, with its own copy of the key. */
struct lock_op *lock_op_new(struct lock_client *c, const char *name, size_t name_len);


/*
 * An UNLOCK's release (or a hand-over's verdict on the released lease)
 * ended: answer the op's client OK only where a quorum confirmed its
 * token, else NOTHELD (a session's hold is then reported lost first) or
 * NOQUORUM; frees the op.  arg: the struct lock_op.
 */
void lock_unlock_done(const struct redlock_release_result *rr, void *arg);

/*
 * A master says a BREAK deleted the holds of key with these tokens: each
 * session of ours holding one of them hears LOST reason=broken, and what
 * masters that missed the BREAK keep of its token is deleted.  Every
 * master sends its copy; the later ones find nothing left to do.
 */
void lock_broken(const char *key, size_t key_len, const char *tokens, size_t tokens_len);

#endif /* REDLOCKD_LOCK_TABLE_H */
