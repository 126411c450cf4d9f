/*
 * sched_timing.c: the schedules with three daemons and mixed clients
 * (tests/faults/faults.h): timing (delays in front of every master,
 * leases, BREAKs, an idle daemon, a clock step) and its control with
 * fakers; liveness and its control; the upgrade across builds through a
 * rolling restart and its control.
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

/* ---- timing: delays, three daemons, leases, BREAK, an idle daemon, a clock step ---- */

/*
 * What each daemon's STATS say of the stepped masters' clocks, as an
 * event, and in the notes with which daemons did not count the step.
 * Not judged: a step that a daemon does not see makes a double grant
 * only together with keys that expired early, which the checker judges.
 */
void
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
void
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
void
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
void
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
void
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
