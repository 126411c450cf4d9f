/*
 * check_tls.c: clients over TLS (listen.tls) end to end: openssl
 * s_client one-liners with and without a client certificate, the end of
 * input through TLS, LOCK/UNLOCK/WATCH, client certificates required
 * (tls.client_ca_file) and standing for AUTH, handshake failures counted
 * while the daemon serves others, and SIGHUP certificate rotation (and a
 * broken key refused, the old certificate kept).
 *
 * Certificates come from tests/tls/make-certs.sh, made into each test's
 * directory.  Real redis-server masters and a real daemon on free
 * loopback ports (tests/harness.h).  Each test is a test case of its
 * own: CK_RUN_CASE=<test> ./build/check_tls runs one.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        3       /* masters per test */
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define TOOL_MS         10000   /* deadline for an openssl s_client run */
#define TEST_TIMEOUT_S  60      /* per test, unless CK_DEFAULT_TIMEOUT is set */
#define TC_LINE_MAX     4096    /* longest line read by the test client */
#define PASSWORD        "tls-test-password"

/* A blocking TLS client of the line protocol (the test's own). */
struct tc {
    int   fd;                   /* the TCP socket */
    SSL  *ssl;                  /* its TLS connection */
    SSL_CTX *ctx;               /* its context */
    char  buf[TC_LINE_MAX];     /* bytes read past the last line returned */
    size_t len;                 /* bytes in buf */
};

/* Run a shell command, its output to the test's directory; true when it exits 0. */
static bool
tt_sh(const char *cmd)
{
    int status = system(cmd);

    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/*
 * Start of a test: the certificates, live.crt and live.key copied from
 * the pair named server (which a test overwrites to rotate them), the
 * masters, and the daemon with *o (retries after 0..100 ms, set
 * there), listening on TLS with the live pair; then any further fields
 * of struct expect_setup (tests/expect.h).
 */
#define TT_SETUP(server, o, ...) do {                                            \
        (o)->retry_delay_ms = 100;                                              \
        EXPECT_SETUP(.copies = TT_LIVE(server), .tls_cert = "live",             \
                     .masters = NMASTERS, .daemons = 1, .opts = (o), __VA_ARGS__); \
    } while (0)

/* The copies of TT_SETUP: the pair named server as live.crt and live.key. */
#define TT_LIVE(server) \
    (const char *const[]){ server ".crt", "live.crt", server ".key", "live.key", NULL }

/*
 * Connect over TLS to the daemon's listen.tls, verifying its certificate
 * against ca (a file in the test's directory), with a client certificate
 * when cert is not NULL.  NULL when the connection or handshake failed.
 */
static struct tc *
tc_open(const char *ca, const char *cert, const char *key)
{
    struct tc *c = calloc(1, sizeof(*c));

    ck_assert_ptr_nonnull(c);
    c->fd = h_connect_port(h_daemon_tls_port());
    ck_assert_msg(c->fd >= 0, "cannot connect to listen.tls");
    c->ctx = SSL_CTX_new(TLS_client_method());
    ck_assert_ptr_nonnull(c->ctx);
    ck_assert_int_eq(SSL_CTX_load_verify_locations(c->ctx, h_cert(ca), NULL), 1);
    SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
    if (cert != NULL) {
        ck_assert_int_eq(SSL_CTX_use_certificate_file(c->ctx, h_cert(cert), SSL_FILETYPE_PEM),
                         1);
        ck_assert_int_eq(SSL_CTX_use_PrivateKey_file(c->ctx, h_cert(key), SSL_FILETYPE_PEM),
                         1);
    }
    c->ssl = SSL_new(c->ctx);
    ck_assert_ptr_nonnull(c->ssl);
    SSL_set_fd(c->ssl, c->fd);
    SSL_set_tlsext_host_name(c->ssl, "localhost");
    ck_assert_int_eq(SSL_set1_host(c->ssl, "localhost"), 1);
    if (SSL_connect(c->ssl) != 1) {
        ERR_clear_error();
        SSL_free(c->ssl);
        SSL_CTX_free(c->ctx);
        close(c->fd);
        free(c);
        return NULL;
    }
    return c;
}

static void
tc_close(struct tc *c)
{
    SSL_free(c->ssl);
    SSL_CTX_free(c->ctx);
    close(c->fd);
    free(c);
}

static bool
tc_send(struct tc *c, const char *text)
{
    return SSL_write(c->ssl, text, (int)strlen(text)) == (int)strlen(text);
}

