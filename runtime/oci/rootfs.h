/*
 * Mount targets made safe before the runtime sees them. An image's layers
 * can make /dev, /proc, a mount target or one of its parents a symlink,
 * and parts of runc's set-up (its /dev: ptmx, the fd and stdio links)
 * follow such a symlink from the host's root, so a layer with `dev ->
 * /some/host/dir` had runc delete and create files there. Before the
 * runtime starts, every target in the image is therefore walked inside the
 * rootfs with directory fds (O_NOFOLLOW at each step, symlinks in a parent
 * resolved as inside the container, never followed by the kernel) and made
 * a real directory or file: created where the image has nothing, the
 * symlink replaced where the target itself is one (the rootfs is the
 * container's overlay, so both land in its writable layer). The spec gets
 * the resolved, symlink-free path. A target of the wrong type (a regular
 * file where a directory is needed, a device, a socket) fails with
 * ERR_INVALID_CONTENT naming it.
 *
 * Blocks on the disk: pool threads only.
 */
#ifndef BERTH_RUNTIME_OCI_ROOTFS_H
#define BERTH_RUNTIME_OCI_ROOTFS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "runtime/driver.h"

/*
 * Makes target (absolute, normal form, no "..") a directory (want_dir) or
 * a regular file inside the root filesystem open at rootfd, and returns in
 * *resolved (caller frees) the path, from the container's /, at which it
 * now is: target itself unless a parent was a symlink.
 */
int rt_oci_target_prepare(int rootfd, const char *target, bool want_dir, char **resolved,
                          struct err *err);

/*
 * As rt_oci_target_prepare, where fences (nfences container paths in
 * normal form) are mount points the runtime will have made by the time
 * it mounts target: a walk that goes on past one of them fails with
 * ERR_INVALID_CONTENT, because the runtime would resolve the rest in that
 * mount's content (a volume any container can change), not in the image.
 * Ending on one is fine: the mount then stacks on it.
 */
int rt_oci_target_prepare_fenced(int rootfd, const char *target, bool want_dir,
                                 const char *const *fences, size_t nfences, char **resolved,
                                 struct err *err);

/*
 * Prepares every target of the container's spec in spec->rootfs: the
 * runtime's own (/proc, /dev, /sys, the init at RT_OCI_INIT_TARGET) and
 * each of spec->mounts (a directory when its source is one, else a file).
 * A target below /proc, /dev or /sys lies in a filesystem the runtime
 * mounts afresh, not in the image, and is left as it is. The working
 * directory (spec->cwd) is made too, its symlinks followed inside the
 * rootfs, unless it lies in a mount. Returns in *out
 * a copy of spec->mounts with the resolved targets (free it with
 * rt_oci_mounts_free). The spec must have been validated.
 */
int rt_oci_rootfs_prepare(const struct rt_container_spec *spec, struct rt_mount **out,
                          struct err *err);

/* Frees a copy made by rt_oci_rootfs_prepare; NULL is a no-op. */
void rt_oci_mounts_free(struct rt_mount *mounts, size_t n);

#endif
