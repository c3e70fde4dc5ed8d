/*
 * An import's pass over the tar stream of an upload (an OCI image layout
 * or a docker save archive, plain or compressed): each regular file is
 * hashed into the import's staging directory as it arrives, links are
 * kept to be followed later, and index.json, manifest.json and
 * oci-layout are kept in memory. Runs on the import's pool thread;
 * blocking (it waits on the upload's read callback).
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "store/blob.h"
#include "store/import_int.h"
#include "store/oci.h"

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

int
import_read_upload(struct import *imp, struct err *err)
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
struct staged_file *
import_find_staged(struct import *imp, const char *path)
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
