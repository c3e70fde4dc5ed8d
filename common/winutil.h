/*
 * What the Windows files of the platform seam (os_windows.c,
 * osfs_windows.c, rootdir_windows.c, sock_windows.c) share: UTF-8 and
 * wide strings, paths in their \\?\ form, Windows and NT errors as
 * errno values, HANDLEs inside C runtime descriptors, and struct
 * os_stat from a handle. Windows only. The strings (win_wide, win_wide_sep, win_utf8)
 * serve every Windows file (the drivers and store backends had four
 * copies of win_wide); the rest is for the seam only.
 * Any thread.
 */
#ifndef BERTH_COMMON_WINUTIL_H
#define BERTH_COMMON_WINUTIL_H

#ifndef _WIN32
#error "common/winutil.h is for the Windows build only"
#endif

#include <windows.h>
#include <winternl.h>

#include "common/osfs.h"

/* A new wide copy of UTF-8 s (caller frees), NULL for bad UTF-8 or OOM. */
wchar_t *win_wide(const char *s);
/* win_wide with every '/' made '\\' (a path as a tar or a record names it). */
wchar_t *win_wide_sep(const char *s);
/* A new UTF-8 copy of wide w (caller frees), NULL on OOM. */
char *win_utf8(const wchar_t *w);

/*
 * The \\?\ form of path (caller frees): made absolute with
 * GetFullPathNameW (which also folds '/' into '\', "." and ".."), so the
 * OS takes it as it is, whatever its length. A path already in \\?\ form
 * is kept. NULL with *err set (-ENOMEM, -EILSEQ for bad UTF-8).
 */
wchar_t *win_long_path(const char *path, int *err);

/* errno for a GetLastError() value, and for an NTSTATUS. */
int win_errno(DWORD e);
int win_nt_errno(NTSTATUS st);

/* The HANDLE of a descriptor, INVALID_HANDLE_VALUE for a bad one. */
HANDLE win_handle(int fd);
/* A descriptor owning h (binary mode), or -errno (h is closed then). */
int win_fd(HANDLE h);

/* Fills st from an open handle (any type, reparse points included). */
int win_stat_handle(HANDLE h, struct os_stat *st);

/*
 * NtCreateFile of name (one component, or L"" for dir itself) relative
 * to the directory handle dir, never following a reparse point
 * (FILE_OPEN_REPARSE_POINT), shared for reading, writing and deleting as
 * POSIX files are, synchronous. disposition is FILE_OPEN, FILE_CREATE
 * or FILE_OPEN_IF; options add FILE_DIRECTORY_FILE or
 * FILE_NON_DIRECTORY_FILE. 0 with *out, or -errno; *info (may be NULL)
 * gets FILE_CREATED or FILE_OPENED.
 */
int win_nt_open(HANDLE dir, const wchar_t *name, ACCESS_MASK access, ULONG disposition,
                ULONG options, HANDLE *out, ULONG_PTR *info);

/*
 * Deletes what h is open on (it has DELETE access): with POSIX semantics
 * where Windows has them (10 1607+: the name goes at once, even while
 * others have it open), else at the last close. -ENOTEMPTY for a
 * directory with entries, -EACCES for a read-only file.
 */
int win_delete_handle(HANDLE h);

/* FILETIME-style 100 ns ticks since 1601 from a timespec, and back. */
LONGLONG win_ticks(const struct timespec *ts);
struct timespec win_timespec(LONGLONG ticks);

#endif
