/*
 * store/layer_int.h on Windows: there is no overlayfs, so Linux snapshot
 * chains are not mounted here (an image for Linux is refused at import by
 * the platform check anyway); Windows layers are the hcs driver's.
 */
#include "store/layer_int.h"

#include <errno.h>

int
layer_overlay_mount(const struct layer_list *l, const char *scratch_dir, const char *target,
                    struct mounted_layers **out, struct err *err)
{
    (void)scratch_dir;
    (void)target;
    (void)out;
    return err_set(err, ENOTSUP,
                   "mount layers: %zu Linux layers need overlayfs, which is Linux only", l->count);
}

int
layer_overlay_unmount(struct mounted_layers *m, struct err *err)
{
    (void)m;
    (void)err;
    return 0; /* nothing is ever mounted here */
}
