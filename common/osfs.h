/*
 * Files by path: the operations the store and the daemon make on paths
 * they built themselves (the store's layout under its root) or that a
 * trusted caller gave them (an image layout directory on the host). For
 * anything below a root that content controls, use common/rootdir.h,
 * which resolves nothing outside its directory and follows no symlink.
 *
 * Paths are UTF-8 on every OS. On Windows they become wide strings with
 * the \\?\ prefix at the OS boundary (so the 260-character MAX_PATH does
 * not apply), '/' and '\' both separate components, and a relative path
 * is made absolute first. Descriptors are ints, as libuv's uv_file: POSIX
 * descriptors on Linux, C runtime descriptors wrapping HANDLEs on Windows
 * (read(2), write(2) and close(2) work on both), always close-on-exec.
 *
 * The calls are thin, as rootdir.h's: 0 (or a descriptor) or a negative
 * errno, no struct err, because every caller has a path to put in its
 * message. osfs_linux.c and osfs_windows.c implement them.
 *
 * Blocking (disk); any thread.
 */
#ifndef BERTH_COMMON_OSFS_H
#define BERTH_COMMON_OSFS_H

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "common/os.h"

/*
 * The part of struct stat that berth uses, the same on every OS (mingw's
 * struct stat has a 16-bit st_ino and no nanoseconds). Field names are
 * struct stat's, so code reads the same; st_mode holds S_IFMT type bits
 * (S_IFLNK for a symlink, and on Windows for any other reparse point too,
 * so that nothing walks through one) and the permission bits. Windows
 * fills uid and gid with 0, st_ino with the file index, st_dev with the
 * volume serial number.
 */
struct os_stat {
    mode_t st_mode;
    uint64_t st_ino;
    uint64_t st_dev;
    uint64_t st_nlink;
    uid_t st_uid;
    gid_t st_gid;
    uint64_t st_rdev;
    int64_t st_size;
    struct timespec st_atim;
    struct timespec st_mtim;
};

#ifndef _WIN32
/* For the Linux implementations (rootdir_linux.c too): struct stat's fields. */
struct stat;
void osfs_from_stat(const struct stat *s, struct os_stat *o);
#endif

/* Flags for osfs_open beside O_RDONLY, O_WRONLY, O_RDWR, O_CREAT, O_EXCL,
 * O_TRUNC and O_APPEND: the last component must not be a symlink. */
#define OSFS_NOFOLLOW 0x40000000

/* Opens path (flags as open(2), mode for O_CREAT): a descriptor or -errno. */
int osfs_open(const char *path, int flags, mode_t mode);

/* stat(2) (following symlinks) and lstat(2) (not following the last one). */
int osfs_stat(const char *path, struct os_stat *st);
int osfs_lstat(const char *path, struct os_stat *st);
/* fstat(2) of an open descriptor. */
int osfs_fstat(int fd, struct os_stat *st);
/* Whether path exists (not following a last symlink). */
bool osfs_exists(const char *path);

int osfs_mkdir(const char *path, mode_t mode);
int osfs_unlink(const char *path);
int osfs_rmdir(const char *path);
/* chmod(2); on Windows the mode does not map to an ACL and this does nothing. */
int osfs_chmod(const char *path, mode_t mode);

/*
 * Renames from to to. An existing file at to is replaced in one step, as
 * rename(2) does; a directory is moved only where to does not exist (the
 * store never renames a directory over another). Same filesystem only.
 */
int osfs_rename(const char *from, const char *to);

/* fsync(2) of a file, and of the directory at path (its entries durable:
 * on Windows, NTFS journals them and this is FlushFileBuffers on the
 * directory where the OS allows it, else nothing). */
int osfs_fsync(int fd);
int osfs_fsync_dir(const char *path);

/* mkstemp(3): tmpl ends in XXXXXX, which becomes a random name; the new
 * file (0600) is open for reading and writing. A descriptor or -errno. */
int osfs_mkstemp(char *tmpl);
/* mkdtemp(3), the same for a directory (0700). 0 or -errno. */
int osfs_mkdtemp(char *tmpl);

/* Bytes an unprivileged writer may still put on the filesystem of path. */
int osfs_free_bytes(const char *path, uint64_t *out);

/*
 * Marks directory path as the top of unrelated trees (ext4's FS_TOPDIR_FL,
 * chattr +T): each directory made in it is placed by the Orlov allocator
 * in a little-used block group of its own, not in its parent's, and the
 * files of that tree follow it there. Without it every snapshot (or
 * volume) lands in the groups of its parent, where the trees removed
 * before it were; on ext4 without a journal each file creation then skips
 * the group's recently deleted inodes one by one (find_inode_bit ->
 * recently_deleted), which cost a cold import most of its CPU time
 * (bench/README.md, issue 16). 0, or -errno where the filesystem has no
 * such flag (-ENOTTY, -EOPNOTSUPP, -EINVAL; Windows: -EOPNOTSUPP).
 */
int osfs_dir_spread(const char *path);

/*
 * Directory listings. A listing opened on a path, or on a directory
 * descriptor of rootdir.h (which stays the caller's), gives the names of
 * the entries one at a time, never "." or "..", in no particular order.
 */
struct osfs_dir;
int osfs_dir_open(const char *path, struct osfs_dir **out);
int osfs_dir_open_at(int dirfd, struct osfs_dir **out);
/* The next name (valid until the next call), NULL at the end; *err
 * (may be NULL) is set to a negative errno when reading failed. */
const char *osfs_dir_next(struct osfs_dir *d, int *err);
/* Starts again from the first entry. */
void osfs_dir_rewind(struct osfs_dir *d);
/* NULL is a no-op. */
void osfs_dir_close(struct osfs_dir *d);

#endif
