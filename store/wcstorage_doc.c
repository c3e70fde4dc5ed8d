/*
 * The documents computestorage.dll takes (store/wcstorage.h), built by
 * hand with JSON escaping, and the errno of its HRESULTs. Portable and
 * pure: any thread, tested on Linux and under Wine.
 */
#include "store/wcstorage.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "common/strbuf.h"

#define HR_E_OUTOFMEMORY 0x8007000Eu
#define HR_E_INVALIDARG 0x80070057u
#define HR_E_ACCESSDENIED 0x80070005u
#define HR_HCS_E_INVALID_LAYER 0x80370112u
#define HR_HCS_E_ACCESS_DENIED 0x8037011Bu

/* Appends s as a JSON string; false when s is not UTF-8 or has a control character. */
static bool
put_string(struct strbuf *b, const char *s)
{
    strbuf_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned c = *p;
        size_t n = c < 0x80             ? 1
                   : (c & 0xE0) == 0xC0 ? 2
                   : (c & 0xF0) == 0xE0 ? 3
                   : (c & 0xF8) == 0xF0 ? 4
                                        : 0;
        if (n == 0 || c < 0x20 || c == 0x7F || (n == 2 && c < 0xC2) || (n == 4 && c > 0xF4))
            return false;
        for (size_t i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80)
                return false;
        if (c == '"' || c == '\\')
            strbuf_puts(b, c == '"' ? "\\\"" : "\\\\");
        else
            strbuf_put(b, (const char *)p, n);
        p += n;
    }
    strbuf_puts(b, "\"");
    return true;
}

/* LayerData of layers[0..n), with "FilterType" when filter is not NULL. */
static char *
layer_data(const struct wcs_layer *layers, size_t n, const char *filter, struct err *err)
{
    struct strbuf b = {0};
    strbuf_puts(&b, "{\"SchemaVersion\":{\"Major\":2,\"Minor\":1},\"Layers\":[");
    for (size_t i = 0; i < n; i++) {
        strbuf_puts(&b, i ? ",{\"Id\":" : "{\"Id\":");
        bool ok = put_string(&b, layers[i].id);
        strbuf_puts(&b, ",\"Path\":");
        ok = ok && put_string(&b, layers[i].path);
        strbuf_puts(&b, "}");
        if (!ok) {
            strbuf_clear(&b);
            err_set(err, EINVAL, "layer data: layer %zu (%.100s): not UTF-8 or a control character",
                    i, layers[i].path);
            return NULL;
        }
    }
    strbuf_puts(&b, "]");
    if (filter) {
        strbuf_puts(&b, ",\"FilterType\":");
        put_string(&b, filter);
    }
    strbuf_puts(&b, "}");
    char *s = strbuf_steal(&b, NULL);
    if (!s)
        err_set(err, ENOMEM, "layer data: out of memory");
    return s;
}

char *
wcs_layer_data(const struct wcs_layer *layers, size_t n, struct err *err)
{
    return layer_data(layers, n, NULL, err);
}

char *
wcs_union_layer_data(const struct wcs_layer *layers, size_t n, struct err *err)
{
    return layer_data(layers, n, "UnionFS", err);
}

static const unsigned char layer_ns[16] = {0xfa, 0x8c, 0xb1, 0x13, 0xb3, 0xb4, 0x41, 0x90,
                                           0x9b, 0x82, 0xb6, 0x89, 0x15, 0xae, 0xd3, 0xd6};

int
wcs_layer_id(const char *name, char out[WCS_LAYER_ID_SIZE], struct err *err)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    bool ok = c && EVP_DigestInit_ex(c, EVP_sha1(), NULL) == 1 &&
              EVP_DigestUpdate(c, layer_ns, sizeof(layer_ns)) == 1 &&
              EVP_DigestUpdate(c, name, strlen(name)) == 1 &&
              EVP_DigestFinal_ex(c, md, &mdlen) == 1 && mdlen >= 16;
    EVP_MD_CTX_free(c);
    if (!ok)
        return err_set(err, ENOMEM, "layer id of %.80s: sha-1 failed", name);
    md[6] = (unsigned char)((md[6] & 0x0f) | 0x50); /* version 5 */
    md[8] = (unsigned char)((md[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, WCS_LAYER_ID_SIZE,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", md[0], md[1],
             md[2], md[3], md[4], md[5], md[6], md[7], md[8], md[9], md[10], md[11], md[12], md[13],
             md[14], md[15]);
    return 0;
}

const char *
wcs_os_layer_options(bool vm)
{
    return vm ? "{\"Type\":\"Vm\"}" : "{\"Type\":\"Container\"}";
}

int
wcs_hresult_errno(uint32_t hr)
{
    switch (hr) {
    case HR_E_OUTOFMEMORY:
        return ENOMEM;
    case HR_E_INVALIDARG:
        return EINVAL;
    case HR_E_ACCESSDENIED:
    case HR_HCS_E_ACCESS_DENIED:
        return EACCES;
    case HR_HCS_E_INVALID_LAYER:
        return ERR_INVALID_CONTENT;
    default:
        break;
    }
    if ((hr & 0xFFFF0000u) == 0x80070000u) {
        switch (hr & 0xFFFFu) {
        case 2:    /* ERROR_FILE_NOT_FOUND */
        case 3:    /* ERROR_PATH_NOT_FOUND */
        case 1168: /* ERROR_NOT_FOUND */
            return ENOENT;
        case 80:  /* ERROR_FILE_EXISTS */
        case 183: /* ERROR_ALREADY_EXISTS */
            return EEXIST;
        case 5: /* ERROR_ACCESS_DENIED */
            return EACCES;
        case 112: /* ERROR_DISK_FULL */
            return ENOSPC;
        default:
            break;
        }
    }
    return EIO;
}
