/*
 * redlock_bench.c: load generator for redlockd, build/redlock-bench.
 *
 * Modes (--mode):
 *
 *     uncontended  C connections to the daemon, each looping LOCK/UNLOCK
 *                  on a name of its own
 *     hot          C connections looping LOCK/UNLOCK on one shared name
 *                  (hand-over speed, and fairness: acquisitions per
 *                  connection)
 *     counted      C connections (default 64) looping LOCK bench-<pid>-sem
 *                  limit=<limit>/UNLOCK on one counted name (default
 *                  limit 8); with --fill F, F permits of the name are
 *                  first taken by lease-mode LOCKs on connections of
 *                  their own (ttl: the run plus 30 s; nobody releases
 *                  them), so that the loops find the name nearly full;
 *                  every OK must name a permit below the limit
 *     shared       C connections (default 64) looping LOCK bench-<pid>-rw
 *                  shared/UNLOCK, and --writers W (default 1) more
 *                  looping the exclusive LOCK bench-<pid>-rw/UNLOCK on
 *                  the same name; reported apart (writer_* fields)
 *     direct       no daemon: C concurrent loops send an acquire script
 *                  (SET NX PX semantics, as the daemon's) to every master
 *                  at once, then a release script (compare-and-delete),
 *                  pipelined over one hiredis async connection per master;
 *                  a pair counts when a quorum granted and then released
 *     rtt          one blocking connection to the first master doing
 *                  SET key token NX PX ttl (timed) then DEL key
 *     hold         C connections to the daemon (opened progressively, at
 *                  most BENCH_HOLD_WINDOW not yet answered), each sending
 *                  LOCK bench-hold-<pid>-<i> ttl=<ttl> once (session mode)
 *                  and then holding it: the daemon renews every lock
 *                  until the hold ends
 *     lease-hold   --locks N lease-mode LOCKs (bench-lease-<pid>-<i>
 *                  mode=lease ttl=<ttl>), pipelined BENCH_LEASE_DEPTH
 *                  deep over C connections (default 8); lease locks
 *                  belong to no connection and last their ttl;
 *                  hold with --limit N and --names K asks instead for
 *                  a permit: connection i sends LOCK
 *                  bench-counted-<pid>-<i mod K> limit=N ttl=<ttl>
 *     names-hold   --locks N session-mode LOCKs (bench-names-<pid>-<i>
 *                  ttl=<ttl>), pipelined as lease-hold's over C
 *                  connections (default 8), held until the hold ends:
 *                  a lock table of N names for LIST to walk
 *     pairs        C connections (default 50) on --names K names
 *                  (bench-<pid>-<k>, default 20), each looping: pick a
 *                  random pair of them, take both, release both; with
 *                  --set as one set, LOCK a b (the two in a random
 *                  order, so that the daemon's canonical order does the
 *                  work) and UNLOCK a b; without, as two single LOCKs in
 *                  byte order: LOCK a, then LOCK b once a is granted,
 *                  then UNLOCK b and UNLOCK a pipelined.  A pair counts
 *                  when both names are released; its acquire latency
 *                  runs from the first LOCK sent to the grant of the
 *                  second name (of the set).  Every LOCK says
 *                  wait=BENCH_PAIRS_WAIT_MS (10 s), so a TIMEOUT means
 *                  something is stuck: any reply other than OK (naming
 *                  the names asked for, in their order) is an error,
 *                  printed, and its connection is closed (its session
 *                  ends, and the daemon releases what it held).  The
 *                  clients' view of each name is checked as counted's
 *                  is: a name held by two connections at once (clashes)
 *                  is an error too; with --own, connection i always
 *                  takes the same two names, its own (2C names): no
 *                  contention, what a set costs by itself
 *     list         C connections (default 1), each looping LIST (no
 *                  prefix) and reading its lines to END; a LIST counts
 *                  when its END was read before the end of the run.
 *                  The result line has lists, lines (of the LISTs
 *                  counted), names_min and names_max (lines of one
 *                  LIST) and errors (a line that is neither HELD, WAIT
 *                  nor END, a closed connection)
 *
 * Holders seen by the clients (counted, shared, pairs): a connection counts as
 * a holder from the moment its OK is read to the moment its UNLOCK is
 * sent.  The UNLOCKs answering the OKs read in one pass of the event
 * loop are sent together after that pass, so OKs read together are
 * held together.  That interval lies inside the real hold (granted on
 * the masters before the OK, released after the UNLOCK), so what the
 * clients see at once is never more than what the masters granted at
 * once: max_holders above the limit, two holders of one permit
 * (clashes), or a writer holding with anyone else (mixed) is a real
 * violation, never an artefact of the measurement.  The converse does
 * not hold: a small max_holders proves little.
 *
 * The hold modes measure the daemon while it holds many locks (its
 * memory, its renewal work), not a latency.  Once every LOCK has been
 * answered they print one line, flushed at once,
 *
 *     {"event":"held","mode":"hold","asked":A,"held":G,"grant_seconds":S,"errors":E}
 *
 * so that a driver (run_bench) can measure the daemon while the locks
 * are held; then they keep every connection open for --duration seconds,
 * or until SIGTERM or SIGINT, whichever comes first, counting each
 * "! LOST" line and each connection the daemon closes as an error; then
 * they print the result line and exit (closing the connections releases
 * the session locks).  The result line of a hold mode has mode,
 * connections, ttl_ms, asked, held (locks granted), grant_seconds (from
 * the first connection to the last answer), hold_seconds, lost and
 * errors.
 *
 * TLS (--tls-ca FILE): the daemon modes (uncontended, hot, counted,
 * shared, hold, lease-hold) talk TLS to the daemon's listen.tls port
 * (bufferevent_openssl, BUFFEREVENT_SSL_CONNECTING, TLS 1.2 or later),
 * verifying its certificate against FILE and its name against the
 * target's host (an IP address entry for an address) or --tls-name.  A
 * connection counts as up once its handshake is done; the clock of a
 * run starts when every connection is up, so handshakes are not timed.
 * A failed handshake is printed with OpenSSL's reason.
 *
 * A pair is one acquire and its release, both answered before the end
 * of the run.  Acquire latency is measured on CLOCK_MONOTONIC from the
 * LOCK (or the first acquire command) being sent to the OK (or the
 * quorum of grants) being read; release latency (daemon modes,
 * rel_p50_us and rel_p99_us) from the UNLOCK being sent to its OK being
 * read.  The result is one JSON line on stdout;
 * diagnostics go to stderr.  Exit status: 0 when the run happened (even
 * with errors, which the JSON line counts), 1 when it could not start,
 * 2 on a usage error.  The soft RLIMIT_NOFILE is raised to the hard one
 * at start (10000 connections need more than the usual 1024).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "client/client.h"

#define BENCH_MASTERS_MAX   15          /* as many as the daemon accepts */
#define BENCH_NAME_MAX      96          /* lock names we build */
#define BENCH_TOKEN_HEX     32          /* token length, as the daemon's */
#define BENCH_CONNS_MAX     50000       /* --connections upper bound (and RLIMIT_NOFILE) */
#define BENCH_LOCKS_MAX     10000000    /* --locks upper bound */
#define BENCH_FDS_SPARE     32          /* descriptors besides the connections */
#define BENCH_HOLD_WINDOW   256         /* hold: connections opened, LOCK not answered */
#define BENCH_LEASE_DEPTH   64          /* lease-hold: LOCKs in flight per connection */
#define BENCH_LEASE_CONNS   8           /* lease-hold: default connections */
#define BENCH_HOLD_CONNS    100         /* hold: default connections */
#define BENCH_LEASE_LOCKS   1000        /* lease-hold: default --locks */
#define BENCH_DIAG_MAX      10          /* diagnostics printed per kind */
#define BENCH_COUNTED_LIMIT 8           /* counted: default --limit */
#define BENCH_FILL_CONNS    8           /* counted --fill: connections carrying it */
#define BENCH_LIMIT_MAX     1000        /* --limit upper bound (the daemon's) */
#define BENCH_PAIRS_CONNS   50          /* pairs: default connections */
#define BENCH_PAIRS_NAMES   20          /* pairs: default --names */
#define BENCH_PAIRS_WAIT_MS 10000       /* pairs: wait= of every LOCK (a TIMEOUT: stuck) */

enum bench_mode {
    BENCH_UNCONTENDED,
    BENCH_HOT,
    BENCH_DIRECT,
    BENCH_RTT,
    BENCH_HOLD,
    BENCH_LEASE_HOLD,
    BENCH_NAMES_HOLD,
    BENCH_LIST,
    BENCH_COUNTED,
    BENCH_SHARED,
    BENCH_PAIRS
};

/* Command-line settings; static storage, lives for the whole run. */
struct bench_opts {
    enum bench_mode mode;                       /* what to measure */
    const char     *mode_name;                  /* its name, for the JSON line */
    long            conns;                      /* connections or loops */
    long            locks;                      /* lease-hold: LOCKs to send (--locks) */
    long            limit;                      /* counted, hold: limit= (0: hold asks for
                                                   an exclusive lock) */
    long            names;                      /* hold with --limit: counted names */
    long            fill;                       /* counted: permits taken before the run */
    long            writers;                    /* shared: exclusive loops */
    double          duration_s;                 /* length of the run */
    long            ttl_ms;                     /* lease asked for */
    const char     *target;                     /* daemon: host:port or /path */
    char           *masters_spec;               /* --masters as given (strdup) */
    char           *master_host[BENCH_MASTERS_MAX]; /* per master: host */
    int             master_port[BENCH_MASTERS_MAX]; /* per master: port */
    size_t          nmasters;                   /* masters given */
    const char     *tls_ca;                     /* --tls-ca: TLS to the daemon (NULL: plain) */
    const char     *tls_name;                   /* --tls-name: the name to verify */
    bool            fence;                      /* uncontended, hot: LOCK ... fence, and
                                                   every OK's fence= above the one before */
    bool            set;                        /* pairs: LOCK a b (else two single LOCKs) */
    bool            own;                        /* pairs: each connection on a pair of its own */
};

/* Latencies of one kind, in microseconds; grows. */
struct bench_lat {
    int64_t  *us;           /* the latencies, sorted by bench_lat_sort */
    size_t    n;            /* stored */
    size_t    cap;          /* room in us */
};

/* Results of one run; static storage. */
struct bench_stats {
    struct bench_lat lat;   /* acquire latencies (shared: the readers') */
    struct bench_lat rel;   /* release latencies (daemon modes; shared: the readers') */
    struct bench_lat wlat;  /* shared: the writers' acquire latencies */
    struct bench_lat wrel;  /* shared: the writers' release latencies */
    uint64_t  pairs;        /* acquire + release pairs completed in time (shared: readers) */
    uint64_t  wpairs;       /* shared: the writers' pairs */
    uint64_t  errors;       /* unexpected replies, lost locks, closed links */
    int64_t   start_us;     /* when the measured period began */
    int64_t   end_us;       /* when it ended */
};

/* What the clients saw held at once (counted, shared); static storage. */
struct bench_seen {
    uint64_t  holders;      /* connections holding now (counted; shared: readers) */
    uint64_t  max_holders;  /* the most at once */
    uint64_t  wholders;     /* shared: writers holding now */
    uint64_t  mixed;        /* shared: OKs of a writer read while anyone else held,
                               or of a reader while a writer held */
    uint64_t  clashes;      /* counted: OKs naming a permit another connection held;
                               pairs: OKs naming a name another connection held */
    size_t   *permit_of;    /* counted: per permit, 1 + the index of its holder, 0 none;
                               pairs: the same per name */
};

/* Where a pairs connection is in its loop. */
enum bench_pair_step {
    BENCH_PAIR_LOCK_FIRST,      /* singles: LOCK pair[0] sent */
    BENCH_PAIR_LOCK_BOTH,       /* set: LOCK of both sent; singles: LOCK pair[1] sent */
    BENCH_PAIR_HELD,            /* both granted, UNLOCK not yet sent */
    BENCH_PAIR_UNLOCK           /* UNLOCK(s) sent, unlocks_due replies to read */
};

