/*
 * check_upgrade.c: the last release and this build serving the same
 * names on the same masters at once, as they do for the minutes or days
 * of a rolling upgrade.
 *
 * Five real redis-server masters; daemon 0 is the last released build
 * ($REDLOCKD_PREV_BIN: make builds it from the repository's history,
 * build/release-<commit>/redlockd, tests/build-release.sh), daemon 1 is
 * this build ($REDLOCKD_BIN).  The harness writes the old daemon's config
 * without the keys it does not know (h_daemon_opts.known_keys_only; its
 * own case shows a key this build knows left out for the release and
 * kept for this build).
 * Every case runs both ways, the old daemon first and then the new one
 * first, each way on names of its own:
 *
 *   - an exclusive hold through one is refused through the other (BUSY
 *     to TRYLOCK, TIMEOUT to LOCK wait=0), and the name is free to both
 *     once released;
 *   - a shared hold refuses an exclusive one through the other daemon
 *     and admits a shared one; an exclusive hold refuses a shared one;
 *   - a counted name with limit=1: a second holder refused through the
 *     other daemon; with limit=2, one holder through each daemon on two
 *     different permits and a third refused through both;
 *   - fences: a fenced grant through one daemon after a grant through
 *     the other carries a larger fence (exclusive, shared and counted);
 *   - BREAK through one daemon ends a hold made through the other (its
 *     holder told "! LOST <name> reason=broken"), and the name is
 *     granted at once, with a fence above the BREAK's;
 *   - UNLOCK through one daemon hands the name to a LOCK waiting
 *     through the other;
 *   - this build enters the release, which has no layout registry, as
 *     "legacy" on every master and counts them all;
 *   - this build's redlockctl status claims the daemon renews a session's
 *     lock only where this build's daemon says so (renewer=watchdog); the
 *     release, which never says, gets the wording without the claim.
 *
 * A build whose keys differ from the release's fails these cases: with
 * the build from just before the keys of shared and counted holds moved
 * in place of the release (make check-upgrade UPGRADE_FROM=371492b),
 * the shared, counted and BREAK cases report double grants.
 *
 * Waiting is for a condition with a deadline; "still waiting" is
 * nothing read for QUIET_MS (h_quiet).  Each test is a test case of its
 * own: CK_RUN_CASE=<test> ./build/check_upgrade runs one.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/wait.h>

#include <check.h>

#include "daemon/layout.h"
#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5       /* masters per test */
#define PREFIX          "up:"   /* lock.key_prefix of both daemons */
#define ADMIN           "upgrade-admin" /* auth.admin_password (BREAK over TCP) */
#define CMD_MS          3000    /* deadline for a reply that needs the masters */
#define BREAK_MS        8000    /* a BREAK waits three round deadlines more */
#define WAKE_MS         5000    /* a hand-over or a LOST across daemons: far below the ttl */
#define QUIET_MS        400     /* a waiter that must still be waiting: nothing for this long */
#define UP_READ_MS      (2 * LAYOUT_BEAT_MS + H_PROMPT_MS)
                                /* deadline for the registry to show a change: a beat
                                   may be under way, then one more, on a loaded machine */
#define TTL             "ttl=20000"
#define OLD             0       /* daemon index of the last release */
#define NEW             1       /* and of this build */

static const char *up_names[2] = { "the old build", "this build" };

/* The last release's daemon, which must be there. */
static const char *
up_prev_bin(void)
{
    const char *bin = getenv("REDLOCKD_PREV_BIN");

    ck_assert_msg(bin != NULL && bin[0] != '\0' && access(bin, X_OK) == 0,
                  "no daemon of the last release: set REDLOCKD_PREV_BIN (make check-upgrade "
                  "builds build/release-<commit>/redlockd and sets it), got '%s'",
                  bin != NULL ? bin : "(unset)");
    return bin;
}

/* The daemons' options: lock.key_prefix PREFIX and auth.admin_password ADMIN. */
static const struct h_daemon_opts up_opts = {
    .retry_delay_ms = 100,
    .key_prefix = PREFIX,
    .admin_password = ADMIN,
    .default_ttl_ms = 20000,
};

/*
 * Start of a test: five masters, daemon OLD of the last release and
 * daemon NEW of this build, both with up_opts.
 */
#define UP_SETUP() EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &up_opts, \
                                .builds = (const char *const[]){ up_prev_bin(), NULL })

