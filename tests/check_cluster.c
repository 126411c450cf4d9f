/*
 * check_cluster.c: several redlockd daemons sharing one set of masters,
 * contending for the same names.
 *
 * A waiter does not wait out the ttl of records no single token holds on
 * a quorum (contenders that split the vote, leftovers of several
 * holders: written on the masters by the test, exclusive, counted and
 * shared, each its own test case); the LOCKs that reach a daemon in one
 * loop iteration go to each master in one call.  The first tests check
 * the harness features the multi-daemon suites rely on (several daemons,
 * persistent masters, PUBSUB NUMSUB, command counts).  (Hand-over and
 * pub/sub wake-ups across daemons are check_handover's, fences
 * check_fence's, leases check_lease_mode's.)
 *
 * Real redis-server masters and one or two real daemons on free loopback
 * ports (tests/harness.h).  Each test is a test case of its own:
 * CK_RUN_CASE=<test> ./build/check_cluster runs one.
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
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define CL_WAIT_MS      10000   /* wait= of the alternating grants */
#define HARNESS_TIMEOUT_S 30    /* per harness self-test */
#define CLUSTER_TIMEOUT_S 120   /* per cluster test (test 5 restarts masters 20 times) */
#define TOKEN_LEN       32      /* owner token: lowercase hex digits */

/* arg: the channel.  Nobody subscribes to it on master 0. */
static bool
cond_no_subscriber_on_0(void *arg)
{
    return h_master_numsub(0, arg) == 0;
}

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

    EXPECT_SETUP(.masters = NMASTERS, .daemons = NDAEMONS, .opts = &expect_prefix_opts);
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

        got = h_cmd(fd, "LOCK hz wait=10000", CL_WAIT_MS + H_PROMPT_MS);
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

    EXPECT_SETUP(.masters = 2, .aof = true);
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
    ck_assert_msg(h_wait_until(cond_no_subscriber_on_0, "chan", H_PROMPT_MS),
                  "PUBSUB NUMSUB chan is %lld after the subscriber left",
                  h_master_numsub(0, "chan"));
    ck_assert_int_eq(h_master_numsub(5, "chan"), -1);
}
END_TEST

/* A master from plain h_start_masters() comes back empty, as before. */
START_TEST(harness_plain_restart_is_empty)
{
    char *v;

    EXPECT_SETUP(.masters = 1);
    ck_assert_int_eq(h_master_cmd(0, NULL, "SET %s %s", "gone", "v"), 0);
    ck_assert_int_eq(h_kill_master(0), 0);
    ck_assert(h_restart_master(0) == 0);
    v = h_master_get(0, "gone");
    ck_assert_msg(v == NULL, "key 'gone' survived a restart without persistence: '%s'", v);
}
END_TEST

#define SPLIT_TTL       4000    /* ms: PX of every leftover record */
#define SPLIT_LIMIT     2       /* limit of the counted name */
#define SPLIT_EARLY_MS  250     /* split: the name is had this long before the
                                   leftovers' ttl would have ended (waiting them out
                                   gets it SPLIT_TTL after they were written, or later) */
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

    want[1] = expect_script_calls(0);
    return want[1] >= want[0];
}

/*
 * Write the leftovers, send the LOCK, and once its first two tries came
 * back refused (the first one subscribes to the release channel, the
 * second one follows at once; each is an acquire and the clean-up
 * release on every master), delete the leftovers without announcing
 * anything.  Split: no token keeps the name on a quorum, so the waiter
 * must try again after its short random delay (0 .. retry_delay_ms) and
 * get the name before the leftovers' ttl would have ended (however slow
 * the machine, waiting them out gets it no sooner), and no retry of it is
 * one timed by a holder's ttl (STATS fallback_retries stays).  Not split:
 * one token holds a quorum, and the waiter sleeps until that holder's ttl
 * (a release by a redlockd would have woken it): no OK before then, and
 * the retry that gets it is counted in fallback_retries.
 */
