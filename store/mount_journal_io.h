/*
 * The file operations of the mount journal (store/mount_journal.h), one
 * implementation per OS: mount_journal_io_linux.c (POSIX calls, no fsync:
 * an overlay mount does not outlive the boot, see there) and
 * mount_journal_io_windows.c (wide-string Win32 calls, FlushFileBuffers,
 * MoveFileExW with MOVEFILE_WRITE_THROUGH).
 * Paths are UTF-8; names are single components the journal made itself.
 * Return 0 (or a length) or a negative errno; no struct err: the journal
 * puts the names in its messages. Blocking (disk); any thread.
 */
#ifndef BERTH_STORE_MOUNT_JOURNAL_IO_H
#define BERTH_STORE_MOUNT_JOURNAL_IO_H

#include <stddef.h>

/* Creates dir and its missing parents (0700 where modes apply). */
int mj_io_mkdir(const char *dir);

/*
 * Writes data to dir/tmp and renames it over dir/name (durably where the
 * OS's file says so). On failure dir/tmp is removed.
 */
int mj_io_write_atomic(const char *dir, const char *tmp, const char *name, const void *data,
                       size_t len);

/* Reads dir/name (at most max bytes: -EFBIG past it) into a new
 * NUL-terminated buffer. -ENOENT when it does not exist. */
int mj_io_read(const char *dir, const char *name, size_t max, char **out, size_t *len);

/* Removes dir/name (durably where the OS's file says so); a missing one is 0. */
int mj_io_remove(const char *dir, const char *name);

/* Renames dir/from to dir/to, replacing it. */
int mj_io_rename(const char *dir, const char *from, const char *to);

/* The names in dir (not "." or ".."), a new NULL-terminated vector
 * (strv_free). */
int mj_io_list(const char *dir, char ***names);

/* A number that differs between threads and processes, for temporary names. */
unsigned long mj_io_unique(void);

#endif
