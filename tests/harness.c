/*
 * harness.c: processes, files and a line client for the integration
 * tests (see harness.h).  The line client is the client library's
 * (client/client.h), used without read-ahead so that a test may read
 * the same socket itself between two lines.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <hiredis/hiredis.h>

#include "client/client.h"
#include "tests/harness.h"

#define H_POLL_MS           5       /* interval of h_wait_until */
#define H_READY_POLL_MS     10      /* interval while a process starts */
#define H_PORT_TRIES        5       /* starts on a fresh port before giving up */
#define H_STOP_MS           5000    /* h_stop_daemon: SIGTERM, then SIGKILL */
#define H_TAIL_LINES        40      /* log lines shown for a failed test */
#define H_TAIL_BYTES        (64 * 1024) /* at most this much of a log is read */
#define H_STATS_LINE_MS     1000    /* deadline per line of a STATS reply */
#define H_CONNECT_MS        10000   /* deadline of h_connect_* (loopback: at once) */
#define H_FAKETIME_LIB      "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
#define H_REDIS_LIBC_BIN    "./build/redis-libc/redis-server"   /* without $REDIS_LIBC_BIN */
#define H_CLOCK_STEP_MS     2000    /* h_master_clock_step: TIME shows the step within */
#define H_CLOCK_SLACK_MS    50      /* and is that close to real time + offset */

/* One redis-server the harness started. */
struct h_master {
    int   port;                     /* TCP port, kept across restarts */
    struct h_host host;             /* where it runs; addr "" is 127.0.0.1 */
    pid_t pid;                      /* running process, 0 when killed */
    bool  aof;                      /* persistent: AOF in <dir>/master-<i> */
    enum h_master_kind kind;        /* plain, TLS only, or plain named rediss:// */
    char  cert[32];                 /* H_MASTER_TLS: <h_tls_dir>/<cert>.crt and .key */
    bool  stopped;                  /* SIGSTOP'd by h_signal_master, not continued yet:
                                       h_master_* ask it nothing (it would only time out) */
};

/* One redlockd the harness started (a slot of h_daemons). */
struct h_daemon {
    pid_t pid;                      /* running process, or 0 */
    int   port;                     /* TCP port, 0 before the start */
    struct h_host host;             /* where it runs; addr "" is 127.0.0.1 */
    int   tls_port;                 /* listen.tls port, 0 when it has none */
    char  sock_path[PATH_MAX + 64]; /* Unix socket */
    char  log_path[PATH_MAX + 64];  /* stdout+stderr */
    char  conf_path[PATH_MAX + 64]; /* config */
    char  auth[256];                /* auth.password, "" when none */
};

/*
 * File-level state: one run directory, one test directory, the masters
 * and the daemons.  Forked test processes inherit it.  h_daemons[0]'s
 * paths are set by h_begin(), so that the single-daemon accessors
 * answer as before any daemon was started.
 */
static char            h_run_dir[PATH_MAX];     /* h_suite_init(), "" if none */
static char            h_test_dir[PATH_MAX];    /* h_begin(), "" if none */
static struct h_master h_masters[H_MASTERS_MAX];/* started masters, in order */
static size_t          h_nmasters;              /* entries in h_masters */
static struct h_daemon h_daemons[H_DAEMONS_MAX];/* started daemons, in order */
static size_t          h_ndaemons;              /* daemons started (slots used) */
static size_t          h_cur;                   /* index of the current daemon */
static struct h_host   h_placed[H_MASTERS_MAX]; /* h_place_masters(): hosts of masters */
static size_t          h_nplaced;               /* entries in h_placed */
static char            h_tls_dir[PATH_MAX];     /* h_tls_masters(): certificates */
static bool            h_tls_auth;              /* h_tls_masters(): tls-auth-clients */
static uint32_t        h_clock_mask;            /* h_clock_masters(): bit i, master i */

#define H_WRAP_WORDS    16      /* words of $REDLOCKD_WRAP used */

/* The current daemon. */
#define H_D     (&h_daemons[h_cur])

static void h_daemon_paths(size_t i);
static void h_stop_all_daemons(void);
static size_t h_master_argv0(size_t i, const char **argv);
static void h_master_reaped(size_t i);
static int h_connect(const char *target, bool tcp);

/* ---- time and polling ---- */

int64_t
h_now_ms(void)
{
    return client_now_ms();
}

void
h_sleep_ms(int64_t ms)
{
    struct timespec ts;

    if (ms <= 0) {
        return;
    }
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        continue;
    }
}

bool
h_wait_until(h_cond_fn cond, void *arg, int64_t timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms, now;

    for (;;) {
        if (cond(arg)) {
            return true;
        }
        now = h_now_ms();
        if (now >= deadline) {
            return false;
        }
        h_sleep_ms(deadline - now < H_POLL_MS ? deadline - now : H_POLL_MS);
    }
}

bool
h_holds_for(h_cond_fn cond, void *arg, int64_t duration_ms, int64_t interval_ms)
{
    int64_t end = h_now_ms() + duration_ms, now;

    for (;;) {
        if (!cond(arg)) {
            return false;
        }
        now = h_now_ms();
        if (now >= end) {
            return true;
        }
        h_sleep_ms(end - now < interval_ms ? end - now : interval_ms);
    }
}

/* ---- files ---- */

static int
h_remove_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    if (remove(path) != 0) {
        fprintf(stderr, "harness: remove %s: %s\n", path, strerror(errno));
    }
    return 0;
}

/* Remove a directory tree; nothing happens for "". */
void
h_remove_tree(const char *path)
{
    if (path[0] != '\0') {
        nftw(path, h_remove_cb, 16, FTW_DEPTH | FTW_PHYS);
    }
}

/* Print the last nlines lines of a file to stderr between two rulers. */
static void
h_print_tail(const char *path, size_t nlines, const char *title)
{
    struct stat st;
    char *buf;
    ssize_t n;
    size_t len, start, seen = 0;
    off_t off;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "harness: %s: no log (%s: %s)\n", title, path, strerror(errno));
        return;
    }
    if (fstat(fd, &st) != 0) {
        close(fd);
        return;
    }
    off = st.st_size > H_TAIL_BYTES ? st.st_size - H_TAIL_BYTES : 0;
    buf = malloc(H_TAIL_BYTES + 1);
    if (buf == NULL) {
        close(fd);
        return;
    }
    n = pread(fd, buf, H_TAIL_BYTES, off);
    close(fd);
    len = n > 0 ? (size_t)n : 0;
    /* Walk back over nlines line ends, not counting the final one. */
    start = len;
    if (start > 0 && buf[start - 1] == '\n') {
        start--;
    }
    while (start > 0) {
        if (buf[start - 1] == '\n' && ++seen == nlines) {
            break;
        }
        start--;
    }
    fprintf(stderr, "---- %s: last %zu lines of %s ----\n", title, nlines, path);
    fwrite(buf + start, 1, len - start, stderr);
    if (len > start && buf[len - 1] != '\n') {
        fputc('\n', stderr);
    }
    fprintf(stderr, "---- end of %s ----\n", path);
    free(buf);
}

static const char *
h_tmp_base(void)
{
    const char *t = getenv("TMPDIR");

    return t != NULL && t[0] == '/' ? t : "/tmp";
}

int
h_suite_init(void)
{
    if (snprintf(h_run_dir, sizeof(h_run_dir), "%s/redlockd-it.XXXXXX", h_tmp_base())
        >= (int)sizeof(h_run_dir) || mkdtemp(h_run_dir) == NULL) {
        fprintf(stderr, "harness: cannot create a directory under %s: %s\n",
                h_tmp_base(), strerror(errno));
        h_run_dir[0] = '\0';
        return -1;
    }
    return 0;
}

void
h_suite_cleanup(void)
{
    char path[PATH_MAX * 2], title[NAME_MAX + 64];
    struct dirent *de;
    size_t k;
    DIR *d;

    if (h_run_dir[0] == '\0') {
        return;
    }
    d = opendir(h_run_dir);
    if (d != NULL) {
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.') {
                continue;
            }
            snprintf(title, sizeof(title), "test %s did not finish", de->d_name);
            snprintf(path, sizeof(path), "%s/%s/redlockd.log", h_run_dir, de->d_name);
            h_print_tail(path, H_TAIL_LINES, title);
            /* The logs of its other daemons, as long as they exist. */
            for (k = 1; k < H_DAEMONS_MAX; k++) {
                snprintf(path, sizeof(path), "%s/%s/redlockd-%zu.log", h_run_dir,
                         de->d_name, k);
                if (access(path, F_OK) != 0) {
                    break;
                }
                snprintf(title, sizeof(title), "test %s did not finish, daemon %zu",
                         de->d_name, k);
                h_print_tail(path, H_TAIL_LINES, title);
            }
        }
        closedir(d);
    }
    h_remove_tree(h_run_dir);
    h_run_dir[0] = '\0';
}

int
h_begin(const char *name)
{
    const char *p;
    int n;

    if (h_test_dir[0] != '\0') {
        fprintf(stderr, "harness: h_begin: a test is already running\n");
        return -1;
    }
    if (name == NULL || name[0] == '\0') {
        name = "test";
    }
    for (p = name; *p != '\0'; p++) {
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-') {
            fprintf(stderr, "harness: h_begin: bad test name '%s'\n", name);
            return -1;
        }
    }
    if (h_run_dir[0] != '\0') {
        n = snprintf(h_test_dir, sizeof(h_test_dir), "%s/%s.XXXXXX", h_run_dir, name);
    } else {
        /* Without h_suite_init() the test directory stands alone. */
        n = snprintf(h_test_dir, sizeof(h_test_dir), "%s/redlockd-it-%s.XXXXXX",
                     h_tmp_base(), name);
    }
    if (n >= (int)sizeof(h_test_dir) || mkdtemp(h_test_dir) == NULL) {
        fprintf(stderr, "harness: cannot create the test directory: %s\n", strerror(errno));
        h_test_dir[0] = '\0';
        return -1;
    }
    h_nmasters = 0;
    h_clock_mask = 0;
    h_nplaced = 0;
    memset(h_daemons, 0, sizeof(h_daemons));
    h_ndaemons = 0;
    h_cur = 0;
    h_daemon_paths(0);
    /* A peer that vanished must fail a write, not kill the test. */
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

