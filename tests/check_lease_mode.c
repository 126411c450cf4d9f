/*
 * check_lease_mode.c: locks in lease mode (LOCK ... mode=lease), end to
 * end.
 *
 * A lease outlives its connection, and only its token releases or
 * extends it; an expired lease is never re-created by EXTEND, and an
 * EXTEND that finds the lease gone cleans what is left; a grant is never
 * lost, whatever way the client closes after reading it (netcat, resets,
 * unread replies), and a client that closes before reading its grant
 * does not leave the key held; any daemon on the same masters can extend
 * or release a lease another daemon granted.  (daemon/lease.c's state
 * machine alone is check_lease's.)
 *
 * Real redis-server masters and one or two real daemons on free loopback
 * ports (tests/harness.h).  Each test is a test case of its own:
 * CK_RUN_CASE=<test> ./build/check_lease_mode runs one.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <check.h>
#include <hiredis/hiredis.h>

#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5       /* masters per test */
#define QUORUM          3       /* NMASTERS / 2 + 1 */
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define LOCAL_MS        1000    /* deadline for a reply the daemon gives alone */
#define LM_SHORT_TTL_MS 600     /* ttl of lease_expired_not_extended's lease */
#define TEST_TIMEOUT_S  30      /* per test, unless CK_DEFAULT_TIMEOUT is set */

/* Copy the token= of a reply into tok (33 bytes); false when absent or malformed. */
static bool
reply_token(const char *line, char *tok)
{
    return h_reply_field(line, "token", tok, 33) && h_is_token(tok);
}

/*
 * Lease mode on one daemon: the lock outlives its connection, only its
 * token releases or extends it, a wrong token changes nothing, and an
 * expired lease is never re-created by EXTEND.
 */
START_TEST(lease_mode)
{
    char tok[33], line[128], *got;
    long long valid, pttl;
    int a, b;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_REPLY(a, "LOCK l mode=lease", "ERR PROTO LOCK: mode=lease needs ttl= (nothing renews a lease)");
    EXPECT_REPLY(a, "LOCK l mode=lease ttl=99999999",
                 "ERR PROTO LOCK: ttl=99999999 out of range 600..3600000");
    got = h_cmd(a, "LOCK l mode=lease ttl=4000", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "OK l token=", 11) == 0 && reply_token(got, tok),
                  "LOCK mode=lease answered '%s'", got != NULL ? got : "(nothing)");
    ck_assert_msg(strstr(got, " holds=") == NULL && strstr(got, " validity=") != NULL,
                  "a lease-mode OK has a validity and no holds: '%s'", got);
    free(got);
    close(a);
    /* Not bound to the connection: still on every master, with its token. */
    ck_assert_uint_eq(h_masters_holding("l", tok), NMASTERS);
    EXPECT_PREFIX(b, "TRYLOCK l", "BUSY l ttl=");
    snprintf(line, sizeof(line), "STATUS l token=%s", tok);
    EXPECT_PREFIX(b, line, "HELD l ttl=");
    got = h_cmd(b, line, CMD_MS);
    ck_assert_msg(got != NULL && strstr(got, " owner=self mode=lease") != NULL,
                  "'%s' answered '%s'", line, got != NULL ? got : "(nothing)");
    free(got);

    /* A wrong or missing token: NOTHELD (EXTEND without one: ERR PROTO), nothing changes. */
    EXPECT_REPLY(b, "UNLOCK l token=0123456789abcdef0123456789abcdef", "NOTHELD l");
    EXPECT_REPLY(b, "EXTEND l token=0123456789abcdef0123456789abcdef ttl=9000", "NOTHELD l");
    EXPECT_REPLY(b, "EXTEND l ttl=9000",
                 "ERR PROTO EXTEND: missing token= (EXTEND renews a lease-mode lock by its "
                 "token; session-mode locks are renewed by the daemon)");
    EXPECT_REPLY(b, "UNLOCK l", "NOTHELD l");
    ck_assert_uint_eq(h_masters_holding("l", tok), NMASTERS);
    pttl = h_master_pttl(0, "l");
    ck_assert_msg(pttl > 0 && pttl <= 4000, "PTTL after the wrong tokens: %lld", pttl);

    /* EXTEND with the token, from another connection. */
    snprintf(line, sizeof(line), "EXTEND l token=%s ttl=9000", tok);
    got = h_cmd(b, line, CMD_MS);
    ck_assert_msg(got != NULL && expect_parse_status_int(got, "OK", "l", "validity", &valid) != NULL
                  && valid > 8000 && valid <= 9000,
                  "'%s' answered '%s'", line, got != NULL ? got : "(nothing)");
    free(got);
    pttl = h_master_pttl(2, "l");
    ck_assert_msg(pttl > 4000, "PTTL after EXTEND ttl=9000: %lld", pttl);
    snprintf(line, sizeof(line), "EXTEND l token=%s ttl=99999999", tok);
    EXPECT_REPLY(b, line, "ERR PROTO EXTEND: ttl=99999999 out of range 600..3600000");

    /* UNLOCK with the token: gone everywhere; then EXTEND re-creates nothing. */
    snprintf(line, sizeof(line), "UNLOCK l token=%s", tok);
    EXPECT_REPLY(b, line, "OK l");
    ck_assert_uint_eq(h_masters_without("l"), NMASTERS);
    EXPECT_REPLY(b, line, "NOTHELD l");
    snprintf(line, sizeof(line), "EXTEND l token=%s ttl=9000", tok);
    EXPECT_REPLY(b, line, "NOTHELD l");
    ck_assert_uint_eq(h_masters_without("l"), NMASTERS);
    close(b);
}
END_TEST

