/*
 * master.h: asynchronous connections to the Redis masters.
 *
 * The module is two files: daemon/master.c (the links) and
 * daemon/master_eval.c (the requests), sharing daemon/master_link.h.
 * With its transport (daemon/redisev.h) and daemon/health.c, which
 * reads the answers it is handed, it is the only code that includes
 * hiredis, used as the RESP codec.  It keeps two
 * connections per configured master (commands, pub/sub) on the daemon's
 * libevent base, plain or TLS, connects at start, authenticates when a
 * password is set, loads the registered Lua scripts with SCRIPT LOAD on every
 * (re)connect, and reconnects with jittered exponential backoff (100 ms
 * doubling to 5 s).  A master is "up" only after that handshake.
 *
 * Requests are Lua scripts sent with EVALSHA; a NOSCRIPT answer is
 * retried once with EVAL on the same connection.  There is no
 * per-command timeout: deadlines belong to the caller (daemon/round.h).
 * Every request's callback is called exactly once, with a reply, or with
 * NULL and an error text when the connection failed or was dropped.
 *
 * A master that stops answering while its connection stays open (a
 * SIGSTOP, a partition) is dropped, failing its pending requests at
 * once, when redis.down_after_ms passed without a reply while requests
 * written to it were unanswered; reconnecting with backoff follows.
 * What the daemon has not written yet is its own queue, never the
 * master's failure: at most redis.max_pending calls are written to a
 * command link and unanswered at a time, the rest wait in the daemon by
 * class (enum master_class: renewals and releases, then lock work, then
 * reads; first come first served within a class), and a request still
 * unwritten when its round's deadline (lock.node_timeout_ms) has passed
 * is failed without being written: the round it belongs to has ended.
 *
 * The handshake also asks what the master says about itself (INFO and
 * CONFIG GET, daemon/health.h, which judges the answers: restarts,
 * quarantines, duplicates, eviction) and hands the answers there, and
 * tells that module when the command link comes up or goes down.
 */
#ifndef REDLOCKD_MASTER_H
#define REDLOCKD_MASTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/layout.h"

struct conf;
struct master;
struct master_req;

/* A reply from a master.  It is valid only during the callback. */
struct master_reply;

enum master_reply_type {
    MASTER_REPLY_STRING,
    MASTER_REPLY_STATUS,
    MASTER_REPLY_INTEGER,
    MASTER_REPLY_NIL,
    MASTER_REPLY_ERROR,
    MASTER_REPLY_ARRAY,
    MASTER_REPLY_OTHER      /* a RESP3 type we never ask for */
};

/*
 * The classes of work on a command link, in the order they are written
 * when the daemon holds more than a link takes (master_eval): what keeps
 * a held lock alive or frees a name first, then what takes or changes a
 * hold, then reads.  Each script has one (master_script_class).
 */
enum master_class {
    MASTER_CLASS_RENEW,     /* renewals, restores and releases */
    MASTER_CLASS_LOCK,      /* acquires, EXTEND, hand-overs, fences, BREAK */
    MASTER_CLASS_READ,      /* STATUS and WATCH reads */
    MASTER_CLASSES
};

/* Connection state of a master, for STATS and logs. */
enum master_state {
    MASTER_DOWN,            /* waiting for the next connect attempt */
    MASTER_CONNECTING,      /* TCP/Unix connect in progress */
    MASTER_HANDSHAKE,       /* AUTH and SCRIPT LOAD sent, not all answered */
    MASTER_UP               /* ready for requests */
};

/* Counters kept per master. */
struct master_stats {
    enum master_state state;    /* now (the command link) */
    bool     sub_up;            /* the subscriber link is up */
    int64_t  rtt_us;            /* last request's round trip, us; -1 before any */
    uint64_t errors;            /* failed requests and error replies */
    uint64_t reconnects;        /* connections made after the first */
    uint64_t requests;          /* requests sent */
    uint64_t restarts;          /* restarts seen (a new run_id on reconnect) */
    uint64_t tls_failures;      /* TLS handshakes that failed (either link) */
    uint64_t clock_steps;       /* steps of its clock seen (lock.clock_check) */
    uint64_t clock_readings;    /* readings of its clock taken (health_counts) */
    int64_t  quarantine_ms;     /* restart or clock quarantine left (the longer),
                                   ms; 0 when none */
    int      duplicate_of;      /* index of the master it is the same server
                                   as (health_duplicate_of), or -1 */
    bool     evicting;          /* at its last connect: maxmemory set and a
                                   maxmemory-policy other than noeviction */
    long long maxmemory;        /* INFO memory maxmemory at the last connect,
                                   bytes; 0 when none or unknown */
    bool     down_known;        /* down, with the reason of a connect that failed */
    struct layout_view layout;  /* its layout registry at the last read */
    bool     layout_counts;     /* the layout registry lets its answers count now */
};

