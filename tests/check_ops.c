/*
 * check_ops.c: redlockd as an operator and a service manager see it.
 *
 * Real redis-server masters and the real daemon on free loopback ports
 * (tests/harness.h).  SIGHUP reload: new limits apply to open sessions
 * and held locks survive; a file with an error is rejected whole, with
 * its file:line:column in the log; a file that changes a setting that
 * takes a restart (masters, listen.tcp) is refused whole.  systemd:
 * the sd_notify messages (READY, WATCHDOG, RELOADING, STOPPING, and
 * STATUS= with quarantined masters and with AOF-always ones that are
 * not) read from a datagram socket of our own, and socket activation with
 * listening sockets we create and pass as descriptors 3 and 4, protected
 * mode included.  The systemd tests need a daemon built with libsystemd
 * and say so when they skip.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <check.h>

#include "tests/expect.h"
#include "tests/runner.h"
#include "tests/harness.h"

#define NMASTERS        5
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define LOCAL_MS        1000    /* deadline for a reply the daemon gives alone */
#define RELOAD_MS       5000    /* deadline for a reload to be logged: done at once, a
                                   loaded, sanitized machine is slow to get there */
#define EXIT_MS         5000    /* deadline for the daemon to exit */
#define TEST_TIMEOUT_S  40
#define WATCHDOG_USEC   "400000"
#define OPS_WATCHDOG_MS 400     /* WATCHDOG_USEC: the service manager's limit between pings */
#define NOTIFY_MAX      512     /* datagrams kept per test */
#define NOTIFY_SIZE     1024    /* longest datagram kept */

/* ---- state a test leaves for the teardown ---- */

static pid_t ops_child;         /* a daemon we spawned ourselves (socket activation) */
static int   ops_fds[4] = { -1, -1, -1, -1 };  /* sockets to close in teardown */
static bool  ops_have_systemd;  /* set in main(): the daemon links libsystemd */

/* ---- helpers ---- */

static void
ops_keep_fd(int fd)
{
    size_t i;

    for (i = 0; i < sizeof(ops_fds) / sizeof(ops_fds[0]); i++) {
        if (ops_fds[i] < 0) {
            ops_fds[i] = fd;
            return;
        }
    }
    ck_abort_msg("ops_keep_fd: no room (a bug in the test)");
}

static void
ops_teardown(void)
{
    size_t i;

    if (ops_child > 0) {
        kill(ops_child, SIGKILL);
        (void)waitpid(ops_child, NULL, 0);
        ops_child = 0;
    }
    for (i = 0; i < sizeof(ops_fds) / sizeof(ops_fds[0]); i++) {
        if (ops_fds[i] >= 0) {
            close(ops_fds[i]);
            ops_fds[i] = -1;
        }
    }
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    h_end();
}

/* A test that cannot run here says why and passes. */
static void
ops_skip(const char *why)
{
    printf("check_ops: %s: skipped: %s\n", tcase_name(), why);
    fflush(stdout);
}

/* Write text to path through path.tmp and rename(2), as an editor would. */
static void
ops_write_atomic(const char *path, const char *text)
{
    char tmp[512];
    FILE *f;
    int rc;

    ck_assert_int_lt(snprintf(tmp, sizeof(tmp), "%s.tmp", path), (int)sizeof(tmp));
    f = fopen(tmp, "we");
    ck_assert_msg(f != NULL, "cannot create %s: %s", tmp, strerror(errno));
    fputs(text, f);
    rc = fflush(f) == 0 && fsync(fileno(f)) == 0 && !ferror(f) ? 0 : -1;
    ck_assert_msg(fclose(f) == 0 && rc == 0, "cannot write %s", tmp);
    ck_assert_msg(rename(tmp, path) == 0, "rename %s: %s", tmp, strerror(errno));
}

/*
 * Replace the one occurrence of old in the malloc'd string *text by
 * repl.  The test fails when old does not occur exactly once (the
 * config the harness writes is not what this test expects).
 */
static void
ops_replace(char **text, const char *old, const char *repl)
{
    char *at = strstr(*text, old), *out;
    size_t head, olen = strlen(old), rlen = strlen(repl), len = strlen(*text);

    ck_assert_msg(at != NULL, "'%s' is not in the config:\n%s", old, *text);
    ck_assert_msg(strstr(at + 1, old) == NULL, "'%s' is in the config twice", old);
    head = (size_t)(at - *text);
    out = malloc(len - olen + rlen + 1);
    ck_assert_ptr_nonnull(out);
    memcpy(out, *text, head);
    memcpy(out + head, repl, rlen);
    memcpy(out + head + rlen, at + olen, len - head - olen + 1);
    free(*text);
    *text = out;
}

/* 1-based number of the line of text on which the first occurrence of s starts. */
static int
ops_line_of(const char *text, const char *s)
{
    const char *at = strstr(text, s), *p;
    int line = 1;

    ck_assert_msg(at != NULL, "'%s' is not in the config", s);
    for (p = text; p < at; p++) {
        line += *p == '\n';
    }
    return line;
}

/*
 * Send SIGHUP and wait for the line that ends this reload: "reload:
 * done" or the reason it was refused (expect).  Returns the log offset
 * from before the signal, for further searches in what the reload
 * logged.
 */
static off_t
ops_reload(const char *expect, int at)
{
    off_t from = h_log_size();

    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    if (!h_wait_log(from, expect, RELOAD_MS)) {
        h_print_daemon_log_tail(30);
        ck_abort_msg("line %d: SIGHUP: no log line with '%s' within %d ms", at, expect,
                     RELOAD_MS);
    }
    ck_assert_msg(h_log_find(from, "SIGHUP: reloading ", NULL, 0),
                  "line %d: the reload did not log its start", at);
    return from;
}

#define OPS_RELOAD(expect) ops_reload((expect), __LINE__)

/*
 * A STATS counter read over a connection of the test's own (a daemon
 * the harness did not start, which h_wait_stat cannot reach).
 */
struct ops_stat {
    int         fd;     /* connection to send STATS on */
    const char *name;   /* counter */
    long long   want;   /* value to reach */
    long long   seen;   /* last value read, -1 when none */
};

static bool
ops_cond_stat_fd(void *arg)
{
    struct ops_stat *s = arg;

    if (h_stat(s->fd, s->name, &s->seen) != 0) {
        s->seen = -1;
        return false;
    }
    return s->seen == s->want;
}

/* True when nothing accepts TCP connections on 127.0.0.1:port. */
static bool
ops_port_refused(int port)
{
    int fd = h_tcp_connect(NULL, "127.0.0.1", port, 0);

    if (fd >= 0) {
        close(fd);
        return false;
    }
    return errno == ECONNREFUSED;
}

/* A blocking connection to the Unix socket at path, or -1. */
static int
ops_connect_path(const char *path)
{
    struct sockaddr_un sun;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        return -1;
    }
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    if (snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path) >= (int)sizeof(sun.sun_path)
        || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- SIGHUP reload ---- */