/* Which build daemon d is, for messages. */
static const char *
up_via(size_t d)
{
    return up_names[d];
}

/*
 * Start the test's masters and daemons (UP_SETUP), then run body both
 * ways: a the old build and b this one, then the other way round; way
 * ("old", "new") names the first one, for names of its own.
 */
static void
up_each_way(void (*body)(size_t a, size_t b, const char *way))
{
    UP_SETUP();
    ck_assert_uint_eq(h_daemon_count(), 2);
    body(OLD, NEW, "old");
    body(NEW, OLD, "new");
}

/* Send line and require a refusal: "BUSY <name> ..." or "TIMEOUT <name>". */
static void
up_refused(int fd, const char *line, const char *name, size_t d, const char *why)
{
    char *got = h_cmd(fd, line, CMD_MS);

    ck_assert_msg(got != NULL
                  && (h_is_reply(got, "BUSY", name) || h_is_reply(got, "TIMEOUT", name)),
                  "%s: '%s' through %s answered '%s', expected BUSY or TIMEOUT", why, line,
                  up_via(d), got != NULL ? got : "(nothing)");
    free(got);
}

/*
 * Both ways a request may not wait, refused through daemon d: "TRYLOCK
 * <name> ttl=... <opts>" and "LOCK <name> ttl=... <opts> wait=0" (opts
 * "" or, say, "shared").
 */
static void
up_refused_both(int fd, const char *name, const char *opts, size_t d, const char *why)
{
    char line[160];

    snprintf(line, sizeof(line), "TRYLOCK %s " TTL "%s%s", name, opts[0] ? " " : "", opts);
    up_refused(fd, line, name, d, why);
    snprintf(line, sizeof(line), "LOCK %s " TTL "%s%s wait=0", name, opts[0] ? " " : "", opts);
    up_refused(fd, line, name, d, why);
}

/* Send line and require "OK <name> ..."; returns the reply (caller frees). */
static char *
up_granted(int fd, const char *line, const char *name, size_t d, const char *why)
{
    char *got = h_cmd(fd, line, CMD_MS);

    ck_assert_msg(got != NULL && h_is_reply(got, "OK", name),
                  "%s: '%s' through %s answered '%s', expected OK %s ...", why, line,
                  up_via(d), got != NULL ? got : "(nothing)", name);
    return got;
}

/* up_granted(), the reply's fence= returned. */
static long long
up_fence(int fd, const char *line, const char *name, size_t d, const char *why)
{
    char *got = up_granted(fd, line, name, d, why);
    long long fence = -1;

    ck_assert_msg(h_reply_int(got, "fence", &fence), "%s: '%s' through %s answered '%s' "
                  "without fence=", why, line, up_via(d), got);
    free(got);
    return fence;
}

/* UNLOCK name on fd (a session hold of count 1): "OK <name> holds=0". */
static void
up_unlock(int fd, const char *name, size_t d)
{
    char line[128], want[128];
    char *got;

    snprintf(line, sizeof(line), "UNLOCK %s", name);
    snprintf(want, sizeof(want), "OK %s holds=0", name);
    got = h_cmd(fd, line, CMD_MS);
    ck_assert_msg(got != NULL && strcmp(got, want) == 0, "'%s' through %s answered '%s', "
                  "expected '%s'", line, up_via(d), got != NULL ? got : "(nothing)", want);
    free(got);
}

/* An exclusive hold through one daemon is refused through the other, both ways. */
static void
up_exclusive_refused(size_t a, size_t b, const char *way)
{
    int fa = expect_connect(a), fb = expect_connect(b);
    char name[32], line[128];

    snprintf(name, sizeof(name), "x-%s", way);
    snprintf(line, sizeof(line), "LOCK %s " TTL, name);
    free(up_granted(fa, line, name, a, "the first holder"));
    up_refused_both(fb, name, "", b, "an exclusive hold through the other daemon");
    up_unlock(fa, name, a);
    /* Released: free through either. */
    snprintf(line, sizeof(line), "TRYLOCK %s " TTL, name);
    free(up_granted(fb, line, name, b, "a released name"));
    up_refused(fa, line, name, a, "an exclusive hold through the other daemon");
    up_unlock(fb, name, b);
    close(fa);
    close(fb);
}

START_TEST(upgrade_exclusive_refused)
{
    up_each_way(up_exclusive_refused);
}
END_TEST

