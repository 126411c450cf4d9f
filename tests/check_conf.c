/*
 * check_conf.c: unit tests of conf/conf.c.
 *
 * Every fixture in tests/conf/ is loaded and its whole message list is
 * compared, text and position included.  Paths are relative to the repo
 * root, where the Makefile runs the suites.  Run under valgrind with
 * CK_FORK=no to check for leaks.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "conf/conf.h"
#include "tests/runner.h"

#define FX(name)    "tests/conf/" name

/* ---- helpers ---- */

/*
 * Load path and compare the messages with want, a NULL-terminated list
 * of "E text" (error) or "W text" (warning) lines.  conf is left loaded.
 */
static void
load_expect(const char *path, struct conf *conf, int want_rc,
            const char *const *want)
{
    struct conf_msgs msgs;
    size_t i, n = 0, nerrors = 0;
    int rc;

    while (want[n] != NULL) {
        if (want[n][0] == 'E') {
            nerrors++;
        }
        n++;
    }

    memset(&msgs, 0, sizeof(msgs));
    rc = conf_load(path, conf, &msgs);
    for (i = 0; i < msgs.n && i < n; i++) {
        ck_assert_msg(strcmp(msgs.list[i].text, want[i] + 2) == 0,
                      "%s: message %zu:\n  got  '%s'\n  want '%s'",
                      path, i, msgs.list[i].text, want[i] + 2);
        ck_assert_msg(msgs.list[i].is_error == (want[i][0] == 'E'),
                      "%s: message %zu is an %s", path, i,
                      msgs.list[i].is_error ? "error" : "warning");
    }
    if (msgs.n != n) {
        for (i = 0; i < msgs.n; i++) {
            fprintf(stderr, "%s: got %s\n", path, msgs.list[i].text);
        }
    }
    ck_assert_msg(msgs.n == n, "%s: %zu messages, want %zu", path, msgs.n, n);
    ck_assert_msg(msgs.nerrors == nerrors, "%s: %zu errors, want %zu",
                  path, msgs.nerrors, nerrors);
    ck_assert_msg(rc == want_rc, "%s: returned %d, want %d", path, rc, want_rc);
    conf_msgs_free(&msgs);
}

/* Load path expecting no message at all. */
static void
load_clean(const char *path, struct conf *conf)
{
    static const char *const none[] = { NULL };

    load_expect(path, conf, 0, none);
}

/* Write len bytes to a new temporary file; returns its malloc'd name. */
static char *
write_temp(const void *data, size_t len)
{
    char *name = strdup("/tmp/check_conf.XXXXXX");
    int fd;

    ck_assert_ptr_nonnull(name);
    fd = mkstemp(name);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
    close(fd);
    return name;
}

/* Load the bytes as a file: it must not crash; returns conf_load()'s value. */
static int
load_bytes(const void *data, size_t len, size_t *nmsgs)
{
    struct conf conf;
    struct conf_msgs msgs;
    char *name = write_temp(data, len);
    size_t i;
    int rc;

    memset(&msgs, 0, sizeof(msgs));
    rc = conf_load(name, &conf, &msgs);
    unlink(name);
    ck_assert_int_eq(rc == 0, msgs.nerrors == 0);
    for (i = 0; i < msgs.n; i++) {
        ck_assert_ptr_nonnull(msgs.list[i].text);
        ck_assert_int_eq(strncmp(msgs.list[i].text, name, strlen(name)), 0);
    }
    if (nmsgs != NULL) {
        *nmsgs = msgs.n;
    }
    conf_msgs_free(&msgs);
    conf_free(&conf);
    free(name);
    return rc;
}

/* Load the bytes expecting one error: the file's name, then suffix. */
static void
expect_bytes(const void *data, size_t len, const char *suffix)
{
    struct conf conf;
    struct conf_msgs msgs;
    char *name = write_temp(data, len);
    char want[512];
    int rc;

    memset(&msgs, 0, sizeof(msgs));
    rc = conf_load(name, &conf, &msgs);
    unlink(name);
    ck_assert_int_eq(rc, -1);
    snprintf(want, sizeof(want), "%s%s", name, suffix);
    ck_assert_uint_ge(msgs.n, 1);
    ck_assert_str_eq(msgs.list[0].text, want);
    ck_assert_uint_eq(msgs.n, 1);
    conf_msgs_free(&msgs);
    conf_free(&conf);
    free(name);
}

/* Read a whole file into a malloc'd buffer. */
static char *
read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long size;

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    size = ftell(f);
    ck_assert_int_ge(size, 0);
    rewind(f);
    buf = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *len = (size_t)size;
    return buf;
}

/* ---- fixtures with errors: one per message ---- */

struct fixture {
    const char *path;
    const char *msgs[4];        /* "E ..." or "W ...", NULL-terminated */
};