/*
 * A reload applies a new limit to a session that is already open, and
 * the lock that session holds survives it on every master.
 */
START_TEST(reload_applies)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .max_locks_per_client = 1 };
    const char *path;
    char *conf, *got, line[64], owner[16];
    off_t mark;
    int a, i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    path = h_daemon_conf_path();
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK a", "OK a ");
    EXPECT_PREFIX(a, "LOCK b", "ERR LIMIT ");

    conf = expect_read_file(path);
    ops_replace(&conf, "  max_locks_per_client: 1\n", "  max_locks_per_client: 5\n");
    ops_replace(&conf, "  level: debug\n", "  level: info\n");
    ops_write_atomic(path, conf);
    free(conf);
    mark = OPS_RELOAD("reload: done");
    ck_assert_msg(h_log_find(mark, "reload: done (log.level info,", NULL, 0),
                  "the reload did not report log.level info");

    /* Same connection: b now fits, and so do c, d and e, but not f. */
    EXPECT_PREFIX(a, "LOCK b", "OK b ");
    for (i = 0; i < 3; i++) {
        snprintf(line, sizeof(line), "LOCK %c", 'c' + i);
        EXPECT_PREFIX(a, line, "OK ");
    }
    EXPECT_PREFIX(a, "LOCK f", "ERR LIMIT ");
    /* a was held through the reload: ours, with its keys on every master. */
    got = h_cmd(a, "STATUS a", CMD_MS);
    ck_assert_msg(got != NULL && h_is_reply(got, "HELD", "a")
                  && h_reply_field(got, "owner", owner, sizeof(owner))
                  && strcmp(owner, "self") == 0,
                  "STATUS a answered '%s'", got != NULL ? got : "(nothing)");
    free(got);
    ck_assert_uint_eq(h_masters_holding("a", NULL), NMASTERS);
    EXPECT_REPLY(a, "UNLOCK a", "OK a holds=0");
    close(a);
}
END_TEST

/*
 * A file with an error is rejected whole: the log names the problem by
 * file:line:column, the limit changed in the same file does not apply,
 * and the daemon serves on.  A good file afterwards reloads.
 */
START_TEST(reload_rejects_errors)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .max_locks_per_client = 1 };
    const char *path;
    char *conf, *good, want[600], line[1024];
    off_t mark;
    int a, b, lineno;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    path = h_daemon_conf_path();
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK a", "OK a ");

    good = expect_read_file(path);
    conf = strdup(good);
    ck_assert_ptr_nonnull(conf);
    ops_replace(&conf, "  max_locks_per_client: 1\n", "  max_locks_per_client: 5\n");
    ops_replace(&conf, "\nlock:\n", "\nlock:\n  default_ttl_ms: banana\n");
    lineno = ops_line_of(conf, "  default_ttl_ms: banana");
    ops_write_atomic(path, conf);
    free(conf);
    mark = OPS_RELOAD("keeping the running configuration");
    /* Column 19: the value after "  default_ttl_ms: ". */
    snprintf(want, sizeof(want), "%s:%d:19: lock.default_ttl_ms: expected an integer, got "
             "'banana'", path, lineno);
    ck_assert_msg(h_log_find(mark, want, line, sizeof(line)),
                  "the log does not say '%s'", want);
    ck_assert_msg(strncmp(line, "error reload: ", 14) == 0, "logged as '%s'", line);
    ck_assert_msg(!h_log_find(mark, "reload: done", NULL, 0), "a bad file was applied");

    /* Still serving, with the old settings. */
    EXPECT_REPLY(a, "PING", "PONG");
    EXPECT_PREFIX(a, "LOCK b", "ERR LIMIT ");
    EXPECT_PREFIX(a, "STATUS a", "HELD a ");
    b = expect_tcp();
    EXPECT_REPLY(b, "PING after", "PONG after");
    EXPECT_PREFIX(b, "LOCK b", "OK b ");
    close(b);

    /* The reload machinery is not wedged: a good file applies. */
    ops_replace(&good, "  max_locks_per_client: 1\n", "  max_locks_per_client: 2\n");
    ops_write_atomic(path, good);
    free(good);
    (void)OPS_RELOAD("reload: done");
    EXPECT_PREFIX(a, "LOCK c", "OK c ");
    EXPECT_PREFIX(a, "LOCK d", "ERR LIMIT ");
    close(a);
}
END_TEST

/*
 * Settings that take a restart: a file that drops a master, or moves
 * listen.tcp, is refused whole with the reason logged; the limit that
 * changed in the same file stays as it was.  The same limit change alone
 * then applies (the control: it was the restart key that blocked it).
 */
START_TEST(reload_refuses_restart_keys)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .max_locks_per_client = 1 };
    long long up;
    const char *path;
    char *orig, *conf, old_item[64], old_tcp[64], new_tcp[64];
    off_t mark;
    int a, b, port, new_port;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    path = h_daemon_conf_path();
    port = h_daemon_port();
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK a", "OK a ");
    orig = expect_read_file(path);
    ops_replace(&orig, "  max_locks_per_client: 1\n", "  max_locks_per_client: 5\n");

    /* 1. Drop the last master. */
    conf = strdup(orig);
    ck_assert_ptr_nonnull(conf);
    snprintf(old_item, sizeof(old_item), "  - \"127.0.0.1:%d\"\n", h_master_port(NMASTERS - 1));
    ops_replace(&conf, old_item, "");
    ops_write_atomic(path, conf);
    free(conf);
    mark = OPS_RELOAD("masters changed, which takes a restart");
    ck_assert_msg(h_log_find(mark, "nothing was reloaded", NULL, 0),
                  "the refusal does not say that nothing was reloaded");
    ck_assert_msg(!h_log_find(mark, "reload: done", NULL, 0), "the reload was applied");
    EXPECT_PREFIX(a, "LOCK b", "ERR LIMIT ");
    ck_assert_msg(h_wait_stat("masters_up", NMASTERS, false, H_PROMPT_MS, &up),
                  "masters_up is %lld after the refused reload", up);
    ck_assert_uint_eq(h_masters_holding("a", NULL), NMASTERS);

    /* 2. Move listen.tcp to another port. */
    new_port = h_free_port();
    ck_assert_int_gt(new_port, 0);
    conf = strdup(orig);
    ck_assert_ptr_nonnull(conf);
    snprintf(old_tcp, sizeof(old_tcp), "  tcp: \"127.0.0.1:%d\"\n", port);
    snprintf(new_tcp, sizeof(new_tcp), "  tcp: \"127.0.0.1:%d\"\n", new_port);
    ops_replace(&conf, old_tcp, new_tcp);
    ops_write_atomic(path, conf);
    free(conf);
    mark = OPS_RELOAD("listen.tcp changed, which takes a restart");
    ck_assert_msg(!h_log_find(mark, "reload: done", NULL, 0), "the reload was applied");
    EXPECT_PREFIX(a, "LOCK b", "ERR LIMIT ");
    ck_assert_msg(ops_port_refused(new_port), "the daemon listens on the new port %d", new_port);
    b = expect_tcp();      /* the old port still serves */
    EXPECT_REPLY(b, "PING", "PONG");
    close(b);

    /* 3. The control: the limit change alone applies. */
    ops_write_atomic(path, orig);
    free(orig);
    (void)OPS_RELOAD("reload: done");
    EXPECT_PREFIX(a, "LOCK b", "OK b ");
    EXPECT_PREFIX(a, "STATUS a", "HELD a ");
    close(a);
}
END_TEST

