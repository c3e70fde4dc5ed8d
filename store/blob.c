/*
 * The content store: blobs under <root>/content/sha256/<hex>, temporaries
 * under <root>/tmp/. Everything here blocks on disk and is called from
 * pool jobs or at start-up. The store itself holds no mutable state after
 * blob_store_open, so any number of threads may use it at once: a blob's
 * visibility is decided by one rename(2), and two writers of the same
 * blob simply race to rename identical content.
 */
#include "store/blob.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/osfs.h"
#include "common/rootdir.h"

struct blob_store {
    char *root;
    char *content_dir; /* <root>/content/sha256 */
    char *tmp_dir;     /* <root>/tmp */
};

struct blob_writer {
    struct blob_store *bs;
    char *staging_dir; /* NULL: content/ */
    char *tmp_path;
    int fd;
    struct sha256 *hash;
    char expected_digest[DIGEST_STR_LEN]; /* "" when unknown */
    int64_t expected_size;
    int64_t max_size;
    int64_t size;
};

void
blob_store_free(struct blob_store *bs)
{
    if (!bs)
        return;
    free(bs->root);
    free(bs->content_dir);
    free(bs->tmp_dir);
    free(bs);
}

struct blob_store *
blob_store_open(const char *root, struct err *err)
{
    struct blob_store *bs = calloc(1, sizeof(*bs));
    if (!bs) {
        err_set(err, ENOMEM, "open content store %s: out of memory", root);
        return NULL;
    }
    bs->root = strdup(root);
    bs->content_dir = fs_path_join(root, "content/sha256");
    bs->tmp_dir = fs_path_join(root, "tmp");
    if (!bs->root || !bs->content_dir || !bs->tmp_dir) {
        err_set(err, ENOMEM, "open content store %s: out of memory", root);
        blob_store_free(bs);
        return NULL;
    }
    if (fs_mkdir_p(bs->content_dir, 0700, err) < 0 || fs_mkdir_p(bs->tmp_dir, 0700, err) < 0) {
        err_wrap(err, "open content store %s", root);
        blob_store_free(bs);
        return NULL;
    }
    return bs;
}

int
blob_store_clean_tmp(struct blob_store *bs, struct err *err)
{
    cleanup_free char *path = NULL;
    struct osfs_dir *dir = NULL;
    int ret = osfs_dir_open(bs->tmp_dir, &dir);
    if (ret < 0)
        return err_errno(err, -ret, "clean %s", bs->tmp_dir);
    const char *name;
    while ((name = osfs_dir_next(dir, NULL)) != NULL) {
        free(path);
        path = fs_path_join(bs->tmp_dir, name);
        if (!path) {
            ret = err_set(err, ENOMEM, "clean %s: out of memory", bs->tmp_dir);
            break;
        }
        ret = fs_remove_tree(path, err);
        if (ret < 0) {
            err_wrap(err, "clean %s", bs->tmp_dir);
            break;
        }
    }
    osfs_dir_close(dir);
    return ret;
}

int
blob_staging_dir_new(struct blob_store *bs, char **out, struct err *err)
{
    char *path = NULL;
    if (asprintf(&path, "%s/staging-XXXXXX", bs->tmp_dir) < 0)
        return err_set(err, ENOMEM, "create staging directory: out of memory");
    int r = osfs_mkdtemp(path);
    if (r < 0) {
        free(path);
        return err_errno(err, -r, "create staging directory in %s", bs->tmp_dir);
    }
    *out = path;
    return 0;
}

char *
blob_path(struct blob_store *bs, const char *digest)
{
    const char *hex = digest_hex(digest);
    if (!hex)
        return NULL;
    return fs_path_join(bs->content_dir, hex);
}

