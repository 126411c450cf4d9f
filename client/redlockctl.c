/*
 * redlockctl.c: flock(1) for the whole fleet, through redlockd.
 *
 *     redlockctl [-S SOCKET | -H HOST:PORT] [-n | -w SECONDS] [-t TTL_MS]
 *                [-E CODE] [-k GRACE_SECONDS] [--fence] [-s | --limit N]
 *                [--label TEXT] [--delay MS] [--tls] [--cacert FILE] [--cert FILE --key FILE]
 *                [-v] NAME [--] COMMAND [ARGS...]
 *     redlockctl [options] NAME -c 'SHELL COMMAND'
 *     redlockctl [options] -N NAME [-N NAME...] [--] COMMAND [ARGS...]
 *     redlockctl [-S SOCKET | -H HOST:PORT] status NAME
 *     redlockctl [-S SOCKET | -H HOST:PORT] list [PREFIX]
 *     redlockctl [-S SOCKET | -H HOST:PORT] watch NAME
 *     redlockctl [-S SOCKET | -H HOST:PORT] break NAME
 *     redlockctl [-S SOCKET | -H HOST:PORT] check NAME --fence F [--permit I] | --token T
 *     redlockctl [-S SOCKET | -H HOST:PORT] stats
 *     redlockctl [-S SOCKET | -H HOST:PORT] ping
 *
 * A command-line client of the line protocol (proto/PROTOCOL.md), not part
 * of the daemon: plain blocking C around poll(2), no libevent, no hiredis;
 * the protocol's client side (connect, lines, fields) is client/client.c.
 *
 * Running a command under a lock, step by step:
 *
 *   1. Connect to redlockd: -S, -H, else $REDLOCKD_SOCKET, else
 *      $REDLOCKD_ADDR, else the default Unix socket
 *      /run/redlockd/redlockd.sock when a connection to it succeeds, else
 *      127.0.0.1:7379.  When $REDLOCKD_PASSWORD is set and not empty,
 *      send AUTH <password> first (a daemon without a password answers
 *      that none is configured, and that is accepted).  With TLS (--tls,
 *      --cacert, --cert and --key, or REDLOCKD_TLS=1) the address is -H,
 *      else $REDLOCKD_ADDR, else 127.0.0.1:7379 (never a Unix socket),
 *      and TLS starts right after the connect (client_start_tls()):
 *      redlockd's certificate must chain to --cacert (default: the
 *      system's CAs) and name HOST; --cert and --key are presented
 *      when the daemon asks for a client certificate.
 *   2. Take NAME in session mode: LOCK NAME [ttl=] [wait=] [fence]
 *      [shared | limit=N] [delay=MS] label=TEXT, or TRYLOCK for -n and -w 0.  The
 *      lock lives as long as this connection; the daemon renews it.  No
 *      -n/-w: wait forever (wait=inf).  The label tells others who holds
 *      the name (LIST, STATUS, WATCH): --label TEXT, else
 *      <host>:<pid>:<command name> (ctl_default_label()).
 *      With -N NAME (repeated: --name), the names are one set, taken all
 *      or none in one request (LOCK a b c ...: the names in the order
 *      given, at most PROTO_SET_MAX, none twice); every step below treats
 *      the set as one lock: its OK, its LOST and its UNLOCK name the
 *      whole set, and losing any name loses the set.  A set is held
 *      exclusively (no -s or --limit).
 *   3. Fork COMMAND: its own process group (setpgid), REDLOCK_NAME=NAME and
 *      REDLOCK_FENCE=N in its environment when the grant carried a fence
 *      (--fence, or lock.fence: always; for a set, REDLOCK_NAME is the
 *      names joined by spaces and REDLOCK_FENCE their fences joined by
 *      commas, in the same order); otherwise REDLOCK_FENCE is removed,
 *      so that a nested redlockctl never passes on a stale one.  With
 *      --limit, REDLOCK_PERMIT=I names the permit held (fences order the
 *      holders of one permit); otherwise it is removed too.
 *      $REDLOCKD_PASSWORD and $REDLOCKD_ADMIN_PASSWORD are removed: COMMAND
 *      gets no secret (a nested redlockctl must be given it again).  They
 *      were removed at the start, their values overwritten in the block
 *      /proc/<pid>/environ shows, so that COMMAND (same user) cannot read
 *      them from redlockctl's either (ctl_scrub_secret()).  COMMAND is
 *      run with execvp(), never through a shell; -c STRING runs
 *      /bin/sh -c STRING.  It gets the signal mask redlockctl started with
 *      and PR_SET_PDEATHSIG(SIGKILL): if redlockctl dies (SIGKILL, OOM), its
 *      connection closes and the lock is released, so COMMAND must not
 *      carry on unprotected.
 *   4. Wait for COMMAND while watching the connection:
 *      - "! LOST NAME ..." or the connection closing: SIGTERM (and SIGCONT)
 *        to COMMAND's process group; SIGKILL to the group when COMMAND
 *        exits or GRACE seconds later (-k, default 5), whichever is first,
 *        so that nothing of the group runs on without the lock; then exit
 *        75 (EX_TEMPFAIL) with a message.
 *      - SIGINT, SIGTERM, SIGHUP to redlockctl: sent on to COMMAND's process
 *        group; redlockctl keeps the lock until COMMAND exits.
 *   5. After COMMAND exits: UNLOCK NAME and wait for the answer (at most
 *      CTL_REPLY_MS), so that the name is free when redlockctl exits (a
 *      plain close is released asynchronously, and `redlockctl -n x a;
 *      redlockctl -n x b` would then see the name still held).  Exit with
 *      COMMAND's status, or 128 + N when signal N killed it (as a shell).
 *
 * While the LOCK is pending (no COMMAND yet), SIGINT, SIGTERM and SIGHUP
 * make redlockctl give up: it closes the connection, which cancels the
 * pending LOCK, and exits 128 + the signal number, silently.  A signal
 * that was ignored when redlockctl started (nohup, `cmd &` in a script) is
 * left ignored, for redlockctl and for COMMAND.
 *
 * Terminals: when stdin is redlockctl's controlling terminal and
 * redlockctl is in its foreground process group, the terminal is handed to
 * COMMAND's process group (tcsetpgrp) so that an interactive COMMAND can
 * read it, and Ctrl-C reaches COMMAND directly; it is taken back when
 * COMMAND exits.  When COMMAND is stopped (Ctrl-Z, SIGTTIN) redlockctl
 * takes the terminal back and stops itself with SIGTSTP, so that the shell
 * sees the job stopped; when continued, it gives the terminal back (if it
 * is in the foreground) and continues COMMAND.  The lock stays held while
 * the job is stopped.
 *
 * Exit status:
 *     COMMAND's status, or 128 + N when signal N killed it
 *     1 (or -E CODE)   NAME is held (-n, -w 0), or -w ran out
 *     64  EX_USAGE     bad command line, or a request redlockd refused
 *                      as malformed (ERR PROTO: a bad name, ttl out of range)
 *     69  EX_UNAVAILABLE  redlockd unreachable, its TLS handshake or
 *                      certificate refused, closed the connection, did
 *                      not answer in time, no quorum of masters (ERR
 *                      NOQUORUM), shutting down, or any other ERR
 *     71  EX_OSERR     fork failed
 *     75  EX_TEMPFAIL  the lock was lost while COMMAND ran
 *     77  EX_NOPERM    redlockd refused AUTH, or wants a password and
 *                      $REDLOCKD_PASSWORD is not set; break: the session
 *                      is not admin (ERR DENIED)
 *     126, 127         COMMAND could not be executed, or was not found
 *     128 + N          signal N made redlockctl give up while waiting
 *     status: 0 NAME is held, 1 NAME is free
 *     check: 0 the grant is current, 1 it is stale
 *     list: 0; break: 0 a hold ended, 1 NAME was not held (its fence
 *                      is raised all the same); watch: 0 after SIGINT or
 *                      SIGTERM, 69 when the connection ends
 *
 * A conflict (exit 1 or -E) is silent, like flock(1), so that a cron job
 * with -n does not mail anybody; -v reports it.  Every other failure prints
 * one line on stderr.  Times are measured on CLOCK_MONOTONIC.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>

#include "client/client.h"
#include "proto/proto.h"

#ifndef REDLOCKD_VERSION
#define REDLOCKD_VERSION "unknown"
#endif

#define CTL_DEFAULT_SOCKET  "/run/redlockd/redlockd.sock"
#define CTL_DEFAULT_ADDR    "127.0.0.1:7379"
#define CTL_CONNECT_MS      5000    /* connect, and the answer to AUTH */
#define CTL_REPLY_MS        10000   /* answer to TRYLOCK, UNLOCK, STATUS, STATS, PING */
#define CTL_WAIT_SLACK_MS   10000   /* -w: the answer is due this long after wait= ran out */
#define CTL_GRACE_MS        5000    /* -k default: SIGTERM to SIGKILL after a lost lock */
#define CTL_SECONDS_MAX     INT64_C(4000000000) /* -w and -k, so that ms fit wait= */
#define CTL_STATS_MAX       4096    /* STAT lines kept by `stats` */
#define CTL_MASTERS_MAX     64      /* master rows shown by `stats` */
#define CTL_FIELDS_MAX      32      /* master columns shown by `stats` */
#define CTL_LABEL_MAX       64      /* --label and the default label, bytes */
#define CTL_EXIT_CONFLICT   1       /* -n / -w conflict unless -E */
#define CTL_EXIT_NOEXEC     126     /* COMMAND found but not executable */
#define CTL_EXIT_NOTFOUND   127     /* COMMAND not found */

/* What redlockctl was asked to do. */
enum ctl_mode {
    CTL_MODE_LOCK,      /* run a command under a lock */
    CTL_MODE_STATUS,    /* status NAME */
    CTL_MODE_LIST,      /* list [PREFIX] */
    CTL_MODE_WATCH,     /* watch NAME */
    CTL_MODE_BREAK,     /* break NAME */
    CTL_MODE_CHECK,     /* check NAME --fence F [--permit I] | --token T */
    CTL_MODE_STATS,     /* stats */
    CTL_MODE_PING       /* ping */
};

/* The subcommands, by the word that names them on the command line. */
static const struct {
    const char     *word;           /* status, list, ... */
    enum ctl_mode   mode;           /* what it does */
    int             min_args;       /* words after it, at least */
    int             max_args;       /* and at most */
    const char     *usage;         /* its line of the usage text, after "redlockctl " */
} ctl_subcommands[] = {
    { "status", CTL_MODE_STATUS, 1, 1, "status NAME" },
    { "list",   CTL_MODE_LIST,   0, 1, "list [PREFIX]" },
    { "watch",  CTL_MODE_WATCH,  1, 1, "watch NAME" },
    { "break",  CTL_MODE_BREAK,  1, 1, "break NAME" },
    { "check",  CTL_MODE_CHECK,  3, 5, "check NAME --fence F [--permit I] | --token T" },
    { "stats",  CTL_MODE_STATS,  0, 0, "stats" },
    { "ping",   CTL_MODE_PING,   0, 0, "ping" },
};

