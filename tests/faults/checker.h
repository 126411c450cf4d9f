/*
 * checker.h: the verdict of the fault-injection suite, from the logs of
 * the rmw-client sessions (tests/faults/rmw_client.c writes them; the
 * format is described there and in tests/faults/README.md).
 *
 * A section is the time a client believed it held a lock: from its BEGIN
 * (the OK of the LOCK was read) to its END (the counter's write was
 * acknowledged), its ABORT (it read "! LOST" or the daemon connection
 * closed; it did not write), its REJECT (a fenced write that the
 * counter's script refused: it wrote nothing), or, for a client killed by
 * SIGKILL inside a section, the moment of the kill.  A lease section
 * (BEGIN ... mode=lease) runs until its UNLOCK was sent (its RELEASE
 * line), or until the deadline the client kept for it, or until its
 * ABORT, whichever comes first; its END or REJECT is only its outcome.
 * All times are CLOCK_MONOTONIC microseconds, one clock for every
 * process on the machine.
 *
 * BREAKs: the logs of the operator (tests/faults/break_client.c) say
 * when each BREAK was sent and when its OK came with the raised fence F.
 * A BREAK ends every holder of the name at once, so a holder it ended
 * may still be inside its section when the next one is granted; that
 * holder is "broken by" BREAK k when its grant was read before k's OK,
 * it was still inside its section when k was sent, and either its grant
 * was read before k was sent or it was told so (a LOST reason=broken
 * push, or NOTHELD for a lease), and, on the exclusive/shared family,
 * its fence is below F.  From k's send on, such a section no longer
 * counts against others (an overlap with it is "broken", shown, not a
 * violation).
 *
 * A section is of one of three kinds of hold (kind= of its BEGIN;
 * absent: exclusive).  A name is either of the exclusive/shared family
 * (plain LOCK and LOCK shared) or counted (LOCK limit=N, every section
 * with the same limit and a permit 0..N-1).
 *
 * What counts as a violation (each kind is counted separately):
 *
 *   overlap      a section on a name begins before an earlier-begun
 *                section on the same name has ended, when one of the two
 *                is exclusive (two shared sections may overlap); on a
 *                counted name, two sections on the same permit (each
 *                permit is a mutex of its own).  Not when the
 *                earlier-begun one ended in REJECT: that holder's lock
 *                was taken over while it believed it held it, and the
 *                resource refused its late write.  Such an overlap is
 *                "fenced": counted in fenced and printed, not a violation
 *   over-limit   more sections of a counted name at once than its limit
 *   fence        fences do not strictly increase in the order in which
 *                the sections of a name began (or a grant has no fence);
 *                on the exclusive/shared family, an exclusive section's
 *                fence must exceed every earlier one's and a shared
 *                section's every earlier exclusive one's (two shared
 *                sections are granted in any order); on a counted name,
 *                per permit
 *   stale-write  a write carried a fence no larger than the previous
 *                write's (what a fenced resource would have refused); a
 *                REJECT is not a write
 *   lost-update  the final counter differs from the number of sections
 *                that wrote (ENDs); a killed client's WRITE without an END
 *                may or may not have landed and widens the range by one;
 *                a WRITE followed by REJECT did not land
 *   dirty-read   a shared section read the counter twice (at its start and
 *                at its end) and the values differ: an exclusive holder
 *                wrote inside it
 *   break-after  on the exclusive/shared family, a section whose first
 *                LOCK was sent after a BREAK's OK on its name has a fence
 *                not above that BREAK's F
 *   break-broken on the exclusive/shared family, a section told "! LOST
 *                reason=broken" whose grant was read before the OK of the
 *                BREAK that ended it (the last one sent before the LOST)
 *                has a fence not below its F; or no BREAK of the name was
 *                sent before that LOST
 *   validity     a grant whose reported validity is not in (0, ttl]
 *   liveness     outside the fault windows, a name was free (checker.h,
 *                "Liveness" below) for longer than the bound while a client
 *                waited for it (its LOCK with wait= sent, not yet answered);
 *                for a set, every name of the set was free at once that
 *                long while the set waited ("Sets" below)
 *   starvation   outside the fault windows, a set waited (its LOCK with
 *                wait= sent, not yet answered) longer than set_wait_bound_us,
 *                whether or not its names were free
 *   recovery     after the heal, a name was not granted again within the
 *                bound
 *   never-full   a name listed in full_names never had its full number of
 *                holders at once: a counted name never N, a shared name
 *                never two shared holders (a lock that serializes what it
 *                should let through together)
 *   open         a section that never ended although its client was not
 *                killed (the client hung, or the log is cut)
 *   log          a log that does not follow the client's grammar
 *   external     found by the orchestrator, not in the logs (keys left on
 *                a master, a killed client's keys not released in time);
 *                added by the caller with checker_add_external()
 *
 * "At once" is judged on the sections as the clients stamped them, the
 * same intervals for every kind: a section that ends at the very moment
 * another begins does not overlap it.
 *
 * Liveness.  A hold keeps its name from the BEGIN of its section (the
 * OK was read) until the name is surely free of it (free_us): a
 * session's UNLOCK answered "OK <name> holds=0"; a lease's UNLOCK
 * answered OK, or its keys' expiry (the last OK of its LOCK or EXTEND
 * plus its ttl) when that comes first or the answer was anything else;
 * a session told "! LOST reason=broken" (the BREAK deleted its keys), at
 * its ABORT.  Where the client cannot tell (LOST for another reason, a
 * closed connection, an UNLOCK not answered OK, a client killed), the
 * hold lasts one ttl more, the longest its keys can outlive it.  A name
 * of the exclusive/shared family is free while no hold of any kind
 * keeps it; a counted name while fewer holds than its limit keep it.
 * Every interval is thus stamped late at its free end and early at its
 * busy end: a free interval is never longer than the truth but by the
 * time the next holder's OK took to be read.  A client waits for its
 * name from the send of a LOCK with wait= (WAIT) to its answer (the
 * next line of its log but a PUSH); a polling client (wait=0) never
 * waits.  For every free interval, the longest part of it that one
 * wait covers, outside the fault windows (checker_input.live_skip) and
 * before live_until_us, is its gap; a gap above live_bound_us is a
 * liveness finding (one per free interval, naming its longest waiter).
 *
 * Sets.  A BEGIN with name=P,Q,... (and fence=F1,F2,..., set=N) is the
 * grant of a set (LOCK P Q ...): it is one section on each of its names,
 * with that name's fence, judged on each name as any other section
 * (overlap, fence order, stale write, lost update, liveness).  The
 * lines that follow name the names they concern (WRITE, END of one
 * name; ABORT of the whole set; a line without name= concerns every
 * name still open), and each name's section ends at its own outcome.
 * A wait with name=P,Q,... is a set's: it does not count as a wait for
 * P or Q alone (the set cannot take P while Q is held); it is judged on
 * the times when every one of its names is free at once (liveness), and
 * on its length (starvation).
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
#define CHECKER_NAMES_MAX   16          /* names with a checker_name_stat */

