/*
 * check_masters.c: what the daemon learns from the masters at connect.
 *
 * Real redis-server masters and the real daemon on free loopback ports
 * (tests/harness.h).  One server listed twice in masters (two spellings
 * of one address) counts once; masters that persist every write
 * (appendonly yes, appendfsync always) are not put in restart
 * quarantine, and one whose appendfsync cannot be read is, with the
 * reason logged; a quarantine that applies says so in ERR NOQUORUM and
 * ends at once when a reload turns lock.restart_quarantine off; a master
 * whose maxmemory-policy may evict lock keys is warned about at every
 * connect.  STATS and /metrics count the duplicates and the evicting
 * masters, and name them.  The settings are those of conf/redlockd.yml where they
 * matter here: lock.restart_quarantine on, lock.max_ttl_ms one hour.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define LOG_MS          3000    /* deadline for a log line */
#define TEST_TIMEOUT_S  40
#define PROD_MAX_TTL_MS 3600000 /* lock.max_ttl_ms of conf/redlockd.yml */
#define PROD_TTL_MS     30000   /* lock.default_ttl_ms of conf/redlockd.yml */

/* The settings of conf/redlockd.yml that decide the quarantine. */
static const struct h_daemon_opts ms_prod = {
    .restart_quarantine = true,
    .max_ttl_ms = PROD_MAX_TTL_MS,
    .default_ttl_ms = PROD_TTL_MS,
    .log_level = "info",
};

static void
ms_begin(void)
{
    ck_assert_msg(h_begin(tcase_name()) == 0, "cannot create the test directory");
}

static void
ms_teardown(void)
{
    h_end();
}

static long long
ms_stat(const char *name)
{
    long long v = -1;

    ck_assert_msg(h_stat_once(name, &v) == 0, "STATS has no %s", name);
    return v;
}

/* The daemon's /metrics now (caller frees); the daemon must have metrics_port. */
static char *
ms_scrape(int port)
{
    char *body = h_metrics_scrape(port);

    ck_assert_msg(body != NULL, "GET /metrics failed (the reason is above)");
    return body;
}

/*
 * The value of family's sample for master i, whose address in the
 * config is addr ("127.0.0.1:6379"); the sample must be there.
 */
static long long
ms_master_metric(const char *body, const char *family, size_t i, const char *addr)
{
    char series[256];
    long long v;

    snprintf(series, sizeof(series), "%s{master=\"%zu\",addr=\"%s\"}", family, i, addr);
    v = h_metric_int(body, series);
    ck_assert_msg(v >= 0, "no sample '%s' in /metrics", series);
    return v;
}

/* The same for master i started by the harness (its address 127.0.0.1:<port>). */
static long long
ms_started_metric(const char *body, const char *family, size_t i)
{
    char addr[64];

    snprintf(addr, sizeof(addr), "127.0.0.1:%d", h_master_port(i));
    return ms_master_metric(body, family, i, addr);
}

/* Count the log lines (from offset 0) that contain text. */
static size_t
ms_log_count(const char *text)
{
    FILE *f = fopen(h_daemon_log_path(), "r");
    char line[4096];
    size_t n = 0;

    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        n += strstr(line, text) != NULL;
    }
    fclose(f);
    return n;
}

/* For h_wait_until: the log has at least *(size_t *)arg lines with ms_wait_text. */
static const char *ms_wait_text;

static bool
ms_cond_log_count(void *arg)
{
    return ms_log_count(ms_wait_text) >= *(size_t *)arg;
}

/*
 * Rewrite the daemon's config with "from" replaced by "to" (once), send
 * SIGHUP, and wait for the reload to be done.
 */
static void
ms_reload_with(const char *from, const char *to)
{
    FILE *f = fopen(h_daemon_conf_path(), "r");
    char text[8192], out[8192], *at;
    size_t len;
    off_t mark;

    ck_assert_msg(f != NULL, "cannot read the daemon's config");
    len = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[len] = '\0';
    at = strstr(text, from);
    ck_assert_msg(at != NULL, "the config has no '%s'", from);
    snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    f = fopen(h_daemon_conf_path(), "w");
    ck_assert_msg(f != NULL && fputs(out, f) >= 0 && fclose(f) == 0,
                  "cannot write the daemon's config");
    mark = h_log_size();
    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    ck_assert_msg(h_wait_log(mark, "reload: done", LOG_MS), "the reload was not done");
}

