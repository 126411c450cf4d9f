/*
 * check_cluster.c: several redlockd daemons sharing one set of masters.
 *
 * Every test starts real redis-server masters and one or two real
 * redlockd processes ($REDLOCKD_BIN, default ./build/redlockd) against
 * them (tests/harness.h), and talks to each daemon over TCP.  What is
 * tested is what shows with more than one holder on the same masters: a
 * waiter woken by another daemon's release (pub/sub), a waiter that does
 * not poll a foreign holder, a waiter that does not wait out the ttl of
 * records no single token holds on a quorum (contenders that split the
 * vote, leftovers of several holders: written on the masters by the
 * test, exclusive, counted and shared, each its own test case),
 * fairness across daemons, fencing tokens that keep increasing
 * whichever daemon grants and whichever masters are up, and leases that
 * any daemon can extend or release.  A first test case checks the
 * harness features these tests rely on (several daemons, persistent
 * masters, PUBSUB NUMSUB, command counts).
 *
 * Check runs each test in a forked process; the checked teardown stops
 * everything when a test passes, and the harness cleans up (and prints
 * every daemon's log) after a test that failed.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <hiredis/hiredis.h>

#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5       /* masters per test */
#define QUORUM          3       /* NMASTERS / 2 + 1 */
#define NDAEMONS        2       /* daemons A (0) and B (1) */
#define PREFIX          "redlock:"  /* lock.key_prefix of every daemon */
#define RELEASED        " released" /* release channel: key + this (PROTOCOL.md section 9) */
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define UP_MS           20000   /* a restarted master reconnects within this (backoff <= 5 s) */
#define HARNESS_TIMEOUT_S 30    /* per harness self-test */
#define CLUSTER_TIMEOUT_S 120   /* per cluster test (test 5 restarts masters 20 times) */
#define TOKEN_LEN       32      /* owner token: lowercase hex digits */

/* Every daemon: a blocked LOCK retries after 0..100 ms; keys as in the spec. */
static const struct h_daemon_opts cl_opts = {
    .retry_delay_ms = 100,
    .key_prefix = PREFIX,
};

/* ---- assertions that keep the caller's line number ---- */

/* ---- fixture ---- */

/*
 * Start of a test: a directory named for the test, n masters (with
 * append-only files when aof), and ndaemons daemons with opts (cl_opts
 * when NULL).  Daemon 0 is current afterwards.
 */
static void
cl_up(size_t nmasters, bool aof, size_t ndaemons, const struct h_daemon_opts *opts)
{
    size_t i;

    ck_assert_msg(h_begin(tcase_name()) == 0, "cannot create the test directory");
    ck_assert_msg((aof ? h_start_masters_aof(nmasters) : h_start_masters(nmasters)) == 0,
                  "the masters did not start");
    for (i = 0; i < ndaemons; i++) {
        ck_assert_msg(h_start_daemon(opts != NULL ? opts : &cl_opts) == 0,
                      "redlockd %zu did not start (log above)", i);
    }
    if (ndaemons > 0) {
        h_use_daemon(0);
    }
}

static void
cl_teardown(void)
{
    h_end();
}

/* STATS counter name of daemon d over a connection of its own; -1 if absent. */
static long long
cl_stat(size_t d, const char *name)
{
    long long v;

    h_use_daemon(d);
    return h_stat_once(name, &v) == 0 ? v : -1;
}

/* Sum of EVALSHA and EVAL calls on master i (the daemon's rounds), or -1. */
static long long
cl_script_calls(size_t i)
{
    long long sha = h_master_calls(i, "evalsha"), eval = h_master_calls(i, "eval");

    return sha < 0 || eval < 0 ? -1 : sha + eval;
}

/* ---- conditions for h_wait_until / h_holds_for ---- */

/* Subscribers of a channel on every master. */
struct numsub_want {
    const char *channel;            /* channel: PREFIX + name + RELEASED */
    long long   want;               /* subscribers expected on each master */
    long long   seen[NMASTERS];     /* last counts, -1 when not asked */
};

static bool
cond_numsub(void *arg)
{
    struct numsub_want *w = arg;
    bool ok = true;
    size_t i;

    for (i = 0; i < NMASTERS; i++) {
        w->seen[i] = h_master_numsub(i, w->channel);
        ok = ok && w->seen[i] == w->want;
    }
    return ok;
}

/* arg: the channel.  Nobody subscribes to it on master 0. */
static bool
cond_no_subscriber_on_0(void *arg)
{
    return h_master_numsub(0, arg) == 0;
}

/* arg: const char **key.  The key is absent from every master. */
static bool
cond_key_gone(void *arg)
{
    return h_masters_without(*(const char **)arg) == NMASTERS;
}

/* A key holding a token on at least a quorum of masters. */
struct key_token {
    const char *key;                /* key on the masters */
    const char *token;              /* expected value */
};

static bool
cond_token_on_quorum(void *arg)
{
    struct key_token *kt = arg;

    return h_masters_holding(kt->key, kt->token) >= QUORUM;
}

/* arg: unused.  Every daemon sees every master up. */
static bool
cond_all_masters_up(void *arg)
{
    size_t d;

    (void)arg;
    for (d = 0; d < h_daemon_count(); d++) {
        if (cl_stat(d, "masters_up") != NMASTERS) {
            return false;
        }
    }
    return true;
}

/* ---- harness self-tests (these pass against today's daemon) ---- */

/*
 * Two daemons on the same masters: separate files, ports and processes;
 * a lock taken through one is busy through the other; h_use_daemon
 * chooses what the accessors act on; stopping one leaves the other.
 */
START_TEST(harness_two_daemons)
{
    const char *key = PREFIX "hz";
    pid_t pid0, pid1;
    int port0, port1, a, b, i;
    char *got;

    cl_up(NMASTERS, false, NDAEMONS, NULL);
    ck_assert_uint_eq(h_daemon_count(), NDAEMONS);
    ck_assert_uint_eq(h_current_daemon(), 0);
    pid0 = h_daemon_pid();
    port0 = h_daemon_port();
    ck_assert_msg(strstr(h_daemon_log_path(), "/redlockd.log") != NULL, "daemon 0 log %s",
                  h_daemon_log_path());
    ck_assert_msg(strstr(h_daemon_unix_path(), "/redlockd.sock") != NULL, "daemon 0 socket %s",
                  h_daemon_unix_path());
    h_use_daemon(1);
    pid1 = h_daemon_pid();
    port1 = h_daemon_port();
    ck_assert_msg(strstr(h_daemon_log_path(), "/redlockd-1.log") != NULL, "daemon 1 log %s",
                  h_daemon_log_path());
    ck_assert_msg(strstr(h_daemon_unix_path(), "/redlockd-1.sock") != NULL, "daemon 1 socket %s",
                  h_daemon_unix_path());
    ck_assert_msg(pid0 > 0 && pid1 > 0 && pid0 != pid1, "pids %d and %d", (int)pid0, (int)pid1);
    ck_assert_msg(port0 > 0 && port1 > 0 && port0 != port1, "ports %d and %d", port0, port1);

    /* Same masters: A's lock is B's BUSY; the key carries the prefix. */
    a = expect_connect(0);
    b = expect_connect(1);
    EXPECT_PREFIX(a, "LOCK hz", "OK hz validity=");
    ck_assert_msg(h_masters_holding(key, NULL) >= QUORUM, "key %s on %zu masters", key,
                  h_masters_holding(key, NULL));
    EXPECT_PREFIX(b, "TRYLOCK hz", "BUSY hz ttl=");
    EXPECT_REPLY(a, "UNLOCK hz", "OK hz holds=0");

    /* Grants alternating between the daemons (test 4 without fences). */
    for (i = 0; i < 50; i++) {
        int fd = i % 2 == 0 ? a : b;

        got = h_cmd(fd, "LOCK hz wait=10000", 12000);
        ck_assert_msg(h_is_reply(got, "OK", "hz"), "grant %d on daemon %d: '%s'", i, i % 2,
                      got != NULL ? got : "(nothing)");
        free(got);
        EXPECT_REPLY(fd, "UNLOCK hz", "OK hz holds=0");
    }
    close(a);
    close(b);

    /* Stopping the current daemon leaves the other running. */
    h_use_daemon(1);
    ck_assert_int_eq(h_stop_daemon(), 0);
    ck_assert_int_eq(h_daemon_pid(), 0);
    ck_assert_int_eq(h_stop_daemon(), H_NO_DAEMON);
    h_use_daemon(0);
    ck_assert_int_eq(h_daemon_pid(), pid0);
    a = expect_connect(0);
    EXPECT_REPLY(a, "PING", "PONG");
    close(a);
}
END_TEST

