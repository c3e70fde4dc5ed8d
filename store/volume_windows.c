/*
 * store/volume_os.h on Windows: there is no overlay filesystem, so a
 * volume's copy-on-write child is made by copying its parent's data
 * (volume_copy.c), and a volume is never a mount. ReFS block cloning
 * (FSCTL_DUPLICATE_EXTENTS_TO_FILE) would make the copy cheap where the
 * store is on ReFS; it is not used yet: every child is a full copy.
 * Pool threads or start-up; blocking.
 */
#include "store/volume_os.h"

#include <errno.h>

bool
volume_os_overlay(void)
{
    return false;
}

bool
volume_os_is_mountpoint(const char *path)
{
    (void)path;
    return false;
}

void
volume_os_unmount_detach(const char *path)
{
    (void)path;
}

int
volume_os_unmount(const char *path, struct err *err)
{
    (void)path;
    (void)err;
    return 0;
}

int
volume_os_mount_overlay(const char *vdir, char *const *layers, size_t n, const char *up,
                        const char *wk, const char *fs, struct err *err)
{
    (void)vdir;
    (void)layers;
    (void)n;
    (void)up;
    (void)wk;
    return err_set(err, ENOTSUP, "overlay on %s: volumes have no overlay on Windows", fs);
}
