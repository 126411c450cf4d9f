/*
 * expect.c: helpers the end-to-end suites share (tests/expect.h says
 * what each does): starting a test's masters and daemons, requiring
 * replies and STATS, conditions for h_wait_until, netcat runs.  They
 * assert with Check, so only Check suites link this file; the harness
 * (tests/harness.c) stays free of Check for the fault suite.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/wait.h>

#include <check.h>

#include "tests/expect.h"
#include "tests/harness.h"

#define EXPECT_NC_MS    5000    /* deadline for one nc run, start to exit */

const struct h_daemon_opts expect_opts = {
    .retry_delay_ms = 100,
};

const struct h_daemon_opts expect_prefix_opts = {
    .retry_delay_ms = 100,
    .key_prefix = "redlock:",
};

/*
 * Parse the start of a reply, "<status> <name> <key>=<integer>" (the
 * integer may be negative), into *value.  Returns a pointer just after
 * the integer, where the callers check the rest of the line, or NULL
 * when the line does not start that way.
 */
const char *
expect_parse_status_int(const char *line, const char *status, const char *name,
                        const char *key, long long *value)
{
    char head[512];
    size_t n;
    char *end;

    n = (size_t)snprintf(head, sizeof(head), "%s %s %s=", status, name, key);
    if (n >= sizeof(head) || strncmp(line, head, n) != 0) {
        return NULL;
    }
    line += n;
    if (!isdigit((unsigned char)line[0]) && !(line[0] == '-' && isdigit((unsigned char)line[1]))) {
        return NULL;
    }
    errno = 0;
    *value = strtoll(line, &end, 10);
    return errno == 0 ? end : NULL;
}

/* True when line is exactly "OK <name> validity=V holds=H". */
bool
expect_parse_lock_ok(const char *line, const char *name, long long *validity, unsigned *holds)
{
    const char *p = expect_parse_status_int(line, "OK", name, "validity", validity);
    char *end;
    unsigned long h;

    if (p == NULL || strncmp(p, " holds=", 7) != 0 || !isdigit((unsigned char)p[7])) {
        return false;
    }
    h = strtoul(p + 7, &end, 10);
    *holds = (unsigned)h;
    return *end == '\0';
}

/* Read a line within ms and require it to be exactly want. */
void
expect_line(int fd, const char *want, int64_t ms, const char *what)
{
    char *got = h_read_line(fd, ms);

    ck_assert_msg(got != NULL && strcmp(got, want) == 0, "%s: got '%s', expected '%s'", what,
                  got != NULL ? got : "(nothing)", want);
    free(got);
}

/* Require a STATS counter to reach want (or, with at_least, want or more) in time. */
void
expect_wait_stat(const char *name, long long want, bool at_least, int64_t timeout_ms)
{
    long long seen;

    ck_assert_msg(h_wait_stat(name, want, at_least, timeout_ms, &seen),
                  "STAT %s stayed at %lld, expected %s%lld within %lld ms", name, seen,
                  at_least ? ">= " : "", want, (long long)timeout_ms);
}

/* STATS counter name of the current daemon, which must be there. */
long long
expect_stat(const char *name)
{
    long long v = -1;

    ck_assert_msg(h_stat_once(name, &v) == 0, "STATS has no %s", name);
    return v;
}

/* STATS counter name of daemon d over a connection of its own; -1 if absent. */
long long
expect_daemon_stat(size_t d, const char *name)
{
    long long v;

    h_use_daemon(d);
    return h_stat_once(name, &v) == 0 ? v : -1;
}

/* True when the daemon log contains text. */
bool
expect_log_has(const char *text)
{
    return h_log_find(0, text, NULL, 0);
}

size_t
expect_log_count(const char *text)
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

char *
expect_read_file(const char *path)
{
    FILE *f = fopen(path, "re");
    char *text;
    long size;

    ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    size = ftell(f);
    ck_assert_int_ge(size, 0);
    rewind(f);
    text = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(fread(text, 1, (size_t)size, f) == (size_t)size, "short read of %s", path);
    text[size] = '\0';
    fclose(f);
    return text;
}