static const struct fixture bad_fixtures[] = {
    { FX("does-not-exist.yml"), {
        "E " FX("does-not-exist.yml") ": cannot open: No such file or directory" } },
    { FX("empty.yml"), {
        "E " FX("empty.yml") ": masters: required (1 to 15 addresses)" } },
    { FX("syntax.yml"), {
        "E " FX("syntax.yml") ":3:10: YAML syntax error: "
        "mapping values are not allowed in this context" } },
    { FX("syntax-flow.yml"), {
        "E " FX("syntax-flow.yml") ":2:1: YAML syntax error: did not find expected "
        "',' or ']' (while parsing a flow sequence at line 1, column 10)" } },
    { FX("bad-utf8.yml"), {
        "E " FX("bad-utf8.yml") ":4:11: YAML syntax error: "
        "invalid leading UTF-8 octet (#FF)" } },
    { FX("two-docs.yml"), {
        "E " FX("two-docs.yml") ":3:1: only one YAML document is allowed" } },
    { FX("not-mapping.yml"), {
        "E " FX("not-mapping.yml") ":1:1: the top level must be a mapping, got a sequence" } },
    { FX("unknown-section.yml"), {
        "E " FX("unknown-section.yml") ":3:1: unknown section 'locks'" } },
    { FX("unknown-key.yml"), {
        "E " FX("unknown-key.yml") ":4:3: unknown key 'ttl' in 'lock'" } },
    { FX("dup-key.yml"), {
        "E " FX("dup-key.yml") ":5:1: duplicate key 'lock' (first at line 3)" } },
    { FX("dup-key-nested.yml"), {
        "E " FX("dup-key-nested.yml") ":6:3: duplicate key 'min_ttl_ms' in 'lock' "
        "(first at line 4)" } },
    { FX("section-type.yml"), {
        "E " FX("section-type.yml") ":4:3: 'lock' must be a mapping, got a sequence" } },
    { FX("not-scalar.yml"), {
        "E " FX("not-scalar.yml") ":4:15: lock.min_ttl_ms must be a scalar" } },
    { FX("key-not-scalar.yml"), {
        "E " FX("key-not-scalar.yml") ":3:3: a key must be a scalar, got a sequence",
        "E " FX("key-not-scalar.yml") ":6:3: a key in 'lock' must be a scalar, "
        "got a sequence" } },
    { FX("bad-int.yml"), {
        "E " FX("bad-int.yml") ":4:19: lock.default_ttl_ms: expected an integer, got '30s'" } },
    { FX("range.yml"), {
        "E " FX("range.yml") ":4:20: lock.node_timeout_ms: 0 is out of range 1..60000" } },
    { FX("metrics-max-connections.yml"), {
        "E " FX("metrics-max-connections.yml") ":4:20: metrics.max_connections: 0 is out of "
        "range 1..100000" } },
    { FX("metrics-request-timeout.yml"), {
        "E " FX("metrics-request-timeout.yml") ":4:23: metrics.request_timeout_ms: 99 is out "
        "of range 100..600000" } },
    { FX("bad-double.yml"), {
        "E " FX("bad-double.yml") ":4:17: lock.drift_factor: expected a number, got '1%'" } },
    { FX("double-range.yml"), {
        "E " FX("double-range.yml") ":4:17: lock.drift_factor: 0.7 is out of range 0..0.5" } },
    { FX("bad-addr-missing-port.yml"), {
        "E " FX("bad-addr-missing-port.yml") ":7:5: masters[2]: bad address '1.2.3.4': "
        "missing ':port'" } },
    { FX("bad-addr-port.yml"), {
        "E " FX("bad-addr-port.yml") ":3:5: masters[1]: bad address '127.0.0.1:70000': "
        "port 70000 out of range 1..65535" } },
    { FX("bad-addr-empty-host.yml"), {
        "E " FX("bad-addr-empty-host.yml") ":2:5: masters[0]: bad address ':7001': "
        "empty host" } },
    { FX("bad-addr-host.yml"), {
        "E " FX("bad-addr-host.yml") ":2:5: masters[0]: bad address 'redis_1:7001': "
        "bad character '_' in host" } },
    { FX("bad-addr-bracket.yml"), {
        "E " FX("bad-addr-bracket.yml") ":2:5: masters[0]: bad address '[::1:7001': "
        "missing ']'" } },
    { FX("bad-addr-ipv6.yml"), {
        "E " FX("bad-addr-ipv6.yml") ":2:5: masters[0]: bad address '::1:7001': "
        "an IPv6 address must be in brackets, like '[::1]:6379'" } },
    { FX("bad-addr-unix-relative.yml"), {
        "E " FX("bad-addr-unix-relative.yml") ":2:5: masters[0]: bad address "
        "'unix:run/redis.sock': unix socket path must be absolute" } },
    { FX("bad-addr-unix-long.yml"), {
        "E " FX("bad-addr-unix-long.yml") ":2:5: masters[0]: bad address "
        "'unix:/dddddddddddddddddddddddddddddddddddddddddddddddddddddddddd...': "
        "unix socket path is 116 bytes, at most 107" } },
    { FX("bad-addr-rediss-unix.yml"), {
        "E " FX("bad-addr-rediss-unix.yml") ":2:5: masters[0]: bad address "
        "'rediss://unix:/run/redis.sock': rediss:// takes \"host:port\"; TLS over a "
        "unix: socket is not supported" } },
    { FX("bad-addr-rediss-port.yml"), {
        "E " FX("bad-addr-rediss-port.yml") ":2:5: masters[0]: bad address "
        "'rediss://redis-1.example.com': missing ':port'" } },
    { FX("redis-tls-cert-no-key.yml"), {
        "E " FX("redis-tls-cert-no-key.yml") ":4:18: redis.tls_cert_file is set but "
        "redis.tls_key_file is empty" } },
    { FX("redis-tls-key-no-cert.yml"), {
        "E " FX("redis-tls-key-no-cert.yml") ":4:17: redis.tls_key_file is set but "
        "redis.tls_cert_file is empty" } },
    { FX("listen-tcp-unix.yml"), {
        "E " FX("listen-tcp-unix.yml") ":2:8: listen.tcp: bad address "
        "'unix:/run/redlockd/redlockd.sock': a unix: socket is not allowed here" } },
    { FX("masters-not-seq.yml"), {
        "E " FX("masters-not-seq.yml") ":1:10: 'masters' must be a sequence, got a scalar" } },
    { FX("master-not-scalar.yml"), {
        "E " FX("master-not-scalar.yml") ":2:5: masters[0] must be a scalar" } },
    { FX("dup-master.yml"), {
        "E " FX("dup-master.yml") ":5:5: masters[3]: '127.0.0.1:7001' is listed twice "
        "(first as masters[0])" } },
    { FX("too-many-masters.yml"), {
        "E " FX("too-many-masters.yml") ":2:3: masters: 16 addresses, at most 15 are allowed" } },
    { FX("empty-masters.yml"), {
        "E " FX("empty-masters.yml") ":1:10: masters: the list is empty (1 to 15 addresses)" } },
    { FX("bad-mode.yml"), {
        "E " FX("bad-mode.yml") ":2:14: listen.unix_mode: expected octal permission bits "
        "like '0660' (at most 0777), got '0888'" } },
    { FX("bad-level.yml"), {
        "E " FX("bad-level.yml") ":4:10: log.level: expected error, warn, info or debug, "
        "got 'verbose'" } },
    { FX("bad-fence.yml"), {
        "E " FX("bad-fence.yml") ":4:10: lock.fence: expected request or always, "
        "got 'never'" } },
    { FX("username-no-password.yml"), {
        "E " FX("username-no-password.yml") ":4:13: redis.username is set but "
        "redis.password is empty" } },
    { FX("ttl-order.yml"), {
        "E " FX("ttl-order.yml") ":4:19: lock.min_ttl_ms (100, the default) must be at most "
        "lock.default_ttl_ms (50)" } },
    { FX("ttl-min-max.yml"), {
        "E " FX("ttl-min-max.yml") ":5:15: lock.min_ttl_ms (5000) must be at most "
        "lock.max_ttl_ms (1000)" } },
    { FX("ttl-default-max.yml"), {
        "E " FX("ttl-default-max.yml") ":4:19: lock.default_ttl_ms (7200000) must be at most "
        "lock.max_ttl_ms (3600000, the default)" } },
    { FX("delay-max.yml"), {
        "E " FX("delay-max.yml") ":4:13: lock.delay_ms (7200000) must be at most "
        "lock.max_ttl_ms (3600000, the default): a lock-delay is bounded as a lease is "
        "(delay= too)" } },
    { FX("delay-bad.yml"), {
        "E " FX("delay-bad.yml") ":4:13: lock.delay_ms: expected an integer, got '2s'" } },
    { FX("node-timeout.yml"), {
        "E " FX("node-timeout.yml") ":4:20: lock.node_timeout_ms (100) must be less than "
        "lock.min_ttl_ms (100, the default): a round must end well before the shortest "
        "lease expires" } },
    { FX("protected.yml"), {
        "E " FX("protected.yml") ":2:8: listen.tcp \"0.0.0.0:7379\" accepts connections "
        "from other hosts but auth.password is empty (protected mode): set auth.password, "
        "or listen on 127.0.0.1 or [::1]" } },
    { FX("metrics-protected.yml"), {
        "E " FX("metrics-protected.yml") ":4:11: metrics.listen \"0.0.0.0:9379\" accepts "
        "connections from other hosts, and /metrics needs no password (protected mode): set "
        "metrics.allow_remote: true if that is meant (it shows the masters' addresses and the "
        "daemon's counters), or listen on 127.0.0.1 or [::1]" } },
    { FX("auth-space.yml"), {
        "E " FX("auth-space.yml") ":4:13: auth.password: byte 0x20 at offset 3; use printable "
        "ASCII without spaces (it is one word of AUTH <password>)" } },
    { FX("down-after.yml"), {
        "E " FX("down-after.yml") ":4:18: lock.node_timeout_ms (50, the default) must be "
        "less than redis.down_after_ms (50): a master is declared silent only after a "
        "round's deadline" } },
    { FX("no-listener.yml"), {
        "E " FX("no-listener.yml") ":3:9: listen: listen.tcp, listen.unix and listen.tls are "
        "all disabled; enable at least one" } },
    { FX("tls-no-cert.yml"), {
        "E " FX("tls-no-cert.yml") ":2:8: listen.tls \"127.0.0.1:7380\" needs tls.cert_file "
        "(the server's PEM certificate)" } },
    { FX("tls-no-key.yml"), {
        "E " FX("tls-no-key.yml") ":2:8: listen.tls \"127.0.0.1:7380\" needs tls.key_file "
        "(the private key of tls.cert_file)" } },
    { FX("tls-protected.yml"), {
        "E " FX("tls-protected.yml") ":2:8: listen.tls \"0.0.0.0:7380\" accepts connections "
        "from other hosts but neither auth.password nor tls.client_ca_file is set (protected "
        "mode): set one, or listen on 127.0.0.1 or [::1]" } },
    { FX("tls-ciphers-bad.yml"), {
        "E " FX("tls-ciphers-bad.yml") ":8:12: tls.ciphers 'xyz': no cipher matches (an "
        "OpenSSL cipher list of TLS 1.2 suites, like \"ECDHE+AESGCM:ECDHE+CHACHA20\")" } },
    { FX("tls-ciphers-malformed.yml"), {
        "E " FX("tls-ciphers-malformed.yml") ":8:12: tls.ciphers 'ECDHE+AESGCM:@SECLEVEL=x': "
        "not an OpenSSL cipher list (invalid command)" } },
    { FX("tls-ciphersuites-bad.yml"), {
        "E " FX("tls-ciphersuites-bad.yml") ":8:17: tls.ciphersuites 'TLS_NULL_WITH_NOTHING': "
        "no cipher matches (TLS 1.3 suites, like "
        "\"TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256\")" } },
    { FX("tls-policy-no-ca.yml"), {
        "E " FX("tls-policy-no-ca.yml") ":8:20: tls.client_crl_file is set but "
        "tls.client_ca_file is empty (no client certificate is asked for)",
        "E " FX("tls-policy-no-ca.yml") ":9:17: tls.client_names is set but "
        "tls.client_ca_file is empty (no client certificate is asked for)" } },
    { FX("tls-names-bad.yml"), {
        "E " FX("tls-names-bad.yml") ":11:7: tls.client_names[1]: 'two words': byte 0x20 at "
        "offset 3; a name is printable ASCII without spaces",
        "E " FX("tls-names-bad.yml") ":12:7: tls.client_names[2] must be a scalar" } },
    { FX("tls-names-scalar.yml"), {
        "E " FX("tls-names-scalar.yml") ":9:17: tls.client_names must be a sequence, got a "
        "scalar" } },
    { FX("unix-path-long.yml"), {
        "E " FX("unix-path-long.yml") ":2:9: listen.unix: too long (115 bytes, at most 107)" } },
    { FX("key-prefix-long.yml"), {
        "E " FX("key-prefix-long.yml") ":4:15: lock.key_prefix: too long "
        "(257 bytes, at most 256)" } },
    { FX("too-deep.yml"), {
        "E " FX("too-deep.yml") ":3:70: nested deeper than 64 levels" } },
    { FX("too-many-anchors.yml"), {
        "E " FX("too-many-anchors.yml") ":259:5: more than 256 anchors" } },
    { FX("nul-byte.yml"), {
        "E " FX("nul-byte.yml") ":4:15: lock.key_prefix: contains a NUL byte" } },
    { FX("unix-reserved.yml"), {
        "E " FX("unix-reserved.yml") ":5:18: limits.unix_reserved (8) must be less than "
        "limits.max_clients (8): TCP and TLS clients need a slot of their own" } },
    { FX("bad-show-labels.yml"), {
        "E " FX("bad-show-labels.yml") ":4:16: auth.show_labels: expected all or admin, "
        "got 'everyone'" } },
};

