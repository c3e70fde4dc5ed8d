/*
 * Image records in the metadata database (store/meta.h): names, layers,
 * blobs and their references, lookups by digest, prefix or name, delete
 * and prune. Each public function is one transaction under meta.c's
 * mutex (store/meta_int.h). Pool threads; blocks on disk.
 */
#include "store/meta.h"
#include "store/meta_int.h"

#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/randid.h"
#include "store/db.h"

/* ---- images ------------------------------------------------------------ */

void
meta_image_free(struct meta_image *img)
{
    if (!img)
        return;
    for (size_t i = 0; i < img->n_names; i++)
        free(img->names[i]);
    free(img->names);
    free(img->platform.os);
    free(img->platform.architecture);
    free(img->platform.variant);
    free(img->platform.os_version);
    free(img->layers);
    free(img);
}

void
meta_image_list_free(struct meta_image **imgs, size_t n)
{
    if (!imgs)
        return;
    for (size_t i = 0; i < n; i++)
        meta_image_free(imgs[i]);
    free(imgs);
}

/* True when ref is a hex prefix (12+ digits, "sha256:" optional); *hex points at the digits. */
static bool
ref_is_prefix(const char *ref, const char **hex)
{
    if (strncmp(ref, DIGEST_PREFIX, DIGEST_PREFIX_LEN) == 0)
        ref += DIGEST_PREFIX_LEN;
    *hex = ref;
    return digest_hex_valid(ref, 12);
}

/*
 * Resolves ref to an image digest: a full digest, a name, a hex prefix.
 * *by_name (may be NULL) says whether it was a name.
 */
/*
 * The image whose config digest is ref (exact) or starts with the hex
 * prefix hex (ref NULL): Docker's image IDs are config digests. Several
 * images may share a config (one image imported as a docker save archive
 * and as an OCI layout): the latest one is taken; distinct configs under
 * one prefix are ambiguous.
 */
static int
resolve_config(sqlite3 *db, const char *ref, const char *hex, const char *what,
               char out[DIGEST_STR_LEN], struct err *err)
{
    cleanup_stmt sqlite3_stmt *st = NULL;
    char pattern[DIGEST_STR_LEN + 2];
    if (!ref)
        snprintf(pattern, sizeof(pattern), DIGEST_PREFIX "%s*", hex);
    int ret = db_prepare(db, &st, err,
                         ref ? "SELECT digest, config_digest FROM images WHERE config_digest = ? "
                               "ORDER BY created_at DESC, digest"
                             : "SELECT digest, config_digest FROM images WHERE config_digest GLOB "
                               "? ORDER BY created_at DESC, digest",
                         "t", ref ? ref : pattern);
    if (ret < 0)
        return ret;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return err_set(err, ENOENT, "image %s: not found", what);
    if (rc != SQLITE_ROW)
        return db_err(db, rc, err, "read images");
    meta_copy_digest(out, sqlite3_column_text(st, 0));
    char config[DIGEST_STR_LEN];
    meta_copy_digest(config, sqlite3_column_text(st, 1));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        if (strcmp((const char *)sqlite3_column_text(st, 1), config) != 0)
            return err_set(err, ERR_CONFLICT,
                           "image %s: ambiguous prefix, matches the configs %s and %s at least; "
                           "give more digits",
                           what, config, (const char *)sqlite3_column_text(st, 1));
    return rc == SQLITE_DONE ? 0 : db_err(db, rc, err, "read images");
}

/* The image ref names: a manifest digest, a name, a prefix of a manifest
 * digest, or else a config digest or a prefix of one (Docker's image IDs). */
