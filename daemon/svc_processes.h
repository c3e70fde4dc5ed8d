/*
 * The process service: start (a job asks the container's init), wait (no
 * pool thread: an exit listener and a timer), signal and delete; the
 * output and stdin streams are daemon/proc_output.h and proc_stdin.h. A
 * process's defaults come from its container and the container's image,
 * as Docker applies them (see process_start). See daemon/svc.h for the
 * calling convention. Loop thread only.
 */
#ifndef BERTH_DAEMON_SVC_PROCESSES_H
#define BERTH_DAEMON_SVC_PROCESSES_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "daemon/containers.h"
#include "daemon/svc.h"

struct daemon;

/* The PATH a process gets when neither it, its container nor its image set one. */
#define PROC_DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* The process id of handle's container, borrowed, or ENOENT / ERR_UNAVAILABLE. */
int process_lookup(struct daemon *d, const char *handle, const char *id, struct container **c,
                   struct ctr_proc **pr, struct err *err);

struct process_spec {
    const char *id;    /* NULL: a generated "p-..." id */
    const char *path;  /* NULL: the image's Entrypoint + Cmd */
    char *const *args; /* after argv[0]; with path NULL they replace the image's Cmd */
    bool has_args;     /* args was given (an empty list replaces Cmd too) */
    /* With path NULL: replaces the image's Entrypoint, and then its Cmd is
     * not used either unless args are given (Docker's --entrypoint). */
    char *const *entrypoint;
    bool has_entrypoint;
    char *const *env; /* "NAME=value", over the container's (which is over the image's) */
    const char *dir;  /* NULL: the container's working_dir, else the image's, else "/" */
    const char *user; /* NULL: the container's user, else the image's User, else root */
    bool has_stdin;   /* the JSON field "stdin" */
    /* A run of the container's main process (daemon/svc_main.h): the start's
     * job writes a failure to start beside the container's record, and
     * removes it when the start goes otherwise (struct ctr_start_failure). */
    bool keeps_start_failure;
    unsigned main_run; /* with it: N of the run's id main.N, which the record keeps */
};

/*
 * What o runs in a container of p when it names no path: the entrypoint
 * and the arguments after it (borrowed; either may be NULL), from o and
 * the image's config as Docker merges them.
 */
void process_command_parts(const struct ctr_params *p, const struct process_spec *o,
                           char *const **entrypoint, char *const **cmd);
/* The whole argv o runs (caller frees), or NULL with EINVAL when there is
 * none (no path, and the image has no Entrypoint or Cmd). Pure. */
char **process_command(const struct ctr_params *p, const struct process_spec *o, struct err *err);

typedef void (*process_start_cb)(void *arg, const struct err *err, struct ctr_proc *pr);
/*
 * Starts a process in a running container. HOME comes from the user's
 * /etc/passwd entry in the container when env lacks it, PATH from the
 * default above when nothing sets it. A process that cannot start (no
 * such program, a bad dir, an unknown user) fails with
 * ERR_INVALID_CONTENT and leaves no record: its id is free again at once.
 * One whose job the daemon's shutdown cancelled before it ran fails with
 * ECANCELED and changed nothing, beside the records or in them.
 */
int process_start(struct daemon *d, const char *handle, const struct process_spec *o,
                  process_start_cb cb, void *arg, struct svc_call **call, struct err *err);

/*
 * The exit code a shell (and the Docker engine) gives a process that
 * could not start, from process_start's ERR_INVALID_CONTENT: 127 when
 * the program is not there (no such file, not a directory), 126 when it
 * cannot be run (permission denied, a directory), 128 for anything else
 * (a bad dir, an unknown user). Pure.
 */
int process_start_exit_code(const struct err *err);

struct process_waiter;
typedef void (*process_wait_cb)(void *arg, const struct err *err, const struct ctr_proc *pr);
/*
 * Waits for the process to exit, at most timeout_ms (-1: no limit; 0:
 * answer now). The callback gets the exited process, or ERR_DEADLINE when
 * the time ran out, or ERR_CONFLICT when the container stopped without an
 * exit record or was deleted. *w is the wait's handle for
 * process_wait_cancel until the callback ran.
 */
int process_wait(struct daemon *d, const char *handle, const char *id, int64_t timeout_ms,
                 process_wait_cb cb, void *arg, struct process_waiter **w, struct err *err);
/* The caller is gone: the wait ends without its callback. */
void process_wait_cancel(struct process_waiter *w);

/* A signal by name ("TERM", "SIGKILL"...) or number text; -1 if unknown. */
int process_signal_number(const char *name);

typedef void (*process_done_cb)(void *arg, const struct err *err);
/* Sends sig (1..64) to a running process; ERR_CONFLICT at once when it exited. */
int process_signal(struct daemon *d, const char *handle, const char *id, int sig,
                   process_done_cb cb, void *arg, struct svc_call **call, struct err *err);

/* Removes an exited process's record and output; ERR_CONFLICT at once while it runs. */
int process_delete(struct daemon *d, const char *handle, const char *id, process_done_cb cb,
                   void *arg, struct svc_call **call, struct err *err);

#endif
