/*
 * flush.h: the writes of one loop iteration, made together at its end.
 *
 * A connection that has new output joins the flush list instead of
 * asking libevent for a write event; one event, made active when the
 * list gains its first entry, calls every listed entry's flush function
 * once the callbacks already queued in this loop iteration have run.  So
 * the replies and commands that many callbacks produce in one wake-up
 * leave in one write(2) per socket, and a socket that takes everything
 * at once costs no epoll_ctl(2) to arm and disarm a write event (the
 * pattern of memcached's and twemproxy's "write now, wait for
 * writability only when the kernel refuses").
 *
 * The list is owned here; each entry is embedded in its connection and
 * owned by it (redisev.c for a master link, session.c for a client).
 * An entry joined during a flush pass is flushed in the same pass.
 */
#ifndef REDLOCKD_FLUSH_H
#define REDLOCKD_FLUSH_H

#include <stdbool.h>
#include <sys/queue.h>

struct event_base;
struct flush_entry;

/* Write what the connection holding e has queued (called from the loop). */
typedef void (*flush_fn)(struct flush_entry *e);

/* One connection's place in the flush list; zero it, then flush_entry_init(). */
struct flush_entry {
    flush_fn                 fn;        /* the connection's writer */
    bool                     listed;    /* in the list now */
    TAILQ_ENTRY(flush_entry) link;
};

/*
 * Create the flush event on base.  Idempotent.  libevent failing to
 * allocate it aborts (daemon/xmalloc.h).
 */
void flush_init(struct event_base *base);

/* Set e's writer (e not listed). */
void flush_entry_init(struct flush_entry *e, flush_fn fn);

/* List e (no-op when listed): fn runs once from the loop, soon. */
void flush_join(struct flush_entry *e);

/* Take e off the list (no-op when not listed): before its owner frees it. */
void flush_leave(struct flush_entry *e);

/* Free the event (at exit, once every entry left). */
void flush_stop(void);

#endif /* REDLOCKD_FLUSH_H */
