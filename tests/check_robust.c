/*
 * check_robust.c: redlockd under faults and hostile input, end to end.
 *
 * Real redis-server masters and the real daemon on free loopback ports
 * (tests/harness.h).  Master faults: a master that goes silent with its
 * connection open is dropped after redis.down_after_ms or
 * redis.max_pending; a restarted master is quarantined
 * (lock.restart_quarantine), with the same scenario run without the
 * quarantine as the control that shows the danger is real; commands
 * for a stopped master that the kernel cannot take wait in the daemon
 * and all arrive once it runs again (partial writes); a lost lock
 * keeps its keys until its validity ends; a wall-clock jump changes
 * nothing.  Hostile clients: slowloris lines, clients that never read,
 * max_clients, max_locks_per_client, AUTH and protected mode.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <check.h>
#include <hiredis/hiredis.h>

#include "client/client.h"
#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define LOCAL_MS        1000    /* deadline for a reply the daemon gives alone */
#define TEST_TIMEOUT_S  40
#define FAKETIME_LIB    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

/* ---- helpers ---- */

static int64_t rb_masters_started_ms;   /* just before the masters were started */

static void
rb_up(const struct h_daemon_opts *opts)
{
    ck_assert_msg(h_begin(tcase_name()) == 0, "cannot create the test directory");
    rb_masters_started_ms = h_now_ms();
    ck_assert_msg(h_start_masters(NMASTERS) == 0, "the masters did not start");
    ck_assert_msg(h_start_daemon(opts) == 0, "redlockd did not start (log above)");
}

static void
rb_teardown(void)
{
    h_end();
}

/* Require a STATS counter to reach want (or, with at_least, want or more) in time. */
static void
rb_wait_stat(const char *name, long long want, bool at_least, int64_t timeout_ms)
{
    long long seen;

    ck_assert_msg(h_wait_stat(name, want, at_least, timeout_ms, &seen),
                  "STAT %s stayed at %lld, expected %s%lld within %lld ms", name, seen,
                  at_least ? ">= " : "", want, (long long)timeout_ms);
}

/* True when the daemon log contains text. */
static bool
rb_log_has(const char *text)
{
    return h_log_find(0, text, NULL, 0);
}

/* arg: const char **key.  The key is absent from every master that answers. */
static bool
rb_cond_key_gone(void *arg)
{
    return h_masters_without(*(const char **)arg) == h_masters_alive();
}

/* ---- master faults ---- */

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

    rb_up(&o);
    a = expect_tcp();
    ck_assert_int_eq(h_signal_master(0, SIGSTOP), 0);
    for (i = 0; i < 3; i++) {
        snprintf(line, sizeof(line), "TRYLOCK sm%d ttl=5000", i);
        EXPECT_PREFIX(a, line, "OK ");
    }
    rb_wait_stat("master.0.up", 0, false, 5000);
    ck_assert_msg(rb_log_has("(redis.down_after_ms)"),
                  "the log does not say why the master was dropped");
    /* The others carry on: quorum 3 of the 4 left. */
    EXPECT_PREFIX(a, "TRYLOCK sm9 ttl=5000", "OK sm9 ");
    ck_assert_int_eq(h_signal_master(0, SIGCONT), 0);
    rb_wait_stat("master.0.up", 1, false, 10000);
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
START_TEST(ghost_of_dropped_try_taken_over)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .node_timeout_ms = 1000,
                               .min_ttl_ms = 1100, .down_after_ms = 1500 };
    char *got, *value;
    int a, w, i;

    rb_up(&o);
    a = expect_tcp();
    w = expect_tcp();
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_signal_master(i, SIGSTOP), 0);
    }
    got = h_cmd(a, "TRYLOCK other", 5000);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM ", 13) == 0,
                  "TRYLOCK with 3 of 5 masters stopped answered '%s'",
                  got != NULL ? got : "(nothing)");
    free(got);
    ck_assert_int_eq(h_send(w, "LOCK g wait=20000"), 0);
    rb_wait_stat("masters_up", 2, false, 5000);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_signal_master(i, SIGCONT), 0);
    }
    got = h_read_line(w, 8000);
    ck_assert_msg(got != NULL && strncmp(got, "OK g validity=", 14) == 0,
                  "w's LOCK g answered '%s' within 8 s of the masters continuing: its "
                  "dropped try's record was waited out, not taken over",
                  got != NULL ? got : "(nothing)");
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
 * redis.max_pending bounds what a silent master holds even when
 * down_after_ms is long: the request past the bound drops it at once.
 */
START_TEST(max_pending_drops_master)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .max_pending = 4,
                               .down_after_ms = 600000 };
    char line[64];
    int a, i;

    rb_up(&o);
    a = expect_tcp();
    ck_assert_int_eq(h_signal_master(1, SIGSTOP), 0);
    /* Past 4 unanswered and a round's deadline (500 ms) without a reply. */
    for (i = 0; i < 30; i++) {
        long long up = -1;

        snprintf(line, sizeof(line), "TRYLOCK mp%d ttl=5000", i);
        EXPECT_PREFIX(a, line, "OK ");
        if (h_stat_once("master.1.up", &up) == 0 && up == 0) {
            break;
        }
        h_sleep_ms(100);
    }
    rb_wait_stat("master.1.up", 0, false, 1000);
    ck_assert_msg(rb_log_has("(redis.max_pending)"),
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

    rb_up(&o);
    a = expect_tcp();
    for (i = 0; i < 40; i++) {
        snprintf(line, sizeof(line), "LOCK b%zu ttl=30000", i);
        EXPECT_PREFIX(a, line, "OK b");
    }
    close(a);
    ck_assert_msg(h_wait_until(rb_cond_key_gone, &key, 2000), "b39 was not released");
    for (i = 0, left = 0; i < 40; i++) {
        snprintf(line, sizeof(line), "b%zu", i);
        left += h_masters_holding(line, NULL);
    }
    ck_assert_msg(left == 0, "%zu keys of the closed session left on the masters", left);
    rb_wait_stat("masters_up", NMASTERS, false, LOCAL_MS);
    for (i = 0; i < NMASTERS; i++) {
        snprintf(line, sizeof(line), "master.%zu.reconnects", i);
        ck_assert_int_eq(h_stat_once(line, &reconnects), 0);
        ck_assert_msg(reconnects == 0, "master %zu was dropped during the burst", i);
    }
    ck_assert(!rb_log_has("(redis.max_pending)"));
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
#define RB_PW_CONNS     8           /* client connections that pipeline */
#define RB_PW_WINDOW    16          /* requests in flight per connection */
#define RB_PW_NAME      250         /* lock name bytes, the longest allowed */
#define RB_PW_LINE      320         /* room for one request or reply line */
#define RB_PW_BATCH     2000        /* requests between two looks at the queues */
#define RB_PW_MAX       60000       /* give up filling after this many */
#define RB_PW_FILL_MS   10000       /* ... or after this long (about 1 s is needed;
                                       ten times this under $REDLOCKD_WRAP) */
#define RB_PW_MARGIN    (1024 * 1024) /* bytes past the kernel queues to send */
#define RB_PW_CATCHUP_MS 5000       /* deadline for master 0 to run them all */
/*
 * Bytes of one acquire on the wire, at least, alone or in a batch: the
 * key twice (the name's and the record's, both the name: no key_prefix
 * here), the token (32 hex digits) and the release channel (the key and
 * a suffix); alone it also carries the script's sha1 (40 hex digits), in
 * a batch its operation and counts; RESP framing only adds to it.
 */
#define RB_PW_CMD_MIN   (40 + RB_PW_NAME + 32 + RB_PW_NAME)

/* One pipelining client connection. */
struct rb_pipe {
    int     fd;                             /* non-blocking, to the daemon */
    size_t  inflight;                       /* requests sent without a reply yet */
    char    out[RB_PW_WINDOW * RB_PW_LINE]; /* request bytes not written yet */
    size_t  out_len;                        /* bytes in out */
    char    in[2 * RB_PW_LINE];             /* the reply being read */
    size_t  in_len;                         /* bytes in in */
};

/* Queue on p the request for lock number n (a new 250-byte name). */
static void
rb_pipe_queue(struct rb_pipe *p, size_t n)
{
    char name[RB_PW_NAME + 1];
    int len;

    len = snprintf(name, sizeof(name), "pw%08zu-", n);
    memset(name + len, 'x', RB_PW_NAME - (size_t)len);
    name[RB_PW_NAME] = '\0';
    p->out_len += (size_t)snprintf(p->out + p->out_len, sizeof(p->out) - p->out_len,
                                   "TRYLOCK %s mode=lease ttl=60000\n", name);
    p->inflight++;
}