/*
 * A master from h_start_masters_aof() comes back from SIGKILL with its
 * keys and their expiry times; PUBSUB NUMSUB and INFO commandstats
 * through the harness see a subscriber and count commands.
 */
START_TEST(harness_aof_restart_keeps_data)
{
    struct timeval tv = { 1, 0 };
    redisContext *sub;
    redisReply *r;
    long long pttl, sets;
    char *v;
    size_t i;

    ck_assert(h_begin(tcase_name()) == 0);
    ck_assert(h_start_masters_aof(2) == 0);
    sets = h_master_calls(0, "set");
    ck_assert_msg(sets >= 0, "INFO commandstats failed");
    for (i = 0; i < 2; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET %s %s", "kept", "v1"), 0);
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET %s %s PX %d", "expiring", "v2", 60000), 0);
    }
    ck_assert_int_eq(h_master_calls(0, "set"), sets + 2);
    for (i = 0; i < 2; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
        ck_assert(!h_master_alive(i));
        ck_assert_msg(h_restart_master(i) == 0, "master %zu did not restart", i);
        v = h_master_get(i, "kept");
        ck_assert_msg(v != NULL && strcmp(v, "v1") == 0, "master %zu after restart: kept='%s'",
                      i, v != NULL ? v : "(no key)");
        free(v);
        pttl = h_master_pttl(i, "expiring");
        ck_assert_msg(pttl > 0 && pttl <= 60000, "master %zu after restart: PTTL expiring %lld",
                      i, pttl);
    }

    /* NUMSUB: 0, then 1 while a client subscribes, then 0 again. */
    ck_assert_int_eq(h_master_numsub(0, "chan"), 0);
    sub = redisConnectWithTimeout("127.0.0.1", h_master_port(0), tv);
    ck_assert(sub != NULL && sub->err == 0);
    r = redisCommand(sub, "SUBSCRIBE chan");
    ck_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    ck_assert_int_eq(h_master_numsub(0, "chan"), 1);
    redisFree(sub);
    /* The server notices the closed connection a moment later. */
    ck_assert_msg(h_wait_until(cond_no_subscriber_on_0, "chan", 2000),
                  "PUBSUB NUMSUB chan is %lld after the subscriber left",
                  h_master_numsub(0, "chan"));
    ck_assert_int_eq(h_master_numsub(5, "chan"), -1);
}
END_TEST

/* A master from plain h_start_masters() comes back empty, as before. */
START_TEST(harness_plain_restart_is_empty)
{
    char *v;

    ck_assert(h_begin(tcase_name()) == 0);
    ck_assert(h_start_masters(1) == 0);
    ck_assert_int_eq(h_master_cmd(0, NULL, "SET %s %s", "gone", "v"), 0);
    ck_assert_int_eq(h_kill_master(0), 0);
    ck_assert(h_restart_master(0) == 0);
    v = h_master_get(0, "gone");
    ck_assert_msg(v == NULL, "key 'gone' survived a restart without persistence: '%s'", v);
}
END_TEST

/* ---- cluster tests ---- */

/*
 * 1. A release through daemon A wakes a waiter of daemon B at once,
 * through pub/sub, long before the holder's 30 s ttl would have let B's
 * fallback retry in: B subscribes to the name's release channel on
 * every master while it has a waiter, and unsubscribes when it has none
 * left.
 */
/* Calls of a command on master i (INFO commandstats); -1 when unknown. */
static long long
cl_master_calls(size_t i, const char *cmd)
{
    struct redisContext *c = h_redis_connect(h_master_port(i));
    redisReply *r;
    long long calls = -1;
    char pat[64];
    const char *p;

    if (c == NULL) {
        return -1;
    }
    r = redisCommand(c, "INFO commandstats");
    snprintf(pat, sizeof(pat), "cmdstat_%s:calls=", cmd);
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        p = strstr(r->str, pat);
        calls = p != NULL ? strtoll(p + strlen(pat), NULL, 10) : 0;
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    redisFree(c);
    return calls;
}

/* arg: long long[2]: SUBSCRIBE calls on master 0 to reach [0]; [1] the last seen. */
static bool
cond_subscribes(void *arg)
{
    long long *want = arg;

    want[1] = cl_master_calls(0, "subscribe");
    return want[1] >= want[0];
}

/*
 * 1b. A LOCK that finds the name free asks the masters once and does not
 * subscribe to its release channel (that would double the masters' work
 * of every uncontended lock).  A LOCK that must wait subscribes once,
 * and leaves when nobody waits any more.
 */
START_TEST(subscribe_only_to_wait)
{
    struct numsub_want sub = { PREFIX "w" RELEASED, 1, { 0 } };
    long long before, after, want[2];
    char cmd[64], *got;
    int a, b, i;

    cl_up(NMASTERS, false, 1, NULL);
    a = expect_connect(0);
    b = expect_connect(0);
    before = cl_master_calls(0, "subscribe");
    ck_assert_msg(before >= 1, "INFO commandstats on master 0: subscribe calls %lld", before);
    for (i = 0; i < 20; i++) {
        snprintf(cmd, sizeof(cmd), "LOCK free%d", i);
        EXPECT_PREFIX(a, cmd, "OK free");
        snprintf(cmd, sizeof(cmd), "UNLOCK free%d", i);
        EXPECT_PREFIX(a, cmd, "OK free");
    }
    after = cl_master_calls(0, "subscribe");
    ck_assert_msg(after == before, "20 uncontended LOCKs made %lld SUBSCRIBE calls on master 0",
                  after - before);
    ck_assert_int_eq(cl_master_calls(0, "unsubscribe"), 0);

    /* b waits behind a: one subscription, then a hand-over, then none. */
    EXPECT_PREFIX(a, "LOCK w", "OK w validity=");
    ck_assert_int_eq(h_send(b, "LOCK w wait=10000"), 0);
    ck_assert_msg(h_wait_until(cond_numsub, &sub, 5000),
                  "PUBSUB NUMSUB %s: %lld %lld %lld %lld %lld, expected 1 each while b waits",
                  sub.channel, sub.seen[0], sub.seen[1], sub.seen[2], sub.seen[3], sub.seen[4]);
    want[0] = before + 1;
    ck_assert_msg(h_wait_until(cond_subscribes, want, 2000) && want[1] == before + 1,
                  "SUBSCRIBE calls on master 0: %lld, expected %lld", want[1], before + 1);
    EXPECT_REPLY(a, "UNLOCK w", "OK w holds=0");
    got = h_read_line(b, 5000);
    ck_assert_msg(got != NULL && strncmp(got, "OK w validity=", 14) == 0,
                  "b's LOCK w answered '%s' after a's UNLOCK", got != NULL ? got : "(nothing)");
    free(got);
    sub.want = 0;
    ck_assert_msg(h_wait_until(cond_numsub, &sub, 5000),
                  "PUBSUB NUMSUB %s still %lld on master 0 with no waiter left", sub.channel,
                  sub.seen[0]);
    EXPECT_REPLY(b, "UNLOCK w", "OK w holds=0");
    close(a);
    close(b);
}
END_TEST

