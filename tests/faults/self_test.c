/*
 * self_test.c: the checker's self-test (tests/faults/faults.h): synthetic
 * client logs with known violations, each of which the checker must
 * report, and clean ones it must pass, run before any scenario: a
 * checker that cannot fail would make every scenario pass.
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

/* ---- the checker's self-test ---- */

/* A synthetic case: two client logs and what the checker must find. */
struct ft_case {
    const char       *what;         /* for the failure message */
    const char       *log_a;        /* client A's log */
    const char       *log_b;        /* client B's log */
    int64_t           kill_a;       /* A's kill time, 0: not killed */
    long long         counter;      /* final counter of "x" */
    int64_t           heal_us;      /* 0: no recovery check */
    int64_t           bound_us;     /* recovery bound */
    enum checker_kind kind;         /* the only kind expected; CHECKER_KINDS: none */
};

#define FT_A_CLEAN  "START 1 pid=1 name=x\n" \
                    "BEGIN 1000 name=x fence=1 acquire_us=5 port=1\n" \
                    "WRITE 1400 fence=1 value=1\n" \
                    "END 1500 fence=1 read=0 wrote=1 prev_fence=0\n" \
                    "BEGIN 5000 name=x fence=3 acquire_us=7 port=1\n" \
                    "ABORT 5500 fence=3 why=lost\n"
#define FT_B_CLEAN  "START 1 pid=2 name=x\n" \
                    "BEGIN 3000 name=x fence=2 acquire_us=9 port=2\n" \
                    "WRITE 3400 fence=2 value=2\n" \
                    "END 3500 fence=2 read=1 wrote=2 prev_fence=1\n" \
                    "BEGIN 6000 name=x fence=4 acquire_us=9 port=2\n" \
                    "END 6500 fence=4 read=2 wrote=3 prev_fence=2\n"

static const struct ft_case ft_cases[] = {
    { "a clean history", FT_A_CLEAN, FT_B_CLEAN, 0, 3, 2500, 1000, CHECKER_KINDS },
    { "B begins inside A's section",
      "BEGIN 1000 name=x fence=1\nEND 2000 fence=1 read=0 wrote=1 prev_fence=0\n",
      "BEGIN 1999 name=x fence=2\nEND 3000 fence=2 read=1 wrote=2 prev_fence=1\n",
      0, 2, 0, 0, CHECKER_OVERLAP },
    { "fences that go down",
      "BEGIN 1000 name=x fence=5\nEND 2000 fence=5 read=0 wrote=1 prev_fence=0\n",
      "BEGIN 3000 name=x fence=5\nEND 4000 fence=5 read=1 wrote=2 prev_fence=4\n",
      0, 2, 0, 0, CHECKER_FENCE },
    { "a lost update", FT_A_CLEAN, FT_B_CLEAN, 0, 2, 0, 0, CHECKER_LOST_UPDATE },
    { "a write with a stale fence",
      "BEGIN 1000 name=x fence=3\nEND 2000 fence=3 read=0 wrote=1 prev_fence=0\n",
      "BEGIN 3000 name=x fence=4\nEND 4000 fence=4 read=1 wrote=2 prev_fence=9\n",
      0, 2, 0, 0, CHECKER_STALE_WRITE },
    { "a killed client's section, then a grant after the kill",
      "BEGIN 1000 name=x fence=1\nWRITE 1500 fence=1 value=1\nEND 16",
      "BEGIN 2000 name=x fence=2\nEND 3000 fence=2 read=1 wrote=2 prev_fence=1\n",
      1800, 2, 0, 0, CHECKER_KINDS },
    { "a grant before the killed client's kill",
      "BEGIN 1000 name=x fence=1\n",
      "BEGIN 1700 name=x fence=2\nEND 3000 fence=2 read=0 wrote=1 prev_fence=0\n",
      1800, 1, 0, 0, CHECKER_OVERLAP },
    { "no grant within the recovery bound", FT_A_CLEAN, FT_B_CLEAN, 0, 3, 2500, 400,
      CHECKER_RECOVERY },
    { "a section that never ended",
      "BEGIN 1000 name=x fence=1\n",
      "", 0, 0, 0, 0, CHECKER_OPEN },
};

/*
 * Synthetic cases for the counted and shared kinds: up to four client
 * logs, per-permit counters, and the set of kinds the checker must find
 * (a bit per enum checker_kind; 0: none).  Name "s" is counted with
 * limit=3, name "w" is of the shared/exclusive family.
 */
struct ft_kind_case {
    const char *what;               /* for the failure message */
    const char *logs[4];            /* client logs (NULL: empty) */
    int64_t     kill_a;             /* the first client's kill time, 0: not killed */
    long long   counters[FT_LIMIT]; /* final counters of "s" permits 0..2 */
    long long   counter_w;          /* final counter of "w" */
    bool        full;               /* "s" and "w" must have their full holders at once */
    unsigned    expect;             /* kinds that must be found */
};

#define FT_BIT(k)   (1u << (k))
#define FT_S(t, p, f)   "BEGIN " #t " name=s fence=" #f " validity=2900 kind=counted limit=3 " \
                        "permit=" #p "\n"
#define FT_W_X(t, f)    "BEGIN " #t " name=w fence=" #f " validity=2900 kind=exclusive\n"
#define FT_W_S(t, f)    "BEGIN " #t " name=w fence=" #f " validity=2900 kind=shared\n"
#define FT_START        "START 1 pid=1 name=x ttl=3000\n"