/*
 * Read what p has; count every reply line (all must be OK) in *ok.
 * Returns 0, or -1 with the reason in why.
 */
static int
rb_pipe_read(struct rb_pipe *p, size_t *ok, char *why, size_t size)
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
 * on, at most RB_PW_WINDOW in flight on each, and read every reply (OK
 * replies are counted in *ok) before deadline.  Returns 0, or -1 with
 * the reason in why.
 */
static int
rb_pipe_run(struct rb_pipe *p, size_t np, size_t count, size_t *next, size_t *ok,
            int64_t deadline, char *why, size_t size)
{
    struct pollfd pfd[RB_PW_CONNS];
    size_t issued = 0, done = *ok + count, i;
    int64_t left;
    ssize_t w;

    while (*ok < done) {
        for (i = 0; i < np; i++) {
            while (p[i].inflight < RB_PW_WINDOW && issued < count) {
                rb_pipe_queue(&p[i], (*next)++);
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
                && rb_pipe_read(&p[i], ok, why, size) != 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* What rb_cond_calls waits for. */
struct rb_calls {
    long long   want;       /* grants master 0 must reach (its SET calls: one per
                               granted acquire of a fresh name, batched or not) */
    long long   seen;       /* the last count read (-1: none) */
};

/* arg: struct rb_calls *.  Master 0 has granted want acquires or more. */
static bool
rb_cond_calls(void *arg)
{
    struct rb_calls *c = arg;

    c->seen = h_master_calls(0, "set");
    return c->seen >= c->want;
}

/* DBSIZE of master i, or -1. */
static long long
rb_master_dbsize(size_t i)
{
    redisContext *c = h_redis_connect(h_master_port(i));
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
rb_cond_key_everywhere(void *arg)
{
    return h_masters_holding(*(const char **)arg, NULL) == NMASTERS;
}

START_TEST(partial_write_to_stopped_master)
{
    /* Neither limit may drop the stopped master during the test. */
    struct h_daemon_opts o = { .retry_delay_ms = 100, .max_pending = 1000000,
                               .down_after_ms = 600000, .log_level = "info" };
    struct rb_pipe p[RB_PW_CONNS];
    struct rb_calls calls;
    const char *key = "pw-fresh";
    long long base, send_q = 0, recv_q = 0, sent_min = 0, v;
    int64_t t0, t_fill, t_cont, fill_ms;
    size_t i, next = 0, ok = 0;
    char why[256] = "";
    int a, port, conns = -1;
    bool failed = false;

    rb_up(&o);
    port = h_master_port(0);
    memset(p, 0, sizeof(p));
    for (i = 0; i < RB_PW_CONNS; i++) {
        p[i].fd = expect_tcp();
        ck_assert_int_eq(fcntl(p[i].fd, F_SETFL, fcntl(p[i].fd, F_GETFL) | O_NONBLOCK), 0);
    }
    base = h_master_calls(0, "set");
    ck_assert_msg(base >= 0, "cannot read master 0's INFO commandstats");
    /* valgrind makes the daemon some 20 times slower. */
    fill_ms = getenv("REDLOCKD_WRAP") != NULL ? 10 * RB_PW_FILL_MS : RB_PW_FILL_MS;

    ck_assert_int_eq(h_signal_master(0, SIGSTOP), 0);
    /* No assertion until master 0 runs again: record the first failure. */
    t0 = h_now_ms();
    for (;;) {
        if (rb_pipe_run(p, RB_PW_CONNS, RB_PW_BATCH, &next, &ok, t0 + fill_ms, why,
                        sizeof(why)) != 0) {
            failed = true;
            break;
        }
        conns = h_tcp_queues(port, &send_q, &recv_q, NULL);
        sent_min = (long long)ok * RB_PW_CMD_MIN;
        if (conns < 0 || sent_min >= send_q + recv_q + RB_PW_MARGIN || ok >= RB_PW_MAX) {
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
                  "bytes): no partial write; raise RB_PW_MAX", ok, sent_min, send_q, recv_q);

    /* Every acquire reaches master 0 without a new command to push it. */
    calls.want = base + (long long)ok;
    calls.seen = -1;
    ck_assert_msg(h_wait_until(rb_cond_calls, &calls, RB_PW_CATCHUP_MS),
                  "master 0 ran %lld of the %zu acquires sent while it was stopped "
                  "within %d ms: the rest stayed in the daemon's output buffer",
                  calls.seen < 0 ? -1 : calls.seen - base, ok, RB_PW_CATCHUP_MS);
    fprintf(stderr, "partial_write_to_stopped_master: master 0 ran all %zu %lld ms "
            "after SIGCONT\n", ok, (long long)(h_now_ms() - t_cont));
    v = rb_master_dbsize(0);
    ck_assert_msg(v >= (long long)ok, "master 0 holds %lld keys, expected the %zu leases",
                  v, ok);

    /* Master 0 was never dropped, and it takes part in a new lock. */
    ck_assert_int_eq(h_stat_once("master.0.up", &v), 0);
    ck_assert_msg(v == 1, "master 0 is down after the test");
    ck_assert_int_eq(h_stat_once("master.0.reconnects", &v), 0);
    ck_assert_msg(v == 0, "master 0 was dropped and reconnected %lld times", v);
    rb_wait_stat("masters_up", NMASTERS, false, LOCAL_MS);
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK pw-fresh ttl=60000", "OK pw-fresh ");
    ck_assert_msg(h_wait_until(rb_cond_key_everywhere, &key, LOCAL_MS),
                  "pw-fresh is on %zu masters, expected all %d", h_masters_holding(key, NULL),
                  NMASTERS);
    v = h_master_pttl(0, key);
    ck_assert_msg(v > 50000, "pw-fresh has pttl %lld on master 0", v);
    EXPECT_REPLY(a, "UNLOCK pw-fresh", "OK pw-fresh holds=0");
    ck_assert_msg(h_wait_until(rb_cond_key_gone, &key, LOCAL_MS),
                  "pw-fresh stayed on a master after UNLOCK");
    close(a);
    for (i = 0; i < RB_PW_CONNS; i++) {
        close(p[i].fd);
    }
}
END_TEST

/*
 * Masters that have just started are quarantined for max_ttl_ms (plus
 * drift): no quorum at first, the NOQUORUM text and STATS say why, and
 * grants resume when the quarantine ends.
 */
START_TEST(quarantine_fresh_masters)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .restart_quarantine = true,
                               .default_ttl_ms = 1500, .max_ttl_ms = 2500 };
    long long left;
    char *got;
    int a;

    rb_up(&o);
    a = expect_tcp();
    ck_assert_int_eq(h_stat_once("masters_quarantined", &left), 0);
    ck_assert_msg(left >= 3, "only %lld masters quarantined just after they started", left);
    ck_assert_int_eq(h_stat_once("master.0.quarantine_ms", &left), 0);
    ck_assert_msg(left > 0 && left <= 2500 + 25 + 2 + 1000,
                  "master.0.quarantine_ms is %lld", left);
    /*
     * Never shorter than max_ttl + drift from the master's real start,
     * which came after rb_masters_started_ms (Redis's uptime_in_seconds
     * may read 1 a few ms after the start).
     */
    ck_assert_msg(h_now_ms() + left >= rb_masters_started_ms + 2500 + 25 + 2,
                  "the quarantine ends %lld ms before max_ttl + drift from the start",
                  (long long)(rb_masters_started_ms + 2527 - h_now_ms() - left));
    got = h_cmd(a, "TRYLOCK qf", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM ", 13) == 0
                  && strstr(got, "quarantined after a restart") != NULL,
                  "TRYLOCK during the quarantine answered '%s'", got ? got : "(nothing)");
    free(got);
    ck_assert_msg(rb_log_has("(lock.restart_quarantine)"), "the log does not name the quarantine");
    rb_wait_stat("masters_quarantined", 0, false, 6000);
    ck_assert_msg(h_wait_log(0, "restart quarantine over", 2000),
                  "the end of the quarantine was not logged");
    EXPECT_PREFIX(a, "TRYLOCK qf", "OK qf ");
    EXPECT_REPLY(a, "UNLOCK qf", "OK qf holds=0");
    close(a);
}
END_TEST

/*
 * The scenario the quarantine exists for.  A holds "rs" on exactly a
 * quorum, {0,1,2} (3 and 4 were down).  3 and 4 come back, then 0 and 1
 * restart empty.  Without the quarantine, B is granted "rs" on
 * {0,1,3,4} while A still holds it: two owners (the control, run with
 * the quarantine off, shows it).  With it, the restarted masters'
 * answers do not count: B is refused and A is told LOST (its renewal
 * cannot reach a quorum either) before its validity ends.
 */
static void
rb_restart_scenario(bool quarantine)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .restart_quarantine = quarantine,
                               .default_ttl_ms = 3000, .max_ttl_ms = 4000 };
    long long valid;
    int64_t t_send;
    char *got;
    int a, b;
    size_t i;

    rb_up(&o);
    if (quarantine) {
        /* Fresh masters: wait until they count. */
        rb_wait_stat("masters_quarantined", 0, false, 8000);
    }
    ck_assert_int_eq(h_kill_master(3), 0);
    ck_assert_int_eq(h_kill_master(4), 0);
    rb_wait_stat("masters_up", 3, false, 5000);
    a = expect_tcp();
    b = expect_tcp();
    t_send = h_now_ms();
    got = h_cmd(a, "LOCK rs ttl=3000", CMD_MS);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", "rs") && h_reply_int(got, "validity", &valid),
                  "LOCK rs answered '%s'", got ? got : "(nothing)");
    free(got);
    ck_assert_int_eq(h_restart_master(3), 0);
    ck_assert_int_eq(h_restart_master(4), 0);
    ck_assert_int_eq(h_kill_master(0), 0);
    ck_assert_int_eq(h_kill_master(1), 0);
    ck_assert_int_eq(h_restart_master(0), 0);
    ck_assert_int_eq(h_restart_master(1), 0);
    rb_wait_stat("masters_up", 5, false, 8000);
    got = h_cmd(b, "TRYLOCK rs ttl=3000", CMD_MS);
    ck_assert_ptr_nonnull(got);
    if (!quarantine) {
        /* The control: the danger is real. */
        ck_assert_msg(h_is_reply(got, "OK", "rs"),
                      "without quarantine B got '%s', expected a second grant", got);
        free(got);
        close(a);
        close(b);
        return;
    }
    ck_assert_msg(!h_is_reply(got, "OK", "rs"),
                  "B was granted rs while A holds it: '%s'", got);
    free(got);
    for (i = 0; i < 2; i++) {
        long long r;

        ck_assert_int_eq(h_stat_once(i == 0 ? "master.0.restarts" : "master.1.restarts", &r), 0);
        ck_assert_int_eq(r, 1);
    }
    got = h_read_line(a, 5000);
    ck_assert_msg(got != NULL && strncmp(got, "! LOST rs reason=", 17) == 0,
                  "A got '%s', expected '! LOST rs ...'", got ? got : "(nothing)");
    free(got);
    ck_assert_msg(h_now_ms() < t_send + valid, "A's LOST came %lld ms after its validity",
                  (long long)(h_now_ms() - t_send - valid));
    close(a);
    close(b);
}

START_TEST(quarantine_restart_two_masters)
{
    rb_restart_scenario(true);
}
END_TEST

START_TEST(no_quarantine_control)
{
    rb_restart_scenario(false);
}
END_TEST

/*
 * A lock whose quorum is lost is reported LOST before its validity
 * ends, and its keys stay on the masters that still hold them until
 * they expire: the holder keeps its window until then.
 */
/* arg: int64_t *, the validity's end (ms).  Keys on 3, 4 end by then + drift. */
static bool
rb_cond_expiry_shrunk(void *arg)
{
    int64_t end = *(int64_t *)arg, left = end - h_now_ms();
    size_t i;

    for (i = 3; i < NMASTERS; i++) {
        long long pttl = h_master_pttl(i, "lk");

        if (pttl > left + 32 + 50) {
            return false;
        }
    }
    return true;
}

START_TEST(lost_keeps_keys_until_expiry)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100 };
    const char *key = "lk";
    long long valid, pttl;
    int64_t t_send, t_lost, t_send_valid;
    char *got;
    size_t i;
    int a;

    rb_up(&o);
    a = expect_tcp();
    t_send = h_now_ms();
    got = h_cmd(a, "LOCK lk ttl=3000", CMD_MS);
    ck_assert_msg(got != NULL && h_reply_int(got, "validity", &valid), "LOCK lk: '%s'",
                  got ? got : "(nothing)");
    free(got);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
    }
    got = h_read_line(a, 5000);
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
     * 3000 ms), not a whole ttl after the last attempt.
     */
    ck_assert_msg(h_wait_until(rb_cond_expiry_shrunk, &t_send_valid, 1000),
                  "after LOST the keys on masters 3 and 4 live on past the validity");
    for (i = 3; i < NMASTERS; i++) {
        pttl = h_master_pttl(i, key);
        ck_assert_msg(pttl > 0, "master %zu: key lk has pttl %lld right after LOST; "
                      "a lost lock must expire, not be deleted", i, pttl);
    }
    ck_assert_msg(h_wait_until(rb_cond_key_gone, &key, t_send + valid + 1000 - h_now_ms()),
                  "lk was still on a master 1 s after its validity ended");
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

    rb_up(&o);
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
    got = h_read_line(a, 5000);
    ck_assert_msg(got != NULL && strncmp(got, "! LOST pz reason=", 17) == 0,
                  "first line after the pause: expected '! LOST pz ...', got '%s'",
                  got ? got : "(nothing)");
    free(got);
    for (i = 0; i < 2; i++) {
        got = h_read_line(a, 5000);
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

/*
 * Durations are measured on CLOCK_MONOTONIC: with the daemon's wall
 * clock jumping two hours forward and then back (libfaketime, re-read
 * from a file), a held lock is renewed as usual and never reported
 * LOST.  A daemon that timed leases with the wall clock would see them
 * expire at the forward jump.
 */
/* True when /proc/<pid>/maps names a file containing text. */
static bool
rb_maps_have(pid_t pid, const char *text)
{
    char path[64], line[1024];
    bool found = false;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    f = fopen(path, "re");
    if (f == NULL) {
        return false;
    }
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        found = strstr(line, text) != NULL;
    }
    fclose(f);
    return found;
}

