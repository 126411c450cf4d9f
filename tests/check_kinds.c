/*
 * check_kinds.c: counted (LOCK <name> limit=N) and shared (LOCK <name>
 * shared) holds, end to end.
 *
 * Real redis-server masters, one or two real redlockd processes on the
 * same masters, real sockets (tests/harness.h), and the real redlockctl
 * ($REDLOCKCTL_BIN, else the one next to $REDLOCKD_BIN, else
 * ./build/redlockctl).  Every daemon uses lock.key_prefix PREFIX, so
 * the keys read on the masters are the ones the protocol documents:
 * "<prefix><name> permit <i>", "<prefix><name> limit",
 * "<prefix><name> shared" (a sorted set), "<prefix><name> gate",
 * "<prefix><name> fence" and "<prefix><name> permit <i> fence".
 *
 * Covered: a counted name admits exactly limit holders, each on its
 * own permit, hands a released permit to the next waiter of the same
 * daemon, frees a closed session's permit at once and leaves no key
 * behind; counted holders split over two daemons, a waiter woken by
 * the other daemon's release; every ERR KIND direction (locally, by a
 * waiter, through the masters), the ERR PROTO cases (limit=0,
 * shared+limit, limit over lock.max_limit before and after a reload),
 * re-entry of the same and of another kind; shared holders together,
 * exclusive against shared in both directions, first-in-first-out
 * across kinds on one daemon (counted waiters one at a time, a run of
 * shared waiters together), the writer's gate across two daemons and
 * its removal (grant, give-up, the writer's session closing); lease mode (token UNLOCK / EXTEND /
 * STATUS) and fences of both kinds; a permit whose keys vanished
 * (! LOST reason=gone, then NOTHELD) and shared members that vanished
 * (the same on UNLOCK, and ! LOST reason=renew pushed by the renewal);
 * renewal and restore of both
 * kinds; redlockctl --limit / -s / status; STATS and /metrics counters.
 *
 * Waiting is always for a condition with a deadline; the only timed
 * checks are "nothing arrives for N ms" (h_quiet), which show that a
 * waiter is still waiting.  Each test is a test case of its own:
 * CK_RUN_CASE=<test> ./build/check_kinds runs one.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/wait.h>

#include <check.h>
#include <hiredis/hiredis.h>

#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5       /* masters per test */
#define PREFIX          "kt:"   /* lock.key_prefix of every daemon */
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define QUIET_MS        400     /* a waiter that must still be waiting: nothing for this long */
#define EXIT_MS         10000   /* deadline for redlockctl to exit when it should */
#define TEST_TIMEOUT_S  60      /* per test, unless CK_DEFAULT_TIMEOUT is set */
#define KT_KIDS_MAX     16      /* redlockctl processes per test */
#define KT_PATH_MAX     1024    /* paths in the test directory */

/* Every daemon: a blocked LOCK retries after 0..100 ms; keys under PREFIX. */
static const struct h_daemon_opts kt_opts = {
    .retry_delay_ms = 100,
    .key_prefix = PREFIX,
};

static pid_t kt_kids[KT_KIDS_MAX];      /* redlockctl processes not reaped yet */

/* ---- fixture ---- */

/* After a test that passed: the redlockctl processes it left killed, then h_end(). */
static void
kt_teardown(void)
{
    size_t i;

    for (i = 0; i < KT_KIDS_MAX; i++) {
        if (kt_kids[i] > 0) {
            kill(kt_kids[i], SIGKILL);
            waitpid(kt_kids[i], NULL, 0);
            kt_kids[i] = 0;
        }
    }
    h_end();
}

/* ---- requests and replies ---- */

/* The token= of a lease-mode OK, into out (33 bytes). */
static void
kt_token(const char *line, char *out)
{
    ck_assert_msg(h_reply_field(line, "token", out, 33) && h_is_token(out),
                  "'%s' has no token=", line);
}

/* LOCK/TRYLOCK line that must be granted: the OK line (caller frees). */
#define KT_GRANT(fd, line, name) kt_grant_at((fd), (line), (name), __LINE__)

static char *
kt_grant_at(int fd, const char *line, const char *name, int at)
{
    char *got = expect_cmd_at(fd, line, CMD_MS, at);

    ck_assert_msg(h_is_reply(got, "OK", name), "line %d: '%s' answered '%s', expected OK",
                  at, line, got);
    return got;
}

/* The permit of a counted grant: OK ... limit=L permit=P, P in 0..L-1. */
#define KT_PERMIT(line, limit) kt_permit_at((line), (limit), __LINE__)

static int
kt_permit_at(const char *line, long long limit, int at)
{
    long long p = expect_int_at(line, "permit", at);

    ck_assert_msg(expect_int_at(line, "limit", at) == limit, "line %d: '%s': limit is not %lld",
                  at, line, limit);
    EXPECT_FIELD(line, "kind", "counted");
    ck_assert_msg(p >= 0 && p < limit, "line %d: '%s': permit out of 0..%lld", at, line,
                  limit - 1);
    return (int)p;
}

/* STATS counter name of daemon d (over a connection of its own). */
static long long
kt_stat(size_t d, const char *name)
{
    long long v = -1;

    h_use_daemon(d);
    ck_assert_msg(h_stat_once(name, &v) == 0, "daemon %zu: no STAT %s", d, name);
    return v;
}

/* Wait until daemon d's STAT name equals want. */
static void
kt_wait_stat(size_t d, const char *name, long long want)
{
    long long seen;

    h_use_daemon(d);
    ck_assert_msg(h_wait_stat(name, want, false, CMD_MS, &seen),
                  "daemon %zu: STAT %s stayed at %lld, expected %lld", d, name, seen, want);
}

/* A STATUS line polled until its reply contains text. */
struct kt_status_wait {
    int         fd;         /* connection to ask on */
    const char *line;       /* "STATUS <name>" */
    const char *text;       /* what the reply must contain */
    char        seen[256];  /* the last reply */
};

static bool
kt_cond_status(void *arg)
{
    struct kt_status_wait *w = arg;
    char *got = h_cmd(w->fd, w->line, CMD_MS);
    bool ok = got != NULL && strstr(got, w->text) != NULL;

    snprintf(w->seen, sizeof(w->seen), "%s", got != NULL ? got : "(nothing)");
    free(got);
    return ok;
}

/* Poll STATUS on fd until the reply contains text, within ms. */
#define KT_WAIT_STATUS(fd, name, text, ms) kt_wait_status_at((fd), (name), (text), (ms), __LINE__)

static void
kt_wait_status_at(int fd, const char *name, const char *text, int64_t ms, int at)
{
    char line[128];
    struct kt_status_wait w = { fd, line, text, "" };

    snprintf(line, sizeof(line), "STATUS %s", name);
    ck_assert_msg(h_wait_until(kt_cond_status, &w, ms),
                  "line %d: STATUS %s never contained '%s' within %lld ms (last: '%s')", at,
                  name, text, (long long)ms, w.seen);
}

/* ---- keys on the masters ---- */

/* "<prefix><name><suffix>" into out. */
static void
kt_key(char *out, size_t size, const char *name, const char *suffix)
{
    ck_assert((size_t)snprintf(out, size, "%s%s%s", PREFIX, name, suffix) < size);
}

/* KEYS pattern on master i: how many; -1 when the master could not be asked. */
static long long
kt_master_keys(size_t i, const char *pattern, char *list, size_t size)
{
    redisContext *c = h_master_redis(i);
    redisReply *r;
    long long n = -1;
    size_t j, used = 0;

    if (c == NULL) {
        return -1;
    }
    r = redisCommand(c, "KEYS %s", pattern);
    if (r != NULL && r->type == REDIS_REPLY_ARRAY) {
        n = (long long)r->elements;
        for (j = 0; j < r->elements && list != NULL && used < size; j++) {
            used += (size_t)snprintf(list + used, size - used, "%s'%s'", used > 0 ? " " : "",
                                     r->element[j]->str);
        }
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    redisFree(c);
    return n;
}

/* Keys of the name (every "<prefix><name>*" but the fence counters) on every master. */
struct kt_keys_gone {
    const char *name;       /* lock name */
    char        seen[512];  /* what was left on the last master that had any */
};

static bool
kt_cond_keys_gone(void *arg)
{
    struct kt_keys_gone *g = arg;
    char pattern[128], list[400];
    size_t i;
    long long n;

    snprintf(pattern, sizeof(pattern), "%s%s*", PREFIX, g->name);
    for (i = 0; i < NMASTERS; i++) {
        list[0] = '\0';
        n = kt_master_keys(i, pattern, list, sizeof(list));
        if (n != 0) {
            snprintf(g->seen, sizeof(g->seen), "master %zu: %s", i,
                     n < 0 ? "(not asked)" : list);
            return false;
        }
    }
    return true;
}

/* Require that no key of name is left on any master (within H_PROMPT_MS). */
#define KT_KEYS_GONE(name) do {                                                 \
        struct kt_keys_gone g_ = { (name), "" };                                \
        ck_assert_msg(h_wait_until(kt_cond_keys_gone, &g_, H_PROMPT_MS),        \
                      "line %d: keys of '%s' left on the masters: %s", __LINE__, (name), g_.seen); \
    } while (0)

/* A key and how many masters must have it (any type). */
struct kt_key_count {
    const char *key;        /* the key */
    size_t      want;       /* masters that must have it */
    size_t      seen;       /* last count */
};

static size_t
kt_masters_with(const char *key)
{
    size_t i, n = 0;

    for (i = 0; i < NMASTERS; i++) {
        if (h_master_pttl(i, key) >= H_PTTL_PERSIST) {
            n++;
        }
    }
    return n;
}

static bool
kt_cond_key_count(void *arg)
{
    struct kt_key_count *k = arg;

    k->seen = kt_masters_with(k->key);
    return k->seen == k->want;
}

/* Wait until exactly want masters have key (any type). */
#define KT_WAIT_KEY(key, want_) do {                                            \
        struct kt_key_count k_ = { (key), (want_), 0 };                         \
        ck_assert_msg(h_wait_until(kt_cond_key_count, &k_, H_PROMPT_MS),        \
                      "line %d: key '%s' is on %zu masters, expected %zu", __LINE__, (key), \
                      k_.seen, (size_t)(want_));                                \
    } while (0)

/*
 * The gate of a name that a writer waits for: on a quorum of masters at
 * least, and only where the name has shared holders (they keep the
 * writer out there; elsewhere the writer's own key goes in, and is taken
 * back, instead).  Not every master with a holder: a shared holder is
 * granted by a quorum, and a slow master may run its request after the
 * writer's; there the gate waits for the writer's next try.
 */
struct kt_gate_wait {
    const char *name;       /* lock name */
    char        seen[128];  /* the masters of the last look, e.g. "sg sg sg s -" */
};

static bool
kt_cond_gate(void *arg)
{
    struct kt_gate_wait *g = arg;
    char shared[128], gate[128];
    size_t i, ngated = 0, used = 0;
    bool readers, gated, ok = true;

    kt_key(shared, sizeof(shared), g->name, "");     /* the holders' sorted set */
    kt_key(gate, sizeof(gate), g->name, " gate");
    for (i = 0; i < NMASTERS; i++) {
        readers = h_master_pttl(i, shared) >= H_PTTL_PERSIST;
        gated = h_master_pttl(i, gate) >= H_PTTL_PERSIST;
        ngated += gated ? 1 : 0;
        ok = ok && (readers || !gated);
        used += (size_t)snprintf(g->seen + used, sizeof(g->seen) - used, "%s%s%s",
                                 i > 0 ? " " : "", readers ? "s" : "", gated ? "g"
                                 : readers ? "" : "-");
    }
    return ok && ngated > NMASTERS / 2;
}

