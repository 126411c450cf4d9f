/*
 * redlock_op.h: what the files of the Redlock engine share, and nothing
 * outside them includes (daemon/redlock.h is the engine's interface):
 * the scripts' ids, each operation's state, a record's keys, and
 * the helpers every operation uses.  Defined in daemon/redlock.c;
 * used by daemon/redlock_acquire.c, daemon/redlock_holders.c,
 * daemon/redlock_extend.c, daemon/redlock_channels.c and
 * daemon/redlock_check.c.
 */
#ifndef REDLOCKD_REDLOCK_OP_H
#define REDLOCKD_REDLOCK_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/redlock.h"
#include "daemon/util.h"

struct round;
struct redlock_holder;      /* daemon/redlock_holders.c */

/* The masters' scripts (daemon/scripts/), as master_script() numbered them. */
struct redlock_scripts {
    int check;                          /* CHECK (daemon/redlock_check.c) */
    int acquire, release, extend, status, fence, extend_one, restore, ungate;
    int break_lock, raise, reraise, batch, acquire_set, unclaim;
};

/* Registered by redlock_init(); read-only after it. */
extern struct redlock_scripts redlock_scripts;

/* The drift factor in use (redlock_init, redlock_set_drift). */
extern double redlock_drift_factor;

/* The keys and words of one record, as the scripts take them. */
struct redlock_keys {
    char   rec[REDLOCK_DERIVED_MAX];    /* the record's key (the name's for ANY) */
    size_t rec_len;                     /* bytes in rec */
    char   aux[REDLOCK_DERIVED_MAX];    /* a permit's limit key, else "" */
    size_t aux_len;                     /* bytes in aux */
    char   kind[2];                     /* the kind's letter and NUL */
    char   label[2];                    /* the holder's flags: "0", "1" when it may have
                                           a label, + 2 with a lock-delay (rl_flags) */
    char   limit[12];                   /* a permit's limit, else "" */
    size_t limit_len;                   /* bytes in limit */
};

/*
 * How long rec's record is written to live on the masters for a lease
 * of ttl_ms: the ttl, plus the lock-delay of an exclusive hold that
 * asked for one, so that a hold whose daemon dies (and writes no delay
 * mark) still keeps the name from others for its delay after its lease.
 * The validity reported is still counted from ttl_ms alone.  Pure.
 */
int64_t redlock_record_ms(const struct redlock_rec *rec, int64_t ttl_ms);

/*
 * What every operation of the engine shares, embedded as the first
 * member (b) of each operation's own state below.  An operation's state
 * is allocated by redlock_op_new() and freed by its last round's done
 * callback, after the caller's callback ran.  Nothing fails it but its
 * masters: memory running out aborts the daemon (daemon/xmalloc.h).
 */
struct redlock_op {
    void   *arg;                    /* the caller's argument, for its callback */
    size_t  yes;                    /* masters that said yes in the current round */
    size_t  no;                     /* masters that said no in the current round */
};

/*
 * A fencing counter's raise and write-back (redlock_fence_write_back):
 * part of a fenced acquire and of a BREAK.  Its rounds count on op's
 * tallies.
 */
struct redlock_fence_wb {
    struct redlock_op *op;          /* the operation it belongs to */
    void  (*done)(struct redlock_fence_wb *wb, struct round *r); /* the write-back
                                       ended (op->yes masters confirmed) */
    int64_t fence;                  /* the largest counter seen: what is written */
    bool    record;                 /* confirm the grant's record (acquire); false:
                                       every master that takes it confirms (BREAK) */
    struct redlock_keys keys;       /* record: the grant's record's keys */
    char    token[UTIL_TOKEN_HEX];  /* record: the grant's token */
    char    fence_key[REDLOCK_DERIVED_MAX]; /* the counter's key */
    size_t  fence_key_len;          /* bytes in fence_key */
    char    label_key[REDLOCK_DERIVED_MAX + UTIL_TOKEN_HEX]; /* record with a label:
                                       the label's key, for the write-back */
    size_t  label_key_len;          /* bytes in label_key; 0: no label */
    char    base[REDLOCK_KEY_MAX];  /* with a label: the name's key, whose
                                       watchers the write-back tells */
    size_t  base_len;               /* bytes in base */
};

/* An acquire (daemon/redlock_acquire.c); yes: grants, no: unused. */
struct redlock_acquire_op {
    struct redlock_op b;            /* arg and tallies */
    redlock_acquire_fn cb;          /* the caller's callback */
    int64_t         ttl_ms;         /* the lease asked for */
    enum redlock_kind kind;         /* the kind asked for */
    unsigned        slot;           /* a permit: the one asked for */
    unsigned        limit;          /* a permit: the name's limit */
    bool            handover;       /* with an old token to swap */
    size_t          swapped;        /* grants that swapped the old token */
    size_t          nheld;          /* masters where someone else holds it */
    size_t          seen;           /* answers the reply callback read,
                                       unreadable ones included */
    size_t          npttl;          /* entries in pttls */
    size_t          nopen;          /* a permit: masters that refused it but have
                                       another permit free */
    size_t          nkind;          /* masters holding another kind */
    size_t          nlists;         /* a permit: masters that listed theirs */
    int64_t         subscribers;    /* most release-channel subscribers seen */
    bool            gated;          /* a master closed the gate for us */
    bool            readers;        /* a master refused us for shared holders */
    bool            claimed;        /* a set: a master claimed names for it */
    uint64_t        claim_id;       /* redlock_token_id of a claim that refused us, 0 none */
    char            kind_text[32];  /* what the first master of another kind said */
    uint16_t       *live;           /* a permit: per permit, masters that hold it
                                       (limit entries, owned); else NULL */
    struct redlock_fence_wb *wb;    /* fenced: the raise and write-back (owned);
                                       else NULL */
    struct redlock_acquire_result res; /* kept across the raise and write-back */
    uint64_t        delay_id;       /* the id (redlock_token_id) of a lock-delay
                                       mark that refused us somewhere; 0: none */
    uint64_t       *who;            /* per master in nheld, the token that refused
                                       there (redlock_token_id); room for every
                                       master, in the block after pttls */
    int64_t         pttls[];        /* per refusing master: the holder's pttl */
};