/* One line within ms (malloc'd, without LF), or NULL at a timeout, an error or the end. */
static char *
tc_line(struct tc *c, int64_t ms)
{
    int64_t end = h_now_ms() + ms;
    struct timeval tv;
    char *nl, *line;
    int n;

    for (;;) {
        nl = memchr(c->buf, '\n', c->len);
        if (nl != NULL) {
            line = strndup(c->buf, (size_t)(nl - c->buf));
            c->len -= (size_t)(nl - c->buf) + 1;
            memmove(c->buf, nl + 1, c->len);
            return line;
        }
        if (h_now_ms() >= end || c->len == sizeof(c->buf)) {
            return NULL;
        }
        tv.tv_sec = (time_t)((end - h_now_ms()) / 1000);
        tv.tv_usec = (suseconds_t)(((end - h_now_ms()) % 1000) * 1000 + 1000);
        setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        n = SSL_read(c->ssl, c->buf + c->len, (int)(sizeof(c->buf) - c->len));
        if (n <= 0) {
            ERR_clear_error();
            return NULL;
        }
        c->len += (size_t)n;
    }
}

/* Send line + LF and require the reply to be exactly want. */
#define TC_REPLY(c, line, want) tc_reply_at((c), (line), (want), __LINE__)

static void
tc_reply_at(struct tc *c, const char *line, const char *want, int at)
{
    char text[512], *got;

    snprintf(text, sizeof(text), "%s\n", line);
    ck_assert_msg(tc_send(c, text), "line %d: cannot send '%s'", at, line);
    got = tc_line(c, CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, want, strlen(want)) == 0,
                  "line %d: '%s' answered '%s', expected '%s...'", at, line,
                  got != NULL ? got : "(nothing)", want);
    free(got);
}

/* The common name of the issuer of the daemon's certificate on c. */
static void
tc_issuer(struct tc *c, char *out, size_t size)
{
    X509 *cert = SSL_get1_peer_certificate(c->ssl);

    ck_assert_ptr_nonnull(cert);
    out[0] = '\0';
    X509_NAME_get_text_by_NID(X509_get_issuer_name(cert), NID_commonName, out, (int)size);
    X509_free(cert);
}

/*
 * Run "printf input | openssl s_client <mode> ... -connect" (extra
 * options in args) within TOOL_MS; its standard output (malloc'd) into
 * *out.  Returns its exit status.
 */
static int
tt_s_client_opts(const char *input, const char *mode, const char *args, char **out)
{
    char cmd[10000], path[4300];
    size_t len;
    FILE *f;
    int status;

    snprintf(path, sizeof(path), "%s/s_client.out", h_dir());
    snprintf(cmd, sizeof(cmd), "printf '%s' | timeout %d openssl s_client %s %s "
             "-connect 127.0.0.1:%d >'%s' 2>>'%s/s_client.err'", input, TOOL_MS / 1000, mode,
             args, h_daemon_tls_port(), path, h_dir());
    status = system(cmd);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    *out = calloc(1, 65536);
    ck_assert_ptr_nonnull(*out);
    len = fread(*out, 1, 65535, f);
    (*out)[len] = '\0';
    fclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/*
 * Run redlockctl with args (for the shell) and check that it fails (exit
 * 69) with want in its output.
 */
static void
tt_ctl_says(const char *args, const char *want)
{
    char cmd[9000], path[4300], *out;
    size_t len;
    FILE *f;
    int status;

    snprintf(path, sizeof(path), "%s/redlockctl.out", h_dir());
    snprintf(cmd, sizeof(cmd), "timeout %d '%s' %s >'%s' 2>&1", TOOL_MS / 1000,
             h_redlockctl_bin(), args, path);
    status = system(cmd);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    out = calloc(1, 65536);
    ck_assert_ptr_nonnull(out);
    len = fread(out, 1, 65535, f);
    out[len] = '\0';
    fclose(f);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 69 && strstr(out, want) != NULL,
                  "redlockctl %s: status %d, printed '%s', want '%s'", args, status, out, want);
    free(out);
}

/* tt_s_client_opts with -quiet: the output is the replies alone. */
static int
tt_s_client(const char *input, const char *args, char **out)
{
    return tt_s_client_opts(input, "-quiet", args, out);
}

/*
 * Like tt_s_client, without -quiet (so that s_client prints whether the
 * session was "New" or "Reused"), with -nocommands (a line that starts
 * with Q or R is sent, not obeyed) and -ign_eof (the replies are read
 * after the input ends, until the daemon closes).
 */
static int
tt_s_client_verbose(const char *input, const char *args, char **out)
{
    return tt_s_client_opts(input, "-nocommands -ign_eof", args, out);
}

/*
 * What s_client's verbose output says of its session: "New", "Reused",
 * or "(neither)"; and whether the daemon answered PONG.
 */
