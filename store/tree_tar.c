/*
 * A tar stream out of a directory tree (store/tree_tar.h): a walk through
 * common/rootdir.h feeding libarchive's pax writer. Pool threads.
 */
#include "store/tree_tar.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/osfs.h"
#include "common/rootdir.h"

#define EXPORT_BUF (256 * 1024)
/* Smaller reads are copied: the stream gathers them with the headers. */
#define EXPORT_IN_PLACE_MIN (64 * 1024)
#define OVERLAY_XATTR_PREFIX "trusted.overlay."
#define MAX_DEPTH 1024

struct export
{
    const struct volume_tar_out *out;
    struct archive *a;
    struct archive_entry_linkresolver *lr;
    char *buf;
    bool in_place; /* file data is read into out->reserve's regions */
    int write_errno;
    struct err *err;
};

static la_ssize_t
export_write_cb(struct archive *a, void *ctx, const void *buf, size_t len)
{
    struct export *x = ctx;
    int r = x->out->write(x->out->ctx, buf, len);
    if (r < 0) {
        x->write_errno = -r;
        archive_set_error(a, -r, "write: %s", strerror(-r));
        return -1;
    }
    return (la_ssize_t)len;
}

static int
archive_fail(struct export *x, const char *what)
{
    if (x->write_errno)
        return err_errno(x->err, x->write_errno, "%s", what);
    const char *msg = archive_error_string(x->a);
    int e = archive_errno(x->a);
    return err_set(x->err, e > 0 ? e : EIO, "%s: %s", what, msg ? msg : "libarchive error");
}

static void
entry_add_xattrs(struct archive_entry *e, int fd)
{
    char names[8192];
    ssize_t len = rootdir_fd_list_xattrs(fd, names, sizeof(names));
    for (ssize_t off = 0; len > 0 && off < len; off += (ssize_t)strlen(names + off) + 1) {
        const char *name = names + off;
        if (strncmp(name, OVERLAY_XATTR_PREFIX, strlen(OVERLAY_XATTR_PREFIX)) == 0)
            continue;
        char value[65536];
        ssize_t vlen = rootdir_fd_get_xattr(fd, name, value, sizeof(value));
        if (vlen >= 0)
            archive_entry_xattr_add_entry(e, name, value, (size_t)vlen);
    }
}

static int
copy_data(struct export *x, int fd, int64_t size, const char *arcname)
{
    int64_t left = size;
    while (left > 0) {
        size_t want = left < EXPORT_BUF ? (size_t)left : EXPORT_BUF;
        void *buf = x->buf;
        if (x->in_place && want >= EXPORT_IN_PLACE_MIN) {
            /* Read into the stream's buffer: libarchive hands the same
             * bytes to export_write_cb unbuffered (bytes_per_block 0, no
             * filter), which the stream then takes without copying. */
            int r = x->out->reserve(x->out->ctx, want, &buf, &want);
            if (r < 0) {
                x->write_errno = -r;
                return err_errno(x->err, -r, "write %s", arcname);
            }
        }
        ssize_t n = read(fd, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_errno(x->err, errno, "read %s", arcname);
        if (n == 0)
            break; /* shrank: the writer pads the entry */
        if (archive_write_data(x->a, buf, (size_t)n) < 0)
            return archive_fail(x, arcname);
        left -= n;
    }
    return 0;
}

/* What archive_entry_copy_stat would take from a struct stat. */
static void
entry_set_stat(struct archive_entry *e, const struct os_stat *st)
{
    archive_entry_set_mode(e, st->st_mode);
    archive_entry_set_uid(e, st->st_uid);
    archive_entry_set_gid(e, st->st_gid);
    archive_entry_set_size(e, st->st_size);
    archive_entry_set_nlink(e, (unsigned)st->st_nlink);
    archive_entry_set_ino64(e, (la_int64_t)st->st_ino);
    archive_entry_set_dev(e, (dev_t)st->st_dev);
    archive_entry_set_rdev(e, (dev_t)st->st_rdev);
    archive_entry_set_atime(e, st->st_atim.tv_sec, st->st_atim.tv_nsec);
    archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
}

/* Writes one entry: dfd/name (NULL name: dfd itself) as arcname. */
static int
export_entry(struct export *x, int dfd, const char *name, const char *arcname,
             const struct os_stat *st)
{
    struct archive_entry *e = archive_entry_new();
    if (!e)
        return err_set(x->err, ENOMEM, "export: out of memory");
    archive_entry_copy_pathname(e, arcname);
    entry_set_stat(e, st);
    int fd = -1, ret = 0;
    if (S_ISLNK(st->st_mode)) {
        char target[PATH_MAX + 1];
        ssize_t n = rootdir_readlink(dfd, name ? name : "", target, PATH_MAX);
        if (n < 0) {
            archive_entry_free(e);
            return err_errno(x->err, (int)-n, "readlink %s", arcname);
        }
        target[n] = '\0';
        archive_entry_copy_symlink(e, target);
        archive_entry_set_size(e, 0);
    } else if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) {
        /* The tree may be written by a container meanwhile: what is
         * opened must still be what was listed (checked below), and a FIFO
         * or device node swapped in for a file is never opened
         * (rootdir_open_file refuses it with EINVAL before any open runs). */
        fd = name ? (S_ISDIR(st->st_mode) ? rootdir_open_dir(dfd, name)
                                          : rootdir_open_file(dfd, name))
                  : rootdir_dup(dfd);
        if (fd == -EINVAL || fd == -ENOTDIR || fd == -ELOOP) {
            archive_entry_free(e);
            return err_set(x->err, ERR_CONFLICT, "export %s: changed while being read", arcname);
        }
        if (fd < 0) {
            archive_entry_free(e);
            return err_errno(x->err, -fd, "open %s", arcname);
        }
        struct os_stat now;
        if (rootdir_stat(fd, "", &now) < 0 || now.st_dev != st->st_dev ||
            now.st_ino != st->st_ino || (now.st_mode & S_IFMT) != (st->st_mode & S_IFMT)) {
            rootdir_close(fd);
            archive_entry_free(e);
            return err_set(x->err, ERR_CONFLICT, "export %s: changed while being read", arcname);
        }
        entry_add_xattrs(e, fd);
    }
    if (!S_ISREG(st->st_mode))
        archive_entry_set_size(e, 0);
    struct archive_entry *spare = NULL;
    archive_entry_linkify(x->lr, &e, &spare);
    if (e) {
        if (archive_write_header(x->a, e) < ARCHIVE_WARN)
            ret = archive_fail(x, arcname);
        else if (S_ISREG(st->st_mode) && archive_entry_size(e) > 0)
            ret = copy_data(x, fd, archive_entry_size(e), arcname);
        archive_entry_free(e);
    }
    if (spare)
        archive_entry_free(spare);
    rootdir_close(fd);
    return ret;
}