/* arg: the key.  Master 0 holds it: it ran every request sent to it before. */
static bool
cond_master0_has(void *arg)
{
    return h_master_pttl(0, arg) > 0;
}

/*
 * A hand-over is one script call per master: no release of the old token
 * follows it where the swap ran, or is still on its way (a connection
 * keeps its order).  Counted with EXISTS, which such a release of a
 * token that is gone runs and the swap and a free grant do not, with
 * a grant of another name behind each step as a barrier: once master 0
 * holds it, it ran everything sent to it before.
 */
START_TEST(handover_one_call)
{
    struct numsub_want sub = { PREFIX "h" RELEASED, 1, { 0 } };
    long long before, after;
    char *got;
    int a, b;

    cl_up(NMASTERS, false, 1, NULL);
    a = expect_connect(0);
    b = expect_connect(0);
    EXPECT_PREFIX(a, "LOCK h", "OK h validity=");
    ck_assert_int_eq(h_send(b, "LOCK h wait=10000"), 0);
    ck_assert_msg(h_wait_until(cond_numsub, &sub, 5000), "b never subscribed to wait for h");
    EXPECT_PREFIX(a, "LOCK y", "OK y validity=");
    ck_assert_msg(h_wait_until(cond_master0_has, PREFIX "y", 5000), "master 0 never got y");
    before = cl_master_calls(0, "exists");
    EXPECT_REPLY(a, "UNLOCK h", "OK h holds=0");
    got = h_read_line(b, 5000);
    ck_assert_msg(got != NULL && strncmp(got, "OK h validity=", 14) == 0,
                  "b's LOCK h answered '%s' after a's UNLOCK", got != NULL ? got : "(nothing)");
    free(got);
    EXPECT_PREFIX(a, "LOCK z", "OK z validity=");
    ck_assert_msg(h_wait_until(cond_master0_has, PREFIX "z", 5000), "master 0 never got z");
    after = cl_master_calls(0, "exists");
    ck_assert_msg(after == before, "the hand-over ran %lld EXISTS on master 0: a release of "
                  "the old token followed the swap", after - before);
    ck_assert_int_eq(h_masters_holding(PREFIX "h", NULL), NMASTERS);
    close(a);
    close(b);
}
END_TEST

/*
 * Tokens of the requests in MONITOR's lines on c up to (not including)
 * the first line that names stop: each quoted 32-digit lowercase hex
 * string, at most max of them, distinct.  Returns how many.
 */
static size_t
cl_monitor_tokens(redisContext *c, const char *stop, char (*out)[TOKEN_LEN + 1], size_t max)
{
    redisReply *r;
    size_t n = 0, i, k;
    const char *p;

    for (;;) {
        ck_assert_msg(redisGetReply(c, (void **)&r) == REDIS_OK && r != NULL
                      && r->type == REDIS_REPLY_STATUS,
                      "MONITOR on master 0 stopped: %s", c->errstr);
        if (strstr(r->str, stop) != NULL) {
            freeReplyObject(r);
            return n;
        }
        for (p = r->str; (p = strchr(p, '"')) != NULL; p++) {
            for (k = 0; k < TOKEN_LEN && isxdigit((unsigned char)p[1 + k])
                        && !isupper((unsigned char)p[1 + k]); k++) {
            }
            if (k != TOKEN_LEN || p[1 + k] != '"') {
                continue;
            }
            for (i = 0; i < n && strncmp(out[i], p + 1, TOKEN_LEN) != 0; i++) {
            }
            if (i == n && n < max) {
                memcpy(out[n], p + 1, TOKEN_LEN);
                out[n++][TOKEN_LEN] = '\0';
            }
            p += TOKEN_LEN + 1;
        }
        freeReplyObject(r);
    }
}

/*
 * A release of a refused try's token may reach a master late: after a
 * new link's requests, or held up in the network.  The waiter's next
 * try must not reuse that token, or the late compare-and-delete
 * deletes its grant there behind the daemon's back.  b (daemon 1) is
 * refused once while a (daemon 0) holds t, so its clean-up release is
 * sent, then granted once a lets go; every token master 0 saw in b's
 * refused try is then released again on every master, as a late copy
 * would be, and the grant must still be on all five.
 */
START_TEST(retry_token_outlives_late_release)
{
    struct numsub_want sub = { PREFIX "t" RELEASED, 1, { 0 } };
    char seen[8][TOKEN_LEN + 1];
    redisContext *mon;
    redisReply *r;
    size_t n, i, m;
    char *granted;
    int a, b;

    cl_up(NMASTERS, false, NDAEMONS, NULL);
    a = expect_connect(0);
    b = expect_connect(1);
    EXPECT_PREFIX(a, "LOCK t", "OK t validity=");
    mon = h_master_redis(0);
    ck_assert_msg(mon != NULL, "cannot connect to master 0");
    r = redisCommand(mon, "MONITOR");
    ck_assert_msg(r != NULL && r->type == REDIS_REPLY_STATUS, "MONITOR refused");
    freeReplyObject(r);
    ck_assert_int_eq(h_send(b, "LOCK t wait=10000"), 0);
    ck_assert_msg(h_wait_until(cond_numsub, &sub, 5000), "b never subscribed to wait for t");
    /* A barrier: once master 0 ran y's grant, it ran b's refused try and its release. */
    EXPECT_PREFIX(a, "LOCK y", "OK y validity=");
    n = cl_monitor_tokens(mon, "\"" PREFIX "y\"", seen, 8);
    redisFree(mon);
    ck_assert_msg(n >= 1, "master 0 saw no token of b's refused try");
    EXPECT_REPLY(a, "UNLOCK t", "OK t holds=0");
    granted = EXPECT_READ(b, 5000, "b's LOCK t after a's UNLOCK");
    ck_assert_msg(strncmp(granted, "OK t validity=", 14) == 0, "b's LOCK t answered '%s'",
                  granted);
    free(granted);
    granted = h_master_get(0, PREFIX "t");
    ck_assert_msg(granted != NULL, "master 0 does not hold b's grant of t");
    for (i = 0; i < n; i++) {
        for (m = 0; m < NMASTERS; m++) {
            ck_assert_int_eq(h_master_cmd(m, NULL, "EVAL %s 1 %s %s",
                                          "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                                          "return redis.call('DEL', KEYS[1]) end return 0",
                                          PREFIX "t", seen[i]), 0);
        }
    }
    ck_assert_msg(h_masters_holding(PREFIX "t", granted) == NMASTERS,
                  "b's grant (token %s) is on %zu masters after late releases of its refused "
                  "try's tokens: a token was reused after its release was sent", granted,
                  h_masters_holding(PREFIX "t", granted));
    free(granted);
    close(a);
    close(b);
}
END_TEST

