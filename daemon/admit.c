/*
 * admit.c: client slots, counted in all, per source and before
 * authentication.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "daemon/admit.h"
#include "daemon/authlimit.h"
#include "daemon/fdbudget.h"

#define ADMIT_BUCKETS 4096          /* source hash table; chains are short */

/* One source with connections open; freed when its last one closes. */
struct admit_source {
    struct admit_source *next;      /* in its bucket */
    size_t               conns;     /* TCP/TLS connections open */
    size_t               pending;   /* of those, unauthenticated */
    char                 text[AUTHLIMIT_SOURCE_MAX];
};

static const struct conf   *admit_conf;
static bool                 admit_unix;         /* a Unix socket listens */
static size_t               admit_held;         /* slots taken */
static size_t               admit_net;          /* of those, by TCP/TLS connections */
static size_t               admit_pending;      /* unauthenticated TCP/TLS connections */
static struct admit_source *admit_table[ADMIT_BUCKETS];
static size_t               admit_fd_slots = SIZE_MAX; /* what the descriptor limit leaves */
static char                 admit_fd_why[160];  /* refusal naming the descriptor limit */
static char                 admit_fd_why_net[224]; /* the same, for TCP/TLS past the reserve */

void
admit_set_conf(const struct conf *conf)
{
    admit_conf = conf;
}

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
    const char *pass = admit_conf->auth_password;

    return pass != NULL && pass[0] != '\0' && !(is_unix && admit_conf->auth_unix_exempt);
}

/* FNV-1a of text, for the bucket. */
static size_t
admit_hash(const char *text)
{
    uint32_t h = 2166136261u;

    for (; *text != '\0'; text++) {
        h = (h ^ (unsigned char)*text) * 16777619u;
    }
    return h % ADMIT_BUCKETS;
}

/* The entry of source, made (with no connections) when create; NULL if none or no memory. */
static struct admit_source *
admit_find(const char *source, bool create)
{
    struct admit_source **head = &admit_table[admit_hash(source)], *src;

    for (src = *head; src != NULL; src = src->next) {
        if (strcmp(src->text, source) == 0) {
            return src;
        }
    }
    if (!create || (src = calloc(1, sizeof(*src))) == NULL) {
        return NULL;
    }
    strncpy(src->text, source, sizeof(src->text) - 1);
    src->next = *head;
    *head = src;
    return src;
}

/* Free src once nothing counts on it. */
static void
admit_release(struct admit_source *src)
{
    struct admit_source **p;

    if (src->conns > 0) {
        return;
    }
    for (p = &admit_table[admit_hash(src->text)]; *p != NULL; p = &(*p)->next) {
        if (*p == src) {
            *p = src->next;
            free(src);
            return;
        }
    }
}

const char *
admit_enter(struct admit_slot *slot, const char *source, bool is_unix, bool is_tls)
{
    const struct conf *c = admit_conf;
    size_t slots = (size_t)c->max_clients;
    bool by_fds = admit_fd_slots < slots;   /* the descriptor limit leaves fewer */
    bool pending = is_tls || admit_needs_auth(is_unix);
    struct admit_source *src;

    if (by_fds) {
        slots = admit_fd_slots;
    }
    if (admit_held >= slots) {
        return by_fds ? admit_fd_why : "too many clients (limits.max_clients)";
    }
    if (!is_unix
        && admit_net >= fdbudget_net_slots(slots, (size_t)c->unix_reserved, admit_unix)) {
        return by_fds ? admit_fd_why_net
                      : "too many clients (limits.max_clients; limits.unix_reserved of them "
                        "are kept for the Unix socket)";
    }
    if (is_unix) {
        slot->source = NULL;
        slot->pending = false;  /* the Unix socket's mode guards it, not these counts */
        slot->held = true;
        admit_held++;
        return NULL;
    }
    src = admit_find(source, false);
    if (pending && admit_pending >= (size_t)c->max_unauthenticated) {
        return "too many connections waiting for their TLS handshake or AUTH "
               "(limits.max_unauthenticated)";
    }
    if (pending && src != NULL && src->pending >= (size_t)c->max_unauthenticated_per_source) {
        return "too many connections from this address waiting for their TLS handshake "
               "or AUTH (limits.max_unauthenticated_per_source)";
    }
    if (c->max_clients_per_source > 0 && src != NULL
        && src->conns >= (size_t)c->max_clients_per_source) {
        return "too many connections from this address (limits.max_clients_per_source)";
    }
    if (src == NULL && (src = admit_find(source, true)) == NULL) {
        return "out of memory";
    }
    src->conns++;
    admit_held++;
    admit_net++;
    if (pending) {
        src->pending++;
        admit_pending++;
    }
    slot->source = src;
    slot->pending = pending;
    slot->held = true;
    return NULL;
}

void
admit_authed(struct admit_slot *slot)
{
    if (!slot->held || !slot->pending) {
        return;
    }
    slot->pending = false;
    admit_pending--;
    slot->source->pending--;
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
    if (slot->source != NULL) {
        admit_net--;
        slot->source->conns--;
        admit_release(slot->source);
        slot->source = NULL;
    }
}

size_t
admit_unauthenticated(void)
{
    return admit_pending;
}
