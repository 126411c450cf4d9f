/*
 * redlock.c: the Redlock algorithm: scripts, quorum and validity
 * arithmetic, and the four operations built on rounds.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/channel.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/redlock.h"
#include "daemon/round.h"
#include "daemon/stats.h"
#include "daemon/util.h"
#include "daemon/scripts.h"     /* generated: daemon/scripts/embed.sh */

#define REDLOCK_STR(x)  #x
#define REDLOCK_XSTR(x) REDLOCK_STR(x)      /* a macro's value as a string literal */

/*
 * The scripts the masters run live in daemon/scripts/, one file each,
 * with what each takes and answers; daemon/scripts/embed.sh turns them
 * into string literals at build time (build/gen/daemon/scripts.h).  Every
 * script that reads or writes a holder's record begins with the prelude
 * (daemon/scripts/prelude.lua: the three kinds of record, read and
 * written one way everywhere), as its line "-- uses prelude.lua" asks.
 */
static int    script_acquire, script_release, script_extend, script_status;
static int    script_fence, script_extend_one, script_restore, script_ungate, script_break;
static int    script_raise, script_reraise, script_batch;
static double redlock_drift_factor = 0.01;

static size_t redlock_derived(char *out, const char *key, size_t key_len,
                              const char *suffix);
static redlock_released_fn redlock_released_cb;
static int redlock_subscribe(const char *key, size_t key_len, const char *suffix, bool on);
static redlock_changed_fn  redlock_changed_cb;
static redlock_broken_fn   redlock_broken_cb;
static char               *redlock_broken_chan;     /* prefix + REDLOCK_BROKEN_SUFFIX */
static size_t              redlock_broken_chan_len; /* bytes in it */
static size_t              redlock_nwatched;        /* names whose changes are heard */

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

/* One holder as one master named it (status). */
struct redlock_holder {
    char    kind;                   /* its record's kind letter */
    char    id[UTIL_TOKEN_HEX + 1]; /* "" exclusive, a permit's index, a token */
    int64_t pttl;                   /* its time left there, ms, or -1 */
    bool    mine;                   /* it holds the token asked about */
    char    who[REDLOCK_WHO_MAX + 1];  /* its token there (cut), "" when unknown */
    int64_t age_ms;                 /* time since its grant there, ms; -1: no label */
    int64_t fence;                  /* its label's fence, 0 when none */
    char    label[REDLOCK_LABEL_MAX + 1]; /* its label's text, "" when none */
};

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

/* Batched extend state; freed in its done callback. */
struct redlock_extend_op {
    redlock_extend_fn cb;           /* caller's callback */
    void             *arg;          /* caller's argument */
    size_t            n;            /* items */
    uint8_t          *confirmed;    /* per item */
    uint8_t          *denied;       /* per item */
    uint16_t         *absent;       /* per item: masters without the key */
};

int
redlock_init(double drift_factor)
{
    redlock_drift_factor = drift_factor;
    /*
     * Every answer that grants, confirms or reads a lock carries the
     * master's clock (daemon/master.h); a release's answer only says
     * whether the token was there, and the release is half of every
     * acquire-release pair, so it goes without (one TIME call less per
     * pair and master when it travels alone; in a batch the call reads
     * TIME once for all its requests).
     */
    script_acquire = master_script(REDLOCK_LUA_ACQUIRE, true);
    script_release = master_script(REDLOCK_LUA_RELEASE, false);
    script_extend = master_script(REDLOCK_LUA_EXTEND, true);
    script_status = master_script(REDLOCK_LUA_STATUS, true);
    script_fence = master_script(REDLOCK_LUA_FENCE, true);
    script_extend_one = master_script(REDLOCK_LUA_EXTEND_ONE, true);
    script_restore = master_script(REDLOCK_LUA_RESTORE, true);
    script_ungate = master_script(REDLOCK_LUA_UNGATE, false);
    script_break = master_script(REDLOCK_LUA_BREAK, true);
    script_raise = master_script(REDLOCK_LUA_RAISE, true);
    script_reraise = master_script(REDLOCK_LUA_RERAISE, true);
    /*
     * The per-lock scripts of one loop iteration go to each master in one
     * call (daemon/scripts/batch.lua), whatever clients asked for them.
     */
    script_batch = master_script(REDLOCK_LUA_BATCH, true);
    if (script_batch < 0 || master_script_batch(script_acquire, script_batch, "acquire") != 0
        || master_script_batch(script_release, script_batch, "release") != 0
        || master_script_batch(script_extend_one, script_batch, "extend_one") != 0
        || master_script_batch(script_raise, script_batch, "raise") != 0
        || master_script_batch(script_fence, script_batch, "fence") != 0) {
        return -1;
    }
    return script_acquire < 0 || script_release < 0 || script_extend < 0 || script_status < 0
           || script_fence < 0 || script_extend_one < 0 || script_restore < 0
           || script_ungate < 0 || script_break < 0 || script_raise < 0
           || script_reraise < 0 ? -1 : 0;
}

/*
 * A message on a channel: a name's release channel (strip the suffix
 * back to the lock's key), for the waiters; a name's changes channel,
 * for the watchers; or the daemons' BREAK channel: "<key> <token> ...".
 */
static void
redlock_message(const char *channel, size_t len, const char *msg, size_t msg_len)
{
    size_t slen = sizeof(REDLOCK_CHANNEL_SUFFIX) - 1;
    size_t clen = sizeof(REDLOCK_CHANGED_SUFFIX) - 1;
    const char *sp;

    if (len > slen && memcmp(channel + len - slen, REDLOCK_CHANNEL_SUFFIX, slen) == 0) {
        if (redlock_released_cb != NULL) {
            redlock_released_cb(channel, len - slen, msg, msg_len);
        }
    } else if (len > clen && memcmp(channel + len - clen, REDLOCK_CHANGED_SUFFIX, clen) == 0) {
        if (redlock_changed_cb != NULL) {
            redlock_changed_cb(channel, len - clen);
        }
    } else if (redlock_broken_cb != NULL && len == redlock_broken_chan_len
               && memcmp(channel, redlock_broken_chan, len) == 0
               && (sp = memchr(msg, ' ', msg_len)) != NULL) {
        redlock_broken_cb(msg, (size_t)(sp - msg), sp + 1, msg_len - (size_t)(sp - msg) - 1);
    }
}

void
redlock_on_release(redlock_released_fn fn)
{
    redlock_released_cb = fn;
    channel_on_message(redlock_message);
}

void
redlock_on_change(redlock_changed_fn fn)
{
    redlock_changed_cb = fn;
    channel_on_message(redlock_message);
}

int
redlock_on_break(const char *prefix, redlock_broken_fn fn)
{
    size_t plen = strlen(prefix);

    free(redlock_broken_chan);
    redlock_broken_chan = malloc(plen + sizeof(REDLOCK_BROKEN_SUFFIX));
    if (redlock_broken_chan == NULL) {
        return -1;
    }
    redlock_broken_chan_len = redlock_derived(redlock_broken_chan, prefix, plen,
                                              REDLOCK_BROKEN_SUFFIX);
    redlock_broken_cb = fn;
    channel_on_message(redlock_message);
    return channel_subscribe(redlock_broken_chan, redlock_broken_chan_len);
}

size_t
redlock_subscriptions(void)
{
    size_t n = channel_count();

    n -= redlock_broken_chan != NULL && n > 0 ? 1 : 0;
    n -= redlock_nwatched > 0 && n > 0 ? 1 : 0;
    return n;
}

int
redlock_watch(const char *key, size_t key_len, bool on)
{
    return redlock_subscribe(key, key_len, REDLOCK_CHANNEL_SUFFIX, on);
}

/*
 * A watched name's changes channel, and while any name is watched the
 * channel that tells the masters' scripts to announce at all
 * (REDLOCK_WATCHING_CHANNEL; channel_subscribe counts both).
 */
