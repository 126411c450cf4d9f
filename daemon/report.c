/*
 * report.c: the counter table that STATS and /metrics render
 * (daemon/report.h), and the formatting both share.
 */
#include <stdio.h>

#include "daemon/admit.h"
#include "daemon/authlimit.h"
#include "daemon/lock.h"
#include "daemon/master.h"
#include "daemon/readq.h"
#include "daemon/redlock.h"
#include "daemon/report.h"
#include "daemon/stats.h"
#include "daemon/util.h"

/*
 * The daemon's values, in the order STATS lists them.  Each row is
 *
 *   ROW(stat, family, label, label_value, type, unit, value, help)
 *
 * stat         the STATS name, a C identifier (it also names the reader)
 * family       the metrics family, or NULL when the value is in STATS only
 * label        the label that tells the family's rows apart, or NULL when
 *              the family is this one row; label_value its value
 * type         COUNTER, GAUGE or HISTOGRAM (enum report_type)
 * unit         NUMBER, MS or US (enum report_unit)
 * value        an expression of the counters (stats) and of the snapshot
 *              (snap, a const struct report_snap *): the value now; 0 for
 *              the histogram, whose buckets report_latency() reads
 * help         the family's HELP text on its first row, NULL on the others
 *
 * A family's rows follow each other.  The STATS names and the metrics
 * families, types and HELP texts are promised by proto/PROTOCOL.md
 * (STATS) and README.md (Metrics): renaming one breaks clients and
 * dashboards.  tests/check_metrics.c checks the rules above.
 */
