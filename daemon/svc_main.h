/*
 * The main-process service: a container created with a main process
 * (ctr_params.main, Docker's idea of a container) is created idle, its
 * init running and nothing else; container_start runs the main process,
 * and runs it again after it exited (each run is a process of its own,
 * main.1, main.2...); a stop sends the container's stop signal, then KILL
 * after a timeout; kill sends a signal; restart stops and starts; wait
 * waits for the main process to stop running, to exit next, or for the
 * container to be removed.
 *
 * When a run exits, the container's other processes are killed (as
 * everything in a Docker container dies with its PID 1), and a container
 * made with auto_remove is deleted. Every step is told to the container
 * event subscribers (daemon/ctr_events.h).
 *
 * See daemon/svc.h for the calling convention. Loop thread only.
 */
#ifndef BERTH_DAEMON_SVC_MAIN_H
#define BERTH_DAEMON_SVC_MAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "daemon/containers.h"
#include "daemon/svc.h"
#include "daemon/svc_processes.h"

struct daemon;

/* How long a stop waits for the main process after its KILL before it
 * reports the process as not stopping. */
#define CTR_KILL_WAIT_S 10

/* Whether the container's main process runs now. */
bool container_main_running(const struct container *c);
/* The exit code its latest run had: 255 when the container stopped without
 * an exit record, 0 before any run. */
int container_main_exit_code(const struct container *c);

/* The process spec of the main process's runs (the id aside). */
void container_main_spec(const struct ctr_main *m, struct process_spec *spec);

typedef void (*container_main_cb)(void *arg, const struct err *err);

/*
 * Runs the main process. EALREADY at once while it runs (or a start is
 * in flight); EINVAL for a container without a main process;
 * ERR_CONFLICT when the container is not running (being created or
 * deleted, or its init is gone). A program that cannot start fails
 * with ERR_INVALID_CONTENT, as process_start does.
 */
int container_start(struct daemon *d, const char *handle, container_main_cb cb, void *arg,
                    struct svc_call **call, struct err *err);

/*
 * Stops the main process: sig (0: the container's stop signal), then
 * KILL once timeout_s passed (-1: the container's grace_time_s; 0: at
 * once). The callback runs once it exited, or with ETIMEDOUT when even
 * KILL did not end it within CTR_KILL_WAIT_S. EALREADY at once when it
 * does not run.
 */
int container_stop(struct daemon *d, const char *handle, int sig, int64_t timeout_s,
                   container_main_cb cb, void *arg, struct svc_call **call, struct err *err);

/* Stops as container_stop does when it runs, then starts it again. */
int container_restart(struct daemon *d, const char *handle, int64_t timeout_s, container_main_cb cb,
                      void *arg, struct svc_call **call, struct err *err);

/* Sends sig (1..64) to the main process; ERR_CONFLICT at once when it does not run. */
int container_kill(struct daemon *d, const char *handle, int sig, container_main_cb cb, void *arg,
                   struct svc_call **call, struct err *err);

enum container_wait_cond {
    CTR_WAIT_NOT_RUNNING, /* now if it does not run, else its next exit (a start in flight:
                           * at its end when it began no run) */
    CTR_WAIT_NEXT_EXIT,   /* the next exit of a run */
    CTR_WAIT_REMOVED,     /* the container's removal */
};

struct container_waiter;
/* exit_code: the main process's, at the moment the condition was met. */
typedef void (*container_wait_cb)(void *arg, const struct err *err, int exit_code);
/*
 * Waits for cond. A container removed while waiting for an exit ends the
 * wait with its last exit code. *w is the wait's handle for
 * container_wait_cancel until the callback ran.
 */
int container_wait(struct daemon *d, const char *handle, enum container_wait_cond cond,
                   container_wait_cb cb, void *arg, struct container_waiter **w, struct err *err);
/* The caller is gone: no callback. */
void container_wait_cancel(struct container_waiter *w);

/*
 * After start-up (the loop runs): deletes the auto_remove containers
 * whose main process exited while the daemon was down.
 */
void containers_main_resume(struct daemon *d);

/* ---- for daemon/containers.c and containers_open.c only -------------------- */

/* The main process's latest run exited (or was lost with its container). */
void ctr_main_exited(struct container *c);
/* At reload: finds the latest run among c's processes. */
void ctr_main_reload(struct container *c);
/* Then: takes f back as the latest start's failure (ExitCode, Error)
 * unless a run of the main process c's records keep replaced it: one
 * numbered as f or later, or a latest run alive (the clock is not trusted;
 * a record without its number is judged by the times). */
void ctr_main_reload_start_failure(struct container *c, const struct ctr_start_failure *f);
/* The registry closes: stops in progress are dropped silently. */
void ctr_stop_abandon(struct container *c);

#endif
