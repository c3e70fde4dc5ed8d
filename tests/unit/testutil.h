/* Helpers shared by the unit suites: temporary directories, small files. */
#ifndef BERTH_TESTS_TESTUTIL_H
#define BERTH_TESTS_TESTUTIL_H

#include <stddef.h>

struct route;

/* Creates a fresh directory under $TMPDIR (or /tmp); caller frees the path. */
char *tu_tmpdir(const char *tag);
/* Removes a tree made by the test (aborts the test on failure). */
void tu_rmtree(const char *path);
/* Writes a file with content, creating parents. */
void tu_write(const char *path, const char *content, size_t len);
/* Runs a shell command, returns its exit status (or -1). */
int tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Checks that the OpenAPI file at path (relative to the source tree) and
 * the n routes describe the same operations: every route is documented
 * and every documented path and method routed. Routes whose pattern starts
 * with skip_prefix (NULL: none) are exempt. Fails the test otherwise.
 */
void tu_check_openapi_routes(const char *path, const struct route *routes, size_t n,
                             const char *skip_prefix);

#endif
