/*
 * run_bench.c: the driver of `make bench` and `make bench-smoke`
 * (build/run_bench).
 *
 * Starts five redis-server masters and one redlockd on free ports with
 * the test harness (tests/harness.h), runs build/redlock-bench for each
 * entry of the standard table (rtt; uncontended with 1 and 64
 * connections; hot with 50; direct with 1 and 64 loops; the counted and
 * shared rows below), collects the JSON line of each run, and prints a
 * table and the performance ratios with their targets (README.md,
 * Performance).  uncontended-1 p50 / direct-1 p50 is printed for
 * information: direct-1 is the masters' own quorum latency on this
 * machine, so the ratio shows what the daemon adds.
 *
 * The counted and shared rows of the standard table:
 *
 *     counted-64      --mode counted: 64 connections on one name with
 *                     limit=8; fairness, and the most holders the
 *                     clients saw at once (must be <= 8, with no two
 *                     holders of one permit)
 *     shared-64+1     --mode shared: 64 connections LOCK ... shared and
 *                     one exclusive writer on the same name, reported
 *                     apart; the writer must be granted (not starve) and
 *                     never be seen holding with anyone else
 *     grant-l1, grant-l1000, grant-l1000-full
 *                     --mode counted, one connection: a name of limit 1,
 *                     of limit 1000, and of limit 1000 with 999 permits
 *                     held by lease-mode locks (--fill 999); acquire and
 *                     release p50 and their ratios to grant-l1
 *
 * The pairs rows of the standard table (sets of names against single
 * LOCKs):
 *
 *     pairs-50-set    --mode pairs --set: 50 connections, each looping
 *                     on a random pair of 20 names, LOCK a b / UNLOCK
 *                     a b (one set)
 *     pairs-50-singles --mode pairs: the same pairs taken as two single
 *                     LOCKs in byte order, released together
 *     pairs-64-own-set --mode pairs --set --own: 64 connections, each
 *                     looping LOCK a b / UNLOCK a b on two names of its
 *                     own: what a set costs without contention, beside
 *                     uncontended-64 (a single lock without contention)
 *
 * each with fairness, errors (a TIMEOUT after wait= 10 s: something is
 * stuck) and the names the clients saw held by two connections at once
 * (clashes; must be 0); targets: set pairs/s / singles pairs/s >= 1.0,
 * the masters' commands per set / per single lock (uncontended-64) <=
 * 1.5.  For them and uncontended-64 the commands each master ran are
 * also broken down by command (INFO commandstats before and after).
 *
 * A counted, shared or pairs row that breaks those checks fails the run
 * (both modes); the figures are reported, never judged.
 *
 * The peer rows run next, against the same masters and daemon: node
 * tests/bench/peer/peer.js, one Node.js program with one worker loop,
 * drives redlockd over its text protocol (--client redlockd, one socket
 * per worker) or a Redlock library in process over the five masters
 * (--client redlock: node-redlock; --client redis-semaphore:
 * RedlockSemaphore), in pairs, redlockd first:
 *
 *     peer-1          1 worker on a name of its own
 *     peer-50         50 workers, a name each
 *     peer-hot20      20 workers on one name
 *     peer-sem20      20 workers on one name with limit 5 (LOCK ...
 *                     limit=5 against redis-semaphore)
 *
 * printed as the peers table (pairs/s, acquire p50 and p99, fairness,
 * errors, daemon CPU per pair) with the ratios redlockd / library as
 * targets.  Their packages (exact versions in
 * tests/bench/peer/package-lock.json) are installed with npm ci into
 * BENCH_PEER_DIR (default: peer/ beside redlock-bench, build/peer) when
 * that directory holds no install of the same lockfile.  Without node,
 * without npm (when an install is needed), or when npm ci fails or
 * takes more than RUNBENCH_NPM_MS, the peer rows are skipped with one
 * line on stderr, never a failure.
 *
 * Every row that talks to the daemon (the standard daemon rows, the TLS
 * rows, the redlockd side of the peer rows) also gets "cpu us/pair": the
 * daemon's CPU time (/proc/<pid>/schedstat, ns; /proc/<pid>/stat ticks
 * where that is missing) from just before its program starts to just
 * after it exits, over the run's pairs; target for uncontended-64:
 * <= 30 us.
 *
 * The TLS rows, uncontended-1-tls and uncontended-64-tls, run at the
 * end against a setup of their own (its own test directory): the
 * certificates of tests/tls/make-certs.sh made in it, five TLS-only
 * masters (h_add_master, H_MASTER_TLS) and a daemon that reaches them
 * over TLS (rediss://, redis.tls_ca_file) and listens on listen.tls
 * (tls.cert_file, tls.key_file); redlock-bench --tls-ca talks TLS to
 * it, verifying its certificate.  They are printed beside their plain
 * rows, and the ratio uncontended-64-tls pairs/s / uncontended-64
 * pairs/s is a target (>= 0.7).  The smoke run has them too (1 s each).
 *
 * The noisy-neighbour rows run after the idle row, each against a fresh
 * daemon with the default limits: build/redlock-noisy
 * (tests/bench/noisy_bench.c; REDLOCK_NOISY_BIN, default beside
 * redlock-bench) holds 1000 session locks of ttl 1000 ms, times a
 * TRYLOCK/UNLOCK probe every 100 ms on a connection of its own, quiet
 * then while 24 sessions from 8 addresses (127.0.2.x) flood at 1000
 * requests/s each (ten times limits.reads_per_second):
 *
 *     noisy-neighbour  WATCH, STATUS and LIST; targets: no renewal failed,
 *                      no lock lost, no master link declared down (the
 *                      log's "down:" lines, or master.<i>.reconnects),
 *                      probe p99 flooded / quiet <= 2.0
 *     noisy-reads      WATCH and STATUS only, for information
 *     noisy-reads-96   the same with 96 sessions from 12 addresses: more
 *                      readers than limits.max_reads_in_flight (64)
 *
 * with the reads made and refused and their waits (STATS).  Phases of
 * max(BENCH_SECONDS, 5) s; --smoke runs noisy-neighbour alone, with 1 s
 * phases, 200 locks, 6 sessions from 2 addresses.  A run fails (both modes) without a result, a lock, a
 * probe in each phase or a read made, or with an unexpected reply.
 *
 * The hostile row runs next, against a fresh daemon of its own with
 * auth.password, listen.tls, the Unix socket asking for AUTH, /metrics
 * and RLIMIT_NOFILE 512: build/redlock-hostile
 * (tests/bench/hostile_bench.c; REDLOCK_HOSTILE_BIN, default beside
 * redlock-bench) guesses AUTH from thousands of loopback addresses,
 * floods the unauthenticated pool with silent connections, holds more
 * idle connections than the daemon has descriptors and drips bytes into
 * /metrics, for max(BENCH_SECONDS, 10) s (2 s and fewer attackers in
 * smoke), while a legitimate client per transport (TCP, TLS, Unix)
 * connects, AUTHs and locks every 100 ms and a scraper GETs /metrics
 * every 500 ms; targets: 99 % of each transport's attempts admitted
 * within 1 s, 99 % of the scrapes answered 200, checked guesses within
 * daemon/authlimit.h's bounds.  It fails (both modes) only without a
 * result.  BENCH_HOSTILE_ATTACKS=guess,pool,fds,slowloris runs some of
 * the attacks only; BENCH_HOSTILE_SOURCE=<a local IPv4 address> has the
 * TCP and TLS clients connect from there (another address group);
 * BENCH_HOSTILE_FD_AUTH=1 has the idle connections AUTH first;
 * BENCH_HOSTILE_REOPEN_MS=<ms> waits that long before opening a closed
 * pool, fds or slowloris connection again (default: at once).
 *
 * Then the resource rows, each against a fresh daemon (stopped and
 * started again, so that its RSS owes nothing to the earlier rows; the
 * masters stay), measured on the daemon process from /proc/<pid>:
 *
 *     memory-session  redlock-bench --mode hold: 10000 connections, one
 *                     session lock each (ttl 3000 ms); VmRSS before and
 *                     once all are granted; target <= 64 MiB
 *     renewal CPU     while those locks are held (the watchdog renews
 *                     each every ~1 s, in batches), the daemon's CPU
 *                     time (as for cpu us/pair) over max(BENCH_SECONDS,
 *                     5) s, as % of one core, target < 10 %; STATS
 *                     renewals_ok and renewals_failed before and after
 *                     give renewals/s, and the run fails when
 *                     renewals_failed grew or renewals_ok did not
 *     memory-counted  redlock-bench --mode hold --limit 1000 --names 10:
 *                     10000 connections, one permit each, of 10 names
 *                     with limit=1000 (every permit taken); VmRSS as for
 *                     memory-session, same target (<= 64 MiB)
 *     memory-lease    redlock-bench --mode lease-hold: 100000 lease-mode
 *                     locks (ttl 600000 ms) over 8 connections; VmRSS
 *                     once all are granted; target <= 128 MiB
 *
 *     list-cpu        LIST's daemon CPU per step (a page of up to 1024
 *                     names) with 1,000, 10,000 and 100,000 names held:
 *                     a fresh daemon each, redlock-bench --mode
 *                     names-hold holding the names in session mode over
 *                     8 connections, then redlock-bench --mode list
 *                     LISTing them on one connection for BENCH_SECONDS;
 *                     the daemon's CPU over that run (as for cpu
 *                     us/pair) over the steps it made (STATS
 *                     list_steps); target: 100k / 1k <= 2 (flat)
 *
 * A hold run prints {"event":"held",...} when every LOCK was answered;
 * run_bench waits for that line (with a deadline), measures, then ends
 * the hold with SIGTERM and reads the run's result line.  For the
 * session rows (memory-session, memory-counted) it then reports the
 * release: from the SIGTERM to STATS locks_held 0, and how much
 * renewals_failed grew meanwhile (reported, not judged).  The soft
 * RLIMIT_NOFILE is raised to the hard one first, for the daemon's sake
 * (10000 clients).
 *
 *     run_bench            BENCH_SECONDS per mode (default 10)
 *     run_bench --smoke    1 s per mode and per peer row (0.3 s per
 *                          grant-cost run), 200 session locks, 200
 *                          permits (10 names, limit 20), 2000 lease
 *                          locks, a 2 s CPU window; exit 1 unless every
 *                          mode (and peer row, when they ran) printed a
 *                          JSON line with pairs > 0 and errors == 0
 *
 * Against a base (REDLOCKD_BASE_BIN, another build's daemon; make
 * bench BASE=<commit> builds it): after the other rows, or alone with
 * BENCH_ONLY=compare, five fresh masters and two daemons on them, this
 * build's and the base's; uncontended-1, -64, hot-50, counted-64,
 * shared-64+1 and the two fence rows run BENCH_COMPARE_ROUNDS times
 * (default 6) on each, for BENCH_SECONDS / rounds (at least 1 s) a run,
 * interleaved current, base, base, current, ... with the daemons
 * swapping places each round; then memory-session on fresh daemons of
 * each side (2 rounds), then the TLS rows on two TLS daemons the same
 * way.  The table "against <base>" (BENCH_BASE_NAME, default the path)
 * gives each side's medians and the median of the rounds' own ratios
 * current / base for pairs/s, p50, cpu us/pair (memory-session: bytes
 * per lock, renewal CPU), and marks "slower" a row beyond the noise
 * band (RUNBENCH_CMP_*); reported only, never a failure.  --smoke
 * compares too, uncontended-64 alone, one round of 0.5 s, against
 * REDLOCKD_BASE_BIN or, without it, this build's daemon itself.
 *
 * The targets are reported, never enforced.  A hold run that did not
 * get every lock, saw an error or a LOST line, or (renewal CPU) saw a
 * failed renewal or none at all is a failure in both modes.
 *
 * Environment: BENCH_SECONDS, REDLOCKD_BIN (default ./build/redlockd),
 * REDLOCK_BENCH_BIN (default ./build/redlock-bench), REDLOCK_NOISY_BIN
 * (default: redlock-noisy beside redlock-bench), BENCH_UNIX=1 (talk
 * to the daemon over its Unix socket instead of TCP), BENCH_PEER=0 (skip
 * the peer rows), BENCH_PEER_DIR, BENCH_ONLY=noisy (the noisy-neighbour rows alone),
 * BENCH_ONLY=hostile (the hostile row alone), REDLOCK_HOSTILE_BIN,
 * BENCH_HOSTILE_ATTACKS,
 * BENCH_ONLY=list (the list-cpu rows
 * alone, on masters of their own), BENCH_ONLY=pairs (uncontended-64 and
 * the pairs rows alone), REDLOCKD_BASE_BIN, BENCH_BASE_NAME,
 * BENCH_COMPARE_ROUNDS, BENCH_ONLY=compare (the comparison alone).  Run
 * from the source tree's root.
 * Exit status: 0, or 1 when the setup failed, a run (peer rows
 * included, when they ran) printed no JSON line, a hold run failed
 * (above), a counted or shared row broke its checks, or (smoke) a run
 * had no pairs or any error.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <hiredis/hiredis.h>

#include "tests/harness.h"

#define RUNBENCH_LINE_MAX   1024    /* a JSON line */
#define RUNBENCH_MASTERS    5       /* the reference setup */

#define RUNBENCH_SESSION_LOCKS  10000   /* memory-session: connections, a lock each */
#define RUNBENCH_LEASE_LOCKS    100000  /* memory-lease: lease-mode locks */
#define RUNBENCH_SMOKE_SESSION  200     /* the same in --smoke */
#define RUNBENCH_SMOKE_LEASE    2000
#define RUNBENCH_SESSION_TTL_MS 3000    /* renewed every ~1 s */
#define RUNBENCH_LEASE_TTL_MS   600000  /* outlives the measurement */
#define RUNBENCH_LEASE_CONNS    8       /* connections carrying the lease LOCKs */
#define RUNBENCH_CPU_MIN_MS     5000    /* shortest renewal CPU window (full run) */
#define RUNBENCH_SMOKE_CPU_MS   2000    /* renewal CPU window in --smoke */
#define RUNBENCH_CLIENTS_SPARE  100     /* limits.max_clients above the held connections */
#define RUNBENCH_FDS_SPARE      128     /* descriptors the daemon needs besides clients */
#define RUNBENCH_HELD_MS        60000   /* deadline for "held": this, plus */
#define RUNBENCH_HELD_MS_PER_K  2000    /* this per 1000 locks */
#define RUNBENCH_HOLD_SPARE_S   300     /* --duration beyond the CPU window (a backstop) */
#define RUNBENCH_EXIT_MS        30000   /* a hold run's deadline to exit after SIGTERM */
#define RUNBENCH_RELEASE_MS     30000   /* deadline for locks_held to drop to 0 */
#define RUNBENCH_SESSION_MIB    64.0    /* target: memory-session RSS */
#define RUNBENCH_LEASE_MIB      128.0   /* target: memory-lease RSS */
#define RUNBENCH_CPU_PCT        10.0    /* target: renewal CPU, % of one core (below) */
#define RUNBENCH_COUNTED_LOCKS  10000   /* memory-counted: connections, a permit each, */
#define RUNBENCH_COUNTED_NAMES  10      /* over this many names */
#define RUNBENCH_COUNTED_LIMIT  1000    /* of this limit (every permit taken) */
#define RUNBENCH_SMOKE_COUNTED  200     /* memory-counted in --smoke: 10 names, limit 20 */
#define RUNBENCH_SMOKE_GRANT_S  "0.3"   /* --smoke: seconds of each grant-cost run */
#define RUNBENCH_RELEASE_SETTLE_MS 600  /* after locks_held 0: renewals in flight end
                                           (the harness's round deadline is 500 ms) */
#define RUNBENCH_SMOKE_SETTLE_MS 100    /* the same in --smoke */
#define RUNBENCH_TLS_RATIO      0.7     /* target: uncontended-64-tls / uncontended-64 pairs/s */
#define RUNBENCH_MAKE_CERTS     "tests/tls/make-certs.sh"   /* from the source tree's root */
#define RUNBENCH_UNC64_DIRECT   0.9     /* target: uncontended-64 / direct-64 pairs/s */
#define RUNBENCH_CPU_PAIR_US    15.0    /* target: daemon CPU per pair, uncontended-64, us */
#define RUNBENCH_PEER_DIR       "tests/bench/peer"  /* peer.js and its pinned packages */
#define RUNBENCH_NPM_MS         180000  /* deadline of npm ci for the peer rows */
#define RUNBENCH_CHECK_MS       30000   /* deadline of peer.js --check */
#define RUNBENCH_PEER_P50       1.3     /* target: peer-1 acquire p50, redlockd / node-redlock */
#define RUNBENCH_PEER_OWN       3.0     /* target: peer-50 pairs/s, redlockd / node-redlock */
#define RUNBENCH_PEER_HOT       2.5     /* target: peer-hot20r pairs/s, redlockd / node-redlock
                                           (node-redlock retrying every 5 ms, 5 ms jitter) */
#define RUNBENCH_PEER_MCPU      0.3     /* target: peer-50 masters' CPU per pair, redlockd /
                                           node-redlock */
#define RUNBENCH_PEER_WCPU      0.35    /* target: peer-50 whole system's CPU per pair, the same */
#define RUNBENCH_PEER_SCRIPTS   0.5     /* target: peer-50 script calls per pair per master */
#define RUNBENCH_PEER_CMDS      4.0     /* target: peer-50 commands per pair per master */
#define RUNBENCH_SESSION_KIB    2.0     /* target: sessions-max RSS per session and lock, KiB */
#define RUNBENCH_RENEW_PCT_10K  5.0     /* target: sessions-max renewal CPU per 10,000, % */
#define RUNBENCH_PEER_FAIR      0.9     /* target: peer-hot20 fairness of redlockd */
#define RUNBENCH_PEER_RETRY_MS  "5"     /* peer-hot20r: node-redlock's retry delay and jitter */
#define RUNBENCH_IDLE_MS        10000   /* the idle daemon's window */
#define RUNBENCH_SESSIONS_CAP   100000  /* sessions-max: at most this many sessions */
#define RUNBENCH_SMOKE_IDLE_MS  2000    /* the same in --smoke */
#define RUNBENCH_LIST_ROWS      3       /* list-cpu: table sizes */
#define RUNBENCH_LIST_CONNS     8       /* list-cpu: connections holding the names */
#define RUNBENCH_LIST_TTL_MS    600000  /* list-cpu: no renewal during the run */
#define RUNBENCH_LIST_RATIO     2.0     /* target: CPU per step, 100k / 1k names held */
#define RUNBENCH_SMOKE_LIST_S   "0.3"   /* --smoke: seconds of each LIST run */
#define RUNBENCH_PAIRS_PPS      1.0     /* target: pairs-50 pairs/s, set / singles */
#define RUNBENCH_PAIRS_CMDS     1.5     /* target: commands per set / per single lock */
#define RUNBENCH_CMDS_MAX       64      /* commands told apart in a breakdown */
#define RUNBENCH_CMD_NAME       48      /* a command's name in INFO commandstats */
#define RUNBENCH_PAIRS_COLS     4       /* the rows the pairs table sets side by side */

/* Calls of one command (INFO commandstats), summed over the masters. */
struct runbench_cmd {
    char      name[RUNBENCH_CMD_NAME];  /* "evalsha", "set", "client|setname" */
    long long calls;                    /* its calls */
};

/* What the masters ran by command at one moment: RUNBENCH_CMDS_MAX at most. */
struct runbench_cmds {
    bool                ok;             /* every master answered */
    size_t              n;              /* entries in cmd */
    struct runbench_cmd cmd[RUNBENCH_CMDS_MAX];
};

/* One entry of the standard table and what its run printed. */
struct runbench_run {
    const char *label;                  /* row label */
    const char *mode;                   /* --mode */
    int         conns;                  /* --connections */
    const char *extra[5];               /* more arguments, NULL-terminated */
    const char *smoke_seconds;          /* --duration in --smoke; NULL: 1 */
    const char *client;                 /* peer rows: peer.js --client */
    const char *shape;                  /* peer rows: peer.js --shape (NULL: own) */
    const char *peer_limit;             /* peer rows: peer.js --limit (NULL: none) */
    const char *retry_ms;               /* peer rows: node-redlock's retryDelay and
                                           retryJitter, ms (NULL: its defaults) */
    bool        ok;                     /* a JSON line was read */
    char        json[RUNBENCH_LINE_MAX]; /* that line */
    double      pairs;                  /* "pairs" */
    double      pps;                    /* "pairs_per_s" */
    double      p50, p90, p99, max;     /* latencies, us */
    double      errors;                 /* "errors" */
    double      min_acq, max_acq;       /* hot, counted, shared (readers); -1 otherwise */
    double      rel_p50;                /* "rel_p50_us": release latency (daemon rows) */
    double      limit;                  /* counted: "limit" */
    double      max_holders;            /* counted: "max_holders"; shared: "max_readers" */
    double      clashes;                /* counted: "clashes" */
    double      mixed;                  /* shared: "mixed" */
    double      w_pairs, w_pps;         /* shared: the writer's pairs */
    double      w_p50, w_p90, w_p99, w_max; /* shared: the writer's latencies */
    double      w_acq;                  /* shared: the writer's grants */
    bool        cpu_ok;                 /* cpu_us was measured (a run against the daemon) */
    double      cpu_us;                 /* the daemon's CPU over the run / pairs, us */
    bool        m_ok;                   /* the masters' figures below were measured */
    double      m_cmds;                 /* commands per pair per master (INFO commandstats,
                                           scripts' own calls included) */
    double      m_scripts;              /* script calls per pair per master */
    double      m_cpu_us;               /* the masters' CPU per pair, all of them, us */
    bool        c_ok;                   /* c_cpu_us was measured */
    double      c_cpu_us;               /* the client program's CPU per pair, us */
    bool        by_cmd;                 /* break the masters' commands down by command */
    struct runbench_cmds cmds;          /* by_cmd: calls per command over the run (deltas) */
};

/* Counted rows pass their limit (and fill) to redlock-bench --mode counted. */
static struct runbench_run runbench_runs[] = {
    { .label = "rtt", .mode = "rtt", .conns = 1 },
    { .label = "uncontended-1", .mode = "uncontended", .conns = 1 },
    { .label = "uncontended-64", .mode = "uncontended", .conns = 64, .by_cmd = true },
    { .label = "hot-50", .mode = "hot", .conns = 50 },
    { .label = "direct-1", .mode = "direct", .conns = 1 },
    { .label = "direct-64", .mode = "direct", .conns = 64 },
    { .label = "counted-64", .mode = "counted", .conns = 64, .extra = { "--limit", "8" } },
    { .label = "shared-64+1", .mode = "shared", .conns = 64, .extra = { "--writers", "1" } },
    { .label = "grant-l1", .mode = "counted", .conns = 1, .extra = { "--limit", "1" },
      .smoke_seconds = RUNBENCH_SMOKE_GRANT_S },
    { .label = "grant-l1000", .mode = "counted", .conns = 1, .extra = { "--limit", "1000" },
      .smoke_seconds = RUNBENCH_SMOKE_GRANT_S },
    { .label = "grant-l1000-full", .mode = "counted", .conns = 1,
      .extra = { "--limit", "1000", "--fill", "999" }, .smoke_seconds = RUNBENCH_SMOKE_GRANT_S },
    { .label = "uncontended-1-fence", .mode = "uncontended", .conns = 1, .extra = { "--fence" } },
    { .label = "uncontended-64-fence", .mode = "uncontended", .conns = 64,
      .extra = { "--fence" } },
    { .label = "pairs-50-set", .mode = "pairs", .conns = 50, .extra = { "--set" },
      .by_cmd = true },
    { .label = "pairs-50-singles", .mode = "pairs", .conns = 50, .by_cmd = true },
    { .label = "pairs-64-own-set", .mode = "pairs", .conns = 64, .extra = { "--set", "--own" },
      .by_cmd = true },
};

#define RUNBENCH_NRUNS  (sizeof(runbench_runs) / sizeof(runbench_runs[0]))

/* The TLS rows (TLS masters, TLS clients), printed beside their plain rows. */
static struct runbench_run runbench_tls_runs[] = {
    { .label = "uncontended-1-tls", .mode = "uncontended", .conns = 1 },
    { .label = "uncontended-64-tls", .mode = "uncontended", .conns = 64 },
};

#define RUNBENCH_NTLS   (sizeof(runbench_tls_runs) / sizeof(runbench_tls_runs[0]))

/*
 * The peer rows (tests/bench/peer/peer.js, Node.js), in pairs: redlockd
 * over its text protocol, then a Redlock library in process over the
 * same five masters, driven by the same loop (mode "peer", conns: the
 * workers).
 */
static struct runbench_run runbench_peer_runs[] = {
    { .label = "peer-1-redlockd", .mode = "peer", .conns = 1, .client = "redlockd" },
    { .label = "peer-1-redlock", .mode = "peer", .conns = 1, .client = "redlock" },
    { .label = "peer-50-redlockd", .mode = "peer", .conns = 50, .client = "redlockd" },
    { .label = "peer-50-redlock", .mode = "peer", .conns = 50, .client = "redlock" },
    { .label = "peer-hot20-redlockd", .mode = "peer", .conns = 20, .client = "redlockd",
      .shape = "one" },
    { .label = "peer-hot20-redlock", .mode = "peer", .conns = 20, .client = "redlock",
      .shape = "one" },
    { .label = "peer-hot20r-redlockd", .mode = "peer", .conns = 20, .client = "redlockd",
      .shape = "one" },
    { .label = "peer-hot20r-redlock", .mode = "peer", .conns = 20, .client = "redlock",
      .shape = "one", .retry_ms = RUNBENCH_PEER_RETRY_MS },
    { .label = "peer-sem20-redlockd", .mode = "peer", .conns = 20, .client = "redlockd",
      .shape = "one", .peer_limit = "5" },
    { .label = "peer-sem20-semaphore", .mode = "peer", .conns = 20, .client = "redis-semaphore",
      .shape = "one", .peer_limit = "5" },
};

#define RUNBENCH_NPEERS (sizeof(runbench_peer_runs) / sizeof(runbench_peer_runs[0]))

/* What each pair of peer rows compares, in the order of runbench_peer_runs. */
static const char *const runbench_peer_pairs[RUNBENCH_NPEERS / 2] = {
    "1 worker, own name", "50 workers, own names", "20 workers, one name",
    "one name, 5 ms retry", "20 workers, limit 5"
};

enum {
    RUNBENCH_PEER1,
    RUNBENCH_PEER1_LIB,
    RUNBENCH_PEER50,
    RUNBENCH_PEER50_LIB,
    RUNBENCH_PEERHOT,
    RUNBENCH_PEERHOT_LIB,
    RUNBENCH_PEERHOTR,
    RUNBENCH_PEERHOTR_LIB,
    RUNBENCH_PEERSEM,
    RUNBENCH_PEERSEM_LIB
};

enum {
    RUNBENCH_UNC1_TLS,
    RUNBENCH_UNC64_TLS
};

enum {
    RUNBENCH_RTT,
    RUNBENCH_UNC1,
    RUNBENCH_UNC64,
    RUNBENCH_HOT50,
    RUNBENCH_DIRECT1,
    RUNBENCH_DIRECT,
    RUNBENCH_COUNTED64,
    RUNBENCH_SHARED64,
    RUNBENCH_GRANT1,
    RUNBENCH_GRANT1000,
    RUNBENCH_GRANTFULL,
    RUNBENCH_UNC1F,
    RUNBENCH_UNC64F,
    RUNBENCH_PAIRS_SET,
    RUNBENCH_PAIRS_SINGLES,
    RUNBENCH_PAIRS_OWN
};

/* The number after "\"key\":" in a JSON line; -1 when absent. */
static double
runbench_field(const char *json, const char *key)
{
    char pat[64];
    const char *p;

    snprintf(pat, sizeof(pat), "\"%s\":", key);
    p = strstr(json, pat);
    if (p == NULL) {
        return -1;
    }
    return strtod(p + strlen(pat), NULL);
}

/* Find the JSON line in out_path (stdout and stderr of the run). */
static bool
runbench_read_json(const char *out_path, char *json, size_t size)
{
    char line[RUNBENCH_LINE_MAX];
    bool found = false;
    FILE *f = fopen(out_path, "r");

    if (f == NULL) {
        fprintf(stderr, "run_bench: %s: %s\n", out_path, strerror(errno));
        return false;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "{\"mode\":", 8) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(json, size, "%s", line);
            found = true;
        } else if (strncmp(line, "{\"event\":", 9) != 0) {
            fprintf(stderr, "  (bench) %s", line);
        }
    }
    fclose(f);
    return found;
}

