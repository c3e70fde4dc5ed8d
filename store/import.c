/*
 * Image import: gathering blobs (from an upload or a layout directory),
 * resolving the manifest and config, the platform check, unpacking the
 * layers into snapshots and committing the image. See import.h for the
 * guarantees. Runs on a pool thread; blocking.
 *
 * Upload: the tar stream is read once. Each file lands in this import's
 * staging directory as it is hashed: entries named blobs/sha256/<hex> are
 * checked against their name (and skipped unread when the content store
 * already has them); other files (docker save's config and layer.tar
 * files) are staged under the digest they hash to. When the stream ends,
 * index.json or manifest.json says which image it holds.
 *
 * Layout directory: index.json is read first; an image whose manifest is
 * already stored is answered from the database without reading any blob.
 * Otherwise each layer is read once: the bytes go to the staging
 * directory and to the unpacker at the same time.
 */
#include "store/import.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/osfs.h"
#include "common/rootdir.h"
#include "common/strv.h"
#include "store/image_build.h"
#include "store/refname.h"
#include "store/oci.h"
#include "store/unpack.h"

#define READ_CHUNK (256 * 1024)
#define PROGRESS_STEP (8 << 20)

/* An upload's regular file, by its path in the archive. */
struct staged_file {
    char *path;
    char digest[DIGEST_STR_LEN];
    int64_t size;
    struct staged_file *next;
};

/* An upload's symbolic or hard link (docker save reuses layers this way). */
struct archive_link {
    char *path;
    char *target; /* normalised, relative to the archive root */
    struct archive_link *next;
};

struct import {
    struct store *st;
    const struct import_request *req;
    struct image_build b; /* lease, staging, the resolved image */

    /* Upload only. */
    struct staged_file *files;
    struct archive_link *links;
    char *index_json;
    size_t index_len;
    char *docker_json;
    size_t docker_len;
    bool saw_layout_file;

    char **names; /* from the archive: ref.name or RepoTags */
    size_t n_names;
};

static void
emit(struct import *imp, const struct import_event *ev)
{
    if (imp->req->progress)
        imp->req->progress(imp->req->progress_ctx, ev);
}

static int
lease_blob(struct import *imp, const char *digest, struct err *err)
{
    return image_build_lease_blob(&imp->b, digest, err);
}

/* True when digest is in the content store or staged by this import. */
static bool
blob_present(struct import *imp, const char *digest, int64_t *size)
{
    return image_build_blob_present(&imp->b, digest, size);
}

/* Where to read a present blob from; caller frees. */
static char *
blob_location(struct import *imp, const char *digest)
{
    return image_build_blob_location(&imp->b, digest);
}

/*
 * Opens rel ("blobs/sha256/<hex>", "index.json") inside the layout
 * directory without following a symlink in any component, so a layout
 * (one a task wrote into a volume, say) cannot point the import at files
 * elsewhere on the host, and without opening anything but a regular file
 * (a device node or FIFO a container made is never opened;
 * common/rootdir.h). Returns the fd, or -errno: ELOOP for a symlink on the
 * way, EINVAL for something other than a regular file.
 */
static int
layout_openat(struct import *imp, const char *rel)
{
    int dirfd = rootdir_open(imp->req->layout_dir);
    if (dirfd < 0)
        return dirfd;
    cleanup_free char *dir = strdup(rel);
    if (!dir) {
        rootdir_close(dirfd);
        return -ENOMEM;
    }
    char *slash = strrchr(dir, '/');
    const char *name = slash ? slash + 1 : dir;
    int fd = dirfd;
    if (slash) {
        *slash = '\0';
        fd = rootdir_open_dir(dirfd, dir);
        rootdir_close(dirfd);
        if (fd < 0)
            return fd;
    }
    /* Never through a symlink, and never anything but a regular file. */
    int file = rootdir_open_file(fd, name);
    rootdir_close(fd);
    return file;
}

/* Opens a blob of the layout directory without following a symlink. */
static int
layout_blob_open(struct import *imp, const char *digest, struct err *err)
{
    cleanup_free char *rel = NULL;
    if (asprintf(&rel, "blobs/sha256/%s", digest_hex(digest)) < 0)
        return err_set(err, ENOMEM, "out of memory");
    int fd = layout_openat(imp, rel);
    if (fd < 0) {
        if (fd == -ENOENT)
            return err_set(err, ERR_INVALID_CONTENT, "blob %s: missing from the layout (%s)",
                           digest, rel);
        if (fd == -ELOOP)
            return err_set(err, ERR_INVALID_CONTENT,
                           "blob %s: %s is or goes through a symbolic link; a layout's blobs "
                           "must be files",
                           digest, rel);
        if (fd == -EINVAL)
            return err_set(err, ERR_INVALID_CONTENT, "blob %s: %s is not a regular file", digest,
                           rel);
        return err_errno(err, -fd, "open %s/%s", imp->req->layout_dir, rel);
    }
    struct os_stat sb;
    if (osfs_fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return err_set(err, ERR_INVALID_CONTENT, "blob %s: %s is not a regular file", digest, rel);
    }
    return fd;
}

