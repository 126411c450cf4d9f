/*
 * check_integration.c: redlockd end to end, with real processes.
 *
 * Every test starts five redis-server masters and the redlockd binary
 * ($REDLOCKD_BIN, default ./build/redlockd) on free loopback ports in a
 * directory of its own (tests/harness.h), talks to the daemon over TCP
 * or its Unix socket, and looks at the keys on the masters with hiredis.
 * Check runs each test in a forked process; the checked teardown stops
 * everything when a test passes, and the harness cleans up (and prints
 * the daemon log) after a test that failed.
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

#include <sys/socket.h>

#include <check.h>
#include <hiredis/hiredis.h>

#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5       /* masters per test */
#define QUORUM          3       /* NMASTERS / 2 + 1 */
#define DEFAULT_TTL     30000   /* lock.default_ttl_ms left at its default */
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define LOCAL_MS        1000    /* deadline for a reply the daemon gives alone */
#define TEST_TIMEOUT_S  30      /* per test, unless CK_DEFAULT_TIMEOUT is set */
#define GROUP_MAX       256     /* lines of a HELP or STATS reply we keep */

/* Every test's daemon: a blocked LOCK retries after 0..100 ms. */
static const struct h_daemon_opts it_opts = {
    .retry_delay_ms = 100,
};

/* ---- assertions that keep the caller's line number ---- */

/*
 * Send a LOCK or TRYLOCK line on fd and require
 * "OK <name> validity=V holds=<holds>"; V goes into the long long
 * lvalue validity.
 */
#define EXPECT_LOCK_OK(fd, line, name, holds, validity) do {                    \
        char *got_ = h_cmd((fd), (line), CMD_MS);                               \
        unsigned holds_ = 0;                                                    \
        ck_assert_msg(got_ != NULL && parse_lock_ok(got_, (name), &(validity), &holds_) \
                      && holds_ == (unsigned)(holds),                           \
                      "'%s' answered '%s', expected 'OK %s validity=N holds=%u'", \
                      (line), got_ != NULL ? got_ : "(nothing)", (name),        \
                      (unsigned)(holds));                                       \
        free(got_);                                                             \
    } while (0)

/* ---- reply parsing ---- */

/*
 * Parse the start of a reply, "<status> <name> <key>=<integer>" (the
 * integer may be negative), into *value.  Returns a pointer just after
 * the integer, where the callers check the rest of the line, or NULL
 * when the line does not start that way.
 */
static const char *
parse_status_int(const char *line, const char *status, const char *name,
                 const char *key, long long *value)
{
    char head[512];
    size_t n;
    char *end;

    n = (size_t)snprintf(head, sizeof(head), "%s %s %s=", status, name, key);
    if (n >= sizeof(head) || strncmp(line, head, n) != 0) {
        return NULL;
    }
    line += n;
    if (!isdigit((unsigned char)line[0]) && !(line[0] == '-' && isdigit((unsigned char)line[1]))) {
        return NULL;
    }
    errno = 0;
    *value = strtoll(line, &end, 10);
    return errno == 0 ? end : NULL;
}

/* True when line is exactly "OK <name> validity=V holds=H". */
static bool
parse_lock_ok(const char *line, const char *name, long long *validity, unsigned *holds)
{
    const char *p = parse_status_int(line, "OK", name, "validity", validity);
    char *end;
    unsigned long h;

    if (p == NULL || strncmp(p, " holds=", 7) != 0 || !isdigit((unsigned char)p[7])) {
        return false;
    }
    h = strtoul(p + 7, &end, 10);
    *holds = (unsigned)h;
    return *end == '\0';
}

/* True when line is exactly "BUSY <name> ttl=N". */
static bool
parse_busy(const char *line, const char *name, long long *ttl)
{
    const char *p = parse_status_int(line, "BUSY", name, "ttl", ttl);

    return p != NULL && *p == '\0';
}

/*
 * True when line is exactly "HELD <name> ttl=N owner=<owner>" with the
 * mode of one's own hold, the kind, and the holder's label and time
 * held (every lock of this suite is taken through the daemon, which
 * labels it).
 */
static bool
parse_held(const char *line, const char *name, const char *owner, long long *ttl)
{
    const char *p = parse_status_int(line, "HELD", name, "ttl", ttl);
    size_t n = strlen(owner);

    if (p == NULL || strncmp(p, " owner=", 7) != 0 || strncmp(p + 7, owner, n) != 0) {
        return false;
    }
    p += 7 + n;
    /* A session's own hold also says its mode; the kind and holders follow. */
    if (strcmp(owner, "self") == 0) {
        if (strncmp(p, " mode=session", 13) != 0) {
            return false;
        }
        p += 13;
    }
    if (strncmp(p, " kind=exclusive holders=1 label=", 32) != 0) {
        return false;
    }
    p = strchr(p + 32, ' ');
    return p != NULL && strncmp(p, " held_ms=", 9) == 0 && p[9] >= '0' && p[9] <= '9'
           && strspn(p + 9, "0123456789") == strlen(p + 9);
}

/*
 * Send line and read a multi-line reply up to END.  Every line before
 * END must start with prefix; they are stored malloc'd in lines (at
 * most max).  Returns the number of lines before END, or -1 when a line
 * did not match, there were too many, or END did not come.
 */