START_TEST(pubsub_wakes_other_daemon)
{
    struct numsub_want sub = { PREFIX "n" RELEASED, 1, { 0 } };
    long long holds = 0, wakeups, subs;
    int64_t t_unlock, waited;
    char *got;
    int a, b;

    cl_up(NMASTERS, false, NDAEMONS, NULL);
    a = expect_connect(0);
    b = expect_connect(1);
    EXPECT_PREFIX(a, "LOCK n ttl=30000", "OK n validity=");
    ck_assert_int_eq(h_send(b, "LOCK n wait=10000"), 0);
    ck_assert_msg(h_wait_until(cond_numsub, &sub, 5000),
                  "PUBSUB NUMSUB %s on the masters: %lld %lld %lld %lld %lld, expected 1 each "
                  "(daemon B subscribed for its waiter)", sub.channel, sub.seen[0], sub.seen[1],
                  sub.seen[2], sub.seen[3], sub.seen[4]);
    ck_assert_msg(h_quiet(b, 100), "B's LOCK n was answered while A holds n");
    subs = cl_stat(1, "subscriptions");
    ck_assert_msg(subs == 1, "B's STATS subscriptions is %lld while it waits for n", subs);

    t_unlock = h_now_ms();
    EXPECT_REPLY(a, "UNLOCK n", "OK n holds=0");
    got = h_read_line(b, 12000);
    waited = h_now_ms() - t_unlock;
    ck_assert_msg(h_is_reply(got, "OK", "n") && h_reply_int(got, "holds", &holds) && holds == 1,
                  "B's LOCK n wait=10000 answered '%s' %lld ms after A's UNLOCK, expected "
                  "'OK n validity=N holds=1' (the holder's ttl was 30 s)",
                  got != NULL ? got : "(nothing)", (long long)waited);
    free(got);
    fprintf(stderr, "pubsub_wakes_other_daemon: B got n %lld ms after A's UNLOCK\n",
            (long long)waited);
    wakeups = cl_stat(1, "pubsub_wakeups");
    ck_assert_msg(wakeups >= 1, "B's STATS pubsub_wakeups is %lld, expected >= 1", wakeups);

    /* B's waiter became a holder: nobody waits, B leaves the channel. */
    sub.want = 0;
    ck_assert_msg(h_wait_until(cond_numsub, &sub, 5000),
                  "PUBSUB NUMSUB %s still %lld %lld %lld %lld %lld with no waiter left",
                  sub.channel, sub.seen[0], sub.seen[1], sub.seen[2], sub.seen[3], sub.seen[4]);
    subs = cl_stat(1, "subscriptions");
    ck_assert_msg(subs == 0, "B's STATS subscriptions is %lld with no waiter left", subs);
    EXPECT_REPLY(b, "UNLOCK n", "OK n holds=0");
    close(a);
    close(b);
}
END_TEST

/*
 * Each master's copy of a release announcement counts.  The masters run
 * a release and another daemon's try in any order, so a try woken by the
 * first copy can reach a master that has not released yet and come back
 * BUSY; the later copies (the same token) must wake it again, not be
 * dropped as duplicates, or the waiter sleeps until the holder's ttl.
 * Here the early copy is published by hand on master 0 while A still
 * holds n (A's token, read from the masters): B tries, finds n busy and
 * falls back to A's ttl (30 s); then A's real UNLOCK announces the same
 * token on every master, and B must get n at once.
 */
START_TEST(pubsub_copies_after_busy)
{
    struct numsub_want sub = { PREFIX "c" RELEASED, 1, { 0 } };
    long long tries = 0, before;
    int64_t t_unlock;
    char *token, *got;
    int a, b;

    cl_up(NMASTERS, false, NDAEMONS, NULL);
    a = expect_connect(0);
    b = expect_connect(1);
    EXPECT_PREFIX(a, "LOCK c ttl=30000", "OK c validity=");
    ck_assert_int_eq(h_send(b, "LOCK c wait=10000"), 0);
    ck_assert_msg(h_wait_until(cond_numsub, &sub, 5000), "daemon B did not subscribe for c");
    token = h_master_get(0, PREFIX "c");
    ck_assert_msg(token != NULL && h_is_token(token), "no token for c on master 0");
    before = cl_stat(1, "fallback_retries");
    ck_assert_int_eq(h_master_cmd(0, NULL, "PUBLISH %s %s", PREFIX "c" RELEASED, token), 0);
    /* B tried on the early copy and found c busy: its pubsub wake-up is counted. */
    h_use_daemon(1);
    ck_assert_msg(h_wait_stat("pubsub_wakeups", 1, true, 3000, &tries),
                  "daemon B did not act on the announcement (pubsub_wakeups %lld)", tries);
    ck_assert_msg(h_quiet(b, 300), "B's LOCK c was answered while A holds c");
    t_unlock = h_now_ms();
    EXPECT_REPLY(a, "UNLOCK c", "OK c holds=0");
    got = h_read_line(b, 12000);
    ck_assert_msg(h_is_reply(got, "OK", "c"),
                  "B's LOCK c answered '%s' %lld ms after A's UNLOCK (copies of an announcement "
                  "already heard were dropped?)", got != NULL ? got : "(nothing)",
                  (long long)(h_now_ms() - t_unlock));
    ck_assert_msg(h_now_ms() - t_unlock < 2000, "B got c only %lld ms after A's UNLOCK",
                  (long long)(h_now_ms() - t_unlock));
    ck_assert_int_eq(cl_stat(1, "fallback_retries"), before);
    free(got);
    free(token);
    EXPECT_REPLY(b, "UNLOCK c", "OK c holds=0");
    close(a);
    close(b);
}
END_TEST

#define FOREIGN_TOKEN   "0123456789abcdef0123456789abcdef"
#define FOREIGN_TTL     1500    /* ms: the foreign holder's lease */
#define POLL_CALLS_MAX  5       /* scripts per master for one acquisition */

/*
 * 2. A holder that is not a redlockd session (nothing will PUBLISH when
 * its key expires): the waiter retries once at the holder's remaining
 * ttl instead of polling.  The daemon runs with retry_delay_ms 50, so a
 * client that polled every retry delay would call the masters ~30 times
 * in those 1.5 s; a fallback retry needs a handful (the first attempt,
 * perhaps a clean-up, the retry, perhaps one more when it lands a
 * millisecond early).
 */
START_TEST(fallback_after_expiry)
{
    struct h_daemon_opts opts = cl_opts;
    long long before[NMASTERS], calls, most = 0, retries;
    int64_t t_set, waited;
    size_t i, worst = 0;
    char *got;
    int a;

    opts.retry_delay_ms = 50;
    cl_up(NMASTERS, false, 1, &opts);
    a = expect_connect(0);
    for (i = 0; i < NMASTERS; i++) {
        before[i] = cl_script_calls(i);
        ck_assert_msg(before[i] >= 0, "INFO commandstats failed on master %zu", i);
    }
    t_set = h_now_ms();
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET %s %s PX %d", PREFIX "f", FOREIGN_TOKEN,
                                      FOREIGN_TTL), 0);
    }
    /*
     * ttl=6000, not less: the first renewal (at ttl/3) must come after
     * the commandstats below are read, even on a slow machine.
     */
    got = h_cmd(a, "LOCK f wait=8000 ttl=6000", 10000);
    waited = h_now_ms() - t_set;
    for (i = 0; i < NMASTERS; i++) {
        calls = cl_script_calls(i) - before[i];
        if (calls > most) {
            most = calls;
            worst = i;
        }
    }
    ck_assert_msg(h_is_reply(got, "OK", "f"),
                  "LOCK f wait=8000 answered '%s' after %lld ms, expected 'OK f ...' once "
                  "the foreign key expired", got != NULL ? got : "(nothing)", (long long)waited);
    free(got);
    fprintf(stderr, "fallback_after_expiry: OK after %lld ms, at most %lld scripts per master\n",
            (long long)waited, most);
    ck_assert_msg(waited >= FOREIGN_TTL - 50,
                  "LOCK f granted %lld ms after the foreign SET PX %d", (long long)waited,
                  FOREIGN_TTL);
    ck_assert_msg(most <= POLL_CALLS_MAX,
                  "master %zu ran %lld scripts for one acquisition, expected <= %d: the "
                  "waiter polled instead of retrying at the holder's ttl", worst, most,
                  POLL_CALLS_MAX);
    retries = cl_stat(0, "fallback_retries");
    ck_assert_msg(retries >= 1, "STATS fallback_retries is %lld, expected >= 1", retries);
    EXPECT_REPLY(a, "UNLOCK f", "OK f holds=0");
    close(a);
}
END_TEST

