/*
 * A tar stream out of a directory tree: the writer behind volume
 * downloads (store/volume_tar.c) and container archives
 * (store/rootfs_tar.c). The tree is walked through common/rootdir.h,
 * relative to directory descriptors (never chdir, never a symlink
 * followed), and fed to libarchive's pax writer, with hard links found by
 * libarchive's link resolver and xattrs read from each file.
 *
 * Blocking (disk, and the stream's write callback): pool threads only.
 */
#ifndef BERTH_STORE_TREE_TAR_H
#define BERTH_STORE_TREE_TAR_H

#include <stddef.h>

#include "common/err.h"
#include "common/osfs.h"

enum volume_compression { VOLUME_COMPRESS_NONE, VOLUME_COMPRESS_GZIP, VOLUME_COMPRESS_ZSTD };

struct volume_tar_out {
    /* Takes the next bytes of the tar: 0, or -errno to stop. */
    int (*write)(void *ctx, const void *buf, size_t len);
    /* Called once path was found, before the first write. May be NULL. */
    void (*ready)(void *ctx);
    void *ctx;
    enum volume_compression compression;
    /* May be NULL. Uncompressed streams only: a region of the stream's
     * own buffer (at most max bytes, *len given, never 0) that the writer
     * reads file data straight into; the write of that same region that
     * follows takes it without a copy. 0, or -errno to stop. */
    int (*reserve)(void *ctx, size_t max, void **buf, size_t *len);
};

/*
 * Writes a tar (pax) of the entry name in dir (name NULL: dir itself),
 * whose stat, not followed, is st: one entry named arcname, and for a
 * directory everything below it as arcname/... Owners (numeric), modes,
 * times, symlinks, hard links and xattrs (but trusted.overlay.*) are
 * kept; an entry that changed type while the walk reached it is
 * ERR_CONFLICT. out->ready runs once the directory is open, before the
 * first write; the write callback's error stops it.
 */
int tree_tar_export(int dir, const char *name, const struct os_stat *st, const char *arcname,
                    const struct volume_tar_out *out, struct err *err);

#endif
