/*
 * The container registry: every container the daemon knows, its record
 * on disk, its processes and who listens to them. The loop owns the
 * registry and everything in it; the blocking steps (mount, runtime
 * calls, the record files) are the containers_*_blocking functions,
 * which pool jobs run on copies (struct ctr_params) and never on the
 * loop's objects.
 *
 * On disk, per container, under <root>/containers/<handle>/:
 *
 *   container.json   the record (below), written before anything else is
 *                    made, rewritten as "deleting" before the undo starts
 *   main-start-failure.json
 *                    the main process's latest start, when its program
 *                    could not run (struct ctr_start_failure)
 *   scratch/         the writable layer (upper, work) and the mount record
 *   rootfs/          the overlay mount of the image's snapshots
 *   anything else        the runtime driver's, laid out as it chooses
 *
 * Processes have no record of ours: the driver's (on oci, the spec, pid
 * and exit records the container's init writes) are the truth, so a
 * process that exits while the daemon is down still has its exit code
 * when the daemon comes back (containers_open).
 *
 * Process exits and new output are noticed without a pool thread: a
 * uv_fs_event (inotify) on the directory the driver names for each
 * running process; a change there runs a short job that reads the records.
 *
 * The services on top (daemon/svc_containers.h, svc_processes.h) are what
 * front ends call; this header is their shared state.
 */
#ifndef BERTH_DAEMON_CONTAINERS_H
#define BERTH_DAEMON_CONTAINERS_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "common/err.h"
#include "runtime/driver.h"

struct daemon;
struct store;
struct ctr_delete;
struct ctr_events;
struct ctr_stops;
struct ctr_stop;
struct container_waiter;

#define CTR_HANDLE_MAX 128
#define CTR_ID_MAX 64

enum ctr_state {
    CTR_CREATING, /* the create job runs */
    CTR_RUNNING,  /* its init runs */
    CTR_STOPPED,  /* its init is gone (killed, or died while the daemon was down) */
    CTR_DELETING, /* the delete runs (or failed half-way and may be retried) */
};

const char *ctr_state_name(enum ctr_state s);

/*
 * A container's main process: the command Docker calls the container's
 * own, run by container_start (daemon/svc_main.h) and run again by each
 * later start, never by the create. Its runs are the processes
 * "main.1", "main.2"... of the container.
 */
struct ctr_main {
    char **entrypoint;   /* NULL-terminated; with has_entrypoint it replaces the image's */
    bool has_entrypoint; /* (and then the image's Cmd is not used either, as in Docker) */
    char **cmd;          /* with has_cmd it replaces the image's Cmd */
    bool has_cmd;
    bool open_stdin;  /* a stdin pipe (Docker's OpenStdin) */
    bool stdin_once;  /* kept for the front end's attach (Docker's StdinOnce) */
    bool tty;         /* kept; no terminal is given yet */
    int stop_signal;  /* what a stop sends first; 0: SIGTERM */
    bool auto_remove; /* the container is deleted once a run has exited */
};

struct ctr_main *ctr_main_dup(const struct ctr_main *m);
void ctr_main_free(struct ctr_main *m);
/* A host port forwarded to the container (host 0: the network picks one). */
struct ctr_port {
    uint16_t host;
    uint16_t container;
    bool udp; /* else tcp */
};

/* At most this many forwarded ports per container (the network's own limit). */
#define CTR_PORTS_MAX 32

