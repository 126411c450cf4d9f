/*
 * listener.c: bind, accept, and refuse what admit.c does not let in.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "conf/conf.h"
#include "daemon/admit.h"
#include "daemon/authlimit.h"
#include "daemon/ctx.h"
#include "daemon/fdbudget.h"
#include "daemon/listener.h"
#include "daemon/log.h"
#include "daemon/notify.h"
#include "daemon/session.h"
#include "daemon/stats.h"
#include "daemon/tls.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"

#define LISTENER_BACKLOG 511
#define LISTENER_INHERITED_MAX 8    /* sockets taken from systemd */
#define LISTENER_GUARDED_MAX (LISTENER_INHERITED_MAX + 4) /* ours, and /metrics' */
#define LISTENER_PAUSE_MS 100       /* no descriptor even for refusing: no accept for this long */
#define LISTENER_SPARE_BATCH 64     /* connections refused from the spare at one wake-up */

/* What a guarded listener serves, for refusing from the spare descriptor. */
enum listener_kind {
    LISTENER_PLAIN,                 /* clients over TCP or the Unix socket: told why */
    LISTENER_TLS,                   /* clients over TLS: closed without a byte */
    LISTENER_OTHER                  /* another module's (/metrics): closed */
};

static struct evconnlistener *listener_tcp;
static struct evconnlistener *listener_unix;
static struct evconnlistener *listener_tls;
static bool                   listener_any_tls;     /* a TLS listener exists (bound or inherited) */
static bool                   listener_any_unix;    /* a Unix one exists (bound or inherited) */
static int                    listener_tls_tag;     /* its address is the accept arg of TLS listeners */
static char                  *listener_unix_path;   /* file to remove at stop */
static struct evconnlistener *listener_inherited[LISTENER_INHERITED_MAX]; /* socket activation */
static size_t                 listener_ninherited;  /* entries used */
static bool                   listener_public;      /* an inherited plain one is not loopback */
static bool                   listener_public_tls;  /* an inherited TLS one is not loopback */

/*
 * Every listening socket, /metrics' included, so that all stop together
 * when accept(2) runs out of descriptors: a level-triggered listener
 * that cannot accept would be woken again at once, for ever.
 */
static struct evconnlistener *listener_guarded[LISTENER_GUARDED_MAX];
static enum listener_kind     listener_guarded_kind[LISTENER_GUARDED_MAX]; /* of each */
static size_t                 listener_nguarded;
static int                    listener_spare = -1;  /* /dev/null, closed to make room for
                                                       refusing when out of descriptors */
static struct event          *listener_resume_ev;   /* ends a pause */
static struct log_every       listener_failed_log;  /* accept-failure lines */
static struct log_every       listener_refused_log; /* refusal lines */

