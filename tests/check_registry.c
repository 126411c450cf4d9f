/*
 * check_registry.c: the layout registry on real masters (daemon/layout.h,
 * proto/PROTOCOL.md section 9), end to end.
 *
 * Every daemon writes its member in the sorted set "<lock.key_prefix>
 * layout" of every master and prunes members whose window has ended.  A daemon does
 * not count a master whose registry shows a daemon it cannot serve
 * beside (a newer layout that no longer writes this one's records, or
 * one that went back to writing them too recently, or a member it cannot
 * read): NOQUORUM's text, the log, STATS and --reach say why, and the
 * master counts again once the member is gone.  A daemon that was paused
 * past a verdict's freshness reads the registry again before it grants.
 * Daemons older than the registry are seen by their subscription.
 *
 * The members of other daemons here are written with ZADD as such a
 * daemon writes them (the real older release beside this one is
 * tests/check_upgrade.c's).  Real redis-server masters and the real
 * daemon on free loopback ports (tests/harness.h).  CK_RUN_CASE=<test>
 * ./build/check_registry runs one test.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include <check.h>
#include <hiredis/hiredis.h>

#include "daemon/layout.h"
#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5
#define CMD_MS          3000    /* deadline for a reply that needs the masters */
#define RG_READ_MS      (2 * LAYOUT_BEAT_MS + H_PROMPT_MS)
                                /* deadline for a change in a registry to be seen, or
                                   made: the daemon reads and writes it every
                                   LAYOUT_BEAT_MS, and a beat may be under way */
#define TEST_TIMEOUT_S  40
#define REG_KEY         " layout"   /* the registry with the harness's key_prefix "" */
#define NEWER_ID        "feedfacefeedface"

/* Master i's clock, ms since the epoch (TIME). */
static long long
rg_master_ms(size_t i)
{
    redisContext *r = h_master_redis(i);
    redisReply *rep;
    long long ms = -1;

    ck_assert_msg(r != NULL, "cannot connect to master %zu", i);
    rep = redisCommand(r, "TIME");
    if (rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2) {
        ms = strtoll(rep->element[0]->str, NULL, 10) * 1000
             + strtoll(rep->element[1]->str, NULL, 10) / 1000;
    }
    freeReplyObject(rep);
    redisFree(r);
    ck_assert_msg(ms > 0, "master %zu answered no TIME", i);
    return ms;
}

/* Write the member of id on masters [from, to) as a daemon of layout l
 * that runs beside layouts from o would, since since_ms (0: since its
 * start; < 0: that many ms before now), seen now, window 600 s. */
static void
rg_write(size_t from, size_t to, const char *id, int l, int o, long long since_ms)
{
    size_t i;

    for (i = from; i < to; i++) {
        long long now = rg_master_ms(i);
        char member[160];

        snprintf(member, sizeof(member), "%s %d %d %lld 600000 0.9.0 newhost:42", id, l, o,
                 since_ms < 0 ? now + since_ms : since_ms);
        ck_assert_int_eq(h_master_cmd(i, NULL, "ZADD %s %lld %s", REG_KEY, now + 600000,
                                      member), 0);
    }
}

/* Write member as it is on masters [from, to), scored to end in 600 s. */
static void
rg_write_raw(size_t from, size_t to, const char *member)
{
    for (size_t i = from; i < to; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "ZADD %s %lld %s", REG_KEY,
                                      rg_master_ms(i) + 600000, member), 0);
    }
}

/* Master i's members (an array reply, freed by the caller). */
static redisReply *
rg_members(size_t i)
{
    redisContext *r = h_master_redis(i);
    redisReply *rep;

    ck_assert_msg(r != NULL, "cannot connect to master %zu", i);
    rep = redisCommand(r, "ZRANGE %s 0 -1", REG_KEY);
    redisFree(r);
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_ARRAY, "ZRANGE failed on master %zu",
                  i);
    return rep;
}

/* Master i's member of id (its id, a space, the rest), malloc'd, or NULL. */
static char *
rg_member(size_t i, const char *id)
{
    redisReply *rep = rg_members(i);
    size_t k, n = strlen(id);
    char *v = NULL;

    for (k = 0; k < rep->elements && v == NULL; k++) {
        if (strncmp(rep->element[k]->str, id, n) == 0 && rep->element[k]->str[n] == ' ') {
            v = strdup(rep->element[k]->str + n + 1);
        }
    }
    freeReplyObject(rep);
    return v;
}