/* Everything a container was created with; owned, plain C (copied into jobs). */
struct ctr_params {
    char handle[CTR_HANDLE_MAX + 1];
    char *image_ref;    /* as the client gave it, or NULL with rootfs_dir */
    char *image_digest; /* resolved by the create job */
    char *image_config; /* its config's digest (Docker's image ID), likewise */
    char *rootfs_dir;   /* "raw:///..." decoded: a host directory, or NULL */
    struct rt_limits limits;
    char **env; /* NULL-terminated or NULL */
    char *working_dir;
    struct rt_mount *mounts; /* sources and targets owned; a volume's source is
                              * its host path, filled in by the create job; a
                              * tmpfs has none */
    char **mount_volumes;    /* per mount: the volume's handle, or NULL (host_path, tmpfs) */
    size_t nmounts;
    char **prop_keys, **prop_values;
    size_t nprops;
    int64_t grace_time_s;
    int64_t created_at; /* unix seconds */
    /* "process" or "hyperv": asked for, else the daemon's --isolation
     * (default process); what the runtime driver is given. */
    char isolation[16];
    /* The image's run defaults (its config), resolved by the create job;
     * NULL or empty when the image has none or for a raw rootfs. */
    char **image_entrypoint, **image_cmd; /* NULL-terminated or NULL */
    char *image_user;
    /* A second, optional name, unique among containers (Docker's names;
     * the handle is then Docker's id). NULL: none. */
    char *name;
    /* The user its processes run as unless they say otherwise (over the
     * image's User); NULL: the image's. */
    char *user;
    char *hostname;        /* NULL: the handle, cut to 63 characters */
    bool readonly_rootfs;  /* the root filesystem is mounted read-only */
    struct ctr_main *main; /* NULL: a container without a main process */
    /* What a front end keeps with the container (Docker's Config and
     * HostConfig as given): stored in the record, never read by the service. */
    char *front_meta;
    /* Its network, as asked for: loopback only, or the ports to forward. */
    bool net_disabled;
    struct ctr_port *ports;
    size_t nports;
};

void ctr_params_free(struct ctr_params *p);
/* Deep copy; NULL on out of memory. */
struct ctr_params *ctr_params_dup(const struct ctr_params *p);

/* Something waiting on a process: a wait request, an output follower. */
enum ctr_event { CTR_EV_EXIT, CTR_EV_STDOUT, CTR_EV_STDERR, CTR_EV_CHUNKS, CTR_EV_GONE };
struct ctr_listener {
    struct ctr_listener *prev, *next;
    void (*fn)(struct ctr_listener *l, enum ctr_event ev);
    void *ctx;
};

struct ctr_proc {
    struct ctr_proc *next; /* oldest first */
    struct container *c;
    char id[CTR_ID_MAX + 1];
    bool has_stdin;
    pid_t pid;
    int64_t started_at, finished_at; /* unix ms; finished_at 0 while running */
    bool exited;
    bool lost; /* the container stopped without an exit record */
    int exit_code, signal;
    char error[256];
    bool output_truncated; /* its output reached --max-output-bytes: killed, the rest dropped */
    bool oom_killed;       /* the OOM killer ended it (the container's memory limit) */
    uv_fs_event_t *watch;  /* while running */
    bool checking, recheck;
    struct ctr_listener *listeners;
};

struct container {
    struct container *next;
    struct containers *reg;
    int refs; /* the registry's, plus one per job or request that holds it */
    bool registered;
    enum ctr_state state;
    struct ctr_params *p;
    char *dir;
    struct ctr_proc *procs;      /* oldest first */
    unsigned spawning;           /* process starts in flight */
    struct ctr_delete *deleting; /* the delete in progress (svc_containers.c) */
    /* The delete's removal job runs: its records are going away, and a
     * process check must not read them (it would take the half-removed
     * records for a spawn cut short and write them again). */
    bool removing;
    uv_poll_t *init_watch; /* readable when the container's init exits */
    /* The driver said it stopped while its create still ran (ctr_stops.c). */
    bool stopped_while_creating;
    /* The main process (p->main): its latest run, or NULL before the first. */
    struct ctr_proc *main_proc;
    unsigned main_runs;         /* runs started so far: the next is main.<main_runs + 1> */
    bool main_starting;         /* a start is in flight */
    bool main_exit_pending;     /* its run exited while the daemon was down (svc_main.c) */
    int main_start_failed;      /* the latest start's program could not run: its exit code
                                 * (126, 127, 128; process_start_exit_code), else 0 */
    char main_start_error[256]; /* ... and why (process_start's message), else "" */
    struct ctr_stop *stopping;  /* a stop in progress (svc_main.c) */
    /* The not-running waits that came while main_starting: that start's
     * end answers them or leaves them to the run it began (svc_main.c). */
    struct container_waiter *start_waiters;
};

struct containers {
    struct daemon *d;
    char *root; /* <store root>/containers */
    const struct rt_driver *drv;
    void *drv_ctx;
    struct err drv_err; /* why there is no driver, when drv is NULL */
    struct container *list;
    unsigned count;
    struct ctr_events *events; /* subscribers and recent history (daemon/ctr_events.h) */
    struct ctr_exec *execs;    /* exec instances (daemon/svc_exec.h) */
    struct ctr_stops *stops;   /* the driver's word of containers that stopped (ctr_stops.h) */
};