/* ---- sd_notify ---- */

/* The datagrams received on the notification socket, in order. */
static char   ops_msgs[NOTIFY_MAX][NOTIFY_SIZE];
static size_t ops_nmsgs;
static int    ops_notify_fd = -1;

/* Read every datagram waiting on the notification socket. */
static void
ops_notify_drain(void)
{
    char buf[NOTIFY_SIZE];
    ssize_t n;

    while ((n = recv(ops_notify_fd, buf, sizeof(buf) - 1, MSG_DONTWAIT)) >= 0) {
        buf[n] = '\0';
        if (ops_nmsgs < NOTIFY_MAX) {
            memcpy(ops_msgs[ops_nmsgs++], buf, (size_t)n + 1);
        }
    }
}

/* True when message msg has the line want ("READY=1"), or a line starting with want when prefix. */
static bool
ops_msg_has(const char *msg, const char *want, bool prefix)
{
    size_t len = strlen(want);
    const char *p = msg, *end;

    for (;;) {
        end = strchr(p, '\n');
        if (end == NULL) {
            end = p + strlen(p);
        }
        if (prefix ? (size_t)(end - p) >= len && strncmp(p, want, len) == 0
                   : (size_t)(end - p) == len && strncmp(p, want, len) == 0) {
            return true;
        }
        if (*end == '\0') {
            return false;
        }
        p = end + 1;
    }
}

/* First message at index from or later with line want; NOTIFY_MAX when none. */
static size_t
ops_msg_find(size_t from, const char *want)
{
    size_t i;

    for (i = from; i < ops_nmsgs; i++) {
        if (ops_msg_has(ops_msgs[i], want, false)) {
            return i;
        }
    }
    return NOTIFY_MAX;
}

/* A sequence of messages to wait for. */
struct ops_notify_wait {
    size_t      from;       /* first message index to look at */
    const char *first;      /* a line the first message must have */
    const char *then;       /* a line a later message must have (or NULL) */
    size_t      count;      /* with then NULL: messages with first needed */
    size_t      seen;       /* messages with first seen so far */
    size_t      at;         /* index of the last message matched */
};

static bool
ops_cond_notify(void *arg)
{
    struct ops_notify_wait *w = arg;
    size_t i, j;

    ops_notify_drain();
    if (w->then != NULL) {
        i = ops_msg_find(w->from, w->first);
        j = i < NOTIFY_MAX ? ops_msg_find(i + 1, w->then) : NOTIFY_MAX;
        w->at = j;
        return j < NOTIFY_MAX;
    }
    for (i = w->from, w->seen = 0; i < ops_nmsgs; i++) {
        if (ops_msg_has(ops_msgs[i], w->first, false)) {
            w->seen++;
            w->at = i;
        }
    }
    return w->seen >= w->count;
}

/* Every message received, for a failure message. */
static void
ops_notify_dump(void)
{
    size_t i;

    fprintf(stderr, "check_ops: %zu notifications:\n", ops_nmsgs);
    for (i = 0; i < ops_nmsgs; i++) {
        fprintf(stderr, "  [%zu] %s\n", i, ops_msgs[i]);
    }
}

/* For h_wait_until: a message has a line that begins with (char *)arg. */
static bool
ops_cond_status(void *arg)
{
    size_t i;

    ops_notify_drain();
    for (i = 0; i < ops_nmsgs; i++) {
        if (ops_msg_has(ops_msgs[i], arg, true)) {
            return true;
        }
    }
    return false;
}

/*
 * Start the daemon with opts and a service manager of our own: a
 * datagram socket bound at <test dir>/notify.sock (ops_notify_fd) named
 * by NOTIFY_SOCKET, and WATCHDOG_USEC.  Only the daemon sees these (the
 * masters are already running).
 */
static void
ops_start_notified(const struct h_daemon_opts *o)
{
    struct sockaddr_un sun;
    int rc;

    ops_notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(ops_notify_fd, 0);
    ops_keep_fd(ops_notify_fd);
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    ck_assert_int_lt(snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/notify.sock", h_dir()),
                     (int)sizeof(sun.sun_path));
    ck_assert_msg(bind(ops_notify_fd, (struct sockaddr *)&sun, sizeof(sun)) == 0,
                  "bind %s: %s", sun.sun_path, strerror(errno));
    ck_assert_int_eq(setenv("NOTIFY_SOCKET", sun.sun_path, 1), 0);
    ck_assert_int_eq(setenv("WATCHDOG_USEC", WATCHDOG_USEC, 1), 0);
    rc = h_start_daemon(o);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    ck_assert_msg(rc == 0, "redlockd did not start (log above)");
}

/*
 * STATUS= tells the truth about quarantined masters: every master is
 * up, none counts, and the line says why and until when.
 */
START_TEST(sd_notify_status_quarantine)
{
    struct h_daemon_opts o = { .restart_quarantine = true, .max_ttl_ms = 3600000,
                               .default_ttl_ms = 30000 };
    static const char want[] =
        "STATUS=NO QUORUM: 5/5 masters up (quorum 3), 5 in restart quarantine until ";

    if (!ops_have_systemd) {
        ops_skip("redlockd was built without libsystemd (ldd $REDLOCKD_BIN)");
        return;
    }
    EXPECT_SETUP(.masters = NMASTERS);
    ops_start_notified(&o);
    if (!h_wait_until(ops_cond_status, (void *)want, H_PROMPT_MS)) {
        ops_notify_dump();
        ck_abort_msg("no '%s...' among the messages", want);
    }
}
END_TEST

/*
 * The STATUS= text docs/production.md's `systemctl status` example shows, with
 * "STATUS=" before it, into out: what follows 'Status: "' on that line,
 * up to the "..." that ends it.
 */
static void
ops_readme_status(char *out, size_t size)
{
    static const char mark[] = "# Status: \"";
    char line[512], *at = NULL, *end = NULL;
    FILE *f = fopen("docs/production.md", "r");

    ck_assert_msg(f != NULL, "docs/production.md not found (run from the repository root)");
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, "systemctl status redlockd") != NULL
            && (at = strstr(line, mark)) != NULL) {
            at += strlen(mark);
            end = strstr(at, "...\"");
            break;
        }
    }
    fclose(f);
    ck_assert_msg(at != NULL && end != NULL && end > at,
                  "docs/production.md has no line 'systemctl status redlockd ... # Status: "
                  "\"...\"'");
    ck_assert_int_lt(snprintf(out, size, "STATUS=%.*s", (int)(end - at), at), (int)size);
}

