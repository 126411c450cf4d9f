/*
 * lock.h: the lock table: one entry per name with its holders (each a
 * lease) and its queue of waiters, and the operations a session asks for.
 *
 * Kinds (PROTOCOL.md section 9 has their keys and safety argument): an
 * exclusive hold (plain LOCK), a shared hold (any number at once, none
 * while an exclusive one is held: exclusive and shared are one family
 * of the same name), and a counted hold (at most limit holders at once,
 * each on a permit of its own).  One name is one kind at a time.
 *
 * Ownership: this module owns every struct lock, lease and waiter.  A
 * session embeds a struct lock_client, through which it asks for
 * operations and hears their results (one hook per verb, each with the
 * verb's own result type, struct lock_hooks) and lost leases (lost).
 *
 * Every operation ends with exactly one call of its verb's hook, possibly
 * before the operation function returns (re-entry, NOTHELD, errors
 * found at once).  A client has at most one operation in flight: the
 * line protocol answers in request order.
 */
#ifndef REDLOCKD_LOCK_H
#define REDLOCKD_LOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "daemon/util.h"

struct event_base;
struct conf;
struct lock;
struct waiter;

/* What an operation came to. */
enum lock_outcome {
    LOCK_OK,            /* LOCK granted (or re-entered); UNLOCK done */
    LOCK_BUSY,          /* TRYLOCK: someone holds it */
    LOCK_TIMEOUT,       /* LOCK: wait= ran out */
    LOCK_NOTHELD,       /* UNLOCK/EXTEND: not held (by this session or token) */
    LOCK_HELD,          /* STATUS: held */
    LOCK_FREE,          /* STATUS: free */
    LOCK_NOQUORUM,      /* too few masters answered; error says which */
    LOCK_LIMIT,         /* max_locks_per_client reached */
    LOCK_CONFLICT,      /* the request contradicts the client's own hold */
    LOCK_SHUTDOWN,      /* the daemon is stopping */
    LOCK_CANCELLED,     /* the client closed while the operation ran */
    LOCK_WRONG_KIND,    /* the name is held or waited for as another kind
                           (error says which) */
    LOCK_FAILED         /* an internal failure (random source, memory) */
};

/* The kind of hold a LOCK asks for. */
enum lock_kind {
    LOCK_KIND_EXCLUSIVE,    /* alone: the default */
    LOCK_KIND_SHARED,       /* with other shared holders, never with an exclusive one */
    LOCK_KIND_COUNTED       /* one of at most limit holders */
};

/* What a lock is bound to, as far as a result knows. */
enum lock_mode {
    LOCK_MODE_UNKNOWN,  /* not said (someone else's lock; a session-mode OK) */
    LOCK_MODE_SESSION,  /* this client's session-mode hold */
    LOCK_MODE_LEASE     /* a lease-mode lock, known by its token */
};

/*
 * What every verb's result begins with: the outcome, the name it was
 * about, and an error text.  Each verb has a result of its own that
 * embeds it as v, with only the fields valid for that verb, and a hook
 * of its own in struct lock_hooks.  Pointers are valid during the hook
 * call only.
 */
struct lock_verdict {
    enum lock_outcome outcome;  /* see above; each verb says which it gives */
    const char *name;           /* the lock name (not NUL-terminated) */
    size_t      name_len;       /* bytes in name */
    const char *error;          /* NOQUORUM/LIMIT/FAILED/WRONG_KIND/CONFLICT/SHUTDOWN:
                                   a one-line text; NULL otherwise */
};

/* LOCK and TRYLOCK (lock_acquire): OK, BUSY, TIMEOUT, NOQUORUM, LIMIT,
 * CONFLICT, WRONG_KIND, SHUTDOWN, CANCELLED, FAILED. */
struct lock_acquire_result {
    struct lock_verdict v;      /* the verdict */
    int64_t     validity_ms;    /* OK: validity left, ms */
    unsigned    holds;          /* OK in session mode: the re-entrant count */
    const char *token;          /* OK in lease mode: the owner token,
                                   NUL-terminated hex; NULL in session mode */
    int64_t     fence;          /* OK: the grant's fencing token, 0 if none */
    const char *fences;         /* OK of a fenced set: each name's fencing token, in
                                   the order the names were given, separated by
                                   commas ("5,9"); NULL otherwise (fence is then 0) */
    enum lock_kind kind;        /* OK: the kind of hold */
    unsigned    limit;          /* OK of a counted hold: the name's limit */
    int         permit;         /* OK of a counted hold: its permit's index; else -1 */
    int64_t     busy_ttl_ms;    /* BUSY: the holder's remaining ttl, ms, or -1 */
    bool        delayed;        /* BUSY: no holder, but a lock-delay is in force;
                                   busy_ttl_ms is its time left */
};