static int
read_group(int fd, const char *line, const char *prefix, char **lines, int max)
{
    char *got;
    int n = 0;

    if (h_send(fd, line) != 0) {
        return -1;
    }
    for (;;) {
        got = h_read_line(fd, LOCAL_MS);
        if (got == NULL) {
            break;
        }
        if (strcmp(got, "END") == 0) {
            free(got);
            return n;
        }
        if (strncmp(got, prefix, strlen(prefix)) != 0 || n == max) {
            fprintf(stderr, "'%s': unexpected line '%s'\n", line, got);
            free(got);
            break;
        }
        lines[n++] = got;
    }
    while (n > 0) {
        free(lines[--n]);
    }
    return -1;
}

/* True when one of lines[0..n-1] is exactly want. */
static bool
has_line(char **lines, int n, const char *want)
{
    int i;

    for (i = 0; i < n; i++) {
        if (strcmp(lines[i], want) == 0) {
            return true;
        }
    }
    return false;
}

static void
free_lines(char **lines, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        free(lines[i]);
    }
}

/* ---- conditions for h_wait_until / h_holds_for ---- */

/*
 * arg: const char **key.  True when every master holds the key (a round
 * is decided once a quorum granted, so the last masters' SETs may land
 * a moment after OK).
 */
static bool
cond_key_on_all(void *arg)
{
    const char *key = *(const char **)arg;

    return h_masters_holding(key, NULL) == NMASTERS;
}

/* arg: const char **key.  The key is absent from every master. */
static bool
cond_key_gone(void *arg)
{
    return h_masters_without(*(const char **)arg) == h_master_count();
}

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
    ok = got != NULL && parse_lock_ok(got, name, &validity, &holds) && holds == 1;
    free(got);
    close(fd);
    return ok;
}

/* The watchdog test's view of a held lock. */
struct watch {
    int         fd;         /* another client, which asks TRYLOCK */
    const char *name;       /* lock name, also the key */
    const char *token;      /* the holder's token */
    long long   ttl;        /* the lease asked for, ms */
    char        why[512];   /* what was wrong, for the failure message */
};

/*
 * The token is on a quorum of masters with a lease of at most ttl ms,
 * and another client gets BUSY.
 */
static bool
cond_still_held(void *arg)
{
    struct watch *w = arg;
    char line[300], *got, *v;
    long long ttl = 0, pttl;
    size_t i, n = 0;
    bool ok;

    for (i = 0; i < h_master_count(); i++) {
        v = h_master_get(i, w->name);
        pttl = h_master_pttl(i, w->name);
        if (v != NULL && strcmp(v, w->token) == 0 && pttl > 0 && pttl <= w->ttl) {
            n++;
        }
        free(v);
    }
    if (n < QUORUM) {
        snprintf(w->why, sizeof(w->why),
                 "the token with 0 < PTTL <= %lld is on %zu masters only", w->ttl, n);
        return false;
    }
    snprintf(line, sizeof(line), "TRYLOCK %s", w->name);
    got = h_cmd(w->fd, line, CMD_MS);
    ok = got != NULL && parse_busy(got, w->name, &ttl) && ttl > 0;
    if (!ok) {
        snprintf(w->why, sizeof(w->why), "TRYLOCK answered '%s'",
                 got != NULL ? got : "(nothing)");
    }
    free(got);
    return ok;
}

/* ---- fixture ---- */

/*
 * Start of every test: a directory named for the test, five masters
 * and the daemon.  (Called from the test body, where tcase_name() is
 * known; the checked teardown below undoes it.)
 */
static void
it_up(void)
{
    ck_assert_msg(h_begin(tcase_name()) == 0, "cannot create the test directory");
    ck_assert_msg(h_start_masters(NMASTERS) == 0, "the masters did not start");
    ck_assert_msg(h_start_daemon(&it_opts) == 0, "redlockd did not start (log above)");
}

static void
it_teardown(void)
{
    h_end();
}

static int
it_connect_unix(void)
{
    int fd = h_connect_unix();

    ck_assert_msg(fd >= 0, "cannot connect to %s: %s", h_daemon_unix_path(), strerror(errno));
    return fd;
}

/* ---- tests ---- */

START_TEST(key_on_masters)
{
    const char *key = "demo";
    char *token, *v;
    long long valid = -1;
    size_t i;
    int a;

    it_up();
    a = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK demo", "demo", 1, valid);
    ck_assert_msg(valid > 0 && valid <= DEFAULT_TTL, "validity=%lld", valid);
    ck_assert_msg(h_wait_until(cond_key_on_all, &key, 1000),
                  "key 'demo' on %zu masters only, 1 s after OK", h_masters_holding("demo", NULL));

    token = h_master_get(0, "demo");
    ck_assert_msg(token != NULL, "no key 'demo' on master 0 after LOCK");
    ck_assert_msg(h_is_token(token), "key value '%s' is not 32 lowercase hex digits", token);
    for (i = 1; i < NMASTERS; i++) {
        v = h_master_get(i, "demo");
        ck_assert_msg(v != NULL && strcmp(v, token) == 0,
                      "master %zu holds '%s', master 0 holds '%s'", i,
                      v != NULL ? v : "(no key)", token);
        free(v);
    }

    EXPECT_REPLY(a, "UNLOCK demo", "OK demo holds=0");
    ck_assert_msg(h_wait_until(cond_key_gone, &key, 500),
                  "key 'demo' still on %zu masters after UNLOCK",
                  NMASTERS - h_masters_without("demo"));
    free(token);
    close(a);
}
END_TEST