/* Wait until the gate of name is on a quorum of masters, each with shared holders. */
#define KT_WAIT_GATE(name) do {                                                 \
        struct kt_gate_wait g_ = { (name), "" };                                \
        ck_assert_msg(h_wait_until(kt_cond_gate, &g_, H_PROMPT_MS),             \
                      "line %d: the gate of '%s' is not on a quorum of masters with shared " \
                      "holders (s: holders, g: gate): %s", __LINE__, (name), g_.seen); \
    } while (0)

/* A string key that must have value on want masters. */
struct kt_keyval {
    const char *key;        /* the key */
    const char *value;      /* its value */
    size_t      want;       /* masters that must have it */
    size_t      seen;       /* last count */
};

static bool
kt_cond_value(void *arg)
{
    struct kt_keyval *kv = arg;

    kv->seen = h_masters_holding(kv->key, kv->value);
    return kv->seen == kv->want;
}

/* Create an empty file at <dir>/<name>. */
static void
kt_touch(const char *name)
{
    char path[KT_PATH_MAX];
    FILE *f;

    ck_assert_msg(snprintf(path, sizeof(path), "%s/%s", h_dir(), name) < (int)sizeof(path),
                  "path too long");
    f = fopen(path, "we");
    ck_assert_msg(f != NULL, "cannot create %s: %s", path, strerror(errno));
    fclose(f);
}

/* ---- 1. counted: limit=N admits exactly N ---- */

/*
 * limit=3 from four sessions: three OK on three different permits, the
 * fourth BUSY with the holders' ttl; STATUS says holders=3 limit=3 (and
 * the asking holder's own permit).  One UNLOCK hands its permit to a
 * waiting LOCK at once (a hand-over: the waiter gets that very permit);
 * a holder whose connection closes frees its permit at once (STATUS
 * holders drops, a TRYLOCK gets it, far sooner than the ttl); once all
 * have let go, no key of the name is left on any master.
 */
START_TEST(counted_admits_limit)
{
    int s[4], late, permit[4], used[3] = { 0, 0, 0 };
    long long handovers;
    int64_t t0;
    char *got;
    size_t i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    for (i = 0; i < 4; i++) {
        s[i] = expect_connect(0);
    }
    for (i = 0; i < 3; i++) {
        got = KT_GRANT(s[i], "TRYLOCK sem limit=3 ttl=20000", "sem");
        permit[i] = KT_PERMIT(got, 3);
        EXPECT_FIELD(got, "holds", "1");
        ck_assert_msg(used[permit[i]] == 0, "permit %d granted twice ('%s')", permit[i], got);
        used[permit[i]] = 1;
        free(got);
    }
    got = EXPECT_CMD(s[3], "TRYLOCK sem limit=3 ttl=20000");
    EXPECT_IS(got, "BUSY", "sem");
    ck_assert_msg(EXPECT_INT(got, "ttl") > 0, "BUSY without the holders' ttl: '%s'", got);
    free(got);

    got = EXPECT_CMD(s[3], "STATUS sem");
    EXPECT_IS(got, "HELD", "sem");
    EXPECT_FIELD(got, "owner", "other");
    EXPECT_FIELD(got, "kind", "counted");
    EXPECT_FIELD(got, "holders", "3");
    EXPECT_FIELD(got, "limit", "3");
    EXPECT_NO_FIELD(got, "permit");
    free(got);
    got = EXPECT_CMD(s[1], "STATUS sem");
    EXPECT_IS(got, "HELD", "sem");
    EXPECT_FIELD(got, "owner", "self");
    EXPECT_FIELD(got, "holders", "3");
    ck_assert_msg(EXPECT_INT(got, "permit") == permit[1], "STATUS of the holder of permit %d: '%s'",
                  permit[1], got);
    free(got);

    /* A waiting LOCK is handed the permit an UNLOCK gives up. */
    handovers = kt_stat(0, "handovers");
    ck_assert_int_eq(h_send(s[3], "LOCK sem limit=3 ttl=20000 wait=15000"), 0);
    kt_wait_stat(0, "waiters", 1);
    ck_assert_msg(h_quiet(s[3], QUIET_MS), "a fourth holder of limit=3 was let in");
    got = EXPECT_CMD(s[0], "UNLOCK sem");
    ck_assert_str_eq(got, "OK sem holds=0");
    free(got);
    got = EXPECT_READ(s[3], H_PROMPT_MS, "the waiting LOCK after an UNLOCK");
    EXPECT_IS(got, "OK", "sem");
    EXPECT_FIELD(got, "holds", "1");
    ck_assert_msg(KT_PERMIT(got, 3) == permit[0], "the waiter got '%s', not the freed permit %d",
                  got, permit[0]);
    permit[3] = permit[0];
    free(got);
    kt_wait_stat(0, "handovers", handovers + 1);

    /* A closed connection frees its permit at once. */
    close(s[1]);
    KT_WAIT_STATUS(s[2], "sem", "holders=2", H_PROMPT_MS);
    late = expect_connect(0);
    t0 = h_now_ms();
    got = KT_GRANT(late, "TRYLOCK sem limit=3 ttl=20000", "sem");
    ck_assert_msg(KT_PERMIT(got, 3) == permit[1], "'%s': expected the closed session's permit %d",
                  got, permit[1]);
    ck_assert_msg(h_now_ms() - t0 < H_PROMPT_MS, "the freed permit took %lld ms",
                  (long long)(h_now_ms() - t0));
    free(got);
    KT_WAIT_STATUS(late, "sem", "holders=3", H_PROMPT_MS);

    /* All let go: nothing of the name stays on the masters, the limit marker included. */
    EXPECT_REPLY(s[2], "UNLOCK sem", "OK sem holds=0");
    EXPECT_REPLY(s[3], "UNLOCK sem", "OK sem holds=0");
    EXPECT_REPLY(late, "UNLOCK sem", "OK sem holds=0");
    KT_KEYS_GONE("sem");
    EXPECT_REPLY(late, "STATUS sem", "FREE sem");
    /* And the name may now be of another kind. */
    got = KT_GRANT(late, "TRYLOCK sem", "sem");
    free(got);
    EXPECT_REPLY(late, "UNLOCK sem", "OK sem holds=0");
    close(s[0]);
    close(s[2]);
    close(s[3]);
    close(late);
}
END_TEST

/* ---- 2. counted across two daemons ---- */

/*
 * limit=2 with one holder on each daemon: a third is BUSY from either
 * daemon, both daemons' STATUS count 2 holders; a LOCK waiting on B is
 * granted the permit A's holder releases, promptly (the release is
 * announced), and then again the one A's next holder frees by closing.
 */
START_TEST(counted_two_daemons)
{
    int a1, a2, b1, b2, pa, pb;
    int64_t t0;
    char *got;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &kt_opts);
    a1 = expect_connect(0);
    a2 = expect_connect(0);
    b1 = expect_connect(1);
    b2 = expect_connect(1);
    got = KT_GRANT(a1, "LOCK c2 limit=2 ttl=20000", "c2");
    pa = KT_PERMIT(got, 2);
    free(got);
    got = KT_GRANT(b1, "LOCK c2 limit=2 ttl=20000", "c2");
    pb = KT_PERMIT(got, 2);
    free(got);
    ck_assert_msg(pa != pb, "both daemons' holders have permit %d", pa);
    got = EXPECT_CMD(a2, "TRYLOCK c2 limit=2");
    EXPECT_IS(got, "BUSY", "c2");
    ck_assert(EXPECT_INT(got, "ttl") > 0);
    free(got);
    got = EXPECT_CMD(b2, "TRYLOCK c2 limit=2");
    EXPECT_IS(got, "BUSY", "c2");
    ck_assert(EXPECT_INT(got, "ttl") > 0);
    free(got);
    got = EXPECT_CMD(a2, "STATUS c2");
    EXPECT_IS(got, "HELD", "c2");
    EXPECT_FIELD(got, "holders", "2");
    EXPECT_FIELD(got, "limit", "2");
    free(got);
    got = EXPECT_CMD(b2, "STATUS c2");
    EXPECT_FIELD(got, "holders", "2");
    free(got);

    /* B's waiter gets the permit A releases, long before any ttl. */
    ck_assert_int_eq(h_send(b2, "LOCK c2 limit=2 ttl=20000 wait=15000"), 0);
    kt_wait_stat(1, "waiters", 1);
    ck_assert_msg(h_quiet(b2, QUIET_MS), "a third holder of limit=2 was let in");
    t0 = h_now_ms();
    EXPECT_REPLY(a1, "UNLOCK c2", "OK c2 holds=0");
    got = EXPECT_READ(b2, H_PROMPT_MS, "B's waiter after A's UNLOCK");
    EXPECT_IS(got, "OK", "c2");
    ck_assert_msg(KT_PERMIT(got, 2) == pa, "B's waiter got '%s', A released permit %d", got, pa);
    free(got);
    ck_assert_msg(h_now_ms() - t0 < H_PROMPT_MS, "took %lld ms", (long long)(h_now_ms() - t0));

    /* Both holders on B now; A's TRYLOCK is BUSY; A's waiter gets a closed session's permit. */
    got = EXPECT_CMD(a2, "TRYLOCK c2 limit=2");
    EXPECT_IS(got, "BUSY", "c2");
    free(got);
    ck_assert_int_eq(h_send(a2, "LOCK c2 limit=2 ttl=20000 wait=15000"), 0);
    kt_wait_stat(0, "waiters", 1);
    ck_assert_msg(h_quiet(a2, QUIET_MS), "a third holder of limit=2 was let in");
    t0 = h_now_ms();
    close(b1);
    got = EXPECT_READ(a2, H_PROMPT_MS, "A's waiter after B's holder closed");
    EXPECT_IS(got, "OK", "c2");
    ck_assert_msg(KT_PERMIT(got, 2) == pb, "A's waiter got '%s', B's closed holder had %d", got,
                  pb);
    free(got);
    ck_assert_msg(h_now_ms() - t0 < H_PROMPT_MS, "took %lld ms", (long long)(h_now_ms() - t0));
    EXPECT_REPLY(a2, "UNLOCK c2", "OK c2 holds=0");
    EXPECT_REPLY(b2, "UNLOCK c2", "OK c2 holds=0");
    KT_KEYS_GONE("c2");
    close(a1);
    close(a2);
    close(b2);
}
END_TEST

/* ---- 3. kinds ---- */

/*
 * One daemon: each other kind (or other limit) is refused with ERR KIND
 * while the name is held here, saying how it is held; the ERR PROTO
 * cases of the line itself; a session's re-entry of another kind is
 * ERR PROTO, of the same kind holds=2.  Nothing refused leaves a key.
 */
