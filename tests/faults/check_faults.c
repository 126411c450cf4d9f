/*
 * check_faults.c: the fault-injection suite (make faults; see
 * tests/faults/README.md).
 *
 * Each scenario is one run on fresh processes: five redis-server masters
 * and two redlockd daemons (tests/harness.h), a separate redis-server
 * that holds the counters (started here, once for the whole suite), and
 * a dozen rmw-client processes (tests/faults/rmw_client.c) that do a
 * guarded read-modify-write on a counter per lock name, through either
 * daemon, and a dozen more on the other kinds of hold: permits of a
 * counted name (LOCK sem limit=3) and shared and exclusive holders of
 * one name (LOCK rw shared, LOCK rw).  While they run, the scenario's
 * schedule injects its faults (kill -9 and SIGSTOP of masters, daemons
 * and clients; masters that come back empty; in the network scenarios,
 * where each master and daemon runs in a network namespace of its own
 * (netns.c), partitions, lost replies, packet loss and delay, made with
 * iptables rules and delay proxies (delay_proxy.c)) and heals them; then
 * the clients are stopped, the masters are polled until no lock key is
 * left, and the checker (checker.c) judges the client logs against the
 * counters.  One line per scenario goes into the summary table printed
 * at the end.  The timing schedule attacks timing instead: a delay proxy
 * in front of every master, three daemons, clients that mix session and
 * lease sections, an operator that BREAKs (break_client.c), a daemon
 * left idle and a clock step on a minority of the masters.  The upgrade
 * schedule runs daemons of the last release (a past build from the
 * repository's history) and of this build on the same masters with the
 * timing schedule's workloads, through a rolling restart in which
 * daemons are started again on the other build.
 *
 * Exit status 0 when every scenario met its expectation: no violation,
 * except for the negative controls, where the checker must report the
 * double grants.  Restarting three masters empty with the restart
 * quarantine off: an overlap on "hot", more holders than the limit on
 * "hot-sem", a shared holder inside the exclusive one's section on
 * "hot-rw".  A daemon cut off the majority while its long holders ignore
 * "! LOST": an overlap on acct-a, a double grant of a permit of sem, a
 * writer of rw inside a shared holder's section.  A daemon paused under
 * a holder whose late write is not fenced: an overlap on acct-a and a
 * stale write.  The timing setup with fakers of fences and leases used
 * past their ttl: an overlap on acct-a, a permit of sem granted twice, a
 * writer of rw inside a shared section, and on brk-x fences out of
 * order, a break-after and a break-broken finding.  Daemons built to
 * announce no release (REDLOCKD_SKIP_ANNOUNCE_BIN): a name free for
 * longer than the liveness bound while its waiters sleep.  The upgrade
 * schedule with the build from before the keys of shared and counted
 * holds moved in place of the release: a double grant across the
 * builds on a shared/exclusive or a counted name.  When no
 * namespace can be made (not root, no iptables, ...), the network
 * scenarios are skipped, which does not fail the suite, and a line after
 * the table says what is missing.
 *
 * Every scenario is judged for liveness too: outside its fault's window
 * (from the end of the warm-up until a recovery bound after the heal),
 * a name is never free for longer than FT_LIVE_BOUND_MS while a client
 * waits for it (checker.h).
 *
 * Before any scenario, the checker is run on synthetic logs with known
 * violations (ft_self_test): a checker that cannot fail would make every
 * scenario pass.
 *
 * Environment: REDLOCKD_BIN (the daemon, for the harness), RMW_CLIENT_BIN
 * (default ./build/rmw-client), DELAY_PROXY_BIN (default
 * ./build/delay-proxy), BREAK_CLIENT_BIN (default ./build/break-client),
 * REDLOCKD_SKIP_ANNOUNCE_BIN (the liveness control's daemon, built with
 * REDLOCKD_FAULT_SKIP_ANNOUNCE; make faults sets it),
 * REDLOCKD_PREV_BIN and REDLOCKD_PREV_CONTROL_BIN (the upgrade schedule's
 * past release and its control's build; make faults builds and sets
 * them),
 * FAULTS_ONLY=name,name (run only those scenarios), FAULTS_KEEP=1 (keep
 * every log, the daemons' included, even when everything passed),
 * FAULTS_LOG_LEVEL (the daemons' log.level, default info),
 * FAULTS_SOAK_MINUTES (make soak: run the scenarios again and again for
 * that long and print one table over all the runs).
 *
 * Each run is a child process of its own that sends its result back
 * through a pipe; every process started here dies with its parent
 * (PR_SET_PDEATHSIG), so SIGINT or SIGTERM (Ctrl-C) ends the run in
 * progress at once, and the table of the finished runs is printed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <hiredis/hiredis.h>

#include "tests/faults/checker.h"
#include "tests/faults/netns.h"
#include "tests/harness.h"

#define FT_MASTERS          5       /* masters per scenario */
#define FT_DAEMONS          2       /* daemons per scenario (the timing ones: 3) */
#define FT_DAEMONS_MAX      3       /* daemons of any scenario */
#define FT_PREFIX           "redlock:"  /* lock.key_prefix */
#define FT_FENCE_SUFFIX     " fence"    /* fence counters: kept forever by design */
#define FT_REGISTRY         FT_PREFIX " layout" /* the masters' layout registry (PROTOCOL.md
                                               section 9): kept for days by design */
#define FT_TTL_MS           3000    /* lock.default_ttl_ms and the clients' ttl= */
#define FT_MAX_TTL_MS       6000    /* lock.max_ttl_ms, so also the restart quarantine */
#define FT_RETRY_MS         100     /* lock.retry_delay_ms */
#define FT_SLACK_MS         1500    /* wake-up latency and CPU steal on a small VM */
#define FT_NAMES            2       /* lock names of the regular clients */
#define FT_PER_NAME         6       /* regular clients per name */
#define FT_CLIENTS_MAX      64      /* clients per scenario */
#define FT_SLEEP            "5-30"  /* regular clients' in-section sleep, ms */
#define FT_THINK_MS         10      /* regular clients' pause between sections, 0..ms */
#define FT_VICTIM_SLEEP_MS  600     /* in-section sleep of a client that is stopped or killed */
#define FT_HOLD_SLEEP_MS    8000    /* in-section sleep of the long holder (restart schedules) */
#define FT_POLL_CLIENT_MS   20      /* the contender's LOCK wait=0 interval */
#define FT_WARMUP_MS        3000    /* clients run this long before the first fault */
#define FT_POST_MIN_MS      4000    /* and at least this long after the heal */
#define FT_SHORT_STOP_MS    (3 * H_NODE_TIMEOUT_MS)     /* longer than node_timeout */
#define FT_LONG_STOP_MS     (FT_TTL_MS + 2000)          /* longer than ttl */
#define FT_CLIENT_STOP_MS   (2 * FT_TTL_MS)             /* a client stays stopped this long */
#define FT_STOP_CLIENTS_MS  (FT_HOLD_SLEEP_MS + 2000)   /* clients finish within this */
#define FT_RELEASE_MS       1000    /* a killed client's keys are gone within this */
#define FT_WAIT_MS          10000   /* deadline for a condition a schedule waits for */
#define FT_POLL_MS          5       /* interval of those waits */
#define FT_DEFAULT_BOUND_MS (FT_TTL_MS + 4 * FT_RETRY_MS + FT_SLACK_MS)
/*
 * Liveness (README, "Liveness"): how long a name may be free while a
 * client waits for it.  A yield holds the releasing daemon's head back
 * for up to node_timeout; a try is a round, decided at the latest at
 * node_timeout; a try that meets a split vote or a release not yet
 * applied everywhere tries again, once more a round, after up to the
 * retry delay's jitter (twice); a fenced grant (lock.fence: always here)
 * is a second round, the raise, which a BREAK or a late answer can fail,
 * and the name waits for that grant's clean-up; plus the time an OK
 * takes to be read on this loaded VM.
 */
#define FT_LIVE_SLACK_MS    300
#define FT_LIVE_BOUND_MS    (4 * H_NODE_TIMEOUT_MS + 2 * FT_RETRY_MS + FT_LIVE_SLACK_MS)
#define FT_LIVE_TAIL_MS     2000    /* judged time after a fault's window, at least */
#define FT_LIVE_WINDOWS     4       /* fault windows of a run */
#define FT_LIVE             "live"  /* the liveness schedules' name */
#define FT_LIVE_TTL_MS      FT_MAX_TTL_MS   /* its holder's ttl: a waiter that hears no
                                               release sleeps up to that long */
#define FT_LIVE_HOLD        "200-400"       /* its holder's sections, ms */
#define FT_LIVE_THINK_MIN_MS 4000   /* its holder's pause between sections: well longer */
#define FT_LIVE_THINK_MS    5000    /* than the bound, shorter than its ttl */
#define FT_LIVE_WAITERS     2       /* clients waiting for it through the other daemon */
#define FT_LIVE_RUN_MS      18000   /* how long the liveness schedules run */
#define FT_LIMIT            3       /* limit= of the counted names */
#define FT_SEM_CLIENTS      5       /* clients of the counted name (scenarios with kinds) */
#define FT_READERS          4       /* shared clients of the shared/exclusive name */
#define FT_WRITERS          2       /* exclusive clients of the shared/exclusive name */
#define FT_KIND_SLEEP       "20-80" /* in-section sleep of the counted and shared clients, ms */
#define FT_KIND_THINK_MS    20      /* their pause between sections, 0..ms */
#define FT_PROBE_MAX        8       /* keys a schedule watches until they are free */
#define FT_CLOCK_MASTERS    0x7u    /* the clock schedules step masters 0, 1 and 2 */
#define FT_CLOCK_STEP_MS    10000   /* by this much, more than max_ttl: keys expire at once */
#define FT_PORTS_MAX        (FT_DAEMONS_MAX * (H_ADDR_MAX + 8)) /* an rmw-client's -p list */
#define FT_HOSTS            (FT_MASTERS + FT_DAEMONS)   /* namespaces of a network scenario */
#define FT_HOST_DAEMON(d)   (FT_MASTERS + (d))          /* netns host of daemon d */
#define FT_PARTITION_MS     (FT_TTL_MS + 2000)  /* a master's partition outlasts the ttl */
#define FT_MINORITY_MS      (2 * FT_TTL_MS)     /* the isolated daemon's partition */
#define FT_MINORITY_HOLD_MS (2 * FT_TTL_MS)     /* its long holders' in-section sleep */
#define FT_MINORITY_FRESH_MS 2000               /* they began at most this long before it */
#define FT_LOSS_MS          10000   /* packet loss lasts this long */
#define FT_LOSS_RULE        "-m statistic --mode random --probability 0.05 -j DROP"
#define FT_DELAY_MS         10000   /* the delay lasts this long */
#define FT_DELAY_RANGE      "5-35"  /* per direction: 20 ms +- 15 ms */
#define FT_SLOW_MASTERS     3       /* masters with loss or delay: the last three */
#define FT_PROXY_START_MS   2000    /* deadline for a delay proxy to listen */
#define FT_NET_PASSWORD     "faults-net"    /* auth.password of daemons beyond loopback */
/* The daemon's reconnect delay to a master is at most 5 s + 50 % jitter
   (daemon/master.c), and a try that fails takes connect_timeout_ms. */
#define FT_RECONNECT_MS     (5000 * 3 / 2 + 500)

/* The names the regular clients lock; the restart schedules add "hot". */
static const char *const ft_names[FT_NAMES] = { "acct-a", "acct-b" };
#define FT_HOT              "hot"
/* The scenarios with kinds add a counted name (limit=FT_LIMIT) and a
   shared/exclusive one; the restart-majority schedules hold "hot-sem"
   and "hot-rw" the way they hold "hot". */
#define FT_SEM              "sem"
#define FT_RW               "rw"
#define FT_HOT_SEM          "hot-sem"
#define FT_HOT_RW           "hot-rw"
#define FT_RUN_NAMES        8       /* names of one run: regular, kinds, hot ones */

/* What an rmw-client asks for besides its name (-L, -S), and how it behaves (-I, ...). */
struct ft_kind {
    long limit;                     /* > 0: a counted name */
    bool shared;                    /* a shared holder */
    bool ignore_lost;               /* a broken client that ignores "! LOST" (-I) */
    bool fenced;                    /* -F: its write is refused with a stale fence */
    bool guarded;                   /* -G: its reads and writes are refused with a fence
                                       below the largest the resource saw */
    int  lease_pct;                 /* -m: percent of its sections in lease mode */
    int  reset_pct;                 /* -R: percent of its lease grants whose connection
                                       it resets right after the OK */
    int  extend_pct;                /* -E: percent of its lease sections that EXTEND */
    int  other_pct;                 /* -X: percent of its lease EXTENDs and UNLOCKs sent
                                       through another daemon */
    long fake_fence;                /* -Z: added to every fence it logs (negative
                                       control); 0: none */
    long think_min_ms;              /* -k MIN-MAX: the least pause between its sections
                                       (0: the pause is 0..MAX) */
};
static const struct ft_kind ft_plain = { .limit = 0 };
static const struct ft_kind ft_counted = { .limit = FT_LIMIT };
static const struct ft_kind ft_shared = { .shared = true };
static const struct ft_kind ft_fenced = { .fenced = true };

/*
 * The timing schedules (ft_sched_timing): three daemons, a delay proxy
 * in front of every master, an operator that BREAKs, clients that mix
 * session and lease sections.
 */
#define FT_TIMING_DAEMONS   3       /* daemons of the timing schedules */
#define FT_TIMING_DELAY     "0-20"  /* each proxy, each chunk, each way, ms */
#define FT_TIMING_IDLE_MS   60000   /* daemon 2 idle (make faults) */
#define FT_TIMING_SOAK_IDLE_MS 180000   /* daemon 2 idle in make soak */
#define FT_TIMING_STEP_PERMILLE 8   /* the clock step: this much of the idle (its drift
                                       allowance is 1 %: lock.drift_factor 0.01) */
#define FT_TIMING_STEPPED   0x3u    /* the clock step hits masters 0 and 1 */
#define FT_TIMING_AFTER_MS  15000   /* all three daemons in use after the step */
#define FT_ADMIN_PASSWORD   "faults-admin"  /* auth.admin_password (BREAK) */
#define FT_OPERATORS_MAX    4       /* break-client processes of a run */
#define FT_BREAK_EVERY      "100-700"   /* the operator's pause before each BREAK, ms */
#define FT_MIX_LEASE        40      /* mixed clients: percent of sections as leases */
#define FT_MIX_RESET        25      /* of those, reset right after the OK */
#define FT_MIX_EXTEND       25      /* EXTENDed once */
#define FT_MIX_OTHER        50      /* EXTEND and UNLOCK through another daemon */
#define FT_BRK_X            "brk-x"     /* BREAK targets: exclusive, */
#define FT_BRK_RW           "brk-rw"    /* shared/exclusive, */
#define FT_BRK_SEM          "brk-sem"   /* counted */
#define FT_BRK_LIMIT        2       /* limit= of FT_BRK_SEM */
#define FT_STEP_L           "step-l"    /* long leases (ttl 1 s) for the clock step */
#define FT_STEP_TTL_MS      1000    /* their ttl */
#define FT_STEP_SLEEP       "600-900"   /* their in-section sleep, ms */
#define FT_STEP_POLL_MS     50      /* they poll (LOCK wait=0): split votes */
#define FT_STEP_AIM_MS      5000    /* the step waits this long at most for such a lease, */
#define FT_STEP_EARLY_MS    50      /* one whose keys the step leaves less than this much */

/* A record a killed holder had on the masters: it must be freed in time. */
struct ft_probe {
    char    key[CHECKER_NAME_MAX + 32]; /* the record's key */
    char    token[64];              /* a permit's token; "" for a shared set's members */
    char    members[8][64];         /* a shared set's live members at the kill */
    size_t  nmembers;               /* entries in members */
    char    what[96];               /* for messages */
};

/* One rmw-client process of the current scenario. */
struct ft_client {
    pid_t   pid;                    /* running process, 0 once reaped */
    char    log[PATH_MAX + 64];     /* its event log */
    char    name[CHECKER_NAME_MAX + 1]; /* the lock name it uses */
    int64_t killed_us;              /* when we sent it SIGKILL, 0 if never */
    bool    stopped;                /* SIGSTOPped now */
    bool    finite;                 /* runs a fixed number of sections, then exits */
    bool    poller;                 /* polls (LOCK wait=0): no turn is promised to it */
    int     daemon;                 /* index of the daemon it tries first */
    int     status;                 /* exit status once reaped (128 + signal), else -1 */
    struct ft_kind kind;            /* counted or shared, else exclusive */
};

struct ft_scenario;

/* What a pause-daemon schedule set up, for its verdict (ft_pause_judge). */
struct ft_pause {
    bool    on;                     /* a pause-daemon schedule ran */
    bool    fenced;                 /* the late writer's write is fenced (-F) */
    int     writer;                 /* the late writer's client index */
    int     long_victim;            /* the long victim's client index */
    int64_t stop_us;                /* SIGSTOP of daemon 1, 0 if it was not stopped */
    int64_t cont_us;                /* its SIGCONT */
};

/* The state of one scenario run; lives on ft_run_scenario's stack. */
struct ft_run {
    const struct ft_scenario *sc;   /* what is being run */
    char     dir[PATH_MAX];         /* client logs and events, under ft_dir */
    FILE    *events;                /* <dir>/events.log */
    int64_t  start_us;              /* when the scenario started */
    size_t   ndaemons;              /* daemons started */
    size_t   nactive;               /* the first nactive take the regular clients (the
                                       timing schedule keeps the last one idle) */
    int      ports[FT_DAEMONS_MAX]; /* the daemons' TCP ports */
    char     addrs[FT_DAEMONS_MAX][H_ADDR_MAX]; /* the daemons' addresses */
    bool     net;                   /* masters and daemons in namespaces (netns.h) */
    pid_t    proxies[FT_MASTERS];   /* delay proxy in front of master i, 0: none */
    pid_t    operators[FT_OPERATORS_MAX]; /* break-client processes, 0 once reaped */
    char     oplogs[FT_OPERATORS_MAX][PATH_MAX + 64]; /* their logs */
    size_t   noperators;            /* entries in operators and oplogs */
    char     via[FT_MASTERS][H_ADDR_MAX + 8]; /* "addr:port" of that proxy */
    const char *neg_exclusive;      /* negative control: an exclusive name that must
                                       show an overlap */
    const char *neg_counted;        /* and a counted one that must show more holders
                                       than its limit (NULL: none) */
    bool     neg_permit_overlap;    /* for it, two holders of one permit will do */
    const char *neg_fence;          /* a name whose fence checks (fence, break-after,
                                       break-broken) must each report (NULL: none) */
    const char *neg_shared;         /* and a shared/exclusive one that must show an
                                       overlap (NULL: none) */
    struct ft_client clients[FT_CLIENTS_MAX]; /* started clients */
    size_t   nclients;              /* entries in clients */
    int64_t  heal_us;               /* last fault healed (or struck, if it never heals) */
    int64_t  bound_ms;              /* heal to first grant of each name, at most */
    int64_t  keys_late_ms;          /* lock keys may outlive the usual deadline by this
                                       (masters whose clocks were stepped back) */
    bool     hot;                   /* the name FT_HOT is in use */
    bool     kinds;                 /* FT_SEM and FT_RW clients run */
    bool     hot_kinds;             /* FT_HOT_SEM and FT_HOT_RW are in use */
    const char *recovery[FT_RUN_NAMES]; /* names that must be granted after the heal */
    size_t   nrecovery;             /* entries in recovery */
    int      killed_daemon;         /* index of the daemon killed, -1 if none */
    bool     setup_failed;          /* the schedule could not be carried out */
    char     external[4][256];      /* violations found here, not in the logs */
    size_t   nexternal;             /* entries in external */
    char     notes[3072];           /* what the table's notes say about this run */
    struct checker_result res;      /* the verdict */
    bool     passed;                /* met the expectation */
    double   seconds;               /* duration of the run */
    struct ft_pause pause;          /* the pause-daemon schedules' clients and times */
    bool     brk;                   /* FT_BRK_X, FT_BRK_RW and FT_BRK_SEM clients run */
    bool     brk_x_only;            /* of them, only FT_BRK_X's (the timing control) */
    bool     step;                  /* FT_STEP_L clients run */
    int64_t  step_us;               /* the timing schedule's clock step, 0 if none */
    int64_t  fault_us;              /* the first fault (the warm-up's end), 0: none */
    struct checker_window windows[FT_LIVE_WINDOWS]; /* where liveness is not judged */
    size_t   nwindows;              /* entries in windows; none: ft_judge takes
                                       [fault_us, heal_us + bound] */
    int64_t  stop_us;               /* the clients were told to stop */
    const char *neg_live;           /* negative control: a name that must show a
                                       liveness finding (NULL: none) */
    struct h_daemon_opts dopts;     /* the daemons' options (a restart writes them again) */
    bool     old[FT_DAEMONS_MAX];   /* daemon d runs the scenario's past release now */
    struct {
        size_t  d;                  /* the daemon started again */
        bool    old;                /* on the past build (else this one) */
        int64_t at_us;              /* when it was ready */
    }        restarts[FT_LIVE_WINDOWS]; /* the upgrade schedules' restarts, in order */
    size_t   nrestarts;             /* entries in restarts */
};

/* One schedule. */
struct ft_scenario {
    const char *name;               /* as in the table and FAULTS_ONLY */
    const char *what;               /* one line for people */
    void      (*fault)(struct ft_run *r); /* the schedule, after the regular clients started */
    bool        quarantine;         /* lock.restart_quarantine */
    bool        negative;           /* negative control: an overlap must be reported */
    bool        fences_lost;        /* a majority of the masters lose their fence
                                       counters, so fences may go back (a documented
                                       limit: fences need persistent masters): fence
                                       and stale-write findings are shown, not judged */
    bool        kinds;              /* clients of a counted and a shared/exclusive
                                       name run too (FT_SEM, FT_RW) */
    uint32_t    clock_masters;      /* masters with a steppable wall clock, bit i
                                       for master i (h_clock_masters) */
    const char *clock_check;        /* lock.clock_check ("false": the negative
                                       control); NULL: the daemon's default, on */
    bool        net;                /* each master and daemon in a network namespace of
                                       its own (netns.h); skipped when none can be made */
    bool        delayed;            /* the daemons reach the last FT_SLOW_MASTERS
                                       masters through delay proxies */
    bool        broken;             /* the schedule's long holders ignore "! LOST"
                                       (rmw-client -I) */
    size_t      daemons;            /* daemons to start; 0: FT_DAEMONS */
    bool        idle_daemon;        /* the last daemon takes no client at first */
    bool        proxied;            /* every master behind a delay proxy on 127.0.0.1,
                                       FT_TIMING_DELAY each way from the start */
    bool        mixed;              /* the regular clients mix lease and session
                                       sections (FT_MIX_*) */
    bool        strict;             /* a REJECT excuses no overlap (checker_input) */
    bool        skip_announce;      /* the daemons are the build that announces no
                                       release (REDLOCKD_FAULT_SKIP_ANNOUNCE) */
    int         release;            /* FT_RELEASE_PREV or FT_RELEASE_CONTROL: the daemons
                                       of old_daemons run that past build, the others
                                       this one (the upgrade schedules); 0: none */
    uint32_t    old_daemons;        /* with release: bit d, daemon d starts on it */
};

/* The past builds of the upgrade schedules (the Makefile's PREV_RELEASE*). */
#define FT_RELEASE_PREV     1       /* the last release ($REDLOCKD_PREV_BIN) */
#define FT_RELEASE_CONTROL  2       /* the build from before the keys of shared and counted
                                       holds moved ($REDLOCKD_PREV_CONTROL_BIN) */

static char  ft_dir[PATH_MAX / 2];  /* this suite's files */
static const char *ft_client_bin;   /* rmw-client */
static bool  ft_keep;               /* FAULTS_KEEP: keep every log */
static const char *ft_log_level;    /* FAULTS_LOG_LEVEL, default "info" */
static int   ft_counter_port;       /* the counters' redis-server */
static unsigned ft_round;           /* make soak: the round (1, 2, ...); 0: one pass */
static pid_t ft_counter_pid;        /* its process */
static const char *ft_proxy_bin;    /* delay-proxy */
static const char *ft_break_bin;    /* break-client */
static const char *ft_skip_bin;     /* the daemon that announces no release
                                       (REDLOCKD_SKIP_ANNOUNCE_BIN) */
static const char *ft_new_bin;      /* this build ($REDLOCKD_BIN at the start; NULL: the
                                       harness's default) */
static const char *ft_prev_bin;     /* the last release (REDLOCKD_PREV_BIN) */
static const char *ft_control_bin;  /* the upgrade control's build
                                       (REDLOCKD_PREV_CONTROL_BIN) */
static char  ft_net_why[256];       /* why the network scenarios are skipped, "" if not */

/* ---- small helpers ---- */

static int64_t
ft_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Append to the notes of a run, "; "-separated. */
__attribute__((format(printf, 2, 3)))
static void
ft_note(struct ft_run *r, const char *fmt, ...)
{
    size_t len = strlen(r->notes);
    va_list ap;

    if (len > 0 && len + 2 < sizeof(r->notes)) {
        memcpy(r->notes + len, "; ", 3);
        len += 2;
    }
    va_start(ap, fmt);
    vsnprintf(r->notes + len, sizeof(r->notes) - len, fmt, ap);
    va_end(ap);
}

/* Print a timed event of the run (and keep it in events.log). */
__attribute__((format(printf, 2, 3)))
static void
ft_event(struct ft_run *r, const char *fmt, ...)
{
    int64_t now = ft_now_us();
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    printf("    [%7.3f s] %s\n", (double)(now - r->start_us) / 1e6, msg);
    if (r->events != NULL) {
        fprintf(r->events, "@%.6f %s\n", (double)now / 1e6, msg);
        fflush(r->events);
    }
}

/* The schedule could not be carried out: the run fails whatever the logs say. */
__attribute__((format(printf, 2, 3)))
static void
ft_setup_failed(struct ft_run *r, const char *fmt, ...)
{
    char msg[384];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ft_event(r, "SETUP FAILED: %s", msg);
    ft_note(r, "setup failed: %s", msg);
    r->setup_failed = true;
}

/* A violation found by the orchestrator; counted after the checker ran. */
__attribute__((format(printf, 2, 3)))
static void
ft_external(struct ft_run *r, const char *fmt, ...)
{
    va_list ap;

    if (r->nexternal == sizeof(r->external) / sizeof(r->external[0])) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(r->external[r->nexternal++], sizeof(r->external[0]), fmt, ap);
    va_end(ap);
}


/* Copy a file (a daemon log, before h_end removes it).  Best effort. */
static void
ft_copy(const char *from, const char *to)
{
    char buf[65536];
    ssize_t n;
    int in, out;

    in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        return;
    }
    out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out >= 0) {
        while ((n = read(in, buf, sizeof(buf))) > 0) {
            if (write(out, buf, (size_t)n) != n) {
                break;
            }
        }
        close(out);
    }
    close(in);
}

/* ---- redis ---- */


/* Start the counters' redis-server (no persistence) in ft_dir.  0 or -1. */
static int
ft_counter_start(void)
{
    char port[16], log[PATH_MAX + 32];
    const char *argv[16];
    int64_t deadline;
    size_t n = 0;
    int status;

    ft_counter_port = h_free_port();
    if (ft_counter_port < 0) {
        return -1;
    }
    snprintf(port, sizeof(port), "%d", ft_counter_port);
    snprintf(log, sizeof(log), "%s/counter-redis.log", ft_dir);
    argv[n++] = "redis-server";
    argv[n++] = "--port";
    argv[n++] = port;
    argv[n++] = "--bind";
    argv[n++] = "127.0.0.1";
    argv[n++] = "--save";
    argv[n++] = "";
    argv[n++] = "--appendonly";
    argv[n++] = "no";
    argv[n++] = "--dir";
    argv[n++] = ft_dir;
    argv[n++] = "--logfile";
    argv[n++] = log;
    argv[n] = NULL;
    ft_counter_pid = h_spawn(argv, log);
    if (ft_counter_pid < 0) {
        return -1;
    }
    deadline = h_now_ms() + H_START_MS;
    while (!h_redis_ping(ft_counter_port)) {
        if (waitpid(ft_counter_pid, &status, WNOHANG) == ft_counter_pid
            || h_now_ms() >= deadline) {
            fprintf(stderr, "faults: the counters' redis-server did not start (see %s)\n", log);
            return -1;
        }
        h_sleep_ms(10);
    }
    return 0;
}

static void
ft_counter_stop(void)
{
    if (ft_counter_pid > 0) {
        kill(ft_counter_pid, SIGKILL);
        waitpid(ft_counter_pid, NULL, 0);
        ft_counter_pid = 0;
    }
}

/* Run a command on the counters' redis; true when it answered without error. */
static bool
ft_counter_cmd(const char *cmd)
{
    redisContext *c = h_redis_connect(ft_counter_port);
    redisReply *rep;
    bool ok;

    if (c == NULL) {
        return false;
    }
    rep = redisCommand(c, cmd);
    ok = rep != NULL && rep->type != REDIS_REPLY_ERROR;
    if (rep != NULL) {
        freeReplyObject(rep);
    }
    redisFree(c);
    return ok;
}

/* The counter of a name, or of "<name>:<permit>": 0 when absent, -1 when unreadable. */
static long long
ft_counter_value(const char *name)
{
    redisContext *c = h_redis_connect(ft_counter_port);
    redisReply *rep;
    long long v = -1;

    if (c == NULL) {
        return -1;
    }
    rep = redisCommand(c, "GET counter:%s", name);
    if (rep != NULL && rep->type == REDIS_REPLY_NIL) {
        v = 0;
    } else if (rep != NULL && rep->type == REDIS_REPLY_STRING) {
        v = strtoll(rep->str, NULL, 10);
    }
    if (rep != NULL) {
        freeReplyObject(rep);
    }
    redisFree(c);
    return v;
}

/*
 * Lock keys (FT_PREFIX*, fence counters and the layout registry
 * excluded) on every master:
 * their number, or -1 when a master could not be asked.  The first few
 * are described in desc.
 */
static long
ft_lock_keys(char *desc, size_t size)
{
    char cursor[32];
    redisContext *c;
    redisReply *rep;
    size_t i, k, len, slen = strlen(FT_FENCE_SUFFIX), used = 0;
    long n = 0;

    desc[0] = '\0';
    for (i = 0; i < FT_MASTERS; i++) {
        c = h_master_redis(i);
        if (c == NULL) {
            return -1;
        }
        snprintf(cursor, sizeof(cursor), "0");
        do {
            rep = redisCommand(c, "SCAN %s MATCH %s* COUNT 1000", cursor, FT_PREFIX);
            if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2
                || rep->element[0]->type != REDIS_REPLY_STRING) {
                if (rep != NULL) {
                    freeReplyObject(rep);
                }
                redisFree(c);
                return -1;
            }
            snprintf(cursor, sizeof(cursor), "%s", rep->element[0]->str);
            for (k = 0; k < rep->element[1]->elements; k++) {
                const redisReply *key = rep->element[1]->element[k];

                len = key->len;
                if ((len >= slen && memcmp(key->str + len - slen, FT_FENCE_SUFFIX, slen) == 0)
                    || (len == strlen(FT_REGISTRY) && memcmp(key->str, FT_REGISTRY, len) == 0)) {
                    continue;
                }
                n++;
                if (used + len + 64 < size) {
                    redisReply *ttl = redisCommand(c, "PTTL %b", key->str, len);

                    used += (size_t)snprintf(desc + used, size - used,
                                             "%s'%.*s' on master %zu (pttl %lld)",
                                             used > 0 ? ", " : "", (int)len, key->str, i,
                                             ttl != NULL && ttl->type == REDIS_REPLY_INTEGER
                                                 ? ttl->integer : -3LL);
                    if (ttl != NULL) {
                        freeReplyObject(ttl);
                    }
                }
            }
            freeReplyObject(rep);
        } while (strcmp(cursor, "0") != 0);
        redisFree(c);
    }
    return n;
}