/* utime + stime of process pid in clock ticks, from /proc/<pid>/stat; -1 when unknown. */
static long long
runbench_cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    unsigned long long ut, st;
    const char *p;
    size_t n;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "run_bench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Fields 14 and 15, counted after the command name, which may hold spaces. */
    p = strrchr(buf, ')');
    if (p == NULL || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                            &ut, &st) != 2) {
        fprintf(stderr, "run_bench: %s: cannot parse utime and stime\n", path);
        return -1;
    }
    return (long long)(ut + st);
}

/*
 * CPU time of process pid so far, in ns: the first field of
 * /proc/<pid>/schedstat (time on a CPU, in ns, of its main thread: all
 * of redlockd, which runs one thread), or utime + stime from
 * /proc/<pid>/stat (10 ms ticks) where schedstat is missing; -1 when
 * neither can be read.
 */
static long long
runbench_cpu_ns(pid_t pid)
{
    char path[64];
    unsigned long long ns;
    long clk = sysconf(_SC_CLK_TCK);
    long long ticks;
    FILE *f;
    int n;

    snprintf(path, sizeof(path), "/proc/%ld/schedstat", (long)pid);
    f = fopen(path, "r");
    if (f != NULL) {
        n = fscanf(f, "%llu", &ns);
        fclose(f);
        if (n == 1) {
            return (long long)ns;
        }
    }
    ticks = runbench_cpu_ticks(pid);
    if (ticks < 0 || clk <= 0) {
        return -1;
    }
    return ticks * (1000000000LL / clk);
}

/* What the masters had done at one moment, summed over all of them. */
struct runbench_masters {
    bool      ok;           /* every master answered */
    long long cmds;         /* commands run (INFO commandstats) */
    long long scripts;      /* script calls among them */
    long long cpu_us;       /* CPU time (INFO cpu), us */
};

static bool runbench_masters_tls;       /* the masters speak TLS only: not sampled */

/* Sample the masters' counters (one INFO commandstats and one INFO cpu each). */
static void
runbench_masters_sample(struct runbench_masters *m)
{
    long long c, sc, cpu;
    size_t i;

    memset(m, 0, sizeof(*m));
    if (runbench_masters_tls) {
        return;
    }
    for (i = 0; i < RUNBENCH_MASTERS; i++) {
        c = h_master_commands(i, &sc);
        cpu = h_master_cpu_us(i);
        if (c < 0 || cpu < 0) {
            return;
        }
        m->cmds += c;
        m->scripts += sc;
        m->cpu_us += cpu;
    }
    m->ok = true;
}

/* "cmdstat_<name>:calls=N,..." of one master, added into m. */
static void
runbench_cmds_add(struct runbench_cmds *m, const char *info)
{
    const char *p, *colon;
    size_t len, k;
    long long calls;

    for (p = strstr(info, "cmdstat_"); p != NULL; p = strstr(p + 1, "\ncmdstat_")) {
        if (*p == '\n') {
            p++;
        }
        p += strlen("cmdstat_");
        colon = strchr(p, ':');
        if (colon == NULL || strncmp(colon, ":calls=", 7) != 0
            || (len = (size_t)(colon - p)) >= RUNBENCH_CMD_NAME) {
            continue;
        }
        calls = strtoll(colon + 7, NULL, 10);
        for (k = 0; k < m->n; k++) {
            if (strlen(m->cmd[k].name) == len && strncmp(m->cmd[k].name, p, len) == 0) {
                break;
            }
        }
        if (k == m->n) {
            if (m->n == RUNBENCH_CMDS_MAX) {
                continue;
            }
            memcpy(m->cmd[k].name, p, len);
            m->cmd[k].name[len] = '\0';
            m->cmd[k].calls = 0;
            m->n++;
        }
        m->cmd[k].calls += calls;
    }
}

/* The masters' calls by command (INFO commandstats of each), summed. */
static void
runbench_cmds_sample(struct runbench_cmds *m)
{
    redisContext *rc;
    redisReply *r;
    size_t i;

    memset(m, 0, sizeof(*m));
    if (runbench_masters_tls) {
        return;
    }
    for (i = 0; i < RUNBENCH_MASTERS; i++) {
        rc = h_master_redis(i);
        r = rc != NULL ? redisCommand(rc, "INFO commandstats") : NULL;
        if (r == NULL || r->type != REDIS_REPLY_STRING) {
            if (r != NULL) {
                freeReplyObject(r);
            }
            if (rc != NULL) {
                redisFree(rc);
            }
            return;
        }
        runbench_cmds_add(m, r->str);
        freeReplyObject(r);
        redisFree(rc);
    }
    m->ok = true;
}

/* The calls of command name in m; 0 when absent. */
static long long
runbench_cmds_calls(const struct runbench_cmds *m, const char *name)
{
    size_t k;

    for (k = 0; k < m->n; k++) {
        if (strcmp(m->cmd[k].name, name) == 0) {
            return m->cmd[k].calls;
        }
    }
    return 0;
}

/* d = after - before, by command (the commands of after). */
static void
runbench_cmds_delta(struct runbench_cmds *d, const struct runbench_cmds *before,
                    const struct runbench_cmds *after)
{
    size_t k;

    memset(d, 0, sizeof(*d));
    if (!before->ok || !after->ok) {
        return;
    }
    for (k = 0; k < after->n; k++) {
        d->cmd[d->n] = after->cmd[k];
        d->cmd[d->n].calls -= runbench_cmds_calls(before, after->cmd[k].name);
        if (d->cmd[d->n].calls > 0) {
            d->n++;
        }
    }
    d->ok = true;
}

/* True when the row talks to the daemon (its CPU per pair is measured). */
static bool
runbench_on_daemon(const struct runbench_run *r)
{
    if (strcmp(r->mode, "peer") == 0) {
        return strcmp(r->client, "redlockd") == 0;
    }
    return strcmp(r->mode, "rtt") != 0 && strcmp(r->mode, "direct") != 0;
}

/*
 * Run argv (redlock-bench or peer.js) to its end, its output in
 * <test dir>/bench-<label>.out, and read its JSON line into r; for a
 * row against the daemon, the daemon's CPU time just before and just
 * after the run gives cpu_us.
 */
static void
runbench_exec(struct runbench_run *r, const char *const argv[])
{
    char out[4096];
    long long cpu0 = -1, cpu1 = -1;
    struct runbench_masters m0, m1;
    struct runbench_cmds k0, k1;
    struct rusage ru;
    pid_t pid, dpid = runbench_on_daemon(r) ? h_daemon_pid() : 0;
    int status = 0, code;

    snprintf(out, sizeof(out), "%s/bench-%s.out", h_dir(), r->label);
    if (r->by_cmd) {
        /* Outside m0..m1, so that its INFOs do not count in m_cmds. */
        runbench_cmds_sample(&k0);
    }
    runbench_masters_sample(&m0);
    if (dpid > 0) {
        cpu0 = runbench_cpu_ns(dpid);
    }
    pid = h_spawn(argv, out);
    if (pid < 0) {
        return;
    }
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "run_bench: wait4: %s\n", strerror(errno));
            return;
        }
    }
    if (dpid > 0) {
        cpu1 = runbench_cpu_ns(dpid);
    }
    runbench_masters_sample(&m1);
    if (r->by_cmd) {
        runbench_cmds_sample(&k1);
        runbench_cmds_delta(&r->cmds, &k0, &k1);
    }
    code = h_decode_status(status);
    r->ok = runbench_read_json(out, r->json, sizeof(r->json));
    if (code != 0 || !r->ok) {
        fprintf(stderr, "run_bench: %s: %s exited with %d%s\n", r->label, argv[0], code,
                r->ok ? "" : " and printed no result");
        r->ok = false;
        return;
    }
    printf("%s\n", r->json);
    r->pairs = runbench_field(r->json, "pairs");
    r->pps = runbench_field(r->json, "pairs_per_s");
    r->p50 = runbench_field(r->json, "p50_us");
    r->p90 = runbench_field(r->json, "p90_us");
    r->p99 = runbench_field(r->json, "p99_us");
    r->max = runbench_field(r->json, "max_us");
    r->errors = runbench_field(r->json, "errors");
    r->min_acq = runbench_field(r->json, "min_acq");
    r->max_acq = runbench_field(r->json, "max_acq");
    r->rel_p50 = runbench_field(r->json, "rel_p50_us");
    r->limit = runbench_field(r->json, "limit");
    r->max_holders = runbench_field(r->json, strcmp(r->mode, "shared") == 0 ? "max_readers"
                                                                           : "max_holders");
    r->clashes = runbench_field(r->json, "clashes");
    r->mixed = runbench_field(r->json, "mixed");
    r->w_pairs = runbench_field(r->json, "writer_pairs");
    r->w_pps = runbench_field(r->json, "writer_pairs_per_s");
    r->w_p50 = runbench_field(r->json, "writer_p50_us");
    r->w_p90 = runbench_field(r->json, "writer_p90_us");
    r->w_p99 = runbench_field(r->json, "writer_p99_us");
    r->w_max = runbench_field(r->json, "writer_max_us");
    r->w_acq = runbench_field(r->json, "writer_acq");
    if (cpu0 >= 0 && cpu1 >= cpu0 && r->pairs > 0) {
        r->cpu_us = (double)(cpu1 - cpu0) / 1000.0 / r->pairs;
        r->cpu_ok = true;
    }
    if (m0.ok && m1.ok && r->pairs > 0) {
        r->m_cmds = (double)(m1.cmds - m0.cmds) / RUNBENCH_MASTERS / r->pairs;
        r->m_scripts = (double)(m1.scripts - m0.scripts) / RUNBENCH_MASTERS / r->pairs;
        r->m_cpu_us = (double)(m1.cpu_us - m0.cpu_us) / r->pairs;
        r->m_ok = true;
    }
    if (r->pairs > 0) {
        r->c_cpu_us = ((double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec
                       + (double)ru.ru_stime.tv_sec * 1e6 + (double)ru.ru_stime.tv_usec)
                      / r->pairs;
        r->c_ok = true;
    }
}

/* One row of redlock-bench. */
static void
runbench_one(struct runbench_run *r, const char *bin, const char *seconds,
             const char *target, const char *masters, const char *tls_ca)
{
    char conns[16];
    const char *argv[24];
    size_t n = 0, i;

    snprintf(conns, sizeof(conns), "%d", r->conns);
    argv[n++] = bin;
    argv[n++] = "--mode";
    argv[n++] = r->mode;
    argv[n++] = "--connections";
    argv[n++] = conns;
    argv[n++] = "--duration";
    argv[n++] = seconds;
    argv[n++] = "--target";
    argv[n++] = target;
    if (masters != NULL) {
        argv[n++] = "--masters";
        argv[n++] = masters;
    }
    for (i = 0; r->extra[i] != NULL; i++) {
        argv[n++] = r->extra[i];
    }
    if (tls_ca != NULL) {
        argv[n++] = "--tls-ca";
        argv[n++] = tls_ca;
    }
    argv[n] = NULL;
    fprintf(stderr, "run_bench: %s (%s s)\n", r->label, seconds);
    runbench_exec(r, argv);
}

/*
 * One peer row: node peer.js --client ... against the daemon (target)
 * or the masters, its packages under modules.
 */
static void
runbench_peer_one(struct runbench_run *r, const char *seconds, const char *target,
                  const char *masters, const char *modules)
{
    char workers[16];
    const char *argv[24];
    size_t n = 0;

    snprintf(workers, sizeof(workers), "%d", r->conns);
    argv[n++] = "node";
    argv[n++] = RUNBENCH_PEER_DIR "/peer.js";
    argv[n++] = "--client";
    argv[n++] = r->client;
    argv[n++] = "--workers";
    argv[n++] = workers;
    argv[n++] = "--seconds";
    argv[n++] = seconds;
    if (r->shape != NULL) {
        argv[n++] = "--shape";
        argv[n++] = r->shape;
    }
    if (r->peer_limit != NULL) {
        argv[n++] = "--limit";
        argv[n++] = r->peer_limit;
    }
    if (r->retry_ms != NULL) {
        argv[n++] = "--retry-ms";
        argv[n++] = r->retry_ms;
        argv[n++] = "--jitter-ms";
        argv[n++] = r->retry_ms;
    }
    if (strcmp(r->client, "redlockd") == 0) {
        argv[n++] = "--target";
        argv[n++] = target;
    } else {
        argv[n++] = "--masters";
        argv[n++] = masters;
        argv[n++] = "--modules";
        argv[n++] = modules;
    }
    argv[n] = NULL;
    fprintf(stderr, "run_bench: %s (%s s)\n", r->label, seconds);
    runbench_exec(r, argv);
}

/*
 * The sanity checks of the counted and shared rows, from the clients'
 * side (redlock_bench.c, "Holders seen by the clients"): a counted row
 * never saw more holders at once than its limit, nor two holders of one
 * permit; the shared row never saw the writer hold with anyone else, and
 * its writer was granted at least once (it did not starve).  True when
 * the run (if any) passes; a failure is printed.
 */
static bool
runbench_sane(const struct runbench_run *r, bool say)
{
    if (!r->ok) {
        return true;    /* failed already, for another reason */
    }
    if (strcmp(r->mode, "counted") == 0
        && (r->max_holders < 0 || r->max_holders > r->limit || r->clashes != 0)) {
        if (!say) {
            return false;
        }
        fprintf(stderr, "run_bench: %s: %.0f holders seen at once (limit %.0f), %.0f permit "
                "clashes\n", r->label, r->max_holders, r->limit, r->clashes);
        return false;
    }
    if (strcmp(r->mode, "pairs") == 0 && r->clashes != 0) {
        if (!say) {
            return false;
        }
        fprintf(stderr, "run_bench: %s: %.0f grants of a name another connection held\n",
                r->label, r->clashes);
        return false;
    }
    if (strcmp(r->mode, "shared") == 0 && (r->mixed != 0 || r->w_acq <= 0)) {
        if (!say) {
            return false;
        }
        fprintf(stderr, "run_bench: %s: %.0f grants mixed the writer with another holder; "
                "the writer was granted %.0f times\n", r->label, r->mixed, r->w_acq);
        return false;
    }
    return true;
}

/* ---- resource rows: locks held by a fresh daemon ---- */

/* One hold run against a fresh daemon, and what it measured. */
struct runbench_hold {
    const char *label;                  /* row label */
    const char *mode;                   /* --mode: hold or lease-hold */
    long        locks;                  /* locks asked for */
    long        conns;                  /* --connections */
    long        ttl_ms;                 /* --ttl */
    bool        cpu;                    /* also measure the renewal CPU while held */
    bool        ran;                    /* a result line was read */
    bool        ok;                     /* every lock held, no error, no LOST */
    bool        cpu_good;               /* cpu: renewals happened, none failed */
    char        json[RUNBENCH_LINE_MAX]; /* the result line */
    double      held;                   /* "held": locks granted */
    double      errors;                 /* "errors" */
    double      lost;                   /* "lost" */
    double      grant_s;                /* "grant_seconds" */
    long long   rss_base_kib;           /* daemon VmRSS before the run; -1 unknown */
    long long   rss_kib;                /* daemon VmRSS with every lock held; -1 unknown */
    bool        cpu_ok;                 /* the CPU window was measured */
    double      cpu_pct;                /* daemon CPU over the window, % of one core */
    double      window_s;               /* the window, wall clock */
    long long   renew_ok;               /* renewals_ok growth over the window */
    long long   renew_failed;           /* renewals_failed growth over the window */
    long        limit;                  /* hold: permits of counted names of this limit
                                           (0: exclusive locks) */
    long        names;                  /* hold with limit: that many names */
    bool        release_ok;             /* hold: the release was measured */
    double      release_s;              /* hold: from SIGTERM to STATS locks_held 0 */
    long long   release_failed;         /* hold: renewals_failed growth over the release */
    bool        unix_only;              /* over the Unix socket whatever BENCH_UNIX says */
};

static int64_t runbench_settle_ms = RUNBENCH_RELEASE_SETTLE_MS;
static bool    runbench_smoke;          /* --smoke */
static bool    runbench_peers_ran;      /* the peer rows ran (their packages were there) */
static char    runbench_peer_skip[5200]; /* why they did not */

static struct runbench_hold runbench_session = {
    .label = "memory-session", .mode = "hold", .locks = RUNBENCH_SESSION_LOCKS,
    .conns = RUNBENCH_SESSION_LOCKS, .ttl_ms = RUNBENCH_SESSION_TTL_MS, .cpu = true,
    .rss_base_kib = -1, .rss_kib = -1
};
static struct runbench_hold runbench_counted = {
    .label = "memory-counted", .mode = "hold", .locks = RUNBENCH_COUNTED_LOCKS,
    .conns = RUNBENCH_COUNTED_LOCKS, .ttl_ms = RUNBENCH_SESSION_TTL_MS,
    .limit = RUNBENCH_COUNTED_LIMIT, .names = RUNBENCH_COUNTED_NAMES,
    .rss_base_kib = -1, .rss_kib = -1
};
/*
 * As many sessions, each holding a lock, as the descriptor limit allows
 * (set in main: the soft RLIMIT_NOFILE, raised to the hard one, less
 * RUNBENCH_FDS_SPARE), over the Unix socket: loopback TCP from one
 * address runs out of ephemeral ports near 28,000.
 */
