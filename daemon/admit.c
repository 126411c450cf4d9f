/*
 * admit.c: client slots, counted in all, per address group and before
 * authentication, and the choice of which unauthenticated connection
 * makes room for a new one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "daemon/admit.h"
#include "daemon/ctx.h"
#include "daemon/authlimit.h"
#include "daemon/keyhash.h"
#include "daemon/fdbudget.h"
#include "daemon/xmalloc.h"

#define ADMIT_BUCKETS 4096          /* group hash table; chains are short */
#define ADMIT_SLOTS_FULL "closed to make room for a newer connection: every client slot " \
                         "is taken, and this one had not authenticated"

/* One address group with connections open; freed when its last one closes. */
struct admit_group {
    struct admit_group *next;       /* in its bucket */
    LIST_ENTRY(admit_group) busy;   /* in admit_busy while pending > 0 */
    size_t              conns;      /* TCP/TLS connections open */
    size_t              pending;    /* of those, unauthenticated */
    size_t              in_line;    /* of those, with an AUTH waiting in line */
    bool                known;      /* a known address (authlimit_admission) */
    TAILQ_HEAD(, admit_slot) slots; /* the pending ones settled, oldest first */
    char                text[AUTHLIMIT_SOURCE_MAX + 8];
};

static bool                 admit_unix;         /* a Unix socket listens */
static size_t               admit_held;         /* slots taken */
static size_t               admit_net;          /* of those, by TCP/TLS connections */
static size_t               admit_pending;      /* unauthenticated TCP/TLS connections */
static uint64_t             admit_nevicted;     /* closed to make room */
static uint64_t             admit_seq;          /* connections entered, for their order */
static struct admit_group  *admit_table[ADMIT_BUCKETS];
static LIST_HEAD(, admit_group) admit_busy = LIST_HEAD_INITIALIZER(admit_busy);
static size_t               admit_fd_slots = SIZE_MAX; /* what the descriptor limit leaves */
static char                 admit_fd_why[160];  /* refusal naming the descriptor limit */
static char                 admit_fd_why_net[224]; /* the same, for TCP/TLS past the reserve */

void
admit_set_fd_slots(size_t slots, uint64_t limit)
{
    admit_fd_slots = slots;
    snprintf(admit_fd_why, sizeof(admit_fd_why),
             "too many clients (descriptor limit %llu: raise LimitNOFILE= or lower "
             "limits.max_clients)", (unsigned long long)limit);
    snprintf(admit_fd_why_net, sizeof(admit_fd_why_net),
             "too many clients (descriptor limit %llu; limits.unix_reserved of the slots it "
             "leaves are kept for the Unix socket: raise LimitNOFILE= or lower "
             "limits.max_clients)", (unsigned long long)limit);
}

bool
admit_is_fd_refusal(const char *why)
{
    return why == admit_fd_why || why == admit_fd_why_net;
}

void
admit_set_unix(bool listening)
{
    admit_unix = listening;
}

bool
admit_needs_auth(bool is_unix)
{
    const char *pass = ctx.conf->auth_password;

    return pass != NULL && pass[0] != '\0' && !(is_unix && ctx.conf->auth_unix_exempt);
}

static size_t
admit_bucket(const char *text)
{
    return (size_t)(keyhash(text, strlen(text)) % ADMIT_BUCKETS);
}

/* The entry of group, made (with no connections) when create; NULL if none. */
static struct admit_group *
admit_find(const char *group, bool create)
{
    struct admit_group **head = &admit_table[admit_bucket(group)], *g;

    for (g = *head; g != NULL; g = g->next) {
        if (strcmp(g->text, group) == 0) {
            return g;
        }
    }
    if (!create) {
        return NULL;
    }
    g = xcalloc(1, sizeof(*g));
    strncpy(g->text, group, sizeof(g->text) - 1);
    TAILQ_INIT(&g->slots);
    g->next = *head;
    *head = g;
    return g;
}

/* Free g once nothing counts on it. */
static void
admit_release(struct admit_group *g)
{
    struct admit_group **p;

    if (g->conns > 0) {
        return;
    }
    for (p = &admit_table[admit_bucket(g->text)]; *p != NULL; p = &(*p)->next) {
        if (*p == g) {
            *p = g->next;
            free(g);
            return;
        }
    }
}

/*
 * The connection of g to close to make room: its oldest pending one whose
 * AUTH is not waiting in line.  One in line is never closed: it did its
 * part, and whatever came after it must not push it out.  NULL when g
 * has none.
 */
static struct admit_slot *
admit_victim_in(struct admit_group *g)
{
    struct admit_slot *s;

    TAILQ_FOREACH(s, &g->slots, link) {
        if (!s->in_line) {
            return s;
        }
    }
    return NULL;
}

/*
 * The group to close a connection of, for room in the pool: of the
 * groups with a connection that may be closed, a stranger group before a
 * known address's, then the one holding the most, then the one whose
 * oldest such connection is oldest.  NULL when none.
 */
static struct admit_group *
admit_fullest(void)
{
    struct admit_group *g, *most = NULL;

    LIST_FOREACH(g, &admit_busy, busy) {
        if (g->pending == g->in_line) {
            continue;
        }
        if (most == NULL || (most->known && !g->known)
            || (most->known == g->known
                && (g->pending > most->pending
                    || (g->pending == most->pending
                        && admit_victim_in(g)->seq < admit_victim_in(most)->seq)))) {
            most = g;
        }
    }
    return most;
}