/*
 * The key of lock name on the masters of a daemon started without a
 * lock.key_prefix (the harness's default), into out.
 */
void
expect_key(const char *name, char *out, size_t size)
{
    ck_assert((size_t)snprintf(out, size, "%s%s", "", name) < size);
}

/* Copy file from to file to (both in the certificates' directory), or fail the test. */
static void
expect_copy_cert(const char *from, const char *to)
{
    char src[PATH_MAX + 64], buf[4096];
    ssize_t n;
    int in, out;

    snprintf(src, sizeof(src), "%s", h_cert(from));
    in = open(src, O_RDONLY | O_CLOEXEC);
    ck_assert_msg(in >= 0, "cannot read %s: %s", src, strerror(errno));
    out = open(h_cert(to), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ck_assert_msg(out >= 0, "cannot write %s: %s", h_cert(to), strerror(errno));
    while ((n = read(in, buf, sizeof(buf))) > 0) {
        ck_assert_msg(write(out, buf, (size_t)n) == n, "cannot write %s", h_cert(to));
    }
    ck_assert_msg(n == 0, "cannot read %s", src);
    close(in);
    ck_assert_msg(close(out) == 0, "cannot write %s", h_cert(to));
}

/* Start daemon d of s with o, on the build s names for it (an older one) or $REDLOCKD_BIN. */
static void
expect_setup_daemon(const struct expect_setup *s, size_t d, struct h_daemon_opts *o)
{
    const char *bin = s->builds != NULL ? s->builds[d] : NULL;
    const char *now = getenv("REDLOCKD_BIN");
    char *mine = now != NULL ? strdup(now) : NULL;
    int rc;

    if (bin == NULL) {
        free(mine);
        ck_assert_msg(h_start_daemon(o) == 0, "redlockd %zu did not start (log above)", d);
        return;
    }
    /* The one way the harness picks a daemon's binary: $REDLOCKD_BIN at its start. */
    ck_assert(setenv("REDLOCKD_BIN", bin, 1) == 0);
    o->known_keys_only = true;
    rc = h_start_daemon(o);
    o->known_keys_only = s->opts != NULL && s->opts->known_keys_only;
    ck_assert(mine != NULL ? setenv("REDLOCKD_BIN", mine, 1) == 0
                           : unsetenv("REDLOCKD_BIN") == 0);
    free(mine);
    ck_assert_msg(rc == 0, "redlockd %zu (%s) did not start (log above)", d, bin);
}

void
expect_setup(const struct expect_setup *s)
{
    struct h_daemon_opts o = { 0 };
    char cert[PATH_MAX + 64], key[PATH_MAX + 64], ca[PATH_MAX + 64], crl[PATH_MAX + 64];
    char dir[PATH_MAX + 64];
    const char *const *c;
    size_t d;

    if (s->opts != NULL) {
        o = *s->opts;
    }
    ck_assert_msg(h_begin(tcase_name()) == 0, "cannot create the test directory");
    if (s->certs || s->copies != NULL || s->tls_cert != NULL || s->tls_client_ca != NULL
        || s->tls_client_crl != NULL || s->tls_masters) {
        ck_assert_msg(h_make_certs() == 0, "tests/tls/make-certs.sh failed (see make-certs.log)");
    }
    for (c = s->copies; c != NULL && c[0] != NULL; c += 2) {
        expect_copy_cert(c[0], c[1]);
    }
    if (s->tls_cert != NULL) {
        snprintf(cert, sizeof(cert), "%s/certs/%s.crt", h_dir(), s->tls_cert);
        snprintf(key, sizeof(key), "%s/certs/%s.key", h_dir(), s->tls_cert);
        o.tls_cert_file = cert;
        o.tls_key_file = key;
    }
    if (s->tls_client_ca != NULL) {
        snprintf(ca, sizeof(ca), "%s", h_cert(s->tls_client_ca));
        o.tls_client_ca_file = ca;
    }
    if (s->tls_client_crl != NULL) {
        snprintf(crl, sizeof(crl), "%s", h_cert(s->tls_client_crl));
        o.tls_client_crl_file = crl;
    }
    if (s->tls_masters) {
        snprintf(dir, sizeof(dir), "%s/certs", h_dir());
        h_tls_masters(dir, s->tls_masters_auth);
    }
    if (s->clock_masters != 0) {
        ck_assert_msg(h_clock_masters(s->clock_masters) == 0,
                      "no steppable master (build/redis-libc/redis-server and libfaketime)");
    }
    if (s->masters > 0) {
        ck_assert_msg((s->aof ? h_start_masters_aof(s->masters) : h_start_masters(s->masters))
                      == 0, "the masters did not start");
    }
    if (s->metrics_port != NULL) {
        *s->metrics_port = h_free_port();
        ck_assert_msg(*s->metrics_port > 0, "no free port");
        o.metrics_port = *s->metrics_port;
    }
    for (d = 0; d < s->daemons; d++) {
        expect_setup_daemon(s, d, &o);
    }
    if (s->daemons > 0) {
        h_use_daemon(0);
    }
}

/* arg: const char **key.  The key is absent from every master. */
bool
expect_cond_key_gone(void *arg)
{
    return h_masters_without(*(const char **)arg) == h_master_count();
}

/* arg: const char **key.  The key is absent from every master that answers. */
bool
expect_cond_key_gone_alive(void *arg)
{
    return h_masters_without(*(const char **)arg) == h_masters_alive();
}

/* arg: struct expect_keyval.  Exactly want masters hold key = value. */
bool
expect_cond_holding(void *arg)
{
    struct expect_keyval *kv = arg;

    return h_masters_holding(kv->key, kv->value) == kv->want;
}

/* DEL key on every master. */
void
expect_del_everywhere(const char *key)
{
    size_t i;

    for (i = 0; i < h_master_count(); i++) {
        ck_assert_msg(h_master_cmd(i, NULL, "DEL %s", key) == 0, "DEL %s on master %zu", key,
                      i);
    }
}

/* Read a line within ms and require it to start with "! LOST <name> reason=X". */
void
expect_lost(int fd, const char *name, int64_t ms, const char *what)
{
    char head[300], *got = h_read_line(fd, ms);

    snprintf(head, sizeof(head), "! LOST %s reason=", name);
    ck_assert_msg(got != NULL && strncmp(got, head, strlen(head)) == 0
                  && got[strlen(head)] != '\0',
                  "%s: got '%s', expected '%s<reason>'", what, got != NULL ? got : "(nothing)",
                  head);
    free(got);
}

/*
 * An abortive close: SO_LINGER 0, so that the kernel sends a reset
 * (the daemon reads an error, not an end of input), then close(fd).
 */
void
expect_reset(int fd)
{
    struct linger lg = { 1, 0 };

    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    close(fd);
}

/*
 * Run argv (nc and its arguments) with input on its stdin, then end of
 * file there (the pipe of `printf ... | nc`), and collect its stdout
 * until it exits or timeout_ms passed; then it is killed.  It is
 * always reaped.  The child dies with the test (h_child_setup).
 */
void
expect_nc_argv(const char *const argv[], const char *input, int64_t timeout_ms,
               struct expect_nc *r)
{
    int64_t t0 = h_now_ms(), deadline = t0 + timeout_ms, left;
    char errpath[4096 + 16], buf[1024];
    pid_t parent = getpid(), pid, w;
    int in[2], out[2], errfd, wstatus = 0;
    struct pollfd pfd;
    ssize_t n;
    size_t k;

    memset(r, 0, sizeof(*r));
    r->first_ms = -1;
    r->exit_ms = -1;
    r->status = -1;
    snprintf(errpath, sizeof(errpath), "%s/nc.err", h_dir());
    errfd = open(errpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_msg(errfd >= 0, "open %s: %s", errpath, strerror(errno));
    ck_assert_msg(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0, "pipe2: %s",
                  strerror(errno));
    pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        h_child_setup(parent);
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(errfd, 2) < 0) {
            _exit(127);
        }
        execvp(argv[0], (char *const *)argv);
        dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    /* The input is far below a pipe's capacity: this does not block. */
    for (k = 0; k < strlen(input); k += (size_t)n) {
        n = write(in[1], input + k, strlen(input) - k);
        if (n <= 0) {
            break;
        }
    }
    close(in[1]);
    for (;;) {
        left = deadline - h_now_ms();
        if (left <= 0) {
            break;
        }
        pfd.fd = out[0];
        pfd.events = POLLIN;
        pfd.revents = 0;
        if (poll(&pfd, 1, (int)left) <= 0) {
            continue;
        }
        n = read(out[0], buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;      /* end of nc's output: it exits */
        }
        if (r->first_ms < 0 && memchr(buf, '\n', (size_t)n) != NULL) {
            r->first_ms = h_now_ms() - t0;
        }
        k = (size_t)n < sizeof(r->out) - 1 - r->len ? (size_t)n : sizeof(r->out) - 1 - r->len;
        memcpy(r->out + r->len, buf, k);
        r->len += k;
    }
    close(out[0]);
    for (;;) {
        w = waitpid(pid, &wstatus, WNOHANG);
        if (w == pid) {
            r->exit_ms = h_now_ms() - t0;
            r->status = h_decode_status(wstatus);
            break;
        }
        if ((w < 0 && errno != EINTR) || h_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
                continue;
            }
            break;
        }
        h_sleep_ms(5);
    }
    r->out[r->len] = '\0';
    n = pread(errfd, r->err, sizeof(r->err) - 1, 0);
    r->err[n > 0 ? n : 0] = '\0';
    close(errfd);
}