/* One daemon connection (uncontended, hot); owned by bench_conns. */
struct bench_conn {
    size_t              idx;                    /* index in bench_conns */
    struct bufferevent *bev;                    /* the connection */
    char                name[BENCH_NAME_MAX];   /* the lock name it loops on */
    bool                locking;                /* waiting for LOCK's reply (else UNLOCK's) */
    bool                dead;                   /* closed: no more requests */
    int64_t             sent_us;                /* when the LOCK was sent */
    uint64_t            acquired;               /* grants during the run */
    bool                writer;                 /* shared: loops on the exclusive lock */
    bool                holding;                /* counted, shared: OK read, UNLOCK not sent */
    long                permit;                 /* counted: the permit held */
    long                fence;                  /* --fence: the last fence= read (0: none) */
    int64_t             rel_sent_us;            /* when the UNLOCK was sent */
    struct bench_conn  *next_unlock;            /* in bench_unlocks */
    size_t              outstanding;            /* lease-hold, names-hold: LOCKs not yet
                                                   answered */
    uint64_t            listed;                 /* list: lines of the LIST being read */
    size_t              pair[2];                /* pairs: the names' indices, in byte order */
    bool                swap;                   /* pairs --set: LOCK/UNLOCK say pair[1] first */
    enum bench_pair_step step;                  /* pairs: where it is in its loop */
    size_t              unlocks_due;            /* pairs: UNLOCK replies still to read */
    void (*on_line)(struct bench_conn *c, const char *line, size_t len); /* per reply line
                                                   (NUL-terminated, as evbuffer_readln
                                                   gives it, and len bytes) */
};

/* One master in direct mode; owned by bench_masters. */
struct bench_master {
    redisAsyncContext *ac;          /* NULL once disconnected */
};

/* One acquire/release loop in direct mode; owned by bench_loops. */
struct bench_loop {
    char     key[BENCH_NAME_MAX];       /* the lock's key */
    char     channel[BENCH_NAME_MAX + 16]; /* its release channel */
    char     token[BENCH_TOKEN_HEX + 1]; /* this round's token */
    bool     releasing;                 /* in the release phase */
    size_t   pending;                   /* replies still due this phase */
    size_t   granted;                   /* acquire: masters that granted */
    size_t   released;                  /* release: masters that deleted */
    bool     won;                       /* acquire reached a quorum */
    int64_t  sent_us;                   /* when the acquire was sent */
};

static struct bench_opts    bench_opt;
static struct bench_stats   bench_st;
static struct event_base   *bench_base;
static bool                 bench_stopping;     /* the deadline passed */
static struct bench_conn   *bench_conns;
static size_t               bench_nconns;       /* entries in bench_conns (daemon modes) */
static struct bench_seen    bench_seen;
static struct bench_conn   *bench_unlocks;      /* OKs read this pass, UNLOCK not yet sent */
static struct event        *bench_flush;        /* sends them after the pass */
static size_t               bench_connected;    /* connections up */
static size_t               bench_alive;        /* connections not dead */
static struct bench_master  bench_masters[BENCH_MASTERS_MAX];
static struct bench_loop   *bench_loops;
static char                 bench_sha_acquire[41];
static SSL_CTX             *bench_ssl_ctx;      /* --tls-ca: the client context */
static char                 bench_tls_sni[64];  /* SNI sent: --tls-name unless an address */

static const char *bench_conn_why(struct bufferevent *bev, short what);
static char                 bench_sha_release[41];
static uint64_t             bench_rng;
static size_t               bench_open_failures; /* connections that could not be opened */

/*
 * The acquire script, with the daemon's semantics (daemon/redlock.c) for
 * an unfenced grant: SET NX PX; our own token already there renews it;
 * otherwise answer the holder's PTTL.  A grant answers {1, subscribers
 * of ARGV[3]}, as the daemon's does, so that the masters do the same work.
 */
static const char bench_acquire_lua[] =
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n"
    "  return {1, redis.call('PUBSUB', 'NUMSUB', ARGV[3])[2]}\n"
    "end\n"
    "if redis.pcall('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  return {1, redis.call('PUBSUB', 'NUMSUB', ARGV[3])[2]}\n"
    "end\n"
    "return {redis.call('PTTL', KEYS[1])}\n";

/* The release script: compare-and-delete, announced on ARGV[2]. */
static const char bench_release_lua[] =
    "if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then\n"
    "  return 0\n"
    "end\n"
    "redis.call('DEL', KEYS[1])\n"
    "redis.call('PUBLISH', ARGV[2], ARGV[1])\n"
    "return 1\n";

static void bench_conn_send_lock(struct bench_conn *c);
static void bench_loop_acquire(struct bench_loop *l);
static void bench_pair_send(struct bench_conn *c);
static void bench_pair_flush(struct bench_conn *c);
static void bench_pair_line(struct bench_conn *c, const char *line, size_t len);
static void bench_pair_drop(struct bench_conn *c, size_t k);

/* ---- small helpers ---- */

static int64_t
bench_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
bench_lat_add(struct bench_lat *l, int64_t us)
{
    int64_t *n;

    if (l->n == l->cap) {
        l->cap = l->cap == 0 ? 65536 : l->cap * 2;
        n = realloc(l->us, l->cap * sizeof(*n));
        if (n == NULL) {
            fprintf(stderr, "redlock-bench: out of memory\n");
            exit(1);
        }
        l->us = n;
    }
    l->us[l->n++] = us;
}

static void
bench_record(int64_t us)
{
    bench_lat_add(&bench_st.lat, us);
}

/* A fresh 32-hex-digit token (xorshift64*, seeded from getrandom). */
static void
bench_token(char *out)
{
    static const char hex[] = "0123456789abcdef";
    uint64_t v = 0;
    size_t i;

    for (i = 0; i < BENCH_TOKEN_HEX; i++) {
        if (i % 16 == 0) {
            bench_rng ^= bench_rng >> 12;
            bench_rng ^= bench_rng << 25;
            bench_rng ^= bench_rng >> 27;
            v = bench_rng * 2685821657736338717ULL;
        }
        out[i] = hex[v & 15];
        v >>= 4;
    }
    out[BENCH_TOKEN_HEX] = '\0';
}

static void
bench_stop(void)
{
    if (!bench_stopping) {
        bench_stopping = true;
        bench_st.end_us = bench_now_us();
    }
    event_base_loopbreak(bench_base);
}

static void
bench_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    bench_stop();
}

/* Start the measured period: the deadline timer. */
static struct event *bench_deadline;  /* end of the measured period */

static void
bench_start_clock(void)
{
    struct timeval tv;
    double whole = (double)(int64_t)bench_opt.duration_s;

    tv.tv_sec = (time_t)whole;
    tv.tv_usec = (suseconds_t)((bench_opt.duration_s - whole) * 1e6);
    bench_deadline = evtimer_new(bench_base, bench_deadline_cb, NULL);
    if (bench_deadline == NULL || evtimer_add(bench_deadline, &tv) != 0) {
        fprintf(stderr, "redlock-bench: cannot arm the deadline timer\n");
        exit(1);
    }
    bench_st.start_us = bench_now_us();
}

/* ---- daemon modes: uncontended, hot, counted, shared ---- */

static void
bench_conn_kill(struct bench_conn *c)
{
    if (c->dead) {
        return;
    }
    c->dead = true;
    bench_alive--;
    if (bench_alive == 0) {
        bench_stop();
    }
}

static void
bench_conn_send_lock(struct bench_conn *c)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);

    if (bench_opt.mode == BENCH_PAIRS) {
        bench_pair_send(c);
        return;
    }
    c->locking = true;
    c->sent_us = bench_now_us();
    if (bench_opt.mode == BENCH_COUNTED) {
        evbuffer_add_printf(out, "LOCK %s limit=%ld ttl=%ld\n", c->name, bench_opt.limit,
                            bench_opt.ttl_ms);
    } else if (bench_opt.mode == BENCH_SHARED && !c->writer) {
        evbuffer_add_printf(out, "LOCK %s shared ttl=%ld\n", c->name, bench_opt.ttl_ms);
    } else {
        evbuffer_add_printf(out, "LOCK %s ttl=%ld%s\n", c->name, bench_opt.ttl_ms,
                            bench_opt.fence ? " fence" : "");
    }
}

static void
bench_conn_send_unlock(struct bench_conn *c)
{
    c->rel_sent_us = bench_now_us();
    evbuffer_add_printf(bufferevent_get_output(c->bev), "UNLOCK %s\n", c->name);
}

/* The value of "key=" in a reply line as a number >= 0; -1 when absent or bad. */
static long
bench_reply_num(const char *line, const char *key)
{
    int64_t v;

    return client_field_int(line, key, &v) && v >= 0 && v <= LONG_MAX ? (long)v : -1;
}

/*
 * c read the OK to its LOCK (line): it holds from now until its UNLOCK
 * is sent.  Counts what the clients see held at once; a counted OK
 * must name a permit below the limit that no other holder has.
 */
static void
bench_seen_take(struct bench_conn *c, const char *line, size_t len)
{
    long p;

    c->holding = true;
    if (bench_opt.mode == BENCH_SHARED) {
        if (c->writer ? bench_seen.holders + bench_seen.wholders > 0 : bench_seen.wholders > 0) {
            if (++bench_seen.mixed <= BENCH_DIAG_MAX) {
                fprintf(stderr, "redlock-bench: conn %zu (%s) granted while %" PRIu64
                        " readers and %" PRIu64 " writers hold\n", c->idx,
                        c->writer ? "writer" : "reader", bench_seen.holders,
                        bench_seen.wholders);
            }
        }
        if (c->writer) {
            bench_seen.wholders++;
            return;
        }
    }
    if (++bench_seen.holders > bench_seen.max_holders) {
        bench_seen.max_holders = bench_seen.holders;
    }
    if (bench_opt.mode != BENCH_COUNTED) {
        return;
    }
    p = bench_reply_num(line, "permit");
    c->permit = p;
    if (p < 0 || p >= bench_opt.limit || bench_reply_num(line, "limit") != bench_opt.limit) {
        bench_st.errors++;
        c->permit = -1;
        if (bench_st.errors <= BENCH_DIAG_MAX) {
            fprintf(stderr, "redlock-bench: conn %zu: no permit below limit=%ld in: %.*s\n",
                    c->idx, bench_opt.limit, (int)len, line);
        }
        return;
    }
    if (bench_seen.permit_of[p] != 0) {
        if (++bench_seen.clashes <= BENCH_DIAG_MAX) {
            fprintf(stderr, "redlock-bench: conn %zu granted permit %ld, which conn %zu holds\n",
                    c->idx, p, bench_seen.permit_of[p] - 1);
        }
    }
    bench_seen.permit_of[p] = c->idx + 1;
}

/* c is about to send its UNLOCK: it no longer counts as a holder. */
static void
bench_seen_drop(struct bench_conn *c)
{
    if (!c->holding) {
        return;
    }
    c->holding = false;
    if (bench_opt.mode == BENCH_SHARED && c->writer) {
        bench_seen.wholders--;
        return;
    }
    bench_seen.holders--;
    if (bench_opt.mode == BENCH_COUNTED && c->permit >= 0
        && bench_seen.permit_of[c->permit] == c->idx + 1) {
        bench_seen.permit_of[c->permit] = 0;
    }
}

/*
 * --fence: an OK must carry fence=N above the last one this connection
 * read (in uncontended mode every connection has a name of its own, so
 * that is the name's previous grant); anything else counts as an error.
 * In hot mode the connections share one name, so the check is the
 * weaker one that each connection sees its fences rise.
 */
static void
bench_fence_seen(struct bench_conn *c, const char *line)
{
    long f = bench_reply_num(line, "fence");

    if (f <= c->fence) {
        bench_st.errors++;
        if (bench_st.errors <= 10) {
            fprintf(stderr, "redlock-bench: conn %zu: fence %ld after %ld: %s\n", c->idx, f,
                    c->fence, line);
        }
        return;
    }
    c->fence = f;
}

