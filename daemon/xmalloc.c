/*
 * xmalloc.c: allocation that cannot fail (see xmalloc.h for why the daemon
 * aborts rather than recovers).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/xmalloc.h"

/*
 * Write "error out of memory: ..." as log.c writes an error line (this
 * module stands below log.c, so that every module may use it), with one
 * write(2) from a buffer on the stack, and abort.
 */
static void __attribute__((noreturn))
xmalloc_abort(const char *what, const char *fn, size_t n, size_t size)
{
    char line[256];
    int len;

    if (fn != NULL) {
        len = snprintf(line, sizeof(line), "error out of memory: %s of %zu x %zu bytes; "
                       "stopping (leases end by their ttl on the masters)\n", fn, n, size);
    } else {
        len = snprintf(line, sizeof(line), "error out of memory: %s; "
                       "stopping (leases end by their ttl on the masters)\n", what);
    }
    if (len > 0) {
        (void)!write(STDERR_FILENO, line, (size_t)len < sizeof(line) ? (size_t)len
                                                                     : sizeof(line) - 1);
    }
    abort();
}

void
xmalloc_fail(const char *what)
{
    xmalloc_abort(what, NULL, 0, 0);
}

/* The size asked for goes in the line: it tells a leak from one absurd request. */
static void __attribute__((noreturn))
xmalloc_fail_size(const char *fn, size_t n, size_t size)
{
    xmalloc_abort(NULL, fn, n, size);
}

void *
xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);

    if (p == NULL) {
        xmalloc_fail_size("malloc", 1, size);
    }
    return p;
}

void *
xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);

    if (p == NULL) {
        xmalloc_fail_size("calloc", n, size);
    }
    return p;
}

void *
xreallocarray(void *p, size_t n, size_t size)
{
    void *q;

    if (size != 0 && n > SIZE_MAX / size) {
        xmalloc_fail_size("reallocarray (overflow)", n, size);
    }
    q = realloc(p, n * size != 0 ? n * size : 1);
    if (q == NULL) {
        xmalloc_fail_size("realloc", n, size);
    }
    return q;
}

char *
xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *
xstrndup(const char *s, size_t len)
{
    char *p = xmalloc(len + 1);

    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}
