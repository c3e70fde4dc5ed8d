/*
 * Volumes: directories that callers fill and read as tar streams, derive
 * copy-on-write children from, and mount into containers.
 *
 * On disk, under <root>/volumes/<handle>/:
 *   fs/        the volume's filesystem: a plain directory, or the mount
 *              point of an overlay once the volume has frozen layers;
 *   fs/data/   the volume's content: the stable host path that the API
 *              shows and that containers bind-mount;
 *   fs/.staging-<rand>/  tar uploads being extracted (same filesystem as
 *              data/, so moving them into place is a rename), with
 *              .staging-<rand>.wrap/ (the missing directories of a target
 *              path) and .staging-<rand>.journal (a merge in progress,
 *              rolled back at start-up: store/volume_merge.h);
 *   l/<rand>/  frozen layers (read-only from then on), u/ and w/ the
 *              overlay's upper and work directories.
 *
 * Copy-on-write children: creating a child of P freezes P's current
 * state: P's plain fs/ (or P's overlay upper u/) is renamed to a new
 * frozen layer l/<rand>, P is remounted as an overlay of its frozen
 * layers with a fresh empty upper, and the child is an overlay of the
 * same frozen layers with an upper of its own. That costs two renames and
 * two mounts, nothing proportional to P's size, and a write to either
 * lands in its own upper, never in the other. A parent cannot be deleted
 * while it has children (its frozen layers are their lower layers):
 * deleting it fails with ERR_CONFLICT unless forced, and a forced delete
 * deletes the children (and theirs) too. A child cannot be made of a
 * volume that a container mounts or that is taking an upload
 * (ERR_CONFLICT): freezing would pull its content from under them.
 *
 * Overlay lower directories are passed to mount(2) as /proc/self/fd/N of
 * O_PATH descriptors, so the option string stays short however deep a
 * chain of children goes (about 200 layers fit in a page).
 *
 * Opening the store cleans up after a crash (staging directories,
 * deleted volumes' leftovers, a child creation cut half-way) and mounts
 * the overlays again; closing it unmounts them.
 *
 * Blocking: every function here runs on a pool thread or at start-up.
 * Thread-safe: structural changes of one store are serialised by a mutex.
 */
#ifndef BERTH_STORE_VOLUME_H
#define BERTH_STORE_VOLUME_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "store/meta.h"
#include "store/tree_tar.h"
#include "store/volume_meta.h"

struct volume_store;

/* Opens <root>/volumes (creating it), cleans up and mounts. */
int volume_store_open(const char *root, struct meta *meta, struct volume_store **out,
                      struct err *err);
/* Unmounts the overlays and frees; NULL is a no-op. */
void volume_store_close(struct volume_store *vs);

/* 1-128 characters of [A-Za-z0-9_.-], not starting with a dot. */
bool volume_handle_valid(const char *handle);

struct volume_create_opts {
    const char *handle; /* NULL: generated */
    const char *parent; /* NULL: an empty volume */
    const struct volume_prop *props;
    size_t n_props;
    int64_t ttl_s; /* 0: none */
    bool privileged;
};

/*
 * Creates a volume (see the top of this file for children). EINVAL for a
 * bad handle, EEXIST for a taken one, ENOENT for a missing parent,
 * ERR_CONFLICT for a parent that is mounted or taking an upload. *out
 * (caller frees with volume_rec_free) is the new record.
 */
int volume_create(struct volume_store *vs, const struct volume_create_opts *o,
                  struct volume_rec **out, struct err *err);

/*
 * Deletes a volume's records, then its files (see vmeta_delete for
 * ERR_CONFLICT and force). ERR_CONFLICT too while it takes an upload.
 * *deleted (caller frees each and the array) lists what went.
 */
int volume_delete(struct volume_store *vs, const char *handle, bool force, char ***deleted,
                  size_t *n, struct err *err);

/*
 * As volume_delete without force, for the TTL sweep: deletes e's volume
 * (as vmeta_expired listed it at now) only if, at the delete itself, it
 * is still that volume and still expired. ENOENT when it is gone, ESTALE
 * when its handle names a volume created since or its TTL was renewed or
 * removed (vmeta_delete_expired); nothing is deleted then.
 */
int volume_delete_expired(struct volume_store *vs, const struct volume_expiry *e, int64_t now,
                          char ***deleted, size_t *n, struct err *err);

/* The host path of a volume's data (whether or not it exists); caller frees. */
char *volume_data_path(const struct volume_store *vs, const char *handle);

/* Apparent size of the volume's regular files, symlinks counted by their
 * target's length; computed by walking the tree. */
int volume_size(struct volume_store *vs, const char *handle, int64_t *bytes, struct err *err);

