/*
 * What store/layer.c shares with its OS files (layer_linux.c: the overlay
 * mount; layer_windows.c: none). Not for other modules.
 */
#ifndef BERTH_STORE_LAYER_INT_H
#define BERTH_STORE_LAYER_INT_H

#include "store/layer.h"

struct mounted_layers {
    enum layer_type type;
    char *rootfs;
    char *target; /* the mount point, NULL when nothing is mounted */
    char *record; /* the record file, NULL when there is none */
};

/* A new record of a mount (copies of the strings); NULL on OOM. */
struct mounted_layers *mounted_layers_new(enum layer_type type, const char *rootfs,
                                          const char *target, const char *record);

/* LAYER_LINUX_DIR: layers_mount and mounted_layers_unmount's part. */
int layer_overlay_mount(const struct layer_list *l, const char *scratch_dir, const char *target,
                        struct mounted_layers **out, struct err *err);
int layer_overlay_unmount(struct mounted_layers *m, struct err *err);

#endif
