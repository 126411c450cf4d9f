/*
 * client.h: the client side of the redlockd line protocol
 * (proto/PROTOCOL.md), for every program that talks to the daemon:
 * redlockctl, the test harness, the fault suite's rmw-client and the
 * bench (which uses the parsing functions only).
 *
 * Plain blocking C around poll(2): no libevent, no hiredis, no global
 * state, nothing allocated on the heap (except a send buffer for a
 * line longer than CLIENT_LINE_MAX, freed before the call returns, and
 * a TLS connection's state, from client_start_tls() to client_close()).
 * TLS is OpenSSL's, over the same poll(2) loop, deadlines and wakeup
 * descriptor; a connection without it costs what it always did (one
 * pointer test per call).
 *
 * Conventions:
 *   - Times are milliseconds.  A deadline is an absolute time on
 *     CLOCK_MONOTONIC, as client_now_ms() tells it; -1 means none.
 *   - Functions that can fail return 0 / -1 (client_read_line(): an
 *     enum client_read) and leave a message for people in c->err and
 *     the cause in errno.
 *   - struct client is the caller's (on the stack, static or inside its
 *     own struct); the library keeps no pointer to it between calls.
 *     Once it carries TLS (c->tls), it must not be copied: the copy
 *     would share the TLS state.
 *     Its descriptor belongs to the caller too: only client_close()
 *     closes it.
 *   - The parsing functions work on one line as a NUL-terminated string
 *     without its LF; they never write to it, and a NULL line is false.
 */
#ifndef REDLOCKD_CLIENT_H
#define REDLOCKD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Longest line client_read_line() returns, bytes without the LF: twice
 * the longest reply line the protocol allows (2048 with its LF), so a
 * reply is never cut; a longer line is an error.
 */
#define CLIENT_LINE_MAX     4096
#define CLIENT_ERR_MAX      512     /* room for a message in c->err, with NUL */

/* Flags of client_init(). */
#define CLIENT_EXACT        0x1     /* read no byte past a line's LF (MSG_PEEK), so that
                                       others may read the same socket between two lines */
#define CLIENT_KEEP_CR      0x2     /* keep a CR before the LF (default: dropped) */

/* OpenSSL's state of one TLS connection (client.c); NULL in plain connections. */
struct client_tls;

/* What client_start_tls() verifies and presents.  Strings are the caller's. */
struct client_tls_opts {
    const char *ca_file;    /* PEM file of the CAs the server's certificate must chain to;
                               NULL: the system store */
    const char *cert_file;  /* PEM client certificate (and its chain) to present, or NULL */
    const char *key_file;   /* the private key of cert_file; both or neither */
};

/* What client_read_line() saw. */
enum client_read {
    CLIENT_LINE,        /* c->line holds the next line (replies and pushes alike) */
    CLIENT_TIMEOUT,     /* the deadline passed (errno ETIMEDOUT); a partial line is kept */
    CLIENT_INTR,        /* a signal interrupted the wait (EINTR), or c->wakeup is readable */
    CLIENT_EOF,         /* the peer closed the connection (errno 0) */
    CLIENT_ERROR        /* recv failed, a line was longer than CLIENT_LINE_MAX (EMSGSIZE),
                           or there is no connection; c->err says which */
};

/*
 * One connection to the daemon and the bytes read from it.  Owned by
 * the caller; set up with client_init(), then the members are read
 * freely, and written only by this module (except wakeup).
 */
struct client {
    int         fd;                         /* the socket, -1 when none */
    int         wakeup;                     /* a descriptor that ends a wait when readable
                                               (a signalfd, a pipe), -1 when none; the
                                               caller's to set and to drain */
    unsigned    flags;                      /* CLIENT_EXACT, CLIENT_KEEP_CR */
    struct client_tls *tls;                 /* TLS on fd (client_start_tls()), or NULL;
                                               freed by client_close() */
    bool        heard;                      /* a byte came on this connection */
    size_t      inlen;                      /* bytes in in[] */
    size_t      line_len;                   /* bytes in line[], without its NUL */
    char        in[CLIENT_LINE_MAX + 1];    /* bytes received, not yet returned as lines */
    char        line[CLIENT_LINE_MAX + 1];  /* the line read last, without its LF, NUL-ended
                                               (a NUL byte inside it is kept: line_len) */
    char        err[CLIENT_ERR_MAX];        /* why the last call failed, for people */
};

/* Milliseconds on CLOCK_MONOTONIC since an arbitrary point: the clock of deadlines. */
int64_t client_now_ms(void);

/*
 * Set c up around fd (a connected stream socket, or -1 for none yet)
 * with flags (CLIENT_EXACT, CLIENT_KEEP_CR, or 0); no wakeup descriptor,
 * no TLS (client_close() a c that has TLS before setting it up again).
 * Nothing is read or written.
 */
void client_init(struct client *c, int fd, unsigned flags);

/*
 * Connect to addr, "HOST:PORT" or "[IPv6]:PORT" (HOST may be a name:
 * every address it resolves to is tried in order until one accepts),
 * before deadline.  c must have been set up with client_init(); a
 * descriptor it had is closed first.  The new socket is close-on-exec
 * and blocking (this module's own I/O never blocks past a deadline).
 * Returns 0, or -1 with c->err ("HOST:PORT: Connection refused") and
 * errno (EINTR when c->wakeup became readable).
 */