int
redlock_watch_changes(const char *key, size_t key_len, bool on)
{
    static const char watching[] = REDLOCK_WATCHING_CHANNEL;

    if (on) {
        if (channel_subscribe(watching, sizeof(watching) - 1) != 0) {
            return -1;
        }
        if (redlock_subscribe(key, key_len, REDLOCK_CHANGED_SUFFIX, true) != 0) {
            channel_unsubscribe(watching, sizeof(watching) - 1);
            return -1;
        }
        redlock_nwatched++;
        return 0;
    }
    redlock_subscribe(key, key_len, REDLOCK_CHANGED_SUFFIX, false);
    channel_unsubscribe(watching, sizeof(watching) - 1);
    redlock_nwatched--;
    return 0;
}

/* Subscribe (on) or leave (!on) key + suffix on every master. */
static int
redlock_subscribe(const char *key, size_t key_len, const char *suffix, bool on)
{
    char channel[REDLOCK_DERIVED_MAX];
    size_t len;

    if (key_len > REDLOCK_KEY_MAX) {
        return -1;
    }
    len = redlock_derived(channel, key, key_len, suffix);
    if (on) {
        return channel_subscribe(channel, len);
    }
    channel_unsubscribe(channel, len);
    return 0;
}

void
redlock_set_drift(double drift_factor)
{
    redlock_drift_factor = drift_factor;
}

size_t
redlock_quorum(size_t nmasters)
{
    return nmasters / 2 + 1;
}

int64_t
redlock_drift_us(int64_t ttl_ms, double drift_factor)
{
    return (int64_t)((double)ttl_ms * drift_factor * 1000.0) + 2000;
}

int64_t
redlock_validity_us(int64_t ttl_ms, int64_t elapsed_us, double drift_factor)
{
    return ttl_ms * 1000 - elapsed_us - redlock_drift_us(ttl_ms, drift_factor);
}

static int
redlock_cmp_pttl(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    /* No expiry sorts last: it is the longest wait. */
    if (x == REDLOCK_NO_EXPIRY) {
        x = INT64_MAX;
    }
    if (y == REDLOCK_NO_EXPIRY) {
        y = INT64_MAX;
    }
    return (x > y) - (x < y);
}

int64_t
redlock_holder_ttl(int64_t *pttls, size_t nheld, size_t nfree, size_t quorum)
{
    size_t need;

    if (nfree >= quorum || nheld == 0) {
        return 0;
    }
    need = quorum - nfree;
    if (need > nheld) {
        need = nheld;   /* too few answers to know more: the longest seen */
    }
    qsort(pttls, nheld, sizeof(*pttls), redlock_cmp_pttl);
    return pttls[need - 1];
}

static struct redlock_op *
redlock_op_new(redlock_done_fn cb, void *arg, int64_t ttl_ms)
{
    struct redlock_op *op;
    size_t n = master_count();

    op = calloc(1, sizeof(*op) + n * (sizeof(op->pttls[0]) + sizeof(op->who[0])));
    if (op != NULL) {
        op->who = (uint64_t *)(op->pttls + n);
        op->cb = cb;
        op->arg = arg;
        op->ttl_ms = ttl_ms;
    }
    return op;
}