#define REPORT_ROWS(ROW)                                                                           \
    ROW(uptime_ms, "redlockd_uptime_seconds", NULL, NULL, GAUGE, MS,                               \
        snap->now_us - stats.start_us, "Time since the daemon started.")                           \
    ROW(connections, "redlockd_connections", NULL, NULL, GAUGE, NUMBER,                            \
        stats.connections, "Client connections open now.")                                         \
    ROW(client_slots, "redlockd_client_slots", NULL, NULL, GAUGE, NUMBER, stats.client_slots,      \
        "Client slots in effect: limits.max_clients, or fewer when the descriptor limit "         \
        "(RLIMIT_NOFILE, read at start and reload) leaves fewer.")                                \
    ROW(descriptor_limit, "redlockd_descriptor_limit", NULL, NULL, GAUGE, NUMBER,                 \
        stats.descriptor_limit,                                                                    \
        "The descriptor limit (RLIMIT_NOFILE's soft value, read at start and reload); "           \
        "0 when there is none.")                                                                   \
    ROW(connections_total, "redlockd_connections_accepted_total", NULL, NULL, COUNTER, NUMBER,     \
        stats.connections_total, "Client connections accepted.")                                   \
    ROW(unauthenticated, "redlockd_connections_unauthenticated", NULL, NULL, GAUGE, NUMBER,        \
        admit_unauthenticated(),                                                                   \
        "TCP and TLS connections open now still in the TLS handshake or before AUTH.")             \
    ROW(unauthenticated_evicted, "redlockd_connections_evicted_total", NULL, NULL, COUNTER,        \
        NUMBER, admit_evicted(),                                                                   \
        "Connections before AUTH closed to make room for a newer one (limits.max_unauthenticated).") \
    ROW(rejected_clients, "redlockd_connections_rejected_total", NULL, NULL, COUNTER, NUMBER,      \
        stats.rejected_clients,                                                                    \
        "Client connections refused by a connection limit (limits.max_clients and the others).")   \
    ROW(rejected_descriptors, "redlockd_connections_rejected_descriptors_total", NULL, NULL,      \
        COUNTER, NUMBER, stats.rejected_descriptors,                                              \
        "Connections refused for the descriptor limit: past the client slots it leaves, or "      \
        "accepted on the spare descriptor when out of descriptors.")                              \
    ROW(accept_failures, "redlockd_accept_failures_total", NULL, NULL, COUNTER, NUMBER,            \
        stats.accept_failures,                                                                    \
        "accept() failures; out of descriptors, the waiting connections are refused from a "      \
        "spare descriptor (accepting pauses 100 ms only when there is none).")  \
    ROW(auth_failures, "redlockd_auth_failures_total", NULL, NULL, COUNTER, NUMBER,                \
        stats.auth_failures, "AUTH requests with a wrong password.")                               \
    ROW(auth_held, "redlockd_auth_held_total", NULL, NULL, COUNTER, NUMBER,                        \
        stats.auth_held,                                                                           \
        "AUTH requests that waited for their turn to be checked (wrong passwords used the tokens).") \
    ROW(auth_waiting, "redlockd_auth_waiting", NULL, NULL, GAUGE, NUMBER,                          \
        authlimit_waiting(), "AUTH requests waiting now for their turn to be checked.")            \
    ROW(tls_handshake_failures, "redlockd_tls_handshake_failures_total", NULL, NULL, COUNTER,      \
        NUMBER, stats.tls_handshake_failures,                                                      \
        "TLS client connections whose handshake failed or timed out.")                             \
    ROW(clients_timed_out, "redlockd_clients_timed_out_total", NULL, NULL, COUNTER, NUMBER,        \
        stats.clients_timed_out,                                                                   \
        "Connections closed because a line was not completed in time.")                            \
    ROW(clients_closed_output, "redlockd_clients_closed_output_total", NULL, NULL, COUNTER,        \
        NUMBER, stats.clients_closed_output,                                                       \
        "Connections closed because they did not read their replies.")                             \
    ROW(metrics_rejected, "redlockd_metrics_rejected_total", NULL, NULL, COUNTER, NUMBER,          \
        stats.metrics_rejected,                                                                    \
        "/metrics connections refused because of metrics.max_connections.")                       \
    ROW(metrics_evicted, "redlockd_metrics_evicted_total", NULL, NULL, COUNTER, NUMBER,            \
        stats.metrics_evicted,                                                                     \
        "Slow /metrics connections closed to make room for new ones.")                            \
    ROW(metrics_timed_out, "redlockd_metrics_timed_out_total", NULL, NULL, COUNTER, NUMBER,        \
        stats.metrics_timed_out,                                                                   \
        "/metrics connections closed because a request was not answered within "                   \
        "metrics.request_timeout_ms.")                                                             \
    ROW(metrics_connections, "redlockd_metrics_connections", NULL, NULL, GAUGE, NUMBER,            \
        stats.metrics_connections,                                                                 \
        "/metrics connections open now that count against metrics.max_connections.")              \
    ROW(labels_truncated, "redlockd_labels_truncated_total", NULL, NULL, COUNTER, NUMBER,          \
        stats.labels_truncated, "Default holder labels cut to 64 bytes.")                          \
    ROW(locks_held, "redlockd_locks_held", NULL, NULL, GAUGE, NUMBER, lock_count_held(),           \
        "Session-mode locks held now by this daemon's sessions (lease-mode locks "                 \
        "live on the masters only and are not counted).")                                          \
    ROW(waiters, "redlockd_waiters", NULL, NULL, GAUGE, NUMBER, lock_count_waiters(),              \
        "LOCK requests waiting now.")                                                              \
    ROW(watches, "redlockd_watches_total", NULL, NULL, COUNTER, NUMBER, stats.watches,             \
        "WATCH requests accepted.")                                                                \
    ROW(watching, "redlockd_watching", NULL, NULL, GAUGE, NUMBER, stats.watching,                  \
        "WATCHes open now.")                                                                       \
    ROW(reads_refused, "redlockd_reads_refused_total", NULL, NULL, COUNTER, NUMBER,                \
        stats.reads_refused, "STATUS and WATCH refused over limits.reads_per_second.")            \
    ROW(reads_in_flight, "redlockd_reads_in_flight", NULL, NULL, GAUGE, NUMBER, readq_in_flight(), \
        "Reads of the masters (STATUS, WATCHed names) in flight now, at most "                    \
        "limits.max_reads_in_flight.")                                                             \
    ROW(reads_waiting, "redlockd_reads_waiting", NULL, NULL, GAUGE, NUMBER, readq_waiting(),      \
        "Reads waiting now for their session's turn and a slot of limits.max_reads_in_flight.")   \
    ROW(reads_waited, "redlockd_reads_waited_total", NULL, NULL, COUNTER, NUMBER,                  \
        stats.reads_waited, "Reads that waited for their turn before they were made.")             \
    ROW(read_wait_us, "redlockd_read_wait_seconds_total", NULL, NULL, COUNTER, US,                 \
        stats.read_wait_us, "Time those reads waited for their turn, summed.")                     \
    ROW(reads_timed_out, "redlockd_reads_timed_out_total", NULL, NULL, COUNTER, NUMBER,            \
        stats.reads_timed_out, "STATUS answered ERR LIMIT: no turn within limits.read_wait_ms.")  \
    ROW(queue_renew_depth, "redlockd_master_queue_depth", "class", "renew", GAUGE, NUMBER,\
        snap->queue[MASTER_CLASS_RENEW].depth, "Requests waiting in the daemon to be written to a master (every master), by class: renew (renewals, releases), lock (acquires, EXTEND, hand-overs), read (STATUS, WATCH).") \
    ROW(queue_lock_depth, "redlockd_master_queue_depth", "class", "lock", GAUGE, NUMBER,\
        snap->queue[MASTER_CLASS_LOCK].depth, NULL) \
    ROW(queue_read_depth, "redlockd_master_queue_depth", "class", "read", GAUGE, NUMBER,\
        snap->queue[MASTER_CLASS_READ].depth, NULL) \
    ROW(queue_renew_written, "redlockd_master_queue_written_total", "class", "renew", COUNTER, NUMBER,\
        snap->queue[MASTER_CLASS_RENEW].written, "Requests written to a master after waiting in the daemon's queue, by class.") \
    ROW(queue_lock_written, "redlockd_master_queue_written_total", "class", "lock", COUNTER, NUMBER,\
        snap->queue[MASTER_CLASS_LOCK].written, NULL) \
    ROW(queue_read_written, "redlockd_master_queue_written_total", "class", "read", COUNTER, NUMBER,\
        snap->queue[MASTER_CLASS_READ].written, NULL) \
    ROW(queue_renew_wait_us, "redlockd_master_queue_wait_seconds_total", "class", "renew", COUNTER, US,\
        snap->queue[MASTER_CLASS_RENEW].wait_us, "Time requests waited in the daemon's queue before they were written, summed, by class.") \
    ROW(queue_lock_wait_us, "redlockd_master_queue_wait_seconds_total", "class", "lock", COUNTER, US,\
        snap->queue[MASTER_CLASS_LOCK].wait_us, NULL) \
    ROW(queue_read_wait_us, "redlockd_master_queue_wait_seconds_total", "class", "read", COUNTER, US,\
        snap->queue[MASTER_CLASS_READ].wait_us, NULL) \
    ROW(queue_renew_expired, "redlockd_master_queue_expired_total", "class", "renew", COUNTER, NUMBER,\
        snap->queue[MASTER_CLASS_RENEW].expired, "Requests dropped unwritten: still in the daemon's queue at their round's deadline, or once their round was decided, by class.") \
    ROW(queue_lock_expired, "redlockd_master_queue_expired_total", "class", "lock", COUNTER, NUMBER,\
        snap->queue[MASTER_CLASS_LOCK].expired, NULL) \
    ROW(queue_read_expired, "redlockd_master_queue_expired_total", "class", "read", COUNTER, NUMBER,\
        snap->queue[MASTER_CLASS_READ].expired, NULL) \
    ROW(list_steps, "redlockd_list_steps_total", NULL, NULL, COUNTER, NUMBER, stats.list_steps,    \
        "LIST steps made (each lists up to 1024 names).")                                          \
    ROW(list_entries_visited, "redlockd_list_entries_visited_total", NULL, NULL, COUNTER,          \
        NUMBER, stats.list_visited,                                                                \
        "Lock table entries LIST's steps looked at (about one per name listed).")                  \
    ROW(acquire_ok, "redlockd_acquisitions_total", "outcome", "ok", COUNTER, NUMBER,               \
        stats.acquire_ok,                                                                          \
        "LOCK and TRYLOCK requests by answer: ok (granted by the masters), "                       \
        "reentered, busy, timeout, noquorum.")                                                     \
    ROW(acquire_reentered, "redlockd_acquisitions_total", "outcome", "reentered", COUNTER,         \
        NUMBER, stats.acquire_reentered, NULL)                                                     \
    ROW(acquire_busy, "redlockd_acquisitions_total", "outcome", "busy", COUNTER, NUMBER,           \
        stats.acquire_busy, NULL)                                                                  \
    ROW(acquire_timeout, "redlockd_acquisitions_total", "outcome", "timeout", COUNTER, NUMBER,     \
        stats.acquire_timeout, NULL)                                                               \
    ROW(acquire_noquorum, "redlockd_acquisitions_total", "outcome", "noquorum", COUNTER,           \
        NUMBER, stats.acquire_noquorum, NULL)                                                      \
    ROW(releases, "redlockd_releases_total", NULL, NULL, COUNTER, NUMBER, stats.releases,          \
        "Locks released on the masters (hand-overs included).")                                    \
    ROW(handovers, "redlockd_handovers_total", NULL, NULL, COUNTER, NUMBER, stats.handovers,       \
        "Locks handed straight to the next waiting session of this daemon.")                       \
    ROW(yields, "redlockd_yields_total", NULL, NULL, COUNTER, NUMBER, stats.yields,                \
        "Releases announced instead of a hand-over, to let other daemons in.")                     \
    ROW(breaks, "redlockd_breaks_total", NULL, NULL, COUNTER, NUMBER, stats.breaks,                \
        "BREAKs that ended a lock.")                                                               \
    ROW(renewals_ok, "redlockd_renewals_total", "result", "ok", COUNTER, NUMBER,                   \
        stats.renewals_ok,                                                                         \
        "Lease renewals by the watchdog: ok (confirmed by a quorum) or failed.")                   \
    ROW(renewals_failed, "redlockd_renewals_total", "result", "failed", COUNTER, NUMBER,           \
        stats.renewals_failed, NULL)                                                               \
    ROW(keys_restored, "redlockd_keys_restored_total", NULL, NULL, COUNTER, NUMBER,                \
        stats.keys_restored,                                                                       \
        "Lock keys put back on a master that had lost them, while a quorum held "                  \
        "the lease.")                                                                              \
    /* In /metrics the sum of redlockd_locks_lost_total's reasons. */                              \
    ROW(locks_lost, NULL, NULL, NULL, COUNTER, NUMBER, stats.locks_lost, NULL)                     \
    ROW(locks_lost_renew, "redlockd_locks_lost_total", "reason", "renew", COUNTER, NUMBER,         \
        stats.locks_lost_renew, "! LOST lines sent, by reason.")                                   \
    ROW(locks_lost_quorum, "redlockd_locks_lost_total", "reason", "quorum", COUNTER, NUMBER,       \
        stats.locks_lost_quorum, NULL)                                                             \
    ROW(locks_lost_gone, "redlockd_locks_lost_total", "reason", "gone", COUNTER, NUMBER,           \
        stats.locks_lost_gone, NULL)                                                               \
    ROW(locks_lost_shutdown, "redlockd_locks_lost_total", "reason", "shutdown", COUNTER,           \
        NUMBER, stats.locks_lost_shutdown, NULL)                                                   \
    ROW(locks_lost_broken, "redlockd_locks_lost_total", "reason", "broken", COUNTER, NUMBER,       \
        stats.locks_lost_broken, NULL)                                                             \
    ROW(fenced_grants, "redlockd_fenced_grants_total", NULL, NULL, COUNTER, NUMBER,                \
        stats.fenced_grants, "Grants that carried a fencing token.")                               \
    ROW(shared_grants, "redlockd_shared_grants_total", NULL, NULL, COUNTER, NUMBER,                \
        stats.shared_grants, "Grants of a shared hold.")                                           \
    ROW(counted_grants, "redlockd_counted_grants_total", NULL, NULL, COUNTER, NUMBER,              \
        stats.counted_grants, "Grants of a permit of a counted name (limit=N).")                   \
    ROW(set_grants, "redlockd_set_grants_total", NULL, NULL, COUNTER, NUMBER,                      \
        stats.set_grants, "Grants of a set of several names, held all at once.")                   \
    ROW(kind_refusals, "redlockd_kind_refusals_total", NULL, NULL, COUNTER, NUMBER,                \
        stats.kind_refusals,                                                                       \
        "LOCKs refused with ERR KIND: the name is held or waited for as another kind.")            \
    ROW(lease_grants, "redlockd_grants_total", "mode", "lease", COUNTER, NUMBER,                   \
        stats.lease_grants,                                                                        \
        "Grants by the masters by mode: session (bound to the connection) "                        \
        "or lease (mode=lease, a token).")                                                         \
    ROW(session_grants, "redlockd_grants_total", "mode", "session", COUNTER, NUMBER,               \
        stats.acquire_ok - stats.lease_grants, NULL)                                               \
    ROW(extends_ok, "redlockd_extends_total", "result", "ok", COUNTER, NUMBER,                     \
        stats.extends_ok, "EXTEND requests by answer.")                                            \
    ROW(extends_notheld, "redlockd_extends_total", "result", "notheld", COUNTER, NUMBER,           \
        stats.extends_notheld, NULL)                                                               \
    ROW(check_current, "redlockd_checks_total", "result", "current", COUNTER, NUMBER,              \
        stats.check_current, "CHECK requests answered CURRENT or STALE, by answer.")              \
    ROW(check_stale, "redlockd_checks_total", "result", "stale", COUNTER, NUMBER,                  \
        stats.check_stale, NULL)                                                                   \
    ROW(subscriptions, "redlockd_subscriptions", NULL, NULL, GAUGE, NUMBER,                        \
        redlock_subscriptions(),                                                                   \
        "Names' channels subscribed now (queued waiters' and watchers').")                       \
    ROW(pubsub_wakeups, "redlockd_pubsub_wakeups_total", NULL, NULL, COUNTER, NUMBER,              \
        stats.pubsub_wakeups, "Waiters woken by a release announcement.")                          \
    ROW(fallback_retries, "redlockd_fallback_retries_total", NULL, NULL, COUNTER, NUMBER,          \
        stats.fallback_retries,                                                                    \
        "Retries timed by the holder's remaining ttl (no announcement came).")                     \
    /* STATS: acquire_latency_ms_le_<ms>, _ms_le_inf, _count, _sum_us. */                          \
    ROW(acquire_latency, "redlockd_acquire_latency_seconds", NULL, NULL, HISTOGRAM, NUMBER, 0,     \
        "Time from taking up a LOCK or TRYLOCK to its answer, for the answers "                    \
        "counted by redlockd_acquisitions_total.")                                                 \
    ROW(masters, "redlockd_masters", NULL, NULL, GAUGE, NUMBER, snap->masters,                     \
        "Masters configured.")                                                                     \
    ROW(quorum, "redlockd_quorum", NULL, NULL, GAUGE, NUMBER, redlock_quorum(snap->masters),       \
        "Masters needed for a quorum.")                                                            \
    ROW(masters_up, "redlockd_masters_up", NULL, NULL, GAUGE, NUMBER, snap->sum.up,                \
        "Masters connected now.")                                                                  \
    ROW(masters_quarantined, "redlockd_masters_quarantined", NULL, NULL, GAUGE, NUMBER,            \
        snap->sum.quarantined, "Masters in restart or clock quarantine now.")                               \
    ROW(masters_duplicate, "redlockd_masters_duplicate", NULL, NULL, GAUGE, NUMBER,                \
        snap->sum.duplicate,                                                                       \
        "Masters up now that are the same server as one listed before them "                       \
        "(same run_id; their answers do not count).")                                              \
    ROW(masters_evicting, "redlockd_masters_evicting", NULL, NULL, GAUGE, NUMBER,                  \
        snap->sum.evicting,                                                                        \
        "Masters whose last connect found maxmemory set with a policy other "                      \
        "than noeviction.")                                                                        \
    ROW(masters_layout_refused, "redlockd_masters_layout_refused", NULL, NULL, GAUGE, NUMBER,      \
        snap->sum.layout_refused,                                                                  \
        "Masters up now whose layout registry does not let their answers count (a daemon "         \
        "this one cannot serve beside, or not read in the last 3 s).")                             \
    ROW(masters_counted, "redlockd_masters_counted", NULL, NULL, GAUGE, NUMBER,                    \
        snap->sum.counted,                                                                         \
        "Masters whose answers count now: up, not quarantined, not a duplicate, counted "          \
        "by the layout registry.")

