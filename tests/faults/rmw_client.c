/*
 * rmw_client.c: one client session of the fault-injection suite
 * (tests/faults/README.md).
 *
 * It does a guarded read-modify-write on a counter, over and over:
 *
 *     LOCK <name> ttl=T wait=W fence      (through redlockd, TCP)
 *     GET counter:<name>                  (a separate redis-server)
 *     sleep a little                      (watching the daemon connection)
 *     SET counter:<name> read+1           (only if no "! LOST" came and the
 *                                          connection is still open)
 *     UNLOCK <name>
 *
 * With -L N it holds a permit of a counted name instead (LOCK <name>
 * limit=N): each permit is a mutex of its own, so the counter it guards
 * is counter:<name>:<permit> (its fence next to it in fence:<name>:<permit>).
 * With -S it is a shared holder (LOCK <name> shared): it reads
 * counter:<name> at the start of its section and again at the end, and
 * writes nothing; the exclusive holders of the same name write it.
 * With -F its write is fenced: the counter's script refuses it, and
 * writes nothing, when the writer's fence is not larger than the fence
 * kept next to the counter (the one of the last write that landed).
 * Without -F the write always lands, and a stale fence only shows in
 * the END line (what the checker calls a stale write).  With -G the
 * resource guards its reads too, as one that checks fencing tokens on
 * every access: it keeps the largest fence it has seen in
 * seen:<name>[:<permit>], an exclusive holder's read raises it, and a
 * read or write with a smaller fence is refused (REJECT); a shared
 * holder's reads are refused the same way but raise nothing (shared
 * holders are granted in any fence order).
 *
 * With -n P,Q,... (two or more names, comma-separated) it locks a set:
 * LOCK P Q ... fence, one grant for all of them with one fence per name
 * (OK P Q ... fence=F1,F2 in the order given), then the same guarded
 * read-modify-write on counter:P, counter:Q, ... under that one grant,
 * each name's write with its own fence:
 *
 *     BEGIN us name=P,Q fence=F1,F2 validity=V ... kind=exclusive set=2
 *     WRITE us name=P fence=F1 value=X
 *     END   us name=P fence=F1 read=R wrote=X prev_fence=PF
 *     WRITE us name=Q fence=F2 value=Y
 *     END   us name=Q fence=F2 read=R2 wrote=Y prev_fence=PF2
 *     ABORT us name=P,Q fence=F1,F2 why=lost|eof [reason=R]   (instead: no write)
 *     WAIT  us name=P,Q wait=W port=P
 *
 * A set is a session hold only (no -L, -S, -m, -F, -G with it); "! LOST
 * P Q ..." loses it whole, and UNLOCK P Q releases it.
 *
 * With -m P, P percent of the sections take the lock as a lease
 * (LOCK <name> mode=lease ttl=T ..., answered with a token; nothing
 * renews it and no "! LOST" comes for it).  Such a section:
 *
 *     LOCK <name> mode=lease ttl=T wait=W fence  -> BEGIN (with the token and
 *                                                the deadline: the send of
 *                                                that LOCK + validity)
 *     (-R P: in P percent, the daemon connection is reset (RST) at once)
 *     (EXTEND <name> token=.. ttl=T when less than half the ttl is left,
 *      and in -E P percent of the sections anyway: a new deadline)
 *     GET, sleep, WRITE/END as above, unless the deadline is near (ABORT)
 *     UNLOCK <name> token=..                     -> RELEASE, which ends it
 *
 * EXTEND and UNLOCK go, in -X P percent, through another daemon of the
 * -p list than the one that granted the lease (a connection of their
 * own), else through the daemon connection (or a new one to the same
 * daemon).  A lease section runs until the UNLOCK was sent, or until its
 * deadline when that comes first: the holder stops relying on the lock
 * there.
 *
 * and logs every step to its own file, one line per write(2) with
 * O_APPEND, so that a SIGKILL loses at most the line being written.
 * Every line is "<EVENT> <CLOCK_MONOTONIC microseconds> key=value...";
 * the monotonic clock is one clock for the whole machine, so the lines
 * of all clients and of the orchestrator compare.  The events that the
 * checker (checker.c) reads:
 *
 *     BEGIN us name=N fence=F validity=V acquire_us=A port=P pid=X
 *           kind=exclusive|shared|counted [limit=L permit=I]
 *           the OK of the LOCK was read; A is the time since the first
 *           LOCK of this section was sent (retries and reconnects included);
 *           V the validity the daemon reported, L and I what it said of
 *           a counted hold
 *     WRITE us fence=F value=X      about to write X (the write may or may
 *                                   not land if the client dies now)
 *     END us fence=F read=R wrote=X prev_fence=PF
 *           the write was acknowledged; PF is the fence of the previous
 *           write, which the counter's script keeps next to the counter
 *     END us fence=F read=R reread=R2
 *           a shared holder's section: R read at its start, R2 at its end
 *           (a write in between means an exclusive holder overlapped it)
 *     ABORT us fence=F why=lost|eof|counter|expired|notheld [reason=R]
 *           the lock was lost ("! LOST", R its reason=) or the daemon
 *           connection closed before the write: nothing was written; in
 *           a lease section, its deadline was near (expired) or an
 *           EXTEND answered NOTHELD
 *     REJECT us fence=F prev_fence=PF
 *           (-F, -G) the fenced write (-G: or read) was refused: the fence
 *           PF kept next to the counter is not smaller than F; nothing
 *           was written, and a session section ends here
 *     WAIT us name=N wait=W port=P
 *           a LOCK with wait=W > 0 is sent (a polling client's wait=0 is
 *           not logged): the client waits for the name from here until
 *           its next line that is not a PUSH (BEGIN, TIMEOUT, NOQUORUM,
 *           ERROR, DISCONNECT or EXIT)
 *     UNLOCK us <the answer's line>
 *           a session section's UNLOCK was answered ("OK <name> holds=0":
 *           the name is free of this hold from here), or "UNLOCK us send
 *           failed", "UNLOCK us no reply (...)"
 *
 * and in a lease section (BEGIN ... mode=lease token=T deadline_us=D):
 *
 *     EXTEND us fence=F answer=OK|NOTHELD|... [deadline_us=D] port=P
 *           the EXTEND's answer; with OK, D = its send + the validity
 *     RELEASE us fence=F sent_us=S answer=OK|NOTHELD|NOQUORUM|none port=P
 *           the UNLOCK by token was sent at S and answered at us: the
 *           section ends at S (or at its deadline, or at its ABORT)
 *
 * A PUSH line "! LOST <name> reason=broken" read after a section ended
 * (before the answer to its UNLOCK) is logged as it comes: the checker
 * reads it as that section's.
 *
 * The others (START, CONNECT, TIMEOUT, NOQUORUM, PUSH, ERROR, EXIT) are
 * there for people, and end a wait.
 *
 * When the daemon connection breaks, the client connects again, to the
 * next daemon in its -p list when the first is gone.  A -p entry is a
 * port of 127.0.0.1 or ADDR:PORT (a daemon in a network namespace of the
 * suite's); the logs name the port only.
 *
 * -a PASSWORD sends AUTH first on every connection (a daemon that listens
 * beyond loopback requires it).
 *
 * -I makes a broken client for the suite's negative controls: it logs a
 * "! LOST" push but goes on as if it still held the lock, and writes;
 * in a lease section it does not track the lease at all (no deadline in
 * its BEGIN, no check of it).  -Z D makes another: every fence it logs
 * is the grant's plus D (D may be negative; the resource still gets the
 * real one).  SIGTERM asks it to stop: a pending LOCK is abandoned at
 * once, a section in progress is finished first.
 *
 * The daemon connection is the client library's (client/client.h).
 *
 * Exit status: 0 stopped or done, 2 bad usage, 3 the counter's
 * redis-server failed, 4 the log could not be written.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <hiredis/hiredis.h>

#include "client/client.h"
#include "tests/faults/client_common.h"

#define RMW_PORTS_MAX       8       /* daemons a client may know */
#define RMW_NAME_MAX        64      /* longest lock name accepted here */
#define RMW_CONNECT_MS      2000    /* connect to a daemon */
#define RMW_REPLY_SLACK_MS  10000   /* a reply may take this long beyond wait= */
#define RMW_REDIS_MS        2000    /* counter redis: connect and command timeout */
#define RMW_RECONNECT_MS    50      /* pause after a failed connect */
#define RMW_NOQUORUM_MIN_MS 20      /* retry after ERR NOQUORUM: 20..100 ms */
#define RMW_NOQUORUM_MAX_MS 100
#define RMW_LEASE_MARGIN_MS 50      /* a lease section writes only this long before its deadline */
#define RMW_TOKEN_MAX       64      /* room for a lease token (32 hex digits) */
#define RMW_SET_MAX         8       /* names of a set (-n P,Q,...) */

