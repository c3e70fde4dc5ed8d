/*
 * Moving a staged upload into a volume, all or nothing across failures
 * and crashes (store/volume_merge.c). For store/volume_tar.c,
 * store/volume.c and store/rootfs_tar.c (a container's archive upload,
 * staged the same way) only.
 *
 * Blocking (disk); the caller holds the volume store's lock.
 */
#ifndef BERTH_STORE_VOLUME_MERGE_H
#define BERTH_STORE_VOLUME_MERGE_H

#include <stdbool.h>

#include "common/err.h"

/* Names in a volume's fs/ for upload <hex>: the staged tree, the source
 * of the merge when the target path is missing (staged tree wrapped in
 * the missing directories), and the merge's journal. */
#define VOLUME_STAGING_PREFIX ".staging-"
#define VOLUME_WRAP_SUFFIX ".wrap"
#define VOLUME_JOURNAL_SUFFIX ".journal"

/*
 * Merges the tree src (a path below fs_fd) into base (likewise): an entry
 * missing in base moves in, a directory on both sides is merged (and
 * takes src's owner, mode, xattrs and times), anything else is exchanged
 * with renameat2(RENAME_EXCHANGE), so what it replaced ends up in src.
 *
 * First every step is planned and written to the journal (fs_fd/journal,
 * fsynced), then carried out; a failure part-way undoes the steps done,
 * in reverse, and a crash leaves the journal for volume_merge_recover.
 * Once every step is done the filesystem is synced and the journal
 * removed: that is the commit. Afterwards src holds only what was
 * replaced; the caller removes it.
 *
 * ERR_CONFLICT when the target changed between the plan and a step (a
 * container writing into the volume); the volume is then as it was.
 */
int volume_merge(int fs_fd, const char *src, const char *base, const char *journal,
                 struct err *err);

/*
 * As volume_merge, with the journal in another directory, jfd (on any
 * filesystem): a container's archive upload keeps it in the daemon's own
 * directory, out of the container's reach (store/rootfs_tar.c), as the
 * tree it merges into is the container's to write. With no_dir_nondir, a
 * directory and a non-directory of the same name (either way round) fail
 * the plan with ERR_INVALID_CONTENT before any step was made (Docker's
 * noOverwriteDirNonDir).
 */
int volume_merge_at(int fs_fd, const char *src, const char *base, int jfd, const char *journal,
                    bool no_dir_nondir, struct err *err);

/*
 * Whether journal (a name in fs_fd) is there: after a failed merge, that
 * its undo failed and the journal was left for volume_merge_recover,
 * which needs the staging tree (it holds what the steps replaced): the
 * caller must then keep it.
 */
bool volume_merge_journal_left(int fs_fd, const char *journal);

/*
 * Undoes what the merge of journal (a name in fs_fd) did, from its
 * record, then removes the journal. For start-up, before the staging
 * directories are removed.
 */
int volume_merge_recover(int fs_fd, const char *journal, struct err *err);

/* As volume_merge_recover, the journal a name in jfd (volume_merge_at). */
int volume_merge_recover_at(int fs_fd, int jfd, const char *journal, struct err *err);

#endif