/*
 * The values of each master, in the order of its STATS lines:
 *
 *   ROW(id, stat, family, type, unit, value, help)
 *
 * id           a C identifier for the reader
 * stat         the name in STATS after "master.<i>.", or NULL when the
 *              value is in /metrics only
 * family       the metrics family, or NULL when the value is in STATS only
 * value        an expression of m, the master's const struct master_stats *
 *
 * and the rest as in REPORT_ROWS.  STATS shows master.<i>.addr before
 * them; in /metrics the address is the label addr of every sample.
 */
#define REPORT_MASTER_ROWS(ROW)                                                                    \
    ROW(up, "up", "redlockd_master_up", GAUGE, NUMBER, m->state == MASTER_UP,                      \
        "1 when the command connection to the master is up (handshake done).")                     \
    ROW(subscriber_up, "subscriber_up", "redlockd_master_subscriber_up", GAUGE, NUMBER,            \
        m->sub_up, "1 when the subscriber connection to the master is up.")                        \
    ROW(rtt, "rtt_us", "redlockd_master_last_rtt_seconds", GAUGE, US, m->rtt_us,                   \
        "Round trip of the last request to the master; NaN before the first.")                     \
    ROW(requests, "requests", "redlockd_master_requests_total", COUNTER, NUMBER,                   \
        m->requests, "Requests sent to the master.")                                               \
    ROW(errors, "errors", "redlockd_master_errors_total", COUNTER, NUMBER, m->errors,              \
        "Requests to the master that could not be sent, lost their connection "                    \
        "or got an error reply (timeouts are not counted).")                                       \
    ROW(reconnects, "reconnects", "redlockd_master_reconnects_total", COUNTER, NUMBER,             \
        m->reconnects, "Connections to the master made after the first.")                          \
    ROW(restarts, "restarts", "redlockd_master_restarts_total", COUNTER, NUMBER,                   \
        m->restarts, "Restarts of the master seen on reconnect (a new run_id).")                   \
    ROW(tls_failures, "tls_failures", "redlockd_master_tls_failures_total", COUNTER, NUMBER,       \
        m->tls_failures, "TLS handshakes with the master (rediss://) that failed: an unknown "      \
        "CA, a wrong name, an expired certificate, a server that does not speak TLS.")             \
    ROW(clock_steps, "clock_steps", "redlockd_master_clock_steps_total", COUNTER, NUMBER,          \
        m->clock_steps, "Steps of the master's clock seen against the daemon's monotonic "          \
        "clock, larger than the drift allows (lock.clock_check).")                                 \
    ROW(clock_readings, "clock_readings", "redlockd_master_clock_readings_total", COUNTER,         \
        NUMBER, m->clock_readings,                                                                 \
        "Readings of the master's clock taken for the clock check (the TIME that comes with "      \
        "every answer; with lock.clock_check, a TIME when none came for a second).")               \
    ROW(quarantine_left, "quarantine_ms", "redlockd_master_quarantine_remaining_seconds",          \
        GAUGE, MS, m->quarantine_ms * 1000,                                                        \
        "Restart or clock quarantine left; 0 when the master's answers count.")                    \
    ROW(quarantined, NULL, "redlockd_master_quarantined", GAUGE, NUMBER,                           \
        m->quarantine_ms > 0,                                                                      \
        "1 while the master is in restart or clock quarantine (its answers do not count).")        \
    ROW(duplicate_of, "duplicate_of", NULL, GAUGE, NUMBER, m->duplicate_of, NULL)                  \
    ROW(duplicate, NULL, "redlockd_master_duplicate", GAUGE, NUMBER, m->duplicate_of >= 0,         \
        "1 while the master is the same server (run_id) as one listed before "                     \
        "it (its answers do not count).")                                                          \
    ROW(evicting_policy, "evicting_policy", "redlockd_master_evicting_policy", GAUGE, NUMBER,      \
        m->evicting,                                                                               \
        "1 when the master's last connect found maxmemory set with a "                             \
        "maxmemory-policy other than noeviction (lock keys may be evicted).")                      \
    ROW(layout_counted, "layout_counted", "redlockd_master_layout_counted", GAUGE, NUMBER,         \
        m->layout_counts,                                                                          \
        "1 while the master's layout registry, read in the last 3 s, shows no daemon "             \
        "that this one cannot serve beside (else its answers do not count).")                     \
    ROW(layout_refusals, "layout_refusals", "redlockd_master_layout_refusals_total", COUNTER,      \
        NUMBER, m->layout.refusals,                                                                \
        "Reads of the master's layout registry that showed a daemon this one cannot serve "        \
        "beside.")                                                                                 \
    ROW(daemons_seen, "daemons_seen", "redlockd_master_daemons_seen", GAUGE, NUMBER,               \
        m->layout.daemons,                                                                         \
        "Daemons in the master's layout registry (this one too) whose window has not passed.")     \
    ROW(legacy_seen, "legacy_seen", "redlockd_master_legacy_daemons_seen", GAUGE, NUMBER,          \
        m->layout.legacy,                                                                          \
        "1 while the registry holds daemons older than the registry (release 0.1.0).")             \
    ROW(layout_lowest, "layout_lowest", "redlockd_master_layout_lowest", GAUGE, NUMBER,            \
        m->layout.lowest, "The oldest layout among the daemons in the registry.")                  \
    ROW(layout_highest, "layout_highest", "redlockd_master_layout_highest", GAUGE, NUMBER,         \
        m->layout.highest, "The newest layout among the daemons in the registry.")

