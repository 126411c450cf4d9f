/*
 * check_edges.c: acceptance tests for edge behaviours of redlockd,
 * end to end.
 *
 * Real redis-server masters and the real daemon binary on free
 * loopback ports (tests/harness.h); shell one-liners are run with the
 * real netcat (netcat-openbsd: nc -N, nc -q1, nc -U), forked and
 * exec'd here with a deadline, its stdin a pipe that this file writes
 * and then closes (what `printf ... | nc` does), and always reaped.
 *
 * The behaviours: one-liners that end their input at once (nc -N) get
 * every reply, in order, and a LOCK that would wait is answered
 * TIMEOUT; a lease-mode grant is never lost to a closing client, and a
 * grant whose client vanished does not stay on the masters; an UNLOCK
 * of a lock whose keys vanished says LOST and NOTHELD, and hands
 * nothing over; an EXTEND answered NOTHELD leaves no key behind; a
 * waiter that leaves during a hand-over does not hold up the next one,
 * and a closing session cancels its own pending LOCK before its lock is
 * handed over; a held lock is written back to masters that restarted empty; a
 * waiting LOCK waits out a loss of quorum, and one whose wait ends
 * says why.
 *
 * The comment before each test ends with "today:", what it showed
 * against the daemon of commit fc94074, before the engine changes
 * these tests were written for.  Each test is a test case of its own:
 * CK_RUN_CASE=<test> ./build/check_edges runs one.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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

#define NMASTERS        5       /* masters per test, unless it says otherwise */
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define LOCAL_MS        1000    /* deadline for a reply the daemon gives alone */
#define NC_MS           5000    /* deadline for one nc run, start to exit */
#define TEST_TIMEOUT_S  40      /* per test, unless CK_DEFAULT_TIMEOUT is set */
#define EG_HANDOVER_MS  2000    /* deadline for a waiter's grant once the name is free:
                                   one round (500 ms) and the retry delay (100 ms),
                                   with room for a slow, shared machine */
/* lock.key_prefix: the harness writes "" unless a test asks for another. */
#define EG_PREFIX       ""
#define EG_RELEASED     " released" /* release channel: key + this (PROTOCOL.md section 9) */

/* Every test's daemon, unless it says otherwise: a blocked LOCK retries
   after 0..100 ms; everything else is the harness's or the daemon's
   default (node_timeout_ms 500, down_after_ms 2000, no quarantine). */
static const struct h_daemon_opts eg_opts = {
    .retry_delay_ms = 100,
};

/* ---- fixture ---- */

/* Start of a test: its directory, nmasters masters, the daemon with opts. */
static void
eg_up(size_t nmasters, const struct h_daemon_opts *opts)
{
    ck_assert_msg(h_begin(tcase_name()) == 0, "cannot create the test directory");
    ck_assert_msg(h_start_masters(nmasters) == 0, "the masters did not start");
    ck_assert_msg(h_start_daemon(opts) == 0, "redlockd did not start (log above)");
}

static void
eg_teardown(void)
{
    h_end();
}

/* The key of lock name on the masters, into out. */
static void
eg_key(const char *name, char *out, size_t size)
{
    ck_assert((size_t)snprintf(out, size, "%s%s", EG_PREFIX, name) < size);
}

/* ---- conditions for h_wait_until / h_holds_for ---- */

/* arg: const char *key.  The key is absent from every running master. */
static bool
eg_cond_key_gone(void *arg)
{
    return h_masters_without(arg) == h_masters_alive();
}

/* A key and the value that must (not) be on the masters. */
struct eg_keyval {
    const char *key;        /* key on the masters */
    const char *value;      /* its value (a token) */
    size_t      want;       /* masters that must hold it */
};

/* arg: struct eg_keyval.  Exactly want masters hold key = value. */
static bool
eg_cond_holding(void *arg)
{
    struct eg_keyval *kv = arg;

    return h_masters_holding(kv->key, kv->value) == kv->want;
}

/* arg: const char *key.  Every running master holds the key. */
static bool
eg_cond_holding_all(void *arg)
{
    return h_masters_holding(arg, NULL) == h_masters_alive();
}

/* Require a STATS counter to reach want in time. */
static void
eg_wait_stat(const char *name, long long want, int64_t timeout_ms)
{
    long long seen;

    ck_assert_msg(h_wait_stat(name, want, false, timeout_ms, &seen),
                  "STAT %s stayed at %lld, expected %lld within %lld ms", name, seen, want,
                  (long long)timeout_ms);
}

/* ---- netcat ---- */

/* What one nc run printed and how it ended. */
struct eg_nc {
    char    out[4096];      /* nc's stdout, NUL-terminated (cut to fit) */
    size_t  len;            /* bytes in out */
    char    err[512];       /* nc's stderr, NUL-terminated (cut to fit) */
    int64_t first_ms;       /* ms from the start to the first LF out, -1 when none */
    int64_t exit_ms;        /* ms from the start to nc's exit, -1 when killed */
    int     status;         /* exit status (h_decode_status), -1 when killed */
};

/*
 * Run argv (nc and its arguments) with input on its stdin, then end of
 * file there (the pipe of `printf ... | nc`), and collect its stdout
 * until it exits or timeout_ms passed; then it is killed.  It is
 * always reaped.  The child dies with the test (h_child_setup).
 */
