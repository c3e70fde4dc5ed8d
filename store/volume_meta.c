/*
 * Volume records in SQLite, on meta.c's connection through
 * meta_run_locked: every public function is one BEGIN IMMEDIATE ...
 * COMMIT under meta.c's mutex. Runs on pool threads; blocks on disk.
 *
 * A volume's frozen layers are one newline-separated TEXT column: they are
 * only ever read and written whole, together with the row.
 */
#include "store/volume_meta.h"

#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/os.h"
#include "common/cleanup.h"
#include "store/db.h"

static const char vmeta_schema[] =
    "CREATE TABLE IF NOT EXISTS volumes ("
    "  handle TEXT PRIMARY KEY,"
    "  parent TEXT REFERENCES volumes(handle),"
    "  layers TEXT NOT NULL DEFAULT '',"
    "  created_at INTEGER NOT NULL,"
    "  ttl_s INTEGER NOT NULL DEFAULT 0,"
    "  expires_at INTEGER NOT NULL DEFAULT 0,"
    "  privileged INTEGER NOT NULL DEFAULT 0"
    ") WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS volumes_parent ON volumes(parent);"
    "CREATE INDEX IF NOT EXISTS volumes_expires ON volumes(expires_at);"
    "CREATE TABLE IF NOT EXISTS volume_props ("
    "  handle TEXT NOT NULL REFERENCES volumes(handle) ON DELETE CASCADE,"
    "  key TEXT NOT NULL,"
    "  value TEXT NOT NULL,"
    "  PRIMARY KEY (handle, key)"
    ") WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS volume_mounts ("
    "  handle TEXT NOT NULL REFERENCES volumes(handle) ON DELETE CASCADE,"
    "  user_id TEXT NOT NULL,"
    "  readonly INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY (handle, user_id)"
    ") WITHOUT ROWID;";

/* ---- records ------------------------------------------------------------- */

void
volume_rec_free(struct volume_rec *v)
{
    if (!v)
        return;
    free(v->parent);
    for (size_t i = 0; i < v->n_layers; i++)
        free(v->layers[i]);
    free(v->layers);
    for (size_t i = 0; i < v->n_props; i++) {
        free(v->props[i].key);
        free(v->props[i].value);
    }
    free(v->props);
    free(v);
}

void
volume_rec_list_free(struct volume_rec **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        volume_rec_free(v[i]);
    free(v);
}

/* Joins layers with newlines; caller frees. */
static char *
layers_join(char *const *layers, size_t n)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(layers[i]) + 1;
    char *out = malloc(len);
    if (!out)
        return NULL;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (i)
            strcat(out, "\n");
        strcat(out, layers[i]);
    }
    return out;
}

static int
layers_split(const char *text, struct volume_rec *v)
{
    if (!text || !*text)
        return 0;
    size_t n = 1;
    for (const char *p = text; *p; p++)
        n += *p == '\n';
    v->layers = calloc(n, sizeof(char *));
    if (!v->layers)
        return -ENOMEM;
    const char *p = text;
    for (size_t i = 0; i < n; i++) {
        const char *end = strchrnul(p, '\n');
        if (!(v->layers[i] = strndup(p, (size_t)(end - p))))
            return -ENOMEM;
        v->n_layers++;
        p = *end ? end + 1 : end;
    }
    return 0;
}

