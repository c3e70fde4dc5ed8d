/*
 * A layer tar written into a CimFS image: wclayer_import (store/wclayer.h)
 * validates the tar and feeds a struct wcl_sink whose entries become the
 * image's files (security descriptor, attributes, creation and write
 * times), alternate data streams, reparse points (symlinks, junctions),
 * hard links, whiteouts (CimDeletePath) and the registry hive deltas
 * under Hives\, through cimfs.dll (store/cimfs_api.h). Paths in
 * the image are the tar's, '\'-separated: Files\..., Hives\...,
 * UtilityVM\...; a mount's Files folder is the container's C:\.
 *
 * A layer's image is forked from its parent's (CimCreateImage with the
 * parent's name), so the top-most image of a chain holds the merged view
 * of every layer below it and is the one mounted. CimFS keeps the images
 * of one chain in one directory (an image forks only from an image
 * beside it), which is why dir is shared and each layer has a name.
 *
 * Windows only (cim_writer_windows.c); blocking (disk); pool threads.
 */
#ifndef BERTH_STORE_CIM_WRITER_H
#define BERTH_STORE_CIM_WRITER_H

#include "common/err.h"
#include "store/wclayer.h"
#include "store/wintar.h"

struct cimfs_api;

/*
 * Writes the layer tar read(ctx) into the new image <dir>\<name>, forked
 * from <dir>\<parent> (NULL: a base layer), and commits it. name and
 * parent are file names ending in ".cim" (no separator); EEXIST when name
 * exists already. On any failure (a refused tar, a cimfs.dll error) the
 * image is not committed and every file the attempt added to dir is
 * removed, so no .cim is left behind. info (may be NULL) says what the
 * layer held.
 */
int cim_layer_write(struct cimfs_api *api, const char *dir, const char *parent, const char *name,
                    wtar_read_fn read, void *ctx, struct wcl_layer_info *info, struct err *err);

#endif
