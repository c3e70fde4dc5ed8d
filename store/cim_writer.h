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
 * Block CIMs (--layer-format blockcim) hold each layer alone in one
 * file (a single-file block CIM, hcsshim's BlockCIMTypeSingleFile),
 * created with CimCreateImage2; a whiteout there is a tombstone
 * (CimTombstoneFile), since no lower layer is in the image to delete
 * from. A merged block CIM (CimAddFsToMergedImage2 of each layer's CIM,
 * top-most first) is what a multi-layer image mounts, with its sources
 * (store/layer_cimfs.h). Both need cimfs.dll's block exports
 * (cimfs_api_block).
 *
 * Windows only (cim_writer_windows.c); blocking (disk); pool threads.
 */
#ifndef BERTH_STORE_CIM_WRITER_H
#define BERTH_STORE_CIM_WRITER_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "store/wclayer.h"
#include "store/wintar.h"

struct cimfs_api;

/* The image's name inside a layer's block CIM file and inside a merged one. */
#define CIM_BLOCK_IMAGE "layer.cim"
#define CIM_MERGED_IMAGE "merged.cim"

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

/*
 * Writes the layer tar read(ctx) into the new single-file block CIM
 * file, its image named name (ending in ".cim") inside, and commits it;
 * base says it is the image's bottom layer (its hives are linked as for
 * a forked base). EEXIST when file exists; ERR_UNAVAILABLE when api has
 * no block exports. On any failure file is removed. info may be NULL.
 */
int cim_block_layer_write(struct cimfs_api *api, const char *file, const char *name, bool base,
                          wtar_read_fn read, void *ctx, struct wcl_layer_info *info,
                          struct err *err);

/*
 * Writes the merged block CIM file (image name inside) of sources[0..n),
 * the layers' block CIM files top-most first (n >= 2), each holding its
 * image as source_name, and commits it.
 * A mount names the same sources in the same order. EEXIST when file
 * exists; on any failure file is removed.
 */
int cim_block_merge(struct cimfs_api *api, const char *file, const char *name,
                    const char *const *sources, const char *source_name, size_t n, struct err *err);

#endif
