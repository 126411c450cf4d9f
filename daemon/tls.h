/*
 * tls.h: the server side of TLS for clients (listen.tls).
 *
 * This module owns the SSL_CTX that TLS sessions are made from: TLS 1.2
 * or later with the suites of tls.ciphers (TLS 1.2; forward-secret AEAD
 * suites by default) and tls.ciphersuites (TLS 1.3), the certificate and
 * key of tls.cert_file and tls.key_file (checked to match), and, with
 * tls.client_ca_file, the CAs a client's certificate must be signed by (a
 * client without one fails the handshake), the CRLs of
 * tls.client_crl_file it is checked against and the names of
 * tls.client_names it must carry one of.  The session id context is a
 * SHA-256 of those client rules (the files' contents), so a session is
 * resumed only under the rules it was made under.  A reload builds a new
 * context from the files; only when that succeeds does it replace the
 * old one.  Sessions already open keep the context they began with (an
 * SSL holds a reference to its SSL_CTX).
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

/*
 * tls_load() in two steps, so that a reload can check every file before
 * it changes anything: tls_server_ctx_new() reads tls.* of conf into a
 * new context and returns it (the caller owns it: SSL_CTX_free when it
 * is not used), or NULL with the reason in why, as tls_load; nothing in
 * use changes.  tls_server_use() makes ctx, built from conf, the one new
 * sessions use (taking it; sessions already open keep theirs) and logs
 * what was loaded.
 */
SSL_CTX *tls_server_ctx_new(const struct conf *conf, char *why, size_t size);
void tls_server_use(SSL_CTX *ctx, const struct conf *conf);

/* True when a context is loaded (tls_load succeeded once). */
bool tls_ready(void);

/*
 * A new server-side SSL for an accepted client, from the current
 * context; NULL when no context is loaded (out of memory aborts,
 * daemon/xmalloc.h).  The caller
 * owns it (SSL_free, or the bufferevent that took it).
 */
SSL *tls_session_new(void);

/*
 * Why the handshake of ssl (from tls_session_new) refused the client's
 * certificate, with its subject: "subject CN=x: certificate revoked
 * (tls.client_crl_file)", "subject CN=x not in tls.client_names", or
 * OpenSSL's verification error ("subject CN=x: certificate has
 * expired").  "" when nothing was refused.  The text belongs to ssl and
 * lives as long as it does.
 */
const char *tls_refusal(SSL *ssl);

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

/*
 * The client side, for masters written rediss:// (redis.tls_*): TLS 1.2
 * or later, the server's certificate verified against
 * redis.tls_ca_file (the system store when it is ""), and the client
 * certificate of redis.tls_cert_file and redis.tls_key_file when set.
 *
 * tls_client_ctx_new() builds a context from conf, or returns NULL with
 * the reason in why ("redis.tls_key_file /path: <OpenSSL's reason>");
 * tls_client_use() makes it the one new links are made from (taking
 * it; links already open keep theirs).  Split so that a reload can check
 * every file before it changes anything.
 */
SSL_CTX *tls_client_ctx_new(const struct conf *conf, char *why, size_t size);
void tls_client_use(SSL_CTX *ctx);

/*
 * A new client SSL for a master, checking the certificate's name against
 * name (a host name, also sent as SNI, or a numeric address); NULL when
 * no client context is loaded or OpenSSL refuses the name (out of memory
 * aborts, daemon/xmalloc.h).
 */
SSL *tls_client_session_new(const char *name);

/* Free the contexts (at exit). */
void tls_stop(void);

#endif /* REDLOCKD_TLS_H */
