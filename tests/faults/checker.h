/*
 * checker.h: the verdict of the fault-injection suite, from the logs of
 * the rmw-client sessions (tests/faults/rmw_client.c writes them; the
 * format is described there and in tests/faults/README.md).
 *
 * A section is the time a client believed it held a lock: from its BEGIN
 * (the OK of the LOCK was read) to its END (the counter's write was
 * acknowledged), its ABORT (it read "! LOST" or the daemon connection
 * closed; it did not write), or, for a client killed by SIGKILL inside a
 * section, the moment of the kill.  All times are CLOCK_MONOTONIC
 * microseconds, one clock for every process on the machine.
 *
 * What counts as a violation (each kind is counted separately):
 *
 *   overlap      a section on a name begins before an earlier-begun
 *                section on the same name has ended
 *   fence        fences do not strictly increase in the order in which
 *                the sections of a name began (or a grant has no fence)
 *   stale-write  a write carried a fence no larger than the previous
 *                write's (what a fenced resource would have refused)
 *   lost-update  the final counter differs from the number of sections
 *                that wrote (ENDs); a killed client's WRITE without an END
 *                may or may not have landed and widens the range by one
 *   recovery     after the heal, a name was not granted again within the
 *                bound
 *   open         a section that never ended although its client was not
 *                killed (the client hung, or the log is cut)
 *   log          a log that does not follow the client's grammar
 *   external     found by the orchestrator, not in the logs (keys left on
 *                a master, a killed client's keys not released in time);
 *                added by the caller with checker_add_external()
 *
 * Reports go to a FILE (one line per finding, at most a few per kind,
 * then a count of the rest).
 */
#ifndef REDLOCKD_TESTS_FAULTS_CHECKER_H
#define REDLOCKD_TESTS_FAULTS_CHECKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CHECKER_NAME_MAX    64          /* longest lock name in a log */
#define CHECKER_OPEN_END    INT64_MAX   /* end_us of a section that never ended */
#define CHECKER_REPORT_MAX  5           /* findings printed per kind */

enum checker_kind {
    CHECKER_OVERLAP,
    CHECKER_FENCE,
    CHECKER_STALE_WRITE,
    CHECKER_LOST_UPDATE,
    CHECKER_RECOVERY,
    CHECKER_OPEN,
    CHECKER_LOG,
    CHECKER_EXTERNAL,
    CHECKER_KINDS                       /* number of kinds */
};

/* How a section ended. */
enum checker_end {
    CHECKER_END_WROTE,                  /* END: the write was acknowledged */
    CHECKER_END_ABORT,                  /* ABORT: lost or disconnected, no write */
    CHECKER_END_KILLED,                 /* the client was killed inside it */
    CHECKER_END_NONE                    /* never ended (a violation) */
};

/* One client log as the orchestrator knows it (caller-owned). */
struct checker_log {
    const char *path;                   /* the client's log file */
    int64_t     killed_us;              /* when SIGKILL was sent to it; 0: never */
};

/* One section; owned by a struct checker_sections. */
struct checker_section {
    char             name[CHECKER_NAME_MAX + 1]; /* lock name */
    size_t           log;               /* index of its log in the input */
    long             pid;               /* the client's process id */
    int              port;              /* daemon that granted it */
    int64_t          begin_us;          /* BEGIN */
    int64_t          end_us;            /* END, ABORT, kill, or CHECKER_OPEN_END */
    enum checker_end how;               /* how it ended */
    long long        fence;             /* fence of the grant, -1 when missing */
    long long        wrote;             /* value written (END), else -1 */
    long long        prev_fence;        /* fence of the previous write (END), else -1 */
    bool             write_started;     /* a WRITE line was logged */
    int64_t          acquire_us;        /* first LOCK sent to OK read */
};

/* Every section of a set of logs, in log order; free with checker_free(). */
struct checker_sections {
    struct checker_section *v;          /* the sections (malloc'd) */
    size_t                  n;          /* used */
    size_t                  cap;        /* allocated */
};

/* The final value of a name's counter (caller-owned). */
struct checker_counter {
    const char *name;                   /* lock name */
    long long   value;                  /* GET counter:<name>, 0 when absent */
};

/* What the checker is asked to judge (every pointer caller-owned). */
struct checker_input {
    const struct checker_log     *logs;         /* client logs */
    size_t                        nlogs;        /* entries in logs */
    const struct checker_counter *counters;     /* names whose updates are counted */
    size_t                        ncounters;    /* entries in counters */
    const char *const            *recovery_names; /* names that must be granted after heal_us */
    size_t                        nrecovery;    /* entries in recovery_names */
    int64_t                       heal_us;      /* the last fault healed; 0: no recovery check */
    int64_t                       recovery_bound_us; /* longest allowed heal-to-grant time */
};

/* The verdict (filled by checker_run, added to by checker_add_external). */
struct checker_result {
    size_t  sections;                   /* sections begun (grants) */
    size_t  wrote;                      /* sections that wrote (END) */
    size_t  aborted;                    /* sections that ended in ABORT */
    size_t  killed;                     /* sections cut by their client's SIGKILL */
    size_t  counts[CHECKER_KINDS];      /* violations per kind */
    size_t  violations;                 /* sum of counts */
    int64_t max_acquire_us;             /* longest first-LOCK-to-OK time, -1 if no section */
    int64_t max_acquire_at_us;          /* BEGIN of that section */
    long    max_acquire_pid;            /* its client */
    int64_t recovery_us;                /* slowest first grant after heal over the
                                           recovery names; -1 when not measured */
};

/* Short name of a kind ("overlap", "fence", ...). */
const char *checker_kind_name(enum checker_kind kind);

/*
 * Read the logs into out (which must be zeroed or freed before).  Lines
 * that break the grammar are reported to report (NULL: silent) and
 * counted in *log_errors (may be NULL).  Returns 0, or -1 when a log
 * could not be read or memory ran out.
 */
int checker_load(const struct checker_log *logs, size_t nlogs, struct checker_sections *out,
                 FILE *report, size_t *log_errors);

void checker_free(struct checker_sections *s);

/*
 * The section of log number log that was in progress at time t (begun
 * at or before t, not yet ended), or NULL.
 */
const struct checker_section *checker_held_at(const struct checker_sections *s, size_t log,
                                              int64_t t);

/* Number of sections on name that began at or after t. */
size_t checker_begun_since(const struct checker_sections *s, const char *name, int64_t t);

/*
 * Judge the input: load the logs, run every check, print the findings to
 * report and fill out.  Returns 0, or -1 when the logs could not be read
 * (out then holds what was known; the caller treats it as a failure).
 */
int checker_run(const struct checker_input *in, FILE *report, struct checker_result *out);

/* Count and print a violation that the orchestrator found itself. */
__attribute__((format(printf, 3, 4)))
void checker_add_external(struct checker_result *r, FILE *report, const char *fmt, ...);

#endif /* REDLOCKD_TESTS_FAULTS_CHECKER_H */
