/*
 * sched_net.c: the network schedules (tests/faults/faults.h): each master
 * and daemon in a network namespace of its own (netns.h), faults made
 * with iptables rules and delay proxies: partitions of masters, a daemon
 * cut off the majority, replies dropped, packet loss, delay, and a
 * dropped link's requests that must never run after the heal.
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

void
ft_sched_partition1(struct ft_run *r)
{
    ft_partition_masters(r, 1, false);
}

void
ft_sched_partition2(struct ft_run *r)
{
    ft_partition_masters(r, 2, false);
}

void
ft_sched_half_partition(struct ft_run *r)
{
    ft_partition_masters(r, 1, true);
}

/* 5 % random loss both ways on the links of the last FT_SLOW_MASTERS masters. */
void
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
void
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
void
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
void
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

void
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