/* Delete the members of id (or a raw member) on masters [from, to). */
static void
rg_delete(size_t from, size_t to, const char *id)
{
    for (size_t i = from; i < to; i++) {
        redisReply *rep = rg_members(i);
        size_t k, n = strlen(id);

        for (k = 0; k < rep->elements; k++) {
            const char *m = rep->element[k]->str;

            if (strcmp(m, id) == 0 || (strncmp(m, id, n) == 0 && m[n] == ' ')) {
                ck_assert_int_eq(h_master_cmd(i, NULL, "ZREM %s %s", REG_KEY, m), 0);
            }
        }
        freeReplyObject(rep);
    }
}

/* Members in master i's registry. */
static long long
rg_nmembers(size_t i)
{
    redisReply *rep = rg_members(i);
    long long n = (long long)rep->elements;

    freeReplyObject(rep);
    return n;
}

/* Lines of the daemon's log that name master i and hold text. */
static int
rg_log_count(size_t i, const char *text)
{
    char line[2048], who[128];
    FILE *f = fopen(h_daemon_log_path(), "r");
    int n = 0;

    ck_assert_msg(f != NULL, "cannot read the daemon's log");
    snprintf(who, sizeof(who), "master %s:%d: ", h_master_addr(i), h_master_port(i));
    while (fgets(line, sizeof(line), f) != NULL) {
        n += strstr(line, who) != NULL && strstr(line, text) != NULL;
    }
    fclose(f);
    return n;
}

/* The key of a refused grant is gone from every master (its clean-up) in time. */
static void
rg_wait_cleaned(const char *key)
{
    int64_t end = h_now_ms() + H_PROMPT_MS;       /* released at once */

    while (h_masters_without(key) != NMASTERS && h_now_ms() < end) {
        h_sleep_ms(20);
    }
    ck_assert_msg(h_masters_without(key) == NMASTERS, "the refused grant's key %s is left "
                  "on %zu masters", key, NMASTERS - h_masters_without(key));
}

/* The daemon's id, from STATS (malloc'd). */
static char *
rg_daemon_id(int fd)
{
    char *line, *id = NULL;

    h_send(fd, "STATS");
    while ((line = h_read_line(fd, CMD_MS)) != NULL && strcmp(line, "END") != 0) {
        if (strncmp(line, "STAT daemon_id ", 15) == 0) {
            id = strdup(line + 15);
        }
        free(line);
    }
    free(line);
    ck_assert_msg(id != NULL, "STATS has no daemon_id");
    return id;
}

/* The daemon writes its own member on every master: its id, layout 1,
 * its release, its window; a member whose window ended is pruned. */
START_TEST(registry_written_and_pruned)
{
    char *id, *v, want[64];
    int a;
    size_t i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    a = expect_tcp();
    id = rg_daemon_id(a);
    ck_assert_uint_eq(strlen(id), LAYOUT_ID_LEN);
    snprintf(want, sizeof(want), "%d %d 0 ", REDLOCKD_LAYOUT, REDLOCKD_LAYOUT_OLDEST);
    for (i = 0; i < NMASTERS; i++) {
        v = rg_member(i, id);
        ck_assert_msg(v != NULL, "master %zu has no member %s", i, id);
        ck_assert_msg(strncmp(v, want, strlen(want)) == 0
                      && strstr(v, " " REDLOCKD_VERSION " ") != NULL,
                      "master %zu's member: '%s'", i, v);
        free(v);
    }
    ck_assert_int_eq(expect_stat("master.0.daemons_seen"), 1);
    ck_assert_int_eq(expect_stat("layout"), REDLOCKD_LAYOUT);

    /* A daemon whose window has ended: pruned at the next beat. */
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "ZADD %s %lld %s", REG_KEY,
                                      rg_master_ms(i) - 1,
                                      "0000000000000001 1 1 0 1000 0.2.0 gone:1"), 0);
    }
    for (i = 0; i < NMASTERS; i++) {
        int64_t end = h_now_ms() + RG_READ_MS;

        while (rg_nmembers(i) != 1 && h_now_ms() < end) {
            h_sleep_ms(50);
        }
        ck_assert_msg(rg_nmembers(i) == 1, "master %zu kept a member whose window ended", i);
    }
    EXPECT_PREFIX(a, "TRYLOCK rw", "OK rw ");
    free(id);
    close(a);
}
END_TEST

