/*
 * check_redlockctl.c: redlockctl (client/redlockctl.c) end to end.
 *
 * Real redis-server masters and the real daemon on free loopback ports
 * (tests/harness.h); redlockctl is the binary named by $REDLOCKCTL_BIN
 * (else the one next to $REDLOCKD_BIN, else ./build/redlockctl), run with
 * h_spawn() (stdin /dev/null, stdout and stderr to <test dir>/<tag>.out)
 * or, for the terminal test, under a pseudo-terminal.  The commands it
 * runs are small shell scripts that leave files in the test directory.
 *
 * Covered: every exit status (usage 64, unreachable 69, NOQUORUM 69,
 * ERR PROTO 64, conflicts 1 and -E, lost 75, AUTH 77, 126/127, signals
 * 128+N), -w waiting through a loss of quorum instead of exiting 69, the
 * command's status passed through, its environment and process group,
 * the passwords overwritten in redlockctl's own /proc/<pid>/environ,
 * no shell without -c, the lock held while the command runs and free as
 * soon as redlockctl exits, the command stopped (SIGTERM, then SIGKILL
 * to its whole group) when the quorum is taken away or the daemon goes,
 * signals forwarded to the command and ending a pending wait, concurrent
 * redlockctl serialized with increasing fences, the status, stats and
 * ping subcommands, the defaults from the environment, the command
 * killed when redlockctl is, and a terminal handed to the command; who
 * holds what: --label and the default label sent with the LOCK, list
 * (holds, waiters, a prefix), watch (the current state, then every change
 * through either of two daemons, printed at once; SIGTERM, SIGINT, the
 * daemon going away) and break (refused without admin, done by root over
 * the Unix socket and with the admin password over TCP, the holder's
 * command stopped); TLS: the new options' usage errors, the server's
 * certificate checked against openssl s_server (wrong CA, wrong name,
 * expired: 69 with OpenSSL's reason; a verified line both ways), and
 * end to end against redlockd's TLS listener, skipped with a message
 * when this redlockd has none.  Sets (-N NAME, repeated): every name
 * held while the command runs, REDLOCK_NAME and REDLOCK_FENCE in the
 * order given, all released after; refused whole (exit 1, nothing
 * taken) when one name is held; the command stopped (75) once when one
 * name's key vanishes, the others freed; the usage errors of -N.
 *
 * Cleanup: Check ends a failed test with _exit(), so no teardown runs
 * then.  redlockctl gets PR_SET_PDEATHSIG from h_spawn() and gives it to
 * its command; what the command starts in its process group is killed by
 * a small reaper process, which learns the group ids through a pipe and
 * kills them when the pipe's last writer (the test process) is gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <pty.h>
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

#include "tests/expect.h"
#include "tests/runner.h"
#include "tests/harness.h"

#define NMASTERS        5
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define EXIT_MS         10000   /* deadline for redlockctl to exit when it should */
#define FILE_MS         5000    /* deadline for a command to leave a file */
#define TEST_TIMEOUT_S  60
#define CT_KIDS_MAX     64      /* redlockctl processes per test */
#define CT_GROUPS_MAX   64      /* process groups the reaper kills */
#define CT_PATH_MAX     512     /* paths in the test directory */
#define CT_CMD_MAX      2048    /* shell command lines */

static pid_t ct_kids[CT_KIDS_MAX];          /* redlockctl processes not reaped yet */
static int   ct_reaper_fd = -1;             /* write end of the reaper's pipe */
static pid_t ct_reaper_pid;                 /* the reaper */

/* ---- processes ---- */

/*
 * The reaper: a child that reads process group ids from a pipe and, when
 * the pipe's last writer is gone (the test ended, however), SIGKILLs
 * every group it was told about.
 */
static void
ct_setup(void)
{
    pid_t list[CT_GROUPS_MAX], pgid;
    size_t n = 0, i;
    int p[2];

    memset(ct_kids, 0, sizeof(ct_kids));
    unsetenv("REDLOCKD_SOCKET");
    unsetenv("REDLOCKD_ADDR");
    unsetenv("REDLOCKD_PASSWORD");
    unsetenv("REDLOCKD_ADMIN_PASSWORD");
    unsetenv("REDLOCKD_TLS");
    unsetenv("REDLOCK_FENCE");
    ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    ct_reaper_pid = fork();
    ck_assert_int_ge(ct_reaper_pid, 0);
    if (ct_reaper_pid == 0) {
        close(p[1]);
        while (read(p[0], &pgid, sizeof(pgid)) == (ssize_t)sizeof(pgid)) {
            if (n < CT_GROUPS_MAX && pgid > 1) {
                list[n++] = pgid;
            }
        }
        for (i = 0; i < n; i++) {
            kill(-list[i], SIGKILL);
        }
        _exit(0);
    }
    close(p[0]);
    ct_reaper_fd = p[1];
}

/* Kill and reap the redlockctl processes left, stop the reaper, stop everything else. */
static void
ct_teardown(void)
{
    size_t i;

    for (i = 0; i < CT_KIDS_MAX; i++) {
        if (ct_kids[i] > 0) {
            kill(ct_kids[i], SIGKILL);
            waitpid(ct_kids[i], NULL, 0);
            ct_kids[i] = 0;
        }
    }
    if (ct_reaper_fd >= 0) {
        close(ct_reaper_fd);
        ct_reaper_fd = -1;
        waitpid(ct_reaper_pid, NULL, 0);
    }
    h_end();
}

/* Have the reaper kill process group pgid when the test ends. */
static void
ct_track_group(pid_t pgid)
{
    ck_assert_msg(write(ct_reaper_fd, &pgid, sizeof(pgid)) == (ssize_t)sizeof(pgid),
                  "cannot write to the reaper");
}

static void
ct_kid_add(pid_t pid)
{
    size_t i;

    for (i = 0; i < CT_KIDS_MAX && ct_kids[i] != 0; i++) {
        continue;
    }
    ck_assert_msg(i < CT_KIDS_MAX, "too many redlockctl processes in one test");
    ct_kids[i] = pid;
}

static void
ct_kid_forget(pid_t pid)
{
    size_t i;

    for (i = 0; i < CT_KIDS_MAX; i++) {
        if (ct_kids[i] == pid) {
            ct_kids[i] = 0;
        }
    }
}

/* "127.0.0.1:<port>" of the current daemon, for -H (a static buffer, rewritten by each call). */
static const char *
ct_addr(void)
{
    static char addr[64];

    snprintf(addr, sizeof(addr), "127.0.0.1:%d", h_daemon_port());
    return addr;
}

/* <test dir>/<name> into out. */
static void
ct_path(char *out, size_t size, const char *name)
{
    ck_assert_msg(snprintf(out, size, "%s/%s", h_dir(), name) < (int)size, "path too long");
}

/*
 * Start redlockctl with args (NULL-terminated, without the program name);
 * its stdout and stderr go to <test dir>/<tag>.out.  Returns its pid.
 */
static pid_t
ct_spawn(const char *tag, const char *const *args)
{
    const char *argv[40];
    char out[CT_PATH_MAX], name[64];
    size_t n = 0;
    pid_t pid;

    argv[n++] = h_redlockctl_bin();
    while (*args != NULL) {
        ck_assert(n < sizeof(argv) / sizeof(argv[0]) - 1);
        argv[n++] = *args++;
    }
    argv[n] = NULL;
    snprintf(name, sizeof(name), "%s.out", tag);
    ct_path(out, sizeof(out), name);
    pid = h_spawn(argv, out);
    ck_assert_msg(pid > 0, "cannot start %s", argv[0]);
    ct_kid_add(pid);
    return pid;
}

#define CT_SPAWN(tag, ...)  ct_spawn((tag), (const char *const[]){ __VA_ARGS__, NULL })

/* A process to wait for, and its status in the shell's manner. */
struct ct_proc {
    pid_t   pid;    /* the process (a child of the test) */
    int     code;   /* its exit code once reaped, -1 before */
};

static bool
ct_cond_exited(void *arg)
{
    struct ct_proc *p = arg;
    int status;

    if (waitpid(p->pid, &status, WNOHANG) != p->pid) {
        return false;
    }
    p->code = h_decode_status(status);
    return true;
}

/* Wait up to ms for redlockctl pid to exit: its exit code, or -1 when it did not. */
static int
ct_wait(pid_t pid, int64_t ms)
{
    struct ct_proc p = { pid, -1 };

    if (!h_wait_until(ct_cond_exited, &p, ms)) {
        return -1;
    }
    ct_kid_forget(pid);
    return p.code;
}

/* ct_spawn() and ct_wait(EXIT_MS); fails the test when it does not exit. */
static int
ct_run(const char *tag, const char *const *args)
{
    pid_t pid = ct_spawn(tag, args);
    int code = ct_wait(pid, EXIT_MS);

    ck_assert_msg(code >= 0, "redlockctl (%s) did not exit within %d ms", tag, EXIT_MS);
    return code;
}

#define CT_RUN(tag, ...)    ct_run((tag), (const char *const[]){ __VA_ARGS__, NULL })

