/*
 * check_delay.c: lock-delay (LOCK <name> delay=MS, lock.delay_ms), end
 * to end, on one daemon and across two.
 *
 * A hold that asked for a delay and ended without UNLOCK (its session
 * closed, the daemon lost it, an operator's BREAK, its daemon killed)
 * keeps the name from every client, through every daemon, for the
 * delay: TRYLOCK answers
 * BUSY with delayed=, STATUS answers FREE with delayed=, a waiter of the
 * same daemon is not handed the hold but waits the delay out, and then
 * the name is granted.  UNLOCK ends a hold with no delay, and a LOCK
 * without a delay costs the masters nothing more: no command of it names
 * the delay's keys (MONITOR on a master).
 *
 * The delays are short (a second or two), and the tests never assert how
 * long something took beyond what the masters guarantee: the name is
 * refused with ttl <= the delay, then granted before a generous
 * deadline; a grant never comes before the delay's mark could have
 * expired, measured from before the close (a lower bound a slow machine
 * cannot break).
 *
 * Real redis-server masters and real daemons on free loopback ports
 * (tests/harness.h).  Each test is a test case of its own:
 * CK_RUN_CASE=<test> ./build/check_delay runs one.
 */
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

#define NMASTERS        3       /* masters per test */
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define DELAY_MS        1500    /* the delay the tests ask for */
#define GRANT_MS        8000    /* deadline for the grant after a delay */
#define TEST_TIMEOUT_S  60      /* per test, unless CK_DEFAULT_TIMEOUT is set */
#define ADMIN_PASSWORD  "admin-secret"

/* Every daemon: quick retries, and an admin password for BREAK. */
static const struct h_daemon_opts dl_opts = {
    .retry_delay_ms = 100,
    .admin_password = ADMIN_PASSWORD,
};

/* The same with lock.delay_ms set. */
static const struct h_daemon_opts dl_default_opts = {
    .retry_delay_ms = 100,
    .admin_password = ADMIN_PASSWORD,
    .delay_ms = DELAY_MS,
};

/* arg: the name.  Every master holds the delay mark in the name's key. */
static bool
dl_cond_marked(void *arg)
{
    const char *name = arg;
    size_t i;
    bool all = true;

    for (i = 0; i < h_master_count() && all; i++) {
        char *v = h_master_get(i, name);

        all = v != NULL && strncmp(v, "delay ", 6) == 0;
        free(v);
    }
    return all;
}

/* The release that starts name's delay ran on every master (a close is seen by its daemon later). */
static void
dl_wait_marked(const char *name)
{
    ck_assert_msg(h_wait_until(dl_cond_marked, (void *)name, CMD_MS),
                  "the delay mark of %s is not on every master", name);
}

/*
 * A TRYLOCK of name on fd must be refused by a lock-delay: "BUSY <name>
 * ttl=T delayed=T" with 0 <= T <= max_ms.
 */
static void
dl_expect_delayed(int fd, const char *name, long long max_ms, const char *what)
{
    char line[300], prefix[300];
    long long ttl = -2, delayed = -2;
    char *got;

    snprintf(line, sizeof(line), "TRYLOCK %s", name);
    got = h_cmd(fd, line, CMD_MS);
    snprintf(prefix, sizeof(prefix), "BUSY %s ", name);
    ck_assert_msg(got != NULL && strncmp(got, prefix, strlen(prefix)) == 0
                  && h_reply_int(got, "ttl", &ttl) && h_reply_int(got, "delayed", &delayed)
                  && ttl == delayed && ttl >= 0 && ttl <= max_ms,
                  "%s: TRYLOCK %s answered '%s', expected BUSY ttl=T delayed=T, T <= %lld",
                  what, name, got != NULL ? got : "(nothing)", max_ms);
    free(got);
}