/* A lease that ran out is not extended, and its key is not re-created. */
START_TEST(lease_expired_not_extended)
{
    char tok[33], line[128], *got;
    const char *key = "e";
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    a = expect_tcp();
    got = h_cmd(a, "LOCK e mode=lease ttl=600", CMD_MS);    /* LM_SHORT_TTL_MS */
    ck_assert_msg(reply_token(got, tok), "LOCK mode=lease answered '%s'",
                  got != NULL ? got : "(nothing)");
    free(got);
    /* The masters expire it at its ttl (asked for it, they expire it then). */
    ck_assert_msg(h_wait_until(expect_cond_key_gone, &key, LM_SHORT_TTL_MS + H_PROMPT_MS),
                  "the lease did not expire");
    snprintf(line, sizeof(line), "EXTEND e token=%s ttl=5000", tok);
    EXPECT_REPLY(a, line, "NOTHELD e");
    ck_assert_uint_eq(h_masters_without("e"), NMASTERS);
    close(a);
}
END_TEST

#define TEST_TIMEOUT_40_S 40  /* per test, unless CK_DEFAULT_TIMEOUT is set */
/* lock.key_prefix: the harness writes "" unless a test asks for another. */

/* arg: const char *key.  Every running master holds the key. */
static bool
lm_cond_holding_all(void *arg)
{
    return h_masters_holding(arg, NULL) == h_masters_alive();
}

#define LEASE_TRIES     50

/*
 * 50 times `printf 'LOCK job5_<i> mode=lease ttl=600000\n' | nc -N`
 * (a name per try, so that a lost grant does not block the next try):
 * each prints "OK job5_<i> token=HEX validity=N", and UNLOCK token=
 * from another connection then releases it.  A try that prints
 * nothing but left the key on the masters is a grant the client never
 * learnt of: it would block the name for 600 s.
 *
 * today: fails; 0 of 50 printed anything (each nc exits 0 after about
 * 8 ms), and 10 to 13 of the 50 (3 runs) left their lease on the
 * masters: granted, for 600 s, to a client that never learnt the token.
 */