/* Contents of a file (malloc'd), or NULL when it cannot be read. */
static char *
ct_slurp(const char *path)
{
    char *buf;
    size_t n;
    FILE *f;

    f = fopen(path, "re");
    if (f == NULL) {
        return NULL;
    }
    buf = calloc(1, 65536);
    ck_assert_ptr_nonnull(buf);
    n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* What redlockctl <tag> printed (stdout and stderr), "" when nothing. */
static char *
ct_out(const char *tag)
{
    char path[CT_PATH_MAX], name[64], *s;

    snprintf(name, sizeof(name), "%s.out", tag);
    ct_path(path, sizeof(path), name);
    s = ct_slurp(path);
    return s != NULL ? s : strdup("");
}

static size_t
ct_lines(const char *s)
{
    size_t n = 0;

    for (; *s != '\0'; s++) {
        n += *s == '\n';
    }
    return n;
}

/* Assert that redlockctl <tag> printed text (and show what it printed if not). */
static void
ct_assert_out_has(const char *tag, const char *text)
{
    char *out = ct_out(tag);

    ck_assert_msg(strstr(out, text) != NULL, "%s printed '%s', expected it to contain '%s'",
                  tag, out, text);
    free(out);
}

/* Whether redlockctl <tag> printed text. */
static bool
ct_out_has(const char *tag, const char *text)
{
    char *out = ct_out(tag);
    bool has = strstr(out, text) != NULL;

    free(out);
    return has;
}

static bool
ct_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* arg: a path.  The file exists and ends in a newline (fully written). */
static bool
ct_cond_file(void *arg)
{
    char *s = ct_slurp(arg);
    bool done = s != NULL && s[0] != '\0' && s[strlen(s) - 1] == '\n';

    free(s);
    return done;
}

/* Wait for a file with one number (a pid) and return it. */
static pid_t
ct_wait_pid_file(const char *path)
{
    char *s;
    long v;

    ck_assert_msg(h_wait_until(ct_cond_file, (void *)path, FILE_MS),
                  "the command did not write %s", path);
    s = ct_slurp(path);
    ck_assert_ptr_nonnull(s);
    v = strtol(s, NULL, 10);
    free(s);
    ck_assert_msg(v > 1, "bad pid in %s", path);
    return (pid_t)v;
}

/* True when pid is a live process (not gone, not a zombie). */
static bool
ct_alive(pid_t pid)
{
    char path[64], *s, *paren;
    bool alive;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    s = ct_slurp(path);
    if (s == NULL) {
        return false;
    }
    paren = strrchr(s, ')');
    alive = paren != NULL && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
    free(s);
    return alive;
}

static bool
ct_cond_dead(void *arg)
{
    return !ct_alive(*(pid_t *)arg);
}

static bool
ct_cond_alive(void *arg)
{
    return ct_alive(*(pid_t *)arg);
}

/* Require a STATS counter to reach want within ms. */
static void
ct_wait_stat(const char *name, long long want, int64_t ms)
{
    long long seen;

    ck_assert_msg(h_wait_stat(name, want, false, ms, &seen),
                  "STAT %s stayed at %lld, expected %lld", name, seen, want);
}

/* Text that redlockctl <tag> should print, to wait for. */
struct ct_text {
    const char *tag;    /* which redlockctl */
    const char *text;   /* what it should print */
};

static bool
ct_cond_out(void *arg)
{
    struct ct_text *t = arg;
    char *out = ct_out(t->tag);
    bool found = strstr(out, t->text) != NULL;

    free(out);
    return found;
}

/* arg: struct ct_try.  TRYLOCK name on fd answered OK (the lock is then held on fd). */
struct ct_try {
    int         fd;     /* connection to try on */
    const char *name;   /* lock name */
};

static bool
ct_cond_trylock(void *arg)
{
    struct ct_try *t = arg;
    char line[300], *got;
    bool ok;

    snprintf(line, sizeof(line), "TRYLOCK %s", t->name);
    got = h_cmd(t->fd, line, CMD_MS);
    ok = got != NULL && h_is_reply(got, "OK", t->name);
    free(got);
    return ok;
}

/* ---- usage and reachability ---- */

/* Every malformed command line is exit 64 with a reason; -h and -V are 0. */
START_TEST(usage_errors)
{
    static const char *const cases[][8] = {
        { NULL },
        { "name", NULL },
        { "-w", "abc", "name", "true", NULL },
        { "-w", "-1", "name", "true", NULL },
        { "-w", NULL },
        { "-E", "256", "name", "true", NULL },
        { "-t", "0", "name", "true", NULL },
        { "-t", "12x", "name", "true", NULL },
        { "-k", "soon", "name", "true", NULL },
        { "-Q", "name", "true", NULL },
        { "--frobnicate", "name", "true", NULL },
        { "-n", "-w", "3", "name", "true", NULL },
        { "-S", "/nonexistent.sock", "-H", "127.0.0.1:1", "name", "true", NULL },
        { "-H", "no-port", "name", "true", NULL },
        { "-H", "::1:7379", "name", "true", NULL },
        { "bad\001name", "true", NULL },
        { "name", "-c", "exit 0", "extra", NULL },
        { "-c", "exit 0", "name", "extra", NULL },
        { "status", NULL },
        { "status", "a", "b", NULL },
        { "status", "bad name", NULL },
        { "check", "name", NULL },
        { "check", "name", "--fence", NULL },
        { "check", "name", "--fence", "0", NULL },
        { "check", "name", "--fence", "x", NULL },
        { "check", "name", "--permit", "1", NULL },
        { "check", "name", "--fence", "1", "--token", "0123456789abcdef0123456789abcdef",
          NULL },
        { "check", "name", "--fence", "1", "--permit", "1000", NULL },
        { "--fence", "check", "name", "--fence", "1", NULL },
        { "stats", "extra", NULL },
        { "-n", "ping", NULL },
        { "--fence", "stats", NULL },
        { "--label", "", "name", "true", NULL },
        { "--label", "two words", "name", "true", NULL },
        { "--label", "tab\there", "name", "true", NULL },
        { "--label", "caf\xc3\xa9", "name", "true", NULL },
        { "--label", "x", "status", "name", NULL },
        { "--label", NULL },
        { "list", "a", "b", NULL },
        { "list", "bad prefix", NULL },
        { "-n", "list", NULL },
        { "watch", NULL },
        { "watch", "a", "b", NULL },
        { "watch", "bad\001name", NULL },
        { "break", NULL },
        { "break", "a", "b", NULL },
        { "-s", "break", "a", NULL },
        { "--tls", "-S", "/nonexistent.sock", "ping", NULL },
        { "--cacert", "/nonexistent/ca.crt", "ping", NULL },
        { "--cert", "/nonexistent/c.crt", "ping", NULL },
        { "--key", "/nonexistent/c.key", "ping", NULL },
        { "--cert", "/nonexistent/c.crt", "--key", "/nonexistent/c.key", "ping", NULL },
        { "--cacert", NULL },
        { "--cert", NULL },
        { "--key", NULL },
    };
    char tag[32], longname[260], *out;
    size_t i;
    int code;

    EXPECT_SETUP();
    /* Should a case be taken as valid, it must not find a real daemon. */
    setenv("REDLOCKD_ADDR", "127.0.0.1:1", 1);
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(tag, sizeof(tag), "case%zu", i);
        code = ct_run(tag, cases[i]);
        out = ct_out(tag);
        ck_assert_msg(code == 64, "case %zu (%s %s ...) exited %d, expected 64: %s", i,
                      cases[i][0] ? cases[i][0] : "", cases[i][0] && cases[i][1] ? cases[i][1] : "",
                      code, out);
        ck_assert_msg(strncmp(out, "redlockctl: ", 12) == 0, "case %zu printed '%s'", i, out);
        free(out);
    }
    memset(longname, 'x', 251);
    longname[251] = '\0';
    ck_assert_int_eq(CT_RUN("long", longname, "true"), 64);
    ct_assert_out_has("long", "bad lock name");
    memset(longname, 'l', 65);
    longname[65] = '\0';
    ck_assert_int_eq(CT_RUN("longlabel", "--label", longname, "name", "true"), 64);
    ct_assert_out_has("longlabel", "--label: bad label");
    setenv("REDLOCKD_ADMIN_PASSWORD", "two words", 1);
    ck_assert_int_eq(CT_RUN("adminpw", "break", "name"), 64);
    ct_assert_out_has("adminpw", "REDLOCKD_ADMIN_PASSWORD");
    unsetenv("REDLOCKD_ADMIN_PASSWORD");
    setenv("REDLOCKD_PASSWORD", "two words", 1);
    ck_assert_int_eq(CT_RUN("pw", "name", "true"), 64);
    ct_assert_out_has("pw", "REDLOCKD_PASSWORD");
    unsetenv("REDLOCKD_PASSWORD");
    ck_assert_int_eq(CT_RUN("cacert", "--cacert", "/nonexistent/ca.crt", "ping"), 64);
    ct_assert_out_has("cacert", "--cacert: /nonexistent/ca.crt: No such file or directory");
    ck_assert_int_eq(CT_RUN("certkey", "--cert", "/nonexistent/c.crt", "ping"), 64);
    ct_assert_out_has("certkey", "--cert and --key go together");
    setenv("REDLOCKD_TLS", "yes", 1);
    ck_assert_int_eq(CT_RUN("tlsenv", "ping"), 64);
    ct_assert_out_has("tlsenv", "REDLOCKD_TLS must be 1");
    setenv("REDLOCKD_TLS", "1", 1);
    ck_assert_int_eq(CT_RUN("tlsunix", "-S", "/nonexistent.sock", "ping"), 64);
    ct_assert_out_has("tlsunix", "REDLOCKD_TLS=1: TLS is for -H HOST:PORT");
    unsetenv("REDLOCKD_TLS");
    ck_assert_int_eq(CT_RUN("help", "-h"), 0);
    ct_assert_out_has("help", "Usage: redlockctl [options] NAME [--] COMMAND [ARGS...]");
    ck_assert_int_eq(CT_RUN("version", "-V"), 0);
    ct_assert_out_has("version", "redlockctl ");
}
END_TEST

/*
 * A first word a few edits from a subcommand, whose command could not
 * run (none, or not found): exit 64 with "did you mean", no lock taken.
 * With -- before it, or with a command that runs, it is a lock name.
 */
START_TEST(subcommand_typo)
{
    char *out;

    EXPECT_SETUP();
    /* Should a case be taken as a lock, it must not find a real daemon. */
    setenv("REDLOCKD_ADDR", "127.0.0.1:1", 1);
    ck_assert_int_eq(CT_RUN("staus", "staus", "report"), 64);
    ct_assert_out_has("staus", "unknown subcommand 'staus'; did you mean 'status'?");
    ct_assert_out_has("staus", "put -- before it");
    ck_assert_int_eq(CT_RUN("brake", "brake", "deploy"), 64);
    ct_assert_out_has("brake", "did you mean 'break'?");
    ck_assert_int_eq(CT_RUN("stat", "stat"), 64);
    ct_assert_out_has("stat", "did you mean 'status'?");
    ck_assert_int_eq(CT_RUN("pnig", "-H", "127.0.0.1:1", "pnig"), 64);
    ct_assert_out_has("pnig", "did you mean 'ping'?");
    /* Lock names: the connection is tried (and fails, 69). */
    ck_assert_int_eq(CT_RUN("dashdash", "--", "staus", "report"), 69);
    ck_assert_int_eq(CT_RUN("batch", "batch", "true"), 69);
    ck_assert_int_eq(CT_RUN("shell", "lost", "-c", "report"), 69);
    out = ct_out("batch");
    ck_assert_msg(strstr(out, "unknown subcommand") == NULL, "a lock named batch: '%s'", out);
    free(out);
    unsetenv("REDLOCKD_ADDR");
}
END_TEST

/* No daemon there: exit 69, one line naming the address, the command never runs. */
START_TEST(daemon_unreachable)
{
    char marker[CT_PATH_MAX], cmd[CT_CMD_MAX], addr[64], sock[CT_PATH_MAX], *out;
    int port;

    EXPECT_SETUP();
    port = h_free_port();
    ck_assert_int_gt(port, 0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    ct_path(marker, sizeof(marker), "marker");
    ct_path(sock, sizeof(sock), "none.sock");
    snprintf(cmd, sizeof(cmd), "touch '%s'", marker);

    ck_assert_int_eq(CT_RUN("tcp", "-H", addr, "name", "-c", cmd), 69);
    out = ct_out("tcp");
    ck_assert_msg(ct_lines(out) == 1 && strstr(out, addr) != NULL
                  && strstr(out, "Connection refused") != NULL, "printed '%s'", out);
    free(out);
    ck_assert_int_eq(CT_RUN("unix", "-S", sock, "name", "-c", cmd), 69);
    out = ct_out("unix");
    ck_assert_msg(ct_lines(out) == 1 && strstr(out, sock) != NULL, "printed '%s'", out);
    free(out);
    setenv("REDLOCKD_ADDR", addr, 1);
    ck_assert_int_eq(CT_RUN("env", "-n", "name", "-c", cmd), 69);
    ct_assert_out_has("env", addr);
    ck_assert_int_eq(CT_RUN("ping", "ping"), 69);
    ck_assert_int_eq(CT_RUN("stats", "stats"), 69);
    ck_assert_int_eq(CT_RUN("status", "status", "name"), 69);
    ck_assert_msg(!ct_exists(marker), "the command ran without the lock");
}
END_TEST

/* A request the daemon refuses as malformed (ttl below lock.min_ttl_ms) is 64. */
START_TEST(daemon_refuses_request)
{
    char marker[CT_PATH_MAX], cmd[CT_CMD_MAX];

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(marker, sizeof(marker), "marker");
    snprintf(cmd, sizeof(cmd), "touch '%s'", marker);
    ck_assert_int_eq(CT_RUN("ttl", "-H", ct_addr(), "-t", "50", "rq", "-c", cmd), 64);
    ct_assert_out_has("ttl", "out of range");
    ck_assert_msg(!ct_exists(marker), "the command ran without the lock");
}
END_TEST

/*
 * Three of five masters gone: exit 69 with the daemon's NOQUORUM text,
 * at once for -n, when -w runs out for a waiting lock (which retries
 * through the outage until then).
 */
START_TEST(no_quorum)
{
    char marker[CT_PATH_MAX], cmd[CT_CMD_MAX], *out;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(marker, sizeof(marker), "marker");
    snprintf(cmd, sizeof(cmd), "touch '%s'", marker);
    ck_assert_int_eq(h_kill_master(0), 0);
    ck_assert_int_eq(h_kill_master(1), 0);
    ck_assert_int_eq(h_kill_master(2), 0);
    ck_assert_int_eq(CT_RUN("wait", "-H", ct_addr(), "-w", "1", "nq", "-c", cmd), 69);
    out = ct_out("wait");
    ck_assert_msg(ct_lines(out) == 1 && strstr(out, "NOQUORUM") != NULL, "printed '%s'", out);
    free(out);
    ck_assert_int_eq(CT_RUN("try", "-H", ct_addr(), "-n", "nq", "-c", cmd), 69);
    ct_assert_out_has("try", "NOQUORUM");
    ck_assert_int_eq(CT_RUN("status", "-H", ct_addr(), "status", "nq"), 69);
    ct_assert_out_has("status", "NOQUORUM");
    ck_assert_msg(!ct_exists(marker), "the command ran without the lock");
}
END_TEST

/* A redlockctl that must still be waiting: running, its command not run. */
struct ct_waiting {
    pid_t       pid;        /* redlockctl */
    const char *marker;     /* the file its command would create */
};

static bool
ct_cond_waiting(void *arg)
{
    struct ct_waiting *w = arg;

    return ct_alive(w->pid) && !ct_exists(w->marker);
}

/*
 * -w waits through an outage: three of five masters stopped (SIGSTOP),
 * so that a TRYLOCK answers ERR NOQUORUM, then `redlockctl -w 20 NAME
 * -c CMD` is started; it neither exits nor runs CMD while they stay
 * stopped (2 s: the outage is the scenario), and once they continue it
 * runs CMD and exits 0 within the 20 s it was allowed, having printed
 * nothing (no NOQUORUM).
 */
START_TEST(wait_rides_out_outage)
{
    char marker[CT_PATH_MAX], cmd[CT_CMD_MAX], *out, *got;
    struct ct_waiting w;
    int64_t t0, t_back, took;
    size_t i;
    int code, fd;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(marker, sizeof(marker), "marker");
    snprintf(cmd, sizeof(cmd), "touch '%s'", marker);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_signal_master(i, SIGSTOP), 0);
    }
    /* The outage is real: one attempt answers NOQUORUM. */
    fd = expect_tcp();
    got = h_cmd(fd, "TRYLOCK ro", CMD_MS);
    ck_assert_msg(got != NULL && strncmp(got, "ERR NOQUORUM ", 13) == 0,
                  "TRYLOCK ro with 3 of 5 masters stopped answered '%s'",
                  got != NULL ? got : "(nothing)");
    free(got);
    close(fd);
    t0 = h_now_ms();
    w.pid = CT_SPAWN("wait", "-H", ct_addr(), "-w", "20", "ro", "-c", cmd);
    w.marker = marker;
    if (!h_holds_for(ct_cond_waiting, &w, 2000, 20)) {
        out = ct_out("wait");
        ck_abort_msg("redlockctl -w 20 gave up (or ran its command) %lld ms into the "
                     "outage: '%s'", (long long)(h_now_ms() - t0), out);
    }
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(h_signal_master(i, SIGCONT), 0);
    }
    t_back = h_now_ms();
    code = ct_wait(w.pid, 20000 - (t_back - t0));
    took = h_now_ms() - t0;
    out = ct_out("wait");
    ck_assert_msg(code == 0, "redlockctl -w 20 exited %d after %lld ms (%lld ms after the "
                  "masters continued), printing '%s'", code, (long long)took,
                  (long long)(h_now_ms() - t_back), out);
    ck_assert_msg(out[0] == '\0', "redlockctl printed '%s'", out);
    free(out);
    ck_assert_msg(ct_exists(marker), "the command did not run");
}
END_TEST

/* ---- the command ---- */

/*
 * The command's exit status is redlockctl's: codes, 128 + signal, 127
 * and 126; each run with -n -E 99 right after the last, so that a name
 * not yet released would show up as 99.
 */
