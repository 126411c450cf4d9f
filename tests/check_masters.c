/*
 * check_masters.c: the daemon's links to its masters, end to end:
 * outages, stalls and recovery, and what it learns from each master at
 * connect.
 *
 * Outages: with two masters down a quorum still grants, with three it
 * does not (ERR NOQUORUM after the LOCK's wait, naming a dead master),
 * and a LOCK that waits outlasts an outage; masters that come back are
 * used again, and a session's keys are written back to restarted
 * masters; an UNLOCK without a quorum still ends the hold (LOST first).
 * Stalls: a master stopped with its connection open is dropped after
 * redis.down_after_ms of silence, never for the daemon's own queue beyond
 * redis.max_pending (nor for a burst to masters that answer), commands the kernel cannot take wait and all
 * arrive later, late replies are ignored, a try that a dropped link
 * never answered is taken over; holders hear LOST before their validity
 * ends, also after the daemon itself was paused, and lost keys stay until
 * they expire.  At connect: redis.password authenticates to every
 * master, one server listed twice counts once, a maxmemory-policy that
 * may evict lock keys is warned about, and the ACL in the docs covers
 * every kind of lock.  STATS and /metrics count and name what they find.
 *
 * Real redis-server masters and the real daemon on free loopback ports
 * (tests/harness.h).  Each test is a test case of its own:
 * CK_RUN_CASE=<test> ./build/check_masters runs one.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <check.h>
#include <hiredis/hiredis.h>

#include "client/client.h"
#include "daemon/layout.h"
#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5       /* masters per test */
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define LOCAL_MS        1000    /* deadline for a reply the daemon gives alone */
#define MS_RECONNECT_MS 7500    /* longest wait before the daemon connects to a master
                                   again: the backoff's cap, 5 s, +50% jitter
                                   (daemon/master.c) */
#define TEST_TIMEOUT_S  30      /* per test, unless CK_DEFAULT_TIMEOUT is set */

/* arg: const char **name.  A fresh connection's TRYLOCK gets OK. */
static bool
cond_trylock_ok(void *arg)
{
    const char *name = *(const char **)arg;
    char line[300], *got;
    long long validity;
    unsigned holds;
    bool ok;
    int fd;

    fd = h_connect_tcp();
    if (fd < 0) {
        return false;
    }
    snprintf(line, sizeof(line), "TRYLOCK %s", name);
    got = h_cmd(fd, line, CMD_MS);
    ok = got != NULL && expect_parse_lock_ok(got, name, &validity, &holds) && holds == 1;
    free(got);
    close(fd);
    return ok;
}

START_TEST(two_masters_down)
{
    long long valid;
    char *token;
    size_t i;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    ck_assert_int_eq(h_kill_master(0), 0);
    ck_assert_int_eq(h_kill_master(1), 0);
    a = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK d", "d", 1, valid);
    ck_assert_msg(valid > 0, "validity=%lld", valid);

    token = h_master_get(2, "d");
    ck_assert_msg(token != NULL && h_is_token(token), "no token for 'd' on master 2");
    for (i = 2; i < NMASTERS; i++) {
        char *v = h_master_get(i, "d");

        ck_assert_msg(v != NULL && strcmp(v, token) == 0, "master %zu holds '%s', expected '%s'",
                      i, v != NULL ? v : "(no key)", token);
        free(v);
    }
    free(token);
    close(a);
}
END_TEST

#define MS_H_TTL_MS     1000    /* ttl of three_masters_down_noquorum's lock */

START_TEST(three_masters_down_noquorum)
{
    long long valid;
    int64_t t_kill, left;
    char addr[64], *got;
    size_t i;
    int a, b;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK h ttl=1000", "h", 1, valid);

    t_kill = h_now_ms();
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
    }

    /* TRYLOCK (and wait=0) answers at once; a waiting LOCK retries (check_session). */
    /* One round: the dead masters fail at once, or by the round's deadline. */
    got = h_cmd(b, "TRYLOCK z", H_NODE_TIMEOUT_MS + H_PROMPT_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM ", 13) == 0,
                  "TRYLOCK z with 3 of 5 masters down answered '%s', "
                  "expected 'ERR NOQUORUM ...'", got != NULL ? got : "(nothing)");
    for (i = 0; i < 3; i++) {
        snprintf(addr, sizeof(addr), "127.0.0.1:%d ", h_master_port(i));
        ck_assert_msg(strstr(got, addr) != NULL, "'%s' does not name the dead master %s",
                      got, addr);
    }
    free(got);

    /* The next renewal (every ttl/3) fails within a round's deadline. */
    left = MS_H_TTL_MS / 3 + H_NODE_TIMEOUT_MS + H_PROMPT_MS - (h_now_ms() - t_kill);
    got = h_read_line(a, left > 0 ? left : 0);
    ck_assert_msg(got != NULL && (strcmp(got, "! LOST h reason=quorum") == 0
                                  || strcmp(got, "! LOST h reason=renew") == 0),
                  "the holder of h got '%s' within %d ms of losing 3 masters, "
                  "expected '! LOST h reason=quorum|renew'", got != NULL ? got : "(nothing)",
                  MS_H_TTL_MS / 3 + H_NODE_TIMEOUT_MS + H_PROMPT_MS);
    free(got);
    close(a);
    close(b);
}
END_TEST

START_TEST(masters_recover)
{
    long long up;
    const char *name = "q";
    size_t i;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
    }
    a = expect_tcp();
    EXPECT_PREFIX(a, "TRYLOCK q", "ERR NOQUORUM ");
    close(a);

    for (i = 0; i < 3; i++) {
        ck_assert_msg(h_restart_master(i) == 0, "master %zu did not restart", i);
    }
    /* The daemon connects again after its backoff, then a round. */
    ck_assert_msg(h_wait_until(cond_trylock_ok, &name,
                               MS_RECONNECT_MS + H_NODE_TIMEOUT_MS + H_PROMPT_MS),
                  "no TRYLOCK q succeeded within %d ms of the masters' return",
                  MS_RECONNECT_MS + H_NODE_TIMEOUT_MS + H_PROMPT_MS);
    ck_assert_msg(h_wait_stat("masters_up", NMASTERS, false, MS_RECONNECT_MS + H_PROMPT_MS,
                              &up),
                  "STATS masters_up is %lld, expected %d", up, NMASTERS);
}
END_TEST

/*
 * redis.password: the daemon authenticates to every master.  With the
 * wrong password no master comes up, and a LOCK says why.
 */
START_TEST(auth)
{
    struct h_daemon_opts opts = expect_opts;
    long long valid;
    char *got;
    size_t i;
    int a;

    EXPECT_SETUP(.masters = NMASTERS);
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "CONFIG SET requirepass %s", "s3cret"), 0);
    }
    opts.redis_password = "s3cret";
    ck_assert_msg(h_start_daemon(&opts) == 0, "redlockd did not come up with the password");
    a = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK au", "au", 1, valid);
    EXPECT_REPLY(a, "UNLOCK au", "OK au holds=0");
    close(a);
    ck_assert_int_eq(h_stop_daemon(), 0);

    opts.redis_password = "wrong";
    opts.expect_masters_up = -1;
    ck_assert(h_start_daemon(&opts) == 0);
    a = expect_tcp();
    got = h_cmd(a, "TRYLOCK au", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM 0 of 5 masters answered", 36) == 0
                  && strstr(got, "AUTH refused") != NULL,
                  "TRYLOCK with a wrong password answered '%s'", got != NULL ? got : "(nothing)");
    free(got);
    close(a);
}
END_TEST

/*
 * A stalled master (SIGSTOP): a quorum of the others grants at once; its
 * replies come after the rounds were decided and are ignored; the
 * release queued behind the acquire on its connection removes the key
 * once it resumes.
 */
START_TEST(stalled_master)
{
    const char *key = "st";
    long long valid;
    int a, b;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    ck_assert_int_eq(h_signal_master(0, SIGSTOP), 0);
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK st", "st", 1, valid);
    EXPECT_PREFIX(b, "TRYLOCK st", "BUSY st ttl=");
    EXPECT_REPLY(a, "UNLOCK st", "OK st holds=0");
    EXPECT_LOCK_OK(b, "LOCK st", "st", 1, valid);
    EXPECT_REPLY(b, "UNLOCK st", "OK st holds=0");
    ck_assert_int_eq(h_signal_master(0, SIGCONT), 0);
    ck_assert_msg(h_wait_until(expect_cond_key_gone, &key, H_PROMPT_MS),
                  "key st left on a master after the stalled one resumed");
    ck_assert_msg(h_holds_for(expect_cond_key_gone, &key, 300, 10),
                  "a late SET from the stalled master's queue came back");
    EXPECT_REPLY(a, "PING", "PONG");
    close(a);
    close(b);
}
END_TEST