START_TEST(wall_clock_jump)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100 };
    char path[512], opts[1024], *got;
    const char *asan;
    long long valid, renewals;
    FILE *f;
    int a;

    if (access(FAKETIME_LIB, R_OK) != 0) {
        /* make deps installs faketime; without it the design note stands. */
        fprintf(stderr, "wall_clock_jump: skipped: %s not installed\n", FAKETIME_LIB);
        return;
    }
    ck_assert_msg(h_begin(tcase_name()) == 0, "cannot create the test directory");
    ck_assert_msg(h_start_masters(NMASTERS) == 0, "the masters did not start");
    snprintf(path, sizeof(path), "%s/faketime", h_dir());
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("+0\n", f);
    fclose(f);
    /* Only the daemon started next inherits these. */
    setenv("LD_PRELOAD", FAKETIME_LIB, 1);
    setenv("FAKETIME_TIMESTAMP_FILE", path, 1);
    setenv("FAKETIME_CACHE_DURATION", "0", 1);
    setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1);
    /* A sanitizer build wants its runtime first; libfaketime is harmless. */
    asan = getenv("ASAN_OPTIONS");
    snprintf(opts, sizeof(opts), "%s%sverify_asan_link_order=0", asan ? asan : "",
             asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    ck_assert_msg(h_start_daemon(&o) == 0, "redlockd did not start under faketime");
    unsetenv("LD_PRELOAD");
    ck_assert_msg(rb_maps_have(h_daemon_pid(), "libfaketime"),
                  "libfaketime is not loaded in the daemon: the test would test nothing");
    a = expect_tcp();
    got = h_cmd(a, "LOCK wj ttl=900", CMD_MS);
    ck_assert_msg(got != NULL && h_reply_int(got, "validity", &valid), "LOCK wj: '%s'",
                  got ? got : "(nothing)");
    free(got);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("+2h\n", f);
    fclose(f);
    if (!h_quiet(a, 1500)) {
        got = h_read_line(a, 100);
        ck_abort_msg("after the clock jumped forward: '%s'", got ? got : "(end of stream)");
    }
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("-2h\n", f);
    fclose(f);
    if (!h_quiet(a, 1500)) {
        got = h_read_line(a, 100);
        ck_abort_msg("after the clock jumped back: '%s'", got ? got : "(end of stream)");
    }
    ck_assert_int_eq(h_stat_once("renewals_ok", &renewals), 0);
    ck_assert_msg(renewals >= 4, "only %lld renewals in 3 s of a 900 ms lease", renewals);
    EXPECT_PREFIX(a, "STATUS wj", "HELD wj ttl=");
    EXPECT_REPLY(a, "UNLOCK wj", "OK wj holds=0");
    close(a);
}
END_TEST

