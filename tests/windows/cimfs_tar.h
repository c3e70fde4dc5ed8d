/*
 * A Windows layer tar writer for the CimFS suites: ustar blocks with the
 * PAX records go-winio writes, built in memory and read back in short
 * pieces as a pipe gives them. The same writer as
 * tests/unit/test_store_wclayer.c's (one file per suite here, so it is a
 * header of static functions). Test code only.
 */
#ifndef BERTH_TESTS_WINDOWS_CIMFS_TAR_H
#define BERTH_TESTS_WINDOWS_CIMFS_TAR_H

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

struct tbuf {
    unsigned char *p;
    size_t len, cap, off;
};

static void
tb_put(struct tbuf *t, const void *d, size_t n)
{
    if (t->len + n > t->cap) {
        t->cap = (t->len + n) * 2 + 4096;
        t->p = realloc(t->p, t->cap);
        ck_assert_ptr_nonnull(t->p);
    }
    memcpy(t->p + t->len, d, n);
    t->len += n;
}

static void
tb_pad(struct tbuf *t)
{
    static const unsigned char z[512];
    if (t->len % 512)
        tb_put(t, z, 512 - t->len % 512);
}

static void
header(struct tbuf *t, const char *name, char type, size_t size, const char *link)
{
    unsigned char b[512] = {0};
    snprintf((char *)b, 100, "%s", name);
    snprintf((char *)b + 100, 8, "%07o", 0644);
    snprintf((char *)b + 108, 8, "%07o", 0);
    snprintf((char *)b + 116, 8, "%07o", 0);
    snprintf((char *)b + 124, 12, "%011zo", size);
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
    tb_put(t, b, 512);
}

/* One entry: PAX records "key=value" (NULL-terminated, may be NULL), then the header and data. */
static void
entry(struct tbuf *t, const char *name, char type, const char *data, const char *link,
      const char *const *pax)
{
    char rec[8192];
    size_t rl = 0;
    bool long_name = strlen(name) > 99;
    for (size_t i = 0; (pax && pax[i]) || long_name; i++) {
        char kv[4200];
        if (pax && pax[i])
            snprintf(kv, sizeof(kv), "%s", pax[i]);
        else {
            snprintf(kv, sizeof(kv), "path=%s", name);
            long_name = false;
        }
        size_t n = strlen(kv) + 2, len = n;
        for (;;) {
            char num[16];
            size_t d = (size_t)snprintf(num, sizeof(num), "%zu", len);
            if (d + n == len)
                break;
            len = d + n;
        }
        rl += (size_t)snprintf(rec + rl, sizeof(rec) - rl, "%zu %s\n", len, kv);
        if (!(pax && pax[i]))
            break;
    }
    if (rl) {
        header(t, "PaxHeaders/x", 'x', rl, NULL);
        tb_put(t, rec, rl);
        tb_pad(t);
    }
    size_t dl = data ? strlen(data) : 0;
    header(t, name, type, dl, link);
    if (dl) {
        tb_put(t, data, dl);
        tb_pad(t);
    }
}

static void
finish(struct tbuf *t)
{
    static const unsigned char z[1024];
    tb_put(t, z, 1024);
}

static ssize_t
tb_read(void *ctx, void *buf, size_t len)
{
    struct tbuf *t = ctx;
    size_t n = t->len - t->off < len ? t->len - t->off : len;
    if (n > 7)
        n = n / 2 + 1; /* short reads, as a pipe gives */
    memcpy(buf, t->p + t->off, n);
    t->off += n;
    return (ssize_t)n;
}

#endif