/*
 * Masters stalled (SIGSTOP, connections alive): renewals time out and
 * the holder is told LOST before the validity it was given runs out.
 */
START_TEST(lost_before_validity_end)
{
    long long valid;
    int64_t t_send, t_lost;
    char *got;
    size_t i;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    a = expect_tcp();
    t_send = h_now_ms();
    EXPECT_LOCK_OK(a, "LOCK lv ttl=3000", "lv", 1, valid);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_signal_master(i, SIGSTOP), 0);
    }
    /* Read until well past the validity: the assertion is t_lost below. */
    got = h_read_line(a, 3000 + H_PROMPT_MS);
    t_lost = h_now_ms();
    for (i = 0; i < 3; i++) {
        h_signal_master(i, SIGCONT);
    }
    ck_assert_msg(got != NULL && strncmp(got, "! LOST lv reason=", 17) == 0,
                  "expected '! LOST lv ...', got '%s'", got != NULL ? got : "(nothing)");
    free(got);
    /* The validity ended no earlier than t_send + valid. */
    ck_assert_msg(t_lost < t_send + valid,
                  "LOST arrived %lld ms after the validity (%lld ms) ended",
                  (long long)(t_lost - t_send - valid), valid);
    fprintf(stderr, "lost_before_validity_end: LOST %lld ms before the validity ended\n",
            (long long)(t_send + valid - t_lost));
    close(a);
}
END_TEST

/*
 * The daemon paused (SIGSTOP) longer than a lease: on resume the lease
 * is reported LOST, never renewed, and a re-entrant LOCK that waited in
 * the socket meanwhile acquires afresh (holds=1), not holds=2.
 */
START_TEST(daemon_paused_past_lease)
{
    long long valid;
    unsigned holds = 0;
    char *got;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    a = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK pz ttl=700", "pz", 1, valid);
    ck_assert_int_eq(h_signal_daemon(SIGSTOP), 0);
    ck_assert_int_eq(h_send(a, "LOCK pz"), 0);
    /* Let the lease (700 ms) run out on the masters while the daemon sleeps. */
    h_sleep_ms(1200);
    ck_assert_int_eq(h_signal_daemon(SIGCONT), 0);
    got = h_read_line(a, CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "! LOST pz reason=", 17) == 0,
                  "after the pause: '%s', expected '! LOST pz ...'", got != NULL ? got : "(nothing)");
    free(got);
    got = h_read_line(a, CMD_MS);
    ck_assert_msg(got != NULL && expect_parse_lock_ok(got, "pz", &valid, &holds) && holds == 1,
                  "the LOCK sent during the pause answered '%s', expected a fresh "
                  "'OK pz validity=N holds=1'", got != NULL ? got : "(nothing)");
    free(got);
    EXPECT_REPLY(a, "UNLOCK pz", "OK pz holds=0");
    close(a);
}
END_TEST

#define TEST_TIMEOUT_40_S 40  /* per test, unless CK_DEFAULT_TIMEOUT is set */
/* lock.key_prefix: the harness writes "" unless a test asks for another. */

/* A counter that grows: arg is a struct ms_grows. */
struct ms_grows {
    const char *name;       /* STAT name */
    long long   from;       /* value to exceed */
};

/*
 * lock.restart_quarantine false, five masters without persistence.
 * A session holds two (ttl=3000); masters 0 and 1 restart empty.
 * Within 5 s all five masters hold the key again, with the value the
 * others hold and 0 < PTTL <= 3000.  Then master 2 dies: the holder
 * gets no "! LOST" for 6 s, and STATUS two says HELD ... owner=self.
 *
 * today: fails; 5 s after the restarts 3 of 5 masters hold the token
 * (renewals extend the key where it is and never put it back).
 */
START_TEST(relock_restarted_masters)
{
    struct h_daemon_opts o = expect_opts;
    struct expect_keyval kv;
    char key[64], *token, *got;
    long long pttl;
    size_t i;
    int a;

    o.restart_quarantine = false;
    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    expect_key("two", key, sizeof(key));
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK two ttl=3000", "OK two ");
    token = h_master_get(2, key);
    ck_assert_msg(token != NULL && h_is_token(token), "master 2 has no token at '%s'", key);
    for (i = 0; i < 2; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
        ck_assert_msg(h_restart_master(i) == 0, "master %zu did not restart", i);
    }
    kv.key = key;
    kv.value = token;
    kv.want = NMASTERS;
    /* A reconnect after the backoff, then the next renewal (every ttl/3) puts it back. */
    ck_assert_msg(h_wait_until(expect_cond_holding, &kv,
                               MS_RECONNECT_MS + 3000 / 3 + H_PROMPT_MS),
                  "%d ms after masters 0 and 1 restarted empty, %zu of 5 masters hold the "
                  "lock's token", MS_RECONNECT_MS + 3000 / 3 + H_PROMPT_MS,
                  h_masters_holding(key, token));
    for (i = 0; i < NMASTERS; i++) {
        pttl = h_master_pttl(i, key);
        ck_assert_msg(pttl > 0 && pttl <= 3000, "PTTL of '%s' on master %zu is %lld", key,
                      i, pttl);
    }
    ck_assert_int_eq(h_kill_master(2), 0);
    if (!h_quiet(a, 6000)) {
        got = h_read_line(a, LOCAL_MS);
        ck_assert_msg(0, "the holder got '%s' after master 2 died, expected nothing for 6 s",
                      got != NULL ? got : "(end of stream)");
    }
    got = h_cmd(a, "STATUS two", CMD_MS);
    ck_assert_msg(got != NULL && h_is_reply(got, "HELD", "two")
                  && strstr(got, " owner=self") != NULL,
                  "STATUS two answered '%s', expected 'HELD two ... owner=self'",
                  got != NULL ? got : "(nothing)");
    free(got);
    free(token);
    close(a);
}
END_TEST

/* Kill masters 0..2 (3 of 5) and wait until the daemon sees 2 up. */
static void
ms_lose_quorum(void)
{
    size_t i;

    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
    }
    expect_wait_stat("masters_up", 2, false, H_PROMPT_MS);   /* refused at once */
}

/*
 * With 3 of 5 masters down, "LOCK n wait=60000" gets no reply for 1 s;
 * the three masters restart; the LOCK answers "OK n ..." once the
 * daemon has connected again (its backoff) and made a round.
 *
 * today: fails; within the first second the LOCK answers
 * 'ERR NOQUORUM 2 of 5 masters answered, quorum is 3: 127.0.0.1:P down
 * (connection lost (Server closed the connection)); ...' (3 masters).
 */
START_TEST(lock_waits_out_outage)
{
    int64_t t_back;
    char *got;
    size_t i;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    ms_lose_quorum();
    a = expect_tcp();
    ck_assert_int_eq(h_send(a, "LOCK n wait=60000"), 0);
    if (!h_quiet(a, 1000)) {
        got = h_read_line(a, LOCAL_MS);
        ck_assert_msg(0, "LOCK n wait=60000 with 3 of 5 masters down answered '%s' within "
                      "1 s, expected it to wait", got != NULL ? got : "(end of stream)");
    }
    for (i = 0; i < 3; i++) {
        ck_assert_msg(h_restart_master(i) == 0, "master %zu did not restart", i);
    }
    t_back = h_now_ms();
    /* A reconnect after the backoff, a retry delay and a round. */
    got = h_read_line(a, MS_RECONNECT_MS + 100 + H_NODE_TIMEOUT_MS + H_PROMPT_MS);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", "n"),
                  "LOCK n got '%s' after the masters' return (after %lld ms), "
                  "expected 'OK n ...'", got != NULL ? got : "(nothing)",
                  (long long)(h_now_ms() - t_back));
    free(got);
    close(a);
}
END_TEST

/*
 * With 3 of 5 masters down, "LOCK m wait=1500" answers a line that
 * starts "ERR NOQUORUM" after at least ~1400 ms, when its wait ran out
 * (within one more round), and its text names a dead master's address;
 * "TRYLOCK m" answers "ERR NOQUORUM" within one round.
 *
 * today: fails; the LOCK answers 'ERR NOQUORUM ...' after 2 ms.
 */