/* ---- the daemons and masters ---- */

/* STATS value of daemon d, or -1 when absent or not answered. */
static long long
ft_stat(size_t d, const char *name)
{
    long long v;

    h_use_daemon(d);
    return h_stat_once(name, &v) == 0 ? v : -1;
}

/*
 * Wait until daemons 0..ndaemons-1 report master i connected (or not).
 * True in time.
 */
static bool
ft_wait_master_up(size_t i, bool up, size_t ndaemons, int64_t timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    char stat[32];
    size_t d;
    bool ok;

    snprintf(stat, sizeof(stat), "master.%zu.up", i);
    for (;;) {
        ok = true;
        for (d = 0; d < ndaemons && ok; d++) {
            ok = ft_stat(d, stat) == (up ? 1 : 0);
        }
        if (ok) {
            return true;
        }
        if (h_now_ms() >= deadline) {
            return false;
        }
        h_sleep_ms(FT_POLL_MS * 4);
    }
}

static void
ft_kill_master(struct ft_run *r, size_t i)
{
    if (h_kill_master(i) != 0) {
        ft_setup_failed(r, "master %zu was not running", i);
        return;
    }
    ft_event(r, "kill -9 master %zu (port %d)", i, h_master_port(i));
}

static void
ft_restart_master(struct ft_run *r, size_t i)
{
    if (h_restart_master(i) != 0) {
        ft_setup_failed(r, "master %zu did not come back", i);
        return;
    }
    ft_event(r, "master %zu restarted, empty", i);
}

static void
ft_signal_master(struct ft_run *r, size_t i, int sig)
{
    if (h_signal_master(i, sig) != 0) {
        ft_setup_failed(r, "cannot signal master %zu", i);
        return;
    }
    ft_event(r, "%s master %zu", sig == SIGSTOP ? "SIGSTOP" : "SIGCONT", i);
}

/*
 * With the restart quarantine on, masters that started a moment ago do
 * not count yet: wait until each daemon grants (a probe lock) and shows
 * no master in quarantine (STATS master.<i>.quarantine_ms, when it
 * exists).
 */
static bool
ft_wait_quarantine_over(struct ft_run *r)
{
    int64_t deadline = h_now_ms() + FT_MAX_TTL_MS + FT_WAIT_MS;
    char stat[48], *line;
    long long q;
    size_t d, i;
    bool ok;
    int fd;

    for (;;) {
        ok = true;
        for (d = 0; d < r->ndaemons && ok; d++) {
            for (i = 0; i < FT_MASTERS && ok; i++) {
                snprintf(stat, sizeof(stat), "master.%zu.quarantine_ms", i);
                q = ft_stat(d, stat);
                ok = q <= 0;
            }
            if (ok) {
                h_use_daemon(d);
                fd = h_connect_tcp();
                line = fd >= 0 ? h_cmd(fd, "LOCK ft-probe ttl=1000 wait=0", 3000) : NULL;
                ok = line != NULL && strncmp(line, "OK ", 3) == 0;
                free(line);
                if (ok) {
                    free(h_cmd(fd, "UNLOCK ft-probe", 3000));
                }
                if (fd >= 0) {
                    close(fd);
                }
            }
        }
        if (ok) {
            ft_event(r, "restart quarantine over: both daemons grant");
            return true;
        }
        if (h_now_ms() >= deadline) {
            return false;
        }
        h_sleep_ms(100);
    }
}

/* ---- clients ---- */

/*
 * Start an rmw-client on name through the daemons in ports (a list,
 * preferred first), holding it as kind says.  sections 0 runs until
 * stopped; poll_ms > 0 makes it poll with LOCK wait=0.  Returns its
 * index, or -1.
 */
static int
ft_start_kind(struct ft_run *r, const char *name, const struct ft_kind *kind,
              const char *ports, long sections, long ttl_ms, const char *sleep, long poll_ms,
              long think_ms)
{
    char counter[16], nsec[24], ttl[24], poll[24], think[48], limit[24], out[PATH_MAX + 64];
    char pct[4][16], fake[24];
    struct ft_client *c;
    const char *argv[48];
    size_t n = 0;

    if (r->nclients == FT_CLIENTS_MAX) {
        return -1;
    }
    c = &r->clients[r->nclients];
    memset(c, 0, sizeof(*c));
    c->status = -1;
    c->finite = sections > 0;
    c->poller = poll_ms > 0;
    c->kind = *kind;
    snprintf(c->name, sizeof(c->name), "%s", name);
    snprintf(c->log, sizeof(c->log), "%s/client-%02zu.log", r->dir, r->nclients);
    snprintf(out, sizeof(out), "%s/client-%02zu.out", r->dir, r->nclients);
    snprintf(counter, sizeof(counter), "%d", ft_counter_port);
    snprintf(nsec, sizeof(nsec), "%ld", sections);
    snprintf(ttl, sizeof(ttl), "%ld", ttl_ms);
    snprintf(poll, sizeof(poll), "%ld", poll_ms);
    if (kind->think_min_ms > 0) {
        snprintf(think, sizeof(think), "%ld-%ld", kind->think_min_ms, think_ms);
    } else {
        snprintf(think, sizeof(think), "%ld", think_ms);
    }
    argv[n++] = ft_client_bin;
    argv[n++] = "-p";
    argv[n++] = ports;
    argv[n++] = "-r";
    argv[n++] = counter;
    argv[n++] = "-n";
    argv[n++] = name;
    argv[n++] = "-l";
    argv[n++] = c->log;
    argv[n++] = "-c";
    argv[n++] = nsec;
    argv[n++] = "-t";
    argv[n++] = ttl;
    argv[n++] = "-s";
    argv[n++] = sleep;
    argv[n++] = "-P";
    argv[n++] = poll;
    argv[n++] = "-k";
    argv[n++] = think;
    if (kind->limit > 0) {
        snprintf(limit, sizeof(limit), "%ld", kind->limit);
        argv[n++] = "-L";
        argv[n++] = limit;
    } else if (kind->shared) {
        argv[n++] = "-S";
    }
    if (kind->ignore_lost) {
        argv[n++] = "-I";
    }
    if (kind->fenced) {
        argv[n++] = "-F";
    }
    if (kind->guarded) {
        argv[n++] = "-G";
    }
    if (kind->lease_pct > 0) {
        snprintf(pct[0], sizeof(pct[0]), "%d", kind->lease_pct);
        snprintf(pct[1], sizeof(pct[1]), "%d", kind->reset_pct);
        snprintf(pct[2], sizeof(pct[2]), "%d", kind->extend_pct);
        snprintf(pct[3], sizeof(pct[3]), "%d", kind->other_pct);
        argv[n++] = "-m";
        argv[n++] = pct[0];
        argv[n++] = "-R";
        argv[n++] = pct[1];
        argv[n++] = "-E";
        argv[n++] = pct[2];
        argv[n++] = "-X";
        argv[n++] = pct[3];
    }
    if (kind->fake_fence != 0) {
        snprintf(fake, sizeof(fake), "%ld", kind->fake_fence);
        argv[n++] = "-Z";
        argv[n++] = fake;
    }
    if (r->net) {
        /* Beyond loopback a daemon requires AUTH (protected mode). */
        argv[n++] = "-a";
        argv[n++] = FT_NET_PASSWORD;
    }
    argv[n] = NULL;
    c->pid = h_spawn(argv, out);
    if (c->pid < 0) {
        c->pid = 0;
        return -1;
    }
    return (int)r->nclients++;
}

/* An exclusive client (ft_start_kind). */
static int
ft_start_client(struct ft_run *r, const char *name, const char *ports, long sections,
                long ttl_ms, const char *sleep, long poll_ms, long think_ms)
{
    return ft_start_kind(r, name, &ft_plain, ports, sections, ttl_ms, sleep, poll_ms,
                         think_ms);
}

/*
 * "p0,p1": the first n daemons, d first, then the next ones in turn
 * ("a0:p0,a1:p1" when they are in namespaces).
 */
static void
ft_ports_of(const struct ft_run *r, size_t d, size_t n, char *out, size_t size)
{
    size_t k, i, used = 0;

    out[0] = '\0';
    for (k = 0; k < n && used < size; k++) {
        i = (d + k) % n;
        if (r->net) {
            used += (size_t)snprintf(out + used, size - used, "%s%s:%d", k > 0 ? "," : "",
                                     r->addrs[i], r->ports[i]);
        } else {
            used += (size_t)snprintf(out + used, size - used, "%s%d", k > 0 ? "," : "",
                                     r->ports[i]);
        }
    }
}

/* The active daemons (all but an idle one), d first. */
static void
ft_ports(const struct ft_run *r, size_t d, char *out, size_t size)
{
    ft_ports_of(r, d, r->nactive, out, size);
}

/* A regular client's kind in a run whose clients mix leases and sessions. */
static struct ft_kind
ft_mixed(const struct ft_run *r, const struct ft_kind *base)
{
    struct ft_kind k = *base;

    if (r->sc->mixed) {
        k.lease_pct = FT_MIX_LEASE;
        k.reset_pct = FT_MIX_RESET;
        k.extend_pct = FT_MIX_EXTEND;
        k.other_pct = FT_MIX_OTHER;
    }
    return k;
}

/* Reap clients that exited; an unexpected exit fails the setup. */
static void
ft_reap(struct ft_run *r)
{
    struct ft_client *c;
    size_t i;
    int status;

    for (i = 0; i < r->nclients; i++) {
        c = &r->clients[i];
        if (c->pid > 0 && waitpid(c->pid, &status, WNOHANG) == c->pid) {
            c->pid = 0;
            c->status = h_decode_status(status);
            if (c->status != 0 && c->killed_us == 0) {
                ft_setup_failed(r, "client %zu exited with status %d (see %s)", i, c->status,
                                c->log);
            }
        }
    }
}

/* SIGKILL client i now and reap it; its kill time goes to the checker. */
static void
ft_kill_client(struct ft_run *r, size_t i)
{
    struct ft_client *c = &r->clients[i];
    int status;

    if (c->pid <= 0) {
        return;
    }
    c->killed_us = ft_now_us();
    kill(c->pid, SIGKILL);
    while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR) {
        continue;
    }
    c->pid = 0;
    c->status = h_decode_status(status);
}

/*
 * Start an operator (break-client) that BREAKs the names (a
 * comma-separated list) through the daemons in ports, pausing every
 * (ms, "MIN-MAX") before each, count times (0: until stopped).
 * Returns its index, or -1 with the setup failure recorded.
 */
static int
ft_start_operator(struct ft_run *r, const char *ports, const char *names, const char *every,
                  long count)
{
    char list[FT_PORTS_MAX], nlist[128], every_arg[32], nc[24], out[PATH_MAX + 64];
    const char *argv[16];
    size_t k = r->noperators, n = 0;

    if (k == FT_OPERATORS_MAX) {
        ft_setup_failed(r, "too many operators");
        return -1;
    }
    snprintf(list, sizeof(list), "%s", ports);
    snprintf(nlist, sizeof(nlist), "%s", names);
    snprintf(every_arg, sizeof(every_arg), "%s", every);
    snprintf(nc, sizeof(nc), "%ld", count);
    snprintf(r->oplogs[k], sizeof(r->oplogs[k]), "%s/operator-%zu.log", r->dir, k);
    snprintf(out, sizeof(out), "%s/operator-%zu.out", r->dir, k);
    argv[n++] = ft_break_bin;
    argv[n++] = "-p";
    argv[n++] = list;
    argv[n++] = "-a";
    argv[n++] = FT_ADMIN_PASSWORD;
    argv[n++] = "-n";
    argv[n++] = nlist;
    argv[n++] = "-l";
    argv[n++] = r->oplogs[k];
    argv[n++] = "-i";
    argv[n++] = every_arg;
    argv[n++] = "-c";
    argv[n++] = nc;
    argv[n] = NULL;
    r->operators[k] = h_spawn(argv, out);
    if (r->operators[k] < 0) {
        r->operators[k] = 0;
        ft_setup_failed(r, "cannot start the operator");
        return -1;
    }
    r->noperators++;
    return (int)k;
}

/*
 * Wait for operator k to end (SIGTERM first when stop), at most
 * FT_WAIT_MS, then SIGKILL; an exit status other than 0 fails the setup.
 */
static void
ft_end_operator(struct ft_run *r, size_t k, bool stop)
{
    int64_t deadline = h_now_ms() + FT_WAIT_MS;
    int status = 0;
    pid_t pid = r->operators[k];

    if (pid <= 0) {
        return;
    }
    if (stop) {
        kill(pid, SIGTERM);
    }
    for (;;) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            break;
        }
        if (h_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            ft_setup_failed(r, "operator %zu did not end within %d ms", k, FT_WAIT_MS);
            break;
        }
        h_sleep_ms(FT_POLL_MS);
    }
    r->operators[k] = 0;
    if (h_decode_status(status) != 0 && !r->setup_failed) {
        ft_setup_failed(r, "operator %zu exited with status %d (see %s)", k,
                        h_decode_status(status), r->oplogs[k]);
    }
}

/* Stop every client: SIGTERM (after SIGCONT), then SIGKILL at the deadline. */
static void
ft_stop_clients(struct ft_run *r)
{
    int64_t deadline = h_now_ms() + FT_STOP_CLIENTS_MS;
    size_t i, running;

    r->stop_us = ft_now_us();
    for (i = 0; i < r->nclients; i++) {
        if (r->clients[i].pid > 0) {
            if (r->clients[i].stopped) {
                kill(r->clients[i].pid, SIGCONT);
                r->clients[i].stopped = false;
            }
            kill(r->clients[i].pid, SIGTERM);
        }
    }
    for (;;) {
        ft_reap(r);
        running = 0;
        for (i = 0; i < r->nclients; i++) {
            running += r->clients[i].pid > 0;
        }
        if (running == 0) {
            break;
        }
        if (h_now_ms() >= deadline) {
            for (i = 0; i < r->nclients; i++) {
                if (r->clients[i].pid > 0) {
                    ft_kill_client(r, i);
                    ft_setup_failed(r, "client %zu ignored SIGTERM for %d ms; killed", i,
                                    FT_STOP_CLIENTS_MS);
                }
            }
            break;
        }
        h_sleep_ms(10);
    }
    for (i = 0; i < r->noperators; i++) {
        ft_end_operator(r, i, true);
    }
    ft_event(r, "clients stopped");
}

/* Load the sections of every client so far (for the waits). */
static void
ft_sections(const struct ft_run *r, struct checker_sections *s)
{
    struct checker_log logs[FT_CLIENTS_MAX];
    size_t i;

    for (i = 0; i < r->nclients; i++) {
        logs[i].path = r->clients[i].log;
        logs[i].killed_us = r->clients[i].killed_us;
    }
    memset(s, 0, sizeof(*s));
    checker_load(logs, r->nclients, s, NULL, NULL);
}

/*
 * Wait until client i is inside a section that began at most
 * fresh_ms ago (so that a signal sent now lands inside it).  Returns
 * the section's begin time, or -1 at the deadline.
 */
static int64_t
ft_wait_in_section(struct ft_run *r, size_t i, int64_t fresh_ms)
{
    int64_t deadline = h_now_ms() + FT_WAIT_MS, begin;
    struct checker_sections s;
    struct checker_log log = { r->clients[i].log, 0 };

    for (;;) {
        memset(&s, 0, sizeof(s));
        checker_load(&log, 1, &s, NULL, NULL);
        begin = -1;
        if (s.n > 0 && s.v[s.n - 1].how == CHECKER_END_NONE
            && ft_now_us() - s.v[s.n - 1].begin_us < fresh_ms * 1000) {
            begin = s.v[s.n - 1].begin_us;
        }
        checker_free(&s);
        if (begin > 0) {
            return begin;
        }
        if (h_now_ms() >= deadline) {
            return -1;
        }
        h_sleep_ms(FT_POLL_MS);
    }
}

/*
 * Clients that must get their lock again after the heal (every client
 * that runs until stopped, was not killed and waits for its lock rather
 * than polling for it) but have not: their number, and the first one's
 * index in *first.
 */
static size_t
ft_unserved(const struct ft_run *r, const struct checker_sections *s, size_t *first)
{
    size_t i, k, n = 0;
    bool seen;

    for (i = 0; i < r->nclients; i++) {
        if (r->clients[i].finite || r->clients[i].killed_us > 0 || r->clients[i].poller) {
            continue;
        }
        seen = false;
        for (k = 0; k < s->n && !seen; k++) {
            seen = s->v[k].log == i && s->v[k].begin_us >= r->heal_us;
        }
        if (!seen && n++ == 0) {
            *first = i;
        }
    }
    return n;
}

/*
 * After the heal: run until every regular name was granted again, every
 * client that runs until stopped got its lock again at least once, and
 * every client with a fixed number of sections is done, and for at
 * least FT_POST_MIN_MS; at most until the recovery bound has passed
 * (the checker then reports what is missing).
 */
static void
ft_post_phase(struct ft_run *r)
{
    int64_t min_end = h_now_ms() + FT_POST_MIN_MS;
    int64_t deadline = r->heal_us / 1000 + r->bound_ms + 500;
    int64_t tail = r->heal_us / 1000 + r->bound_ms + FT_LIVE_TAIL_MS;

    /* Liveness is judged again from heal + bound: some of that time first. */
    if (r->fault_us > 0 && r->nwindows == 0 && tail > min_end) {
        min_end = tail;
    }
    struct checker_sections s;
    bool done;
    size_t k;

    if (deadline < min_end) {
        deadline = min_end;
    }
    for (;;) {
        ft_reap(r);
        ft_sections(r, &s);
        done = ft_unserved(r, &s, &k) == 0;
        for (k = 0; k < r->nrecovery; k++) {
            done = done && checker_begun_since(&s, r->recovery[k], r->heal_us) > 0;
        }
        checker_free(&s);
        for (k = 0; k < r->nclients; k++) {
            done = done && !(r->clients[k].finite && r->clients[k].pid > 0);
        }
        if ((done && h_now_ms() >= min_end) || h_now_ms() >= deadline) {
            return;
        }
        h_sleep_ms(100);
    }
}

/* After the clients are gone: every lock key must go within max_ttl. */
static void
ft_check_keys_gone(struct ft_run *r)
{
    int64_t start = h_now_ms(), wait_ms = FT_MAX_TTL_MS + FT_SLACK_MS + r->keys_late_ms;
    int64_t deadline = start + wait_ms;
    bool first = true;
    char desc[512];
    long n;

    for (;;) {
        n = ft_lock_keys(desc, sizeof(desc));
        if (n > 0 && first) {
            ft_event(r, "lock keys left when the clients stopped: %s", desc);
        }
        first = false;
        if (n == 0) {
            ft_event(r, "no lock key on any master (%lld ms after the clients stopped)",
                     (long long)(h_now_ms() - start));
            return;
        }
        if (h_now_ms() >= deadline) {
            break;
        }
        h_sleep_ms(50);
    }
    if (n < 0) {
        ft_setup_failed(r, "a master could not be asked for its keys");
    } else {
        ft_external(r, "%ld lock keys left %lld ms after the clients stopped: %s", n,
                    (long long)wait_ms, desc);
    }
}

/* ---- schedules ---- */

static void
ft_pause(int64_t ms)
{
    h_sleep_ms(ms);
}

/* The warm-up before the first fault, ms long: the fault's window begins after it. */
static void
ft_warmup(struct ft_run *r, int64_t ms)
{
    ft_pause(ms);
    if (r->fault_us == 0) {
        r->fault_us = ft_now_us();
    }
}

/* kill -9 one master, then a second; restart both (empty) later. */
static void
ft_sched_kill_masters(struct ft_run *r)
{
    ft_warmup(r, FT_WARMUP_MS);
    ft_kill_master(r, 4);
    ft_pause(2000);
    ft_kill_master(r, 3);
    ft_pause(2000);
    ft_restart_master(r, 3);
    ft_restart_master(r, 4);
    r->heal_us = ft_now_us();
}

/* SIGSTOP the last n masters for ms, then SIGCONT. */
static void
ft_stop_masters(struct ft_run *r, size_t n, int64_t ms)
{
    size_t i;

    ft_warmup(r, FT_WARMUP_MS);
    for (i = 0; i < n; i++) {
        ft_signal_master(r, FT_MASTERS - 1 - i, SIGSTOP);
    }
    ft_pause(ms);
    for (i = 0; i < n; i++) {
        ft_signal_master(r, FT_MASTERS - 1 - i, SIGCONT);
    }
    r->heal_us = ft_now_us();
}

static void
ft_sched_stop1_short(struct ft_run *r)
{
    ft_stop_masters(r, 1, FT_SHORT_STOP_MS);
}

static void
ft_sched_stop2_short(struct ft_run *r)
{
    ft_stop_masters(r, 2, FT_SHORT_STOP_MS);
}

static void
ft_sched_stop1_long(struct ft_run *r)
{
    ft_stop_masters(r, 1, FT_LONG_STOP_MS);
}

static void
ft_sched_stop2_long(struct ft_run *r)
{
    ft_stop_masters(r, 2, FT_LONG_STOP_MS);
}


/* ---- records of killed holders: they must be freed in time ---- */

static size_t ft_masters_with(const char *key, const char *value, size_t *answered);

/* Live members of a shared set: score (its expiry, ms) above the master's clock. */
static const char ft_live_lua[] =
    "if redis.call('TYPE', KEYS[1]).ok ~= 'zset' then return {} end "
    "local t = redis.call('TIME') "
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
    "return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')";

/*
 * The live members of the shared set key on master i, up to max into
 * out (each up to 63 bytes): their number, or -1 when the master did not
 * answer.
 */
static long
ft_live_members(size_t i, const char *key, char (*out)[64], size_t max)
{
    redisContext *c = h_master_redis(i);
    redisReply *rep;
    long n = -1;
    size_t k;

    if (c == NULL) {
        return -1;
    }
    rep = redisCommand(c, "EVAL %s 1 %s", ft_live_lua, key);
    if (rep != NULL && rep->type == REDIS_REPLY_ARRAY) {
        n = (long)rep->elements;
        for (k = 0; k < rep->elements && k < max && out != NULL; k++) {
            snprintf(out[k], sizeof(out[k]), "%.*s", (int)rep->element[k]->len,
                     rep->element[k]->str);
        }
    }
    if (rep != NULL) {
        freeReplyObject(rep);
    }
    redisFree(c);
    return n;
}

/* The value a majority of the masters hold under key, into out ("" when none). */
static void
ft_majority_value(const char *key, char *out, size_t size)
{
    char *vals[FT_MASTERS];
    size_t i, j, same;

    out[0] = '\0';
    for (i = 0; i < FT_MASTERS; i++) {
        vals[i] = h_master_get(i, key);
    }
    for (i = 0; i < FT_MASTERS && out[0] == '\0'; i++) {
        same = 0;
        for (j = 0; j < FT_MASTERS && vals[i] != NULL; j++) {
            same += vals[j] != NULL && strcmp(vals[i], vals[j]) == 0;
        }
        if (same > FT_MASTERS / 2) {
            snprintf(out, size, "%s", vals[i]);
        }
    }
    for (i = 0; i < FT_MASTERS; i++) {
        free(vals[i]);
    }
}

/*
 * The permit of client i's section in progress (its log's last section,
 * not ended), or -1.
 */
static int
ft_current_permit(const struct ft_run *r, size_t i)
{
    struct checker_log log = { r->clients[i].log, 0 };
    struct checker_sections s;
    int permit = -1;

    memset(&s, 0, sizeof(s));
    checker_load(&log, 1, &s, NULL, NULL);
    if (s.n > 0 && s.v[s.n - 1].how == CHECKER_END_NONE) {
        permit = s.v[s.n - 1].permit;
    }
    checker_free(&s);
    return permit;
}

/*
 * Before a kill: the permit that client i holds of name now, and its
 * token (the value a majority of the masters hold).  False, with the
 * setup failure recorded, when there is none.
 */
static bool
ft_probe_permit(struct ft_run *r, struct ft_probe *p, size_t i, const char *name)
{
    int permit = ft_current_permit(r, i);

    memset(p, 0, sizeof(*p));
    if (permit < 0) {
        ft_setup_failed(r, "client %zu holds no permit of %s", i, name);
        return false;
    }
    snprintf(p->key, sizeof(p->key), "%s%s permit %d", FT_PREFIX, name, permit);
    ft_majority_value(p->key, p->token, sizeof(p->token));
    snprintf(p->what, sizeof(p->what), "client %zu's permit %d of %s", i, permit, name);
    if (p->token[0] == '\0') {
        ft_setup_failed(r, "no majority value for '%s' on the masters", p->key);
        return false;
    }
    return true;
}

/*
 * Before a kill: every member live on a majority of the masters in the
 * shared set of name (the killed holder's among them, when it holds:
 * the daemon keeps session tokens to itself, so which one is not
 * known).  Returns their number (at most 8).
 */
static size_t
ft_probe_shared(struct ft_probe *p, const char *name, const char *what)
{
    char seen[FT_MASTERS][8][64];
    long n[FT_MASTERS];
    size_t i, j, k, m, same;
    bool dup;

    memset(p, 0, sizeof(*p));
    snprintf(p->key, sizeof(p->key), "%s%s", FT_PREFIX, name);     /* the holders' set */
    snprintf(p->what, sizeof(p->what), "%s", what);
    for (i = 0; i < FT_MASTERS; i++) {
        n[i] = ft_live_members(i, p->key, seen[i], 8);
        if (n[i] > 8) {
            n[i] = 8;
        }
    }
    for (i = 0; i < FT_MASTERS; i++) {
        for (k = 0; k < (size_t)(n[i] > 0 ? n[i] : 0); k++) {
            same = 0;
            for (j = 0; j < FT_MASTERS; j++) {
                for (m = 0; m < (size_t)(n[j] > 0 ? n[j] : 0); m++) {
                    same += strcmp(seen[i][k], seen[j][m]) == 0;
                }
            }
            dup = false;
            for (m = 0; m < p->nmembers; m++) {
                dup = dup || strcmp(p->members[m], seen[i][k]) == 0;
            }
            if (same > FT_MASTERS / 2 && !dup && p->nmembers < 8) {
                snprintf(p->members[p->nmembers++], sizeof(p->members[0]), "%s", seen[i][k]);
            }
        }
    }
    return p->nmembers;
}

/* Masters on which the probe's record is still held; *answered: masters that answered. */
static size_t
ft_probe_held(const struct ft_probe *p, size_t *answered)
{
    char live[16][64];
    size_t i, k, m, held = 0;
    long n;
    bool any;

    if (p->nmembers == 0) {
        return ft_masters_with(p->key, p->token, answered);
    }
    *answered = 0;
    for (i = 0; i < FT_MASTERS; i++) {
        n = ft_live_members(i, p->key, live, 16);
        if (n < 0) {
            continue;
        }
        (*answered)++;
        any = false;
        for (k = 0; k < (size_t)n && k < 16; k++) {
            for (m = 0; m < p->nmembers; m++) {
                any = any || strcmp(live[k], p->members[m]) == 0;
            }
        }
        held += any;
    }
    return held;
}

/*
 * Wait until no master holds any of the probes' records, at most
 * timeout_ms; each one still held then is a violation.  Notes how long
 * each took.
 */
static void
ft_probes_wait(struct ft_run *r, const struct ft_probe *p, size_t n, int64_t timeout_ms)
{
    int64_t start = h_now_ms(), took[FT_PROBE_MAX];
    size_t i, answered, held[FT_PROBE_MAX], left = n;

    for (i = 0; i < n; i++) {
        took[i] = -1;
        held[i] = 0;
    }
    for (;;) {
        for (i = 0; i < n; i++) {
            if (took[i] >= 0) {
                continue;
            }
            held[i] = ft_probe_held(&p[i], &answered);
            if (held[i] == 0 && answered == FT_MASTERS) {
                took[i] = h_now_ms() - start;
                left--;
            }
        }
        if (left == 0 || h_now_ms() - start >= timeout_ms) {
            break;
        }
        h_sleep_ms(FT_POLL_MS);
    }
    for (i = 0; i < n; i++) {
        if (took[i] < 0) {
            ft_external(r, "%s is still held on %zu masters %lld ms after the kill", p[i].what,
                        held[i], (long long)timeout_ms);
        } else {
            ft_event(r, "%s is free on all %d masters after %lld ms", p[i].what, FT_MASTERS,
                     (long long)took[i]);
            ft_note(r, "%s free on all masters %lld ms after the kill", p[i].what,
                    (long long)took[i]);
        }
    }
}

/*
 * Wait until each client in idx[0..n) is inside a section that began at
 * most fresh_ms[k] ago, all at the same moment.  False at the deadline.
 */
static bool
ft_wait_in_sections(struct ft_run *r, const size_t *idx, const int64_t *fresh_ms, size_t n,
                    int64_t timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    struct checker_sections s;
    struct checker_log log;
    size_t k;
    bool ok;

    for (;;) {
        ok = true;
        for (k = 0; k < n && ok; k++) {
            log.path = r->clients[idx[k]].log;
            log.killed_us = 0;
            memset(&s, 0, sizeof(s));
            checker_load(&log, 1, &s, NULL, NULL);
            ok = s.n > 0 && s.v[s.n - 1].how == CHECKER_END_NONE
                 && ft_now_us() - s.v[s.n - 1].begin_us < fresh_ms[k] * 1000;
            checker_free(&s);
        }
        if (ok) {
            return true;
        }
        if (h_now_ms() >= deadline) {
            return false;
        }
        h_sleep_ms(FT_POLL_MS);
    }
}

/* A client with long sections on name (held as kind says) through daemon d first. */
static int
ft_start_victim_kind(struct ft_run *r, size_t d, const char *name, const struct ft_kind *kind)
{
    char ports[FT_PORTS_MAX], sleep[16];
    int v;

    ft_ports(r, d, ports, sizeof(ports));
    snprintf(sleep, sizeof(sleep), "%d", FT_VICTIM_SLEEP_MS);
    v = ft_start_kind(r, name, kind, ports, 0, FT_TTL_MS, sleep, 0, FT_THINK_MS);
    if (v < 0) {
        ft_setup_failed(r, "cannot start a victim client on %s", name);
        return -1;
    }
    r->clients[v].daemon = (int)d;
    return v;
}