struct ctl_opts;
static void ctl_parse_check(struct ctl_opts *o, char **words, int n);

/*
 * The command line, after parsing; strings point into argv or environ,
 * but for the password (ctl_password).
 */
struct ctl_opts {
    enum ctl_mode   mode;           /* what to do */
    const char     *unix_path;      /* Unix socket to use, or NULL */
    const char     *addr;           /* TCP host:port to use, or NULL */
    bool            fallback;       /* unix_path is the default: try addr when it fails */
    bool            nowait;         /* -n or -w 0: one attempt (TRYLOCK) */
    int64_t         wait_ms;        /* -w in ms; -1: wait forever */
    int64_t         ttl_ms;         /* -t; 0: the daemon's lock.default_ttl_ms */
    int             conflict_code;  /* -E: exit status of a conflict */
    int64_t         grace_ms;       /* -k in ms */
    bool            fence;          /* --fence */
    bool            shared;         /* -s, --shared: a shared hold */
    int64_t         limit;          /* --limit N: a counted hold; 0: exclusive */
    bool            verbose;        /* -v */
    const char     *label;          /* --label TEXT, or NULL: ctl_default_label() */
    int64_t         delay_ms;       /* --delay MS, a lock-delay; -1: not given (the
                                       daemon's lock.delay_ms) */
    const char     *shell_cmd;      /* -c STRING, or NULL */
    const char     *name;           /* the lock name (lock, status, watch, break), or
                                       the prefix of list (NULL: none); with -N, the
                                       set's names joined by spaces (ctl_set_text) */
    size_t          nset;           /* -N names given (0: NAME, or not a lock) */
    char          **argv;           /* COMMAND and its arguments (NULL with -c) */
    const char     *password;       /* $REDLOCKD_PASSWORD, or NULL; for break
                                       $REDLOCKD_ADMIN_PASSWORD first */
    const char     *password_var;   /* the variable password came from, for messages */
    bool            tls;            /* TLS to addr: --tls, --cacert, --cert, --key or
                                       REDLOCKD_TLS=1 */
    struct client_tls_opts tls_opts; /* --cacert, --cert, --key (NULL: not given) */
    const char     *tls_why;        /* the option that turned TLS on, for messages */
    const char     *check_fence;    /* check's --fence F, or NULL */
    const char     *check_permit;   /* check's --permit I, or NULL */
    const char     *check_token;    /* check's --token T, or NULL */
};

/*
 * The password sent with AUTH, copied out of the environment (at most
 * PROTO_WORD_MAX bytes: client_word_ok() checked it).
 */
static char ctl_password[PROTO_WORD_MAX + 1];

/* The names of -N, in the order given (they point into argv). */
static const char *ctl_set[PROTO_SET_MAX];

/* The names of -N joined by spaces, as the protocol's lines name a set. */
static char ctl_set_text[PROTO_SET_MAX * (PROTO_NAME_MAX + 1)];

/*
 * Remove the variable name from the environment, and first overwrite its
 * value with NUL bytes where it lies: the block the kernel placed on the
 * stack at exec, which /proc/<pid>/environ (and ps e) shows to every
 * process of the same user for as long as this one runs, COMMAND among
 * them.  unsetenv(3) alone only drops the pointer to it.  Every entry
 * "name=..." is overwritten (an environment may hold one twice); called
 * before anything has changed the environment, so that its strings are
 * still the kernel's.  The value's length stays visible.
 */
static void
ctl_scrub_secret(const char *name)
{
    size_t len = strlen(name);
    char **e;

    for (e = environ; e != NULL && *e != NULL; e++) {
        if (strncmp(*e, name, len) == 0 && (*e)[len] == '=') {
            memset(*e + len + 1, '\0', strlen(*e + len + 1));
        }
    }
    (void)unsetenv(name);
}

/* What a grant carried, for COMMAND's environment. */
struct ctl_grant {
    char    fence[PROTO_SET_MAX * 21]; /* the fencing token's digits (a set's: each
                                       name's, joined by commas), or "" */
    char    permit[16];             /* a counted hold's permit, or "" */
};

/* One connection to redlockd.  Lives in main(). */
struct ctl_conn {
    struct client cl;               /* the socket (-1 once closed), its buffer, the line
                                       ctl_next() returned last (cl.line), and why the
                                       connection closed (cl.err, CTL_EV_CLOSED) */
    char    where[PATH_MAX + 16];   /* address or socket path, for messages */
};

/* What ctl_next() saw. */
enum ctl_event {
    CTL_EV_LINE,        /* conn->cl.line holds a line from the daemon */
    CTL_EV_SIGNAL,      /* a signal arrived (its number in *signo) */
    CTL_EV_TIMEOUT,     /* the deadline passed */
    CTL_EV_CLOSED       /* the connection closed or failed; conn->cl.err says how */
};

/* The running COMMAND and what happened to it.  Lives in ctl_run(). */
struct ctl_child {
    pid_t   pid;        /* COMMAND's pid, also its process group id */
    bool    tty;        /* stdin is our controlling terminal: job control applies */
    bool    handed;     /* the terminal was handed to COMMAND's group */
    bool    lost;       /* the lock is gone and COMMAND was told to stop */
    int64_t kill_at;    /* when SIGKILL goes to the group (ms); -1: not due */
    int     code;       /* exit code once reaped: status, or 128 + signal */
};

/* One "STAT <name> <value>" line of `stats`. */
struct ctl_stat {
    char   *name;       /* the stat name (malloc'd, with value after its NUL) */
    char   *value;      /* the value, inside the same allocation */
};

static int      ctl_sigfd = -1;     /* signalfd: SIGCHLD and the signals we act on */
static sigset_t ctl_origmask;       /* the signal mask we started with, for COMMAND */
static struct sigaction ctl_origchld; /* the SIGCHLD disposition we started with */

static void ctl_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ctl_fail(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static void ctl_usage_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void ctl_fail_err(const struct ctl_opts *o, const struct ctl_conn *c, const char *what,
                         const char *line) __attribute__((noreturn));

/* ---- small helpers ---- */

/* "redlockctl: <text>" and then hint (may be "") on stderr, in one write. */
static void
ctl_vmsg(const char *hint, const char *fmt, va_list ap)
{
    char text[1024];

    vsnprintf(text, sizeof(text), fmt, ap);
    fprintf(stderr, "redlockctl: %s\n%s", text, hint);
}

/* One line "redlockctl: ..." on stderr. */
static void
ctl_msg(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    ctl_vmsg("", fmt, ap);
    va_end(ap);
}

/* ctl_msg(), then exit with code.  Only before COMMAND runs. */
static void
ctl_fail(int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    ctl_vmsg("", fmt, ap);
    va_end(ap);
    exit(code);
}

static void
ctl_usage(FILE *out)
{
    size_t i;

    fputs("Usage: redlockctl [options] NAME [--] COMMAND [ARGS...]\n"
          "       redlockctl [options] NAME -c 'SHELL COMMAND'\n"
          "       redlockctl [options] -N NAME [-N NAME...] [--] COMMAND [ARGS...]\n", out);
    for (i = 0; i < sizeof(ctl_subcommands) / sizeof(ctl_subcommands[0]); i++) {
        fprintf(out, "       redlockctl [-S SOCKET | -H HOST:PORT] %s\n",
                ctl_subcommands[i].usage);
    }
    fputs("\n"
          "Take the fleet-wide lock NAME through redlockd, run COMMAND while holding\n"
          "it, release it, and exit with COMMAND's status (flock(1) for many machines).\n"
          "\n"
          "Options:\n"
          "  -S SOCKET      redlockd's Unix socket\n"
          "  -H HOST:PORT   redlockd's TCP address (HOST:PORT or [IPv6]:PORT)\n"
          "  -n             fail at once if NAME is held (exit 1, or -E CODE)\n"
          "  -w SECONDS     wait at most SECONDS (decimals allowed; -w 0 is -n);\n"
          "                 without -n or -w, wait as long as it takes\n"
          "  -t TTL_MS      lease in milliseconds (default: the daemon's\n"
          "                 lock.default_ttl_ms); redlockd renews it while COMMAND runs\n"
          "  -E CODE        exit status when NAME is held or -w runs out (default 1)\n"
          "  -k SECONDS     when the lock is lost: SIGTERM to COMMAND's process group,\n"
          "                 SIGKILL when COMMAND exits or SECONDS later (default 5)\n"
          "  -c STRING      run /bin/sh -c STRING (COMMAND is never run by a shell)\n"
          "  -N, --name NAME\n"
          "                 lock NAME too: several -N take a set of names, all or none,\n"
          "                 held and lost as one (then no NAME argument: COMMAND follows)\n"
          "  --fence        ask for a fencing token, passed as REDLOCK_FENCE\n"
          "  -s, --shared   a shared hold: with other shared holders, never with an\n"
          "                 exclusive one (flock -s)\n"
          "  --limit N      a counted hold: at most N holders of NAME at once across\n"
          "                 the fleet; the permit held is passed as REDLOCK_PERMIT\n"
          "  --label TEXT   who holds NAME, as list, status and watch show it: 1..64\n"
          "                 printable characters without spaces (default\n"
          "                 HOST:PID:COMMAND, PID redlockctl's, 'sh' for -c)\n"
          "  --delay MS     a lock-delay: if the hold ends without a release (redlockctl\n"
          "                 killed, the lock lost), nobody gets NAME for MS milliseconds\n"
          "                 (default: the daemon's lock.delay_ms; 0: none); exclusive only\n"
          "  --tls          TLS to redlockd at -H HOST:PORT, checking that its certificate\n"
          "                 names HOST and chains to a CA of the system (REDLOCKD_TLS=1\n"
          "                 in the environment does the same)\n"
          "  --cacert FILE  the CA certificates (PEM) instead of the system's; implies --tls\n"
          "  --cert FILE --key FILE\n"
          "                 a client certificate (PEM) and its key, for a daemon that asks\n"
          "                 for one; they go together and imply --tls\n"
          "  -v             report the lock's acquisition, release and conflicts on stderr\n"
          "  -h, --help     this text\n"
          "  -V, --version  the version\n"
          "\n"
          "Without -S or -H: $REDLOCKD_SOCKET, else $REDLOCKD_ADDR, else\n"
          "/run/redlockd/redlockd.sock if it accepts a connection, else 127.0.0.1:7379;\n"
          "with TLS, -H, else $REDLOCKD_ADDR, else 127.0.0.1:7379 (-S is an error).\n"
          "$REDLOCKD_PASSWORD, when set, is sent with AUTH first (for break,\n"
          "$REDLOCKD_ADMIN_PASSWORD when set).  To lock a name spelled status, list,\n"
          "watch, break, stats or ping (or like a mistyped one), put -- before it.\n"
          "\n"
          "list [PREFIX]: the names this daemon holds or waits for, one line each.\n"
          "watch NAME: a line whenever NAME is taken or freed, through any daemon,\n"
          "until SIGINT or SIGTERM.  break NAME: end whoever's hold on NAME (an admin\n"
          "session: auth.admin_password, or root on the Unix socket).  check NAME: is\n"
          "the grant told fence F (and permit I, for --limit), or lease token T, still\n"
          "NAME's current one on a quorum of the masters?\n"
          "\n"
          "COMMAND runs in its own process group with REDLOCK_NAME=NAME, and with\n"
          "REDLOCK_FENCE=N when the grant carried a fence (else REDLOCK_FENCE is\n"
          "removed), and REDLOCK_PERMIT=I with --limit (else removed).  SIGINT, SIGTERM and SIGHUP are sent on to COMMAND's group; while\n"
          "redlockctl still waits for the lock they make it give up.  The lock is\n"
          "released when COMMAND exits (or redlockctl dies: COMMAND is then killed).\n"
          "\n"
          "Exit status: COMMAND's (128+N when signal N killed it); 1 or -E CODE: NAME\n"
          "held or -w ran out; 64: usage, or a request redlockd refused (bad name, ttl\n"
          "out of range); 69: redlockd unreachable, its TLS handshake or certificate\n"
          "refused, no quorum of masters, or another redlockd error; 71: fork failed; 75: the lock was lost while COMMAND ran;\n"
          "77: AUTH refused or needed, or break refused (not admin); 126/127: COMMAND\n"
          "not executable / not found; 128+N: signal N while waiting for the lock.\n"
          "status: 0 held, 1 free.  break: 0 a hold ended, 1 NAME was not held.\n"
          "check: 0 the grant is current, 1 it is stale.\n"
          "watch: 0 after SIGINT or SIGTERM, 69 when the connection ends.\n",
          out);
}

/* A usage error: the reason and a hint on stderr, exit 64. */
static void
ctl_usage_fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    ctl_vmsg("Try 'redlockctl -h' for more information.\n", fmt, ap);
    va_end(ap);
    exit(EX_USAGE);
}