#define MS_NQ_WAIT_MS   1500    /* wait= of noquorum_after_wait's LOCK */
#define MS_NQ_LATEST_MS (MS_NQ_WAIT_MS + H_NODE_TIMEOUT_MS + H_PROMPT_MS)
                                /* its answer comes by then: the wait, the round under
                                   way, a loaded machine */

START_TEST(noquorum_after_wait)
{
    char addr[64], *got;
    int64_t t0, took;
    bool named = false;
    size_t i;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    ms_lose_quorum();
    a = expect_tcp();
    t0 = h_now_ms();
    got = h_cmd(a, "LOCK m wait=1500", MS_NQ_LATEST_MS);
    took = h_now_ms() - t0;
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM", 12) == 0,
                  "LOCK m wait=1500 with 3 of 5 masters down answered '%s' after %lld ms",
                  got != NULL ? got : "(nothing)", (long long)took);
    ck_assert_msg(took >= MS_NQ_WAIT_MS - 100 && took < MS_NQ_LATEST_MS,
                  "LOCK m wait=1500 answered ERR NOQUORUM after %lld ms, expected "
                  "%d..%d ms", (long long)took, MS_NQ_WAIT_MS - 100, MS_NQ_LATEST_MS);
    for (i = 0; i < 3; i++) {
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", h_master_port(i));
        named = named || strstr(got, addr) != NULL;
    }
    ck_assert_msg(named, "'%s' names none of the dead masters", got);
    free(got);
    t0 = h_now_ms();
    got = h_cmd(a, "TRYLOCK m", H_NODE_TIMEOUT_MS + H_PROMPT_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM", 12) == 0,
                  "TRYLOCK m with 3 of 5 masters down answered '%s' (after %lld ms)",
                  got != NULL ? got : "(nothing)", (long long)(h_now_ms() - t0));
    free(got);
    close(a);
}
END_TEST

/*
 * UNLOCK of a session-mode lock when too few masters answer: the hold is
 * gone (nothing renews it any more, its keys expire by their ttl), so
 * the session hears "! LOST x reason=quorum" first, then "NOTHELD x".
 */
START_TEST(unlock_without_quorum)
{
    size_t i;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK nq1", "OK nq1 ");
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
    }
    ck_assert_int_eq(h_send(a, "UNLOCK nq1"), 0);
    expect_line(a, "! LOST nq1 reason=quorum", CMD_MS, "UNLOCK nq1 without a quorum, first");
    expect_line(a, "NOTHELD nq1", CMD_MS, "UNLOCK nq1 without a quorum, second");
    close(a);
}
END_TEST

/*
 * A quorum answers an UNLOCK but the token is not known to be gone: the
 * lock was granted on exactly three masters (someone else's value sits
 * on the other two), and one of the three is stopped.  Four masters
 * answer, two of them confirm, and the stopped one may still hold it, so
 * the release is not confirmed: "! LOST reason=quorum", never "gone"
 * (which says the keys went away while the session held them).
 */
START_TEST(unlock_silent_holder_not_gone)
{
    char key[64];
    size_t i;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    expect_key("sg1", key, sizeof(key));
    for (i = 3; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET %s someone-else", key), 0);
    }
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK sg1", "OK sg1 ");
    ck_assert_int_eq(h_signal_master(2, SIGSTOP), 0);
    ck_assert_int_eq(h_send(a, "UNLOCK sg1"), 0);
    expect_line(a, "! LOST sg1 reason=quorum", CMD_MS, "UNLOCK sg1, first line");
    expect_line(a, "NOTHELD sg1", CMD_MS, "UNLOCK sg1, second line");
    ck_assert_int_eq(h_signal_master(2, SIGCONT), 0);
    close(a);
}
END_TEST

/*
 * A master stopped with SIGSTOP keeps its connection open.  Requests
 * pile up on it until redis.down_after_ms passes without a reply: then
 * the daemon drops it (the log names the setting) and connects again
 * once it answers.
 */
START_TEST(silent_master_dropped)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .down_after_ms = 1000 };
    char line[64];
    int a, i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    a = expect_tcp();
    ck_assert_int_eq(h_signal_master(0, SIGSTOP), 0);
    for (i = 0; i < 3; i++) {
        snprintf(line, sizeof(line), "TRYLOCK sm%d ttl=5000", i);
        EXPECT_PREFIX(a, line, "OK ");
    }
    /* Dropped once redis.down_after_ms passed without a reply. */
    expect_wait_stat("master.0.up", 0, false, o.down_after_ms + H_PROMPT_MS);
    ck_assert_msg(expect_log_has("(redis.down_after_ms)"),
                  "the log does not say why the master was dropped");
    /* The others carry on: quorum 3 of the 4 left. */
    EXPECT_PREFIX(a, "TRYLOCK sm9 ttl=5000", "OK sm9 ");
    ck_assert_int_eq(h_signal_master(0, SIGCONT), 0);
    expect_wait_stat("master.0.up", 1, false, MS_RECONNECT_MS + H_PROMPT_MS);
    close(a);
}
END_TEST

/*
 * A try that a master was sent but never answered, because its link was
 * dropped first, may still run there (a stopped master runs what waits
 * in its socket when it continues), without the release the dropped
 * link could not carry: a record on a quorum under a token the waiter
 * has already given up.  The waiter's next tries take that record over
 * instead of waiting out its ttl.  Masters 0-2 stop; a TRYLOCK starts
 * their silence and ends NOQUORUM at the round's deadline; w's LOCK is
 * sent then, so the links are dropped (down_after_ms) while w's first
 * try is pending there; the masters continue and run it.  w must be
 * granted as soon as a quorum is connected again, not in 30 s, and its
 * token must hold a quorum.
 */
#define MS_GHOST_GRANT_MS (MS_RECONNECT_MS + 100 + 1000 + H_PROMPT_MS)
                                /* w's grant comes by then (retry delay 100 ms,
                                   node_timeout 1000 ms), 30 s before the record expires */

START_TEST(ghost_of_dropped_try_taken_over)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .node_timeout_ms = 1000,
                               .min_ttl_ms = 1100, .down_after_ms = 1500 };
    char *got, *value;
    int a, w, i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    a = expect_tcp();
    w = expect_tcp();
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_signal_master(i, SIGSTOP), 0);
    }
    got = h_cmd(a, "TRYLOCK other", o.node_timeout_ms + H_PROMPT_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM ", 13) == 0,
                  "TRYLOCK with 3 of 5 masters stopped answered '%s'",
                  got != NULL ? got : "(nothing)");
    free(got);
    ck_assert_int_eq(h_send(w, "LOCK g wait=20000"), 0);
    expect_wait_stat("masters_up", 2, false, o.down_after_ms + H_PROMPT_MS);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_signal_master(i, SIGCONT), 0);
    }
    /*
     * A reconnect after the backoff, a retry delay and a round: far less
     * than the record's ttl (the default, 30 s), which waiting it out takes.
     */
    got = h_read_line(w, MS_GHOST_GRANT_MS);
    ck_assert_msg(got != NULL && strncmp(got, "OK g validity=", 14) == 0,
                  "w's LOCK g answered '%s' within %d ms of the masters continuing: its "
                  "dropped try's record was waited out, not taken over",
                  got != NULL ? got : "(nothing)", MS_GHOST_GRANT_MS);
    free(got);
    value = h_master_get(3, "g");
    ck_assert_msg(value != NULL, "master 3 does not hold g");
    ck_assert_msg(h_masters_holding("g", value) >= NMASTERS / 2 + 1,
                  "w's token is on %zu masters", h_masters_holding("g", value));
    free(value);
    EXPECT_REPLY(w, "UNLOCK g", "OK g holds=0");
    close(a);
    close(w);
}
END_TEST

/*
 * redis.max_pending bounds what is written to a silent master; the rest
 * waits in the daemon's queue, which is never the master's failure: a
 * stopped master with more than max_pending requests for it is not
 * dropped before redis.down_after_ms (long here) of silence, what waited
 * for it fails unwritten at its round's deadline (so the queue empties
 * by itself), and the other masters grant every lock meanwhile.
 */
