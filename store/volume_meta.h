/*
 * Volume records in the metadata database (<root>/meta.db, the same
 * SQLite file and connection as store/meta.c): the volume, its properties,
 * its parent and copy-on-write layers, its TTL, and the containers that
 * mount it. The tables are component "volumes" of the store's one schema
 * scheme (store/db.h), versioned apart from meta.c's "meta", so the two
 * schemas grow without stepping on each other. Every public function is one
 * transaction (meta_run_locked). Blocking and thread-safe: pool jobs.
 */
#ifndef BERTH_STORE_VOLUME_META_H
#define BERTH_STORE_VOLUME_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "store/meta.h"

#define VOLUME_HANDLE_MAX 128
#define VOLUME_PROP_MAX 4096 /* bytes of a property key or value */

struct volume_prop {
    char *key;
    char *value; /* NULL in a patch: remove the key */
};

/*
 * One volume. Returned records are owned by the caller (volume_rec_free);
 * records passed in are only read.
 */
struct volume_rec {
    char handle[VOLUME_HANDLE_MAX + 1];
    char *parent;  /* NULL when none */
    char **layers; /* frozen lower layers, relative to <root>/volumes, top-most first */
    size_t n_layers;
    struct volume_prop *props; /* sorted by key */
    size_t n_props;
    int64_t created_at; /* unix seconds */
    int64_t ttl_s;      /* 0: none */
    int64_t expires_at; /* 0: never */
    bool privileged;
    int64_t mounts;   /* output: containers mounting it */
    int64_t children; /* output: volumes whose parent it is */
};

void volume_rec_free(struct volume_rec *v);
void volume_rec_list_free(struct volume_rec **v, size_t n);

/* Creates the tables if they are missing. */
int vmeta_init(struct meta *m, struct err *err);

/*
 * Inserts rec (handle taken: EEXIST). When parent_layers is not NULL,
 * the parent's (rec->parent) layer list is replaced by it in the same
 * transaction (creating a child freezes the parent's upper layer); a
 * parent that is gone fails with ENOENT, one mounted by a container with
 * ERR_CONFLICT.
 */
int vmeta_insert(struct meta *m, const struct volume_rec *rec, char *const *parent_layers,
                 size_t n_parent_layers, struct err *err);

/* One volume (ENOENT when unknown). */
int vmeta_get(struct meta *m, const char *handle, struct volume_rec **out, struct err *err);

/* Every volume, oldest first. *out is NULL when there are none. */
int vmeta_list(struct meta *m, struct volume_rec ***out, size_t *n, struct err *err);
/* How many volumes there are. */
int vmeta_count(struct meta *m, int64_t *n, struct err *err);

/*
 * Applies a patch: props set (value) or removed (value NULL); ttl_s >= 0
 * sets the TTL from now (0 removes it), < 0 leaves it. ENOENT when unknown.
 */
int vmeta_patch(struct meta *m, const char *handle, const struct volume_prop *props, size_t n_props,
                int64_t ttl_s, int64_t now, struct err *err);

/*
 * Deletes a volume's records. Without force: ERR_CONFLICT while it is
 * mounted or has children. With force: its descendants go too, mounted
 * or not. *deleted gets the handles removed (caller frees each and the
 * array), descendants before their parents.
 */
int vmeta_delete(struct meta *m, const char *handle, bool force, char ***deleted, size_t *n,
                 struct err *err);

/* A volume vmeta_expired found expired: its handle, and its creation time
 * to tell it from a volume that took the same handle since. */
struct volume_expiry {
    char handle[VOLUME_HANDLE_MAX + 1];
    int64_t created_at;
};

/*
 * As vmeta_delete without force, for the TTL sweep: deletes e's volume
 * only if, in the same transaction, it is still the one listed (same
 * creation time) and still expired at now. ENOENT when the handle is
 * gone, ESTALE when it names a volume created since or one whose TTL was
 * renewed or removed; either way nothing is deleted.
 */
int vmeta_delete_expired(struct meta *m, const struct volume_expiry *e, int64_t now,
                         char ***deleted, size_t *n, struct err *err);

/* Mount records (a container id per mount). add: ENOENT if the volume is
 * unknown; adding twice is a no-op. remove: ENOENT if not recorded. */
int vmeta_mount_add(struct meta *m, const char *handle, const char *user_id, bool readonly,
                    struct err *err);
int vmeta_mount_remove(struct meta *m, const char *handle, const char *user_id, struct err *err);

/* The volumes expired at now, soonest expired first (*out: caller frees;
 * NULL when none), and the earliest expiry still ahead (0: none). */
int vmeta_expired(struct meta *m, int64_t now, struct volume_expiry **out, size_t *n, int64_t *next,
                  struct err *err);

#endif