/* TRYLOCK name on fd until it is granted (then UNLOCK it), within ms. */
static void
dl_expect_granted(int fd, const char *name, int64_t ms, const char *what)
{
    int64_t end = h_now_ms() + ms;
    char line[300], want[300], unlock[300];
    char *got = NULL;

    snprintf(line, sizeof(line), "TRYLOCK %s", name);
    snprintf(want, sizeof(want), "OK %s validity=", name);
    for (;;) {
        free(got);
        got = h_cmd(fd, line, CMD_MS);
        if (got != NULL && strncmp(got, want, strlen(want)) == 0) {
            break;
        }
        ck_assert_msg(got != NULL && strncmp(got, "BUSY ", 5) == 0 && h_now_ms() < end,
                      "%s: TRYLOCK %s answered '%s' (not granted in %lld ms)", what, name,
                      got != NULL ? got : "(nothing)", (long long)ms);
        h_sleep_ms(50);
    }
    free(got);
    snprintf(unlock, sizeof(unlock), "UNLOCK %s", name);
    snprintf(want, sizeof(want), "OK %s holds=0", name);
    EXPECT_REPLY(fd, unlock, want);
}

/* STATUS name on fd answers "FREE <name> delayed=T", 0 < T <= max_ms. */
static void
dl_expect_status_delayed(int fd, const char *name, long long max_ms)
{
    char line[300], prefix[300];
    long long t = -2;
    char *got;

    snprintf(line, sizeof(line), "STATUS %s", name);
    snprintf(prefix, sizeof(prefix), "FREE %s delayed=", name);
    got = h_cmd(fd, line, CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, prefix, strlen(prefix)) == 0
                  && h_reply_int(got, "delayed", &t) && t > 0 && t <= max_ms,
                  "STATUS %s answered '%s', expected FREE delayed=T, 0 < T <= %lld", name,
                  got != NULL ? got : "(nothing)", max_ms);
    free(got);
}

/*
 * A session that held with delay= closes: the name is refused, as a
 * delay, through the same daemon and a second one, STATUS says so on
 * both, and it is granted once the delay is over, first to a LOCK that
 * waited through the second daemon.  The marks are on every master,
 * with the holder's token after "delay ".
 */
START_TEST(delay_after_close)
{
    int a, b, c, w;
    char *v, *got;
    size_t i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &dl_opts);
    h_use_daemon(0);
    a = expect_tcp();
    b = expect_tcp();
    h_use_daemon(1);
    c = expect_tcp();
    EXPECT_PREFIX(a, "LOCK dc delay=1500", "OK dc validity=");
    /* A LOCK that waits through the second daemon, from before the close. */
    w = expect_tcp();
    ck_assert_int_eq(h_send(w, "LOCK dc"), 0);
    expect_wait_stat("waiters", 1, false, CMD_MS);
    /* The delay it asked for is next to its record, for a BREAK. */
    v = h_master_get(0, "dc delay");
    ck_assert_msg(v != NULL && strncmp(v, "1500 ", 5) == 0, "master 0 has 'dc delay' = '%s'",
                  v != NULL ? v : "(none)");
    free(v);
    close(a);
    dl_wait_marked("dc");
    dl_expect_delayed(b, "dc", DELAY_MS, "same daemon");
    dl_expect_delayed(c, "dc", DELAY_MS, "second daemon");
    dl_expect_status_delayed(b, "dc", DELAY_MS);
    dl_expect_status_delayed(c, "dc", DELAY_MS);
    for (i = 0; i < NMASTERS; i++) {
        v = h_master_get(i, "dc");
        ck_assert_msg(v != NULL && strncmp(v, "delay ", 6) == 0,
                      "master %zu holds '%s' at dc, expected the delay mark", i,
                      v != NULL ? v : "(nothing)");
        free(v);
        v = h_master_get(i, "dc delay");
        ck_assert_msg(v == NULL, "master %zu kept 'dc delay' = '%s'", i, v);
    }
    /* The waiter is granted once the delay is over (nothing announces it: its timer). */
    got = h_read_line(w, GRANT_MS);
    ck_assert_msg(got != NULL && strncmp(got, "OK dc validity=", 15) == 0,
                  "the second daemon's waiter got '%s'", got != NULL ? got : "(nothing)");
    free(got);
    EXPECT_REPLY(w, "UNLOCK dc", "OK dc holds=0");
    dl_expect_granted(c, "dc", GRANT_MS, "second daemon after the delay");
    close(b);
    close(c);
    close(w);
}
END_TEST