static const char *
tt_session_kind(const char *out, bool *pong)
{
    /* s_client prints the data where it arrives, after the session's text. */
    *pong = strstr(out, "PONG\n") != NULL;
    if (strstr(out, "\nReused, ") != NULL) {
        return "Reused";
    }
    return strstr(out, "\nNew, ") != NULL ? "New" : "(neither)";
}

/*
 * The first log line since from that says a TLS handshake failed
 * (within H_PROMPT_MS), into line; fails the test when there is none.
 */
static void
tt_failed_line(off_t from, char *line, size_t size)
{
    ck_assert_msg(h_wait_log(from, "TLS handshake failed: ", H_PROMPT_MS),
                  "no 'TLS handshake failed' log line");
    ck_assert(h_log_find(from, "TLS handshake failed: ", line, size));
}

/* ---- one-liners ---- */

/*
 * openssl s_client is the netcat of TLS: requests in, replies out, in
 * order, and it exits once the daemon closes (QUIT); with a client
 * certificate as well, when the daemon asks for one.
 */
START_TEST(s_client_one_liners)
{
    struct h_daemon_opts opts = { 0 };
    char args[9000], *out;

    TT_SETUP("server", &opts);
    snprintf(args, sizeof(args), "-verify_return_error -CAfile '%s'", h_cert("ca.crt"));
    ck_assert_int_eq(tt_s_client("PING\\nSTATUS x\\nQUIT\\n", args, &out), 0);
    ck_assert_msg(strcmp(out, "PONG\nFREE x\nBYE\n") == 0, "s_client printed '%s'", out);
    free(out);
    snprintf(args, sizeof(args), "-verify_return_error -CAfile '%s' -cert '%s' -key '%s'",
             h_cert("ca.crt"), h_cert("client.crt"), h_cert("client.key"));
    ck_assert_int_eq(tt_s_client("PING hi\\nLOCK one ttl=5000\\nQUIT\\n", args, &out), 0);
    ck_assert_msg(strncmp(out, "PONG hi\nOK one ", 15) == 0
                  && strstr(out, "\nBYE\n") != NULL, "s_client printed '%s'", out);
    free(out);
    /* The session ended: its lock was released. */
    ck_assert_msg(h_wait_stat("locks_held", 0, false, H_PROMPT_MS, NULL), "the lock stayed held");
    h_end();
}
END_TEST

/*
 * The end of input through TLS: a client that says close_notify after
 * its requests, and one that only half-closes TCP (as s_client and
 * ncat may), gets every reply, in order, then the end of the stream.
 */
START_TEST(end_of_input)
{
    struct h_daemon_opts opts = { 0 };
    struct tc *c;
    char *got;
    int pass;

    TT_SETUP("server", &opts);
    for (pass = 0; pass < 2; pass++) {
        c = tc_open("ca.crt", NULL, NULL);
        ck_assert_ptr_nonnull(c);
        ck_assert(tc_send(c, "PING a\nSTATUS y\nPING b"));
        ck_assert(tc_send(c, "\nPING partial-no-lf"));
        if (pass == 0) {
            ck_assert_int_ge(SSL_shutdown(c->ssl), 0);      /* close_notify */
        } else {
            ck_assert_int_eq(shutdown(c->fd, SHUT_WR), 0);  /* TCP only */
        }
        got = tc_line(c, CMD_MS);
        ck_assert_msg(got != NULL && strcmp(got, "PONG a") == 0, "pass %d: got '%s'", pass, got);
        free(got);
        got = tc_line(c, CMD_MS);
        ck_assert_msg(got != NULL && strcmp(got, "FREE y") == 0, "pass %d: got '%s'", pass, got);
        free(got);
        got = tc_line(c, CMD_MS);
        ck_assert_msg(got != NULL && strcmp(got, "PONG b") == 0, "pass %d: got '%s'", pass, got);
        free(got);
        got = tc_line(c, CMD_MS);
        ck_assert_msg(got == NULL, "pass %d: after the replies: '%s'", pass, got);
        tc_close(c);
    }
    h_end();
}
END_TEST

/* ---- the protocol inside ---- */

