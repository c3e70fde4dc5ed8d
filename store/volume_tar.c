/*
 * Tar streams into and out of volumes.
 *
 * In: the stream is extracted by layer_unpack (the same secure extraction
 * that unpacks image layers, with whiteout conversion and hashing turned
 * off) into a staging directory beside the volume's data, on the same
 * filesystem, and synced. Only when the whole stream was read and
 * extracted is it moved into place, under the store's lock, by
 * volume_merge (store/volume_merge.c): planned, journaled, carried out
 * step by step, undone on failure, and rolled back at the next start
 * after a crash, so the volume is either the old tree or the new one,
 * never a mix. A target path that does not exist yet is built in the
 * staging area too (the staged tree wrapped in the missing directories),
 * so that nothing of the upload touches the volume before the merge.
 * Nothing is ever followed through a symlink: every step is relative to
 * a directory descriptor (common/rootdir.h).
 *
 * Out: a walk of the tree through common/rootdir.h (never chdir, which is
 * process-wide) feeding libarchive's pax writer, with hard links found
 * by libarchive's link resolver and xattrs read from each file.
 *
 * Runs on pool threads; blocks on the stream's callbacks and on disk.
 */
#include "store/volume.h"

#include <archive.h>
#include <archive_entry.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/randid.h"
#include "common/log.h"
#include "common/os.h"
#include "common/osfs.h"
#include "common/rootdir.h"
#include "store/unpack.h"
#include "store/volume_merge.h"

#define EXPORT_BUF (256 * 1024)
#define OVERLAY_XATTR_PREFIX "trusted.overlay."
#define MAX_DEPTH 1024
#define NEW_DIR_MODE 0755

/* ---- in -------------------------------------------------------------------- */

/*
 * The deepest existing directory of data/<rel> (*have components of rel,
 * as a path below fs/ in *base) and, when it opens, its descriptor in
 * *fd (-1 when rel exists only in part). A symlink or a non-directory on
 * the way is ERR_INVALID_CONTENT.
 */
static int
target_find(int fs_fd, const char *rel, char **base, size_t *have, int *fd, struct err *err)
{
    *fd = -1;
    *have = 0;
    cleanup_free char *path = malloc(strlen(rel) + 8);
    if (!path)
        return err_set(err, ENOMEM, "volume: out of memory");
    strcpy(path, "data");
    int dfd = rootdir_open_dir(fs_fd, "data");
    if (dfd < 0)
        return err_errno(err, -dfd, "open the volume's data");
    size_t n = 0;
    for (const char *p = rel; *p;) {
        size_t len = strcspn(p, "/");
        char name[NAME_MAX + 1];
        if (len > NAME_MAX) {
            rootdir_close(dfd);
            return err_set(err, ERR_INVALID_CONTENT, "path /%s: a component of %zu bytes", rel,
                           len);
        }
        memcpy(name, p, len);
        name[len] = '\0';
        int nfd = rootdir_open_dir(dfd, name);
        if (nfd == -ENOENT)
            break;
        rootdir_close(dfd);
        if (nfd == -ELOOP || nfd == -ENOTDIR)
            return err_set(err, ERR_INVALID_CONTENT, "path /%s: %s is a symlink or not a directory",
                           rel, name);
        if (nfd < 0)
            return err_errno(err, -nfd, "open /%s in the volume", rel);
        dfd = nfd;
        strcat(path, "/");
        strncat(path, p, len);
        n++;
        p += len;
        p += strspn(p, "/");
    }
    *have = n;
    *base = steal_ptr(&path);
    *fd = dfd;
    return 0;
}

/* Puts staging under the missing directories tail of the target (the
 * components after the first have of rel), in wrap: the merge then moves
 * the first missing directory in, whole. */
