/*
 * berth's writer of tar entries below an unpack target. Every entry is
 * created relative to an open descriptor of its parent directory, through
 * common/rootdir.h only: nothing is resolved from the process's root or
 * working directory, no symlink is ever followed, and the working
 * directory is never read or changed, so any number of unpacks run at
 * once on the pool.
 *
 * The parent of the previous entry stays open (cur, cur_fd): the next
 * entry of the same directory costs no lookup, a sibling directory one
 * open, a directory elsewhere one openat2 from the root plus one open per
 * new component. Each component is checked as the walk reaches it: a
 * symlink or a non-directory of this layer in the way is refused, a
 * whiteout of this layer becomes an opaque directory, a missing one is
 * created (0755) unless the merged view of the lower layers shows a
 * symlink there (what an overlay mount would follow). The checks of a
 * component are cached with it (rows: which lowers still take part below
 * it), so they run once per directory, not once per entry.
 *
 * Per entry: create it (O_EXCL; an entry in the way is removed first, a
 * directory only when empty), write the data at its offsets (holes stay
 * holes), then owner, mode (only when the umask or chown changed it),
 * xattrs (after chown, which drops security.capability), ACLs, times.
 * Directories get their mode, ACLs and times at the end, deepest first,
 * because later entries inside them would change their times and a mode
 * without u+wx would keep an unprivileged writer out.
 *
 * Runs on the unpacking pool thread; blocks on disk.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/os.h"
#include "common/rootdir.h"
#include "store/unpack_int.h"

#define ACL_ACCESS_XATTR "system.posix_acl_access"
#define ACL_DEFAULT_XATTR "system.posix_acl_default"
#define IMPLICIT_DIR_MODE 0755

/* --- errors ------------------------------------------------------------ */

/* An errno from the filesystem about entry rel. A name the filesystem
 * cannot hold (too long, or on Windows not a valid NTFS name: EILSEQ) is
 * the content's fault, not the disk's. */
static int
tree_fail(struct unpack *u, const char *rel, const char *what, int neg)
{
    char q[UNPACK_QUOTE_BUF];
    int e = -neg;
    int code = e == ENAMETOOLONG || e == ELOOP || e == EILSEQ ? ERR_INVALID_CONTENT : e;
    return err_set(u->err, code, "layer entry %s: %s: %s", unpack_quote(rel, q), what, strerror(e));
}

static int
tree_refuse(struct unpack *u, const char *rel, const char *why)
{
    char q[UNPACK_QUOTE_BUF];
    return err_set(u->err, ERR_INVALID_CONTENT, "layer entry %s: %s", unpack_quote(rel, q), why);
}

static void
meta_warn(struct unpack *u, const char *rel, const char *what, int neg)
{
    char q[UNPACK_QUOTE_BUF];
    if (!u->warned_meta) {
        u->warned_meta = true;
        log_warn("unpack: layer entry %s: %s: %s (further ones at debug level)",
                 unpack_quote(rel, q), what, strerror(-neg));
    } else {
        log_debug("unpack: layer entry %s: %s: %s", unpack_quote(rel, q), what, strerror(-neg));
    }
}

/* A 0/0 character device (makedev(0, 0) is 0). */
static bool
stat_is_whiteout(const struct os_stat *st)
{
    return S_ISCHR(st->st_mode) && st->st_rdev == 0;
}

static bool
fd_is_opaque(int fd)
{
    char v[4];
    return rootdir_fd_get_xattr(fd, OVERLAY_OPAQUE_XATTR, v, sizeof(v)) == 1 && v[0] == 'y';
}

/* --- the cached parent --------------------------------------------------- */

static bool *
row(struct unpack *u, size_t depth)
{
    return u->rows + depth * u->nlowers;
}

static int
rows_reserve(struct unpack *u, size_t depth)
{
    if (depth < u->rows_levels)
        return 0;
    size_t levels = u->rows_levels ? u->rows_levels : 16;
    while (levels <= depth)
        levels *= 2;
    bool *r = realloc(u->rows, levels * (u->nlowers ? u->nlowers : 1) * sizeof(bool));
    if (!r)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    u->rows = r;
    u->rows_levels = levels;
    return 0;
}

