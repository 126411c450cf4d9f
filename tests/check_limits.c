/*
 * check_limits.c: hostile and greedy clients against the daemon's
 * limits, end to end.
 *
 * Slowloris lines and clients that never read (closed once their output
 * has not moved for idle_timeout_ms, their input no longer read once
 * their unsent output is large); limits.max_clients, max_clients_per_source
 * and the slots reserved to the Unix socket (a full daemon refuses TLS
 * without writing a byte); running out of descriptors without spinning;
 * max_locks_per_client, max_watches and the budget of reads per second;
 * connections that never authenticate (their own pool, one deadline from
 * accept through the TLS handshake and AUTH, a slot given back however
 * the connection ends).  Strangers guessing AUTH are check_strangers'.
 *
 * Real redis-server masters and the real daemon on free loopback ports
 * (tests/harness.h).  Each test is a test case of its own:
 * CK_RUN_CASE=<test> ./build/check_limits runs one.
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <check.h>
#include <hiredis/hiredis.h>

#include "client/client.h"
#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5       /* masters per test */
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define LOCAL_MS        1000    /* deadline for a reply the daemon gives alone */
#define TEST_TIMEOUT_S  30      /* per test, unless CK_DEFAULT_TIMEOUT is set */

/* The daemon's resident memory in KiB, from /proc, or -1. */
static long
daemon_rss_kib(void)
{
    char path[64], line[256];
    long kib = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)h_daemon_pid());
    f = fopen(path, "re");
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) {
            break;
        }
    }
    fclose(f);
    return kib;
}

/*
 * A client that pipelines requests and never reads the replies: the
 * daemon stops reading from it once its unsent output is large, so its
 * memory stays bounded and other clients are served as usual.
 */
START_TEST(client_never_reads)
{
    static const char req[] = "STATS\n";
    char buf[64 * 1024];
    size_t sent = 0, i;
    int64_t deadline, stalled_since;
    long long valid;
    long rss;
    ssize_t n;
    int a, b;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_LOCK_OK(b, "LOCK nr", "nr", 1, valid);
    for (i = 0; i + sizeof(req) - 1 <= sizeof(buf); i += sizeof(req) - 1) {
        memcpy(buf + i, req, sizeof(req) - 1);
    }
    ck_assert_int_eq(fcntl(a, F_SETFL, fcntl(a, F_GETFL) | O_NONBLOCK), 0);
    /* Push 32 MiB of requests (5 GiB of replies), or until the daemon stops reading. */
    deadline = h_now_ms() + 5000;
    stalled_since = h_now_ms();
    while (sent < 32u * 1024 * 1024 && h_now_ms() < deadline) {
        n = send(a, buf, i, MSG_NOSIGNAL);
        if (n > 0) {
            sent += (size_t)n;
            stalled_since = h_now_ms();
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (h_now_ms() - stalled_since > 300) {
                break;      /* the daemon stopped reading from us */
            }
            h_sleep_ms(5);
        } else {
            break;
        }
    }
    rss = daemon_rss_kib();
    ck_assert_msg(rss > 0 && rss < 64 * 1024,
                  "daemon RSS is %ld KiB after a client sent %zu bytes it never read replies to",
                  rss, sent);
    EXPECT_REPLY(b, "PING still", "PONG still");
    EXPECT_PREFIX(b, "STATUS nr", "HELD nr ttl=");
    EXPECT_REPLY(b, "UNLOCK nr", "OK nr holds=0");
    close(a);
    close(b);
}
END_TEST

#define TEST_TIMEOUT_40_S 40

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

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
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
    /* limits.idle_timeout_ms after the first byte, which was before the loop ended. */
    got = h_read_line(a, o.idle_timeout_ms + H_PROMPT_MS);
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
    expect_wait_stat("clients_timed_out", 1, false, H_PROMPT_MS);
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

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
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
    /* Closed once its output has not moved for limits.idle_timeout_ms. */
    ck_assert_msg(h_wait_until(expect_cond_key_gone_alive, &key,
                               o.idle_timeout_ms + H_PROMPT_MS),
                  "the non-reader's lock was not released");
    expect_wait_stat("clients_closed_output", 1, false, H_PROMPT_MS);
    ck_assert_msg(expect_log_has("(limits.idle_timeout_ms): closing"),
                  "the log does not say why the client was closed");
    EXPECT_REPLY(b, "PING", "PONG");
    EXPECT_PREFIX(b, "TRYLOCK nr", "OK nr ");
    close(a);
    close(b);
}
END_TEST

/* A new connection is served (answers PONG). */
static bool
li_cond_ping(void *arg)
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

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
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
    ck_assert_msg(h_wait_until(li_cond_ping, NULL, H_PROMPT_MS),
                  "no client was served after one of three left");
    close(fds[1]);
    close(fds[2]);
}
END_TEST

/* CPU time pid used so far (user + system), in clock ticks; -1 when unreadable. */
static long long
li_cpu_ticks(pid_t pid)
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
li_log_lines(const char *text)
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

/* Set daemon pid's descriptor limit (prlimit(2), as prlimit(1) does).  0, or -1 with errno. */
static int
li_set_nofile(pid_t pid, rlim_t soft, rlim_t hard)
{
    struct rlimit rl = { soft, hard };

    return prlimit(pid, RLIMIT_NOFILE, &rl, NULL);
}