START_TEST(lease_nc_grants)
{
    char input[128], name[32], key[64], line[256], token[64], first[8192 + 16] = "";
    size_t ok = 0, lost = 0;
    struct expect_nc r;
    long long v;
    int i, u;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    u = expect_tcp();
    for (i = 0; i < LEASE_TRIES; i++) {
        snprintf(name, sizeof(name), "job5_%d", i);
        expect_key(name, key, sizeof(key));
        snprintf(input, sizeof(input), "LOCK %s mode=lease ttl=600000\n", name);
        expect_nc_tcp("-N", input, &r);
        r.out[strcspn(r.out, "\n")] = '\0';
        if (h_is_reply(r.out, "OK", name) && h_reply_field(r.out, "token", token, sizeof(token))
            && h_is_token(token) && h_reply_int(r.out, "validity", &v) && v > 0) {
            ok++;
            snprintf(line, sizeof(line), "UNLOCK %s token=%s", name, token);
            EXPECT_PREFIX(u, line, "OK ");
            continue;
        }
        if (first[0] == '\0') {
            snprintf(first, sizeof(first), "try %d: %s", i, expect_nc_show(&r));
        }
        if (h_masters_holding(key, NULL) > 0) {
            lost++;
        }
    }
    close(u);
    ck_assert_msg(ok == LEASE_TRIES,
                  "%zu of %d lease-mode LOCKs over nc -N printed OK; %zu of the others "
                  "left a lease on the masters; first failure: %s", ok, LEASE_TRIES, lost,
                  first);
}
END_TEST

#define ABRUPT_AT_ONCE  30      /* clients that close right after the send */
#define ABRUPT_MID      4       /* clients that close while their round is in flight */
#define ABRUPT_WINDOW   3000    /* ms after the last close by which the keys are gone */

/* A counter that grows: arg is a struct lm_grows. */
struct lm_grows {
    const char *name;       /* STAT name */
    long long   from;       /* value to exceed */
};

static bool
lm_cond_grows(void *arg)
{
    struct lm_grows *g = arg;
    long long v;

    return h_stat_once(g->name, &v) == 0 && v > g->from;
}

/* The keys "<prefix><base><i>", i < n, of one batch of abrupt clients. */
struct lm_batch {
    const char *base;       /* name without its number */
    int         n;          /* names in the batch */
    char        why[512];   /* the first key still held, for the message */
};

/* arg: struct lm_batch.  No key of the batch is on any running master. */
static bool
lm_cond_batch_gone(void *arg)
{
    struct lm_batch *b = arg;
    char name[64], key[96], first[160] = "";
    int i, held[2] = { 0, 0 };
    size_t on;

    for (i = 0; i < b->n; i++) {
        snprintf(name, sizeof(name), "%s%d", b->base, i);
        expect_key(name, key, sizeof(key));
        on = h_masters_holding(key, NULL);
        if (on > 0 || h_masters_without(key) != h_masters_alive()) {
            held[i % 2]++;
            if (first[0] == '\0') {
                snprintf(first, sizeof(first), "'%s' on %zu masters", key, on);
            }
        }
    }
    snprintf(b->why, sizeof(b->why), "%d of %d keys of TCP clients that reset and %d of %d "
             "of Unix clients that closed are still held (first: %s)", held[0], (b->n + 1) / 2,
             held[1], b->n / 2, first);
    return held[0] + held[1] == 0;
}

/*
 * Send a lease-mode LOCK of <base><i> on a new connection, over TCP for
 * even i, over the Unix socket for odd i; returns it.
 */
static int
lm_abrupt_send(const char *base, int i)
{
    char line[128];
    int fd = i % 2 == 0 ? expect_tcp() : h_connect_unix();

    snprintf(line, sizeof(line), "LOCK %s%d mode=lease ttl=600000", base, i);
    ck_assert_int_eq(h_send(fd, line), 0);
    return fd;
}

/*
 * The grant's reply reached fd before the client could close it (the
 * test was not scheduled in between, on a busy machine): that lease was
 * delivered, so the daemon rightly keeps it; the test releases it by
 * its token and returns true.  False when nothing has arrived yet.
 */
