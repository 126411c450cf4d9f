/*
 * authlimit.c: a token bucket of wrong AUTH passwords per source.
 *
 * The bucket is kept as one time per source (util_gcra_wait()): each
 * wrong password moves it AUTHLIMIT_REFILL_MS later, and the source is
 * out of tokens while it is more than AUTHLIMIT_BURST - 1 refills ahead
 * of now.  The table is open
 * addressing over a hash of the source, probing a few slots; a full
 * probe window gives up the slot seen longest ago.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "daemon/authlimit.h"
#include "daemon/log.h"
#include "daemon/util.h"

#define AUTHLIMIT_PROBE 8   /* slots looked at for a source */

/* One source. */
struct authlimit_entry {
    char     source[AUTHLIMIT_SOURCE_MAX]; /* "" when the slot is free */
    int64_t  tat_us;        /* the bucket, as a time (see above), monotonic us */
    int64_t  seen_us;       /* last AUTH failure or refusal, for reuse */
    struct log_every log;   /* its summary lines of refusals */
};

static struct authlimit_entry authlimit_table[AUTHLIMIT_SOURCES];

void
authlimit_source(const char *peer, char *out, size_t size)
{
    const char *end;
    char host[INET6_ADDRSTRLEN + 1];
    struct in6_addr a6;
    size_t len;

    if (strncmp(peer, "unix ", 5) == 0) {
        end = strstr(peer, " pid=");
        snprintf(out, size, "%.*s", (int)(end != NULL ? end - peer : (long)strlen(peer)), peer);
        return;
    }
    end = strrchr(peer, ':');
    if (peer[0] != '[' || end == NULL || end[-1] != ']') {
        /* IPv4 "a.b.c.d:port" (or something else: all of it). */
        snprintf(out, size, "%.*s", (int)(end != NULL ? end - peer : (long)strlen(peer)), peer);
        return;
    }
    len = (size_t)(end - 1 - (peer + 1));
    if (len >= sizeof(host)) {
        snprintf(out, size, "%.*s", (int)(end - peer), peer);
        return;
    }
    memcpy(host, peer + 1, len);
    host[len] = '\0';
    if (inet_pton(AF_INET6, host, &a6) != 1) {
        snprintf(out, size, "[%s]", host);
    } else if (IN6_IS_ADDR_V4MAPPED(&a6)) {
        /* An IPv4 client of an IPv6 socket is the same source as on an IPv4 one. */
        snprintf(out, size, "%u.%u.%u.%u", a6.s6_addr[12], a6.s6_addr[13], a6.s6_addr[14],
                 a6.s6_addr[15]);
    } else {
        /* One IPv6 host usually has a whole /64: that is the source. */
        memset(&a6.s6_addr[8], 0, 8);
        inet_ntop(AF_INET6, &a6, host, sizeof(host));
        snprintf(out, size, "[%s]/64", host);
    }
}

/* FNV-1a over the source's bytes. */
static size_t
authlimit_hash(const char *source)
{
    uint32_t h = 2166136261u;

    for (; *source != '\0'; source++) {
        h = (h ^ (uint8_t)*source) * 16777619u;
    }
    return h % AUTHLIMIT_SOURCES;
}

/* The entry of source, or NULL when it has none and create is false. */
static struct authlimit_entry *
authlimit_find(const char *source, bool create, int64_t now_us)
{
    size_t i = authlimit_hash(source), k;
    struct authlimit_entry *e, *free_slot = NULL, *oldest = NULL;

    for (k = 0; k < AUTHLIMIT_PROBE; k++) {
        e = &authlimit_table[(i + k) % AUTHLIMIT_SOURCES];
        if (e->source[0] == '\0') {
            if (free_slot == NULL) {
                free_slot = e;
            }
        } else if (strcmp(e->source, source) == 0) {
            return e;
        } else if (oldest == NULL || e->seen_us < oldest->seen_us) {
            oldest = e;
        }
    }
    if (!create) {
        return NULL;
    }
    if (free_slot != NULL) {
        oldest = free_slot;
    }
    memset(oldest, 0, sizeof(*oldest));
    snprintf(oldest->source, sizeof(oldest->source), "%s", source);
    oldest->tat_us = now_us;
    oldest->seen_us = now_us;
    return oldest;
}

/* us until e has a token again, 0 when it has one. */
static int64_t
authlimit_wait_us(const struct authlimit_entry *e, int64_t now_us)
{
    return util_gcra_wait(e->tat_us, now_us, AUTHLIMIT_REFILL_MS * (int64_t)1000,
                          AUTHLIMIT_BURST);
}

int64_t
authlimit_check(const char *source, int64_t now_us, unsigned long long id, const char *peer)
{
    struct authlimit_entry *e = authlimit_find(source, false, now_us);
    uint64_t held;
    int64_t wait;
    bool first;

    if (e == NULL || (wait = authlimit_wait_us(e, now_us)) == 0) {
        return 0;
    }
    e->seen_us = now_us;
    first = e->log.last_us == 0;
    if (log_every_due(&e->log, now_us, &held)) {
        log_warn("AUTH from %s refused unchecked %llu time%s%s (more than %d wrong passwords, "
                 "then one a second); the last: client %llu (%s)", source,
                 (unsigned long long)held + 1, held == 0 ? "" : "s",
                 first ? "" : " since the last such line", AUTHLIMIT_BURST, id, peer);
    }
    return (wait + 999) / 1000;
}

void
authlimit_failed(const char *source, int64_t now_us)
{
    struct authlimit_entry *e = authlimit_find(source, true, now_us);

    util_gcra_take(&e->tat_us, now_us, AUTHLIMIT_REFILL_MS * (int64_t)1000);
    e->seen_us = now_us;
}
