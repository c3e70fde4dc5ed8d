/* The store's SQLite helper layer: schema versions, arguments, errno mapping. */
#include <check.h>
#include <sqlite3.h>
#include <string.h>

#include "store/db.h"

static sqlite3 *
mem_db(void)
{
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
    return db;
}

static const char *const steps[] = {"CREATE TABLE a (x INTEGER)",
                                    "ALTER TABLE a ADD COLUMN y TEXT"};

START_TEST(migrate_runs_each_step_once_per_component)
{
    sqlite3 *db = mem_db();
    struct err err = {0};
    struct db_schema one = {.component = "c", .steps = steps, .n_steps = 1};
    struct db_schema two = {.component = "c", .steps = steps, .n_steps = 2};
    struct db_schema other = {.component = "d", .steps = steps, .n_steps = 0};
    ck_assert_msg(db_migrate(db, &one, &err) == 0, "%s", err.msg);
    ck_assert_msg(db_migrate(db, &one, &err) == 0, "again: %s", err.msg);
    ck_assert_msg(db_migrate(db, &two, &err) == 0, "%s", err.msg);
    ck_assert_msg(db_migrate(db, &other, &err) == 0, "%s", err.msg);
    int64_t v = 0;
    ck_assert_int_eq(db_int(db, &v, NULL, &err,
                            "SELECT version FROM schema_versions WHERE component = ?", "t", "c"),
                     0);
    ck_assert_int_eq(v, 2);
    ck_assert_int_eq(
        db_run(db, NULL, &err, "INSERT INTO a (x, y) VALUES (?, ?)", "it", (int64_t)7, "seven"), 0);
    ck_assert_int_eq(db_int(db, &v, NULL, &err, "SELECT x FROM a WHERE y = ?", "t", "seven"), 0);
    ck_assert_int_eq(v, 7);
    sqlite3_close(db);
}
END_TEST

START_TEST(migrate_refuses_a_newer_schema)
{
    sqlite3 *db = mem_db();
    struct err err = {0};
    struct db_schema two = {.component = "c", .steps = steps, .n_steps = 2};
    struct db_schema one = {.component = "c", .steps = steps, .n_steps = 1};
    ck_assert_int_eq(db_migrate(db, &two, &err), 0);
    ck_assert_int_eq(db_migrate(db, &one, &err), -ERR_UNAVAILABLE);
    ck_assert_msg(strstr(err.msg, "c schema version 2 is newer"), "%s", err.msg);
    sqlite3_close(db);
}
END_TEST

START_TEST(errors_map_to_errno_values)
{
    sqlite3 *db = mem_db();
    struct err err = {0};
    ck_assert_int_eq(db_code_of(SQLITE_FULL), ENOSPC);
    ck_assert_int_eq(db_code_of(SQLITE_BUSY), EBUSY);
    ck_assert_int_eq(db_code_of(SQLITE_CONSTRAINT_UNIQUE), EINVAL);
    ck_assert_int_eq(db_exec(db, "CREATE TABLE u (k TEXT PRIMARY KEY)", &err), 0);
    ck_assert_int_eq(db_run(db, NULL, &err, "INSERT INTO u VALUES (?)", "t", "a"), 0);
    ck_assert_int_eq(db_run(db, NULL, &err, "INSERT INTO u VALUES (?)", "t", "a"), -EINVAL);
    ck_assert_int_lt(db_exec(db, "NOT SQL", &err), 0);
    ck_assert_msg(strstr(err.msg, "NOT SQL"), "%s", err.msg);
    sqlite3_close(db);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("store_db");
    TCase *tc = tcase_create("db");
    tcase_add_test(tc, migrate_runs_each_step_once_per_component);
    tcase_add_test(tc, migrate_refuses_a_newer_schema);
    tcase_add_test(tc, errors_map_to_errno_values);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
