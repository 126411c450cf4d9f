/*
 * client.c: the client side of the redlockd line protocol (see
 * client.h): connect, start TLS, send a line, read a line with a
 * deadline, and pick a reply line apart.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/un.h>

#include <arpa/inet.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "client/client.h"

#define CLIENT_FIELD_DIGITS 18      /* client_field_int: fits int64_t whatever the digits */

/*
 * One TLS connection (client_start_tls()): OpenSSL's objects over the
 * client's socket.  Owned by its struct client (c->tls), freed by
 * client_close().
 */
struct client_tls {
    SSL        *ssl;            /* the connection (it holds its SSL_CTX) */
    BIO_METHOD *method;         /* the BIO type over fd (client_tls_bio_*); outlives ssl */
    int         fd;             /* the socket, c->fd */
    int         sys_err;        /* errno of the BIO's last failed send or recv, 0: none */
    bool        cert_asked;     /* the server asked for a client certificate; none given */
    bool        want_write;     /* the last read needs the socket writable first */
};

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
    c->tls = NULL;
    c->heard = false;
    c->inlen = 0;
    c->line_len = 0;
    c->line[0] = '\0';
    c->err[0] = '\0';
}

void
client_close(struct client *c)
{
    struct client_tls *t = c->tls;

    if (t != NULL) {
        /* close_notify when it fits in the socket at once; no waiting for the peer's. */
        if (t->ssl != NULL && SSL_is_init_finished(t->ssl)) {
            SSL_shutdown(t->ssl);
        }
        SSL_free(t->ssl);
        BIO_meth_free(t->method);
        ERR_clear_error();
        free(t);
        c->tls = NULL;
    }
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

/* ---- TLS ---- */

/*
 * The BIO under every TLS connection: send(2) and recv(2) on the socket
 * without waiting (MSG_DONTWAIT, so the descriptor may stay blocking)
 * and without SIGPIPE (MSG_NOSIGNAL); the waiting is done in poll(2).
 */
static int
client_tls_bio_write(BIO *b, const char *buf, int len)
{
    struct client_tls *t = BIO_get_data(b);
    ssize_t n;

    BIO_clear_retry_flags(b);
    n = send(t->fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        BIO_set_retry_write(b);
    } else if (n < 0) {
        t->sys_err = errno;
    }
    return (int)n;
}

static int
client_tls_bio_read(BIO *b, char *buf, int len)
{
    struct client_tls *t = BIO_get_data(b);
    ssize_t n;

    BIO_clear_retry_flags(b);
    n = recv(t->fd, buf, (size_t)len, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        BIO_set_retry_read(b);
    } else if (n < 0) {
        t->sys_err = errno;
    }
    return (int)n;
}

static long
client_tls_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b;
    (void)num;
    (void)ptr;
    /* Nothing is buffered here: a flush is done at once; nothing else is known. */
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

/*
 * Why an OpenSSL call on c failed (ssl_err from SSL_get_error(), or
 * SSL_ERROR_SSL for a setup call): c->err is "<what>: <reason>" and the
 * error queue is cleared.  Returns the errno that goes with it.
 */
static int
client_tls_reason(struct client *c, const char *what, int ssl_err)
{
    unsigned long e = ERR_peek_last_error();
    const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;
    int err = EPROTO;
    long vr;
    const char *hint = "";

    if (e != 0 && ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) == SSL_R_WRONG_VERSION_NUMBER) {
        hint = " (this port does not speak TLS: the plain port is another one)";
    } else if (c->tls != NULL && c->tls->cert_asked) {
        hint = " (the server requires a client certificate, and none was given)";
    }

    if (ssl_err == SSL_ERROR_SYSCALL && c->tls != NULL && c->tls->sys_err != 0) {
        err = c->tls->sys_err;
        client_fail(c, err, "%s: %s%s", what, strerror(err), hint);
    } else if (ssl_err == SSL_ERROR_SYSCALL || ssl_err == SSL_ERROR_ZERO_RETURN) {
        err = ECONNRESET;
        client_fail(c, err, "%s: the server closed the connection%s", what, hint);
    } else if (e != 0 && ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED
               && c->tls != NULL
               && (vr = SSL_get_verify_result(c->tls->ssl)) != X509_V_OK) {
        client_fail(c, err, "%s: %s: %s%s", what, reason, X509_verify_cert_error_string(vr),
                    hint);
    } else if (reason != NULL) {
        client_fail(c, err, "%s: %s%s", what, reason, hint);
    } else {
        client_fail(c, err, "%s: OpenSSL error %lu%s", what, e, hint);
    }
    ERR_clear_error();
    return err;
}

