/*
 * store/layer_int.h on Linux: LAYER_LINUX_DIR layers as an overlayfs
 * mount, journaled before mount(2); and no Windows layers.
 * Blocking: pool threads or start-up.
 */
#include "store/layer_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"

#define OVERLAYFS_MAGIC 0x794c7630

/* --- LAYER_LINUX_DIR: overlayfs ------------------------------------------ */

/*
 * Builds the overlay option string. With fds non-NULL, every directory is
 * opened and named /proc/self/fd/N (fds, count + 2 slots preset to -1,
 * receives them for the caller to close) so the string stays short.
 */
static char *
overlay_options(const struct layer_list *l, const char *upper, const char *work, int *fds,
                struct err *err)
{
    size_t cap = 64 + strlen(upper) + strlen(work);
    for (size_t i = 0; i < l->count; i++)
        cap += strlen(l->layers[i].path) + 32;
    char *opts = malloc(cap);
    if (!opts) {
        err_set(err, ENOMEM, "mount layers: out of memory");
        return NULL;
    }
    size_t o = 0;
    o += (size_t)snprintf(opts + o, cap - o, "lowerdir=");
    size_t nfd = 0;
    for (size_t i = l->count; i-- > 0;) {
        const char *p = l->layers[i].path;
        char buf[32];
        if (fds) {
            int fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0) {
                err_errno(err, errno, "mount layers: open %s", p);
                free(opts);
                return NULL;
            }
            fds[nfd++] = fd;
            snprintf(buf, sizeof(buf), "/proc/self/fd/%d", fd);
            p = buf;
        }
        o += (size_t)snprintf(opts + o, cap - o, "%s%s", p, i ? ":" : "");
    }
    const char *dirs[2] = {upper, work};
    char bufs[2][32];
    for (int k = 0; k < 2 && fds; k++) {
        int fd = open(dirs[k], O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            err_errno(err, errno, "mount layers: open %s", dirs[k]);
            free(opts);
            return NULL;
        }
        fds[nfd++] = fd;
        snprintf(bufs[k], sizeof(bufs[k]), "/proc/self/fd/%d", fd);
        dirs[k] = bufs[k];
    }
    o += (size_t)snprintf(opts + o, cap - o, ",upperdir=%s,workdir=%s", dirs[0], dirs[1]);
    /* index=off: a snapshot is a lower layer of many mounts at once. */
    if (access("/sys/module/overlay/parameters/index", F_OK) == 0)
        snprintf(opts + o, cap - o, ",index=off");
    return opts;
}

int
layer_overlay_mount(const struct layer_list *l, const char *scratch_dir, const char *target,
                    const struct layer_mount_rec *rec, struct mounted_layers **out, struct err *err)
{
    if (!scratch_dir) {
        if (l->count != 1)
            return err_set(err, EINVAL, "mount layers: %zu layers need a scratch directory",
                           l->count);
        struct mounted_layers *m =
            mounted_layers_new(LAYER_LINUX_DIR, l->layers[0].path, NULL, NULL);
        if (!m)
            return err_set(err, ENOMEM, "mount layers: out of memory");
        *out = m;
        return 0;
    }
    if (!target || target[0] != '/' || strpbrk(target, "\n"))
        return err_set(err, EINVAL, "mount layers: target %s is not an absolute path",
                       target ? target : "null");
    if (!rec || !rec->journal)
        return err_set(err, EINVAL, "mount layers at %s: no journal to record the mount in",
                       target);
    cleanup_free char *upper = fs_path_join(scratch_dir, "upper");
    cleanup_free char *work = fs_path_join(scratch_dir, "work");
    if (!upper || !work)
        return err_set(err, ENOMEM, "mount layers: out of memory");
    if (strpbrk(scratch_dir, ":,\n"))
        return err_set(err, EINVAL, "mount layers: scratch %s has ':', ',' or a newline",
                       scratch_dir);
    int r = fs_mkdir_p(upper, 0755, err);
    if (r == 0)
        r = fs_mkdir_p(work, 0700, err);
    if (r == 0)
        r = fs_mkdir_p(target, 0755, err);
    if (r < 0)
        return err_wrap(err, "mount layers");

    struct mounted_layers *m = mounted_layers_new(LAYER_LINUX_DIR, target, target, NULL);
    struct mj_entry *e = mj_entry_new(rec->name, rec->owner, LAYER_KIND_OVERLAY);
    if (!m || !e) {
        mounted_layers_free(m);
        mj_entry_free(e);
        return err_set(err, ENOMEM, "mount layers: out of memory");
    }
    /* The journal first: a crash after mount(2) must leave a way to undo it. */
    r = mj_entry_set(e, "target", target, err);
    if (r == 0)
        r = mj_entry_set(e, "rootfs", target, err);
    if (r == 0)
        r = layer_journal_put(rec, e, err);
    if (r == 0)
        r = mounted_layers_set_entry(m, rec->journal, rec->name, err);
    mj_entry_free(e);
    if (r < 0) {
        mounted_layers_free(m);
        return r;
    }

    long page = sysconf(_SC_PAGESIZE);
    int *fds = NULL;
    char *opts = overlay_options(l, upper, work, NULL, err);
    if (opts && (long)strlen(opts) >= page) {
        free(opts);
        fds = malloc((l->count + 2) * sizeof(int));
        for (size_t i = 0; fds && i < l->count + 2; i++)
            fds[i] = -1;
        opts = fds ? overlay_options(l, upper, work, fds, err) : NULL;
        if (!fds)
            err_set(err, ENOMEM, "mount layers: out of memory");
    }
    r = 0;
    if (!opts) {
        r = -(err && err->code ? err->code : ENOMEM);
    } else if ((long)strlen(opts) >= page) {
        r = err_set(err, ERR_INVALID_CONTENT,
                    "mount layers: %zu layers do not fit in a mount option string", l->count);
    } else if (mount("overlay", target, "overlay", 0, opts) < 0) {
        r = err_errno(err, errno, "mount overlay of %zu layers at %s", l->count, target);
    }
    if (fds) {
        for (size_t i = 0; i < l->count + 2; i++) {
            if (fds[i] >= 0)
                close(fds[i]);
        }
        free(fds);
    }
    free(opts);
    if (r < 0) {
        struct err jerr = {0};
        if (mjournal_remove(rec->journal, rec->name, &jerr) < 0)
            log_warn("mount layers at %s: %s", target, jerr.msg);
        mounted_layers_free(m);
        return r;
    }
    log_debug("mounted %zu layers at %s", l->count, target);
    *out = m;
    return 0;
}