/*
 * Opens the driver named by the daemon's --runtime (drv NULL with the
 * reason in drv_err when unavailable) and reloads every container from
 * disk: containers whose init still runs come back running, with their
 * processes watched; containers whose init died come back stopped with
 * what their exit records say; records of a create or delete that was
 * interrupted are undone (runtime state, mount, files, image use), and
 * runtime state that no record claims is removed. Blocks: call in main,
 * before the loop runs.
 */
int containers_open(struct daemon *d, struct containers **out, struct err *err);
/* Closes every handle (processes' watches, timers) and drops every container. Loop. */
void containers_close(struct containers *reg);
/* Closes the driver and frees reg; after the loop ended and nothing probes the driver. */
void containers_free(struct containers *reg);

struct container *containers_find(struct containers *reg, const char *handle);
/* The container named name (ctr_params.name), or NULL. */
struct container *containers_find_name(struct containers *reg, const char *name);
/* Adds a new container in state CREATING (taking a reference); EEXIST when
 * its handle or its name is taken. */
int containers_add(struct containers *reg, struct ctr_params *p, struct container **out,
                   struct err *err);
/* Takes it out of the registry (it goes with its last reference); listeners get GONE. */
void containers_remove(struct container *c);
void container_ref(struct container *c);
void container_unref(struct container *c);

struct ctr_proc *container_proc_find(struct container *c, const char *id);
/* Adds a running process after a start (or at reload), as the newest,
 * and starts watching it. */
struct ctr_proc *container_proc_add(struct container *c, const char *id, bool has_stdin,
                                    const struct rt_proc_status *st, int64_t started_at);
/* Forgets an exited process (its records are gone); listeners get GONE. */
void container_proc_remove(struct container *c, struct ctr_proc *pr);
/* Counts processes still running. */
unsigned container_procs_running(const struct container *c);
/* Asks for the records of a process to be read again (after a change). */
void container_proc_check(struct ctr_proc *pr);
/* Marks every running process of a stopped container as lost. */
void container_mark_stopped(struct container *c);

/*
 * A pidfd of the container's init (its pid from the runtime's state), or
 * -1. Blocks (runs the runtime): call from a job or at start-up.
 */
int container_init_pidfd(struct containers *reg, const char *handle);
/* Watches pidfd (taking it; -1 is ignored) on the loop: when the init
 * exits while the container runs, the container is marked stopped and its
 * waiters and followers are told, instead of waiting for a GET to notice. */
void container_watch_init(struct container *c, int pidfd);
/* Stops watching (delete, shutdown). Loop. */
void container_unwatch_init(struct container *c);

/*
 * What a pool job needs to reach a container, or one of its processes,
 * through the driver: copies (a job never touches the loop's objects) and
 * a reference that keeps the container's memory while the job runs.
 */
struct ctr_target {
    struct container *c; /* a reference */
    const struct rt_driver *drv;
    void *drv_ctx;
    char handle[CTR_HANDLE_MAX + 1];
    char id[CTR_ID_MAX + 1]; /* "" for the container itself */
    char *dir;
};
/* Fills t for process id of c (NULL: the container), taking a reference. 0 or -ENOMEM. */
int ctr_target_init(struct ctr_target *t, struct container *c, const char *id);
/* Drops the reference and the copies; a cleared target is a no-op. */
void ctr_target_clear(struct ctr_target *t);

void ctr_listen(struct ctr_proc *pr, struct ctr_listener *l);
void ctr_unlisten(struct ctr_proc *pr, struct ctr_listener *l);

/* ---- blocking steps, for pool jobs ------------------------------------------ */

/*
 * A create's first half: the record, the image's use (resolving
 * p->image_ref into p->image_digest and the image's run defaults), the
 * volumes' use, the overlay mount; *rootfs gets where the root filesystem
 * is (caller frees). On failure every step made is undone and err says
 * why.
 */
int containers_prepare_blocking(struct containers *reg, struct store *st, struct ctr_params *p,
                                const char *dir, char **rootfs, struct err *err);