/*
 * OpenSSL calls this when the server asks for a client certificate and
 * none is set: remember it, for the hint of a failure that follows; send
 * none (0).
 */
static int
client_tls_no_cert(SSL *ssl, X509 **x509, EVP_PKEY **pkey)
{
    struct client_tls *t = SSL_get_app_data(ssl);

    (void)x509;
    (void)pkey;
    if (t != NULL) {
        t->cert_asked = true;
    }
    return 0;
}

/* Can path be opened for reading?  0, or -1 with c->err "<path>: <strerror>" and errno. */
static int
client_tls_readable(struct client *c, const char *path)
{
    FILE *f = fopen(path, "re");

    if (f == NULL) {
        client_fail(c, errno, "%s: %s", path, strerror(errno));
        return -1;
    }
    fclose(f);
    return 0;
}

/* The context of one connection: versions, verification, files.  0, or -1 with c->err. */
static int
client_tls_setup(struct client *c, SSL_CTX *ctx, const struct client_tls_opts *opts)
{
    const char *ca = opts != NULL ? opts->ca_file : NULL;
    const char *cert = opts != NULL ? opts->cert_file : NULL;
    const char *key = opts != NULL ? opts->key_file : NULL;

    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
        errno = client_tls_reason(c, "TLS", SSL_ERROR_SSL);
        return -1;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    /* A peer that closes without close_notify is the end of the stream, as in plain TCP. */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
    if (ca != NULL) {
        if (client_tls_readable(c, ca) != 0) {
            return -1;
        }
        if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
            errno = client_tls_reason(c, ca, SSL_ERROR_SSL);
            return -1;
        }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        errno = client_tls_reason(c, "the system's CA store", SSL_ERROR_SSL);
        return -1;
    }
    if ((cert == NULL) != (key == NULL)) {
        client_fail(c, EINVAL, "a client certificate needs its key, and a key its certificate");
        return -1;
    }
    if (cert == NULL) {
        SSL_CTX_set_client_cert_cb(ctx, client_tls_no_cert);
        return 0;
    }
    if (client_tls_readable(c, cert) != 0 || client_tls_readable(c, key) != 0) {
        return -1;
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        errno = client_tls_reason(c, cert, SSL_ERROR_SSL);
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1
        || SSL_CTX_check_private_key(ctx) != 1) {
        errno = client_tls_reason(c, key, SSL_ERROR_SSL);
        return -1;
    }
    return 0;
}

/*
 * Wait until fd has events, or (with wakeup) c->wakeup is readable, or
 * deadline.  0 when fd is ready, -1 with errno (EINTR: the wakeup,
 * ETIMEDOUT).
 */