static bool
lm_abrupt_delivered(int fd, const char *base, int i)
{
    char *got, token[33], line[128];
    int queued = 0, c;

    if (ioctl(fd, FIONREAD, &queued) != 0 || queued == 0) {
        return false;
    }
    got = h_read_line(fd, CMD_MS);
    ck_assert_msg(got != NULL && h_reply_field(got, "token", token, sizeof(token)),
                  "client %d: '%s'", i, got != NULL ? got : "(nothing)");
    free(got);
    c = expect_tcp();
    snprintf(line, sizeof(line), "UNLOCK %s%d token=%s", base, i, token);
    got = h_cmd(c, line, CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "OK ", 3) == 0, "'%s' answered '%s'", line,
                  got != NULL ? got : "(nothing)");
    free(got);
    close(c);
    return true;
}

/* Close fd without reading: a TCP reset for even i, shutdown and close for odd i (Unix). */
static void
lm_abrupt_close(int fd, int i)
{
    if (i % 2 == 0) {
        expect_reset(fd);
        return;
    }
    shutdown(fd, SHUT_WR);
    close(fd);
}

/*
 * The end of a batch: ABRUPT_WINDOW ms after its last close, no key of
 * the batch is on any master, and none appears for 500 ms more.  (A
 * key may come and go within the window, while the daemon finds out
 * that its client has gone; the wait is the behaviour's deadline, not
 * a pause for settling.)
 */
static void
lm_batch_check(struct lm_batch *b, int64_t t_close, const char *what)
{
    int64_t left = t_close + ABRUPT_WINDOW - h_now_ms();

    h_sleep_ms(left);
    ck_assert_msg(lm_cond_batch_gone(b), "%s: %lld ms after the last client left, %s", what,
                  (long long)ABRUPT_WINDOW, b->why);
    ck_assert_msg(h_holds_for(lm_cond_batch_gone, b, 500, 20),
                  "%s: after the window, %s", what, b->why);
}

/*
 * A client that sends a lease-mode LOCK and closes abruptly, without
 * reading, does not leave the key held for its ttl (600 s): 3 s after
 * the close no master holds it, and none does 500 ms later.  Even
 * clients come over TCP and close with SO_LINGER 0 (a reset: the
 * daemon's write of the reply fails), odd ones over the Unix socket
 * with shutdown of the sending side and close (the write fails too).
 * (A TCP client that closes without a reset before its reply arrives
 * keeps the lease until its ttl: its kernel takes the reply, and the
 * daemon cannot tell that from a client that read it; PROTOCOL.md
 * section 1.)  First 12 clients, one after the other,
 * each close at once after the send; then 4 that close while their
 * acquire round is in flight: masters 0-2 are stopped (SIGSTOP) before
 * the send, the close comes once the daemon has sent the acquire (STAT
 * master.3.requests grew), and the masters continue right after it,
 * within node_timeout_ms (500), so the round can still be won.
 *
 * So that the grant comes after the close however slow this process is
 * between its send and its close, masters 0-2 hold every command for
 * 200 ms (CLIENT PAUSE, less than a round's deadline) around each of
 * the first clients.  A grant whose reply still reached the client's
 * socket before the close may have been read: the daemon keeps it, as
 * it must, and the test releases it itself (lm_abrupt_delivered).
 *
 * today: fails in most runs, not all: the clients that close at once
 * race their grant.  Of 9 runs with 30 such clients, 6 failed, with
 * from 1 to 29 of the 30 leases left on all 5 masters (both kinds of
 * close; e.g. "14 of 15 keys of reset clients and 15 of 15 of
 * shutdown+close clients are still held"); 3 passed.  The clients
 * that close mid-round passed in every run.
 */
