/*
 * readq.c: the daemon-wide budget of reads in flight, round-robin
 * across sessions (daemon/readq.h).
 */
#include <stddef.h>

#include "daemon/readq.h"
#include "daemon/stats.h"
#include "daemon/util.h"

TAILQ_HEAD(readq_ring, readq_client);

static struct readq_ring readq_ring = TAILQ_HEAD_INITIALIZER(readq_ring);
static int64_t           readq_max = 64;        /* limits.max_reads_in_flight */
static size_t            readq_running;         /* reads let in, not done */
static size_t            readq_nwaiting;        /* jobs waiting, every client */

static void readq_dispatch(void);

void
readq_set_max(int64_t max_in_flight)
{
    readq_max = max_in_flight > 0 ? max_in_flight : 1;
    readq_dispatch();   /* a wider budget lets waiting reads in now */
}

void
readq_client_init(struct readq_client *c)
{
    TAILQ_INIT(&c->waiting);
    c->running = NULL;
    c->in_ring = false;
}

/* Let j in: it holds a slot, and c's one read. */
static void
readq_let_in(struct readq_client *c, struct readq_job *j)
{
    j->running = true;
    c->running = j;
    readq_running++;
}

/* Put c at the ring's tail when it has a job waiting and none running. */
static void
readq_ring_join(struct readq_client *c)
{
    if (!c->in_ring && c->running == NULL && !TAILQ_EMPTY(&c->waiting)) {
        TAILQ_INSERT_TAIL(&readq_ring, c, ring_link);
        c->in_ring = true;
    }
}

static void
readq_ring_leave(struct readq_client *c)
{
    if (c->in_ring) {
        TAILQ_REMOVE(&readq_ring, c, ring_link);
        c->in_ring = false;
    }
}

/* While a slot is free: the next session's oldest job in. */
static void
readq_dispatch(void)
{
    struct readq_client *c;
    struct readq_job *j;
    int64_t now;

    while ((int64_t)readq_running < readq_max && (c = TAILQ_FIRST(&readq_ring)) != NULL) {
        readq_ring_leave(c);
        j = TAILQ_FIRST(&c->waiting);
        TAILQ_REMOVE(&c->waiting, j, link);
        j->waiting = false;
        readq_nwaiting--;
        now = util_now_us();
        stats.reads_waited++;
        stats.read_wait_us += (uint64_t)(now - j->asked_us);
        readq_let_in(c, j);
        j->start(j, j->arg);
    }
}

bool
readq_ask(struct readq_client *c, struct readq_job *j, readq_start_fn start, void *arg)
{
    j->owner = c;
    j->start = start;
    j->arg = arg;
    if ((int64_t)readq_running < readq_max && c->running == NULL
        && TAILQ_EMPTY(&c->waiting) && TAILQ_EMPTY(&readq_ring)) {
        readq_let_in(c, j);
        return true;
    }
    j->asked_us = util_now_us();
    j->waiting = true;
    TAILQ_INSERT_TAIL(&c->waiting, j, link);
    readq_nwaiting++;
    readq_ring_join(c);
    return false;
}

void
readq_done(struct readq_job *j)
{
    struct readq_client *c = j->owner;

    if (!j->running) {
        return;
    }
    j->running = false;
    readq_running--;
    if (c != NULL && c->running == j) {
        c->running = NULL;
        readq_ring_join(c);
    }
    readq_dispatch();
}

void
readq_cancel(struct readq_job *j)
{
    struct readq_client *c = j->owner;

    if (!j->waiting) {
        return;
    }
    TAILQ_REMOVE(&c->waiting, j, link);
    j->waiting = false;
    readq_nwaiting--;
    if (TAILQ_EMPTY(&c->waiting)) {
        readq_ring_leave(c);
    }
}

void
readq_client_close(struct readq_client *c)
{
    struct readq_job *j;

    while ((j = TAILQ_FIRST(&c->waiting)) != NULL) {
        readq_cancel(j);    /* the owners cancel theirs first; this is a safety net */
    }
    readq_ring_leave(c);
    if (c->running != NULL) {
        c->running->owner = NULL;
        c->running = NULL;
    }
}

size_t
readq_in_flight(void)
{
    return readq_running;
}

size_t
readq_waiting(void)
{
    return readq_nwaiting;
}