/* A client with long sections on acct-a through daemon d first. */
static int
ft_start_victim(struct ft_run *r, size_t d)
{
    char ports[FT_PORTS_MAX], sleep[16];
    int v;

    ft_ports(r, d, ports, sizeof(ports));
    snprintf(sleep, sizeof(sleep), "%d", FT_VICTIM_SLEEP_MS);
    v = ft_start_client(r, ft_names[0], ports, 0, FT_TTL_MS, sleep, 0, FT_THINK_MS);
    if (v < 0) {
        ft_setup_failed(r, "cannot start the victim client");
        return -1;
    }
    r->clients[v].daemon = (int)d;
    return v;
}

/*
 * kill -9 daemon 1 while one of its clients (a victim with long
 * sections) holds acct-a: that client's lock lives on until its keys
 * expire, the other clients of daemon 1 reconnect to daemon 0.
 */
static void
ft_sched_kill_daemon(struct ft_run *r)
{
    struct ft_probe probes[2];
    int v = ft_start_victim(r, 1), vs = -1;
    size_t np = 0;

    if (v < 0) {
        return;
    }
    if (r->kinds && (vs = ft_start_victim_kind(r, 1, FT_SEM, &ft_counted)) < 0) {
        return;
    }
    ft_warmup(r, FT_WARMUP_MS);
    if (vs >= 0) {
        /* Both victims inside a section: acct-a's fresh, the permit's not near its end. */
        size_t idx[2] = { (size_t)v, (size_t)vs };
        int64_t fresh[2] = { FT_VICTIM_SLEEP_MS / 3, 2 * FT_VICTIM_SLEEP_MS / 3 };

        if (!ft_wait_in_sections(r, idx, fresh, 2, 2 * FT_WAIT_MS)) {
            ft_setup_failed(r, "the victims never held %s and %s at once", ft_names[0],
                            FT_SEM);
            return;
        }
        if (!ft_probe_permit(r, &probes[np++], (size_t)vs, FT_SEM)) {
            return;
        }
        /* The shared holders of FT_RW through daemon 1 (if any) expire too. */
        if (ft_probe_shared(&probes[np], FT_RW, "every shared holder of " FT_RW
                            " at the kill") > 0) {
            np++;
        }
    } else if (ft_wait_in_section(r, (size_t)v, FT_VICTIM_SLEEP_MS / 3) < 0) {
        ft_setup_failed(r, "the victim client never got %s", ft_names[0]);
        return;
    }
    h_use_daemon(1);
    if (h_signal_daemon(SIGKILL) != 0) {
        ft_setup_failed(r, "daemon 1 was not running");
        return;
    }
    r->heal_us = ft_now_us();
    r->killed_daemon = 1;
    h_wait_daemon(2000);
    ft_event(r, "kill -9 daemon 1 (port %d) while client %d holds %s through it", r->ports[1],
             v, ft_names[0]);
    h_use_daemon(0);
    if (np > 0) {
        /* Nobody releases what the dead daemon held: its keys expire, within a ttl. */
        ft_event(r, "client %d held %s through it: %s", vs, FT_SEM, probes[0].key);
        ft_probes_wait(r, probes, np, FT_TTL_MS + FT_SLACK_MS);
    }
}

/*
 * SIGSTOP a client inside its section for 2 ttl: its connection stays
 * open, so the daemon keeps renewing its lock and the others wait.
 */
static void
ft_sched_stop_client(struct ft_run *r)
{
    struct checker_sections s;
    const struct checker_section *held;
    int64_t stop_us, cont_us, deadline;
    int v = ft_start_victim(r, 0);

    if (v < 0) {
        return;
    }
    ft_warmup(r, FT_WARMUP_MS);
    if (ft_wait_in_section(r, (size_t)v, FT_VICTIM_SLEEP_MS / 3) < 0) {
        ft_setup_failed(r, "the victim client never got %s", ft_names[0]);
        return;
    }
    kill(r->clients[v].pid, SIGSTOP);
    stop_us = ft_now_us();
    r->clients[v].stopped = true;
    ft_event(r, "SIGSTOP client %d (pid %d) inside its section on %s", v,
             (int)r->clients[v].pid, ft_names[0]);
    ft_pause(FT_CLIENT_STOP_MS);
    kill(r->clients[v].pid, SIGCONT);
    cont_us = ft_now_us();
    r->clients[v].stopped = false;
    r->heal_us = cont_us;
    ft_event(r, "SIGCONT client %d", v);
    /* Wait for its section to end, then see that it spanned the stop. */
    deadline = h_now_ms() + FT_WAIT_MS;
    for (;;) {
        ft_sections(r, &s);
        held = checker_held_at(&s, (size_t)v, stop_us);
        if (held == NULL || held->how != CHECKER_END_NONE || h_now_ms() >= deadline) {
            break;
        }
        checker_free(&s);
        h_sleep_ms(FT_POLL_MS * 4);
    }
    if (held == NULL || held->how == CHECKER_END_NONE || held->end_us <= cont_us) {
        ft_setup_failed(r, "the stopped client was not inside a section for the whole stop");
    } else {
        ft_note(r, "client %d held %s through its %.1f s SIGSTOP (fence %lld, %s), "
                "by design: the connection stayed open", v, held->name,
                (double)(cont_us - stop_us) / 1e6, held->fence,
                held->how == CHECKER_END_WROTE ? "then wrote" : "then did not write");
    }
    checker_free(&s);
}

/* Masters holding value under key; also counts the masters that answered. */
static size_t
ft_masters_with(const char *key, const char *value, size_t *answered)
{
    size_t i, n = 0;
    char *v;

    *answered = 0;
    for (i = 0; i < FT_MASTERS; i++) {
        long long ttl = h_master_pttl(i, key);

        if (ttl == H_PTTL_ERROR) {
            continue;
        }
        (*answered)++;
        v = ttl == H_PTTL_ABSENT ? NULL : h_master_get(i, key);
        n += v != NULL && strcmp(v, value) == 0;
        free(v);
    }
    return n;
}

/*
 * kill -9 a holder of a permit of FT_SEM and a shared holder of FT_RW,
 * both inside their sections, at once: their sessions close, so the
 * daemon releases both records at once (within FT_RELEASE_MS).
 */
static void
ft_kill_kind_victims(struct ft_run *r, int vs, int vr)
{
    size_t idx[2] = { (size_t)vs, (size_t)vr };
    int64_t fresh[2] = { 2 * FT_VICTIM_SLEEP_MS / 3, 2 * FT_VICTIM_SLEEP_MS / 3 };
    struct ft_probe probes[2];
    char what[64];

    if (!ft_wait_in_sections(r, idx, fresh, 2, 2 * FT_WAIT_MS)) {
        ft_setup_failed(r, "the victims never held %s and %s at once", FT_SEM, FT_RW);
        return;
    }
    snprintf(what, sizeof(what), "the shared holders of %s at the kill", FT_RW);
    if (!ft_probe_permit(r, &probes[0], (size_t)vs, FT_SEM)) {
        return;
    }
    if (ft_probe_shared(&probes[1], FT_RW, what) == 0) {
        ft_setup_failed(r, "client %d is in its section but no shared holder of %s is on a "
                        "majority of the masters", vr, FT_RW);
        return;
    }
    ft_kill_client(r, (size_t)vs);
    ft_kill_client(r, (size_t)vr);
    r->heal_us = r->clients[vr].killed_us;
    ft_event(r, "kill -9 client %d inside its section on %s ('%s', token %.8s...) and client "
             "%d inside its shared section on %s (%zu live members)", vs, FT_SEM, probes[0].key,
             probes[0].token, vr, FT_RW, probes[1].nmembers);
    ft_probes_wait(r, probes, 2, FT_RELEASE_MS);
}

/* kill -9 a client inside its section: its keys must go within 1 s. */
static void
ft_sched_kill_client(struct ft_run *r)
{
    char key[CHECKER_NAME_MAX + 16], token[64] = "";
    size_t i, j, same, answered, left = 0;
    int64_t start, took = -1;
    char *vals[FT_MASTERS];
    int v = ft_start_victim(r, 0), vs = -1, vr = -1;

    if (v < 0) {
        return;
    }
    if (r->kinds && ((vs = ft_start_victim_kind(r, 0, FT_SEM, &ft_counted)) < 0
                     || (vr = ft_start_victim_kind(r, 0, FT_RW, &ft_shared)) < 0)) {
        return;
    }
    snprintf(key, sizeof(key), "%s%s", FT_PREFIX, ft_names[0]);
    ft_warmup(r, FT_WARMUP_MS);
    if (ft_wait_in_section(r, (size_t)v, FT_VICTIM_SLEEP_MS / 3) < 0) {
        ft_setup_failed(r, "the victim client never got %s", ft_names[0]);
        return;
    }
    /* Its token: the value that a majority of the masters hold. */
    for (i = 0; i < FT_MASTERS; i++) {
        vals[i] = h_master_get(i, key);
    }
    for (i = 0; i < FT_MASTERS && token[0] == '\0'; i++) {
        same = 0;
        for (j = 0; j < FT_MASTERS && vals[i] != NULL; j++) {
            same += vals[j] != NULL && strcmp(vals[i], vals[j]) == 0;
        }
        if (same > FT_MASTERS / 2) {
            snprintf(token, sizeof(token), "%s", vals[i]);
        }
    }
    for (i = 0; i < FT_MASTERS; i++) {
        free(vals[i]);
    }
    ft_kill_client(r, (size_t)v);
    r->heal_us = r->clients[v].killed_us;
    ft_event(r, "kill -9 client %d inside its section on %s (token %.8s...)", v, ft_names[0],
             token);
    if (token[0] == '\0') {
        ft_setup_failed(r, "no majority value for %s on the masters", key);
        return;
    }
    start = h_now_ms();
    for (;;) {
        left = ft_masters_with(key, token, &answered);
        if (left == 0 && answered == FT_MASTERS) {
            took = h_now_ms() - start;
            break;
        }
        if (h_now_ms() - start >= FT_RELEASE_MS) {
            break;
        }
        h_sleep_ms(FT_POLL_MS);
    }
    if (took < 0) {
        ft_external(r, "the killed client's token is still on %zu masters (%zu answered) "
                    "%d ms after the kill", left, answered, FT_RELEASE_MS);
    } else {
        ft_event(r, "its token is gone from all %d masters after %lld ms", FT_MASTERS,
                 (long long)took);
        ft_note(r, "killed client's keys gone from all masters in %lld ms", (long long)took);
    }
    if (vs >= 0) {
        ft_kill_kind_victims(r, vs, vr);
    }
}

/* Wait until PTTL of key on master i rises (the holder's lease was renewed). */
static bool
ft_wait_renewal(size_t i, const char *key, int64_t timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    long long prev = h_master_pttl(i, key), now;

    for (;;) {
        h_sleep_ms(FT_POLL_MS);
        now = h_master_pttl(i, key);
        if (now >= 0 && prev >= 0 && now > prev + 100) {
            return true;
        }
        prev = now;
        if (h_now_ms() >= deadline) {
            return false;
        }
    }
}

/*
 * Wait until the PTTL of each of keys[0..n) on master i rose once (each
 * holder's lease was renewed).  True in time.
 */
static bool
ft_wait_renewals(size_t i, char (*keys)[CHECKER_NAME_MAX + 32], size_t n, int64_t timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    long long prev[FT_LIMIT + 2], now;
    bool renewed[FT_LIMIT + 2];
    size_t k, left = n;

    for (k = 0; k < n; k++) {
        prev[k] = h_master_pttl(i, keys[k]);
        renewed[k] = false;
    }
    for (;;) {
        h_sleep_ms(FT_POLL_MS);
        for (k = 0; k < n; k++) {
            if (renewed[k]) {
                continue;
            }
            now = h_master_pttl(i, keys[k]);
            if (now >= 0 && prev[k] >= 0 && now > prev[k] + 100) {
                renewed[k] = true;
                left--;
            }
            prev[k] = now;
        }
        if (left == 0) {
            return true;
        }
        if (h_now_ms() >= deadline) {
            return false;
        }
    }
}

/*
 * The restart schedules with kinds: FT_HOT_SEM's three permits and
 * FT_HOT_RW held by long holders through daemon 0, like FT_HOT; then two
 * clients poll for a permit of FT_HOT_SEM and two for FT_HOT_RW through
 * daemon 1.  FT_HOT_RW's holder is shared and its contenders exclusive
 * when shared_holder, else the other way round.  Returns 0, or -1 with
 * the setup failure recorded.
 */
static int
ft_start_hot_kinds(struct ft_run *r, bool shared_holder)
{
    char ports[16], sleep[16];
    size_t idx[FT_LIMIT + 1], k;
    int64_t fresh[FT_LIMIT + 1];
    int c;

    snprintf(ports, sizeof(ports), "%d", r->ports[0]);
    snprintf(sleep, sizeof(sleep), "%d", FT_HOLD_SLEEP_MS);
    for (k = 0; k <= FT_LIMIT; k++) {
        c = ft_start_kind(r, k < FT_LIMIT ? FT_HOT_SEM : FT_HOT_RW,
                          k < FT_LIMIT ? &ft_counted : shared_holder ? &ft_shared : &ft_plain,
                          ports, 1, FT_MAX_TTL_MS, sleep, 0, 0);
        if (c < 0) {
            ft_setup_failed(r, "cannot start the holders of %s and %s", FT_HOT_SEM, FT_HOT_RW);
            return -1;
        }
        idx[k] = (size_t)c;
        fresh[k] = FT_HOLD_SLEEP_MS;
    }
    r->hot_kinds = true;
    r->neg_counted = FT_HOT_SEM;
    r->neg_shared = FT_HOT_RW;
    if (!ft_wait_in_sections(r, idx, fresh, FT_LIMIT + 1, FT_WAIT_MS)) {
        ft_setup_failed(r, "the holders did not get %s and %s", FT_HOT_SEM, FT_HOT_RW);
        return -1;
    }
    ft_event(r, "clients %zu-%zu hold the %d permits of %s, client %zu holds %s %s, through "
             "daemon 0", idx[0], idx[FT_LIMIT - 1], FT_LIMIT, FT_HOT_SEM, idx[FT_LIMIT],
             FT_HOT_RW, shared_holder ? "shared" : "exclusive");
    snprintf(ports, sizeof(ports), "%d", r->ports[1]);
    snprintf(sleep, sizeof(sleep), "%d", 200);
    for (k = 0; k < 4; k++) {
        if (ft_start_kind(r, k < 2 ? FT_HOT_SEM : FT_HOT_RW,
                          k < 2 ? &ft_counted : shared_holder ? &ft_plain : &ft_shared,
                          ports, 1, FT_MAX_TTL_MS, sleep, FT_POLL_CLIENT_MS, 0) < 0) {
            ft_setup_failed(r, "cannot start the contenders of %s and %s", FT_HOT_SEM,
                            FT_HOT_RW);
            return -1;
        }
    }
    ft_event(r, "two clients poll for %s, two for %s %s, through daemon 1", FT_HOT_SEM,
             FT_HOT_RW, shared_holder ? "exclusive" : "shared");
    return 0;
}

/*
 * The restart schedules' two clients of FT_HOT: a long holder (one
 * FT_HOLD_SLEEP_MS section, ttl max_ttl) through daemon 0, waited for
 * until it is inside its section, then a contender polling through
 * daemon 1.  Returns 0, or -1 with the setup failure recorded.
 */
static int
ft_start_hot_pair(struct ft_run *r, const char *key)
{
    char ports[16], sleep[16];
    int holder, contender;

    snprintf(ports, sizeof(ports), "%d", r->ports[0]);
    snprintf(sleep, sizeof(sleep), "%d", FT_HOLD_SLEEP_MS);
    holder = ft_start_client(r, FT_HOT, ports, 1, FT_MAX_TTL_MS, sleep, 0, 0);
    if (holder < 0 || ft_wait_in_section(r, (size_t)holder, FT_HOLD_SLEEP_MS) < 0) {
        ft_setup_failed(r, "the holder did not get %s", FT_HOT);
        return -1;
    }
    ft_event(r, "client %d holds %s through daemon 0, on %zu masters", holder, FT_HOT,
             h_masters_holding(key, NULL));
    snprintf(ports, sizeof(ports), "%d", r->ports[1]);
    snprintf(sleep, sizeof(sleep), "%d", 200);
    contender = ft_start_client(r, FT_HOT, ports, 1, FT_MAX_TTL_MS, sleep, FT_POLL_CLIENT_MS, 0);
    if (contender < 0) {
        ft_setup_failed(r, "cannot start the contender");
        return -1;
    }
    ft_event(r, "client %d polls for %s through daemon 1", contender, FT_HOT);
    return 0;
}

/*
 * Masters on which key holds what it holds on master 2, which kept its
 * keys through the first restart: the long holder's own token.  A
 * contender's passing key on a restarted master (its try landed there
 * before the holder's renewal put the holder's back, and its clean-up
 * deletes it) does not count: counting any value, the schedule once saw
 * "on 5 masters" in that moment and restarted masters 0 and 1 while the
 * holder's permit was on master 2 alone.
 */
static size_t
ft_masters_like_2(const char *key)
{
    char *token = h_master_get(2, key);
    size_t n = token != NULL ? h_masters_holding(key, token) : 0;

    free(token);
    return n;
}

/* Masters on which permit i of FT_HOT_SEM is held by its long holder. */
static size_t
ft_permit_masters(size_t i)
{
    char key[CHECKER_NAME_MAX + 32];

    snprintf(key, sizeof(key), "%s%s permit %zu", FT_PREFIX, FT_HOT_SEM, i);
    return ft_masters_like_2(key);
}

/* Masters on which the shared set of name has a live member. */
static size_t
ft_member_masters(const char *name)
{
    char key[CHECKER_NAME_MAX + 32];
    size_t i, n = 0;

    snprintf(key, sizeof(key), "%s%s", FT_PREFIX, name);    /* the holders' set */
    for (i = 0; i < FT_MASTERS; i++) {
        n += ft_live_members(i, key, NULL, 0) > 0;
    }
    return n;
}

/*
 * Without the quarantine: wait until renewals put the long holders of
 * FT_HOT_SEM (its three permits) and FT_HOT_RW (a shared member) back on
 * the restarted masters too.  False, with the setup failure recorded, at
 * the deadline.
 */
static bool
ft_wait_kinds_restored(struct ft_run *r)
{
    int64_t deadline = h_now_ms() + FT_WAIT_MS;
    size_t i, least;

    for (;;) {
        least = ft_member_masters(FT_HOT_RW);
        for (i = 0; i < FT_LIMIT; i++) {
            size_t n = ft_permit_masters(i);

            least = n < least ? n : least;
        }
        if (least == FT_MASTERS) {
            ft_event(r, "renewals put %s's permits and %s's shared member back: on %d masters",
                     FT_HOT_SEM, FT_HOT_RW, FT_MASTERS);
            return true;
        }
        if (h_now_ms() >= deadline) {
            ft_setup_failed(r, "%s's permits or %s's shared member were not put back on "
                            "masters 3 and 4 (%s: %zu/%zu/%zu masters, %s: %zu)", FT_HOT_SEM,
                            FT_HOT_RW, FT_HOT_SEM, ft_permit_masters(0), ft_permit_masters(1),
                            ft_permit_masters(2), FT_HOT_RW, ft_member_masters(FT_HOT_RW));
            return false;
        }
        h_sleep_ms(FT_POLL_MS);
    }
}

/*
 * Restart two masters empty while a lock is held on exactly a quorum:
 * masters 3 and 4 die; a long holder (daemon 0) takes "hot" on {0,1,2};
 * 3 and 4 come back empty; right after one of the holder's renewals,
 * masters 0 and 1 are restarted empty too.  Without the quarantine, that
 * renewal (confirmed by {0,1,2}) has put the holder's keys back on 3 and
 * 4, and the schedule waits until they are there: the lock is then on
 * {2,3,4} after the second restart and no contender can take a quorum.
 * With the quarantine, 3 and 4 do not count (nothing is put back there),
 * the holder's keys are on master 2 alone, and the contender polling
 * through daemon 1 gets nothing until the restarted masters count again.
 */
static void
ft_sched_restart_empty(struct ft_run *r)
{
    char key[CHECKER_NAME_MAX + 16];
    size_t held;

    snprintf(key, sizeof(key), "%s%s", FT_PREFIX, FT_HOT);
    r->hot = true;
    ft_warmup(r, FT_WARMUP_MS);
    ft_kill_master(r, 3);
    ft_kill_master(r, 4);
    if (ft_start_hot_pair(r, key) != 0) {
        return;
    }
    if (r->kinds && ft_start_hot_kinds(r, true) != 0) {
        return;
    }
    ft_restart_master(r, 3);
    ft_restart_master(r, 4);
    if (!ft_wait_master_up(3, true, h_daemon_count(), FT_WAIT_MS)
        || !ft_wait_master_up(4, true, h_daemon_count(), FT_WAIT_MS)) {
        ft_setup_failed(r, "the daemons did not reconnect to masters 3 and 4");
        return;
    }
    ft_event(r, "both daemons reconnected to masters 3 and 4");
    if (!ft_wait_renewal(2, key, FT_MAX_TTL_MS)) {
        ft_setup_failed(r, "the holder's lease was not renewed on master 2");
        return;
    }
    ft_event(r, "the holder's lease was renewed");
    if (!r->sc->quarantine) {
        int64_t deadline = h_now_ms() + FT_WAIT_MS;

        while ((held = ft_masters_like_2(key)) < FT_MASTERS && h_now_ms() < deadline) {
            h_sleep_ms(FT_POLL_MS);
        }
        if (held < FT_MASTERS) {
            ft_setup_failed(r, "the holder's keys were not put back on masters 3 and 4 "
                            "(%zu masters hold %s)", held, FT_HOT);
            return;
        }
        ft_event(r, "the renewal put %s back on masters 3 and 4: on %zu masters", FT_HOT, held);
        if (r->kinds && !ft_wait_kinds_restored(r)) {
            return;
        }
    }
    ft_kill_master(r, 0);
    ft_kill_master(r, 1);
    ft_restart_master(r, 0);
    ft_restart_master(r, 1);
    r->heal_us = ft_now_us();
    ft_event(r, "%s is now on %zu masters", FT_HOT, h_masters_holding(key, NULL));
    if (r->kinds) {
        ft_event(r, "%s's permits are on %zu, %zu and %zu masters, %s's shared holder on %zu",
                 FT_HOT_SEM, ft_permit_masters(0), ft_permit_masters(1), ft_permit_masters(2),
                 FT_HOT_RW, ft_member_masters(FT_HOT_RW));
    }
    /* Quarantine: the first grant needs three masters out of it, and the
       keys still on master 2 to expire. */
    r->bound_ms = FT_MAX_TTL_MS + FT_TTL_MS + 4 * FT_RETRY_MS + FT_SLACK_MS;
}

/*
 * Restart a majority empty at once while a lock is on all five: a long
 * holder (daemon 0) takes "hot"; a contender polls through daemon 1;
 * right after one of the holder's renewals masters 0, 1 and 2 are
 * killed and restarted empty, so the holder's keys are on {3,4} only
 * and no renewal can put them back (it needs a quorum's confirmation).
 * Without the restart quarantine the contender takes "hot" on {0,1,2}
 * while the holder is inside its section (the negative control); with
 * it, the restarted masters do not count until max_ttl has passed.
 */
static void
ft_sched_restart_majority(struct ft_run *r)
{
    char keys[FT_LIMIT + 2][CHECKER_NAME_MAX + 32];
    size_t i, nkeys = 0;

    snprintf(keys[nkeys++], sizeof(keys[0]), "%s%s", FT_PREFIX, FT_HOT);
    r->hot = true;
    r->neg_exclusive = FT_HOT;
    ft_warmup(r, FT_WARMUP_MS);
    if (ft_start_hot_pair(r, keys[0]) != 0) {
        return;
    }
    if (r->kinds) {
        if (ft_start_hot_kinds(r, false) != 0) {
            return;
        }
        for (i = 0; i < FT_LIMIT; i++) {
            snprintf(keys[nkeys++], sizeof(keys[0]), "%s%s permit %zu", FT_PREFIX, FT_HOT_SEM,
                     i);
        }
        snprintf(keys[nkeys++], sizeof(keys[0]), "%s%s", FT_PREFIX, FT_HOT_RW);
    }
    if (!ft_wait_renewals(4, keys, nkeys, FT_MAX_TTL_MS)) {
        ft_setup_failed(r, "the holders' leases were not renewed on master 4");
        return;
    }
    ft_event(r, "the holder's lease was renewed%s", nkeys > 1 ? ", and the others'" : "");
    for (i = 0; i < 3; i++) {
        ft_kill_master(r, i);
    }
    for (i = 0; i < 3; i++) {
        ft_restart_master(r, i);
    }
    r->heal_us = ft_now_us();
    for (i = 0; i < nkeys; i++) {
        ft_event(r, "'%s' is now on %zu masters", keys[i], h_masters_holding(keys[i], NULL));
    }
    r->bound_ms = FT_MAX_TTL_MS + FT_TTL_MS + 4 * FT_RETRY_MS + FT_SLACK_MS;
}

/* True when the clock check is on in the run's daemons. */
static bool
ft_clock_check_on(const struct ft_run *r)
{
    return r->sc->clock_check == NULL || strcmp(r->sc->clock_check, "false") != 0;
}

/*
 * What daemon d's STATS say of the masters' clocks, from one STATS
 * request: "clock_steps 1/1/1/0/0, quarantine_ms 6012/6010/6009/0/0"
 * (a value per master, "-" for a line STATS does not have) into out;
 * into *missed the stepped masters whose step it did not count (fewer
 * than one), a bit per master.
 */
static void
ft_clock_stats(const struct ft_run *r, size_t d, char *out, size_t size, uint32_t *missed)
{
    static const char *const stats[] = { "clock_steps", "quarantine_ms" };
    long long v[2][FT_MASTERS];
    char field[32], *line, *p = out;
    size_t i, k;
    int fd, n;

    for (k = 0; k < 2; k++) {
        for (i = 0; i < FT_MASTERS; i++) {
            v[k][i] = -1;
        }
    }
    h_use_daemon(d);
    fd = h_connect_tcp();
    if (fd >= 0 && h_send(fd, "STATS") == 0) {
        /* "STAT master.<i>.<field> <value>" lines, up to END. */
        while ((line = h_read_line(fd, 1000)) != NULL && strcmp(line, "END") != 0) {
            long long value;

            if (sscanf(line, "STAT master.%zu.%31s %lld%n", &i, field, &value, &n) == 3
                && line[n] == '\0' && i < FT_MASTERS) {
                for (k = 0; k < 2; k++) {
                    if (strcmp(field, stats[k]) == 0) {
                        v[k][i] = value;
                    }
                }
            }
            free(line);
        }
        free(line);
    }
    if (fd >= 0) {
        close(fd);
    }
    *missed = 0;
    out[0] = '\0';
    for (k = 0; k < 2; k++) {
        p += snprintf(p, size - (size_t)(p - out), "%s%s ", k > 0 ? ", " : "", stats[k]);
        for (i = 0; i < FT_MASTERS; i++) {
            if (k == 0 && (r->sc->clock_masters & (1u << i)) != 0 && v[k][i] < 1) {
                *missed |= 1u << i;
            }
            if (v[k][i] < 0) {
                p += snprintf(p, size - (size_t)(p - out), "%s-", i > 0 ? "/" : "");
            } else {
                p += snprintf(p, size - (size_t)(p - out), "%s%lld", i > 0 ? "/" : "",
                              v[k][i]);
            }
        }
    }
}

/*
 * Step the wall clocks of masters 0, 1 and 2 by offset_ms while locks
 * are held on all five: the regular clients run, a long holder of "hot"
 * (one 8 s section, ttl max_ttl) and the long holders of "hot-sem" and
 * "hot-rw" hold through daemon 0 while contenders poll through daemon 1,
 * and the step comes right after a renewal of every long holder.  A
 * step forward by more than the ttl expires their keys on the three
 * masters at once, so a daemon that counts those masters' answers
 * grants the contenders what the holders hold (the negative control,
 * lock.clock_check false); with the check the daemons see each master's
 * TIME jump against their monotonic clock and do not count it for
 * max_ttl + drift.  A step back makes the keys live longer there.
 */
static void
ft_sched_clock(struct ft_run *r, int64_t offset_ms)
{
    char keys[FT_LIMIT + 2][CHECKER_NAME_MAX + 32], stats[256];
    int64_t deadline;
    uint32_t missed = 0;
    size_t i, d, nkeys = 0;

    snprintf(keys[nkeys++], sizeof(keys[0]), "%s%s", FT_PREFIX, FT_HOT);
    r->hot = true;
    r->neg_exclusive = FT_HOT;
    ft_warmup(r, FT_WARMUP_MS);
    if (ft_start_hot_pair(r, keys[0]) != 0 || ft_start_hot_kinds(r, false) != 0) {
        return;
    }
    for (i = 0; i < FT_LIMIT; i++) {
        snprintf(keys[nkeys++], sizeof(keys[0]), "%s%s permit %zu", FT_PREFIX, FT_HOT_SEM, i);
    }
    snprintf(keys[nkeys++], sizeof(keys[0]), "%s%s", FT_PREFIX, FT_HOT_RW);
    if (!ft_wait_renewals(4, keys, nkeys, FT_MAX_TTL_MS)) {
        ft_setup_failed(r, "the holders' leases were not renewed on master 4");
        return;
    }
    ft_event(r, "the holders' leases were renewed; '%s' is on %zu masters", keys[0],
             h_masters_holding(keys[0], NULL));
    for (i = 0; i < FT_MASTERS; i++) {
        if ((r->sc->clock_masters & (1u << i)) == 0) {
            continue;
        }
        if (h_master_clock_step(i, offset_ms) != 0) {
            ft_setup_failed(r, "the clock of master %zu could not be stepped", i);
            return;
        }
        ft_event(r, "master %zu's wall clock stepped %+lld ms (its TIME shows it)", i,
                 (long long)offset_ms);
    }
    r->heal_us = ft_now_us();
    for (i = 0; i < nkeys; i++) {
        ft_event(r, "'%s' is now on %zu masters", keys[i], h_masters_holding(keys[i], NULL));
    }
    /* What the daemons made of it, once each counted every step (or a while). */
    deadline = h_now_ms() + (ft_clock_check_on(r) ? 2000 : 0);
    for (;;) {
        missed = 0;
        for (d = 0; d < r->ndaemons; d++) {
            uint32_t m;

            ft_clock_stats(r, d, stats, sizeof(stats), &m);
            missed |= m;
        }
        if (missed == 0 || h_now_ms() >= deadline) {
            break;
        }
        h_sleep_ms(FT_POLL_MS * 4);
    }
    for (d = 0; d < r->ndaemons; d++) {
        ft_clock_stats(r, d, stats, sizeof(stats), &missed);
        ft_event(r, "daemon %zu STATS after the step: %s", d, stats);
    }
    r->bound_ms = FT_MAX_TTL_MS + FT_TTL_MS + 4 * FT_RETRY_MS + FT_SLACK_MS;
}

static void
ft_sched_clock_forward(struct ft_run *r)
{
    ft_sched_clock(r, FT_CLOCK_STEP_MS);
}

static void
ft_sched_clock_back(struct ft_run *r)
{
    ft_sched_clock(r, -FT_CLOCK_STEP_MS);
    /* A key written before the step lives that much longer there, by design. */
    r->keys_late_ms = FT_CLOCK_STEP_MS;
}