/* nc <flag> 127.0.0.1 <daemon port>, fed input. */
void
expect_nc_tcp(const char *flag, const char *input, struct expect_nc *r)
{
    char port[16];
    const char *argv[] = { "nc", flag, "127.0.0.1", port, NULL };

    snprintf(port, sizeof(port), "%d", h_daemon_port());
    expect_nc_argv(argv, input, EXPECT_NC_MS, r);
}

/* nc's output and stderr as one printable string for a failure message. */
const char *
expect_nc_show(const struct expect_nc *r)
{
    static char buf[8192];
    size_t i, k = 0;
    const char *parts[2] = { r->out, r->err };
    int p;

    for (p = 0; p < 2; p++) {
        k += (size_t)snprintf(buf + k, sizeof(buf) - k, p == 0 ? "stdout '" : "' stderr '");
        for (i = 0; parts[p][i] != '\0' && k < sizeof(buf) - 16; i++) {
            unsigned char c = (unsigned char)parts[p][i];

            if (c == '\n') {
                k += (size_t)snprintf(buf + k, sizeof(buf) - k, "\\n");
            } else if (c < 0x20 || c > 0x7e) {
                k += (size_t)snprintf(buf + k, sizeof(buf) - k, "\\x%02x", c);
            } else {
                buf[k++] = (char)c;
            }
        }
    }
    snprintf(buf + k, sizeof(buf) - k, "' exit %d after %lld ms", r->status,
             (long long)r->exit_ms);
    return buf;
}

