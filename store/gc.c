/*
 * Mark and sweep over blobs and snapshots. Runs in a pool job (or at
 * start-up); blocks on disk for as long as the sweep takes.
 *
 * Concurrency. The whole run -- mark, file removals and row deletions --
 * happens inside meta_run_locked, i.e. with the database mutex held in one
 * write transaction. That makes the decision "nothing reaches X" and the
 * removal of X atomic with respect to every other metadata call: an import
 * that leases a digest before looking at it (the protocol in gc.h) either
 * got its lease in before the mark, and the blob is kept, or waits for the
 * sweep to end and then finds the blob gone and writes it again. The same
 * holds for a blob committed between "mark" and "sweep": there is no such
 * window. The alternative, a generation counter checked at sweep time,
 * would let metadata calls proceed during a long sweep but needs every
 * writer to bump and compare it correctly; holding the mutex is simpler
 * to get right, and GC runs rarely (after a delete or a prune, on
 * request) while the removals are mostly unlinks. The cost is that API
 * calls touching the metadata wait for the sweep; removal of large
 * snapshot trees is the long part.
 *
 * Only entries named by 64 hex digits are considered, so temporaries of
 * writers (under tmp/, or snapshot directories with a suffix while they
 * are unpacked) are never touched.
 */
#include "store/gc.h"

#include <sqlite3.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/osfs.h"
#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "store/db.h"
#include "store/layer.h"
#include "store/snapshot.h"
#ifdef _WIN32
#include "store/cim_chain.h"
#endif

/* A sorted set of digests, filled from an ORDER BY query. */
struct digest_set {
    char (*items)[DIGEST_STR_LEN];
    size_t n;
    size_t cap;
};

struct gc_ctx {
    struct blob_store *bs;
    const char *root;
    struct gc_result *res;
    struct digest_set live_blobs;
    struct digest_set live_snapshots;
    struct digest_set dead_blobs;
};

static int
set_add(struct digest_set *s, const char *d)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        void *items = realloc(s->items, cap * sizeof(*s->items));
        if (!items)
            return -ENOMEM;
        s->items = items;
        s->cap = cap;
    }
    snprintf(s->items[s->n++], DIGEST_STR_LEN, "%s", d);
    return 0;
}

static int
cmp_digest(const void *a, const void *b)
{
    return strcmp(a, b);
}

static bool
set_has(const struct digest_set *s, const char *d)
{
    return s->n > 0 && bsearch(d, s->items, s->n, sizeof(*s->items), cmp_digest) != NULL;
}

/* Loads the single text column of sql (sorted by BINARY, like strcmp) into s. */
static int
sql_load_set(sqlite3 *db, const char *sql, struct digest_set *s, struct err *err)
{
    cleanup_stmt sqlite3_stmt *st = NULL;
    int ret = db_prepare(db, &st, err, sql, "");
    while (ret == 0 && (ret = db_step(db, st, err)) == 1) {
        const char *d = (const char *)sqlite3_column_text(st, 0);
        ret = d && set_add(s, d) < 0 ? err_set(err, ENOMEM, "gc: out of memory") : 0;
    }
    return ret < 0 ? ret : 0;
}

/*
 * The mark: everything reachable from the roots, into two temporary
 * tables. Blobs: images (manifest, config, layers) and leased digests,
 * then the recorded references transitively. Snapshots: the images'
 * layers, leased and used snapshots, then their parents transitively.
 */
static const char mark_sql[] =
    "CREATE TEMP TABLE IF NOT EXISTS gc_live_blobs (d TEXT PRIMARY KEY) WITHOUT ROWID;"
    "CREATE TEMP TABLE IF NOT EXISTS gc_live_snapshots (c TEXT PRIMARY KEY) WITHOUT ROWID;"
    "DELETE FROM gc_live_blobs;"
    "DELETE FROM gc_live_snapshots;"
    "INSERT INTO gc_live_blobs (d)"
    " WITH RECURSIVE live(d) AS ("
    "  SELECT digest FROM images"
    "  UNION SELECT config_digest FROM images"
    "  UNION SELECT digest FROM image_layers"
    "  UNION SELECT digest FROM lease_blobs"
    "  UNION SELECT r.child FROM blob_refs r JOIN live ON r.parent = live.d)"
    " SELECT d FROM live;"
    "INSERT INTO gc_live_snapshots (c)"
    " WITH RECURSIVE live(c) AS ("
    "  SELECT chain_id FROM image_layers"
    "  UNION SELECT chain_id FROM lease_snapshots"
    "  UNION SELECT chain_id FROM snapshot_users"
    "  UNION SELECT s.parent FROM snapshots s JOIN live ON s.chain_id = live.c"
    "   WHERE s.parent IS NOT NULL)"
    " SELECT c FROM live;";