static int
image_resolve(sqlite3 *db, const char *ref, char out[DIGEST_STR_LEN], bool *by_name,
              struct err *err)
{
    cleanup_stmt sqlite3_stmt *st = NULL;
    int ret, rc;
    const char *hex = NULL;
    if (by_name)
        *by_name = false;
    if (!ref || !*ref)
        return err_set(err, EINVAL, "image reference is empty");
    if (digest_valid(ref)) {
        ret = db_prepare(db, &st, err, "SELECT digest FROM images WHERE digest = ?", "t", ref);
    } else {
        ret = db_prepare(db, &st, err, "SELECT image FROM image_names WHERE name = ?", "t", ref);
        if (ret < 0)
            return ret;
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            meta_copy_digest(out, sqlite3_column_text(st, 0));
            if (by_name)
                *by_name = true;
            return 0;
        }
        if (rc != SQLITE_DONE)
            return db_err(db, rc, err, "read image names");
        sqlite3_finalize(steal_ptr(&st));
        if (!ref_is_prefix(ref, &hex))
            return err_set(err, ENOENT, "image %s: not found", ref);
        char pattern[DIGEST_STR_LEN + 2];
        snprintf(pattern, sizeof(pattern), DIGEST_PREFIX "%s*", hex);
        ret = db_prepare(db, &st, err,
                         "SELECT digest FROM images WHERE digest GLOB ? ORDER BY digest LIMIT 2",
                         "t", pattern);
    }
    if (ret < 0)
        return ret;
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return resolve_config(db, hex ? NULL : ref, hex, ref, out, err);
    if (rc != SQLITE_ROW)
        return db_err(db, rc, err, "read images");
    meta_copy_digest(out, sqlite3_column_text(st, 0));
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        return err_set(err, ERR_CONFLICT,
                       "image %s: ambiguous prefix, matches %s and %s at least; give more digits",
                       ref, out, (const char *)sqlite3_column_text(st, 0));
    if (rc != SQLITE_DONE)
        return db_err(db, rc, err, "read images");
    return 0;
}

static int
image_load(sqlite3 *db, const char *digest, struct meta_image **out, struct err *err)
{
    struct meta_image *img = calloc(1, sizeof(*img));
    cleanup_stmt sqlite3_stmt *st = NULL;
    int ret, rc;
    if (!img)
        return err_set(err, ENOMEM, "image %s: out of memory", digest);
    ret = db_prepare(db, &st, err,
                     "SELECT config_digest, os, architecture, variant, os_version, size_bytes,"
                     " unpacked_bytes, created_at, last_used_at FROM images WHERE digest = ?",
                     "t", digest);
    if (ret < 0)
        goto fail;
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        ret = rc == SQLITE_DONE ? err_set(err, ENOENT, "image %s: not found", digest)
                                : db_err(db, rc, err, "read image");
        goto fail;
    }
    snprintf(img->digest, sizeof(img->digest), "%s", digest);
    meta_copy_digest(img->config_digest, sqlite3_column_text(st, 0));
    img->platform.os = db_text_dup(st, 1);
    img->platform.architecture = db_text_dup(st, 2);
    img->platform.variant = db_text_dup(st, 3);
    img->platform.os_version = db_text_dup(st, 4);
    img->size_bytes = sqlite3_column_int64(st, 5);
    img->unpacked_bytes = sqlite3_column_int64(st, 6);
    img->created_at = sqlite3_column_int64(st, 7);
    img->last_used_at = sqlite3_column_int64(st, 8);
    sqlite3_finalize(steal_ptr(&st));
    if (!img->platform.os || !img->platform.architecture || !img->platform.variant ||
        !img->platform.os_version)
        goto oom;

    ret = db_prepare(db, &st, err, "SELECT name FROM image_names WHERE image = ? ORDER BY name",
                     "t", digest);
    if (ret < 0)
        goto fail;
    size_t cap = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (img->n_names == cap) {
            cap = cap ? cap * 2 : 4;
            char **n = realloc(img->names, cap * sizeof(*n));
            if (!n)
                goto oom;
            img->names = n;
        }
        if (!(img->names[img->n_names] = db_text_dup(st, 0)))
            goto oom;
        img->n_names++;
    }
    if (rc != SQLITE_DONE) {
        ret = db_err(db, rc, err, "read image names");
        goto fail;
    }
    sqlite3_finalize(steal_ptr(&st));

    ret = db_prepare(db, &st, err,
                     "SELECT l.digest, l.diff_id, l.size, l.chain_id, coalesce(s.size_bytes, 0)"
                     " FROM image_layers l LEFT JOIN snapshots s ON s.chain_id = l.chain_id"
                     " WHERE l.image = ? ORDER BY l.idx",
                     "t", digest);
    if (ret < 0)
        goto fail;
    cap = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (img->n_layers == cap) {
            cap = cap ? cap * 2 : 8;
            struct meta_layer *l = realloc(img->layers, cap * sizeof(*l));
            if (!l)
                goto oom;
            img->layers = l;
        }
        struct meta_layer *l = &img->layers[img->n_layers++];
        meta_copy_digest(l->digest, sqlite3_column_text(st, 0));
        meta_copy_digest(l->diff_id, sqlite3_column_text(st, 1));
        l->size = sqlite3_column_int64(st, 2);
        meta_copy_digest(l->chain_id, sqlite3_column_text(st, 3));
        l->unpacked_size = sqlite3_column_int64(st, 4);
    }
    if (rc != SQLITE_DONE) {
        ret = db_err(db, rc, err, "read image layers");
        goto fail;
    }
    ret = db_int(db, &img->users, NULL, err, "SELECT count(*) FROM image_users WHERE image = ?",
                 "t", digest);
    if (ret < 0)
        goto fail;
    *out = img;
    return 0;