#define NBAD    ((int)(sizeof(bad_fixtures) / sizeof(bad_fixtures[0])))

START_TEST(test_bad_fixture)
{
    const struct fixture *fx = &bad_fixtures[_i];
    struct conf conf;

    load_expect(fx->path, &conf, -1, fx->msgs);
    conf_free(&conf);
}
END_TEST

/* ---- good files ---- */

/* Every field at its default; masters as given by the caller. */
static void
assert_defaults(const struct conf *conf)
{
    ck_assert(conf->tcp_enabled);
    ck_assert(!conf->tcp.is_unix);
    ck_assert_str_eq(conf->tcp.host, "127.0.0.1");
    ck_assert_int_eq(conf->tcp.port, 7379);
    ck_assert_str_eq(conf->tcp.spec, "127.0.0.1:7379");
    ck_assert(conf->unix_enabled);
    ck_assert_int_eq(conf->delay_ms, 0);     /* no lock-delay unless set */
    ck_assert_str_eq(conf->unix_path, "/run/redlockd/redlockd.sock");
    ck_assert_uint_eq(conf->unix_mode, 0660);
    ck_assert_str_eq(conf->redis_username, "");
    ck_assert_str_eq(conf->redis_password, "");
    ck_assert_int_eq(conf->connect_timeout_ms, 500);
    ck_assert_int_eq(conf->default_ttl_ms, 30000);
    ck_assert_int_eq(conf->min_ttl_ms, 100);
    ck_assert_int_eq(conf->max_ttl_ms, 3600000);
    ck_assert_int_eq(conf->node_timeout_ms, 50);
    ck_assert_double_eq_tol(conf->drift_factor, 0.01, 1e-12);
    ck_assert_int_eq(conf->retry_delay_ms, 200);
    ck_assert_str_eq(conf->key_prefix, "redlock:");
    ck_assert_int_eq(conf->fence, CONF_FENCE_REQUEST);
    ck_assert_int_eq(conf->max_clients, 10000);
    ck_assert_int_eq(conf->unix_reserved, 16);
    ck_assert_int_eq(conf->max_clients_per_source, 0);
    ck_assert_int_eq(conf->max_unauthenticated, 256);
    ck_assert_int_eq(conf->max_unauthenticated_per_source, 64);
    ck_assert_int_eq(conf->max_watches, 10000);
    ck_assert_int_eq(conf->reads_per_second, 100);
    ck_assert_int_eq(conf->show_labels, CONF_LABELS_ALL);
    ck_assert_int_eq(conf->max_line_bytes, 1024);
    ck_assert_int_eq(conf->max_locks_per_client, 1024);
    ck_assert_int_eq(conf->max_pending, 1024);
    ck_assert_int_eq(conf->down_after_ms, 2000);
    ck_assert(conf->restart_quarantine);
    ck_assert_int_eq(conf->idle_timeout_ms, 30000);
    ck_assert_int_eq(conf->auth_timeout_ms, 5000);
    ck_assert_int_eq(conf->max_output_bytes, 1048576);
    ck_assert_str_eq(conf->auth_password, "");
    ck_assert(conf->auth_unix_exempt);
    ck_assert_str_eq(conf->metrics.spec, "127.0.0.1:9379");
    ck_assert_int_eq(conf->metrics_max_connections, 16);
    ck_assert_int_eq(conf->metrics_request_timeout_ms, 5000);
    ck_assert_int_eq(conf->log_level, CONF_LOG_INFO);
}

START_TEST(test_defaults)
{
    struct conf conf;

    conf_defaults(&conf);
    assert_defaults(&conf);
    ck_assert_ptr_null(conf.file);
    ck_assert_uint_eq(conf.nmasters, 0);
    conf_free(&conf);
    conf_free(&conf);       /* twice is harmless */
}
END_TEST