/*
 * The edit distance between a and b, ASCII letters compared without
 * case: insertions, deletions, substitutions and swaps of two neighbours
 * each count 1 (optimal string alignment, Damerau 1964).  Words longer
 * than CTL_TYPO_MAX bytes are not compared: returns CTL_TYPO_MAX.
 */
#define CTL_TYPO_MAX 16
static int
ctl_typo_distance(const char *a, const char *b)
{
    int d[CTL_TYPO_MAX + 1][CTL_TYPO_MAX + 1];
    size_t la = strlen(a), lb = strlen(b), i, j;
    int cost, best;

    if (la >= CTL_TYPO_MAX || lb >= CTL_TYPO_MAX) {
        return CTL_TYPO_MAX;
    }
    for (i = 0; i <= la; i++) {
        d[i][0] = (int)i;
    }
    for (j = 0; j <= lb; j++) {
        d[0][j] = (int)j;
    }
    for (i = 1; i <= la; i++) {
        for (j = 1; j <= lb; j++) {
            cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) {
                best = d[i][j - 1] + 1;
            }
            if (d[i - 1][j - 1] + cost < best) {
                best = d[i - 1][j - 1] + cost;
            }
            if (i > 1 && j > 1
                && tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 2])
                && tolower((unsigned char)a[i - 2]) == tolower((unsigned char)b[j - 1])
                && d[i - 2][j - 2] + 1 < best) {
                best = d[i - 2][j - 2] + 1;
            }
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

/*
 * The subcommand that word, not one itself, looks like a typo of, or
 * NULL: the same word in other case, one edit away (two for a word of 5
 * letters or more: "stauts", "brake"), or a prefix of 3 letters or more
 * ("stat").  The closest wins; the table's order breaks ties.  The
 * caller asks only when the words after it could not run as a command
 * (none, or the first is not found), so that a lock named "batch" (one
 * edit from "watch") still runs its command.
 */
static const char *
ctl_typo_of(const char *word)
{
    const char *best = NULL;
    size_t i, len = strlen(word), n = sizeof(ctl_subcommands) / sizeof(ctl_subcommands[0]);
    int dist, best_dist = CTL_TYPO_MAX;

    for (i = 0; i < n; i++) {
        const char *sub = ctl_subcommands[i].word;

        dist = ctl_typo_distance(word, sub);
        if (len >= 3 && len < strlen(sub) && strncmp(word, sub, len) == 0) {
            dist = 1;
        }
        if (dist <= (len >= 5 ? 2 : 1) && dist < best_dist) {
            best = sub;
            best_dist = dist;
        }
    }
    return best;
}

/*
 * Whether execvp() could run file: a path with a '/' that is executable,
 * or an executable file of that name in a directory of $PATH (execvp's
 * default when unset).
 */
static bool
ctl_runnable(const char *file)
{
    const char *path = getenv("PATH"), *dir, *end;
    char buf[PATH_MAX];

    if (strchr(file, '/') != NULL) {
        return access(file, X_OK) == 0;
    }
    for (dir = path != NULL ? path : "/bin:/usr/bin"; ; dir = end + 1) {
        end = strchr(dir, ':');
        if (end == NULL) {
            end = dir + strlen(dir);
        }
        if (snprintf(buf, sizeof(buf), "%.*s/%s", end == dir ? 1 : (int)(end - dir),
                     end == dir ? "." : dir, file) < (int)sizeof(buf)
            && access(buf, X_OK) == 0) {
            return true;
        }
        if (*end == '\0') {
            return false;
        }
    }
}

/* A decimal integer 0..max, digits only.  0 or -1. */
static int
ctl_parse_int(const char *s, int64_t max, int64_t *out)
{
    int64_t v = 0;

    if (*s == '\0') {
        return -1;
    }
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9') {
            return -1;
        }
        v = v * 10 + (*s - '0');
        if (v > max) {
            return -1;
        }
    }
    *out = v;
    return 0;
}

/*
 * Seconds, "12", "0.5" or ".25", into milliseconds (digits after the
 * third decimal are dropped).  0 or -1.
 */
static int
ctl_parse_seconds(const char *s, int64_t *ms)
{
    int64_t whole = 0, frac = 0;
    int ndigits = 0, nfrac = 0;

    for (; *s >= '0' && *s <= '9'; s++, ndigits++) {
        whole = whole * 10 + (*s - '0');
        if (whole > CTL_SECONDS_MAX) {
            return -1;
        }
    }
    if (*s == '.') {
        for (s++; *s >= '0' && *s <= '9'; s++, nfrac++) {
            if (nfrac < 3) {
                frac = frac * 10 + (*s - '0');
            }
        }
    }
    if (*s != '\0' || ndigits + nfrac == 0) {
        return -1;
    }
    for (; nfrac < 3; nfrac++) {
        frac *= 10;
    }
    *ms = whole * 1000 + frac;
    return 0;
}

/* Milliseconds as seconds for people: "5 s", "1.5 s", "28.829 s". */
static void
ctl_seconds_text(int64_t ms, char *out, size_t size)
{
    char frac[8];
    size_t n;

    snprintf(frac, sizeof(frac), "%03lld", (long long)(ms % 1000));
    for (n = 3; n > 0 && frac[n - 1] == '0'; n--) {
        frac[n - 1] = '\0';
    }
    snprintf(out, size, "%lld%s%s s", (long long)(ms / 1000), n > 0 ? "." : "", frac);
}

/* ---- signals ---- */

/*
 * Block SIGCHLD, SIGINT, SIGTERM, SIGHUP (those not ignored at start) and
 * SIGTTOU, and read the first four from a signalfd.  SIGTTOU stays blocked
 * so that tcsetpgrp() from the background succeeds; it is not read.
 */
static void
ctl_signals_init(void)
{
    static const int acted[] = { SIGINT, SIGTERM, SIGHUP };
    struct sigaction sa;
    sigset_t set, block;
    size_t i;

    /* An inherited SIG_IGN for SIGCHLD would reap COMMAND behind our back. */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, &ctl_origchld);
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (i = 0; i < sizeof(acted) / sizeof(acted[0]); i++) {
        if (sigaction(acted[i], NULL, &sa) == 0 && sa.sa_handler == SIG_IGN) {
            continue;
        }
        sigaddset(&set, acted[i]);
    }
    block = set;
    sigaddset(&block, SIGTTOU);
    if (sigprocmask(SIG_BLOCK, &block, &ctl_origmask) != 0) {
        ctl_fail(EX_OSERR, "sigprocmask: %s", strerror(errno));
    }
    ctl_sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (ctl_sigfd < 0) {
        ctl_fail(EX_OSERR, "signalfd: %s", strerror(errno));
    }
}

/* Read one signal from the signalfd: its number, or 0 when none. */
static int
ctl_signal_read(void)
{
    struct signalfd_siginfo si;

    if (read(ctl_sigfd, &si, sizeof(si)) != (ssize_t)sizeof(si)) {
        return 0;
    }
    return (int)si.ssi_signo;
}

/* ---- the connection ---- */

/*
 * The next event: a signal (first, so that COMMAND's exit is seen before
 * a line that arrived at the same time), a line from the daemon (pushed
 * lines included), the connection closing, or the deadline (-1: none).
 * The signalfd is the client's wakeup descriptor (ctl_open()).
 */
static enum ctl_event
ctl_next(struct ctl_conn *c, int64_t deadline, int *signo)
{
    for (;;) {
        switch (client_read_line(&c->cl, deadline)) {
        case CLIENT_LINE:
            return CTL_EV_LINE;
        case CLIENT_INTR:
            *signo = ctl_signal_read();
            if (*signo != 0) {
                return CTL_EV_SIGNAL;
            }
            continue;
        case CLIENT_TIMEOUT:
            return CTL_EV_TIMEOUT;
        case CLIENT_EOF:
        case CLIENT_ERROR:
            break;
        }
        if (c->cl.fd < 0) {
            ctl_fail(EX_OSERR, "%s", c->cl.err);
        }
        client_close(&c->cl);
        return CTL_EV_CLOSED;
    }
}

/*
 * Read the reply to a request: the next line that is not a pushed one.
 * A signal we act on ends redlockctl (128 + N); a closed connection or the
 * deadline ends it with 69.  Returns conn->line.
 */
static const char *
ctl_reply(struct ctl_conn *c, const char *what, int64_t deadline)
{
    int sig = 0;

    for (;;) {
        switch (ctl_next(c, deadline, &sig)) {
        case CTL_EV_LINE:
            if (client_is_push(c->cl.line)) {
                continue;
            }
            return c->cl.line;
        case CTL_EV_SIGNAL:
            if (sig != SIGCHLD) {
                exit(128 + sig);
            }
            continue;
        case CTL_EV_TIMEOUT:
            ctl_fail(EX_UNAVAILABLE, "redlockd at %s did not answer %s in time", c->where,
                     what);
        case CTL_EV_CLOSED:
            ctl_fail(EX_UNAVAILABLE, "%s at %s: %s", what, c->where, c->cl.err);
        }
    }
}