static void
listener_describe(const struct sockaddr *sa, char *out, size_t size)
{
    char host[NI_MAXHOST], serv[NI_MAXSERV];

    if (sa->sa_family == AF_UNIX) {
        snprintf(out, size, "unix");
        return;
    }
    if (getnameinfo(sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                  : sizeof(struct sockaddr_in),
                    host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(out, size, "?");
        return;
    }
    snprintf(out, size, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, serv);
}

/*
 * A connection admit_enter() refused, or one accepted on the spare
 * descriptor: "ERR LIMIT <why>" on a plain socket; on a TLS one nothing
 * (a reply before the handshake would be plaintext, and a handshake is
 * what the limits spare).  by_fds: refused for the descriptor limit.
 * Logged at most once per LOG_EVERY_US, with the refusals in between
 * counted.
 */
static void
listener_refuse(evutil_socket_t fd, const char *peer, bool tls, const char *why, bool by_fds)
{
    char line[320];
    uint64_t held;
    int n;

    stats.rejected_clients++;
    if (by_fds) {
        stats.rejected_descriptors++;
    }
    if (!tls) {
        n = snprintf(line, sizeof(line), "ERR LIMIT %s\n", why);
        if (n > 0 && (size_t)n < sizeof(line)) {
            (void)!send(fd, line, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
        }
    }
    evutil_closesocket(fd);
    if (log_every_due(&listener_refused_log, util_now_us(), &held)) {
        log_warn("refused a client (%s%s): %s (%llu more refused since the last such line)",
                 peer, tls ? ", TLS: closed without a reply" : "", why,
                 (unsigned long long)held);
    }
}

static void
listener_accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
                   struct sockaddr *sa, int socklen, void *arg)
{
    char peer[64], source[AUTHLIMIT_SOURCE_MAX + 8];
    struct admit_slot slot;
    const char *why;
    int one = 1;
    long uid = -1, pid = -1;
    bool tls = arg == &listener_tls_tag;
    bool is_unix = sa->sa_family == AF_UNIX;
    bool known;

    (void)lev;
    (void)socklen;
    listener_describe(sa, peer, sizeof(peer));
    if (is_unix) {
        /* Who is on the other end of the Unix socket, for the logs. */
        struct ucred cred;
        socklen_t len = sizeof(cred);

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
            snprintf(peer, sizeof(peer), "unix uid=%u pid=%d", (unsigned)cred.uid,
                     (int)cred.pid);
            uid = (long)cred.uid;
            pid = (long)cred.pid;
        }
    }
    known = authlimit_admission(peer, util_now_us(), source, sizeof(source));
    if ((why = admit_enter(&slot, source, known, is_unix, tls)) != NULL) {
        listener_refuse(fd, peer, tls, why, admit_is_fd_refusal(why));
        return;
    }
    if (!is_unix) {
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    if (session_accept(fd, peer, is_unix, tls, uid, pid, &slot) != 0) {
        log_error("a TLS client was accepted with no TLS context loaded; closed");
    }
}

/* Open the spare descriptor when it is not open.  Returns 0, or -1 when it cannot be. */
static int
listener_spare_open(void)
{
    if (listener_spare < 0) {
        listener_spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    return listener_spare >= 0 ? 0 : -1;
}

/* RLIMIT_NOFILE's soft value now (FDBUDGET_UNLIMITED when none or unreadable). */
static uint64_t
listener_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) {
        return FDBUDGET_UNLIMITED;
    }
    return (uint64_t)rl.rlim_cur;
}

/*
 * accept(2) on lev (of kind) failed for want of a descriptor, although
 * the client slots are counted to fit the limit (descriptors taken
 * elsewhere: the limit lowered under the daemon, a master's name
 * resolved, files inherited).  Make room with the spare: close it,
 * accept up to LISTENER_SPARE_BATCH waiting connections one at a time,
 * refuse each ("ERR LIMIT ..." on a plain socket, nothing on TLS or
 * /metrics) and close it, then open the spare again.  The listener thus
 * empties its backlog instead of being woken for ever on a connection
 * it cannot take.  Returns the connections refused, or -1 when even
 * that found no descriptor or the spare cannot be opened again (then
 * the caller pauses accepting).
 */
static int
listener_refuse_spare(struct evconnlistener *lev, enum listener_kind kind)
{
    evutil_socket_t lfd = evconnlistener_get_fd(lev), fd;
    struct sockaddr_storage ss;
    socklen_t len;
    char why[160], peer[64];
    int n = 0, err = 0;

    if (listener_spare < 0) {
        return -1;
    }
    snprintf(why, sizeof(why), "too many clients (out of descriptors, descriptor limit %llu: "
             "raise LimitNOFILE= or lower limits.max_clients)",
             (unsigned long long)listener_nofile());
    close(listener_spare);
    listener_spare = -1;
    while (n < LISTENER_SPARE_BATCH) {
        len = sizeof(ss);
        fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            err = errno;
            break;
        }
        n++;
        if (kind == LISTENER_OTHER) {
            stats.rejected_descriptors++;
            evutil_closesocket(fd);
            continue;
        }
        listener_describe((struct sockaddr *)&ss, peer, sizeof(peer));
        listener_refuse(fd, peer, kind == LISTENER_TLS, why, true);
    }
    if (listener_spare_open() != 0 || (n == 0 && err != EAGAIN && err != EWOULDBLOCK
                                       && err != EINTR && err != ECONNABORTED)) {
        return -1;
    }
    return n;
}

static void
listener_resume_cb(evutil_socket_t fd, short what, void *arg)
{
    size_t i;

    (void)fd;
    (void)what;
    (void)arg;
    (void)listener_spare_open();
    for (i = 0; i < listener_nguarded; i++) {
        evconnlistener_enable(listener_guarded[i]);
    }
}