oom:
    ret = err_set(err, ENOMEM, "image %s: out of memory", digest);
fail:
    meta_image_free(img);
    return ret;
}

static int
image_validate(const struct meta_image *img, const char *name, struct err *err)
{
    if (!digest_valid(img->digest))
        return err_set(err, EINVAL, "image: invalid digest '%s'", img->digest);
    if (!digest_valid(img->config_digest))
        return err_set(err, EINVAL, "image %s: invalid config digest '%s'", img->digest,
                       img->config_digest);
    if (!meta_text_valid(img->platform.os, 64) || !meta_text_valid(img->platform.architecture, 64))
        return err_set(err, EINVAL, "image %s: platform os and architecture are required",
                       img->digest);
    if (img->size_bytes < 0 || img->unpacked_bytes < 0)
        return err_set(err, EINVAL, "image %s: negative size", img->digest);
    if (name && !meta_text_valid(name, META_NAME_MAX))
        return err_set(err, EINVAL, "image %s: invalid name '%s'", img->digest, name);
    const char *parent = NULL;
    for (size_t i = 0; i < img->n_layers; i++) {
        const struct meta_layer *l = &img->layers[i];
        char chain[DIGEST_STR_LEN];
        if (!digest_valid(l->digest) || l->size < 0 || l->unpacked_size < 0)
            return err_set(err, EINVAL, "image %s: layer %zu: invalid digest or size", img->digest,
                           i);
        int ret = digest_chain_id(parent, l->diff_id, chain, err);
        if (ret < 0)
            return err_wrap(err, "image %s: layer %zu", img->digest, i);
        if (strcmp(chain, l->chain_id) != 0)
            return err_set(err, EINVAL, "image %s: layer %zu: chain id %s should be %s",
                           img->digest, i, l->chain_id, chain);
        parent = l->chain_id;
    }
    for (size_t i = 0; i < img->n_blobs; i++)
        if (!digest_valid(img->blobs[i].digest) || img->blobs[i].size < 0)
            return err_set(err, EINVAL, "image %s: blob %zu: invalid digest or size", img->digest,
                           i);
    for (size_t i = 0; i < img->n_refs; i++)
        if (!digest_valid(img->refs[i].parent) || !digest_valid(img->refs[i].child))
            return err_set(err, EINVAL, "image %s: blob reference %zu: invalid digest", img->digest,
                           i);
    return 0;
}

