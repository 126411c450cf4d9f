/*
 * channel.h: the pub/sub channels the daemon wants on every master.
 *
 * Callers (daemon/redlock.c: release announcements, watched names'
 * changes, BREAK notices) want a channel by name; this module counts
 * the wants, subscribes it on every master's subscriber link
 * (daemon/master.h, master_sub_send) that is up, subscribes it again on
 * a link that comes back, leaves it once nobody wants it, and hands
 * every message to one receiver.  It sits above daemon/master.c, which
 * reaches it only through the hooks it registers (master_set_hooks), so
 * no include circle appears.
 *
 * At most one SUBSCRIBE or UNSUBSCRIBE per channel and master is in
 * flight: a re-SUBSCRIBE sent before the UNSUBSCRIBE's confirmation
 * would have its own confirmation taken for the leave's.
 *
 * A subscription is in force on a master only once that master
 * confirmed it: a message published there before is heard by nobody
 * here.  channel_ready() tells whether every master whose subscriber
 * link is up has confirmed, and the confirmation receiver hears each
 * confirmation (the first, and the ones after a link came back), so
 * that a user can order what it sends after them (daemon/lock_queue.c: a
 * waiter's try, whose refusal asks for a message).
 */
#ifndef REDLOCKD_CHANNEL_H
#define REDLOCKD_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>

/* A message published on a wanted channel; both texts valid during the call. */
typedef void (*channel_message_fn)(const char *channel, size_t channel_len,
                                   const char *message, size_t message_len);

/* Register with the master links (call before master_start()). */
void channel_start(void);

/* Forget every channel (after master_stop(); nothing is sent). */
void channel_stop(void);

/* Set the function that receives every message (one call per master that
 * delivers it); NULL drops them. */
void channel_on_message(channel_message_fn fn);

/* A master confirmed a SUBSCRIBE of a wanted channel; the text is valid during the call. */
typedef void (*channel_confirmed_fn)(const char *channel, size_t channel_len);

/* Set the function told of every confirmed SUBSCRIBE (one call per master);
 * NULL: none. */
void channel_on_confirmed(channel_confirmed_fn fn);

/*
 * Whether channel (len bytes) is wanted and subscribed (confirmed) on
 * every master whose subscriber link is up now; true also when no link
 * is up (nothing to wait for).  A link that comes up later subscribes
 * it then, and its confirmation is told (channel_on_confirmed).
 * O(channels wanted + masters).
 */
bool channel_ready(const char *channel, size_t len);

/*
 * Want channel (len bytes, copied) on every master: subscribed at once
 * on the links that are up, on the others when they come up.  Counted:
 * each call must be undone by one channel_unsubscribe() (waiters and
 * watchers of a name share its channel).  O(channels wanted).
 */
void channel_subscribe(const char *channel, size_t len);

/* Undo one channel_subscribe(); after the last, channel is left on every
 * master (asynchronously). */
void channel_unsubscribe(const char *channel, size_t len);

/* Channels wanted now. */
size_t channel_count(void);

#endif /* REDLOCKD_CHANNEL_H */