/*
 * The same server listed twice ("127.0.0.1:A" and "localhost:A") with
 * the third master B paused: only one Redis answers, so no quorum of
 * the three entries.  Counting the second spelling would let one Redis
 * grant the lock alone.  NOQUORUM, STATS, the log and /metrics
 * (redlockd_masters_duplicate, redlockd_master_duplicate) name it.
 * The duplicate is never sent a script.
 */
START_TEST(duplicate_counts_once)
{
    struct h_daemon_opts o = { .expect_masters_up = 2, .log_level = "info" };
    const char *extra[2];
    char again[64], line[512], text[160];
    char *got, *body;
    long long calls, after;
    int a, i;

    ms_begin();
    o.metrics_port = h_free_port();
    ck_assert_int_gt(o.metrics_port, 0);
    ck_assert_msg(h_start_masters(2) == 0, "the masters did not start");
    snprintf(again, sizeof(again), "localhost:%d", h_master_port(0));
    extra[0] = again;
    extra[1] = NULL;
    o.extra_masters = extra;
    ck_assert_int_eq(h_signal_master(1, SIGSTOP), 0);
    ck_assert_msg(h_start_daemon(&o) == 0, "redlockd did not start (log above)");
    a = expect_tcp();
    got = h_cmd(a, "LOCK dup wait=0", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM ", 13) == 0,
                  "one Redis listed twice granted the lock alone: '%s'",
                  got != NULL ? got : "(nothing)");
    snprintf(text, sizeof(text), "%s same server as 127.0.0.1:%d (run_id ", again,
             h_master_port(0));
    ck_assert_msg(strstr(got, text) != NULL && strstr(got, "not asked") != NULL,
                  "the NOQUORUM does not name the duplicate: '%s'", got);
    ck_assert_msg(strstr(got, "1 of 3 masters answered; 1 more is the same server") != NULL
                  && strstr(got, "not asked") != NULL,
                  "the NOQUORUM does not count the answers truthfully: '%s'", got);
    free(got);
    ck_assert_int_eq(ms_stat("masters_duplicate"), 1);
    ck_assert_int_eq(ms_stat("master.2.duplicate_of"), 0);
    ck_assert_int_eq(ms_stat("master.0.duplicate_of"), -1);
    ck_assert_msg(h_log_find(0, "is the same Redis server as", line, sizeof(line)),
                  "the log does not say that two entries are one server");
    snprintf(text, sizeof(text), "127.0.0.1:%d (entry 0)", h_master_port(0));
    ck_assert_msg(strstr(line, again) != NULL && strstr(line, text) != NULL,
                  "the log line does not name both entries: '%s'", line);
    /* /metrics says so too: one duplicate, and which entry it is. */
    body = ms_scrape(o.metrics_port);
    ck_assert_int_eq(h_metric_int(body, "redlockd_masters_duplicate"), 1);
    ck_assert_int_eq(ms_master_metric(body, "redlockd_master_duplicate", 2, again), 1);
    ck_assert_int_eq(ms_started_metric(body, "redlockd_master_duplicate", 0), 0);
    ck_assert_int_eq(ms_started_metric(body, "redlockd_master_duplicate", 1), 0);
    free(body);

    /* B runs again: two servers of three answer, a quorum. */
    ck_assert_int_eq(h_signal_master(1, SIGCONT), 0);
    ck_assert_msg(h_wait_stat("masters_up", 3, false, 8000, NULL), "B did not come back");
    /*
     * The duplicate is not asked: asked too, A would run each script
     * twice, and a release that ran first on the duplicate's connection
     * left A's own release finding nothing (LOST at UNLOCK).
     */
    calls = h_master_calls(0, "evalsha");
    ck_assert_msg(calls >= 0, "INFO commandstats on A failed");
    for (i = 0; i < 20; i++) {
        EXPECT_PREFIX(a, "LOCK dup wait=0", "OK dup ");
        EXPECT_REPLY(a, "UNLOCK dup", "OK dup holds=0");
    }
    after = h_master_calls(0, "evalsha");
    ck_assert_msg(after - calls == 40, "A ran %lld scripts for 20 LOCK/UNLOCK pairs, not 40: "
                  "the server listed twice was asked twice", after - calls);
    close(a);
}
END_TEST

