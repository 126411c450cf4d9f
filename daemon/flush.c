/*
 * flush.c: the flush list, and the event that writes it once per loop
 * iteration.
 */
#include <stddef.h>

#include <event2/event.h>

#include "daemon/flush.h"
#include "daemon/xmalloc.h"

static TAILQ_HEAD(, flush_entry) flush_list = TAILQ_HEAD_INITIALIZER(flush_list);
static struct event *flush_ev;

static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
    struct flush_entry *e;

    (void)fd;
    (void)what;
    (void)arg;
    /* Taken off before its writer runs: the writer may list it again, or free it. */
    while ((e = TAILQ_FIRST(&flush_list)) != NULL) {
        flush_leave(e);
        e->fn(e);
    }
}

void
flush_init(struct event_base *base)
{
    if (flush_ev == NULL) {
        flush_ev = event_new(base, -1, 0, flush_cb, NULL);
        if (flush_ev == NULL) {
            xmalloc_fail("the flush event");
        }
    }
}

void
flush_entry_init(struct flush_entry *e, flush_fn fn)
{
    e->fn = fn;
    e->listed = false;
}

void
flush_join(struct flush_entry *e)
{
    if (e->listed || flush_ev == NULL) {
        return;
    }
    e->listed = true;
    if (TAILQ_EMPTY(&flush_list)) {
        event_active(flush_ev, EV_TIMEOUT, 0);
    }
    TAILQ_INSERT_TAIL(&flush_list, e, link);
}

void
flush_leave(struct flush_entry *e)
{
    if (e->listed) {
        e->listed = false;
        TAILQ_REMOVE(&flush_list, e, link);
    }
}

void
flush_stop(void)
{
    if (flush_ev != NULL) {
        event_free(flush_ev);
        flush_ev = NULL;
    }
}
