/*
 * check_check.c: CHECK, end to end: whether one grant (by the fence it
 * was told, or by a lease's token) is still its name's current one on a
 * quorum of the masters.
 *
 * Current after a fenced grant, through any daemon; stale after UNLOCK,
 * after another client's grant, after a BREAK, after a lease expired;
 * the token form, for each kind; and the cases a wrong CHECK answers
 * CURRENT to: a released fenced grant followed by a grant without a
 * fence (the counter still says the old fence), the released token
 * holding the record again after a later fenced grant, the shared and
 * counted kinds, masters that restarted empty under a holder.  Then
 * NOQUORUM, bad lines, HELP and STATS, and what one CHECK costs each
 * master.  Each attacker case names, before it, the wrong CHECK it was
 * shown to catch (tests/README.md, check_check).
 *
 * Real redis-server masters and real daemons on free loopback ports
 * (tests/harness.h).  Each test is a test case of its own:
 * CK_RUN_CASE=<test> ./build/check_check runs one.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <check.h>

#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5       /* masters per test */
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define EXPIRY_MS       5000    /* deadline for a short lease to expire */
#define TEST_TIMEOUT_S  30      /* per test, unless CK_DEFAULT_TIMEOUT is set */
#define ADMIN_PASSWORD  "check-admin"

/* Quick retries, and an admin password for BREAK. */
static const struct h_daemon_opts ck_opts = {
    .retry_delay_ms = 100,
    .admin_password = ADMIN_PASSWORD,
};

/* LOCK line on fd, which must be granted: its fence (and its token into tok, when not NULL). */
static long long
ck_lock(int fd, const char *line, char *tok)
{
    char *got = h_cmd(fd, line, CMD_MS);
    const char *t;
    long long f = -1;

    ck_assert_msg(got != NULL && strncmp(got, "OK ", 3) == 0, "%s answered '%s'", line,
                  got != NULL ? got : "(nothing)");
    (void)h_reply_int(got, "fence", &f);
    if (tok != NULL) {
        t = strstr(got, " token=");
        ck_assert_msg(t != NULL && strlen(t) >= 7 + 32, "%s: no token in '%s'", line, got);
        memcpy(tok, t + 7, 32);
        tok[32] = '\0';
    }
    free(got);
    return f;
}

/* CHECK <name> <what> on fd must answer CURRENT (ttl > 0). */
static void
ck_current(int fd, const char *name, const char *what)
{
    char line[200], want[300];
    char *got;
    long long ttl;

    snprintf(line, sizeof(line), "CHECK %s %s", name, what);
    snprintf(want, sizeof(want), "CURRENT %s ttl=", name);
    got = h_cmd(fd, line, CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, want, strlen(want)) == 0
                  && h_reply_int(got, "ttl", &ttl) && ttl > 0,
                  "%s answered '%s', expected CURRENT", line, got != NULL ? got : "(nothing)");
    free(got);
}

/* CHECK <name> <what> on fd must answer exactly "STALE <name> reason=<why>". */
static void
ck_stale(int fd, const char *name, const char *what, const char *why)
{
    char line[200], want[300];

    snprintf(line, sizeof(line), "CHECK %s %s", name, what);
    snprintf(want, sizeof(want), "STALE %s reason=%s", name, why);
    EXPECT_REPLY(fd, line, want);
}

/* "fence=<f>" (static buffer of its own per call site's use, one at a time). */
static const char *
ck_fence(long long f)
{
    static char buf[40];

    snprintf(buf, sizeof(buf), "fence=%lld", f);
    return buf;
}

/* "token=<t>". */
static const char *
ck_token(const char *t)
{
    static char buf[48];

    snprintf(buf, sizeof(buf), "token=%s", t);
    return buf;
}

/*
 * A fenced grant is current, through this daemon and another one, on
 * any connection; another fence is not; after UNLOCK its fence is stale
 * (free), and after another client's fenced grant stale (other) while
 * the new fence is current.  STATS counts the answers.
 */