/* Send a request line, or end redlockctl with 69. */
static void
ctl_request(struct ctl_conn *c, const char *line)
{
    if (client_send(&c->cl, line, client_now_ms() + CTL_REPLY_MS) != 0) {
        ctl_fail(EX_UNAVAILABLE, "cannot send to redlockd at %s: %s", c->where, c->cl.err);
    }
}

/*
 * An ERR reply to a request: 64 for ERR PROTO, 77 for ERR AUTH, 69 for
 * anything else.  Ends redlockctl.
 */
static void
ctl_fail_err(const struct ctl_opts *o, const struct ctl_conn *c, const char *what,
             const char *line)
{
    if (client_is_err(line, "PROTO") || client_is_err(line, "KIND")) {
        /* A bad request, or a kind (-s, --limit) that the name's other holders do not use. */
        ctl_fail(EX_USAGE, "redlockd refused %s: %s", what, client_err_text(line));
    }
    if (client_is_err(line, "AUTH")) {
        ctl_fail(EX_NOPERM, "redlockd at %s: %s%s", c->where, client_err_text(line),
                 o->password != NULL ? ""
                 : o->mode == CTL_MODE_BREAK ? " (set REDLOCKD_ADMIN_PASSWORD)"
                 : " (set REDLOCKD_PASSWORD)");
    }
    if (!client_is_status(line, "ERR") || line[3] == '\0') {
        ctl_fail(EX_UNAVAILABLE, "unexpected answer to %s from %s: %s", what, c->where, line);
    }
    ctl_fail(EX_UNAVAILABLE, "%s: %s", what, line + 4);
}

/*
 * Connect to the daemon chosen by the options, then AUTH when a password
 * is set.  Ends redlockctl with 69 (or 77) when that fails.
 */
/*
 * Connect c to target (a Unix socket path, or HOST:PORT when tcp) before
 * deadline, then start TLS when tls is not NULL (tcp only).  A signal we
 * act on ends redlockctl (128 + N); after any other, the connect is
 * tried again.  0, or -1 with c->cl.err ("HOST:PORT: TLS handshake: ...").
 */
static int
ctl_connect(struct ctl_conn *c, const char *target, bool tcp,
            const struct client_tls_opts *tls, int64_t deadline)
{
    char host[256], port[8], err[CLIENT_ERR_MAX];
    int rc, sig, saved;

    for (;;) {
        rc = tcp ? client_connect_tcp(&c->cl, target, deadline)
                 : client_connect_unix(&c->cl, target, deadline);
        if (rc == 0 && tcp && tls != NULL
            && client_split_addr(target, host, sizeof(host), port, sizeof(port)) == 0) {
            rc = client_start_tls(&c->cl, host, tls, deadline);
            if (rc != 0) {
                saved = errno;
                snprintf(err, sizeof(err), "%s", c->cl.err);
                /* "HOST:PORT: " first, as the errors of connecting have it (cut if need be). */
                if (snprintf(c->cl.err, sizeof(c->cl.err), "%s: %s", target, err) < 0) {
                    snprintf(c->cl.err, sizeof(c->cl.err), "%s: TLS failed", target);
                }
                errno = saved;
            }
        }
        if (rc == 0 || errno != EINTR) {
            return rc;
        }
        sig = ctl_signal_read();
        if (sig != 0 && sig != SIGCHLD) {
            exit(128 + sig);
        }
    }
}

static void
ctl_open(const struct ctl_opts *o, struct ctl_conn *c)
{
    int64_t deadline = client_now_ms() + CTL_CONNECT_MS;
    char err1[CLIENT_ERR_MAX] = "", auth[PROTO_WORD_MAX + 8];
    const char *reply;
    int rc = -1;

    client_init(&c->cl, -1, 0);
    c->cl.wakeup = ctl_sigfd;
    if (o->unix_path != NULL) {
        snprintf(c->where, sizeof(c->where), "%s", o->unix_path);
        rc = ctl_connect(c, o->unix_path, false, NULL, deadline);
        if (rc != 0) {
            snprintf(err1, sizeof(err1), "%s", c->cl.err);
        }
    }
    if (rc != 0 && o->addr != NULL && (o->unix_path == NULL || o->fallback)) {
        snprintf(c->where, sizeof(c->where), "%s", o->addr);
        if (ctl_connect(c, o->addr, true, o->tls ? &o->tls_opts : NULL, deadline) != 0) {
            ctl_fail(EX_UNAVAILABLE, "cannot connect to redlockd: %s%s%s", err1,
                     err1[0] != '\0' ? "; " : "", c->cl.err);
        }
        rc = 0;
    }
    if (rc != 0) {
        ctl_fail(EX_UNAVAILABLE, "cannot connect to redlockd: %s", err1);
    }
    if (o->password == NULL) {
        return;
    }
    snprintf(auth, sizeof(auth), "AUTH %s", o->password);
    ctl_request(c, auth);
    reply = ctl_reply(c, "AUTH", client_now_ms() + CTL_CONNECT_MS);
    if (strcmp(reply, "OK") == 0
        || strncmp(reply, "ERR AUTH no password is configured", 34) == 0) {
        return;
    }
    ctl_fail_err(o, c, "AUTH", reply);
}

/* ---- the command line ---- */

/*
 * The TLS options once getopt is done: REDLOCKD_TLS, what goes together,
 * the files readable.  A conflict is a usage error.
 */
static void
ctl_parse_tls(struct ctl_opts *o)
{
    const char *env = getenv("REDLOCKD_TLS"), *files[3], *names[3];
    size_t i;

    if (env != NULL && env[0] != '\0' && strcmp(env, "0") != 0) {
        if (strcmp(env, "1") != 0) {
            ctl_usage_fail("REDLOCKD_TLS must be 1 (TLS) or 0, not '%s'", env);
        }
        if (!o->tls) {
            o->tls_why = "REDLOCKD_TLS=1";
        }
        o->tls = true;
    }
    if (!o->tls) {
        return;
    }
    if (o->unix_path != NULL) {
        ctl_usage_fail("%s: TLS is for -H HOST:PORT, not the Unix socket of -S", o->tls_why);
    }
    if ((o->tls_opts.cert_file == NULL) != (o->tls_opts.key_file == NULL)) {
        ctl_usage_fail("--cert and --key go together");
    }
    files[0] = o->tls_opts.ca_file;
    names[0] = "--cacert";
    files[1] = o->tls_opts.cert_file;
    names[1] = "--cert";
    files[2] = o->tls_opts.key_file;
    names[2] = "--key";
    for (i = 0; i < 3; i++) {
        if (files[i] != NULL && access(files[i], R_OK) != 0) {
            ctl_usage_fail("%s: %s: %s", names[i], files[i], strerror(errno));
        }
    }
}

/*
 * -N NAME: one more name of the set, checked as a lock name, at most
 * PROTO_SET_MAX of them, none twice; ctl_set_text keeps them joined by
 * spaces.  A bad one is a usage error.
 */
static void
ctl_parse_set_name(struct ctl_opts *o, const char *name)
{
    size_t i, len;

    if (!client_word_ok(name, PROTO_NAME_MAX)) {
        ctl_usage_fail("-N: bad lock name '%s' (1..%d printable ASCII characters, no spaces)",
                       name, PROTO_NAME_MAX);
    }
    if (o->nset == PROTO_SET_MAX) {
        ctl_usage_fail("-N: more than %d names (a set takes at most %d)", PROTO_SET_MAX,
                       PROTO_SET_MAX);
    }
    for (i = 0; i < o->nset; i++) {
        if (strcmp(ctl_set[i], name) == 0) {
            ctl_usage_fail("-N: lock name '%s' given twice", name);
        }
    }
    ctl_set[o->nset++] = name;
    len = strlen(ctl_set_text);
    snprintf(ctl_set_text + len, sizeof(ctl_set_text) - len, "%s%s", len > 0 ? " " : "", name);
}

/*
 * check's words after NAME (n of them): --fence F [--permit I], or --token
 * T, each value as the protocol takes it (the daemon checks the rest).
 */
static void
ctl_parse_check(struct ctl_opts *o, char **words, int n)
{
    int64_t v;
    int i;

    for (i = 0; i + 1 < n; i += 2) {
        if (strcmp(words[i], "--fence") == 0 && o->check_fence == NULL) {
            if (ctl_parse_int(words[i + 1], PROTO_NUMBER_MAX, &v) != 0 || v == 0) {
                ctl_usage_fail("check: bad fence '%s' (a number, at least 1)", words[i + 1]);
            }
            o->check_fence = words[i + 1];
        } else if (strcmp(words[i], "--permit") == 0 && o->check_permit == NULL) {
            if (ctl_parse_int(words[i + 1], PROTO_PERMIT_MAX, &v) != 0) {
                ctl_usage_fail("check: bad permit '%s' (0..%d)", words[i + 1], PROTO_PERMIT_MAX);
            }
            o->check_permit = words[i + 1];
        } else if (strcmp(words[i], "--token") == 0 && o->check_token == NULL) {
            if (!client_word_ok(words[i + 1], PROTO_TOKEN_LEN)) {
                ctl_usage_fail("check: bad token '%s'", words[i + 1]);
            }
            o->check_token = words[i + 1];
        } else {
            break;
        }
    }
    if (i != n || (o->check_fence == NULL) == (o->check_token == NULL)
        || (o->check_permit != NULL && o->check_fence == NULL)) {
        ctl_usage_fail("usage: redlockctl check NAME --fence F [--permit I] | --token T");
    }
}

