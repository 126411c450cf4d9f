/*
 * report.h: the daemon's counters as one table, which STATS (the session
 * module) and GET /metrics (the metrics module) both render.
 *
 * A row names one value for both outputs: its STATS name, its metrics
 * family (with a label where the family groups several values, such as
 * redlockd_acquisitions_total{outcome="ok"}), its Prometheus type, the
 * family's HELP text and how the value is read.  A new counter is a
 * field in struct stats (daemon/stats.h) and one row in report.c; both
 * outputs show it from then on, in the table's order.
 *
 * The rows of a family follow each other and the first of them carries
 * the HELP.  Everything here is read from the event loop's thread.
 */
#ifndef REDLOCKD_REPORT_H
#define REDLOCKD_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/master.h"
#include "daemon/stats.h"

/* A value's kind, as Prometheus names it in # TYPE (report_type_name). */
enum report_type {
    REPORT_COUNTER,     /* only goes up; the family's name ends in _total */
    REPORT_GAUGE,       /* a level now: goes up and down */
    REPORT_HISTOGRAM,   /* the acquire latency histogram: no value of its own;
                           each output writes its buckets (report_latency) */
};

/* How a value is read and shown. */
enum report_unit {
    REPORT_NUMBER,      /* a count, a level or a flag: both show the number */
    REPORT_MS,          /* a duration read in us: STATS shows whole ms,
                           /metrics seconds; < 0 is not known (-1, NaN) */
    REPORT_US,          /* a duration read in us: STATS shows us, /metrics
                           seconds; < 0 is not known (-1, NaN) */
};

/*
 * What the values of one answer are read from, taken once when the
 * answer starts (report_snapshot) so that its rows agree.  Owned by the
 * caller, usually on its stack.
 */
struct report_snap {
    int64_t                    now_us;  /* util_now_us() at the snapshot */
    size_t                     masters; /* masters configured (master_count) */
    struct master_summary      sum;     /* the masters at a glance (master_tally) */
    const struct master_stats *master;  /* for the per-master rows: the master
                                           shown now; set by the caller */
    struct report_queue {
        uint64_t depth;                 /* requests waiting now, every master */
        uint64_t written;               /* written after waiting, since start */
        uint64_t wait_us;               /* those waits' sum, us */
        uint64_t expired;               /* failed unwritten at their deadline */
    } queue[MASTER_CLASSES];            /* the daemon's queues to the masters, by
                                           class (master_queue_stats) */
};

/* One value in both outputs.  The tables are constant, in report.c. */
struct report_row {
    const char       *stat;         /* STATS name (per master: the part after
                                       "master.<i>."), or NULL: only in /metrics */
    const char       *family;       /* metrics family, or NULL: only in STATS */
    const char       *label;        /* label name where the family has several
                                       rows ("outcome"), else NULL */
    const char       *label_value;  /* that label's value ("ok"), or NULL */
    enum report_type  type;         /* counter, gauge or histogram */
    enum report_unit  unit;         /* how the value is read and shown */
    const char       *help;         /* the family's HELP on its first row, NULL
                                       on the others; no backslash, no LF */
    int64_t         (*read)(const struct report_snap *snap); /* the value now
                                       (a counter is below 2^63); unused for
                                       a histogram */
};

/* The daemon's values, in STATS order; report_nrows of them. */
extern const struct report_row report_rows[];
extern const size_t report_nrows;

/*
 * The values of each master, in the order of its STATS lines
 * (master.<i>.<stat>, after master.<i>.addr); report_master_nrows of
 * them.  In /metrics each is a family of one sample per master, labelled
 * master (the index) and addr.  Their read() needs snap->master.
 */
extern const struct report_row report_master_rows[];
extern const size_t report_master_nrows;

/* The acquire latency histogram at one moment, cumulative as both outputs show it. */
struct report_latency {
    uint64_t le[STATS_LATENCY_NBOUNDS + 1]; /* answers within bound i (ms,
                                               stats_latency_bound_ms(i)); the
                                               last, +Inf, counts them all */
    int64_t  sum_us;                        /* the sum of their latencies, us */
};

/* Fill *snap for an answer starting now; snap->master is set to NULL. */
void report_snapshot(struct report_snap *snap);

/* Fill *h from the counters in daemon/stats.h. */
void report_latency(struct report_latency *h);

/* "counter", "gauge" or "histogram": a static string. */
const char *report_type_name(enum report_type type);

/*
 * Row's value as STATS shows it ("12", "-1"), NUL-terminated into buf
 * (size bytes; 24 hold any value).  Not for a histogram row.
 */
void report_stat_text(const struct report_row *row, const struct report_snap *snap,
                      char *buf, size_t size);

/*
 * Row's value as /metrics shows it: the number, seconds for a duration
 * (report_seconds_text), or "NaN" for a duration not known; into buf as
 * report_stat_text.  Not for a histogram row.
 */
void report_metric_text(const struct report_row *row, const struct report_snap *snap,
                        char *buf, size_t size);

/*
 * us microseconds (>= 0) as seconds, exactly, with six decimals
 * ("1.234567"), NUL-terminated into buf (size bytes; 32 hold any value).
 */
void report_seconds_text(int64_t us, char *buf, size_t size);

#endif /* REDLOCKD_REPORT_H */