/* Shared against exclusive across versions, both ways; shared with shared together. */
static void
up_shared_exclusive_refused(size_t a, size_t b, const char *way)
{
    int fa = expect_connect(a), fb = expect_connect(b);
    char name[32], line[128], *got;

    snprintf(name, sizeof(name), "rw-%s", way);
    snprintf(line, sizeof(line), "LOCK %s " TTL " shared", name);
    got = up_granted(fa, line, name, a, "a shared holder");
    EXPECT_FIELD(got, "kind", "shared");
    free(got);
    up_refused_both(fb, name, "", b, "an exclusive request against a shared holder of "
                    "the other daemon");
    snprintf(line, sizeof(line), "TRYLOCK %s " TTL " shared", name);
    got = up_granted(fb, line, name, b, "a second shared holder, through the other daemon");
    EXPECT_FIELD(got, "kind", "shared");
    free(got);
    up_unlock(fa, name, a);
    up_unlock(fb, name, b);
    /* The other way round: an exclusive holder refuses a shared one. */
    snprintf(line, sizeof(line), "LOCK %s " TTL, name);
    free(up_granted(fa, line, name, a, "an exclusive holder"));
    up_refused_both(fb, name, "shared", b, "a shared request against an exclusive holder "
                    "of the other daemon");
    up_unlock(fa, name, a);
    close(fa);
    close(fb);
}

START_TEST(upgrade_shared_exclusive_refused)
{
    up_each_way(up_shared_exclusive_refused);
}
END_TEST

/* limit=1: one holder across versions; limit=2: two permits, a third refused by both. */
static void
up_counted_limit(size_t a, size_t b, const char *way)
{
    char one[32], two[32];
    int fa = expect_connect(a), fb = expect_connect(b);
    int fa2 = expect_connect(a), fb2 = expect_connect(b);
    char line[128], *got;
    long long pa = -1, pb = -1;

    snprintf(one, sizeof(one), "cnt-%s", way);
    snprintf(two, sizeof(two), "pair-%s", way);
    snprintf(line, sizeof(line), "LOCK %s " TTL " limit=1", one);
    got = up_granted(fa, line, one, a, "the one holder of limit=1");
    EXPECT_FIELD(got, "kind", "counted");
    free(got);
    up_refused_both(fb, one, "limit=1", b, "a second holder of limit=1 through the other "
                    "daemon");
    up_unlock(fa, one, a);
    snprintf(line, sizeof(line), "TRYLOCK %s " TTL " limit=1", one);
    free(up_granted(fb, line, one, b, "a released permit"));
    up_unlock(fb, one, b);

    snprintf(line, sizeof(line), "LOCK %s " TTL " limit=2", two);
    got = up_granted(fa, line, two, a, "the first holder of limit=2");
    pa = EXPECT_INT(got, "permit");
    free(got);
    got = up_granted(fb, line, two, b, "the second holder of limit=2, through the other "
                     "daemon");
    pb = EXPECT_INT(got, "permit");
    free(got);
    ck_assert_msg(pa != pb, "%s and %s both gave permit %lld of %s", up_via(a), up_via(b),
                  pa, two);
    snprintf(line, sizeof(line), "TRYLOCK %s " TTL " limit=2", two);
    up_refused(fa2, line, two, a, "a third holder of limit=2");
    up_refused(fb2, line, two, b, "a third holder of limit=2");
    up_unlock(fa, two, a);
    up_unlock(fb, two, b);
    close(fa);
    close(fb);
    close(fa2);
    close(fb2);
}

START_TEST(upgrade_counted_limit)
{
    up_each_way(up_counted_limit);
}
END_TEST

/* A fenced grant through one daemon after one through the other has a larger fence. */
static void
up_fence_order(size_t a, size_t b, const char *way)
{
    static const char *const kinds[3] = { "", " shared", " limit=1" };
    size_t k;

    int fa = expect_connect(a), fb = expect_connect(b);

    for (k = 0; k < 3; k++) {
        char name[32], line[128];
        long long f1, f2, f3;

        snprintf(name, sizeof(name), "f%zu-%s", k, way);
        snprintf(line, sizeof(line), "LOCK %s " TTL " fence%s", name, kinds[k]);
        f1 = up_fence(fa, line, name, a, "a fenced grant");
        up_unlock(fa, name, a);
        f2 = up_fence(fb, line, name, b, "a fenced grant after the other daemon's");
        ck_assert_msg(f2 > f1, "'%s': fence %lld through %s after fence %lld through %s",
                      line, f2, up_via(b), f1, up_via(a));
        up_unlock(fb, name, b);
        f3 = up_fence(fa, line, name, a, "a fenced grant after the other daemon's");
        ck_assert_msg(f3 > f2, "'%s': fence %lld through %s after fence %lld through %s",
                      line, f3, up_via(a), f2, up_via(b));
        up_unlock(fa, name, a);
    }
    close(fa);
    close(fb);
}