enum checker_kind {
    CHECKER_OVERLAP,
    CHECKER_OVER_LIMIT,
    CHECKER_FENCE,
    CHECKER_STALE_WRITE,
    CHECKER_LOST_UPDATE,
    CHECKER_DIRTY_READ,
    CHECKER_BREAK_AFTER,
    CHECKER_BREAK_BROKEN,
    CHECKER_VALIDITY,
    CHECKER_LIVENESS,
    CHECKER_STARVATION,
    CHECKER_RECOVERY,
    CHECKER_NEVER_FULL,
    CHECKER_OPEN,
    CHECKER_LOG,
    CHECKER_EXTERNAL,
    CHECKER_KINDS                       /* number of kinds */
};

/* How a section ended. */
enum checker_end {
    CHECKER_END_WROTE,                  /* END: the write was acknowledged */
    CHECKER_END_READ,                   /* END of a shared section: read twice */
    CHECKER_END_ABORT,                  /* ABORT: lost or disconnected, no write */
    CHECKER_END_REJECT,                 /* REJECT: the fenced write was refused */
    CHECKER_END_KILLED,                 /* the client was killed inside it */
    CHECKER_END_NONE                    /* never ended (a violation) */
};

/* The kind of hold a section had (kind= of its BEGIN). */
enum checker_hold {
    CHECKER_HOLD_EXCLUSIVE,             /* plain LOCK (kind= absent or exclusive) */
    CHECKER_HOLD_SHARED,                /* LOCK shared */
    CHECKER_HOLD_COUNTED                /* LOCK limit=N: one of N permits */
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
    long long        prev_fence;        /* fence of the previous write (END), the
                                           stored fence that refused it (REJECT),
                                           else -1 */
    bool             write_started;     /* a WRITE line was logged */
    int64_t          acquire_us;        /* first LOCK sent to OK read */
    enum checker_hold hold;             /* kind of hold */
    int              limit;             /* counted: limit=, else 0 */
    int              permit;            /* counted: permit=, else -1 */
    bool             has_validity;      /* validity= was in the BEGIN */
    long long        validity;          /* validity= (ms), as the daemon reported it */
    long long        ttl_ms;            /* ttl= of the client's START, 0 if unknown */
    long long        read;              /* shared END: read= (at the start), else -1 */
    long long        reread;            /* shared END: reread= (at the end), else -1 */
    bool             lease;             /* BEGIN ... mode=lease */
    int64_t          deadline_us;       /* a lease's deadline as its client kept it
                                           (BEGIN, EXTEND), 0 when it kept none */
    int64_t          release_us;        /* a lease's UNLOCK was sent, 0 if never */
    int64_t          released_us;       /* and its answer read (RELEASE), 0 if never */
    bool             notheld;           /* a lease's EXTEND or UNLOCK answered NOTHELD */
    bool             late_write;        /* a lease's write was acknowledged after its
                                           deadline */
    int64_t          broken_us;         /* "! LOST <name> reason=broken" read inside it or
                                           before its UNLOCK's answer, 0 if never */
    int64_t          broken_end_us;     /* the send of the first BREAK that broke it,
                                           CHECKER_OPEN_END when none (checker_run) */
    int64_t          alive_us;          /* a lease's keys expire at most a ttl after
                                           this: its BEGIN, or its last EXTEND's OK */
    bool             broken_read;       /* shared, and began while an exclusive holder
                                           that a BREAK had ended was inside its
                                           section: that holder's write may land
                                           inside this one (a dirty read, not a
                                           violation: checker_walk sets it) */
    int64_t          free_us;           /* the name is surely free of this hold from
                                           here (see "Liveness" above);
                                           CHECKER_OPEN_END when never */
    size_t           set;               /* names of the set it is part of ("Sets"
                                           above), 0 for a single name */
    size_t           set_index;         /* its place in the set's BEGIN */
    char             set_names[CHECKER_NAME_MAX + 1]; /* the set, "P,Q,...", or "" */
};