static void
ctl_parse(int argc, char **argv, struct ctl_opts *o)
{
    static const struct option longopts[] = {
        { "fence",   no_argument, NULL, 'F' },
        { "shared",  no_argument, NULL, 's' },
        { "limit",   required_argument, NULL, 'L' },
        { "label",   required_argument, NULL, 'B' },
        { "delay",   required_argument, NULL, 'D' },
        { "name",    required_argument, NULL, 'N' },
        { "tls",     no_argument, NULL, 'T' },
        { "cacert",  required_argument, NULL, 'A' },
        { "cert",    required_argument, NULL, 'C' },
        { "key",     required_argument, NULL, 'K' },
        { "help",    no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL,      0,           NULL, 0 }
    };
    const char *last_arg = NULL, *env, *lock_opt = NULL;
    char **ops;
    bool dashdash;
    size_t sub, nsubs = sizeof(ctl_subcommands) / sizeof(ctl_subcommands[0]);
    int64_t v;
    int ch, nops;

    memset(o, 0, sizeof(*o));
    o->wait_ms = -1;
    o->delay_ms = -1;
    o->conflict_code = CTL_EXIT_CONFLICT;
    o->grace_ms = CTL_GRACE_MS;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "+nw:t:E:k:c:S:H:N:svhV", longopts, NULL)) != -1) {
        if (optarg != NULL) {
            last_arg = optarg;
        }
        switch (ch) {
        case 'n':
            o->nowait = true;
            lock_opt = "-n";
            break;
        case 'w':
            if (ctl_parse_seconds(optarg, &o->wait_ms) != 0) {
                ctl_usage_fail("-w: bad number of seconds '%s'", optarg);
            }
            lock_opt = "-w";
            break;
        case 't':
            if (ctl_parse_int(optarg, PROTO_NUMBER_MAX, &o->ttl_ms) != 0 || o->ttl_ms == 0) {
                ctl_usage_fail("-t: bad ttl '%s' (milliseconds, at least 1)", optarg);
            }
            lock_opt = "-t";
            break;
        case 'E':
            if (ctl_parse_int(optarg, 255, &v) != 0) {
                ctl_usage_fail("-E: bad exit code '%s' (0..255)", optarg);
            }
            o->conflict_code = (int)v;
            lock_opt = "-E";
            break;
        case 'k':
            if (ctl_parse_seconds(optarg, &o->grace_ms) != 0) {
                ctl_usage_fail("-k: bad number of seconds '%s'", optarg);
            }
            lock_opt = "-k";
            break;
        case 'c':
            o->shell_cmd = optarg;
            lock_opt = "-c";
            break;
        case 'N':
            ctl_parse_set_name(o, optarg);
            lock_opt = "-N";
            break;
        case 'S':
            o->unix_path = optarg;
            break;
        case 'H':
            o->addr = optarg;
            break;
        case 'F':
            o->fence = true;
            lock_opt = "--fence";
            break;
        case 's':
            o->shared = true;
            lock_opt = "-s";
            break;
        case 'L':
            if (ctl_parse_int(optarg, PROTO_NUMBER_MAX, &o->limit) != 0 || o->limit == 0) {
                ctl_usage_fail("--limit: bad number of holders '%s' (at least 1)", optarg);
            }
            lock_opt = "--limit";
            break;
        case 'B':
            if (!client_word_ok(optarg, CTL_LABEL_MAX)) {
                ctl_usage_fail("--label: bad label '%s' (1..%d printable ASCII characters, "
                               "no spaces)", optarg, CTL_LABEL_MAX);
            }
            o->label = optarg;
            lock_opt = "--label";
            break;
        case 'D':
            if (ctl_parse_int(optarg, PROTO_NUMBER_MAX, &o->delay_ms) != 0) {
                ctl_usage_fail("--delay: bad delay '%s' (milliseconds, 0 for none)", optarg);
            }
            lock_opt = "--delay";
            break;
        case 'T':
            o->tls = true;
            o->tls_why = "--tls";
            break;
        case 'A':
            o->tls_opts.ca_file = optarg;
            o->tls = true;
            o->tls_why = "--cacert";
            break;
        case 'C':
            o->tls_opts.cert_file = optarg;
            o->tls = true;
            o->tls_why = "--cert";
            break;
        case 'K':
            o->tls_opts.key_file = optarg;
            o->tls = true;
            o->tls_why = "--key";
            break;
        case 'v':
            o->verbose = true;
            break;
        case 'h':
            ctl_usage(stdout);
            exit(0);
        case 'V':
            printf("redlockctl %s\n", REDLOCKD_VERSION);
            exit(0);
        default:
            if (optopt != 0 && strchr("LBACKD", optopt) != NULL) {
                ctl_usage_fail("option --%s needs a value",
                               optopt == 'L' ? "limit" : optopt == 'B' ? "label"
                               : optopt == 'D' ? "delay"
                               : optopt == 'A' ? "cacert" : optopt == 'C' ? "cert" : "key");
            }
            if (optopt != 0 && strchr("wtEkcSHN", optopt) != NULL) {
                ctl_usage_fail("option -%c needs a value", optopt);
            } else if (optopt != 0) {
                ctl_usage_fail("unknown option -%c", optopt);
            }
            ctl_usage_fail("unknown option '%s'", argv[optind - 1]);
        }
    }
    ops = argv + optind;
    nops = argc - optind;
    /* "--" ended the options (and was not the value of one). */
    dashdash = optind > 1 && strcmp(argv[optind - 1], "--") == 0 && argv[optind - 1] != last_arg;

    /* Where the daemon is. */
    if (o->unix_path != NULL && o->addr != NULL) {
        ctl_usage_fail("-S and -H exclude each other");
    }
    ctl_parse_tls(o);
    if (o->tls && o->addr == NULL) {
        /* TLS is for a TCP address: $REDLOCKD_SOCKET and the default socket are not tried. */
        env = getenv("REDLOCKD_ADDR");
        o->addr = env != NULL && env[0] != '\0' ? env : CTL_DEFAULT_ADDR;
    }
    if (o->unix_path == NULL && o->addr == NULL) {
        if ((env = getenv("REDLOCKD_SOCKET")) != NULL && env[0] != '\0') {
            o->unix_path = env;
        } else if ((env = getenv("REDLOCKD_ADDR")) != NULL && env[0] != '\0') {
            o->addr = env;
        } else {
            o->unix_path = CTL_DEFAULT_SOCKET;
            o->addr = CTL_DEFAULT_ADDR;
            o->fallback = true;
        }
    }
    if (o->unix_path == NULL) {
        char host[256], port[8];

        if (client_split_addr(o->addr, host, sizeof(host), port, sizeof(port)) != 0) {
            ctl_usage_fail("bad redlockd address '%s' (HOST:PORT or [IPv6]:PORT)", o->addr);
        }
    }

    if (o->shared && o->limit > 0) {
        ctl_usage_fail("-s and --limit exclude each other (a name is one kind)");
    }
    if (o->delay_ms >= 0 && (o->shared || o->limit > 0)) {
        ctl_usage_fail("--delay is for an exclusive lock (not with %s)",
                       o->shared ? "-s" : "--limit");
    }
    if (o->nset > 1 && (o->shared || o->limit > 0)) {
        ctl_usage_fail("%s takes one name: a set of names (-N) is held exclusively",
                       o->shared ? "-s" : "--limit");
    }
    /* Subcommands. */
    if (nops == 0 && o->nset > 0 && o->shell_cmd == NULL) {
        ctl_usage_fail("no COMMAND to run under '%s'", ctl_set_text);
    }
    if (nops == 0 && o->nset == 0) {
        ctl_usage_fail("no lock NAME");
    }
    for (sub = 0; nops > 0 && !dashdash && sub < nsubs; sub++) {
        if (strcmp(ops[0], ctl_subcommands[sub].word) == 0) {
            break;
        }
    }
    if (nops > 0 && !dashdash && sub < nsubs) {
        if (lock_opt != NULL) {
            ctl_usage_fail("%s is not used with '%s'", lock_opt, ops[0]);
        }
        if (nops - 1 < ctl_subcommands[sub].min_args
            || nops - 1 > ctl_subcommands[sub].max_args) {
            if (ctl_subcommands[sub].max_args == 0) {
                ctl_usage_fail("'%s' takes no arguments", ops[0]);
            }
            ctl_usage_fail("usage: redlockctl %s", ctl_subcommands[sub].usage);
        }
        o->mode = ctl_subcommands[sub].mode;
        o->name = nops > 1 ? ops[1] : NULL;
        if (o->mode == CTL_MODE_CHECK) {
            ctl_parse_check(o, ops + 2, nops - 2);
        }
    } else {
        const char *typo = NULL, *cmd;
        bool runs;

        /*
         * "redlockctl staus report": a typo of status, not a lock named
         * staus for a command `report` that does not exist.
         */
        if (!dashdash && o->nset == 0) {
            cmd = nops > 1 && strcmp(ops[1], "--") == 0 ? (nops > 2 ? ops[2] : NULL)
                  : nops > 1 ? ops[1] : NULL;
            runs = o->shell_cmd != NULL || (nops > 1 && strcmp(ops[1], "-c") == 0)
                   || (cmd != NULL && ctl_runnable(cmd));
            typo = runs ? NULL : ctl_typo_of(ops[0]);
        }

        if (typo != NULL) {
            ctl_usage_fail("unknown subcommand '%s'; did you mean '%s'? (to lock a name "
                           "spelled like a subcommand, put -- before it: redlockctl [options] "
                           "-- %s COMMAND)", ops[0], typo, ops[0]);
        }
        o->mode = CTL_MODE_LOCK;
        if (o->nset > 0) {
            o->name = ctl_set_text;     /* the names came with -N: COMMAND follows */
        } else {
            o->name = ops[0];
            ops++;
            nops--;
        }
        if (nops > 0 && strcmp(ops[0], "-c") == 0) {
            if (o->shell_cmd != NULL || nops != 2) {
                ctl_usage_fail("-c takes exactly one argument, the whole command");
            }
            o->shell_cmd = ops[1];
        } else if (o->shell_cmd != NULL) {
            if (nops > 0) {
                ctl_usage_fail("-c takes exactly one argument, the whole command");
            }
        } else {
            if (nops > 0 && strcmp(ops[0], "--") == 0) {
                ops++;
                nops--;
            }
            if (nops == 0) {
                ctl_usage_fail("no COMMAND to run under '%s'", o->name);
            }
            o->argv = ops;
        }
        if (o->nowait && o->wait_ms > 0) {
            ctl_usage_fail("-n and -w exclude each other");
        }
        if (o->wait_ms == 0) {
            o->nowait = true;
        }
    }
    if (o->name != NULL && o->nset == 0 && !client_word_ok(o->name, PROTO_NAME_MAX)) {
        ctl_usage_fail("bad %s (1..%d printable ASCII characters, no spaces)",
                       o->mode == CTL_MODE_LIST ? "prefix" : "lock name", PROTO_NAME_MAX);
    }

    /* The password: an admin's for break, when there is one. */
    o->password_var = "REDLOCKD_PASSWORD";
    if (o->mode == CTL_MODE_BREAK && (env = getenv("REDLOCKD_ADMIN_PASSWORD")) != NULL
        && env[0] != '\0') {
        o->password_var = "REDLOCKD_ADMIN_PASSWORD";
    }
    if ((env = getenv(o->password_var)) != NULL && env[0] != '\0') {
        if (!client_word_ok(env, PROTO_WORD_MAX)) {
            ctl_usage_fail("%s must be 1..%d printable characters without spaces",
                           o->password_var, PROTO_WORD_MAX);
        }
        snprintf(ctl_password, sizeof(ctl_password), "%s", env);
        o->password = ctl_password;
    }
    ctl_scrub_secret("REDLOCKD_PASSWORD");
    ctl_scrub_secret("REDLOCKD_ADMIN_PASSWORD");
    if (o->password != NULL) {
        /*
         * Holding a password: no other process of the user may read this
         * one's memory (/proc/<pid>/mem, ptrace) or dump it; COMMAND,
         * once exec'd, is an ordinary process again.
         */
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

/* ---- subcommands ---- */

static int
ctl_cmd_ping(struct ctl_conn *c)
{
    char version[128] = "";
    const char *reply;
    int64_t t0, t1;

    t0 = client_now_ms();
    ctl_request(c, "PING");
    reply = ctl_reply(c, "PING", t0 + CTL_REPLY_MS);
    t1 = client_now_ms();
    if (strcmp(reply, "PONG") != 0) {
        ctl_fail(strncmp(reply, "ERR AUTH ", 9) == 0 ? EX_NOPERM : EX_UNAVAILABLE,
                 "PING at %s answered: %s", c->where, reply);
    }
    ctl_request(c, "VERSION");
    reply = ctl_reply(c, "VERSION", client_now_ms() + CTL_REPLY_MS);
    if (strncmp(reply, "VERSION ", 8) == 0) {
        snprintf(version, sizeof(version), " %s", reply + 8);
    }
    printf("PONG from redlockd%s at %s in %lld ms\n", version, c->where, (long long)(t1 - t0));
    return 0;
}


/*
 * status NAME: prints what the masters say; 0 when held, 1 when free.
 * The lease's end is worded by who renews it: STATUS's renewer=watchdog
 * says a session of this daemon holds the name (the daemon's own table,
 * one lookup), which the daemon renews itself; anything else (a
 * lease-mode holder, a session of another daemon, a Redlock library, or
 * a daemon too old to send the field) makes no claim.
 */
static int
ctl_cmd_status(const struct ctl_opts *o, struct ctl_conn *c)
{
    char req[PROTO_NAME_MAX + 16], ttl[32], fence[32], left[48];
    char kind[16], holders[24], limit[16], label[PROTO_LABEL_MAX + 1], waiters[24];
    char renewer[16], reply[CLIENT_LINE_MAX + 1], delayed[48];
    int64_t ms;

    snprintf(req, sizeof(req), "STATUS %s", o->name);
    ctl_request(c, req);
    /* A copy of the reply, read field by field below. */
    snprintf(reply, sizeof(reply), "%s", ctl_reply(c, "STATUS", client_now_ms() + CTL_REPLY_MS));
    if (!client_field(reply, "waiters", waiters, sizeof(waiters))) {
        waiters[0] = '\0';
    }
    if (client_is_reply(reply, "FREE", o->name)) {
        delayed[0] = '\0';
        if (client_field(reply, "delayed", ttl, sizeof(ttl))
            && ctl_parse_int(ttl, PROTO_NUMBER_MAX, &ms) == 0) {
            snprintf(delayed, sizeof(delayed), ", kept by a lock-delay for %lld ms more",
                     (long long)ms);
        }
        printf("%s: free%s%s%s%s\n", o->name, delayed, waiters[0] != '\0' ? ", " : "", waiters,
               waiters[0] != '\0' ? " waiting through this redlockd" : "");
        return 1;
    }
    if (!client_is_reply(reply, "HELD", o->name)) {
        ctl_fail_err(o, c, req, reply);
    }
    printf("%s: held", o->name);
    if (client_field(reply, "label", label, sizeof(label))) {
        printf(" by %s", label);
        if (client_field(reply, "held_ms", ttl, sizeof(ttl))
            && ctl_parse_int(ttl, PROTO_NUMBER_MAX, &ms) == 0) {
            ctl_seconds_text(ms, left, sizeof(left));
            printf(" for %s", left);
        }
    }
    if (client_field(reply, "ttl", ttl, sizeof(ttl))) {
        if (strcmp(ttl, "-1") == 0) {
            printf(", without expiry (a key without a TTL: it may never be freed)");
        } else if (ctl_parse_int(ttl, PROTO_NUMBER_MAX, &ms) == 0) {
            ctl_seconds_text(ms, left, sizeof(left));
            if (client_field(reply, "renewer", renewer, sizeof(renewer))
                && strcmp(renewer, "watchdog") == 0) {
                printf(", renewed by this redlockd while its holder's connection is open "
                       "(lease ends in %s if not renewed)", left);
            } else {
                printf(", lease ends in %s unless renewed", left);
            }
        }
    }
    if (client_field(reply, "fence", fence, sizeof(fence))) {
        printf(", fence %s", fence);
    }
    if (client_field(reply, "kind", kind, sizeof(kind)) && strcmp(kind, "exclusive") != 0
        && client_field(reply, "holders", holders, sizeof(holders))) {
        printf(", %s by %s holder%s", kind, holders, strcmp(holders, "1") == 0 ? "" : "s");
        if (client_field(reply, "limit", limit, sizeof(limit))) {
            printf(" of %s", limit);
        }
    }
    if (waiters[0] != '\0') {
        printf(", %s waiting through this redlockd", waiters);
    }
    printf("\n");
    return 0;
}

/*
 * list [PREFIX]: LIST's lines as they come, without the END; 0.  An empty
 * list says so on stderr (stdout stays empty for scripts).
 */
static int
ctl_cmd_list(const struct ctl_opts *o, struct ctl_conn *c)
{
    int64_t deadline = client_now_ms() + CTL_REPLY_MS;
    char req[PROTO_NAME_MAX + 8];
    const char *line;
    bool any = false;

    if (o->name != NULL) {
        snprintf(req, sizeof(req), "LIST %s", o->name);
    } else {
        snprintf(req, sizeof(req), "LIST");
    }
    ctl_request(c, req);
    for (;;) {
        line = ctl_reply(c, "LIST", deadline);
        if (strcmp(line, "END") == 0) {
            if (!any) {
                fprintf(stderr, "redlockctl: nothing%s%s%s is held or waited for through "
                        "this redlockd\n", o->name != NULL ? " under '" : "",
                        o->name != NULL ? o->name : "", o->name != NULL ? "'" : "");
            }
            return 0;
        }
        if (client_is_status(line, "ERR")) {
            ctl_fail_err(o, c, req, line);
        }
        printf("%s\n", line);
        any = true;
        /* A long list: each line is due CTL_REPLY_MS after the one before. */
        deadline = client_now_ms() + CTL_REPLY_MS;
    }
}

/*
 * watch NAME: WATCH, then every pushed "! HELD NAME ..." and "! FREE
 * NAME" printed without its "! ", a line at a time, until SIGINT or
 * SIGTERM (0); the end of the connection is 69.  The daemon answers OK
 * before it pushes anything about NAME.
 */
static int
ctl_cmd_watch(const struct ctl_opts *o, struct ctl_conn *c)
{
    char req[PROTO_NAME_MAX + 16];
    const char *reply, *line = c->cl.line;
    int sig = 0;

    snprintf(req, sizeof(req), "WATCH %s", o->name);
    ctl_request(c, req);
    reply = ctl_reply(c, req, client_now_ms() + CTL_REPLY_MS);
    if (!client_is_reply(reply, "OK", o->name)) {
        ctl_fail_err(o, c, req, reply);
    }
    for (;;) {
        switch (ctl_next(c, -1, &sig)) {
        case CTL_EV_LINE:
            if (strncmp(line, "! ", 2) == 0 && (client_is_reply(line + 2, "HELD", o->name)
                                                || client_is_reply(line + 2, "FREE", o->name))) {
                printf("%s\n", line + 2);
                fflush(stdout);
            }
            break;
        case CTL_EV_SIGNAL:
            if (sig == SIGINT || sig == SIGTERM) {
                return 0;
            }
            if (sig != SIGCHLD) {
                exit(128 + sig);
            }
            break;
        case CTL_EV_TIMEOUT:
        case CTL_EV_CLOSED:
            ctl_fail(EX_UNAVAILABLE, "watching '%s': the connection to redlockd at %s ended: %s",
                     o->name, c->where, c->cl.err);
        }
    }
}

/*
 * break NAME: BREAK; prints "broken NAME: holders=N fence=F" (the
 * reply's fields) and returns 0.  When no master had a holder to delete
 * (holders=0) it prints "NAME: was not held; its fence is now F" and
 * returns 1, as status does for a free name: the daemon raised the fence
 * all the same (proto/PROTOCOL.md, BREAK).  A session that is not admin
 * is 77.
 */
static int
ctl_cmd_break(const struct ctl_opts *o, struct ctl_conn *c)
{
    char req[PROTO_NAME_MAX + 16], fence[32];
    const char *reply;
    int64_t holders;

    snprintf(req, sizeof(req), "BREAK %s", o->name);
    ctl_request(c, req);
    reply = ctl_reply(c, req, client_now_ms() + CTL_REPLY_MS);
    if (client_is_reply(reply, "OK", o->name)) {
        if (client_field_int(reply, "holders", &holders) && holders == 0
            && client_field(reply, "fence", fence, sizeof(fence))) {
            printf("%s: was not held; its fence is now %s\n", o->name, fence);
            return 1;
        }
        printf("broken %s:%s\n", o->name, reply + strlen("OK ") + strlen(o->name));
        return 0;
    }
    if (client_is_err(reply, "DENIED")) {
        /* The daemon's text says what the admin right is. */
        ctl_fail(EX_NOPERM, "redlockd at %s refused %s: %s", c->where, req,
                 client_err_text(reply));
    }
    ctl_fail_err(o, c, req, reply);
}

/* Free the STAT lines kept by ctl_cmd_stats(). */
static void
ctl_stats_free(struct ctl_stat *st, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        free(st[i].name);
    }
    free(st);
}