static void
hint_drop(struct unpack *u)
{
    rootdir_close(u->hint_fd);
    u->hint_fd = -1;
    free(u->hint);
    u->hint = NULL;
}

/* Back to the root: after a directory was removed, no open descriptor of
 * the walk may still stand for a name. */
static void
tree_forget(struct unpack *u)
{
    if (u->cur_fd >= 0 && u->cur_fd != u->root_fd)
        rootdir_close(u->cur_fd);
    u->cur_fd = u->root_fd;
    u->cur_len = 0;
    u->cur[0] = '\0';
    u->cur_depth = 0;
    hint_drop(u);
}

/*
 * The lowers' part in component p (a path from the root) at depth d:
 * starts from depth d - 1, drops the lowers where p is missing or hidden,
 * and refuses p when the merged view shows a symlink there. upper_dir: p
 * is a directory of this layer, which hides whatever the lowers have.
 */
static int
lowers_step(struct unpack *u, const char *rel, const char *p, size_t d, bool upper_dir)
{
    bool *prev = row(u, d - 1), *cur = row(u, d);
    bool found = upper_dir, blocked = false;
    for (size_t i = 0; i < u->nlowers; i++) {
        cur[i] = false;
        if (!prev[i] || blocked)
            continue;
        int fd = rootdir_open_dir(u->lower_fds[i], p);
        if (fd == -ENOENT)
            continue;
        if (fd == -ELOOP && !found) {
            char q[UNPACK_QUOTE_BUF];
            return err_set(u->err, ERR_INVALID_CONTENT,
                           "layer entry %s: parent %s is a symlink in a lower layer",
                           unpack_quote(rel, q), p);
        }
        if (fd == -ELOOP || fd == -ENOTDIR) {
            /* A symlink hidden by a higher layer's directory, a whiteout or
             * a file: hides p in every lower below. */
            found = true;
            blocked = true;
            continue;
        }
        if (fd < 0)
            return tree_fail(u, rel, "look at a lower layer", fd);
        found = true;
        cur[i] = true;
        if (fd_is_opaque(fd))
            blocked = true;
        rootdir_close(fd);
    }
    return 0;
}

static bool
row_any(struct unpack *u, size_t d)
{
    for (size_t i = 0; i < u->nlowers; i++)
        if (row(u, d)[i])
            return true;
    return false;
}

/* Replaces a whiteout of this layer (name in dir) by an opaque directory. */
static int
whiteout_to_dir(struct unpack *u, int dir, const char *name, const char *rel, int *fd)
{
    int r = rootdir_remove(dir, name, false);
    if (r == 0)
        r = rootdir_mkdir(dir, name, IMPLICIT_DIR_MODE);
    if (r == 0 && (r = rootdir_open_dir(dir, name)) >= 0) {
        *fd = r;
        r = rootdir_fd_set_xattr(*fd, OVERLAY_OPAQUE_XATTR, "y", 1);
    }
    return r < 0 ? tree_fail(u, rel, "turn a whiteout into a directory", r) : 0;
}

/*
 * One component: name in dir (open), path p from the root (the prefix of
 * entry rel), at depth d. *out is the component's directory, open.
 */