/* Close victim's connection to make room; false when there is none. */
static bool
admit_make_room(struct admit_group *g, const char *why)
{
    struct admit_slot *victim = g != NULL ? admit_victim_in(g) : NULL;

    if (victim == NULL || victim->evict == NULL) {
        return false;
    }
    admit_nevicted++;
    victim->evict(victim, why);     /* calls admit_leave(victim) */
    return true;
}

/* A TCP or TLS connection from group g (NULL: none open yet) that is pending. */
static const char *
admit_room_for_pending(struct admit_group *g)
{
    const struct conf *c = ctx.conf;

    if (g != NULL && g->pending >= (size_t)c->max_unauthenticated_per_source
        && !admit_make_room(g, "closed to make room for a newer connection from the same "
                               "address group: too many waiting for their TLS handshake "
                               "or AUTH (limits.max_unauthenticated_per_source)")) {
        return "too many connections from this address group waiting for their TLS "
               "handshake or AUTH, every one with its AUTH in line "
               "(limits.max_unauthenticated_per_source)";
    }
    if (admit_pending >= (size_t)c->max_unauthenticated
        && !admit_make_room(admit_fullest(), "closed to make room for a newer connection: "
                            "too many waiting for their TLS handshake or AUTH "
                            "(limits.max_unauthenticated)")) {
        return "too many connections waiting for their TLS handshake or AUTH, every one "
               "with its AUTH in line (limits.max_unauthenticated)";
    }
    return NULL;
}

const char *
admit_enter(struct admit_slot *slot, const char *group, bool known, bool is_unix,
            bool is_tls)
{
    const struct conf *c = ctx.conf;
    size_t slots = (size_t)c->max_clients;
    bool by_fds = admit_fd_slots < slots;   /* the descriptor limit leaves fewer */
    bool pending = is_tls || admit_needs_auth(is_unix);
    struct admit_group *g;
    const char *why;

    if (by_fds) {
        slots = admit_fd_slots;
    }
    /*
     * Slots full (of max_clients, or of what the descriptor limit leaves):
     * a connection that has not authenticated makes room, as in a full
     * pool, so strangers cannot hold every slot either.
     */
    if (admit_held >= slots && !admit_make_room(admit_fullest(), ADMIT_SLOTS_FULL)) {
        return by_fds ? admit_fd_why : "too many clients (limits.max_clients)";
    }
    if (!is_unix
        && admit_net >= fdbudget_net_slots(slots, (size_t)c->unix_reserved, admit_unix)
        && !admit_make_room(admit_fullest(), ADMIT_SLOTS_FULL)) {
        return by_fds ? admit_fd_why_net
                      : "too many clients (limits.max_clients; limits.unix_reserved of them "
                        "are kept for the Unix socket)";
    }
    memset(slot, 0, sizeof(*slot));
    if (is_unix) {
        slot->held = true;      /* the Unix socket's mode guards it, not these counts */
        admit_held++;
        return NULL;
    }
    g = admit_find(group, false);
    /* A stranger's connection makes room here too: the cap is no tool to keep a client out. */
    if (c->max_clients_per_source > 0 && g != NULL
        && g->conns >= (size_t)c->max_clients_per_source
        && !admit_make_room(g, "closed to make room for a newer connection from the same "
                               "address group (limits.max_clients_per_source)")) {
        return "too many connections from this address group (limits.max_clients_per_source)";
    }
    if (pending && (why = admit_room_for_pending(g)) != NULL) {
        return why;
    }
    /* Making room may have freed g. */
    g = admit_find(group, true);
    g->known = known;
    g->conns++;
    admit_held++;
    admit_net++;
    if (pending) {
        if (g->pending++ == 0) {
            LIST_INSERT_HEAD(&admit_busy, g, busy);
        }
        admit_pending++;
    }
    slot->group = g;
    slot->pending = pending;
    slot->held = true;
    slot->seq = ++admit_seq;
    return NULL;
}

void
admit_settle(struct admit_slot *slot, admit_evict_fn evict)
{
    slot->evict = evict;
    if (slot->held && slot->pending && !slot->linked) {
        TAILQ_INSERT_TAIL(&slot->group->slots, slot, link);
        slot->linked = true;
    }
}

void
admit_in_line(struct admit_slot *slot)
{
    if (slot->held && slot->pending && !slot->in_line) {
        slot->in_line = true;
        slot->group->in_line++;
    }
}

void
admit_authed(struct admit_slot *slot)
{
    struct admit_group *g = slot->group;

    if (!slot->held || !slot->pending) {
        return;
    }
    slot->pending = false;
    admit_pending--;
    if (slot->in_line) {
        slot->in_line = false;
        g->in_line--;
    }
    if (slot->linked) {
        TAILQ_REMOVE(&g->slots, slot, link);
        slot->linked = false;
    }
    if (--g->pending == 0) {
        LIST_REMOVE(g, busy);
    }
}

void
admit_leave(struct admit_slot *slot)
{
    if (!slot->held) {
        return;
    }
    admit_authed(slot);
    slot->held = false;
    admit_held--;
    if (slot->group != NULL) {
        admit_net--;
        slot->group->conns--;
        admit_release(slot->group);
        slot->group = NULL;
    }
}

size_t
admit_unauthenticated(void)
{
    return admit_pending;
}

uint64_t
admit_evicted(void)
{
    return admit_nevicted;
}
