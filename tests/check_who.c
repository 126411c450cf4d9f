/*
 * check_who.c: who holds what, end to end: holder labels kept on the
 * masters and read through another daemon, STATUS's label/held_ms/
 * waiters, LIST, WATCH pushes for every kind of change, and BREAK with
 * its admin right, its LOST push to the holder on another daemon and
 * its fence that a fence check uses against the broken holder.
 *
 * Real redis-server masters and real daemons on free loopback ports
 * (tests/harness.h); two daemons on the same masters where a test says
 * so.  Each test is a test case of its own: CK_RUN_CASE=<test>
 * ./build/check_who runs one.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <hiredis/hiredis.h>

#include "client/client.h"
#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5       /* masters per test */
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define QUIET_MS        400     /* nothing must come for this long */
#define TEST_TIMEOUT_S  60      /* per test, unless CK_DEFAULT_TIMEOUT is set */
#define ADMIN_PASSWORD  "admin-secret"

/* Every daemon: quick retries, and an admin password for BREAK. */
static const struct h_daemon_opts wt_opts = {
    .retry_delay_ms = 100,
    .admin_password = ADMIN_PASSWORD,
};

/* The host name a daemon on this machine puts in its default labels. */
static const char *
wt_host(void)
{
    static char host[65];

    if (host[0] == '\0' && gethostname(host, sizeof(host)) != 0) {
        snprintf(host, sizeof(host), "localhost");
    }
    host[sizeof(host) - 1] = '\0';
    return host;
}

/* Read a push that must come within H_PROMPT_MS and start with prefix; caller frees. */
#define WT_PUSH(fd, prefix) wt_push_at((fd), (prefix), __LINE__)

static char *
wt_push_at(int fd, const char *prefix, int at)
{
    char *got = h_read_line(fd, H_PROMPT_MS);


    ck_assert_msg(got != NULL && strncmp(got, prefix, strlen(prefix)) == 0,
                  "line %d: expected a push '%s...' within %d ms, got '%s'", at, prefix,
                  H_PROMPT_MS, got != NULL ? got : "(nothing)");
    return got;
}

/* ---- labels and STATUS ---- */

/* Label keys of name ("<name> label *": no key prefix here) on every master together. */
static long long
wt_label_keys(const char *name)
{
    char pattern[128];
    long long n = 0;
    size_t i;

    snprintf(pattern, sizeof(pattern), "%s label *", name);
    for (i = 0; i < NMASTERS; i++) {
        redisContext *r = h_master_redis(i);
        redisReply *rep = r != NULL ? redisCommand(r, "KEYS %s", pattern) : NULL;

        ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_ARRAY, "KEYS on master %zu", i);
        n += (long long)rep->elements;
        freeReplyObject(rep);
        redisFree(r);
    }
    return n;
}

/*
 * A label given on one daemon is read through the other, with the time
 * held; without label= the daemon names the client; the label lives and
 * dies with the record on every master; STATUS says how many wait here,
 * and renewer=watchdog when a session of the daemon asked holds the name
 * (not another daemon's, not a lease-mode lock).
 */
