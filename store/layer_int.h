/*
 * What store/layer.c shares with the files of its layer types:
 * layer_linux.c (LAYER_LINUX_DIR: the overlay mount) and layer_windows.c
 * (no overlay; LAYER_WCIFS through layer_wcifs_windows.c, LAYER_CIMFS
 * through cimfs.dll). Not for other modules.
 */
#ifndef BERTH_STORE_LAYER_INT_H
#define BERTH_STORE_LAYER_INT_H

#include "store/layer.h"
#include "store/mount_journal.h"

/* Journal kinds, one per way of undoing. */
#define LAYER_KIND_OVERLAY "overlay"
#define LAYER_KIND_WCIFS "wcifs"
#define LAYER_KIND_CIMFS "cimfs"

struct mounted_layers {
    enum layer_type type;
    char *rootfs;
    char *target;             /* the mount point (overlay), NULL when nothing is mounted */
    char *record;             /* a legacy record file, or NULL */
    struct mjournal *journal; /* with entry: where the mount is journaled */
    char *entry;
    struct mj_entry *undo; /* what undoing needs (the entry's fields); NULL for overlay */
    /* The read-only layers as a container document names them (Windows):
     * topmost first. */
    size_t nlayers;
    char **layer_ids;
    char **layer_paths;
};

/* A new record (copies of the strings); NULL on out of memory. */
struct mounted_layers *mounted_layers_new(enum layer_type type, const char *rootfs,
                                          const char *target, const char *record);

/* Sets the journal entry m's unmount removes (copies the name). */
int mounted_layers_set_entry(struct mounted_layers *m, struct mjournal *j, const char *name,
                             struct err *err);

/* Journals e (the mount about to be made). */
int layer_journal_put(const struct layer_mount_rec *rec, struct mj_entry *e, struct err *err);
/* Rewrites e with "step" (and "rootfs" when not NULL) and journals it: the
 * Windows mounts journal each step before they make it. */
int layer_journal_step(const struct layer_mount_rec *rec, struct mj_entry *e, const char *step,
                       const char *rootfs, struct err *err);

/* LAYER_LINUX_DIR (layer_linux.c; ENOTSUP elsewhere). */
int layer_overlay_mount(const struct layer_list *l, const char *scratch_dir, const char *target,
                        const struct layer_mount_rec *rec, struct mounted_layers **out,
                        struct err *err);
int layer_overlay_unmount(const char *target, struct err *err);

/* LAYER_WCIFS and LAYER_CIMFS (layer_windows.c; ENOTSUP on Linux). */
int layer_windows_mount(const struct layer_list *l, const char *scratch_dir,
                        const struct layer_mount_rec *rec, struct mounted_layers **out,
                        struct err *err);
/* Undoes what entry e (kind wcifs or cimfs) says was mounted. Idempotent. */
int layer_windows_undo(const struct mj_entry *e, struct err *err);

/* LAYER_WCIFS (layer_wcifs_windows.c, Windows only): a scratch VHDX and
 * the WCIFS filter on its volume, and their undo. */
int layer_wcifs_mount(const struct layer_list *l, const char *scratch_dir,
                      const struct layer_mount_rec *rec, struct mounted_layers **out,
                      struct err *err);
int layer_wcifs_undo(const struct mj_entry *e, struct err *err);

#endif