/* LOCK, WATCH and UNLOCK over TLS, a waiter on TCP: the protocol is unchanged. */
START_TEST(lock_unlock_watch)
{
    struct h_daemon_opts opts = { 0 };
    struct tc *a, *w;
    char *got;
    int t;

    TT_SETUP("server", &opts);
    a = tc_open("ca.crt", NULL, NULL);
    w = tc_open("ca.crt", NULL, NULL);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(w);
    TC_REPLY(w, "WATCH job", "OK job");
    got = tc_line(w, CMD_MS);
    ck_assert_msg(got != NULL && strcmp(got, "! FREE job") == 0, "first watch push '%s'", got);
    free(got);
    TC_REPLY(a, "LOCK job ttl=5000 label=tls-client", "OK job");
    got = tc_line(w, CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "! HELD job label=tls-client", 27) == 0,
                  "watch push '%s'", got);
    free(got);
    t = expect_connect(0);
    ck_assert_int_eq(h_send(t, "LOCK job wait=5000"), 0);
    ck_assert_msg(h_wait_stat("waiters", 1, false, H_PROMPT_MS, NULL), "no waiter on TCP");
    TC_REPLY(a, "STATUS job", "HELD job ttl=");
    TC_REPLY(a, "UNLOCK job", "OK job holds=0");
    got = EXPECT_READ(t, CMD_MS, "the TCP waiter");
    EXPECT_IS(got, "OK", "job");
    free(got);
    got = tc_line(w, CMD_MS);
    ck_assert_msg(got != NULL && (strncmp(got, "! FREE job", 10) == 0
                                  || strncmp(got, "! HELD job", 10) == 0), "push '%s'", got);
    free(got);
    close(t);
    tc_close(a);
    tc_close(w);
    h_end();
}
END_TEST

/* ---- client certificates ---- */

/*
 * With tls.client_ca_file, a client without a certificate (or with one
 * from another CA) fails the handshake: logged with OpenSSL's reason and
 * counted, and the daemon serves the others (TCP and verified TLS).
 */
START_TEST(client_cert_required)
{
    struct h_daemon_opts opts = { 0 };
    char args[9000], *out;
    long long n = 0;
    off_t from;
    struct tc *c;
    int fd;

    TT_SETUP("server", &opts, .tls_client_ca = "ca.crt");
    from = h_log_size();
    snprintf(args, sizeof(args), "-CAfile '%s'", h_cert("ca.crt"));
    tt_s_client("PING\\nQUIT\\n", args, &out);
    ck_assert_msg(strstr(out, "PONG") == NULL, "served without a certificate: '%s'", out);
    free(out);
    ck_assert_msg(h_wait_stat("tls_handshake_failures", 1, true, H_PROMPT_MS, &n),
                  "tls_handshake_failures is %lld", n);
    ck_assert_msg(h_wait_log(from, "TLS handshake failed: ", H_PROMPT_MS), "no log line");
    ck_assert_msg(h_log_find(from, "certificate", NULL, 0), "the log does not say why");
    /* A certificate from another CA: refused too. */
    snprintf(args, sizeof(args), "-CAfile '%s' -cert '%s' -key '%s'", h_cert("ca.crt"),
             h_cert("other.crt"), h_cert("other.key"));
    tt_s_client("PING\\nQUIT\\n", args, &out);
    ck_assert_msg(strstr(out, "PONG") == NULL, "served with another CA's certificate: '%s'", out);
    free(out);
    ck_assert_msg(h_wait_stat("tls_handshake_failures", 2, true, H_PROMPT_MS, &n),
                  "tls_handshake_failures is %lld", n);
    /* redlockctl without a certificate says what is missing; to the plain
       port it says that port speaks no TLS, and plain to the TLS port that
       a TLS port closes such connections. */
    snprintf(args, sizeof(args), "--cacert '%s' -H 127.0.0.1:%d ping", h_cert("ca.crt"),
             h_daemon_tls_port());
    tt_ctl_says(args, "(the server requires a client certificate, and none was given)");
    snprintf(args, sizeof(args), "--cacert '%s' -H 127.0.0.1:%d ping", h_cert("ca.crt"),
             h_daemon_port());
    tt_ctl_says(args, "(this port does not speak TLS: the plain port is another one)");
    snprintf(args, sizeof(args), "-H 127.0.0.1:%d ping", h_daemon_tls_port());
    tt_ctl_says(args, "before any reply (a TLS port closes connections without TLS)");
    ck_assert_msg(h_wait_log(from, "(the client spoke no TLS: the plain listen.tcp port is "
                             "another one)", CMD_MS), "the log does not say the client spoke no TLS");
    /* The others are served. */
    fd = expect_connect(0);
    EXPECT_REPLY(fd, "PING", "PONG");
    close(fd);
    c = tc_open("ca.crt", "client.crt", "client.key");
    ck_assert_ptr_nonnull(c);
    TC_REPLY(c, "PING", "PONG");
    tc_close(c);
    h_end();
}
END_TEST

