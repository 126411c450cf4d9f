/*
 * faults.h: what the files of the fault-injection suite share (make
 * faults; tests/faults/README.md; check_faults.c says what a run is).
 * check_faults.c holds main(), the table of scenarios and the soak;
 * run.c one scenario run; procs.c the processes of a run; the schedules
 * are in sched_*.c by family (masters, clients and daemons, clocks,
 * network, a paused daemon, timing, liveness and upgrade); self_test.c
 * the checker's self-test.  Names start with ft_ (FT_ for constants).
 */
#ifndef REDLOCKD_TESTS_FAULTS_FAULTS_H
#define REDLOCKD_TESTS_FAULTS_FAULTS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "tests/faults/checker.h"
#include "tests/faults/netns.h"
#include "tests/harness.h"

#define FT_MASTERS          5       /* masters per scenario */
#define FT_DAEMONS          2       /* daemons per scenario (the timing ones: 3) */
#define FT_DAEMONS_MAX      3       /* daemons of any scenario */
#define FT_PREFIX           "redlock:"  /* lock.key_prefix */
#define FT_FENCE_SUFFIX     " fence"    /* fence counters: kept forever by design */
#define FT_FENCED_SUFFIX    " fenced"   /* the fences CHECK reads (<record> fenced): kept
                                           forever by design, as the counters */
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
extern const char *const ft_names[FT_NAMES];
#define FT_HOT              "hot"
/* The scenarios with kinds add a counted name (limit=FT_LIMIT) and a
   shared/exclusive one; the restart-majority schedules hold "hot-sem"
   and "hot-rw" the way they hold "hot". */
#define FT_SEM              "sem"
#define FT_RW               "rw"
#define FT_HOT_SEM          "hot-sem"
#define FT_HOT_RW           "hot-rw"
#define FT_RUN_NAMES        8       /* names of one run: regular, kinds, hot ones */
/*
 * The sets schedules (sched_sets.c): three names that sets of two and
 * three take in opposite orders through the two daemons, with single
 * holders of each beside them.
 */
#define FT_SET_P            "set-p"
#define FT_SET_Q            "set-q"
#define FT_SET_R            "set-r"
#define FT_SETS_WARMUP_MS   8000    /* clients run this long before the fault */
#define FT_SET_WAIT_BOUND_MS 5000   /* a set waits at most this long, judged (starvation) */

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
extern const struct ft_kind ft_plain;
extern const struct ft_kind ft_counted;
extern const struct ft_kind ft_shared;
extern const struct ft_kind ft_fenced;

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
    bool     sets;                  /* the sets schedules' clients run (FT_SET_*) */
    bool     neg_sets;              /* negative control: a set must starve, or wait while
                                       its names are free longer than the bound */
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
    bool        set_by_name;        /* the daemons are the build that takes a set's
                                       names one by one (REDLOCKD_FAULT_SET_BY_NAME) */
    int         release;            /* FT_RELEASE_PREV or FT_RELEASE_CONTROL: the daemons
                                       of old_daemons run that past build, the others
                                       this one (the upgrade schedules); 0: none */
    uint32_t    old_daemons;        /* with release: bit d, daemon d starts on it */
};

/* The past builds of the upgrade schedules (the Makefile's PREV_RELEASE*). */
#define FT_RELEASE_PREV     1       /* the last release ($REDLOCKD_PREV_BIN) */
#define FT_RELEASE_CONTROL  2       /* the build from before the keys of shared and counted
                                       holds moved ($REDLOCKD_PREV_CONTROL_BIN) */

/* The suite's settings and shared state, set by main() (check_faults.c). */
extern char  ft_dir[PATH_MAX / 2];  /* this suite's files */
extern const char *ft_client_bin;   /* rmw-client */
extern bool  ft_keep;               /* FAULTS_KEEP: keep every log */
extern const char *ft_log_level;    /* FAULTS_LOG_LEVEL, default "info" */
extern int   ft_counter_port;       /* the counters' redis-server */
extern unsigned ft_round;           /* make soak: the round (1, 2, ...); 0: one pass */
extern pid_t ft_counter_pid;        /* its process */
extern const char *ft_proxy_bin;    /* delay-proxy */
extern const char *ft_break_bin;    /* break-client */
extern const char *ft_skip_bin;     /* the daemon that announces no release
                                       (REDLOCKD_SKIP_ANNOUNCE_BIN) */