static int
collect_dead_blob_cb(const char *digest, int64_t size, void *opaque)
{
    struct gc_ctx *ctx = opaque;
    if (set_has(&ctx->live_blobs, digest))
        return 0;
    return set_add(&ctx->dead_blobs, digest);
}

static int
sweep_blobs(sqlite3 *db, struct gc_ctx *ctx, struct err *err)
{
    int ret = blob_list(ctx->bs, collect_dead_blob_cb, ctx, err);
    if (ret < 0) {
        if (ret == -ENOMEM)
            return err_set(err, ENOMEM, "gc: out of memory");
        return ret;
    }
    for (size_t i = 0; i < ctx->dead_blobs.n; i++) {
        const char *digest = ctx->dead_blobs.items[i];
        struct err e = {0};
        int64_t size = 0;
        if (blob_stat(ctx->bs, digest, &size, &e) < 0 || blob_remove(ctx->bs, digest, &e) < 0) {
            if (e.code == ENOENT)
                continue;
            log_warn("gc: %s", e.msg);
            ctx->res->errors++;
            continue;
        }
        ctx->res->blobs_removed++;
        ctx->res->blob_bytes_freed += (uint64_t)size;
    }
    /* Rows of unreachable blobs go whether or not a file was there; their
     * references go with them (ON DELETE CASCADE). */
    return db_exec(db, "DELETE FROM blobs WHERE digest NOT IN (SELECT d FROM gc_live_blobs)", err);
}

/* What became of a snapshot the sweep removes. */
enum snap_removal {
    SNAP_KEPT,       /* still whole at its name (busy, or the removal could not begin) */
    SNAP_GONE,       /* name and tree gone */
    SNAP_LEFT_ASIDE, /* name gone; part of the tree stays in a tmp-rm- directory */
};

/*
 * Removes <root>/snapshots/<hex>. Refuses (EBUSY) when the directory is
 * itself a mount point: fs_remove_tree only notices mounts below it.
 * It is set aside first (snapshot_dir_set_aside), so a removal cut short
 * by a crash or a failed unlink never leaves part of a snapshot at its
 * name, where the next import of that chain would find it "cached" and
 * record an image over it; what such a removal leaves is tried again by
 * every later sweep and at start-up. On Windows the layer goes at its own
 * path, as HcsDestroyLayer is given it (layer_folder_remove).
 */
static enum snap_removal
snapshot_dir_remove(struct gc_ctx *ctx, const char *snap_root, const char *hex, struct err *err)
{
    cleanup_free char *path = fs_path_join(snap_root, hex);
    if (!path) {
        err_set(err, ENOMEM, "gc: out of memory");
        return SNAP_KEPT;
    }
    struct os_stat parent, st;
    int r = osfs_lstat(path, &st);
    if (r < 0) {
        if (r == -ENOENT)
            return SNAP_GONE;
        err_errno(err, -r, "stat %s", path);
        return SNAP_KEPT;
    }
    if ((r = osfs_stat(snap_root, &parent)) < 0) {
        err_errno(err, -r, "stat %s", snap_root);
        return SNAP_KEPT;
    }
    if (S_ISDIR(st.st_mode) && st.st_dev != parent.st_dev) {
        err_set(err, EBUSY, "remove %s: a filesystem is mounted there", path);
        return SNAP_KEPT;
    }
#ifdef _WIN32
    (void)ctx;
    return layer_folder_remove(path, err) < 0 ? SNAP_KEPT : SNAP_GONE; /* HcsDestroyLayer first */
#else
    cleanup_free char *aside = NULL;
    if (snapshot_dir_set_aside(snap_root, hex, &aside, err) < 0)
        return SNAP_KEPT;
    struct err rerr = {0};
    if (aside && layer_folder_remove(aside, &rerr) < 0) {
        log_warn("gc: snapshot sha256:%s set aside as %s, which stays for a later run: %s", hex,
                 aside, rerr.msg);
        ctx->res->errors++;
        return SNAP_LEFT_ASIDE;
    }
    return SNAP_GONE;
#endif
}