START_TEST(label_across_daemons)
{
    int a, b, c, u, w;
    char *got, key[128], want[128], token[33];
    long long held;
    int64_t t0;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &wt_opts);
    a = expect_connect(0);
    b = expect_connect(1);
    got = EXPECT_CMD(a, "LOCK job ttl=5000 label=backup@db7");
    EXPECT_IS(got, "OK", "job");
    free(got);
    t0 = h_now_ms();
    got = EXPECT_CMD(b, "STATUS job");
    EXPECT_IS(got, "HELD", "job");
    EXPECT_FIELD(got, "owner", "other");
    EXPECT_FIELD(got, "label", "backup@db7");
    held = EXPECT_INT(got, "held_ms");
    ck_assert_msg(held >= 0 && held < 2000, "'%s': held_ms out of 0..2000", got);
    EXPECT_NO_FIELD(got, "waiters");
    EXPECT_NO_FIELD(got, "renewer");        /* held through daemon 0, not 1 */
    free(got);
    /* held_ms grows with the hold, on the masters' clocks. */
    h_sleep_ms(300);
    got = EXPECT_CMD(b, "STATUS job");
    ck_assert_msg(EXPECT_INT(got, "held_ms") >= held + 250, "'%s': held_ms did not grow by "
                  "the 300 ms slept (it was %lld)", got, held);
    ck_assert_msg(EXPECT_INT(got, "held_ms") <= h_now_ms() - t0 + 1000, "'%s'", got);
    free(got);

    /* A waiter on daemon 1 shows there, not on daemon 0. */
    w = expect_connect(1);
    ck_assert_int_eq(h_send(w, "LOCK job wait=20000 label=next"), 0);
    ck_assert_msg(h_wait_stat("waiters", 1, false, CMD_MS, NULL), "daemon 1 never had a waiter");
    got = EXPECT_CMD(b, "STATUS job");
    EXPECT_FIELD(got, "waiters", "1");
    EXPECT_FIELD(got, "label", "backup@db7");
    free(got);
    got = EXPECT_CMD(a, "STATUS job");
    EXPECT_FIELD(got, "owner", "self");
    EXPECT_FIELD(got, "renewer", "watchdog");
    EXPECT_NO_FIELD(got, "waiters");
    free(got);
    EXPECT_REPLY(a, "UNLOCK job", "OK job holds=0");
    got = EXPECT_READ(w, CMD_MS, "the waiter on daemon 1");
    EXPECT_IS(got, "OK", "job");
    free(got);
    got = EXPECT_CMD(a, "STATUS job");
    EXPECT_FIELD(got, "label", "next");
    free(got);
    close(w);

    /*
     * Without label=: the daemon's host and the TCP peer, which the
     * holding daemon shows (to any of its sessions, with how long it was
     * held) and writes nowhere, so that a label nobody asked for costs
     * the masters nothing; another daemon shows no label.
     */
    got = EXPECT_CMD(a, "LOCK tcpjob");
    ck_assert_msg(h_reply_field(got, "validity", want, sizeof(want)), "'%s'", got);
    free(got);
    snprintf(want, sizeof(want), "label=%s:127.0.0.1:", wt_host());
    c = expect_connect(0);
    got = EXPECT_CMD(c, "STATUS tcpjob");
    EXPECT_FIELD(got, "owner", "other");
    ck_assert_msg(strstr(got, want) != NULL, "'%s' lacks '%s<port>'", got, want);
    ck_assert_msg(EXPECT_INT(got, "held_ms") >= 0, "'%s'", got);
    /* Another session of the holding daemon: that daemon renews it. */
    EXPECT_FIELD(got, "renewer", "watchdog");
    free(got);
    got = EXPECT_CMD(b, "STATUS tcpjob");
    EXPECT_IS(got, "HELD", "tcpjob");
    EXPECT_NO_FIELD(got, "label");
    EXPECT_NO_FIELD(got, "held_ms");
    EXPECT_NO_FIELD(got, "renewer");
    free(got);
    /* A lease-mode lock taken through daemon 0: its holder renews it, not the daemon. */
    EXPECT_PREFIX(c, "LOCK leasejob mode=lease ttl=5000", "OK leasejob token=");
    got = EXPECT_CMD(a, "STATUS leasejob");
    EXPECT_IS(got, "HELD", "leasejob");
    EXPECT_NO_FIELD(got, "renewer");
    free(got);
    ck_assert_int_eq(wt_label_keys("tcpjob"), 0);
    /* ... and on the Unix socket, the client's uid and pid. */
    h_use_daemon(0);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    got = EXPECT_CMD(u, "LOCK unixjob");
    free(got);
    got = EXPECT_CMD(a, "STATUS unixjob");
    snprintf(want, sizeof(want), "label=%s:uid=%ld,pid=%ld ", wt_host(), (long)getuid(),
             (long)getpid());
    ck_assert_msg(strstr(got, want) != NULL, "'%s' lacks '%s'", got, want);
    free(got);
    close(c);

    /* The label is a key of its own on every master, with the record's expiry. */
    got = EXPECT_CMD(a, "LOCK lz mode=lease ttl=4000 label=L1");
    ck_assert_msg(h_reply_field(got, "token", token, sizeof(token)), "'%s'", got);
    free(got);
    snprintf(key, sizeof(key), "lz label %s", token);
    ck_assert_msg(h_masters_without(key) == 0, "the label key is missing on %zu masters",
                  h_masters_without(key));
    ck_assert_msg(h_master_pttl(0, key) > 0 && h_master_pttl(0, key) <= 4000,
                  "the label's PTTL is %lld", h_master_pttl(0, key));
    snprintf(want, sizeof(want), "UNLOCK lz token=%s", token);
    EXPECT_REPLY(a, want, "OK lz");
    ck_assert_msg(h_masters_without(key) == NMASTERS, "UNLOCK left the label on %zu masters",
                  NMASTERS - h_masters_without(key));
    close(a);
    close(b);
    close(u);
}
END_TEST

/* ---- LIST ---- */

/* Holds and waiters of this daemon, in name order, with a prefix. */
START_TEST(list_holds_and_waiters)
{
    int a, b, c;
    char *got, *lines[8];
    int n = 0, i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &wt_opts);
    a = expect_connect(0);
    b = expect_connect(0);
    c = expect_connect(0);
    got = EXPECT_CMD(a, "LOCK a:1 label=one fence ttl=8000");
    free(got);
    got = EXPECT_CMD(a, "LOCK a:2 label=two");
    free(got);
    got = EXPECT_CMD(b, "LOCK b:1 shared label=reader");
    free(got);
    ck_assert_int_eq(h_send(c, "LOCK a:1 wait=20000 label=w1"), 0);
    ck_assert_msg(h_wait_stat("waiters", 1, false, CMD_MS, NULL), "no waiter");

    ck_assert_int_eq(h_send(b, "LIST"), 0);
    for (;;) {
        got = EXPECT_READ(b, CMD_MS, "LIST");
        if (strcmp(got, "END") == 0) {
            free(got);
            break;
        }
        ck_assert_msg(n < 8, "LIST: too many lines");
        lines[n++] = got;
    }
    ck_assert_int_eq(n, 4);
    EXPECT_IS(lines[0], "HELD", "a:1");
    EXPECT_FIELD(lines[0], "label", "one");
    EXPECT_FIELD(lines[0], "mode", "session");
    EXPECT_FIELD(lines[0], "kind", "exclusive");
    EXPECT_FIELD(lines[0], "waiters", "1");
    ck_assert_msg(EXPECT_INT(lines[0], "fence") > 0, "'%s'", lines[0]);
    ck_assert_msg(EXPECT_INT(lines[0], "ttl") > 0 && EXPECT_INT(lines[0], "ttl") <= 8000,
                  "'%s'", lines[0]);
    ck_assert_msg(EXPECT_INT(lines[0], "held_ms") >= 0, "'%s'", lines[0]);
    EXPECT_IS(lines[1], "WAIT", "a:1");
    EXPECT_FIELD(lines[1], "label", "w1");
    EXPECT_FIELD(lines[1], "position", "1");
    EXPECT_IS(lines[2], "HELD", "a:2");
    EXPECT_FIELD(lines[2], "label", "two");
    EXPECT_NO_FIELD(lines[2], "fence");
    EXPECT_FIELD(lines[2], "waiters", "0");
    EXPECT_IS(lines[3], "HELD", "b:1");
    EXPECT_FIELD(lines[3], "kind", "shared");
    for (i = 0; i < n; i++) {
        free(lines[i]);
    }

    /* With a prefix, only those names; an unknown prefix lists nothing. */
    ck_assert_int_eq(h_send(b, "LIST a:2"), 0);
    got = EXPECT_READ(b, CMD_MS, "LIST a:2");
    EXPECT_IS(got, "HELD", "a:2");
    free(got);
    got = EXPECT_READ(b, CMD_MS, "LIST a:2 END");
    ck_assert_str_eq(got, "END");
    free(got);
    EXPECT_REPLY(b, "LIST zzz", "END");
    /* The session goes on after a LIST. */
    EXPECT_REPLY(b, "PING after", "PONG after");
    close(a);
    close(b);
    close(c);
}
END_TEST