/*
 * At the end of a clock run: each daemon's clock_steps per master in the
 * notes; with the check on, a stepped master whose step a daemon did not
 * count is a violation.
 */
static void
ft_judge_clock(struct ft_run *r)
{
    char stats[256];
    uint32_t missed;
    size_t d;

    for (d = 0; d < r->ndaemons; d++) {
        ft_clock_stats(r, d, stats, sizeof(stats), &missed);
        ft_note(r, "daemon %zu STATS at the end: %s", d, stats);
        if (missed != 0 && ft_clock_check_on(r)) {
            ft_external(r, "daemon %zu did not count the clock step of every stepped master "
                        "(%s)", d, stats);
        }
    }
}

/* ---- network faults: iptables rules in the hosts' namespaces (netns.h) ---- */

/* An iptables rule in host h's namespace; false, with the setup failure recorded, if refused. */
__attribute__((format(printf, 3, 4)))
static bool
ft_rule(struct ft_run *r, size_t h, const char *fmt, ...)
{
    char rule[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(rule, sizeof(rule), fmt, ap);
    va_end(ap);
    if (netns_iptables(h, rule) != 0) {
        ft_setup_failed(r, "iptables refused '%s' in %s (see %s/netns.log)", rule,
                        netns_name(h), ft_dir);
        return false;
    }
    return true;
}

/* Remove every rule in host h's namespace. */
static void
ft_heal_host(struct ft_run *r, size_t h)
{
    if (netns_heal(h) != 0) {
        ft_setup_failed(r, "cannot remove the rules in %s", netns_name(h));
    }
}

/*
 * Cut master i from both daemons: DROP what comes from them and what
 * goes to them (no reset: their connections stay open), or with
 * replies_only only what goes to them (the requests arrive and run, the
 * replies are lost).  The suite itself still reaches the master.
 */
static void
ft_cut_master(struct ft_run *r, size_t i, bool replies_only)
{
    char daemons[2 * H_ADDR_MAX];

    snprintf(daemons, sizeof(daemons), "%s,%s", r->addrs[0], r->addrs[1]);
    if ((replies_only || ft_rule(r, i, "-A INPUT -s %s -j DROP", daemons))
        && ft_rule(r, i, "-A OUTPUT -d %s -j DROP", daemons)) {
        ft_event(r, "master %zu (%s) cut from the daemons: %s", i, h_master_addr(i),
                 replies_only ? "its replies are dropped, requests still arrive"
                              : "DROP both ways");
    }
}

/* Cut the last n masters from the daemons for FT_PARTITION_MS (longer than the ttl). */
static void
ft_partition_masters(struct ft_run *r, size_t n, bool replies_only)
{
    size_t i;

    ft_warmup(r, FT_WARMUP_MS);
    for (i = 0; i < n; i++) {
        ft_cut_master(r, FT_MASTERS - 1 - i, replies_only);
    }
    ft_pause(FT_PARTITION_MS);
    for (i = 0; i < n; i++) {
        ft_heal_host(r, FT_MASTERS - 1 - i);
    }
    r->heal_us = ft_now_us();
    ft_event(r, "healed: the rules are gone");
}

static void
ft_sched_partition1(struct ft_run *r)
{
    ft_partition_masters(r, 1, false);
}

static void
ft_sched_partition2(struct ft_run *r)
{
    ft_partition_masters(r, 2, false);
}

static void
ft_sched_half_partition(struct ft_run *r)
{
    ft_partition_masters(r, 1, true);
}

/* 5 % random loss both ways on the links of the last FT_SLOW_MASTERS masters. */
static void
ft_sched_loss(struct ft_run *r)
{
    size_t i;

    ft_warmup(r, FT_WARMUP_MS);
    for (i = FT_MASTERS - FT_SLOW_MASTERS; i < FT_MASTERS; i++) {
        if (!ft_rule(r, i, "-A INPUT %s", FT_LOSS_RULE)
            || !ft_rule(r, i, "-A OUTPUT %s", FT_LOSS_RULE)) {
            return;
        }
    }
    ft_event(r, "5%% random loss both ways on the links of masters %d-%d", FT_MASTERS -
             FT_SLOW_MASTERS, FT_MASTERS - 1);
    ft_pause(FT_LOSS_MS);
    for (i = FT_MASTERS - FT_SLOW_MASTERS; i < FT_MASTERS; i++) {
        ft_heal_host(r, i);
    }
    r->heal_us = ft_now_us();
    ft_event(r, "healed: no more loss");
}

/* Turn the delay proxies' delay on (SIGUSR1) or off (SIGUSR2). */
static void
ft_delay(struct ft_run *r, bool on)
{
    size_t i;

    for (i = 0; i < FT_MASTERS; i++) {
        if (r->proxies[i] > 0 && kill(r->proxies[i], on ? SIGUSR1 : SIGUSR2) != 0) {
            ft_setup_failed(r, "delay proxy of master %zu is gone", i);
        }
    }
}

/* 20 +- 15 ms each way on the links of the last FT_SLOW_MASTERS masters (the proxies). */
static void
ft_sched_delay(struct ft_run *r)
{
    ft_warmup(r, FT_WARMUP_MS);
    ft_delay(r, true);
    ft_event(r, "delay %s ms each way on the links of masters %d-%d (the proxies)",
             FT_DELAY_RANGE, FT_MASTERS - FT_SLOW_MASTERS, FT_MASTERS - 1);
    ft_pause(FT_DELAY_MS);
    ft_delay(r, false);
    r->heal_us = ft_now_us();
    ft_event(r, "healed: no more delay");
}

/* The first line of a log that contains text, into out ("" when none). */
static void
ft_log_line(const char *path, const char *text, char *out, size_t size)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    FILE *f = fopen(path, "re");

    out[0] = '\0';
    while (f != NULL && (n = getline(&line, &cap, f)) > 0) {
        if (strstr(line, text) != NULL) {
            if (line[n - 1] == '\n') {
                line[n - 1] = '\0';
            }
            snprintf(out, size, "%s", line);
            break;
        }
    }
    free(line);
    if (f != NULL) {
        fclose(f);
    }
}

/*
 * After the minority partition: what each long holder (idx[k], on
 * names[k], through daemon 1) and daemon 0's clients of its name did.
 * Expected: the holder read LOST (an ABORT) while the partition lasted,
 * and daemon 0 granted the name after that, before the heal.  With
 * broken holders (the negative control) this is only noted: the checker
 * must find the double grants.
 */
static void
ft_minority_verdict(struct ft_run *r, const size_t *idx, const char *const *names, size_t n,
                    int64_t cut_us)
{
    const struct checker_section *held;
    struct checker_sections s;
    char needle[CHECKER_NAME_MAX + 16], lost[256], *reason;
    int64_t first;
    size_t k, i;

    ft_sections(r, &s);
    for (k = 0; k < n; k++) {
        held = checker_held_at(&s, idx[k], cut_us);
        if (held == NULL) {
            ft_setup_failed(r, "client %zu was not inside its section at the cut", idx[k]);
            continue;
        }
        snprintf(needle, sizeof(needle), "! LOST %s ", names[k]);
        ft_log_line(r->clients[idx[k]].log, needle, lost, sizeof(lost));
        reason = strstr(lost, "reason=");
        if (held->how == CHECKER_END_ABORT) {
            ft_note(r, "client %zu (%s through daemon 1) was told LOST and aborted %.0f ms "
                    "after the cut (%s)", idx[k], names[k],
                    (double)(held->end_us - cut_us) / 1e3,
                    reason != NULL ? reason : "no LOST line");
        } else if (!r->sc->broken) {
            ft_external(r, "client %zu held %s through the isolated daemon and did not abort "
                        "on LOST (%s)", idx[k], names[k], lost[0] != '\0' ? lost : "no LOST");
        } else {
            ft_note(r, "client %zu (%s, ignores LOST) %s %.0f ms after the cut (%s)", idx[k],
                    names[k], held->how == CHECKER_END_WROTE ? "wrote"
                    : held->how == CHECKER_END_READ ? "read again" : "ended",
                    held->end_us == CHECKER_OPEN_END ? -1.0
                    : (double)(held->end_us - cut_us) / 1e3,
                    reason != NULL ? reason : "no LOST line");
        }
        /* The first grant through daemon 0 after the holder ended (broken: after the cut). */
        first = -1;
        for (i = 0; i < s.n; i++) {
            const struct checker_section *x = &s.v[i];

            if (strcmp(x->name, names[k]) == 0 && x->port == r->ports[0]
                && x->permit == held->permit
                && x->begin_us >= (r->sc->broken ? cut_us : held->end_us)
                && x->begin_us < r->heal_us && (first < 0 || x->begin_us < first)) {
                first = x->begin_us;
            }
        }
        if (first > 0) {
            ft_note(r, "%s%s granted through daemon 0 %.0f ms after the cut", names[k],
                    held->permit >= 0 ? "'s same permit" : "", (double)(first - cut_us) / 1e3);
        } else if (!r->sc->broken) {
            ft_external(r, "daemon 0's clients never got %s while daemon 1 was cut off "
                        "(%d ms)", names[k], FT_MINORITY_MS);
        }
    }
    checker_free(&s);
}

/*
 * Cut daemon 1 off the majority (masters 0, 1, 2; it still reaches 3
 * and 4, and its clients) for FT_MINORITY_MS while three long holders
 * (one FT_MINORITY_HOLD_MS section each: acct-a, a permit of FT_SEM, a
 * shared hold of FT_RW) hold through it.  Its renewals lack a quorum:
 * the holders must be told LOST before their keys expire, and daemon
 * 0's clients must get the names once the keys have expired.  In the
 * negative control the long holders ignore LOST (rmw-client -I), and
 * the checker must report the double grants.
 */
static void
ft_sched_minority(struct ft_run *r)
{
    const char *const names[3] = { ft_names[0], FT_SEM, FT_RW };
    struct ft_kind kinds[3] = { ft_plain, ft_counted, ft_shared };
    char ports[FT_PORTS_MAX], sleep[16], majority[3 * H_ADDR_MAX];
    size_t idx[3], k, d1 = FT_HOST_DAEMON(1);
    int64_t fresh[3], cut_us;
    int c;

    ft_warmup(r, FT_WARMUP_MS);
    ft_ports(r, 1, ports, sizeof(ports));
    snprintf(sleep, sizeof(sleep), "%d", FT_MINORITY_HOLD_MS);
    for (k = 0; k < 3; k++) {
        kinds[k].ignore_lost = r->sc->broken;
        c = ft_start_kind(r, names[k], &kinds[k], ports, 1, FT_TTL_MS, sleep, 0, 0);
        if (c < 0) {
            ft_setup_failed(r, "cannot start the long holders");
            return;
        }
        r->clients[c].daemon = 1;
        idx[k] = (size_t)c;
        fresh[k] = FT_MINORITY_FRESH_MS;
    }
    if (!ft_wait_in_sections(r, idx, fresh, 3, FT_WAIT_MS)) {
        ft_setup_failed(r, "the long holders never held %s, %s and %s at once through daemon 1",
                        names[0], names[1], names[2]);
        return;
    }
    ft_event(r, "clients %zu, %zu, %zu hold %s, a permit of %s and %s (shared) through daemon 1"
             "%s", idx[0], idx[1], idx[2], names[0], names[1], names[2],
             r->sc->broken ? "; they ignore LOST" : "");
    snprintf(majority, sizeof(majority), "%s,%s,%s", h_master_addr(0), h_master_addr(1),
             h_master_addr(2));
    if (!ft_rule(r, d1, "-A INPUT -s %s -j DROP", majority)
        || !ft_rule(r, d1, "-A OUTPUT -d %s -j DROP", majority)) {
        return;
    }
    cut_us = ft_now_us();
    ft_event(r, "daemon 1 (%s) cut from masters 0, 1, 2; it still reaches 3 and 4",
             r->addrs[1]);
    ft_pause(FT_MINORITY_MS);
    ft_heal_host(r, d1);
    r->heal_us = ft_now_us();
    ft_event(r, "healed: daemon 1 reaches every master again");
    ft_minority_verdict(r, idx, names, 3, cut_us);
    /* Daemon 0 grants the names at once; daemon 1's clients wait until it
       has reconnected to the majority (its backoff, at most FT_RECONNECT_MS). */
    r->bound_ms = FT_RECONNECT_MS + 4 * FT_RETRY_MS + FT_SLACK_MS;
    if (r->sc->broken) {
        r->neg_exclusive = names[0];
        r->neg_counted = names[1];
        r->neg_permit_overlap = true;
        r->neg_shared = names[2];
    }
}

/* ---- a dropped link's unsent requests ---- */

/*
 * What a daemon wrote to a master's connection before dropping it must
 * never run after the daemon has reconnected: by then the daemon counts
 * on newer requests only, and an old release (its token reused) or an
 * old grant landing late breaks that.  The kernel keeps retransmitting
 * what a closed socket had not delivered, so a link dropped in a
 * partition is closed with a reset.  The probe: daemon 0 is cut from
 * master 0, a LOCK is granted by the other four while its request to
 * master 0 waits in daemon 0's socket, the link is dropped for silence,
 * the lock is released, the cut healed; master 0 must never get the
 * probe's key.
 */
#define FT_STALE_NAME       "stale-probe"   /* the orchestrator's own lock */
#define FT_STALE_WATCH_MS   6000    /* how long master 0 is watched after the heal: past
                                       the next retransmissions of the old connection */

static void
ft_sched_stale_drop(struct ft_run *r)
{
    size_t d0 = FT_HOST_DAEMON(0);
    int64_t deadline;
    char *line, *got;
    int fd;

    ft_warmup(r, FT_WARMUP_MS / 3);
    if (!ft_rule(r, d0, "-A INPUT -s %s -j DROP", h_master_addr(0))
        || !ft_rule(r, d0, "-A OUTPUT -d %s -j DROP", h_master_addr(0))) {
        return;
    }
    ft_event(r, "daemon 0 (%s) cut from master 0 (DROP both ways, no reset)", r->addrs[0]);
    h_use_daemon(0);
    fd = h_connect_tcp();
    line = fd >= 0 ? h_cmd(fd, "AUTH " FT_NET_PASSWORD, 3000) : NULL;
    if (line == NULL || strcmp(line, "OK") != 0) {
        ft_setup_failed(r, "AUTH through daemon 0: '%s'", line != NULL ? line : "(none)");
        free(line);
        if (fd >= 0) {
            close(fd);
        }
        return;
    }
    free(line);
    line = h_cmd(fd, "LOCK " FT_STALE_NAME " wait=0", 3000);
    if (line == NULL || strncmp(line, "OK " FT_STALE_NAME " ", 3 + strlen(FT_STALE_NAME) + 1)
        != 0) {
        ft_setup_failed(r, "daemon 0 did not grant %s on masters 1-4: '%s'", FT_STALE_NAME,
                        line != NULL ? line : "(no answer)");
        free(line);
        if (fd >= 0) {
            close(fd);
        }
        return;
    }
    free(line);
    ft_event(r, "%s granted by masters 1-4; its request to master 0 waits in daemon 0's "
             "socket", FT_STALE_NAME);
    if (!ft_wait_master_up(0, false, 1, FT_WAIT_MS)) {
        ft_setup_failed(r, "daemon 0 never dropped its link to master 0");
        close(fd);
        return;
    }
    ft_event(r, "daemon 0 dropped its link to master 0");
    line = h_cmd(fd, "UNLOCK " FT_STALE_NAME, 3000);
    close(fd);
    if (line == NULL || strncmp(line, "OK " FT_STALE_NAME, 3 + strlen(FT_STALE_NAME)) != 0) {
        ft_setup_failed(r, "UNLOCK %s: '%s'", FT_STALE_NAME, line != NULL ? line : "(none)");
        free(line);
        return;
    }
    free(line);
    ft_heal_host(r, d0);
    r->heal_us = ft_now_us();
    ft_event(r, "healed; %s released on masters 1-4", FT_STALE_NAME);
    if (!ft_wait_master_up(0, true, 1, FT_WAIT_MS)) {
        ft_setup_failed(r, "daemon 0 did not reconnect to master 0");
        return;
    }
    deadline = h_now_ms() + FT_STALE_WATCH_MS;
    while (h_now_ms() < deadline) {
        got = h_master_get(0, FT_PREFIX FT_STALE_NAME);
        if (got != NULL) {
            ft_external(r, "the LOCK of %s that daemon 0 wrote before dropping its link ran on "
                        "master 0 %.0f ms after the heal (key value %s): the old "
                        "connection's bytes were delivered after the reconnect",
                        FT_STALE_NAME, (double)(ft_now_us() - r->heal_us) / 1e3, got);
            free(got);
            return;
        }
        h_sleep_ms(20);
    }
    ft_note(r, "master 0 never ran the request written before the drop (watched %d ms after "
            "the heal)", FT_STALE_WATCH_MS);
}

/* ---- a paused daemon ---- */

/*
 * The daemon is stopped past its holders' validity while the other one
 * keeps granting.  The clients of daemon 1 that hold a lock then cannot
 * be told in time; the daemon promises that they are told first thing
 * on resume, and a fenced resource refuses their late writes.
 */
#define FT_PAUSE_MS         (FT_TTL_MS + 2000)  /* daemon 1 stays stopped this long */
#define FT_LATE_SLEEP_MS    4500    /* the late writer's in-section sleep */
#define FT_LATE_FRESH_MS    500     /* its section began at most this long before the stop */
#define FT_LONG_SLEEP_MS    6500    /* the long victim's in-section sleep */
#define FT_PAUSE_PROBE      "pause-probe"   /* the orchestrator's own lock */
#define FT_PAUSE_LONG       "pause-long"    /* the long victim's name, no one else's */
#define FT_PAUSE_PING       "PING pause"    /* sent by the probe while daemon 1 is stopped */

/*
 * A victim through daemon 1: one section on name with an in-section
 * sleep of sleep_ms, fenced or not.  Returns its index, or -1 with the
 * setup failure recorded.
 */
static int
ft_start_pause_victim(struct ft_run *r, const char *name, long sleep_ms, bool fenced)
{
    char ports[FT_PORTS_MAX], sleep[16];
    int v;

    ft_ports(r, 1, ports, sizeof(ports));
    snprintf(sleep, sizeof(sleep), "%ld", sleep_ms);
    v = ft_start_kind(r, name, fenced ? &ft_fenced : &ft_plain, ports, 1, FT_TTL_MS, sleep, 0,
                      0);
    if (v < 0) {
        ft_setup_failed(r, "cannot start a victim client on %s", name);
        return -1;
    }
    r->clients[v].daemon = 1;
    return v;
}

/*
 * After daemon 1 resumed: the probe's first line must be its LOST, then
 * the answer to the PING it sent while the daemon was stopped.
 */
static void
ft_pause_probe_read(struct ft_run *r, int fd)
{
    char *first = h_read_line(fd, FT_WAIT_MS), *second;

    second = first != NULL ? h_read_line(fd, FT_WAIT_MS) : NULL;
    ft_event(r, "probe: after the resume it read '%s', then '%s'",
             first != NULL ? first : "(nothing)", second != NULL ? second : "(nothing)");
    if (first == NULL || strncmp(first, "! LOST " FT_PAUSE_PROBE " reason=",
                                 strlen("! LOST " FT_PAUSE_PROBE " reason=")) != 0) {
        ft_external(r, "the probe's first line after the resume was '%s', not '! LOST %s "
                    "reason=...'", first != NULL ? first : "(nothing)", FT_PAUSE_PROBE);
    } else if (second == NULL || strcmp(second, "PONG pause") != 0) {
        ft_external(r, "the probe's line after its LOST was '%s', not 'PONG pause'",
                    second != NULL ? second : "(nothing)");
    } else {
        ft_note(r, "probe: '%s' first after the resume, then '%s'", first, second);
    }
    free(first);
    free(second);
}

/*
 * SIGSTOP daemon 1 for ttl + 2 s while daemon 0 keeps granting.  Held
 * through daemon 1 at the stop: the probe (the orchestrator's session,
 * with a PING waiting in the socket), the late writer (acct-a, inside a
 * section that began at most FT_LATE_FRESH_MS before: its lease runs out
 * during the stop, daemon 0's clients take acct-a and write, and then
 * its sleep ends and it writes with its old fence, fenced or not) and
 * the long victim (a name of its own, a sleep that outlasts the stop:
 * it must read LOST on resume and not write).
 */
static void
ft_pause_run(struct ft_run *r, bool fenced)
{
    int64_t begin_w, stop_us;
    char *line;
    int fd, w, lv;

    r->pause.on = true;
    r->pause.fenced = fenced;
    r->pause.writer = -1;
    r->pause.long_victim = -1;
    ft_warmup(r, FT_WARMUP_MS);
    h_use_daemon(1);
    fd = h_connect_tcp();
    line = fd >= 0 ? h_cmd(fd, "LOCK " FT_PAUSE_PROBE " ttl=3000", FT_WAIT_MS) : NULL;
    if (line == NULL || !h_is_reply(line, "OK", FT_PAUSE_PROBE)) {
        ft_setup_failed(r, "the probe did not get %s through daemon 1: '%s'", FT_PAUSE_PROBE,
                        line != NULL ? line : "(nothing)");
        free(line);
        if (fd >= 0) {
            close(fd);
        }
        h_use_daemon(0);
        return;
    }
    free(line);
    ft_event(r, "probe holds %s through daemon 1", FT_PAUSE_PROBE);
    w = ft_start_pause_victim(r, ft_names[0], FT_LATE_SLEEP_MS, fenced);
    begin_w = w >= 0 ? ft_wait_in_section(r, (size_t)w, FT_LATE_FRESH_MS / 2) : -1;
    lv = begin_w > 0 ? ft_start_pause_victim(r, FT_PAUSE_LONG, FT_LONG_SLEEP_MS, true) : -1;
    if (w >= 0 && begin_w < 0) {
        ft_setup_failed(r, "the late writer never got %s", ft_names[0]);
    } else if (lv >= 0 && ft_wait_in_section(r, (size_t)lv, FT_LATE_FRESH_MS) < 0) {
        ft_setup_failed(r, "the long victim never got %s", FT_PAUSE_LONG);
    } else if (lv >= 0 && ft_now_us() - begin_w > FT_LATE_FRESH_MS * 1000) {
        ft_setup_failed(r, "the late writer's section began %.0f ms before the stop would "
                        "come (at most %d ms)", (double)(ft_now_us() - begin_w) / 1e3,
                        FT_LATE_FRESH_MS);
    }
    if (r->setup_failed) {
        close(fd);
        h_use_daemon(0);
        return;
    }
    r->pause.writer = w;
    r->pause.long_victim = lv;
    /* From here to the SIGCONT nothing returns: the daemon must not stay stopped. */
    if (h_signal_daemon(SIGSTOP) != 0) {
        ft_setup_failed(r, "daemon 1 was not running");
        close(fd);
        h_use_daemon(0);
        return;
    }
    stop_us = ft_now_us();
    r->pause.stop_us = stop_us;
    ft_event(r, "SIGSTOP daemon 1 (port %d): client %d's section on %s began %.0f ms ago, "
             "client %d holds %s", r->ports[1], w, ft_names[0],
             (double)(stop_us - begin_w) / 1e3, lv, FT_PAUSE_LONG);
    if (h_send(fd, FT_PAUSE_PING) != 0) {
        ft_setup_failed(r, "the probe could not send its PING");
    }
    ft_pause(FT_PAUSE_MS);
    /* Stamped before the signal: the resumed daemon's pushes may be read
       (and logged) before this process runs again. */
    r->pause.cont_us = ft_now_us();
    r->heal_us = r->pause.cont_us;
    h_signal_daemon(SIGCONT);
    ft_event(r, "SIGCONT daemon 1 after %.1f s", (double)(r->heal_us - stop_us) / 1e6);
    if (!r->setup_failed) {
        ft_pause_probe_read(r, fd);
    }
    close(fd);
    h_use_daemon(0);
}

static void
ft_sched_pause_daemon(struct ft_run *r)
{
    ft_pause_run(r, true);
}

static void
ft_sched_pause_unfenced(struct ft_run *r)
{
    ft_pause_run(r, false);
}

/*
 * The first line of client i's log at or after t_us whose event is ev1
 * or ev2 (NULL: only ev1), into out.  False when there is none.
 */
static bool
ft_log_next(const struct ft_run *r, size_t i, int64_t t_us, const char *ev1, const char *ev2,
            char *out, size_t size)
{
    char *line = NULL, word[16];
    size_t cap = 0;
    long long ts;
    bool found = false;
    FILE *f = fopen(r->clients[i].log, "re");

    if (f == NULL) {
        return false;
    }
    while (!found && getline(&line, &cap, f) > 0) {
        if (sscanf(line, "%15s %lld", word, &ts) != 2 || ts < t_us) {
            continue;
        }
        found = strcmp(word, ev1) == 0 || (ev2 != NULL && strcmp(word, ev2) == 0);
        if (found) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(out, size, "%s", line);
        }
    }
    free(line);
    fclose(f);
    return found;
}

/* How a section ended, in a word or two. */
static const char *
ft_how(const struct checker_section *s)
{
    switch (s->how) {
    case CHECKER_END_WROTE:
        return "with a write";
    case CHECKER_END_READ:
        return "with a read";
    case CHECKER_END_ABORT:
        return "aborted";
    case CHECKER_END_REJECT:
        return "with its write refused";
    case CHECKER_END_KILLED:
        return "killed";
    case CHECKER_END_NONE:
        break;
    }
    return "never";
}

/*
 * The pause-daemon schedules' own verdict, from the sections: the late
 * writer wrote late (refused when fenced, landed otherwise: else the
 * timing did not make the fault and the setup failed), its session read
 * LOST before the answer to its UNLOCK, the long victim aborted on the
 * LOST read after the resume, and the other clients of daemon 1 went on.
 */
static void
ft_pause_judge(struct ft_run *r, const struct checker_sections *s)
{
    const struct checker_section *w, *lv;
    char line[512], lost[CHECKER_NAME_MAX + 32];
    int64_t first = -1;
    size_t k, clients = 0, after = 0;

    if (r->pause.stop_us == 0 || r->pause.writer < 0 || r->pause.long_victim < 0) {
        return;
    }
    w = checker_held_at(s, (size_t)r->pause.writer, r->pause.stop_us);
    lv = checker_held_at(s, (size_t)r->pause.long_victim, r->pause.stop_us);
    if (w == NULL || w->how == CHECKER_END_NONE) {
        ft_setup_failed(r, "the late writer was not inside a section at the stop, or never "
                        "ended it");
    } else if (w->how == CHECKER_END_REJECT && r->pause.fenced) {
        ft_note(r, "late writer: client %d's write @+%.0f ms after the stop (fence %lld) was "
                "refused: stored fence %lld", r->pause.writer,
                (double)(w->end_us - r->pause.stop_us) / 1e3, w->fence, w->prev_fence);
    } else if (w->how == CHECKER_END_WROTE && !r->pause.fenced && w->prev_fence > w->fence) {
        ft_note(r, "late writer: client %d's unfenced write @+%.0f ms after the stop (fence "
                "%lld) landed after one with fence %lld", r->pause.writer,
                (double)(w->end_us - r->pause.stop_us) / 1e3, w->fence, w->prev_fence);
    } else {
        ft_setup_failed(r, "the late writer did not write late: its section ended %s @+%.0f "
                        "ms after the stop (fence %lld, stored fence %lld)", ft_how(w),
                        (double)(w->end_us - r->pause.stop_us) / 1e3, w->fence,
                        w->prev_fence);
    }
    /* Its UNLOCK sat in the socket during the stop: LOST must come first. */
    if (w != NULL && w->how != CHECKER_END_NONE) {
        snprintf(lost, sizeof(lost), " ! LOST %s reason=", ft_names[0]);
        if (!ft_log_next(r, (size_t)r->pause.writer, w->end_us, "PUSH", "UNLOCK", line,
                         sizeof(line))) {
            ft_external(r, "the late writer read neither a push nor its UNLOCK's answer "
                        "after its section");
        } else if (strncmp(line, "PUSH ", 5) != 0 || strstr(line, lost) == NULL) {
            ft_external(r, "the late writer's first line after the resume was not its LOST: "
                        "%s", line);
        } else {
            ft_note(r, "late writer: first line after the resume: %s", strchr(line + 5, '!'));
        }
    }
    if (lv == NULL || lv->how == CHECKER_END_NONE) {
        ft_setup_failed(r, "the long victim was not inside a section at the stop, or never "
                        "ended it");
    } else if (lv->how == CHECKER_END_ABORT && lv->end_us >= r->pause.cont_us
               && ft_log_next(r, (size_t)r->pause.long_victim, lv->end_us, "ABORT", NULL,
                              line, sizeof(line))
               && strstr(line, " why=lost") != NULL) {
        ft_note(r, "long victim: client %d aborted %.0f ms after the resume (why=lost)",
                r->pause.long_victim, (double)(lv->end_us - r->pause.cont_us) / 1e3);
    } else if (lv->begin_us + FT_LONG_SLEEP_MS * 1000LL < r->pause.cont_us) {
        ft_setup_failed(r, "the long victim's sleep ended before the resume");
    } else {
        ft_external(r, "the long victim's section across the stop ended %s @+%.0f ms after "
                    "the resume, not with ABORT why=lost", ft_how(lv),
                    (double)(lv->end_us - r->pause.cont_us) / 1e3);
    }
    for (k = 0; k < r->nclients; k++) {
        clients += r->clients[k].daemon == 1 && !r->clients[k].finite;
    }
    for (k = 0; k < s->n; k++) {
        const struct ft_client *c = &r->clients[s->v[k].log];

        if (c->daemon == 1 && !c->finite && s->v[k].begin_us >= r->pause.cont_us) {
            after++;
            if (first < 0 || s->v[k].begin_us < first) {
                first = s->v[k].begin_us;
            }
        }
    }
    ft_note(r, "the %zu other clients of daemon 1: %zu sections after the resume, the first "
            "%.0f ms after it", clients, after,
            first < 0 ? -1.0 : (double)(first - r->pause.cont_us) / 1e3);
    if (r->res.fenced > 0) {
        ft_note(r, "%zu fenced overlaps (a holder whose late write was refused): shown, not "
                "violations", r->res.fenced);
    }
}

/* The unfenced control's expectation: the late write shows as an overlap and a stale write. */
static bool
ft_pause_negative_seen(struct ft_run *r)
{
    const struct checker_name_stat *st = checker_name(&r->res, ft_names[0]);
    bool overlap = st != NULL && st->overlaps > 0;
    bool stale = r->res.counts[CHECKER_STALE_WRITE] > 0;

    ft_note(r, "negative control: %s overlap %s, stale write %s", ft_names[0],
            overlap ? "reported" : "NOT reported", stale ? "reported" : "NOT reported");
    return overlap && stale;
}

/* ---- timing: delays, three daemons, leases, BREAK, an idle daemon, a clock step ---- */

/*
 * What each daemon's STATS say of the stepped masters' clocks, as an
 * event, and in the notes with which daemons did not count the step.
 * Not judged: a step that a daemon does not see makes a double grant
 * only together with keys that expired early, which the checker judges.
 */
