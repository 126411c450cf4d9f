/*
 * check_tls_masters.c: the daemon's links to masters over TLS
 * (rediss://) end to end: five TLS-only redis-server masters (--port 0
 * --tls-port) with certificates from tests/tls/make-certs.sh; LOCK and
 * UNLOCK, renewals, a waiter woken by pub/sub across two daemons, fences,
 * a master killed and restarted; every handshake failure with its
 * message and counter (unknown CA, wrong name, expired certificate, a
 * plain server named rediss://, no client certificate where one is
 * required); a client certificate and redis.tls_server_name; plain and
 * TLS masters mixed; SIGHUP re-reading the client certificate (and a
 * broken one refused).
 *
 * Real masters and daemons on free loopback ports (tests/harness.h).
 * Each test is a test case of its own: CK_RUN_CASE=<test>
 * ./build/check_tls_masters runs one.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5       /* masters per test */
#define CMD_MS          3000    /* deadline for a reply that needs the masters */
#define UP_MS           20000   /* a restarted master is up again within this */
#define TM_HANDSHAKE_MS 10000   /* deadline for a failed TLS handshake with a master to
                                   be logged and counted: tried at once, but TLS under
                                   the sanitizers on a loaded machine is slow */
#define TM_RETRIES_MS   1050    /* the first three reconnects' backoff: 100, 200 and
                                   400 ms, +50% jitter (daemon/master.c) */
#define TM_TTL_MS       900     /* ttl of lock_renew_unlock_fence's lock */
#define TEST_TIMEOUT_S  90      /* per test, unless CK_DEFAULT_TIMEOUT is set */

static bool
tm_sh(const char *cmd)
{
    int status = system(cmd);

    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The copies every test makes: client.crt and client.key as live-client.crt and .key. */
#define TM_LIVE (const char *const[]){ "client.crt", "live-client.crt", "client.key", \
                                       "live-client.key", NULL }

/* n more masters of kind with certificate cert. */
static void
tm_add(size_t n, enum h_master_kind kind, const char *cert)
{
    size_t i;

    for (i = 0; i < n; i++) {
        ck_assert_msg(h_add_master(kind, cert) == 0, "a master did not start");
    }
}

/* Daemon options for TLS masters: the test CA, renewals soon. */
static void
tm_opts(struct h_daemon_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->redis_tls_ca_file = h_cert("ca.crt");
    o->retry_delay_ms = 100;
}

/* STATS value of name on the current daemon; fails the test when absent. */
static long long
tm_stat(const char *name)
{
    long long v = -1;

    ck_assert_msg(h_stat_once(name, &v) == 0, "STATS has no %s", name);
    return v;
}

/*
 * Five TLS-only masters: LOCK, TRYLOCK from another session, renewals of
 * a short lease, UNLOCK; fences increase.
 */
START_TEST(lock_renew_unlock_fence)
{
    struct h_daemon_opts o;
    long long f1, f2;
    char *got;
    int a, b;

    EXPECT_SETUP(.copies = TM_LIVE, .tls_masters = true);
    tm_add(NMASTERS, H_MASTER_TLS, NULL);
    tm_opts(&o);
    ck_assert_msg(h_start_daemon(&o) == 0, "redlockd did not start (log above)");
    a = expect_connect(0);
    b = expect_connect(0);

    EXPECT_PREFIX(a, "LOCK t ttl=900", "OK t validity=");  /* TM_TTL_MS */
    EXPECT_PREFIX(b, "TRYLOCK t", "BUSY t ttl=");
    /* A 900 ms lease held for 2.5 s: only renewals over TLS keep it (every ttl/3). */
    ck_assert_msg(h_wait_stat("renewals_ok", 3, true, 3 * (TM_TTL_MS / 3) + H_PROMPT_MS,
                              NULL),
                  "no 3 renewals over TLS within %d ms", 3 * (TM_TTL_MS / 3) + H_PROMPT_MS);
    h_sleep_ms(1000);
    EXPECT_PREFIX(b, "TRYLOCK t", "BUSY t ttl=");
    EXPECT_REPLY(a, "UNLOCK t", "OK t holds=0");
    EXPECT_PREFIX(b, "TRYLOCK t", "OK t validity=");
    EXPECT_REPLY(b, "UNLOCK t", "OK t holds=0");

    got = EXPECT_CMD(a, "LOCK f fence");
    ck_assert_msg(h_reply_int(got, "fence", &f1), "no fence in '%s'", got);
    free(got);
    EXPECT_REPLY(a, "UNLOCK f", "OK f holds=0");
    got = EXPECT_CMD(b, "LOCK f fence");
    ck_assert_msg(h_reply_int(got, "fence", &f2), "no fence in '%s'", got);
    free(got);
    ck_assert_msg(f2 > f1, "fence %lld after %lld", f2, f1);
    EXPECT_REPLY(b, "UNLOCK f", "OK f holds=0");

    ck_assert_int_eq(tm_stat("master.0.tls_failures"), 0);
    ck_assert_int_eq(tm_stat("master.4.subscriber_up"), 1);
    close(a);
    close(b);
    h_end();
}
END_TEST