/* Sum of EVALSHA and EVAL calls on master i (the daemon's rounds), or -1. */
long long
expect_script_calls(size_t i)
{
    return h_master_calls(i, "evalsha");
}

/*
 * Require STATS name to reach want in time, read over the Unix socket
 * (u): a TCP connection would count itself, or be refused.
 */
void
expect_wait_stat_on(int u, const char *name, long long want)
{
    long long seen = -1;
    int64_t deadline = h_now_ms() + H_PROMPT_MS;

    while (h_stat(u, name, &seen) == 0 && seen != want && h_now_ms() < deadline) {
        h_sleep_ms(10);
    }
    ck_assert_msg(seen == want, "STATS %s is %lld, expected %lld", name, seen, want);
}

/* Require STATS unauthenticated to reach want in time, read over the Unix socket u. */
void
expect_wait_unauthenticated(int u, long long want)
{
    expect_wait_stat_on(u, "unauthenticated", want);
}

#define EXPECT_PROXIES_MAX  8       /* delay proxies per test */
#define EXPECT_PROXY_MS     5000    /* deadline for a proxy to listen or switch */

/* A delay proxy between a daemon and one master; see expect_proxy_start. */
struct expect_proxy {
    pid_t pid;                  /* the delay-proxy process; 0 once it exited */
    char  addr[32];             /* "127.0.0.1:port": the master's address for the daemon */
    char  log[PATH_MAX];        /* its stdout and stderr */
};

