/*
 * redlock_op.h: what the files of the Redlock engine share, and nothing
 * outside them includes (daemon/redlock.h is the engine's interface):
 * the scripts' ids, the state of one operation, a record's keys, and
 * the helpers every operation uses.  Defined in daemon/redlock.c;
 * used by daemon/redlock_acquire.c, daemon/redlock_holders.c,
 * daemon/redlock_extend.c and daemon/redlock_channels.c.
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
    int acquire, release, extend, status, fence, extend_one, restore, ungate;
    int break_lock, raise, reraise, batch;
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
    char   label[2];                    /* "1" when the holder may have a label, else "0" */
    char   limit[12];                   /* a permit's limit, else "" */
    size_t limit_len;                   /* bytes in limit */
};

/* Per-operation state; freed in its done callback. */
struct redlock_op {
    redlock_done_fn cb;             /* caller's callback */
    void           *arg;            /* caller's argument */
    int64_t         ttl_ms;         /* acquire/extend: the lease asked for */
    size_t          yes;            /* masters that granted / confirmed */
    size_t          swapped;        /* acquire: grants that swapped the old token */
    size_t          no;             /* extend, release: masters where it is not ours */
    size_t          nheld;          /* masters where someone else holds it */
    uint64_t       *who;            /* acquire: per master in nheld, the token that
                                       refused there (redlock_token_hash); room for
                                       every master, in the block after pttls */
    size_t          seen;           /* acquire: answers the reply callback read,
                                       unreadable ones included */
    size_t          self;           /* status: masters holding our token */
    bool            fenced;         /* acquire: with a fencing counter */
    bool            handover;       /* acquire: with an old token to swap */
    int64_t         fence;          /* acquire: largest counter the raise saw;
                                       break: the largest counter seen */
    struct redlock_keys *keys;      /* fenced acquire: the record's keys, for the
                                       raise (malloc'd); else NULL */
    char            token[UTIL_TOKEN_HEX]; /* fenced acquire: the grant's token */
    unsigned        break_limit;    /* break: the largest limit its first round
                                       found (0: not a counted name) */
    int64_t         subscribers;    /* acquire: most release-channel subscribers seen */
    struct redlock_result res;      /* acquire: kept across the write-back */
    char           *fence_key;      /* acquire: the counter's key, malloc'd */
    size_t          fence_key_len;  /* bytes in fence_key */
    char           *label_key;      /* acquire with a label and fence: the label's
                                       key, malloc'd, for the write-back; else NULL */
    size_t          label_key_len;  /* bytes in label_key */
    char            base[REDLOCK_KEY_MAX]; /* with label_key: the name's key, whose
                                       watchers the write-back tells */
    size_t          base_len;       /* bytes in base */
    size_t          npttl;          /* acquire, status: entries in pttls */
    size_t          nopen;          /* acquire of a permit: masters that refused it
                                       but have another permit free */
    size_t          nkind;          /* acquire: masters holding another kind */
    bool            gated;          /* acquire: a master closed the gate for us */
    bool            readers;        /* acquire: a master refused us for shared holders */
    char            kind_text[32];  /* acquire: what the first of them said */
    enum redlock_kind kind;         /* acquire: the kind asked for */
    unsigned        slot;           /* acquire of a permit: the one asked for */
    unsigned        limit;          /* acquire of a permit: the name's limit */
    size_t          nlists;         /* acquire of a permit: masters that listed theirs */
    uint16_t       *live;           /* acquire of a permit: per permit, masters
                                       that hold it (limit entries, malloc'd) */
    struct redlock_holder *holders; /* status: every holder each master named */
    size_t          nholders;       /* status: entries in holders */
    size_t          holders_cap;    /* status: room in holders */
    int64_t         pttls[];        /* per master: holder's pttl */
};

/*
 * A new operation with room for every master's pttl and refusing token
 * (zeroed); NULL when out of memory.  Freed with redlock_op_free().
 */
struct redlock_op *redlock_op_new(redlock_done_fn cb, void *arg, int64_t ttl_ms);

/* Free op and what it owns (keys, fence and label keys, holders, permits). */
void redlock_op_free(struct redlock_op *op);

/* A later round of op could not start (what): NOQUORUM to its caller, and
 * op is freed. */
void redlock_op_fail(struct redlock_op *op, const char *what);

/*
 * Append to buf (size bytes in all, used taken) what fmt says, cut at
 * the end of buf.  Returns the new count of bytes used.
 */
size_t redlock_append(char *buf, size_t size, size_t used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The text of a NOQUORUM from the decided round r, into res->error:
 * answers, quarantines, duplicates, and what failed. */
void redlock_fill_error(struct redlock_result *res, struct round *r);

/* Start a result from a decided round r: its start time and answers. */
void redlock_result_begin(struct redlock_result *res, struct round *r);

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

/* Write op's fence (the largest counter seen) back to every master before
 * the grant is told (daemon/redlock_acquire.c), confirmed only where the
 * grant's record (op->keys) still holds op->token; BREAK uses it too,
 * without a record (op->keys NULL: every master that takes it confirms). */
void redlock_fence_write_back(struct redlock_op *op);

#endif /* REDLOCKD_REDLOCK_OP_H */