/*
 * With auth.show_labels: admin, a session sees the labels of its own
 * holds only; STATUS, LIST and WATCH leave others' out, and an admin
 * session sees them all.
 */
START_TEST(labels_shown_to_admins_only)
{
    struct h_daemon_opts o = wt_opts;
    int a, b, adm;
    char *got;

    o.show_labels = "admin";
    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    a = expect_connect(0);
    b = expect_connect(0);
    adm = expect_connect(0);
    got = EXPECT_CMD(a, "LOCK lb label=build-host-7");
    free(got);

    got = EXPECT_CMD(a, "STATUS lb");
    EXPECT_FIELD(got, "owner", "self");
    EXPECT_FIELD(got, "label", "build-host-7");
    free(got);
    got = EXPECT_CMD(b, "STATUS lb");
    EXPECT_FIELD(got, "owner", "other");
    EXPECT_NO_FIELD(got, "label");
    EXPECT_NO_FIELD(got, "held_ms");
    free(got);

    ck_assert_int_eq(h_send(b, "LIST"), 0);
    got = EXPECT_READ(b, CMD_MS, "LIST");
    EXPECT_IS(got, "HELD", "lb");
    EXPECT_NO_FIELD(got, "label");
    free(got);
    got = EXPECT_READ(b, CMD_MS, "LIST END");
    ck_assert_str_eq(got, "END");
    free(got);
    ck_assert_int_eq(h_send(a, "LIST"), 0);
    got = EXPECT_READ(a, CMD_MS, "LIST");
    EXPECT_FIELD(got, "label", "build-host-7");
    free(got);
    got = EXPECT_READ(a, CMD_MS, "LIST END");
    ck_assert_str_eq(got, "END");
    free(got);

    EXPECT_REPLY(b, "WATCH lb", "OK lb");
    got = WT_PUSH(b, "! HELD lb");
    EXPECT_NO_FIELD(got, "label");
    free(got);

    EXPECT_REPLY(adm, "AUTH " ADMIN_PASSWORD, "OK");
    got = EXPECT_CMD(adm, "STATUS lb");
    EXPECT_FIELD(got, "label", "build-host-7");
    free(got);
    EXPECT_REPLY(adm, "WATCH lb", "OK lb");
    got = WT_PUSH(adm, "! HELD lb");
    EXPECT_FIELD(got, "label", "build-host-7");
    free(got);
    close(a);
    close(b);
    close(adm);
}
END_TEST

/*
 * A listing longer than one step (1024 names) and than the client's
 * output bound is written in steps as the client reads: every name once,
 * in order, and the session is not closed for its output.
 */
START_TEST(list_in_steps)
{
    static const struct h_daemon_opts opts = {
        .retry_delay_ms = 100,
        .max_locks_per_client = 3000,
        .max_output_bytes = 65536,
        .max_line_bytes = 1024,
    };
    enum { N = 2600 };
    char line[64], want[32], *got;
    int a, b, i, seen = 0;
    long long closed = -1;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &opts);
    a = expect_connect(0);
    b = expect_connect(0);
    for (i = 0; i < N; i++) {
        snprintf(line, sizeof(line), "LOCK n%05d ttl=30000", i);
        ck_assert_int_eq(h_send(a, line), 0);
    }
    for (i = 0; i < N; i++) {
        got = EXPECT_READ(a, 10000, "a pipelined LOCK");
        ck_assert_msg(strncmp(got, "OK n", 4) == 0, "LOCK %d answered '%s'", i, got);
        free(got);
    }
    ck_assert_int_eq(h_send(b, "LIST n"), 0);
    h_sleep_ms(200);        /* the client is slow to read: the daemon must wait for it */
    for (;;) {
        got = EXPECT_READ(b, CMD_MS, "LIST n");
        if (strcmp(got, "END") == 0) {
            free(got);
            break;
        }
        snprintf(want, sizeof(want), "n%05d", seen);
        ck_assert_msg(h_is_reply(got, "HELD", want), "LIST line %d is '%s', expected HELD %s",
                      seen, got, want);
        free(got);
        seen++;
    }
    ck_assert_int_eq(seen, N);
    EXPECT_REPLY(b, "PING", "PONG");
    ck_assert_int_eq(h_stat(b, "clients_closed_output", &closed), 0);
    ck_assert_int_eq(closed, 0);
    close(a);
    close(b);
}
END_TEST