static void
ft_timing_clock_notes(struct ft_run *r, const char *when)
{
    char stats[256], blind[64] = "";
    uint32_t missed;
    size_t d, used = 0;

    if (r->step_us == 0) {
        return;
    }
    for (d = 0; d < r->ndaemons; d++) {
        ft_clock_stats(r, d, stats, sizeof(stats), &missed);
        ft_event(r, "daemon %zu STATS %s: %s", d, when, stats);
        if (missed != 0 && used < sizeof(blind)) {
            used += (size_t)snprintf(blind + used, sizeof(blind) - used, "%s%zu",
                                     used > 0 ? ", " : "", d);
        }
    }
    ft_note(r, "the clock step, %s: %s%s", when,
            used > 0 ? "not counted by daemon " : "counted by every daemon", blind);
}

/*
 * Start a client of name held as kind through the daemons, daemon first
 * then the next ones in turn, over the first n daemons.  Returns its
 * index, or -1 with the setup failure recorded.
 */
static int
ft_start_on(struct ft_run *r, const char *name, const struct ft_kind *kind, size_t first,
            size_t n, long sections, long ttl_ms, const char *sleep, long poll_ms)
{
    char ports[FT_PORTS_MAX];
    int c;

    ft_ports_of(r, first, n, ports, sizeof(ports));
    c = ft_start_kind(r, name, kind, ports, sections, ttl_ms, sleep, poll_ms,
                      kind->shared || kind->limit > 0 ? FT_KIND_THINK_MS : FT_THINK_MS);
    if (c < 0) {
        ft_setup_failed(r, "cannot start a client on %s", name);
        return -1;
    }
    r->clients[c].daemon = (int)first;
    return c;
}

/*
 * The timing schedule's own clients, through the first n daemons: the
 * BREAK targets (guarded: a holder the operator broke finds its writes
 * refused once a later holder touched the resource) and the long leases
 * of FT_STEP_L.  0, or -1.
 */
static int
ft_timing_clients(struct ft_run *r, size_t n)
{
    struct ft_kind x = ft_mixed(r, &ft_plain), sh = ft_mixed(r, &ft_shared);
    struct ft_kind sem = ft_mixed(r, &ft_counted), lease = x;
    size_t i;

    x.guarded = sh.guarded = sem.guarded = true;
    sem.limit = FT_BRK_LIMIT;
    lease.lease_pct = 100;
    lease.extend_pct = 0;
    for (i = 0; i < 3; i++) {
        if (ft_start_on(r, FT_BRK_X, &x, i % n, n, 0, FT_TTL_MS, FT_SLEEP, 0) < 0
            || ft_start_on(r, FT_BRK_SEM, &sem, i % n, n, 0, FT_TTL_MS, FT_KIND_SLEEP, 0) < 0
            || ft_start_on(r, FT_STEP_L, &lease, i % n, n, 0, FT_STEP_TTL_MS, FT_STEP_SLEEP,
                           FT_STEP_POLL_MS) < 0) {
            return -1;
        }
    }
    for (i = 0; i < 4; i++) {
        if (ft_start_on(r, FT_BRK_RW, i < 2 ? &sh : &x, i % n, n, 0, FT_TTL_MS,
                        i < 2 ? FT_KIND_SLEEP : FT_SLEEP, 0) < 0) {
            return -1;
        }
    }
    r->brk = true;
    r->step = true;
    r->recovery[r->nrecovery++] = FT_BRK_X;
    r->recovery[r->nrecovery++] = FT_BRK_RW;
    r->recovery[r->nrecovery++] = FT_BRK_SEM;
    r->recovery[r->nrecovery++] = FT_STEP_L;
    ft_event(r, "3 guarded clients on %s, 3 on %s (limit=%d), 2 shared and 2 exclusive on %s "
             "(BREAK targets), 3 polling for long leases of %s (ttl %d ms), through daemons "
             "0-%zu", FT_BRK_X, FT_BRK_SEM, FT_BRK_LIMIT, FT_BRK_RW, FT_STEP_L,
             FT_STEP_TTL_MS, n - 1);
    return 0;
}

/*
 * Before the step: wait (at most FT_STEP_AIM_MS) until a long lease of
 * FT_STEP_L held through an active daemon is old enough that the step
 * leaves its keys on the stepped masters less than FT_STEP_EARLY_MS to
 * live (they expire at once when the step exceeds the ttl), so that it
 * is still inside its section when they go.  Returns the client's
 * index, or -1 when none was at the deadline (the step comes anyway).
 */
static int
ft_timing_aim(struct ft_run *r, int64_t step_ms)
{
    int64_t deadline = h_now_ms() + FT_STEP_AIM_MS, lo_ms, age_ms;
    struct checker_log log;
    struct checker_sections s;
    size_t i;
    int found = -1;

    lo_ms = FT_STEP_TTL_MS - step_ms + FT_STEP_EARLY_MS;
    if (lo_ms < 0) {
        return -1;
    }
    while (found < 0 && h_now_ms() < deadline) {
        for (i = 0; i < r->nclients && found < 0; i++) {
            if (strcmp(r->clients[i].name, FT_STEP_L) != 0
                || (size_t)r->clients[i].daemon >= r->nactive) {
                continue;
            }
            log.path = r->clients[i].log;
            log.killed_us = 0;
            memset(&s, 0, sizeof(s));
            checker_load(&log, 1, &s, NULL, NULL);
            if (s.n > 0 && s.v[s.n - 1].how == CHECKER_END_NONE) {
                age_ms = (ft_now_us() - s.v[s.n - 1].begin_us) / 1000;
                if (age_ms >= lo_ms && age_ms < lo_ms + 2 * FT_STEP_EARLY_MS) {
                    found = (int)i;
                    ft_event(r, "client %zu's lease of %s is %lld ms old (ttl %d ms)", i,
                             FT_STEP_L, (long long)age_ms, FT_STEP_TTL_MS);
                }
            }
            checker_free(&s);
        }
        if (found < 0) {
            h_sleep_ms(FT_POLL_MS);
        }
    }
    return found;
}

/* LOCK and UNLOCK a name of its own through daemon d: it reads every master's clock. */
static int
ft_timing_probe(struct ft_run *r, size_t d)
{
    char *line;
    int fd;
    bool ok;

    h_use_daemon(d);
    fd = h_connect_tcp();
    line = fd >= 0 ? h_cmd(fd, "LOCK timing-probe ttl=1000 wait=5000", FT_WAIT_MS) : NULL;
    ok = line != NULL && h_is_reply(line, "OK", "timing-probe");
    if (!ok) {
        ft_setup_failed(r, "daemon %zu did not grant its probe: '%s'", d,
                        line != NULL ? line : "(nothing)");
    } else {
        free(line);
        line = h_cmd(fd, "UNLOCK timing-probe", FT_WAIT_MS);
    }
    free(line);
    if (fd >= 0) {
        close(fd);
    }
    h_use_daemon(0);
    return ok ? 0 : -1;
}

/*
 * The timing schedule (tests/faults/README.md): every master behind a
 * delay proxy (0-20 ms per chunk, each way), three daemons, the regular
 * clients mixing session and lease sections (leases reset right after
 * their OK, EXTENDed and released through another daemon), BREAK
 * targets and an operator, long leases polled for.  Daemon 2 reads
 * every master's clock once (a probe), then stays idle while the others
 * work; at the end of its idle time the wall clocks of masters 0 and 1
 * step forward by 0.8 % of that time (daemon 2's drift allowance is 1 %
 * of the time since its last reading), and daemon 2's own clients and
 * the operator start using it at once.
 */
static void
ft_sched_timing(struct ft_run *r)
{
    const char *const names = FT_BRK_X "," FT_BRK_RW "," FT_BRK_SEM;
    /* Daemon 2's clients: two poll for FT_STEP_L, one each on acct-a, rw, sem, brk-x. */
    const struct ft_kind late[6] = { ft_plain, ft_plain, ft_plain, ft_shared, ft_counted,
                                     ft_plain };
    const char *const late_names[6] = { FT_STEP_L, FT_STEP_L, ft_names[0], FT_RW, FT_SEM,
                                         FT_BRK_X };
    int64_t idle_ms = ft_round > 0 ? FT_TIMING_SOAK_IDLE_MS : FT_TIMING_IDLE_MS;
    int64_t step_ms = idle_ms * FT_TIMING_STEP_PERMILLE / 1000;
    size_t idle = r->ndaemons - 1, i;
    char ports[FT_PORTS_MAX];

    if (ft_timing_clients(r, r->nactive) != 0) {
        return;
    }
    ft_ports(r, 0, ports, sizeof(ports));
    if (ft_start_operator(r, ports, names, FT_BREAK_EVERY, 0) < 0) {
        return;
    }
    ft_event(r, "operator: BREAK one of %s every %s ms, through daemons 0-%zu", names,
             FT_BREAK_EVERY, r->nactive - 1);
    ft_pause(FT_WARMUP_MS);
    if (ft_timing_probe(r, idle) != 0) {
        return;
    }
    ft_event(r, "daemon %zu read every master's clock (a probe lock); now idle for %.0f s",
             idle, (double)idle_ms / 1e3);
    ft_pause(idle_ms);
    ft_timing_aim(r, step_ms);
    for (i = 0; i < FT_MASTERS; i++) {
        if ((FT_TIMING_STEPPED & (1u << i)) == 0) {
            continue;
        }
        if (h_master_clock_step(i, step_ms) != 0) {
            ft_setup_failed(r, "the clock of master %zu could not be stepped", i);
            return;
        }
    }
    r->step_us = ft_now_us();
    /* Its fault window (liveness): the stepped masters' quarantine, and a recovery bound. */
    r->windows[r->nwindows].from_us = r->step_us;
    r->windows[r->nwindows++].to_us = r->step_us + (FT_MAX_TTL_MS + r->bound_ms) * 1000;
    ft_event(r, "masters 0 and 1: wall clock stepped %+lld ms (daemon %zu's allowance after "
             "%.0f s: about %lld ms)", (long long)step_ms, idle, (double)idle_ms / 1e3,
             (long long)(idle_ms / 100));
    /* Daemon 2 in use at once: its own clients, and the operator through it too. */
    for (i = 0; i < 6; i++) {
        struct ft_kind k = ft_mixed(r, &late[i]);
        bool poll = i < 2;

        if (poll) {
            k.lease_pct = 100;
            k.extend_pct = 0;
        }
        k.guarded = i == 5;
        if (ft_start_on(r, late_names[i], &k, idle, r->ndaemons, 0,
                        poll ? FT_STEP_TTL_MS : FT_TTL_MS,
                        k.shared || k.limit > 0 ? FT_KIND_SLEEP : FT_SLEEP,
                        poll ? FT_STEP_POLL_MS : 0) < 0) {
            return;
        }
    }
    ft_end_operator(r, 0, true);
    ft_ports_of(r, idle, r->ndaemons, ports, sizeof(ports));
    if (ft_start_operator(r, ports, names, FT_BREAK_EVERY, 0) < 0) {
        return;
    }
    ft_event(r, "daemon %zu in use: 2 clients poll for %s, one each on %s, %s (shared), %s, "
             "%s (guarded); the operator BREAKs through all %zu daemons", idle, FT_STEP_L,
             ft_names[0], FT_RW, FT_SEM, FT_BRK_X, r->ndaemons);
    ft_pause(2000);
    ft_timing_clock_notes(r, "2 s after the step");
    ft_pause(FT_TIMING_AFTER_MS - 2000);
    r->heal_us = ft_now_us();
}

#define FT_FAKE_UP          1000    /* the control's faker that logs fences too high */
#define FT_FAKE_DOWN        (-10)   /* and the one that logs them too low */
#define FT_CONTROL_BREAKS   2       /* BREAKs of FT_BRK_X while the high faker holds it */
#define FT_EXPIRE_SLEEP_MS  (FT_TTL_MS + 1500)  /* an expired lease holder writes then */

/*
 * The timing control (a negative control): the setup of the timing
 * schedule, without the idle time and the step, and with clients that
 * break each property the checker judges there.  On FT_BRK_X only two
 * fakers (guarded; each logs its fence off by a constant): the
 * orchestrator BREAKs the name while the one that logs fences too high
 * holds it, so its section told LOST reason=broken shows a fence not
 * below F (break-broken); the one that logs them too low is granted
 * after those BREAKs with a fence that shows below F (break-after); both
 * put the fences out of order (fence).  On acct-a, sem and rw, a lease
 * holder that does not track its lease sleeps past its ttl and then
 * writes (or holds a permit, or holds rw exclusive) while the others
 * have taken the name: overlap, a permit's double grant, a shared
 * holder inside the exclusive one's section.
 */
static void
ft_sched_timing_control(struct ft_run *r)
{
    struct ft_kind up = ft_plain, down = ft_plain, expired[3];
    const char *const names[3] = { ft_names[0], FT_SEM, FT_RW };
    char sleep[16], ports[FT_PORTS_MAX];
    size_t idx[3], k;
    int64_t deadline;
    bool done;
    int fu, c;

    up.guarded = down.guarded = true;
    up.fake_fence = FT_FAKE_UP;
    down.fake_fence = FT_FAKE_DOWN;
    if ((fu = ft_start_on(r, FT_BRK_X, &up, 0, r->ndaemons, 0, FT_TTL_MS, "300-500", 0)) < 0
        || ft_start_on(r, FT_BRK_X, &down, 1, r->ndaemons, 0, FT_TTL_MS, FT_SLEEP, 0) < 0) {
        return;
    }
    r->brk = true;
    r->brk_x_only = true;
    r->recovery[r->nrecovery++] = FT_BRK_X;
    ft_event(r, "two fakers on %s: one logs every fence %+d, the other %+d", FT_BRK_X,
             FT_FAKE_UP, FT_FAKE_DOWN);
    ft_warmup(r, FT_WARMUP_MS);
    for (k = 0; k < FT_CONTROL_BREAKS; k++) {
        if (ft_wait_in_section(r, (size_t)fu, 200) < 0) {
            ft_setup_failed(r, "the high faker never held %s", FT_BRK_X);
            return;
        }
        ft_ports_of(r, k % r->ndaemons, r->ndaemons, ports, sizeof(ports));
        if ((c = ft_start_operator(r, ports, FT_BRK_X, "0-0", 1)) < 0) {
            return;
        }
        ft_end_operator(r, (size_t)c, false);
        ft_event(r, "BREAK %s while the high faker holds it (operator log %s)", FT_BRK_X,
                 r->oplogs[c]);
        ft_pause(500);
    }
    snprintf(sleep, sizeof(sleep), "%d", FT_EXPIRE_SLEEP_MS);
    for (k = 0; k < 3; k++) {
        expired[k] = k == 1 ? ft_counted : ft_plain;
        expired[k].lease_pct = 100;
        expired[k].ignore_lost = true;
        c = ft_start_on(r, names[k], &expired[k], k % r->ndaemons, r->ndaemons, 1, FT_TTL_MS,
                        sleep, 0);
        if (c < 0) {
            return;
        }
        idx[k] = (size_t)c;
    }
    ft_event(r, "clients %zu, %zu, %zu take leases of %s, a permit of %s and %s (exclusive) "
             "and use them %d ms long (ttl %d ms)", idx[0], idx[1], idx[2], names[0],
             names[1], names[2], FT_EXPIRE_SLEEP_MS, FT_TTL_MS);
    /* One section each, then they exit: wait for that. */
    deadline = h_now_ms() + FT_WAIT_MS + FT_EXPIRE_SLEEP_MS;
    do {
        h_sleep_ms(100);
        ft_reap(r);
        done = true;
        for (k = 0; k < 3; k++) {
            done = done && r->clients[idx[k]].pid == 0;
        }
    } while (!done && h_now_ms() < deadline);
    if (!done) {
        ft_setup_failed(r, "the lease holders that do not track their leases did not finish "
                        "their section within %d ms", FT_WAIT_MS + FT_EXPIRE_SLEEP_MS);
        return;
    }
    r->heal_us = ft_now_us();
    r->neg_exclusive = names[0];
    r->neg_counted = names[1];
    r->neg_permit_overlap = true;
    r->neg_shared = names[2];
    r->neg_fence = FT_BRK_X;
}

/*
 * The liveness schedules (README, "Liveness"): on FT_LIVE, one client
 * through daemon 0 holds it for a few hundred ms at a time (ttl 6 s) and
 * pauses 4-5 s between its sections, while FT_LIVE_WAITERS clients wait
 * for it through daemon 1 (short sections, no pause; they start while
 * the holder holds it).  Each time the
 * holder releases, the name is free while daemon 1's head waits: the
 * release's announcement must wake it at once.  A daemon that announces
 * nothing leaves it asleep until the holder's ttl would have run out
 * (its fallback), and the name free for seconds: the negative control
 * (liveness-control) must show that as a liveness finding.  No fault.
 */
static void
ft_sched_liveness(struct ft_run *r)
{
    struct ft_kind holder = ft_plain;
    char ports[FT_PORTS_MAX];
    size_t i;
    int h;

    holder.think_min_ms = FT_LIVE_THINK_MIN_MS;
    ft_ports_of(r, 0, r->ndaemons, ports, sizeof(ports));
    h = ft_start_kind(r, FT_LIVE, &holder, ports, 0, FT_LIVE_TTL_MS, FT_LIVE_HOLD, 0,
                      FT_LIVE_THINK_MS);
    if (h < 0) {
        ft_setup_failed(r, "cannot start the holder of %s", FT_LIVE);
        return;
    }
    /* The waiters come while it holds: each release of it then has waiters. */
    if (ft_wait_in_section(r, (size_t)h, 200) < 0) {
        ft_setup_failed(r, "the holder of %s never held it", FT_LIVE);
        return;
    }
    for (i = 0; i < FT_LIVE_WAITERS; i++) {
        if (ft_start_on(r, FT_LIVE, &ft_plain, 1, r->ndaemons, 0, FT_TTL_MS, FT_SLEEP, 0) < 0) {
            return;
        }
    }
    r->recovery[r->nrecovery++] = FT_LIVE;
    ft_event(r, "%s: a holder through daemon 0 (ttl %d ms, sections of %s ms, %d-%d ms "
             "between them), %d waiters through daemon 1", FT_LIVE, FT_LIVE_TTL_MS,
             FT_LIVE_HOLD, FT_LIVE_THINK_MIN_MS, FT_LIVE_THINK_MS, FT_LIVE_WAITERS);
    ft_pause(FT_LIVE_RUN_MS);
    if (r->sc->negative) {
        r->neg_live = FT_LIVE;
    }
}

static int ft_pick_build(struct ft_run *r, size_t d, bool old, struct h_daemon_opts *o);

#define FT_UPGRADE_DAEMONS  3       /* daemons of the upgrade schedules */
#define FT_UPGRADE_OLD      0x3u    /* daemons 0 and 1 start on the past build */
#define FT_UPGRADE_DOWN_MS  500     /* a daemon is down this long (its package replaced) */
#define FT_UPGRADE_SETTLE_MS 2000   /* a restart's liveness window lasts this long after
                                       its daemon is back (its clients come back to it) */
#define FT_UPGRADE_RUN_MS   4000    /* between one daemon's start and the next one's stop */

/*
 * The upgrade schedules (tests/faults/README.md, "Upgrades"): three
 * daemons on the same masters, 0 and 1 of a past build (the last release,
 * or in the control the build that double-grants), 2 of this one; the
 * regular clients (exclusive names, fenced, sessions and leases mixed),
 * the counted and shared/exclusive names, the BREAK targets and their
 * operator, through all three.  After the warm-up, a rolling restart:
 * daemon 0 stopped (SIGTERM, as a package upgrade does) and started
 * again on this build, then daemon 1, then daemon 2 rolled back to the
 * past build, each on its own port, each after FT_UPGRADE_RUN_MS of the
 * last; the clients of a stopped daemon go to the next in their lists
 * and come back.  Both builds serve the names at every moment.
 */
static void
ft_sched_upgrade(struct ft_run *r)
{
    static const struct { size_t d; bool to_old; } steps[] = {
        { 0, false }, { 1, false }, { 2, true },
    };
    const char *const names = FT_BRK_X "," FT_BRK_RW "," FT_BRK_SEM;
    char ports[FT_PORTS_MAX];
    size_t k;

    if (ft_timing_clients(r, r->ndaemons) != 0) {
        return;
    }
    ft_ports(r, 0, ports, sizeof(ports));
    if (ft_start_operator(r, ports, names, FT_BREAK_EVERY, 0) < 0) {
        return;
    }
    ft_event(r, "operator: BREAK one of %s every %s ms, through daemons 0-%zu", names,
             FT_BREAK_EVERY, r->ndaemons - 1);
    ft_warmup(r, FT_WARMUP_MS);
    for (k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        size_t d = steps[k].d;
        bool was_old = r->old[d];
        int64_t from = ft_now_us();
        int rc;

        h_use_daemon(d);
        rc = h_stop_daemon();
        ft_event(r, "daemon %zu (%s) stopped: SIGTERM, exit status %d", d,
                 was_old ? "past build" : "this build", rc);
        ft_pause(FT_UPGRADE_DOWN_MS);
        if (ft_pick_build(r, d, steps[k].to_old, &r->dopts) != 0) {
            return;
        }
        if (h_restart_daemon(&r->dopts) != 0) {
            ft_setup_failed(r, "daemon %zu did not start again on port %d", d, r->ports[d]);
            return;
        }
        r->heal_us = ft_now_us();
        if (r->nrestarts < FT_LIVE_WINDOWS) {
            r->restarts[r->nrestarts].d = d;
            r->restarts[r->nrestarts].old = r->old[d];
            r->restarts[r->nrestarts++].at_us = r->heal_us;
        }
        ft_event(r, "daemon %zu started again on port %d: %s -> %s%s", d, h_daemon_port(),
                 was_old ? "past build" : "this build",
                 r->old[d] ? "past build" : "this build",
                 r->old[d] && !was_old ? " (a rollback)" : "");
        if (r->nwindows < FT_LIVE_WINDOWS) {
            r->windows[r->nwindows].from_us = from;
            r->windows[r->nwindows++].to_us = r->heal_us + FT_UPGRADE_SETTLE_MS * 1000;
        }
        h_use_daemon(0);
        ft_pause(FT_UPGRADE_RUN_MS);
    }
}

static const struct ft_scenario ft_scenarios[] = {
    { .name = "kill-masters",
      .what = "kill -9 master 4, 2 s later master 3; 2 s later restart both (empty)",
      .fault = ft_sched_kill_masters, .kinds = true },
    { .name = "stop-1-master-short",
      .what = "SIGSTOP master 4 for 1.5 s (> node_timeout 500 ms)",
      .fault = ft_sched_stop1_short, .kinds = true },
    { .name = "stop-2-masters-short",
      .what = "SIGSTOP masters 3 and 4 for 1.5 s (> node_timeout 500 ms)",
      .fault = ft_sched_stop2_short, .kinds = true },
    { .name = "stop-1-master-long", .what = "SIGSTOP master 4 for 5 s (> ttl 3 s)",
      .fault = ft_sched_stop1_long, .kinds = true },
    { .name = "stop-2-masters-long", .what = "SIGSTOP masters 3 and 4 for 5 s (> ttl 3 s)",
      .fault = ft_sched_stop2_long, .kinds = true },
    { .name = "kill-daemon",
      .what = "kill -9 daemon 1 while it holds acct-a and a permit of sem; its clients go "
              "to daemon 0",
      .fault = ft_sched_kill_daemon, .kinds = true },
    { .name = "stop-client", .what = "SIGSTOP a client inside its section for 6 s, then SIGCONT",
      .fault = ft_sched_stop_client, .kinds = true },
    { .name = "kill-client",
      .what = "kill -9 a client inside its section, then a permit holder and a shared "
              "holder; their keys must go within 1 s",
      .fault = ft_sched_kill_client, .kinds = true },
    { .name = "restart-empty-quarantine",
      .what = "restart 2 masters empty while a lock is on exactly 3; restart quarantine on",
      .fault = ft_sched_restart_empty, .quarantine = true, .kinds = true },
    { .name = "restart-empty-restored",
      .what = "the same with the quarantine off: a renewal puts the lost keys back first",
      .fault = ft_sched_restart_empty, .fences_lost = true, .kinds = true },
    { .name = "restart-majority-quarantine",
      .what = "restart 3 of 5 masters empty at once while a lock is on all 5; quarantine on",
      .fault = ft_sched_restart_majority, .quarantine = true, .fences_lost = true,
      .kinds = true },
    { .name = "restart-majority-no-quarantine",
      .what = "the same with the quarantine off (negative control: must report the double "
              "grants)",
      .fault = ft_sched_restart_majority, .negative = true, .fences_lost = true,
      .kinds = true },
    { .name = "clock-forward",
      .what = "step the wall clocks of masters 0-2 forward 10 s while locks are on all 5; "
              "clock check on",
      .fault = ft_sched_clock_forward, .kinds = true, .clock_masters = FT_CLOCK_MASTERS },
    { .name = "clock-back",
      .what = "step the wall clocks of masters 0-2 back 10 s while locks are on all 5; clock "
              "check on",
      .fault = ft_sched_clock_back, .kinds = true, .clock_masters = FT_CLOCK_MASTERS },
    { .name = "clock-forward-no-check",
      .what = "the forward step with lock.clock_check false (negative control: must report "
              "the double grants)",
      .fault = ft_sched_clock_forward, .negative = true, .kinds = true,
      .clock_masters = FT_CLOCK_MASTERS, .clock_check = "false" },
    { .name = "partition-1-master",
      .what = "cut master 4 from both daemons (DROP both ways) for 5 s (> ttl)",
      .fault = ft_sched_partition1, .kinds = true, .net = true },
    { .name = "partition-2-masters",
      .what = "cut masters 3 and 4 from both daemons for 5 s (> ttl)",
      .fault = ft_sched_partition2, .kinds = true, .net = true },
    { .name = "partition-daemon-minority",
      .what = "cut daemon 1 from masters 0-2 for 6 s while it holds acct-a, a permit of sem "
              "and rw (shared); it still reaches masters 3, 4",
      .fault = ft_sched_minority, .kinds = true, .net = true },
    { .name = "partition-daemon-minority-ignore-lost",
      .what = "the same, its long holders ignore LOST (negative control: must report the "
              "double grants)",
      .fault = ft_sched_minority, .negative = true, .kinds = true, .net = true,
      .broken = true },
    { .name = "stale-after-drop",
      .what = "cut daemon 0 from master 0 until it drops the link with a LOCK pending there; "
              "after the heal, master 0 must never run that LOCK",
      .fault = ft_sched_stale_drop, .net = true },
    { .name = "half-partition",
      .what = "drop master 4's replies to the daemons for 5 s (requests still arrive)",
      .fault = ft_sched_half_partition, .kinds = true, .net = true },
    { .name = "loss-5",
      .what = "5% random packet loss both ways on the links of masters 2-4 for 10 s",
      .fault = ft_sched_loss, .kinds = true, .net = true },
    { .name = "delay-jitter",
      .what = "20 +- 15 ms delay each way on the links of masters 2-4 for 10 s (delay "
              "proxies)",
      .fault = ft_sched_delay, .kinds = true, .net = true, .delayed = true },
    { .name = "pause-daemon",
      .what = "SIGSTOP daemon 1 for 5 s (> ttl 3 s) under its holders; a late writer's fenced "
              "write must be refused",
      .fault = ft_sched_pause_daemon, .kinds = true },
    { .name = "pause-daemon-unfenced",
      .what = "the same with an unfenced late write (negative control: must report it)",
      .fault = ft_sched_pause_unfenced, .negative = true, .kinds = true },
    { .name = "timing",
      .what = "0-20 ms per chunk and way in front of every master, 3 daemons, leases reset, "
              "extended and released through another daemon, BREAKs; daemon 2 idle, then a "
              "clock step of masters 0 and 1 and daemon 2 in use",
      .fault = ft_sched_timing, .kinds = true, .clock_masters = FT_TIMING_STEPPED,
      .daemons = FT_TIMING_DAEMONS, .idle_daemon = true, .proxied = true, .mixed = true,
      .strict = true },
    { .name = "timing-control",
      .what = "the timing setup with fakers of fences and leases used past their ttl "
              "(negative control: must report each property)",
      .fault = ft_sched_timing_control, .negative = true, .kinds = true,
      .daemons = FT_TIMING_DAEMONS, .proxied = true, .mixed = true, .strict = true },
    { .name = "liveness",
      .what = "no fault; a holder of live through daemon 0 pauses 4-5 s between its "
              "sections while 2 clients wait for it through daemon 1",
      .fault = ft_sched_liveness, .kinds = true },
    { .name = "liveness-control",
      .what = "the same with daemons built to announce no release (negative control: must "
              "report the name free while its waiters sleep)",
      .fault = ft_sched_liveness, .negative = true, .kinds = true, .skip_announce = true },
    { .name = "upgrade",
      .what = "daemons 0 and 1 of the last release, 2 of this build, on the same masters; "
              "BREAKs, leases; a rolling restart: 0 and 1 upgraded, 2 rolled back",
      .fault = ft_sched_upgrade, .kinds = true, .daemons = FT_UPGRADE_DAEMONS, .mixed = true,
      .strict = true, .release = FT_RELEASE_PREV, .old_daemons = FT_UPGRADE_OLD },
    { .name = "upgrade-control",
      .what = "the same with the build from before the keys of shared and counted holds "
              "moved (negative control: must report the double grants)",
      .fault = ft_sched_upgrade, .negative = true, .kinds = true,
      .daemons = FT_UPGRADE_DAEMONS, .mixed = true, .strict = true,
      .release = FT_RELEASE_CONTROL, .old_daemons = FT_UPGRADE_OLD },
};

#define FT_NSCENARIOS (sizeof(ft_scenarios) / sizeof(ft_scenarios[0]))

/* ---- one run ---- */

/*
 * A delay proxy in front of master i, listening on the bridge's address
 * (the daemons reach it from their namespaces), or on 127.0.0.1 outside
 * the network scenarios, delaying each chunk by range ms ("MIN-MAX")
 * each way, from the start when on, else once switched on (SIGUSR1).
 * Returns 0, or -1 when it would not start.
 */
static int
ft_start_proxy(struct ft_run *r, size_t i, const char *range, bool on)
{
    char listen[H_ADDR_MAX + 8], target[H_ADDR_MAX + 8], out[PATH_MAX + 64], line[128];
    const char *argv[9];
    int64_t deadline;
    int tries, port, status;
    pid_t pid;

    snprintf(target, sizeof(target), "%s:%d", h_master_addr(i), h_master_port(i));
    snprintf(out, sizeof(out), "%s/delay-proxy-%zu.log", r->dir, i);
    for (tries = 0; tries < 5; tries++) {
        port = h_free_port();
        snprintf(listen, sizeof(listen), "%s:%d", r->net ? netns_gateway() : "127.0.0.1", port);
        argv[0] = ft_proxy_bin;
        argv[1] = "-l";
        argv[2] = listen;
        argv[3] = "-t";
        argv[4] = target;
        argv[5] = "-d";
        argv[6] = range;
        argv[7] = on ? "-o" : NULL;
        argv[8] = NULL;
        pid = h_spawn(argv, out);
        if (pid < 0) {
            return -1;
        }
        /* It says "listening" once it does; a port taken meanwhile makes it exit. */
        deadline = h_now_ms() + FT_PROXY_START_MS;
        for (;;) {
            if (waitpid(pid, &status, WNOHANG) == pid) {
                pid = 0;
                break;
            }
            ft_log_line(out, "listening", line, sizeof(line));
            if (line[0] != '\0') {
                r->proxies[i] = pid;
                snprintf(r->via[i], sizeof(r->via[i]), "%s", listen);
                return 0;
            }
            if (h_now_ms() >= deadline) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                fprintf(stderr, "faults: the delay proxy of master %zu did not listen within "
                        "%d ms (see %s)\n", i, FT_PROXY_START_MS, out);
                return -1;
            }
            h_sleep_ms(FT_POLL_MS);
        }
    }
    fprintf(stderr, "faults: the delay proxy of master %zu would not start (see %s)\n", i, out);
    return -1;
}

