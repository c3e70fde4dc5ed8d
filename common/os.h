/*
 * The platform seam for what is not a file: random bytes, threads,
 * signals' names, the environment, the process's own usage, running a
 * program and waiting for it, and where the store lives by default. One
 * header; one implementation per OS (os_linux.c, os_windows.c), chosen by
 * the build. The file operations are common/osfs.h (paths) and
 * common/rootdir.h (below a directory); sockets are common/sock.h.
 *
 * Windows (mingw-w64) lacks a few POSIX types, limits and libc functions
 * that the portable code uses. They are supplied here, and only here, so
 * that store/, daemon/ and api/ are written once: a file that needs one
 * includes this header. PATH_MAX is berth's limit on paths below a root,
 * the same 4096 bytes on both (Windows paths go through \\?\ at the OS
 * boundary, so MAX_PATH's 260 does not apply), so that a tree one host
 * accepts, the other accepts too.
 *
 * Any thread, unless a function says otherwise.
 */
#ifndef BERTH_COMMON_OS_H
#define BERTH_COMMON_OS_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/err.h"

#ifdef _WIN32
typedef unsigned int uid_t;
typedef unsigned int gid_t;
#undef PATH_MAX
#define PATH_MAX 4096
#ifndef NAME_MAX
#define NAME_MAX 255
#endif
/* The file types mingw's sys/stat.h leaves out, with Linux's values. */
#ifndef S_IFLNK
#define S_IFLNK 0120000
#endif
#ifndef S_IFSOCK
#define S_IFSOCK 0140000
#endif
#ifndef S_ISLNK
#define S_ISLNK(m) (((m)&S_IFMT) == S_IFLNK)
#endif
#ifndef S_ISSOCK
#define S_ISSOCK(m) (((m)&S_IFMT) == S_IFSOCK)
#endif
#ifndef S_ISBLK
#define S_ISBLK(m) (((m)&S_IFMT) == S_IFBLK)
#endif
#define S_ISUID 04000
#define S_ISGID 02000
#define S_ISVTX 01000
/* Signals the API names (processes' signal requests); Windows has none of
 * them, the runtime driver maps what it can. */
#define SIGHUP 1
#define SIGQUIT 3
#define SIGKILL 9
#define SIGUSR1 10
#define SIGUSR2 12
#define SIGPIPE 13
#define SIGALRM 14
#define SIGCONT 18
#define SIGSTOP 19
#ifndef SIGWINCH
#define SIGWINCH 28
#endif
/* futimens(2)'s special nanosecond values, which rootdir.h takes. */
#define UTIME_NOW ((1l << 30) - 1l)
#define UTIME_OMIT ((1l << 30) - 2l)
/* Errno values mingw's errno.h has not. */
#ifndef EDQUOT
#define EDQUOT 122
#endif
#ifndef ENODATA
#define ENODATA 120
#endif
#ifndef ESTALE
#define ESTALE 141 /* past mingw's last (EWOULDBLOCK 140) */
#endif
char *strndup(const char *s, size_t n);
char *strchrnul(const char *s, int c);
void explicit_bzero(void *p, size_t n);
void *memmem(const void *hay, size_t hlen, const void *needle, size_t nlen);
#endif

/* Fills buf with n bytes from the OS's CSPRNG (getrandom, BCryptGenRandom):
 * 0 or -errno. */
int os_random_bytes(void *buf, size_t n);

/* The calling thread's id, for logs and unique temporary names. */
long os_thread_id(void);

/* The process id. */
long os_pid(void);

/* Lowers the calling thread's scheduling priority (a pool thread that
 * runs long jobs): on Linux to nice steps below the process's own (its
 * main thread's) nice value, at most to 19; to below normal on Windows. */
int os_thread_lower_priority(int nice);

/* Gives the calling thread the process's own priority back (a lowered pool
 * thread running a job a client waits on): the main thread's nice on
 * Linux, normal on Windows. */
int os_thread_restore_priority(void);

/* The signal's name as strsignal(3) says it ("Terminated"), or
 * "Signal N"; a static string. */
const char *os_signal_name(int sig);

/* Sets (replacing) an environment variable of this process: 0 or -errno. */
int os_setenv(const char *name, const char *value);

/* What the process collector of the metrics reports. */
struct os_usage {
    uint64_t rss_bytes; /* resident set (Windows: the working set) */
    uint64_t open_fds;  /* descriptors (Windows: handles) */
    double cpu_seconds; /* user + system */
};