/*
 * Sessions fds[0 .. nsess - 1] send verb ("LOCK" or "UNLOCK") for the
 * names n<i><suffix>, i in [from, to), session i % nsess for name i,
 * pipelined, and each answer must be OK.
 */
static void
wt_names(const int *fds, size_t nsess, int from, int to, const char *suffix, const char *verb)
{
    char line[64], *got;
    size_t s;
    int i;

    for (i = from; i < to; i++) {
        snprintf(line, sizeof(line), "%s n%05d%s%s", verb, i, suffix,
                 strcmp(verb, "LOCK") == 0 ? " ttl=60000" : "");
        ck_assert_int_eq(h_send(fds[(size_t)i % nsess], line), 0);
    }
    for (s = 0; s < nsess; s++) {
        for (i = from; i < to; i++) {
            if ((size_t)i % nsess != s) {
                continue;
            }
            got = EXPECT_READ(fds[s], 20000, "a pipelined LOCK or UNLOCK");
            ck_assert_msg(strncmp(got, "OK n", 4) == 0, "%s n%05d%s answered '%s'", verb, i,
                          suffix, got);
            free(got);
        }
    }
}

/* A LIST being read line by line, through a buffered client. */
struct wt_lister {
    struct client c;                /* the reading side of the connection */
    char          last[64];         /* the last name read ("" before the first) */
    size_t        n;                /* names read */
};

/*
 * The next name of the listing (a NUL-terminated copy in l->last), or
 * NULL at END; each name must come after the one before it in byte
 * order, so that none comes twice.
 */
static const char *
wt_list_next(struct wt_lister *l)
{
    char name[64];
    const char *sp;
    size_t len;

    ck_assert_msg(client_read_line(&l->c, client_now_ms() + CMD_MS) == CLIENT_LINE,
                  "LIST: no line within %d ms after %zu names (%s)", CMD_MS, l->n, l->c.err);
    if (strcmp(l->c.line, "END") == 0) {
        return NULL;
    }
    ck_assert_msg(strncmp(l->c.line, "HELD ", 5) == 0, "LIST line '%s'", l->c.line);
    sp = strchr(l->c.line + 5, ' ');
    len = sp != NULL ? (size_t)(sp - (l->c.line + 5)) : strlen(l->c.line + 5);
    ck_assert_msg(len < sizeof(name), "LIST line '%s'", l->c.line);
    memcpy(name, l->c.line + 5, len);
    name[len] = '\0';
    ck_assert_msg(l->n == 0 || strcmp(l->last, name) < 0,
                  "LIST: '%s' came after '%s' (out of order, or twice)", name, l->last);
    memcpy(l->last, name, len + 1);
    l->n++;
    return l->last;
}

/*
 * Each step of a LIST costs one page, not the whole table: a full
 * listing of N names makes N / 1024 + 1 steps and looks at no more than
 * one entry per name plus one per step (STATS list_entries_visited),
 * with a prefix too.  A walk of the whole table at each step would look
 * at N entries a step.
 */
START_TEST(list_cost_per_page)
{
    enum { NSESS = 8, N = 8000 };
    int fds[NSESS], u;
    long long steps0, steps1, seen0, seen1;
    struct wt_lister l;
    size_t i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &wt_opts);
    for (i = 0; i < NSESS; i++) {
        fds[i] = expect_connect(0);
    }
    u = expect_connect(0);
    wt_names(fds, NSESS, 0, N, "", "LOCK");

    ck_assert_int_eq(h_stat(u, "list_steps", &steps0), 0);
    ck_assert_int_eq(h_stat(u, "list_entries_visited", &seen0), 0);
    memset(&l, 0, sizeof(l));
    client_init(&l.c, u, 0);
    ck_assert_int_eq(h_send(u, "LIST"), 0);
    while (wt_list_next(&l) != NULL) {
    }
    ck_assert_int_eq(l.n, N);
    ck_assert_int_eq(h_stat(u, "list_steps", &steps1), 0);
    ck_assert_int_eq(h_stat(u, "list_entries_visited", &seen1), 0);
    ck_assert_msg(steps1 - steps0 == N / 1024 + 1, "%lld steps for %d names",
                  steps1 - steps0, N);
    ck_assert_msg(seen1 - seen0 <= N + (steps1 - steps0),
                  "a LIST of %d names in %lld steps looked at %lld table entries", N,
                  steps1 - steps0, seen1 - seen0);

    /* With a prefix: n02000 .. n02999, from the prefix on and no further. */
    memset(&l, 0, sizeof(l));
    client_init(&l.c, u, 0);
    ck_assert_int_eq(h_send(u, "LIST n02"), 0);
    while (wt_list_next(&l) != NULL) {
        ck_assert_msg(strncmp(l.last, "n02", 3) == 0, "LIST n02 listed %s", l.last);
    }
    ck_assert_int_eq(l.n, 1000);
    ck_assert_int_eq(h_stat(u, "list_steps", &steps0), 0);
    ck_assert_int_eq(h_stat(u, "list_entries_visited", &seen0), 0);
    ck_assert_msg(steps0 - steps1 == 1000 / 1024 + 1, "%lld steps for 1000 names",
                  steps0 - steps1);
    ck_assert_msg(seen0 - seen1 <= 1000 + (steps0 - steps1),
                  "LIST n02 (1000 names) looked at %lld table entries", seen0 - seen1);
    for (i = 0; i < NSESS; i++) {
        close(fds[i]);
    }
    close(u);
}
END_TEST

