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
    FILE                  *report;      /* where findings go, or NULL */
    struct checker_result *res;         /* counts */
};

static const char *const checker_kind_names[CHECKER_KINDS] = {
    [CHECKER_OVERLAP] = "overlap",
    [CHECKER_FENCE] = "fence",
    [CHECKER_STALE_WRITE] = "stale-write",
    [CHECKER_LOST_UPDATE] = "lost-update",
    [CHECKER_RECOVERY] = "recovery",
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

/* Read one log; its sections are appended to out. */
static int
checker_load_one(const struct checker_log *lg, size_t idx, struct checker_sections *out,
                 FILE *report, size_t *errors)
{
    struct checker_section *sec;
    char *line = NULL, word[16];
    size_t cap = 0, lineno = 0, cur = SIZE_MAX;
    long long ts, v, pid = -1;
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
        if (strcmp(word, "START") == 0) {
            checker_field_ll(line, "pid", &pid);
        } else if (strcmp(word, "BEGIN") == 0) {
            if (cur != SIZE_MAX) {
                checker_log_error(report, errors, lg->path,
                                  "line %zu: BEGIN inside a section", lineno);
                out->v[cur].how = CHECKER_END_NONE;
                out->v[cur].end_us = CHECKER_OPEN_END;
            }
            sec = checker_push(out);
            if (sec == NULL) {
                free(line);
                fclose(f);
                return -1;
            }
            cur = out->n - 1;
            sec->log = idx;
            sec->pid = (long)pid;
            sec->begin_us = ts;
            sec->end_us = CHECKER_OPEN_END;
            sec->how = CHECKER_END_NONE;
            sec->wrote = -1;
            sec->prev_fence = -1;
            if (!checker_field_word(line, "name", sec->name, sizeof(sec->name))) {
                checker_log_error(report, errors, lg->path, "line %zu: BEGIN without name",
                                  lineno);
            }
            if (!checker_field_ll(line, "fence", &sec->fence)) {
                sec->fence = -1;
            }
            sec->acquire_us = checker_field_ll(line, "acquire_us", &v) ? v : 0;
            sec->port = checker_field_ll(line, "port", &v) ? (int)v : 0;
            if (checker_field_ll(line, "pid", &v)) {
                sec->pid = (long)v;
            }
        } else if (strcmp(word, "WRITE") == 0 || strcmp(word, "END") == 0
                   || strcmp(word, "ABORT") == 0) {
            if (cur == SIZE_MAX) {
                checker_log_error(report, errors, lg->path, "line %zu: %s outside a section",
                                  lineno, word);
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
            sec->end_us = ts;
            if (strcmp(word, "END") == 0) {
                sec->how = CHECKER_END_WROTE;
                if (!checker_field_ll(line, "wrote", &sec->wrote)
                    || !checker_field_ll(line, "prev_fence", &sec->prev_fence)) {
                    checker_log_error(report, errors, lg->path,
                                      "line %zu: END without wrote= or prev_fence=", lineno);
                }
            } else {
                sec->how = CHECKER_END_ABORT;
            }
            cur = SIZE_MAX;
        }
    }
    if (cur != SIZE_MAX) {
        checker_close_at_eof(out, cur, lg);
    }
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

static const char *
checker_how(const struct checker_section *s)
{
    switch (s->how) {
    case CHECKER_END_WROTE:
        return "wrote";
    case CHECKER_END_ABORT:
        return "aborted";
    case CHECKER_END_KILLED:
        return "killed";
    case CHECKER_END_NONE:
        break;
    }
    return "never ended";
}

/*
 * Overlaps and fence order: walk each name's sections in the order they
 * began, keeping the one that ends last so far and the largest fence.
 */
static void
checker_order(struct checker_ctx *x, struct checker_section **v, size_t n)
{
    const struct checker_section *last = NULL, *top = NULL;
    size_t i;

    for (i = 0; i < n; i++) {
        const struct checker_section *s = v[i];

        if (i > 0 && strcmp(s->name, v[i - 1]->name) != 0) {
            last = NULL;
            top = NULL;
        }
        if (last != NULL && s->begin_us < last->end_us) {
            checker_note(x, CHECKER_OVERLAP,
                         "%s: pid %ld (fence %lld, port %d) held it from @%.6f to @%.6f (%s); "
                         "pid %ld (fence %lld, port %d) began @%.6f, %.1f ms before that end",
                         s->name, last->pid, last->fence, last->port, checker_s(last->begin_us),
                         last->end_us == CHECKER_OPEN_END ? 0.0 : checker_s(last->end_us),
                         checker_how(last), s->pid, s->fence, s->port, checker_s(s->begin_us),
                         last->end_us == CHECKER_OPEN_END
                             ? 0.0 : (double)(last->end_us - s->begin_us) / 1e3);
        }
        if (s->fence < 0) {
            checker_note(x, CHECKER_FENCE, "%s: pid %ld's grant @%.6f has no fence", s->name,
                         s->pid, checker_s(s->begin_us));
        } else if (top != NULL && s->fence <= top->fence) {
            checker_note(x, CHECKER_FENCE,
                         "%s: pid %ld's grant @%.6f has fence %lld, not above fence %lld of "
                         "pid %ld's grant @%.6f", s->name, s->pid, checker_s(s->begin_us),
                         s->fence, top->fence, top->pid, checker_s(top->begin_us));
        }
        if (last == NULL || s->end_us > last->end_us) {
            last = s;
        }
        if (s->fence >= 0 && (top == NULL || s->fence > top->fence)) {
            top = s;
        }
    }
}

/* Per-section checks: writes with stale fences, sections never ended. */
static void
checker_each(struct checker_ctx *x, const struct checker_sections *all,
             const struct checker_input *in)
{
    size_t i;

    for (i = 0; i < all->n; i++) {
        const struct checker_section *s = &all->v[i];

        x->res->sections++;
        if (s->acquire_us > x->res->max_acquire_us) {
            x->res->max_acquire_us = s->acquire_us;
            x->res->max_acquire_at_us = s->begin_us;
            x->res->max_acquire_pid = s->pid;
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
        case CHECKER_END_ABORT:
            x->res->aborted++;
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

/* The counter of each name against the sections that wrote. */
static void
checker_counters(struct checker_ctx *x, const struct checker_sections *all,
                 const struct checker_input *in)
{
    size_t i, k, wrote, maybe;

    for (k = 0; k < in->ncounters; k++) {
        const struct checker_counter *c = &in->counters[k];

        wrote = 0;
        maybe = 0;
        for (i = 0; i < all->n; i++) {
            if (strcmp(all->v[i].name, c->name) != 0) {
                continue;
            }
            if (all->v[i].how == CHECKER_END_WROTE) {
                wrote++;
            } else if (all->v[i].write_started) {
                maybe++;
            }
        }
        if (c->value < (long long)wrote || c->value > (long long)(wrote + maybe)) {
            checker_note(x, CHECKER_LOST_UPDATE,
                         "%s: the counter is %lld, but %zu sections wrote%s", c->name, c->value,
                         wrote, maybe > 0 ? " (plus some that may have)" : "");
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

int
checker_run(const struct checker_input *in, FILE *report, struct checker_result *out)
{
    struct checker_sections all = { NULL, 0, 0 };
    struct checker_section **order = NULL;
    struct checker_ctx x = { report, out };
    size_t i, k, log_errors = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    out->max_acquire_us = -1;
    out->recovery_us = -1;
    rc = checker_load(in->logs, in->nlogs, &all, report, &log_errors);
    out->counts[CHECKER_LOG] = log_errors;
    out->violations = log_errors;
    if (all.n > 0) {
        order = malloc(all.n * sizeof(*order));
        if (order == NULL) {
            checker_free(&all);
            return -1;
        }
        for (i = 0; i < all.n; i++) {
            order[i] = &all.v[i];
        }
        qsort(order, all.n, sizeof(*order), checker_cmp);
        checker_order(&x, order, all.n);
    }
    checker_each(&x, &all, in);
    checker_counters(&x, &all, in);
    checker_recovery(&x, &all, in);
    if (report != NULL) {
        for (k = 0; k < CHECKER_KINDS; k++) {
            if (k != CHECKER_LOG && out->counts[k] > CHECKER_REPORT_MAX) {
                fprintf(report, "    ... and %zu more %s violations\n",
                        out->counts[k] - CHECKER_REPORT_MAX, checker_kind_name(k));
            }
        }
    }
    free(order);
    checker_free(&all);
    return rc;
}