/* Stop the delay proxies. */
static void
ft_stop_proxies(struct ft_run *r)
{
    size_t i;

    for (i = 0; i < FT_MASTERS; i++) {
        if (r->proxies[i] > 0) {
            kill(r->proxies[i], SIGTERM);
            if (waitpid(r->proxies[i], NULL, 0) < 0 && errno == EINTR) {
                waitpid(r->proxies[i], NULL, 0);
            }
            r->proxies[i] = 0;
        }
    }
}

/*
 * A network scenario's hosts: one namespace per master and per daemon
 * (netns.h), the masters placed there for the harness.  0 or -1.
 */
static int
ft_make_hosts(struct ft_run *r, struct h_host *hosts)
{
    static const char *const names[FT_HOSTS] = { "m0", "m1", "m2", "m3", "m4", "d0", "d1" };
    size_t h;

    if (netns_up(names, FT_HOSTS) != 0) {
        fprintf(stderr, "faults: cannot make the namespaces (see %s/netns.log)\n", ft_dir);
        return -1;
    }
    for (h = 0; h < FT_HOSTS; h++) {
        snprintf(hosts[h].addr, sizeof(hosts[h].addr), "%s", netns_addr(h));
        snprintf(hosts[h].netns, sizeof(hosts[h].netns), "%s", netns_name(h));
    }
    h_place_masters(hosts, FT_MASTERS);
    ft_event(r, "namespaces %s..%s: masters on %s..%s, daemons on %s and %s, the suite on %s",
             netns_name(0), netns_name(FT_HOSTS - 1), netns_addr(0), netns_addr(FT_MASTERS - 1),
             netns_addr(FT_HOST_DAEMON(0)), netns_addr(FT_HOST_DAEMON(1)), netns_gateway());
    return 0;
}

/* The scenario's past build (its release), or NULL when it has none or it was not built. */
static const char *
ft_release_bin(const struct ft_run *r)
{
    return r->sc->release == FT_RELEASE_PREV ? ft_prev_bin
           : r->sc->release == FT_RELEASE_CONTROL ? ft_control_bin : NULL;
}

/*
 * In an upgrade schedule, make daemon d's next start run the scenario's
 * past release (old) or this build: the harness's one way of choosing a daemon's binary,
 * $REDLOCKD_BIN at its start; the past build's config without the keys
 * it does not know (known_keys_only).  0, or -1 with the setup failure
 * recorded.
 */
static int
ft_pick_build(struct ft_run *r, size_t d, bool old, struct h_daemon_opts *o)
{
    const char *bin = old ? ft_release_bin(r) : ft_new_bin;

    if (r->sc->release == 0) {
        return 0;       /* one build for every daemon, $REDLOCKD_BIN as it is */
    }
    if (old && bin == NULL) {
        ft_setup_failed(r, "no past build for this schedule (%s; make faults builds it "
                        "from the repository's history)",
                        r->sc->release == FT_RELEASE_CONTROL ? "REDLOCKD_PREV_CONTROL_BIN"
                        : "REDLOCKD_PREV_BIN");
        return -1;
    }
    if (bin != NULL ? setenv("REDLOCKD_BIN", bin, 1) != 0 : unsetenv("REDLOCKD_BIN") != 0) {
        ft_setup_failed(r, "setenv REDLOCKD_BIN: %s", strerror(errno));
        return -1;
    }
    o->known_keys_only = old;
    r->old[d] = old;
    return 0;
}

/* Start the processes of a run: masters, daemons, regular clients. */
static int
ft_setup(struct ft_run *r)
{
    struct h_daemon_opts o = {
        .default_ttl_ms = FT_TTL_MS,
        .max_ttl_ms = FT_MAX_TTL_MS,
        .retry_delay_ms = FT_RETRY_MS,
        .fence = "always",
        .key_prefix = FT_PREFIX,
        .log_level = ft_log_level,
        .restart_quarantine = r->sc->quarantine,
        .expect_masters_up = r->sc->quarantine ? -1 : 0,
        .clock_check = r->sc->clock_check,
    };
    struct h_host hosts[FT_HOSTS];
    const char *via[FT_MASTERS] = { NULL };
    char ports[FT_PORTS_MAX];
    size_t d, k, i;

    if (h_begin(r->sc->name) != 0 || (r->net && ft_make_hosts(r, hosts) != 0)
        || (r->sc->clock_masters != 0 && h_clock_masters(r->sc->clock_masters) != 0)
        || h_start_masters(FT_MASTERS) != 0) {
        return -1;
    }
    if (r->net) {
        o.auth_password = FT_NET_PASSWORD;
    }
    if (r->sc->delayed) {
        for (i = FT_MASTERS - FT_SLOW_MASTERS; i < FT_MASTERS; i++) {
            if (ft_start_proxy(r, i, FT_DELAY_RANGE, false) != 0) {
                return -1;
            }
            via[i] = r->via[i];
        }
        o.master_addrs = via;
        ft_event(r, "the daemons reach masters %d-%d through delay proxies on %s",
                 FT_MASTERS - FT_SLOW_MASTERS, FT_MASTERS - 1, netns_gateway());
    }
    if (r->sc->proxied) {
        for (i = 0; i < FT_MASTERS; i++) {
            if (ft_start_proxy(r, i, FT_TIMING_DELAY, true) != 0) {
                return -1;
            }
            via[i] = r->via[i];
        }
        o.master_addrs = via;
        ft_event(r, "the daemons reach every master through a delay proxy (%s ms per chunk, "
                 "each way, drawn for each chunk)", FT_TIMING_DELAY);
    }
    if (r->sc->proxied || r->sc->idle_daemon || r->sc->release != 0) {
        o.admin_password = FT_ADMIN_PASSWORD;
    }
    for (d = 0; d < r->ndaemons; d++) {
        o.host = r->net ? &hosts[FT_HOST_DAEMON(d)] : NULL;
        if (ft_pick_build(r, d, (r->sc->old_daemons & (1u << d)) != 0, &o) != 0
            || h_start_daemon(&o) != 0) {
            return -1;
        }
        r->ports[d] = h_daemon_port();
        snprintf(r->addrs[d], sizeof(r->addrs[d]), "%s", h_daemon_addr());
    }
    o.host = NULL;
    o.known_keys_only = false;
    r->dopts = o;
    if (r->sc->release != 0) {
        ft_event(r, "daemons on the past build (%s): %s%s%s; the others on this one",
                 ft_release_bin(r), r->old[0] ? "0 " : "", r->old[1] ? "1 " : "",
                 r->ndaemons > 2 && r->old[2] ? "2" : "");
    }
    ft_event(r, "%d masters, %zu daemons on ports %d, %d%s%s%s", FT_MASTERS, r->ndaemons,
             r->ports[0], r->ports[1], r->ndaemons > 2 ? " and more" : "",
             r->sc->quarantine ? " (restart quarantine on)" : "",
             r->sc->clock_masters != 0 ? " (stepped masters under libfaketime)" : "");
    if (r->sc->quarantine && !ft_wait_quarantine_over(r)) {
        fprintf(stderr, "faults: the daemons do not grant %d ms after the start\n",
                FT_MAX_TTL_MS + FT_WAIT_MS);
        return -1;
    }
    if (!ft_counter_cmd("FLUSHALL")) {
        fprintf(stderr, "faults: the counters' redis-server does not answer\n");
        return -1;
    }
    for (k = 0; k < FT_NAMES; k++) {
        for (i = 0; i < FT_PER_NAME; i++) {
            struct ft_kind kind = ft_mixed(r, &ft_plain);

            ft_ports(r, i % r->nactive, ports, sizeof(ports));
            if (ft_start_kind(r, ft_names[k], &kind, ports, 0, FT_TTL_MS, FT_SLEEP, 0,
                              FT_THINK_MS) < 0) {
                return -1;
            }
            r->clients[r->nclients - 1].daemon = (int)(i % r->nactive);
        }
    }
    ft_event(r, "%zu clients on %s and %s, half through each daemon", r->nclients,
             ft_names[0], ft_names[1]);
    if (r->kinds) {
        /* The counted name, then the shared/exclusive one; each half through each daemon. */
        for (i = 0; i < FT_SEM_CLIENTS; i++) {
            struct ft_kind kind = ft_mixed(r, &ft_counted);

            ft_ports(r, i % r->nactive, ports, sizeof(ports));
            if (ft_start_kind(r, FT_SEM, &kind, ports, 0, FT_TTL_MS, FT_KIND_SLEEP, 0,
                              FT_KIND_THINK_MS) < 0) {
                return -1;
            }
            r->clients[r->nclients - 1].daemon = (int)(i % r->nactive);
        }
        for (i = 0; i < FT_READERS + FT_WRITERS; i++) {
            bool reader = i < FT_READERS;
            struct ft_kind kind = ft_mixed(r, reader ? &ft_shared : &ft_plain);

            ft_ports(r, i % r->nactive, ports, sizeof(ports));
            if (ft_start_kind(r, FT_RW, &kind, ports, 0, FT_TTL_MS,
                              reader ? FT_KIND_SLEEP : FT_SLEEP, 0,
                              reader ? FT_KIND_THINK_MS : FT_THINK_MS) < 0) {
                return -1;
            }
            r->clients[r->nclients - 1].daemon = (int)(i % r->nactive);
        }
        ft_event(r, "%d clients on %s (limit=%d), %d shared and %d exclusive on %s",
                 FT_SEM_CLIENTS, FT_SEM, FT_LIMIT, FT_READERS, FT_WRITERS, FT_RW);
    }
    return 0;
}

/* After a daemon was killed: what its clients did next. */
static void
ft_note_moved(struct ft_run *r, const struct checker_sections *s)
{
    int dead = r->ports[r->killed_daemon];
    size_t i, k, clients = 0, after = 0, through_dead = 0, late = 0;
    int64_t first = -1;

    for (i = 0; i < r->nclients; i++) {
        if (r->clients[i].daemon == r->killed_daemon && !r->clients[i].finite) {
            clients++;
        }
    }
    for (k = 0; k < s->n; k++) {
        const struct ft_client *c = &r->clients[s->v[k].log];

        if (c->daemon != r->killed_daemon || s->v[k].begin_us < r->heal_us) {
            continue;
        }
        if (s->v[k].port == dead) {
            /*
             * The daemon sent the OK before it died and the client read it
             * after the kill: the closed connection follows the OK, so the
             * section must end at once without a write.  Anything else is
             * a grant by a dead daemon.
             */
            if (s->v[k].how == CHECKER_END_ABORT) {
                late++;
            } else {
                through_dead++;
            }
            continue;
        }
        after++;
        if (first < 0 || s->v[k].begin_us < first) {
            first = s->v[k].begin_us;
        }
    }
    ft_note(r, "the %zu clients of daemon %d went on through daemon %d: %zu sections after "
            "the kill, the first %.0f ms after it", clients, r->killed_daemon,
            1 - r->killed_daemon, after, first < 0 ? -1.0 : (double)(first - r->heal_us) / 1e3);
    if (late > 0) {
        ft_note(r, "%zu grants sent by daemon %d just before the kill were read after it and "
                "aborted on the closed connection", late, r->killed_daemon);
    }
    first = -1;
    for (k = 0; k < s->n; k++) {
        if (strcmp(s->v[k].name, ft_names[0]) == 0 && s->v[k].begin_us >= r->heal_us
            && (first < 0 || s->v[k].begin_us < first)) {
            first = s->v[k].begin_us;
        }
    }
    ft_note(r, "%s, held through the killed daemon, was granted again %.0f ms after the kill "
            "(ttl %d ms)", ft_names[0], first < 0 ? -1.0 : (double)(first - r->heal_us) / 1e3,
            FT_TTL_MS);
    if (through_dead > 0) {
        ft_external(r, "%zu sections were granted through the killed daemon after its kill "
                    "and did not end at once on the closed connection", through_dead);
    }
}

/*
 * Pushes "! LOST <name> reason=gone" in the client logs: an UNLOCK (or a
 * hand-over) found fewer than a quorum still holding the token.  Shown in
 * the notes, not judged: the section had ended before the UNLOCK, and the
 * daemon also says so when a master that holds the token does not answer
 * (see README, "Limits of what is checked").
 */
static size_t
ft_count_gone(const struct ft_run *r)
{
    char *line = NULL;
    size_t cap = 0, i, n = 0;
    FILE *f;

    for (i = 0; i < r->nclients; i++) {
        f = fopen(r->clients[i].log, "re");
        if (f == NULL) {
            continue;
        }
        while (getline(&line, &cap, f) > 0) {
            n += strncmp(line, "PUSH ", 5) == 0 && strstr(line, " ! LOST ") != NULL
                 && strstr(line, " reason=gone") != NULL;
        }
        fclose(f);
    }
    free(line);
    return n;
}

/*
 * How long after the heal the last client that runs until stopped got
 * its lock again (the recovery column is per name, this is per client:
 * a client of a daemon that was cut off waits for its reconnect).
 */
static void
ft_note_served(struct ft_run *r, const struct checker_sections *s)
{
    int64_t worst = -1, first;
    size_t i, k, who = 0;

    for (i = 0; i < r->nclients; i++) {
        if (r->clients[i].finite || r->clients[i].killed_us > 0) {
            continue;
        }
        first = -1;
        for (k = 0; k < s->n; k++) {
            if (s->v[k].log == i && s->v[k].begin_us >= r->heal_us
                && (first < 0 || s->v[k].begin_us < first)) {
                first = s->v[k].begin_us;
            }
        }
        if (first > 0 && first - r->heal_us > worst) {
            worst = first - r->heal_us;
            who = i;
        }
    }
    if (worst >= 0) {
        ft_note(r, "every client had its lock again %.0f ms after the heal (the last: client "
                "%zu, through daemon %d first; bound %lld ms)", (double)worst / 1e3, who,
                r->clients[who].daemon, (long long)r->bound_ms);
    }
}

/* One counter for ft_judge: of name, or of one permit of it (permit >= 0). */
static void
ft_add_counter(struct checker_counter *c, size_t *n, const char *name, int permit)
{
    char id[CHECKER_NAME_MAX + 16];

    c[*n].name = name;
    c[*n].per_permit = permit >= 0;
    c[*n].permit = permit;
    if (permit >= 0) {
        snprintf(id, sizeof(id), "%s:%d", name, permit);
        c[*n].value = ft_counter_value(id);
    } else {
        c[*n].value = ft_counter_value(name);
    }
    (*n)++;
}

/* The notes of a run with kinds: how many held the counted and shared names at once. */
static void
ft_note_kinds(struct ft_run *r)
{
    const char *const names[] = { FT_SEM, FT_RW, FT_HOT_SEM, FT_HOT_RW, FT_BRK_SEM, FT_BRK_RW };
    const struct checker_name_stat *st;
    size_t i;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if ((st = checker_name(&r->res, names[i])) == NULL) {
            continue;
        }
        if (st->hold == CHECKER_HOLD_COUNTED) {
            ft_note(r, "%s: %zu sections, up to %zu holders at once (limit %d)", st->name,
                    st->sections, st->max_holders, st->limit);
        } else {
            ft_note(r, "%s: %zu exclusive and %zu shared sections, up to %zu shared holders "
                    "at once", st->name, st->exclusive, st->shared, st->max_holders);
        }
    }
}

/*
 * A negative control's expectation: the checker reported the double
 * grant of every name the schedule set up for it (r->neg_exclusive: an
 * overlap; r->neg_counted: more holders than its limit, or with
 * r->neg_permit_overlap two holders of one permit; r->neg_shared: an
 * overlap of a shared and an exclusive section).  The restart-majority
 * control names FT_HOT, FT_HOT_SEM and FT_HOT_RW, the minority partition's
 * acct-a, FT_SEM and FT_RW.
 */
static bool
ft_negative_seen(struct ft_run *r)
{
    const struct checker_name_stat *x = NULL, *sem = NULL, *rw = NULL;
    bool ok, s_ok, w_ok;

    if (r->neg_exclusive != NULL) {
        x = checker_name(&r->res, r->neg_exclusive);
    }
    ok = x != NULL && x->overlaps > 0;
    ft_note(r, "negative control: %s overlap %s",
            r->neg_exclusive != NULL ? r->neg_exclusive : "(no name)",
            ok ? "reported" : "NOT reported");
    if (r->neg_counted != NULL) {
        sem = checker_name(&r->res, r->neg_counted);
        s_ok = sem != NULL && (sem->over_limit > 0 || (r->neg_permit_overlap && sem->overlaps > 0));
        ft_note(r, "%s %s %s (up to %zu holders at once, limit %d; %zu over-limit, %zu "
                "overlap findings)", r->neg_counted,
                r->neg_permit_overlap ? "double grant of a permit" : "over-limit",
                s_ok ? "reported" : "NOT reported", sem != NULL ? sem->max_holders : 0,
                FT_LIMIT, sem != NULL ? sem->over_limit : 0, sem != NULL ? sem->overlaps : 0);
        ok = ok && s_ok;
    }
    if (r->neg_shared != NULL) {
        rw = checker_name(&r->res, r->neg_shared);
        w_ok = rw != NULL && rw->overlaps > 0;
        ft_note(r, "%s shared/exclusive overlap %s", r->neg_shared,
                w_ok ? "reported" : "NOT reported");
        ok = ok && w_ok;
    }
    return ok;
}

/*
 * The upgrade control's verdict: a double grant across the two builds
 * on a shared/exclusive name (an overlap) or a counted one (more holders
 * than the limit, or two holders of one permit), FT_RW and FT_SEM or the
 * BREAK targets; an exclusive name is not required to show one (both
 * builds keep its key where the other looks).
 */
static bool
ft_upgrade_negative_seen(struct ft_run *r)
{
    static const char *const shared[2] = { FT_RW, FT_BRK_RW };
    static const char *const counted[2] = { FT_SEM, FT_BRK_SEM };
    const struct checker_name_stat *st;
    size_t i, overlaps = 0, over = 0;

    for (i = 0; i < 2; i++) {
        st = checker_name(&r->res, shared[i]);
        ft_note(r, "%s shared/exclusive overlaps: %zu", shared[i], st != NULL ? st->overlaps : 0);
        overlaps += st != NULL ? st->overlaps : 0;
        st = checker_name(&r->res, counted[i]);
        ft_note(r, "%s: up to %zu holders at once, %zu over-limit, %zu permit overlaps",
                counted[i], st != NULL ? st->max_holders : 0, st != NULL ? st->over_limit : 0,
                st != NULL ? st->overlaps : 0);
        over += st != NULL ? st->over_limit + st->overlaps : 0;
    }
    ft_note(r, "negative control: double grants across the builds %s",
            overlaps + over > 0 ? "reported" : "NOT reported");
    return overlaps + over > 0;
}

/*
 * The upgrade schedules: how many sections each build granted (the
 * daemon of a section's port, and which build that daemon ran when it
 * began), per kind of hold, so that the table shows both builds served.
 */
static void
ft_note_builds(struct ft_run *r, const struct checker_sections *s)
{
    size_t i, d, k, n[2][3] = { { 0 } };

    for (i = 0; i < s->n; i++) {
        const struct checker_section *c = &s->v[i];
        size_t hold = c->hold == CHECKER_HOLD_SHARED ? 1 : c->hold == CHECKER_HOLD_COUNTED ? 2 : 0;
        bool old;

        for (d = 0; d < r->ndaemons && r->ports[d] != c->port; d++) {
        }
        if (d == r->ndaemons) {
            continue;
        }
        old = (r->sc->old_daemons & (1u << d)) != 0;
        for (k = 0; k < r->nrestarts; k++) {
            if (r->restarts[k].d == d && r->restarts[k].at_us <= c->begin_us) {
                old = r->restarts[k].old;
            }
        }
        n[old ? 0 : 1][hold]++;
    }
    ft_note(r, "granted through the past build: %zu exclusive, %zu shared, %zu counted; "
            "through this build: %zu, %zu, %zu", n[0][0], n[0][1], n[0][2], n[1][0], n[1][1],
            n[1][2]);
}

/* Lines of the client logs that begin with word (and a space). */
static size_t
ft_count_lines(const struct ft_run *r, const char *word)
{
    char *line = NULL;
    size_t cap = 0, i, n = 0, len = strlen(word);
    FILE *f;

    for (i = 0; i < r->nclients; i++) {
        f = fopen(r->clients[i].log, "re");
        if (f == NULL) {
            continue;
        }
        while (getline(&line, &cap, f) > 0) {
            n += strncmp(line, word, len) == 0 && line[len] == ' ';
        }
        fclose(f);
    }
    free(line);
    return n;
}

/* Whether sections a and b of one name exclude each other. */
static bool
ft_conflict(const struct checker_section *a, const struct checker_section *b)
{
    if (a->hold == CHECKER_HOLD_COUNTED) {
        return a->permit == b->permit;
    }
    return a->hold != CHECKER_HOLD_SHARED || b->hold != CHECKER_HOLD_SHARED;
}

/*
 * The notes of a run whose clients mix leases and sessions: what the
 * leases and the BREAKs did.  Among them, the grants read between a
 * lease's UNLOCK and that UNLOCK's own answer: the release took effect
 * on the masters before its answer came back (linearizable), which is
 * why a lease section ends at the UNLOCK's send, not at its answer.
 */
static void
ft_timing_notes(struct ft_run *r, const struct checker_sections *s)
{
    size_t i, k, between = 0, notheld = 0, released = 0;

    for (i = 0; i < s->n; i++) {
        const struct checker_section *l = &s->v[i];

        if (!l->lease || l->released_us == 0) {
            continue;
        }
        released++;
        notheld += l->notheld;
        for (k = 0; k < s->n; k++) {
            const struct checker_section *t = &s->v[k];

            between += k != i && strcmp(t->name, l->name) == 0 && ft_conflict(l, t)
                       && t->begin_us > l->release_us && t->begin_us < l->released_us;
        }
    }
    ft_note(r, "%zu of %zu sections were leases (%zu connections reset right after the OK, "
            "%zu EXTENDs); %zu lease UNLOCKs answered, %zu of them NOTHELD; %zu grants read "
            "between a lease's UNLOCK and its answer (linearizable, not judged); %zu lease "
            "writes acknowledged after their deadline (not judged)", r->res.leases,
            r->res.sections, ft_count_lines(r, "RESET"), ft_count_lines(r, "EXTEND"),
            released, notheld, between, r->res.late_writes);
    if (r->noperators > 0) {
        ft_note(r, "%zu BREAKs answered OK; %zu overlaps with a holder a BREAK had ended "
                "(not violations); %zu sections granted after a BREAK's OK were ended by it "
                "(not judged)", r->res.breaks, r->res.broken, r->res.broken_late);
    }
}

/* A control with fakers of fences: the fence, break-after and break-broken checks each reported. */
static bool
ft_fence_negative_seen(struct ft_run *r)
{
    bool fence = r->res.counts[CHECKER_FENCE] > 0;
    bool after = r->res.counts[CHECKER_BREAK_AFTER] > 0;
    bool broken = r->res.counts[CHECKER_BREAK_BROKEN] > 0;

    if (r->neg_fence == NULL) {
        return true;
    }
    ft_note(r, "%s: fence order %s, break-after %s, break-broken %s", r->neg_fence,
            fence ? "reported" : "NOT reported", after ? "reported" : "NOT reported",
            broken ? "reported" : "NOT reported");
    return fence && after && broken;
}

/*
 * The notes on liveness: the longest judged free gap while a client
 * waited, and per name the longest (the names with waiters), in the
 * timing and liveness schedules and wherever a gap crossed the bound;
 * the worst acquire with them.
 */
static void
ft_note_live(struct ft_run *r)
{
    const struct checker_section *worst = NULL;
    struct checker_sections s;
    char per[512] = "";
    size_t i, used = 0;

    if (r->res.max_gap_us < 0) {
        return;
    }
    if (!r->sc->mixed && r->neg_live == NULL && !r->sc->skip_announce
        && r->res.counts[CHECKER_LIVENESS] == 0 && r->sc->fault != ft_sched_liveness) {
        return;
    }
    /* The worst acquire of a client that waits (a poller is promised no turn). */
    ft_sections(r, &s);
    for (i = 0; i < s.n; i++) {
        if (!r->clients[s.v[i].log].poller
            && (worst == NULL || s.v[i].acquire_us > worst->acquire_us)) {
            worst = &s.v[i];
        }
    }
    for (i = 0; i < r->res.nnames && used < sizeof(per); i++) {
        const struct checker_name_stat *st = &r->res.names[i];

        if (st->max_gap_us > 0) {
            used += (size_t)snprintf(per + used, sizeof(per) - used, "%s%s %.0f ms",
                                     used > 0 ? ", " : "", st->name,
                                     (double)st->max_gap_us / 1e3);
        }
    }
    ft_note(r, "liveness: longest free gap while a client waited %.0f ms (%s; bound %d ms, "
            "%zu findings; %.0f ms in fault windows, not judged); worst acquire %.0f ms, of a "
            "client that waits (polls not) %.0f ms (%s at [%.3f s])",
            (double)r->res.max_gap_us / 1e3, per, FT_LIVE_BOUND_MS,
            r->res.counts[CHECKER_LIVENESS],
            r->res.max_gap_skipped_us < 0 ? 0.0 : (double)r->res.max_gap_skipped_us / 1e3,
            (double)r->res.max_acquire_us / 1e3,
            worst != NULL ? (double)worst->acquire_us / 1e3 : 0.0,
            worst != NULL ? worst->name : "-",
            worst != NULL ? (double)(worst->begin_us - r->start_us) / 1e6 : 0.0);
    checker_free(&s);
}

/* The liveness control's expectation: a liveness finding on r->neg_live. */
static bool
ft_live_negative_seen(struct ft_run *r)
{
    const struct checker_name_stat *st = checker_name(&r->res, r->neg_live);
    bool ok = st != NULL && st->liveness > 0;

    ft_note(r, "negative control: %s free while its waiters slept %s (%zu findings, "
            "longest gap %.0f ms, bound %d ms)", r->neg_live, ok ? "reported" : "NOT reported",
            st != NULL ? st->liveness : 0, st != NULL ? (double)st->max_gap_us / 1e3 : 0.0,
            FT_LIVE_BOUND_MS);
    return ok;
}

/* Judge the logs; decide whether the run met its expectation. */
static void
ft_judge(struct ft_run *r)
{
    struct checker_log logs[FT_CLIENTS_MAX];
    struct checker_counter counters[FT_RUN_NAMES + 3 * FT_LIMIT];
    const char *full[FT_RUN_NAMES], *oplogs[FT_OPERATORS_MAX];
    char path[PATH_MAX + 32];
    struct checker_sections s;
    struct checker_input in;
    size_t i, k = 0, n = 0, nfull = 0;
    int rc;

    for (i = 0; i < r->nclients; i++) {
        logs[i].path = r->clients[i].log;
        logs[i].killed_us = r->clients[i].killed_us;
    }
    memset(counters, 0, sizeof(counters));
    for (i = 0; i < FT_NAMES; i++) {
        ft_add_counter(counters, &n, ft_names[i], -1);
    }
    if (r->hot) {
        ft_add_counter(counters, &n, FT_HOT, -1);
    }
    if (r->kinds) {
        /* A permit's holders write its own counter; the readers of FT_RW write none. */
        for (i = 0; i < FT_LIMIT; i++) {
            ft_add_counter(counters, &n, FT_SEM, (int)i);
        }
        ft_add_counter(counters, &n, FT_RW, -1);
        full[nfull++] = FT_SEM;
        full[nfull++] = FT_RW;
    }
    if (r->hot_kinds) {
        for (i = 0; i < FT_LIMIT; i++) {
            ft_add_counter(counters, &n, FT_HOT_SEM, (int)i);
        }
        ft_add_counter(counters, &n, FT_HOT_RW, -1);
        full[nfull++] = FT_HOT_SEM;
    }
    if (r->brk) {
        ft_add_counter(counters, &n, FT_BRK_X, -1);
    }
    if (r->brk && !r->brk_x_only) {
        for (i = 0; i < FT_BRK_LIMIT; i++) {
            ft_add_counter(counters, &n, FT_BRK_SEM, (int)i);
        }
        ft_add_counter(counters, &n, FT_BRK_RW, -1);
        full[nfull++] = FT_BRK_SEM;
        full[nfull++] = FT_BRK_RW;
    }
    if (r->step) {
        ft_add_counter(counters, &n, FT_STEP_L, -1);
    }
    for (i = 0; i < r->noperators; i++) {
        oplogs[i] = r->oplogs[i];
    }
    for (i = 0; i < n; i++) {
        if (counters[i].value < 0) {
            ft_setup_failed(r, "cannot read the counter of %s", counters[i].name);
        }
    }
    memset(&in, 0, sizeof(in));
    in.logs = logs;
    in.nlogs = r->nclients;
    in.counters = counters;
    in.ncounters = n;
    in.recovery_names = r->recovery;
    in.nrecovery = r->nrecovery;
    in.heal_us = r->heal_us;
    in.recovery_bound_us = r->bound_ms * 1000;
    in.full_names = full;
    in.nfull = r->sc->negative ? 0 : nfull;
    in.break_logs = oplogs;
    in.nbreak_logs = r->noperators;
    in.strict = r->sc->strict;
    if (r->nwindows == 0 && r->fault_us > 0) {
        /* The fault's window: from its start until a recovery bound after its heal. */
        r->windows[r->nwindows].from_us = r->fault_us;
        r->windows[r->nwindows++].to_us = r->heal_us + r->bound_ms * 1000;
    }
    in.live_bound_us = FT_LIVE_BOUND_MS * 1000;
    in.live_skip = r->windows;
    in.nlive_skip = r->nwindows;
    in.live_until_us = r->stop_us;
    snprintf(path, sizeof(path), "%s/findings.log", r->dir);
    in.all_findings = fopen(path, "we");
    printf("    checker:\n");
    rc = checker_run(&in, stdout, &r->res);
    if (in.all_findings != NULL) {
        fclose(in.all_findings);
    }
    if (rc != 0) {
        ft_setup_failed(r, "the client logs could not be read");
    }
    ft_note_kinds(r);
    if ((k = ft_count_gone(r)) > 0) {
        ft_note(r, "%zu UNLOCKs answered '! LOST reason=gone' (not judged)", k);
        k = 0;
    }
    /* What the logs show beyond the checker's own verdict. */
    ft_sections(r, &s);
    if (r->killed_daemon >= 0) {
        ft_note_moved(r, &s);
    }
    if (r->sc->idle_daemon && !r->setup_failed) {
        ft_timing_clock_notes(r, "at the end");
    } else if (r->sc->clock_masters != 0 && !r->setup_failed) {
        ft_judge_clock(r);
    }
    if (r->sc->mixed) {
        ft_timing_notes(r, &s);
    }
    if (r->net && r->heal_us > 0) {
        ft_note_served(r, &s);
    }
    if (r->pause.on) {
        ft_pause_judge(r, &s);
    }
    if (r->sc->release != 0) {
        ft_note_builds(r, &s);
    }
    if (r->heal_us > 0 && ft_unserved(r, &s, &k) > 0) {
        ft_external(r, "%zu clients never got their lock after the heal, client %zu first "
                    "(%s)", ft_unserved(r, &s, &k), k, r->clients[k].log);
    }
    checker_free(&s);
    for (i = 0; i < r->nexternal; i++) {
        checker_add_external(&r->res, stdout, "%s", r->external[i]);
    }
    ft_note_live(r);
    if (r->sc->negative && r->neg_live != NULL) {
        r->passed = !r->setup_failed && ft_live_negative_seen(r);
    } else if (r->sc->negative && r->sc->release != 0) {
        r->passed = !r->setup_failed && ft_upgrade_negative_seen(r);
    } else if (r->sc->negative) {
        r->passed = !r->setup_failed
                    && (r->pause.on ? ft_pause_negative_seen(r) : ft_negative_seen(r))
                    && ft_fence_negative_seen(r);
    } else {
        size_t judged = r->res.violations, fences = 0;

        if (r->sc->fences_lost) {
            fences = r->res.counts[CHECKER_FENCE] + r->res.counts[CHECKER_STALE_WRITE];
            judged -= fences;
        }
        if (fences > 0) {
            ft_note(r, "%zu fence/stale-write findings after three masters lost their "
                    "counters: shown, not judged (fences need persistent masters)", fences);
        }
        r->passed = !r->setup_failed && judged == 0;
    }
    printf("    %zu sections (%zu wrote, %zu read, %zu aborted, %zu rejected, %zu killed), "
           "%zu violations", r->res.sections, r->res.wrote, r->res.read, r->res.aborted,
           r->res.rejected, r->res.killed, r->res.violations);
    for (i = 0; i < CHECKER_KINDS; i++) {
        if (r->res.counts[i] > 0) {
            printf(" %s=%zu", checker_kind_name(i), r->res.counts[i]);
        }
    }
    printf(", recovery %.0f ms\n", (double)r->res.recovery_us / 1e3);
    if (r->res.max_acquire_us >= 0) {
        printf("    max acquire %.0f ms: pid %ld, granted at [%7.3f s]\n",
               (double)r->res.max_acquire_us / 1e3, r->res.max_acquire_pid,
               (double)(r->res.max_acquire_at_us - r->start_us) / 1e6);
    }
    if (r->res.max_gap_us >= 0) {
        printf("    longest free gap while a client waited %.0f ms (bound %d ms): %s, pid %ld, "
               "from [%7.3f s]", (double)r->res.max_gap_us / 1e3, FT_LIVE_BOUND_MS,
               r->res.max_gap_name, r->res.max_gap_pid,
               (double)(r->res.max_gap_at_us - r->start_us) / 1e6);
        if (r->res.max_gap_skipped_us >= 0) {
            printf("; %.0f ms in a fault window (not judged)",
                   (double)r->res.max_gap_skipped_us / 1e3);
        }
        printf("\n");
    }
}