START_TEST(test_minimal)
{
    struct conf conf;

    load_clean(FX("minimal.yml"), &conf);
    assert_defaults(&conf);
    ck_assert_str_eq(conf.file, FX("minimal.yml"));
    ck_assert_uint_eq(conf.nmasters, 1);
    ck_assert(!conf.masters[0].is_unix);
    ck_assert_str_eq(conf.masters[0].host, "127.0.0.1");
    ck_assert_int_eq(conf.masters[0].port, 7001);
    ck_assert_str_eq(conf.masters[0].spec, "127.0.0.1:7001");
    conf_free(&conf);
}
END_TEST

START_TEST(test_full)
{
    struct conf conf;

    load_clean(FX("full.yml"), &conf);
    ck_assert_str_eq(conf.file, FX("full.yml"));

    ck_assert(conf.tcp_enabled);
    ck_assert(!conf.tcp.is_unix);
    ck_assert_str_eq(conf.tcp.host, "::1");
    ck_assert_int_eq(conf.tcp.port, 7380);
    ck_assert_str_eq(conf.tcp.spec, "[::1]:7380");
    ck_assert(conf.unix_enabled);
    ck_assert_str_eq(conf.unix_path, "/tmp/redlockd-test.sock");
    ck_assert_uint_eq(conf.unix_mode, 0600);

    ck_assert_uint_eq(conf.nmasters, 5);
    ck_assert_str_eq(conf.masters[0].host, "10.0.0.11");
    ck_assert_int_eq(conf.masters[0].port, 6379);
    ck_assert(!conf.masters[1].is_unix);
    ck_assert_str_eq(conf.masters[1].host, "2001:db8::12");
    ck_assert_int_eq(conf.masters[1].port, 6380);
    ck_assert_str_eq(conf.masters[1].spec, "[2001:db8::12]:6380");
    ck_assert(conf.masters[2].is_unix);
    ck_assert_str_eq(conf.masters[2].path, "/var/run/redis/redis.sock");
    ck_assert_str_eq(conf.masters[2].spec, "unix:/var/run/redis/redis.sock");
    ck_assert_str_eq(conf.masters[3].host, "redis-4.example.com");
    ck_assert_int_eq(conf.masters[3].port, 6381);
    ck_assert_str_eq(conf.masters[4].host, "10.0.0.15");
    ck_assert_int_eq(conf.masters[4].port, 6379);

    ck_assert_str_eq(conf.redis_username, "locker");
    ck_assert_str_eq(conf.redis_password, "s3cret");
    ck_assert_int_eq(conf.connect_timeout_ms, 750);
    ck_assert_int_eq(conf.max_pending, 64);
    ck_assert_int_eq(conf.down_after_ms, 1500);

    ck_assert_int_eq(conf.default_ttl_ms, 10000);
    ck_assert_int_eq(conf.min_ttl_ms, 500);
    ck_assert_int_eq(conf.max_ttl_ms, 600000);
    ck_assert_int_eq(conf.node_timeout_ms, 20);
    ck_assert_double_eq_tol(conf.drift_factor, 0.02, 1e-12);
    ck_assert_int_eq(conf.retry_delay_ms, 150);
    ck_assert_str_eq(conf.key_prefix, "redlock:");
    ck_assert_int_eq(conf.fence, CONF_FENCE_ALWAYS);
    ck_assert(!conf.restart_quarantine);

    ck_assert_int_eq(conf.max_clients, 500);
    ck_assert_int_eq(conf.max_line_bytes, 4096);
    ck_assert_int_eq(conf.max_locks_per_client, 16);
    ck_assert_int_eq(conf.idle_timeout_ms, 5000);
    ck_assert_int_eq(conf.max_output_bytes, 65536);
    ck_assert_str_eq(conf.auth_password, "let-me-in");
    ck_assert(!conf.auth_unix_exempt);
    ck_assert_str_eq(conf.metrics.host, "::1");
    ck_assert_int_eq(conf.metrics.port, 9400);
    ck_assert_int_eq(conf.metrics_max_connections, 4);
    ck_assert_int_eq(conf.metrics_request_timeout_ms, 2500);

    ck_assert_int_eq(conf.log_level, CONF_LOG_DEBUG);
    conf_free(&conf);
}
END_TEST

/*
 * listen.tls: off by default; set, it carries its certificate, key and
 * client CA (with a CRL and a list of names); from other hosts with
 * client certificates it needs no password (protected mode is kept by
 * the certificates).  The suites default to forward-secret AEAD ones.
 */
START_TEST(test_tls)
{
    struct conf conf;

    conf_defaults(&conf);
    ck_assert(!conf.tls_enabled);
    ck_assert_str_eq(conf.tls.spec, "");
    ck_assert_str_eq(conf.tls_cert_file, "");
    ck_assert_str_eq(conf.tls_key_file, "");
    ck_assert_str_eq(conf.tls_client_ca_file, "");
    ck_assert_str_eq(conf.tls_client_crl_file, "");
    ck_assert_uint_eq(conf.tls_client_names.n, 0);
    ck_assert_str_eq(conf.tls_ciphers, "ECDHE+AESGCM:ECDHE+CHACHA20");
    ck_assert_str_eq(conf.tls_ciphersuites,
                     "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256");
    conf_free(&conf);

    load_clean(FX("tls-client-certs.yml"), &conf);
    ck_assert(conf.tls_enabled);
    ck_assert_str_eq(conf.tls.host, "0.0.0.0");
    ck_assert_int_eq(conf.tls.port, 7380);
    ck_assert_str_eq(conf.tls_cert_file, "/etc/redlockd/tls/server.crt");
    ck_assert_str_eq(conf.tls_key_file, "/etc/redlockd/tls/server.key");
    ck_assert_str_eq(conf.tls_client_ca_file, "/etc/redlockd/tls/clients-ca.crt");
    ck_assert_str_eq(conf.tls_client_crl_file, "/etc/redlockd/tls/clients-ca.crl");
    ck_assert_uint_eq(conf.tls_client_names.n, 2);
    ck_assert_str_eq(conf.tls_client_names.items[0], "worker-1.example");
    ck_assert_str_eq(conf.tls_client_names.items[1], "redlockd-client");
    ck_assert_str_eq(conf.tls_ciphers, "ECDHE+AESGCM");
    ck_assert_str_eq(conf.tls_ciphersuites, "TLS_AES_128_GCM_SHA256");
    ck_assert_str_eq(conf.auth_password, "");
    conf_free(&conf);
    ck_assert_ptr_null(conf.tls_client_names.items);
    ck_assert_uint_eq(conf.tls_client_names.n, 0);
}
END_TEST

/* Protected mode: loopback needs no password; another address needs one. */
START_TEST(test_protected_mode)
{
    static const char *const loopback[] = {
        "127.0.0.1:7379", "127.1.2.3:7379", "[::1]:7379", "localhost:7379",
        "[::ffff:127.0.0.1]:7379"
    };
    static const char *const open_to_others[] = {
        "0.0.0.0:7379", "[::]:7379", "10.0.0.5:7379", "lockbox.example.com:7379"
    };
    struct conf conf;
    struct conf_msgs msgs;
    size_t i;

    load_clean(FX("protected-ok.yml"), &conf);
    ck_assert_str_eq(conf.auth_password, "hunter2");
    conf_free(&conf);
    load_clean(FX("metrics-remote-ok.yml"), &conf);
    ck_assert(conf.metrics_allow_remote);
    ck_assert_str_eq(conf.metrics.host, "0.0.0.0");
    conf_free(&conf);

    for (i = 0; i < sizeof(loopback) / sizeof(loopback[0]) +
                    sizeof(open_to_others) / sizeof(open_to_others[0]); i++) {
        bool lo = i < sizeof(loopback) / sizeof(loopback[0]);
        const char *addr = lo ? loopback[i]
                              : open_to_others[i - sizeof(loopback) / sizeof(loopback[0])];
        char text[256], *path;

        snprintf(text, sizeof(text), "listen:\n  tcp: \"%s\"\nmasters:\n  - \"127.0.0.1:7001\"\n",
                 addr);
        path = write_temp(text, strlen(text));
        memset(&msgs, 0, sizeof(msgs));
        ck_assert_msg((conf_load(path, &conf, &msgs) == 0) == lo, "%s", addr);
        ck_assert_uint_eq(msgs.nerrors, lo ? 0 : 1);
        if (!lo) {
            ck_assert_ptr_nonnull(strstr(msgs.list[0].text, "protected mode"));
        }
        conf_msgs_free(&msgs);
        conf_free(&conf);
        unlink(path);
        free(path);
    }
}
END_TEST