#define FAIR_SESSIONS   20      /* 10 on each daemon */
#define FAIR_MS         5000

/*
 * 3. Fairness across daemons: 20 sessions, 10 on each daemon, loop
 * LOCK/UNLOCK on one name for 5 s.  Hand-over within a daemon must not
 * starve the other daemon's waiters: no session gets less than half the
 * mean.
 */
START_TEST(fairness_two_daemons)
{
    struct pollfd pfd[FAIR_SESSIONS];
    long count[FAIR_SESSIONS] = { 0 }, per_daemon[NDAEMONS] = { 0 };
    bool locked[FAIR_SESSIONS] = { false };
    long total = 0, mean, min_c = -1, max_c = 0;
    int64_t end;
    char *got;
    int i;

    cl_up(NMASTERS, false, NDAEMONS, NULL);
    for (i = 0; i < FAIR_SESSIONS; i++) {
        pfd[i].fd = expect_connect((size_t)(i % NDAEMONS));
        pfd[i].events = POLLIN;
    }
    for (i = 0; i < FAIR_SESSIONS; i++) {
        ck_assert_int_eq(h_send(pfd[i].fd, "LOCK x ttl=2000 wait=inf"), 0);
    }
    /* One thread, poll with a timeout: nothing can stay blocked. */
    end = h_now_ms() + FAIR_MS;
    while (h_now_ms() < end) {
        ck_assert_int_ge(poll(pfd, FAIR_SESSIONS, 100), 0);
        for (i = 0; i < FAIR_SESSIONS; i++) {
            if (!(pfd[i].revents & POLLIN)) {
                continue;
            }
            got = h_read_line(pfd[i].fd, CMD_MS);
            ck_assert_msg(got != NULL, "session %d (daemon %d): no reply", i, i % NDAEMONS);
            if (!locked[i]) {
                ck_assert_msg(h_is_reply(got, "OK", "x"), "session %d (daemon %d) LOCK: '%s'",
                              i, i % NDAEMONS, got);
                locked[i] = true;
                count[i]++;
                ck_assert_int_eq(h_send(pfd[i].fd, "UNLOCK x"), 0);
            } else {
                ck_assert_msg(strcmp(got, "OK x holds=0") == 0,
                              "session %d (daemon %d) UNLOCK: '%s'", i, i % NDAEMONS, got);
                locked[i] = false;
                ck_assert_int_eq(h_send(pfd[i].fd, "LOCK x ttl=2000 wait=inf"), 0);
            }
            free(got);
        }
    }
    /* Closing cancels the pending LOCKs and releases a held x. */
    for (i = 0; i < FAIR_SESSIONS; i++) {
        close(pfd[i].fd);
        total += count[i];
        per_daemon[i % NDAEMONS] += count[i];
        min_c = min_c < 0 || count[i] < min_c ? count[i] : min_c;
        max_c = count[i] > max_c ? count[i] : max_c;
    }
    mean = total / FAIR_SESSIONS;
    fprintf(stderr, "fairness_two_daemons: %ld grants in %d ms (daemon A %ld, B %ld), "
            "per session min %ld mean %ld max %ld:", total, FAIR_MS, per_daemon[0],
            per_daemon[1], min_c, mean, max_c);
    for (i = 0; i < FAIR_SESSIONS; i++) {
        fprintf(stderr, " %c%ld", i % NDAEMONS == 0 ? 'A' : 'B', count[i]);
    }
    fprintf(stderr, "\n");
    ck_assert_msg(mean > 0, "no grants at all");
    ck_assert_msg(min_c * 2 >= mean, "a session got %ld grants, less than half the mean %ld "
                  "(daemon A %ld, daemon B %ld in all)", min_c, mean, per_daemon[0],
                  per_daemon[1]);
}
END_TEST

/*
 * Send "LOCK <name> fence wait=10000" on fd and return N from the
 * reply's fence=N; fails the test on any other reply.  ERR NOQUORUM is
 * retried until noquorum_ms has passed (a daemon may not have noticed
 * yet that masters died or came back).
 */
static long long
fenced_lock(int fd, const char *name, int64_t noquorum_ms, const char *what)
{
    int64_t deadline = h_now_ms() + noquorum_ms;
    char line[300], *got;
    long long fence = -1;

    snprintf(line, sizeof(line), "LOCK %s fence wait=10000", name);
    for (;;) {
        got = h_cmd(fd, line, 12000);
        if (got == NULL || strncmp(got, "ERR NOQUORUM ", 13) != 0 || h_now_ms() >= deadline) {
            break;
        }
        free(got);
        /* Pacing the retries, not waiting for anything in particular. */
        h_sleep_ms(100);
    }
    ck_assert_msg(h_is_reply(got, "OK", name) && h_reply_int(got, "fence", &fence) && fence >= 0,
                  "%s: '%s' answered '%s', expected 'OK %s ... fence=N'", what, line,
                  got != NULL ? got : "(nothing)", name);
    free(got);
    return fence;
}

#define FENCE_GRANTS    200

/*
 * 4. Fence tokens strictly increase over 200 grants of one name that
 * alternate between two daemons: the counter lives on the masters, not
 * in a daemon.
 */
START_TEST(fence_increases_two_daemons)
{
    long long fence, last = LLONG_MIN, fenced[NDAEMONS];
    char what[64];
    int fd[NDAEMONS], i, d;

    cl_up(NMASTERS, false, NDAEMONS, NULL);
    for (d = 0; d < NDAEMONS; d++) {
        fd[d] = expect_connect((size_t)d);
    }
    for (i = 0; i < FENCE_GRANTS; i++) {
        d = i % NDAEMONS;
        snprintf(what, sizeof(what), "grant %d on daemon %d", i, d);
        fence = fenced_lock(fd[d], "fz", 0, what);
        ck_assert_msg(fence > last, "%s: fence=%lld after fence=%lld", what, fence, last);
        last = fence;
        EXPECT_REPLY(fd[d], "UNLOCK fz", "OK fz holds=0");
    }
    for (d = 0; d < NDAEMONS; d++) {
        fenced[d] = cl_stat((size_t)d, "fenced_grants");
        ck_assert_msg(fenced[d] >= FENCE_GRANTS / NDAEMONS,
                      "daemon %d: STATS fenced_grants %lld, expected >= %d", d, fenced[d],
                      FENCE_GRANTS / NDAEMONS);
        close(fd[d]);
    }
}
END_TEST

/*
 * 5. Fence tokens strictly increase while the majority that grants
 * changes.  Two masters are down for each grant, a different pair each
 * time, and come back (with their data: append-only files) before the
 * next.  The down sets {3,4} {2,4} {2,3} {1,4} {0,1} are the case where
 * a daemon that only incremented a counter on the masters it reached
 * and answered their maximum goes backwards: the counters (masters 0..4)
 * become 1 1 1 0 0, 2 2 1 1 0, 3 3 1 1 1, 4 3 2 2 1, and the fifth
 * grant, through masters 2, 3 and 4, which each missed increments,
 * answers 3 after 4.  Writing the maximum back to the majority at each
 * grant keeps the latest value on a majority, and any later majority
 * includes one of those masters.  The masters keep their data across
 * the restarts (append-only files), as docs/production.md requires.
 */
