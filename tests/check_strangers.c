/*
 * check_strangers.c: strangers who do not know the password against the
 * clients who do, end to end.
 *
 * Guessing AUTH from thousands of loopback addresses checks no more
 * passwords than one address group's bucket allows, and writes a bounded
 * number of log lines; a client with the right password behind an address
 * that is being guessed from gets in within seconds, and at once once its
 * address is known; connections that never authenticate, re-opened as
 * they are closed, cannot keep a newcomer out of the unauthenticated pool.
 *
 * The strangers are a thread of non-blocking sockets (struct st_crowd)
 * bound to loopback addresses of their own; the clients are the test's.
 * Real redis-server masters and the real daemon on free loopback ports
 * (tests/harness.h).  Each test is a test case of its own:
 * CK_RUN_CASE=<test> ./build/check_strangers runs one.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>

#include <check.h>

#include "client/client.h"
#include "daemon/authlimit.h"
#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        3       /* masters per test: AUTH needs none of them */
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define ST_KNOWN_MS     2000    /* a known address's AUTH beside a guesser: in line
                                   behind the guesser's three it would wait three of the
                                   group's tokens (1 a second) */
#define PASSWORD        "s3cret-pw"
#define ST_MAX_CONNS    256     /* a crowd's connections at once, at most */
#define ST_LET_IN_MS    15000   /* a client's connect, TLS handshake and AUTH: what is
                                   tested is that it gets in, not how fast.  A refusal or
                                   a close comes at once; a sanitized daemon churning
                                   thousands of strangers' connections a second beside
                                   two busy loops took over 5 s for a TLS handshake's
                                   round trips (each waits a turn of its loop) */

/*
 * A crowd of strangers: conns connections at once, each from the next of
 * naddrs loopback addresses 127.<base>.x.y, each sending line (or
 * nothing, when line is "") and re-opened as soon as the daemon closes it.
 * What they were answered is counted.
 */
struct st_crowd {
    int              base;          /* second byte of their addresses */
    int              naddrs;        /* addresses used in turn */
    int              conns;         /* connections kept open */
    const char      *line;          /* sent on each, with its LF; "" for silence */
    atomic_bool      stop;
    atomic_long      opened;        /* connections made */
    atomic_long      wrong;         /* "ERR AUTH wrong password" replies */
    atomic_long      limit;         /* "ERR LIMIT" replies (closed to make room) */
    pthread_t        thread;
};

/* Open the crowd's next connection into *fd (-1 when the connect failed). */
static void
st_open(struct st_crowd *c, long n, int *fd)
{
    char from[32];
    int a = (int)(n % c->naddrs);

    snprintf(from, sizeof(from), "127.%d.%d.%d", c->base, a / 250, a % 250 + 1);
    *fd = h_tcp_connect(from, "127.0.0.1", h_daemon_port(), 0);
    if (*fd < 0) {
        return;
    }
    atomic_fetch_add(&c->opened, 1);
    if (c->line[0] != '\0') {
        (void)!send(*fd, c->line, strlen(c->line), MSG_NOSIGNAL);
    }
    (void)fcntl(*fd, F_SETFL, O_NONBLOCK);
}

/* Count what a closed connection was told, from the bytes it read. */
static void
st_count(struct st_crowd *c, const char *got)
{
    if (strstr(got, "ERR AUTH wrong password") != NULL) {
        atomic_fetch_add(&c->wrong, 1);
    } else if (strncmp(got, "ERR LIMIT", 9) == 0) {
        atomic_fetch_add(&c->limit, 1);
    }
}

