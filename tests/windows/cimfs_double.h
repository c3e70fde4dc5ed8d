/*
 * What the suites that drive the TEST DOUBLE of cimfs.dll
 * (tests/doubles/cimfs/) share: the double's path beside the suite, its
 * directory (BERTH_CIMFS_DOUBLE_DIR: its log, its mounts, and a cims\
 * folder for the suite's images) inside the test's own directory from
 * wcs_double.h, what the double wrote there, and how many files a folder
 * of it holds. Header-only (static functions): each suite is one
 * executable. Windows only; the suite's thread.
 */
#ifndef BERTH_TESTS_WINDOWS_CIMFS_DOUBLE_H
#define BERTH_TESTS_WINDOWS_CIMFS_DOUBLE_H

#include "store/cimfs_api.h"
#include "wcs_double.h"

static char cimfs_dbl_path[MAX_PATH + 32];
static char cimfs_dir[MAX_PATH + 80];  /* the double's directory, in wcs_tmp */
static char cimfs_cims[MAX_PATH + 96]; /* cimfs_dir\cims */

/* After wcs_double_setup: the double's path, a fresh cimfs_dir and cims\,
 * and the double pointed at them with no failure asked for. */
static inline void
cimfs_double_setup(void)
{
    char exe[MAX_PATH];
    GetModuleFileNameA(NULL, exe, sizeof(exe));
    char *slash = strrchr(exe, '\\');
    if (slash)
        *slash = '\0';
    snprintf(cimfs_dbl_path, sizeof(cimfs_dbl_path), "%s\\cimfs-double\\cimfs.dll", exe);
    snprintf(cimfs_dir, sizeof(cimfs_dir), "%s\\cimfs", wcs_tmp);
    ck_assert(CreateDirectoryA(cimfs_dir, NULL));
    snprintf(cimfs_cims, sizeof(cimfs_cims), "%s\\cims", cimfs_dir);
    ck_assert(CreateDirectoryA(cimfs_cims, NULL));
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_DIR", cimfs_dir);
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", NULL);
}

/* The whole set-up of a suite that calls cimfs.dll's table itself: the
 * test's directory, the double's, and the table opened on the double. */
static inline struct cimfs_api *
cimfs_double_open(const char *tag)
{
    wcs_double_setup(tag);
    cimfs_double_setup();
    struct cimfs_api *api = NULL;
    struct err err = {0};
    ck_assert_msg(cimfs_api_open(cimfs_dbl_path, &api, &err) == 0, "%s", err.msg);
    return api;
}

static inline void
cimfs_double_close(struct cimfs_api *api)
{
    cimfs_api_free(api);
    wcs_double_teardown();
}

/* The whole of a file under cimfs_dir ("calls.log", "cims\\base.cim"), or "" (static). */
static inline const char *
cimfs_slurp(const char *rel)
{
    static char out[65536];
    out[0] = '\0';
    char path[MAX_PATH * 2];
    snprintf(path, sizeof(path), "%s\\%s", cimfs_dir, rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        return out;
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    fclose(f);
    return out;
}

/* How many files (not folders) cimfs_dir\rel holds. */
static inline int
cimfs_files_in(const char *rel)
{
    char pat[MAX_PATH * 2];
    snprintf(pat, sizeof(pat), "%s\\%s\\*", cimfs_dir, rel);
    WIN32_FIND_DATAA fd;
    HANDLE f = FindFirstFileA(pat, &fd);
    int n = 0;
    if (f != INVALID_HANDLE_VALUE) {
        do
            n += !(fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY);
        while (FindNextFileA(f, &fd));
        FindClose(f);
    }
    return n;
}

#endif
