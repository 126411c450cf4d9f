/*
 * checker.c: reads rmw-client logs and judges them (see checker.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/faults/checker.h"

/* Print only the first CHECKER_REPORT_MAX findings of a kind. */
struct checker_ctx {
    FILE                        *report;    /* where findings go, or NULL */
    struct checker_result       *res;       /* counts */
    const struct checker_breaks *breaks;    /* the operators' BREAKs, by name */
    bool                         strict;    /* a REJECT excuses no overlap */
    FILE                        *all;       /* every finding, without the limit, or NULL */
};

static const char *const checker_kind_names[CHECKER_KINDS] = {
    [CHECKER_OVERLAP] = "overlap",
    [CHECKER_OVER_LIMIT] = "over-limit",
    [CHECKER_FENCE] = "fence",
    [CHECKER_STALE_WRITE] = "stale-write",
    [CHECKER_LOST_UPDATE] = "lost-update",
    [CHECKER_DIRTY_READ] = "dirty-read",
    [CHECKER_BREAK_AFTER] = "break-after",
    [CHECKER_BREAK_BROKEN] = "break-broken",
    [CHECKER_VALIDITY] = "validity",
    [CHECKER_LIVENESS] = "liveness",
    [CHECKER_STARVATION] = "starvation",
    [CHECKER_RECOVERY] = "recovery",
    [CHECKER_NEVER_FULL] = "never-full",
    [CHECKER_OPEN] = "open",
    [CHECKER_LOG] = "log",
    [CHECKER_EXTERNAL] = "external",
};

const char *
checker_kind_name(enum checker_kind kind)
{
    return kind < CHECKER_KINDS ? checker_kind_names[kind] : "?";
}

/* Monotonic microseconds as seconds, for messages. */
static double
checker_s(int64_t us)
{
    return (double)us / 1e6;
}

/* Count a finding of kind and print it while under the limit. */
__attribute__((format(printf, 3, 4)))
static void
checker_note(struct checker_ctx *x, enum checker_kind kind, const char *fmt, ...)
{
    va_list ap;

    x->res->counts[kind]++;
    x->res->violations++;
    if (x->all != NULL) {
        fprintf(x->all, "! %s: ", checker_kind_name(kind));
        va_start(ap, fmt);
        vfprintf(x->all, fmt, ap);
        va_end(ap);
        fputc('\n', x->all);
    }
    if (x->report == NULL || x->res->counts[kind] > CHECKER_REPORT_MAX) {
        return;
    }
    fprintf(x->report, "    ! %s: ", checker_kind_name(kind));
    va_start(ap, fmt);
    vfprintf(x->report, fmt, ap);
    va_end(ap);
    fputc('\n', x->report);
}

void
checker_add_external(struct checker_result *r, FILE *report, const char *fmt, ...)
{
    va_list ap;

    r->counts[CHECKER_EXTERNAL]++;
    r->violations++;
    if (report == NULL) {
        return;
    }
    fprintf(report, "    ! %s: ", checker_kind_name(CHECKER_EXTERNAL));
    va_start(ap, fmt);
    vfprintf(report, fmt, ap);
    va_end(ap);
    fputc('\n', report);
}

/* ---- parsing ---- */

/* Find " key=" in line; returns the value's start or NULL. */
static const char *
checker_field(const char *line, const char *key)
{
    size_t klen = strlen(key);
    const char *p;

    for (p = strchr(line, ' '); p != NULL; p = strchr(p + 1, ' ')) {
        if (strncmp(p + 1, key, klen) == 0 && p[1 + klen] == '=') {
            return p + 2 + klen;
        }
    }
    return NULL;
}

/* The integer value of key (a decimal, maybe negative); false if absent or bad. */
static bool
checker_field_ll(const char *line, const char *key, long long *v)
{
    const char *p = checker_field(line, key);
    char *end;

    if (p == NULL) {
        return false;
    }
    errno = 0;
    *v = strtoll(p, &end, 10);
    return errno == 0 && end != p && (*end == ' ' || *end == '\0');
}

/* The word value of key, copied into out; false if absent or too long. */
static bool
checker_field_word(const char *line, const char *key, char *out, size_t size)
{
    const char *p = checker_field(line, key);
    size_t n;

    if (p == NULL) {
        return false;
    }
    n = strcspn(p, " ");
    if (n == 0 || n + 1 > size) {
        return false;
    }
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}

/* Room for one more section. */
static struct checker_section *
checker_push(struct checker_sections *s)
{
    struct checker_section *grown;
    size_t cap;

    if (s->n == s->cap) {
        cap = s->cap == 0 ? 256 : s->cap * 2;
        grown = realloc(s->v, cap * sizeof(*grown));
        if (grown == NULL) {
            return NULL;
        }
        s->v = grown;
        s->cap = cap;
    }
    memset(&s->v[s->n], 0, sizeof(s->v[s->n]));
    return &s->v[s->n++];
}

/* Room for one more wait. */
static struct checker_wait *
checker_push_wait(struct checker_sections *s)
{
    struct checker_wait *grown;
    size_t cap;

    if (s->nw == s->wcap) {
        cap = s->wcap == 0 ? 256 : s->wcap * 2;
        grown = realloc(s->w, cap * sizeof(*grown));
        if (grown == NULL) {
            return NULL;
        }
        s->w = grown;
        s->wcap = cap;
    }
    memset(&s->w[s->nw], 0, sizeof(s->w[s->nw]));
    return &s->w[s->nw++];
}

/* A grammar error in a log. */
__attribute__((format(printf, 4, 5)))
static void
checker_log_error(FILE *report, size_t *errors, const char *path, const char *fmt, ...)
{
    va_list ap;

    (*errors)++;
    if (report == NULL || *errors > CHECKER_REPORT_MAX) {
        return;
    }
    fprintf(report, "    ! log: %s: ", path);
    va_start(ap, fmt);
    vfprintf(report, fmt, ap);
    va_end(ap);
    fputc('\n', report);
}

/*
 * The kind of hold of a BEGIN line: kind= (absent: exclusive), and for a
 * counted one limit= >= 1 and 0 <= permit= < limit.  0, or -1 when bad.
 */
static int
checker_begin_kind(struct checker_section *sec, const char *line)
{
    char kind[16];
    long long limit, permit;

    if (!checker_field_word(line, "kind", kind, sizeof(kind))
        || strcmp(kind, "exclusive") == 0) {
        sec->hold = CHECKER_HOLD_EXCLUSIVE;
        return 0;
    }
    if (strcmp(kind, "shared") == 0) {
        sec->hold = CHECKER_HOLD_SHARED;
        return 0;
    }
    if (strcmp(kind, "counted") != 0) {
        return -1;
    }
    sec->hold = CHECKER_HOLD_COUNTED;
    if (!checker_field_ll(line, "limit", &limit) || !checker_field_ll(line, "permit", &permit)
        || limit < 1 || limit > 100000 || permit < 0 || permit >= limit) {
        return -1;
    }
    sec->limit = (int)limit;
    sec->permit = (int)permit;
    return 0;
}

/* Close the open section of a log (index cur in out) at the end of it. */
static void
checker_close_at_eof(struct checker_sections *out, size_t cur, const struct checker_log *lg)
{
    struct checker_section *sec = &out->v[cur];

    if (lg->killed_us > 0) {
        sec->how = CHECKER_END_KILLED;
        sec->end_us = lg->killed_us > sec->begin_us ? lg->killed_us : sec->begin_us;
    } else {
        sec->how = CHECKER_END_NONE;
        sec->end_us = CHECKER_OPEN_END;
    }
}

/* A new section for a BEGIN line of log idx; NULL when memory ran out. */
static struct checker_section *
checker_begin(struct checker_sections *out, size_t idx, long long pid, long long ttl,
              int64_t ts, const char *line, const char *path, size_t lineno, FILE *report,
              size_t *errors)
{
    struct checker_section *sec = checker_push(out);
    char mode[16];
    long long v;

    if (sec == NULL) {
        return NULL;
    }
    sec->log = idx;
    sec->pid = (long)pid;
    sec->begin_us = ts;
    sec->end_us = CHECKER_OPEN_END;
    sec->how = CHECKER_END_NONE;
    sec->wrote = -1;
    sec->prev_fence = -1;
    sec->read = -1;
    sec->reread = -1;
    sec->permit = -1;
    sec->ttl_ms = ttl;
    sec->broken_end_us = CHECKER_OPEN_END;
    sec->alive_us = ts;
    if (!checker_field_word(line, "name", sec->name, sizeof(sec->name))) {
        checker_log_error(report, errors, path, "line %zu: BEGIN without name", lineno);
    }
    if (checker_begin_kind(sec, line) != 0) {
        checker_log_error(report, errors, path,
                          "line %zu: BEGIN with a bad kind=, limit= or permit=", lineno);
    }
    sec->has_validity = checker_field_ll(line, "validity", &sec->validity);
    if (!checker_field_ll(line, "fence", &sec->fence)) {
        sec->fence = -1;
    }
    sec->acquire_us = checker_field_ll(line, "acquire_us", &v) ? v : 0;
    sec->port = checker_field_ll(line, "port", &v) ? (int)v : 0;
    if (checker_field_ll(line, "pid", &v)) {
        sec->pid = (long)v;
    }
    sec->lease = checker_field_word(line, "mode", mode, sizeof(mode))
                 && strcmp(mode, "lease") == 0;
    if (sec->lease && checker_field_ll(line, "deadline_us", &v)) {
        sec->deadline_us = v;
    }
    return sec;
}

/* t plus the section's ttl (when its keys surely expired), or CHECKER_OPEN_END. */
static int64_t
checker_plus_ttl(const struct checker_section *sec, int64_t t)
{
    return sec->ttl_ms > 0 ? t + sec->ttl_ms * 1000 : CHECKER_OPEN_END;
}

