/*
 * events.c: the ring of recent LOST and BREAK events (daemon/events.h).
 *
 * events_ring[events_next] is where the next event goes; the newest is
 * the one before it.  Strings are copied with their length bounded, so
 * a long reason or a name at the limit never writes past its field.
 */
#include <string.h>
#include <time.h>

#include "daemon/events.h"
#include "daemon/util.h"

static struct events_entry events_ring[EVENTS_MAX];
static size_t events_next;      /* the slot the next event takes */
static size_t events_kept;      /* events in the ring: 0..EVENTS_MAX */
static uint64_t events_noted;   /* events noted since start */

/* Copy NUL-terminated s (NULL: "") into dst of size bytes, cut to fit. */
static void
events_copy(char *dst, size_t size, const char *s)
{
    size_t len = s != NULL ? strnlen(s, size - 1) : 0;

    memcpy(dst, s != NULL ? s : "", len);
    dst[len] = '\0';
}

void
events_note(enum events_kind kind, const char *name, size_t name_len, const char *label,
            const char *reason)
{
    struct events_entry *e = &events_ring[events_next];

    e->kind = kind;
    e->at_us = util_now_us();
    e->wall = time(NULL);
    e->name_len = name_len < EVENTS_NAME_MAX ? name_len : EVENTS_NAME_MAX;
    memcpy(e->name, name, e->name_len);
    e->name[e->name_len] = '\0';
    events_copy(e->label, sizeof(e->label), label);
    events_copy(e->reason, sizeof(e->reason), reason);
    events_next = (events_next + 1) % EVENTS_MAX;
    if (events_kept < EVENTS_MAX) {
        events_kept++;
    }
    events_noted++;
}

size_t
events_count(void)
{
    return events_kept;
}

const struct events_entry *
events_get(size_t i)
{
    if (i >= events_kept) {
        return NULL;
    }
    return &events_ring[(events_next + EVENTS_MAX - 1 - i) % EVENTS_MAX];
}

uint64_t
events_total(void)
{
    return events_noted;
}

const char *
events_kind_name(enum events_kind kind)
{
    return kind == EVENTS_BREAK ? "BREAK" : "LOST";
}