static int
name_set(sqlite3 *db, const char *name, const char *digest, struct err *err)
{
    return db_run(db, NULL, err,
                  "INSERT INTO image_names (name, image) VALUES (?, ?)"
                  " ON CONFLICT (name) DO UPDATE SET image = excluded.image",
                  "tt", name, digest);
}

int
meta_image_tag(struct meta *m, const char *ref, const char *name, char digest_out[DIGEST_STR_LEN],
               struct err *err)
{
    char digest[DIGEST_STR_LEN];
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = image_resolve(m->db, ref, digest, NULL, err);
    if (ret == 0)
        ret = name_set(m->db, name, digest, err);
    if (ret == 0 && digest_out)
        memcpy(digest_out, digest, DIGEST_STR_LEN);
    return meta_txn_end(m, ret, err);
}

static int
image_insert(sqlite3 *db, const struct meta_image *img, int64_t now, struct err *err)
{
    int ret = 0;
    for (size_t i = 0; i < img->n_blobs && ret == 0; i++)
        ret = db_run(db, NULL, err,
                     "INSERT INTO blobs (digest, size, media_type) VALUES (?, ?, ?)"
                     " ON CONFLICT (digest) DO UPDATE"
                     " SET media_type = coalesce(blobs.media_type, excluded.media_type)",
                     "tit", img->blobs[i].digest, img->blobs[i].size, img->blobs[i].media_type);
    for (size_t i = 0; i < img->n_refs && ret == 0; i++) {
        ret = db_run(db, NULL, err, "INSERT OR IGNORE INTO blob_refs (parent, child) VALUES (?, ?)",
                     "tt", img->refs[i].parent, img->refs[i].child);
        if (ret < 0)
            err_wrap(err, "blob reference %s -> %s (is the parent among the blobs?)",
                     img->refs[i].parent, img->refs[i].child);
    }
    if (ret == 0)
        ret = db_run(db, NULL, err,
                     "INSERT INTO images (digest, config_digest, os, architecture, variant,"
                     " os_version, size_bytes, unpacked_bytes, created_at, last_used_at)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     "ttttttiiii", img->digest, img->config_digest, img->platform.os,
                     img->platform.architecture, img->platform.variant ? img->platform.variant : "",
                     img->platform.os_version ? img->platform.os_version : "", img->size_bytes,
                     img->unpacked_bytes, img->created_at ? img->created_at : now,
                     img->last_used_at ? img->last_used_at : now);
    for (size_t i = 0; i < img->n_layers && ret == 0; i++) {
        const struct meta_layer *l = &img->layers[i];
        ret =
            db_run(db, NULL, err,
                   "INSERT INTO image_layers (image, idx, digest, diff_id, size, chain_id)"
                   " VALUES (?, ?, ?, ?, ?, ?)",
                   "tittit", img->digest, (int64_t)i, l->digest, l->diff_id, l->size, l->chain_id);
        if (ret == 0)
            ret = db_run(db, NULL, err,
                         "INSERT INTO snapshots (chain_id, parent, size_bytes, created_at)"
                         " VALUES (?, ?, ?, ?) ON CONFLICT (chain_id) DO UPDATE SET size_bytes ="
                         " CASE WHEN snapshots.size_bytes = 0 THEN excluded.size_bytes"
                         " ELSE snapshots.size_bytes END",
                         "ttii", l->chain_id, i > 0 ? img->layers[i - 1].chain_id : NULL,
                         l->unpacked_size, now);
    }
    return ret;
}