static void
eg_nc_argv(const char *const argv[], const char *input, int64_t timeout_ms, struct eg_nc *r)
{
    int64_t t0 = h_now_ms(), deadline = t0 + timeout_ms, left;
    char errpath[4096 + 16], buf[1024];
    pid_t parent = getpid(), pid, w;
    int in[2], out[2], errfd, status = 0;
    struct pollfd pfd;
    ssize_t n;
    size_t k;

    memset(r, 0, sizeof(*r));
    r->first_ms = -1;
    r->exit_ms = -1;
    r->status = -1;
    snprintf(errpath, sizeof(errpath), "%s/nc.err", h_dir());
    errfd = open(errpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_msg(errfd >= 0, "open %s: %s", errpath, strerror(errno));
    ck_assert_msg(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0, "pipe2: %s",
                  strerror(errno));
    pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        h_child_setup(parent);
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(errfd, 2) < 0) {
            _exit(127);
        }
        execvp(argv[0], (char *const *)argv);
        dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    /* The input is far below a pipe's capacity: this does not block. */
    for (k = 0; k < strlen(input); k += (size_t)n) {
        n = write(in[1], input + k, strlen(input) - k);
        if (n <= 0) {
            break;
        }
    }
    close(in[1]);
    for (;;) {
        left = deadline - h_now_ms();
        if (left <= 0) {
            break;
        }
        pfd.fd = out[0];
        pfd.events = POLLIN;
        pfd.revents = 0;
        if (poll(&pfd, 1, (int)left) <= 0) {
            continue;
        }
        n = read(out[0], buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;      /* end of nc's output: it exits */
        }
        if (r->first_ms < 0 && memchr(buf, '\n', (size_t)n) != NULL) {
            r->first_ms = h_now_ms() - t0;
        }
        k = (size_t)n < sizeof(r->out) - 1 - r->len ? (size_t)n : sizeof(r->out) - 1 - r->len;
        memcpy(r->out + r->len, buf, k);
        r->len += k;
    }
    close(out[0]);
    for (;;) {
        w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            r->exit_ms = h_now_ms() - t0;
            r->status = h_decode_status(status);
            break;
        }
        if ((w < 0 && errno != EINTR) || h_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
                continue;
            }
            break;
        }
        h_sleep_ms(5);
    }
    r->out[r->len] = '\0';
    n = pread(errfd, r->err, sizeof(r->err) - 1, 0);
    r->err[n > 0 ? n : 0] = '\0';
    close(errfd);
}

/* nc <flag> 127.0.0.1 <daemon port>, fed input. */
static void
eg_nc_tcp(const char *flag, const char *input, struct eg_nc *r)
{
    char port[16];
    const char *argv[] = { "nc", flag, "127.0.0.1", port, NULL };

    snprintf(port, sizeof(port), "%d", h_daemon_port());
    eg_nc_argv(argv, input, NC_MS, r);
}

/* nc <flag> -U <daemon socket>, fed input. */
static void
eg_nc_unix(const char *flag, const char *input, struct eg_nc *r)
{
    const char *argv[] = { "nc", flag, "-U", h_daemon_unix_path(), NULL };

    eg_nc_argv(argv, input, NC_MS, r);
}

/* nc's output and stderr as one printable string for a failure message. */
static const char *
eg_nc_show(const struct eg_nc *r)
{
    static char buf[8192];
    size_t i, k = 0;
    const char *parts[2] = { r->out, r->err };
    int p;

    for (p = 0; p < 2; p++) {
        k += (size_t)snprintf(buf + k, sizeof(buf) - k, p == 0 ? "stdout '" : "' stderr '");
        for (i = 0; parts[p][i] != '\0' && k < sizeof(buf) - 16; i++) {
            unsigned char c = (unsigned char)parts[p][i];

            if (c == '\n') {
                k += (size_t)snprintf(buf + k, sizeof(buf) - k, "\\n");
            } else if (c < 0x20 || c > 0x7e) {
                k += (size_t)snprintf(buf + k, sizeof(buf) - k, "\\x%02x", c);
            } else {
                buf[k++] = (char)c;
            }
        }
    }
    snprintf(buf + k, sizeof(buf) - k, "' exit %d after %lld ms", r->status,
             (long long)r->exit_ms);
    return buf;
}

/*
 * True when s is exactly "OK <name> validity=V holds=1\n" (one line,
 * V a positive integer).
 */
static bool
eg_is_session_ok(const char *s, const char *name)
{
    char line[512];
    const char *lf = strchr(s, '\n');
    long long validity = 0, holds = 0;

    if (lf == NULL || lf[1] != '\0' || (size_t)(lf - s) >= sizeof(line)) {
        return false;
    }
    memcpy(line, s, (size_t)(lf - s));
    line[lf - s] = '\0';
    return h_is_reply(line, "OK", name) && h_reply_int(line, "validity", &validity)
           && validity > 0 && h_reply_int(line, "holds", &holds) && holds == 1;
}

/* ---- 1. netcat one-liners ---- */

/*
 * `printf 'STATUS x\n' | nc -N 127.0.0.1 PORT` prints exactly "FREE x"
 * and ends.
 *
 * today: fails; nc prints nothing and exits 0 after 9 ms (the daemon
 * takes nc's FIN as a close and drops the STATUS it had not answered).
 */
START_TEST(nc_status_eof)
{
    struct eg_nc r;

    eg_up(NMASTERS, &eg_opts);
    eg_nc_tcp("-N", "STATUS x\n", &r);
    ck_assert_msg(strcmp(r.out, "FREE x\n") == 0 && r.exit_ms >= 0,
                  "printf 'STATUS x\\n' | nc -N: %s; expected 'FREE x\\n' and an exit",
                  eg_nc_show(&r));
}
END_TEST

/*
 * `echo 'TRYLOCK x' | nc -q1 127.0.0.1 PORT` prints
 * "OK x validity=N holds=1", and once nc has gone the key is on no
 * master (released with the session) within 3 s.
 *
 * today: fails; nc prints nothing and exits 0 after 1010 ms
 * (netcat-openbsd 1.219's -q1 also shuts down its sending side at the
 * end of its input, and the daemon takes that FIN as a close).
 */
START_TEST(nc_trylock_q1)
{
    char key[64];
    struct eg_nc r;

    eg_up(NMASTERS, &eg_opts);
    eg_key("x", key, sizeof(key));
    eg_nc_tcp("-q1", "TRYLOCK x\n", &r);
    ck_assert_msg(eg_is_session_ok(r.out, "x"),
                  "echo 'TRYLOCK x' | nc -q1: %s; expected 'OK x validity=N holds=1'",
                  eg_nc_show(&r));
    ck_assert_msg(h_wait_until(eg_cond_key_gone, key, 3000),
                  "key '%s' still on %zu masters 3 s after nc -q1 ended", key,
                  h_masters_holding(key, NULL));
}
END_TEST