START_TEST(exit_status_passthrough)
{
    char noexec[CT_PATH_MAX], tag[32];
    struct {
        const char *args[4];
        int         want;
    } cases[] = {
        { { "-c", "exit 0", NULL }, 0 },
        { { "-c", "exit 7", NULL }, 7 },
        { { "false", NULL }, 1 },
        { { "sh", "-c", "exit 200", NULL }, 200 },
        { { "-c", "kill -TERM $$", NULL }, 143 },
        { { "-c", "kill -KILL $$", NULL }, 137 },
        { { "/nonexistent/command", NULL }, 127 },
        { { noexec, NULL }, 126 },
    };
    const char *argv[12];
    size_t i, j, n;
    int fd, code;
    struct ct_try t;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(noexec, sizeof(noexec), "not-executable");
    fd = open(noexec, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    close(fd);
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        n = 0;
        argv[n++] = "-H";
        argv[n++] = ct_addr();
        argv[n++] = "-n";
        argv[n++] = "-E";
        argv[n++] = "99";
        argv[n++] = "es";
        for (j = 0; cases[i].args[j] != NULL; j++) {
            argv[n++] = cases[i].args[j];
        }
        argv[n] = NULL;
        snprintf(tag, sizeof(tag), "case%zu", i);
        code = ct_run(tag, argv);
        ck_assert_msg(code == cases[i].want, "case %zu (%s) exited %d, expected %d", i,
                      cases[i].args[0], code, cases[i].want);
    }
    ct_assert_out_has("case6", "/nonexistent/command");
    /* Free the moment redlockctl is gone. */
    t.fd = expect_tcp();
    t.name = "es";
    ck_assert_msg(ct_cond_trylock(&t), "the name was still held after redlockctl exited");
    close(t.fd);
}
END_TEST

/*
 * REDLOCK_NAME, REDLOCK_FENCE (only with a fence, increasing, never
 * inherited), the command in a process group of its own, and no shell
 * without -c.
 */
START_TEST(command_environment)
{
    char envf[CT_PATH_MAX], pidf[CT_PATH_MAX], cmd[CT_CMD_MAX], *s, *out;
    long f1, f2, pid, pgid;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(envf, sizeof(envf), "env");
    snprintf(cmd, sizeof(cmd),
             "printf '%%s|%%s\\n' \"$REDLOCK_NAME\" \"${REDLOCK_FENCE-unset}\" >> '%s'", envf);
    setenv("REDLOCK_FENCE", "12345", 1);    /* stale, from an outer redlockctl */
    ck_assert_int_eq(CT_RUN("plain", "-H", ct_addr(), "envname", "-c", cmd), 0);
    ck_assert_int_eq(CT_RUN("fence1", "-H", ct_addr(), "--fence", "envname", "-c", cmd), 0);
    ck_assert_int_eq(CT_RUN("fence2", "-H", ct_addr(), "--fence", "envname", "-c", cmd), 0);
    s = ct_slurp(envf);
    ck_assert_ptr_nonnull(s);
    ck_assert_msg(sscanf(s, "envname|unset\nenvname|%ld\nenvname|%ld\n", &f1, &f2) == 2,
                  "the commands saw: %s", s);
    ck_assert_msg(f1 >= 1 && f2 > f1, "fences %ld then %ld", f1, f2);
    free(s);

    /* Its own process group: the shell reads its pgrp from /proc. */
    ct_path(pidf, sizeof(pidf), "pid");
    snprintf(cmd, sizeof(cmd), "echo $$ $(cut -d' ' -f5 /proc/$$/stat) > '%s'", pidf);
    ck_assert_int_eq(CT_RUN("pgrp", "-H", ct_addr(), "envname", "-c", cmd), 0);
    s = ct_slurp(pidf);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(sscanf(s, "%ld %ld", &pid, &pgid), 2);
    free(s);
    ck_assert_msg(pgid == pid && pgid != (long)getpgrp(),
                  "the command (pid %ld) is in process group %ld (the test's is %ld)", pid, pgid,
                  (long)getpgrp());

    /* COMMAND is exec'd, not given to a shell. */
    ck_assert_int_eq(CT_RUN("noshell", "-H", ct_addr(), "envname", "--", "printf", "%s\\n",
                            "a b", "$HOME", "*", ";"), 0);
    out = ct_out("noshell");
    ck_assert_str_eq(out, "a b\n$HOME\n*\n;\n");
    free(out);
}
END_TEST

/*
 * While the command runs the name is held (TRYLOCK elsewhere is BUSY,
 * status says held); the moment redlockctl exits, it is free.
 */
START_TEST(held_while_running)
{
    char started[CT_PATH_MAX], go[CT_PATH_MAX], cmd[CT_CMD_MAX], tag[16];
    struct ct_try t;
    pid_t pid;
    char *got;
    int a, i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(started, sizeof(started), "started");
    ct_path(go, sizeof(go), "go");
    snprintf(cmd, sizeof(cmd),
             "echo > '%s'; while [ ! -e '%s' ]; do sleep 0.02; done; exit 5", started, go);
    pid = CT_SPAWN("run", "-H", ct_addr(), "hw", "-c", cmd);
    ck_assert_msg(h_wait_until(ct_cond_file, started, FILE_MS), "the command did not start");
    a = expect_tcp();
    got = h_cmd(a, "TRYLOCK hw", CMD_MS);
    ck_assert_msg(got != NULL && h_is_reply(got, "BUSY", "hw"), "TRYLOCK hw: '%s'",
                  got ? got : "(nothing)");
    free(got);
    EXPECT_PREFIX(a, "STATUS hw", "HELD hw ttl=");
    ck_assert_int_eq(CT_RUN("status", "-H", ct_addr(), "status", "hw"), 0);
    ct_assert_out_has("status", "hw: held");
    ck_assert_int_eq(close(open(go, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)), 0);
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 5);
    t.fd = a;
    t.name = "hw";
    ck_assert_msg(ct_cond_trylock(&t), "hw was still held after redlockctl exited");
    EXPECT_REPLY(a, "UNLOCK hw", "OK hw holds=0");
    ck_assert_int_eq(CT_RUN("free", "-H", ct_addr(), "status", "hw"), 1);
    ct_assert_out_has("free", "hw: free");
    /* Back to back: each run finds the name free. */
    for (i = 0; i < 5; i++) {
        snprintf(tag, sizeof(tag), "seq%d", i);
        ck_assert_int_eq(CT_RUN(tag, "-H", ct_addr(), "-n", "-E", "99", "hw", "true"), 0);
    }
    close(a);
}
END_TEST

/* ---- conflicts ---- */

/*
 * -n and -w on a held name: exit 1 or -E, silently unless -v, without
 * running the command; -w waits about as long as asked; a waiter runs
 * its command once the name is released.
 */
START_TEST(conflict_exit_codes)
{
    char marker[CT_PATH_MAX], cmd[CT_CMD_MAX], *out;
    int64_t t0, took;
    pid_t pid;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(marker, sizeof(marker), "marker");
    snprintf(cmd, sizeof(cmd), "touch '%s'", marker);
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK cf", "OK cf ");

    t0 = h_now_ms();
    ck_assert_int_eq(CT_RUN("n", "-H", ct_addr(), "-n", "cf", "-c", cmd), 1);
    took = h_now_ms() - t0;
    ck_assert_msg(took < H_PROMPT_MS, "-n took %lld ms", (long long)took);
    out = ct_out("n");
    ck_assert_msg(out[0] == '\0', "-n printed '%s' (a conflict is silent)", out);
    free(out);
    ck_assert_int_eq(CT_RUN("nE", "-H", ct_addr(), "-n", "-E", "3", "cf", "-c", cmd), 3);
    ck_assert_int_eq(CT_RUN("w0", "-H", ct_addr(), "-w", "0", "cf", "-c", cmd), 1);
    ck_assert_int_eq(CT_RUN("nv", "-H", ct_addr(), "-v", "-n", "cf", "-c", cmd), 1);
    ct_assert_out_has("nv", "'cf' is held by someone else");

    t0 = h_now_ms();
    ck_assert_int_eq(CT_RUN("w", "-H", ct_addr(), "-w", "0.5", "-E", "9", "cf", "-c", cmd), 9);
    took = h_now_ms() - t0;
    ck_assert_msg(took >= 500 && took < 500 + H_PROMPT_MS, "-w 0.5 took %lld ms",
                  (long long)took);
    ck_assert_msg(!ct_exists(marker), "the command ran without the lock");

    /* A waiter gets the name when it is released. */
    pid = CT_SPAWN("waiter", "-H", ct_addr(), "-w", "20", "cf", "-c", cmd);
    ct_wait_stat("waiters", 1, H_PROMPT_MS);
    EXPECT_REPLY(a, "UNLOCK cf", "OK cf holds=0");
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 0);
    ck_assert_msg(ct_exists(marker), "the waiter did not run its command");
    close(a);
}
END_TEST

/*
 * Four redlockctl on one name at once: every one runs, never two at a
 * time (mkdir would fail), one after the other with increasing fences.
 */
START_TEST(serialize)
{
    enum { N = 4, HOLD_MS = 200 };
    char dir[CT_PATH_MAX], fences[CT_PATH_MAX], cmd[CT_CMD_MAX], tag[16], *s, *p;
    long prev = 0, f;
    int64_t t0, took;
    pid_t pids[N];
    int i, code, n = 0;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(dir, sizeof(dir), "inside");
    ct_path(fences, sizeof(fences), "fences");
    snprintf(cmd, sizeof(cmd),
             "mkdir '%s' || exit 99; echo \"$REDLOCK_FENCE\" >> '%s'; sleep 0.%d; rmdir '%s'",
             dir, fences, HOLD_MS / 100, dir);
    t0 = h_now_ms();
    for (i = 0; i < N; i++) {
        snprintf(tag, sizeof(tag), "c%d", i);
        pids[i] = CT_SPAWN(tag, "-H", ct_addr(), "-w", "30", "--fence", "same", "-c", cmd);
    }
    for (i = 0; i < N; i++) {
        code = ct_wait(pids[i], 30000);
        ck_assert_msg(code == 0, "redlockctl %d exited %d (99: two ran at once)", i, code);
    }
    took = h_now_ms() - t0;
    ck_assert_msg(took >= N * HOLD_MS, "%d runs of %d ms took %lld ms", N, HOLD_MS,
                  (long long)took);
    s = ct_slurp(fences);
    ck_assert_ptr_nonnull(s);
    for (p = s; *p != '\0'; n++) {
        f = strtol(p, &p, 10);
        ck_assert_msg(f > prev, "fences not increasing: %s", s);
        prev = f;
        while (*p == '\n') {
            p++;
        }
    }
    ck_assert_msg(n == N, "%d commands ran, expected %d: %s", n, N, s);
    free(s);
}
END_TEST

/* ---- sets (-N) ---- */

/*
 * -N zz -N aa: both names held while the command runs (TRYLOCK elsewhere
 * BUSY for each, status per name says held), REDLOCK_NAME and
 * REDLOCK_FENCE name them in the order given, and both are free the
 * moment redlockctl exits with the command's status.
 */
START_TEST(set_held_while_running)
{
    char started[CT_PATH_MAX], go[CT_PATH_MAX], envf[CT_PATH_MAX], cmd[CT_CMD_MAX];
    char line[64], *got, *s;
    static const char *const names[] = { "zz", "aa" };
    long fz, fa;
    struct ct_try t;
    size_t i;
    pid_t pid;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    a = expect_tcp();
    /* zz's fence moves ahead of aa's, so that the order of REDLOCK_FENCE shows. */
    EXPECT_PREFIX(a, "LOCK zz fence", "OK zz ");
    EXPECT_REPLY(a, "UNLOCK zz", "OK zz holds=0");
    ct_path(started, sizeof(started), "started");
    ct_path(go, sizeof(go), "go");
    ct_path(envf, sizeof(envf), "env");
    snprintf(cmd, sizeof(cmd),
             "printf '%%s|%%s\n' \"$REDLOCK_NAME\" \"$REDLOCK_FENCE\" > '%s'; echo > '%s'; "
             "while [ ! -e '%s' ]; do sleep 0.02; done; exit 5", envf, started, go);
    pid = CT_SPAWN("run", "-H", ct_addr(), "--fence", "-N", "zz", "-N", "aa", "-c", cmd);
    ck_assert_msg(h_wait_until(ct_cond_file, started, FILE_MS), "the command did not start");
    for (i = 0; i < 2; i++) {
        snprintf(line, sizeof(line), "TRYLOCK %s", names[i]);
        got = h_cmd(a, line, CMD_MS);
        ck_assert_msg(got != NULL && h_is_reply(got, "BUSY", names[i]), "%s: '%s'", line,
                      got ? got : "(nothing)");
        free(got);
    }
    ck_assert_int_eq(CT_RUN("status", "-H", ct_addr(), "status", "aa"), 0);
    ct_assert_out_has("status", "aa: held");
    s = ct_slurp(envf);
    ck_assert_ptr_nonnull(s);
    ck_assert_msg(sscanf(s, "zz aa|%ld,%ld\n", &fz, &fa) == 2, "the command saw: %s", s);
    ck_assert_msg(fz > fa && fa >= 1, "fences %ld,%ld are not zz's then aa's", fz, fa);
    free(s);
    ck_assert_int_eq(close(open(go, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)), 0);
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 5);
    t.fd = a;
    for (i = 0; i < 2; i++) {
        t.name = names[i];
        ck_assert_msg(ct_cond_trylock(&t), "%s was still held after redlockctl exited",
                      names[i]);
    }
    close(a);
}
END_TEST

/*
 * One name of the set held elsewhere: -n exits 1 without running the
 * command and leaves the other name free (the set is refused whole); a
 * waiter runs once the name is released.
 */