int
meta_image_put(struct meta *m, const struct meta_image *img, const char *name, bool *created,
               struct err *err)
{
    int ret = image_validate(img, name, err);
    if (ret < 0)
        return ret;
    int64_t now = meta_now_s();
    bool exists = false;
    int64_t unused;
    ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = db_int(m->db, &unused, &exists, err, "SELECT 1 FROM images WHERE digest = ?", "t",
                 img->digest);
    if (ret == 0 && exists)
        ret = db_run(m->db, NULL, err, "UPDATE images SET last_used_at = ? WHERE digest = ?", "it",
                     now, img->digest);
    else if (ret == 0)
        ret = image_insert(m->db, img, now, err);
    if (ret == 0 && name)
        ret = name_set(m->db, name, img->digest, err);
    ret = meta_txn_end(m, ret, err);
    if (ret < 0)
        return err_wrap(err, "record image %s", img->digest);
    if (created)
        *created = !exists;
    return 0;
}

int
meta_image_count(struct meta *m, int64_t *n, struct err *err)
{
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    return meta_txn_end(m, db_int(m->db, n, NULL, err, "SELECT COUNT(*) FROM images", ""), err);
}

int
meta_image_get(struct meta *m, const char *ref, struct meta_image **out, struct err *err)
{
    char digest[DIGEST_STR_LEN];
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = image_resolve(m->db, ref, digest, NULL, err);
    if (ret == 0)
        ret = image_load(m->db, digest, out, err);
    return meta_txn_end(m, ret, err);
}

static int
image_list_locked(sqlite3 *db, struct meta_image ***out, size_t *n, struct err *err)
{
    cleanup_stmt sqlite3_stmt *st = NULL;
    struct meta_image **imgs = NULL;
    size_t count = 0, cap = 0;
    int ret =
        db_prepare(db, &st, err, "SELECT digest FROM images ORDER BY created_at DESC, digest", "");
    if (ret < 0)
        return ret;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (count == cap) {
            cap = cap ? cap * 2 : 8;
            struct meta_image **ni = realloc(imgs, cap * sizeof(*ni));
            if (!ni) {
                ret = err_set(err, ENOMEM, "list images: out of memory");
                goto fail;
            }
            imgs = ni;
        }
        ret = image_load(db, (const char *)sqlite3_column_text(st, 0), &imgs[count], err);
        if (ret < 0)
            goto fail;
        count++;
    }
    if (rc != SQLITE_DONE) {
        ret = db_err(db, rc, err, "list images");
        goto fail;
    }
    *out = imgs;
    *n = count;
    return 0;
fail:
    meta_image_list_free(imgs, count);
    return ret;
}

int
meta_image_list(struct meta *m, struct meta_image ***out, size_t *n, struct err *err)
{
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    return meta_txn_end(m, image_list_locked(m->db, out, n, err), err);
}

int
meta_image_touch(struct meta *m, const char *ref, int64_t at, struct err *err)
{
    char digest[DIGEST_STR_LEN];
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = image_resolve(m->db, ref, digest, NULL, err);
    if (ret == 0)
        ret = db_run(m->db, NULL, err, "UPDATE images SET last_used_at = ? WHERE digest = ?", "it",
                     at ? at : meta_now_s(), digest);
    return meta_txn_end(m, ret, err);
}

static int
image_delete_locked(sqlite3 *db, const char *ref, char digest[DIGEST_STR_LEN], bool *removed,
                    struct err *err)
{
    bool by_name;
    int64_t count;
    int ret = image_resolve(db, ref, digest, &by_name, err);
    if (ret < 0)
        return ret;
    if (by_name) {
        ret = db_int(db, &count, NULL, err, "SELECT count(*) FROM image_names WHERE image = ?", "t",
                     digest);
        if (ret < 0)
            return ret;
        if (count > 1) {
            *removed = false;
            return db_run(db, NULL, err, "DELETE FROM image_names WHERE name = ?", "t", ref);
        }
    }
    ret = db_int(db, &count, NULL, err, "SELECT count(*) FROM image_users WHERE image = ?", "t",
                 digest);
    if (ret < 0)
        return ret;
    if (count > 0)
        return err_set(err, ERR_CONFLICT, "image %s: in use by %lld container%s", digest,
                       (long long)count, count == 1 ? "" : "s");
    *removed = true;
    return db_run(db, NULL, err, "DELETE FROM images WHERE digest = ?", "t", digest);
}

