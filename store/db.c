/* The store's SQLite helpers (store/db.h); blocking, callers serialise. */
#include "store/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
db_code_of(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_NOMEM:
        return ENOMEM;
    case SQLITE_FULL:
        return ENOSPC;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return EBUSY;
    case SQLITE_READONLY:
    case SQLITE_PERM:
        return EROFS;
    case SQLITE_CONSTRAINT:
        return EINVAL;
    default:
        return EIO;
    }
}

int
db_err(sqlite3 *db, int rc, struct err *err, const char *what)
{
    return err_set(err, db_code_of(rc), "metadata %s: %s", what, sqlite3_errmsg(db));
}

int
db_exec(sqlite3 *db, const char *sql, struct err *err)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        int ret = err_set(err, db_code_of(rc), "metadata: %.120s: %s", sql,
                          msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return ret;
    }
    return 0;
}

int
db_vprepare(sqlite3 *db, sqlite3_stmt **out, struct err *err, const char *sql, const char *types,
            va_list ap)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return db_err(db, rc, err, "prepare");
    for (int i = 0; types[i]; i++) {
        if (types[i] == 't') {
            const char *s = va_arg(ap, const char *);
            rc = s ? sqlite3_bind_text(st, i + 1, s, -1, SQLITE_TRANSIENT)
                   : sqlite3_bind_null(st, i + 1);
        } else {
            rc = sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
        }
        if (rc != SQLITE_OK) {
            sqlite3_finalize(st);
            return db_err(db, rc, err, "bind");
        }
    }
    *out = st;
    return 0;
}

int
db_prepare(sqlite3 *db, sqlite3_stmt **out, struct err *err, const char *sql, const char *types,
           ...)
{
    va_list ap;
    va_start(ap, types);
    int ret = db_vprepare(db, out, err, sql, types, ap);
    va_end(ap);
    return ret;
}

int
db_run(sqlite3 *db, int *changes, struct err *err, const char *sql, const char *types, ...)
{
    cleanup_stmt sqlite3_stmt *st = NULL;
    va_list ap;
    va_start(ap, types);
    int ret = db_vprepare(db, &st, err, sql, types, ap);
    va_end(ap);
    if (ret < 0)
        return ret;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        ;
    if (rc != SQLITE_DONE)
        return db_err(db, rc, err, "write");
    if (changes)
        *changes = sqlite3_changes(db);
    return 0;
}

int
db_int(sqlite3 *db, int64_t *out, bool *found, struct err *err, const char *sql, const char *types,
       ...)
{
    cleanup_stmt sqlite3_stmt *st = NULL;
    va_list ap;
    va_start(ap, types);
    int ret = db_vprepare(db, &st, err, sql, types, ap);
    va_end(ap);
    if (ret < 0)
        return ret;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(st, 0);
        if (found)
            *found = true;
        return 0;
    }
    if (rc != SQLITE_DONE)
        return db_err(db, rc, err, "read");
    *out = 0;
    if (found)
        *found = false;
    return 0;
}

int
db_step(sqlite3 *db, sqlite3_stmt *st, struct err *err)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return db_err(db, rc, err, "read");
}

char *
db_text_dup(sqlite3_stmt *st, int col)
{
    const unsigned char *s = sqlite3_column_text(st, col);
    return strdup(s ? (const char *)s : "");
}

int
db_txn_begin(sqlite3 *db, struct err *err)
{
    return db_exec(db, "BEGIN IMMEDIATE", err);
}

int
db_txn_end(sqlite3 *db, int ret, struct err *err)
{
    if (ret == 0) {
        ret = db_exec(db, "COMMIT", err);
        if (ret < 0)
            db_exec(db, "ROLLBACK", NULL);
    } else {
        db_exec(db, "ROLLBACK", NULL);
    }
    return ret;
}

int
db_migrate(sqlite3 *db, const struct db_schema *s, struct err *err)
{
    int64_t version = 0;
    bool found = false;
    int ret = db_exec(db,
                      "CREATE TABLE IF NOT EXISTS schema_versions ("
                      "  component TEXT PRIMARY KEY,"
                      "  version INTEGER NOT NULL"
                      ") WITHOUT ROWID",
                      err);
    if (ret == 0)
        ret = db_int(db, &version, &found, err,
                     "SELECT version FROM schema_versions WHERE component = ?", "t", s->component);
    int64_t legacy = 0;
    if (ret == 0 && s->legacy_user_version)
        ret = db_int(db, &legacy, NULL, err, "PRAGMA user_version", "");
    if (legacy > version)
        version = legacy;
    if (ret == 0 && version > (int64_t)s->n_steps)
        ret = err_set(err, ERR_UNAVAILABLE,
                      "metadata: %s schema version %lld is newer than this berthd knows (%u)",
                      s->component, (long long)version, s->n_steps);
    for (int64_t v = version; ret == 0 && v < (int64_t)s->n_steps; v++)
        ret = db_exec(db, s->steps[v], err);
    if (ret == 0 && (!found || version != (int64_t)s->n_steps))
        ret = db_run(db, NULL, err,
                     "INSERT INTO schema_versions (component, version) VALUES (?, ?) "
                     "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                     "ti", s->component, (int64_t)s->n_steps);
    if (ret == 0 && s->legacy_user_version && legacy != (int64_t)s->n_steps) {
        char sql[48];
        snprintf(sql, sizeof(sql), "PRAGMA user_version = %u", s->n_steps);
        ret = db_exec(db, sql, err);
    }
    return ret;
}
