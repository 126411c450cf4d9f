/*
 * check_auth.c: client authentication (auth.password) and protected
 * mode, end to end.
 *
 * AUTH with the right and the wrong password; a reload that changes,
 * removes or sets the password ends or lets in the sessions it concerns
 * (the Unix socket needs none); a configuration holding a password that
 * every user can read is warned about; protected mode: a non-loopback
 * listen.tcp without a password does not start.  (The limits on
 * connections that never authenticate and on AUTH guessing are
 * check_limits'.)
 *
 * Real redis-server masters and the real daemon on free loopback ports
 * (tests/harness.h).  Each test is a test case of its own:
 * CK_RUN_CASE=<test> ./build/check_auth runs one.
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
#include "daemon/authlimit.h"
#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define LOCAL_MS        1000    /* deadline for a reply the daemon gives alone */
#define TEST_TIMEOUT_S  40

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

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    ck_assert_int_eq(chmod(h_daemon_conf_path(), 0644), 0);
    from = h_log_size();
    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    ck_assert_msg(h_wait_log(from, "holds auth.password but is readable by every user "
                             "(mode 0644)", H_PROMPT_MS),
                  "no warning that the 0644 configuration holding auth.password is readable");
    ck_assert_int_eq(chmod(h_daemon_conf_path(), 0600), 0);
    from = h_log_size();
    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    ck_assert_msg(h_wait_log(from, "SIGHUP: reloading", H_PROMPT_MS),
                  "the reload did not start");
    ck_assert_msg(h_wait_log(from, "reload: done", H_PROMPT_MS), "the reload did not finish");
    ck_assert_msg(!h_log_find(from, "readable by", NULL, 0),
                  "a 0600 configuration was still warned about");
}
END_TEST

/* Replace every "from" in the current daemon's configuration by "to". */
static void
au_conf_replace(const char *from, const char *to)
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
au_reload(void)
{
    off_t from = h_log_size();

    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    ck_assert_msg(h_wait_log(from, "reload: done", H_PROMPT_MS), "the reload was not applied");
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

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    a = expect_tcp();
    EXPECT_REPLY(a, "AUTH old-pw", "OK");
    EXPECT_PREFIX(a, "LOCK pc", "OK pc ");
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    EXPECT_REPLY(u, "PING", "PONG");
    au_conf_replace("old-pw", "new-pw");
    au_reload();
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
    au_conf_replace("password: \"new-pw\"", "password: \"\"");
    au_reload();
    EXPECT_REPLY(b, "PING", "PONG");
    EXPECT_REPLY(u, "PING", "PONG");
    close(b);
    close(u);
}
END_TEST

#define AU_AHEAD 5   /* wrong AUTHs kept in line ahead of the right one */

/* A TCP connection from source address from that sends line (no reply read). */
static int
au_send_from(const char *from, const char *line)
{
    int fd = h_tcp_connect(from, "127.0.0.1", h_daemon_port(), 0);

    ck_assert_msg(fd >= 0, "connect from %s: %s", from, strerror(errno));
    ck_assert_int_eq(h_send(fd, line), 0);
    return fd;
}

/*
 * AUTHs waiting in line for their turn when a reload removes
 * auth.password: each is answered as an AUTH without a password to
 * check ("no password is configured"), not as a wrong password, and no
 * guess is counted; the session, let in by the reload, goes on.
 */
START_TEST(reload_while_auth_waits)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = "pw-one",
                               .log_level = "info" };
    int u, i, ahead[AU_AHEAD], right;
    long long failures = -1;
    char *got;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    for (i = 0; i < AUTHLIMIT_BURST; i++) {     /* 127/8's bucket emptied */
        ahead[0] = au_send_from("127.0.0.5", "AUTH guess");
        free(h_read_line(ahead[0], LOCAL_MS));
        close(ahead[0]);
    }
    for (i = 0; i < AU_AHEAD; i++) {
        ahead[i] = au_send_from("127.0.0.5", "AUTH guess");
    }
    right = au_send_from("127.0.0.7", "AUTH pw-one");
    expect_wait_stat("auth_waiting", AU_AHEAD + 1, false, H_PROMPT_MS);
    au_conf_replace("password: \"pw-one\"", "password: \"\"");
    au_reload();
    got = h_read_line(right, LOCAL_MS);
    ck_assert_msg(got != NULL && strcmp(got, "ERR AUTH no password is configured "
                                        "(auth.password)") == 0,
                  "the waiting AUTH got '%s'", got != NULL ? got : "(nothing)");
    free(got);
    EXPECT_REPLY(right, "PING", "PONG");
    ck_assert_int_eq(h_stat(u, "auth_failures", &failures), 0);
    ck_assert_int_eq(failures, AUTHLIMIT_BURST);
    for (i = 0; i < AU_AHEAD; i++) {
        close(ahead[i]);
    }
    close(right);
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

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    u = h_connect_unix();
    ck_assert_int_ge(u, 0);
    p = expect_tcp();
    expect_wait_unauthenticated(u, 1);
    EXPECT_PREFIX(p, "PING", "ERR AUTH ");
    au_conf_replace("password: \"pw-one\"", "password: \"\"");
    au_reload();
    expect_wait_unauthenticated(u, 0);
    EXPECT_REPLY(p, "PING", "PONG");
    EXPECT_PREFIX(p, "LOCK rp", "OK rp ");
    au_conf_replace("password: \"\"", "password: \"pw-two\"");
    au_reload();
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

START_TEST(auth_password)
{
    struct h_daemon_opts o = { .retry_delay_ms = 100, .auth_password = "s3cret-pw" };
    char *got;
    int a, u;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
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
    expect_wait_stat("auth_failures", 1, false, H_PROMPT_MS);

    /* A second daemon that makes the Unix socket AUTH too, and closes a
       session that does not authenticate within auth_timeout_ms. */
    o.auth_unix_required = true;
    o.auth_timeout_ms = 800;
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
    /* limits.auth_timeout_ms after the connection was accepted. */
    got = h_read_line(a, o.auth_timeout_ms + H_PROMPT_MS);
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

    EXPECT_SETUP();
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
auth_suite(void)
{
    Suite *s = suite_create("auth");

    EXPECT_ADD(s, auth_password, TEST_TIMEOUT_S);
    EXPECT_ADD(s, readable_secrets_warned, TEST_TIMEOUT_S);
    EXPECT_ADD(s, password_change_ends_sessions, TEST_TIMEOUT_S);
    EXPECT_ADD(s, reload_sets_and_clears_password, TEST_TIMEOUT_S);
    EXPECT_ADD(s, reload_while_auth_waits, TEST_TIMEOUT_S);
    EXPECT_ADD(s, protected_mode_refuses, TEST_TIMEOUT_S);
    return s;
}

const struct runner runner_main = { "check_auth", auth_suite, h_suite_init, h_suite_cleanup };