/* Unix-socket clients, each on a new connection, that answer PING with PONG within LOCAL_MS. */
static int
li_unix_pings(int n)
{
    int i, fd, answered = 0;
    char *got;

    for (i = 0; i < n; i++) {
        fd = h_connect_unix();
        got = fd >= 0 ? h_cmd(fd, "PING", LOCAL_MS) : NULL;
        answered += got != NULL && strcmp(got, "PONG") == 0;
        free(got);
        if (fd >= 0) {
            close(fd);
        }
    }
    return answered;
}

/* A refused connection's first line starts with want, then the daemon closes it. */
static void
li_expect_line_eof(int fd, const char *want, const char *who)
{
    char *got = h_read_line(fd, LOCAL_MS);

    ck_assert_msg(got != NULL && strncmp(got, want, strlen(want)) == 0,
                  "%s got '%s', not '%s...'", who, got != NULL ? got : "(nothing)", want);
    free(got);
    ck_assert_msg(h_expect_eof(fd, LOCAL_MS), "%s: a refused connection stayed open", who);
}

#define LI_BUDGET_LIMIT 100     /* the daemon's descriptor limit, soft and hard */
#define LI_BUDGET_CONNS 200     /* idle TCP connections: twice as many */
#define LI_BUDGET_PINGS 10      /* Unix clients that must each be answered */
#define LI_UNIX_RESERVED 16     /* limits.unix_reserved's default (max_clients 10000) */

/*
 * Under a descriptor limit of 100, 200 idle TCP connections take the
 * client slots that limit leaves to TCP (STATS client_slots less
 * limits.unix_reserved), not every descriptor: each of 10 new Unix
 * clients is answered, and the TCP clients past those slots get ERR
 * LIMIT naming the descriptor limit.
 */
START_TEST(unix_kept_out_of_descriptors)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .nofile = LI_BUDGET_LIMIT,
                               .log_level = "info" };
    int fds[LI_BUDGET_CONNS], u, i, answered;
    long long slots = -1;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    expect_wait_stat_on(u, "connections", 1);      /* the harness's own connections are gone */
    for (i = 0; i < LI_BUDGET_CONNS; i++) {
        fds[i] = expect_tcp();
    }
    answered = li_unix_pings(LI_BUDGET_PINGS);
    fprintf(stderr, "unix_kept_out_of_descriptors: %d of %d Unix clients answered with %d "
            "TCP connections open under a descriptor limit of %d\n", answered,
            LI_BUDGET_PINGS, LI_BUDGET_CONNS, LI_BUDGET_LIMIT);
    ck_assert_msg(answered == LI_BUDGET_PINGS, "%d of %d Unix clients answered PING within "
                  "%d ms", answered, LI_BUDGET_PINGS, LOCAL_MS);
    li_expect_line_eof(fds[LI_BUDGET_CONNS - 1], "ERR LIMIT too many clients (descriptor "
                       "limit 100; limits.unix_reserved", "the last TCP client");
    ck_assert_int_eq(h_stat(u, "client_slots", &slots), 0);
    ck_assert_msg(slots > LI_UNIX_RESERVED && slots < LI_BUDGET_LIMIT,
                  "client_slots %lld under a descriptor limit of %d", slots, LI_BUDGET_LIMIT);
    expect_wait_stat_on(u, "rejected_descriptors",
                        LI_BUDGET_CONNS - (slots - LI_UNIX_RESERVED));
    ck_assert_msg(h_log_find(0, "start: descriptor limit 100 leaves", NULL, 0),
                  "the start did not log the client slots the descriptor limit leaves");
    EXPECT_REPLY(fds[0], "PING", "PONG");
    EXPECT_REPLY(fds[slots - LI_UNIX_RESERVED - 1], "PING", "PONG");
    for (i = 0; i < LI_BUDGET_CONNS; i++) {
        close(fds[i]);
    }
    close(u);
}
END_TEST

#define LI_RELOAD_HARD  300     /* the hard limit raised under the daemon */
#define LI_RELOAD_LOWER 80      /* without the privilege to raise it: lowered to this */

/*
 * The budget is read again at reload: the operator raises the hard
 * descriptor limit of the running daemon (prlimit(1)) and sends SIGHUP;
 * the daemon raises its soft limit to it and client_slots grows by as
 * much.  A test without the privilege to raise a hard limit lowers it
 * instead, and the slots shrink by as much.
 */
START_TEST(descriptor_budget_reload)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .nofile = LI_BUDGET_LIMIT,
                               .log_level = "info" };
    long long before = -1;
    rlim_t now = LI_RELOAD_HARD;
    off_t from;
    int u;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    ck_assert_int_eq(h_stat(u, "client_slots", &before), 0);
    ck_assert_msg(before > 0 && before < LI_BUDGET_LIMIT, "client_slots %lld at start", before);
    from = h_log_size();
    if (li_set_nofile(h_daemon_pid(), LI_BUDGET_LIMIT, LI_RELOAD_HARD) != 0) {
        ck_assert_msg(errno == EPERM, "prlimit: %s", strerror(errno));
        now = LI_RELOAD_LOWER;
        ck_assert_msg(li_set_nofile(h_daemon_pid(), now, now) == 0, "prlimit: %s",
                      strerror(errno));
    }
    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    ck_assert_msg(h_wait_log(from, "reload: done", H_PROMPT_MS), "the reload did not finish");
    expect_wait_stat_on(u, "client_slots", before + (long long)now - LI_BUDGET_LIMIT);
    if (now == LI_RELOAD_HARD) {
        ck_assert_msg(h_log_find(from, "descriptor limit raised from 100 to 300", NULL, 0),
                      "the reload did not raise the soft limit to the hard one");
    }
    ck_assert_msg(h_log_find(from, now == LI_RELOAD_HARD ? "reload: descriptor limit 300 "
                                                          : "reload: descriptor limit 80 ",
                             NULL, 0),
                  "the reload did not log the client slots");
    close(u);
}
END_TEST