/* After a pass of the event loop: the UNLOCKs of the OKs read during it. */
static void
bench_flush_cb(evutil_socket_t fd, short what, void *arg)
{
    struct bench_conn *c;

    (void)fd;
    (void)what;
    (void)arg;
    while ((c = bench_unlocks) != NULL) {
        bench_unlocks = c->next_unlock;
        c->next_unlock = NULL;
        if (bench_opt.mode == BENCH_PAIRS) {
            bench_pair_flush(c);
            continue;
        }
        bench_seen_drop(c);
        if (!bench_stopping && !c->dead) {
            bench_conn_send_unlock(c);
        }
    }
}

/* One reply line from the daemon (without its LF). */
static void
bench_conn_line(struct bench_conn *c, const char *line, size_t len)
{
    bool ok = client_is_status(line, "OK");
    bool seen = bench_opt.mode == BENCH_COUNTED || bench_opt.mode == BENCH_SHARED;
    int64_t now;

    if (client_is_push(line)) {
        /* ! LOST: never expected in a healthy run. */
        if (!bench_stopping) {
            bench_st.errors++;
            fprintf(stderr, "redlock-bench: conn %zu: %.*s\n", c->idx, (int)len, line);
        }
        return;
    }
    if (bench_stopping) {
        return;
    }
    if (!ok) {
        bench_st.errors++;
        if (bench_st.errors <= 10) {
            fprintf(stderr, "redlock-bench: conn %zu: unexpected reply to %s: %.*s\n",
                    c->idx, c->locking ? "LOCK" : "UNLOCK", (int)len, line);
        }
        bench_conn_send_lock(c);
        return;
    }
    now = bench_now_us();
    if (c->locking) {
        bench_lat_add(c->writer ? &bench_st.wlat : &bench_st.lat, now - c->sent_us);
        c->acquired++;
        c->locking = false;
        if (bench_opt.fence) {
            bench_fence_seen(c, line);
        }
        if (!seen) {
            bench_conn_send_unlock(c);
            return;
        }
        /* Held until the UNLOCK goes, after this pass of the loop. */
        bench_seen_take(c, line, len);
        c->next_unlock = bench_unlocks;
        bench_unlocks = c;
        event_active(bench_flush, EV_TIMEOUT, 0);
    } else {
        bench_lat_add(c->writer ? &bench_st.wrel : &bench_st.rel, now - c->rel_sent_us);
        if (c->writer) {
            bench_st.wpairs++;
        } else {
            bench_st.pairs++;
        }
        bench_conn_send_lock(c);
    }
}

static void
bench_conn_read_cb(struct bufferevent *bev, void *arg)
{
    struct bench_conn *c = arg;
    size_t len;
    char *line;

    /* c->bev goes NULL when a line made c close its connection (pairs). */
    while (c->bev != NULL && (line = evbuffer_readln(bufferevent_get_input(bev), &len,
                                                     EVBUFFER_EOL_LF)) != NULL) {
        c->on_line(c, line, len);
        free(line);
    }
}

static void
bench_conn_all_up(void)
{
    size_t i;

    bench_start_clock();
    for (i = 0; i < bench_nconns; i++) {
        if (!bench_conns[i].dead) {
            bench_conn_send_lock(&bench_conns[i]);
        }
    }
}

static void
bench_conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct bench_conn *c = arg;
    evutil_socket_t fd;
    int one = 1;

    if (what & BEV_EVENT_CONNECTED) {
        fd = bufferevent_getfd(bev);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        bench_connected++;
        if (bench_connected == bench_nconns) {
            bench_conn_all_up();
        }
        return;
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        if (!bench_stopping) {
            bench_st.errors++;
            fprintf(stderr, "redlock-bench: conn %zu: connection %s\n", c->idx,
                    bench_conn_why(bev, what));
        }
        if (bench_connected < bench_nconns && !bench_stopping) {
            /* Could not even connect: nothing to measure. */
            fprintf(stderr, "redlock-bench: cannot connect to %s\n", bench_opt.target);
            exit(1);
        }
        if (bench_opt.mode == BENCH_PAIRS) {
            /* Its session ended: the daemon released what it held. */
            bench_pair_drop(c, c->pair[0]);
            bench_pair_drop(c, c->pair[1]);
        }
        bench_conn_kill(c);
    }
}

/*
 * The target (host:port, or a path for the Unix socket) as an address;
 * 0, or -1 with a message.
 */
static int
bench_target_addr(struct sockaddr_storage *ss, socklen_t *sslen)
{
    const char *t = bench_opt.target;
    struct sockaddr_un *sun = (struct sockaddr_un *)ss;
    struct sockaddr_in *sin = (struct sockaddr_in *)ss;
    char host[64], port[8];

    memset(ss, 0, sizeof(*ss));
    if (t[0] == '/') {
        if (strlen(t) >= sizeof(sun->sun_path)) {
            fprintf(stderr, "redlock-bench: socket path too long: %s\n", t);
            return -1;
        }
        sun->sun_family = AF_UNIX;
        strcpy(sun->sun_path, t);
        *sslen = sizeof(*sun);
        return 0;
    }
    if (client_split_addr(t, host, sizeof(host), port, sizeof(port)) != 0) {
        fprintf(stderr, "redlock-bench: bad target '%s' (host:port or /path)\n", t);
        return -1;
    }
    sin->sin_family = AF_INET;
    sin->sin_port = htons((uint16_t)atoi(port));
    if (inet_pton(AF_INET, host, &sin->sin_addr) != 1) {
        fprintf(stderr, "redlock-bench: bad target host '%s' (an IPv4 address)\n", host);
        return -1;
    }
    *sslen = sizeof(*sin);
    return 0;
}

/* ---- TLS to the daemon (--tls-ca) ---- */

/*
 * The client context: TLS 1.2 or later, the daemon's certificate
 * verified against --tls-ca and its name against --tls-name, else the
 * target's host (an IP address entry for an address).  0, or -1 with a
 * message.
 */
static int
bench_tls_init(void)
{
    char host[64], port[8];
    const char *name = bench_opt.tls_name;
    X509_VERIFY_PARAM *vp;
    bool is_ip;
    struct in_addr a;

    if (bench_opt.target == NULL || bench_opt.target[0] == '/'
        || client_split_addr(bench_opt.target, host, sizeof(host), port, sizeof(port)) != 0) {
        fprintf(stderr, "redlock-bench: --tls-ca needs a --target HOST:PORT\n");
        return -1;
    }
    if (name == NULL) {
        name = host;
    }
    is_ip = inet_pton(AF_INET, name, &a) == 1;
    bench_ssl_ctx = SSL_CTX_new(TLS_client_method());
    if (bench_ssl_ctx == NULL
        || SSL_CTX_set_min_proto_version(bench_ssl_ctx, TLS1_2_VERSION) != 1
        || SSL_CTX_load_verify_locations(bench_ssl_ctx, bench_opt.tls_ca, NULL) != 1) {
        fprintf(stderr, "redlock-bench: --tls-ca %s: %s\n", bench_opt.tls_ca,
                ERR_reason_error_string(ERR_peek_last_error()) != NULL
                ? ERR_reason_error_string(ERR_peek_last_error()) : "cannot load");
        return -1;
    }
    SSL_CTX_set_verify(bench_ssl_ctx, SSL_VERIFY_PEER, NULL);
    vp = SSL_CTX_get0_param(bench_ssl_ctx);
    if ((is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, name)
               : X509_VERIFY_PARAM_set1_host(vp, name, 0)) != 1) {
        fprintf(stderr, "redlock-bench: --tls-name %s: cannot be verified\n", name);
        return -1;
    }
    snprintf(bench_tls_sni, sizeof(bench_tls_sni), "%s", is_ip ? "" : name);
    return 0;
}

/* A bufferevent that will do the client side of a handshake once connected; NULL on failure. */
static struct bufferevent *
bench_tls_bev(void)
{
    struct bufferevent *bev;
    SSL *ssl = SSL_new(bench_ssl_ctx);

    if (ssl == NULL) {
        return NULL;
    }
    if (bench_tls_sni[0] != '\0') {
        (void)SSL_set_tlsext_host_name(ssl, bench_tls_sni);
    }
    bev = bufferevent_openssl_socket_new(bench_base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
                                         BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL) {
        return NULL;    /* libevent freed ssl (BEV_OPT_CLOSE_ON_FREE) */
    }
    /* The daemon closing without close_notify reads as an end of file. */
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

/*
 * Why a connection ended (an EOF or ERROR event): closed by the daemon,
 * OpenSSL's reason when TLS failed, else the socket error.  A static
 * string.
 */
static const char *
bench_conn_why(struct bufferevent *bev, short what)
{
    static char buf[256];
    unsigned long e;

    if (what & BEV_EVENT_EOF) {
        return "closed by the daemon";
    }
    e = bench_ssl_ctx != NULL && bev != NULL ? bufferevent_get_openssl_error(bev) : 0;
    if (e == 0) {
        return evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR());
    }
    snprintf(buf, sizeof(buf), "failed: TLS: ");
    ERR_error_string_n(e, buf + strlen(buf), sizeof(buf) - strlen(buf));
    return buf;
}

/*
 * Connect c to the target (host:port, or a path for the Unix socket);
 * each reply line goes to on_line, connection events to event_cb.  A Unix socket connects at
 * once, and event_cb sees BEV_EVENT_CONNECTED before this returns.
 */
static int
bench_conn_open(struct bench_conn *c,
                void (*on_line)(struct bench_conn *c, const char *line, size_t len),
                bufferevent_event_cb event_cb)
{
    const char *t = bench_opt.target;
    struct sockaddr_storage ss;
    socklen_t sslen;
    int fd;

    c->on_line = on_line;
    if (bench_target_addr(&ss, &sslen) != 0) {
        return -1;
    }
    if (ss.ss_family == AF_UNIX) {
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&ss, sslen) != 0) {
            if (++bench_open_failures <= BENCH_DIAG_MAX) {
                fprintf(stderr, "redlock-bench: connect %s: %s\n", t, strerror(errno));
            }
            if (fd >= 0) {
                close(fd);
            }
            return -1;
        }
        evutil_make_socket_nonblocking(fd);
        c->bev = bufferevent_socket_new(bench_base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (c->bev == NULL) {
            close(fd);
            return -1;
        }
        bufferevent_setcb(c->bev, bench_conn_read_cb, NULL, event_cb, c);
        bufferevent_enable(c->bev, EV_READ | EV_WRITE);
        event_cb(c->bev, BEV_EVENT_CONNECTED, c);
        return 0;
    }
    if (bench_ssl_ctx != NULL) {
        c->bev = bench_tls_bev();
    } else {
        c->bev = bufferevent_socket_new(bench_base, -1, BEV_OPT_CLOSE_ON_FREE);
    }
    if (c->bev == NULL) {
        return -1;
    }
    bufferevent_setcb(c->bev, bench_conn_read_cb, NULL, event_cb, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    if (bufferevent_socket_connect(c->bev, (struct sockaddr *)&ss, (int)sslen) != 0) {
        if (++bench_open_failures <= BENCH_DIAG_MAX) {
            fprintf(stderr, "redlock-bench: connect %s failed\n", t);
        }
        return -1;
    }
    return 0;
}

/* ---- counted --fill: permits taken first by lease-mode LOCKs ---- */

/* Progress of the fill; static storage. */
struct bench_fill {
    struct bench_conn conns[BENCH_FILL_CONNS]; /* its connections */
    size_t   nconns;        /* of them, in use */
    long     sent;          /* LOCKs sent */
    long     answered;      /* LOCKs answered */
    long     granted;       /* of them, OK */
    bool     failed;        /* a connection failed, or a LOCK was refused */
};

static struct bench_fill bench_fl;

static void bench_open_loops(void);

/* The fill is over (done or failed): the loops start, or the run ends. */
static void
bench_fill_over(void)
{
    if (bench_fl.failed || bench_fl.granted != bench_opt.fill) {
        bench_fl.failed = true;
        fprintf(stderr, "redlock-bench: fill: %ld of %ld permits taken\n", bench_fl.granted,
                bench_opt.fill);
        bench_stop();
        return;
    }
    bench_open_loops();
}

