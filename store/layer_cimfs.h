/*
 * LAYER_CIMFS mounts (store/layer_cimfs_windows.c), for layer_windows.c's
 * dispatch; not for other modules. The top-most CIM of the list (it holds
 * the merged view of every layer, each forked from the one below it,
 * store/cim_writer.h) is mounted with CimMountImage as a read-only volume
 * whose GUID berth chooses, so that the mount is journaled, GUID and all,
 * before it is made: the entry (kind "cimfs") has the fields
 *
 *   volume   the volume GUID, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
 *   cim      the mounted .cim file
 *   rootfs   the volume's path, \\?\Volume{GUID}\
 *   layers   1, with layer-0-id (the top layer's GUID) and layer-0-path
 *            (the volume): what a container document's Storage.Layers lists
 *
 * and undoing it is CimDismountImage of that GUID (a volume that is not
 * mounted is success). The scratch VHDX and the UnionFS filter over the
 * volume's Files are the WCIFS side's (layer_windows.c), not made here.
 *
 * Windows only; blocking (cimfs.dll, the journal's disk writes); pool
 * threads or start-up.
 */
#ifndef BERTH_STORE_LAYER_CIMFS_H
#define BERTH_STORE_LAYER_CIMFS_H

#include "store/layer_int.h"

int layer_cimfs_mount(const struct layer_list *l, const struct layer_mount_rec *rec,
                      struct mounted_layers **out, struct err *err);
/* Dismounts what entry e (kind cimfs) says was mounted. Idempotent. */
int layer_cimfs_undo(const struct mj_entry *e, struct err *err);

#endif
