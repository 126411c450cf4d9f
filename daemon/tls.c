/*
 * tls.c: the SSL_CTX of the TLS client listener, the one links to
 * rediss:// masters are made from, and their reload.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "conf/conf.h"
#include "daemon/log.h"
#include "daemon/tls.h"
#include "daemon/xmalloc.h"

#define TLS_REFUSAL_SIZE    512     /* room for why a client certificate was refused */
#define TLS_SUBJECT_SIZE    200     /* room for a certificate's subject in that text */

static SSL_CTX *tls_ctx;        /* new sessions' context; owned here, NULL when none */
static SSL_CTX *tls_client_ctx; /* links to rediss:// masters; owned here, NULL when none */
static int tls_refusal_idx = -1; /* SSL ex_data index of a session's refusal text */

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
        /* Out of memory, or OpenSSL's configuration (a provider) failed: refused. */
        tls_fail("cannot create a TLS context", "(OpenSSL)", why, size);
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

/* Frees a session's refusal buffer with its SSL (an ex_data free function). */
static void
tls_refusal_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
    (void)parent;
    (void)ad;
    (void)idx;
    (void)argl;
    (void)argp;
    free(ptr);
}

/* Bytes of buf outside printable ASCII become '?' (a certificate's text goes to the log). */
static void
tls_printable(char *buf)
{
    for (; *buf != '\0'; buf++) {
        if ((unsigned char)*buf < 0x20 || (unsigned char)*buf > 0x7e) {
            *buf = '?';
        }
    }
}

/*
 * A certificate's subject as one line (RFC 2253: "CN=x,O=y"), bytes
 * outside printable ASCII as '?', cut to size.
 */
static void
tls_subject(X509 *cert, char *buf, size_t size)
{
    BIO *bio = BIO_new(BIO_s_mem());
    int n = 0;

    buf[0] = '\0';
    ERR_set_mark();     /* called during a handshake: leave its errors alone */
    if (bio == NULL || cert == NULL
        || X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) < 0) {
        snprintf(buf, size, "(unknown)");
    } else {
        n = BIO_read(bio, buf, (int)size - 1);
        buf[n > 0 ? n : 0] = '\0';
        tls_printable(buf);
        if (buf[0] == '\0') {
            snprintf(buf, size, "(empty)");
        }
    }
    BIO_free(bio);
    ERR_pop_to_mark();
}

/*
 * Why cert carries none of tls.client_names: "subject CN=x not in
 * tls.client_names", or with DNS subjectAltNames (the CN then does not
 * count), "subject CN=x: DNS names a, b not in tls.client_names".
 */
static void
tls_names_refusal(X509 *cert, const char *subject, char *buf, size_t size)
{
    GENERAL_NAMES *alt = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    char dns[TLS_SUBJECT_SIZE] = "";
    size_t used = 0;
    int i, w, len;

    for (i = 0; alt != NULL && i < sk_GENERAL_NAME_num(alt); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(alt, i);
        const unsigned char *name;

        if (g->type != GEN_DNS || used >= sizeof(dns)) {
            continue;
        }
        name = ASN1_STRING_get0_data(g->d.dNSName);
        len = ASN1_STRING_length(g->d.dNSName);
        w = snprintf(dns + used, sizeof(dns) - used, "%s%.*s", used > 0 ? ", " : "", len,
                     (const char *)name);
        used += w > 0 ? (size_t)w : 0;
    }
    GENERAL_NAMES_free(alt);
    tls_printable(dns);
    if (dns[0] == '\0') {
        snprintf(buf, size, "subject %s not in tls.client_names", subject);
    } else {
        snprintf(buf, size, "subject %s: DNS names %s not in tls.client_names", subject, dns);
    }
}

/*
 * The verification of a client certificate: OpenSSL's verdict stands;
 * the first refusal is written, with the certificate's subject, into the
 * session's refusal buffer (tls_refusal() reads it) for its log line.
 */
static int
tls_verify_cb(int ok, X509_STORE_CTX *store)
{
    char subject[TLS_SUBJECT_SIZE];
    X509 *cert;
    SSL *ssl;
    char *refusal;
    int err;

    if (ok) {
        return 1;
    }
    ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    refusal = ssl != NULL && tls_refusal_idx >= 0 ? SSL_get_ex_data(ssl, tls_refusal_idx)
                                                   : NULL;
    if (refusal == NULL || refusal[0] != '\0') {
        return 0;
    }
    cert = X509_STORE_CTX_get_current_cert(store);
    tls_subject(cert, subject, sizeof(subject));
    err = X509_STORE_CTX_get_error(store);
    switch (err) {
    case X509_V_ERR_HOSTNAME_MISMATCH:
        tls_names_refusal(cert, subject, refusal, TLS_REFUSAL_SIZE);
        break;
    case X509_V_ERR_CERT_REVOKED:
        snprintf(refusal, TLS_REFUSAL_SIZE, "subject %s: certificate revoked "
                 "(tls.client_crl_file)", subject);
        break;
    case X509_V_ERR_UNABLE_TO_GET_CRL:
        snprintf(refusal, TLS_REFUSAL_SIZE, "subject %s: no CRL of its issuer in "
                 "tls.client_crl_file", subject);
        break;
    case X509_V_ERR_CRL_HAS_EXPIRED:
    case X509_V_ERR_CRL_NOT_YET_VALID:
        snprintf(refusal, TLS_REFUSAL_SIZE, "subject %s: %s (tls.client_crl_file)", subject,
                 X509_verify_cert_error_string(err));
        break;
    default:
        snprintf(refusal, TLS_REFUSAL_SIZE, "subject %s: %s", subject,
                 X509_verify_cert_error_string(err));
        break;
    }
    return 0;
}