static struct runbench_hold runbench_session_max = {
    .label = "sessions-max", .mode = "hold", .ttl_ms = RUNBENCH_SESSION_TTL_MS, .cpu = true,
    .unix_only = true, .rss_base_kib = -1, .rss_kib = -1
};
static struct runbench_hold runbench_lease = {
    .label = "memory-lease", .mode = "lease-hold", .locks = RUNBENCH_LEASE_LOCKS,
    .conns = RUNBENCH_LEASE_CONNS, .ttl_ms = RUNBENCH_LEASE_TTL_MS,
    .rss_base_kib = -1, .rss_kib = -1
};

/* A hold run being waited for (h_wait_until conditions). */
struct runbench_child {
    pid_t       pid;                    /* the redlock-bench process */
    const char *out;                    /* its stdout and stderr */
    bool        exited;                 /* reaped */
    int         status;                 /* its wait status, once reaped */
};

/* VmRSS of process pid in KiB, from /proc/<pid>/status; -1 when unknown. */
static long long
runbench_rss_kib(pid_t pid)
{
    char path[64], line[256];
    long long kib = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "run_bench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "VmRSS: %lld kB", &kib) == 1) {
            break;
        }
    }
    fclose(f);
    return kib;
}

/* True when out_path has a line that starts with prefix. */
static bool
runbench_file_has(const char *out_path, const char *prefix)
{
    char line[RUNBENCH_LINE_MAX];
    bool found = false;
    FILE *f = fopen(out_path, "r");

    if (f == NULL) {
        return false;
    }
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        found = strncmp(line, prefix, strlen(prefix)) == 0;
    }
    fclose(f);
    return found;
}

/* Reap the child when it has exited; true then. */
static bool
runbench_reaped(void *arg)
{
    struct runbench_child *c = arg;

    if (!c->exited && waitpid(c->pid, &c->status, WNOHANG) == c->pid) {
        c->exited = true;
    }
    return c->exited;
}

/* The child said every LOCK was answered, or it exited. */
static bool
runbench_held_or_gone(void *arg)
{
    struct runbench_child *c = arg;

    return runbench_file_has(c->out, "{\"event\":\"held\"") || runbench_reaped(c);
}

/* End the child: SIGTERM (it prints its result and exits), SIGKILL after a deadline. */
static void
runbench_child_end(struct runbench_child *c)
{
    if (runbench_reaped(c)) {
        return;
    }
    kill(c->pid, SIGTERM);
    if (h_wait_until(runbench_reaped, c, RUNBENCH_EXIT_MS)) {
        return;
    }
    fprintf(stderr, "run_bench: redlock-bench ignored SIGTERM for %d ms; SIGKILL\n",
            RUNBENCH_EXIT_MS);
    kill(c->pid, SIGKILL);
    while (waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR) {
    }
    c->exited = true;
}

/* The daemon's target address, as the standard rows use it. */
static void
runbench_target(char *target, size_t size, bool use_unix)
{
    if (use_unix) {
        snprintf(target, size, "%s", h_daemon_unix_path());
    } else {
        snprintf(target, size, "127.0.0.1:%d", h_daemon_port());
    }
}

/*
 * Renewal CPU: daemon CPU and STATS renewals over window_ms, while the
 * session locks are held.
 */
static void
runbench_hold_cpu(struct runbench_hold *h, pid_t dpid, int64_t window_ms)
{
    long long ok0, ok1, bad0, bad1, t0, t1;
    int64_t w0, w1;

    if (h_stat_once("renewals_ok", &ok0) != 0 || h_stat_once("renewals_failed", &bad0) != 0) {
        fprintf(stderr, "run_bench: %s: STATS failed before the CPU window\n", h->label);
        return;
    }
    t0 = runbench_cpu_ns(dpid);
    w0 = h_now_ms();
    h_sleep_ms(window_ms);      /* the measured window itself */
    t1 = runbench_cpu_ns(dpid);
    w1 = h_now_ms();
    if (h_stat_once("renewals_ok", &ok1) != 0 || h_stat_once("renewals_failed", &bad1) != 0) {
        fprintf(stderr, "run_bench: %s: STATS failed after the CPU window\n", h->label);
        return;
    }
    if (t0 < 0 || t1 < 0 || w1 <= w0) {
        return;
    }
    h->window_s = (double)(w1 - w0) / 1000.0;
    h->cpu_pct = (double)(t1 - t0) / 1e9 / h->window_s * 100.0;
    h->renew_ok = ok1 - ok0;
    h->renew_failed = bad1 - bad0;
    h->cpu_ok = true;
}

/*
 * One resource row: stop the current daemon, start a fresh one, run
 * redlock-bench in hold mode h->mode, measure the daemon's RSS (and,
 * h->cpu, the renewal CPU over window_ms) while every lock is held,
 * then end the run and read its result line.  Returns false when the
 * run failed (the reason is printed).
 */
static bool
runbench_hold_one(struct runbench_hold *h, const char *bin, bool use_unix, int64_t window_ms)
{
    struct h_daemon_opts o;
    struct runbench_child child;
    char conns[24], locks[24], ttl[24], dur[32], limit[24], names[24], target[4096], out[4096];
    const char *argv[24];
    int64_t held_ms = RUNBENCH_HELD_MS + h->locks / 1000 * RUNBENCH_HELD_MS_PER_K;
    size_t n = 0;
    bool held;
    pid_t dpid;
    int code;
    long long failed0 = -1, failed1 = -1;
    int64_t term_ms = 0;

    fprintf(stderr, "run_bench: %s (%ld locks, fresh daemon)\n", h->label, h->locks);
    if (h_daemon_pid() > 0) {
        (void)h_stop_daemon();
    }
    memset(&o, 0, sizeof(o));
    o.log_level = "warn";
    o.max_clients = h->conns + RUNBENCH_CLIENTS_SPARE;
    if (h->ttl_ms > RUNBENCH_SESSION_TTL_MS) {
        o.max_ttl_ms = h->ttl_ms;   /* lease ttl allowed, whatever the default */
    }
    if (h_start_daemon(&o) != 0) {
        fprintf(stderr, "run_bench: %s: could not start a fresh daemon\n", h->label);
        return false;
    }
    dpid = h_daemon_pid();
    runbench_target(target, sizeof(target), use_unix || h->unix_only);
    h->rss_base_kib = runbench_rss_kib(dpid);

    snprintf(conns, sizeof(conns), "%ld", h->conns);
    snprintf(locks, sizeof(locks), "%ld", h->locks);
    snprintf(ttl, sizeof(ttl), "%ld", h->ttl_ms);
    /* The hold ends with SIGTERM; the duration is only a backstop. */
    snprintf(dur, sizeof(dur), "%lld",
             (long long)(window_ms / 1000 + 1 + RUNBENCH_HOLD_SPARE_S));
    snprintf(out, sizeof(out), "%s/bench-%s.out", h_dir(), h->label);
    argv[n++] = bin;
    argv[n++] = "--mode";
    argv[n++] = h->mode;
    argv[n++] = "--connections";
    argv[n++] = conns;
    if (strcmp(h->mode, "lease-hold") == 0) {
        argv[n++] = "--locks";
        argv[n++] = locks;
    }
    if (h->limit > 0) {
        snprintf(limit, sizeof(limit), "%ld", h->limit);
        snprintf(names, sizeof(names), "%ld", h->names);
        argv[n++] = "--limit";
        argv[n++] = limit;
        argv[n++] = "--names";
        argv[n++] = names;
    }
    argv[n++] = "--ttl";
    argv[n++] = ttl;
    argv[n++] = "--duration";
    argv[n++] = dur;
    argv[n++] = "--target";
    argv[n++] = target;
    argv[n] = NULL;
    memset(&child, 0, sizeof(child));
    child.out = out;
    child.pid = h_spawn(argv, out);
    if (child.pid < 0) {
        return false;
    }
    held = h_wait_until(runbench_held_or_gone, &child, held_ms)
           && runbench_file_has(out, "{\"event\":\"held\"");
    if (held) {
        h->rss_kib = runbench_rss_kib(dpid);
        if (h->cpu) {
            runbench_hold_cpu(h, dpid, window_ms);
        }
    } else {
        fprintf(stderr, "run_bench: %s: no \"held\" line from redlock-bench %s\n", h->label,
                child.exited ? "before it exited" : "in time");
    }
    if (strcmp(h->mode, "hold") == 0 && h_stat_once("renewals_failed", &failed0) != 0) {
        failed0 = -1;
    }
    term_ms = h_now_ms();
    runbench_child_end(&child);
    code = h_decode_status(child.status);
    h->ran = runbench_read_json(out, h->json, sizeof(h->json));
    if (code != 0 || !h->ran) {
        fprintf(stderr, "run_bench: %s: redlock-bench exited with %d%s\n", h->label, code,
                h->ran ? "" : " and printed no result");
        h->ran = false;
        return false;
    }
    printf("%s\n", h->json);
    h->held = runbench_field(h->json, "held");
    h->errors = runbench_field(h->json, "errors");
    h->lost = runbench_field(h->json, "lost");
    h->grant_s = runbench_field(h->json, "grant_seconds");
    h->ok = held && h->held == (double)h->locks && h->errors == 0 && h->lost == 0;
    if (!h->ok) {
        fprintf(stderr, "run_bench: %s: held %.0f of %ld, errors %.0f, lost %.0f\n", h->label,
                h->held, h->locks, h->errors, h->lost);
    }
    h->cpu_good = h->cpu_ok && h->renew_failed == 0 && h->renew_ok > 0;
    if (h->cpu && !h->cpu_good) {
        fprintf(stderr, "run_bench: %s: renewal window: %s\n", h->label,
                !h->cpu_ok ? "not measured" : h->renew_failed != 0 ? "renewals failed"
                                                                  : "no renewal");
    }
    /* Closed connections release the session locks: wait for that. */
    if (strcmp(h->mode, "hold") == 0
        && !h_wait_stat("locks_held", 0, false, RUNBENCH_RELEASE_MS, NULL)) {
        fprintf(stderr, "run_bench: %s: locks_held did not drop to 0 within %d ms\n",
                h->label, RUNBENCH_RELEASE_MS);
        h->ok = false;
    } else if (strcmp(h->mode, "hold") == 0) {
        /*
         * The release: SIGTERM to locks_held 0, and the renewals that
         * failed meanwhile (of the locks whose sessions were still
         * closing), counted once the rounds in flight had their round
         * deadline to end.  Reported, not judged.
         */
        h->release_s = (double)(h_now_ms() - term_ms) / 1000.0;
        h_sleep_ms(runbench_settle_ms);
        if (failed0 >= 0 && h_stat_once("renewals_failed", &failed1) == 0) {
            h->release_failed = failed1 - failed0;
            h->release_ok = true;
        }
    }
    return h->ok && (!h->cpu || h->cpu_good);
}

/* One target row: value, target ("<=", "<" or ">=" target), and whether it is met. */
static void
runbench_goal(const char *what, bool have, double v, const char *op, double target)
{
    bool met = strcmp(op, "<=") == 0 ? v <= target : strcmp(op, "<") == 0 ? v < target
                                                                           : v >= target;

    if (!have) {
        printf("  %-44s %10s   %-2s %-6g %s\n", what, "n/a", op, target, "no data");
        return;
    }
    printf("  %-44s %10.2f   %-2s %-6g %s\n", what, v, op, target, met ? "met" : "MISSED");
}

/* One ratio row: num / den against its target. */
static void
runbench_ratio(const char *what, bool have, double num, double den, bool at_most,
               double target)
{
    runbench_goal(what, have && den > 0, den > 0 ? num / den : 0, at_most ? "<=" : ">=",
                  target);
}

/* ---- list-cpu: LIST's daemon CPU per step with a table of each size ---- */

/* One list-cpu row: a fresh daemon holding names, LISTed by one client. */
struct runbench_list {
    long        names;                  /* names held */
    bool        ok;                     /* held them all, and every LIST listed them all */
    double      grant_s;                /* names-hold's "grant_seconds" */
    double      lists;                  /* LISTs read to END */
    double      lines;                  /* their lines */
    long long   steps;                  /* STATS list_steps over the run */
    double      cpu_s;                  /* the daemon's CPU over the run, s */
    double      us_per_step;            /* cpu over steps, us */
};

static struct runbench_list runbench_lists[RUNBENCH_LIST_ROWS] = {
    { .names = 1000 }, { .names = 10000 }, { .names = 100000 }
};

/*
 * One list-cpu row: a fresh daemon, redlock-bench --mode names-hold
 * holding r->names names, then redlock-bench --mode list for seconds
 * with the daemon's CPU and STATS list_steps read around it; then the
 * holder ends and the daemon releases the names.  False when it failed.
 */
static bool
runbench_list_one(struct runbench_list *r, const char *bin, bool use_unix, const char *seconds)
{
    struct h_daemon_opts o;
    struct runbench_child child;
    char conns[24], locks[24], ttl[24], dur[32], target[4096], out[4096], lout[4096];
    char json[RUNBENCH_LINE_MAX];
    const char *argv[24];
    int64_t held_ms = RUNBENCH_HELD_MS + r->names / 1000 * RUNBENCH_HELD_MS_PER_K;
    long long s0 = -1, s1 = -1, cpu0, cpu1;
    size_t n = 0;
    pid_t dpid, pid;
    int status = 0;
    bool held;

    fprintf(stderr, "run_bench: list-cpu (%ld names, fresh daemon)\n", r->names);
    if (h_daemon_pid() > 0) {
        (void)h_stop_daemon();
    }
    memset(&o, 0, sizeof(o));
    o.log_level = "warn";
    o.max_ttl_ms = RUNBENCH_LIST_TTL_MS;
    o.max_locks_per_client = r->names / RUNBENCH_LIST_CONNS + 1024;
    if (h_start_daemon(&o) != 0) {
        fprintf(stderr, "run_bench: list-cpu: could not start a fresh daemon\n");
        return false;
    }
    dpid = h_daemon_pid();
    runbench_target(target, sizeof(target), use_unix);
    snprintf(conns, sizeof(conns), "%d", RUNBENCH_LIST_CONNS);
    snprintf(locks, sizeof(locks), "%ld", r->names);
    snprintf(ttl, sizeof(ttl), "%d", RUNBENCH_LIST_TTL_MS);
    snprintf(dur, sizeof(dur), "%d", RUNBENCH_HOLD_SPARE_S);     /* ended by SIGTERM */
    snprintf(out, sizeof(out), "%s/bench-list-%ld-hold.out", h_dir(), r->names);
    snprintf(lout, sizeof(lout), "%s/bench-list-%ld.out", h_dir(), r->names);
    argv[n++] = bin;
    argv[n++] = "--mode";
    argv[n++] = "names-hold";
    argv[n++] = "--connections";
    argv[n++] = conns;
    argv[n++] = "--locks";
    argv[n++] = locks;
    argv[n++] = "--ttl";
    argv[n++] = ttl;
    argv[n++] = "--duration";
    argv[n++] = dur;
    argv[n++] = "--target";
    argv[n++] = target;
    argv[n] = NULL;
    memset(&child, 0, sizeof(child));
    child.out = out;
    child.pid = h_spawn(argv, out);
    if (child.pid < 0) {
        return false;
    }
    held = h_wait_until(runbench_held_or_gone, &child, held_ms)
           && runbench_file_has(out, "{\"event\":\"held\"");
    if (held) {
        n = 0;
        argv[n++] = bin;
        argv[n++] = "--mode";
        argv[n++] = "list";
        argv[n++] = "--duration";
        argv[n++] = seconds;
        argv[n++] = "--target";
        argv[n++] = target;
        argv[n] = NULL;
        (void)h_stat_once("list_steps", &s0);
        cpu0 = runbench_cpu_ns(dpid);
        pid = h_spawn(argv, lout);
        while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        cpu1 = runbench_cpu_ns(dpid);
        (void)h_stat_once("list_steps", &s1);
        if (pid > 0 && h_decode_status(status) == 0
            && runbench_read_json(lout, json, sizeof(json))) {
            printf("%s\n", json);
            r->lists = runbench_field(json, "lists");
            r->lines = runbench_field(json, "lines");
            r->steps = s0 >= 0 && s1 >= s0 ? s1 - s0 : 0;
            r->cpu_s = cpu0 >= 0 && cpu1 >= cpu0 ? (double)(cpu1 - cpu0) / 1e9 : 0;
            r->us_per_step = r->steps > 0 ? r->cpu_s * 1e6 / (double)r->steps : 0;
            r->ok = r->lists > 0 && r->steps > 0 && r->cpu_s > 0
                    && runbench_field(json, "errors") == 0
                    && runbench_field(json, "names_min") == (double)r->names
                    && runbench_field(json, "names_max") == (double)r->names;
        }
        if (!r->ok) {
            fprintf(stderr, "run_bench: list-cpu %ld: the LIST run failed or listed other "
                    "than %ld names (%s)\n", r->names, r->names, lout);
        }
    } else {
        fprintf(stderr, "run_bench: list-cpu %ld: no \"held\" line from redlock-bench %s\n",
                r->names, child.exited ? "before it exited" : "in time");
    }
    runbench_child_end(&child);
    if (!runbench_read_json(out, json, sizeof(json))
        || runbench_field(json, "held") != (double)r->names
        || runbench_field(json, "errors") != 0) {
        fprintf(stderr, "run_bench: list-cpu %ld: the names were not all held to the end\n",
                r->names);
        r->ok = false;
    }
    r->grant_s = runbench_field(json, "grant_seconds");
    if (!h_wait_stat("locks_held", 0, false, RUNBENCH_RELEASE_MS + r->names / 1000 * 300,
                     NULL)) {
        fprintf(stderr, "run_bench: list-cpu %ld: locks_held did not drop to 0\n", r->names);
        r->ok = false;
    }
    return r->ok;
}

/* The list-cpu table. */
static void
runbench_list_table(const char *seconds)
{
    const struct runbench_list *r;
    size_t i;

    printf("\nLIST: the daemon's CPU per step of up to 1,024 names (a fresh daemon each, the "
           "names held\nin session mode over %d connections; one client LISTing for %s s; "
           "steps: STATS list_steps)\n", RUNBENCH_LIST_CONNS,
           runbench_smoke ? RUNBENCH_SMOKE_LIST_S : seconds);
    printf("  %-10s %8s %8s %9s %11s %10s %9s\n", "names held", "grant s", "lists", "steps",
           "names/step", "daemon s", "us/step");
    for (i = 0; i < RUNBENCH_LIST_ROWS; i++) {
        r = &runbench_lists[i];
        if (!r->ok) {
            printf("  %10ld %8s\n", r->names, "(failed)");
            continue;
        }
        printf("  %10ld %8.2f %8.0f %9lld %11.0f %10.2f %9.1f\n", r->names, r->grant_s,
               r->lists, r->steps, r->lines / (double)r->steps, r->cpu_s, r->us_per_step);
    }
}

/* The list-cpu target: CPU per step flat from 1k to 100k names. */
static void
runbench_list_target(void)
{
    const struct runbench_list *lo = &runbench_lists[0];
    const struct runbench_list *hi = &runbench_lists[RUNBENCH_LIST_ROWS - 1];
    char what[96];

    snprintf(what, sizeof(what), "LIST CPU per step, %ldk / %ldk names held",
             hi->names / 1000, lo->names / 1000);
    runbench_ratio(what, lo->ok && hi->ok, hi->us_per_step, lo->us_per_step, true,
                   RUNBENCH_LIST_RATIO);
}

/* Every list-cpu row (scaled down in --smoke); false when one failed. */
static bool
runbench_list_rows(const char *bin, bool use_unix, const char *seconds)
{
    static const long smoke_names[RUNBENCH_LIST_ROWS] = { 100, 1000, 5000 };
    bool good = true;
    size_t i;

    for (i = 0; i < RUNBENCH_LIST_ROWS; i++) {
        if (runbench_smoke) {
            runbench_lists[i].names = smoke_names[i];
        }
        if (!runbench_list_one(&runbench_lists[i], bin, use_unix,
                               runbench_smoke ? RUNBENCH_SMOKE_LIST_S : seconds)) {
            h_print_daemon_log_tail(20);
            good = false;
        }
    }
    return good;
}

static double
runbench_mib(long long kib)
{
    return (double)kib / 1024.0;
}

/* (RSS with the locks - RSS before) / locks held, in bytes; -1 when unknown. */
static double
runbench_per_lock(const struct runbench_hold *h)
{
    if (!h->ran || h->rss_kib < 0 || h->rss_base_kib < 0 || h->held <= 0) {
        return -1;
    }
    return (double)(h->rss_kib - h->rss_base_kib) * 1024.0 / h->held;
}

static void
runbench_hold_row(const struct runbench_hold *h)
{
    if (!h->ran) {
        printf("  %-16s %7ld %6ld %10s\n", h->label, h->locks, h->conns, "(failed)");
        return;
    }
    printf("  %-16s %7ld %6ld %8.2f %8.0f %7.0f %8.1f %8.1f %10.0f%s\n", h->label, h->locks,
           h->conns, h->grant_s, h->held, h->errors,
           runbench_mib(h->rss_base_kib), runbench_mib(h->rss_kib), runbench_per_lock(h),
           h->ok ? "" : "   FAILED");
}

/* The release line of a hold row. */
static void
runbench_release_row(const struct runbench_hold *h)
{
    if (!h->release_ok) {
        printf("  %-16s %s\n", h->label, "not measured");
        return;
    }
    printf("  %-16s %7ld locks%s: %.2f s, %lld renewals failed\n", h->label, h->locks,
           h->limit > 0 ? " (permits)" : "", h->release_s, h->release_failed);
}

/* One grant-cost row, and its ratios to the limit=1 row (base). */
static void
runbench_grant_row(const struct runbench_run *r, const struct runbench_run *base)
{
    if (!r->ok) {
        printf("  %-16s %10s\n", r->label, "(failed)");
        return;
    }
    printf("  %-16s %10.0f %8.0f %8.0f %8.0f", r->label, r->pps, r->p50, r->p99, r->rel_p50);
    if (base->ok && base->pps > 0 && base->p50 > 0 && base->rel_p50 > 0) {
        printf("   %8.2f %8.2f %8.2f", r->pps / base->pps, r->p50 / base->p50,
               r->rel_p50 / base->rel_p50);
    }
    printf("\n");
}

/* Fairness of a row: the fewest grants of a connection over the most (0 without grants). */
static double
runbench_fairness(const struct runbench_run *r)
{
    return r->max_acq > 0 ? r->min_acq / r->max_acq : 0;
}

/*
 * The counted and shared rows: what the clients saw held at once (the
 * checks runbench_sane applies), and the grant cost of a counted name
 * by its limit.
 */