static const struct ft_kind_case ft_kind_cases[] = {
    { "three permits at once, a fourth holder on a freed permit (ends and begins at one "
      "instant do not overlap)",
      { FT_START FT_S(1000, 0, 1) "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n"
                 FT_S(3000, 0, 2) "END 3500 fence=2 read=1 wrote=2 prev_fence=1\n",
        FT_START FT_S(1100, 1, 1) "END 2100 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_S(1200, 2, 1) "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_S(2000, 2, 2) "END 2500 fence=2 read=1 wrote=2 prev_fence=1\n" },
      0, { 2, 1, 2 }, 0, true, 0 },
    { "four holders of limit=3 at once",
      { FT_START FT_S(1000, 0, 1) "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_S(1100, 1, 1) "END 2100 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_S(1200, 2, 1) "END 2200 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_S(1500, 0, 2) "END 2500 fence=2 read=1 wrote=2 prev_fence=1\n" },
      0, { 2, 1, 1 }, 0, false, FT_BIT(CHECKER_OVER_LIMIT) | FT_BIT(CHECKER_OVERLAP) },
    { "a counted name whose holders never reach the limit together",
      { FT_START FT_S(1000, 0, 1) "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n"
                 FT_S(4000, 0, 2) "END 5000 fence=2 read=1 wrote=2 prev_fence=1\n",
        FT_START FT_S(2000, 1, 1) "END 3000 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_S(3000, 2, 1) "END 3900 fence=1 read=0 wrote=1 prev_fence=0\n", NULL },
      0, { 2, 1, 1 }, 0, true, FT_BIT(CHECKER_NEVER_FULL) },
    { "a permit's fence that goes down (another permit's smaller fence is fine)",
      { FT_START FT_S(1000, 0, 5) "END 2000 fence=5 read=0 wrote=1 prev_fence=0\n"
                 FT_S(3000, 0, 4) "END 4000 fence=4 read=1 wrote=2 prev_fence=3\n",
        FT_START FT_S(1500, 1, 1) "END 2500 fence=1 read=0 wrote=1 prev_fence=0\n", NULL, NULL },
      0, { 2, 1, 0 }, 0, false, FT_BIT(CHECKER_FENCE) },
    { "readers together (granted in any fence order), then a writer, then a reader",
      { FT_START FT_W_S(1000, 2) "END 2000 fence=2 read=0 reread=0\n",
        FT_START FT_W_S(1500, 1) "END 2500 fence=1 read=0 reread=0\n",
        FT_START FT_W_X(2500, 3) "WRITE 2800 fence=3 value=1\n"
                 "END 3000 fence=3 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_W_S(3000, 4) "END 3500 fence=4 read=1 reread=1\n" },
      0, { 0, 0, 0 }, 1, true, 0 },
    { "a writer begins while a reader holds",
      { FT_START FT_W_S(1000, 1) "END 2000 fence=1 read=0 reread=0\n",
        FT_START FT_W_X(1800, 2) "END 3000 fence=2 read=0 wrote=1 prev_fence=0\n", NULL, NULL },
      0, { 0, 0, 0 }, 1, false, FT_BIT(CHECKER_OVERLAP) },
    { "a reader begins while a writer holds",
      { FT_START FT_W_X(1000, 1) "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_W_S(1500, 2) "END 2500 fence=2 read=1 reread=1\n", NULL, NULL },
      0, { 0, 0, 0 }, 1, false, FT_BIT(CHECKER_OVERLAP) },
    { "a reader after a writer with a smaller fence",
      { FT_START FT_W_X(1000, 5) "END 2000 fence=5 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_W_S(2500, 3) "END 3000 fence=3 read=1 reread=1\n", NULL, NULL },
      0, { 0, 0, 0 }, 1, false, FT_BIT(CHECKER_FENCE) },
    { "a writer after a reader with a smaller fence",
      { FT_START FT_W_S(1000, 7) "END 2000 fence=7 read=0 reread=0\n",
        FT_START FT_W_X(2500, 6) "END 3000 fence=6 read=0 wrote=1 prev_fence=0\n", NULL, NULL },
      0, { 0, 0, 0 }, 1, false, FT_BIT(CHECKER_FENCE) },
    { "a reader that saw the counter change inside its section",
      { FT_START FT_W_S(1000, 1) "END 2000 fence=1 read=0 reread=1\n",
        FT_START FT_W_X(2500, 2) "END 3000 fence=2 read=1 wrote=2 prev_fence=0\n", NULL, NULL },
      0, { 0, 0, 0 }, 1, false, FT_BIT(CHECKER_DIRTY_READ) },
    { "shared holders that never hold together",
      { FT_START FT_W_S(1000, 1) "END 2000 fence=1 read=0 reread=0\n",
        FT_START FT_W_S(2000, 2) "END 3000 fence=2 read=0 reread=0\n", NULL, NULL },
      0, { 0, 0, 0 }, 0, true, FT_BIT(CHECKER_NEVER_FULL) },
    { "a killed reader's section ends at the kill; a writer after it",
      { FT_START FT_W_S(1000, 1), FT_START FT_W_S(1200, 2) "END 1500 fence=2 read=0 reread=0\n",
        FT_START FT_W_X(2000, 3) "END 3000 fence=3 read=0 wrote=1 prev_fence=0\n", NULL },
      1800, { 0, 0, 0 }, 1, true, 0 },
    { "a grant whose validity exceeds its ttl",
      { FT_START "BEGIN 1000 name=w fence=1 validity=4000 kind=exclusive\n"
                 "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n", NULL, NULL, NULL },
      0, { 0, 0, 0 }, 1, false, FT_BIT(CHECKER_VALIDITY) },
    { "one name held as two kinds",
      { FT_START FT_S(1000, 0, 1) "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START "BEGIN 3000 name=s fence=2 kind=shared\nEND 3500 fence=2 read=0 reread=0\n",
        NULL, NULL },
      0, { 1, 0, 0 }, 0, false, FT_BIT(CHECKER_LOG) },
};

/* Write text to path.  0 or -1. */
static int
ft_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    int rc;

    if (f == NULL) {
        return -1;
    }
    rc = fputs(text, f) < 0 ? -1 : 0;
    return fclose(f) == 0 ? rc : -1;
}

/* The kinds' cases (ft_kind_cases): how many were misjudged; *n: how many ran. */
static size_t
ft_self_test_kinds(size_t *n)
{
    static const char *const full[] = { "s", "w" };
    char paths[4][PATH_MAX + 16];
    struct checker_log logs[4];
    struct checker_counter counters[FT_LIMIT + 1];
    struct checker_input in;
    struct checker_result res;
    size_t i, j, k, bad = 0;
    bool ok;

    *n = sizeof(ft_kind_cases) / sizeof(ft_kind_cases[0]);
    for (i = 0; i < *n; i++) {
        const struct ft_kind_case *c = &ft_kind_cases[i];

        for (j = 0; j < 4; j++) {
            snprintf(paths[j], sizeof(paths[j]), "%s/selftest-%zu.log", ft_dir, j);
            if (ft_write_file(paths[j], c->logs[j] != NULL ? c->logs[j] : "") != 0) {
                fprintf(stderr, "faults: self-test: cannot write %s\n", paths[j]);
                return *n;
            }
            logs[j].path = paths[j];
            logs[j].killed_us = j == 0 ? c->kill_a : 0;
        }
        memset(counters, 0, sizeof(counters));
        for (j = 0; j < FT_LIMIT; j++) {
            counters[j].name = "s";
            counters[j].per_permit = true;
            counters[j].permit = (int)j;
            counters[j].value = c->counters[j];
        }
        counters[FT_LIMIT].name = "w";
        counters[FT_LIMIT].value = c->counter_w;
        memset(&in, 0, sizeof(in));
        in.logs = logs;
        in.nlogs = 4;
        in.counters = counters;
        in.ncounters = FT_LIMIT + 1;
        /* Only the names the case uses must be full. */
        in.full_names = full;
        in.nfull = 0;
        ok = checker_run(&in, NULL, &res) == 0;
        if (c->full) {
            in.full_names = checker_name(&res, "s") != NULL ? full : full + 1;
            in.nfull = (checker_name(&res, "s") != NULL) + (checker_name(&res, "w") != NULL);
            ok = checker_run(&in, NULL, &res) == 0;
        }
        for (k = 0; k < CHECKER_KINDS; k++) {
            ok = ok && ((c->expect & FT_BIT(k)) ? res.counts[k] > 0 : res.counts[k] == 0);
        }
        if (!ok) {
            fprintf(stderr, "faults: self-test: the checker misjudged %s; it found:\n",
                    c->what);
            checker_run(&in, stderr, &res);
            bad++;
        }
    }
    return bad;
}

/*
 * Synthetic cases for fenced writes (REJECT): up to three client logs on
 * the exclusive name "w", its final counter, the kinds the checker must
 * find (bits, as above) and the number of fenced overlaps it must count.
 */
struct ft_fence_case {
    const char *what;               /* for the failure message */
    const char *logs[3];            /* client logs (NULL: empty) */
    long long   counter_w;          /* final counter of "w" */
    unsigned    expect;             /* kinds that must be found */
    size_t      fenced;             /* fenced overlaps that must be counted */
};

#define FT_LATE     FT_START FT_W_X(1000, 1) "WRITE 4400 fence=1 value=1\n"
#define FT_LATER    FT_START FT_W_X(4000, 2) "WRITE 4100 fence=2 value=1\n" \
                    "END 4200 fence=2 read=0 wrote=1 prev_fence=0\n"

static const struct ft_fence_case ft_fence_cases[] = {
    { "a late write refused by its fence, after later holders wrote (one of them holds "
      "across the refusal)",
      { FT_LATE "REJECT 4500 fence=1 prev_fence=2\n",
        FT_LATER FT_W_X(4300, 3) "WRITE 4600 fence=3 value=2\n"
                 "END 4700 fence=3 read=1 wrote=2 prev_fence=2\n", NULL },
      2, 0, 2 },
    { "the same late write landing",
      { FT_LATE "END 4500 fence=1 read=0 wrote=1 prev_fence=2\n",
        FT_LATER FT_W_X(4300, 3) "WRITE 4600 fence=3 value=2\n"
                 "END 4700 fence=3 read=1 wrote=2 prev_fence=1\n", NULL },
      2, FT_BIT(CHECKER_OVERLAP) | FT_BIT(CHECKER_STALE_WRITE) | FT_BIT(CHECKER_LOST_UPDATE),
      0 },
    { "a holder granted while another holds, whose write is then refused",
      { FT_START FT_W_X(1000, 1) "END 2000 fence=1 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_W_X(1500, 2) "WRITE 1700 fence=2 value=1\n"
                 "REJECT 1800 fence=2 prev_fence=5\n", NULL },
      1, FT_BIT(CHECKER_OVERLAP), 0 },
    { "a refused late writer does not hide an overlap of two later holders",
      { FT_START FT_W_X(1000, 1) "WRITE 4900 fence=1 value=1\n"
                 "REJECT 5000 fence=1 prev_fence=3\n",
        FT_START FT_W_X(3000, 2) "END 3500 fence=2 read=0 wrote=1 prev_fence=0\n",
        FT_START FT_W_X(3400, 3) "END 3600 fence=3 read=1 wrote=2 prev_fence=2\n" },
      2, FT_BIT(CHECKER_OVERLAP), 1 },
    { "a refusal by a stored fence below the writer's",
      { FT_START FT_W_X(1000, 4) "WRITE 1400 fence=4 value=1\n"
                 "REJECT 1500 fence=4 prev_fence=3\n", NULL, NULL },
      0, FT_BIT(CHECKER_LOG), 0 },
};

/* The fenced-write cases (ft_fence_cases): how many were misjudged; *n: how many ran. */
static size_t
ft_self_test_fences(size_t *n)
{
    char paths[3][PATH_MAX + 16];
    struct checker_log logs[3];
    struct checker_counter counter = { "w", 0, false, 0 };
    struct checker_input in;
    struct checker_result res;
    size_t i, j, k, bad = 0;
    bool ok;

    *n = sizeof(ft_fence_cases) / sizeof(ft_fence_cases[0]);
    for (i = 0; i < *n; i++) {
        const struct ft_fence_case *c = &ft_fence_cases[i];

        for (j = 0; j < 3; j++) {
            snprintf(paths[j], sizeof(paths[j]), "%s/selftest-f%zu.log", ft_dir, j);
            if (ft_write_file(paths[j], c->logs[j] != NULL ? c->logs[j] : "") != 0) {
                fprintf(stderr, "faults: self-test: cannot write %s\n", paths[j]);
                return *n;
            }
            logs[j].path = paths[j];
            logs[j].killed_us = 0;
        }
        counter.value = c->counter_w;
        memset(&in, 0, sizeof(in));
        in.logs = logs;
        in.nlogs = 3;
        in.counters = &counter;
        in.ncounters = 1;
        ok = checker_run(&in, NULL, &res) == 0 && res.fenced == c->fenced;
        for (k = 0; k < CHECKER_KINDS; k++) {
            ok = ok && ((c->expect & FT_BIT(k)) ? res.counts[k] > 0 : res.counts[k] == 0);
        }
        if (!ok) {
            fprintf(stderr, "faults: self-test: the checker misjudged %s (expected %zu fenced "
                    "overlaps); it found %zu and:\n", c->what, c->fenced, res.fenced);
            checker_run(&in, stderr, &res);
            bad++;
        }
    }
    return bad;
}

/*
 * Synthetic cases for leases and BREAKs: up to three client logs on the
 * exclusive name "w" (or the counted "s"), an operator's log, the final
 * counter of "w", whether the run is strict, the kinds the checker must
 * find (bits) and the number of broken overlaps it must count.
 */
struct ft_break_case {
    const char *what;               /* for the failure message */
    const char *logs[3];            /* client logs (NULL: empty) */
    const char *oplog;              /* the operator's log (NULL: empty) */
    long long   counter_w;          /* final counter of "w" */
    bool        strict;             /* checker_input.strict */
    unsigned    expect;             /* kinds that must be found */
    size_t      broken;             /* broken overlaps that must be counted */
};

#define FT_W_L(t, f, d) "BEGIN " #t " name=w fence=" #f " validity=2900 kind=exclusive " \
                        "mode=lease token=00 deadline_us=" #d "\n"
#define FT_W_A(t, f, a) "BEGIN " #t " name=w fence=" #f " validity=2900 acquire_us=" #a \
                        " kind=exclusive\n"
#define FT_BRK(s, o, f) "START 1 pid=9 names=w,s\nBREAK " #s " name=w port=1\n" \
                        "BROKEN " #o " name=w holders=1 fence=" #f " sent_us=" #s " port=1\n"
#define FT_LOST(t, f)   "PUSH " #t " ! LOST w reason=broken\n" \
                        "ABORT " #t " fence=" #f " why=lost reason=broken\n"

static const struct ft_break_case ft_break_cases[] = {
    { "a lease section ends at its UNLOCK's send: a grant read before its answer is fine",
      { FT_START FT_W_L(1000, 1, 3900) "WRITE 1400 fence=1 value=1\n"
                 "END 1500 fence=1 read=0 wrote=1 prev_fence=0\n"
                 "RELEASE 1800 fence=1 sent_us=1600 answer=OK port=1\n",
        FT_START FT_W_X(1700, 2) "END 2000 fence=2 read=1 wrote=2 prev_fence=1\n", NULL },
      NULL, 2, true, 0, 0 },
    { "a grant read before a lease's UNLOCK was sent",
      { FT_START FT_W_L(1000, 1, 3900) "WRITE 1400 fence=1 value=1\n"
                 "END 1500 fence=1 read=0 wrote=1 prev_fence=0\n"
                 "RELEASE 1800 fence=1 sent_us=1600 answer=OK port=1\n",
        FT_START FT_W_X(1550, 2) "END 2000 fence=2 read=1 wrote=2 prev_fence=1\n", NULL },
      NULL, 2, true, FT_BIT(CHECKER_OVERLAP), 0 },
    { "a lease kept past its deadline counts until the deadline",
      { FT_START FT_W_L(1000, 1, 1200) "WRITE 1100 fence=1 value=1\n"
                 "END 1150 fence=1 read=0 wrote=1 prev_fence=0\n"
                 "RELEASE 1800 fence=1 sent_us=1600 answer=NOTHELD port=1\n",
        FT_START FT_W_X(1300, 2) "END 2000 fence=2 read=1 wrote=2 prev_fence=1\n", NULL },
      NULL, 2, true, 0, 0 },
    { "in a strict run a refused write excuses no overlap",
      { FT_START FT_W_X(1000, 1) "WRITE 1900 fence=1 value=1\n"
                 "REJECT 2000 fence=1 prev_fence=2\n",
        FT_START FT_W_X(1500, 2) "END 1700 fence=2 read=0 wrote=1 prev_fence=0\n", NULL },
      NULL, 1, true, FT_BIT(CHECKER_OVERLAP), 0 },
    { "a holder a BREAK ended, and one granted after the BREAK was sent",
      { FT_START FT_W_X(1000, 3) FT_LOST(2060, 3),
        FT_START FT_W_A(2040, 6, 500) "END 2500 fence=6 read=0 wrote=1 prev_fence=0\n", NULL },
      FT_BRK(2000, 2100, 5), 1, true, 0, 1 },
    { "a reader granted after a BREAK was sent sees the broken writer's late write",
      { FT_START FT_W_L(1000, 3, 3900) "WRITE 2050 fence=3 value=1\n"
                 "END 2060 fence=3 read=0 wrote=1 prev_fence=0\n"
                 "RELEASE 2080 fence=3 sent_us=2070 answer=NOTHELD port=1\n",
        FT_START FT_W_S(2040, 6) "END 2500 fence=6 read=0 reread=1\n", NULL },
      FT_BRK(2000, 2100, 5), 1, true, 0, 1 },
    { "a holder granted before the BREAK was sent, inside the broken one's section",
      { FT_START FT_W_X(1000, 3) FT_LOST(2060, 3),
        FT_START FT_W_A(1900, 6, 500) "END 2500 fence=6 read=0 wrote=1 prev_fence=0\n", NULL },
      FT_BRK(2000, 2100, 5), 1, true, FT_BIT(CHECKER_OVERLAP), 0 },
    { "a grant whose first LOCK came after a BREAK's OK, with a fence not above its F",
      { FT_START FT_W_X(1000, 3) FT_LOST(2060, 3),
        FT_START FT_W_A(3000, 5, 100) "END 3500 fence=5 read=0 wrote=1 prev_fence=0\n", NULL },
      FT_BRK(2000, 2100, 5), 1, true, FT_BIT(CHECKER_BREAK_AFTER), 0 },
    { "a holder the BREAK ended whose fence is not below its F",
      { FT_START FT_W_X(1000, 5) FT_LOST(2060, 5), NULL, NULL },
      FT_BRK(2000, 2100, 5), 0, true, FT_BIT(CHECKER_BREAK_BROKEN), 0 },
    { "LOST reason=broken with no BREAK sent before it",
      { FT_START FT_W_X(1000, 3) FT_LOST(1500, 3), NULL, NULL },
      FT_BRK(2000, 2100, 5), 0, true, FT_BIT(CHECKER_BREAK_BROKEN), 0 },
    { "a permit's holder a BREAK ended, the permit granted again inside its section",
      { FT_START FT_S(1000, 0, 3) "PUSH 2050 ! LOST s reason=broken\n"
                 "ABORT 2060 fence=3 why=lost reason=broken\n",
        FT_START FT_S(2040, 0, 4) "END 2500 fence=4 read=0 wrote=1 prev_fence=0\n", NULL },
      "START 1 pid=9 names=s\nBREAK 2000 name=s port=1\n"
      "BROKEN 2100 name=s holders=1 fence=2 sent_us=2000 port=1\n", 0, true, 0, 1 },
};

/* The lease and BREAK cases (ft_break_cases): how many were misjudged; *n: how many ran. */
static size_t
ft_self_test_timing(size_t *n)
{
    char paths[3][PATH_MAX + 16], oppath[PATH_MAX + 16];
    const char *oplogs[1] = { oppath };
    struct checker_log logs[3];
    struct checker_counter counter = { "w", 0, false, 0 };
    struct checker_input in;
    struct checker_result res;
    size_t i, j, k, bad = 0;
    bool ok;

    *n = sizeof(ft_break_cases) / sizeof(ft_break_cases[0]);
    snprintf(oppath, sizeof(oppath), "%s/selftest-op.log", ft_dir);
    for (i = 0; i < *n; i++) {
        const struct ft_break_case *c = &ft_break_cases[i];

        for (j = 0; j < 3; j++) {
            snprintf(paths[j], sizeof(paths[j]), "%s/selftest-t%zu.log", ft_dir, j);
            if (ft_write_file(paths[j], c->logs[j] != NULL ? c->logs[j] : "") != 0) {
                fprintf(stderr, "faults: self-test: cannot write %s\n", paths[j]);
                return *n;
            }
            logs[j].path = paths[j];
            logs[j].killed_us = 0;
        }
        if (ft_write_file(oppath, c->oplog != NULL ? c->oplog : "") != 0) {
            fprintf(stderr, "faults: self-test: cannot write %s\n", oppath);
            return *n;
        }
        counter.value = c->counter_w;
        memset(&in, 0, sizeof(in));
        in.logs = logs;
        in.nlogs = 3;
        in.counters = &counter;
        in.ncounters = 1;
        in.break_logs = oplogs;
        in.nbreak_logs = 1;
        in.strict = c->strict;
        ok = checker_run(&in, NULL, &res) == 0 && res.broken == c->broken;
        for (k = 0; k < CHECKER_KINDS; k++) {
            ok = ok && ((c->expect & FT_BIT(k)) ? res.counts[k] > 0 : res.counts[k] == 0);
        }
        if (!ok) {
            fprintf(stderr, "faults: self-test: the checker misjudged %s (expected %zu broken "
                    "overlaps, found %zu); it found:\n", c->what, c->broken, res.broken);
            checker_run(&in, stderr, &res);
            bad++;
        }
    }
    return bad;
}

/*
 * A synthetic case of the liveness property: up to four client logs
 * (and their kills), the bound, one fault window and the end of the
 * judged time (0: none), whether a liveness finding must be reported,
 * the other kinds it must find, and the longest judged gap the checker
 * must measure (-1: none, -2: not checked).
 */
struct ft_live_case {
    const char *what;               /* for the failure message */
    const char *logs[4];            /* client logs (NULL: empty) */
    int64_t     kill[4];            /* their kills, 0: none */
    struct checker_window skip;     /* a fault window ({0, 0}: none) */
    int64_t     until_us;           /* checker_input.live_until_us */
    bool        finding;            /* a liveness finding is expected */
    unsigned    also;               /* other kinds that must be found (bits) */
    int64_t     gap_us;             /* the longest judged gap, -2: not checked */
};

#define FT_LIVE_BOUND   500     /* the self-test's bound, us */
#define FT_WT(t)        "WAIT " #t " name=w wait=10000 port=1\n"
#define FT_WS(t)        "WAIT " #t " name=s wait=10000 port=1\n"
#define FT_UN(t)        "UNLOCK " #t " OK w holds=0\n"
#define FT_US(t)        "UNLOCK " #t " OK s holds=0\n"
#define FT_XEND(t, f)   "END " #t " fence=" #f " read=0 wrote=1 prev_fence=0\n"
#define FT_HOLD(b, e, u, f) FT_START FT_W_X(b, f) FT_XEND(e, f) FT_UN(u)
#define FT_SP(b, e, u, p, f) FT_START FT_S(b, p, f) FT_XEND(e, f) FT_US(u)

static const struct ft_live_case ft_live_cases[] = {
    { "a waiter granted 100 us after the release",
      { FT_HOLD(1000, 1100, 1200, 1), FT_START FT_WT(1050) FT_W_X(1300, 2) FT_XEND(1400, 2)
        FT_UN(1500), NULL, NULL }, { 0 }, { 0, 0 }, 0, false, 0, 100 },
    { "a waiter granted 800 us after the release",
      { FT_HOLD(1000, 1100, 1200, 1), FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2)
        FT_UN(2200), NULL, NULL }, { 0 }, { 0, 0 }, 0, true, 0, 800 },
    { "the same gap, most of it in a fault window",
      { FT_HOLD(1000, 1100, 1200, 1), FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2)
        FT_UN(2200), NULL, NULL }, { 0 }, { 1100, 1900 }, 0, false, 0, 100 },
    { "the same gap, after the end of the judged time",
      { FT_HOLD(1000, 1100, 1200, 1), FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2)
        FT_UN(2200), NULL, NULL }, { 0 }, { 0, 0 }, 1300, false, 0, 100 },
    { "an UNLOCK not answered OK: the keys may live a ttl more",
      { FT_START FT_W_X(1000, 1) FT_XEND(1100, 1) "UNLOCK 1200 NOTHELD w\n",
        FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2) FT_UN(2200), NULL, NULL },
      { 0 }, { 0, 0 }, 0, false, 0, -1 },
    { "a waiter whose wait= ran out, and a later wait granted at once",
      { FT_HOLD(1000, 1100, 1200, 1), FT_START FT_WT(1050) "TIMEOUT 1300\n" FT_WT(2500)
        FT_W_X(2600, 2) FT_XEND(2700, 2) FT_UN(2800), NULL, NULL },
      { 0 }, { 0, 0 }, 0, false, 0, 100 },
    { "a client that polls (wait=0) waits for nothing",
      { FT_HOLD(1000, 1100, 1200, 1), FT_START FT_W_X(5000, 2) FT_XEND(5100, 2) FT_UN(5200),
        NULL, NULL }, { 0 }, { 0, 0 }, 0, false, 0, -1 },
    { "a holder killed inside its section keeps the name a ttl more",
      { FT_START FT_W_X(1000, 1), FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2)
        FT_UN(2200), NULL, NULL }, { 1100, 0, 0, 0 }, { 0, 0 }, 0, false, 0, -1 },
    { "a holder a BREAK ended frees the name at its ABORT",
      { FT_START FT_W_X(1000, 1) "PUSH 1150 ! LOST w reason=broken\n"
        "ABORT 1200 fence=1 why=lost reason=broken\n",
        FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2) FT_UN(2200), NULL, NULL },
      { 0 }, { 0, 0 }, 0, true, FT_BIT(CHECKER_BREAK_BROKEN), 800 },
    { "a lease released OK frees the name at the answer",
      { FT_START FT_W_L(1000, 1, 3900) FT_XEND(1100, 1)
        "RELEASE 1200 fence=1 sent_us=1150 answer=OK port=1\n",
        FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2) FT_UN(2200), NULL, NULL },
      { 0 }, { 0, 0 }, 0, true, 0, 800 },
    { "a lease whose UNLOCK answered NOTHELD keeps the name until its keys expire",
      { FT_START FT_W_L(1000, 1, 3900) FT_XEND(1100, 1)
        "RELEASE 1200 fence=1 sent_us=1150 answer=NOTHELD port=1\n",
        FT_START FT_WT(1050) FT_W_X(2000, 2) FT_XEND(2100, 2) FT_UN(2200), NULL, NULL },
      { 0 }, { 0, 0 }, 0, false, 0, -1 },
    { "a counted name with a permit free while a client waits",
      { FT_SP(1000, 1100, 1200, 0, 1), FT_SP(900, 8000, 8100, 1, 1),
        FT_SP(950, 8000, 8100, 2, 1),
        FT_START FT_WS(1050) FT_S(2000, 0, 2) FT_XEND(2100, 2) FT_US(2200) },
      { 0 }, { 0, 0 }, 0, true, 0, 800 },
    { "a counted name with every permit held while a client waits",
      { FT_SP(1000, 1100, 2000, 0, 1), FT_SP(900, 8000, 8100, 1, 1),
        FT_SP(950, 8000, 8100, 2, 1),
        FT_START FT_WS(1050) FT_S(2000, 0, 2) FT_XEND(2100, 2) FT_US(2200) },
      { 0 }, { 0, 0 }, 0, false, 0, -1 },
};

