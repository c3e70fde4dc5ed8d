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
    char *layer_id; /* CIMFS: the layer's id inside the cim; NULL otherwise */
};

/* Layers of one type, owned by the list. */
struct layer_list {
    enum layer_type type;
    size_t count;
    struct layer *layers; /* bottom (base) first, top last */
    char *scratch;        /* WCIFS: the writable scratch folder; NULL otherwise */
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
 * scratch folder last. At least one layer and the scratch; every path
 * absolute (a drive letter, a UNC path or a POSIX path), non-empty, and
 * no folder listed twice.
 */
int layer_list_parse_wcifs(const char *const *folders, size_t count, struct layer_list **out,
                           struct err *err);

/*
 * Parses a CimFS layer: the absolute path of a .cim file and the id of
 * the layer inside it (non-empty, no path separators).
 */
int layer_list_parse_cimfs(const char *cim_path, const char *layer_id, struct layer_list **out,
                           struct err *err);

/* Frees a list; NULL is a no-op. */
void layer_list_free(struct layer_list *l);

/* The name of the mount record that layers_mount writes in scratch_dir. */
#define LAYERS_RECORD_NAME "mounted-layers"

struct mounted_layers;

/*
 * Mounts the layers at target (created if missing) and returns in *out
 * where the rootfs is and how to undo it.
 *
 * LAYER_LINUX_DIR: an overlay mount, lowerdir = top:...:bottom, with
 * upperdir and workdir in scratch_dir ("upper", "work", created here).
 * Before mount(2) is called, a record is written to
 * <scratch_dir>/mounted-layers, so that a daemon restarted after a crash
 * can load it (mounted_layers_load) and unmount. When the option string
 * would not fit in a page (mount(2)'s limit, about 60 lower layers with
 * long paths), each directory is opened and named as /proc/self/fd/N,
 * which fits some 200 layers; more fail with ERR_INVALID_CONTENT (the
 * image is at fault, not the host; imports refuse images of more than
 * OCI_LAYERS_MAX layers). A single layer with
 * no scratch_dir (NULL) is used as it is: no mount, rootfs is the layer
 * directory, which the caller must not write to. Several layers need a
 * scratch_dir (EINVAL otherwise).
 *
 * LAYER_WCIFS, LAYER_CIMFS: ENOTSUP on Linux.
 */
int layers_mount(const struct layer_list *l, const char *scratch_dir, const char *target,
                 struct mounted_layers **out, struct err *err);

/* Where the root filesystem is (owned by m). */
const char *mounted_layers_rootfs(const struct mounted_layers *m);

/*
 * Undoes the mount and removes its record. Idempotent: a target that is
 * no longer mounted (or never was, after a crash before mount(2)) is
 * success. EBUSY while something still uses the mount. m stays valid
 * (free it with mounted_layers_free).
 */
int mounted_layers_unmount(struct mounted_layers *m, struct err *err);

/* Writes the record of m to path atomically (layers_mount does it itself). */
int mounted_layers_record(const struct mounted_layers *m, const char *path, struct err *err);

/*
 * Reads a record written by mounted_layers_record (in this process or an
 * earlier one) into a new *out whose unmount undoes that mount and
 * removes the record. ENOENT when there is no record (nothing to undo).
 */
int mounted_layers_load(const char *path, struct mounted_layers **out, struct err *err);

/* Frees m without unmounting; NULL is a no-op. */
void mounted_layers_free(struct mounted_layers *m);

#endif