START_TEST(upgrade_fence_order)
{
    up_each_way(up_fence_order);
}
END_TEST

/* BREAK through one daemon ends a hold made through the other; the name is free at once. */
static void
up_break_frees(size_t a, size_t b, const char *way)
{
    static const char *const kinds[2] = { "", " limit=1" };
    size_t k;


    for (k = 0; k < 2; k++) {
        int fa = expect_connect(a), adm = expect_connect(b), fb = expect_connect(b);
        char name[32], line[128], want[64];
        long long holders = -1, fbreak = -1, fgrant, fheld;
        char *got;

        snprintf(name, sizeof(name), "brk%zu-%s", k, way);
        snprintf(line, sizeof(line), "LOCK %s " TTL " fence%s", name, kinds[k]);
        fheld = up_fence(fa, line, name, a, "the holder to be broken");
        EXPECT_REPLY(adm, "AUTH " ADMIN, "OK");
        snprintf(line, sizeof(line), "BREAK %s", name);
        got = h_cmd(adm, line, BREAK_MS);
        ck_assert_msg(got != NULL && h_is_reply(got, "OK", name)
                      && h_reply_int(got, "holders", &holders)
                      && h_reply_int(got, "fence", &fbreak),
                      "'%s' through %s answered '%s'", line, up_via(b),
                      got != NULL ? got : "(nothing)");
        ck_assert_msg(holders == 1 && fbreak > fheld, "'%s' through %s of a hold through %s "
                      "(fence %lld) answered '%s', expected holders=1 and a fence above",
                      line, up_via(b), up_via(a), fheld, got);
        free(got);
        /* Its holder hears it, through its own daemon. */
        snprintf(want, sizeof(want), "! LOST %s reason=broken", name);
        got = h_read_line(fa, WAKE_MS);
        ck_assert_msg(got != NULL && strcmp(got, want) == 0, "the holder through %s got "
                      "'%s' after the BREAK through %s, expected '%s'", up_via(a),
                      got != NULL ? got : "(nothing)", up_via(b), want);
        free(got);
        /* Free at once through either daemon, fenced above the BREAK. */
        snprintf(line, sizeof(line), "TRYLOCK %s " TTL " fence%s", name, kinds[k]);
        fgrant = up_fence(fa, line, name, a, "a broken name, through the broken holder's "
                          "daemon");
        ck_assert_msg(fgrant > fbreak, "fence %lld through %s after the BREAK's %lld",
                      fgrant, up_via(a), fbreak);
        up_refused(fb, line, name, b, "a hold after the BREAK, through the other daemon");
        up_unlock(fa, name, a);
        close(fa);
        close(adm);
        close(fb);
    }
}

START_TEST(upgrade_break_frees)
{
    up_each_way(up_break_frees);
}
END_TEST

/* UNLOCK through one daemon hands the name to a LOCK waiting through the other. */
static void
up_unlock_wakes_other(size_t a, size_t b, const char *way)
{
    static const char *const kinds[3] = { "", " shared", " limit=1" };
    size_t k;


    for (k = 0; k < 3; k++) {
        int fa = expect_connect(a), fb = expect_connect(b);
        char name[32], line[128];
        char *got;
        int64_t t0;

        snprintf(name, sizeof(name), "w%zu-%s", k, way);
        /* A shared waiter waits behind an exclusive holder. */
        snprintf(line, sizeof(line), "LOCK %s " TTL "%s", name, k == 1 ? "" : kinds[k]);
        free(up_granted(fa, line, name, a, "the holder"));
        snprintf(line, sizeof(line), "LOCK %s " TTL " wait=15000%s", name, kinds[k]);
        ck_assert(h_send(fb, line) == 0);
        ck_assert_msg(h_quiet(fb, QUIET_MS), "'%s' through %s was answered while the name "
                      "is held through %s", line, up_via(b), up_via(a));
        t0 = h_now_ms();
        up_unlock(fa, name, a);
        got = h_read_line(fb, WAKE_MS);
        ck_assert_msg(got != NULL && h_is_reply(got, "OK", name), "'%s' waiting through %s "
                      "got '%s' after the UNLOCK through %s", line, up_via(b),
                      got != NULL ? got : "(nothing)", up_via(a));
        free(got);
        /* It holds it now: the releasing daemon's side refuses. */
        snprintf(line, sizeof(line), "TRYLOCK %s " TTL "%s", name, k == 1 ? "" : kinds[k]);
        up_refused(fa, line, name, a, "the woken waiter's hold");
        up_unlock(fb, name, b);
        fprintf(stderr, "upgrade_unlock_wakes_other: %s%s: %s -> %s in %lld ms\n", name,
                kinds[k], up_via(a), up_via(b), (long long)(h_now_ms() - t0));
        close(fa);
        close(fb);
    }
}

