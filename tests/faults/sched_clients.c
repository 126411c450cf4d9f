/*
 * sched_clients.c: the schedules that fault a daemon or a client
 * (tests/faults/faults.h): a daemon killed under its holders, a client
 * stopped inside its section, clients killed inside theirs; and the
 * records a killed holder leaves on the masters, which must be freed in
 * time.
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
long
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
bool
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
void
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
void
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
void
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
