/*
 * The metadata database in SQLite (<root>/meta.db). Called from pool jobs;
 * blocks on disk.
 *
 * One connection, one mutex: every public function takes the mutex, runs
 * one BEGIN IMMEDIATE ... COMMIT transaction and lets go, so callers never
 * see or leave a half-written state, and gc.c can hold the same mutex
 * across its mark and sweep (meta_run_locked). SQLite itself could
 * serialise us, but an explicit mutex makes "one transaction per call"
 * hold across threads without relying on busy handlers.
 *
 * Durability: WAL with synchronous=FULL. In WAL mode NORMAL would stay
 * consistent but could lose the last commits on power loss; an import
 * that the API acknowledged must not be forgotten, and one fsync of the
 * WAL per commit is nothing next to hashing and unpacking the layers.
 *
 * The schema is versioned as every component's is (store/db.h's
 * db_migrate, component "meta"); migrations run in meta_open, inside a
 * transaction.
 */
#include "store/meta.h"

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

#define META_NAME_MAX 512
#define META_USER_MAX 256

struct meta {
    sqlite3 *db;
    pthread_mutex_t lock;
};

static const char schema_v1[] =
    "CREATE TABLE images ("
    "  digest TEXT PRIMARY KEY,"
    "  config_digest TEXT NOT NULL,"
    "  os TEXT NOT NULL,"
    "  architecture TEXT NOT NULL,"
    "  variant TEXT NOT NULL DEFAULT '',"
    "  os_version TEXT NOT NULL DEFAULT '',"
    "  size_bytes INTEGER NOT NULL,"
    "  unpacked_bytes INTEGER NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  last_used_at INTEGER NOT NULL"
    ") WITHOUT ROWID;"
    "CREATE TABLE image_layers ("
    "  image TEXT NOT NULL REFERENCES images(digest) ON DELETE CASCADE,"
    "  idx INTEGER NOT NULL,"
    "  digest TEXT NOT NULL,"
    "  diff_id TEXT NOT NULL,"
    "  size INTEGER NOT NULL,"
    "  chain_id TEXT NOT NULL,"
    "  PRIMARY KEY (image, idx)"
    ") WITHOUT ROWID;"
    "CREATE INDEX image_layers_chain ON image_layers(chain_id);"
    "CREATE TABLE image_names ("
    "  name TEXT PRIMARY KEY,"
    "  image TEXT NOT NULL REFERENCES images(digest) ON DELETE CASCADE"
    ") WITHOUT ROWID;"
    "CREATE INDEX image_names_image ON image_names(image);"
    /* No cascade: an image with users cannot be deleted. */
    "CREATE TABLE image_users ("
    "  image TEXT NOT NULL REFERENCES images(digest),"
    "  user_id TEXT NOT NULL,"
    "  PRIMARY KEY (image, user_id)"
    ") WITHOUT ROWID;"
    "CREATE TABLE blobs ("
    "  digest TEXT PRIMARY KEY,"
    "  size INTEGER NOT NULL,"
    "  media_type TEXT"
    ") WITHOUT ROWID;"
    "CREATE TABLE blob_refs ("
    "  parent TEXT NOT NULL REFERENCES blobs(digest) ON DELETE CASCADE,"
    "  child TEXT NOT NULL,"
    "  PRIMARY KEY (parent, child)"
    ") WITHOUT ROWID;"
    "CREATE TABLE snapshots ("
    "  chain_id TEXT PRIMARY KEY,"
    "  parent TEXT,"
    "  size_bytes INTEGER NOT NULL,"
    "  created_at INTEGER NOT NULL"
    ") WITHOUT ROWID;"
    "CREATE TABLE snapshot_users ("
    "  chain_id TEXT NOT NULL REFERENCES snapshots(chain_id),"
    "  user_id TEXT NOT NULL,"
    "  PRIMARY KEY (chain_id, user_id)"
    ") WITHOUT ROWID;"
    /* Lease rows name digests and chain IDs that may have no row yet. */
    "CREATE TABLE leases ("
    "  id TEXT PRIMARY KEY,"
    "  created_at INTEGER NOT NULL"
    ") WITHOUT ROWID;"
    "CREATE TABLE lease_blobs ("
    "  lease TEXT NOT NULL REFERENCES leases(id) ON DELETE CASCADE,"
    "  digest TEXT NOT NULL,"
    "  PRIMARY KEY (lease, digest)"
    ") WITHOUT ROWID;"
    "CREATE TABLE lease_snapshots ("
    "  lease TEXT NOT NULL REFERENCES leases(id) ON DELETE CASCADE,"
    "  chain_id TEXT NOT NULL,"
    "  PRIMARY KEY (lease, chain_id)"
    ") WITHOUT ROWID;";