static int
walk_step(struct unpack *u, int dir, const char *name, const char *rel, const char *p, size_t d,
          int *out)
{
    int r = rows_reserve(u, d);
    if (r < 0)
        return r;
    bool lowers = u->nlowers && row_any(u, d - 1);
    int fd;
    if (u->hint && strcmp(u->hint, p) == 0) {
        fd = steal_fd(&u->hint_fd);
        hint_drop(u);
    } else {
        fd = rootdir_open_dir(dir, name);
    }
    if (fd >= 0) {
        if (lowers && (r = lowers_step(u, rel, p, d, true)) < 0) {
            rootdir_close(fd);
            return r;
        }
        if (!lowers || fd_is_opaque(fd))
            memset(row(u, d), 0, u->nlowers * sizeof(bool));
        *out = fd;
        return 0;
    }
    if (fd == -ELOOP)
        return err_set(u->err, ERR_INVALID_CONTENT,
                       "layer entry %.*s: parent %s is a symlink in this layer", UNPACK_QUOTE_MAX,
                       rel, p);
    if (fd == -ENOTDIR) {
        struct os_stat st;
        if (!u->opts->no_whiteouts && rootdir_stat(dir, name, &st) == 0 && stat_is_whiteout(&st)) {
            memset(row(u, d), 0, u->nlowers * sizeof(bool));
            return whiteout_to_dir(u, dir, name, rel, out);
        }
        return err_set(u->err, ERR_INVALID_CONTENT,
                       "layer entry %.*s: parent %s is not a directory", UNPACK_QUOTE_MAX, rel, p);
    }
    if (fd != -ENOENT)
        return tree_fail(u, rel, "open a parent directory", fd);
    if (lowers && (r = lowers_step(u, rel, p, d, false)) < 0)
        return r;
    if (!lowers)
        memset(row(u, d), 0, u->nlowers * sizeof(bool));
    bool created;
    fd = rootdir_open_or_make_dir(dir, name, IMPLICIT_DIR_MODE, &created);
    if (fd < 0)
        return tree_fail(u, rel, "create a parent directory", fd);
    *out = fd;
    return 0;
}

/*
 * Opens the parent of entry rel (its first plen bytes; 0: the root) into
 * *pfd, walking only what differs from the previous entry's parent.
 */
static int
tree_parent(struct unpack *u, const char *rel, size_t plen, int *pfd)
{
    if (plen == u->cur_len && memcmp(u->cur, rel, plen) == 0) {
        *pfd = u->cur_fd;
        return 0;
    }
    /* The common prefix, in whole components: rel[plen] is the '/' before
     * the entry's name, so each component of rel ends at a '/'. */
    size_t pre = 0, depth = 0;
    for (size_t i = 0; i < plen && i < u->cur_len;) {
        size_t a = strcspn(rel + i, "/"), b = strcspn(u->cur + i, "/");
        if (a != b || memcmp(rel + i, u->cur + i, a) != 0)
            break;
        depth++;
        pre = i + a;
        i = pre + 1;
    }
    int fd;
    if (depth == u->cur_depth) {
        fd = u->cur_fd; /* the new parent is below the old one */
    } else {
        if (u->cur_fd != u->root_fd)
            rootdir_close(u->cur_fd);
        u->cur_fd = u->root_fd;
        if (depth == 0) {
            fd = u->root_fd;
        } else {
            char saved = u->cur[pre];
            u->cur[pre] = '\0';
            fd = rootdir_open_dir(u->root_fd, u->cur);
            u->cur[pre] = saved;
            if (fd < 0) {
                tree_forget(u);
                return tree_fail(u, rel, "reopen a parent directory", fd);
            }
        }
    }
    /* From here on the cache is the new parent, built as we go. */
    if (plen + 1 > u->cur_cap) {
        char *c = realloc(u->cur, plen + 1);
        if (!c) {
            if (fd != u->root_fd)
                rootdir_close(fd);
            tree_forget(u);
            return err_set(u->err, ENOMEM, "unpack: out of memory");
        }
        u->cur = c;
        u->cur_cap = plen + 1;
    }
    memcpy(u->cur, rel, pre);
    u->cur[pre] = '\0';
    u->cur_len = pre;
    u->cur_depth = depth;
    u->cur_fd = fd;
    for (size_t at = depth ? pre + 1 : 0; at < plen;) {
        size_t n = strcspn(rel + at, "/");
        char name[NAME_MAX + 1];
        memcpy(name, rel + at, n);
        name[n] = '\0';
        memcpy(u->cur + u->cur_len, u->cur_len ? "/" : "", u->cur_len ? 1 : 0);
        size_t base = u->cur_len ? u->cur_len + 1 : 0;
        memcpy(u->cur + base, name, n + 1);
        int nfd = -1;
        int r = walk_step(u, u->cur_fd, name, rel, u->cur, u->cur_depth + 1, &nfd);
        if (r < 0) {
            tree_forget(u);
            return r;
        }
        if (u->cur_fd != u->root_fd)
            rootdir_close(u->cur_fd);
        u->cur_fd = nfd;
        u->cur_len = base + n;
        u->cur_depth++;
        at += n + 1;
    }
    *pfd = u->cur_fd;
    return 0;
}