START_TEST(queue_not_taken_for_failure)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .max_pending = 4,
                               .down_after_ms = 600000 };
    char line[64];
    int a, i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    a = expect_tcp();
    ck_assert_int_eq(h_signal_master(1, SIGSTOP), 0);
    /* Well past 4 calls for master 1, each a round that ends at its deadline. */
    for (i = 0; i < 30; i++) {
        snprintf(line, sizeof(line), "TRYLOCK mp%d ttl=5000", i);
        EXPECT_PREFIX(a, line, "OK ");
    }
    expect_wait_stat("queue_lock_expired", 1, true, 5 * H_NODE_TIMEOUT_MS);
    /* Silent for more than a round's deadline, max_pending written: more work for it. */
    for (i = 0; i < 10; i++) {
        snprintf(line, sizeof(line), "TRYLOCK mq%d ttl=5000", i);
        EXPECT_PREFIX(a, line, "OK ");
    }
    expect_wait_stat("queue_lock_depth", 0, false, 5 * H_NODE_TIMEOUT_MS);
    ck_assert_int_eq(expect_stat("master.1.up"), 1);
    ck_assert_int_eq(expect_stat("master.1.reconnects"), 0);
    ck_assert_msg(!expect_log_has("down:"), "a master was declared down for the daemon's queue");
    ck_assert_int_eq(h_signal_master(1, SIGCONT), 0);
    /* It answers again: what was written to it comes back, and new work goes through. */
    EXPECT_PREFIX(a, "TRYLOCK after ttl=5000", "OK after");
    ck_assert_int_eq(expect_stat("master.1.up"), 1);
    close(a);
}
END_TEST

/*
 * A request still unwritten when its round is decided is withdrawn: the
 * release sent after the decision is of a class written first, and
 * must not reach the master before the acquire it undoes.  Master 1 is
 * stopped with its one call of room (max_pending 1) taken; w's acquire
 * for it waits in the daemon while the other four grant; w's UNLOCK
 * follows.  When master 1 runs again, it must not be left holding w.
 */
START_TEST(decided_round_withdrawn)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .max_pending = 1,
                               .down_after_ms = 600000 };
    const char *w = "wd";
    char *got;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    a = expect_tcp();
    ck_assert_int_eq(h_signal_master(1, SIGSTOP), 0);
    EXPECT_PREFIX(a, "TRYLOCK first ttl=30000", "OK first");
    EXPECT_PREFIX(a, "TRYLOCK wd ttl=30000", "OK wd");
    ck_assert_int_ge(expect_stat("queue_lock_expired"), 1);
    EXPECT_REPLY(a, "UNLOCK wd", "OK wd holds=0");
    EXPECT_REPLY(a, "UNLOCK first", "OK first holds=0");
    ck_assert_int_eq(h_signal_master(1, SIGCONT), 0);
    expect_wait_stat("queue_renew_depth", 0, false, H_PROMPT_MS);
    /* A read answered by every master follows everything written before it. */
    got = h_cmd(a, "STATUS wd", LOCAL_MS * 5);
    ck_assert_msg(got != NULL && strcmp(got, "FREE wd") == 0, "STATUS: '%s'",
                  got != NULL ? got : "(none)");
    free(got);
    ck_assert_msg(h_wait_until(expect_cond_key_gone_alive, &w, H_PROMPT_MS),
                  "a master holds wd after its UNLOCK");
    ck_assert_int_eq(h_masters_holding("wd", NULL), 0);
    ck_assert_int_eq(expect_stat("master.1.reconnects"), 0);
    close(a);
}
END_TEST

/*
 * A silent master is still dropped: by its silence (redis.down_after_ms)
 * with requests written and unanswered, whatever is queued behind them.
 */
START_TEST(silence_drops_master)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .max_pending = 4,
                               .down_after_ms = 1500 };
    char line[64];
    int a, i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    a = expect_tcp();
    ck_assert_int_eq(h_signal_master(1, SIGSTOP), 0);
    for (i = 0; i < 10; i++) {
        snprintf(line, sizeof(line), "TRYLOCK sd%d ttl=5000", i);
        EXPECT_PREFIX(a, line, "OK ");
    }
    /* Dropped once redis.down_after_ms passed without a reply. */
    expect_wait_stat("master.1.up", 0, false, o.down_after_ms + H_PROMPT_MS);
    ck_assert_msg(expect_log_has("(redis.down_after_ms)"),
                  "the log does not say why the master was dropped");
    ck_assert_int_eq(h_signal_master(1, SIGCONT), 0);
    close(a);
}
END_TEST

/*
 * A burst of more than max_pending requests to masters that answer is
 * not silence: a session holding 40 locks (max_pending 4) closes, every
 * key is released at once, and no master is dropped.
 */
START_TEST(burst_not_dropped)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .max_pending = 4 };
    const char *key = "b39";
    char line[64];
    long long reconnects;
    size_t i, left;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    a = expect_tcp();
    for (i = 0; i < 40; i++) {
        snprintf(line, sizeof(line), "LOCK b%zu ttl=30000", i);
        EXPECT_PREFIX(a, line, "OK b");
    }
    close(a);
    ck_assert_msg(h_wait_until(expect_cond_key_gone_alive, &key, H_PROMPT_MS),
                  "b39 was not released");
    for (i = 0, left = 0; i < 40; i++) {
        snprintf(line, sizeof(line), "b%zu", i);
        left += h_masters_holding(line, NULL);
    }
    ck_assert_msg(left == 0, "%zu keys of the closed session left on the masters", left);
    expect_wait_stat("masters_up", NMASTERS, false, H_PROMPT_MS);
    for (i = 0; i < NMASTERS; i++) {
        snprintf(line, sizeof(line), "master.%zu.reconnects", i);
        ck_assert_int_eq(h_stat_once(line, &reconnects), 0);
        ck_assert_msg(reconnects == 0, "master %zu was dropped during the burst", i);
    }
    ck_assert(!expect_log_has("down:"));
}
END_TEST

/*
 * Partial writes to a master.  The daemon writes a master's commands
 * once per loop iteration and watches the socket for writability only
 * when the kernel did not take them all (daemon/redisev.c).  With master
 * 0 stopped, clients pipeline lease-mode TRYLOCKs with the longest
 * names until the acquires sent to master 0 exceed what its connection
 * can hold in the kernel (the daemon's send queue plus the stopped
 * master's receive queue, read from /proc/net/tcp): the rest waits in
 * the daemon.  The other four grant every one.  Once master 0 runs
 * again, every acquire must reach it, with no new command to push the
 * rest out, and master 0 must still be up.
 */
#define MS_PW_CONNS     8           /* client connections that pipeline */
#define MS_PW_WINDOW    16          /* requests in flight per connection */
#define MS_PW_NAME      250         /* lock name bytes, the longest allowed */
#define MS_PW_LINE      320         /* room for one request or reply line */
#define MS_PW_BATCH     2000        /* requests between two looks at the queues */
#define MS_PW_MAX       60000       /* give up filling after this many */
#define MS_PW_FILL_MS   10000       /* ... or after this long (about 1 s is needed;
                                       ten times this under $REDLOCKD_WRAP) */
#define MS_PW_MARGIN    (1024 * 1024) /* bytes past the kernel queues to send */
#define MS_PW_CATCHUP_MS 5000       /* deadline for master 0 to run them all */
/*
 * Bytes of one acquire on the wire, at least, alone or in a batch: the
 * key twice (the name's and the record's, both the name: no key_prefix
 * here), the token (32 hex digits) and the release channel (the key and
 * a suffix); alone it also carries the script's sha1 (40 hex digits), in
 * a batch its operation and counts; RESP framing only adds to it.
 */
#define MS_PW_CMD_MIN   (40 + MS_PW_NAME + 32 + MS_PW_NAME)

/* One pipelining client connection. */
struct ms_pipe {
    int     fd;                             /* non-blocking, to the daemon */
    size_t  inflight;                       /* requests sent without a reply yet */
    char    out[MS_PW_WINDOW * MS_PW_LINE]; /* request bytes not written yet */
    size_t  out_len;                        /* bytes in out */
    char    in[2 * MS_PW_LINE];             /* the reply being read */
    size_t  in_len;                         /* bytes in in */
};

/* Queue on p the request for lock number n (a new 250-byte name). */
static void
ms_pipe_queue(struct ms_pipe *p, size_t n)
{
    char name[MS_PW_NAME + 1];
    int len;

    len = snprintf(name, sizeof(name), "pw%08zu-", n);
    memset(name + len, 'x', MS_PW_NAME - (size_t)len);
    name[MS_PW_NAME] = '\0';
    p->out_len += (size_t)snprintf(p->out + p->out_len, sizeof(p->out) - p->out_len,
                                   "TRYLOCK %s mode=lease ttl=60000\n", name);
    p->inflight++;
}

/*
 * Read what p has; count every reply line (all must be OK) in *ok.
 * Returns 0, or -1 with the reason in why.
 */