/*
 * Feed a part of the id context to md: its bytes, then its length (so
 * that no two lists of parts feed the same bytes).
 */
static void
tls_digest_part(EVP_MD_CTX *md, const void *data, size_t len)
{
    uint64_t n = len;

    EVP_DigestUpdate(md, data, len);
    EVP_DigestUpdate(md, &n, sizeof(n));
}

/* Feed the contents of file to md as one part ("" for none); -1 with the reason in why. */
static int
tls_digest_file(EVP_MD_CTX *md, const char *key, const char *file, char *why, size_t size)
{
    unsigned char buf[4096];
    uint64_t total = 0;
    size_t n;
    FILE *f;

    if (file == NULL || file[0] == '\0') {
        tls_digest_part(md, "", 0);
        return 0;
    }
    f = fopen(file, "rb");
    if (f == NULL) {
        snprintf(why, size, "%s %s: cannot read: %s", key, file, strerror(errno));
        return -1;
    }
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        EVP_DigestUpdate(md, buf, n);
        total += n;
    }
    if (ferror(f)) {
        snprintf(why, size, "%s %s: cannot read: %s", key, file, strerror(errno));
        fclose(f);
        return -1;
    }
    fclose(f);
    EVP_DigestUpdate(md, &total, sizeof(total));
    return 0;
}

/*
 * The session id context: SHA-256 of what decides whether a client
 * certificate is accepted (the contents of tls.client_ca_file and
 * tls.client_crl_file, and tls.client_names), so that a session made
 * under other rules is not resumed.  Returns 0, or -1 with the reason.
 */
static int
tls_ctx_set_id_context(SSL_CTX *ctx, const struct conf *conf, char *why, size_t size)
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    size_t i;
    int rc = -1;

    if (md == NULL) {
        xmalloc_fail("the TLS session id context's digest");
    }
    if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        /* SHA-256 not available (OpenSSL's configuration): refused, not a crash. */
        snprintf(why, size, "cannot digest the client verification settings (SHA-256)");
        EVP_MD_CTX_free(md);
        return -1;
    }
    tls_digest_part(md, "redlockd client verification", 28);
    if (tls_digest_file(md, "tls.client_ca_file", conf->tls_client_ca_file, why, size) != 0
        || tls_digest_file(md, "tls.client_crl_file", conf->tls_client_crl_file, why,
                           size) != 0) {
        goto out;
    }
    for (i = 0; i < conf->tls_client_names.n; i++) {
        tls_digest_part(md, conf->tls_client_names.items[i],
                        strlen(conf->tls_client_names.items[i]));
    }
    if (EVP_DigestFinal_ex(md, digest, &dlen) != 1
        || SSL_CTX_set_session_id_context(ctx, digest, dlen < SSL_MAX_SID_CTX_LENGTH
                                                       ? dlen : SSL_MAX_SID_CTX_LENGTH) != 1) {
        snprintf(why, size, "cannot set the TLS session id context");
        goto out;
    }
    rc = 0;
out:
    EVP_MD_CTX_free(md);
    ERR_clear_error();
    return rc;
}

/* tls.ciphers and tls.ciphersuites into ctx; -1 with the reason in why. */
static int
tls_ctx_set_ciphers(SSL_CTX *ctx, const struct conf *conf, char *why, size_t size)
{
    char reason[256];

    if (SSL_CTX_set_cipher_list(ctx, conf->tls_ciphers) != 1) {
        snprintf(why, size, "tls.ciphers '%s': no cipher matches (%s)", conf->tls_ciphers,
                 tls_reason(ERR_peek_last_error(), reason, sizeof(reason)));
        ERR_clear_error();
        return -1;
    }
    if (SSL_CTX_set_ciphersuites(ctx, conf->tls_ciphersuites) != 1) {
        snprintf(why, size, "tls.ciphersuites '%s': no cipher matches (%s)",
                 conf->tls_ciphersuites,
                 tls_reason(ERR_peek_last_error(), reason, sizeof(reason)));
        ERR_clear_error();
        return -1;
    }
    return 0;
}

