/*
 * The metadata of the entries berth's tar writer makes (unpack_tree.c):
 * owner, mode, xattrs (overlay's own left out), POSIX ACLs and times, set
 * in the order that keeps each (chown clears setuid bits and
 * security.capability); a directory's mode, ACLs and times are kept as a
 * fixup and set at the end, deepest first. Metadata the filesystem does
 * not take is a warning, once per unpack, not a failure.
 *
 * Runs on the unpacking pool thread; blocks on disk.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/rootdir.h"
#include "store/unpack_int.h"

#define ACL_ACCESS_XATTR "system.posix_acl_access"
#define ACL_DEFAULT_XATTR "system.posix_acl_default"

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
void
tree_entry_xattrs(struct unpack *u, struct archive_entry *e, int fd, int dir, const char *name,
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
            tree_meta_warn(u, rel, key, r);
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
        tree_meta_warn(u, rel, "NFSv4 ACL left out", -ENOTSUP);
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
int
tree_meta_file(struct unpack *u, struct archive_entry *e, int fd, const char *rel)
{
    mode_t perm = archive_entry_perm(e) & 07777;
    int r = rootdir_fd_set_owner(fd, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e));
    bool owned = r == 0;
    if (r < 0) {
        tree_meta_warn(u, rel, "set owner", r);
        perm &= ~(mode_t)(S_ISUID | S_ISGID); /* never setuid to ourselves */
    }
    bool chmod = (perm & 07000) || u->umask < 0 || (perm & (mode_t)u->umask) || !owned;
    if (chmod && (r = rootdir_fd_set_mode(fd, perm)) < 0)
        return tree_fail(u, rel, "set mode", r);
    tree_entry_xattrs(u, e, fd, -1, NULL, rel);
    void *acc = NULL, *def = NULL;
    size_t acc_len = 0, def_len = 0;
    if ((r = entry_acls(u, e, rel, false, &acc, &acc_len, &def, &def_len)) < 0)
        return r;
    if (acc && (r = rootdir_fd_set_xattr(fd, ACL_ACCESS_XATTR, acc, acc_len)) < 0)
        tree_meta_warn(u, rel, "set ACL", r);
    free(acc);
    struct timespec ts[2];
    entry_times(e, ts);
    if ((r = rootdir_fd_set_times(fd, ts)) < 0)
        tree_meta_warn(u, rel, "set times", r);
    return 0;
}

/* Owner, mode, xattrs and times of name in dir (symlinks, devices). */
void
tree_meta_named(struct unpack *u, struct archive_entry *e, int dir, const char *name,
                const char *rel, bool symlink)
{
    int r = rootdir_set_owner(dir, name, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e));
    if (r < 0)
        tree_meta_warn(u, rel, "set owner", r);
    if (!symlink) {
        mode_t perm = archive_entry_perm(e) & 07777;
        if (r < 0)
            perm &= ~(mode_t)(S_ISUID | S_ISGID);
        if ((u->umask < 0 || (perm & ((mode_t)u->umask | 07000))) &&
            (r = rootdir_set_mode(dir, name, perm)) < 0)
            tree_meta_warn(u, rel, "set mode", r);
    }
    tree_entry_xattrs(u, e, -1, dir, name, rel);
    struct timespec ts[2];
    entry_times(e, ts);
    if ((r = rootdir_set_times(dir, name, ts)) < 0)
        tree_meta_warn(u, rel, "set times", r);
}

int
tree_fixup_add(struct unpack *u, struct archive_entry *e, const char *rel)
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
            tree_meta_warn(u, f->rel, "set mode", r);
        if (f->acl_access &&
            (r = rootdir_fd_set_xattr(fd, ACL_ACCESS_XATTR, f->acl_access, f->acl_access_len)) < 0)
            tree_meta_warn(u, f->rel, "set ACL", r);
        if (f->acl_default && (r = rootdir_fd_set_xattr(fd, ACL_DEFAULT_XATTR, f->acl_default,
                                                        f->acl_default_len)) < 0)
            tree_meta_warn(u, f->rel, "set default ACL", r);
        if ((r = rootdir_fd_set_times(fd, f->ts)) < 0)
            tree_meta_warn(u, f->rel, "set times", r);
        rootdir_close(fd);
    }
    return 0;
}