/* Append to buf (size bytes in all, used taken) what fmt says; returns the new used. */
static size_t
redlock_append(char *buf, size_t size, size_t used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static size_t
redlock_append(char *buf, size_t size, size_t used, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (used >= size) {
        return used;
    }
    va_start(ap, fmt);
    n = vsnprintf(buf + used, size - used, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return used;
    }
    return used + (size_t)n < size ? used + (size_t)n : size - 1;
}

/*
 * The text of a NOQUORUM.  When answers arrived that do not count
 * (restart or clock quarantine), it says so first, with how many, until
 * when, and what an operator can do, because "0 of 5 answered" would be
 * untrue: the masters did answer.  A server listed twice is named too:
 * its second entry was not asked.
 */
static void
redlock_fill_error(struct redlock_result *res, struct round *r)
{
    size_t n = master_count(), size = sizeof(res->error), used, nq, nd, nc;
    int64_t left_ms, clock_ms;
    char when[32];

    nq = round_quarantined(r, &left_ms);
    nd = round_duplicates(r);
    nc = round_clock_quarantined(r, &clock_ms);
    if (nq == 0 && nd == 0 && nc == 0) {
        used = redlock_append(res->error, size, 0, "%zu of %zu masters answered, quorum is %zu: ",
                              round_answered(r), n, redlock_quorum(n));
        round_describe_failures(r, res->error + used, size - used);
        return;
    }
    used = redlock_append(res->error, size, 0, "%zu of %zu masters answered",
                          round_answered(r) + nq + nc, n);
    if (nc > 0) {
        util_clock_after(clock_ms, when, sizeof(when));
        used = redlock_append(res->error, size, used, ", but %zu of them %s in clock "
                              "quarantine (until %s, %lld ms left; a master whose clock "
                              "stepped may have expired locks early)", nc,
                              nc == 1 ? "is" : "are", when, (long long)clock_ms);
    }
    if (nq > 0) {
        util_clock_after(left_ms, when, sizeof(when));
        used = redlock_append(res->error, size, used, "%s %zu of them %s in restart "
                              "quarantine (until %s, %lld ms left; a master up less than "
                              "lock.max_ttl_ms may have lost locks in its restart)",
                              nc > 0 ? " and" : ", but", nq, nq == 1 ? "is" : "are", when,
                              (long long)left_ms);
    }
    if (nd > 0) {
        used = redlock_append(res->error, size, used, "%s %zu more %s the same server "
                              "as a master listed before (same run_id) and %s not asked",
                              nq + nc > 0 ? "; and" : ";", nd, nd == 1 ? "is" : "are",
                              nd == 1 ? "was" : "were");
    }
    used = redlock_append(res->error, size, used, "; quorum is %zu counted masters.",
                          redlock_quorum(n));
    if (nq > 0) {
        used = redlock_append(res->error, size, used, " If these masters are new (they hold "
                              "no locks), set lock.restart_quarantine: false and reload "
                              "(systemctl reload redlockd), then set it back to true; "
                              "masters with appendonly yes and appendfsync always are never "
                              "quarantined (the daemon's ACL user needs +config|get to see "
                              "that).");
    }
    if (nd > 0) {
        used = redlock_append(res->error, size, used, " List each Redis server once in "
                              "masters.");
    }
    used = redlock_append(res->error, size, used, " Not counted: ");
    round_describe_failures(r, res->error + used, size - used);
}

/*
 * The text of a release (or a hand-over's swap) that a quorum answered
 * without confirming: confirmed masters held the token (at says where),
 * and the masters that did not answer, named, may hold it still.
 */
static void
redlock_unconfirmed_error(struct redlock_result *res, struct round *r, size_t confirmed,
                          const char *at)
{
    size_t used = redlock_append(res->error, sizeof(res->error), 0, "%zu of %zu masters "
                                 "confirmed the token%s, and the ones that did not answer "
                                 "may hold it: ", confirmed, master_count(), at);

    round_describe_failures(r, res->error + used, sizeof(res->error) - used);
}

/* Start a result from a decided round: times and answers. */
static void
redlock_result_begin(struct redlock_result *res, struct round *r)
{
    memset(res, 0, sizeof(*res));
    res->start_us = round_start_us(r);
    res->answered = round_answered(r);
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
static uint64_t
redlock_token_hash(const char *s, size_t len)
{
    uint64_t h = 14695981039346656037ULL;
    size_t i;

    for (i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* The most masters that one token refused on, among the nheld refusals. */
static size_t
redlock_top_holder(const struct redlock_op *op)
{
    size_t i, j, same, most = 0;

    for (i = 0; i < op->nheld; i++) {
        same = 0;
        for (j = 0; j < op->nheld; j++) {
            same += op->who[j] == op->who[i];
        }
        if (same > most) {
            most = same;
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
redlock_permits_of(struct redlock_op *op, const struct master_reply *reply)
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
 * A refusal (see the acquire script): {pttl, who}, or for an exclusive
 * request kept out by shared holders {left, who} or {left, who, 'gate'},
 * or for a permit {pttl, who, held, shortest pttl, index...}.  Notes it
 * in op.  Returns NULL, or what is wrong with the answer (op unchanged):
 * a master whose refusal cannot be read is a failed master, never a
 * holder.
 */
static const char *
redlock_refusal_of(struct redlock_op *op, const struct master_reply *reply)
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
    } else if (ne == 3 && op->kind == REDLOCK_EXCLUSIVE
               && redlock_reply_is(master_reply_element(reply, 2), "gate")) {
        op->gated = true;       /* {left, who, 'gate'}: this master closed our gate */
    } else if (ne != 2) {
        return "the acquire script refused with unexpected elements";
    }
    if (op->kind != REDLOCK_PERMIT) {
        op->pttls[op->npttl++] = pttl;
    }
    op->who[op->nheld++] = redlock_token_hash(who, who_len);
    return NULL;
}

static enum round_verdict
redlock_acquire_reply(struct round *r, size_t i, const struct master_reply *reply,
                      void *arg)
{
    struct redlock_op *op = arg;
    size_t n = master_count(), q = redlock_quorum(n);
    int64_t v, subs, branch;
    char what[sizeof(op->kind_text)];
    const char *why;

    op->seen++;
    if (redlock_grant_of(reply, &v, &subs, &branch)) {
        op->yes++;
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
    if (op->yes >= q && (!op->handover || op->swapped >= q)) {
        return ROUND_DECIDED;
    }
    if (op->nheld + op->nkind > n - q) {
        size_t top = redlock_top_holder(op);

        if (top >= q || top + (n - op->seen) < q) {
            return ROUND_DECIDED;
        }
    }
    return ROUND_CONTINUE;
}

static void
redlock_op_free(struct redlock_op *op)
{
    free(op->keys);
    free(op->fence_key);
    free(op->label_key);
    free(op->live);
    free(op->holders);
    free(op);
}

/*
 * Fill k with rec's keys: the record (the name's key, for an exclusive
 * or shared holder, or key + " permit <i>"), and for a permit its limit
 * key (the name's key) and limit.  Returns 0, or -1 when the name's key
 * is too long.
 */
static int
redlock_keys_of(const struct redlock_rec *rec, struct redlock_keys *k)
{
    int n;

    if (rec->base_len > REDLOCK_KEY_MAX) {
        return -1;
    }
    memcpy(k->rec, rec->base, rec->base_len);
    k->rec_len = rec->base_len;
    k->aux_len = 0;
    k->limit_len = 0;
    k->aux[0] = '\0';
    k->limit[0] = '\0';
    k->kind[0] = (char)rec->kind;
    k->kind[1] = '\0';
    k->label[0] = rec->labelled ? '1' : '0';
    k->label[1] = '\0';
    if (rec->kind == REDLOCK_PERMIT) {
        n = snprintf(k->rec + rec->base_len, sizeof(k->rec) - rec->base_len, "%s%u",
                     REDLOCK_PERMIT_SUFFIX, rec->slot);
        k->rec_len = rec->base_len + (size_t)n;
        memcpy(k->aux, rec->base, rec->base_len);
        k->aux[rec->base_len] = '\0';
        k->aux_len = rec->base_len;
        k->limit_len = (size_t)snprintf(k->limit, sizeof(k->limit), "%u", rec->limit);
    } else {
        k->rec[k->rec_len] = '\0';
    }
    return 0;
}

static enum round_verdict
redlock_fence_reply(struct round *r, size_t i, const struct master_reply *reply, void *arg)
{
    struct redlock_op *op = arg;

    if (master_reply_type(reply) != MASTER_REPLY_INTEGER) {
        round_fail(r, i, master_reply_type(reply) == MASTER_REPLY_ERROR
                         ? master_reply_str(reply, NULL)
                         : "unexpected answer to the fence script");
        return ROUND_CONTINUE;
    }
    return ++op->yes >= redlock_quorum(master_count()) ? ROUND_DECIDED : ROUND_CONTINUE;
}

/*
 * "A reply saying OK is true when it is sent": a grant must still have
 * validity left when it is reported; a fenced one a round deadline of
 * it (see redlock_acquire in redlock.h).  Otherwise it is LATE.
 */
static void
redlock_check_left(struct redlock_result *res)
{
    int64_t now = util_now_us(), min_left = res->fence > 0 ? round_timeout_us() : 1000;

    if (res->outcome == REDLOCK_GRANTED && res->validity_end_us <= now + min_left) {
        res->outcome = REDLOCK_LATE;
    }
    /* A fenced grant is told within its span, or not at all (redlock_fence_span_us). */
    if (res->outcome == REDLOCK_GRANTED && res->fence > 0
        && now - res->start_us >= redlock_fence_span_us()) {
        res->outcome = REDLOCK_LATE;
    }
}

int64_t
redlock_fence_span_us(void)
{
    return REDLOCK_FENCE_ROUNDS * round_timeout_us();
}

/* The write-back ended: the grant stands only if a majority has the fence. */
static void
redlock_fence_done(struct round *r, void *arg)
{
    struct redlock_op *op = arg;
    size_t n = master_count(), q = redlock_quorum(n);
    int used;

    if (op->yes >= q) {
        op->res.fence = op->fence;
        redlock_check_left(&op->res);
    } else {
        op->res.outcome = REDLOCK_NOQUORUM;
        used = snprintf(op->res.error, sizeof(op->res.error),
                        "fence write-back: %zu of %zu masters confirmed, quorum is %zu: ",
                        op->yes, n, q);
        round_describe_failures(r, op->res.error + used, sizeof(op->res.error) - (size_t)used);
    }
    op->cb(&op->res, op->arg);
    redlock_op_free(op);
}

/* A later round of op could not start (what): NOQUORUM to the caller, op freed. */
static void
redlock_op_fail(struct redlock_op *op, const char *what)
{
    op->res.outcome = REDLOCK_NOQUORUM;
    snprintf(op->res.error, sizeof(op->res.error), "%s: out of memory", what);
    op->cb(&op->res, op->arg);
    redlock_op_free(op);
}

/*
 * Write the largest counter seen back to every master, set-if-greater,
 * before the grant is reported: any later grant's quorum intersects the
 * majority that confirms this, so it counts from above this value.
 */
static void
redlock_fence_write_back(struct redlock_op *op)
{
    char value[24];
    const char *args[4];
    size_t lens[4], nkeys = 1, n;

    op->yes = 0;
    args[0] = op->fence_key;
    lens[0] = op->fence_key_len;
    if (op->label_key != NULL) {
        args[nkeys] = op->label_key;
        lens[nkeys++] = op->label_key_len;
    }
    n = nkeys;
    args[n] = value;
    lens[n++] = (size_t)snprintf(value, sizeof(value), "%lld", (long long)op->fence);
    if (op->label_key != NULL) {
        args[n] = op->base;
        lens[n++] = op->base_len;
    }
    if (round_start(script_fence, nkeys, n, args, lens, redlock_fence_reply,
                    redlock_fence_done, op) != 0) {
        redlock_op_fail(op, "fence write-back");
    }
}

/* A master raised the counter (its new value) or had lost the grant's record (0). */
static enum round_verdict
redlock_raise_reply(struct round *r, size_t i, const struct master_reply *reply, void *arg)
{
    struct redlock_op *op = arg;
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
        op->no++;
    } else {
        op->yes++;
        if (v > op->fence) {
            op->fence = v;
        }
    }
    return op->yes >= q || op->no > n - q ? ROUND_DECIDED : ROUND_CONTINUE;
}

/* The raise ended: with a quorum, write its largest counter back. */
static void
redlock_raise_done(struct round *r, void *arg)
{
    struct redlock_op *op = arg;
    size_t n = master_count(), q = redlock_quorum(n);
    int used;

    if (op->yes >= q) {
        redlock_fence_write_back(op);
        return;
    }
    op->res.outcome = REDLOCK_NOQUORUM;
    used = snprintf(op->res.error, sizeof(op->res.error),
                    "fence raise: %zu of %zu masters raised the counter where the grant "
                    "held, quorum is %zu: ", op->yes, n, q);
    round_describe_failures(r, op->res.error + used, sizeof(op->res.error) - (size_t)used);
    op->cb(&op->res, op->arg);
    redlock_op_free(op);
}

/*
 * A fenced grant was won: raise the counter on every master where the
 * record still holds the token, and take the largest value a quorum
 * answered.  The increments come after the decision, so they come after
 * every grant confirmed before this one was won (PROTOCOL.md section 10).
 */
static void
redlock_fence_raise(struct redlock_op *op)
{
    const char *args[5];
    size_t lens[5];

    op->yes = 0;
    op->no = 0;
    op->fence = 0;
    args[0] = op->fence_key;
    lens[0] = op->fence_key_len;
    args[1] = op->keys->rec;
    lens[1] = op->keys->rec_len;
    args[2] = op->token;
    lens[2] = UTIL_TOKEN_HEX;
    args[3] = op->keys->kind;
    lens[3] = 1;
    args[4] = op->keys->aux;
    lens[4] = op->keys->aux_len;
    if (round_start(script_raise, 2, 5, args, lens, redlock_raise_reply, redlock_raise_done,
                    op) != 0) {
        redlock_op_fail(op, "fence raise");
    }
}

/*
 * A permit worth trying after ours was refused: the one the fewest
 * answering masters hold, from the next after ours on (so that
 * contenders spread), or -1 when every master that listed its permits
 * holds every one.
 */
static int
redlock_free_slot(const struct redlock_op *op)
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
    struct redlock_op *op = arg;
    struct redlock_result *res = &op->res;
    size_t n = master_count(), q = redlock_quorum(n), i;
    int64_t start = round_start_us(r), validity;

    redlock_result_begin(res, r);
    for (i = 0; i < n; i++) {
        res->failed += round_slot(r, i) == ROUND_FAILED;   /* for a hand-over's clean-up */
    }
    res->unanswered = round_unanswered(r);
    res->confirmed = op->yes;
    res->swapped = op->swapped;
    res->subscribers = (size_t)op->subscribers;
    validity = redlock_validity_us(op->ttl_ms, round_end_us(r) - start,
                                   redlock_drift_factor);
    if (op->yes >= q && validity > 0) {
        res->outcome = REDLOCK_GRANTED;
        res->validity_end_us = start + op->ttl_ms * 1000
                               - redlock_drift_us(op->ttl_ms, redlock_drift_factor);
    } else if (op->nkind > n - q) {
        /* So many hold it as another kind that no quorum of this kind is possible. */
        res->outcome = REDLOCK_KIND;
        snprintf(res->error, sizeof(res->error), "%s", op->kind_text);
    } else if (op->nheld + op->nkind > n - q || res->answered >= q) {
        /* A few masters of another kind (left over, or a minority) only refuse. */
        res->outcome = REDLOCK_BUSY;
        res->ttl_ms = redlock_holder_ttl(op->pttls, op->npttl, op->yes + op->nopen, q);
        /*
         * Split unless one token refused on a quorum: masters that
         * granted us, did not answer, or hold another kind (a minority)
         * count for no token.
         */
        res->split = redlock_top_holder(op) < q;
    } else {
        res->outcome = REDLOCK_NOQUORUM;
    }
    res->free_slot = redlock_free_slot(op);
    res->gated = op->gated;
    if (res->answered < q && res->outcome != REDLOCK_KIND) {
        redlock_fill_error(res, r);     /* also for a hand-over's releaser */
    }
    if (op->handover) {
        /* The releaser's verdict: only masters that swapped held its token. */
        res->released = redlock_release_verdict(res->answered, op->swapped, n);
        if (res->released == REDLOCK_NOQUORUM && res->answered >= q
            && res->outcome != REDLOCK_KIND) {
            redlock_unconfirmed_error(res, r, op->swapped, " at the hand-over");
        }
    }
    if (res->outcome == REDLOCK_GRANTED && op->fenced) {
        redlock_fence_raise(op);
        return;
    }
    redlock_check_left(res);
    op->cb(res, op->arg);
    redlock_op_free(op);
}

/*
 * Write key + suffix and a NUL into out, which has room for key_len +
 * strlen(suffix) + 1 bytes (REDLOCK_DERIVED_MAX for any key up to
 * REDLOCK_KEY_MAX); returns the length.
 */
static size_t
redlock_derived(char *out, const char *key, size_t key_len, const char *suffix)
{
    size_t slen = strlen(suffix);

    memcpy(out, key, key_len);
    memcpy(out + key_len, suffix, slen + 1);
    return key_len + slen;
}

int
redlock_acquire(const struct redlock_rec *rec, const char *token, int64_t ttl_ms,
                const char *old_token, unsigned flags, const char *gate,
                const char *label, redlock_done_fn cb, void *arg)
{
    struct redlock_op *op;
    struct redlock_keys k;
    bool fence = (flags & REDLOCK_ACQUIRE_FENCE) != 0;
    char ttl[24];
    const char *args[12];
    size_t lens[12], nkeys, n = 0, label_len = label != NULL ? strlen(label) : 0;

    if (rec->kind == REDLOCK_ANY || redlock_keys_of(rec, &k) != 0) {
        return -1;
    }
    op = redlock_op_new(cb, arg, ttl_ms);
    if (op == NULL) {
        return -1;
    }
    op->fenced = fence;
    op->handover = old_token != NULL && (flags & REDLOCK_ACQUIRE_ADOPT) == 0;
    op->kind = rec->kind;
    op->slot = rec->slot;
    op->limit = rec->limit;
    if (rec->kind == REDLOCK_PERMIT) {
        if (rec->limit == 0 || rec->limit > REDLOCK_LIMIT_MAX || rec->slot >= rec->limit
            || (op->live = calloc(rec->limit, sizeof(*op->live))) == NULL) {
            redlock_op_free(op);
            return -1;
        }
    }
    /* KEYS: the name, the record, then the counter when fenced. */
    args[n] = rec->base;
    lens[n++] = rec->base_len;
    args[n] = k.rec;
    lens[n++] = k.rec_len;
    if (fence) {
        /* A permit counts on its own counter; the other kinds on the name's. */
        const char *on = rec->kind == REDLOCK_PERMIT ? k.rec : rec->base;
        size_t on_len = rec->kind == REDLOCK_PERMIT ? k.rec_len : rec->base_len;

        op->fence_key = malloc(on_len + sizeof(REDLOCK_FENCE_SUFFIX));
        if (op->fence_key == NULL) {
            redlock_op_free(op);
            return -1;
        }
        op->fence_key_len = redlock_derived(op->fence_key, on, on_len, REDLOCK_FENCE_SUFFIX);
        args[n] = op->fence_key;
        lens[n++] = op->fence_key_len;
        op->keys = malloc(sizeof(*op->keys));
        if (op->keys == NULL) {
            redlock_op_free(op);
            return -1;
        }
        *op->keys = k;
        memcpy(op->token, token, UTIL_TOKEN_HEX);
        if (label_len > 0) {
            /* The write-back puts the fence into the label as well. */
            op->label_key = malloc(k.rec_len + sizeof(REDLOCK_LABEL_SUFFIX) + UTIL_TOKEN_HEX);
            if (op->label_key == NULL) {
                redlock_op_free(op);
                return -1;
            }
            op->label_key_len = redlock_derived(op->label_key, k.rec, k.rec_len,
                                                REDLOCK_LABEL_SUFFIX);
            memcpy(op->base, rec->base, rec->base_len);
            op->base_len = rec->base_len;
            memcpy(op->label_key + op->label_key_len, token, UTIL_TOKEN_HEX);
            op->label_key_len += UTIL_TOKEN_HEX;
        }
    }
    nkeys = n;
    /* ARGV: token, ttl, peers, old token, kind, limit, wait, label, gate. */
    args[n] = token;
    lens[n++] = UTIL_TOKEN_HEX;
    args[n] = ttl;
    lens[n++] = (size_t)snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
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
    if (round_start(script_acquire, nkeys, n, args, lens, redlock_acquire_reply,
                    redlock_acquire_done, op) != 0) {
        redlock_op_free(op);
        return -1;
    }
    return 0;
}

static enum round_verdict
redlock_release_reply(struct round *r, size_t i, const struct master_reply *reply,
                      void *arg)
{
    struct redlock_op *op = arg;

    size_t n = master_count(), q = redlock_quorum(n);

    if (master_reply_type(reply) != MASTER_REPLY_INTEGER) {
        round_fail(r, i, "unexpected answer to the release script");
    } else if (op == NULL) {
        return ROUND_CONTINUE;
    } else if (master_reply_integer(reply) == 1) {
        op->yes++;
    } else {
        op->no++;
    }
    /*
     * Decided once the verdict cannot change (redlock_release_verdict):
     * a quorum confirmed (RELEASED), or so many found no key that no
     * quorum can (GONE).  The request reached every master already; the
     * later answers are only not waited for.
     */
    return op != NULL && (op->yes >= q || op->no > n - q) ? ROUND_DECIDED : ROUND_CONTINUE;
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
    struct redlock_op *op = arg;
    struct redlock_result res;

    redlock_result_begin(&res, r);
    res.confirmed = op->yes;
    res.outcome = redlock_release_verdict(res.answered, res.confirmed, master_count());
    if (res.outcome == REDLOCK_NOQUORUM && res.answered >= redlock_quorum(master_count())) {
        redlock_unconfirmed_error(&res, r, res.confirmed, "");
    } else if (res.outcome == REDLOCK_NOQUORUM) {
        redlock_fill_error(&res, r);
    }
    op->cb(&res, op->arg);
    redlock_op_free(op);
}

int
redlock_release(const struct redlock_rec *rec, const char *token, bool announce,
                redlock_done_fn cb, void *arg)
{
    struct redlock_op *op = NULL;
    struct redlock_keys k;
    const char *args[6] = { k.rec, token, announce ? "1" : "", k.kind, k.aux, k.label };
    size_t lens[6] = { 0, UTIL_TOKEN_HEX, announce ? 1 : 0, 1, 0, 1 };

    if (redlock_keys_of(rec, &k) != 0) {
        return -1;
    }
    lens[0] = k.rec_len;
    lens[4] = k.aux_len;
    if (cb != NULL) {
        op = redlock_op_new(cb, arg, 0);
        if (op == NULL) {
            return -1;
        }
    }
    /* Sent to every master; answered once a verdict is sure (redlock_release_reply). */
    if (round_start(script_release, 1, 6, args, lens, redlock_release_reply,
                    cb != NULL ? redlock_release_done : NULL, op) != 0) {
        free(op);
        return -1;
    }
    return 0;
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
    return round_start(script_ungate, 1, 3, args, lens, NULL, NULL, NULL);
}

/* Extend one lease by token: count confirmations, keep their old pttls. */
static enum round_verdict
redlock_extend_one_reply(struct round *r, size_t i, const struct master_reply *reply,
                         void *arg)
{
    struct redlock_op *op = arg;
    size_t n = master_count(), q = redlock_quorum(n);
    long long v;

    if (master_reply_type(reply) != MASTER_REPLY_INTEGER
        || (v = master_reply_integer(reply)) < -3 || v == -2) {
        round_fail(r, i, "unexpected answer to the extend script");
        return ROUND_CONTINUE;
    }
    if (v == -3) {
        op->no++;
    } else {
        op->pttls[op->yes++] = v;
    }
    return op->yes >= q || op->no > n - q ? ROUND_DECIDED : ROUND_CONTINUE;
}

static void
redlock_extend_one_done(struct round *r, void *arg)
{
    struct redlock_op *op = arg;
    struct redlock_result res;
    size_t n = master_count(), q = redlock_quorum(n);
    int64_t elapsed = round_end_us(r) - round_start_us(r), left_ms, left_us;

    redlock_result_begin(&res, r);
    res.confirmed = op->yes;
    if (op->yes >= q) {
        /*
         * The lock stayed exclusive until fewer than a quorum of the old
         * keys remained: the q-th longest old pttl among the confirmers,
         * less drift.  The round must have ended within that.
         */
        qsort(op->pttls, op->yes, sizeof(op->pttls[0]), redlock_cmp_pttl);
        left_ms = op->pttls[op->yes - q];
        left_us = left_ms == REDLOCK_NO_EXPIRY ? INT64_MAX
                  : left_ms * 1000 - redlock_drift_us(left_ms, redlock_drift_factor);
        if (elapsed < left_us
            && redlock_validity_us(op->ttl_ms, elapsed, redlock_drift_factor) > 0) {
            res.outcome = REDLOCK_GRANTED;
            res.validity_end_us = res.start_us + op->ttl_ms * 1000
                                  - redlock_drift_us(op->ttl_ms, redlock_drift_factor);
        } else {
            res.outcome = REDLOCK_NOTHELD;
        }
    } else if (op->no > n - q) {
        res.outcome = REDLOCK_NOTHELD;
    } else {
        res.outcome = REDLOCK_NOQUORUM;
        redlock_fill_error(&res, r);
    }
    op->cb(&res, op->arg);
    redlock_op_free(op);
}

int
redlock_extend_one(const char *base, size_t base_len, const char *token, int64_t ttl_ms,
                   redlock_done_fn cb, void *arg)
{
    struct redlock_op *op;
    char ttl[24];
    const char *args[5] = { base, token, ttl, "?", "" };
    size_t lens[5] = { base_len, UTIL_TOKEN_HEX, 0, 1, 0 };

    if (base_len > REDLOCK_KEY_MAX) {
        return -1;
    }
    op = redlock_op_new(cb, arg, ttl_ms);
    if (op == NULL) {
        return -1;
    }
    lens[2] = (size_t)snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
    if (round_start(script_extend_one, 1, 5, args, lens, redlock_extend_one_reply,
                    redlock_extend_one_done, op) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

int
redlock_expire_at(const struct redlock_rec *rec, const char *token, int64_t validity_end_us)
{
    struct redlock_keys k;
    char ttl[24];
    const char *args[6] = { k.rec, token, ttl, k.kind, k.aux, k.label };
    size_t lens[6] = { 0, UTIL_TOKEN_HEX, 0, 1, 0, 1 };
    int64_t ms = (validity_end_us - util_now_us()) / 1000;

    if (redlock_keys_of(rec, &k) != 0) {
        return -1;
    }
    lens[0] = k.rec_len;
    lens[4] = k.aux_len;
    /* Plus drift, for masters whose clocks run fast. */
    ms += redlock_drift_us(ms > 0 ? ms : 0, redlock_drift_factor) / 1000;
    lens[2] = (size_t)snprintf(ttl, sizeof(ttl), "%lld", (long long)(ms > 0 ? ms : 1));
    return round_start(script_extend_one, 1, 6, args, lens, NULL, NULL, NULL);
}

/*
 * Keep one holder a master named; false when out of memory.  who is its
 * token there, info its label as the status script gives it ("<age>
 * <fence> <text>", or empty).
 */
static bool
redlock_holder_add(struct redlock_op *op, char kind, const char *id, size_t id_len,
                   int64_t pttl, bool mine, const char *who, size_t who_len,
                   const char *info, size_t info_len)
{
    struct redlock_holder *h;
    long long age, fence;
    int off = 0;

    if (op->nholders == op->holders_cap) {
        size_t cap = op->holders_cap == 0 ? 8 : op->holders_cap * 2;

        h = realloc(op->holders, cap * sizeof(*h));
        if (h == NULL) {
            return false;
        }
        op->holders = h;
        op->holders_cap = cap;
    }
    h = &op->holders[op->nholders++];
    h->kind = kind;
    memcpy(h->id, id, id_len);
    h->id[id_len] = '\0';
    h->pttl = pttl;
    h->mine = mine;
    snprintf(h->who, sizeof(h->who), "%.*s", (int)who_len, who);
    h->age_ms = -1;
    h->fence = 0;
    memset(h->label, 0, sizeof(h->label));
    /* The script wrote it from a label of at most 64 printable bytes; trust no more. */
    if (info_len > 0 && info_len < 128 && info[info_len] == '\0'
        && sscanf(info, "%lld %lld %n", &age, &fence, &off) == 2 && off > 0
        && age >= 0 && fence >= 0 && info_len - (size_t)off <= REDLOCK_LABEL_MAX
        && util_printable_word(info + off, info_len - (size_t)off)) {
        h->age_ms = age;
        h->fence = fence;
        memcpy(h->label, info + off, info_len - (size_t)off);
        h->label[info_len - (size_t)off] = '\0';
    }
    return true;
}

/* {limit, then kind, id, pttl, mine, who, label per holder}: keep each holder. */
static enum round_verdict
redlock_status_reply(struct round *r, size_t i, const struct master_reply *reply,
                     void *arg)
{
    struct redlock_op *op = arg;
    size_t ne = master_reply_elements(reply), j, len, id_len, who_len, info_len;
    const struct master_reply *e[6];
    const char *kind, *id, *who, *info;

    if (master_reply_type(reply) != MASTER_REPLY_ARRAY || ne < 1 || (ne - 1) % 6 != 0
        || master_reply_type(master_reply_element(reply, 0)) != MASTER_REPLY_INTEGER) {
        round_fail(r, i, "unexpected answer to the status script");
        return ROUND_CONTINUE;
    }
    for (j = 1; j < ne; j += 6) {
        for (len = 0; len < 6; len++) {
            e[len] = master_reply_element(reply, j + len);
        }
        if (master_reply_type(e[0]) != MASTER_REPLY_STRING
            || master_reply_type(e[1]) != MASTER_REPLY_STRING
            || master_reply_type(e[2]) != MASTER_REPLY_INTEGER
            || master_reply_type(e[3]) != MASTER_REPLY_INTEGER
            || master_reply_type(e[4]) != MASTER_REPLY_STRING
            || master_reply_type(e[5]) != MASTER_REPLY_STRING
            || (kind = master_reply_str(e[0], &len), len != 1)
            || strchr("xps", kind[0]) == NULL
            || (id = master_reply_str(e[1], &id_len), id_len > UTIL_TOKEN_HEX)
            || master_reply_integer(e[2]) < -1) {
            round_fail(r, i, "unexpected answer to the status script");
            return ROUND_CONTINUE;
        }
        who = master_reply_str(e[4], &who_len);
        info = master_reply_str(e[5], &info_len);
        if (who_len > REDLOCK_WHO_MAX) {
            who_len = REDLOCK_WHO_MAX;
        }
        if (!redlock_holder_add(op, kind[0], id, id_len, master_reply_integer(e[2]),
                                master_reply_integer(e[3]) == 1, who, who_len, info,
                                info_len)) {
            round_fail(r, i, "out of memory reading the status");
            return ROUND_CONTINUE;
        }
    }
    if (master_reply_integer(master_reply_element(reply, 0)) > (int64_t)op->limit) {
        op->limit = (unsigned)master_reply_integer(master_reply_element(reply, 0));
    }
    return ROUND_CONTINUE;
}

/*
 * What a status shows of one holder, from the entries [j, k) the masters
 * gave of it (one per master): the token that a quorum (q) of them hold,
 * and from that token's entries its label, its fence (the written-back
 * one where it is not 0) and the least time held any of them says (each
 * on its own clock).  When no token is on a quorum (two contenders split
 * the masters, a hand-over half done), nothing is shown of any: a
 * minority's label is nobody's.
 */
static void
redlock_holder_show(const struct redlock_holder *hs, size_t j, size_t k, size_t q,
                    struct redlock_result *res)
{
    size_t i, m, n;

    /* Whole arrays: watchers compare states byte for byte. */
    memset(res->label, 0, sizeof(res->label));
    memset(res->holder, 0, sizeof(res->holder));
    res->held_ms = -1;
    res->fence = 0;
    for (i = j; i < k; i++) {
        for (n = 0, m = j; m < k; m++) {
            n += hs[i].who[0] != '\0' && strcmp(hs[i].who, hs[m].who) == 0;
        }
        if (n >= q) {
            break;
        }
    }
    if (i == k) {
        return;
    }
    snprintf(res->holder, sizeof(res->holder), "%s", hs[i].who);
    for (i = j; i < k; i++) {
        if (hs[i].age_ms < 0 || strcmp(hs[i].who, res->holder) != 0) {
            continue;
        }
        if (res->label[0] == '\0') {
            memcpy(res->label, hs[i].label, sizeof(res->label));
        }
        if (res->held_ms < 0 || hs[i].age_ms < res->held_ms) {
            res->held_ms = hs[i].age_ms;
        }
        if (hs[i].fence > res->fence) {
            res->fence = hs[i].fence;
        }
    }
}

/* The longest any master says holder entries [j, k) have held, ms, or -1. */
static int64_t
redlock_holder_age(const struct redlock_holder *hs, size_t j, size_t k)
{
    int64_t age = -1;

    for (; j < k; j++) {
        if (hs[j].age_ms > age) {
            age = hs[j].age_ms;
        }
    }
    return age;
}

static int
redlock_holder_cmp(const void *a, const void *b)
{
    const struct redlock_holder *x = a, *y = b;

    if (x->kind != y->kind) {
        return x->kind < y->kind ? -1 : 1;
    }
    return strcmp(x->id, y->id);
}

/* How much a kind ranks when a master holds several (a mix left by hand). */
static int
redlock_kind_rank(char kind)
{
    return kind == REDLOCK_EXCLUSIVE ? 3 : kind == REDLOCK_PERMIT ? 2 : 1;
}

/*
 * Decide a status: group the holders the masters named by (kind, id);
 * a holder counts when fewer than a quorum see it absent (nobody could
 * take its place now), as an exclusive key does for HELD.
 */
static void
redlock_status_done(struct round *r, void *arg)
{
    struct redlock_op *op = arg;
    struct redlock_result res;
    size_t q = redlock_quorum(master_count()), j, k, present, mine;
    int64_t ttl, age, shown_age = -2;
    bool shown_mine = false;

    redlock_result_begin(&res, r);
    res.outcome = REDLOCK_FREE;
    res.held_ms = -1;
    if (res.answered < q) {
        res.outcome = REDLOCK_NOQUORUM;
        redlock_fill_error(&res, r);
        op->nholders = 0;
    }
    if (op->nholders > 0) {
        qsort(op->holders, op->nholders, sizeof(*op->holders), redlock_holder_cmp);
    }
    for (j = 0; j < op->nholders; j = k) {
        present = 0;
        mine = 0;
        for (k = j; k < op->nholders && redlock_holder_cmp(&op->holders[j], &op->holders[k]) == 0
             && present < master_count(); k++) {
            op->pttls[present++] = op->holders[k].pttl;
            mine += op->holders[k].mine;
        }
        if (res.answered - present >= q) {
            continue;       /* a quorum sees it gone: not a holder */
        }
        ttl = redlock_holder_ttl(op->pttls, present, res.answered - present, q);
        if (res.outcome == REDLOCK_HELD
            && redlock_kind_rank(op->holders[j].kind) < redlock_kind_rank((char)res.kind)) {
            continue;
        }
        if (res.outcome != REDLOCK_HELD || op->holders[j].kind != (char)res.kind) {
            res.outcome = REDLOCK_HELD;
            res.kind = (enum redlock_kind)op->holders[j].kind;
            res.holders = 0;
            res.ttl_ms = 0;
            res.owner_self = false;
            res.confirmed = 0;
            shown_age = -2;
            shown_mine = false;
        }
        res.holders++;
        if (res.ttl_ms != REDLOCK_NO_EXPIRY && (ttl == REDLOCK_NO_EXPIRY || ttl > res.ttl_ms)) {
            res.ttl_ms = ttl;
        }
        if (mine >= q) {
            res.owner_self = true;
            res.confirmed = mine;
        }
        /* Show the asker's own hold, else the one held longest. */
        age = redlock_holder_age(op->holders, j, k);
        if (!shown_mine && (mine >= q || age > shown_age)) {
            redlock_holder_show(op->holders, j, k, q, &res);
            shown_age = age;
            shown_mine = mine >= q;
        }
    }
    res.limit = res.kind == REDLOCK_PERMIT ? op->limit : 0;
    op->cb(&res, op->arg);
    redlock_op_free(op);
}

/* {holders deleted, the raised counter, the first holder's label}: keep the most. */
static enum round_verdict
redlock_break_reply(struct round *r, size_t i, const struct master_reply *reply, void *arg)
{
    struct redlock_op *op = arg;
    const struct master_reply *e[4];
    size_t len;
    const char *info;

    if (master_reply_type(reply) != MASTER_REPLY_ARRAY || master_reply_elements(reply) != 4
        || master_reply_type(e[0] = master_reply_element(reply, 0)) != MASTER_REPLY_INTEGER
        || master_reply_type(e[1] = master_reply_element(reply, 1)) != MASTER_REPLY_INTEGER
        || master_reply_type(e[2] = master_reply_element(reply, 2)) != MASTER_REPLY_STRING
        || master_reply_type(e[3] = master_reply_element(reply, 3)) != MASTER_REPLY_INTEGER
        || master_reply_integer(e[0]) < 0 || master_reply_integer(e[1]) < 1
        || master_reply_integer(e[3]) < 0 || master_reply_integer(e[3]) > REDLOCK_LIMIT_MAX) {
        round_fail(r, i, master_reply_type(reply) == MASTER_REPLY_ERROR
                         ? master_reply_str(reply, NULL)
                         : "unexpected answer to the break script");
        if (master_reply_type(reply) == MASTER_REPLY_ERROR) {
            log_warn("master %s: break script: %s", master_name(master_at(i)),
                     master_reply_str(reply, NULL));
        }
        return ROUND_CONTINUE;
    }
    op->yes++;
    if ((size_t)master_reply_integer(e[0]) > op->res.holders) {
        op->res.holders = (size_t)master_reply_integer(e[0]);
    }
    if (master_reply_integer(e[1]) > op->fence) {
        op->fence = master_reply_integer(e[1]);
    }
    if ((unsigned)master_reply_integer(e[3]) > op->break_limit) {
        op->break_limit = (unsigned)master_reply_integer(e[3]);
    }
    info = master_reply_str(e[2], &len);
    if (op->res.label[0] == '\0' && len > 0 && redlock_holder_add(op, 'x', "", 0, 0, false,
                                                                 "", 0, info, len)) {
        memcpy(op->res.label, op->holders[op->nholders - 1].label, sizeof(op->res.label));
    }
    return ROUND_CONTINUE;
}

/* A master took the second raise: keep the largest counter. */
static enum round_verdict
redlock_reraise_reply(struct round *r, size_t i, const struct master_reply *reply, void *arg)
{
    struct redlock_op *op = arg;

    if (master_reply_type(reply) != MASTER_REPLY_INTEGER || master_reply_integer(reply) < 1) {
        round_fail(r, i, "unexpected answer to the raise script");
        return ROUND_CONTINUE;
    }
    op->yes++;
    if (master_reply_integer(reply) > op->fence) {
        op->fence = master_reply_integer(reply);
    }
    return ROUND_CONTINUE;
}

/* The second raise ended: with a quorum, write its largest counter back, then OK. */
static void
redlock_reraise_done(struct round *r, void *arg)
{
    struct redlock_op *op = arg;
    struct redlock_result *res = &op->res;
    size_t n = master_count(), q = redlock_quorum(n);
    int used;

    if (op->yes < q) {
        res->outcome = REDLOCK_NOQUORUM;
        used = snprintf(res->error, sizeof(res->error), "fence raise: %zu of %zu masters "
                        "raised the counter, quorum is %zu: ", op->yes, n, q);
        round_describe_failures(r, res->error + used, sizeof(res->error) - (size_t)used);
        op->cb(res, op->arg);
        redlock_op_free(op);
        return;
    }
    redlock_fence_write_back(op);
}

/*
 * The second raise of a BREAK: every grant its first round broke has
 * been told its fence by now, or never will be (redlock_fence_span_us),
 * and each of those fences was written back to a majority first.
 */
static void
redlock_break_reraise(void *arg)
{
    struct redlock_op *op = arg;
    char seen[24], limit[16];
    /* The name's key is the counter's without its suffix. */
    const char *args[4] = { op->fence_key, op->fence_key, seen, limit };
    size_t lens[4] = { op->fence_key_len,
                       op->fence_key_len - (sizeof(REDLOCK_FENCE_SUFFIX) - 1), 0, 0 };

    lens[2] = (size_t)snprintf(seen, sizeof(seen), "%lld", (long long)op->fence);
    lens[3] = (size_t)snprintf(limit, sizeof(limit), "%u", op->break_limit);
    op->yes = 0;
    if (round_start(script_reraise, 2, 4, args, lens, redlock_reraise_reply,
                    redlock_reraise_done, op) != 0) {
        redlock_op_fail(op, "fence raise");
    }
}

/*
 * The break ran.  With a quorum: wait until every fenced grant whose
 * round began before this one ended has been told its fence or never
 * will be, then raise the counter a second time, above every fence
 * written back meanwhile (PROTOCOL.md, BREAK), and write that back.
 */
static void
redlock_break_done(struct round *r, void *arg)
{
    struct redlock_op *op = arg;
    struct redlock_result *res = &op->res;
    size_t holders = res->holders;
    char label[sizeof(res->label)];
    int64_t span = redlock_fence_span_us();

    memcpy(label, res->label, sizeof(label));
    redlock_result_begin(res, r);
    res->holders = holders;
    memcpy(res->label, label, sizeof(label));
    res->held_ms = -1;
    if (op->yes < redlock_quorum(master_count())) {
        res->outcome = REDLOCK_NOQUORUM;
        redlock_fill_error(res, r);
        op->cb(res, op->arg);
        redlock_op_free(op);
        return;
    }
    res->outcome = REDLOCK_RELEASED;
    res->confirmed = op->yes;
    /* Measured on another daemon's clock, which may run drift_factor slow. */
    span += (int64_t)((double)span * 2 * redlock_drift_factor) + 2000;
    if (round_after(span, redlock_break_reraise, op) != 0) {
        redlock_op_fail(op, "fence raise");
    }
}

int
redlock_break(const char *base, size_t base_len, const char *prefix, redlock_done_fn cb,
              void *arg)
{
    struct redlock_op *op;
    char channel[REDLOCK_DERIVED_MAX], bchan[REDLOCK_DERIVED_MAX];
    size_t plen = strlen(prefix);
    const char *args[3] = { base, channel, bchan };
    size_t lens[3];

    if (base_len > REDLOCK_KEY_MAX || plen > REDLOCK_KEY_MAX) {
        return -1;
    }
    op = redlock_op_new(cb, arg, 0);
    if (op == NULL) {
        return -1;
    }
    op->fence_key = malloc(base_len + sizeof(REDLOCK_FENCE_SUFFIX));
    if (op->fence_key == NULL) {
        redlock_op_free(op);
        return -1;
    }
    op->fence_key_len = redlock_derived(op->fence_key, base, base_len, REDLOCK_FENCE_SUFFIX);
    lens[0] = base_len;
    lens[1] = redlock_derived(channel, base, base_len, REDLOCK_CHANNEL_SUFFIX);
    lens[2] = redlock_derived(bchan, prefix, plen, REDLOCK_BROKEN_SUFFIX);
    if (round_start(script_break, 1, 3, args, lens, redlock_break_reply, redlock_break_done,
                    op) != 0) {
        redlock_op_free(op);
        return -1;
    }
    return 0;
}

int
redlock_status(const char *base, size_t base_len, const char *token,
               redlock_done_fn cb, void *arg)
{
    struct redlock_op *op;
    const char *args[2] = { base, token != NULL ? token : "" };
    size_t lens[2] = { base_len, token != NULL ? UTIL_TOKEN_HEX : 0 };

    if (base_len > REDLOCK_KEY_MAX) {
        return -1;
    }
    op = redlock_op_new(cb, arg, 0);
    if (op == NULL) {
        return -1;
    }
    if (round_start(script_status, 1, 2, args, lens, redlock_status_reply,
                    redlock_status_done, op) != 0) {
        redlock_op_free(op);
        return -1;
    }
    return 0;
}

static enum round_verdict
redlock_extend_reply(struct round *r, size_t i, const struct master_reply *reply,
                     void *arg)
{
    struct redlock_extend_op *op = arg;
    size_t j;
    const struct master_reply *e;

    if (master_reply_type(reply) != MASTER_REPLY_ARRAY
        || master_reply_elements(reply) != op->n) {
        round_fail(r, i, "unexpected answer to the extend script");
        return ROUND_CONTINUE;
    }
    for (j = 0; j < op->n; j++) {
        e = master_reply_element(reply, j);
        if (master_reply_type(e) == MASTER_REPLY_INTEGER && master_reply_integer(e) == 1) {
            op->confirmed[j]++;
        } else {
            op->denied[j]++;
            if (master_reply_type(e) == MASTER_REPLY_INTEGER && master_reply_integer(e) == 2) {
                op->absent[j] |= (uint16_t)(1u << i);
            }
        }
    }
    /* No early decision: the late answers say where a key went missing. */
    return ROUND_CONTINUE;
}

static void
redlock_extend_done(struct round *r, void *arg)
{
    struct redlock_extend_op *op = arg;
    struct redlock_extend_result res;
    char failures[REDLOCK_ERROR_MAX];

    res.n = op->n;
    res.confirmed = op->confirmed;
    res.denied = op->denied;
    res.absent = op->absent;
    res.answered = round_answered(r);
    res.start_us = round_start_us(r);
    res.end_us = round_end_us(r);
    res.error = round_describe_failures(r, failures, sizeof(failures));
    op->cb(&res, op->arg);
    free(op);
}

/*
 * Copy len bytes of src to *p (advanced past them) and point *arg and
 * *arg_len at the copy: how the batched scripts lay out their words.
 */
static void
redlock_put(char **p, const char *src, size_t len, const char **arg, size_t *arg_len)
{
    memcpy(*p, src, len);
    *arg = *p;
    *arg_len = len;
    *p += len;
}

/* Bytes the words of one batched record may take: its keys, token, numbers. */
static size_t
redlock_rec_room(const struct redlock_rec *rec)
{
    return 2 * rec->base_len + 64 + UTIL_TOKEN_HEX + 48;
}

int
redlock_extend(const struct redlock_extend_item *items, size_t n,
               redlock_extend_fn cb, void *arg)
{
    struct redlock_extend_op *op;
    struct redlock_keys k;
    const char **args;
    size_t *lens, i, nargs = 6 * n, room = 0;
    char *bytes, *p, ttl[24];
    int rc = -1;

    for (i = 0; i < n; i++) {
        room += redlock_rec_room(items[i].rec);
    }
    op = calloc(1, sizeof(*op) + n * sizeof(*op->absent) + 2 * n);
    args = malloc(nargs * sizeof(*args));
    lens = malloc(nargs * sizeof(*lens));
    bytes = malloc(room);
    if (op == NULL || args == NULL || lens == NULL || bytes == NULL) {
        goto out;
    }
    op->cb = cb;
    op->arg = arg;
    op->n = n;
    op->absent = (uint16_t *)(op + 1);
    op->confirmed = (uint8_t *)(op->absent + n);
    op->denied = op->confirmed + n;
    /* KEYS: the records; ARGV per record: token, ttl, kind, limit key, label. */
    for (i = 0, p = bytes; i < n; i++) {
        size_t a = n + 5 * i;

        if (redlock_keys_of(items[i].rec, &k) != 0) {
            goto out;
        }
        redlock_put(&p, k.rec, k.rec_len, &args[i], &lens[i]);
        redlock_put(&p, items[i].token, UTIL_TOKEN_HEX, &args[a], &lens[a]);
        redlock_put(&p, ttl, (size_t)snprintf(ttl, sizeof(ttl), "%lld",
                                              (long long)items[i].ttl_ms),
                    &args[a + 1], &lens[a + 1]);
        redlock_put(&p, k.kind, 1, &args[a + 2], &lens[a + 2]);
        redlock_put(&p, k.aux, k.aux_len, &args[a + 3], &lens[a + 3]);
        redlock_put(&p, k.label, 1, &args[a + 4], &lens[a + 4]);
    }
    rc = round_start(script_extend, n, nargs, args, lens, redlock_extend_reply,
                     redlock_extend_done, op);
out:
    free(args);
    free(lens);
    free(bytes);
    if (rc != 0) {
        free(op);
        return -1;
    }
    return 0;
}

enum redlock_renewal
redlock_renewal_verdict(size_t confirmed, size_t denied, size_t nmasters, int64_t start_us,
                        int64_t end_us, int64_t ttl_ms, int64_t validity_end_us,
                        int64_t *new_end_us)
{
    size_t q = redlock_quorum(nmasters);

    if (confirmed >= q) {
        if (end_us >= validity_end_us) {
            return REDLOCK_TOO_LATE;
        }
        *new_end_us = start_us + ttl_ms * 1000 - redlock_drift_us(ttl_ms, redlock_drift_factor);
        return REDLOCK_RENEWED;
    }
    return denied > nmasters - q ? REDLOCK_DENIED : REDLOCK_UNDECIDED;
}

/* A restore sent to one master: its own copy of the args; freed when answered. */
struct redlock_restore_req {
    size_t       n;         /* keys */
    const char **args;      /* n records, then five words per record (into bytes) */
    size_t      *lens;      /* bytes of each arg */
    char         bytes[];   /* the keys, tokens and px texts */
};

static void
redlock_restore_cb(struct master *m, const struct master_reply *reply, const char *error,
                   void *arg)
{
    struct redlock_restore_req *req = arg;

    if (reply != NULL && master_reply_type(reply) == MASTER_REPLY_INTEGER) {
        stats.keys_restored += (uint64_t)master_reply_integer(reply);
    } else {
        log_warn("master %s: restoring %zu lost lock keys failed: %s", master_name(m), req->n,
                 reply != NULL ? "unexpected answer to the restore script" : error);
    }
    free(req);
}

/* Whether item goes to master i now (named in its mask, validity left). */
static bool
redlock_restore_wanted(const struct redlock_restore_item *item, size_t i, int64_t now)
{
    return ((item->masters >> i) & 1u) && item->validity_end_us - now >= 1000
           && item->rec->base_len <= REDLOCK_KEY_MAX;
}

int
redlock_restore(const struct redlock_restore_item *items, size_t n)
{
    size_t nm = master_count(), i, j, k, cnt, size;
    int64_t now = util_now_us();
    struct redlock_keys keys;
    char num[24];

    for (i = 0; i < nm && i < 16; i++) {
        struct redlock_restore_req *req;
        char *p;

        for (j = 0, cnt = 0, size = 0; j < n; j++) {
            if (redlock_restore_wanted(&items[j], i, now)) {
                cnt++;
                size += redlock_rec_room(items[j].rec);
            }
        }
        if (cnt == 0) {
            continue;
        }
        size = (size + 7) & ~(size_t)7;     /* the arrays after the bytes are aligned */
        req = malloc(sizeof(*req) + size + 6 * cnt * (sizeof(*req->args) + sizeof(*req->lens)));
        if (req == NULL) {
            return -1;
        }
        req->n = cnt;
        req->args = (const char **)(void *)(req->bytes + size);
        req->lens = (size_t *)(void *)(req->args + 6 * cnt);
        p = req->bytes;
        /* KEYS: the records; ARGV per record: token, ms, kind, limit key, limit. */
        for (j = 0, k = 0; j < n; j++) {
            const struct redlock_rec *rec = items[j].rec;
            size_t a = cnt + 5 * k;

            if (!redlock_restore_wanted(&items[j], i, now)) {
                continue;
            }
            (void)redlock_keys_of(rec, &keys);      /* cannot fail: base_len was checked */
            redlock_put(&p, keys.rec, keys.rec_len, &req->args[k], &req->lens[k]);
            redlock_put(&p, items[j].token, UTIL_TOKEN_HEX, &req->args[a], &req->lens[a]);
            redlock_put(&p, num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)(
                            (items[j].validity_end_us - now) / 1000)),
                        &req->args[a + 1], &req->lens[a + 1]);
            redlock_put(&p, keys.kind, 1, &req->args[a + 2], &req->lens[a + 2]);
            redlock_put(&p, keys.aux, keys.aux_len, &req->args[a + 3], &req->lens[a + 3]);
            redlock_put(&p, keys.limit, keys.limit_len, &req->args[a + 4], &req->lens[a + 4]);
            k++;
        }
        if (master_eval(master_at(i), script_restore, cnt, 6 * cnt, req->args, req->lens,
                        NULL, redlock_restore_cb, req) != 0) {
            free(req);
        }
    }
    return 0;
}
