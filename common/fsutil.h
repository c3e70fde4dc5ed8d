/*
 * Small filesystem helpers shared by the store and the runtime drivers.
 * All of them block on disk: call them from pool jobs or at start-up,
 * never from a loop callback.
 */
#ifndef BERTH_COMMON_FSUTIL_H
#define BERTH_COMMON_FSUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

/* Creates path and its missing parents with mode; existing dirs are fine. */
int fs_mkdir_p(const char *path, mode_t mode, struct err *err);

/*
 * Removes path and everything below it without following symlinks and
 * without crossing into other filesystems (a mount left under it is an
 * error, not something to delete through). A missing path is success.
 */
int fs_remove_tree(const char *path, struct err *err);

/* The same for the entry name in dirfd (common/rootdir.h), never
 * followed: for trees inside a directory others can write (a container's
 * rootfs), where a path could be swapped for a symlink meanwhile. */
int fs_remove_tree_at(int dirfd, const char *name, struct err *err);

/* fsync(2) on a directory, so a rename or create inside it is durable. */
int fs_fsync_dir(const char *path, struct err *err);

/*
 * Writes data to path atomically: a temporary file beside it, fsync,
 * rename over path, fsync of the directory. Readers see the old or the
 * new content, never a mix, also after a crash.
 */
int fs_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode,
                         struct err *err);

/*
 * The same without either fsync: readers, and a daemon killed at any moment,
 * still see the old or the new content, but after a power loss the file may
 * be missing or empty. Only for files nothing reads after a reboot.
 */
int fs_write_file_volatile(const char *path, const void *data, size_t len, mode_t mode,
                           struct err *err);

/*
 * Reads a whole regular file of at most max bytes into a new NUL-terminated
 * buffer (caller frees). A larger file fails with EFBIG.
 */
int fs_read_file(const char *path, size_t max, char **out, size_t *out_len, struct err *err);

/*
 * The same two relative to a directory descriptor (common/rootdir.h):
 * name is one component, never followed if it is a symlink. The
 * temporary is ".<name>.tmp.<thread>" in dirfd, renamed over name.
 */
int fs_write_file_atomic_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                            struct err *err);
int fs_read_file_at(int dirfd, const char *name, size_t max, char **out, size_t *out_len,
                    struct err *err);

/* Free bytes available to an unprivileged writer on the filesystem of path. */
int fs_free_bytes(const char *path, uint64_t *out, struct err *err);

/* Joins a and b with exactly one '/' between them; caller frees. NULL on OOM. */
char *fs_path_join(const char *a, const char *b);

#endif