/* Send what c may send now: up to BENCH_LEASE_DEPTH fill LOCKs in flight. */
static void
bench_fill_send(struct bench_conn *c)
{
    /* The leases outlive the run by half a minute; nobody releases them. */
    long ttl = (long)(bench_opt.duration_s * 1000) + 30000;

    while (c->outstanding < BENCH_LEASE_DEPTH && bench_fl.sent < bench_opt.fill) {
        evbuffer_add_printf(bufferevent_get_output(c->bev), "LOCK %s limit=%ld mode=lease "
                            "ttl=%ld\n", bench_conns[0].name, bench_opt.limit, ttl);
        bench_fl.sent++;
        c->outstanding++;
    }
}

static void
bench_fill_line(struct bench_conn *c, const char *line, size_t len)
{
    if (bench_stopping || bench_fl.failed || client_is_push(line)
        || c->outstanding == 0) {
        return;
    }
    c->outstanding--;
    bench_fl.answered++;
    if (client_is_status(line, "OK")) {
        bench_fl.granted++;
    } else {
        bench_st.errors++;
        bench_fl.failed = true;
        fprintf(stderr, "redlock-bench: fill: unexpected reply: %.*s\n", (int)len, line);
    }
    if (bench_fl.failed || bench_fl.answered == bench_opt.fill) {
        bench_fill_over();
        return;
    }
    bench_fill_send(c);
}

static void
bench_fill_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct bench_conn *c = arg;

    (void)bev;
    if ((what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) && !bench_stopping && !bench_fl.failed) {
        bench_st.errors++;
        fprintf(stderr, "redlock-bench: fill: conn %zu: connection %s\n", c->idx,
                bench_conn_why(bev, what));
        bench_fl.failed = true;
        bench_fill_over();
    }
}

/*
 * Take --fill permits of the counted name with lease-mode LOCKs over a
 * few connections.  They belong to no session, so the daemon keeps no
 * trace of them once granted: its proposals then land on taken
 * permits, as another daemon's holders would make them.  The loops
 * start once every fill LOCK was granted.  0, or -1.
 */
static int
bench_fill_start(void)
{
    size_t i;

    bench_fl.nconns = bench_opt.fill < BENCH_FILL_CONNS ? (size_t)bench_opt.fill
                                                        : BENCH_FILL_CONNS;
    for (i = 0; i < bench_fl.nconns; i++) {
        bench_fl.conns[i].idx = i;
        if (bench_conn_open(&bench_fl.conns[i], bench_fill_line, bench_fill_event_cb) != 0) {
            return -1;
        }
    }
    for (i = 0; i < bench_fl.nconns; i++) {
        bench_fill_send(&bench_fl.conns[i]);
    }
    return 0;
}

static void
bench_fill_free(void)
{
    size_t i;

    for (i = 0; i < bench_fl.nconns; i++) {
        if (bench_fl.conns[i].bev != NULL) {
            bufferevent_free(bench_fl.conns[i].bev);
            bench_fl.conns[i].bev = NULL;
        }
    }
}

/* ---- pairs: two names at once, as a set or as two single LOCKs ---- */

/* The names, bench-<pid>-<k>, sorted in byte order (the order singles take them in). */
static char (*bench_pair_names)[BENCH_NAME_MAX];

static int
bench_pair_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* --names K names for the pairs mode, in byte order; 0, or -1 out of memory. */
static int
bench_pair_names_init(long pid)
{
    size_t k, n = (size_t)bench_opt.names;

    bench_pair_names = calloc(n, sizeof(*bench_pair_names));
    if (bench_pair_names == NULL) {
        return -1;
    }
    for (k = 0; k < n; k++) {
        snprintf(bench_pair_names[k], BENCH_NAME_MAX, "bench-%ld-%zu", pid, k);
    }
    qsort(bench_pair_names, n, sizeof(*bench_pair_names), bench_pair_cmp);
    return 0;
}

/* A random number below n (n > 0), from the token generator's state. */
static size_t
bench_pair_rand(size_t n)
{
    bench_rng ^= bench_rng >> 12;
    bench_rng ^= bench_rng << 25;
    bench_rng ^= bench_rng >> 27;
    return (size_t)((bench_rng * 2685821657736338717ULL) >> 33) % n;
}

/* The next pair of c: two different names, pair[0] before pair[1] in byte order. */
static void
bench_pair_pick(struct bench_conn *c)
{
    size_t n = (size_t)bench_opt.names, a = bench_pair_rand(n), b = bench_pair_rand(n - 1);

    if (bench_opt.own) {
        a = 2 * c->idx;
        b = a + 1;
    } else if (b >= a) {
        b++;
    }
    c->pair[0] = a < b ? a : b;
    c->pair[1] = a < b ? b : a;
    c->swap = bench_pair_rand(2) == 1;
}

/* The name of c's pair that a set's LOCK and UNLOCK say i-th (0 or 1). */
static const char *
bench_pair_said(const struct bench_conn *c, size_t i)
{
    return bench_pair_names[c->pair[c->swap ? 1 - i : i]];
}

/* Start c's next pair: its first LOCK. */
static void
bench_pair_send(struct bench_conn *c)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);

    bench_pair_pick(c);
    c->locking = true;
    c->sent_us = bench_now_us();
    if (bench_opt.set) {
        c->step = BENCH_PAIR_LOCK_BOTH;
        evbuffer_add_printf(out, "LOCK %s %s ttl=%ld wait=%d\n", bench_pair_said(c, 0),
                            bench_pair_said(c, 1), bench_opt.ttl_ms, BENCH_PAIRS_WAIT_MS);
    } else {
        c->step = BENCH_PAIR_LOCK_FIRST;
        evbuffer_add_printf(out, "LOCK %s ttl=%ld wait=%d\n", bench_pair_names[c->pair[0]],
                            bench_opt.ttl_ms, BENCH_PAIRS_WAIT_MS);
    }
}

/*
 * c read the OK of name k: it holds k from now until its UNLOCK is
 * sent.  Another connection holding k at the same time is a clash.
 */
static void
bench_pair_take(struct bench_conn *c, size_t k)
{
    if (bench_seen.permit_of[k] != 0) {
        bench_st.errors++;
        if (++bench_seen.clashes <= BENCH_DIAG_MAX) {
            fprintf(stderr, "redlock-bench: conn %zu granted %s, which conn %zu holds\n",
                    c->idx, bench_pair_names[k], bench_seen.permit_of[k] - 1);
        }
    }
    bench_seen.permit_of[k] = c->idx + 1;
    if (++bench_seen.holders > bench_seen.max_holders) {
        bench_seen.max_holders = bench_seen.holders;
    }
}

/* c no longer holds name k (its UNLOCK is being sent, or its connection closed). */
static void
bench_pair_drop(struct bench_conn *c, size_t k)
{
    if (bench_seen.permit_of[k] == c->idx + 1) {
        bench_seen.permit_of[k] = 0;
        bench_seen.holders--;
    }
}

/*
 * A reply that is not the expected OK: an error, printed; c's
 * connection closes (its session ends, and the daemon releases what it
 * held), so that nobody waits behind a stuck connection.
 */
static void
bench_pair_fail(struct bench_conn *c, const char *line, size_t len)
{
    bench_st.errors++;
    if (bench_st.errors <= BENCH_DIAG_MAX) {
        fprintf(stderr, "redlock-bench: conn %zu: unexpected reply to %s %s%s%s: %.*s; "
                "closing the connection\n", c->idx, c->step == BENCH_PAIR_UNLOCK ? "UNLOCK"
                : "LOCK", c->step == BENCH_PAIR_LOCK_FIRST ? bench_pair_names[c->pair[0]]
                : bench_opt.set ? bench_pair_said(c, 0) : bench_pair_names[c->pair[1]],
                bench_opt.set ? " " : "", bench_opt.set ? bench_pair_said(c, 1) : "",
                (int)len, line);
    }
    bench_pair_drop(c, c->pair[0]);
    bench_pair_drop(c, c->pair[1]);
    bufferevent_free(c->bev);
    c->bev = NULL;
    bench_conn_kill(c);
}

/*
 * The OK to a LOCK of c's: it must name what was asked, in the order it
 * was asked ("OK a b validity=..."); true when it does.
 */
static bool
bench_pair_ok_names(const struct bench_conn *c, const char *line)
{
    char want[2 * BENCH_NAME_MAX + 8];
    size_t n;

    if (bench_opt.set) {
        n = (size_t)snprintf(want, sizeof(want), "OK %s %s", bench_pair_said(c, 0),
                             bench_pair_said(c, 1));
    } else {
        n = (size_t)snprintf(want, sizeof(want), "OK %s",
                             bench_pair_names[c->pair[c->step == BENCH_PAIR_LOCK_FIRST ? 0 : 1]]);
    }
    return strncmp(line, want, n) == 0 && (line[n] == ' ' || line[n] == '\0');
}

/* After the pass in which c was granted both names: release them. */
static void
bench_pair_flush(struct bench_conn *c)
{
    struct evbuffer *out;

    bench_pair_drop(c, c->pair[1]);
    bench_pair_drop(c, c->pair[0]);
    if (bench_stopping || c->dead || c->bev == NULL) {
        return;
    }
    out = bufferevent_get_output(c->bev);
    c->step = BENCH_PAIR_UNLOCK;
    c->rel_sent_us = bench_now_us();
    if (bench_opt.set) {
        c->unlocks_due = 1;
        evbuffer_add_printf(out, "UNLOCK %s %s\n", bench_pair_said(c, 0), bench_pair_said(c, 1));
    } else {
        c->unlocks_due = 2;
        evbuffer_add_printf(out, "UNLOCK %s\nUNLOCK %s\n", bench_pair_names[c->pair[1]],
                            bench_pair_names[c->pair[0]]);
    }
}

/* One reply line from the daemon to a pairs connection. */
static void
bench_pair_line(struct bench_conn *c, const char *line, size_t len)
{
    int64_t now;

    if (client_is_push(line)) {
        /* ! LOST: never expected in a healthy run. */
        if (!bench_stopping) {
            bench_st.errors++;
            fprintf(stderr, "redlock-bench: conn %zu: %.*s\n", c->idx, (int)len, line);
        }
        return;
    }
    if (bench_stopping) {
        return;
    }
    if (!client_is_status(line, "OK") || c->step == BENCH_PAIR_HELD
        || (c->step != BENCH_PAIR_UNLOCK && !bench_pair_ok_names(c, line))) {
        bench_pair_fail(c, line, len);
        return;
    }
    now = bench_now_us();
    switch (c->step) {
    case BENCH_PAIR_LOCK_FIRST:
        bench_pair_take(c, c->pair[0]);
        c->step = BENCH_PAIR_LOCK_BOTH;
        evbuffer_add_printf(bufferevent_get_output(c->bev), "LOCK %s ttl=%ld wait=%d\n",
                            bench_pair_names[c->pair[1]], bench_opt.ttl_ms,
                            BENCH_PAIRS_WAIT_MS);
        break;
    case BENCH_PAIR_LOCK_BOTH:
        bench_lat_add(&bench_st.lat, now - c->sent_us);
        c->acquired++;
        c->locking = false;
        if (bench_opt.set) {
            bench_pair_take(c, c->pair[0]);
        }
        bench_pair_take(c, c->pair[1]);
        /* Held until the UNLOCKs go, after this pass of the loop. */
        c->step = BENCH_PAIR_HELD;
        c->next_unlock = bench_unlocks;
        bench_unlocks = c;
        event_active(bench_flush, EV_TIMEOUT, 0);
        break;
    default:
        if (--c->unlocks_due > 0) {
            break;
        }
        bench_lat_add(&bench_st.rel, now - c->rel_sent_us);
        bench_st.pairs++;
        bench_pair_send(c);
        break;
    }
}

/* Open the looping connections; the clock starts once all are up. */
static void
bench_open_loops(void)
{
    size_t i;

    for (i = 0; i < bench_nconns; i++) {
        if (bench_conn_open(&bench_conns[i], bench_opt.mode == BENCH_PAIRS ? bench_pair_line
                                                                          : bench_conn_line,
                            bench_conn_event_cb) != 0) {
            fprintf(stderr, "redlock-bench: cannot open connection %zu\n", i);
            exit(1);
        }
    }
}

