/*
 * The hcs driver's own state, shared by its files: driver_win.c
 * (the context, compute systems, admission, re-attach at open),
 * driver_proc_win.c (processes and their durable output records) and
 * driver_file_win.c (the small file helpers both use).
 *
 * Layout, per container (the daemon's private `dir`):
 *
 *   <dir>/hcs-procs/<id>/stdout, stderr   the process's output, as it came
 *   <dir>/hcs-procs/<id>/pid              "<pid> <started unix ms> <has stdin>"
 *   <dir>/hcs-procs/<id>/exit             "<code> <signal> <truncated> <finished unix ms>"
 *
 * and, per container the driver owns, under the daemon's state root:
 *
 *   <state_root>/hcs/<handle>             the ownership record (driver_win.c)
 *
 * Locking: one mutex (drv->mu) guards the container list, each
 * container's status and process list and each process's exit fields.
 * HCS's event callbacks take it briefly and touch nothing else; every
 * HCS call is made without it. Windows only.
 */
#ifndef BERTH_RUNTIME_HCS_DRIVER_INT_H
#define BERTH_RUNTIME_HCS_DRIVER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "runtime/driver.h"
#include "runtime/hcs/admit.h"
#include "runtime/hcs/guid.h"
#include "runtime/hcs/hcs_api.h"
#include "runtime/hcs/props.h"
#include "runtime/hcs/sizing.h"

#define HCS_OP_TIMEOUT_MS 60000u
#define HCS_SHUTDOWN_GRACE_MS 5000u
#define HCS_SYSTEM_ID_MAX 200

struct hcs_dproc;

struct hcs_dctr {
    struct hcs_drv *drv;
    int refs; /* under drv->mu */
    char *handle, *dir;
    char sys_id[HCS_SYSTEM_ID_MAX], vm_id[HCS_SYSTEM_ID_MAX]; /* vm_id "" for process isolation */
    bool hyperv;
    struct hcs_system *sys, *vm;
    enum rt_container_status status;
    bool admitted;
    uint64_t ticket;
    /* hyperv with a network: the adapter given to the utility VM ("" none), for the removes. */
    char nic_ep[HCS_GUID_SIZE], nic_ns[HCS_GUID_SIZE], nic_mac[18];
    struct hcs_dproc *procs;
    struct hcs_dctr *next;
};

struct hcs_dproc {
    struct hcs_drv *drv;
    char *id;
    char *pdir; /* <dir>/hcs-procs/<id> */
    struct hcs_process *proc;
    struct hcs_stdio io;
    bool has_stdin;
    bool reattached;    /* opened again at the driver's open, not spawned by it */
    void *thread;       /* the drain thread's HANDLE */
    volatile long stop; /* the driver is closing or the container going: stop draining */
    uint64_t cap;       /* stdout + stderr bytes kept; 0: no cap */
    uint64_t written;   /* drain thread only */
    bool truncated;     /* drain thread only */
    /* Under drv->mu: */
    bool exited;        /* the exit event came */
    uint32_t exit_code; /* as HCS reported it */
    int sent_signal;    /* the last POSIX signal berth sent (9: terminated) */
    struct hcs_dproc *next;
};

struct hcs_drv {
    struct hcs_api *api;
    bool usable;
    struct err unusable;
    struct hcs_caps caps;
    struct hcs_admit *admit;
    struct hcs_uvm_config uvm;
    bool default_hyperv;
    char *state_root, *records; /* records: <state_root>/hcs */
    uint64_t max_output_bytes;
    pthread_mutex_t mu;
    struct hcs_dctr *ctrs;
    /* Under mu: who hears of a system that stopped on its own (rt_driver.set_stop_cb). */
    void (*stop_cb)(void *arg, const char *handle);
    void *stop_arg;
};

/* ---- driver_win.c ---- */

/* The container of handle with a reference (hcs_dctr_put), or NULL. */
struct hcs_dctr *hcs_dctr_get(struct hcs_drv *drv, const char *handle);
void hcs_dctr_put(struct hcs_drv *drv, struct hcs_dctr *c);

/* ---- driver_file_win.c ---- */

/* Writes text to path whole, through a temporary file renamed over it. */
int hcs_file_replace(const char *path, const char *text, struct err *err);
/* Reads up to max bytes of path into a new NUL-terminated string. ENOENT when absent. */
int hcs_file_read(const char *path, size_t max, char **out, struct err *err);
int hcs_mkdir(const char *path, struct err *err);
/* Removes the files in path and path itself; a missing path is success. */
int hcs_rmdir_files(const char *path, struct err *err);

/* ---- driver_proc_win.c ---- */

/* Follows an HCS process: starts the drain thread of p (its io set). */
int hcs_dproc_follow(struct hcs_dproc *p, struct err *err);
/* Stops p's drain thread (no exit record unless it had written one) and frees p. */
void hcs_dproc_free(struct hcs_dproc *p);
/* Re-attaches the processes recorded in c's dir that have no exit record. */
void hcs_dproc_reattach(struct hcs_drv *drv, struct hcs_dctr *c);
/* HCS process events: the exit. */
void hcs_dproc_event_cb(void *arg, const struct hcs_event *ev);

int hcs_proc_spawn(void *ctx, const char *handle, const char *dir, const struct rt_proc_spec *spec,
                   struct rt_proc_status *out, struct err *err);
int hcs_proc_signal(void *ctx, const char *handle, const char *dir, const char *id, int sig,
                    struct err *err);
int hcs_proc_status(void *ctx, const char *handle, const char *dir, const char *id,
                    struct rt_proc_status *out, struct err *err);
int hcs_proc_output_open(void *ctx, const char *handle, const char *dir, const char *id, int which,
                         struct err *err);
int hcs_proc_stdin_open(void *ctx, const char *handle, const char *dir, const char *id,
                        struct err *err);
int hcs_proc_stdin_close(void *ctx, const char *handle, const char *dir, const char *id,
                         struct err *err);
char *hcs_proc_watch_dir(void *ctx, const char *handle, const char *dir, const char *id);
enum rt_proc_change hcs_proc_change(const char *filename);
int hcs_proc_list(void *ctx, const char *handle, const char *dir, char ***ids, struct err *err);
int hcs_proc_times(void *ctx, const char *handle, const char *dir, const char *id,
                   struct rt_proc_times *out, struct err *err);
int hcs_proc_remove(void *ctx, const char *handle, const char *dir, const char *id,
                    struct err *err);

#endif
