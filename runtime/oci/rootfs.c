/*
 * Mount targets walked and made inside the rootfs with directory fds; see
 * rootfs.h. Pool threads only.
 *
 * The walk is that of RESOLVE_IN_ROOT: an absolute symlink starts again
 * at the rootfs, ".." never climbs above it, and the kernel never follows
 * a symlink itself (every step is an fstatat or openat with O_NOFOLLOW on
 * the fd of the directory reached so far). openat2 would do the walk but
 * not tell where it went, which the spec needs.
 */
#include "runtime/oci/rootfs.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/path.h"
#include "runtime/oci/spec.h"

#define WALK_MAX_LINKS 40
#define WALK_MAX_DEPTH 255
#define WALK_MAX_REST (2 * PATH_MAX)

/* The directories reached so far: fds[0] is the root (not owned). */
struct walk {
    int fds[WALK_MAX_DEPTH + 1];
    char *names[WALK_MAX_DEPTH + 1];
    size_t depth;
};

static void
walk_pop(struct walk *w)
{
    if (w->depth == 0)
        return;
    if (w->fds[w->depth] >= 0)
        close(w->fds[w->depth]);
    free(w->names[w->depth]);
    w->depth--;
}

static void
walk_close(struct walk *w)
{
    while (w->depth > 0)
        walk_pop(w);
}

/* "/a/b" of the names reached so far (plus name, when not NULL). Caller frees. */
static char *
walk_path(const struct walk *w, const char *name)
{
    size_t len = 2 + (name ? strlen(name) + 1 : 0);
    for (size_t i = 1; i <= w->depth; i++)
        len += strlen(w->names[i]) + 1;
    char *out = malloc(len);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 1; i <= w->depth; i++)
        o += (size_t)sprintf(out + o, "/%s", w->names[i]);
    if (name)
        o += (size_t)sprintf(out + o, "/%s", name);
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    return out;
}

static int
walk_push(struct walk *w, int fd, const char *name, struct err *err)
{
    if (w->depth == WALK_MAX_DEPTH) {
        if (fd >= 0)
            close(fd);
        return err_set(err, ENAMETOOLONG, "more than %d components", WALK_MAX_DEPTH);
    }
    char *copy = strdup(name);
    if (!copy) {
        if (fd >= 0)
            close(fd);
        return err_set(err, ENOMEM, "out of memory");
    }
    w->depth++;
    w->fds[w->depth] = fd;
    w->names[w->depth] = copy;
    return 0;
}

static const char *
type_name(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISREG(m))
        return "a regular file";
    if (S_ISLNK(m))
        return "a symlink";
    if (S_ISCHR(m) || S_ISBLK(m))
        return "a device node";
    if (S_ISFIFO(m))
        return "a fifo";
    if (S_ISSOCK(m))
        return "a socket";
    return "of an unknown type";
}

/* Creates name in dir: an empty file or a directory. EEXIST when something is there. */
static int
make_at(int dir, const char *name, bool file)
{
    if (!file)
        return mkdirat(dir, name, 0755) < 0 ? -errno : 0;
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    close(fd);
    return 0;
}

/*
 * Looks at name in the directory the walk reached; creates it when
 * missing and, when replace, puts a new one in place of a symlink.
 * Leaves its type in *st.
 */
static int
lookup(struct walk *w, const char *name, bool create_file, bool replace, struct stat *st,
       struct err *err)
{
    int dir = w->fds[w->depth];
    for (int round = 0; round < 4; round++) {
        if (fstatat(dir, name, st, AT_SYMLINK_NOFOLLOW) == 0) {
            if (!S_ISLNK(st->st_mode) || !replace)
                return 0;
            /* The image's symlink goes; on an overlay, a whiteout in the
             * writable layer hides it and the new entry is made there. */
            if (unlinkat(dir, name, 0) < 0 && errno != ENOENT)
                return err_errno(err, errno, "replace the symlink %s", name);
        } else if (errno != ENOENT) {
            return err_errno(err, errno, "look at %s", name);
        }
        int r = make_at(dir, name, create_file);
        if (r < 0 && r != -EEXIST)
            return err_errno(err, -r, "create %s", name);
    }
    return err_set(err, EAGAIN, "%s keeps changing", name);
}

/* The mount of fences (or NULL) at path, a directory the walk passes through. */
static const char *
fence_at(const char *path, const char *const *fences, size_t nfences)
{
    for (size_t i = 0; i < nfences; i++)
        if (strcmp(path, fences[i]) == 0)
            return fences[i];
    return NULL;
}

/*
 * The walk of target (what names it in errors). A symlink as the last
 * component is replaced by what is wanted there, or, with follow_last,
 * followed like a parent (and then the target may be the root itself).
 */
