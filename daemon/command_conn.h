/*
 * command_conn.h: what the command module's two files share (private to
 * daemon/command*.c): the state kept for one session, and the functions
 * one file calls in the other.  daemon/command.h is the module's
 * interface to the rest of the daemon.
 */
#ifndef REDLOCKD_COMMAND_CONN_H
#define REDLOCKD_COMMAND_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event_struct.h>

#include "daemon/authlimit.h"
#include "daemon/lock.h"
#include "daemon/readq.h"
#include "daemon/session.h"
#include "daemon/watch.h"
#include "proto/proto.h"

struct command_list;

/*
 * What this module keeps for one session: the session's hook state
 * (daemon/session.h, struct session_hooks: allocated and freed with the
 * session, zeroed, set up by command_open).
 */
struct command {
    struct session     *s;          /* the session it serves */
    struct lock_client  lc;         /* the lock side: leases, pending LOCK */
    struct watch_client wc;         /* its WATCHes */
    enum proto_verb     verb;       /* the request in flight */
    int64_t             reads_tat_us; /* its STATUS and WATCH budget (util_gcra_wait) */
    struct readq_client reads;      /* its reads' turns (daemon/readq.h) */
    struct readq_job    status;     /* its STATUS's turn */
    struct event        status_timer; /* a waiting STATUS's limits.read_wait_ms, or
                                       its end at close; assigned at open */
    char                status_name[PROTO_NAME_MAX]; /* a waiting STATUS's name */
    size_t              status_name_len;
    char                status_token[PROTO_TOKEN_LEN + 1]; /* and its token=, or "" */
    int64_t             check_fence;/* a waiting CHECK's fence= (its name and token=
                                       are status_name and status_token) */
    int                 check_permit;/* and its permit=, or -1 */
    char                label[PROTO_LABEL_MAX + 1]; /* default holder label:
                                       "<host>:<peer>" */
    struct command_list *list;      /* a LIST being written, step by step, else NULL
                                       (xcalloc'd: an idle session keeps none) */
    struct authlimit_waiter auth_wait; /* its AUTH, waiting for its turn to be checked */
    char               *auth_word;  /* that AUTH's password (xstrndup'd, wiped when freed),
                                       else NULL */
    size_t              auth_len;   /* bytes in auth_word */
};

/* The command state around a member (lc, wc) the lock and watch modules call back with. */
#define COMMAND_OF(p, member) \
    ((struct command *)(void *)((char *)(p) - offsetof(struct command, member)))

/* The kind= word of each kind of hold, in replies and LIST lines (command_reply.c). */
extern const char *const command_kind_words[];

/* What a session hears from the lock table: one reply writer per verb (command_reply.c). */
extern const struct lock_hooks command_lock_hooks;

/*
 * May the session of c see the label of a hold that is not its own?
 * (auth.show_labels: labels name hosts, users and processes; an admin
 * may.)  command.c.
 */
bool command_sees_labels(const struct command *c);

/*
 * STATUS ended with res (also called by command.c for a STATUS that
 * found no turn to read): its read's slot goes on, and the reply, "HELD
 * name ...", "FREE name ..." or the verdict, is written.  command_reply.c.
 */
void command_status_done(struct lock_client *lc, const struct lock_status_result *res);

/*
 * CHECK ended with res (also called by command.c for a CHECK that found
 * no turn to read): its read's slot goes on, and the reply, "CURRENT
 * name ttl=", "STALE name reason=" or the verdict, is written.
 * command_reply.c.
 */
void command_check_done(struct lock_client *lc, const struct lock_check_result *res);

#endif /* REDLOCKD_COMMAND_CONN_H */