static int
ms_pipe_read(struct ms_pipe *p, size_t *ok, char *why, size_t size)
{
    ssize_t r;
    char *lf;
    size_t len;

    r = recv(p->fd, p->in + p->in_len, sizeof(p->in) - p->in_len, 0);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
        snprintf(why, size, "the daemon closed a pipelining client (%s)",
                 r == 0 ? "end of stream" : strerror(errno));
        return -1;
    }
    if (r > 0) {
        p->in_len += (size_t)r;
    }
    while ((lf = memchr(p->in, '\n', p->in_len)) != NULL) {
        *lf = '\0';
        len = (size_t)(lf - p->in) + 1;
        if (strncmp(p->in, "OK pw", 5) != 0 || strstr(p->in, " token=") == NULL
            || p->inflight == 0) {
            snprintf(why, size, "a pipelined TRYLOCK answered '%.120s'", p->in);
            return -1;
        }
        (*ok)++;
        p->inflight--;
        p->in_len -= len;
        memmove(p->in, p->in + len, p->in_len);
    }
    if (p->in_len == sizeof(p->in)) {
        snprintf(why, size, "a reply line longer than %zu bytes", sizeof(p->in));
        return -1;
    }
    return 0;
}

/*
 * Send count more requests over the np pipes, lock numbers from *next
 * on, at most MS_PW_WINDOW in flight on each, and read every reply (OK
 * replies are counted in *ok) before deadline.  Returns 0, or -1 with
 * the reason in why.
 */
static int
ms_pipe_run(struct ms_pipe *p, size_t np, size_t count, size_t *next, size_t *ok,
            int64_t deadline, char *why, size_t size)
{
    struct pollfd pfd[MS_PW_CONNS];
    size_t issued = 0, done = *ok + count, i;
    int64_t left;
    ssize_t w;

    while (*ok < done) {
        for (i = 0; i < np; i++) {
            while (p[i].inflight < MS_PW_WINDOW && issued < count) {
                ms_pipe_queue(&p[i], (*next)++);
                issued++;
            }
            pfd[i].fd = p[i].fd;
            pfd[i].events = (short)(POLLIN | (p[i].out_len > 0 ? POLLOUT : 0));
            pfd[i].revents = 0;
        }
        left = deadline - h_now_ms();
        if (left <= 0) {
            snprintf(why, size, "%zu TRYLOCKs answered, the rest not within the deadline",
                     *ok);
            return -1;
        }
        if (poll(pfd, np, (int)left) < 0 && errno != EINTR) {
            snprintf(why, size, "poll: %s", strerror(errno));
            return -1;
        }
        for (i = 0; i < np; i++) {
            if ((pfd[i].revents & POLLOUT) != 0) {
                w = send(p[i].fd, p[i].out, p[i].out_len, MSG_NOSIGNAL);
                if (w < 0 && errno != EAGAIN && errno != EINTR) {
                    snprintf(why, size, "send: %s", strerror(errno));
                    return -1;
                }
                if (w > 0) {
                    p[i].out_len -= (size_t)w;
                    memmove(p[i].out, p[i].out + w, p[i].out_len);
                }
            }
            if ((pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0
                && ms_pipe_read(&p[i], ok, why, size) != 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* What ms_cond_calls waits for. */
struct ms_calls {
    long long   want;       /* grants master 0 must reach (its SET calls: one per
                               granted acquire of a fresh name, batched or not) */
    long long   seen;       /* the last count read (-1: none) */
};

/* arg: struct ms_calls *.  Master 0 has granted want acquires or more. */
static bool
ms_cond_calls(void *arg)
{
    struct ms_calls *c = arg;

    c->seen = h_master_calls(0, "set");
    return c->seen >= c->want;
}

/* DBSIZE of master i, or -1. */
static long long
ms_master_dbsize(size_t i)
{
    redisContext *c = h_master_redis(i);
    redisReply *r;
    long long n = -1;

    if (c == NULL) {
        return -1;
    }
    r = redisCommand(c, "DBSIZE");
    if (r != NULL && r->type == REDIS_REPLY_INTEGER) {
        n = r->integer;
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    redisFree(c);
    return n;
}

/* arg: const char **key.  Every master holds the key. */
static bool
ms_cond_key_everywhere(void *arg)
{
    return h_masters_holding(*(const char **)arg, NULL) == NMASTERS;
}

START_TEST(partial_write_to_stopped_master)
{
    /* Neither limit may drop the stopped master during the test. */
    struct h_daemon_opts o = { .retry_delay_ms = 100, .max_pending = 1000000,
                               .down_after_ms = 600000, .log_level = "info" };
    struct ms_pipe p[MS_PW_CONNS];
    struct ms_calls calls;
    const char *key = "pw-fresh";
    long long base, send_q = 0, recv_q = 0, sent_min = 0, v;
    int64_t t0, t_fill, t_cont, fill_ms;
    size_t i, next = 0, ok = 0;
    char why[256] = "";
    int a, port, conns = -1;
    bool failed = false;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    port = h_master_port(0);
    memset(p, 0, sizeof(p));
    for (i = 0; i < MS_PW_CONNS; i++) {
        p[i].fd = expect_tcp();
        ck_assert_int_eq(fcntl(p[i].fd, F_SETFL, fcntl(p[i].fd, F_GETFL) | O_NONBLOCK), 0);
    }
    base = h_master_calls(0, "set");
    ck_assert_msg(base >= 0, "cannot read master 0's INFO commandstats");
    /* valgrind makes the daemon some 20 times slower. */
    fill_ms = getenv("REDLOCKD_WRAP") != NULL ? 10 * MS_PW_FILL_MS : MS_PW_FILL_MS;

    ck_assert_int_eq(h_signal_master(0, SIGSTOP), 0);
    /* No assertion until master 0 runs again: record the first failure. */
    t0 = h_now_ms();
    for (;;) {
        if (ms_pipe_run(p, MS_PW_CONNS, MS_PW_BATCH, &next, &ok, t0 + fill_ms, why,
                        sizeof(why)) != 0) {
            failed = true;
            break;
        }
        conns = h_tcp_queues(port, &send_q, &recv_q, NULL);
        sent_min = (long long)ok * MS_PW_CMD_MIN;
        if (conns < 0 || sent_min >= send_q + recv_q + MS_PW_MARGIN || ok >= MS_PW_MAX) {
            break;
        }
    }
    t_fill = h_now_ms() - t0;
    ck_assert_int_eq(h_signal_master(0, SIGCONT), 0);
    t_cont = h_now_ms();

    ck_assert_msg(!failed, "while master 0 was stopped: %s", why);
    ck_assert_msg(conns >= 1, "no established connection to master 0 (port %d) in "
                  "/proc/net/tcp", port);
    fprintf(stderr, "partial_write_to_stopped_master: %zu acquires (>= %lld bytes) to the "
            "stopped master in %lld ms; kernel queues: daemon send %lld, master receive "
            "%lld\n", ok, sent_min, (long long)t_fill, send_q, recv_q);
    /*
     * What the kernel did not take stayed in the daemon: its writes to
     * master 0 came up short, the case under test.
     */
    ck_assert_msg(send_q > 0, "the daemon's send queue to the stopped master is empty");
    ck_assert_msg(sent_min > send_q + recv_q,
                  "%zu acquires (>= %lld bytes) fit in the kernel queues (%lld + %lld "
                  "bytes): no partial write; raise MS_PW_MAX", ok, sent_min, send_q, recv_q);

    /* Every acquire reaches master 0 without a new command to push it. */
    calls.want = base + (long long)ok;
    calls.seen = -1;
    ck_assert_msg(h_wait_until(ms_cond_calls, &calls, MS_PW_CATCHUP_MS),
                  "master 0 ran %lld of the %zu acquires sent while it was stopped "
                  "within %d ms: the rest stayed in the daemon's output buffer",
                  calls.seen < 0 ? -1 : calls.seen - base, ok, MS_PW_CATCHUP_MS);
    fprintf(stderr, "partial_write_to_stopped_master: master 0 ran all %zu %lld ms "
            "after SIGCONT\n", ok, (long long)(h_now_ms() - t_cont));
    v = ms_master_dbsize(0);
    ck_assert_msg(v >= (long long)ok, "master 0 holds %lld keys, expected the %zu leases",
                  v, ok);

    /* Master 0 was never dropped, and it takes part in a new lock. */
    ck_assert_int_eq(h_stat_once("master.0.up", &v), 0);
    ck_assert_msg(v == 1, "master 0 is down after the test");
    ck_assert_int_eq(h_stat_once("master.0.reconnects", &v), 0);
    ck_assert_msg(v == 0, "master 0 was dropped and reconnected %lld times", v);
    expect_wait_stat("masters_up", NMASTERS, false, H_PROMPT_MS);
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK pw-fresh ttl=60000", "OK pw-fresh ");
    ck_assert_msg(h_wait_until(ms_cond_key_everywhere, &key, H_PROMPT_MS),
                  "pw-fresh is on %zu masters, expected all %d", h_masters_holding(key, NULL),
                  NMASTERS);
    v = h_master_pttl(0, key);
    ck_assert_msg(v > 50000, "pw-fresh has pttl %lld on master 0", v);
    EXPECT_REPLY(a, "UNLOCK pw-fresh", "OK pw-fresh holds=0");
    ck_assert_msg(h_wait_until(expect_cond_key_gone_alive, &key, H_PROMPT_MS),
                  "pw-fresh stayed on a master after UNLOCK");
    close(a);
    for (i = 0; i < MS_PW_CONNS; i++) {
        close(p[i].fd);
    }
}
END_TEST

/*
 * A lock whose quorum is lost is reported LOST before its validity
 * ends, and its keys stay on the masters that still hold them until
 * they expire: the holder keeps its window until then.
 */
/*
 * arg: int64_t *, the validity's end (ms).  Keys on 3, 4 are still there
 * (a lost lock expires, it is not deleted) and end by then + drift.
 */
static bool
ms_cond_expiry_shrunk(void *arg)
{
    int64_t end = *(int64_t *)arg, left = end - h_now_ms();
    size_t i;

    for (i = 3; i < NMASTERS; i++) {
        long long pttl = h_master_pttl(i, "lk");

        if (pttl <= 0 || pttl > left + 32 + 50) {
            return false;
        }
    }
    return true;
}

START_TEST(lost_keeps_keys_until_expiry)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100 };
    const char *key = "lk";
    long long valid;
    int64_t t_send, t_lost, t_send_valid;
    char *got;
    size_t i;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    a = expect_tcp();
    t_send = h_now_ms();
    got = h_cmd(a, "LOCK lk ttl=3000", CMD_MS);
    ck_assert_msg(got != NULL && h_reply_int(got, "validity", &valid), "LOCK lk: '%s'",
                  got ? got : "(nothing)");
    free(got);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
    }
    /* Read until well past the validity: the assertion is t_lost below. */
    got = h_read_line(a, 3000 + H_PROMPT_MS);
    t_lost = h_now_ms();
    t_send_valid = t_send + valid;
    ck_assert_msg(got != NULL && strncmp(got, "! LOST lk reason=", 17) == 0,
                  "expected '! LOST lk ...', got '%s'", got ? got : "(nothing)");
    free(got);
    ck_assert_msg(t_lost < t_send + valid, "LOST came %lld ms after the validity ended",
                  (long long)(t_lost - t_send - valid));
    fprintf(stderr, "lost_keeps_keys_until_expiry: LOST %lld ms before the validity "
            "(%lld ms) ended\n", (long long)(t_send + valid - t_lost), valid);
    /*
     * The renewals that failed still extended the keys on 3 and 4; after
     * LOST they must run out with the validity (plus drift, 32 ms for
     * 3000 ms), not a whole ttl after the last attempt, and stay until
     * then.  Seen while they are still there (their PTTL > 0): the wait
     * cannot end by their expiry, so it may last until the validity ends.
     */
    ck_assert_msg(h_wait_until(ms_cond_expiry_shrunk, &t_send_valid,
                               t_send_valid > h_now_ms() ? t_send_valid - h_now_ms() : 0),
                  "after LOST the keys on masters 3 and 4 live on past the validity, or "
                  "were deleted (PTTL on master 3: %lld, on master 4: %lld)",
                  h_master_pttl(3, key), h_master_pttl(4, key));
    /* The masters expire them at the validity's end (shrunk: asserted above). */
    ck_assert_msg(h_wait_until(expect_cond_key_gone_alive, &key,
                               t_send + valid + H_PROMPT_MS - h_now_ms()),
                  "lk was still on a master %d ms after its validity ended", H_PROMPT_MS);
    close(a);
}
END_TEST

/*
 * A daemon paused (SIGSTOP) past its holders' validity: on resume each
 * holder hears LOST before anything else on its session.  The holder of
 * pz (ttl 1 s) asked for py (ttl 30 s) while every master was stopped,
 * then the daemon was stopped and the masters resumed: on resume the
 * daemon finds in one loop iteration the masters' answers granting py
 * (still valid: 30 s less the pause), a PING the holder sent meanwhile,
 * and pz's lease overdue.  The lease timer's priority puts LOST first;
 * without it the grant of py was written first (libevent runs socket
 * events before the timers it finds expired in the same iteration).
 */
START_TEST(paused_daemon_lost_first)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100 };
    long long valid;
    char *got;
    size_t i;
    int a, seen_ok = 0, seen_pong = 0;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    a = expect_tcp();
    got = h_cmd(a, "LOCK pz ttl=1000", CMD_MS);
    ck_assert_msg(got != NULL && h_reply_int(got, "validity", &valid), "LOCK pz: '%s'",
                  got ? got : "(nothing)");
    free(got);
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_signal_master(i, SIGSTOP), 0);
    }
    ck_assert_int_eq(h_send(a, "LOCK py ttl=30000"), 0);
    /* The round is sent at once; stop the daemon well within node_timeout. */
    h_sleep_ms(20);
    ck_assert_int_eq(h_signal_daemon(SIGSTOP), 0);
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_signal_master(i, SIGCONT), 0);
    }
    ck_assert_int_eq(h_send(a, "PING after-pause"), 0);
    /* The fault itself: stopped for longer than pz's validity. */
    h_sleep_ms(valid + 500);
    ck_assert_int_eq(h_signal_daemon(SIGCONT), 0);
    got = h_read_line(a, H_PROMPT_MS);
    ck_assert_msg(got != NULL && strncmp(got, "! LOST pz reason=", 17) == 0,
                  "first line after the pause: expected '! LOST pz ...', got '%s'",
                  got ? got : "(nothing)");
    free(got);
    for (i = 0; i < 2; i++) {
        got = h_read_line(a, H_PROMPT_MS);
        ck_assert_msg(got != NULL, "after the LOST: nothing more");
        seen_ok += strncmp(got, "OK py ", 6) == 0;
        seen_pong += strcmp(got, "PONG after-pause") == 0;
        free(got);
    }
    ck_assert_msg(seen_ok == 1 && seen_pong == 1, "after the LOST: expected 'OK py ...' and "
                  "'PONG after-pause' (OK %d, PONG %d)", seen_ok, seen_pong);
    close(a);
}
END_TEST