/* A verified client certificate stands for AUTH; a TCP client still needs AUTH. */
START_TEST(verified_needs_no_auth)
{
    struct h_daemon_opts opts = { .auth_password = PASSWORD };
    struct tc *c;
    int fd;

    TT_SETUP("server", &opts, .tls_client_ca = "ca.crt");
    c = tc_open("ca.crt", "client.crt", "client.key");
    ck_assert_ptr_nonnull(c);
    TC_REPLY(c, "PING", "PONG");
    TC_REPLY(c, "LOCK tls-job ttl=5000", "OK tls-job");
    fd = expect_connect(0);
    EXPECT_PREFIX(fd, "PING", "ERR AUTH");
    EXPECT_REPLY(fd, "AUTH " PASSWORD, "OK");
    EXPECT_REPLY(fd, "PING", "PONG");
    close(fd);
    tc_close(c);
    h_end();
}
END_TEST

/* Without client certificates, a TLS client AUTHs like a TCP one. */
START_TEST(tls_without_client_ca_needs_auth)
{
    struct h_daemon_opts opts = { .auth_password = PASSWORD };
    struct tc *c;

    TT_SETUP("server", &opts);
    c = tc_open("ca.crt", NULL, NULL);
    ck_assert_ptr_nonnull(c);
    TC_REPLY(c, "PING", "ERR AUTH");
    TC_REPLY(c, "AUTH " PASSWORD, "OK");
    TC_REPLY(c, "PING", "PONG");
    tc_close(c);
    h_end();
}
END_TEST

/* ---- reload ---- */

/* Copy a certificate directory file over another (the rotation). */
static void
tt_copy(const char *from, const char *to)
{
    char cmd[9000];

    snprintf(cmd, sizeof(cmd), "cp '%s' '%s.new' && mv '%s.new' '%s'", h_cert(from),
             h_cert(to), h_cert(to), h_cert(to));
    ck_assert_msg(tt_sh(cmd), "cannot copy %s to %s", from, to);
}

/*
 * SIGHUP rotates the certificate: new connections get the new one (from
 * another CA), a session open before goes on with its old one.
 */
START_TEST(reload_rotates_certificate)
{
    struct h_daemon_opts opts = { 0 };
    struct tc *old, *c;
    char issuer[256];
    off_t from;

    TT_SETUP("server", &opts);
    old = tc_open("ca.crt", NULL, NULL);
    ck_assert_ptr_nonnull(old);
    tc_issuer(old, issuer, sizeof(issuer));
    ck_assert_str_eq(issuer, "redlockd test CA");
    TC_REPLY(old, "LOCK kept ttl=5000", "OK kept");

    tt_copy("other.crt", "live.crt");
    tt_copy("other.key", "live.key");
    from = h_log_size();
    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    ck_assert_msg(h_wait_log(from, "reload: done", H_PROMPT_MS), "the reload did not finish");
    ck_assert_msg(h_log_find(from, "tls: loaded", NULL, 0), "the certificate was not re-read");

    c = tc_open("other-ca.crt", NULL, NULL);
    ck_assert_msg(c != NULL, "a new connection did not verify against the new CA");
    tc_issuer(c, issuer, sizeof(issuer));
    ck_assert_str_eq(issuer, "another test CA");
    TC_REPLY(c, "STATUS kept", "HELD kept");
    tc_close(c);
    ck_assert_msg(tc_open("ca.crt", NULL, NULL) == NULL, "the old certificate is still served");
    /* The session from before the rotation is untouched. */
    TC_REPLY(old, "PING", "PONG");
    TC_REPLY(old, "UNLOCK kept", "OK kept holds=0");
    tc_close(old);
    h_end();
}
END_TEST

/* A key file that does not load refuses the reload, with the reason; the old one stays. */
START_TEST(reload_broken_key_refused)
{
    struct h_daemon_opts opts = { 0 };
    struct tc *c;
    char issuer[256], line[1024], cmd[9000];
    off_t from;

    TT_SETUP("server", &opts);
    tt_copy("other.crt", "live.crt");
    snprintf(cmd, sizeof(cmd), "printf 'not a key\\n' > '%s'", h_cert("live.key"));
    ck_assert(tt_sh(cmd));
    from = h_log_size();
    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    ck_assert_msg(h_wait_log(from, "nothing was reloaded (the running certificates stay)",
                             CMD_MS), "the reload was not refused");
    ck_assert(h_log_find(from, "reload: tls.key_file ", line, sizeof(line)));
    ck_assert_msg(strstr(line, h_cert("live.key")) != NULL && strstr(line, "error:") != NULL,
                  "the refusal does not name the file and OpenSSL's reason: '%s'", line);
    ck_assert(!h_log_find(from, "reload: done", NULL, 0));

    c = tc_open("ca.crt", NULL, NULL);
    ck_assert_msg(c != NULL, "the old certificate is not served any more");
    tc_issuer(c, issuer, sizeof(issuer));
    ck_assert_str_eq(issuer, "redlockd test CA");
    TC_REPLY(c, "PING", "PONG");
    tc_close(c);
    h_end();
}
END_TEST