void
h_end(void)
{
    size_t i;

    h_stop_all_daemons();
    for (i = 0; i < h_nmasters; i++) {
        if (h_masters[i].pid > 0) {
            h_kill_master(i);
        }
    }
    h_nmasters = 0;
    h_nplaced = 0;
    h_ndaemons = 0;
    h_cur = 0;
    h_remove_tree(h_test_dir);
    h_test_dir[0] = '\0';
}

const char *
h_dir(void)
{
    return h_test_dir;
}

int
h_make_certs(void)
{
    char cmd[3 * PATH_MAX];
    int status;

    snprintf(cmd, sizeof(cmd), "sh tests/tls/make-certs.sh '%s/certs' >'%s/make-certs.log' 2>&1",
             h_dir(), h_dir());
    status = system(cmd);
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

const char *
h_cert(const char *name)
{
    static char path[8][PATH_MAX + 64];
    static int next;
    char *p = path[next++ % 8];

    if (snprintf(p, sizeof(path[0]), "%s/certs/%s", h_dir(), name) >= (int)sizeof(path[0])) {
        p[0] = '\0';       /* a path too long to be a file here: none */
    }
    return p;
}

/* ---- processes ---- */

/* A 127.0.0.1 TCP port that was free a moment ago, or -1. */
int
h_free_port(void)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int fd, port = -1;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0
        && getsockname(fd, (struct sockaddr *)&sa, &len) == 0) {
        port = ntohs(sa.sin_port);
    }
    close(fd);
    return port;
}

void
h_child_setup(pid_t parent)
{
    sigset_t none;

    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) {
        _exit(127);
    }
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
}

/*
 * Fork and exec argv (PATH is searched) with stdin from /dev/null and
 * stdout/stderr appended to out_path.  The child dies with us
 * (PR_SET_PDEATHSIG).  Returns its pid or -1.
 */
pid_t
h_spawn(const char *const argv[], const char *out_path)
{
    return h_spawn_in(argv, out_path, NULL);
}

/* In a child: join network namespace name (/run/netns/<name>).  0 or -1. */
static int
h_join_netns(const char *name)
{
    char path[PATH_MAX];
    int fd, rc;

    snprintf(path, sizeof(path), "/run/netns/%s", name);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    rc = setns(fd, CLONE_NEWNET);
    close(fd);
    return rc;
}

pid_t
h_spawn_in(const char *const argv[], const char *out_path, const char *netns)
{
    pid_t parent = getpid(), pid;
    int out, in;

    out = open(out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out < 0) {
        fprintf(stderr, "harness: open %s: %s\n", out_path, strerror(errno));
        return -1;
    }
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "harness: fork: %s\n", strerror(errno));
        close(out);
        return -1;
    }
    if (pid == 0) {
        h_child_setup(parent);
        in = open("/dev/null", O_RDONLY);
        if (in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0) {
            _exit(127);
        }
        if (netns != NULL && netns[0] != '\0' && h_join_netns(netns) != 0) {
            dprintf(2, "harness: cannot join network namespace %s: %s\n", netns,
                    strerror(errno));
            _exit(126);
        }
        execvp(argv[0], (char *const *)argv);
        dprintf(2, "harness: exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(out);
    return pid;
}

/* Exit status in the shell's manner: code, or 128 + signal. */
int
h_decode_status(int status)
{
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return 255;
}

/* True when pid has exited (it is then reaped; its status in *status). */
static bool
h_exited(pid_t pid, int *status)
{
    pid_t r;

    do {
        r = waitpid(pid, status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r < 0 && errno == ECHILD) {
        /* Not our child (any more): report it gone, with status 255. */
        *status = 255 << 8;
        return true;
    }
    return r == pid;
}

/* ---- Redis masters ---- */

/* h_redis_connect() to addr:port. */
static redisContext *
h_redis_connect_at(const char *addr, int port)
{
    struct timeval tv = { H_REDIS_TIMEOUT_MS / 1000, H_REDIS_TIMEOUT_MS % 1000 * 1000 };
    redisContext *c;

    c = redisConnectWithTimeout(addr, port, tv);
    if (c == NULL) {
        return NULL;
    }
    if (c->err != 0 || redisSetTimeout(c, tv) != REDIS_OK) {
        redisFree(c);
        return NULL;
    }
    return c;
}

redisContext *
h_redis_connect(int port)
{
    return h_redis_connect_at("127.0.0.1", port);
}

/* True when a redis-server on addr:port answers PING with PONG. */
static bool
h_redis_ping_at(const char *addr, int port)
{
    redisContext *c = h_redis_connect_at(addr, port);
    redisReply *r;
    bool ok;

    if (c == NULL) {
        return false;
    }
    r = redisCommand(c, "PING");
    ok = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
    if (r != NULL) {
        freeReplyObject(r);
    }
    redisFree(c);
    return ok;
}

bool
h_redis_ping(int port)
{
    return h_redis_ping_at("127.0.0.1", port);
}

/* The address of a host: its own, or 127.0.0.1. */
static const char *
h_host_addr(const struct h_host *h)
{
    return h->addr[0] != '\0' ? h->addr : "127.0.0.1";
}

/* Data directory of persistent master i: <dir>/master-<i>. */
static void
h_master_data_dir(size_t i, char *out, size_t size)
{
    snprintf(out, size, "%s/master-%zu", h_test_dir, i);
}

/*
 * Start the process of master i on its port.  A persistent master
 * fsyncs its append-only file before it answers a write, so a SIGKILL
 * loses nothing it acknowledged; its directory is its own, because
 * redis-server keeps the file under a fixed name in --dir.
 */
static int
h_master_spawn(size_t i)
{
    char port[16], log[PATH_MAX + 32], dir[PATH_MAX + 32];
    char crt[PATH_MAX + 64], key[PATH_MAX + 64], ca[PATH_MAX + 64];
    const char *argv[40];
    size_t n = 0;
    pid_t pid;

    snprintf(port, sizeof(port), "%d", h_masters[i].port);
    snprintf(log, sizeof(log), "%s/redis-%d.log", h_test_dir, h_masters[i].port);
    if (h_masters[i].aof) {
        h_master_data_dir(i, dir, sizeof(dir));
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "harness: mkdir %s: %s\n", dir, strerror(errno));
            return -1;
        }
    } else {
        snprintf(dir, sizeof(dir), "%s", h_test_dir);
    }
    n = h_master_argv0(i, argv);
    argv[n++] = "--port";
    if (h_masters[i].kind == H_MASTER_TLS) {
        /* TLS only: no plain port at all. */
        snprintf(crt, sizeof(crt), "%s/%s.crt", h_tls_dir, h_masters[i].cert);
        snprintf(key, sizeof(key), "%s/%s.key", h_tls_dir, h_masters[i].cert);
        snprintf(ca, sizeof(ca), "%s/ca.crt", h_tls_dir);
        argv[n++] = "0";
        argv[n++] = "--tls-port";
        argv[n++] = port;
        argv[n++] = "--tls-cert-file";
        argv[n++] = crt;
        argv[n++] = "--tls-key-file";
        argv[n++] = key;
        argv[n++] = "--tls-ca-cert-file";
        argv[n++] = ca;
        argv[n++] = "--tls-auth-clients";
        argv[n++] = h_tls_auth ? "yes" : "no";
    } else {
        argv[n++] = port;
    }
    argv[n++] = "--bind";
    argv[n++] = h_host_addr(&h_masters[i].host);
    if (h_masters[i].host.addr[0] != '\0') {
        /* Its clients are not on loopback. */
        argv[n++] = "--protected-mode";
        argv[n++] = "no";
    }
    argv[n++] = "--save";
    argv[n++] = "";
    argv[n++] = "--appendonly";
    argv[n++] = h_masters[i].aof ? "yes" : "no";
    if (h_masters[i].aof) {
        argv[n++] = "--appendfsync";
        argv[n++] = "always";
    }
    argv[n++] = "--dir";
    argv[n++] = dir;
    argv[n++] = "--daemonize";
    argv[n++] = "no";
    argv[n++] = "--logfile";
    argv[n++] = log;
    argv[n] = NULL;
    pid = h_spawn_in(argv, log, h_masters[i].host.netns);
    if (pid < 0) {
        return -1;
    }
    h_masters[i].pid = pid;
    h_masters[i].stopped = false;
    return 0;
}

/* True when something accepts TCP connections on addr:port (IPv4). */
static bool
h_port_listening(const char *addr, int port)
{
    int fd = h_tcp_connect(NULL, addr, port, 0);

    if (fd < 0) {
        return false;
    }
    close(fd);
    return true;
}

/*
 * Wait until master i answers PING (a TLS master: until its port accepts
 * connections): 0 when it does, -1 when its process
 * exited (reaped), -2 at the deadline (still running).
 */
static int
h_master_wait_up(size_t i, int64_t deadline)
{
    int status;

    for (;;) {
        if (h_exited(h_masters[i].pid, &status)) {
            h_master_reaped(i);
            return -1;
        }
        if (h_masters[i].kind == H_MASTER_TLS
                ? h_port_listening(h_master_addr(i), h_masters[i].port)
                : h_redis_ping_at(h_master_addr(i), h_masters[i].port)) {
            return 0;
        }
        if (h_now_ms() >= deadline) {
            return -2;
        }
        h_sleep_ms(H_READY_POLL_MS);
    }
}

