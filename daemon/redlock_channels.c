/*
 * redlock_channels.c: the names' channels on the masters, routed to the
 * daemon's modules: a name's release announcements for its waiters
 * (daemon/lock_queue.c), its changes for its watchers (daemon/watch.c), and
 * the daemons' BREAK channel.  Subscriptions go through daemon/channel.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/channel.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/redlock.h"
#include "daemon/redlock_op.h"
#include "daemon/round.h"
#include "daemon/stats.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"

static redlock_released_fn redlock_released_cb;
static redlock_changed_fn  redlock_changed_cb;
static redlock_broken_fn   redlock_broken_cb;
static redlock_subscribed_fn redlock_subscribed_cb;
static char               *redlock_broken_chan;     /* prefix + REDLOCK_BROKEN_SUFFIX */
static size_t              redlock_broken_chan_len; /* bytes in it */
static size_t              redlock_nwatched;        /* names whose changes are heard */

static int redlock_subscribe(const char *key, size_t key_len, const char *suffix, bool on);

/*
 * A message on a channel: a name's release channel (strip the suffix
 * back to the lock's key), for the waiters; a name's changes channel,
 * for the watchers; or the daemons' BREAK channel: "<key> <token> ...".
 */
static void
redlock_message(const char *channel, size_t len, const char *msg, size_t msg_len)
{
    size_t slen = sizeof(REDLOCK_CHANNEL_SUFFIX) - 1;
    size_t clen = sizeof(REDLOCK_CHANGED_SUFFIX) - 1;
    const char *sp;

    if (len > slen && memcmp(channel + len - slen, REDLOCK_CHANNEL_SUFFIX, slen) == 0) {
        if (redlock_released_cb != NULL) {
            redlock_released_cb(channel, len - slen, msg, msg_len);
        }
    } else if (len > clen && memcmp(channel + len - clen, REDLOCK_CHANGED_SUFFIX, clen) == 0) {
        if (redlock_changed_cb != NULL) {
            redlock_changed_cb(channel, len - clen);
        }
    } else if (redlock_broken_cb != NULL && len == redlock_broken_chan_len
               && memcmp(channel, redlock_broken_chan, len) == 0
               && (sp = memchr(msg, ' ', msg_len)) != NULL) {
        redlock_broken_cb(msg, (size_t)(sp - msg), sp + 1, msg_len - (size_t)(sp - msg) - 1);
    }
}

void
redlock_on_release(redlock_released_fn fn)
{
    redlock_released_cb = fn;
    channel_on_message(redlock_message);
}

/* A master confirmed a channel: a name's release channel is told to the waiters' module. */
static void
redlock_confirmed(const char *channel, size_t len)
{
    size_t slen = sizeof(REDLOCK_CHANNEL_SUFFIX) - 1;

    if (redlock_subscribed_cb != NULL && len > slen
        && memcmp(channel + len - slen, REDLOCK_CHANNEL_SUFFIX, slen) == 0) {
        redlock_subscribed_cb(channel, len - slen);
    }
}

void
redlock_on_subscribed(redlock_subscribed_fn fn)
{
    redlock_subscribed_cb = fn;
    channel_on_confirmed(redlock_confirmed);
}

bool
redlock_watch_ready(const char *key, size_t key_len)
{
    char channel[REDLOCK_DERIVED_MAX];
    size_t len;

    if (key_len > REDLOCK_KEY_MAX) {
        return false;
    }
    len = redlock_derived(channel, key, key_len, REDLOCK_CHANNEL_SUFFIX);
    return channel_ready(channel, len);
}

void
redlock_on_change(redlock_changed_fn fn)
{
    redlock_changed_cb = fn;
    channel_on_message(redlock_message);
}

int
redlock_on_break(const char *prefix, redlock_broken_fn fn)
{
    size_t plen = strlen(prefix);

    free(redlock_broken_chan);
    redlock_broken_chan = xmalloc(plen + sizeof(REDLOCK_BROKEN_SUFFIX));
    redlock_broken_chan_len = redlock_derived(redlock_broken_chan, prefix, plen,
                                              REDLOCK_BROKEN_SUFFIX);
    redlock_broken_cb = fn;
    channel_on_message(redlock_message);
    channel_subscribe(redlock_broken_chan, redlock_broken_chan_len);
    return 0;
}

size_t
redlock_subscriptions(void)
{
    size_t n = channel_count();

    n -= redlock_broken_chan != NULL && n > 0 ? 1 : 0;
    n -= redlock_nwatched > 0 && n > 0 ? 1 : 0;
    return n;
}

int
redlock_watch(const char *key, size_t key_len, bool on)
{
    return redlock_subscribe(key, key_len, REDLOCK_CHANNEL_SUFFIX, on);
}

/*
 * A watched name's changes channel, and while any name is watched the
 * channel that tells the masters' scripts to announce at all
 * (REDLOCK_WATCHING_CHANNEL; channel_subscribe counts both).
 */
int
redlock_watch_changes(const char *key, size_t key_len, bool on)
{
    static const char watching[] = REDLOCK_WATCHING_CHANNEL;

    if (on) {
        if (redlock_subscribe(key, key_len, REDLOCK_CHANGED_SUFFIX, true) != 0) {
            return -1;
        }
        channel_subscribe(watching, sizeof(watching) - 1);
        redlock_nwatched++;
        return 0;
    }
    redlock_subscribe(key, key_len, REDLOCK_CHANGED_SUFFIX, false);
    channel_unsubscribe(watching, sizeof(watching) - 1);
    redlock_nwatched--;
    return 0;
}

/* Subscribe (on) or leave (!on) key + suffix on every master. */
static int
redlock_subscribe(const char *key, size_t key_len, const char *suffix, bool on)
{
    char channel[REDLOCK_DERIVED_MAX];
    size_t len;

    if (key_len > REDLOCK_KEY_MAX) {
        return -1;
    }
    len = redlock_derived(channel, key, key_len, suffix);
    if (on) {
        channel_subscribe(channel, len);
    } else {
        channel_unsubscribe(channel, len);
    }
    return 0;
}
