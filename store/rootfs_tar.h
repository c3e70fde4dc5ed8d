/*
 * Tar streams into and out of a container's root filesystem, for Docker's
 * archive routes (docker cp): the stat of a path, a tar of it, and a tar
 * extracted under a directory. rootfs is the host path of the mounted
 * root filesystem (the container's overlay); paths are the container's,
 * absolute or not, resolved as a process chrooted there would see them
 * (symlinks followed, an absolute one starting again at rootfs, ".."
 * never above it: openat2 RESOLVE_IN_ROOT), so nothing outside rootfs is
 * ever read or written. The container's mounts are not seen through
 * rootfs (they are in its mount namespace): the caller finds the mount a
 * path lies in (rootfs_path_in_mount) and passes the mount's source as
 * the root instead.
 *
 * Uploads are staged as volume uploads are (store/volume_tar.c): the
 * whole tar is extracted by layer_unpack, with its checks (absolute
 * names, "..", a parent that is a symlink, hard links out, long paths:
 * ERR_INVALID_CONTENT) and device nodes and FIFOs refused, into a hidden
 * directory inside the target directory, then moved in by volume_merge:
 * a refused or cut upload leaves the target as it was. The staged data is
 * the only thing of berth's in the container's tree: the note and the
 * merge's journal are in the daemon's directory (o->notes).
 *
 * Blocking (disk, the stream's callbacks): pool threads only. Linux: on
 * Windows every call is ENOTSUP (common/rootdir.h has no RESOLVE_IN_ROOT
 * there).
 */
#ifndef BERTH_STORE_ROOTFS_TAR_H
#define BERTH_STORE_ROOTFS_TAR_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "store/volume.h"

#ifndef NAME_MAX
#define NAME_MAX 255
#endif
#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* A path's stat as Docker reports it (X-Docker-Container-Path-Stat). */
struct rootfs_stat {
    char name[NAME_MAX + 2]; /* the path's last component; "/" for the root, "." for "x/." */
    int64_t size;
    uint32_t mode; /* st_mode */
    int64_t mtime_s;
    int64_t mtime_ns;
    /* A symlink's destination, resolved in the container, from its "/"
     * (its own target when that leads nowhere); "" for anything else. */
    char link_target[PATH_MAX];
};

/*
 * The stat of path (its last component not followed, unless path ends in
 * "/" or "/."). top (NULL: "/") names the root, when path is rootfs's
 * root (a mount's: see rootfs_path_in_mount). ENOENT when it or a directory on the way is missing,
 * ENOTDIR when one is not a directory.
 */
int rootfs_path_stat(const char *rootfs, const char *path, const char *top, struct rootfs_stat *st,
                     struct err *err);

/*
 * Writes a tar of path (rootfs_path_stat's path) named as the engine names
 * it: a file as its last component, a directory as "name/..." ("./..." for
 * "x/.", top or "." for the root). *st is filled before out->ready runs.
 */
int rootfs_tar_export(const char *rootfs, const char *path, const char *top, struct rootfs_stat *st,
                      const struct volume_tar_out *out, struct err *err);

/*
 * Whether the container path lies in the mount at target (its mount
 * point or below): 1 with *rest the path inside the mount (for the calls
 * here, with the mount's source as rootfs) and, for the mount point
 * itself, *top its name (the name the calls give the root: "data" for
 * /data); both the caller's to free (*top may be NULL). 0 when not,
 * -ENOMEM. Pure: lexical, no symlink of the container is looked at.
 */
int rootfs_path_in_mount(const char *path, const char *target, char **rest, char **top);

struct rootfs_tar_in_opts {
    /* A directory and a non-directory never replace each other:
     * ERR_INVALID_CONTENT (Docker's noOverwriteDirNonDir). */
    bool no_dir_nondir;
    /* Every entry's owner becomes uid:gid (Docker's copyUIDGID, for a
     * container with a User); else the tar's owners are kept. */
    bool chown;
    uint32_t uid, gid;
    /* Where the upload's note and merge journal go while it runs
     * (store/cp_pending.h: <container dir>/cp-pending, the daemon's, never
     * inside rootfs; required); root_is_rootfs: rootfs is the container's
     * root filesystem, not a mount's source. */
    const char *notes;
    bool root_is_rootfs;
};

/*
 * Extracts the tar in under the directory path (every symlink of it
 * followed inside rootfs), all or nothing. ENOENT when path is missing,
 * ENOTDIR when it is not a directory; ERR_INVALID_CONTENT for a refused
 * tar (nothing written); ERR_CONFLICT when the target changed during the
 * upload (a running container writing there). A crash leaves the note
 * in o->notes for cp_pending_recover; so does a merge whose undo failed
 * (its journal and staging directory stay).
 */
int rootfs_tar_import(const char *rootfs, const char *path, const struct volume_tar_in *in,
                      const struct rootfs_tar_in_opts *o, struct volume_tar_in_result *res,
                      struct err *err);

#endif