START_TEST(trylock_busy)
{
    char *got;
    long long ttl = 0, valid;
    int a, b, u;

    it_up();
    a = expect_tcp();
    b = expect_tcp();
    u = it_connect_unix();
    EXPECT_LOCK_OK(a, "LOCK x", "x", 1, valid);

    got = h_cmd(b, "TRYLOCK x", CMD_MS);
    ck_assert_msg(got != NULL && parse_busy(got, "x", &ttl) && ttl > 0 && ttl <= DEFAULT_TTL,
                  "TRYLOCK x over TCP answered '%s', expected 'BUSY x ttl=N'",
                  got != NULL ? got : "(nothing)");
    free(got);

    got = h_cmd(u, "TRYLOCK x", CMD_MS);
    ck_assert_msg(got != NULL && parse_busy(got, "x", &ttl) && ttl > 0 && ttl <= DEFAULT_TTL,
                  "TRYLOCK x over the Unix socket answered '%s', expected 'BUSY x ttl=N'",
                  got != NULL ? got : "(nothing)");
    free(got);
    close(a);
    close(b);
    close(u);
}
END_TEST

START_TEST(blocked_lock_gets_it)
{
    long long valid;
    unsigned holds = 0;
    char *got;
    int a, b;

    it_up();
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK x", "x", 1, valid);

    ck_assert_int_eq(h_send(b, "LOCK x"), 0);
    ck_assert_msg(h_quiet(b, 300), "LOCK x answered within 300 ms while A holds x");

    EXPECT_REPLY(a, "UNLOCK x", "OK x holds=0");
    got = h_read_line(b, 2000);
    ck_assert_msg(got != NULL && parse_lock_ok(got, "x", &valid, &holds) && holds == 1,
                  "the waiting LOCK x got '%s' within 2 s of the UNLOCK, expected 'OK x ...'",
                  got != NULL ? got : "(nothing)");
    free(got);
    close(a);
    close(b);
}
END_TEST

START_TEST(lock_timeout)
{
    long long valid;
    int64_t t0, elapsed;
    char *got;
    int a, b;

    it_up();
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK x", "x", 1, valid);

    t0 = h_now_ms();
    got = h_cmd(b, "LOCK x wait=300", 2000);
    elapsed = h_now_ms() - t0;
    ck_assert_msg(got != NULL && strcmp(got, "TIMEOUT x") == 0,
                  "LOCK x wait=300 answered '%s' after %lld ms, expected 'TIMEOUT x'",
                  got != NULL ? got : "(nothing)", (long long)elapsed);
    ck_assert_msg(elapsed >= 295, "TIMEOUT came after %lld ms, before wait=300 ran out",
                  (long long)elapsed);
    free(got);
    close(a);
    close(b);
}
END_TEST

START_TEST(close_frees_keys)
{
    const char *key = "x";
    long long valid;
    int a;

    it_up();
    a = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK x", "x", 1, valid);
    ck_assert_msg(h_wait_until(cond_key_on_all, &key, 1000),
                  "key 'x' on %zu masters only, 1 s after OK", h_masters_holding("x", NULL));

    close(a);
    ck_assert_msg(h_wait_until(cond_key_gone, &key, 200),
                  "key 'x' still on %zu masters 200 ms after the holder closed",
                  NMASTERS - h_masters_without("x"));
}
END_TEST

START_TEST(watchdog)
{
    struct watch w;
    long long valid;
    char *token;
    int a;

    it_up();
    a = expect_tcp();
    w.fd = expect_tcp();
    w.name = "w";
    w.ttl = 1000;
    w.why[0] = '\0';
    EXPECT_LOCK_OK(a, "LOCK w ttl=1000", "w", 1, valid);
    token = h_master_get(0, "w");
    ck_assert_msg(token != NULL && h_is_token(token), "no token for 'w' on master 0");
    w.token = token;

    /* Five lease lengths: only renewals can keep it. */
    ck_assert_msg(h_holds_for(cond_still_held, &w, 5000, 250), "lock w lost: %s", w.why);
    ck_assert_msg(h_quiet(a, 0), "the holder got a pushed line while holding w");

    EXPECT_REPLY(a, "UNLOCK w", "OK w holds=0");
    free(token);
    close(a);
    close(w.fd);
}
END_TEST

START_TEST(reentry)
{
    const char *key = "r";
    long long valid;
    char *token;
    int a;

    it_up();
    a = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK r", "r", 1, valid);
    ck_assert(h_wait_until(cond_key_on_all, &key, 1000));
    token = h_master_get(0, "r");
    ck_assert_msg(token != NULL, "no key 'r' on master 0 after LOCK");
    EXPECT_LOCK_OK(a, "LOCK r", "r", 2, valid);
    ck_assert_msg(valid > 0 && valid <= DEFAULT_TTL, "re-entrant validity=%lld", valid);

    EXPECT_REPLY(a, "UNLOCK r", "OK r holds=1");
    ck_assert_msg(h_masters_holding("r", token) == NMASTERS,
                  "after UNLOCK to holds=1 the token is on %zu masters, expected %d",
                  h_masters_holding("r", token), NMASTERS);

    EXPECT_REPLY(a, "UNLOCK r", "OK r holds=0");
    ck_assert_msg(h_wait_until(cond_key_gone, &key, 500),
                  "key 'r' still on %zu masters after the last UNLOCK",
                  NMASTERS - h_masters_without("r"));
    EXPECT_REPLY(a, "UNLOCK r", "NOTHELD r");
    free(token);
    close(a);
}
END_TEST

