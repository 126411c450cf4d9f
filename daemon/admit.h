/*
 * admit.h: which connections may take a client slot.
 *
 * A connection holds one of limits.max_clients slots (fewer when the
 * descriptor limit leaves fewer: admit_set_fd_slots) from accept to
 * close.  TCP and TLS connections take at most those slots minus
 * limits.unix_reserved of them (when a Unix socket listens), so that an
 * operator can still connect (and BREAK) while they fill the rest.  A TCP or TLS
 * connection is "unauthenticated" until its TLS handshake is done and it
 * needs no AUTH any more (AUTH succeeded, a client certificate stood for
 * it, or no password is set); at most limits.max_unauthenticated of
 * those exist at once, at most limits.max_unauthenticated_per_source of
 * them from one address, and at most limits.max_clients_per_source
 * connections of any kind from one address (0: no limit).  A source is a
 * peer's address without its port, as authlimit_source() writes it.
 *
 * The counts are owned here; a session owns its struct admit_slot and
 * tells this module when it authenticates and when it closes.
 */
#ifndef REDLOCKD_ADMIT_H
#define REDLOCKD_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct conf;
struct admit_source;

/* A connection's place in the counts.  Zeroed: holds no slot. */
struct admit_slot {
    struct admit_source *source;    /* its address's counts; NULL on the Unix socket */
    bool                 held;      /* counted in the slots */
    bool                 pending;   /* counted as unauthenticated */
};

/* Use conf's limits.* and auth.* from now on (start and reload). */
void admit_set_conf(const struct conf *conf);

/*
 * The descriptor limit (RLIMIT_NOFILE's soft value) leaves slots client
 * slots (daemon/fdbudget.h); when that is fewer than limits.max_clients,
 * slots count in place of it, and a refusal names the limit: "too many
 * clients (descriptor limit <limit>: raise LimitNOFILE= or lower
 * limits.max_clients)".  Until called, max_clients alone counts.
 */
void admit_set_fd_slots(size_t slots, uint64_t limit);

/* True when why, a text admit_enter() returned, names the descriptor limit. */
bool admit_is_fd_refusal(const char *why);

/* A Unix socket listens: the reserve of limits.unix_reserved applies. */
void admit_set_unix(bool listening);

/*
 * Does a connection from the Unix socket (is_unix) or TCP need AUTH
 * before anything else?  (auth.password set, unless auth.unix_exempt
 * lets Unix sessions in.)
 */
bool admit_needs_auth(bool is_unix);

/*
 * Take a slot for a new connection.  source is its source text (ignored
 * for is_unix); is_tls: its TLS handshake is still to come.  Returns
 * NULL with slot filled, or, when a limit refuses it, a static text
 * naming the limit ("too many clients (limits.max_clients)"), slot then
 * untouched.
 */
const char *admit_enter(struct admit_slot *slot, const char *source, bool is_unix,
                        bool is_tls);

/* slot's connection needs nothing more to be let in (idempotent). */
void admit_authed(struct admit_slot *slot);

/* slot's connection closed: give its slot back (idempotent). */
void admit_leave(struct admit_slot *slot);

/* Connections counted as unauthenticated now (STATS). */
size_t admit_unauthenticated(void);

#endif /* REDLOCKD_ADMIT_H */