/*
 * A newer daemon that no longer writes layout 1's records, on three
 * masters of five: no quorum, and every place says why; two masters
 * only: the three others still make a quorum; the member gone: counted
 * again.
 */
START_TEST(newer_layout_refuses)
{
    off_t at = 0;
    char *got;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    a = expect_tcp();
    rg_write(0, 2, NEWER_ID, REDLOCKD_LAYOUT + 1, REDLOCKD_LAYOUT + 1, 0);
    expect_wait_stat("master.1.layout_counted", 0, false, RG_READ_MS);
    EXPECT_PREFIX(a, "TRYLOCK two", "OK two ");
    rg_write(2, 3, NEWER_ID, REDLOCKD_LAYOUT + 1, REDLOCKD_LAYOUT + 1, 0);
    expect_wait_stat("master.2.layout_counted", 0, false, RG_READ_MS);
    got = h_cmd(a, "TRYLOCK three", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM 5 of 5 masters answered, but 3 "
                                         "of them are not counted by their layout registry",
                                         81) == 0
                  && strstr(got, NEWER_ID) != NULL && strstr(got, "newhost:42") != NULL
                  && strstr(got, "upgrade this daemon") != NULL,
                  "TRYLOCK beside a newer layout on 3 masters answered '%s'",
                  got ? got : "(nothing)");
    free(got);
    rg_wait_cleaned("three");
    ck_assert_int_eq(expect_stat("master.2.layout_refusals") >= 1, 1);
    ck_assert_int_eq(expect_stat("master.2.layout_highest"), REDLOCKD_LAYOUT + 1);
    ck_assert_int_eq(expect_stat("master.3.layout_counted"), 1);
    ck_assert_msg(h_wait_log(at, "not counted: its layout registry shows daemon " NEWER_ID,
                             H_PROMPT_MS), "the log does not say why");

    /* Refused at every read, warned once (the reason's numbers change each read). */
    expect_wait_stat("master.2.layout_refusals", 4, true, 4 * LAYOUT_BEAT_MS + H_PROMPT_MS);
    ck_assert_int_eq(rg_log_count(2, "not counted: its layout registry"), 1);

    rg_delete(0, 3, NEWER_ID);
    expect_wait_stat("master.0.layout_counted", 1, false, RG_READ_MS);
    expect_wait_stat("master.2.layout_counted", 1, false, RG_READ_MS);
    EXPECT_PREFIX(a, "TRYLOCK three", "OK three ");
    ck_assert_msg(h_wait_log(at, "counted again", H_PROMPT_MS),
                  "the log does not say it is over");
    close(a);
}
END_TEST

/*
 * A newer daemon that still writes layout 1's records is served beside
 * (expand); one that went back to writing them a moment ago is not,
 * until its earlier grants have ended (its since plus its window).
 */
START_TEST(newer_layout_beside)
{
    char *got;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    a = expect_tcp();
    rg_write(0, NMASTERS, NEWER_ID, REDLOCKD_LAYOUT + 1, REDLOCKD_LAYOUT, 0);
    expect_wait_stat("master.4.layout_highest", REDLOCKD_LAYOUT + 1, false, RG_READ_MS);
    EXPECT_PREFIX(a, "TRYLOCK ex", "OK ex ");
    rg_write(0, NMASTERS, NEWER_ID, REDLOCKD_LAYOUT + 1, REDLOCKD_LAYOUT, -1000);
    expect_wait_stat("master.4.layout_counted", 0, false, RG_READ_MS);
    got = h_cmd(a, "TRYLOCK ex2", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM ", 13) == 0
                  && strstr(got, "records again only since") != NULL,
                  "TRYLOCK beside a daemon that writes our records again only since 1 s "
                  "answered '%s'", got ? got : "(nothing)");
    free(got);
    close(a);
}
END_TEST