static void *
st_run(void *arg)
{
    struct st_crowd *c = arg;
    struct pollfd pfd[ST_MAX_CONNS];
    char got[ST_MAX_CONNS][128], buf[256];
    size_t have[ST_MAX_CONNS];
    long next = 0;
    ssize_t n;
    int i;

    for (i = 0; i < c->conns; i++) {
        st_open(c, next++, &pfd[i].fd);
        pfd[i].events = POLLIN;
        have[i] = 0;
    }
    while (!atomic_load(&c->stop)) {
        if (poll(pfd, (nfds_t)c->conns, 50) < 0 && errno != EINTR) {
            break;
        }
        for (i = 0; i < c->conns; i++) {
            if (pfd[i].fd >= 0 && !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) {
                continue;
            }
            if (pfd[i].fd >= 0) {
                n = recv(pfd[i].fd, buf, sizeof(buf), 0);
                if (n > 0) {
                    size_t k = (size_t)n < sizeof(got[i]) - 1 - have[i]
                               ? (size_t)n : sizeof(got[i]) - 1 - have[i];

                    memcpy(got[i] + have[i], buf, k);
                    have[i] += k;
                    continue;
                }
                if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                    continue;
                }
                got[i][have[i]] = '\0';
                st_count(c, got[i]);
                close(pfd[i].fd);
            }
            have[i] = 0;
            st_open(c, next++, &pfd[i].fd);
        }
    }
    for (i = 0; i < c->conns; i++) {
        if (pfd[i].fd >= 0) {
            close(pfd[i].fd);
        }
    }
    return NULL;
}

/* Start crowd c (its counts zeroed here). */
static void
st_start(struct st_crowd *c)
{
    ck_assert_int_le(c->conns, ST_MAX_CONNS);
    atomic_store(&c->stop, false);
    atomic_store(&c->opened, 0);
    atomic_store(&c->wrong, 0);
    atomic_store(&c->limit, 0);
    ck_assert_int_eq(pthread_create(&c->thread, NULL, st_run, c), 0);
}

static void
st_stop(struct st_crowd *c)
{
    atomic_store(&c->stop, true);
    pthread_join(c->thread, NULL);
}

/* Wait until STATS name read over u is at least want; false at the deadline. */
static bool
st_wait_stat(int u, const char *name, long long want, int64_t ms)
{
    int64_t deadline = h_now_ms() + ms;
    long long v = -1;

    while (h_stat(u, name, &v) != 0 || v < want) {
        if (h_now_ms() >= deadline) {
            return false;
        }
        h_sleep_ms(20);
    }
    return true;
}

/*
 * AUTH password over a new connection from address from; the reply
 * (caller frees; "(nothing)" when none came within ms), and *took_ms how
 * long it took.
 */
static char *
st_auth_from(const char *from, const char *password, int64_t ms, int64_t *took_ms)
{
    char line[128];
    char *got;
    int64_t t0 = h_now_ms();
    int fd = h_tcp_connect(from, "127.0.0.1", h_daemon_port(), 0);

    ck_assert_msg(fd >= 0, "connect from %s: %s", from, strerror(errno));
    snprintf(line, sizeof(line), "AUTH %s", password);
    got = h_cmd(fd, line, ms);
    *took_ms = h_now_ms() - t0;
    close(fd);
    return got != NULL ? got : strdup("(nothing)");
}

#define ST_GUESS_MS 3000    /* how long the crowd guesses */

/*
 * 3,000 loopback addresses guessing as fast as the daemon answers: every
 * one is in 127/8, one group, so no more wrong passwords are checked
 * than its bucket holds plus one a second, and the log has at most its
 * burst of wrong-password lines plus one a second, and the lines that
 * sum the rest.  (Each address had a fresh bucket before.)
 */