static struct expect_proxy expect_proxies[EXPECT_PROXIES_MAX]; /* the test's, in start order */
static size_t              expect_nproxies;                    /* how many were started */

/* True when the file at path has a line that contains text. */
static bool
expect_file_has(const char *path, const char *text)
{
    char *line = NULL;
    size_t cap = 0;
    bool found = false;
    FILE *f = fopen(path, "re");

    while (f != NULL && !found && getline(&line, &cap, f) > 0) {
        found = strstr(line, text) != NULL;
    }
    free(line);
    if (f != NULL) {
        fclose(f);
    }
    return found;
}

/* arg: struct expect_proxy.  It listens, or it exited (reaped here, pid 0). */
static bool
expect_cond_listening(void *arg)
{
    struct expect_proxy *p = arg;

    if (waitpid(p->pid, NULL, WNOHANG) == p->pid) {
        p->pid = 0;
        return true;
    }
    return expect_file_has(p->log, "listening");
}

/* arg: struct expect_proxy.  It said that its delay is on. */
static bool
expect_cond_delay_on(void *arg)
{
    return expect_file_has(((struct expect_proxy *)arg)->log, ": delay on");
}

const char *
expect_proxy_start(size_t i, long delay_ms, bool subscribers_only)
{
    const char *bin = getenv("DELAY_PROXY_BIN");
    char target[32], delay[48];
    const char *argv[9];
    struct expect_proxy *p;
    int tries, port;

    if (bin == NULL || bin[0] == '\0') {
        bin = "./build/delay-proxy";
    }
    ck_assert_msg(access(bin, X_OK) == 0, "no delay proxy at %s (make build/delay-proxy, "
                  "or set DELAY_PROXY_BIN)", bin);
    ck_assert(expect_nproxies < EXPECT_PROXIES_MAX);
    p = &expect_proxies[expect_nproxies];
    snprintf(target, sizeof(target), "127.0.0.1:%d", h_master_port(i));
    snprintf(delay, sizeof(delay), "%ld-%ld", delay_ms, delay_ms);
    snprintf(p->log, sizeof(p->log), "%s/delay-proxy-%zu.log", h_dir(), expect_nproxies);
    for (tries = 0; tries < 5; tries++) {
        port = h_free_port();
        ck_assert_msg(port > 0, "no free port for a delay proxy");
        snprintf(p->addr, sizeof(p->addr), "127.0.0.1:%d", port);
        argv[0] = bin;
        argv[1] = "-l";
        argv[2] = p->addr;
        argv[3] = "-t";
        argv[4] = target;
        argv[5] = "-d";
        argv[6] = delay;
        argv[7] = subscribers_only ? "-s" : NULL;
        argv[8] = NULL;
        p->pid = h_spawn(argv, p->log);
        ck_assert_msg(p->pid > 0, "cannot start %s", bin);
        expect_nproxies++;
        ck_assert_msg(h_wait_until(expect_cond_listening, p, EXPECT_PROXY_MS),
                      "the delay proxy in front of master %zu did not listen within %d ms "
                      "(see %s)", i, EXPECT_PROXY_MS, p->log);
        if (p->pid > 0) {
            return p->addr;
        }
        /* Its port was taken meanwhile: it exited; try another one. */
        expect_nproxies--;
    }
    ck_abort_msg("the delay proxy in front of master %zu would not start (see %s)", i, p->log);
    return NULL;
}

void
expect_proxies_on(void)
{
    size_t i;

    for (i = 0; i < expect_nproxies; i++) {
        ck_assert_int_eq(kill(expect_proxies[i].pid, SIGUSR1), 0);
    }
    for (i = 0; i < expect_nproxies; i++) {
        ck_assert_msg(h_wait_until(expect_cond_delay_on, &expect_proxies[i], EXPECT_PROXY_MS),
                      "delay proxy %zu did not turn its delay on (see %s)", i,
                      expect_proxies[i].log);
    }
}