/* One reader per row: report_read_<stat>. */
#define REPORT_READER(stat, family, label, label_value, type, unit, value, help)                   \
    static int64_t                                                                                 \
    report_read_##stat(const struct report_snap *snap)                                             \
    {                                                                                              \
        (void)snap;                                                                                \
        return (int64_t)(value);                                                                   \
    }
REPORT_ROWS(REPORT_READER)
#undef REPORT_READER

/* One reader per master row: report_read_master_<id>. */
#define REPORT_MASTER_READER(id, stat, family, type, unit, value, help)                            \
    static int64_t                                                                                 \
    report_read_master_##id(const struct report_snap *snap)                                        \
    {                                                                                              \
        const struct master_stats *m = snap->master;                                               \
                                                                                                   \
        return (int64_t)(value);                                                                   \
    }
REPORT_MASTER_ROWS(REPORT_MASTER_READER)
#undef REPORT_MASTER_READER

#define REPORT_ENTRY(stat, family, label, label_value, type, unit, value, help)                    \
    { #stat, family, label, label_value, REPORT_##type, REPORT_##unit, help,                       \
      report_read_##stat },
const struct report_row report_rows[] = { REPORT_ROWS(REPORT_ENTRY) };
const size_t report_nrows = sizeof(report_rows) / sizeof(report_rows[0]);
#undef REPORT_ENTRY

#define REPORT_MASTER_ENTRY(id, stat, family, type, unit, value, help)                             \
    { stat, family, NULL, NULL, REPORT_##type, REPORT_##unit, help,                                \
      report_read_master_##id },
const struct report_row report_master_rows[] = { REPORT_MASTER_ROWS(REPORT_MASTER_ENTRY) };
const size_t report_master_nrows = sizeof(report_master_rows) / sizeof(report_master_rows[0]);
#undef REPORT_MASTER_ENTRY

void
report_snapshot(struct report_snap *snap)
{
    int c;

    snap->now_us = util_now_us();
    snap->masters = master_count();
    master_tally(&snap->sum);
    snap->master = NULL;
    for (c = 0; c < MASTER_CLASSES; c++) {
        master_queue_stats((enum master_class)c, &snap->queue[c].depth, &snap->queue[c].written,
                           &snap->queue[c].wait_us, &snap->queue[c].expired);
    }
}

void
report_latency(struct report_latency *h)
{
    uint64_t cum = 0;
    size_t i;

    for (i = 0; i <= STATS_LATENCY_NBOUNDS; i++) {
        cum += stats.acquire_latency[i];
        h->le[i] = cum;
    }
    h->sum_us = (int64_t)stats.acquire_latency_sum_us;
}

const char *
report_type_name(enum report_type type)
{
    switch (type) {
    case REPORT_COUNTER:
        return "counter";
    case REPORT_GAUGE:
        return "gauge";
    case REPORT_HISTOGRAM:
        return "histogram";
    }
    return "untyped";
}

void
report_stat_text(const struct report_row *row, const struct report_snap *snap,
                 char *buf, size_t size)
{
    int64_t v = row->read(snap);

    if (row->unit != REPORT_NUMBER && v < 0) {
        v = -1;
    } else if (row->unit == REPORT_MS) {
        v /= 1000;
    }
    snprintf(buf, size, "%lld", (long long)v);
}

void
report_metric_text(const struct report_row *row, const struct report_snap *snap,
                   char *buf, size_t size)
{
    int64_t v = row->read(snap);

    if (row->unit == REPORT_NUMBER) {
        snprintf(buf, size, "%lld", (long long)v);
    } else if (v < 0) {
        snprintf(buf, size, "NaN");
    } else {
        report_seconds_text(v, buf, size);
    }
}

void
report_seconds_text(int64_t us, char *buf, size_t size)
{
    snprintf(buf, size, "%lld.%06lld", (long long)(us / 1000000), (long long)(us % 1000000));
}
