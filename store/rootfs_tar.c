/*
 * Tar streams into and out of a container's root filesystem
 * (store/rootfs_tar.h): a container path resolved inside the rootfs with
 * common/rootdir.h's RESOLVE_IN_ROOT calls, then the same writer as
 * volume downloads (store/tree_tar.c) and the same staged, checked
 * extraction and merge as volume uploads (store/unpack.h,
 * store/volume_merge.h). Pool threads.
 */
#include "store/rootfs_tar.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/osfs.h"
#include "common/randid.h"
#include "common/rootdir.h"
#include "store/cp_pending.h"
#include "store/tree_tar.h"
#include "store/volume_merge.h"

/* A container path in the engine's terms: cleaned as filepath.Join("/",
 * path) would, with a trailing "/" or "/." remembered. */
struct cpath {
    char *rel;        /* "a/b" (no leading '/'), "" for the root */
    const char *last; /* rel's last component, NULL for the root */
    bool follow;      /* it ended in "/" or "/.": its last component is followed too */
    bool dot;         /* it ended in "/." */
};

static void
cpath_clear(struct cpath *cp)
{
    free(cp->rel);
    cp->rel = NULL;
}

static int
cpath_parse(const char *path, struct cpath *cp, struct err *err)
{
    memset(cp, 0, sizeof(*cp));
    size_t len = strlen(path);
    if (len == 0)
        return err_set(err, EINVAL, "path: empty");
    if (len >= PATH_MAX)
        return err_set(err, ENAMETOOLONG, "path %.100s...: %zu bytes, over PATH_MAX", path, len);
    cp->rel = malloc(len + 1);
    if (!cp->rel)
        return err_set(err, ENOMEM, "path: out of memory");
    size_t o = 0;
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            /* Back one component; at the root, ".." is the root. */
            while (o > 0 && cp->rel[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
        } else if (n > 0 && !(n == 1 && p[0] == '.')) {
            if (o > 0)
                cp->rel[o++] = '/';
            memcpy(cp->rel + o, p, n);
            o += n;
        }
        p += n;
        p += strspn(p, "/");
    }
    cp->rel[o] = '\0';
    cp->dot = strcmp(path, ".") == 0 || (len >= 2 && strcmp(path + len - 2, "/.") == 0);
    cp->follow = cp->dot || path[len - 1] == '/';
    if (o > 0) {
        char *slash = strrchr(cp->rel, '/');
        cp->last = slash ? slash + 1 : cp->rel;
    }
    return 0;
}

/* The error of a rootdir call on the container's path as the engine sorts them. */
static int
path_fail(int neg, const char *path, struct err *err)
{
    if (neg == -ENOENT)
        return err_set(err, ENOENT, "path %s: not found", path);
    if (neg == -ENOTDIR)
        return err_set(err, EINVAL, "path %s: not a directory", path);
    if (neg == -ENAMETOOLONG || neg == -ELOOP)
        return err_set(err, EINVAL, "path %s: %s", path, strerror(-neg));
    return err_errno(err, -neg, "path %s", path);
}

/*
 * Opens what path names: *dfd the directory holding it and *name its
 * last component, or (*name NULL) *dfd the entry itself when it is
 * followed or the root; *os its stat, *st as Docker shows it.
 */
static int
path_open(int rfd, const char *path, const struct cpath *cp, const char *top, int *dfd,
          const char **name, struct os_stat *os, struct rootfs_stat *st, struct err *err)
{
    *dfd = -1;
    *name = NULL;
    int r;
    if (cp->follow || !cp->last) {
        r = rootdir_open_dir_in_root(rfd, cp->rel);
    } else {
        cleanup_free char *dir = strndup(cp->rel, (size_t)(cp->last - cp->rel));
        if (!dir)
            return err_set(err, ENOMEM, "path: out of memory");
        r = rootdir_open_dir_in_root(rfd, dir);
        *name = cp->last;
    }
    if (r < 0)
        return path_fail(r, path, err);
    *dfd = r;
    if ((r = rootdir_stat(*dfd, *name ? *name : "", os)) < 0) {
        rootdir_close(*dfd);
        *dfd = -1;
        return path_fail(r, path, err);
    }
    memset(st, 0, sizeof(*st));
    snprintf(st->name, sizeof(st->name), "%s",
             cp->dot    ? "."
             : cp->last ? cp->last
             : top      ? top
                        : "/");
    st->size = os->st_size;
    st->mode = (uint32_t)os->st_mode;
    st->mtime_s = os->st_mtim.tv_sec;
    st->mtime_ns = os->st_mtim.tv_nsec;
    if (S_ISLNK(os->st_mode)) {
        ssize_t n = rootdir_resolve_in_root(rfd, cp->rel, st->link_target, sizeof(st->link_target));
        if (n < 0) { /* dangling: its own target */
            n = rootdir_readlink(*dfd, *name, st->link_target, sizeof(st->link_target) - 1);
            st->link_target[n > 0 ? n : 0] = '\0';
        }
    }
    return 0;
}

