/*
 * server.c: start-up, signals, shutdown.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "conf/conf.h"
#include "daemon/channel.h"
#include "daemon/command.h"
#include "daemon/ctx.h"
#include "daemon/flush.h"
#include "daemon/health.h"
#include "daemon/layout.h"
#include "daemon/listener.h"
#include "daemon/lock.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/metrics.h"
#include "daemon/notify.h"
#include "daemon/reach.h"
#include "daemon/redlock.h"
#include "daemon/readq.h"
#include "daemon/round.h"
#include "daemon/server.h"
#include "daemon/session.h"
#include "daemon/stats.h"
#include "daemon/tls.h"
#include "daemon/util.h"
#include "daemon/watch.h"
#include "daemon/lease.h"
#include "daemon/xmalloc.h"

#define SERVER_DRAIN_MS     2000    /* longest wait for releases at shutdown */
#define SERVER_DRAIN_POLL   10      /* ms between drain checks */

static struct conf       *server_owned;     /* ctx.conf when a reload loaded it: ours to free */
static struct event      *server_drain;     /* shutdown drain check */
static int64_t            server_drain_end; /* monotonic us */
static bool               server_stopping;
static int64_t            server_max_ttl_ms;/* largest lock.max_ttl_ms applied since start */

/* True when a master is written rediss://. */
static bool
server_tls_masters(const struct conf *conf)
{
    size_t i;

    for (i = 0; i < conf->nmasters; i++) {
        if (conf->masters[i].tls) {
            return true;
        }
    }
    return false;
}

