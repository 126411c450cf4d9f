/*
 * master_link.h: the records of the master module's two files, and
 * nothing outside them includes (daemon/master.h is the module's
 * interface).  daemon/master.c keeps the links' life (connect,
 * handshake, reconnect, drop); daemon/master_eval.c the requests sent
 * over the command link (the scripts, EVALSHA with its NOSCRIPT retry,
 * the per-iteration batch, the replies); daemon/master_keeper.c the
 * clock keeper and the layout registry's reads.  master_eval.c uses
 * master.c, never the other way round.
 */
#ifndef REDLOCKD_MASTER_LINK_H
#define REDLOCKD_MASTER_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "daemon/flush.h"
#include "daemon/master.h"
#include "daemon/redisev.h"

struct conf;
struct event;
struct evdns_getaddrinfo_request;
struct redisReply;
struct redisev;

#define MASTER_SCRIPTS_MAX      24
#define MASTER_WHY_MAX          256

/* For log lines: which of a master's two links. */
#define MASTER_LINK_WHAT(k)     ((k)->subscriber ? " (subscriber)" : "")

/*
 * One connection to a master: the command link (scripts) or the
 * subscriber link (release announcements; a connection in subscribed
 * mode takes no other commands).  Each connects, authenticates and
 * reconnects on its own.
 */
struct master_link {
    struct master      *master;     /* the master it belongs to */
    const struct conf_addr *addr;   /* address, points into the conf */
    bool                subscriber; /* the subscriber link */
    enum master_state   state;      /* connection state */
    struct redisev     *ac;         /* live link (daemon/redisev.h), NULL when down */
    struct event       *timer;      /* connect deadline, or reconnect delay */
    int64_t             backoff_ms; /* next reconnect delay before jitter */
    int                 pending;    /* handshake replies still expected */
    int                 inflight;   /* requests sent on ac, not answered yet */
    int64_t             progress_us;/* last reply, or when inflight left 0 */
    bool                ever_up;    /* has been up once (for reconnects) */
    bool                drop_now;   /* drop requested where it cannot be done:
                                       the timer does it, with why */
    bool                resolving;  /* an evdns lookup is in flight */
    struct evdns_getaddrinfo_request *dns_req; /* that lookup, to cancel */
    char                why[MASTER_WHY_MAX]; /* last failure, for status text */
};

/*
 * The requests made for one master and not written yet: one queue per
 * class (enum master_class), each first come first served.  Written at
 * the end of the loop iteration (daemon/flush.h) while the command link
 * has room (redis.max_pending calls unanswered at most), the first class
 * first; the requests of batched scripts at the heads of the queues
 * travel together as one call of the batch script.  Owned by its
 * master; the requests in it by the queue until they are written.
 */
TAILQ_HEAD(master_req_list, master_req);

struct master_queue {
    struct flush_entry     fe;                      /* listed while requests wait */
    struct master_req_list q[MASTER_CLASSES];       /* waiting, per class */
    size_t                 n[MASTER_CLASSES];       /* requests in each */
    uint64_t               written[MASTER_CLASSES]; /* written after a wait, since start */
    uint64_t               wait_us[MASTER_CLASSES]; /* those waits' sum, us */
    uint64_t               expired[MASTER_CLASSES]; /* failed unwritten: at the deadline,
                                                       or withdrawn (master_withdraw) */
};

/* A batch sent: its requests, until its answer (or the link's loss) comes. */
struct master_batch_req {
    struct master      *m;          /* the master it was sent to */
    struct master_req  *items;      /* its requests, in order (linked by next) */
    size_t              n;          /* how many */
    bool                retried;    /* NOSCRIPT retry with EVAL done */
    int64_t             sent_us;    /* monotonic send time */
};

/*
 * One master.  Owned by this module (the masters array); freed by
 * master_stop().
 */
struct master {
    size_t              index;      /* position in the config */
    const struct conf_addr *addr;   /* address, points into the conf */
    struct master_link  cmd;        /* scripts */
    struct master_link  sub;        /* SUBSCRIBE */
    char                status[MASTER_WHY_MAX + LAYOUT_WHY_MAX]; /* master_status_text buffer */
    char                sha[MASTER_SCRIPTS_MAX][41]; /* SCRIPT LOAD answers, per master */
    bool                clock_probing;       /* a TIME of the clock keeper is in
                                                flight on the command link */
    int64_t             clock_probe_sent_us; /* monotonic: when it was sent */
    int64_t             layout_sent_us;      /* monotonic: when the last layout
                                                registry read was sent */
    struct master_stats stats;      /* counters (daemon/health.c keeps its own) */
    struct master_queue queue;      /* requests not written yet */
};

/* One request in flight on a master; freed after its callback. */
struct master_req {
    struct master_req  *next;       /* in a call being formed, or in a batch in flight */
    TAILQ_ENTRY(master_req) qlink;  /* in its master's queue, until written */
    struct master      *m;          /* the master it was sent to */
    master_reply_fn     cb;         /* caller's callback */
    void               *arg;        /* caller's argument */
    int                 script;     /* script id */
    size_t              nkeys;      /* keys among args */
    size_t              nargs;      /* args count */
    const char *const  *args;       /* caller's args (kept alive by caller) */
    const size_t       *lens;       /* their lengths */
    bool                retried;    /* NOSCRIPT retry with EVAL done */
    enum master_class   cls;        /* its script's class */
    bool                queued;     /* in its master's queue (not written yet) */
    int64_t             queued_us;  /* monotonic: when it was asked for */
    int64_t             sent_us;    /* monotonic send time */
};

/*
 * A request was sent on k: count it, and make sure the link's timer
 * watches for silence (daemon/master.c).
 */
void master_link_sent(struct master_link *k);

/* A reply arrived on k at now_us; answered says whether it ends a request. */
void master_link_answered(struct master_link *k, bool answered, int64_t now_us);

/* k's requests will not be answered: tell whoever the link worked for. */
void master_link_lost(struct master_link *k);

/*
 * Send master m the layout registry's script (daemon/layout.h) on its
 * command link, answered to fn with privdata (daemon/master_keeper.c).
 * Returns REDIS_OK or REDIS_ERR.
 */
int master_layout_send(struct master *m, redisev_reply_fn fn, void *privdata);

/*
 * Read the registry's answer to a read of m sent at sent_us (reply is a
 * redisReply): its TIME to the clock check, the rest to daemon/layout.c.
 * Returns 0, or -1 when the answer is not of that shape at all (the
 * caller drops the link).
 */
int master_layout_read(struct master *m, const struct redisReply *reply, int64_t sent_us);

/* Start and stop the clock keeper's timer on ctx.base (daemon/master_keeper.c). */
void master_keeper_start(void);
void master_keeper_stop(void);

/*
 * Load text (kept, not copied: it must live until exit) with SCRIPT LOAD
 * on every command link's handshake, in the order given; its SHA1 lands
 * in each master's sha[] at the returned index.  Returns the index, or
 * -1 when MASTER_SCRIPTS_MAX are loaded.  (master_script() registers
 * through it: daemon/master_eval.c sits above daemon/master.c.)
 */
int master_load(const char *text);

/* Each request of the list items gets cb(m, NULL, why) and is freed. */
void master_requests_fail(struct master *m, struct master_req *items, const char *why);

/*
 * Take every request out of m's queue, as a list linked by next (first
 * class first), or NULL when none waits; the queue leaves the flush list.
 */
struct master_req *master_queue_take(struct master *m);

#endif /* REDLOCKD_MASTER_LINK_H */