static int
rootfs_open(const char *rootfs, struct err *err)
{
    int rfd = rootdir_open(rootfs);
    if (rfd < 0)
        return err_errno(err, -rfd, "open the container's root filesystem");
    return rfd;
}

/* The stat of path, and with out a tar of it. */
static int
path_stat_or_export(const char *rootfs, const char *path, const char *top, struct rootfs_stat *st,
                    const struct volume_tar_out *out, struct err *err)
{
    struct cpath cp;
    int ret = cpath_parse(path, &cp, err);
    int rfd = ret < 0 ? -1 : rootfs_open(rootfs, err);
    if (ret == 0 && rfd < 0)
        ret = rfd;
    int dfd = -1;
    const char *name = NULL;
    struct os_stat os;
    if (ret == 0)
        ret = path_open(rfd, path, &cp, top, &dfd, &name, &os, st, err);
    /* The engine's names: "name/..." for a directory, "./..." for "x/.". */
    const char *arc = cp.dot ? "." : cp.last ? cp.last : top ? top : ".";
    if (ret == 0 && out)
        ret = tree_tar_export(dfd, name, &os, arc, out, err);
    rootdir_close(dfd);
    rootdir_close(rfd);
    cpath_clear(&cp);
    return ret;
}

int
rootfs_path_stat(const char *rootfs, const char *path, const char *top, struct rootfs_stat *st,
                 struct err *err)
{
    return path_stat_or_export(rootfs, path, top, st, NULL, err);
}

int
rootfs_tar_export(const char *rootfs, const char *path, const char *top, struct rootfs_stat *st,
                  const struct volume_tar_out *out, struct err *err)
{
    return path_stat_or_export(rootfs, path, top, st, out, err);
}

int
rootfs_path_in_mount(const char *path, const char *target, char **rest, char **top)
{
    struct cpath cp, mt;
    struct err ignored = {0};
    *rest = *top = NULL;
    if (cpath_parse(path, &cp, &ignored) < 0)
        return 0;
    if (cpath_parse(target, &mt, &ignored) < 0) {
        cpath_clear(&cp);
        return 0;
    }
    size_t n = strlen(mt.rel);
    int in = n > 0 && strncmp(cp.rel, mt.rel, n) == 0 && (cp.rel[n] == '/' || cp.rel[n] == '\0');
    if (in) {
        const char *below = cp.rel + n + (cp.rel[n] == '/');
        bool ok = asprintf(rest, "/%s%s", below, cp.dot && *below ? "/." : cp.dot ? "." : "") >= 0;
        /* The mount's own root is named as the container names it. */
        if (ok && !*below && !cp.dot && !(*top = strdup(mt.last)))
            ok = false;
        if (!ok) {
            free(*rest);
            *rest = NULL;
            in = -ENOMEM;
        }
    }
    cpath_clear(&cp);
    cpath_clear(&mt);
    return in;
}

/* ---- in -------------------------------------------------------------------- */

/* Makes uid:gid the owner of everything below dfd, never following a symlink. */
static int
chown_tree(int dfd, uint32_t uid, uint32_t gid, int depth, struct err *err)
{
    if (depth > 1024)
        return err_set(err, ERR_INVALID_CONTENT, "upload: tree deeper than 1024 levels");
    struct osfs_dir *d = NULL;
    int r = osfs_dir_open_at(dfd, &d);
    if (r < 0)
        return err_errno(err, -r, "read the staged upload");
    const char *name;
    int ret = 0;
    while (ret == 0 && (name = osfs_dir_next(d, NULL))) {
        struct os_stat st;
        if ((r = rootdir_stat(dfd, name, &st)) == 0)
            r = rootdir_set_owner(dfd, name, (uid_t)uid, (gid_t)gid);
        if (r < 0) {
            ret = err_errno(err, -r, "chown %s in the staged upload", name);
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            int sub = rootdir_open_dir(dfd, name);
            ret = sub < 0 ? err_errno(err, -sub, "open %s in the staged upload", name)
                          : chown_tree(sub, uid, gid, depth + 1, err);
            rootdir_close(sub);
        }
    }
    osfs_dir_close(d);
    return ret;
}