START_TEST(set_refused_whole)
{
    char marker[CT_PATH_MAX], cmd[CT_CMD_MAX];
    struct ct_try t;
    pid_t pid;
    int a, b;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(marker, sizeof(marker), "marker");
    snprintf(cmd, sizeof(cmd), "touch '%s'", marker);
    a = expect_tcp();
    b = expect_tcp();
    EXPECT_PREFIX(a, "LOCK sb", "OK sb ");
    ck_assert_int_eq(CT_RUN("n", "-H", ct_addr(), "-n", "-N", "sa", "-N", "sb", "-c", cmd), 1);
    ck_assert_int_eq(CT_RUN("nv", "-H", ct_addr(), "-v", "-n", "-N", "sa", "-N", "sb", "-c",
                            cmd), 1);
    ct_assert_out_has("nv", "'sa sb' is held by someone else");
    ck_assert_msg(!ct_exists(marker), "the command ran without the set");
    t.fd = b;
    t.name = "sa";
    ck_assert_msg(ct_cond_trylock(&t), "a refused set left sa held");
    EXPECT_REPLY(b, "UNLOCK sa", "OK sa holds=0");

    pid = CT_SPAWN("waiter", "-H", ct_addr(), "-w", "20", "-N", "sa", "-N", "sb", "-c", cmd);
    ct_wait_stat("waiters", 2, H_PROMPT_MS);      /* one per name of the set */
    EXPECT_REPLY(a, "UNLOCK sb", "OK sb holds=0");
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 0);
    ck_assert_msg(ct_exists(marker), "the waiter did not run its command");
    close(a);
    close(b);
}
END_TEST

/*
 * One name's key deleted on every master behind the daemon's back: the
 * daemon's watchdog pushes one LOST for the set, the command is stopped
 * (75), and the set's other name is freed.
 */
START_TEST(set_lost_stops_command)
{
    char pidf[CT_PATH_MAX], cmd[CT_CMD_MAX];
    struct ct_try t;
    pid_t pid, child;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(pidf, sizeof(pidf), "pid");
    snprintf(cmd, sizeof(cmd), "echo $$ > '%s'; exec sleep 30", pidf);
    pid = CT_SPAWN("run", "-H", ct_addr(), "-t", "600", "-k", "10", "-N", "la", "-N", "lb",
                   "-c", cmd);
    child = ct_wait_pid_file(pidf);
    ct_track_group(child);
    expect_del_everywhere("lb");
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 75);
    ct_assert_out_has("run", "lost the lock 'la lb' while the command ran (reason=");
    ck_assert_msg(!ct_alive(child), "the command still runs");
    a = expect_tcp();
    t.fd = a;
    t.name = "la";
    ck_assert_msg(h_wait_until(ct_cond_trylock, &t, CMD_MS), "la was not freed with the set");
    close(a);
}
END_TEST

/* -N's usage errors: exit 64 with the reason, before any connection. */
START_TEST(set_usage_errors)
{
    static const struct {
        const char *args[10];
        const char *says;
    } cases[] = {
        { { "-N", "a", "-N", "a", "true", NULL }, "-N: lock name 'a' given twice" },
        { { "-N", "bad\001name", "true", NULL }, "-N: bad lock name" },
        { { "-N", "a", "-N", "b", "-s", "true", NULL }, "-s takes one name" },
        { { "-N", "a", "-N", "b", "--limit", "2", "true", NULL }, "--limit takes one name" },
        { { "-N", "a", "-N", "b", NULL }, "no COMMAND to run under 'a b'" },
        { { "-N", "a", "status", "a", NULL }, "-N is not used with 'status'" },
        { { "-N", NULL }, "option -N needs a value" },
    };
    const char *many[2 * 65 + 3];
    char names[65][8], tag[16], out[CT_PATH_MAX];
    size_t i, n = 0;
    pid_t pid;

    EXPECT_SETUP();
    setenv("REDLOCKD_ADDR", "127.0.0.1:1", 1);
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(tag, sizeof(tag), "case%zu", i);
        ck_assert_msg(ct_run(tag, cases[i].args) == 64, "case %zu did not exit 64", i);
        ct_assert_out_has(tag, cases[i].says);
    }
    /* More arguments than ct_spawn() takes: h_spawn() directly. */
    many[n++] = h_redlockctl_bin();
    for (i = 0; i < 65; i++) {
        snprintf(names[i], sizeof(names[i]), "n%zu", i);
        many[n++] = "-N";
        many[n++] = names[i];
    }
    many[n++] = "true";
    many[n] = NULL;
    ct_path(out, sizeof(out), "many.out");
    pid = h_spawn(many, out);
    ck_assert_int_gt(pid, 0);
    ct_kid_add(pid);
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 64);
    ct_assert_out_has("many", "-N: more than 64 names");
}
END_TEST

/* ---- lost locks ---- */

/*
 * The quorum is taken away while the command runs: "! LOST", SIGTERM to
 * the command, which stops; exit 75 well before the grace (10 s).
 */
#define CT_LT_GRACE_MS  10000   /* -k of lost_terminates_command */

START_TEST(lost_terminates_command)
{
    char pidf[CT_PATH_MAX], cmd[CT_CMD_MAX];
    pid_t pid, child;
    int64_t t0, took;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(pidf, sizeof(pidf), "pid");
    snprintf(cmd, sizeof(cmd), "echo $$ > '%s'; exec sleep 30", pidf);
    /* -k: CT_LT_GRACE_MS */
    pid = CT_SPAWN("run", "-H", ct_addr(), "-t", "1500", "-k", "10", "lt", "-c", cmd);
    child = ct_wait_pid_file(pidf);
    ct_track_group(child);
    t0 = h_now_ms();
    ck_assert_int_eq(h_kill_master(0), 0);
    ck_assert_int_eq(h_kill_master(1), 0);
    ck_assert_int_eq(h_kill_master(2), 0);
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 75);
    took = h_now_ms() - t0;
    /* After the LOST, itself after t0: a command killed at the grace's end exits later. */
    ck_assert_msg(took < CT_LT_GRACE_MS, "exit 75 came %lld ms after the quorum went, not "
                  "before the grace (%d ms) ended", (long long)took, CT_LT_GRACE_MS);
    ct_assert_out_has("run", "lost the lock 'lt' while the command ran (reason=");
    ck_assert_msg(!ct_alive(child), "the command still runs");
}
END_TEST

/*
 * A command (and a child of it) that ignore SIGTERM: still running during
 * the grace, SIGKILLed with their whole process group when it ends.
 */
START_TEST(lost_kills_group_after_grace)
{
    char pidf[CT_PATH_MAX], gpidf[CT_PATH_MAX], cmd[CT_CMD_MAX];
    struct ct_text lost = { "run", "lost the lock 'lg'" };
    pid_t pid, child, grandchild;
    int64_t t_lost;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(pidf, sizeof(pidf), "pid");
    ct_path(gpidf, sizeof(gpidf), "gpid");
    snprintf(cmd, sizeof(cmd),
             "trap '' TERM; sleep 30 & echo $! > '%s'; echo $$ > '%s'; wait", gpidf, pidf);
    pid = CT_SPAWN("run", "-H", ct_addr(), "-t", "1500", "-k", "2", "lg", "-c", cmd);
    child = ct_wait_pid_file(pidf);
    ct_track_group(child);
    grandchild = ct_wait_pid_file(gpidf);
    ck_assert_int_eq(h_kill_master(0), 0);
    ck_assert_int_eq(h_kill_master(1), 0);
    ck_assert_int_eq(h_kill_master(2), 0);
    /* The next renewal (every ttl/3, -t 1500) fails within a round's deadline. */
    ck_assert_msg(h_wait_until(ct_cond_out, &lost, 1500 / 3 + H_NODE_TIMEOUT_MS + H_PROMPT_MS),
                  "no 'lost' message");
    t_lost = h_now_ms();
    ck_assert_msg(h_holds_for(ct_cond_alive, &child, 700, 50),
                  "the command died within the grace although it ignores SIGTERM");
    ck_assert_msg(ct_alive(grandchild), "the command's child died within the grace");
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 75);
    ck_assert_msg(h_now_ms() - t_lost >= 1300, "exit 75 only %lld ms after the loss",
                  (long long)(h_now_ms() - t_lost));
    ct_assert_out_has("run", "SIGKILL");
    ck_assert_msg(h_wait_until(ct_cond_dead, &child, H_PROMPT_MS),
                  "the command survived SIGKILL");
    ck_assert_msg(h_wait_until(ct_cond_dead, &grandchild, H_PROMPT_MS),
                  "the command's child survived: the group was not killed");
}
END_TEST

/*
 * The daemon goes away: SIGKILLed (the connection closes without a word)
 * or stopped (LOST reason=shutdown).  Both are a lost lock: exit 75.
 */
START_TEST(daemon_gone)
{
    char pidf[CT_PATH_MAX], cmd[CT_CMD_MAX];
    pid_t pid, child;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(pidf, sizeof(pidf), "pid1");
    snprintf(cmd, sizeof(cmd), "echo $$ > '%s'; exec sleep 30", pidf);
    pid = CT_SPAWN("killed", "-H", ct_addr(), "dg", "-c", cmd);
    child = ct_wait_pid_file(pidf);
    ct_track_group(child);
    ck_assert_int_eq(h_signal_daemon(SIGKILL), 0);
    ck_assert_int_eq(h_wait_daemon(H_PROMPT_MS), 128 + SIGKILL);
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 75);
    ct_assert_out_has("killed", "the connection to redlockd at");
    ck_assert_msg(!ct_alive(child), "the command still runs");

    ck_assert_msg(h_start_daemon(NULL) == 0, "the second redlockd did not start");
    ct_path(pidf, sizeof(pidf), "pid2");
    snprintf(cmd, sizeof(cmd), "echo $$ > '%s'; exec sleep 30", pidf);
    /* (dg itself stays taken until its lease ends: nobody deleted its keys) */
    pid = CT_SPAWN("stopped", "-H", ct_addr(), "dg2", "-c", cmd);
    child = ct_wait_pid_file(pidf);
    ct_track_group(child);
    ck_assert_int_eq(h_stop_daemon(), 0);
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 75);
    ct_assert_out_has("stopped", "reason=shutdown");
    ck_assert_msg(!ct_alive(child), "the command still runs");
}
END_TEST

/* ---- signals ---- */

static const struct {
    int         sig;    /* the signal */
    const char *name;   /* its name for trap */
} ct_sigs[] = {
    { SIGINT, "INT" },
    { SIGTERM, "TERM" },
    { SIGHUP, "HUP" },
};

/*
 * SIGINT, SIGTERM and SIGHUP to redlockctl reach the command, whose
 * status is then redlockctl's; no trap: the command dies of it (128+N).
 */
START_TEST(signals_forwarded)
{
    char pidf[CT_PATH_MAX], trapped[CT_PATH_MAX], cmd[CT_CMD_MAX], tag[16], name[16], *s;
    pid_t pid, child;
    size_t i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    for (i = 0; i < sizeof(ct_sigs) / sizeof(ct_sigs[0]); i++) {
        snprintf(name, sizeof(name), "pid%zu", i);
        ct_path(pidf, sizeof(pidf), name);
        snprintf(name, sizeof(name), "trapped%zu", i);
        ct_path(trapped, sizeof(trapped), name);
        snprintf(cmd, sizeof(cmd),
                 "trap 'echo got-%s > \"%s\"; exit 3' %s; echo $$ > '%s'; "
                 "while :; do sleep 0.02; done", ct_sigs[i].name, trapped, ct_sigs[i].name, pidf);
        snprintf(tag, sizeof(tag), "sig%zu", i);
        pid = CT_SPAWN(tag, "-H", ct_addr(), "sf", "-c", cmd);
        child = ct_wait_pid_file(pidf);
        ct_track_group(child);
        ck_assert_int_eq(kill(pid, ct_sigs[i].sig), 0);
        ck_assert_int_eq(ct_wait(pid, EXIT_MS), 3);
        s = ct_slurp(trapped);
        ck_assert_msg(s != NULL && strncmp(s, "got-", 4) == 0 && strstr(s, ct_sigs[i].name),
                      "the command did not see SIG%s", ct_sigs[i].name);
        free(s);
    }
    ct_path(pidf, sizeof(pidf), "pid-plain");
    snprintf(cmd, sizeof(cmd), "echo $$ > '%s'; exec sleep 30", pidf);
    pid = CT_SPAWN("plain", "-H", ct_addr(), "sf", "-c", cmd);
    child = ct_wait_pid_file(pidf);
    ct_track_group(child);
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 128 + SIGTERM);
    ck_assert_msg(!ct_alive(child), "the command survived");
}
END_TEST

/*
 * While the LOCK is pending, SIGINT, SIGTERM and SIGHUP make redlockctl
 * give up at once (128+N, silently): the daemon's waiter is gone and
 * the command never runs.
 */
START_TEST(signal_while_waiting)
{
    char marker[CT_PATH_MAX], cmd[CT_CMD_MAX], tag[16], *out;
    struct ct_try t;
    int64_t t0;
    pid_t pid;
    size_t i;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(marker, sizeof(marker), "marker");
    snprintf(cmd, sizeof(cmd), "touch '%s'", marker);
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK sw", "OK sw ");
    for (i = 0; i < sizeof(ct_sigs) / sizeof(ct_sigs[0]); i++) {
        snprintf(tag, sizeof(tag), "w%zu", i);
        pid = CT_SPAWN(tag, "-H", ct_addr(), "sw", "-c", cmd);
        ct_wait_stat("waiters", 1, H_PROMPT_MS);
        t0 = h_now_ms();
        ck_assert_int_eq(kill(pid, ct_sigs[i].sig), 0);
        ck_assert_int_eq(ct_wait(pid, H_PROMPT_MS), 128 + ct_sigs[i].sig);
        ck_assert_msg(h_now_ms() - t0 < H_PROMPT_MS, "SIG%s took %lld ms", ct_sigs[i].name,
                      (long long)(h_now_ms() - t0));
        ct_wait_stat("waiters", 0, H_PROMPT_MS);
        out = ct_out(tag);
        ck_assert_msg(out[0] == '\0', "printed '%s'", out);
        free(out);
    }
    ck_assert_msg(!ct_exists(marker), "the command ran without the lock");
    EXPECT_REPLY(a, "UNLOCK sw", "OK sw holds=0");
    t.fd = expect_tcp();
    t.name = "sw";
    ck_assert_msg(ct_cond_trylock(&t), "sw is held by a redlockctl that gave up");
    close(t.fd);
    close(a);
}
END_TEST