/* The daemon's /metrics now (caller frees); the daemon must have metrics_port. */
static char *
ms_scrape(int port)
{
    char *body = h_metrics_scrape(port);

    ck_assert_msg(body != NULL, "GET /metrics failed (the reason is above)");
    return body;
}

/*
 * The value of family's sample for master i, whose address in the
 * config is addr ("127.0.0.1:6379"); the sample must be there.
 */
static long long
ms_master_metric(const char *body, const char *family, size_t i, const char *addr)
{
    char series[256];
    long long v;

    snprintf(series, sizeof(series), "%s{master=\"%zu\",addr=\"%s\"}", family, i, addr);
    v = h_metric_int(body, series);
    ck_assert_msg(v >= 0, "no sample '%s' in /metrics", series);
    return v;
}

/* The same for master i started by the harness (its address 127.0.0.1:<port>). */
static long long
ms_started_metric(const char *body, const char *family, size_t i)
{
    char addr[64];

    snprintf(addr, sizeof(addr), "127.0.0.1:%d", h_master_port(i));
    return ms_master_metric(body, family, i, addr);
}

/* For h_wait_until: the log has at least *(size_t *)arg lines with ms_wait_text. */
static const char *ms_wait_text;

static bool
ms_cond_log_count(void *arg)
{
    return expect_log_count(ms_wait_text) >= *(size_t *)arg;
}

/*
 * The same server listed twice ("127.0.0.1:A" and "localhost:A") with
 * the third master B paused: only one Redis answers, so no quorum of
 * the three entries.  Counting the second spelling would let one Redis
 * grant the lock alone.  NOQUORUM, STATS, the log and /metrics
 * (redlockd_masters_duplicate, redlockd_master_duplicate) name it.
 * The duplicate is never sent a script.
 */