/* UNLOCK (lock_release): OK, NOTHELD, NOQUORUM, FAILED. */
struct lock_release_result {
    struct lock_verdict v;      /* the verdict */
    unsigned    holds;          /* OK: the re-entrant count left (0: released) */
    enum lock_mode mode;        /* OK: LOCK_MODE_LEASE for UNLOCK token= (no hold
                                   count); else LOCK_MODE_UNKNOWN */
};

/* EXTEND (lock_extend): OK, NOTHELD, NOQUORUM, FAILED. */
struct lock_extend_result {
    struct lock_verdict v;      /* the verdict */
    int64_t     validity_ms;    /* OK: the new lease's validity left, ms */
};

/* STATUS (lock_status): HELD, FREE, NOQUORUM, FAILED. */
struct lock_status_result {
    struct lock_verdict v;      /* the verdict */
    int64_t     ttl_ms;         /* HELD: the holders' remaining ttl, ms, or -1 */
    bool        owner_self;     /* HELD: held by this client (or by the token asked) */
    enum lock_mode mode;        /* HELD by this client: session or lease;
                                   else LOCK_MODE_UNKNOWN */
    int64_t     fence;          /* HELD by this client in session mode: its
                                   hold's fencing token; 0 if none or not known */
    enum lock_kind kind;        /* HELD: the kind of the holders */
    size_t      holders;        /* HELD: holders of that kind now */
    unsigned    limit;          /* HELD of a counted name: its limit */
    int         permit;         /* HELD by this client in session mode, counted:
                                   its permit; else -1 */
    const char *label;          /* HELD: the shown holder's label (NUL-terminated),
                                   NULL when it wrote none */
    int64_t     held_ms;        /* HELD with a label: how long that holder has held
                                   it, ms (-1 when unknown) */
    size_t      waiters;        /* HELD/FREE: LOCKs waiting on the name here */
    bool        renewed_here;   /* HELD: a session of this daemon holds the name,
                                   so this daemon's watchdog renews that hold */
    int64_t     delayed_ms;     /* FREE: a lock-delay is in force for this long,
                                   ms (-1: its mark has no expiry); 0: none */
};

/* BREAK (lock_break): OK, NOQUORUM, FAILED. */
struct lock_break_result {
    struct lock_verdict v;      /* the verdict */
    size_t      deleted;        /* OK: the most holders one master deleted */
    int64_t     fence_after;    /* OK: the name's fencing counter after the break */
    const char *label;          /* OK: a deleted holder's label, NULL when none */
};

/* Why a CHECK's grant is not current (lock_check_result.stale). */
enum lock_stale {
    LOCK_STALE_FREE,    /* nobody holds the name on a quorum */
    LOCK_STALE_OTHER,   /* others hold it on a quorum */
    LOCK_STALE_MIXED    /* the masters disagree; the grant is not on a quorum */
};

/* CHECK (lock_check): HELD (current), NOTHELD (stale), WRONG_KIND,
 * NOQUORUM, FAILED. */
struct lock_check_result {
    struct lock_verdict v;      /* the verdict */
    int64_t     ttl_ms;         /* HELD: the time it stays on a quorum without a
                                   renewal, ms, or -1 */
    enum lock_stale stale;      /* NOTHELD: why */
};

struct lock_client;

/*
 * What a client hears, one hook per verb (each operation ends with one
 * call of its verb's hook) and one for lost leases; all run from the
 * event loop, or from inside the operation's call (see above).
 */
struct lock_hooks {
    void (*acquired)(struct lock_client *c, const struct lock_acquire_result *res);
    void (*released)(struct lock_client *c, const struct lock_release_result *res);
    void (*extended)(struct lock_client *c, const struct lock_extend_result *res);
    void (*status)(struct lock_client *c, const struct lock_status_result *res);
    void (*broken)(struct lock_client *c, const struct lock_break_result *res);
    void (*checked)(struct lock_client *c, const struct lock_check_result *res);
    /* A held lease is gone (reason: a LOST reason word). */
    void (*lost)(struct lock_client *c, const char *name, size_t name_len,
                 const char *reason);
};

struct hold;

TAILQ_HEAD(hold_list, hold);

/* The lock side of a session; embedded in struct session. */
struct lock_client {
    const struct lock_hooks *hooks; /* what it hears (borrowed, static) */
    struct hold_list    holds;      /* session-mode holds, owned by lock.c */
    size_t              nholds;     /* entries in holds */
    struct waiter      *waiter;     /* pending LOCK, owned by lock.c */
    bool                closed;     /* lock_client_close() was called */
    bool                draining;   /* lock_client_drain() was called */
};

