/*
 * session.h: one client connection speaking the line protocol.
 *
 * A session reads request lines from a bufferevent, parses them with
 * proto/, runs one request at a time (a blocked LOCK holds up the lines
 * after it), and writes one reply line per request in order.  Locks
 * belong to the session: when its connection closes, every lock it
 * holds is released on the masters at once (daemon/lock.h).
 */
#ifndef REDLOCKD_SESSION_H
#define REDLOCKD_SESSION_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/util.h>

struct event_base;
struct conf;
struct admit_slot;

/* Set the event base and the settings (limits.*, lock.*). */
void session_init(struct event_base *base, const struct conf *conf);

/* Use new settings from now on (reload). */
void session_set_conf(const struct conf *conf);

/*
 * Start a session on an accepted socket.  peer describes the client for
 * logs ("127.0.0.1:5555" or "unix uid=N pid=N"); is_unix says it came in
 * on the Unix socket (exempt from AUTH with auth.unix_exempt); uid and
 * pid are the Unix peer's credentials (SO_PEERCRED), -1 when unknown or
 * on TCP: uid 0 has the admin right (BREAK), and both name the client in
 * its default holder label ("<host>:uid=N,pid=N", else "<host>:<peer>").
 * is_tls: it came in on a TLS listener; the session runs the server side
 * of the handshake (daemon/tls.h's context), and a client certificate verified against tls.client_ca_file stands
 * for AUTH.  A failed handshake is logged with OpenSSL's reason and
 * counted (tls_handshake_failures).
 * slot is the client slot admit_enter() gave the connection; the session
 * takes it over (and gives it back at close, or here on failure).
 * Takes ownership of fd (closed on failure).  Returns 0, or -1 when out
 * of memory.
 *
 * Limits: a request line must be complete within limits.idle_timeout_ms
 * of its first byte (ERR TIMEOUT, then close); unsent output that makes
 * no progress for idle_timeout_ms, or grows past limits.max_output_bytes,
 * closes the connection.  With auth.password set, every request but
 * AUTH and QUIT answers ERR AUTH until AUTH succeeds.  A session must
 * finish its TLS handshake and authenticate within idle_timeout_ms of
 * accept (one deadline for both), or it is closed.
 */
int session_accept(evutil_socket_t fd, const char *peer, bool is_unix, bool is_tls, long uid,
                   long pid, struct admit_slot *slot);

/* Sessions open now. */
size_t session_count(void);

/*
 * The daemon is stopping: every session pushes LOST reason=shutdown for
 * its locks, which are released on the masters, a pending LOCK answers
 * ERR SHUTDOWN, and every later request answers ERR SHUTDOWN.
 */
void session_shutdown_all(void);

/* True when every session's output has been written to its socket. */
bool session_all_flushed(void);

/* Close and free every session (at exit). */
void session_close_all(void);

#endif /* REDLOCKD_SESSION_H */
