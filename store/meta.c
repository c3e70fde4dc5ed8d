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
#include "common/osfs.h"
#include "common/rootdir.h"
#include "common/log.h"
#include "common/randid.h"
#include "store/db.h"

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

void
meta_copy_digest(char dst[DIGEST_STR_LEN], const unsigned char *src)
{
    snprintf(dst, DIGEST_STR_LEN, "%s", src ? (const char *)src : "");
}

int64_t
meta_now_s(void)
{
    return (int64_t)time(NULL);
}

bool
meta_text_valid(const char *s, size_t max)
{
    if (!s || !*s)
        return false;
    size_t n = 0;
    for (; s[n]; n++)
        if ((unsigned char)s[n] < 0x20 || s[n] == 0x7f)
            return false;
    return n <= max;
}

/* ---- transactions ------------------------------------------------------ */

int
meta_txn_begin(struct meta *m, struct err *err)
{
    pthread_mutex_lock(&m->lock);
    int ret = db_txn_begin(m->db, err);
    if (ret < 0)
        pthread_mutex_unlock(&m->lock);
    return ret;
}

int
meta_txn_end(struct meta *m, int ret, struct err *err)
{
    ret = db_txn_end(m->db, ret, err);
    pthread_mutex_unlock(&m->lock);
    return ret;
}

int
meta_run_locked(struct meta *m, meta_locked_fn fn, void *ctx, struct err *err)
{
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    return meta_txn_end(m, fn((struct sqlite3 *)m->db, ctx, err), err);
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
        cleanup_close int fd = osfs_open(p, O_RDWR | OSFS_NOFOLLOW | (i == 0 ? O_CREAT : 0), 0600);
        int r = fd >= 0 ? rootdir_fd_set_mode(fd, 0600) : 0;
        if (r < 0)
            log_warn("open metadata: chmod %s: %s", p, strerror(-r));
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
    if (!digest_valid(image_digest) || !meta_text_valid(user_id, META_USER_MAX))
        return err_set(err, EINVAL, "add image user: invalid image digest or user id");
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = require_row(m->db, "SELECT 1 FROM images WHERE digest = ?", image_digest, "image", err);
    if (ret == 0)
        ret = db_run(m->db, NULL, err,
                     "INSERT OR IGNORE INTO image_users (image, user_id) VALUES (?, ?)", "tt",
                     image_digest, user_id);
    if (ret == 0)
        ret = db_run(m->db, NULL, err, "UPDATE images SET last_used_at = ? WHERE digest = ?", "it",
                     meta_now_s(), image_digest);
    return meta_txn_end(m, ret, err);
}

int
meta_image_use_remove(struct meta *m, const char *image_digest, const char *user_id,
                      struct err *err)
{
    int changes = 0;
    if (!digest_valid(image_digest) || !meta_text_valid(user_id, META_USER_MAX))
        return err_set(err, EINVAL, "remove image user: invalid image digest or user id");
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = db_run(m->db, &changes, err, "DELETE FROM image_users WHERE image = ? AND user_id = ?",
                 "tt", image_digest, user_id);
    if (ret == 0 && changes == 0)
        ret = err_set(err, ENOENT, "image %s: %s is not a user", image_digest, user_id);
    return meta_txn_end(m, ret, err);
}

int
meta_image_use_count(struct meta *m, const char *image_digest, int64_t *count, struct err *err)
{
    if (!digest_valid(image_digest))
        return err_set(err, EINVAL, "count image users: invalid digest '%s'",
                       image_digest ? image_digest : "");
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = db_int(m->db, count, NULL, err, "SELECT count(*) FROM image_users WHERE image = ?", "t",
                 image_digest);
    return meta_txn_end(m, ret, err);
}

int
meta_image_users_retain(struct meta *m, bool (*keep)(void *arg, const char *user_id), void *arg,
                        unsigned *dropped, struct err *err)
{
    if (dropped)
        *dropped = 0;
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    char **gone = NULL;
    size_t n = 0, cap = 0;
    {
        cleanup_stmt sqlite3_stmt *st = NULL;
        ret = db_prepare(m->db, &st, err, "SELECT DISTINCT user_id FROM image_users", "");
        while (ret == 0 && (ret = db_step(m->db, st, err)) == 1) {
            ret = 0;
            const char *user = (const char *)sqlite3_column_text(st, 0);
            if (!user || keep(arg, user))
                continue;
            if (n == cap) {
                char **g = realloc(gone, (cap ? cap * 2 : 8) * sizeof(*g));
                if (!g) {
                    ret = err_set(err, ENOMEM, "image users: out of memory");
                    break;
                }
                gone = g;
                cap = cap ? cap * 2 : 8;
            }
            if (!(gone[n] = strdup(user))) {
                ret = err_set(err, ENOMEM, "image users: out of memory");
                break;
            }
            n++;
        }
    }
    for (size_t i = 0; ret == 0 && i < n; i++)
        ret = db_run(m->db, NULL, err, "DELETE FROM image_users WHERE user_id = ?", "t", gone[i]);
    for (size_t i = 0; i < n; i++)
        free(gone[i]);
    free(gone);
    ret = meta_txn_end(m, ret, err);
    if (ret == 0 && dropped)
        *dropped = (unsigned)n;
    return ret;
}

