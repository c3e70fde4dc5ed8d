/*
 * The runtime driver interface: one table of operations per backend, as
 * crun does for its backends. A driver turns the platform-neutral
 * container and process requests below into its platform's calls.
 *
 * Every operation blocks (it runs a runtime binary, touches the disk or
 * waits for a container's init): call them from pool jobs, never from the
 * loop. They take everything by value or pointer for the call's duration
 * and keep no reference to it afterwards. A driver context (`ctx`) is safe
 * to use from several pool threads at once.
 */
#ifndef BERTH_RUNTIME_DRIVER_H
#define BERTH_RUNTIME_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

/* Resource limits; 0 means "no limit" for each field. */
struct rt_limits {
    uint64_t memory_bytes;
    uint64_t cpu_shares;    /* relative weight, as cgroup v1 cpu.shares (2..262144) */
    uint32_t cpu_quota_pct; /* percent of one CPU: 150 = one and a half CPUs */
    int64_t pids;           /* maximum number of processes in the container */
    uint64_t disk_bytes;    /* the writable layer's size; applied by whoever makes the
                             * rootfs (the daemon's mount of it), not by the driver */
};

struct rt_mount {
    const char *source; /* absolute host path; NULL for a tmpfs */
    const char *target; /* absolute path in the container */
    bool readonly;
    bool tmpfs; /* a new, empty tmpfs (nosuid, nodev; no size limit but the memory's) */
};

/*
 * A container to create. `dir` is the container's private directory on
 * the host, owned by the daemon and never visible inside the container;
 * drivers keep their bundle and the container's state directory under it,
 * laid out as they choose (the daemon asks for paths through the
 * operations below, never builds them).
 */
/* An HCN endpoint as a utility VM's adapter takes it (daemon/net.h's attachment). */
struct rt_net_adapter {
    const char *endpoint_id; /* a GUID */
    const char *mac;         /* "00-15-5D-12-34-56" */
    const char *ip;          /* IPv4; "" when unknown */
    unsigned prefix;
    const char *gateway; /* "" when unknown */
};

struct rt_container_spec {
    const char *handle;   /* [A-Za-z0-9_.-]{1,128}, unique on this host */
    const char *dir;      /* absolute; must exist */
    const char *rootfs;   /* absolute path of the root filesystem, the container's own
                           * writable view (the driver makes its mount points there) */
    const char *hostname; /* NULL: the handle, cut to 63 characters */
    char *const *env;     /* NULL-terminated "NAME=value" list for the init, or NULL */
    const char *cwd;      /* NULL: "/" */
    struct rt_limits limits;
    const struct rt_mount *mounts;
    size_t nmounts;
    const char *cgroups_path; /* NULL: the driver's default for the handle */
    bool readonly_rootfs;     /* the root filesystem is mounted read-only */
    /* The network namespace to join (a bound nsfs file, daemon/net.h; on
     * Windows the GUID of an HCN namespace), or
     * NULL: a new one with only lo, made by the runtime. */
    const char *netns_path;
    /* Windows (hcs) only: the HCN endpoint of netns_path, which a hyperv
     * container's utility VM gets as its network adapter; NULL: none. */
    const struct rt_net_adapter *net_adapter;
    /* The isolation asked for (one of the driver's `isolation` list), or
     * NULL: the driver's default (rt_config.isolation). */
    const char *isolation;
    /* Windows (hcs) only, ignored elsewhere: the image's read-only layer
     * folders on the host, topmost first and the base layer last
     * (NULL-terminated), and the container's writable layer: under process
     * isolation the mounted scratch volume (\\?\Volume{GUID}\), under
     * hyperv the scratch .vhdx the utility VM attaches. */
    char *const *layers;
    /* Their GUIDs, as the daemon mounted them (store/wcstorage.h's
     * wcs_layer_id), one per layer; NULL: derived from each folder's name. */
    char *const *layer_ids;
    const char *scratch;
};

/* A process to run in a container. */
struct rt_proc_spec {
    const char *id;    /* [A-Za-z0-9_.-]{1,64}, unique within the container */
    const char *path;  /* searched in env's PATH when it has no '/' */
    char *const *argv; /* NULL-terminated, argv[0] first; NULL: { path } */
    char *const *env;  /* NULL-terminated "NAME=value"; NULL: a default PATH only */
    const char *dir;   /* NULL: "/" */
    uint32_t uid, gid;
    const uint32_t *groups; /* supplementary groups */
    size_t ngroups;
    bool has_stdin; /* give the process a stdin FIFO instead of /dev/null */
    /* Cap on stdout and stderr together; past it the process is killed.
     * 0: the driver's default (rt_config.max_output_bytes). */
    uint64_t max_output_bytes;
};

