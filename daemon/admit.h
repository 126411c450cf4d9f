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
 * them from one address group, and at most limits.max_clients_per_source
 * connections of any kind from one group (0: no limit).  A group is an
 * IPv4 /24 (127/8 as one), an IPv6 /64, as authlimit_group() writes it.
 *
 * A full unauthenticated pool (or group share, or group cap, or every
 * client slot while some are unauthenticated) does not refuse a new
 * connection: the oldest unauthenticated connection of the group holding
 * the most (of the new one's group, when its share or cap is full) is
 * closed to make room, so that strangers holding connections open cannot
 * keep a client out, and a connection waiting there gains nothing.  A
 * connection whose AUTH is waiting for its turn to be checked
 * (daemon/authlimit.h) is never closed to make room: when only such
 * connections fill a share (or the pool), the newcomer is refused.  An
 * address that gave the right password lately is a group of its own
 * ("known <address>", authlimit_admission()), whose connections are
 * closed to make room only when no stranger group has one to close: a
 * flood from elsewhere in its group cannot push a known client out.
 *
 * The counts are owned here; a session owns its struct admit_slot and
 * tells this module when it authenticates and when it closes.
 */
#ifndef REDLOCKD_ADMIT_H
#define REDLOCKD_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

struct conf;
struct admit_group;
struct admit_slot;

/*
 * Close the connection of slot, which admit_enter() chose to make room
 * (its session sends why, "ERR LIMIT <why>", when it can; calls
 * admit_leave() on slot before returning).
 */
typedef void (*admit_evict_fn)(struct admit_slot *slot, const char *why);

/* A connection's place in the counts.  Zeroed: holds no slot. */
struct admit_slot {
    struct admit_group *group;      /* its address group's counts; NULL on the Unix socket */
    bool                held;       /* counted in the slots */
    bool                pending;    /* counted as unauthenticated */
    bool                linked;     /* in its group's pending list (admit_settle) */
    bool                in_line;    /* its AUTH waits for its turn (admit_in_line) */
    uint64_t            seq;        /* order of entry, from 1 */
    admit_evict_fn      evict;      /* how to close it to make room */
    TAILQ_ENTRY(admit_slot) link;   /* in group->pending, oldest first */
};

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
 * Take a slot for a new connection.  group is its admission group
 * (authlimit_admission(): its address group, or "known <address>" with
 * known true; ignored for is_unix); is_tls: its TLS handshake is still to
 * come.
 * When the unauthenticated pool or the group's share of it is full, an
 * older unauthenticated connection is closed to make room (see above;
 * its evict function runs before this returns).  Returns NULL with slot
 * filled, or, when a limit refuses it, a static text naming the limit
 * ("too many clients (limits.max_clients)"), slot then untouched.
 */
const char *admit_enter(struct admit_slot *slot, const char *group, bool known,
                        bool is_unix, bool is_tls);

/*
 * slot (a session's own copy of what admit_enter filled, at its final
 * address) may now be closed to make room, with evict.
 */
void admit_settle(struct admit_slot *slot, admit_evict_fn evict);

/* slot's AUTH waits in line to be checked: it is never closed to make room. */
void admit_in_line(struct admit_slot *slot);

/* slot's connection needs nothing more to be let in (idempotent). */
void admit_authed(struct admit_slot *slot);

/* slot's connection closed: give its slot back (idempotent). */
void admit_leave(struct admit_slot *slot);

/* Connections counted as unauthenticated now (STATS). */
size_t admit_unauthenticated(void);

/* Unauthenticated connections closed to make room, since start (STATS). */
uint64_t admit_evicted(void);

#endif /* REDLOCKD_ADMIT_H */
