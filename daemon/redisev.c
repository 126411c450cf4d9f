/*
 * redisev.c: hiredis on libevent, one write per context per loop
 * iteration.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <sys/queue.h>

#include <event2/event.h>
#include <event2/event_struct.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#include "daemon/redisev.h"

/* One attached context.  Owned by hiredis (freed by its cleanup hook). */
struct redisev {
    redisAsyncContext    *ac;       /* the context */
    struct event          rev;      /* persistent read event */
    struct event          wev;      /* persistent write event */
    bool                  reading;  /* rev added */
    bool                  writing;  /* wev added */
    bool                  listed;   /* in redisev_dirty */
    TAILQ_ENTRY(redisev)  link;     /* in redisev_dirty */
};

static TAILQ_HEAD(, redisev) redisev_dirty = TAILQ_HEAD_INITIALIZER(redisev_dirty);
static struct event   *redisev_flush_ev;     /* writes the listed contexts */
static struct redisev *redisev_flushing;     /* the context being written by the flush */

static void
redisev_read_cb(evutil_socket_t fd, short what, void *arg)
{
    struct redisev *e = arg;

    (void)fd;
    (void)what;
    redisAsyncHandleRead(e->ac);
}

static void
redisev_write_cb(evutil_socket_t fd, short what, void *arg)
{
    struct redisev *e = arg;

    (void)fd;
    (void)what;
    redisAsyncHandleWrite(e->ac);
}

/*
 * Write every context that has output.  Each is taken off the list
 * before hiredis writes it: a write error frees the context (and this
 * struct) inside redisAsyncHandleWrite.
 */
static void
redisev_flush_cb(evutil_socket_t fd, short what, void *arg)
{
    struct redisev *e;

    (void)fd;
    (void)what;
    (void)arg;
    while ((e = TAILQ_FIRST(&redisev_dirty)) != NULL) {
        TAILQ_REMOVE(&redisev_dirty, e, link);
        e->listed = false;
        redisev_flushing = e;
        redisAsyncHandleWrite(e->ac);
        redisev_flushing = NULL;
    }
}

static void
redisev_add_read(void *privdata)
{
    struct redisev *e = privdata;

    if (!e->reading) {
        e->reading = true;
        event_add(&e->rev, NULL);
    }
}

static void
redisev_del_read(void *privdata)
{
    struct redisev *e = privdata;

    if (e->reading) {
        e->reading = false;
        event_del(&e->rev);
    }
}

/*
 * hiredis has output for the socket.  A connected context joins the
 * flush list; the socket is watched for writability only while a
 * connect is in progress or when the flush could not write it all.
 */
static void
redisev_add_write(void *privdata)
{
    struct redisev *e = privdata;

    if (e == redisev_flushing || !(e->ac->c.flags & REDIS_CONNECTED)) {
        if (!e->writing) {
            e->writing = true;
            event_add(&e->wev, NULL);
        }
        return;
    }
    if (!e->listed && !e->writing) {
        e->listed = true;
        TAILQ_INSERT_TAIL(&redisev_dirty, e, link);
        event_active(redisev_flush_ev, EV_TIMEOUT, 0);
    }
}

static void
redisev_del_write(void *privdata)
{
    struct redisev *e = privdata;

    if (e->writing) {
        e->writing = false;
        event_del(&e->wev);
    }
}

static void
redisev_cleanup(void *privdata)
{
    struct redisev *e = privdata;

    if (e->listed) {
        TAILQ_REMOVE(&redisev_dirty, e, link);
    }
    if (e == redisev_flushing) {
        redisev_flushing = NULL;
    }
    event_del(&e->rev);
    event_del(&e->wev);
    free(e);
}

int
redisev_attach(redisAsyncContext *ac, struct event_base *base)
{
    struct redisev *e;

    if (ac->ev.data != NULL) {
        return -1;
    }
    if (redisev_flush_ev == NULL) {
        redisev_flush_ev = event_new(base, -1, 0, redisev_flush_cb, NULL);
        if (redisev_flush_ev == NULL) {
            return -1;
        }
    }
    e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return -1;
    }
    e->ac = ac;
    event_assign(&e->rev, base, ac->c.fd, EV_READ | EV_PERSIST, redisev_read_cb, e);
    event_assign(&e->wev, base, ac->c.fd, EV_WRITE | EV_PERSIST, redisev_write_cb, e);
    ac->ev.addRead = redisev_add_read;
    ac->ev.delRead = redisev_del_read;
    ac->ev.addWrite = redisev_add_write;
    ac->ev.delWrite = redisev_del_write;
    ac->ev.cleanup = redisev_cleanup;
    ac->ev.data = e;
    /* The connect in progress completes on writability (or an error). */
    redisev_add_read(e);
    redisev_add_write(e);
    return 0;
}

void
redisev_stop(void)
{
    if (redisev_flush_ev != NULL) {
        event_free(redisev_flush_ev);
        redisev_flush_ev = NULL;
    }
}