/*
 * Register with the engine.  The settings (lock.* and limits.*) are read
 * from ctx.conf when used and timers run on ctx.base (daemon/ctx.h).
 */
void lock_init(void);

/* Prepare a client: empty, hearing through hooks (borrowed: it must
 * outlive the client; a static table). */
void lock_client_init(struct lock_client *c, const struct lock_hooks *hooks);

/* What a LOCK or TRYLOCK asks for. */
struct lock_request {
    int64_t ttl_ms;     /* lease, ms, checked by the caller */
    int64_t wait_ms;    /* 0.., or -1 for no limit */
    bool    trylock;    /* one attempt (wait_ms unread), failure answers BUSY
                           (else TIMEOUT) */
    bool    lease_mode; /* mode=lease: not bound to the client, no watchdog;
                           the OK carries the token */
    bool    fence;      /* the grant carries a fencing token */
    enum lock_kind kind;/* what kind of hold */
    unsigned limit;     /* LOCK_KIND_COUNTED: 1..REDLOCK_LIMIT_MAX, checked by
                           the caller against lock.max_limit */
    const char *label;  /* who asks, for people: 1..64 bytes of 0x21-0x7E (borrowed,
                           copied) */
    size_t   label_len; /* bytes in label */
    bool     label_asked;/* the client asked for it (label=): it is written with
                           the lock on the masters, for every daemon to show;
                           else (a default label) it is kept here only, for
                           this daemon's LIST, STATUS and WATCH */
    int64_t  delay_ms;  /* an exclusive session-mode hold's lock-delay, ms (0:
                           none; checked by the caller): when the hold ends
                           without UNLOCK (its session closes, it is lost, a
                           BREAK), nobody is granted the name for that long;
                           the hold is then never handed over */
};

/*
 * LOCK / TRYLOCK name.  A name the client holds already in session mode
 * is re-entered at once (with the fence of the first grant; asking for a
 * fence on a hold granted without one, or another kind than the hold's,
 * is answered LOCK_CONFLICT, since a fence can only come from a grant).
 * A name held or waited for here as another kind (or another limit) is
 * answered LOCK_WRONG_KIND at once, and so is a round in which a master
 * holds it as another kind.  A lease-mode grant leaves no state
 * here: the lock lives on the masters until UNLOCK token= or its ttl.
 * Outcomes: LOCK_OK; LOCK_BUSY (TRYLOCK); LOCK_TIMEOUT when wait_ms ran
 * out; LOCK_NOQUORUM at once for wait_ms 0, otherwise only when the wait
 * ran out while the last attempt lacked a quorum (attempts without a
 * quorum are retried with a backoff from lock.retry_delay_ms doubling to
 * 500 ms); after lock_client_drain() every LOCK makes one attempt.
 */
void lock_acquire(struct lock_client *c, const char *name, size_t name_len,
                  const struct lock_request *req);

/*
 * UNLOCK name.  token NULL: the client's own session-mode hold, which is
 * decremented, or released (or handed over) on the masters at zero.
 * token (UTIL_TOKEN_HEX bytes): compare-and-delete that token on every
 * master, from any client.  Either way LOCK_OK only when a quorum
 * confirmed the delete (or, for a hand-over, the swap) of the token;
 * when a quorum answered but fewer held the token, a session-mode hold
 * is reported lost first (client->lost, reason gone) and the answer is
 * LOCK_NOTHELD; when fewer than a quorum answered, a session-mode hold
 * is reported lost (reason quorum) and the answer is LOCK_NOTHELD, and a
 * release by token answers LOCK_NOQUORUM.
 */
void lock_release(struct lock_client *c, const char *name, size_t name_len,
                  const char *token);

/*
 * EXTEND name token ttl: set the lease of the lock that holds token to
 * ttl_ms on every master (never re-creating a key): LOCK_OK with the new
 * validity, LOCK_NOTHELD (token wrong, expired, or confirmed too late;
 * the token is then compare-and-deleted on every master, so no minority
 * keeps it), or LOCK_NOQUORUM.  token is UTIL_TOKEN_HEX bytes.
 */
void lock_extend(struct lock_client *c, const char *name, size_t name_len,
                 const char *token, int64_t ttl_ms);

/* One name of a set (borrowed: valid for the call). */
struct lock_name {
    const char *s;      /* the name's bytes, not NUL-terminated */
    size_t      len;    /* 1..PROTO_NAME_MAX */
};