/*
 * Fresh masters run as docs/production.md says (appendonly
 * yes, appendfsync always) keep every acknowledged write through a
 * restart, so with lock.restart_quarantine on (and lock.max_ttl_ms one
 * hour, as in conf/redlockd.yml) none of them is quarantined: STATUS= is
 * docs/production.md's `systemctl status` example ("quorum: 5/5 masters up
 * (quorum 3), 0 quarantined; ...") and no message says that a master is
 * in restart quarantine.
 */
START_TEST(sd_notify_status_aof_always)
{
    struct h_daemon_opts o = { .restart_quarantine = true, .max_ttl_ms = 3600000,
                               .default_ttl_ms = 30000 };
    char want[256];
    size_t i;

    if (!ops_have_systemd) {
        ops_skip("redlockd was built without libsystemd (ldd $REDLOCKD_BIN)");
        return;
    }
    ops_readme_status(want, sizeof(want));
    EXPECT_SETUP(.masters = NMASTERS, .aof = true);
    ops_start_notified(&o);
    if (!h_wait_until(ops_cond_status, want, H_PROMPT_MS)) {
        ops_notify_dump();
        ck_abort_msg("no '%s...' among the messages (AOF-always masters quarantined?)", want);
    }
    for (i = 0; i < ops_nmsgs; i++) {
        ck_assert_msg(strstr(ops_msgs[i], "restart quarantine") == NULL,
                      "the daemon told the service manager '%s'", ops_msgs[i]);
    }
}
END_TEST

/*
 * The daemon tells the service manager READY=1 with a STATUS= line,
 * pings WATCHDOG=1 at half of WATCHDOG_USEC, brackets a reload with
 * RELOADING=1 and READY=1, and says STOPPING=1 on SIGTERM.  The service
 * manager is a datagram socket of our own named by NOTIFY_SOCKET.
 */
START_TEST(sd_notify_protocol)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100 };
    struct ops_notify_wait w;
    size_t i;
    bool up;
    int64_t t0;

    if (!ops_have_systemd) {
        ops_skip("redlockd was built without libsystemd (ldd $REDLOCKD_BIN)");
        return;
    }
    EXPECT_SETUP(.masters = NMASTERS);
    ops_start_notified(&o);
    ck_assert_msg(!h_log_find(0, "(built without libsystemd)", NULL, 0),
                  "ldd finds libsystemd but the daemon says it was built without");
    ck_assert_msg(h_log_find(0, "systemd watchdog: 400 ms, pinged every 200 ms", NULL, 0),
                  "the daemon did not take WATCHDOG_USEC=" WATCHDOG_USEC);

    /* READY=1 with a STATUS= line about the masters. */
    memset(&w, 0, sizeof(w));
    w.first = "READY=1";
    w.count = 1;
    if (!h_wait_until(ops_cond_notify, &w, H_PROMPT_MS)) {
        ops_notify_dump();
        ck_abort_msg("no READY=1 from the daemon");
    }
    ck_assert_msg(ops_msg_has(ops_msgs[w.at], "STATUS=", true)
                  && strstr(ops_msgs[w.at], "masters up") != NULL,
                  "READY=1 came without a STATUS= about the masters: '%s'", ops_msgs[w.at]);

    /*
     * WATCHDOG=1 at least 3 times in 1.5 s (every 200 ms expected), counted
     * from now: what the bound asserts is that each came within the service
     * manager's limit of the one before (3 * 400 ms), with 300 ms to spare.
     */
    ops_notify_drain();
    memset(&w, 0, sizeof(w));
    w.from = ops_nmsgs;
    w.first = "WATCHDOG=1";
    w.count = 3;
    t0 = h_now_ms();
    if (!h_wait_until(ops_cond_notify, &w, 3 * OPS_WATCHDOG_MS + 300)) {
        ops_notify_dump();
        ck_abort_msg("%zu WATCHDOG=1 in %d ms, expected at least 3", w.seen,
                     3 * OPS_WATCHDOG_MS + 300);
    }
    printf("check_ops: sd_notify_protocol: 3 WATCHDOG=1 in %lld ms\n",
           (long long)(h_now_ms() - t0));
    fflush(stdout);
    /* The pings carry the status too; by now every master is up. */
    for (i = w.from, up = false; i < ops_nmsgs && !up; i++) {
        up = strstr(ops_msgs[i], "STATUS=quorum: 5/5 masters up") != NULL;
    }
    ck_assert_msg(up, "no STATUS= with 'quorum: 5/5 masters up' among the pings: '%s'",
                  ops_msgs[w.at]);

    /* SIGHUP: RELOADING=1, then READY=1. */
    ops_notify_drain();
    memset(&w, 0, sizeof(w));
    w.from = ops_nmsgs;
    w.first = "RELOADING=1";
    w.then = "READY=1";
    (void)OPS_RELOAD("reload: done");
    if (!h_wait_until(ops_cond_notify, &w, H_PROMPT_MS)) {
        ops_notify_dump();
        ck_abort_msg("no RELOADING=1 followed by READY=1 after SIGHUP");
    }

    /* SIGTERM: STOPPING=1, then a clean exit. */
    ops_notify_drain();
    memset(&w, 0, sizeof(w));
    w.from = ops_nmsgs;
    w.first = "STOPPING=1";
    w.count = 1;
    ck_assert_int_eq(h_signal_daemon(SIGTERM), 0);
    if (!h_wait_until(ops_cond_notify, &w, H_PROMPT_MS)) {
        ops_notify_dump();
        ck_abort_msg("no STOPPING=1 after SIGTERM");
    }
    ck_assert_int_eq(h_wait_daemon(EXIT_MS), 0);
}
END_TEST

/* ---- socket activation ---- */

/*
 * Write a config for a daemon we spawn ourselves: listen.tcp on
 * tcp_port and listen.unix at unix_path (which socket activation must
 * leave alone), every master, and auth.password when not NULL.
 */
static void
ops_write_conf(const char *path, int tcp_port, const char *unix_path, const char *password)
{
    FILE *f = fopen(path, "we");
    size_t i;

    ck_assert_msg(f != NULL, "cannot create %s: %s", path, strerror(errno));
    fprintf(f, "listen:\n  tcp: \"127.0.0.1:%d\"\n  unix: \"%s\"\n", tcp_port, unix_path);
    fprintf(f, "masters:\n");
    for (i = 0; i < h_master_count(); i++) {
        fprintf(f, "  - \"127.0.0.1:%d\"\n", h_master_port(i));
    }
    fprintf(f, "lock:\n  node_timeout_ms: %d\n  min_ttl_ms: %d\n  restart_quarantine: false\n",
            H_NODE_TIMEOUT_MS, H_MIN_TTL_MS);
    if (password != NULL) {
        fprintf(f, "auth:\n  password: \"%s\"\n", password);
    }
    fprintf(f, "metrics:\n  listen: \"\"\nlog:\n  level: debug\n");
    ck_assert_msg(!ferror(f) && fclose(f) == 0, "cannot write %s", path);
}