/* Print a padded cell of the masters table. */
static void
ctl_cell(const char *text, size_t width, bool last)
{
    if (last) {
        printf("%s\n", text);
    } else {
        printf("%-*s  ", (int)width, text);
    }
}

/*
 * stats: the daemon's counters, aligned, and the master.<i>.<field> lines
 * as a table with one row per master and one column per field (in the
 * order the daemon sends them, so that new fields show up by themselves).
 */
static int
ctl_cmd_stats(const struct ctl_opts *o, struct ctl_conn *c)
{
    static const char *cell[CTL_MASTERS_MAX][CTL_FIELDS_MAX];
    const char *fields[CTL_FIELDS_MAX], *reply, *sp;
    size_t n = 0, nfields = 0, nmasters = 0, width = 0, colw[CTL_FIELDS_MAX], i, f, len;
    bool in_table[CTL_STATS_MAX];
    struct ctl_stat *st;
    int64_t deadline = client_now_ms() + CTL_REPLY_MS, m;
    char idx[8], num[24];

    st = calloc(CTL_STATS_MAX, sizeof(*st));
    if (st == NULL) {
        ctl_fail(EX_OSERR, "out of memory");
    }
    ctl_request(c, "STATS");
    for (;;) {
        reply = ctl_reply(c, "STATS", deadline);
        if (strcmp(reply, "END") == 0) {
            break;
        }
        if (strncmp(reply, "STAT ", 5) != 0) {
            ctl_fail_err(o, c, "STATS", reply);
        }
        if (n == CTL_STATS_MAX) {
            continue;
        }
        len = strlen(reply + 5);
        st[n].name = malloc(len + 2);
        if (st[n].name == NULL) {
            ctl_fail(EX_OSERR, "out of memory");
        }
        memcpy(st[n].name, reply + 5, len + 1);
        sp = strchr(st[n].name, ' ');
        if (sp != NULL) {
            st[n].name[sp - st[n].name] = '\0';
            st[n].value = st[n].name + (sp - st[n].name) + 1;
        } else {
            st[n].value = st[n].name + len + 1;
            st[n].value[0] = '\0';
        }
        n++;
    }

    /* master.<i>.<field> into the table. */
    memset(cell, 0, sizeof(cell));
    for (i = 0; i < n; i++) {
        const char *dot, *field;

        in_table[i] = false;
        if (strncmp(st[i].name, "master.", 7) != 0
            || (dot = strchr(st[i].name + 7, '.')) == NULL
            || (size_t)(dot - st[i].name - 7) >= sizeof(idx) || dot[1] == '\0') {
            continue;
        }
        memcpy(idx, st[i].name + 7, (size_t)(dot - st[i].name - 7));
        idx[dot - st[i].name - 7] = '\0';
        field = dot + 1;
        if (ctl_parse_int(idx, CTL_MASTERS_MAX - 1, &m) != 0) {
            continue;
        }
        for (f = 0; f < nfields && strcmp(fields[f], field) != 0; f++) {
            continue;
        }
        if (f == nfields) {
            if (nfields == CTL_FIELDS_MAX) {
                continue;
            }
            fields[nfields++] = field;
        }
        cell[m][f] = st[i].value;
        if ((size_t)m + 1 > nmasters) {
            nmasters = (size_t)m + 1;
        }
        in_table[i] = true;
    }

    printf("redlockd at %s\n", c->where);
    for (i = 0; i < n; i++) {
        if (!in_table[i] && strlen(st[i].name) > width) {
            width = strlen(st[i].name);
        }
    }
    for (i = 0; i < n; i++) {
        if (!in_table[i]) {
            printf("  %-*s  %s\n", (int)width, st[i].name, st[i].value);
        }
    }
    if (nmasters > 0) {
        printf("masters:\n");
        for (f = 0; f < nfields; f++) {
            colw[f] = strlen(fields[f]);
            for (i = 0; i < nmasters; i++) {
                len = cell[i][f] != NULL ? strlen(cell[i][f]) : 1;
                colw[f] = len > colw[f] ? len : colw[f];
            }
        }
        printf("  %-3s ", "#");
        for (f = 0; f < nfields; f++) {
            ctl_cell(fields[f], colw[f], f + 1 == nfields);
        }
        for (i = 0; i < nmasters; i++) {
            snprintf(num, sizeof(num), "%zu", i);
            printf("  %-3s ", num);
            for (f = 0; f < nfields; f++) {
                ctl_cell(cell[i][f] != NULL ? cell[i][f] : "-", colw[f], f + 1 == nfields);
            }
        }
    }
    ctl_stats_free(st, n);
    return 0;
}