START_TEST(check_fenced_grant)
{
    long long f1, f2;
    int a, b, d1;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &ck_opts);
    h_use_daemon(0);
    a = expect_tcp();
    b = expect_tcp();
    d1 = expect_connect(1);
    h_use_daemon(0);
    f1 = ck_lock(a, "LOCK job fence", NULL);
    ck_current(a, "job", ck_fence(f1));
    ck_current(b, "job", ck_fence(f1));
    ck_current(d1, "job", ck_fence(f1));
    ck_stale(b, "job", ck_fence(f1 + 1), "other");
    EXPECT_REPLY(a, "UNLOCK job", "OK job holds=0");
    ck_stale(b, "job", ck_fence(f1), "free");
    ck_stale(d1, "job", ck_fence(f1), "free");

    f2 = ck_lock(d1, "LOCK job fence", NULL);
    ck_assert_int_gt(f2, f1);
    ck_stale(a, "job", ck_fence(f1), "other");
    ck_current(a, "job", ck_fence(f2));
    /* This daemon answered three of each (d1 asked daemon 1). */
    ck_assert_int_eq(expect_stat("check_current"), 3);
    ck_assert_int_eq(expect_stat("check_stale"), 3);
    close(a);
    close(b);
    close(d1);
}
END_TEST

/*
 * A released fenced grant, then a grant without a fence: the name's
 * counter still holds the old fence and the name is held, yet the old
 * fence is stale.  Caught: a CHECK that takes "the counter is F and the
 * name is held" for current (no fence per grant) answered CURRENT.
 */
START_TEST(check_unfenced_grant_after)
{
    long long f;
    char *got;
    int a, b;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &ck_opts);
    a = expect_tcp();
    b = expect_tcp();
    f = ck_lock(a, "LOCK job fence", NULL);
    EXPECT_REPLY(a, "UNLOCK job", "OK job holds=0");
    (void)ck_lock(b, "LOCK job", NULL);
    got = h_master_get(0, "job fence");
    ck_assert_msg(got != NULL && strtoll(got, NULL, 10) == f, "the counter is '%s', not %lld",
                  got != NULL ? got : "(none)", f);
    free(got);
    ck_stale(a, "job", ck_fence(f), "other");
    /* Lease mode, the same. */
    EXPECT_REPLY(b, "UNLOCK job", "OK job holds=0");
    f = ck_lock(a, "LOCK job fence", NULL);
    EXPECT_REPLY(a, "UNLOCK job", "OK job holds=0");
    (void)ck_lock(b, "LOCK job mode=lease ttl=20000", NULL);
    ck_stale(a, "job", ck_fence(f), "other");
    close(a);
    close(b);
}
END_TEST

/*
 * BREAK ends a fenced grant: its fence is stale (free), and stays stale
 * once another client holds the name without a fence.
 */
START_TEST(check_after_break)
{
    long long f;
    int a, b, adm;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &ck_opts);
    a = expect_tcp();
    b = expect_tcp();
    adm = expect_tcp();
    EXPECT_REPLY(adm, "AUTH " ADMIN_PASSWORD, "OK");
    f = ck_lock(a, "LOCK job fence", NULL);
    ck_current(b, "job", ck_fence(f));
    EXPECT_PREFIX(adm, "BREAK job", "OK job holders=1 fence=");
    expect_lost(a, "job", CMD_MS, "the broken holder");
    ck_stale(b, "job", ck_fence(f), "free");
    (void)ck_lock(b, "LOCK job", NULL);
    ck_stale(adm, "job", ck_fence(f), "other");
    close(a);
    close(b);
    close(adm);
}
END_TEST

/* True when CHECK (the line in arg[1]) on fd arg[0] answers STALE <name> reason=free. */
struct ck_wait {
    int         fd;
    const char *line;
    const char *want;
};

static bool
ck_cond_answers(void *arg)
{
    const struct ck_wait *w = arg;
    char *got = h_cmd(w->fd, w->line, CMD_MS);
    bool ok = got != NULL && strcmp(got, w->want) == 0;

    free(got);
    return ok;
}

/*
 * A fenced lease-mode grant is current by its fence and by its token
 * until its ttl runs out, then stale (free) both ways.
 */
