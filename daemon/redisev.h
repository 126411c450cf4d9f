/*
 * redisev.h: hiredis asynchronous contexts on the libevent loop, with
 * the writes of one loop iteration coalesced.
 *
 * hiredis drives any event library through five hooks in
 * redisAsyncContext.ev (hiredis 0.14.1 async.h: addRead, delRead,
 * addWrite, delWrite, cleanup).  The adapter hiredis ships for libevent
 * (adapters/libevent.h) re-adds a one-shot read event after every reply
 * and adds then deletes a write event for every command: two to four
 * epoll_ctl(2) calls and an extra epoll_wait(2) per command, which the
 * benchmark (tests/bench/) measured as most of the daemon's system calls.
 *
 * This adapter keeps one persistent read event per context and, once a
 * context is connected, does not wait for writability: a context with
 * new output joins a flush list, and one event made active for the
 * whole daemon writes every listed context after the callbacks of the
 * current loop iteration, so the commands of many rounds leave in one
 * write(2) per master.  Only a socket that cannot take all its output
 * (or a connect in progress) gets a write event.
 */
#ifndef REDLOCKD_REDISEV_H
#define REDLOCKD_REDISEV_H

struct event_base;
struct redisAsyncContext;

/*
 * Attach ac to base.  Call right after redisAsyncConnect*() succeeded,
 * before the first command.  hiredis owns the attachment from then on:
 * it is released by its cleanup hook when the context is freed.
 * Returns 0, or -1 when out of memory or ac already has an event
 * library attached (ac is left as it was; the caller frees it).
 */
int redisev_attach(struct redisAsyncContext *ac, struct event_base *base);

/* Release the flush event (at exit, after every context was freed). */
void redisev_stop(void);

#endif /* REDLOCKD_REDISEV_H */