/* Reads a small regular file of the layout (oci-layout, index.json). */
static int
layout_read_small(struct import *imp, const char *rel, size_t max, char **out, size_t *len,
                  struct err *err)
{
    const char *dir = imp->req->layout_dir;
    cleanup_close int fd = layout_openat(imp, rel);
    if (fd == -ENOENT)
        return -ENOENT;
    if (fd == -ELOOP)
        return err_set(err, ERR_INVALID_CONTENT,
                       "%s: a symbolic link; a layout's files must be files", rel);
    if (fd == -EINVAL)
        return err_set(err, ERR_INVALID_CONTENT, "%s: not a regular file", rel);
    if (fd < 0)
        return err_errno(err, -fd, "open %s/%s", dir, rel);
    struct os_stat sb;
    if (osfs_fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
        return err_set(err, ERR_INVALID_CONTENT, "%s: not a regular file", rel);
    if ((uint64_t)sb.st_size > max)
        return err_set(err, ERR_INVALID_CONTENT, "%s: %lld bytes is over the limit of %zu bytes",
                       rel, (long long)sb.st_size, max);
    char *buf = malloc((size_t)sb.st_size + 1);
    if (!buf)
        return err_set(err, ENOMEM, "out of memory");
    size_t got = 0;
    while (got < (size_t)sb.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(buf);
            return n < 0 ? err_errno(err, errno, "read %s/%s", dir, rel)
                         : err_set(err, ERR_INVALID_CONTENT, "%s: shrank while read", rel);
        }
        got += (size_t)n;
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    return 0;
}

/* Copies a blob of the layout directory into staging, verifying it. */
static int
layout_blob_stage(struct import *imp, const char *digest, int64_t size, int64_t max,
                  struct err *err)
{
    cleanup_close int fd = layout_blob_open(imp, digest, err);
    if (fd < 0)
        return fd;
    struct blob_writer *w = blob_writer_new(imp->st->blobs, imp->b.staging, digest, size, max, err);
    if (!w)
        return -err->code;
    cleanup_free char *buf = malloc(READ_CHUNK);
    if (!buf) {
        blob_writer_abort(w);
        return err_set(err, ENOMEM, "out of memory");
    }
    for (;;) {
        ssize_t n = read(fd, buf, READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            blob_writer_abort(w);
            return err_errno(err, errno, "read blob %s from the layout", digest);
        }
        if (n == 0)
            break;
        if (blob_writer_write(w, buf, (size_t)n, err) < 0) {
            blob_writer_abort(w);
            return -err->code;
        }
    }
    return blob_writer_finish(w, NULL, NULL, err);
}

/*
 * Reads a JSON document blob (index, manifest, config) of at most
 * OCI_DOC_MAX bytes, refusing a larger declared size before reading.
 * In layout mode a blob missing from the store is staged from the layout
 * first, which verifies it.
 */
static int
read_doc(struct import *imp, const char *what, const char *digest, int64_t declared, char **buf,
         size_t *len, struct err *err)
{
    if (declared > OCI_DOC_MAX)
        return err_set(err, ERR_INVALID_CONTENT,
                       "%s %s: %lld bytes is over the limit of %d bytes for a document", what,
                       digest, (long long)declared, OCI_DOC_MAX);
    int rc = lease_blob(imp, digest, err);
    if (rc < 0)
        return rc;
    int64_t have = -1;
    if (!blob_present(imp, digest, &have)) {
        if (!imp->req->layout_dir)
            return err_set(err, ERR_INVALID_CONTENT, "%s %s: missing from the archive", what,
                           digest);
        if ((rc = layout_blob_stage(imp, digest, declared, OCI_DOC_MAX, err)) < 0)
            return err_wrap(err, "%s %s", what, digest);
        have = declared;
    }
    if (declared >= 0 && have != declared)
        return err_set(err, ERR_INVALID_CONTENT,
                       "%s %s: size is %lld bytes, its descriptor says %lld", what, digest,
                       (long long)have, (long long)declared);
    cleanup_free char *path = blob_location(imp, digest);
    if (!path)
        return err_set(err, ENOMEM, "out of memory");
    rc = fs_read_file(path, OCI_DOC_MAX, buf, len, err);
    if (rc == -EFBIG)
        return err_set(err, ERR_INVALID_CONTENT, "%s %s: over the limit of %d bytes for a document",
                       what, digest, OCI_DOC_MAX);
    return rc;
}

static int
read_doc_cb(void *ctx, const char *digest, char **buf, size_t *len, struct err *err)
{
    return read_doc(ctx, "index", digest, -1, buf, len, err);
}

/* ---- upload: reading the tar stream ------------------------------------- */

struct upload_reader {
    struct import *imp;
    char *buf;
};

static la_ssize_t
upload_read_cb(struct archive *a, void *ctx, const void **out)
{
    struct upload_reader *r = ctx;
    ssize_t n = r->imp->req->read(r->imp->req->read_ctx, r->buf, READ_CHUNK);
    if (n < 0) {
        archive_set_error(a, (int)-n, "reading the upload: %s", strerror((int)-n));
        return -1;
    }
    *out = r->buf;
    return n;
}

/* Normalises an archive path: strips "./" and repeated slashes; refuses
 * absolute paths and "..". Returns a new string or NULL with err set. */
static char *
normalise_path(const char *raw, struct err *err)
{
    if (raw[0] == '/') {
        err_set(err, ERR_INVALID_CONTENT, "archive entry %s: absolute path", raw);
        return NULL;
    }
    size_t len = strlen(raw);
    char *out = malloc(len + 1);
    if (!out) {
        err_set(err, ENOMEM, "out of memory");
        return NULL;
    }
    size_t o = 0;
    const char *p = raw;
    while (*p) {
        while (*p == '/')
            p++;
        const char *end = strchr(p, '/');
        size_t seg = end ? (size_t)(end - p) : strlen(p);
        if (seg == 0)
            break;
        if (seg == 1 && p[0] == '.') {
            p += seg;
            continue;
        }
        if (seg == 2 && p[0] == '.' && p[1] == '.') {
            err_set(err, ERR_INVALID_CONTENT, "archive entry %s: \"..\" component", raw);
            free(out);
            return NULL;
        }
        if (o)
            out[o++] = '/';
        memcpy(out + o, p, seg);
        o += seg;
        p += seg;
    }
    out[o] = '\0';
    return out;
}

/* Resolves a link target relative to the directory of the link. */
static char *
link_target(const char *link_path, const char *target, bool hard, struct err *err)
{
    if (hard)
        return normalise_path(target, err);
    if (target[0] == '/') {
        err_set(err, ERR_INVALID_CONTENT, "archive entry %s: link to absolute path %s", link_path,
                target);
        return NULL;
    }
    const char *slash = strrchr(link_path, '/');
    cleanup_free char *joined = NULL;
    if (asprintf(&joined, "%.*s%s%s", slash ? (int)(slash - link_path) : 0, link_path,
                 slash ? "/" : "", target) < 0) {
        err_set(err, ENOMEM, "out of memory");
        return NULL;
    }
    /* Resolve ".." against the link's directory, never above the root. */
    char *out = malloc(strlen(joined) + 1);
    if (!out) {
        err_set(err, ENOMEM, "out of memory");
        return NULL;
    }
    size_t o = 0;
    char *save = NULL;
    for (char *seg = strtok_r(joined, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
        if (strcmp(seg, ".") == 0)
            continue;
        if (strcmp(seg, "..") == 0) {
            if (o == 0) {
                err_set(err, ERR_INVALID_CONTENT, "archive entry %s: link %s leaves the archive",
                        link_path, target);
                free(out);
                return NULL;
            }
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
            continue;
        }
        if (o)
            out[o++] = '/';
        size_t l = strlen(seg);
        memcpy(out + o, seg, l);
        o += l;
    }
    out[o] = '\0';
    return out;
}

static int
read_entry_small(struct archive *a, const char *path, int64_t size, size_t max, char **out,
                 size_t *out_len, struct err *err)
{
    if (size < 0 || (uint64_t)size > max)
        return err_set(err, ERR_INVALID_CONTENT, "%s: %lld bytes is over the limit of %zu bytes",
                       path, (long long)size, max);
    char *buf = malloc((size_t)size + 1);
    if (!buf)
        return err_set(err, ENOMEM, "out of memory");
    size_t got = 0;
    while (got < (size_t)size) {
        la_ssize_t n = archive_read_data(a, buf + got, (size_t)size - got);
        if (n < 0) {
            free(buf);
            return err_set(err, ERR_INVALID_CONTENT, "%s: %s", path, archive_error_string(a));
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got != (size_t)size) {
        free(buf);
        return err_set(err, ERR_INVALID_CONTENT, "%s: truncated", path);
    }
    buf[got] = '\0';
    *out = buf;
    *out_len = got;
    return 0;
}

/* Streams the current entry's data into a blob writer (which it ends). */
static int
stage_entry(struct import *imp, struct archive *a, const char *path, const char *expected,
            int64_t size, char digest_out[DIGEST_STR_LEN], struct err *err)
{
    struct blob_writer *w =
        blob_writer_new(imp->st->blobs, imp->b.staging, expected, size, -1, err);
    if (!w)
        return err_wrap(err, "%s", path);
    const void *block;
    size_t len;
    la_int64_t offset;
    int64_t written = 0, next_report = PROGRESS_STEP;
    for (;;) {
        int r = archive_read_data_block(a, &block, &len, &offset);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN) {
            blob_writer_abort(w);
            int code = archive_errno(a);
            if (code == ECANCELED || code == EPIPE || code == ECONNRESET)
                return err_set(err, ECANCELED, "%s: the upload ended early", path);
            return err_set(err, ERR_INVALID_CONTENT, "%s: %s", path, archive_error_string(a));
        }
        /* Sparse entries: fill holes with zeros so the bytes hash right. */
        if (offset > written) {
            static const char zeros[4096];
            while (written < offset) {
                size_t z = (size_t)(offset - written) < sizeof(zeros) ? (size_t)(offset - written)
                                                                      : sizeof(zeros);
                if (blob_writer_write(w, zeros, z, err) < 0) {
                    blob_writer_abort(w);
                    return err_wrap(err, "%s", path);
                }
                written += (int64_t)z;
            }
        }
        if (blob_writer_write(w, block, len, err) < 0) {
            blob_writer_abort(w);
            return err_wrap(err, "%s", path);
        }
        written += (int64_t)len;
        if (written >= next_report) {
            struct import_event ev = {.step = "blob",
                                      .status = "receiving",
                                      .digest = expected ? expected : path,
                                      .done = written,
                                      .total = size};
            emit(imp, &ev);
            next_report = written + PROGRESS_STEP;
        }
    }
    int64_t final_size = 0;
    if (blob_writer_finish(w, digest_out, &final_size, err) < 0)
        return err_wrap(err, "%s", path);
    struct import_event ev = {.step = "blob",
                              .status = "stored",
                              .digest = digest_out,
                              .done = final_size,
                              .total = final_size};
    emit(imp, &ev);
    return 0;
}

static int
add_staged(struct import *imp, const char *path, const char *digest, int64_t size, struct err *err)
{
    struct staged_file *f = calloc(1, sizeof(*f));
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return err_set(err, ENOMEM, "out of memory");
    }
    snprintf(f->digest, sizeof(f->digest), "%s", digest);
    f->size = size;
    f->next = imp->files;
    imp->files = f;
    return 0;
}

static int
handle_entry(struct import *imp, struct archive *a, struct archive_entry *e, struct err *err)
{
    cleanup_free char *path = normalise_path(archive_entry_pathname(e), err);
    if (!path)
        return -err->code;
    const char *hardlink = archive_entry_hardlink(e);
    mode_t type = archive_entry_filetype(e);
    if (hardlink || type == AE_IFLNK) {
        struct archive_link *l = calloc(1, sizeof(*l));
        if (!l)
            return err_set(err, ENOMEM, "out of memory");
        l->path = strdup(path);
        l->target = link_target(path, hardlink ? hardlink : archive_entry_symlink(e),
                                hardlink != NULL, err);
        if (!l->path || !l->target) {
            free(l->path);
            free(l->target);
            free(l);
            return err->code ? -err->code : err_set(err, ENOMEM, "out of memory");
        }
        l->next = imp->links;
        imp->links = l;
        return 0;
    }
    if (type != AE_IFREG)
        return 0; /* directories and anything else carry no image data */
    int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : -1;

    if (strcmp(path, "index.json") == 0)
        return read_entry_small(a, path, size, OCI_DOC_MAX, &imp->index_json, &imp->index_len, err);
    if (strcmp(path, "manifest.json") == 0)
        return read_entry_small(a, path, size, OCI_DOC_MAX, &imp->docker_json, &imp->docker_len,
                                err);
    if (strcmp(path, "oci-layout") == 0) {
        cleanup_free char *buf = NULL;
        size_t len = 0;
        int rc = read_entry_small(a, path, size, 4096, &buf, &len, err);
        if (rc == 0)
            rc = oci_layout_check(buf, len, "oci-layout", err);
        imp->saw_layout_file = rc == 0;
        return rc;
    }
    if (strcmp(path, "repositories") == 0)
        return 0;

    char digest[DIGEST_STR_LEN];
    if (strncmp(path, "blobs/", 6) == 0) {
        if (strncmp(path, "blobs/sha256/", 13) != 0)
            return err_set(err, ERR_INVALID_CONTENT, "%s: only sha256 blobs are supported", path);
        const char *hex = path + 13;
        if (!digest_hex_valid(hex, DIGEST_HEX_LEN) || strlen(hex) != DIGEST_HEX_LEN)
            return err_set(err, ERR_INVALID_CONTENT,
                           "%s: a blob's name must be 64 lowercase hex digits", path);
        snprintf(digest, sizeof(digest), "sha256:%s", hex);
        int rc = lease_blob(imp, digest, err);
        if (rc < 0)
            return rc;
        if (blob_exists(imp->st->blobs, digest)) {
            /* Stored already: read past it, unhashed. */
            struct import_event ev = {
                .step = "blob", .status = "present", .digest = digest, .done = size, .total = size};
            emit(imp, &ev);
            return add_staged(imp, path, digest, size, err);
        }
        if ((rc = stage_entry(imp, a, path, digest, size, digest, err)) < 0)
            return rc;
        return add_staged(imp, path, digest, size, err);
    }
    /* A docker save file (config, layer.tar): staged under its digest. */
    int rc = stage_entry(imp, a, path, NULL, size, digest, err);
    if (rc < 0)
        return rc;
    if ((rc = lease_blob(imp, digest, err)) < 0)
        return rc;
    return add_staged(imp, path, digest, size, err);
}

static int
read_upload(struct import *imp, struct err *err)
{
    struct archive *a = archive_read_new();
    if (!a)
        return err_set(err, ENOMEM, "out of memory");
    archive_read_support_filter_all(a);
    archive_read_support_format_tar(a);
    struct upload_reader r = {.imp = imp, .buf = malloc(READ_CHUNK)};
    if (!r.buf) {
        archive_read_free(a);
        return err_set(err, ENOMEM, "out of memory");
    }
    int rc = 0;
    if (archive_read_open(a, &r, NULL, upload_read_cb, NULL) != ARCHIVE_OK) {
        rc = err_set(err, ERR_INVALID_CONTENT, "upload: not a tar stream (%s)",
                     archive_error_string(a));
        goto out;
    }
    for (;;) {
        struct archive_entry *e;
        int h = archive_read_next_header(a, &e);
        if (h == ARCHIVE_EOF)
            break;
        if (h < ARCHIVE_WARN) {
            int code = archive_errno(a);
            if (code == ECANCELED || code == ECONNRESET || code == EPIPE)
                rc = err_set(err, ECANCELED, "upload: the client went away (%s)",
                             archive_error_string(a));
            else
                rc = err_set(err, ERR_INVALID_CONTENT, "upload: not a valid tar stream: %s",
                             archive_error_string(a));
            goto out;
        }
        if ((rc = handle_entry(imp, a, e, err)) < 0)
            goto out;
    }
out:
    archive_read_free(a);
    free(r.buf);
    return rc;
}

/* The staged file for an archive path, following links (bounded). */
static struct staged_file *
find_staged(struct import *imp, const char *path)
{
    cleanup_free char *cur = strdup(path);
    for (int hops = 0; cur && hops < 16; hops++) {
        for (struct staged_file *f = imp->files; f; f = f->next)
            if (strcmp(f->path, cur) == 0)
                return f;
        struct archive_link *l = imp->links;
        while (l && strcmp(l->path, cur) != 0)
            l = l->next;
        if (!l)
            return NULL;
        free(cur);
        cur = strdup(l->target);
    }
    return NULL;
}

/* ---- resolving the image ------------------------------------------------ */

static int
add_name(struct import *imp, const char *name)
{
    if (!name || !*name)
        return 0;
    char **n = realloc(imp->names, (imp->n_names + 1) * sizeof(*n));
    if (!n)
        return -ENOMEM;
    imp->names = n;
    if (!(n[imp->n_names] = strdup(name)))
        return -ENOMEM;
    imp->n_names++;
    return 0;
}

static int
want_platform(struct import *imp, struct oci_platform *want, struct err *err)
{
    if (imp->req->platform) {
        *want = *imp->req->platform;
        return 0;
    }
    *want = imp->st->host.platform;
    return 0;
}

/* Reads and checks the manifest and config named by imp->b.manifest_digest. */
static int
load_manifest_and_config(struct import *imp, struct err *err)
{
    cleanup_free char *buf = NULL;
    size_t len = 0;
    int rc =
        read_doc(imp, "manifest", imp->b.manifest_digest, imp->b.manifest_size, &buf, &len, err);
    if (rc < 0)
        return rc;
    if ((rc = oci_manifest_parse(buf, len, imp->b.manifest_digest, &imp->b.manifest, err)) < 0)
        return rc;
    free(buf);
    buf = NULL;
    const struct oci_descriptor *cd = &imp->b.manifest->config;
    if ((rc = read_doc(imp, "config", cd->digest, cd->size, &buf, &len, err)) < 0)
        return rc;
    if ((rc = oci_config_parse(buf, len, cd->digest, &imp->b.config, err)) < 0)
        return rc;
    return image_build_check(&imp->b, imp->req->platform, err);
}

static int
resolve_oci(struct import *imp, const char *index_json, size_t index_len, struct err *err)
{
    struct oci_index *idx = NULL;
    int rc = oci_index_parse(index_json, index_len, "index.json", &idx, err);
    if (rc < 0)
        return rc;
    struct oci_platform want;
    want_platform(imp, &want, err);
    struct oci_descriptor desc = {0};
    rc = oci_index_resolve(idx, &want, NULL, "index.json", read_doc_cb, imp, &desc, err);
    oci_index_free(idx);
    if (rc < 0)
        return rc;
    snprintf(imp->b.manifest_digest, sizeof(imp->b.manifest_digest), "%s", desc.digest);
    imp->b.manifest_size = desc.size;
    if (desc.ref_name && add_name(imp, desc.ref_name) < 0)
        rc = err_set(err, ENOMEM, "out of memory");
    oci_descriptor_clear(&desc);
    return rc;
}

/* Do two references name the same image once normalised? */
static bool
ref_same(const char *a, const char *b)
{
    struct err ignored;
    cleanup_free char *na = NULL;
    cleanup_free char *nb = NULL;
    return image_ref_normalize(a, &na, &ignored) == 0 &&
           image_ref_normalize(b, &nb, &ignored) == 0 && strcmp(na, nb) == 0;
}

/* Picks the docker save image to import and turns it into an OCI manifest. */
static int
resolve_docker(struct import *imp, struct err *err)
{
    struct docker_manifest *dm = NULL;
    /* Declared before the first goto: a jump into the scope of a cleanup
     * variable would free whatever the stack held there. */
    cleanup_free char *json = NULL;
    size_t json_len = 0;
    int rc = docker_manifest_parse(imp->docker_json, imp->docker_len, "manifest.json", &dm, err);
    if (rc < 0)
        return rc;
    const struct docker_image *pick = NULL;
    if (dm->n_images == 0) {
        docker_manifest_free(dm);
        return err_set(err, ERR_INVALID_CONTENT, "manifest.json: lists no image");
    }
    if (imp->req->name)
        for (size_t i = 0; i < dm->n_images && !pick; i++)
            for (size_t t = 0; t < dm->images[i].n_repo_tags; t++)
                if (strcmp(dm->images[i].repo_tags[t], imp->req->name) == 0 ||
                    ref_same(dm->images[i].repo_tags[t], imp->req->name))
                    pick = &dm->images[i];
    if (!pick)
        pick = &dm->images[0];
    if (dm->n_images > 1 && !imp->req->name)
        log_info("import: manifest.json lists %zu images; importing the first", dm->n_images);

    struct staged_file *cf = find_staged(imp, pick->config);
    if (!cf) {
        rc = err_set(err, ERR_INVALID_CONTENT, "manifest.json: config %s is not in the archive",
                     pick->config);
        goto out;
    }
    struct oci_layer_ref *refs = calloc(pick->n_layers ? pick->n_layers : 1, sizeof(*refs));
    if (!refs) {
        rc = err_set(err, ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < pick->n_layers; i++) {
        struct staged_file *lf = find_staged(imp, pick->layers[i]);
        if (!lf) {
            free(refs);
            rc = err_set(err, ERR_INVALID_CONTENT, "manifest.json: layer %s is not in the archive",
                         pick->layers[i]);
            goto out;
        }
        snprintf(refs[i].digest, sizeof(refs[i].digest), "%s", lf->digest);
        refs[i].size = lf->size;
        /* docker save layers are plain tars, newer Docker may compress. */
        unsigned char magic[4] = {0};
        cleanup_free char *loc = blob_location(imp, lf->digest);
        int fd = loc ? osfs_open(loc, O_RDONLY, 0) : -1;
        if (fd >= 0) {
            if (read(fd, magic, sizeof(magic)) < 0)
                memset(magic, 0, sizeof(magic));
            close(fd);
        }
        if (magic[0] == 0x1f && magic[1] == 0x8b)
            refs[i].compression = OCI_LAYER_GZIP;
        else if (magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd)
            refs[i].compression = OCI_LAYER_ZSTD;
        else
            refs[i].compression = OCI_LAYER_TAR;
    }
    rc = oci_manifest_synthesize(cf->digest, cf->size, refs, pick->n_layers, &json, &json_len,
                                 imp->b.manifest_digest, err);
    free(refs);
    if (rc < 0)
        goto out;
    imp->b.manifest_size = (int64_t)json_len;
    if ((rc = lease_blob(imp, imp->b.manifest_digest, err)) < 0)
        goto out;
    struct blob_writer *w = blob_writer_new(imp->st->blobs, imp->b.staging, imp->b.manifest_digest,
                                            (int64_t)json_len, -1, err);
    if (!w) {
        rc = -err->code;
        goto out;
    }
    if (blob_writer_write(w, json, json_len, err) < 0) {
        blob_writer_abort(w);
        rc = -err->code;
        goto out;
    }
    /* finish frees the writer whether it succeeds or not. */
    if ((rc = blob_writer_finish(w, NULL, NULL, err)) < 0)
        goto out;
    for (size_t t = 0; t < pick->n_repo_tags; t++)
        if (add_name(imp, pick->repo_tags[t]) < 0) {
            rc = err_set(err, ENOMEM, "out of memory");
            goto out;
        }
out:
    docker_manifest_free(dm);
    return rc;
}

/* ---- unpacking ---------------------------------------------------------- */

/* A layer blob read from a file (staged, stored, or in the layout), with
 * progress every PROGRESS_STEP bytes. */
struct layer_source {
    int fd;
    struct import *imp;
    const struct import_event *base;
    int64_t done, next_report;
};

static ssize_t
layer_read_cb(void *ctx, void *buf, size_t len)
{
    struct layer_source *src = ctx;
    for (;;) {
        ssize_t n = read(src->fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        src->done += n;
        if (src->done >= src->next_report) {
            struct import_event ev = *src->base;
            ev.done = src->done;
            emit(src->imp, &ev);
            src->next_report = src->done + PROGRESS_STEP;
        }
        return n;
    }
}

static int
unpack_layer(struct import *imp, size_t i, const char *const *lowers, struct snapshot_claim *claim,
             struct err *err)
{
    const struct oci_layer *l = &imp->b.manifest->layers[i];
    struct layer_source src = {.fd = -1, .imp = imp, .next_report = PROGRESS_STEP};
    struct image_build_source bsrc = {.read = layer_read_cb, .ctx = &src};
    if (blob_present(imp, l->desc.digest, NULL)) {
        cleanup_free char *loc = blob_location(imp, l->desc.digest);
        src.fd = loc ? osfs_open(loc, O_RDONLY, 0) : -ENOMEM;
        if (src.fd < 0)
            return err_errno(err, -src.fd, "layer %s: open", l->desc.digest);
    } else if (imp->req->layout_dir) {
        /* Read once: to the unpacker and into staging at the same time. */
        src.fd = layout_blob_open(imp, l->desc.digest, err);
        if (src.fd < 0)
            return src.fd;
        bsrc.tee =
            blob_writer_new(imp->st->blobs, imp->b.staging, l->desc.digest, l->desc.size, -1, err);
        if (!bsrc.tee) {
            close(src.fd);
            return -err->code;
        }
    } else {
        return err_set(err, ERR_INVALID_CONTENT, "layer %s: missing from the archive",
                       l->desc.digest);
    }
    struct import_event ev = {.step = "layer",
                              .status = "unpacking",
                              .digest = l->desc.digest,
                              .chain_id = imp->b.chain_ids[i],
                              .done = 0,
                              .total = l->desc.size,
                              .index = (unsigned)i + 1,
                              .count = (unsigned)imp->b.manifest->n_layers};
    src.base = &ev;
    emit(imp, &ev);
    int rc = image_build_layer_unpack(&imp->b, i, lowers, claim, &bsrc, err);
    close(src.fd);
    if (rc < 0)
        return rc;
    ev.status = "unpacked";
    ev.done = l->desc.size;
    emit(imp, &ev);
    return 0;
}

static int
unpack_layers(struct import *imp, struct err *err)
{
    size_t n = imp->b.manifest->n_layers;
    int rc = image_build_chain_ids(&imp->b, err);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        const struct oci_layer *l = &imp->b.manifest->layers[i];
        if ((rc = lease_blob(imp, l->desc.digest, err)) < 0 ||
            (rc = meta_lease_add_snapshot(imp->st->meta, imp->b.lease, imp->b.chain_ids[i], err)) <
                0)
            return rc;
        /* Every layer blob must be there and of the declared size. */
        int64_t have = -1;
        if (blob_present(imp, l->desc.digest, &have)) {
            if (have != l->desc.size)
                return err_set(err, ERR_INVALID_CONTENT,
                               "layer %s: size is %lld bytes, the manifest says %lld",
                               l->desc.digest, (long long)have, (long long)l->desc.size);
        } else if (!imp->req->layout_dir) {
            return err_set(err, ERR_INVALID_CONTENT, "layer %s: missing from the archive",
                           l->desc.digest);
        }
        struct snapshot_claim *claim = NULL;
        if ((rc = snapshot_acquire(imp->st->snaps, imp->b.chain_ids[i], &claim, err)) < 0)
            return rc;
        if (rc == SNAPSHOT_CLAIMED) {
            /* The snapshots below this layer, top first. */
            char **lowers = image_build_lowers(&imp->b, i);
            if (!lowers) {
                snapshot_abort(claim);
                return err_set(err, ENOMEM, "out of memory");
            }
            rc = unpack_layer(imp, i, (const char *const *)lowers, claim, err);
            image_build_lowers_free(lowers);
            if (rc < 0) {
                snapshot_abort(claim);
                return rc;
            }
            if ((rc = snapshot_commit(claim, err)) < 0)
                return rc;
            __atomic_add_fetch(&imp->b.snapshots_built, 1, __ATOMIC_SEQ_CST);
        } else {
            bool exists = false;
            int64_t size = 0;
            if (meta_snapshot_size(imp->st->meta, imp->b.chain_ids[i], &size, &exists, err) < 0)
                size = 0;
            imp->b.unpacked[i] = size;
            if (imp->req->layout_dir && !blob_present(imp, l->desc.digest, NULL) &&
                (rc = layout_blob_stage(imp, l->desc.digest, l->desc.size, -1, err)) < 0)
                return rc;
            struct import_event ev = {.step = "layer",
                                      .status = "cached",
                                      .digest = l->desc.digest,
                                      .chain_id = imp->b.chain_ids[i],
                                      .done = l->desc.size,
                                      .total = l->desc.size,
                                      .index = (unsigned)i + 1,
                                      .count = (unsigned)n};
            emit(imp, &ev);
        }
    }
    return 0;
}

/* ---- commit ------------------------------------------------------------- */

/*
 * The names the image is stored under, canonical (store/refname.h): the
 * request's ?name= alone when given (its repository taking the layout's
 * bare tag when it has no tag of its own), else every name the archive
 * gives, a bare tag as localhost/<tag>:latest. Names that are no
 * reference are dropped. Caller frees with strv_free.
 */
static size_t
stored_names(const struct import *imp, char ***out)
{
    char **v = NULL;
    size_t n = 0;
    struct err ignored;
    const char *bare = NULL;
    for (size_t k = 0; !bare && k < imp->n_names; k++)
        if (image_ref_is_bare_tag(imp->names[k]))
            bare = imp->names[k];
    for (size_t k = 0; k < (imp->req->name ? 1 : imp->n_names); k++) {
        const char *given = imp->req->name ? imp->req->name : imp->names[k];
        cleanup_free char *raw = NULL;
        if (imp->req->name && bare && !image_ref_has_tag(given)) {
            if (asprintf(&raw, "%s:%s", given, bare) < 0)
                raw = NULL;
        } else if (!imp->req->name && image_ref_is_bare_tag(given)) {
            if (asprintf(&raw, "localhost/%s:latest", given) < 0)
                raw = NULL;
        }
        char *canon = NULL;
        if (image_ref_normalize(raw ? raw : given, &canon, &ignored) < 0)
            continue;
        bool dup = false;
        for (size_t i = 0; i < n && !dup; i++)
            dup = strcmp(v[i], canon) == 0;
        if (dup || strv_push(&v, &n, canon) < 0) {
            free(canon);
            continue;
        }
        free(canon);
    }
    *out = v;
    return n;
}

static void
import_cleanup(struct import *imp, bool failed)
{
    while (imp->files) {
        struct staged_file *f = imp->files;
        imp->files = f->next;
        free(f->path);
        free(f);
    }
    while (imp->links) {
        struct archive_link *l = imp->links;
        imp->links = l->next;
        free(l->path);
        free(l->target);
        free(l);
    }
    free(imp->index_json);
    free(imp->docker_json);
    for (size_t i = 0; i < imp->n_names; i++)
        free(imp->names[i]);
    free(imp->names);
    image_build_end(&imp->b, failed); /* drops the lease, collects a failure's snapshots */
}

static int
read_layout_index(struct import *imp, struct err *err)
{
    const char *dir = imp->req->layout_dir;
    struct os_stat sb;
    if (!os_path_is_absolute(dir))
        return err_set(err, EINVAL, "source.layout %s: must be an absolute path", dir);
    int r = osfs_stat(dir, &sb);
    if (r < 0)
        return err_errno(err, -r, "source.layout %s", dir);
    if (!S_ISDIR(sb.st_mode))
        return err_set(err, EINVAL, "source.layout %s: not a directory", dir);
    cleanup_free char *buf = NULL;
    size_t len = 0;
    int rc = layout_read_small(imp, "oci-layout", 4096, &buf, &len, err);
    if (rc == -ENOENT)
        return err_set(err, ERR_INVALID_CONTENT,
                       "source.layout %s: not an OCI image layout (no oci-layout file)", dir);
    if (rc < 0 || (rc = oci_layout_check(buf, len, "oci-layout", err)) < 0)
        return rc;
    rc = layout_read_small(imp, "index.json", OCI_DOC_MAX, &imp->index_json, &imp->index_len, err);
    if (rc == -ENOENT)
        return err_set(err, ERR_INVALID_CONTENT, "source.layout %s: no index.json", dir);
    return rc;
}

int
store_image_import(struct store *st, const struct import_request *req, struct meta_image **out,
                   bool *created, struct err *err)
{
    struct import imp = {.st = st, .req = req};
    int rc;
    bool inflight = false;
    cleanup_strv char **names = NULL;
    size_t n_names = 0;
    cleanup_free char *checked = NULL;
    if (req->name && (rc = image_ref_normalize(req->name, &checked, err)) < 0)
        return rc;
    if ((rc = image_build_begin(&imp.b, st, err)) < 0) {
        err_wrap(err, "import");
        goto out;
    }

    if (req->layout_dir) {
        if ((rc = read_layout_index(&imp, err)) < 0 ||
            (rc = resolve_oci(&imp, imp.index_json, imp.index_len, err)) < 0)
            goto out;
    } else {
        if ((rc = read_upload(&imp, err)) < 0)
            goto out;
        if (imp.index_json) {
            if (!imp.saw_layout_file) {
                rc = err_set(err, ERR_INVALID_CONTENT,
                             "upload: has index.json but no valid oci-layout file");
                goto out;
            }
            rc = resolve_oci(&imp, imp.index_json, imp.index_len, err);
        } else if (imp.docker_json) {
            rc = resolve_docker(&imp, err);
        } else {
            rc = err_set(err, ERR_INVALID_CONTENT,
                         "upload: neither an OCI image layout (index.json) nor a docker save "
                         "archive (manifest.json)");
        }
        if (rc < 0)
            goto out;
    }

    /* The names it is stored under, canonical (store/refname.h). */
    n_names = stored_names(&imp, &names);
    /* One import per image at a time; the second finds it stored. */
    store_inflight_begin(st, imp.b.manifest_digest);
    inflight = true;
    struct meta_image *stored = NULL;
    struct err lookup = {0};
    if (meta_image_get(st->meta, imp.b.manifest_digest, &stored, &lookup) == 0) {
        *created = false;
        rc = image_build_answer_stored(&imp.b, stored, n_names ? names[0] : NULL, out, err);
        goto out;
    }
    if ((rc = load_manifest_and_config(&imp, err)) < 0 || (rc = unpack_layers(&imp, err)) < 0 ||
        (rc = image_build_commit(&imp.b, NULL, names, n_names, out, created, err)) < 0)
        goto out;
    struct import_event ev = {.step = "image",
                              .status = *created ? "created" : "present",
                              .digest = imp.b.manifest_digest};
    emit(&imp, &ev);
out:
    if (inflight)
        store_inflight_end(st, imp.b.manifest_digest);
    import_cleanup(&imp, rc < 0);
    return rc;
}