/*
 * redlockctl itself SIGKILLed: its connection closes and the lock goes,
 * so the command is killed too (PR_SET_PDEATHSIG) and the name is free.
 */
START_TEST(killed_redlockctl_kills_command)
{
    char pidf[CT_PATH_MAX], cmd[CT_CMD_MAX];
    struct ct_try t;
    pid_t pid, child;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(pidf, sizeof(pidf), "pid");
    snprintf(cmd, sizeof(cmd), "echo $$ > '%s'; exec sleep 30", pidf);
    pid = CT_SPAWN("run", "-H", ct_addr(), "kr", "-c", cmd);
    child = ct_wait_pid_file(pidf);
    ct_track_group(child);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 128 + SIGKILL);
    ck_assert_msg(h_wait_until(ct_cond_dead, &child, H_PROMPT_MS),
                  "the command outlived redlockctl");
    t.fd = expect_tcp();
    t.name = "kr";
    ck_assert_msg(h_wait_until(ct_cond_trylock, &t, H_PROMPT_MS), "kr stayed held");
    close(t.fd);
}
END_TEST

/* ---- subcommands, environment, AUTH ---- */

/* ping, stats and status print readable answers. */
START_TEST(subcommands)
{
    char port[32], *out;
    long long steps0, steps1;
    size_t i;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ck_assert_int_eq(CT_RUN("ping", "-H", ct_addr(), "ping"), 0);
    out = ct_out("ping");
    ck_assert_msg(strncmp(out, "PONG from redlockd ", 19) == 0 && strstr(out, ct_addr()) != NULL
                  && ct_lines(out) == 1, "ping printed '%s'", out);
    free(out);
    ck_assert_int_eq(CT_RUN("stats", "-H", ct_addr(), "stats"), 0);
    ct_assert_out_has("stats", "masters_up");
    ct_assert_out_has("stats", "masters:");
    ct_assert_out_has("stats", "addr");
    for (i = 0; i < NMASTERS; i++) {
        snprintf(port, sizeof(port), "127.0.0.1:%d", h_master_port(i));
        ct_assert_out_has("stats", port);
    }
    ck_assert_int_eq(CT_RUN("free", "-H", ct_addr(), "status", "sub"), 1);
    ct_assert_out_has("free", "sub: free");
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK sub", "OK sub ");
    /* Names sharing its prefix: status reads none of them (no LIST). */
    EXPECT_PREFIX(a, "LOCK sub-1", "OK sub-1 ");
    ck_assert_int_eq(h_stat(a, "list_steps", &steps0), 0);
    ck_assert_int_eq(CT_RUN("held", "-H", ct_addr(), "status", "sub"), 0);
    ck_assert_int_eq(h_stat(a, "list_steps", &steps1), 0);
    ck_assert_msg(steps1 == steps0, "status sub made %lld LIST steps", steps1 - steps0);
    ct_assert_out_has("held", "sub: held by ");        /* the label the daemon gave */
    ct_assert_out_has("held", ":127.0.0.1:");
    /* A session's lease is renewed by the daemon, not by its holder. */
    ct_assert_out_has("held", ", renewed by this redlockd while its holder's connection is "
                      "open (lease ends in ");
    ck_assert_msg(!ct_out_has("held", "unless"), "a session lock said 'unless'");
    /* A lease-mode lock: nothing renews it but its holder's EXTEND. */
    EXPECT_PREFIX(a, "LOCK subl mode=lease ttl=30000", "OK subl token=");
    ck_assert_int_eq(CT_RUN("lease", "-H", ct_addr(), "status", "subl"), 0);
    ct_assert_out_has("lease", ", lease ends in ");
    ct_assert_out_has("lease", " unless renewed");
    ck_assert_msg(!ct_out_has("lease", "renewed by this redlockd"),
                  "a lease-mode lock said the daemon renews it");
    /* A name spelled like a subcommand, after --. */
    ck_assert_int_eq(CT_RUN("lockping", "-H", ct_addr(), "--", "ping", "-c", "exit 4"), 4);
    close(a);
}
END_TEST

/*
 * check NAME --fence F [--permit I] | --token T: 0 and "current" while
 * the grant holds, 1 and "stale (...)" once it does not; a counted name
 * without --permit is refused (64).
 */
START_TEST(check_subcommand)
{
    char *got, tok[33], fence[24];
    long long f;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    a = expect_tcp();
    got = EXPECT_CMD(a, "LOCK ck mode=lease ttl=30000 fence");
    ck_assert_msg(h_reply_int(got, "fence", &f) && strstr(got, " token=") != NULL, "'%s'", got);
    memcpy(tok, strstr(got, " token=") + 7, 32);
    tok[32] = '\0';
    free(got);
    snprintf(fence, sizeof(fence), "%lld", f);
    ck_assert_int_eq(CT_RUN("cur", "-H", ct_addr(), "check", "ck", "--fence", fence), 0);
    ct_assert_out_has("cur", "ck: current (on a quorum of the masters for ");
    ck_assert_int_eq(CT_RUN("tok", "-H", ct_addr(), "check", "ck", "--token", tok), 0);
    ct_assert_out_has("tok", "ck: current");
    snprintf(fence, sizeof(fence), "%lld", f + 1);
    ck_assert_int_eq(CT_RUN("other", "-H", ct_addr(), "check", "ck", "--fence", fence), 1);
    ct_assert_out_has("other", "ck: stale (another grant holds it)");
    ck_assert_int_eq(CT_RUN("free", "-H", ct_addr(), "check", "nobody", "--token", tok), 1);
    ct_assert_out_has("free", "nobody: stale (nobody holds it)");
    got = EXPECT_CMD(a, "LOCK sem limit=2 fence");
    ck_assert_msg(h_reply_int(got, "permit", &f) && f >= 0 && f < 2, "'%s'", got);
    free(got);
    snprintf(fence, sizeof(fence), "%lld", f);
    ck_assert_int_eq(CT_RUN("kind", "-H", ct_addr(), "check", "sem", "--fence", "1"), 64);
    ct_assert_out_has("kind", "needs permit=I");
    ck_assert_int_eq(CT_RUN("permit", "-H", ct_addr(), "check", "sem", "--fence", "1",
                            "--permit", fence), 0);
    close(a);
}
END_TEST

/*
 * Run redlockctl -n -v <names...> true (tag) until the daemon refuses it
 * by a lock-delay (deadline 5 s): a grant (exit 0) fails the test, a
 * refusal by a holder (its hold not yet ended) is tried again.
 */
static void
ct_until_delayed(const char *tag, const char *n1, const char *n2)
{
    int64_t deadline = h_now_ms() + 5000;
    int code;

    for (;;) {
        if (n2 == NULL) {
            code = CT_RUN(tag, "-H", ct_addr(), "-n", "-v", n1, "true");
        } else {
            code = CT_RUN(tag, "-H", ct_addr(), "-n", "-v", "-N", n1, "-N", n2, "true");
        }
        ck_assert_msg(code == 1, "%s: -n exited %d (0: granted, the delay did not keep it)",
                      tag, code);
        if (ct_out_has(tag, "is kept by a lock-delay for ")) {
            return;
        }
        ck_assert_msg(h_now_ms() < deadline, "%s: never refused by a delay", tag);
        usleep(20000);
    }
}

/*
 * --delay MS: a redlockctl killed while it holds a name (its command
 * kills it), or a set (-N), leaves each name kept for the delay: -n is
 * refused saying so (exit 1), status says free and kept, -w waits the
 * delay out; --delay with -s or --limit, with a subcommand, or with a
 * bad value is a usage error (64).
 */
START_TEST(delay_option)
{
    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ck_assert_int_eq(CT_RUN("dbad", "-H", ct_addr(), "--delay", "x", "dl", "true"), 64);
    ck_assert_int_eq(CT_RUN("dneg", "-H", ct_addr(), "--delay", "-1", "dl", "true"), 64);
    ck_assert_int_eq(CT_RUN("dshared", "-H", ct_addr(), "-s", "--delay", "5", "dl", "true"), 64);
    ct_assert_out_has("dshared", "--delay is for an exclusive lock (not with -s)");
    ck_assert_int_eq(CT_RUN("dlimit", "-H", ct_addr(), "--limit", "2", "--delay", "5", "dl",
                            "true"), 64);
    ck_assert_int_eq(CT_RUN("dstatus", "-H", ct_addr(), "--delay", "5", "status", "dl"), 64);
    ck_assert_int_eq(CT_RUN("dnone", "-H", ct_addr(), "--delay"), 64);
    ct_assert_out_has("dnone", "option --delay needs a value");

    (void)CT_RUN("dkill", "-H", ct_addr(), "--delay", "2000", "dl", "--", "sh", "-c",
                 "kill -9 $PPID");
    ct_until_delayed("dtry", "dl", NULL);
    ck_assert_int_eq(CT_RUN("dstat", "-H", ct_addr(), "status", "dl"), 1);
    ct_assert_out_has("dstat", "dl: free, kept by a lock-delay for ");
    ck_assert_int_eq(CT_RUN("dwait", "-H", ct_addr(), "-w", "10", "dl", "true"), 0);

    (void)CT_RUN("dskill", "-H", ct_addr(), "--delay", "2000", "-N", "ds1", "-N", "ds2", "--",
                 "sh", "-c", "kill -9 $PPID");
    ct_until_delayed("dstry", "ds2", NULL);
    ct_until_delayed("dsboth", "ds1", "ds2");
    ck_assert_int_eq(CT_RUN("dswait", "-H", ct_addr(), "-w", "10", "-N", "ds1", "-N", "ds2",
                            "true"), 0);
    /* Released by its UNLOCK, a hold with a delay leaves none. */
    ck_assert_int_eq(CT_RUN("dunlock", "-H", ct_addr(), "--delay", "2000", "dl", "true"), 0);
    ck_assert_int_eq(CT_RUN("dnodelay", "-H", ct_addr(), "-n", "dl", "true"), 0);
}
END_TEST

/* $REDLOCKD_ADDR and $REDLOCKD_SOCKET, in that order after -S/-H. */
START_TEST(environment_defaults)
{
    char m[CT_PATH_MAX], cmd[CT_CMD_MAX], *s;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_path(m, sizeof(m), "m");
    snprintf(cmd, sizeof(cmd), "echo x >> '%s'", m);
    setenv("REDLOCKD_ADDR", ct_addr(), 1);
    ck_assert_int_eq(CT_RUN("addr", "ed", "-c", cmd), 0);
    setenv("REDLOCKD_SOCKET", h_daemon_unix_path(), 1);
    setenv("REDLOCKD_ADDR", "127.0.0.1:1", 1);
    ck_assert_int_eq(CT_RUN("socket", "ed", "-c", cmd), 0);
    setenv("REDLOCKD_SOCKET", "/nonexistent.sock", 1);
    ck_assert_int_eq(CT_RUN("cmdline", "-H", ct_addr(), "ed", "-c", cmd), 0);
    unsetenv("REDLOCKD_SOCKET");
    unsetenv("REDLOCKD_ADDR");
    ck_assert_int_eq(CT_RUN("S", "-S", h_daemon_unix_path(), "ed", "-c", cmd), 0);
    ck_assert_int_eq(CT_RUN("bad", "-S", "/nonexistent.sock", "ed", "-c", cmd), 69);
    s = ct_slurp(m);
    ck_assert_msg(s != NULL && ct_lines(s) == 4, "4 runs expected in %s: '%s'", m, s ? s : "");
    free(s);
}
END_TEST

/* AUTH: needed and missing, or wrong: 77; right: the command runs. */
START_TEST(auth_password)
{
    struct h_daemon_opts o = { .auth_password = "s3cret" };
    char marker[CT_PATH_MAX], cmd[CT_CMD_MAX];

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    ct_path(marker, sizeof(marker), "marker");
    snprintf(cmd, sizeof(cmd), "touch '%s'", marker);
    ck_assert_int_eq(CT_RUN("none", "-H", ct_addr(), "au", "-c", cmd), 77);
    ct_assert_out_has("none", "REDLOCKD_PASSWORD");
    setenv("REDLOCKD_PASSWORD", "wrong", 1);
    ck_assert_int_eq(CT_RUN("wrong", "-H", ct_addr(), "au", "-c", cmd), 77);
    ct_assert_out_has("wrong", "wrong password");
    ck_assert_int_eq(CT_RUN("ping-wrong", "-H", ct_addr(), "ping"), 77);
    ck_assert_msg(!ct_exists(marker), "the command ran without the lock");
    setenv("REDLOCKD_PASSWORD", "s3cret", 1);
    ck_assert_int_eq(CT_RUN("right", "-H", ct_addr(), "au", "-c", cmd), 0);
    ck_assert_msg(ct_exists(marker), "the command did not run");
    /* The command does not inherit the passwords: it gets no secret it did not ask for. */
    setenv("REDLOCKD_ADMIN_PASSWORD", "adm1n", 1);
    ck_assert_int_eq(CT_RUN("secrets", "-H", ct_addr(), "au", "-c",
                            "echo \"pw=[$REDLOCKD_PASSWORD] admin=[$REDLOCKD_ADMIN_PASSWORD]\""), 0);
    ct_assert_out_has("secrets", "pw=[] admin=[]");
    unsetenv("REDLOCKD_ADMIN_PASSWORD");
    ck_assert_int_eq(CT_RUN("ping", "-H", ct_addr(), "ping"), 0);
    /* The Unix socket is exempt (auth.unix_exempt): no password needed. */
    unsetenv("REDLOCKD_PASSWORD");
    ck_assert_int_eq(CT_RUN("unix", "-S", h_daemon_unix_path(), "au", "-c", "exit 6"), 6);
}
END_TEST

