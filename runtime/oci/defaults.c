/*
 * Security defaults of oci containers. Static data plus one builder;
 * any thread.
 *
 * The seccomp profile follows Docker's default (moby
 * profiles/seccomp/default.json) for a container with Docker's default
 * capabilities, with these differences:
 *  - Rules gated on capabilities a berth container never has (SYS_ADMIN,
 *    SYS_BOOT, SYS_MODULE, SYS_NICE, SYS_PACCT, SYS_RAWIO, SYS_TIME,
 *    SYS_TTY_CONFIG, SYSLOG, BPF, PERFMON, DAC_READ_SEARCH, ...) are left
 *    out rather than evaluated: berth has no per-container capability
 *    option, so they could never apply.
 *  - Architectures are the host's family only (x86_64 with its x86 and
 *    x32 ABIs, or aarch64 with arm), not every one Docker lists; x32
 *    only where the kernel runs x32 syscalls (most distribution kernels
 *    boot with it off). A filter without an ABI refuses that ABI's
 *    syscalls, so this refuses nothing the kernel would have run, and
 *    runc's filter build is ~6 ms of CPU shorter per container (~14 ms
 *    of a start at a load of 6: bench/README.md).
 *  - The s390-specific clone rule and syscalls of other architectures
 *    are left out.
 * As in Docker: clone may not create namespaces, clone3 fails with ENOSYS
 * (so libcs fall back to clone, whose flags the filter can see), socket
 * may not open AF_VSOCK, personality takes only the values Docker allows,
 * and ptrace and friends are allowed (kernel >= 4.8 makes that safe).
 * Syscalls this libseccomp does not know are skipped by runc.
 */
#include "runtime/oci/defaults.h"

#include <linux/fs.h>

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

const char *const rt_oci_default_caps[] = {
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
    NULL,
};

const char *const rt_oci_default_masked_paths[] = {
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
    NULL,
};

const char *const rt_oci_default_readonly_paths[] = {
    "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", NULL,
};