static int
bench_run_daemon(void)
{
    size_t i, n = (size_t)bench_opt.conns;
    long pid = (long)getpid();

    if (bench_opt.target == NULL) {
        fprintf(stderr, "redlock-bench: --mode %s needs --target\n", bench_opt.mode_name);
        return -1;
    }
    if (bench_opt.mode == BENCH_SHARED) {
        n += (size_t)bench_opt.writers;     /* the writers come last */
    }
    bench_nconns = n;
    bench_conns = calloc(n, sizeof(*bench_conns));
    bench_flush = event_new(bench_base, -1, 0, bench_flush_cb, NULL);
    if (bench_opt.mode == BENCH_COUNTED) {
        bench_seen.permit_of = calloc((size_t)bench_opt.limit, sizeof(*bench_seen.permit_of));
    } else if (bench_opt.mode == BENCH_PAIRS) {
        bench_seen.permit_of = calloc((size_t)bench_opt.names, sizeof(*bench_seen.permit_of));
        if (bench_pair_names_init(pid) != 0) {
            return -1;
        }
    }
    if (bench_conns == NULL || bench_flush == NULL
        || ((bench_opt.mode == BENCH_COUNTED || bench_opt.mode == BENCH_PAIRS)
            && bench_seen.permit_of == NULL)) {
        return -1;
    }
    bench_alive = n;
    for (i = 0; i < n; i++) {
        bench_conns[i].idx = i;
        if (bench_opt.mode == BENCH_HOT) {
            snprintf(bench_conns[i].name, BENCH_NAME_MAX, "bench-%ld-hot", pid);
        } else if (bench_opt.mode == BENCH_COUNTED) {
            snprintf(bench_conns[i].name, BENCH_NAME_MAX, "bench-%ld-sem", pid);
        } else if (bench_opt.mode == BENCH_SHARED) {
            snprintf(bench_conns[i].name, BENCH_NAME_MAX, "bench-%ld-rw", pid);
            bench_conns[i].writer = i >= (size_t)bench_opt.conns;
        } else if (bench_opt.mode != BENCH_PAIRS) {
            snprintf(bench_conns[i].name, BENCH_NAME_MAX, "bench-%ld-u%zu", pid, i);
        }
    }
    if (bench_opt.fill > 0) {
        if (bench_fill_start() != 0) {
            bench_fill_free();
            return -1;
        }
    } else {
        bench_open_loops();
    }
    if (!bench_stopping) {
        event_base_dispatch(bench_base);
    }
    if (!bench_stopping) {
        bench_stop();
    }
    for (i = 0; i < n; i++) {
        if (bench_conns[i].bev != NULL) {
            bufferevent_free(bench_conns[i].bev);
        }
    }
    bench_fill_free();
    return bench_fl.failed ? -1 : 0;
}

/* ---- hold modes: hold and lease-hold ---- */

/* Progress of a hold run; static storage. */
struct bench_hold {
    uint64_t asked;         /* LOCKs to send: connections (hold) or --locks (lease-hold) */
    uint64_t sent;          /* LOCKs sent */
    uint64_t answered;      /* LOCKs answered, or given up with their connection */
    uint64_t granted;       /* of them, answered OK: the locks held */
    uint64_t lost;          /* "! LOST" lines read */
    size_t   opened;        /* connections opened so far */
    size_t   inflight;      /* hold: connections opened whose LOCK is not answered */
    size_t   failed;        /* connections that failed or were closed (diagnostics) */
    bool     filling;       /* inside bench_hold_fill (no re-entry) */
    bool     holding;       /* every LOCK was answered: the hold has begun */
    int64_t  begin_us;      /* when the first connection was opened */
    int64_t  granted_us;    /* when the last LOCK was answered */
};

static struct bench_hold  bench_hd;
static struct event      *bench_sig_term;     /* SIGTERM: end the hold */
static struct event      *bench_sig_int;      /* SIGINT: end the hold */

static void bench_hold_fill(void);

static void
bench_signal_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    (void)arg;
    bench_stop();
}

static double
bench_hold_grant_seconds(void)
{
    int64_t end = bench_hd.holding ? bench_hd.granted_us
                  : bench_st.end_us > 0 ? bench_st.end_us : bench_now_us();

    return bench_hd.begin_us > 0 ? (double)(end - bench_hd.begin_us) / 1e6 : 0;
}

/* Every LOCK was answered: say so on stdout, then hold for --duration. */
static void
bench_hold_begin(void)
{
    bench_hd.holding = true;
    bench_hd.granted_us = bench_now_us();
    printf("{\"event\":\"held\",\"mode\":\"%s\",\"asked\":%" PRIu64 ",\"held\":%" PRIu64
           ",\"grant_seconds\":%.3f,\"errors\":%" PRIu64 "}\n",
           bench_opt.mode_name, bench_hd.asked, bench_hd.granted, bench_hold_grant_seconds(),
           bench_st.errors);
    fflush(stdout);
    bench_start_clock();
}

/* One LOCK answered (granted when ok), or given up with its connection. */
static void
bench_hold_answer(bool ok)
{
    bench_hd.answered++;
    if (ok) {
        bench_hd.granted++;
    }
    if (bench_hd.answered == bench_hd.asked && !bench_hd.holding && !bench_stopping) {
        bench_hold_begin();
    }
}

/* Send what c may send now: its one LOCK (hold), or up to the depth (lease-hold). */
static void
bench_hold_send(struct bench_conn *c)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    long pid = (long)getpid();

    if (bench_opt.mode == BENCH_HOLD) {
        bench_hd.sent++;
        if (bench_opt.limit > 0) {
            evbuffer_add_printf(out, "LOCK %s limit=%ld ttl=%ld\n", c->name, bench_opt.limit,
                                bench_opt.ttl_ms);
        } else {
            evbuffer_add_printf(out, "LOCK %s ttl=%ld\n", c->name, bench_opt.ttl_ms);
        }
        return;
    }
    while (c->outstanding < BENCH_LEASE_DEPTH && bench_hd.sent < bench_hd.asked) {
        if (bench_opt.mode == BENCH_NAMES_HOLD) {
            evbuffer_add_printf(out, "LOCK bench-names-%ld-%" PRIu64 " ttl=%ld\n",
                                pid, bench_hd.sent, bench_opt.ttl_ms);
        } else {
            evbuffer_add_printf(out, "LOCK bench-lease-%ld-%" PRIu64 " mode=lease ttl=%ld\n",
                                pid, bench_hd.sent, bench_opt.ttl_ms);
        }
        bench_hd.sent++;
        c->outstanding++;
    }
}

/*
 * c failed to connect, or the daemon closed it, or it broke: an error;
 * its unanswered LOCKs are given up.  Idempotent.
 */
static void
bench_hold_conn_fail(struct bench_conn *c, const char *why)
{
    size_t i;

    if (c->dead) {
        return;
    }
    if (!bench_stopping) {
        bench_st.errors++;
        if (++bench_hd.failed <= BENCH_DIAG_MAX) {
            fprintf(stderr, "redlock-bench: conn %zu: %s\n", c->idx, why);
        }
    }
    if (c->locking) {
        c->locking = false;
        bench_hd.inflight--;
        bench_hold_answer(false);
    }
    for (i = c->outstanding; i > 0; i--) {
        bench_hold_answer(false);
    }
    c->outstanding = 0;
    bench_conn_kill(c);
    if (bench_opt.mode == BENCH_HOLD) {
        bench_hold_fill();
    }
}

/* One line from the daemon (without its LF). */
static void
bench_hold_line(struct bench_conn *c, const char *line, size_t len)
{
    bool ok = client_is_status(line, "OK");

    if (bench_stopping) {
        return;
    }
    if (client_is_push(line)) {
        /* ! LOST: the daemon gave a lock up; never expected in a healthy run. */
        bench_hd.lost++;
        bench_st.errors++;
        if (bench_hd.lost <= BENCH_DIAG_MAX) {
            fprintf(stderr, "redlock-bench: conn %zu: %.*s\n", c->idx, (int)len, line);
        }
        return;
    }
    if (!ok) {
        bench_st.errors++;
        if (bench_st.errors <= BENCH_DIAG_MAX) {
            fprintf(stderr, "redlock-bench: conn %zu: unexpected reply: %.*s\n", c->idx,
                    (int)len, line);
        }
    }
    if (bench_opt.mode == BENCH_HOLD) {
        if (!c->locking) {
            if (ok) {
                bench_st.errors++;  /* an OK that answers nothing */
            }
            return;
        }
        c->locking = false;
        bench_hd.inflight--;
        bench_hold_answer(ok);
        bench_hold_fill();
        return;
    }
    if (c->outstanding == 0) {
        if (ok) {
            bench_st.errors++;
        }
        return;
    }
    c->outstanding--;
    bench_hold_answer(ok);
    bench_hold_send(c);
}

static void
bench_hold_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct bench_conn *c = arg;
    char why[160];
    int one = 1;

    if (what & BEV_EVENT_CONNECTED) {
        (void)setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        bench_connected++;
        return;
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        snprintf(why, sizeof(why), "connection %s%s", bench_conn_why(bev, what),
                 bench_hd.holding ? " during the hold" : "");
        bench_hold_conn_fail(c, why);
    }
}

/*
 * Open connections: hold keeps at most BENCH_HOLD_WINDOW of them
 * waiting for their LOCK's answer, so that 10000 connections neither
 * overflow the daemon's accept backlog nor wait for SYN retries;
 * lease-hold opens all of its few at once.
 */
static void
bench_hold_fill(void)
{
    size_t n = (size_t)bench_opt.conns;
    struct bench_conn *c;

    if (bench_hd.filling) {
        return;
    }
    bench_hd.filling = true;
    while (bench_hd.opened < n && !bench_stopping
           && (bench_opt.mode != BENCH_HOLD || bench_hd.inflight < BENCH_HOLD_WINDOW)) {
        c = &bench_conns[bench_hd.opened++];
        if (bench_opt.mode == BENCH_HOLD) {
            /* Counted before the open, so that any failure answers its LOCK. */
            c->locking = true;
            bench_hd.inflight++;
        }
        if (bench_conn_open(c, bench_hold_line, bench_hold_event_cb) != 0) {
            bench_hold_conn_fail(c, "cannot open a connection");
            continue;
        }
        bench_hold_send(c);
    }
    bench_hd.filling = false;
}

static int
bench_run_hold(void)
{
    size_t i, n;
    long pid = (long)getpid();

    if (bench_opt.target == NULL) {
        fprintf(stderr, "redlock-bench: --mode %s needs --target\n", bench_opt.mode_name);
        return -1;
    }
    if (bench_opt.mode != BENCH_HOLD && bench_opt.conns > bench_opt.locks) {
        bench_opt.conns = bench_opt.locks;
    }
    n = (size_t)bench_opt.conns;
    bench_hd.asked = bench_opt.mode == BENCH_HOLD ? (uint64_t)n : (uint64_t)bench_opt.locks;
    bench_conns = calloc(n, sizeof(*bench_conns));
    bench_sig_term = evsignal_new(bench_base, SIGTERM, bench_signal_cb, NULL);
    bench_sig_int = evsignal_new(bench_base, SIGINT, bench_signal_cb, NULL);
    if (bench_conns == NULL || bench_sig_term == NULL || bench_sig_int == NULL
        || evsignal_add(bench_sig_term, NULL) != 0 || evsignal_add(bench_sig_int, NULL) != 0) {
        fprintf(stderr, "redlock-bench: out of memory\n");
        return -1;
    }
    bench_alive = n;
    for (i = 0; i < n; i++) {
        bench_conns[i].idx = i;
        if (bench_opt.limit > 0) {
            snprintf(bench_conns[i].name, BENCH_NAME_MAX, "bench-counted-%ld-%zu", pid,
                     i % (size_t)bench_opt.names);
        } else {
            snprintf(bench_conns[i].name, BENCH_NAME_MAX, "bench-hold-%ld-%zu", pid, i);
        }
    }
    bench_hd.begin_us = bench_now_us();
    bench_hold_fill();
    if (!bench_stopping) {
        event_base_dispatch(bench_base);
    }
    if (!bench_stopping) {
        bench_stop();
    }
    for (i = 0; i < n; i++) {
        if (bench_conns[i].bev != NULL) {
            bufferevent_free(bench_conns[i].bev);
        }
    }
    return 0;
}

