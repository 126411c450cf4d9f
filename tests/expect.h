/*
 * expect.h: what the end-to-end suites share on top of the harness.
 *
 * First, assertions on one request and its reply, as macros and inline
 * functions: they keep the caller's line number and wait CMD_MS for the
 * reply (the including file defines CMD_MS; it is read where the macros
 * are used), and how a suite registers its tests (EXPECT_ADD).  Then the
 * helpers of tests/expect.c (linked into every end-to-end suite, never
 * into a program without Check): starting a test's masters and daemons,
 * requiring lines and STATS counters, conditions for h_wait_until, and
 * netcat runs.  A helper that fails an assertion ends the test, as
 * ck_assert does; strings returned are the caller's unless said.
 */
#ifndef REDLOCKD_TESTS_EXPECT_H
#define REDLOCKD_TESTS_EXPECT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "tests/harness.h"

/* Send line on fd and require the reply to be exactly want. */
#define EXPECT_REPLY(fd, line, want) do {                                       \
        char *got_ = h_cmd((fd), (line), CMD_MS);                               \
        ck_assert_msg(got_ != NULL && strcmp(got_, (want)) == 0,               \
                      "'%s' answered '%s', expected '%s'", (line),              \
                      got_ != NULL ? got_ : "(nothing)", (want));               \
        free(got_);                                                             \
    } while (0)

/* Send line on fd and require the reply to start with prefix. */
#define EXPECT_PREFIX(fd, line, prefix) do {                                    \
        char *got_ = h_cmd((fd), (line), CMD_MS);                               \
        ck_assert_msg(got_ != NULL && strncmp(got_, (prefix), strlen(prefix)) == 0, \
                      "'%s' answered '%s', expected '%s...'", (line),           \
                      got_ != NULL ? got_ : "(nothing)", (prefix));             \
        free(got_);                                                             \
    } while (0)

/* Send line, read its reply (which must come within CMD_MS); caller frees. */
#define EXPECT_CMD(fd, line) expect_cmd_at((fd), (line), CMD_MS, __LINE__)

static inline char *
expect_cmd_at(int fd, const char *line, int64_t ms, int at)
{
    char *got = h_cmd(fd, line, ms);

    ck_assert_msg(got != NULL, "line %d: '%s' got no reply within %lld ms", at, line,
                  (long long)ms);
    return got;
}

/* Read one line that must come within ms; caller frees. */
#define EXPECT_READ(fd, ms, what) expect_read_at((fd), (ms), (what), __LINE__)

static inline char *
expect_read_at(int fd, int64_t ms, const char *what, int at)
{
    char *got = h_read_line(fd, ms);

    ck_assert_msg(got != NULL, "line %d: %s: nothing within %lld ms", at, what, (long long)ms);
    return got;
}

/* Require the line to start with "<status> <name>" (then a space or its end). */
#define EXPECT_IS(line, status, name) \
    ck_assert_msg(h_is_reply((line), (status), (name)), "line %d: got '%s', expected '%s %s ...'", \
                  __LINE__, (line), (status), (name))

/* Require a word key=value in line, and return the value as an integer. */
#define EXPECT_INT(line, key) expect_int_at((line), (key), __LINE__)

static inline long long
expect_int_at(const char *line, const char *key, int at)
{
    long long v = 0;

    ck_assert_msg(h_reply_int(line, key, &v), "line %d: '%s' has no integer %s=", at, line, key);
    return v;
}

/* Require a word key=value in line with exactly this value. */
#define EXPECT_FIELD(line, key, want) do {                                      \
        char v_[128];                                                           \
        ck_assert_msg(h_reply_field((line), (key), v_, sizeof(v_)) && strcmp(v_, (want)) == 0, \
                      "line %d: '%s' lacks %s=%s", __LINE__, (line), (key), (want)); \
    } while (0)

/* Require that line has no word key=... */
#define EXPECT_NO_FIELD(line, key) do {                                         \
        char v_[128];                                                           \
        ck_assert_msg(!h_reply_field((line), (key), v_, sizeof(v_)),            \
                      "line %d: '%s' has %s=, expected none", __LINE__, (line), (key)); \
    } while (0)

/*
 * Connect to the current daemon over TCP (h_connect_tcp); the test fails
 * (naming the daemon, its port and the reason) when that does not work.
 * Returns the descriptor; the caller closes it.
 */
static inline int
expect_tcp(void)
{
    int fd = h_connect_tcp();

    ck_assert_msg(fd >= 0, "cannot connect to daemon %zu on 127.0.0.1:%d: %s",
                  h_current_daemon(), h_daemon_port(), strerror(errno));
    return fd;
}

/* Make daemon d the current one and connect to it as expect_tcp() does. */
static inline int
expect_connect(size_t d)
{
    h_use_daemon(d);
    return expect_tcp();
}

/*
 * Add test to s as a test case of its own named name, so that
 * CK_RUN_CASE=<name> runs just that one, with teardown (run when the
 * test passes; setup is the test's own) and, unless CK_DEFAULT_TIMEOUT
 * says otherwise, a timeout of timeout_s seconds.
 */
