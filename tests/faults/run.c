/*
 * run.c: one scenario run (tests/faults/faults.h): the set-up (masters,
 * daemons, proxies, namespaces, the builds of the upgrade schedules, the
 * clients), the schedule, the stop, and the judgement of the logs by the
 * checker, with the notes of the summary table.
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
int
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
    if (r->sets) {
        ft_add_counter(counters, &n, FT_SET_P, -1);
        ft_add_counter(counters, &n, FT_SET_Q, -1);
        ft_add_counter(counters, &n, FT_SET_R, -1);
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
    in.set_wait_bound_us = r->sets ? FT_SET_WAIT_BOUND_MS * 1000LL : 0;
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
    if (r->sets) {
        ft_sets_notes(r);
    }
    if (r->sc->negative && r->neg_sets) {
        r->passed = !r->setup_failed && ft_sets_negative_seen(r);
    } else if (r->sc->negative && r->neg_live != NULL) {
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

void
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
    } else if (sc->set_by_name && ft_set_by_name_bin == NULL) {
        ft_setup_failed(r, "no daemon built with REDLOCKD_FAULT_SET_BY_NAME "
                        "(REDLOCKD_SET_BY_NAME_BIN; make faults builds one)");
    } else if (sc->set_by_name && setenv("REDLOCKD_BIN", ft_set_by_name_bin, 1) != 0) {
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
           : sc->set_by_name ? "expected: a set deadlocked or starved reported"
           : sc->skip_announce ? "expected: a name free too long reported"
           : "expected: double grants reported",
           r->seconds);
    if (r->events != NULL) {
        fclose(r->events);
        r->events = NULL;
    }
}