/* Reads this process's usage; blocks briefly (procfs on Linux). */
int os_usage_read(struct os_usage *out, struct err *err);

/*
 * The default store root: on Linux /var/lib/berth for root, else
 * $XDG_DATA_HOME/berth or ~/.local/share/berth; on Windows
 * %ProgramData%\berth (C:\ProgramData\berth without the variable).
 * Caller frees; NULL on OOM.
 */
char *os_default_root(void);
/* Whether berthd runs with the host's full privileges (root on Linux;
 * never assumed on Windows). */
bool os_is_superuser(void);

/* The runtime driver when none is asked for: "oci" on Linux, "hcs" on Windows. */
const char *os_default_runtime(void);

/*
 * Makes a store path given on the command line absolute and of the form
 * the store builds on: on Linux it must already be absolute (EINVAL
 * otherwise) and is kept as it is; on Windows "D:\x", "D:/x", "\\?\D:\x"
 * and, under Wine, "/tmp/x" (on the current drive) are made absolute
 * with GetFullPathNameW and written with '/' separators ("D:/x"), which
 * the store then joins with '/' as on Linux. Caller frees *out.
 */
int os_path_absolute(const char *path, char **out, struct err *err);

/* Is path absolute in this OS's terms ("/x"; "C:\x", "C:/x", "\\server\x")? */
bool os_path_is_absolute(const char *path);

/*
 * Finds an executable named name: a path (with a separator) is taken as
 * it is if it can be run, else each directory of PATH is tried (on
 * Windows with ".exe" appended when name has no extension). A new
 * string, or NULL.
 */
char *os_find_program(const char *name);

/*
 * Runs argv (argv[0] a path from os_find_program) with stdin, stdout and
 * stderr on the null device and waits for it: its exit status in
 * *status (0 is success), or -errno when it could not be started.
 * Blocks: not on the loop.
 */
int os_run_quiet(char *const *argv, int *status, struct err *err);

/* The signals that stop the daemon: SIGTERM and SIGINT on Linux; on
 * Windows SIGINT and SIGBREAK (Ctrl-C and Ctrl-Break, as libuv reports
 * them). *n gets their number. */
const int *os_stop_signals(size_t *n);

/*
 * Raises the soft limit on open descriptors to want, never past the hard
 * limit; *have gets the limit in force afterwards. 0 when it is at least
 * want, -EMFILE when the hard limit is lower. Windows has no such limit
 * on sockets and handles (C runtime descriptors aside, which berth uses
 * for files only): 0 with *have = want.
 */
int os_open_files_raise(uint64_t want, uint64_t *have);

/* Process-wide settings, first thing in main: SIGPIPE ignored on Linux
 * (a write to a closed socket is an error, not death); on Windows stderr
 * in binary mode, so log lines end in "\n" there too. */
void os_process_setup(void);

/*
 * Runs run(arg) as a Windows service: registers with the service control
 * manager (StartServiceCtrlDispatcher), reports the service running, and
 * on the manager's stop or shutdown control calls stop(arg) from the
 * manager's thread (it must only wake the loop: uv_async_send). Returns
 * run's exit code once it returned and the service was reported stopped.
 * ENOTSUP on Linux; EINVAL when the process was not started by the
 * service control manager.
 */
int os_service_run(int (*run)(void *arg), void (*stop)(void *arg), void *arg, struct err *err);

/*
 * The Windows version this process runs on, as the kernel says it
 * (RtlGetNtVersionNumbers: GetVersionEx answers programs without a
 * manifest with Windows 8's numbers) and the update build revision
 * (UBR, from the registry; 0 when it cannot be read): 10, 0, 20348,
 * 2655. ENOTSUP on Linux.
 */
int os_windows_version(unsigned v[4], struct err *err);

/*
 * Can the system library dll (a Windows DLL name) be loaded? Windows:
 * LoadLibraryExW from System32 and FreeLibrary, ERR_UNAVAILABLE "<dll>
 * not found" when it cannot; Linux: ENOTSUP, there are no such
 * libraries. Nothing is kept loaded.
 */
int os_library_probe(const char *dll, struct err *err);

/*
 * A descriptor that becomes readable when process pid exits (Linux's
 * pidfd), or -errno (-ENOSYS where there is none: Windows, old kernels).
 */
int os_pidfd_open(long pid);

#endif