START_TEST(duplicate_counts_once)
{
    struct h_daemon_opts o = { .expect_masters_up = 2, .log_level = "info" };
    const char *extra[2];
    char again[64], line[512], text[160];
    char *got, *body;
    long long calls, after;
    int a, i;

    EXPECT_SETUP(.masters = 2);
    o.metrics_port = h_free_port();
    ck_assert_int_gt(o.metrics_port, 0);
    snprintf(again, sizeof(again), "localhost:%d", h_master_port(0));
    extra[0] = again;
    extra[1] = NULL;
    o.extra_masters = extra;
    ck_assert_int_eq(h_signal_master(1, SIGSTOP), 0);
    ck_assert_msg(h_start_daemon(&o) == 0, "redlockd did not start (log above)");
    a = expect_tcp();
    got = h_cmd(a, "LOCK dup wait=0", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM ", 13) == 0,
                  "one Redis listed twice granted the lock alone: '%s'",
                  got != NULL ? got : "(nothing)");
    snprintf(text, sizeof(text), "%s same server as 127.0.0.1:%d (run_id ", again,
             h_master_port(0));
    ck_assert_msg(strstr(got, text) != NULL && strstr(got, "not asked") != NULL,
                  "the NOQUORUM does not name the duplicate: '%s'", got);
    ck_assert_msg(strstr(got, "1 of 3 masters answered; 1 more is the same server") != NULL
                  && strstr(got, "not asked") != NULL,
                  "the NOQUORUM does not count the answers truthfully: '%s'", got);
    free(got);
    ck_assert_int_eq(expect_stat("masters_duplicate"), 1);
    ck_assert_int_eq(expect_stat("master.2.duplicate_of"), 0);
    ck_assert_int_eq(expect_stat("master.0.duplicate_of"), -1);
    ck_assert_msg(h_log_find(0, "is the same Redis server as", line, sizeof(line)),
                  "the log does not say that two entries are one server");
    snprintf(text, sizeof(text), "127.0.0.1:%d (entry 0)", h_master_port(0));
    ck_assert_msg(strstr(line, again) != NULL && strstr(line, text) != NULL,
                  "the log line does not name both entries: '%s'", line);
    /* /metrics says so too: one duplicate, and which entry it is. */
    body = ms_scrape(o.metrics_port);
    ck_assert_int_eq(h_metric_int(body, "redlockd_masters_duplicate"), 1);
    ck_assert_int_eq(ms_master_metric(body, "redlockd_master_duplicate", 2, again), 1);
    ck_assert_int_eq(ms_started_metric(body, "redlockd_master_duplicate", 0), 0);
    ck_assert_int_eq(ms_started_metric(body, "redlockd_master_duplicate", 1), 0);
    free(body);

    /* B runs again: two servers of three answer, a quorum. */
    ck_assert_int_eq(h_signal_master(1, SIGCONT), 0);
    ck_assert_msg(h_wait_stat("masters_up", 3, false, MS_RECONNECT_MS + H_PROMPT_MS, NULL),
                  "B did not come back");
    /*
     * The duplicate is not asked: asked too, A would run each script
     * twice, and a release that ran first on the duplicate's connection
     * left A's own release finding nothing (LOST at UNLOCK).
     */
    calls = h_master_calls(0, "evalsha");
    ck_assert_msg(calls >= 0, "INFO commandstats on A failed");
    for (i = 0; i < 20; i++) {
        EXPECT_PREFIX(a, "LOCK dup wait=0", "OK dup ");
        EXPECT_REPLY(a, "UNLOCK dup", "OK dup holds=0");
    }
    after = h_master_calls(0, "evalsha");
    ck_assert_msg(after - calls == 40, "A ran %lld scripts for 20 LOCK/UNLOCK pairs, not 40: "
                  "the server listed twice was asked twice", after - calls);
    close(a);
}
END_TEST

/*
 * maxmemory with allkeys-lru may evict lock keys: warned, naming the
 * master, its maxmemory and its policy, at every connect, and counted
 * in STATS and /metrics (redlockd_masters_evicting,
 * redlockd_master_evicting_policy) until a reconnect finds it fixed;
 * noeviction with a maxmemory is fine and not warned about.
 */
START_TEST(evicting_policy_warned)
{
    struct h_daemon_opts o = { .metrics_port = h_free_port() };
    char text[160], line[512], *body;
    size_t want;

    ck_assert_int_gt(o.metrics_port, 0);
    EXPECT_SETUP(.masters = 3);
    ck_assert_int_eq(h_master_cmd(1, NULL, "CONFIG SET maxmemory 100mb"), 0);
    ck_assert_int_eq(h_master_cmd(1, NULL, "CONFIG SET maxmemory-policy allkeys-lru"), 0);
    ck_assert_int_eq(h_master_cmd(2, NULL, "CONFIG SET maxmemory 100mb"), 0);
    ck_assert_int_eq(h_master_cmd(2, NULL, "CONFIG SET maxmemory-policy noeviction"), 0);
    ck_assert_msg(h_start_daemon(&o) == 0, "redlockd did not start (log above)");

    snprintf(text, sizeof(text), "master 127.0.0.1:%d: maxmemory is", h_master_port(1));
    ck_assert_msg(h_log_find(0, text, line, sizeof(line)),
                  "no warning about master 1's evicting policy");
    ck_assert_msg(strstr(line, "104857600 bytes") != NULL
                  && strstr(line, "allkeys-lru") != NULL,
                  "the warning does not give the maxmemory and the policy: '%s'", line);
    ck_assert_int_eq(expect_stat("masters_evicting"), 1);
    ck_assert_int_eq(expect_stat("master.1.evicting_policy"), 1);
    ck_assert_int_eq(expect_stat("master.0.evicting_policy"), 0);
    ck_assert_int_eq(expect_stat("master.2.evicting_policy"), 0);
    body = ms_scrape(o.metrics_port);
    ck_assert_int_eq(h_metric_int(body, "redlockd_masters_evicting"), 1);
    ck_assert_int_eq(ms_started_metric(body, "redlockd_master_evicting_policy", 1), 1);
    ck_assert_int_eq(ms_started_metric(body, "redlockd_master_evicting_policy", 0), 0);
    ck_assert_int_eq(ms_started_metric(body, "redlockd_master_evicting_policy", 2), 0);
    free(body);
    snprintf(text, sizeof(text), "master 127.0.0.1:%d: maxmemory", h_master_port(2));
    ck_assert_msg(!h_log_find(0, text, NULL, 0), "noeviction was warned about");

    /* A reconnect warns again; once the policy is fixed, no more. */
    snprintf(text, sizeof(text), "master 127.0.0.1:%d: maxmemory is", h_master_port(1));
    ck_assert_int_eq(h_master_cmd(1, NULL, "CLIENT KILL TYPE normal"), 0);
    ms_wait_text = text;
    want = 2;
    ck_assert_msg(h_wait_until(ms_cond_log_count, &want, MS_RECONNECT_MS + H_PROMPT_MS),
                  "the reconnect did not warn again");
    ck_assert_int_eq(h_master_cmd(1, NULL, "CONFIG SET maxmemory-policy noeviction"), 0);
    ck_assert_int_eq(h_master_cmd(1, NULL, "CLIENT KILL TYPE normal"), 0);
    ck_assert_msg(h_wait_stat("masters_evicting", 0, false, MS_RECONNECT_MS + H_PROMPT_MS,
                              NULL),
                  "a reconnect after the fix still counts master 1 as evicting");
    ck_assert_int_eq(expect_log_count(text), 2);
    body = ms_scrape(o.metrics_port);
    ck_assert_int_eq(h_metric_int(body, "redlockd_masters_evicting"), 0);
    ck_assert_int_eq(ms_started_metric(body, "redlockd_master_evicting_policy", 1), 0);
    free(body);
}
END_TEST

/*
 * The ACL user docs/production.md gives, applied word for word from it
 * to every master, and the settings it goes with: the layout registry
 * counts every master, the subscriber links come up, every kind of hold
 * (exclusive with a fence, shared, counted, a waiter woken by a release
 * announcement, STATUS, lease mode by token, CHECK of each) works
 * through it, and no master logged an ACL refusal.
 */
