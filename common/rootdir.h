/*
 * Rooted directory operations: every file operation below a root happens
 * relative to an open directory descriptor, follows no symlink and cannot
 * resolve outside the directory it starts from. Nothing here reads or
 * changes the process's working directory, so any number of threads may
 * use it at once, each below a root of its own.
 *
 * The store's tar extraction (image layers, volume uploads) goes through
 * this interface only: rootdir_linux.c implements it with openat2
 * (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) where
 * the kernel has it and a walk of openat(O_NOFOLLOW) per component where
 * it does not, and the *at() calls on the directory descriptor;
 * rootdir_windows.c with NtCreateFile relative to a directory handle, one
 * component at a time, with FILE_OPEN_REPARSE_POINT so that no reparse
 * point (symlink, junction, mount point) is ever followed, and
 * NtSetInformationFile for links, renames and deletes on handles.
 *
 * Descriptors are ints, as libuv's uv_file: POSIX descriptors here, C
 * runtime descriptors wrapping HANDLEs on Windows. Names are UTF-8; on
 * Windows a name that NTFS cannot hold as one component (a '\', a ':'
 * that would name an alternate data stream, <>"|?* or a control
 * character, a trailing dot or space) is -EILSEQ. "name" arguments are
 * one path component (no '/'); "rel" arguments are relative paths of
 * components without "." or ".." (the caller cleaned them). The calls are
 * thin: they return 0 (or a new descriptor, or a length) or a negative
 * errno and set no struct err, because every caller has an entry name to
 * put in its message and branches on the errno (EEXIST, ENOENT, ELOOP).
 *
 * Blocking (disk); any thread.
 */
#ifndef BERTH_COMMON_ROOTDIR_H
#define BERTH_COMMON_ROOTDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "common/os.h"
#include "common/osfs.h"

/* Opens the root itself, an absolute path that the caller trusts (a
 * directory of the store, or /proc/self/fd/N of one, which is why the
 * path may end in a symlink): a directory descriptor, or -errno. */
int rootdir_open(const char *path);

/*
 * Opens the existing directory rel beneath base ("" opens base again).
 * No component may be a symlink (-ELOOP) or anything but a directory
 * (-ENOTDIR); a missing one is -ENOENT. The result can be read (readdir,
 * xattrs) and used as the base of every other call here.
 */
int rootdir_open_dir(int base, const char *rel);

/*
 * Opens directory name in dir, creating it with mode when missing
 * (*created says which). A symlink or non-directory there fails as
 * rootdir_open_dir does.
 */
int rootdir_open_or_make_dir(int dir, const char *name, mode_t mode, bool *created);

/*
 * A handle on the entry rel beneath base whatever its type, the last
 * component not followed either: only for stat, owner, times and xattrs.
 */
int rootdir_open_node(int base, const char *rel);

/* Opens the existing regular file name in dir for reading, never
 * through a symlink and without opening anything else that may have been
 * put there (-EINVAL): see rootdir_fd_reopen_regular. */
int rootdir_open_file(int dir, const char *name);

/*
 * Opens rel for reading as a process chrooted at root would see it:
 * symlinks are followed, but an absolute one or ".." never leaves root
 * (openat2 RESOLVE_IN_ROOT), and only a regular file is opened (a FIFO
 * or device node there is -EINVAL, never opened). For files
 * inside a container's rootfs (its /etc/passwd). -ENOTSUP on Windows,
 * whose containers have no such files.
 */
int rootdir_open_in_root(int root, const char *rel);

/*
 * Opens the directory rel as rootdir_open_in_root resolves it (symlinks
 * followed, never out of root; "" is root itself): a descriptor to read
 * it and to use as the base of the calls here. -ENOTDIR when rel is not
 * a directory. -ENOTSUP on Windows.
 */
int rootdir_open_dir_in_root(int root, const char *rel);

/*
 * Where rel leads inside root, symlinks (the last one too) followed as
 * rootdir_open_in_root does: the absolute path from root's "/" in buf
 * (NUL-terminated), its length, or -errno (-ENOENT when it leads
 * nowhere, -ENAMETOOLONG when it does not fit). -ENOTSUP on Windows.
 */
ssize_t rootdir_resolve_in_root(int root, const char *rel, char *buf, size_t len);

/*
 * Where fd (a descriptor opened below root, e.g. by
 * rootdir_open_dir_in_root) is inside root, as rootdir_resolve_in_root
 * gives it: read from the descriptor, so the path is that of the very
 * directory fd holds, whatever symlinks of the path changed since it was
 * opened. -EXDEV when fd is not below root (moved out since), -ENOTSUP
 * on Windows.
 */
ssize_t rootdir_fd_path_in_root(int root, int fd, char *buf, size_t len);

/*
 * Opens, for reading, the regular file that pathfd (a descriptor opened
 * with O_PATH, which never runs the file's open) refers to, or -EINVAL
 * when it is anything else. A tree a container can write holds whatever
 * the container put there, device nodes included (its device cgroup lets
 * root mknod any device, only opening them inside is refused): opening
 * one from the daemon, root on the host, would run that device's driver
 * (arm a watchdog, rewind a tape, raise a serial line), and opening a
 * FIFO would block. So such files are first opened O_PATH, checked, and
 * only then opened for real, through the descriptor (same inode). With
 * want, the file must also still be that inode (st_dev, st_ino), else
 * -ESTALE. pathfd stays the caller's. Linux only (O_PATH): the Windows
 * side refuses such files in its opens.
 */
