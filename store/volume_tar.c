/*
 * Tar streams into and out of volumes.
 *
 * In: the stream is extracted by layer_unpack (the same secure extraction
 * that unpacks image layers, with whiteout conversion and hashing turned
 * off) into a staging directory beside the volume's data, on the same
 * filesystem. Only when the whole stream was read and extracted are the
 * staged entries renamed into place, under the store's lock: a directory
 * that exists on both sides is merged, anything else replaces what was
 * there (with RENAME_EXCHANGE when the types differ, so the old entry
 * lands in the staging area and goes with it). Nothing is ever followed
 * through a symlink: every step is openat(O_NOFOLLOW) or *at() on a
 * directory descriptor.
 *
 * Out: a walk of the tree with openat/fstatat (never chdir, which is
 * process-wide) feeding libarchive's pax writer, with hard links found
 * by libarchive's link resolver and xattrs read from each file.
 *
 * Runs on pool threads; blocks on the stream's callbacks and on disk.
 */
#include "store/volume.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "store/unpack.h"

#define STAGING_PREFIX ".staging-"
#define EXPORT_BUF (256 * 1024)
#define OVERLAY_XATTR_PREFIX "trusted.overlay."
#define MAX_DEPTH 1024

static int
hex8(char out[17])
{
    unsigned char raw[8];
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f)
        return -errno;
    size_t n = fread(raw, 1, sizeof(raw), f);
    fclose(f);
    if (n != sizeof(raw))
        return -EIO;
    for (int i = 0; i < 8; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

/* ---- xattrs ---------------------------------------------------------------- */

/* Copies src's xattrs (but overlay's own) onto dst. Best effort. */
static void
xattrs_copy(int src, int dst)
{
    char names[8192];
    ssize_t len = flistxattr(src, names, sizeof(names));
    for (ssize_t off = 0; len > 0 && off < len; off += (ssize_t)strlen(names + off) + 1) {
        const char *name = names + off;
        if (strncmp(name, OVERLAY_XATTR_PREFIX, strlen(OVERLAY_XATTR_PREFIX)) == 0)
            continue;
        char value[65536];
        ssize_t vlen = fgetxattr(src, name, value, sizeof(value));
        if (vlen >= 0 && fsetxattr(dst, name, value, (size_t)vlen, 0) < 0)
            log_debug("volume merge: set xattr %s: %s", name, strerror(errno));
    }
}

/* ---- merge ----------------------------------------------------------------- */

struct merge {
    int trash_fd; /* where replaced entries go, removed with the staging area */
    unsigned long trash_n;
    struct err *err;
};

/* Moves tfd/name out of the way into the trash. */
static int
to_trash(struct merge *m, int tfd, const char *name)
{
    char t[32];
    snprintf(t, sizeof(t), "%lu", m->trash_n++);
    if (renameat(tfd, name, m->trash_fd, t) < 0)
        return err_errno(m->err, errno, "move %s out of the way", name);
    return 0;
}

static int merge_dir(struct merge *m, int sfd, int tfd, int depth);

static int
merge_entry(struct merge *m, int sfd, int tfd, const char *name, int depth)
{
    struct stat ss, ts;
    if (fstatat(sfd, name, &ss, AT_SYMLINK_NOFOLLOW) < 0)
        return err_errno(m->err, errno, "stat staged %s", name);
    if (fstatat(tfd, name, &ts, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT)
            return err_errno(m->err, errno, "stat %s", name);
        if (renameat(sfd, name, tfd, name) < 0)
            return err_errno(m->err, errno, "move %s into place", name);
        return 0;
    }
    if (S_ISDIR(ss.st_mode) && S_ISDIR(ts.st_mode)) {
        int s2 = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int t2 = openat(tfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int ret = 0;
        if (s2 < 0 || t2 < 0)
            ret = err_errno(m->err, errno, "open %s", name);
        if (ret == 0)
            ret = merge_dir(m, s2, t2, depth + 1);
        if (ret == 0) {
            /* The directory takes the tar's metadata, times last. */
            if (fchown(t2, ss.st_uid, ss.st_gid) < 0 || fchmod(t2, ss.st_mode & 07777) < 0)
                log_debug("volume merge: metadata of %s: %s", name, strerror(errno));
            xattrs_copy(s2, t2);
            struct timespec times[2] = {ss.st_atim, ss.st_mtim};
            futimens(t2, times);
        }
        if (s2 >= 0)
            close(s2);
        if (t2 >= 0)
            close(t2);
        return ret;
    }
    if (S_ISDIR(ss.st_mode) != S_ISDIR(ts.st_mode)) {
        /* A directory replaces a file or the other way round: swap them in
         * one step where the filesystem can, else two renames. */
        if (renameat2(sfd, name, tfd, name, RENAME_EXCHANGE) == 0)
            return 0;
        int ret = to_trash(m, tfd, name);
        if (ret == 0 && renameat(sfd, name, tfd, name) < 0)
            ret = err_errno(m->err, errno, "move %s into place", name);
        return ret;
    }
    if (renameat(sfd, name, tfd, name) < 0)
        return err_errno(m->err, errno, "move %s into place", name);
    return 0;
}

static int
merge_dir(struct merge *m, int sfd, int tfd, int depth)
{
    if (depth > MAX_DEPTH)
        return err_set(m->err, ERR_INVALID_CONTENT, "tree deeper than %d levels", MAX_DEPTH);
    int dfd = dup(sfd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return err_errno(m->err, errno, "read staging directory");
    }
    /* Entries renamed away while reading do not disturb readdir. */
    int ret = 0;
    struct dirent *e;
    while (ret == 0 && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        ret = merge_entry(m, sfd, tfd, e->d_name, depth);
    }
    closedir(d);
    return ret;
}

/*
 * Opens data/<rel>, creating missing directories (0755) when create;
 * never through a symlink. With !create, a missing component gives
 * *fd_out = -1 and 0.
 */
static int
open_target(const char *fs, const char *rel, bool create, int *fd_out, struct err *err)
{
    cleanup_free char *data = fs_path_join(fs, "data");
    cleanup_free char *p = strdup(rel);
    if (!data || !p)
        return err_set(err, ENOMEM, "volume: out of memory");
    int fd = open(data, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return err_errno(err, errno, "open %s", data);
    char *save = NULL;
    for (char *c = strtok_r(p, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        int nfd = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0 && errno == ENOENT) {
            if (!create) {
                close(fd);
                *fd_out = -1;
                return 0;
            }
            if (mkdirat(fd, c, 0755) < 0 && errno != EEXIST) {
                int e = errno;
                close(fd);
                return err_errno(err, e, "create %s in the volume", c);
            }
            nfd = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        int e = errno;
        close(fd);
        if (nfd < 0) {
            if (e == ELOOP || e == ENOTDIR)
                return err_set(err, ERR_INVALID_CONTENT,
                               "path /%s: %s is a symlink or not a directory", rel, c);
            return err_errno(err, e, "open /%s in the volume", rel);
        }
        fd = nfd;
    }
    *fd_out = fd;
    return 0;
}

int
volume_tar_import(struct volume_store *vs, const char *handle, const char *path,
                  const struct volume_tar_in *in, struct volume_tar_in_result *res, struct err *err)
{
    if (!volume_handle_valid(handle))
        return err_set(err, EINVAL, "volume %s: not a volume handle", handle ? handle : "");
    cleanup_free char *rel = NULL;
    int ret = volume_path_clean(path, &rel, err);
    if (ret < 0)
        return ret;
    cleanup_free char *fs = NULL;
    bool privileged = false;
    ret = volume_write_begin(vs, handle, &fs, &privileged, err);
    if (ret < 0)
        return ret;

    char hex[17] = "";
    cleanup_free char *staging = NULL, *trash = NULL;
    int tfd = -1, sfd = -1, trash_fd = -1;
    /* The target as it is now: the symlink checks look at it. */
    ret = open_target(fs, rel, false, &tfd, err);
    if (ret == 0 && (ret = hex8(hex)) < 0)
        err_errno(err, -ret, "random name");
    if (ret == 0 && (asprintf(&staging, "%s/%s%s", fs, STAGING_PREFIX, hex) < 0 ||
                     asprintf(&trash, "%s/%s%s-old", fs, STAGING_PREFIX, hex) < 0)) {
        staging = trash = NULL;
        ret = err_set(err, ENOMEM, "volume: out of memory");
    }
    if (ret == 0 && (mkdir(staging, 0700) < 0 || mkdir(trash, 0700) < 0))
        ret = err_errno(err, errno, "create staging directory in volume %s", handle);
    if (ret == 0) {
        char lower[64];
        snprintf(lower, sizeof(lower), "/proc/self/fd/%d", tfd);
        const char *lowers[] = {lower, NULL};
        const char *mt = NULL;
        if (in->encoding && strcmp(in->encoding, "gzip") == 0)
            mt = "application/x-tar+gzip";
        else if (in->encoding && strcmp(in->encoding, "zstd") == 0)
            mt = "application/x-tar+zstd";
        struct unpack_input uin = {.read = in->read, .ctx = in->ctx, .media_type = mt};
        struct unpack_opts opts = {.target_dir = staging,
                                   .lower_dirs = tfd >= 0 ? lowers : NULL,
                                   .allow_device_nodes = privileged,
                                   .no_whiteouts = true,
                                   .no_digests = true};
        struct unpack_result ur = {0};
        ret = layer_unpack(&uin, &opts, &ur, err);
        if (ret == 0 && res) {
            res->entries = ur.entries;
            res->bytes = ur.uncompressed_size;
        }
    }
    if (tfd >= 0)
        close(tfd);
    tfd = -1;
    if (ret == 0) {
        /* The whole stream was good: move it into place. */
        volume_store_lock(vs);
        ret = open_target(fs, rel, true, &tfd, err);
        if (ret == 0) {
            sfd = open(staging, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            trash_fd = open(trash, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sfd < 0 || trash_fd < 0)
                ret = err_errno(err, errno, "open staging directory");
        }
        if (ret == 0) {
            struct merge m = {.trash_fd = trash_fd, .err = err};
            ret = merge_dir(&m, sfd, tfd, 0);
        }
        volume_store_unlock(vs);
        if (ret < 0)
            err_wrap(err, "move the upload into volume %s", handle);
    }
    if (tfd >= 0)
        close(tfd);
    if (sfd >= 0)
        close(sfd);
    if (trash_fd >= 0)
        close(trash_fd);
    struct err rerr = {0};
    if (staging && fs_remove_tree(staging, &rerr) < 0)
        log_warn("volume %s: %s", handle, rerr.msg);
    if (trash && fs_remove_tree(trash, &rerr) < 0)
        log_warn("volume %s: %s", handle, rerr.msg);
    volume_write_end(vs, handle);
    return ret;
}

/* ---- export ---------------------------------------------------------------- */

struct export
{
    const struct volume_tar_out *out;
    struct archive *a;
    struct archive_entry_linkresolver *lr;
    char *buf;
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
    ssize_t len = flistxattr(fd, names, sizeof(names));
    for (ssize_t off = 0; len > 0 && off < len; off += (ssize_t)strlen(names + off) + 1) {
        const char *name = names + off;
        if (strncmp(name, OVERLAY_XATTR_PREFIX, strlen(OVERLAY_XATTR_PREFIX)) == 0)
            continue;
        char value[65536];
        ssize_t vlen = fgetxattr(fd, name, value, sizeof(value));
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
        ssize_t n = read(fd, x->buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_errno(x->err, errno, "read %s", arcname);
        if (n == 0)
            break; /* shrank: the writer pads the entry */
        if (archive_write_data(x->a, x->buf, (size_t)n) < 0)
            return archive_fail(x, arcname);
        left -= n;
    }
    return 0;
}

/* Writes one entry: dfd/name (NULL name: dfd itself) as arcname. */
static int
export_entry(struct export *x, int dfd, const char *name, const char *arcname,
             const struct stat *st)
{
    struct archive_entry *e = archive_entry_new();
    if (!e)
        return err_set(x->err, ENOMEM, "export: out of memory");
    archive_entry_copy_pathname(e, arcname);
    archive_entry_copy_stat(e, st);
    int fd = -1, ret = 0;
    if (S_ISLNK(st->st_mode)) {
        char target[PATH_MAX + 1];
        ssize_t n = readlinkat(dfd, name ? name : "", target, PATH_MAX);
        if (n < 0) {
            archive_entry_free(e);
            return err_errno(x->err, errno, "readlink %s", arcname);
        }
        target[n] = '\0';
        archive_entry_copy_symlink(e, target);
        archive_entry_set_size(e, 0);
    } else if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) {
        /* O_NONBLOCK: the tree may be written by a container meanwhile,
         * and a FIFO swapped in for the file must not block the job; the
         * fstat below refuses anything that is not what was listed. */
        fd = name ? openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
                  : dup(dfd);
        if (fd < 0) {
            archive_entry_free(e);
            return err_errno(x->err, errno, "open %s", arcname);
        }
        struct stat now;
        if (fstat(fd, &now) < 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino ||
            (now.st_mode & S_IFMT) != (st->st_mode & S_IFMT)) {
            close(fd);
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
    if (fd >= 0)
        close(fd);
    return ret;
}

static int
export_tree(struct export *x, int dfd, const char *prefix, int depth)
{
    if (depth > MAX_DEPTH)
        return err_set(x->err, ELOOP, "export: tree deeper than %d levels", MAX_DEPTH);
    int rfd = dup(dfd);
    DIR *d = rfd >= 0 ? fdopendir(rfd) : NULL;
    if (!d) {
        if (rfd >= 0)
            close(rfd);
        return err_errno(x->err, errno, "read directory %s", prefix);
    }
    int ret = 0;
    struct dirent *ent;
    while (ret == 0 && (ent = readdir(d))) {
        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
            continue;
        cleanup_free char *arc = NULL;
        if (asprintf(&arc, "%s/%s", prefix, ent->d_name) < 0) {
            arc = NULL;
            ret = err_set(x->err, ENOMEM, "export: out of memory");
            break;
        }
        struct stat st;
        if (fstatat(dfd, ent->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue; /* removed while we walk */
            ret = err_errno(x->err, errno, "stat %s", arc);
            break;
        }
        ret = export_entry(x, dfd, ent->d_name, arc, &st);
        if (ret == 0 && S_ISDIR(st.st_mode)) {
            int sub = openat(dfd, ent->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                ret = err_errno(x->err, errno, "open %s", arc);
                break;
            }
            ret = export_tree(x, sub, arc, depth + 1);
            close(sub);
        }
    }
    closedir(d);
    return ret;
}

int
volume_tar_export(struct volume_store *vs, const char *handle, const char *path,
                  const struct volume_tar_out *out, struct err *err)
{
    cleanup_free char *rel = NULL;
    int ret = volume_path_clean(path, &rel, err);
    if (ret < 0)
        return ret;
    /* Split rel into the directory (opened safely) and the last name. */
    char *slash = strrchr(rel, '/');
    const char *base = rel[0] ? (slash ? slash + 1 : rel) : NULL;
    cleanup_free char *dir = strndup(rel, slash ? (size_t)(slash - rel) : 0);
    if (!dir)
        return err_set(err, ENOMEM, "export: out of memory");
    int dfd = -1;
    ret = volume_open_dir(vs, handle, base ? dir : "", &dfd, err);
    if (ret < 0)
        return ret;
    struct stat st;
    if (fstatat(dfd, base ? base : "", &st, AT_SYMLINK_NOFOLLOW | (base ? 0 : AT_EMPTY_PATH)) < 0) {
        int e = errno;
        close(dfd);
        return e == ENOENT ? err_set(err, ENOENT, "volume %s: path %s: not found", handle, path)
                           : err_errno(err, e, "volume %s: stat %s", handle, path);
    }
    int tfd = -1;
    if (S_ISDIR(st.st_mode)) {
        tfd = base ? openat(dfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : dup(dfd);
        if (tfd < 0) {
            int e = errno;
            close(dfd);
            return err_errno(err, e, "volume %s: open %s", handle, path);
        }
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
    archive_write_set_bytes_per_block(x.a, 64 * 1024);
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
    if (S_ISDIR(st.st_mode)) {
        ret = export_entry(&x, tfd, NULL, ".", &st);
        if (ret == 0)
            ret = export_tree(&x, tfd, ".", 0);
    } else {
        ret = export_entry(&x, dfd, base, base, &st);
    }
    if (ret == 0 && archive_write_close(x.a) != ARCHIVE_OK)
        ret = archive_fail(&x, "finish the tar");
done:
    if (x.a)
        archive_write_free(x.a);
    if (x.lr)
        archive_entry_linkresolver_free(x.lr);
    free(x.buf);
    if (tfd >= 0)
        close(tfd);
    close(dfd);
    return ret;
}