/* UNLOCK ends a hold with a delay at once: granted to the next, STATUS FREE. */
START_TEST(delay_not_after_unlock)
{
    int a, b;
    char *v;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &dl_opts);
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_PREFIX(a, "LOCK du delay=5000", "OK du validity=");
    EXPECT_REPLY(a, "UNLOCK du", "OK du holds=0");
    EXPECT_REPLY(b, "STATUS du", "FREE du");
    EXPECT_PREFIX(b, "TRYLOCK du", "OK du validity=");
    v = h_master_get(0, "du delay");
    ck_assert_msg(v == NULL, "the UNLOCK left 'du delay' = '%s'", v);
    EXPECT_REPLY(b, "UNLOCK du", "OK du holds=0");
    close(a);
    close(b);
}
END_TEST

/*
 * A waiter of the same daemon is at the head when the holder, with a
 * delay, closes: it is not handed the hold, and is granted only once
 * the delay's mark expired (at least the delay after the close was sent,
 * less the masters' clock granularity), while STATUS says FREE delayed=.
 */
START_TEST(delay_waiter_waits_it_out)
{
    int a, b, c;
    int64_t t0;
    char *got;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &dl_opts);
    a = expect_tcp();
    b = expect_tcp();
    c = expect_tcp();
    EXPECT_PREFIX(a, "LOCK dw delay=1500", "OK dw validity=");
    ck_assert_int_eq(h_send(b, "LOCK dw"), 0);
    expect_wait_stat("waiters", 1, false, CMD_MS);
    t0 = h_now_ms();
    close(a);
    got = h_read_line(b, 300);
    ck_assert_msg(got == NULL, "the waiter got '%s' at once: handed over during the delay", got);
    dl_expect_status_delayed(c, "dw", DELAY_MS);
    got = h_read_line(b, GRANT_MS);
    ck_assert_msg(got != NULL && strncmp(got, "OK dw validity=", 15) == 0,
                  "the waiter got '%s' after the delay", got != NULL ? got : "(nothing)");
    free(got);
    ck_assert_msg(h_now_ms() - t0 >= DELAY_MS - 100,
                  "granted %lld ms after the close, before the %d ms delay",
                  (long long)(h_now_ms() - t0), DELAY_MS);
    EXPECT_REPLY(b, "UNLOCK dw", "OK dw holds=0");
    close(b);
    close(c);
}
END_TEST

/*
 * An operator's BREAK, through the other daemon, starts the delay the
 * holder asked for (the masters kept it at grant), even while the
 * holder's daemon is stopped; the holder hears LOST reason=broken.  A
 * BREAK during a delay leaves the delay alone.  The delay is long
 * here: a BREAK answers three round deadlines after the masters ran it
 * (PROTOCOL.md, BREAK), and the delay runs from then.
 */
START_TEST(delay_after_break)
{
    int a, adm, b, c;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &dl_opts);
    h_use_daemon(0);
    a = expect_tcp();
    b = expect_tcp();
    h_use_daemon(1);
    adm = expect_tcp();
    c = expect_tcp();
    EXPECT_REPLY(adm, "AUTH " ADMIN_PASSWORD, "OK");
    EXPECT_PREFIX(a, "LOCK db delay=6000", "OK db validity=");
    /*
     * The holder's daemon is stopped: it cannot hear the BREAK and start
     * the delay itself; the masters do, from the delay the grant kept.
     */
    h_use_daemon(0);
    ck_assert_int_eq(h_signal_daemon(SIGSTOP), 0);
    EXPECT_PREFIX(adm, "BREAK db", "OK db holders=1 ");
    dl_expect_delayed(c, "db", 6000, "after BREAK, the holder's daemon stopped");
    ck_assert_int_eq(h_signal_daemon(SIGCONT), 0);
    expect_lost(a, "db", CMD_MS, "the broken holder");
    dl_expect_delayed(b, "db", 6000, "after BREAK");
    dl_expect_status_delayed(adm, "db", 6000);
    /* A delay is no holder: a BREAK now ends nothing and keeps it. */
    EXPECT_PREFIX(adm, "BREAK db", "OK db holders=0 ");
    dl_expect_delayed(b, "db", 6000, "after a second BREAK");
    dl_expect_granted(b, "db", GRANT_MS + 6000, "after the delay");
    close(a);
    close(adm);
    close(b);
    close(c);
}
END_TEST