static void
server_finish(void)
{
    static const struct timeval one_more = { 0, 0 };

    session_close_all();
    master_stop();
    master_eval_stop();
    channel_stop();
    /*
     * One more turn of the loop before it ends: a closed connection's
     * deferred callbacks (the next turn's work) hold a reference to its
     * bufferevent, which is freed only once they have run.
     */
    event_base_loopexit(ctx.base, &one_more);
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

/*
 * Tell the masters how long a restarted master stays out of quorums:
 * the largest max_ttl_ms applied since start (locks granted before a
 * reload lowered it keep their ttl) plus its drift allowance.
 */
static void
server_set_quarantine(const struct conf *conf)
{
    int64_t lease_ms;

    if (conf->max_ttl_ms > server_max_ttl_ms) {
        server_max_ttl_ms = conf->max_ttl_ms;
    }
    lease_ms = server_max_ttl_ms
               + (redlock_drift_us(server_max_ttl_ms, conf->drift_factor) + 999) / 1000;
    health_set_quarantine_ms(lease_ms);
    /* The longest lease plus the freshness of a layout verdict, with drift (daemon/layout.h). */
    layout_set_window_ms(lease_ms + LAYOUT_FRESH_MS
                         + (redlock_drift_us(LAYOUT_FRESH_MS, conf->drift_factor) + 999) / 1000);
}

/*
 * STATUS= for systemctl status: quorum, locks, waiters.  Masters that
 * are up but do not count (restart quarantine, the same server listed
 * twice) are named, with the end of the quarantine, so that "NO QUORUM"
 * with every master up explains itself.
 */
static void
server_status(char *buf, size_t size)
{
    size_t n = master_count(), q = redlock_quorum(n);
    struct master_summary sum;
    char when[16], quarantine[80], twice[48] = "", layout[96] = "";

    master_tally(&sum);
    if (sum.quarantined > 0) {
        snprintf(quarantine, sizeof(quarantine), "%zu in restart quarantine until %s",
                 sum.quarantined, util_clock_after(sum.quarantine_left_ms, when, sizeof(when)));
    } else {
        snprintf(quarantine, sizeof(quarantine), "0 quarantined");
    }
    if (sum.duplicate > 0) {
        snprintf(twice, sizeof(twice), ", %zu listed twice", sum.duplicate);
    }
    if (sum.layout_refused > 0) {
        snprintf(layout, sizeof(layout), ", %zu not counted for the layout (redlockd --reach)",
                 sum.layout_refused);
    }
    snprintf(buf, size, "%s: %zu/%zu masters up (quorum %zu), %s%s%s; "
             "%zu locks held, %zu waiting, %zu sessions",
             server_stopping ? "stopping" : sum.counted >= q ? "quorum" : "NO QUORUM",
             sum.up, n, q, quarantine, twice, layout, lock_count_held(), lock_count_waiters(),
             session_count());
}

/*
 * Warn (as ssh does for keys) about a file that holds a secret and that
 * others may read: readable by everyone, or by a group that is not the
 * daemon's own (a config owned by root and group redlockd, mode 0640, is
 * the packaged layout).  what names the setting; secret says what it holds.
 */
static void
server_check_secret_file(const char *path, const char *what, const char *secret)
{
    struct stat st;

    if (path == NULL || path[0] == '\0' || stat(path, &st) != 0) {
        return;
    }
    if ((st.st_mode & S_IROTH) != 0
        || ((st.st_mode & S_IRGRP) != 0 && st.st_gid != getegid())) {
        log_warn("%s %s holds %s but is readable by %s (mode %04o): chmod %s", what, path,
                 secret, (st.st_mode & S_IROTH) != 0 ? "every user" : "its group",
                 (unsigned)(st.st_mode & 07777),
                 (st.st_mode & S_IROTH) != 0 ? "o-r (0600, or 0640 with the daemon's group)"
                                             : "g-r, or give it the daemon's group");
    }
}

/* The secrets conf names, and the file it came from: who else can read them. */
static void
server_check_secrets(const struct conf *conf)
{
    char list[128] = "";

    snprintf(list, sizeof(list), "%s%s%s",
             conf->auth_password[0] != '\0' ? "auth.password " : "",
             conf->auth_admin_password[0] != '\0' ? "auth.admin_password " : "",
             conf->redis_password[0] != '\0' ? "redis.password " : "");
    if (list[0] != '\0') {
        list[strlen(list) - 1] = '\0';
        server_check_secret_file(conf->file, "the configuration", list);
    }
    server_check_secret_file(conf->tls_key_file, "tls.key_file", "a private key");
    server_check_secret_file(conf->redis_tls_key_file, "redis.tls_key_file", "a private key");
}

/* A reload is refused when a socket from systemd reaches other hosts and
 * next leaves it without a password (protected mode). */
static int
server_check_protected(const struct conf *next, void **staged, char *why, size_t size)
{
    (void)staged;
    if (listener_needs_auth() && next->auth_password[0] == '\0') {
        snprintf(why, size, "auth.password is empty, but a socket from systemd accepts "
                 "connections from other hosts (protected mode); nothing was reloaded");
        return -1;
    }
    if (listener_tls_public() && next->auth_password[0] == '\0'
        && next->tls_client_ca_file[0] == '\0') {
        snprintf(why, size, "neither auth.password nor tls.client_ca_file is set, but a TLS "
                 "socket from systemd accepts connections from other hosts (protected "
                 "mode); nothing was reloaded");
        return -1;
    }
    return 0;
}

/* Settings that take a restart (conf_restart_changes) must not change. */
static int
server_check_restart(const struct conf *next, void **staged, char *why, size_t size)
{
    char changed[256];

    (void)staged;
    if (conf_restart_changes(ctx.conf, next, changed, sizeof(changed)) > 0) {
        snprintf(why, size, "%s changed, which takes a restart (the sessions' locks are "
                 "bound to the masters, listeners and key prefix they began with); "
                 "nothing was reloaded", changed);
        return -1;
    }
    return 0;
}

/* rediss:// masters: the client side of next (redis.tls_*), loaded now,
 * put in use by server_apply_tls_masters. */
static int
server_check_tls_masters(const struct conf *next, void **staged, char *why, size_t size)
{
    char reason[512];

    if (!server_tls_masters(next)) {
        return 0;
    }
    *staged = tls_client_ctx_new(next, reason, sizeof(reason));
    if (*staged == NULL) {
        snprintf(why, size, "%s; nothing was reloaded (the running client certificate "
                 "for the masters stays)", reason);
        return -1;
    }
    return 0;
}

static void
server_apply_tls_masters(const struct conf *prev, void *staged)
{
    (void)prev;
    if (staged != NULL) {
        tls_client_use(staged);
        log_info("reload: the client certificate and CAs for the rediss:// masters were "
                 "read again");
    }
}

/* A TLS listener: the certificates of next (tls.*), read again even when
 * their names did not change (rotation in place). */
static int
server_check_tls_listener(const struct conf *next, void **staged, char *why, size_t size)
{
    char reason[512];

    if (!listener_has_tls()) {
        return 0;
    }
    if (next->tls_cert_file[0] == '\0' || next->tls_key_file[0] == '\0') {
        snprintf(why, size, "the TLS listener needs tls.cert_file and tls.key_file; "
                 "nothing was reloaded");
        return -1;
    }
    *staged = tls_server_ctx_new(next, reason, sizeof(reason));
    if (*staged == NULL) {
        snprintf(why, size, "%s; nothing was reloaded (the running certificates stay)",
                 reason);
        return -1;
    }
    return 0;
}

static void
server_apply_tls_listener(const struct conf *prev, void *staged)
{
    (void)prev;
    if (staged != NULL) {
        tls_server_use(staged, ctx.conf);
    }
}

static void
server_discard_tls(void *staged)
{
    SSL_CTX_free(staged);
}

static void
server_apply_log(const struct conf *prev, void *staged)
{
    (void)prev;
    (void)staged;
    log_set_level((enum log_level)ctx.conf->log_level);
}

static void
server_apply_drift(const struct conf *prev, void *staged)
{
    (void)prev;
    (void)staged;
    redlock_set_drift(ctx.conf->drift_factor);
}

static void
server_apply_quarantine(const struct conf *prev, void *staged)
{
    (void)prev;
    (void)staged;
    server_set_quarantine(ctx.conf);
}

static void
server_apply_masters(const struct conf *prev, void *staged)
{
    (void)prev;
    (void)staged;
    master_apply();
}

static void
server_apply_health(const struct conf *prev, void *staged)
{
    (void)staged;
    health_apply(prev);
}

static void
server_apply_sessions(const struct conf *prev, void *staged)
{
    (void)staged;
    session_apply(prev);
}

static void
server_apply_reads(const struct conf *prev, void *staged)
{
    (void)prev;
    (void)staged;
    readq_set_max(ctx.conf->max_reads_in_flight);
}

static void
server_apply_listener(const struct conf *prev, void *staged)
{
    (void)prev;
    (void)staged;
    listener_apply();
}

/*
 * The reload table.  A reload checks every row against the settings
 * loaded (next), then, when every check passed, makes next the settings
 * in use (ctx.conf) and applies every row, in this order.  A row is
 * needed only for what cannot be read from ctx.conf when it is used: a
 * refusal, something prepared from files (the TLS contexts), or a value
 * derived from a setting.  A new setting read at its use needs no row.
 */
struct server_reload_row {
    const char *what;
    /* next against what runs (ctx.conf).  Changes nothing in use; may
     * prepare *staged for apply.  Returns 0, or -1 with the whole refusal
     * in why.  NULL: nothing to check. */
    int  (*check)(const struct conf *next, void **staged, char *why, size_t size);
    /* ctx.conf is the new settings, prev the old ones.  Cannot fail.
     * NULL: nothing to apply. */
    void (*apply)(const struct conf *prev, void *staged);
    /* Frees what check staged, when a later row refused the reload. */
    void (*discard)(void *staged);
};

static const struct server_reload_row server_reload_rows[] = {
    { "protected mode",   server_check_protected, NULL, NULL },
    { "restart-only",     server_check_restart, NULL, NULL },
    { "masters' TLS",     server_check_tls_masters, server_apply_tls_masters,
                          server_discard_tls },
    { "listener TLS",     server_check_tls_listener, server_apply_tls_listener,
                          server_discard_tls },
    { "log.level",        NULL, server_apply_log, NULL },
    { "drift_factor",     NULL, server_apply_drift, NULL },
    { "quarantine",       NULL, server_apply_quarantine, NULL },
    { "masters",          NULL, server_apply_masters, NULL },
    { "quarantine switches", NULL, server_apply_health, NULL },
    { "sessions",         NULL, server_apply_sessions, NULL },
    { "reads",            NULL, server_apply_reads, NULL },
    { "listener",         NULL, server_apply_listener, NULL },
};

#define SERVER_RELOAD_ROWS (sizeof(server_reload_rows) / sizeof(server_reload_rows[0]))

/*
 * Check every row of the table against next, staging into staged[].
 * Returns 0, or -1 with the refusal logged and everything staged freed.
 */
static int
server_reload_check(const struct conf *next, void **staged)
{
    const struct server_reload_row *row;
    char why[768];
    size_t i, j;

    for (i = 0; i < SERVER_RELOAD_ROWS; i++) {
        row = &server_reload_rows[i];
        if (row->check == NULL || row->check(next, &staged[i], why, sizeof(why)) == 0) {
            continue;
        }
        log_error("reload: %s", why);
        for (j = 0; j <= i; j++) {
            if (server_reload_rows[j].discard != NULL && staged[j] != NULL) {
                server_reload_rows[j].discard(staged[j]);
            }
        }
        return -1;
    }
    return 0;
}

/*
 * next passed every check: it becomes the settings in use, every row
 * applies it, and the settings before are freed (when a reload had
 * loaded them: the ones main.c read stay its own).
 */
static void
server_reload_apply(struct conf *next, void **staged)
{
    const struct conf *prev = ctx.conf;
    size_t i;

    ctx.conf = next;
    for (i = 0; i < SERVER_RELOAD_ROWS; i++) {
        if (server_reload_rows[i].apply != NULL) {
            server_reload_rows[i].apply(prev, staged[i]);
        }
    }
    if (server_owned != NULL) {
        conf_free(server_owned);
        free(server_owned);
    }
    server_owned = next;
    log_info("reload: done (log.level %s, default_ttl_ms %lld, node_timeout_ms %lld, "
             "max_clients %lld)", conf_log_level_name(next->log_level),
             (long long)next->default_ttl_ms, (long long)next->node_timeout_ms,
             (long long)next->max_clients);
}

/*
 * SIGHUP: read the file again.  A file with errors is rejected whole and
 * the running settings stay.  The listeners, the masters, metrics.listen
 * and lock.key_prefix cannot change under live sessions and held locks
 * (a lock's majority is counted over the masters it was granted on, and
 * its keys carry the prefix): a file that changes them is refused whole,
 * with the reason logged.  Everything else applies at once: limits, log
 * level, lock defaults and timeouts (sessions already open keep their
 * socket timeouts until they reconnect).  With a TLS listener the
 * certificate, key and client CAs (tls.*) are read again, even when
 * their names did not change (rotation in place); a file that does not
 * load refuses the reload whole, and the running certificates stay.  New
 * TLS sessions use the new ones; sessions already open are not touched.
 * With rediss:// masters, the client side (redis.tls_*) is read again
 * the same way: new links to the masters use it.  The steps are the
 * rows of server_reload_rows, checked all, then applied all.
 */
static void
server_reload(void)
{
    void *staged[SERVER_RELOAD_ROWS] = { NULL };
    struct conf *next;
    struct conf_msgs msgs;
    size_t i;

    notify_reloading();
    log_info("SIGHUP: reloading %s", ctx.conf->file);
    next = xcalloc(1, sizeof(*next));
    memset(&msgs, 0, sizeof(msgs));
    if (conf_load(ctx.conf->file, next, &msgs) != 0) {
        for (i = 0; i < msgs.n; i++) {
            log_write(msgs.list[i].is_error ? LOG_ERROR : LOG_WARN, "reload: %s",
                      msgs.list[i].text);
        }
        log_error("reload: %s has %zu error%s; keeping the running configuration",
                  ctx.conf->file, msgs.nerrors, msgs.nerrors == 1 ? "" : "s");
    } else {
        for (i = 0; i < msgs.n; i++) {
            log_warn("reload: %s", msgs.list[i].text);
        }
        server_check_secrets(next);
        if (server_reload_check(next, staged) == 0) {
            server_reload_apply(next, staged);
            next = NULL;
        }
    }
    conf_msgs_free(&msgs);
    if (next != NULL) {
        conf_free(next);
        free(next);
    }
    notify_ready();
}

static void
server_signal_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    if (sig == SIGHUP) {
        if (!server_stopping) {
            server_reload();
        }
        return;
    }
    if (server_stopping) {
        log_warn("second %s: exiting now", sig == SIGINT ? "SIGINT" : "SIGTERM");
        listener_stop();
        _exit(0);
    }
    server_stopping = true;
    notify_stopping();
    log_info("%s: shutting down: releasing %zu locks", sig == SIGINT ? "SIGINT" : "SIGTERM",
             lock_count_held());
    lock_set_shutdown();
    listener_stop();
    session_shutdown_all();
    server_drain_end = util_now_us() + SERVER_DRAIN_MS * 1000;
    server_drain = evtimer_new(ctx.base, server_drain_cb, NULL);
    event_active(server_drain, EV_TIMEOUT, 0);
}