/* The length of the parent part of rel, whose last component is name. */
static size_t
parent_len(const char *rel, const char *name)
{
    return name > rel ? (size_t)(name - rel) - 1 : 0;
}

/* --- entries in the way --------------------------------------------------- */

/*
 * Makes room for a new entry name in dir: an existing non-directory goes
 * (made writable first if it is immutable); an existing directory stays
 * when the new entry is one (*keep), else goes if it is empty. *was_wh
 * says it was a whiteout of this layer.
 */
static int
make_room(struct unpack *u, int dir, const char *name, const char *rel, bool new_dir, bool *keep,
          bool *was_wh)
{
    *keep = false;
    *was_wh = false;
    struct os_stat st;
    int r = rootdir_stat(dir, name, &st);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return tree_fail(u, rel, "stat the entry in the way", r);
    if (S_ISDIR(st.st_mode)) {
        if (new_dir) {
            *keep = true;
            return 0;
        }
        r = rootdir_remove(dir, name, true);
        if (r == -ENOTEMPTY || r == -EEXIST)
            return tree_refuse(u, rel, "replaces a directory that is not empty");
        if (r < 0)
            return tree_fail(u, rel, "remove the directory in the way", r);
        tree_forget(u);
        return 0;
    }
    *was_wh = !u->opts->no_whiteouts && stat_is_whiteout(&st);
    r = rootdir_remove(dir, name, false);
    if ((r == -EPERM || r == -EACCES) && S_ISREG(st.st_mode)) {
        /* A read-only (or immutable) file of that name is in the way. */
        log_debug("unpack: %s is immutable, making it writable and retrying", rel);
        int fd = rootdir_open_file(dir, name);
        if (fd >= 0) {
            rootdir_fd_clear_flags(fd);
            rootdir_close(fd);
        }
        r = rootdir_remove(dir, name, false);
    }
    return r < 0 ? tree_fail(u, rel, "remove the entry in the way", r) : 0;
}

/* --- metadata ------------------------------------------------------------- */

static void
entry_times(struct archive_entry *e, struct timespec ts[2])
{
    ts[0] = (struct timespec){.tv_nsec = UTIME_OMIT};
    ts[1] = (struct timespec){.tv_nsec = UTIME_OMIT};
    if (archive_entry_atime_is_set(e))
        ts[0] = (struct timespec){archive_entry_atime(e), archive_entry_atime_nsec(e)};
    if (archive_entry_mtime_is_set(e))
        ts[1] = (struct timespec){archive_entry_mtime(e), archive_entry_mtime_nsec(e)};
}

/* Sets the entry's xattrs, but overlay's own: only the whiteout
 * conversion may set those. fd >= 0: on it, else on name in dir. */
static void
entry_xattrs(struct unpack *u, struct archive_entry *e, int fd, int dir, const char *name,
             const char *rel)
{
    if (archive_entry_xattr_reset(e) == 0)
        return;
    const char *key;
    const void *value;
    size_t size;
    while (archive_entry_xattr_next(e, &key, &value, &size) == ARCHIVE_OK) {
        if (strncmp(key, OVERLAY_XATTR_PREFIX, strlen(OVERLAY_XATTR_PREFIX)) == 0) {
            log_debug("unpack: %s: dropping xattr %s", rel, key);
            continue;
        }
        int r = fd >= 0 ? rootdir_fd_set_xattr(fd, key, value, size)
                        : rootdir_set_xattr(dir, name, key, value, size);
        if (r < 0)
            meta_warn(u, rel, key, r);
    }
}