/* Removes one snapshot's directory, counting failures; false when it is
 * still at its name (its row stays). *whole: all of it went. */
static bool
snapshot_remove_counted(struct gc_ctx *ctx, const char *snap_root, const char *hex, bool *whole)
{
    struct err e = {0};
    enum snap_removal what = snapshot_dir_remove(ctx, snap_root, hex, &e);
    *whole = what == SNAP_GONE;
    if (what != SNAP_KEPT)
        return true;
    if (e.code == EBUSY) {
        log_warn("gc: snapshot sha256:%s is unreferenced but busy, kept: %s", hex, e.msg);
        ctx->res->snapshots_busy++;
    } else {
        log_warn("gc: snapshot sha256:%s: %s", hex, e.msg);
        ctx->res->errors++;
    }
    return false;
}

static int
sweep_snapshot_rows(sqlite3 *db, struct gc_ctx *ctx, const char *snap_root, struct err *err)
{
    cleanup_stmt sqlite3_stmt *sel = NULL;
    struct digest_set dead = {0};
    int64_t *sizes = NULL;
    size_t cap = 0;
    int ret = db_prepare(db, &sel, err,
                         "SELECT chain_id, size_bytes FROM snapshots"
                         " WHERE chain_id NOT IN (SELECT c FROM gc_live_snapshots)",
                         "");
    if (ret < 0)
        return err_wrap(err, "gc");
    /* Collect first: deleting from the table being scanned is best avoided. */
    while ((ret = db_step(db, sel, err)) == 1) {
        if (dead.n == cap) {
            cap = cap ? cap * 2 : 64;
            int64_t *ns = realloc(sizes, cap * sizeof(*ns));
            if (!ns) {
                ret = err_set(err, ENOMEM, "gc: out of memory");
                break;
            }
            sizes = ns;
        }
        sizes[dead.n] = sqlite3_column_int64(sel, 1);
        if (set_add(&dead, (const char *)sqlite3_column_text(sel, 0)) < 0) {
            ret = err_set(err, ENOMEM, "gc: out of memory");
            break;
        }
    }
    for (size_t i = 0; ret == 0 && i < dead.n; i++) {
        const char *chain = dead.items[i];
        const char *hex = digest_hex(chain);
        bool whole = true;
        if (hex && !snapshot_remove_counted(ctx, snap_root, hex, &whole))
            continue;
        ret = db_run(db, NULL, err, "DELETE FROM snapshots WHERE chain_id = ?", "t", chain);
        if (ret < 0) {
            err_wrap(err, "gc: delete snapshot %s", chain);
            break;
        }
        ctx->res->snapshots_removed++;
        if (whole)
            ctx->res->snapshot_bytes_freed += sizes[i] > 0 ? (uint64_t)sizes[i] : 0;
    }
    free(dead.items);
    free(sizes);
    return ret < 0 ? ret : 0;
}

/* What an earlier removal set aside and could not remove: nothing looks
 * such a name up, so it goes whenever it can (already logged once). */
static void
aside_retry(const char *snap_root, const char *name)
{
    cleanup_free char *path = fs_path_join(snap_root, name);
    struct err e = {0};
    if (path && layer_folder_remove(path, &e) < 0)
        log_debug("gc: %s stays: %s", path, e.msg);
}

/* Directories with no row at all (a crash between unpack and commit), and
 * what earlier removals set aside. */