bool
blob_exists(struct blob_store *bs, const char *digest)
{
    cleanup_free char *path = blob_path(bs, digest);
    struct os_stat st;
    return path && osfs_stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Builds the path of a valid digest or fails with EINVAL/ENOMEM. */
static int
path_of(struct blob_store *bs, const char *digest, char **out, struct err *err)
{
    if (!digest_valid(digest))
        return err_set(err, EINVAL, "invalid digest '%s'", digest ? digest : "");
    *out = blob_path(bs, digest);
    if (!*out)
        return err_set(err, ENOMEM, "blob %s: out of memory", digest);
    return 0;
}

struct blob_writer *
blob_writer_new(struct blob_store *bs, const char *staging_dir, const char *expected_digest,
                int64_t expected_size, int64_t max_size, struct err *err)
{
    if (expected_digest && !digest_valid(expected_digest)) {
        err_set(err, EINVAL, "write blob: invalid digest '%s'", expected_digest);
        return NULL;
    }
    struct blob_writer *w = calloc(1, sizeof(*w));
    if (!w) {
        err_set(err, ENOMEM, "write blob: out of memory");
        return NULL;
    }
    w->bs = bs;
    w->fd = -1;
    w->expected_size = expected_size < 0 ? -1 : expected_size;
    w->max_size = max_size < 0 ? -1 : max_size;
    if (expected_digest)
        snprintf(w->expected_digest, sizeof(w->expected_digest), "%s", expected_digest);
    if (staging_dir && !(w->staging_dir = strdup(staging_dir)))
        goto oom;
    if (!(w->hash = sha256_new()))
        goto oom;
    if (asprintf(&w->tmp_path, "%s/blob-XXXXXX", bs->tmp_dir) < 0) {
        w->tmp_path = NULL;
        goto oom;
    }
    w->fd = osfs_mkstemp(w->tmp_path);
    if (w->fd < 0) {
        err_errno(err, -w->fd, "write blob: create temporary in %s", bs->tmp_dir);
        free(w->tmp_path);
        w->tmp_path = NULL;
        blob_writer_abort(w);
        return NULL;
    }
    return w;
oom:
    err_set(err, ENOMEM, "write blob: out of memory");
    blob_writer_abort(w);
    return NULL;
}

static const char *
writer_name(const struct blob_writer *w)
{
    return w->expected_digest[0] ? w->expected_digest : "(unknown digest)";
}

int
blob_writer_write(struct blob_writer *w, const void *buf, size_t len, struct err *err)
{
    if (len > (uint64_t)INT64_MAX - (uint64_t)w->size)
        return err_set(err, ERR_INVALID_CONTENT, "blob %s: content is too large", writer_name(w));
    int64_t total = w->size + (int64_t)len;
    if (w->expected_size >= 0 && total > w->expected_size)
        return err_set(err, ERR_INVALID_CONTENT,
                       "blob %s: content is larger than the expected %lld bytes (at least %lld)",
                       writer_name(w), (long long)w->expected_size, (long long)total);
    if (w->max_size >= 0 && total > w->max_size)
        return err_set(err, ERR_INVALID_CONTENT,
                       "blob %s: content is larger than the limit of %lld bytes (at least %lld)",
                       writer_name(w), (long long)w->max_size, (long long)total);
    sha256_update(w->hash, buf, len);
    const char *p = buf;
    size_t left = len;
    while (left > 0) {
        ssize_t n = write(w->fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_errno(err, errno, "blob %s: write %s", writer_name(w), w->tmp_path);
        p += n;
        left -= (size_t)n;
    }
    w->size = total;
    return 0;
}

int64_t
blob_writer_size(const struct blob_writer *w)
{
    return w->size;
}

void
blob_writer_abort(struct blob_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    if (w->tmp_path)
        osfs_unlink(w->tmp_path);
    free(w->tmp_path);
    free(w->staging_dir);
    sha256_free(w->hash);
    free(w);
}

/*
 * Renames src to dir/<hex> unless a blob already sits there, then makes
 * the directory entry durable. src is unlinked when it is not needed.
 */
static int
install(const char *src, const char *dir, const char *digest, struct err *err)
{
    cleanup_free char *dst = fs_path_join(dir, digest_hex(digest));
    if (!dst)
        return err_set(err, ENOMEM, "store blob %s: out of memory", digest);
    struct os_stat st;
    if (osfs_stat(dst, &st) == 0 && S_ISREG(st.st_mode)) {
        /* Content-addressed: what is there is what we have. */
        osfs_unlink(src);
        return 0;
    }
    int r = osfs_rename(src, dst);
    if (r < 0)
        return err_errno(err, -r, "store blob %s: rename %s to %s", digest, src, dst);
    return fs_fsync_dir(dir, err);
}

int
blob_writer_finish(struct blob_writer *w, char out_digest[DIGEST_STR_LEN], int64_t *out_size,
                   struct err *err)
{
    char digest[DIGEST_STR_LEN];
    int ret;
    sha256_final(w->hash, digest);
    if (w->expected_size >= 0 && w->size != w->expected_size) {
        ret = err_set(err, ERR_INVALID_CONTENT, "blob %s: content is %lld bytes, expected %lld",
                      writer_name(w), (long long)w->size, (long long)w->expected_size);
        goto out;
    }
    if (w->expected_digest[0] && strcmp(digest, w->expected_digest) != 0) {
        ret = err_set(err, ERR_INVALID_CONTENT, "blob %s: content digest is %s", w->expected_digest,
                      digest);
        goto out;
    }
    if ((ret = osfs_fsync(w->fd)) < 0) {
        ret = err_errno(err, -ret, "blob %s: fsync %s", digest, w->tmp_path);
        goto out;
    }
    close(w->fd);
    w->fd = -1;
    ret = install(w->tmp_path, w->staging_dir ? w->staging_dir : w->bs->content_dir, digest, err);
    if (ret < 0)
        goto out;
    if (out_digest)
        memcpy(out_digest, digest, DIGEST_STR_LEN);
    if (out_size)
        *out_size = w->size;
out:
    blob_writer_abort(w); /* the temporary is gone already when it was installed */
    return ret;
}

int
blob_commit_staged(struct blob_store *bs, const char *staging_dir, const char *digest,
                   struct err *err)
{
    if (!digest_valid(digest))
        return err_set(err, EINVAL, "commit blob: invalid digest '%s'", digest ? digest : "");
    cleanup_free char *src = fs_path_join(staging_dir, digest_hex(digest));
    if (!src)
        return err_set(err, ENOMEM, "commit blob %s: out of memory", digest);
    struct os_stat st;
    int r = osfs_lstat(src, &st);
    if (r < 0) {
        if (r == -ENOENT && blob_exists(bs, digest))
            return 0;
        return err_errno(err, -r, "commit blob %s: %s", digest, src);
    }
    if (!S_ISREG(st.st_mode))
        return err_set(err, EINVAL, "commit blob %s: %s is not a regular file", digest, src);
    return install(src, bs->content_dir, digest, err);
}

int
blob_stat(struct blob_store *bs, const char *digest, int64_t *size, struct err *err)
{
    cleanup_free char *path = NULL;
    int ret = path_of(bs, digest, &path, err);
    if (ret < 0)
        return ret;
    struct os_stat st;
    if ((ret = osfs_stat(path, &st)) < 0) {
        if (ret == -ENOENT)
            return err_set(err, ENOENT, "blob %s: not found", digest);
        return err_errno(err, -ret, "blob %s: stat %s", digest, path);
    }
    *size = (int64_t)st.st_size;
    return 0;
}

int
blob_read_small(struct blob_store *bs, const char *digest, size_t max, char **out, size_t *len,
                struct err *err)
{
    cleanup_free char *path = NULL;
    int ret = path_of(bs, digest, &path, err);
    if (ret < 0)
        return ret;
    cleanup_close int fd = osfs_open(path, O_RDONLY, 0);
    if (fd < 0) {
        if (fd == -ENOENT)
            return err_set(err, ENOENT, "blob %s: not found", digest);
        return err_errno(err, -fd, "blob %s: open %s", digest, path);
    }
    struct os_stat st;
    if ((ret = osfs_fstat(fd, &st)) < 0)
        return err_errno(err, -ret, "blob %s: stat %s", digest, path);
    if (!S_ISREG(st.st_mode))
        return err_set(err, EIO, "blob %s: %s is not a regular file", digest, path);
    if ((uint64_t)st.st_size > max)
        return err_set(err, ERR_INVALID_CONTENT, "blob %s: %lld bytes is over the limit of %zu",
                       digest, (long long)st.st_size, max);
    size_t want = (size_t)st.st_size;
    cleanup_free char *buf = malloc(want + 1);
    if (!buf)
        return err_set(err, ENOMEM, "blob %s: out of memory", digest);
    size_t got = 0;
    while (got < want) {
        ssize_t n = read(fd, buf + got, want - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_errno(err, errno, "blob %s: read %s", digest, path);
        if (n == 0)
            return err_set(err, EIO, "blob %s: %s shrank while being read", digest, path);
        got += (size_t)n;
    }
    buf[got] = '\0';
    *out = steal_ptr(&buf);
    if (len)
        *len = got;
    return 0;
}

int
blob_remove(struct blob_store *bs, const char *digest, struct err *err)
{
    cleanup_free char *path = NULL;
    int ret = path_of(bs, digest, &path, err);
    if (ret < 0)
        return ret;
    if ((ret = osfs_unlink(path)) < 0) {
        if (ret == -ENOENT)
            return err_set(err, ENOENT, "blob %s: not found", digest);
        return err_errno(err, -ret, "blob %s: remove %s", digest, path);
    }
    return 0;
}

int
blob_list(struct blob_store *bs, blob_list_cb cb, void *ctx, struct err *err)
{
    int dfd = rootdir_open(bs->content_dir);
    struct osfs_dir *dir = NULL;
    int ret = dfd < 0 ? dfd : osfs_dir_open_at(dfd, &dir);
    if (ret < 0) {
        rootdir_close(dfd);
        return err_errno(err, -ret, "list blobs in %s", bs->content_dir);
    }
    const char *name;
    while ((name = osfs_dir_next(dir, NULL)) != NULL) {
        if (strlen(name) != DIGEST_HEX_LEN || !digest_hex_valid(name, DIGEST_HEX_LEN))
            continue;
        struct os_stat st;
        int r = rootdir_stat(dfd, name, &st);
        if (r < 0) {
            if (r == -ENOENT)
                continue;
            ret = err_errno(err, -r, "list blobs: stat %s/%s", bs->content_dir, name);
            break;
        }
        if (!S_ISREG(st.st_mode))
            continue;
        char digest[DIGEST_STR_LEN];
        snprintf(digest, sizeof(digest), DIGEST_PREFIX "%.64s", name);
        ret = cb(digest, (int64_t)st.st_size, ctx);
        if (ret != 0)
            break;
    }
    osfs_dir_close(dir);
    rootdir_close(dfd);
    return ret;
}
