/*
 * session.h: one client connection speaking the line protocol.
 *
 * A session reads request lines from a bufferevent (plain, Unix or TLS),
 * parses them with proto/, hands one request at a time to the layer
 * above (daemon/command.h, through struct session_hooks), and writes
 * what that layer answers, in order.  It owns the connection's life:
 * the TLS handshake, the AUTH state and the deadline from accept,
 * back-pressure (a client that does not read its replies gets no more
 * of them), the bound on unsent output, the end of input, QUIT, and the
 * close, at which it tells the layer above, whose locks then go too.  It
 * knows no locks: a reply whose delivery matters to the layer above (a
 * lease-mode grant, whose token nobody else knows) is written with a
 * delivery receipt (session_reply_tracked), and the layer above decides
 * what an undelivered one means.
 */
#ifndef REDLOCKD_SESSION_H
#define REDLOCKD_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/util.h>

#include "proto/proto.h"

struct event_base;
struct evbuffer;
struct conf;
struct admit_slot;
struct session;

#define SESSION_PEER_MAX    64      /* bytes of a peer's text, NUL included */

/* What let a session in (AUTH state). */
enum session_auth {
    SESSION_AUTH_WAITING,           /* an AUTH is needed and has not come */
    SESSION_AUTH_NOT_NEEDED,        /* let in without one (none configured, or
                                       the Unix socket with auth.unix_exempt) */
    SESSION_AUTH_PASSWORD,          /* AUTH with auth.password */
    SESSION_AUTH_ADMIN_PASSWORD,    /* AUTH with auth.admin_password */
    SESSION_AUTH_CERTIFICATE        /* a client certificate verified against
                                       tls.client_ca_file */
};

/*
 * The layer above, called by every session.  state points at size
 * bytes the session allocates (zeroed) with itself and frees with
 * itself, after free().
 */
struct session_hooks {
    size_t size;
    /* A new session: peer, is_unix, uid, pid as given to session_accept(). */
    void (*open)(struct session *s, void *state, const char *peer, bool is_unix, long uid,
                 long pid);
    /* One parsed request; it answers with session_reply() and the like. */
    void (*line)(struct session *s, void *state, const struct proto_cmd *cmd);
    /* Paced output (session_pace) may go on: the client read what was there. */
    void (*writable)(struct session *s, void *state);
    /* The client's input ended: a request that would wait for it cannot. */
    void (*input_end)(void *state);
    /* The session lingers before its close: its locks go now. */
    void (*release)(void *state);
    /* The connection closed: everything the session held goes. */
    void (*closed)(void *state);
    /* The daemon is stopping (session_shutdown_all). */
    void (*shutdown)(void *state);
    /* The session is freed: free what state owns. */
    void (*free)(void *state);
};

/*
 * Set the layer above (hooks, kept until exit).  The settings (limits.*,
 * auth.*) are read from ctx.conf when used and sessions run on ctx.base
 * (daemon/ctx.h).
 */
void session_init(const struct session_hooks *hooks);

/*
 * After a reload (ctx.conf is the new settings, prev the old ones).  A session whose password
 * changed ends (the secret it showed is no longer one), unless no
 * password is needed any more; one let in without AUTH that now needs
 * one ends too, unless it is still in its TLS handshake (it must then
 * AUTH by the deadline set at accept); one waiting for an AUTH no
 * longer needed is let in; sessions a client certificate let in stay.
 * A new limits.max_line_bytes applies at once.
 */
void session_apply(const struct conf *prev);

/*
 * Start a session on an accepted socket.  peer describes the client for
 * logs ("127.0.0.1:5555" or "unix uid=N pid=N"); is_unix says it came in
 * on the Unix socket (exempt from AUTH with auth.unix_exempt); uid and
 * pid are the Unix peer's credentials (SO_PEERCRED), -1 when unknown or
 * on TCP: uid 0 has the admin right (BREAK), and both are handed to the
 * open hook.  is_tls: it came in on a TLS listener; the session runs
 * the server side of the handshake (daemon/tls.h's context), and a
 * client certificate verified against tls.client_ca_file stands for
 * AUTH.  A failed handshake is logged with OpenSSL's reason and counted
 * (tls_handshake_failures).
 * slot is the client slot admit_enter() gave the connection; the session
 * takes it over (and gives it back at close, or here on failure).
 * Takes ownership of fd (closed on failure).  Returns 0, or -1 when no
 * TLS session could be made for it (tls_session_new); out of memory
 * aborts (daemon/xmalloc.h).
 *
 * Limits: a request line must be complete within limits.idle_timeout_ms
 * of its first byte (ERR TIMEOUT, then close); unsent output that makes
 * no progress for idle_timeout_ms, or grows past limits.max_output_bytes,
 * closes the connection.  A session must finish its TLS handshake and
 * authenticate within idle_timeout_ms of accept (one deadline for
 * both), or it is closed.
 */