START_TEST(lease_abrupt_close)
{
    struct lm_batch at_once = { "abrupt", ABRUPT_AT_ONCE, "" };
    struct lm_batch mid = { "abruptmid", ABRUPT_MID, "" };
    struct lm_grows g = { "master.3.requests", 0 };
    int64_t t_close;
    size_t m;
    int i, fd, delivered = 0;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    for (i = 0; i < ABRUPT_AT_ONCE; i++) {
        /*
         * Three masters hold every command for 200 ms (less than a round's
         * deadline), so that the grant comes after the close even when this
         * process is slow to get from its send to its close.
         */
        for (m = 0; m < 3; m++) {
            ck_assert_int_eq(h_master_cmd(m, NULL, "CLIENT PAUSE 200"), 0);
        }
        fd = lm_abrupt_send(at_once.base, i);
        if (lm_abrupt_delivered(fd, at_once.base, i)) {
            delivered++;
        }
        lm_abrupt_close(fd, i);
    }
    if (delivered > 0) {
        fprintf(stderr, "lease_abrupt_close: %d of %d grants reached their client before "
                "it closed (kept by the daemon, released by the test)\n", delivered,
                ABRUPT_AT_ONCE);
    }
    t_close = h_now_ms();
    lm_batch_check(&at_once, t_close, "closed at once");

    for (i = 0; i < ABRUPT_MID; i++) {
        ck_assert_int_eq(h_stat_once(g.name, &g.from), 0);
        for (m = 0; m < 3; m++) {
            ck_assert_int_eq(h_signal_master(m, SIGSTOP), 0);
        }
        fd = lm_abrupt_send(mid.base, i);
        ck_assert_msg(h_wait_until(lm_cond_grows, &g, H_PROMPT_MS),
                      "client %d: the daemon sent master 3 nothing within %d ms", i,
                      H_PROMPT_MS);
        lm_abrupt_close(fd, i);
        for (m = 0; m < 3; m++) {
            ck_assert_int_eq(h_signal_master(m, SIGCONT), 0);
        }
    }
    t_close = h_now_ms();
    lm_batch_check(&mid, t_close, "closed mid-round");
}
END_TEST

/*
 * A lease-mode LOCK of name on fd (ttl=30000), its key deleted on
 * masters 0-2, then "EXTEND <name> token=T ttl=600000" answered
 * "NOTHELD <name>", with masters 3 and 4 (which still hold T) stopped
 * during the EXTEND when slow is true: continued once NOTHELD came, so
 * that their extensions land after the round was decided.  Then within
 * H_PROMPT_MS no master holds T at the key (the daemon releases it at
 * once; the ttl, 600 s, would not).
 */
static void
lm_extend_notheld(int fd, const char *name, bool slow)
{
    struct expect_keyval kv;
    char key[64], token[64], line[128], want[96], *got;
    size_t i;

    expect_key(name, key, sizeof(key));
    snprintf(line, sizeof(line), "LOCK %s mode=lease ttl=30000", name);
    got = h_cmd(fd, line, CMD_MS);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", name)
                  && h_reply_field(got, "token", token, sizeof(token)) && h_is_token(token),
                  "'%s' answered '%s'", line, got != NULL ? got : "(nothing)");
    free(got);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "DEL %s", key), 0);
    }
    if (slow) {
        ck_assert_int_eq(h_signal_master(3, SIGSTOP), 0);
        ck_assert_int_eq(h_signal_master(4, SIGSTOP), 0);
    }
    snprintf(line, sizeof(line), "EXTEND %s token=%s ttl=600000", name, token);
    snprintf(want, sizeof(want), "NOTHELD %s", name);
    got = h_cmd(fd, line, CMD_MS);
    if (slow) {
        ck_assert_int_eq(h_signal_master(3, SIGCONT), 0);
        ck_assert_int_eq(h_signal_master(4, SIGCONT), 0);
    }
    ck_assert_msg(got != NULL && strcmp(got, want) == 0, "'%s' answered '%s', expected '%s'",
                  line, got != NULL ? got : "(nothing)", want);
    free(got);
    kv.key = key;
    kv.value = token;
    kv.want = 0;
    ck_assert_msg(h_wait_until(expect_cond_holding, &kv, H_PROMPT_MS),
                  "%s: %d ms after EXTEND's NOTHELD, %zu masters still hold the token "
                  "(PTTL on master 3: %lld, on master 4: %lld)", name, H_PROMPT_MS,
                  h_masters_holding(key, token), h_master_pttl(3, key),
                  h_master_pttl(4, key));
}

