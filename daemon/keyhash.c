/*
 * keyhash.c: SipHash-2-4 over OpenSSL's EVP_MAC, one context kept keyed.
 *
 * Each hash is an init (with the key), an update and a final on the one
 * context, with no allocation.
 */
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "daemon/keyhash.h"
#include "daemon/log.h"
#include "daemon/util.h"

static EVP_MAC_CTX  *keyhash_ctx;      /* keyed; NULL until the first use or after a failure */
static unsigned char keyhash_key[KEYHASH_KEY_BYTES];
static bool          keyhash_keyed;    /* keyhash_key holds the key */
static bool          keyhash_failed;   /* OpenSSL failed: the fallback is in use (logged) */

/* Make the context with keyhash_key; false when OpenSSL cannot. */
static bool
keyhash_open(void)
{
    size_t size = 8;
    OSSL_PARAM params[2] = { OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &size),
                             OSSL_PARAM_END };
    EVP_MAC *mac;

    if (keyhash_ctx != NULL) {
        EVP_MAC_CTX_free(keyhash_ctx);
        keyhash_ctx = NULL;
    }
    if ((mac = EVP_MAC_fetch(NULL, "SIPHASH", NULL)) == NULL) {
        return false;
    }
    keyhash_ctx = EVP_MAC_CTX_new(mac);
    EVP_MAC_free(mac);      /* the context holds its own reference */
    if (keyhash_ctx == NULL || !EVP_MAC_init(keyhash_ctx, keyhash_key, sizeof(keyhash_key),
                                             params)) {
        EVP_MAC_CTX_free(keyhash_ctx);
        keyhash_ctx = NULL;
        return false;
    }
    return true;
}

void
keyhash_set_key(const unsigned char *key)
{
    memcpy(keyhash_key, key, sizeof(keyhash_key));
    keyhash_keyed = true;
    keyhash_failed = !keyhash_open();
}

uint64_t
keyhash(const void *data, size_t len)
{
    unsigned char out[8];
    size_t out_len = 0, i;
    uint64_t h = 14695981039346656037ULL;

    if (!keyhash_keyed) {
        if (util_getrandom(keyhash_key, sizeof(keyhash_key)) != 0) {
            /* Not secret then, but still per process and per start. */
            uint64_t t = (uint64_t)util_now_us() ^ ((uint64_t)getpid() << 32);

            memcpy(keyhash_key, &t, sizeof(t));
            log_error("getrandom failed: the client address tables' hash key is not secret");
        }
        keyhash_keyed = true;
        keyhash_failed = !keyhash_open();
        if (keyhash_failed) {
            log_error("OpenSSL has no SipHash (EVP_MAC SIPHASH): the client address tables "
                      "hash with the key and FNV-1a instead");
        }
    }
    /* The key again each time: a NULL key keeps the last one only in some OpenSSL 3 releases. */
    if (keyhash_ctx != NULL && EVP_MAC_init(keyhash_ctx, keyhash_key, sizeof(keyhash_key), NULL)
        && EVP_MAC_update(keyhash_ctx, data, len)
        && EVP_MAC_final(keyhash_ctx, out, &out_len, sizeof(out)) && out_len == 8) {
        /* Little-endian, as the paper's reference code writes its output. */
        for (i = 8, h = 0; i-- > 0;) {
            h = (h << 8) | out[i];
        }
        return h;
    }
    for (i = 0; i < sizeof(keyhash_key); i++) {
        h = (h ^ keyhash_key[i]) * 1099511628211ULL;
    }
    for (i = 0; i < len; i++) {
        h = (h ^ ((const unsigned char *)data)[i]) * 1099511628211ULL;
    }
    return h;
}