/*
 * accept(2) failed.  Out of descriptors (EMFILE, ENFILE), the waiting
 * connections are refused from the spare descriptor
 * (listener_refuse_spare); the other listeners go on, so the Unix
 * socket still takes the slots kept for it.  Only as a last resort,
 * when there is no spare or it cannot be opened again, or the kernel is
 * out of memory (ENOBUFS, ENOMEM), every listener stops for
 * LISTENER_PAUSE_MS, so that the daemon does not spin on a socket it
 * cannot accept from; the connections wait in the backlog.  The log says
 * so at most once per LOG_EVERY_US, with the failures in between
 * counted.
 */
static void
listener_error_cb(struct evconnlistener *lev, void *arg)
{
    int err = EVUTIL_SOCKET_ERROR();
    bool nofd = err == EMFILE || err == ENFILE;
    bool out = nofd || err == ENOBUFS || err == ENOMEM;
    enum listener_kind kind = LISTENER_OTHER;
    uint64_t held;
    struct timeval tv = { 0, LISTENER_PAUSE_MS * 1000 };
    int refused = -1;
    size_t i;

    (void)arg;
    stats.accept_failures++;
    for (i = 0; i < listener_nguarded; i++) {
        if (listener_guarded[i] == lev) {
            kind = listener_guarded_kind[i];
        }
    }
    if (nofd) {
        refused = listener_refuse_spare(lev, kind);
    }
    if (out && refused < 0 && listener_resume_ev == NULL) {
        listener_resume_ev = evtimer_new(evconnlistener_get_base(lev), listener_resume_cb,
                                         NULL);
    }
    if (out && refused < 0 && listener_resume_ev != NULL) {
        for (i = 0; i < listener_nguarded; i++) {
            evconnlistener_disable(listener_guarded[i]);
        }
        evtimer_add(listener_resume_ev, &tv);
    }
    if (!log_every_due(&listener_failed_log, util_now_us(), &held)) {
        return;
    }
    if (refused >= 0) {
        log_warn("accept failed: %s (descriptor limit %llu, %zu clients; %llu more failures "
                 "since the last such line): the waiting connections are refused from the "
                 "spare descriptor; raise the limit (LimitNOFILE=) or lower "
                 "limits.max_clients", evutil_socket_error_to_string(err),
                 (unsigned long long)listener_nofile(), session_count(),
                 (unsigned long long)held);
    } else if (out) {
        log_warn("accept failed: %s (descriptor limit %llu, %zu clients; %llu more failures "
                 "since the last such line)%s; accepting pauses %d ms each time: raise the "
                 "limit (LimitNOFILE=) or lower limits.max_clients",
                 evutil_socket_error_to_string(err), (unsigned long long)listener_nofile(),
                 session_count(), (unsigned long long)held,
                 nofd ? ", and no spare descriptor to refuse them with" : "",
                 LISTENER_PAUSE_MS);
    } else {
        log_warn("accept failed: %s (%llu more failures since the last such line)",
                 evutil_socket_error_to_string(err), (unsigned long long)held);
    }
}

/* Count lev, of kind, among the guarded listeners (listener_guard). */
static int
listener_guard_as(struct evconnlistener *lev, enum listener_kind kind)
{
    if (listener_nguarded == LISTENER_GUARDED_MAX) {
        return -1;
    }
    listener_guarded_kind[listener_nguarded] = kind;
    listener_guarded[listener_nguarded++] = lev;
    evconnlistener_set_error_cb(lev, listener_error_cb);
    return 0;
}

int
listener_guard(struct evconnlistener *lev)
{
    return listener_guard_as(lev, LISTENER_OTHER);
}

void
listener_unguard(struct evconnlistener *lev)
{
    size_t i;

    for (i = 0; i < listener_nguarded; i++) {
        if (listener_guarded[i] == lev) {
            listener_nguarded--;
            listener_guarded[i] = listener_guarded[listener_nguarded];
            listener_guarded_kind[i] = listener_guarded_kind[listener_nguarded];
            return;
        }
    }
}

/*
 * Raise the soft descriptor limit to the hard one (an operator may have
 * raised the hard one with prlimit(1) before a reload), and count the
 * client slots it leaves (daemon/fdbudget.h): the listeners, ours and
 * /metrics', two links per master, /metrics' connections, a few open
 * for a moment and the spare.  The slots in effect go to admit.c and
 * STATS client_slots; the log says them (info), or warns when the limit
 * leaves fewer than limits.max_clients.  what: "start" or "reload".
 */