static int
client_tls_wait(struct client *c, short events, bool wakeup, int64_t deadline)
{
    struct pollfd pfd[2];
    nfds_t n = 1;
    int rc;

    pfd[0].fd = c->fd;
    pfd[0].events = events;
    pfd[0].revents = 0;
    if (wakeup && c->wakeup >= 0) {
        pfd[1].fd = c->wakeup;
        pfd[1].events = POLLIN;
        pfd[1].revents = 0;
        n = 2;
    }
    for (;;) {
        rc = poll(pfd, n, client_timeout(deadline));
        if (rc < 0 && errno == EINTR && !wakeup) {
            continue;
        }
        if (rc < 0) {
            return -1;
        }
        if (rc == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (n == 2 && (pfd[1].revents & POLLIN)) {
            errno = EINTR;
            return -1;
        }
        return 0;
    }
}

/* Tell OpenSSL which name or address the server's certificate must carry.  0 or -1. */
static int
client_tls_name(SSL *ssl, const char *host)
{
    unsigned char ip[sizeof(struct in6_addr)];

    if (inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1) {
        return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1 ? 0 : -1;
    }
    return SSL_set_tlsext_host_name(ssl, host) == 1 && SSL_set1_host(ssl, host) == 1 ? 0 : -1;
}

int
client_start_tls(struct client *c, const char *host, const struct client_tls_opts *opts,
                 int64_t deadline)
{
    struct client_tls *t;
    SSL_CTX *ctx;
    BIO *bio;
    int rc, err;

    if (c->fd < 0) {
        client_fail(c, ENOTCONN, "%s", strerror(ENOTCONN));
        return -1;
    }
    if (c->tls != NULL) {
        client_fail(c, EISCONN, "TLS is on already");
        return -1;
    }
    ERR_clear_error();
    ctx = SSL_CTX_new(TLS_client_method());
    t = calloc(1, sizeof(*t));
    if (ctx == NULL || t == NULL) {
        err = ENOMEM;
        client_fail(c, err, "TLS: %s", strerror(err));
        goto fail;
    }
    if (client_tls_setup(c, ctx, opts) != 0) {
        err = errno;
        goto fail;
    }
    t->fd = c->fd;
    t->method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "redlockd client");
    t->ssl = SSL_new(ctx);
    bio = t->method != NULL ? BIO_new(t->method) : NULL;
    if (t->method == NULL || t->ssl == NULL || bio == NULL
        || BIO_meth_set_write(t->method, client_tls_bio_write) != 1
        || BIO_meth_set_read(t->method, client_tls_bio_read) != 1
        || BIO_meth_set_ctrl(t->method, client_tls_bio_ctrl) != 1) {
        BIO_free(bio);
        err = client_tls_reason(c, "TLS", SSL_ERROR_SSL);
        goto fail;
    }
    SSL_set_app_data(t->ssl, t);
    BIO_set_data(bio, t);
    BIO_set_init(bio, 1);
    SSL_set_bio(t->ssl, bio, bio);
    SSL_CTX_free(ctx);
    ctx = NULL;
    c->tls = t;
    t = NULL;
    if (client_tls_name(c->tls->ssl, host) != 0) {
        err = EINVAL;
        client_fail(c, err, "TLS: '%s' is not a host name or address", host);
        goto fail;
    }
    for (;;) {
        ERR_clear_error();
        c->tls->sys_err = 0;
        rc = SSL_connect(c->tls->ssl);
        if (rc == 1) {
            return 0;
        }
        rc = SSL_get_error(c->tls->ssl, rc);
        if (rc != SSL_ERROR_WANT_READ && rc != SSL_ERROR_WANT_WRITE) {
            err = client_tls_reason(c, "TLS handshake", rc);
            goto fail;
        }
        if (client_tls_wait(c, rc == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, true,
                            deadline) != 0) {
            err = errno;
            client_fail(c, err, "TLS handshake: %s", err == ETIMEDOUT ? "no answer in time"
                        : err == EINTR ? "interrupted" : strerror(err));
            goto fail;
        }
    }

fail:
    if (t != NULL) {
        SSL_free(t->ssl);
        BIO_meth_free(t->method);
        free(t);
    }
    SSL_CTX_free(ctx);
    client_close(c);
    errno = err;
    return -1;
}

/* client_write() over TLS: SSL_write() until all of buf is taken, waiting in poll(2). */
static int
client_tls_write(struct client *c, const char *p, size_t len, int64_t deadline)
{
    int n, rc;

    while (len > 0) {
        ERR_clear_error();
        c->tls->sys_err = 0;
        /* A retry passes the same buffer and length, as OpenSSL requires. */
        n = SSL_write(c->tls->ssl, p, len > INT_MAX ? INT_MAX : (int)len);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        rc = SSL_get_error(c->tls->ssl, n);
        if (rc != SSL_ERROR_WANT_READ && rc != SSL_ERROR_WANT_WRITE) {
            client_tls_reason(c, "TLS", rc);
            return -1;
        }
        if (client_tls_wait(c, rc == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, false,
                            deadline) != 0) {
            client_fail(c, errno, "%s", strerror(errno));
            return -1;
        }
    }
    return 0;
}