static int
load_locked(sqlite3 *db, const char *handle, struct volume_rec **out, struct err *err)
{
    cleanup_stmt sqlite3_stmt *st = NULL;
    int ret = db_prepare(db, &st, err,
                         "SELECT parent, layers, created_at, ttl_s, expires_at, privileged,"
                         " (SELECT count(*) FROM volume_mounts m WHERE m.handle = v.handle),"
                         " (SELECT count(*) FROM volumes c WHERE c.parent = v.handle)"
                         " FROM volumes v WHERE handle = ?",
                         "t", handle);
    if (ret < 0)
        return ret;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return err_set(err, ENOENT, "volume %s: not found", handle);
    if (rc != SQLITE_ROW)
        return db_err(db, rc, err, "read volume");
    struct volume_rec *v = calloc(1, sizeof(*v));
    if (!v)
        return err_set(err, ENOMEM, "read volume: out of memory");
    snprintf(v->handle, sizeof(v->handle), "%s", handle);
    const char *parent = (const char *)sqlite3_column_text(st, 0);
    if ((parent && !(v->parent = strdup(parent))) ||
        layers_split((const char *)sqlite3_column_text(st, 1), v) < 0) {
        volume_rec_free(v);
        return err_set(err, ENOMEM, "read volume: out of memory");
    }
    v->created_at = sqlite3_column_int64(st, 2);
    v->ttl_s = sqlite3_column_int64(st, 3);
    v->expires_at = sqlite3_column_int64(st, 4);
    v->privileged = sqlite3_column_int64(st, 5) != 0;
    v->mounts = sqlite3_column_int64(st, 6);
    v->children = sqlite3_column_int64(st, 7);

    cleanup_stmt sqlite3_stmt *ps = NULL;
    ret = db_prepare(db, &ps, err,
                     "SELECT key, value FROM volume_props WHERE handle = ? ORDER BY key", "t",
                     handle);
    if (ret < 0) {
        volume_rec_free(v);
        return ret;
    }
    size_t cap = 0;
    while ((rc = sqlite3_step(ps)) == SQLITE_ROW) {
        if (v->n_props == cap) {
            cap = cap ? cap * 2 : 4;
            struct volume_prop *np = realloc(v->props, cap * sizeof(*np));
            if (!np)
                break;
            v->props = np;
        }
        struct volume_prop *p = &v->props[v->n_props];
        p->key = strdup((const char *)sqlite3_column_text(ps, 0));
        p->value = strdup((const char *)sqlite3_column_text(ps, 1));
        v->n_props++;
        if (!p->key || !p->value)
            break;
    }
    if (rc != SQLITE_DONE) {
        ret = rc == SQLITE_ROW ? err_set(err, ENOMEM, "read volume: out of memory")
                               : db_err(db, rc, err, "read volume properties");
        volume_rec_free(v);
        return ret;
    }
    *out = v;
    return 0;
}

/* ---- calls --------------------------------------------------------------- */

static int
init_fn(struct sqlite3 *db, void *ctx, struct err *err)
{
    /* Version 1 is the first schema (its CREATE ... IF NOT EXISTS also
     * takes a database from before versions were recorded). */
    static const char *const steps[] = {vmeta_schema};
    static const struct db_schema schema = {
        .component = "volumes", .steps = steps, .n_steps = sizeof(steps) / sizeof(steps[0])};
    int ret = db_migrate(db, &schema, err);
    return ret < 0 ? err_wrap(err, "create volume tables") : 0;
}

int
vmeta_init(struct meta *m, struct err *err)
{
    return meta_run_locked(m, init_fn, NULL, err);
}

struct insert_ctx {
    const struct volume_rec *rec;
    char *const *parent_layers;
    size_t n_parent_layers;
};

static int
insert_fn(struct sqlite3 *db, void *ctx, struct err *err)
{
    struct insert_ctx *c = ctx;
    const struct volume_rec *v = c->rec;
    int64_t unused;
    bool found = false;
    int ret =
        db_int(db, &unused, &found, err, "SELECT 1 FROM volumes WHERE handle = ?", "t", v->handle);
    if (ret < 0)
        return ret;
    if (found)
        return err_set(err, EEXIST, "volume %s: the handle is taken", v->handle);
    if (v->parent) {
        int64_t mounts = 0;
        ret = db_int(db, &unused, &found, err, "SELECT 1 FROM volumes WHERE handle = ?", "t",
                     v->parent);
        if (ret == 0 && !found)
            ret = err_set(err, ENOENT, "parent volume %s: not found", v->parent);
        if (ret == 0)
            ret = db_int(db, &mounts, NULL, err,
                         "SELECT count(*) FROM volume_mounts WHERE handle = ?", "t", v->parent);
        if (ret == 0 && mounts > 0)
            ret = err_set(err, ERR_CONFLICT,
                          "parent volume %s: mounted by %lld container%s; a child can only be "
                          "made of a volume no container mounts",
                          v->parent, (long long)mounts, mounts == 1 ? "" : "s");
        if (ret < 0)
            return ret;
    }
    if (c->parent_layers) {
        cleanup_free char *pl = layers_join(c->parent_layers, c->n_parent_layers);
        if (!pl)
            return err_set(err, ENOMEM, "record volume: out of memory");
        ret = db_run(db, NULL, err, "UPDATE volumes SET layers = ? WHERE handle = ?", "tt", pl,
                     v->parent);
        if (ret < 0)
            return ret;
    }
    cleanup_free char *layers = layers_join(v->layers, v->n_layers);
    if (!layers)
        return err_set(err, ENOMEM, "record volume: out of memory");
    ret = db_run(db, NULL, err,
                 "INSERT INTO volumes (handle, parent, layers, created_at, ttl_s, expires_at,"
                 " privileged) VALUES (?, ?, ?, ?, ?, ?, ?)",
                 "tttiiii", v->handle, v->parent, layers, v->created_at, v->ttl_s, v->expires_at,
                 (int64_t)v->privileged);
    for (size_t i = 0; ret == 0 && i < v->n_props; i++)
        ret = db_run(db, NULL, err,
                     "INSERT OR REPLACE INTO volume_props (handle, key, value) VALUES (?, ?, ?)",
                     "ttt", v->handle, v->props[i].key, v->props[i].value);
    return ret;
}

