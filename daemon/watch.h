/*
 * watch.h: WATCH, the observer's side of leader election: sessions that
 * follow who holds a name, whatever daemon the holder went through.
 *
 * One entry per watched name, shared by its watchers.  While a name has
 * watchers this daemon is subscribed to its changes channel on every
 * master (daemon/redlock.h): every grant, release, hand-over and BREAK
 * made through any daemon sends a message there.
 * A message is only a hint; the entry then reads the name on a quorum
 * (redlock_status) and pushes to its watchers what the quorum says, when
 * it differs from what they were last told.  A lease that expires sends
 * nothing: after a read that found the name held, the entry reads again
 * when the quorum said the holder's time runs out.  Reads that find no
 * quorum are retried with a backoff, and push nothing.
 *
 * Reads share the daemon's budget (daemon/readq.h): an entry's read is
 * made on behalf of its oldest watcher's session, so a session's
 * watched names are read one at a time, in turn with other sessions'
 * reads; a read that waits for its turn is still one read, whatever
 * messages come meanwhile.
 *
 * Ownership: this module owns every entry and watcher.  A session
 * embeds a struct watch_client and hears pushes through its callback.
 */
#ifndef REDLOCKD_WATCH_H
#define REDLOCKD_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "daemon/readq.h"

struct event_base;
struct conf;
struct watcher;

/* What a quorum says of a watched name; pointers valid during the push. */
struct watch_state {
    const char *name;           /* the lock's name (not NUL-terminated) */
    size_t      name_len;       /* bytes in name */
    bool        held;           /* HELD, else FREE */
    const char *kind;           /* held: "exclusive", "shared" or "counted" */
    size_t      holders;        /* held: holders of that kind */
    unsigned    limit;          /* held, counted: the name's limit */
    const char *label;          /* held: the label of the holder that has held it
                                   longest, NULL when it wrote none */
    int64_t     held_ms;        /* held with a label: how long, ms */
    int64_t     fence;          /* held: that holder's fencing token, 0 if none */
};

struct watch_client;

/* A state to push to the client: the first, then every change. */
typedef void (*watch_push_fn)(struct watch_client *c, const struct watch_state *st);

TAILQ_HEAD(watcher_list, watcher);

/* The watch side of a session; embedded in struct session. */
struct watch_client {
    watch_push_fn        push;      /* where states go */
    struct readq_client *reads;     /* the session's reads (daemon/readq.h), its own */
    struct watcher_list  watchers;  /* its watches, owned by watch.c */
    size_t               n;         /* entries in watchers */
};

/* Register with the engine.  Call once, after redlock_init().  The
 * settings (lock.*, limits.*) are read from ctx.conf when used and
 * timers run on ctx.base (daemon/ctx.h). */
void watch_init(void);

/*
 * Prepare a client: no watches, pushes to push, its reads made in turn
 * as reads (the session's, kept by its owner; it must outlive c).
 */
void watch_client_init(struct watch_client *c, watch_push_fn push, struct readq_client *reads);

/*
 * WATCH name: from now on the client hears the name's state: first as
 * a quorum gives it after this call (one read of the masters), then on
 * every change.  Watching a name twice is one watch (the second WATCH
 * reads nothing and pushes nothing: the client knows the state).
 * Returns 0 for a new watch, 1 for one the client had already, or -1
 * with a one-line text in *error (static storage): the client watches
 * limits.max_locks_per_client names already, all sessions together
 * watch limits.max_watches, or the name's key is too long.
 */
int watch_add(struct watch_client *c, const char *name, size_t name_len,
              const char **error);

/* UNWATCH name: no more pushes of it (nothing when it was not watched). */
void watch_remove(struct watch_client *c, const char *name, size_t name_len);

/* The client is closing: end all its watches. */
void watch_client_close(struct watch_client *c);

#endif /* REDLOCKD_WATCH_H */
