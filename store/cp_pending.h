/*
 * Notes of a container's archive uploads in flight (docker cp into a
 * container, store/rootfs_tar.c), so that a daemon killed mid-way is
 * cleaned up after: the upload's staging directory and its merge journal
 * live in the target directory, inside the container's root filesystem
 * (or a mount's source), where nothing else looks for them. Each note is
 * a file in <container dir>/cp-pending/, written (durably) before the
 * staging directory is made and removed once it is gone; it names the
 * process that wrote it, so that cp_pending_recover replays the notes of
 * dead processes only: it undoes a merge its journal says was cut short
 * (volume_merge_recover), removes the staging directory, then the note.
 *
 * Blocking (disk): pool threads, and main at start-up. Thread-safe: the
 * replays of one process are serialised.
 */
#ifndef BERTH_STORE_CP_PENDING_H
#define BERTH_STORE_CP_PENDING_H

#include <stdbool.h>

#include "common/err.h"

/* The notes' directory in a container's directory. */
#define CP_PENDING_DIR "cp-pending"
/* The staging directories' names in the target: the prefix and 16 hex digits. */
#define CP_STAGING_PREFIX ".berth-cp-"

/* One upload's note: its file name in the notes' directory. */
struct cp_note {
    char name[64];
};

/*
 * Writes the note of an upload into dir (made if missing): root, the
 * host directory the container path resolves in, with rootfs telling a
 * container's root filesystem (which must be mounted to be replayed)
 * from a mount's source; target, the directory extracted into, as
 * resolved in root ("/" or "/a/b"); staging, the staging directory's name
 * in target (the journal is named after it, VOLUME_JOURNAL_SUFFIX).
 * Durable when it returns.
 */
int cp_pending_add(const char *dir, const char *root, bool rootfs, const char *target,
                   const char *staging, struct cp_note *note, struct err *err);

/* Removes a note of this process's (the upload is over). */
void cp_pending_remove(const char *dir, const struct cp_note *note);

/*
 * Replays every note in dir that a process other than this one wrote
 * (one that died: a store root has one daemon), and removes it. A note
 * whose root filesystem is not mounted, or whose journal cannot be undone,
 * stays for a later call. 0 when none is left of a dead process, else the
 * first error. A missing dir is none.
 */
int cp_pending_recover(const char *dir, struct err *err);

#endif
