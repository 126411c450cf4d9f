/*
 * redlock.c: the Redlock engine's common ground: the scripts it
 * registers, quorum and validity arithmetic, and what every operation
 * shares (its state, its error texts, a record's keys).  The operations
 * themselves: daemon/redlock_acquire.c (acquire, hand-over, fencing,
 * release), daemon/redlock_holders.c (status, BREAK),
 * daemon/redlock_extend.c (renewal, restore); the channels:
 * daemon/redlock_channels.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/layout.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/redlock.h"
#include "daemon/redlock_op.h"
#include "daemon/round.h"
#include "daemon/stats.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"

/* A macro's value as a string literal (the generated scripts.h uses it). */
#define REDLOCK_STR(x)  #x
#define REDLOCK_XSTR(x) REDLOCK_STR(x)

#include "daemon/scripts.h"     /* generated: daemon/scripts/embed.sh */

/*
 * The scripts the masters run live in daemon/scripts/, one file each,
 * with what each takes and answers; daemon/scripts/embed.sh turns them
 * into string literals at build time (build/gen/daemon/scripts.h).  Every
 * script that reads or writes a holder's record begins with the prelude
 * (daemon/scripts/prelude.lua: the three kinds of record, read and
 * written one way everywhere), as its line "-- uses prelude.lua" asks.
 */
struct redlock_scripts redlock_scripts;
double redlock_drift_factor = 0.01;

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
    redlock_scripts.acquire = master_script(REDLOCK_LUA_ACQUIRE, true);
    redlock_scripts.release = master_script(REDLOCK_LUA_RELEASE, false);
    redlock_scripts.extend = master_script(REDLOCK_LUA_EXTEND, true);
    redlock_scripts.status = master_script(REDLOCK_LUA_STATUS, true);
    redlock_scripts.fence = master_script(REDLOCK_LUA_FENCE, true);
    redlock_scripts.extend_one = master_script(REDLOCK_LUA_EXTEND_ONE, true);
    redlock_scripts.restore = master_script(REDLOCK_LUA_RESTORE, true);
    redlock_scripts.ungate = master_script(REDLOCK_LUA_UNGATE, false);
    redlock_scripts.break_lock = master_script(REDLOCK_LUA_BREAK, true);
    redlock_scripts.raise = master_script(REDLOCK_LUA_RAISE, true);
    redlock_scripts.reraise = master_script(REDLOCK_LUA_RERAISE, true);
    /*
     * The per-lock scripts of one loop iteration go to each master in one
     * call (daemon/scripts/batch.lua), whatever clients asked for them.
     */
    redlock_scripts.batch = master_script(REDLOCK_LUA_BATCH, true);
    redlock_scripts.acquire_set = master_script(REDLOCK_LUA_ACQUIRE_SET, true);
    redlock_scripts.unclaim = master_script(REDLOCK_LUA_UNCLAIM, false);
    if (redlock_scripts.batch < 0 || master_script_batch(redlock_scripts.acquire, redlock_scripts.batch, "acquire") != 0
        || master_script_batch(redlock_scripts.release, redlock_scripts.batch, "release") != 0
        || master_script_batch(redlock_scripts.extend_one, redlock_scripts.batch, "extend_one") != 0
        || master_script_batch(redlock_scripts.raise, redlock_scripts.batch, "raise") != 0
        || master_script_batch(redlock_scripts.fence, redlock_scripts.batch, "fence") != 0
        || master_script_batch(redlock_scripts.acquire_set, redlock_scripts.batch,
                               "acquire_set") != 0
        || master_script_batch(redlock_scripts.unclaim, redlock_scripts.batch, "unclaim") != 0) {
        return -1;
    }
    /*
     * When a master's link has no room, what keeps held locks alive and
     * frees names is written first, reads last (daemon/master.h); the
     * scripts not named here take or change a hold (MASTER_CLASS_LOCK).
     */
    if (master_script_class(redlock_scripts.extend, MASTER_CLASS_RENEW) != 0
        || master_script_class(redlock_scripts.restore, MASTER_CLASS_RENEW) != 0
        || master_script_class(redlock_scripts.release, MASTER_CLASS_RENEW) != 0
        || master_script_class(redlock_scripts.status, MASTER_CLASS_READ) != 0) {
        return -1;
    }
    /* CHECK's read (daemon/redlock_check.c): batched, in the reads class. */
    redlock_scripts.check = master_script(REDLOCK_LUA_CHECK, true);
    if (redlock_scripts.check < 0
        || master_script_batch(redlock_scripts.check, redlock_scripts.batch, "check") != 0
        || master_script_class(redlock_scripts.check, MASTER_CLASS_READ) != 0) {
        return -1;
    }
    return redlock_scripts.acquire < 0 || redlock_scripts.release < 0 || redlock_scripts.extend < 0 || redlock_scripts.status < 0
           || redlock_scripts.fence < 0 || redlock_scripts.extend_one < 0 || redlock_scripts.restore < 0
           || redlock_scripts.ungate < 0 || redlock_scripts.break_lock < 0 || redlock_scripts.raise < 0
           || redlock_scripts.reraise < 0 ? -1 : 0;
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