static void
runbench_kinds_table(const struct runbench_run *c64, const struct runbench_run *sh)
{
    const struct runbench_run *g1 = &runbench_runs[RUNBENCH_GRANT1];

    printf("\ncounted and shared holds as the clients saw them (a holder: from its OK read to "
           "its\nUNLOCK sent; a lower bound of what the masters granted at once)\n");
    if (c64->ok) {
        printf("  %-16s limit %.0f: most holders at once %.0f (<= %.0f), permit clashes %.0f, "
               "fairness min/max %.2f   %s\n", c64->label, c64->limit, c64->max_holders,
               c64->limit, c64->clashes, runbench_fairness(c64),
               runbench_sane(c64, false) ? "ok" : "FAILED");
    } else {
        printf("  %-16s (failed)\n", c64->label);
    }
    if (sh->ok) {
        printf("  %-16s most readers at once %.0f, grants mixing the writer with another "
               "holder %.0f;\n  %-16s writer granted %.0f times (a reader %.0f..%.0f), "
               "fairness min/max %.2f   %s\n", sh->label, sh->max_holders, sh->mixed, "",
               sh->w_acq, sh->min_acq, sh->max_acq,
               runbench_fairness(sh),
               runbench_sane(sh, false) ? "ok" : "FAILED");
    } else {
        printf("  %-16s (failed)\n", sh->label);
    }
    printf("\ngrant cost on a counted name, one connection (us; grant-l1000-full: 999 of the "
           "1000\npermits held by lease-mode locks; ratios: the row / grant-l1)\n");
    printf("  %-16s %10s %8s %8s %8s   %8s %8s %8s\n", "run", "pairs/s", "acq p50", "acq p99",
           "rel p50", "pairs/s", "acq p50", "rel p50");
    runbench_grant_row(g1, g1);
    runbench_grant_row(&runbench_runs[RUNBENCH_GRANT1000], g1);
    runbench_grant_row(&runbench_runs[RUNBENCH_GRANTFULL], g1);
}

/* Calls of command name per pair per master in row r's breakdown; 0 when none. */
static double
runbench_cmd_per_pair(const struct runbench_run *r, const char *name)
{
    if (!r->ok || !r->cmds.ok || r->pairs <= 0) {
        return 0;
    }
    return (double)runbench_cmds_calls(&r->cmds, name) / RUNBENCH_MASTERS / r->pairs;
}

/*
 * The pairs rows side by side (the same random pairs of names, taken as
 * one set or as two single LOCKs), and what the masters ran per pair,
 * command by command, beside a single lock's pair (uncontended-64).
 */
static void
runbench_pairs_table(void)
{
    const struct runbench_run *rows[RUNBENCH_PAIRS_COLS] = {
        &runbench_runs[RUNBENCH_UNC64], &runbench_runs[RUNBENCH_PAIRS_OWN],
        &runbench_runs[RUNBENCH_PAIRS_SET], &runbench_runs[RUNBENCH_PAIRS_SINGLES]
    };
    const struct runbench_run *r;
    const char *name;
    double v[RUNBENCH_PAIRS_COLS], sum[RUNBENCH_PAIRS_COLS] = { 0, 0, 0, 0 };
    size_t i, j, k;
    bool seen, some;

    printf("\npairs of names: 50 connections, each on a random pair of 20 names; set: LOCK a b "
           "(the two\nin a random order), UNLOCK a b; singles: LOCK a, then LOCK b (byte order), "
           "then UNLOCK b\nand UNLOCK a pipelined; wait=10 s (a TIMEOUT: stuck); acquire: the "
           "first LOCK sent\nto the grant of both (us); pairs-64-own-set: 64 connections, each "
           "on two names of its own\n");
    printf("  %-18s %9s %8s %8s %8s %9s %7s %8s %10s\n", "run", "pairs/s", "acq p50", "acq p99",
           "rel p50", "fairness", "errors", "clashes", "most held");
    for (i = 0; i < RUNBENCH_PAIRS_COLS - 1; i++) {
        r = rows[(i + 1) % (RUNBENCH_PAIRS_COLS - 1) + 1];     /* set, singles, own */
        if (!r->ok) {
            printf("  %-18s %9s\n", r->label, "(failed)");
            continue;
        }
        printf("  %-18s %9.0f %8.0f %8.0f %8.0f %9.2f %7.0f %8.0f %10.0f   %s\n", r->label,
               r->pps, r->p50, r->p99, r->rel_p50, runbench_fairness(r), r->errors, r->clashes,
               runbench_field(r->json, "max_held"), runbench_sane(r, false) ? "ok" : "FAILED");
    }
    printf("\ncommands per pair per master, by command (INFO commandstats over the row; a pair "
           "of\nuncontended-64 is one single lock, of the set rows one set of two names, of\n"
           "pairs-50-singles two single locks; the last column: pairs-50-set - uncontended-64)\n");
    printf("  %-16s %15s %17s %13s %17s %13s\n", "command", "uncontended-64", "pairs-64-own-set",
           "pairs-50-set", "pairs-50-singles", "set - single");
    for (i = 0; i < RUNBENCH_PAIRS_COLS; i++) {
        for (k = 0; rows[i]->ok && k < rows[i]->cmds.n; k++) {
            name = rows[i]->cmds.cmd[k].name;
            seen = false;
            for (j = 0; j < i && !seen; j++) {
                seen = rows[j]->ok && runbench_cmds_calls(&rows[j]->cmds, name) > 0;
            }
            if (seen) {
                continue;   /* printed with an earlier row's commands */
            }
            some = false;
            for (j = 0; j < RUNBENCH_PAIRS_COLS; j++) {
                v[j] = runbench_cmd_per_pair(rows[j], name);
                sum[j] += v[j];
                some = some || v[j] >= 0.005;
            }
            if (some) {
                printf("  %-16s %15.2f %17.2f %13.2f %17.2f %+13.2f\n", name, v[0], v[1], v[2],
                       v[3], v[2] - v[0]);
            }
        }
    }
    printf("  %-16s %15.2f %17.2f %13.2f %17.2f %+13.2f\n", "all", sum[0], sum[1], sum[2],
           sum[3], sum[2] - sum[0]);
}

/* The targets of the pairs rows. */
static void
runbench_pairs_targets(void)
{
    const struct runbench_run *u64 = &runbench_runs[RUNBENCH_UNC64];
    const struct runbench_run *ps = &runbench_runs[RUNBENCH_PAIRS_SET];
    const struct runbench_run *pn = &runbench_runs[RUNBENCH_PAIRS_SINGLES];
    const struct runbench_run *po = &runbench_runs[RUNBENCH_PAIRS_OWN];

    runbench_ratio("pairs-50 pairs/s, set / singles", ps->ok && pn->ok, ps->pps, pn->pps, false,
                   RUNBENCH_PAIRS_PPS);
    if (ps->ok && pn->ok && pn->p99 > 0) {
        printf("  %-44s %10.2f   info (p50 %.2f)\n", "pairs-50 acquire p99, set / singles",
               ps->p99 / pn->p99, pn->p50 > 0 ? ps->p50 / pn->p50 : 0.0);
    } else {
        printf("  %-44s %10s   info\n", "pairs-50 acquire p99, set / singles", "n/a");
    }
    if (ps->ok && pn->ok) {
        printf("  %-44s %10.2f   info (singles: %.2f)\n", "pairs-50-set fairness min/max",
               runbench_fairness(ps), runbench_fairness(pn));
    } else {
        printf("  %-44s %10s   info\n", "pairs-50-set fairness min/max", "n/a");
    }
    runbench_goal("pairs-50-set errors (a TIMEOUT: stuck)", ps->ok, ps->errors, "<=", 0);
    runbench_goal("pairs-50-singles errors (a TIMEOUT: stuck)", pn->ok, pn->errors, "<=", 0);
    runbench_ratio("commands per set / per lock (uncontended-64)", ps->ok && ps->m_ok && u64->ok
                   && u64->m_ok, ps->m_cmds, u64->m_cmds, true, RUNBENCH_PAIRS_CMDS);
    if (ps->ok && ps->m_ok && u64->ok && u64->m_ok && u64->m_scripts > 0) {
        printf("  %-44s %10.2f   info (%.2f against %.2f a master)\n",
               "script calls per set / per lock", ps->m_scripts / u64->m_scripts,
               ps->m_scripts, u64->m_scripts);
    } else {
        printf("  %-44s %10s   info\n", "script calls per set / per lock", "n/a");
    }
    if (po->ok && po->m_ok && u64->ok && u64->m_ok && u64->m_cmds > 0) {
        printf("  %-44s %10.2f   info (both uncontended; scripts %.2f)\n",
               "commands per set / per lock, own names", po->m_cmds / u64->m_cmds,
               u64->m_scripts > 0 ? po->m_scripts / u64->m_scripts : 0.0);
    } else {
        printf("  %-44s %10s   info\n", "commands per set / per lock, own names", "n/a");
    }
    if (ps->ok && ps->m_ok && pn->ok && pn->m_ok && pn->m_cmds > 0) {
        printf("  %-44s %10.2f   info (scripts %.2f)\n", "commands per set / per 2 singles",
               ps->m_cmds / pn->m_cmds, pn->m_scripts > 0 ? ps->m_scripts / pn->m_scripts : 0.0);
    } else {
        printf("  %-44s %10s   info\n", "commands per set / per 2 singles", "n/a");
    }
}

/* The "cpu us/pair" cell: the daemon's CPU per pair, "-" for a row without the daemon. */
static void
runbench_cpu_cell(const struct runbench_run *r)
{
    if (r->cpu_ok) {
        printf(" %11.1f", r->cpu_us);
    } else {
        printf(" %11s", "-");
    }
}

/* The client of a peer row, as the peers table names it. */
static const char *
runbench_peer_client(const struct runbench_run *r)
{
    if (strcmp(r->client, "redlock") == 0) {
        return "node-redlock";
    }
    return r->client;
}

/*
 * The peers table: each pair of rows, redlockd over its protocol and the
 * library in process, both driven by peer.js.
 */
static void
runbench_peer_table(void)
{
    const struct runbench_run *r;
    size_t i;

    printf("\npeers: one Node.js program (tests/bench/peer/peer.js) on redlockd's protocol, or on "
           "a\nRedlock library in process over the same five masters (acquire latency, us)\n");
    if (!runbench_peers_ran) {
        printf("  skipped: %s\n", runbench_peer_skip);
        return;
    }
    printf("  %-22s %-16s %7s %8s %8s %8s %8s %6s %11s\n", "pair", "client", "workers",
           "pairs/s", "acq p50", "acq p99", "fairness", "errors", "cpu us/pair");
    for (i = 0; i < RUNBENCH_NPEERS; i++) {
        r = &runbench_peer_runs[i];
        printf("  %-22s %-16s %7d", i % 2 == 0 ? runbench_peer_pairs[i / 2] : "",
               runbench_peer_client(r), r->conns);
        if (!r->ok) {
            printf(" %8s\n", "(failed)");
            continue;
        }
        printf(" %8.0f %8.0f %8.0f %8.2f %6.0f", r->pps, r->p50, r->p99,
               runbench_fairness(r), r->errors);
        runbench_cpu_cell(r);
        printf("\n");
    }
}

/* One row of the standard table (two for a shared row: its readers and its writer). */
static void
runbench_row(const struct runbench_run *r)
{
    bool rw = strcmp(r->mode, "shared") == 0;
    char what[64];

    snprintf(what, sizeof(what), "%s%s", r->label, rw ? " r" : "");
    if (!r->ok) {
        printf("  %-18s %5d %10s\n", what, r->conns, "(failed)");
        return;
    }
    printf("  %-18s %5d %10.0f %8.0f %8.0f %8.0f %9.0f %7.0f", what, r->conns,
           r->pps, r->p50, r->p90, r->p99, r->max, r->errors);
    runbench_cpu_cell(r);
    if (r->min_acq >= 0) {
        printf(" %6.0f/%-6.0f", r->min_acq, r->max_acq);
    }
    printf("\n");
    if (rw) {
        /* The writer: its own pairs and latencies; errors and CPU are the run's, above. */
        snprintf(what, sizeof(what), "%s w", r->label);
        printf("  %-18s %5d %10.0f %8.0f %8.0f %8.0f %9.0f %7s %11s %6.0f\n", what, 1,
               r->w_pps, r->w_p50, r->w_p90, r->w_p99, r->w_max, "", "", r->w_acq);
    }
}

/* The idle daemon: what it costs the masters and itself when nobody asks anything. */
static struct {
    bool   ok;              /* measured */
    double seconds;         /* the window */
    double time_per_s;      /* TIME commands per second per master */
    double cmds_per_s;      /* all commands per second per master */
    double cpu_pct;         /* the daemon's CPU, % of one core */
} runbench_idle;

/*
 * Measure the idle daemon over ms: no client sends anything, the daemon
 * still keeps its masters' clock readings fresh (a TIME per master a
 * second when nothing else carried one) and pings them.
 */
static void
runbench_idle_measure(int64_t ms)
{
    long long t0 = 0, t1 = 0, cpu0, cpu1, v;
    struct runbench_masters m0, m1;
    pid_t dpid = h_daemon_pid();
    int64_t start;
    size_t i;

    for (i = 0; i < RUNBENCH_MASTERS; i++) {
        v = h_master_calls(i, "time");
        t0 += v > 0 ? v : 0;
    }
    runbench_masters_sample(&m0);
    cpu0 = runbench_cpu_ns(dpid);
    start = h_now_ms();
    h_sleep_ms(ms);
    cpu1 = runbench_cpu_ns(dpid);
    runbench_masters_sample(&m1);
    for (i = 0; i < RUNBENCH_MASTERS; i++) {
        v = h_master_calls(i, "time");
        t1 += v > 0 ? v : 0;
    }
    runbench_idle.seconds = (double)(h_now_ms() - start) / 1000.0;
    if (!m0.ok || !m1.ok || cpu0 < 0 || cpu1 < cpu0 || runbench_idle.seconds <= 0) {
        return;
    }
    runbench_idle.time_per_s = (double)(t1 - t0) / RUNBENCH_MASTERS / runbench_idle.seconds;
    runbench_idle.cmds_per_s = (double)(m1.cmds - m0.cmds) / RUNBENCH_MASTERS
                               / runbench_idle.seconds;
    runbench_idle.cpu_pct = (double)(cpu1 - cpu0) / 1e7 / runbench_idle.seconds;
    runbench_idle.ok = true;
}

/* The whole system's CPU of a row was measured: the masters', the client's (and the daemon's). */
static bool
runbench_whole_ok(const struct runbench_run *r)
{
    return r->ok && r->m_ok && r->c_ok && (r->cpu_ok || !runbench_on_daemon(r));
}

/* The whole system's CPU per pair of a row, us: masters + daemon + client. */
static double
runbench_whole(const struct runbench_run *r)
{
    return r->m_cpu_us + (r->cpu_ok ? r->cpu_us : 0) + r->c_cpu_us;
}

/* One row of the cost table: what a pair cost the masters, the daemon and the client. */
static void
runbench_cost_row(const struct runbench_run *r)
{
    if (!r->ok) {
        return;
    }
    printf("  %-22s", r->label);
    if (r->m_ok) {
        printf(" %9.2f %9.2f %11.1f", r->m_cmds, r->m_scripts, r->m_cpu_us);
    } else {
        printf(" %9s %9s %11s", "-", "-", "-");
    }
    runbench_cpu_cell(r);
    if (r->c_ok) {
        printf(" %11.1f", r->c_cpu_us);
    } else {
        printf(" %11s", "-");
    }
    if (runbench_whole_ok(r)) {
        printf(" %11.1f\n", runbench_whole(r));
    } else {
        printf(" %11s\n", "-");
    }
}

/*
 * The cost table: per pair, the commands and script calls each master
 * ran (INFO commandstats before and after the row, over the five
 * masters, divided by five and by the pairs), the CPU time of all five
 * masters (INFO cpu), of the daemon and of the client program, and their
 * sum (the whole system's CPU per pair).  Rows on the TLS masters are
 * not sampled.
 */
static void
runbench_cost_table(void)
{
    size_t i;

    printf("\ncost per pair (commands and script calls: per master; CPU: us, all five masters, "
           "the daemon, the client)\n");
    printf("  %-22s %9s %9s %11s %11s %11s %11s\n", "run", "commands", "scripts", "masters cpu",
           "daemon cpu", "client cpu", "whole cpu");
    for (i = 0; i < RUNBENCH_NRUNS; i++) {
        if (i != RUNBENCH_RTT) {
            runbench_cost_row(&runbench_runs[i]);
        }
    }
    for (i = 0; runbench_peers_ran && i < RUNBENCH_NPEERS; i++) {
        runbench_cost_row(&runbench_peer_runs[i]);
    }
}

/* Both rows of a peer pair have a result. */
static bool
runbench_peer_have(size_t i)
{
    return runbench_peers_ran && runbench_peer_runs[i].ok && runbench_peer_runs[i + 1].ok;
}

/* The peer ratios: redlockd over the library, each pair measured in the same run. */
static void
runbench_peer_targets(void)
{
    const struct runbench_run *p = runbench_peer_runs;
    const struct runbench_run *sem = &p[RUNBENCH_PEERSEM], *sem_lib = &p[RUNBENCH_PEERSEM_LIB];

    runbench_ratio("peer-1 acq p50, redlockd / node-redlock", runbench_peer_have(RUNBENCH_PEER1),
                   p[RUNBENCH_PEER1].p50, p[RUNBENCH_PEER1_LIB].p50, true, RUNBENCH_PEER_P50);
    runbench_ratio("peer-50 pairs/s, redlockd / node-redlock",
                   runbench_peer_have(RUNBENCH_PEER50), p[RUNBENCH_PEER50].pps,
                   p[RUNBENCH_PEER50_LIB].pps, false, RUNBENCH_PEER_OWN);
    runbench_ratio("peer-50 masters' cpu/pair, redlockd / lib",
                   runbench_peer_have(RUNBENCH_PEER50) && p[RUNBENCH_PEER50].m_ok
                   && p[RUNBENCH_PEER50_LIB].m_ok, p[RUNBENCH_PEER50].m_cpu_us,
                   p[RUNBENCH_PEER50_LIB].m_cpu_us, true, RUNBENCH_PEER_MCPU);
    runbench_ratio("peer-50 whole cpu/pair, redlockd / lib",
                   runbench_peer_have(RUNBENCH_PEER50) && runbench_whole_ok(&p[RUNBENCH_PEER50])
                   && runbench_whole_ok(&p[RUNBENCH_PEER50_LIB]),
                   runbench_whole(&p[RUNBENCH_PEER50]), runbench_whole(&p[RUNBENCH_PEER50_LIB]),
                   true, RUNBENCH_PEER_WCPU);
    runbench_goal("peer-50 redlockd script calls/pair/master",
                  runbench_peer_have(RUNBENCH_PEER50) && p[RUNBENCH_PEER50].m_ok,
                  p[RUNBENCH_PEER50].m_scripts, "<=", RUNBENCH_PEER_SCRIPTS);
    runbench_goal("peer-50 redlockd commands/pair/master",
                  runbench_peer_have(RUNBENCH_PEER50) && p[RUNBENCH_PEER50].m_ok,
                  p[RUNBENCH_PEER50].m_cmds, "<=", RUNBENCH_PEER_CMDS);
    if (runbench_peer_have(RUNBENCH_PEERHOT) && p[RUNBENCH_PEERHOT_LIB].pps > 0) {
        printf("  %-44s %10.2f   info (node-redlock's default retry, 200 ms + 100 ms)\n",
               "peer-hot20 pairs/s, redlockd / node-redlock",
               p[RUNBENCH_PEERHOT].pps / p[RUNBENCH_PEERHOT_LIB].pps);
    } else {
        printf("  %-44s %10s   info\n", "peer-hot20 pairs/s, redlockd / node-redlock", "n/a");
    }
    runbench_ratio("peer-hot20r pairs/s, redlockd / 5 ms retry",
                   runbench_peer_have(RUNBENCH_PEERHOTR), p[RUNBENCH_PEERHOTR].pps,
                   p[RUNBENCH_PEERHOTR_LIB].pps, false, RUNBENCH_PEER_HOT);
    runbench_ratio("peer-hot20r redlockd fairness min/max", runbench_peer_have(RUNBENCH_PEERHOTR),
                   p[RUNBENCH_PEERHOTR].min_acq, p[RUNBENCH_PEERHOTR].max_acq, false,
                   RUNBENCH_PEER_FAIR);
    if (runbench_peer_have(RUNBENCH_PEERSEM) && sem_lib->pps > 0) {
        printf("  %-44s %10.2f   info (redis-semaphore fairness %.2f)\n",
               "peer-sem20 pairs/s, redlockd / semaphore", sem->pps / sem_lib->pps,
               runbench_fairness(sem_lib));
    } else {
        printf("  %-44s %10s   info\n", "peer-sem20 pairs/s, redlockd / semaphore", "n/a");
    }
}

/* ---- the noisy-neighbour rows ---- */

#define RUNBENCH_NOISY_LOCKS    "1000"  /* session locks held meanwhile */
#define RUNBENCH_NOISY_TTL_MS   "1000"  /* their ttl: renewed every few hundred ms */
#define RUNBENCH_NOISY_RATE     "1000"  /* requests a second each: 10 x limits.reads_per_second */
#define RUNBENCH_NOISY_MIN_S    5.0     /* shortest phase (full run): 50 probes */
#define RUNBENCH_NOISY_SETTLE   "1500"  /* ms after the flood: renewal rounds in flight end */
#define RUNBENCH_NOISY_P99      2.0     /* target: probe p99, flood / quiet */
#define RUNBENCH_NOISY_EXIT_MS  60000   /* beyond its phases, the run's deadline to exit */
#define RUNBENCH_SMOKE_NOISY_LOCKS   "200"
#define RUNBENCH_SMOKE_NOISY_CONNS   "6"
#define RUNBENCH_SMOKE_NOISY_SOURCES "2"
#define RUNBENCH_SMOKE_NOISY_SETTLE  "1200"

/*
 * One noisy-neighbour run (build/redlock-noisy, tests/bench/noisy_bench.c)
 * against a fresh daemon with the default limits, and what it printed.
 */
struct runbench_noisy {
    const char *label;                  /* row label */
    const char *verbs;                  /* redlock-noisy --verbs */
    const char *conns;                  /* --flood-conns: flooding sessions */
    const char *sources;                /* --sources: the addresses they spread over */
    bool        target;                 /* its figures are judged against the targets (and
                                           it runs in smoke, scaled down; the others not) */
    bool        ran;                    /* a result line was read */
    bool        ok;                     /* every lock held, probes in both phases, no error */
    char        json[4096];             /* the result line */
    long long   downs;                  /* "down:" lines the daemon logged during the run */
};

static struct runbench_noisy runbench_noisy_rows[] = {
    { .label = "noisy-neighbour", .verbs = "watch,status,list", .conns = "24", .sources = "8",
      .target = true },
    { .label = "noisy-reads", .verbs = "watch,status", .conns = "24", .sources = "8" },
    /* More reading sessions than limits.max_reads_in_flight: the daemon's budget binds. */
    { .label = "noisy-reads-96", .verbs = "watch,status", .conns = "96", .sources = "12" },
};