/* ---- hostile clients ---- */

/*
 * Slowloris: a line must be complete within idle_timeout_ms of its
 * first byte, however it trickles in; a line that does complete in time
 * is served, and an idle connection without a partial line stays open.
 */
START_TEST(slowloris)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .idle_timeout_ms = 600 };
    int64_t t0;
    char *got;
    int a, b, i;

    rb_up(&o);
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_PREFIX(b, "LOCK sl", "OK sl ");
    /* A line in two pieces, in time. */
    ck_assert_int_eq(h_send_raw(a, "PI", 2), 0);
    h_sleep_ms(100);
    EXPECT_REPLY(a, "NG ok", "PONG ok");
    /* One byte every 200 ms: closed 600 ms after the first. */
    t0 = h_now_ms();
    for (i = 0; i < 5; i++) {
        if (h_send_raw(a, "P", 1) != 0) {
            break;
        }
        h_sleep_ms(200);
        if (h_now_ms() - t0 > 700) {
            break;
        }
    }
    got = h_read_line(a, 2000);
    ck_assert_msg(got != NULL && strncmp(got, "ERR TIMEOUT ", 12) == 0,
                  "a trickled line got '%s', expected 'ERR TIMEOUT ...'", got ? got : "(nothing)");
    free(got);
    ck_assert_msg(h_expect_eof(a, LOCAL_MS), "the connection stayed open after ERR TIMEOUT");
    ck_assert_msg(h_now_ms() - t0 >= 550, "closed %lld ms after the first byte",
                  (long long)(h_now_ms() - t0));
    close(a);
    /* b held a lock and said nothing for twice the timeout: still open. */
    ck_assert_msg(h_quiet(b, 1200), "the idle lock holder was sent something");
    EXPECT_PREFIX(b, "STATUS sl", "HELD sl ttl=");
    EXPECT_REPLY(b, "UNLOCK sl", "OK sl holds=0");
    rb_wait_stat("clients_timed_out", 1, false, LOCAL_MS);
    close(b);
}
END_TEST

/*
 * A client that holds a lock and sends requests without reading the
 * replies is closed once its output has not moved for idle_timeout_ms,
 * and its lock is released; the others are not affected.
 */
START_TEST(non_reader_closed)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .idle_timeout_ms = 1000 };
    static const char req[] = "STATS\n";
    const char *key = "nr";
    char buf[64 * 1024];
    size_t i;
    int64_t deadline;
    ssize_t n;
    int a, b, one = 4096;

    rb_up(&o);
    a = expect_tcp();
    b = expect_tcp();
    /* A small receive buffer, so the daemon's output backs up sooner. */
    setsockopt(a, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one));
    EXPECT_PREFIX(a, "LOCK nr", "OK nr ");
    for (i = 0; i + sizeof(req) - 1 <= sizeof(buf); i += sizeof(req) - 1) {
        memcpy(buf + i, req, sizeof(req) - 1);
    }
    ck_assert_int_eq(fcntl(a, F_SETFL, fcntl(a, F_GETFL) | O_NONBLOCK), 0);
    deadline = h_now_ms() + 8000;
    while (h_now_ms() < deadline) {
        n = send(a, buf, i, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            break;      /* reset: the daemon closed us */
        }
        if (h_masters_without(key) == NMASTERS) {
            break;
        }
        h_sleep_ms(n > 0 ? 1 : 50);
    }
    ck_assert_msg(h_wait_until(rb_cond_key_gone, &key, 3000),
                  "the non-reader's lock was not released");
    rb_wait_stat("clients_closed_output", 1, false, LOCAL_MS);
    ck_assert_msg(rb_log_has("(limits.idle_timeout_ms): closing"),
                  "the log does not say why the client was closed");
    EXPECT_REPLY(b, "PING", "PONG");
    EXPECT_PREFIX(b, "TRYLOCK nr", "OK nr ");
    close(a);
    close(b);
}
END_TEST

/* A new connection is served (answers PONG). */
static bool
rb_cond_ping(void *arg)
{
    int fd = h_connect_tcp();
    char *got;
    bool ok;

    (void)arg;
    if (fd < 0) {
        return false;
    }
    got = h_cmd(fd, "PING", LOCAL_MS);
    ok = got != NULL && strcmp(got, "PONG") == 0;
    free(got);
    close(fd);
    return ok;
}

/* max_clients + 1 gets ERR LIMIT and is closed; a slot freed is reusable. */
START_TEST(max_clients)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .max_clients = 3 };
    int fds[3], extra, i;
    char *got;

    rb_up(&o);
    for (i = 0; i < 3; i++) {
        fds[i] = expect_tcp();
        EXPECT_REPLY(fds[i], "PING", "PONG");
    }
    extra = expect_tcp();
    got = h_read_line(extra, LOCAL_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR LIMIT ", 10) == 0,
                  "client 4 of 3 got '%s'", got ? got : "(nothing)");
    free(got);
    ck_assert(h_expect_eof(extra, LOCAL_MS));
    close(extra);
    EXPECT_REPLY(fds[0], "PING still", "PONG still");
    close(fds[0]);
    /* The daemon sees the close a moment later: then a new client fits. */
    ck_assert_msg(h_wait_until(rb_cond_ping, NULL, 2000),
                  "no client was served after one of three left");
    close(fds[1]);
    close(fds[2]);
}
END_TEST

/* CPU time pid used so far (user + system), in clock ticks; -1 when unreadable. */
static long long
rb_cpu_ticks(pid_t pid)
{
    char path[64], buf[1024], *paren;
    unsigned long long ut = 0, st = 0;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL) {
        return -1;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* After "(comm)": state, then fields 4..13; utime and stime are 14 and 15. */
    if ((paren = strrchr(buf, ')')) == NULL
        || sscanf(paren + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                  &ut, &st) != 2) {
        return -1;
    }
    return (long long)(ut + st);
}

/* Lines of the current daemon's log that contain text. */
static int
rb_log_lines(const char *text)
{
    char line[512];
    int n = 0;
    FILE *f = fopen(h_daemon_log_path(), "r");

    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        n += strstr(line, text) != NULL;
    }
    fclose(f);
    return n;
}

#define RB_FD_LIMIT   64        /* the daemon's descriptor limit, soft and hard */
#define RB_FD_CONNS   90        /* connections: more than it can accept */
#define RB_FD_WINDOW_MS 2000    /* how long the daemon is watched out of descriptors */
#define RB_FD_KEPT    20        /* connections kept open after the others left: they
                                   fit in the limit */

/*
 * Out of descriptors, the daemon does not spin: under a hard limit of 64
 * it warns at start that limits.max_clients does not fit, 90
 * connections leave it unable to accept, and over 2 s it then spends
 * little CPU (libevent's listener would retry accept(2) at once, for
 * ever) and logs one accept-failure line, not one per try.  Once
 * clients leave, a connection that waited in the backlog is served.
 */
START_TEST(out_of_descriptors_pauses)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .nofile = RB_FD_LIMIT,
                               .log_level = "info" };
    int fds[RB_FD_CONNS], i, lines;
    long long cpu0, cpu1, hz = sysconf(_SC_CLK_TCK);
    char *got;

    rb_up(&o);
    ck_assert_msg(h_log_find(0, "descriptor limit 64 (hard 64) is below", NULL, 0),
                  "no warning at start that max_clients does not fit the descriptor limit");
    fds[0] = expect_tcp();
    EXPECT_REPLY(fds[0], "PING", "PONG");
    for (i = 1; i < RB_FD_CONNS; i++) {
        fds[i] = expect_tcp();
        ck_assert_int_eq(h_send(fds[i], "PING"), 0);
    }
    ck_assert_msg(h_wait_log(0, "accept failed: Too many open files", 5000),
                  "the daemon never ran out of descriptors (log above)");
    cpu0 = rb_cpu_ticks(h_daemon_pid());
    h_sleep_ms(RB_FD_WINDOW_MS);
    cpu1 = rb_cpu_ticks(h_daemon_pid());
    lines = rb_log_lines("accept failed");
    fprintf(stderr, "out_of_descriptors_pauses: %lld ms of CPU in %d ms out of descriptors, "
            "%d accept-failure lines\n", (cpu1 - cpu0) * 1000 / hz, RB_FD_WINDOW_MS, lines);
    ck_assert_msg(cpu0 >= 0 && cpu1 >= 0, "cannot read the daemon's CPU time");
    ck_assert_msg((cpu1 - cpu0) * 1000 / hz < RB_FD_WINDOW_MS / 4,
                  "the daemon used %lld ms of CPU in %d ms out of descriptors: it spins",
                  (cpu1 - cpu0) * 1000 / hz, RB_FD_WINDOW_MS);
    ck_assert_msg(lines == 1, "%d accept-failure lines in the log, expected one", lines);
    EXPECT_REPLY(fds[0], "PING still", "PONG still");
    /* Most clients leave: the last connection, still in the backlog, is served. */
    for (i = 1; i < RB_FD_CONNS - RB_FD_KEPT; i++) {
        close(fds[i]);
    }
    got = h_read_line(fds[RB_FD_CONNS - 1], 5000);
    ck_assert_msg(got != NULL && strcmp(got, "PONG") == 0,
                  "the last connection got '%s' once clients left", got ? got : "(nothing)");
    free(got);
    for (i = RB_FD_CONNS - RB_FD_KEPT; i < RB_FD_CONNS; i++) {
        close(fds[i]);
    }
    close(fds[0]);
}
END_TEST