#define LI_FD_LIMIT     128     /* the daemon's descriptor limit at start */
#define LI_FD_LOWERED   48      /* then, under it, without a reload */
#define LI_FD_HELD      60      /* clients served before it is lowered */
#define LI_FD_MORE      30      /* connections after: no descriptor for them */
#define LI_FD_KEPT      10      /* clients kept open after the others left */
#define LI_FD_WINDOW_MS 2000    /* how long the daemon is watched out of descriptors */

/* True when a new Unix client is answered PING. */
static bool
li_cond_unix_ping(void *arg)
{
    (void)arg;
    return li_unix_pings(1) == 1;
}

/*
 * Out of descriptors although the client slots fit (the limit lowered
 * under the running daemon stands for descriptors taken elsewhere),
 * every waiting connection is refused from the spare descriptor: a TCP
 * client and a Unix one get ERR LIMIT naming the descriptor limit, a TLS
 * one is closed without a byte, and nothing is left waiting, so the
 * daemon spends little CPU and logs one accept-failure line.  Once
 * clients leave, new ones are served.
 */
START_TEST(out_of_descriptors_refuses)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .nofile = LI_FD_LIMIT,
                               .log_level = "info" };
    int fds[LI_FD_HELD], more[LI_FD_MORE], u, v, t, i, lines;
    long long cpu0, cpu1, hz = sysconf(_SC_CLK_TCK), failures = -1;
    const char *want = "ERR LIMIT too many clients (out of descriptors, descriptor limit 48";

    EXPECT_SETUP(.masters = NMASTERS, .tls_cert = "server", .daemons = 1, .opts = &o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    expect_wait_stat_on(u, "connections", 1);
    for (i = 0; i < LI_FD_HELD; i++) {
        fds[i] = expect_tcp();
        EXPECT_REPLY(fds[i], "PING", "PONG");
    }
    ck_assert_msg(li_set_nofile(h_daemon_pid(), LI_FD_LOWERED, LI_FD_LOWERED) == 0,
                  "prlimit: %s", strerror(errno));
    for (i = 0; i < LI_FD_MORE; i++) {
        more[i] = expect_tcp();
    }
    for (i = 0; i < LI_FD_MORE; i++) {
        li_expect_line_eof(more[i], want, "a TCP client out of descriptors");
        close(more[i]);
    }
    v = h_connect_unix();
    ck_assert_int_ge(v, 0);
    li_expect_line_eof(v, want, "a Unix client out of descriptors");
    close(v);
    t = h_tcp_connect(NULL, "127.0.0.1", h_daemon_tls_port(), 0);
    ck_assert_int_ge(t, 0);
    ck_assert_msg(h_expect_eof(t, LOCAL_MS), "a TLS client out of descriptors was not closed "
                  "without a byte");
    close(t);
    cpu0 = li_cpu_ticks(h_daemon_pid());
    h_sleep_ms(LI_FD_WINDOW_MS);    /* a measurement window, not a wait for a state */
    cpu1 = li_cpu_ticks(h_daemon_pid());
    lines = li_log_lines("accept failed");
    fprintf(stderr, "out_of_descriptors_refuses: %lld ms of CPU in %d ms out of descriptors, "
            "%d accept-failure lines\n", (cpu1 - cpu0) * 1000 / hz, LI_FD_WINDOW_MS, lines);
    ck_assert_msg(cpu0 >= 0 && cpu1 >= 0, "cannot read the daemon's CPU time");
    ck_assert_msg((cpu1 - cpu0) * 1000 / hz < LI_FD_WINDOW_MS / 4,
                  "the daemon used %lld ms of CPU in %d ms out of descriptors: it spins",
                  (cpu1 - cpu0) * 1000 / hz, LI_FD_WINDOW_MS);
    ck_assert_msg(lines == 1, "%d accept-failure lines in the log, expected one", lines);
    ck_assert_msg(h_log_find(0, "refused from the spare descriptor", NULL, 0),
                  "the log does not say the connections were refused from the spare");
    ck_assert_int_eq(h_stat(u, "accept_failures", &failures), 0);
    ck_assert_msg(failures >= 1, "accept_failures %lld", failures);
    expect_wait_stat_on(u, "rejected_descriptors", LI_FD_MORE + 2);
    EXPECT_REPLY(fds[0], "PING still", "PONG still");
    /* Most clients leave: descriptors under the limit are free again. */
    for (i = LI_FD_KEPT; i < LI_FD_HELD; i++) {
        close(fds[i]);
    }
    ck_assert_msg(h_wait_until(li_cond_unix_ping, NULL, H_PROMPT_MS),
                  "no Unix client was served once clients left");
    ck_assert_msg(h_wait_until(li_cond_ping, NULL, H_PROMPT_MS),
                  "no TCP client was served once clients left");
    ck_assert_msg(h_log_find(0, "start: descriptor limit 128 leaves", NULL, 0),
                  "no warning at start that max_clients does not fit the descriptor limit");
    for (i = 0; i < LI_FD_KEPT; i++) {
        close(fds[i]);
    }
    close(u);
}
END_TEST