/* ---- the lock and the command ---- */

/*
 * Keep in out (size bytes) the digits of field key of reply; "" when
 * absent or not digits.  With lists, numbers joined by commas (a set's
 * fence=F1,F2) pass too.
 */
static void
ctl_digits_of(const char *reply, const char *key, char *out, size_t size, bool lists)
{
    size_t i;

    out[0] = '\0';
    if (client_field(reply, key, out, size)) {
        for (i = 0; out[i] != '\0'; i++) {
            if ((out[i] < '0' || out[i] > '9')
                && !(lists && out[i] == ',' && i > 0 && out[i + 1] != '\0' && out[i - 1] != ',')) {
                out[0] = '\0';
                break;
            }
        }
    }
}

/* ctl_digits_of() for one number. */
static void
ctl_digits(const char *reply, const char *key, char *out, size_t size)
{
    ctl_digits_of(reply, key, out, size, false);
}

/*
 * The label sent without --label: <host>:<pid>:<command name> (the
 * basename of COMMAND, "sh" for -c, the pid redlockctl's), cut to
 * CTL_LABEL_MAX bytes, every byte outside 0x21..0x7E replaced by '_'.
 */
static void
ctl_default_label(const struct ctl_opts *o, char *out, size_t size)
{
    char host[256] = "", full[sizeof(host) + 32 + 2 * CTL_LABEL_MAX];
    const char *cmd = "sh", *slash;
    size_t i;

    if (gethostname(host, sizeof(host) - 1) != 0) {
        snprintf(host, sizeof(host), "unknown");
    }
    if (o->shell_cmd == NULL) {
        slash = strrchr(o->argv[0], '/');
        cmd = slash != NULL ? slash + 1 : o->argv[0];
    }
    snprintf(full, sizeof(full), "%s:%ld:%.*s", host, (long)getpid(), CTL_LABEL_MAX, cmd);
    snprintf(out, size, "%.*s", CTL_LABEL_MAX, full);
    for (i = 0; out[i] != '\0'; i++) {
        if ((unsigned char)out[i] < 0x21 || (unsigned char)out[i] > 0x7e) {
            out[i] = '_';
        }
    }
}

/*
 * Take the lock (LOCK, or TRYLOCK for -n).  Returns with the grant's fence
 * and permit in g ("" when none); a conflict or an error ends redlockctl.
 */
static void
ctl_acquire(const struct ctl_opts *o, struct ctl_conn *c, struct ctl_grant *g)
{
    const char *verb = o->nowait ? "TRYLOCK" : "LOCK", *reply;
    char req[sizeof(ctl_set_text) + CTL_LABEL_MAX + 128], what[sizeof(ctl_set_text) + 16];
    char ttl[32];
    char label[CTL_LABEL_MAX + 1], left[48];
    int64_t deadline, ms;
    size_t len;

    len = (size_t)snprintf(req, sizeof(req), "%s %s", verb, o->name);
    if (o->ttl_ms > 0) {
        len += (size_t)snprintf(req + len, sizeof(req) - len, " ttl=%lld", (long long)o->ttl_ms);
    }
    if (!o->nowait && o->wait_ms > 0) {
        len += (size_t)snprintf(req + len, sizeof(req) - len, " wait=%lld",
                                (long long)o->wait_ms);
    }
    if (o->fence) {
        len += (size_t)snprintf(req + len, sizeof(req) - len, " fence");
    }
    if (o->shared) {
        len += (size_t)snprintf(req + len, sizeof(req) - len, " shared");
    } else if (o->limit > 0) {
        len += (size_t)snprintf(req + len, sizeof(req) - len, " limit=%lld",
                                (long long)o->limit);
    }
    if (o->delay_ms >= 0) {
        len += (size_t)snprintf(req + len, sizeof(req) - len, " delay=%lld",
                                (long long)o->delay_ms);
    }
    if (o->label != NULL) {
        snprintf(label, sizeof(label), "%s", o->label);
    } else {
        ctl_default_label(o, label, sizeof(label));
    }
    snprintf(req + len, sizeof(req) - len, " label=%s", label);
    snprintf(what, sizeof(what), "%s %s", verb, o->name);
    ctl_request(c, req);
    if (o->nowait) {
        deadline = client_now_ms() + CTL_REPLY_MS;
    } else if (o->wait_ms > 0) {
        deadline = client_now_ms() + o->wait_ms + CTL_WAIT_SLACK_MS;
    } else {
        deadline = -1;
    }
    reply = ctl_reply(c, what, deadline);
    if (client_is_reply(reply, "OK", o->name)) {
        ctl_digits_of(reply, "fence", g->fence, sizeof(g->fence), o->nset > 1);
        ctl_digits(reply, "permit", g->permit, sizeof(g->permit));
        if (o->verbose) {
            if (!client_field(reply, "validity", ttl, sizeof(ttl))) {
                strcpy(ttl, "?");
            }
            ctl_msg("acquired '%s' (validity=%s ms%s%s%s%s)", o->name, ttl,
                    g->fence[0] != '\0' ? ", fence=" : "", g->fence,
                    g->permit[0] != '\0' ? ", permit=" : "", g->permit);
        }
        return;
    }
    if (client_is_reply(reply, "BUSY", o->name) || client_is_reply(reply, "TIMEOUT", o->name)) {
        if (o->verbose && reply[0] == 'B') {
            left[0] = '\0';
            if (client_field(reply, "delayed", ttl, sizeof(ttl))
                && ctl_parse_int(ttl, PROTO_NUMBER_MAX, &ms) == 0) {
                ctl_msg("'%s' is kept by a lock-delay for %lld ms more (its last hold "
                        "ended without a release)", o->name, (long long)ms);
                exit(o->conflict_code);
            }
            if (client_field(reply, "ttl", ttl, sizeof(ttl))
                && ctl_parse_int(ttl, PROTO_NUMBER_MAX, &ms) == 0) {
                snprintf(left, sizeof(left), " (its lease ends in %lld ms unless renewed)",
                         (long long)ms);
            }
            ctl_msg("'%s' is held by someone else%s", o->name, left);
        } else if (o->verbose) {
            ctl_seconds_text(o->wait_ms, left, sizeof(left));
            ctl_msg("'%s' still held after waiting %s", o->name, left);
        }
        exit(o->conflict_code);
    }
    ctl_fail_err(o, c, what, reply);
}

/*
 * Fork and exec COMMAND in its own process group (see the file comment).
 * With handover, the terminal on stdin is given to that group (by both
 * sides, so that it is done before COMMAND runs, whichever runs first).
 */
static pid_t
ctl_spawn(const struct ctl_opts *o, const struct ctl_grant *g, bool handover)
{
    pid_t parent = getpid(), pid;
    const char *file;
    int err;

    fflush(NULL);
    pid = fork();
    if (pid != 0) {
        if (pid > 0) {
            setpgid(pid, pid);
            if (handover) {
                tcsetpgrp(STDIN_FILENO, pid);
            }
        }
        return pid;
    }
    setpgid(0, 0);
    if (handover) {
        tcsetpgrp(STDIN_FILENO, getpid());
    }
    /* Our death releases the lock: COMMAND must not outlive us. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) {
        _exit(EX_OSERR);
    }
    sigaction(SIGCHLD, &ctl_origchld, NULL);
    sigprocmask(SIG_SETMASK, &ctl_origmask, NULL);
    /* The passwords left the environment at the start (ctl_scrub_secret()). */
    if (setenv("REDLOCK_NAME", o->name, 1) != 0
        || (g->fence[0] != '\0' ? setenv("REDLOCK_FENCE", g->fence, 1)
                                : unsetenv("REDLOCK_FENCE")) != 0
        || (g->permit[0] != '\0' ? setenv("REDLOCK_PERMIT", g->permit, 1)
                                 : unsetenv("REDLOCK_PERMIT")) != 0) {
        ctl_msg("cannot set the environment: %s", strerror(errno));
        _exit(EX_OSERR);
    }
    if (o->shell_cmd != NULL) {
        file = "/bin/sh";
        execl(file, "sh", "-c", o->shell_cmd, (char *)NULL);
    } else {
        file = o->argv[0];
        execvp(file, o->argv);
    }
    err = errno;
    ctl_msg("cannot run %s: %s", file, strerror(err));
    _exit(err == ENOENT ? CTL_EXIT_NOTFOUND : CTL_EXIT_NOEXEC);
}

