/*
 * store/layer_int.h on Linux: LAYER_LINUX_DIR layers as an overlayfs
 * mount, its record written before mount(2). Blocking: pool threads or
 * start-up.
 */
#include "store/layer_int.h"

#include <errno.h>
#include <fcntl.h>
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
                    struct mounted_layers **out, struct err *err)
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
    cleanup_free char *upper = fs_path_join(scratch_dir, "upper");
    cleanup_free char *work = fs_path_join(scratch_dir, "work");
    cleanup_free char *record = fs_path_join(scratch_dir, LAYERS_RECORD_NAME);
    if (!upper || !work || !record)
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

    struct mounted_layers *m = mounted_layers_new(LAYER_LINUX_DIR, target, target, record);
    if (!m)
        return err_set(err, ENOMEM, "mount layers: out of memory");
    /* The record first: a crash after mount(2) must leave a way to undo it. */
    r = mounted_layers_record(m, record, err);
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
        unlink(record);
        mounted_layers_free(m);
        return r;
    }
    log_debug("mounted %zu layers at %s", l->count, target);
    *out = m;
    return 0;
}

int
layer_overlay_unmount(struct mounted_layers *m, struct err *err)
{
    if (!m->target)
        return 0;
    struct statfs sf;
    if (statfs(m->target, &sf) < 0) {
        if (errno == ENOENT)
            return 0;
        return err_errno(err, errno, "unmount layers: statfs %s", m->target);
    }
    /* Only an overlay is ours to unmount; anything else means not mounted. */
    if (sf.f_type != OVERLAYFS_MAGIC)
        return 0;
    if (umount2(m->target, UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
        return err_errno(err, errno, "unmount layers at %s", m->target);
    return 0;
}
