/*
 * The container service: create (validated here, made by a pool job),
 * look up, usage, and delete (TERM to every running process, KILL after
 * the grace time, then the undo job). See daemon/svc.h for the calling
 * convention. Loop thread only.
 */
#ifndef BERTH_DAEMON_SVC_CONTAINERS_H
#define BERTH_DAEMON_SVC_CONTAINERS_H

#include <stdint.h>

#include "common/err.h"
#include "daemon/containers.h"
#include "daemon/svc.h"

struct daemon;

/* Limits a create request is checked against. */
#define CTR_GRACE_DEFAULT_S 10
#define CTR_GRACE_MAX_S 3600

/* What a container's usage reads (cgroup counters). */
struct ctr_usage {
    uint64_t memory_bytes;
    uint64_t cpu_ns;
};

/* The registry, or ERR_UNAVAILABLE naming why there is none (no store,
 * no usable runtime driver). */
int containers_registry(struct daemon *d, struct containers **out, struct err *err);

/* One isolation mode of the runtime and whether this host can run it. */
struct ctr_isolation {
    const char *mode; /* static: the driver's name for it ("process", "hyperv") */
    bool usable;
    char reason[ERR_MSG_MAX]; /* why not, when !usable */
};

/*
 * The runtime's isolation modes, as its start-up detection found them
 * (health's runtime.isolations): up to max into out, and their number; 0
 * when there is no usable driver or it does not tell (oci: one mode, as
 * usable as the runtime). Loop thread; does not block.
 */
size_t containers_isolations(struct daemon *d, struct ctr_isolation *out, size_t max);

/* The container named handle (borrowed: valid until the loop runs on), or
 * ENOENT / ERR_UNAVAILABLE. */
int container_lookup(struct daemon *d, const char *handle, struct container **out, struct err *err);

/*
 * The container ref names, among the listed ones that visible (NULL: any)
 * accepts: its handle, its name, or else a prefix of exactly one handle.
 * ENOENT, or EINVAL when the prefix is one of several.
 */
int container_resolve(struct daemon *d, const char *ref, bool (*visible)(const struct container *),
                      struct container **out, struct err *err);

/* Checks "NAME=value" entries (at most 4096); field names them in errors. */
int container_env_check(char *const *env, const char *field, struct err *err);

/* Is the container to be listed (it exists for clients: created, not creating)? */
bool container_listed(const struct container *c);

typedef void (*container_create_cb)(void *arg, const struct err *err, struct container *c);

/*
 * Creates a container from p (taken, also on error): checks it (an empty
 * handle gets a generated one; exactly one of image_ref and rootfs_dir;
 * absolute paths; limits, grace time; isolation, when not NULL, must be
 * offered by the driver; ports: at most CTR_PORTS_MAX, a container port
 * from 1, a host port given once, none with net_disabled, ENOTSUP with
 * --network none), registers it as "creating" and runs the create: its
 * jobs and its network's attach (daemon/ctr_create.c). The callback gets
 * the container, running and attached, or the error (the container is
 * then gone again, with everything made for it). A host port in use is
 * ERR_CONFLICT at once; a CNI plugin's failure reaches the callback with
 * the plugin's own message (EIO, ERR_UNAVAILABLE for a plugin missing,
 * ETIMEDOUT).
 */
int container_create(struct daemon *d, struct ctr_params *p, const char *isolation,
                     container_create_cb cb, void *arg, struct svc_call **call, struct err *err);

struct net_attachment;
/*
 * The container's network (daemon/net.h: its address, gateway, forwarded
 * ports, or disabled), or NULL when it has none (no network service, or
 * a container from before there was one). Valid until the loop runs on.
 */
const struct net_attachment *container_network(const struct container *c);

typedef void (*container_stats_cb)(void *arg, const struct err *err, struct container *c,
                                   const struct ctr_usage *usage);
/*
 * Reads a running container's usage. The callback gets the container and
 * its usage, or usage NULL when it stopped meanwhile (it is then marked
 * stopped), or ENOENT when it was deleted meanwhile. ERR_CONFLICT at once
 * when it is not running.
 */
int container_stats(struct daemon *d, const char *handle, container_stats_cb cb, void *arg,
                    struct svc_call **call, struct err *err);

typedef void (*container_delete_cb)(void *arg, const struct err *err);
/*
 * Deletes the container: TERM to its running processes, then after they
 * exited or its grace time passed, the undo job (whose runtime delete
 * kills what is left) and, beside it, its network's detach (CNI DEL, the
 * namespace). ERR_CONFLICT at once while it is being created, deleted,
 * or a process is being started. A failed delete (the undo, or a
 * plugin's DEL) leaves it "deleting"; deleting again retries every step.
 */
int container_delete(struct daemon *d, const char *handle, container_delete_cb cb, void *arg,
                     struct svc_call **call, struct err *err);

/* As container_delete, with grace_s instead of the container's grace
 * time (-1: the container's; 0: no TERM, everything is killed at once). */
int container_delete_grace(struct daemon *d, const char *handle, int64_t grace_s,
                           container_delete_cb cb, void *arg, struct svc_call **call,
                           struct err *err);

/*
 * Shutdown: deletes waiting out a grace time give up (their callbacks get
 * ECANCELED; the containers stay "deleting" and a later delete retries).
 */
void containers_shutdown(struct containers *reg);

/* ---- for daemon/containers.c only ----------------------------------------- */

/* A process of c exited: a delete waiting for the last one goes on. */
void ctr_delete_proc_exited(struct container *c);
/* The registry closes: a delete still waiting is dropped silently. */
void ctr_delete_abandon(struct container *c);

#endif