/*
 * TLS end to end: five TLS-only masters that require client certificates,
 * and clients that come in over TLS with certificates of their own: an
 * openssl s_client one-liner and redlockctl --tls take a lock through
 * them, and no plain byte crosses a link.
 */
START_TEST(tls_end_to_end)
{
    struct h_daemon_opts o;
    char cmd[4096], out[1100], marker[1100], addr[64];
    FILE *f;
    char line[256];
    int n = 0;
    const char *want[] = { "OK e2e validity=", "HELD e2e ttl=", "OK e2e holds=0", "BYE" };

    EXPECT_SETUP(.copies = TM_LIVE, .tls_masters = true, .tls_masters_auth = true);
    tm_add(NMASTERS, H_MASTER_TLS, NULL);
    tm_opts(&o);
    o.redis_tls_cert_file = h_cert("client.crt");
    o.redis_tls_key_file = h_cert("client.key");
    o.tls_cert_file = h_cert("server.crt");
    o.tls_key_file = h_cert("server.key");
    o.tls_client_ca_file = h_cert("ca.crt");
    ck_assert_msg(h_start_daemon(&o) == 0, "redlockd did not start (log above)");
    ck_assert_int_gt(h_daemon_tls_port(), 0);

    snprintf(out, sizeof(out), "%s/e2e.out", h_dir());
    snprintf(cmd, sizeof(cmd), "printf 'LOCK e2e\\nSTATUS e2e\\nUNLOCK e2e\\nQUIT\\n' | "
             "timeout 10 openssl s_client -quiet -CAfile '%s' -cert '%s' -key '%s' "
             "-connect 127.0.0.1:%d > '%s' 2>/dev/null", h_cert("ca.crt"),
             h_cert("client.crt"), h_cert("client.key"), h_daemon_tls_port(), out);
    ck_assert_msg(tm_sh(cmd), "%s failed", cmd);
    f = fopen(out, "re");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f) != NULL && n < 4) {
        ck_assert_msg(strncmp(line, want[n], strlen(want[n])) == 0,
                      "s_client line %d is '%s', expected '%s...'", n + 1, line, want[n]);
        n++;
    }
    fclose(f);
    ck_assert_int_eq(n, 4);

    snprintf(marker, sizeof(marker), "%s/ran", h_dir());
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", h_daemon_tls_port());
    snprintf(cmd, sizeof(cmd), "'%s' --cacert '%s' --cert '%s' --key '%s' -H %s -n e2e "
             "-c 'touch %s' >'%s/ctl.out' 2>&1", h_redlockctl_bin(), h_cert("ca.crt"),
             h_cert("client.crt"), h_cert("client.key"), addr, marker, h_dir());
    ck_assert_msg(tm_sh(cmd), "redlockctl over TLS failed: %s", cmd);
    ck_assert_msg(access(marker, F_OK) == 0, "redlockctl's command did not run");
    ck_assert_int_eq(tm_stat("master.0.tls_failures"), 0);
    ck_assert_int_eq(tm_stat("tls_handshake_failures"), 0);
    h_end();
}
END_TEST