START_TEST(check_lease_expiry)
{
    char tok[33], line[200];
    long long f;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &ck_opts);
    a = expect_tcp();
    f = ck_lock(a, "LOCK job mode=lease ttl=600 fence", tok);
    ck_current(a, "job", ck_fence(f));
    ck_current(a, "job", ck_token(tok));
    snprintf(line, sizeof(line), "CHECK job fence=%lld", f);
    ck_assert_msg(h_wait_until(ck_cond_answers,
                               &(struct ck_wait){ a, line, "STALE job reason=free" }, EXPIRY_MS),
                  "the fence of an expired lease is not stale");
    ck_assert_uint_eq(h_masters_without("job"), NMASTERS);
    ck_stale(a, "job", ck_token(tok), "free");
    close(a);
}
END_TEST

/*
 * By token: a lease's token is current whatever its kind (exclusive,
 * shared, a permit), another token is not; after UNLOCK token= it is
 * stale.
 */
START_TEST(check_token_form)
{
    char t1[33], t2[33], t3[33], line[200];
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &ck_opts);
    a = expect_tcp();
    (void)ck_lock(a, "LOCK ex mode=lease ttl=20000", t1);
    ck_current(a, "ex", ck_token(t1));
    ck_stale(a, "ex", "token=0123456789abcdef0123456789abcdef", "other");
    ck_stale(a, "nothing", ck_token(t1), "free");
    snprintf(line, sizeof(line), "UNLOCK ex token=%s", t1);
    EXPECT_REPLY(a, line, "OK ex");
    ck_stale(a, "ex", ck_token(t1), "free");

    (void)ck_lock(a, "LOCK sh mode=lease ttl=20000 shared", t2);
    (void)ck_lock(a, "LOCK sh mode=lease ttl=20000 shared", t3);
    ck_current(a, "sh", ck_token(t2));
    ck_current(a, "sh", ck_token(t3));
    snprintf(line, sizeof(line), "UNLOCK sh token=%s", t2);
    EXPECT_REPLY(a, line, "OK sh");
    ck_stale(a, "sh", ck_token(t2), "other");
    ck_current(a, "sh", ck_token(t3));

    (void)ck_lock(a, "LOCK sem mode=lease ttl=20000 limit=3", t1);
    ck_current(a, "sem", ck_token(t1));
    ck_stale(a, "sem", ck_token(t2), "other");
    close(a);
}
END_TEST

/*
 * The same token holds the record again after a later fenced grant, or
 * after a BREAK (as when a program hands a lease's token to a Redlock
 * library, which writes it back): by token it is that token's record,
 * but the fence it was told is stale.  Caught: a CHECK that reads the
 * grant's fence per token but not the counter answered CURRENT after
 * the BREAK (the BREAK raises the counter and leaves the fences hash
 * alone; a later fenced grant's write-back empties it).
 */
START_TEST(check_same_token_again)
{
    char t1[33];
    long long f1, f2;
    size_t i;
    int a, b;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &ck_opts);
    a = expect_tcp();
    b = expect_tcp();
    f1 = ck_lock(a, "LOCK job mode=lease ttl=20000 fence", t1);
    ck_current(b, "job", ck_fence(f1));
    {
        char line[200];

        snprintf(line, sizeof(line), "UNLOCK job token=%s", t1);
        EXPECT_REPLY(a, line, "OK job");
    }
    f2 = ck_lock(b, "LOCK job fence", NULL);
    EXPECT_REPLY(b, "UNLOCK job", "OK job holds=0");
    ck_assert_int_gt(f2, f1);
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET %s %s PX %s", "job", t1, "20000"), 0);
    }
    ck_current(b, "job", ck_token(t1));
    ck_stale(b, "job", ck_fence(f1), "other");

    /* After a BREAK, which raised the counter and left the fence of the grant kept. */
    EXPECT_REPLY(b, "AUTH " ADMIN_PASSWORD, "OK");
    EXPECT_PREFIX(b, "BREAK job", "OK job holders=1 fence=");
    f1 = ck_lock(a, "LOCK job mode=lease ttl=20000 fence", t1);
    ck_current(b, "job", ck_fence(f1));
    EXPECT_PREFIX(b, "BREAK job", "OK job holders=1 fence=");
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET %s %s PX %s", "job", t1, "20000"), 0);
    }
    ck_current(b, "job", ck_token(t1));
    ck_stale(b, "job", ck_fence(f1), "other");
    close(a);
    close(b);
}
END_TEST