START_TEST(test_null_sections)
{
    struct conf conf;

    load_clean(FX("null-sections.yml"), &conf);
    assert_defaults(&conf);
    ck_assert_uint_eq(conf.nmasters, 1);
    conf_free(&conf);
}
END_TEST

/* Aliases resolve to the anchored node; cycles are never walked. */
START_TEST(test_aliases)
{
    static const char *const want[] = {
        "E " FX("aliases.yml") ":2:1: unknown section 'base'",
        "E " FX("aliases.yml") ":9:1: unknown section 'copy'",
        "E " FX("aliases.yml") ":10:1: unknown section 'cycle'",
        NULL
    };
    struct conf conf;

    load_expect(FX("aliases.yml"), &conf, -1, want);
    ck_assert_int_eq(conf.default_ttl_ms, 1000);
    ck_assert_uint_eq(conf.nmasters, 3);
    ck_assert_str_eq(conf.masters[1].spec, "127.0.0.1:7002");
    ck_assert_str_eq(conf.masters[2].spec, "127.0.0.1:7003");
    ck_assert_int_eq(conf.log_level, CONF_LOG_DEBUG);
    conf_free(&conf);
}
END_TEST

/*
 * Masters over TLS: rediss://host:port beside plain ones, the scheme kept
 * in the name, and the redis.tls_* keys (all "" by default).
 */
START_TEST(test_tls_masters)
{
    struct conf conf;

    conf_defaults(&conf);
    ck_assert_str_eq(conf.redis_tls_ca_file, "");
    ck_assert_str_eq(conf.redis_tls_cert_file, "");
    ck_assert_str_eq(conf.redis_tls_key_file, "");
    ck_assert_str_eq(conf.redis_tls_server_name, "");
    conf_free(&conf);

    load_clean(FX("tls-masters.yml"), &conf);
    ck_assert_uint_eq(conf.nmasters, 5);
    ck_assert(conf.masters[0].tls);
    ck_assert(!conf.masters[0].is_unix);
    ck_assert_str_eq(conf.masters[0].host, "redis-1.example.com");
    ck_assert_int_eq(conf.masters[0].port, 6380);
    ck_assert_str_eq(conf.masters[0].spec, "rediss://redis-1.example.com:6380");
    ck_assert(!conf.masters[1].tls);
    ck_assert_str_eq(conf.masters[1].spec, "127.0.0.1:7002");
    ck_assert(conf.masters[2].tls);
    ck_assert_str_eq(conf.masters[2].host, "::1");
    ck_assert_str_eq(conf.masters[2].spec, "rediss://[::1]:6380");
    ck_assert(!conf.masters[3].tls);
    ck_assert(conf.masters[3].is_unix);
    ck_assert(conf.masters[4].tls);
    ck_assert_str_eq(conf.redis_tls_ca_file, "/etc/redlockd/tls/redis-ca.crt");
    ck_assert_str_eq(conf.redis_tls_cert_file, "/etc/redlockd/tls/client.crt");
    ck_assert_str_eq(conf.redis_tls_key_file, "/etc/redlockd/tls/client.key");
    ck_assert_str_eq(conf.redis_tls_server_name, "redis.example.com");
    conf_free(&conf);
}
END_TEST

/* The example configs in the repository must load without a message. */
START_TEST(test_repo_configs)
{
    struct conf conf;
    size_t i;

    load_clean("conf/redlockd.yml", &conf);
    assert_defaults(&conf);
    ck_assert_uint_eq(conf.nmasters, 5);
    for (i = 0; i < conf.nmasters; i++) {
        char spec[32];

        snprintf(spec, sizeof(spec), "10.0.0.%zu:6379", 11 + i);
        ck_assert_str_eq(conf.masters[i].spec, spec);
    }
    conf_free(&conf);

    load_clean("conf/dev.yml", &conf);
    ck_assert(conf.tcp_enabled);
    ck_assert_str_eq(conf.tcp.spec, "127.0.0.1:7379");
    ck_assert(conf.unix_enabled);
    ck_assert_str_eq(conf.unix_path, "run/redlockd.sock");
    ck_assert_uint_eq(conf.nmasters, 5);
    for (i = 0; i < conf.nmasters; i++) {
        ck_assert_str_eq(conf.masters[i].host, "127.0.0.1");
        ck_assert_int_eq(conf.masters[i].port, 7001 + (int)i);
    }
    ck_assert_int_eq(conf.default_ttl_ms, 30000);
    ck_assert_int_eq(conf.log_level, CONF_LOG_INFO);
    conf_free(&conf);
}
END_TEST

/*
 * listen.unix against the file system (conf_check_unix_dir): its
 * directory must exist.  The files themselves load cleanly.
 */
START_TEST(test_unix_dir)
{
    static const struct {
        const char *path;       /* fixture */
        const char *want;       /* the error, or NULL when there is none */
    } cases[] = {
        { FX("unix-dir-missing.yml"),
          FX("unix-dir-missing.yml") ":4:9: listen.unix: directory /nonexistent-redlockd-dir "
          "does not exist (the socket is created in it); create it or change listen.unix" },
        { FX("unix-dir-file.yml"),
          FX("unix-dir-file.yml") ":3:9: listen.unix: directory tests/conf/unix-dir-file.yml "
          "is not a directory (the socket is created in it); create it or change "
          "listen.unix" },
        { FX("no-unix.yml"), NULL },        /* listen.unix "" */
        { FX("unix-dir-cwd.yml"), NULL },   /* "redlockd.sock": the working directory */
    };
    struct conf_msgs msgs;
    struct conf conf;
    size_t i;
    int rc;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        load_clean(cases[i].path, &conf);
        memset(&msgs, 0, sizeof(msgs));
        rc = conf_check_unix_dir(&conf, false, &msgs);
        if (cases[i].want == NULL) {
            ck_assert_msg(rc == 0 && msgs.n == 0, "%s: refused: %s", cases[i].path,
                          msgs.n > 0 ? msgs.list[0].text : "(no message)");
        } else {
            ck_assert_msg(rc == -1, "%s: accepted", cases[i].path);
            ck_assert_uint_eq(msgs.n, 1);
            ck_assert_uint_eq(msgs.nerrors, 1);
            ck_assert(msgs.list[0].is_error);
            ck_assert_str_eq(msgs.list[0].text, cases[i].want);
        }
        conf_msgs_free(&msgs);
        conf_free(&conf);
    }

    /* Ahead of the start (redlockd -t): a missing directory is a warning
       that it must exist by then; a file where the directory should be is
       still an error. */
    load_clean(FX("unix-dir-missing.yml"), &conf);
    memset(&msgs, 0, sizeof(msgs));
    ck_assert_int_eq(conf_check_unix_dir(&conf, true, &msgs), 0);
    ck_assert_uint_eq(msgs.n, 1);
    ck_assert_uint_eq(msgs.nerrors, 0);
    ck_assert(!msgs.list[0].is_error);
    ck_assert_str_eq(msgs.list[0].text,
                     FX("unix-dir-missing.yml") ":4:9: listen.unix: directory "
                     "/nonexistent-redlockd-dir does not exist yet (the socket is created in "
                     "it); it must exist when redlockd starts (the systemd unit's "
                     "RuntimeDirectory= creates it)");
    conf_msgs_free(&msgs);
    conf_free(&conf);
    load_clean(FX("unix-dir-file.yml"), &conf);
    memset(&msgs, 0, sizeof(msgs));
    ck_assert_int_eq(conf_check_unix_dir(&conf, true, &msgs), -1);
    ck_assert_uint_eq(msgs.nerrors, 1);
    conf_msgs_free(&msgs);
    conf_free(&conf);
}
END_TEST