#define RMW_EXIT_COUNTER    3

/* The counter's write: unconditional (so that an overlap does lose an
   update), and it keeps the writer's fence to answer the previous one:
   {1, previous fence}, the same shape as the fenced write's answer. */
static const char rmw_write_script[] =
    "local prev = tonumber(redis.call('GET', KEYS[2]) or '0') "
    "redis.call('SET', KEYS[1], ARGV[1]) "
    "redis.call('SET', KEYS[2], ARGV[2]) "
    "return {1, prev}";

/* The fenced write (-F): {1, previous fence} when it wrote, {0, stored
   fence} when the writer's fence is not above the stored one. */
static const char rmw_fenced_script[] =
    "local prev = tonumber(redis.call('GET', KEYS[2]) or '0') "
    "if tonumber(ARGV[2]) <= prev then return {0, prev} end "
    "redis.call('SET', KEYS[1], ARGV[1]) "
    "redis.call('SET', KEYS[2], ARGV[2]) "
    "return {1, prev}";

/* The guarded write (-G): the resource keeps the largest fence it has
   seen (KEYS[3]) and refuses a smaller one, {0, that fence}; else it
   writes, raises it and answers {1, previous write's fence}. */
static const char rmw_guarded_script[] =
    "local seen = tonumber(redis.call('GET', KEYS[3]) or '0') "
    "if tonumber(ARGV[2]) < seen then return {0, seen} end "
    "local prev = tonumber(redis.call('GET', KEYS[2]) or '0') "
    "redis.call('SET', KEYS[1], ARGV[1]) "
    "redis.call('SET', KEYS[2], ARGV[2]) "
    "redis.call('SET', KEYS[3], ARGV[2]) "
    "return {1, prev}";

/* The guarded read (-G): {1, counter}, or {0, largest fence seen} when
   the reader's fence (ARGV[1]) is below it; an exclusive reader
   (ARGV[2] 1) raises it to its own. */
static const char rmw_guarded_read_script[] =
    "local seen = tonumber(redis.call('GET', KEYS[2]) or '0') "
    "if tonumber(ARGV[1]) < seen then return {0, seen} end "
    "if ARGV[2] == '1' then redis.call('SET', KEYS[2], ARGV[1]) end "
    "return {1, tonumber(redis.call('GET', KEYS[1]) or '0')}";

/* Command-line settings; filled once by rmw_parse_args. */
struct rmw_opts {
    int         ports[RMW_PORTS_MAX];   /* daemon TCP ports, preferred first */
    char        addrs[RMW_PORTS_MAX][CC_ADDR_MAX]; /* "ADDR:PORT" of each */
    size_t      nports;                 /* entries in ports and addrs */
    int         counter_port;           /* redis-server holding the counter */
    const char *name;                   /* lock name (a set's: its names, comma-separated,
                                           as the logs say it) */
    char        wire[RMW_NAME_MAX + 1]; /* the name as the protocol says it (a set's:
                                           space-separated) */
    char        names[RMW_SET_MAX][RMW_NAME_MAX + 1]; /* a set's names; names[0] = name
                                           otherwise */
    size_t      nnames;                 /* names locked at once: 1, or a set's 2.. */
    const char *log_path;               /* this client's event log */
    long        sections;               /* sections to run; 0: until SIGTERM */
    long        ttl_ms;                 /* ttl= of each LOCK */
    long        wait_ms;                /* wait= of each LOCK (poll mode: 0) */
    long        sleep_min_ms;           /* in-section sleep, lower bound */
    long        sleep_max_ms;           /* in-section sleep, upper bound */
    long        poll_ms;                /* > 0: LOCK wait=0, retried every poll_ms */
    long        think_min_ms;           /* random pause think_min_ms..think_ms */
    long        think_ms;               /* between sections */
    long        limit;                  /* > 0: LOCK ... limit=N (a counted name) */
    bool        shared;                 /* LOCK ... shared: read only */
    bool        ignore_lost;            /* -I: a broken client that ignores "! LOST" */
    const char *password;               /* -a: sent with AUTH on each connection, or NULL */
    bool        fenced;                 /* -F: the write is refused with a stale fence */
    bool        guarded;                /* -G: reads and writes are refused with a fence
                                           below the largest the resource has seen */
    int         lease_pct;              /* -m: percent of the sections in lease mode */
    int         reset_pct;              /* -R: percent of the lease grants whose daemon
                                           connection is reset right after the OK */
    int         extend_pct;             /* -E: percent of the lease sections that EXTEND */
    int         other_pct;              /* -X: percent of the lease EXTENDs and UNLOCKs
                                           sent through another daemon */
    long long   fake_fence;             /* -Z: added to every fence logged (negative
                                           controls); 0: the real ones */
};

/* The connection to a daemon; one per process, reused across reconnects. */
struct rmw_conn {
    struct client cl;               /* socket (-1 when closed), received bytes, last line */
    int     port;                   /* port it reaches, 0 when closed */
    size_t  next;                   /* index in ports of the next daemon to try */
    bool    lost;                   /* "! LOST <name>" read since the last grant */
    char    lost_reason[16];        /* its reason=, "" when it had none */
    bool    eof;                    /* the daemon closed the connection (or it failed) */
};

static struct rmw_opts rmw_o;               /* settings */

/* ---- chances and fences ---- */

/* True in pct percent of the calls. */
static bool
rmw_chance(int pct)
{
    return pct > 0 && cc_random(0, 99) < pct;
}

/* A fence as this client logs it: the grant's, plus -Z (missing stays -1). */
static long long
rmw_shown_fence(long long fence)
{
    return fence < 0 ? fence : fence + rmw_o.fake_fence;
}