/*
 * A LIST read while names are added and removed between its steps: each
 * name held for the whole LIST comes exactly once, in order, and so do
 * names added well ahead of it; removing the name a step ended on (the
 * cursor) does not lose or repeat the next ones.  The reader is on the
 * Unix socket, whose send buffer keeps the daemon at most a few steps
 * ahead of what was read (pages are written as the client reads them).
 */
START_TEST(list_exactly_once_under_churn)
{
    static const struct h_daemon_opts opts = {
        .retry_delay_ms = 100,
        .max_locks_per_client = 3000,
    };
    enum {
        NSESS = 8,
        N = 24000,          /* n00000 .. n23999, held by NSESS sessions */
        READ1 = 2000,       /* names read before the first changes */
        GONE_END = 12000,   /* [READ1, GONE_END) released then: the cursor is in it */
        READ2 = 1000,       /* more names read before the second changes */
        GONE2 = 21000,      /* [GONE2, GONE2_END) released then */
        GONE2_END = 22000,
    };
    static unsigned char seen[N], seen_a[N], seen_b[N];
    int fds[NSESS], churn[1], u;
    struct wt_lister l;
    const char *name;
    char line[64], *got;
    size_t i;
    int idx;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &opts);
    for (i = 0; i < NSESS; i++) {
        fds[i] = expect_connect(0);
    }
    churn[0] = expect_connect(0);
    wt_names(fds, NSESS, 0, N, "", "LOCK");
    memset(seen, 0, sizeof(seen));
    memset(seen_a, 0, sizeof(seen_a));
    memset(seen_b, 0, sizeof(seen_b));

    u = h_connect_unix();
    ck_assert_msg(u >= 0, "cannot connect to the daemon's Unix socket");
    memset(&l, 0, sizeof(l));
    client_init(&l.c, u, 0);
    ck_assert_int_eq(h_send(u, "LIST n"), 0);
    for (;;) {
        name = wt_list_next(&l);
        if (name == NULL) {
            break;
        }
        ck_assert_msg(sscanf(name, "n%5d", &idx) == 1 && idx >= 0 && idx < N,
                      "LIST listed %s", name);
        if (name[6] == 'a') {
            seen_a[idx]++;
        } else if (name[6] == 'b') {
            seen_b[idx]++;
        } else {
            seen[idx]++;
        }
        if (l.n == READ1) {
            /*
             * The daemon wrote a few steps past what was read, and no
             * more: its cursor is somewhere in [READ1, GONE_END), which
             * goes, so the next step must begin at the name GONE_END;
             * names are added behind and ahead of it.
             */
            wt_names(fds, NSESS, READ1, GONE_END, "", "UNLOCK");
            for (idx = 0; idx < N; idx += 13) {
                if (idx >= READ1 && idx < GONE_END) {
                    continue;   /* the first name after the cursor: GONE_END */
                }
                snprintf(line, sizeof(line), "LOCK n%05da ttl=60000", idx);
                got = EXPECT_CMD(churn[0], line);
                ck_assert_msg(strncmp(got, "OK ", 3) == 0, "%s: '%s'", line, got);
                free(got);
            }
        } else if (l.n == READ1 + READ2) {
            /* Well ahead of the cursor: some go, others come. */
            wt_names(fds, NSESS, GONE2, GONE2_END, "", "UNLOCK");
            wt_names(churn, 1, GONE2 - 1000, GONE2 - 500, "b", "LOCK");
        }
    }
    for (idx = 0; idx < N; idx++) {
        if (idx < READ1 || (idx >= GONE_END && (idx < GONE2 || idx >= GONE2_END))) {
            ck_assert_msg(seen[idx] == 1, "n%05d, held for the whole LIST, listed %d times",
                          idx, seen[idx]);
        } else if (idx >= GONE2 && idx < GONE2_END) {
            ck_assert_msg(seen[idx] == 0, "n%05d, released ahead of the LIST, was listed",
                          idx);
        }
        if (idx % 13 == 0 && idx >= GONE_END) {
            ck_assert_msg(seen_a[idx] == 1, "n%05da, added ahead of the LIST, listed %d times",
                          idx, seen_a[idx]);
        }
        if (idx >= GONE2 - 1000 && idx < GONE2 - 500) {
            ck_assert_msg(seen_b[idx] == 1, "n%05db, added ahead of the LIST, listed %d times",
                          idx, seen_b[idx]);
        }
    }
    /* The session goes on after it. */
    EXPECT_REPLY(u, "PING", "PONG");
    for (i = 0; i < NSESS; i++) {
        close(fds[i]);
    }
    close(churn[0]);
    close(u);
}
END_TEST

/* ---- WATCH ---- */

/*
 * A watcher on daemon 1 hears every change of a name made through
 * daemon 0: the first state, a grant with its label and fence, a
 * hand-over to the next waiter, a holder that disconnects, a lease that
 * expires, an UNLOCK; UNWATCH stops it.
 */