/*
 * LOCK / TRYLOCK n1 .. nk (2 <= n <= PROTO_SET_MAX, no two the same,
 * exclusive, as req asks otherwise): granted only when a quorum of
 * masters give the client every name at once (redlock_acquire_set), and
 * answered as lock_acquire() answers one name, the verdict's name being
 * the names as given, separated by single spaces.  The set waits in the
 * queue of every one of its names here, and asks the masters only when
 * it heads them all (PROTOCOL.md section 6, "Several names at once").
 * In session mode the grant is one hold per name, renewed as any hold;
 * losing one loses the set (one lost() call naming the set, and the
 * other names are released).  The same set asked again by the session
 * is re-entered; a set that shares a name with a hold of the session
 * (alone, or in another set) is answered LOCK_CONFLICT.  Outcomes as
 * lock_acquire's; LOCK_WRONG_KIND when a name is held or waited for
 * here, or on a majority, as a counted name.
 */
void lock_acquire_set(struct lock_client *c, const struct lock_name *names, size_t n,
                      const struct lock_request *req);

/*
 * UNLOCK n1 .. nk: without token, the session's set with exactly those
 * names (in any order): its count is decremented, or every name is given
 * up (hold_give_up) at zero; a set the session does not hold whole is
 * answered LOCK_CONFLICT when it holds some of the names, LOCK_NOTHELD
 * when none.  With token: each name's token is compare-and-deleted as
 * lock_release() does.  One answer for the set: LOCK_OK when every
 * name's was; else NOQUORUM when any was, else NOTHELD (a session's set
 * is then reported lost first, once).
 */
void lock_release_set(struct lock_client *c, const struct lock_name *names, size_t n,
                      const char *token);

/*
 * EXTEND n1 .. nk token ttl: each name as lock_extend(); LOCK_OK with
 * the least validity when every name's was OK; otherwise the set is no
 * lock: its token is released on every name, and the answer is NOTHELD.
 */
void lock_extend_set(struct lock_client *c, const struct lock_name *names, size_t n,
                     const char *token, int64_t ttl_ms);

/*
 * STATUS name: ask the masters.  With token, owner_self says whether a
 * quorum holds that token (a lease-mode lock); without, whether this
 * client holds it in session mode.
 */
void lock_status(struct lock_client *c, const char *name, size_t name_len,
                 const char *token);

/*
 * CHECK name: is one grant the name's current one on a quorum?  token
 * (UTIL_TOKEN_HEX bytes): the grant holding it, any kind; else fence (>=
 * 1) and, for a counted name, permit (>= 0; -1 for none): the grant told
 * that fence (daemon/redlock.h, redlock_check).  Answered through
 * hooks->checked; counted in stats.check_current and check_stale.
 */
void lock_check(struct lock_client *c, const char *name, size_t name_len, const char *token,
                int64_t fence, int permit);

/*
 * The label of the hold of name (lock.key_prefix not included) whose
 * token the masters showed (holder, NUL-terminated, as a status gives
 * it), when a session of this daemon holds it: *label (NUL-terminated,
 * owned by the hold: valid until the event loop runs again) and
 * *held_ms, how long it has been held (ms, on this daemon's clock).
 * For a hold whose label lives here only (a LOCK without label=), which
 * the masters cannot show.  Returns false when no hold of this daemon
 * has that token (nothing is written).
 */
bool lock_hold_label(const char *name, size_t name_len, const char *holder,
                     const char **label, int64_t *held_ms);

/*
 * A master announced that key was released (daemon/redlock.h) by the
 * lease whose token is token/token_len: wake the name's oldest waiter,
 * if any, to try at once.  The masters each announce the same release;
 * the token makes the waiter act on it once.
 */
void lock_released(const char *key, size_t key_len, const char *token, size_t token_len);

/*
 * The client's input ended (it half-closed, or closed): it will send no
 * more requests, so nothing can be waited for on its behalf.  A pending
 * LOCK stops waiting: it is answered after its attempt in flight, if
 * any (OK when that grants, else TIMEOUT, or NOQUORUM when its last
 * attempt lacked a quorum), and every later LOCK makes one attempt only,
 * as with wait=0.  The client still holds its locks until
 * lock_client_close().
 */
void lock_client_drain(struct lock_client *c);

/*
 * A lease-mode grant whose OK never reached its client (its session
 * closed before the answer, or the reply's delivery receipt said so:
 * daemon/session.h, session_reply_tracked; daemon/command.c calls this,
 * the session knows no locks): nobody knows the token, so
 * compare-and-delete it on every master now (announced; this daemon's
 * waiters on the name are woken when it is done).  token is
 * UTIL_TOKEN_HEX bytes.  name may be a set's names, separated by single
 * spaces (a set's OK names them so): each one is released.
 */
