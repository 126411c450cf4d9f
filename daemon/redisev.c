/*
 * redisev.c: a link to Redis over a libevent bufferevent (plain or
 * OpenSSL), hiredis's reader and formatter as the RESP codec, and the
 * writes of one loop iteration coalesced into one write per link.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <hiredis/hiredis.h>

#include "daemon/flush.h"
#include "daemon/redisev.h"
#include "daemon/xmalloc.h"

#define REDISEV_FIFO_MIN    16
#define REDISEV_ERR_MAX     256

/* A command waiting for its reply. */
struct redisev_cb {
    redisev_reply_fn fn;            /* NULL: the reply is dropped */
    void            *privdata;      /* fn's argument */
};

/*
 * One link.  Owned by the caller from redisev_connect() until
 * redisev_free(), or until the link failed (freed after the callbacks).
 */
struct redisev {
    struct bufferevent *bev;        /* the transport (owns the socket and SSL) */
    SSL                *ssl;        /* the TLS session, NULL for plain */
    redisReader        *reader;     /* replies being parsed */
    struct evbuffer    *out;        /* commands not yet handed to the socket */
    struct redisev_cb  *fifo;       /* ring of callbacks, oldest at head */
    size_t              cap;        /* slots in fifo */
    size_t              head;       /* index of the oldest */
    size_t              n;          /* callbacks waiting */
    struct redisev_opts opts;       /* callbacks and data (addr not kept) */
    bool                connected;  /* the connect (and handshake) completed */
    bool                closing;    /* freed or failed: no more commands */
    bool                failed;     /* the callbacks of a failure ran */
    bool                tls_failed; /* failed in the TLS handshake */
    bool                deliver;    /* redisev_close: what was written still goes out */
    int                 depth;      /* callbacks of this link running now */
    struct flush_entry  flush;      /* its place in the flush list */
    char                errstr[REDISEV_ERR_MAX]; /* why it failed, "" */
};

static void redisev_destroy(struct redisev *l);

/* Leave a callback section: a free asked for meanwhile happens now. */
static void
redisev_unref(struct redisev *l)
{
    if (--l->depth == 0 && l->closing) {
        redisev_destroy(l);
    }
}

static void
redisev_list(struct redisev *l)
{
    if (l->connected && !l->closing && evbuffer_get_length(l->out) > 0) {
        flush_join(&l->flush);
    }
}

/*
 * Hand l's output to the socket: a plain socket whose bufferevent has
 * nothing queued is written at once; what is left (or everything, over
 * TLS) goes to the bufferevent, which writes it when the socket takes it.
 */
static void
redisev_flush(struct flush_entry *e)
{
    struct redisev *l = (struct redisev *)((char *)e - offsetof(struct redisev, flush));
    struct evbuffer *bout = bufferevent_get_output(l->bev);

    if (l->ssl == NULL && evbuffer_get_length(bout) == 0) {
        (void)evbuffer_write(l->out, bufferevent_getfd(l->bev));
    }
    if (evbuffer_get_length(l->out) > 0) {
        bufferevent_write_buffer(l->bev, l->out);
    }
}

static void
redisev_push_cb(struct redisev *l, redisev_reply_fn fn, void *privdata)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : REDISEV_FIFO_MIN, i;
        struct redisev_cb *fifo = xreallocarray(NULL, cap, sizeof(*fifo));

        for (i = 0; i < l->n; i++) {
            fifo[i] = l->fifo[(l->head + i) % l->cap];
        }
        free(l->fifo);
        l->fifo = fifo;
        l->cap = cap;
        l->head = 0;
    }
    l->fifo[(l->head + l->n) % l->cap].fn = fn;
    l->fifo[(l->head + l->n) % l->cap].privdata = privdata;
    l->n++;
}

static struct redisev_cb
redisev_pop_cb(struct redisev *l)
{
    struct redisev_cb cb = l->fifo[l->head];

    l->head = (l->head + 1) % l->cap;
    l->n--;
    return cb;
}