/* The liveness cases (ft_live_cases): how many were misjudged; *n: how many ran. */
static size_t
ft_self_test_live(size_t *n)
{
    char paths[4][PATH_MAX + 16];
    struct checker_log logs[4];
    struct checker_input in;
    struct checker_result res;
    size_t i, j, k, bad = 0;
    bool ok;

    *n = sizeof(ft_live_cases) / sizeof(ft_live_cases[0]);
    for (i = 0; i < *n; i++) {
        const struct ft_live_case *c = &ft_live_cases[i];

        for (j = 0; j < 4; j++) {
            snprintf(paths[j], sizeof(paths[j]), "%s/selftest-l%zu.log", ft_dir, j);
            if (ft_write_file(paths[j], c->logs[j] != NULL ? c->logs[j] : "") != 0) {
                fprintf(stderr, "faults: self-test: cannot write %s\n", paths[j]);
                return *n;
            }
            logs[j].path = paths[j];
            logs[j].killed_us = c->kill[j];
        }
        memset(&in, 0, sizeof(in));
        in.logs = logs;
        in.nlogs = 4;
        in.live_bound_us = FT_LIVE_BOUND;
        in.live_skip = &c->skip;
        in.nlive_skip = c->skip.to_us > 0 ? 1 : 0;
        in.live_until_us = c->until_us;
        ok = checker_run(&in, NULL, &res) == 0
             && (c->gap_us == -2 || res.max_gap_us == c->gap_us);
        for (k = 0; k < CHECKER_KINDS; k++) {
            ok = ok && ((k == CHECKER_LIVENESS && c->finding) || (c->also & FT_BIT(k))
                        ? res.counts[k] > 0 : res.counts[k] == 0);
        }
        if (!ok) {
            fprintf(stderr, "faults: self-test: the checker misjudged %s (expected %s, a "
                    "longest gap of %lld us; measured %lld us); it found:\n", c->what,
                    c->finding ? "a liveness finding" : "nothing", (long long)c->gap_us,
                    (long long)res.max_gap_us);
            checker_run(&in, stderr, &res);
            bad++;
        }
    }
    return bad;
}

