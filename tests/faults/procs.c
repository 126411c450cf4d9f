/*
 * procs.c: the processes of a fault run (tests/faults/faults.h): small
 * helpers (events, notes, the run's verdicts from outside the logs), the
 * counters' redis-server, the masters and daemons as the schedules kill,
 * stop and restart them, and the clients (rmw-client, break-client):
 * started, stopped, reaped, their sections read back.
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

/* ---- small helpers ---- */

int64_t
ft_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Append to the notes of a run, "; "-separated. */
__attribute__((format(printf, 2, 3)))
void
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
void
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
void
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
void
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
void
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
int
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

void
ft_counter_stop(void)
{
    if (ft_counter_pid > 0) {
        kill(ft_counter_pid, SIGKILL);
        waitpid(ft_counter_pid, NULL, 0);
        ft_counter_pid = 0;
    }
}

/* Run a command on the counters' redis; true when it answered without error. */
bool
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
long long
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
 * Lock keys (FT_PREFIX*, fence counters, the fences CHECK reads and the
 * layout registry excluded) on every master:
 * their number, or -1 when a master could not be asked.  The first few
 * are described in desc.
 */
static long
ft_lock_keys(char *desc, size_t size)
{
    char cursor[32];
    redisContext *c;
    redisReply *rep;
    size_t i, k, len, slen = strlen(FT_FENCE_SUFFIX), dlen = strlen(FT_FENCED_SUFFIX), used = 0;
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
                    || (len >= dlen && memcmp(key->str + len - dlen, FT_FENCED_SUFFIX, dlen) == 0)
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
bool
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

void
ft_kill_master(struct ft_run *r, size_t i)
{
    if (h_kill_master(i) != 0) {
        ft_setup_failed(r, "master %zu was not running", i);
        return;
    }
    ft_event(r, "kill -9 master %zu (port %d)", i, h_master_port(i));
}

void
ft_restart_master(struct ft_run *r, size_t i)
{
    if (h_restart_master(i) != 0) {
        ft_setup_failed(r, "master %zu did not come back", i);
        return;
    }
    ft_event(r, "master %zu restarted, empty", i);
}

void
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
bool
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
int
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
int
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
void
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
void
ft_ports(const struct ft_run *r, size_t d, char *out, size_t size)
{
    ft_ports_of(r, d, r->nactive, out, size);
}

/* A regular client's kind in a run whose clients mix leases and sessions. */
struct ft_kind
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
void
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
void
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
int
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
void
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
void
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
void
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
int64_t
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
size_t
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
void
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
void
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

void
ft_pause(int64_t ms)
{
    h_sleep_ms(ms);
}

/* The warm-up before the first fault, ms long: the fault's window begins after it. */
void
ft_warmup(struct ft_run *r, int64_t ms)
{
    ft_pause(ms);
    if (r->fault_us == 0) {
        r->fault_us = ft_now_us();
    }
}