void lock_abandon(const char *name, size_t name_len, const char *token);

/*
 * The client's connection closed (or is closing and will send nothing
 * more): cancel a pending LOCK (first, so that a released lock is never
 * handed to the client's own dying waiter), then release every lease on
 * the masters at once.  Calling it again does nothing more.  An operation in flight still ends
 * with one call of its hook (LOCK_CANCELLED, or the result of an UNLOCK or
 * STATUS round), possibly during this call: the client must stay
 * allocated until then.
 */
void lock_client_close(struct lock_client *c);

/*
 * The daemon is stopping: push LOST reason=shutdown for every lease of
 * the client, release them on the masters, and end a pending LOCK with
 * LOCK_SHUTDOWN.
 */
void lock_client_shutdown(struct lock_client *c);

/* Refuse new operations from now on (LOCK_SHUTDOWN). */
void lock_set_shutdown(void);

/* One line of LIST: a session-mode hold of this daemon, or a queued LOCK. */
struct lock_listing {
    const char *name;           /* the lock's name (not NUL-terminated) */
    size_t      name_len;       /* bytes in name */
    bool        held;           /* a hold; else a waiting LOCK */
    const char *label;          /* its label, NUL-terminated */
    const struct lock_client *client; /* the session that holds or waits */
    int64_t     ttl_ms;         /* held: validity left, ms */
    int64_t     held_ms;        /* held: since the grant; waiting: since the LOCK, ms */
    int64_t     fence;          /* held: its fencing token, 0 if none */
    enum lock_kind kind;        /* the kind of hold it has or asks for */
    unsigned    limit;          /* counted: the name's limit */
    int         permit;         /* held, counted: its permit, else -1 */
    unsigned    holds;          /* held: re-entrant count */
    size_t      waiters;        /* LOCKs queued on the name here */
    size_t      position;       /* waiting: 1 for the next to be served */
};

typedef void (*lock_list_fn)(const struct lock_listing *e, void *arg);

/*
 * LIST: visit, in name order (bytes, then length), at most max_names
 * names this daemon holds or waits for that start with prefix
 * (prefix_len bytes; NULL for all) and come after `after` (after_len
 * bytes; NULL to begin), calling fn for each of their holds, then each
 * of their queued LOCKs.  The last name visited is copied into last
 * (room for PROTO_NAME_MAX bytes), its length into *last_len, so that
 * the next call can go on from it: a long listing is made in steps
 * without a snapshot.  The cursor is a name, not an entry, so a name
 * present from the first step to the last is visited by exactly one
 * of them, whatever is added or removed between steps (the cursor's
 * own entry included); others are listed or not as they are at each
 * step.  fn must not change the table.  O(log n + max_names) per call
 * for n names in the table: the walk starts at the first name after
 * the cursor and at or after the prefix (RB_NFIND), and stops at the
 * first name without the prefix.  Counts the step and the entries it
 * looked at in STATS (list_steps, list_entries_visited).  Returns the
 * names visited (fewer than max_names: the end); never fails.
 */
size_t lock_list(const char *prefix, size_t prefix_len, const char *after, size_t after_len,
                 size_t max_names, lock_list_fn fn, void *arg, char *last, size_t *last_len);

/*
 * BREAK name: end the lock whoever holds it, through any daemon
 * (daemon/redlock.h redlock_break).  LOCK_OK with deleted (the most a
 * master deleted), fence_after (the raised counter) and label (a deleted
 * holder's, or NULL); LOCK_NOQUORUM.  The sessions that held it, here
 * or on other daemons, hear LOST reason=broken.  The caller checks the
 * right to ask.
 */
void lock_break(struct lock_client *c, const char *name, size_t name_len);

/*
 * The status page's view (daemon/status_page.h): visit the first
 * max_names names of the table in name order, calling fn for each of
 * their holds, then each of their queued LOCKs, as lock_list() does,
 * but without a cursor and without counting in STATS (a page is no
 * LIST).  fn must not change the table.  O(max_names + log n).
 * Returns the names visited.
 */
size_t lock_view(size_t max_names, lock_list_fn fn, void *arg);

/* Counters for STATS. */
size_t lock_count_held(void);
size_t lock_count_waiters(void);

/* Names in the table now: held or waited for here.  O(1). */
size_t lock_count_names(void);

#endif /* REDLOCKD_LOCK_H */
