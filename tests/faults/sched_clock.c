/*
 * sched_clock.c: the schedules that step the masters' wall clocks
 * (tests/faults/faults.h): forward and back, with lock.clock_check on,
 * and forward with it off (a negative control).
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
void
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

void
ft_sched_clock_forward(struct ft_run *r)
{
    ft_sched_clock(r, FT_CLOCK_STEP_MS);
}

void
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
void
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