/*
 * Fresh masters that fsync every write before answering lose no lock in
 * a restart: with the production settings, a new cluster grants at once.
 */
START_TEST(aof_always_not_quarantined)
{
    int a;

    ms_begin();
    ck_assert_msg(h_start_masters_aof(NMASTERS) == 0, "the masters did not start");
    ck_assert_msg(h_start_daemon(&ms_prod) == 0, "redlockd did not start (log above)");
    a = expect_tcp();
    EXPECT_PREFIX(a, "TRYLOCK fresh", "OK fresh ");
    EXPECT_REPLY(a, "UNLOCK fresh", "OK fresh holds=0");
    close(a);
    ck_assert_int_eq(ms_stat("masters_quarantined"), 0);
    ck_assert_int_eq(ms_stat("master.0.quarantine_ms"), 0);
    ck_assert_msg(h_log_find(0, "persists every write", NULL, 0),
                  "the log does not say why the fresh masters are not quarantined");
}
END_TEST

/*
 * The same masters, but CONFIG is refused (an ACL without +config):
 * appendfsync cannot be read, so the quarantine stays, and the log says
 * that this is why.  The link itself stays up.
 */
START_TEST(appendfsync_unreadable_keeps_quarantine)
{
    char *got;
    size_t i;
    int a;

    ms_begin();
    ck_assert_msg(h_start_masters_aof(NMASTERS) == 0, "the masters did not start");
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "ACL SETUSER default -config"), 0);
    }
    ck_assert_msg(h_start_daemon(&ms_prod) == 0, "redlockd did not start (log above)");
    ck_assert_int_eq(ms_stat("masters_up"), NMASTERS);
    ck_assert_int_eq(ms_stat("masters_quarantined"), NMASTERS);
    ck_assert_msg(h_log_find(0, "appendfsync cannot be read", NULL, 0),
                  "the log does not say that appendfsync cannot be read");
    ck_assert_msg(h_log_find(0, "(CONFIG GET refused): quarantined", NULL, 0),
                  "the quarantine's log line does not give the refusal as its reason");
    a = expect_tcp();
    got = h_cmd(a, "TRYLOCK acl", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM ", 13) == 0,
                  "TRYLOCK answered '%s'", got != NULL ? got : "(nothing)");
    free(got);
    close(a);
}
END_TEST

/*
 * Fresh masters without persistence, production settings: quarantined,
 * and ERR NOQUORUM says that all five answered, that the quarantine is
 * why they do not count, and how to end it; a reload that turns the
 * quarantine off ends it at once.
 */
START_TEST(quarantine_says_why_and_reload_ends_it)
{
    char *got;
    int a;

    ms_begin();
    ck_assert_msg(h_start_masters(NMASTERS) == 0, "the masters did not start");
    ck_assert_msg(h_start_daemon(&ms_prod) == 0, "redlockd did not start (log above)");
    ck_assert_int_eq(ms_stat("masters_quarantined"), NMASTERS);
    a = expect_tcp();
    got = h_cmd(a, "TRYLOCK nq", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM ", 13) == 0,
                  "TRYLOCK answered '%s'", got != NULL ? got : "(nothing)");
    ck_assert_msg(strstr(got, "5 of 5 masters answered") != NULL
                  && strstr(got, "5 of them are in restart quarantine (until ") != NULL
                  && strstr(got, " ms left") != NULL
                  && strstr(got, "restart_quarantine: false") != NULL,
                  "the NOQUORUM does not tell the truth about the quarantine: '%s'", got);
    free(got);

    ms_reload_with("restart_quarantine: true", "restart_quarantine: false");
    ck_assert_int_eq(ms_stat("masters_quarantined"), 0);
    ck_assert_msg(h_log_find(0, "restart quarantine of 5 masters ends at once", NULL, 0),
                  "the end of the quarantines by the reload was not logged");
    EXPECT_PREFIX(a, "TRYLOCK nq", "OK nq ");
    EXPECT_REPLY(a, "UNLOCK nq", "OK nq holds=0");
    close(a);
}
END_TEST

/*
 * maxmemory with allkeys-lru may evict lock keys: warned, naming the
 * master, its maxmemory and its policy, at every connect, and counted
 * in STATS and /metrics (redlockd_masters_evicting,
 * redlockd_master_evicting_policy) until a reconnect finds it fixed;
 * noeviction with a maxmemory is fine and not warned about.
 */
