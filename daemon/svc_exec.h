/*
 * Exec instances, as Docker has them: a command made for a container now
 * and run later (once), whose exit code is asked for afterwards. An
 * instance is a spec with an id; its run is a plain process of the
 * container (process_start), named "exec-" and the first 32 hex digits
 * of the id, so it shows in /v1 too and its output is the process's.
 * Instances live in memory with their container's registry and go with
 * their container. Loop thread only; every call here answers at once.
 */
#ifndef BERTH_DAEMON_SVC_EXEC_H
#define BERTH_DAEMON_SVC_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "daemon/containers.h"
#include "daemon/svc_processes.h"

struct daemon;

#define CTR_EXEC_ID_LEN 64

struct ctr_exec {
    struct ctr_exec *next;
    char id[CTR_EXEC_ID_LEN + 1];
    char handle[CTR_HANDLE_MAX + 1];
    char proc_id[CTR_ID_MAX + 1];
    char **argv; /* NULL-terminated, at least one */
    char **env;  /* NULL-terminated or NULL */
    char *dir, *user;
    bool in, out, err; /* the streams an attached start carries */
    bool started;
    int start_failed; /* its program could not start: its exit code (126, 127...), else 0 */
};

struct ctr_exec_spec {
    char *const *argv;
    char *const *env;
    const char *dir, *user;
    bool in, out, err;
};

/*
 * Makes an instance for container handle; *out is the registry's.
 * ERR_CONFLICT "container X is not running" unless its main process runs
 * (or, for a container without one, the container does), as the engine.
 */
int container_exec_create(struct daemon *d, const char *handle, const struct ctr_exec_spec *s,
                          struct ctr_exec **out, struct err *err);

/* The instance with id (or a unique prefix of it), or ENOENT. */
int container_exec_find(struct daemon *d, const char *id, struct ctr_exec **out, struct err *err);

/* Starts its run (once: ERR_CONFLICT after, and while the container does
 * not run, as at create). cb as process_start's. */
int container_exec_start(struct daemon *d, struct ctr_exec *x, process_start_cb cb, void *arg,
                         struct svc_call **call, struct err *err);

/* Its run's start failed with err (process_start's ERR_INVALID_CONTENT):
 * the instance keeps the exit code a shell gives (process_start_exit_code). */
void container_exec_start_failed(struct ctr_exec *x, const struct err *err);

/* Its run, when it has one still in the registry. */
struct ctr_proc *container_exec_proc(struct daemon *d, const struct ctr_exec *x);

/* The registry closes. */
void ctr_execs_free(struct containers *reg);

#endif