/* True when port is already given to one of the first n masters. */
static bool
h_port_taken(int port, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (h_masters[i].port == port) {
            return true;
        }
    }
    return false;
}

/* A free port that none of the first n masters has, or -1. */
static int
h_new_master_port(size_t n)
{
    int port, tries;

    for (tries = 0; tries < 20; tries++) {
        port = h_free_port();
        if (port > 0 && !h_port_taken(port, n)) {
            return port;
        }
    }
    return -1;
}

void
h_place_masters(const struct h_host *hosts, size_t n)
{
    h_nplaced = n < H_MASTERS_MAX ? n : H_MASTERS_MAX;
    memcpy(h_placed, hosts, h_nplaced * sizeof(hosts[0]));
}

/* Give master i its host from h_place_masters(), or none. */
static void
h_master_place(size_t i)
{
    if (i < h_nplaced) {
        h_masters[i].host = h_placed[i];
    } else {
        memset(&h_masters[i].host, 0, sizeof(h_masters[i].host));
    }
}

const char *
h_master_addr(size_t i)
{
    return i < h_nmasters ? h_host_addr(&h_masters[i].host) : "127.0.0.1";
}

redisContext *
h_master_redis(size_t i)
{
    if (!h_master_alive(i) || h_masters[i].stopped) {
        return NULL;
    }
    return h_redis_connect_at(h_master_addr(i), h_masters[i].port);
}

/* h_start_masters() and h_start_masters_aof(). */
static int
h_start_masters_mode(size_t n, bool aof)
{
    size_t i;
    int tries, rc;

    if (h_test_dir[0] == '\0' || h_nmasters != 0 || n == 0 || n > H_MASTERS_MAX) {
        fprintf(stderr, "harness: h_start_masters(%zu): call once, after h_begin\n", n);
        return -1;
    }
    /* Start them all, then wait for each: the starts overlap. */
    for (i = 0; i < n; i++) {
        h_masters[i].pid = 0;
        h_master_place(i);
        h_masters[i].kind = H_MASTER_PLAIN;
        h_masters[i].aof = aof;
        h_masters[i].port = h_new_master_port(i);
        if (h_masters[i].port < 0 || h_master_spawn(i) != 0) {
            h_nmasters = i + 1;
            return -1;
        }
    }
    h_nmasters = n;
    for (i = 0; i < n; i++) {
        for (tries = 1;; tries++) {
            rc = h_master_wait_up(i, h_now_ms() + H_START_MS);
            if (rc == 0) {
                break;
            }
            if (rc == -2 || tries == H_PORT_TRIES) {
                fprintf(stderr, "harness: master on port %d did not come up "
                        "(see %s/redis-%d.log)\n", h_masters[i].port, h_test_dir,
                        h_masters[i].port);
                return -1;
            }
            /* It exited: most likely someone else took the port. */
            h_masters[i].port = h_new_master_port(n);
            if (h_masters[i].port < 0 || h_master_spawn(i) != 0) {
                return -1;
            }
        }
    }
    return 0;
}

int
h_start_masters(size_t n)
{
    return h_start_masters_mode(n, false);
}

int
h_start_masters_aof(size_t n)
{
    return h_start_masters_mode(n, true);
}

void
h_tls_masters(const char *cert_dir, bool auth_clients)
{
    snprintf(h_tls_dir, sizeof(h_tls_dir), "%s", cert_dir);
    h_tls_auth = auth_clients;
}

int
h_add_master(enum h_master_kind kind, const char *cert)
{
    size_t i = h_nmasters;
    int tries, rc;

    if (h_test_dir[0] == '\0' || i >= H_MASTERS_MAX
        || (kind == H_MASTER_TLS && h_tls_dir[0] == '\0')) {
        fprintf(stderr, "harness: h_add_master: after h_begin (and h_tls_masters for TLS), "
                "at most %d\n", H_MASTERS_MAX);
        return -1;
    }
    memset(&h_masters[i], 0, sizeof(h_masters[i]));
    h_master_place(i);
    h_masters[i].kind = kind;
    snprintf(h_masters[i].cert, sizeof(h_masters[i].cert), "%s",
             cert != NULL ? cert : "server");
    h_nmasters = i + 1;
    for (tries = 1;; tries++) {
        h_masters[i].port = h_new_master_port(i);
        if (h_masters[i].port < 0 || h_master_spawn(i) != 0) {
            return -1;
        }
        rc = h_master_wait_up(i, h_now_ms() + H_START_MS);
        if (rc == 0) {
            return 0;
        }
        if (rc == -2 || tries == H_PORT_TRIES) {
            fprintf(stderr, "harness: master on port %d did not come up (see %s/redis-%d.log)\n",
                    h_masters[i].port, h_test_dir, h_masters[i].port);
            return -1;
        }
    }
}

size_t
h_master_count(void)
{
    return h_nmasters;
}

int
h_master_port(size_t i)
{
    return i < h_nmasters ? h_masters[i].port : -1;
}

bool
h_master_alive(size_t i)
{
    return i < h_nmasters && h_masters[i].pid > 0;
}

size_t
h_masters_alive(void)
{
    size_t i, n = 0;

    for (i = 0; i < h_nmasters; i++) {
        n += h_masters[i].pid > 0;
    }
    return n;
}

int
h_kill_master(size_t i)
{
    if (!h_master_alive(i)) {
        return -1;
    }
    kill(h_masters[i].pid, SIGKILL);
    while (waitpid(h_masters[i].pid, NULL, 0) < 0 && errno == EINTR) {
        continue;
    }
    h_master_reaped(i);
    return 0;
}

int
h_restart_master(size_t i)
{
    int tries, rc;

    if (i >= h_nmasters || h_masters[i].pid != 0) {
        fprintf(stderr, "harness: h_restart_master(%zu): not a killed master\n", i);
        return -1;
    }
    for (tries = 1;; tries++) {
        if (h_master_spawn(i) != 0) {
            return -1;
        }
        rc = h_master_wait_up(i, h_now_ms() + H_START_MS);
        if (rc == 0) {
            return 0;
        }
        if (rc == -2 || tries == H_PORT_TRIES) {
            fprintf(stderr, "harness: master on port %d did not come back (see %s/redis-%d.log)\n",
                    h_masters[i].port, h_test_dir, h_masters[i].port);
            if (rc == -2) {
                h_kill_master(i);
            }
            return -1;
        }
        /* The port is briefly held by someone else: try again soon. */
        h_sleep_ms(100);
    }
}

/* GET key: 1 with *value malloc'd, 0 when absent, -1 when not asked. */
static int
h_master_lookup(size_t i, const char *key, char **value)
{
    redisContext *c;
    redisReply *r;
    int rc = -1;

    *value = NULL;
    c = h_master_redis(i);
    if (c == NULL) {
        return -1;
    }
    r = redisCommand(c, "GET %b", key, strlen(key));
    if (r != NULL && r->type == REDIS_REPLY_NIL) {
        rc = 0;
    } else if (r != NULL && r->type == REDIS_REPLY_STRING) {
        *value = strndup(r->str, r->len);
        rc = *value != NULL ? 1 : -1;
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    redisFree(c);
    return rc;
}

int
h_master_cmd(size_t i, const char *password, const char *fmt, ...)
{
    redisContext *c;
    redisReply *r;
    va_list ap;
    int rc = -1;

    c = h_master_redis(i);
    if (c == NULL) {
        return -1;
    }
    if (password != NULL) {
        r = redisCommand(c, "AUTH %s", password);
        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            if (r != NULL) {
                freeReplyObject(r);
            }
            redisFree(c);
            return -1;
        }
        freeReplyObject(r);
    }
    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (r != NULL) {
        rc = r->type == REDIS_REPLY_ERROR ? -1 : 0;
        freeReplyObject(r);
    }
    redisFree(c);
    return rc;
}

int
h_signal_master(size_t i, int sig)
{
    if (!h_master_alive(i) || kill(h_masters[i].pid, sig) != 0) {
        return -1;
    }
    if (sig == SIGSTOP || sig == SIGCONT) {
        h_masters[i].stopped = sig == SIGSTOP;
    }
    return 0;
}

char *
h_master_get(size_t i, const char *key)
{
    char *value;

    h_master_lookup(i, key, &value);
    return value;
}

long long
h_master_pttl(size_t i, const char *key)
{
    redisContext *c;
    redisReply *r;
    long long ttl = H_PTTL_ERROR;

    c = h_master_redis(i);
    if (c == NULL) {
        return H_PTTL_ERROR;
    }
    r = redisCommand(c, "PTTL %b", key, strlen(key));
    if (r != NULL && r->type == REDIS_REPLY_INTEGER) {
        ttl = r->integer;
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    redisFree(c);
    return ttl;
}

size_t
h_masters_holding(const char *key, const char *value)
{
    size_t i, n = 0;
    char *v;

    for (i = 0; i < h_nmasters; i++) {
        if (h_master_lookup(i, key, &v) == 1 && (value == NULL || strcmp(v, value) == 0)) {
            n++;
        }
        free(v);
    }
    return n;
}

size_t
h_masters_without(const char *key)
{
    size_t i, n = 0;
    char *v;

    for (i = 0; i < h_nmasters; i++) {
        if (h_master_lookup(i, key, &v) == 0) {
            n++;
        }
        free(v);
    }
    return n;
}

/* Run a command on master i; the reply (caller frees) or NULL. */
static redisReply *
h_master_reply(size_t i, const char *fmt, ...)
{
    redisContext *c;
    redisReply *r;
    va_list ap;

    c = h_master_redis(i);
    if (c == NULL) {
        return NULL;
    }
    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return r;
}

long long
h_master_numsub(size_t i, const char *channel)
{
    redisReply *r;
    long long n = -1;

    /* The reply is a flat array: channel, count, channel, count... */
    r = h_master_reply(i, "PUBSUB NUMSUB %b", channel, strlen(channel));
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2
        && r->element[1]->type == REDIS_REPLY_INTEGER) {
        n = r->element[1]->integer;
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    return n;
}

int
h_tcp_queues(int port, long long *send_q, long long *recv_q, int *recv_waiting)
{
    unsigned int lport, rport, st;
    unsigned long tx, rx;
    char line[512];
    int n = 0;
    FILE *f;

    *send_q = 0;
    *recv_q = 0;
    if (recv_waiting != NULL) {
        *recv_waiting = 0;
    }
    f = fopen("/proc/net/tcp", "re");
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        /* "  sl  local_address rem_address   st tx_queue:rx_queue ..." */
        if (sscanf(line, " %*u: %*x:%x %*x:%x %x %lx:%lx", &lport, &rport, &st, &tx,
                   &rx) != 5 || st != 1) {
            continue;   /* the heading, or not ESTABLISHED */
        }
        if ((int)rport == port) {
            *send_q += (long long)tx;
            n++;
        }
        if ((int)lport == port) {
            *recv_q += (long long)rx;
            if (recv_waiting != NULL && rx > 0) {
                (*recv_waiting)++;
            }
        }
    }
    fclose(f);
    return n;
}