/* Every waiting callback with NULL (the link is failing or freed). */
static void
redisev_fail_pending(struct redisev *l)
{
    while (l->n > 0) {
        struct redisev_cb cb = redisev_pop_cb(l);

        if (cb.fn != NULL) {
            cb.fn(l, NULL, cb.privdata);
        }
    }
}

/*
 * The link failed with why: a connect that did not complete calls
 * on_connect(false); a connected link fails its pending callbacks and
 * calls on_disconnect.  The link is freed when the callbacks are done.
 */
static void
redisev_fail(struct redisev *l, const char *why)
{
    if (l->closing) {
        return;
    }
    snprintf(l->errstr, sizeof(l->errstr), "%s", why);
    l->closing = true;
    l->failed = true;
    flush_leave(&l->flush);
    l->depth++;
    if (l->connected) {
        redisev_fail_pending(l);
        if (l->opts.on_disconnect != NULL) {
            l->opts.on_disconnect(l);
        }
    } else {
        redisev_fail_pending(l);
        if (l->opts.on_connect != NULL) {
            l->opts.on_connect(l, false);
        }
    }
    redisev_unref(l);
}

/* A pub/sub message or (un)subscribe confirmation. */
static bool
redisev_is_push(const redisReply *r)
{
    const redisReply *kind;

    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) {
        return false;
    }
    kind = r->element[0];
    if (kind->type != REDIS_REPLY_STRING) {
        return false;
    }
    return strcmp(kind->str, "message") == 0 || strcmp(kind->str, "subscribe") == 0
           || strcmp(kind->str, "unsubscribe") == 0 || strcmp(kind->str, "pmessage") == 0;
}

/* Feed the input to the reader and dispatch every complete reply. */
static void
redisev_dispatch(struct redisev *l)
{
    struct evbuffer *in = bufferevent_get_input(l->bev);
    struct evbuffer_iovec vec[8];
    int i, nvec;

    while (!l->closing && evbuffer_get_length(in) > 0) {
        nvec = evbuffer_peek(in, -1, NULL, vec, 8);
        if (nvec > 8) {
            nvec = 8;
        }
        for (i = 0; i < nvec; i++) {
            if (redisReaderFeed(l->reader, vec[i].iov_base, vec[i].iov_len) != REDIS_OK) {
                /* hiredis's reader fails only out of memory here (an error
                 * it found in a reply is taken below, and the link closes). */
                redisev_fail(l, "the reply reader failed (out of memory)");
                return;
            }
            evbuffer_drain(in, vec[i].iov_len);
        }
    }
    while (!l->closing) {
        void *reply = NULL;
        redisev_reply_fn fn;
        void *privdata;

        if (redisReaderGetReply(l->reader, &reply) != REDIS_OK) {
            char why[REDISEV_ERR_MAX];

            snprintf(why, sizeof(why), "protocol error: %.200s", l->reader->errstr);
            redisev_fail(l, why);
            return;
        }
        if (reply == NULL) {
            break;
        }
        if (l->opts.subscriber && (redisev_is_push(reply) || l->n == 0)) {
            fn = l->opts.on_push;
            privdata = l->opts.data;
        } else if (l->n == 0) {
            freeReplyObject(reply);
            redisev_fail(l, "protocol error: a reply to no command");
            return;
        } else {
            struct redisev_cb cb = redisev_pop_cb(l);

            fn = cb.fn;
            privdata = cb.privdata;
        }
        if (fn != NULL) {
            fn(l, reply, privdata);
        }
        freeReplyObject(reply);
    }
}

static void
redisev_read_cb(struct bufferevent *bev, void *arg)
{
    struct redisev *l = arg;

    (void)bev;
    l->depth++;
    redisev_dispatch(l);
    redisev_unref(l);
}

/* Output drained by the bufferevent: nothing to do (the flush list drives). */
static void
redisev_write_cb(struct bufferevent *bev, void *arg)
{
    (void)bev;
    (void)arg;
}