/* ---- session resumption ---- */

/*
 * A PING over s_client with the client certificate, version ("-tls1_2")
 * and io ("-sess_out" or "-sess_in") of the session file of version v:
 * how s_client says the session began ("New", "Reused"); the PING must
 * be answered.
 */
static const char *
tt_resume(const char *version, size_t v, const char *io)
{
    char args[9000], sess[4200], *out;
    const char *kind;
    bool pong;

    snprintf(sess, sizeof(sess), "%s/sess%zu.pem", h_dir(), v);
    snprintf(args, sizeof(args), "%s -CAfile '%s' -cert '%s' -key '%s' %s '%s'", version,
             h_cert("ca.crt"), h_cert("client.crt"), h_cert("client.key"), io, sess);
    tt_s_client_verbose("PING\\nQUIT\\n", args, &out);
    kind = tt_session_kind(out, &pong);
    free(out);
    ck_assert_msg(pong, "%s %s: no PONG", version, io);
    return kind;
}

/*
 * With client certificates required, a client resumes its session (TLS
 * 1.2 and 1.3): the context has a session id context.  A reload that
 * changes tls.client_ca_file ends the old sessions: the next connection
 * makes a new one (and is served).
 */
START_TEST(session_resumption)
{
    static const char *const versions[] = { "-tls1_2", "-tls1_3" };
    struct h_daemon_opts opts = { 0 };
    char cmd[9000];
    const char *kind;
    off_t from;
    size_t v;

    opts.retry_delay_ms = 100;
    EXPECT_SETUP(.copies = (const char *const[]){ "server.crt", "live.crt", "server.key",
                                                  "live.key", "ca.crt", "live-ca.crt", NULL },
                 .tls_cert = "live", .tls_client_ca = "live-ca.crt", .masters = NMASTERS,
                 .daemons = 1, .opts = &opts);
    for (v = 0; v < 2; v++) {
        kind = tt_resume(versions[v], v, "-sess_out");
        ck_assert_msg(strcmp(kind, "New") == 0, "%s: first connection: %s", versions[v], kind);
        kind = tt_resume(versions[v], v, "-sess_in");
        ck_assert_msg(strcmp(kind, "Reused") == 0, "%s: resumed? %s", versions[v], kind);
    }

    /* Another CA beside the first: the old sessions are not resumed. */
    snprintf(cmd, sizeof(cmd), "cat '%s' '%s' > '%s.new' && mv '%s.new' '%s'",
             h_cert("ca.crt"), h_cert("other-ca.crt"), h_cert("live-ca.crt"),
             h_cert("live-ca.crt"), h_cert("live-ca.crt"));
    ck_assert(tt_sh(cmd));
    from = h_log_size();
    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    ck_assert_msg(h_wait_log(from, "reload: done", H_PROMPT_MS), "the reload did not finish");
    for (v = 0; v < 2; v++) {
        kind = tt_resume(versions[v], v, "-sess_in");
        ck_assert_msg(strcmp(kind, "New") == 0, "%s: after the CA changed: %s", versions[v],
                      kind);
    }
    h_end();
}
END_TEST

/* ---- cipher suites ---- */

/*
 * By default TLS 1.2 offers forward-secret AEAD suites only: RSA key
 * exchange and CBC with SHA-1 fail the handshake, logged with OpenSSL's
 * reason ("no shared cipher") and no libevent junk ("lib(0)").
 */