#define RUNBENCH_NNOISY (sizeof(runbench_noisy_rows) / sizeof(runbench_noisy_rows[0]))

/* A number of a noisy row's result line; -1 when absent. */
static double
runbench_nf(const struct runbench_noisy *n, const char *key)
{
    return runbench_field(n->json, key);
}

/* Lines of the daemon's log from byte off on that contain text. */
static long long
runbench_log_count(off_t off, const char *text)
{
    char line[RUNBENCH_LINE_MAX];
    long long count = 0;
    FILE *f = fopen(h_daemon_log_path(), "r");

    if (f == NULL) {
        return -1;
    }
    if (fseeko(f, off, SEEK_SET) == 0) {
        while (fgets(line, sizeof(line), f) != NULL) {
            count += strstr(line, text) != NULL;
        }
    }
    fclose(f);
    return count;
}

/*
 * One noisy-neighbour row: a fresh daemon (default limits), redlock-noisy
 * with its quiet phase then its flood, each of phase_s seconds; the
 * master links declared down are counted in the daemon's log.  Returns
 * false when the run failed (no result, a lock not granted, a phase
 * without probes, an unexpected reply); its figures are judged only
 * against the targets, never here.
 */
static bool
runbench_noisy_one(struct runbench_noisy *n, const char *bin, const char *phase_s, bool smoke)
{
    struct h_daemon_opts o;
    struct runbench_child child;
    char target[64], out[4096], line[sizeof(n->json)];
    const char *argv[40];
    size_t k = 0;
    off_t off;
    FILE *f;
    int code;

    fprintf(stderr, "run_bench: %s (%s s quiet, %s s flood, fresh daemon)\n", n->label, phase_s,
            phase_s);
    if (h_daemon_pid() > 0) {
        (void)h_stop_daemon();
    }
    memset(&o, 0, sizeof(o));
    o.log_level = "warn";
    if (h_start_daemon(&o) != 0) {
        fprintf(stderr, "run_bench: %s: could not start a fresh daemon\n", n->label);
        return false;
    }
    off = h_log_size();
    snprintf(target, sizeof(target), "127.0.0.1:%d", h_daemon_port());
    snprintf(out, sizeof(out), "%s/bench-%s.out", h_dir(), n->label);
    argv[k++] = bin;
    argv[k++] = "--target";
    argv[k++] = target;
    argv[k++] = "--verbs";
    argv[k++] = n->verbs;
    argv[k++] = "--locks";
    argv[k++] = smoke ? RUNBENCH_SMOKE_NOISY_LOCKS : RUNBENCH_NOISY_LOCKS;
    argv[k++] = "--ttl";
    argv[k++] = RUNBENCH_NOISY_TTL_MS;
    argv[k++] = "--flood-conns";
    argv[k++] = smoke ? RUNBENCH_SMOKE_NOISY_CONNS : n->conns;
    argv[k++] = "--sources";
    argv[k++] = smoke ? RUNBENCH_SMOKE_NOISY_SOURCES : n->sources;
    argv[k++] = "--rate";
    argv[k++] = RUNBENCH_NOISY_RATE;
    argv[k++] = "--quiet";
    argv[k++] = phase_s;
    argv[k++] = "--flood";
    argv[k++] = phase_s;
    argv[k++] = "--settle";
    argv[k++] = smoke ? RUNBENCH_SMOKE_NOISY_SETTLE : RUNBENCH_NOISY_SETTLE;
    argv[k] = NULL;
    memset(&child, 0, sizeof(child));
    child.out = out;
    child.pid = h_spawn(argv, out);
    if (child.pid < 0) {
        return false;
    }
    if (!h_wait_until(runbench_reaped, &child,
                      (int64_t)(2 * atof(phase_s) * 1000) + RUNBENCH_NOISY_EXIT_MS)) {
        fprintf(stderr, "run_bench: %s: redlock-noisy did not end in time\n", n->label);
        runbench_child_end(&child);
    }
    code = h_decode_status(child.status);
    n->downs = runbench_log_count(off, "down:");
    f = fopen(out, "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "{\"mode\":\"noisy\"", 15) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(n->json, sizeof(n->json), "%s", line);
            n->ran = true;
        } else {
            fprintf(stderr, "  (noisy) %s", line);
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    if (code != 0 || !n->ran) {
        fprintf(stderr, "run_bench: %s: redlock-noisy exited with %d%s\n", n->label, code,
                n->ran ? "" : " and printed no result");
        n->ran = false;
        return false;
    }
    printf("%s\n", n->json);
    n->ok = runbench_nf(n, "held") == runbench_nf(n, "locks")
            && runbench_nf(n, "quiet_probes") > 0 && runbench_nf(n, "flood_probes") > 0
            && runbench_nf(n, "errors") == 0
            && runbench_nf(n, "ok_watch") + runbench_nf(n, "ok_status") > 0;
    if (!n->ok) {
        fprintf(stderr, "run_bench: %s: held %.0f of %.0f locks, probes %.0f quiet and %.0f "
                "flooded, %.0f errors, %.0f reads made\n", n->label, runbench_nf(n, "held"),
                runbench_nf(n, "locks"), runbench_nf(n, "quiet_probes"),
                runbench_nf(n, "flood_probes"), runbench_nf(n, "errors"),
                runbench_nf(n, "ok_watch") + runbench_nf(n, "ok_status"));
    }
    return n->ok;
}

/*
 * The noisy-neighbour rows, each on a fresh daemon: phases of
 * max(BENCH_SECONDS, RUNBENCH_NOISY_MIN_S) s; in smoke only the row
 * with the targets, with 1 s phases, 200 locks and 6 flooding sessions
 * from 2 addresses.  True when every run passed runbench_noisy_one.
 */
static bool
runbench_noisy(const char *bin, const char *seconds, bool smoke)
{
    char phase_s[32];
    bool good = true;
    size_t i;

    snprintf(phase_s, sizeof(phase_s), "%g", smoke ? 1.0
             : atof(seconds) > RUNBENCH_NOISY_MIN_S ? atof(seconds) : RUNBENCH_NOISY_MIN_S);
    for (i = 0; i < RUNBENCH_NNOISY; i++) {
        if (smoke && !runbench_noisy_rows[i].target) {
            continue;   /* the information rows: not in smoke */
        }
        if (!runbench_noisy_one(&runbench_noisy_rows[i], bin, phase_s, smoke)) {
            h_print_daemon_log_tail(20);
            good = false;
        }
    }
    return good;
}

/* Master links declared down during a noisy run: the log's, or the reconnects if more. */
static double
runbench_noisy_downs(const struct runbench_noisy *n)
{
    double rec = runbench_nf(n, "quiet_reconnects") + runbench_nf(n, "flood_reconnects");

    return rec > (double)n->downs ? rec : (double)n->downs;
}

/*
 * The quiet phase itself lost a lock or a renewal: something besides
 * the flood (other jobs on the machine) starved the daemon or the
 * masters, and the flood's figures mean little.
 */
static bool
runbench_noisy_disturbed(const struct runbench_noisy *n)
{
    return runbench_nf(n, "quiet_locks_lost") != 0 || runbench_nf(n, "quiet_renewals_failed") != 0
           || runbench_nf(n, "quiet_reconnects") != 0 || runbench_nf(n, "quiet_probe_errors") != 0;
}

/* Mean of a sum over a count, in ms (0 without a count). */
static double
runbench_mean_ms(double sum_us, double count)
{
    return count > 0 ? sum_us / count / 1000.0 : 0;
}

/* The noisy-neighbour table: the probe quiet and flooded, what the flood cost and what it got. */
static void
runbench_noisy_table(void)
{
    const struct runbench_noisy *n;
    size_t i;

    printf("\nnoisy neighbour (a fresh daemon each, default limits; session locks held on 10 "
           "connections;\nsessions from several 127.0.2.x addresses flood at a set rate each; a "
           "probe TRYLOCK/UNLOCK\nevery 100 ms on its own connection, us; a quiet phase, then "
           "the flood; renewals and links:\nthe flood and the %s ms after it)\n",
           runbench_smoke ? RUNBENCH_SMOKE_NOISY_SETTLE : RUNBENCH_NOISY_SETTLE);
    for (i = 0; i < RUNBENCH_NNOISY; i++) {
        n = &runbench_noisy_rows[i];
        if (n->ran) {
            printf("  %s: %.0f locks of ttl %.0f ms; %.0f sessions from %.0f addresses, %.0f "
                   "requests/s each; phases of %.1f s\n", n->label, runbench_nf(n, "locks"),
                   runbench_nf(n, "ttl_ms"), runbench_nf(n, "flood_conns"),
                   runbench_nf(n, "sources"), runbench_nf(n, "rate"),
                   runbench_nf(n, "flood_s"));
        }
    }
    printf("  %-16s %-18s %6s %7s %7s %7s %8s %6s %7s %6s %6s\n", "run", "flooding", "probes",
           "q p50", "q p99", "f p50", "f p99", "ratio", "renew x", "lost", "down");
    for (i = 0; i < RUNBENCH_NNOISY; i++) {
        n = &runbench_noisy_rows[i];
        if (runbench_smoke && !n->target) {
            continue;   /* not run in smoke */
        }
        if (!n->ran) {
            printf("  %-16s %-18s %6s\n", n->label, n->verbs, "(failed)");
            continue;
        }
        printf("  %-16s %-18s %6.0f %7.0f %7.0f %7.0f %8.0f %6.2f %7.0f %6.0f %6.0f%s\n",
               n->label, n->verbs, runbench_nf(n, "flood_probes"), runbench_nf(n, "quiet_p50_us"),
               runbench_nf(n, "quiet_p99_us"), runbench_nf(n, "flood_p50_us"),
               runbench_nf(n, "flood_p99_us"),
               runbench_nf(n, "quiet_p99_us") > 0
               ? runbench_nf(n, "flood_p99_us") / runbench_nf(n, "quiet_p99_us") : 0,
               runbench_nf(n, "flood_renewals_failed"), runbench_nf(n, "flood_locks_lost"),
               runbench_noisy_downs(n), !n->ok ? "   FAILED"
                                        : runbench_noisy_disturbed(n) ? "   QUIET LOST" : "");
    }
    for (i = 0; i < RUNBENCH_NNOISY; i++) {
        n = &runbench_noisy_rows[i];
        if (!n->ran) {
            continue;
        }
        printf("  %s: reads made / refused (ERR LIMIT reads_per_second): WATCH %.0f / %.0f, "
               "STATUS %.0f / %.0f\n    (timed out at limits.read_wait_ms %.0f); LIST %.0f "
               "listings, %.0f lines; requests held back\n    by the window %.0f; renewals ok "
               "%.0f, failed %.0f; probe errors %.0f, ticks late %.0f\n", n->label,
               runbench_nf(n, "ok_watch"), runbench_nf(n, "refused_watch"),
               runbench_nf(n, "ok_status"), runbench_nf(n, "refused_status"),
               runbench_nf(n, "reads_timed_out"), runbench_nf(n, "ok_list"),
               runbench_nf(n, "list_lines"), runbench_nf(n, "held_back"),
               runbench_nf(n, "flood_renewals_ok"), runbench_nf(n, "flood_renewals_failed"),
               runbench_nf(n, "flood_probe_errors"), runbench_nf(n, "flood_probe_late"));
        printf("    quiet phase: renewals ok %.0f, failed %.0f; locks lost %.0f; reconnects %.0f; "
               "probe errors %.0f,\n    ticks late %.0f%s\n", runbench_nf(n, "quiet_renewals_ok"),
               runbench_nf(n, "quiet_renewals_failed"), runbench_nf(n, "quiet_locks_lost"),
               runbench_nf(n, "quiet_reconnects"), runbench_nf(n, "quiet_probe_errors"),
               runbench_nf(n, "quiet_probe_late"), runbench_noisy_disturbed(n)
               ? " (QUIET LOST: not the flood; the run was disturbed, run it again)" : "");
        printf("    read budget: %.0f reads waited their turn, %.1f ms on average; at most %.0f "
               "in flight\n    (limits.max_reads_in_flight 64), %.0f waiting; master queue, "
               "read class: %.0f written\n    after waiting, %.2f ms on average, %.0f expired, "
               "deepest %.0f; renew class: %.0f\n    written after waiting, %.2f ms on average, "
               "%.0f expired\n", runbench_nf(n, "reads_waited"),
               runbench_mean_ms(runbench_nf(n, "read_wait_us"), runbench_nf(n, "reads_waited")),
               runbench_nf(n, "max_reads_in_flight"), runbench_nf(n, "max_reads_waiting"),
               runbench_nf(n, "queue_read_written"),
               runbench_mean_ms(runbench_nf(n, "queue_read_wait_us"),
                                runbench_nf(n, "queue_read_written")),
               runbench_nf(n, "queue_read_expired"), runbench_nf(n, "max_queue_read_depth"),
               runbench_nf(n, "queue_renew_written"),
               runbench_mean_ms(runbench_nf(n, "queue_renew_wait_us"),
                                runbench_nf(n, "queue_renew_written")),
               runbench_nf(n, "queue_renew_expired"));
    }
}

/* The noisy-neighbour targets (the first row; the others are for information). */
static void
runbench_noisy_targets(void)
{
    const struct runbench_noisy *n = &runbench_noisy_rows[0];

    runbench_goal("noisy-neighbour renewals failed (flood)", n->ran,
                  runbench_nf(n, "flood_renewals_failed"), "<=", 0);
    runbench_goal("noisy-neighbour locks lost (flood)", n->ran,
                  runbench_nf(n, "flood_locks_lost"), "<=", 0);
    runbench_goal("noisy-neighbour master links declared down", n->ran, runbench_noisy_downs(n),
                  "<=", 0);
    runbench_ratio("noisy-neighbour probe p99, flood / quiet", n->ran,
                   runbench_nf(n, "flood_p99_us"), runbench_nf(n, "quiet_p99_us"), true,
                   RUNBENCH_NOISY_P99);
    runbench_goal("noisy-neighbour probes not answered OK (flood)", n->ran,
                  runbench_nf(n, "flood_probe_errors"), "<=", 0);
}

/* ---- the hostile row ---- */

#define RUNBENCH_HOSTILE_NOFILE     512     /* the daemon's RLIMIT_NOFILE, soft and hard */
#define RUNBENCH_HOSTILE_PASSWORD   "bench-hostile-Zq7t2Lw9"   /* auth.password */
#define RUNBENCH_HOSTILE_MIN_S      10.0    /* shortest attack (full run) */
#define RUNBENCH_HOSTILE_SMOKE_S    "2"     /* the attack in --smoke */
#define RUNBENCH_HOSTILE_EXIT_MS    60000   /* beyond the attack, the run's deadline to exit */
#define RUNBENCH_HOSTILE_PCT        99.0    /* target: % admitted within 1 s, each transport */
#define RUNBENCH_HOSTILE_GROUP_BURST 10.0   /* daemon/authlimit.h: AUTHLIMIT_BURST */
#define RUNBENCH_HOSTILE_GROUP_RATE  1.0    /* a group's refill, a second */
#define RUNBENCH_HOSTILE_ALL_BURST  100.0   /* AUTHLIMIT_DAEMON_BURST */
#define RUNBENCH_HOSTILE_ALL_RATE   100.0   /* the daemon's refill, a second */

/* The hostile row (build/redlock-hostile, tests/bench/hostile_bench.c) and what it printed. */
static struct {
    bool        ran;                /* a result line was read */
    char        json[8192];         /* the result line */
    long long   log_lines;          /* lines the daemon logged during the run */
    char        attacks[64];        /* --attacks */
} runbench_hostile_row;

/* A number of the hostile row's result line; -1 when absent. */
static double
runbench_hf(const char *key)
{
    return runbench_field(runbench_hostile_row.json, key);
}

/* build/redlock-hostile: REDLOCK_HOSTILE_BIN, or beside redlock-bench. */
static const char *
runbench_hostile_bin(char *path, size_t size, const char *bin)
{
    const char *env = getenv("REDLOCK_HOSTILE_BIN"), *slash = strrchr(bin, '/');

    if (env != NULL && env[0] != '\0') {
        snprintf(path, size, "%s", env);
    } else if (slash != NULL) {
        snprintf(path, size, "%.*s/redlock-hostile", (int)(slash - bin), bin);
    } else {
        snprintf(path, size, "./build/redlock-hostile");
    }
    return path;
}

/*
 * The hostile row: a fresh daemon with auth.password, listen.tls (the
 * certificates of tests/tls/make-certs.sh, made in <dir>/hostile-certs),
 * the Unix socket asking for AUTH too (auth.unix_exempt false), /metrics
 * on a free port and RLIMIT_NOFILE RUNBENCH_HOSTILE_NOFILE; then
 * redlock-hostile with every attack (BENCH_HOSTILE_ATTACKS may name
 * fewer) for max(BENCH_SECONDS, 10) s (2 s and fewer attackers in
 * smoke); the daemon is stopped after it.  Returns false when the row
 * could not run (no daemon, no result); its figures are judged only
 * against the targets.
 */
static bool
runbench_hostile(const char *bin, const char *seconds, bool smoke)
{
    struct h_daemon_opts o;
    struct runbench_child child;
    const char *only = getenv("BENCH_HOSTILE_ATTACKS");
    const char *from = getenv("BENCH_HOSTILE_SOURCE");
    const char *fd_auth = getenv("BENCH_HOSTILE_FD_AUTH");
    const char *reopen = getenv("BENCH_HOSTILE_REOPEN_MS");
    char certs[4096], cmd[8192 + 64], ca[4200], crt[4200], key[4200], target[64], tls[64];
    char mport[16], attack_s[32], fdn[16], out[4096], line[sizeof(runbench_hostile_row.json)];
    const char *argv[48];
    size_t k = 0;
    off_t off;
    FILE *f;
    int status, code;

    snprintf(runbench_hostile_row.attacks, sizeof(runbench_hostile_row.attacks), "%s",
             only != NULL && only[0] != '\0' ? only : "all");
    snprintf(attack_s, sizeof(attack_s), "%g", smoke ? atof(RUNBENCH_HOSTILE_SMOKE_S)
             : atof(seconds) > RUNBENCH_HOSTILE_MIN_S ? atof(seconds) : RUNBENCH_HOSTILE_MIN_S);
    fprintf(stderr, "run_bench: hostile (%s s of attacks: %s; fresh daemon, RLIMIT_NOFILE %d)\n",
            attack_s, runbench_hostile_row.attacks, RUNBENCH_HOSTILE_NOFILE);
    snprintf(certs, sizeof(certs), "%s/hostile-certs", h_dir());
    snprintf(cmd, sizeof(cmd), "sh %s '%s' >'%s/hostile-certs.log' 2>&1", RUNBENCH_MAKE_CERTS,
             certs, h_dir());
    status = system(cmd);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "run_bench: hostile: %s failed (run from the source tree's root; see "
                "%s/hostile-certs.log)\n", RUNBENCH_MAKE_CERTS, h_dir());
        return false;
    }
    snprintf(ca, sizeof(ca), "%s/ca.crt", certs);
    snprintf(crt, sizeof(crt), "%s/server.crt", certs);
    snprintf(key, sizeof(key), "%s/server.key", certs);
    if (h_daemon_pid() > 0) {
        (void)h_stop_daemon();
    }
    memset(&o, 0, sizeof(o));
    o.log_level = "warn";
    o.auth_password = RUNBENCH_HOSTILE_PASSWORD;
    o.auth_unix_required = true;
    o.metrics_port = h_free_port();
    o.tls_cert_file = crt;
    o.tls_key_file = key;
    o.nofile = RUNBENCH_HOSTILE_NOFILE;
    if (o.metrics_port <= 0 || h_start_daemon(&o) != 0) {
        fprintf(stderr, "run_bench: hostile: could not start a fresh daemon\n");
        return false;
    }
    off = h_log_size();
    snprintf(target, sizeof(target), "127.0.0.1:%d", h_daemon_port());
    snprintf(tls, sizeof(tls), "127.0.0.1:%d", h_daemon_tls_port());
    snprintf(mport, sizeof(mport), "%d", o.metrics_port);
    /* Idle connections: more than the daemon's descriptors. */
    snprintf(fdn, sizeof(fdn), "%d", RUNBENCH_HOSTILE_NOFILE + (smoke ? 50 : 100));
    snprintf(out, sizeof(out), "%s/bench-hostile.out", h_dir());
    argv[k++] = bin;
    argv[k++] = "--target";
    argv[k++] = target;
    argv[k++] = "--tls-target";
    argv[k++] = tls;
    argv[k++] = "--tls-ca";
    argv[k++] = ca;
    argv[k++] = "--unix";
    argv[k++] = h_daemon_unix_path();
    argv[k++] = "--metrics-port";
    argv[k++] = mport;
    argv[k++] = "--password";
    argv[k++] = RUNBENCH_HOSTILE_PASSWORD;
    argv[k++] = "--attack-s";
    argv[k++] = attack_s;
    argv[k++] = "--attacks";
    argv[k++] = runbench_hostile_row.attacks;
    argv[k++] = "--fd-conns";
    argv[k++] = fdn;
    if (reopen != NULL && reopen[0] != '\0') {
        argv[k++] = "--reopen-ms";
        argv[k++] = reopen;
    }
    if (fd_auth != NULL && strcmp(fd_auth, "1") == 0) {
        argv[k++] = "--fd-auth";
    }
    if (from != NULL && from[0] != '\0') {
        argv[k++] = "--legit-source";
        argv[k++] = from;
    }
    if (smoke) {
        argv[k++] = "--guess-conns";
        argv[k++] = "50";
        argv[k++] = "--guess-addrs";
        argv[k++] = "500";
        argv[k++] = "--pool-conns";
        argv[k++] = "16";
        argv[k++] = "--slow-conns";
        argv[k++] = "10";
    }
    argv[k] = NULL;
    memset(&child, 0, sizeof(child));
    child.out = out;
    child.pid = h_spawn(argv, out);
    if (child.pid < 0) {
        (void)h_stop_daemon();
        return false;
    }
    if (!h_wait_until(runbench_reaped, &child,
                      (int64_t)(atof(attack_s) * 1000) + RUNBENCH_HOSTILE_EXIT_MS)) {
        fprintf(stderr, "run_bench: hostile: redlock-hostile did not end in time\n");
        runbench_child_end(&child);
    }
    code = h_decode_status(child.status);
    runbench_hostile_row.log_lines = runbench_log_count(off, "");
    f = fopen(out, "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "{\"mode\":\"hostile\"", 17) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(runbench_hostile_row.json, sizeof(runbench_hostile_row.json), "%s", line);
            runbench_hostile_row.ran = true;
        } else {
            fprintf(stderr, "  (hostile) %s", line);
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    if (code != 0 || !runbench_hostile_row.ran) {
        fprintf(stderr, "run_bench: hostile: redlock-hostile exited with %d%s\n", code,
                runbench_hostile_row.ran ? "" : " and printed no result");
        runbench_hostile_row.ran = false;
        h_print_daemon_log_tail(20);
        (void)h_stop_daemon();
        return false;
    }
    printf("%s\n", runbench_hostile_row.json);
    (void)h_stop_daemon();
    return true;
}

