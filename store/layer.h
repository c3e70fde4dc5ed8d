/*
 * Typed layers. A container's layers are not path strings: parsing turns
 * an image's chain of snapshots, or a Windows rootfs description, into a
 * struct layer_list of one type, and each type has its own mount and
 * unmount. Mounting returns a struct mounted_layers that says where the
 * root filesystem is and how to undo the mount; container code asks it
 * only where the rootfs is.
 *
 * A new layer type is one new parse function and one mount/unmount pair
 * in layer.c.
 *
 * Synchronous; parsing is pure computation, mounting and unmounting block
 * (mount(2), disk). Any thread; a list or a mounted_layers is used by one
 * thread at a time.
 */
#ifndef BERTH_STORE_LAYER_H
#define BERTH_STORE_LAYER_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

enum layer_type {
    LAYER_LINUX_DIR, /* an unpacked snapshot directory: an overlay lower dir */
    LAYER_WCIFS,     /* a Windows layer folder (wcifs filter), Windows only */
    LAYER_CIMFS,     /* a layer inside a CimFS image, Windows only */
};

struct layer {
    enum layer_type type;
    char *path;     /* LINUX_DIR: the directory; WCIFS: the folder; CIMFS: the .cim file */
    char *layer_id; /* WCIFS, CIMFS: the layer's GUID (Storage.Layers[].Id); NULL on Linux */
};

/* Layers of one type, owned by the list. */
struct layer_list {
    enum layer_type type;
    size_t count;
    struct layer *layers; /* bottom (base) first, top last */
    char *scratch;        /* WCIFS, CIMFS: the scratch folder (sandbox.vhdx); NULL on Linux */
    /* WCIFS: the scratch is a utility VM's (hyperv isolation): created and
     * formatted on the host, never attached there (the VM gets it by SCSI,
     * the layers over VSMB); the rootfs is the VHDX's path. Set by the
     * caller after parsing. */
    bool vm_scratch;
    /* CIMFS: the layers are single-file block CIMs (--layer-format
     * blockcim, store/cim_chain.h), mounted merged: merged (owned; NULL
     * for one layer) is the merged block CIM of them all, made for this
     * list of layers. Set by the caller after parsing. */
    bool block;
    char *merged;
};

/*
 * Parses an image's chain of unpacked snapshot directories, bottom first.
 * Each must be an absolute path without ':', ',' or a newline (the overlay
 * option and the mount record separators). EINVAL with a message naming
 * the bad entry otherwise. Caller frees *out with layer_list_free.
 */
int layer_list_parse_linux(const char *const *dirs, size_t count, struct layer_list **out,
                           struct err *err);

/*
 * Parses a Windows LayerFolders array (as in an OCI runtime spec's
 * windows.layerFolders): read-only layer folders top-most first, then the
 * scratch folder last, and the GUID of each read-only layer (ids[i] for
 * folders[i], as runtime/hcs/guid.h's hcs_guid_layer() derives it from
 * the layer's chain ID). At least one layer and the scratch; every path
 * absolute (a drive letter, a UNC path or a POSIX path), non-empty, and
 * no folder listed twice; every id a GUID, none twice.
 */
int layer_list_parse_wcifs(const char *const *folders, const char *const *ids, size_t count,
                           struct layer_list **out, struct err *err);

/*
 * Parses CimFS layers: the .cim file of each layer, top-most first, each
 * forked from the one after it (so the top-most CIM holds the merged view
 * of all of them), with their GUIDs, and the scratch folder. The same
 * rules as layer_list_parse_wcifs, and every path must end in ".cim".
 */
int layer_list_parse_cimfs(const char *const *cims, const char *const *ids, size_t count,
                           const char *scratch, struct layer_list **out, struct err *err);

/* Frees a list; NULL is a no-op. */
void layer_list_free(struct layer_list *l);

struct mounted_layers;
struct mjournal;
struct mj_entry;

/*
 * Where a mount is journaled (store/mount_journal.h): the journal, the
 * entry's name (one per mount: "container.<handle>.rootfs") and its owner
 * ("container:<handle>"), all required for a mount that is made.
 */
struct layer_mount_rec {
    struct mjournal *journal;
    const char *name;
    const char *owner;
};