/*
 * The TCP and TLS share of the client slots that the daemon logging to
 * log counted at start ("..., N of them for TCP and TLS"), or -1.
 */
static long long
ops_net_slots_logged(const char *log)
{
    char *text = expect_read_file(log);
    char *at = strstr(text, " of them for TCP and TLS"), *p;
    long long n = -1;

    if (at != NULL) {
        for (p = at; p > text && isdigit((unsigned char)p[-1]); p--) {
        }
        n = p < at ? strtoll(p, NULL, 10) : -1;
    }
    free(text);
    return n;
}

/* A listening TCP socket on addr (network order) and a free port; *port gets the port. */
static int
ops_listen_tcp(uint32_t addr, int *port)
{
    int fd = h_tcp_listen(addr, 64, port);

    ck_assert_msg(fd >= 0, "cannot listen on TCP: %s", strerror(errno));
    ops_keep_fd(fd);
    return fd;
}

/* A listening Unix stream socket at path. */
static int
ops_listen_unix(const char *path)
{
    struct sockaddr_un sun;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    ck_assert_int_ge(fd, 0);
    ops_keep_fd(fd);
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    ck_assert_int_lt(snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path),
                     (int)sizeof(sun.sun_path));
    ck_assert_msg(bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0 && listen(fd, 64) == 0,
                  "cannot listen on %s: %s", path, strerror(errno));
    return fd;
}

/*
 * Start $REDLOCKD_BIN -c conf as systemd would for a .socket unit: the
 * nfds sockets in fds become descriptors 3.., LISTEN_FDS and LISTEN_PID
 * name them; stdout and stderr go to log.  The child dies with the test
 * process (PR_SET_PDEATHSIG); ops_child gets its pid for the teardown.
 */
static void
ops_spawn_activated_named(const char *conf, const int *fds, int nfds, const char *names,
                          const char *log);

static void
ops_spawn_activated(const char *conf, const int *fds, int nfds, const char *log)
{
    ops_spawn_activated_named(conf, fds, nfds, NULL, log);
}

/* ops_spawn_activated() with LISTEN_FDNAMES set to names (NULL: unset). */
static void
ops_spawn_activated_named(const char *conf, const int *fds, int nfds, const char *names,
                          const char *log)
{
    const char *bin = getenv("REDLOCKD_BIN");
    pid_t parent = getpid(), pid;
    char num[32];
    int out, in, high[4], i;

    if (bin == NULL || bin[0] == '\0') {
        bin = "./build/redlockd";
    }
    ck_assert_int_le(nfds, 4);
    out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    ck_assert_msg(out >= 0, "open %s: %s", log, strerror(errno));
    fflush(NULL);
    pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        h_child_setup(parent);
        /* Out of the way of 0..4 first: a socket may sit on 3 or 4 already. */
        for (i = 0; i < nfds; i++) {
            high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 100);
            if (high[i] < 0) {
                _exit(127);
            }
        }
        in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0) {
            _exit(127);
        }
        for (i = 0; i < nfds; i++) {
            if (dup2(high[i], 3 + i) < 0) {     /* the copy is not close-on-exec */
                _exit(127);
            }
        }
        snprintf(num, sizeof(num), "%d", nfds);
        setenv("LISTEN_FDS", num, 1);
        snprintf(num, sizeof(num), "%d", (int)getpid());
        setenv("LISTEN_PID", num, 1);
        if (names != NULL) {
            setenv("LISTEN_FDNAMES", names, 1);
        } else {
            unsetenv("LISTEN_FDNAMES");
        }
        execl(bin, bin, "-c", conf, (char *)NULL);
        dprintf(2, "check_ops: exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    close(out);
    ops_child = pid;
}

struct ops_exit {
    pid_t pid;      /* child to reap */
    int   status;   /* its wait status, once reaped */
};

static bool
ops_cond_exited(void *arg)
{
    struct ops_exit *e = arg;

    return waitpid(e->pid, &e->status, WNOHANG) == e->pid;
}

/* Print the log of a daemon we spawned, for a failure message. */
static void
ops_print_file(const char *path)
{
    char *text = expect_read_file(path);

    fprintf(stderr, "---- %s ----\n%s---- end ----\n", path, text);
    free(text);
}

/* Read one reply on fd within timeout_ms and require it to start with prefix. */
static void
ops_expect_line(int fd, const char *what, const char *line, const char *prefix,
                const char *log, int64_t timeout_ms)
{
    char *got;

    got = line != NULL ? h_cmd(fd, line, timeout_ms) : h_read_line(fd, timeout_ms);
    if (got == NULL || strncmp(got, prefix, strlen(prefix)) != 0) {
        ops_print_file(log);
        ck_abort_msg("%s: '%s' answered '%s', expected '%s...'", what,
                     line != NULL ? line : "", got != NULL ? got : "(nothing)", prefix);
    }
    free(got);
}

/*
 * Socket activation: the daemon serves on the TCP and Unix sockets it
 * inherits as descriptors 3 and 4, binds neither listen.tcp nor
 * listen.unix from its config, takes locks through them, and leaves the
 * inherited socket file in place when it stops.
 */