/* max_locks_per_client: the next LOCK gets ERR LIMIT; the held ones stay. */
START_TEST(max_locks_per_client)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .max_locks_per_client = 2 };
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
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

/* A TCP connection to the daemon from source address from (an IPv4 loopback address). */
static int
li_connect_from(const char *from)
{
    int fd = h_tcp_connect(from, "127.0.0.1", h_daemon_port(), 0);

    ck_assert_msg(fd >= 0, "connect from %s: %s", from, strerror(errno));
    return fd;
}

/* The reply to AUTH password on a new connection from source address from; caller frees. */
static char *
li_auth_from(const char *from, const char *password)
{
    char line[128];
    char *got;
    int fd = li_connect_from(from);

    snprintf(line, sizeof(line), "AUTH %s", password);
    got = h_cmd(fd, line, LOCAL_MS);
    close(fd);
    ck_assert_msg(got != NULL, "AUTH from %s got no reply", from);
    return got;
}

/*
 * A new connection from source address from is refused: its first line
 * is ERR LIMIT naming setting, then the daemon closes it.
 */
static void
li_expect_refused(const char *from, const char *setting)
{
    int fd = li_connect_from(from);
    char *got = h_read_line(fd, LOCAL_MS);

    ck_assert_msg(got != NULL && strncmp(got, "ERR LIMIT ", 10) == 0
                  && strstr(got, setting) != NULL,
                  "a connection from %s got '%s', not ERR LIMIT naming %s", from,
                  got != NULL ? got : "(nothing)", setting);
    free(got);
    ck_assert_msg(h_expect_eof(fd, LOCAL_MS), "a refused connection stayed open");
    close(fd);
}

/* STATS unauthenticated read over u, -1 when it cannot be read. */
static long long
li_unauthenticated(int u)
{
    long long n = -1;

    return h_stat(u, "unauthenticated", &n) == 0 ? n : -1;
}

static void
li_wait_connections(int u, long long want)
{
    expect_wait_stat_on(u, "connections", want);
}

/*
 * Connections that never authenticate fill only their own pool, and a
 * full share of it does not keep a newcomer out: the group's oldest
 * waiting connection is closed for it, told why (every loopback address
 * is in one group, 127/8, but 127.0.0.1, which the harness's AUTH made a
 * known address of its own).  The Unix socket is not held up, and one that
 * authenticates leaves the pool and stays.
 */
START_TEST(unauthenticated_capped)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = "s3cret-pw",
                               .limits_yaml = "  max_unauthenticated: 4\n"
                                              "  max_unauthenticated_per_source: 2\n" };
    int a0, a1, b0, u;
    long long evicted = -1;
    char *got;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    a0 = li_connect_from("127.0.0.5");
    a1 = li_connect_from("127.0.0.5");
    expect_wait_unauthenticated(u, 2);
    b0 = li_connect_from("127.0.0.6");
    got = h_read_line(a0, LOCAL_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR LIMIT closed to make room", 29) == 0
                  && strstr(got, "(limits.max_unauthenticated_per_source)") != NULL,
                  "the oldest waiting connection got '%s'", got != NULL ? got : "(nothing)");
    free(got);
    ck_assert_msg(h_expect_eof(a0, LOCAL_MS), "the oldest waiting connection stayed open");
    expect_wait_unauthenticated(u, 2);
    /* The Unix socket is not held up. */
    EXPECT_REPLY(u, "PING", "PONG");
    EXPECT_REPLY(a1, "AUTH s3cret-pw", "OK");
    expect_wait_unauthenticated(u, 1);
    got = li_auth_from("127.0.0.7", "s3cret-pw");
    ck_assert_msg(strcmp(got, "OK") == 0, "a newcomer got '%s'", got);
    free(got);
    EXPECT_REPLY(a1, "PING", "PONG");
    EXPECT_REPLY(b0, "AUTH s3cret-pw", "OK");
    ck_assert_int_eq(h_stat(u, "unauthenticated_evicted", &evicted), 0);
    ck_assert_int_eq(evicted, 1);
    close(a0);
    close(a1);
    close(b0);
    expect_wait_unauthenticated(u, 0);
    close(u);
}
END_TEST

/*
 * One Unix-socket client (*u), once the harness's own connections are
 * gone, then two TCP clients (*t0, *t1) that have been served.
 */
static void
li_unix_and_two_tcp(int *u, int *t0, int *t1)
{
    *u = h_connect_unix();
    ck_assert_int_ge(*u, 0);
    li_wait_connections(*u, 1);
    *t0 = expect_tcp();
    *t1 = expect_tcp();
    EXPECT_REPLY(*t0, "PING", "PONG");
    EXPECT_REPLY(*t1, "PING", "PONG");
}

/*
 * With max_clients_per_source, one address group cannot take every slot:
 * every loopback address is in 127/8, one group; a slot given back is
 * taken again.
 */
