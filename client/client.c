/*
 * client.c: the client side of the redlockd line protocol (see
 * client.h): connect, send a line, read a line with a deadline, and
 * pick a reply line apart.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/un.h>

#include "client/client.h"

#define CLIENT_FIELD_DIGITS 18      /* client_field_int: fits int64_t whatever the digits */

static void client_fail(struct client *c, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- small helpers ---- */

int64_t
client_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A poll(2) timeout for deadline (-1: none). */
static int
client_timeout(int64_t deadline)
{
    int64_t left;

    if (deadline < 0) {
        return -1;
    }
    left = deadline - client_now_ms();
    if (left < 0) {
        return 0;
    }
    return left > INT_MAX ? INT_MAX : (int)left;
}

/* Put a message in c->err and err in errno. */
static void
client_fail(struct client *c, int err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(c->err, sizeof(c->err), fmt, ap);
    va_end(ap);
    errno = err;
}

void
client_init(struct client *c, int fd, unsigned flags)
{
    c->fd = fd;
    c->wakeup = -1;
    c->flags = flags;
    c->inlen = 0;
    c->line_len = 0;
    c->line[0] = '\0';
    c->err[0] = '\0';
}

void
client_close(struct client *c)
{
    if (c->fd >= 0) {
        close(c->fd);
    }
    c->fd = -1;
    c->inlen = 0;
}

/* ---- connecting ---- */

/*
 * Wait until the non-blocking connect on fd has finished, c->wakeup is
 * readable or deadline passed.  0, or -1 with errno.
 */
static int
client_connect_wait(struct client *c, int fd, int64_t deadline)
{
    struct pollfd pfd[2];
    socklen_t len = sizeof(int);
    int err = 0, rc;

    for (;;) {
        pfd[0].fd = fd;
        pfd[0].events = POLLOUT;
        pfd[0].revents = 0;
        pfd[1].fd = c->wakeup;
        pfd[1].events = POLLIN;
        pfd[1].revents = 0;
        rc = poll(pfd, c->wakeup >= 0 ? 2 : 1, client_timeout(deadline));
        if (rc < 0) {
            return -1;
        }
        if (rc > 0 && (pfd[1].revents & POLLIN)) {
            errno = EINTR;
            return -1;
        }
        if (rc > 0 && (pfd[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
                return -1;
            }
            errno = err;
            return err != 0 ? -1 : 0;
        }
        if (rc == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
    }
}

/*
 * Connect a new non-blocking socket to sa before deadline and make it
 * blocking.  The descriptor, or -1 with errno.
 */
static int
client_connect_sa(struct client *c, int family, int type, int protocol,
                  const struct sockaddr *sa, socklen_t salen, int64_t deadline)
{
    int fd, err, fl;

    fd = socket(family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, protocol);
    if (fd < 0) {
        return -1;
    }
    if ((connect(fd, sa, salen) != 0
         && (errno != EINPROGRESS || client_connect_wait(c, fd, deadline) != 0))
        || (fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

int
client_connect_unix(struct client *c, const char *path, int64_t deadline)
{
    struct sockaddr_un sa;
    int fd;

    client_close(c);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sa.sun_path)) {
        client_fail(c, ENAMETOOLONG, "%s: path too long", path);
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = client_connect_sa(c, AF_UNIX, SOCK_STREAM, 0, (struct sockaddr *)&sa, sizeof(sa),
                           deadline);
    if (fd < 0) {
        client_fail(c, errno, "%s: %s", path,
                    errno == EAGAIN ? "the daemon's backlog is full" : strerror(errno));
        return -1;
    }
    c->fd = fd;
    return 0;
}

int
client_connect_tcp(struct client *c, const char *addr, int64_t deadline)
{
    struct addrinfo hints, *res, *ai;
    char host[256], port[8];
    int fd = -1, rc;

    client_close(c);
    if (client_split_addr(addr, host, sizeof(host), port, sizeof(port)) != 0) {
        client_fail(c, EINVAL, "%s: not HOST:PORT", addr);
        return -1;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        client_fail(c, rc == EAI_SYSTEM ? errno : EHOSTUNREACH, "%s: %s", addr,
                    gai_strerror(rc));
        return -1;
    }
    client_fail(c, EADDRNOTAVAIL, "%s: no address", addr);
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        fd = client_connect_sa(c, ai->ai_family, ai->ai_socktype, ai->ai_protocol, ai->ai_addr,
                               ai->ai_addrlen, deadline);
        if (fd >= 0) {
            break;
        }
        client_fail(c, errno, "%s: %s", addr, strerror(errno));
        if (errno == EINTR || errno == ETIMEDOUT) {
            break;
        }
    }
    rc = errno;
    freeaddrinfo(res);
    if (fd < 0) {
        errno = rc;
        return -1;
    }
    c->fd = fd;
    return 0;
}

/* ---- sending ---- */

int
client_write(struct client *c, const void *buf, size_t len, int64_t deadline)
{
    const char *p = buf;
    struct pollfd pfd;
    ssize_t n;
    int rc;

    if (c->fd < 0) {
        client_fail(c, ENOTCONN, "%s", strerror(ENOTCONN));
        return -1;
    }
    while (len > 0) {
        n = send(c->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno != EAGAIN) {
            client_fail(c, errno, "%s", strerror(errno));
            return -1;
        }
        pfd.fd = c->fd;
        pfd.events = POLLOUT;
        pfd.revents = 0;
        rc = poll(&pfd, 1, client_timeout(deadline));
        if (rc == 0) {
            client_fail(c, ETIMEDOUT, "%s", strerror(ETIMEDOUT));
            return -1;
        }
        if (rc < 0 && errno != EINTR) {
            client_fail(c, errno, "poll: %s", strerror(errno));
            return -1;
        }
    }
    return 0;
}

int
client_send(struct client *c, const char *line, int64_t deadline)
{
    size_t len = strlen(line);
    char stack[CLIENT_LINE_MAX + 1], *buf = stack;
    int rc;

    /* One buffer, so that the line and its LF go out in one write. */
    if (len + 1 > sizeof(stack)) {
        buf = malloc(len + 1);
        if (buf == NULL) {
            client_fail(c, ENOMEM, "%s", strerror(ENOMEM));
            return -1;
        }
    }
    memcpy(buf, line, len);
    buf[len] = '\n';
    rc = client_write(c, buf, len + 1, deadline);
    if (buf != stack) {
        free(buf);
    }
    return rc;
}

/* ---- reading ---- */

/* Move the first complete line of c->in into c->line.  True when there was one. */
static bool
client_take(struct client *c)
{
    char *lf = memchr(c->in, '\n', c->inlen);
    size_t len;

    if (lf == NULL) {
        return false;
    }
    len = (size_t)(lf - c->in);
    memcpy(c->line, c->in, len);
    if (len > 0 && c->line[len - 1] == '\r' && !(c->flags & CLIENT_KEEP_CR)) {
        len--;
    }
    c->line[len] = '\0';
    c->line_len = len;
    c->inlen -= (size_t)(lf + 1 - c->in);
    memmove(c->in, lf + 1, c->inlen);
    return true;
}

/*
 * Receive what the socket has into c->in; with CLIENT_EXACT, no byte
 * past the first LF.  >0 bytes, 0 at end of stream, -1 with errno.
 */
static ssize_t
client_fill(struct client *c)
{
    size_t room = sizeof(c->in) - c->inlen;
    char *at = c->in + c->inlen;
    ssize_t n;
    char *lf;

    if (!(c->flags & CLIENT_EXACT)) {
        return recv(c->fd, at, room, MSG_DONTWAIT);
    }
    n = recv(c->fd, at, room, MSG_PEEK | MSG_DONTWAIT);
    if (n <= 0) {
        return n;
    }
    lf = memchr(at, '\n', (size_t)n);
    if (lf != NULL) {
        n = lf - at + 1;
    }
    return recv(c->fd, at, (size_t)n, MSG_DONTWAIT);
}

enum client_read
client_read_line(struct client *c, int64_t deadline)
{
    struct pollfd pfd[2];
    bool have;
    ssize_t n;
    int rc, nfds;

    if (c->fd < 0 && c->wakeup < 0) {
        client_fail(c, ENOTCONN, "not connected");
        return CLIENT_ERROR;
    }
    for (;;) {
        have = memchr(c->in, '\n', c->inlen) != NULL;
        nfds = 0;
        if (c->wakeup >= 0) {
            pfd[nfds].fd = c->wakeup;
            pfd[nfds].events = POLLIN;
            pfd[nfds++].revents = 0;
        } else if (have) {
            client_take(c);
            return CLIENT_LINE;
        }
        if (!have && c->fd >= 0) {
            pfd[nfds].fd = c->fd;
            pfd[nfds].events = POLLIN;
            pfd[nfds++].revents = 0;
        }
        rc = poll(pfd, (nfds_t)nfds, have ? 0 : client_timeout(deadline));
        if (rc < 0) {
            if (errno == EINTR) {
                client_fail(c, EINTR, "interrupted");
                return CLIENT_INTR;
            }
            client_fail(c, errno, "poll: %s", strerror(errno));
            return CLIENT_ERROR;
        }
        if (c->wakeup >= 0 && (pfd[0].revents & POLLIN)) {
            client_fail(c, EINTR, "interrupted");
            return CLIENT_INTR;
        }
        if (have) {
            client_take(c);
            return CLIENT_LINE;
        }
        if (rc == 0) {
            client_fail(c, ETIMEDOUT, "no line within the deadline");
            return CLIENT_TIMEOUT;
        }
        if (c->fd < 0 || !(pfd[nfds - 1].revents & (POLLIN | POLLHUP | POLLERR))) {
            continue;
        }
        n = client_fill(c);
        if (n > 0) {
            c->inlen += (size_t)n;
            if (c->inlen == sizeof(c->in) && memchr(c->in, '\n', c->inlen) == NULL) {
                client_fail(c, EMSGSIZE, "a reply line longer than %d bytes", CLIENT_LINE_MAX);
                return CLIENT_ERROR;
            }
        } else if (n == 0) {
            c->inlen = 0;
            client_fail(c, 0, "redlockd closed the connection");
            return CLIENT_EOF;
        } else if (errno == EINTR) {
            client_fail(c, EINTR, "interrupted");
            return CLIENT_INTR;
        } else if (errno != EAGAIN) {
            client_fail(c, errno, "%s", strerror(errno));
            return CLIENT_ERROR;
        }
    }
}

/* ---- parsing one line ---- */

bool
client_is_push(const char *line)
{
    return line != NULL && line[0] == '!';
}

bool
client_is_status(const char *line, const char *status)
{
    size_t len = strlen(status);

    return line != NULL && strncmp(line, status, len) == 0
           && (line[len] == ' ' || line[len] == '\0');
}

bool
client_is_reply(const char *line, const char *status, const char *name)
{
    size_t slen = strlen(status), nlen = strlen(name);

    return line != NULL && strncmp(line, status, slen) == 0 && line[slen] == ' '
           && strncmp(line + slen + 1, name, nlen) == 0
           && (line[slen + 1 + nlen] == ' ' || line[slen + 1 + nlen] == '\0');
}

bool
client_is_err(const char *line, const char *code)
{
    return client_is_status(line, "ERR") && line[3] == ' ' && client_is_status(line + 4, code);
}

const char *
client_err_text(const char *line)
{
    const char *sp;

    if (!client_is_status(line, "ERR") || line[3] == '\0') {
        return line;
    }
    sp = strchr(line + 4, ' ');
    return sp != NULL ? sp + 1 : line + strlen(line);
}

bool
client_field(const char *line, const char *key, char *out, size_t size)
{
    size_t klen = strlen(key), wlen;
    const char *p = line, *end;
    int word;

    if (line != NULL && strncmp(line, "! ", 2) == 0) {
        p = line + 2;
    }
    for (word = 0; p != NULL && *p != '\0'; word++) {
        end = strchr(p, ' ');
        wlen = end != NULL ? (size_t)(end - p) : strlen(p);
        if (word >= 2 && wlen > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            wlen -= klen + 1;
            if (wlen + 1 > size) {
                return false;
            }
            memcpy(out, p + klen + 1, wlen);
            out[wlen] = '\0';
            return true;
        }
        p = end != NULL ? end + 1 : NULL;
    }
    return false;
}

bool
client_field_int(const char *line, const char *key, int64_t *value)
{
    char buf[CLIENT_FIELD_DIGITS + 2];
    const char *d;
    int64_t v = 0;

    if (!client_field(line, key, buf, sizeof(buf))) {
        return false;
    }
    d = buf[0] == '-' ? buf + 1 : buf;
    if (*d == '\0' || strlen(d) > CLIENT_FIELD_DIGITS) {
        return false;
    }
    for (; *d != '\0'; d++) {
        if (*d < '0' || *d > '9') {
            return false;
        }
        v = v * 10 + (*d - '0');
    }
    *value = buf[0] == '-' ? -v : v;
    return true;
}

bool
client_word_ok(const char *s, size_t max)
{
    size_t n;

    for (n = 0; s[n] != '\0'; n++) {
        if ((unsigned char)s[n] < 0x21 || (unsigned char)s[n] > 0x7e) {
            return false;
        }
    }
    return n >= 1 && n <= max;
}

int
client_split_addr(const char *addr, char *host, size_t hsize, char *port, size_t psize)
{
    const char *colon, *h = addr, *d;
    size_t hlen, plen;
    long p = 0;

    if (addr[0] == '[') {
        const char *close = strchr(addr, ']');

        if (close == NULL || close[1] != ':') {
            return -1;
        }
        h = addr + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strchr(addr, ':');
        if (colon == NULL || strchr(colon + 1, ':') != NULL) {
            return -1;
        }
        hlen = (size_t)(colon - addr);
    }
    plen = strlen(colon + 1);
    for (d = colon + 1; *d >= '0' && *d <= '9' && p <= 65535; d++) {
        p = p * 10 + (*d - '0');
    }
    if (hlen == 0 || hlen >= hsize || plen == 0 || *d != '\0' || p == 0 || p > 65535
        || plen >= psize) {
        return -1;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    memcpy(port, colon + 1, plen + 1);
    return 0;
}