/*
 * Shared holders: each fence is current while its holder holds the
 * name, a released one is stale though others hold it shared, and a
 * shared fence is stale once an exclusive grant without a fence holds
 * the name.  Counted: a fence names a grant only with its permit
 * (without, ERR KIND); a released permit's fence is stale once another
 * grant without a fence holds that permit.  Caught: a CHECK that, for
 * a shared name, takes any holder for the one asked about answered
 * CURRENT for the released shared holder; one that ignores permit=
 * answered CURRENT for another permit's holder with the same fence.
 */
START_TEST(check_shared_counted)
{
    long long s1, s2, p1, p2, pa = -1, pb = -1;
    char *got, wa[64], wb[64];
    int a, b, c;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &ck_opts);
    a = expect_tcp();
    b = expect_tcp();
    c = expect_tcp();
    s1 = ck_lock(a, "LOCK sh shared fence", NULL);
    s2 = ck_lock(b, "LOCK sh shared fence", NULL);
    ck_assert_int_ne(s1, s2);
    ck_current(c, "sh", ck_fence(s1));
    ck_current(c, "sh", ck_fence(s2));
    EXPECT_REPLY(a, "UNLOCK sh", "OK sh holds=0");
    ck_stale(c, "sh", ck_fence(s1), "other");
    ck_current(c, "sh", ck_fence(s2));
    EXPECT_REPLY(b, "UNLOCK sh", "OK sh holds=0");
    (void)ck_lock(a, "LOCK sh", NULL);
    ck_stale(c, "sh", ck_fence(s2), "other");
    EXPECT_REPLY(a, "UNLOCK sh", "OK sh holds=0");

    /* Two permits, each with its own counter: both told fence 1. */
    got = EXPECT_CMD(a, "LOCK sem limit=2 fence");
    ck_assert_msg(h_reply_int(got, "fence", &p1) && p1 == 1 && h_reply_int(got, "permit", &pa),
                  "'%s'", got);
    free(got);
    got = EXPECT_CMD(b, "LOCK sem limit=2 fence");
    ck_assert_msg(h_reply_int(got, "fence", &p2) && p2 == 1 && h_reply_int(got, "permit", &pb)
                  && pa + pb == 1, "'%s' after permit %lld", got, pa);
    free(got);
    snprintf(wa, sizeof(wa), "fence=1 permit=%lld", pa);
    snprintf(wb, sizeof(wb), "fence=1 permit=%lld", pb);
    got = h_cmd(c, "CHECK sem fence=1", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR KIND sem is held with limit=2: ", 35) == 0,
                  "CHECK of a counted name without permit= answered '%s'",
                  got != NULL ? got : "(nothing)");
    free(got);
    ck_current(c, "sem", wa);
    ck_current(c, "sem", wb);
    ck_stale(c, "sem", "fence=1 permit=2", "other");
    EXPECT_REPLY(a, "UNLOCK sem", "OK sem holds=0");
    ck_stale(c, "sem", wa, "other");
    ck_current(c, "sem", wb);
    (void)ck_lock(a, "LOCK sem limit=2", NULL);    /* the free permit: a's old one */
    ck_stale(c, "sem", wa, "other");
    EXPECT_REPLY(b, "UNLOCK sem", "OK sem holds=0");
    EXPECT_REPLY(a, "UNLOCK sem", "OK sem holds=0");
    ck_stale(c, "sem", wb, "free");
    close(a);
    close(b);
    close(c);
}
END_TEST

/*
 * Three masters of five restart empty under a fenced holder, and
 * another client takes the name on them without a fence: the holder's
 * fence is on two masters only, and is stale.  Caught: a CHECK that
 * answers CURRENT when any master that answered says so.
 */
START_TEST(check_masters_restarted_empty)
{
    long long f;
    size_t i;
    int a, b;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &ck_opts);
    a = expect_tcp();
    b = expect_tcp();
    f = ck_lock(a, "LOCK job mode=lease ttl=30000 fence", NULL);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_kill_master(i), 0);
        ck_assert_int_eq(h_restart_master(i), 0);
    }
    ck_assert_uint_eq(h_masters_without("job"), 3);
    expect_wait_stat("masters_counted", NMASTERS, false, 10000);
    ck_stale(b, "job", ck_fence(f), "free");
    (void)ck_lock(b, "LOCK job mode=lease ttl=30000", NULL);
    ck_stale(b, "job", ck_fence(f), "other");
    close(a);
    close(b);
}
END_TEST