START_TEST(evicting_policy_warned)
{
    struct h_daemon_opts o = { .metrics_port = h_free_port() };
    char text[160], line[512], *body;
    size_t want;

    ms_begin();
    ck_assert_int_gt(o.metrics_port, 0);
    ck_assert_msg(h_start_masters(3) == 0, "the masters did not start");
    ck_assert_int_eq(h_master_cmd(1, NULL, "CONFIG SET maxmemory 100mb"), 0);
    ck_assert_int_eq(h_master_cmd(1, NULL, "CONFIG SET maxmemory-policy allkeys-lru"), 0);
    ck_assert_int_eq(h_master_cmd(2, NULL, "CONFIG SET maxmemory 100mb"), 0);
    ck_assert_int_eq(h_master_cmd(2, NULL, "CONFIG SET maxmemory-policy noeviction"), 0);
    ck_assert_msg(h_start_daemon(&o) == 0, "redlockd did not start (log above)");

    snprintf(text, sizeof(text), "master 127.0.0.1:%d: maxmemory is", h_master_port(1));
    ck_assert_msg(h_log_find(0, text, line, sizeof(line)),
                  "no warning about master 1's evicting policy");
    ck_assert_msg(strstr(line, "104857600 bytes") != NULL
                  && strstr(line, "allkeys-lru") != NULL,
                  "the warning does not give the maxmemory and the policy: '%s'", line);
    ck_assert_int_eq(ms_stat("masters_evicting"), 1);
    ck_assert_int_eq(ms_stat("master.1.evicting_policy"), 1);
    ck_assert_int_eq(ms_stat("master.0.evicting_policy"), 0);
    ck_assert_int_eq(ms_stat("master.2.evicting_policy"), 0);
    body = ms_scrape(o.metrics_port);
    ck_assert_int_eq(h_metric_int(body, "redlockd_masters_evicting"), 1);
    ck_assert_int_eq(ms_started_metric(body, "redlockd_master_evicting_policy", 1), 1);
    ck_assert_int_eq(ms_started_metric(body, "redlockd_master_evicting_policy", 0), 0);
    ck_assert_int_eq(ms_started_metric(body, "redlockd_master_evicting_policy", 2), 0);
    free(body);
    snprintf(text, sizeof(text), "master 127.0.0.1:%d: maxmemory", h_master_port(2));
    ck_assert_msg(!h_log_find(0, text, NULL, 0), "noeviction was warned about");

    /* A reconnect warns again; once the policy is fixed, no more. */
    snprintf(text, sizeof(text), "master 127.0.0.1:%d: maxmemory is", h_master_port(1));
    ck_assert_int_eq(h_master_cmd(1, NULL, "CLIENT KILL TYPE normal"), 0);
    ms_wait_text = text;
    want = 2;
    ck_assert_msg(h_wait_until(ms_cond_log_count, &want, 8000),
                  "the reconnect did not warn again");
    ck_assert_int_eq(h_master_cmd(1, NULL, "CONFIG SET maxmemory-policy noeviction"), 0);
    ck_assert_int_eq(h_master_cmd(1, NULL, "CLIENT KILL TYPE normal"), 0);
    ck_assert_msg(h_wait_stat("masters_evicting", 0, false, 8000, NULL),
                  "a reconnect after the fix still counts master 1 as evicting");
    ck_assert_int_eq(ms_log_count(text), 2);
    body = ms_scrape(o.metrics_port);
    ck_assert_int_eq(h_metric_int(body, "redlockd_masters_evicting"), 0);
    ck_assert_int_eq(ms_started_metric(body, "redlockd_master_evicting_policy", 1), 0);
    free(body);
}
END_TEST

/*
 * The ACL user docs/production.md gives, applied word for word from it
 * to every master, and the settings it goes with: every kind of hold
 * (exclusive with a fence, shared, counted, a waiter woken by a release
 * announcement, STATUS, lease mode by token) works through it, and no
 * master logged an ACL refusal.
 */