START_TEST(clients_per_source_capped)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100,
                               .limits_yaml = "  max_clients_per_source: 2\n" };
    int a0, a1, b0, u;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    li_wait_connections(u, 1);      /* the harness's own connections are gone */
    a0 = li_connect_from("127.0.0.1");
    a1 = li_connect_from("127.0.0.1");
    EXPECT_REPLY(a0, "PING", "PONG");
    EXPECT_REPLY(a1, "PING", "PONG");
    li_expect_refused("127.0.0.1", "(limits.max_clients_per_source)");
    li_expect_refused("127.0.0.2", "(limits.max_clients_per_source)");
    close(a0);
    li_wait_connections(u, 2);
    b0 = li_connect_from("127.0.0.2");
    EXPECT_REPLY(b0, "PING", "PONG");
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

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    li_unix_and_two_tcp(&u0, &t0, &t1);
    li_expect_refused("127.0.0.1", "limits.unix_reserved");
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

    EXPECT_SETUP(.masters = NMASTERS, .tls_cert = "server", .daemons = 1, .opts = &o);
    li_unix_and_two_tcp(&u, &t0, &t1);
    fd = h_connect_port(h_daemon_tls_port());
    ck_assert_int_ge(fd, 0);
    got = h_read_all(fd, 4096, LOCAL_MS, &len);
    ck_assert_msg(got != NULL && len == 0, "the TLS port wrote %zu plaintext bytes: '%s'", len,
                  got != NULL ? got : "");
    free(got);
    close(fd);
    ck_assert_msg(h_wait_log(0, "TLS: closed without a reply", H_PROMPT_MS),
                  "the refusal of a TLS client was not logged");
    close(t0);
    close(t1);
    close(u);
}
END_TEST

#define LI_DEADLINE_MS  4000    /* limits.auth_timeout_ms of one_deadline_from_accept */
#define LI_HANDSHAKE_LATE_MS 2000 /* the client starts its TLS handshake this late */

/*
 * The TLS handshake and AUTH share one deadline from accept: a client
 * that takes its time over the handshake does not get the AUTH
 * deadline again afterwards (a slot held twice as long).
 */
START_TEST(one_deadline_from_accept)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = "s3cret-pw",
                               .auth_timeout_ms = LI_DEADLINE_MS };
    struct client_tls_opts topts = { NULL, NULL, NULL };
    struct client c;
    enum client_read r;
    char addr[32];
    int64_t t0;

    EXPECT_SETUP(.masters = NMASTERS, .tls_cert = "server", .daemons = 1, .opts = &o);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", h_daemon_tls_port());
    topts.ca_file = h_cert("ca.crt");
    client_init(&c, -1, 0);
    t0 = h_now_ms();
    ck_assert_int_eq(client_connect_tcp(&c, addr, t0 + LOCAL_MS), 0);
    h_sleep_ms(LI_HANDSHAKE_LATE_MS);  /* the scenario: a slow handshake, not a wait */
    ck_assert_msg(client_start_tls(&c, "127.0.0.1", &topts, h_now_ms() + LOCAL_MS) == 0,
                  "TLS handshake: %s", c.err);
    do {
        r = client_read_line(&c, t0 + LI_DEADLINE_MS + LI_HANDSHAKE_LATE_MS + LOCAL_MS);
    } while (r == CLIENT_LINE);
    ck_assert_msg(r == CLIENT_EOF, "the connection did not end (%d: %s)", (int)r, c.err);
    ck_assert_msg(h_now_ms() - t0 < LI_DEADLINE_MS + LI_HANDSHAKE_LATE_MS / 2,
                  "closed %lld ms after connecting: the deadline of %d ms restarted after "
                  "the handshake", (long long)(h_now_ms() - t0), LI_DEADLINE_MS);
    client_close(&c);
}
END_TEST

#define LI_AUTH_DEADLINE_MS 3000 /* limits.auth_timeout_ms of auth_deadline_frees_slot */
#define LI_FLOOD_MS     1000    /* requests are sent this long, as fast as taken: their
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
                               .auth_timeout_ms = LI_AUTH_DEADLINE_MS };
    int u, fd, small = 4096, i;
    char sip[512], flood[4096];
    int64_t t0;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
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
    while (h_now_ms() - t0 < LI_FLOOD_MS) {
        if (send(fd, flood, sizeof(flood) - sizeof(flood) % 5, MSG_NOSIGNAL) < 0) {
            h_sleep_ms(5);  /* full: the daemon reads no more for now */
        }
    }
    expect_wait_unauthenticated(u, 1);
    while (li_unauthenticated(u) != 0 && h_now_ms() - t0 < 2 * LI_AUTH_DEADLINE_MS) {
        (void)!recv(fd, sip, sizeof(sip), MSG_DONTWAIT);   /* a sip: some progress */
        h_sleep_ms(100);
    }
    ck_assert_msg(li_unauthenticated(u) == 0 && h_now_ms() - t0 < LI_AUTH_DEADLINE_MS * 3 / 2,
                  "the slot was given back %lld ms after connecting (deadline %d ms)",
                  (long long)(h_now_ms() - t0), LI_AUTH_DEADLINE_MS);
    close(fd);
    close(u);
}
END_TEST