/*
 * INFO section of master i, each of its lines (from its first byte; it
 * ends at its CR or LF) to line(p, arg).  0, or -1 when the master could
 * not be asked.
 */
static int
h_master_info(size_t i, const char *section, void (*line)(const char *p, void *arg),
              void *arg)
{
    const char *p;
    redisReply *r = h_master_reply(i, "INFO %s", section);
    int rc = -1;

    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        for (p = r->str; p != NULL; p = strchr(p, '\n')) {
            if (*p == '\n') {
                p++;
            }
            line(p, arg);
        }
        rc = 0;
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    return rc;
}

/* What the INFO line callbacks below gather. */
struct h_info_sum {
    const char *head;       /* h_master_calls: "cmdstat_<command>:calls=" */
    long long   n;          /* the calls, or the CPU in us */
    long long   scripts;    /* h_master_commands: script calls */
    int         found;      /* h_master_cpu_us: fields read */
};

/* Lines look like "cmdstat_evalsha:calls=12,usec=...". */
static void
h_info_calls(const char *p, void *arg)
{
    struct h_info_sum *sum = arg;
    size_t hlen = strlen(sum->head);

    if (strncmp(p, sum->head, hlen) == 0) {
        sum->n = strtoll(p + hlen, NULL, 10);
    }
}

long long
h_master_calls(size_t i, const char *command)
{
    char head[128];
    struct h_info_sum sum = { .head = head };

    if ((size_t)snprintf(head, sizeof(head), "cmdstat_%s:calls=", command) >= sizeof(head)
        || h_master_info(i, "commandstats", h_info_calls, &sum) != 0) {
        return -1;
    }
    return sum.n;
}

static void
h_info_commands(const char *p, void *arg)
{
    struct h_info_sum *sum = arg;
    const char *calls;
    long long v;

    if (strncmp(p, "cmdstat_", 8) != 0 || (calls = strstr(p, ":calls=")) == NULL) {
        return;
    }
    v = strtoll(calls + 7, NULL, 10);
    sum->n += v;
    if (strncmp(p + 8, "evalsha:", 8) == 0 || strncmp(p + 8, "fcall:", 6) == 0) {
        sum->scripts += v;
    }
}

long long
h_master_commands(size_t i, long long *scripts)
{
    struct h_info_sum sum = { .n = 0 };

    if (h_master_info(i, "commandstats", h_info_commands, &sum) != 0) {
        sum.n = sum.scripts = -1;
    }
    if (scripts != NULL) {
        *scripts = sum.scripts;
    }
    return sum.n;
}

/* "used_cpu_sys:1.234567" and "used_cpu_user:...", in seconds. */
static void
h_info_cpu(const char *p, void *arg)
{
    struct h_info_sum *sum = arg;

    if (strncmp(p, "used_cpu_sys:", 13) == 0) {
        sum->n += (long long)(strtod(p + 13, NULL) * 1e6);
        sum->found++;
    } else if (strncmp(p, "used_cpu_user:", 14) == 0) {
        sum->n += (long long)(strtod(p + 14, NULL) * 1e6);
        sum->found++;
    }
}

long long
h_master_cpu_us(size_t i)
{
    struct h_info_sum sum = { .n = 0 };

    if (h_master_info(i, "cpu", h_info_cpu, &sum) != 0 || sum.found != 2) {
        return -1;
    }
    return sum.n;
}

/* ---- masters with a steppable wall clock ---- */

/* <test dir>/clock-<i>: master i's clock offset, which libfaketime reads. */
static void
h_clock_path(size_t i, char *out, size_t size)
{
    snprintf(out, size, "%s/clock-%zu", h_test_dir, i);
}

/*
 * Write master i's offset as libfaketime reads it ("+10.000", "-0.250":
 * seconds), into a new file renamed over the old one, since libfaketime
 * may read it at any moment.  0 or -1.
 */