/* ---- the daemon connection ---- */

static void
rmw_disconnect(struct rmw_conn *c)
{
    client_close(&c->cl);
    c->port = 0;
    c->eof = false;
}

static int rmw_send(struct rmw_conn *c, const char *line);
static int rmw_reply(struct rmw_conn *c, int64_t deadline_us);

/* -a: send AUTH on a new connection.  0 when the daemon said OK, else -1. */
static int
rmw_auth(struct rmw_conn *c)
{
    char req[CC_LINE_MAX], shown[CC_LINE_MAX];

    if (rmw_o.password == NULL) {
        return 0;
    }
    snprintf(req, sizeof(req), "AUTH %s", rmw_o.password);
    if (rmw_send(c, req) != 0) {
        return -1;
    }
    if (rmw_reply(c, cc_now_us() + RMW_CONNECT_MS * 1000LL) == 1
        && strcmp(c->cl.line, "OK") == 0) {
        return 0;
    }
    cc_printable(c->eof ? "(connection closed)" : c->cl.line, shown, sizeof(shown));
    cc_log("ERROR %lld AUTH answered: %s", (long long)cc_now_us(), shown);
    return -1;
}

/* Connect to daemon d of the -p list (and AUTH, with -a).  0 or -1. */
static int
rmw_connect_one(struct rmw_conn *c, size_t d)
{
    int one = 1;

    rmw_disconnect(c);
    if (client_connect_tcp(&c->cl, rmw_o.addrs[d], client_now_ms() + RMW_CONNECT_MS) != 0) {
        return -1;
    }
    setsockopt(c->cl.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->port = rmw_o.ports[d];
    if (rmw_auth(c) != 0) {
        rmw_disconnect(c);
        return -1;
    }
    return 0;
}

/* Connect to the next daemon that accepts (and AUTH, with -a), trying each once.  0 or -1. */
static int
rmw_connect(struct rmw_conn *c)
{
    size_t tries;

    for (tries = 0; tries < rmw_o.nports; tries++) {
        if (rmw_connect_one(c, c->next) == 0) {
            cc_log("CONNECT %lld port=%d", (long long)cc_now_us(), c->port);
            return 0;
        }
        if (errno == EINTR && cc_stop) {
            return -1;
        }
        /* This one refused: the next attempt goes to the next daemon. */
        c->next = (c->next + 1) % rmw_o.nports;
    }
    return -1;
}

/*
 * Reset the daemon connection (SO_LINGER 0, then close: the kernel sends
 * RST instead of FIN), as a client that crashes or is killed right after
 * reading a reply.
 */
static void
rmw_reset(struct rmw_conn *c)
{
    struct linger lg = { 1, 0 };

    if (c->cl.fd < 0) {
        return;
    }
    setsockopt(c->cl.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    cc_log("RESET %lld port=%d", (long long)cc_now_us(), c->port);
    rmw_disconnect(c);
}

/* Send line + LF.  0, or -1 (the connection is then marked broken). */
static int
rmw_send(struct rmw_conn *c, const char *line)
{
    if (client_send(&c->cl, line, -1) != 0) {
        c->eof = true;
        return -1;
    }
    return 0;
}

/* A pushed line in c->cl.line: logged; "! LOST <name> ..." for our name sets c->lost. */
static void
rmw_push(struct rmw_conn *c)
{
    char shown[CC_LINE_MAX];

    bool lost = client_is_reply(c->cl.line, "! LOST", rmw_o.wire);

    if (lost && !rmw_o.ignore_lost) {
        c->lost = true;
        if (!client_field(c->cl.line, "reason", c->lost_reason, sizeof(c->lost_reason))) {
            c->lost_reason[0] = '\0';
        }
    }
    cc_printable(c->cl.line, shown, sizeof(shown));
    cc_log("PUSH %lld %s%s", (long long)cc_now_us(), shown,
            lost && rmw_o.ignore_lost ? " (ignored: -I)" : "");
}

/*
 * Read the next reply line into c->cl.line (pushed lines are handled
 * and skipped) until deadline_us.  Returns 1 with the line, 0 at the
 * deadline, -1 when the connection ended, -2 when SIGTERM asked us to
 * stop.
 */
static int
rmw_reply(struct rmw_conn *c, int64_t deadline_us)
{
    for (;;) {
        switch (client_read_line(&c->cl, (deadline_us + 999) / 1000)) {
        case CLIENT_LINE:
            if (client_is_push(c->cl.line)) {
                rmw_push(c);
                continue;
            }
            return 1;
        case CLIENT_TIMEOUT:
            return 0;
        case CLIENT_INTR:
            if (cc_stop) {
                return -2;
            }
            continue;
        case CLIENT_EOF:
        case CLIENT_ERROR:
            break;
        }
        c->eof = true;
        return -1;
    }
}

/*
 * Inside a section: wait up to ms, reading pushed lines, and return
 * early when the lock is lost or the connection ends.  ms = 0 only
 * looks at what already arrived (the check before the write), and so
 * does the rest of a call once the lock is lost.  SIGTERM does not cut
 * a section short.
 */
static void
rmw_watch(struct rmw_conn *c, long ms)
{
    int64_t deadline = client_now_ms() + ms;
    char shown[CC_LINE_MAX];

    while (!c->eof) {
        switch (client_read_line(&c->cl, c->lost ? 0 : deadline)) {
        case CLIENT_LINE:
            if (client_is_push(c->cl.line)) {
                rmw_push(c);
            } else {
                /* No request is outstanding inside a section. */
                cc_printable(c->cl.line, shown, sizeof(shown));
                cc_log("UNEXPECTED %lld %s", (long long)cc_now_us(), shown);
            }
            continue;
        case CLIENT_INTR:
            continue;
        case CLIENT_TIMEOUT:
            return;
        case CLIENT_EOF:
        case CLIENT_ERROR:
            c->eof = true;
            return;
        }
    }
}

/* ---- the lock ---- */

/* The integer of "key=<digits>" in a reply line, or -1. */
static long long
rmw_field(const char *line, const char *key)
{
    int64_t v;

    return client_field_int(line, key, &v) ? (long long)v : -1;
}

/* What the OK of a LOCK said. */
struct rmw_grant {
    long long fence;                /* fence=, -1 when absent (a set's: its first) */
    long long fences[RMW_SET_MAX];  /* a set's: each name's, in the order given; -1
                                       when absent */
    long long validity;             /* validity=, -1 when absent */
    long long limit;                /* limit= (a counted hold), -1 when absent */
    long long permit;               /* permit= (a counted hold), -1 when absent */
    char      kind[16];             /* kind=, "exclusive" when absent */
    bool      lease;                /* asked with mode=lease */
    char      token[RMW_TOKEN_MAX]; /* token= (a lease), "" when absent */
    int64_t   sent_us;              /* when the LOCK that was granted was sent */
};

/* A set's OK: fence=F1,F2,... into g->fences (one per name, else -1 each). */
static void
rmw_set_fences(const char *line, struct rmw_grant *g)
{
    char list[RMW_SET_MAX * 24], *p, *end;
    size_t i;

    for (i = 0; i < RMW_SET_MAX; i++) {
        g->fences[i] = -1;
    }
    if (rmw_o.nnames < 2 || !client_field(line, "fence", list, sizeof(list))) {
        return;
    }
    p = list;
    for (i = 0; i < rmw_o.nnames; i++) {
        errno = 0;
        g->fences[i] = strtoll(p, &end, 10);
        if (errno != 0 || end == p || (*end != ',' && *end != '\0')
            || (*end == '\0') != (i + 1 == rmw_o.nnames)) {
            break;
        }
        p = end + 1;
    }
    if (i < rmw_o.nnames) {
        cc_log("ERROR %lld a set's OK without one fence per name: fence=%s",
                (long long)cc_now_us(), list);
        for (i = 0; i < rmw_o.nnames; i++) {
            g->fences[i] = -1;
        }
    }
    g->fence = g->fences[0];
}

/*
 * Take the lock, retrying through TIMEOUT and ERR NOQUORUM.  Returns 0
 * with *g filled, -1 when the connection broke (the caller reconnects),
 * -2 when SIGTERM asked us to stop.
 */
static int
rmw_acquire(struct rmw_conn *c, struct rmw_grant *g, bool lease)
{
    char req[RMW_NAME_MAX + 128], shown[CC_LINE_MAX], kind[32] = "";
    const char *line = c->cl.line;
    long wait = rmw_o.poll_ms > 0 ? 0 : rmw_o.wait_ms;
    int rc;

    if (rmw_o.shared) {
        snprintf(kind, sizeof(kind), " shared");
    } else if (rmw_o.limit > 0) {
        snprintf(kind, sizeof(kind), " limit=%ld", rmw_o.limit);
    }
    snprintf(req, sizeof(req), "LOCK %s ttl=%ld wait=%ld%s fence%s", rmw_o.wire, rmw_o.ttl_ms,
             wait, lease ? " mode=lease" : "", kind);
    g->lease = lease;
    for (;;) {
        if (cc_stop) {
            return -2;
        }
        c->lost = false;
        c->lost_reason[0] = '\0';
        g->sent_us = cc_now_us();
        if (wait > 0) {
            /* The checker's liveness: waiting from here to the next line but a PUSH. */
            cc_log("WAIT %lld name=%s wait=%ld port=%d", (long long)g->sent_us, rmw_o.name,
                    wait, c->port);
        }
        if (rmw_send(c, req) != 0) {
            return -1;
        }
        rc = rmw_reply(c, cc_now_us() + (int64_t)(wait + RMW_REPLY_SLACK_MS) * 1000);
        if (rc == -2) {
            return -2;
        }
        if (rc == 0) {
            cc_log("ERROR %lld no reply to LOCK within %ld ms; reconnecting",
                    (long long)cc_now_us(), wait + RMW_REPLY_SLACK_MS);
            return -1;
        }
        if (rc < 0) {
            return -1;
        }
        if (client_is_reply(line, "OK", rmw_o.wire)) {
            g->fence = rmw_field(line, "fence");
            rmw_set_fences(line, g);
            g->validity = rmw_field(line, "validity");
            g->limit = rmw_field(line, "limit");
            g->permit = rmw_field(line, "permit");
            if (!client_field(line, "kind", g->kind, sizeof(g->kind))) {
                snprintf(g->kind, sizeof(g->kind), "exclusive");
            }
            if (!client_field(line, "token", g->token, sizeof(g->token))) {
                g->token[0] = '\0';
            }
            if (lease && (g->token[0] == '\0' || g->validity < 0)) {
                cc_printable(line, shown, sizeof(shown));
                cc_log("ERROR %lld a lease's OK without token= or validity=: %s",
                        (long long)cc_now_us(), shown);
                return -1;
            }
            return 0;
        }
        cc_printable(line, shown, sizeof(shown));
        if (client_is_status(line, "TIMEOUT")) {
            if (rmw_o.poll_ms == 0) {
                cc_log("TIMEOUT %lld", (long long)cc_now_us());
            }
            if (!cc_sleep_ms(rmw_o.poll_ms, true)) {
                return -2;
            }
        } else if (client_is_err(line, "NOQUORUM")) {
            cc_log("NOQUORUM %lld %s", (long long)cc_now_us(), client_err_text(shown));
            if (!cc_sleep_ms(cc_random(RMW_NOQUORUM_MIN_MS, RMW_NOQUORUM_MAX_MS), true)) {
                return -2;
            }
        } else if (client_is_err(line, "SHUTDOWN")) {
            cc_log("ERROR %lld %s", (long long)cc_now_us(), shown);
            return -1;
        } else {
            /* Not an answer this client expects: note it and try again. */
            cc_log("ERROR %lld LOCK answered: %s", (long long)cc_now_us(), shown);
            if (!cc_sleep_ms(RMW_NOQUORUM_MAX_MS, true)) {
                return -2;
            }
        }
    }
}

/* UNLOCK after a section that wrote; the reply is only logged. */
static void
rmw_unlock(struct rmw_conn *c)
{
    char req[RMW_NAME_MAX + 16], shown[CC_LINE_MAX];
    int rc;

    snprintf(req, sizeof(req), "UNLOCK %s", rmw_o.wire);
    if (rmw_send(c, req) != 0) {
        cc_log("UNLOCK %lld send failed", (long long)cc_now_us());
        return;
    }
    /* Not interrupted by SIGTERM: the reply comes within a round. */
    do {
        rc = rmw_reply(c, cc_now_us() + RMW_REPLY_SLACK_MS * 1000LL);
    } while (rc == -2);
    if (rc == 1) {
        cc_printable(c->cl.line, shown, sizeof(shown));
        cc_log("UNLOCK %lld %s", (long long)cc_now_us(), shown);
    } else {
        cc_log("UNLOCK %lld no reply (%s)", (long long)cc_now_us(),
                rc == 0 ? "timeout" : "connection closed");
        c->eof = true;
    }
}

/* ---- the counter ---- */

static redisContext *
rmw_counter_connect(void)
{
    struct timeval tv = { RMW_REDIS_MS / 1000, (RMW_REDIS_MS % 1000) * 1000 };
    redisContext *r;

    r = redisConnectWithTimeout("127.0.0.1", rmw_o.counter_port, tv);
    if (r == NULL || r->err != 0 || redisSetTimeout(r, tv) != REDIS_OK) {
        cc_log("ERROR %lld cannot connect to the counter on port %d: %s",
                (long long)cc_now_us(), rmw_o.counter_port,
                r != NULL ? r->errstr : "out of memory");
        if (r != NULL) {
            redisFree(r);
        }
        return NULL;
    }
    return r;
}

/* GET counter:<id>: 0 with *value (0 when absent), or -1. */
static int
rmw_counter_get(redisContext *r, const char *id, long long *value)
{
    redisReply *rep;
    int rc = -1;

    rep = redisCommand(r, "GET counter:%s", id);
    if (rep != NULL && rep->type == REDIS_REPLY_NIL) {
        *value = 0;
        rc = 0;
    } else if (rep != NULL && rep->type == REDIS_REPLY_STRING) {
        *value = strtoll(rep->str, NULL, 10);
        rc = 0;
    }
    if (rep != NULL) {
        freeReplyObject(rep);
    }
    return rc;
}

/* {integer, integer} of a script: 0 with both, else -1. */
static int
rmw_pair(const redisReply *rep, long long *a, long long *b)
{
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2
        || rep->element[0]->type != REDIS_REPLY_INTEGER
        || rep->element[1]->type != REDIS_REPLY_INTEGER) {
        return -1;
    }
    *a = rep->element[0]->integer;
    *b = rep->element[1]->integer;
    return 0;
}

/*
 * Read counter:<id> as the holder of fence: plainly, or with -G through
 * the guard (an exclusive reader raises the fence seen).  1 with *value,
 * 0 when the guard refused (*seen: the fence it has seen), -1 on an
 * error.
 */
static int
rmw_counter_read(redisContext *r, const char *id, long long fence, bool exclusive,
                 long long *value, long long *seen)
{
    redisReply *rep;
    long long ok;
    int rc = -1;

    if (!rmw_o.guarded) {
        return rmw_counter_get(r, id, value) == 0 ? 1 : -1;
    }
    rep = redisCommand(r, "EVAL %s 2 counter:%s seen:%s %lld %d", rmw_guarded_read_script, id,
                       id, fence, exclusive ? 1 : 0);
    if (rmw_pair(rep, &ok, value) == 0) {
        *seen = *value;
        rc = ok == 1 ? 1 : 0;
    }
    if (rep != NULL) {
        freeReplyObject(rep);
    }
    return rc;
}

/*
 * Write value with fence to counter:<id>, fenced (-F: refused unless
 * fence is above the stored one), guarded (-G: refused when fence is
 * below the largest the resource has seen) or not: 1 when it landed, 0
 * when it was refused, -1 on an error; *prev is the fence kept next to
 * the counter before the call (refused under -G: the largest seen).
 */
static int
rmw_counter_put(redisContext *r, const char *id, long long value, long long fence,
                long long *prev)
{
    redisReply *rep;
    long long ok;
    int rc = -1;

    if (rmw_o.guarded) {
        rep = redisCommand(r, "EVAL %s 3 counter:%s fence:%s seen:%s %lld %lld",
                           rmw_guarded_script, id, id, id, value, fence);
    } else {
        rep = redisCommand(r, "EVAL %s 2 counter:%s fence:%s %lld %lld",
                           rmw_o.fenced ? rmw_fenced_script : rmw_write_script, id, id, value,
                           fence);
    }
    if (rmw_pair(rep, &ok, prev) == 0) {
        rc = ok == 1 ? 1 : 0;
    }
    if (rep != NULL) {
        freeReplyObject(rep);
    }
    return rc;
}

/* ---- a section ---- */

/* The counter a grant guards: counter:<name>, or counter:<name>:<permit>. */
static void
rmw_counter_id(const struct rmw_grant *g, char *id, size_t size)
{
    if (g->permit >= 0) {
        snprintf(id, size, "%s:%lld", rmw_o.name, g->permit);
    } else {
        snprintf(id, size, "%s", rmw_o.name);
    }
}

/*
 * The work of a section once the lock is (believed) held and the sleep
 * is over: a shared holder reads again and logs END; another writes
 * read+1 and logs WRITE and END, or REJECT when the resource refused.
 * Returns 0, or -1 when the counter's redis-server failed (the caller
 * exits).
 */
static int
rmw_work(redisContext *counter, const char *id, long long fence, long long value)
{
    long long shown = rmw_shown_fence(fence), prev = 0, reread = 0;
    int rc;

    if (rmw_o.shared) {
        /* A reader: the counter must be what it was at the start. */
        rc = rmw_counter_read(counter, id, fence, false, &reread, &prev);
        if (rc < 0) {
            cc_log("ABORT %lld fence=%lld why=counter", (long long)cc_now_us(), shown);
            return -1;
        }
        if (rc == 0) {
            cc_log("REJECT %lld fence=%lld prev_fence=%lld", (long long)cc_now_us(), shown,
                    prev);
        } else {
            cc_log("END %lld fence=%lld read=%lld reread=%lld", (long long)cc_now_us(),
                    shown, value, reread);
        }
        return 0;
    }
    cc_log("WRITE %lld fence=%lld value=%lld", (long long)cc_now_us(), shown, value + 1);
    rc = rmw_counter_put(counter, id, value + 1, fence, &prev);
    if (rc < 0) {
        cc_log("ERROR %lld the counter's write failed", (long long)cc_now_us());
        return -1;
    }
    if (rc == 0) {
        /* Refused: a later holder wrote (or, -G, read) first. */
        cc_log("REJECT %lld fence=%lld prev_fence=%lld", (long long)cc_now_us(), shown, prev);
    } else {
        cc_log("END %lld fence=%lld read=%lld wrote=%lld prev_fence=%lld",
                (long long)cc_now_us(), shown, value, value + 1, prev);
    }
    return 0;
}

/*
 * The first read of a section: 1 with *value; 0 when the guard refused
 * it (REJECT is logged: nothing is written); -1 when the counter failed
 * (ABORT why=counter is logged).
 */
static int
rmw_first_read(redisContext *counter, const char *id, long long fence, long long *value)
{
    long long seen = 0;
    int rc = rmw_counter_read(counter, id, fence, !rmw_o.shared, value, &seen);

    if (rc < 0) {
        cc_log("ABORT %lld fence=%lld why=counter", (long long)cc_now_us(),
                rmw_shown_fence(fence));
    } else if (rc == 0) {
        cc_log("REJECT %lld fence=%lld prev_fence=%lld", (long long)cc_now_us(),
                rmw_shown_fence(fence), seen);
    }
    return rc;
}

/* A set's fences as its lines say them: "F1,F2,..." (with -Z, each shifted). */
static void
rmw_fence_list(const struct rmw_grant *g, char *out, size_t size)
{
    size_t i, used = 0;

    out[0] = '\0';
    for (i = 0; i < rmw_o.nnames && used < size; i++) {
        used += (size_t)snprintf(out + used, size - used, "%s%lld", i > 0 ? "," : "",
                                 rmw_shown_fence(g->fences[i]));
    }
}

/* The BEGIN line of a grant. */
static void
rmw_begin(const struct rmw_grant *g, int64_t begin_us, int64_t acquire_us, int port,
          int64_t deadline_us)
{
    char extra[64] = "", lease[RMW_TOKEN_MAX + 64] = "", fences[RMW_SET_MAX * 24];

    if (rmw_o.nnames > 1) {
        rmw_fence_list(g, fences, sizeof(fences));
        cc_log("BEGIN %lld name=%s fence=%s validity=%lld acquire_us=%lld port=%d pid=%d "
                "kind=exclusive set=%zu", (long long)begin_us, rmw_o.name, fences, g->validity,
                (long long)acquire_us, port, (int)getpid(), rmw_o.nnames);
        return;
    }

    if (strcmp(g->kind, "counted") == 0) {
        snprintf(extra, sizeof(extra), " limit=%lld permit=%lld", g->limit, g->permit);
    }
    if (g->lease && deadline_us > 0) {
        snprintf(lease, sizeof(lease), " mode=lease token=%s deadline_us=%lld", g->token,
                 (long long)deadline_us);
    } else if (g->lease) {
        snprintf(lease, sizeof(lease), " mode=lease token=%s", g->token);
    }
    cc_log("BEGIN %lld name=%s fence=%lld validity=%lld acquire_us=%lld port=%d pid=%d "
            "kind=%s%s%s", (long long)begin_us, rmw_o.name, rmw_shown_fence(g->fence),
            g->validity, (long long)acquire_us, port, (int)getpid(), g->kind, extra, lease);
}

/*
 * A session section: the daemon renews the lock while the connection is
 * open and says "! LOST" when it cannot.  Returns 0, or -1 when the
 * counter failed.
 */
static int
rmw_session_section(struct rmw_conn *c, redisContext *counter, const struct rmw_grant *g)
{
    char id[RMW_NAME_MAX + 32], reason[32] = "";
    long long fence = g->fence, value = 0;
    int rc;

    rmw_counter_id(g, id, sizeof(id));
    rc = rmw_first_read(counter, id, fence, &value);
    if (rc < 0) {
        return -1;
    }
    if (rc > 0) {
        rmw_watch(c, cc_random(rmw_o.sleep_min_ms, rmw_o.sleep_max_ms));
        /* The check before the write: only what already arrived. */
        rmw_watch(c, 0);
        if (c->lost || c->eof) {
            if (c->lost && c->lost_reason[0] != '\0') {
                snprintf(reason, sizeof(reason), " reason=%s", c->lost_reason);
            }
            cc_log("ABORT %lld fence=%lld why=%s%s", (long long)cc_now_us(),
                    rmw_shown_fence(fence), c->lost ? "lost" : "eof", reason);
            if (c->eof) {
                cc_log("DISCONNECT %lld port=%d", (long long)cc_now_us(), c->port);
                rmw_disconnect(c);
            }
            return 0;
        }
        if (rmw_work(counter, id, fence, value) != 0) {
            return -1;
        }
    }
    rmw_unlock(c);
    if (c->eof) {
        cc_log("DISCONNECT %lld port=%d", (long long)cc_now_us(), c->port);
        rmw_disconnect(c);
    }
    return 0;
}

/*
 * A set's section (-n P,Q,...): one grant, the read-modify-write of
 * every name's counter under it, each with the name's own fence; one
 * LOST (or a closed connection) before the writes ends it with no
 * write.  Returns 0, or -1 when the counter failed.
 */
static int
rmw_set_section(struct rmw_conn *c, redisContext *counter, const struct rmw_grant *g)
{
    char fences[RMW_SET_MAX * 24], reason[32] = "";
    long long values[RMW_SET_MAX], prev, shown;
    size_t i;
    int rc;

    rmw_fence_list(g, fences, sizeof(fences));
    for (i = 0; i < rmw_o.nnames; i++) {
        if (rmw_counter_get(counter, rmw_o.names[i], &values[i]) != 0) {
            cc_log("ABORT %lld name=%s fence=%s why=counter", (long long)cc_now_us(),
                    rmw_o.name, fences);
            return -1;
        }
    }
    rmw_watch(c, cc_random(rmw_o.sleep_min_ms, rmw_o.sleep_max_ms));
    rmw_watch(c, 0);
    if (c->lost || c->eof) {
        if (c->lost && c->lost_reason[0] != '\0') {
            snprintf(reason, sizeof(reason), " reason=%s", c->lost_reason);
        }
        cc_log("ABORT %lld name=%s fence=%s why=%s%s", (long long)cc_now_us(), rmw_o.name,
                fences, c->lost ? "lost" : "eof", reason);
        if (c->eof) {
            cc_log("DISCONNECT %lld port=%d", (long long)cc_now_us(), c->port);
            rmw_disconnect(c);
        }
        return 0;
    }
    for (i = 0; i < rmw_o.nnames; i++) {
        shown = rmw_shown_fence(g->fences[i]);
        cc_log("WRITE %lld name=%s fence=%lld value=%lld", (long long)cc_now_us(),
                rmw_o.names[i], shown, values[i] + 1);
        rc = rmw_counter_put(counter, rmw_o.names[i], values[i] + 1, g->fences[i], &prev);
        if (rc < 0) {
            cc_log("ERROR %lld the counter's write failed", (long long)cc_now_us());
            return -1;
        }
        cc_log("END %lld name=%s fence=%lld read=%lld wrote=%lld prev_fence=%lld",
                (long long)cc_now_us(), rmw_o.names[i], shown, values[i], values[i] + 1, prev);
    }
    rmw_unlock(c);
    if (c->eof) {
        cc_log("DISCONNECT %lld port=%d", (long long)cc_now_us(), c->port);
        rmw_disconnect(c);
    }
    return 0;
}

/*
 * Send line through daemon d of the -p list on a connection of its own
 * (the next daemons when d refuses) and read the answer into out.
 * Returns 1 with the answer, 0 when none came; *port: the daemon that
 * took it; *sent_us: when it was sent.
 */
static int
rmw_side(size_t d, const char *line, char *out, size_t size, int *port, int64_t *sent_us)
{
    struct rmw_conn side;
    size_t tries;
    int rc = 0;

    memset(&side, 0, sizeof(side));
    client_init(&side.cl, -1, 0);
    *port = 0;
    *sent_us = cc_now_us();
    for (tries = 0; tries < rmw_o.nports; tries++, d = (d + 1) % rmw_o.nports) {
        if (rmw_connect_one(&side, d) != 0) {
            continue;
        }
        *port = side.port;
        *sent_us = cc_now_us();
        if (rmw_send(&side, line) == 0) {
            do {
                rc = rmw_reply(&side, cc_now_us() + RMW_REPLY_SLACK_MS * 1000LL);
            } while (rc == -2);
        }
        if (rc == 1) {
            snprintf(out, size, "%s", side.cl.line);
        }
        rmw_disconnect(&side);
        return rc == 1 ? 1 : 0;
    }
    return 0;
}

/*
 * Send a lease's EXTEND or UNLOCK: in -X percent through another daemon
 * than granted (the index of the one that granted it), else on the
 * daemon connection when it still goes there, else on a new connection
 * to that daemon.  As rmw_side().
 */
static int
rmw_lease_send(struct rmw_conn *c, size_t granted, const char *line, char *out, size_t size,
               int *port, int64_t *sent_us)
{
    size_t d = granted;
    int rc;

    if (rmw_o.nports > 1 && rmw_chance(rmw_o.other_pct)) {
        d = (granted + (size_t)cc_random(1, (long)rmw_o.nports - 1)) % rmw_o.nports;
    } else if (c->cl.fd >= 0 && c->next == granted && !c->eof) {
        *port = c->port;
        *sent_us = cc_now_us();
        if (rmw_send(c, line) != 0) {
            return 0;
        }
        do {
            rc = rmw_reply(c, cc_now_us() + RMW_REPLY_SLACK_MS * 1000LL);
        } while (rc == -2);
        if (rc != 1) {
            c->eof = true;
            return 0;
        }
        snprintf(out, size, "%s", c->cl.line);
        return 1;
    }
    return rmw_side(d, line, out, size, port, sent_us);
}

/* The status word of an answer for the log: OK, NOTHELD, NOQUORUM, ERR, or none. */
static const char *
rmw_answer_word(int got, const char *line)
{
    if (!got) {
        return "none";
    }
    if (client_is_reply(line, "OK", rmw_o.wire)) {
        return "OK";
    }
    if (client_is_reply(line, "NOTHELD", rmw_o.wire)) {
        return "NOTHELD";
    }
    return client_is_err(line, "NOQUORUM") ? "NOQUORUM" : "ERR";
}

/*
 * EXTEND a lease: with OK the deadline moves to the send + the validity.
 * Returns 1 when the answer was NOTHELD (the lease is gone), else 0.
 */
static int
rmw_lease_extend(struct rmw_conn *c, const struct rmw_grant *g, size_t granted,
                 int64_t *deadline_us)
{
    char req[RMW_NAME_MAX + RMW_TOKEN_MAX + 64], ans[CLIENT_LINE_MAX + 1], more[64] = "";
    const char *word;
    int64_t sent_us;
    long long validity;
    int port, got;

    snprintf(req, sizeof(req), "EXTEND %s token=%s ttl=%ld", rmw_o.wire, g->token,
             rmw_o.ttl_ms);
    got = rmw_lease_send(c, granted, req, ans, sizeof(ans), &port, &sent_us);
    word = rmw_answer_word(got, ans);
    if (strcmp(word, "OK") == 0 && (validity = rmw_field(ans, "validity")) > 0) {
        *deadline_us = sent_us + validity * 1000;
        snprintf(more, sizeof(more), " validity=%lld deadline_us=%lld", validity,
                 (long long)*deadline_us);
    }
    cc_log("EXTEND %lld fence=%lld answer=%s%s port=%d", (long long)cc_now_us(),
            rmw_shown_fence(g->fence), word, more, port);
    return strcmp(word, "NOTHELD") == 0 ? 1 : 0;
}

/* UNLOCK a lease by its token; the RELEASE line ends its section. */
static void
rmw_lease_release(struct rmw_conn *c, const struct rmw_grant *g, size_t granted)
{
    char req[RMW_NAME_MAX + RMW_TOKEN_MAX + 32], ans[CLIENT_LINE_MAX + 1];
    int64_t sent_us;
    int port, got;

    snprintf(req, sizeof(req), "UNLOCK %s token=%s", rmw_o.wire, g->token);
    got = rmw_lease_send(c, granted, req, ans, sizeof(ans), &port, &sent_us);
    cc_log("RELEASE %lld fence=%lld sent_us=%lld answer=%s port=%d", (long long)cc_now_us(),
            rmw_shown_fence(g->fence), (long long)sent_us, rmw_answer_word(got, ans), port);
}

/*
 * A lease section: nothing renews the lease and no "! LOST" comes for
 * it, so the client keeps its deadline itself (the send of the LOCK
 * that was granted + the validity: the round that granted it began
 * after that send) and writes only before it (-I: it keeps none).
 * Returns 0, or -1 when the counter failed.
 */
static int
rmw_lease_section(struct rmw_conn *c, redisContext *counter, const struct rmw_grant *g,
                  int64_t begin_us, int64_t acquire_us)
{
    int64_t deadline = rmw_o.ignore_lost ? 0 : g->sent_us + g->validity * 1000;
    size_t granted = c->next;
    char id[RMW_NAME_MAX + 32];
    long long value = 0;
    bool track = !rmw_o.ignore_lost;
    int rc = 1;

    rmw_begin(g, begin_us, acquire_us, c->port, deadline);
    if (rmw_chance(rmw_o.reset_pct)) {
        rmw_reset(c);
    }
    rmw_counter_id(g, id, sizeof(id));
    /* A grant that waited long in the queue has little validity left on our count. */
    if (track && deadline - cc_now_us() < rmw_o.ttl_ms * 1000 / 2
        && rmw_lease_extend(c, g, granted, &deadline) != 0) {
        cc_log("ABORT %lld fence=%lld why=notheld", (long long)cc_now_us(),
                rmw_shown_fence(g->fence));
        rc = 0;
    }
    if (rc > 0) {
        rc = rmw_first_read(counter, id, g->fence, &value);
    }
    if (rc < 0) {
        return -1;
    }
    if (rc > 0) {
        cc_sleep_ms(cc_random(rmw_o.sleep_min_ms, rmw_o.sleep_max_ms), false);
        if (track && rmw_chance(rmw_o.extend_pct)
            && rmw_lease_extend(c, g, granted, &deadline) != 0) {
            cc_log("ABORT %lld fence=%lld why=notheld", (long long)cc_now_us(),
                    rmw_shown_fence(g->fence));
        } else if (track && cc_now_us() + RMW_LEASE_MARGIN_MS * 1000 > deadline) {
            cc_log("ABORT %lld fence=%lld why=expired", (long long)cc_now_us(),
                    rmw_shown_fence(g->fence));
        } else if (rmw_work(counter, id, g->fence, value) != 0) {
            return -1;
        }
    }
    rmw_lease_release(c, g, granted);
    return 0;
}

/* ---- main ---- */

static void
rmw_usage(void)
{
    fprintf(stderr,
            "usage: rmw-client -p [ADDR:]PORT[,...] -r COUNTER_PORT -n NAME[,NAME...] -l LOG\n"
            "                  [-c SECTIONS] [-t TTL_MS] [-w WAIT_MS] [-s MIN_MS[-MAX_MS]]\n"
            "                  [-P POLL_MS] [-k [MIN_MS-]THINK_MS] [-L LIMIT | -S] [-I]\n"
            "                  [-a PASSWORD]\n"
            "                  [-F | -G] [-m LEASE_PCT] [-R RESET_PCT] [-E EXTEND_PCT]\n"
            "                  [-X OTHER_PCT] [-Z FENCE_DELTA]\n");
    exit(CC_EXIT_USAGE);
}

/* A percentage 0..100, or usage. */
static int
rmw_percent(const char *s)
{
    long v = cc_number(s, rmw_usage);

    if (v > 100) {
        rmw_usage();
    }
    return (int)v;
}

/* A decimal number that may be negative, or usage. */
static long long
rmw_signed(const char *s)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') {
        rmw_usage();
    }
    return v;
}

