/*
 * What volumes need of the OS beyond files, and how copy-on-write
 * children are made there: store/volume_linux.c freezes the parent into
 * an overlay layer (mount(2), two renames whatever the size);
 * store/volume_windows.c has no overlay and makes a child by copying its
 * parent's data (store/volume_copy.c). Private to store/volume*.c.
 *
 * Blocking; pool threads or start-up.
 */
#ifndef BERTH_STORE_VOLUME_OS_H
#define BERTH_STORE_VOLUME_OS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

/* Children by freezing and overlays (true), or by copying (false). */
bool volume_os_overlay(void);

/* Is path the root of a mount (the volume's overlay)? */
bool volume_os_is_mountpoint(const char *path);

/* Detaches whatever is mounted at path; not mounted is fine. */
void volume_os_unmount_detach(const char *path);

/* Unmounts path now (it must not be busy); not mounted is fine. */
int volume_os_unmount(const char *path, struct err *err);

/*
 * Mounts an overlay at fs of the layers (paths below vdir, top-most
 * first), with upper and work directories up and wk (which exist).
 * ERR_INVALID_CONTENT when the layers do not fit in one mount; ENOTSUP
 * where there is no overlay.
 */
int volume_os_mount_overlay(const char *vdir, char *const *layers, size_t n, const char *up,
                            const char *wk, const char *fs, struct err *err);

/*
 * volume_copy.c: copies the tree below the directory descriptor src into
 * the (empty) directory descriptor dst: directories, regular files,
 * symlinks, hard links among the copied files, device nodes and FIFOs
 * (where the OS makes them), with modes, owners, times and xattrs where
 * the OS keeps them. Nothing is followed through a symlink. Any thread.
 */
int volume_copy_tree(int src, int dst, struct err *err);

#endif