START_TEST(watch_follows_changes)
{
    int w, a, b, c;
    char *got, token[33], line[96];
    long long f1, f2;
    int64_t t0;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &wt_opts);
    w = expect_connect(1);
    a = expect_connect(0);
    b = expect_connect(0);
    c = expect_connect(0);
    EXPECT_REPLY(w, "WATCH lead", "OK lead");
    got = WT_PUSH(w, "! FREE lead");
    free(got);

    got = EXPECT_CMD(a, "LOCK lead fence label=node-a");
    f1 = EXPECT_INT(got, "fence");
    free(got);
    got = WT_PUSH(w, "! HELD lead ");
    EXPECT_FIELD(got, "label", "node-a");
    EXPECT_FIELD(got, "kind", "exclusive");
    EXPECT_FIELD(got, "holders", "1");
    ck_assert_msg(EXPECT_INT(got, "fence") == f1, "'%s': not the grant's fence %lld", got, f1);
    free(got);
    /* Watching twice is one watch: one push per change, none for the second WATCH. */
    EXPECT_REPLY(w, "WATCH lead", "OK lead");

    /* Hand-over to a waiter: the new holder, with its own fence. */
    ck_assert_int_eq(h_send(b, "LOCK lead fence label=node-b wait=20000"), 0);
    ck_assert_msg(h_wait_stat("waiters", 1, false, CMD_MS, NULL), "no waiter on daemon 0");
    EXPECT_REPLY(a, "UNLOCK lead", "OK lead holds=0");
    got = EXPECT_READ(b, CMD_MS, "the waiter's grant");
    f2 = EXPECT_INT(got, "fence");
    free(got);
    got = WT_PUSH(w, "! HELD lead ");
    EXPECT_FIELD(got, "label", "node-b");
    ck_assert_msg(EXPECT_INT(got, "fence") == f2 && f2 > f1, "'%s' (fences %lld then %lld)",
                  got, f1, f2);
    free(got);
    got = h_read_line(w, QUIET_MS);
    ck_assert_msg(got == NULL, "a second push for one change: '%s'", got);

    /* The holder's connection closes: FREE. */
    close(b);
    got = WT_PUSH(w, "! FREE lead");
    free(got);

    /* A lease that simply expires: FREE when the quorum says it ended. */
    got = EXPECT_CMD(c, "LOCK lead mode=lease ttl=1500 label=short");
    free(got);
    t0 = h_now_ms();
    got = WT_PUSH(w, "! HELD lead ");
    EXPECT_FIELD(got, "label", "short");
    free(got);
    /* The lease's ttl (1500 ms), then a push sent at once. */
    got = h_read_line(w, 1500 + H_PROMPT_MS);
    ck_assert_msg(got != NULL && strcmp(got, "! FREE lead") == 0,
                  "expected '! FREE lead' after the 1500 ms lease expired, got '%s' after "
                  "%lld ms", got != NULL ? got : "(nothing)", (long long)(h_now_ms() - t0));
    ck_assert_msg(h_now_ms() - t0 >= 1400, "FREE came %lld ms after a 1500 ms lease",
                  (long long)(h_now_ms() - t0));
    free(got);

    /* A lease released by its token. */
    got = EXPECT_CMD(c, "LOCK lead mode=lease ttl=20000");
    ck_assert_msg(h_reply_field(got, "token", token, sizeof(token)), "'%s'", got);
    free(got);
    got = WT_PUSH(w, "! HELD lead ");
    free(got);
    snprintf(line, sizeof(line), "UNLOCK lead token=%s", token);
    EXPECT_REPLY(c, line, "OK lead");
    got = WT_PUSH(w, "! FREE lead");
    free(got);

    /*
     * WATCH, UNWATCH and WATCH again in one go: the first read is still in
     * flight when the second WATCH comes, and the name must still be heard.
     */
    ck_assert_int_eq(h_send_raw(w, "WATCH again\nUNWATCH again\nWATCH again\n", 38), 0);
    got = EXPECT_READ(w, CMD_MS, "WATCH again");
    ck_assert_str_eq(got, "OK again");
    free(got);
    got = EXPECT_READ(w, CMD_MS, "UNWATCH again");
    ck_assert_str_eq(got, "OK again");
    free(got);
    got = EXPECT_READ(w, CMD_MS, "WATCH again, the second");
    ck_assert_str_eq(got, "OK again");
    free(got);
    got = WT_PUSH(w, "! FREE again");
    free(got);
    got = EXPECT_CMD(c, "LOCK again label=back");
    free(got);
    got = WT_PUSH(w, "! HELD again ");
    EXPECT_FIELD(got, "label", "back");
    free(got);
    EXPECT_REPLY(c, "UNLOCK again", "OK again holds=0");
    got = WT_PUSH(w, "! FREE again");
    free(got);
    EXPECT_REPLY(w, "UNWATCH again", "OK again");

    /*
     * WATCH of a name watched already changes nothing: no push, and no
     * read of the masters (master 0's script calls, counted around 50 of
     * them, with a PING after as the barrier for the answers).
     */
    {
        long long before = h_master_calls(0, "evalsha"), after;
        int k;

        for (k = 0; k < 50; k++) {
            EXPECT_REPLY(w, "WATCH lead", "OK lead");
        }
        EXPECT_REPLY(w, "PING", "PONG");
        after = h_master_calls(0, "evalsha");
        ck_assert_msg(after - before <= 2, "50 repeated WATCHes made %lld script calls on "
                      "master 0", after - before);
    }
    ck_assert_msg(h_quiet(w, QUIET_MS), "a push after a repeated WATCH");

    /* UNWATCH: nothing more. */
    EXPECT_REPLY(w, "UNWATCH lead", "OK lead");
    got = EXPECT_CMD(c, "LOCK lead");
    free(got);
    ck_assert_msg(h_quiet(w, QUIET_MS), "a push after UNWATCH");
    EXPECT_REPLY(w, "PING", "PONG");
    close(a);
    close(c);
    close(w);
}
END_TEST

/* ---- BREAK ---- */

/* The fence check of a resource: accept a write only with a fence not below the last. */
static int
wt_fenced_write(long long fence)
{
    return h_master_cmd(0, NULL, "EVAL %s 1 %s %lld",
                        "local c = tonumber(redis.call('GET', KEYS[1]) or '0') "
                        "if tonumber(ARGV[1]) < c then return redis.error_reply('stale') end "
                        "redis.call('SET', KEYS[1], ARGV[1]) return 1",
                        "resource:fence", fence);
}

