/*
 * fdbudget.h: how many client slots the descriptor limit leaves.
 *
 * Every client holds one descriptor from accept to close.  The daemon
 * needs others besides: stdin, stdout and stderr, libevent's epoll,
 * timer and signal descriptors (FDBUDGET_BASE), two links per master
 * (commands and the subscriber), one per listening socket, up to
 * metrics.max_connections for /metrics, a few opened for a moment
 * (FDBUDGET_TRANSIENT) and the spare kept for refusing
 * (FDBUDGET_SPARE).  What RLIMIT_NOFILE leaves after them is the most
 * clients that can be accepted; the client slots in effect are the
 * smaller of that and limits.max_clients (daemon/admit.h counts them).
 * A pure computation: daemon/listener.c reads the limit at start and at
 * every reload and hands the result to daemon/admit.c.  Beside it,
 * fdbudget_open() counts the descriptors open now, for /metrics
 * (daemon/report.c), where an alert compares them with the limit.
 *
 * The constants were measured in /proc/<pid>/fd of a running daemon
 * with 1 to 15 masters: 0-2, an epoll, a timerfd and libevent's signal
 * pipe (two ends), then the listeners and two sockets per master.
 */
#ifndef REDLOCKD_FDBUDGET_H
#define REDLOCKD_FDBUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FDBUDGET_BASE       7   /* stdin, stdout, stderr, epoll, timerfd, signal pipe (2) */
#define FDBUDGET_PER_MASTER 2   /* a master's command link and its subscriber */
#define FDBUDGET_TRANSIENT  8   /* open for a moment: the config, certificate and CRL
                                   files on reload, /etc/localtime, a master's name
                                   resolved (a socket and files), sd_notify's socket,
                                   a master's link while it reconnects */
#define FDBUDGET_SPARE      1   /* the spare descriptor kept for refusing */
#define FDBUDGET_UNLIMITED  UINT64_MAX  /* a limit of RLIM_INFINITY */

/* What the daemon holds descriptors for besides its clients. */
struct fdbudget_need {
    size_t nmasters;        /* masters in the configuration */
    size_t listeners;       /* listening sockets: ours, systemd's and /metrics' */
    size_t metrics_conns;   /* metrics.max_connections; 0 when /metrics is off */
};

/*
 * Descriptors the daemon needs besides its clients: FDBUDGET_BASE,
 * FDBUDGET_PER_MASTER per master, one per listener, the /metrics
 * connections, FDBUDGET_TRANSIENT and FDBUDGET_SPARE.
 */
size_t fdbudget_other(const struct fdbudget_need *need);

/*
 * Client slots in effect under a descriptor limit (RLIMIT_NOFILE's soft
 * value; FDBUDGET_UNLIMITED when none): the smaller of max_clients and
 * limit - fdbudget_other(need), and at least 1 (a limit that leaves
 * nothing still lets one client try; the spare refuses the rest).
 * max_clients 0 counts as 1.
 */
size_t fdbudget_slots(uint64_t limit, size_t max_clients, const struct fdbudget_need *need);

/*
 * Of slots, the ones TCP and TLS connections may take: slots minus
 * reserved when a Unix socket listens (unix_listens), the reserve cut
 * to slots - 1 so that one is always left; all of them otherwise.
 */
size_t fdbudget_net_slots(size_t slots, size_t reserved, bool unix_listens);

/*
 * Descriptors this process has open now: the entries of /proc/self/fd,
 * less the one the listing itself takes (a read that costs time in
 * proportion to them: /metrics reads it once per scrape, STATS never).
 * Returns limit (the soft RLIMIT_NOFILE as read at start or reload) when
 * the listing found no descriptor left to open (EMFILE, ENFILE): then
 * every one is taken; -1 when /proc/self/fd cannot be read otherwise
 * (no /proc), errno set.
 */
int64_t fdbudget_open(int64_t limit);

#endif /* REDLOCKD_FDBUDGET_H */