extern const char *ft_set_by_name_bin; /* the daemon that takes a set's names one by one
                                       (REDLOCKD_SET_BY_NAME_BIN) */
extern const char *ft_new_bin;      /* this build ($REDLOCKD_BIN at the start; NULL: the
                                       harness's default) */
extern const char *ft_prev_bin;     /* the last release (REDLOCKD_PREV_BIN) */
extern const char *ft_control_bin;  /* the upgrade control's build
                                       (REDLOCKD_PREV_CONTROL_BIN) */
extern char  ft_net_why[256];       /* why the network scenarios are skipped, "" if not */

/* Constants of one schedule that another file reads too. */
#define FT_UPGRADE_DAEMONS  3       /* daemons of the upgrade schedules */
#define FT_UPGRADE_OLD      0x3u    /* daemons 0 and 1 start on the past build */

/* ---- procs.c: the processes of a run ---- */

/* Microseconds on CLOCK_MONOTONIC. */
int64_t ft_now_us(void);

/* Append to the notes of a run, "; "-separated. */
__attribute__((format(printf, 2, 3)))
void ft_note(struct ft_run *r, const char *fmt, ...);

/* Print a timed event of the run (and keep it in events.log). */
__attribute__((format(printf, 2, 3)))
void ft_event(struct ft_run *r, const char *fmt, ...);

/* The schedule could not be carried out: the run fails whatever the logs say. */
__attribute__((format(printf, 2, 3)))
void ft_setup_failed(struct ft_run *r, const char *fmt, ...);

/* A violation found by the orchestrator; counted after the checker ran. */
__attribute__((format(printf, 2, 3)))
void ft_external(struct ft_run *r, const char *fmt, ...);

/* Copy a file (a daemon log, before h_end removes it).  Best effort. */
void ft_copy(const char *from, const char *to);

/* Start the counters' redis-server (no persistence) in ft_dir.  0 or -1. */
int ft_counter_start(void);

/* Stop the counters' redis-server (ft_counter_start), if it runs. */
void ft_counter_stop(void);

/* Run a command on the counters' redis; true when it answered without error. */
bool ft_counter_cmd(const char *cmd);

/* The counter of a name, or of "<name>:<permit>": 0 when absent, -1 when unreadable. */
long long ft_counter_value(const char *name);

/*
 * Wait until daemons 0..ndaemons-1 report master i connected (or not).
 * True in time.
 */
bool ft_wait_master_up(size_t i, bool up, size_t ndaemons, int64_t timeout_ms);

/* kill -9 master i, an event of r (a setup failure when it was not running). */
void ft_kill_master(struct ft_run *r, size_t i);

/* Start master i again, empty, an event of r (a setup failure when it does not come back). */
void ft_restart_master(struct ft_run *r, size_t i);

/* SIGSTOP or SIGCONT master i, an event of r (a setup failure when it cannot be signalled). */
void ft_signal_master(struct ft_run *r, size_t i, int sig);

/*
 * With the restart quarantine on, masters that started a moment ago do
 * not count yet: wait until each daemon grants (a probe lock) and shows
 * no master in quarantine (STATS master.<i>.quarantine_ms, when it
 * exists).
 */
bool ft_wait_quarantine_over(struct ft_run *r);

/*
 * Start an rmw-client on name through the daemons in ports (a list,
 * preferred first), holding it as kind says.  sections 0 runs until
 * stopped; poll_ms > 0 makes it poll with LOCK wait=0.  Returns its
 * index, or -1.
 */
int ft_start_kind(struct ft_run *r, const char *name, const struct ft_kind *kind,
                  const char *ports, long sections, long ttl_ms, const char *sleep, long poll_ms,
                  long think_ms);

