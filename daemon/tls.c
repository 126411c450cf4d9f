/*
 * tls.c: the SSL_CTX of the TLS client listener, the one links to
 * rediss:// masters are made from, and their reload.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "conf/conf.h"
#include "daemon/log.h"
#include "daemon/tls.h"

static SSL_CTX *tls_ctx;        /* new sessions' context; owned here, NULL when none */
static SSL_CTX *tls_client_ctx; /* links to rediss:// masters; owned here, NULL when none */

char *
tls_reason(unsigned long err, char *buf, size_t size)
{
    if (size == 0) {
        return buf;
    }
    if (err == 0) {
        snprintf(buf, size, "no reason given by OpenSSL");
        return buf;
    }
    ERR_error_string_n(err, buf, size);
    return buf;
}

/* "<what> <file>: <OpenSSL's reason>" into why; the error queue is cleared. */
static void
tls_fail(const char *what, const char *file, char *why, size_t size)
{
    char reason[256];
    unsigned long err = ERR_peek_last_error();

    tls_reason(err, reason, sizeof(reason));
    snprintf(why, size, "%s %s: %s", what, file, reason);
    ERR_clear_error();
}

/* A context of method requiring TLS 1.2 or later, or NULL with the reason in why. */
static SSL_CTX *
tls_ctx_base(const SSL_METHOD *method, char *why, size_t size)
{
    SSL_CTX *ctx;

    ERR_clear_error();
    ctx = SSL_CTX_new(method);
    if (ctx == NULL) {
        snprintf(why, size, "cannot create a TLS context (out of memory)");
        ERR_clear_error();
        return NULL;
    }
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
        snprintf(why, size, "cannot require TLS 1.2 or later");
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    return ctx;
}

/*
 * Load a certificate chain and its key into ctx and check that they
 * match; the settings' names (cert_key, key_key) name them in why.
 * Returns 0, or -1 with the file and OpenSSL's reason in why.
 */
static int
tls_ctx_use_pair(SSL_CTX *ctx, const char *cert_key, const char *cert, const char *key_key,
                 const char *key, char *why, size_t size)
{
    char reason[256];

    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        tls_fail(cert_key, cert, why, size);
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        tls_fail(key_key, key, why, size);
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(why, size, "%s %s does not match %s %s: %s", key_key, key, cert_key, cert,
                 tls_reason(ERR_peek_last_error(), reason, sizeof(reason)));
        ERR_clear_error();
        return -1;
    }
    return 0;
}

/* A context from the files of conf, or NULL with the reason in why. */
static SSL_CTX *
tls_ctx_new(const struct conf *conf, char *why, size_t size)
{
    SSL_CTX *ctx;
    STACK_OF(X509_NAME) *names;
    const char *ca = conf->tls_client_ca_file;

    if ((ctx = tls_ctx_base(TLS_server_method(), why, size)) == NULL) {
        return NULL;
    }
    /*
     * A client that closes its side without close_notify (openssl
     * s_client and ncat do at the end of their input) ends its input;
     * the replies still go out.  Lines are the protocol's unit and a
     * cut-off last line is not a request, so nothing half-read counts.
     */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    if (tls_ctx_use_pair(ctx, "tls.cert_file", conf->tls_cert_file, "tls.key_file",
                         conf->tls_key_file, why, size) != 0) {
        goto fail;
    }
    if (ca != NULL && ca[0] != '\0') {
        if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
            tls_fail("tls.client_ca_file", ca, why, size);
            goto fail;
        }
        names = SSL_load_client_CA_file(ca);
        if (names == NULL) {
            tls_fail("tls.client_ca_file", ca, why, size);
            goto fail;
        }
        SSL_CTX_set_client_CA_list(ctx, names);     /* takes names */
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    return ctx;

fail:
    SSL_CTX_free(ctx);
    return NULL;
}

int
tls_load(const struct conf *conf, char *why, size_t size)
{
    SSL_CTX *ctx = tls_ctx_new(conf, why, size);

    if (ctx == NULL) {
        return -1;
    }
    /* Open sessions hold references of their own to the old context. */
    SSL_CTX_free(tls_ctx);
    tls_ctx = ctx;
    log_info("tls: loaded %s and %s%s%s", conf->tls_cert_file, conf->tls_key_file,
             conf->tls_client_ca_file[0] != '\0' ? "; client certificates required, CAs from "
                                                 : "; no client certificates",
             conf->tls_client_ca_file);
    return 0;
}

bool
tls_ready(void)
{
    return tls_ctx != NULL;
}

SSL *
tls_session_new(void)
{
    return tls_ctx != NULL ? SSL_new(tls_ctx) : NULL;
}

bool
tls_peer_verified(SSL *ssl)
{
    X509 *cert;
    bool ok;

    if (ssl == NULL || SSL_get_verify_mode(ssl) == SSL_VERIFY_NONE) {
        return false;
    }
    cert = SSL_get1_peer_certificate(ssl);
    ok = cert != NULL && SSL_get_verify_result(ssl) == X509_V_OK;
    X509_free(cert);
    return ok;
}

SSL_CTX *
tls_client_ctx_new(const struct conf *conf, char *why, size_t size)
{
    SSL_CTX *ctx;
    const char *ca = conf->redis_tls_ca_file;
    const char *cert = conf->redis_tls_cert_file, *key = conf->redis_tls_key_file;

    if ((ctx = tls_ctx_base(TLS_client_method(), why, size)) == NULL) {
        return NULL;
    }
    if (ca != NULL && ca[0] != '\0') {
        if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
            tls_fail("redis.tls_ca_file", ca, why, size);
            goto fail;
        }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        tls_fail("the system's CA store", "(redis.tls_ca_file is empty)", why, size);
        goto fail;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (cert != NULL && cert[0] != '\0'
        && tls_ctx_use_pair(ctx, "redis.tls_cert_file", cert, "redis.tls_key_file", key, why,
                            size) != 0) {
        goto fail;
    }
    return ctx;

fail:
    SSL_CTX_free(ctx);
    return NULL;
}

void
tls_client_use(SSL_CTX *ctx)
{
    /* Open links hold references of their own to the old context. */
    SSL_CTX_free(tls_client_ctx);
    tls_client_ctx = ctx;
}

SSL *
tls_client_session_new(const char *name)
{
    unsigned char buf[sizeof(struct in6_addr)];
    bool numeric;
    SSL *ssl;

    if (tls_client_ctx == NULL || (ssl = SSL_new(tls_client_ctx)) == NULL) {
        return NULL;
    }
    numeric = inet_pton(AF_INET, name, buf) == 1 || inet_pton(AF_INET6, name, buf) == 1;
    if (numeric) {
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) != 1) {
            SSL_free(ssl);
            return NULL;
        }
    } else if (SSL_set_tlsext_host_name(ssl, name) != 1 || SSL_set1_host(ssl, name) != 1) {
        SSL_free(ssl);
        return NULL;
    }
    return ssl;
}

void
tls_stop(void)
{
    SSL_CTX_free(tls_ctx);
    tls_ctx = NULL;
    SSL_CTX_free(tls_client_ctx);
    tls_client_ctx = NULL;
}
