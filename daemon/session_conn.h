/*
 * session_conn.h: the record of one client connection, shared by the
 * session module's two files and included by nothing outside them
 * (daemon/session.h is the module's interface).  daemon/session.c keeps
 * the connection's life (accept, TLS, AUTH state, request lines,
 * back-pressure, quit, close); daemon/session_receipt.c the delivery
 * receipts of tracked replies.  session_receipt.c calls session.c only
 * through daemon/session.h (session_reply); session.c calls it through
 * the three functions below.
 */
#ifndef REDLOCKD_SESSION_CONN_H
#define REDLOCKD_SESSION_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/event_struct.h>

#include "daemon/admit.h"
#include "daemon/flush.h"
#include "daemon/session.h"

struct bufferevent;
struct session_receipt;

/* Where a session's life stands. */
enum session_phase {
    SESSION_OPEN,           /* requests are read and answered */
    SESSION_QUITTING,       /* QUIT, TOOLONG, a refused AUTH, the end of input
                               answered: close once the output is flushed */
    SESSION_CLOSED          /* closed; freed once no request is in flight */
};

/* What the next request line waits for. */
enum session_turn {
    SESSION_READY,          /* nothing: it is handed over when complete */
    SESSION_REQUEST,        /* a request's answer (session_request_begin) */
    SESSION_PACED           /* output written in steps (session_pace) */
};

/* The kind of connection. */
enum session_link {
    SESSION_TCP,            /* a plain TCP listener */
    SESSION_UNIX,           /* the Unix socket */
    SESSION_TLS_HANDSHAKE,  /* a TLS listener, handshake not done (bev is an OpenSSL one) */
    SESSION_TLS             /* a TLS listener, handshake done */
};

/*
 * One client connection.  Owned by session.c (the sessions list); freed
 * once it is closed and no request is in flight.
 */
struct session {
    struct bufferevent *bev;        /* the socket, NULL once closed */
    TAILQ_ENTRY(session) link;      /* in sessions */
    uint64_t            id;         /* for logs, from 1 */
    char                peer[SESSION_PEER_MAX]; /* peer address, for logs */
    enum session_phase  phase;
    enum session_turn   turn;
    enum session_link   kind;
    enum session_auth   auth;       /* what let it in: a reload that changes what it
                                       gave ends it (session_reauth) */
    const char         *admin_by;   /* may BREAK, and why ("auth.admin_password", "uid 0
                                       on the Unix socket"; static), else NULL */
    bool                in_close;   /* inside session_close() */
    bool                processing; /* inside session_process() */
    bool                out_blocked;/* reading paused: the client does not read */
    bool                overflow;   /* unsent output over limits.max_output_bytes */
    bool                input_ended;/* end of input: answer what came, then quit */
    bool                peer_reset; /* the connection failed (a reset by the peer,
                                       ECONNRESET or EPIPE, or another socket
                                       error): it did not read everything */
    struct event        timer;      /* accept deadline; partial line deadline;
                                       overflow close; quit */
    struct session_receipt *receipts; /* tracked replies not settled, oldest first
                                       (session_receipt.c) */
    struct session_receipt **receipts_tail; /* where the next one is linked */
    uint64_t            out_sent;   /* output bytes written to the socket
                                       (session_output_cb) */
    struct flush_entry  flush;      /* plain sockets: output waits in the flush list */
    int64_t             linger_until_us; /* quitting: wait for receipts until then */
    struct admit_slot   admit;      /* its client slot (daemon/admit.h) */
    bool                deferred;   /* lines left for the next turn (session_ready) */
    TAILQ_ENTRY(session) ready_link;/* in session_ready while deferred */
    max_align_t         state[];    /* the hooks' state, session_hooks.size bytes */
};

#define SESSION_IS_TLS(s)   ((s)->kind >= SESSION_TLS_HANDSHAKE)

/*
 * Read (which clears) the socket's pending error of open s; any error
 * (a reset by the peer, ECONNRESET or EPIPE, most often) is remembered
 * in peer_reset.  Returns the error, 0 when none.
 */
int session_take_error(struct session *s);

/*
 * Settle, as delivered, the receipts of the replies that cannot be
 * proved lost any more (see session_receipt.c).  Called whenever bytes
 * left the output for the socket, more input came, and at quit.
 */
void session_receipts_confirm(struct session *s);

/*
 * s closes (called by session_close while s->bev is still there):
 * settle every receipt left, as not delivered where the reply provably
 * never reached the client, else as delivered.
 */
void session_receipts_settle(struct session *s);

#endif /* REDLOCKD_SESSION_CONN_H */