START_TEST(ciphers_default_aead_only)
{
    static const char *const refused[] = { "AES128-SHA", "AES256-SHA256",
                                           "ECDHE-RSA-AES128-SHA" };
    static const char *const served[] = { "ECDHE-RSA-AES128-GCM-SHA256",
                                          "ECDHE-RSA-AES256-GCM-SHA384",
                                          "ECDHE-RSA-CHACHA20-POLY1305" };
    struct h_daemon_opts opts = { 0 };
    char args[9000], line[2048], *out;
    off_t from;
    size_t i;

    TT_SETUP("server-rsa", &opts);
    for (i = 0; i < 3; i++) {
        from = h_log_size();
        snprintf(args, sizeof(args), "-tls1_2 -cipher %s -CAfile '%s'", refused[i],
                 h_cert("ca.crt"));
        tt_s_client("PING\\nQUIT\\n", args, &out);
        ck_assert_msg(strstr(out, "PONG") == NULL, "served with %s: '%s'", refused[i], out);
        free(out);
        tt_failed_line(from, line, sizeof(line));
        ck_assert_msg(strstr(line, "no shared cipher") != NULL && strstr(line, "lib(0)") == NULL,
                      "%s: the log line is '%s'", refused[i], line);
    }
    for (i = 0; i < 3; i++) {
        snprintf(args, sizeof(args), "-tls1_2 -cipher %s -CAfile '%s'", served[i],
                 h_cert("ca.crt"));
        tt_s_client("PING\\nQUIT\\n", args, &out);
        ck_assert_msg(strcmp(out, "PONG\nBYE\n") == 0, "%s: '%s'", served[i], out);
        free(out);
    }
    snprintf(args, sizeof(args), "-CAfile '%s'", h_cert("ca.crt"));
    tt_s_client("PING\\nQUIT\\n", args, &out);
    ck_assert_msg(strcmp(out, "PONG\nBYE\n") == 0, "TLS 1.3: '%s'", out);
    free(out);
    h_end();
}
END_TEST

/*
 * tls.ciphers and tls.ciphersuites choose the suites; a list that
 * matches nothing is refused by redlockd -t and by a reload, which
 * keeps the running context.
 */
START_TEST(ciphers_configured)
{
    struct h_daemon_opts opts = { .tls_ciphers = "AES128-SHA:ECDHE+AESGCM",
                                  .tls_ciphersuites = "TLS_CHACHA20_POLY1305_SHA256" };
    char args[9000], cmd[9000], line[2048], *out;
    off_t from;

    TT_SETUP("server-rsa", &opts);
    snprintf(args, sizeof(args), "-tls1_2 -cipher AES128-SHA -CAfile '%s'", h_cert("ca.crt"));
    tt_s_client("PING\\nQUIT\\n", args, &out);
    ck_assert_msg(strcmp(out, "PONG\nBYE\n") == 0, "AES128-SHA allowed: '%s'", out);
    free(out);
    snprintf(args, sizeof(args), "-tls1_3 -ciphersuites TLS_AES_256_GCM_SHA384 -CAfile '%s'",
             h_cert("ca.crt"));
    tt_s_client("PING\\nQUIT\\n", args, &out);
    ck_assert_msg(strstr(out, "PONG") == NULL, "served TLS_AES_256_GCM_SHA384: '%s'", out);
    free(out);
    snprintf(args, sizeof(args), "-tls1_3 -ciphersuites TLS_CHACHA20_POLY1305_SHA256 "
             "-CAfile '%s'", h_cert("ca.crt"));
    tt_s_client("PING\\nQUIT\\n", args, &out);
    ck_assert_msg(strcmp(out, "PONG\nBYE\n") == 0, "TLS_CHACHA20_POLY1305_SHA256: '%s'", out);
    free(out);

    /* A list that matches nothing: redlockd -t says so, a reload refuses it. */
    snprintf(cmd, sizeof(cmd), "sed -i 's/ciphers: \"AES128-SHA:ECDHE+AESGCM\"/ciphers: \"xyz\"/' "
             "'%s'", h_daemon_conf_path());
    ck_assert(tt_sh(cmd));
    snprintf(cmd, sizeof(cmd), "'%s' -t -c '%s' 2>'%s/t.err'; test $? -eq 78 && "
             "grep -q \"tls.ciphers 'xyz': no cipher matches\" '%s/t.err'",
             getenv("REDLOCKD_BIN") != NULL ? getenv("REDLOCKD_BIN") : "./build/redlockd",
             h_daemon_conf_path(), h_dir(), h_dir());
    ck_assert_msg(tt_sh(cmd), "redlockd -t did not refuse tls.ciphers \"xyz\"");
    from = h_log_size();
    ck_assert_int_eq(h_signal_daemon(SIGHUP), 0);
    ck_assert_msg(h_wait_log(from, "keeping the running configuration", CMD_MS),
                  "the reload was not refused");
    ck_assert(h_log_find(from, "tls.ciphers 'xyz': no cipher matches", line, sizeof(line)));
    snprintf(args, sizeof(args), "-tls1_2 -cipher AES128-SHA -CAfile '%s'", h_cert("ca.crt"));
    tt_s_client("PING\\nQUIT\\n", args, &out);
    ck_assert_msg(strcmp(out, "PONG\nBYE\n") == 0, "the old ciphers are gone: '%s'", out);
    free(out);
    h_end();
}
END_TEST

/* ---- client certificate policy ---- */