/*
 * A configuration that holds a password and that every user can read is
 * named in a warning at start, with its mode; made private (0600) and
 * reloaded, it is not warned about again.
 */
START_TEST(readable_secrets_warned)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = "s3cret-pw",
                               .log_level = "info" };
    off_t from;

    rb_up(&o);
    ck_assert_int_eq(chmod(h_daemon_conf_path(), 0644), 0);
    from = h_log_size();
    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    ck_assert_msg(h_wait_log(from, "holds auth.password but is readable by every user "
                             "(mode 0644)", 5000),
                  "no warning that the 0644 configuration holding auth.password is readable");
    ck_assert_int_eq(chmod(h_daemon_conf_path(), 0600), 0);
    from = h_log_size();
    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    ck_assert_msg(h_wait_log(from, "SIGHUP: reloading", 5000), "the reload did not start");
    ck_assert_msg(h_wait_log(from, "reload: done", 5000), "the reload did not finish");
    ck_assert_msg(!h_log_find(from, "readable by", NULL, 0),
                  "a 0600 configuration was still warned about");
}
END_TEST

/* Replace every "from" in the current daemon's configuration by "to". */
static void
rb_conf_replace(const char *from, const char *to)
{
    char buf[8192], out[8192], *p, *q;
    size_t n, used = 0;
    FILE *f = fopen(h_daemon_conf_path(), "r");

    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (p = buf; (q = strstr(p, from)) != NULL; p = q + strlen(from)) {
        used += (size_t)snprintf(out + used, sizeof(out) - used, "%.*s%s", (int)(q - p), p, to);
    }
    used += (size_t)snprintf(out + used, sizeof(out) - used, "%s", p);
    ck_assert_uint_lt(used, sizeof(out));
    f = fopen(h_daemon_conf_path(), "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(out, 1, used, f), used);
    fclose(f);
}

/* SIGHUP the current daemon and wait for the reload to be applied. */
static void
rb_reload(void)
{
    off_t from = h_log_size();

    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    ck_assert_msg(h_wait_log(from, "reload: done", 5000), "the reload was not applied");
}

/*
 * A reload that changes auth.password ends the sessions that
 * authenticated with the old one (told why), keeps a session that needed
 * none (the Unix socket), and the new password lets clients in; a reload
 * that removes the password keeps every session.
 */
START_TEST(password_change_ends_sessions)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = "old-pw",
                               .log_level = "info" };
    char *got;
    int a, b, u;

    rb_up(&o);
    a = expect_tcp();
    EXPECT_REPLY(a, "AUTH old-pw", "OK");
    EXPECT_PREFIX(a, "LOCK pc", "OK pc ");
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    EXPECT_REPLY(u, "PING", "PONG");
    rb_conf_replace("old-pw", "new-pw");
    rb_reload();
    got = h_read_line(a, LOCAL_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR AUTH the password this session gave was "
                                         "changed", 44) == 0,
                  "the session of the old password got '%s'", got != NULL ? got : "(nothing)");
    free(got);
    ck_assert_msg(h_expect_eof(a, LOCAL_MS), "the session of the old password stayed open");
    close(a);
    EXPECT_REPLY(u, "PING", "PONG");
    EXPECT_PREFIX(u, "STATUS pc", "FREE pc");   /* its lock went with it */
    b = expect_tcp();
    EXPECT_PREFIX(b, "AUTH old-pw", "ERR AUTH wrong password");
    close(b);
    b = expect_tcp();
    EXPECT_REPLY(b, "AUTH new-pw", "OK");
    /* No password any more: nobody is ended. */
    rb_conf_replace("password: \"new-pw\"", "password: \"\"");
    rb_reload();
    EXPECT_REPLY(b, "PING", "PONG");
    EXPECT_REPLY(u, "PING", "PONG");
    close(b);
    close(u);
}
END_TEST

/* max_locks_per_client: the next LOCK gets ERR LIMIT; the held ones stay. */
START_TEST(max_locks_per_client)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .max_locks_per_client = 2 };
    int a;

    rb_up(&o);
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK m1", "OK m1 ");
    EXPECT_PREFIX(a, "LOCK m2", "OK m2 ");
    EXPECT_PREFIX(a, "LOCK m3", "ERR LIMIT ");
    EXPECT_PREFIX(a, "LOCK m1", "OK m1 ");     /* re-entry is not a new lock */
    EXPECT_PREFIX(a, "STATUS m2", "HELD m2 ");
    EXPECT_REPLY(a, "UNLOCK m2", "OK m2 holds=0");
    EXPECT_PREFIX(a, "LOCK m3", "OK m3 ");
    close(a);
}
END_TEST

/*
 * auth.password: a TCP session must AUTH first (ERR AUTH otherwise), a
 * wrong password closes it, the right one opens every verb; the Unix
 * socket is exempt unless auth.unix_exempt is false.
 */
/* Lines of the daemon's log that contain text. */
static int
rb_log_count(const char *text)
{
    FILE *f = fopen(h_daemon_log_path(), "r");
    char line[1024];
    int n = 0;

    ck_assert_msg(f != NULL, "cannot read the daemon's log");
    while (fgets(line, sizeof(line), f) != NULL) {
        n += strstr(line, text) != NULL;
    }
    fclose(f);
    return n;
}

/* A TCP connection to the daemon from source address from (an IPv4 loopback address). */
static int
rb_connect_from(const char *from)
{
    int fd = h_tcp_connect(from, "127.0.0.1", h_daemon_port(), 0);

    ck_assert_msg(fd >= 0, "connect from %s: %s", from, strerror(errno));
    return fd;
}

/* The reply to AUTH password on a new connection from source address from; caller frees. */
static char *
rb_auth_from(const char *from, const char *password)
{
    char line[128];
    char *got;
    int fd = rb_connect_from(from);

    snprintf(line, sizeof(line), "AUTH %s", password);
    got = h_cmd(fd, line, LOCAL_MS);
    close(fd);
    ck_assert_msg(got != NULL, "AUTH from %s got no reply", from);
    return got;
}

/* arg: the source address.  The right password is accepted from it again. */
static bool
rb_cond_auth_ok(void *arg)
{
    char *got = rb_auth_from(arg, "s3cret-pw");
    bool ok = strcmp(got, "OK") == 0;

    free(got);
    return ok;
}

/*
 * A new connection from source address from is refused: its first line
 * is ERR LIMIT naming setting, then the daemon closes it.
 */
static void
rb_expect_refused(const char *from, const char *setting)
{
    int fd = rb_connect_from(from);
    char *got = h_read_line(fd, LOCAL_MS);

    ck_assert_msg(got != NULL && strncmp(got, "ERR LIMIT ", 10) == 0
                  && strstr(got, setting) != NULL,
                  "a connection from %s got '%s', not ERR LIMIT naming %s", from,
                  got != NULL ? got : "(nothing)", setting);
    free(got);
    ck_assert_msg(h_expect_eof(fd, LOCAL_MS), "a refused connection stayed open");
    close(fd);
}

/*
 * Require STATS name to reach want in time, read over the Unix socket
 * (u): a TCP connection would count itself, or be refused.
 */
static void
rb_wait_stat_on(int u, const char *name, long long want)
{
    long long seen = -1;
    int64_t deadline = h_now_ms() + LOCAL_MS;

    while (h_stat(u, name, &seen) == 0 && seen != want && h_now_ms() < deadline) {
        h_sleep_ms(10);
    }
    ck_assert_msg(seen == want, "STATS %s is %lld, expected %lld", name, seen, want);
}