#define LI_PAUSE_DEADLINE_MS 1000 /* limits.auth_timeout_ms of pending_slot_rst_and_pause */

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
                               .auth_timeout_ms = LI_PAUSE_DEADLINE_MS };
    struct linger lg = { 1, 0 };
    char *got;
    int u, fd, ok;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    fd = li_connect_from("127.0.0.1");
    expect_wait_unauthenticated(u, 1);
    ck_assert_int_eq(h_send_raw(fd, "PIN", 3), 0);      /* a partial line, unread input */
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    close(fd);                                          /* RST */
    expect_wait_unauthenticated(u, 0);

    ok = li_connect_from("127.0.0.1");
    EXPECT_REPLY(ok, "AUTH s3cret-pw", "OK");
    fd = li_connect_from("127.0.0.2");
    expect_wait_unauthenticated(u, 1);
    ck_assert_int_eq(h_signal_daemon(SIGSTOP), 0);
    h_sleep_ms(3 * LI_PAUSE_DEADLINE_MS);   /* the scenario: a pause past the deadline */
    ck_assert_int_eq(h_signal_daemon(SIGCONT), 0);
    got = h_read_line(fd, LOCAL_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR AUTH no AUTH within", 23) == 0,
                  "the stranger got '%s' after the pause", got != NULL ? got : "(nothing)");
    free(got);
    ck_assert_msg(h_expect_eof(fd, LOCAL_MS), "the stranger outlived a pause past its deadline");
    expect_wait_unauthenticated(u, 0);
    EXPECT_REPLY(ok, "PING", "PONG");
    EXPECT_REPLY(u, "PING", "PONG");
    close(fd);
    close(ok);
    close(u);
}
END_TEST

/* arg: int *fd.  STATUS rd is answered (not refused by the budget). */
static bool
li_cond_status_free(void *arg)
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
li_watch(int fd, const char *name)
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

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    a = expect_tcp();
    b = expect_tcp();
    li_watch(a, "wa");
    li_watch(a, "wb");
    li_watch(b, "wc");
    got = h_cmd(b, "WATCH wd", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR LIMIT ", 10) == 0
                  && strstr(got, "(limits.max_watches)") != NULL,
                  "a fourth WATCH of three allowed got '%s'", got != NULL ? got : "(nothing)");
    free(got);
    /* Watching a name again is no new watch. */
    EXPECT_REPLY(b, "WATCH wc", "OK wc");
    EXPECT_REPLY(a, "UNWATCH wa", "OK wa");
    li_watch(b, "wd");
    close(a);
    close(b);
}
END_TEST

#define LI_FLOOD_SESSIONS   30      /* reading sessions, each from an address of its own */
#define LI_FLOOD_NAMES      100     /* fresh names each WATCHes a round */
#define LI_FLOOD_ROUNDS     5
#define LI_FLOOD_READS      8       /* limits.max_reads_in_flight */

/* Read lines from fd until n lines begin with "OK " (pushes skipped). */
static void
li_read_oks(int fd, int n, const char *what)
{
    char *line;

    while (n > 0) {
        line = h_read_line(fd, LOCAL_MS * 10);
        ck_assert_msg(line != NULL, "%s: %d answers missing", what, n);
        if (strncmp(line, "OK ", 3) == 0) {
            n--;
        } else {
            ck_assert_msg(line[0] == '!', "%s: '%s'", what, line);
        }
        free(line);
    }
}

static void
li_read_flood(size_t nmasters)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100,
                               .limits_yaml = "  reads_per_second: 1000000\n"
                                              "  max_watches: 1000000\n"
                                              "  max_reads_in_flight: 8\n" };
    int fd[LI_FLOOD_SESSIONS], by, probe, i, r, k;
    char from[32], line[64], *got;
    char *req;
    size_t off, j;
    long long most = 0, v;

    EXPECT_SETUP(.masters = nmasters, .daemons = 1, .opts = &o);
    by = expect_tcp();
    probe = expect_tcp();
    EXPECT_PREFIX(by, "LOCK bystander ttl=1000", "OK bystander");
    for (i = 0; i < LI_FLOOD_SESSIONS; i++) {
        snprintf(from, sizeof(from), "127.0.1.%d", i + 1);
        fd[i] = h_tcp_connect(from, "127.0.0.1", h_daemon_port(), 0);
        ck_assert_msg(fd[i] >= 0, "connect from %s: %s", from, strerror(errno));
    }
    req = malloc(LI_FLOOD_NAMES * 64);
    ck_assert_ptr_nonnull(req);
    for (r = 0; r < LI_FLOOD_ROUNDS; r++) {
        for (i = 0; i < LI_FLOOD_SESSIONS; i++) {
            for (k = 0, off = 0; k < LI_FLOOD_NAMES; k++) {
                off += (size_t)snprintf(req + off, 64, "WATCH fl-%d-%d-%d\n", r, i, k);
            }
            ck_assert_int_eq(h_send_raw(fd[i], req, off), 0);
        }
        /* A client of its own, in the flood: its lock is granted by a quorum. */
        snprintf(line, sizeof(line), "TRYLOCK probe%d", r);
        got = h_cmd(probe, line, 10 * LOCAL_MS);
        ck_assert_msg(got != NULL && strncmp(got, "OK probe", 8) == 0, "%s: '%s'", line,
                      got != NULL ? got : "(none)");
        free(got);
        snprintf(line, sizeof(line), "UNLOCK probe%d", r);
        got = h_cmd(probe, line, 10 * LOCAL_MS);
        ck_assert_msg(got != NULL && strncmp(got, "OK probe", 8) == 0, "%s: '%s'", line,
                      got != NULL ? got : "(none)");
        free(got);
        for (i = 0; i < LI_FLOOD_SESSIONS; i++) {
            snprintf(line, sizeof(line), "session %d, round %d", i, r);
            li_read_oks(fd[i], LI_FLOOD_NAMES, line);
        }
        ck_assert_int_eq(h_stat_once("reads_in_flight", &v), 0);
        most = v > most ? v : most;
    }
    free(req);
    /* Every read is made, in its turn: the reads drain. */
    expect_wait_stat("reads_waiting", 0, false, 60000);
    ck_assert_msg(most <= LI_FLOOD_READS, "%lld reads in flight, more than %d", most,
                  LI_FLOOD_READS);
    ck_assert_msg(expect_stat("reads_waited") > 0, "no read waited: the flood did not flood");
    for (j = 0; j < nmasters; j++) {
        snprintf(line, sizeof(line), "master.%zu.reconnects", j);
        ck_assert_msg(expect_stat(line) == 0, "master %zu was dropped in the flood", j);
    }
    ck_assert_msg(!expect_log_has("down:"), "a master was declared down");
    ck_assert_int_eq(expect_stat("locks_lost"), 0);
    /* The bystander still holds its lock, and heard nothing. */
    ck_assert_msg(h_quiet(by, 10), "the bystander was told something");
    got = h_cmd(by, "UNLOCK bystander", LOCAL_MS);
    ck_assert_msg(got != NULL && strcmp(got, "OK bystander holds=0") == 0, "UNLOCK: '%s'",
                  got != NULL ? got : "(none)");
    free(got);
    for (i = 0; i < LI_FLOOD_SESSIONS; i++) {
        close(fd[i]);
    }
    close(by);
    close(probe);
}

