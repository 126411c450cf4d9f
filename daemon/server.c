/*
 * server.c: start-up, signals, shutdown.
 */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <event2/event.h>

#include "conf/conf.h"
#include "daemon/listener.h"
#include "daemon/lock.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/metrics.h"
#include "daemon/redlock.h"
#include "daemon/round.h"
#include "daemon/server.h"
#include "daemon/session.h"
#include "daemon/stats.h"
#include "daemon/util.h"
#include "daemon/watchdog.h"

#define SERVER_DRAIN_MS     2000    /* longest wait for releases at shutdown */
#define SERVER_DRAIN_POLL   10      /* ms between drain checks */

struct stats stats;

static struct event_base *server_base;
static struct event      *server_drain;     /* shutdown drain check */
static int64_t            server_drain_end; /* monotonic us */
static bool               server_stopping;

static void
server_finish(void)
{
    session_close_all();
    master_stop();
    event_base_loopexit(server_base, NULL);
}

static void
server_drain_cb(evutil_socket_t fd, short what, void *arg)
{
    struct timeval tv = { 0, SERVER_DRAIN_POLL * 1000 };

    (void)fd;
    (void)what;
    (void)arg;
    /* Decided releases are done; replies a stalled master still owes are not waited for. */
    if (round_undecided() == 0 && session_all_flushed()) {
        log_info("shutdown: every lock released");
        server_finish();
        return;
    }
    if (util_now_us() >= server_drain_end) {
        log_warn("shutdown: gave up waiting after %d ms (%zu rounds open); "
                 "unreleased locks expire by their ttl", SERVER_DRAIN_MS, round_undecided());
        server_finish();
        return;
    }
    evtimer_add(server_drain, &tv);
}

static void
server_signal_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    if (sig == SIGHUP) {
        log_warn("SIGHUP: configuration reload is not supported yet; ignored");
        return;
    }
    if (server_stopping) {
        log_warn("second %s: exiting now", sig == SIGINT ? "SIGINT" : "SIGTERM");
        listener_stop();
        _exit(0);
    }
    server_stopping = true;
    log_info("%s: shutting down: releasing %zu locks", sig == SIGINT ? "SIGINT" : "SIGTERM",
             lock_count_held());
    lock_set_shutdown();
    listener_stop();
    session_shutdown_all();
    server_drain_end = util_now_us() + SERVER_DRAIN_MS * 1000;
    server_drain = evtimer_new(server_base, server_drain_cb, NULL);
    event_active(server_drain, EV_TIMEOUT, 0);
}

int
server_run(struct conf *conf)
{
    struct event_config *cfg;
    struct event *sigs[3];
    const int signums[3] = { SIGTERM, SIGINT, SIGHUP };
    int i, rc = 0;

    signal(SIGPIPE, SIG_IGN);
    stats.start_us = util_now_us();
    log_set_level((enum log_level)conf->log_level);

    cfg = event_config_new();
    if (cfg == NULL) {
        log_error("cannot create the event loop");
        return 1;
    }
    /* CLOCK_MONOTONIC without coarse ticks for every timer. */
    event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    server_base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (server_base == NULL) {
        log_error("cannot create the event loop");
        return 1;
    }

    redlock_init(conf->drift_factor);
    round_init(server_base, conf->node_timeout_ms);
    lock_init(server_base, conf);
    watchdog_init(server_base, conf->drift_factor);
    session_init(server_base, conf);
    if (listener_start(server_base, conf) != 0) {
        event_base_free(server_base);
        return 1;
    }
    if (metrics_start(server_base, conf) != 0) {
        listener_stop();
        event_base_free(server_base);
        return 1;
    }
    if (master_start(server_base, conf) != 0) {
        metrics_stop();
        listener_stop();
        event_base_free(server_base);
        return 1;
    }
    for (i = 0; i < 3; i++) {
        sigs[i] = evsignal_new(server_base, signums[i], server_signal_cb, NULL);
        evsignal_add(sigs[i], NULL);
    }
    log_info("redlockd %s ready: %zu masters, quorum %zu", REDLOCKD_VERSION,
             master_count(), redlock_quorum(master_count()));

    if (event_base_dispatch(server_base) < 0) {
        log_error("event loop failed");
        rc = 1;
    }

    for (i = 0; i < 3; i++) {
        event_free(sigs[i]);
    }
    if (server_drain != NULL) {
        event_free(server_drain);
    }
    listener_stop();
    metrics_stop();
    watchdog_stop();
    event_base_free(server_base);
    log_info("stopped");
    return rc;
}