/*
 * The policy for client certificates beyond their CA: tls.client_crl_file
 * (every CRL in it, checked for the client's certificate) and
 * tls.client_names (the names OpenSSL checks the certificate for, with
 * no wildcards).  Returns 0, or -1 with the reason in why.
 */
static int
tls_ctx_client_policy(SSL_CTX *ctx, const struct conf *conf, char *why, size_t size)
{
    X509_VERIFY_PARAM *param = SSL_CTX_get0_param(ctx);
    const char *crl = conf->tls_client_crl_file;
    X509_LOOKUP *lookup;
    size_t i;

    if (crl != NULL && crl[0] != '\0') {
        lookup = X509_STORE_add_lookup(SSL_CTX_get_cert_store(ctx), X509_LOOKUP_file());
        if (lookup == NULL || X509_load_crl_file(lookup, crl, X509_FILETYPE_PEM) <= 0) {
            tls_fail("tls.client_crl_file", crl, why, size);
            return -1;
        }
        X509_VERIFY_PARAM_set_flags(param, X509_V_FLAG_CRL_CHECK);
    }
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_WILDCARDS);
    for (i = 0; i < conf->tls_client_names.n; i++) {
        if (X509_VERIFY_PARAM_add1_host(param, conf->tls_client_names.items[i], 0) != 1) {
            snprintf(why, size, "tls.client_names: cannot use '%s'",
                     conf->tls_client_names.items[i]);
            ERR_clear_error();
            return -1;
        }
    }
    return 0;
}

SSL_CTX *
tls_server_ctx_new(const struct conf *conf, char *why, size_t size)
{
    SSL_CTX *ctx;
    STACK_OF(X509_NAME) *names;
    const char *ca = conf->tls_client_ca_file;

    if (tls_refusal_idx < 0) {
        tls_refusal_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, tls_refusal_free);
        if (tls_refusal_idx < 0) {
            xmalloc_fail("a TLS context's data index");
        }
    }
    if ((ctx = tls_ctx_base(TLS_server_method(), why, size)) == NULL) {
        return NULL;
    }
    /*
     * A client that closes its side without close_notify (openssl
     * s_client and ncat do at the end of their input) ends its input;
     * the replies still go out.  Lines are the protocol's unit and a
     * cut-off last line is not a request, so nothing half-read counts.
     */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION
                             | SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (tls_ctx_set_ciphers(ctx, conf, why, size) != 0) {
        goto fail;
    }
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
        if (tls_ctx_client_policy(ctx, conf, why, size) != 0) {
            goto fail;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                           tls_verify_cb);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    if (tls_ctx_set_id_context(ctx, conf, why, size) != 0) {
        goto fail;
    }
    return ctx;

fail:
    SSL_CTX_free(ctx);
    return NULL;
}

int
tls_load(const struct conf *conf, char *why, size_t size)
{
    SSL_CTX *ctx = tls_server_ctx_new(conf, why, size);

    if (ctx == NULL) {
        return -1;
    }
    tls_server_use(ctx, conf);
    return 0;
}

void
tls_server_use(SSL_CTX *ctx, const struct conf *conf)
{
    /* Open sessions hold references of their own to the old context. */
    SSL_CTX_free(tls_ctx);
    tls_ctx = ctx;
    log_info("tls: loaded %s and %s%s%s%s%s%s", conf->tls_cert_file, conf->tls_key_file,
             conf->tls_client_ca_file[0] != '\0' ? "; client certificates required, CAs from "
                                                 : "; no client certificates",
             conf->tls_client_ca_file,
             conf->tls_client_ca_file[0] != '\0' && conf->tls_client_crl_file[0] != '\0'
                 ? ", CRLs from " : "",
             conf->tls_client_ca_file[0] != '\0' ? conf->tls_client_crl_file : "",
             conf->tls_client_ca_file[0] != '\0' && conf->tls_client_names.n > 0
                 ? ", names from tls.client_names" : "");
}

bool
tls_ready(void)
{
    return tls_ctx != NULL;
}

SSL *
tls_session_new(void)
{
    char *refusal;
    SSL *ssl;

    if (tls_ctx == NULL) {
        return NULL;
    }
    if ((ssl = SSL_new(tls_ctx)) == NULL) {
        xmalloc_fail("a client's TLS session");
    }
    /* Freed with ssl (tls_refusal_free). */
    refusal = xcalloc(1, TLS_REFUSAL_SIZE);
    if (SSL_set_ex_data(ssl, tls_refusal_idx, refusal) != 1) {
        xmalloc_fail("a client's TLS session");
    }
    return ssl;
}

const char *
tls_refusal(SSL *ssl)
{
    const char *refusal;

    if (ssl == NULL || tls_refusal_idx < 0) {
        return "";
    }
    refusal = SSL_get_ex_data(ssl, tls_refusal_idx);
    return refusal != NULL ? refusal : "";
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

    if (tls_client_ctx == NULL) {
        return NULL;
    }
    if ((ssl = SSL_new(tls_client_ctx)) == NULL) {
        xmalloc_fail("a master link's TLS session");
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