int
vmeta_insert(struct meta *m, const struct volume_rec *rec, char *const *parent_layers,
             size_t n_parent_layers, struct err *err)
{
    struct insert_ctx c = {rec, parent_layers, n_parent_layers};
    return meta_run_locked(m, insert_fn, &c, err);
}

struct get_ctx {
    const char *handle;
    struct volume_rec *out;
};

static int
get_fn(struct sqlite3 *db, void *ctx, struct err *err)
{
    struct get_ctx *c = ctx;
    return load_locked(db, c->handle, &c->out, err);
}

int
vmeta_get(struct meta *m, const char *handle, struct volume_rec **out, struct err *err)
{
    struct get_ctx c = {handle, NULL};
    int ret = meta_run_locked(m, get_fn, &c, err);
    if (ret == 0)
        *out = c.out;
    return ret;
}

struct list_ctx {
    struct volume_rec **v;
    size_t n;
};

static int
list_fn(struct sqlite3 *db, void *ctx, struct err *err)
{
    struct list_ctx *c = ctx;
    cleanup_stmt sqlite3_stmt *st = NULL;
    int ret =
        db_prepare(db, &st, err, "SELECT handle FROM volumes ORDER BY created_at, handle", "");
    if (ret < 0)
        return ret;
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (c->n == cap) {
            cap = cap ? cap * 2 : 16;
            struct volume_rec **nv = realloc(c->v, cap * sizeof(*nv));
            if (!nv)
                return err_set(err, ENOMEM, "list volumes: out of memory");
            c->v = nv;
        }
        ret = load_locked(db, (const char *)sqlite3_column_text(st, 0), &c->v[c->n], err);
        if (ret < 0)
            return ret;
        c->n++;
    }
    if (rc != SQLITE_DONE)
        return db_err(db, rc, err, "list volumes");
    return 0;
}

int
vmeta_list(struct meta *m, struct volume_rec ***out, size_t *n, struct err *err)
{
    struct list_ctx c = {0};
    int ret = meta_run_locked(m, list_fn, &c, err);
    if (ret < 0) {
        volume_rec_list_free(c.v, c.n);
        return ret;
    }
    *out = c.v;
    *n = c.n;
    return 0;
}

static int
count_fn(struct sqlite3 *db, void *ctx, struct err *err)
{
    return db_int(db, ctx, NULL, err, "SELECT COUNT(*) FROM volumes", "");
}

int
vmeta_count(struct meta *m, int64_t *n, struct err *err)
{
    return meta_run_locked(m, count_fn, n, err);
}

struct patch_ctx {
    const char *handle;
    const struct volume_prop *props;
    size_t n_props;
    int64_t ttl_s, now;
};

static int
patch_fn(struct sqlite3 *db, void *ctx, struct err *err)
{
    struct patch_ctx *c = ctx;
    int64_t unused;
    bool found = false;
    int ret =
        db_int(db, &unused, &found, err, "SELECT 1 FROM volumes WHERE handle = ?", "t", c->handle);
    if (ret == 0 && !found)
        ret = err_set(err, ENOENT, "volume %s: not found", c->handle);
    for (size_t i = 0; ret == 0 && i < c->n_props; i++) {
        if (c->props[i].value)
            ret =
                db_run(db, NULL, err,
                       "INSERT OR REPLACE INTO volume_props (handle, key, value) VALUES (?, ?, ?)",
                       "ttt", c->handle, c->props[i].key, c->props[i].value);
        else
            ret = db_run(db, NULL, err, "DELETE FROM volume_props WHERE handle = ? AND key = ?",
                         "tt", c->handle, c->props[i].key);
    }
    if (ret == 0 && c->ttl_s >= 0)
        ret = db_run(db, NULL, err, "UPDATE volumes SET ttl_s = ?, expires_at = ? WHERE handle = ?",
                     "iit", c->ttl_s, c->ttl_s ? c->now + c->ttl_s : (int64_t)0, c->handle);
    return ret;
}

