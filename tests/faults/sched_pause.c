/*
 * sched_pause.c: the schedules that pause a daemon (SIGSTOP) under its
 * holders (tests/faults/faults.h): a late writer's fenced write refused,
 * and its negative control with an unfenced write.
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

/* ---- a paused daemon ---- */

/*
 * The daemon is stopped past its holders' validity while the other one
 * keeps granting.  The clients of daemon 1 that hold a lock then cannot
 * be told in time; the daemon promises that they are told first thing
 * on resume, and a fenced resource refuses their late writes.
 */
#define FT_PAUSE_MS         (FT_TTL_MS + 2000)  /* daemon 1 stays stopped this long */
#define FT_LATE_SLEEP_MS    4500    /* the late writer's in-section sleep */
#define FT_LATE_FRESH_MS    500     /* its section began at most this long before the stop */
#define FT_LONG_SLEEP_MS    6500    /* the long victim's in-section sleep */
#define FT_PAUSE_PROBE      "pause-probe"   /* the orchestrator's own lock */
#define FT_PAUSE_LONG       "pause-long"    /* the long victim's name, no one else's */
#define FT_PAUSE_PING       "PING pause"    /* sent by the probe while daemon 1 is stopped */

/*
 * A victim through daemon 1: one section on name with an in-section
 * sleep of sleep_ms, fenced or not.  Returns its index, or -1 with the
 * setup failure recorded.
 */
static int
ft_start_pause_victim(struct ft_run *r, const char *name, long sleep_ms, bool fenced)
{
    char ports[FT_PORTS_MAX], sleep[16];
    int v;

    ft_ports(r, 1, ports, sizeof(ports));
    snprintf(sleep, sizeof(sleep), "%ld", sleep_ms);
    v = ft_start_kind(r, name, fenced ? &ft_fenced : &ft_plain, ports, 1, FT_TTL_MS, sleep, 0,
                      0);
    if (v < 0) {
        ft_setup_failed(r, "cannot start a victim client on %s", name);
        return -1;
    }
    r->clients[v].daemon = 1;
    return v;
}

/*
 * After daemon 1 resumed: the probe's first line must be its LOST, then
 * the answer to the PING it sent while the daemon was stopped.
 */
static void
ft_pause_probe_read(struct ft_run *r, int fd)
{
    char *first = h_read_line(fd, FT_WAIT_MS), *second;

    second = first != NULL ? h_read_line(fd, FT_WAIT_MS) : NULL;
    ft_event(r, "probe: after the resume it read '%s', then '%s'",
             first != NULL ? first : "(nothing)", second != NULL ? second : "(nothing)");
    if (first == NULL || strncmp(first, "! LOST " FT_PAUSE_PROBE " reason=",
                                 strlen("! LOST " FT_PAUSE_PROBE " reason=")) != 0) {
        ft_external(r, "the probe's first line after the resume was '%s', not '! LOST %s "
                    "reason=...'", first != NULL ? first : "(nothing)", FT_PAUSE_PROBE);
    } else if (second == NULL || strcmp(second, "PONG pause") != 0) {
        ft_external(r, "the probe's line after its LOST was '%s', not 'PONG pause'",
                    second != NULL ? second : "(nothing)");
    } else {
        ft_note(r, "probe: '%s' first after the resume, then '%s'", first, second);
    }
    free(first);
    free(second);
}

/*
 * SIGSTOP daemon 1 for ttl + 2 s while daemon 0 keeps granting.  Held
 * through daemon 1 at the stop: the probe (the orchestrator's session,
 * with a PING waiting in the socket), the late writer (acct-a, inside a
 * section that began at most FT_LATE_FRESH_MS before: its lease runs out
 * during the stop, daemon 0's clients take acct-a and write, and then
 * its sleep ends and it writes with its old fence, fenced or not) and
 * the long victim (a name of its own, a sleep that outlasts the stop:
 * it must read LOST on resume and not write).
 */
