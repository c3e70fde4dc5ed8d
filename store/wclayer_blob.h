/*
 * A Windows layer blob (tar, tar+gzip, tar+zstd) read once: its bytes
 * hashed as they come (the blob's digest), inflated by libarchive's
 * filters, and the tar stream hashed too (the diff_id) while
 * store/wclayer.h's reader (wclayer_import, through consume) takes it.
 * What consume leaves of the stream is read and hashed after it
 * returns, so the digests cover every byte.
 *
 * Portable (tested on Linux and under Wine); blocking as the read
 * callback is: pool threads.
 */
#ifndef BERTH_STORE_WCLAYER_BLOB_H
#define BERTH_STORE_WCLAYER_BLOB_H

#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "store/digest.h"
#include "store/wintar.h"

struct wcl_blob_result {
    char digest[DIGEST_STR_LEN]; /* of the blob as read */
    uint64_t size;
    char diff_id[DIGEST_STR_LEN]; /* of the tar stream */
    uint64_t tar_size;
};

/* Reads the tar stream (read(rctx, ...)) to its end marker. */
typedef int (*wcl_consume_fn)(void *arg, wtar_read_fn read, void *rctx, struct err *err);

/*
 * Reads the blob from read(ctx) and hands its tar stream to consume.
 * ERR_INVALID_CONTENT for an empty or damaged blob; consume's error as it
 * is; the read callback's errno.
 */
int wcl_blob_read(ssize_t (*read)(void *ctx, void *buf, size_t len), void *ctx,
                  wcl_consume_fn consume, void *arg, struct wcl_blob_result *res, struct err *err);

#endif