START_TEST(kind_errors_local)
{
    int h, o;
    char *got, key[64];

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    h = expect_connect(0);
    o = expect_connect(0);

    /* Held with limit=3. */
    got = KT_GRANT(h, "LOCK k limit=3", "k");
    free(got);
    EXPECT_REPLY(o, "LOCK k limit=5", "ERR KIND k is held with limit=3");
    EXPECT_REPLY(o, "TRYLOCK k limit=2", "ERR KIND k is held with limit=3");
    EXPECT_REPLY(o, "LOCK k", "ERR KIND k is held with limit=3");
    EXPECT_REPLY(o, "TRYLOCK k", "ERR KIND k is held with limit=3");
    EXPECT_REPLY(o, "LOCK k shared", "ERR KIND k is held with limit=3");
    EXPECT_REPLY(o, "LOCK k mode=lease ttl=20000", "ERR KIND k is held with limit=3");
    /* The same limit is no kind error. */
    got = KT_GRANT(o, "TRYLOCK k limit=3", "k");
    free(got);
    EXPECT_REPLY(o, "UNLOCK k", "OK k holds=0");
    /* Re-entry: the same kind counts up, another is the session's own conflict. */
    got = KT_GRANT(h, "LOCK k limit=3", "k");
    EXPECT_FIELD(got, "holds", "2");
    EXPECT_FIELD(got, "kind", "counted");
    free(got);
    EXPECT_REPLY(h, "LOCK k", "ERR PROTO this session holds k as a counted lock; a re-entrant "
                 "LOCK must ask for the same kind (UNLOCK it first)");
    EXPECT_REPLY(h, "TRYLOCK k shared", "ERR PROTO this session holds k as a counted lock; a "
                 "re-entrant LOCK must ask for the same kind (UNLOCK it first)");
    EXPECT_REPLY(h, "UNLOCK k", "OK k holds=1");
    EXPECT_REPLY(h, "UNLOCK k", "OK k holds=0");
    KT_KEYS_GONE("k");

    /* Held exclusive. */
    got = KT_GRANT(h, "LOCK k", "k");
    EXPECT_NO_FIELD(got, "kind");
    free(got);
    EXPECT_REPLY(o, "LOCK k limit=3", "ERR KIND k is held exclusive");
    EXPECT_REPLY(o, "TRYLOCK k limit=1", "ERR KIND k is held exclusive");
    got = EXPECT_CMD(o, "TRYLOCK k shared");     /* the same family: busy, not a kind error */
    EXPECT_IS(got, "BUSY", "k");
    free(got);
    got = EXPECT_CMD(h, "LOCK k shared");
    ck_assert_msg(strncmp(got, "ERR PROTO this session holds k as a", 35) == 0
                  && strstr(got, "exclusive lock; a re-entrant LOCK must ask for the same kind")
                  != NULL, "re-entry of an exclusive hold as shared: '%s'", got);
    free(got);
    got = KT_GRANT(h, "LOCK k", "k");
    EXPECT_FIELD(got, "holds", "2");
    free(got);
    EXPECT_REPLY(h, "UNLOCK k", "OK k holds=1");
    EXPECT_REPLY(h, "UNLOCK k", "OK k holds=0");

    /* Held shared. */
    got = KT_GRANT(h, "LOCK k shared", "k");
    EXPECT_FIELD(got, "kind", "shared");
    free(got);
    EXPECT_REPLY(o, "LOCK k limit=3", "ERR KIND k is held shared");
    EXPECT_REPLY(o, "TRYLOCK k limit=1 mode=lease ttl=20000", "ERR KIND k is held shared");
    got = EXPECT_CMD(o, "TRYLOCK k");
    EXPECT_IS(got, "BUSY", "k");
    free(got);
    EXPECT_REPLY(h, "LOCK k", "ERR PROTO this session holds k as a shared lock; a re-entrant "
                 "LOCK must ask for the same kind (UNLOCK it first)");
    EXPECT_REPLY(h, "LOCK k limit=2", "ERR PROTO this session holds k as a shared lock; a "
                 "re-entrant LOCK must ask for the same kind (UNLOCK it first)");
    got = KT_GRANT(h, "LOCK k shared", "k");
    EXPECT_FIELD(got, "holds", "2");
    EXPECT_FIELD(got, "kind", "shared");
    free(got);
    EXPECT_REPLY(h, "UNLOCK k", "OK k holds=1");
    EXPECT_REPLY(h, "UNLOCK k", "OK k holds=0");
    KT_KEYS_GONE("k");

    /* The line itself. */
    EXPECT_REPLY(o, "LOCK k limit=0", "ERR PROTO LOCK: limit must be at least 1");
    EXPECT_REPLY(o, "TRYLOCK k limit=0", "ERR PROTO TRYLOCK: limit must be at least 1");
    EXPECT_REPLY(o, "LOCK k shared limit=2", "ERR PROTO LOCK: 'shared' and 'limit' cannot go "
                 "together (a name is one kind: shared, or counted with limit=N)");
    EXPECT_REPLY(o, "TRYLOCK k limit=2 shared", "ERR PROTO TRYLOCK: 'shared' and 'limit' cannot "
                 "go together (a name is one kind: shared, or counted with limit=N)");
    EXPECT_REPLY(o, "LOCK k limit=1001", "ERR PROTO LOCK: limit=1001 out of range 1..1000 "
                 "(lock.max_limit)");
    EXPECT_PREFIX(o, "LOCK k limit=abc", "ERR PROTO LOCK: bad value for 'limit'");
    got = KT_GRANT(o, "TRYLOCK k limit=1000", "k");     /* the largest allowed */
    KT_PERMIT(got, 1000);
    free(got);
    EXPECT_REPLY(o, "UNLOCK k", "OK k holds=0");
    KT_KEYS_GONE("k");
    kt_key(key, sizeof(key), "k", "");
    ck_assert_int_eq(h_masters_without(key), NMASTERS);
    close(h);
    close(o);
}
END_TEST

/*
 * lock.max_limit: a reload to 5 makes limit=6 an ERR PROTO naming the
 * new bound, for LOCK and TRYLOCK, and limit=5 is granted.
 */
START_TEST(kind_max_limit_reload)
{
    char conf[KT_PATH_MAX], *text, *at, *got;
    off_t from;
    FILE *f;
    int o;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    o = expect_connect(0);
    EXPECT_REPLY(o, "LOCK m limit=1001", "ERR PROTO LOCK: limit=1001 out of range 1..1000 "
                 "(lock.max_limit)");
    /* Put max_limit: 5 into the lock: section and reload. */
    snprintf(conf, sizeof(conf), "%s", h_daemon_conf_path());
    text = expect_read_file(conf);
    at = strstr(text, "\nlock:\n");
    ck_assert_msg(at != NULL, "no lock: section in %s", conf);
    at += strlen("\nlock:\n");
    f = fopen(conf, "we");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%.*s  max_limit: 5\n%s", (int)(at - text), text, at);
    ck_assert_int_eq(fclose(f), 0);
    free(text);
    from = h_log_size();
    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    ck_assert_msg(h_wait_log(from, "reload: done", CMD_MS), "the reload did not happen");

    EXPECT_REPLY(o, "LOCK m limit=6", "ERR PROTO LOCK: limit=6 out of range 1..5 "
                 "(lock.max_limit)");
    EXPECT_REPLY(o, "TRYLOCK m limit=6", "ERR PROTO TRYLOCK: limit=6 out of range 1..5 "
                 "(lock.max_limit)");
    got = KT_GRANT(o, "LOCK m limit=5", "m");
    KT_PERMIT(got, 5);
    free(got);
    EXPECT_REPLY(o, "UNLOCK m", "OK m holds=0");
    KT_KEYS_GONE("m");
    close(o);
}
END_TEST

/*
 * Kind errors that this daemon learns from the masters (the holder is
 * on the other daemon, or a lease-mode lock that leaves no state here),
 * and those of a name only waited for here.
 */
START_TEST(kind_errors_masters)
{
    int a, a2, b, b2;
    char *got, tok[33], line[128], key[64];

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &kt_opts);
    a = expect_connect(0);
    a2 = expect_connect(0);
    b = expect_connect(1);
    b2 = expect_connect(1);

    /* Held on A with limit=3: B hears of it from the masters. */
    got = KT_GRANT(a, "LOCK n limit=3", "n");
    free(got);
    EXPECT_REPLY(b, "LOCK n limit=5", "ERR KIND n is held with limit=3");
    EXPECT_REPLY(b, "TRYLOCK n limit=2", "ERR KIND n is held with limit=3");
    EXPECT_REPLY(b, "LOCK n wait=5000", "ERR KIND n is held with limit=3");
    EXPECT_REPLY(b, "LOCK n shared", "ERR KIND n is held with limit=3");
    got = KT_GRANT(b, "LOCK n limit=3", "n");   /* the same limit: fine */
    free(got);
    EXPECT_REPLY(b, "UNLOCK n", "OK n holds=0");
    EXPECT_REPLY(a, "UNLOCK n", "OK n holds=0");
    KT_KEYS_GONE("n");

    /* Held exclusive on A. */
    got = KT_GRANT(a, "LOCK n", "n");
    free(got);
    EXPECT_REPLY(b, "LOCK n limit=2", "ERR KIND n is held exclusive");
    EXPECT_REPLY(b, "TRYLOCK n limit=2 mode=lease ttl=20000", "ERR KIND n is held exclusive");
    EXPECT_REPLY(a, "UNLOCK n", "OK n holds=0");

    /* Held shared on A. */
    got = KT_GRANT(a, "LOCK n shared", "n");
    free(got);
    EXPECT_REPLY(b, "LOCK n limit=2", "ERR KIND n is held shared");
    got = KT_GRANT(b, "TRYLOCK n shared", "n");
    free(got);
    EXPECT_REPLY(b, "UNLOCK n", "OK n holds=0");
    EXPECT_REPLY(a, "UNLOCK n", "OK n holds=0");
    KT_KEYS_GONE("n");
    /* A refused request left nothing: no member of B's in the set, no limit key. */
    kt_key(key, sizeof(key), "n", "");
    ck_assert_int_eq(kt_masters_with(key), 0);

    /* A lease-mode lock: the same daemon knows it only from the masters. */
    got = KT_GRANT(a, "LOCK n limit=2 mode=lease ttl=20000", "n");
    kt_token(got, tok);
    free(got);
    EXPECT_REPLY(a2, "LOCK n", "ERR KIND n is held with limit=2");
    EXPECT_REPLY(a2, "LOCK n limit=4", "ERR KIND n is held with limit=2");
    snprintf(line, sizeof(line), "UNLOCK n token=%s", tok);
    EXPECT_REPLY(a, line, "OK n");
    KT_KEYS_GONE("n");

    /* Waited for here with limit=1 (held on B): other kinds are refused on A at once. */
    got = KT_GRANT(b, "LOCK w limit=1", "w");
    free(got);
    ck_assert_int_eq(h_send(a, "LOCK w limit=1 wait=15000"), 0);
    kt_wait_stat(0, "waiters", 1);
    EXPECT_REPLY(a2, "LOCK w", "ERR KIND w is waited for with limit=1");
    EXPECT_REPLY(a2, "LOCK w shared", "ERR KIND w is waited for with limit=1");
    EXPECT_REPLY(a2, "TRYLOCK w limit=2", "ERR KIND w is waited for with limit=1");
    EXPECT_REPLY(b, "UNLOCK w", "OK w holds=0");
    got = EXPECT_READ(a, H_PROMPT_MS, "A's waiter on w");
    EXPECT_IS(got, "OK", "w");
    KT_PERMIT(got, 1);
    free(got);
    EXPECT_REPLY(a, "UNLOCK w", "OK w holds=0");

    /* Waited for here as exclusive (held on B). */
    got = KT_GRANT(b2, "LOCK x", "x");
    free(got);
    ck_assert_int_eq(h_send(a, "LOCK x wait=15000"), 0);
    kt_wait_stat(0, "waiters", 1);
    EXPECT_REPLY(a2, "LOCK x limit=2", "ERR KIND x is waited for without a limit");
    got = EXPECT_CMD(a2, "TRYLOCK x shared");      /* the same family: busy */
    EXPECT_IS(got, "BUSY", "x");
    free(got);
    EXPECT_REPLY(b2, "UNLOCK x", "OK x holds=0");
    got = EXPECT_READ(a, H_PROMPT_MS, "A's waiter on x");
    EXPECT_IS(got, "OK", "x");
    free(got);
    EXPECT_REPLY(a, "UNLOCK x", "OK x holds=0");
    KT_KEYS_GONE("w");
    KT_KEYS_GONE("x");
    close(a);
    close(a2);
    close(b);
    close(b2);
}
END_TEST