/* The entry's ACL xattr values; 0 or -errno with err set. */
static int
entry_acls(struct unpack *u, struct archive_entry *e, const char *rel, bool dir, void **acc,
           size_t *acc_len, void **def, size_t *def_len)
{
    *def = NULL;
    *def_len = 0;
    if (archive_entry_acl_types(e) & ARCHIVE_ENTRY_ACL_TYPE_NFS4)
        meta_warn(u, rel, "NFSv4 ACL left out", -ENOTSUP);
    if (unpack_acl_xattr(e, ARCHIVE_ENTRY_ACL_TYPE_ACCESS, acc, acc_len) < 0 ||
        (dir && unpack_acl_xattr(e, ARCHIVE_ENTRY_ACL_TYPE_DEFAULT, def, def_len) < 0)) {
        free(*acc);
        *acc = NULL;
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    }
    return 0;
}

/*
 * Owner, mode, xattrs and ACLs of the open non-directory fd, in the order
 * that keeps each: chown clears setuid bits and security.capability.
 */
static int
meta_file(struct unpack *u, struct archive_entry *e, int fd, const char *rel)
{
    mode_t perm = archive_entry_perm(e) & 07777;
    int r = rootdir_fd_set_owner(fd, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e));
    bool owned = r == 0;
    if (r < 0) {
        meta_warn(u, rel, "set owner", r);
        perm &= ~(mode_t)(S_ISUID | S_ISGID); /* never setuid to ourselves */
    }
    bool chmod = (perm & 07000) || u->umask < 0 || (perm & (mode_t)u->umask) || !owned;
    if (chmod && (r = rootdir_fd_set_mode(fd, perm)) < 0)
        return tree_fail(u, rel, "set mode", r);
    entry_xattrs(u, e, fd, -1, NULL, rel);
    void *acc = NULL, *def = NULL;
    size_t acc_len = 0, def_len = 0;
    if ((r = entry_acls(u, e, rel, false, &acc, &acc_len, &def, &def_len)) < 0)
        return r;
    if (acc && (r = rootdir_fd_set_xattr(fd, ACL_ACCESS_XATTR, acc, acc_len)) < 0)
        meta_warn(u, rel, "set ACL", r);
    free(acc);
    struct timespec ts[2];
    entry_times(e, ts);
    if ((r = rootdir_fd_set_times(fd, ts)) < 0)
        meta_warn(u, rel, "set times", r);
    return 0;
}

/* Owner, mode, xattrs and times of name in dir (symlinks, devices). */
static void
meta_named(struct unpack *u, struct archive_entry *e, int dir, const char *name, const char *rel,
           bool symlink)
{
    int r = rootdir_set_owner(dir, name, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e));
    if (r < 0)
        meta_warn(u, rel, "set owner", r);
    if (!symlink) {
        mode_t perm = archive_entry_perm(e) & 07777;
        if (r < 0)
            perm &= ~(mode_t)(S_ISUID | S_ISGID);
        if ((u->umask < 0 || (perm & ((mode_t)u->umask | 07000))) &&
            (r = rootdir_set_mode(dir, name, perm)) < 0)
            meta_warn(u, rel, "set mode", r);
    }
    entry_xattrs(u, e, -1, dir, name, rel);
    struct timespec ts[2];
    entry_times(e, ts);
    if ((r = rootdir_set_times(dir, name, ts)) < 0)
        meta_warn(u, rel, "set times", r);
}

static int
fixup_add(struct unpack *u, struct archive_entry *e, const char *rel)
{
    if (u->nfix == u->capfix) {
        size_t cap = u->capfix ? u->capfix * 2 : 64;
        struct unpack_fixup *f = realloc(u->fix, cap * sizeof(*f));
        if (!f)
            return err_set(u->err, ENOMEM, "unpack: out of memory");
        u->fix = f;
        u->capfix = cap;
    }
    struct unpack_fixup *f = &u->fix[u->nfix];
    memset(f, 0, sizeof(*f));
    f->rel = strdup(rel);
    if (!f->rel)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    f->seq = u->nfix;
    f->mode = archive_entry_perm(e) & 07777;
    entry_times(e, f->ts);
    int r = entry_acls(u, e, rel, true, &f->acl_access, &f->acl_access_len, &f->acl_default,
                       &f->acl_default_len);
    if (r < 0) {
        free(f->rel);
        return r;
    }
    u->nfix++;
    return 0;
}

/* --- entry types ---------------------------------------------------------- */