static int
sweep_snapshot_dirs(sqlite3 *db, struct gc_ctx *ctx, const char *snap_root, struct err *err)
{
    struct osfs_dir *dir = NULL;
    int ret = osfs_dir_open(snap_root, &dir);
    if (ret < 0) {
        if (ret == -ENOENT)
            return 0;
        return err_errno(err, -ret, "gc: list %s", snap_root);
    }
    const char *name;
    while ((name = osfs_dir_next(dir, NULL)) != NULL) {
        if (strncmp(name, SNAPSHOT_ASIDE_PREFIX, strlen(SNAPSHOT_ASIDE_PREFIX)) == 0) {
            aside_retry(snap_root, name);
            continue;
        }
        if (strlen(name) != DIGEST_HEX_LEN || !digest_hex_valid(name, DIGEST_HEX_LEN))
            continue;
        char chain[DIGEST_STR_LEN];
        snprintf(chain, sizeof(chain), DIGEST_PREFIX "%.64s", name);
        if (set_has(&ctx->live_snapshots, chain))
            continue;
        int64_t unused;
        bool has_row = false;
        ret = db_int(db, &unused, &has_row, err, "SELECT 1 FROM snapshots WHERE chain_id = ?", "t",
                     chain);
        if (ret < 0)
            break;
        if (has_row)
            continue; /* an unreferenced row kept because it was busy */
        bool whole;
        if (snapshot_remove_counted(ctx, snap_root, name, &whole))
            ctx->res->snapshots_removed++;
    }
    osfs_dir_close(dir);
    return ret < 0 ? err_wrap(err, "gc") : 0;
}

#ifdef _WIN32
static bool
cim_live(void *arg, const char *chain_id)
{
    struct gc_ctx *ctx = arg;
    return set_has(&ctx->live_snapshots, chain_id);
}

/* <root>/cims and <root>/block-cims: the CIMs (forked, or block ones with
 * their merged CIMs) of chains nothing reaches any more (store/cim_chain.h). */
static int
sweep_cim_dir(struct gc_ctx *ctx, const char *name, struct err *err)
{
    cleanup_free char *dir = fs_path_join(ctx->root, name);
    cleanup_free char *mounts = fs_path_join(ctx->root, "mounts");
    if (!dir || !mounts)
        return err_set(err, ENOMEM, "gc: out of memory");
    struct cim_gc_result cr;
    int ret = cim_chain_gc(dir, mounts, cim_live, ctx, &cr, err);
    ctx->res->cims_removed += cr.removed;
    ctx->res->cims_busy += cr.busy;
    ctx->res->errors += cr.errors;
    return ret;
}

static int
sweep_cims(struct gc_ctx *ctx, struct err *err)
{
    int ret = sweep_cim_dir(ctx, CIM_DIR_NAME, err);
    return ret < 0 ? ret : sweep_cim_dir(ctx, CIM_BLOCK_DIR_NAME, err);
}
#endif

static int
gc_locked(struct sqlite3 *db, void *opaque, struct err *err)
{
    struct gc_ctx *ctx = opaque;
    int ret = db_exec(db, mark_sql, err);
    if (ret == 0)
        ret = sql_load_set(db, "SELECT d FROM gc_live_blobs ORDER BY d", &ctx->live_blobs, err);
    if (ret == 0)
        ret = sql_load_set(db, "SELECT c FROM gc_live_snapshots ORDER BY c", &ctx->live_snapshots,
                           err);
    if (ret == 0)
        ret = sweep_blobs(db, ctx, err);
    cleanup_free char *snap_root = fs_path_join(ctx->root, "snapshots");
    if (ret == 0 && !snap_root)
        ret = err_set(err, ENOMEM, "gc: out of memory");
    if (ret == 0)
        ret = sweep_snapshot_rows(db, ctx, snap_root, err);
    if (ret == 0)
        ret = sweep_snapshot_dirs(db, ctx, snap_root, err);
#ifdef _WIN32
    if (ret == 0)
        ret = sweep_cims(ctx, err);
#endif
    return ret;
}

int
gc_run(struct blob_store *bs, struct meta *m, const char *root, struct gc_result *res,
       struct err *err)
{
    struct gc_ctx ctx = {.bs = bs, .root = root, .res = res};
    memset(res, 0, sizeof(*res));
    int ret = meta_run_locked(m, gc_locked, &ctx, err);
    free(ctx.live_blobs.items);
    free(ctx.live_snapshots.items);
    free(ctx.dead_blobs.items);
    if (ret < 0)
        return err_wrap(err, "garbage collection");
    log_info("gc: removed %llu blobs (%llu bytes), %llu snapshots (%llu bytes) and %llu cims; "
             "%llu busy",
             (unsigned long long)res->blobs_removed, (unsigned long long)res->blob_bytes_freed,
             (unsigned long long)res->snapshots_removed,
             (unsigned long long)res->snapshot_bytes_freed, (unsigned long long)res->cims_removed,
             (unsigned long long)(res->snapshots_busy + res->cims_busy));
    return 0;
}