/* A LOCK with wait= in flight (WAIT to its answer); owned by a struct checker_sections. */
struct checker_wait {
    char    name[CHECKER_NAME_MAX + 1]; /* lock name */
    size_t  log;                        /* index of its log in the input */
    long    pid;                        /* the client's process id */
    int     port;                       /* daemon it was sent to */
    int64_t from_us;                    /* WAIT: the LOCK is sent */
    int64_t to_us;                      /* its answer (the next line but a PUSH), the
                                           client's kill, or CHECKER_OPEN_END */
};

/* Every section (and wait) of a set of logs, in log order; free with checker_free(). */
struct checker_sections {
    struct checker_section *v;          /* the sections (malloc'd) */
    size_t                  n;          /* used */
    size_t                  cap;        /* allocated */
    struct checker_wait    *w;          /* the waits (malloc'd) */
    size_t                  nw;         /* used */
    size_t                  wcap;       /* allocated */
};

/* A time window, [from_us, to_us) (caller-owned). */
struct checker_window {
    int64_t from_us;
    int64_t to_us;
};

/* One BREAK from an operator's log; owned by a struct checker_breaks. */
struct checker_break {
    char      name[CHECKER_NAME_MAX + 1]; /* lock name */
    int64_t   sent_us;                  /* BREAK sent */
    int64_t   ok_us;                    /* its OK read; CHECKER_OPEN_END when it had none */
    long long fence;                    /* F of its OK, -1 when it had none */
    long long holders;                  /* holders= of its OK, -1 when none */
};

/* Every BREAK of a set of operator logs; free with checker_free_breaks(). */
struct checker_breaks {
    struct checker_break *v;            /* by name, then sent_us (malloc'd) */
    size_t                n;            /* used */
    size_t                cap;          /* allocated */
};

/* The final value of a name's counter, or of one permit's (caller-owned). */
struct checker_counter {
    const char *name;                   /* lock name */
    long long   value;                  /* GET counter:<name>[:<permit>], 0 when absent */
    bool        per_permit;             /* the counter of one permit of a counted name */
    int         permit;                 /* which, when per_permit */
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
    const char *const            *full_names;   /* names that must have their full
                                                   number of holders at once */
    size_t                        nfull;        /* entries in full_names */
    const char *const            *break_logs;   /* operators' logs (BREAK, BROKEN) */
    size_t                        nbreak_logs;  /* entries in break_logs */
    bool                          strict;       /* a REJECT excuses no overlap (no daemon
                                                   is paused: a refused write means two
                                                   holders at once) */
    int64_t                       live_bound_us; /* longest judged free gap while a
                                                   client waits; 0: liveness not judged */
    const struct checker_window  *live_skip;    /* fault windows: gaps there are shown
                                                   (max_gap_skipped_us), not judged */
    size_t                        nlive_skip;   /* entries in live_skip */
    int64_t                       live_until_us; /* nothing judged from here on (the
                                                   clients were told to stop); 0: no end */
    FILE                         *all_findings; /* every finding, past the report's
                                                   limit too (NULL: none) */
    int64_t                       set_wait_bound_us; /* longest judged wait of a set
                                                   (starvation); 0: not judged */
};