static void
copy_digest(char dst[DIGEST_STR_LEN], const unsigned char *src)
{
    snprintf(dst, DIGEST_STR_LEN, "%s", src ? (const char *)src : "");
}

static int64_t
now_s(void)
{
    return (int64_t)time(NULL);
}

/* ---- transactions ------------------------------------------------------ */

/* One transaction at a time on the one connection. */
static int
txn_begin(struct meta *m, struct err *err)
{
    pthread_mutex_lock(&m->lock);
    int ret = db_txn_begin(m->db, err);
    if (ret < 0)
        pthread_mutex_unlock(&m->lock);
    return ret;
}

/* Commits when ret is 0, rolls back otherwise; returns ret or the commit error. */
static int
txn_end(struct meta *m, int ret, struct err *err)
{
    ret = db_txn_end(m->db, ret, err);
    pthread_mutex_unlock(&m->lock);
    return ret;
}

int
meta_run_locked(struct meta *m, meta_locked_fn fn, void *ctx, struct err *err)
{
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    return txn_end(m, fn((struct sqlite3 *)m->db, ctx, err), err);
}

/* ---- open and close ---------------------------------------------------- */

static int
migrate(sqlite3 *db, struct err *err)
{
    /* Before schema_versions, the version was PRAGMA user_version. */
    static const char *const steps[] = {schema_v1};
    static const struct db_schema schema = {.component = "meta",
                                            .steps = steps,
                                            .n_steps = sizeof(steps) / sizeof(steps[0]),
                                            .legacy_user_version = true};
    int ret = db_txn_begin(db, err);
    return ret < 0 ? ret : db_txn_end(db, db_migrate(db, &schema, err), err);
}

