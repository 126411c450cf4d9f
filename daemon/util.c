/*
 * util.c: monotonic time, owner tokens, retry jitter.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "daemon/util.h"

int64_t
util_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Read exactly len random bytes; getrandom may return fewer or EINTR. */
int
util_getrandom(void *buf, size_t len)
{
    unsigned char *p = buf;
    size_t got = 0;
    ssize_t n;

    while (got < len) {
        n = getrandom(p + got, len - got, 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

/*
 * Tokens are cut from a pool that one getrandom(2) call fills with
 * UTIL_TOKEN_POOL tokens' worth of bytes; each byte is handed out once
 * and wiped from the pool as it is taken.
 */
#define UTIL_TOKEN_POOL 64

int
util_token(char *out)
{
    static const char hex[] = "0123456789abcdef";
    static unsigned char pool[UTIL_TOKEN_POOL * UTIL_TOKEN_BYTES];
    static size_t used = sizeof(pool);
    unsigned char raw[UTIL_TOKEN_BYTES];
    size_t i;

    if (used == sizeof(pool)) {
        if (util_getrandom(pool, sizeof(pool)) != 0) {
            return -1;
        }
        used = 0;
    }
    memcpy(raw, pool + used, sizeof(raw));
    memset(pool + used, 0, sizeof(raw));
    used += sizeof(raw);
    for (i = 0; i < sizeof(raw); i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 0x0f];
    }
    out[UTIL_TOKEN_HEX] = '\0';
    return 0;
}

/* xorshift64*: fast, and good enough to spread retries apart. */
int64_t
util_random(int64_t max)
{
    static uint64_t state;
    static bool seeded;

    if (max <= 0) {
        return 0;
    }
    if (!seeded) {
        if (util_getrandom(&state, sizeof(state)) != 0 || state == 0) {
            state = (uint64_t)util_now_us() | 1;
        }
        seeded = true;
    }
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return (int64_t)((state * UINT64_C(2685821657736338717)) % ((uint64_t)max + 1));
}

bool
util_printable_word(const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++) {
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e) {
            return false;
        }
    }
    return len > 0;
}

bool
util_equal_secret(const char *a, size_t alen, const char *b, size_t blen)
{
    volatile unsigned char diff = (unsigned char)(alen != blen);
    size_t i;

    for (i = 0; i < blen; i++) {
        /* Past a's end, compare with b itself: equal, but not skipped. */
        unsigned char x = (unsigned char)(i < alen ? a[i] : b[i]);

        diff |= (unsigned char)(x ^ (unsigned char)b[i]);
    }
    return diff == 0;
}

char *
util_clock_after(int64_t ms, char *buf, size_t size)
{
    time_t wall = time(NULL) + (time_t)((ms + 999) / 1000);
    struct tm tm;

    if (localtime_r(&wall, &tm) == NULL || strftime(buf, size, "%H:%M:%S", &tm) == 0) {
        snprintf(buf, size, "?");
    }
    return buf;
}

int64_t
util_gcra_wait(int64_t tat_us, int64_t now_us, int64_t interval_us, int64_t burst)
{
    int64_t ahead = tat_us - now_us, allowed = (burst - 1) * interval_us;

    return ahead > allowed ? ahead - allowed : 0;
}

void
util_gcra_take(int64_t *tat_us, int64_t now_us, int64_t interval_us)
{
    if (*tat_us < now_us) {
        *tat_us = now_us;
    }
    *tat_us += interval_us;
}