START_TEST(two_masters_down)
{
    long long valid;
    char *token;
    size_t i;
    int a;

    it_up();
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

START_TEST(three_masters_down_noquorum)
{
    long long valid;
    int64_t t_kill, left;
    char addr[64], *got;
    size_t i;
    int a, b;

    it_up();
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK h ttl=1000", "h", 1, valid);

    t_kill = h_now_ms();
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
    }

    /* TRYLOCK (and wait=0) answers at once; a waiting LOCK retries (check_edges). */
    got = h_cmd(b, "TRYLOCK z", 1000);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM ", 13) == 0,
                  "TRYLOCK z with 3 of 5 masters down answered '%s' within 1 s, "
                  "expected 'ERR NOQUORUM ...'", got != NULL ? got : "(nothing)");
    for (i = 0; i < 3; i++) {
        snprintf(addr, sizeof(addr), "127.0.0.1:%d ", h_master_port(i));
        ck_assert_msg(strstr(got, addr) != NULL, "'%s' does not name the dead master %s",
                      got, addr);
    }
    free(got);

    left = 2000 - (h_now_ms() - t_kill);
    got = h_read_line(a, left > 0 ? left : 0);
    ck_assert_msg(got != NULL && (strcmp(got, "! LOST h reason=quorum") == 0
                                  || strcmp(got, "! LOST h reason=renew") == 0),
                  "the holder of h got '%s' within 2 s of losing 3 masters, "
                  "expected '! LOST h reason=quorum|renew'", got != NULL ? got : "(nothing)");
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

    it_up();
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
    }
    a = expect_tcp();
    EXPECT_PREFIX(a, "TRYLOCK q", "ERR NOQUORUM ");
    close(a);

    for (i = 0; i < 3; i++) {
        ck_assert_msg(h_restart_master(i) == 0, "master %zu did not restart", i);
    }
    ck_assert_msg(h_wait_until(cond_trylock_ok, &name, 10000),
                  "no TRYLOCK q succeeded within 10 s of the masters' return");
    ck_assert_msg(h_wait_stat("masters_up", NMASTERS, false, 10000, &up),
                  "STATS masters_up is %lld, expected %d", up, NMASTERS);
}
END_TEST

START_TEST(protocol_errors)
{
    static const char *const bad[][2] = {
        { "FOO", "ERR UNKNOWN " },
        { "LOCK", "ERR PROTO " },
        { "LOCK x ttl=abc", "ERR PROTO " },
        { "LOCK x ttl=5", "ERR PROTO " },
        { "LOCK x bogus=1", "ERR PROTO " },
    };
    char longline[2001], *got;
    long long valid, ttl = 0;
    size_t i;
    int a, b, c;

    it_up();
    a = expect_tcp();
    b = expect_tcp();
    c = expect_tcp();
    EXPECT_LOCK_OK(c, "LOCK keep", "keep", 1, valid);

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        EXPECT_PREFIX(a, bad[i][0], bad[i][1]);
        EXPECT_REPLY(a, "PING", "PONG");
    }
    /* None of the refused LOCKs took x. */
    EXPECT_REPLY(b, "STATUS x", "FREE x");

    memset(longline, 'a', 2000);
    longline[2000] = '\n';
    ck_assert_int_eq(h_send_raw(a, longline, sizeof(longline)), 0);
    got = h_read_line(a, LOCAL_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR TOOLONG ", 12) == 0,
                  "a 2000-byte line got '%s', expected 'ERR TOOLONG ...'",
                  got != NULL ? got : "(nothing)");
    free(got);
    ck_assert_msg(h_expect_eof(a, LOCAL_MS), "the connection stayed open after ERR TOOLONG");

    /* The other connections did not notice. */
    EXPECT_REPLY(c, "PING", "PONG");
    got = h_cmd(c, "STATUS keep", CMD_MS);
    ck_assert_msg(got != NULL && parse_held(got, "keep", "self", &ttl) && ttl > 0,
                  "STATUS keep by its holder answered '%s'", got != NULL ? got : "(nothing)");
    free(got);
    got = h_cmd(b, "TRYLOCK keep", CMD_MS);
    ck_assert_msg(got != NULL && parse_busy(got, "keep", &ttl) && ttl > 0,
                  "TRYLOCK keep answered '%s', expected BUSY", got != NULL ? got : "(nothing)");
    free(got);
    close(a);
    close(b);
    close(c);
}
END_TEST

START_TEST(misc_verbs)
{
    char *lines[GROUP_MAX], *got;
    long long valid;
    int a, n, i;

    it_up();
    a = expect_tcp();
    EXPECT_REPLY(a, "PING hello", "PONG hello");
    EXPECT_REPLY(a, "PING", "PONG");

    got = h_cmd(a, "VERSION", LOCAL_MS);
    ck_assert_msg(got != NULL && strncmp(got, "VERSION ", 8) == 0 && strlen(got) > 8,
                  "VERSION answered '%s'", got != NULL ? got : "(nothing)");
    free(got);

    n = read_group(a, "HELP", "HELP ", lines, GROUP_MAX);
    ck_assert_msg(n > 0, "HELP did not answer HELP lines then END (%d)", n);
    for (i = 0; i < n && strncmp(lines[i], "HELP LOCK ", 10) != 0; i++) {
        continue;
    }
    ck_assert_msg(i < n, "HELP has no line for LOCK");
    free_lines(lines, n);

    n = read_group(a, "STATS", "STAT ", lines, GROUP_MAX);
    ck_assert_msg(n > 0, "STATS did not answer STAT lines then END (%d)", n);
    ck_assert_msg(has_line(lines, n, "STAT masters 5"), "STATS lacks 'STAT masters 5'");
    ck_assert_msg(has_line(lines, n, "STAT quorum 3"), "STATS lacks 'STAT quorum 3'");
    free_lines(lines, n);

    /* CRLF line ends. */
    ck_assert_int_eq(h_send_raw(a, "PING crlf\r\n", 11), 0);
    got = h_read_line(a, LOCAL_MS);
    ck_assert_msg(got != NULL && strcmp(got, "PONG crlf") == 0,
                  "'PING crlf<CR><LF>' answered '%s'", got != NULL ? got : "(nothing)");
    free(got);

    /* Lower-case verbs. */
    EXPECT_REPLY(a, "ping", "PONG");
    EXPECT_PREFIX(a, "version", "VERSION ");
    EXPECT_LOCK_OK(a, "lock lc", "lc", 1, valid);
    EXPECT_REPLY(a, "unlock lc", "OK lc holds=0");

    EXPECT_REPLY(a, "QUIT", "BYE");
    ck_assert_msg(h_expect_eof(a, LOCAL_MS), "the connection stayed open after BYE");
    close(a);
}
END_TEST

