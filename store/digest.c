/*
 * SHA-256 digests for the content store: validation, streaming hashing
 * over OpenSSL's EVP interface and chain IDs. No I/O; any thread.
 */
#include "store/digest.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

struct sha256 {
    EVP_MD_CTX *ctx;
};

bool
digest_hex_valid(const char *s, size_t min_len)
{
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        if (n >= DIGEST_HEX_LEN || !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return n >= min_len && n > 0;
}

bool
digest_valid(const char *s)
{
    if (!s || strncmp(s, DIGEST_PREFIX, DIGEST_PREFIX_LEN) != 0)
        return false;
    s += DIGEST_PREFIX_LEN;
    return strlen(s) == DIGEST_HEX_LEN && digest_hex_valid(s, DIGEST_HEX_LEN);
}

const char *
digest_hex(const char *digest)
{
    return digest_valid(digest) ? digest + DIGEST_PREFIX_LEN : NULL;
}

struct sha256 *
sha256_new(void)
{
    struct sha256 *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->ctx = EVP_MD_CTX_new();
    if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
        sha256_free(h);
        return NULL;
    }
    return h;
}

void
sha256_update(struct sha256 *h, const void *buf, size_t len)
{
    /* EVP_DigestUpdate on an initialised SHA-256 context only fails on
     * programming errors; there is nothing a caller could do about it. */
    if (len > 0)
        EVP_DigestUpdate(h->ctx, buf, len);
}

static void
hex_encode(const unsigned char *in, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 0xf];
    }
    out[2 * len] = '\0';
}

void
sha256_final(struct sha256 *h, char out[DIGEST_STR_LEN])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    EVP_DigestFinal_ex(h->ctx, md, &md_len);
    memcpy(out, DIGEST_PREFIX, DIGEST_PREFIX_LEN);
    hex_encode(md, md_len, out + DIGEST_PREFIX_LEN);
}

void
sha256_free(struct sha256 *h)
{
    if (!h)
        return;
    EVP_MD_CTX_free(h->ctx);
    free(h);
}

int
digest_of(const void *buf, size_t len, char out[DIGEST_STR_LEN])
{
    struct sha256 *h = sha256_new();
    if (!h)
        return -ENOMEM;
    sha256_update(h, buf, len);
    sha256_final(h, out);
    sha256_free(h);
    return 0;
}

int
digest_chain_id(const char *parent_chain, const char *diff_id, char out[DIGEST_STR_LEN],
                struct err *err)
{
    if (!digest_valid(diff_id))
        return err_set(err, EINVAL, "chain id: invalid diff id '%s'", diff_id ? diff_id : "");
    if (!parent_chain) {
        memcpy(out, diff_id, DIGEST_STR_LEN - 1);
        out[DIGEST_STR_LEN - 1] = '\0';
        return 0;
    }
    if (!digest_valid(parent_chain))
        return err_set(err, EINVAL, "chain id: invalid parent chain id '%s'", parent_chain);
    struct sha256 *h = sha256_new();
    if (!h)
        return err_set(err, ENOMEM, "chain id: out of memory");
    sha256_update(h, parent_chain, strlen(parent_chain));
    sha256_update(h, " ", 1);
    sha256_update(h, diff_id, strlen(diff_id));
    sha256_final(h, out);
    sha256_free(h);
    return 0;
}