/*
 * For container mounts: records user_id (a container id) as mounting the
 * volume and returns the host path to bind-mount (*path_out, caller
 * frees). The mount itself is the caller's (a read-only mount with
 * MS_RDONLY). A mounted volume cannot get children nor be deleted
 * without force. Adding the same user twice is a no-op.
 */
int volume_mount_add(struct volume_store *vs, const char *handle, const char *user_id,
                     bool readonly, char **path_out, struct err *err);
/* Forgets user_id's mount; ENOENT if it was not recorded. */
int volume_mount_remove(struct volume_store *vs, const char *handle, const char *user_id,
                        struct err *err);

/*
 * Cleans an API path ("/sub/dir", "" or "/" for the root) into a relative
 * one without "." components ("" for the root): EINVAL for a ".."
 * component or a path over 4096 bytes. Caller frees *rel.
 */
int volume_path_clean(const char *path, char **rel, struct err *err);

/*
 * Opens the directory at path (as volume_path_clean takes it) inside the
 * volume without following any symlink and without leaving the volume:
 * ENOENT if missing, ERR_INVALID_CONTENT if a component is a symlink or
 * not a directory. *fd_out (O_RDONLY | O_DIRECTORY) is the caller's.
 */
int volume_open_dir(struct volume_store *vs, const char *handle, const char *path, int *fd_out,
                    struct err *err);

/* ---- tar streams (store/volume_tar.c) ---------------------------------- */

struct volume_tar_in {
    ssize_t (*read)(void *ctx, void *buf, size_t len); /* >0, 0 at the end, -errno */
    void *ctx;
    const char *encoding; /* "gzip", "zstd" (checked against the bytes) or NULL: detect */
};

struct volume_tar_in_result {
    uint64_t entries;
    uint64_t bytes; /* of the uncompressed tar stream */
};

/*
 * Streams a tar into the volume at path (created if missing, as
 * directories 0755). The whole stream is extracted into a staging
 * directory first, with layer_unpack's checks (an absolute name, "..",
 * a parent that is a symlink in the tar or in the volume, a hard link
 * to anything but an earlier entry: ERR_INVALID_CONTENT) and moved into
 * place only when all of it was good: a failed, truncated or cut upload
 * leaves the volume as it was. Moving into place (volume_merge) merges
 * directories and replaces anything else, all or nothing: a failure
 * part-way (ERR_CONFLICT when a container changed the target meanwhile)
 * and a crash (rolled back at the next start) leave the old tree. Readers
 * meanwhile see every file either old or new. A path whose entries would
 * reach PATH_MAX under the volume's data, or a component over NAME_MAX:
 * ERR_INVALID_CONTENT.
 */
int volume_tar_import(struct volume_store *vs, const char *handle, const char *path,
                      const struct volume_tar_in *in, struct volume_tar_in_result *res,
                      struct err *err);

/* enum volume_compression and struct volume_tar_out: store/tree_tar.h. */

/*
 * Writes a tar (pax) of path in the volume: a directory's tree as
 * "./..." entries, or a single entry named by path's last component.
 * Owners (numeric), modes, times, symlinks, hard links and xattrs are
 * kept. ENOENT when path is missing; the write callback's error stops it.
 */
int volume_tar_export(struct volume_store *vs, const char *handle, const char *path,
                      const struct volume_tar_out *out, struct err *err);

/* How volume_tar_stage extracts. */
struct volume_stage_opts {
    const char *shown_dir; /* where the entries will be once moved in (PATH_MAX counts from it) */
    int target_fd; /* the existing target, whose symlinks an entry may not go through; -1: none */
    bool allow_device_nodes;  /* else skipped, */
    bool refuse_device_nodes; /* or with this refused (ERR_INVALID_CONTENT), FIFOs too */
};

/*
 * The checked extraction of an upload (volume_tar_import's, and a
 * container archive's: store/rootfs_tar.c) into the staging directory
 * sfd: layer_unpack with whiteouts as plain names and no hashing.
 */
int volume_tar_stage(const struct volume_tar_in *in, int sfd, const struct volume_stage_opts *o,
                     struct volume_tar_in_result *res, struct err *err);

/* ---- for volume_tar.c -------------------------------------------------- */

/*
 * An upload's hold on a volume: keeps children from being made of it and
 * the volume from being deleted while the upload extracts. begin fails
 * with ENOENT for an unknown volume. *fs_dir (caller frees) is its fs/.
 */
int volume_write_begin(struct volume_store *vs, const char *handle, char **fs_dir, bool *privileged,
                       struct err *err);
void volume_write_end(struct volume_store *vs, const char *handle);
/* Serialises the moving into place with structural changes. */
void volume_store_lock(struct volume_store *vs);
void volume_store_unlock(struct volume_store *vs);

#endif