/* A waiter on one daemon is woken by a release on another (pub/sub over TLS). */
START_TEST(pubsub_wakeup_two_daemons)
{
    struct h_daemon_opts o;
    char *got;
    int a, b;

    EXPECT_SETUP(.copies = TM_LIVE, .tls_masters = true);
    tm_add(NMASTERS, H_MASTER_TLS, NULL);
    tm_opts(&o);
    /* A slow fallback retry: only the announcement wakes the waiter in time. */
    o.retry_delay_ms = 5000;
    ck_assert_msg(h_start_daemon(&o) == 0, "first redlockd did not start");
    ck_assert_msg(h_start_daemon(&o) == 0, "second redlockd did not start");
    a = expect_connect(0);
    b = expect_connect(1);

    EXPECT_PREFIX(a, "LOCK w", "OK w validity=");
    ck_assert_int_eq(h_send(b, "LOCK w wait=10000"), 0);
    h_sleep_ms(300);
    h_use_daemon(0);
    EXPECT_REPLY(a, "UNLOCK w", "OK w holds=0");
    /* Woken by the announcement (pubsub_wakeups below), not by the fallback retry. */
    got = h_read_line(b, H_PROMPT_MS);
    ck_assert_msg(got != NULL && strncmp(got, "OK w validity=", 14) == 0,
                  "the waiter on the second daemon answered '%s'", got ? got : "(nothing)");
    free(got);
    h_use_daemon(1);
    ck_assert_msg(tm_stat("pubsub_wakeups") >= 1, "the waiter was not woken by pub/sub");
    EXPECT_REPLY(b, "UNLOCK w", "OK w holds=0");
    close(a);
    close(b);
    h_end();
}
END_TEST

/* A TLS master killed and restarted: locks go on, it comes back up over TLS. */
START_TEST(master_killed_and_restarted)
{
    struct h_daemon_opts o;
    int a;

    EXPECT_SETUP(.copies = TM_LIVE, .tls_masters = true);
    tm_add(NMASTERS, H_MASTER_TLS, NULL);
    tm_opts(&o);
    ck_assert_msg(h_start_daemon(&o) == 0, "redlockd did not start (log above)");
    a = expect_connect(0);

    ck_assert_int_eq(h_kill_master(0), 0);
    ck_assert_msg(h_wait_stat("master.0.up", 0, false, H_PROMPT_MS, NULL), "master 0 still up");
    EXPECT_PREFIX(a, "LOCK k", "OK k validity=");
    EXPECT_REPLY(a, "UNLOCK k", "OK k holds=0");
    ck_assert_int_eq(h_restart_master(0), 0);
    ck_assert_msg(h_wait_stat("master.0.up", 1, false, UP_MS, NULL),
                  "master 0 not up again over TLS");
    ck_assert_msg(h_wait_stat("master.0.subscriber_up", 1, false, UP_MS, NULL),
                  "master 0's subscriber link not up again over TLS");
    ck_assert_int_ge(tm_stat("master.0.reconnects"), 1);
    ck_assert_int_eq(tm_stat("master.0.tls_failures"), 0);
    EXPECT_PREFIX(a, "LOCK k", "OK k validity=");
    EXPECT_REPLY(a, "UNLOCK k", "OK k holds=0");
    close(a);
    h_end();
}
END_TEST

/* The log line of a failed handshake with master i, and its counter growing. */
static void
tm_expect_failure(size_t i, const char *reason)
{
    char text[512], stat[64];

    snprintf(text, sizeof(text), "master rediss://127.0.0.1:%d: TLS handshake failed: %s",
             h_master_port(i), reason);
    ck_assert_msg(h_wait_log(0, text, TM_HANDSHAKE_MS), "no log line '%s'", text);
    snprintf(stat, sizeof(stat), "master.%zu.tls_failures", i);
    /* Retried with backoff: the counter keeps growing. */
    ck_assert_msg(h_wait_stat(stat, 3, true, TM_RETRIES_MS + 3 * TM_HANDSHAKE_MS, NULL),
                  "%s stays below 3", stat);
    snprintf(stat, sizeof(stat), "master.%zu.up", i);
    ck_assert_int_eq(tm_stat(stat), 0);
}

