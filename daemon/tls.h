/*
 * tls.h: the server side of TLS for clients (listen.tls).
 *
 * This module owns the SSL_CTX that TLS sessions are made from: TLS 1.2
 * or later, the certificate and key of tls.cert_file and tls.key_file
 * (checked to match), and, with tls.client_ca_file, the CAs a client's
 * certificate must be signed by (a client without one fails the
 * handshake).  A reload builds a new context from the files; only when
 * that succeeds does it replace the old one.  Sessions already open keep
 * the context they began with (an SSL holds a reference to its SSL_CTX).
 */
#ifndef REDLOCKD_TLS_H
#define REDLOCKD_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

struct conf;

/*
 * Load tls.* of conf into the context new sessions use.  Returns 0, or
 * -1 with the reason in why ("tls.key_file /path: cannot load: <OpenSSL's
 * reason>"); the running context, if any, then stays.  Called at start
 * (when a TLS listener exists) and on every reload (files are re-read
 * even when their names did not change: certificate rotation).
 */
int tls_load(const struct conf *conf, char *why, size_t size);

/* True when a context is loaded (tls_load succeeded once). */
bool tls_ready(void);

/*
 * A new server-side SSL for an accepted client, from the current
 * context; NULL when no context is loaded or out of memory.
 */
SSL *tls_session_new(void);

/*
 * True when ssl's handshake verified a client certificate against
 * tls.client_ca_file (the certificate is there and verified).
 */
bool tls_peer_verified(SSL *ssl);

/*
 * OpenSSL's text for an error code (ERR_error_string_n), for example
 * "error:0A0000C7:SSL routines::peer did not return a certificate".
 * Returns buf.
 */
char *tls_reason(unsigned long err, char *buf, size_t size);

/* Free the context (at exit). */
void tls_stop(void);

#endif /* REDLOCKD_TLS_H */