/* ---- several problems, warnings ---- */

START_TEST(test_several)
{
    static const char *const want[] = {
        "E " FX("several.yml") ":3:8: listen.tcp: bad address 'localhost': missing ':port'",
        "E " FX("several.yml") ":4:14: listen.unix_mode: expected octal permission bits "
        "like '0660' (at most 0777), got '777x'",
        "W " FX("several.yml") ":6:3: masters: 2 masters tolerate no more failures than 1; "
        "use an odd number",
        "E " FX("several.yml") ":7:5: masters[1]: '127.0.0.1:7001' is listed twice "
        "(first as masters[0])",
        "E " FX("several.yml") ":10:19: lock.min_ttl_ms (1000) must be at most "
        "lock.default_ttl_ms (500)",
        "E " FX("several.yml") ":11:3: unknown key 'ttl' in 'lock'",
        "E " FX("several.yml") ":12:3: unknown key 'max_line_bytes' in 'lock'",
        "E " FX("several.yml") ":14:16: limits.max_clients: -1 is out of range 1..1000000",
        "E " FX("several.yml") ":16:10: log.level: expected error, warn, info or debug, "
        "got 'INFO'",
        "E " FX("several.yml") ":17:1: unknown section 'extra'",
        NULL
    };
    struct conf conf;

    load_expect(FX("several.yml"), &conf, -1, want);
    /* What could be parsed is kept; refused values keep the default. */
    ck_assert_str_eq(conf.tcp.spec, "127.0.0.1:7379");
    ck_assert_uint_eq(conf.unix_mode, 0660);
    ck_assert_uint_eq(conf.nmasters, 1);
    ck_assert_int_eq(conf.min_ttl_ms, 1000);
    ck_assert_int_eq(conf.default_ttl_ms, 500);
    ck_assert_int_eq(conf.max_clients, 10000);
    conf_free(&conf);
}
END_TEST

START_TEST(test_even_masters)
{
    static const char *const want[] = {
        "W " FX("even-masters.yml") ":2:3: masters: 4 masters tolerate no more failures "
        "than 3; use an odd number",
        NULL
    };
    struct conf conf;

    load_expect(FX("even-masters.yml"), &conf, 0, want);
    ck_assert_uint_eq(conf.nmasters, 4);
    ck_assert_int_eq(conf.masters[3].port, 7004);
    conf_free(&conf);
}
END_TEST

/* Messages are appended to what msgs already holds; conf can be reused. */
START_TEST(test_reload_appends)
{
    struct conf conf;
    struct conf_msgs msgs;

    memset(&msgs, 0, sizeof(msgs));
    ck_assert_int_eq(conf_load(FX("even-masters.yml"), &conf, &msgs), 0);
    conf_free(&conf);
    ck_assert_int_eq(conf_load(FX("unknown-key.yml"), &conf, &msgs), -1);
    ck_assert_uint_eq(msgs.n, 2);
    ck_assert_uint_eq(msgs.nerrors, 1);
    ck_assert(!msgs.list[0].is_error);
    ck_assert(msgs.list[1].is_error);
    ck_assert_str_eq(msgs.list[1].text,
                     FX("unknown-key.yml") ":4:3: unknown key 'ttl' in 'lock'");
    conf_free(&conf);
    ck_assert_int_eq(conf_load(FX("minimal.yml"), &conf, &msgs), 0);
    ck_assert_uint_eq(msgs.n, 2);
    conf_free(&conf);
    conf_msgs_free(&msgs);
    ck_assert_ptr_null(msgs.list);
    ck_assert_uint_eq(msgs.n, 0);
    conf_msgs_free(&msgs);
}
END_TEST

/* ---- hostile input ---- */

START_TEST(test_directory)
{
    static const char *const want[] = { "E tests/conf: cannot read: Is a directory", NULL };
    struct conf conf;

    load_expect("tests/conf", &conf, -1, want);
    conf_free(&conf);
}
END_TEST

/*
 * libyaml is quadratic in nesting depth, anchors and %TAG directives:
 * each is cut short, so these finish at once (the tcase timeout catches a
 * regression).
 */
START_TEST(test_deep_nesting)
{
    size_t depth = 200000, i, n = 0;
    char *buf = malloc(depth * 4 + 16);

    ck_assert_ptr_nonnull(buf);
    memcpy(buf, "lock: ", 6);
    n = 6;
    for (i = 0; i < depth; i++) {
        buf[n++] = '[';
    }
    for (i = 0; i < depth; i++) {
        buf[n++] = ']';
    }
    buf[n++] = '\n';
    expect_bytes(buf, n, ":1:70: nested deeper than 64 levels");

    n = 0;
    for (i = 0; i < depth / 4; i++) {
        memcpy(buf + n, "{a: ", 4);
        n += 4;
    }
    buf[n++] = '1';
    for (i = 0; i < depth / 4; i++) {
        buf[n++] = '}';
    }
    expect_bytes(buf, n, ":1:257: nested deeper than 64 levels");

    /* Block mappings, each indented one more. */
    n = 0;
    for (i = 0; i < 100 && n + 200 < depth * 4; i++) {
        memset(buf + n, ' ', i);
        n += i;
        n += (size_t)snprintf(buf + n, depth * 4 - n, "k%zu:\n", i);
    }
    expect_bytes(buf, n, ":65:65: nested deeper than 64 levels");
    free(buf);
}
END_TEST

START_TEST(test_many_anchors_and_tags)
{
    size_t cap = 1024 * 1024, n = 0, i;
    char *buf = malloc(cap);

    ck_assert_ptr_nonnull(buf);
    n += (size_t)snprintf(buf + n, cap - n, "a:\n");
    for (i = 0; i < 50000; i++) {
        n += (size_t)snprintf(buf + n, cap - n, "  - &a%zu v\n", i);
    }
    expect_bytes(buf, n, ":258:5: more than 256 anchors");

    /* Aliases are cheap while the anchors are few. */
    n = (size_t)snprintf(buf, cap, "a: &a v\nb:\n");
    for (i = 0; i < 50000; i++) {
        n += (size_t)snprintf(buf + n, cap - n, "  - *a\n");
    }
    ck_assert_int_eq(load_bytes(buf, n, NULL), -1);

    n = 0;
    for (i = 0; i < 40000; i++) {
        n += (size_t)snprintf(buf + n, cap - n, "%%TAG !a%zu! x:\n", i);
    }
    n += (size_t)snprintf(buf + n, cap - n, "---\nx: !a1! v\n");
    expect_bytes(buf, n, ":65:1: more than 64 YAML directives");
    free(buf);
}
END_TEST