/*
 * The client side of TLS for rediss:// masters, when conf has any.
 * Returns 0, or -1 with the reason logged.
 */
static int
server_tls_client(const struct conf *conf)
{
    SSL_CTX *client_ctx;
    char why[512];

    if (!server_tls_masters(conf)) {
        return 0;
    }
    client_ctx = tls_client_ctx_new(conf, why, sizeof(why));
    if (client_ctx == NULL) {
        log_error("masters over TLS: %s", why);
        return -1;
    }
    tls_client_use(client_ctx);
    return 0;
}

/* --reach: the probe's state. */
struct server_probe {
    struct event *timer;
    int64_t       deadline_us;  /* give up on masters not decided by then */
    int           rc;           /* the exit status the report gave */
};

/*
 * Print what --reach found of each master and whether this daemon could
 * grant; the exit status: 0, or 69 (EX_UNAVAILABLE) without a quorum.
 * Called when the probe decides, so that what is printed is what was
 * decided on (a master found down may be connecting again a moment
 * later).
 */
static int
server_reach_report(void)
{
    struct master_summary sum;
    size_t i, n, q;

    n = master_count();
    q = redlock_quorum(n);
    for (i = 0; i < n; i++) {
        struct master_stats st;
        const char *text = master_status_text(master_at(i));

        master_get_stats(master_at(i), &st);
        if (st.state == MASTER_UP && st.layout.read) {
            printf("master %s: %s; its registry: %zu daemon%s, layouts %d to %d%s\n",
                   master_name(master_at(i)), strcmp(text, "up") == 0 ? "up, counted" : text,
                   st.layout.daemons, st.layout.daemons == 1 ? "" : "s", st.layout.lowest,
                   st.layout.highest, st.layout.legacy ? ", daemons older than the registry "
                   "among them" : "");
        } else {
            printf("master %s: %s\n", master_name(master_at(i)), text);
        }
    }
    master_tally(&sum);
    printf("%zu of %zu masters count for layout %d, quorum %zu: %s\n", sum.counted, n,
           REDLOCKD_LAYOUT, q, sum.counted >= q ? "this daemon can grant"
           : "this daemon could not grant now");
    return sum.counted >= q ? 0 : 69;   /* EX_UNAVAILABLE */
}