/*
 * The passwords are gone from redlockctl's own /proc/<pid>/environ (the
 * block the kernel wrote at exec, which unsetenv() alone leaves) while
 * COMMAND runs, and from COMMAND's; redlockctl still authenticated with
 * them.  The command, a child of redlockctl of the same user, looks
 * (as root it can still read it; another user cannot: redlockctl holding a
 * password is not dumpable).
 */
START_TEST(passwords_scrubbed_from_environ)
{
    struct h_daemon_opts o = { .auth_password = "Zq7pw-scrub-9f2c", .admin_password = "Zq7adm-31e" };
    char *out;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    setenv("REDLOCKD_PASSWORD", "Zq7pw-scrub-9f2c", 1);
    setenv("REDLOCKD_ADMIN_PASSWORD", "Zq7adm-31e", 1);
    ck_assert_int_eq(CT_RUN("scrub", "-H", ct_addr(), "scrub", "-c",
                            "e=/proc/$PPID/environ; "
                            "printf 'parent=%s/%s self=%s\\n' "
                            "\"$(grep -a -c Zq7pw $e 2>/dev/null || true)\" "
                            "\"$(grep -a -c Zq7adm $e 2>/dev/null || true)\" "
                            "\"$(grep -a -c Zq7 /proc/$$/environ)\""), 0);
    unsetenv("REDLOCKD_ADMIN_PASSWORD");
    unsetenv("REDLOCKD_PASSWORD");
    /* 0, or nothing when redlockctl's environ is not readable at all (not dumpable). */
    out = ct_out("scrub");
    ck_assert_msg(strstr(out, "parent=0/0 self=0") != NULL
                  || strstr(out, "parent=/ self=0") != NULL,
                  "a password was found in redlockctl's or COMMAND's environ: '%s'", out);
    free(out);
}
END_TEST

/* ---- a scripted stand-in for redlockd ---- */

/* Listen on 127.0.0.1 (a free port, into *port), playing the daemon. */
static int
ct_fake_listen(int *port)
{
    int fd = h_tcp_listen(htonl(INADDR_LOOPBACK), 8, port);

    ck_assert_msg(fd >= 0, "cannot listen on 127.0.0.1: %s", strerror(errno));
    return fd;
}

/* Accept redlockctl's connection within FILE_MS. */
static int
ct_fake_accept(int lfd)
{
    struct pollfd pfd = { .fd = lfd, .events = POLLIN };
    int fd;

    ck_assert_msg(poll(&pfd, 1, FILE_MS) == 1, "redlockctl did not connect");
    fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    return fd;
}

/* Read the next request on fd and require it to be exactly want. */
#define EXPECT_LINE(fd, want) do {                                              \
        char *got_ = h_read_line((fd), CMD_MS);                                 \
        ck_assert_msg(got_ != NULL && strcmp(got_, (want)) == 0,               \
                      "redlockctl sent '%s', expected '%s'",                    \
                      got_ != NULL ? got_ : "(nothing)", (want));               \
        free(got_);                                                             \
    } while (0)

/*
 * The label redlockctl pid sends for command (a path or "sh") when no
 * --label is given: <host>:<pid>:<basename>, cut to 64 bytes, bytes
 * outside 0x21..0x7E as '_' (the contract in redlockctl(1)).
 */
static void
ct_default_label(pid_t pid, const char *command, char *out, size_t size)
{
    char host[256] = "", full[512];
    const char *base = strrchr(command, '/');
    size_t i;

    ck_assert_int_eq(gethostname(host, sizeof(host) - 1), 0);
    snprintf(full, sizeof(full), "%s:%ld:%s", host, (long)pid,
             base != NULL ? base + 1 : command);
    snprintf(out, size, "%.64s", full);
    for (i = 0; out[i] != '\0'; i++) {
        if ((unsigned char)out[i] < 0x21 || (unsigned char)out[i] > 0x7e) {
            out[i] = '_';
        }
    }
}

/* "<prefix> label=<default label of pid and command>" into out: a request to expect. */
static const char *
ct_labelled(const char *prefix, pid_t pid, const char *command, char *out, size_t size)
{
    char label[128];

    ct_default_label(pid, command, label, sizeof(label));
    snprintf(out, size, "%s label=%s", prefix, label);
    return out;
}

/*
 * Accept redlockctl pid's connection on lfd and require its requests to
 * be want[0], want[1]... (NULL-terminated; each but the last answered
 * "OK"); then close it, and redlockctl must exit 69.
 */
static void
ct_fake_expect(int lfd, pid_t pid, const char *const *want)
{
    int fd = ct_fake_accept(lfd);

    for (; *want != NULL; want++) {
        EXPECT_LINE(fd, *want);
        if (want[1] != NULL) {
            ck_assert_int_eq(h_send(fd, "OK"), 0);
        }
    }
    close(fd);
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 69);
}

#define CT_FAKE_EXPECT(lfd, pid, ...) \
    ct_fake_expect((lfd), (pid), (const char *const[]){ __VA_ARGS__, NULL })

/*
 * What redlockctl says and how it takes the answers, against a scripted
 * stand-in: AUTH first, the LOCK line with its options, pushed lines
 * skipped, the fence passed on, UNLOCK and its answer awaited before
 * exiting; TRYLOCK for -n; an unexpected answer, ERR LIMIT on accept and a
 * connection closed while the LOCK is pending are 69.
 */
START_TEST(protocol_conversation)
{
    char addr[64], want[512], *out;
    struct ct_proc p;
    int lfd, fd, port;
    pid_t pid;

    EXPECT_SETUP();
    lfd = ct_fake_listen(&port);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);

    setenv("REDLOCKD_PASSWORD", "pw", 1);
    pid = CT_SPAWN("lock", "-H", addr, "-t", "1234", "-w", "2.5", "--fence", "conv", "-c",
                   "echo \"fence=$REDLOCK_FENCE\"; exit 3");
    fd = ct_fake_accept(lfd);
    EXPECT_LINE(fd, "AUTH pw");
    ck_assert_int_eq(h_send(fd, "OK"), 0);
    EXPECT_LINE(fd, ct_labelled("LOCK conv ttl=1234 wait=2500 fence", pid, "sh", want,
                                sizeof(want)));
    ck_assert_int_eq(h_send(fd, "! LOST other reason=renew"), 0);
    ck_assert_int_eq(h_send(fd, "OK conv validity=1000 holds=1 fence=77"), 0);
    EXPECT_LINE(fd, "UNLOCK conv");
    p.pid = pid;
    ck_assert_msg(!h_wait_until(ct_cond_exited, &p, 300),
                  "redlockctl exited (%d) before UNLOCK was answered", p.code);
    ck_assert_int_eq(h_send(fd, "OK conv holds=0"), 0);
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 3);
    out = ct_out("lock");
    ck_assert_str_eq(out, "fence=77\n");
    free(out);
    close(fd);
    unsetenv("REDLOCKD_PASSWORD");

    pid = CT_SPAWN("try", "-H", addr, "-n", "conv", "true");
    fd = ct_fake_accept(lfd);
    EXPECT_LINE(fd, ct_labelled("TRYLOCK conv", pid, "true", want, sizeof(want)));
    ck_assert_int_eq(h_send(fd, "HUH conv"), 0);
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 69);
    ct_assert_out_has("try", "unexpected answer");
    close(fd);

    pid = CT_SPAWN("limit", "-H", addr, "ping");
    fd = ct_fake_accept(lfd);
    ck_assert_int_eq(h_send(fd, "ERR LIMIT too many clients"), 0);
    close(fd);
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 69);
    ct_assert_out_has("limit", "LIMIT too many clients");

    pid = CT_SPAWN("closed", "-H", addr, "conv", "true");
    fd = ct_fake_accept(lfd);
    EXPECT_LINE(fd, ct_labelled("LOCK conv", pid, "true", want, sizeof(want)));
    close(fd);
    ck_assert_int_eq(ct_wait(pid, EXIT_MS), 69);
    ct_assert_out_has("closed", "closed the connection");
    close(lfd);
}
END_TEST

/*
 * What redlockctl sends for --label, the default label and the new
 * subcommands, against the stand-in (which answers only what it must to
 * see the next request, then closes: redlockctl exits 69).
 */
START_TEST(labels_and_requests_sent)
{
    char addr[64], label64[65], longcmd[128], want[256];
    int lfd, port;
    pid_t pid;

    EXPECT_SETUP();
    lfd = ct_fake_listen(&port);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);

    /* --label as given; 64 bytes is the longest. */
    pid = CT_SPAWN("label", "-H", addr, "--label", "web-7:deploy", "lb", "true");
    CT_FAKE_EXPECT(lfd, pid, "LOCK lb label=web-7:deploy");
    memset(label64, 'L', 64);
    label64[64] = '\0';
    pid = CT_SPAWN("label64", "-H", addr, "-n", "-s", "--label", label64, "lb", "true");
    snprintf(want, sizeof(want), "TRYLOCK lb shared label=%s", label64);
    CT_FAKE_EXPECT(lfd, pid, want);

    /* The default: host, redlockctl's pid, the command's base name. */
    pid = CT_SPAWN("path", "-H", addr, "--limit", "3", "lb", "/bin/true");
    CT_FAKE_EXPECT(lfd, pid, ct_labelled("LOCK lb limit=3", pid, "true", want, sizeof(want)));
    pid = CT_SPAWN("shell", "-H", addr, "-w", "1", "lb", "-c", "exit 0");
    CT_FAKE_EXPECT(lfd, pid, ct_labelled("LOCK lb wait=1000", pid, "sh", want, sizeof(want)));
    /* Cut to 64 bytes; a space and bytes above 0x7E become '_'. */
    snprintf(longcmd, sizeof(longcmd), "/nowhere/%0100d", 7);
    pid = CT_SPAWN("long", "-H", addr, "lb", longcmd);
    CT_FAKE_EXPECT(lfd, pid, ct_labelled("LOCK lb", pid, longcmd, want, sizeof(want)));
    ck_assert_uint_eq(strlen(want), strlen("LOCK lb label=") + 64);
    pid = CT_SPAWN("odd", "-H", addr, "lb", "./my job\xc3\xa9");
    CT_FAKE_EXPECT(lfd, pid, ct_labelled("LOCK lb", pid, "my_job__", want, sizeof(want)));

    /* list, watch, break. */
    pid = CT_SPAWN("list", "-H", addr, "list");
    CT_FAKE_EXPECT(lfd, pid, "LIST");
    pid = CT_SPAWN("listp", "-H", addr, "list", "job-");
    CT_FAKE_EXPECT(lfd, pid, "LIST job-");
    pid = CT_SPAWN("watch", "-H", addr, "watch", "wn");
    CT_FAKE_EXPECT(lfd, pid, "WATCH wn");
    setenv("REDLOCKD_PASSWORD", "pw", 1);
    setenv("REDLOCKD_ADMIN_PASSWORD", "adminpw", 1);
    pid = CT_SPAWN("break", "-H", addr, "break", "bn");
    CT_FAKE_EXPECT(lfd, pid, "AUTH adminpw", "BREAK bn");
    /* Without an admin password, the ordinary one; lock commands never send the admin's. */
    pid = CT_SPAWN("lockpw", "-H", addr, "lb", "true");
    CT_FAKE_EXPECT(lfd, pid, "AUTH pw");
    unsetenv("REDLOCKD_ADMIN_PASSWORD");
    pid = CT_SPAWN("breakpw", "-H", addr, "break", "bn");
    CT_FAKE_EXPECT(lfd, pid, "AUTH pw", "BREAK bn");
    unsetenv("REDLOCKD_PASSWORD");
    close(lfd);
}
END_TEST

/* ---- who holds what, through the real daemon ---- */

/*
 * Start redlockctl <tag> holding name with --fence (and --label label
 * unless NULL) around "sleep 30": its pid in *ctl; returns the command's.
 */
static pid_t
ct_hold(const char *tag, const char *name, const char *label, pid_t *ctl)
{
    char pidf[CT_PATH_MAX], cmd[CT_CMD_MAX], file[64];
    pid_t child;

    snprintf(file, sizeof(file), "%s.pid", tag);
    ct_path(pidf, sizeof(pidf), file);
    snprintf(cmd, sizeof(cmd), "echo $$ > '%s'; exec sleep 30", pidf);
    if (label != NULL) {
        *ctl = CT_SPAWN(tag, "-H", ct_addr(), "--fence", "--label", label, name, "-c", cmd);
    } else {
        *ctl = CT_SPAWN(tag, "-H", ct_addr(), "--fence", name, "-c", cmd);
    }
    child = ct_wait_pid_file(pidf);
    ct_track_group(child);
    return child;
}

/* A number of lines that redlockctl <tag> should have printed, to wait for. */
struct ct_nlines {
    const char *tag;    /* which redlockctl */
    size_t      n;      /* how many lines, at least */
};

static bool
ct_cond_nlines(void *arg)
{
    struct ct_nlines *w = arg;
    char *out = ct_out(w->tag);
    bool enough = ct_lines(out) >= w->n;

    free(out);
    return enough;
}