int session_accept(evutil_socket_t fd, const char *peer, bool is_unix, bool is_tls, long uid,
                   long pid, struct admit_slot *slot);

/* Sessions open now. */
size_t session_count(void);

/*
 * The daemon is stopping: the shutdown hook runs for every session
 * (its locks are pushed LOST reason=shutdown and released, a pending
 * LOCK answers ERR SHUTDOWN), and session_stopping() is true from now on.
 */
void session_shutdown_all(void);

/* True once session_shutdown_all() was called. */
bool session_stopping(void);

/* True when every session's output has been written to its socket. */
bool session_all_flushed(void);

/* Close and free every session (at exit). */
void session_close_all(void);

/*
 * The output calls of the layer above, for an open session (one whose
 * line, writable or a lock callback is running).
 */

/* Write a reply or pushed line (proto/proto.h's builder; a no-op once closed). */
void session_reply(struct session *s, const struct proto_reply *r);

/* Write "ERR <code> <text>". */
void session_error(struct session *s, enum proto_errcode code, const char *text);

/*
 * The output buffer, for replies of many lines (STATS, HELP, LIST);
 * call session_wrote() after writing, except for paced output.
 */
struct evbuffer *session_output(struct session *s);

/* Output was added: past limits.max_output_bytes unsent, the session is
 * closed from the event loop (never inside the caller). */
void session_wrote(struct session *s);

/* Unsent output is below the low mark (64 KiB): paced output may add more. */
bool session_output_low(const struct session *s);

/*
 * A request whose answer comes later (a lock operation) begins: no
 * further line is handed over, and the session is not freed at close,
 * until session_request_done().
 */
void session_request_begin(struct session *s);

/*
 * The request begun last has its answer.  Returns true when the session
 * is still open (answer it, then session_next()); false when it closed
 * meanwhile: it is freed now (unless it is inside its close), with its
 * state, and neither may be touched again.
 */
bool session_request_done(struct session *s);

/*
 * Output that goes on in steps (a LIST): while on, no further line is
 * handed over, and the writable hook runs each time the client has read
 * enough (session_output_low).
 */
void session_pace(struct session *s, bool on);

/* Hand over the next buffered line, if any may go now (after an answer). */
void session_next(struct session *s);

/*
 * Close once the output is flushed (QUIT, a refused AUTH).  Never
 * closes inside the call: s stays valid for the caller.
 */
void session_quit(struct session *s);

/*
 * The receipt of a reply written with session_reply_tracked(), given
 * once: delivered is true when the reply may have been read, false when
 * it provably never reached the client.  s is the session it was
 * written to, closing when delivered is false or inside its close
 * (session_id and session_peer may be read; nothing may be written).
 * arg is the caller's, to free in either case.
 */
typedef void (*session_receipt_fn)(struct session *s, void *arg, bool delivered);

/*
 * Write a reply, as session_reply() does, and give fn its receipt once
 * its fate is known.  Delivered: on TCP and TLS once the reply was
 * written to the socket; on the Unix socket once more output was
 * written after it or the client read everything (SIOCOUTQ 0, and no
 * reset: a client that closes with data unread empties that count too).  Not
 * delivered, at close: a reply never written to the socket, or, on the
 * Unix socket, the last bytes written before the client reset the
 * connection.  A reply that may have been read is never called lost
 * (on TCP a reset proves nothing: the client's kernel may have taken it
 * and delayed its ACK).  A session that quits (session_quit) lingers up
 * to 2 s, once its output is written, for the receipts left, looking
 * every 5 ms.  On a closed session fn gets false at once.
 */
void session_reply_tracked(struct session *s, const struct proto_reply *r,
                           session_receipt_fn fn, void *arg);

/* Let s in (AUTH answered): by says with what; the admin password also
 * gives the admin right. */
void session_let_in(struct session *s, enum session_auth by);

/* s is let in (AUTH done or not needed). */
bool session_authed(const struct session *s);

/* Why s may BREAK ("auth.admin_password", "uid 0 on the Unix socket"), or NULL. */
const char *session_admin_by(const struct session *s);

/* s's number (for logs, from 1) and peer text. */
unsigned long long session_id(const struct session *s);
const char *session_peer(const struct session *s);

#endif /* REDLOCKD_SESSION_H */