/* An exclusive client (ft_start_kind). */
int ft_start_client(struct ft_run *r, const char *name, const char *ports, long sections,
                    long ttl_ms, const char *sleep, long poll_ms, long think_ms);

/*
 * "p0,p1": the first n daemons, d first, then the next ones in turn
 * ("a0:p0,a1:p1" when they are in namespaces).
 */
void ft_ports_of(const struct ft_run *r, size_t d, size_t n, char *out, size_t size);

/* The active daemons (all but an idle one), d first. */
void ft_ports(const struct ft_run *r, size_t d, char *out, size_t size);

/* A regular client's kind in a run whose clients mix leases and sessions. */
struct ft_kind ft_mixed(const struct ft_run *r, const struct ft_kind *base);

/* Reap clients that exited; an unexpected exit fails the setup. */
void ft_reap(struct ft_run *r);

/* SIGKILL client i now and reap it; its kill time goes to the checker. */
void ft_kill_client(struct ft_run *r, size_t i);

/*
 * Start an operator (break-client) that BREAKs the names (a
 * comma-separated list) through the daemons in ports, pausing every
 * (ms, "MIN-MAX") before each, count times (0: until stopped).
 * Returns its index, or -1 with the setup failure recorded.
 */
int ft_start_operator(struct ft_run *r, const char *ports, const char *names, const char *every,
                      long count);

/*
 * Wait for operator k to end (SIGTERM first when stop), at most
 * FT_WAIT_MS, then SIGKILL; an exit status other than 0 fails the setup.
 */
void ft_end_operator(struct ft_run *r, size_t k, bool stop);

/* Stop every client: SIGTERM (after SIGCONT), then SIGKILL at the deadline. */
void ft_stop_clients(struct ft_run *r);

/* Load the sections of every client so far (for the waits). */
void ft_sections(const struct ft_run *r, struct checker_sections *s);

/*
 * Wait until client i is inside a section that began at most
 * fresh_ms ago (so that a signal sent now lands inside it).  Returns
 * the section's begin time, or -1 at the deadline.
 */
int64_t ft_wait_in_section(struct ft_run *r, size_t i, int64_t fresh_ms);

/*
 * Clients that must get their lock again after the heal (every client
 * that runs until stopped, was not killed and waits for its lock rather
 * than polling for it) but have not: their number, and the first one's
 * index in *first.
 */
size_t ft_unserved(const struct ft_run *r, const struct checker_sections *s, size_t *first);

/*
 * After the heal: run until every regular name was granted again, every
 * client that runs until stopped got its lock again at least once, and
 * every client with a fixed number of sections is done, and for at
 * least FT_POST_MIN_MS; at most until the recovery bound has passed
 * (the checker then reports what is missing).
 */
void ft_post_phase(struct ft_run *r);

/* After the clients are gone: every lock key must go within max_ttl. */
void ft_check_keys_gone(struct ft_run *r);

/* Let the run go on for ms: a schedule's pause between two of its steps. */
void ft_pause(int64_t ms);

/* The warm-up before the first fault, ms long: the fault's window begins after it. */
void ft_warmup(struct ft_run *r, int64_t ms);

/* ---- run.c: one scenario run ---- */

/*
 * In an upgrade schedule, make daemon d's next start run the scenario's
 * past release (old) or this build: the harness's one way of choosing a daemon's binary,
 * $REDLOCKD_BIN at its start; the past build's config without the keys
 * it does not know (known_keys_only).  0, or -1 with the setup failure
 * recorded.
 */
int ft_pick_build(struct ft_run *r, size_t d, bool old, struct h_daemon_opts *o);

/*
 * Run scenario sc into r (zeroed here): the set-up, the schedule, the
 * stop, the judgement (r->passed, r->notes).
 */
void ft_run_scenario(const struct ft_scenario *sc, struct ft_run *r);

/* ---- sched_masters.c: masters killed, stopped, restarted empty ---- */

/* kill -9 one master, then a second; restart both (empty) later. */
void ft_sched_kill_masters(struct ft_run *r);