/* What a change in a process's watched directory (proc_watch_dir) means. */
enum rt_proc_change {
    RT_PROC_CHANGE_NONE,   /* nothing the daemon follows */
    RT_PROC_CHANGE_STDOUT, /* new output on stdout */
    RT_PROC_CHANGE_STDERR, /* new output on stderr */
    RT_PROC_CHANGE_CHUNKS, /* a new entry in the chunk index */
    RT_PROC_CHANGE_STATUS, /* the pid or exit record may have changed */
};

/* When a process's records say it started and ended (for a reload). */
struct rt_proc_times {
    int64_t started_ms;  /* unix ms, 0 when unknown */
    int64_t finished_ms; /* unix ms, 0 while running or unknown */
    bool has_stdin;
};

/* What is known of a process. */
struct rt_proc_status {
    bool started;          /* exec succeeded: pid is valid */
    pid_t pid;             /* in the container's PID namespace */
    bool exited;           /* the exit record is there */
    int exit_code;         /* exit status, or 128+N for signal N */
    int signal;            /* the signal that ended it, or 0 */
    char error[256];       /* why it never ran, when it did not ("exec x: ...") */
    bool output_truncated; /* its output reached the cap: it was stopped, the rest dropped */
    /* Killed by the kernel's OOM killer (its container's memory limit):
     * the cgroup counted an OOM kill while it ran and it died of SIGKILL. */
    bool oom_killed;
};

struct rt_stats {
    uint64_t memory_bytes; /* current usage, page cache included */
    uint64_t cpu_ns;       /* CPU time used by all processes, user + system */
};

enum rt_container_status {
    RT_CONTAINER_UNKNOWN,
    RT_CONTAINER_CREATED,
    RT_CONTAINER_RUNNING,
    RT_CONTAINER_STOPPED,
};

struct rt_container_state {
    enum rt_container_status status;
    pid_t init_pid; /* host PID of the container's init, 0 when not running */
};

/* How a driver instance is set up (the daemon's flags). */
struct rt_config {
    const char *state_root;    /* daemon-private dir for runtime state (runc --root below it) */
    const char *oci_runtime;   /* runtime binary, a path or a name on PATH; NULL: "runc" */
    const char *init_path;     /* the berth-init binary; NULL: beside the daemon's executable */
    const char *cgroup_parent; /* NULL: "berth" (relative: under the daemon's own cgroup) */
    uint64_t max_output_bytes; /* per process, stdout and stderr together; 0: no cap */
    /* hcs: the default isolation (NULL: "process") and the utility VM of a
     * hyperv container (0: 2 processors, 1024 MB; daemon/config.c's
     * --hyperv-cpus and --hyperv-memory-mb). */
    const char *isolation;
    uint32_t hyperv_cpus;
    uint32_t hyperv_memory_mb;
};

struct rt_driver {
    const char *name;
    const char *const *isolation; /* NULL-terminated isolation modes offered */

    /* Creates a context for cfg (copied). Caller frees with close. */
    int (*open)(const struct rt_config *cfg, void **ctx, struct err *err);
    void (*close)(void *ctx);
    /* Is the runtime usable here? On failure err says why (for health). */
    int (*probe)(void *ctx, struct err *err);

    /* Creates and starts the container with its init; returns once the init takes commands. */
    int (*container_create)(void *ctx, const struct rt_container_spec *spec, struct err *err);
    /* Kills every process and removes the container; a missing container is success. */
    int (*container_delete)(void *ctx, const char *handle, const char *dir, struct err *err);
    int (*container_state)(void *ctx, const char *handle, struct rt_container_state *out,
                           struct err *err);
    int (*stats)(void *ctx, const char *handle, struct rt_stats *out, struct err *err);