START_TEST(sigterm_releases)
{
    long long valid;
    int64_t t0, left;
    char *got;
    int a, rc;

    it_up();
    a = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK k", "k", 1, valid);

    t0 = h_now_ms();
    ck_assert_int_eq(h_signal_daemon(SIGTERM), 0);
    got = h_read_line(a, 3000);
    ck_assert_msg(got != NULL && strcmp(got, "! LOST k reason=shutdown") == 0,
                  "after SIGTERM the holder got '%s', expected '! LOST k reason=shutdown'",
                  got != NULL ? got : "(nothing)");
    free(got);

    left = 3000 - (h_now_ms() - t0);
    rc = h_wait_daemon(left > 0 ? left : 0);
    ck_assert_msg(rc == 0, "redlockd %s 3 s after SIGTERM (status %d)",
                  rc == H_STILL_RUNNING ? "was still running" : "did not exit 0", rc);
    ck_assert_msg(h_masters_without("k") == NMASTERS,
                  "after the shutdown key 'k' is still on %zu masters",
                  NMASTERS - h_masters_without("k"));
    close(a);
}
END_TEST

START_TEST(status)
{
    long long valid, ttl = 0;
    char *got;
    int a, b;

    it_up();
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_REPLY(a, "STATUS s", "FREE s");
    EXPECT_LOCK_OK(a, "LOCK s", "s", 1, valid);

    got = h_cmd(a, "STATUS s", CMD_MS);
    ck_assert_msg(got != NULL && parse_held(got, "s", "self", &ttl) && ttl > 0
                  && ttl <= DEFAULT_TTL,
                  "STATUS s by the holder answered '%s', expected 'HELD s ttl=N owner=self'",
                  got != NULL ? got : "(nothing)");
    free(got);

    got = h_cmd(b, "STATUS s", CMD_MS);
    ck_assert_msg(got != NULL && parse_held(got, "s", "other", &ttl) && ttl > 0
                  && ttl <= DEFAULT_TTL,
                  "STATUS s by another client answered '%s', expected 'HELD s ttl=N owner=other'",
                  got != NULL ? got : "(nothing)");
    free(got);
    close(a);
    close(b);
}
END_TEST

START_TEST(pending_lock_cancelled_on_close)
{
    long long waiting;
    const char *key = "p";
    long long valid, waiters = -1;
    int a, b;

    it_up();
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK p", "p", 1, valid);
    ck_assert_int_eq(h_send(b, "LOCK p"), 0);
    ck_assert_msg(h_wait_stat("waiters", 1, false, 2000, &waiting),
                  "STATS waiters is %lld while B waits for p, expected 1", waiting);
    close(b);

    EXPECT_REPLY(a, "UNLOCK p", "OK p holds=0");
    ck_assert_msg(h_wait_until(cond_key_gone, &key, 1000),
                  "key 'p' still on %zu masters 1 s after the UNLOCK",
                  NMASTERS - h_masters_without("p"));
    ck_assert_msg(h_holds_for(cond_key_gone, &key, 500, 10),
                  "key 'p' came back on %zu masters after the waiter had closed",
                  NMASTERS - h_masters_without("p"));
    ck_assert_int_eq(h_stat_once("waiters", &waiters), 0);
    ck_assert_msg(waiters == 0, "STATS waiters is %lld, expected 0", waiters);
    close(a);
}
END_TEST

START_TEST(validity)
{
    long long valid = -1;
    int a;

    it_up();
    a = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK v ttl=2000", "v", 1, valid);
    ck_assert_msg(valid > 1900 && valid <= 2000,
                  "ttl=2000 gave validity=%lld, expected 1900 < validity <= 2000", valid);
    close(a);
}
END_TEST

/* ---- runner ---- */

/*
 * The masters forgot the scripts (SCRIPT FLUSH): EVALSHA gets NOSCRIPT,
 * and the daemon retries once with EVAL inside the same round, for the
 * acquire, the release and the renewals alike.
 */
START_TEST(noscript_retry)
{
    const char *key = "ns";
    long long valid;
    size_t i;
    int a;

    it_up();
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SCRIPT FLUSH"), 0);
    }
    a = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK ns ttl=2000", "ns", 1, valid);
    ck_assert_uint_ge(h_masters_holding("ns", NULL), 3);
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SCRIPT FLUSH"), 0);
    }
    /* Renewals every 667 ms keep it past its 2000 ms ttl. */
    ck_assert_msg(h_quiet(a, 2500), "the holder got a line while holding ns");
    ck_assert_uint_ge(h_masters_holding("ns", NULL), 3);
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SCRIPT FLUSH"), 0);
    }
    EXPECT_REPLY(a, "UNLOCK ns", "OK ns holds=0");
    ck_assert(h_wait_until(cond_key_gone, &key, 500));
    close(a);
}
END_TEST