/* OpenSSL's reasons for a failure on l, into buf; "" when it has none. */
static void
redisev_tls_reason(struct redisev *l, char *buf, size_t size)
{
    unsigned long err, first = 0;
    long verify;
    size_t used;

    buf[0] = '\0';
    while ((err = bufferevent_get_openssl_error(l->bev)) != 0) {
        if (first == 0) {
            first = err;
        }
    }
    if (first == 0) {
        first = ERR_get_error();
    }
    ERR_clear_error();
    if (first != 0) {
        ERR_error_string_n(first, buf, size);
    }
    verify = SSL_get_verify_result(l->ssl);
    if (verify != X509_V_OK && first != 0) {
        used = strlen(buf);
        snprintf(buf + used, size - used, "%s%s", used ? ": " : "",
                 X509_verify_cert_error_string(verify));
    }
}

static void
redisev_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct redisev *l = arg;
    char why[REDISEV_ERR_MAX], reason[REDISEV_ERR_MAX - 64];
    int err = EVUTIL_SOCKET_ERROR();

    (void)bev;
    l->depth++;
    if (what & BEV_EVENT_CONNECTED) {
        int one = 1, fd = bufferevent_getfd(l->bev);

        l->connected = true;
        if (fd >= 0) {
            /* As hiredis did: requests are small and latency-bound. */
            (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        }
        bufferevent_enable(l->bev, EV_READ | EV_WRITE);
        if (l->opts.on_connect != NULL) {
            l->opts.on_connect(l, true);
        }
        redisev_list(l);
    } else if (what & (BEV_EVENT_ERROR | BEV_EVENT_EOF)) {
        reason[0] = '\0';
        if (l->ssl != NULL) {
            redisev_tls_reason(l, reason, sizeof(reason));
        }
        if (l->ssl != NULL && !l->connected && reason[0] != '\0') {
            l->tls_failed = true;
            snprintf(why, sizeof(why), "TLS handshake failed: %s", reason);
        } else if (l->ssl != NULL && !l->connected && (what & BEV_EVENT_EOF)) {
            l->tls_failed = true;
            snprintf(why, sizeof(why), "TLS handshake failed: the server closed the "
                     "connection (not a TLS port?)");
        } else if (reason[0] != '\0') {
            snprintf(why, sizeof(why), "TLS: %s", reason);
        } else if ((what & BEV_EVENT_EOF) || err == 0) {
            snprintf(why, sizeof(why), "Server closed the connection");
        } else {
            snprintf(why, sizeof(why), "%s", evutil_socket_error_to_string(err));
        }
        redisev_fail(l, why);
    }
    redisev_unref(l);
}

struct redisev *
redisev_connect(struct event_base *base, const struct redisev_opts *opts, char *why,
                size_t size)
{
    struct redisev *l;

    flush_init(base);
    l = xcalloc(1, sizeof(*l));
    if ((l->reader = redisReaderCreate()) == NULL || (l->out = evbuffer_new()) == NULL) {
        xmalloc_fail("a master link's buffers");
    }
    l->opts = *opts;
    l->opts.addr = NULL;
    flush_entry_init(&l->flush, redisev_flush);
    l->ssl = opts->ssl;
    if (l->ssl != NULL) {
        l->bev = bufferevent_openssl_socket_new(base, -1, l->ssl, BUFFEREVENT_SSL_CONNECTING,
                                                BEV_OPT_CLOSE_ON_FREE);
    } else {
        l->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    }
    if (l->bev == NULL) {
        xmalloc_fail("a master link's bufferevent");
    }
    bufferevent_setcb(l->bev, redisev_read_cb, redisev_write_cb, redisev_event_cb, l);
    if (bufferevent_socket_connect(l->bev, (struct sockaddr *)opts->addr,
                                   (int)opts->addrlen) != 0) {
        int err = EVUTIL_SOCKET_ERROR();

        snprintf(why, size, "%s", err ? evutil_socket_error_to_string(err) : "connect failed");
        bufferevent_free(l->bev);   /* and the SSL with it */
        redisReaderFree(l->reader);
        evbuffer_free(l->out);
        free(l);
        return NULL;
    }
    return l;
}