/*
 * The daemon loses a hold with a delay (its keys deleted behind its
 * back: the renewal finds them gone, LOST reason=renew): the delay
 * starts anyway, written where the name is free, and then the name is
 * granted.
 */
START_TEST(delay_after_lost)
{
    int a, b;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &dl_opts);
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_PREFIX(a, "LOCK dl ttl=900 delay=1500", "OK dl validity=");
    expect_del_everywhere("dl");
    expect_lost(a, "dl", CMD_MS, "the holder whose keys went");
    dl_expect_delayed(b, "dl", DELAY_MS + 900, "after LOST");
    dl_expect_status_delayed(b, "dl", DELAY_MS + 900);
    dl_expect_granted(b, "dl", GRANT_MS, "after the delay");
    EXPECT_REPLY(a, "UNLOCK dl", "NOTHELD dl");
    close(a);
    close(b);
}
END_TEST

/*
 * The masters pause (SIGSTOP) under a hold with a delay: its renewals
 * get no quorum and the daemon reports it lost (reason=quorum); the
 * release that starts the delay waits in the links, runs when the
 * masters resume, and the name is refused as a delay before it is
 * granted.  The masters resume well within redis.down_after_ms, which
 * is raised so that the daemon keeps its links (a daemon that drops
 * them cannot start the delay there: PROTOCOL.md section 9, Lock-delay).
 */
START_TEST(delay_after_masters_paused)
{
    static const struct h_daemon_opts opts = {
        .retry_delay_ms = 100,
        .down_after_ms = 20000,
    };
    int a, b;
    size_t i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &opts);
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_PREFIX(a, "LOCK dp ttl=900 delay=1500", "OK dp validity=");
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_signal_master(i, SIGSTOP), 0);
    }
    expect_lost(a, "dp", 5000, "the holder whose masters paused");
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_signal_master(i, SIGCONT), 0);
    }
    dl_expect_delayed(b, "dp", DELAY_MS + 900, "after the masters resumed");
    dl_expect_granted(b, "dp", GRANT_MS, "after the delay");
    close(a);
    close(b);
}
END_TEST

/*
 * A daemon of the last release (no lock-delay) beside this one honours
 * the mark as a holder: its TRYLOCK is BUSY (without delayed=, which it
 * does not know) for at most the delay, and its waiting LOCK is granted
 * once the delay is over.  ($REDLOCKD_PREV_BIN: make builds it.)
 */
START_TEST(delay_honoured_by_last_release)
{
    const char *prev = getenv("REDLOCKD_PREV_BIN");
    long long ttl = -2;
    int a, c, w;
    char *got;

    ck_assert_msg(prev != NULL && prev[0] != '\0' && access(prev, X_OK) == 0,
                  "no daemon of the last release: set REDLOCKD_PREV_BIN (make check-delay "
                  "builds it and sets it)");
    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &dl_opts,
                 .builds = (const char *const[]){ prev, NULL });
    h_use_daemon(0);
    c = expect_tcp();
    w = expect_tcp();
    h_use_daemon(1);
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK dr delay=1500", "OK dr validity=");
    h_use_daemon(0);
    ck_assert_int_eq(h_send(w, "LOCK dr"), 0);
    expect_wait_stat("waiters", 1, false, CMD_MS);
    close(a);
    dl_wait_marked("dr");
    got = h_cmd(c, "TRYLOCK dr", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "BUSY dr ", 8) == 0
                  && h_reply_int(got, "ttl", &ttl) && ttl >= 0 && ttl <= DELAY_MS,
                  "the last release's TRYLOCK answered '%s' during the delay",
                  got != NULL ? got : "(nothing)");
    free(got);
    got = h_read_line(w, GRANT_MS);
    ck_assert_msg(got != NULL && strncmp(got, "OK dr validity=", 15) == 0,
                  "the last release's waiter got '%s'", got != NULL ? got : "(nothing)");
    free(got);
    EXPECT_REPLY(w, "UNLOCK dr", "OK dr holds=0");
    close(c);
    close(w);
}
END_TEST