/*
 * A session that holds a counted name asks LOCK again with another
 * limit.  Another limit is another kind (another session of the same
 * daemon gets ERR KIND for it), so the re-entry must be refused (ERR
 * PROTO like any re-entry of another kind, or ERR KIND), not counted
 * as holds=2 under the old limit.
 */
START_TEST(reentry_other_limit)
{
    int h, o;
    char *got;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    h = expect_connect(0);
    o = expect_connect(0);
    got = KT_GRANT(h, "LOCK r limit=2", "r");
    free(got);
    EXPECT_REPLY(o, "LOCK r limit=3", "ERR KIND r is held with limit=2");
    got = EXPECT_CMD(h, "LOCK r limit=3");
    ck_assert_msg(strncmp(got, "ERR PROTO ", 10) == 0 || strncmp(got, "ERR KIND ", 9) == 0,
                  "re-entry of a limit=2 hold with limit=3 answered '%s', expected a refusal",
                  got);
    free(got);
    close(h);
    close(o);
}
END_TEST

/* ---- 4. shared ---- */

/*
 * Two sessions hold shared at once (STATUS holders=2 kind=shared); an
 * exclusive TRYLOCK is BUSY with their ttl, and sets no gate (it does
 * not wait); once they let go the exclusive one is granted, and then a
 * shared TRYLOCK is BUSY.
 */
START_TEST(shared_together)
{
    int r1, r2, w;
    char *got, gate[64];

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    r1 = expect_connect(0);
    r2 = expect_connect(0);
    w = expect_connect(0);
    got = KT_GRANT(r1, "LOCK rw shared ttl=20000", "rw");
    EXPECT_FIELD(got, "kind", "shared");
    EXPECT_FIELD(got, "holds", "1");
    free(got);
    got = KT_GRANT(r2, "TRYLOCK rw shared ttl=20000", "rw");
    EXPECT_FIELD(got, "kind", "shared");
    free(got);
    got = EXPECT_CMD(w, "STATUS rw");
    EXPECT_IS(got, "HELD", "rw");
    EXPECT_FIELD(got, "owner", "other");
    EXPECT_FIELD(got, "kind", "shared");
    EXPECT_FIELD(got, "holders", "2");
    EXPECT_NO_FIELD(got, "limit");
    free(got);
    got = EXPECT_CMD(r1, "STATUS rw");
    EXPECT_FIELD(got, "owner", "self");
    EXPECT_FIELD(got, "mode", "session");
    free(got);
    got = EXPECT_CMD(w, "TRYLOCK rw");
    EXPECT_IS(got, "BUSY", "rw");
    ck_assert_msg(EXPECT_INT(got, "ttl") > 0, "'%s'", got);
    free(got);
    got = EXPECT_CMD(w, "LOCK rw wait=0");      /* one attempt, no gate */
    ck_assert_str_eq(got, "TIMEOUT rw");
    free(got);
    kt_key(gate, sizeof(gate), "rw", " gate");
    ck_assert_msg(kt_masters_with(gate) == 0, "a TRYLOCK closed the gate");
    EXPECT_REPLY(r1, "UNLOCK rw", "OK rw holds=0");
    KT_WAIT_STATUS(w, "rw", "holders=1", H_PROMPT_MS);
    got = EXPECT_CMD(w, "TRYLOCK rw");
    EXPECT_IS(got, "BUSY", "rw");
    free(got);
    EXPECT_REPLY(r2, "UNLOCK rw", "OK rw holds=0");
    got = KT_GRANT(w, "TRYLOCK rw", "rw");
    EXPECT_NO_FIELD(got, "kind");
    free(got);
    got = EXPECT_CMD(w, "STATUS rw");
    EXPECT_FIELD(got, "kind", "exclusive");
    EXPECT_FIELD(got, "holders", "1");
    free(got);
    got = EXPECT_CMD(r1, "TRYLOCK rw shared");
    EXPECT_IS(got, "BUSY", "rw");
    ck_assert(EXPECT_INT(got, "ttl") > 0);
    free(got);
    EXPECT_REPLY(w, "UNLOCK rw", "OK rw holds=0");
    KT_KEYS_GONE("rw");
    close(r1);
    close(r2);
    close(w);
}
END_TEST

/*
 * First in, first out across kinds on one daemon: R1 holds shared, W
 * waits for an exclusive LOCK, then R2 asks LOCK shared with a wait.
 * R2 must not get in ahead of W although R1's shared hold would let it:
 * W is granted when R1 lets go, R2 only when W does.
 */
START_TEST(shared_fifo_one_daemon)
{
    int r1, r2, w;
    char *got;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    r1 = expect_connect(0);
    r2 = expect_connect(0);
    w = expect_connect(0);
    got = KT_GRANT(r1, "LOCK rw shared ttl=20000", "rw");
    free(got);
    ck_assert_int_eq(h_send(w, "LOCK rw ttl=20000 wait=15000"), 0);
    kt_wait_stat(0, "waiters", 1);
    ck_assert_int_eq(h_send(r2, "LOCK rw shared ttl=20000 wait=15000"), 0);
    kt_wait_stat(0, "waiters", 2);
    ck_assert_msg(h_quiet(r2, QUIET_MS), "a shared LOCK queued behind an exclusive one got in "
                  "ahead of it");
    ck_assert_msg(h_quiet(w, 0), "the exclusive LOCK was answered while shared was held");
    EXPECT_REPLY(r1, "UNLOCK rw", "OK rw holds=0");
    got = EXPECT_READ(w, H_PROMPT_MS, "the exclusive waiter after the reader left");
    EXPECT_IS(got, "OK", "rw");
    EXPECT_NO_FIELD(got, "kind");
    free(got);
    ck_assert_msg(h_quiet(r2, QUIET_MS), "the shared LOCK was granted while exclusive was held");
    EXPECT_REPLY(w, "UNLOCK rw", "OK rw holds=0");
    got = EXPECT_READ(r2, H_PROMPT_MS, "the shared waiter after the writer left");
    EXPECT_IS(got, "OK", "rw");
    EXPECT_FIELD(got, "kind", "shared");
    free(got);
    EXPECT_REPLY(r2, "UNLOCK rw", "OK rw holds=0");
    KT_KEYS_GONE("rw");
    close(r1);
    close(r2);
    close(w);
}
END_TEST

/*
 * Queues on one daemon: counted waiters behind a full limit=1 are let
 * in one at a time in arrival order (each by a hand-over); shared
 * waiters queued behind an exclusive holder are all let in when it
 * lets go (each granted head makes the next one head at once), not one
 * per ttl.
 */
START_TEST(queue_order)
{
    int h, w1, w2, r1, r2;
    char *got;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    h = expect_connect(0);
    w1 = expect_connect(0);
    w2 = expect_connect(0);
    r1 = expect_connect(0);
    r2 = expect_connect(0);
    got = KT_GRANT(h, "LOCK q limit=1 ttl=20000", "q");
    free(got);
    ck_assert_int_eq(h_send(w1, "LOCK q limit=1 ttl=20000 wait=15000"), 0);
    kt_wait_stat(0, "waiters", 1);
    ck_assert_int_eq(h_send(w2, "LOCK q limit=1 ttl=20000 wait=15000"), 0);
    kt_wait_stat(0, "waiters", 2);
    EXPECT_REPLY(h, "UNLOCK q", "OK q holds=0");
    got = EXPECT_READ(w1, H_PROMPT_MS, "the first counted waiter");
    EXPECT_IS(got, "OK", "q");
    ck_assert_int_eq(KT_PERMIT(got, 1), 0);
    free(got);
    ck_assert_msg(h_quiet(w2, QUIET_MS), "the second waiter got in with the first (limit=1)");
    EXPECT_REPLY(w1, "UNLOCK q", "OK q holds=0");
    got = EXPECT_READ(w2, H_PROMPT_MS, "the second counted waiter");
    EXPECT_IS(got, "OK", "q");
    free(got);
    EXPECT_REPLY(w2, "UNLOCK q", "OK q holds=0");
    KT_KEYS_GONE("q");

    got = KT_GRANT(h, "LOCK qs ttl=20000", "qs");
    free(got);
    ck_assert_int_eq(h_send(r1, "LOCK qs shared ttl=20000 wait=15000"), 0);
    kt_wait_stat(0, "waiters", 1);
    ck_assert_int_eq(h_send(r2, "LOCK qs shared ttl=20000 wait=15000"), 0);
    kt_wait_stat(0, "waiters", 2);
    EXPECT_REPLY(h, "UNLOCK qs", "OK qs holds=0");
    got = EXPECT_READ(r1, H_PROMPT_MS, "the first shared waiter");
    EXPECT_IS(got, "OK", "qs");
    EXPECT_FIELD(got, "kind", "shared");
    free(got);
    got = EXPECT_READ(r2, H_PROMPT_MS, "the second shared waiter");
    EXPECT_IS(got, "OK", "qs");
    EXPECT_FIELD(got, "kind", "shared");
    free(got);
    got = EXPECT_CMD(h, "STATUS qs");
    EXPECT_FIELD(got, "holders", "2");
    free(got);
    EXPECT_REPLY(r1, "UNLOCK qs", "OK qs holds=0");
    EXPECT_REPLY(r2, "UNLOCK qs", "OK qs holds=0");
    KT_KEYS_GONE("qs");
    close(h);
    close(w1);
    close(w2);
    close(r1);
    close(r2);
}
END_TEST

/*
 * The gate across daemons: readers on A, a writer waiting on B.  B's
 * waiting LOCK sets "<name> gate" to its token on the masters; from
 * then on a new shared TRYLOCK on A is BUSY and a shared LOCK on A
 * waits, although only shared holders are there.  The writer is granted
 * when A's reader lets go (and the gate is gone), and the waiting
 * reader right after the writer.  A writer that gives up (its wait= ran
 * out) removes its gate too.
 */