/* What the network gives the runtime (daemon/net.h's attachment, copied). */
struct ctr_net_spec {
    const char *netns_path;               /* the namespace to join; NULL: a new one with only lo */
    const struct rt_net_adapter *adapter; /* Windows: its HCN endpoint; NULL: none */
    const struct rt_mount *mounts;        /* /etc/hosts, /etc/hostname, /etc/resolv.conf */
    size_t nmounts;
};

/*
 * The mounts the runtime gets: the container's own (nown, targets in
 * normal form), then each of net's files that none of them replaces (a
 * mount of its own at the same target, or at /etc, their directory: berth
 * never writes into a volume or a host directory, and a mount inside
 * another is refused by the runtime). out has room for nown + nnet; the
 * entries are shallow copies. Returns how many. Pure.
 */
size_t ctr_mounts_merge(const struct rt_mount *own, size_t nown, const struct rt_mount *net,
                        size_t nnet, struct rt_mount *out);

/*
 * The second half, once the first succeeded: the runtime's container on
 * rootfs, in net's namespace with its files mounted (net NULL: none),
 * then the record says "running". On failure every step of both halves
 * is undone.
 */
int containers_start_blocking(struct containers *reg, struct store *st, const struct ctr_params *p,
                              const char *dir, const char *rootfs, const struct ctr_net_spec *net,
                              struct err *err);

/*
 * Undoes a create whose first half succeeded, and whose second may have
 * (the network failed meanwhile): as containers_delete_blocking, with a
 * runtime that cannot be run not stopping the rest.
 */
int containers_undo_blocking(struct containers *reg, struct store *st, const struct ctr_params *p,
                             const char *dir, struct err *err);

/*
 * Removes the container: the runtime's container (which kills what is
 * left), the mount, the files, the image's use. Idempotent: every step
 * is a no-op when already done, so a failed delete can be retried. With
 * trash NULL the directory is removed; else it is only renamed out of
 * the way (the container is gone once it is) and *trash gets the renamed
 * tree's path, or NULL when there was none, for
 * containers_trash_remove_blocking after the caller was answered (caller
 * frees). Start-up removes a renamed tree that a crash left.
 */
int containers_delete_blocking(struct containers *reg, struct store *st, const struct ctr_params *p,
                               const char *dir, char **trash, struct err *err);

/* Removes a tree that containers_delete_blocking renamed out of the way. Blocks. */
int containers_trash_remove_blocking(const char *trash, struct err *err);

/*
 * A start of the main process whose program could not run, kept beside
 * the container's record so that a restart of the daemon still shows it
 * (Docker's State.ExitCode and State.Error): written by the start's job
 * when it fails, removed by the next start that does not, and taken back
 * at start-up only when no run of the main process its records keep has
 * its number or a later one and the latest run is not alive (a later run
 * wins, whatever became of the file: ctr_main_reload_start_failure).
 */
/* The most runs of a main process (main.N) a container's records are read with. */
#define CTR_MAIN_RUNS_MAX 1000000

struct ctr_start_failure {
    int exit_code;           /* 126, 127 or 128: process_start_exit_code */
    char error[ERR_MSG_MAX]; /* the start's message */
    int64_t at_ms;           /* when it failed, unix ms */
    unsigned run;            /* N of main.N, the run the start would have been; 0: not kept */
};

/* Writes f into the container directory dir, atomically; its run when
 * f->run is not 0. Blocks. */
int ctr_start_failure_write(const char *dir, const struct ctr_start_failure *f, struct err *err);
/* Removes it; none there is no error. Blocks. */
int ctr_start_failure_clear(const char *dir, struct err *err);
/*
 * Reads it back: 0, -ENOENT when there is none, or another negative
 * errno when it is not one this daemon wrote (too large, not a regular
 * file, malformed, a value out of range), the reason in err. Blocks.
 */
int ctr_start_failure_read(const char *dir, struct ctr_start_failure *out, struct err *err);

/*
 * Resolves user ("uid[:gid]", a name, or "name:group") against the
 * container's /etc/passwd and /etc/group, read inside its rootfs: *uid,
 * *gid, and *home (caller frees; NULL when the user has no passwd entry).
 * ERR_INVALID_CONTENT for an unknown name. Blocks: pool jobs only.
 */
int containers_resolve_user(const char *dir, const char *user, uint32_t *uid, uint32_t *gid,
                            char **home, struct err *err);

#endif