/*
 * Too few masters answer: ERR NOQUORUM, as STATUS; and when those that
 * answered hold the grant on fewer than a quorum but the silent ones
 * could make one, ERR NOQUORUM too, never STALE.
 */
START_TEST(check_noquorum)
{
    long long f;
    char *got;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &ck_opts);
    a = expect_tcp();
    f = ck_lock(a, "LOCK job mode=lease ttl=30000 fence", NULL);
    ck_assert_int_eq(h_kill_master(3), 0);
    ck_assert_int_eq(h_kill_master(4), 0);
    ck_current(a, "job", ck_fence(f));
    ck_assert_int_eq(h_master_cmd(2, NULL, "DEL %s", "job"), 0);
    ck_assert_int_eq(f, 1);
    got = h_cmd(a, "CHECK job fence=1", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM 2 of 5 masters confirmed the grant, "
                  "and the ones that did not answer may hold it: ", 94) == 0,
                  "CHECK with two masters down answered '%s'", got != NULL ? got : "(nothing)");
    free(got);
    ck_assert_int_eq(h_kill_master(2), 0);
    got = h_cmd(a, "CHECK job fence=1", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM 2 of 5 masters answered, quorum is 3: ",
                                         51) == 0,
                  "CHECK with three masters down answered '%s'", got != NULL ? got : "(nothing)");
    free(got);
    close(a);
}
END_TEST

/* Bad lines answer ERR PROTO and touch no master; HELP lists CHECK. */
START_TEST(check_bad_lines)
{
    long long before;
    char *got;
    bool found = false;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &ck_opts);
    a = expect_tcp();
    before = expect_script_calls(0);
    EXPECT_REPLY(a, "CHECK job", "ERR PROTO CHECK: missing fence= or token= (the grant to "
                 "check: the fence it was told, or a lease's token)");
    EXPECT_REPLY(a, "CHECK job fence=1 token=0123456789abcdef0123456789abcdef",
                 "ERR PROTO CHECK: 'fence' and 'token' cannot go together (CHECK asks about "
                 "one grant: by its fence, or by a lease's token)");
    EXPECT_REPLY(a, "CHECK job fence=x", "ERR PROTO CHECK: bad value for 'fence': 'x' "
                 "(expected a fencing token)");
    EXPECT_REPLY(a, "CHECK job fence=0", "ERR PROTO CHECK: fence must be at least 1");
    EXPECT_REPLY(a, "CHECK job fence", "ERR PROTO CHECK: option 'fence' has no value");
    EXPECT_REPLY(a, "CHECK job token=ABC", "ERR PROTO CHECK: bad value for 'token': 'ABC' "
                 "(expected 32 lowercase hex digits)");
    EXPECT_REPLY(a, "CHECK job permit=0", "ERR PROTO CHECK: 'permit' goes with fence=");
    EXPECT_REPLY(a, "CHECK", "ERR PROTO CHECK: missing lock name");
    EXPECT_REPLY(a, "CHECK job fence=1 wait=5", "ERR PROTO CHECK: unknown option 'wait'");
    ck_assert_int_eq(expect_script_calls(0), before);
    ck_assert_int_eq(h_send(a, "HELP"), 0);
    for (;;) {
        got = h_read_line(a, CMD_MS);
        ck_assert_msg(got != NULL, "HELP ended early");
        found = found || strcmp(got, "HELP CHECK <name> fence=N [permit=I] | token=HEX") == 0;
        if (strcmp(got, "END") == 0) {
            free(got);
            break;
        }
        free(got);
    }
    ck_assert_msg(found, "HELP does not list CHECK");
    close(a);
}
END_TEST

/*
 * What a CHECK costs each master: one script call, whose commands INFO
 * commandstats counts (printed for the docs); CHECKs from many sessions
 * in one turn of the daemon's loop share one call (the batch).
 */
