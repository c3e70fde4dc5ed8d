/*
 * Each kind of tar entry berth's writer makes below an unpack target
 * (unpack_tree.c): regular files (data at their offsets, holes kept),
 * directories, symlinks, device nodes and FIFOs, hard links (to an entry
 * of this layer only), and whiteouts; created with O_EXCL after whatever
 * was in the way is removed, relative to the open descriptor of the
 * parent.
 *
 * Runs on the unpacking pool thread; blocks on disk.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/os.h"
#include "common/rootdir.h"
#include "store/unpack_int.h"

/* --- entry types ---------------------------------------------------------- */

static int
entry_file(struct unpack *u, struct archive_entry *e, int dir, const char *name, const char *rel)
{
    mode_t perm = archive_entry_perm(e) & 0777;
    int fd = rootdir_create_file(dir, name, perm);
    if (fd == -EEXIST) {
        bool keep, wh;
        int r = tree_make_room(u, dir, name, rel, false, &keep, &wh);
        if (r < 0)
            return r;
        /* tree_make_room may have reset the walk. */
        if ((r = tree_parent(u, rel, tree_parent_len(rel, name), &dir)) < 0)
            return r;
        fd = rootdir_create_file(dir, name, perm);
    }
    if (fd < 0)
        return tree_fail(u, rel, "create", fd);
    int64_t end = 0;
    int r;
    for (;;) {
        const void *buf;
        size_t size;
        int64_t off;
        r = unpack_data_block(u, rel, &buf, &size, &off);
        if (r <= 0)
            break;
        if (size && (r = rootdir_fd_write_at(fd, buf, size, off)) < 0) {
            r = tree_fail(u, rel, "write", r);
            break;
        }
        if (off + (int64_t)size > end)
            end = off + (int64_t)size;
    }
    int64_t want = archive_entry_size(e);
    if (r == 0 && want > end && (r = rootdir_fd_truncate(fd, want)) < 0)
        r = tree_fail(u, rel, "extend a sparse file", r);
    if (r == 0)
        r = tree_meta_file(u, e, fd, rel);
    int c = rootdir_close(fd);
    if (r == 0 && c < 0)
        r = tree_fail(u, rel, "close", c);
    if (r == 0)
        u->res->unpacked_bytes += (uint64_t)(want > 0 ? want : 0);
    return r;
}

static int
entry_dir(struct unpack *u, struct archive_entry *e, int dir, const char *name, const char *rel)
{
    bool keep = false, wh = false;
    int r = rootdir_mkdir(dir, name, 0700);
    if (r == -EEXIST) {
        if ((r = tree_make_room(u, dir, name, rel, true, &keep, &wh)) < 0)
            return r;
        if (!keep) {
            if ((r = tree_parent(u, rel, tree_parent_len(rel, name), &dir)) < 0)
                return r;
            r = rootdir_mkdir(dir, name, 0700);
        } else {
            r = 0;
        }
    }
    if (r < 0)
        return tree_fail(u, rel, "create directory", r);
    int fd = rootdir_open_dir(dir, name);
    if (fd < 0)
        return tree_fail(u, rel, "open directory", fd);
    r = rootdir_fd_set_owner(fd, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e));
    if (r < 0)
        tree_meta_warn(u, rel, "set owner", r);
    tree_entry_xattrs(u, e, fd, -1, NULL, rel);
    /* After a whiteout of its own name, what the lower layers had there is
     * gone; what this layer puts there stays. */
    if (wh && (r = rootdir_fd_set_xattr(fd, OVERLAY_OPAQUE_XATTR, "y", 1)) < 0) {
        rootdir_close(fd);
        return tree_fail(u, rel, "set " OVERLAY_OPAQUE_XATTR, r);
    }
    if ((r = tree_fixup_add(u, e, rel)) < 0) {
        rootdir_close(fd);
        return r;
    }
    /* The next entry is most likely inside it. */
    tree_hint_drop(u);
    u->hint = strdup(rel);
    if (u->hint)
        u->hint_fd = fd;
    else
        rootdir_close(fd);
    return 0;
}

