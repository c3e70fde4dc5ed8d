/*
 * store/layer_int.h on Windows: there is no overlayfs, so Linux snapshot
 * chains are not mounted here (an image for Linux is refused at import by
 * the platform check anyway), and an "overlay" journal entry cannot have
 * been made here: undoing one is a no-op. WCIFS layers are mounted
 * through computestorage.dll and virtdisk.dll (layer_wcifs_windows.c),
 * CimFS layers through cimfs.dll (layer_cimfs_windows.c).
 */
#include "store/layer_int.h"

#include <errno.h>
#include <string.h>

#include "store/layer_cimfs.h"

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
    if (l->type == LAYER_WCIFS)
        return layer_wcifs_mount(l, scratch_dir, rec, out, err);
    if (l->type == LAYER_CIMFS)
        return layer_cimfs_mount(l, scratch_dir, rec, out, err);
    return err_set(err, ENOTSUP, "mount layers: layer type %d is not a Windows one", (int)l->type);
}

int
layer_windows_undo(const struct mj_entry *e, struct err *err)
{
    if (strcmp(e->kind, LAYER_KIND_WCIFS) == 0)
        return layer_wcifs_undo(e, err);
    if (strcmp(e->kind, LAYER_KIND_CIMFS) == 0)
        return layer_cimfs_undo(e, err);
    return err_set(err, ENOTSUP, "undo %s mount %s: not implemented yet", e->kind, e->name);
}