START_TEST(check_cost)
{
    enum { SEQ = 20, CONC = 40, NCMDS = 7 };
    static const char *const names[NCMDS] = { "evalsha", "time", "type", "get", "hget",
                                              "pttl", "exists" };
    long long calls0, calls1, cmds0, cmds1, scripts, by0[NCMDS];
    size_t k;
    int a, fds[CONC], i;
    char *got;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &ck_opts);
    a = expect_tcp();
    (void)ck_lock(a, "LOCK job mode=lease ttl=60000 fence", NULL);
    for (i = 0; i < CONC; i++) {
        fds[i] = expect_tcp();
    }
    calls0 = expect_script_calls(0);
    cmds0 = h_master_commands(0, &scripts);
    for (k = 0; k < NCMDS; k++) {
        by0[k] = h_master_calls(0, names[k]);
    }
    for (i = 0; i < SEQ; i++) {
        ck_current(a, "job", "fence=1");
    }
    calls1 = expect_script_calls(0);
    cmds1 = h_master_commands(0, &scripts);
    ck_assert_int_eq(calls1 - calls0, SEQ);
    printf("check_cost: per CHECK on master 0 (INFO commandstats):");
    for (k = 0; k < NCMDS; k++) {
        printf(" %s %.1f", names[k], (double)(h_master_calls(0, names[k]) - by0[k]) / SEQ);
    }
    printf("\n");
    printf("check_cost: %d CHECKs one by one: %lld script calls, %lld commands on master 0 "
           "(%.1f a CHECK, the call included)\n", SEQ, calls1 - calls0, cmds1 - cmds0,
           (double)(cmds1 - cmds0) / SEQ);
    for (i = 0; i < CONC; i++) {
        ck_assert_int_eq(h_send(fds[i], "CHECK job fence=1"), 0);
    }
    for (i = 0; i < CONC; i++) {
        got = h_read_line(fds[i], CMD_MS);
        ck_assert_msg(got != NULL && strncmp(got, "CURRENT job ttl=", 16) == 0,
                      "CHECK %d answered '%s'", i, got != NULL ? got : "(nothing)");
        free(got);
        close(fds[i]);
    }
    calls0 = expect_script_calls(0);
    printf("check_cost: %d CHECKs at once from %d sessions: %lld script calls on master 0\n",
           CONC, CONC, calls0 - calls1);
    ck_assert_int_lt(calls0 - calls1, CONC);
    close(a);
}
END_TEST

/*
 * The Nth ``` block (the fences' lines left out) of docs/using.md's
 * section "## Checking a grant before a write", malloc'd; the test fails
 * when it is not there.
 */
static char *
ck_doc_block(int n)
{
    char cmd[512];
    char *out;
    size_t len;
    FILE *f;

    snprintf(cmd, sizeof(cmd), "awk -v n=%d '/^## Checking a grant before a write/ { s = 1; next }"
             " s && /^## / { exit } s && /^```/ { if (on) exit; inb = !inb; if (inb && ++k == n) on = 1;"
             " next }"
             " on { print }' docs/using.md", n);
    f = popen(cmd, "r");
    ck_assert_msg(f != NULL, "cannot run awk on docs/using.md");
    out = calloc(1, 65536);
    ck_assert_ptr_nonnull(out);
    len = fread(out, 1, 65535, f);
    (void)pclose(f);
    ck_assert_msg(len > 0, "docs/using.md: block %d of 'Checking a grant before "
                  "a write' not found", n);
    return out;
}

/* a and b are the same with every run of digits taken as equal. */
static bool
ck_same_but_numbers(const char *a, const char *b)
{
    while (*a != '\0' && *b != '\0') {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            while (isdigit((unsigned char)*a)) {
                a++;
            }
            while (isdigit((unsigned char)*b)) {
                b++;
            }
            continue;
        }
        if (*a++ != *b++) {
            return false;
        }
    }
    return *a == *b;
}

/*
 * docs/using.md, "Checking a grant before a write", as written: the
 * netcat session (its printf's input sent with nc -N, the replies the
 * same but for the numbers), and the script, run with redlockctl on the
 * PATH and REDLOCKD_ADDR set, its write a command of that name on the
 * PATH: it writes while the grant holds (exit 0) and refuses once it
 * was released (exit 1).
 */
