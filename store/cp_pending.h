/*
 * Notes of a container's archive uploads in flight (docker cp into a
 * container, store/rootfs_tar.c), so that a daemon killed mid-way is
 * cleaned up after. Only the upload's staging directory (the data being
 * extracted) is in the target directory, inside the container's root
 * filesystem or a mount's source; the note and the merge's journal are
 * in <container dir>/cp-pending/, the daemon's, out of the container's
 * reach: a container can write anything in its own tree while berth
 * works there, and a journal is replayed as root, so nothing berth reads
 * back is kept where the container could forge, swap or read it. The
 * note is written (durably) before the staging directory is made and
 * removed once it is gone; it names the process that wrote it, so that
 * cp_pending_recover replays the notes of dead processes only: it undoes
 * a merge its journal says was cut short (volume_merge_recover_at),
 * removes the staging directory, then the journal and the note.
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

/* The notes that could not be replayed, kept for a look (cp_pending_recover). */
#define CP_PENDING_ASIDE "aside"

/* One upload's note: its file name in the notes' directory, and its
 * merge journal's there (for volume_merge_at). */
struct cp_note {
    char name[64];
    char journal[80];
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
 * (one that died: a store root has one daemon), and removes it with its
 * journal. A note whose root filesystem is not mounted, whose root is
 * missing, or whose target directory is missing in a mount's empty
 * source (it may be a filesystem not mounted yet), stays for a later
 * call. A note that cannot be replayed (not one of this version, its
 * journal cannot be undone, what it names was changed into something
 * else or removed by the container from a root that is there) is logged
 * and moved to dir/aside/ with its journal, what it names left as it is:
 * one bad note never holds up the uploads after it. 0, or the error of
 * reading dir itself. A missing dir is none.
 */
int cp_pending_recover(const char *dir, struct err *err);

#endif