/* Allowed unconditionally (Docker's first, large rule). */
static const char *const allowed[] = {
    "accept",
    "accept4",
    "access",
    "adjtimex",
    "alarm",
    "bind",
    "brk",
    "cachestat",
    "capget",
    "capset",
    "chdir",
    "chmod",
    "chown",
    "chown32",
    "chroot",
    "clock_adjtime",
    "clock_adjtime64",
    "clock_getres",
    "clock_getres_time64",
    "clock_gettime",
    "clock_gettime64",
    "clock_nanosleep",
    "clock_nanosleep_time64",
    "close",
    "close_range",
    "connect",
    "copy_file_range",
    "creat",
    "dup",
    "dup2",
    "dup3",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_ctl_old",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "epoll_wait_old",
    "eventfd",
    "eventfd2",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "faccessat",
    "faccessat2",
    "fadvise64",
    "fadvise64_64",
    "fallocate",
    "fanotify_mark",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "fchown",
    "fchown32",
    "fchownat",
    "fcntl",
    "fcntl64",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "flock",
    "fork",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstat64",
    "fstatat64",
    "fstatfs",
    "fstatfs64",
    "fsync",
    "ftruncate",
    "ftruncate64",
    "futex",
    "futex_requeue",
    "futex_time64",
    "futex_wait",
    "futex_waitv",
    "futex_wake",
    "futimesat",
    "getcpu",
    "getcwd",
    "getdents",
    "getdents64",
    "getegid",
    "getegid32",
    "geteuid",
    "geteuid32",
    "getgid",
    "getgid32",
    "getgroups",
    "getgroups32",
    "getitimer",
    "getpeername",
    "getpgid",
    "getpgrp",
    "getpid",
    "getppid",
    "getpriority",
    "getrandom",
    "getresgid",
    "getresgid32",
    "getresuid",
    "getresuid32",
    "getrlimit",
    "get_robust_list",
    "getrusage",
    "getsid",
    "getsockname",
    "getsockopt",
    "get_thread_area",
    "gettid",
    "gettimeofday",
    "getuid",
    "getuid32",
    "getxattr",
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    "io_cancel",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "io_pgetevents_time64",
    "ioprio_get",
    "ioprio_set",
    "io_setup",
    "io_submit",
    "ipc",
    "kill",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "lchown",
    "lchown32",
    "lgetxattr",
    "link",
    "linkat",
    "listen",
    "listxattr",
    "llistxattr",
    "_llseek",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lstat",
    "lstat64",
    "madvise",
    "map_shadow_stack",
    "membarrier",
    "memfd_create",
    "memfd_secret",
    "mincore",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "mlock",
    "mlock2",
    "mlockall",
    "mmap",
    "mmap2",
    "mprotect",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedreceive_time64",
    "mq_timedsend",
    "mq_timedsend_time64",
    "mq_unlink",
    "mremap",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    "name_to_handle_at",
    "nanosleep",
    "newfstatat",
    "_newselect",
    "open",
    "openat",
    "openat2",
    "pause",
    "pidfd_open",
    "pidfd_send_signal",
    "pipe",
    "pipe2",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "poll",
    "ppoll",
    "ppoll_time64",
    "prctl",
    "pread64",
    "preadv",
    "preadv2",
    "prlimit64",
    "process_mrelease",
    "pselect6",
    "pselect6_time64",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readlink",
    "readlinkat",
    "readv",
    "recv",
    "recvfrom",
    "recvmmsg",
    "recvmmsg_time64",
    "recvmsg",
    "remap_file_pages",
    "removexattr",
    "rename",
    "renameat",
    "renameat2",
    "restart_syscall",
    "rseq",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_sigtimedwait_time64",
    "rt_tgsigqueueinfo",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_rr_get_interval_time64",
    "sched_setaffinity",
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    "sched_yield",
    "seccomp",
    "select",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "semtimedop_time64",
    "send",
    "sendfile",
    "sendfile64",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "setfsgid",
    "setfsgid32",
    "setfsuid",
    "setfsuid32",
    "setgid",
    "setgid32",
    "setgroups",
    "setgroups32",
    "setitimer",
    "setpgid",
    "setpriority",
    "setregid",
    "setregid32",
    "setresgid",
    "setresgid32",
    "setresuid",
    "setresuid32",
    "setreuid",
    "setreuid32",
    "setrlimit",
    "set_robust_list",
    "setsid",
    "setsockopt",
    "set_thread_area",
    "set_tid_address",
    "setuid",
    "setuid32",
    "setxattr",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "shutdown",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "sigprocmask",
    "sigreturn",
    "socketcall",
    "socketpair",
    "splice",
    "stat",
    "stat64",
    "statfs",
    "statfs64",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "syncfs",
    "sysinfo",
    "tee",
    "tgkill",
    "time",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_gettime64",
    "timer_settime",
    "timer_settime64",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_gettime64",
    "timerfd_settime",
    "timerfd_settime64",
    "times",
    "tkill",
    "truncate",
    "truncate64",
    "ugetrlimit",
    "umask",
    "uname",
    "unlink",
    "unlinkat",
    "utime",
    "utimensat",
    "utimensat_time64",
    "utimes",
    "vfork",
    "vmsplice",
    "wait4",
    "waitid",
    "waitpid",
    "write",
    "writev",
    /* Docker allows these on kernels >= 4.8, where ptrace can no longer bypass seccomp. */
    "kcmp",
    "pidfd_getfd",
    "process_madvise",
    "process_vm_readv",
    "process_vm_writev",
    "ptrace",
#if defined(__x86_64__) || defined(__i386__)
    "arch_prctl",
    "modify_ldt",
#elif defined(__aarch64__) || defined(__arm__)
    "arm_fadvise64_64",
    "arm_sync_file_range",
    "sync_file_range2",
    "breakpoint",
    "cacheflush",
    "set_tls",
#endif
    NULL,
};

/* personality(2) values Docker allows: PER_LINUX, UNAME26, PER_LINUX32, ... and query. */
static const unsigned long personalities[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};

/* CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET (Docker's 2114060288). */
#define CLONE_NS_MASK 0x7E020000UL

static struct json_object *
names_array(const char *const *names)
{
    struct json_object *a = json_object_new_array();
    for (size_t i = 0; a && names[i]; i++)
        json_object_array_add(a, json_object_new_string(names[i]));
    return a;
}

static struct json_object *
arg_cmp(unsigned index, unsigned long value, unsigned long value_two, const char *op)
{
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "index", json_object_new_int((int)index));
    json_object_object_add(o, "value", json_object_new_uint64(value));
    json_object_object_add(o, "valueTwo", json_object_new_uint64(value_two));
    json_object_object_add(o, "op", json_object_new_string(op));
    return o;
}

static struct json_object *
rule(const char *name, const char *action, struct json_object *args)
{
    struct json_object *o = json_object_new_object();
    const char *one[] = {name, NULL};
    json_object_object_add(o, "names", names_array(one));
    json_object_object_add(o, "action", json_object_new_string(action));
    if (args)
        json_object_object_add(o, "args", args);
    return o;
}

/* ---- x32 ------------------------------------------------------------------ */

static bool x32_runs;
static pthread_once_t x32_once = PTHREAD_ONCE_INIT;