/* % of a count over another (0 without the second). */
static double
runbench_pct(double part, double whole)
{
    return whole > 0 ? 100.0 * part / whole : 0;
}

/* The checked guesses the bounds allow over s seconds: one group's, and the daemon's. */
static double
runbench_hostile_bound(double s, bool daemon_wide)
{
    return daemon_wide ? RUNBENCH_HOSTILE_ALL_BURST + RUNBENCH_HOSTILE_ALL_RATE * s
                       : RUNBENCH_HOSTILE_GROUP_BURST + RUNBENCH_HOSTILE_GROUP_RATE * s;
}

/* The hostile table: each transport's admissions and latency, the scrapes, the attacks. */
static void
runbench_hostile_table(void)
{
    static const char *const ts[] = { "tcp", "tls", "unix" };
    char key[64];
    double s = runbench_hf("attack_s"), att, adm, first;
    size_t i;

    if (!runbench_hostile_row.ran) {
        printf("\nhostile: %s\n", "(failed: no result)");
        return;
    }
    printf("\nhostile (a fresh daemon: auth.password, listen.tls, the Unix socket with AUTH, "
           "/metrics,\nRLIMIT_NOFILE %d; attacks %s for %.1f s; a legitimate client per "
           "transport every %.0f ms,\nTCP and TLS from %s, started before the attacks; "
           "admitted: AUTH and LOCK answered OK;\nlatency: connect to the LOCK's OK, us; "
           "attempts started during the attacks)\n", RUNBENCH_HOSTILE_NOFILE,
           runbench_hostile_row.attacks, s, runbench_hf("interval_ms"),
           getenv("BENCH_HOSTILE_SOURCE") != NULL && getenv("BENCH_HOSTILE_SOURCE")[0] != '\0'
           ? getenv("BENCH_HOSTILE_SOURCE") : "127.0.0.1");
    printf("  %-9s %8s %10s %11s %9s %9s %9s %9s  %s\n", "transport", "attempts", "admitted %",
           "within 1s %", "p50", "p99", "max", "first", "not admitted: why");
    for (i = 0; i < 3; i++) {
        snprintf(key, sizeof(key), "%s_attempts", ts[i]);
        att = runbench_hf(key);
        snprintf(key, sizeof(key), "%s_admitted", ts[i]);
        adm = runbench_hf(key);
        snprintf(key, sizeof(key), "%s_first_us", ts[i]);
        first = runbench_hf(key);
        printf("  %-9s %8.0f %10.1f", ts[i], att, runbench_pct(adm, att));
        snprintf(key, sizeof(key), "%s_within_1s", ts[i]);
        printf(" %11.1f", runbench_pct(runbench_hf(key), att));
        snprintf(key, sizeof(key), "%s_p50_us", ts[i]);
        printf(" %9.0f", runbench_hf(key));
        snprintf(key, sizeof(key), "%s_p99_us", ts[i]);
        printf(" %9.0f", runbench_hf(key));
        snprintf(key, sizeof(key), "%s_max_us", ts[i]);
        printf(" %9.0f", runbench_hf(key));
        if (first >= 0) {
            printf(" %9.0f ", first);
        } else {
            printf(" %9s ", "refused");
        }
        {
            static const char *const why[] = { "connect", "tls", "limit", "auth", "lock",
                                               "closed", "timeout" };
            size_t j;
            bool any = false;

            for (j = 0; j < sizeof(why) / sizeof(why[0]); j++) {
                snprintf(key, sizeof(key), "%s_fail_%s", ts[i], why[j]);
                if (runbench_hf(key) > 0) {
                    printf(" %s %.0f", why[j], runbench_hf(key));
                    any = true;
                }
            }
            printf("%s\n", any ? "" : " -");
        }
    }
    printf("  (first: the very first attempt, %.0f ms before the attacks began; every attempt "
           "before them:\n  tcp %.0f of %.0f admitted, tls %.0f of %.0f, unix %.0f of %.0f)\n",
           1000.0, runbench_hf("tcp_lead_admitted"), runbench_hf("tcp_lead_attempts"),
           runbench_hf("tls_lead_admitted"), runbench_hf("tls_lead_attempts"),
           runbench_hf("unix_lead_admitted"), runbench_hf("unix_lead_attempts"));
    printf("  /metrics scrapes every 500 ms: %.0f, answered 200: %.0f (%.1f %%), slowest 200 "
           "%.1f ms\n", runbench_hf("scrapes"), runbench_hf("scrapes_ok"),
           runbench_pct(runbench_hf("scrapes_ok"), runbench_hf("scrapes")),
           runbench_hf("scrape_max_us") / 1000.0);
    printf("  guessing: %.0f connections at once from %.0f addresses of 127/8 (one address "
           "group);\n    %.0f AUTHs sent, %.0f answered wrong password, %.0f closed without an "
           "answer\n", runbench_hf("guess_conns"), runbench_hf("guess_addrs"),
           runbench_hf("guesses_sent"), runbench_hf("guesses_wrong"),
           runbench_hf("guesses_closed"));
    printf("    checked (STATS auth_failures): %.0f, %.1f a second of the attack; bounds over "
           "the %.1f s\n    between the two STATS: one group %.0f (10 at once + 1/s), "
           "daemon-wide %.0f (100 at once\n    + 100/s)\n", runbench_hf("auth_failures"),
           s > 0 ? runbench_hf("auth_failures") / s : 0, runbench_hf("stats_window_s"),
           runbench_hostile_bound(runbench_hf("stats_window_s"), false),
           runbench_hostile_bound(runbench_hf("stats_window_s"), true));
    printf("  pool flood: %.0f silent connections from each of %.0f addresses, %.0f opened in "
           "all;\n  idle connections: %.0f (daemon RLIMIT_NOFILE %d), %.0f opened; slowloris: "
           "%.0f on /metrics,\n  %.0f opened; the most attack connections open at once %.0f; "
           "connects failed %.0f\n", runbench_hf("pool_conns"), runbench_hf("pool_addrs"),
           runbench_hf("pool_opened"), runbench_hf("fd_conns"), RUNBENCH_HOSTILE_NOFILE,
           runbench_hf("fd_opened"), runbench_hf("slow_conns"), runbench_hf("slow_opened"),
           runbench_hf("max_open"), runbench_hf("connect_failed"));
    printf("  STATS deltas: unauthenticated_evicted %.0f, auth_held %.0f, rejected_clients "
           "%.0f,\n  metrics_rejected %.0f, metrics_timed_out %.0f; daemon log lines %lld\n",
           runbench_hf("unauthenticated_evicted"), runbench_hf("auth_held"),
           runbench_hf("rejected_clients"), runbench_hf("metrics_rejected"),
           runbench_hf("metrics_timed_out"), runbench_hostile_row.log_lines);
}

/* The hostile row's targets. */
static void
runbench_hostile_targets(void)
{
    static const char *const ts[] = { "tcp", "tls", "unix" };
    char key[64], what[64];
    bool have = runbench_hostile_row.ran;
    double w = runbench_hf("stats_window_s");
    size_t i;

    for (i = 0; i < 3; i++) {
        snprintf(key, sizeof(key), "%s_attempts", ts[i]);
        double att = runbench_hf(key);

        snprintf(key, sizeof(key), "%s_within_1s", ts[i]);
        snprintf(what, sizeof(what), "hostile %s: %% admitted within 1 s", ts[i]);
        runbench_goal(what, have && att > 0, runbench_pct(runbench_hf(key), att), ">=",
                      RUNBENCH_HOSTILE_PCT);
    }
    runbench_goal("hostile /metrics scrapes answered 200 %", have && runbench_hf("scrapes") > 0,
                  runbench_pct(runbench_hf("scrapes_ok"), runbench_hf("scrapes")), ">=",
                  RUNBENCH_HOSTILE_PCT);
    /* Over the window of the STATS deltas: the attack, the settle, the STATS themselves. */
    runbench_goal("hostile checked guesses, one group (127/8)", have
                  && runbench_hf("auth_failures") >= 0 && w > 0, runbench_hf("auth_failures"),
                  "<=", (double)(long long)runbench_hostile_bound(w, false));
    runbench_goal("hostile checked guesses/s, daemon-wide", have
                  && runbench_hf("auth_failures") >= 0 && w > 0,
                  runbench_hf("auth_failures") / w, "<=",
                  runbench_hostile_bound(w, true) / w);
}

/*
 * The measurements, then (not in a smoke run, whose 1 s runs and small
 * hold counts say nothing about them) the targets.
 */
static void
runbench_table(const char *seconds, bool smoke)
{
    const struct runbench_run *rtt = &runbench_runs[RUNBENCH_RTT];
    const struct runbench_run *u1 = &runbench_runs[RUNBENCH_UNC1];
    const struct runbench_run *u64 = &runbench_runs[RUNBENCH_UNC64];
    const struct runbench_run *u1f = &runbench_runs[RUNBENCH_UNC1F];
    const struct runbench_run *u64f = &runbench_runs[RUNBENCH_UNC64F];
    const struct runbench_run *hot = &runbench_runs[RUNBENCH_HOT50];
    const struct runbench_run *dir = &runbench_runs[RUNBENCH_DIRECT];
    const struct runbench_run *d1 = &runbench_runs[RUNBENCH_DIRECT1];
    const struct runbench_run *c64 = &runbench_runs[RUNBENCH_COUNTED64];
    const struct runbench_run *sh = &runbench_runs[RUNBENCH_SHARED64];
    const struct runbench_hold *ses = &runbench_session, *lea = &runbench_lease;
    const struct runbench_hold *cnt = &runbench_counted, *max = &runbench_session_max;
    const struct runbench_run *t1 = &runbench_tls_runs[RUNBENCH_UNC1_TLS];
    const struct runbench_run *t64 = &runbench_tls_runs[RUNBENCH_UNC64_TLS];
    char what[64];
    size_t i;

    printf("\nredlock-bench, %s s per mode, %d masters (latencies: acquire, us)\n",
           seconds, RUNBENCH_MASTERS);
    printf("  %-18s %5s %10s %8s %8s %8s %9s %7s %11s %13s\n", "run", "conns", "pairs/s",
           "p50", "p90", "p99", "max", "errors", "cpu us/pair", "acq min/max");
    for (i = 0; i < RUNBENCH_NRUNS; i++) {
        runbench_row(&runbench_runs[i]);
        if (i == RUNBENCH_UNC64) {
            /* The TLS rows beside the plain ones (run last, on a setup of their own). */
            runbench_row(&runbench_tls_runs[RUNBENCH_UNC1_TLS]);
            runbench_row(&runbench_tls_runs[RUNBENCH_UNC64_TLS]);
        }
    }
    runbench_kinds_table(c64, sh);
    runbench_pairs_table();
    runbench_peer_table();
    runbench_cost_table();
    if (runbench_idle.ok) {
        printf("\nidle daemon, %.1f s, no client: per master %.2f TIME/s and %.2f commands/s in "
               "all;\ndaemon CPU %.3f %% of one core\n", runbench_idle.seconds,
               runbench_idle.time_per_s, runbench_idle.cmds_per_s, runbench_idle.cpu_pct);
    } else {
        printf("\nidle daemon: not measured\n");
    }
    printf("\nheld locks (a fresh daemon each; its VmRSS; grant: first connection to last OK)\n");
    printf("  %-16s %7s %6s %8s %8s %7s %8s %8s %10s\n", "run", "locks", "conns", "grant s",
           "held", "errors", "base MiB", "RSS MiB", "bytes/lock");
    runbench_hold_row(ses);
    runbench_hold_row(cnt);
    runbench_hold_row(max);
    runbench_hold_row(lea);
    if (ses->cpu_ok) {
        printf("\nrenewal CPU, %ld session locks (ttl %ld ms) held, %.1f s window: daemon %.1f %% "
               "of one core, %.0f renewals/s (%lld ok, %lld failed)%s\n", ses->locks,
               ses->ttl_ms, ses->window_s, ses->cpu_pct, (double)ses->renew_ok / ses->window_s,
               ses->renew_ok, ses->renew_failed, ses->cpu_good ? "" : "   FAILED");
    } else {
        printf("\nrenewal CPU: not measured   FAILED\n");
    }
    if (max->cpu_ok) {
        printf("renewal CPU, %ld sessions at the descriptor limit (Unix socket): daemon %.1f %% of "
               "one core\n(%.2f %% per 10,000), %.0f renewals/s (%lld ok, %lld failed)%s\n",
               max->locks, max->cpu_pct, max->cpu_pct * 10000.0 / (double)max->locks,
               (double)max->renew_ok / max->window_s, max->renew_ok, max->renew_failed,
               max->cpu_good ? "" : "   FAILED");
    }
    printf("\nrelease of the held session locks (every connection closed at once; from the "
           "SIGTERM\nto STATS locks_held 0; renewals that failed meanwhile; reported, not judged)\n");
    runbench_release_row(ses);
    runbench_release_row(cnt);
    runbench_list_table(seconds);
    runbench_noisy_table();
    runbench_hostile_table();
    if (smoke) {
        printf("\ntargets: not judged in a smoke run (make bench judges them)\n");
        return;
    }
    printf("\ntargets (report only)%36s   target\n", "value");
    runbench_ratio("uncontended-1 p50 / rtt p50", u1->ok && rtt->ok, u1->p50, rtt->p50,
                   true, 2.0);
    if (u1->ok && d1->ok && d1->p50 > 0) {
        printf("  %-44s %10.2f   info (direct-1 p50 %.0f us: the masters' own quorum)\n",
               "uncontended-1 p50 / direct-1 p50", u1->p50 / d1->p50, d1->p50);
    } else {
        printf("  %-44s %10s   info\n", "uncontended-1 p50 / direct-1 p50", "n/a");
    }
    if (d1->ok && rtt->ok && rtt->p50 > 0) {
        /* What bounds the first target: the masters' quorum without any daemon. */
        printf("  %-44s %10.2f   info (the masters alone: the floor of the first ratio;\n"
               "  %-44s %10s   where the time goes: README.md, Performance)\n",
               "direct-1 p50 / rtt p50", d1->p50 / rtt->p50, "", "");
    }
    runbench_ratio("uncontended-64 pairs/s / direct-64 pairs/s", u64->ok && dir->ok, u64->pps,
                   dir->pps, false, RUNBENCH_UNC64_DIRECT);
    runbench_goal("daemon CPU us per pair, uncontended-64", u64->ok && u64->cpu_ok, u64->cpu_us,
                  "<=", RUNBENCH_CPU_PAIR_US);
    if (u1f->ok && u1->ok && u1->p50 > 0 && u64f->ok && u64->ok && u64->pps > 0) {
        printf("  %-44s %10.2f   info (fenced grants: one more round)\n",
               "uncontended-1-fence p50 / uncontended-1 p50", u1f->p50 / u1->p50);
        printf("  %-44s %10.2f   info\n", "uncontended-64-fence / uncontended-64 pairs/s",
               u64f->pps / u64->pps);
    } else {
        printf("  %-44s %10s   info\n", "uncontended-1-fence p50 / uncontended-1 p50", "n/a");
    }
    runbench_ratio("uncontended-64-tls / uncontended-64 pairs/s", t64->ok && u64->ok,
                   t64->pps, u64->pps, false, RUNBENCH_TLS_RATIO);
    if (t1->ok && u1->ok && u1->p50 > 0) {
        printf("  %-44s %10.2f   info (TLS masters and clients, one connection)\n",
               "uncontended-1-tls p50 / uncontended-1 p50", t1->p50 / u1->p50);
    } else {
        printf("  %-44s %10s   info\n", "uncontended-1-tls p50 / uncontended-1 p50", "n/a");
    }
    runbench_ratio("hot-50 pairs/s / uncontended-1 pairs/s", hot->ok && u1->ok, hot->pps,
                   u1->pps, false, 0.8);
    runbench_ratio("hot-50 fairness min/max acquisitions", hot->ok && hot->max_acq > 0,
                   hot->min_acq, hot->max_acq, false, 0.7);
    snprintf(what, sizeof(what), "memory-session RSS MiB (%ld session locks)", ses->locks);
    runbench_goal(what, ses->ran && ses->rss_kib >= 0, runbench_mib(ses->rss_kib), "<=",
                  RUNBENCH_SESSION_MIB);
    snprintf(what, sizeof(what), "renewal CPU %% of one core (%ld locks)", ses->locks);
    runbench_goal(what, ses->cpu_ok, ses->cpu_pct, "<", RUNBENCH_CPU_PCT);
    snprintf(what, sizeof(what), "memory-counted RSS MiB (%ld permits)", cnt->locks);
    runbench_goal(what, cnt->ran && cnt->rss_kib >= 0, runbench_mib(cnt->rss_kib), "<=",
                  RUNBENCH_SESSION_MIB);
    if (cnt->ran && cnt->rss_kib >= 0) {
        printf("  %-44s %10.2f   info (memory-session: %.2f)\n", "memory-counted RSS / its target",
               runbench_mib(cnt->rss_kib) / RUNBENCH_SESSION_MIB,
               ses->ran && ses->rss_kib >= 0 ? runbench_mib(ses->rss_kib) / RUNBENCH_SESSION_MIB
                                             : 0.0);
    }
    snprintf(what, sizeof(what), "memory-lease RSS MiB (%ld lease locks)", lea->locks);
    runbench_goal(what, lea->ran && lea->rss_kib >= 0, runbench_mib(lea->rss_kib), "<=",
                  RUNBENCH_LEASE_MIB);
    snprintf(what, sizeof(what), "sessions-max KiB per session (%ld)", max->locks);
    runbench_goal(what, runbench_per_lock(max) >= 0, runbench_per_lock(max) / 1024.0, "<=",
                  RUNBENCH_SESSION_KIB);
    runbench_goal("sessions-max renewal % of a core per 10,000", max->cpu_ok,
                  max->cpu_ok ? max->cpu_pct * 10000.0 / (double)max->locks : 0, "<=",
                  RUNBENCH_RENEW_PCT_10K);
    runbench_pairs_targets();
    runbench_list_target();
    runbench_peer_targets();
    runbench_noisy_targets();
    runbench_hostile_targets();
}

/* Judge one run of the table: false (with a message) when it failed. */
static bool
runbench_judge(const struct runbench_run *r, bool smoke)
{
    if (!r->ok || !runbench_sane(r, true)) {
        return false;
    }
    if (smoke && (r->pairs <= 0 || r->errors != 0)) {
        fprintf(stderr, "run_bench: smoke: %s: pairs %.0f, errors %.0f\n", r->label, r->pairs,
                r->errors);
        return false;
    }
    return true;
}

/* The rows BENCH_ONLY=pairs runs: a single lock's (uncontended-64) and the pairs rows. */
static const size_t runbench_pairs_rows[] = {
    RUNBENCH_UNC64, RUNBENCH_PAIRS_SET, RUNBENCH_PAIRS_SINGLES, RUNBENCH_PAIRS_OWN
};

/* BENCH_ONLY=pairs: run those rows; false when one failed. */
static bool
runbench_pairs_only(const char *bin, const char *seconds, const char *target,
                    const char *masters, bool smoke)
{
    struct runbench_run *r;
    bool good = true;
    size_t i;

    for (i = 0; i < sizeof(runbench_pairs_rows) / sizeof(runbench_pairs_rows[0]); i++) {
        r = &runbench_runs[runbench_pairs_rows[i]];
        runbench_one(r, bin, seconds, target, masters, NULL);
        if (!runbench_judge(r, smoke)) {
            good = false;
        }
    }
    if (!good) {
        h_print_daemon_log_tail(20);
    }
    return good;
}

/* BENCH_ONLY=pairs: their rows of the standard table, the pairs table, costs and targets. */
static void
runbench_pairs_only_table(const char *seconds, bool smoke)
{
    size_t i;

    printf("\nredlock-bench, %s s per mode, %d masters (latencies: acquire, us)\n",
           seconds, RUNBENCH_MASTERS);
    printf("  %-18s %5s %10s %8s %8s %8s %9s %7s %11s %13s\n", "run", "conns", "pairs/s",
           "p50", "p90", "p99", "max", "errors", "cpu us/pair", "acq min/max");
    for (i = 0; i < sizeof(runbench_pairs_rows) / sizeof(runbench_pairs_rows[0]); i++) {
        runbench_row(&runbench_runs[runbench_pairs_rows[i]]);
    }
    runbench_pairs_table();
    printf("\ncost per pair (commands and script calls: per master; CPU: us, all five masters, "
           "the daemon, the client)\n");
    printf("  %-22s %9s %9s %11s %11s %11s %11s\n", "run", "commands", "scripts", "masters cpu",
           "daemon cpu", "client cpu", "whole cpu");
    for (i = 0; i < sizeof(runbench_pairs_rows) / sizeof(runbench_pairs_rows[0]); i++) {
        runbench_cost_row(&runbench_runs[runbench_pairs_rows[i]]);
    }
    if (smoke) {
        printf("\ntargets: not judged in a smoke run (make bench judges them)\n");
        return;
    }
    printf("\ntargets (report only)%36s   target\n", "value");
    runbench_pairs_targets();
}

/* The certificates of a TLS setup (h_daemon_opts point into them while it runs). */
static struct {
    char certs[4096];                   /* <test dir>/certs */
    char ca[4200];                      /* ca.crt: the clients verify the daemon with it */
    char crt[4200];                     /* server.crt: the daemon's and the masters' */
    char key[4200];                     /* server.key */
} runbench_tls_files;

/*
 * The TLS setup in the current test: the certificates of
 * tests/tls/make-certs.sh made in <test dir>/certs, five TLS-only
 * masters, and o filled (log level warn) for a daemon that reaches them
 * over TLS and listens on listen.tls.  Returns true, or false with the
 * reason printed.
 */