void
meta_close(struct meta *m)
{
    if (!m)
        return;
    sqlite3_close(m->db);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

int
meta_open(const char *root, struct meta **out, struct err *err)
{
    int ret = fs_mkdir_p(root, 0700, err);
    if (ret < 0)
        return err_wrap(err, "open metadata");
    cleanup_free char *path = fs_path_join(root, "meta.db");
    cleanup_stmt sqlite3_stmt *st = NULL;
    struct meta *m = calloc(1, sizeof(*m));
    if (!path || !m) {
        free(m);
        return err_set(err, ENOMEM, "open metadata: out of memory");
    }
    pthread_mutex_init(&m->lock, NULL);
    /* SQLite creates the database with 0644 less the umask, and its -wal
     * and -shm files with the database's mode: make it 0600 first (and
     * take back what an older daemon left readable). */
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        cleanup_free char *p = NULL;
        if (asprintf(&p, "%s%s", path, suffixes[i]) < 0) {
            p = NULL;
            continue;
        }
        cleanup_close int fd =
            open(p, O_RDWR | O_NOFOLLOW | O_CLOEXEC | (i == 0 ? O_CREAT : 0), 0600);
        if (fd >= 0 && fchmod(fd, 0600) < 0)
            log_warn("open metadata: chmod %s: %s", p, strerror(errno));
    }
    int rc = sqlite3_open_v2(
        path, &m->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
    if (rc != SQLITE_OK) {
        ret = err_set(err, db_code_of(rc), "open metadata %s: %s", path,
                      m->db ? sqlite3_errmsg(m->db) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_extended_result_codes(m->db, 1);
    sqlite3_busy_timeout(m->db, 5000);
    ret = db_prepare(m->db, &st, err, "PRAGMA journal_mode = WAL", "");
    if (ret < 0)
        goto fail;
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW || strcmp((const char *)sqlite3_column_text(st, 0), "wal") != 0) {
        ret = err_set(err, EIO, "open metadata %s: cannot switch to WAL mode", path);
        goto fail;
    }
    sqlite3_finalize(steal_ptr(&st));
    ret = db_exec(m->db, "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON", err);
    if (ret == 0)
        ret = migrate(m->db, err);
    if (ret < 0) {
        err_wrap(err, "open metadata %s", path);
        goto fail;
    }
    *out = m;
    return 0;
fail:
    sqlite3_finalize(steal_ptr(&st));
    meta_close(m);
    return ret;
}

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

static bool
text_valid(const char *s, size_t max)
{
    if (!s || !*s)
        return false;
    size_t n = 0;
    for (; s[n]; n++)
        if ((unsigned char)s[n] < 0x20 || s[n] == 0x7f)
            return false;
    return n <= max;
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
static int
image_resolve(sqlite3 *db, const char *ref, char out[DIGEST_STR_LEN], bool *by_name,
              struct err *err)
{
    cleanup_stmt sqlite3_stmt *st = NULL;
    int ret, rc;
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
            copy_digest(out, sqlite3_column_text(st, 0));
            if (by_name)
                *by_name = true;
            return 0;
        }
        if (rc != SQLITE_DONE)
            return db_err(db, rc, err, "read image names");
        sqlite3_finalize(steal_ptr(&st));
        const char *hex;
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
        return err_set(err, ENOENT, "image %s: not found", ref);
    if (rc != SQLITE_ROW)
        return db_err(db, rc, err, "read images");
    copy_digest(out, sqlite3_column_text(st, 0));
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
    copy_digest(img->config_digest, sqlite3_column_text(st, 0));
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
        copy_digest(l->digest, sqlite3_column_text(st, 0));
        copy_digest(l->diff_id, sqlite3_column_text(st, 1));
        l->size = sqlite3_column_int64(st, 2);
        copy_digest(l->chain_id, sqlite3_column_text(st, 3));
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
    if (!text_valid(img->platform.os, 64) || !text_valid(img->platform.architecture, 64))
        return err_set(err, EINVAL, "image %s: platform os and architecture are required",
                       img->digest);
    if (img->size_bytes < 0 || img->unpacked_bytes < 0)
        return err_set(err, EINVAL, "image %s: negative size", img->digest);
    if (name && !text_valid(name, META_NAME_MAX))
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
    int64_t now = now_s();
    bool exists = false;
    int64_t unused;
    ret = txn_begin(m, err);
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
    ret = txn_end(m, ret, err);
    if (ret < 0)
        return err_wrap(err, "record image %s", img->digest);
    if (created)
        *created = !exists;
    return 0;
}

int
meta_image_count(struct meta *m, int64_t *n, struct err *err)
{
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    return txn_end(m, db_int(m->db, n, NULL, err, "SELECT COUNT(*) FROM images", ""), err);
}

int
meta_image_get(struct meta *m, const char *ref, struct meta_image **out, struct err *err)
{
    char digest[DIGEST_STR_LEN];
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = image_resolve(m->db, ref, digest, NULL, err);
    if (ret == 0)
        ret = image_load(m->db, digest, out, err);
    return txn_end(m, ret, err);
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
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    return txn_end(m, image_list_locked(m->db, out, n, err), err);
}

int
meta_image_touch(struct meta *m, const char *ref, int64_t at, struct err *err)
{
    char digest[DIGEST_STR_LEN];
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = image_resolve(m->db, ref, digest, NULL, err);
    if (ret == 0)
        ret = db_run(m->db, NULL, err, "UPDATE images SET last_used_at = ? WHERE digest = ?", "it",
                     at ? at : now_s(), digest);
    return txn_end(m, ret, err);
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
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = txn_end(m, image_delete_locked(m->db, ref, digest, &removed, err), err);
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
        copy_digest(cands[n].digest, sqlite3_column_text(st, 0));
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
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = prune_locked(m->db, unused_for_s, keep_bytes, now ? now : now_s(), &out, &count, err);
    ret = txn_end(m, ret, err);
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

/* ---- users --------------------------------------------------------------- */

static int
require_row(sqlite3 *db, const char *sql, const char *key, const char *what, struct err *err)
{
    bool found;
    int64_t unused;
    int ret = db_int(db, &unused, &found, err, sql, "t", key);
    if (ret == 0 && !found)
        ret = err_set(err, ENOENT, "%s %s: not found", what, key);
    return ret;
}

int
meta_image_use_add(struct meta *m, const char *image_digest, const char *user_id, struct err *err)
{
    if (!digest_valid(image_digest) || !text_valid(user_id, META_USER_MAX))
        return err_set(err, EINVAL, "add image user: invalid image digest or user id");
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = require_row(m->db, "SELECT 1 FROM images WHERE digest = ?", image_digest, "image", err);
    if (ret == 0)
        ret = db_run(m->db, NULL, err,
                     "INSERT OR IGNORE INTO image_users (image, user_id) VALUES (?, ?)", "tt",
                     image_digest, user_id);
    return txn_end(m, ret, err);
}

int
meta_image_use_remove(struct meta *m, const char *image_digest, const char *user_id,
                      struct err *err)
{
    int changes = 0;
    if (!digest_valid(image_digest) || !text_valid(user_id, META_USER_MAX))
        return err_set(err, EINVAL, "remove image user: invalid image digest or user id");
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = db_run(m->db, &changes, err, "DELETE FROM image_users WHERE image = ? AND user_id = ?",
                 "tt", image_digest, user_id);
    if (ret == 0 && changes == 0)
        ret = err_set(err, ENOENT, "image %s: %s is not a user", image_digest, user_id);
    return txn_end(m, ret, err);
}

int
meta_image_use_count(struct meta *m, const char *image_digest, int64_t *count, struct err *err)
{
    if (!digest_valid(image_digest))
        return err_set(err, EINVAL, "count image users: invalid digest '%s'",
                       image_digest ? image_digest : "");
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = db_int(m->db, count, NULL, err, "SELECT count(*) FROM image_users WHERE image = ?", "t",
                 image_digest);
    return txn_end(m, ret, err);
}

/* ---- snapshots ----------------------------------------------------------- */

int
meta_snapshot_exists(struct meta *m, const char *chain_id, bool *exists, struct err *err)
{
    if (!digest_valid(chain_id))
        return err_set(err, EINVAL, "snapshot: invalid chain id '%s'", chain_id ? chain_id : "");
    int64_t unused;
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = db_int(m->db, &unused, exists, err, "SELECT 1 FROM snapshots WHERE chain_id = ?", "t",
                 chain_id);
    return txn_end(m, ret, err);
}

int
meta_snapshot_size(struct meta *m, const char *chain_id, int64_t *size, bool *exists,
                   struct err *err)
{
    if (!digest_valid(chain_id))
        return err_set(err, EINVAL, "snapshot: invalid chain id '%s'", chain_id ? chain_id : "");
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    *size = 0;
    ret = db_int(m->db, size, exists, err, "SELECT size_bytes FROM snapshots WHERE chain_id = ?",
                 "t", chain_id);
    return txn_end(m, ret, err);
}

int
meta_snapshot_put(struct meta *m, const char *chain_id, const char *parent, int64_t size_bytes,
                  struct err *err)
{
    if (!digest_valid(chain_id) || (parent && !digest_valid(parent)) || size_bytes < 0)
        return err_set(err, EINVAL, "record snapshot %s: invalid chain id, parent or size",
                       chain_id ? chain_id : "");
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = db_run(m->db, NULL, err,
                 "INSERT OR IGNORE INTO snapshots (chain_id, parent, size_bytes, created_at)"
                 " VALUES (?, ?, ?, ?)",
                 "ttii", chain_id, parent, size_bytes, now_s());
    return txn_end(m, ret, err);
}

int
meta_snapshot_use_add(struct meta *m, const char *chain_id, const char *user_id, struct err *err)
{
    if (!digest_valid(chain_id) || !text_valid(user_id, META_USER_MAX))
        return err_set(err, EINVAL, "add snapshot user: invalid chain id or user id");
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret =
        require_row(m->db, "SELECT 1 FROM snapshots WHERE chain_id = ?", chain_id, "snapshot", err);
    if (ret == 0)
        ret = db_run(m->db, NULL, err,
                     "INSERT OR IGNORE INTO snapshot_users (chain_id, user_id) VALUES (?, ?)", "tt",
                     chain_id, user_id);
    return txn_end(m, ret, err);
}

int
meta_snapshot_use_remove(struct meta *m, const char *chain_id, const char *user_id, struct err *err)
{
    int changes = 0;
    if (!digest_valid(chain_id) || !text_valid(user_id, META_USER_MAX))
        return err_set(err, EINVAL, "remove snapshot user: invalid chain id or user id");
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = db_run(m->db, &changes, err,
                 "DELETE FROM snapshot_users WHERE chain_id = ? AND user_id = ?", "tt", chain_id,
                 user_id);
    if (ret == 0 && changes == 0)
        ret = err_set(err, ENOENT, "snapshot %s: %s is not a user", chain_id, user_id);
    return txn_end(m, ret, err);
}

/* ---- leases -------------------------------------------------------------- */

int
meta_lease_new(struct meta *m, char id_out[META_LEASE_ID_LEN], struct err *err)
{
    char id[META_LEASE_ID_LEN];
    if (randid_hex(id, 16, err) < 0)
        return err_wrap(err, "new lease");
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = db_run(m->db, NULL, err, "INSERT INTO leases (id, created_at) VALUES (?, ?)", "ti", id,
                 now_s());
    ret = txn_end(m, ret, err);
    if (ret < 0)
        return err_wrap(err, "new lease");
    memcpy(id_out, id, META_LEASE_ID_LEN);
    return 0;
}

static int
lease_add(struct meta *m, const char *lease_id, const char *sql, const char *key, struct err *err)
{
    if (!lease_id || !digest_valid(key))
        return err_set(err, EINVAL, "lease %s: invalid digest '%s'", lease_id ? lease_id : "",
                       key ? key : "");
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = require_row(m->db, "SELECT 1 FROM leases WHERE id = ?", lease_id, "lease", err);
    if (ret == 0)
        ret = db_run(m->db, NULL, err, sql, "tt", lease_id, key);
    return txn_end(m, ret, err);
}

int
meta_lease_add_blob(struct meta *m, const char *lease_id, const char *digest, struct err *err)
{
    return lease_add(m, lease_id, "INSERT OR IGNORE INTO lease_blobs (lease, digest) VALUES (?, ?)",
                     digest, err);
}

int
meta_lease_add_snapshot(struct meta *m, const char *lease_id, const char *chain_id, struct err *err)
{
    return lease_add(m, lease_id,
                     "INSERT OR IGNORE INTO lease_snapshots (lease, chain_id) VALUES (?, ?)",
                     chain_id, err);
}

int
meta_lease_remove(struct meta *m, const char *lease_id, struct err *err)
{
    if (!lease_id)
        return err_set(err, EINVAL, "remove lease: no id");
    int changes = 0;
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = db_run(m->db, &changes, err, "DELETE FROM leases WHERE id = ?", "t", lease_id);
    if (ret == 0 && changes == 0)
        ret = err_set(err, ENOENT, "lease %s: not found", lease_id);
    return txn_end(m, ret, err);
}

int
meta_lease_clear_all(struct meta *m, struct err *err)
{
    int ret = txn_begin(m, err);
    if (ret < 0)
        return ret;
    return txn_end(m, db_run(m->db, NULL, err, "DELETE FROM leases", ""), err);
}