/* The line of out that starts with start, copied into line; false when none. */
static bool
ct_out_line(const char *out, const char *start, char *line, size_t size)
{
    const char *p = out, *end;

    for (; *p != '\0'; p = *end == '\n' ? end + 1 : end) {
        end = p + strcspn(p, "\n");
        if (strncmp(p, start, strlen(start)) == 0) {
            snprintf(line, size, "%.*s", (int)(end - p), p);
            return true;
        }
    }
    return false;
}

/*
 * list: a HELD line per hold of this daemon with its label (--label, or
 * the default), a WAIT line per waiter, in name order, no END; a prefix
 * keeps only its names.
 */
START_TEST(list_holds)
{
    char line[512], label[128], *out;
    pid_t ctl_a, ctl_b, waiter;
    long long v;
    int a;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ct_hold("a", "ls-a", "alpha-job", &ctl_a);
    ct_hold("b", "ls-b", NULL, &ctl_b);
    waiter = CT_SPAWN("w", "-H", ct_addr(), "--label", "queued", "ls-a", "true");
    ct_wait_stat("waiters", 1, H_PROMPT_MS);
    a = expect_tcp();
    EXPECT_PREFIX(a, "LOCK other label=by-hand", "OK other ");

    ck_assert_int_eq(CT_RUN("list", "-H", ct_addr(), "list"), 0);
    out = ct_out("list");
    ck_assert_msg(ct_lines(out) == 4 && strstr(out, "END") == NULL, "list printed '%s'", out);
    ck_assert_msg(ct_out_line(out, "HELD ls-a ", line, sizeof(line)), "no ls-a in '%s'", out);
    ck_assert_msg(strstr(line, " label=alpha-job ") != NULL && strstr(line, " mode=session ")
                  && strstr(line, " kind=exclusive") && strstr(line, " waiters=1")
                  && h_reply_int(line, "held_ms", &v) && h_reply_int(line, "fence", &v),
                  "'%s'", line);
    ck_assert_msg(ct_out_line(out, "HELD ls-b ", line, sizeof(line)), "no ls-b in '%s'", out);
    ct_default_label(ctl_b, "sh", label, sizeof(label));
    ck_assert_msg(h_reply_field(line, "label", line, sizeof(line)) && strcmp(line, label) == 0,
                  "ls-b's label is '%s', expected '%s'", line, label);
    ck_assert_msg(ct_out_line(out, "WAIT ls-a ", line, sizeof(line)), "no waiter in '%s'", out);
    ck_assert_msg(strstr(line, " label=queued ") && strstr(line, " position=1")
                  && strstr(line, " kind=exclusive"), "'%s'", line);
    ck_assert_msg(ct_out_line(out, "HELD other label=by-hand ", line, sizeof(line)),
                  "no other in '%s'", out);
    ck_assert_msg(strstr(out, "ls-b") < strstr(out, "other"), "not in name order: '%s'", out);
    free(out);

    ck_assert_int_eq(CT_RUN("prefix", "-H", ct_addr(), "list", "ls-"), 0);
    out = ct_out("prefix");
    ck_assert_msg(ct_lines(out) == 3 && strstr(out, "other") == NULL, "printed '%s'", out);
    free(out);
    ck_assert_int_eq(CT_RUN("none", "-H", ct_addr(), "list", "zz"), 0);
    out = ct_out("none");
    ck_assert_str_eq(out, "redlockctl: nothing under 'zz' is held or waited for through this "
                     "redlockd\n");
    free(out);

    ck_assert_int_eq(kill(ctl_a, SIGTERM), 0);
    ck_assert_int_eq(ct_wait(waiter, EXIT_MS), 0);
    close(a);
}
END_TEST

/*
 * watch: the current state, then a line a change, through either
 * daemon, each printed at once; SIGTERM and SIGINT end it with 0, the
 * daemon going away with 69.
 */
START_TEST(watch_changes)
{
    struct ct_text t = { "watch", NULL };
    struct ct_nlines five = { "watch", 5 };
    char line[512], *out;
    pid_t w, ctl, child;
    int b;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    ck_assert_msg(h_start_daemon(NULL) == 0, "the second daemon did not start");
    h_use_daemon(0);
    w = CT_SPAWN("watch", "-H", ct_addr(), "watch", "wn");
    t.text = "FREE wn\n";
    ck_assert_msg(h_wait_until(ct_cond_out, &t, FILE_MS), "no FREE wn first");

    child = ct_hold("holder", "wn", "first", &ctl);
    t.text = "HELD wn label=first";
    ck_assert_msg(h_wait_until(ct_cond_out, &t, FILE_MS), "the grant was not shown");
    out = ct_out("watch");
    ck_assert_msg(ct_out_line(out, "HELD wn ", line, sizeof(line))
                  && strstr(line, " kind=exclusive") && strstr(line, " holders=1")
                  && strstr(line, " fence=") && strstr(line, " held_ms="), "'%s'", out);
    free(out);
    ck_assert_int_eq(kill(child, SIGTERM), 0);
    ck_assert_int_eq(ct_wait(ctl, EXIT_MS), 128 + SIGTERM);
    t.text = "\nFREE wn\n";    /* a FREE after the HELD */
    ck_assert_msg(h_wait_until(ct_cond_out, &t, FILE_MS), "the release was not shown");
    out = ct_out("watch");
    ck_assert_msg(ct_lines(out) == 3 && strncmp(out, "FREE wn\n", 8) == 0
                  && strcmp(out + strlen(out) - 8, "FREE wn\n") == 0, "watch printed '%s'", out);
    free(out);

    /* A change through the other daemon. */
    h_use_daemon(1);
    b = expect_tcp();
    EXPECT_PREFIX(b, "LOCK wn label=elsewhere", "OK wn ");
    t.text = "HELD wn label=elsewhere";
    ck_assert_msg(h_wait_until(ct_cond_out, &t, FILE_MS), "a grant through daemon 1 not shown");
    EXPECT_REPLY(b, "UNLOCK wn", "OK wn holds=0");
    close(b);
    ck_assert_msg(h_wait_until(ct_cond_nlines, &five, FILE_MS), "a release through daemon 1 "
                  "not shown");
    h_use_daemon(0);
    ck_assert_int_eq(kill(w, SIGTERM), 0);
    ck_assert_int_eq(ct_wait(w, EXIT_MS), 0);
    out = ct_out("watch");
    ck_assert_msg(ct_lines(out) == 5, "watch printed '%s'", out);
    free(out);

    w = CT_SPAWN("int", "-H", ct_addr(), "watch", "wn");
    t.tag = "int";
    t.text = "FREE wn\n";
    ck_assert_msg(h_wait_until(ct_cond_out, &t, FILE_MS), "no FREE wn first");
    ck_assert_int_eq(kill(w, SIGINT), 0);
    ck_assert_int_eq(ct_wait(w, EXIT_MS), 0);

    w = CT_SPAWN("gone", "-H", ct_addr(), "watch", "wn");
    t.tag = "gone";
    ck_assert_msg(h_wait_until(ct_cond_out, &t, FILE_MS), "no FREE wn first");
    h_stop_daemon();
    ck_assert_int_eq(ct_wait(w, EXIT_MS), 69);
    ct_assert_out_has("gone", "connection to redlockd");
}
END_TEST

/*
 * break: refused to a session that is not admin (77); done by root over
 * the Unix socket: "broken NAME: holders=1 fence=F", the holder's
 * redlockctl reads ! LOST reason=broken (75), the name is free.  A name
 * nobody held: "NAME: was not held; its fence is now F", exit 1.
 */
START_TEST(break_holder)
{
    char line[512], *out;
    struct ct_try t;
    pid_t ctl, child;
    long long n;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    child = ct_hold("holder", "bk", "victim", &ctl);
    ck_assert_int_eq(CT_RUN("tcp", "-H", ct_addr(), "break", "bk"), 77);
    ct_assert_out_has("tcp", "refused BREAK bk");
    ck_assert_msg(ct_alive(child), "a refused break stopped the holder");
    if (geteuid() != 0) {
        fprintf(stderr, "check_redlockctl: break_holder: the admin part skipped: not root\n");
        return;
    }
    ck_assert_int_eq(CT_RUN("unix", "-S", h_daemon_unix_path(), "break", "bk"), 0);
    out = ct_out("unix");
    ck_assert_msg(ct_lines(out) == 1 && strncmp(out, "broken bk: ", 11) == 0, "printed '%s'", out);
    snprintf(line, sizeof(line), "OK bk %s", out + 11);
    line[strcspn(line, "\n")] = '\0';
    ck_assert_msg(h_reply_int(line, "holders", &n) && n == 1, "'%s'", out);
    ck_assert_msg(h_reply_int(line, "fence", &n) && n >= 1, "'%s'", out);
    free(out);
    ck_assert_int_eq(ct_wait(ctl, EXIT_MS), 75);
    ct_assert_out_has("holder", "reason=broken");
    ck_assert_msg(h_wait_until(ct_cond_dead, &child, H_PROMPT_MS),
                  "the command outlived its lock");
    t.fd = expect_tcp();
    t.name = "bk";
    ck_assert_msg(ct_cond_trylock(&t), "bk is still held after the break");
    close(t.fd);
    /* A name nobody held: said so, and exit 1 (as status says of a free name). */
    ck_assert_int_eq(CT_RUN("free", "-S", h_daemon_unix_path(), "break", "bk-free"), 1);
    ct_assert_out_has("free", "bk-free: was not held; its fence is now ");
}
END_TEST

/*
 * break over TCP with $REDLOCKD_ADMIN_PASSWORD (auth.admin_password): a
 * wrong one is 77 and ends nothing, the right one breaks the hold.
 */
START_TEST(break_admin_password)
{
    struct h_daemon_opts o = { .admin_password = "adm1n" };
    pid_t ctl, child;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o);
    child = ct_hold("holder", "ba", NULL, &ctl);
    setenv("REDLOCKD_ADMIN_PASSWORD", "wrong", 1);
    ck_assert_int_eq(CT_RUN("wrong", "-H", ct_addr(), "break", "ba"), 77);
    ct_assert_out_has("wrong", "wrong password");
    ck_assert_msg(ct_alive(child), "a refused break stopped the holder");
    setenv("REDLOCKD_ADMIN_PASSWORD", "adm1n", 1);
    ck_assert_int_eq(CT_RUN("admin", "-H", ct_addr(), "break", "ba"), 0);
    ct_assert_out_has("admin", "broken ba: holders=1 fence=");
    ck_assert_int_eq(ct_wait(ctl, EXIT_MS), 75);
    ct_assert_out_has("holder", "reason=broken");
    unsetenv("REDLOCKD_ADMIN_PASSWORD");
}
END_TEST

/* ---- a terminal ---- */

/* Start redlockctl with args as the session leader of a new pseudo-terminal. */
static pid_t
ct_spawn_pty(int *master, const char *const *args)
{
    const char *argv[40];
    pid_t parent = getpid(), pid;
    size_t n = 0;

    argv[n++] = h_redlockctl_bin();
    while (*args != NULL && n < sizeof(argv) / sizeof(argv[0]) - 1) {
        argv[n++] = *args++;
    }
    argv[n] = NULL;
    pid = forkpty(master, NULL, NULL, NULL);
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        h_child_setup(parent);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    ct_kid_add(pid);
    return pid;
}

/* Read the terminal's output into buf (appending) for up to ms, until pid exits. */
static int
ct_pty_wait(int master, pid_t pid, char *buf, size_t size, int64_t ms)
{
    int64_t deadline = h_now_ms() + ms;
    struct ct_proc p = { pid, -1 };
    struct pollfd pfd;
    size_t len = strlen(buf);
    bool exited = false;
    ssize_t n;

    while (h_now_ms() < deadline) {
        pfd.fd = master;
        pfd.events = POLLIN;
        if (poll(&pfd, 1, 20) > 0) {
            n = read(master, buf + len, size - 1 - len);
            if (n > 0) {
                len += (size_t)n;
                buf[len] = '\0';
                continue;
            }
            if (exited) {
                break;      /* EIO: every writer is gone */
            }
        } else if (exited) {
            break;
        }
        if (!exited && ct_cond_exited(&p)) {
            exited = true;
            ct_kid_forget(pid);
        }
    }
    return exited ? p.code : -1;
}

/*
 * Under a terminal, the command is given the terminal's foreground: it
 * can read it, and Ctrl-C goes to it.
 */
START_TEST(terminal_foreground)
{
    char pidf[CT_PATH_MAX], cmd[CT_CMD_MAX], out[8192] = "";
    long pgrp, tpgid;
    pid_t pid, child;
    int master;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1);
    snprintf(cmd, sizeof(cmd),
             "read x; echo \"got:$x\"; echo \"fg:$(cut -d' ' -f5,8 /proc/$$/stat)\"; exit 4");
    pid = ct_spawn_pty(&master, (const char *const[]){ "-H", ct_addr(), "tty", "-c", cmd, NULL });
    ck_assert_int_eq(write(master, "hello\n", 6), 6);
    ck_assert_int_eq(ct_pty_wait(master, pid, out, sizeof(out), EXIT_MS), 4);
    close(master);
    ck_assert_msg(strstr(out, "got:hello") != NULL, "the command could not read the terminal: "
                  "'%s'", out);
    ck_assert_msg(sscanf(strstr(out, "fg:"), "fg:%ld %ld", &pgrp, &tpgid) == 2 && pgrp == tpgid,
                  "the command is not the terminal's foreground: '%s'", out);

    ct_path(pidf, sizeof(pidf), "pid");
    snprintf(cmd, sizeof(cmd), "echo $$ > '%s'; exec sleep 30", pidf);
    out[0] = '\0';
    pid = ct_spawn_pty(&master, (const char *const[]){ "-H", ct_addr(), "tty", "-c", cmd, NULL });
    child = ct_wait_pid_file(pidf);
    ct_track_group(child);
    ck_assert_int_eq(write(master, "\003", 1), 1);
    ck_assert_int_eq(ct_pty_wait(master, pid, out, sizeof(out), EXIT_MS), 128 + SIGINT);
    close(master);
    ck_assert_msg(!ct_alive(child), "the command survived Ctrl-C");
}
END_TEST