static void
rb_wait_unauthenticated(int u, long long want)
{
    rb_wait_stat_on(u, "unauthenticated", want);
}

/* STATS unauthenticated read over u, -1 when it cannot be read. */
static long long
rb_unauthenticated(int u)
{
    long long n = -1;

    return h_stat(u, "unauthenticated", &n) == 0 ? n : -1;
}

static void
rb_wait_connections(int u, long long want)
{
    rb_wait_stat_on(u, "connections", want);
}

/*
 * Connections that never authenticate fill only their own pool: at most
 * max_unauthenticated_per_source from one address, max_unauthenticated
 * in all; the Unix socket is not held up, and one that authenticates
 * makes room.
 */
START_TEST(unauthenticated_capped)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = "s3cret-pw",
                               .limits_yaml = "  max_unauthenticated: 4\n"
                                              "  max_unauthenticated_per_source: 2\n" };
    int a0, a1, b0, b1, u;
    long long rejected = -1;
    char *got;

    rb_up(&o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    a0 = rb_connect_from("127.0.0.1");
    a1 = rb_connect_from("127.0.0.1");
    rb_wait_unauthenticated(u, 2);
    rb_expect_refused("127.0.0.1", "(limits.max_unauthenticated_per_source)");
    b0 = rb_connect_from("127.0.0.2");
    b1 = rb_connect_from("127.0.0.2");
    rb_wait_unauthenticated(u, 4);
    rb_expect_refused("127.0.0.3", "(limits.max_unauthenticated)");
    /* The Unix socket is not held up. */
    EXPECT_REPLY(u, "PING", "PONG");
    EXPECT_REPLY(a0, "AUTH s3cret-pw", "OK");
    rb_wait_unauthenticated(u, 3);
    got = rb_auth_from("127.0.0.3", "s3cret-pw");
    ck_assert_msg(strcmp(got, "OK") == 0, "a client let in after one authenticated got '%s'",
                  got);
    free(got);
    EXPECT_REPLY(a0, "PING", "PONG");
    ck_assert_int_eq(h_stat(u, "rejected_clients", &rejected), 0);
    ck_assert_int_eq(rejected, 2);
    close(a0);
    close(a1);
    close(b0);
    close(b1);
    rb_wait_unauthenticated(u, 0);
    close(u);
}
END_TEST

/*
 * One Unix-socket client (*u), once the harness's own connections are
 * gone, then two TCP clients (*t0, *t1) that have been served.
 */
static void
rb_unix_and_two_tcp(int *u, int *t0, int *t1)
{
    *u = h_connect_unix();
    ck_assert_int_ge(*u, 0);
    rb_wait_connections(*u, 1);
    *t0 = expect_tcp();
    *t1 = expect_tcp();
    EXPECT_REPLY(*t0, "PING", "PONG");
    EXPECT_REPLY(*t1, "PING", "PONG");
}

/* With max_clients_per_source, one address cannot take every slot. */
START_TEST(clients_per_source_capped)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100,
                               .limits_yaml = "  max_clients_per_source: 2\n" };
    int a0, a1, b0, u;

    rb_up(&o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    rb_wait_connections(u, 1);      /* the harness's own connections are gone */
    a0 = rb_connect_from("127.0.0.1");
    a1 = rb_connect_from("127.0.0.1");
    EXPECT_REPLY(a0, "PING", "PONG");
    EXPECT_REPLY(a1, "PING", "PONG");
    rb_expect_refused("127.0.0.1", "(limits.max_clients_per_source)");
    b0 = rb_connect_from("127.0.0.2");
    EXPECT_REPLY(b0, "PING", "PONG");
    close(a0);
    close(a1);
    close(b0);
    close(u);
}
END_TEST

/*
 * TCP clients that fill limits.max_clients leave limits.unix_reserved
 * slots to the Unix socket (where root can still BREAK); those are
 * counted against max_clients like the others.
 */
START_TEST(unix_slots_reserved)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .max_clients = 4,
                               .limits_yaml = "  unix_reserved: 2\n" };
    int t0, t1, u0, u1, u2;
    char *got;

    rb_up(&o);
    rb_unix_and_two_tcp(&u0, &t0, &t1);
    rb_expect_refused("127.0.0.1", "limits.unix_reserved");
    u1 = h_connect_unix();
    ck_assert_int_ge(u1, 0);
    EXPECT_REPLY(u1, "PING", "PONG");
    u2 = h_connect_unix();
    ck_assert_int_ge(u2, 0);
    got = h_read_line(u2, LOCAL_MS);
    ck_assert_msg(got != NULL && strcmp(got, "ERR LIMIT too many clients "
                                        "(limits.max_clients)") == 0,
                  "the fifth client of four got '%s'", got != NULL ? got : "(nothing)");
    free(got);
    close(t0);
    close(t1);
    close(u0);
    close(u1);
    close(u2);
}
END_TEST

/* Start the daemon with a TLS listener (the harness's test certificates) and opts. */
static void
rb_up_tls(struct h_daemon_opts *o)
{
    ck_assert_msg(h_begin(tcase_name()) == 0, "cannot create the test directory");
    ck_assert_msg(h_make_certs() == 0, "tests/tls/make-certs.sh failed");
    o->tls_cert_file = h_cert("server.crt");
    o->tls_key_file = h_cert("server.key");
    ck_assert_msg(h_start_masters(NMASTERS) == 0, "the masters did not start");
    ck_assert_msg(h_start_daemon(o) == 0, "redlockd did not start (log above)");
}

/*
 * A full daemon refuses a TLS connection without writing a byte: ERR
 * LIMIT before the handshake would be plaintext on a TLS port.
 */
START_TEST(tls_refused_without_plaintext)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .max_clients = 3, .log_level = "info" };
    int t0, t1, u, fd;
    size_t len = 0;
    char *got;

    rb_up_tls(&o);
    rb_unix_and_two_tcp(&u, &t0, &t1);
    fd = h_connect_port(h_daemon_tls_port());
    ck_assert_int_ge(fd, 0);
    got = h_read_all(fd, 4096, LOCAL_MS, &len);
    ck_assert_msg(got != NULL && len == 0, "the TLS port wrote %zu plaintext bytes: '%s'", len,
                  got != NULL ? got : "");
    free(got);
    close(fd);
    ck_assert_msg(h_wait_log(0, "TLS: closed without a reply", LOCAL_MS),
                  "the refusal of a TLS client was not logged");
    close(t0);
    close(t1);
    close(u);
}
END_TEST

#define RB_DEADLINE_MS  4000    /* limits.idle_timeout_ms of one_deadline_from_accept */
#define RB_HANDSHAKE_LATE_MS 2000 /* the client starts its TLS handshake this late */

/*
 * The TLS handshake and AUTH share one deadline from accept: a client
 * that takes its time over the handshake does not get the AUTH
 * deadline again afterwards (a slot held twice as long).
 */
START_TEST(one_deadline_from_accept)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = "s3cret-pw",
                               .idle_timeout_ms = RB_DEADLINE_MS };
    struct client_tls_opts topts = { NULL, NULL, NULL };
    struct client c;
    enum client_read r;
    char addr[32];
    int64_t t0;

    rb_up_tls(&o);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", h_daemon_tls_port());
    topts.ca_file = h_cert("ca.crt");
    client_init(&c, -1, 0);
    t0 = h_now_ms();
    ck_assert_int_eq(client_connect_tcp(&c, addr, t0 + LOCAL_MS), 0);
    h_sleep_ms(RB_HANDSHAKE_LATE_MS);  /* the scenario: a slow handshake, not a wait */
    ck_assert_msg(client_start_tls(&c, "127.0.0.1", &topts, h_now_ms() + LOCAL_MS) == 0,
                  "TLS handshake: %s", c.err);
    do {
        r = client_read_line(&c, t0 + RB_DEADLINE_MS + RB_HANDSHAKE_LATE_MS + LOCAL_MS);
    } while (r == CLIENT_LINE);
    ck_assert_msg(r == CLIENT_EOF, "the connection did not end (%d: %s)", (int)r, c.err);
    ck_assert_msg(h_now_ms() - t0 < RB_DEADLINE_MS + RB_HANDSHAKE_LATE_MS / 2,
                  "closed %lld ms after connecting: the deadline of %d ms restarted after "
                  "the handshake", (long long)(h_now_ms() - t0), RB_DEADLINE_MS);
    client_close(&c);
}
END_TEST