START_TEST(shared_gate_two_daemons)
{
    int r1, r2, r3, w;
    char *got, gate[64];

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &kt_opts);
    r1 = expect_connect(0);
    r2 = expect_connect(0);
    r3 = expect_connect(0);
    w = expect_connect(1);
    kt_key(gate, sizeof(gate), "g", " gate");
    got = KT_GRANT(r1, "LOCK g shared ttl=20000", "g");
    free(got);
    got = KT_GRANT(r2, "TRYLOCK g shared ttl=20000", "g");     /* no gate yet */
    free(got);
    EXPECT_REPLY(r2, "UNLOCK g", "OK g holds=0");
    ck_assert_int_eq(h_send(w, "LOCK g ttl=20000 wait=15000"), 0);
    KT_WAIT_KEY(gate, NMASTERS);
    ck_assert_msg(h_quiet(w, 0), "the writer was answered while a reader held g");
    got = EXPECT_CMD(r2, "TRYLOCK g shared");
    EXPECT_IS(got, "BUSY", "g");
    ck_assert_msg(EXPECT_INT(got, "ttl") > 0, "'%s'", got);
    free(got);
    ck_assert_int_eq(h_send(r3, "LOCK g shared ttl=20000 wait=15000"), 0);
    kt_wait_stat(0, "waiters", 1);
    ck_assert_msg(h_quiet(r3, QUIET_MS), "a new reader got in while a writer waited");
    EXPECT_REPLY(r1, "UNLOCK g", "OK g holds=0");
    got = EXPECT_READ(w, H_PROMPT_MS, "the writer on B after A's reader left");
    EXPECT_IS(got, "OK", "g");
    free(got);
    KT_WAIT_KEY(gate, 0);
    ck_assert_msg(h_quiet(r3, QUIET_MS), "a reader got in while the writer held g");
    EXPECT_REPLY(w, "UNLOCK g", "OK g holds=0");
    got = EXPECT_READ(r3, H_PROMPT_MS, "A's waiting reader after B's writer left");
    EXPECT_IS(got, "OK", "g");
    EXPECT_FIELD(got, "kind", "shared");
    free(got);

    /*
     * A writer that gives up takes its gate along.  The reader it waits
     * for was woken by the first master's announcement of B's release:
     * a master that runs its request before that release refuses it, one
     * that runs it after the writer's has no gate yet.  The gate is on a
     * quorum, which is what keeps new readers out.
     */
    ck_assert_int_eq(h_send(w, "LOCK g ttl=20000 wait=1500"), 0);
    KT_WAIT_GATE("g");
    got = EXPECT_CMD(r2, "TRYLOCK g shared");
    EXPECT_IS(got, "BUSY", "g");
    free(got);
    got = EXPECT_READ(w, 1500 + H_PROMPT_MS, "the writer's wait running out");
    ck_assert_str_eq(got, "TIMEOUT g");
    free(got);
    KT_WAIT_KEY(gate, 0);
    got = KT_GRANT(r2, "TRYLOCK g shared", "g");
    free(got);
    got = EXPECT_CMD(r2, "STATUS g");
    EXPECT_FIELD(got, "holders", "2");
    free(got);
    EXPECT_REPLY(r2, "UNLOCK g", "OK g holds=0");
    EXPECT_REPLY(r3, "UNLOCK g", "OK g holds=0");
    KT_KEYS_GONE("g");
    close(r1);
    close(r2);
    close(r3);
    close(w);
}
END_TEST

/*
 * A writer whose session closes while it waits (its gate set) removes
 * the gate: new readers get in again at once, not after the gate's ttl.
 */
START_TEST(shared_gate_writer_leaves)
{
    int r1, r2, w;
    char *got, gate[64];

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &kt_opts);
    r1 = expect_connect(0);
    r2 = expect_connect(0);
    w = expect_connect(1);
    kt_key(gate, sizeof(gate), "gl", " gate");
    got = KT_GRANT(r1, "LOCK gl shared ttl=20000", "gl");
    free(got);
    ck_assert_int_eq(h_send(w, "LOCK gl ttl=20000"), 0);
    KT_WAIT_KEY(gate, NMASTERS);
    got = EXPECT_CMD(r2, "TRYLOCK gl shared");
    EXPECT_IS(got, "BUSY", "gl");
    free(got);
    close(w);
    KT_WAIT_KEY(gate, 0);
    got = KT_GRANT(r2, "TRYLOCK gl shared", "gl");
    free(got);
    EXPECT_REPLY(r1, "UNLOCK gl", "OK gl holds=0");
    EXPECT_REPLY(r2, "UNLOCK gl", "OK gl holds=0");
    KT_KEYS_GONE("gl");
    close(r1);
    close(r2);
}
END_TEST

/*
 * A writer queued behind shared holders of its own daemon: it still asks
 * the masters (which refuse it and close the gate on every master), and
 * shared attempts through the same daemon do not overtake it: TRYLOCK is
 * BUSY, wait=0 is TIMEOUT, a waiting shared LOCK is granted only after
 * the writer had its turn.
 */
START_TEST(shared_local_writer_not_overtaken)
{
    int r1, r2, w;
    char *got, gate[64];

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    r1 = expect_connect(0);
    r2 = expect_connect(0);
    w = expect_connect(0);
    kt_key(gate, sizeof(gate), "lw", " gate");
    got = KT_GRANT(r1, "LOCK lw shared ttl=20000", "lw");
    free(got);
    ck_assert_int_eq(h_send(w, "LOCK lw ttl=20000"), 0);
    KT_WAIT_KEY(gate, NMASTERS);
    got = EXPECT_CMD(r2, "TRYLOCK lw shared");
    EXPECT_IS(got, "BUSY", "lw");
    ck_assert_msg(EXPECT_INT(got, "ttl") == 20000, "'%s': ttl is not the writer's", got);
    free(got);
    got = EXPECT_CMD(r2, "LOCK lw shared wait=0");
    EXPECT_IS(got, "TIMEOUT", "lw");
    free(got);
    ck_assert_int_eq(h_send(r2, "LOCK lw shared"), 0);
    ck_assert(h_quiet(r2, 300));
    EXPECT_REPLY(r1, "UNLOCK lw", "OK lw holds=0");
    got = EXPECT_READ(w, CMD_MS, "the writer's grant");
    EXPECT_IS(got, "OK", "lw");
    free(got);
    ck_assert(h_quiet(r2, 300));
    EXPECT_REPLY(w, "UNLOCK lw", "OK lw holds=0");
    got = EXPECT_READ(r2, CMD_MS, "the second reader's grant");
    EXPECT_IS(got, "OK", "lw");
    free(got);
    EXPECT_REPLY(r2, "UNLOCK lw", "OK lw holds=0");
    KT_KEYS_GONE("lw");
    close(r1);
    close(r2);
    close(w);
}
END_TEST

/*
 * Leftovers of another kind on two masters (a permit and its limit key)
 * refuse there, but do not make a request an error while the name's
 * own kind may still hold a quorum: the exclusive holder is on the
 * other three, one of which is stopped, so every decided round has seen
 * a leftover.  TRYLOCK is BUSY and a waiting LOCK waits (TIMEOUT); only
 * a refusal of another kind by so many masters that no quorum is
 * possible is ERR KIND.  The stopped master must not be dropped for its
 * silence meanwhile (its link gone, the UNLOCK would find the token on
 * two masters only): redis.down_after_ms is far longer than the test
 * takes on a loaded machine (the default, 2 s, was not, beside two busy
 * loops).
 */
START_TEST(kind_minority_only_refuses)
{
    struct h_daemon_opts o = kt_opts;
    char permit[64], limit[64], *got;
    size_t i;
    int a, b;

    o.down_after_ms = 20000;
    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    a = expect_connect(0);
    b = expect_connect(0);
    kt_key(permit, sizeof(permit), "mk", " permit 0");
    kt_key(limit, sizeof(limit), "mk", "");
    for (i = 3; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET %s leftover PX 20000", permit), 0);
        ck_assert_int_eq(h_master_cmd(i, NULL, "HSET %s limit 3 0 1", limit), 0);
        ck_assert_int_eq(h_master_cmd(i, NULL, "PEXPIRE %s 20000", limit), 0);
    }
    got = KT_GRANT(a, "LOCK mk ttl=20000", "mk");
    free(got);
    ck_assert_int_eq(h_signal_master(0, SIGSTOP), 0);
    got = EXPECT_CMD(b, "TRYLOCK mk");
    EXPECT_IS(got, "BUSY", "mk");
    free(got);
    got = EXPECT_CMD(b, "LOCK mk wait=500");
    EXPECT_IS(got, "TIMEOUT", "mk");
    free(got);
    ck_assert_int_eq(h_signal_master(0, SIGCONT), 0);
    EXPECT_REPLY(a, "UNLOCK mk", "OK mk holds=0");
    close(a);
    close(b);
}
END_TEST

/*
 * A limit key written by hand with a value that is no limit (not a
 * number, or more permits than any name may have) is taken for a name
 * of another kind, named as it is, and never read as a count of permits
 * (a master would otherwise be asked to read a billion keys, or an
 * EXISTS of nothing); STATUS of the name is answered.
 */
START_TEST(kind_garbage_limit_key)
{
    char limit[64], *got;
    size_t i;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    a = expect_connect(0);
    kt_key(limit, sizeof(limit), "gk", "");
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "HSET %s limit abc", limit), 0);
    }
    EXPECT_REPLY(a, "TRYLOCK gk", "ERR KIND gk is held with limit=abc");
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "HSET %s limit 1000000000", limit), 0);
    }
    EXPECT_REPLY(a, "TRYLOCK gk shared", "ERR KIND gk is held with limit=1000000000");
    got = EXPECT_CMD(a, "STATUS gk");
    EXPECT_IS(got, "FREE", "gk");
    free(got);
    close(a);
}
END_TEST

/* ---- 5. lease mode and fences ---- */

/* One lease-mode lock of a kind: token STATUS, EXTEND, UNLOCK, then EXTEND is NOTHELD. */
static void
kt_lease_round(int fd, int other, const char *name, const char *opts)
{
    char line[192], tok[33], *got;

    snprintf(line, sizeof(line), "LOCK %s %s mode=lease ttl=5000", name, opts);
    got = KT_GRANT(fd, line, name);
    kt_token(got, tok);
    EXPECT_NO_FIELD(got, "holds");
    ck_assert_msg(EXPECT_INT(got, "validity") > 0 && EXPECT_INT(got, "validity") <= 5000,
                  "'%s'", got);
    free(got);
    /* STATUS by token from another connection: owner=self mode=lease. */
    snprintf(line, sizeof(line), "STATUS %s token=%s", name, tok);
    got = EXPECT_CMD(other, line);
    EXPECT_IS(got, "HELD", name);
    EXPECT_FIELD(got, "owner", "self");
    EXPECT_FIELD(got, "mode", "lease");
    EXPECT_FIELD(got, "holders", "1");
    ck_assert_msg(EXPECT_INT(got, "ttl") <= 5000, "'%s'", got);
    free(got);
    /* Without the token: someone else's. */
    snprintf(line, sizeof(line), "STATUS %s", name);
    got = EXPECT_CMD(other, line);
    EXPECT_FIELD(got, "owner", "other");
    free(got);
    /* EXTEND by token, from another connection: the ttl grows past the first. */
    snprintf(line, sizeof(line), "EXTEND %s token=%s ttl=20000", name, tok);
    got = EXPECT_CMD(other, line);
    EXPECT_IS(got, "OK", name);
    ck_assert_msg(EXPECT_INT(got, "validity") > 5000, "EXTEND to 20000 ms answered '%s'", got);
    free(got);
    snprintf(line, sizeof(line), "STATUS %s token=%s", name, tok);
    got = EXPECT_CMD(other, line);
    ck_assert_msg(EXPECT_INT(got, "ttl") > 5000, "after EXTEND: '%s'", got);
    free(got);
    /* UNLOCK by token; then the token holds nothing. */
    snprintf(line, sizeof(line), "UNLOCK %s token=%s", name, tok);
    got = EXPECT_CMD(other, line);
    EXPECT_IS(got, "OK", name);
    free(got);
    snprintf(line, sizeof(line), "EXTEND %s token=%s ttl=20000", name, tok);
    got = EXPECT_CMD(fd, line);
    EXPECT_IS(got, "NOTHELD", name);
    free(got);
    snprintf(line, sizeof(line), "UNLOCK %s token=%s", name, tok);
    got = EXPECT_CMD(fd, line);
    EXPECT_IS(got, "NOTHELD", name);
    free(got);
    snprintf(line, sizeof(line), "STATUS %s token=%s", name, tok);
    got = EXPECT_CMD(fd, line);
    EXPECT_IS(got, "FREE", name);
    free(got);
    KT_KEYS_GONE(name);
}

/*
 * Lease mode for both kinds: the OK carries the token and the kind; the
 * token's UNLOCK, EXTEND and STATUS find the record whatever its kind;
 * an EXTEND after the UNLOCK is NOTHELD and leaves nothing behind.
 */