/* A member nobody can read refuses that master, naming it and the key. */
START_TEST(unreadable_member_refuses)
{
    char *got;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    a = expect_tcp();
    rg_write_raw(0, 3, "junk hello world");
    expect_wait_stat("master.2.layout_counted", 0, false, RG_READ_MS);
    got = h_cmd(a, "TRYLOCK j", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM ", 13) == 0
                  && strstr(got, "id 'junk', read as 'junk hello world'") != NULL
                  && strstr(got, "' layout'") != NULL && strstr(got, "ZREM") != NULL,
                  "TRYLOCK with an unreadable registry member answered '%s'",
                  got ? got : "(nothing)");
    free(got);
    rg_delete(0, 3, "junk hello world");
    expect_wait_stat("master.2.layout_counted", 1, false, RG_READ_MS);
    EXPECT_PREFIX(a, "TRYLOCK j", "OK j ");
    close(a);
}
END_TEST

/*
 * The attack on the freshness: the daemon is paused (SIGSTOP) longer than
 * a verdict counts, a daemon that stopped writing layout 1's records
 * appears meanwhile, and a TRYLOCK waits in the socket.  On waking, the
 * daemon must not grant on its old verdict: it reads the registry again.
 * Two things keep it from granting: the verdict has gone stale (a round
 * counts a master only when its registry was read less than
 * LAYOUT_FRESH_MS before the round), and each answer is judged on the
 * verdict of the moment it is read (the heartbeat sent on waking is
 * answered first on the same link); without both, the TRYLOCK is granted.
 */
START_TEST(paused_daemon_reads_again)
{
    char *got;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    a = expect_tcp();
    EXPECT_PREFIX(a, "TRYLOCK before", "OK before ");
    ck_assert_int_eq(h_signal_daemon(SIGSTOP), 0);
    rg_write(0, NMASTERS, NEWER_ID, REDLOCKD_LAYOUT + 1, REDLOCKD_LAYOUT + 1, 0);
    ck_assert_int_eq(h_send(a, "TRYLOCK after"), 0);
    h_sleep_ms(LAYOUT_FRESH_MS + 300);      /* the pause itself: the fault */
    ck_assert_int_eq(h_signal_daemon(SIGCONT), 0);
    got = h_read_line(a, CMD_MS);
    /* Refused, with a reason: the stale read, or the newer daemon read since. */
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM ", 13) == 0
                  && strstr(got, "not counted by their layout registry") != NULL
                  && (strstr(got, "was last read") != NULL || strstr(got, NEWER_ID) != NULL),
                  "the TRYLOCK sent during the pause answered '%s'", got ? got : "(nothing)");
    free(got);
    rg_wait_cleaned("after");
    close(a);
}
END_TEST

/*
 * A daemon older than the registry (it subscribes the old sentinel
 * channel) is entered as "legacy" by whoever sees it, with layout 1: the
 * daemon serves beside it.
 */
START_TEST(legacy_daemon_entered)
{
    redisContext *sub;
    redisReply *rep;
    char *v;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    a = expect_tcp();
    sub = h_master_redis(1);
    ck_assert_msg(sub != NULL, "cannot connect to master 1");
    rep = redisCommand(sub, "SUBSCRIBE %s", LAYOUT_LEGACY_CHANNEL);
    ck_assert_msg(rep != NULL, "SUBSCRIBE failed");
    freeReplyObject(rep);
    expect_wait_stat("master.1.legacy_seen", 1, false, RG_READ_MS);
    v = rg_member(1, LAYOUT_LEGACY_FIELD);
    ck_assert_msg(v != NULL && strcmp(v, "1 1 0 172800000 <0.2.0 -") == 0,
                  "master 1's legacy member: '%s'", v ? v : "(none)");
    free(v);
    ck_assert_int_eq(expect_stat("master.0.legacy_seen"), 0);
    ck_assert_int_eq(expect_stat("master.1.layout_counted"), 1);
    EXPECT_PREFIX(a, "TRYLOCK leg", "OK leg ");
    redisFree(sub);
    close(a);
}
END_TEST