/*
 * BREAK is refused without the admin right; with it, it ends the lock
 * held through the other daemon, whose holder hears LOST reason=broken
 * and whose watchers hear FREE;
 * the raised fence makes the broken holder's next fenced write stale;
 * the breaker is logged; the next grant is fenced above it.
 */
START_TEST(break_ends_the_lock)
{
    int h, x, w, got_u;
    char *got;
    long long f, g, n = 0;
    off_t log0;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &wt_opts);
    h = expect_connect(0);
    x = expect_connect(1);
    w = expect_connect(0);
    EXPECT_REPLY(w, "WATCH stuck", "OK stuck");
    got = WT_PUSH(w, "! FREE stuck");
    free(got);
    got = EXPECT_CMD(h, "LOCK stuck fence label=dead-script ttl=30000");
    f = EXPECT_INT(got, "fence");
    free(got);
    ck_assert_int_eq(wt_fenced_write(f), 0);

    got = EXPECT_CMD(x, "BREAK stuck");
    ck_assert_msg(strncmp(got, "ERR DENIED ", 11) == 0, "BREAK without the right: '%s'", got);
    free(got);
    ck_assert_msg(h_masters_without("stuck") == 0, "a refused BREAK touched the lock");
    EXPECT_REPLY(x, "AUTH wrong-one", "ERR AUTH wrong password");
    close(x);
    x = expect_connect(1);
    EXPECT_REPLY(x, "AUTH " ADMIN_PASSWORD, "OK");
    h_use_daemon(1);
    log0 = h_log_size();
    got = EXPECT_CMD(x, "BREAK stuck");
    EXPECT_IS(got, "OK", "stuck");
    EXPECT_FIELD(got, "holders", "1");
    g = EXPECT_INT(got, "fence");
    ck_assert_msg(g > f, "'%s': the fence was not raised above the holder's %lld", got, f);
    free(got);
    ck_assert_msg(h_masters_without("stuck") == NMASTERS, "BREAK left the key on %zu masters",
                  NMASTERS - h_masters_without("stuck"));
    ck_assert_msg(h_wait_log(log0, "BREAK stuck: 1 holder ended (one was dead-script)", CMD_MS),
                  "no audit line for the BREAK in daemon 1's log");
    ck_assert_msg(h_wait_log(log0, "admin by auth.admin_password): BREAK stuck", CMD_MS),
                  "the audit line does not say who asked for the BREAK");

    /* A watcher on the holder's daemon saw the lock, then its end. */
    got = WT_PUSH(w, "! HELD stuck ");
    EXPECT_FIELD(got, "label", "dead-script");
    free(got);
    got = WT_PUSH(w, "! FREE stuck");
    free(got);

    /* The holder, on the other daemon, hears it. */
    got = EXPECT_READ(h, CMD_MS, "the broken holder's push");
    ck_assert_str_eq(got, "! LOST stuck reason=broken");
    free(got);
    EXPECT_REPLY(h, "UNLOCK stuck", "NOTHELD stuck");
    h_use_daemon(0);
    ck_assert_int_eq(h_stat(h, "locks_lost_broken", &n), 0);
    ck_assert_int_eq(n, 1);

    /* Fencing: whoever acts for the breaker writes with the new fence... */
    ck_assert_int_eq(wt_fenced_write(g), 0);
    /* ... and the broken holder's next fenced write is refused. */
    ck_assert_msg(wt_fenced_write(f) != 0, "the broken holder's fence %lld was accepted after "
                  "the BREAK's %lld", f, g);
    /* The next grant is fenced above the BREAK. */
    got = EXPECT_CMD(h, "LOCK stuck fence");
    ck_assert_msg(EXPECT_INT(got, "fence") > g, "'%s': not above the BREAK's fence %lld", got, g);
    free(got);

    /* uid 0 on the Unix socket has the right without a password. */
    if (getuid() == 0) {
        h_use_daemon(1);
        got_u = h_connect_unix();
        ck_assert_int_ge(got_u, 0);
        got = EXPECT_CMD(got_u, "BREAK stuck");
        EXPECT_IS(got, "OK", "stuck");
        free(got);
        got = EXPECT_READ(h, CMD_MS, "the second broken holder's push");
        ck_assert_str_eq(got, "! LOST stuck reason=broken");
        free(got);
        close(got_u);
    }
    close(h);
    close(x);
    close(w);
}
END_TEST

/* BREAK of a shared name held through two daemons, and of a counted one. */
START_TEST(break_shared_and_counted)
{
    int r0, r1, p0, p1, x;
    char *got;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &wt_opts);
    r0 = expect_connect(0);
    r1 = expect_connect(1);
    p0 = expect_connect(0);
    p1 = expect_connect(1);
    got = EXPECT_CMD(r0, "LOCK rw shared");
    free(got);
    got = EXPECT_CMD(r1, "LOCK rw shared");
    free(got);
    got = EXPECT_CMD(p0, "LOCK sem limit=3");
    free(got);
    got = EXPECT_CMD(p1, "LOCK sem limit=3");
    free(got);
    x = expect_connect(0);
    EXPECT_REPLY(x, "AUTH " ADMIN_PASSWORD, "OK");
    got = EXPECT_CMD(x, "BREAK rw");
    EXPECT_IS(got, "OK", "rw");
    EXPECT_FIELD(got, "holders", "2");
    free(got);
    got = EXPECT_READ(r0, CMD_MS, "reader on daemon 0");
    ck_assert_str_eq(got, "! LOST rw reason=broken");
    free(got);
    got = EXPECT_READ(r1, CMD_MS, "reader on daemon 1");
    ck_assert_str_eq(got, "! LOST rw reason=broken");
    free(got);
    got = EXPECT_CMD(x, "BREAK sem");
    EXPECT_FIELD(got, "holders", "2");
    free(got);
    got = EXPECT_READ(p0, CMD_MS, "permit holder on daemon 0");
    ck_assert_str_eq(got, "! LOST sem reason=broken");
    free(got);
    got = EXPECT_READ(p1, CMD_MS, "permit holder on daemon 1");
    ck_assert_str_eq(got, "! LOST sem reason=broken");
    free(got);
    EXPECT_REPLY(x, "STATUS sem", "FREE sem");
    EXPECT_REPLY(x, "STATUS rw", "FREE rw");
    /* A BREAK of a free name ends nothing, and says so. */
    got = EXPECT_CMD(x, "BREAK nothing");
    EXPECT_FIELD(got, "holders", "0");
    free(got);
    close(r0);
    close(r1);
    close(p0);
    close(p1);
    close(x);
}
END_TEST

