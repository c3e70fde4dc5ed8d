/*
 * An image's Windows layers as CIMs, written from the image store's
 * layer blobs the first time a container of the image is mounted with
 * --layer-format cimfs (store/layer_cimfs.h mounts the result).
 *
 * Why at first use and not at import: an import does not know the
 * format a later daemon runs with (--layer-format is decided at each
 * start-up, and auto may change with the host's build), the WCIFS layer
 * folders an import makes serve the wcifs format, hyperv isolation and
 * the image's platform checks alike, and the layer blobs stay in
 * content/ as long as the image does (gc roots), so the CIMs can always
 * be written from them. The price is the first container's create, once
 * per chain.
 *
 * Every CIM lives in one directory, <root>/cims, as CimFS wants the
 * images of a chain beside each other (an image forks only from one in
 * its own directory): each layer's CIM is named by its chain ID,
 * "<hex>.cim", and forked from its parent's (the chain ID of the layer
 * below), so two images sharing a base share its CIMs, and the top-most
 * CIM of an image holds the merged view of all its layers. A layer's
 * blob is read, inflated and hashed (store/wclayer_blob.h) while its tar
 * goes into the CIM (store/cim_writer.h); a blob whose digest or diff_id
 * is not the image's leaves no CIM (ERR_INVALID_CONTENT). Writes are
 * serialised in the process, so two creates of one image never write the
 * same CIM at once.
 *
 * Not yet: CIMs are not garbage-collected with their image.
 *
 * Windows only (cim_chain_windows.c); blocking (disk, cimfs.dll): pool
 * threads.
 */
#ifndef BERTH_STORE_CIM_CHAIN_H
#define BERTH_STORE_CIM_CHAIN_H

#include <stddef.h>

#include "common/err.h"
#include "store/blob.h"
#include "store/meta.h"

#define CIM_DIR_NAME "cims"

/*
 * The .cim files (Windows paths) of layers[0..n) (bottom first, as an
 * image lists them) in cim_dir (created when missing), each written from
 * its blob in bs when it is not there yet. *out (n strings, bottom first)
 * is the caller's: free each and the vector.
 */
int cim_chain_ensure(struct blob_store *bs, const char *cim_dir, const struct meta_layer *layers,
                     size_t n, char ***out, struct err *err);

#endif