/* The outcome line of a section (END, ABORT, REJECT): what it says into sec. */
static void
checker_outcome(struct checker_section *sec, const char *word, int64_t ts, const char *line,
                const char *path, size_t lineno, FILE *report, size_t *errors)
{
    char why[16], reason[16];

    if (strcmp(word, "END") == 0 && sec->hold == CHECKER_HOLD_SHARED) {
        sec->how = CHECKER_END_READ;
        if (!checker_field_ll(line, "read", &sec->read)
            || !checker_field_ll(line, "reread", &sec->reread)) {
            checker_log_error(report, errors, path,
                              "line %zu: a shared END without read= or reread=", lineno);
        }
    } else if (strcmp(word, "END") == 0) {
        sec->how = CHECKER_END_WROTE;
        if (!checker_field_ll(line, "wrote", &sec->wrote)
            || !checker_field_ll(line, "prev_fence", &sec->prev_fence)) {
            checker_log_error(report, errors, path, "line %zu: END without wrote= or prev_fence=",
                              lineno);
        }
    } else if (strcmp(word, "REJECT") == 0) {
        /* Refused because the stored fence is not below the writer's. */
        sec->how = CHECKER_END_REJECT;
        if (!checker_field_ll(line, "prev_fence", &sec->prev_fence)
            || sec->prev_fence < sec->fence) {
            checker_log_error(report, errors, path, "line %zu: REJECT without prev_fence= or "
                              "with one below its fence", lineno);
        }
    } else {
        sec->how = CHECKER_END_ABORT;
        if (checker_field_word(line, "why", why, sizeof(why)) && strcmp(why, "lost") == 0
            && checker_field_word(line, "reason", reason, sizeof(reason))
            && strcmp(reason, "broken") == 0) {
            if (sec->broken_us == 0) {
                sec->broken_us = ts;
            }
            /* A BREAK deleted its keys before the LOST came. */
            if (!sec->lease) {
                sec->free_us = ts;
            }
        } else if (!sec->lease) {
            /* Lost, or the connection closed: its keys may live one more ttl. */
            sec->free_us = checker_plus_ttl(sec, ts);
        }
    }
    if (!sec->lease || sec->how == CHECKER_END_ABORT) {
        sec->end_us = ts;
    }
}

/* A lease's RELEASE line: the section ends at the UNLOCK's send (or before). */
static void
checker_release(struct checker_section *sec, int64_t ts, const char *line, const char *path,
                size_t lineno, FILE *report, size_t *errors)
{
    char answer[16] = "";
    long long sent;

    if (!checker_field_ll(line, "sent_us", &sent)) {
        checker_log_error(report, errors, path, "line %zu: RELEASE without sent_us=", lineno);
        sent = sec->begin_us;
    }
    sec->release_us = sent;
    sec->released_us = ts;
    if (checker_field_word(line, "answer", answer, sizeof(answer))
        && strcmp(answer, "NOTHELD") == 0) {
        sec->notheld = true;
    }
    /* Free at the OK (a quorum deleted it), else when its keys expire. */
    sec->free_us = checker_plus_ttl(sec, sec->alive_us);
    if (strcmp(answer, "OK") == 0 && ts < sec->free_us) {
        sec->free_us = ts;
    }
    if (sec->how == CHECKER_END_NONE) {
        checker_log_error(report, errors, path, "line %zu: RELEASE of a section without END, "
                          "REJECT or ABORT", lineno);
        sec->how = CHECKER_END_ABORT;
    }
    if (sec->end_us == CHECKER_OPEN_END || sent < sec->end_us) {
        sec->end_us = sent;
    }
    if (sec->deadline_us > 0 && sec->deadline_us < sec->end_us) {
        sec->end_us = sec->deadline_us;
    }
    if (sec->end_us < sec->begin_us) {
        sec->end_us = sec->begin_us;
    }
}

/* A WAIT line: a wait of log idx from ts on.  0, or -1 when memory ran out. */
static int
checker_wait_line(struct checker_sections *out, size_t idx, long long pid, int64_t ts,
                  const char *line)
{
    struct checker_wait *w = checker_push_wait(out);
    long long v;

    if (w == NULL) {
        return -1;
    }
    if (!checker_field_word(line, "name", w->name, sizeof(w->name))) {
        w->name[0] = '\0';
    }
    w->log = idx;
    w->pid = (long)pid;
    w->port = checker_field_ll(line, "port", &v) ? (int)v : 0;
    w->from_us = ts;
    w->to_us = CHECKER_OPEN_END;
    return 0;
}

/*
 * The end of a log: each of its sections v[first..] whose log did not
 * say when the name was free of it gets the latest time it can be: a
 * lease's keys expire a ttl after its last LOCK or EXTEND; a session
 * killed inside or right after its section keeps its keys until the
 * daemon sees the close, at most a ttl after the kill; else never.
 */
static void
checker_free_at_eof(struct checker_sections *out, size_t first,
                    const struct checker_log *lg)
{
    struct checker_section *sec;
    size_t i;

    for (i = first; i < out->n; i++) {
        sec = &out->v[i];
        if (sec->free_us != 0) {
            continue;
        }
        if (sec->lease) {
            sec->free_us = checker_plus_ttl(sec, sec->alive_us);
        } else if (lg->killed_us > 0) {
            sec->free_us = checker_plus_ttl(sec, lg->killed_us > sec->begin_us
                                                  ? lg->killed_us : sec->begin_us);
        } else {
            sec->free_us = CHECKER_OPEN_END;
        }
    }
}

/*
 * The BEGIN of a set (name=P,Q,... fence=F1,F2,...): one section per
 * name, sections v[first..first+n) of out, each with its name and its
 * fence.  Returns n, or 0 when memory ran out.
 */
static size_t
checker_begin_set(struct checker_sections *out, size_t idx, long long pid, long long ttl,
                  int64_t ts, const char *line, const char *path, size_t lineno, FILE *report,
                  size_t *errors)
{
    char names[CHECKER_NAME_MAX + 1], fences[512] = "", *np, *fp, *ns = NULL, *fs = NULL;
    struct checker_section *sec;
    size_t n = 0, i;
    long long set;

    checker_field_word(line, "name", names, sizeof(names));
    checker_field_word(line, "fence", fences, sizeof(fences));
    fp = strtok_r(fences, ",", &fs);
    for (np = strtok_r(names, ",", &ns); np != NULL; np = strtok_r(NULL, ",", &ns)) {
        sec = checker_begin(out, idx, pid, ttl, ts, line, path, lineno, report, errors);
        if (sec == NULL) {
            return 0;
        }
        snprintf(sec->name, sizeof(sec->name), "%s", np);
        sec->fence = fp != NULL ? strtoll(fp, NULL, 10) : -1;
        sec->set_index = n++;
        fp = fp != NULL ? strtok_r(NULL, ",", &fs) : NULL;
    }
    checker_field_word(line, "name", names, sizeof(names));
    for (i = out->n - n; i < out->n; i++) {
        out->v[i].set = n;
        snprintf(out->v[i].set_names, sizeof(out->v[i].set_names), "%s", names);
    }
    if (n < 2 || fp != NULL || out->v[out->n - 1].fence < 0
        || !checker_field_ll(line, "set", &set) || set != (long long)n) {
        checker_log_error(report, errors, path, "line %zu: a set's BEGIN without one fence per "
                          "name, or with set= not its number of names", lineno);
    }
    return n;
}

/*
 * A WRITE, END, ABORT or REJECT inside a set's section (sections
 * v[first..first+n) of out): the names it lists (name=P,Q with
 * fence=F1,F2; without name=, every name still open) get it, each as a
 * section of its own.  True when every name of the set has its outcome.
 */
static bool
checker_set_line(struct checker_sections *out, size_t first, size_t n, const char *word,
                 int64_t ts, const char *line, const char *path, size_t lineno, FILE *report,
                 size_t *errors)
{
    char names[CHECKER_NAME_MAX + 1], fences[512] = "", *np, *fp, *ns = NULL, *fs = NULL;
    struct checker_section *sec;
    size_t i, done = 0;
    bool all = !checker_field_word(line, "name", names, sizeof(names));

    if (strcmp(word, "EXTEND") == 0 || strcmp(word, "RELEASE") == 0) {
        checker_log_error(report, errors, path, "line %zu: %s in a set's section", lineno, word);
        return false;
    }
    checker_field_word(line, "fence", fences, sizeof(fences));
    fp = strtok_r(fences, ",", &fs);
    np = all ? NULL : strtok_r(names, ",", &ns);
    for (i = 0; i < n; i++) {
        sec = &out->v[first + i];
        if (all ? sec->how != CHECKER_END_NONE : np == NULL || strcmp(sec->name, np) != 0) {
            continue;
        }
        if (!all && (fp == NULL || strtoll(fp, NULL, 10) != sec->fence)) {
            checker_log_error(report, errors, path, "line %zu: %s of %s with another fence "
                              "than its BEGIN", lineno, word, sec->name);
        }
        if (strcmp(word, "WRITE") == 0) {
            sec->write_started = true;
        } else if (sec->how != CHECKER_END_NONE) {
            checker_log_error(report, errors, path, "line %zu: a second %s of %s", lineno, word,
                              sec->name);
        } else {
            checker_outcome(sec, word, ts, line, path, lineno, report, errors);
        }
        if (!all) {
            np = strtok_r(NULL, ",", &ns);
            fp = fp != NULL ? strtok_r(NULL, ",", &fs) : NULL;
            i = SIZE_MAX;       /* the next name may come before this one in the set */
        }
    }
    if (np != NULL) {
        checker_log_error(report, errors, path, "line %zu: %s of %s, not a name of the set",
                          lineno, word, np);
    }
    for (i = 0; i < n; i++) {
        done += out->v[first + i].how != CHECKER_END_NONE;
    }
    return done == n;
}

