/*
 * A copy of a volume's tree, for the children of volumes where there is
 * no overlay (store/volume_os.h): every entry is read and made relative
 * to directory descriptors (common/rootdir.h), so nothing is followed
 * through a symlink and nothing outside the two trees is touched. Hard
 * links among the copied files stay links (by the source's device and
 * inode); directories get their mode and times after their entries.
 * Metadata the OS does not keep (owners, modes and xattrs on Windows) is
 * left as it comes.
 *
 * Runs on a pool thread; blocks on disk.
 */
#include "store/volume_os.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/os.h"
#include "common/osfs.h"
#include "common/rootdir.h"

#define COPY_MAX_DEPTH 1024
#define COPY_BUF (256 * 1024)

struct copied {
    uint64_t dev, ino;
    char *rel; /* the copy, below the destination's root */
};

struct copy {
    struct err *err;
    int root; /* the destination */
    char *buf;
    struct copied *links; /* files with more than one link, copied so far */
    size_t n, cap;
};

static int
copy_fail(struct copy *c, const char *path, const char *what, int neg)
{
    return err_errno(c->err, -neg, "copy %s: %s", path, what);
}

static void
copy_meta(int fd, const struct os_stat *st)
{
    rootdir_fd_set_owner(fd, st->st_uid, st->st_gid);
    rootdir_fd_set_mode(fd, st->st_mode & 07777);
}

static void
copy_xattrs(int from, int to)
{
    char names[8192];
    ssize_t len = rootdir_fd_list_xattrs(from, names, sizeof(names));
    for (ssize_t off = 0; len > 0 && off < len; off += (ssize_t)strlen(names + off) + 1) {
        char value[65536];
        ssize_t n = rootdir_fd_get_xattr(from, names + off, value, sizeof(value));
        if (n >= 0)
            rootdir_fd_set_xattr(to, names + off, value, (size_t)n);
    }
}

static int
copy_data(struct copy *c, int from, int to, const char *path)
{
    int64_t off = 0;
    for (;;) {
        ssize_t n = read(from, c->buf, COPY_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return copy_fail(c, path, "read", -errno);
        if (n == 0)
            return 0;
        int r = rootdir_fd_write_at(to, c->buf, (size_t)n, off);
        if (r < 0)
            return copy_fail(c, path, "write", r);
        off += n;
    }
}

/* A link of an earlier copy, when name is another link of it. */
static int
copy_link(struct copy *c, const struct os_stat *st, int dst, const char *name, bool *done)
{
    *done = false;
    for (size_t i = 0; i < c->n; i++) {
        if (c->links[i].dev != st->st_dev || c->links[i].ino != st->st_ino)
            continue;
        char *rel = c->links[i].rel;
        char *slash = strrchr(rel, '/');
        int dir = c->root;
        if (slash) {
            *slash = '\0';
            dir = rootdir_open_dir(c->root, rel);
            *slash = '/';
            if (dir < 0)
                return dir;
        }
        int r = rootdir_link(dir, slash ? slash + 1 : rel, dst, name);
        if (dir != c->root)
            rootdir_close(dir);
        *done = r == 0;
        return r == -ENOTSUP || r == -EPERM ? 0 : r; /* no links here: a copy then */
    }
    return 0;
}

static int
remember(struct copy *c, const struct os_stat *st, const char *path)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 32;
        struct copied *v = realloc(c->links, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        c->links = v;
        c->cap = cap;
    }
    char *rel = strdup(path + 2); /* without the "./" */
    if (!rel)
        return -ENOMEM;
    c->links[c->n++] = (struct copied){st->st_dev, st->st_ino, rel};
    return 0;
}

static int copy_dir(struct copy *c, int src, int dst, const char *path, int depth);