START_TEST(fence_increases_changing_majorities)
{
    static const size_t down[][2] = { { 3, 4 }, { 2, 4 }, { 2, 3 }, { 1, 4 }, { 0, 1 } };
    const size_t nsets = sizeof(down) / sizeof(down[0]);
    long long fence, last = LLONG_MIN;
    char what[96], seq[256] = "";
    size_t step, k, d, len;
    int fd[NDAEMONS];

    cl_up(NMASTERS, true, NDAEMONS, NULL);
    for (d = 0; d < NDAEMONS; d++) {
        fd[d] = expect_connect(d);
    }
    /* The list twice: the second pass starts from counters that differ. */
    for (step = 0; step < 2 * nsets; step++) {
        const size_t *set = down[step % nsets];

        d = step % NDAEMONS;
        for (k = 0; k < 2; k++) {
            ck_assert_int_eq(h_kill_master(set[k]), 0);
        }
        snprintf(what, sizeof(what), "grant %zu on daemon %zu, masters %zu and %zu down",
                 step, d, set[0], set[1]);
        fence = fenced_lock(fd[d], "fm", 5000, what);
        len = strlen(seq);
        snprintf(seq + len, sizeof(seq) - len, " %lld", fence);
        ck_assert_msg(fence > last, "%s: fence=%lld after fence=%lld (fences:%s)", what, fence,
                      last, seq);
        last = fence;
        EXPECT_REPLY(fd[d], "UNLOCK fm", "OK fm holds=0");
        for (k = 0; k < 2; k++) {
            ck_assert_msg(h_restart_master(set[k]) == 0, "master %zu did not restart", set[k]);
        }
        ck_assert_msg(h_wait_until(cond_all_masters_up, NULL, UP_MS),
                      "%s: STATS masters_up is %lld on A and %lld on B %d ms after the "
                      "restart, expected %d", what, cl_stat(0, "masters_up"),
                      cl_stat(1, "masters_up"), UP_MS, NMASTERS);
    }
    fprintf(stderr, "fence_increases_changing_majorities: fences%s\n", seq);
    for (d = 0; d < NDAEMONS; d++) {
        close(fd[d]);
    }
}
END_TEST

#define WRONG_TOKEN     "ffffffffffffffffffffffffffffffff"

/*
 * 6. A lease belongs to its token, not to a connection or a daemon: it
 * survives its connection's close; daemon B extends it and releases it
 * with the token; a wrong token releases nothing; a released lease
 * cannot be extended, and EXTEND never re-creates a key.
 */
START_TEST(lease_from_other_daemon)
{
    const char *key = PREFIX "l";
    char token[TOKEN_LEN + 8], line[160], *got;
    struct key_token kt = { key, token };
    long long pttl;
    size_t i, extended = 0;
    int a, b;

    cl_up(NMASTERS, false, NDAEMONS, NULL);
    a = expect_connect(0);
    got = h_cmd(a, "LOCK l mode=lease ttl=5000", CMD_MS);
    ck_assert_msg(h_is_reply(got, "OK", "l") && h_reply_field(got, "token", token, sizeof(token))
                  && h_is_token(token),
                  "LOCK l mode=lease ttl=5000 answered '%s', expected 'OK l token=<32 hex> "
                  "validity=N'", got != NULL ? got : "(nothing)");
    free(got);
    close(a);
    /* A session lock would be gone within 200 ms of the close. */
    ck_assert_msg(h_holds_for(cond_token_on_quorum, &kt, 500, 50),
                  "the lease's token is on %zu masters only after its connection closed",
                  h_masters_holding(key, token));

    b = expect_connect(1);
    snprintf(line, sizeof(line), "EXTEND l token=%s ttl=8000", token);
    EXPECT_PREFIX(b, line, "OK l validity=");
    for (i = 0; i < NMASTERS; i++) {
        char *v = h_master_get(i, key);

        pttl = h_master_pttl(i, key);
        if (v != NULL && strcmp(v, token) == 0 && pttl > 5000) {
            extended++;
        }
        free(v);
    }
    ck_assert_msg(extended >= QUORUM, "EXTEND ttl=8000 through B: %zu masters hold the token "
                  "with PTTL > 5000, expected >= %d", extended, QUORUM);

    snprintf(line, sizeof(line), "UNLOCK l token=%s", WRONG_TOKEN);
    EXPECT_REPLY(b, line, "NOTHELD l");
    ck_assert_msg(cond_token_on_quorum(&kt), "UNLOCK with a wrong token: the lease is on %zu "
                  "masters only", h_masters_holding(key, token));

    snprintf(line, sizeof(line), "UNLOCK l token=%s", token);
    EXPECT_REPLY(b, line, "OK l");
    ck_assert_msg(h_wait_until(cond_key_gone, &key, 1000),
                  "key %s still on %zu masters after UNLOCK with its token", key,
                  NMASTERS - h_masters_without(key));

    snprintf(line, sizeof(line), "EXTEND l token=%s ttl=5000", token);
    EXPECT_REPLY(b, line, "NOTHELD l");
    ck_assert_msg(h_holds_for(cond_key_gone, &key, 300, 50),
                  "EXTEND of a released lease re-created %s on %zu masters", key,
                  NMASTERS - h_masters_without(key));
    close(b);
}
END_TEST

/* ---- waiting behind leftovers that split the vote ---- */

#define SPLIT_TTL       4000    /* ms: PX of every leftover record */
#define SPLIT_LIMIT     2       /* limit of the counted name */
#define SPLIT_SLACK_MS  1000    /* a loaded machine's delay on top of one retry */
#define SPLIT_WAIT_MS   8000    /* wait= of the LOCK: longer than SPLIT_TTL */
#define SPLIT_TIMEOUT_S 30      /* per test */

/* The records the leftovers are (PROTOCOL.md section 9). */
enum split_records {
    SPLIT_EXCLUSIVE,            /* the name's key */
    SPLIT_PERMITS,              /* "<key> permit <i>" and the limit hash "<key> limit" */
    SPLIT_READERS               /* members of the sorted set "<key> shared" */
};

/* One scenario: who holds what on the first masters (the rest are free), and what is asked. */
struct split_case {
    const char         *name;       /* the lock name */
    enum split_records  records;    /* what the leftovers are */
    const char         *layout[SPLIT_LIMIT]; /* per record (permit i; one otherwise):
                                       the holder on masters 0, 1, ..., one letter
                                       each, as a token of 32 such letters */
    const char         *options;    /* the LOCK's words after the name and wait= */
    bool                split;      /* no token is on a quorum of the masters */
};

/* Delete the case's leftovers where they were written, announcing nothing. */
static void
split_delete(const struct split_case *sc)
{
    char key[128], rec[160];
    size_t m;
    int i;

    snprintf(key, sizeof(key), PREFIX "%s", sc->name);
    for (m = 0; m < strlen(sc->layout[0]); m++) {
        switch (sc->records) {
        case SPLIT_EXCLUSIVE:
            ck_assert_int_eq(h_master_cmd(m, NULL, "DEL %s", key), 0);
            break;
        case SPLIT_PERMITS:
            for (i = 0; i < SPLIT_LIMIT; i++) {
                snprintf(rec, sizeof(rec), "%s permit %d", key, i);
                ck_assert_int_eq(h_master_cmd(m, NULL, "DEL %s", rec), 0);
            }
            ck_assert_int_eq(h_master_cmd(m, NULL, "DEL %s", key), 0);
            break;
        case SPLIT_READERS:
            ck_assert_int_eq(h_master_cmd(m, NULL, "DEL %s", key), 0);
            break;
        }
    }
}