static void
server_probe_cb(evutil_socket_t fd, short what, void *arg)
{
    struct server_probe *p = arg;
    size_t i, n = master_count();

    (void)fd;
    (void)what;
    for (i = 0; i < n && reach_master_decided(i); i++) {
    }
    if (i == n || util_now_us() >= p->deadline_us) {
        p->rc = server_reach_report();
        event_base_loopexit(ctx.base, NULL);
    }
}

int
server_reach(struct conf *conf)
{
    struct server_probe probe = { .rc = 1 };
    struct timeval tv = { 0, 50000 };

    signal(SIGPIPE, SIG_IGN);
    ctx.conf = conf;
    log_set_level(LOG_ERROR);   /* what a master says is printed below */
    ctx.base = event_base_new();
    if (ctx.base == NULL) {
        fprintf(stderr, "error cannot create the event loop\n");
        return 1;
    }
    flush_init(ctx.base);
    server_set_quarantine(conf);
    layout_set_probe(true);
    if (server_tls_client(conf) != 0 || master_start() != 0) {
        event_base_free(ctx.base);
        return 1;
    }
    probe.deadline_us = util_now_us() + (conf->connect_timeout_ms + 1000) * 1000;
    probe.timer = event_new(ctx.base, -1, EV_PERSIST, server_probe_cb, &probe);
    event_add(probe.timer, &tv);
    event_base_dispatch(ctx.base);
    event_free(probe.timer);

    master_stop();
    master_eval_stop();
    tls_stop();
    flush_stop();
    event_base_free(ctx.base);
    ctx.base = NULL;
    ctx.conf = NULL;
    return probe.rc;
}