#define RB_AUTH_DEADLINE_MS 3000 /* limits.idle_timeout_ms of auth_deadline_frees_slot */
#define RB_FLOOD_MS     1000    /* requests are sent this long, as fast as taken: their
                                   replies fill the kernel's buffers, then the daemon's
                                   (which stops reading) */

/*
 * A stranger that sends lines before AUTH and reads its replies a
 * trickle at a time (enough to keep the write timeout away) loses its
 * slot at the AUTH deadline, not once every reply is read.
 */
START_TEST(auth_deadline_frees_slot)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = "s3cret-pw",
                               .idle_timeout_ms = RB_AUTH_DEADLINE_MS };
    int u, fd, small = 4096, i;
    char sip[512], flood[4096];
    int64_t t0;

    rb_up(&o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    t0 = h_now_ms();
    /* A small receive buffer: the replies back up in the daemon at once. */
    fd = h_tcp_connect(NULL, "127.0.0.1", h_daemon_port(), small);
    ck_assert_msg(fd >= 0, "connect: %s", strerror(errno));
    ck_assert_int_eq(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
    memset(flood, 0, sizeof(flood));
    for (i = 0; i + 5 <= (int)sizeof(flood); i += 5) {
        memcpy(flood + i, "PING\n", 5);
    }
    while (h_now_ms() - t0 < RB_FLOOD_MS) {
        if (send(fd, flood, sizeof(flood) - sizeof(flood) % 5, MSG_NOSIGNAL) < 0) {
            h_sleep_ms(5);  /* full: the daemon reads no more for now */
        }
    }
    rb_wait_unauthenticated(u, 1);
    while (rb_unauthenticated(u) != 0 && h_now_ms() - t0 < 2 * RB_AUTH_DEADLINE_MS) {
        (void)!recv(fd, sip, sizeof(sip), MSG_DONTWAIT);   /* a sip: some progress */
        h_sleep_ms(100);
    }
    ck_assert_msg(rb_unauthenticated(u) == 0 && h_now_ms() - t0 < RB_AUTH_DEADLINE_MS * 3 / 2,
                  "the slot was given back %lld ms after connecting (deadline %d ms)",
                  (long long)(h_now_ms() - t0), RB_AUTH_DEADLINE_MS);
    close(fd);
    close(u);
}
END_TEST

#define RB_PAUSE_DEADLINE_MS 1000 /* limits.idle_timeout_ms of pending_slot_rst_and_pause */

/*
 * The unauthenticated pool gives a slot back however its connection
 * ends: a reset with unread input (SO_LINGER 0) before AUTH, and a
 * daemon stopped (SIGSTOP) past the AUTH deadline, after which the late
 * deadline closes the stranger at once while an authenticated session
 * idle the whole time stays.
 */
START_TEST(pending_slot_rst_and_pause)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = "s3cret-pw",
                               .idle_timeout_ms = RB_PAUSE_DEADLINE_MS };
    struct linger lg = { 1, 0 };
    char *got;
    int u, fd, ok;

    rb_up(&o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    fd = rb_connect_from("127.0.0.1");
    rb_wait_unauthenticated(u, 1);
    ck_assert_int_eq(h_send_raw(fd, "PIN", 3), 0);      /* a partial line, unread input */
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    close(fd);                                          /* RST */
    rb_wait_unauthenticated(u, 0);

    ok = rb_connect_from("127.0.0.1");
    EXPECT_REPLY(ok, "AUTH s3cret-pw", "OK");
    fd = rb_connect_from("127.0.0.2");
    rb_wait_unauthenticated(u, 1);
    ck_assert_int_eq(h_signal_daemon(SIGSTOP), 0);
    h_sleep_ms(3 * RB_PAUSE_DEADLINE_MS);   /* the scenario: a pause past the deadline */
    ck_assert_int_eq(h_signal_daemon(SIGCONT), 0);
    got = h_read_line(fd, LOCAL_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR AUTH no AUTH within", 23) == 0,
                  "the stranger got '%s' after the pause", got != NULL ? got : "(nothing)");
    free(got);
    ck_assert_msg(h_expect_eof(fd, LOCAL_MS), "the stranger outlived a pause past its deadline");
    rb_wait_unauthenticated(u, 0);
    EXPECT_REPLY(ok, "PING", "PONG");
    EXPECT_REPLY(u, "PING", "PONG");
    close(fd);
    close(ok);
    close(u);
}
END_TEST

/*
 * A reload that removes auth.password lets in at once the sessions
 * waiting to AUTH; one that sets a password again ends those that gave
 * none (told why, their locks released); the Unix socket stays.
 */
START_TEST(reload_sets_and_clears_password)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = "pw-one",
                               .log_level = "info" };
    int u, p;
    char *got;

    rb_up(&o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    p = expect_tcp();
    rb_wait_unauthenticated(u, 1);
    EXPECT_PREFIX(p, "PING", "ERR AUTH ");
    rb_conf_replace("password: \"pw-one\"", "password: \"\"");
    rb_reload();
    rb_wait_unauthenticated(u, 0);
    EXPECT_REPLY(p, "PING", "PONG");
    EXPECT_PREFIX(p, "LOCK rp", "OK rp ");
    rb_conf_replace("password: \"\"", "password: \"pw-two\"");
    rb_reload();
    got = h_read_line(p, LOCAL_MS);
    ck_assert_msg(got != NULL && strcmp(got, "ERR AUTH a reload requires AUTH of this "
                                        "session, which gave none; closing") == 0,
                  "a session let in without AUTH got '%s'", got != NULL ? got : "(nothing)");
    free(got);
    ck_assert_msg(h_expect_eof(p, LOCAL_MS), "the session without AUTH stayed open");
    close(p);
    EXPECT_REPLY(u, "PING", "PONG");
    EXPECT_PREFIX(u, "STATUS rp", "FREE rp");
    close(u);
}
END_TEST

/* arg: int *fd.  STATUS rd is answered (not refused by the budget). */
static bool
rb_cond_status_free(void *arg)
{
    char *got = h_cmd(*(int *)arg, "STATUS rd", CMD_MS);
    bool ok = got != NULL && strcmp(got, "FREE rd") == 0;

    free(got);
    if (!ok) {
        h_sleep_ms(50);
    }
    return ok;
}

/* WATCH name on fd: OK, then the first push, "! FREE name". */
static void
rb_watch(int fd, const char *name)
{
    char line[64], want[64];
    char *got;

    snprintf(line, sizeof(line), "WATCH %s", name);
    snprintf(want, sizeof(want), "OK %s", name);
    EXPECT_REPLY(fd, line, want);
    got = h_read_line(fd, CMD_MS);
    snprintf(want, sizeof(want), "! FREE %s", name);
    ck_assert_msg(got != NULL && strcmp(got, want) == 0, "WATCH %s pushed '%s'", name,
                  got != NULL ? got : "(nothing)");
    free(got);
}

/*
 * limits.max_watches bounds the WATCHes (and so the subscriptions) of
 * all sessions together; an UNWATCH makes room.
 */
START_TEST(watches_capped_globally)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .limits_yaml = "  max_watches: 3\n" };
    int a, b;
    char *got;

    rb_up(&o);
    a = expect_tcp();
    b = expect_tcp();
    rb_watch(a, "wa");
    rb_watch(a, "wb");
    rb_watch(b, "wc");
    got = h_cmd(b, "WATCH wd", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR LIMIT ", 10) == 0
                  && strstr(got, "(limits.max_watches)") != NULL,
                  "a fourth WATCH of three allowed got '%s'", got != NULL ? got : "(nothing)");
    free(got);
    /* Watching a name again is no new watch. */
    EXPECT_REPLY(b, "WATCH wc", "OK wc");
    EXPECT_REPLY(a, "UNWATCH wa", "OK wa");
    rb_watch(b, "wd");
    close(a);
    close(b);
}
END_TEST

#define RB_READS_PER_S 1        /* limits.reads_per_second of reads_budgeted: the
                                   second read within a second is refused */

/*
 * STATUS and WATCH read the masters: a session gets
 * limits.reads_per_second of them at once, then is told to wait (the
 * refusal costs the masters nothing), and is served again after.
 */