/*
 * tls.client_crl_file: a revoked client certificate fails the handshake,
 * with one log line naming its subject and the reason; the others are
 * served.
 */
START_TEST(client_crl_revoked)
{
    struct h_daemon_opts opts = { 0 };
    char args[9000], line[2048], *out;
    off_t from;

    TT_SETUP("server", &opts, .tls_client_ca = "ca.crt", .tls_client_crl = "ca.crl");
    from = h_log_size();
    snprintf(args, sizeof(args), "-CAfile '%s' -cert '%s' -key '%s'", h_cert("ca.crt"),
             h_cert("revoked.crt"), h_cert("revoked.key"));
    tt_s_client("PING\\nQUIT\\n", args, &out);
    ck_assert_msg(strstr(out, "PONG") == NULL, "served a revoked certificate: '%s'", out);
    free(out);
    tt_failed_line(from, line, sizeof(line));
    ck_assert_msg(strstr(line, "CN=redlockd-revoked-client") != NULL
                  && strstr(line, "certificate revoked (tls.client_crl_file)") != NULL
                  && strstr(line, "lib(0)") == NULL, "the log line is '%s'", line);
    snprintf(args, sizeof(args), "-CAfile '%s' -cert '%s' -key '%s'", h_cert("ca.crt"),
             h_cert("client.crt"), h_cert("client.key"));
    tt_s_client("PING\\nQUIT\\n", args, &out);
    ck_assert_msg(strcmp(out, "PONG\nBYE\n") == 0, "a good certificate: '%s'", out);
    free(out);
    h_end();
}
END_TEST

/*
 * tls.client_names: a client certificate must carry one of the names, as
 * a DNS subjectAltName, or as its CN when it has none; another name
 * fails the handshake with one log line naming the subject.
 */
START_TEST(client_names)
{
    static const char *const names[] = { "redlockd-test-client", "worker.example", NULL };
    struct h_daemon_opts opts = { .tls_client_names = names };
    char args[9000], line[2048], *out;
    off_t from;

    TT_SETUP("server", &opts, .tls_client_ca = "ca.crt");
    /* client.crt: CN redlockd-test-client; named.crt: DNS worker.example. */
    snprintf(args, sizeof(args), "-CAfile '%s' -cert '%s' -key '%s'", h_cert("ca.crt"),
             h_cert("client.crt"), h_cert("client.key"));
    tt_s_client("PING\\nQUIT\\n", args, &out);
    ck_assert_msg(strcmp(out, "PONG\nBYE\n") == 0, "the CN of client.crt: '%s'", out);
    free(out);
    snprintf(args, sizeof(args), "-CAfile '%s' -cert '%s' -key '%s'", h_cert("ca.crt"),
             h_cert("named.crt"), h_cert("named.key"));
    tt_s_client("PING\\nQUIT\\n", args, &out);
    ck_assert_msg(strcmp(out, "PONG\nBYE\n") == 0, "the DNS name of named.crt: '%s'", out);
    free(out);
    from = h_log_size();
    snprintf(args, sizeof(args), "-CAfile '%s' -cert '%s' -key '%s'", h_cert("ca.crt"),
             h_cert("stranger.crt"), h_cert("stranger.key"));
    tt_s_client("PING\\nQUIT\\n", args, &out);
    ck_assert_msg(strstr(out, "PONG") == NULL, "served CN stranger-client: '%s'", out);
    free(out);
    tt_failed_line(from, line, sizeof(line));
    ck_assert_msg(strstr(line, "subject CN=stranger-client not in tls.client_names") != NULL
                  && strstr(line, "lib(0)") == NULL, "the log line is '%s'", line);
    h_end();
}
END_TEST

#define TT_ADD(s, test) expect_add_case((s), #test, (test), h_end, TEST_TIMEOUT_S)

static Suite *
tls_suite(void)
{
    Suite *s = suite_create("redlockd clients over TLS");

    TT_ADD(s, s_client_one_liners);
    TT_ADD(s, end_of_input);
    TT_ADD(s, lock_unlock_watch);
    TT_ADD(s, client_cert_required);
    TT_ADD(s, verified_needs_no_auth);
    TT_ADD(s, tls_without_client_ca_needs_auth);
    TT_ADD(s, reload_rotates_certificate);
    TT_ADD(s, reload_broken_key_refused);
    TT_ADD(s, session_resumption);
    TT_ADD(s, ciphers_default_aead_only);
    TT_ADD(s, ciphers_configured);
    TT_ADD(s, client_crl_revoked);
    TT_ADD(s, client_names);
    return s;
}

const struct runner runner_main = { "check_tls", tls_suite, h_suite_init, h_suite_cleanup };
