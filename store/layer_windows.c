/*
 * store/layer_int.h on Windows: there is no overlayfs, so Linux snapshot
 * chains are not mounted here (an image for Linux is refused at import by
 * the platform check anyway), and an "overlay" journal entry cannot have
 * been made here: undoing one is a no-op. WCIFS and CimFS layers are
 * mounted through computestorage.dll and cimfs.dll, which is not written
 * yet (issue 15): their mount is refused and an entry of theirs stays in
 * the journal for a berth that can undo it.
 */
#include "store/layer_int.h"

#include <errno.h>

int
layer_overlay_mount(const struct layer_list *l, const char *scratch_dir, const char *target,
                    const struct layer_mount_rec *rec, struct mounted_layers **out, struct err *err)
{
    (void)scratch_dir;
    (void)target;
    (void)rec;
    (void)out;
    return err_set(err, ENOTSUP,
                   "mount layers: %zu Linux layers need overlayfs, which is Linux only", l->count);
}

void
layers_release_retired(void)
{
    /* No overlay is ever retired here. */
}

int
layer_overlay_unmount(const char *target, struct err *err)
{
    (void)target;
    (void)err;
    return 0; /* nothing is ever mounted here */
}

int
layer_windows_mount(const struct layer_list *l, const char *scratch_dir,
                    const struct layer_mount_rec *rec, struct mounted_layers **out, struct err *err)
{
    (void)scratch_dir, (void)rec, (void)out;
    return err_set(err, ENOTSUP, "mount layers: %s layers through %s are not implemented yet",
                   l->type == LAYER_CIMFS ? "cimfs" : "wcifs",
                   l->type == LAYER_CIMFS ? "cimfs.dll" : "computestorage.dll");
}

int
layer_windows_undo(const struct mj_entry *e, struct err *err)
{
    return err_set(err, ENOTSUP, "undo %s mount %s: not implemented yet", e->kind, e->name);
}