/*
 * The holder's daemon is killed (SIGKILL: it writes no mark): the hold
 * still keeps the name for its delay after its lease, since its record
 * was written, and renewed, to live for ttl + delay.  Through the other
 * daemon TRYLOCK answers BUSY with a ttl above the lease's own 900 ms
 * (the record's time left: at most ttl + delay), until it is granted.
 */
START_TEST(delay_after_daemon_killed)
{
    long long ttl = -2;
    int a, c;
    char *got;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &dl_opts);
    h_use_daemon(0);
    a = expect_tcp();
    h_use_daemon(1);
    c = expect_tcp();
    EXPECT_PREFIX(a, "LOCK dk ttl=900 delay=5000", "OK dk validity=");
    h_sleep_ms(400);        /* a renewal or more: each writes ttl + delay again */
    h_use_daemon(0);
    ck_assert_int_eq(h_signal_daemon(SIGKILL), 0);
    ck_assert_int_eq(h_wait_daemon(CMD_MS), 128 + SIGKILL);
    h_use_daemon(1);
    got = h_cmd(c, "TRYLOCK dk", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "BUSY dk ", 8) == 0
                  && h_reply_int(got, "ttl", &ttl) && ttl > 1000 && ttl <= 5900,
                  "TRYLOCK answered '%s' after the holder's daemon was killed, expected BUSY "
                  "with 1000 < ttl <= 5900", got != NULL ? got : "(nothing)");
    free(got);
    dl_expect_granted(c, "dk", GRANT_MS, "after the lease and its delay");
    close(a);
    close(c);
}
END_TEST

/*
 * lock.delay_ms is the delay of an exclusive session-mode LOCK without
 * delay=; delay=0 asks for none; a shared hold has none.
 */
START_TEST(delay_default_from_conf)
{
    int a, b;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &dl_default_opts);
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_PREFIX(a, "LOCK dd", "OK dd validity=");
    close(a);
    dl_wait_marked("dd");
    dl_expect_delayed(b, "dd", DELAY_MS, "lock.delay_ms");

    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK dz delay=0", "OK dz validity=");
    close(a);
    dl_expect_granted(b, "dz", CMD_MS, "delay=0");

    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK ds shared", "OK ds validity=");
    close(a);
    dl_expect_granted(b, "ds", CMD_MS, "a shared hold");
    dl_expect_granted(b, "dd", GRANT_MS, "after the default delay");
    close(b);
}
END_TEST

/* delay= is checked: its range, with a lease, with shared or limit=. */
START_TEST(delay_refused_options)
{
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &dl_opts);
    a = expect_tcp();
    EXPECT_REPLY(a, "LOCK x delay=9999999999",
                 "ERR PROTO LOCK: delay=9999999999 out of range 0..3600000 (lock.max_ttl_ms)");
    EXPECT_REPLY(a, "TRYLOCK x mode=lease ttl=1000 delay=10",
                 "ERR PROTO TRYLOCK: delay= needs mode=session (a lease ends by UNLOCK or by "
                 "its ttl, and no daemon sees it end)");
    EXPECT_REPLY(a, "LOCK x shared delay=10",
                 "ERR PROTO LOCK: 'shared' and 'delay' cannot go together (a lock-delay is for "
                 "an exclusive lock)");
    EXPECT_REPLY(a, "LOCK x limit=2 delay=10",
                 "ERR PROTO LOCK: 'limit' and 'delay' cannot go together (a lock-delay is for "
                 "an exclusive lock)");
    EXPECT_REPLY(a, "LOCK x delay=abc",
                 "ERR PROTO LOCK: bad value for 'delay': 'abc' (expected milliseconds)");
    close(a);
}
END_TEST