/* Write the case's leftovers, each for SPLIT_TTL ms, as another daemon would have. */
static void
split_write(const struct split_case *sc)
{
    char key[128], rec[160], tok[TOKEN_LEN + 1];
    size_t m;
    int i;

    snprintf(key, sizeof(key), PREFIX "%s", sc->name);
    for (m = 0; m < strlen(sc->layout[0]); m++) {
        for (i = 0; i < (sc->records == SPLIT_PERMITS ? SPLIT_LIMIT : 1); i++) {
            memset(tok, sc->layout[i][m], TOKEN_LEN);
            tok[TOKEN_LEN] = '\0';
            switch (sc->records) {
            case SPLIT_EXCLUSIVE:
                ck_assert_int_eq(h_master_cmd(m, NULL, "SET %s %s PX %d", key, tok,
                                              SPLIT_TTL), 0);
                break;
            case SPLIT_PERMITS:
                snprintf(rec, sizeof(rec), "%s permit %d", key, i);
                ck_assert_int_eq(h_master_cmd(m, NULL, "SET %s %s PX %d", rec, tok,
                                              SPLIT_TTL), 0);
                /* The name's key is the limit key. */
                ck_assert_int_eq(h_master_cmd(m, NULL, "HSET %s limit %d %d 1", key,
                                              SPLIT_LIMIT, i), 0);
                ck_assert_int_eq(h_master_cmd(m, NULL, "PEXPIRE %s %d", key, SPLIT_TTL), 0);
                break;
            case SPLIT_READERS:
                /* The name's key, scored by each holder's expiry on the
                 * master's own clock, as the daemon does. */
                snprintf(rec, sizeof(rec), "%s", key);
                ck_assert_int_eq(h_master_cmd(m, NULL, "EVAL %s 1 %s %s %d",
                                              "local t = redis.call('TIME')\n"
                                              "local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"
                                              "redis.call('ZADD', KEYS[1], now + ARGV[2], ARGV[1])\n"
                                              "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n",
                                              rec, tok, SPLIT_TTL), 0);
                break;
            }
        }
    }
}

/* arg: long long[2]: scripts run by master 0 to reach [0]; [1] the last seen. */
static bool
cond_scripts(void *arg)
{
    long long *want = arg;

    want[1] = cl_script_calls(0);
    return want[1] >= want[0];
}

/*
 * Write the leftovers, send the LOCK, and once its first two tries came
 * back refused (the first one subscribes to the release channel, the
 * second one follows at once; each is an acquire and the clean-up
 * release on every master), delete the leftovers without announcing
 * anything.  Split: no token keeps the name on a quorum, so the waiter
 * must try again after its short random delay (0 .. retry_delay_ms) and
 * get the name well before the leftovers' ttl.  Not split: one token
 * holds a quorum, and the waiter sleeps until that holder's ttl (a
 * release by a redlockd would have woken it): no OK before then.
 */
static void
split_run(const struct split_case *sc)
{
    long long calls[2];
    int64_t t_set, t_del, t_ok;
    char line[160], *got;
    int a;

    cl_up(NMASTERS, false, 1, NULL);
    a = expect_connect(0);
    calls[0] = cl_script_calls(0);
    ck_assert_msg(calls[0] >= 0, "INFO commandstats failed on master 0");
    calls[0] += 4;
    t_set = h_now_ms();
    split_write(sc);
    snprintf(line, sizeof(line), "LOCK %s wait=%d%s", sc->name, SPLIT_WAIT_MS, sc->options);
    ck_assert_int_eq(h_send(a, line), 0);
    ck_assert_msg(h_wait_until(cond_scripts, calls, CMD_MS),
                  "'%s': master 0 ran %lld scripts, expected two refused tries (%lld)", line,
                  calls[1], calls[0]);
    ck_assert_msg(h_quiet(a, 0), "'%s' was answered while the leftovers were there", line);
    t_del = h_now_ms();
    split_delete(sc);
    got = h_read_line(a, SPLIT_WAIT_MS + CMD_MS);
    t_ok = h_now_ms();
    ck_assert_msg(h_is_reply(got, "OK", sc->name), "'%s' answered '%s' after %lld ms", line,
                  got != NULL ? got : "(nothing)", (long long)(t_ok - t_set));
    free(got);
    fprintf(stderr, "%s: OK %lld ms after the leftovers were written, %lld ms after they "
            "were deleted\n", sc->name, (long long)(t_ok - t_set), (long long)(t_ok - t_del));
    if (sc->split) {
        ck_assert_msg(t_ok - t_del <= cl_opts.retry_delay_ms + SPLIT_SLACK_MS,
                      "'%s' got the name %lld ms after the split leftovers were deleted "
                      "(their ttl: %d ms), expected within retry_delay_ms %lld + %d ms", line,
                      (long long)(t_ok - t_del), SPLIT_TTL, (long long)cl_opts.retry_delay_ms,
                      SPLIT_SLACK_MS);
    } else {
        /* The first leftover was written at t_set or later: its ttl ends no sooner. */
        ck_assert_msg(t_ok - t_set >= SPLIT_TTL - 50,
                      "'%s' got the name %lld ms after one token took a quorum for %d ms: "
                      "the waiter polled instead of waiting for that holder", line,
                      (long long)(t_ok - t_set), SPLIT_TTL);
    }
    snprintf(line, sizeof(line), "UNLOCK %s", sc->name);
    EXPECT_PREFIX(a, line, "OK ");
    close(a);
}

/* Exclusive keys of tokens a, a, b: a has two masters of five. */
START_TEST(split_exclusive_aab)
{
    static const struct split_case sc = { "sxaab", SPLIT_EXCLUSIVE, { "aab" }, "", true };

    split_run(&sc);
}
END_TEST

/* Exclusive keys of three tokens. */
START_TEST(split_exclusive_abc)
{
    static const struct split_case sc = { "sxabc", SPLIT_EXCLUSIVE, { "abc" }, "", true };

    split_run(&sc);
}
END_TEST

/* Control: token a on three of five masters holds the name; the waiter waits for it. */
START_TEST(split_exclusive_quorum)
{
    static const struct split_case sc = { "sxaaa", SPLIT_EXCLUSIVE, { "aaa" }, "", false };

    split_run(&sc);
}
END_TEST

/*
 * Control: token a on three masters and b on a fourth.  The round may
 * see b's refusal before a's third: a holds the name all the same.
 */
START_TEST(split_exclusive_quorum_and_other)
{
    static const struct split_case sc = { "sxaaab", SPLIT_EXCLUSIVE, { "aaab" }, "", false };

    split_run(&sc);
}
END_TEST

/* Both permits of a counted name held on three masters, each by tokens that split. */
START_TEST(split_permits)
{
    static const struct split_case sc = { "spaab", SPLIT_PERMITS, { "aab", "abc" },
                                          " limit=2", true };

    split_run(&sc);
}
END_TEST

/* Control: each permit held by one token on three masters. */
START_TEST(split_permits_quorum)
{
    static const struct split_case sc = { "spaaa", SPLIT_PERMITS, { "aaa", "bbb" },
                                          " limit=2", false };

    split_run(&sc);
}
END_TEST

/* A shared request against exclusive keys of tokens a, a, b. */
START_TEST(split_shared_vs_exclusive)
{
    static const struct split_case sc = { "ssaab", SPLIT_EXCLUSIVE, { "aab" }, " shared",
                                          true };

    split_run(&sc);
}
END_TEST

