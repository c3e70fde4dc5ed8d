/* Helpers shared by the unit suites, on Linux and under Wine (the
 * temporary directory through common/osfs.h; system() has no wait
 * status to decode on Windows). */
#include "tests/unit/testutil.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <sys/wait.h>
#endif

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