void *
redisev_data(const struct redisev *l)
{
    return l->opts.data;
}

const char *
redisev_errstr(const struct redisev *l)
{
    return l->errstr;
}

bool
redisev_tls_failed(const struct redisev *l)
{
    return l->tls_failed;
}

bool
redisev_tls_handshaking(const struct redisev *l)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    int fd;

    if (l->ssl == NULL || l->connected || l->closing) {
        return false;
    }
    fd = bufferevent_getfd(l->bev);
    return fd >= 0 && getpeername(fd, (struct sockaddr *)&ss, &len) == 0;
}

int
redisev_formatted(struct redisev *l, redisev_reply_fn fn, void *privdata, const char *cmd,
                  size_t len)
{
    if (l->closing) {
        return -1;
    }
    if (fn != NULL || !l->opts.subscriber) {
        redisev_push_cb(l, fn, privdata);
    }
    if (evbuffer_add(l->out, cmd, len) != 0) {
        xmalloc_fail("a request to a master");
    }
    redisev_list(l);
    return 0;
}

int
redisev_command(struct redisev *l, redisev_reply_fn fn, void *privdata, const char *fmt, ...)
{
    va_list ap;
    char *cmd;
    int len, rc;

    va_start(ap, fmt);
    len = redisvFormatCommand(&cmd, fmt, ap);
    va_end(ap);
    if (len < 0) {
        xmalloc_fail("a command for a master");
    }
    rc = redisev_formatted(l, fn, privdata, cmd, (size_t)len);
    redisFreeCommand(cmd);
    return rc;
}

int
redisev_command_argv(struct redisev *l, redisev_reply_fn fn, void *privdata, int argc,
                     const char **argv, const size_t *lens)
{
    char *cmd;
    int len, rc;

    len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (len < 0) {
        xmalloc_fail("a command for a master");
    }
    rc = redisev_formatted(l, fn, privdata, cmd, (size_t)len);
    redisFreeCommand(cmd);
    return rc;
}

void
redisev_read(struct redisev *l)
{
    if (l->closing || !l->connected) {
        return;
    }
    l->depth++;
    if (l->ssl == NULL) {
        /* EOF and errors are left to the bufferevent's own read. */
        (void)evbuffer_read(bufferevent_get_input(l->bev), bufferevent_getfd(l->bev), -1);
    }
    redisev_dispatch(l);
    redisev_unref(l);
}

/*
 * Free l now: the callbacks still waiting run with NULL first.  Unless
 * the link is closed to deliver (redisev_close), the socket is reset
 * (SO_LINGER with a zero timeout): a plain close would leave what the
 * server has not acknowledged to the kernel, which retransmits it, so
 * that after a partition heals the server would run requests written
 * before the daemon gave the link up, after the requests of the new one.
 */
static void
redisev_destroy(struct redisev *l)
{
    struct linger reset = { 1, 0 };
    int fd = bufferevent_getfd(l->bev);

    l->depth++;
    redisev_fail_pending(l);
    flush_leave(&l->flush);
    if (!l->deliver && fd >= 0) {
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    }
    bufferevent_free(l->bev);
    redisReaderFree(l->reader);
    evbuffer_free(l->out);
    free(l->fifo);
    free(l);
}

void
redisev_close(struct redisev *l)
{
    if (!l->closing) {
        l->deliver = true;
    }
    redisev_free(l);
}

void
redisev_free(struct redisev *l)
{
    if (l->closing) {
        return;     /* failing: freed once its callbacks return */
    }
    l->closing = true;
    flush_leave(&l->flush);
    if (l->depth == 0) {
        redisev_destroy(l);
    }
}
