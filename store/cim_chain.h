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
 * Each CIM's write is recorded in "<hex>.own" beside it: the parent's
 * name and the files the write added (CimFS's region and object ID
 * files, which a fork reads from its parents). The gc (cim_chain_gc,
 * from store/gc.c) removes a CIM with its files when no stored image,
 * lease or user reaches its chain and no journaled cimfs mount uses it
 * or a CIM forked from it; and what a crash left: a .cim without its
 * record (cim_chain_ensure writes such a one again), files no record
 * names.
 *
 * Windows only (cim_chain_windows.c); blocking (disk, cimfs.dll): pool
 * threads.
 */
#ifndef BERTH_STORE_CIM_CHAIN_H
#define BERTH_STORE_CIM_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/*
 * --layer-format blockcim (store/cim_writer.h): the same with each layer
 * a single-file block CIM "<hex>.cim" (its record, its parent named in
 * it, as above) in cim_dir, which is CIM_BLOCK_DIR_NAME and not the
 * forked CIMs' (a chain's names would collide), and, for n > 1, the
 * merged block CIM of them all, "<top hex>-merged.cim", written once per
 * top chain and named in the top layer's record, so images sharing the
 * chain share it and the gc removes it with that layer (*merged, the
 * caller's; NULL for one layer).
 */
#define CIM_BLOCK_DIR_NAME "block-cims"
int cim_chain_ensure_block(struct blob_store *bs, const char *cim_dir,
                           const struct meta_layer *layers, size_t n, char ***out, char **merged,
                           struct err *err);

/* Is chain ID "sha256:<hex>" still in use (an image's layer, leased, used)? */
typedef bool (*cim_live_fn)(void *arg, const char *chain_id);

struct cim_gc_result {
    uint64_t removed; /* CIMs removed with their files */
    uint64_t busy;    /* files kept because they are in use (or mounted, unrecorded) */
    uint64_t errors;  /* other failures: logged, kept */
};

/*
 * The gc of cim_dir (see above): keeps every CIM live says is used, every
 * one the cimfs entries of the mount journal in journal_dir name, and
 * their parents; removes the rest. Waits for a write in progress. Fills
 * *res; fails only when the directory or the journal cannot be read.
 */
int cim_chain_gc(const char *cim_dir, const char *journal_dir, cim_live_fn live, void *arg,
                 struct cim_gc_result *res, struct err *err);

#endif