static int
entry_symlink(struct unpack *u, struct archive_entry *e, int dir, const char *name, const char *rel)
{
    const char *target = archive_entry_symlink(e);
    if (!target)
        target = "";
    int r = rootdir_symlink(dir, name, target);
    if (r == -EEXIST) {
        bool keep, wh;
        if ((r = tree_make_room(u, dir, name, rel, false, &keep, &wh)) < 0)
            return r;
        if ((r = tree_parent(u, rel, tree_parent_len(rel, name), &dir)) < 0)
            return r;
        r = rootdir_symlink(dir, name, target);
    }
    if (r < 0)
        return tree_fail(u, rel, "create symlink", r);
    tree_meta_named(u, e, dir, name, rel, true);
    return 0;
}

static int
entry_node(struct unpack *u, struct archive_entry *e, int dir, const char *name, const char *rel)
{
    mode_t type = archive_entry_filetype(e);
    mode_t mode = (type == AE_IFCHR   ? S_IFCHR
                   : type == AE_IFBLK ? S_IFBLK
                                      : S_IFIFO) |
                  (archive_entry_perm(e) & 0777);
    dev_t dev = type == AE_IFIFO ? 0 : archive_entry_rdev(e);
    int r = rootdir_mknod(dir, name, mode, dev);
    if (r == -EEXIST) {
        bool keep, wh;
        if ((r = tree_make_room(u, dir, name, rel, false, &keep, &wh)) < 0)
            return r;
        if ((r = tree_parent(u, rel, tree_parent_len(rel, name), &dir)) < 0)
            return r;
        r = rootdir_mknod(dir, name, mode, dev);
    }
    if (r < 0)
        return tree_fail(u, rel, "create node", r);
    tree_meta_named(u, e, dir, name, rel, false);
    return 0;
}

/*
 * A hard link: its target must be an earlier non-directory entry of this
 * layer, reached through directories only (no symlink, nothing outside
 * the target).
 */
static int
entry_hardlink(struct unpack *u, struct archive_entry *e, int dir, const char *name,
               const char *rel)
{
    const char *link = archive_entry_hardlink(e);
    char q[UNPACK_QUOTE_BUF], q2[UNPACK_QUOTE_BUF];
    const char *why = NULL;
    cleanup_free char *t = unpack_path_clean(link, &why);
    if (!t && !why)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    if (t && !t[0])
        why = "is the root";
    if (why)
        return err_set(u->err, ERR_INVALID_CONTENT, "%s %s: hard link target %s %s",
                       UNPACK_ENTRY(u), unpack_quote(rel, q), unpack_quote(link, q2), why);
    char *slash = strrchr(t, '/');
    const char *tbase = slash ? slash + 1 : t;
    int tdir = u->root_fd;
    if (slash) {
        *slash = '\0';
        tdir = rootdir_open_dir(u->root_fd, t);
        *slash = '/';
    }
    if (tdir < 0)
        return err_set(u->err, ERR_INVALID_CONTENT, "%s %s: hard link target %s %s",
                       UNPACK_ENTRY(u), unpack_quote(rel, q), unpack_quote(link, q2),
                       tdir == -ELOOP     ? "goes through a symlink"
                       : tdir == -ENOTDIR ? "goes through something that is not a directory"
                                          : "is not in this layer");
    int ret = 0;
    struct os_stat st;
    int r = rootdir_stat(tdir, tbase, &st);
    if (r < 0) {
        ret = err_set(u->err, ERR_INVALID_CONTENT, "%s %s: hard link target %s is not in this %s",
                      UNPACK_ENTRY(u), unpack_quote(rel, q), unpack_quote(link, q2),
                      UNPACK_ARCHIVE(u));
    } else if (S_ISDIR(st.st_mode)) {
        ret = err_set(u->err, ERR_INVALID_CONTENT, "%s %s: hard link target %s is a directory",
                      UNPACK_ENTRY(u), unpack_quote(rel, q), unpack_quote(link, q2));
    } else if ((r = rootdir_link(tdir, tbase, dir, name)) == -EEXIST) {
        struct os_stat cur;
        if (rootdir_stat(dir, name, &cur) == 0 && cur.st_ino == st.st_ino &&
            cur.st_dev == st.st_dev) {
            r = 0; /* already that file */
        } else {
            bool keep, wh;
            ret = tree_make_room(u, dir, name, rel, false, &keep, &wh);
            if (ret == 0)
                ret = tree_parent(u, rel, tree_parent_len(rel, name), &dir);
            if (ret == 0)
                r = rootdir_link(tdir, tbase, dir, name);
        }
    }
    if (ret == 0 && r < 0)
        ret = tree_fail(u, rel, "create hard link", r);
    if (tdir != u->root_fd)
        rootdir_close(tdir);
    return ret;
}

