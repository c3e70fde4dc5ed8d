/*
 * LAYER_CIMFS mounts (store/layer_cimfs_windows.c), for layer_windows.c's
 * dispatch; not for other modules. As hcsshim mounts forked CIM layers
 * for a process-isolated container (internal/layers/wcow_mount.go): the
 * top-most CIM of the list (it holds the merged view of every layer, each
 * forked from the one below it, store/cim_writer.h) is mounted with
 * CimMountImage as a read-only volume whose GUID berth chooses; then the
 * container's scratch, sandbox.vhdx in the scratch folder (made and
 * formatted when missing, and then initialized as a writable layer over
 * the CIM), is attached, and the UnionFS filter attached to its volume
 * over the CIM volume's Files (HcsAttachOverlayFilter). The rootfs is the
 * scratch's volume.
 *
 * Block CIMs (l->block, --layer-format blockcim) differ in the first
 * step only, as in hcsshim's mountProcessIsolatedBlockCIMLayers: the
 * merged block CIM and its sources top-most first are mounted with
 * CimMergeMountImage (one layer: its block CIM with CimMountImage and
 * the single-file flag) as the volume GUID berth chooses; the scratch
 * and UnionFS are the same code as for forked CIMs. The entry says
 * "block" 1 and, merged, "merged" (the merged CIM's file); "cim" is the
 * top layer's file, which the gc keeps with its parents and the merged
 * CIM its record names. The undo is the same: CimDismountImage of the
 * GUID dismounts a merged mount as any other.
 *
 * Each step is journaled before it is made (kind "cimfs"): "step" begin,
 * cim, create, attach, filter, with the fields
 *
 *   cim-guid   the CIM volume's GUID, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
 *   cim        the mounted .cim file
 *   vhd, new   the scratch VHDX, and 1 when this mount made it
 *   volume     the scratch's volume, once known
 *   rootfs     that volume (the VHDX's path until it is known)
 *   layers     1, with layer-0-id (the top layer's GUID) and layer-0-path
 *              (the CIM volume, \\?\Volume{GUID}\): what a container
 *              document's Storage.Layers lists
 *
 * and undoing goes back from the journaled step: the filter detached, the
 * VHDX detached, CimDismountImage of the GUID (each one not there is
 * success). An entry without "step" (berth before the scratch was made
 * here) is a CIM mount alone whose "volume" is the GUID. A failed mount
 * undoes itself and removes its entry.
 *
 * Windows only; blocking (cimfs.dll, computestorage.dll, virtdisk.dll,
 * the journal's disk writes); pool threads or start-up.
 */
#ifndef BERTH_STORE_LAYER_CIMFS_H
#define BERTH_STORE_LAYER_CIMFS_H

#include "store/layer_int.h"

int layer_cimfs_mount(const struct layer_list *l, const char *scratch_dir,
                      const struct layer_mount_rec *rec, struct mounted_layers **out,
                      struct err *err);
/* Dismounts what entry e (kind cimfs) says was mounted. Idempotent. */
int layer_cimfs_undo(const struct mj_entry *e, struct err *err);

#endif