/* -n P,Q,...: the set's names (each a protocol word, no two the same), or the one name. */
static void
rmw_split_set(void)
{
    const char *p = rmw_o.name, *end;
    size_t i, len, used = 0;

    for (rmw_o.nnames = 0; *p != '\0'; rmw_o.nnames++) {
        end = strchr(p, ',');
        len = end != NULL ? (size_t)(end - p) : strlen(p);
        if (rmw_o.nnames == RMW_SET_MAX || len == 0) {
            rmw_usage();
        }
        memcpy(rmw_o.names[rmw_o.nnames], p, len);
        rmw_o.names[rmw_o.nnames][len] = '\0';
        for (i = 0; i < rmw_o.nnames; i++) {
            if (strcmp(rmw_o.names[i], rmw_o.names[rmw_o.nnames]) == 0) {
                rmw_usage();
            }
        }
        used += (size_t)snprintf(rmw_o.wire + used, sizeof(rmw_o.wire) - used, "%s%s",
                                 used > 0 ? " " : "", rmw_o.names[rmw_o.nnames]);
        p = end != NULL ? end + 1 : p + len;
    }
    /* A set is an exclusive session hold, written unguarded. */
    if (rmw_o.nnames > 1 && (rmw_o.limit > 0 || rmw_o.shared || rmw_o.lease_pct > 0
                             || rmw_o.fenced || rmw_o.guarded)) {
        rmw_usage();
    }
}

