/*
 * The one SQLite helper layer of the store (meta.c, volume_meta.c and
 * gc.c use it; nothing else touches sqlite3 directly): statements
 * prepared with bound arguments, SQLite result codes mapped to errno
 * values, transactions, and one schema-version scheme.
 *
 * Arguments are described by a string of type letters, one per '?': 't'
 * a const char * (NULL binds NULL), 'i' an int64_t.
 *
 * Schemas: each part of the store that keeps tables (a "component":
 * "meta", "volumes") lists its migrations in order, step N taking its
 * tables from version N to N + 1; db_migrate runs the steps a database
 * has not seen, inside the caller's transaction, and records the version
 * in the schema_versions table. A database newer than this berthd knows is
 * refused (ERR_UNAVAILABLE), never written.
 *
 * Blocking; the caller serialises use of a connection (meta.c's mutex).
 */
#ifndef BERTH_STORE_DB_H
#define BERTH_STORE_DB_H

#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

static inline void
db_stmt_cleanup_fn(sqlite3_stmt **st)
{
    sqlite3_finalize(*st);
}
#define cleanup_stmt __attribute__((cleanup(db_stmt_cleanup_fn)))

/* The errno value for an SQLite result code (ENOSPC for SQLITE_FULL...). */
int db_code_of(int rc);
/* Sets err from the connection's last error as "what: message"; returns -code. */
int db_err(sqlite3 *db, int rc, struct err *err, const char *what);

/* Runs SQL text without arguments (several statements allowed). */
int db_exec(sqlite3 *db, const char *sql, struct err *err);

int db_prepare(sqlite3 *db, sqlite3_stmt **out, struct err *err, const char *sql, const char *types,
               ...);
int db_vprepare(sqlite3 *db, sqlite3_stmt **out, struct err *err, const char *sql,
                const char *types, va_list ap);

/* Runs a statement that returns no rows; *changes (may be NULL) gets the row count. */
int db_run(sqlite3 *db, int *changes, struct err *err, const char *sql, const char *types, ...);

/* Runs a query for one int64; *found (may be NULL) says whether a row came (*out 0 if not). */
int db_int(sqlite3 *db, int64_t *out, bool *found, struct err *err, const char *sql,
           const char *types, ...);

/* Steps st once more: 1 with a row, 0 at the end, or -errno. */
int db_step(sqlite3 *db, sqlite3_stmt *st, struct err *err);

/* A column's text as a new string ("" for NULL); NULL on OOM. */
char *db_text_dup(sqlite3_stmt *st, int col);

/* BEGIN IMMEDIATE; and COMMIT when ret is 0, else ROLLBACK (returns ret or the commit's error). */
int db_txn_begin(sqlite3 *db, struct err *err);
int db_txn_end(sqlite3 *db, int ret, struct err *err);

struct db_schema {
    const char *component;
    const char *const *steps; /* SQL of each migration, in order */
    unsigned n_steps;         /* the version the steps lead to */
    /* The component kept its version in PRAGMA user_version before
     * schema_versions existed (meta.c): it is still read and written. */
    bool legacy_user_version;
};

/* Brings component's tables to its latest version (see the top); inside a transaction. */
int db_migrate(sqlite3 *db, const struct db_schema *s, struct err *err);

#endif