/*
 * client_fill() over TLS: >0 bytes, 0 at the end of the stream, -1
 * with errno EAGAIN (nothing yet; c->tls->want_write when the socket
 * must be writable first) or another errno and c->err.
 */
static ssize_t
client_tls_fill(struct client *c, char *at, size_t room)
{
    struct client_tls *t = c->tls;
    int len = room > INT_MAX ? INT_MAX : (int)room;
    char *lf;
    int n, rc;

    t->want_write = false;
    t->sys_err = 0;
    ERR_clear_error();
    n = (c->flags & CLIENT_EXACT) ? SSL_peek(t->ssl, at, len) : SSL_read(t->ssl, at, len);
    if (n > 0 && (c->flags & CLIENT_EXACT)) {
        lf = memchr(at, '\n', (size_t)n);
        if (lf != NULL) {
            n = (int)(lf - at + 1);
        }
        /* The bytes peeked are decrypted already: this read takes them, no more. */
        n = SSL_read(t->ssl, at, n);
    }
    if (n > 0) {
        return n;
    }
    rc = SSL_get_error(t->ssl, n);
    switch (rc) {
    case SSL_ERROR_WANT_READ:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        t->want_write = true;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        if (t->sys_err == 0) {
            return 0;
        }
        break;
    default:
        break;
    }
    errno = client_tls_reason(c, "TLS", rc);
    return -1;
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
    if (c->tls != NULL) {
        return client_tls_write(c, p, len, deadline);
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
 * past the first LF.  >0 bytes, 0 at end of stream, -1 with errno (and,
 * over TLS, c->err unless EAGAIN).
 */
static ssize_t
client_fill(struct client *c)
{
    size_t room = sizeof(c->in) - c->inlen;
    char *at = c->in + c->inlen;
    ssize_t n;
    char *lf;

    if (c->tls != NULL) {
        return client_tls_fill(c, at, room);
    }
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
    bool have, pending;
    ssize_t n;
    int rc, nfds;

    if (c->fd < 0 && c->wakeup < 0) {
        client_fail(c, ENOTCONN, "not connected");
        return CLIENT_ERROR;
    }
    for (;;) {
        have = memchr(c->in, '\n', c->inlen) != NULL;
        /* TLS may hold decrypted bytes that poll(2) cannot see. */
        pending = !have && c->tls != NULL && SSL_pending(c->tls->ssl) > 0;
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
            if (c->tls != NULL && c->tls->want_write) {
                pfd[nfds].events |= POLLOUT;
            }
            pfd[nfds++].revents = 0;
        }
        rc = poll(pfd, (nfds_t)nfds, have || pending ? 0 : client_timeout(deadline));
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
        if (rc == 0 && !pending) {
            client_fail(c, ETIMEDOUT, "no line within the deadline");
            return CLIENT_TIMEOUT;
        }
        if (!pending
            && (c->fd < 0 || !(pfd[nfds - 1].revents & (POLLIN | POLLOUT | POLLHUP | POLLERR)))) {
            continue;
        }
        n = client_fill(c);
        if (n > 0) {
            c->inlen += (size_t)n;
            c->heard = true;
            if (c->inlen == sizeof(c->in) && memchr(c->in, '\n', c->inlen) == NULL) {
                client_fail(c, EMSGSIZE, "a reply line longer than %d bytes", CLIENT_LINE_MAX);
                return CLIENT_ERROR;
            }
        } else if (n == 0) {
            c->inlen = 0;
            client_fail(c, 0, "redlockd closed the connection%s", !c->heard && c->tls == NULL
                        ? " before any reply (a TLS port closes connections without TLS)" : "");
            return CLIENT_EOF;
        } else if (errno == EINTR) {
            client_fail(c, EINTR, "interrupted");
            return CLIENT_INTR;
        } else if (errno != EAGAIN) {
            if (c->tls == NULL) {
                client_fail(c, errno, "%s", strerror(errno));
            }
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
