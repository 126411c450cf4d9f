/*
 * notify.h: the service manager's side of the daemon (systemd).
 *
 * Built on libsystemd (sd_notify(3), sd_watchdog_enabled(3),
 * sd_listen_fds(3)) when pkg-config finds it at build time
 * (HAVE_LIBSYSTEMD); without it every function is a no-op and
 * notify_listen_fds() finds no socket, so the daemon runs the same
 * outside systemd.  Nothing here is needed for correctness: a failed
 * notification is ignored, as sd_notify's callers are told to.
 */
#ifndef REDLOCKD_NOTIFY_H
#define REDLOCKD_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>

struct event_base;

/* A status line for STATUS=, built by the caller (server.c). */
typedef void (*notify_status_fn)(char *buf, size_t size);

/*
 * Start: when the unit has WatchdogSec= (WATCHDOG_USEC for this pid),
 * send WATCHDOG=1 from the event loop every half interval, so that a
 * stuck loop is restarted; every 2 s (or with each ping) refresh
 * STATUS= from status().  Out of memory aborts (daemon/xmalloc.h).
 */
void notify_start(struct event_base *base, notify_status_fn status);

/* READY=1 with the current STATUS= (start-up done, or a reload done). */
void notify_ready(void);

/* RELOADING=1: a SIGHUP reload began (answer with notify_ready()). */
void notify_reloading(void);

/* STOPPING=1: shutdown began. */
void notify_stopping(void);

/* Free the timers (at exit). */
void notify_stop(void);

/*
 * Sockets passed by socket activation (LISTEN_FDS for this pid), from
 * fd 3 on.  Returns how many (0 when none or without libsystemd); the
 * environment variables are unset so that children do not see them.
 */
int notify_listen_fds(void);

/*
 * The name systemd gave inherited descriptor i (0-based; FileDescriptorName=
 * in the .socket unit, LISTEN_FDNAMES), or "" when it has none.  Valid
 * after notify_listen_fds().
 */
const char *notify_listen_fd_name(int i);

/* The first inherited descriptor (SD_LISTEN_FDS_START, 3). */
#define NOTIFY_LISTEN_FDS_START 3

/*
 * True when inherited descriptor fd is a listening stream socket of the
 * family (AF_UNIX, AF_INET or AF_INET6).
 */
bool notify_fd_is_listener(int fd, int family);

/* True when libsystemd was compiled in. */
bool notify_available(void);

#endif /* REDLOCKD_NOTIFY_H */