int
vmeta_patch(struct meta *m, const char *handle, const struct volume_prop *props, size_t n_props,
            int64_t ttl_s, int64_t now, struct err *err)
{
    struct patch_ctx c = {handle, props, n_props, ttl_s, now};
    return meta_run_locked(m, patch_fn, &c, err);
}

struct handles {
    char **h;
    size_t n, cap;
};

static int
handles_add(struct handles *hs, const char *h)
{
    if (hs->n == hs->cap) {
        hs->cap = hs->cap ? hs->cap * 2 : 8;
        char **nh = realloc(hs->h, hs->cap * sizeof(*nh));
        if (!nh)
            return -ENOMEM;
        hs->h = nh;
    }
    if (!(hs->h[hs->n] = strdup(h)))
        return -ENOMEM;
    hs->n++;
    return 0;
}

static void
handles_free(struct handles *hs)
{
    for (size_t i = 0; i < hs->n; i++)
        free(hs->h[i]);
    free(hs->h);
    memset(hs, 0, sizeof(*hs));
}

struct delete_ctx {
    const char *handle;
    bool force;
    const struct volume_expiry *expiry; /* NULL: delete whatever the handle names */
    int64_t now;                        /* with expiry: when it was found expired */
    struct handles out;
};

/* Collects handle's descendants, deepest first, then handle itself. */
static int
collect_tree(sqlite3 *db, const char *handle, struct handles *out, int depth, struct err *err)
{
    if (depth > 1000)
        return err_set(err, EIO, "volume %s: parent chain too deep", handle);
    struct handles kids = {0};
    cleanup_stmt sqlite3_stmt *st = NULL;
    int ret = db_prepare(db, &st, err, "SELECT handle FROM volumes WHERE parent = ?", "t", handle);
    int rc;
    while (ret == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW)
        if (handles_add(&kids, (const char *)sqlite3_column_text(st, 0)) < 0)
            ret = err_set(err, ENOMEM, "delete volume: out of memory");
    if (ret == 0 && rc != SQLITE_DONE)
        ret = db_err(db, rc, err, "read volume children");
    for (size_t i = 0; ret == 0 && i < kids.n; i++)
        ret = collect_tree(db, kids.h[i], out, depth + 1, err);
    handles_free(&kids);
    if (ret == 0 && handles_add(out, handle) < 0)
        ret = err_set(err, ENOMEM, "delete volume: out of memory");
    return ret;
}

/* For the TTL sweep: ESTALE unless v is the volume it listed and still expired. */
static int
check_still_expired(const struct volume_rec *v, const struct delete_ctx *c, struct err *err)
{
    if (v->created_at != c->expiry->created_at)
        return err_set(err, ESTALE, "volume %s: created again since it expired", v->handle);
    if (v->expires_at <= 0 || v->expires_at > c->now)
        return err_set(err, ESTALE, "volume %s: its ttl was renewed or removed since it expired",
                       v->handle);
    return 0;
}

static int
delete_fn(struct sqlite3 *db, void *ctx, struct err *err)
{
    struct delete_ctx *c = ctx;
    struct volume_rec *v = NULL;
    int ret = load_locked(db, c->handle, &v, err);
    if (ret < 0)
        return ret;
    if (c->expiry && (ret = check_still_expired(v, c, err)) < 0) {
        volume_rec_free(v);
        return ret;
    }
    if (!c->force && (v->mounts > 0 || v->children > 0)) {
        ret = v->mounts > 0
                  ? err_set(err, ERR_CONFLICT,
                            "volume %s: mounted by %lld container%s (?force=1 deletes it anyway)",
                            c->handle, (long long)v->mounts, v->mounts == 1 ? "" : "s")
                  : err_set(err, ERR_CONFLICT,
                            "volume %s: has %lld child volume%s (?force=1 deletes them too)",
                            c->handle, (long long)v->children, v->children == 1 ? "" : "s");
        volume_rec_free(v);
        return ret;
    }
    volume_rec_free(v);
    ret = collect_tree(db, c->handle, &c->out, 0, err);
    for (size_t i = 0; ret == 0 && i < c->out.n; i++)
        ret = db_run(db, NULL, err, "DELETE FROM volumes WHERE handle = ?", "t", c->out.h[i]);
    return ret;
}

