/*
 * A container's writable layer (the overlay's upper and work directories
 * live in it), bounded when the container has limits.disk_bytes:
 *
 *   - a project quota, where the filesystem under the store has project
 *     quotas on and enforced (XFS, or ext4 with the project feature
 *     mounted with prjquota): the directory gets a project ID of its own
 *     (its inode number), inherited by everything made in it, and a hard
 *     block limit of max_bytes;
 *   - otherwise a sparse ext4 image of max_bytes beside the directory,
 *     attached to a loop device (autoclear) and mounted on it. Its
 *     metadata takes a few percent; the host's disk use for it never
 *     passes max_bytes, however the container writes.
 *
 * A write past the limit fails in the container with EDQUOT or ENOSPC.
 * A small text record, written before anything is made, says what was
 * made, so a daemon restarted after a crash can undo it:
 *
 *   berth-scratch 1
 *   kind plain | quota | loop
 *   dir /abs/scratch
 *   projid N             (quota)
 *   image /abs/file      (loop)
 *
 * Every function blocks (mount, mkfs, quotactl): pool threads or start-up.
 */
#ifndef BERTH_STORE_SCRATCH_H
#define BERTH_STORE_SCRATCH_H

#include <stdint.h>

#include "common/err.h"

/* The smallest limit a writable layer may have (the ext4 image needs room). */
#define SCRATCH_MIN_BYTES (16ull << 20)

enum scratch_kind { SCRATCH_PLAIN, SCRATCH_QUOTA, SCRATCH_LOOP };

/*
 * Makes dir (absolute, created) the writable layer, bounded to max_bytes
 * (0: a plain directory, no record). The record goes to record_path,
 * the loop image, when one is needed, to image_path (both outside dir).
 * On failure nothing is left but what scratch_release undoes. *kind (may
 * be NULL) says which bound was used. ERR_UNAVAILABLE when the host can
 * bound it neither way (no loop devices, no mkfs.ext4), EINVAL for a
 * limit under SCRATCH_MIN_BYTES.
 */
int scratch_make(const char *dir, uint64_t max_bytes, const char *record_path,
                 const char *image_path, enum scratch_kind *kind, struct err *err);

/*
 * Undoes what the record at record_path says was made: unmounts the image
 * (its loop device goes with it), removes the image, lifts the quota, and
 * removes the record. A missing record is success (nothing to undo);
 * EBUSY while something (the overlay) still uses the mount.
 */
int scratch_release(const char *record_path, struct err *err);

#endif
