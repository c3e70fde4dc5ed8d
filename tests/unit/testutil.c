/* Helpers shared by the unit suites, on Linux and under Wine (the
 * temporary directory through common/osfs.h; system() has no wait
 * status to decode on Windows). */
#include "tests/unit/testutil.h"

#include <check.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <sys/wait.h>
#endif

#include "api/router.h"
#include "common/fsutil.h"
#include "common/osfs.h"

char *
tu_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    char *path = NULL;
    ck_assert_int_ge(asprintf(&path, "%s/berth-%s-XXXXXX", base ? base : "/tmp", tag), 0);
    ck_assert_int_eq(osfs_mkdtemp(path), 0);
    return path;
}

void
tu_rmtree(const char *path)
{
    struct err err = {0};
    ck_assert_msg(fs_remove_tree(path, &err) == 0, "remove %s: %s", path, err.msg);
}

void
tu_write(const char *path, const char *content, size_t len)
{
    char *dir = strdup(path);
    char *slash = strrchr(dir, '/');
    struct err err = {0};
    if (slash && slash != dir) {
        *slash = '\0';
        ck_assert_msg(fs_mkdir_p(dir, 0755, &err) == 0, "%s", err.msg);
    }
    free(dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(content, 1, len, f), len);
    fclose(f);
}

int
tu_sh(const char *fmt, ...)
{
    char *cmd = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&cmd, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    int status = system(cmd);
    free(cmd);
#ifdef _WIN32
    return status;
#else
    if (status < 0 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
#endif
}

/* ---- OpenAPI files against routing tables ---------------------------------- */

struct op {
    char method[16];
    char path[256];
};

static size_t
load_ops(const char *path, struct op *ops, size_t max)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "open %s", path);
    char line[4096];
    bool in_paths = false;
    char cur[256] = "";
    size_t n = 0;
    while (fgets(line, sizeof(line), f)) {
        /* A longer line would be read as two, the second misparsed. */
        ck_assert_msg(strchr(line, '\n') || feof(f), "%s: a line over %zu characters", path,
                      sizeof(line) - 2);
        if (strncmp(line, "paths:", 6) == 0) {
            in_paths = true;
            continue;
        }
        if (in_paths && line[0] != ' ' && line[0] != '\n' && line[0] != '#')
            break; /* the next top-level key */
        if (!in_paths)
            continue;
        if (strncmp(line, "  /", 3) == 0) {
            char *colon = strrchr(line, ':');
            ck_assert_ptr_nonnull(colon);
            *colon = '\0';
            snprintf(cur, sizeof(cur), "%s", line + 2);
            continue;
        }
        static const char *const methods[] = {"get", "post", "put", "delete", "patch", NULL};
        for (const char *const *m = methods; *m; m++) {
            char want[32];
            snprintf(want, sizeof(want), "    %s:", *m);
            if (strncmp(line, want, strlen(want)) == 0) {
                ck_assert_uint_lt(n, max);
                for (size_t i = 0; (*m)[i]; i++)
                    ops[n].method[i] = (char)toupper((unsigned char)(*m)[i]);
                ops[n].method[strlen(*m)] = '\0';
                snprintf(ops[n].path, sizeof(ops[n].path), "%s", cur);
                n++;
            }
        }
    }
    fclose(f);
    return n;
}

void
tu_check_openapi_routes(const char *path, const struct route *routes, size_t n,
                        const char *skip_prefix)
{
    char full[1024];
    snprintf(full, sizeof(full), "%s/%s", BERTH_SOURCE_DIR, path);
    struct op ops[256];
    size_t nops = load_ops(full, ops, 256);
    ck_assert_uint_gt(nops, 0);
    for (size_t i = 0; i < n; i++) {
        if (skip_prefix && strncmp(routes[i].pattern, skip_prefix, strlen(skip_prefix)) == 0)
            continue;
        bool found = false;
        for (size_t k = 0; k < nops; k++)
            found |= strcmp(ops[k].method, routes[i].method) == 0 &&
                     strcmp(ops[k].path, routes[i].pattern) == 0;
        ck_assert_msg(found, "route %s %s is not in %s", routes[i].method, routes[i].pattern, path);
    }
    for (size_t k = 0; k < nops; k++) {
        bool found = false;
        for (size_t i = 0; i < n; i++)
            found |= strcmp(ops[k].method, routes[i].method) == 0 &&
                     strcmp(ops[k].path, routes[i].pattern) == 0;
        ck_assert_msg(found, "%s documents %s %s, which is not routed", path, ops[k].method,
                      ops[k].path);
    }
}