START_TEST(lease_token_ops)
{
    int a, b;
    char *got, tok[33], line[160];
    int p1, p2;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    a = expect_connect(0);
    b = expect_connect(0);
    kt_lease_round(a, b, "lc", "limit=2");
    kt_lease_round(a, b, "ls", "shared");
    kt_lease_round(a, b, "lx", "");

    /* Two counted leases: distinct permits, the token names the right one. */
    got = KT_GRANT(a, "LOCK lc limit=2 mode=lease ttl=20000", "lc");
    p1 = KT_PERMIT(got, 2);
    kt_token(got, tok);
    free(got);
    got = KT_GRANT(b, "LOCK lc limit=2 mode=lease ttl=20000", "lc");
    p2 = KT_PERMIT(got, 2);
    free(got);
    ck_assert_int_ne(p1, p2);
    got = EXPECT_CMD(b, "TRYLOCK lc limit=2 mode=lease ttl=20000");
    EXPECT_IS(got, "BUSY", "lc");
    free(got);
    snprintf(line, sizeof(line), "UNLOCK lc token=%s", tok);
    EXPECT_REPLY(b, line, "OK lc");
    got = KT_GRANT(b, "TRYLOCK lc limit=2 mode=lease ttl=20000", "lc");
    ck_assert_msg(KT_PERMIT(got, 2) == p1, "'%s': expected the released permit %d", got, p1);
    free(got);
    got = EXPECT_CMD(a, "STATUS lc");
    EXPECT_FIELD(got, "holders", "2");
    EXPECT_FIELD(got, "limit", "2");
    free(got);
    close(a);
    close(b);
}
END_TEST

/*
 * Fences: a counted hold counts on its permit's own counter, so two
 * successive grants of the one permit of limit=1 get increasing fences
 * (and the counter on the masters is "<name> permit 0 fence"); shared
 * and exclusive grants of one name share "<name> fence" and increase
 * across the kinds.  A re-entry keeps its grant's fence.
 */
START_TEST(fences)
{
    long long f1, f2, f3, f4;
    char *got, key[64], value[32];
    struct kt_keyval kv;
    int a, b;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    a = expect_connect(0);
    b = expect_connect(0);
    got = KT_GRANT(a, "LOCK f limit=1 fence", "f");
    KT_PERMIT(got, 1);
    f1 = EXPECT_INT(got, "fence");
    free(got);
    got = KT_GRANT(a, "LOCK f limit=1 fence", "f");     /* re-entry: the same fence */
    ck_assert_int_eq(EXPECT_INT(got, "fence"), f1);
    EXPECT_FIELD(got, "holds", "2");
    free(got);
    EXPECT_REPLY(a, "UNLOCK f", "OK f holds=1");
    EXPECT_REPLY(a, "UNLOCK f", "OK f holds=0");
    got = KT_GRANT(b, "LOCK f limit=1 fence mode=lease ttl=20000", "f");
    f2 = EXPECT_INT(got, "fence");
    free(got);
    ck_assert_msg(f2 > f1, "second grant of permit 0: fence %lld after %lld", f2, f1);
    kt_key(key, sizeof(key), "f", " permit 0 fence");
    snprintf(value, sizeof(value), "%lld", f2);
    kv.key = key;
    kv.value = value;
    kv.want = NMASTERS;
    ck_assert_msg(h_wait_until(kt_cond_value, &kv, H_PROMPT_MS), "%s = %s on %zu masters, "
                  "expected all", key, value, kv.seen);

    got = KT_GRANT(a, "LOCK fs shared fence", "fs");
    f3 = EXPECT_INT(got, "fence");
    EXPECT_FIELD(got, "kind", "shared");
    free(got);
    EXPECT_REPLY(a, "UNLOCK fs", "OK fs holds=0");
    got = KT_GRANT(a, "LOCK fs fence", "fs");
    f4 = EXPECT_INT(got, "fence");
    free(got);
    ck_assert_msg(f4 > f3, "exclusive after shared: fence %lld after %lld", f4, f3);
    EXPECT_REPLY(a, "UNLOCK fs", "OK fs holds=0");
    got = KT_GRANT(b, "LOCK fs shared fence", "fs");
    ck_assert_msg(EXPECT_INT(got, "fence") > f4, "shared after exclusive: '%s' after fence %lld",
                  got, f4);
    free(got);
    kt_key(key, sizeof(key), "fs", " fence");
    KT_WAIT_KEY(key, NMASTERS);
    kt_key(key, sizeof(key), "fs", " permit 0 fence");
    ck_assert_int_eq(kt_masters_with(key), 0);
    EXPECT_REPLY(b, "UNLOCK fs", "OK fs holds=0");
    close(a);
    close(b);
}
END_TEST

/* ---- 6. a permit whose keys vanished ---- */

/*
 * UNLOCK name on fd, whose hold's record vanished from every master:
 * "! LOST <name> reason=gone", then NOTHELD; a second UNLOCK is NOTHELD.
 */
#define KT_UNLOCK_GONE(fd, name) kt_unlock_gone_at((fd), (name), __LINE__)

static void
kt_unlock_gone_at(int fd, const char *name, int at)
{
    char line[128], want[128], *got;

    snprintf(line, sizeof(line), "UNLOCK %s", name);
    ck_assert_int_eq(h_send(fd, line), 0);
    got = expect_read_at(fd, CMD_MS, "UNLOCK of a vanished hold, first line", at);
    snprintf(want, sizeof(want), "! LOST %s reason=gone", name);
    ck_assert_msg(strcmp(got, want) == 0, "line %d: got '%s', expected '%s'", at, got, want);
    free(got);
    got = expect_read_at(fd, CMD_MS, "UNLOCK of a vanished hold, second line", at);
    snprintf(want, sizeof(want), "NOTHELD %s", name);
    ck_assert_msg(strcmp(got, want) == 0, "line %d: got '%s', expected '%s'", at, got, want);
    free(got);
    got = expect_cmd_at(fd, line, CMD_MS, at);
    ck_assert_msg(strcmp(got, want) == 0, "line %d: a second UNLOCK got '%s', expected '%s'",
                  at, got, want);
    free(got);
}

/*
 * A session's permit key deleted on every master before its UNLOCK: the
 * UNLOCK is answered "! LOST <name> reason=gone", then NOTHELD; the
 * other holder keeps its permit.
 */
START_TEST(permit_gone_lost)
{
    char *got, key[64], suffix[32];
    int a, b, p;
    size_t i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    a = expect_connect(0);
    b = expect_connect(0);
    got = KT_GRANT(a, "LOCK pg limit=2 ttl=20000", "pg");
    p = KT_PERMIT(got, 2);
    free(got);
    got = KT_GRANT(b, "LOCK pg limit=2 ttl=20000", "pg");
    free(got);
    snprintf(suffix, sizeof(suffix), " permit %d", p);
    kt_key(key, sizeof(key), "pg", suffix);
    ck_assert_int_eq(kt_masters_with(key), NMASTERS);
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "DEL %s", key), 0);
    }
    KT_UNLOCK_GONE(a, "pg");
    got = EXPECT_CMD(b, "STATUS pg");
    EXPECT_IS(got, "HELD", "pg");
    EXPECT_FIELD(got, "owner", "self");
    EXPECT_FIELD(got, "holders", "1");
    free(got);
    EXPECT_REPLY(b, "UNLOCK pg", "OK pg holds=0");
    KT_KEYS_GONE("pg");
    close(a);
    close(b);
}
END_TEST