int client_connect_tcp(struct client *c, const char *addr, int64_t deadline);

/*
 * Connect to the Unix socket at path, as client_connect_tcp().  A full
 * backlog on the daemon's side fails at once (EAGAIN).
 */
int client_connect_unix(struct client *c, const char *path, int64_t deadline);

/*
 * Start TLS on c's connected socket before deadline, as a client: TLS
 * 1.2 or later; the server's certificate must chain to opts->ca_file
 * (NULL opts or ca_file: the system store) and name host, the HOST of
 * the address connected to (an IPv4 or IPv6 address, without brackets,
 * is matched against the certificate's IP addresses, a name against its
 * DNS names and sent as SNI).  With opts->cert_file and key_file, that
 * certificate is presented when the server asks for one.  From then on
 * client_send(), client_write() and client_read_line() go through TLS
 * with the same deadlines, wakeup and flags (CLIENT_EXACT reads no
 * decrypted byte past a line's LF), and the socket is no one else's to
 * read or write; the descriptor stays blocking (the module's own I/O
 * never waits but in poll(2)), and writes never raise SIGPIPE.
 * Returns 0, or -1 with errno and c->err naming OpenSSL's reason, e.g.
 * "TLS handshake: certificate verify failed: certificate has expired",
 * "ca.pem: No such file or directory" (ETIMEDOUT at the deadline,
 * EINTR when c->wakeup became readable, EPROTO for a failed handshake
 * or verification, an errno of its own for a file); c is then closed
 * (client_close()).  TLS once started cannot be started again.
 */
int client_start_tls(struct client *c, const char *host, const struct client_tls_opts *opts,
                     int64_t deadline);

/*
 * Close c's descriptor (when it has one; a TLS connection sends its
 * close_notify first, without waiting) and forget buffered bytes and
 * the TLS state.
 */
void client_close(struct client *c);

/*
 * Send line and an LF in one write when the kernel takes it whole
 * (MSG_NOSIGNAL: a closed peer is EPIPE, not a signal).  Returns 0, or
 * -1 with c->err and errno (ETIMEDOUT when the socket stayed full until
 * deadline, ENOTCONN without a connection).
 */
int client_send(struct client *c, const char *line, int64_t deadline);

/* Send exactly len bytes of buf (no LF added), as client_send(). */
int client_write(struct client *c, const void *buf, size_t len, int64_t deadline);

/*
 * Read the next line before deadline into c->line (CLIENT_LINE).
 * Lines already buffered are returned first, then the socket is read;
 * without CLIENT_EXACT, bytes after the line stay buffered in c for the
 * next call.  A readable c->wakeup is looked at first, even when a line
 * is buffered (CLIENT_INTR, nothing consumed).  Without a connection
 * (fd -1) it waits for c->wakeup or the deadline; without either it
 * is CLIENT_ERROR at once.  Bytes of a partial line are kept across
 * CLIENT_TIMEOUT and CLIENT_INTR, and dropped at CLIENT_EOF.  Every
 * outcome but CLIENT_LINE sets c->err and errno.
 */
enum client_read client_read_line(struct client *c, int64_t deadline);

/* ---- parsing one line ---- */

/* True when line is a pushed line (it starts with '!'), which answers no request. */
bool client_is_push(const char *line);

/* True when the first word of line is status ("OK", "END", "ERR"...). */
bool client_is_status(const char *line, const char *status);

/*
 * True when line is "<status> <name>" followed by a space or its end
 * (a pushed line's "! " is not skipped: give line + 2).
 */
bool client_is_reply(const char *line, const char *status, const char *name);

/* True when line is "ERR <code>" followed by a space or its end. */
bool client_is_err(const char *line, const char *code);

/*
 * The text of "ERR <code> <text>": a pointer into line to <text> (""
 * when there is none); line itself when it is not an ERR line.
 */
const char *client_err_text(const char *line);

/*
 * Copy the value of the word "<key>=<value>" into out (size bytes, with
 * a NUL).  Only the words after the status and the name are looked at
 * (the first two; a name may contain '='), after the "! " of a pushed
 * line.  Keys compare exactly.  Returns false when line is NULL, has no
 * such word, or the value does not fit.
 */
bool client_field(const char *line, const char *key, char *out, size_t size);

/*
 * client_field() for a decimal integer: an optional '-', then 1 to 18
 * digits and nothing else.  True with *value; false when absent or not
 * such a number.
 */
bool client_field_int(const char *line, const char *key, int64_t *value);

/*
 * A protocol word: 1..max bytes, each 0x21..0x7E (a lock name, a
 * password, a label).
 */
bool client_word_ok(const char *s, size_t max);

/*
 * Split "HOST:PORT" or "[IPv6]:PORT" into host (hsize bytes) and port
 * (psize bytes), both NUL-terminated.  Returns 0, or -1 for a missing,
 * zero or bad port (digits only, at most 65535), an empty host, an
 * IPv6 address without brackets, or a part that does not fit.
 */
int client_split_addr(const char *addr, char *host, size_t hsize, char *port, size_t psize);

#endif /* REDLOCKD_CLIENT_H */
