/*
 * notify.c: sd_notify, the systemd watchdog and socket activation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <event2/event.h>

#ifdef HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "daemon/log.h"
#include "daemon/notify.h"
#include "daemon/xmalloc.h"

#define NOTIFY_STATUS_MS    2000    /* STATUS= refresh without a watchdog */
#define NOTIFY_STATUS_MAX   256
#define NOTIFY_FDS_MAX      8       /* inherited sockets whose names are kept */
#define NOTIFY_FD_NAME_MAX  64      /* bytes of a name kept, with NUL */

static struct event     *notify_timer;      /* WATCHDOG=1 and STATUS= */
static notify_status_fn  notify_status;     /* builds STATUS= */
static char notify_fd_names[NOTIFY_FDS_MAX][NOTIFY_FD_NAME_MAX]; /* LISTEN_FDNAMES */
#ifdef HAVE_LIBSYSTEMD
static int64_t           notify_interval_ms;/* timer period */
#endif

bool
notify_available(void)
{
#ifdef HAVE_LIBSYSTEMD
    return true;
#else
    return false;
#endif
}

/* Send state (with STATUS= appended) to the service manager. */
static void
notify_send(const char *state)
{
#ifdef HAVE_LIBSYSTEMD
    char status[NOTIFY_STATUS_MAX], msg[NOTIFY_STATUS_MAX + 64];

    status[0] = '\0';
    if (notify_status != NULL) {
        notify_status(status, sizeof(status));
    }
    snprintf(msg, sizeof(msg), "%s%sSTATUS=%s", state, state[0] != '\0' ? "\n" : "",
             status);
    (void)sd_notify(0, msg);
#else
    (void)state;
#endif
}

#ifdef HAVE_LIBSYSTEMD
static void
notify_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    notify_send(notify_interval_ms < NOTIFY_STATUS_MS ? "WATCHDOG=1" : "");
}
#endif

void
notify_start(struct event_base *base, notify_status_fn status)
{
#ifdef HAVE_LIBSYSTEMD
    uint64_t usec = 0;
    struct timeval tv;

    notify_status = status;
    notify_interval_ms = NOTIFY_STATUS_MS;
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
        /* Half the interval, as sd_watchdog_enabled(3) advises. */
        notify_interval_ms = (int64_t)(usec / 2000);
        if (notify_interval_ms < 1) {
            notify_interval_ms = 1;
        }
        if (notify_interval_ms >= NOTIFY_STATUS_MS) {
            notify_interval_ms = NOTIFY_STATUS_MS - 1;
        }
        log_info("systemd watchdog: %llu ms, pinged every %lld ms",
                 (unsigned long long)(usec / 1000), (long long)notify_interval_ms);
    }
    if (getenv("NOTIFY_SOCKET") == NULL) {
        return;     /* not run by a service manager: nothing to refresh */
    }
    notify_timer = event_new(base, -1, EV_PERSIST, notify_timer_cb, NULL);
    if (notify_timer == NULL) {
        xmalloc_fail("the notify timer");
    }
    tv.tv_sec = (time_t)(notify_interval_ms / 1000);
    tv.tv_usec = (suseconds_t)((notify_interval_ms % 1000) * 1000);
    event_add(notify_timer, &tv);
#else
    (void)base;
    notify_status = status;
#endif
}

void
notify_ready(void)
{
    notify_send("READY=1");
}

void
notify_reloading(void)
{
    notify_send("RELOADING=1");
}

void
notify_stopping(void)
{
    notify_send("STOPPING=1");
}

void
notify_stop(void)
{
    if (notify_timer != NULL) {
        event_free(notify_timer);
        notify_timer = NULL;
    }
}

int
notify_listen_fds(void)
{
#ifdef HAVE_LIBSYSTEMD
    char **names = NULL;
    int i, n = sd_listen_fds_with_names(1, &names);

    if (n < 0) {
        log_warn("socket activation: LISTEN_FDS unusable (%d); binding our own", n);
        return 0;
    }
    for (i = 0; names != NULL && names[i] != NULL; i++) {
        if (i < NOTIFY_FDS_MAX) {
            snprintf(notify_fd_names[i], sizeof(notify_fd_names[i]), "%s", names[i]);
        }
        free(names[i]);
    }
    free(names);
    return n;
#else
    if (getenv("LISTEN_FDS") != NULL) {
        log_warn("LISTEN_FDS is set, but redlockd was built without libsystemd: "
                 "binding listen.tcp and listen.unix instead");
    }
    return 0;
#endif
}

bool
notify_fd_is_listener(int fd, int family)
{
#ifdef HAVE_LIBSYSTEMD
    if (family == AF_UNIX) {
        return sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) > 0;
    }
    return sd_is_socket(fd, family, SOCK_STREAM, 1) > 0;
#else
    (void)fd;
    (void)family;
    return false;
#endif
}

const char *
notify_listen_fd_name(int i)
{
    return i >= 0 && i < NOTIFY_FDS_MAX ? notify_fd_names[i] : "";
}