/*
 * The same two one-liners over the Unix socket: `nc -N -U path` prints
 * exactly "FREE x", and `nc -q1 -U path` gets the TRYLOCK's OK, whose
 * key is then released with the session within 3 s.
 *
 * today: fails at the first; 'STATUS x' over nc -N -U prints nothing
 * and exits 0 after 9 ms, as over TCP.
 */
START_TEST(nc_unix_socket)
{
    char key[64];
    struct eg_nc r;

    eg_up(NMASTERS, &eg_opts);
    eg_key("x", key, sizeof(key));
    eg_nc_unix("-N", "STATUS x\n", &r);
    ck_assert_msg(strcmp(r.out, "FREE x\n") == 0 && r.exit_ms >= 0,
                  "printf 'STATUS x\\n' | nc -N -U: %s; expected 'FREE x\\n' and an exit",
                  eg_nc_show(&r));
    eg_nc_unix("-q1", "TRYLOCK x\n", &r);
    ck_assert_msg(eg_is_session_ok(r.out, "x"),
                  "echo 'TRYLOCK x' | nc -q1 -U: %s; expected 'OK x validity=N holds=1'",
                  eg_nc_show(&r));
    ck_assert_msg(h_wait_until(eg_cond_key_gone, key, 3000),
                  "key '%s' still on %zu masters 3 s after nc -q1 -U ended", key,
                  h_masters_holding(key, NULL));
}
END_TEST

/*
 * Several requests and then end of input at once,
 * `printf 'PING\nSTATUS a\nTRYLOCK b\nSTATUS b\n' | nc -N`: all four
 * are answered, in order: PONG, FREE a, OK b validity=N holds=1,
 * HELD b ttl=N owner=self ...; then b is released with the session.
 *
 * today: fails; nc prints only "PONG\n" and exits 0 after 8 ms (the
 * requests that needed the masters were dropped with the session).
 */
START_TEST(nc_pipelined_eof)
{
    char key[64], *lines[5], *save = NULL, *p;
    struct eg_nc r;
    long long v;
    int n = 0;

    eg_up(NMASTERS, &eg_opts);
    eg_key("b", key, sizeof(key));
    eg_nc_tcp("-N", "PING\nSTATUS a\nTRYLOCK b\nSTATUS b\n", &r);
    ck_assert_msg(r.len > 0 && r.out[r.len - 1] == '\n', "nc -N: %s", eg_nc_show(&r));
    {
        char copy[sizeof(r.out)];

        memcpy(copy, r.out, r.len + 1);
        for (p = strtok_r(copy, "\n", &save); p != NULL && n < 5;
             p = strtok_r(NULL, "\n", &save)) {
            lines[n++] = p;
        }
        ck_assert_msg(n == 4, "4 requests then EOF got %d lines: %s", n, eg_nc_show(&r));
        ck_assert_msg(strcmp(lines[0], "PONG") == 0, "line 1: %s", eg_nc_show(&r));
        ck_assert_msg(strcmp(lines[1], "FREE a") == 0, "line 2: %s", eg_nc_show(&r));
        ck_assert_msg(h_is_reply(lines[2], "OK", "b") && h_reply_int(lines[2], "validity", &v)
                      && v > 0 && h_reply_int(lines[2], "holds", &v) && v == 1,
                      "line 3: %s", eg_nc_show(&r));
        ck_assert_msg(h_is_reply(lines[3], "HELD", "b") && h_reply_int(lines[3], "ttl", &v)
                      && strstr(lines[3], " owner=self") != NULL,
                      "line 4: %s", eg_nc_show(&r));
    }
    ck_assert_msg(r.exit_ms >= 0, "nc -N did not end: %s", eg_nc_show(&r));
    ck_assert_msg(h_wait_until(eg_cond_key_gone, key, 3000),
                  "key '%s' still on %zu masters 3 s after the session ended", key,
                  h_masters_holding(key, NULL));
}
END_TEST

/*
 * `printf 'LOCK held\n' | nc -N` on a name that another connection
 * holds is answered "TIMEOUT held" promptly (within 3 s, far below
 * the holder's ttl) instead of waiting, and nc ends.
 *
 * today: fails; nc prints nothing and exits 0 after 8 ms (the pending
 * LOCK is cancelled with the session).
 */
START_TEST(nc_lock_held_eof)
{
    struct eg_nc r;
    int h;

    eg_up(NMASTERS, &eg_opts);
    h = expect_tcp();
    EXPECT_PREFIX(h, "LOCK held ttl=30000", "OK held ");
    eg_nc_tcp("-N", "LOCK held\n", &r);
    ck_assert_msg(strcmp(r.out, "TIMEOUT held\n") == 0,
                  "printf 'LOCK held\\n' | nc -N: %s; expected 'TIMEOUT held'",
                  eg_nc_show(&r));
    ck_assert_msg(r.first_ms >= 0 && r.first_ms <= 3000,
                  "TIMEOUT held came after %lld ms, expected within 3000 ms",
                  (long long)r.first_ms);
    ck_assert_msg(r.exit_ms >= 0, "nc -N did not end: %s", eg_nc_show(&r));
    EXPECT_PREFIX(h, "STATUS held", "HELD held ");
    close(h);
}
END_TEST

/*
 * Bytes after the last LF are not a request: `printf 'PING\nPING' |
 * nc -N` prints exactly one "PONG".
 *
 * today: passes (prints "PONG\n" only and exits).
 */
START_TEST(nc_trailing_bytes)
{
    struct eg_nc r;

    eg_up(NMASTERS, &eg_opts);
    eg_nc_tcp("-N", "PING\nPING", &r);
    ck_assert_msg(strcmp(r.out, "PONG\n") == 0 && r.exit_ms >= 0,
                  "printf 'PING\\nPING' | nc -N: %s; expected 'PONG\\n' and an exit",
                  eg_nc_show(&r));
}
END_TEST