static int
h_clock_write(size_t i, int64_t offset_ms)
{
    char path[PATH_MAX + 32], tmp[PATH_MAX + 40];
    long long a = offset_ms < 0 ? -(long long)offset_ms : (long long)offset_ms;
    FILE *f;
    int rc;

    h_clock_path(i, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    f = fopen(tmp, "we");
    if (f == NULL) {
        fprintf(stderr, "harness: %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    rc = fprintf(f, "%c%lld.%03lld\n", offset_ms < 0 ? '-' : '+', a / 1000, a % 1000) > 0
         ? 0 : -1;
    if (fclose(f) != 0 || rc != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "harness: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

/* The redis-server that runs under libfaketime. */
static const char *
h_redis_libc_bin(void)
{
    const char *env = getenv("REDIS_LIBC_BIN");

    return env != NULL && env[0] != '\0' ? env : H_REDIS_LIBC_BIN;
}

/* True when master i has a steppable clock. */
static bool
h_clock_master(size_t i)
{
    return i < 32 && (h_clock_mask & (UINT32_C(1) << i)) != 0;
}

/*
 * Master i's process was reaped.  libfaketime makes a semaphore and a
 * shared memory object named after the pid of every process it runs in
 * and removes them at exit, which a SIGKILL skips: left behind, they
 * make the faketime command of a later process with the same pid fail
 * (sem_open: File exists; tests/tls/make-certs.sh uses it).  So they
 * are removed here for a master with a steppable clock.
 */
static void
h_master_reaped(size_t i)
{
    char name[64];

    if (h_clock_master(i) && h_masters[i].pid > 0) {
        snprintf(name, sizeof(name), "/faketime_sem_%ld", (long)h_masters[i].pid);
        sem_unlink(name);
        snprintf(name, sizeof(name), "/faketime_shm_%ld", (long)h_masters[i].pid);
        shm_unlink(name);
    }
    h_masters[i].pid = 0;
}

int
h_clock_masters(uint32_t mask)
{
    if (h_test_dir[0] == '\0' || h_nmasters != 0) {
        fprintf(stderr, "harness: h_clock_masters: after h_begin, before the masters start\n");
        return -1;
    }
    if (access(h_redis_libc_bin(), X_OK) != 0) {
        fprintf(stderr, "harness: %s: %s (make build/redis-libc/redis-server builds it)\n",
                h_redis_libc_bin(), strerror(errno));
        return -1;
    }
    if (access(H_FAKETIME_LIB, R_OK) != 0) {
        fprintf(stderr, "harness: %s: %s (package libfaketime)\n", H_FAKETIME_LIB,
                strerror(errno));
        return -1;
    }
    h_clock_mask = mask;
    return 0;
}

/*
 * The words before the options of master i's command line: "redis-server",
 * or for a master with a steppable clock, env(1) putting libfaketime in
 * front of the libc build, with the master's offset file (offset 0 when
 * new; a restarted master keeps its offset).  Returns how many words were
 * put into argv.  The strings are static: exec them before the next call.
 */
static size_t
h_master_argv0(size_t i, const char **argv)
{
    static char file[PATH_MAX + 64];
    char path[PATH_MAX + 32];
    size_t n = 0;

    if (!h_clock_master(i)) {
        argv[n++] = "redis-server";
        return n;
    }
    h_clock_path(i, path, sizeof(path));
    if (access(path, F_OK) != 0) {
        h_clock_write(i, 0);
    }
    snprintf(file, sizeof(file), "FAKETIME_TIMESTAMP_FILE=%s", path);
    argv[n++] = "env";
    argv[n++] = "LD_PRELOAD=" H_FAKETIME_LIB;
    argv[n++] = file;
    argv[n++] = "FAKETIME_NO_CACHE=1";           /* read the file at every call */
    argv[n++] = "FAKETIME_DONT_FAKE_MONOTONIC=1";
    argv[n++] = h_redis_libc_bin();
    return n;
}

/* CLOCK_REALTIME in microseconds. */
static int64_t
h_real_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * TIME on master i, in microseconds, into *t; the real time just before
 * and just after the request into *before and *after.  0 or -1.
 */
static int
h_master_time(size_t i, int64_t *t, int64_t *before, int64_t *after)
{
    redisContext *c;
    redisReply *r;
    int rc = -1;

    if ((c = h_master_redis(i)) == NULL) {
        return -1;
    }
    *before = h_real_us();
    r = redisCommand(c, "TIME");
    *after = h_real_us();
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2
        && r->element[0]->type == REDIS_REPLY_STRING
        && r->element[1]->type == REDIS_REPLY_STRING) {
        *t = strtoll(r->element[0]->str, NULL, 10) * 1000000
             + strtoll(r->element[1]->str, NULL, 10);
        rc = 0;
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    redisFree(c);
    return rc;
}

int
h_master_clock_step(size_t i, int64_t offset_ms)
{
    int64_t deadline = h_now_ms() + H_CLOCK_STEP_MS, t = 0, before = 0, after = 0;
    int64_t slack = H_CLOCK_SLACK_MS * 1000, off = offset_ms * 1000;
    bool asked = false;

    if (i >= h_nmasters || !h_clock_master(i)) {
        fprintf(stderr, "harness: h_master_clock_step(%zu): not a master of h_clock_masters\n",
                i);
        return -1;
    }
    if (h_clock_write(i, offset_ms) != 0) {
        return -1;
    }
    for (;;) {
        if (h_master_time(i, &t, &before, &after) == 0) {
            asked = true;
            if (t >= before + off - slack && t <= after + off + slack) {
                return 0;
            }
        }
        if (h_now_ms() >= deadline) {
            break;
        }
        h_sleep_ms(H_READY_POLL_MS);
    }
    if (asked) {
        fprintf(stderr, "harness: master %zu: TIME is %lld ms from the real time %d ms after "
                "the step, not %lld\n", i, (long long)((t - before) / 1000), H_CLOCK_STEP_MS,
                (long long)offset_ms);
    } else {
        fprintf(stderr, "harness: master %zu did not answer TIME after the clock step\n", i);
    }
    return -1;
}

/* ---- the daemon ---- */

/* Write "  key: value" when value is set (not 0). */
static void
h_conf_int(FILE *f, const char *key, int64_t value)
{
    if (value != 0) {
        fprintf(f, "  %s: %lld\n", key, (long long)value);
    }
}

/* Set the file names of daemon slot i: index 0 keeps the historic names. */
static void
h_daemon_paths(size_t i)
{
    struct h_daemon *d = &h_daemons[i];
    char suffix[24] = "";       /* "-<i>": room for any size_t */

    if (i > 0) {
        snprintf(suffix, sizeof(suffix), "-%zu", i);
    }
    snprintf(d->sock_path, sizeof(d->sock_path), "%s/redlockd%s.sock", h_test_dir, suffix);
    snprintf(d->log_path, sizeof(d->log_path), "%s/redlockd%s.log", h_test_dir, suffix);
    snprintf(d->conf_path, sizeof(d->conf_path), "%s/redlockd%s.yml", h_test_dir, suffix);
}

/* Write the current daemon's config for its port and the masters. */
static int
h_write_conf(const struct h_daemon_opts *o)
{
    FILE *f;
    size_t i;
    int rc;

    f = fopen(H_D->conf_path, "we");
    if (f == NULL) {
        fprintf(stderr, "harness: %s: %s\n", H_D->conf_path, strerror(errno));
        return -1;
    }
    fprintf(f, "# written by tests/harness.c\n");
    fprintf(f, "listen:\n  tcp: \"%s:%d\"\n  unix: \"%s\"\n", h_host_addr(&H_D->host), H_D->port,
            H_D->sock_path);
    if (o->tls_cert_file != NULL) {
        fprintf(f, "  tls: \"%s:%d\"\ntls:\n  cert_file: \"%s\"\n  key_file: \"%s\"\n",
                h_host_addr(&H_D->host), H_D->tls_port, o->tls_cert_file,
                o->tls_key_file != NULL ? o->tls_key_file : "");
        if (o->tls_client_ca_file != NULL) {
            fprintf(f, "  client_ca_file: \"%s\"\n", o->tls_client_ca_file);
        }
        if (o->tls_client_crl_file != NULL) {
            fprintf(f, "  client_crl_file: \"%s\"\n", o->tls_client_crl_file);
        }
        if (o->tls_client_names != NULL) {
            fprintf(f, "  client_names:%s\n", o->tls_client_names[0] == NULL ? " []" : "");
            for (i = 0; o->tls_client_names[i] != NULL; i++) {
                fprintf(f, "    - \"%s\"\n", o->tls_client_names[i]);
            }
        }
        if (o->tls_ciphers != NULL) {
            fprintf(f, "  ciphers: \"%s\"\n", o->tls_ciphers);
        }
        if (o->tls_ciphersuites != NULL) {
            fprintf(f, "  ciphersuites: \"%s\"\n", o->tls_ciphersuites);
        }
    }
    fprintf(f, "masters:\n");
    for (i = 0; i < h_nmasters; i++) {
        if (o->master_addrs != NULL && o->master_addrs[i] != NULL) {
            fprintf(f, "  - \"%s%s\"\n", h_masters[i].kind != H_MASTER_PLAIN ? "rediss://" : "",
                    o->master_addrs[i]);
            continue;
        }
        fprintf(f, "  - \"%s%s:%d\"\n", h_masters[i].kind != H_MASTER_PLAIN ? "rediss://" : "",
                h_master_addr(i), h_masters[i].port);
    }
    for (i = 0; o->extra_masters != NULL && o->extra_masters[i] != NULL; i++) {
        fprintf(f, "  - \"%s\"\n", o->extra_masters[i]);
    }
    fprintf(f, "lock:\n");
    fprintf(f, "  node_timeout_ms: %lld\n",
            (long long)(o->node_timeout_ms != 0 ? o->node_timeout_ms : H_NODE_TIMEOUT_MS));
    h_conf_int(f, "default_ttl_ms", o->default_ttl_ms);
    fprintf(f, "  min_ttl_ms: %lld\n",
            (long long)(o->min_ttl_ms != 0 ? o->min_ttl_ms : H_MIN_TTL_MS));
    h_conf_int(f, "max_ttl_ms", o->max_ttl_ms);
    h_conf_int(f, "retry_delay_ms", o->retry_delay_ms);
    h_conf_int(f, "delay_ms", o->delay_ms);     /* not written when 0 */
    /* Tests read the masters' keys by the lock's name: no prefix unless asked. */
    fprintf(f, "  key_prefix: \"%s\"\n", o->key_prefix != NULL ? o->key_prefix : "");
    /* Only when asked: a daemon without these settings must still start. */
    if (o->fence != NULL) {
        fprintf(f, "  fence: %s\n", o->fence);
    }
    if (o->clock_check != NULL) {
        fprintf(f, "  clock_check: %s\n", o->clock_check);
    }
    if (o->drift_factor > 0) {
        fprintf(f, "  drift_factor: %g\n", o->drift_factor);
    }
    /* The masters start a moment before the daemon: quarantine is off
       unless a test turns it on. */
    fprintf(f, "  restart_quarantine: %s\n", o->restart_quarantine ? "true" : "false");
    if (o->max_line_bytes != 0 || o->max_clients != 0 || o->max_locks_per_client != 0 ||
        o->idle_timeout_ms != 0 || o->auth_timeout_ms != 0 || o->max_output_bytes != 0
        || o->limits_yaml != NULL) {
        fprintf(f, "limits:\n");
        h_conf_int(f, "max_line_bytes", o->max_line_bytes);
        h_conf_int(f, "max_clients", o->max_clients);
        h_conf_int(f, "idle_timeout_ms", o->idle_timeout_ms);
        h_conf_int(f, "auth_timeout_ms", o->auth_timeout_ms);
        h_conf_int(f, "max_output_bytes", o->max_output_bytes);
        h_conf_int(f, "max_locks_per_client", o->max_locks_per_client);
        if (o->limits_yaml != NULL) {
            fputs(o->limits_yaml, f);
        }
    }
    fprintf(f, "redis:\n");
    if (o->redis_password != NULL) {
        fprintf(f, "  password: \"%s\"\n", o->redis_password);
    }
    if (o->redis_username != NULL) {
        fprintf(f, "  username: \"%s\"\n", o->redis_username);
    }
    h_conf_int(f, "max_pending", o->max_pending);
    h_conf_int(f, "down_after_ms", o->down_after_ms);
    if (o->redis_tls_ca_file != NULL) {
        fprintf(f, "  tls_ca_file: \"%s\"\n", o->redis_tls_ca_file);
    }
    if (o->redis_tls_cert_file != NULL) {
        fprintf(f, "  tls_cert_file: \"%s\"\n  tls_key_file: \"%s\"\n",
                o->redis_tls_cert_file,
                o->redis_tls_key_file != NULL ? o->redis_tls_key_file : "");
    }
    if (o->redis_tls_server_name != NULL) {
        fprintf(f, "  tls_server_name: \"%s\"\n", o->redis_tls_server_name);
    }
    if (o->auth_password != NULL || o->admin_password != NULL || o->show_labels != NULL) {
        fprintf(f, "auth:\n  password: \"%s\"\n  unix_exempt: %s\n",
                o->auth_password != NULL ? o->auth_password : "",
                o->auth_unix_required ? "false" : "true");
        if (o->admin_password != NULL) {
            fprintf(f, "  admin_password: \"%s\"\n", o->admin_password);
        }
        if (o->show_labels != NULL) {
            fprintf(f, "  show_labels: %s\n", o->show_labels);
        }
    }
    /* Off unless asked: every daemon would want the same port. */
    if (o->metrics_port > 0) {
        fprintf(f, "metrics:\n  listen: \"127.0.0.1:%d\"\n", o->metrics_port);
        h_conf_int(f, "max_connections", o->metrics_max_connections);
        h_conf_int(f, "request_timeout_ms", o->metrics_request_timeout_ms);
    } else {
        fprintf(f, "metrics:\n  listen: \"\"\n");
    }
    fprintf(f, "log:\n  level: %s\n", o->log_level != NULL ? o->log_level : "debug");
    rc = ferror(f) ? -1 : 0;
    if (fclose(f) != 0) {
        rc = -1;
    }
    if (rc != 0) {
        fprintf(stderr, "harness: cannot write %s\n", H_D->conf_path);
    }
    return rc;
}

/* True when "section.key" (key NULL: the whole section) is in the list. */
static bool
h_key_listed(const char *list, const char *section, const char *key)
{
    char want[160];

    snprintf(want, sizeof(want), " %s%s%s ", section, key != NULL ? "." : "",
             key != NULL ? key : "");
    return strstr(list, want) != NULL;
}

/*
 * Rewrite the current daemon's config without the sections and keys in
 * list (" section.key section "), a key's nested lines with it.  The
 * configs the harness writes are two levels deep: a section at column
 * 0, its keys indented, a list's items deeper.  0 or -1.
 */
static int
h_conf_leave_out(const char *list)
{
    char path[PATH_MAX + 80], line[1024], section[64] = "", key[64];
    FILE *in, *out;
    bool drop_section = false, drop_key = false;
    int rc = 0;

    snprintf(path, sizeof(path), "%s.tmp", H_D->conf_path);
    if ((in = fopen(H_D->conf_path, "re")) == NULL || (out = fopen(path, "we")) == NULL) {
        fprintf(stderr, "harness: cannot rewrite %s: %s\n", H_D->conf_path, strerror(errno));
        if (in != NULL) {
            fclose(in);
        }
        return -1;
    }
    while (fgets(line, sizeof(line), in) != NULL) {
        size_t indent = strspn(line, " ");

        if (line[0] != '#' && line[indent] != '\n' && line[indent] != '\0') {
            if (indent == 0 && sscanf(line, "%63[^:]:", section) == 1) {
                drop_section = h_key_listed(list, section, NULL);
                drop_key = false;
            } else if (indent == 2 && line[indent] != '-'
                       && sscanf(line + indent, "%63[^:]:", key) == 1) {
                drop_key = h_key_listed(list, section, key);
            }
        }
        if (!drop_section && !drop_key && fputs(line, out) == EOF) {
            rc = -1;
        }
    }
    fclose(in);
    if (fclose(out) != 0 || rc != 0 || rename(path, H_D->conf_path) != 0) {
        fprintf(stderr, "harness: cannot rewrite %s\n", H_D->conf_path);
        unlink(path);
        return -1;
    }
    return 0;
}

/*
 * For a daemon of opts->known_keys_only: ask bin (`-t -c <config>`)
 * which sections and keys of the config just written it does not know,
 * and leave them out, until it accepts the config (a few rounds, for a
 * key the first round's errors hid).  What was left out is written to
 * the daemon's log first.  0, or -1 when it rejects the config for
 * another reason (its output printed).
 */
static int
h_conf_known_only(const char *bin)
{
    char out_path[PATH_MAX + 80], line[1024], list[1024] = " ", a[64], b[64], note[1200];
    const char *argv[] = { bin, "-t", "-c", H_D->conf_path, NULL };
    size_t used = 1, round;
    int status = 0;
    pid_t pid;
    FILE *f;

    snprintf(out_path, sizeof(out_path), "%s.known", H_D->conf_path);
    for (round = 0; round < 4; round++) {
        bool more = false;

        unlink(out_path);
        if ((pid = h_spawn(argv, out_path)) < 0 || waitpid(pid, &status, 0) != pid) {
            return -1;
        }
        if (h_decode_status(status) == 0) {
            break;
        }
        if ((f = fopen(out_path, "re")) == NULL) {
            return -1;
        }
        while (fgets(line, sizeof(line), f) != NULL) {
            const char *at;
            int n = 0;

            if ((at = strstr(line, "unknown key '")) != NULL
                && sscanf(at, "unknown key '%63[^']' in '%63[^']'", b, a) == 2) {
                n = snprintf(list + used, sizeof(list) - used, "%s.%s ", a, b);
            } else if ((at = strstr(line, "unknown section '")) != NULL
                       && sscanf(at, "unknown section '%63[^']'", a) == 1) {
                n = snprintf(list + used, sizeof(list) - used, "%s ", a);
            }
            if (n > 0 && (size_t)n < sizeof(list) - used) {
                used += (size_t)n;
                more = true;
            }
        }
        fclose(f);
        if (!more || h_conf_leave_out(list) != 0) {
            fprintf(stderr, "harness: %s rejects the config %s for another reason than "
                    "unknown keys:\n", bin, H_D->conf_path);
            h_print_tail(out_path, H_TAIL_LINES, "redlockd -t");
            return -1;
        }
    }
    if (h_decode_status(status) != 0) {
        fprintf(stderr, "harness: %s still rejects %s after leaving out%s\n", bin,
                H_D->conf_path, list);
        return -1;
    }
    if (used > 1) {
        snprintf(note, sizeof(note), "harness: left out of %s, unknown to %s:%s\n",
                 H_D->conf_path, bin, list);
        if ((f = fopen(H_D->log_path, "ae")) != NULL) {
            fputs(note, f);
            fclose(f);
        }
    }
    unlink(out_path);
    return 0;
}

/*
 * Wait until the current daemon answers STATS with masters_up equal to
 * the running masters: 0 when it does, -1 when it exited (reaped; its
 * exit status in *exit_status), -2 at the deadline.
 */
static int
h_daemon_wait_ready(int64_t deadline, int expect_up, int *exit_status)
{
    long long up;
    int status;

    for (;;) {
        if (h_exited(H_D->pid, &status)) {
            *exit_status = h_decode_status(status);
            H_D->pid = 0;
            return -1;
        }
        if (h_stat_once("masters_up", &up) == 0
            && (expect_up < 0
                || up == (expect_up > 0 ? (long long)expect_up : (long long)h_masters_alive()))) {
            return 0;
        }
        if (h_now_ms() >= deadline) {
            return -2;
        }
        h_sleep_ms(H_READY_POLL_MS);
    }
}

/*
 * A free port for daemon slot that no other daemon of the test has: in
 * a namespace of its own, a daemon would not notice that another one
 * elsewhere has the same port, and the fault suite tells them apart by
 * port.  -1 when none was found.
 */
static int
h_new_daemon_port(size_t slot)
{
    int port = -1, tries;
    size_t k;
    bool taken = true;

    for (tries = 0; tries < 20 && taken; tries++) {
        port = h_free_port();
        taken = false;
        for (k = 0; k < slot && port > 0; k++) {
            taken = taken || h_daemons[k].port == port;
        }
    }
    return taken ? -1 : port;
}

/* The daemon binary a start runs now: $REDLOCKD_BIN, else ./build/redlockd. */
static const char *
h_daemon_bin(void)
{
    const char *bin = getenv("REDLOCKD_BIN");

    return bin != NULL && bin[0] != '\0' ? bin : "./build/redlockd";
}

/*
 * The command line of the current daemon into argv (at least
 * H_WRAP_WORDS + 8 entries): prlimit for opts->nofile, $REDLOCKD_WRAP,
 * the binary named by $REDLOCKD_BIN now, -c and its config.  wrapbuf
 * and nofile (1024 and 48 bytes) hold the words.  Returns the binary.
 */
static const char *
h_daemon_argv(const struct h_daemon_opts *opts, const char **argv, char *wrapbuf,
              char *nofile)
{
    const char *bin = h_daemon_bin();
    const char *wrap = getenv("REDLOCKD_WRAP");
    char *save = NULL, *w;
    size_t k = 0;

    /* A descriptor limit, soft and hard, set by prlimit(1) before anything else runs. */
    if (opts->nofile > 0) {
        snprintf(nofile, 48, "--nofile=%d:%d", opts->nofile, opts->nofile);
        argv[k++] = "prlimit";
        argv[k++] = nofile;
        argv[k++] = "--";
    }
    /* REDLOCKD_WRAP: words put before the binary ("valgrind --leak-check=full"). */
    if (wrap != NULL) {
        snprintf(wrapbuf, 1024, "%s", wrap);
        for (w = strtok_r(wrapbuf, " ", &save); w != NULL && k < H_WRAP_WORDS;
             w = strtok_r(NULL, " ", &save)) {
            argv[k++] = w;
        }
    }
    argv[k++] = bin;
    argv[k++] = "-c";
    argv[k++] = H_D->conf_path;
    argv[k] = NULL;
    return bin;
}

/*
 * Write the current daemon's config (for opts->known_keys_only, what bin
 * knows of it) and start it on its port: 0 when it is ready, -1 when it
 * exited during start-up (*status: its exit status), -2 when it was not
 * ready in time (stopped, its log printed unless quiet), -3 when it could
 * not be started at all.
 */
static int
h_daemon_try(const struct h_daemon_opts *opts, bool quiet, int *status)
{
    const char *argv[H_WRAP_WORDS + 8], *bin;
    char wrapbuf[1024], nofile[48];
    int rc;

    bin = h_daemon_argv(opts, argv, wrapbuf, nofile);
    if (h_write_conf(opts) != 0 || (opts->known_keys_only && h_conf_known_only(bin) != 0)) {
        return -3;
    }
    H_D->pid = h_spawn_in(argv, H_D->log_path, H_D->host.netns);
    if (H_D->pid < 0) {
        H_D->pid = 0;
        return -3;
    }
    rc = h_daemon_wait_ready(h_now_ms() + H_START_MS, opts->expect_masters_up, status);
    if (rc == -2) {
        if (!quiet) {
            fprintf(stderr, "harness: redlockd (%s) not ready after %d ms\n", bin, H_START_MS);
            h_print_daemon_log_tail(H_TAIL_LINES);
        }
        h_stop_daemon();
    }
    return rc;
}

int
h_start_daemon(const struct h_daemon_opts *opts)
{
    static const struct h_daemon_opts none;
    char exits[H_PORT_TRIES * 16] = "";
    size_t prev = h_cur, slot = h_ndaemons, used = 0;
    bool quiet = opts != NULL && opts->start_fails;
    int tries, rc, status = 0;

    if (opts == NULL) {
        opts = &none;
    }
    if (h_test_dir[0] == '\0' || h_nmasters == 0 || slot >= H_DAEMONS_MAX) {
        fprintf(stderr, "harness: h_start_daemon: needs h_begin and masters, and at most "
                "%d daemons\n", H_DAEMONS_MAX);
        return -1;
    }
    memset(&h_daemons[slot], 0, sizeof(h_daemons[slot]));
    h_daemon_paths(slot);
    if (strlen(h_daemons[slot].sock_path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path)
        || strchr(h_test_dir, '"') != NULL || strchr(h_test_dir, '\\') != NULL) {
        fprintf(stderr, "harness: test directory %s is not usable for the socket path\n",
                h_test_dir);
        return -1;
    }
    /* The accessors used while it starts (h_stat_once) must reach it. */
    h_cur = slot;
    if (opts->host != NULL) {
        H_D->host = *opts->host;
    }
    snprintf(H_D->auth, sizeof(H_D->auth), "%s",
             opts->auth_password != NULL ? opts->auth_password : "");
    for (tries = 1; tries <= (quiet ? 1 : H_PORT_TRIES); tries++) {
        H_D->port = h_new_daemon_port(slot);
        H_D->tls_port = 0;
        if (opts->tls_cert_file != NULL) {
            do {
                H_D->tls_port = h_free_port();
            } while (H_D->tls_port == H_D->port);
        }
        if (H_D->port < 0 || H_D->tls_port < 0) {
            h_cur = prev;
            return -1;
        }
        rc = h_daemon_try(opts, quiet, &status);
        if (rc == 0) {
            /* Tries that exited (a port taken meanwhile) are not news. */
            h_ndaemons = slot + 1;
            return 0;
        }
        if (rc != -1) {
            h_cur = prev;
            return -1;
        }
        /* It exited: perhaps its port was taken meanwhile; try another. */
        used += (size_t)snprintf(exits + used, sizeof(exits) - used, "%s%d",
                                 used > 0 ? ", " : "", status);
    }
    if (!quiet) {
        fprintf(stderr, "harness: redlockd (%s) would not start: it exited during start-up "
                "%d times (status %s)\n", h_daemon_bin(), tries - 1, exits);
        h_print_daemon_log_tail(H_TAIL_LINES);
    }
    h_cur = prev;
    return -1;
}

int
h_restart_daemon(const struct h_daemon_opts *opts)
{
    static const struct h_daemon_opts none;
    int rc, status = 0;

    if (opts == NULL) {
        opts = &none;
    }
    if (h_ndaemons == 0 || H_D->pid > 0) {
        fprintf(stderr, "harness: h_restart_daemon: daemon %zu is %s\n", h_cur,
                h_ndaemons == 0 ? "not started" : "still running");
        return -1;
    }
    if (opts->auth_password != NULL) {
        snprintf(H_D->auth, sizeof(H_D->auth), "%s", opts->auth_password);
    }
    rc = h_daemon_try(opts, false, &status);
    if (rc == -1) {
        fprintf(stderr, "harness: redlockd %zu (%s) exited during its restart on port %d "
                "(status %d)\n", h_cur, h_daemon_bin(), H_D->port, status);
        h_print_daemon_log_tail(H_TAIL_LINES);
    }
    return rc == 0 ? 0 : -1;
}

size_t
h_daemon_count(void)
{
    return h_ndaemons;
}

void
h_use_daemon(size_t i)
{
    if (i >= h_ndaemons) {
        /* Acting on another daemon than the test meant would mislead. */
        fprintf(stderr, "harness: h_use_daemon(%zu): only %zu daemons were started\n",
                i, h_ndaemons);
        abort();
    }
    h_cur = i;
}

size_t
h_current_daemon(void)
{
    return h_cur;
}

pid_t
h_daemon_pid(void)
{
    return H_D->pid;
}

int
h_daemon_port(void)
{
    return H_D->port;
}

const char *
h_daemon_addr(void)
{
    return h_host_addr(&H_D->host);
}

int
h_daemon_tls_port(void)
{
    return H_D->tls_port;
}

const char *
h_daemon_unix_path(void)
{
    return H_D->sock_path;
}

const char *
h_daemon_conf_path(void)
{
    return H_D->conf_path;
}

const char *
h_daemon_log_path(void)
{
    return H_D->log_path;
}

int
h_signal_daemon(int sig)
{
    if (H_D->pid <= 0) {
        return -1;
    }
    return kill(H_D->pid, sig) == 0 ? 0 : -1;
}

/* h_wait_daemon() for daemon d, until deadline. */
static int
h_daemon_wait_exit(struct h_daemon *d, int64_t deadline)
{
    int64_t now;
    int status;

    if (d->pid <= 0) {
        return H_NO_DAEMON;
    }
    for (;;) {
        if (h_exited(d->pid, &status)) {
            d->pid = 0;
            return h_decode_status(status);
        }
        now = h_now_ms();
        if (now >= deadline) {
            return H_STILL_RUNNING;
        }
        h_sleep_ms(deadline - now < H_POLL_MS ? deadline - now : H_POLL_MS);
    }
}

int
h_wait_daemon(int64_t timeout_ms)
{
    return h_daemon_wait_exit(H_D, h_now_ms() + timeout_ms);
}

int
h_stop_daemon(void)
{
    int rc;

    if (H_D->pid <= 0) {
        return H_NO_DAEMON;
    }
    kill(H_D->pid, SIGTERM);
    rc = h_wait_daemon(H_STOP_MS);
    if (rc == H_STILL_RUNNING) {
        fprintf(stderr, "harness: redlockd ignored SIGTERM for %d ms; SIGKILL\n", H_STOP_MS);
        kill(H_D->pid, SIGKILL);
        rc = h_wait_daemon(H_STOP_MS);
    }
    return rc;
}

/*
 * Stop every running daemon: SIGTERM to all first, so that their
 * shutdowns (up to 2 s each of releasing locks) overlap, then one
 * deadline for all, then SIGKILL for any still running.
 */
static void
h_stop_all_daemons(void)
{
    int64_t deadline;
    size_t i;

    for (i = 0; i < h_ndaemons; i++) {
        if (h_daemons[i].pid > 0) {
            kill(h_daemons[i].pid, SIGTERM);
        }
    }
    deadline = h_now_ms() + H_STOP_MS;
    for (i = 0; i < h_ndaemons; i++) {
        if (h_daemon_wait_exit(&h_daemons[i], deadline) == H_STILL_RUNNING) {
            fprintf(stderr, "harness: redlockd %zu ignored SIGTERM for %d ms; SIGKILL\n",
                    i, H_STOP_MS);
            kill(h_daemons[i].pid, SIGKILL);
            h_daemon_wait_exit(&h_daemons[i], h_now_ms() + H_STOP_MS);
        }
    }
}

void
h_print_daemon_log_tail(size_t nlines)
{
    h_print_tail(H_D->log_path, nlines, "redlockd log");
}

/* ---- protocol client ---- */

int
h_connect_tcp(void)
{
    char addr[H_ADDR_MAX + 16];

    snprintf(addr, sizeof(addr), "%s:%d", h_daemon_addr(), H_D->port);
    return h_connect(addr, true);
}

const char *
h_redlockctl_bin(void)
{
    static char path[PATH_MAX];
    const char *env = getenv("REDLOCKCTL_BIN"), *daemon = getenv("REDLOCKD_BIN"), *slash;

    if (env != NULL && env[0] != '\0') {
        return env;
    }
    if (daemon != NULL && (slash = strrchr(daemon, '/')) != NULL) {
        snprintf(path, sizeof(path), "%.*s/redlockctl", (int)(slash - daemon), daemon);
        return path;
    }
    return "./build/redlockctl";
}

char *
h_read_all(int fd, size_t max, int64_t timeout_ms, size_t *len)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    size_t used = 0, cap = 65536;
    char *buf = malloc(cap);

    while (buf != NULL) {
        struct pollfd p = { fd, POLLIN, 0 };
        int64_t left = deadline - h_now_ms();
        ssize_t n;

        if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
            break;
        }
        if (used + 4096 + 1 > cap) {
            char *more = cap >= max + 1 ? NULL : realloc(buf, cap * 2);

            if (more == NULL) {
                break;
            }
            buf = more;
            cap *= 2;
        }
        n = recv(fd, buf + used, cap - used - 1, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 || used + (size_t)n > max) {
            break;
        }
        if (n == 0) {
            buf[used] = '\0';
            if (len != NULL) {
                *len = used;
            }
            return buf;
        }
        used += (size_t)n;
    }
    free(buf);
    return NULL;
}

/*
 * Connect to target (a Unix socket path, or HOST:PORT when tcp), trying
 * again when a signal interrupted it.  The descriptor, or -1 with errno.
 */
static int
h_connect(const char *target, bool tcp)
{
    int64_t deadline = h_now_ms() + H_CONNECT_MS;
    struct client c;
    int rc;

    client_init(&c, -1, 0);
    do {
        rc = tcp ? client_connect_tcp(&c, target, deadline)
                 : client_connect_unix(&c, target, deadline);
    } while (rc != 0 && errno == EINTR);
    return rc == 0 ? c.fd : -1;
}

int
h_connect_port(int port)
{
    char addr[32];

    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    return h_connect(addr, true);
}

int
h_connect_unix(void)
{
    return h_connect(H_D->sock_path, false);
}

int
h_tcp_connect(const char *from, const char *addr, int port, int rcvbuf)
{
    struct sockaddr_in sa;
    int fd, err;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    if (from != NULL) {
        if (inet_pton(AF_INET, from, &sa.sin_addr) != 1) {
            errno = EINVAL;
            goto fail;
        }
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            goto fail;
        }
    }
    if (rcvbuf > 0
        && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) != 0) {
        goto fail;
    }
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        errno = EINVAL;
        goto fail;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        goto fail;
    }
    return fd;

fail:
    err = errno;
    close(fd);
    errno = err;
    return -1;
}