static bool
runbench_tls_setup(struct h_daemon_opts *o)
{
    char cmd[8192 + 64];
    size_t i;
    int status;

    snprintf(runbench_tls_files.certs, sizeof(runbench_tls_files.certs), "%s/certs", h_dir());
    snprintf(cmd, sizeof(cmd), "sh %s '%s' >'%s/make-certs.log' 2>&1", RUNBENCH_MAKE_CERTS,
             runbench_tls_files.certs, h_dir());
    status = system(cmd);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "run_bench: tls: %s failed (run from the source tree's root; "
                "its output:)\n", RUNBENCH_MAKE_CERTS);
        snprintf(cmd, sizeof(cmd), "cat '%s/make-certs.log' >&2", h_dir());
        if (system(cmd) != 0) {
            fprintf(stderr, "run_bench: tls: %s/make-certs.log cannot be shown\n", h_dir());
        }
        return false;
    }
    snprintf(runbench_tls_files.ca, sizeof(runbench_tls_files.ca), "%s/ca.crt",
             runbench_tls_files.certs);
    snprintf(runbench_tls_files.crt, sizeof(runbench_tls_files.crt), "%s/server.crt",
             runbench_tls_files.certs);
    snprintf(runbench_tls_files.key, sizeof(runbench_tls_files.key), "%s/server.key",
             runbench_tls_files.certs);
    h_tls_masters(runbench_tls_files.certs, false);
    runbench_masters_tls = true;
    for (i = 0; i < RUNBENCH_MASTERS; i++) {
        if (h_add_master(H_MASTER_TLS, NULL) != 0) {
            fprintf(stderr, "run_bench: tls: a TLS master did not start\n");
            return false;
        }
    }
    memset(o, 0, sizeof(*o));
    o->log_level = "warn";
    o->redis_tls_ca_file = runbench_tls_files.ca;
    o->tls_cert_file = runbench_tls_files.crt;
    o->tls_key_file = runbench_tls_files.key;
    return true;
}

/*
 * The TLS rows, on a setup of their own (runbench_tls_setup): a test
 * directory with the certificates, five TLS-only masters, and a daemon
 * reaching them over TLS and listening on listen.tls.  Called with no
 * test running; ends its own.  True when every TLS run passed.
 */
static bool
runbench_tls(const char *bin, const char *seconds)
{
    struct h_daemon_opts o;
    char target[64];
    bool good = true;
    size_t i;

    if (h_begin("bench-tls") != 0) {
        fprintf(stderr, "run_bench: tls: cannot create the test directory\n");
        return false;
    }
    if (!runbench_tls_setup(&o)) {
        h_end();
        return false;
    }
    if (h_start_daemon(&o) != 0) {
        fprintf(stderr, "run_bench: tls: could not start the daemon\n");
        h_end();
        return false;
    }
    snprintf(target, sizeof(target), "127.0.0.1:%d", h_daemon_tls_port());
    for (i = 0; i < RUNBENCH_NTLS; i++) {
        runbench_one(&runbench_tls_runs[i], bin, seconds, target, NULL, runbench_tls_files.ca);
        good = runbench_judge(&runbench_tls_runs[i], runbench_smoke) && good;
    }
    if (!good) {
        h_print_daemon_log_tail(20);
    }
    h_end();
    return good;
}

/*
 * Sessions for sessions-max: the soft descriptor limit (raised to the
 * hard one by then) less the daemon's other descriptors, at most
 * RUNBENCH_SESSIONS_CAP; each of the daemon and redlock-bench has a
 * limit of its own.
 */
static long
runbench_max_sessions(void)
{
    struct rlimit rl;
    long n = RUNBENCH_SESSIONS_CAP;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
        && rl.rlim_cur < (rlim_t)RUNBENCH_SESSIONS_CAP + RUNBENCH_FDS_SPARE
                         + RUNBENCH_CLIENTS_SPARE) {
        n = (long)rl.rlim_cur - RUNBENCH_FDS_SPARE - RUNBENCH_CLIENTS_SPARE;
    }
    return n > RUNBENCH_SMOKE_SESSION ? n : RUNBENCH_SMOKE_SESSION;
}

/*
 * Raise the soft RLIMIT_NOFILE to the hard one (the daemon and
 * redlock-bench inherit it) and check that clients connections fit.
 * Returns 0 or -1 (with a message).
 */
static int
runbench_raise_nofile(long clients)
{
    rlim_t need = (rlim_t)clients + RUNBENCH_FDS_SPARE;
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        fprintf(stderr, "run_bench: getrlimit(RLIMIT_NOFILE): %s\n", strerror(errno));
        return -1;
    }
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            fprintf(stderr, "run_bench: setrlimit(RLIMIT_NOFILE): %s\n", strerror(errno));
            (void)getrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        fprintf(stderr, "run_bench: %ld held connections need RLIMIT_NOFILE >= %llu, "
                "it is %llu (hard %llu): raise it (ulimit -n)\n", clients,
                (unsigned long long)need, (unsigned long long)rl.rlim_cur,
                (unsigned long long)rl.rlim_max);
        return -1;
    }
    return 0;
}

/* ---- the peer rows' packages ---- */

/* True when prog (no slash) is an executable file in one of PATH's directories. */
static bool
runbench_in_path(const char *prog)
{
    const char *path = getenv("PATH"), *p, *colon;
    char full[4096];
    size_t len;

    if (path == NULL) {
        path = "/usr/local/bin:/usr/bin:/bin";
    }
    for (p = path;; p = colon + 1) {
        colon = strchr(p, ':');
        len = colon != NULL ? (size_t)(colon - p) : strlen(p);
        snprintf(full, sizeof(full), "%.*s/%s", (int)len, len > 0 ? p : ".", prog);
        if (access(full, X_OK) == 0) {
            return true;
        }
        if (colon == NULL) {
            return false;
        }
    }
}

/* True when files a and b can both be read and hold the same bytes. */
static bool
runbench_same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa != NULL && fb != NULL;
    int ca, cb;

    while (same) {
        ca = getc(fa);
        cb = getc(fb);
        same = ca == cb;
        if (ca == EOF) {
            break;
        }
    }
    if (fa != NULL) {
        fclose(fa);
    }
    if (fb != NULL) {
        fclose(fb);
    }
    return same;
}

/* Copy file from to file to.  Returns 0, or -1 with the reason in why. */
static int
runbench_copy_file(const char *from, const char *to, char *why, size_t size)
{
    char buf[8192];
    FILE *in = fopen(from, "rb"), *out;
    size_t n;
    int rc = 0;

    if (in == NULL) {
        snprintf(why, size, "%s: %s", from, strerror(errno));
        return -1;
    }
    out = fopen(to, "wb");
    if (out == NULL) {
        snprintf(why, size, "%s: %s", to, strerror(errno));
        fclose(in);
        return -1;
    }
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
        if (fwrite(buf, 1, n, out) != n) {
            rc = -1;
            break;
        }
    }
    if (ferror(in) || fclose(out) != 0) {
        rc = -1;
    }
    fclose(in);
    if (rc != 0) {
        snprintf(why, size, "copying %s to %s failed", from, to);
    }
    return rc;
}

/*
 * The first line of the file at path that starts with prefix (any line
 * when prefix is ""), without its newline, into line; "" when none.
 */
static void
runbench_first_line(const char *path, const char *prefix, char *line, size_t size)
{
    FILE *f = fopen(path, "r");
    bool found = false;

    if (f != NULL) {
        while (!found && fgets(line, (int)size, f) != NULL) {
            found = strncmp(line, prefix, strlen(prefix)) == 0;
        }
        fclose(f);
    }
    if (found) {
        line[strcspn(line, "\n")] = '\0';
    } else {
        line[0] = '\0';
    }
}

/*
 * Run argv with its output appended to out and wait for it, for at most
 * ms (then SIGKILL).  Returns its exit status in the shell's manner, -1
 * when it could not be started, or -2 when it was killed at the deadline.
 */
static int
runbench_run_for(const char *const argv[], const char *out, int64_t ms)
{
    struct runbench_child c;

    memset(&c, 0, sizeof(c));
    c.out = out;
    c.pid = h_spawn(argv, out);
    if (c.pid < 0) {
        return -1;
    }
    if (!h_wait_until(runbench_reaped, &c, ms)) {
        kill(c.pid, SIGKILL);
        while (waitpid(c.pid, &c.status, 0) < 0 && errno == EINTR) {
        }
        return -2;
    }
    return h_decode_status(c.status);
}

/* The peer rows are skipped: say why, once, on stderr and in the table. */
static bool
runbench_peer_skipped(const char *why)
{
    snprintf(runbench_peer_skip, sizeof(runbench_peer_skip), "%s", why);
    fprintf(stderr, "run_bench: peer rows skipped: %s\n", why);
    return false;
}

/*
 * The peer rows need node (one that can run peer.js: `peer.js --check`),
 * and redlock, ioredis and redis-semaphore at the versions of
 * tests/bench/peer/package-lock.json, installed in dir/node_modules.
 * When dir holds a copy of that lockfile and an install that finished
 * (node_modules/.package-lock.json, which npm writes last), nothing is
 * installed; otherwise package.json and the lockfile are copied to dir
 * and `npm ci` installs them there (output: dir/npm-ci.log; killed after
 * RUNBENCH_NPM_MS).  True when the rows can run; otherwise false, with
 * one line on stderr saying why they are skipped (kept for the table
 * too).  Never a failure of the bench.
 */
static bool
runbench_peer_setup(const char *dir)
{
    char lock[4200], pkg[4200], done[4200], log[4200], check[4200], why[5200], err[600];
    const char *env = getenv("BENCH_PEER");
    const char *check_argv[] = { "node", RUNBENCH_PEER_DIR "/peer.js", "--check", NULL };
    const char *npm_argv[] = { "npm", "ci", "--prefix", dir, "--no-audit", "--no-fund",
                               "--loglevel=error", "--fetch-retries=1",
                               "--fetch-timeout=30000", NULL };
    int code;

    snprintf(lock, sizeof(lock), "%s/package-lock.json", dir);
    snprintf(pkg, sizeof(pkg), "%s/package.json", dir);
    snprintf(done, sizeof(done), "%s/node_modules/.package-lock.json", dir);
    snprintf(log, sizeof(log), "%s/npm-ci.log", dir);
    snprintf(check, sizeof(check), "%s/peer-check.out", h_dir());
    if (env != NULL && strcmp(env, "0") == 0) {
        return runbench_peer_skipped("BENCH_PEER=0");
    }
    if (access(RUNBENCH_PEER_DIR "/peer.js", R_OK) != 0) {
        return runbench_peer_skipped("no " RUNBENCH_PEER_DIR "/peer.js (run from the source "
                                     "tree's root)");
    }
    if (!runbench_in_path("node")) {
        return runbench_peer_skipped("node is not in PATH (they need Node.js and npm)");
    }
    code = runbench_run_for(check_argv, check, RUNBENCH_CHECK_MS);
    if (code != 0) {
        runbench_first_line(check, "", err, sizeof(err));
        snprintf(why, sizeof(why), "node %s --check: %s", RUNBENCH_PEER_DIR "/peer.js",
                 err[0] != '\0' ? err : code == -2 ? "no answer" : "failed");
        return runbench_peer_skipped(why);
    }
    if (runbench_same_file(RUNBENCH_PEER_DIR "/package-lock.json", lock)
        && runbench_same_file(RUNBENCH_PEER_DIR "/package.json", pkg)
        && access(done, R_OK) == 0) {
        return true;    /* installed from this lockfile already */
    }
    if (!runbench_in_path("npm")) {
        snprintf(why, sizeof(why), "npm is not in PATH (it installs their pinned packages "
                 "into %s)", dir);
        return runbench_peer_skipped(why);
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(why, sizeof(why), "mkdir %s: %s", dir, strerror(errno));
        return runbench_peer_skipped(why);
    }
    if (runbench_copy_file(RUNBENCH_PEER_DIR "/package.json", pkg, why, sizeof(why)) != 0
        || runbench_copy_file(RUNBENCH_PEER_DIR "/package-lock.json", lock, why,
                              sizeof(why)) != 0) {
        return runbench_peer_skipped(why);
    }
    fprintf(stderr, "run_bench: peer rows: npm ci into %s (the pinned packages of %s)\n", dir,
            RUNBENCH_PEER_DIR "/package-lock.json");
    (void)unlink(log);
    code = runbench_run_for(npm_argv, log, RUNBENCH_NPM_MS);
    if (code == -1) {
        return runbench_peer_skipped("npm could not be started");
    }
    if (code == -2) {
        snprintf(why, sizeof(why), "npm ci did not finish within %d s (see %s)",
                 RUNBENCH_NPM_MS / 1000, log);
        return runbench_peer_skipped(why);
    }
    if (code != 0 || access(done, R_OK) != 0) {
        runbench_first_line(log, "npm error", err, sizeof(err));
        if (err[0] == '\0') {
            runbench_first_line(log, "npm ERR!", err, sizeof(err));
        }
        snprintf(why, sizeof(why), "npm ci failed (exit %d, see %s)%s%s", code, log,
                 err[0] != '\0' ? ": " : "", err);
        return runbench_peer_skipped(why);
    }
    return true;
}

/* Where the peer rows' packages go: BENCH_PEER_DIR, or peer/ beside redlock-bench. */
static void
runbench_peer_dir(char *dir, size_t size, const char *bin)
{
    const char *env = getenv("BENCH_PEER_DIR"), *slash = strrchr(bin, '/');

    if (env != NULL && env[0] != '\0') {
        snprintf(dir, size, "%s", env);
    } else if (slash != NULL) {
        snprintf(dir, size, "%.*s/peer", (int)(slash - bin), bin);
    } else {
        snprintf(dir, size, "build/peer");
    }
}

/* build/redlock-noisy: REDLOCK_NOISY_BIN, or beside redlock-bench. */
static const char *
runbench_noisy_bin(char *path, size_t size, const char *bin)
{
    const char *env = getenv("REDLOCK_NOISY_BIN"), *slash = strrchr(bin, '/');

    if (env != NULL && env[0] != '\0') {
        snprintf(path, size, "%s", env);
    } else if (slash != NULL) {
        snprintf(path, size, "%.*s/redlock-noisy", (int)(slash - bin), bin);
    } else {
        snprintf(path, size, "./build/redlock-noisy");
    }
    return path;
}

/* ---- against a base: this build's daemon and another's, in one run ---- */

#define RUNBENCH_CMP_ROUNDS     6       /* rounds per row (BENCH_COMPARE_ROUNDS) */
#define RUNBENCH_CMP_ROUNDS_MAX 12      /* at most */
#define RUNBENCH_CMP_MEM_ROUNDS 2       /* memory-session rounds at most (2 fresh daemons each) */
#define RUNBENCH_CMP_RUN_MIN_S  1.0     /* shortest run: BENCH_SECONDS / rounds, at least this */
#define RUNBENCH_CMP_PPS        0.90    /* slower: pairs/s ratio below this */
#define RUNBENCH_CMP_TIME       1.15    /* slower: p50 or cpu us/pair ratio above this */
#define RUNBENCH_CMP_MEM        1.10    /* slower: memory-session bytes per lock ratio above */
#define RUNBENCH_CMP_RENEW      1.25    /* slower: its renewal CPU ratio above this */
#define RUNBENCH_SMOKE_CMP_S    "0.5"   /* --smoke: seconds of each run of its one row */

/* The two daemons of a comparison. */
enum runbench_side {
    RUNBENCH_CURRENT,                   /* this build's (REDLOCKD_BIN) */
    RUNBENCH_BASE,                      /* the base's (REDLOCKD_BASE_BIN) */
    RUNBENCH_SIDES
};

/*
 * One row of the comparison: a row of the standard table (or of the TLS
 * rows), run rounds times on each daemon, and each run's figures.
 */
struct runbench_cmp {
    size_t      row;                    /* index in runbench_runs, or runbench_tls_runs */
    bool        tls;                    /* a TLS row (on the TLS setup) */
    bool        smoke;                  /* runs in --smoke too */
    bool        failed;                 /* a run failed (no result, or its checks) */
    int         runs[RUNBENCH_SIDES];   /* runs with a result, each side */
    double      pps[RUNBENCH_SIDES][RUNBENCH_CMP_ROUNDS_MAX];  /* pairs/s of each run */
    double      p50[RUNBENCH_SIDES][RUNBENCH_CMP_ROUNDS_MAX];  /* acquire p50, us */
    double      cpu[RUNBENCH_SIDES][RUNBENCH_CMP_ROUNDS_MAX];  /* daemon cpu us/pair; -1 none */
};

static struct runbench_cmp runbench_cmp_rows[] = {
    { .row = RUNBENCH_UNC1 },
    { .row = RUNBENCH_UNC64, .smoke = true },
    { .row = RUNBENCH_HOT50 },
    { .row = RUNBENCH_COUNTED64 },
    { .row = RUNBENCH_SHARED64 },
    { .row = RUNBENCH_UNC1F },
    { .row = RUNBENCH_UNC64F },
    { .row = RUNBENCH_UNC1_TLS, .tls = true },
    { .row = RUNBENCH_UNC64_TLS, .tls = true },
};

#define RUNBENCH_NCMP   (sizeof(runbench_cmp_rows) / sizeof(runbench_cmp_rows[0]))

/* memory-session on each daemon: bytes per lock and the renewal CPU, each run. */
static struct {
    bool        ran;                    /* the memory rows were run */
    bool        failed;                 /* a hold run failed */
    int         runs[RUNBENCH_SIDES];   /* hold runs measured, each side */
    double      per_lock[RUNBENCH_SIDES][RUNBENCH_CMP_ROUNDS_MAX]; /* bytes per lock */
    double      cpu_pct[RUNBENCH_SIDES][RUNBENCH_CMP_ROUNDS_MAX];  /* renewal CPU, %; -1 none */
} runbench_cmp_mem;

/* The comparison's settings (main fills them from the environment). */
static struct {
    bool        on;                     /* compare (REDLOCKD_BASE_BIN, or --smoke) */
    const char *name;                   /* the base as the table names it */
    char        bin[RUNBENCH_SIDES][4096];  /* each side's daemon binary */
    int         rounds;                 /* rounds per row */
    char        seconds[32];            /* --duration of each run */
    size_t      daemon[RUNBENCH_SIDES]; /* each side's daemon in the current test */
} runbench_cmp;

/*
 * Start each side's daemon on the current test's masters with o (the
 * harness reads REDLOCKD_BIN at each start; it is this build's again
 * afterwards).  Returns true, or false with the reason printed.
 */
static bool
runbench_cmp_daemons(const struct h_daemon_opts *o)
{
    int side;

    for (side = 0; side < RUNBENCH_SIDES; side++) {
        if (setenv("REDLOCKD_BIN", runbench_cmp.bin[side], 1) != 0
            || h_start_daemon(o) != 0) {
            fprintf(stderr, "run_bench: compare: the %s daemon (%s) did not start\n",
                    side == RUNBENCH_CURRENT ? "current" : "base", runbench_cmp.bin[side]);
            (void)setenv("REDLOCKD_BIN", runbench_cmp.bin[RUNBENCH_CURRENT], 1);
            return false;
        }
        runbench_cmp.daemon[side] = h_current_daemon();
    }
    return setenv("REDLOCKD_BIN", runbench_cmp.bin[RUNBENCH_CURRENT], 1) == 0;
}

/*
 * Before round round: both daemons restarted with o in each other's
 * place (h_restart_daemon: the same slot, port and log, the other
 * binary), in odd rounds the base's binary in the first daemon's slot,
 * in even ones this build's.  Each side thus runs half its rounds as
 * either process of the test, so nothing that favours one process (in
 * early self-comparisons the one started first won uncontended-64 in
 * six rounds out of six, whichever binary it ran; load, perhaps) can
 * favour one side.  Returns true, or false with the reason printed.
 */
static bool
runbench_cmp_place(const struct h_daemon_opts *o, int round)
{
    size_t slot[RUNBENCH_SIDES];
    int side;

    slot[RUNBENCH_CURRENT] = (size_t)(round % 2);
    slot[RUNBENCH_BASE] = (size_t)(1 - round % 2);
    if (runbench_cmp.daemon[RUNBENCH_CURRENT] == slot[RUNBENCH_CURRENT]) {
        return true;
    }
    for (side = 0; side < RUNBENCH_SIDES; side++) {
        h_use_daemon(slot[side]);
        (void)h_stop_daemon();
    }
    for (side = 0; side < RUNBENCH_SIDES; side++) {
        h_use_daemon(slot[side]);
        if (setenv("REDLOCKD_BIN", runbench_cmp.bin[side], 1) != 0
            || h_restart_daemon(o) != 0) {
            fprintf(stderr, "run_bench: compare: the %s daemon (%s) did not start again\n",
                    side == RUNBENCH_CURRENT ? "current" : "base", runbench_cmp.bin[side]);
            (void)setenv("REDLOCKD_BIN", runbench_cmp.bin[RUNBENCH_CURRENT], 1);
            return false;
        }
        runbench_cmp.daemon[side] = slot[side];
    }
    return setenv("REDLOCKD_BIN", runbench_cmp.bin[RUNBENCH_CURRENT], 1) == 0;
}

/*
 * One run of a comparison row on one side's daemon: a fresh copy of the
 * row (its label, mode, connections and arguments; its output file
 * <label>-<side>-<round>), judged as the standard rows are.  Its
 * figures are kept in c.  False when it failed.
 */
static bool
runbench_cmp_one(struct runbench_cmp *c, int side, int round, const char *bin,
                 const char *masters, const char *tls_ca, bool use_unix)
{
    const struct runbench_run *row = c->tls ? &runbench_tls_runs[c->row] : &runbench_runs[c->row];
    struct runbench_run r;
    char label[96], target[4096];
    int n;

    memset(&r, 0, sizeof(r));
    snprintf(label, sizeof(label), "%s-%s-%d", row->label,
             side == RUNBENCH_CURRENT ? "current" : "base", round + 1);
    r.label = label;
    r.mode = row->mode;
    r.conns = row->conns;
    memcpy(r.extra, row->extra, sizeof(r.extra));
    h_use_daemon(runbench_cmp.daemon[side]);
    if (c->tls) {
        snprintf(target, sizeof(target), "127.0.0.1:%d", h_daemon_tls_port());
    } else {
        runbench_target(target, sizeof(target), use_unix);
    }
    runbench_one(&r, bin, runbench_cmp.seconds, target, masters, tls_ca);
    if (!runbench_judge(&r, runbench_smoke)) {
        c->failed = true;
        h_print_daemon_log_tail(20);
        return false;
    }
    n = c->runs[side]++;
    c->pps[side][n] = r.pps;
    c->p50[side][n] = r.p50;
    c->cpu[side][n] = r.cpu_ok ? r.cpu_us : -1;
    return true;
}

/*
 * The comparison rows of one setup (tls or not; in --smoke only those
 * marked smoke) on the daemons started with o, rounds times: each
 * round places the daemons (runbench_cmp_place), then runs every row
 * once on each, current then base in even rounds and base then current
 * in odd ones (ABBA), so that load from elsewhere that grows or fades
 * weighs on both sides alike.  False when a run or a restart failed.
 */
static bool
runbench_cmp_setup_rows(bool tls, const struct h_daemon_opts *o, const char *bin,
                        const char *masters, const char *tls_ca, bool use_unix)
{
    struct runbench_cmp *c;
    bool good = true;
    int round, first;
    size_t i;

    for (round = 0; round < runbench_cmp.rounds; round++) {
        if (!runbench_cmp_place(o, round)) {
            return false;
        }
        first = round % 2 == 0 ? RUNBENCH_CURRENT : RUNBENCH_BASE;
        for (i = 0; i < RUNBENCH_NCMP; i++) {
            c = &runbench_cmp_rows[i];
            if (c->tls != tls || (runbench_smoke && !c->smoke)) {
                continue;
            }
            good = runbench_cmp_one(c, first, round, bin, masters, tls_ca, use_unix) && good;
            good = runbench_cmp_one(c, RUNBENCH_SIDES - 1 - first, round, bin, masters, tls_ca,
                                    use_unix) && good;
        }
    }
    return good;
}

