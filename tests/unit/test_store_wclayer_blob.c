/*
 * Windows layer blobs read once (store/wclayer_blob.c): a plain and a
 * gzip-compressed layer tar that this suite writes reach wclayer_import
 * entry by entry, with the blob's digest and the tar's diff_id computed
 * over every byte (trailing padding included); a damaged or empty blob
 * is ERR_INVALID_CONTENT, and the consumer's own error comes back as it
 * is. Portable: runs on Linux and under Wine.
 */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/digest.h"
#include "store/wclayer.h"
#include "store/wclayer_blob.h"

struct buf {
    unsigned char *p;
    size_t len, cap, off;
};

static void
put(struct buf *t, const void *d, size_t n)
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
header(struct buf *t, const char *name, char type, size_t size)
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
    memcpy(b + 257,
           "ustar\0"
           "00",
           8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += b[i];
    snprintf((char *)b + 148, 8, "%06o", sum);
    put(t, b, 512);
}

/* A layer: Files/, Files/a.txt ("hello"), Hives/, the end marker and extra zero padding. */
static void
layer_tar(struct buf *t)
{
    static const unsigned char z[512];
    header(t, "Files/", '5', 0);
    header(t, "Files/a.txt", '0', 5);
    unsigned char d[512] = "hello";
    put(t, d, 512);
    header(t, "Hives/", '5', 0);
    for (int i = 0; i < 6; i++) /* end marker, then what tar -b20 pads with */
        put(t, z, 512);
}

static void
gzip(const struct buf *in, struct buf *out)
{
    struct archive *a = archive_write_new();
    ck_assert_int_eq(archive_write_add_filter_gzip(a), ARCHIVE_OK);
    ck_assert_int_eq(archive_write_set_format_raw(a), ARCHIVE_OK);
    ck_assert_int_eq(archive_write_set_bytes_in_last_block(a, 1), ARCHIVE_OK);
    size_t cap = in->len + 4096, used = 0;
    out->p = malloc(cap);
    ck_assert_int_eq(archive_write_open_memory(a, out->p, cap, &used), ARCHIVE_OK);
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_filetype(e, AE_IFREG);
    ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
    ck_assert_int_eq(archive_write_data(a, in->p, in->len), (la_ssize_t)in->len);
    archive_entry_free(e);
    ck_assert_int_eq(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
    out->len = used;
}

static ssize_t
read_cb(void *ctx, void *dst, size_t len)
{
    struct buf *b = ctx;
    size_t n = b->len - b->off < len ? b->len - b->off : len;
    if (n > 7)
        n = 7 + n / 3; /* uneven pieces */
    if (n)             /* an empty buffer has no data pointer */
        memcpy(dst, b->p + b->off, n);
    b->off += n;
    return (ssize_t)n;
}

/* A sink that counts entries and bytes. */
struct rec {
    int entries;
    size_t bytes;
};

static int
rec_entry(void *ctx, const struct wcl_entry *e, struct err *err)
{
    (void)e, (void)err;
    ((struct rec *)ctx)->entries++;
    return 0;
}

static int
rec_data(void *ctx, const void *b, size_t len, struct err *err)
{
    (void)b, (void)err;
    ((struct rec *)ctx)->bytes += len;
    return 0;
}

static int
rec_writable(void *ctx, const char *path, struct err *err)
{
    (void)ctx, (void)path, (void)err;
    return 0;
}

static int
consume(void *arg, wtar_read_fn read, void *rctx, struct err *err)
{
    struct wcl_sink sink = {rec_entry, rec_data, rec_writable, arg};
    struct wcl_layer_info info;
    return wclayer_import(read, rctx, &sink, &info, err);
}

static int
consume_fails(void *arg, wtar_read_fn read, void *rctx, struct err *err)
{
    (void)arg, (void)read, (void)rctx;
    return err_set(err, ENOSPC, "the sink is full");
}

static void
check_blob(const struct buf *tar, struct buf *blob)
{
    struct rec r = {0};
    struct wcl_blob_result res = {0};
    struct err err = {0};
    blob->off = 0;
    ck_assert_msg(wcl_blob_read(read_cb, blob, consume, &r, &res, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(r.entries, 3);
    ck_assert_uint_eq(r.bytes, 5);
    char want[DIGEST_STR_LEN];
    digest_of(blob->p, blob->len, want);
    ck_assert_str_eq(res.digest, want);
    ck_assert_uint_eq(res.size, blob->len);
    digest_of(tar->p, tar->len, want);
    ck_assert_str_eq(res.diff_id, want);
    ck_assert_uint_eq(res.tar_size, tar->len);
}

START_TEST(plain_and_gzip_blobs_are_hashed_over_every_byte)
{
    struct buf tar = {0}, gz = {0};
    layer_tar(&tar);
    check_blob(&tar, &tar);
    gzip(&tar, &gz);
    ck_assert(gz.len < tar.len);
    check_blob(&tar, &gz);
    free(tar.p);
    free(gz.p);
}
END_TEST

START_TEST(damaged_and_empty_blobs_are_invalid_content)
{
    struct buf tar = {0}, gz = {0};
    layer_tar(&tar);
    gzip(&tar, &gz);
    gz.len -= 12; /* the gzip trailer and some data gone */
    struct rec r = {0};
    struct wcl_blob_result res = {0};
    struct err err = {0};
    ck_assert_int_eq(wcl_blob_read(read_cb, &gz, consume, &r, &res, &err), -ERR_INVALID_CONTENT);
    struct buf empty = {0};
    ck_assert_int_eq(wcl_blob_read(read_cb, &empty, consume, &r, &res, &err), -ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, "empty") != NULL, "%s", err.msg);
    free(tar.p);
    free(gz.p);
}
END_TEST

START_TEST(the_consumers_error_comes_back_as_it_is)
{
    struct buf tar = {0};
    layer_tar(&tar);
    struct wcl_blob_result res = {0};
    struct err err = {0};
    ck_assert_int_eq(wcl_blob_read(read_cb, &tar, consume_fails, NULL, &res, &err), -ENOSPC);
    ck_assert_str_eq(err.msg, "the sink is full");
    free(tar.p);
}
END_TEST

static Suite *
blob_suite(void)
{
    Suite *s = suite_create("store_wclayer_blob");
    TCase *tc = tcase_create("blob");
    tcase_add_test(tc, plain_and_gzip_blobs_are_hashed_over_every_byte);
    tcase_add_test(tc, damaged_and_empty_blobs_are_invalid_content);
    tcase_add_test(tc, the_consumers_error_comes_back_as_it_is);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(blob_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