int
h_tcp_listen(uint32_t addr, int backlog, int *port)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int fd, err;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = addr;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, backlog) != 0
        || getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

int
h_send_raw(int fd, const void *buf, size_t len)
{
    struct client c;

    client_init(&c, fd, 0);
    return client_write(&c, buf, len, -1);
}

int
h_send(int fd, const char *line)
{
    struct client c;

    client_init(&c, fd, 0);
    return client_send(&c, line, -1);
}

/* Wait until fd is readable: 1 readable, 0 at the deadline, -1 error. */
static int
h_poll_in(int fd, int64_t deadline)
{
    struct pollfd pfd;
    int64_t left;
    int rc;

    for (;;) {
        left = deadline - h_now_ms();
        pfd.fd = fd;
        pfd.events = POLLIN;
        pfd.revents = 0;
        rc = poll(&pfd, 1, left > 0 ? (int)left : 0);
        if (rc < 0 && errno == EINTR) {
            continue;
        }
        return rc < 0 ? -1 : rc > 0 ? 1 : 0;
    }
}

char *
h_read_line(int fd, int64_t timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    enum client_read rc;
    struct client c;
    char *line;

    /* Exact: the bytes after the line stay in the socket for the test. */
    client_init(&c, fd, CLIENT_EXACT | CLIENT_KEEP_CR);
    do {
        rc = client_read_line(&c, deadline);
    } while (rc == CLIENT_INTR);
    if (rc != CLIENT_LINE) {
        return NULL;
    }
    line = malloc(c.line_len + 1);
    if (line != NULL) {
        memcpy(line, c.line, c.line_len + 1);
    }
    return line;
}