int
meta_image_delete(struct meta *m, const char *ref, char digest_out[DIGEST_STR_LEN],
                  bool *image_removed, struct err *err)
{
    char digest[DIGEST_STR_LEN];
    bool removed = false;
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = meta_txn_end(m, image_delete_locked(m->db, ref, digest, &removed, err), err);
    if (ret < 0)
        return ret;
    if (digest_out)
        memcpy(digest_out, digest, DIGEST_STR_LEN);
    if (image_removed)
        *image_removed = removed;
    return 0;
}

struct prune_candidate {
    char digest[DIGEST_STR_LEN];
    int64_t last_used_at;
    int64_t bytes;
};

static int
prune_locked(sqlite3 *db, int64_t unused_for_s, int64_t keep_bytes, int64_t now, char ***removed,
             size_t *n_removed, struct err *err)
{
    cleanup_stmt sqlite3_stmt *st = NULL;
    cleanup_free struct prune_candidate *cands = NULL;
    size_t n = 0, cap = 0;
    int64_t total = 0;
    int ret = db_int(db, &total, NULL, err,
                     "SELECT coalesce(sum(size_bytes + unpacked_bytes), 0) FROM images", "");
    if (ret < 0)
        return ret;
    ret = db_prepare(db, &st, err,
                     "SELECT digest, last_used_at, size_bytes + unpacked_bytes FROM images i"
                     " WHERE NOT EXISTS (SELECT 1 FROM image_users u WHERE u.image = i.digest)"
                     " AND NOT EXISTS (SELECT 1 FROM lease_blobs l WHERE l.digest = i.digest)"
                     " ORDER BY last_used_at, created_at, digest",
                     "");
    if (ret < 0)
        return ret;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            struct prune_candidate *nc = realloc(cands, cap * sizeof(*nc));
            if (!nc)
                return err_set(err, ENOMEM, "prune images: out of memory");
            cands = nc;
        }
        meta_copy_digest(cands[n].digest, sqlite3_column_text(st, 0));
        cands[n].last_used_at = sqlite3_column_int64(st, 1);
        cands[n].bytes = sqlite3_column_int64(st, 2);
        n++;
    }
    if (rc != SQLITE_DONE)
        return db_err(db, rc, err, "prune images");

    char **out = NULL;
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        if (keep_bytes >= 0 && total <= keep_bytes)
            break;
        if (unused_for_s >= 0 && now - cands[i].last_used_at <= unused_for_s)
            continue;
        ret = db_run(db, NULL, err, "DELETE FROM images WHERE digest = ?", "t", cands[i].digest);
        if (ret < 0)
            goto fail;
        char **no = realloc(out, (count + 1) * sizeof(*no));
        if (!no || !(no[count] = strdup(cands[i].digest))) {
            if (no)
                out = no;
            ret = err_set(err, ENOMEM, "prune images: out of memory");
            goto fail;
        }
        out = no;
        count++;
        total -= cands[i].bytes;
    }
    *removed = out;
    *n_removed = count;
    return 0;
fail:
    for (size_t i = 0; i < count; i++)
        free(out[i]);
    free(out);
    return ret;
}

int
meta_prune_images(struct meta *m, int64_t unused_for_s, int64_t keep_bytes, int64_t now,
                  char ***removed, size_t *n_removed, struct err *err)
{
    char **out = NULL;
    size_t count = 0;
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret =
        prune_locked(m->db, unused_for_s, keep_bytes, now ? now : meta_now_s(), &out, &count, err);
    ret = meta_txn_end(m, ret, err);
    if (ret < 0) {
        for (size_t i = 0; i < count; i++)
            free(out[i]);
        free(out);
        return ret;
    }
    *removed = out;
    *n_removed = count;
    return 0;
}