static inline void
expect_add_case(Suite *s, const char *name, const TTest *test, void (*teardown)(void),
                double timeout_s)
{
    TCase *tc = tcase_create(name);

    tcase_add_checked_fixture(tc, NULL, teardown);
    if (getenv("CK_DEFAULT_TIMEOUT") == NULL) {
        tcase_set_timeout(tc, timeout_s);
    }
    tcase_add_test(tc, test);
    suite_add_tcase(s, tc);
}

/*
 * Add test to s as a test case of its own named as the test
 * (expect_add_case), with h_end() as its teardown: every test starts its
 * own masters and daemons, and h_end() stops them when it passes.
 */
#define EXPECT_ADD(s, test, timeout_s) \
    expect_add_case((s), #test, (test), h_end, (timeout_s))

/* ---- shared by the end-to-end suites: tests/expect.c ---- */

/* The daemon options most tests start with: a blocked LOCK retries after 0..100 ms. */
extern const struct h_daemon_opts expect_opts;

/* A key and the value that must (not) be on the masters. */
struct expect_keyval {
    const char *key;        /* key on the masters */
    const char *value;      /* its value (a token) */
    size_t      want;       /* masters that must hold it */
};

/* What one nc run printed and how it ended. */
struct expect_nc {
    char    out[4096];      /* nc's stdout, NUL-terminated (cut to fit) */
    size_t  len;            /* bytes in out */
    char    err[512];       /* nc's stderr, NUL-terminated (cut to fit) */
    int64_t first_ms;       /* ms from the start to the first LF out, -1 when none */
    int64_t exit_ms;        /* ms from the start to nc's exit, -1 when killed */
    int     status;         /* exit status (h_decode_status), -1 when killed */
};

/*
 * Parse the start of a reply, "<status> <name> <key>=<integer>" (the
 * integer may be negative), into *value.  Returns a pointer just after
 * the integer, where the callers check the rest of the line, or NULL
 * when the line does not start that way.
 */
const char *expect_parse_status_int(const char *line, const char *status, const char *name,
                                    const char *key, long long *value);

/* True when line is exactly "OK <name> validity=V holds=H". */
bool expect_parse_lock_ok(const char *line, const char *name, long long *validity,
                          unsigned *holds);

/* Read a line within ms and require it to be exactly want. */
void expect_line(int fd, const char *want, int64_t ms, const char *what);

/* Require a STATS counter to reach want (or, with at_least, want or more) in time. */
void expect_wait_stat(const char *name, long long want, bool at_least, int64_t timeout_ms);

/* STATS counter name of the current daemon, which must be there. */
long long expect_stat(const char *name);

/* STATS counter name of daemon d over a connection of its own; -1 if absent. */
long long expect_daemon_stat(size_t d, const char *name);

/* True when the daemon log contains text. */
bool expect_log_has(const char *text);

/* Lines of the daemon log (from its start) that contain text; 0 when there is no log. */
size_t expect_log_count(const char *text);

/*
 * The whole of the file at path, NUL-terminated: malloc'd, the caller
 * frees it.  The current test fails, naming path, when it cannot be read.
 */
char *expect_read_file(const char *path);

/*
 * The key of lock name on the masters of a daemon started without a
 * lock.key_prefix (the harness's default), into out.
 */
void expect_key(const char *name, char *out, size_t size);

/*
 * What a test starts with (expect_setup): the one set-up of every
 * end-to-end suite.  Zero is "none" for every field, so a test names
 * only what it needs:
 *
 *     EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &expect_opts);
 */
struct expect_setup {
    size_t      masters;        /* redis-server masters to start (h_start_masters); 0: none */
    bool        aof;            /* with append-only files, fsync'd always, so that a
                                   killed master comes back with its data
                                   (h_start_masters_aof) */
    uint32_t    clock_masters;  /* bit i: master i runs under libfaketime, its wall
                                   clock stepped by h_master_clock_step (h_clock_masters;
                                   needs $REDIS_LIBC_BIN and libfaketime) */
    bool        certs;          /* make the test certificates (h_make_certs) first; any
                                   field below that names one implies it */
    const char *const *copies;  /* pairs of file names in the certificates' directory,
                                   NULL-terminated: each first one copied to the second
                                   (a copy a test overwrites to rotate a certificate) */
    const char *tls_cert;       /* the daemons listen on TLS too (listen.tls on a free
                                   port), with certs/<tls_cert>.crt and .key; NULL: not */
    const char *tls_client_ca;  /* and ask clients for a certificate signed by
                                   certs/<tls_client_ca> (tls.client_ca_file, a
                                   file name: "ca.crt"); NULL: as opts says */
    const char *tls_client_crl; /* certs/<tls_client_crl> as tls.client_crl_file;
                                   NULL: as opts says */
    bool        tls_masters;    /* masters added later (h_add_master) use the
                                   certificates (h_tls_masters), */
    bool        tls_masters_auth; /* and ask the daemons for a client certificate */
    int        *metrics_port;   /* not NULL: a free port, stored here, on which the
                                   daemons serve /metrics (metrics.listen) */
    size_t      daemons;        /* daemons to start, all with opts; daemon 0 is
                                   current afterwards; 0: none */
    const struct h_daemon_opts *opts; /* their options (NULL: the harness's defaults);
                                   the fields above are added to a copy */
    const char *const *builds;  /* NULL, or per daemon the binary it runs instead of
                                   $REDLOCKD_BIN (NULL entry: $REDLOCKD_BIN), an older
                                   build, started with known_keys_only */
};

/*
 * Start of a test, as s says, in this order: the test's directory,
 * named for the test (h_begin); the certificates and their copies; the
 * masters; the daemons.  Anything that does not start fails the test
 * (the reason, and a daemon's log tail, printed).  h_end() (the teardown
 * of EXPECT_ADD) stops it all.
 */
void expect_setup(const struct expect_setup *s);

/* expect_setup() with the fields named in place: EXPECT_SETUP(.masters = 5, .daemons = 1). */
#define EXPECT_SETUP(...) expect_setup(&(const struct expect_setup){ __VA_ARGS__ })

/* The daemon options of tests whose keys are "redlock:<name>": expect_opts with that prefix. */
extern const struct h_daemon_opts expect_prefix_opts;

/* arg: const char **key.  The key is absent from every master. */
bool expect_cond_key_gone(void *arg);

/* arg: const char **key.  The key is absent from every master that answers. */
bool expect_cond_key_gone_alive(void *arg);

/* arg: struct expect_keyval.  Exactly want masters hold key = value. */
bool expect_cond_holding(void *arg);

/* DEL key on every master. */
void expect_del_everywhere(const char *key);

/* Read a line within ms and require it to start with "! LOST <name> reason=X". */
void expect_lost(int fd, const char *name, int64_t ms, const char *what);

/*
 * An abortive close: SO_LINGER 0, so that the kernel sends a reset
 * (the daemon reads an error, not an end of input), then close(fd).
 */
void expect_reset(int fd);

/*
 * Run argv (nc and its arguments) with input on its stdin, then end of
 * file there (the pipe of `printf ... | nc`), and collect its stdout
 * until it exits or timeout_ms passed; then it is killed.  It is
 * always reaped.  The child dies with the test (h_child_setup).
 */
void expect_nc_argv(const char *const argv[], const char *input, int64_t timeout_ms,
                    struct expect_nc *r);

/* nc <flag> 127.0.0.1 <daemon port>, fed input. */
void expect_nc_tcp(const char *flag, const char *input, struct expect_nc *r);

/* nc's output and stderr as one printable string for a failure message. */
const char *expect_nc_show(const struct expect_nc *r);

/*
 * EVALSHA calls on master i: the daemon's rounds, or -1.  Not EVAL: the
 * layout registry's heartbeat, once a second per daemon, is an EVAL
 * (daemon/layout.h), as is a retry after NOSCRIPT, which h_master_calls(i,
 * "eval") counts.
 */
long long expect_script_calls(size_t i);

/*
 * Require STATS name to reach want within H_PROMPT_MS, read over u: the
 * Unix socket (a TCP connection would count itself, or be refused), or a
 * connection of the caller's that the count already takes into account.
 */
void expect_wait_stat_on(int u, const char *name, long long want);

/*
 * Start a delay proxy (tests/faults/delay_proxy.c: $DELAY_PROXY_BIN, else
 * ./build/delay-proxy) on a free port of 127.0.0.1 in front of master i,
 * with a delay of exactly delay_ms for every chunk each way, off until
 * expect_proxies_on() (so that the daemons start at full speed); with
 * subscribers_only, only subscriber connections are delayed (its -s: a
 * daemon's commands to the master pass at once, its subscriptions are
 * slowed).  Returns the address to give a daemon in
 * h_daemon_opts.master_addrs (it lives until the test ends; the proxy
 * dies with the test's process).  At most 8 per test.
 */
const char *expect_proxy_start(size_t i, long delay_ms, bool subscribers_only);

/* Turn the delay of every proxy of the test on, and wait until each says so. */
void expect_proxies_on(void);

/* Require STATS unauthenticated to reach want in time, read over the Unix socket u. */
void expect_wait_unauthenticated(int u, long long want);

/*
 * Send a LOCK or TRYLOCK line on fd and require
 * "OK <name> validity=V holds=<holds>"; V goes into the long long
 * lvalue validity.
 */
#define EXPECT_LOCK_OK(fd, line, name, holds, validity) do {                    \
        char *got_ = h_cmd((fd), (line), CMD_MS);                               \
        unsigned holds_ = 0;                                                    \
        ck_assert_msg(got_ != NULL && expect_parse_lock_ok(got_, (name), &(validity), &holds_) \
                      && holds_ == (unsigned)(holds),                           \
                      "'%s' answered '%s', expected 'OK %s validity=N holds=%u'", \
                      (line), got_ != NULL ? got_ : "(nothing)", (name),        \
                      (unsigned)(holds));                                       \
        free(got_);                                                             \
    } while (0)

#endif /* REDLOCKD_TESTS_EXPECT_H */