/* The masters at a glance (master_tally), for STATS, STATUS= and /metrics. */
struct master_summary {
    size_t   up;                /* command link up now */
    size_t   quarantined;       /* of those, in restart or clock quarantine */
    size_t   duplicate;         /* of those, the same server as another
                                   (health_duplicate_of() >= 0) */
    size_t   layout_refused;    /* of those, not counted for the layout registry
                                   (daemon/layout.h: refused, or not read lately) */
    size_t   counted;           /* up, not quarantined, not a duplicate, counted
                                   by the layout registry: the masters whose
                                   answers count now */
    size_t   evicting;          /* masters whose last connect found an evicting
                                   maxmemory-policy (up or not) */
    int64_t  quarantine_left_ms;/* the longest quarantine left, ms; 0: none */
};

/*
 * Called once per request.  reply is NULL when the request failed
 * without an answer; error then says why ("connection lost: ..."), and
 * is NULL otherwise.  m is the master that answered.
 */
typedef void (*master_reply_fn)(struct master *m, const struct master_reply *reply,
                                const char *error, void *arg);

/*
 * Register a Lua script before master_start().  The text is copied (the
 * copy lives until the process exits); it must not begin with a "#!"
 * line.  With clock, it is wrapped so that every answer also carries
 * the master's TIME, read for the clock check
 * (health_clock_read) and taken off before the callback
 * sees the answer; the body may read that time, taken once just before
 * it runs, as the number rl_clock_us (microseconds) instead of calling
 * TIME again.  Without clock, rl_clock_us is false and the answer comes
 * back as it is: for scripts whose answers only report facts (a
 * release: was the token there), never votes that grant or confirm a
 * lock; they cost the master one TIME call less.  Returns the script's
 * id for master_eval(), numbered from 0, or -1 when MASTER_SCRIPTS_MAX
 * are registered (out of memory aborts, daemon/xmalloc.h).
 */
int master_script(const char *text, bool clock);

/*
 * Send the requests of script (a master_script() id) inside the batch
 * script batch (another id, registered with its clock; the text of
 * daemon/scripts/batch.lua), as its operation op (a string that outlives
 * the masters): the requests master_eval() gets for batched scripts in
 * one loop iteration go to each master as one call at the iteration's
 * end (daemon/flush.h), in order, each answered as its script alone
 * would answer, with one TIME for the call.  A master that would get a
 * single request gets it as its own script.  Returns 0, or -1 when an id
 * is not registered or batch was registered without its clock.
 */
int master_script_batch(int script, int batch, const char *op);

/*
 * Put script (a master_script() id) in class cls: the order in which
 * its requests leave the daemon's queue when a link has no room
 * (master_eval).  A script not put in one is MASTER_CLASS_LOCK.
 * Returns 0, or -1 when the id is not registered or cls is not a class.
 */
int master_script_class(int script, enum master_class cls);

/*
 * The daemon's queue of class cls now, over every master: requests
 * waiting in *depth; since start, requests written after waiting in it
 * in *written, their waits' sum in *wait_us (us), and requests dropped
 * unwritten in *expired: at their round's deadline, or withdrawn when
 * their round was decided (master_withdraw).  Any pointer may be NULL.
 */
void master_queue_stats(enum master_class cls, uint64_t *depth, uint64_t *written,
                        uint64_t *wait_us, uint64_t *expired);

/*
 * Create a connection for every master in ctx.conf, on ctx.base
 * (daemon/ctx.h), and begin connecting.  The settings (timeouts,
 * max_pending, down_after_ms, AUTH, the quarantine settings) are read
 * from ctx.conf when used.  Returns 0, or -1 when the layout registry or
 * the DNS resolver cannot start (logged); out of memory aborts
 * (daemon/xmalloc.h).  Masters that cannot be reached are not an error:
 * they are retried with backoff.
 */
int master_start(void);

/*
 * After a reload (ctx.conf is the new settings): the masters' addresses
 * point into the new settings.  They must be the same as before (the
 * caller checked, conf_restart_changes()).
 */
void master_apply(void);

/* Close every connection (pending callbacks run with NULL) and free all. */
void master_stop(void);

/* Free what the requests' side keeps across masters (after master_stop()). */
void master_eval_stop(void);

/* Number of masters (the N of Redlock). */
size_t master_count(void);

/* The i-th master, 0 <= i < master_count(). */
struct master *master_at(size_t i);

/* Index of m in config order. */
size_t master_index(const struct master *m);

/* The address as written in the config ("127.0.0.1:7001"). */
const char *master_name(const struct master *m);

/* Fill *sum with the masters' state now.  O(masters). */
void master_tally(struct master_summary *sum);

/*
 * Whether master i's answers count now (now_us: util_now_us()): its
 * command link is up, it is in no quarantine, it is no duplicate of an
 * entry before it, and the layout registry counts it -- what
 * master_summary.counted adds up.  False for an index out of range.
 */
bool master_counted(size_t i, int64_t now_us);

/* Copy m's counters into st. */
void master_get_stats(const struct master *m, struct master_stats *st);