/*
 * Retired overlays: detached from the tree, each kept alive by an O_PATH
 * descriptor of its root until layers_release_retired closes it. The
 * last reference to an overlay syncs its upper filesystem (overlayfs's
 * sync_fs at the superblock's end: with a plain scratch that is the
 * store's disk, with every other writer's dirty data on it), 17-495 ms
 * of each container's delete on this shared machine. The sync is not
 * skipped (that is the `volatile` mount option, which makes fsync inside
 * the container a no-op: a writable layer's data a user relies on could
 * vanish in a power loss), only moved to whoever releases, after the
 * delete was answered. Bounded: past RETIRED_MAX the unmount closes its
 * own descriptor at once.
 */
#define RETIRED_MAX 64
static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;
static int retired[RETIRED_MAX];
static size_t n_retired;

static void
retire(int fd)
{
    pthread_mutex_lock(&retired_lock);
    bool kept = n_retired < RETIRED_MAX;
    if (kept)
        retired[n_retired++] = fd;
    pthread_mutex_unlock(&retired_lock);
    if (!kept)
        close(fd);
}

void
layers_release_retired(void)
{
    int fds[RETIRED_MAX];
    pthread_mutex_lock(&retired_lock);
    size_t n = n_retired;
    memcpy(fds, retired, n * sizeof(int));
    n_retired = 0;
    pthread_mutex_unlock(&retired_lock);
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
}

int
layer_overlay_unmount(const char *target, struct err *err)
{
    if (!target)
        return 0;
    struct statfs sf;
    if (statfs(target, &sf) < 0) {
        if (errno == ENOENT)
            return 0;
        return err_errno(err, errno, "unmount layers: statfs %s", target);
    }
    /* Only an overlay is ours to unmount; anything else means not mounted. */
    if (sf.f_type != OVERLAYFS_MAGIC)
        return 0;
    /* Its root, held while it is detached, so the unmount does not wait
     * for the sync (above); without it, a plain unmount. */
    int fd = open(target, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && (fstatfs(fd, &sf) < 0 || sf.f_type != OVERLAYFS_MAGIC)) {
        close(fd);
        fd = -1;
    }
    if (umount2(target, UMOUNT_NOFOLLOW | (fd >= 0 ? MNT_DETACH : 0)) < 0 && errno != EINVAL &&
        errno != ENOENT) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return err_errno(err, e, "unmount layers at %s", target);
    }
    if (fd >= 0)
        retire(fd);
    return 0;
}

/* --- no Windows layers here ------------------------------------------------ */

int
layer_windows_mount(const struct layer_list *l, const char *scratch_dir,
                    const struct layer_mount_rec *rec, struct mounted_layers **out, struct err *err)
{
    (void)scratch_dir, (void)rec, (void)out;
    return err_set(err, ENOTSUP, "mount layers: %s layers need Windows (computestorage.dll)",
                   l->type == LAYER_CIMFS ? "cimfs" : "wcifs");
}

int
layer_windows_undo(const struct mj_entry *e, struct err *err)
{
    return err_set(err, ENOTSUP, "undo %s mount %s: it needs Windows", e->kind, e->name);
}

int
layer_folder_remove(const char *path, struct err *err)
{
    return fs_remove_tree(path, err); /* no HCS here: a layer is a plain tree */
}
