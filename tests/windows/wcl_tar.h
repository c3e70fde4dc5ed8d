/*
 * A small writer of Windows layer tars for the Windows-only suites: ustar
 * headers, PAX records (MSWINDOWS.fileattr and friends) and the end
 * marker, into memory, and a read callback over the result that hands
 * out short pieces as a pipe would. Header-only; the suite's thread.
 */
#ifndef BERTH_TESTS_WINDOWS_WCL_TAR_H
#define BERTH_TESTS_WINDOWS_WCL_TAR_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

struct wtb {
    unsigned char *p;
    size_t len, cap, off;
};

static inline void
wtb_put(struct wtb *t, const void *d, size_t n)
{
    if (t->len + n > t->cap) {
        t->cap = (t->len + n) * 2 + 4096;
        t->p = realloc(t->p, t->cap);
        ck_assert_ptr_nonnull(t->p);
    }
    memcpy(t->p + t->len, d, n);
    t->len += n;
}

static inline void
wtb_pad(struct wtb *t)
{
    static const unsigned char z[512];
    if (t->len % 512)
        wtb_put(t, z, 512 - t->len % 512);
}

static inline void
wtb_header(struct wtb *t, const char *name, char type, size_t size, const char *link)
{
    unsigned char b[512] = {0};
    snprintf((char *)b, 100, "%s", name);
    snprintf((char *)b + 100, 8, "%07o", 0644);
    snprintf((char *)b + 108, 8, "%07o", 0);
    snprintf((char *)b + 116, 8, "%07o", 0);
    snprintf((char *)b + 124, 12, "%011o", (unsigned)size);
    snprintf((char *)b + 136, 12, "%011o", 1600000000);
    memset(b + 148, ' ', 8);
    b[156] = (unsigned char)type;
    if (link)
        snprintf((char *)b + 157, 100, "%s", link);
    memcpy(b + 257,
           "ustar\0"
           "00",
           8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += b[i];
    snprintf((char *)b + 148, 8, "%06o", sum);
    wtb_put(t, b, 512);
}

/* One entry, after the PAX record "key=value" pax (NULL: none). */
static inline void
wtb_entry(struct wtb *t, const char *name, char type, const char *data, const char *pax)
{
    if (pax) {
        size_t n = strlen(pax) + 2, len = n;
        for (;;) {
            char num[16];
            size_t d = (size_t)snprintf(num, sizeof(num), "%u", (unsigned)len);
            if (d + n == len)
                break;
            len = d + n;
        }
        char rec[1024];
        int rl = snprintf(rec, sizeof(rec), "%u %s\n", (unsigned)len, pax);
        wtb_header(t, "PaxHeaders/x", 'x', (size_t)rl, NULL);
        wtb_put(t, rec, (size_t)rl);
        wtb_pad(t);
    }
    size_t dl = data ? strlen(data) : 0;
    wtb_header(t, name, type, type == '1' ? 0 : dl, type == '1' ? data : NULL);
    if (type == '1')
        return;
    if (dl) {
        wtb_put(t, data, dl);
        wtb_pad(t);
    }
}

static inline void
wtb_finish(struct wtb *t)
{
    static const unsigned char z[1024];
    wtb_put(t, z, 1024);
}

static inline ssize_t
wtb_read(void *ctx, void *buf, size_t len)
{
    struct wtb *t = ctx;
    size_t n = t->len - t->off < len ? t->len - t->off : len;
    if (n > 7)
        n = n / 2 + 1;
    memcpy(buf, t->p + t->off, n);
    t->off += n;
    return (ssize_t)n;
}

#endif