/* ---- 2. lease-mode grants are never lost ---- */

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
    char input[128], name[32], key[64], line[256], token[64], first[8192] = "";
    size_t ok = 0, lost = 0;
    struct eg_nc r;
    long long v;
    int i, u;

    eg_up(NMASTERS, &eg_opts);
    u = expect_tcp();
    for (i = 0; i < LEASE_TRIES; i++) {
        snprintf(name, sizeof(name), "job5_%d", i);
        eg_key(name, key, sizeof(key));
        snprintf(input, sizeof(input), "LOCK %s mode=lease ttl=600000\n", name);
        eg_nc_tcp("-N", input, &r);
        r.out[strcspn(r.out, "\n")] = '\0';
        if (h_is_reply(r.out, "OK", name) && h_reply_field(r.out, "token", token, sizeof(token))
            && h_is_token(token) && h_reply_int(r.out, "validity", &v) && v > 0) {
            ok++;
            snprintf(line, sizeof(line), "UNLOCK %s token=%s", name, token);
            EXPECT_PREFIX(u, line, "OK ");
            continue;
        }
        if (first[0] == '\0') {
            snprintf(first, sizeof(first), "try %d: %s", i, eg_nc_show(&r));
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

/* A counter that grows: arg is a struct eg_grows. */
struct eg_grows {
    const char *name;       /* STAT name */
    long long   from;       /* value to exceed */
};

static bool
eg_cond_grows(void *arg)
{
    struct eg_grows *g = arg;
    long long v;

    return h_stat_once(g->name, &v) == 0 && v > g->from;
}

/* The keys "<prefix><base><i>", i < n, of one batch of abrupt clients. */
struct eg_batch {
    const char *base;       /* name without its number */
    int         n;          /* names in the batch */
    char        why[512];   /* the first key still held, for the message */
};

/* arg: struct eg_batch.  No key of the batch is on any running master. */
static bool
eg_cond_batch_gone(void *arg)
{
    struct eg_batch *b = arg;
    char name[64], key[96], first[160] = "";
    int i, held[2] = { 0, 0 };
    size_t on;

    for (i = 0; i < b->n; i++) {
        snprintf(name, sizeof(name), "%s%d", b->base, i);
        eg_key(name, key, sizeof(key));
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
eg_abrupt_send(const char *base, int i)
{
    char line[128];
    int fd = i % 2 == 0 ? expect_tcp() : h_connect_unix();

    snprintf(line, sizeof(line), "LOCK %s%d mode=lease ttl=600000", base, i);
    ck_assert_int_eq(h_send(fd, line), 0);
    return fd;
}

/*
 * An abortive close: SO_LINGER 0, so that the kernel sends a reset
 * (the daemon reads an error, not an end of input), then close(fd).
 */
static void
eg_reset(int fd)
{
    struct linger lg = { 1, 0 };

    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    close(fd);
}

/*
 * The grant's reply reached fd before the client could close it (the
 * test was not scheduled in between, on a busy machine): that lease was
 * delivered, so the daemon rightly keeps it; the test releases it by
 * its token and returns true.  False when nothing has arrived yet.
 */
static bool
eg_abrupt_delivered(int fd, const char *base, int i)
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
eg_abrupt_close(int fd, int i)
{
    if (i % 2 == 0) {
        eg_reset(fd);
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
eg_batch_check(struct eg_batch *b, int64_t t_close, const char *what)
{
    int64_t left = t_close + ABRUPT_WINDOW - h_now_ms();

    h_sleep_ms(left);
    ck_assert_msg(eg_cond_batch_gone(b), "%s: %lld ms after the last client left, %s", what,
                  (long long)ABRUPT_WINDOW, b->why);
    ck_assert_msg(h_holds_for(eg_cond_batch_gone, b, 500, 20),
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
 * it must, and the test releases it itself (eg_abrupt_delivered).
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
    struct eg_batch at_once = { "abrupt", ABRUPT_AT_ONCE, "" };
    struct eg_batch mid = { "abruptmid", ABRUPT_MID, "" };
    struct eg_grows g = { "master.3.requests", 0 };
    int64_t t_close;
    size_t m;
    int i, fd, delivered = 0;

    eg_up(NMASTERS, &eg_opts);
    for (i = 0; i < ABRUPT_AT_ONCE; i++) {
        /*
         * Three masters hold every command for 200 ms (less than a round's
         * deadline), so that the grant comes after the close even when this
         * process is slow to get from its send to its close.
         */
        for (m = 0; m < 3; m++) {
            ck_assert_int_eq(h_master_cmd(m, NULL, "CLIENT PAUSE 200"), 0);
        }
        fd = eg_abrupt_send(at_once.base, i);
        if (eg_abrupt_delivered(fd, at_once.base, i)) {
            delivered++;
        }
        eg_abrupt_close(fd, i);
    }
    if (delivered > 0) {
        fprintf(stderr, "lease_abrupt_close: %d of %d grants reached their client before "
                "it closed (kept by the daemon, released by the test)\n", delivered,
                ABRUPT_AT_ONCE);
    }
    t_close = h_now_ms();
    eg_batch_check(&at_once, t_close, "closed at once");

    for (i = 0; i < ABRUPT_MID; i++) {
        ck_assert_int_eq(h_stat_once(g.name, &g.from), 0);
        for (m = 0; m < 3; m++) {
            ck_assert_int_eq(h_signal_master(m, SIGSTOP), 0);
        }
        fd = eg_abrupt_send(mid.base, i);
        ck_assert_msg(h_wait_until(eg_cond_grows, &g, 2000),
                      "client %d: the daemon sent master 3 nothing within 2 s", i);
        eg_abrupt_close(fd, i);
        for (m = 0; m < 3; m++) {
            ck_assert_int_eq(h_signal_master(m, SIGCONT), 0);
        }
    }
    t_close = h_now_ms();
    eg_batch_check(&mid, t_close, "closed mid-round");
}
END_TEST

/* ---- 3. UNLOCK after the keys vanished ---- */

/* DEL key on every master. */
static void
eg_del_everywhere(const char *key)
{
    size_t i;

    for (i = 0; i < h_master_count(); i++) {
        ck_assert_msg(h_master_cmd(i, NULL, "DEL %s", key) == 0, "DEL %s on master %zu", key,
                      i);
    }
}

/* Read a line within ms and require it to start with "! LOST <name> reason=X". */
static void
eg_expect_lost(int fd, const char *name, int64_t ms, const char *what)
{
    char head[300], *got = h_read_line(fd, ms);

    snprintf(head, sizeof(head), "! LOST %s reason=", name);
    ck_assert_msg(got != NULL && strncmp(got, head, strlen(head)) == 0
                  && got[strlen(head)] != '\0',
                  "%s: got '%s', expected '%s<reason>'", what, got != NULL ? got : "(nothing)",
                  head);
    free(got);
}

/* Read a line within ms and require it to be exactly want. */
static void
eg_expect_line(int fd, const char *want, int64_t ms, const char *what)
{
    char *got = h_read_line(fd, ms);

    ck_assert_msg(got != NULL && strcmp(got, want) == 0, "%s: got '%s', expected '%s'", what,
                  got != NULL ? got : "(nothing)", want);
    free(got);
}

/*
 * Session LOCK x1, then DEL of its key on every master: UNLOCK x1 is
 * answered first with a pushed "! LOST x1 reason=..." and then
 * "NOTHELD x1".
 *
 * today: fails; UNLOCK x1 answers 'OK x1 holds=0', no LOST line.
 */
START_TEST(unlock_keys_vanished)
{
    char key[64];
    int a;

    eg_up(NMASTERS, &eg_opts);
    eg_key("x1", key, sizeof(key));
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK x1", "OK x1 ");
    eg_del_everywhere(key);
    ck_assert_int_eq(h_send(a, "UNLOCK x1"), 0);
    eg_expect_lost(a, "x1", CMD_MS, "UNLOCK x1 after DEL everywhere, first line");
    eg_expect_line(a, "NOTHELD x1", CMD_MS, "UNLOCK x1 after DEL everywhere, second line");
    close(a);
}
END_TEST

/*
 * Hand-over variant: H holds y1, W waits in LOCK y1, the key is
 * deleted on every master, H sends UNLOCK y1: H gets
 * "! LOST y1 reason=..." then "NOTHELD y1"; W gets "OK y1 ..." (the
 * name is free); and nothing was handed over (STAT handovers did not
 * grow): H no longer held anything to hand.
 *
 * today: fails at H's first line: UNLOCK y1 answers 'OK y1 holds=0',
 * no LOST line.
 */
START_TEST(unlock_vanished_handover)
{
    long long before = -1, after = -1;
    char key[64], *got;
    int h, w;

    eg_up(NMASTERS, &eg_opts);
    eg_key("y1", key, sizeof(key));
    h = expect_tcp();
    w = expect_tcp();
    EXPECT_PREFIX(h, "LOCK y1", "OK y1 ");
    ck_assert_int_eq(h_send(w, "LOCK y1"), 0);
    eg_wait_stat("waiters", 1, 3000);
    ck_assert_int_eq(h_stat_once("handovers", &before), 0);
    eg_del_everywhere(key);
    ck_assert_int_eq(h_send(h, "UNLOCK y1"), 0);
    eg_expect_lost(h, "y1", CMD_MS, "H's UNLOCK y1 after DEL everywhere, first line");
    eg_expect_line(h, "NOTHELD y1", CMD_MS, "H's UNLOCK y1 after DEL everywhere, second line");
    got = h_read_line(w, 3000);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", "y1"),
                  "the waiter's LOCK y1 got '%s', expected 'OK y1 ...'",
                  got != NULL ? got : "(nothing)");
    free(got);
    ck_assert_int_eq(h_stat_once("handovers", &after), 0);
    ck_assert_msg(after == before, "STAT handovers went from %lld to %lld", before, after);
    close(h);
    close(w);
}
END_TEST

/* ---- 4. EXTEND's NOTHELD leaves nothing ---- */

/*
 * A lease-mode LOCK of name on fd (ttl=30000), its key deleted on
 * masters 0-2, then "EXTEND <name> token=T ttl=600000" answered
 * "NOTHELD <name>", with masters 3 and 4 (which still hold T) stopped
 * during the EXTEND when slow is true: continued once NOTHELD came, so
 * that their extensions land after the round was decided.  Then within
 * 2 s no master holds T at the key.
 */
static void
eg_extend_notheld(int fd, const char *name, bool slow)
{
    struct eg_keyval kv;
    char key[64], token[64], line[128], want[96], *got;
    size_t i;

    eg_key(name, key, sizeof(key));
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
    ck_assert_msg(h_wait_until(eg_cond_holding, &kv, 2000),
                  "%s: 2 s after EXTEND's NOTHELD, %zu masters still hold the token "
                  "(PTTL on master 3: %lld, on master 4: %lld)", name,
                  h_masters_holding(key, token), h_master_pttl(3, key),
                  h_master_pttl(4, key));
}

/*
 * A lease on lz with token T; its key deleted on 3 of 5 masters;
 * "EXTEND lz token=T ttl=600000" answers "NOTHELD lz", and within 2 s
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

    eg_up(NMASTERS, &eg_opts);
    a = expect_tcp();
    eg_extend_notheld(a, "lz", false);
    eg_extend_notheld(a, "lz2", true);
    close(a);
}
END_TEST

/* ---- 5. a waiter that leaves mid-hand-over ---- */

/*
 * Three masters, the daemon's defaults (node_timeout_ms 500 from the
 * harness, down_after_ms 2000).  H holds z; W1 then W2 wait in LOCK z;
 * two of the three masters are stopped (SIGSTOP); H sends UNLOCK z, so
 * the hand-over to W1 cannot complete; W1 closes its connection; 2 s
 * later both masters continue (SIGCONT): W2 gets "OK z" within
 * EG_HANDOVER_MS of that: the name is free then, and the next waiter is
 * granted within one round (node_timeout_ms 500) and the retry delay
 * (retry_delay_ms 100); about 200 ms here, the rest is room for a slow,
 * shared machine.  (H's reply to UNLOCK is read, whatever it is.)
 *
 * today: fails, though not in the way expected (W2 waiting ~30 s for
 * the keys of the hand-over to W1 to expire): W2, the head once W1
 * left, tries while 2 of 3 masters are stopped and is answered
 * 'ERR NOQUORUM 1 of 3 masters answered, quorum is 2: ... timeout
 * after 500 ms; ... timeout after 500 ms' before the SIGCONT (test
 * lock_waits_out_outage is about that).
 */
START_TEST(waiter_leaves_handover)
{
    int64_t t_cont, left;
    bool early;
    char *got;
    int h, w1, w2;

    eg_up(3, &eg_opts);
    h = expect_tcp();
    w1 = expect_tcp();
    w2 = expect_tcp();
    EXPECT_PREFIX(h, "LOCK z ttl=30000", "OK z ");
    ck_assert_int_eq(h_send(w1, "LOCK z ttl=30000"), 0);
    eg_wait_stat("waiters", 1, 3000);
    ck_assert_int_eq(h_send(w2, "LOCK z ttl=30000"), 0);
    eg_wait_stat("waiters", 2, 3000);
    ck_assert_int_eq(h_signal_master(0, SIGSTOP), 0);
    ck_assert_int_eq(h_signal_master(1, SIGSTOP), 0);
    ck_assert_int_eq(h_send(h, "UNLOCK z"), 0);
    close(w1);
    /* The outage itself is the scenario: it lasts 2 s. */
    h_sleep_ms(2000);
    ck_assert_int_eq(h_signal_master(0, SIGCONT), 0);
    ck_assert_int_eq(h_signal_master(1, SIGCONT), 0);
    t_cont = h_now_ms();
    early = !h_quiet(w2, 0);
    got = h_read_line(h, EG_HANDOVER_MS);
    ck_assert_msg(got != NULL, "H got no reply to UNLOCK z within %d ms of SIGCONT",
                  EG_HANDOVER_MS);
    free(got);
    left = EG_HANDOVER_MS - (h_now_ms() - t_cont);
    got = h_read_line(w2, left > 0 ? left : 0);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", "z"),
                  "W2's LOCK z got '%s' within %d ms of SIGCONT%s, expected 'OK z ...'",
                  got != NULL ? got : "(nothing)", EG_HANDOVER_MS,
                  early ? " (it had come before the SIGCONT)" : "");
    free(got);
    close(h);
    close(w2);
}
END_TEST

/*
 * A closing session cancels its own pending LOCK before it releases its
 * locks, so that it never hands a lock to its own dying waiter.  A
 * session has one LOCK pending on a name it holds in one way: it holds
 * ow in session mode and asks for ow in lease mode (a lock of its own,
 * not a re-entry), which waits behind its own hold, first in line.  B
 * then waits too.  A's connection is reset (SO_LINGER 0: the daemon
 * reads an error, not an end of input, so A's LOCK is still queued when
 * the session closes).  B must get "OK ow" through the hand-over of A's
 * lock: STAT handovers goes up by one, and no release of ow is announced
 * on the masters (a subscriber of the name's channel on master 0 hears
 * nothing; STAT pubsub_wakeups stays 0).  Had A's lock gone to A's own
 * waiter, that grant would be released (and announced) for nobody, and
 * B would get ow only from a fresh round woken by the announcement.
 *
 * today: fails; B's LOCK ow gets no answer within 2 s of A's reset.
 * With the engine changes but lock_client_close() releasing the holds
 * before it cancels the waiter, B is granted, but only after a release
 * announcement (STAT pubsub_wakeups 1).
 */
START_TEST(close_cancels_own_waiter)
{
    redisContext *sub;
    redisReply *r;
    void *msg = NULL;
    long long handovers = -1, wakeups = -1;
    char *got;
    int a, b;

    eg_up(NMASTERS, &eg_opts);
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_PREFIX(a, "LOCK ow", "OK ow ");
    /*
     * Subscribed only now: a grant counts the channel's subscribers, and
     * one there at A's grant would look like another daemon waiting, to
     * which A's release would then go first (announced).
     */
    sub = h_redis_connect(h_master_port(0));
    ck_assert_msg(sub != NULL, "cannot connect to master 0");
    r = redisCommand(sub, "SUBSCRIBE %s", EG_PREFIX "ow" EG_RELEASED);
    ck_assert_msg(r != NULL && r->type == REDIS_REPLY_ARRAY, "SUBSCRIBE failed");
    freeReplyObject(r);
    ck_assert_int_eq(h_send(a, "LOCK ow mode=lease ttl=5000"), 0);
    eg_wait_stat("waiters", 1, CMD_MS);
    ck_assert_int_eq(h_send(b, "LOCK ow"), 0);
    eg_wait_stat("waiters", 2, CMD_MS);
    ck_assert_int_eq(h_stat_once("handovers", &handovers), 0);

    eg_reset(a);
    got = h_read_line(b, EG_HANDOVER_MS);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", "ow"),
                  "B's LOCK ow got '%s' within %d ms of A's reset, expected 'OK ow ...'",
                  got != NULL ? got : "(nothing)", EG_HANDOVER_MS);
    free(got);
    eg_wait_stat("handovers", handovers + 1, CMD_MS);
    ck_assert_int_eq(h_stat_once("pubsub_wakeups", &wakeups), 0);
    ck_assert_msg(wakeups == 0, "B was woken by a release announcement (pubsub_wakeups %lld)",
                  wakeups);
    /* Nothing announced: the read times out (H_REDIS_TIMEOUT_MS). */
    ck_assert_msg(redisGetReply(sub, &msg) != REDIS_OK,
                  "a release of ow was announced on master 0 after A's reset");
    redisFree(sub);
    EXPECT_REPLY(b, "UNLOCK ow", "OK ow holds=0");
    close(b);
}
END_TEST

/* ---- 7. locks are put back on masters that lost them ---- */

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
    struct h_daemon_opts o = eg_opts;
    struct eg_keyval kv;
    char key[64], *token, *got;
    long long pttl;
    size_t i;
    int a;

    o.restart_quarantine = false;
    eg_up(NMASTERS, &o);
    eg_key("two", key, sizeof(key));
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
    ck_assert_msg(h_wait_until(eg_cond_holding, &kv, 5000),
                  "5 s after masters 0 and 1 restarted empty, %zu of 5 masters hold the "
                  "lock's token", h_masters_holding(key, token));
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

/* arg: struct eg_keyval.  Neither master 0 nor 1 holds key = value. */
static bool
eg_cond_not_on_01(void *arg)
{
    struct eg_keyval *kv = arg;
    char *v0 = h_master_get(0, kv->key), *v1 = h_master_get(1, kv->key);
    bool none = (v0 == NULL || strcmp(v0, kv->value) != 0)
                && (v1 == NULL || strcmp(v1, kv->value) != 0);

    free(v0);
    free(v1);
    return none;
}

/*
 * The restore goes only to counted masters: with the restart quarantine
 * on (max_ttl_ms 3000, so about 3 s), masters 0 and 1 restarted empty
 * do not get the key back while they are quarantined, although renewals
 * run every second; once their quarantine is over, the next renewal puts
 * it back on them too.
 */
START_TEST(restore_skips_quarantined)
{
    struct h_daemon_opts o = eg_opts;
    struct eg_keyval kv;
    char key[64], *token;
    long long left = 0;
    size_t i;
    int a;

    o.restart_quarantine = true;
    o.max_ttl_ms = 3000;
    o.default_ttl_ms = 3000;
    eg_up(NMASTERS, &o);
    /* The fresh masters are quarantined too: wait until they count. */
    ck_assert_msg(h_wait_stat("masters_quarantined", 0, false, 8000, &left),
                  "masters still quarantined after 8 s (%lld)", left);
    eg_key("rq", key, sizeof(key));
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK rq ttl=3000", "OK rq ");
    token = h_master_get(2, key);
    ck_assert_msg(token != NULL && h_is_token(token), "master 2 has no token at '%s'", key);
    for (i = 0; i < 2; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
        ck_assert_msg(h_restart_master(i) == 0, "master %zu did not restart", i);
    }
    eg_wait_stat("masters_quarantined", 2, 5000);
    kv.key = key;
    kv.value = token;
    kv.want = NMASTERS;
    /* Two renewals (ttl/3 = 1 s) happen in this window; none writes to 0 or 1. */
    ck_assert_msg(h_holds_for(eg_cond_not_on_01, &kv, 2000, 20),
                  "a quarantined master got the lock's key back");
    ck_assert_msg(h_wait_until(eg_cond_holding, &kv, 8000),
                  "after the quarantine, %zu of 5 masters hold the lock's token",
                  h_masters_holding(key, token));
    free(token);
    close(a);
}
END_TEST

/* ---- 9. a waiting LOCK rides out an outage ---- */

/* Kill masters 0..2 (3 of 5) and wait until the daemon sees 2 up. */
static void
eg_lose_quorum(void)
{
    size_t i;

    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
    }
    eg_wait_stat("masters_up", 2, 5000);
}

/*
 * With 3 of 5 masters down, "LOCK n wait=60000" gets no reply for 1 s;
 * the three masters restart; the LOCK answers "OK n ..." within 10 s
 * of their return.
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

    eg_up(NMASTERS, &eg_opts);
    eg_lose_quorum();
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
    got = h_read_line(a, 10000);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", "n"),
                  "LOCK n got '%s' within 10 s of the masters' return (after %lld ms), "
                  "expected 'OK n ...'", got != NULL ? got : "(nothing)",
                  (long long)(h_now_ms() - t_back));
    free(got);
    close(a);
}
END_TEST

/*
 * With 3 of 5 masters down, "LOCK m wait=1500" answers a line that
 * starts "ERR NOQUORUM" after at least ~1400 ms and before 4000 ms,
 * and its text names a dead master's address; "TRYLOCK m" answers
 * "ERR NOQUORUM" within 1 s.
 *
 * today: fails; the LOCK answers 'ERR NOQUORUM ...' after 2 ms.
 */
START_TEST(noquorum_after_wait)
{
    char addr[64], *got;
    int64_t t0, took;
    bool named = false;
    size_t i;
    int a;

    eg_up(NMASTERS, &eg_opts);
    eg_lose_quorum();
    a = expect_tcp();
    t0 = h_now_ms();
    got = h_cmd(a, "LOCK m wait=1500", 5000);
    took = h_now_ms() - t0;
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM", 12) == 0,
                  "LOCK m wait=1500 with 3 of 5 masters down answered '%s' after %lld ms",
                  got != NULL ? got : "(nothing)", (long long)took);
    ck_assert_msg(took >= 1400 && took < 4000,
                  "LOCK m wait=1500 answered ERR NOQUORUM after %lld ms, expected "
                  "1400..4000 ms", (long long)took);
    for (i = 0; i < 3; i++) {
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", h_master_port(i));
        named = named || strstr(got, addr) != NULL;
    }
    ck_assert_msg(named, "'%s' names none of the dead masters", got);
    free(got);
    t0 = h_now_ms();
    got = h_cmd(a, "TRYLOCK m", 1000);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM", 12) == 0,
                  "TRYLOCK m with 3 of 5 masters down answered '%s' within 1 s (%lld ms)",
                  got != NULL ? got : "(nothing)", (long long)(h_now_ms() - t0));
    free(got);
    close(a);
}
END_TEST

/* ---- lease grants that were read are never released ---- */

/* Send raw text on fd, read its first reply line, then reset the connection. */
static char *
eg_read_one_then_reset(int fd, const char *text)
{
    char *got;

    ck_assert_int_eq(h_send_raw(fd, text, strlen(text)), 0);
    got = h_read_line(fd, CMD_MS);
    eg_reset(fd);
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

    eg_up(NMASTERS, &eg_opts);
    for (i = 0; i < 2; i++) {
        fd = i == 0 ? h_connect_unix() : expect_tcp();
        ck_assert(fd >= 0);
        snprintf(line, sizeof(line), "LOCK %s mode=lease ttl=60000\n%s", names[i],
                 i == 0 ? "PING\n" : "");
        got = eg_read_one_then_reset(fd, line);
        ck_assert_msg(got != NULL && strncmp(got, "OK ", 3) == 0 && strstr(got, "token=") != NULL,
                      "%s: got '%s'", names[i], got != NULL ? got : "(nothing)");
        free(got);
    }
    for (i = 0; i < 2; i++) {
        eg_key(names[i], key, sizeof(key));
        /* Kept: the key stays on every master for the whole check. */
        ck_assert_msg(h_holds_for(eg_cond_holding_all, key, 1500, 20),
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
eg_read_ok_leave_pong(const char *lock_line, char *token, size_t size)
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
eg_cond_connections_at_most(void *arg)
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

    eg_up(NMASTERS, &eg_opts);
    ck_assert_int_eq(h_stat_once("connections", &base), 0);
    for (i = 0; i < 12; i++) {
        snprintf(line, sizeof(line), "LOCK lr%d mode=lease ttl=9000 wait=0", i);
        eg_read_ok_leave_pong(line, tokens[i], sizeof(tokens[i]));
    }
    for (i = 0; i < 2; i++) {
        eg_read_ok_leave_pong("LOCK lrc limit=2 mode=lease ttl=9000 wait=0", token,
                              sizeof(token));
    }
    ck_assert_msg(h_wait_until(eg_cond_connections_at_most, &base, LOCAL_MS),
                  "the daemon did not close the 14 sessions within %d ms", LOCAL_MS);
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
 * UNLOCK of a session-mode lock when too few masters answer: the hold is
 * gone (nothing renews it any more, its keys expire by their ttl), so
 * the session hears "! LOST x reason=quorum" first, then "NOTHELD x".
 */
START_TEST(unlock_without_quorum)
{
    size_t i;
    int a;

    eg_up(NMASTERS, &eg_opts);
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK nq1", "OK nq1 ");
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
    }
    ck_assert_int_eq(h_send(a, "UNLOCK nq1"), 0);
    eg_expect_line(a, "! LOST nq1 reason=quorum", CMD_MS, "UNLOCK nq1 without a quorum, first");
    eg_expect_line(a, "NOTHELD nq1", CMD_MS, "UNLOCK nq1 without a quorum, second");
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

    eg_up(NMASTERS, &eg_opts);
    eg_key("sg1", key, sizeof(key));
    for (i = 3; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET %s someone-else", key), 0);
    }
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK sg1", "OK sg1 ");
    ck_assert_int_eq(h_signal_master(2, SIGSTOP), 0);
    ck_assert_int_eq(h_send(a, "UNLOCK sg1"), 0);
    eg_expect_line(a, "! LOST sg1 reason=quorum", CMD_MS, "UNLOCK sg1, first line");
    eg_expect_line(a, "NOTHELD sg1", CMD_MS, "UNLOCK sg1, second line");
    ck_assert_int_eq(h_signal_master(2, SIGCONT), 0);
    close(a);
}
END_TEST

/*
 * A LOCK already waiting (queued behind a holder) when the client's input
 * ends is answered TIMEOUT promptly, and the session then ends.
 */
START_TEST(queued_lock_input_ends)
{
    int64_t t0;
    char *got;
    int a, b;

    eg_up(NMASTERS, &eg_opts);
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_PREFIX(a, "LOCK q1", "OK q1 ");
    ck_assert_int_eq(h_send(b, "LOCK q1"), 0);
    eg_wait_stat("waiters", 1, CMD_MS);
    t0 = h_now_ms();
    ck_assert_int_eq(shutdown(b, SHUT_WR), 0);
    got = h_read_line(b, 3000);
    ck_assert_msg(got != NULL && strcmp(got, "TIMEOUT q1") == 0,
                  "queued LOCK after end of input: got '%s' after %lld ms",
                  got != NULL ? got : "(nothing)", (long long)(h_now_ms() - t0));
    free(got);
    ck_assert_msg(h_expect_eof(b, CMD_MS), "the session did not end after its last reply");
    close(b);
    close(a);
}
END_TEST

/* Each test is a test case of its own (CK_RUN_CASE=<test> runs one). */
#define EG_ADD(s, test) expect_add_case((s), #test, (test), eg_teardown, TEST_TIMEOUT_S)

static Suite *
edges_suite(void)
{
    Suite *s = suite_create("redlockd edges");

    EG_ADD(s, nc_status_eof);
    EG_ADD(s, nc_trylock_q1);
    EG_ADD(s, nc_unix_socket);
    EG_ADD(s, nc_pipelined_eof);
    EG_ADD(s, nc_lock_held_eof);
    EG_ADD(s, nc_trailing_bytes);
    EG_ADD(s, lease_nc_grants);
    EG_ADD(s, lease_abrupt_close);
    EG_ADD(s, unlock_keys_vanished);
    EG_ADD(s, unlock_vanished_handover);
    EG_ADD(s, extend_notheld_cleans);
    EG_ADD(s, waiter_leaves_handover);
    EG_ADD(s, close_cancels_own_waiter);
    EG_ADD(s, relock_restarted_masters);
    EG_ADD(s, restore_skips_quarantined);
    EG_ADD(s, lock_waits_out_outage);
    EG_ADD(s, noquorum_after_wait);
    EG_ADD(s, lease_read_then_reset);
    EG_ADD(s, lease_read_reset_delayed_ack);
    EG_ADD(s, unlock_without_quorum);
    EG_ADD(s, unlock_silent_holder_not_gone);
    EG_ADD(s, queued_lock_input_ends);
    return s;
}

const struct runner runner_main = { "check_edges", edges_suite, h_suite_init, h_suite_cleanup };