/*
 * redis.password: the daemon authenticates to every master.  With the
 * wrong password no master comes up, and a LOCK says why.
 */
START_TEST(auth)
{
    struct h_daemon_opts opts = it_opts;
    long long valid;
    char *got;
    size_t i;
    int a;

    ck_assert(h_begin(tcase_name()) == 0);
    ck_assert(h_start_masters(NMASTERS) == 0);
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

    it_up();
    ck_assert_int_eq(h_signal_master(0, SIGSTOP), 0);
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_LOCK_OK(a, "LOCK st", "st", 1, valid);
    EXPECT_PREFIX(b, "TRYLOCK st", "BUSY st ttl=");
    EXPECT_REPLY(a, "UNLOCK st", "OK st holds=0");
    EXPECT_LOCK_OK(b, "LOCK st", "st", 1, valid);
    EXPECT_REPLY(b, "UNLOCK st", "OK st holds=0");
    ck_assert_int_eq(h_signal_master(0, SIGCONT), 0);
    ck_assert_msg(h_wait_until(cond_key_gone, &key, 2000),
                  "key st left on a master after the stalled one resumed");
    ck_assert_msg(h_holds_for(cond_key_gone, &key, 300, 10),
                  "a late SET from the stalled master's queue came back");
    EXPECT_REPLY(a, "PING", "PONG");
    close(a);
    close(b);
}
END_TEST

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

    it_up();
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

    it_up();
    a = expect_tcp();
    t_send = h_now_ms();
    EXPECT_LOCK_OK(a, "LOCK lv ttl=3000", "lv", 1, valid);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_signal_master(i, SIGSTOP), 0);
    }
    got = h_read_line(a, 5000);
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

    it_up();
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
    ck_assert_msg(got != NULL && parse_lock_ok(got, "pz", &valid, &holds) && holds == 1,
                  "the LOCK sent during the pause answered '%s', expected a fresh "
                  "'OK pz validity=N holds=1'", got != NULL ? got : "(nothing)");
    free(got);
    EXPECT_REPLY(a, "UNLOCK pz", "OK pz holds=0");
    close(a);
}
END_TEST

/*
 * Fair waiting (FIFO queues per name): 20 sessions loop LOCK/UNLOCK on one name for
 * 5 s; FIFO hand-over gives each a share within 25% of the mean.
 */
#define FAIR_SESSIONS   20
#define FAIR_MS         5000

START_TEST(fairness_one_daemon)
{
    struct pollfd pfd[FAIR_SESSIONS];
    long count[FAIR_SESSIONS] = { 0 };
    bool locked[FAIR_SESSIONS] = { false };
    long total = 0, mean, min_c = -1, max_c = 0;
    int64_t end;
    char *got;
    int i;

    it_up();
    for (i = 0; i < FAIR_SESSIONS; i++) {
        pfd[i].fd = expect_tcp();
        pfd[i].events = POLLIN;
        ck_assert_int_eq(h_send(pfd[i].fd, "LOCK fair"), 0);
    }
    end = h_now_ms() + FAIR_MS;
    while (h_now_ms() < end) {
        ck_assert_int_ge(poll(pfd, FAIR_SESSIONS, 100), 0);
        for (i = 0; i < FAIR_SESSIONS; i++) {
            if (!(pfd[i].revents & POLLIN)) {
                continue;
            }
            got = h_read_line(pfd[i].fd, CMD_MS);
            ck_assert_msg(got != NULL, "session %d: no reply", i);
            if (!locked[i]) {
                ck_assert_msg(strncmp(got, "OK fair ", 8) == 0, "session %d LOCK: '%s'", i, got);
                locked[i] = true;
                count[i]++;
                ck_assert_int_eq(h_send(pfd[i].fd, "UNLOCK fair"), 0);
            } else {
                ck_assert_msg(strcmp(got, "OK fair holds=0") == 0, "session %d UNLOCK: '%s'", i, got);
                locked[i] = false;
                ck_assert_int_eq(h_send(pfd[i].fd, "LOCK fair"), 0);
            }
            free(got);
        }
    }
    for (i = 0; i < FAIR_SESSIONS; i++) {
        total += count[i];
        min_c = min_c < 0 || count[i] < min_c ? count[i] : min_c;
        max_c = count[i] > max_c ? count[i] : max_c;
        close(pfd[i].fd);
    }
    mean = total / FAIR_SESSIONS;
    fprintf(stderr, "fairness_one_daemon: %ld grants in %d ms, per session min %ld "
            "mean %ld max %ld\n", total, FAIR_MS, min_c, mean, max_c);
    ck_assert_msg(mean > 0, "no grants at all");
    ck_assert_msg(min_c * 4 >= mean * 3 && max_c * 4 <= mean * 5,
                  "shares outside mean +-25%%: min %ld mean %ld max %ld", min_c, mean, max_c);
}
END_TEST

/* Polls master 0 for the key while hand-overs run; counts moments it was free. */
struct free_watch {
    const char   *key;          /* key to watch */
    volatile bool stop;         /* set by the test */
    long          polls;        /* GETs made while held */
    long          free_seen;    /* GETs that found no key after the first grant */
};