START_TEST(test_huge_scalars)
{
    size_t big = 512 * 1024, nmsgs;
    char *buf = malloc(1024 * 1024 + 64);
    char *name;
    struct conf conf;
    struct conf_msgs msgs;
    int rc;

    ck_assert_ptr_nonnull(buf);

    /* A huge unknown key: the message shows its first bytes only. */
    memcpy(buf, "? ", 2);
    memset(buf + 2, 'k', big);
    memcpy(buf + 2 + big, "\n: 1\n", 5);
    name = write_temp(buf, big + 7);
    memset(&msgs, 0, sizeof(msgs));
    rc = conf_load(name, &conf, &msgs);
    unlink(name);
    ck_assert_int_eq(rc, -1);
    ck_assert_uint_eq(msgs.n, 2);
    ck_assert_ptr_nonnull(strstr(msgs.list[0].text, ":1:3: unknown section 'kkkk"));
    ck_assert_ptr_nonnull(strstr(msgs.list[0].text, "kkk...'"));
    ck_assert_uint_lt(strlen(msgs.list[0].text), 200);
    conf_msgs_free(&msgs);
    conf_free(&conf);
    free(name);

    /* An implicit key is at most 1024 characters long in YAML. */
    memset(buf, 'k', big);
    memcpy(buf + big, ": 1\n", 4);
    expect_bytes(buf, big + 4, ":1:524289: YAML syntax error: "
                 "mapping values are not allowed in this context");

    /* A huge value for an integer, a string and an address. */
    memcpy(buf, "lock:\n  default_ttl_ms: ", 24);
    memset(buf + 24, '9', big);
    memcpy(buf + 24 + big, "\n", 1);
    ck_assert_int_eq(load_bytes(buf, 25 + big, &nmsgs), -1);
    ck_assert_uint_eq(nmsgs, 2);

    memcpy(buf, "lock:\n  key_prefix: ", 20);
    memset(buf + 20, 'p', big);
    ck_assert_int_eq(load_bytes(buf, 20 + big, &nmsgs), -1);
    ck_assert_uint_eq(nmsgs, 2);

    memcpy(buf, "masters: [", 10);
    memset(buf + 10, 'h', big);
    memcpy(buf + 10 + big, ":1]", 3);
    ck_assert_int_eq(load_bytes(buf, 13 + big, &nmsgs), -1);
    ck_assert_uint_eq(nmsgs, 1);

    /* 1 MiB is the largest file read. */
    memset(buf, '#', 1024 * 1024 + 1);
    ck_assert_int_eq(load_bytes(buf, 1024 * 1024, &nmsgs), -1);
    ck_assert_uint_eq(nmsgs, 1);    /* masters: required */
    expect_bytes(buf, 1024 * 1024 + 1, ": cannot read: larger than 1048576 bytes");
    free(buf);
}
END_TEST

/* Control bytes and non-ASCII text are escaped in messages. */
START_TEST(test_escaped_text)
{
    static const char text[] = "lock:\n  \"t\\e[1m\\u00e9\": 1\nmasters: [\"h:1\"]\n";
    struct conf conf;
    struct conf_msgs msgs;
    char *name = write_temp(text, sizeof(text) - 1);
    char want[256];
    int rc;

    memset(&msgs, 0, sizeof(msgs));
    rc = conf_load(name, &conf, &msgs);
    unlink(name);
    ck_assert_int_eq(rc, -1);
    ck_assert_uint_eq(msgs.n, 1);
    snprintf(want, sizeof(want), "%s:2:3: unknown key 't\\x1b[1m\\xc3\\xa9' in 'lock'", name);
    ck_assert_str_eq(msgs.list[0].text, want);
    conf_msgs_free(&msgs);
    conf_free(&conf);
    free(name);
}
END_TEST

/* A file full of problems is cut at 100 messages plus a notice. */
START_TEST(test_too_many_messages)
{
    size_t cap = 200 * 16, n = 0, i;
    char *buf = malloc(cap);
    struct conf conf;
    struct conf_msgs msgs;
    char *name;
    int rc;

    ck_assert_ptr_nonnull(buf);
    for (i = 0; i < 150; i++) {
        n += (size_t)snprintf(buf + n, cap - n, "s%zu: 1\n", i);
    }
    name = write_temp(buf, n);
    memset(&msgs, 0, sizeof(msgs));
    rc = conf_load(name, &conf, &msgs);
    unlink(name);
    ck_assert_int_eq(rc, -1);
    ck_assert_uint_eq(msgs.n, 101);
    ck_assert_uint_eq(msgs.nerrors, 101);
    ck_assert_ptr_nonnull(strstr(msgs.list[0].text, ":1:1: unknown section 's0'"));
    ck_assert_ptr_nonnull(strstr(msgs.list[99].text, ":100:1: unknown section 's99'"));
    ck_assert_ptr_nonnull(strstr(msgs.list[100].text,
                                 ": too many problems, only the first 100 are shown"));
    conf_msgs_free(&msgs);
    conf_free(&conf);
    free(name);
    free(buf);
}
END_TEST

/* Every prefix of the good files, and random byte changes: never a crash. */
START_TEST(test_mangled)
{
    static const char *const files[] = { FX("full.yml"), FX("aliases.yml"), NULL };
    size_t f, len, i;
    unsigned seed = 12345;

    for (f = 0; files[f] != NULL; f++) {
        char *orig = read_all(files[f], &len);
        char *buf = malloc(len + 1);

        ck_assert_ptr_nonnull(buf);
        for (i = 0; i <= len; i += 3) {
            load_bytes(orig, i, NULL);
        }
        for (i = 0; i < 150; i++) {
            size_t k, changes = 1 + (size_t)(rand_r(&seed) % 4);

            memcpy(buf, orig, len);
            for (k = 0; k < changes; k++) {
                buf[(size_t)rand_r(&seed) % len] = (char)(rand_r(&seed) & 0xff);
            }
            load_bytes(buf, len, NULL);
        }
        free(buf);
        free(orig);
    }
}
END_TEST

/* ---- conf_parse_addr ---- */

struct addr_case {
    const char *spec;
    bool        allow_unix;
    const char *host;           /* NULL: an error or a unix path */
    int         port;
    const char *path;           /* for unix: */
    const char *err;            /* expected reason when it fails */
};