/* The event loop, with precise timers and two priorities; NULL (logged)
 * when libevent cannot make it. */
static struct event_base *
server_base_new(void)
{
    struct event_config *cfg;
    struct event_base *base;

    cfg = event_config_new();
    if (cfg == NULL) {
        log_error("cannot create the event loop");
        return NULL;
    }
    /* CLOCK_MONOTONIC without coarse ticks for every timer. */
    event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (base == NULL) {
        log_error("cannot create the event loop");
        return NULL;
    }
    /*
     * Two priorities: 0 for the lease timer alone (daemon/lease.h: after
     * a pause, LOST before anything else), 1, the default, for the rest.
     */
    if (event_base_priority_init(base, 2) != 0) {
        log_error("cannot set the event loop's priorities");
        event_base_free(base);
        return NULL;
    }
    return base;
}

/*
 * Start every module on ctx, bottom floor first.  Returns 0, or -1 with
 * the reason logged and what had started stopped (the caller frees the
 * event base).
 */
static int
server_start_modules(const struct conf *conf)
{
    if (redlock_init(conf->drift_factor) != 0) {
        log_error("the masters' scripts could not be registered (more than the link allows)");
        return -1;
    }
    flush_init(ctx.base);
    lock_init();
    watch_init();
    command_init();
    readq_set_max(conf->max_reads_in_flight);
    if (listener_start() != 0) {
        return -1;
    }
    server_set_quarantine(conf);
    if (metrics_start() != 0 || server_tls_client(conf) != 0) {
        metrics_stop();
        listener_stop();
        return -1;
    }
    channel_start();
    if (master_start() != 0) {
        metrics_stop();
        listener_stop();
        return -1;
    }
    reach_start();
    return 0;
}