static void
ft_pause_run(struct ft_run *r, bool fenced)
{
    int64_t begin_w, stop_us;
    char *line;
    int fd, w, lv;

    r->pause.on = true;
    r->pause.fenced = fenced;
    r->pause.writer = -1;
    r->pause.long_victim = -1;
    ft_warmup(r, FT_WARMUP_MS);
    h_use_daemon(1);
    fd = h_connect_tcp();
    line = fd >= 0 ? h_cmd(fd, "LOCK " FT_PAUSE_PROBE " ttl=3000", FT_WAIT_MS) : NULL;
    if (line == NULL || !h_is_reply(line, "OK", FT_PAUSE_PROBE)) {
        ft_setup_failed(r, "the probe did not get %s through daemon 1: '%s'", FT_PAUSE_PROBE,
                        line != NULL ? line : "(nothing)");
        free(line);
        if (fd >= 0) {
            close(fd);
        }
        h_use_daemon(0);
        return;
    }
    free(line);
    ft_event(r, "probe holds %s through daemon 1", FT_PAUSE_PROBE);
    w = ft_start_pause_victim(r, ft_names[0], FT_LATE_SLEEP_MS, fenced);
    begin_w = w >= 0 ? ft_wait_in_section(r, (size_t)w, FT_LATE_FRESH_MS / 2) : -1;
    lv = begin_w > 0 ? ft_start_pause_victim(r, FT_PAUSE_LONG, FT_LONG_SLEEP_MS, true) : -1;
    if (w >= 0 && begin_w < 0) {
        ft_setup_failed(r, "the late writer never got %s", ft_names[0]);
    } else if (lv >= 0 && ft_wait_in_section(r, (size_t)lv, FT_LATE_FRESH_MS) < 0) {
        ft_setup_failed(r, "the long victim never got %s", FT_PAUSE_LONG);
    } else if (lv >= 0 && ft_now_us() - begin_w > FT_LATE_FRESH_MS * 1000) {
        ft_setup_failed(r, "the late writer's section began %.0f ms before the stop would "
                        "come (at most %d ms)", (double)(ft_now_us() - begin_w) / 1e3,
                        FT_LATE_FRESH_MS);
    }
    if (r->setup_failed) {
        close(fd);
        h_use_daemon(0);
        return;
    }
    r->pause.writer = w;
    r->pause.long_victim = lv;
    /* From here to the SIGCONT nothing returns: the daemon must not stay stopped. */
    if (h_signal_daemon(SIGSTOP) != 0) {
        ft_setup_failed(r, "daemon 1 was not running");
        close(fd);
        h_use_daemon(0);
        return;
    }
    stop_us = ft_now_us();
    r->pause.stop_us = stop_us;
    ft_event(r, "SIGSTOP daemon 1 (port %d): client %d's section on %s began %.0f ms ago, "
             "client %d holds %s", r->ports[1], w, ft_names[0],
             (double)(stop_us - begin_w) / 1e3, lv, FT_PAUSE_LONG);
    if (h_send(fd, FT_PAUSE_PING) != 0) {
        ft_setup_failed(r, "the probe could not send its PING");
    }
    ft_pause(FT_PAUSE_MS);
    /* Stamped before the signal: the resumed daemon's pushes may be read
       (and logged) before this process runs again. */
    r->pause.cont_us = ft_now_us();
    r->heal_us = r->pause.cont_us;
    h_signal_daemon(SIGCONT);
    ft_event(r, "SIGCONT daemon 1 after %.1f s", (double)(r->heal_us - stop_us) / 1e6);
    if (!r->setup_failed) {
        ft_pause_probe_read(r, fd);
    }
    close(fd);
    h_use_daemon(0);
}

void
ft_sched_pause_daemon(struct ft_run *r)
{
    ft_pause_run(r, true);
}

void
ft_sched_pause_unfenced(struct ft_run *r)
{
    ft_pause_run(r, false);
}

/*
 * The first line of client i's log at or after t_us whose event is ev1
 * or ev2 (NULL: only ev1), into out.  False when there is none.
 */
static bool
ft_log_next(const struct ft_run *r, size_t i, int64_t t_us, const char *ev1, const char *ev2,
            char *out, size_t size)
{
    char *line = NULL, word[16];
    size_t cap = 0;
    long long ts;
    bool found = false;
    FILE *f = fopen(r->clients[i].log, "re");

    if (f == NULL) {
        return false;
    }
    while (!found && getline(&line, &cap, f) > 0) {
        if (sscanf(line, "%15s %lld", word, &ts) != 2 || ts < t_us) {
            continue;
        }
        found = strcmp(word, ev1) == 0 || (ev2 != NULL && strcmp(word, ev2) == 0);
        if (found) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(out, size, "%s", line);
        }
    }
    free(line);
    fclose(f);
    return found;
}

/* How a section ended, in a word or two. */
static const char *
ft_how(const struct checker_section *s)
{
    switch (s->how) {
    case CHECKER_END_WROTE:
        return "with a write";
    case CHECKER_END_READ:
        return "with a read";
    case CHECKER_END_ABORT:
        return "aborted";
    case CHECKER_END_REJECT:
        return "with its write refused";
    case CHECKER_END_KILLED:
        return "killed";
    case CHECKER_END_NONE:
        break;
    }
    return "never";
}

/*
 * The pause-daemon schedules' own verdict, from the sections: the late
 * writer wrote late (refused when fenced, landed otherwise: else the
 * timing did not make the fault and the setup failed), its session read
 * LOST before the answer to its UNLOCK, the long victim aborted on the
 * LOST read after the resume, and the other clients of daemon 1 went on.
 */
