/*
 * keyhash.h: a keyed hash for the daemon's tables of client addresses,
 * so that a client cannot choose addresses that collide.
 *
 * SipHash-2-4 with a 64-bit output (Aumasson and Bernstein, "SipHash: a
 * fast short-input PRF", 2012), computed by OpenSSL's EVP_MAC "SIPHASH",
 * keyed with 128 bits from getrandom(2) at the first use.
 */
#ifndef REDLOCKD_KEYHASH_H
#define REDLOCKD_KEYHASH_H

#include <stddef.h>
#include <stdint.h>

#define KEYHASH_KEY_BYTES 16

/*
 * The hash of len bytes at data under the daemon's key.  The key is drawn
 * from getrandom(2) at the first call; should OpenSSL fail (no memory),
 * an FNV-1a of the bytes mixed with the key is returned instead and the
 * failure logged once.  Never fails.
 */
uint64_t keyhash(const void *data, size_t len);

/*
 * Use key (KEYHASH_KEY_BYTES bytes, copied) from now on instead of a
 * random one: for the SipHash paper's test vectors (tests/check_admit.c).
 */
void keyhash_set_key(const unsigned char *key);

#endif /* REDLOCKD_KEYHASH_H */
