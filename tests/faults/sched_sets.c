/*
 * sched_sets.c: the sets schedules (tests/faults/faults.h; README,
 * "Sets"): LOCK of several names at once, taken in opposite orders
 * through two daemons, beside single holders of the same names, under
 * stopped masters; and its negative control, on daemons that take a
 * set's names one by one.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "tests/faults/checker.h"
#include "tests/harness.h"
#include "tests/faults/faults.h"

/* Who takes what, through which daemon first (the other one next). */
static const struct {
    const char *names;              /* rmw-client -n: a set, or one name */
    int         daemon;
} ft_set_clients[] = {
    { FT_SET_P "," FT_SET_Q, 0 },
    { FT_SET_Q "," FT_SET_R "," FT_SET_P, 0 },
    { FT_SET_Q "," FT_SET_P, 1 },
    { FT_SET_Q "," FT_SET_P, 1 },
    { FT_SET_P, 0 },
    { FT_SET_Q, 0 },
    { FT_SET_P, 1 },
    { FT_SET_Q, 1 },
    { FT_SET_R, 1 },
};

#define FT_SET_CLIENTS      (sizeof(ft_set_clients) / sizeof(ft_set_clients[0]))

void
ft_sched_sets(struct ft_run *r)
{
    char ports[FT_PORTS_MAX];
    size_t i;
    int c;

    for (i = 0; i < FT_SET_CLIENTS; i++) {
        ft_ports(r, (size_t)ft_set_clients[i].daemon, ports, sizeof(ports));
        c = ft_start_client(r, ft_set_clients[i].names, ports, 0, FT_TTL_MS, FT_SLEEP, 0,
                            FT_THINK_MS);
        if (c < 0) {
            ft_setup_failed(r, "cannot start a client of %s", ft_set_clients[i].names);
            return;
        }
        r->clients[c].daemon = ft_set_clients[i].daemon;
    }
    r->sets = true;
    r->neg_sets = r->sc->negative;
    r->recovery[r->nrecovery++] = FT_SET_P;
    r->recovery[r->nrecovery++] = FT_SET_Q;
    r->recovery[r->nrecovery++] = FT_SET_R;
    ft_event(r, "sets {%s,%s} and {%s,%s,%s} through daemon 0, {%s,%s} twice through daemon 1; "
             "single holders of %s and %s through each daemon, of %s through daemon 1%s",
             FT_SET_P, FT_SET_Q, FT_SET_Q, FT_SET_R, FT_SET_P, FT_SET_Q, FT_SET_P, FT_SET_P,
             FT_SET_Q, FT_SET_R, r->sc->set_by_name ? " (daemons that take a set's names "
             "one by one)" : "");
    ft_warmup(r, FT_SETS_WARMUP_MS);
    for (i = 3; i < FT_MASTERS; i++) {
        ft_signal_master(r, i, SIGSTOP);
    }
    ft_pause(FT_SHORT_STOP_MS);
    for (i = 3; i < FT_MASTERS; i++) {
        ft_signal_master(r, i, SIGCONT);
    }
    r->heal_us = ft_now_us();
}

/*
 * What each daemon's STATS say of its waiters at the end (not judged):
 * its set grants, its LOCKs answered TIMEOUT, its retries timed by a
 * holder's ttl (no release woke the waiter) and its yields.
 */
static void
ft_sets_stats(struct ft_run *r)
{
    static const char *const stats[] = { "set_grants", "acquire_timeout", "fallback_retries",
                                         "yields" };
    char line[256];
    long long v;
    size_t d, k, used;

    for (d = 0; d < r->ndaemons; d++) {
        h_use_daemon(d);
        used = (size_t)snprintf(line, sizeof(line), "daemon %zu STATS:", d);
        for (k = 0; k < sizeof(stats) / sizeof(stats[0]) && used < sizeof(line); k++) {
            if (h_stat_once(stats[k], &v) != 0) {
                v = -1;
            }
            used += (size_t)snprintf(line + used, sizeof(line) - used, " %s %lld", stats[k], v);
        }
        ft_note(r, "%s", line);
    }
}

void
ft_sets_notes(struct ft_run *r)
{
    const struct checker_name_stat *st;
    const char *const names[] = { FT_SET_P, FT_SET_Q, FT_SET_R };
    char per[256] = "";
    size_t i, used = 0;

    for (i = 0; i < sizeof(names) / sizeof(names[0]) && used < sizeof(per); i++) {
        st = checker_name(&r->res, names[i]);
        used += (size_t)snprintf(per + used, sizeof(per) - used, "%s%s %zu", i > 0 ? ", " : "",
                                 names[i], st != NULL ? st->sections : 0);
    }
    ft_note(r, "sets: %zu sets granted, %zu set waits; sections per name (sets and singles) %s; "
            "longest time every name of a waiting set was free %.0f ms (%s, bound %d ms, %zu "
            "findings); longest set wait %.0f ms (%s, bound %d ms, %zu starvation findings)",
            r->res.set_grants, r->res.set_waits, per,
            r->res.max_set_gap_us < 0 ? -1.0 : (double)r->res.max_set_gap_us / 1e3,
            r->res.max_set_gap_name[0] != '\0' ? r->res.max_set_gap_name : "-",
            FT_LIVE_BOUND_MS, r->res.set_liveness,
            r->res.max_set_wait_us < 0 ? -1.0 : (double)r->res.max_set_wait_us / 1e3,
            r->res.max_set_wait_name[0] != '\0' ? r->res.max_set_wait_name : "-",
            FT_SET_WAIT_BOUND_MS, r->res.counts[CHECKER_STARVATION]);
    ft_sets_stats(r);
}

/*
 * Hold and wait shows as a deadlock, a set waiting while every one of
 * its names is free on the clients' count (the names its daemon won
 * for it are held by nobody's section): a set liveness finding; or, when
 * the set of one daemon never wins its first name while the other
 * daemon's holders keep taking them, as starvation.
 */
bool
ft_sets_negative_seen(struct ft_run *r)
{
    bool ok = r->res.set_liveness > 0 || r->res.counts[CHECKER_STARVATION] > 0;

    ft_note(r, "negative control: a set deadlocked or starved %s (%zu set liveness findings, "
            "a set waiting while its names were free up to %.0f ms, bound %d ms; %zu "
            "starvation findings, a set waiting up to %.0f ms, bound %d ms)",
            ok ? "reported" : "NOT reported", r->res.set_liveness,
            (double)r->res.max_set_gap_us / 1e3, FT_LIVE_BOUND_MS,
            r->res.counts[CHECKER_STARVATION], (double)r->res.max_set_wait_us / 1e3,
            FT_SET_WAIT_BOUND_MS);
    return ok;
}