/* The one member of the shared set key on master 0 other than except (NULL: none), into out. */
static void
kt_member_besides(const char *key, const char *except, char *out)
{
    redisContext *c = h_master_redis(0);
    redisReply *r;
    size_t j, found = 0;
    bool array;

    ck_assert_msg(c != NULL, "master 0 cannot be asked");
    r = redisCommand(c, "ZRANGE %s 0 -1", key);
    array = r != NULL && r->type == REDIS_REPLY_ARRAY;
    for (j = 0; array && j < r->elements; j++) {
        if (except == NULL || strcmp(r->element[j]->str, except) != 0) {
            snprintf(out, 33, "%s", r->element[j]->str);
            found++;
        }
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    redisFree(c);
    ck_assert_msg(array, "ZRANGE '%s' failed on master 0", key);
    ck_assert_msg(found == 1 && h_is_token(out), "'%s' on master 0: %zu members besides '%s', "
                  "expected one token", key, found, except != NULL ? except : "");
}

/* Remove member from the shared set key on every master; each must have had it. */
static void
kt_member_delete(const char *key, const char *member)
{
    redisContext *c;
    redisReply *r;
    long long n;
    size_t i;

    for (i = 0; i < NMASTERS; i++) {
        c = h_master_redis(i);
        ck_assert_msg(c != NULL, "master %zu cannot be asked", i);
        r = redisCommand(c, "ZREM %s %s", key, member);
        n = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        if (r != NULL) {
            freeReplyObject(r);
        }
        redisFree(c);
        ck_assert_msg(n == 1, "master %zu: ZREM '%s' %s answered %lld, expected 1", i, key,
                      member, n);
    }
}

/*
 * Shared members deleted on every master, as permit_gone_lost does for
 * a permit: A's member before its UNLOCK, which is answered
 * "! LOST <name> reason=gone", then NOTHELD; C's (ttl 3000) while it
 * just holds, and its next renewal pushes "! LOST <name> reason=renew"
 * unasked, then its UNLOCK is NOTHELD.  B, the third reader, keeps its
 * hold throughout (an exclusive TRYLOCK is BUSY until B lets go), and
 * neither lost member is left to refuse the writer afterwards.
 */
START_TEST(shared_gone_lost)
{
    char *got, key[64], tok_a[33], tok_b[33], tok_c[33];
    int a, b, c, w;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    a = expect_connect(0);
    b = expect_connect(0);
    c = expect_connect(0);
    w = expect_connect(0);
    kt_key(key, sizeof(key), "sg", "");
    got = KT_GRANT(a, "LOCK sg shared ttl=20000", "sg");
    EXPECT_FIELD(got, "kind", "shared");
    free(got);
    kt_member_besides(key, NULL, tok_a);
    got = KT_GRANT(b, "LOCK sg shared ttl=20000", "sg");
    free(got);
    kt_member_besides(key, tok_a, tok_b);

    /* A's member vanishes: its UNLOCK says so. */
    kt_member_delete(key, tok_a);
    KT_UNLOCK_GONE(a, "sg");
    ck_assert_int_eq(kt_stat(0, "locks_lost_gone"), 1);

    /* C's member vanishes while C only holds: its renewal finds out. */
    got = KT_GRANT(c, "LOCK sg shared ttl=3000", "sg");
    free(got);
    kt_member_besides(key, tok_b, tok_c);      /* A's is gone: the other one is C's */
    kt_member_delete(key, tok_c);
    got = EXPECT_READ(c, 3000, "the renewal of a vanished shared member");
    ck_assert_str_eq(got, "! LOST sg reason=renew");
    free(got);
    EXPECT_REPLY(c, "UNLOCK sg", "NOTHELD sg");
    ck_assert_int_eq(kt_stat(0, "locks_lost_renew"), 1);

    /* B still holds, on the masters too; once it lets go the writer gets in. */
    got = EXPECT_CMD(b, "STATUS sg");
    EXPECT_IS(got, "HELD", "sg");
    EXPECT_FIELD(got, "owner", "self");
    EXPECT_FIELD(got, "kind", "shared");
    EXPECT_FIELD(got, "holders", "1");
    free(got);
    got = EXPECT_CMD(w, "TRYLOCK sg");
    EXPECT_IS(got, "BUSY", "sg");
    free(got);
    EXPECT_REPLY(b, "UNLOCK sg", "OK sg holds=0");
    got = KT_GRANT(w, "TRYLOCK sg", "sg");
    EXPECT_NO_FIELD(got, "kind");
    free(got);
    EXPECT_REPLY(w, "UNLOCK sg", "OK sg holds=0");
    KT_KEYS_GONE("sg");
    close(a);
    close(b);
    close(c);
    close(w);
}
END_TEST

/*
 * The limit marker must not outlive the permits: a counted name whose
 * last permit expired (a lease-mode holder that never came back) is
 * FREE to STATUS, and then a LOCK of another kind must be granted.
 *
 * Permit 0 is released, permit 1 (ttl 700 ms) is left to expire by
 * itself, so "<name> limit" still names permit 1 when the exclusive
 * TRYLOCK comes: the acquire must read the permits, find none alive and
 * drop the key (proto/PROTOCOL.md, section 9, "One kind per name").
 */
START_TEST(stale_limit_marker)
{
    char *got, tok[33], line[128], key[64];
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    a = expect_connect(0);
    got = KT_GRANT(a, "LOCK st limit=2 mode=lease ttl=20000", "st");
    kt_token(got, tok);
    free(got);
    got = KT_GRANT(a, "LOCK st limit=2 mode=lease ttl=700", "st");
    free(got);
    snprintf(line, sizeof(line), "UNLOCK st token=%s", tok);
    EXPECT_REPLY(a, line, "OK st");
    KT_WAIT_STATUS(a, "st", "FREE st", 700 + H_PROMPT_MS);  /* the second lease's ttl */
    kt_key(key, sizeof(key), "st", "");
    got = EXPECT_CMD(a, "TRYLOCK st");
    ck_assert_msg(h_is_reply(got, "OK", "st"), "STATUS says FREE, but TRYLOCK st answered '%s' "
                  "('%s' is still on %zu masters)", got, key, kt_masters_with(key));
    free(got);
    close(a);
}
END_TEST

/* ---- renewal and restore ---- */

/*
 * Session-mode shared and counted holds with a short ttl are renewed
 * (a shared member's score and a permit with its limit marker), so
 * they outlive their ttl; and when two masters lose everything, the
 * renewals write both kinds back there (keys_restored counts them).
 * The ttl, KT_RENEW_TTL_MS, leaves a renewal (every ttl/3) two thirds
 * of it to be confirmed: with 1500 ms a loaded machine lost one.
 */
#define KT_RENEW_TTL_MS 3000
START_TEST(kinds_renewed_restored)
{
    char permit_key[64], limit_key[64], set_key[64], suffix[32], *got;
    struct kt_key_count k;
    long long restored;
    int a, b, c, p;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    a = expect_connect(0);
    b = expect_connect(0);
    c = expect_connect(0);
    got = KT_GRANT(a, "LOCK rn limit=2 ttl=3000", "rn");     /* KT_RENEW_TTL_MS */
    p = KT_PERMIT(got, 2);
    free(got);
    got = KT_GRANT(b, "LOCK rs shared ttl=3000", "rs");
    free(got);
    snprintf(suffix, sizeof(suffix), " permit %d", p);
    kt_key(permit_key, sizeof(permit_key), "rn", suffix);
    kt_key(limit_key, sizeof(limit_key), "rn", "");
    kt_key(set_key, sizeof(set_key), "rs", "");

    /* Three times the ttl later, both still held (polled while it passes). */
    {
        int64_t end = h_now_ms() + 3 * KT_RENEW_TTL_MS;

        while (h_now_ms() < end) {
            got = EXPECT_CMD(c, "STATUS rn");
            ck_assert_msg(h_is_reply(got, "HELD", "rn"), "counted hold lapsed: '%s'", got);
            free(got);
            got = EXPECT_CMD(c, "STATUS rs");
            ck_assert_msg(h_is_reply(got, "HELD", "rs"), "shared hold lapsed: '%s'", got);
            free(got);
            h_sleep_ms(100);
        }
    }
    got = EXPECT_CMD(c, "TRYLOCK rs");
    EXPECT_IS(got, "BUSY", "rs");
    free(got);

    /* Masters 0 and 1 lose everything: the renewals put the records back. */
    restored = kt_stat(0, "keys_restored");
    ck_assert_int_eq(h_master_cmd(0, NULL, "FLUSHALL"), 0);
    ck_assert_int_eq(h_master_cmd(1, NULL, "FLUSHALL"), 0);
    k.key = permit_key;
    k.want = NMASTERS;
    ck_assert_msg(h_wait_until(kt_cond_key_count, &k, 2 * H_PROMPT_MS), "%s is back on %zu masters",
                  permit_key, k.seen);
    k.key = limit_key;
    ck_assert_msg(h_wait_until(kt_cond_key_count, &k, 2 * H_PROMPT_MS), "%s is back on %zu masters",
                  limit_key, k.seen);
    k.key = set_key;
    ck_assert_msg(h_wait_until(kt_cond_key_count, &k, 2 * H_PROMPT_MS), "%s is back on %zu masters",
                  set_key, k.seen);
    ck_assert_msg(kt_stat(0, "keys_restored") >= restored + 4, "keys_restored went from %lld "
                  "to %lld", restored, kt_stat(0, "keys_restored"));
    EXPECT_REPLY(a, "UNLOCK rn", "OK rn holds=0");
    EXPECT_REPLY(b, "UNLOCK rs", "OK rs holds=0");
    KT_KEYS_GONE("rn");
    KT_KEYS_GONE("rs");
    close(a);
    close(b);
    close(c);
}
END_TEST

/* ---- 7. redlockctl ---- */

/* <test dir>/<name> into out. */
static void
kt_path(char *out, size_t size, const char *name)
{
    ck_assert_msg(snprintf(out, size, "%s/%s", h_dir(), name) < (int)size, "path too long");
}

/* Start redlockctl -H <daemon 0> args...; output to <dir>/<tag>.out.  Its pid. */
static pid_t
kt_ctl_spawn(const char *tag, const char *const *args)
{
    const char *argv[32];
    char out[KT_PATH_MAX], name[64], addr[64];
    size_t n = 0, i;
    pid_t pid;

    h_use_daemon(0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", h_daemon_port());
    argv[n++] = h_redlockctl_bin();
    argv[n++] = "-H";
    argv[n++] = addr;
    while (*args != NULL) {
        ck_assert(n < sizeof(argv) / sizeof(argv[0]) - 1);
        argv[n++] = *args++;
    }
    argv[n] = NULL;
    snprintf(name, sizeof(name), "%s.out", tag);
    kt_path(out, sizeof(out), name);
    pid = h_spawn(argv, out);
    ck_assert_msg(pid > 0, "cannot start %s", argv[0]);
    for (i = 0; i < KT_KIDS_MAX && kt_kids[i] != 0; i++) {
        continue;
    }
    ck_assert(i < KT_KIDS_MAX);
    kt_kids[i] = pid;
    return pid;
}

#define KT_CTL(tag, ...) kt_ctl_spawn((tag), (const char *const[]){ __VA_ARGS__, NULL })

/* A child to reap: its exit code once reaped (-1 before). */
struct kt_proc {
    pid_t pid;
    int   code;
};

static bool
kt_cond_exited(void *arg)
{
    struct kt_proc *p = arg;
    int status;

    if (waitpid(p->pid, &status, WNOHANG) != p->pid) {
        return false;
    }
    p->code = h_decode_status(status);
    return true;
}

static void
kt_kid_forget(pid_t pid)
{
    size_t i;

    for (i = 0; i < KT_KIDS_MAX; i++) {
        if (kt_kids[i] == pid) {
            kt_kids[i] = 0;
        }
    }
}

/* Wait up to ms for pid to exit: its exit code, or -1 when it did not. */
static int
kt_ctl_wait(pid_t pid, int64_t ms)
{
    struct kt_proc p = { pid, -1 };

    if (!h_wait_until(kt_cond_exited, &p, ms)) {
        return -1;
    }
    kt_kid_forget(pid);
    return p.code;
}

/* Contents of a file (malloc'd; "" when it cannot be read). */
static char *
kt_slurp(const char *path)
{
    char *buf = calloc(1, 8192);
    FILE *f = fopen(path, "re");
    size_t n;

    ck_assert_ptr_nonnull(buf);
    if (f != NULL) {
        n = fread(buf, 1, 8191, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

/* What redlockctl <tag> printed. */
static char *
kt_ctl_out(const char *tag)
{
    char path[KT_PATH_MAX], name[64];

    snprintf(name, sizeof(name), "%s.out", tag);
    kt_path(path, sizeof(path), name);
    return kt_slurp(path);
}

/* Files a set of commands leave: how many of paths exist. */
struct kt_files {
    char   paths[3][KT_PATH_MAX];
    size_t n;           /* paths in use */
    size_t want;        /* how many must exist */
    size_t seen;        /* last count */
};

static bool
kt_cond_files(void *arg)
{
    struct kt_files *f = arg;
    size_t i;

    f->seen = 0;
    for (i = 0; i < f->n; i++) {
        f->seen += access(f->paths[i], F_OK) == 0;
    }
    return f->seen == f->want;
}

/*
 * The shell command of a holder: write $REDLOCK_PERMIT (or "unset") to
 * <dir>/<tag>.env, atomically, then wait until <dir>/go exists.
 */
static void
kt_holder_cmd(char *out, size_t size, const char *tag)
{
    ck_assert((size_t)snprintf(out, size,
                               "echo \"${REDLOCK_PERMIT-unset}\" > '%s/%s.tmp' && "
                               "mv '%s/%s.tmp' '%s/%s.env' && "
                               "while [ ! -e '%s/go' ]; do sleep 0.02; done",
                               h_dir(), tag, h_dir(), tag, h_dir(), tag, h_dir()) < size);
}

/* The redlockctl runs of one test: tag, pid, exit code. */
struct kt_run {
    char  tag[16];
    pid_t pid;
    int   code;     /* -1 while running */
};

/* Poll the runs until exactly want of them have exited (reaped, codes kept). */
struct kt_runs_wait {
    struct kt_run *runs;
    size_t         n;
    size_t         want;
    size_t         seen;
};

static bool
kt_cond_runs(void *arg)
{
    struct kt_runs_wait *w = arg;
    size_t i;
    int status;

    w->seen = 0;
    for (i = 0; i < w->n; i++) {
        if (w->runs[i].code < 0 && waitpid(w->runs[i].pid, &status, WNOHANG) == w->runs[i].pid) {
            w->runs[i].code = h_decode_status(status);
            kt_kid_forget(w->runs[i].pid);
        }
        w->seen += w->runs[i].code >= 0;
    }
    return w->seen >= w->want;
}

/*
 * redlockctl --limit 2 -n: of three started at once, two run their
 * command (each with its own REDLOCK_PERMIT, 0 and 1) and the third
 * exits 1 (conflict) while they run; status prints the count; once the
 * two are let go they exit 0 and the name is free again.
 */
START_TEST(ctl_limit)
{
    struct kt_run runs[3];
    struct kt_runs_wait rw = { runs, 3, 1, 0 };
    struct kt_files files;
    char cmds[3][KT_PATH_MAX * 4], *out, *v;
    size_t i, ran = 0, refused = 0;
    int seen_permit[2] = { 0, 0 }, fd, code;
    pid_t st;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    setenv("REDLOCK_PERMIT", "stale", 1);   /* must be replaced for the command */
    memset(&files, 0, sizeof(files));
    for (i = 0; i < 3; i++) {
        snprintf(runs[i].tag, sizeof(runs[i].tag), "lim%zu", i);
        runs[i].code = -1;
        kt_holder_cmd(cmds[i], sizeof(cmds[i]), runs[i].tag);
        snprintf(files.paths[i], KT_PATH_MAX, "%s/%s.env", h_dir(), runs[i].tag);
    }
    files.n = 3;
    files.want = 2;
    for (i = 0; i < 3; i++) {
        runs[i].pid = KT_CTL(runs[i].tag, "-n", "--limit", "2", "backups", "-c", cmds[i]);
    }
    /* One refused (exit 1), two running with their env files written. */
    ck_assert_msg(h_wait_until(kt_cond_runs, &rw, EXIT_MS), "no redlockctl --limit 2 -n gave up");
    ck_assert_msg(h_wait_until(kt_cond_files, &files, EXIT_MS), "%zu commands running, "
                  "expected 2", files.seen);
    ck_assert_msg(kt_cond_runs(&rw) && rw.seen == 1, "%zu of 3 exited while 2 should run",
                  rw.seen);
    for (i = 0; i < 3; i++) {
        if (runs[i].code >= 0) {
            out = kt_ctl_out(runs[i].tag);
            ck_assert_msg(runs[i].code == 1, "the refused redlockctl exited %d: %s",
                          runs[i].code, out);
            ck_assert_msg(access(files.paths[i], F_OK) != 0, "the refused one ran its command");
            free(out);
            refused++;
            continue;
        }
        v = kt_slurp(files.paths[i]);
        ck_assert_msg(strcmp(v, "0\n") == 0 || strcmp(v, "1\n") == 0,
                      "REDLOCK_PERMIT of %s was '%s'", runs[i].tag, v);
        ck_assert_msg(!seen_permit[v[0] - '0'], "two commands ran with permit %c", v[0]);
        seen_permit[v[0] - '0'] = 1;
        free(v);
        ran++;
    }
    ck_assert(ran == 2 && refused == 1);
    fd = expect_connect(0);
    EXPECT_PREFIX(fd, "STATUS backups", "HELD backups ");
    close(fd);
    st = KT_CTL("status", "status", "backups");
    code = kt_ctl_wait(st, EXIT_MS);
    out = kt_ctl_out("status");
    ck_assert_msg(code == 0 && strstr(out, "backups: held") != NULL
                  && strstr(out, "counted by 2 holders of 2") != NULL,
                  "redlockctl status (exit %d) printed '%s'", code, out);
    free(out);

    /* Let them go: both exit 0, and nothing is left. */
    kt_touch("go");
    rw.want = 3;
    ck_assert_msg(h_wait_until(kt_cond_runs, &rw, EXIT_MS), "the holders did not exit");
    for (i = 0; i < 3; i++) {
        if (access(files.paths[i], F_OK) == 0) {
            ck_assert_msg(runs[i].code == 0, "%s exited %d", runs[i].tag, runs[i].code);
        }
    }
    KT_KEYS_GONE("backups");
}
END_TEST

/*
 * redlockctl -s: two run at once, an exclusive -n is refused (1) while
 * they run, status says "shared by 2 holders", REDLOCK_PERMIT is
 * removed for them; -s with --limit is a usage error (64), and so is
 * --limit 0.
 */
START_TEST(ctl_shared)
{
    struct kt_files files;
    char cmds[2][KT_PATH_MAX * 4], *out, *v;
    pid_t r[2], x, st;
    int code;
    size_t i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &kt_opts);
    setenv("REDLOCK_PERMIT", "stale", 1);
    memset(&files, 0, sizeof(files));
    for (i = 0; i < 2; i++) {
        char tag[16];

        snprintf(tag, sizeof(tag), "sh%zu", i);
        kt_holder_cmd(cmds[i], sizeof(cmds[i]), tag);
        snprintf(files.paths[i], KT_PATH_MAX, "%s/%s.env", h_dir(), tag);
        r[i] = KT_CTL(tag, "-n", "-s", "db", "-c", cmds[i]);
    }
    files.n = 2;
    files.want = 2;
    ck_assert_msg(h_wait_until(kt_cond_files, &files, EXIT_MS), "%zu of 2 shared holders ran",
                  files.seen);
    for (i = 0; i < 2; i++) {
        v = kt_slurp(files.paths[i]);
        ck_assert_msg(strcmp(v, "unset\n") == 0, "REDLOCK_PERMIT of a shared holder: '%s'", v);
        free(v);
    }
    x = KT_CTL("excl", "-n", "db", "true");
    code = kt_ctl_wait(x, EXIT_MS);
    out = kt_ctl_out("excl");
    ck_assert_msg(code == 1, "exclusive redlockctl -n while 2 shared held: exit %d (%s)", code,
                  out);
    free(out);
    st = KT_CTL("status", "status", "db");
    code = kt_ctl_wait(st, EXIT_MS);
    out = kt_ctl_out("status");
    ck_assert_msg(code == 0 && strstr(out, "db: held") != NULL
                  && strstr(out, "shared by 2 holders") != NULL,
                  "redlockctl status (exit %d) printed '%s'", code, out);
    free(out);
    kt_touch("go");
    for (i = 0; i < 2; i++) {
        code = kt_ctl_wait(r[i], EXIT_MS);
        ck_assert_msg(code == 0, "shared holder %zu exited %d", i, code);
    }
    x = KT_CTL("excl2", "-n", "db", "true");
    ck_assert_int_eq(kt_ctl_wait(x, EXIT_MS), 0);

    x = KT_CTL("both", "-s", "--limit", "2", "db", "true");
    code = kt_ctl_wait(x, EXIT_MS);
    out = kt_ctl_out("both");
    ck_assert_msg(code == 64, "-s --limit 2: exit %d (%s)", code, out);
    free(out);
    x = KT_CTL("zero", "--limit", "0", "db", "true");
    code = kt_ctl_wait(x, EXIT_MS);
    out = kt_ctl_out("zero");
    ck_assert_msg(code == 64, "--limit 0: exit %d (%s)", code, out);
    free(out);
    KT_KEYS_GONE("db");
}
END_TEST

/* ---- 8. STATS and /metrics ---- */

/*
 * shared_grants counts shared grants (not re-entries), counted_grants
 * counted ones (hand-overs included), kind_refusals every ERR KIND
 * (found here or by the masters) and nothing else (not ERR PROTO, not
 * BUSY); /metrics says the same.
 */
START_TEST(stats_counters)
{
    struct h_daemon_opts opts = kt_opts;
    long long sh0, co0, kr0;
    int a, b, c, mport;
    char *got, *body;

    mport = h_free_port();
    ck_assert(mport > 0);
    opts.metrics_port = mport;
    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &opts);
    a = expect_connect(0);
    b = expect_connect(0);
    c = expect_connect(0);
    sh0 = kt_stat(0, "shared_grants");
    co0 = kt_stat(0, "counted_grants");
    kr0 = kt_stat(0, "kind_refusals");
    ck_assert(sh0 == 0 && co0 == 0 && kr0 == 0);

    got = KT_GRANT(a, "LOCK s1 shared", "s1");
    free(got);
    got = KT_GRANT(b, "LOCK s1 shared", "s1");
    free(got);
    got = KT_GRANT(a, "LOCK s1 shared", "s1");      /* re-entry: not a grant */
    free(got);
    got = KT_GRANT(a, "LOCK c1 limit=2", "c1");
    free(got);
    got = KT_GRANT(a, "LOCK c1 limit=2", "c1");     /* re-entry */
    free(got);
    ck_assert_int_eq(kt_stat(0, "shared_grants"), 2);
    ck_assert_int_eq(kt_stat(0, "counted_grants"), 1);
    ck_assert_int_eq(kt_stat(0, "kind_refusals"), 0);

    /* Refusals: two found here, one by the masters (a lease leaves no state here). */
    EXPECT_REPLY(b, "LOCK c1", "ERR KIND c1 is held with limit=2");
    EXPECT_REPLY(c, "LOCK s1 limit=2", "ERR KIND s1 is held shared");
    got = KT_GRANT(b, "LOCK c2 limit=3 mode=lease ttl=20000", "c2");
    free(got);
    EXPECT_REPLY(a, "TRYLOCK c2 shared", "ERR KIND c2 is held with limit=3");
    /* Not kind refusals. */
    EXPECT_PREFIX(b, "LOCK c1 limit=0", "ERR PROTO ");
    EXPECT_PREFIX(b, "LOCK c1 shared limit=2", "ERR PROTO ");
    EXPECT_PREFIX(a, "LOCK c1 shared", "ERR PROTO this session holds c1");
    got = EXPECT_CMD(c, "TRYLOCK s1");
    EXPECT_IS(got, "BUSY", "s1");
    free(got);
    ck_assert_int_eq(kt_stat(0, "kind_refusals"), 3);
    ck_assert_int_eq(kt_stat(0, "counted_grants"), 2);
    ck_assert_int_eq(kt_stat(0, "shared_grants"), 2);

    /* A hand-over of a permit is a counted grant too. */
    got = KT_GRANT(b, "LOCK c1 limit=2", "c1");
    free(got);
    ck_assert_int_eq(h_send(c, "LOCK c1 limit=2 wait=10000"), 0);
    kt_wait_stat(0, "waiters", 1);
    EXPECT_REPLY(b, "UNLOCK c1", "OK c1 holds=0");
    got = EXPECT_READ(c, H_PROMPT_MS, "the waiter on c1");
    EXPECT_IS(got, "OK", "c1");
    free(got);
    kt_wait_stat(0, "counted_grants", 4);

    body = h_metrics_scrape(mport);
    ck_assert_msg(body != NULL, "GET /metrics failed");
    ck_assert_int_eq(h_metric_int(body, "redlockd_shared_grants_total"),
                     kt_stat(0, "shared_grants"));
    ck_assert_int_eq(h_metric_int(body, "redlockd_counted_grants_total"),
                     kt_stat(0, "counted_grants"));
    ck_assert_int_eq(h_metric_int(body, "redlockd_kind_refusals_total"), 3);
    free(body);
    close(a);
    close(b);
    close(c);
}
END_TEST

/* ---- the suite ---- */

/* Each test is a test case of its own (CK_RUN_CASE=<test> runs one). */
#define KT_ADD(s, test) expect_add_case((s), #test, (test), kt_teardown, TEST_TIMEOUT_S)

static Suite *
kinds_suite(void)
{
    Suite *s = suite_create("redlockd kinds");

    KT_ADD(s, counted_admits_limit);
    KT_ADD(s, counted_two_daemons);
    KT_ADD(s, kind_errors_local);
    KT_ADD(s, kind_max_limit_reload);
    KT_ADD(s, kind_errors_masters);
    KT_ADD(s, reentry_other_limit);
    KT_ADD(s, shared_together);
    KT_ADD(s, shared_fifo_one_daemon);
    KT_ADD(s, queue_order);
    KT_ADD(s, shared_gate_two_daemons);
    KT_ADD(s, shared_gate_writer_leaves);
    KT_ADD(s, shared_local_writer_not_overtaken);
    KT_ADD(s, kind_minority_only_refuses);
    KT_ADD(s, kind_garbage_limit_key);
    KT_ADD(s, lease_token_ops);
    KT_ADD(s, fences);
    KT_ADD(s, permit_gone_lost);
    KT_ADD(s, shared_gone_lost);
    KT_ADD(s, stale_limit_marker);
    KT_ADD(s, kinds_renewed_restored);
    KT_ADD(s, ctl_limit);
    KT_ADD(s, ctl_shared);
    KT_ADD(s, stats_counters);
    return s;
}

const struct runner runner_main = { "check_kinds", kinds_suite, h_suite_init, h_suite_cleanup };
