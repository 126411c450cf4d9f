/*
 * xmalloc.h: allocation that cannot fail, the daemon's one policy for
 * running out of memory.
 *
 * When malloc(3) fails, redlockd writes one log line naming what it was
 * allocating and how much, and aborts.  A dead daemon is a failure the
 * Redlock model already covers: every lease it granted ends by its ttl on
 * the masters, and its session clients see their connection close, which
 * says their holds are gone.  Recovering instead would mean a path per
 * allocation site that no test runs; a daemon that half-recovers (a grant
 * counted but not answered, a waiter queued but not timed) is worse than
 * one that stops.  So callers never check these for NULL.
 *
 * The same rule covers libraries that allocate for us (libevent's
 * evbuffers and events, hiredis's command formatter): their failure is
 * reported through xmalloc_fail().
 */
#ifndef REDLOCKD_XMALLOC_H
#define REDLOCKD_XMALLOC_H

#include <stddef.h>

/* malloc(3) of size bytes (at least 1); never NULL.  The caller frees. */
void *xmalloc(size_t size);

/* calloc(3) of n objects of size bytes, zeroed; never NULL (n * size
 * overflowing aborts as well).  The caller frees. */
void *xcalloc(size_t n, size_t size);

/* realloc(3) of p to n objects of size bytes (overflow aborts); never
 * NULL.  p may be NULL; on success p must not be used again. */
void *xreallocarray(void *p, size_t n, size_t size);

/* strdup(3); never NULL.  The caller frees. */
char *xstrdup(const char *s);

/* A copy of len bytes of s plus a NUL; never NULL.  The caller frees. */
char *xstrndup(const char *s, size_t len);

/*
 * For a library's allocation that failed (evbuffer_add, event_new,
 * redisFormatCommand returning -1 or NULL): logs "out of memory: what"
 * and aborts.  what: a short phrase, e.g. "a client's reply".
 */
void xmalloc_fail(const char *what) __attribute__((noreturn));

#endif /* REDLOCKD_XMALLOC_H */