static void
listener_fd_budget(const struct conf *conf, const char *what)
{
    struct fdbudget_need need;
    struct rlimit rl;
    uint64_t limit;
    size_t slots, net, other;
    bool metrics = conf->metrics.spec[0] != '\0';

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rlim_t was = rl.rlim_cur;

        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0) {
            log_info("descriptor limit raised from %llu to %llu", (unsigned long long)was,
                     (unsigned long long)rl.rlim_cur);
        }
    }
    limit = listener_nofile();
    need.nmasters = conf->nmasters;
    need.listeners = listener_ninherited + (listener_tcp != NULL) + (listener_unix != NULL)
                     + (listener_tls != NULL) + (metrics ? 1 : 0);
    need.metrics_conns = metrics ? (size_t)conf->metrics_max_connections : 0;
    other = fdbudget_other(&need);
    slots = fdbudget_slots(limit, (size_t)conf->max_clients, &need);
    net = fdbudget_net_slots(slots, (size_t)conf->unix_reserved, listener_any_unix);
    admit_set_fd_slots(slots, limit);
    stats.client_slots = slots;
    stats.descriptor_limit = limit == FDBUDGET_UNLIMITED ? 0 : limit;
    if (limit == FDBUDGET_UNLIMITED) {
        log_info("%s: no descriptor limit: %zu client slots (limits.max_clients), %zu of them "
                 "for TCP and TLS", what, slots, net);
    } else if (slots < (size_t)conf->max_clients) {
        log_warn("%s: descriptor limit %llu leaves %zu client slots, fewer than "
                 "limits.max_clients %lld (%zu descriptors for %zu masters, %zu listeners, "
                 "/metrics and spare); %zu of them for TCP and TLS, the rest kept for the "
                 "Unix socket; clients past them get ERR LIMIT: raise LimitNOFILE= or lower "
                 "limits.max_clients", what, (unsigned long long)limit, slots,
                 (long long)conf->max_clients, other, conf->nmasters, need.listeners, net);
    } else {
        log_info("%s: descriptor limit %llu: %zu client slots (limits.max_clients), %zu of "
                 "them for TCP and TLS (%zu descriptors for the rest)", what,
                 (unsigned long long)limit, slots, net, other);
    }
}

struct evconnlistener *
listener_bind_inet(struct event_base *base, const struct conf_addr *addr,
                   evconnlistener_cb cb, char *why, size_t why_size)
{
    struct addrinfo hints, *res = NULL, *ai;
    struct evconnlistener *lev = NULL;
    char port[16];
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(port, sizeof(port), "%d", addr->port);
    rc = getaddrinfo(addr->host, port, &hints, &res);
    if (rc != 0) {
        snprintf(why, why_size, "cannot resolve the host: %s", gai_strerror(rc));
        return NULL;
    }
    errno = 0;
    for (ai = res; ai != NULL && lev == NULL; ai = ai->ai_next) {
        lev = evconnlistener_new_bind(base, cb, NULL,
                                      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE
                                      | LEV_OPT_CLOSE_ON_EXEC,
                                      LISTENER_BACKLOG, ai->ai_addr, (int)ai->ai_addrlen);
    }
    freeaddrinfo(res);
    if (lev == NULL) {
        snprintf(why, why_size, "cannot listen: %s",
                 errno != 0 ? strerror(errno) : "bind failed");
    }
    return lev;
}

static int
listener_bind_tcp(struct event_base *base, const struct conf_addr *addr)
{
    char why[160];

    listener_tcp = listener_bind_inet(base, addr, listener_accept_cb, why, sizeof(why));
    if (listener_tcp == NULL) {
        log_error("listen.tcp %s: %s", addr->spec, why);
        return -1;
    }
    listener_guard_as(listener_tcp, LISTENER_PLAIN);
    log_info("listening on tcp %s", addr->spec);
    return 0;
}

/* Load the TLS context before the first TLS listener takes connections. */
static int
listener_tls_prepare(const struct conf *conf, const char *what)
{
    char why[512];

    if (tls_ready()) {
        return 0;
    }
    if (conf->tls_cert_file[0] == '\0' || conf->tls_key_file[0] == '\0') {
        log_error("%s: needs tls.cert_file and tls.key_file", what);
        return -1;
    }
    if (tls_load(conf, why, sizeof(why)) != 0) {
        log_error("%s: %s", what, why);
        return -1;
    }
    return 0;
}