/* What the checker saw of one name (the first CHECKER_NAMES_MAX names). */
struct checker_name_stat {
    char              name[CHECKER_NAME_MAX + 1];
    enum checker_hold hold;             /* COUNTED, or EXCLUSIVE for the family
                                           (SHARED when only shared sections) */
    int               limit;            /* counted: the limit */
    size_t            sections;         /* sections begun */
    size_t            exclusive;        /* of them, exclusive */
    size_t            shared;           /* of them, shared */
    size_t            overlaps;         /* overlap findings on it */
    size_t            fenced;           /* overlaps with a REJECT-ended holder (not
                                           violations) */
    size_t            broken;           /* overlaps with a holder a BREAK ended (not
                                           violations) */
    size_t            breaks;           /* BREAKs of it answered OK */
    size_t            over_limit;       /* over-limit findings on it */
    size_t            max_holders;      /* counted: most sections at once; the
                                           family: most shared sections at once */
    int64_t           max_gap_us;       /* longest judged free gap while a client
                                           waited (liveness), -1 when none */
    size_t            liveness;         /* liveness findings on it */
};

/* The verdict (filled by checker_run, added to by checker_add_external). */
struct checker_result {
    size_t  sections;                   /* sections begun (grants) */
    size_t  wrote;                      /* sections that wrote (END) */
    size_t  read;                       /* shared sections that read twice (END) */
    size_t  aborted;                    /* sections that ended in ABORT */
    size_t  rejected;                   /* sections that ended in REJECT */
    size_t  fenced;                     /* overlaps with a REJECT-ended holder: shown,
                                           not counted as violations */
    size_t  killed;                     /* sections cut by their client's SIGKILL */
    size_t  broken;                     /* overlaps with a holder a BREAK ended: shown,
                                           not counted as violations */
    size_t  leases;                     /* lease sections */
    size_t  late_writes;                /* lease sections whose write was acknowledged
                                           after their deadline (the client's lateness,
                                           not judged) */
    size_t  broken_late;                /* sections whose grant was read after the OK of
                                           the BREAK that then ended them (not judged) */
    size_t  breaks;                     /* BREAKs answered OK */
    size_t  counts[CHECKER_KINDS];      /* violations per kind */
    size_t  violations;                 /* sum of counts */
    int64_t max_acquire_us;             /* longest first-LOCK-to-OK time, -1 if no section */
    int64_t max_acquire_at_us;          /* BEGIN of that section */
    long    max_acquire_pid;            /* its client */
    int64_t recovery_us;                /* slowest first grant after heal over the
                                           recovery names; -1 when not measured */
    int64_t max_gap_us;                 /* longest judged free gap while a client waited,
                                           -1 when none (or liveness not judged) */
    int64_t max_gap_at_us;              /* where that gap began */
    long    max_gap_pid;                /* its longest waiter */
    char    max_gap_name[CHECKER_NAME_MAX + 1]; /* its name */
    int64_t max_gap_skipped_us;         /* the same inside the fault windows (not
                                           judged), -1 when none */
    size_t  waits;                      /* waits (LOCKs with wait=) in the logs */
    size_t  set_grants;                 /* grants of sets (each also a section per name) */
    size_t  set_waits;                  /* waits of sets */
    size_t  set_liveness;               /* liveness findings on sets */
    int64_t max_set_gap_us;             /* longest judged time every name of a set was
                                           free while it waited, -1 when none */
    long    max_set_gap_pid;            /* its waiter */
    char    max_set_gap_name[CHECKER_NAME_MAX + 1]; /* the set, "P,Q" */
    int64_t max_set_wait_us;            /* longest judged wait of a set, -1 when none */
    long    max_set_wait_pid;           /* its waiter */
    char    max_set_wait_name[CHECKER_NAME_MAX + 1]; /* the set */
    struct checker_name_stat names[CHECKER_NAMES_MAX]; /* per name, in name order */
    size_t  nnames;                     /* entries in names */
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
 * Read operators' logs (break_client.c) into out (zeroed or freed
 * before), sorted by name and send.  Lines that break the grammar go to
 * report and *log_errors as for checker_load.  0, or -1.
 */
int checker_load_breaks(const char *const *paths, size_t n, struct checker_breaks *out,
                        FILE *report, size_t *log_errors);

void checker_free_breaks(struct checker_breaks *b);

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

/* What was seen of name, or NULL when it had no section (or too many names). */
const struct checker_name_stat *checker_name(const struct checker_result *r, const char *name);

/* Count and print a violation that the orchestrator found itself. */
__attribute__((format(printf, 3, 4)))
void checker_add_external(struct checker_result *r, FILE *report, const char *fmt, ...);

#endif /* REDLOCKD_TESTS_FAULTS_CHECKER_H */