START_TEST(reads_budgeted)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100,
                               .limits_yaml = "  reads_per_second: 1\n" };
    long long calls0, calls1;
    int fd, i;
    char *got;

    rb_up(&o);
    fd = expect_tcp();
    calls0 = h_master_calls(0, "evalsha");
    for (i = 0; i < RB_READS_PER_S; i++) {
        EXPECT_REPLY(fd, "STATUS rd", "FREE rd");
    }
    got = h_cmd(fd, "STATUS rd", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR LIMIT ", 10) == 0
                  && strstr(got, "(limits.reads_per_second): try again in ") != NULL,
                  "STATUS %d of %d a second got '%s'", RB_READS_PER_S + 1, RB_READS_PER_S,
                  got != NULL ? got : "(nothing)");
    free(got);
    got = h_cmd(fd, "WATCH rd", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR LIMIT ", 10) == 0,
                  "WATCH over the budget got '%s'", got != NULL ? got : "(nothing)");
    free(got);
    calls1 = h_master_calls(0, "evalsha");
    ck_assert_msg(calls1 - calls0 <= RB_READS_PER_S,
                  "master 0 ran %lld scripts for %d allowed reads", calls1 - calls0,
                  RB_READS_PER_S);
    EXPECT_REPLY(fd, "PING", "PONG");   /* other verbs are not budgeted */
    ck_assert_msg(h_wait_until(rb_cond_status_free, &fd, 2000),
                  "STATUS was still refused 2 s later");
    rb_wait_stat("reads_refused", 2, true, LOCAL_MS);
    close(fd);
}
END_TEST

/*
 * Guessing AUTH from one address: 10 wrong passwords are checked (and
 * logged), then every AUTH from that address is refused unchecked, the
 * right password too, so that nothing is learned, until a token comes
 * back a second later; 40 more guesses log one summary line, not 40.
 * Another address is not affected.
 */
START_TEST(auth_guessing_limited)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = "s3cret-pw" };
    char *got;
    int i;

    rb_up(&o);
    for (i = 0; i < 10; i++) {
        got = rb_auth_from("127.0.0.1", "guess");
        ck_assert_msg(strcmp(got, "ERR AUTH wrong password") == 0, "guess %d: '%s'", i, got);
        free(got);
    }
    got = rb_auth_from("127.0.0.1", "guess");
    ck_assert_msg(strncmp(got, "ERR AUTH too many wrong passwords from 127.0.0.1; AUTH is not "
                          "checked for ", 74) == 0, "guess 11: '%s'", got);
    free(got);
    got = rb_auth_from("127.0.0.1", "s3cret-pw");
    ck_assert_msg(strncmp(got, "ERR AUTH too many wrong passwords", 33) == 0,
                  "the right password from a limited address was checked: '%s'", got);
    free(got);
    got = rb_auth_from("127.0.0.2", "s3cret-pw");
    ck_assert_msg(strcmp(got, "OK") == 0, "another address was refused: '%s'", got);
    free(got);
    for (i = 0; i < 40; i++) {
        free(rb_auth_from("127.0.0.1", "guess"));
    }
    rb_wait_stat("auth_failures", 10, false, LOCAL_MS);
    rb_wait_stat("auth_refused", 42, true, LOCAL_MS);
    ck_assert_int_eq(rb_log_count("wrong AUTH password"), 10);
    ck_assert_int_eq(rb_log_count("AUTH from 127.0.0.1 refused unchecked"), 1);
    ck_assert_msg(h_wait_until(rb_cond_auth_ok, "127.0.0.1", 5000),
                  "the right password was still refused 5 s later");
}
END_TEST

START_TEST(auth_password)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = "s3cret-pw" };
    char *got;
    int a, u;

    rb_up(&o);
    a = expect_tcp();
    EXPECT_PREFIX(a, "PING", "ERR AUTH authentication required");
    EXPECT_PREFIX(a, "LOCK x", "ERR AUTH authentication required");
    EXPECT_PREFIX(a, "AUTH s3cret", "ERR AUTH wrong password");
    ck_assert_msg(h_expect_eof(a, LOCAL_MS), "a wrong password left the connection open");
    close(a);
    a = expect_tcp();
    EXPECT_REPLY(a, "AUTH s3cret-pw", "OK");
    EXPECT_PREFIX(a, "LOCK x", "OK x ");
    EXPECT_REPLY(a, "UNLOCK x", "OK x holds=0");
    close(a);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    EXPECT_REPLY(u, "PING", "PONG");
    EXPECT_PREFIX(u, "STATS", "STAT version ");
    close(u);
    rb_wait_stat("auth_failures", 1, false, LOCAL_MS);

    /* A second daemon that makes the Unix socket AUTH too, and closes a
       session that does not authenticate within idle_timeout_ms. */
    o.auth_unix_required = true;
    o.idle_timeout_ms = 800;
    ck_assert_msg(h_start_daemon(&o) == 0, "the second daemon did not start");
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    got = h_cmd(u, "PING", LOCAL_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR AUTH ", 9) == 0,
                  "PING on the Unix socket got '%s'", got ? got : "(nothing)");
    free(got);
    EXPECT_REPLY(u, "AUTH s3cret-pw", "OK");
    EXPECT_REPLY(u, "PING", "PONG");
    ck_assert_msg(h_quiet(u, 1200), "an authenticated idle session was sent something");
    close(u);
    a = expect_tcp();
    got = h_read_line(a, 3000);
    ck_assert_msg(got != NULL && strncmp(got, "ERR AUTH no AUTH within 800 ms", 30) == 0,
                  "a silent TCP session got '%s'", got ? got : "(nothing)");
    free(got);
    ck_assert_msg(h_expect_eof(a, LOCAL_MS), "the unauthenticated session stayed open");
    close(a);
}
END_TEST

/* Protected mode: a non-loopback listen.tcp without auth.password does not start. */
START_TEST(protected_mode_refuses)
{
    const char *bin = getenv("REDLOCKD_BIN") != NULL ? getenv("REDLOCKD_BIN")
                                                     : "./build/redlockd";
    char path[512], cmd[1200], out[2048];
    size_t n;
    FILE *f, *p;
    int rc;

    ck_assert_msg(h_begin(tcase_name()) == 0, "cannot create the test directory");
    snprintf(path, sizeof(path), "%s/open.yml", h_dir());
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("listen:\n  tcp: \"0.0.0.0:7379\"\nmasters:\n  - \"127.0.0.1:7001\"\n", f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "'%s' -c '%s' 2>&1", bin, path);
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    rc = pclose(p);
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) != 0,
                  "redlockd started with an open listen.tcp and no password");
    ck_assert_msg(strstr(out, "protected mode") != NULL, "output: %s", out);
}
END_TEST

static Suite *
robust_suite(void)
{
    Suite *s = suite_create("redlockd faults and hostile input");
    TCase *tc = tcase_create("robust");

    tcase_add_checked_fixture(tc, NULL, rb_teardown);
    if (getenv("CK_DEFAULT_TIMEOUT") == NULL) {
        tcase_set_timeout(tc, TEST_TIMEOUT_S);
    }
    tcase_add_test(tc, silent_master_dropped);
    tcase_add_test(tc, ghost_of_dropped_try_taken_over);
    tcase_add_test(tc, max_pending_drops_master);
    tcase_add_test(tc, burst_not_dropped);
    tcase_add_test(tc, partial_write_to_stopped_master);
    tcase_add_test(tc, quarantine_fresh_masters);
    tcase_add_test(tc, quarantine_restart_two_masters);
    tcase_add_test(tc, no_quarantine_control);
    tcase_add_test(tc, lost_keeps_keys_until_expiry);
    tcase_add_test(tc, paused_daemon_lost_first);
    tcase_add_test(tc, wall_clock_jump);
    tcase_add_test(tc, slowloris);
    tcase_add_test(tc, non_reader_closed);
    tcase_add_test(tc, max_clients);
    tcase_add_test(tc, out_of_descriptors_pauses);
    tcase_add_test(tc, readable_secrets_warned);
    tcase_add_test(tc, password_change_ends_sessions);
    tcase_add_test(tc, max_locks_per_client);
    tcase_add_test(tc, auth_password);
    tcase_add_test(tc, auth_guessing_limited);
    tcase_add_test(tc, unauthenticated_capped);
    tcase_add_test(tc, clients_per_source_capped);
    tcase_add_test(tc, unix_slots_reserved);
    tcase_add_test(tc, tls_refused_without_plaintext);
    tcase_add_test(tc, one_deadline_from_accept);
    tcase_add_test(tc, watches_capped_globally);
    tcase_add_test(tc, reads_budgeted);
    tcase_add_test(tc, auth_deadline_frees_slot);
    tcase_add_test(tc, reload_sets_and_clears_password);
    tcase_add_test(tc, pending_slot_rst_and_pause);
    tcase_add_test(tc, protected_mode_refuses);
    suite_add_tcase(s, tc);
    return s;
}

const struct runner runner_main = { "check_robust", robust_suite, h_suite_init, h_suite_cleanup };
