/*
 * redisev.h: one link to a Redis server on the libevent loop, plain or
 * TLS, with hiredis as the RESP codec only.
 *
 * The bytes travel over a libevent bufferevent: bufferevent_socket for
 * TCP and Unix sockets, bufferevent_openssl for TLS (hiredis 0.14.1 has
 * no TLS).  hiredis formats the commands (redisFormatCommandArgv) and
 * parses the replies (redisReader); each command's callback waits in a
 * FIFO and is called with its reply in order.
 *
 * Writes of one loop iteration are coalesced: a link with new output
 * joins the flush list (flush.h), which writes every listed link after
 * the callbacks of the current loop iteration, so the commands of many
 * rounds leave in one write(2) per master.  A plain socket is written directly (only what the kernel does
 * not take waits for writability in the bufferevent); a TLS link hands
 * the batch to its bufferevent, which encrypts it as one record run.
 *
 * The semantics follow hiredis's async API, which this replaced: the
 * connect callback says whether the link (and the TLS handshake) came
 * up; on a connect failure the link is freed after that callback; when
 * a connected link fails, every pending callback runs with reply NULL,
 * then the disconnect callback, then the link is freed; redisev_free()
 * runs the pending callbacks with NULL and calls neither callback.  A
 * link given up is reset, never closed with data still queued
 * (redisev_free); redisev_close() is for the daemon's stop.  A
 * free asked for inside a callback of the link is done once it returns.
 * A subscriber link hands every pub/sub message and (un)subscribe
 * confirmation to its push callback; its other replies (AUTH) go through
 * the FIFO.
 */
#ifndef REDLOCKD_REDISEV_H
#define REDLOCKD_REDISEV_H

#include <stdbool.h>
#include <stddef.h>

#include <sys/socket.h>

#include <openssl/ssl.h>

struct event_base;
struct redisev;

/* A reply (a hiredis redisReply, freed after the call) or NULL. */
typedef void (*redisev_reply_fn)(struct redisev *l, void *reply, void *privdata);
/* ok: connected (and the TLS handshake done); else redisev_errstr() says why. */
typedef void (*redisev_connect_fn)(struct redisev *l, bool ok);
/* A connected link failed; redisev_errstr() says why. */
typedef void (*redisev_disconnect_fn)(struct redisev *l);

/* What a link is made with (copied). */
struct redisev_opts {
    const struct sockaddr *addr;    /* where to connect */
    socklen_t              addrlen; /* its size */
    SSL                   *ssl;     /* TLS client session, owned by the link from
                                       then on; NULL for a plain link */
    bool                   subscriber;  /* pub/sub replies go to on_push */
    redisev_connect_fn     on_connect;  /* once, when up or failed */
    redisev_disconnect_fn  on_disconnect; /* when a connected link failed */
    redisev_reply_fn       on_push;     /* subscriber links: pushes, with data */
    void                  *data;        /* the caller's, see redisev_data() */
};

/*
 * Begin connecting.  Returns the link, or NULL with the reason in why
 * when the connect fails at once (the SSL, if any, is freed then); out
 * of memory aborts (daemon/xmalloc.h).  The callbacks run later, from the
 * loop.
 */
struct redisev *redisev_connect(struct event_base *base, const struct redisev_opts *opts,
                                char *why, size_t size);

/* The caller's data given at connect. */
void *redisev_data(const struct redisev *l);

/* Why the link failed (or "" while it has not). */
const char *redisev_errstr(const struct redisev *l);

/* True when the link failed in its TLS handshake (the reason in errstr). */
bool redisev_tls_failed(const struct redisev *l);

/* True when a TLS link's TCP connect is done but its handshake is not. */
bool redisev_tls_handshaking(const struct redisev *l);

/*
 * Queue a command: printf-like (hiredis's redisvFormatCommand), an argv,
 * or one formatted already.  fn NULL on a subscriber link: the answer is
 * a push (SUBSCRIBE, UNSUBSCRIBE).  Returns 0, or -1 when the link is
 * closing (fn will not be called).  Out of memory aborts
 * (daemon/xmalloc.h).
 */
int redisev_command(struct redisev *l, redisev_reply_fn fn, void *privdata,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int redisev_command_argv(struct redisev *l, redisev_reply_fn fn, void *privdata, int argc,
                         const char **argv, const size_t *lens);
int redisev_formatted(struct redisev *l, redisev_reply_fn fn, void *privdata,
                      const char *cmd, size_t len);

/*
 * Read what already sits in the socket and dispatch the replies (a poll).
 * Over TLS only what the bufferevent already read and decrypted is
 * dispatched; the rest comes with the next read event.
 */
void redisev_read(struct redisev *l);

/*
 * Give the link up: pending callbacks run with NULL, then it is freed
 * and its socket reset, so that nothing written on it that the server
 * has not acknowledged yet is sent any more (the kernel would otherwise
 * retransmit it after a partition, past a newer link's requests); only
 * bytes already in flight in the network may still arrive.  A link that
 * failed by itself is given up the same way.
 */
void redisev_free(struct redisev *l);

/*
 * Close the link for good (the daemon stopping): as redisev_free(), but
 * what was written is still delivered by the kernel after the close.
 */
void redisev_close(struct redisev *l);

#endif /* REDLOCKD_REDISEV_H */