/*
 * A lease on lz with token T; its key deleted on 3 of 5 masters;
 * "EXTEND lz token=T ttl=600000" answers "NOTHELD lz", and within H_PROMPT_MS
 * no master holds T at the key.  The same for lz2, with the two
 * masters that hold T stopped (SIGSTOP) during the EXTEND and
 * continued once NOTHELD came, so that their extensions come after
 * the round was decided.
 *
 * today: fails in every run: 2 s after NOTHELD, masters 3 and 4 still
 * hold T with PTTL ~598000 (extended to 600000).  Whether that happens
 * for lz is a race (in 3 of 4 runs it did; with the round decided
 * before their replies came); for lz2 it always does.
 */
START_TEST(extend_notheld_cleans)
{
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    a = expect_tcp();
    lm_extend_notheld(a, "lz", false);
    lm_extend_notheld(a, "lz2", true);
    close(a);
}
END_TEST

/* Send raw text on fd, read its first reply line, then reset the connection. */
static char *
lm_read_one_then_reset(int fd, const char *text)
{
    char *got;

    ck_assert_int_eq(h_send_raw(fd, text, strlen(text)), 0);
    got = h_read_line(fd, CMD_MS);
    expect_reset(fd);
    return got;
}

/*
 * A client that read its lease-mode OK keeps the lease whatever way it
 * closes: with the PONG after it unread (a Unix socket reports that as
 * ECONNRESET), or with an abortive close (SO_LINGER 0, a TCP reset)
 * after reading everything.  The daemon cannot tell "read" from "not
 * read" once the client's side took the bytes, so it must not release:
 * the client would go on under a lock nobody holds.  Only a reply that
 * never reached the client is released (lease_abrupt_close).
 */
START_TEST(lease_read_then_reset)
{
    const char *names[2] = { "rr0", "rr1" };
    char key[64], line[96], *got;
    size_t i;
    int fd;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    for (i = 0; i < 2; i++) {
        fd = i == 0 ? h_connect_unix() : expect_tcp();
        ck_assert(fd >= 0);
        snprintf(line, sizeof(line), "LOCK %s mode=lease ttl=60000\n%s", names[i],
                 i == 0 ? "PING\n" : "");
        got = lm_read_one_then_reset(fd, line);
        ck_assert_msg(got != NULL && strncmp(got, "OK ", 3) == 0 && strstr(got, "token=") != NULL,
                      "%s: got '%s'", names[i], got != NULL ? got : "(nothing)");
        free(got);
    }
    for (i = 0; i < 2; i++) {
        expect_key(names[i], key, sizeof(key));
        /* Kept: the key stays on every master for the whole check. */
        ck_assert_msg(h_holds_for(lm_cond_holding_all, key, 1500, 20),
                      "%s: a lease whose OK the client read was released after its close",
                      names[i]);
    }
}
END_TEST

/*
 * Read the OK of one lease-mode LOCK sent together with a PING after a
 * few exchanges, then close with the PONG unread (the kernel answers
 * the daemon with a reset).  Returns the token the client read.
 */