static int
export_tree(struct export *x, int dfd, const char *prefix, int depth)
{
    if (depth > MAX_DEPTH)
        return err_set(x->err, ELOOP, "export: tree deeper than %d levels", MAX_DEPTH);
    struct osfs_dir *d = NULL;
    int r = osfs_dir_open_at(dfd, &d);
    if (r < 0)
        return err_errno(x->err, -r, "read directory %s", prefix);
    int ret = 0;
    const char *name;
    while (ret == 0 && (name = osfs_dir_next(d, NULL))) {
        cleanup_free char *arc = NULL;
        if (asprintf(&arc, "%s/%s", prefix, name) < 0) {
            arc = NULL;
            ret = err_set(x->err, ENOMEM, "export: out of memory");
            break;
        }
        struct os_stat st;
        if ((r = rootdir_stat(dfd, name, &st)) < 0) {
            if (r == -ENOENT)
                continue; /* removed while we walk */
            ret = err_errno(x->err, -r, "stat %s", arc);
            break;
        }
        ret = export_entry(x, dfd, name, arc, &st);
        if (ret == 0 && S_ISDIR(st.st_mode)) {
            int sub = rootdir_open_dir(dfd, name);
            if (sub < 0) {
                ret = err_errno(x->err, -sub, "open %s", arc);
                break;
            }
            ret = export_tree(x, sub, arc, depth + 1);
            rootdir_close(sub);
        }
    }
    osfs_dir_close(d);
    return ret;
}

int
tree_tar_export(int dir, const char *name, const struct os_stat *st, const char *arcname,
                const struct volume_tar_out *out, struct err *err)
{
    int tfd = -1, ret = 0;
    if (S_ISDIR(st->st_mode)) {
        tfd = name ? rootdir_open_dir(dir, name) : rootdir_dup(dir);
        if (tfd < 0)
            return err_errno(err, -tfd, "open %s", arcname);
    }
    struct export x = {.out = out, .err = err};
    x.a = archive_write_new();
    x.lr = archive_entry_linkresolver_new();
    x.buf = malloc(EXPORT_BUF);
    if (!x.a || !x.lr || !x.buf) {
        ret = err_set(err, ENOMEM, "export: out of memory");
        goto done;
    }
    archive_write_set_format_pax_restricted(x.a);
    archive_entry_linkresolver_set_strategy(x.lr, archive_format(x.a));
    /* Uncompressed, libarchive's own 64 KiB blocking would be one more
     * copy of every byte: the stream buffers anyway. */
    x.in_place = out->compression == VOLUME_COMPRESS_NONE && out->reserve;
    archive_write_set_bytes_per_block(x.a, x.in_place ? 0 : 64 * 1024);
    archive_write_set_bytes_in_last_block(x.a, 1);
    if (out->compression == VOLUME_COMPRESS_GZIP) {
        archive_write_add_filter_gzip(x.a);
        /* Speed over ratio: this path carries every input and output. */
        archive_write_set_filter_option(x.a, "gzip", "compression-level", "1");
    } else if (out->compression == VOLUME_COMPRESS_ZSTD) {
        archive_write_add_filter_zstd(x.a);
    }
    if (archive_write_open2(x.a, &x, NULL, export_write_cb, NULL, NULL) != ARCHIVE_OK) {
        ret = archive_fail(&x, "start the tar");
        goto done;
    }
    if (out->ready)
        out->ready(out->ctx);
    if (S_ISDIR(st->st_mode)) {
        ret = export_entry(&x, tfd, NULL, arcname, st);
        if (ret == 0)
            ret = export_tree(&x, tfd, arcname, 0);
    } else {
        ret = export_entry(&x, dir, name, arcname, st);
    }
    if (ret == 0 && archive_write_close(x.a) != ARCHIVE_OK)
        ret = archive_fail(&x, "finish the tar");
done:
    if (x.a)
        archive_write_free(x.a);
    if (x.lr)
        archive_entry_linkresolver_free(x.lr);
    free(x.buf);
    rootdir_close(tfd);
    return ret;
}