int
server_run(struct conf *conf)
{
    struct event *sigs[3];
    const int signums[3] = { SIGTERM, SIGINT, SIGHUP };
    int i, rc = 0;

    signal(SIGPIPE, SIG_IGN);
    ctx.conf = conf;
    stats.start_us = util_now_us();
    log_set_level((enum log_level)conf->log_level);
    server_check_secrets(conf);
    if ((ctx.base = server_base_new()) == NULL) {
        return 1;
    }
    if (server_start_modules(conf) != 0) {
        event_base_free(ctx.base);
        ctx.base = NULL;
        return 1;
    }
    for (i = 0; i < 3; i++) {
        sigs[i] = evsignal_new(ctx.base, signums[i], server_signal_cb, NULL);
        evsignal_add(sigs[i], NULL);
    }
    notify_start(ctx.base, server_status);
    log_info("redlockd %s ready: %zu masters, quorum %zu%s", REDLOCKD_VERSION,
             master_count(), redlock_quorum(master_count()),
             notify_available() ? "" : " (built without libsystemd)");
    /* The listeners exist and the masters are being connected: not
       waiting for a quorum, which could hang the boot. */
    notify_ready();

    if (event_base_dispatch(ctx.base) < 0) {
        log_error("event loop failed");
        rc = 1;
    }
    notify_stop();
    reach_stop();

    for (i = 0; i < 3; i++) {
        event_free(sigs[i]);
    }
    if (server_drain != NULL) {
        event_free(server_drain);
    }
    listener_stop();
    metrics_stop();
    lease_stop();
    tls_stop();
    flush_stop();
    event_base_free(ctx.base);
    ctx.base = NULL;
    if (server_owned != NULL) {
        conf_free(server_owned);
        free(server_owned);
        server_owned = NULL;
    }
    ctx.conf = NULL;
    log_info("stopped");
    return rc;
}