static int
wrap_build(int fs_fd, const char *staging, const char *wrap, const char *rel, size_t have,
           struct err *err)
{
    const char *p = rel;
    for (size_t i = 0; i < have; i++) {
        p += strcspn(p, "/");
        p += strspn(p, "/");
    }
    /* p: the missing tail, "a/b/c". */
    cleanup_free char *chain = malloc(strlen(wrap) + strlen(p) + 2);
    if (!chain)
        return err_set(err, ENOMEM, "volume: out of memory");
    int r = rootdir_mkdir(fs_fd, wrap, 0700);
    strcpy(chain, wrap);
    const char *last = p;
    for (const char *q = p; r == 0 && *q;) {
        size_t len = strcspn(q, "/");
        if (q[len] == '\0') {
            last = q;
            break;
        }
        strcat(chain, "/");
        strncat(chain, q, len);
        int dfd = -1;
        if ((r = rootdir_mkdir(fs_fd, chain, NEW_DIR_MODE)) == 0 &&
            (dfd = rootdir_open_dir(fs_fd, chain)) >= 0)
            r = rootdir_fd_set_mode(dfd, NEW_DIR_MODE); /* whatever the umask */
        rootdir_close(dfd);
        q += len + 1;
    }
    int pfd = -1, sfd = -1;
    if (r == 0 && (pfd = rootdir_open_dir(fs_fd, chain)) < 0)
        r = pfd;
    if (r == 0)
        r = rootdir_rename(fs_fd, staging, pfd, last);
    if (r == 0 && (sfd = rootdir_open_dir(pfd, last)) >= 0)
        r = rootdir_fd_set_mode(sfd, NEW_DIR_MODE);
    rootdir_close(sfd);
    rootdir_close(pfd);
    return r < 0 ? err_errno(err, -r, "build the missing directories of /%s", rel) : 0;
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
    char staging[64], wrap[64], journal[64];
    cleanup_free char *shown = NULL, *base = NULL;
    int fs_fd = rootdir_open(fs);
    int tfd = -1;
    bool made = false;
    if (fs_fd < 0)
        ret = err_errno(err, -fs_fd, "open volume %s", handle);
    if (ret == 0 && randid_hex(hex, 8, NULL) < 0)
        ret = err_set(err, EIO, "volume %s: no random name", handle);
    snprintf(staging, sizeof(staging), "%s%s", VOLUME_STAGING_PREFIX, hex);
    snprintf(wrap, sizeof(wrap), "%s%s", staging, VOLUME_WRAP_SUFFIX);
    snprintf(journal, sizeof(journal), "%s%s", staging, VOLUME_JOURNAL_SUFFIX);
    if (ret == 0 && asprintf(&shown, "%s/data%s%s", fs, rel[0] ? "/" : "", rel) < 0) {
        shown = NULL;
        ret = err_set(err, ENOMEM, "volume: out of memory");
    }
    if (ret == 0 && strlen(shown) >= PATH_MAX - 1)
        ret = err_set(err, ERR_INVALID_CONTENT,
                      "path /%.100s...: %zu bytes in the volume, "
                      "reaching PATH_MAX",
                      rel, strlen(rel));
    /* The target as it is now: the symlink checks look at it. */
    size_t have = 0, ncomp = 0;
    for (const char *p = rel; *p; ncomp++) {
        size_t n = strcspn(p, "/");
        if (n > NAME_MAX && ret == 0)
            ret = err_set(err, ERR_INVALID_CONTENT,
                          "path /%.100s...: a component of %zu bytes, over NAME_MAX (%d)", rel, n,
                          NAME_MAX);
        p += n;
        p += strspn(p, "/");
    }
    if (ret == 0)
        ret = target_find(fs_fd, rel, &base, &have, &tfd, err);
    if (ret == 0 && (ret = rootdir_mkdir(fs_fd, staging, 0700)) < 0)
        ret = err_errno(err, -ret, "create staging directory in volume %s", handle);
    made = ret == 0;
    int sfd = -1;
    if (ret == 0 && (sfd = rootdir_open_dir(fs_fd, staging)) < 0)
        ret = err_errno(err, -sfd, "open the staging directory in volume %s", handle);
    if (ret == 0) {
        const int lowers[] = {tfd, -1};
        const char *mt = NULL;
        if (in->encoding && strcmp(in->encoding, "gzip") == 0)
            mt = "application/x-tar+gzip";
        else if (in->encoding && strcmp(in->encoding, "zstd") == 0)
            mt = "application/x-tar+zstd";
        struct unpack_input uin = {.read = in->read, .ctx = in->ctx, .media_type = mt};
        /* Only an existing target has entries to check against. */
        struct unpack_opts opts = {.target_fd = sfd,
                                   .shown_dir = shown,
                                   .lower_fds = have == ncomp ? lowers : NULL,
                                   .allow_device_nodes = privileged,
                                   .no_whiteouts = true,
                                   .no_digests = true};
        struct unpack_result ur = {0};
        ret = layer_unpack(&uin, &opts, &ur, err);
        rootdir_close(sfd);
        if (ret == 0 && res) {
            res->entries = ur.entries;
            res->bytes = ur.uncompressed_size;
        }
        /* The staged data durable before any of it is moved in, outside
         * the lock: the commit's own sync then has little left to do. */
        if (ret == 0 && (ret = rootdir_fd_sync_fs(fs_fd)) < 0)
            ret = err_errno(err, -ret, "sync the upload into volume %s", handle);
        if (ret == 0) {
            volume_store_lock(vs);
            /* Look again: another upload may have made the path meanwhile. */
            rootdir_close(tfd);
            free(base);
            base = NULL;
            ret = target_find(fs_fd, rel, &base, &have, &tfd, err);
            const char *src = staging;
            if (ret == 0 && have < ncomp) {
                ret = wrap_build(fs_fd, staging, wrap, rel, have, err);
                src = wrap;
            }
            if (ret == 0)
                ret = volume_merge(fs_fd, src, base, journal, err);
            volume_store_unlock(vs);
            if (ret < 0)
                err_wrap(err, "move the upload into volume %s", handle);
        }
    }
    rootdir_close(tfd);
    rootdir_close(fs_fd);
    struct err rerr = {0};
    cleanup_free char *sp = made ? fs_path_join(fs, staging) : NULL;
    cleanup_free char *wp = made ? fs_path_join(fs, wrap) : NULL;
    if (sp && fs_remove_tree(sp, &rerr) < 0)
        log_warn("volume %s: %s", handle, rerr.msg);
    if (wp && fs_remove_tree(wp, &rerr) < 0)
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
    struct os_stat st;
    int r = rootdir_stat(dfd, base ? base : "", &st);
    if (r < 0) {
        rootdir_close(dfd);
        return r == -ENOENT ? err_set(err, ENOENT, "volume %s: path %s: not found", handle, path)
                            : err_errno(err, -r, "volume %s: stat %s", handle, path);
    }
    int tfd = -1;
    if (S_ISDIR(st.st_mode)) {
        tfd = base ? rootdir_open_dir(dfd, base) : rootdir_dup(dfd);
        if (tfd < 0) {
            rootdir_close(dfd);
            return err_errno(err, -tfd, "volume %s: open %s", handle, path);
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
    rootdir_close(tfd);
    rootdir_close(dfd);
    return ret;
}