static int
listener_bind_tls(struct event_base *base, const struct conf *conf)
{
    char why[160];

    if (listener_tls_prepare(conf, "listen.tls") != 0) {
        return -1;
    }
    listener_tls = listener_bind_inet(base, &conf->tls, listener_accept_cb, why, sizeof(why));
    if (listener_tls == NULL) {
        log_error("listen.tls %s: %s", conf->tls.spec, why);
        return -1;
    }
    evconnlistener_set_cb(listener_tls, listener_accept_cb, &listener_tls_tag);
    listener_guard_as(listener_tls, LISTENER_TLS);
    listener_any_tls = true;
    log_info("listening on tls %s", conf->tls.spec);
    return 0;
}

static int
listener_bind_unix(struct event_base *base, const char *path, unsigned mode)
{
    struct sockaddr_un sun;
    struct stat st;
    evutil_socket_t fd;

    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sun.sun_path)) {
        log_error("listen.unix %s: path too long", path);
        return -1;
    }
    strcpy(sun.sun_path, path);
    /* Replace a stale socket file, never anything else, nor a live one. */
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            log_error("listen.unix %s: exists and is not a socket", path);
            return -1;
        }
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0) {
            close(fd);
            log_error("listen.unix %s: another process is listening on it", path);
            return -1;
        }
        if (fd >= 0) {
            close(fd);
        }
        unlink(path);
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        log_error("listen.unix %s: socket: %s", path, strerror(errno));
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0
        || chmod(path, mode) != 0 || listen(fd, LISTENER_BACKLOG) != 0) {
        log_error("listen.unix %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    listener_unix = evconnlistener_new(base, listener_accept_cb, NULL,
                                       LEV_OPT_CLOSE_ON_FREE, -1, fd);
    if (listener_unix == NULL) {
        log_error("listen.unix %s: cannot listen", path);
        close(fd);
        unlink(path);
        return -1;
    }
    listener_guard_as(listener_unix, LISTENER_PLAIN);
    admit_set_unix(true);
    listener_any_unix = true;
    listener_unix_path = xstrdup(path);
    log_info("listening on unix %s (mode %04o)", path, mode);
    return 0;
}

/* True when a bound inet address only takes connections from this host. */
static bool
listener_is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;

        return (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;

        return IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr)
               || (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr) && sin6->sin6_addr.s6_addr[12] == 127);
    }
    return false;   /* another family: assume it is reachable (fail closed) */
}

/*
 * Socket activation: listen on the n descriptors systemd passed
 * (redlockd.socket) instead of binding listen.tcp, listen.unix and
 * listen.tls.  A socket named "tls" (FileDescriptorName=tls) speaks TLS
 * with tls.cert_file and tls.key_file.  The protected-mode rule holds
 * for them too (for a TLS one: auth.password or tls.client_ca_file).
 * Returns 0 or -1 (logged).
 */
