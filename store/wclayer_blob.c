/*
 * Windows layer blobs read once, hashed twice (store/wclayer_blob.h).
 * Pool threads.
 */
#include "store/wclayer_blob.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define BLOB_BUF 65536

struct blob {
    ssize_t (*read)(void *ctx, void *buf, size_t len);
    void *ctx;
    struct archive *a;
    struct sha256 *zhash, *thash;
    unsigned char *zbuf;
    uint64_t zsize, tsize;
    int read_errno; /* the source's failure, kept for the message */
    bool ended;
};

static la_ssize_t
source_cb(struct archive *a, void *arg, const void **buf)
{
    (void)a;
    struct blob *b = arg;
    ssize_t n = b->ended ? 0 : b->read(b->ctx, b->zbuf, BLOB_BUF);
    if (n < 0) {
        b->read_errno = (int)-n;
        return -1;
    }
    if (n == 0)
        b->ended = true;
    sha256_update(b->zhash, b->zbuf, (size_t)n);
    b->zsize += (uint64_t)n;
    *buf = b->zbuf;
    return n;
}

/* The tar stream, for the consumer: -EIO when the blob is damaged (the
 * archive's message is taken after). */
static ssize_t
tar_cb(void *arg, void *buf, size_t len)
{
    struct blob *b = arg;
    la_ssize_t n = archive_read_data(b->a, buf, len);
    if (n < 0)
        return b->read_errno ? -b->read_errno : -EIO;
    sha256_update(b->thash, buf, (size_t)n);
    b->tsize += (uint64_t)n;
    return n;
}

static int
blob_error(struct blob *b, const char *what, struct err *err)
{
    if (b->read_errno)
        return err_errno(err, b->read_errno, "%s: read", what);
    const char *msg = archive_error_string(b->a);
    return err_set(err, ERR_INVALID_CONTENT, "%s: %s", what, msg ? msg : "damaged");
}

int
wcl_blob_read(ssize_t (*read)(void *ctx, void *buf, size_t len), void *ctx, wcl_consume_fn consume,
              void *arg, struct wcl_blob_result *res, struct err *err)
{
    struct blob b = {.read = read, .ctx = ctx};
    b.zhash = sha256_new();
    b.thash = sha256_new();
    b.zbuf = malloc(BLOB_BUF);
    b.a = archive_read_new();
    int rc = 0;
    unsigned char *drain = malloc(BLOB_BUF);
    if (!b.zhash || !b.thash || !b.zbuf || !b.a || !drain) {
        rc = err_set(err, ENOMEM, "layer blob: out of memory");
        goto out;
    }
    archive_read_support_filter_all(b.a);
    archive_read_support_format_raw(b.a);
    archive_read_support_format_empty(b.a);
    struct archive_entry *e;
    if (archive_read_open(b.a, &b, NULL, source_cb, NULL) != ARCHIVE_OK) {
        rc = blob_error(&b, "layer blob", err);
        goto out;
    }
    int r = archive_read_next_header(b.a, &e);
    if (r == ARCHIVE_EOF) {
        rc = err_set(err, ERR_INVALID_CONTENT, "layer blob is empty");
        goto out;
    }
    if (r < ARCHIVE_WARN) {
        rc = blob_error(&b, "layer blob", err);
        goto out;
    }
    rc = consume(arg, tar_cb, &b, err);
    if (rc < 0) {
        /* The tar reader's EIO means the blob was damaged: say how. */
        if (err->code == EIO && !b.read_errno)
            rc = blob_error(&b, "layer blob", err);
        goto out;
    }
    /* What the tar reader left, then what the decompressor left. */
    la_ssize_t n;
    while ((n = archive_read_data(b.a, drain, BLOB_BUF)) > 0) {
        sha256_update(b.thash, drain, (size_t)n);
        b.tsize += (uint64_t)n;
    }
    if (n < 0) {
        rc = blob_error(&b, "layer blob", err);
        goto out;
    }
    while (!b.ended) {
        const void *p;
        if (source_cb(b.a, &b, &p) < 0) {
            rc = blob_error(&b, "layer blob", err);
            goto out;
        }
    }
    sha256_final(b.zhash, res->digest);
    sha256_final(b.thash, res->diff_id);
    res->size = b.zsize;
    res->tar_size = b.tsize;
out:
    if (b.a)
        archive_read_free(b.a);
    sha256_free(b.zhash);
    sha256_free(b.thash);
    free(b.zbuf);
    free(drain);
    return rc;
}
