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
 * longer than the liveness bound while its waiters sleep.  Daemons built
 * to take a set's names one by one, holding what they won
 * (REDLOCKD_SET_BY_NAME_BIN): a set deadlocked (waiting while all its
 * names are free) or starved.  The upgrade
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
 *
 * This file holds main(), the table of scenarios, the summary table and
 * the soak; the rest of the suite is in the files faults.h lists (one
 * run, the processes of a run, the schedules by family, the checker's
 * self-test).
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
#include "tests/faults/faults.h"

/* ---- the suite's settings, shared by every file (faults.h) ---- */

const char *const ft_names[FT_NAMES] = { "acct-a", "acct-b" };
const struct ft_kind ft_plain = { .limit = 0 };
const struct ft_kind ft_counted = { .limit = FT_LIMIT };
const struct ft_kind ft_shared = { .shared = true };
const struct ft_kind ft_fenced = { .fenced = true };
char  ft_dir[PATH_MAX / 2];  /* this suite's files */
const char *ft_client_bin;   /* rmw-client */
bool  ft_keep;               /* FAULTS_KEEP: keep every log */
const char *ft_log_level;    /* FAULTS_LOG_LEVEL, default "info" */
int   ft_counter_port;       /* the counters' redis-server */
unsigned ft_round;           /* make soak: the round (1, 2, ...); 0: one pass */
pid_t ft_counter_pid;        /* its process */
const char *ft_proxy_bin;    /* delay-proxy */
const char *ft_break_bin;    /* break-client */
const char *ft_skip_bin;     /* the daemon that announces no release
                                       (REDLOCKD_SKIP_ANNOUNCE_BIN) */
const char *ft_set_by_name_bin; /* the daemon that takes a set's names one by one
                                       (REDLOCKD_SET_BY_NAME_BIN) */
const char *ft_new_bin;      /* this build ($REDLOCKD_BIN at the start; NULL: the
                                       harness's default) */
const char *ft_prev_bin;     /* the last release (REDLOCKD_PREV_BIN) */
const char *ft_control_bin;  /* the upgrade control's build
                                       (REDLOCKD_PREV_CONTROL_BIN) */
char  ft_net_why[256];       /* why the network scenarios are skipped, "" if not */

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
    { .name = "sets",
      .what = "sets {p,q} and {q,r,p} through daemon 0, {q,p} through daemon 1, singles on "
              "each name; SIGSTOP masters 3 and 4 for 1.5 s",
      .fault = ft_sched_sets },
    { .name = "sets-control",
      .what = "the same with daemons built to take a set's names one by one, holding what "
              "they won (negative control: must report a set deadlocked or starved)",
      .fault = ft_sched_sets, .negative = true, .set_by_name = true },
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
               : r->sc->skip_announce || r->sc->set_by_name ? "gap found" : "overlaps found",
               r->passed ? "PASS" : "FAIL");
    }
    printf("\nsections: grants (BEGIN); completed: sections that ended well (END: wrote the\n"
           "counter, or a shared holder read it twice).\n"
           "violations: all kinds together (overlap, over-limit, fence, stale-write,\n"
           "lost-update, dirty-read, break-after, break-broken, validity, liveness,\n"
           "starvation, recovery, never-full, open, log, external);\n"
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
                   : r->sc->skip_announce || r->sc->set_by_name ? "gap found"
                   : "overlaps found");
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
               : ft_scenarios[i].skip_announce || ft_scenarios[i].set_by_name ? "gap found"
               : "overlaps found", result);
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
    ft_set_by_name_bin = getenv("REDLOCKD_SET_BY_NAME_BIN");
    if (ft_set_by_name_bin != NULL && ft_set_by_name_bin[0] == '\0') {
        ft_set_by_name_bin = NULL;
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