static int
copy_entry(struct copy *c, int src, int dst, const char *name, const char *path, int depth)
{
    struct os_stat st;
    int r = rootdir_stat(src, name, &st);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return copy_fail(c, path, "stat", r);
    struct timespec ts[2] = {st.st_atim, st.st_mtim};
    if (S_ISDIR(st.st_mode)) {
        int s = -1, d = -1;
        if ((r = rootdir_mkdir(dst, name, 0700)) < 0)
            return copy_fail(c, path, "mkdir", r);
        if ((s = rootdir_open_dir(src, name)) < 0 || (d = rootdir_open_dir(dst, name)) < 0) {
            r = copy_fail(c, path, "open", s < 0 ? s : d);
        } else {
            r = copy_dir(c, s, d, path, depth + 1);
            copy_xattrs(s, d);
            copy_meta(d, &st);
            rootdir_fd_set_times(d, ts);
        }
        rootdir_close(s);
        rootdir_close(d);
        return r;
    }
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX + 1];
        ssize_t n = rootdir_readlink(src, name, target, PATH_MAX);
        if (n < 0)
            return copy_fail(c, path, "readlink", (int)n);
        target[n] = '\0';
        if ((r = rootdir_symlink(dst, name, target)) < 0)
            return copy_fail(c, path, "symlink", r);
        rootdir_set_owner(dst, name, st.st_uid, st.st_gid);
        rootdir_set_times(dst, name, ts);
        return 0;
    }
    if (!S_ISREG(st.st_mode)) {
        if ((r = rootdir_mknod(dst, name, st.st_mode, (dev_t)st.st_rdev)) < 0)
            return copy_fail(c, path, "make the node", r);
        rootdir_set_owner(dst, name, st.st_uid, st.st_gid);
        rootdir_set_times(dst, name, ts);
        return 0;
    }
    bool linked = false;
    if (st.st_nlink > 1 && (r = copy_link(c, &st, dst, name, &linked)) < 0)
        return copy_fail(c, path, "link", r);
    if (linked)
        return 0;
    int from = rootdir_open_file(src, name);
    if (from < 0)
        return copy_fail(c, path, "open", from);
    int to = rootdir_create_file(dst, name, 0600);
    if (to < 0) {
        rootdir_close(from);
        return copy_fail(c, path, "create", to);
    }
    r = copy_data(c, from, to, path);
    if (r == 0) {
        copy_xattrs(from, to);
        copy_meta(to, &st);
        rootdir_fd_set_times(to, ts);
    }
    rootdir_close(from);
    int e = rootdir_close(to);
    if (r == 0 && e < 0)
        r = copy_fail(c, path, "close", e);
    if (r == 0 && st.st_nlink > 1 && (e = remember(c, &st, path)) < 0)
        r = copy_fail(c, path, "remember a link", e);
    return r;
}

static int
copy_dir(struct copy *c, int src, int dst, const char *path, int depth)
{
    if (depth > COPY_MAX_DEPTH)
        return err_set(c->err, ELOOP, "copy %s: deeper than %d levels", path, COPY_MAX_DEPTH);
    struct osfs_dir *d = NULL;
    int r = osfs_dir_open_at(src, &d);
    if (r < 0)
        return copy_fail(c, path, "read the directory", r);
    int ret = 0;
    const char *name;
    while (ret == 0 && (name = osfs_dir_next(d, &r))) {
        cleanup_free char *sub = NULL;
        if (asprintf(&sub, "%s/%s", path, name) < 0) {
            sub = NULL;
            ret = err_set(c->err, ENOMEM, "copy: out of memory");
            break;
        }
        ret = copy_entry(c, src, dst, name, sub, depth);
    }
    if (ret == 0 && r < 0)
        ret = copy_fail(c, path, "read the directory", r);
    osfs_dir_close(d);
    return ret;
}

int
volume_copy_tree(int src, int dst, struct err *err)
{
    struct copy c = {.err = err, .root = dst, .buf = malloc(COPY_BUF)};
    if (!c.buf)
        return err_set(err, ENOMEM, "copy: out of memory");
    int ret = copy_dir(&c, src, dst, ".", 0);
    if (ret == 0) {
        struct os_stat st;
        if (rootdir_stat(src, "", &st) == 0) {
            struct timespec ts[2] = {st.st_atim, st.st_mtim};
            copy_meta(dst, &st);
            rootdir_fd_set_times(dst, ts);
        }
    }
    for (size_t i = 0; i < c.n; i++)
        free(c.links[i].rel);
    free(c.links);
    free(c.buf);
    return ret;
}
