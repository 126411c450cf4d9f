/*
 * redlock.h: the Redlock algorithm over N independent masters.
 *
 * Source: the Redis distributed-locks page ("Distributed Locks with
 * Redis", redis.io/docs/manual/patterns/distributed-locks), section "The
 * Redlock Algorithm", and the project's safety notes, proto/SAFETY.md.
 *
 * Key layout of an exclusive lock, compatible with redsync, node-redlock
 * and redlock-rb: the key is a plain string set with SET key token NX PX
 * ttl; the token is a 128-bit random value in hex; release is
 * compare-and-delete; extend is compare-and-PEXPIRE and never re-creates
 * a key.  Counted and shared holds (struct redlock_rec) have their own
 * records next to it: PROTOCOL.md section 9 lists every key.
 *
 * Each operation is one round (daemon/round.h).  Results are delivered
 * through a callback from the event loop, never from inside the call.
 *
 * The engine is one module in five files, by operation family:
 * daemon/redlock.c (scripts, quorum and validity arithmetic, what the
 * operations share, daemon/redlock_op.h), daemon/redlock_acquire.c
 * (acquire, hand-over, fencing, release), daemon/redlock_holders.c
 * (status, BREAK), daemon/redlock_extend.c (renewal, restore) and
 * daemon/redlock_channels.c (the names' channels).
 */
#ifndef REDLOCKD_REDLOCK_H
#define REDLOCKD_REDLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REDLOCK_ERROR_MAX 1024      /* room for a NOQUORUM text */

/*
 * Names derived from a lock's key.  A space can never be part of a lock
 * name (PROTOCOL.md section 2), so neither can collide with any lock's
 * key, whatever lock.key_prefix is.
 */
#define REDLOCK_FENCE_SUFFIX   " fence"     /* key of the name's fence counter */
#define REDLOCK_CHANNEL_SUFFIX " released"  /* pub/sub channel announcing releases */
#define REDLOCK_CHANGED_SUFFIX " changed"   /* pub/sub channel announcing grants,
                                               releases and breaks to watchers */
#define REDLOCK_PERMIT_SUFFIX  " permit "   /* + index: one permit of a counted name */
#define REDLOCK_GATE_SUFFIX    " gate"      /* a waiting exclusive LOCK's gate */
#define REDLOCK_LIMIT_MAX      1000         /* most permits a counted name may have */
#define REDLOCK_LABEL_SUFFIX   " label "    /* record key + this + token: the holder's
                                               label, "<grant ms> <fence> <text>" */
#define REDLOCK_BROKEN_SUFFIX  " broken"    /* lock.key_prefix + this: the channel on
                                               which BREAK tells every daemon */
#define REDLOCK_WAITING_SUFFIX " waiting"   /* the name's waiters' mark: set by a refused
                                               request that waits, read and deleted by
                                               every release, which announces only then */
#define REDLOCK_WATCHING_CHANNEL "redlockd watching" /* every daemon with a WATCH is
                                               subscribed to it on every master; grants
                                               and releases tell watchers only then */
#define REDLOCK_DELAY_SUFFIX   " delay"     /* "<ms> <token>": the lock-delay an exclusive
                                               hold asked for, with its record's expiry,
                                               read by BREAK */
#define REDLOCK_DELAY_MARK     "delay "     /* + the ended hold's token: the name's key
                                               during a lock-delay (SET NX fails on it) */
#define REDLOCK_CLAIM_MARK     "claim "     /* + a waiting set's id: a free name's key that
                                               the set reserved while it waits for a later
                                               name of it (acquire_set.lua); SET NX fails
                                               on it, so other requests wait for the set */