int rootdir_fd_reopen_regular(int pathfd, const struct stat *want);

/* Creates the regular file name in dir (it must not exist) with mode,
 * open for writing. */
int rootdir_create_file(int dir, const char *name, mode_t mode);

/* stat of name in dir, not following it; "" is dir itself (any descriptor). */
int rootdir_stat(int dir, const char *name, struct os_stat *st);

/* The target of the symlink name in dir, not NUL-terminated: its length,
 * or -errno (-EINVAL when it is not a symlink). */
ssize_t rootdir_readlink(int dir, const char *name, char *buf, size_t len);

/* A second descriptor of the same open directory or file, or -errno. */
int rootdir_dup(int fd);

int rootdir_mkdir(int dir, const char *name, mode_t mode);
/* On Windows a symlink reparse point (a directory one when target names
 * an existing directory); -EPERM without the privilege to make one,
 * -EOPNOTSUPP where the filesystem has none (Wine). */
int rootdir_symlink(int dir, const char *name, const char *target);
/* A device node or FIFO: mode carries the type (S_IFCHR, S_IFBLK, S_IFIFO).
 * -EOPNOTSUPP on Windows. */
int rootdir_mknod(int dir, const char *name, mode_t mode, dev_t dev);
/* A hard link name in dir to from_name in from_dir (not followed). */
int rootdir_link(int from_dir, const char *from_name, int dir, const char *name);
/* Removes name (an empty directory when is_dir). */
int rootdir_remove(int dir, const char *name, bool is_dir);
/* Renames from_dir/from to to_dir/to, which must not exist (-EEXIST). */
int rootdir_rename(int from_dir, const char *from, int to_dir, const char *to);
/* Renames from_dir/from over to_dir/to in one step, replacing a file
 * there (rename(2)). */
int rootdir_replace(int from_dir, const char *from, int to_dir, const char *to);
/*
 * Swaps two existing entries: in one step on Linux (-EINVAL where the
 * filesystem cannot); on Windows, which has no such call, in three
 * renames through a parked name beside a (ROOTDIR_EXCHANGE_PARK + a), so
 * that rootdir_exchange_repair() can finish or undo one a crash cut short.
 */
int rootdir_exchange(int dir_a, const char *a, int dir_b, const char *b);
#define ROOTDIR_EXCHANGE_PARK ".berth-exchange."
/* Before deciding whether an exchange of these entries happened: puts
 * back or completes one left half-done (Windows); 0 when there was none
 * (always on Linux). */
int rootdir_exchange_repair(int dir_a, const char *a, int dir_b, const char *b);

/*
 * Metadata of name in dir, never following it ("" is dir itself). Owner
 * and times work on every type; an xattr on a symlink or device goes
 * through a handle on the entry itself.
 */
int rootdir_set_owner(int dir, const char *name, uid_t uid, gid_t gid);
/* Not for symlinks (-EOPNOTSUPP), whose mode means nothing. */
int rootdir_set_mode(int dir, const char *name, mode_t mode);
int rootdir_set_times(int dir, const char *name, const struct timespec ts[2]);
int rootdir_set_xattr(int dir, const char *name, const char *key, const void *value, size_t len);
/* The value's length, or -errno (-ENODATA when absent). */
ssize_t rootdir_get_xattr(int dir, const char *name, const char *key, void *buf, size_t len);

/* On an open file or directory descriptor. */
/* Writes all of buf at off (a short write is retried); 0 or -errno. */
int rootdir_fd_write_at(int fd, const void *buf, size_t len, int64_t off);
int rootdir_fd_truncate(int fd, int64_t size);
/* Closes fd (a negative fd is ignored); the error of close(2), if any. */
int rootdir_close(int fd);
int rootdir_fd_set_mode(int fd, mode_t mode);
int rootdir_fd_set_owner(int fd, uid_t uid, gid_t gid);
int rootdir_fd_set_times(int fd, const struct timespec ts[2]);
int rootdir_fd_set_xattr(int fd, const char *key, const void *value, size_t len);
ssize_t rootdir_fd_get_xattr(int fd, const char *key, void *buf, size_t len);
int rootdir_fd_remove_xattr(int fd, const char *key);
/* Lists xattr names (NUL-separated) into buf; the length or -errno. */
ssize_t rootdir_fd_list_xattrs(int fd, char *buf, size_t len);
/* Clears the immutable and append-only flags, so the file can go (on
 * Windows the read-only attribute). */
int rootdir_fd_clear_flags(int fd);
/* Makes everything written on fd's filesystem durable (Windows: a flush
 * of the volume, which needs administrator rights; without them each
 * file was flushed as it was closed, and this does nothing). */
int rootdir_fd_sync_fs(int fd);

/* The process's umask, read without changing it (umask(2) would, for
 * every thread at once); -1 when it cannot be known (always on Windows,
 * whose modes are not the files' ACLs). */
int rootdir_umask(void);

/* For tests: use the component walk even where openat2 exists. */
void rootdir_test_force_walk(bool on);

#endif