/*
 * Synthetic cases of sets (README, "Sets"): up to four client logs on
 * names "x" and "y", their final counters, and the kinds the checker
 * must find (bits; 0: none).  Liveness is judged against FT_LIVE_BOUND
 * (500 us) and a set's wait against FT_SET_BOUND.
 */
struct ft_set_case {
    const char *what;               /* for the failure message */
    const char *logs[4];            /* client logs (NULL: empty) */
    long long   counter_x;          /* final counter of "x" */
    long long   counter_y;          /* final counter of "y" */
    unsigned    expect;             /* kinds that must be found */
};

#define FT_SET_BOUND    2000    /* the self-test's set wait bound, us */
#define FT_XY(t, fx, fy) "BEGIN " #t " name=x,y fence=" #fx "," #fy " validity=2900 " \
                         "kind=exclusive set=2\n"
#define FT_XY_END(t, n, f, r) "WRITE " #t " name=" #n " fence=" #f " value=" #r "\n" \
                              "END " #t " name=" #n " fence=" #f " read=0 wrote=" #r \
                              " prev_fence=0\n"
#define FT_XY_UN(t)     "UNLOCK " #t " OK x y holds=0\n"
#define FT_ONE(n, b, e, u, f, r) "BEGIN " #b " name=" #n " fence=" #f " validity=2900\n" \
                                 "END " #e " fence=" #f " read=0 wrote=" #r \
                                 " prev_fence=0\nUNLOCK " #u " OK " #n " holds=0\n"