/*
 * Why the master is not up ("down (Connection refused)", "connecting",
 * "handshake"), for error texts.  Returns a pointer into m, valid until
 * the next event on m.
 */
const char *master_status_text(const struct master *m);

/*
 * One request in the wire format, built once and sent to many masters.
 * A round sends the same EVALSHA to every master; formatting it once
 * instead of once per master saves most of hiredis's formatting work
 * (callgrind: a third of the daemon's own instructions per round).
 * Zero-initialize it, pass it to master_eval() for each master, then
 * release it with master_shared_free().
 */
struct master_shared {
    char   *cmd;        /* the formatted EVALSHA (hiredis), or NULL */
    size_t  len;        /* bytes in cmd */
    char    sha[41];    /* the script's SHA1 it was formatted with */
};

/*
 * Send a registered script: EVALSHA <sha> <nkeys> args[0..nargs-1]
 * (the first nkeys args are keys).  args/lens must stay valid until cb
 * has been called (the round that owns them guarantees this).  shared,
 * when not NULL, is formatted on first use and then sent as it is to
 * every master whose SHA1 of the script is the same (all of them,
 * unless the masters hash differently); NULL formats for m alone.
 *
 * The request is written at once when m's command link has room
 * (fewer than redis.max_pending calls unanswered) and nothing waits
 * before it; otherwise it waits in the daemon's queue of its script's
 * class (master_script_class) until the link has room, and is failed
 * (cb with NULL and a text naming the daemon's queue) when
 * lock.node_timeout_ms passed before it could be written.
 *
 * Returns 0 when the request was taken: cb will be called exactly once,
 * later, from the event loop.  Returns -1 when m is not up or the
 * connection refused the write: cb will not be called; master_status_text()
 * says why.
 */
int master_eval(struct master *m, int script, size_t nkeys, size_t nargs,
                const char *const *args, const size_t *lens,
                struct master_shared *shared, master_reply_fn cb, void *arg,
                struct master_req **taken);

/*
 * The request taken (master_eval's *taken, valid until its callback
 * ran) is no longer wanted: its round was decided.  When it is still
 * unwritten in the daemon's queue and not of MASTER_CLASS_RENEW, it is
 * taken out and never written, and its callback runs now with NULL and
 * a text saying so.  Otherwise nothing happens (it is written, or it is
 * a renewal or release, which must still reach every master).  Why:
 * what a round's caller sends after the decision (the release of a
 * failed acquire's token) may be of a class written first, and would
 * otherwise reach the master before the request it undoes.
 */
void master_withdraw(struct master_req *req);

/* Free shared->cmd (the masters keep their own copies). */
void master_shared_free(struct master_shared *shared);

/*
 * Read and dispatch whatever replies from m already sit in its socket
 * (non-blocking; nothing happens when none do).  A round calls this at
 * its deadline so that a busy event loop does not turn answers that
 * arrived in time into timeouts.  Callbacks may run during the call.
 */
void master_poll(struct master *m);

/*
 * The subscriber links.  Each master has a second connection, which
 * connects, authenticates and reconnects on its own, and subscribes a
 * channel of its own ("redlockd keep-subscribed") so that it never
 * leaves subscribed mode.  What it is subscribed to beyond that belongs
 * to the module above (daemon/channel.h), told through these hooks.
 */
struct master_hooks {
    /* Master i's subscriber link came up: nothing else is subscribed on it. */
    void (*sub_up)(size_t i);
    /* Master i's subscriber link went down: its subscriptions are gone. */
    void (*sub_down)(size_t i);
    /* A (UN)SUBSCRIBE of channel on master i was confirmed. */
    void (*confirmed)(size_t i, bool subscribed, const char *channel, size_t len);
    /* A message published on a subscribed channel; valid during the call
     * (one call per master that delivers it). */
    void (*message)(const char *channel, size_t channel_len, const char *message,
                    size_t message_len);
};

/* Set the hooks (a pointer kept until master_stop(); NULL: none). */
void master_set_hooks(const struct master_hooks *hooks);

/*
 * Send SUBSCRIBE (or UNSUBSCRIBE, subscribe false) channel (len bytes)
 * on master i's subscriber link.  Returns 0 when sent (the answer comes
 * to hooks->confirmed), -1 when the link is not up or refused the
 * write (hooks->sub_up tells when to try again).
 */
int master_sub_send(size_t i, bool subscribe, const char *channel, size_t len);

/* Reply accessors; r must be non-NULL. */
enum master_reply_type master_reply_type(const struct master_reply *r);
long long master_reply_integer(const struct master_reply *r);
/* String, status and error text (NUL-terminated); len in *len when non-NULL. */
const char *master_reply_str(const struct master_reply *r, size_t *len);
size_t master_reply_elements(const struct master_reply *r);
const struct master_reply *master_reply_element(const struct master_reply *r, size_t i);

#endif /* REDLOCKD_MASTER_H */