START_TEST(check_using_doc)
{
    char *block, *nl, *p, input[1024], path[512], cmd[2048], *want, *dir;
    struct expect_nc r;
    size_t k = 0;
    long long f;
    FILE *sh;
    int a, rc;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &ck_opts);
    block = ck_doc_block(1);
    ck_assert_msg(strncmp(block, "$ printf '", 10) == 0, "block 1 starts '%.40s'", block);
    nl = strchr(block, '\n');
    ck_assert_ptr_nonnull(nl);
    *nl = '\0';
    ck_assert_msg(strstr(block, "' | nc -N 127.0.0.1 7379") != NULL, "'%s'", block);
    for (p = block + 10; *p != '\'' && k + 1 < sizeof(input); p++) {
        if (p[0] == '\\' && p[1] == 'n') {
            input[k++] = '\n';
            p++;
        } else {
            input[k++] = *p;
        }
    }
    input[k] = '\0';
    want = nl + 1;
    expect_nc_tcp("-N", input, &r);
    printf("check_using_doc: the netcat session printed:\n%s", r.out);
    ck_assert_msg(ck_same_but_numbers(r.out, want), "the doc's netcat session printed %s, "
                  "the doc says '%s'", expect_nc_show(&r), want);
    free(block);

    block = ck_doc_block(2);
    ck_assert_msg(strncmp(block, "#!/bin/sh\n", 10) == 0, "block 2 starts '%.40s'", block);
    snprintf(path, sizeof(path), "%s/apply-if-current", h_dir());
    sh = fopen(path, "w");
    ck_assert_ptr_nonnull(sh);
    fputs(block, sh);
    fclose(sh);
    /* The write: a command of that name, on the PATH. */
    snprintf(cmd, sizeof(cmd), "%s/apply-the-write", h_dir());
    sh = fopen(cmd, "w");
    ck_assert_ptr_nonnull(sh);
    fputs("#!/bin/sh\necho applied\n", sh);
    fclose(sh);
    ck_assert_int_eq(chmod(cmd, 0755), 0);
    free(block);
    dir = strdup(h_redlockctl_bin());
    *strrchr(dir, '/') = '\0';
    a = expect_tcp();
    f = ck_lock(a, "LOCK report fence", NULL);
    snprintf(cmd, sizeof(cmd), "PATH='%s':'%s':\"$PATH\" REDLOCKD_ADDR=127.0.0.1:%d "
             "REDLOCKD_SOCKET= sh %s report %lld > %s.out 2>&1", dir, h_dir(), h_daemon_port(),
             path, f, path);
    rc = system(cmd);
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "the script exited %d while the grant "
                  "held", WEXITSTATUS(rc));
    snprintf(input, sizeof(input), "%s.out", path);
    block = expect_read_file(input);
    ck_assert_msg(strcmp(block, "applied\n") == 0, "the script printed '%s'", block);
    free(block);
    EXPECT_REPLY(a, "UNLOCK report", "OK report holds=0");
    rc = system(cmd);
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "the script exited %d after UNLOCK",
                  WEXITSTATUS(rc));
    block = expect_read_file(input);
    snprintf(cmd, sizeof(cmd), "refused: fence %lld of report is no longer current\n", f);
    ck_assert_msg(strcmp(block, cmd) == 0, "the script printed '%s'", block);
    free(block);
    free(dir);
    close(a);
}
END_TEST

static Suite *
check_suite(void)
{
    Suite *s = suite_create("check");

    EXPECT_ADD(s, check_fenced_grant, TEST_TIMEOUT_S);
    EXPECT_ADD(s, check_unfenced_grant_after, TEST_TIMEOUT_S);
    EXPECT_ADD(s, check_after_break, TEST_TIMEOUT_S);
    EXPECT_ADD(s, check_lease_expiry, TEST_TIMEOUT_S);
    EXPECT_ADD(s, check_token_form, TEST_TIMEOUT_S);
    EXPECT_ADD(s, check_same_token_again, TEST_TIMEOUT_S);
    EXPECT_ADD(s, check_shared_counted, TEST_TIMEOUT_S);
    EXPECT_ADD(s, check_masters_restarted_empty, TEST_TIMEOUT_S);
    EXPECT_ADD(s, check_noquorum, TEST_TIMEOUT_S);
    EXPECT_ADD(s, check_bad_lines, TEST_TIMEOUT_S);
    EXPECT_ADD(s, check_cost, TEST_TIMEOUT_S);
    EXPECT_ADD(s, check_using_doc, TEST_TIMEOUT_S);
    return s;
}

const struct runner runner_main = { "check_check", check_suite, h_suite_init, h_suite_cleanup };