#define FT_WXY(t)       "WAIT " #t " name=x,y wait=10000 port=1\n"

static const struct ft_set_case ft_set_cases[] = {
    { "a set, then singles on each of its names (clean)",
      { FT_START FT_XY(1000, 1, 1) FT_XY_END(1100, x, 1, 1) FT_XY_END(1150, y, 1, 1)
        FT_XY_UN(1200),
        FT_START FT_ONE(x, 1300, 1400, 1450, 2, 2), FT_START FT_ONE(y, 1300, 1400, 1450, 2, 2),
        NULL }, 2, 2, 0 },
    { "a single on y granted inside the set's section (an overlap on y)",
      { FT_START FT_XY(1000, 1, 1) FT_XY_END(1100, x, 1, 1) FT_XY_END(1150, y, 1, 1)
        FT_XY_UN(1200),
        FT_START FT_ONE(y, 1120, 1300, 1350, 2, 2), NULL, NULL }, 1, 2,
      FT_BIT(CHECKER_OVERLAP) },
    { "a set whose fence of y is not above the last single's",
      { FT_START FT_ONE(y, 500, 600, 650, 5, 1),
        FT_START FT_XY(1000, 1, 5) FT_XY_END(1100, x, 1, 1) FT_XY_END(1150, y, 5, 2)
        FT_XY_UN(1200), NULL, NULL }, 1, 2, FT_BIT(CHECKER_FENCE) },
    { "a set that lost its lock writes nothing; a single after its ABORT",
      { FT_START FT_XY(1000, 1, 1) "ABORT 1100 name=x,y fence=1,1 why=lost reason=renew\n",
        FT_START FT_ONE(x, 1200, 1300, 1350, 2, 1), NULL, NULL }, 1, 0, 0 },
    { "a set's write of y that never came counts as no write (a lost update on y)",
      { FT_START FT_XY(1000, 1, 1) FT_XY_END(1100, x, 1, 1) FT_XY_END(1150, y, 1, 1)
        FT_XY_UN(1200), NULL, NULL, NULL }, 1, 0, FT_BIT(CHECKER_LOST_UPDATE) },
    { "a set waits while x and y are free at once (liveness)",
      { FT_START FT_ONE(x, 1000, 1100, 1200, 1, 1),
        FT_START FT_ONE(y, 1000, 1150, 1250, 1, 1),
        FT_START FT_WXY(1050) FT_XY(2000, 2, 2) FT_XY_END(2100, x, 2, 2)
        FT_XY_END(2150, y, 2, 2) FT_XY_UN(2200), NULL }, 2, 2, FT_BIT(CHECKER_LIVENESS) },
    { "a set waits while x is free and y held, then y free and x held (clean)",
      { FT_START FT_ONE(x, 1000, 1100, 1200, 1, 1) FT_ONE(x, 1800, 2600, 2650, 2, 2),
        FT_START FT_ONE(y, 1000, 1700, 1900, 1, 1),
        FT_START FT_WXY(1050) FT_XY(2700, 3, 2) FT_XY_END(2750, x, 3, 3)
        FT_XY_END(2760, y, 2, 2) FT_XY_UN(2800), NULL }, 3, 2, 0 },
    { "a set that waits longer than its bound while its names are held (starvation)",
      { FT_START FT_ONE(x, 1000, 3500, 3600, 1, 1), FT_START FT_ONE(y, 1000, 3500, 3600, 1, 1),
        FT_START FT_WXY(1050) FT_XY(3700, 2, 2) FT_XY_END(3750, x, 2, 2)
        FT_XY_END(3760, y, 2, 2) FT_XY_UN(3800), NULL }, 2, 2, FT_BIT(CHECKER_STARVATION) },
    { "a set's BEGIN with one fence for two names",
      { FT_START "BEGIN 1000 name=x,y fence=1 validity=2900 kind=exclusive set=2\n"
        "ABORT 1100 name=x,y fence=1 why=lost\n", NULL, NULL, NULL }, 0, 0,
      FT_BIT(CHECKER_LOG) | FT_BIT(CHECKER_FENCE) },
};