/* --- whiteouts ------------------------------------------------------------ */

/* Applies whiteout entry rel (".wh." + name in dir) in the overlay format. */
static int
whiteout_apply(struct unpack *u, int dir, const char *base, const char *rel)
{
    int r;
    if (strcmp(base, WHITEOUT_OPAQUE) == 0) {
        if ((r = rootdir_fd_set_xattr(dir, OVERLAY_OPAQUE_XATTR, "y", 1)) < 0)
            return tree_fail(u, rel, "set " OVERLAY_OPAQUE_XATTR, r);
        return 0;
    }
    const char *name = base + strlen(WHITEOUT_PREFIX);
    if (strncmp(name, WHITEOUT_PREFIX, strlen(WHITEOUT_PREFIX)) == 0) {
        /* Other aufs metadata (.wh..wh.plnk and such): never applied. */
        log_debug("unpack: skipping whiteout metadata %s", rel);
        return 0;
    }
    /* ".wh.." or ".wh..." would name the directory itself or its parent:
     * opaque above the layer's root. */
    if (name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return tree_refuse(u, rel, "a whiteout that names no entry");
    struct os_stat st;
    r = rootdir_stat(dir, name, &st);
    if (r == 0) {
        /* An entry of this layer: it stays. A directory loses what the
         * lower layers had under it, as the whiteout asked. */
        if (!S_ISDIR(st.st_mode))
            return 0;
        if ((r = rootdir_set_xattr(dir, name, OVERLAY_OPAQUE_XATTR, "y", 1)) < 0)
            return tree_fail(u, rel, "set " OVERLAY_OPAQUE_XATTR, r);
        return 0;
    }
    if (r != -ENOENT)
        return tree_fail(u, rel, "stat the whited-out entry", r);
    if ((r = rootdir_mknod(dir, name, S_IFCHR | 0, 0)) < 0)
        return tree_fail(u, rel, "create whiteout", r);
    return 0;
}

/* --- the writer ----------------------------------------------------------- */

int
tree_entry(struct unpack *u, struct archive_entry *e, const char *rel)
{
    const char *slash = strrchr(rel, '/');
    const char *name = slash ? slash + 1 : rel;
    int dir = -1;
    int r = tree_parent(u, rel, slash ? (size_t)(slash - rel) : 0, &dir);
    if (r < 0)
        return r;
    if (!u->opts->no_whiteouts && strncmp(name, WHITEOUT_PREFIX, strlen(WHITEOUT_PREFIX)) == 0)
        return whiteout_apply(u, dir, name, rel);
    mode_t type = archive_entry_filetype(e);
    if ((type == AE_IFCHR || type == AE_IFBLK || type == AE_IFIFO) &&
        u->opts->refuse_device_nodes && !u->opts->allow_device_nodes)
        return tree_refuse(u, rel, "a device node or FIFO, refused here");
    if ((type == AE_IFCHR || type == AE_IFBLK) && !u->opts->allow_device_nodes) {
        log_debug("unpack: skipping device node %s", rel);
        return 0;
    }
    if (archive_entry_hardlink(e))
        return entry_hardlink(u, e, dir, name, rel);
    switch (type) {
    case AE_IFREG:
        return entry_file(u, e, dir, name, rel);
    case AE_IFDIR:
        return entry_dir(u, e, dir, name, rel);
    case AE_IFLNK:
        return entry_symlink(u, e, dir, name, rel);
    case AE_IFCHR:
    case AE_IFBLK:
    case AE_IFIFO:
        return entry_node(u, e, dir, name, rel);
    case AE_IFSOCK:
        log_debug("unpack: skipping socket %s", rel);
        return 0;
    default:
        return tree_refuse(u, rel, "an entry of unknown type");
    }
}