static int
walk_target(int rootfd, const char *target, const char *what, bool want_dir, bool follow_last,
            const char *const *fences, size_t nfences, char **resolved, struct err *err)
{
    if (!target || target[0] != '/' || path_has_dotdot(target) ||
        (strcmp(target, "/") == 0 && !follow_last))
        return err_set(err, EINVAL, "%s %s: not an absolute path below /", what,
                       target ? target : "(null)");
    struct walk w = {.fds = {rootfd}, .depth = 0};
    cleanup_free char *rest = strdup(target);
    if (!rest)
        return err_set(err, ENOMEM, "mount target %s: out of memory", target);
    struct err why = {0};
    int ret = 0, links = 0;
    char *p = rest;
    for (;;) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char name[NAME_MAX + 1];
        if (n > NAME_MAX) {
            ret = err_set(&why, ENAMETOOLONG, "a component is longer than %d bytes", NAME_MAX);
            break;
        }
        memcpy(name, p, n);
        name[n] = '\0';
        p += n;
        const char *after = p;
        while (*after == '/')
            after++;
        bool last = *after == '\0';
        if (strcmp(name, ".") == 0)
            continue;
        if (strcmp(name, "..") == 0) {
            walk_pop(&w);
            continue;
        }
        struct stat st;
        ret = lookup(&w, name, last && !want_dir, last && !follow_last, &st, &why);
        if (ret < 0)
            break;
        if (S_ISLNK(st.st_mode)) {
            /* A parent that is a symlink: go where it leads inside the rootfs. */
            char link[PATH_MAX];
            ssize_t len = readlinkat(w.fds[w.depth], name, link, sizeof(link) - 1);
            if (len <= 0 || ++links > WALK_MAX_LINKS) {
                ret = len < 0 ? err_errno(&why, errno, "read the symlink %s", name)
                              : err_set(&why, ELOOP, "%s",
                                        len == 0 ? "an empty symlink" : "too many symlinks");
                break;
            }
            link[len] = '\0';
            if (strlen(link) + strlen(p) + 2 > WALK_MAX_REST) {
                ret = err_set(&why, ENAMETOOLONG, "symlinks lead to too long a path");
                break;
            }
            char *next = NULL;
            if (asprintf(&next, "%s/%s", link, p) < 0) {
                ret = err_set(&why, ENOMEM, "out of memory");
                break;
            }
            if (link[0] == '/')
                walk_close(&w);
            free(rest);
            rest = next;
            p = rest;
            continue;
        }
        if (last) {
            bool ok = want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
            if (!ok) {
                cleanup_free char *at = walk_path(&w, name);
                ret = err_set(&why, ENOTDIR, "%s is %s, not %s", at ? at : name,
                              type_name(st.st_mode), want_dir ? "a directory" : "a regular file");
                break;
            }
            ret = walk_push(&w, -1, name, &why);
            break;
        }
        if (!S_ISDIR(st.st_mode)) {
            cleanup_free char *at = walk_path(&w, name);
            ret = err_set(&why, ENOTDIR, "%s is %s, not a directory", at ? at : name,
                          type_name(st.st_mode));
            break;
        }
        int fd = openat(w.fds[w.depth], name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            ret = err_errno(&why, errno, "open %s", name);
            break;
        }
        ret = walk_push(&w, fd, name, &why);
        if (ret < 0)
            break;
        /* Past a mount point the runtime goes on in that mount's content,
         * not in the image walked here. */
        cleanup_free char *at = nfences ? walk_path(&w, NULL) : NULL;
        const char *fence = at ? fence_at(at, fences, nfences) : NULL;
        if (fence) {
            ret = err_set(&why, EXDEV,
                          "it goes through %s, where another mount is (a mount inside another "
                          "is not supported: the runtime would resolve it in that mount's "
                          "content, which containers can change)",
                          fence);
            break;
        }
        if (nfences && !at) {
            ret = err_set(&why, ENOMEM, "out of memory");
            break;
        }
    }
    if (ret == 0 && w.depth == 0 && !follow_last)
        ret = err_set(&why, EINVAL, "it leads to the root itself");
    if (ret == 0) {
        *resolved = walk_path(&w, NULL);
        if (!*resolved)
            ret = err_set(&why, ENOMEM, "out of memory");
    }
    walk_close(&w);
    if (ret < 0) {
        int code = why.code == ENOMEM ? ENOMEM : ERR_INVALID_CONTENT;
        return err_set(err, code, "%s %s in the image: %s", what, target, why.msg);
    }
    return 0;
}

int
rt_oci_target_prepare(int rootfd, const char *target, bool want_dir, char **resolved,
                      struct err *err)
{
    return walk_target(rootfd, target, "mount target", want_dir, false, NULL, 0, resolved, err);
}

int
rt_oci_target_prepare_fenced(int rootfd, const char *target, bool want_dir,
                             const char *const *fences, size_t nfences, char **resolved,
                             struct err *err)
{
    return walk_target(rootfd, target, "mount target", want_dir, false, fences, nfences, resolved,
                       err);
}

/* Targets in filesystems the runtime mounts itself: nothing of the image is there. */
static bool
in_runtime_fs(const char *target)
{
    static const char *const roots[] = {"/proc", "/dev", "/sys", NULL};
    for (size_t i = 0; roots[i]; i++)
        if (path_is_within(target, roots[i]) && strcmp(target, roots[i]) != 0)
            return true;
    return false;
}

