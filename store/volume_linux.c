/*
 * store/volume_os.h on Linux: volumes' copy-on-write children are
 * overlay mounts of frozen layers, whose lower directories are passed to
 * mount(2) as /proc/self/fd/N of O_PATH descriptors, so the option
 * string stays short however deep a chain of children goes (about 200
 * layers fit in a page). Pool threads or start-up; blocking.
 */
#include "store/volume_os.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"

#define OVERLAY_OPTS_MAX 4096

bool
volume_os_overlay(void)
{
    return true;
}

bool
volume_os_is_mountpoint(const char *path)
{
    struct stat a, b;
    cleanup_free char *parent = NULL;
    if (lstat(path, &a) < 0 || asprintf(&parent, "%s/..", path) < 0) {
        parent = NULL;
        return false;
    }
    return stat(parent, &b) == 0 && (a.st_dev != b.st_dev || a.st_ino == b.st_ino);
}

void
volume_os_unmount_detach(const char *path)
{
    if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
        log_warn("unmount volume %s: %s", path, strerror(errno));
}

int
volume_os_unmount(const char *path, struct err *err)
{
    if (umount2(path, 0) < 0 && errno != EINVAL)
        return err_errno(err, errno, "unmount %s", path);
    return 0;
}

int
volume_os_mount_overlay(const char *vdir, char *const *layers, size_t n, const char *up,
                        const char *wk, const char *fs, struct err *err)
{
    int *fds = calloc(n ? n : 1, sizeof(int));
    cleanup_free char *opts = malloc(OVERLAY_OPTS_MAX);
    if (!fds || !opts) {
        free(fds);
        return err_set(err, ENOMEM, "mount overlay on %s: out of memory", fs);
    }
    size_t opened = 0;
    size_t off = (size_t)snprintf(opts, OVERLAY_OPTS_MAX, "lowerdir=");
    int ret = 0;
    for (size_t i = 0; i < n && ret == 0; i++) {
        cleanup_free char *lp = fs_path_join(vdir, layers[i]);
        fds[i] = lp ? open(lp, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
        if (fds[i] < 0) {
            ret = err_errno(err, lp ? errno : ENOMEM, "layer %s", layers[i]);
            break;
        }
        opened++;
        off += (size_t)snprintf(opts + off, off < OVERLAY_OPTS_MAX ? OVERLAY_OPTS_MAX - off : 0,
                                "%s/proc/self/fd/%d", i ? ":" : "", fds[i]);
    }
    if (ret == 0) {
        off += (size_t)snprintf(opts + off, off < OVERLAY_OPTS_MAX ? OVERLAY_OPTS_MAX - off : 0,
                                ",upperdir=%s,workdir=%s,index=off,redirect_dir=on", up, wk);
        if (off >= OVERLAY_OPTS_MAX - 1)
            ret = err_set(err, ERR_INVALID_CONTENT, "%zu layers do not fit in a mount", n);
    }
    if (ret == 0 && mount("overlay", fs, "overlay", 0, opts) < 0)
        ret = err_errno(err, errno, "overlay on %s", fs);
    for (size_t i = 0; i < opened; i++)
        close(fds[i]);
    free(fds);
    return ret;
}