/* An exclusive request (which closes the gate) against readers a, a, b. */
START_TEST(split_exclusive_vs_readers)
{
    static const struct split_case sc = { "sraab", SPLIT_READERS, { "aab" }, "", true };

    split_run(&sc);
}
END_TEST

/* Control: reader a on three masters keeps the writer out until it leaves. */
START_TEST(split_readers_quorum)
{
    static const struct split_case sc = { "sraaa", SPLIT_READERS, { "aaa" }, "", false };

    split_run(&sc);
}
END_TEST

/*
 * A tcase timeout of at least seconds, or CK_DEFAULT_TIMEOUT when that
 * is longer (the sanitizer build raises it); Check applies
 * CK_TIMEOUT_MULTIPLIER to both.
 */
static void
cl_set_timeout(TCase *tc, double seconds)
{
    const char *env = getenv("CK_DEFAULT_TIMEOUT");
    double t = env != NULL ? strtod(env, NULL) : 0;

    tcase_set_timeout(tc, t > seconds ? t : seconds);
}

#define BATCH_LOCKS     20      /* LOCKs that reach the daemon in one loop iteration */

/* arg unused.  Every connection of the batch test has unread bytes at the daemon. */
static bool
cl_cond_all_queued(void *arg)
{
    long long send_q, recv_q;
    int waiting;

    (void)arg;
    return h_tcp_queues(h_daemon_port(), &send_q, &recv_q, &waiting) >= 0
           && waiting >= BATCH_LOCKS + 1;
}

/*
 * The acquires of one loop iteration go to each master as one call:
 * BATCH_LOCKS lease LOCKs of names of their own, on connections of their
 * own, and a fenced LOCK of a name whose fence counter is no integer
 * (its raise, a request of its own after the batch, fails on every
 * master, naming the counter), all written while the daemon is stopped
 * (SIGSTOP), so that it reads them in one loop iteration when it runs
 * again.  Every lease is granted on a quorum, the fenced LOCK alone
 * fails, and master 0 runs far fewer script calls than requests (one
 * per request before batching: BATCH_LOCKS + 1, and two more for the
 * fenced LOCK's raise and clean-up).
 */
START_TEST(batch_one_call_per_iteration)
{
    char req[64], name[32], key[64], *line;
    long long before, after;
    int fd[BATCH_LOCKS + 1];
    size_t i;

    cl_up(NMASTERS, false, 1, NULL);
    for (i = 0; i <= BATCH_LOCKS; i++) {
        fd[i] = h_connect_tcp();
        ck_assert_int_ge(fd[i], 0);
    }
    line = h_cmd(fd[0], "LOCK warm mode=lease ttl=10000", CMD_MS);  /* scripts loaded */
    ck_assert_msg(line != NULL && h_is_reply(line, "OK", "warm"), "warm-up: %s",
                  line != NULL ? line : "(nothing)");
    free(line);
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET %s %s", PREFIX "bs fence", "seven"), 0);
    }
    before = cl_script_calls(0);
    ck_assert_int_eq(h_signal_daemon(SIGSTOP), 0);
    for (i = 0; i < BATCH_LOCKS; i++) {
        snprintf(req, sizeof(req), "LOCK bt%zu mode=lease ttl=10000", i);
        ck_assert_int_eq(h_send(fd[i], req), 0);
    }
    ck_assert_int_eq(h_send(fd[BATCH_LOCKS], "LOCK bs fence wait=0"), 0);
    /* Every request waits in the stopped daemon's socket buffers. */
    ck_assert_msg(h_wait_until(cl_cond_all_queued, NULL, CMD_MS),
                  "the %d LOCKs did not all reach the stopped daemon's sockets",
                  BATCH_LOCKS + 1);
    ck_assert_int_eq(h_signal_daemon(SIGCONT), 0);
    for (i = 0; i < BATCH_LOCKS; i++) {
        snprintf(name, sizeof(name), "bt%zu", i);
        line = h_read_line(fd[i], CMD_MS);
        ck_assert_msg(line != NULL && h_is_reply(line, "OK", name), "LOCK %s: %s", name,
                      line != NULL ? line : "(nothing)");
        free(line);
        snprintf(key, sizeof(key), PREFIX "%s", name);
        ck_assert_msg(h_masters_holding(key, NULL) >= QUORUM, "%s is on %zu masters", name,
                      h_masters_holding(key, NULL));
    }
    line = h_read_line(fd[BATCH_LOCKS], CMD_MS);
    ck_assert_msg(line != NULL && strncmp(line, "ERR NOQUORUM", 12) == 0
                  && strstr(line, "fence counter " PREFIX "bs fence is not an integer") != NULL,
                  "LOCK bs fence: %s", line != NULL ? line : "(nothing)");
    free(line);
    after = cl_script_calls(0);
    fprintf(stderr, "batch_one_call_per_iteration: %d LOCKs in one loop iteration, %lld "
            "script calls on master 0\n", BATCH_LOCKS + 1, after - before);
    ck_assert_msg(after - before <= 4, "%lld script calls on master 0 for %d LOCKs read in "
                  "one loop iteration", after - before, BATCH_LOCKS + 1);
    for (i = 0; i <= BATCH_LOCKS; i++) {
        close(fd[i]);
    }
}
END_TEST

#define SPLIT_ADD(s, test) expect_add_case((s), #test, (test), cl_teardown, SPLIT_TIMEOUT_S)

static Suite *
cluster_suite(void)
{
    Suite *s = suite_create("redlockd cluster");
    TCase *th = tcase_create("harness");
    TCase *tc = tcase_create("cluster");

    /* Setup is cl_up() in each test; teardown runs when a test passes. */
    tcase_add_checked_fixture(th, NULL, cl_teardown);
    cl_set_timeout(th, HARNESS_TIMEOUT_S);
    tcase_add_test(th, harness_two_daemons);
    tcase_add_test(th, harness_aof_restart_keeps_data);
    tcase_add_test(th, harness_plain_restart_is_empty);
    suite_add_tcase(s, th);

    tcase_add_checked_fixture(tc, NULL, cl_teardown);
    cl_set_timeout(tc, CLUSTER_TIMEOUT_S);
    tcase_add_test(tc, subscribe_only_to_wait);
    tcase_add_test(tc, pubsub_wakes_other_daemon);
    tcase_add_test(tc, pubsub_copies_after_busy);
    tcase_add_test(tc, fallback_after_expiry);
    tcase_add_test(tc, fairness_two_daemons);
    tcase_add_test(tc, fence_increases_two_daemons);
    tcase_add_test(tc, fence_increases_changing_majorities);
    tcase_add_test(tc, lease_from_other_daemon);
    tcase_add_test(tc, batch_one_call_per_iteration);
    suite_add_tcase(s, tc);

    /* Each its own test case: CK_RUN_CASE=<test> runs one. */
    SPLIT_ADD(s, split_exclusive_aab);
    SPLIT_ADD(s, split_exclusive_abc);
    SPLIT_ADD(s, split_exclusive_quorum);
    SPLIT_ADD(s, split_exclusive_quorum_and_other);
    SPLIT_ADD(s, split_permits);
    SPLIT_ADD(s, split_permits_quorum);
    SPLIT_ADD(s, split_shared_vs_exclusive);
    SPLIT_ADD(s, split_exclusive_vs_readers);
    SPLIT_ADD(s, split_readers_quorum);
    SPLIT_ADD(s, handover_one_call);
    SPLIT_ADD(s, retry_token_outlives_late_release);
    return s;
}

const struct runner runner_main = { "check_cluster", cluster_suite, h_suite_init, h_suite_cleanup };