START_TEST(guesses_bounded_over_addresses)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = PASSWORD };
    struct st_crowd crowd = { .base = 1, .naddrs = 3000, .conns = 200,
                              .line = "AUTH guess\n" };
    long long failures = 0;
    int64_t t0, secs;
    int u;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    t0 = h_now_ms();
    st_start(&crowd);
    while (h_now_ms() - t0 < ST_GUESS_MS && atomic_load(&crowd.opened) < 3000) {
        h_sleep_ms(50);     /* the scenario: guessing for a while */
    }
    st_stop(&crowd);
    /* Read once the crowd is gone (a sanitized daemon under it is slow to answer). */
    ck_assert_msg(st_wait_stat(u, "auth_failures", 0, H_PROMPT_MS), "no STATS");
    ck_assert_int_eq(h_stat(u, "auth_failures", &failures), 0);
    secs = (h_now_ms() - t0) / 1000 + 1;
    ck_assert_msg(atomic_load(&crowd.opened) >= 1000,
                  "the crowd opened only %ld connections", atomic_load(&crowd.opened));
    ck_assert_msg(failures <= AUTHLIMIT_BURST + secs,
                  "%lld wrong passwords were checked in %lld s from one group "
                  "(%ld connections from 3000 addresses)", failures, (long long)secs,
                  atomic_load(&crowd.opened));
    ck_assert_uint_le(expect_log_count("wrong AUTH password"), AUTHLIMIT_LOG_BURST + secs);
    ck_assert_uint_le(expect_log_count(" waits for its turn to be checked"), 1 + secs / 10);
    EXPECT_REPLY(u, "PING", "PONG");
    close(u);
}
END_TEST

#define ST_RIGHT_MS 6000    /* the right password behind a guesser: in within this */

/*
 * A guesser on a client's own address (a NAT, or 127.0.0.1 shared by
 * every local user), its wrong passwords always in line: the client's
 * right password is not refused unchecked, it waits its turn behind a
 * few guesses and gets in within seconds, every time, while the guesses
 * checked stay bounded.  A client whose address is known (it got in
 * before) is not held up at all by a guesser elsewhere in its group.
 */
START_TEST(right_password_behind_guesser)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = PASSWORD };
    struct st_crowd guesser = { .base = 0, .naddrs = 1, .conns = 3,
                                .line = "AUTH guess\n" };
    long long failures = 0;
    int64_t took, t0;
    char *got;
    int u, i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    got = st_auth_from("127.0.0.5", PASSWORD, ST_LET_IN_MS, &took);    /* known from now */
    ck_assert_str_eq(got, "OK");
    free(got);
    t0 = h_now_ms();
    st_start(&guesser);     /* from 127.0.0.1 */
    ck_assert_msg(st_wait_stat(u, "auth_failures", AUTHLIMIT_BURST, H_PROMPT_MS),
                  "the guesser did not empty its group's bucket");
    for (i = 0; i < 2; i++) {
        got = st_auth_from("127.0.0.1", PASSWORD, ST_RIGHT_MS, &took);
        ck_assert_msg(strcmp(got, "OK") == 0, "the right password beside a guesser got '%s' "
                      "after %lld ms (try %d)", got, (long long)took, i + 1);
        free(got);
    }
    ck_assert_int_eq(h_stat(u, "auth_failures", &failures), 0);
    ck_assert_msg(failures <= AUTHLIMIT_BURST + (h_now_ms() - t0) / 1000 + 1,
                  "%lld guesses checked in %lld ms", failures, (long long)(h_now_ms() - t0));
    st_stop(&guesser);

    guesser.base = 2;       /* from 127.2.0.1, elsewhere in 127/8 */
    st_start(&guesser);
    ck_assert_msg(st_wait_stat(u, "auth_failures", failures + 2, H_PROMPT_MS),
                  "the second guesser had no guesses checked");
    got = st_auth_from("127.0.0.5", PASSWORD, ST_KNOWN_MS, &took);
    ck_assert_msg(strcmp(got, "OK") == 0, "a known address's AUTH got '%s' after %lld ms",
                  got, (long long)took);
    free(got);
    st_stop(&guesser);
    close(u);
}
END_TEST

#define ST_NEWCOMERS 10     /* clients that try to get in through a full pool */