static void
rmw_parse_args(int argc, char **argv)
{
    char *dash;
    int opt;

    rmw_o.ttl_ms = 3000;
    rmw_o.wait_ms = 10000;
    rmw_o.sleep_min_ms = 5;
    rmw_o.sleep_max_ms = 30;
    while ((opt = getopt(argc, argv, "p:r:n:l:c:t:w:s:P:k:L:SIa:FGm:R:E:X:Z:")) != -1) {
        switch (opt) {
        case 'p':
            rmw_o.nports = cc_daemon_list(optarg, rmw_o.addrs, rmw_o.ports, rmw_o.nports,
                                          RMW_PORTS_MAX, rmw_usage);
            break;
        case 'r':
            rmw_o.counter_port = (int)cc_number(optarg, rmw_usage);
            break;
        case 'n':
            rmw_o.name = optarg;
            break;
        case 'l':
            rmw_o.log_path = optarg;
            break;
        case 'c':
            rmw_o.sections = cc_number(optarg, rmw_usage);
            break;
        case 't':
            rmw_o.ttl_ms = cc_number(optarg, rmw_usage);
            break;
        case 'w':
            rmw_o.wait_ms = cc_number(optarg, rmw_usage);
            break;
        case 's':
            dash = strchr(optarg, '-');
            if (dash != NULL) {
                *dash = '\0';
                rmw_o.sleep_max_ms = cc_number(dash + 1, rmw_usage);
            }
            rmw_o.sleep_min_ms = cc_number(optarg, rmw_usage);
            if (dash == NULL) {
                rmw_o.sleep_max_ms = rmw_o.sleep_min_ms;
            }
            break;
        case 'P':
            rmw_o.poll_ms = cc_number(optarg, rmw_usage);
            break;
        case 'k':
            dash = strchr(optarg, '-');
            if (dash != NULL) {
                *dash = '\0';
                rmw_o.think_min_ms = cc_number(optarg, rmw_usage);
                optarg = dash + 1;
            }
            rmw_o.think_ms = cc_number(optarg, rmw_usage);
            break;
        case 'L':
            rmw_o.limit = cc_number(optarg, rmw_usage);
            if (rmw_o.limit == 0) {
                rmw_usage();
            }
            break;
        case 'S':
            rmw_o.shared = true;
            break;
        case 'I':
            rmw_o.ignore_lost = true;
            break;
        case 'a':
            rmw_o.password = optarg;
            break;
        case 'F':
            rmw_o.fenced = true;
            break;
        case 'G':
            rmw_o.guarded = true;
            break;
        case 'm':
            rmw_o.lease_pct = rmw_percent(optarg);
            break;
        case 'R':
            rmw_o.reset_pct = rmw_percent(optarg);
            break;
        case 'E':
            rmw_o.extend_pct = rmw_percent(optarg);
            break;
        case 'X':
            rmw_o.other_pct = rmw_percent(optarg);
            break;
        case 'Z':
            rmw_o.fake_fence = rmw_signed(optarg);
            break;
        default:
            rmw_usage();
        }
    }
    if (optind != argc || rmw_o.nports == 0 || rmw_o.counter_port == 0
        || rmw_o.name == NULL || rmw_o.log_path == NULL || rmw_o.name[0] == '\0'
        || strlen(rmw_o.name) > RMW_NAME_MAX || strpbrk(rmw_o.name, " \t\r\n") != NULL
        || rmw_o.sleep_max_ms < rmw_o.sleep_min_ms || rmw_o.think_ms < rmw_o.think_min_ms
        || (rmw_o.shared && rmw_o.limit > 0)
        || (rmw_o.fenced && rmw_o.guarded)) {
        rmw_usage();
    }
    rmw_split_set();
}