START_TEST(upgrade_unlock_wakes_other)
{
    up_each_way(up_unlock_wakes_other);
}
END_TEST

/* Run argv, its output to path; its exit status (h_decode_status), or -1. */
static int
up_run(const char *const argv[], const char *path)
{
    pid_t pid = h_spawn(argv, path);
    int status = 0;

    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        return -1;
    }
    return h_decode_status(status);
}

/* True when the file at path contains text. */
static bool
up_file_has(const char *path, const char *text)
{
    char buf[8192];
    FILE *f = fopen(path, "re");
    size_t n;

    if (f == NULL) {
        return false;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

/*
 * The harness's config for the old daemon (known_keys_only): a key this
 * build knows and the release does not (limits.max_reads_in_flight) is
 * left out for the release's daemon, and said so in its log, and kept
 * for this build's; the release's redlockd -t refuses this build's
 * config with it.
 */
START_TEST(upgrade_old_config_left_out)
{
    struct h_daemon_opts o = expect_opts;
    const char *now = getenv("REDLOCKD_BIN");
    char *mine = now != NULL ? strdup(now) : NULL, line[512], out[PATH_MAX + 32];
    char conf0[PATH_MAX + 64], conf1[PATH_MAX + 64];
    const char *argv[] = { up_prev_bin(), "-t", "-c", conf1, NULL };

    o.key_prefix = PREFIX;
    o.limits_yaml = "  max_reads_in_flight: 8\n";
    EXPECT_SETUP(.masters = NMASTERS);
    ck_assert(setenv("REDLOCKD_BIN", up_prev_bin(), 1) == 0);
    o.known_keys_only = true;
    ck_assert_msg(h_start_daemon(&o) == 0, "the last release's daemon did not start with the "
                  "keys it does not know left out");
    snprintf(conf0, sizeof(conf0), "%s", h_daemon_conf_path());
    ck_assert_msg(h_log_find(0, "harness: left out of", line, sizeof(line))
                  && strstr(line, " limits.max_reads_in_flight ") != NULL,
                  "the old daemon's log does not say that limits.max_reads_in_flight was left "
                  "out: '%s'", line);
    ck_assert_msg(!up_file_has(conf0, "max_reads_in_flight") && up_file_has(conf0, "key_prefix"),
                  "%s: limits.max_reads_in_flight must be left out, the rest kept", conf0);
    if (mine != NULL) {
        ck_assert(setenv("REDLOCKD_BIN", mine, 1) == 0);
        free(mine);
    } else {
        ck_assert(unsetenv("REDLOCKD_BIN") == 0);
    }
    o.known_keys_only = false;
    ck_assert_msg(h_start_daemon(&o) == 0, "this build's daemon did not start");
    snprintf(conf1, sizeof(conf1), "%s", h_daemon_conf_path());
    ck_assert_msg(up_file_has(conf1, "max_reads_in_flight: 8"), "%s lacks "
                  "limits.max_reads_in_flight", conf1);
    snprintf(out, sizeof(out), "%s/old-t.out", h_dir());
    ck_assert_int_ne(up_run(argv, out), 0);
    ck_assert_msg(up_file_has(out, "unknown key 'max_reads_in_flight' in 'limits'"),
                  "the release's redlockd -t on this build's config did not name the key "
                  "(see %s)", out);
}
END_TEST

/*
 * This build sees the release, which has no layout registry, by its
 * subscription, enters it as "legacy" (layout 1) on every master, and
 * counts every master beside it: they run beside each other.
 */
START_TEST(upgrade_release_seen_as_legacy)
{
    char stat[48];
    size_t i;

    UP_SETUP();
    ck_assert_uint_eq(h_daemon_count(), 2);
    h_use_daemon(NEW);
    for (i = 0; i < NMASTERS; i++) {
        snprintf(stat, sizeof(stat), "master.%zu.legacy_seen", i);
        expect_wait_stat(stat, 1, false, UP_READ_MS);
        snprintf(stat, sizeof(stat), "master.%zu.layout_counted", i);
        expect_wait_stat(stat, 1, false, UP_READ_MS);
        snprintf(stat, sizeof(stat), "master.%zu.daemons_seen", i);
        expect_wait_stat(stat, 2, false, UP_READ_MS);
    }
    ck_assert_int_eq(expect_stat("masters_counted"), NMASTERS);
}
END_TEST

/* Run this build's redlockctl "status <name>" against daemon d; its output in path. */
static void
up_ctl_status(size_t d, const char *name, const char *path)
{
    const char *ctl = getenv("REDLOCKCTL_BIN");
    char addr[64];
    const char *argv[] = { ctl, "-H", addr, "status", name, NULL };

    ck_assert_msg(ctl != NULL && access(ctl, X_OK) == 0, "no redlockctl: set REDLOCKCTL_BIN");
    h_use_daemon(d);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", h_daemon_port());
    ck_assert_msg(up_run(argv, path) == 0, "redlockctl status %s through %s did not exit 0 "
                  "(see %s)", name, up_via(d), path);
}

/*
 * This build's redlockctl status says the daemon renews a session's lock
 * only when the daemon says so (STATUS's renewer=watchdog, which only
 * this build sends, for its own sessions); the release, which does not
 * say, gets the wording that makes no claim, as does a hold of the other
 * daemon.
 */
START_TEST(upgrade_status_wording)
{
    const char *here = "renewed by this redlockd while", *no_claim = " unless renewed";
    char out[PATH_MAX + 32];
    int fo, fn;

    UP_SETUP();
    fo = expect_connect(OLD);
    fn = expect_connect(NEW);
    free(up_granted(fo, "LOCK st-old " TTL, "st-old", OLD, "a session of the old build"));
    free(up_granted(fn, "LOCK st-new " TTL, "st-new", NEW, "a session of this build"));

    snprintf(out, sizeof(out), "%s/status-old-old.out", h_dir());
    up_ctl_status(OLD, "st-old", out);
    ck_assert_msg(up_file_has(out, no_claim) && !up_file_has(out, here), "status of the "
                  "release's own session through the release: see %s", out);
    snprintf(out, sizeof(out), "%s/status-new-old.out", h_dir());
    up_ctl_status(NEW, "st-old", out);
    ck_assert_msg(up_file_has(out, no_claim) && !up_file_has(out, here), "status of the "
                  "release's session through this build: see %s", out);
    snprintf(out, sizeof(out), "%s/status-new-new.out", h_dir());
    up_ctl_status(NEW, "st-new", out);
    ck_assert_msg(up_file_has(out, here) && !up_file_has(out, no_claim), "status of this "
                  "build's own session through it: see %s", out);
    snprintf(out, sizeof(out), "%s/status-old-new.out", h_dir());
    up_ctl_status(OLD, "st-new", out);
    ck_assert_msg(up_file_has(out, no_claim) && !up_file_has(out, here), "status of this "
                  "build's session through the release: see %s", out);
    close(fo);
    close(fn);
}
END_TEST

static Suite *
upgrade_suite(void)
{
    Suite *s = suite_create("redlockd upgrade");

    EXPECT_ADD(s, upgrade_old_config_left_out, 60);
    EXPECT_ADD(s, upgrade_release_seen_as_legacy, 60);
    EXPECT_ADD(s, upgrade_exclusive_refused, 60);
    EXPECT_ADD(s, upgrade_shared_exclusive_refused, 60);
    EXPECT_ADD(s, upgrade_counted_limit, 60);
    EXPECT_ADD(s, upgrade_fence_order, 60);
    EXPECT_ADD(s, upgrade_break_frees, 90);
    EXPECT_ADD(s, upgrade_unlock_wakes_other, 90);
    EXPECT_ADD(s, upgrade_status_wording, 60);
    return s;
}

const struct runner runner_main = { "check_upgrade", upgrade_suite, h_suite_init,
                                    h_suite_cleanup };
