/*
 * The journal of mounts: what berth mounted (or attached), where, and for
 * whom, so that a daemon started after a crash can undo what the dead one
 * left behind. One entry per mount, written before the mount is
 * made and removed after it is undone; at start-up the journal is
 * replayed: every entry whose owner is gone is undone, then removed.
 * Linux overlay mounts of containers' root filesystems and Windows layer
 * mounts (a WCIFS filter on a scratch VHDX, a mounted CIM) are entries of
 * the same journal; what undoes one is the typed layer code's business
 * (store/layer.h: layers_undo_entry), chosen by the entry's kind.
 *
 * On disk, <store root>/mounts/<name>.mnt, one small text file per entry:
 *
 *   berth-mount 1
 *   owner container:build-42
 *   kind overlay
 *   f target=/var/lib/berth/containers/build-42/rootfs
 *   ...
 *   sum 8c1e0f3a          CRC-32 of every byte before this line
 *
 * An entry is written to a temporary file (".tmp-...") and renamed over
 * its name, so a reader sees the old entry or the new one, never a mix;
 * the mount is made only after that. Durable across a power loss where
 * what it names is (Windows: flushed and written through); on Linux it
 * only has to outlive the daemon (mount_journal_io_linux.c), and an empty
 * entry, what a power loss can leave of an unsynced one, is removed at
 * the replay. A torn or damaged file (no "sum" line, a checksum that does not
 * match, a missing field) cannot say what to undo: replay sets it aside
 * as ".corrupt-<name>.mnt" with a logged error, and leaves the rest.
 * A temporary file never named a mount that was made: replay removes it.
 *
 * The format and the replay logic are portable; the file operations are
 * mount_journal_io.h's, one file per OS. Blocking (disk): pool threads or
 * start-up. Entries with different names may be written from several
 * threads at once; one name is one caller's at a time.
 */
#ifndef BERTH_STORE_MOUNT_JOURNAL_H
#define BERTH_STORE_MOUNT_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

/* An entry's name: 1-200 of [A-Za-z0-9_.-], not starting with '.'. */
#define MJ_NAME_MAX 200
/* An owner or a kind: 1-255 printable ASCII characters, no space. */
#define MJ_WORD_MAX 255
/* Fields per entry, a field's value: any bytes but NUL, CR and LF. */
#define MJ_FIELDS_MAX 512
#define MJ_VALUE_MAX 4096
/* The largest entry file read back: what the limits above allow. */
#define MJ_FILE_MAX (MJ_FIELDS_MAX * (MJ_VALUE_MAX + 72) + 2 * MJ_WORD_MAX + 64)

/* The owner of a container's entries: "container:<handle>". */
#define MJ_OWNER_CONTAINER "container:"

struct mj_field {
    char *key; /* [a-z0-9_-]{1,64} */
    char *value;
};

struct mj_entry {
    char *name;
    char *owner;
    char *kind;
    size_t nfields;
    struct mj_field *fields;
};

/* A new entry (copies), or NULL when out of memory. Validated when put. */
struct mj_entry *mj_entry_new(const char *name, const char *owner, const char *kind);
void mj_entry_free(struct mj_entry *e);
/* A deep copy, or NULL when out of memory. */
struct mj_entry *mj_entry_dup(const struct mj_entry *e);
/* Sets key to value (replacing an earlier value). EINVAL for a bad key or
 * value, E2BIG past MJ_FIELDS_MAX, ENOMEM. */
int mj_entry_set(struct mj_entry *e, const char *key, const char *value, struct err *err);
/* The value of key, or NULL. */
const char *mj_entry_get(const struct mj_entry *e, const char *key);
/* The handle of a container owner ("container:<handle>"), or NULL. */
const char *mj_owner_container(const char *owner);

/* Is name a valid entry name? */
bool mj_name_valid(const char *name);

/*
 * The file text of e (caller frees *text), checksum included. EINVAL
 * naming what is wrong when e is not valid.
 */
int mj_entry_format(const struct mj_entry *e, char **text, size_t *len, struct err *err);

/*
 * Parses the text of entry name as mj_entry_format wrote it.
 * ERR_INVALID_CONTENT naming what is wrong when it is torn or damaged.
 */
int mj_entry_parse(const char *name, const char *text, size_t len, struct mj_entry **out,
                   struct err *err);

struct mjournal;

/* Opens the journal in dir (absolute; created 0700 when missing). */
int mjournal_open(const char *dir, struct mjournal **out, struct err *err);
/* NULL is a no-op. */
void mjournal_free(struct mjournal *j);
const char *mjournal_dir(const struct mjournal *j);

/* Writes e (see above for how durably), replacing an entry of the same name. */
int mjournal_put(struct mjournal *j, const struct mj_entry *e, struct err *err);
/* Removes entry name; a missing one is success. */
int mjournal_remove(struct mjournal *j, const char *name, struct err *err);
/* Reads entry name into a new *out: ENOENT when there is none,
 * ERR_INVALID_CONTENT when it is damaged. */
int mjournal_get(struct mjournal *j, const char *name, struct mj_entry **out, struct err *err);

/*
 * The entries of owner (NULL: all), sorted by name, into a new array
 * (mj_entry_list_free). Damaged entries are left out (replay deals with
 * them); *ndamaged (may be NULL) counts them.
 */
int mjournal_list(struct mjournal *j, const char *owner, struct mj_entry ***out, size_t *n,
                  size_t *ndamaged, struct err *err);
void mj_entry_list_free(struct mj_entry **v, size_t n);

/* Replay's callbacks: keep says whether e's owner still needs it (a live
 * container); undo takes the mount away (idempotently: it may already be
 * gone), 0 or a negative errno with err set. */
typedef bool (*mj_keep_fn)(void *arg, const struct mj_entry *e);
typedef int (*mj_undo_fn)(void *arg, const struct mj_entry *e, struct err *err);

struct mj_replay_stats {
    unsigned kept;      /* owners still alive */
    unsigned undone;    /* undone, and the entry removed */
    unsigned failed;    /* undo failed: the entry stays for the next start */
    unsigned damaged;   /* set aside as .corrupt-* */
    unsigned temporary; /* temporary files removed */
};

/*
 * At start-up: removes temporary files, sets damaged entries aside, and
 * for every other entry, by name, keeps it when keep(arg, e) says so and
 * otherwise calls undo(arg, e) and removes the entry when that succeeds
 * (each failure is logged and counted, and the replay goes on). Fails
 * only when the journal itself cannot be read.
 */
int mjournal_replay(struct mjournal *j, mj_keep_fn keep, mj_undo_fn undo, void *arg,
                    struct mj_replay_stats *st, struct err *err);

#endif