static void
lm_read_ok_leave_pong(const char *lock_line, char *token, size_t size)
{
    char text[160], *got;
    int fd = expect_tcp(), i;
    struct pollfd pfd;

    /* After a few request/reply exchanges Linux delays its ACKs. */
    for (i = 0; i < 5; i++) {
        got = h_cmd(fd, "PING", LOCAL_MS);
        ck_assert_msg(got != NULL && strcmp(got, "PONG") == 0, "PING %d: '%s'", i,
                      got != NULL ? got : "(nothing)");
        free(got);
    }
    snprintf(text, sizeof(text), "%s\nPING\n", lock_line);
    ck_assert_int_eq(h_send_raw(fd, text, strlen(text)), 0);
    got = h_read_line(fd, CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "OK ", 3) == 0
                  && h_reply_field(got, "token", token, size),
                  "'%s' answered '%s'", lock_line, got != NULL ? got : "(nothing)");
    free(got);
    /* Wait until the PONG is in our socket, so that the close resets. */
    pfd.fd = fd;
    pfd.events = POLLIN;
    ck_assert_msg(poll(&pfd, 1, LOCAL_MS) == 1, "no PONG after the OK");
    close(fd);
}

/* arg: long long *.  STAT connections is at most the value. */
static bool
lm_cond_connections_at_most(void *arg)
{
    long long want = *(long long *)arg, seen;

    return h_stat_once("connections", &seen) == 0 && seen <= want;
}

/*
 * A client that read its lease-mode OK over TCP and closed with a later
 * reply unread keeps the lease: 12 clients each do 5 PINGs, then send
 * "LOCK name mode=lease ttl=9000 wait=0" and a PING in one write, read
 * the OK line only and close.  The PONG left unread makes the kernel
 * answer with a reset, and by then Linux had delayed its ACK of the OK,
 * so the daemon's count of acknowledged bytes (SIOCOUTQ) stops before
 * the OK.  Once the daemon has closed every one of those sessions,
 * STATUS with each token read must say the lease is held, and on a
 * counted name (limit=2) whose two permits were taken that way a third
 * client must be refused: a released grant would let it in.
 *
 * today: fails in every run: "STATUS lr0 token=...: 'FREE lr0'"; the
 * daemon logs "the OK of lease lr0 never reached the client; releasing
 * it" for the lease the client read.
 */
START_TEST(lease_read_reset_delayed_ack)
{
    char name[32], line[160], token[33], tokens[12][33], *got;
    long long base = 0;
    int i, fd;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    ck_assert_int_eq(h_stat_once("connections", &base), 0);
    for (i = 0; i < 12; i++) {
        snprintf(line, sizeof(line), "LOCK lr%d mode=lease ttl=9000 wait=0", i);
        lm_read_ok_leave_pong(line, tokens[i], sizeof(tokens[i]));
    }
    for (i = 0; i < 2; i++) {
        lm_read_ok_leave_pong("LOCK lrc limit=2 mode=lease ttl=9000 wait=0", token,
                              sizeof(token));
    }
    ck_assert_msg(h_wait_until(lm_cond_connections_at_most, &base, H_PROMPT_MS),
                  "the daemon did not close the 14 sessions within %d ms", H_PROMPT_MS);
    fd = expect_tcp();
    for (i = 0; i < 12; i++) {
        snprintf(name, sizeof(name), "lr%d", i);
        snprintf(line, sizeof(line), "STATUS %s token=%s", name, tokens[i]);
        got = h_cmd(fd, line, CMD_MS);
        ck_assert_msg(got != NULL && strncmp(got, "HELD ", 5) == 0
                      && strstr(got, " owner=self") != NULL,
                      "%s: '%s' (the client read this token)", line,
                      got != NULL ? got : "(nothing)");
        free(got);
    }
    got = h_cmd(fd, "LOCK lrc limit=2 mode=lease ttl=9000 wait=0", CMD_MS);
    ck_assert_msg(got != NULL && strcmp(got, "TIMEOUT lrc") == 0,
                  "a third holder of lrc (limit=2) after two read their OK: '%s'",
                  got != NULL ? got : "(nothing)");
    free(got);
    close(fd);
}
END_TEST