/* SIGSTOP master 4 for FT_SHORT_STOP_MS (longer than node_timeout). */
void ft_sched_stop1_short(struct ft_run *r);

/* SIGSTOP masters 3 and 4 for FT_SHORT_STOP_MS. */
void ft_sched_stop2_short(struct ft_run *r);

/* SIGSTOP master 4 for FT_LONG_STOP_MS (longer than the ttl). */
void ft_sched_stop1_long(struct ft_run *r);

/* SIGSTOP masters 3 and 4 for FT_LONG_STOP_MS. */
void ft_sched_stop2_long(struct ft_run *r);

/*
 * Wait until the PTTL of each of keys[0..n) on master i rose once (each
 * holder's lease was renewed).  True in time.
 */
bool ft_wait_renewals(size_t i, char (*keys)[CHECKER_NAME_MAX + 32], size_t n, int64_t timeout_ms);

/*
 * The restart schedules with kinds: FT_HOT_SEM's three permits and
 * FT_HOT_RW held by long holders through daemon 0, like FT_HOT; then two
 * clients poll for a permit of FT_HOT_SEM and two for FT_HOT_RW through
 * daemon 1.  FT_HOT_RW's holder is shared and its contenders exclusive
 * when shared_holder, else the other way round.  Returns 0, or -1 with
 * the setup failure recorded.
 */
int ft_start_hot_kinds(struct ft_run *r, bool shared_holder);

/*
 * The restart schedules' two clients of FT_HOT: a long holder (one
 * FT_HOLD_SLEEP_MS section, ttl max_ttl) through daemon 0, waited for
 * until it is inside its section, then a contender polling through
 * daemon 1.  Returns 0, or -1 with the setup failure recorded.
 */
int ft_start_hot_pair(struct ft_run *r, const char *key);

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
void ft_sched_restart_empty(struct ft_run *r);

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
void ft_sched_restart_majority(struct ft_run *r);

/* ---- sched_clients.c: a daemon or clients killed or stopped ---- */

/*
 * The live members of the shared set key on master i, up to max into
 * out (each up to 63 bytes): their number, or -1 when the master did not
 * answer.
 */
long ft_live_members(size_t i, const char *key, char (*out)[64], size_t max);

/*
 * Wait until each client in idx[0..n) is inside a section that began at
 * most fresh_ms[k] ago, all at the same moment.  False at the deadline.
 */
bool ft_wait_in_sections(struct ft_run *r, const size_t *idx, const int64_t *fresh_ms, size_t n,
                         int64_t timeout_ms);

/*
 * kill -9 daemon 1 while one of its clients (a victim with long
 * sections) holds acct-a: that client's lock lives on until its keys
 * expire, the other clients of daemon 1 reconnect to daemon 0.
 */
void ft_sched_kill_daemon(struct ft_run *r);

/*
 * SIGSTOP a client inside its section for 2 ttl: its connection stays
 * open, so the daemon keeps renewing its lock and the others wait.
 */
void ft_sched_stop_client(struct ft_run *r);

/* kill -9 a client inside its section: its keys must go within 1 s. */
void ft_sched_kill_client(struct ft_run *r);

/* ---- sched_clock.c: the masters' wall clocks stepped ---- */

/*
 * What daemon d's STATS say of the masters' clocks, from one STATS
 * request: "clock_steps 1/1/1/0/0, quarantine_ms 6012/6010/6009/0/0"
 * (a value per master, "-" for a line STATS does not have) into out;
 * into *missed the stepped masters whose step it did not count (fewer
 * than one), a bit per master.
 */
void ft_clock_stats(const struct ft_run *r, size_t d, char *out, size_t size, uint32_t *missed);

/* Step the wall clocks of masters 0-2 forward by FT_CLOCK_STEP_MS. */
void ft_sched_clock_forward(struct ft_run *r);

/* Back by FT_CLOCK_STEP_MS: keys written before the step live that much longer. */
void ft_sched_clock_back(struct ft_run *r);

/*
 * At the end of a clock run: each daemon's clock_steps per master in the
 * notes; with the check on, a stepped master whose step a daemon did not
 * count is a violation.
 */