/* Keep the daemon logs (h_end removes them); show their tails when asked. */
static void
ft_keep_daemon_logs(struct ft_run *r, bool tails)
{
    char to[PATH_MAX + 64];
    size_t d;

    for (d = 0; d < h_daemon_count(); d++) {
        h_use_daemon(d);
        snprintf(to, sizeof(to), "%s/redlockd-%zu.log", r->dir, d);
        ft_copy(h_daemon_log_path(), to);
        if (tails) {
            h_print_daemon_log_tail(25);
        }
    }
}

static void
ft_run_scenario(const struct ft_scenario *sc, struct ft_run *r)
{
    char path[PATH_MAX + 16];

    memset(r, 0, sizeof(*r));
    r->sc = sc;
    r->start_us = ft_now_us();
    r->bound_ms = FT_DEFAULT_BOUND_MS;
    r->killed_daemon = -1;
    r->kinds = sc->kinds;
    r->net = sc->net;
    r->ndaemons = sc->daemons > 0 ? sc->daemons : FT_DAEMONS;
    r->nactive = sc->idle_daemon ? r->ndaemons - 1 : r->ndaemons;
    r->recovery[r->nrecovery++] = ft_names[0];
    r->recovery[r->nrecovery++] = ft_names[1];
    if (r->kinds) {
        r->recovery[r->nrecovery++] = FT_SEM;
        r->recovery[r->nrecovery++] = FT_RW;
    }
    printf("\n== %s: %s\n", sc->name, sc->what);
    if (ft_round > 0) {
        snprintf(r->dir, sizeof(r->dir), "%s/%s.%u", ft_dir, sc->name, ft_round);
    } else {
        snprintf(r->dir, sizeof(r->dir), "%s/%s", ft_dir, sc->name);
    }
    if (mkdir(r->dir, 0755) != 0) {
        ft_setup_failed(r, "mkdir %s: %s", r->dir, strerror(errno));
        return;
    }
    snprintf(path, sizeof(path), "%s/events.log", r->dir);
    r->events = fopen(path, "we");
    if (sc->skip_announce && ft_skip_bin == NULL) {
        ft_setup_failed(r, "no daemon built with REDLOCKD_FAULT_SKIP_ANNOUNCE "
                        "(REDLOCKD_SKIP_ANNOUNCE_BIN; make faults builds one)");
    } else if (sc->skip_announce && setenv("REDLOCKD_BIN", ft_skip_bin, 1) != 0) {
        ft_setup_failed(r, "setenv REDLOCKD_BIN: %s", strerror(errno));
    } else if (ft_setup(r) != 0) {
        ft_setup_failed(r, "the masters, daemons or clients did not start");
    } else {
        sc->fault(r);
        if (!r->setup_failed) {
            if (r->heal_us == 0) {
                r->heal_us = ft_now_us();
            }
            ft_post_phase(r);
        }
    }
    ft_stop_clients(r);
    if (!r->setup_failed) {
        ft_check_keys_gone(r);
    }
    ft_judge(r);
    if (!r->passed || ft_keep) {
        ft_keep_daemon_logs(r, !r->passed);
    }
    h_end();
    ft_stop_proxies(r);
    if (r->net) {
        netns_down();
    }
    r->seconds = (double)(ft_now_us() - r->start_us) / 1e6;
    printf("    => %s (%s) in %.1f s\n", r->passed ? "PASS" : "FAIL",
           !sc->negative ? "expected: no violation"
           : sc->skip_announce ? "expected: a name free too long reported"
           : "expected: double grants reported",
           r->seconds);
    if (r->events != NULL) {
        fclose(r->events);
        r->events = NULL;
    }
}

/* ---- the checker's self-test ---- */

/* A synthetic case: two client logs and what the checker must find. */
struct ft_case {
    const char       *what;         /* for the failure message */
    const char       *log_a;        /* client A's log */
    const char       *log_b;        /* client B's log */
    int64_t           kill_a;       /* A's kill time, 0: not killed */
    long long         counter;      /* final counter of "x" */
    int64_t           heal_us;      /* 0: no recovery check */
    int64_t           bound_us;     /* recovery bound */
    enum checker_kind kind;         /* the only kind expected; CHECKER_KINDS: none */
};

#define FT_A_CLEAN  "START 1 pid=1 name=x\n" \
                    "BEGIN 1000 name=x fence=1 acquire_us=5 port=1\n" \
                    "WRITE 1400 fence=1 value=1\n" \
                    "END 1500 fence=1 read=0 wrote=1 prev_fence=0\n" \
                    "BEGIN 5000 name=x fence=3 acquire_us=7 port=1\n" \
                    "ABORT 5500 fence=3 why=lost\n"
#define FT_B_CLEAN  "START 1 pid=2 name=x\n" \
                    "BEGIN 3000 name=x fence=2 acquire_us=9 port=2\n" \
                    "WRITE 3400 fence=2 value=2\n" \
                    "END 3500 fence=2 read=1 wrote=2 prev_fence=1\n" \
                    "BEGIN 6000 name=x fence=4 acquire_us=9 port=2\n" \
                    "END 6500 fence=4 read=2 wrote=3 prev_fence=2\n"

static const struct ft_case ft_cases[] = {
    { "a clean history", FT_A_CLEAN, FT_B_CLEAN, 0, 3, 2500, 1000, CHECKER_KINDS },
    { "B begins inside A's section",
      "BEGIN 1000 name=x fence=1\nEND 2000 fence=1 read=0 wrote=1 prev_fence=0\n",
      "BEGIN 1999 name=x fence=2\nEND 3000 fence=2 read=1 wrote=2 prev_fence=1\n",
      0, 2, 0, 0, CHECKER_OVERLAP },
    { "fences that go down",
      "BEGIN 1000 name=x fence=5\nEND 2000 fence=5 read=0 wrote=1 prev_fence=0\n",
      "BEGIN 3000 name=x fence=5\nEND 4000 fence=5 read=1 wrote=2 prev_fence=4\n",
      0, 2, 0, 0, CHECKER_FENCE },
    { "a lost update", FT_A_CLEAN, FT_B_CLEAN, 0, 2, 0, 0, CHECKER_LOST_UPDATE },
    { "a write with a stale fence",
      "BEGIN 1000 name=x fence=3\nEND 2000 fence=3 read=0 wrote=1 prev_fence=0\n",
      "BEGIN 3000 name=x fence=4\nEND 4000 fence=4 read=1 wrote=2 prev_fence=9\n",
      0, 2, 0, 0, CHECKER_STALE_WRITE },
    { "a killed client's section, then a grant after the kill",
      "BEGIN 1000 name=x fence=1\nWRITE 1500 fence=1 value=1\nEND 16",
      "BEGIN 2000 name=x fence=2\nEND 3000 fence=2 read=1 wrote=2 prev_fence=1\n",
      1800, 2, 0, 0, CHECKER_KINDS },
    { "a grant before the killed client's kill",
      "BEGIN 1000 name=x fence=1\n",
      "BEGIN 1700 name=x fence=2\nEND 3000 fence=2 read=0 wrote=1 prev_fence=0\n",
      1800, 1, 0, 0, CHECKER_OVERLAP },
    { "no grant within the recovery bound", FT_A_CLEAN, FT_B_CLEAN, 0, 3, 2500, 400,
      CHECKER_RECOVERY },
    { "a section that never ended",
      "BEGIN 1000 name=x fence=1\n",
      "", 0, 0, 0, 0, CHECKER_OPEN },
};

/*
 * Synthetic cases for the counted and shared kinds: up to four client
 * logs, per-permit counters, and the set of kinds the checker must find
 * (a bit per enum checker_kind; 0: none).  Name "s" is counted with
 * limit=3, name "w" is of the shared/exclusive family.
 */
struct ft_kind_case {
    const char *what;               /* for the failure message */
    const char *logs[4];            /* client logs (NULL: empty) */
    int64_t     kill_a;             /* the first client's kill time, 0: not killed */
    long long   counters[FT_LIMIT]; /* final counters of "s" permits 0..2 */
    long long   counter_w;          /* final counter of "w" */
    bool        full;               /* "s" and "w" must have their full holders at once */
    unsigned    expect;             /* kinds that must be found */
};

#define FT_BIT(k)   (1u << (k))
#define FT_S(t, p, f)   "BEGIN " #t " name=s fence=" #f " validity=2900 kind=counted limit=3 " \
                        "permit=" #p "\n"
#define FT_W_X(t, f)    "BEGIN " #t " name=w fence=" #f " validity=2900 kind=exclusive\n"
#define FT_W_S(t, f)    "BEGIN " #t " name=w fence=" #f " validity=2900 kind=shared\n"
#define FT_START        "START 1 pid=1 name=x ttl=3000\n"

static const struct ft_kind_case ft_kind_cases[] = {
    { "three permits at once, a fourth holder on a freed permit (ends and begins at one "
      "instant do not overlap)",
      { FT_START FT_S(1000, 0, 1) "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n"
                 FT_S(3000, 0, 2) "END 3500 fence=2 read=1 wrote=2 prev_fence=1\n",
        FT_START FT_S(1100, 1, 1) "END 2100 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_S(1200, 2, 1) "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_S(2000, 2, 2) "END 2500 fence=2 read=1 wrote=2 prev_fence=1\n" },
      0, { 2, 1, 2 }, 0, true, 0 },
    { "four holders of limit=3 at once",
      { FT_START FT_S(1000, 0, 1) "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_S(1100, 1, 1) "END 2100 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_S(1200, 2, 1) "END 2200 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_S(1500, 0, 2) "END 2500 fence=2 read=1 wrote=2 prev_fence=1\n" },
      0, { 2, 1, 1 }, 0, false, FT_BIT(CHECKER_OVER_LIMIT) | FT_BIT(CHECKER_OVERLAP) },
    { "a counted name whose holders never reach the limit together",
      { FT_START FT_S(1000, 0, 1) "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n"
                 FT_S(4000, 0, 2) "END 5000 fence=2 read=1 wrote=2 prev_fence=1\n",
        FT_START FT_S(2000, 1, 1) "END 3000 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_S(3000, 2, 1) "END 3900 fence=1 read=0 wrote=1 prev_fence=0\n", NULL },
      0, { 2, 1, 1 }, 0, true, FT_BIT(CHECKER_NEVER_FULL) },
    { "a permit's fence that goes down (another permit's smaller fence is fine)",
      { FT_START FT_S(1000, 0, 5) "END 2000 fence=5 read=0 wrote=1 prev_fence=0\n"
                 FT_S(3000, 0, 4) "END 4000 fence=4 read=1 wrote=2 prev_fence=3\n",
        FT_START FT_S(1500, 1, 1) "END 2500 fence=1 read=0 wrote=1 prev_fence=0\n", NULL, NULL },
      0, { 2, 1, 0 }, 0, false, FT_BIT(CHECKER_FENCE) },
    { "readers together (granted in any fence order), then a writer, then a reader",
      { FT_START FT_W_S(1000, 2) "END 2000 fence=2 read=0 reread=0\n",
        FT_START FT_W_S(1500, 1) "END 2500 fence=1 read=0 reread=0\n",
        FT_START FT_W_X(2500, 3) "WRITE 2800 fence=3 value=1\n"
                 "END 3000 fence=3 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_W_S(3000, 4) "END 3500 fence=4 read=1 reread=1\n" },
      0, { 0, 0, 0 }, 1, true, 0 },
    { "a writer begins while a reader holds",
      { FT_START FT_W_S(1000, 1) "END 2000 fence=1 read=0 reread=0\n",
        FT_START FT_W_X(1800, 2) "END 3000 fence=2 read=0 wrote=1 prev_fence=0\n", NULL, NULL },
      0, { 0, 0, 0 }, 1, false, FT_BIT(CHECKER_OVERLAP) },
    { "a reader begins while a writer holds",
      { FT_START FT_W_X(1000, 1) "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_W_S(1500, 2) "END 2500 fence=2 read=1 reread=1\n", NULL, NULL },
      0, { 0, 0, 0 }, 1, false, FT_BIT(CHECKER_OVERLAP) },
    { "a reader after a writer with a smaller fence",
      { FT_START FT_W_X(1000, 5) "END 2000 fence=5 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_W_S(2500, 3) "END 3000 fence=3 read=1 reread=1\n", NULL, NULL },
      0, { 0, 0, 0 }, 1, false, FT_BIT(CHECKER_FENCE) },
    { "a writer after a reader with a smaller fence",
      { FT_START FT_W_S(1000, 7) "END 2000 fence=7 read=0 reread=0\n",
        FT_START FT_W_X(2500, 6) "END 3000 fence=6 read=0 wrote=1 prev_fence=0\n", NULL, NULL },
      0, { 0, 0, 0 }, 1, false, FT_BIT(CHECKER_FENCE) },
    { "a reader that saw the counter change inside its section",
      { FT_START FT_W_S(1000, 1) "END 2000 fence=1 read=0 reread=1\n",
        FT_START FT_W_X(2500, 2) "END 3000 fence=2 read=1 wrote=2 prev_fence=0\n", NULL, NULL },
      0, { 0, 0, 0 }, 1, false, FT_BIT(CHECKER_DIRTY_READ) },
    { "shared holders that never hold together",
      { FT_START FT_W_S(1000, 1) "END 2000 fence=1 read=0 reread=0\n",
        FT_START FT_W_S(2000, 2) "END 3000 fence=2 read=0 reread=0\n", NULL, NULL },
      0, { 0, 0, 0 }, 0, true, FT_BIT(CHECKER_NEVER_FULL) },
    { "a killed reader's section ends at the kill; a writer after it",
      { FT_START FT_W_S(1000, 1), FT_START FT_W_S(1200, 2) "END 1500 fence=2 read=0 reread=0\n",
        FT_START FT_W_X(2000, 3) "END 3000 fence=3 read=0 wrote=1 prev_fence=0\n", NULL },
      1800, { 0, 0, 0 }, 1, true, 0 },
    { "a grant whose validity exceeds its ttl",
      { FT_START "BEGIN 1000 name=w fence=1 validity=4000 kind=exclusive\n"
                 "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n", NULL, NULL, NULL },
      0, { 0, 0, 0 }, 1, false, FT_BIT(CHECKER_VALIDITY) },
    { "one name held as two kinds",
      { FT_START FT_S(1000, 0, 1) "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START "BEGIN 3000 name=s fence=2 kind=shared\nEND 3500 fence=2 read=0 reread=0\n",
        NULL, NULL },
      0, { 1, 0, 0 }, 0, false, FT_BIT(CHECKER_LOG) },
};

/* Write text to path.  0 or -1. */
static int
ft_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    int rc;

    if (f == NULL) {
        return -1;
    }
    rc = fputs(text, f) < 0 ? -1 : 0;
    return fclose(f) == 0 ? rc : -1;
}

/* The kinds' cases (ft_kind_cases): how many were misjudged; *n: how many ran. */
static size_t
ft_self_test_kinds(size_t *n)
{
    static const char *const full[] = { "s", "w" };
    char paths[4][PATH_MAX + 16];
    struct checker_log logs[4];
    struct checker_counter counters[FT_LIMIT + 1];
    struct checker_input in;
    struct checker_result res;
    size_t i, j, k, bad = 0;
    bool ok;

    *n = sizeof(ft_kind_cases) / sizeof(ft_kind_cases[0]);
    for (i = 0; i < *n; i++) {
        const struct ft_kind_case *c = &ft_kind_cases[i];

        for (j = 0; j < 4; j++) {
            snprintf(paths[j], sizeof(paths[j]), "%s/selftest-%zu.log", ft_dir, j);
            if (ft_write_file(paths[j], c->logs[j] != NULL ? c->logs[j] : "") != 0) {
                fprintf(stderr, "faults: self-test: cannot write %s\n", paths[j]);
                return *n;
            }
            logs[j].path = paths[j];
            logs[j].killed_us = j == 0 ? c->kill_a : 0;
        }
        memset(counters, 0, sizeof(counters));
        for (j = 0; j < FT_LIMIT; j++) {
            counters[j].name = "s";
            counters[j].per_permit = true;
            counters[j].permit = (int)j;
            counters[j].value = c->counters[j];
        }
        counters[FT_LIMIT].name = "w";
        counters[FT_LIMIT].value = c->counter_w;
        memset(&in, 0, sizeof(in));
        in.logs = logs;
        in.nlogs = 4;
        in.counters = counters;
        in.ncounters = FT_LIMIT + 1;
        /* Only the names the case uses must be full. */
        in.full_names = full;
        in.nfull = 0;
        ok = checker_run(&in, NULL, &res) == 0;
        if (c->full) {
            in.full_names = checker_name(&res, "s") != NULL ? full : full + 1;
            in.nfull = (checker_name(&res, "s") != NULL) + (checker_name(&res, "w") != NULL);
            ok = checker_run(&in, NULL, &res) == 0;
        }
        for (k = 0; k < CHECKER_KINDS; k++) {
            ok = ok && ((c->expect & FT_BIT(k)) ? res.counts[k] > 0 : res.counts[k] == 0);
        }
        if (!ok) {
            fprintf(stderr, "faults: self-test: the checker misjudged %s; it found:\n",
                    c->what);
            checker_run(&in, stderr, &res);
            bad++;
        }
    }
    return bad;
}

/*
 * Synthetic cases for fenced writes (REJECT): up to three client logs on
 * the exclusive name "w", its final counter, the kinds the checker must
 * find (bits, as above) and the number of fenced overlaps it must count.
 */
struct ft_fence_case {
    const char *what;               /* for the failure message */
    const char *logs[3];            /* client logs (NULL: empty) */
    long long   counter_w;          /* final counter of "w" */
    unsigned    expect;             /* kinds that must be found */
    size_t      fenced;             /* fenced overlaps that must be counted */
};

#define FT_LATE     FT_START FT_W_X(1000, 1) "WRITE 4400 fence=1 value=1\n"
#define FT_LATER    FT_START FT_W_X(4000, 2) "WRITE 4100 fence=2 value=1\n" \
                    "END 4200 fence=2 read=0 wrote=1 prev_fence=0\n"

static const struct ft_fence_case ft_fence_cases[] = {
    { "a late write refused by its fence, after later holders wrote (one of them holds "
      "across the refusal)",
      { FT_LATE "REJECT 4500 fence=1 prev_fence=2\n",
        FT_LATER FT_W_X(4300, 3) "WRITE 4600 fence=3 value=2\n"
                 "END 4700 fence=3 read=1 wrote=2 prev_fence=2\n", NULL },
      2, 0, 2 },
    { "the same late write landing",
      { FT_LATE "END 4500 fence=1 read=0 wrote=1 prev_fence=2\n",
        FT_LATER FT_W_X(4300, 3) "WRITE 4600 fence=3 value=2\n"
                 "END 4700 fence=3 read=1 wrote=2 prev_fence=1\n", NULL },
      2, FT_BIT(CHECKER_OVERLAP) | FT_BIT(CHECKER_STALE_WRITE) | FT_BIT(CHECKER_LOST_UPDATE),
      0 },
    { "a holder granted while another holds, whose write is then refused",
      { FT_START FT_W_X(1000, 1) "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_W_X(1500, 2) "WRITE 1700 fence=2 value=1\n"
                 "REJECT 1800 fence=2 prev_fence=5\n", NULL },
      1, FT_BIT(CHECKER_OVERLAP), 0 },
    { "a refused late writer does not hide an overlap of two later holders",
      { FT_START FT_W_X(1000, 1) "WRITE 4900 fence=1 value=1\n"
                 "REJECT 5000 fence=1 prev_fence=3\n",
        FT_START FT_W_X(3000, 2) "END 3500 fence=2 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_W_X(3400, 3) "END 3600 fence=3 read=1 wrote=2 prev_fence=2\n" },
      2, FT_BIT(CHECKER_OVERLAP), 1 },
    { "a refusal by a stored fence below the writer's",
      { FT_START FT_W_X(1000, 4) "WRITE 1400 fence=4 value=1\n"
                 "REJECT 1500 fence=4 prev_fence=3\n", NULL, NULL },
      0, FT_BIT(CHECKER_LOG), 0 },
};

/* The fenced-write cases (ft_fence_cases): how many were misjudged; *n: how many ran. */
static size_t
ft_self_test_fences(size_t *n)
{
    char paths[3][PATH_MAX + 16];
    struct checker_log logs[3];
    struct checker_counter counter = { "w", 0, false, 0 };
    struct checker_input in;
    struct checker_result res;
    size_t i, j, k, bad = 0;
    bool ok;

    *n = sizeof(ft_fence_cases) / sizeof(ft_fence_cases[0]);
    for (i = 0; i < *n; i++) {
        const struct ft_fence_case *c = &ft_fence_cases[i];

        for (j = 0; j < 3; j++) {
            snprintf(paths[j], sizeof(paths[j]), "%s/selftest-f%zu.log", ft_dir, j);
            if (ft_write_file(paths[j], c->logs[j] != NULL ? c->logs[j] : "") != 0) {
                fprintf(stderr, "faults: self-test: cannot write %s\n", paths[j]);
                return *n;
            }
            logs[j].path = paths[j];
            logs[j].killed_us = 0;
        }
        counter.value = c->counter_w;
        memset(&in, 0, sizeof(in));
        in.logs = logs;
        in.nlogs = 3;
        in.counters = &counter;
        in.ncounters = 1;
        ok = checker_run(&in, NULL, &res) == 0 && res.fenced == c->fenced;
        for (k = 0; k < CHECKER_KINDS; k++) {
            ok = ok && ((c->expect & FT_BIT(k)) ? res.counts[k] > 0 : res.counts[k] == 0);
        }
        if (!ok) {
            fprintf(stderr, "faults: self-test: the checker misjudged %s (expected %zu fenced "
                    "overlaps); it found %zu and:\n", c->what, c->fenced, res.fenced);
            checker_run(&in, stderr, &res);
            bad++;
        }
    }
    return bad;
}

/*
 * Synthetic cases for leases and BREAKs: up to three client logs on the
 * exclusive name "w" (or the counted "s"), an operator's log, the final
 * counter of "w", whether the run is strict, the kinds the checker must
 * find (bits) and the number of broken overlaps it must count.
 */
struct ft_break_case {
    const char *what;               /* for the failure message */
    const char *logs[3];            /* client logs (NULL: empty) */
    const char *oplog;              /* the operator's log (NULL: empty) */
    long long   counter_w;          /* final counter of "w" */
    bool        strict;             /* checker_input.strict */
    unsigned    expect;             /* kinds that must be found */
    size_t      broken;             /* broken overlaps that must be counted */
};

#define FT_W_L(t, f, d) "BEGIN " #t " name=w fence=" #f " validity=2900 kind=exclusive " \
                        "mode=lease token=00 deadline_us=" #d "\n"
#define FT_W_A(t, f, a) "BEGIN " #t " name=w fence=" #f " validity=2900 acquire_us=" #a \
                        " kind=exclusive\n"
#define FT_BRK(s, o, f) "START 1 pid=9 names=w,s\nBREAK " #s " name=w port=1\n" \
                        "BROKEN " #o " name=w holders=1 fence=" #f " sent_us=" #s " port=1\n"
#define FT_LOST(t, f)   "PUSH " #t " ! LOST w reason=broken\n" \
                        "ABORT " #t " fence=" #f " why=lost reason=broken\n"

static const struct ft_break_case ft_break_cases[] = {
    { "a lease section ends at its UNLOCK's send: a grant read before its answer is fine",
      { FT_START FT_W_L(1000, 1, 3900) "WRITE 1400 fence=1 value=1\n"
                 "END 1500 fence=1 read=0 wrote=1 prev_fence=0\n"
                 "RELEASE 1800 fence=1 sent_us=1600 answer=OK port=1\n",
        FT_START FT_W_X(1700, 2) "END 2000 fence=2 read=1 wrote=2 prev_fence=1\n", NULL },
      NULL, 2, true, 0, 0 },
    { "a grant read before a lease's UNLOCK was sent",
      { FT_START FT_W_L(1000, 1, 3900) "WRITE 1400 fence=1 value=1\n"
                 "END 1500 fence=1 read=0 wrote=1 prev_fence=0\n"
                 "RELEASE 1800 fence=1 sent_us=1600 answer=OK port=1\n",
        FT_START FT_W_X(1550, 2) "END 2000 fence=2 read=1 wrote=2 prev_fence=1\n", NULL },
      NULL, 2, true, FT_BIT(CHECKER_OVERLAP), 0 },
    { "a lease kept past its deadline counts until the deadline",
      { FT_START FT_W_L(1000, 1, 1200) "WRITE 1100 fence=1 value=1\n"
                 "END 1150 fence=1 read=0 wrote=1 prev_fence=0\n"
                 "RELEASE 1800 fence=1 sent_us=1600 answer=NOTHELD port=1\n",
        FT_START FT_W_X(1300, 2) "END 2000 fence=2 read=1 wrote=2 prev_fence=1\n", NULL },
      NULL, 2, true, 0, 0 },
    { "in a strict run a refused write excuses no overlap",
      { FT_START FT_W_X(1000, 1) "WRITE 1900 fence=1 value=1\n"
                 "REJECT 2000 fence=1 prev_fence=2\n",
        FT_START FT_W_X(1500, 2) "END 1700 fence=2 read=0 wrote=1 prev_fence=0\n", NULL },
      NULL, 1, true, FT_BIT(CHECKER_OVERLAP), 0 },
    { "a holder a BREAK ended, and one granted after the BREAK was sent",
      { FT_START FT_W_X(1000, 3) FT_LOST(2060, 3),
        FT_START FT_W_A(2040, 6, 500) "END 2500 fence=6 read=0 wrote=1 prev_fence=0\n", NULL },
      FT_BRK(2000, 2100, 5), 1, true, 0, 1 },
    { "a reader granted after a BREAK was sent sees the broken writer's late write",
      { FT_START FT_W_L(1000, 3, 3900) "WRITE 2050 fence=3 value=1\n"
                 "END 2060 fence=3 read=0 wrote=1 prev_fence=0\n"
                 "RELEASE 2080 fence=3 sent_us=2070 answer=NOTHELD port=1\n",
        FT_START FT_W_S(2040, 6) "END 2500 fence=6 read=0 reread=1\n", NULL },
      FT_BRK(2000, 2100, 5), 1, true, 0, 1 },
    { "a holder granted before the BREAK was sent, inside the broken one's section",
      { FT_START FT_W_X(1000, 3) FT_LOST(2060, 3),
        FT_START FT_W_A(1900, 6, 500) "END 2500 fence=6 read=0 wrote=1 prev_fence=0\n", NULL },
      FT_BRK(2000, 2100, 5), 1, true, FT_BIT(CHECKER_OVERLAP), 0 },
    { "a grant whose first LOCK came after a BREAK's OK, with a fence not above its F",
      { FT_START FT_W_X(1000, 3) FT_LOST(2060, 3),
        FT_START FT_W_A(3000, 5, 100) "END 3500 fence=5 read=0 wrote=1 prev_fence=0\n", NULL },
      FT_BRK(2000, 2100, 5), 1, true, FT_BIT(CHECKER_BREAK_AFTER), 0 },
    { "a holder the BREAK ended whose fence is not below its F",
      { FT_START FT_W_X(1000, 5) FT_LOST(2060, 5), NULL, NULL },
      FT_BRK(2000, 2100, 5), 0, true, FT_BIT(CHECKER_BREAK_BROKEN), 0 },
    { "LOST reason=broken with no BREAK sent before it",
      { FT_START FT_W_X(1000, 3) FT_LOST(1500, 3), NULL, NULL },
      FT_BRK(2000, 2100, 5), 0, true, FT_BIT(CHECKER_BREAK_BROKEN), 0 },
    { "a permit's holder a BREAK ended, the permit granted again inside its section",
      { FT_START FT_S(1000, 0, 3) "PUSH 2050 ! LOST s reason=broken\n"
                 "ABORT 2060 fence=3 why=lost reason=broken\n",
        FT_START FT_S(2040, 0, 4) "END 2500 fence=4 read=0 wrote=1 prev_fence=0\n", NULL },
      "START 1 pid=9 names=s\nBREAK 2000 name=s port=1\n"
      "BROKEN 2100 name=s holders=1 fence=2 sent_us=2000 port=1\n", 0, true, 0, 1 },
};

/* The lease and BREAK cases (ft_break_cases): how many were misjudged; *n: how many ran. */
static size_t
ft_self_test_timing(size_t *n)
{
    char paths[3][PATH_MAX + 16], oppath[PATH_MAX + 16];
    const char *oplogs[1] = { oppath };
    struct checker_log logs[3];
    struct checker_counter counter = { "w", 0, false, 0 };
    struct checker_input in;
    struct checker_result res;
    size_t i, j, k, bad = 0;
    bool ok;

    *n = sizeof(ft_break_cases) / sizeof(ft_break_cases[0]);
    snprintf(oppath, sizeof(oppath), "%s/selftest-op.log", ft_dir);
    for (i = 0; i < *n; i++) {
        const struct ft_break_case *c = &ft_break_cases[i];

        for (j = 0; j < 3; j++) {
            snprintf(paths[j], sizeof(paths[j]), "%s/selftest-t%zu.log", ft_dir, j);
            if (ft_write_file(paths[j], c->logs[j] != NULL ? c->logs[j] : "") != 0) {
                fprintf(stderr, "faults: self-test: cannot write %s\n", paths[j]);
                return *n;
            }
            logs[j].path = paths[j];
            logs[j].killed_us = 0;
        }
        if (ft_write_file(oppath, c->oplog != NULL ? c->oplog : "") != 0) {
            fprintf(stderr, "faults: self-test: cannot write %s\n", oppath);
            return *n;
        }
        counter.value = c->counter_w;
        memset(&in, 0, sizeof(in));
        in.logs = logs;
        in.nlogs = 3;
        in.counters = &counter;
        in.ncounters = 1;
        in.break_logs = oplogs;
        in.nbreak_logs = 1;
        in.strict = c->strict;
        ok = checker_run(&in, NULL, &res) == 0 && res.broken == c->broken;
        for (k = 0; k < CHECKER_KINDS; k++) {
            ok = ok && ((c->expect & FT_BIT(k)) ? res.counts[k] > 0 : res.counts[k] == 0);
        }
        if (!ok) {
            fprintf(stderr, "faults: self-test: the checker misjudged %s (expected %zu broken "
                    "overlaps, found %zu); it found:\n", c->what, c->broken, res.broken);
            checker_run(&in, stderr, &res);
            bad++;
        }
    }
    return bad;
}

/*
 * A synthetic case of the liveness property: up to four client logs
 * (and their kills), the bound, one fault window and the end of the
 * judged time (0: none), whether a liveness finding must be reported,
 * the other kinds it must find, and the longest judged gap the checker
 * must measure (-1: none, -2: not checked).
 */
struct ft_live_case {
    const char *what;               /* for the failure message */
    const char *logs[4];            /* client logs (NULL: empty) */
    int64_t     kill[4];            /* their kills, 0: none */
    struct checker_window skip;     /* a fault window ({0, 0}: none) */
    int64_t     until_us;           /* checker_input.live_until_us */
    bool        finding;            /* a liveness finding is expected */
    unsigned    also;               /* other kinds that must be found (bits) */
    int64_t     gap_us;             /* the longest judged gap, -2: not checked */
};

#define FT_LIVE_BOUND   500     /* the self-test's bound, us */
#define FT_WT(t)        "WAIT " #t " name=w wait=10000 port=1\n"
#define FT_WS(t)        "WAIT " #t " name=s wait=10000 port=1\n"
#define FT_UN(t)        "UNLOCK " #t " OK w holds=0\n"
#define FT_US(t)        "UNLOCK " #t " OK s holds=0\n"
#define FT_XEND(t, f)   "END " #t " fence=" #f " read=0 wrote=1 prev_fence=0\n"
#define FT_HOLD(b, e, u, f) FT_START FT_W_X(b, f) FT_XEND(e, f) FT_UN(u)
#define FT_SP(b, e, u, p, f) FT_START FT_S(b, p, f) FT_XEND(e, f) FT_US(u)

static const struct ft_live_case ft_live_cases[] = {
    { "a waiter granted 100 us after the release",
      { FT_HOLD(1000, 1100, 1200, 1), FT_START FT_WT(1050) FT_W_X(1300, 2) FT_XEND(1400, 2)
        FT_UN(1500), NULL, NULL }, { 0 }, { 0, 0 }, 0, false, 0, 100 },
    { "a waiter granted 800 us after the release",
      { FT_HOLD(1000, 1100, 1200, 1), FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2)
        FT_UN(2200), NULL, NULL }, { 0 }, { 0, 0 }, 0, true, 0, 800 },
    { "the same gap, most of it in a fault window",
      { FT_HOLD(1000, 1100, 1200, 1), FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2)
        FT_UN(2200), NULL, NULL }, { 0 }, { 1100, 1900 }, 0, false, 0, 100 },
    { "the same gap, after the end of the judged time",
      { FT_HOLD(1000, 1100, 1200, 1), FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2)
        FT_UN(2200), NULL, NULL }, { 0 }, { 0, 0 }, 1300, false, 0, 100 },
    { "an UNLOCK not answered OK: the keys may live a ttl more",
      { FT_START FT_W_X(1000, 1) FT_XEND(1100, 1) "UNLOCK 1200 NOTHELD w\n",
        FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2) FT_UN(2200), NULL, NULL },
      { 0 }, { 0, 0 }, 0, false, 0, -1 },
    { "a waiter whose wait= ran out, and a later wait granted at once",
      { FT_HOLD(1000, 1100, 1200, 1), FT_START FT_WT(1050) "TIMEOUT 1300\n" FT_WT(2500)
        FT_W_X(2600, 2) FT_XEND(2700, 2) FT_UN(2800), NULL, NULL },
      { 0 }, { 0, 0 }, 0, false, 0, 100 },
    { "a client that polls (wait=0) waits for nothing",
      { FT_HOLD(1000, 1100, 1200, 1), FT_START FT_W_X(5000, 2) FT_XEND(5100, 2) FT_UN(5200),
        NULL, NULL }, { 0 }, { 0, 0 }, 0, false, 0, -1 },
    { "a holder killed inside its section keeps the name a ttl more",
      { FT_START FT_W_X(1000, 1), FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2)
        FT_UN(2200), NULL, NULL }, { 1100, 0, 0, 0 }, { 0, 0 }, 0, false, 0, -1 },
    { "a holder a BREAK ended frees the name at its ABORT",
      { FT_START FT_W_X(1000, 1) "PUSH 1150 ! LOST w reason=broken\n"
        "ABORT 1200 fence=1 why=lost reason=broken\n",
        FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2) FT_UN(2200), NULL, NULL },
      { 0 }, { 0, 0 }, 0, true, FT_BIT(CHECKER_BREAK_BROKEN), 800 },
    { "a lease released OK frees the name at the answer",
      { FT_START FT_W_L(1000, 1, 3900) FT_XEND(1100, 1)
        "RELEASE 1200 fence=1 sent_us=1150 answer=OK port=1\n",
        FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2) FT_UN(2200), NULL, NULL },
      { 0 }, { 0, 0 }, 0, true, 0, 800 },
    { "a lease whose UNLOCK answered NOTHELD keeps the name until its keys expire",
      { FT_START FT_W_L(1000, 1, 3900) FT_XEND(1100, 1)
        "RELEASE 1200 fence=1 sent_us=1150 answer=NOTHELD port=1\n",
        FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2) FT_UN(2200), NULL, NULL },
      { 0 }, { 0, 0 }, 0, false, 0, -1 },
    { "a counted name with a permit free while a client waits",
      { FT_SP(1000, 1100, 1200, 0, 1), FT_SP(900, 8000, 8100, 1, 1),
        FT_SP(950, 8000, 8100, 2, 1),
        FT_START FT_WS(1050) FT_S(2000, 0, 2) FT_XEND(2100, 2) FT_US(2200) },
      { 0 }, { 0, 0 }, 0, true, 0, 800 },
    { "a counted name with every permit held while a client waits",
      { FT_SP(1000, 1100, 2000, 0, 1), FT_SP(900, 8000, 8100, 1, 1),
        FT_SP(950, 8000, 8100, 2, 1),
        FT_START FT_WS(1050) FT_S(2000, 0, 2) FT_XEND(2100, 2) FT_US(2200) },
      { 0 }, { 0, 0 }, 0, false, 0, -1 },
};

