/*
 * listener.h: the TCP, Unix and TLS listening sockets.
 *
 * Accepted connections become sessions (daemon/session.h).  Past the
 * client slots (limits.max_clients, or the fewer the descriptor limit
 * leaves: daemon/fdbudget.h, counted at start and at each reload) a new
 * connection is sent "ERR LIMIT ..." and closed (a TLS one without a
 * byte).  A spare descriptor (/dev/null) is kept open: when accept(2)
 * runs out of descriptors all the same, it is closed to accept and
 * refuse the waiting connections, then opened again; only without it do
 * the listeners pause.
 */
#ifndef REDLOCKD_LISTENER_H
#define REDLOCKD_LISTENER_H

#include <stdbool.h>

#include <event2/listener.h>

struct event_base;
struct conf;
struct conf_addr;

/*
 * Bind the listeners named in ctx.conf (daemon/ctx.h; listen.tcp, listen.unix with
 * unix_mode, listen.tls after loading tls.* with daemon/tls.h), or take
 * systemd's sockets (one named "tls" speaks TLS).  A stale Unix socket
 * file is replaced.  Opens the spare descriptor, raises the soft
 * descriptor limit to the hard one and counts the client slots it leaves
 * (logged).  The listeners run on ctx.base.  Returns 0, or -1 with the
 * reason logged (address in use, permission, bad host, no /dev/null).
 * limits.* and auth.* are read from ctx.conf when a client comes.
 */
int listener_start(void);

/*
 * Bind and listen on a "host:port" address (a name is resolved with
 * getaddrinfo; the first address that binds wins), for listen.tcp and
 * metrics.listen.  cb may be NULL (the listener then stays disabled
 * until one is set, as evhttp_bind_listener does).  Returns the
 * listener (freeing it closes the socket), or NULL with the reason in
 * why: "cannot resolve the host: ..." or "cannot listen: <errno text>".
 */
struct evconnlistener *listener_bind_inet(struct event_base *base,
                                          const struct conf_addr *addr,
                                          evconnlistener_cb cb, char *why, size_t why_size);

/*
 * True when socket activation passed a listener that other hosts can
 * reach: a reload must then keep auth.password set (protected mode).
 */
bool listener_needs_auth(void);

/*
 * True when socket activation passed a TLS listener that other hosts can
 * reach: a reload must then keep auth.password or tls.client_ca_file set.
 */
bool listener_tls_public(void);

/* True when a TLS listener exists: a reload re-reads the certificates. */
bool listener_has_tls(void);

/*
 * After a reload (ctx.conf is the new settings): count the client slots
 * the descriptor limit leaves now (the soft limit raised to the hard one
 * again, after an operator's prlimit(1)), logged.
 */
void listener_apply(void);

/* Stop accepting: close the sockets and remove the Unix socket file. */
void listener_stop(void);

/*
 * Count lev (a listener of another module: /metrics) among the
 * listeners that refuse from the spare descriptor (closing, without a
 * reply) when accept(2) runs out of descriptors, and pause together when
 * that cannot be done, and give it the listeners' error callback.
 * Returns 0, or -1 when the table is full (lev then spins on EMFILE as
 * libevent does).
 */
int listener_guard(struct evconnlistener *lev);

/* Stop counting lev (before it is freed). */
void listener_unguard(struct evconnlistener *lev);

#endif /* REDLOCKD_LISTENER_H */