char *
h_cmd(int fd, const char *line, int64_t timeout_ms)
{
    if (h_send(fd, line) != 0) {
        return NULL;
    }
    return h_read_line(fd, timeout_ms);
}

bool
h_expect_eof(int fd, int64_t timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    ssize_t n;
    char c;

    for (;;) {
        if (h_poll_in(fd, deadline) <= 0) {
            return false;
        }
        n = recv(fd, &c, 1, 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            return true;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        return false;
    }
}

bool
h_quiet(int fd, int64_t ms)
{
    return h_poll_in(fd, h_now_ms() + ms) == 0;
}

int
h_stat(int fd, const char *name, long long *value)
{
    size_t nlen = strlen(name);
    bool found = false;
    long long v;
    char *line, *end;

    if (h_send(fd, "STATS") != 0) {
        return -1;
    }
    for (;;) {
        line = h_read_line(fd, H_STATS_LINE_MS);
        if (line == NULL) {
            return -1;
        }
        if (strcmp(line, "END") == 0) {
            free(line);
            break;
        }
        if (strncmp(line, "ERR ", 4) == 0) {
            /* A failed request has no END. */
            free(line);
            return -1;
        }
        if (strncmp(line, "STAT ", 5) == 0 && strncmp(line + 5, name, nlen) == 0
            && line[5 + nlen] == ' ') {
            errno = 0;
            v = strtoll(line + 6 + nlen, &end, 10);
            if (errno == 0 && end != line + 6 + nlen && *end == '\0') {
                *value = v;
                found = true;
            }
        }
        free(line);
    }
    return found ? 0 : -1;
}

int
h_stat_once(const char *name, long long *value)
{
    int fd, rc;

    fd = h_connect_tcp();
    if (fd < 0) {
        return -1;
    }
    if (H_D->auth[0] != '\0') {
        char line[300], *got;

        snprintf(line, sizeof(line), "AUTH %s", H_D->auth);
        got = h_cmd(fd, line, H_STATS_LINE_MS);
        rc = got != NULL && strcmp(got, "OK") == 0 ? 0 : -1;
        free(got);
        if (rc != 0) {
            close(fd);
            return -1;
        }
    }
    rc = h_stat(fd, name, value);
    close(fd);
    return rc;
}

/* A STATS counter polled by h_wait_stat(). */
struct h_stat_wait {
    const char *name;       /* STAT name */
    long long   want;       /* value to reach */
    bool        at_least;   /* want or more will do */
    long long   seen;       /* last value read, -1 when none */
};

static bool
h_cond_stat(void *arg)
{
    struct h_stat_wait *w = arg;

    if (h_stat_once(w->name, &w->seen) != 0) {
        w->seen = -1;
        return false;
    }
    return w->at_least ? w->seen >= w->want : w->seen == w->want;
}

bool
h_wait_stat(const char *name, long long want, bool at_least, int64_t timeout_ms,
            long long *seen)
{
    struct h_stat_wait w = { name, want, at_least, -1 };
    bool ok = h_wait_until(h_cond_stat, &w, timeout_ms);

    if (seen != NULL) {
        *seen = w.seen;
    }
    return ok;
}

/* ---- the daemon log ---- */

off_t
h_log_size(void)
{
    struct stat st;

    return stat(h_daemon_log_path(), &st) == 0 ? st.st_size : 0;
}

bool
h_log_find(off_t from, const char *text, char *line, size_t size)
{
    FILE *f = fopen(h_daemon_log_path(), "re");
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n;
    bool found = false;

    if (f == NULL) {
        return false;
    }
    if (fseeko(f, from, SEEK_SET) == 0) {
        while (!found && (n = getline(&buf, &cap, f)) > 0) {
            if (buf[n - 1] == '\n') {
                buf[n - 1] = '\0';
            }
            found = strstr(buf, text) != NULL;
        }
    }
    if (found && line != NULL) {
        snprintf(line, size, "%s", buf);
    }
    free(buf);
    fclose(f);
    return found;
}

/* A log search polled by h_wait_log(). */
struct h_log_wait {
    off_t       from;       /* offset the search starts at */
    const char *text;       /* what a line must contain */
};

static bool
h_cond_log(void *arg)
{
    struct h_log_wait *w = arg;

    return h_log_find(w->from, w->text, NULL, 0);
}

bool
h_wait_log(off_t from, const char *text, int64_t timeout_ms)
{
    struct h_log_wait w = { from, text };

    return h_wait_until(h_cond_log, &w, timeout_ms);
}

/* ---- reply parsing ---- */

bool
h_is_reply(const char *line, const char *status, const char *name)
{
    return client_is_reply(line, status, name);
}

bool
h_reply_field(const char *line, const char *key, char *out, size_t size)
{
    return client_field(line, key, out, size);
}

bool
h_reply_int(const char *line, const char *key, long long *value)
{
    int64_t v;

    if (!client_field_int(line, key, &v)) {
        return false;
    }
    *value = v;
    return true;
}

/* True when s is an owner token: 32 lowercase hex digits. */
bool
h_is_token(const char *s)
{
    size_t i;

    for (i = 0; s[i] != '\0'; i++) {
        if (!isdigit((unsigned char)s[i]) && (s[i] < 'a' || s[i] > 'f')) {
            return false;
        }
    }
    return i == 32;
}

/* ---- HTTP and the metrics endpoint ---- */

void
h_http_free(struct h_http_resp *r)
{
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof(*r));
}