/*
 * Three good masters and one of each failure: the good ones serve locks
 * while the others fail their handshakes, each with OpenSSL's reason.
 */
START_TEST(handshake_failures)
{
    struct h_daemon_opts o;
    int a;

    EXPECT_SETUP(.copies = TM_LIVE, .tls_masters = true);
    tm_add(3, H_MASTER_TLS, NULL);
    tm_add(1, H_MASTER_TLS, "other");           /* 3: signed by an unknown CA */
    tm_add(1, H_MASTER_TLS, "wrongname");       /* 4: for wrong.example */
    tm_add(1, H_MASTER_TLS, "expired");         /* 5: valid only in 2020 */
    tm_add(1, H_MASTER_PLAIN_AS_TLS, NULL);     /* 6: plain Redis named rediss:// */
    tm_opts(&o);
    o.expect_masters_up = 3;
    ck_assert_msg(h_start_daemon(&o) == 0, "redlockd did not start (log above)");

    tm_expect_failure(3, "error:0A000086:SSL routines::certificate verify failed: "
                      "unable to get local issuer certificate");
    tm_expect_failure(4, "error:0A000086:SSL routines::certificate verify failed: "
                      "IP address mismatch");
    tm_expect_failure(5, "error:0A000086:SSL routines::certificate verify failed: "
                      "certificate has expired");
    tm_expect_failure(6, "no answer within 500 ms (redis.connect_timeout_ms); "
                      "is it a TLS port?");
    ck_assert_int_eq(tm_stat("master.0.tls_failures"), 0);
    ck_assert_int_eq(tm_stat("masters_up"), 3);
    /* The loop never blocked on a handshake: the daemon answers at once. */
    a = expect_connect(0);
    EXPECT_PREFIX(a, "PING", "PONG");
    close(a);
    h_end();
}
END_TEST

/* redis.tls_server_name: checked instead of the host (and sent as SNI). */
START_TEST(server_name)
{
    struct h_daemon_opts o;
    int a;

    EXPECT_SETUP(.copies = TM_LIVE, .tls_masters = true);
    tm_add(3, H_MASTER_TLS, NULL);
    tm_opts(&o);
    o.redis_tls_server_name = "localhost";
    ck_assert_msg(h_start_daemon(&o) == 0, "redlockd did not start (log above)");
    a = expect_connect(0);
    EXPECT_PREFIX(a, "LOCK n", "OK n validity=");
    EXPECT_REPLY(a, "UNLOCK n", "OK n holds=0");
    close(a);
    h_stop_daemon();

    o.redis_tls_server_name = "redis.example.com";
    o.expect_masters_up = -1;
    ck_assert_msg(h_start_daemon(&o) == 0, "redlockd did not start (log above)");
    ck_assert_msg(h_wait_log(0, "TLS handshake failed: error:0A000086:SSL routines::"
                             "certificate verify failed: hostname mismatch",
                             TM_HANDSHAKE_MS),
                  "no hostname mismatch logged");
    ck_assert_int_eq(tm_stat("masters_up"), 0);
    h_end();
}
END_TEST

/*
 * Masters that require a client certificate (tls-auth-clients yes):
 * without one the daemon's links fail with the reason; with
 * redis.tls_cert_file and tls_key_file they come up.  SIGHUP re-reads
 * the files: a broken one is refused and the old context stays.
 */