/*
 * Everything master 0 runs while fn's requests are made (MONITOR, with
 * the commands that scripts call), up to a PING of ours, as one string:
 * malloc'd.
 */
static char *
dl_monitor(void (*fn)(void))
{
    redisContext *m = h_master_redis(0), *p = h_master_redis(0);
    redisReply *r;
    size_t len = 0, cap = 65536;
    char *all = calloc(1, cap);
    struct timeval tv = { 5, 0 };

    ck_assert_msg(all != NULL && m != NULL && p != NULL, "cannot connect to master 0");
    r = redisCommand(m, "MONITOR");
    ck_assert_msg(r != NULL, "MONITOR failed");
    freeReplyObject(r);
    redisSetTimeout(m, tv);
    fn();
    r = redisCommand(p, "PING dl-monitor-end");
    freeReplyObject(r);
    for (;;) {
        ck_assert_msg(redisGetReply(m, (void **)&r) == REDIS_OK && r != NULL,
                      "MONITOR ended before our PING");
        if (r->type == REDIS_REPLY_STATUS && strstr(r->str, "dl-monitor-end") != NULL) {
            freeReplyObject(r);
            break;
        }
        if (r->type == REDIS_REPLY_STATUS) {
            size_t n = strlen(r->str);

            if (len + n + 2 > cap) {
                cap = 2 * (len + n + 2);
                all = realloc(all, cap);
                ck_assert_ptr_nonnull(all);
            }
            memcpy(all + len, r->str, n);
            len += n;
            all[len++] = '\n';
            all[len] = '\0';
        }
        freeReplyObject(r);
    }
    redisFree(m);
    redisFree(p);
    return all;
}

/* LOCK, UNLOCK, LOCK and close, and a TRYLOCK refused by a holder: no delay asked. */
static void
dl_cycle(void)
{
    int a = expect_tcp(), b = expect_tcp();

    EXPECT_PREFIX(a, "LOCK dn", "OK dn validity=");
    EXPECT_REPLY(a, "UNLOCK dn", "OK dn holds=0");
    EXPECT_PREFIX(a, "LOCK dn", "OK dn validity=");
    EXPECT_PREFIX(b, "TRYLOCK dn", "BUSY dn ttl=");
    close(a);
    /* The close's release has run once the name is granted again. */
    dl_expect_granted(b, "dn", CMD_MS, "after the close");
    close(b);
}

/*
 * A LOCK that asks for no delay costs the masters nothing for the
 * feature: none of the commands a master runs for it (scripts and the
 * commands they call, as MONITOR shows them) names a delay's key or
 * mark.
 */
START_TEST(delay_costs_nothing_unasked)
{
    char *all;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &dl_opts);
    all = dl_monitor(dl_cycle);
    ck_assert_msg(strstr(all, "\"dn\"") != NULL, "MONITOR saw nothing of dn:\n%s", all);
    ck_assert_msg(strstr(all, "delay") == NULL,
                  "a LOCK without delay= named the delay on the masters:\n%s", all);
    free(all);
}
END_TEST

#define DL_ADD(s, test) expect_add_case((s), #test, (test), h_end, TEST_TIMEOUT_S)

static Suite *
delay_suite(void)
{
    Suite *s = suite_create("redlockd lock-delay");

    DL_ADD(s, delay_after_close);
    DL_ADD(s, delay_not_after_unlock);
    DL_ADD(s, delay_waiter_waits_it_out);
    DL_ADD(s, delay_after_break);
    DL_ADD(s, delay_after_lost);
    DL_ADD(s, delay_after_masters_paused);
    DL_ADD(s, delay_after_daemon_killed);
    DL_ADD(s, delay_honoured_by_last_release);
    DL_ADD(s, delay_default_from_conf);
    DL_ADD(s, delay_refused_options);
    DL_ADD(s, delay_costs_nothing_unasked);
    return s;
}

const struct runner runner_main = { "check_delay", delay_suite, h_suite_init, h_suite_cleanup };