void ft_judge_clock(struct ft_run *r);

/* ---- sched_net.c: network faults ---- */

/* Cut master 4 from both daemons (DROP both ways) for FT_PARTITION_MS. */
void ft_sched_partition1(struct ft_run *r);

/* Cut masters 3 and 4 from both daemons for FT_PARTITION_MS. */
void ft_sched_partition2(struct ft_run *r);

/* Drop master 4's replies to the daemons for FT_PARTITION_MS (requests still arrive). */
void ft_sched_half_partition(struct ft_run *r);

/* 5 % random loss both ways on the links of the last FT_SLOW_MASTERS masters. */
void ft_sched_loss(struct ft_run *r);

/* 20 +- 15 ms each way on the links of the last FT_SLOW_MASTERS masters (the proxies). */
void ft_sched_delay(struct ft_run *r);

/* The first line of a log that contains text, into out ("" when none). */
void ft_log_line(const char *path, const char *text, char *out, size_t size);

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
void ft_sched_minority(struct ft_run *r);

/*
 * Cut daemon 0 from master 0 until it drops the link with a LOCK pending
 * there; after the heal, master 0 must never run that LOCK.
 */
void ft_sched_stale_drop(struct ft_run *r);

/* ---- sched_pause.c: a paused daemon ---- */

/*
 * SIGSTOP daemon 1 past its holders' validity; its late writer's write
 * is fenced and must be refused.
 */
void ft_sched_pause_daemon(struct ft_run *r);

/* The same with an unfenced late write (negative control: it must be reported). */
void ft_sched_pause_unfenced(struct ft_run *r);

/*
 * The pause-daemon schedules' own verdict, from the sections: the late
 * writer wrote late (refused when fenced, landed otherwise: else the
 * timing did not make the fault and the setup failed), its session read
 * LOST before the answer to its UNLOCK, the long victim aborted on the
 * LOST read after the resume, and the other clients of daemon 1 went on.
 */
void ft_pause_judge(struct ft_run *r, const struct checker_sections *s);

/* The unfenced control's expectation: the late write shows as an overlap and a stale write. */
bool ft_pause_negative_seen(struct ft_run *r);

/* ---- sched_timing.c: timing, liveness and upgrade ---- */

/*
 * What each daemon's STATS say of the stepped masters' clocks, as an
 * event, and in the notes with which daemons did not count the step.
 * Not judged: a step that a daemon does not see makes a double grant
 * only together with keys that expired early, which the checker judges.
 */
void ft_timing_clock_notes(struct ft_run *r, const char *when);

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
void ft_sched_timing(struct ft_run *r);

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
void ft_sched_timing_control(struct ft_run *r);

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
void ft_sched_liveness(struct ft_run *r);

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
void ft_sched_upgrade(struct ft_run *r);

/* ---- sched_sets.c: sets of names ---- */

/*
 * The sets schedules (tests/faults/README.md, "Sets"): sets of two and
 * three names taken in opposite orders through the two daemons ({set-p,
 * set-q} through daemon 0, {set-q, set-p} through daemon 1, {set-q,
 * set-r, set-p} through daemon 0), single holders of each name through
 * both; after FT_SETS_WARMUP_MS, masters 3 and 4 are stopped for
 * FT_SHORT_STOP_MS (the three others are exactly a quorum, so every set
 * needs all of them).  In the negative control the daemons take a
 * set's names one by one, holding what they won (hold and wait): the
 * checker must report a set that starves, or waits while its names are
 * free.
 */
void ft_sched_sets(struct ft_run *r);

/* The notes of a sets run: sets granted, their waits, the longest ones. */
void ft_sets_notes(struct ft_run *r);

/* The sets control's expectation: a set deadlocked (it waited while all its names
   were free) or starved. */
bool ft_sets_negative_seen(struct ft_run *r);

/* ---- self_test.c: the checker's self-test ---- */

/* Run the checker on every case; 0 when it finds exactly what it should. */
int ft_self_test(void);

#endif /* REDLOCKD_TESTS_FAULTS_FAULTS_H */