START_TEST(readme_acl_covers_every_kind)
{
    static const struct h_daemon_opts acl = {
        .redis_username = "redlockd",
        .redis_password = "MASTERS-PASSWORD",
        .key_prefix = "redlock:",
    };
    char rule[2048], *got, token[64];
    FILE *f;
    size_t i;
    int a, b;

    f = fopen("docs/production.md", "r");
    ck_assert_msg(f != NULL, "docs/production.md not found (run from the repository root)");
    rule[0] = '\0';
    while (fgets(rule, sizeof(rule), f) != NULL && strncmp(rule, "    user redlockd on ", 21) != 0) {
    }
    fclose(f);
    ck_assert_msg(strncmp(rule, "    user redlockd on ", 21) == 0,
                  "docs/production.md has no line '    user redlockd on ...'");
    rule[strcspn(rule, "\n")] = '\0';
    ck_assert_msg(strchr(rule, '%') == NULL, "the ACL line has a '%%'");
    EXPECT_SETUP(.masters = NMASTERS);
    for (i = 0; i < NMASTERS; i++) {
        char cmd[2100];

        snprintf(cmd, sizeof(cmd), "ACL SETUSER %s", rule + 9);     /* after "    user " */
        ck_assert_msg(h_master_cmd(i, NULL, cmd) == 0, "master %zu refused '%s'", i, cmd);
    }
    ck_assert_msg(h_start_daemon(&acl) == 0, "redlockd did not start (log above)");
    a = expect_tcp();
    b = expect_tcp();
    /*
     * The layout registry and the subscriber links' sentinel need nothing
     * more: counted at a registry read (every LAYOUT_BEAT_MS), subscribed at once.
     */
    for (i = 0; i < NMASTERS; i++) {
        char stat[48];

        snprintf(stat, sizeof(stat), "master.%zu.layout_counted", i);
        expect_wait_stat(stat, 1, false, 2 * LAYOUT_BEAT_MS + H_PROMPT_MS);
        snprintf(stat, sizeof(stat), "master.%zu.subscriber_up", i);
        expect_wait_stat(stat, 1, false, H_PROMPT_MS);
    }
    EXPECT_PREFIX(a, "LOCK x fence", "OK x validity=");
    EXPECT_PREFIX(b, "CHECK x fence=1", "CURRENT x ttl=");
    EXPECT_PREFIX(a, "STATUS x", "HELD x ");
    EXPECT_REPLY(a, "UNLOCK x", "OK x holds=0");
    EXPECT_PREFIX(a, "LOCK r shared fence", "OK r validity=");
    EXPECT_PREFIX(b, "LOCK r shared fence", "OK r validity=");
    EXPECT_PREFIX(a, "CHECK r fence=1", "CURRENT r ttl=");
    EXPECT_PREFIX(a, "CHECK r fence=2", "CURRENT r ttl=");
    EXPECT_PREFIX(a, "STATUS r", "HELD r ");
    EXPECT_REPLY(a, "UNLOCK r", "OK r holds=0");
    EXPECT_REPLY(b, "UNLOCK r", "OK r holds=0");
    EXPECT_PREFIX(a, "LOCK c limit=1 fence", "OK c validity=");
    EXPECT_PREFIX(b, "CHECK c fence=1 permit=0", "CURRENT c ttl=");
    /* b waits; a's release is announced on the channel and hands c over. */
    ck_assert_int_eq(h_send(b, "LOCK c limit=1 wait=30000"), 0);
    ck_assert(h_quiet(b, 300));
    EXPECT_REPLY(a, "UNLOCK c", "OK c holds=0");
    got = h_read_line(b, H_PROMPT_MS);
    ck_assert_msg(got != NULL && strncmp(got, "OK c validity=", 14) == 0,
                  "the waiter got '%s'", got != NULL ? got : "(nothing)");
    free(got);
    EXPECT_PREFIX(b, "STATUS c", "HELD c ");
    EXPECT_REPLY(b, "UNLOCK c", "OK c holds=0");
    got = h_cmd(a, "LOCK l limit=2 mode=lease ttl=5000", CMD_MS);
    ck_assert_msg(got != NULL && h_reply_field(got, "token", token, sizeof(token)),
                  "lease-mode LOCK answered '%s'", got != NULL ? got : "(nothing)");
    free(got);
    snprintf(rule, sizeof(rule), "CHECK l token=%s", token);
    EXPECT_PREFIX(a, rule, "CURRENT l ttl=");
    snprintf(rule, sizeof(rule), "EXTEND l token=%s ttl=5000", token);
    EXPECT_PREFIX(a, rule, "OK l validity=");
    snprintf(rule, sizeof(rule), "UNLOCK l token=%s", token);
    EXPECT_REPLY(a, rule, "OK l");
    close(a);
    close(b);
    ck_assert_msg(!h_log_find(0, "NOPERM", rule, sizeof(rule)),
                  "a master refused a command: %s", rule);
}
END_TEST

/*
 * The daemon says what it cannot reach: masters that refuse connections
 * from the start are named, with the verdict on the quorum, once; a
 * quorum regained and every master back are said; a master lost later
 * is named, with how many more may fail.
 */
START_TEST(reach_said_in_log)
{
    char line[4096], want[64];
    off_t at;
    size_t i;

    EXPECT_SETUP(.masters = NMASTERS);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
    }
    ck_assert(h_start_daemon(&expect_opts) == 0);
    ck_assert_msg(h_wait_log(0, "masters not counted (3 of 5): ", H_PROMPT_MS + 1000),
                  "no warning naming the 3 masters that refuse connections");
    ck_assert(h_log_find(0, "masters not counted (3 of 5): ", line, sizeof(line)));
    for (i = 0; i < 3; i++) {
        snprintf(want, sizeof(want), "127.0.0.1:%d down (", h_master_port(i));
        ck_assert_msg(strstr(line, want) != NULL, "'%s' does not name %s", line, want);
    }
    ck_assert_msg(strstr(line, "quorum 3 NOT reachable: 2 count") != NULL,
                  "'%s' does not say the quorum is out of reach", line);

    at = h_log_size();
    for (i = 0; i < 3; i++) {
        ck_assert_msg(h_restart_master(i) == 0, "master %zu did not restart", i);
    }
    ck_assert_msg(h_wait_log(at, "quorum regained: ", MS_RECONNECT_MS + H_PROMPT_MS),
                  "no 'quorum regained' within %d ms of the masters' return",
                  MS_RECONNECT_MS + H_PROMPT_MS);
    ck_assert_msg(h_wait_log(at, "masters: all 5 count again, quorum 3",
                             MS_RECONNECT_MS + H_PROMPT_MS),
                  "no line saying every master counts again");
    /* The same set is said once, however long it lasts. */
    ck_assert_uint_eq(expect_log_count("masters not counted (3 of 5): "), 1);

    at = h_log_size();
    ck_assert_int_eq(h_kill_master(4), 0);
    snprintf(want, sizeof(want), "masters not counted (1 of 5): 127.0.0.1:%d ",
             h_master_port(4));
    ck_assert_msg(h_wait_log(at, want, H_PROMPT_MS + 1000), "no warning naming master 4");
    ck_assert(h_log_find(at, want, line, sizeof(line)));
    ck_assert_msg(strstr(line, "quorum 3 reachable: 4 count, 1 more may fail") != NULL,
                  "'%s' does not say the quorum is reachable", line);
}
END_TEST

static Suite *
masters_suite(void)
{
    Suite *s = suite_create("masters");

    EXPECT_ADD(s, two_masters_down, TEST_TIMEOUT_S);
    EXPECT_ADD(s, three_masters_down_noquorum, TEST_TIMEOUT_S);
    EXPECT_ADD(s, masters_recover, TEST_TIMEOUT_S);
    EXPECT_ADD(s, auth, TEST_TIMEOUT_S);
    EXPECT_ADD(s, stalled_master, TEST_TIMEOUT_S);
    EXPECT_ADD(s, lost_before_validity_end, TEST_TIMEOUT_S);
    EXPECT_ADD(s, daemon_paused_past_lease, TEST_TIMEOUT_S);
    EXPECT_ADD(s, relock_restarted_masters, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, lock_waits_out_outage, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, noquorum_after_wait, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, unlock_without_quorum, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, unlock_silent_holder_not_gone, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, silent_master_dropped, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, ghost_of_dropped_try_taken_over, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, queue_not_taken_for_failure, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, silence_drops_master, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, decided_round_withdrawn, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, burst_not_dropped, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, partial_write_to_stopped_master, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, lost_keeps_keys_until_expiry, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, paused_daemon_lost_first, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, duplicate_counts_once, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, evicting_policy_warned, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, readme_acl_covers_every_kind, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, reach_said_in_log, TEST_TIMEOUT_40_S);
    return s;
}

const struct runner runner_main = { "check_masters", masters_suite, h_suite_init, h_suite_cleanup };