static bool
rg_no_legacy(void *arg)
{
    (void)arg;
    return expect_stat("master.0.legacy_seen") == 0;
}

/*
 * Whatever lock.key_prefix is, this daemon's own subscription is never
 * the channel by which daemons older than the registry are seen: with
 * the prefix "redlockd", no legacy member appears.
 */
START_TEST(prefix_never_legacy)
{
    struct h_daemon_opts o = expect_opts;

    o.key_prefix = "redlockd";
    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    expect_wait_stat("master.0.daemons_seen", 1, false, RG_READ_MS);
    ck_assert_msg(h_holds_for(rg_no_legacy, NULL, 2500, 100),
                  "a daemon with lock.key_prefix \"redlockd\" took itself for a legacy one");
    ck_assert_int_eq(h_master_numsub(0, "redlockd" LAYOUT_SENTINEL_SUFFIX), 1);
    ck_assert_int_eq(h_master_numsub(0, LAYOUT_LEGACY_CHANNEL), 0);
}
END_TEST

/* Run redlockd --reach on the current daemon's config; its output in out. */
static int
rg_reach(char *out, size_t size)
{
    char path[512];
    const char *bin = getenv("REDLOCKD_BIN");
    const char *argv[5];
    size_t len = 0;
    pid_t pid;
    int status;
    FILE *f;

    snprintf(path, sizeof(path), "%s/reach.out", h_dir());
    argv[0] = bin != NULL ? bin : "./build/redlockd";
    argv[1] = "--reach";
    argv[2] = "-c";
    argv[3] = h_daemon_conf_path();
    argv[4] = NULL;
    pid = h_spawn(argv, path);
    ck_assert_msg(pid > 0, "cannot start redlockd --reach");
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    f = fopen(path, "r");
    ck_assert_msg(f != NULL, "no output of --reach");
    len = fread(out, 1, size - 1, f);
    out[len] = '\0';
    fclose(f);
    return h_decode_status(status);
}

/*
 * --reach, before a start: every master's line and the verdict, without
 * writing a member of its own; refusing masters and a stopped one named,
 * with exit 69 when no quorum counts.
 */
START_TEST(reach_reports)
{
    char out[8192];
    int rc;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
    rc = rg_reach(out, sizeof(out));
    ck_assert_msg(rc == 0 && strstr(out, "5 of 5 masters count for layout") != NULL
                  && strstr(out, "up, counted; its registry: 1 daemon, layouts 1 to 1")
                  != NULL, "--reach exited %d:\n%s", rc, out);
    ck_assert_int_eq(rg_nmembers(0), 1);      /* the probe wrote nothing */
    rg_write(0, 2, NEWER_ID, REDLOCKD_LAYOUT + 1, REDLOCKD_LAYOUT + 1, 0);
    ck_assert_int_eq(h_kill_master(4), 0);
    rc = rg_reach(out, sizeof(out));
    ck_assert_msg(rc == 69 && strstr(out, "2 of 5 masters count for layout") != NULL
                  && strstr(out, "could not grant") != NULL
                  && strstr(out, "no longer writes layout") != NULL
                  && strstr(out, ": down (") != NULL, "--reach exited %d:\n%s", rc, out);
}
END_TEST

static Suite *
registry_suite(void)
{
    Suite *s = suite_create("registry");

    EXPECT_ADD(s, registry_written_and_pruned, TEST_TIMEOUT_S);
    EXPECT_ADD(s, newer_layout_refuses, TEST_TIMEOUT_S);
    EXPECT_ADD(s, newer_layout_beside, TEST_TIMEOUT_S);
    EXPECT_ADD(s, unreadable_member_refuses, TEST_TIMEOUT_S);
    EXPECT_ADD(s, paused_daemon_reads_again, TEST_TIMEOUT_S);
    EXPECT_ADD(s, legacy_daemon_entered, TEST_TIMEOUT_S);
    EXPECT_ADD(s, reach_reports, TEST_TIMEOUT_S);
    EXPECT_ADD(s, prefix_never_legacy, TEST_TIMEOUT_S);
    return s;
}

const struct runner runner_main = {
    "check_registry", registry_suite, h_suite_init, h_suite_cleanup
};
