/*
 * What the suites that drive the TEST DOUBLE of computestorage.dll
 * (tests/doubles/computestorage/) share: a fresh temporary directory per
 * test, the double's log directory in it (BERTH_HCS_STORAGE_DOUBLE_DIR),
 * the path of the double beside the suite, and the calls it logged.
 * Header-only (static functions): each suite is one executable. Windows
 * only; the suite's thread.
 */
#ifndef BERTH_TESTS_WINDOWS_WCS_DOUBLE_H
#define BERTH_TESTS_WINDOWS_WCS_DOUBLE_H

#include <windows.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char wcs_dbl_path[MAX_PATH + 40];
static char wcs_tmp[MAX_PATH + 64];     /* this test's directory */
static char wcs_log_dir[MAX_PATH + 80]; /* the double's log, inside it */

static inline void
wcs_rm_tree(const char *p)
{
    char pat[MAX_PATH * 2];
    snprintf(pat, sizeof(pat), "%s\\*", p);
    WIN32_FIND_DATAA fd;
    HANDLE f = FindFirstFileA(pat, &fd);
    if (f != INVALID_HANDLE_VALUE) {
        do {
            if (strcmp(fd.cFileName, ".") == 0 || strcmp(fd.cFileName, "..") == 0)
                continue;
            char c[MAX_PATH * 2];
            snprintf(c, sizeof(c), "%s\\%s", p, fd.cFileName);
            if (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) {
                wcs_rm_tree(c);
            } else {
                SetFileAttributesA(c, FILE_ATTRIBUTE_NORMAL);
                DeleteFileA(c);
            }
        } while (FindNextFileA(f, &fd));
        FindClose(f);
    }
    RemoveDirectoryA(p);
}

/* A fresh directory and log; the double's path. */
static inline void
wcs_double_setup(const char *tag)
{
    static int n;
    char exe[MAX_PATH];
    GetModuleFileNameA(NULL, exe, sizeof(exe));
    char *slash = strrchr(exe, '\\');
    if (slash)
        *slash = '\0';
    snprintf(wcs_dbl_path, sizeof(wcs_dbl_path), "%s\\hcs-storage-double\\computestorage.dll", exe);
    char tmp[MAX_PATH];
    GetTempPathA(sizeof(tmp), tmp);
    snprintf(wcs_tmp, sizeof(wcs_tmp), "%sberth-%s-%lu-%d", tmp, tag, GetCurrentProcessId(), ++n);
    wcs_rm_tree(wcs_tmp);
    ck_assert(CreateDirectoryA(wcs_tmp, NULL));
    snprintf(wcs_log_dir, sizeof(wcs_log_dir), "%s\\double-log", wcs_tmp);
    ck_assert(CreateDirectoryA(wcs_log_dir, NULL));
    SetEnvironmentVariableA("BERTH_HCS_STORAGE_DOUBLE_DIR", wcs_log_dir);
    SetEnvironmentVariableA("BERTH_HCS_STORAGE_DOUBLE_FAIL", NULL);
}

static inline void
wcs_double_teardown(void)
{
    wcs_rm_tree(wcs_tmp);
}

/* wcs_tmp\rel, in a static buffer of its own per slot (0-3). */
static inline const char *
wcs_path(int slot, const char *rel)
{
    static char buf[4][MAX_PATH * 2];
    snprintf(buf[slot], sizeof(buf[slot]), "%s\\%s", wcs_tmp, rel);
    return buf[slot];
}

/* The calls the double logged, function names only, each followed by a space. */
static inline const char *
wcs_calls(void)
{
    static char out[8192];
    out[0] = '\0';
    char path[MAX_PATH * 2];
    snprintf(path, sizeof(path), "%s\\calls.log", wcs_log_dir);
    FILE *log = fopen(path, "rb");
    if (!log)
        return out;
    char line[2048], name[128];
    while (fgets(line, sizeof(line), log)) {
        if (sscanf(line, "%*u %127s", name) == 1 && strlen(out) + strlen(name) + 2 < sizeof(out)) {
            strcat(out, name);
            strcat(out, " ");
        }
    }
    fclose(log);
    return out;
}

/* The document of the nth (1-based) call of fn, as text (caller frees); NULL when none. */
static inline char *
wcs_doc(const char *fn, int nth)
{
    char path[MAX_PATH * 2];
    snprintf(path, sizeof(path), "%s\\calls.log", wcs_log_dir);
    FILE *log = fopen(path, "rb");
    if (!log)
        return NULL;
    char line[2048], name[128];
    unsigned seq = 0, s;
    while (!seq && fgets(line, sizeof(line), log))
        if (sscanf(line, "%u %127s", &s, name) == 2 && strcmp(name, fn) == 0 && --nth == 0)
            seq = s;
    fclose(log);
    if (!seq)
        return NULL;
    snprintf(path, sizeof(path), "%s\\%04u-%s.json", wcs_log_dir, seq, fn);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *text = calloc(1, 65536);
    if (text)
        fread(text, 1, 65535, f);
    fclose(f);
    return text;
}

static inline bool
wcs_exists(const char *p)
{
    return GetFileAttributesA(p) != INVALID_FILE_ATTRIBUTES;
}

static inline void
wcs_write(const char *p, const char *text)
{
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

#endif
