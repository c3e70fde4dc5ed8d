/*
 * An import's reads from an OCI layout directory on the host: its
 * oci-layout and index.json files and its blobs, each opened below the
 * layout without following a symlink and never anything but a regular
 * file. Runs on the import's pool thread; blocking.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/os.h"
#include "common/osfs.h"
#include "common/rootdir.h"
#include "store/blob.h"
#include "store/import_int.h"
#include "store/oci.h"

#define LAYOUT_SHOWN_MAX 512

/* How errors name the layout: the client's words for it (a volume and a
 * path in it), never the /proc/self/fd path a volume's is read through. */
static void
layout_shown(const struct import *imp, char out[LAYOUT_SHOWN_MAX])
{
    if (imp->req->layout_shown)
        snprintf(out, LAYOUT_SHOWN_MAX, "%s", imp->req->layout_shown);
    else
        snprintf(out, LAYOUT_SHOWN_MAX, "source.layout %s", imp->req->layout_dir);
}

/* An I/O error on rel inside the layout: "<layout>: open rel: why". */
static int
layout_errno(const struct import *imp, int code, const char *verb, const char *rel, struct err *err)
{
    char shown[LAYOUT_SHOWN_MAX];
    layout_shown(imp, shown);
    return err_errno(err, code, "%s: %s %s", shown, verb, rel);
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
int
import_layout_blob_open(struct import *imp, const char *digest, struct err *err)
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
        return layout_errno(imp, -fd, "open", rel, err);
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
    cleanup_close int fd = layout_openat(imp, rel);
    if (fd == -ENOENT)
        return -ENOENT;
    if (fd == -ELOOP)
        return err_set(err, ERR_INVALID_CONTENT,
                       "%s: a symbolic link; a layout's files must be files", rel);
    if (fd == -EINVAL)
        return err_set(err, ERR_INVALID_CONTENT, "%s: not a regular file", rel);
    if (fd < 0)
        return layout_errno(imp, -fd, "open", rel, err);
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
            return n < 0 ? layout_errno(imp, errno, "read", rel, err)
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
int
import_layout_blob_stage(struct import *imp, const char *digest, int64_t size, int64_t max,
                         struct err *err)
{
    cleanup_close int fd = import_layout_blob_open(imp, digest, err);
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

int
import_layout_read_index(struct import *imp, struct err *err)
{
    const char *dir = imp->req->layout_dir;
    char shown[LAYOUT_SHOWN_MAX];
    layout_shown(imp, shown);
    struct os_stat sb;
    if (!os_path_is_absolute(dir))
        return err_set(err, EINVAL, "%s: must be an absolute path", shown);
    int r = osfs_stat(dir, &sb);
    if (r < 0)
        return err_errno(err, -r, "%s", shown);
    if (!S_ISDIR(sb.st_mode))
        return err_set(err, EINVAL, "%s: not a directory", shown);
    cleanup_free char *buf = NULL;
    size_t len = 0;
    int rc = layout_read_small(imp, "oci-layout", 4096, &buf, &len, err);
    if (rc == -ENOENT)
        return err_set(err, ERR_INVALID_CONTENT, "%s: not an OCI image layout (no oci-layout file)",
                       shown);
    if (rc < 0 || (rc = oci_layout_check(buf, len, "oci-layout", err)) < 0)
        return rc;
    rc = layout_read_small(imp, "index.json", OCI_DOC_MAX, &imp->index_json, &imp->index_len, err);
    if (rc == -ENOENT)
        return err_set(err, ERR_INVALID_CONTENT, "%s: no index.json", shown);
    return rc;
}
