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
 * This file holds the walk to an entry's parent and the descriptors it
 * keeps; unpack_entry.c creates each kind of entry, unpack_meta.c sets
 * owners, modes, xattrs, ACLs and times, and the directories' at the end.
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

#define IMPLICIT_DIR_MODE 0755

/* --- errors ------------------------------------------------------------ */

/* An errno from the filesystem about entry rel. A name the filesystem
 * cannot hold (too long, or on Windows not a valid NTFS name: EILSEQ) is
 * the content's fault, not the disk's. */
int
tree_fail(struct unpack *u, const char *rel, const char *what, int neg)
{
    char q[UNPACK_QUOTE_BUF];
    int e = -neg;
    int code = e == ENAMETOOLONG || e == ELOOP || e == EILSEQ ? ERR_INVALID_CONTENT : e;
    return err_set(u->err, code, "%s %s: %s: %s", UNPACK_ENTRY(u), unpack_quote(rel, q), what,
                   strerror(e));
}

int
tree_refuse(struct unpack *u, const char *rel, const char *why)
{
    char q[UNPACK_QUOTE_BUF];
    return err_set(u->err, ERR_INVALID_CONTENT, "%s %s: %s", UNPACK_ENTRY(u), unpack_quote(rel, q),
                   why);
}

void
tree_meta_warn(struct unpack *u, const char *rel, const char *what, int neg)
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

void
tree_hint_drop(struct unpack *u)
{
    rootdir_close(u->hint_fd);
    u->hint_fd = -1;
    free(u->hint);
    u->hint = NULL;
}

/* Back to the root: after a directory was removed, no open descriptor of
 * the walk may still stand for a name. */
void
tree_forget(struct unpack *u)
{
    if (u->cur_fd >= 0 && u->cur_fd != u->root_fd)
        rootdir_close(u->cur_fd);
    u->cur_fd = u->root_fd;
    u->cur_len = 0;
    u->cur[0] = '\0';
    u->cur_depth = 0;
    tree_hint_drop(u);
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
                           "%s %s: parent %s is a symlink in a lower layer", UNPACK_ENTRY(u),
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
        tree_hint_drop(u);
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
        return err_set(u->err, ERR_INVALID_CONTENT, "%s %.*s: parent %s is a symlink in this %s",
                       UNPACK_ENTRY(u), UNPACK_QUOTE_MAX, rel, p, UNPACK_ARCHIVE(u));
    if (fd == -ENOTDIR) {
        struct os_stat st;
        if (!u->opts->no_whiteouts && rootdir_stat(dir, name, &st) == 0 && stat_is_whiteout(&st)) {
            memset(row(u, d), 0, u->nlowers * sizeof(bool));
            return whiteout_to_dir(u, dir, name, rel, out);
        }
        return err_set(u->err, ERR_INVALID_CONTENT, "%s %.*s: parent %s is not a directory",
                       UNPACK_ENTRY(u), UNPACK_QUOTE_MAX, rel, p);
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
int
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
size_t
tree_parent_len(const char *rel, const char *name)
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
int
tree_make_room(struct unpack *u, int dir, const char *name, const char *rel, bool new_dir,
               bool *keep, bool *was_wh)
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

void
tree_close(struct unpack *u)
{
    if (u->cur_fd >= 0 && u->cur_fd != u->root_fd)
        rootdir_close(u->cur_fd);
    tree_hint_drop(u);
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