int
rootfs_tar_import(const char *rootfs, const char *path, const struct volume_tar_in *in,
                  const struct rootfs_tar_in_opts *o, struct volume_tar_in_result *res,
                  struct err *err)
{
    if (!o || !o->notes)
        return err_set(err, EINVAL, "upload: no directory for its note and journal");
    struct cpath cp;
    int ret = cpath_parse(path, &cp, err);
    int rfd = ret < 0 ? -1 : rootfs_open(rootfs, err);
    if (ret == 0 && rfd < 0)
        ret = rfd;
    /* The target with its last component followed too, as the engine
     * does: a symlink to a directory is extracted into. */
    int tfd = ret == 0 ? rootdir_open_dir_in_root(rfd, cp.rel) : -1;
    if (ret == 0 && tfd == -ENOTDIR)
        ret = err_set(err, EINVAL, "path %s: extraction point is not a directory", path);
    else if (ret == 0 && tfd < 0)
        ret = path_fail(tfd, path, err);
    /* The note names the directory tfd holds, read from tfd itself: a
     * second resolution of the path could land elsewhere (a container
     * swapping a symlink on the way meanwhile), and the note would then
     * send the recovery to a directory the staging is not in. */
    char resolved[PATH_MAX];
    ssize_t n = ret == 0 ? rootdir_fd_path_in_root(rfd, tfd, resolved, sizeof(resolved)) : 0;
    if (ret == 0 && n < 0)
        ret = path_fail((int)n, path, err);
    cleanup_free char *shown = NULL;
    if (ret == 0 && asprintf(&shown, "%s%s", rootfs, strcmp(resolved, "/") ? resolved : "") < 0) {
        shown = NULL;
        ret = err_set(err, ENOMEM, "upload: out of memory");
    }
    char hex[17] = "", staging[64];
    if (ret == 0 && randid_hex(hex, 8, NULL) < 0)
        ret = err_set(err, EIO, "upload: no random name");
    snprintf(staging, sizeof(staging), "%s%s", CP_STAGING_PREFIX, hex);
    /* The note first: from the staging directory's creation on, a crash
     * leaves something inside the container that only the note finds. The
     * merge's journal goes beside the note, in the daemon's directory:
     * only the staged data is in the container's tree. */
    struct cp_note note;
    bool noted = false;
    if (ret == 0) {
        ret = cp_pending_add(o->notes, rootfs, o->root_is_rootfs, resolved, staging, &note, err);
        noted = ret == 0;
    }
    int nfd = noted ? rootdir_open(o->notes) : -1;
    if (noted && nfd < 0)
        ret = err_errno(err, -nfd, "open %s", o->notes);
    int r = ret == 0 ? rootdir_mkdir(tfd, staging, 0700) : 0;
    if (r < 0)
        ret = path_fail(r, path, err);
    bool made = ret == 0;
    int sfd = ret == 0 ? rootdir_open_dir(tfd, staging) : -1;
    if (ret == 0 && sfd < 0)
        ret = err_errno(err, -sfd, "open the staging directory");
    struct volume_stage_opts so = {
        .shown_dir = shown, .target_fd = tfd, .refuse_device_nodes = true};
    if (ret == 0)
        ret = volume_tar_stage(in, sfd, &so, res, err);
    if (ret == 0 && o->chown)
        ret = chown_tree(sfd, o->uid, o->gid, 0, err);
    rootdir_close(sfd);
    if (ret == 0 && (r = rootdir_fd_sync_fs(tfd)) < 0)
        ret = err_errno(err, -r, "sync the upload");
    if (ret == 0 &&
        (ret = volume_merge_at(tfd, staging, "", nfd, note.journal, o->no_dir_nondir, err)) < 0)
        err_wrap(err, "extract into %s", path);
    struct err rerr = {0};
    bool kept = made && volume_merge_journal_left(nfd, note.journal);
    if (kept) {
        /* The undo failed: the staging holds the entries it must put back. */
        log_error("upload into %s: kept %s and its journal for recovery", path, staging);
    } else if (made && fs_remove_tree_at(tfd, staging, &rerr) < 0) {
        log_warn("upload into %s: %s", path, rerr.msg);
        kept = true; /* the note has the next start remove it */
    }
    if (noted && !kept)
        cp_pending_remove(o->notes, &note);
    rootdir_close(nfd);
    rootdir_close(tfd);
    rootdir_close(rfd);
    cpath_clear(&cp);
    return ret;
}