/* The liveness cases (ft_live_cases): how many were misjudged; *n: how many ran. */
static size_t
ft_self_test_live(size_t *n)
{
    char paths[4][PATH_MAX + 16];
    struct checker_log logs[4];
    struct checker_input in;
    struct checker_result res;
    size_t i, j, k, bad = 0;
    bool ok;

    *n = sizeof(ft_live_cases) / sizeof(ft_live_cases[0]);
    for (i = 0; i < *n; i++) {
        const struct ft_live_case *c = &ft_live_cases[i];

        for (j = 0; j < 4; j++) {
            snprintf(paths[j], sizeof(paths[j]), "%s/selftest-l%zu.log", ft_dir, j);
            if (ft_write_file(paths[j], c->logs[j] != NULL ? c->logs[j] : "") != 0) {
                fprintf(stderr, "faults: self-test: cannot write %s\n", paths[j]);
                return *n;
            }
            logs[j].path = paths[j];
            logs[j].killed_us = c->kill[j];
        }
        memset(&in, 0, sizeof(in));
        in.logs = logs;
        in.nlogs = 4;
        in.live_bound_us = FT_LIVE_BOUND;
        in.live_skip = &c->skip;
        in.nlive_skip = c->skip.to_us > 0 ? 1 : 0;
        in.live_until_us = c->until_us;
        ok = checker_run(&in, NULL, &res) == 0
             && (c->gap_us == -2 || res.max_gap_us == c->gap_us);
        for (k = 0; k < CHECKER_KINDS; k++) {
            ok = ok && ((k == CHECKER_LIVENESS && c->finding) || (c->also & FT_BIT(k))
                        ? res.counts[k] > 0 : res.counts[k] == 0);
        }
        if (!ok) {
            fprintf(stderr, "faults: self-test: the checker misjudged %s (expected %s, a "
                    "longest gap of %lld us; measured %lld us); it found:\n", c->what,
                    c->finding ? "a liveness finding" : "nothing", (long long)c->gap_us,
                    (long long)res.max_gap_us);
            checker_run(&in, stderr, &res);
            bad++;
        }
    }
    return bad;
}

/* Run the checker on every case; 0 when it finds exactly what it should. */
static int
ft_self_test(void)
{
    const char *const names[] = { "x" };
    char pa[PATH_MAX + 16], pb[PATH_MAX + 16];
    struct checker_log logs[2];
    struct checker_counter counter = { "x", 0, false, 0 };
    struct checker_input in;
    struct checker_result res;
    size_t i, k, f, t, l, bad = 0;
    bool ok;

    snprintf(pa, sizeof(pa), "%s/selftest-a.log", ft_dir);
    snprintf(pb, sizeof(pb), "%s/selftest-b.log", ft_dir);
    for (i = 0; i < sizeof(ft_cases) / sizeof(ft_cases[0]); i++) {
        const struct ft_case *c = &ft_cases[i];

        if (ft_write_file(pa, c->log_a) != 0 || ft_write_file(pb, c->log_b) != 0) {
            fprintf(stderr, "faults: self-test: cannot write %s\n", pa);
            return -1;
        }
        logs[0].path = pa;
        logs[0].killed_us = c->kill_a;
        logs[1].path = pb;
        logs[1].killed_us = 0;
        counter.value = c->counter;
        memset(&in, 0, sizeof(in));
        in.logs = logs;
        in.nlogs = 2;
        in.counters = &counter;
        in.ncounters = 1;
        in.recovery_names = names;
        in.nrecovery = 1;
        in.heal_us = c->heal_us;
        in.recovery_bound_us = c->bound_us;
        ok = checker_run(&in, NULL, &res) == 0;
        for (k = 0; k < CHECKER_KINDS; k++) {
            ok = ok && (k == c->kind ? res.counts[k] > 0 : res.counts[k] == 0);
        }
        if (!ok) {
            fprintf(stderr, "faults: self-test: the checker misjudged %s (expected %s); "
                    "it found:\n", c->what,
                    c->kind == CHECKER_KINDS ? "nothing" : checker_kind_name(c->kind));
            checker_run(&in, stderr, &res);
            bad++;
        }
    }
    bad += ft_self_test_kinds(&k);
    bad += ft_self_test_fences(&f);
    bad += ft_self_test_timing(&t);
    bad += ft_self_test_live(&l);
    printf("checker self-test: %zu synthetic histories, %zu misjudged\n", i + k + f + t + l,
           bad);
    return bad == 0 ? 0 : -1;
}

/* ---- main ---- */

static bool ft_selected(const struct ft_scenario *sc);

/*
 * When a selected scenario needs namespaces: try to make them
 * (netns_init); when that fails, the network scenarios are skipped, and
 * the line after the table says what is missing (ft_net_why).
 */
static void
ft_net_init(void)
{
    char log[PATH_MAX];
    size_t i;

    for (i = 0; i < FT_NSCENARIOS; i++) {
        if (ft_scenarios[i].net && ft_selected(&ft_scenarios[i])) {
            break;
        }
    }
    if (i == FT_NSCENARIOS) {
        return;
    }
    snprintf(log, sizeof(log), "%s/netns.log", ft_dir);
    netns_init(log, ft_net_why, sizeof(ft_net_why));
}

/* True when FAULTS_ONLY is unset or names sc. */
static bool
ft_selected(const struct ft_scenario *sc)
{
    const char *only = getenv("FAULTS_ONLY"), *p;
    size_t len = strlen(sc->name);

    if (only == NULL || only[0] == '\0') {
        return true;
    }
    for (p = only; p != NULL; p = strchr(p, ',')) {
        if (*p == ',') {
            p++;
        }
        if (strncmp(p, sc->name, len) == 0 && (p[len] == ',' || p[len] == '\0')) {
            return true;
        }
    }
    return false;
}

static void
ft_print_table(const struct ft_run *runs, const bool *ran, double total)
{
    int width = 28;
    size_t i;

    /* The first column as wide as the longest name that ran. */
    for (i = 0; i < FT_NSCENARIOS; i++) {
        if (ran[i] && (int)strlen(runs[i].sc->name) > width) {
            width = (int)strlen(runs[i].sc->name);
        }
    }
    printf("\n== summary: %s, %.0f s in all\n",
           "make faults", total);
    printf("%-*s %8s %9s %10s %13s %11s %11s  %-15s %s\n", width, "scenario", "sections",
           "completed", "violations", "max acquire", "max gap", "recovery", "expected",
           "result");
    for (i = 0; i < FT_NSCENARIOS; i++) {
        const struct ft_run *r = &runs[i];

        if (!ran[i]) {
            continue;
        }
        printf("%-*s %8zu %9zu %10zu %10.0f ms %8.0f ms %8.0f ms  %-15s %s\n", width,
               r->sc->name, r->res.sections, r->res.wrote + r->res.read, r->res.violations,
               (double)r->res.max_acquire_us / 1e3, (double)r->res.max_gap_us / 1e3,
               (double)r->res.recovery_us / 1e3,
               !r->sc->negative ? "no violation"
               : r->sc->skip_announce ? "gap found" : "overlaps found",
               r->passed ? "PASS" : "FAIL");
    }
    printf("\nsections: grants (BEGIN); completed: sections that ended well (END: wrote the\n"
           "counter, or a shared holder read it twice).\n"
           "violations: all kinds together (overlap, over-limit, fence, stale-write,\n"
           "lost-update, dirty-read, break-after, break-broken, validity, liveness,\n"
           "recovery, never-full, open, log, external);\n"
           "expected: what the scenario must show.\n"
           "max acquire: longest time from a section's first LOCK to its OK (retries included).\n"
           "max gap: longest time a name was free while a client waited for it, outside the\n"
           "fault windows (liveness: judged against %d ms; -1: no client waited).\n"
           "recovery: slowest first grant of a name after the last fault healed.\n",
           FT_LIVE_BOUND_MS);
    for (i = 0; i < FT_NSCENARIOS; i++) {
        if (ran[i] && runs[i].notes[0] != '\0') {
            printf("note, %s: %s\n", runs[i].sc->name, runs[i].notes);
        }
    }
    /* One line per failed scenario, which make check-faults lists at its end (tests/step.sh). */
    for (i = 0; i < FT_NSCENARIOS; i++) {
        const struct ft_run *r = &runs[i];

        if (ran[i] && !r->passed) {
            printf("failed: %s: %s, %zu violations (expected: %s)\n", r->sc->name,
                   r->setup_failed ? "its set-up failed" : "judged", r->res.violations,
                   !r->sc->negative ? "no violation"
                   : r->sc->skip_announce ? "gap found" : "overlaps found");
        }
    }
}

/* ---- one process per run, the soak ---- */

/* One scenario's runs in a soak (make soak). */
struct ft_soak {
    size_t  runs;                   /* runs finished */
    size_t  passed;                 /* of them, the ones that met the expectation */
    size_t  sections;               /* sections of all of them */
    size_t  violations;             /* violations of all of them */
    int64_t worst_acquire_us;       /* the longest max acquire, -1 before a run */
    int64_t worst_gap_us;           /* the longest max gap (liveness), -1 before a run */
    int64_t worst_recovery_us;      /* the slowest recovery, -1 before a run */
};

#define FT_SOAK_FAILS_MAX   16      /* failed runs listed after the soak's table */

/* A failed run of a soak, listed after the table. */
struct ft_soak_fail {
    size_t   scenario;              /* index in ft_scenarios */
    unsigned round;                 /* its round */
    char     notes[320];            /* the start of its notes */
};

static volatile sig_atomic_t ft_interrupted;    /* SIGINT or SIGTERM arrived */
static struct ft_run ft_child_run;  /* a run as its child process reported it */

static void
ft_interrupt_cb(int sig)
{
    (void)sig;
    ft_interrupted = 1;
}

/*
 * Run sc in a child process of its own, which sends its struct ft_run
 * back through a pipe: an interrupt then ends the run at once, since
 * every process the run started (masters, daemons, clients) dies with
 * the child (PR_SET_PDEATHSIG), and the child dies with this process.
 * SIGINT and SIGTERM are blocked here except while waiting (orig is the
 * mask to wait with).  Returns 0 with *r filled (a child that ended
 * without reporting gives a failed run), or -1 when interrupted.
 */
static int
ft_run_forked(const struct ft_scenario *sc, struct ft_run *r, const sigset_t *orig)
{
    struct pollfd pfd;
    size_t got = 0;
    ssize_t n;
    pid_t pid, parent = getpid();
    int fds[2], status = 0;

    memset(r, 0, sizeof(*r));
    r->sc = sc;
    if (pipe2(fds, O_CLOEXEC) != 0) {
        ft_note(r, "pipe: %s", strerror(errno));
        return 0;
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        ft_note(r, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return 0;
    }
    if (pid == 0) {
        /* The child: dies with this process; Ctrl-C ends it as it is. */
        h_child_setup(parent);
        signal(SIGPIPE, SIG_IGN);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        /* Its network namespaces carry its pid, and go with its signals. */
        netns_adopt();
        close(fds[0]);
        ft_run_scenario(sc, r);
        fflush(stdout);
        for (got = 0; got < sizeof(*r); got += (size_t)n) {
            n = write(fds[1], (const char *)r + got, sizeof(*r) - got);
            if (n <= 0) {
                _exit(1);
            }
        }
        _exit(0);
    }
    close(fds[1]);
    pfd.fd = fds[0];
    pfd.events = POLLIN;
    while (got < sizeof(ft_child_run) && !ft_interrupted) {
        if (ppoll(&pfd, 1, NULL, orig) < 0) {
            continue;
        }
        n = read(fds[0], (char *)&ft_child_run + got, sizeof(ft_child_run) - got);
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    if (ft_interrupted) {
        kill(pid, SIGKILL);
    }
    close(fds[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        continue;
    }
    if (sc->net) {
        /* A child killed in the middle left its namespaces behind. */
        netns_sweep();
    }
    if (ft_interrupted) {
        return -1;
    }
    if (got == sizeof(ft_child_run)) {
        memcpy(r, &ft_child_run, sizeof(*r));
        return 0;
    }
    r->setup_failed = true;
    ft_note(r, "its process ended with status %d before it reported", h_decode_status(status));
    printf("    => FAIL: the scenario's process ended with status %d before it reported\n",
           h_decode_status(status));
    return 0;
}

/* Add a finished run to its scenario's totals. */
static void
ft_soak_add(struct ft_soak *a, const struct ft_run *r)
{
    if (a->runs == 0) {
        a->worst_acquire_us = -1;
        a->worst_gap_us = -1;
        a->worst_recovery_us = -1;
    }
    a->runs++;
    a->passed += r->passed;
    a->sections += r->res.sections;
    a->violations += r->res.violations;
    if (r->res.max_acquire_us > a->worst_acquire_us) {
        a->worst_acquire_us = r->res.max_acquire_us;
    }
    if (r->res.max_gap_us > a->worst_gap_us) {
        a->worst_gap_us = r->res.max_gap_us;
    }
    if (r->res.recovery_us > a->worst_recovery_us) {
        a->worst_recovery_us = r->res.recovery_us;
    }
}

static void
ft_print_soak(const struct ft_soak *agg, const struct ft_soak_fail *fails, size_t nfails,
              size_t failed, unsigned rounds, double total)
{
    char result[64];
    size_t i;

    printf("\n== summary: make soak, %u round%s, %.0f s in all\n", rounds,
           rounds == 1 ? "" : "s", total);
    printf("%-30s %5s %9s %10s %13s %11s %14s  %-15s %s\n", "scenario", "runs", "sections",
           "violations", "worst acquire", "worst gap", "worst recovery", "expected", "result");
    for (i = 0; i < FT_NSCENARIOS; i++) {
        const struct ft_soak *a = &agg[i];

        if (a->runs == 0) {
            continue;
        }
        if (a->passed == a->runs) {
            snprintf(result, sizeof(result), "PASS");
        } else {
            snprintf(result, sizeof(result), "FAIL (%zu of %zu)", a->runs - a->passed,
                     a->runs);
        }
        printf("%-30s %5zu %9zu %10zu %10.0f ms %8.0f ms %11.0f ms  %-15s %s\n",
               ft_scenarios[i].name, a->runs, a->sections, a->violations,
               (double)a->worst_acquire_us / 1e3, (double)a->worst_gap_us / 1e3,
               (double)a->worst_recovery_us / 1e3,
               !ft_scenarios[i].negative ? "no violation"
               : ft_scenarios[i].skip_announce ? "gap found" : "overlaps found", result);
    }
    printf("\nruns: runs finished; sections and violations: summed over them (a negative\n"
           "control's are the ones it must show); worst acquire, worst gap and worst\n"
           "recovery: the largest max acquire, max gap (liveness) and recovery of any run;\n"
           "result: PASS when every run met the expectation.\n");
    for (i = 0; i < nfails; i++) {
        printf("failed: %s, round %u: %s\n", ft_scenarios[fails[i].scenario].name,
               fails[i].round, fails[i].notes);
    }
    if (failed > nfails) {
        printf("failed: %zu more runs\n", failed - nfails);
    }
}

/* FAULTS_SOAK_MINUTES: 0 when unset (one pass), -1 when not a positive number. */
static double
ft_soak_minutes(void)
{
    const char *v = getenv("FAULTS_SOAK_MINUTES");
    char *end;
    double m;

    if (v == NULL || v[0] == '\0') {
        return 0;
    }
    errno = 0;
    m = strtod(v, &end);
    return errno != 0 || end == v || *end != '\0' || !(m > 0) ? -1 : m;
}

int
main(int argc, char **argv)
{
    static struct ft_run runs[FT_NSCENARIOS];
    static struct ft_soak agg[FT_NSCENARIOS];
    static struct ft_soak_fail fails[FT_SOAK_FAILS_MAX];
    bool ran[FT_NSCENARIOS] = { false };
    int64_t start = ft_now_us(), end_us = 0;
    const char *keep = getenv("FAULTS_KEEP"), *level = getenv("FAULTS_LOG_LEVEL");
    char tmpdir[sizeof(ft_dir) - 32];
    struct sigaction sa;
    sigset_t block, orig;
    bool all_ok = true, any = false, stop = false;
    double minutes = ft_soak_minutes();
    size_t i, nfails = 0, failed = 0, skipped = 0;
    unsigned rounds = 0;
    int rc;

    (void)argv;
    if (argc != 1 || minutes < 0) {
        fprintf(stderr, "usage: check_faults (environment: FAULTS_ONLY, FAULTS_KEEP, "
                "FAULTS_LOG_LEVEL, FAULTS_SOAK_MINUTES, REDLOCKD_BIN, RMW_CLIENT_BIN, "
                "DELAY_PROXY_BIN, BREAK_CLIENT_BIN, REDLOCKD_SKIP_ANNOUNCE_BIN, "
                "REDLOCKD_PREV_BIN, REDLOCKD_PREV_CONTROL_BIN)\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    ft_keep = keep != NULL && keep[0] != '\0' && strcmp(keep, "0") != 0;
    ft_log_level = level != NULL && level[0] != '\0' ? level : "info";
    signal(SIGPIPE, SIG_IGN);
    /* Ctrl-C: the run in progress is ended, the table shows the finished ones. */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = ft_interrupt_cb;
    sigemptyset(&sa.sa_mask);
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &orig);
    ft_client_bin = getenv("RMW_CLIENT_BIN");
    if (ft_client_bin == NULL || ft_client_bin[0] == '\0') {
        ft_client_bin = "./build/rmw-client";
    }
    ft_proxy_bin = getenv("DELAY_PROXY_BIN");
    if (ft_proxy_bin == NULL || ft_proxy_bin[0] == '\0') {
        ft_proxy_bin = "./build/delay-proxy";
    }
    ft_skip_bin = getenv("REDLOCKD_SKIP_ANNOUNCE_BIN");
    if (ft_skip_bin != NULL && ft_skip_bin[0] == '\0') {
        ft_skip_bin = NULL;
    }
    /* A copy: the upgrade schedules set REDLOCKD_BIN for each daemon they start. */
    if (getenv("REDLOCKD_BIN") != NULL && getenv("REDLOCKD_BIN")[0] != '\0') {
        ft_new_bin = strdup(getenv("REDLOCKD_BIN"));
    }
    ft_prev_bin = getenv("REDLOCKD_PREV_BIN");
    if (ft_prev_bin != NULL && ft_prev_bin[0] == '\0') {
        ft_prev_bin = NULL;
    }
    ft_control_bin = getenv("REDLOCKD_PREV_CONTROL_BIN");
    if (ft_control_bin != NULL && ft_control_bin[0] == '\0') {
        ft_control_bin = NULL;
    }
    ft_break_bin = getenv("BREAK_CLIENT_BIN");
    if (ft_break_bin == NULL || ft_break_bin[0] == '\0') {
        ft_break_bin = "./build/break-client";
    }
    snprintf(tmpdir, sizeof(tmpdir), "%s",
             getenv("TMPDIR") != NULL && getenv("TMPDIR")[0] == '/' ? getenv("TMPDIR") : "");
    snprintf(ft_dir, sizeof(ft_dir), "%s/redlockd-faults.XXXXXX",
             tmpdir[0] != '\0' ? tmpdir : "/tmp");
    if (mkdtemp(ft_dir) == NULL) {
        fprintf(stderr, "faults: mkdtemp %s: %s\n", ft_dir, strerror(errno));
        return 1;
    }
    if (ft_self_test() != 0) {
        fprintf(stderr, "faults: the checker is broken; no scenario was run (files in %s)\n",
                ft_dir);
        return 1;
    }
    /* The harness's directories go under ft_dir: one tree to keep or remove, even after
       an interrupt. */
    setenv("TMPDIR", ft_dir, 1);
    rc = h_suite_init();
    if (tmpdir[0] != '\0') {
        setenv("TMPDIR", tmpdir, 1);
    } else {
        unsetenv("TMPDIR");
    }
    if (rc != 0 || ft_counter_start() != 0) {
        ft_counter_stop();
        return 1;
    }
    ft_net_init();
    /* After netns_init, whose handlers are for the processes that make topologies
       (each run's own, netns_adopt): here, Ctrl-C only ends the run in progress. */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (minutes > 0) {
        end_us = start + (int64_t)(minutes * 60e6);
        ft_round = 1;
        printf("soak: every scenario again and again for %.1f minutes\n", minutes);
    }
    while (!stop) {
        if (ft_round > 0) {
            /* A new round only while time is left. */
            if (ft_interrupted || ft_now_us() >= end_us) {
                break;
            }
            rounds++;
            printf("\n==== soak round %u, %.0f s left\n", ft_round,
                   (double)(end_us - ft_now_us()) / 1e6);
        }
        for (i = 0; i < FT_NSCENARIOS && !stop; i++) {
            if (!ft_selected(&ft_scenarios[i])) {
                continue;
            }
            if (ft_scenarios[i].net && ft_net_why[0] != '\0') {
                skipped += ft_round <= 1;
                continue;
            }
            /* A round is finished even when the time is up, so that every
               scenario runs as often as the others. */
            stop = ft_interrupted;
            if (stop || ft_run_forked(&ft_scenarios[i], &runs[i], &orig) != 0) {
                stop = true;
                continue;
            }
            ran[i] = true;
            any = true;
            all_ok = all_ok && runs[i].passed;
            ft_soak_add(&agg[i], &runs[i]);
            if (!runs[i].passed && failed++ < FT_SOAK_FAILS_MAX) {
                fails[nfails].scenario = i;
                fails[nfails].round = ft_round;
                snprintf(fails[nfails++].notes, sizeof(fails[0].notes), "logs in %s; %s",
                         runs[i].dir, runs[i].notes);
            }
            if (ft_round > 0 && runs[i].notes[0] != '\0') {
                printf("    notes: %s\n", runs[i].notes);
            }
            if (runs[i].passed && ft_round > 0 && !ft_keep) {
                /* A soak writes much: a passed run's logs go at once. */
                h_remove_tree(runs[i].dir);
            }
        }
        if (ft_round == 0 || ft_interrupted || !any) {
            break;
        }
        ft_round++;
    }
    ft_counter_stop();
    if (ft_interrupted) {
        printf("\nfaults: interrupted; the run in progress was abandoned\n");
    } else {
        /* After an interrupt the killed run's directory would be shown as failed. */
        h_suite_cleanup();
    }
    if (ft_round > 0) {
        ft_print_soak(agg, fails, nfails, failed, rounds, (double)(ft_now_us() - start) / 1e6);
    } else {
        ft_print_table(runs, ran, (double)(ft_now_us() - start) / 1e6);
    }
    if (skipped > 0) {
        printf("faults: %zu network scenarios skipped: %s\n", skipped, ft_net_why);
    }
    if (!any && skipped == 0 && !ft_interrupted) {
        fprintf(stderr, "faults: FAULTS_ONLY selects no scenario\n");
        all_ok = false;
    }
    if (all_ok && !ft_keep) {
        h_remove_tree(ft_dir);
    } else {
        printf("client logs, events and daemon logs of failed runs: %s\n", ft_dir);
    }
    if (ft_interrupted) {
        printf("faults: INTERRUPTED\n");
        return 130;
    }
    printf("%s\n", all_ok ? "faults: every scenario met its expectation"
                          : "faults: FAILED");
    return all_ok ? 0 : 1;
}