/* ---- snapshots ----------------------------------------------------------- */

int
meta_snapshot_exists(struct meta *m, const char *chain_id, bool *exists, struct err *err)
{
    if (!digest_valid(chain_id))
        return err_set(err, EINVAL, "snapshot: invalid chain id '%s'", chain_id ? chain_id : "");
    int64_t unused;
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = db_int(m->db, &unused, exists, err, "SELECT 1 FROM snapshots WHERE chain_id = ?", "t",
                 chain_id);
    return meta_txn_end(m, ret, err);
}

int
meta_snapshot_size(struct meta *m, const char *chain_id, int64_t *size, bool *exists,
                   struct err *err)
{
    if (!digest_valid(chain_id))
        return err_set(err, EINVAL, "snapshot: invalid chain id '%s'", chain_id ? chain_id : "");
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    *size = 0;
    ret = db_int(m->db, size, exists, err, "SELECT size_bytes FROM snapshots WHERE chain_id = ?",
                 "t", chain_id);
    return meta_txn_end(m, ret, err);
}

int
meta_snapshot_put(struct meta *m, const char *chain_id, const char *parent, int64_t size_bytes,
                  struct err *err)
{
    if (!digest_valid(chain_id) || (parent && !digest_valid(parent)) || size_bytes < 0)
        return err_set(err, EINVAL, "record snapshot %s: invalid chain id, parent or size",
                       chain_id ? chain_id : "");
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = db_run(m->db, NULL, err,
                 "INSERT OR IGNORE INTO snapshots (chain_id, parent, size_bytes, created_at)"
                 " VALUES (?, ?, ?, ?)",
                 "ttii", chain_id, parent, size_bytes, meta_now_s());
    return meta_txn_end(m, ret, err);
}

int
meta_snapshot_use_add(struct meta *m, const char *chain_id, const char *user_id, struct err *err)
{
    if (!digest_valid(chain_id) || !meta_text_valid(user_id, META_USER_MAX))
        return err_set(err, EINVAL, "add snapshot user: invalid chain id or user id");
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret =
        require_row(m->db, "SELECT 1 FROM snapshots WHERE chain_id = ?", chain_id, "snapshot", err);
    if (ret == 0)
        ret = db_run(m->db, NULL, err,
                     "INSERT OR IGNORE INTO snapshot_users (chain_id, user_id) VALUES (?, ?)", "tt",
                     chain_id, user_id);
    return meta_txn_end(m, ret, err);
}

int
meta_snapshot_use_remove(struct meta *m, const char *chain_id, const char *user_id, struct err *err)
{
    int changes = 0;
    if (!digest_valid(chain_id) || !meta_text_valid(user_id, META_USER_MAX))
        return err_set(err, EINVAL, "remove snapshot user: invalid chain id or user id");
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = db_run(m->db, &changes, err,
                 "DELETE FROM snapshot_users WHERE chain_id = ? AND user_id = ?", "tt", chain_id,
                 user_id);
    if (ret == 0 && changes == 0)
        ret = err_set(err, ENOENT, "snapshot %s: %s is not a user", chain_id, user_id);
    return meta_txn_end(m, ret, err);
}

/* ---- leases -------------------------------------------------------------- */

int
meta_lease_new(struct meta *m, char id_out[META_LEASE_ID_LEN], struct err *err)
{
    char id[META_LEASE_ID_LEN];
    if (randid_hex(id, 16, err) < 0)
        return err_wrap(err, "new lease");
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = db_run(m->db, NULL, err, "INSERT INTO leases (id, created_at) VALUES (?, ?)", "ti", id,
                 meta_now_s());
    ret = meta_txn_end(m, ret, err);
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
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = require_row(m->db, "SELECT 1 FROM leases WHERE id = ?", lease_id, "lease", err);
    if (ret == 0)
        ret = db_run(m->db, NULL, err, sql, "tt", lease_id, key);
    return meta_txn_end(m, ret, err);
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
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    ret = db_run(m->db, &changes, err, "DELETE FROM leases WHERE id = ?", "t", lease_id);
    if (ret == 0 && changes == 0)
        ret = err_set(err, ENOENT, "lease %s: not found", lease_id);
    return meta_txn_end(m, ret, err);
}

int
meta_lease_clear_all(struct meta *m, struct err *err)
{
    int ret = meta_txn_begin(m, err);
    if (ret < 0)
        return ret;
    return meta_txn_end(m, db_run(m->db, NULL, err, "DELETE FROM leases", ""), err);
}