/* AUTH over a new TLS connection (from 127.0.0.1): true when answered OK within ST_LET_IN_MS. */
static bool
st_tls_auth_ok(void)
{
    struct client_tls_opts topts = { NULL, NULL, NULL };
    struct client c;
    char addr[32];
    bool ok = false;
    int64_t deadline = h_now_ms() + ST_LET_IN_MS;

    snprintf(addr, sizeof(addr), "127.0.0.1:%d", h_daemon_tls_port());
    topts.ca_file = h_cert("ca.crt");
    client_init(&c, -1, 0);
    if (client_connect_tcp(&c, addr, deadline) == 0
        && client_start_tls(&c, "127.0.0.1", &topts, deadline) == 0
        && client_send(&c, "AUTH " PASSWORD, deadline) == 0
        && client_read_line(&c, deadline) == CLIENT_LINE) {
        ok = strcmp(c.line, "OK") == 0;
        if (!ok) {
            fprintf(stderr, "TLS newcomer got '%s'\n", c.line);
        }
    } else {
        fprintf(stderr, "TLS newcomer: %s\n", c.err);
    }
    client_close(&c);
    return ok;
}

/*
 * n clients with the right password, each over TCP from address from,
 * then over TLS: every one must get in within ST_LET_IN_MS (what: who
 * they are, for the message).
 */
static void
st_expect_let_in(const char *from, int n, const char *what)
{
    int64_t took;
    char *got;
    int i, in = 0, tls_in = 0;

    for (i = 0; i < n; i++) {
        got = st_auth_from(from, PASSWORD, ST_LET_IN_MS, &took);
        in += strcmp(got, "OK") == 0;
        if (strcmp(got, "OK") != 0) {
            fprintf(stderr, "%s, try %d: '%s' after %lld ms\n", what, i, got,
                    (long long)took);
        }
        free(got);
        tls_in += st_tls_auth_ok();
    }
    ck_assert_msg(in == n && tls_in == n, "%s got in %d of %d times over TCP, %d over TLS",
                  what, in, n, tls_in);
}

/*
 * Four addresses hold every slot of the unauthenticated pool with silent
 * connections, re-opened as they are closed: a newcomer with the right
 * password from a fifth address is let in every time, over TCP and over
 * TLS (the oldest silent one closed for it, told why), not refused.
 */
START_TEST(pool_flood_admits_newcomer)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = PASSWORD,
                               .limits_yaml = "  max_unauthenticated: 64\n" };
    struct st_crowd flood = { .base = 3, .naddrs = 4, .conns = 64, .line = "" };
    int u;

    EXPECT_SETUP(.masters = NMASTERS, .tls_cert = "server", .daemons = 1, .opts = &o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    st_start(&flood);
    ck_assert_msg(st_wait_stat(u, "unauthenticated", 64, H_PROMPT_MS),
                  "the silent connections did not fill the pool");
    st_expect_let_in("127.0.0.9", ST_NEWCOMERS, "a newcomer through a full pool");
    st_stop(&flood);
    ck_assert_msg(atomic_load(&flood.limit) >= 1,
                  "no silent connection was told it was closed to make room");
    ck_assert(st_wait_stat(u, "unauthenticated_evicted", 1, H_PROMPT_MS));
    close(u);
}
END_TEST

#define ST_HELD_CONNS  (AUTHLIMIT_BURST + 4)   /* guesses from one address: the last
                                                   ones wait for their turn */

/*
 * AUTHs that wait for their turn to be checked, their connections reset
 * (SO_LINGER 0) in line: each gives its turn and its slot back at once
 * (auth_waiting and unauthenticated to 0), nothing is checked for them
 * afterwards, and the right password from the same address group gets
 * in.  A leaked turn would hold every later AUTH of the group behind a
 * connection that is gone.
 */