/* Read one log; its sections are appended to out. */
static int
checker_load_one(const struct checker_log *lg, size_t idx, struct checker_sections *out,
                 FILE *report, size_t *errors)
{
    struct checker_section *sec;
    char *line = NULL, word[16], needle[CHECKER_NAME_MAX + 32];
    size_t cap = 0, lineno = 0, cur = SIZE_MAX, last = SIZE_MAX, cur_n = 1, last_n = 1, j;
    long long ts, v, pid = -1, ttl = 0;
    int64_t write_end = 0;
    size_t first = out->n, wait = SIZE_MAX;
    ssize_t len;
    FILE *f;

    f = fopen(lg->path, "re");
    if (f == NULL) {
        checker_log_error(report, errors, lg->path, "cannot open: %s", strerror(errno));
        return -1;
    }
    while ((len = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (line[len - 1] != '\n') {
            /* The line being written when the client was killed. */
            break;
        }
        line[len - 1] = '\0';
        if (sscanf(line, "%15s %lld", word, &ts) != 2) {
            checker_log_error(report, errors, lg->path, "line %zu: no event and time", lineno);
            continue;
        }
        if (wait != SIZE_MAX && strcmp(word, "PUSH") != 0) {
            /* Whatever the client logs next (but a push) is the LOCK's answer. */
            out->w[wait].to_us = ts;
            wait = SIZE_MAX;
        }
        if (strcmp(word, "WAIT") == 0) {
            if (checker_wait_line(out, idx, pid, ts, line) != 0) {
                free(line);
                fclose(f);
                return -1;
            }
            wait = out->nw - 1;
        } else if (strcmp(word, "UNLOCK") == 0) {
            /* A session's UNLOCK answered: "OK <name> holds=0" frees the name. */
            for (j = last; last != SIZE_MAX && cur == SIZE_MAX && j < last + last_n; j++) {
                sec = &out->v[j];
                if (sec->lease || sec->free_us != 0) {
                    continue;
                }
                sec->free_us = strstr(line, " OK ") != NULL
                               && checker_field_ll(line, "holds", &v) && v == 0
                               ? ts : checker_plus_ttl(sec, ts);
            }
        } else if (strcmp(word, "START") == 0) {
            checker_field_ll(line, "pid", &pid);
            if (!checker_field_ll(line, "ttl", &ttl)) {
                ttl = 0;
            }
        } else if (strcmp(word, "BEGIN") == 0) {
            if (cur != SIZE_MAX) {
                checker_log_error(report, errors, lg->path,
                                  "line %zu: BEGIN inside a section", lineno);
                for (j = cur; j < cur + cur_n; j++) {
                    if (cur_n == 1 || out->v[j].how == CHECKER_END_NONE) {
                        out->v[j].how = CHECKER_END_NONE;
                        out->v[j].end_us = CHECKER_OPEN_END;
                    }
                }
            }
            if (checker_field_word(line, "name", needle, sizeof(needle))
                && strchr(needle, ',') != NULL) {
                cur_n = checker_begin_set(out, idx, pid, ttl, ts, line, lg->path, lineno,
                                          report, errors);
                sec = cur_n > 0 ? &out->v[out->n - cur_n] : NULL;
            } else {
                cur_n = 1;
                sec = checker_begin(out, idx, pid, ttl, ts, line, lg->path, lineno, report,
                                    errors);
            }
            if (sec == NULL) {
                free(line);
                fclose(f);
                return -1;
            }
            cur = out->n - cur_n;
            last = cur;
            last_n = cur_n;
            write_end = 0;
        } else if (strcmp(word, "PUSH") == 0) {
            /* A LOST reason=broken read in a section or after it, before the next one. */
            for (j = last; last != SIZE_MAX && j < last + last_n; j++) {
                sec = &out->v[j];
                snprintf(needle, sizeof(needle), " ! LOST %s reason=broken",
                         sec->set > 0 ? sec->set_names : sec->name);
                if (sec->set > 0) {
                    for (char *q = needle; *q != '\0'; q++) {
                        *q = *q == ',' ? ' ' : *q;   /* the push names the set with spaces */
                    }
                }
                if (strstr(line, needle) != NULL && sec->broken_us == 0) {
                    sec->broken_us = ts;
                }
            }
        } else if (strcmp(word, "WRITE") == 0 || strcmp(word, "END") == 0
                   || strcmp(word, "ABORT") == 0 || strcmp(word, "REJECT") == 0
                   || strcmp(word, "EXTEND") == 0 || strcmp(word, "RELEASE") == 0) {
            if (cur == SIZE_MAX) {
                checker_log_error(report, errors, lg->path, "line %zu: %s outside a section",
                                  lineno, word);
                continue;
            }
            if (cur_n > 1) {
                if (checker_set_line(out, cur, cur_n, word, ts, line, lg->path, lineno, report,
                                     errors)) {
                    cur = SIZE_MAX;
                }
                continue;
            }
            sec = &out->v[cur];
            if (!checker_field_ll(line, "fence", &v) || v != sec->fence) {
                checker_log_error(report, errors, lg->path,
                                  "line %zu: %s with another fence than its BEGIN", lineno,
                                  word);
            }
            if (strcmp(word, "WRITE") == 0) {
                sec->write_started = true;
                continue;
            }
            if ((strcmp(word, "EXTEND") == 0 || strcmp(word, "RELEASE") == 0) && !sec->lease) {
                checker_log_error(report, errors, lg->path, "line %zu: %s in a session section",
                                  lineno, word);
                continue;
            }
            if (strcmp(word, "EXTEND") == 0) {
                if (checker_field_ll(line, "deadline_us", &v) && sec->deadline_us > 0) {
                    sec->deadline_us = v;
                }
                if (!checker_field_word(line, "answer", needle, sizeof(needle))) {
                    needle[0] = '\0';
                }
                if (strcmp(needle, "NOTHELD") == 0) {
                    sec->notheld = true;
                } else if (strcmp(needle, "OK") == 0) {
                    sec->alive_us = ts;     /* its keys live a ttl from here at most */
                }
                continue;
            }
            if (strcmp(word, "RELEASE") == 0) {
                checker_release(sec, ts, line, lg->path, lineno, report, errors);
                sec->late_write = write_end > 0 && sec->deadline_us > 0
                                  && write_end > sec->deadline_us;
                cur = SIZE_MAX;
                continue;
            }
            if (sec->how != CHECKER_END_NONE) {
                checker_log_error(report, errors, lg->path, "line %zu: a second %s in a section",
                                  lineno, word);
                continue;
            }
            checker_outcome(sec, word, ts, line, lg->path, lineno, report, errors);
            if (strcmp(word, "END") == 0) {
                write_end = ts;
            }
            if (!sec->lease) {
                cur = SIZE_MAX;
            }
        }
    }
    for (j = cur; cur != SIZE_MAX && j < cur + cur_n; j++) {
        if (out->v[j].how == CHECKER_END_NONE) {
            checker_close_at_eof(out, j, lg);
        }
    }
    if (wait != SIZE_MAX && lg->killed_us > 0) {
        out->w[wait].to_us = lg->killed_us;
    }
    checker_free_at_eof(out, first, lg);
    free(line);
    fclose(f);
    return 0;
}

int
checker_load(const struct checker_log *logs, size_t nlogs, struct checker_sections *out,
             FILE *report, size_t *log_errors)
{
    size_t i, errors = 0;
    int rc = 0;

    for (i = 0; i < nlogs; i++) {
        if (checker_load_one(&logs[i], i, out, report, &errors) != 0) {
            rc = -1;
        }
    }
    if (log_errors != NULL) {
        *log_errors = errors;
    }
    if (report != NULL && errors > CHECKER_REPORT_MAX) {
        fprintf(report, "    ... and %zu more log errors\n", errors - CHECKER_REPORT_MAX);
    }
    return rc;
}

void
checker_free(struct checker_sections *s)
{
    free(s->v);
    s->v = NULL;
    s->n = 0;
    s->cap = 0;
    free(s->w);
    s->w = NULL;
    s->nw = 0;
    s->wcap = 0;
}

/* qsort: BREAKs by name, then send. */
static int
checker_cmp_break(const void *a, const void *b)
{
    const struct checker_break *x = a, *y = b;
    int c = strcmp(x->name, y->name);

    if (c != 0) {
        return c;
    }
    return x->sent_us < y->sent_us ? -1 : x->sent_us > y->sent_us;
}

/* Room for one more BREAK. */
static struct checker_break *
checker_push_break(struct checker_breaks *b)
{
    struct checker_break *grown;
    size_t cap;

    if (b->n == b->cap) {
        cap = b->cap == 0 ? 64 : b->cap * 2;
        grown = realloc(b->v, cap * sizeof(*grown));
        if (grown == NULL) {
            return NULL;
        }
        b->v = grown;
        b->cap = cap;
    }
    memset(&b->v[b->n], 0, sizeof(b->v[b->n]));
    return &b->v[b->n++];
}

/* Read one operator's log into out. */
static int
checker_load_break_log(const char *path, struct checker_breaks *out, FILE *report,
                       size_t *errors)
{
    struct checker_break *k = NULL;
    char *line = NULL, word[16], name[CHECKER_NAME_MAX + 1];
    size_t cap = 0, lineno = 0;
    long long ts, sent;
    ssize_t len;
    FILE *f;

    f = fopen(path, "re");
    if (f == NULL) {
        checker_log_error(report, errors, path, "cannot open: %s", strerror(errno));
        return -1;
    }
    while ((len = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (line[len - 1] != '\n') {
            break;
        }
        line[len - 1] = '\0';
        if (sscanf(line, "%15s %lld", word, &ts) != 2) {
            checker_log_error(report, errors, path, "line %zu: no event and time", lineno);
            continue;
        }
        if (strcmp(word, "BREAK") == 0) {
            k = checker_push_break(out);
            if (k == NULL) {
                free(line);
                fclose(f);
                return -1;
            }
            if (!checker_field_word(line, "name", k->name, sizeof(k->name))) {
                checker_log_error(report, errors, path, "line %zu: BREAK without name", lineno);
            }
            k->sent_us = ts;
            k->ok_us = CHECKER_OPEN_END;
            k->fence = -1;
            k->holders = -1;
        } else if (strcmp(word, "BROKEN") == 0 || strcmp(word, "BREAKERR") == 0) {
            if (k == NULL || !checker_field_word(line, "name", name, sizeof(name))
                || strcmp(name, k->name) != 0 || !checker_field_ll(line, "sent_us", &sent)
                || sent != k->sent_us) {
                checker_log_error(report, errors, path, "line %zu: %s without its BREAK",
                                  lineno, word);
                continue;
            }
            if (strcmp(word, "BROKEN") == 0) {
                k->ok_us = ts;
                if (!checker_field_ll(line, "fence", &k->fence)
                    || !checker_field_ll(line, "holders", &k->holders) || k->fence < 1) {
                    checker_log_error(report, errors, path,
                                      "line %zu: BROKEN without fence= or holders=", lineno);
                    k->fence = -1;
                }
            }
            k = NULL;
        }
    }
    free(line);
    fclose(f);
    return 0;
}

int
checker_load_breaks(const char *const *paths, size_t n, struct checker_breaks *out,
                    FILE *report, size_t *log_errors)
{
    size_t i, errors = 0;
    int rc = 0;

    for (i = 0; i < n; i++) {
        if (checker_load_break_log(paths[i], out, report, &errors) != 0) {
            rc = -1;
        }
    }
    if (out->n > 1) {
        qsort(out->v, out->n, sizeof(out->v[0]), checker_cmp_break);
    }
    if (log_errors != NULL) {
        *log_errors += errors;
    }
    return rc;
}

void
checker_free_breaks(struct checker_breaks *b)
{
    free(b->v);
    b->v = NULL;
    b->n = 0;
    b->cap = 0;
}

const struct checker_section *
checker_held_at(const struct checker_sections *s, size_t log, int64_t t)
{
    size_t i;

    for (i = 0; i < s->n; i++) {
        if (s->v[i].log == log && s->v[i].begin_us <= t && s->v[i].end_us > t) {
            return &s->v[i];
        }
    }
    return NULL;
}

size_t
checker_begun_since(const struct checker_sections *s, const char *name, int64_t t)
{
    size_t i, n = 0;

    for (i = 0; i < s->n; i++) {
        n += strcmp(s->v[i].name, name) == 0 && s->v[i].begin_us >= t;
    }
    return n;
}

/* ---- the checks ---- */

/* qsort: by name, then begin, then log. */
static int
checker_cmp(const void *a, const void *b)
{
    const struct checker_section *x = *(const struct checker_section *const *)a;
    const struct checker_section *y = *(const struct checker_section *const *)b;
    int c = strcmp(x->name, y->name);

    if (c != 0) {
        return c;
    }
    if (x->begin_us != y->begin_us) {
        return x->begin_us < y->begin_us ? -1 : 1;
    }
    return x->log < y->log ? -1 : x->log > y->log;
}

/* qsort: by permit, then begin, then log (the sections of one counted name). */
static int
checker_cmp_permit(const void *a, const void *b)
{
    const struct checker_section *x = *(const struct checker_section *const *)a;
    const struct checker_section *y = *(const struct checker_section *const *)b;

    if (x->permit != y->permit) {
        return x->permit < y->permit ? -1 : 1;
    }
    return checker_cmp(a, b);
}

static const char *
checker_how(const struct checker_section *s)
{
    switch (s->how) {
    case CHECKER_END_WROTE:
        return "wrote";
    case CHECKER_END_READ:
        return "read";
    case CHECKER_END_ABORT:
        return "aborted";
    case CHECKER_END_REJECT:
        return "write rejected";
    case CHECKER_END_KILLED:
        return "killed";
    case CHECKER_END_NONE:
        break;
    }
    return "never ended";
}

/* "pid P (fence F, port D)", with the kind of hold first unless plain exclusive. */
static const char *
checker_who(const struct checker_section *s, bool kinds, char *buf, size_t size)
{
    char what[48] = "";

    if (s->hold == CHECKER_HOLD_COUNTED) {
        snprintf(what, sizeof(what), "permit %d, ", s->permit);
    } else if (s->set > 0) {
        snprintf(what, sizeof(what), "set of %zu, ", s->set);
    } else if (kinds) {
        snprintf(what, sizeof(what), "%s, ",
                 s->hold == CHECKER_HOLD_SHARED ? "shared" : "exclusive");
    }
    snprintf(buf, size, "pid %ld (%sfence %lld, port %d)", s->pid, what, s->fence, s->port);
    return buf;
}

/* The stat of name in r, added when there is room; NULL when there is none. */
static struct checker_name_stat *
checker_stat(struct checker_result *r, const char *name)
{
    size_t i;

    for (i = 0; i < r->nnames; i++) {
        if (strcmp(r->names[i].name, name) == 0) {
            return &r->names[i];
        }
    }
    if (r->nnames == CHECKER_NAMES_MAX) {
        return NULL;
    }
    memset(&r->names[r->nnames], 0, sizeof(r->names[0]));
    snprintf(r->names[r->nnames].name, sizeof(r->names[0].name), "%s", name);
    return &r->names[r->nnames++];
}

const struct checker_name_stat *
checker_name(const struct checker_result *r, const char *name)
{
    size_t i;

    for (i = 0; i < r->nnames; i++) {
        if (strcmp(r->names[i].name, name) == 0) {
            return &r->names[i];
        }
    }
    return NULL;
}

/* A fenced overlap: s began while other, whose late write was refused, held. */
static void
checker_fenced(struct checker_ctx *x, const char *label, const struct checker_section *other,
               const struct checker_section *s, bool kinds, struct checker_name_stat *st)
{
    char w1[96], w2[96];

    x->res->fenced++;
    if (st != NULL) {
        st->fenced++;
    }
    if (x->report == NULL || x->res->fenced > CHECKER_REPORT_MAX) {
        return;
    }
    fprintf(x->report, "    fenced (not a violation): %s: %s held it from @%.6f to @%.6f, "
            "when its write was refused (stored fence %lld); %s began @%.6f, %.1f ms before "
            "that end\n", label, checker_who(other, kinds, w1, sizeof(w1)),
            checker_s(other->begin_us), checker_s(other->end_us), other->prev_fence,
            checker_who(s, kinds, w2, sizeof(w2)), checker_s(s->begin_us),
            (double)(other->end_us - s->begin_us) / 1e3);
}

/* A broken overlap: s began while other, which a BREAK had ended, was inside its section. */
static void
checker_broken(struct checker_ctx *x, const char *label, const struct checker_section *other,
               const struct checker_section *s, bool kinds, struct checker_name_stat *st)
{
    char w1[96], w2[96];

    x->res->broken++;
    if (st != NULL) {
        st->broken++;
    }
    if (x->all != NULL) {
        fprintf(x->all, "broken: %s: %s from @%.6f to @%.6f, BREAK sent @%.6f; %s began "
                "@%.6f\n", label, checker_who(other, kinds, w1, sizeof(w1)),
                checker_s(other->begin_us), checker_s(other->end_us),
                checker_s(other->broken_end_us), checker_who(s, kinds, w2, sizeof(w2)),
                checker_s(s->begin_us));
    }
    if (x->report == NULL || x->res->broken > CHECKER_REPORT_MAX) {
        return;
    }
    fprintf(x->report, "    broken (not a violation): %s: %s held it from @%.6f to @%.6f; a "
            "BREAK sent @%.6f ended it; %s began @%.6f\n", label,
            checker_who(other, kinds, w1, sizeof(w1)), checker_s(other->begin_us),
            checker_s(other->end_us), checker_s(other->broken_end_us),
            checker_who(s, kinds, w2, sizeof(w2)), checker_s(s->begin_us));
}

/*
 * Where a section stops counting against the others: its end, or the
 * send of the BREAK that broke it; not at all for a REJECT-ended one
 * (fenced) unless the run is strict.
 */
static int64_t
checker_judged_end(const struct checker_ctx *x, const struct checker_section *s)
{
    if (s->how == CHECKER_END_REJECT && !x->strict) {
        return INT64_MIN;
    }
    return s->broken_end_us < s->end_us ? s->broken_end_us : s->end_us;
}

/* The one of a and b (either may be NULL) whose judged end is later. */
static const struct checker_section *
checker_later_judged(const struct checker_ctx *x, const struct checker_section *a,
                     const struct checker_section *b)
{
    if (b == NULL || checker_judged_end(x, b) == INT64_MIN) {
        return a;
    }
    return a == NULL || checker_judged_end(x, b) > checker_judged_end(x, a) ? b : a;
}

/* The one of a and b (either may be NULL) that ends later. */
static const struct checker_section *
checker_later(const struct checker_section *a, const struct checker_section *b)
{
    return a == NULL || (b != NULL && b->end_us > a->end_us) ? b : a;
}

/*
 * Overlaps and fence order of sections that exclude each other, in the
 * order they began: a name of the exclusive/shared family, or the
 * sections of one permit of a counted name (label says which).  A
 * shared section conflicts only with exclusive ones; any other with
 * every other.  Kept while walking: the section that ends last so far
 * (among all, and among the exclusive ones), the same by judged end
 * (checker_judged_end: a REJECT-ended section does not count, unless
 * strict, and a broken one only until its BREAK was sent), and the
 * largest fence (among all, and among the exclusive ones).  A section
 * that begins before the judged end of an earlier one overlaps it; one
 * that begins only inside the rest of an earlier one is a fenced
 * overlap (REJECT) or a broken one (BREAK).
 */
static void
checker_walk(struct checker_ctx *x, const char *label, struct checker_section **v, size_t n,
             bool kinds, struct checker_name_stat *st)
{
    const struct checker_section *last = NULL, *last_x = NULL, *top = NULL, *top_x = NULL;
    const struct checker_section *last_j = NULL, *last_xj = NULL;
    const struct checker_section *other, *judged, *ref;
    char w1[96], w2[96];
    size_t i;
    bool excl;

    for (i = 0; i < n; i++) {
        const struct checker_section *s = v[i];

        excl = s->hold != CHECKER_HOLD_SHARED;
        other = excl ? last : last_x;
        judged = excl ? last_j : last_xj;
        if (judged != NULL && s->begin_us < checker_judged_end(x, judged)) {
            if (st != NULL) {
                st->overlaps++;
            }
            checker_note(x, CHECKER_OVERLAP,
                         "%s: %s held it from @%.6f to @%.6f (%s); %s began @%.6f, %.1f ms "
                         "before that end", label, checker_who(judged, kinds, w1, sizeof(w1)),
                         checker_s(judged->begin_us),
                         judged->end_us == CHECKER_OPEN_END ? 0.0 : checker_s(judged->end_us),
                         checker_how(judged), checker_who(s, kinds, w2, sizeof(w2)),
                         checker_s(s->begin_us),
                         judged->end_us == CHECKER_OPEN_END
                             ? 0.0 : (double)(judged->end_us - s->begin_us) / 1e3);
        } else if (other != NULL && s->begin_us < other->end_us) {
            if (other->how == CHECKER_END_REJECT && !x->strict) {
                checker_fenced(x, label, other, s, kinds, st);
            } else {
                checker_broken(x, label, other, s, kinds, st);
                /* The broken holder may still write: a shared reader may see it. */
                v[i]->broken_read = !excl;
            }
        }
        ref = excl ? top : top_x;
        if (s->fence < 0) {
            checker_note(x, CHECKER_FENCE, "%s: pid %ld's grant @%.6f has no fence", label,
                         s->pid, checker_s(s->begin_us));
        } else if (ref != NULL && s->fence <= ref->fence) {
            checker_note(x, CHECKER_FENCE,
                         "%s: %s's grant @%.6f has fence %lld, not above fence %lld of "
                         "%s's grant @%.6f", label, checker_who(s, kinds, w1, sizeof(w1)),
                         checker_s(s->begin_us), s->fence, ref->fence,
                         checker_who(ref, kinds, w2, sizeof(w2)), checker_s(ref->begin_us));
        }
        last = checker_later(last, s);
        last_x = excl ? checker_later(last_x, s) : last_x;
        last_j = checker_later_judged(x, last_j, s);
        last_xj = excl ? checker_later_judged(x, last_xj, s) : last_xj;
        if (s->fence >= 0 && (top == NULL || s->fence > top->fence)) {
            top = s;
        }
        if (excl && s->fence >= 0 && (top_x == NULL || s->fence > top_x->fence)) {
            top_x = s;
        }
    }
}

/* A begin or an end of a section, for the sweeps. */
struct checker_event {
    int64_t                       t;    /* when */
    int                           up;   /* 1 begin, 0 end */
    const struct checker_section *s;    /* whose */
};

/* qsort: by time, an end before a begin at the same time (they do not overlap). */
static int
checker_cmp_event(const void *a, const void *b)
{
    const struct checker_event *x = a, *y = b;

    if (x->t != y->t) {
        return x->t < y->t ? -1 : 1;
    }
    return x->up - y->up;
}

/*
 * Sweep the sections v[0..n) that count (counted: all; the family: the
 * shared ones) in time order: the most at once, and, when limit > 0,
 * an over-limit finding each time their number rises above it.
 * Returns the most at once, or 0 when memory ran out.
 */
static size_t
checker_sweep(struct checker_ctx *x, struct checker_section **v, size_t n, bool shared_only,
              int limit, struct checker_name_stat *st)
{
    struct checker_event *ev;
    const struct checker_section **live;
    size_t i, k, ne = 0, nlive = 0, most = 0, used;
    char list[512], w[96];

    ev = malloc(2 * n * sizeof(*ev) + 1);
    live = malloc(n * sizeof(*live) + 1);
    if (ev == NULL || live == NULL) {
        free(ev);
        free(live);
        return 0;
    }
    for (i = 0; i < n; i++) {
        /* A holder a BREAK ended counts until the BREAK was sent (maybe not at all). */
        int64_t end = v[i]->broken_end_us < v[i]->end_us ? v[i]->broken_end_us : v[i]->end_us;

        if ((shared_only && v[i]->hold != CHECKER_HOLD_SHARED) || end <= v[i]->begin_us) {
            continue;
        }
        ev[ne].t = v[i]->begin_us;
        ev[ne].up = 1;
        ev[ne++].s = v[i];
        ev[ne].t = end;
        ev[ne].up = 0;
        ev[ne++].s = v[i];
    }
    qsort(ev, ne, sizeof(*ev), checker_cmp_event);
    for (i = 0; i < ne; i++) {
        if (!ev[i].up) {
            for (k = 0; k < nlive; k++) {
                if (live[k] == ev[i].s) {
                    live[k] = live[--nlive];
                    break;
                }
            }
            continue;
        }
        live[nlive++] = ev[i].s;
        if (nlive > most) {
            most = nlive;
        }
        if (limit > 0 && nlive == (size_t)limit + 1) {
            /* One more than the limit: name them all. */
            used = 0;
            list[0] = '\0';
            for (k = 0; k < nlive && used + 1 < sizeof(list); k++) {
                used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s since @%.6f",
                                         k > 0 ? ", " : "",
                                         checker_who(live[k], true, w, sizeof(w)),
                                         checker_s(live[k]->begin_us));
            }
            if (st != NULL) {
                st->over_limit++;
            }
            checker_note(x, CHECKER_OVER_LIMIT, "%s: %zu holders at once @%.6f, limit %d: %s",
                         ev[i].s->name, nlive, checker_s(ev[i].t), limit, list);
        }
    }
    free(ev);
    free(live);
    return most;
}

/* The BREAKs of name: *count of them from the returned one on (NULL when none). */
static const struct checker_break *
checker_breaks_of(const struct checker_ctx *x, const char *name, size_t *count)
{
    const struct checker_breaks *b = x->breaks;
    size_t i, j;

    *count = 0;
    for (i = 0; b != NULL && i < b->n; i++) {
        if (strcmp(b->v[i].name, name) == 0) {
            for (j = i; j < b->n && strcmp(b->v[j].name, name) == 0; j++) {
                continue;
            }
            *count = j - i;
            return &b->v[i];
        }
    }
    return NULL;
}

/*
 * Whether BREAK k ended section s (checker.h): its grant was read before
 * k's OK, it was inside its section when k was sent, it was granted
 * before that send or was told so afterwards, and on the family its
 * fence is below k's F.
 */
static bool
checker_broken_by(const struct checker_section *s, const struct checker_break *k)
{
    if (s->begin_us >= k->ok_us || s->end_us <= k->sent_us) {
        return false;
    }
    if (s->begin_us >= k->sent_us && s->broken_us < k->sent_us && !s->notheld) {
        return false;
    }
    return s->hold == CHECKER_HOLD_COUNTED || k->fence < 0 || s->fence < k->fence;
}

/*
 * The BREAKs of one name against its sections v[0..n): each section's
 * broken_end_us; on the exclusive/shared family, the fences around
 * each BREAK answered OK (break-after, break-broken).
 */
static void
checker_breaks_check(struct checker_ctx *x, struct checker_section **v, size_t n,
                     struct checker_name_stat *st)
{
    const struct checker_break *kb, *k, *by;
    long long top;
    size_t i, j, nb;
    int64_t first_lock;
    bool family = v[0]->hold != CHECKER_HOLD_COUNTED;

    kb = checker_breaks_of(x, v[0]->name, &nb);
    for (j = 0; j < nb; j++) {
        if (kb[j].ok_us != CHECKER_OPEN_END) {
            x->res->breaks++;
            if (st != NULL) {
                st->breaks++;
            }
        }
    }
    for (i = 0; i < n; i++) {
        struct checker_section *s = v[i];

        for (j = 0; j < nb; j++) {
            if (checker_broken_by(s, &kb[j])) {
                s->broken_end_us = kb[j].sent_us;
                break;
            }
        }
        /* break-after: granted after a BREAK's OK, its fence must be above every such F. */
        first_lock = s->begin_us - s->acquire_us;
        top = -1;
        k = NULL;
        for (j = 0; j < nb; j++) {
            if (kb[j].ok_us < first_lock && kb[j].fence > top) {
                top = kb[j].fence;
                k = &kb[j];
            }
        }
        if (family && k != NULL && s->fence >= 0 && s->fence <= top) {
            checker_note(x, CHECKER_BREAK_AFTER, "%s: pid %ld's grant @%.6f (first LOCK "
                         "@%.6f) has fence %lld, not above F=%lld of the BREAK answered "
                         "@%.6f", s->name, s->pid, checker_s(s->begin_us),
                         checker_s(first_lock), s->fence, top, checker_s(k->ok_us));
        }
        if (s->broken_us == 0) {
            continue;
        }
        /* break-broken: the BREAK that ended it is the last one sent before its LOST. */
        by = NULL;
        for (j = 0; j < nb && kb[j].sent_us <= s->broken_us; j++) {
            by = &kb[j];
        }
        if (by == NULL) {
            checker_note(x, CHECKER_BREAK_BROKEN, "%s: pid %ld (fence %lld, granted @%.6f) was "
                         "told LOST reason=broken @%.6f, but no BREAK of it was sent before",
                         s->name, s->pid, s->fence, checker_s(s->begin_us),
                         checker_s(s->broken_us));
        } else if (s->begin_us >= by->ok_us) {
            x->res->broken_late++;
        } else if (family && by->fence >= 0 && s->fence >= by->fence) {
            checker_note(x, CHECKER_BREAK_BROKEN, "%s: pid %ld's grant @%.6f has fence %lld, "
                         "not below F=%lld of the BREAK sent @%.6f and answered @%.6f that "
                         "ended it (LOST reason=broken @%.6f)", s->name, s->pid,
                         checker_s(s->begin_us), s->fence, by->fence, checker_s(by->sent_us),
                         checker_s(by->ok_us), checker_s(s->broken_us));
        }
    }
}

/* The sections of one name, v[0..n) in the order they began. */
static void
checker_one_name(struct checker_ctx *x, struct checker_section **v, size_t n)
{
    struct checker_name_stat *st = checker_stat(x->res, v[0]->name);
    struct checker_section **byp;
    char label[CHECKER_NAME_MAX + 32];
    bool counted = v[0]->hold == CHECKER_HOLD_COUNTED, kinds = false;
    size_t i, j;
    int limit = v[0]->limit;

    for (i = 0; i < n; i++) {
        if ((v[i]->hold == CHECKER_HOLD_COUNTED) != counted
            || (counted && v[i]->limit != limit)) {
            checker_note(x, CHECKER_LOG, "%s: sections of different kinds (pid %ld's @%.6f "
                         "and pid %ld's @%.6f): a name is one kind at a time", v[0]->name,
                         v[0]->pid, checker_s(v[0]->begin_us), v[i]->pid,
                         checker_s(v[i]->begin_us));
            return;
        }
        kinds = kinds || v[i]->hold != CHECKER_HOLD_EXCLUSIVE;
    }
    checker_breaks_check(x, v, n, st);
    if (st != NULL) {
        st->hold = counted ? CHECKER_HOLD_COUNTED : CHECKER_HOLD_EXCLUSIVE;
        st->limit = limit;
        st->sections = n;
        for (i = 0; i < n; i++) {
            st->exclusive += v[i]->hold == CHECKER_HOLD_EXCLUSIVE;
            st->shared += v[i]->hold == CHECKER_HOLD_SHARED;
        }
        if (st->exclusive == 0 && st->shared > 0) {
            st->hold = CHECKER_HOLD_SHARED;
        }
    }
    if (!counted) {
        checker_walk(x, v[0]->name, v, n, kinds, st);
        if (st != NULL && st->shared > 0) {
            st->max_holders = checker_sweep(x, v, n, true, 0, st);
        }
        return;
    }
    /* Counted: each permit is a mutex; all of them together, at most the limit. */
    byp = malloc(n * sizeof(*byp));
    if (byp == NULL) {
        return;
    }
    memcpy(byp, v, n * sizeof(*byp));
    qsort(byp, n, sizeof(*byp), checker_cmp_permit);
    for (i = 0; i < n; i = j) {
        for (j = i + 1; j < n && byp[j]->permit == byp[i]->permit; j++) {
            continue;
        }
        snprintf(label, sizeof(label), "%s permit %d", v[0]->name, byp[i]->permit);
        checker_walk(x, label, byp + i, j - i, true, st);
    }
    free(byp);
    i = checker_sweep(x, v, n, false, limit, st);
    if (st != NULL) {
        st->max_holders = i;
    }
}

/* Every name's sections (order: sorted by name, then begin). */
static void
checker_order(struct checker_ctx *x, struct checker_section **v, size_t n)
{
    size_t i, j;

    for (i = 0; i < n; i = j) {
        for (j = i + 1; j < n && strcmp(v[j]->name, v[i]->name) == 0; j++) {
            continue;
        }
        checker_one_name(x, v + i, j - i);
    }
}

/* Per-section checks: stale fences, torn reads, validity, sections never ended. */
static void
checker_each(struct checker_ctx *x, const struct checker_sections *all,
             const struct checker_input *in)
{
    size_t i;

    for (i = 0; i < all->n; i++) {
        const struct checker_section *s = &all->v[i];

        x->res->sections++;
        x->res->set_grants += s->set > 0 && s->set_index == 0;
        x->res->leases += s->lease;
        x->res->late_writes += s->late_write;
        if (s->acquire_us > x->res->max_acquire_us) {
            x->res->max_acquire_us = s->acquire_us;
            x->res->max_acquire_at_us = s->begin_us;
            x->res->max_acquire_pid = s->pid;
        }
        if (s->has_validity
            && (s->validity <= 0 || (s->ttl_ms > 0 && s->validity > s->ttl_ms))) {
            checker_note(x, CHECKER_VALIDITY, "%s: pid %ld's grant @%.6f reported validity "
                         "%lld ms (ttl %lld ms)", s->name, s->pid, checker_s(s->begin_us),
                         s->validity, s->ttl_ms);
        }
        switch (s->how) {
        case CHECKER_END_WROTE:
            x->res->wrote++;
            if (s->prev_fence >= s->fence) {
                checker_note(x, CHECKER_STALE_WRITE,
                             "%s: pid %ld wrote @%.6f with fence %lld after a write with "
                             "fence %lld", s->name, s->pid, checker_s(s->end_us), s->fence,
                             s->prev_fence);
            }
            break;
        case CHECKER_END_READ:
            x->res->read++;
            if (s->read != s->reread && s->broken_read) {
                /* The write of the holder a BREAK ended (checker_walk said so). */
                if (x->report != NULL) {
                    fprintf(x->report, "    broken (not a violation): %s: pid %ld (shared, "
                            "fence %lld) read %lld @%.6f and %lld @%.6f: it began while a "
                            "broken exclusive holder was inside its section\n", s->name,
                            s->pid, s->fence, s->read, checker_s(s->begin_us), s->reread,
                            checker_s(s->end_us));
                }
            } else if (s->read != s->reread) {
                checker_note(x, CHECKER_DIRTY_READ,
                             "%s: pid %ld (shared, fence %lld) read %lld @%.6f and %lld "
                             "@%.6f: a write landed inside its section", s->name, s->pid,
                             s->fence, s->read, checker_s(s->begin_us), s->reread,
                             checker_s(s->end_us));
            }
            break;
        case CHECKER_END_ABORT:
            x->res->aborted++;
            break;
        case CHECKER_END_REJECT:
            x->res->rejected++;
            break;
        case CHECKER_END_KILLED:
            x->res->killed++;
            break;
        case CHECKER_END_NONE:
            checker_note(x, CHECKER_OPEN, "%s: pid %ld's section from @%.6f never ended (%s)",
                         s->name, s->pid, checker_s(s->begin_us), in->logs[s->log].path);
            break;
        }
    }
}

/* The counter of each name (or permit) against the sections that wrote. */
static void
checker_counters(struct checker_ctx *x, const struct checker_sections *all,
                 const struct checker_input *in)
{
    size_t i, k, wrote, maybe;
    char label[CHECKER_NAME_MAX + 32];

    for (k = 0; k < in->ncounters; k++) {
        const struct checker_counter *c = &in->counters[k];

        wrote = 0;
        maybe = 0;
        for (i = 0; i < all->n; i++) {
            if (strcmp(all->v[i].name, c->name) != 0
                || (c->per_permit && all->v[i].permit != c->permit)) {
                continue;
            }
            if (all->v[i].how == CHECKER_END_WROTE) {
                wrote++;
            } else if (all->v[i].write_started && all->v[i].how != CHECKER_END_REJECT) {
                maybe++;
            }
        }
        if (c->per_permit) {
            snprintf(label, sizeof(label), "%s permit %d", c->name, c->permit);
        } else {
            snprintf(label, sizeof(label), "%s", c->name);
        }
        if (c->value < (long long)wrote || c->value > (long long)(wrote + maybe)) {
            checker_note(x, CHECKER_LOST_UPDATE,
                         "%s: the counter is %lld, but %zu sections wrote%s", label, c->value,
                         wrote, maybe > 0 ? " (plus some that may have)" : "");
        }
    }
}

/* Names that must have had their full number of holders at once. */
static void
checker_full(struct checker_ctx *x, const struct checker_input *in)
{
    const struct checker_name_stat *st;
    size_t k;

    for (k = 0; k < in->nfull; k++) {
        st = checker_name(x->res, in->full_names[k]);
        if (st == NULL) {
            checker_note(x, CHECKER_NEVER_FULL, "%s: never granted", in->full_names[k]);
        } else if (st->hold == CHECKER_HOLD_COUNTED && st->max_holders < (size_t)st->limit) {
            checker_note(x, CHECKER_NEVER_FULL,
                         "%s: at most %zu at once in %zu sections, never its limit %d: the "
                         "permits serialize their holders", st->name, st->max_holders,
                         st->sections, st->limit);
        } else if (st->hold != CHECKER_HOLD_COUNTED && st->max_holders < 2) {
            checker_note(x, CHECKER_NEVER_FULL,
                         "%s: never two shared holders at once in %zu shared sections: "
                         "shared holds serialize", st->name, st->shared);
        }
    }
}

/* After the heal: how soon each recovery name was granted again. */
static void
checker_recovery(struct checker_ctx *x, const struct checker_sections *all,
                 const struct checker_input *in)
{
    int64_t first, worst = -1;
    size_t i, k;

    if (in->heal_us <= 0) {
        x->res->recovery_us = -1;
        return;
    }
    for (k = 0; k < in->nrecovery; k++) {
        first = -1;
        for (i = 0; i < all->n; i++) {
            if (strcmp(all->v[i].name, in->recovery_names[k]) == 0
                && all->v[i].begin_us >= in->heal_us
                && (first < 0 || all->v[i].begin_us < first)) {
                first = all->v[i].begin_us;
            }
        }
        if (first < 0) {
            checker_note(x, CHECKER_RECOVERY, "%s: never granted after the heal @%.6f",
                         in->recovery_names[k], checker_s(in->heal_us));
            continue;
        }
        if (first - in->heal_us > in->recovery_bound_us) {
            checker_note(x, CHECKER_RECOVERY,
                         "%s: first grant after the heal @%.6f came %.0f ms later (bound %.0f ms)",
                         in->recovery_names[k], checker_s(in->heal_us),
                         (double)(first - in->heal_us) / 1e3,
                         (double)in->recovery_bound_us / 1e3);
        }
        if (first - in->heal_us > worst) {
            worst = first - in->heal_us;
        }
    }
    x->res->recovery_us = worst;
}

/* ---- liveness ---- */

/* A free interval of a name, [from_us, to_us), and the longest wait over it. */
struct checker_free {
    int64_t                    from_us;
    int64_t                    to_us;
    int64_t                    gap_us;      /* longest judged part one wait covers */
    int64_t                    skipped_us;  /* longest part in a fault window */
    const struct checker_wait *by;          /* that wait */
    size_t                     waiters;     /* waits that judged part of it */
};

/* qsort: waits by name, then send. */
static int
checker_cmp_wait(const void *a, const void *b)
{
    const struct checker_wait *x = *(const struct checker_wait *const *)a;
    const struct checker_wait *y = *(const struct checker_wait *const *)b;
    int c = strcmp(x->name, y->name);

    if (c != 0) {
        return c;
    }
    return x->from_us < y->from_us ? -1 : x->from_us > y->from_us;
}

/*
 * The longest part of [a, b) that is judged: before live_until_us and
 * in no fault window; *skipped: the longest part inside a window.
 */
static int64_t
checker_judged_part(const struct checker_input *in, int64_t a, int64_t b, int64_t *skipped)
{
    int64_t end = in->live_until_us > 0 && in->live_until_us < b ? in->live_until_us : b;
    int64_t t = a, next, best = 0;
    size_t k, inside;

    *skipped = 0;
    while (t < end) {
        inside = SIZE_MAX;
        next = end;
        for (k = 0; k < in->nlive_skip; k++) {
            const struct checker_window *wd = &in->live_skip[k];

            if (wd->from_us <= t && t < wd->to_us) {
                inside = k;
            } else if (wd->from_us > t && wd->from_us < next) {
                next = wd->from_us;
            }
        }
        if (inside != SIZE_MAX) {
            next = in->live_skip[inside].to_us < end ? in->live_skip[inside].to_us : end;
            if (next - t > *skipped) {
                *skipped = next - t;
            }
        } else if (next - t > best) {
            best = next - t;
        }
        t = next;
    }
    return best;
}

/*
 * The free intervals of one name from its sections v[0..n) (sorted by
 * begin): a hold keeps the name from its BEGIN to its free_us; the
 * family is free with no hold, a counted name with fewer than its
 * limit.  Returns the intervals (malloc'd, in time order; *count of
 * them), or NULL when memory ran out.
 */
static struct checker_free *
checker_free_intervals(struct checker_section **v, size_t n, size_t *count)
{
    struct checker_event *ev = malloc(2 * n * sizeof(*ev) + 1);
    struct checker_free *fr = malloc((n + 1) * sizeof(*fr));
    size_t i, ne = 0, nf = 0, held = 0;
    size_t busy = v[0]->hold == CHECKER_HOLD_COUNTED && v[0]->limit > 0 ? (size_t)v[0]->limit : 1;
    int64_t from = INT64_MIN;

    if (ev == NULL || fr == NULL) {
        free(ev);
        free(fr);
        return NULL;
    }
    for (i = 0; i < n; i++) {
        if (v[i]->free_us <= v[i]->begin_us) {
            continue;
        }
        ev[ne].t = v[i]->begin_us;
        ev[ne].up = 1;
        ev[ne++].s = v[i];
        if (v[i]->free_us != CHECKER_OPEN_END) {
            ev[ne].t = v[i]->free_us;
            ev[ne].up = 0;
            ev[ne++].s = v[i];
        }
    }
    qsort(ev, ne, sizeof(*ev), checker_cmp_event);
    for (i = 0; i < ne; i++) {
        if (ev[i].up && ++held == busy && ev[i].t > from) {
            memset(&fr[nf], 0, sizeof(fr[nf]));
            fr[nf].from_us = from;
            fr[nf++].to_us = ev[i].t;
        } else if (!ev[i].up && held-- == busy) {
            from = ev[i].t;
        }
    }
    if (held < busy) {
        memset(&fr[nf], 0, sizeof(fr[nf]));
        fr[nf].from_us = from;
        fr[nf++].to_us = INT64_MAX;
    }
    free(ev);
    *count = nf;
    return fr;
}

/*
 * Liveness of one name: its sections v[0..n) (by begin), its waits
 * w[0..nw) (by send).  Each free interval's gap is the longest judged
 * part of it that one wait covers; above the bound, a finding.
 */
static void
checker_live_name(struct checker_ctx *x, const struct checker_input *in,
                  struct checker_section **v, size_t n, const struct checker_wait *const *w,
                  size_t nw)
{
    struct checker_name_stat *st = checker_stat(x->res, v[0]->name);
    struct checker_free *fr, *f;
    size_t nf = 0, i, lo, hi, mid;
    int64_t a, b, part, skipped;
    bool counted = v[0]->hold == CHECKER_HOLD_COUNTED;

    fr = checker_free_intervals(v, n, &nf);
    if (fr == NULL) {
        return;
    }
    if (st != NULL) {
        st->max_gap_us = -1;
    }
    for (i = 0; i < nw; i++) {
        /* The first free interval that ends after the wait began. */
        lo = 0;
        hi = nf;
        while (lo < hi) {
            mid = lo + (hi - lo) / 2;
            if (fr[mid].to_us <= w[i]->from_us) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        for (f = fr + lo; f < fr + nf && f->from_us < w[i]->to_us; f++) {
            a = f->from_us > w[i]->from_us ? f->from_us : w[i]->from_us;
            b = f->to_us < w[i]->to_us ? f->to_us : w[i]->to_us;
            if (b <= a) {
                continue;
            }
            part = checker_judged_part(in, a, b, &skipped);
            f->waiters += part > 0;
            if (part > f->gap_us) {
                f->gap_us = part;
                f->by = w[i];
            }
            if (skipped > f->skipped_us) {
                f->skipped_us = skipped;
            }
        }
    }
    for (f = fr; f < fr + nf; f++) {
        if (f->skipped_us > x->res->max_gap_skipped_us) {
            x->res->max_gap_skipped_us = f->skipped_us;
        }
        if (x->all != NULL && f->skipped_us > in->live_bound_us) {
            fprintf(x->all, "gap (in a fault window, not judged): %s: free from @%.6f: "
                    "%.0f ms while a client waited\n", v[0]->name, checker_s(f->from_us),
                    (double)f->skipped_us / 1e3);
        }
        if (f->by == NULL) {
            continue;
        }
        if (st != NULL && f->gap_us > st->max_gap_us) {
            st->max_gap_us = f->gap_us;
        }
        if (f->gap_us > x->res->max_gap_us) {
            x->res->max_gap_us = f->gap_us;
            x->res->max_gap_at_us = f->from_us > f->by->from_us ? f->from_us : f->by->from_us;
            x->res->max_gap_pid = f->by->pid;
            snprintf(x->res->max_gap_name, sizeof(x->res->max_gap_name), "%s", v[0]->name);
        }
        if (f->gap_us <= in->live_bound_us) {
            if (x->all != NULL && 2 * f->gap_us > in->live_bound_us) {
                /* For people: the gaps close to the bound. */
                fprintf(x->all, "gap (below the bound): %s: free from @%.6f while pid %ld "
                        "(port %d) waited: %.0f ms judged\n", v[0]->name,
                        checker_s(f->from_us), f->by->pid, f->by->port,
                        (double)f->gap_us / 1e3);
            }
            continue;
        }
        if (st != NULL) {
            st->liveness++;
        }
        checker_note(x, CHECKER_LIVENESS, "%s: %s from @%.6f to @%.6f while pid %ld (port %d) "
                     "waited (LOCK sent @%.6f, answered @%.6f; %zu waiters): %.0f ms judged "
                     "(bound %.0f ms)", v[0]->name,
                     counted ? "a permit free" : "free", checker_s(f->from_us),
                     f->to_us == INT64_MAX ? 0.0 : checker_s(f->to_us), f->by->pid,
                     f->by->port, checker_s(f->by->from_us),
                     f->by->to_us == CHECKER_OPEN_END ? 0.0 : checker_s(f->by->to_us),
                     f->waiters, (double)f->gap_us / 1e3, (double)in->live_bound_us / 1e3);
    }
    free(fr);
}

/*
 * The free intervals of the name np (a NUL-terminated copy) from the
 * sections v[0..n) (by name, then begin): the name's own (a name with
 * no section is free throughout).  malloc'd, *count of them; NULL when
 * memory ran out.
 */
static struct checker_free *
checker_free_of(struct checker_section **v, size_t n, const char *np, size_t *count)
{
    struct checker_free *fr;
    size_t i, j;

    for (i = 0; i < n && strcmp(v[i]->name, np) != 0; i++) {
        continue;
    }
    for (j = i; j < n && strcmp(v[j]->name, np) == 0; j++) {
        continue;
    }
    if (j > i) {
        return checker_free_intervals(v + i, j - i, count);
    }
    fr = calloc(1, sizeof(*fr));
    if (fr != NULL) {
        fr->from_us = INT64_MIN;
        fr->to_us = INT64_MAX;
        *count = 1;
    }
    return fr;
}

/*
 * The times when every name of the set (names: "P,Q,...") is free at
 * once: the intersection of each name's free intervals.  malloc'd, in
 * time order, *count of them; NULL when memory ran out.
 */
static struct checker_free *
checker_set_free(struct checker_section **v, size_t n, const char *names, size_t *count)
{
    char copy[CHECKER_NAME_MAX + 1], *np, *ns = NULL;
    struct checker_free *acc = NULL, *one, *both;
    size_t na = 0, no = 0, nb, a, b;

    snprintf(copy, sizeof(copy), "%s", names);
    for (np = strtok_r(copy, ",", &ns); np != NULL; np = strtok_r(NULL, ",", &ns)) {
        one = checker_free_of(v, n, np, &no);
        if (one == NULL) {
            free(acc);
            return NULL;
        }
        if (acc == NULL) {
            acc = one;
            na = no;
            continue;
        }
        both = malloc((na + no + 1) * sizeof(*both));
        if (both == NULL) {
            free(acc);
            free(one);
            return NULL;
        }
        for (a = 0, b = 0, nb = 0; a < na && b < no;) {
            int64_t from = acc[a].from_us > one[b].from_us ? acc[a].from_us : one[b].from_us;
            int64_t to = acc[a].to_us < one[b].to_us ? acc[a].to_us : one[b].to_us;

            if (from < to) {
                memset(&both[nb], 0, sizeof(both[nb]));
                both[nb].from_us = from;
                both[nb++].to_us = to;
            }
            if (acc[a].to_us < one[b].to_us) {
                a++;
            } else {
                b++;
            }
        }
        free(acc);
        free(one);
        acc = both;
        na = nb;
    }
    *count = na;
    return acc;
}

/*
 * The waits of sets (name=P,Q,...), w[0..nw) by name then send: while
 * one waits, the longest judged time every name of its set is free at
 * once (above the bound: liveness), and how long it waits, judged
 * (above set_wait_bound_us: starvation).
 */
static void
checker_set_liveness(struct checker_ctx *x, const struct checker_input *in,
                     struct checker_section **v, size_t n, const struct checker_wait *const *w,
                     size_t nw)
{
    struct checker_free *fr = NULL, *f, *at;
    size_t i, nf = 0, lo, hi, mid;
    int64_t a, b, part, skipped, gap, waited;
    const char *group = NULL;

    for (i = 0; i < nw; i++) {
        if (strchr(w[i]->name, ',') == NULL) {
            continue;
        }
        x->res->set_waits++;
        if (group == NULL || strcmp(group, w[i]->name) != 0) {
            free(fr);
            group = w[i]->name;
            fr = checker_set_free(v, n, group, &nf);
            if (fr == NULL) {
                return;
            }
        }
        waited = checker_judged_part(in, w[i]->from_us, w[i]->to_us, &skipped);
        if (waited > x->res->max_set_wait_us) {
            x->res->max_set_wait_us = waited;
            x->res->max_set_wait_pid = w[i]->pid;
            snprintf(x->res->max_set_wait_name, sizeof(x->res->max_set_wait_name), "%s",
                     w[i]->name);
        }
        if (in->set_wait_bound_us > 0 && waited > in->set_wait_bound_us) {
            checker_note(x, CHECKER_STARVATION, "set %s: pid %ld (port %d) waited from @%.6f "
                         "to @%.6f (%s): %.0f ms judged (bound %.0f ms)", w[i]->name,
                         w[i]->pid, w[i]->port, checker_s(w[i]->from_us),
                         w[i]->to_us == CHECKER_OPEN_END ? 0.0 : checker_s(w[i]->to_us),
                         w[i]->to_us == CHECKER_OPEN_END ? "never answered" : "answered",
                         (double)waited / 1e3, (double)in->set_wait_bound_us / 1e3);
        }
        lo = 0;
        hi = nf;
        while (lo < hi) {
            mid = lo + (hi - lo) / 2;
            if (fr[mid].to_us <= w[i]->from_us) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        gap = 0;
        at = NULL;
        for (f = fr + lo; f < fr + nf && f->from_us < w[i]->to_us; f++) {
            a = f->from_us > w[i]->from_us ? f->from_us : w[i]->from_us;
            b = f->to_us < w[i]->to_us ? f->to_us : w[i]->to_us;
            part = b > a ? checker_judged_part(in, a, b, &skipped) : 0;
            if (b > a && skipped > x->res->max_gap_skipped_us) {
                x->res->max_gap_skipped_us = skipped;
            }
            if (part > gap) {
                gap = part;
                at = f;
            }
        }
        if (at == NULL) {
            continue;
        }
        if (gap > x->res->max_set_gap_us) {
            x->res->max_set_gap_us = gap;
            x->res->max_set_gap_pid = w[i]->pid;
            snprintf(x->res->max_set_gap_name, sizeof(x->res->max_set_gap_name), "%s",
                     w[i]->name);
        }
        if (gap > x->res->max_gap_us) {
            x->res->max_gap_us = gap;
            x->res->max_gap_at_us = at->from_us > w[i]->from_us ? at->from_us : w[i]->from_us;
            x->res->max_gap_pid = w[i]->pid;
            snprintf(x->res->max_gap_name, sizeof(x->res->max_gap_name), "%s", w[i]->name);
        }
        if (in->live_bound_us > 0 && gap > in->live_bound_us) {
            x->res->set_liveness++;
            checker_note(x, CHECKER_LIVENESS, "set %s: every name free from @%.6f to @%.6f "
                         "while pid %ld (port %d) waited (LOCK sent @%.6f, answered @%.6f): "
                         "%.0f ms judged (bound %.0f ms)", w[i]->name,
                         checker_s(at->from_us > w[i]->from_us ? at->from_us : w[i]->from_us),
                         at->to_us == INT64_MAX ? 0.0 : checker_s(at->to_us), w[i]->pid,
                         w[i]->port, checker_s(w[i]->from_us),
                         w[i]->to_us == CHECKER_OPEN_END ? 0.0 : checker_s(w[i]->to_us),
                         (double)gap / 1e3, (double)in->live_bound_us / 1e3);
        }
    }
    free(fr);
}

/* Liveness of every name with sections: v[0..n) by name and begin. */
static void
checker_liveness(struct checker_ctx *x, const struct checker_input *in,
                 const struct checker_sections *all, struct checker_section **v, size_t n)
{
    const struct checker_wait **w;
    size_t i, j, k = 0, m;
    int c;

    x->res->waits = all->nw;
    if ((in->live_bound_us <= 0 && in->set_wait_bound_us <= 0) || n == 0) {
        return;
    }
    w = malloc(all->nw * sizeof(*w) + 1);
    if (w == NULL) {
        return;
    }
    for (i = 0; i < all->nw; i++) {
        w[i] = &all->w[i];
    }
    qsort(w, all->nw, sizeof(*w), checker_cmp_wait);
    for (i = 0; in->live_bound_us > 0 && i < n; i = j) {
        for (j = i + 1; j < n && strcmp(v[j]->name, v[i]->name) == 0; j++) {
            continue;
        }
        /* Waits of names before this one had no section: nothing to judge there. */
        while (k < all->nw && (c = strcmp(w[k]->name, v[i]->name)) < 0) {
            k++;
        }
        for (m = k; m < all->nw && strcmp(w[m]->name, v[i]->name) == 0; m++) {
            continue;
        }
        checker_live_name(x, in, v + i, j - i, w + k, m - k);
        k = m;
    }
    checker_set_liveness(x, in, v, n, w, all->nw);
    free(w);
}

int
checker_run(const struct checker_input *in, FILE *report, struct checker_result *out)
{
    struct checker_sections all = { NULL, 0, 0, NULL, 0, 0 };
    struct checker_breaks breaks = { NULL, 0, 0 };
    struct checker_section **order = NULL;
    struct checker_ctx x = { report, out, &breaks, in->strict, in->all_findings };
    size_t i, k, log_errors = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    out->max_acquire_us = -1;
    out->recovery_us = -1;
    out->max_gap_us = -1;
    out->max_gap_skipped_us = -1;
    out->max_set_gap_us = -1;
    out->max_set_wait_us = -1;
    rc = checker_load(in->logs, in->nlogs, &all, report, &log_errors);
    if (checker_load_breaks(in->break_logs, in->nbreak_logs, &breaks, report,
                            &log_errors) != 0) {
        rc = -1;
    }
    out->counts[CHECKER_LOG] = log_errors;
    out->violations = log_errors;
    if (all.n > 0) {
        order = malloc(all.n * sizeof(*order));
        if (order == NULL) {
            checker_free(&all);
            checker_free_breaks(&breaks);
            return -1;
        }
        for (i = 0; i < all.n; i++) {
            order[i] = &all.v[i];
        }
        qsort(order, all.n, sizeof(*order), checker_cmp);
        checker_order(&x, order, all.n);
        checker_liveness(&x, in, &all, order, all.n);
    }
    checker_each(&x, &all, in);
    checker_counters(&x, &all, in);
    checker_full(&x, in);
    checker_recovery(&x, &all, in);
    if (report != NULL) {
        for (k = 0; k < CHECKER_KINDS; k++) {
            if (k != CHECKER_LOG && out->counts[k] > CHECKER_REPORT_MAX) {
                fprintf(report, "    ... and %zu more %s violations\n",
                        out->counts[k] - CHECKER_REPORT_MAX, checker_kind_name(k));
            }
        }
        if (out->fenced > CHECKER_REPORT_MAX) {
            fprintf(report, "    ... and %zu more fenced overlaps\n",
                    out->fenced - CHECKER_REPORT_MAX);
        }
        if (out->broken > CHECKER_REPORT_MAX) {
            fprintf(report, "    ... and %zu more broken overlaps\n",
                    out->broken - CHECKER_REPORT_MAX);
        }
    }
    free(order);
    checker_free(&all);
    checker_free_breaks(&breaks);
    return rc;
}