START_TEST(socket_activation)
{
    char conf[512], log[512], sock[512], conf_sock[512];
    struct ops_stat up = { -1, "masters_up", NMASTERS, -1 };
    struct ops_exit ex;
    struct stat st;
    long long slots = -1;
    int fds[2], port, conf_port, t, u;

    if (!ops_have_systemd) {
        ops_skip("redlockd was built without libsystemd (ldd $REDLOCKD_BIN)");
        return;
    }
    EXPECT_SETUP(.masters = NMASTERS);
    snprintf(conf, sizeof(conf), "%s/activated.yml", h_dir());
    snprintf(log, sizeof(log), "%s/activated.log", h_dir());
    snprintf(sock, sizeof(sock), "%s/activated.sock", h_dir());
    snprintf(conf_sock, sizeof(conf_sock), "%s/conf.sock", h_dir());
    fds[0] = ops_listen_tcp(htonl(INADDR_LOOPBACK), &port);
    fds[1] = ops_listen_unix(sock);
    conf_port = h_free_port();
    ck_assert_int_gt(conf_port, 0);
    ck_assert_int_ne(conf_port, port);
    ops_write_conf(conf, conf_port, conf_sock, NULL);
    ops_spawn_activated(conf, fds, 2, log);

    /* The sockets already listen: connect, and the daemon answers once it runs. */
    t = h_connect_port(port);
    ck_assert_msg(t >= 0, "cannot connect to the inherited TCP socket: %s", strerror(errno));
    ops_expect_line(t, "inherited tcp", "PING tcp", "PONG tcp", log, H_START_MS);
    u = ops_connect_path(sock);
    ck_assert_msg(u >= 0, "cannot connect to the inherited Unix socket: %s", strerror(errno));
    ops_expect_line(u, "inherited unix", "PING unix", "PONG unix", log, LOCAL_MS);

    /* Its own listeners were not bound. */
    ck_assert_msg(ops_port_refused(conf_port),
                  "the config's listen.tcp port %d is listened on", conf_port);
    ck_assert_msg(lstat(conf_sock, &st) != 0 && errno == ENOENT,
                  "the config's listen.unix %s was created", conf_sock);

    /* Locks through the inherited sockets. */
    up.fd = t;
    ck_assert_msg(h_wait_until(ops_cond_stat_fd, &up, H_START_MS),
                  "masters_up stayed at %lld", up.seen);
    ops_expect_line(t, "lock over tcp", "LOCK sa", "OK sa ", log, CMD_MS);
    /* This configuration sets no lock.key_prefix: the default one is in the key. */
    ck_assert_uint_eq(h_masters_holding("redlock:sa", NULL), NMASTERS);
    ck_assert_uint_eq(h_masters_holding("sa", NULL), 0);
    ops_expect_line(u, "trylock over unix", "TRYLOCK sa", "BUSY sa ", log, CMD_MS);
    ops_expect_line(t, "unlock over tcp", "UNLOCK sa", "OK sa holds=0", log, CMD_MS);
    ops_expect_line(u, "lock over unix", "LOCK sa", "OK sa ", log, CMD_MS);
    /* The inherited Unix socket keeps its reserve (limits.unix_reserved, 16) of the slots. */
    ck_assert_int_eq(h_stat(t, "client_slots", &slots), 0);
    ck_assert_msg(ops_net_slots_logged(log) == slots - 16, "of %lld client slots, %lld for "
                  "TCP and TLS (log above)", slots, ops_net_slots_logged(log));
    close(t);
    close(u);

    /* SIGTERM: a clean exit; the socket file belongs to the service manager. */
    ck_assert_int_eq(kill(ops_child, SIGTERM), 0);
    ex.pid = ops_child;
    ex.status = 0;
    ck_assert_msg(h_wait_until(ops_cond_exited, &ex, EXIT_MS), "no exit after SIGTERM");
    ops_child = 0;
    ck_assert_msg(h_decode_status(ex.status) == 0, "exit status %d after SIGTERM",
                  h_decode_status(ex.status));
    ck_assert_msg(lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode),
                  "the daemon removed the inherited socket file %s", sock);
}
END_TEST

/*
 * The TLS listener from socket activation: a socket named "tls" (as
 * redlockd-tls.socket names it) is served over TLS with the config's
 * certificate, beside a plain TCP socket; a real openssl s_client
 * one-liner gets its replies through it.
 */
START_TEST(socket_activation_tls)
{
    char conf[512], log[512], certs[512], cmd[2048], out[512];
    struct ops_exit ex;
    int fds[2], port, tls_port, t;
    char *text;
    FILE *f;

    if (!ops_have_systemd) {
        ops_skip("redlockd was built without libsystemd (ldd $REDLOCKD_BIN)");
        return;
    }
    EXPECT_SETUP(.masters = NMASTERS, .certs = true);
    snprintf(conf, sizeof(conf), "%s/activated-tls.yml", h_dir());
    snprintf(log, sizeof(log), "%s/activated-tls.log", h_dir());
    snprintf(certs, sizeof(certs), "%s/certs", h_dir());     /* h_make_certs's */
    snprintf(out, sizeof(out), "%s/s_client.out", h_dir());
    fds[0] = ops_listen_tcp(htonl(INADDR_LOOPBACK), &port);
    fds[1] = ops_listen_tcp(htonl(INADDR_LOOPBACK), &tls_port);
    ops_write_conf(conf, h_free_port(), "", NULL);
    f = fopen(conf, "ae");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "tls:\n  cert_file: \"%s/server.crt\"\n  key_file: \"%s/server.key\"\n",
            certs, certs);
    ck_assert_int_eq(fclose(f), 0);
    ops_spawn_activated_named(conf, fds, 2, "redlockd.socket:tls", log);

    t = h_connect_port(port);
    ck_assert_msg(t >= 0, "cannot connect to the inherited TCP socket: %s", strerror(errno));
    ops_expect_line(t, "inherited tcp", "PING tcp", "PONG tcp", log, H_START_MS);
    close(t);
    snprintf(cmd, sizeof(cmd), "printf 'PING tls\\nQUIT\\n' | timeout 10 openssl s_client "
             "-quiet -CAfile '%s/ca.crt' -connect 127.0.0.1:%d > '%s' 2>/dev/null", certs,
             tls_port, out);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
    text = expect_read_file(out);
    if (strcmp(text, "PONG tls\nBYE\n") != 0) {
        ops_print_file(log);
        ck_abort_msg("openssl s_client through the socket named tls printed '%s'", text);
    }
    free(text);

    ck_assert_int_eq(kill(ops_child, SIGTERM), 0);
    ex.pid = ops_child;
    ex.status = 0;
    ck_assert_msg(h_wait_until(ops_cond_exited, &ex, EXIT_MS), "no exit after SIGTERM");
    ops_child = 0;
    ck_assert_int_eq(h_decode_status(ex.status), 0);
}
END_TEST

/*
 * Protected mode holds for inherited sockets: one bound to 0.0.0.0 with
 * no auth.password stops the daemon at start.  The same socket with a
 * password is served, behind AUTH (the control).
 */
/* arg: const char *[2], a file and a text.  The file contains the text. */
static bool
ops_cond_file_has(void *arg)
{
    const char *const *ft = arg;
    char *all = expect_read_file(ft[0]);
    bool found = strstr(all, ft[1]) != NULL;

    free(all);
    return found;
}