static void *
free_watch_run(void *arg)
{
    struct free_watch *fw = arg;
    struct timeval tv = { 1, 0 };
    redisContext *c;
    redisReply *r;
    bool seen = false;

    /* One connection and a tight loop: a gap of a few us is seen. */
    c = redisConnectWithTimeout("127.0.0.1", h_master_port(0), tv);
    if (c == NULL || c->err != 0) {
        if (c != NULL) {
            redisFree(c);
        }
        return NULL;
    }
    while (!fw->stop) {
        r = redisCommand(c, "GET %s", fw->key);
        if (r == NULL) {
            break;
        }
        if (r->type == REDIS_REPLY_STRING) {
            seen = true;
            fw->polls++;
        } else if (seen) {
            fw->free_seen++;
        }
        freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

/*
 * Hand-over keeps the key taken: two sessions pass one lock back and
 * forth 200 times; a poller on a master never finds the key free in
 * between, and STATS counts the hand-overs.  (A release followed at
 * once by an acquire leaves a gap of microseconds that polling rarely
 * catches, so the hand-over count is what proves the swap was used.)
 */
START_TEST(handover_never_free)
{
    struct free_watch fw = { "ho", false, 0, 0 };
    long long queued;
    pthread_t th;
    long long valid, handovers = 0;
    int fd[2], i, holder = 0;
    char *got;

    it_up();
    fd[0] = expect_tcp();
    fd[1] = expect_tcp();
    EXPECT_LOCK_OK(fd[0], "LOCK ho", "ho", 1, valid);
    ck_assert_int_eq(pthread_create(&th, NULL, free_watch_run, &fw), 0);
    ck_assert_int_eq(h_send(fd[1], "LOCK ho"), 0);
    ck_assert(h_wait_stat("waiters", 1, false, CMD_MS, &queued));
    for (i = 0; i < 200; i++) {
        /* The other session is queued; the holder lets go, the lock passes. */
        EXPECT_REPLY(fd[holder], "UNLOCK ho", "OK ho holds=0");
        got = h_read_line(fd[1 - holder], CMD_MS);
        ck_assert_msg(got != NULL && strncmp(got, "OK ho ", 6) == 0,
                      "hand-over %d: the waiter got '%s'", i, got != NULL ? got : "(nothing)");
        free(got);
        ck_assert_int_eq(h_send(fd[holder], "LOCK ho"), 0);
        /* Requests on two connections are not ordered: let the LOCK queue
           before the next UNLOCK, or that UNLOCK finds no one to hand to. */
        ck_assert_msg(h_wait_stat("waiters", 1, false, CMD_MS, &queued),
                      "hand-over %d: the LOCK did not queue (waiters %lld)", i, queued);
        holder = 1 - holder;
    }
    fw.stop = true;
    pthread_join(th, NULL);
    ck_assert_msg(fw.free_seen == 0, "the key was free %ld times in %ld polls during hand-overs",
                  fw.free_seen, fw.polls);
    ck_assert_msg(fw.polls > 0, "the poller never saw the key");
    ck_assert_int_eq(h_stat(fd[holder], "handovers", &handovers), 0);
    ck_assert_msg(handovers >= 200, "STATS handovers %lld, expected >= 200", handovers);
    close(fd[0]);
    close(fd[1]);
}
END_TEST

/* The fence=N of a reply; -1 when absent. */
static long long
reply_fence(const char *line)
{
    long long f;

    return h_reply_int(line, "fence", &f) ? f : -1;
}

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

    it_up();
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
    ck_assert_msg(got != NULL && parse_status_int(got, "OK", "l", "validity", &valid) != NULL
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

    it_up();
    a = expect_tcp();
    got = h_cmd(a, "LOCK e mode=lease ttl=600", CMD_MS);
    ck_assert_msg(reply_token(got, tok), "LOCK mode=lease answered '%s'",
                  got != NULL ? got : "(nothing)");
    free(got);
    ck_assert_msg(h_wait_until(cond_key_gone, &key, 3000), "the lease did not expire");
    snprintf(line, sizeof(line), "EXTEND e token=%s ttl=5000", tok);
    EXPECT_REPLY(a, line, "NOTHELD e");
    ck_assert_uint_eq(h_masters_without("e"), NMASTERS);
    close(a);
}
END_TEST

/*
 * Fencing on one daemon: fences increase with every grant, hand-overs
 * included; a re-entrant hold keeps its fence; STATUS shows it; a fence
 * cannot be added to a hold granted without one.
 */
START_TEST(fence_basics)
{
    long long f, last = 0, valid;
    char *got;
    int a, b, i;

    it_up();
    a = expect_tcp();
    b = expect_tcp();
    for (i = 0; i < 20; i++) {
        got = h_cmd(i % 2 ? a : b, "LOCK f fence", CMD_MS);
        f = reply_fence(got);
        ck_assert_msg(got != NULL && strncmp(got, "OK f validity=", 14) == 0 && f > last,
                      "grant %d answered '%s' after fence %lld", i, got != NULL ? got : "(nothing)",
                      last);
        free(got);
        last = f;
        EXPECT_REPLY(i % 2 ? a : b, "UNLOCK f", "OK f holds=0");
    }
    /* Every master's counter was raised to the last fence (write-back). */
    got = h_master_get(4, "f fence");
    ck_assert_msg(got != NULL && strtoll(got, NULL, 10) == last,
                  "master 4's counter is '%s', last fence %lld", got != NULL ? got : "(none)", last);
    free(got);

    got = h_cmd(a, "LOCK f fence", CMD_MS);
    f = reply_fence(got);
    free(got);
    ck_assert_int_gt(f, last);
    got = h_cmd(a, "LOCK f", CMD_MS);
    ck_assert_msg(reply_fence(got) == f && strstr(got, " holds=2") != NULL,
                  "re-entry answered '%s', expected holds=2 fence=%lld", got, f);
    free(got);
    got = h_cmd(a, "STATUS f", CMD_MS);
    ck_assert_msg(got != NULL && strstr(got, " owner=self mode=session") != NULL
                  && reply_fence(got) == f, "STATUS answered '%s'", got != NULL ? got : "(nothing)");
    free(got);

    /* Queued behind a fenced holder: the hand-over grant is fenced too. */
    ck_assert_int_eq(h_send(b, "LOCK f fence"), 0);
    EXPECT_REPLY(a, "UNLOCK f", "OK f holds=1");
    EXPECT_REPLY(a, "UNLOCK f", "OK f holds=0");
    got = h_read_line(b, CMD_MS);
    ck_assert_msg(got != NULL && reply_fence(got) > f, "the waiter got '%s' after fence %lld",
                  got != NULL ? got : "(nothing)", f);
    free(got);

    EXPECT_LOCK_OK(a, "LOCK plain", "plain", 1, valid);
    EXPECT_REPLY(a, "LOCK plain fence", "ERR PROTO this session holds the lock without a fence; "
                 "a re-entrant LOCK cannot add one (UNLOCK it first)");
    EXPECT_REPLY(a, "UNLOCK plain", "OK plain holds=0");
    close(a);
    close(b);
}
END_TEST

/* A counter that is not a number: no grant, an error naming the key, no key left. */
START_TEST(fence_counter_corrupt)
{
    size_t i;
    char *got;
    int a;

    it_up();
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET %s %s", "bad fence", "xyz"), 0);
    }
    a = expect_tcp();
    got = h_cmd(a, "TRYLOCK bad fence", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM ", 13) == 0
                  && strstr(got, "fence counter bad fence is not an integer") != NULL,
                  "TRYLOCK over a corrupt counter answered '%s'", got != NULL ? got : "(nothing)");
    free(got);
    ck_assert_uint_eq(h_masters_without("bad"), NMASTERS);
    /* Unfenced locking of the same name is not affected. */
    EXPECT_PREFIX(a, "TRYLOCK bad", "OK bad validity=");
    close(a);
}
END_TEST

/* lock.fence: always fences every grant, lease mode included. */
START_TEST(fence_always)
{
    struct h_daemon_opts o = it_opts;
    char *got;
    int a;

    o.fence = "always";
    ck_assert_msg(h_begin(tcase_name()) == 0, "cannot create the test directory");
    ck_assert_msg(h_start_masters(NMASTERS) == 0, "the masters did not start");
    ck_assert_msg(h_start_daemon(&o) == 0, "redlockd did not start (log above)");
    a = expect_tcp();
    got = h_cmd(a, "LOCK x", CMD_MS);
    ck_assert_msg(reply_fence(got) == 1, "LOCK x answered '%s'", got != NULL ? got : "(nothing)");
    free(got);
    got = h_cmd(a, "TRYLOCK y mode=lease ttl=5000", CMD_MS);
    ck_assert_msg(reply_fence(got) == 1 && strncmp(got, "OK y token=", 11) == 0,
                  "TRYLOCK y mode=lease answered '%s'", got != NULL ? got : "(nothing)");
    free(got);
    close(a);
}
END_TEST

static Suite *
integration_suite(void)
{
    Suite *s = suite_create("redlockd integration");
    TCase *tc = tcase_create("daemon");

    /* Setup is it_up() in each test; teardown runs when a test passes. */
    tcase_add_checked_fixture(tc, NULL, it_teardown);
    if (getenv("CK_DEFAULT_TIMEOUT") == NULL) {
        tcase_set_timeout(tc, TEST_TIMEOUT_S);
    }
    tcase_add_test(tc, key_on_masters);
    tcase_add_test(tc, trylock_busy);
    tcase_add_test(tc, blocked_lock_gets_it);
    tcase_add_test(tc, lock_timeout);
    tcase_add_test(tc, close_frees_keys);
    tcase_add_test(tc, watchdog);
    tcase_add_test(tc, reentry);
    tcase_add_test(tc, two_masters_down);
    tcase_add_test(tc, three_masters_down_noquorum);
    tcase_add_test(tc, masters_recover);
    tcase_add_test(tc, protocol_errors);
    tcase_add_test(tc, misc_verbs);
    tcase_add_test(tc, sigterm_releases);
    tcase_add_test(tc, status);
    tcase_add_test(tc, pending_lock_cancelled_on_close);
    tcase_add_test(tc, validity);
    tcase_add_test(tc, noscript_retry);
    tcase_add_test(tc, auth);
    tcase_add_test(tc, stalled_master);
    tcase_add_test(tc, client_never_reads);
    tcase_add_test(tc, lost_before_validity_end);
    tcase_add_test(tc, daemon_paused_past_lease);
    tcase_add_test(tc, fairness_one_daemon);
    tcase_add_test(tc, handover_never_free);
    tcase_add_test(tc, lease_mode);
    tcase_add_test(tc, lease_expired_not_extended);
    tcase_add_test(tc, fence_basics);
    tcase_add_test(tc, fence_counter_corrupt);
    tcase_add_test(tc, fence_always);
    suite_add_tcase(s, tc);
    return s;
}

const struct runner runner_main = { "check_integration", integration_suite, h_suite_init, h_suite_cleanup };