/* 64 bytes of a host name, to build over-long ones. */
#define ADDR_64 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static const struct addr_case addr_cases[] = {
    { "127.0.0.1:7001", false, "127.0.0.1", 7001, NULL, NULL },
    { "localhost:6379", false, "localhost", 6379, NULL, NULL },
    { "redis-1.example.com:1", false, "redis-1.example.com", 1, NULL, NULL },
    { "h:65535", false, "h", 65535, NULL, NULL },
    { "[::1]:7379", false, "::1", 7379, NULL, NULL },
    { "[2001:db8::1]:6379", true, "2001:db8::1", 6379, NULL, NULL },
    { "[::ffff:10.0.0.1]:6379", false, "::ffff:10.0.0.1", 6379, NULL, NULL },
    { "unix:/run/redis.sock", true, NULL, 0, "/run/redis.sock", NULL },
    { "", true, NULL, 0, NULL, "empty address" },
    { "1.2.3.4", false, NULL, 0, NULL, "missing ':port'" },
    { "host", false, NULL, 0, NULL, "missing ':port'" },
    { "host:", false, NULL, 0, NULL, "missing port number after ':'" },
    { ":6379", false, NULL, 0, NULL, "empty host" },
    { "[]:6379", false, NULL, 0, NULL, "empty host" },
    { "h:0", false, NULL, 0, NULL, "port 0 out of range 1..65535" },
    { "h:70000", false, NULL, 0, NULL, "port 70000 out of range 1..65535" },
    { "h:99999999999999999999", false, NULL, 0, NULL,
      "port 99999999999999999999 out of range 1..65535" },
    { "h:-1", false, NULL, 0, NULL, "bad port '-1'" },
    { "h:6379x", false, NULL, 0, NULL, "bad port '6379x'" },
    { "h: 6379", false, NULL, 0, NULL, "bad port ' 6379'" },
    { "::1:6379", false, NULL, 0, NULL,
      "an IPv6 address must be in brackets, like '[::1]:6379'" },
    { "[::1:6379", false, NULL, 0, NULL, "missing ']'" },
    { "[::1]", false, NULL, 0, NULL, "missing ':port'" },
    { "[::1]6379", false, NULL, 0, NULL, "expected ':port' after ']'" },
    { "[::g]:6379", false, NULL, 0, NULL, "'::g' is not an IPv6 address" },
    { "[10.0.0.1]:6379", false, NULL, 0, NULL, "'10.0.0.1' is not an IPv6 address" },
    /* A bracketed host longer than a host may be, as the fuzzer found it (once written past a.host). */
    { "[" ADDR_64 ADDR_64 ADDR_64 ADDR_64 "abcd]:6379", false, NULL, 0, NULL,
      "host is 260 bytes, at most 255" },
    { "256.1.1.1:6379", false, NULL, 0, NULL, "'256.1.1.1' is not an IPv4 address" },
    { "1.2.3:6379", false, NULL, 0, NULL, "'1.2.3' is not an IPv4 address" },
    { "my_host:6379", false, NULL, 0, NULL, "bad character '_' in host" },
    { "h\x01st:6379", false, NULL, 0, NULL, "bad character '\\x01' in host" },
    { "h\xc3\xa9:6379", false, NULL, 0, NULL, "bad character '\\xc3' in host" },
    { "a b:6379", false, NULL, 0, NULL, "bad character ' ' in host" },
    { "unix:/run/redis.sock", false, NULL, 0, NULL, "a unix: socket is not allowed here" },
    { "unix:run/redis.sock", true, NULL, 0, NULL, "unix socket path must be absolute" },
    { "unix:", true, NULL, 0, NULL, "unix socket path must be absolute" },
};

#define NADDR   ((int)(sizeof(addr_cases) / sizeof(addr_cases[0])))

START_TEST(test_parse_addr)
{
    const struct addr_case *c = &addr_cases[_i];
    struct conf_addr addr;
    char err[256] = "";
    int rc;

    memset(&addr, 0x55, sizeof(addr));
    rc = conf_parse_addr(c->spec, c->allow_unix, &addr, err, sizeof(err));
    if (c->err != NULL) {
        ck_assert_msg(rc == -1, "'%s' was accepted", c->spec);
        ck_assert_str_eq(err, c->err);
        ck_assert(!addr.is_unix);
        ck_assert_str_eq(addr.spec, "");
        return;
    }
    ck_assert_msg(rc == 0, "'%s' refused: %s", c->spec, err);
    ck_assert_str_eq(addr.spec, c->spec);
    if (c->path != NULL) {
        ck_assert(addr.is_unix);
        ck_assert_str_eq(addr.path, c->path);
        ck_assert_str_eq(addr.host, "");
        ck_assert_int_eq(addr.port, 0);
    } else {
        ck_assert(!addr.is_unix);
        ck_assert_str_eq(addr.host, c->host);
        ck_assert_int_eq(addr.port, c->port);
        ck_assert_str_eq(addr.path, "");
    }
}
END_TEST

START_TEST(test_parse_addr_limits)
{
    struct conf_addr addr;
    char spec[600], err[256];
    size_t i;

    /* A 255-byte host name is the longest that fits. */
    for (i = 0; i < 255; i++) {
        spec[i] = 'a';
    }
    strcpy(spec + 255, ":6379");
    ck_assert_int_eq(conf_parse_addr(spec, false, &addr, err, sizeof(err)), 0);
    ck_assert_uint_eq(strlen(addr.host), 255);
    ck_assert_str_eq(addr.spec, spec);

    spec[255] = 'a';
    strcpy(spec + 256, ":6379");
    ck_assert_int_eq(conf_parse_addr(spec, false, &addr, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "host is 256 bytes, at most 255");

    memset(spec, 'a', 500);
    strcpy(spec + 500, ":6379");
    ck_assert_int_eq(conf_parse_addr(spec, false, &addr, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "address is too long (505 bytes)");

    /* A 107-byte unix path fits sun_path with its NUL; 108 does not. */
    strcpy(spec, "unix:/");
    for (i = 6; i < 5 + 107; i++) {
        spec[i] = 'p';
    }
    spec[5 + 107] = '\0';
    ck_assert_int_eq(conf_parse_addr(spec, true, &addr, err, sizeof(err)), 0);
    ck_assert_uint_eq(strlen(addr.path), 107);
    spec[5 + 107] = 'p';
    spec[5 + 108] = '\0';
    ck_assert_int_eq(conf_parse_addr(spec, true, &addr, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "unix socket path is 108 bytes, at most 107");

    /* No room for the reason is not a crash. */
    ck_assert_int_eq(conf_parse_addr("x", false, &addr, NULL, 0), -1);
    ck_assert_int_eq(conf_parse_addr("x", false, &addr, err, 1), -1);
    ck_assert_str_eq(err, "");
}
END_TEST

START_TEST(test_level_names)
{
    ck_assert_str_eq(conf_log_level_name(CONF_LOG_ERROR), "error");
    ck_assert_str_eq(conf_log_level_name(CONF_LOG_WARN), "warn");
    ck_assert_str_eq(conf_log_level_name(CONF_LOG_INFO), "info");
    ck_assert_str_eq(conf_log_level_name(CONF_LOG_DEBUG), "debug");
    ck_assert_str_eq(conf_log_level_name((enum conf_log_level)42), "?");
}
END_TEST

static Suite *
conf_suite(void)
{
    Suite *s = suite_create("conf");
    TCase *tc;

    tc = tcase_create("fixtures");
    tcase_add_loop_test(tc, test_bad_fixture, 0, NBAD);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_minimal);
    tcase_add_test(tc, test_full);
    tcase_add_test(tc, test_protected_mode);
    tcase_add_test(tc, test_tls);
    tcase_add_test(tc, test_tls_masters);
    tcase_add_test(tc, test_null_sections);
    tcase_add_test(tc, test_aliases);
    tcase_add_test(tc, test_repo_configs);
    tcase_add_test(tc, test_unix_dir);
    tcase_add_test(tc, test_several);
    tcase_add_test(tc, test_even_masters);
    tcase_add_test(tc, test_reload_appends);
    suite_add_tcase(s, tc);

    tc = tcase_create("hostile");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_directory);
    tcase_add_test(tc, test_deep_nesting);
    tcase_add_test(tc, test_many_anchors_and_tags);
    tcase_add_test(tc, test_huge_scalars);
    tcase_add_test(tc, test_escaped_text);
    tcase_add_test(tc, test_too_many_messages);
    tcase_add_test(tc, test_mangled);
    suite_add_tcase(s, tc);

    tc = tcase_create("addr");
    tcase_add_loop_test(tc, test_parse_addr, 0, NADDR);
    tcase_add_test(tc, test_parse_addr_limits);
    tcase_add_test(tc, test_level_names);
    suite_add_tcase(s, tc);

    return s;
}

const struct runner runner_main = { "check_conf", conf_suite, NULL, NULL };