/*
 * Mounts the layers at target (created if missing) and returns in *out
 * where the rootfs is and how to undo it.
 *
 * LAYER_LINUX_DIR: an overlay mount, lowerdir = top:...:bottom, with
 * upperdir and workdir in scratch_dir ("upper", "work", created here).
 * Before mount(2) is called, the mount is journaled (rec: kind "overlay",
 * fields target and rootfs), so that a daemon restarted after a crash
 * undoes it (mjournal_replay with layers_undo_entry). When the option
 * string would not fit in a page (mount(2)'s limit, about 60 lower layers
 * with long paths), each directory is opened and named as
 * /proc/self/fd/N, which fits some 200 layers; more fail with
 * ERR_INVALID_CONTENT (the image is at fault, not the host; imports
 * refuse images of more than OCI_LAYERS_MAX layers). A single layer with
 * no scratch_dir (NULL) is used as it is: no mount, no entry (rec may be
 * NULL), rootfs is the layer directory, which the caller must not write
 * to. Several layers need a scratch_dir (EINVAL otherwise).
 *
 * LAYER_WCIFS, LAYER_CIMFS (Windows; ENOTSUP elsewhere): a scratch VHDX
 * in scratch_dir (NULL: the list's scratch folder), created and formatted
 * when missing, attached, and the layer filter on its volume: WCIFS over
 * the layer folders, or, for CimFS, the top-most CIM mounted and UnionFS
 * over its Files. target is not used; rootfs is the scratch volume (with
 * vm_scratch: the VHDX, made and formatted but not attached). The
 * entry (kinds "wcifs" and "cimfs") is written before the first step and
 * rewritten as each step is made, so that undo knows how far it got
 * (store/layer_windows.c).
 */
int layers_mount(const struct layer_list *l, const char *scratch_dir, const char *target,
                 const struct layer_mount_rec *rec, struct mounted_layers **out, struct err *err);

/* Where the root filesystem is (owned by m): a directory on Linux, the
 * scratch volume's path (\\?\Volume{GUID}\) on Windows. */
const char *mounted_layers_rootfs(const struct mounted_layers *m);

/*
 * Windows: the read-only layers a container document lists
 * (Storage.Layers), top-most first: for WCIFS each layer folder, for
 * CimFS the one mounted CIM volume. 0 layers on Linux.
 */
size_t mounted_layers_count(const struct mounted_layers *m);
const char *mounted_layers_layer_id(const struct mounted_layers *m, size_t i);
const char *mounted_layers_layer_path(const struct mounted_layers *m, size_t i);

/*
 * Undoes the mount and removes its journal entry. Idempotent: a target
 * that is no longer mounted (or never was, after a crash before mount(2))
 * is success. m stays valid (free it with mounted_layers_free). A Linux
 * overlay is detached from the tree and retired, not ended: it ends, and
 * syncs its upper filesystem, at layers_release_retired (so a process
 * that still used it keeps it until then, and past that until it lets
 * go, instead of the unmount failing with EBUSY).
 */
int mounted_layers_unmount(struct mounted_layers *m, struct err *err);

/*
 * Ends the overlays unmounted since the last call (each one's sync of its
 * upper filesystem runs here, in the caller's thread): after a container's
 * delete was answered, or before what needs them gone (a loop-mounted
 * scratch filesystem below an upper). A no-op on Windows. Blocking.
 */
void layers_release_retired(void);

/*
 * The mounted_layers of journal entry e of j, whose unmount undoes that
 * mount (made by this process or an earlier one) and removes the entry.
 * EINVAL for an entry that is not a layer mount or lacks a field.
 */
int mounted_layers_from_entry(struct mjournal *j, const struct mj_entry *e,
                              struct mounted_layers **out, struct err *err);

/*
 * Undoes every layer mount journaled for owner and removes the entries
 * (a container's delete). Nothing journaled is success.
 */
int layers_unmount_owner(struct mjournal *j, const char *owner, struct err *err);

/*
 * Undoes the mount of journal entry e without touching the journal: the
 * undo of mjournal_replay. Dispatches on the entry's kind: "overlay"
 * here; "wcifs" and "cimfs" on Windows (ENOTSUP elsewhere); any other
 * kind is ENOTSUP, so its entry stays for a berth that knows it.
 */
int layers_undo_entry(const struct mj_entry *e, struct err *err);

/*
 * The record that berth before the mount journal wrote in a container's
 * scratch directory, "mounted-layers": read only, so that the delete of a
 * container made by an older berth still unmounts it.
 */
#define LAYERS_RECORD_NAME "mounted-layers"

/*
 * Reads such a record into a new *out whose unmount undoes that mount
 * and removes the record. ENOENT when there is no record (nothing to
 * undo).
 */
int mounted_layers_load(const char *path, struct mounted_layers **out, struct err *err);

/* Frees m without unmounting; NULL is a no-op. */
void mounted_layers_free(struct mounted_layers *m);

/*
 * Removes an unpacked layer's folder (a snapshot garbage collection
 * sweeps). On Windows a WCIFS layer folder (one with Files\) is given to
 * HcsDestroyLayer first, which undoes what HCS made of it, and what is
 * left goes as a tree; elsewhere, and for any other folder, it goes as a
 * tree. A missing folder is success. Blocking.
 */
int layer_folder_remove(const char *path, struct err *err);

#endif