void
ft_pause_judge(struct ft_run *r, const struct checker_sections *s)
{
    const struct checker_section *w, *lv;
    char line[512], lost[CHECKER_NAME_MAX + 32];
    int64_t first = -1;
    size_t k, clients = 0, after = 0;

    if (r->pause.stop_us == 0 || r->pause.writer < 0 || r->pause.long_victim < 0) {
        return;
    }
    w = checker_held_at(s, (size_t)r->pause.writer, r->pause.stop_us);
    lv = checker_held_at(s, (size_t)r->pause.long_victim, r->pause.stop_us);
    if (w == NULL || w->how == CHECKER_END_NONE) {
        ft_setup_failed(r, "the late writer was not inside a section at the stop, or never "
                        "ended it");
    } else if (w->how == CHECKER_END_REJECT && r->pause.fenced) {
        ft_note(r, "late writer: client %d's write @+%.0f ms after the stop (fence %lld) was "
                "refused: stored fence %lld", r->pause.writer,
                (double)(w->end_us - r->pause.stop_us) / 1e3, w->fence, w->prev_fence);
    } else if (w->how == CHECKER_END_WROTE && !r->pause.fenced && w->prev_fence > w->fence) {
        ft_note(r, "late writer: client %d's unfenced write @+%.0f ms after the stop (fence "
                "%lld) landed after one with fence %lld", r->pause.writer,
                (double)(w->end_us - r->pause.stop_us) / 1e3, w->fence, w->prev_fence);
    } else {
        ft_setup_failed(r, "the late writer did not write late: its section ended %s @+%.0f "
                        "ms after the stop (fence %lld, stored fence %lld)", ft_how(w),
                        (double)(w->end_us - r->pause.stop_us) / 1e3, w->fence,
                        w->prev_fence);
    }
    /* Its UNLOCK sat in the socket during the stop: LOST must come first. */
    if (w != NULL && w->how != CHECKER_END_NONE) {
        snprintf(lost, sizeof(lost), " ! LOST %s reason=", ft_names[0]);
        if (!ft_log_next(r, (size_t)r->pause.writer, w->end_us, "PUSH", "UNLOCK", line,
                         sizeof(line))) {
            ft_external(r, "the late writer read neither a push nor its UNLOCK's answer "
                        "after its section");
        } else if (strncmp(line, "PUSH ", 5) != 0 || strstr(line, lost) == NULL) {
            ft_external(r, "the late writer's first line after the resume was not its LOST: "
                        "%s", line);
        } else {
            ft_note(r, "late writer: first line after the resume: %s", strchr(line + 5, '!'));
        }
    }
    if (lv == NULL || lv->how == CHECKER_END_NONE) {
        ft_setup_failed(r, "the long victim was not inside a section at the stop, or never "
                        "ended it");
    } else if (lv->how == CHECKER_END_ABORT && lv->end_us >= r->pause.cont_us
               && ft_log_next(r, (size_t)r->pause.long_victim, lv->end_us, "ABORT", NULL,
                              line, sizeof(line))
               && strstr(line, " why=lost") != NULL) {
        ft_note(r, "long victim: client %d aborted %.0f ms after the resume (why=lost)",
                r->pause.long_victim, (double)(lv->end_us - r->pause.cont_us) / 1e3);
    } else if (lv->begin_us + FT_LONG_SLEEP_MS * 1000LL < r->pause.cont_us) {
        ft_setup_failed(r, "the long victim's sleep ended before the resume");
    } else {
        ft_external(r, "the long victim's section across the stop ended %s @+%.0f ms after "
                    "the resume, not with ABORT why=lost", ft_how(lv),
                    (double)(lv->end_us - r->pause.cont_us) / 1e3);
    }
    for (k = 0; k < r->nclients; k++) {
        clients += r->clients[k].daemon == 1 && !r->clients[k].finite;
    }
    for (k = 0; k < s->n; k++) {
        const struct ft_client *c = &r->clients[s->v[k].log];

        if (c->daemon == 1 && !c->finite && s->v[k].begin_us >= r->pause.cont_us) {
            after++;
            if (first < 0 || s->v[k].begin_us < first) {
                first = s->v[k].begin_us;
            }
        }
    }
    ft_note(r, "the %zu other clients of daemon 1: %zu sections after the resume, the first "
            "%.0f ms after it", clients, after,
            first < 0 ? -1.0 : (double)(first - r->pause.cont_us) / 1e3);
    if (r->res.fenced > 0) {
        ft_note(r, "%zu fenced overlaps (a holder whose late write was refused): shown, not "
                "violations", r->res.fenced);
    }
}

/* The unfenced control's expectation: the late write shows as an overlap and a stale write. */
bool
ft_pause_negative_seen(struct ft_run *r)
{
    const struct checker_name_stat *st = checker_name(&r->res, ft_names[0]);
    bool overlap = st != NULL && st->overlaps > 0;
    bool stale = r->res.counts[CHECKER_STALE_WRITE] > 0;

    ft_note(r, "negative control: %s overlap %s, stale write %s", ft_names[0],
            overlap ? "reported" : "NOT reported", stale ? "reported" : "NOT reported");
    return overlap && stale;
}