START_TEST(held_auth_reset_gives_turn_back)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = PASSWORD };
    struct linger lg = { 1, 0 };
    long long failures = -1, after = -1;
    int fds[ST_HELD_CONNS];
    int64_t took;
    char *got;
    int u, i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    for (i = 0; i < ST_HELD_CONNS; i++) {
        fds[i] = h_tcp_connect("127.0.0.3", "127.0.0.1", h_daemon_port(), 0);
        ck_assert_msg(fds[i] >= 0, "connect from 127.0.0.3: %s", strerror(errno));
        ck_assert_int_eq(h_send_raw(fds[i], "AUTH guess\n", 11), 0);
    }
    ck_assert_msg(st_wait_stat(u, "auth_waiting", 1, ST_LET_IN_MS),
                  "no AUTH waited for its turn after %d guesses", ST_HELD_CONNS);
    for (i = 0; i < ST_HELD_CONNS; i++) {
        ck_assert_int_eq(setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
        close(fds[i]);
    }
    expect_wait_stat_on(u, "auth_waiting", 0);
    expect_wait_unauthenticated(u, 0);
    ck_assert_int_eq(h_stat(u, "auth_failures", &failures), 0);
    got = st_auth_from("127.0.0.4", PASSWORD, ST_LET_IN_MS, &took);
    ck_assert_msg(strcmp(got, "OK") == 0, "the right password after the resets got '%s' "
                  "after %lld ms", got, (long long)took);
    free(got);
    ck_assert_int_eq(h_stat(u, "auth_failures", &after), 0);
    ck_assert_msg(after == failures, "%lld wrong passwords were checked for connections "
                  "that were gone", after - failures);
    EXPECT_REPLY(u, "PING", "PONG");
    close(u);
}
END_TEST

#define ST_KNOWN_TRIES 10    /* a known client's tries through the churn */
#define ST_CHURNED     100   /* evictions that show the strangers' share is full and
                                turning over (each of their groups holds a few slots) */

/*
 * Strangers elsewhere in 127/8 open connections as fast as the daemon
 * closes them, half silent and half with a wrong AUTH (which waits in
 * line): the group's share turns over thousands of times a second.  A
 * client whose address gave the right password before is a group of its
 * own and closed to make room last: it gets in every time, at once, over
 * TCP and TLS.
 */
START_TEST(known_client_through_churn)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = PASSWORD };
    struct st_crowd silent = { .base = 4, .naddrs = 50, .conns = 100, .line = "" };
    struct st_crowd guess = { .base = 5, .naddrs = 50, .conns = 100, .line = "AUTH guess\n" };
    int64_t took;
    char *got;
    int u;

    EXPECT_SETUP(.masters = NMASTERS, .tls_cert = "server", .daemons = 1, .opts = &o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    got = st_auth_from("127.0.0.1", PASSWORD, ST_LET_IN_MS, &took);    /* known from now */
    ck_assert_str_eq(got, "OK");
    free(got);
    st_start(&silent);
    st_start(&guess);
    /*
     * The churn is the condition: the strangers' share is full and new
     * ones have closed older ones.  How many a second depends on the
     * machine, so the test waits for a number of them, not a rate; the
     * crowd's connects, like a client's, may take a loaded machine
     * seconds (ST_LET_IN_MS).
     */
    ck_assert_msg(st_wait_stat(u, "unauthenticated_evicted", ST_CHURNED, ST_LET_IN_MS),
                  "the strangers did not churn the pool");
    st_expect_let_in("127.0.0.1", ST_KNOWN_TRIES, "a known client through the churn");
    st_stop(&guess);
    st_stop(&silent);
    close(u);
}
END_TEST

static Suite *
strangers_suite(void)
{
    Suite *s = suite_create("strangers");

    EXPECT_ADD(s, guesses_bounded_over_addresses, 60);
    EXPECT_ADD(s, right_password_behind_guesser, 60);
    EXPECT_ADD(s, pool_flood_admits_newcomer, 60);
    EXPECT_ADD(s, known_client_through_churn, 60);
    EXPECT_ADD(s, held_auth_reset_gives_turn_back, 60);
    return s;
}

const struct runner runner_main = { "check_strangers", strangers_suite, h_suite_init,
                                    h_suite_cleanup };