int
h_http(int port, const char *request, struct h_http_resp *r)
{
    size_t len = 0;
    char *buf = NULL, *sep;
    int fd = h_connect_port(port);

    memset(r, 0, sizeof(*r));
    if (fd >= 0 && h_send_raw(fd, request, strlen(request)) == 0) {
        buf = h_read_all(fd, H_HTTP_MAX, H_HTTP_MS, &len);
        if (buf == NULL) {
            fprintf(stderr, "harness: no complete HTTP response from port %d within %d ms\n",
                    port, H_HTTP_MS);
        }
    }
    if (fd >= 0) {
        close(fd);
    }
    if (buf == NULL || (sep = strstr(buf, "\r\n\r\n")) == NULL
        || sscanf(buf, "HTTP/1.%*c %d", &r->status) != 1) {
        goto fail;
    }
    r->head = strndup(buf, (size_t)(sep - buf) + 2);
    r->body_len = len - (size_t)(sep + 4 - buf);
    r->body = malloc(r->body_len + 1);
    if (r->head == NULL || r->body == NULL) {
        goto fail;
    }
    memcpy(r->body, sep + 4, r->body_len);
    r->body[r->body_len] = '\0';
    free(buf);
    return 0;
fail:
    free(buf);
    h_http_free(r);
    return -1;
}

char *
h_metrics_scrape(int port)
{
    struct h_http_resp r;
    char req[160], *body;

    snprintf(req, sizeof(req), "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
             "Connection: close\r\n\r\n", port);
    if (h_http(port, req, &r) != 0) {
        return NULL;
    }
    if (r.status != 200) {
        fprintf(stderr, "harness: GET /metrics on port %d answered %d\n", port, r.status);
        h_http_free(&r);
        return NULL;
    }
    body = r.body;
    r.body = NULL;
    h_http_free(&r);
    return body;
}

bool
h_metric_value(const char *body, const char *series, double *value)
{
    size_t slen = strlen(series);
    const char *p = body;

    while (p != NULL && *p != '\0') {
        if (strncmp(p, series, slen) == 0 && p[slen] == ' ') {
            char *end;

            *value = strtod(p + slen + 1, &end);
            return end != p + slen + 1 && (*end == '\n' || *end == '\0');
        }
        p = strchr(p, '\n');
        if (p != NULL) {
            p++;
        }
    }
    return false;
}

long long
h_metric_int(const char *body, const char *series)
{
    double v = 0;

    return h_metric_value(body, series, &v) ? (long long)v : -1;
}