/*
 * The working directory. runc makes it after pivot_root, inside the
 * container, where a symlink of the image leading nowhere or a file in
 * the way failed the create with a runtime error. It is walked here like
 * a target, its symlinks followed (a working directory through a symlink
 * is the image's choice, not replaced), and made where missing; left to
 * runc inside a mount or a filesystem of the runtime's, where it is made
 * in what that shows.
 */
static int
cwd_prepare(int rootfd, const struct rt_container_spec *spec, struct err *err)
{
    if (!spec->cwd)
        return 0;
    cleanup_free char *cwd = path_normalise(spec->cwd, true);
    if (!cwd)
        return err_set(err, ENOMEM, "prepare the working directory: out of memory");
    if (strcmp(cwd, "/") == 0 || in_runtime_fs(cwd) || rt_oci_target_reserved(cwd))
        return 0;
    for (size_t i = 0; i < spec->nmounts; i++) {
        cleanup_free char *t = path_normalise(spec->mounts[i].target, true);
        if (!t)
            return err_set(err, ENOMEM, "prepare the working directory: out of memory");
        if (path_is_within(cwd, t))
            return 0;
    }
    cleanup_free char *resolved = NULL;
    return walk_target(rootfd, cwd, "working directory", true, true, NULL, 0, &resolved, err);
}

void
rt_oci_mounts_free(struct rt_mount *mounts, size_t n)
{
    for (size_t i = 0; mounts && i < n; i++) {
        free((char *)mounts[i].source);
        free((char *)mounts[i].target);
    }
    free(mounts);
}

int
rt_oci_rootfs_prepare(const struct rt_container_spec *spec, struct rt_mount **out, struct err *err)
{
    cleanup_close int rootfd = open(spec->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return err_errno(err, errno, "open the rootfs %s", spec->rootfs);
    static const char *const own_dirs[] = {"/proc", "/dev", "/sys", NULL};
    for (size_t i = 0; own_dirs[i]; i++) {
        cleanup_free char *r = NULL;
        int ret = rt_oci_target_prepare(rootfd, own_dirs[i], true, &r, err);
        if (ret < 0)
            return ret;
    }
    cleanup_free char *init = NULL;
    int ret = rt_oci_target_prepare(rootfd, RT_OCI_INIT_TARGET, false, &init, err);
    if (ret < 0)
        return ret;
    struct rt_mount *m = calloc(spec->nmounts ? spec->nmounts : 1, sizeof(*m));
    /* Where every earlier mount is, and the runtime's devpts and mqueue
     * (nothing can be made in them): no later target may be reached
     * through one of them. Its /dev/shm is a fresh tmpfs, where runc
     * makes a target like in /dev itself. */
    const char **fences = calloc(spec->nmounts + 4, sizeof(*fences));
    size_t nfences = 0;
    if (!m || !fences) {
        free(m);
        free(fences);
        return err_set(err, ENOMEM, "prepare mount targets: out of memory");
    }
    static const char *const runtime_below_dev[] = {"/dev/pts", "/dev/mqueue", NULL};
    for (size_t i = 0; runtime_below_dev[i]; i++)
        fences[nfences++] = runtime_below_dev[i];
    for (size_t i = 0; i < spec->nmounts && ret == 0; i++) {
        const struct rt_mount *um = &spec->mounts[i];
        m[i].readonly = um->readonly;
        m[i].source = strdup(um->source);
        char *target = path_normalise(um->target, true);
        if (!m[i].source || !target) {
            free(target);
            ret = err_set(err, ENOMEM, "prepare mount targets: out of memory");
            break;
        }
        if (in_runtime_fs(target)) {
            m[i].target = target;
            fences[nfences++] = target;
            continue;
        }
        struct stat st;
        if (stat(um->source, &st) < 0) {
            int e = errno;
            free(target);
            err_errno(err, e, "mount source %s", um->source);
            if (e == ENOENT || e == ENOTDIR)
                err->code = ERR_INVALID_CONTENT;
            ret = -err->code;
            break;
        }
        char *resolved = NULL;
        ret = rt_oci_target_prepare_fenced(rootfd, target, S_ISDIR(st.st_mode), fences, nfences,
                                           &resolved, err);
        m[i].target = resolved;
        if (ret == 0)
            fences[nfences++] = resolved;
        /* Where the image's symlinks lead must be as allowed as a target named there. */
        const char *why = ret == 0 ? rt_oci_target_reserved(resolved) : NULL;
        if (!why && ret == 0 &&
            (path_is_within(resolved, "/proc") || path_is_within(resolved, "/sys")))
            why = "inside a filesystem the runtime mounts";
        if (why)
            ret = err_set(err, ERR_INVALID_CONTENT, "mount target %s: the image leads it to %s, %s",
                          target, resolved, why);
        free(target);
    }
    free(fences);
    if (ret == 0)
        ret = cwd_prepare(rootfd, spec, err);
    if (ret < 0) {
        rt_oci_mounts_free(m, spec->nmounts);
        return ret;
    }
    *out = m;
    return 0;
}