/*
 * memory-session on each side, interleaved as the rows are, in at most
 * RUNBENCH_CMP_MEM_ROUNDS rounds (memory is steadier than time, and each
 * run grants 10000 locks): each run on a fresh daemon of that side's
 * binary (runbench_hold_one), its bytes per lock and renewal CPU over
 * window_ms kept.  False when a hold run failed.
 */
static bool
runbench_cmp_memory(const char *bin, bool use_unix, int64_t window_ms)
{
    struct runbench_hold h;
    char label[64];
    bool good = true;
    int round, k, side, n;

    runbench_cmp_mem.ran = true;
    for (round = 0; round < runbench_cmp.rounds && round < RUNBENCH_CMP_MEM_ROUNDS; round++) {
        for (k = 0; k < RUNBENCH_SIDES; k++) {
            side = round % 2 == 0 ? k : RUNBENCH_SIDES - 1 - k;
            h = runbench_session;
            snprintf(label, sizeof(label), "%s-%s-%d", runbench_session.label,
                     side == RUNBENCH_CURRENT ? "current" : "base", round + 1);
            h.label = label;
            if (setenv("REDLOCKD_BIN", runbench_cmp.bin[side], 1) != 0
                || !runbench_hold_one(&h, bin, use_unix, window_ms)) {
                h_print_daemon_log_tail(20);
                runbench_cmp_mem.failed = true;
                good = false;
                continue;
            }
            n = runbench_cmp_mem.runs[side]++;
            runbench_cmp_mem.per_lock[side][n] = runbench_per_lock(&h);
            runbench_cmp_mem.cpu_pct[side][n] = h.cpu_ok ? h.cpu_pct : -1;
        }
    }
    (void)setenv("REDLOCKD_BIN", runbench_cmp.bin[RUNBENCH_CURRENT], 1);
    return good;
}

/* "127.0.0.1:<port>,..." of the current test's masters, into buf. */
static void
runbench_masters_list(char *buf, size_t size)
{
    size_t i, len = 0;

    buf[0] = '\0';
    for (i = 0; i < RUNBENCH_MASTERS && len < size; i++) {
        len += (size_t)snprintf(buf + len, size - len, "%s127.0.0.1:%d", i > 0 ? "," : "",
                                h_master_port(i));
    }
}

/*
 * The comparison: a test of its own with five masters and both daemons
 * for the plain rows (then, not in --smoke, memory-session on fresh
 * daemons of each side), then a TLS test of its own with both daemons
 * for the TLS rows.  Called with no test running.  False when a run or
 * a setup failed.
 */
static bool
runbench_compare(const char *bin, bool use_unix, int64_t window_ms)
{
    struct h_daemon_opts o;
    char masters[H_MASTERS_MAX * 24];
    bool good;

    fprintf(stderr, "run_bench: compare against %s (%s), %d round%s of %s s per row\n",
            runbench_cmp.name, runbench_cmp.bin[RUNBENCH_BASE], runbench_cmp.rounds,
            runbench_cmp.rounds == 1 ? "" : "s", runbench_cmp.seconds);
    memset(&o, 0, sizeof(o));
    o.log_level = "warn";
    runbench_masters_tls = false;
    if (h_begin("bench-compare") != 0 || h_start_masters(RUNBENCH_MASTERS) != 0
        || !runbench_cmp_daemons(&o)) {
        fprintf(stderr, "run_bench: compare: could not start the masters and both daemons\n");
        h_end();
        return false;
    }
    runbench_masters_list(masters, sizeof(masters));
    good = runbench_cmp_setup_rows(false, &o, bin, masters, NULL, use_unix);
    if (!runbench_smoke) {
        good = runbench_cmp_memory(bin, use_unix, window_ms) && good;
    }
    h_end();
    if (runbench_smoke) {
        return good;
    }
    if (h_begin("bench-compare-tls") != 0 || !runbench_tls_setup(&o)
        || !runbench_cmp_daemons(&o)) {
        fprintf(stderr, "run_bench: compare: could not start the TLS masters and both "
                "daemons\n");
        h_end();
        return false;
    }
    good = runbench_cmp_setup_rows(true, &o, bin, NULL, runbench_tls_files.ca, false) && good;
    h_end();
    return good;
}

/* The median of the n values of v that are >= 0 (-1 when none). */
static double
runbench_median(const double *v, int n)
{
    double s[RUNBENCH_CMP_ROUNDS_MAX], t;
    int i, j, m = 0;

    for (i = 0; i < n; i++) {
        if (v[i] >= 0) {
            s[m++] = v[i];
        }
    }
    for (i = 1; i < m; i++) {
        for (j = i; j > 0 && s[j - 1] > s[j]; j--) {
            t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    }
    if (m == 0) {
        return -1;
    }
    return m % 2 == 1 ? s[m / 2] : (s[m / 2 - 1] + s[m / 2]) / 2;
}

/*
 * One measure of a comparison row: the median over the rounds of each
 * side (with that many decimals), and the ratio: the median of the
 * rounds' own ratios (a round's current over the same round's base,
 * measured a few seconds apart), "n/a" when a side has none.  Returns
 * the ratio, or -1.
 */
static double
runbench_cmp_cells(const double v[RUNBENCH_SIDES][RUNBENCH_CMP_ROUNDS_MAX],
                   const int runs[RUNBENCH_SIDES], int decimals)
{
    double cur = runbench_median(v[RUNBENCH_CURRENT], runs[RUNBENCH_CURRENT]);
    double base = runbench_median(v[RUNBENCH_BASE], runs[RUNBENCH_BASE]);
    double q[RUNBENCH_CMP_ROUNDS_MAX], ratio;
    int i, n = 0;

    for (i = 0; i < runs[RUNBENCH_CURRENT] && i < runs[RUNBENCH_BASE]; i++) {
        if (v[RUNBENCH_CURRENT][i] >= 0 && v[RUNBENCH_BASE][i] > 0) {
            q[n++] = v[RUNBENCH_CURRENT][i] / v[RUNBENCH_BASE][i];
        }
    }
    ratio = runbench_median(q, n);
    if (cur < 0 || base <= 0 || ratio < 0) {
        printf(" %9s %9s %6s", "-", "-", "n/a");
        return -1;
    }
    printf(" %9.*f %9.*f %6.2f", decimals, cur, decimals, base, ratio);
    return ratio;
}

/* The range of the rounds' own pairs/s ratios (current / base of one round), "lo-hi". */
static void
runbench_cmp_spread(const struct runbench_cmp *c)
{
    double lo = 0, hi = 0, q;
    int i, n = c->runs[RUNBENCH_CURRENT] < c->runs[RUNBENCH_BASE]
               ? c->runs[RUNBENCH_CURRENT] : c->runs[RUNBENCH_BASE];

    for (i = 0; i < n; i++) {
        q = c->pps[RUNBENCH_BASE][i] > 0 ? c->pps[RUNBENCH_CURRENT][i] / c->pps[RUNBENCH_BASE][i]
                                         : 0;
        lo = i == 0 || q < lo ? q : lo;
        hi = i == 0 || q > hi ? q : hi;
    }
    if (n == 0) {
        printf(" %11s", "-");
    } else {
        printf(" %5.2f-%-5.2f", lo, hi);
    }
}

/* One row of the comparison table; true when it is slower beyond the noise band. */
static bool
runbench_cmp_row(const struct runbench_cmp *c)
{
    const struct runbench_run *row = c->tls ? &runbench_tls_runs[c->row] : &runbench_runs[c->row];
    double pps, p50, cpu;
    bool slower;

    printf("  %-20s", row->label);
    if (c->failed || c->runs[RUNBENCH_CURRENT] == 0 || c->runs[RUNBENCH_BASE] == 0) {
        printf(" (failed)\n");
        return false;
    }
    pps = runbench_cmp_cells(c->pps, c->runs, 0);
    p50 = runbench_cmp_cells(c->p50, c->runs, 0);
    cpu = runbench_cmp_cells(c->cpu, c->runs, 1);
    runbench_cmp_spread(c);
    slower = (pps >= 0 && pps < RUNBENCH_CMP_PPS) || p50 > RUNBENCH_CMP_TIME
             || cpu > RUNBENCH_CMP_TIME;
    printf("  %s%s%s%s\n", slower ? "slower:" : "ok",
           pps >= 0 && pps < RUNBENCH_CMP_PPS ? " pairs/s" : "",
           p50 > RUNBENCH_CMP_TIME ? " p50" : "", cpu > RUNBENCH_CMP_TIME ? " cpu" : "");
    return slower;
}

/* The memory-session line of the comparison table; true when it is slower (larger). */
static bool
runbench_cmp_mem_row(void)
{
    double per_lock, cpu;
    bool slower;

    printf("\n  %-20s %9s %9s %6s %9s %9s %6s   (%d round%s, a fresh daemon a run)\n", "",
           "bytes/lk", "base", "ratio", "renew %", "base", "ratio",
           runbench_cmp_mem.runs[RUNBENCH_CURRENT],
           runbench_cmp_mem.runs[RUNBENCH_CURRENT] == 1 ? "" : "s");
    printf("  %-20s", runbench_session.label);
    if (runbench_cmp_mem.failed || runbench_cmp_mem.runs[RUNBENCH_CURRENT] == 0
        || runbench_cmp_mem.runs[RUNBENCH_BASE] == 0) {
        printf(" (failed)\n");
        return false;
    }
    per_lock = runbench_cmp_cells(runbench_cmp_mem.per_lock, runbench_cmp_mem.runs, 0);
    cpu = runbench_cmp_cells(runbench_cmp_mem.cpu_pct, runbench_cmp_mem.runs, 2);
    slower = per_lock > RUNBENCH_CMP_MEM || cpu > RUNBENCH_CMP_RENEW;
    printf("  %s%s%s\n", slower ? "slower:" : "ok", per_lock > RUNBENCH_CMP_MEM ? " memory" : "",
           cpu > RUNBENCH_CMP_RENEW ? " renewal cpu" : "");
    return slower;
}

/*
 * The comparison table: each row's medians over the rounds on this
 * build's daemon and on the base's, their ratios (current / base), the
 * range of the rounds' own pairs/s ratios, and whether the row is
 * slower beyond the noise band.  Reported, never judged: the exit
 * status does not depend on it.
 */
static void
runbench_cmp_table(void)
{
    size_t i, slower = 0;

    printf("\nagainst %s (this build's daemon / the base's, on the same masters at the same "
           "time:\n%d round%s of a %s s run per row on each, interleaved current, base, base, "
           "current, ...;\nthe two daemons swap places each round; medians over the rounds; "
           "ratio: the median\nof the rounds' own ratios current / base; spread: the lowest and "
           "highest of them for\npairs/s; slower: pairs/s ratio < %.2f, or p50 or cpu us/pair "
           "ratio > %.2f, or bytes\nper lock > %.2f or renewal CPU > %.2f; report only)\n",
           runbench_cmp.name, runbench_cmp.rounds, runbench_cmp.rounds == 1 ? "" : "s",
           runbench_cmp.seconds, RUNBENCH_CMP_PPS, RUNBENCH_CMP_TIME, RUNBENCH_CMP_MEM,
           RUNBENCH_CMP_RENEW);
    printf("  %-20s %9s %9s %6s %9s %9s %6s %9s %9s %6s %11s\n", "run", "pairs/s", "base",
           "ratio", "p50 us", "base", "ratio", "cpu/pair", "base", "ratio", "spread");
    for (i = 0; i < RUNBENCH_NCMP; i++) {
        if (!runbench_smoke || runbench_cmp_rows[i].smoke) {
            slower += runbench_cmp_row(&runbench_cmp_rows[i]);
        }
    }
    if (runbench_cmp_mem.ran) {
        slower += runbench_cmp_mem_row();
    }
    printf("  %zu row%s slower than %s beyond the noise band\n", slower, slower == 1 ? "" : "s",
           runbench_cmp.name);
}

/*
 * The comparison's settings from the environment: REDLOCKD_BASE_BIN
 * (the base's daemon; in --smoke without it, this build's daemon
 * against itself), BENCH_BASE_NAME, BENCH_COMPARE_ROUNDS; the current
 * daemon is REDLOCKD_BIN's.  Returns 0, or -1 when the base cannot be
 * run (the reason printed).
 */
static int
runbench_cmp_init(const char *seconds)
{
    const char *cur = getenv("REDLOCKD_BIN"), *base = getenv("REDLOCKD_BASE_BIN");
    const char *name = getenv("BENCH_BASE_NAME"), *rounds = getenv("BENCH_COMPARE_ROUNDS");

    if (cur == NULL || cur[0] == '\0') {
        cur = "./build/redlockd";
    }
    runbench_cmp.on = runbench_smoke || (base != NULL && base[0] != '\0');
    if (!runbench_cmp.on) {
        return 0;
    }
    if (base == NULL || base[0] == '\0') {
        base = cur;
        name = "itself";
    }
    if (access(base, X_OK) != 0) {
        fprintf(stderr, "run_bench: REDLOCKD_BASE_BIN=%s: %s\n", base, strerror(errno));
        return -1;
    }
    snprintf(runbench_cmp.bin[RUNBENCH_CURRENT], sizeof(runbench_cmp.bin[0]), "%s", cur);
    snprintf(runbench_cmp.bin[RUNBENCH_BASE], sizeof(runbench_cmp.bin[0]), "%s", base);
    runbench_cmp.name = name != NULL && name[0] != '\0' ? name : base;
    runbench_cmp.rounds = runbench_smoke ? 1 : rounds != NULL && atoi(rounds) > 0
                          ? atoi(rounds) : RUNBENCH_CMP_ROUNDS;
    if (runbench_cmp.rounds > RUNBENCH_CMP_ROUNDS_MAX) {
        runbench_cmp.rounds = RUNBENCH_CMP_ROUNDS_MAX;
    }
    /* A row's BENCH_SECONDS on each daemon, in rounds runs of at least 1 s. */
    snprintf(runbench_cmp.seconds, sizeof(runbench_cmp.seconds), "%.2f", runbench_smoke
             ? atof(RUNBENCH_SMOKE_CMP_S) : atof(seconds) / runbench_cmp.rounds
             > RUNBENCH_CMP_RUN_MIN_S ? atof(seconds) / runbench_cmp.rounds
             : RUNBENCH_CMP_RUN_MIN_S);
    return 0;
}

int
main(int argc, char **argv)
{
    struct h_daemon_opts o;
    const char *bin = getenv("REDLOCK_BENCH_BIN"), *env = getenv("BENCH_SECONDS");
    const char *unix_env = getenv("BENCH_UNIX"), *only = getenv("BENCH_ONLY");
    char masters[H_MASTERS_MAX * 24], target[4096], seconds[32], peer_dir[4096];
    char noisy_bin[4096], hostile_bin[4096];
    bool smoke = false, good = true, use_unix;
    int64_t window_ms;
    size_t i;

    if (argc == 2 && strcmp(argv[1], "--smoke") == 0) {
        smoke = runbench_smoke = true;
    } else if (argc != 1) {
        fprintf(stderr, "usage: run_bench [--smoke]   (environment: BENCH_SECONDS, "
                "REDLOCKD_BIN, REDLOCKD_BASE_BIN, REDLOCK_BENCH_BIN, BENCH_UNIX)\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (bin == NULL || bin[0] == '\0') {
        bin = "./build/redlock-bench";
    }
    snprintf(seconds, sizeof(seconds), "%s",
             smoke ? "1" : env != NULL && atof(env) > 0 ? env : "10");
    use_unix = unix_env != NULL && strcmp(unix_env, "1") == 0;
    window_ms = (int64_t)(atof(seconds) * 1000);
    if (smoke) {
        runbench_session.locks = runbench_session.conns = RUNBENCH_SMOKE_SESSION;
        runbench_counted.locks = runbench_counted.conns = RUNBENCH_SMOKE_COUNTED;
        runbench_counted.limit = RUNBENCH_SMOKE_COUNTED / RUNBENCH_COUNTED_NAMES;
        runbench_lease.locks = RUNBENCH_SMOKE_LEASE;
        runbench_settle_ms = RUNBENCH_SMOKE_SETTLE_MS;
        window_ms = RUNBENCH_SMOKE_CPU_MS;
    } else if (window_ms < RUNBENCH_CPU_MIN_MS) {
        window_ms = RUNBENCH_CPU_MIN_MS;
    }
    if (runbench_cmp_init(seconds) != 0) {
        return 1;
    }
    if (only != NULL && strcmp(only, "compare") == 0 && !runbench_cmp.on) {
        fprintf(stderr, "run_bench: BENCH_ONLY=compare needs REDLOCKD_BASE_BIN (make "
                "bench-compare BASE=<commit>)\n");
        return 2;
    }
    if (runbench_raise_nofile((runbench_session.conns > runbench_counted.conns
                               ? runbench_session.conns : runbench_counted.conns)
                              + RUNBENCH_CLIENTS_SPARE) != 0
        || h_suite_init() != 0) {
        return 1;
    }
    runbench_session_max.locks = runbench_session_max.conns
        = smoke ? RUNBENCH_SMOKE_SESSION : runbench_max_sessions();
    if (only != NULL && strcmp(only, "compare") == 0) {
        /* The comparison alone (on masters and daemons of its own). */
        good = runbench_compare(bin, use_unix, window_ms);
        h_suite_cleanup();
        runbench_cmp_table();
        return good ? 0 : 1;
    }
    memset(&o, 0, sizeof(o));
    o.log_level = "warn";
    if (h_begin("bench") != 0 || h_start_masters(RUNBENCH_MASTERS) != 0
        || h_start_daemon(&o) != 0) {
        fprintf(stderr, "run_bench: could not start the masters and the daemon\n");
        h_suite_cleanup();
        return 1;
    }
    runbench_masters_list(masters, sizeof(masters));
    runbench_target(target, sizeof(target), use_unix);
    if (only != NULL && strcmp(only, "list") == 0) {
        /* The list-cpu rows alone. */
        good = runbench_list_rows(bin, use_unix, seconds);
        h_end();
        h_suite_cleanup();
        runbench_list_table(seconds);
        if (!smoke) {
            printf("\ntargets (report only)%36s   target\n", "value");
            runbench_list_target();
        }
        return good ? 0 : 1;
    }
    if (only != NULL && strcmp(only, "pairs") == 0) {
        /* uncontended-64 (a single lock's cost) and the pairs rows alone. */
        good = runbench_pairs_only(bin, seconds, target, masters, smoke);
        h_end();
        h_suite_cleanup();
        runbench_pairs_only_table(seconds, smoke);
        return good ? 0 : 1;
    }
    if (only != NULL && strcmp(only, "noisy") == 0) {
        /* The noisy-neighbour rows alone (each starts a daemon of its own). */
        good = runbench_noisy(runbench_noisy_bin(noisy_bin, sizeof(noisy_bin), bin), seconds,
                              smoke);
        h_end();
        h_suite_cleanup();
        runbench_noisy_table();
        if (!smoke) {
            printf("\ntargets (report only)%36s   target\n", "value");
            runbench_noisy_targets();
        }
        return good ? 0 : 1;
    }
    if (only != NULL && strcmp(only, "hostile") == 0) {
        /* The hostile row alone (on a daemon of its own). */
        good = runbench_hostile(runbench_hostile_bin(hostile_bin, sizeof(hostile_bin), bin),
                                seconds, smoke);
        h_end();
        h_suite_cleanup();
        runbench_hostile_table();
        if (!smoke) {
            printf("\ntargets (report only)%36s   target\n", "value");
            runbench_hostile_targets();
        }
        return good ? 0 : 1;
    }
    for (i = 0; i < RUNBENCH_NRUNS; i++) {
        runbench_one(&runbench_runs[i], bin,
                     smoke && runbench_runs[i].smoke_seconds != NULL
                     ? runbench_runs[i].smoke_seconds : seconds, target, masters, NULL);
        if (!runbench_judge(&runbench_runs[i], smoke)) {
            good = false;
        }
    }
    /* The peer rows: the same daemon and masters, driven from Node.js. */
    runbench_peer_dir(peer_dir, sizeof(peer_dir), bin);
    if (runbench_peer_setup(peer_dir)) {
        for (i = 0; i < RUNBENCH_NPEERS; i++) {
            runbench_peer_one(&runbench_peer_runs[i], seconds, target, masters, peer_dir);
            if (!runbench_judge(&runbench_peer_runs[i], smoke)) {
                good = false;
            }
        }
        runbench_peers_ran = true;
    }
    if (!good) {
        h_print_daemon_log_tail(20);
    }
    runbench_idle_measure(smoke ? RUNBENCH_SMOKE_IDLE_MS : RUNBENCH_IDLE_MS);
    if (!runbench_noisy(runbench_noisy_bin(noisy_bin, sizeof(noisy_bin), bin), seconds, smoke)) {
        good = false;
    }
    if (!runbench_hostile(runbench_hostile_bin(hostile_bin, sizeof(hostile_bin), bin), seconds,
                          smoke)) {
        good = false;
    }
    if (!runbench_hold_one(&runbench_session, bin, use_unix, window_ms)) {
        h_print_daemon_log_tail(20);
        good = false;
    }
    if (!runbench_hold_one(&runbench_counted, bin, use_unix, window_ms)) {
        h_print_daemon_log_tail(20);
        good = false;
    }
    if (!runbench_hold_one(&runbench_session_max, bin, use_unix, window_ms)) {
        h_print_daemon_log_tail(20);
        good = false;
    }
    if (!runbench_hold_one(&runbench_lease, bin, use_unix, window_ms)) {
        h_print_daemon_log_tail(20);
        good = false;
    }
    if (!runbench_list_rows(bin, use_unix, seconds)) {
        good = false;
    }
    h_end();
    if (!runbench_tls(bin, seconds)) {
        good = false;
    }
    if (runbench_cmp.on && !runbench_compare(bin, use_unix, window_ms)) {
        good = false;
    }
    h_suite_cleanup();
    runbench_table(seconds, smoke);
    if (runbench_cmp.on) {
        runbench_cmp_table();
    }
    if (smoke) {
        if (good) {
            printf("\nbench-smoke: every mode ran, with pairs and no errors; every hold run held "
                   "all its locks, renewals ok; counted and shared holds within their kinds; "
                   "the TLS rows, the hostile row and the comparison against %s ran; the peer "
                   "rows %s\n", runbench_cmp.name, runbench_peers_ran ? "ran" : "were skipped");
        } else {
            printf("\nbench-smoke: FAILED\n");
        }
    }
    return good ? 0 : 1;
}