/* The sets' cases (ft_set_cases): how many were misjudged; *n: how many ran. */
static size_t
ft_self_test_sets(size_t *n)
{
    char paths[4][PATH_MAX + 16];
    struct checker_log logs[4];
    struct checker_counter counters[2] = { { "x", 0, false, 0 }, { "y", 0, false, 0 } };
    struct checker_input in;
    struct checker_result res;
    size_t i, j, k, bad = 0;
    bool ok;

    *n = sizeof(ft_set_cases) / sizeof(ft_set_cases[0]);
    for (i = 0; i < *n; i++) {
        const struct ft_set_case *c = &ft_set_cases[i];

        for (j = 0; j < 4; j++) {
            snprintf(paths[j], sizeof(paths[j]), "%s/selftest-s%zu.log", ft_dir, j);
            if (ft_write_file(paths[j], c->logs[j] != NULL ? c->logs[j] : "") != 0) {
                fprintf(stderr, "faults: self-test: cannot write %s\n", paths[j]);
                return *n;
            }
            logs[j].path = paths[j];
            logs[j].killed_us = 0;
        }
        counters[0].value = c->counter_x;
        counters[1].value = c->counter_y;
        memset(&in, 0, sizeof(in));
        in.logs = logs;
        in.nlogs = 4;
        in.counters = counters;
        in.ncounters = 2;
        in.live_bound_us = FT_LIVE_BOUND;
        in.set_wait_bound_us = FT_SET_BOUND;
        ok = checker_run(&in, NULL, &res) == 0;
        for (k = 0; k < CHECKER_KINDS; k++) {
            ok = ok && ((c->expect & FT_BIT(k)) ? res.counts[k] > 0 : res.counts[k] == 0);
        }
        if (!ok) {
            fprintf(stderr, "faults: self-test: the checker misjudged %s; it found:\n",
                    c->what);
            checker_run(&in, stderr, &res);
            bad++;
        }
    }
    return bad;
}