START_TEST(socket_activation_protected_mode)
{
    char conf[512], log[512], conf_sock[512], text[1024];
    const char *refused[2] = { log, "(protected mode); nothing was reloaded" };
    struct ops_exit ex;
    int fds[1], port, t, code, cport;
    char *all;

    if (!ops_have_systemd) {
        ops_skip("redlockd was built without libsystemd (ldd $REDLOCKD_BIN)");
        return;
    }
    EXPECT_SETUP(.masters = NMASTERS);
    snprintf(conf, sizeof(conf), "%s/open.yml", h_dir());
    snprintf(log, sizeof(log), "%s/open.log", h_dir());
    snprintf(conf_sock, sizeof(conf_sock), "%s/conf.sock", h_dir());
    fds[0] = ops_listen_tcp(htonl(INADDR_ANY), &port);
    ops_write_conf(conf, h_free_port(), conf_sock, NULL);
    ops_spawn_activated(conf, fds, 1, log);
    ex.pid = ops_child;
    ex.status = 0;
    if (!h_wait_until(ops_cond_exited, &ex, EXIT_MS)) {
        ops_print_file(log);
        ck_abort_msg("redlockd serves an inherited 0.0.0.0 socket without a password");
    }
    ops_child = 0;
    code = h_decode_status(ex.status);
    all = expect_read_file(log);
    snprintf(text, sizeof(text), "%s", all);
    free(all);
    ck_assert_msg(code != 0 && code < 128, "exit status %d; log:\n%s", code, text);
    ck_assert_msg(strstr(text, "protected mode") != NULL
                  && strstr(text, "0.0.0.0:") != NULL,
                  "the log does not name the socket and protected mode:\n%s", text);

    /* The control: with auth.password the same socket is served. */
    cport = h_free_port();
    ops_write_conf(conf, cport, conf_sock, "pw-for-ops");
    ops_spawn_activated(conf, fds, 1, log);
    t = h_connect_port(port);
    ck_assert_msg(t >= 0, "cannot connect to the inherited socket: %s", strerror(errno));
    ops_expect_line(t, "before AUTH", "PING", "ERR AUTH ", log, H_START_MS);
    ops_expect_line(t, "AUTH", "AUTH pw-for-ops", "OK", log, LOCAL_MS);
    ops_expect_line(t, "after AUTH", "PING", "PONG", log, LOCAL_MS);
    close(t);

    /* A reload may not drop the password while that socket is open. */
    ops_write_conf(conf, cport, conf_sock, NULL);
    ck_assert_int_eq(kill(ops_child, SIGHUP), 0);
    ck_assert_msg(h_wait_until(ops_cond_file_has, (void *)&refused, CMD_MS),
                  "a reload emptied auth.password under a 0.0.0.0 socket");
    t = h_connect_port(port);
    ck_assert_msg(t >= 0, "cannot connect to the inherited socket: %s", strerror(errno));
    ops_expect_line(t, "after the refused reload", "PING", "ERR AUTH ", log, LOCAL_MS);
    close(t);
}
END_TEST

/* True when the binary at $REDLOCKD_BIN links libsystemd (ldd says so). */
static bool
ops_links_systemd(void)
{
    const char *bin = getenv("REDLOCKD_BIN");
    char cmd[1200], line[512];
    bool found = false;
    FILE *p;

    if (bin == NULL || bin[0] == '\0') {
        bin = "./build/redlockd";
    }
    if (strchr(bin, '\'') != NULL) {
        return false;
    }
    snprintf(cmd, sizeof(cmd), "ldd '%s' 2>/dev/null", bin);
    p = popen(cmd, "r");
    if (p == NULL) {
        return false;
    }
    while (fgets(line, sizeof(line), p) != NULL) {
        found = found || strstr(line, "libsystemd") != NULL;
    }
    pclose(p);
    return found;
}

/* ---- the command line ---- */

/*
 * Run $REDLOCKD_BIN with args (NULL-terminated) to its end (deadline
 * EXIT_MS), stdin from /dev/null; its stdout and stderr go to <dir>/<tag>.out
 * and <dir>/<tag>.err and come back malloc'd in *out and *err.  Returns the
 * exit status as the shell shows it.
 */
static int
ops_run_bin(const char *tag, const char *const args[], char **out, char **err)
{
    const char *bin = getenv("REDLOCKD_BIN");
    const char *argv[16];
    char out_path[512], err_path[512];
    pid_t parent = getpid(), pid;
    int64_t end;
    int fo, fe, in, status = 0;
    size_t n = 0;

    if (bin == NULL || bin[0] == '\0') {
        bin = "./build/redlockd";
    }
    argv[n++] = bin;
    while (*args != NULL && n < sizeof(argv) / sizeof(argv[0]) - 1) {
        argv[n++] = *args++;
    }
    argv[n] = NULL;
    snprintf(out_path, sizeof(out_path), "%s/%s.out", h_dir(), tag);
    snprintf(err_path, sizeof(err_path), "%s/%s.err", h_dir(), tag);
    fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_msg(fo >= 0 && fe >= 0, "cannot create %s.out/.err: %s", tag, strerror(errno));
    fflush(NULL);
    pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        h_child_setup(parent);
        in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in < 0 || dup2(in, 0) < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) {
            _exit(127);
        }
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(fo);
    close(fe);
    end = h_now_ms() + EXIT_MS;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (h_now_ms() > end) {
            kill(pid, SIGKILL);
            (void)waitpid(pid, NULL, 0);
            ck_abort_msg("%s: redlockd %s did not exit within %d ms", tag, argv[1], EXIT_MS);
        }
        usleep(10000);
    }
    *out = expect_read_file(out_path);
    *err = expect_read_file(err_path);
    return h_decode_status(status);
}

/*
 * --help and -h print the usage to stdout, naming the man pages, and exit
 * 0; an unknown option prints it to stderr and exits 64 (EX_USAGE), as do
 * a missing -c and a stray argument, each first saying what is wrong.
 */
START_TEST(help_and_usage)
{
    static const char *const good[][2] = { { "--help", NULL }, { "-h", NULL } };
    static const char *const bad[][2] = { { "--frobnicate", NULL }, { "-x", NULL } };
    char *out, *err;
    size_t i;
    int rc;

    EXPECT_SETUP();
    for (i = 0; i < 2; i++) {
        rc = ops_run_bin("help", good[i], &out, &err);
        ck_assert_msg(rc == 0, "redlockd %s exited %d; stderr: %s", good[i][0], rc, err);
        ck_assert_msg(strncmp(out, "usage: redlockd", 15) == 0 && strstr(out, "--help") != NULL,
                      "redlockd %s: stdout is '%s'", good[i][0], out);
        ck_assert_msg(err[0] == '\0', "redlockd %s wrote to stderr: '%s'", good[i][0], err);
        free(out);
        free(err);

        rc = ops_run_bin("bad", bad[i], &out, &err);
        ck_assert_msg(rc == 64, "redlockd %s exited %d", bad[i][0], rc);
        ck_assert_msg(out[0] == '\0', "redlockd %s wrote to stdout: '%s'", bad[i][0], out);
        ck_assert_msg(strstr(err, "usage: redlockd") != NULL, "redlockd %s: stderr is '%s'",
                      bad[i][0], err);
        free(out);
        free(err);
    }
    /* --help names the man pages. */
    rc = ops_run_bin("help-man", good[0], &out, &err);
    ck_assert_msg(strstr(out, "man redlockd.yml") != NULL && strstr(out, "man redlockd.") != NULL,
                  "redlockd --help names no man page: '%s'", out);
    free(out);
    free(err);
    /* Usage errors say what is wrong before the usage. */
    {
        static const char *const no_file[] = { "-t", NULL };
        static const char *const extra[] = { "extra", "-c", "f.yml", NULL };

        rc = ops_run_bin("no-file", no_file, &out, &err);
        ck_assert_msg(rc == 64 && strstr(err, "redlockd: no configuration file: give it with "
                                         "-c FILE") != NULL,
                      "redlockd -t exited %d; stderr: '%s'", rc, err);
        free(out);
        free(err);
        rc = ops_run_bin("extra", extra, &out, &err);
        ck_assert_msg(rc == 64 && strstr(err, "redlockd: unexpected argument 'extra'") != NULL,
                      "redlockd extra -c f.yml exited %d; stderr: '%s'", rc, err);
        free(out);
        free(err);
    }
}
END_TEST