int
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

void *
redlock_op_new(size_t size, size_t per_master, void *arg)
{
    struct redlock_op *op = xcalloc(1, size + master_count() * per_master);

    op->arg = arg;
    return op;
}

size_t
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
void
redlock_fill_error(struct redlock_verdict *res, struct round *r)
{
    size_t n = master_count(), size = sizeof(res->error), used, nq, nd, nc, nl;
    int64_t left_ms, clock_ms;
    const char *layout_why;
    bool layout_daemon;
    char when[32];

    nq = round_quarantined(r, &left_ms);
    nd = round_duplicates(r);
    nc = round_clock_quarantined(r, &clock_ms);
    nl = round_layout_refused(r, &layout_why, &layout_daemon);
    if (nq == 0 && nd == 0 && nc == 0 && nl == 0) {
        used = redlock_append(res->error, size, 0, "%zu of %zu masters answered, quorum is %zu: ",
                              round_answered(r), n, redlock_quorum(n));
        round_describe_failures(r, res->error + used, size - used);
        return;
    }
    used = redlock_append(res->error, size, 0, "%zu of %zu masters answered",
                          round_answered(r) + nq + nc + nl, n);
    if (nl > 0) {
        used = redlock_append(res->error, size, used, ", but %zu of them %s not counted "
                              "by their layout registry (this daemon's layout is %d): %s", nl,
                              nl == 1 ? "is" : "are", REDLOCKD_LAYOUT,
                              layout_why[0] != '\0' ? layout_why : "read too long ago");
    }
    if (nc > 0) {
        util_clock_after(clock_ms, when, sizeof(when));
        used = redlock_append(res->error, size, used, "%s %zu of them %s in clock "
                              "quarantine (until %s, %lld ms left; a master whose clock "
                              "stepped may have expired locks early)",
                              nl > 0 ? " and" : ", but", nc,
                              nc == 1 ? "is" : "are", when, (long long)clock_ms);
    }
    if (nq > 0) {
        util_clock_after(left_ms, when, sizeof(when));
        used = redlock_append(res->error, size, used, "%s %zu of them %s in restart "
                              "quarantine (until %s, %lld ms left; a master up less than "
                              "lock.max_ttl_ms may have lost locks in its restart)",
                              nc + nl > 0 ? " and" : ", but", nq, nq == 1 ? "is" : "are", when,
                              (long long)left_ms);
    }
    if (nd > 0) {
        used = redlock_append(res->error, size, used, "%s %zu more %s the same server "
                              "as a master listed before (same run_id) and %s not asked",
                              nq + nc + nl > 0 ? "; and" : ";", nd, nd == 1 ? "is" : "are",
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
    if (nl > 0 && layout_daemon) {
        used = redlock_append(res->error, size, used, " Daemons of two layouts must not "
                              "serve the same masters unless one runs beside the other "
                              "(redlockd -V; the upgrade procedure of docs/production.md).");
    }
    used = redlock_append(res->error, size, used, " Not counted: ");
    round_describe_failures(r, res->error + used, size - used);
}

/* Start a result from a decided round: times and answers. */
void
redlock_result_begin(struct redlock_verdict *res, struct round *r)
{
    memset(res, 0, sizeof(*res));
    res->start_us = round_start_us(r);
    res->answered = round_answered(r);
}

/*
 * Fill k with rec's keys: the record (the name's key, for an exclusive
 * or shared holder, or key + " permit <i>"), and for a permit its limit
 * key (the name's key) and limit.  Returns 0, or -1 when the name's key
 * is too long.
 */
int
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
    /* The holder's flags (prelude.lua, rl_flags): 1 a label, 2 a stored lock-delay. */
    k->label[0] = (char)('0' + (rec->labelled ? 1 : 0)
                         + (rec->kind == REDLOCK_EXCLUSIVE && rec->delay_ms > 0 ? 2 : 0));
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

int64_t
redlock_record_ms(const struct redlock_rec *rec, int64_t ttl_ms)
{
    return rec->kind == REDLOCK_EXCLUSIVE && rec->delay_ms > 0 ? ttl_ms + rec->delay_ms : ttl_ms;
}

/*
 * Write key + suffix and a NUL into out, which has room for key_len +
 * strlen(suffix) + 1 bytes (REDLOCK_DERIVED_MAX for any key up to
 * REDLOCK_KEY_MAX); returns the length.
 */
size_t
redlock_derived(char *out, const char *key, size_t key_len, const char *suffix)
{
    size_t slen = strlen(suffix);

    memcpy(out, key, key_len);
    memcpy(out + key_len, suffix, slen + 1);
    return key_len + slen;
}

