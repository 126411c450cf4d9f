/*
 * channel.c: the pub/sub channels wanted on every master, and their
 * state on each one.  See daemon/channel.h.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <bsd/sys/tree.h>

#include "conf/conf.h"
#include "daemon/channel.h"
#include "daemon/master.h"
#include "daemon/xmalloc.h"

/* Per master, where a channel's subscription stands. */
enum channel_state {
    CHANNEL_NONE,           /* not subscribed */
    CHANNEL_SUBSCRIBING,    /* SUBSCRIBE sent, not confirmed */
    CHANNEL_ON,             /* subscribed */
    CHANNEL_LEAVING         /* UNSUBSCRIBE sent, not confirmed */
};

/*
 * A channel the daemon wants, or still has to leave.  Owned by this
 * module; freed once it is unwanted and left on every master.
 */
struct channel {
    TAILQ_ENTRY(channel) link;      /* in channels */
    RB_ENTRY(channel)   entry;      /* in channel_index, by name */
    const char         *key;        /* name (a probe points elsewhere) */
    unsigned            wanted;     /* channel_subscribe() calls not yet undone */
    uint8_t             state[CONF_MASTERS_MAX]; /* enum channel_state, per master */
    size_t              len;        /* bytes in name */
    char                name[];     /* the channel */
};

static TAILQ_HEAD(, channel) channels = TAILQ_HEAD_INITIALIZER(channels);
/* The same channels by name: a confirmation or a subscribe finds its
 * channel in O(log n), however many names are watched and waited for. */
static RB_HEAD(channel_tree, channel) channel_index = RB_INITIALIZER(&channel_index);
static size_t              channel_nwanted;    /* channels wanted now */
static channel_message_fn  channel_message_cb;
static channel_confirmed_fn channel_confirmed_cb;
static bool                channel_link_up[CONF_MASTERS_MAX]; /* per master: its
                                               subscriber link is up (sub_up..sub_down) */

static int
channel_cmp(const struct channel *x, const struct channel *y)
{
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->key, y->key, n);

    if (c != 0) {
        return c;
    }
    return (x->len > y->len) - (x->len < y->len);
}

/* The tree's functions, static (see daemon/lock.c for the spelling). */
RB_GENERATE_INTERNAL(channel_tree, channel, entry, channel_cmp, static __attribute__((unused)))

/* Take ch out of both lists and free it. */
static void
channel_free(struct channel *ch)
{
    TAILQ_REMOVE(&channels, ch, link);
    RB_REMOVE(channel_tree, &channel_index, ch);
    free(ch);
}

static void
channel_free_if_done(struct channel *ch)
{
    size_t i, n = master_count();

    if (ch->wanted) {
        return;
    }
    for (i = 0; i < n; i++) {
        if (ch->state[i] != CHANNEL_NONE) {
            return;
        }
    }
    channel_free(ch);
}

/* Bring ch on master i to what is wanted, when nothing is in flight
 * (a link that is down is brought there when it comes up). */
static void
channel_sync(struct channel *ch, size_t i)
{
    if (ch->wanted && ch->state[i] == CHANNEL_NONE) {
        if (master_sub_send(i, true, ch->name, ch->len) == 0) {
            ch->state[i] = CHANNEL_SUBSCRIBING;
        }
    } else if (!ch->wanted && ch->state[i] == CHANNEL_ON) {
        if (master_sub_send(i, false, ch->name, ch->len) == 0) {
            ch->state[i] = CHANNEL_LEAVING;
        }
    }
}

static struct channel *
channel_find(const char *name, size_t len)
{
    struct channel probe;

    probe.key = name;
    probe.len = len;
    return RB_FIND(channel_tree, &channel_index, &probe);
}

static void
channel_sub_up(size_t i)
{
    struct channel *ch;

    channel_link_up[i] = true;
    TAILQ_FOREACH(ch, &channels, link) {
        channel_sync(ch, i);
    }
}

static void
channel_sub_down(size_t i)
{
    struct channel *ch, *next;

    channel_link_up[i] = false;
    for (ch = TAILQ_FIRST(&channels); ch != NULL; ch = next) {
        next = TAILQ_NEXT(ch, link);
        ch->state[i] = CHANNEL_NONE;
        channel_free_if_done(ch);
    }
}

static void
channel_confirmed(size_t i, bool subscribed, const char *name, size_t len)
{
    struct channel *ch = channel_find(name, len);

    if (ch == NULL) {
        return;     /* the links' own channel */
    }
    ch->state[i] = subscribed ? CHANNEL_ON : CHANNEL_NONE;
    channel_sync(ch, i);
    if (subscribed && ch->wanted && ch->state[i] == CHANNEL_ON && channel_confirmed_cb != NULL) {
        channel_confirmed_cb(ch->name, ch->len);  /* ch stays: it is wanted */
        return;
    }
    channel_free_if_done(ch);
}

static void
channel_message(const char *channel, size_t channel_len, const char *message,
                size_t message_len)
{
    /* The receiver looks the name up anyway: no channel lookup here. */
    if (channel_message_cb != NULL) {
        channel_message_cb(channel, channel_len, message, message_len);
    }
}

static const struct master_hooks channel_hooks = {
    .sub_up = channel_sub_up,
    .sub_down = channel_sub_down,
    .confirmed = channel_confirmed,
    .message = channel_message,
};

void
channel_start(void)
{
    master_set_hooks(&channel_hooks);
}

void
channel_stop(void)
{
    struct channel *ch;

    while ((ch = TAILQ_FIRST(&channels)) != NULL) {
        channel_free(ch);
    }
    channel_nwanted = 0;
    memset(channel_link_up, 0, sizeof(channel_link_up));
}

void
channel_on_message(channel_message_fn fn)
{
    channel_message_cb = fn;
}

void
channel_on_confirmed(channel_confirmed_fn fn)
{
    channel_confirmed_cb = fn;
}

bool
channel_ready(const char *channel, size_t len)
{
    struct channel *ch = channel_find(channel, len);
    size_t i, n = master_count();

    if (ch == NULL || ch->wanted == 0) {
        return false;
    }
    for (i = 0; i < n; i++) {
        if (channel_link_up[i] && ch->state[i] != CHANNEL_ON) {
            return false;
        }
    }
    return true;
}

void
channel_subscribe(const char *channel, size_t len)
{
    struct channel *ch = channel_find(channel, len);
    size_t i, n = master_count();

    if (ch == NULL) {
        ch = xcalloc(1, sizeof(*ch) + len + 1);
        memcpy(ch->name, channel, len);
        ch->len = len;
        ch->key = ch->name;
        TAILQ_INSERT_TAIL(&channels, ch, link);
        RB_INSERT(channel_tree, &channel_index, ch);
    }
    if (ch->wanted++ == 0) {
        channel_nwanted++;
    }
    for (i = 0; i < n; i++) {
        channel_sync(ch, i);
    }
}

void
channel_unsubscribe(const char *channel, size_t len)
{
    struct channel *ch = channel_find(channel, len);
    size_t i, n = master_count();

    if (ch == NULL || ch->wanted == 0 || --ch->wanted > 0) {
        return;     /* another user of the channel still wants it */
    }
    channel_nwanted--;
    for (i = 0; i < n; i++) {
        channel_sync(ch, i);
    }
    channel_free_if_done(ch);
}

size_t
channel_count(void)
{
    return channel_nwanted;
}
