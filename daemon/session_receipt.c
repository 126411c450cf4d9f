/*
 * session_receipt.c: delivery receipts of tracked replies
 * (session_reply_tracked in daemon/session.h): when a reply may have
 * been read, and when it provably never reached the client.  The
 * connection's record is daemon/session_conn.h's.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <linux/sockios.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "daemon/session.h"
#include "daemon/session_conn.h"
#include "daemon/xmalloc.h"

/*
 * A reply whose receipt is pending.  Owned by its session (receipts,
 * oldest first); freed once its receipt was given.
 */
struct session_receipt {
    struct session_receipt *next;   /* next younger one, or NULL */
    uint64_t                end;    /* output offset just after its reply */
    session_receipt_fn      fn;     /* called once with the verdict */
    void                   *arg;    /* fn's, owned by the caller */
};

int
session_take_error(struct session *s)
{
    int err = 0;
    socklen_t len = sizeof(err);

    if (getsockopt((int)bufferevent_getfd(s->bev), SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        return 0;
    }
    if (err != 0) {
        /* A reset (ECONNRESET, EPIPE), or any other error: what was unread is lost. */
        s->peer_reset = true;
    }
    return err;
}

/* Take the oldest receipt off s, give it its verdict, free it. */
static void
session_receipt_give(struct session *s, bool delivered)
{
    struct session_receipt *g = s->receipts;

    s->receipts = g->next;
    if (s->receipts == NULL) {
        s->receipts_tail = &s->receipts;
    }
    g->fn(s, g->arg, delivered);
    free(g);
}

/*
 * Give "delivered" to the replies that cannot be proved lost any more.
 * On TCP and TLS: every reply written to the socket (the peer may have
 * read it, and nothing the socket tells proves it did not: a peer that
 * read the reply and reset the connection may have delayed the ACK that
 * would have said so).  On a Unix socket: more output was written after
 * it, or the peer read everything (SIOCOUTQ 0 with no reset pending: a
 * peer that closes with data unread empties the count too, and resets).
 * What remains is judged at close by session_receipts_settle().
 */
void
session_receipts_confirm(struct session *s)
{
    int queued = 0;
    uint64_t done;

    if (s->receipts == NULL || s->bev == NULL) {
        return;
    }
    if (s->kind != SESSION_UNIX) {
        done = s->out_sent;
    } else {
        if (ioctl((int)bufferevent_getfd(s->bev), SIOCOUTQ, &queued) != 0) {
            return;     /* cannot tell: keep them until it can */
        }
        /*
         * Nothing queued is no read when the peer reset: closing with
         * data unread, it set the reset before its kernel dropped that
         * data (so the reset is seen here, after the count).
         */
        if (queued == 0 && (s->peer_reset || session_take_error(s) != 0)) {
            queued = 1;
        }
        done = queued == 0 ? s->out_sent : s->out_sent - (s->out_sent > 0);
    }
    while (s->receipts != NULL && s->receipts->end <= done) {
        session_receipt_give(s, true);
    }
}

/*
 * The session closes: every receipt left is given.  A reply is lost
 * (not delivered) when it was never written to the socket, or, on a
 * Unix socket, when the peer reset the connection and the reply was the
 * last bytes written: a Unix peer resets only when it closes with
 * unread data, and unread data always includes the end of the stream,
 * so the reply's last line was not read whole.  On TCP a reset proves
 * nothing (an abortive close resets after reading everything, and the
 * ACK of what was read may still be delayed), and on TLS the socket's
 * bytes are records, not replies: there a reply written to the socket
 * counts as delivered.  A reply that may have been read is never called
 * lost: a lease-mode client would use a lock it no longer holds.
 */
void
session_receipts_settle(struct session *s)
{
    bool lost;

    if (s->receipts == NULL) {
        return;
    }
    session_take_error(s);
    while (s->receipts != NULL) {
        lost = s->receipts->end > s->out_sent
               || (s->kind == SESSION_UNIX && s->peer_reset && s->receipts->end == s->out_sent);
        session_receipt_give(s, !lost);
    }
}

void
session_reply_tracked(struct session *s, const struct proto_reply *r, session_receipt_fn fn,
                      void *arg)
{
    struct session_receipt *g;

    if (s->bev == NULL) {
        fn(s, arg, false);      /* closed: it is never written */
        return;
    }
    session_reply(s, r);
    g = xmalloc(sizeof(*g));
    g->next = NULL;
    g->end = s->out_sent + evbuffer_get_length(bufferevent_get_output(s->bev));
    g->fn = fn;
    g->arg = arg;
    *s->receipts_tail = g;
    s->receipts_tail = &g->next;
}