#define REDLOCK_LABEL_MAX      64           /* longest holder label, bytes */
#define REDLOCK_WHO_MAX        64           /* most bytes of a holder's token kept by a
                                               status (a foreign client's may be longer) */

/* Longest lock key: lock.key_prefix (<= 256) + a name (<= 250).  The
 * operations refuse a longer key (-1). */
#define REDLOCK_KEY_MAX        512
/* Room for a key plus any suffix (" permit 999 fence" is the longest) and a NUL. */
#define REDLOCK_DERIVED_MAX    (REDLOCK_KEY_MAX + 32)
#define REDLOCK_NO_EXPIRY (-1)      /* a busy key that has no ttl */

/* Outcome of an acquire or status round. */
enum redlock_outcome {
    REDLOCK_GRANTED,    /* acquire: a quorum granted with validity > 0 */
    REDLOCK_BUSY,       /* acquire: not granted, someone holds the key */
    REDLOCK_HELD,       /* status: a quorum does not see the key free */
    REDLOCK_FREE,       /* status: a quorum sees the key free */
    REDLOCK_LATE,       /* acquire: a quorum granted, but too little validity
                           was left when the round ended (it is not a grant) */
    REDLOCK_RELEASED,   /* release: a quorum confirmed the compare-and-delete */
    REDLOCK_GONE,       /* release: the answers tell that fewer than a quorum
                           still held our token (it was no longer a lock) */
    REDLOCK_NOTHELD,    /* extend: a quorum did not confirm within validity */
    REDLOCK_KIND,       /* acquire: not granted, and a master holds the name
                           as another kind (v.error says which) */
    REDLOCK_NOQUORUM    /* fewer than a quorum of masters answered */
};

/*
 * The kinds of hold (PROTOCOL.md section 9 has their keys and their
 * safety argument).  The value is the letter the scripts use.
 */
enum redlock_kind {
    REDLOCK_EXCLUSIVE = 'x',    /* the key, a string, holds the token */
    REDLOCK_SHARED = 's',       /* a member of the key, then a sorted set, scored
                                   by its expiry */
    REDLOCK_PERMIT = 'p',       /* key + " permit <i>" holds the token: permit i
                                   of a counted name, an exclusive lock of its own */
    REDLOCK_ANY = '?'           /* release, extend: whichever record of the name
                                   holds the token (a lease-mode token; for a
                                   counted name each master reads its permits) */
};

/*
 * Where one holder's record lives on the masters.  base is the name's
 * key (lock.key_prefix + name), borrowed; the record's own keys are
 * derived from it inside the engine.
 */
struct redlock_rec {
    const char        *base;    /* the name's key, not NUL-terminated */
    size_t             base_len;/* bytes in base, <= REDLOCK_KEY_MAX */
    enum redlock_kind  kind;    /* see above */
    unsigned           slot;    /* PERMIT: the permit's index, < limit */
    unsigned           limit;   /* PERMIT: the name's limit, 1..REDLOCK_LIMIT_MAX */
    bool               labelled;/* the holder may have a label on the masters (a
                                   release then deletes it; false saves the command) */
    int64_t            delay_ms;/* EXCLUSIVE: the lock-delay the hold asked for, ms,
                                   kept on the masters with its record (written by
                                   its grant, extended by renewals, deleted by
                                   releases); 0: none, and nothing is sent */
};

/* What a batched renewal came to for one lease (redlock_renewal_verdict). */
enum redlock_renewal {
    REDLOCK_RENEWED,    /* a quorum confirmed within the validity: a new lease */
    REDLOCK_DENIED,     /* a majority of the masters do not hold our token */
    REDLOCK_TOO_LATE,   /* a quorum confirmed, but after the validity ended */
    REDLOCK_UNDECIDED   /* too few answers to tell; try again while valid */
};

/*
 * What every operation's result begins with (the verdict of its round).
 * Each operation has a result of its own that embeds it as v, and a
 * callback of its own: the compiler says which fields an operation has.
 */
struct redlock_verdict {
    enum redlock_outcome outcome;       /* see above; each operation's function
                                           says which it gives */
    int64_t start_us;                   /* monotonic, before the first send */
    size_t  answered;                   /* masters that answered */
    size_t  confirmed;                  /* masters that said yes to what the
                                           operation asks (its result type
                                           says what that is) */
    char    error[REDLOCK_ERROR_MAX];   /* NOQUORUM (and KIND): who failed and
                                           how, NUL-terminated; "" otherwise */
};

/* An acquire's result (redlock_acquire); confirmed: masters that granted. */
struct redlock_acquire_result {
    struct redlock_verdict v;           /* GRANTED, BUSY, LATE, KIND, NOQUORUM */
    int64_t validity_end_us;            /* GRANTED: start + ttl - drift, us */
    int64_t busy_ttl_ms;                /* BUSY: the holder's remaining time as
                                           seen by a quorum, ms, or
                                           REDLOCK_NO_EXPIRY */
    size_t  swapped;                    /* with old_token (a hand-over): masters
                                           where the key still held old_token
                                           and was given the new one */
    enum redlock_outcome released;      /* with old_token: the verdict on the
                                           releaser's token, as for a release
                                           (redlock_release_verdict of swapped;
                                           RELEASED, GONE, NOQUORUM with v.error
                                           naming the silent masters) */
    size_t  subscribers;                /* GRANTED: the most clients subscribed
                                           to the name's release channel on a
                                           granting master (other daemons'
                                           waiters, and ours) */
    int64_t fence;                      /* GRANTED with FENCE: the grant's fencing
                                           token, written back to a majority;
                                           0 otherwise */
    int     free_slot;                  /* a PERMIT, not granted: a permit no
                                           answering master reported held, worth
                                           trying next; -1 when every permit was
                                           held somewhere (or not a permit) */
    bool    split;                      /* BUSY: no single token refused on a
                                           quorum of the masters (each refusal
                                           names the token in the way; masters
                                           that granted, did not answer or hold
                                           another kind count for none, so a
                                           holder whose other masters did not
                                           answer looks split too): as a rule the
                                           records in the way are partial grants
                                           of contenders that split the vote, or
                                           leftovers of several holders;
                                           busy_ttl_ms says when they expire, but
                                           a new try may win much sooner */
    uint64_t holder_id;                 /* BUSY, not split: redlock_token_id() of the
                                           token that refused on a quorum (the
                                           holder a waiter waits for); 0 otherwise */
    bool    gated;                      /* an exclusive record with WAIT: a master
                                           closed the gate for this token
                                           (redlock_ungate() opens it) */
    bool    readers;                    /* an exclusive record with WAIT: a master
                                           that answered refused it for shared
                                           holders (gate closed or not) */
    bool    claimed;                    /* a set with WAIT: a master claimed names
                                           for it (redlock_acquire_set) */
    bool    claim_held;                 /* BUSY, not split: what refused on a quorum is
                                           a waiting set's claim (REDLOCK_CLAIM_MARK) */
    bool    delayed;                    /* BUSY, not split: what refused on a quorum
                                           is a lock-delay (REDLOCK_DELAY_MARK), not
                                           a holder; busy_ttl_ms is its time left */
    size_t  failed;                     /* masters where it was not sent, its
                                           connection failed or its answer was
                                           unusable (round_slot ROUND_FAILED); a
                                           pending one still runs it, in order */
    size_t  unanswered;                 /* masters sent the request whose link
                                           failed before a reply
                                           (round_unanswered): the token may land
                                           there late, with no release after it */
};

/* A release's result (redlock_release): RELEASED, GONE or NOQUORUM;
 * confirmed: masters that deleted our token. */
struct redlock_release_result {
    struct redlock_verdict v;           /* the verdict; nothing more */
};

/* One lease's extension (redlock_extend_one): GRANTED, NOTHELD or
 * NOQUORUM; confirmed: masters that extended it. */
struct redlock_extend_one_result {
    struct redlock_verdict v;           /* the verdict */
    int64_t validity_end_us;            /* GRANTED: the new lease's end, start +
                                           ttl - drift, monotonic us */
};

/* A status read (redlock_status): HELD, FREE or NOQUORUM; confirmed: with
 * owner_self, masters holding the token asked about, else 0. */
struct redlock_status_result {
    struct redlock_verdict v;           /* the verdict */
    int64_t holders_ttl_ms;             /* HELD: the time until enough records
                                           expire that a quorum sees the name
                                           free, ms, or REDLOCK_NO_EXPIRY */
    bool    owner_self;                 /* HELD: the token asked about is on a
                                           quorum */
    enum redlock_kind kind;             /* HELD: the kind of the holders */
    size_t  holders;                    /* HELD: holders no quorum could take
                                           over now (1 for an exclusive lock) */
    unsigned limit;                     /* HELD of a counted name: its limit */
    int64_t holder_fence;               /* HELD: the shown holder's fencing token,
                                           from its label (0 when none) */
    bool    fence_pending;              /* HELD: the shown holder is a fenced
                                           grant whose fence is not written back
                                           anywhere yet (its grant is not told; a
                                           watcher waits for the write-back) */
    char    label[REDLOCK_LABEL_MAX + 1];/* HELD: the label of the holder shown
                                           (the one holding token when asked and
                                           found, else the longest held), "" when
                                           it wrote none */
    int64_t held_ms;                    /* HELD: how long that holder has held it
                                           (the least any master says, on its own
                                           clock), ms, or -1 when unknown */
    char    holder[REDLOCK_WHO_MAX + 1];/* HELD: that holder's token as the
                                           masters have it (cut), to tell holders
                                           apart; never shown to clients */
    int64_t delayed_ms;                 /* FREE: the time until enough lock-delay
                                           marks expire that a quorum could grant
                                           the name, ms (REDLOCK_NO_EXPIRY: one
                                           needed never does); 0 when no delay
                                           is in force on a quorum */
};

/* A BREAK's result (redlock_break): RELEASED or NOQUORUM; confirmed:
 * masters that ran the first round. */
struct redlock_break_result {
    struct redlock_verdict v;           /* the verdict */
    size_t  deleted;                    /* the most holders one master deleted */
    int64_t fence_after;                /* RELEASED: the name's counter after the
                                           second raise, written back */
    char    label[REDLOCK_LABEL_MAX + 1];/* the first deleted holder's label, ""
                                           when none */
};

/* Why a CHECK's grant is not current (redlock_check). */
enum redlock_check_reason {
    REDLOCK_CHECK_FREE,     /* a quorum of the masters hold no record of the name */
    REDLOCK_CHECK_OTHER,    /* a quorum hold it for other grants (or for one
                               whose fence they have no entry for) */
    REDLOCK_CHECK_MIXED     /* neither: the answers disagree (the grant on a
                               minority, the rest free or held by others) */
};

/*
 * A CHECK's result (redlock_check): HELD when the grant is on a quorum
 * (current), NOTHELD when it is not even counting every master that did
 * not answer as holding it (reason says why), KIND when a quorum say the
 * name is counted and no permit was named (limit: its limit), else
 * NOQUORUM (v.error); confirmed: masters that hold the grant.
 */
struct redlock_check_result {
    struct redlock_verdict v;           /* the verdict */
    int64_t ttl_ms;                     /* HELD: the time until fewer than a
                                           quorum would hold it without a
                                           renewal, ms, or REDLOCK_NO_EXPIRY */
    enum redlock_check_reason reason;   /* NOTHELD: why */
    unsigned limit;                     /* KIND: the counted name's limit */
};

/* Each operation's callback: res is valid during the call only. */
typedef void (*redlock_acquire_fn)(const struct redlock_acquire_result *res, void *arg);
typedef void (*redlock_release_fn)(const struct redlock_release_result *res, void *arg);
typedef void (*redlock_extend_one_fn)(const struct redlock_extend_one_result *res,
                                      void *arg);
typedef void (*redlock_status_fn)(const struct redlock_status_result *res, void *arg);
typedef void (*redlock_break_fn)(const struct redlock_break_result *res, void *arg);
typedef void (*redlock_check_fn)(const struct redlock_check_result *res, void *arg);

/* One lease in a batched extend. */
struct redlock_extend_item {
    const struct redlock_rec *rec;  /* its record */
    const char *token;          /* owner token, UTIL_TOKEN_HEX bytes */
    int64_t     ttl_ms;         /* new lease, ms */
};

/* The result of a batched extend: per item, how many masters said what. */
struct redlock_extend_result {
    size_t         n;           /* items */
    const uint8_t *confirmed;   /* per item: masters that extended it */
    const uint8_t *denied;      /* per item: masters where it is not ours
                                   (someone else's value, or no key) */
    const uint16_t *absent;     /* per item: bit i set when counted master i
                                   answered that the key does not exist */
    size_t         answered;    /* masters that answered */
    int64_t        start_us;    /* monotonic, before the first send */
    int64_t        end_us;      /* monotonic, at the decision */
    const char    *error;       /* who failed and how ("" if none) */
};

typedef void (*redlock_extend_fn)(const struct redlock_extend_result *res, void *arg);

/*
 * Register the scripts with daemon/master.h and keep the algorithm's
 * parameters.  Call once before master_start().  Returns 0, or -1 when
 * a script could not be registered (more than MASTER_SCRIPTS_MAX: a
 * build's error; out of memory aborts).
 */
int redlock_init(double drift_factor);

/*
 * Release announcements (redlock_release).  fn is called
 * for each message a master delivers on a watched key's channel: key is
 * the lock's key, token the released lease's token (as published; any
 * bytes, any length, when someone else published there).
 */
typedef void (*redlock_released_fn)(const char *key, size_t key_len,
                                    const char *token, size_t token_len);

void redlock_on_release(redlock_released_fn fn);

/*
 * Any message on a key's changes channel (redlock_watch_changes: a
 * grant, a release, a break): fn(key) for each copy a master delivers.
 * For watchers, who read the name again (redlock_status) to learn what
 * changed: one master's message is a hint, never a verdict.
 */
typedef void (*redlock_changed_fn)(const char *key, size_t key_len);

void redlock_on_change(redlock_changed_fn fn);

/*
 * A master said that a BREAK deleted the holds of key whose tokens are
 * in tokens (tokens_len bytes, separated by single spaces); one call
 * per copy (each master sends its own).
 */
typedef void (*redlock_broken_fn)(const char *key, size_t key_len, const char *tokens,
                                  size_t tokens_len);

/*
 * Hear BREAKs: subscribe to prefix + REDLOCK_BROKEN_SUFFIX on every
 * master (prefix is lock.key_prefix, copied) and hand each message to
 * fn.  Call once, before master_start().  Returns 0.
 */
int redlock_on_break(const char *prefix, redlock_broken_fn fn);

/*
 * Start (on) or stop (!on) hearing release announcements for key on
 * every master: a SUBSCRIBE to key + REDLOCK_CHANNEL_SUFFIX on each
 * master's subscriber link (daemon/master.h).  Returns 0, or -1 when key
 * is longer than REDLOCK_KEY_MAX (nothing is subscribed).  A master
 * delivers announcements only from its confirmation on
 * (redlock_on_subscribed, redlock_watch_ready).
 */
int redlock_watch(const char *key, size_t key_len, bool on);

/*
 * Whether key's release channel (redlock_watch) is confirmed on every
 * master whose subscriber link is up now (daemon/channel.h,
 * channel_ready): a try sent to a master after its confirmation, if it
 * is refused and marks the name, is sure to hear the release that
 * deletes the mark there.  False while not watched.
 */
bool redlock_watch_ready(const char *key, size_t key_len);

/*
 * A master confirmed the subscription to key's release channel:
 * fn(key) once per master and confirmation, the first one and each one
 * after that master's subscriber link came back (what was announced
 * there while it was down was heard by nobody).  Call before
 * master_start().
 */
typedef void (*redlock_subscribed_fn)(const char *key, size_t key_len);

void redlock_on_subscribed(redlock_subscribed_fn fn);

/*
 * Start (on) or stop (!on) hearing every change of key's holders: a
 * SUBSCRIBE to key + REDLOCK_CHANGED_SUFFIX on every master (counted;
 * daemon/master.h), whose messages go to the redlock_on_change()
 * function.  While any name is heard, the daemon is also subscribed to
 * REDLOCK_WATCHING_CHANNEL, without which the masters' scripts announce
 * no change at all.  Returns 0, or -1 when key is longer than
 * REDLOCK_KEY_MAX (nothing is subscribed).
 */
int redlock_watch_changes(const char *key, size_t key_len, bool on);

/* Names whose channel is subscribed now (for waiters or watchers; the
 * daemons' BREAK channel and REDLOCK_WATCHING_CHANNEL are not counted). */
size_t redlock_subscriptions(void);

/* Change the drift factor (reload). */
void redlock_set_drift(double drift_factor);

/*
 * The acquire script's answer: which branch granted the key on a
 * master (for a hand-over's releaser, only SWAPPED confirms its token).
 */
enum redlock_branch {
    REDLOCK_BRANCH_SET = 1,     /* the key was free: SET NX */
    REDLOCK_BRANCH_SWAPPED = 2, /* the key held old_token: given the new one */
    REDLOCK_BRANCH_OURS = 3     /* the key held our token already: PEXPIRE */
};

/*
 * A fenced grant is told its fence within REDLOCK_FENCE_ROUNDS round
 * deadlines of its acquire round's start, or not at all (it is LATE):
 * the acquire, the raise and the write-back.  A BREAK waits that long
 * (plus drift) between its two raises.
 */
#define REDLOCK_FENCE_ROUNDS 3

/* The span of a fenced grant: REDLOCK_FENCE_ROUNDS * lock.node_timeout_ms, in us. */
int64_t redlock_fence_span_us(void);

/*
 * A token's identity as the refusals of an acquire count it
 * (res->holder_id): a 64-bit FNV-1a hash of its len bytes, never 0 for
 * a token of UTIL_TOKEN_HEX hex digits in practice.  Pure.
 */
uint64_t redlock_token_id(const char *token, size_t len);

/* The quorum for n masters: n/2 + 1. */
size_t redlock_quorum(size_t nmasters);

/* Clock drift allowance for a ttl: ttl * drift_factor + 2 ms, in us. */
int64_t redlock_drift_us(int64_t ttl_ms, double drift_factor);

/*
 * Validity left after a round that took elapsed_us: ttl - elapsed -
 * drift, in us (may be zero or negative: then the lock is not granted).
 */
int64_t redlock_validity_us(int64_t ttl_ms, int64_t elapsed_us, double drift_factor);

/*
 * The holder's remaining time as seen by a quorum: given the pttl of the
 * key on each of nheld masters that hold it (REDLOCK_NO_EXPIRY for none)
 * and nfree masters where the key is free (or ours), the time until
 * enough keys expire that a quorum is free.  pttls is sorted in place.
 * Returns 0 when a quorum is free already, REDLOCK_NO_EXPIRY when one of
 * the keys needed never expires.
 */
int64_t redlock_holder_ttl(int64_t *pttls, size_t nheld, size_t nfree, size_t quorum);

/*
 * Acquire rec (not REDLOCK_ANY) with token for ttl_ms.  GRANTED when a quorum set the key
 * (or already held our token) and, when the callback runs, validity is
 * left: at least 1 ms, or, with fence, at least one round deadline
 * (lock.node_timeout_ms: a later grant's round may begin that long
 * before this lease's keys expire, and each of its counter increments
 * must come after the write-back).  A quorum that granted too late is
 * LATE.  On any other outcome
 * the caller must release (redlock_release) on every master, since a
 * set may have landed after the deadline.
 *
 * flags, any of REDLOCK_ACQUIRE_*: FENCE, WAIT and PEERS below.
 *
 * old_token, when not NULL, makes it a hand-over: on each master a key
 * that still holds old_token is given token at once (compare-and-swap),
 * so the key is never free between the two holders.  Every master that
 * answered then no longer holds old_token; res->v.answered tells the
 * releaser whether a quorum did (res->v.error names the others).
 *
 * FENCE: once a quorum granted, a second round raises the name's
 * counter (key + REDLOCK_FENCE_SUFFIX) by one on every master where
 * the record still holds token, and takes the largest value a quorum of
 * them answered; a third writes that value back, set-if-greater, to
 * every master, and the grant is reported only once a majority
 * confirmed it (res->fence), within redlock_fence_span_us() of the
 * round's start, the write-back checking on each master, in the same
 * script call, that the record still holds token (a master where a
 * BREAK, an expiry or another holder took it since the raise takes the
 * value but does not confirm); otherwise the outcome is NOQUORUM (or
 * LATE) and the caller releases as for any failed grant.  Every grant confirmed before
 * this one was won wrote its fence back to a majority before it was
 * confirmed, and the raise runs after this one was won, on a quorum that
 * meets that majority: fences strictly increase in the order grants are
 * confirmed, whichever daemon grants, as long as no master loses
 * acknowledged writes (the increments are not made inside the acquire:
 * a contender's increment could land early on a master, before an
 * earlier grant's write-back, and give it a lower fence).  Source:
 * Kleppmann, "How to do distributed locking" (2016) for the need; the
 * quorum argument is PROTOCOL.md's.  An exclusive or shared grant
 * counts on the name's counter; a permit on its own (permit key +
 * REDLOCK_FENCE_SUFFIX): fences order the holders of one permit.
 *
 * Kinds: one name is one kind at a time.  A master that holds the name
 * as another kind (a counted name with another limit, an exclusive or
 * shared hold asked as a permit, a permit asked as exclusive or shared)
 * refuses with its kind; when so many refuse so that no quorum of this
 * kind is possible (more than nmasters - quorum), the outcome is KIND and
 * res->v.error says "limit=3", "exclusive" or "shared"; fewer only refuse
 * (BUSY: a leftover on a minority must not turn a wait into an error).  An
 * exclusive request on a name with live shared holders is BUSY (the
 * same family); with WAIT, a master where only shared holders keep it
 * out also sets the name's gate to gate (UTIL_TOKEN_HEX hex digits
 * naming the waiter across its tries, whose tokens change; NULL or
 * equal to token: token, and nothing more is sent)
 * for ttl_ms, which makes new shared requests wait, so that a stream of
 * shared holders cannot starve it; the gate is deleted by the grant
 * when GATED says a master closed it before (res->gated of an earlier
 * round), or by redlock_ungate(), or expires.
 *
 * WAIT (the request queues if refused) also makes each master that
 * refuses it mark the name as waited for (key + REDLOCK_WAITING_SUFFIX,
 * for the holder's time left plus ttl_ms), so that the release that
 * frees it there announces it (redlock_release); without a mark a
 * release publishes nothing.  PEERS asks each granting master how many
 * clients are subscribed to the name's release channel
 * (res->subscribers: other daemons' waiters, and ours); without it
 * res->subscribers is 0 and the grant costs one command less.
 *
 * A PERMIT that is not granted reports in res->free_slot a permit worth
 * trying next (free on the most answering masters).
 *
 * BUSY: each master that refused named the token in its way (the key's
 * value: the exclusive key, the permit asked for, the gate; for shared
 * holders the one whose hold there ends last), and res->split tells
 * whether any one token refused on a quorum of the masters (masters that
 * granted, did not answer or hold another kind count for none): when
 * none did, a new try may win as soon as the records in the way are
 * given back, long before they expire.  To tell, a refused round is
 * decided only once the answers still due cannot change that (or at
 * its deadline).
 *
 * label (NUL-terminated, at most REDLOCK_LABEL_MAX bytes of 0x21-0x7E,
 * or NULL) is written with the record for everyone to read (status):
 * record key + REDLOCK_LABEL_SUFFIX + token holds "<grant time, ms on
 * the master's clock> <fence> <label>", with the record's expiry; the
 * fence is set by the write-back of a fenced grant (0 otherwise).  The
 * label goes with the record: renewals extend it, releases delete it.
 *
 * Returns 0, or -1 (no callback) when rec is REDLOCK_ANY, its key is
 * too long or a PERMIT's slot and limit are out of range.  Memory
 * running out aborts the daemon (daemon/xmalloc.h), here and in every
 * operation below.
 */
#define REDLOCK_ACQUIRE_FENCE 0x1u  /* raise and write back the fencing token */
#define REDLOCK_ACQUIRE_WAIT  0x2u  /* queues if refused: mark the name, may gate */
#define REDLOCK_ACQUIRE_PEERS 0x4u  /* count the release channel's subscribers */
#define REDLOCK_ACQUIRE_GATED 0x8u  /* with WAIT: a master closed the gate for this
                                       waiter before; the grant deletes it */
#define REDLOCK_ACQUIRE_ADOPT 0x10u /* old_token is not a hand-over but an earlier
                                       try of this waiter that may have landed
                                       late: its record is taken over like a
                                       hand-over's, and the result is a plain
                                       acquire's */
#define REDLOCK_ACQUIRE_TAKE_CLAIM 0x20u /* an exclusive request that has waited on a
                                       set's claim of the name for its ttl takes it
                                       over (a claim holds nothing) */
int redlock_acquire(const struct redlock_rec *rec, const char *token, int64_t ttl_ms,
                    const char *old_token, unsigned flags, const char *gate,
                    const char *label, redlock_acquire_fn cb, void *arg);

#define REDLOCK_SET_MAX 64  /* most names one set acquire takes */

/*
 * Give a grant already won its fencing token: the round that won rec's
 * exclusive record for token (won: its result, GRANTED, copied) is
 * followed by the raise and write-back a fenced redlock_acquire() makes
 * (PROTOCOL.md section 10), and cb gets won with the fence, or with
 * NOQUORUM (the raise or write-back lacked a quorum; the text says
 * which) or LATE (redlock_acquire's rule for a fenced grant, from won's
 * start).  A set's grant gives each of its names its own (lock_set.c).
 * With rec->labelled, the label written with the record gets the fence.
 * Returns 0, or -1 (nothing sent) for a bad argument.
 */
int redlock_fence_grant(const struct redlock_rec *rec, const char *token,
                        const struct redlock_acquire_result *won, redlock_acquire_fn cb,
                        void *arg);

/*
 * Acquire a set: the exclusive records of n names (bases[i], base_lens[i]
 * bytes each, borrowed until the call returns: the names' keys, 2 ..
 * REDLOCK_SET_MAX of them, no two the same, in the canonical order of
 * every caller, so that every master sees one order) for token, all at
 * once: each master runs one script (daemon/scripts/acquire_set.lua) that
 * writes token on every name, or on none when any name is held by
 * someone else there.  The round is redlock_acquire()'s: GRANTED when a
 * quorum granted the whole set within the validity (start + ttl -
 * drift); otherwise BUSY (busy_ttl_ms, split and holder_id describe the
 * first name, in that order, that each master found held), KIND (a name
 * is counted on a majority), LATE or NOQUORUM, as for one name.  flags:
 * REDLOCK_ACQUIRE_WAIT marks the refusing name as waited for;
 * REDLOCK_ACQUIRE_WAIT also claims, on each master that refuses the set at
 * a name, the free names before it (in the canonical order), for the set
 * id (UTIL_TOKEN_HEX bytes, the same for every try of one LOCK): nobody
 * else takes them until the set is granted or drops them
 * (redlock_unclaim); res->claimed says a master did.
 * REDLOCK_ACQUIRE_ADOPT with old_token takes over a set an earlier try of
 * the same waiter may have left; REDLOCK_ACQUIRE_FENCE only marks the
 * labels' fence as to come ('-'): the caller then gives each name its
 * fence (redlock_fence_grant); no gate, peers or hand-over.  label, when
 * not NULL, is written with each name's record.  On any
 * outcome but GRANTED the caller releases token on every name (nothing
 * of it counts).  Returns 0, or -1 (nothing sent) for a bad argument.
 *
 * Source: the Redlock algorithm (redlock_acquire), with the set's names
 * taken in one script per master (PROTOCOL.md section 6, "Several names
 * at once").
 */
int redlock_acquire_set(const char *const *bases, const size_t *base_lens, size_t n,
                        const char *token, int64_t ttl_ms, int64_t delay_ms,
                        const char *old_token, unsigned flags, const char *label,
                        const char *id, redlock_acquire_fn cb, void *arg);

/*
 * Drop the claims a waiting set made (redlock_acquire_set: id, its
 * UTIL_TOKEN_HEX bytes) on its names (bases, base_lens, n, as there) on
 * every master: a key that still holds the claim goes, and its release
 * is announced where a request it refused waits.  Sent once the set was
 * granted (a minority of masters may keep claims) or gave up; nothing
 * answers.  Returns 0, or -1 for a bad argument.
 */
int redlock_unclaim(const char *const *bases, const size_t *base_lens, size_t n,
                    const char *id);

/*
 * Compare-and-delete rec's record holding token on every master (a
 * shared holder's member; a permit's key, deleting the name's limit with
 * its last permit; with REDLOCK_ANY, whichever record holds the token).
 * cb may be NULL.  Outcome
 * (redlock_release_verdict): RELEASED when a quorum confirmed the
 * delete of our token (res->v.confirmed counts them), GONE when the
 * answers tell that fewer than a quorum still held the token, NOQUORUM
 * when too few answered to tell (redlock_release_verdict).  The
 * record's label goes with it when rec->labelled.
 *
 * Announcing: a master that deleted the record and found the name
 * marked as waited for (redlock_acquire, WAIT; the mark goes in the same
 * script) publishes the token on the name's key +
 * REDLOCK_CHANNEL_SUFFIX, which wakes the waiters of every daemon
 * subscribed to it.  Every release does, whatever it is: a client's
 * UNLOCK, and every clean-up (a grant not delivered: LATE, NOQUORUM, a
 * fence raise or write-back without a quorum; a token a BREAK broke
 * during its round; the daemon stopping; what is left
 * of a hand-over's old token).  The mark was set by a waiter that this
 * record refused; once the mark is gone nobody tells that waiter again,
 * and one that saw the record on a quorum (a grant that was then not
 * delivered) would sleep the record's whole ttl while the name is free.
 *
 * Contenders that split the vote (partial grants, none on a quorum)
 * delete each other's marks with their clean-ups, and those announce
 * too.  That does not put them in step: each of them saw a split
 * refusal (no single token on a quorum), and a waiter whose last
 * refusal was split retries after a random delay within
 * lock.retry_delay_ms that an announcement does not bring forward
 * (daemon/waiter.c, waiter_retry and waiter_on_release), and its own
 * clean-up's announcement wakes nobody of its own daemon.  What an
 * announcement brings forward is a waiter sleeping until a holder's
 * ttl, which only a refusal by a token on a quorum sets, never a
 * split's partial grant; and a woken waiter that finds the name taken
 * by a contender marks it again and waits for that one.  Waiters that
 * wait for one holder on a bare quorum may get partial grants on the
 * other masters and refuse each other there; their clean-ups then
 * announce to each other while that holder stays.  An exclusive waiter
 * knows the token it waits for (res->holder_id): another token's
 * announcement makes it try within the retry jitter, not at once, so
 * such waiters fall out of step instead of waking each other for the
 * holder's whole ttl.
 *
 * Returns 0, or -1 when rec's key is too long (no callback).
 */
int redlock_release(const struct redlock_rec *rec, const char *token, redlock_release_fn cb,
                    void *arg);

/*
 * A release that starts a lock-delay (the hold ended without UNLOCK: its
 * session closed, its daemon lost it, a BREAK): as redlock_release, and
 * in the same script call, on each master where the name's key is free
 * afterwards (the record was ours and is deleted, or it was gone
 * already), the key is set to REDLOCK_DELAY_MARK + token for delay_ms
 * (SET NX PX), which every acquire refuses until it expires (BUSY,
 * res->delayed).  A master where someone else holds the name is left
 * alone.  Only for an EXCLUSIVE rec; delay_ms > 0.  Chubby's
 * lock-delay (Burrows, "The Chubby lock service", section 2.4).
 * Returns 0, or -1 when rec's key is too long or rec is not exclusive.
 */
int redlock_release_delayed(const struct redlock_rec *rec, const char *token,
                            int64_t delay_ms, redlock_release_fn cb, void *arg);

/*
 * Fire and forget: delete the gate of the name whose key is base where
 * it still holds token (an exclusive LOCK that stopped waiting), and
 * announce it, so that the shared waiters it held back try again.
 * Returns 0, or -1 when base is too long.
 */
int redlock_ungate(const char *base, size_t base_len, const char *token);

/*
 * Fire and forget, for a lost lease: on every master where rec still
 * holds token, set its expiry to the end of the validity the holder was
 * told (validity_end_us, monotonic) plus the drift allowance of what is
 * left, at least 1 ms, with the compare-and-PEXPIRE of EXTEND; a key
 * that is gone stays gone.  A renewal that failed may have pushed the
 * key a whole ttl further on a minority of masters; this brings it back,
 * so the name is free again when the lease would have ended.  Returns
 * 0, or -1 when rec's key is too long.  A hold with a lock-delay
 * (rec->delay_ms) instead starts it (redlock_release_delayed) to end
 * rec->delay_ms after that same moment: its key holds the delay mark
 * from now until then, which keeps the holder's window as well.
 */
int redlock_expire_at(const struct redlock_rec *rec, const char *token,
                      int64_t validity_end_us);

/*
 * The verdict on one lease of a batched renewal: confirmed and denied
 * are its counts out of nmasters, start_us and end_us the round's
 * monotonic start and decision, validity_end_us the end of the lease's
 * current validity.  RENEWED when a quorum confirmed before the validity
 * ended; *new_end_us is then start + ttl - drift (the lease is renewed
 * from the moment the round began, as an acquire is).  DENIED when more
 * than nmasters - quorum masters answered that the key is not ours (no
 * quorum can confirm it any more).  TOO_LATE when a quorum confirmed
 * after the validity ended (a renewal never revives an expired lease).
 * UNDECIDED otherwise.  Pure arithmetic; no I/O.
 */
enum redlock_renewal redlock_renewal_verdict(size_t confirmed, size_t denied, size_t nmasters,
                                             int64_t start_us, int64_t end_us,
                                             int64_t ttl_ms, int64_t validity_end_us,
                                             int64_t *new_end_us);

/*
 * The verdict on a compare-and-delete (or a hand-over's swap of the old
 * token) out of nmasters: RELEASED when confirmed >= quorum; GONE when
 * the masters that answered tell that no quorum held the token (confirmed
 * plus every master that did not answer is below the quorum); NOQUORUM
 * otherwise (too few answers to tell: a master that holds the token may
 * be among the silent ones).  Pure.
 */
enum redlock_outcome redlock_release_verdict(size_t answered, size_t confirmed,
                                             size_t nmasters);

/* One record to put back on the masters that lost it (redlock_restore). */
struct redlock_restore_item {
    const struct redlock_rec *rec; /* its record (not REDLOCK_ANY) */
    const char *token;          /* owner token, UTIL_TOKEN_HEX bytes */
    int64_t     validity_end_us;/* monotonic end of the lease's validity */
    uint16_t    masters;        /* bit i: master i answered that the key is absent */
};

/*
 * Put renewed leases back where a master lost them: on each master named
 * in an item's mask, SET key token NX PX <validity left, ms> (set only
 * if absent; a shared holder's member only where no exclusive key is
 * there; a permit with the name's limit; an item whose validity is over
 * is skipped), one script call per master for all its records.  Call only for leases a quorum confirmed
 * in this same turn of the event loop: a confirmed quorum holds the
 * token, and every other quorum intersects it, so nobody else can hold
 * the name before the validity ends, and a key set to expire by then
 * grants nothing that was not ours.  Fire and forget; each key set is
 * counted in stats.keys_restored.  Returns 0.
 */
int redlock_restore(const struct redlock_restore_item *items, size_t n);

/*
 * Extend one lease by its token (EXTEND of a lease-mode lock): on each
 * master, PEXPIRE the record of the name whose key is base that holds
 * token (whichever kind it is) to ttl_ms; never re-creates one.  GRANTED (validity_end_us of the new lease) when a quorum
 * confirmed and the round ended within the validity the lock still had
 * (the quorum's old pttl less drift); NOTHELD when a quorum cannot
 * confirm (a majority do not hold token) or the validity had run out;
 * NOQUORUM when too few answered to tell.  Returns 0, or -1 when base
 * is too long (no callback).
 */
int redlock_extend_one(const char *base, size_t base_len, const char *token, int64_t ttl_ms,
                       redlock_extend_one_fn cb, void *arg);

/*
 * Read the name whose key is base on every master, whatever its kind:
 * HELD when some holder is on so many masters that no quorum could take
 * its place now (res->kind, res->holders of that sort, res->limit of a
 * counted name; res->label, held_ms, holder_fence and holder of one holder:
 * the one holding token when it is on a quorum, else the one that has
 * held it longest; owner_self when a holder holding token is on a quorum;
 * token may be NULL; res->holders_ttl_ms the time until enough records expire
 * that a quorum sees the name free, the longest over its holders), FREE,
 * or NOQUORUM.  Each master reads every holder of the name: O(limit)
 * for a counted name, O(holders) for a shared one.  Returns 0, or -1
 * when base is too long (no callback).
 */
int redlock_status(const char *base, size_t base_len, const char *token,
                   redlock_status_fn cb, void *arg);

/*
 * CHECK: is one grant of the name whose key is base current, now?  By
 * token (token: UTIL_TOKEN_HEX bytes, fence 0): a quorum of the masters
 * hold token's record, whatever its kind.  By fence (token NULL, fence
 * >= 1): a quorum hold the name's record (the exclusive key, permit
 * `permit` when permit >= 0, else any live shared holder) for the
 * holder whose fence.lua write-back kept fence for its token
 * (daemon/scripts/check.lua says how).  One read-only script per
 * master, batched with the other per-name calls of the loop iteration,
 * in the reads class.  Returns 0, or -1 when base is too long (no
 * callback).
 */
int redlock_check(const char *base, size_t base_len, const char *token, int64_t fence,
                  int permit, redlock_check_fn cb, void *arg);

/*
 * BREAK: end every hold of the name whose key is base, whoever holds
 * it, on every master: delete its records (and their labels, a counted
 * name's limit key, a shared name's gate), raise its fence counter by
 * one (and each deleted permit's), and announce the deleted tokens on
 * the name's channel (waiters everywhere try at once) and on prefix +
 * REDLOCK_BROKEN_SUFFIX (prefix: lock.key_prefix), where each daemon
 * tells a session that held one that it lost it.  The first round
 * waits for every master (or its deadline).  With a quorum, the break
 * then waits redlock_fence_span_us() (plus drift): a fenced grant whose
 * round began before the masters ran the break is told its fence within
 * that span or never, and it wrote that fence back to a majority first.
 * A second raise then sets the name's counter to one above the largest
 * of the first round's and its own (and raises each permit counter of
 * a counted name by one), and its largest value is written back,
 * set-if-greater, as a fenced grant's is: every fence a grant it broke
 * was told is below it, and every grant that begins after it answered
 * gets a larger one.  RELEASED when both raises had a quorum and a
 * majority took the write-back: res->deleted the most holders a master
 * deleted, res->fence_after the counter after the second raise,
 * res->label the first deleted holder's label; NOQUORUM otherwise
 * (res->v.error).
 * Masters that missed it may keep a minority of the records, which no
 * quorum holds any more; a master that runs it late (it answered after
 * the first round's deadline) ends there the holds granted meanwhile.
 * Returns 0, or -1 when base or prefix is too long (no callback).
 */
int redlock_break(const char *base, size_t base_len, const char *prefix, redlock_break_fn cb,
                  void *arg);

/*
 * Compare-and-PEXPIRE n records on every master in one script call each
 * (a shared holder's score; a permit's limit is kept alive with it).
 * Never re-creates a record that is gone.  The round waits for every
 * master (or its deadline), so that the result also says where a key
 * is missing (res->absent).  The caller decides, per item, with
 * redlock_renewal_verdict().  Returns 0, or -1 when an item's key is
 * too long (no callback).
 */
int redlock_extend(const struct redlock_extend_item *items, size_t n,
                   redlock_extend_fn cb, void *arg);

#endif /* REDLOCKD_REDLOCK_H */