/*
 * One client's reads never cost another client its lock.  30 sessions
 * from 30 addresses each WATCH 100 fresh names at once, five times,
 * within their read budgets, while a bystander holds a session lock with
 * a short ttl and a probe takes and frees a lock of its own each round.
 * Reads wait their turn in the daemon (at most limits.max_reads_in_flight
 * in flight), renewals go first on the master links: the bystander's
 * lock is never LOST, every probe is granted, no master is declared
 * down, and every read is made.  On one master (where the old daemon
 * lost the bystander's lock) and on five.
 */
START_TEST(read_flood_spares_locks)
{
    li_read_flood(1);
}
END_TEST

START_TEST(read_flood_spares_quorum)
{
    li_read_flood(NMASTERS);
}
END_TEST

#define LI_READ_ROUND_MS 5000   /* node_timeout_ms: how long a read holds its slot */

/*
 * A STATUS over the daemon's read budget waits for its turn, and is
 * answered ERR LIMIT only when its own wait (limits.read_wait_ms) runs
 * out.  One read in flight at most; the master is stopped, so a's read
 * holds the slot until the master answers or the round's deadline
 * (node_timeout_ms).  b's STATUS waits 400 ms and is refused; c's, asked
 * after that, waits (STATS reads_waiting) and is let in as soon as the
 * master, running again, has answered a's read.  The round's deadline
 * is long (5 s) so that c is asked while a's read still holds the slot
 * however slowly the machine runs: c has that deadline less b's wait.
 */
START_TEST(status_waits_its_turn)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .node_timeout_ms = LI_READ_ROUND_MS,
                               .min_ttl_ms = LI_READ_ROUND_MS + 1000,
                               .down_after_ms = LI_READ_ROUND_MS + 1000,
                               .limits_yaml = "  max_reads_in_flight: 1\n"
                                              "  read_wait_ms: 400\n" };
    int a, b, c;
    char *got;

    EXPECT_SETUP(.masters = 1, .daemons = 1, .opts = &o);
    a = expect_tcp();
    b = expect_tcp();
    c = expect_tcp();
    ck_assert_int_eq(h_signal_master(0, SIGSTOP), 0);
    ck_assert_int_eq(h_send(a, "STATUS sa"), 0);
    expect_wait_stat("reads_in_flight", 1, false, H_PROMPT_MS);
    got = h_cmd(b, "STATUS sb", LI_READ_ROUND_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR LIMIT ", 10) == 0
                  && strstr(got, "limits.read_wait_ms") != NULL, "b's STATUS: '%s'",
                  got != NULL ? got : "(none)");
    free(got);
    ck_assert_int_eq(expect_stat("reads_timed_out"), 1);
    ck_assert_int_eq(h_send(c, "STATUS sc"), 0);
    expect_wait_stat("reads_waiting", 1, false, H_PROMPT_MS);
    ck_assert_int_eq(expect_stat("reads_in_flight"), 1);
    ck_assert_int_eq(h_signal_master(0, SIGCONT), 0);
    got = h_read_line(c, LI_READ_ROUND_MS);
    ck_assert_msg(got != NULL && strcmp(got, "FREE sc") == 0, "c's STATUS: '%s'",
                  got != NULL ? got : "(none)");
    free(got);
    ck_assert_int_eq(expect_stat("reads_waited"), 1);
    ck_assert_int_eq(expect_stat("reads_timed_out"), 1);
    got = h_read_line(a, LI_READ_ROUND_MS);
    ck_assert_msg(got != NULL, "a's STATUS got no answer");
    free(got);
    expect_wait_stat("reads_in_flight", 0, false, H_PROMPT_MS);
    close(a);
    close(b);
    close(c);
}
END_TEST