static int
entry_file(struct unpack *u, struct archive_entry *e, int dir, const char *name, const char *rel)
{
    mode_t perm = archive_entry_perm(e) & 0777;
    int fd = rootdir_create_file(dir, name, perm);
    if (fd == -EEXIST) {
        bool keep, wh;
        int r = make_room(u, dir, name, rel, false, &keep, &wh);
        if (r < 0)
            return r;
        /* make_room may have reset the walk. */
        if ((r = tree_parent(u, rel, parent_len(rel, name), &dir)) < 0)
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
        r = meta_file(u, e, fd, rel);
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
        if ((r = make_room(u, dir, name, rel, true, &keep, &wh)) < 0)
            return r;
        if (!keep) {
            if ((r = tree_parent(u, rel, parent_len(rel, name), &dir)) < 0)
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
        meta_warn(u, rel, "set owner", r);
    entry_xattrs(u, e, fd, -1, NULL, rel);
    /* After a whiteout of its own name, what the lower layers had there is
     * gone; what this layer puts there stays. */
    if (wh && (r = rootdir_fd_set_xattr(fd, OVERLAY_OPAQUE_XATTR, "y", 1)) < 0) {
        rootdir_close(fd);
        return tree_fail(u, rel, "set " OVERLAY_OPAQUE_XATTR, r);
    }
    if ((r = fixup_add(u, e, rel)) < 0) {
        rootdir_close(fd);
        return r;
    }
    /* The next entry is most likely inside it. */
    hint_drop(u);
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
        if ((r = make_room(u, dir, name, rel, false, &keep, &wh)) < 0)
            return r;
        if ((r = tree_parent(u, rel, parent_len(rel, name), &dir)) < 0)
            return r;
        r = rootdir_symlink(dir, name, target);
    }
    if (r < 0)
        return tree_fail(u, rel, "create symlink", r);
    meta_named(u, e, dir, name, rel, true);
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
        if ((r = make_room(u, dir, name, rel, false, &keep, &wh)) < 0)
            return r;
        if ((r = tree_parent(u, rel, parent_len(rel, name), &dir)) < 0)
            return r;
        r = rootdir_mknod(dir, name, mode, dev);
    }
    if (r < 0)
        return tree_fail(u, rel, "create node", r);
    meta_named(u, e, dir, name, rel, false);
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
        return err_set(u->err, ERR_INVALID_CONTENT, "layer entry %s: hard link target %s %s",
                       unpack_quote(rel, q), unpack_quote(link, q2), why);
    char *slash = strrchr(t, '/');
    const char *tbase = slash ? slash + 1 : t;
    int tdir = u->root_fd;
    if (slash) {
        *slash = '\0';
        tdir = rootdir_open_dir(u->root_fd, t);
        *slash = '/';
    }
    if (tdir < 0)
        return err_set(u->err, ERR_INVALID_CONTENT, "layer entry %s: hard link target %s %s",
                       unpack_quote(rel, q), unpack_quote(link, q2),
                       tdir == -ELOOP     ? "goes through a symlink"
                       : tdir == -ENOTDIR ? "goes through something that is not a directory"
                                          : "is not in this layer");
    int ret = 0;
    struct os_stat st;
    int r = rootdir_stat(tdir, tbase, &st);
    if (r < 0) {
        ret = err_set(u->err, ERR_INVALID_CONTENT,
                      "layer entry %s: hard link target %s is not in this layer",
                      unpack_quote(rel, q), unpack_quote(link, q2));
    } else if (S_ISDIR(st.st_mode)) {
        ret = err_set(u->err, ERR_INVALID_CONTENT,
                      "layer entry %s: hard link target %s is a directory", unpack_quote(rel, q),
                      unpack_quote(link, q2));
    } else if ((r = rootdir_link(tdir, tbase, dir, name)) == -EEXIST) {
        struct os_stat cur;
        if (rootdir_stat(dir, name, &cur) == 0 && cur.st_ino == st.st_ino &&
            cur.st_dev == st.st_dev) {
            r = 0; /* already that file */
        } else {
            bool keep, wh;
            ret = make_room(u, dir, name, rel, false, &keep, &wh);
            if (ret == 0)
                ret = tree_parent(u, rel, parent_len(rel, name), &dir);
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

int
tree_open(struct unpack *u)
{
    const struct unpack_opts *o = u->opts;
    u->cur_fd = -1;
    u->hint_fd = -1;
    u->root_fd = o->target_dir ? rootdir_open(o->target_dir) : rootdir_dup(o->target_fd);
    if (u->root_fd < 0)
        return err_errno(u->err, -u->root_fd, "unpack into %s",
                         o->target_dir ? o->target_dir : o->shown_dir);
    u->shown_dir = o->shown_dir ? o->shown_dir : o->target_dir;
    u->shown_len = strlen(u->shown_dir);
    while (o->lower_dirs && o->lower_dirs[u->nlowers])
        u->nlowers++;
    while (!o->lower_dirs && o->lower_fds && o->lower_fds[u->nlowers] >= 0)
        u->nlowers++;
    u->lower_fds = calloc(u->nlowers + 1, sizeof(int));
    u->cur = calloc(1, 256);
    if (!u->lower_fds || !u->cur)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    u->cur_cap = 256;
    u->cur_fd = u->root_fd;
    for (size_t i = 0; i < u->nlowers; i++)
        u->lower_fds[i] = -1;
    for (size_t i = 0; i < u->nlowers; i++) {
        u->lower_fds[i] =
            o->lower_dirs ? rootdir_open(o->lower_dirs[i]) : rootdir_dup(o->lower_fds[i]);
        if (u->lower_fds[i] < 0)
            return err_errno(u->err, -u->lower_fds[i], "open lower layer %s",
                             o->lower_dirs ? o->lower_dirs[i] : "(a descriptor)");
    }
    int r = rows_reserve(u, 0);
    if (r < 0)
        return r;
    for (size_t i = 0; i < u->nlowers; i++)
        row(u, 0)[i] = true;
    u->umask = rootdir_umask();
    return 0;
}

static int
fixup_cmp(const void *a, const void *b)
{
    const struct unpack_fixup *x = a, *y = b;
    int c = strcmp(y->rel, x->rel); /* deepest first: a child sorts after its parent */
    if (c)
        return c;
    return x->seq < y->seq ? -1 : 1;
}

int
tree_finish(struct unpack *u)
{
    tree_forget(u);
    if (u->nfix > 1)
        qsort(u->fix, u->nfix, sizeof(*u->fix), fixup_cmp);
    for (size_t i = 0; i < u->nfix; i++) {
        struct unpack_fixup *f = &u->fix[i];
        int fd = rootdir_open_dir(u->root_fd, f->rel);
        if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP)
            continue; /* replaced by a later entry */
        if (fd < 0)
            return tree_fail(u, f->rel, "open directory", fd);
        int r = rootdir_fd_set_mode(fd, f->mode);
        if (r < 0)
            meta_warn(u, f->rel, "set mode", r);
        if (f->acl_access &&
            (r = rootdir_fd_set_xattr(fd, ACL_ACCESS_XATTR, f->acl_access, f->acl_access_len)) < 0)
            meta_warn(u, f->rel, "set ACL", r);
        if (f->acl_default && (r = rootdir_fd_set_xattr(fd, ACL_DEFAULT_XATTR, f->acl_default,
                                                        f->acl_default_len)) < 0)
            meta_warn(u, f->rel, "set default ACL", r);
        if ((r = rootdir_fd_set_times(fd, f->ts)) < 0)
            meta_warn(u, f->rel, "set times", r);
        rootdir_close(fd);
    }
    return 0;
}

void
tree_close(struct unpack *u)
{
    if (u->cur_fd >= 0 && u->cur_fd != u->root_fd)
        rootdir_close(u->cur_fd);
    hint_drop(u);
    free(u->cur);
    free(u->rows);
    for (size_t i = 0; u->lower_fds && i < u->nlowers; i++)
        rootdir_close(u->lower_fds[i]);
    free(u->lower_fds);
    for (size_t i = 0; i < u->nfix; i++) {
        free(u->fix[i].rel);
        free(u->fix[i].acl_access);
        free(u->fix[i].acl_default);
    }
    free(u->fix);
    rootdir_close(u->root_fd);
}
