/*
 * store/scratch.h on Windows: a container's writable layer is a plain
 * directory. Bounding it (limits.disk_bytes) is the hcs driver's, whose
 * scratch is a sized VHDX; here a bound is refused rather than ignored.
 * Blocking; pool threads or start-up.
 */
#include "store/scratch.h"

#include <errno.h>

#include "common/fsutil.h"

int
scratch_make(const char *dir, uint64_t max_bytes, const char *record_path, const char *image_path,
             enum scratch_kind *kind, struct err *err)
{
    (void)record_path;
    (void)image_path;
    if (kind)
        *kind = SCRATCH_PLAIN;
    int ret = fs_mkdir_p(dir, 0700, err);
    if (ret < 0 || max_bytes == 0)
        return ret;
    return err_set(err, ERR_UNAVAILABLE,
                   "limits.disk_bytes: a bounded writable layer needs XFS project quotas or loop "
                   "devices, which are Linux's (on Windows the hcs driver sizes its scratch VHDX)");
}

int
scratch_release(const char *record_path, struct err *err)
{
    (void)record_path;
    (void)err;
    return 0; /* scratch_make never writes a record here */
}