/* A release (daemon/redlock_acquire.c); yes: deleted, no: not ours there. */
struct redlock_release_op {
    struct redlock_op b;            /* arg and tallies */
    redlock_release_fn cb;          /* the caller's callback */
};

/* One lease's extension (daemon/redlock_extend.c); yes: extended (their old
 * pttls in pttls), no: not ours there. */
struct redlock_extend_one_op {
    struct redlock_op b;            /* arg and tallies */
    redlock_extend_one_fn cb;       /* the caller's callback */
    int64_t         ttl_ms;         /* the lease asked for */
    int64_t         pttls[];        /* per confirming master: the old pttl */
};

/* A status read (daemon/redlock_holders.c); no tallies. */
struct redlock_status_op {
    struct redlock_op b;            /* arg */
    redlock_status_fn cb;           /* the caller's callback */
    unsigned        limit;          /* the largest limit a master named */
    struct redlock_holder *holders; /* every holder each master named (owned) */
    size_t          nholders;       /* entries in holders */
    size_t          holders_cap;    /* room in holders */
    int64_t         pttls[];        /* per master: one holder's pttl */
};

/* A CHECK (daemon/redlock_check.c); yes: masters that hold the grant, no:
 * masters where someone else holds the name. */
struct redlock_check_op {
    struct redlock_op b;            /* arg and tallies */
    redlock_check_fn cb;            /* the caller's callback */
    size_t          nfree;          /* masters where nobody holds it */
    size_t          nkind;          /* masters that say the name is counted */
    unsigned        limit;          /* the largest limit they named */
    int64_t         pttls[];        /* per master that holds the grant: its pttl */
};

/* A BREAK (daemon/redlock_holders.c); yes: masters that ran the current round. */
struct redlock_break_op {
    struct redlock_op b;            /* arg and tallies */
    redlock_break_fn cb;            /* the caller's callback */
    unsigned        limit;          /* the largest limit its first round found
                                       (0: not a counted name) */
    struct redlock_break_result res;/* kept across its rounds */
    struct redlock_fence_wb wb;     /* the second raise's write-back (wb.fence:
                                       the largest counter seen) */
};

/*
 * A new operation's state of size bytes plus per_master bytes for each
 * master (for its flexible array), zeroed, with b.arg set.  Never NULL
 * (daemon/xmalloc.h).  The operation's done callback frees it.
 */
void *redlock_op_new(size_t size, size_t per_master, void *arg);

/*
 * Append to buf (size bytes in all, used taken) what fmt says, cut at
 * the end of buf.  Returns the new count of bytes used.
 */
size_t redlock_append(char *buf, size_t size, size_t used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The text of a NOQUORUM from the decided round r, into v->error:
 * answers, quarantines, duplicates, and what failed. */
void redlock_fill_error(struct redlock_verdict *v, struct round *r);

/* Start a result's verdict from a decided round r: its start time and
 * answers; everything else 0 (v->error ""). */
void redlock_result_begin(struct redlock_verdict *v, struct round *r);

/*
 * Fill k with rec's keys: the record (the name's key, for an exclusive
 * or shared holder, or key + " permit <i>"), and for a permit its limit
 * key (the name's key) and limit.  Returns 0, or -1 when the name's key
 * is too long.
 */
int redlock_keys_of(const struct redlock_rec *rec, struct redlock_keys *k);

/* key + suffix into out (room for key_len + strlen(suffix) + 1); returns
 * the bytes written before the NUL. */
size_t redlock_derived(char *out, const char *key, size_t key_len, const char *suffix);

/*
 * The masters' scripts' announce argument: '1' makes a deletion of a
 * holder's record that finds the name marked as waited for (REDLOCK_WAITING_SUFFIX)
 * publish on its release channel (release.lua, and raise.lua where it
 * undoes a grant).  Every such deletion announces (redlock.h,
 * redlock_release says why that is safe); this is the one place that
 * decides it.  The fault suite's negative control is built with
 * -DREDLOCKD_FAULT_SKIP_ANNOUNCE, which announces none, so that its
 * checker has lost wake-ups to catch (tests/faults/README.md).
 */
#ifdef REDLOCKD_FAULT_SKIP_ANNOUNCE
#define REDLOCK_ANNOUNCE ""
#else
#define REDLOCK_ANNOUNCE "1"
#endif

/* qsort order of pttls, shortest first; REDLOCK_NO_EXPIRY sorts last. */
int redlock_cmp_pttl(const void *a, const void *b);

/* Write wb->fence (the largest counter seen) back to every master before
 * the grant is told (daemon/redlock_acquire.c), confirmed only where the
 * grant's record (wb->keys) still holds wb->token; BREAK uses it too,
 * without a record (wb->record false: every master that takes it
 * confirms).  Counts on wb->op's tallies; calls wb->done at the end. */
void redlock_fence_write_back(struct redlock_fence_wb *wb);

/* The NOQUORUM text of a write-back that fewer than a quorum confirmed. */
void redlock_fence_error(const struct redlock_fence_wb *wb, struct round *r,
                         struct redlock_verdict *v);

#endif /* REDLOCKD_REDLOCK_OP_H */
