/*
 * GUID text, version 5 (name-based, SHA-1) and version 4 (random) GUIDs
 * for the HCS documents. Any thread; OpenSSL's SHA-1 and RAND_bytes are
 * thread-safe in OpenSSL 3.
 */
#include "runtime/hcs/guid.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

/* fa8cb113-b3b4-4190-9b82-b68915aed3d6, drawn once for berth. */
const struct hcs_guid HCS_GUID_LAYER_NS = {{0xfa, 0x8c, 0xb1, 0x13, 0xb3, 0xb4, 0x41, 0x90, 0x9b,
                                            0x82, 0xb6, 0x89, 0x15, 0xae, 0xd3, 0xd6}};

void
hcs_guid_format(const struct hcs_guid *g, char out[HCS_GUID_SIZE])
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[g->b[i] >> 4];
        out[o++] = hex[g->b[i] & 0xf];
    }
    out[o] = '\0';
}

static int
hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool
guid_scan(const char *s, struct hcs_guid *out)
{
    if (!s || strlen(s) != HCS_GUID_LEN)
        return false;
    size_t n = 0;
    for (size_t i = 0; i < HCS_GUID_LEN;) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return false;
            i++;
            continue;
        }
        int hi = hexval(s[i]);
        int lo = hexval(s[i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out->b[n++] = (uint8_t)(hi << 4 | lo);
        i += 2;
    }
    return n == 16;
}

int
hcs_guid_parse(const char *s, struct hcs_guid *out, struct err *err)
{
    struct hcs_guid g;
    if (!guid_scan(s, &g))
        return err_set(err, EINVAL,
                       "\"%.64s\" is not a guid (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
                       s ? s : "");
    *out = g;
    return 0;
}

bool
hcs_guid_valid(const char *s)
{
    struct hcs_guid g;
    return guid_scan(s, &g);
}

int
hcs_guid_v5(const struct hcs_guid *ns, const void *name, size_t len, struct hcs_guid *out,
            struct err *err)
{
    uint8_t md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    bool ok = c && EVP_DigestInit_ex(c, EVP_sha1(), NULL) == 1 &&
              EVP_DigestUpdate(c, ns->b, sizeof(ns->b)) == 1 &&
              EVP_DigestUpdate(c, name, len) == 1 && EVP_DigestFinal_ex(c, md, &mdlen) == 1;
    EVP_MD_CTX_free(c);
    if (!ok || mdlen < 16)
        return err_set(err, ENOMEM, "version 5 guid: sha-1 failed");
    memcpy(out->b, md, 16);
    out->b[6] = (uint8_t)((out->b[6] & 0x0f) | 0x50); /* version 5 */
    out->b[8] = (uint8_t)((out->b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    return 0;
}

int
hcs_guid_layer(const char *name, char out[HCS_GUID_SIZE], struct err *err)
{
    struct hcs_guid g;
    int r = hcs_guid_v5(&HCS_GUID_LAYER_NS, name, strlen(name), &g, err);
    if (r < 0)
        return err_wrap(err, "layer id of %.80s", name);
    hcs_guid_format(&g, out);
    return 0;
}

int
hcs_random_bytes(void *buf, size_t len, struct err *err)
{
    if (len > (size_t)INT32_MAX || RAND_bytes(buf, (int)len) != 1)
        return err_set(err, EIO, "random bytes: the random source failed");
    return 0;
}

int
hcs_guid_random(struct hcs_guid *out, struct err *err)
{
    int r = hcs_random_bytes(out->b, sizeof(out->b), err);
    if (r < 0)
        return r;
    out->b[6] = (uint8_t)((out->b[6] & 0x0f) | 0x40);
    out->b[8] = (uint8_t)((out->b[8] & 0x3f) | 0x80);
    return 0;
}