START_TEST(readme_acl_covers_every_kind)
{
    static const struct h_daemon_opts acl = {
        .redis_username = "redlockd",
        .redis_password = "MASTERS-PASSWORD",
        .key_prefix = "redlock:",
    };
    char rule[2048], *got, token[64];
    FILE *f;
    size_t i;
    int a, b;

    ms_begin();
    f = fopen("docs/production.md", "r");
    ck_assert_msg(f != NULL, "docs/production.md not found (run from the repository root)");
    rule[0] = '\0';
    while (fgets(rule, sizeof(rule), f) != NULL && strncmp(rule, "    user redlockd on ", 21) != 0) {
    }
    fclose(f);
    ck_assert_msg(strncmp(rule, "    user redlockd on ", 21) == 0,
                  "docs/production.md has no line '    user redlockd on ...'");
    rule[strcspn(rule, "\n")] = '\0';
    ck_assert_msg(strchr(rule, '%') == NULL, "the ACL line has a '%%'");
    ck_assert_msg(h_start_masters(NMASTERS) == 0, "the masters did not start");
    for (i = 0; i < NMASTERS; i++) {
        char cmd[2100];

        snprintf(cmd, sizeof(cmd), "ACL SETUSER %s", rule + 9);     /* after "    user " */
        ck_assert_msg(h_master_cmd(i, NULL, cmd) == 0, "master %zu refused '%s'", i, cmd);
    }
    ck_assert_msg(h_start_daemon(&acl) == 0, "redlockd did not start (log above)");
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_PREFIX(a, "LOCK x fence", "OK x validity=");
    EXPECT_PREFIX(a, "STATUS x", "HELD x ");
    EXPECT_REPLY(a, "UNLOCK x", "OK x holds=0");
    EXPECT_PREFIX(a, "LOCK r shared", "OK r validity=");
    EXPECT_PREFIX(b, "LOCK r shared fence", "OK r validity=");
    EXPECT_PREFIX(a, "STATUS r", "HELD r ");
    EXPECT_REPLY(a, "UNLOCK r", "OK r holds=0");
    EXPECT_REPLY(b, "UNLOCK r", "OK r holds=0");
    EXPECT_PREFIX(a, "LOCK c limit=1 fence", "OK c validity=");
    /* b waits; a's release is announced on the channel and hands c over. */
    ck_assert_int_eq(h_send(b, "LOCK c limit=1 wait=5000"), 0);
    ck_assert(h_quiet(b, 300));
    EXPECT_REPLY(a, "UNLOCK c", "OK c holds=0");
    got = h_read_line(b, 5000);
    ck_assert_msg(got != NULL && strncmp(got, "OK c validity=", 14) == 0,
                  "the waiter got '%s'", got != NULL ? got : "(nothing)");
    free(got);
    EXPECT_PREFIX(b, "STATUS c", "HELD c ");
    EXPECT_REPLY(b, "UNLOCK c", "OK c holds=0");
    got = h_cmd(a, "LOCK l limit=2 mode=lease ttl=5000", CMD_MS);
    ck_assert_msg(got != NULL && h_reply_field(got, "token", token, sizeof(token)),
                  "lease-mode LOCK answered '%s'", got != NULL ? got : "(nothing)");
    free(got);
    snprintf(rule, sizeof(rule), "EXTEND l token=%s ttl=5000", token);
    EXPECT_PREFIX(a, rule, "OK l validity=");
    snprintf(rule, sizeof(rule), "UNLOCK l token=%s", token);
    EXPECT_REPLY(a, rule, "OK l");
    close(a);
    close(b);
    ck_assert_msg(!h_log_find(0, "NOPERM", rule, sizeof(rule)),
                  "a master refused a command: %s", rule);
}
END_TEST

static Suite *
masters_suite(void)
{
    Suite *s = suite_create("redlockd and what the masters say about themselves");
    TCase *tc = tcase_create("masters");

    tcase_add_checked_fixture(tc, NULL, ms_teardown);
    if (getenv("CK_DEFAULT_TIMEOUT") == NULL) {
        tcase_set_timeout(tc, TEST_TIMEOUT_S);
    }
    tcase_add_test(tc, duplicate_counts_once);
    tcase_add_test(tc, aof_always_not_quarantined);
    tcase_add_test(tc, appendfsync_unreadable_keeps_quarantine);
    tcase_add_test(tc, quarantine_says_why_and_reload_ends_it);
    tcase_add_test(tc, evicting_policy_warned);
    tcase_add_test(tc, readme_acl_covers_every_kind);
    suite_add_tcase(s, tc);
    return s;
}

const struct runner runner_main = { "check_masters", masters_suite, h_suite_init, h_suite_cleanup };