static void
split_run(const struct split_case *sc)
{
    long long calls[2], fallbacks;
    int64_t t_set, t_del, t_ok;
    char line[160], *got;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_prefix_opts);
    a = expect_connect(0);
    fallbacks = expect_stat("fallback_retries");
    calls[0] = expect_script_calls(0);
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
        /* The first leftover was written at t_set or later: its ttl ends no sooner. */
        ck_assert_msg(t_ok - t_set <= SPLIT_TTL - SPLIT_EARLY_MS,
                      "'%s' got the name %lld ms after the split leftovers were written "
                      "(%lld ms after they were deleted; their ttl: %d ms), expected %d ms "
                      "before their ttl ended: the leftovers were waited out", line,
                      (long long)(t_ok - t_set), (long long)(t_ok - t_del), SPLIT_TTL,
                      SPLIT_EARLY_MS);
        ck_assert_msg(expect_stat("fallback_retries") == fallbacks,
                      "'%s': a retry was timed by a leftover's ttl (fallback_retries %lld, "
                      "was %lld) while no token held a quorum", line,
                      expect_stat("fallback_retries"), fallbacks);
    } else {
        /* The first leftover was written at t_set or later: its ttl ends no sooner. */
        ck_assert_msg(t_ok - t_set >= SPLIT_TTL - 50,
                      "'%s' got the name %lld ms after one token took a quorum for %d ms: "
                      "the waiter polled instead of waiting for that holder", line,
                      (long long)(t_ok - t_set), SPLIT_TTL);
        ck_assert_msg(expect_stat("fallback_retries") > fallbacks,
                      "'%s': got the name without a retry timed by the holder's ttl "
                      "(fallback_retries %lld, was %lld)", line,
                      expect_stat("fallback_retries"), fallbacks);
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

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_prefix_opts);
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
    before = expect_script_calls(0);
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
    after = expect_script_calls(0);
    fprintf(stderr, "batch_one_call_per_iteration: %d LOCKs in one loop iteration, %lld "
            "script calls on master 0\n", BATCH_LOCKS + 1, after - before);
    ck_assert_msg(after - before <= 4, "%lld script calls on master 0 for %d LOCKs read in "
                  "one loop iteration", after - before, BATCH_LOCKS + 1);
    for (i = 0; i <= BATCH_LOCKS; i++) {
        close(fd[i]);
    }
}
END_TEST

static Suite *
cluster_suite(void)
{
    Suite *s = suite_create("cluster");

    EXPECT_ADD(s, harness_two_daemons, HARNESS_TIMEOUT_S);
    EXPECT_ADD(s, harness_aof_restart_keeps_data, HARNESS_TIMEOUT_S);
    EXPECT_ADD(s, harness_plain_restart_is_empty, HARNESS_TIMEOUT_S);
    EXPECT_ADD(s, batch_one_call_per_iteration, CLUSTER_TIMEOUT_S);
    EXPECT_ADD(s, split_exclusive_aab, SPLIT_TIMEOUT_S);
    EXPECT_ADD(s, split_exclusive_abc, SPLIT_TIMEOUT_S);
    EXPECT_ADD(s, split_exclusive_quorum, SPLIT_TIMEOUT_S);
    EXPECT_ADD(s, split_exclusive_quorum_and_other, SPLIT_TIMEOUT_S);
    EXPECT_ADD(s, split_permits, SPLIT_TIMEOUT_S);
    EXPECT_ADD(s, split_permits_quorum, SPLIT_TIMEOUT_S);
    EXPECT_ADD(s, split_shared_vs_exclusive, SPLIT_TIMEOUT_S);
    EXPECT_ADD(s, split_exclusive_vs_readers, SPLIT_TIMEOUT_S);
    EXPECT_ADD(s, split_readers_quorum, SPLIT_TIMEOUT_S);
    return s;
}

const struct runner runner_main = { "check_cluster", cluster_suite, h_suite_init, h_suite_cleanup };