/*
 * A fenced grant reaches watchers with its fence.  Between the grant and
 * the fence's write-back its label says a fence is to come ('-'); a read
 * in that window (a re-read after an earlier change, an expiry, a new
 * WATCH) pushed the holder without its fence, and then again with it.
 * The window is held open here by writing the masters' records by hand.
 */
START_TEST(watch_waits_for_the_fence)
{
    static const char tok[] = "0123456789abcdef0123456789abcdef";
    char label_key[64];
    int w, s;
    char *got;
    size_t i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &wt_opts);
    w = expect_connect(0);
    s = expect_connect(0);
    snprintf(label_key, sizeof(label_key), "fx label %s", tok);
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET fx %s PX 20000", tok), 0);
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET %s %s PX 20000", label_key, "1 - node-f"),
                         0);
    }
    EXPECT_REPLY(w, "WATCH fx", "OK fx");
    got = h_read_line(w, QUIET_MS);
    ck_assert_msg(got == NULL, "pushed before the fence was written back: '%s'", got);
    /* STATUS tells the holder as it stands: no fence yet. */
    got = EXPECT_CMD(s, "STATUS fx");
    ck_assert_msg(strncmp(got, "HELD fx ", 8) == 0, "STATUS fx: '%s'", got);
    EXPECT_FIELD(got, "label", "node-f");
    EXPECT_NO_FIELD(got, "fence");
    free(got);

    /* The write-back: the label gets its fence, and says so on the changes channel. */
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET %s %s PX 20000", label_key, "1 7 node-f"),
                         0);
        ck_assert_int_eq(h_master_cmd(i, NULL, "PUBLISH %s %s", "fx changed", "+"), 0);
    }
    got = WT_PUSH(w, "! HELD fx ");
    EXPECT_FIELD(got, "label", "node-f");
    EXPECT_FIELD(got, "fence", "7");
    free(got);
    got = h_read_line(w, QUIET_MS);
    ck_assert_msg(got == NULL, "a second push for one change: '%s'", got);
    close(w);
    close(s);
}
END_TEST

/*
 * A fenced grant whose write-back never comes (its daemon was paused or
 * died between the grant and the write-back): its holder was never
 * told, so a watcher is told nothing of it, reads again with a growing
 * backoff rather than once per round deadline, and hears FREE once the
 * record expires.
 */
START_TEST(watch_fence_never_written)
{
    static const char tok[] = "fedcba9876543210fedcba9876543210";
    char label_key[64], *got;
    int64_t t0;
    int w;
    size_t i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &wt_opts);
    w = expect_connect(0);
    snprintf(label_key, sizeof(label_key), "fy label %s", tok);
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET fy %s PX 1500", tok), 0);
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET %s %s PX 1500", label_key, "1 - node-g"),
                         0);
    }
    t0 = h_now_ms();
    EXPECT_REPLY(w, "WATCH fy", "OK fy");
    got = h_read_line(w, 1000);
    ck_assert_msg(got == NULL, "pushed a grant never told: '%s'", got);
    /* The record's ttl (1500 ms, 1000 of them gone), then a push sent at once. */
    got = h_read_line(w, 500 + H_PROMPT_MS);
    ck_assert_msg(got != NULL && strcmp(got, "! FREE fy") == 0,
                  "expected '! FREE fy' after the record expired, got '%s' %lld ms after WATCH",
                  got != NULL ? got : "(nothing)", (long long)(h_now_ms() - t0));
    ck_assert_msg(h_now_ms() - t0 >= 1400, "FREE before the record expired");
    free(got);
    close(w);
}
END_TEST

#define WT_ADD(s, test) expect_add_case((s), #test, (test), h_end, TEST_TIMEOUT_S)

static Suite *
who_suite(void)
{
    Suite *s = suite_create("redlockd who holds what");

    WT_ADD(s, label_across_daemons);
    WT_ADD(s, list_holds_and_waiters);
    WT_ADD(s, labels_shown_to_admins_only);
    WT_ADD(s, list_in_steps);
    WT_ADD(s, list_cost_per_page);
    WT_ADD(s, list_exactly_once_under_churn);
    WT_ADD(s, watch_follows_changes);
    WT_ADD(s, watch_waits_for_the_fence);
    WT_ADD(s, watch_fence_never_written);
    WT_ADD(s, break_ends_the_lock);
    WT_ADD(s, break_shared_and_counted);
    return s;
}

const struct runner runner_main = { "check_who", who_suite, h_suite_init, h_suite_cleanup };