/* ---- TLS ---- */

/* The certificate file name into out (h_cert). */
static const char *
ct_tls_file(char *out, size_t size, const char *name)
{
    ck_assert_msg(snprintf(out, size, "%s", h_cert(name)) < (int)size, "path too long");
    return out;
}

/*
 * Start `openssl s_server -rev` (it answers each line reversed) on a free
 * port with the certificate <name>.crt, for naccept connections; wait
 * until it listens (it prints ACCEPT).  Its output goes to
 * <test dir>/<tag>.out; teardown kills it.  Returns the port.
 */
static int
ct_tls_server(const char *tag, const char *name, int naccept)
{
    char accept_at[64], cert[CT_PATH_MAX], key[CT_PATH_MAX], crt[64], pem[64], nacc[16];
    struct ct_text up = { tag, "ACCEPT" };
    int port = h_free_port();

    ck_assert_int_gt(port, 0);
    snprintf(accept_at, sizeof(accept_at), "127.0.0.1:%d", port);
    snprintf(crt, sizeof(crt), "%s.crt", name);
    snprintf(pem, sizeof(pem), "%s.key", name);
    snprintf(nacc, sizeof(nacc), "%d", naccept);
    ct_tls_file(cert, sizeof(cert), crt);
    ct_tls_file(key, sizeof(key), pem);
    {
        const char *argv[] = { "openssl", "s_server", "-accept", accept_at, "-cert", cert,
                               "-key", key, "-naccept", nacc, "-rev", NULL };
        char out[CT_PATH_MAX], file[64];
        pid_t pid;

        snprintf(file, sizeof(file), "%s.out", tag);
        ct_path(out, sizeof(out), file);
        pid = h_spawn(argv, out);
        ck_assert_msg(pid > 0, "cannot start openssl s_server");
        ct_kid_add(pid);
    }
    ck_assert_msg(h_wait_until(ct_cond_out, &up, FILE_MS), "openssl s_server did not start");
    return port;
}

/*
 * Against openssl s_server (no daemon needed): the certificate checked
 * (a wrong CA, a wrong name, an expired one: 69 and one line with
 * OpenSSL's reason), and a verified connection carrying redlockctl's
 * PING (s_server answers it reversed, which redlockctl reports as an
 * unexpected answer: 69, but the line went through TLS both ways).
 */
START_TEST(tls_verification)
{
    static const struct {
        const char *cert;   /* the server's certificate */
        const char *want;   /* in redlockctl's line */
    } refused[] = {
        { "other", "TLS handshake: certificate verify failed: unable to get local issuer "
                   "certificate" },
        { "wrongname", "TLS handshake: certificate verify failed: IP address mismatch" },
        { "expired", "TLS handshake: certificate verify failed: certificate has expired" },
    };
    char ca[CT_PATH_MAX], addr[64], tag[32], srv[32], *out;
    size_t i;
    int port;

    EXPECT_SETUP(.certs = true);
    ct_tls_file(ca, sizeof(ca), "ca.crt");
    for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        snprintf(srv, sizeof(srv), "server%zu", i);
        snprintf(tag, sizeof(tag), "refused%zu", i);
        port = ct_tls_server(srv, refused[i].cert, 1);
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
        ck_assert_int_eq(ct_run(tag, (const char *const[]){ "--cacert", ca, "-H", addr, "ping",
                                                             NULL }), 69);
        out = ct_out(tag);
        ck_assert_msg(ct_lines(out) == 1 && strstr(out, refused[i].want) != NULL
                      && strstr(out, addr) != NULL, "%s printed '%s', expected '%s'", tag, out,
                      refused[i].want);
        free(out);
    }

    /* Verified: by --cacert, then by REDLOCKD_TLS=1 and $REDLOCKD_ADDR. */
    port = ct_tls_server("good", "server", 2);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    ck_assert_int_eq(CT_RUN("ok", "--cacert", ca, "-H", addr, "ping"), 69);
    ct_assert_out_has("ok", "answered: GNIP");
    setenv("REDLOCKD_TLS", "1", 1);
    setenv("REDLOCKD_ADDR", addr, 1);
    ck_assert_int_eq(CT_RUN("env", "--cacert", ca, "ping"), 69);
    ct_assert_out_has("env", "answered: GNIP");
    unsetenv("REDLOCKD_TLS");
    unsetenv("REDLOCKD_ADDR");
}
END_TEST

/*
 * Does this redlockd have a TLS listener?  `redlockd -t` on a config with
 * listen.tls; false (with its first line of output in why) when it
 * refuses the config.
 */
static bool
ct_daemon_has_tls(char *why, size_t size)
{
    char conf[CT_PATH_MAX], out[CT_PATH_MAX], cert[CT_PATH_MAX], key[CT_PATH_MAX], *text, *nl;
    const char *bin = getenv("REDLOCKD_BIN") != NULL ? getenv("REDLOCKD_BIN")
                                                       : "./build/redlockd";
    FILE *f;
    int i, code;

    ct_path(conf, sizeof(conf), "probe.yml");
    f = fopen(conf, "we");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "listen:\n  tcp: \"127.0.0.1:%d\"\n  unix: \"%s/probe.sock\"\n"
            "  tls: \"127.0.0.1:%d\"\n", h_free_port(), h_dir(), h_free_port());
    fprintf(f, "tls:\n  cert_file: \"%s\"\n  key_file: \"%s\"\n",
            ct_tls_file(cert, sizeof(cert), "server.crt"),
            ct_tls_file(key, sizeof(key), "server.key"));
    fprintf(f, "masters:\n");
    for (i = 0; i < NMASTERS; i++) {
        fprintf(f, "  - \"127.0.0.1:%d\"\n", 7000 + i);
    }
    fclose(f);
    {
        const char *argv[] = { bin, "-t", "-c", conf, NULL };
        pid_t pid;

        ct_path(out, sizeof(out), "probe.out");
        pid = h_spawn(argv, out);
        ck_assert_msg(pid > 0, "cannot run %s", bin);
        code = ct_wait(pid, EXIT_MS);
    }
    text = ct_slurp(out);
    nl = text != NULL ? strchr(text, '\n') : NULL;
    if (nl != NULL) {
        *nl = '\0';
    }
    snprintf(why, size, "%s", text != NULL ? text : "");
    free(text);
    return code == 0;
}

/*
 * redlockctl over TLS to redlockd's TLS listener (listen.tls): ping, a
 * command run under a lock, status through REDLOCKD_TLS=1, and a CA that
 * is not the daemon's refused.  Skipped, saying so, when this redlockd
 * has no TLS listener.
 */
START_TEST(tls_daemon)
{
    char conf[CT_PATH_MAX], log[CT_PATH_MAX], cert[CT_PATH_MAX], key[CT_PATH_MAX];
    char ca[CT_PATH_MAX], other[CT_PATH_MAX], marker[CT_PATH_MAX], cmd[CT_CMD_MAX];
    char addr[64], why[512], *out;
    const char *bin = getenv("REDLOCKD_BIN") != NULL ? getenv("REDLOCKD_BIN")
                                                       : "./build/redlockd";
    int64_t until;
    size_t i;
    pid_t pid;
    int port, code = -1;
    FILE *f;

    EXPECT_SETUP(.certs = true, .masters = NMASTERS);
    if (!ct_daemon_has_tls(why, sizeof(why))) {
        printf("check_redlockctl: tls_daemon skipped: this redlockd has no TLS listener "
               "(redlockd -t on a config with listen.tls: %s)\n", why);
        return;
    }
    port = h_free_port();
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    ct_path(conf, sizeof(conf), "tls.yml");
    f = fopen(conf, "we");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "listen:\n  tcp: \"127.0.0.1:%d\"\n  unix: \"%s/tls.sock\"\n  tls: \"%s\"\n",
            h_free_port(), h_dir(), addr);
    fprintf(f, "tls:\n  cert_file: \"%s\"\n  key_file: \"%s\"\n",
            ct_tls_file(cert, sizeof(cert), "server.crt"),
            ct_tls_file(key, sizeof(key), "server.key"));
    fprintf(f, "masters:\n");
    for (i = 0; i < NMASTERS; i++) {
        fprintf(f, "  - \"127.0.0.1:%d\"\n", h_master_port(i));
    }
    /* Masters the test just started: no restart quarantine (as the harness does). */
    fprintf(f, "lock:\n  restart_quarantine: false\n");
    /* No metrics listener: its default port may be taken on this machine. */
    fprintf(f, "metrics:\n  listen: \"\"\n");
    fprintf(f, "log:\n  level: debug\n");
    fclose(f);
    {
        const char *argv[] = { bin, "-c", conf, NULL };

        ct_path(log, sizeof(log), "redlockd.out");
        pid = h_spawn(argv, log);
        ck_assert_msg(pid > 0, "cannot start %s", bin);
        ct_kid_add(pid);
    }
    ct_tls_file(ca, sizeof(ca), "ca.crt");
    ct_tls_file(other, sizeof(other), "other-ca.crt");
    /* Up once a ping over TLS answers. */
    for (until = h_now_ms() + EXIT_MS; h_now_ms() < until; usleep(100000)) {
        code = CT_RUN("ping", "--cacert", ca, "-H", addr, "ping");
        if (code == 0) {
            break;
        }
    }
    out = ct_out("ping");
    ck_assert_msg(code == 0 && strstr(out, "PONG from redlockd") != NULL,
                  "ping over TLS exited %d: %s", code, out);
    free(out);

    ct_path(marker, sizeof(marker), "marker");
    snprintf(cmd, sizeof(cmd), "touch '%s'", marker);
    ck_assert_int_eq(CT_RUN("lock", "--cacert", ca, "-H", addr, "-n", "tlsname", "-c", cmd), 0);
    ck_assert_msg(ct_exists(marker), "the command did not run");
    setenv("REDLOCKD_TLS", "1", 1);
    setenv("REDLOCKD_ADDR", addr, 1);
    ck_assert_int_eq(CT_RUN("status", "--cacert", ca, "status", "tlsname"), 1);
    ct_assert_out_has("status", "tlsname: free");
    unsetenv("REDLOCKD_TLS");
    unsetenv("REDLOCKD_ADDR");
    ck_assert_int_eq(CT_RUN("otherca", "--cacert", other, "-H", addr, "ping"), 69);
    out = ct_out("otherca");
    ck_assert_msg(ct_lines(out) == 1 && strstr(out, "certificate verify failed") != NULL,
                  "printed '%s'", out);
    free(out);
}
END_TEST

static Suite *
ctl_suite(void)
{
    Suite *s = suite_create("redlockctl");
    TCase *tc = tcase_create("redlockctl");

    tcase_add_checked_fixture(tc, ct_setup, ct_teardown);
    if (getenv("CK_DEFAULT_TIMEOUT") == NULL) {
        tcase_set_timeout(tc, TEST_TIMEOUT_S);
    }
    tcase_add_test(tc, usage_errors);
    tcase_add_test(tc, subcommand_typo);
    tcase_add_test(tc, daemon_unreachable);
    tcase_add_test(tc, daemon_refuses_request);
    tcase_add_test(tc, no_quorum);
    tcase_add_test(tc, wait_rides_out_outage);
    tcase_add_test(tc, exit_status_passthrough);
    tcase_add_test(tc, command_environment);
    tcase_add_test(tc, held_while_running);
    tcase_add_test(tc, conflict_exit_codes);
    tcase_add_test(tc, serialize);
    tcase_add_test(tc, set_held_while_running);
    tcase_add_test(tc, set_refused_whole);
    tcase_add_test(tc, set_lost_stops_command);
    tcase_add_test(tc, set_usage_errors);
    tcase_add_test(tc, lost_terminates_command);
    tcase_add_test(tc, lost_kills_group_after_grace);
    tcase_add_test(tc, daemon_gone);
    tcase_add_test(tc, signals_forwarded);
    tcase_add_test(tc, signal_while_waiting);
    tcase_add_test(tc, killed_redlockctl_kills_command);
    tcase_add_test(tc, subcommands);
    tcase_add_test(tc, check_subcommand);
    tcase_add_test(tc, delay_option);
    tcase_add_test(tc, environment_defaults);
    tcase_add_test(tc, auth_password);
    tcase_add_test(tc, passwords_scrubbed_from_environ);
    tcase_add_test(tc, protocol_conversation);
    tcase_add_test(tc, labels_and_requests_sent);
    tcase_add_test(tc, list_holds);
    tcase_add_test(tc, watch_changes);
    tcase_add_test(tc, break_holder);
    tcase_add_test(tc, break_admin_password);
    tcase_add_test(tc, terminal_foreground);
    tcase_add_test(tc, tls_verification);
    tcase_add_test(tc, tls_daemon);
    suite_add_tcase(s, tc);
    return s;
}

/* Before the run: default signal dispositions, then the harness's setup. */
static int
ctl_init(void)
{
    /*
     * The signal tests send SIGINT, SIGTERM and SIGHUP to redlockctl and
     * its command: they must not inherit them ignored (a suite started
     * under nohup ignores SIGHUP, and redlockctl rightly keeps that).
     */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    return h_suite_init();
}

const struct runner runner_main = { "check_redlockctl", ctl_suite, ctl_init, h_suite_cleanup };