/*
 * listen.unix in a directory that does not exist: redlockd -t warns that
 * it must exist at start, naming the setting's file:line:column and the
 * directory, and passes (a fresh install checks its file before systemd
 * created /run/redlockd); the daemon refuses to start, saying the same.
 * A file that does not load gets no word about listen.unix.
 */
START_TEST(config_test_unix_dir)
{
    char conf[512], text[1024], want[1024], port[16];
    const char *check[] = { "-t", "-c", conf, NULL };
    const char *start[] = { "-c", conf, NULL };
    char *out, *err;
    int rc;

    EXPECT_SETUP();
    snprintf(conf, sizeof(conf), "%s/missing-dir.yml", h_dir());
    snprintf(port, sizeof(port), "%d", h_free_port());
    snprintf(text, sizeof(text),
             "listen:\n"
             "  tcp: \"127.0.0.1:%s\"\n"
             "  unix: \"%s/no-such-dir/redlockd.sock\"\n"
             "masters:\n"
             "  - \"127.0.0.1:1\"\n"
             "metrics:\n"
             "  listen: \"\"\n", port, h_dir());
    ops_write_atomic(conf, text);
    snprintf(want, sizeof(want), "warn %s:3:9: listen.unix: directory %s/no-such-dir "
             "does not exist yet (the socket is created in it); it must exist when redlockd "
             "starts", conf, h_dir());

    rc = ops_run_bin("check", check, &out, &err);
    ck_assert_msg(rc == 0, "redlockd -t exited %d; stderr: %s", rc, err);
    ck_assert_msg(strstr(err, want) != NULL, "redlockd -t: stderr is '%s', want '%s'", err, want);
    free(out);
    free(err);
    snprintf(want, sizeof(want), "error %s:3:9: listen.unix: directory %s/no-such-dir "
             "does not exist (the socket is created in it); create it or change listen.unix",
             conf, h_dir());

    rc = ops_run_bin("start", start, &out, &err);
    ck_assert_msg(rc != 0, "redlockd started with listen.unix in a missing directory");
    ck_assert_msg(strstr(err, want) != NULL, "redlockd: stderr is '%s', want '%s'", err, want);
    free(out);
    free(err);

    /* Once the directory exists, -t says nothing about it. */
    snprintf(text, sizeof(text), "%s/no-such-dir", h_dir());
    ck_assert_int_eq(mkdir(text, 0700), 0);
    rc = ops_run_bin("check-again", check, &out, &err);
    ck_assert_msg(rc == 0 && strstr(err, "listen.unix") == NULL,
                  "redlockd -t exited %d; stderr: %s", rc, err);
    free(out);
    free(err);

    /* A file that cannot be read: that error alone. */
    snprintf(conf, sizeof(conf), "%s/nope.yml", h_dir());
    rc = ops_run_bin("check-missing", check, &out, &err);
    ck_assert_msg(rc == 78, "redlockd -t exited %d", rc);
    ck_assert_msg(strstr(err, "nope.yml") != NULL && strstr(err, "listen.unix") == NULL,
                  "redlockd -t -c nope.yml: stderr is '%s'", err);
    free(out);
    free(err);
}
END_TEST

/* ---- logs ---- */

/*
 * Log lines name a client by its peer: a Unix-socket client by its uid
 * and pid (SO_PEERCRED), a TCP client by address:port; the bytes of a
 * bad request are escaped, never written raw.
 */
START_TEST(log_names_peers)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100 };
    char want[96];
    int u, t;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    EXPECT_REPLY(u, "PING", "PONG");
    snprintf(want, sizeof(want), "(unix uid=%u pid=%d): connected", (unsigned)getuid(),
             (int)getpid());
    ck_assert_msg(h_wait_log(0, want, H_PROMPT_MS), "no log line with '%s'", want);
    close(u);
    t = expect_tcp();
    ck_assert_int_eq(h_send_raw(t, "LOCK \x1b[31mred\n", 15), 0);
    EXPECT_PREFIX(t, "PING", "ERR PROTO ");     /* the LOCK's answer comes first */
    ck_assert_msg(h_wait_log(0, "(127.0.0.1:", H_PROMPT_MS), "no TCP peer in the log");
    ck_assert_msg(h_wait_log(0, "ERR PROTO LOCK: lock name has byte 0x1b at offset 0",
                             LOCAL_MS), "the refused line was not logged");
    ck_assert_msg(!h_log_find(0, "\x1b", NULL, 0), "a client's raw escape byte reached the log");
    close(t);
}
END_TEST

static Suite *
ops_suite(void)
{
    Suite *s = suite_create("redlockd operations: reload, sd_notify, socket activation");
    TCase *tc = tcase_create("ops");

    tcase_add_checked_fixture(tc, NULL, ops_teardown);
    if (getenv("CK_DEFAULT_TIMEOUT") == NULL) {
        tcase_set_timeout(tc, TEST_TIMEOUT_S);
    }
    tcase_add_test(tc, reload_applies);
    tcase_add_test(tc, reload_rejects_errors);
    tcase_add_test(tc, reload_refuses_restart_keys);
    tcase_add_test(tc, sd_notify_protocol);
    tcase_add_test(tc, sd_notify_status_quarantine);
    tcase_add_test(tc, sd_notify_status_aof_always);
    tcase_add_test(tc, socket_activation);
    tcase_add_test(tc, socket_activation_tls);
    tcase_add_test(tc, socket_activation_protected_mode);
    tcase_add_test(tc, log_names_peers);
    suite_add_tcase(s, tc);

    /* No masters: the binary's command line. */
    tc = tcase_create("command line");
    tcase_add_checked_fixture(tc, NULL, ops_teardown);
    if (getenv("CK_DEFAULT_TIMEOUT") == NULL) {
        tcase_set_timeout(tc, TEST_TIMEOUT_S);
    }
    tcase_add_test(tc, help_and_usage);
    tcase_add_test(tc, config_test_unix_dir);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * Before the run: find out whether the daemon links libsystemd (the
 * sd_notify and socket activation tests skip when it does not), then the
 * harness's setup.
 */
static int
ops_init(void)
{
    ops_have_systemd = ops_links_systemd();
    if (!ops_have_systemd) {
        printf("check_ops: redlockd does not link libsystemd: the sd_notify and socket "
               "activation tests will skip\n");
    }
    return h_suite_init();
}

const struct runner runner_main = { "check_ops", ops_suite, ops_init, h_suite_cleanup };