/*
 * A client on the Unix socket that sends a lease-mode LOCK, ends its
 * input (shutdown of its sending side) and closes once the OK has
 * arrived, without reading it, does not leave the lease held: the OK
 * was the session's last reply, the daemon lingers after writing it for
 * the client to read it (at most 2 s), and the close with the OK unread
 * (a reset on the Unix socket) tells it the OK never reached the client;
 * within H_PROMPT_MS no master holds its token (its ttl is 600 s).  The
 * client learns the token by peeking at the OK (MSG_PEEK), which leaves
 * it unread.
 *
 * today: fails in every run (6 of 6): "5 masters still hold the
 * lease", and the daemon logs no release.  The client's close empties
 * the daemon's count of unread bytes (SIOCOUTQ 0) as a read would, and
 * the lingering session took that for a read.  With the linger taken
 * out (the session closing as soon as its output is written) it fails
 * too (6 of 8 runs): the daemon closes before the client does and takes
 * the OK as delivered.
 */
START_TEST(lease_unread_at_end_of_input)
{
    char buf[256], token[33], key[64];
    struct expect_keyval kv;
    struct pollfd pfd;
    ssize_t n;
    int fd;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    fd = h_connect_unix();
    ck_assert(fd >= 0);
    ck_assert_int_eq(h_send(fd, "LOCK lu mode=lease ttl=600000"), 0);
    ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
    pfd.fd = fd;
    pfd.events = POLLIN;
    ck_assert_msg(poll(&pfd, 1, CMD_MS) == 1, "no reply to LOCK lu within %d ms", CMD_MS);
    n = recv(fd, buf, sizeof(buf) - 1, MSG_PEEK);
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    ck_assert_msg(h_is_reply(buf, "OK", "lu") && reply_token(buf, token),
                  "LOCK lu mode=lease ttl=600000 answered '%s'", buf);
    close(fd);
    expect_key("lu", key, sizeof(key));
    kv.key = key;
    kv.value = token;
    kv.want = 0;
    ck_assert_msg(h_wait_until(expect_cond_holding, &kv, H_PROMPT_MS),
                  "%d ms after its client closed with the OK unread, %zu masters still hold "
                  "the lease", H_PROMPT_MS, h_masters_holding(key, token));
}
END_TEST

#define NDAEMONS        2       /* daemons A (0) and B (1) */
#define PREFIX          "redlock:"  /* lock.key_prefix of every daemon */
#define CLUSTER_TIMEOUT_S 120   /* per cluster test (test 5 restarts masters 20 times) */
#define TOKEN_LEN       32      /* owner token: lowercase hex digits */

/* arg: const char **key.  The key is absent from every master. */
static bool
lm_cond_key_gone(void *arg)
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

    EXPECT_SETUP(.masters = NMASTERS, .daemons = NDAEMONS, .opts = &expect_prefix_opts);
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
    ck_assert_msg(h_wait_until(lm_cond_key_gone, &key, H_PROMPT_MS),
                  "key %s still on %zu masters after UNLOCK with its token", key,
                  NMASTERS - h_masters_without(key));

    snprintf(line, sizeof(line), "EXTEND l token=%s ttl=5000", token);
    EXPECT_REPLY(b, line, "NOTHELD l");
    ck_assert_msg(h_holds_for(lm_cond_key_gone, &key, 300, 50),
                  "EXTEND of a released lease re-created %s on %zu masters", key,
                  NMASTERS - h_masters_without(key));
    close(b);
}
END_TEST

static Suite *
lease_mode_suite(void)
{
    Suite *s = suite_create("lease_mode");

    EXPECT_ADD(s, lease_mode, TEST_TIMEOUT_S);
    EXPECT_ADD(s, lease_expired_not_extended, TEST_TIMEOUT_S);
    EXPECT_ADD(s, lease_nc_grants, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, lease_abrupt_close, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, extend_notheld_cleans, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, lease_read_then_reset, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, lease_read_reset_delayed_ack, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, lease_unread_at_end_of_input, TEST_TIMEOUT_S);
    EXPECT_ADD(s, lease_from_other_daemon, CLUSTER_TIMEOUT_S);
    return s;
}

const struct runner runner_main = {
    "check_lease_mode", lease_mode_suite, h_suite_init, h_suite_cleanup
};