    /* Starts a process; returns once it runs (out->started) or failed to start. */
    int (*proc_spawn)(void *ctx, const char *handle, const char *dir,
                      const struct rt_proc_spec *spec, struct rt_proc_status *out, struct err *err);
    int (*proc_signal)(void *ctx, const char *handle, const char *dir, const char *id, int sig,
                       struct err *err);
    /* Reads the pid and exit records without waiting. */
    int (*proc_status)(void *ctx, const char *handle, const char *dir, const char *id,
                       struct rt_proc_status *out, struct err *err);
    /*
     * Opens the process's stdout (which 0) or stderr (1) file for reading:
     * a new fd the caller owns, positioned at 0. ENOENT before it exists.
     */
    int (*proc_output_open)(void *ctx, const char *handle, const char *dir, const char *id,
                            int which, struct err *err);
    /*
     * Opens the index of the process's output chunks (runtime/outrec.h:
     * each chunk's stream, time and place in the stdout or stderr file,
     * in the order written) for reading: a new fd the caller owns. ENOENT
     * when the driver keeps none for this process.
     */
    int (*proc_chunks_open)(void *ctx, const char *handle, const char *dir, const char *id,
                            struct err *err);
    /* Opens the process's stdin for writing: a new O_NONBLOCK fd the caller owns. */
    int (*proc_stdin_open)(void *ctx, const char *handle, const char *dir, const char *id,
                           struct err *err);
    /* Lets the process see EOF on stdin once every writer closed. */
    int (*proc_stdin_close)(void *ctx, const char *handle, const char *dir, const char *id,
                            struct err *err);

    /*
     * The layout of a process's records belongs to the driver; the daemon
     * only asks. proc_watch_dir: the directory whose changes tell of new
     * output and of the exit (a new string the caller frees; NULL when the
     * driver has none to watch, or on OOM). Pure: does not block.
     */
    char *(*proc_watch_dir)(void *ctx, const char *handle, const char *dir, const char *id);
    /* What a change of filename in that directory means. Pure. */
    enum rt_proc_change (*proc_change)(const char *filename);
    /* The ids of every process the container's records hold (caller frees
     * with strv_free); an empty list when there are none. */
    int (*proc_list)(void *ctx, const char *handle, const char *dir, char ***ids, struct err *err);
    int (*proc_times)(void *ctx, const char *handle, const char *dir, const char *id,
                      struct rt_proc_times *out, struct err *err);
    /* Removes an exited (or never started) process's records and output;
     * ERR_CONFLICT while it runs, ENOENT when there are none. */
    int (*proc_remove)(void *ctx, const char *handle, const char *dir, const char *id,
                       struct err *err);
    /* The handles of every container the runtime itself knows (caller
     * frees with strv_free), so the daemon can remove those no record of
     * its own claims. */
    int (*container_list)(void *ctx, char ***handles, struct err *err);
    /*
     * Optional (NULL: every mode of `isolation` is usable when the driver
     * is): is mode usable on this host? 0, or a negative errno with why in
     * err. What start-up detection found: does not block, any thread.
     */
    int (*isolation_usable)(void *ctx, const char *mode, struct err *err);
    /*
     * Optional. Present: the driver takes a raw rootfs ("rootfs":
     * "raw:///...") as it is, a path of its own platform, and the daemon
     * mounts nothing for it (hcs: a Windows path, the container's layer
     * folder). Checks path, the URI's decoded path, and writes its normal
     * form into out (size bytes); EINVAL naming it otherwise. NULL: the
     * daemon's rules (an absolute POSIX directory, overlaid with a
     * writable layer of the container's own). Pure; any thread.
     */
    int (*rootfs_normalise)(const char *path, char *out, size_t size, struct err *err);
    /*
     * Optional: tells of running containers that stop on their own (not
     * through container_delete). cb(arg, handle) runs on a thread of the
     * driver's (hcs: HCS's event callback) and must only hand the handle on
     * (uv_async_send); it is not called once close has begun. Set once,
     * right after open. NULL: the daemon watches the init's pid instead
     * (rt_container_state.init_pid).
     */
    void (*set_stop_cb)(void *ctx, void (*cb)(void *arg, const char *handle), void *arg);
};

/*
 * Finds a driver by name ("oci"; "host" and "hcs" are named but not
 * available on this build, with an ERR_UNAVAILABLE message that says so).
 * Returns a static table, or NULL with err set.
 */
const struct rt_driver *rt_driver_lookup(const char *name, struct err *err);

/* Is id a valid process ID ([A-Za-z0-9_.-]{1,64}, not starting with '.')? */
bool rt_id_valid(const char *id);

/* Is handle a valid container handle ([A-Za-z0-9_.-]{1,128}, not starting with '.')? */
bool rt_handle_valid(const char *handle);

#endif
