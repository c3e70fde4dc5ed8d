/*
 * Exec instances (daemon/svc_exec.h): a list in the container registry,
 * pruned of those whose container is gone whenever one is made. Loop
 * thread.
 */
#include "daemon/svc_exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/randid.h"
#include "common/strv.h"
#include "daemon/daemon.h"
#include "daemon/svc_containers.h"
#include "daemon/svc_main.h"

/* Whether an exec may run in c: as the engine, only while its main process
 * runs (a container without one, a /v1 one, while its init does). */
static bool
ctr_runs(const struct container *c)
{
    if (c->state != CTR_RUNNING)
        return false;
    return !c->p->main || container_main_running(c);
}

static void
exec_free(struct ctr_exec *x)
{
    strv_free(x->argv);
    strv_free(x->env);
    free(x->dir);
    free(x->user);
    free(x);
}

void
ctr_execs_free(struct containers *reg)
{
    while (reg->execs) {
        struct ctr_exec *x = reg->execs;
        reg->execs = x->next;
        exec_free(x);
    }
}

/* Drops the instances whose container is gone. */
static void
execs_prune(struct daemon *d)
{
    struct containers *reg = d->containers;
    for (struct ctr_exec **pp = &reg->execs; *pp;) {
        struct container *c = NULL;
        struct err err = {0};
        if (container_lookup(d, (*pp)->handle, &c, &err) < 0) {
            struct ctr_exec *x = *pp;
            *pp = x->next;
            exec_free(x);
        } else {
            pp = &(*pp)->next;
        }
    }
}

int
container_exec_create(struct daemon *d, const char *handle, const struct ctr_exec_spec *s,
                      struct ctr_exec **out, struct err *err)
{
    struct container *c = NULL;
    int ret = container_lookup(d, handle, &c, err);
    if (ret < 0)
        return ret;
    if (!ctr_runs(c))
        return err_set(err, ERR_CONFLICT, "container %s is not running", handle);
    if (!s->argv || !s->argv[0] || !*s->argv[0])
        return err_set(err, EINVAL, "exec in %s: no command", handle);
    execs_prune(d);
    struct ctr_exec *x = calloc(1, sizeof(*x));
    bool oom = false;
    if (x) {
        x->argv = strv_dup(s->argv, &oom);
        x->env = strv_dup(s->env, &oom);
        x->dir = s->dir ? strdup(s->dir) : NULL;
        x->user = s->user ? strdup(s->user) : NULL;
    }
    if (!x || oom || !x->argv || (s->dir && !x->dir) || (s->user && !x->user)) {
        if (x)
            exec_free(x);
        return err_set(err, ENOMEM, "exec in %s: out of memory", handle);
    }
    if ((ret = randid_hex(x->id, CTR_EXEC_ID_LEN / 2, err)) < 0) {
        exec_free(x);
        return ret;
    }
    snprintf(x->handle, sizeof(x->handle), "%s", handle);
    snprintf(x->proc_id, sizeof(x->proc_id), "exec-%.32s", x->id);
    x->in = s->in;
    x->out = s->out;
    x->err = s->err;
    x->next = d->containers->execs;
    d->containers->execs = x;
    *out = x;
    return 0;
}

int
container_exec_find(struct daemon *d, const char *id, struct ctr_exec **out, struct err *err)
{
    struct ctr_exec *found = NULL;
    size_t n = strlen(id);
    if (n > 0 && d->containers)
        for (struct ctr_exec *x = d->containers->execs; x; x = x->next) {
            if (strncmp(x->id, id, n) != 0)
                continue;
            if (found)
                return err_set(err, EINVAL, "multiple IDs found with provided prefix: %s", id);
            found = x;
        }
    if (!found)
        return err_set(err, ENOENT, "No such exec instance: %s", id);
    *out = found;
    return 0;
}

int
container_exec_start(struct daemon *d, struct ctr_exec *x, process_start_cb cb, void *arg,
                     struct svc_call **call, struct err *err)
{
    if (x->started)
        return err_set(err, ERR_CONFLICT, "exec %.12s has already run", x->id);
    struct container *c = NULL;
    int ret = container_lookup(d, x->handle, &c, err);
    if (ret < 0)
        return ret;
    if (!ctr_runs(c))
        return err_set(err, ERR_CONFLICT, "container %s is not running", x->handle);
    struct process_spec spec = {.id = x->proc_id,
                                .path = x->argv[0],
                                .args = x->argv + 1,
                                .has_args = true,
                                .env = x->env,
                                .dir = x->dir,
                                .user = x->user,
                                .has_stdin = x->in};
    ret = process_start(d, x->handle, &spec, cb, arg, call, err);
    if (ret == 0)
        x->started = true;
    return ret;
}

void
container_exec_start_failed(struct ctr_exec *x, const struct err *err)
{
    x->start_failed = process_start_exit_code(err);
}

struct ctr_proc *
container_exec_proc(struct daemon *d, const struct ctr_exec *x)
{
    struct container *c = NULL;
    struct ctr_proc *pr = NULL;
    struct err err = {0};
    if (!x->started || process_lookup(d, x->handle, x->proc_id, &c, &pr, &err) < 0)
        return NULL;
    return pr;
}