static void
bench_hold_print(void)
{
    double hold = bench_hd.holding ? (double)(bench_st.end_us - bench_st.start_us) / 1e6 : 0;

    printf("{\"mode\":\"%s\",\"connections\":%ld,\"ttl_ms\":%ld,\"asked\":%" PRIu64
           ",\"held\":%" PRIu64 ",\"grant_seconds\":%.3f,\"hold_seconds\":%.3f"
           ",\"lost\":%" PRIu64 ",\"errors\":%" PRIu64,
           bench_opt.mode_name, bench_opt.conns, bench_opt.ttl_ms, bench_hd.asked,
           bench_hd.granted, bench_hold_grant_seconds(), hold, bench_hd.lost,
           bench_st.errors);
    if (bench_opt.limit > 0) {
        printf(",\"limit\":%ld,\"names\":%ld", bench_opt.limit, bench_opt.names);
    }
    printf("}\n");
    fflush(stdout);
}

/* ---- list mode ---- */

/* Progress of a list run; static storage. */
struct bench_listing {
    uint64_t lists;         /* LISTs whose END was read in time */
    uint64_t lines;         /* their lines */
    uint64_t names_min;     /* the fewest lines of one of them (UINT64_MAX: none yet) */
    uint64_t names_max;     /* the most */
};

static struct bench_listing bench_ls = { .names_min = UINT64_MAX };

/* One line of a LIST: a name, or END (then the next LIST). */
static void
bench_list_line(struct bench_conn *c, const char *line, size_t len)
{
    if (bench_stopping) {
        return;
    }
    if (strcmp(line, "END") == 0) {
        bench_ls.lists++;
        bench_ls.lines += c->listed;
        if (c->listed < bench_ls.names_min) {
            bench_ls.names_min = c->listed;
        }
        if (c->listed > bench_ls.names_max) {
            bench_ls.names_max = c->listed;
        }
        c->listed = 0;
        evbuffer_add(bufferevent_get_output(c->bev), "LIST\n", 5);
        return;
    }
    if (strncmp(line, "HELD ", 5) == 0 || strncmp(line, "WAIT ", 5) == 0) {
        c->listed++;
        return;
    }
    if (++bench_st.errors <= BENCH_DIAG_MAX) {
        fprintf(stderr, "redlock-bench: conn %zu: unexpected LIST line: %.*s\n", c->idx,
                (int)len, line);
    }
}

static void
bench_list_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct bench_conn *c = arg;
    size_t i;

    if (what & BEV_EVENT_CONNECTED) {
        if (++bench_connected == bench_nconns) {
            bench_start_clock();
            for (i = 0; i < bench_nconns; i++) {
                evbuffer_add(bufferevent_get_output(bench_conns[i].bev), "LIST\n", 5);
            }
        }
        return;
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        if (!bench_stopping) {
            bench_st.errors++;
            fprintf(stderr, "redlock-bench: conn %zu: connection %s\n", c->idx,
                    bench_conn_why(bev, what));
        }
        bench_conn_kill(c);
    }
}

static int
bench_run_list(void)
{
    size_t i, n = (size_t)bench_opt.conns;

    if (bench_opt.target == NULL) {
        fprintf(stderr, "redlock-bench: --mode list needs --target\n");
        return -1;
    }
    bench_conns = calloc(n, sizeof(*bench_conns));
    if (bench_conns == NULL) {
        fprintf(stderr, "redlock-bench: out of memory\n");
        return -1;
    }
    bench_nconns = bench_alive = n;
    for (i = 0; i < n; i++) {
        bench_conns[i].idx = i;
        if (bench_conn_open(&bench_conns[i], bench_list_line, bench_list_event_cb) != 0) {
            fprintf(stderr, "redlock-bench: cannot connect to %s\n", bench_opt.target);
            return -1;
        }
    }
    if (!bench_stopping) {
        event_base_dispatch(bench_base);
    }
    if (!bench_stopping) {
        bench_stop();
    }
    for (i = 0; i < n; i++) {
        if (bench_conns[i].bev != NULL) {
            bufferevent_free(bench_conns[i].bev);
        }
    }
    return 0;
}

static void
bench_list_print(void)
{
    printf("{\"mode\":\"list\",\"connections\":%ld,\"seconds\":%.3f,\"lists\":%" PRIu64
           ",\"lines\":%" PRIu64 ",\"names_min\":%" PRIu64 ",\"names_max\":%" PRIu64
           ",\"errors\":%" PRIu64 "}\n",
           bench_opt.conns, (double)(bench_st.end_us - bench_st.start_us) / 1e6,
           bench_ls.lists, bench_ls.lines, bench_ls.lists > 0 ? bench_ls.names_min : 0,
           bench_ls.names_max, bench_st.errors);
    fflush(stdout);
}

/* ---- direct mode ---- */

static size_t
bench_quorum(void)
{
    return bench_opt.nmasters / 2 + 1;
}

static void
bench_direct_fail(const char *what, const redisReply *r)
{
    if (bench_stopping) {
        return;
    }
    bench_st.errors++;
    if (bench_st.errors <= 10) {
        fprintf(stderr, "redlock-bench: %s: %s\n", what,
                r == NULL ? "no reply (link lost)"
                          : r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply type");
    }
}

static void
bench_release_cb(redisAsyncContext *ac, void *reply, void *privdata)
{
    struct bench_loop *l = privdata;
    redisReply *r = reply;

    (void)ac;
    if (bench_stopping) {
        return;
    }
    if (r != NULL && r->type == REDIS_REPLY_INTEGER) {
        if (r->integer == 1) {
            l->released++;
        }
    } else {
        bench_direct_fail("release", r);
    }
    if (--l->pending > 0) {
        return;
    }
    if (l->won && l->released >= bench_quorum()) {
        bench_st.pairs++;
    } else if (l->won) {
        bench_st.errors++;
    }
    bench_loop_acquire(l);
}

static void
bench_loop_release(struct bench_loop *l)
{
    size_t i;

    l->releasing = true;
    l->pending = 0;
    l->released = 0;
    for (i = 0; i < bench_opt.nmasters; i++) {
        if (bench_masters[i].ac == NULL) {
            continue;
        }
        if (redisAsyncCommand(bench_masters[i].ac, bench_release_cb, l,
                              "EVALSHA %s 1 %s %s %s", bench_sha_release, l->key,
                              l->token, l->channel) == REDIS_OK) {
            l->pending++;
        }
    }
    if (l->pending == 0) {
        bench_stop();
    }
}

static void
bench_acquire_cb(redisAsyncContext *ac, void *reply, void *privdata)
{
    struct bench_loop *l = privdata;
    redisReply *r = reply;

    (void)ac;
    if (bench_stopping) {
        return;
    }
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1) {
        if (r->elements == 2) {
            l->granted++;
            if (l->granted == bench_quorum()) {
                l->won = true;
                bench_record(bench_now_us() - l->sent_us);
            }
        }
    } else {
        bench_direct_fail("acquire", r);
    }
    if (--l->pending > 0) {
        return;
    }
    if (!l->won) {
        bench_st.errors++;
    }
    bench_loop_release(l);
}

static void
bench_loop_acquire(struct bench_loop *l)
{
    size_t i;

    bench_token(l->token);
    l->releasing = false;
    l->pending = 0;
    l->granted = 0;
    l->won = false;
    l->sent_us = bench_now_us();
    for (i = 0; i < bench_opt.nmasters; i++) {
        if (bench_masters[i].ac == NULL) {
            continue;
        }
        if (redisAsyncCommand(bench_masters[i].ac, bench_acquire_cb, l,
                              "EVALSHA %s 1 %s %s %ld %s", bench_sha_acquire, l->key,
                              l->token, bench_opt.ttl_ms, l->channel) == REDIS_OK) {
            l->pending++;
        }
    }
    if (l->pending == 0) {
        bench_stop();
    }
}

static void
bench_master_disconnect_cb(const redisAsyncContext *ac, int status)
{
    size_t i;

    for (i = 0; i < bench_opt.nmasters; i++) {
        if (bench_masters[i].ac == ac) {
            bench_masters[i].ac = NULL;
            if (!bench_stopping) {
                bench_st.errors++;
                fprintf(stderr, "redlock-bench: master %s:%d disconnected (%s)\n",
                        bench_opt.master_host[i], bench_opt.master_port[i],
                        status == REDIS_OK ? "closed" : ac->errstr);
                bench_stop();
            }
        }
    }
}