static int
listener_adopt(struct event_base *base, const struct conf *conf, int n)
{
    struct sockaddr_storage ss;
    socklen_t len;
    char addr[64];
    int i, fd;
    bool tls, open_to_others;

    for (i = 0; i < n; i++) {
        fd = NOTIFY_LISTEN_FDS_START + i;
        tls = strcmp(notify_listen_fd_name(i), "tls") == 0;
        len = sizeof(ss);
        if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0
            || !notify_fd_is_listener(fd, ss.ss_family)) {
            log_error("socket activation: descriptor %d is not a listening stream socket", fd);
            return -1;
        }
        listener_describe((struct sockaddr *)&ss, addr, sizeof(addr));
        open_to_others = ss.ss_family != AF_UNIX && !listener_is_loopback(&ss);
        if (tls) {
            if (ss.ss_family == AF_UNIX) {
                log_error("socket activation: the socket named tls (descriptor %d) must be "
                          "a TCP socket", fd);
                return -1;
            }
            if (listener_tls_prepare(conf, "socket activation: the socket named tls") != 0) {
                return -1;
            }
            listener_public_tls = listener_public_tls || open_to_others;
            if (open_to_others && conf->auth_password[0] == '\0'
                && conf->tls_client_ca_file[0] == '\0') {
                log_error("socket activation: tls %s accepts connections from other hosts "
                          "but neither auth.password nor tls.client_ca_file is set "
                          "(protected mode)", addr);
                return -1;
            }
        } else {
            listener_public = listener_public || open_to_others;
            if (open_to_others && conf->auth_password[0] == '\0') {
                log_error("socket activation: %s accepts connections from other hosts but "
                          "auth.password is empty (protected mode)", addr);
                return -1;
            }
        }
        if (listener_ninherited == LISTENER_INHERITED_MAX) {
            log_error("socket activation: more than %d sockets", LISTENER_INHERITED_MAX);
            return -1;
        }
        if (ss.ss_family == AF_UNIX) {
            admit_set_unix(true);
            listener_any_unix = true;
        }
        evutil_make_socket_nonblocking(fd);
        evutil_make_socket_closeonexec(fd);
        listener_inherited[listener_ninherited] =
            evconnlistener_new(base, listener_accept_cb, tls ? &listener_tls_tag : NULL,
                               LEV_OPT_CLOSE_ON_FREE, -1, fd);
        if (listener_inherited[listener_ninherited] == NULL) {
            log_error("socket activation: cannot listen on descriptor %d", fd);
            return -1;
        }
        listener_guard_as(listener_inherited[listener_ninherited++],
                          tls ? LISTENER_TLS : LISTENER_PLAIN);
        listener_any_tls = listener_any_tls || tls;
        log_info("listening on %s%s (socket activation, descriptor %d)", tls ? "tls " : "",
                 addr, fd);
    }
    log_info("socket activation: %d socket%s from systemd; listen.tcp, listen.unix and "
             "listen.tls are not bound", n, n == 1 ? "" : "s");
    return 0;
}

int
listener_start(void)
{
    struct event_base *base = ctx.base;
    const struct conf *conf = ctx.conf;
    int n = notify_listen_fds();

    if (listener_spare_open() != 0) {
        log_error("cannot open /dev/null for the spare descriptor: %s", strerror(errno));
        return -1;
    }
    if (n > 0) {
        if (listener_adopt(base, conf, n) != 0) {
            listener_stop();
            return -1;
        }
        listener_fd_budget(conf, "start");
        return 0;
    }
    if (conf->unix_enabled) {
        struct conf_msgs msgs = { NULL, 0, 0 };
        size_t i;

        if (conf_check_unix_dir(conf, false, &msgs) != 0) {
            for (i = 0; i < msgs.n; i++) {
                log_error("%s", msgs.list[i].text);
            }
            conf_msgs_free(&msgs);
            return -1;
        }
    }
    if (conf->tcp_enabled && listener_bind_tcp(base, &conf->tcp) != 0) {
        return -1;
    }
    if (conf->unix_enabled && listener_bind_unix(base, conf->unix_path, conf->unix_mode) != 0) {
        listener_stop();
        return -1;
    }
    if (conf->tls_enabled && listener_bind_tls(base, conf) != 0) {
        listener_stop();
        return -1;
    }
    listener_fd_budget(conf, "start");
    return 0;
}

bool
listener_needs_auth(void)
{
    return listener_public;
}

bool
listener_tls_public(void)
{
    return listener_public_tls;
}

bool
listener_has_tls(void)
{
    return listener_any_tls;
}

void
listener_apply(void)
{
    listener_fd_budget(ctx.conf, "reload");
}

void
listener_stop(void)
{
    size_t i;

    listener_nguarded = 0;
    if (listener_spare >= 0) {
        close(listener_spare);
        listener_spare = -1;
    }
    if (listener_resume_ev != NULL) {
        event_free(listener_resume_ev);
        listener_resume_ev = NULL;
    }
    for (i = 0; i < listener_ninherited; i++) {
        evconnlistener_free(listener_inherited[i]);
    }
    listener_ninherited = 0;
    if (listener_tcp != NULL) {
        evconnlistener_free(listener_tcp);
        listener_tcp = NULL;
    }
    if (listener_unix != NULL) {
        evconnlistener_free(listener_unix);
        listener_unix = NULL;
    }
    if (listener_tls != NULL) {
        evconnlistener_free(listener_tls);
        listener_tls = NULL;
    }
    if (listener_unix_path != NULL) {
        unlink(listener_unix_path);
        free(listener_unix_path);
        listener_unix_path = NULL;
        admit_set_unix(false);
    }
    listener_any_unix = false;
}