int
main(int argc, char **argv)
{
    static struct rmw_conn c;
    redisContext *counter;
    struct rmw_grant g;
    int64_t first_us = 0, begin_us;
    long done = 0;
    bool lease;
    int rc;

    rmw_parse_args(argc, argv);
    client_init(&c.cl, -1, 0);
    /* cc_start: a SIGTERM interrupts a blocked LOCK (no SA_RESTART). */
    rc = cc_start("rmw-client", rmw_o.log_path);
    if (rc != 0) {
        return rc;
    }

    cc_log("START %lld pid=%d name=%s ttl=%ld sleep=%ld-%ld poll=%ld sections=%ld kind=%s "
            "limit=%ld lease=%d reset=%d extend=%d other=%d%s%s%s", (long long)cc_now_us(),
            (int)getpid(), rmw_o.name, rmw_o.ttl_ms, rmw_o.sleep_min_ms, rmw_o.sleep_max_ms,
            rmw_o.poll_ms, rmw_o.sections,
            rmw_o.shared ? "shared" : rmw_o.limit > 0 ? "counted" : "exclusive", rmw_o.limit,
            rmw_o.lease_pct, rmw_o.reset_pct, rmw_o.extend_pct, rmw_o.other_pct,
            rmw_o.ignore_lost ? " ignore_lost=1" : "", rmw_o.fenced ? " fenced=1" : "",
            rmw_o.guarded ? " guarded=1" : "");
    if (rmw_o.fake_fence != 0) {
        cc_log("FAKE %lld every fence logged is the grant's %+lld (a negative control)",
                (long long)cc_now_us(), rmw_o.fake_fence);
    }
    counter = rmw_counter_connect();
    if (counter == NULL) {
        return RMW_EXIT_COUNTER;
    }
    while (!cc_stop && (rmw_o.sections == 0 || done < rmw_o.sections)) {
        if (c.cl.fd < 0 && rmw_connect(&c) != 0) {
            cc_sleep_ms(RMW_RECONNECT_MS, true);
            continue;
        }
        if (first_us == 0) {
            first_us = cc_now_us();
        }
        lease = rmw_chance(rmw_o.lease_pct);
        rc = rmw_acquire(&c, &g, lease);
        if (rc == -2) {
            break;
        }
        if (rc == -1) {
            cc_log("DISCONNECT %lld port=%d", (long long)cc_now_us(), c.port);
            rmw_disconnect(&c);
            continue;
        }
        /* The section: from here on SIGTERM waits for its end. */
        begin_us = cc_now_us();
        done++;
        if (lease) {
            rc = rmw_lease_section(&c, counter, &g, begin_us, begin_us - first_us);
        } else if (rmw_o.nnames > 1) {
            rmw_begin(&g, begin_us, begin_us - first_us, c.port, 0);
            rc = rmw_set_section(&c, counter, &g);
        } else {
            rmw_begin(&g, begin_us, begin_us - first_us, c.port, 0);
            rc = rmw_session_section(&c, counter, &g);
        }
        first_us = 0;
        if (rc != 0) {
            return RMW_EXIT_COUNTER;
        }
        cc_sleep_ms(cc_random(rmw_o.think_min_ms, rmw_o.think_ms), true);
    }
    cc_log("EXIT %lld sections=%ld", (long long)cc_now_us(), done);
    rmw_disconnect(&c);
    redisFree(counter);
    return 0;
}