/* SCRIPT LOAD one script on a blocking connection into sha (41 bytes). */
static int
bench_script_load(redisContext *c, const char *text, char *sha)
{
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", text);
    int rc = -1;

    if (r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40) {
        memcpy(sha, r->str, 41);
        rc = 0;
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    return rc;
}

static int
bench_run_direct(void)
{
    struct timeval tv = { 2, 0 };
    redisContext *c;
    size_t i, n = (size_t)bench_opt.conns;
    long pid = (long)getpid();

    if (bench_opt.nmasters == 0) {
        fprintf(stderr, "redlock-bench: --mode direct needs --masters\n");
        return -1;
    }
    for (i = 0; i < bench_opt.nmasters; i++) {
        c = redisConnectWithTimeout(bench_opt.master_host[i], bench_opt.master_port[i], tv);
        if (c == NULL || c->err != 0
            || bench_script_load(c, bench_acquire_lua, bench_sha_acquire) != 0
            || bench_script_load(c, bench_release_lua, bench_sha_release) != 0) {
            fprintf(stderr, "redlock-bench: master %s:%d: cannot load the scripts%s%s\n",
                    bench_opt.master_host[i], bench_opt.master_port[i],
                    c != NULL && c->err != 0 ? ": " : "", c != NULL ? c->errstr : "");
            if (c != NULL) {
                redisFree(c);
            }
            return -1;
        }
        redisFree(c);
        bench_masters[i].ac = redisAsyncConnect(bench_opt.master_host[i],
                                                bench_opt.master_port[i]);
        if (bench_masters[i].ac == NULL || bench_masters[i].ac->err != 0
            || redisLibeventAttach(bench_masters[i].ac, bench_base) != REDIS_OK) {
            fprintf(stderr, "redlock-bench: master %s:%d: cannot connect\n",
                    bench_opt.master_host[i], bench_opt.master_port[i]);
            return -1;
        }
        redisAsyncSetDisconnectCallback(bench_masters[i].ac, bench_master_disconnect_cb);
    }
    bench_loops = calloc(n, sizeof(*bench_loops));
    if (bench_loops == NULL) {
        return -1;
    }
    bench_start_clock();
    for (i = 0; i < n; i++) {
        snprintf(bench_loops[i].key, sizeof(bench_loops[i].key), "bench-%ld-d%zu", pid, i);
        snprintf(bench_loops[i].channel, sizeof(bench_loops[i].channel), "%s released",
                 bench_loops[i].key);
        bench_loop_acquire(&bench_loops[i]);
    }
    event_base_dispatch(bench_base);
    if (!bench_stopping) {
        bench_stop();
    }
    for (i = 0; i < bench_opt.nmasters; i++) {
        if (bench_masters[i].ac != NULL) {
            redisAsyncFree(bench_masters[i].ac);
        }
    }
    return 0;
}

/* ---- rtt mode ---- */

static int
bench_run_rtt(void)
{
    struct timeval tv = { 2, 0 };
    char key[BENCH_NAME_MAX], token[BENCH_TOKEN_HEX + 1];
    int64_t t0, t1, end_us;
    redisContext *c;
    redisReply *r;
    bool ok;

    if (bench_opt.nmasters == 0) {
        fprintf(stderr, "redlock-bench: --mode rtt needs --masters (the first is used)\n");
        return -1;
    }
    c = redisConnectWithTimeout(bench_opt.master_host[0], bench_opt.master_port[0], tv);
    if (c == NULL || c->err != 0) {
        fprintf(stderr, "redlock-bench: cannot connect to %s:%d\n",
                bench_opt.master_host[0], bench_opt.master_port[0]);
        if (c != NULL) {
            redisFree(c);
        }
        return -1;
    }
    snprintf(key, sizeof(key), "bench-%ld-rtt", (long)getpid());
    bench_st.start_us = bench_now_us();
    end_us = bench_st.start_us + (int64_t)(bench_opt.duration_s * 1e6);
    for (;;) {
        bench_token(token);
        t0 = bench_now_us();
        if (t0 >= end_us) {
            break;
        }
        r = redisCommand(c, "SET %s %s NX PX %ld", key, token, bench_opt.ttl_ms);
        t1 = bench_now_us();
        ok = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
        if (r != NULL) {
            freeReplyObject(r);
        }
        if (r == NULL) {
            bench_st.errors++;
            fprintf(stderr, "redlock-bench: rtt: %s\n", c->errstr);
            break;
        }
        if (!ok) {
            bench_st.errors++;
        } else {
            bench_record(t1 - t0);
        }
        r = redisCommand(c, "DEL %s", key);
        if (r == NULL) {
            bench_st.errors++;
            break;
        }
        freeReplyObject(r);
        if (ok && bench_now_us() < end_us) {
            bench_st.pairs++;
        }
    }
    bench_st.end_us = bench_now_us();
    if (bench_st.end_us > end_us) {
        bench_st.end_us = end_us;
    }
    redisFree(c);
    return 0;
}

/* ---- output ---- */

static int
bench_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

static void
bench_lat_sort(struct bench_lat *l)
{
    if (l->n > 0) {
        qsort(l->us, l->n, sizeof(*l->us), bench_cmp_i64);
    }
}

/* The p-th percentile (nearest rank) of sorted latencies l; 0 when none. */
static int64_t
bench_lat_pct(const struct bench_lat *l, double p)
{
    size_t rank;

    if (l->n == 0) {
        return 0;
    }
    rank = (size_t)((p / 100.0) * (double)l->n + 0.999999);
    if (rank < 1) {
        rank = 1;
    }
    if (rank > l->n) {
        rank = l->n;
    }
    return l->us[rank - 1];
}

static int64_t
bench_lat_max(const struct bench_lat *l)
{
    return l->n > 0 ? l->us[l->n - 1] : 0;
}

/* Fewest and most grants per connection among connections [from, to). */
static void
bench_acq_range(size_t from, size_t to, uint64_t *amin, uint64_t *amax, uint64_t *sum)
{
    size_t i;

    *amin = UINT64_MAX;
    *amax = 0;
    *sum = 0;
    for (i = from; i < to; i++) {
        if (bench_conns[i].acquired < *amin) {
            *amin = bench_conns[i].acquired;
        }
        if (bench_conns[i].acquired > *amax) {
            *amax = bench_conns[i].acquired;
        }
        *sum += bench_conns[i].acquired;
    }
    if (*amin == UINT64_MAX) {
        *amin = 0;
    }
}

static void
bench_print(void)
{
    double secs = (double)(bench_st.end_us - bench_st.start_us) / 1e6;
    uint64_t amin, amax, sum;
    bool daemon = bench_opt.mode == BENCH_UNCONTENDED || bench_opt.mode == BENCH_HOT
                  || bench_opt.mode == BENCH_COUNTED || bench_opt.mode == BENCH_SHARED
                  || bench_opt.mode == BENCH_PAIRS;

    if (secs <= 0) {
        secs = 1e-6;
    }
    bench_lat_sort(&bench_st.lat);
    bench_lat_sort(&bench_st.rel);
    bench_lat_sort(&bench_st.wlat);
    bench_lat_sort(&bench_st.wrel);
    printf("{\"mode\":\"%s\",\"connections\":%ld,\"seconds\":%.3f,\"ttl_ms\":%ld,"
           "\"pairs\":%" PRIu64 ",\"pairs_per_s\":%.1f,\"p50_us\":%" PRId64
           ",\"p90_us\":%" PRId64 ",\"p99_us\":%" PRId64 ",\"max_us\":%" PRId64
           ",\"errors\":%" PRIu64,
           bench_opt.mode_name, bench_opt.conns, secs, bench_opt.ttl_ms, bench_st.pairs,
           (double)bench_st.pairs / secs, bench_lat_pct(&bench_st.lat, 50),
           bench_lat_pct(&bench_st.lat, 90), bench_lat_pct(&bench_st.lat, 99),
           bench_lat_max(&bench_st.lat), bench_st.errors);
    if (daemon) {
        printf(",\"rel_p50_us\":%" PRId64 ",\"rel_p99_us\":%" PRId64,
               bench_lat_pct(&bench_st.rel, 50), bench_lat_pct(&bench_st.rel, 99));
    }
    if (bench_opt.mode == BENCH_HOT || bench_opt.mode == BENCH_COUNTED
        || bench_opt.mode == BENCH_SHARED || bench_opt.mode == BENCH_PAIRS) {
        /* shared: the readers only */
        bench_acq_range(0, (size_t)bench_opt.conns, &amin, &amax, &sum);
        printf(",\"min_acq\":%" PRIu64 ",\"max_acq\":%" PRIu64, amin, amax);
    }
    if (bench_opt.mode == BENCH_COUNTED) {
        printf(",\"limit\":%ld,\"fill\":%ld,\"max_holders\":%" PRIu64 ",\"clashes\":%" PRIu64,
               bench_opt.limit, bench_opt.fill, bench_seen.max_holders, bench_seen.clashes);
    }
    if (bench_opt.mode == BENCH_PAIRS) {
        printf(",\"set\":%d,\"own\":%d,\"names\":%ld,\"wait_ms\":%d,\"max_held\":%" PRIu64
               ",\"clashes\":%" PRIu64, bench_opt.set ? 1 : 0, bench_opt.own ? 1 : 0,
               bench_opt.names,
               BENCH_PAIRS_WAIT_MS, bench_seen.max_holders, bench_seen.clashes);
    }
    if (bench_opt.mode == BENCH_SHARED) {
        bench_acq_range((size_t)bench_opt.conns, bench_nconns, &amin, &amax, &sum);
        printf(",\"max_readers\":%" PRIu64 ",\"mixed\":%" PRIu64 ",\"writers\":%ld"
               ",\"writer_pairs\":%" PRIu64 ",\"writer_pairs_per_s\":%.1f"
               ",\"writer_p50_us\":%" PRId64 ",\"writer_p90_us\":%" PRId64
               ",\"writer_p99_us\":%" PRId64 ",\"writer_max_us\":%" PRId64
               ",\"writer_rel_p50_us\":%" PRId64 ",\"writer_acq\":%" PRIu64
               ",\"writer_min_acq\":%" PRIu64,
               bench_seen.max_holders, bench_seen.mixed, bench_opt.writers, bench_st.wpairs,
               (double)bench_st.wpairs / secs, bench_lat_pct(&bench_st.wlat, 50),
               bench_lat_pct(&bench_st.wlat, 90), bench_lat_pct(&bench_st.wlat, 99),
               bench_lat_max(&bench_st.wlat), bench_lat_pct(&bench_st.wrel, 50), sum, amin);
    }
    printf("}\n");
    fflush(stdout);
}

/* ---- command line ---- */

static void
bench_usage(FILE *f)
{
    fprintf(f,
            "usage: redlock-bench --mode uncontended|hot|counted|shared|pairs|direct|rtt|\n"
            "                            hold|lease-hold|names-hold|list [options]\n"
            "  -m, --mode MODE          what to measure (see the head of redlock_bench.c)\n"
            "  -c, --connections N      connections (uncontended, hot, counted, shared:\n"
            "                           the readers, hold, lease-hold) or loops (direct);\n"
            "                           default 1, hot and pairs 50, counted and shared 64,\n"
            "                           direct 64,\n"
            "                           hold 100 (one lock each), lease-hold and names-hold\n"
            "                           8, list 1; rtt always 1\n"
            "  -n, --locks N            lease-hold: lease-mode LOCKs to send, names-hold:\n"
            "                           session-mode ones (default 1000)\n"
            "  -l, --limit N            counted: the name's limit (default 8); hold: ask\n"
            "                           for permits of counted names with this limit\n"
            "  -k, --names K            hold with --limit: connection i asks for name\n"
            "                           i mod K (default 1); connections <= K * limit;\n"
            "                           pairs: the names the pairs are drawn from (default\n"
            "                           20, at least 2)\n"
            "  -S, --set                pairs: LOCK a b as one set (else LOCK a, LOCK b)\n"
            "  -O, --own                pairs: connection i always on names 2i and 2i+1\n"
            "                           (--names is then 2 * connections)\n"
            "  -f, --fill F             counted: F permits taken first by lease-mode LOCKs\n"
            "                           (F < limit; they expire 30 s after the run)\n"
            "  -w, --writers W          shared: exclusive loops besides the readers (default 1)\n"
            "  -d, --duration SECONDS   length of the run, or of the hold after the last\n"
            "                           grant (hold, lease-hold; SIGTERM ends it sooner);\n"
            "                           default 10, fractions allowed\n"
            "  -t, --ttl MS             lease asked for (default 10000)\n"
            "  -T, --target ADDR        the daemon: HOST:PORT (IPv4) or /path/to/socket\n"
            "  -M, --masters LIST       HOST:PORT,HOST:PORT,... (direct; rtt uses the first)\n"
            "  -C, --tls-ca FILE        TLS to the daemon (its listen.tls port as --target),\n"
            "                           its certificate verified against the CA in FILE\n"
            "  -N, --tls-name NAME      with --tls-ca: the name to verify (default: the\n"
            "                           target's host; an address is checked as an IP entry)\n"
            "  -F, --fence              uncontended, hot: LOCK ... fence; an OK without a\n"
            "                           fence above the connection's last one is an error\n"
            "  -h, --help\n"
            "Prints one JSON line: pairs, pairs_per_s, p50/p90/p99/max acquire latency\n"
            "in microseconds, errors, rel_p50/p99 release latency (daemon modes), for\n"
            "hot, counted, shared and pairs min_acq/max_acq per connection, for counted\n"
            "max_holders and clashes, for pairs set, names, max_held and clashes, for\n"
            "shared max_readers, mixed and writer_*.  The\n"
            "hold modes print {\"event\":\"held\",...} once every LOCK was answered,\n"
            "then, when the hold ends, asked, held, grant_seconds, hold_seconds, lost\n"
            "and errors.\n");
}

static int
bench_parse_masters(char *spec)
{
    char *save = NULL, *item, *colon, *end;
    long port;

    for (item = strtok_r(spec, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        colon = strrchr(item, ':');
        if (colon == NULL || bench_opt.nmasters == BENCH_MASTERS_MAX) {
            fprintf(stderr, "redlock-bench: bad --masters item '%s'\n", item);
            return -1;
        }
        *colon = '\0';
        errno = 0;
        port = strtol(colon + 1, &end, 10);
        if (errno != 0 || *end != '\0' || port < 1 || port > 65535 || item[0] == '\0') {
            fprintf(stderr, "redlock-bench: bad --masters port '%s'\n", colon + 1);
            return -1;
        }
        bench_opt.master_host[bench_opt.nmasters] = item;
        bench_opt.master_port[bench_opt.nmasters++] = (int)port;
    }
    return bench_opt.nmasters > 0 ? 0 : -1;
}

static int
bench_parse(int argc, char **argv)
{
    static const struct option longs[] = {
        { "mode", required_argument, NULL, 'm' },
        { "connections", required_argument, NULL, 'c' },
        { "locks", required_argument, NULL, 'n' },
        { "limit", required_argument, NULL, 'l' },
        { "names", required_argument, NULL, 'k' },
        { "fill", required_argument, NULL, 'f' },
        { "writers", required_argument, NULL, 'w' },
        { "duration", required_argument, NULL, 'd' },
        { "ttl", required_argument, NULL, 't' },
        { "target", required_argument, NULL, 'T' },
        { "masters", required_argument, NULL, 'M' },
        { "tls-ca", required_argument, NULL, 'C' },
        { "tls-name", required_argument, NULL, 'N' },
        { "fence", no_argument, NULL, 'F' },
        { "set", no_argument, NULL, 'S' },
        { "own", no_argument, NULL, 'O' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    char *end;
    int ch;

    bench_opt.conns = -1;
    bench_opt.locks = BENCH_LEASE_LOCKS;
    bench_opt.limit = -1;
    bench_opt.names = 0;    /* not given: 1, pairs 20 (below) */
    bench_opt.fill = 0;
    bench_opt.writers = 1;
    bench_opt.duration_s = 10;
    bench_opt.ttl_ms = 10000;
    while ((ch = getopt_long(argc, argv, "m:c:n:l:k:f:w:d:t:T:M:C:N:FSOh", longs, NULL)) != -1) {
        switch (ch) {
        case 'm':
            bench_opt.mode_name = optarg;
            break;
        case 'c':
            bench_opt.conns = strtol(optarg, &end, 10);
            if (*end != '\0' || bench_opt.conns < 1 || bench_opt.conns > BENCH_CONNS_MAX) {
                fprintf(stderr, "redlock-bench: --connections: 1..%d\n", BENCH_CONNS_MAX);
                return -1;
            }
            break;
        case 'n':
            bench_opt.locks = strtol(optarg, &end, 10);
            if (*end != '\0' || bench_opt.locks < 1 || bench_opt.locks > BENCH_LOCKS_MAX) {
                fprintf(stderr, "redlock-bench: --locks: 1..%d\n", BENCH_LOCKS_MAX);
                return -1;
            }
            break;
        case 'l':
        case 'k':
        case 'f':
        case 'w': {
            long v = strtol(optarg, &end, 10);
            long lo = ch == 'f' ? 0 : 1;
            long hi = ch == 'k' ? BENCH_CONNS_MAX : ch == 'w' ? 1000 : BENCH_LIMIT_MAX;

            if (*end != '\0' || optarg[0] == '\0' || v < lo || v > hi) {
                fprintf(stderr, "redlock-bench: --%s: %ld..%ld\n",
                        ch == 'l' ? "limit" : ch == 'k' ? "names" : ch == 'f' ? "fill"
                                                                        : "writers", lo, hi);
                return -1;
            }
            *(ch == 'l' ? &bench_opt.limit : ch == 'k' ? &bench_opt.names
              : ch == 'f' ? &bench_opt.fill : &bench_opt.writers) = v;
            break;
        }
        case 'd':
            bench_opt.duration_s = strtod(optarg, &end);
            if (*end != '\0' || !(bench_opt.duration_s > 0) || bench_opt.duration_s > 86400) {
                fprintf(stderr, "redlock-bench: --duration: seconds > 0\n");
                return -1;
            }
            break;
        case 't':
            bench_opt.ttl_ms = strtol(optarg, &end, 10);
            if (*end != '\0' || bench_opt.ttl_ms < 1) {
                fprintf(stderr, "redlock-bench: --ttl: milliseconds > 0\n");
                return -1;
            }
            break;
        case 'T':
            bench_opt.target = optarg;
            break;
        case 'M':
            free(bench_opt.masters_spec);
            bench_opt.masters_spec = strdup(optarg);
            bench_opt.nmasters = 0;
            if (bench_opt.masters_spec == NULL
                || bench_parse_masters(bench_opt.masters_spec) != 0) {
                return -1;
            }
            break;
        case 'C':
            bench_opt.tls_ca = optarg;
            break;
        case 'N':
            bench_opt.tls_name = optarg;
            break;
        case 'F':
            bench_opt.fence = true;
            break;
        case 'S':
            bench_opt.set = true;
            break;
        case 'O':
            bench_opt.own = true;
            break;
        case 'h':
            bench_usage(stdout);
            exit(0);
        default:
            return -1;
        }
    }
    if (optind != argc || bench_opt.mode_name == NULL) {
        return -1;
    }
    if (strcmp(bench_opt.mode_name, "uncontended") == 0) {
        bench_opt.mode = BENCH_UNCONTENDED;
    } else if (strcmp(bench_opt.mode_name, "hot") == 0) {
        bench_opt.mode = BENCH_HOT;
    } else if (strcmp(bench_opt.mode_name, "direct") == 0) {
        bench_opt.mode = BENCH_DIRECT;
    } else if (strcmp(bench_opt.mode_name, "rtt") == 0) {
        bench_opt.mode = BENCH_RTT;
    } else if (strcmp(bench_opt.mode_name, "hold") == 0) {
        bench_opt.mode = BENCH_HOLD;
    } else if (strcmp(bench_opt.mode_name, "lease-hold") == 0) {
        bench_opt.mode = BENCH_LEASE_HOLD;
    } else if (strcmp(bench_opt.mode_name, "names-hold") == 0) {
        bench_opt.mode = BENCH_NAMES_HOLD;
    } else if (strcmp(bench_opt.mode_name, "list") == 0) {
        bench_opt.mode = BENCH_LIST;
    } else if (strcmp(bench_opt.mode_name, "counted") == 0) {
        bench_opt.mode = BENCH_COUNTED;
    } else if (strcmp(bench_opt.mode_name, "shared") == 0) {
        bench_opt.mode = BENCH_SHARED;
    } else if (strcmp(bench_opt.mode_name, "pairs") == 0) {
        bench_opt.mode = BENCH_PAIRS;
    } else {
        fprintf(stderr, "redlock-bench: unknown mode '%s'\n", bench_opt.mode_name);
        return -1;
    }
    if (bench_opt.mode == BENCH_RTT) {
        bench_opt.conns = 1;
    } else if (bench_opt.conns < 0) {
        bench_opt.conns = bench_opt.mode == BENCH_HOT ? 50
                          : bench_opt.mode == BENCH_PAIRS ? BENCH_PAIRS_CONNS
                          : bench_opt.mode == BENCH_DIRECT ? 64
                          : bench_opt.mode == BENCH_COUNTED ? 64
                          : bench_opt.mode == BENCH_SHARED ? 64
                          : bench_opt.mode == BENCH_HOLD ? BENCH_HOLD_CONNS
                          : bench_opt.mode == BENCH_LEASE_HOLD ? BENCH_LEASE_CONNS
                          : bench_opt.mode == BENCH_NAMES_HOLD ? BENCH_LEASE_CONNS : 1;
    }
    if (bench_opt.own && bench_opt.mode == BENCH_PAIRS) {
        bench_opt.names = 2 * bench_opt.conns;
    }
    if (bench_opt.names == 0) {
        bench_opt.names = bench_opt.mode == BENCH_PAIRS ? BENCH_PAIRS_NAMES : 1;
    }
    if (bench_opt.mode == BENCH_PAIRS && bench_opt.names < 2) {
        fprintf(stderr, "redlock-bench: --mode pairs needs --names 2 or more\n");
        return -1;
    }
    if ((bench_opt.set || bench_opt.own) && bench_opt.mode != BENCH_PAIRS) {
        fprintf(stderr, "redlock-bench: --set and --own are for the pairs mode\n");
        return -1;
    }
    if (bench_opt.mode == BENCH_COUNTED && bench_opt.limit < 0) {
        bench_opt.limit = BENCH_COUNTED_LIMIT;
    }
    if (bench_opt.mode != BENCH_COUNTED && bench_opt.mode != BENCH_HOLD) {
        bench_opt.limit = -1;
    }
    if (bench_opt.mode == BENCH_COUNTED && bench_opt.fill >= bench_opt.limit) {
        fprintf(stderr, "redlock-bench: --fill must leave a permit free (below --limit %ld)\n",
                bench_opt.limit);
        return -1;
    }
    if (bench_opt.mode == BENCH_HOLD && bench_opt.limit > 0
        && bench_opt.conns > bench_opt.names * bench_opt.limit) {
        fprintf(stderr, "redlock-bench: %ld connections cannot all hold a permit of %ld "
                "names with limit=%ld\n", bench_opt.conns, bench_opt.names, bench_opt.limit);
        return -1;
    }
    if (bench_opt.mode != BENCH_SHARED) {
        bench_opt.writers = 0;
    }
    if (bench_opt.tls_ca != NULL
        && (bench_opt.mode == BENCH_DIRECT || bench_opt.mode == BENCH_RTT)) {
        fprintf(stderr, "redlock-bench: --tls-ca is for the daemon modes\n");
        return -1;
    }
    if (bench_opt.mode != BENCH_COUNTED) {
        bench_opt.fill = 0;
    }
    if (bench_opt.fence && bench_opt.mode != BENCH_UNCONTENDED && bench_opt.mode != BENCH_HOT) {
        fprintf(stderr, "redlock-bench: --fence is for the uncontended and hot modes\n");
        return -1;
    }
    return 0;
}

/*
 * Raise the soft RLIMIT_NOFILE to the hard one, and check that the
 * connections fit.  Returns 0 or -1 (with a message).
 */
static int
bench_raise_nofile(void)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)bench_opt.conns + (rlim_t)bench_opt.writers + BENCH_FDS_SPARE;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        fprintf(stderr, "redlock-bench: getrlimit(RLIMIT_NOFILE): %s\n", strerror(errno));
        return -1;
    }
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            fprintf(stderr, "redlock-bench: setrlimit(RLIMIT_NOFILE, %llu): %s\n",
                    (unsigned long long)rl.rlim_cur, strerror(errno));
            (void)getrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        fprintf(stderr, "redlock-bench: %ld connections need %llu descriptors, "
                "RLIMIT_NOFILE is %llu (hard %llu)\n", bench_opt.conns,
                (unsigned long long)need, (unsigned long long)rl.rlim_cur,
                (unsigned long long)rl.rlim_max);
        return -1;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    int rc;

    if (bench_parse(argc, argv) != 0) {
        bench_usage(stderr);
        return 2;
    }
    if (bench_raise_nofile() != 0) {
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    if (getrandom(&bench_rng, sizeof(bench_rng), 0) != (ssize_t)sizeof(bench_rng)
        || bench_rng == 0) {
        bench_rng = (uint64_t)bench_now_us() | 1;
    }
    bench_base = event_base_new();
    if (bench_base == NULL) {
        fprintf(stderr, "redlock-bench: event_base_new failed\n");
        return 1;
    }
    if (bench_opt.tls_ca != NULL && bench_tls_init() != 0) {
        return 1;
    }
    switch (bench_opt.mode) {
    case BENCH_DIRECT:
        rc = bench_run_direct();
        break;
    case BENCH_RTT:
        rc = bench_run_rtt();
        break;
    case BENCH_HOLD:
    case BENCH_LEASE_HOLD:
    case BENCH_NAMES_HOLD:
        rc = bench_run_hold();
        break;
    case BENCH_LIST:
        rc = bench_run_list();
        break;
    default:
        rc = bench_run_daemon();
        break;
    }
    if (rc != 0) {
        return 1;
    }
    if (bench_opt.mode == BENCH_HOLD || bench_opt.mode == BENCH_LEASE_HOLD
        || bench_opt.mode == BENCH_NAMES_HOLD) {
        bench_hold_print();
    } else if (bench_opt.mode == BENCH_LIST) {
        bench_list_print();
    } else {
        bench_print();
    }
    free(bench_st.lat.us);
    free(bench_st.rel.us);
    free(bench_st.wlat.us);
    free(bench_st.wrel.us);
    free(bench_seen.permit_of);
    free(bench_pair_names);
    if (bench_flush != NULL) {
        event_free(bench_flush);
    }
    free(bench_conns);
    free(bench_loops);
    free(bench_opt.masters_spec);
    if (bench_deadline != NULL) {
        event_free(bench_deadline);
    }
    if (bench_sig_term != NULL) {
        event_free(bench_sig_term);
    }
    if (bench_sig_int != NULL) {
        event_free(bench_sig_int);
    }
    event_base_free(bench_base);
    SSL_CTX_free(bench_ssl_ctx);
    return 0;
}