/*
 * Sessions that close while their STATUS waits for its turn: the
 * request is still answered in order (the end of input answers every
 * complete request), so it waits its turn like any other and takes
 * nothing from the budget; once the master answers again every read is
 * made, every session ends, and the budget is whole.  (The stopped
 * master holds a's read for a round's deadline, 5 s here.)
 */
START_TEST(status_waiting_at_close)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .node_timeout_ms = 5000,
                               .min_ttl_ms = 20000, .down_after_ms = 20000,
                               .limits_yaml = "  max_reads_in_flight: 1\n" };
    int a, b, i;
    char *got;

    EXPECT_SETUP(.masters = 1, .daemons = 1, .opts = &o);
    a = expect_tcp();
    ck_assert_int_eq(h_signal_master(0, SIGSTOP), 0);
    ck_assert_int_eq(h_send(a, "STATUS sa"), 0);
    expect_wait_stat("reads_in_flight", 1, false, H_PROMPT_MS);
    for (i = 0; i < 5; i++) {
        b = expect_tcp();
        ck_assert_int_eq(h_send(b, "STATUS sb"), 0);
        expect_wait_stat("reads_waiting", i + 1, false, H_PROMPT_MS);
        close(b);
    }
    ck_assert_int_eq(expect_stat("reads_in_flight"), 1);
    ck_assert_int_eq(h_signal_master(0, SIGCONT), 0);
    got = h_read_line(a, 5000 + LOCAL_MS);
    ck_assert_msg(got != NULL, "a's STATUS got no answer");
    free(got);
    expect_wait_stat("reads_waiting", 0, false, 5000 + LOCAL_MS);
    expect_wait_stat("reads_in_flight", 0, false, 5000 + LOCAL_MS);
    expect_wait_stat("connections", 2, false, 5000 + LOCAL_MS);     /* a, and the STATS one */
    ck_assert_int_eq(expect_stat("reads_waited"), 5);
    b = expect_tcp();
    got = h_cmd(b, "STATUS sc", 5 * H_NODE_TIMEOUT_MS);
    ck_assert_msg(got != NULL && strcmp(got, "FREE sc") == 0, "STATUS: '%s'",
                  got != NULL ? got : "(none)");
    free(got);
    close(a);
    close(b);
}
END_TEST

#define LI_READS_PER_S 1        /* limits.reads_per_second of reads_budgeted: the
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

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    fd = expect_tcp();
    calls0 = h_master_calls(0, "evalsha");
    for (i = 0; i < LI_READS_PER_S; i++) {
        EXPECT_REPLY(fd, "STATUS rd", "FREE rd");
    }
    got = h_cmd(fd, "STATUS rd", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR LIMIT ", 10) == 0
                  && strstr(got, "(limits.reads_per_second): try again in ") != NULL,
                  "STATUS %d of %d a second got '%s'", LI_READS_PER_S + 1, LI_READS_PER_S,
                  got != NULL ? got : "(nothing)");
    free(got);
    got = h_cmd(fd, "WATCH rd", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR LIMIT ", 10) == 0,
                  "WATCH over the budget got '%s'", got != NULL ? got : "(nothing)");
    free(got);
    calls1 = h_master_calls(0, "evalsha");
    ck_assert_msg(calls1 - calls0 <= LI_READS_PER_S,
                  "master 0 ran %lld scripts for %d allowed reads", calls1 - calls0,
                  LI_READS_PER_S);
    EXPECT_REPLY(fd, "PING", "PONG");   /* other verbs are not budgeted */
    /* The budget is a second's: refilled within one. */
    ck_assert_msg(h_wait_until(li_cond_status_free, &fd, 1000 + H_PROMPT_MS),
                  "STATUS was still refused %d ms later", 1000 + H_PROMPT_MS);
    expect_wait_stat("reads_refused", 2, true, H_PROMPT_MS);
    close(fd);
}
END_TEST

static Suite *
limits_suite(void)
{
    Suite *s = suite_create("limits");

    EXPECT_ADD(s, client_never_reads, TEST_TIMEOUT_S);
    EXPECT_ADD(s, slowloris, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, non_reader_closed, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, max_clients, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, out_of_descriptors_refuses, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, unix_kept_out_of_descriptors, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, descriptor_budget_reload, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, max_locks_per_client, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, unauthenticated_capped, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, clients_per_source_capped, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, unix_slots_reserved, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, tls_refused_without_plaintext, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, one_deadline_from_accept, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, auth_deadline_frees_slot, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, pending_slot_rst_and_pause, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, watches_capped_globally, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, reads_budgeted, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, read_flood_spares_locks, 120);
    EXPECT_ADD(s, read_flood_spares_quorum, 120);
    EXPECT_ADD(s, status_waits_its_turn, TEST_TIMEOUT_40_S);
    EXPECT_ADD(s, status_waiting_at_close, TEST_TIMEOUT_40_S);
    return s;
}

const struct runner runner_main = { "check_limits", limits_suite, h_suite_init, h_suite_cleanup };