/*
 * Makes an x32 getpid in a child, which the kernel answers with ENOSYS
 * when it does not run x32 syscalls (or a seccomp filter berthd itself
 * runs under refuses or kills it: its containers inherit that filter).
 * When the child cannot be made or waited for, x32 is assumed to run.
 */
static void
x32_probe(void)
{
#if defined(__x86_64__)
    pid_t pid = fork();
    if (pid == 0) {
        long r = syscall(0x40000000L | SYS_getpid); /* __X32_SYSCALL_BIT */
        _exit(r > 0 ? 0 : 1);
    }
    int st = 0;
    pid_t w = -1;
    if (pid > 0)
        while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
            ;
    x32_runs = w != pid || (WIFEXITED(st) && WEXITSTATUS(st) == 0);
#else
    x32_runs = false;
#endif
}

bool
rt_oci_kernel_runs_x32(void)
{
    pthread_once(&x32_once, x32_probe);
    return x32_runs;
}

struct json_object *
rt_oci_default_seccomp(void)
{
    return rt_oci_seccomp_profile(rt_oci_kernel_runs_x32());
}

struct json_object *
rt_oci_seccomp_profile(bool x32)
{
    (void)x32; /* x86_64 only */
    struct json_object *sc = json_object_new_object();
    if (!sc)
        return NULL;
    json_object_object_add(sc, "defaultAction", json_object_new_string("SCMP_ACT_ERRNO"));
    json_object_object_add(sc, "defaultErrnoRet", json_object_new_int(1)); /* EPERM */
#if defined(__x86_64__) || defined(__i386__)
    const char *archs[] = {"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", x32 ? "SCMP_ARCH_X32" : NULL, NULL};
#elif defined(__aarch64__) || defined(__arm__)
    const char *archs[] = {"SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM", NULL};
#else
    const char *archs[] = {NULL};
#endif
    json_object_object_add(sc, "architectures", names_array(archs));

    struct json_object *syscalls = json_object_new_array();
    struct json_object *all = json_object_new_object();
    json_object_object_add(all, "names", names_array(allowed));
    json_object_object_add(all, "action", json_object_new_string("SCMP_ACT_ALLOW"));
    json_object_array_add(syscalls, all);

    for (size_t i = 0; i < sizeof(personalities) / sizeof(personalities[0]); i++) {
        struct json_object *args = json_object_new_array();
        json_object_array_add(args, arg_cmp(0, personalities[i], 0, "SCMP_CMP_EQ"));
        json_object_array_add(syscalls, rule("personality", "SCMP_ACT_ALLOW", args));
    }

    /* socket: anything but AF_VSOCK (40). */
    struct json_object *sargs = json_object_new_array();
    json_object_array_add(sargs, arg_cmp(0, 40, 0, "SCMP_CMP_NE"));
    json_object_array_add(syscalls, rule("socket", "SCMP_ACT_ALLOW", sargs));

    /* clone: only without namespace flags. */
    struct json_object *cargs = json_object_new_array();
    json_object_array_add(cargs, arg_cmp(0, CLONE_NS_MASK, 0, "SCMP_CMP_MASKED_EQ"));
    json_object_array_add(syscalls, rule("clone", "SCMP_ACT_ALLOW", cargs));

    /* ioctl: anything but FS_IOC_FSSETXATTR, whose project ID change would
     * move files out of the quota project that bounds the writable layer
     * (limits.disk_bytes; the kernel refuses it only in a user namespace).
     * A filter cannot say "not equal under a mask", and runc's libseccomp
     * lets an unconditional allow override a conditional refusal, so the
     * allow is spelled as "some bit of the low 32 differs from the
     * request's": one rule per bit, any of which allows. The kernel reads
     * the request as 32 bits, so bits above cannot dodge it; the request
     * itself matches none and gets the default EPERM. */
    for (unsigned bit = 0; bit < 32; bit++) {
        unsigned long mask = 1UL << bit;
        struct json_object *iargs = json_object_new_array();
        json_object_array_add(iargs, arg_cmp(1, mask, ~(unsigned long)FS_IOC_FSSETXATTR & mask,
                                             "SCMP_CMP_MASKED_EQ"));
        json_object_array_add(syscalls, rule("ioctl", "SCMP_ACT_ALLOW", iargs));
    }

    /* clone3 hides its flags in memory the filter cannot read: ENOSYS, so libc uses clone. */
    struct json_object *c3 = rule("clone3", "SCMP_ACT_ERRNO", NULL);
    json_object_object_add(c3, "errnoRet", json_object_new_int(38));
    json_object_array_add(syscalls, c3);

    json_object_object_add(sc, "syscalls", syscalls);
    return sc;
}