START_TEST(client_certificate_and_reload)
{
    struct h_daemon_opts o;
    char cmd[4096];
    off_t from;
    int a;

    EXPECT_SETUP(.copies = TM_LIVE, .tls_masters = true, .tls_masters_auth = true);
    tm_add(3, H_MASTER_TLS, NULL);
    tm_opts(&o);
    o.expect_masters_up = -1;
    ck_assert_msg(h_start_daemon(&o) == 0, "redlockd did not start (log above)");
    ck_assert_msg(h_wait_log(0, "certificate required", TM_HANDSHAKE_MS),
                  "no failure naming the missing client certificate");
    ck_assert_msg(h_wait_stat("master.0.tls_failures", 1, true, TM_HANDSHAKE_MS, NULL),
                  "the missing client certificate was not counted");
    ck_assert_int_eq(tm_stat("masters_up"), 0);
    h_stop_daemon();

    o.redis_tls_cert_file = h_cert("live-client.crt");
    o.redis_tls_key_file = h_cert("live-client.key");
    o.expect_masters_up = 0;
    ck_assert_msg(h_start_daemon(&o) == 0, "redlockd did not start with a client certificate");
    a = expect_connect(h_current_daemon());
    EXPECT_PREFIX(a, "LOCK c", "OK c validity=");
    EXPECT_REPLY(a, "UNLOCK c", "OK c holds=0");

    /* A certificate file that does not load: the reload is refused. */
    snprintf(cmd, sizeof(cmd), "echo broken > '%s'", h_cert("live-client.crt"));
    ck_assert(tm_sh(cmd));
    from = h_log_size();
    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    ck_assert_msg(h_wait_log(from, "reload: redis.tls_cert_file", H_PROMPT_MS),
                  "the broken client certificate was not refused with its reason");
    ck_assert_msg(h_wait_log(from, "nothing was reloaded", H_PROMPT_MS),
                  "the reload was not refused");
    /* The old context stays: a master restarted is reached again. */
    ck_assert_int_eq(h_kill_master(1), 0);
    ck_assert_int_eq(h_restart_master(1), 0);
    ck_assert_msg(h_wait_stat("master.1.up", 1, false, UP_MS, NULL),
                  "master 1 not up again with the old client certificate");

    /* Fixed: the reload re-reads the files. */
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", h_cert("client.crt"), h_cert("live-client.crt"));
    ck_assert(tm_sh(cmd));
    from = h_log_size();
    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    ck_assert_msg(h_wait_log(from, "the client certificate and CAs for the rediss:// masters "
                             "were read again", H_PROMPT_MS),
                  "the reload did not re-read the files");
    EXPECT_PREFIX(a, "LOCK c", "OK c validity=");
    EXPECT_REPLY(a, "UNLOCK c", "OK c holds=0");
    close(a);
    h_end();
}
END_TEST

/* Plain and TLS masters in one config. */
START_TEST(mixed_plain_and_tls)
{
    struct h_daemon_opts o;
    int a;

    EXPECT_SETUP(.copies = TM_LIVE, .tls_masters = true);
    tm_add(2, H_MASTER_PLAIN, NULL);
    tm_add(3, H_MASTER_TLS, NULL);
    tm_opts(&o);
    ck_assert_msg(h_start_daemon(&o) == 0, "redlockd did not start (log above)");
    a = expect_connect(0);
    EXPECT_PREFIX(a, "LOCK m", "OK m validity=");
    /* The plain ones hold the key as usual; the TLS ones are counted. */
    ck_assert_uint_eq(h_masters_holding("m", NULL), 2);
    ck_assert_int_eq(tm_stat("masters_up"), 5);
    /* Two masters down, one of each kind: still a quorum of three. */
    ck_assert_int_eq(h_kill_master(0), 0);
    ck_assert_int_eq(h_kill_master(4), 0);
    EXPECT_REPLY(a, "UNLOCK m", "OK m holds=0");
    EXPECT_PREFIX(a, "LOCK m2", "OK m2 validity=");
    EXPECT_REPLY(a, "UNLOCK m2", "OK m2 holds=0");
    close(a);
    h_end();
}
END_TEST

#define TM_ADD(s, test) expect_add_case((s), #test, (test), h_end, TEST_TIMEOUT_S)

static Suite *
tls_masters_suite(void)
{
    Suite *s = suite_create("redlockd masters over TLS");

    TM_ADD(s, lock_renew_unlock_fence);
    TM_ADD(s, tls_end_to_end);
    TM_ADD(s, pubsub_wakeup_two_daemons);
    TM_ADD(s, master_killed_and_restarted);
    TM_ADD(s, handshake_failures);
    TM_ADD(s, server_name);
    TM_ADD(s, client_certificate_and_reload);
    TM_ADD(s, mixed_plain_and_tls);
    return s;
}

const struct runner runner_main = {
    "check_tls_masters", tls_masters_suite, h_suite_init, h_suite_cleanup
};