/* Run the checker on every case; 0 when it finds exactly what it should. */
int
ft_self_test(void)
{
    const char *const names[] = { "x" };
    char pa[PATH_MAX + 16], pb[PATH_MAX + 16];
    struct checker_log logs[2];
    struct checker_counter counter = { "x", 0, false, 0 };
    struct checker_input in;
    struct checker_result res;
    size_t i, k, f, t, l, st, bad = 0;
    bool ok;

    snprintf(pa, sizeof(pa), "%s/selftest-a.log", ft_dir);
    snprintf(pb, sizeof(pb), "%s/selftest-b.log", ft_dir);
    for (i = 0; i < sizeof(ft_cases) / sizeof(ft_cases[0]); i++) {
        const struct ft_case *c = &ft_cases[i];

        if (ft_write_file(pa, c->log_a) != 0 || ft_write_file(pb, c->log_b) != 0) {
            fprintf(stderr, "faults: self-test: cannot write %s\n", pa);
            return -1;
        }
        logs[0].path = pa;
        logs[0].killed_us = c->kill_a;
        logs[1].path = pb;
        logs[1].killed_us = 0;
        counter.value = c->counter;
        memset(&in, 0, sizeof(in));
        in.logs = logs;
        in.nlogs = 2;
        in.counters = &counter;
        in.ncounters = 1;
        in.recovery_names = names;
        in.nrecovery = 1;
        in.heal_us = c->heal_us;
        in.recovery_bound_us = c->bound_us;
        ok = checker_run(&in, NULL, &res) == 0;
        for (k = 0; k < CHECKER_KINDS; k++) {
            ok = ok && (k == c->kind ? res.counts[k] > 0 : res.counts[k] == 0);
        }
        if (!ok) {
            fprintf(stderr, "faults: self-test: the checker misjudged %s (expected %s); "
                    "it found:\n", c->what,
                    c->kind == CHECKER_KINDS ? "nothing" : checker_kind_name(c->kind));
            checker_run(&in, stderr, &res);
            bad++;
        }
    }
    bad += ft_self_test_kinds(&k);
    bad += ft_self_test_fences(&f);
    bad += ft_self_test_timing(&t);
    bad += ft_self_test_live(&l);
    bad += ft_self_test_sets(&st);
    printf("checker self-test: %zu synthetic histories, %zu misjudged\n",
           i + k + f + t + l + st, bad);
    return bad == 0 ? 0 : -1;
}
