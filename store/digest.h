/*
 * Content digests: validation of "sha256:<hex>" strings, a streaming
 * SHA-256 hasher over OpenSSL EVP, and OCI chain IDs. Pure computation,
 * no I/O: safe from any thread (a hasher is used by one thread at a time).
 */
#ifndef BERTH_STORE_DIGEST_H
#define BERTH_STORE_DIGEST_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

/* "sha256:" + 64 hex digits + NUL. */
#define DIGEST_STR_LEN 72
#define DIGEST_PREFIX "sha256:"
#define DIGEST_PREFIX_LEN 7
#define DIGEST_HEX_LEN 64

/* True when s is exactly "sha256:" followed by 64 lowercase hex digits. */
bool digest_valid(const char *s);

/* True when s is 1..64 lowercase hex digits and nothing else. */
bool digest_hex_valid(const char *s, size_t min_len);

/*
 * The hex part of a digest: a pointer into digest just past "sha256:".
 * digest must be digest_valid(); otherwise returns NULL.
 */
const char *digest_hex(const char *digest);

/* A streaming SHA-256 state. Heap-allocated; one thread at a time. */
struct sha256;

/* Returns a new hasher (caller frees with sha256_free), NULL on OOM. */
struct sha256 *sha256_new(void);
/* Feeds len bytes. Cannot fail once sha256_new succeeded. */
void sha256_update(struct sha256 *h, const void *buf, size_t len);
/*
 * Writes "sha256:<hex>" of everything fed so far into out. The hasher
 * must not be updated afterwards; free it.
 */
void sha256_final(struct sha256 *h, char out[DIGEST_STR_LEN]);
/* Frees h; NULL is a no-op. */
void sha256_free(struct sha256 *h);

/* One-shot: the digest of buf into out. Returns 0 or -ENOMEM. */
int digest_of(const void *buf, size_t len, char out[DIGEST_STR_LEN]);

/*
 * The OCI chain ID of a layer: chain(L1) = diff_id(L1) (parent_chain NULL),
 * chain(Ln) = sha256(chain(Ln-1) + " " + diff_id(Ln)). Both inputs must be
 * valid digests (EINVAL otherwise). Writes into out, which may not alias
 * the inputs.
 */
int digest_chain_id(const char *parent_chain, const char *diff_id, char out[DIGEST_STR_LEN],
                    struct err *err);

#endif