/*
 * COMMAND stopped while we have a terminal (Ctrl-Z, or SIGTTIN from the
 * background): take the terminal back and stop ourselves, so that the
 * shell sees the job stopped; once continued, give the terminal back if
 * we are in the foreground, and continue COMMAND.  (In an orphaned process
 * group SIGTSTP is discarded and COMMAND is simply continued.)
 */
static void
ctl_job_stop(struct ctl_child *ch)
{
    if (ch->handed) {
        tcsetpgrp(STDIN_FILENO, getpgrp());
        ch->handed = false;
    }
    kill(getpid(), SIGTSTP);
    if (tcgetpgrp(STDIN_FILENO) == getpgrp()) {
        ch->handed = tcsetpgrp(STDIN_FILENO, ch->pid) == 0;
    }
    kill(-ch->pid, SIGCONT);
}

/*
 * After SIGCHLD: deal with COMMAND's stops, and reap it when it has
 * exited.  It is looked at first without being reaped (WNOWAIT), so that
 * while the rest of its process group is killed after a lost lock, its
 * process group id cannot be given to another process.  True once reaped.
 */
static bool
ctl_child_reap(struct ctl_child *ch)
{
    siginfo_t si;
    int status;

    for (;;) {
        memset(&si, 0, sizeof(si));
        if (waitid(P_PID, (id_t)ch->pid, &si, WEXITED | WSTOPPED | WNOHANG | WNOWAIT) != 0) {
            if (errno == EINTR) {
                continue;
            }
            ctl_msg("waitid: %s", strerror(errno));
            ch->code = EX_OSERR;
            return true;
        }
        if (si.si_pid == 0) {
            return false;
        }
        if (si.si_code != CLD_EXITED && si.si_code != CLD_KILLED && si.si_code != CLD_DUMPED) {
            /* A stop: take it off the queue. */
            waitid(P_PID, (id_t)ch->pid, &si, WSTOPPED | WNOHANG);
            if (ch->tty && !ch->lost) {
                ctl_job_stop(ch);
            }
            continue;
        }
        if (ch->lost) {
            kill(-ch->pid, SIGKILL);
        }
        while (waitpid(ch->pid, &status, 0) < 0 && errno == EINTR) {
            continue;
        }
        if (WIFEXITED(status)) {
            ch->code = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
            ch->code = 128 + WTERMSIG(status);
        } else {
            ch->code = 255;
        }
        return true;
    }
}

/* The lock is gone: tell COMMAND's process group to stop. */
static void
ctl_lose(const struct ctl_opts *o, struct ctl_child *ch, const char *why)
{
    char grace[48];

    if (ch->lost) {
        return;
    }
    ch->lost = true;
    kill(-ch->pid, SIGTERM);
    kill(-ch->pid, SIGCONT);
    if (o->grace_ms == 0) {
        kill(-ch->pid, SIGKILL);
        ctl_msg("lost the lock '%s' while the command ran (%s): SIGKILL to its process group",
                o->name, why);
        return;
    }
    ch->kill_at = client_now_ms() + o->grace_ms;
    ctl_seconds_text(o->grace_ms, grace, sizeof(grace));
    ctl_msg("lost the lock '%s' while the command ran (%s): SIGTERM to its process group, "
            "SIGKILL when it exits or in %s", o->name, why, grace);
}

/*
 * UNLOCK NAME and wait for the answer, so that the name is free when we
 * exit.  Failures are reported; COMMAND's status stands.
 */
static void
ctl_release(const struct ctl_opts *o, struct ctl_conn *c)
{
    int64_t deadline = client_now_ms() + CTL_REPLY_MS;
    char req[sizeof(ctl_set_text) + 16];
    int sig = 0;

    snprintf(req, sizeof(req), "UNLOCK %s", o->name);
    if (c->cl.fd < 0 || client_send(&c->cl, req, deadline) != 0) {
        return;
    }
    for (;;) {
        switch (ctl_next(c, deadline, &sig)) {
        case CTL_EV_LINE:
            if (client_is_push(c->cl.line)) {
                continue;
            }
            if (client_is_reply(c->cl.line, "OK", o->name)) {
                if (o->verbose) {
                    ctl_msg("released '%s'", o->name);
                }
            } else if (!client_is_reply(c->cl.line, "NOTHELD", o->name)) {
                ctl_msg("releasing '%s': %s (its lease runs out by itself)", o->name,
                        c->cl.line);
            }
            return;
        case CTL_EV_SIGNAL:
            if (sig == SIGCHLD) {
                continue;
            }
            return;     /* closing the connection releases it too */
        case CTL_EV_TIMEOUT:
            ctl_msg("releasing '%s': no answer from redlockd at %s (its lease runs out by "
                    "itself)", o->name, c->where);
            return;
        case CTL_EV_CLOSED:
            return;
        }
    }
}

/* Run COMMAND under the lock we hold; returns redlockctl's exit status. */
static int
ctl_run(const struct ctl_opts *o, struct ctl_conn *c, const struct ctl_grant *g)
{
    char why[sizeof(((struct ctl_conn *)NULL)->where) + CLIENT_ERR_MAX + 64], reason[32];
    char grace[48];
    struct ctl_child ch;
    bool handover;
    int sig = 0;

    memset(&ch, 0, sizeof(ch));
    ch.kill_at = -1;
    ch.tty = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) != -1;
    handover = ch.tty && tcgetpgrp(STDIN_FILENO) == getpgrp();
    ch.pid = ctl_spawn(o, g, handover);
    if (ch.pid < 0) {
        ctl_msg("cannot start the command: fork: %s", strerror(errno));
        return EX_OSERR;
    }
    ch.handed = handover;
    for (;;) {
        switch (ctl_next(c, ch.kill_at, &sig)) {
        case CTL_EV_SIGNAL:
            if (sig != SIGCHLD) {
                kill(-ch.pid, sig);
            } else if (ctl_child_reap(&ch)) {
                goto done;
            }
            break;
        case CTL_EV_LINE:
            if (client_is_push(c->cl.line) && client_is_reply(c->cl.line + 2, "LOST", o->name)) {
                if (!client_field(c->cl.line, "reason", reason, sizeof(reason))) {
                    strcpy(reason, "?");
                }
                snprintf(why, sizeof(why), "reason=%s", reason);
                ctl_lose(o, &ch, why);
            }
            break;
        case CTL_EV_CLOSED:
            snprintf(why, sizeof(why), "the connection to redlockd at %s ended: %s", c->where,
                     c->cl.err);
            ctl_lose(o, &ch, why);
            break;
        case CTL_EV_TIMEOUT:
            kill(-ch.pid, SIGKILL);
            ch.kill_at = -1;
            ctl_seconds_text(o->grace_ms, grace, sizeof(grace));
            ctl_msg("the command did not stop within %s of SIGTERM: SIGKILL to its process "
                    "group", grace);
            break;
        }
    }
done:
    if (ch.handed) {
        tcsetpgrp(STDIN_FILENO, getpgrp());
    }
    if (ch.lost) {
        return EX_TEMPFAIL;
    }
    ctl_release(o, c);
    return ch.code;
}

/*
 * check NAME --fence F [--permit I] | --token T: CHECK; prints "NAME:
 * current, ..." and returns 0, or "NAME: stale (...)" and returns 1;
 * an error exits as for the other subcommands.
 */
static int
ctl_cmd_check(const struct ctl_opts *o, struct ctl_conn *c)
{
    char req[PROTO_NAME_MAX + 96], reason[16], ttl[32], left[48];
    const char *reply;
    int64_t ms;

    if (o->check_token != NULL) {
        snprintf(req, sizeof(req), "CHECK %s token=%s", o->name, o->check_token);
    } else {
        snprintf(req, sizeof(req), "CHECK %s fence=%s%s%s", o->name, o->check_fence,
                 o->check_permit != NULL ? " permit=" : "",
                 o->check_permit != NULL ? o->check_permit : "");
    }
    ctl_request(c, req);
    reply = ctl_reply(c, "CHECK", client_now_ms() + CTL_REPLY_MS);
    if (client_is_reply(reply, "CURRENT", o->name)) {
        printf("%s: current", o->name);
        if (client_field(reply, "ttl", ttl, sizeof(ttl)) && strcmp(ttl, "-1") != 0
            && ctl_parse_int(ttl, PROTO_NUMBER_MAX, &ms) == 0) {
            ctl_seconds_text(ms, left, sizeof(left));
            printf(" (on a quorum of the masters for %s more unless renewed)", left);
        }
        printf("\n");
        return 0;
    }
    if (client_is_reply(reply, "STALE", o->name)
        && client_field(reply, "reason", reason, sizeof(reason))) {
        printf("%s: stale (%s)\n", o->name,
               strcmp(reason, "free") == 0 ? "nobody holds it"
               : strcmp(reason, "other") == 0 ? "another grant holds it"
               : strcmp(reason, "mixed") == 0 ? "the grant is on fewer than a quorum of the masters"
               : reason);
        return 1;
    }
    ctl_fail_err(o, c, req, reply);
    return EX_UNAVAILABLE;
}

int
main(int argc, char **argv)
{
    static struct ctl_conn conn;
    struct ctl_opts o;
    struct ctl_grant g;

    ctl_parse(argc, argv, &o);
    ctl_signals_init();
    ctl_open(&o, &conn);
    switch (o.mode) {
    case CTL_MODE_PING:
        return ctl_cmd_ping(&conn);
    case CTL_MODE_STATUS:
        return ctl_cmd_status(&o, &conn);
    case CTL_MODE_LIST:
        return ctl_cmd_list(&o, &conn);
    case CTL_MODE_WATCH:
        return ctl_cmd_watch(&o, &conn);
    case CTL_MODE_BREAK:
        return ctl_cmd_break(&o, &conn);
    case CTL_MODE_CHECK:
        return ctl_cmd_check(&o, &conn);
    case CTL_MODE_STATS:
        return ctl_cmd_stats(&o, &conn);
    case CTL_MODE_LOCK:
        break;
    }
    ctl_acquire(&o, &conn, &g);
    return ctl_run(&o, &conn, &g);
}