static int
delete_run(struct meta *m, struct delete_ctx *c, char ***deleted, size_t *n, struct err *err)
{
    int ret = meta_run_locked(m, delete_fn, c, err);
    if (ret < 0) {
        handles_free(&c->out);
        return ret;
    }
    *deleted = c->out.h;
    *n = c->out.n;
    return 0;
}

int
vmeta_delete(struct meta *m, const char *handle, bool force, char ***deleted, size_t *n,
             struct err *err)
{
    struct delete_ctx c = {.handle = handle, .force = force};
    return delete_run(m, &c, deleted, n, err);
}

int
vmeta_delete_expired(struct meta *m, const struct volume_expiry *e, int64_t now, char ***deleted,
                     size_t *n, struct err *err)
{
    struct delete_ctx c = {.handle = e->handle, .expiry = e, .now = now};
    return delete_run(m, &c, deleted, n, err);
}

struct mount_ctx {
    const char *handle, *user;
    bool readonly, add;
};

static int
mount_fn(struct sqlite3 *db, void *ctx, struct err *err)
{
    struct mount_ctx *c = ctx;
    int changes = 0;
    if (!c->add) {
        int ret =
            db_run(db, &changes, err, "DELETE FROM volume_mounts WHERE handle = ? AND user_id = ?",
                   "tt", c->handle, c->user);
        if (ret == 0 && changes == 0)
            ret = err_set(err, ENOENT, "volume %s: %s does not mount it", c->handle, c->user);
        return ret;
    }
    int64_t unused;
    bool found = false;
    int ret =
        db_int(db, &unused, &found, err, "SELECT 1 FROM volumes WHERE handle = ?", "t", c->handle);
    if (ret == 0 && !found)
        ret = err_set(err, ENOENT, "volume %s: not found", c->handle);
    if (ret == 0)
        ret = db_run(db, NULL, err,
                     "INSERT OR IGNORE INTO volume_mounts (handle, user_id, readonly)"
                     " VALUES (?, ?, ?)",
                     "tti", c->handle, c->user, (int64_t)c->readonly);
    return ret;
}

int
vmeta_mount_add(struct meta *m, const char *handle, const char *user_id, bool readonly,
                struct err *err)
{
    struct mount_ctx c = {handle, user_id, readonly, true};
    return meta_run_locked(m, mount_fn, &c, err);
}

int
vmeta_mount_remove(struct meta *m, const char *handle, const char *user_id, struct err *err)
{
    struct mount_ctx c = {handle, user_id, false, false};
    return meta_run_locked(m, mount_fn, &c, err);
}

struct expired_ctx {
    int64_t now, next;
    struct volume_expiry *out;
    size_t n, cap;
};

static int
expiry_add(struct expired_ctx *c, const char *handle, int64_t created_at)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        struct volume_expiry *no = realloc(c->out, cap * sizeof(*no));
        if (!no)
            return -ENOMEM;
        c->out = no;
        c->cap = cap;
    }
    struct volume_expiry *e = &c->out[c->n++];
    snprintf(e->handle, sizeof(e->handle), "%s", handle);
    e->created_at = created_at;
    return 0;
}

static int
expired_fn(struct sqlite3 *db, void *ctx, struct err *err)
{
    struct expired_ctx *c = ctx;
    cleanup_stmt sqlite3_stmt *st = NULL;
    int ret = db_prepare(db, &st, err,
                         "SELECT handle, created_at FROM volumes"
                         " WHERE expires_at > 0 AND expires_at <= ? ORDER BY expires_at",
                         "i", c->now);
    int rc;
    while (ret == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *handle = (const char *)sqlite3_column_text(st, 0);
        if (expiry_add(c, handle, sqlite3_column_int64(st, 1)) < 0)
            ret = err_set(err, ENOMEM, "expired volumes: out of memory");
    }
    if (ret == 0 && rc != SQLITE_DONE)
        ret = db_err(db, rc, err, "expired volumes");
    if (ret == 0)
        ret = db_int(db, &c->next, NULL, err,
                     "SELECT coalesce(min(expires_at), 0) FROM volumes WHERE expires_at > ?", "i",
                     c->now);
    return ret;
}

int
vmeta_expired(struct meta *m, int64_t now, struct volume_expiry **out, size_t *n, int64_t *next,
              struct err *err)
{
    struct expired_ctx c = {.now = now};
    int ret = meta_run_locked(m, expired_fn, &c, err);
    if (ret < 0) {
        free(c.out);
        return ret;
    }
    *out = c.out;
    *n = c.n;
    *next = c.next;
    return 0;
}
