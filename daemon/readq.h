/*
 * readq.h: the daemon's budget of reads of the masters in flight,
 * shared round-robin by the sessions that read.
 *
 * A read (a STATUS, or a WATCHed name's read) costs one script per
 * master and is worth less than the lock work beside it, so the daemon
 * bounds the reads in flight at limits.max_reads_in_flight whatever
 * the number of sessions, and gives each session at most one at a time.
 * A read over the budget waits in its session's queue; the sessions
 * with a read waiting form a ring, and a slot that frees goes to the
 * next session in the ring (its oldest read), so one session reading a
 * lot never starves another reading a little (the scheduling is the
 * round-robin of fair queueing, one read a turn).
 *
 * Ownership: a struct readq_client is embedded in the state of its
 * session, and a struct readq_job in what it reads for (a STATUS
 * request, a watched name); this module only links them, never frees
 * them.  Nothing here talks to the masters: the job's function does,
 * when let in.
 */
#ifndef REDLOCKD_READQ_H
#define REDLOCKD_READQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

struct readq_job;

/* Let a waiting job in: start its read now (readq_done() when it ends). */
typedef void (*readq_start_fn)(struct readq_job *j, void *arg);

TAILQ_HEAD(readq_job_list, readq_job);

/* One session's reads; embed it, zero it, then readq_client_init(). */
struct readq_client {
    struct readq_job_list  waiting;     /* its jobs waiting, oldest first */
    struct readq_job      *running;     /* its job in flight, or NULL */
    bool                   in_ring;     /* in the ring of clients with a job waiting */
    TAILQ_ENTRY(readq_client) ring_link;
};

/* One read to be made; embed it, zero it. */
struct readq_job {
    struct readq_client   *owner;       /* whose read it is; NULL once the owner left */
    readq_start_fn         start;       /* called when a waiting job is let in */
    void                  *arg;         /* start's argument */
    int64_t                asked_us;    /* monotonic: when it began to wait */
    bool                   waiting;     /* in owner->waiting */
    bool                   running;     /* let in, readq_done() not called yet */
    TAILQ_ENTRY(readq_job) link;
};

/*
 * Set the budget: reads in flight at once, daemon-wide (>= 1).  Reload
 * too: a wider budget lets waiting jobs in during the call (their start
 * runs), a narrower one lets none in until enough reads end.
 */
void readq_set_max(int64_t max_in_flight);

/* Prepare a client: nothing waiting, nothing running. */
void readq_client_init(struct readq_client *c);

/*
 * j (not waiting, not running) wants a read for c.  When the budget
 * has a slot, c has no read in flight and no session waits before it,
 * j is let in at once: returns true, and the caller starts the read
 * itself (start is not called).  Otherwise j waits: returns false, and
 * start(j, arg) is called from a later readq_done() (from whatever
 * callback ends another read) when j is let in.  Either way, readq_done(j)
 * must follow the read's end.
 */
bool readq_ask(struct readq_client *c, struct readq_job *j, readq_start_fn start, void *arg);

/*
 * j's read ended (or, let in, it started none): its slot goes to the
 * next session in the ring, whose job's start runs during this call.
 */
void readq_done(struct readq_job *j);

/* Take a waiting j out of its queue (no-op when it is not waiting). */
void readq_cancel(struct readq_job *j);

/*
 * c is going away: its waiting jobs must have been cancelled; a job of
 * its in flight keeps its slot until readq_done(), owned by no one.
 */
void readq_client_close(struct readq_client *c);

/* Reads in flight now (let in, not done). */
size_t readq_in_flight(void);

/* Jobs waiting now, every session. */
size_t readq_waiting(void);

#endif /* REDLOCKD_READQ_H */
