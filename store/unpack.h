/*
 * Layer unpacking: one pass over a layer blob (gzip, zstd or plain tar)
 * that hashes the compressed bytes, hashes the uncompressed tar stream
 * (the diff_id) and extracts the entries into a snapshot directory, with
 * OCI whiteouts converted to the overlayfs format.
 *
 * Synchronous and blocking: call it from a pool thread. Thread-safe: two
 * threads may unpack two layers at once (each into its own target).
 */
#ifndef BERTH_STORE_UNPACK_H
#define BERTH_STORE_UNPACK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "store/digest.h"

/*
 * Where the layer's bytes come from. read fills up to len bytes of buf and
 * returns how many it wrote, 0 at the end of the blob, or a negative errno.
 * media_type is optional: when it names a tar, tar+gzip or tar+zstd layer
 * (OCI or Docker media types), a blob whose bytes say otherwise is
 * rejected; when NULL or unknown, the bytes alone decide.
 */
struct unpack_input {
    ssize_t (*read)(void *ctx, void *buf, size_t len);
    void *ctx;
    const char *media_type;
};

/* Called now and then with the number of compressed bytes read so far. */
typedef void (*unpack_progress_cb)(void *ctx, uint64_t bytes_done);

/*
 * Where and how to unpack.
 * - target_dir: an existing, empty directory (the snapshot being built);
 *   or NULL, and target_fd is a descriptor of it (common/rootdir.h; the
 *   caller's, it stays open), with shown_dir set.
 * - lower_dirs: the unpacked snapshots below this layer, top-most first,
 *   NULL-terminated (or NULL for a base layer); or NULL, and lower_fds
 *   (when not NULL) holds their descriptors, ended by -1. They are only
 *   read, to find symlinks that an entry's path would go through.
 * - allow_device_nodes: false skips character and block devices (a debug
 *   log line each); whiteouts are created whatever this says.
 */
struct unpack_opts {
    const char *target_dir;
    int target_fd;
    /* Where the entries will be seen once in place (a volume's upload is
     * extracted into staging, then moved): the PATH_MAX check counts from
     * here. NULL: target_dir. */
    const char *shown_dir;
    const char *const *lower_dirs;
    const int *lower_fds;
    bool allow_device_nodes;
    /* Without allow_device_nodes: a character or block device (FIFOs
     * too) fails the unpack with ERR_INVALID_CONTENT instead of being
     * skipped (a container's archive upload: nothing half-accepted). */
    bool refuse_device_nodes;
    /* Volumes, not layers: ".wh." names are ordinary files (no whiteout
     * conversion), and a 0/0 character device is just a device. */
    bool no_whiteouts;
    /* Skip hashing: digest and diff_id of the result are left empty. */
    bool no_digests;
    unpack_progress_cb progress_cb;
    void *progress_ctx;
};

/* What one unpack saw. Digests are "sha256:<hex>". */
struct unpack_result {
    char digest[DIGEST_STR_LEN];  /* of the blob as read (compressed) */
    uint64_t size;                /* bytes of the blob */
    char diff_id[DIGEST_STR_LEN]; /* of the uncompressed tar stream */
    uint64_t uncompressed_size;   /* bytes of the tar stream */
    uint64_t unpacked_bytes;      /* sum of the regular files' sizes */
    uint64_t entries;             /* tar entries, whiteouts included */
};

/*
 * Unpacks one layer blob into opts->target_dir. Blocks until the whole
 * blob is read, hashed and extracted.
 *
 * Paths: a leading "./" is stripped (docker and most tools write it) and
 * repeated or trailing slashes are folded. An absolute name ("/etc/x"), a
 * ".." component, a name whose parent component is a symlink (in this
 * layer, or in the merged view of lower_dirs that an overlay mount would
 * show), a hard link whose target is absolute, has "..", goes through a
 * symlink or is not an earlier entry of this layer; a component over
 * NAME_MAX; a path that under shown_dir (or target_dir) reaches PATH_MAX,
 * and the same for a hard link's target; a symlink target of PATH_MAX
 * bytes or more: all fail with ERR_INVALID_CONTENT and a message naming
 * the entry (its first 120 bytes). Nothing is ever created outside
 * target_dir, and nothing depends on or changes the working directory:
 * every entry is made relative to a descriptor of its parent directory
 * (common/rootdir.h).
 *
 * Whiteouts ("overlayfs format", so a snapshot is one overlay lower dir):
 * ".wh.<name>" becomes a 0/0 character device <name>, and ".wh..wh..opq"
 * sets trusted.overlay.opaque="y" on its directory, wherever it appears
 * in the stream; ".wh.", ".wh.." and ".wh..." (naming the directory or
 * its parent) fail with ERR_INVALID_CONTENT. Missing parents of a whiteout are created (0755). They
 * hide lower layers only; an entry of this layer keeps its data:
 * - a whiteout for a name this layer already wrote leaves the entry; if
 *   the entry is a directory it is made opaque (what the lower layers had
 *   there is gone, what this layer put there stays);
 * - an entry that comes after a whiteout of its own name replaces the
 *   whiteout; a directory that does so is made opaque, for the same
 *   reason.
 * trusted.overlay.* xattrs carried by the tar itself are dropped: only
 * the conversion above may set them.
 *
 * A regular file whose creation fails with EACCES or EPERM because an
 * existing file of that name is read-only (or immutable) is made writable
 * and created again.
 *
 * Metadata: owners (numeric ids, never mapped through the host's user
 * names), modes, times, xattrs and POSIX ACLs are kept (an owner that
 * cannot be set drops setuid and setgid); sparse files stay sparse.
 * NFSv4 ACLs and file flags (chattr) are not: an immutable file would
 * make the snapshot impossible to remove and to copy up. Sockets are
 * skipped. An entry of another type in the way is replaced; a directory
 * only when it is empty (else ERR_INVALID_CONTENT).
 *
 * Returns 0 with *res filled, or a negative errno with err set:
 * ERR_INVALID_CONTENT for a bad blob (compression, tar, path, media type
 * mismatch), an errno for I/O failures. On failure the target may hold a
 * partial tree: the caller removes target_dir.
 */
int layer_unpack(const struct unpack_input *in, const struct unpack_opts *opts,
                 struct unpack_result *res, struct err *err);

#endif
