/*
 * The process service (daemon/svc_processes.h): start, wait, signal and
 * delete. A start resolves the process's command, environment, working
 * directory and user from the request, the container and the image's
 * config, then a job resolves the user inside the container (for its uid,
 * gid and HOME) and asks the driver to spawn. Loop thread, except the
 * *_work functions.
 */
#include "daemon/svc_processes.h"

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/os.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/randid.h"
#include "common/strv.h"
#include "daemon/daemon.h"
#include "daemon/svc_containers.h"

int
process_lookup(struct daemon *d, const char *handle, const char *id, struct container **c,
               struct ctr_proc **pr, struct err *err)
{
    int ret = container_lookup(d, handle, c, err);
    if (ret < 0)
        return ret;
    *pr = id ? container_proc_find(*c, id) : NULL;
    if (!*pr)
        return err_set(err, ENOENT, "process %s in container %s: not found", id ? id : "",
                       (*c)->p->handle);
    return 0;
}

/* ---- start ------------------------------------------------------------------ */

struct spawn_job {
    struct svc_call call;
    process_start_cb cb;
    void *arg;
    struct ctr_target t;
    char **argv, **env;
    char *cwd, *user;
    bool has_stdin;
    bool keeps_start_failure;
    unsigned main_run;
    struct rt_proc_status st;
    int64_t started_ms, finished_ms; /* from the driver's records, 0 when unknown */
    int rc;
    struct err err;
};

static void
spawn_job_free(struct spawn_job *j)
{
    ctr_target_clear(&j->t);
    strv_free(j->argv);
    strv_free(j->env);
    free(j->cwd);
    free(j->user);
    free(j);
}

/*
 * A main run's start as the container's records keep it for the next
 * daemon: its failure to run the program written, or any earlier one
 * removed, as start_done (daemon/svc_main.c) sets the loop's copy. Blocks.
 */
static void
spawn_keep_failure(struct spawn_job *j)
{
    struct err err = {0};
    int rc = 0;
    if (j->rc == -ERR_INVALID_CONTENT) {
        struct ctr_start_failure f = {.exit_code = process_start_exit_code(&j->err),
                                      .at_ms = clock_unix_ms(),
                                      .run = j->main_run};
        snprintf(f.error, sizeof(f.error), "%s", j->err.msg);
        rc = ctr_start_failure_write(j->t.dir, &f, &err);
    } else {
        rc = ctr_start_failure_clear(j->t.dir, &err);
    }
    if (rc < 0)
        log_warn("container %s: %s", j->t.handle, err.msg);
}

/* Resolves the user and asks the driver to spawn; the outcome in j->rc and j->err. */
static void
spawn_run(struct spawn_job *j)
{
    struct rt_proc_spec spec = {.id = j->t.id,
                                .path = j->argv[0],
                                .argv = j->argv,
                                .env = j->env,
                                .dir = j->cwd,
                                .has_stdin = j->has_stdin};
    char *home = NULL;
    j->rc = containers_resolve_user(j->t.dir, j->user ? j->user : "0", &spec.uid, &spec.gid, &home,
                                    &j->err);
    if (j->rc < 0)
        return;
    /* HOME from the user's passwd entry when nothing set it, as Docker does. */
    size_t n = strv_len(j->env);
    if (strv_env_find(j->env, "HOME=") < 0) {
        char *entry = NULL;
        if (asprintf(&entry, "HOME=%s", home ? home : "/") < 0 || strv_push(&j->env, &n, entry) < 0)
            j->rc = err_set(&j->err, ENOMEM, "start process %s: out of memory", j->t.id);
        free(entry);
    }
    free(home);
    spec.env = j->env;
    if (j->rc < 0)
        return;
    j->rc = j->t.drv->proc_spawn(j->t.drv_ctx, j->t.handle, j->t.dir, &spec, &j->st, &j->err);
    /* Its start as its records keep it, so that it reads the same after a restart. */
    struct rt_proc_times times;
    struct err ignored;
    if (j->rc == 0 &&
        j->t.drv->proc_times(j->t.drv_ctx, j->t.handle, j->t.dir, j->t.id, &times, &ignored) == 0)
        j->started_ms = times.started_ms, j->finished_ms = times.finished_ms;
    if (j->rc == -ENOEXEC) {
        /* It never ran: no record is kept, so the id can be used again. */
        j->t.drv->proc_remove(j->t.drv_ctx, j->t.handle, j->t.dir, j->t.id, &ignored);
        j->err.code = ERR_INVALID_CONTENT;
        j->rc = -ERR_INVALID_CONTENT;
    }
}

static void
spawn_work(void *ctx)
{
    struct spawn_job *j = ctx;
    spawn_run(j);
    if (j->keeps_start_failure)
        spawn_keep_failure(j);
}

int
process_start_exit_code(const struct err *err)
{
    char m[ERR_MSG_MAX];
    size_t i = 0;
    for (; err && err->msg[i] && i < sizeof(m) - 1; i++)
        m[i] = (char)tolower((unsigned char)err->msg[i]);
    m[i] = '\0';
    if (strstr(m, "no such file or directory") || strstr(m, "not a directory") ||
        strstr(m, "cannot find the file specified"))
        return 127;
    if (strstr(m, "permission denied") || strstr(m, "is a directory") ||
        strstr(m, "access is denied"))
        return 126;
    return 128;
}

static void
spawn_done(void *ctx, bool cancelled)
{
    struct spawn_job *j = ctx;
    struct container *c = j->t.c;
    c->spawning--;
    if (cancelled && j->rc == 0)
        j->rc =
            err_set(&j->err, ECANCELED, "start process %s: the daemon is shutting down", j->t.id);
    struct ctr_proc *pr = NULL;
    if (j->rc == 0 && c->registered && !container_proc_find(c, j->t.id))
        pr = container_proc_add(c, j->t.id, j->has_stdin, &j->st,
                                j->started_ms ? j->started_ms : clock_unix_ms());
    /* It may be over already: its end as the records keep it, as after a reload. */
    if (pr && pr->exited && j->finished_ms)
        pr->finished_at = j->finished_ms;
    if (j->rc == 0 && !pr)
        j->rc = err_set(&j->err, c->registered ? ENOMEM : ENOENT, "start process %s: %s", j->t.id,
                        c->registered ? "out of memory" : "its container was deleted");
    if (!j->call.detached)
        j->cb(j->arg, j->rc < 0 ? &j->err : NULL, pr);
    spawn_job_free(j);
}

void
process_command_parts(const struct ctr_params *p, const struct process_spec *o,
                      char *const **entrypoint, char *const **cmd)
{
    /* Docker's merge: an entrypoint of the container's own drops the
     * image's Cmd too, unless it is empty. */
    bool own_ep = o->has_entrypoint && o->entrypoint && o->entrypoint[0];
    *entrypoint = o->has_entrypoint ? o->entrypoint : p->image_entrypoint;
    *cmd = o->has_args ? o->args : own_ep ? NULL : p->image_cmd;
}

char **
process_command(const struct ctr_params *p, const struct process_spec *o, struct err *err)
{
    char **argv = calloc(1, sizeof(char *));
    size_t n = 0;
    bool oom = !argv;
    char *const *ep = NULL, *const *cmd = o->args;
    if (o->path)
        oom = oom || strv_push(&argv, &n, o->path) < 0;
    else
        process_command_parts(p, o, &ep, &cmd);
    for (size_t i = 0; !oom && ep && ep[i]; i++)
        oom = strv_push(&argv, &n, ep[i]) < 0;
    for (size_t i = 0; !oom && cmd && cmd[i]; i++)
        oom = strv_push(&argv, &n, cmd[i]) < 0;
    if (oom) {
        strv_free(argv);
        err_set(err, ENOMEM, "start process: out of memory");
        return NULL;
    }
    if (n == 0 || !argv[0][0]) {
        strv_free(argv);
        err_set(err, EINVAL, "field \"path\": required (the image has no Entrypoint or Cmd)");
        return NULL;
    }
    return argv;
}

/* The container's environment with the process's on top, PATH defaulted. */
static char **
env_of(char *const *base, char *const *over)
{
    char **env = calloc(1, sizeof(char *));
    size_t n = 0;
    bool oom = !env;
    for (size_t i = 0; !oom && base && base[i]; i++)
        if (strv_env_find(over, base[i]) < 0)
            oom = strv_push(&env, &n, base[i]) < 0;
    for (size_t i = 0; !oom && over && over[i]; i++)
        oom = strv_push(&env, &n, over[i]) < 0;
    if (!oom && strv_env_find(env, "PATH=") < 0)
        oom = strv_push(&env, &n, PROC_DEFAULT_PATH) < 0;
    if (oom) {
        strv_free(env);
        return NULL;
    }
    return env;
}

static int
check_start(const struct process_spec *o, struct err *err)
{
    if (o->id && !rt_id_valid(o->id))
        return err_set(err, EINVAL,
                       "field \"id\": %.80s is not 1 to 64 characters of [A-Za-z0-9_.-] not "
                       "starting with a dot",
                       o->id);
    if (o->path && (!*o->path || strlen(o->path) > 4096 || strchr(o->path, '\n')))
        return err_set(err, EINVAL, "field \"path\": expected a program path or name");
    if (o->dir && o->dir[0] != '/')
        return err_set(err, EINVAL, "field \"dir\": %.200s is not an absolute path", o->dir);
    if (o->user && (!*o->user || strlen(o->user) > 256))
        return err_set(err, EINVAL, "field \"user\": expected uid[:gid] or a name");
    return container_env_check(o->env, "env", err);
}

int
process_start(struct daemon *d, const char *handle, const struct process_spec *o,
              process_start_cb cb, void *arg, struct svc_call **call, struct err *err)
{
    struct container *c = NULL;
    int ret = container_lookup(d, handle, &c, err);
    if (ret == 0)
        ret = check_start(o, err);
    if (ret < 0)
        return ret;
    if (c->state != CTR_RUNNING)
        return err_set(err, ERR_CONFLICT, "container %s: %s, not running", c->p->handle,
                       ctr_state_name(c->state));
    char genid[CTR_ID_MAX + 1];
    const char *id = o->id;
    if (!id) {
        randid_new(genid, sizeof(genid), "p-");
        id = genid;
    }
    if (container_proc_find(c, id))
        return err_set(err, ERR_CONFLICT, "process %s in container %s: the id is taken", id,
                       c->p->handle);
    struct spawn_job *j = calloc(1, sizeof(*j));
    if (!j)
        return err_set(err, ENOMEM, "start process: out of memory");
    const struct ctr_params *p = c->p;
    const char *user = o->user ? o->user : p->user ? p->user : p->image_user;
    j->argv = process_command(p, o, err);
    if (!j->argv) {
        spawn_job_free(j);
        return -err->code;
    }
    int tr = ctr_target_init(&j->t, c, id);
    j->env = env_of(p->env, o->env);
    j->cwd = strdup(o->dir ? o->dir : p->working_dir ? p->working_dir : "/");
    j->user = user ? strdup(user) : NULL;
    if (tr < 0 || !j->env || !j->cwd || (user && !j->user)) {
        spawn_job_free(j);
        return err_set(err, ENOMEM, "start process: out of memory");
    }
    j->cb = cb;
    j->arg = arg;
    j->has_stdin = o->has_stdin;
    j->keeps_start_failure = o->keeps_start_failure;
    j->main_run = o->main_run;
    if ((ret = job_submit_prompt(d->jobs, "process.start", spawn_work, spawn_done, j)) < 0) {
        spawn_job_free(j);
        return err_set(err, ECANCELED, "start process %s: cannot start the job: %s", id,
                       strerror(-ret));
    }
    c->spawning++;
    svc_call_give(&j->call, call);
    return 0;
}

/* ---- wait ------------------------------------------------------------------- */

struct process_waiter {
    process_wait_cb cb;
    void *arg;
    struct container *c; /* a reference */
    struct ctr_proc *pr; /* NULL once unlinked */
    char id[CTR_ID_MAX + 1];
    struct ctr_listener lis;
    uv_timer_t timer;
    bool ended;
};

static void
waiter_timer_closed_cb(uv_handle_t *h)
{
    struct process_waiter *w = h->data;
    container_unref(w->c);
    free(w);
}

/* Ends the wait: reports (unless cancelled) and frees it once its timer closed. */
static void
waiter_end(struct process_waiter *w, const struct err *err, bool report)
{
    if (w->ended)
        return;
    w->ended = true;
    const struct ctr_proc *pr = w->pr;
    if (w->pr)
        ctr_unlisten(w->pr, &w->lis);
    w->pr = NULL;
    uv_timer_stop(&w->timer);
    if (report)
        w->cb(w->arg, err, pr);
    uv_close((uv_handle_t *)&w->timer, waiter_timer_closed_cb);
}

/* The process has exited (or is lost): its result. */
static void
waiter_report_exit(struct process_waiter *w)
{
    struct err err;
    if (w->pr->lost) {
        err_set(&err, ERR_CONFLICT, "process %s: %s", w->pr->id, w->pr->error);
        waiter_end(w, &err, true);
        return;
    }
    waiter_end(w, NULL, true);
}

static void
waiter_event(struct ctr_listener *l, enum ctr_event ev)
{
    struct process_waiter *w = l->ctx;
    if (ev == CTR_EV_EXIT) {
        waiter_report_exit(w);
    } else if (ev == CTR_EV_GONE) {
        struct err err;
        err_set(&err, ERR_CONFLICT, "process %s: its container was deleted", w->id);
        ctr_unlisten(w->pr, &w->lis);
        w->pr = NULL;
        waiter_end(w, &err, true);
    }
}

static void
waiter_timer_cb(uv_timer_t *t)
{
    struct process_waiter *w = t->data;
    if (w->pr && w->pr->exited) {
        waiter_report_exit(w);
        return;
    }
    struct err err;
    err_set(&err, ERR_DEADLINE, "process %s: still running after the timeout", w->id);
    waiter_end(w, &err, true);
}

int
process_wait(struct daemon *d, const char *handle, const char *id, int64_t timeout_ms,
             process_wait_cb cb, void *arg, struct process_waiter **out, struct err *err)
{
    struct container *c = NULL;
    struct ctr_proc *pr = NULL;
    int ret = process_lookup(d, handle, id, &c, &pr, err);
    if (ret < 0)
        return ret;
    struct process_waiter *w = calloc(1, sizeof(*w));
    if (!w)
        return err_set(err, ENOMEM, "wait for process %s: out of memory", id);
    w->cb = cb;
    w->arg = arg;
    w->c = c;
    container_ref(c);
    w->pr = pr;
    snprintf(w->id, sizeof(w->id), "%s", pr->id);
    w->lis.fn = waiter_event;
    w->lis.ctx = w;
    ctr_listen(pr, &w->lis);
    uv_timer_init(d->loop, &w->timer);
    w->timer.data = w;
    /* An exit already known, or no time to wait, answers on the next turn. */
    if (pr->exited || timeout_ms == 0)
        uv_timer_start(&w->timer, waiter_timer_cb, 0, 0);
    else if (timeout_ms > 0)
        uv_timer_start(&w->timer, waiter_timer_cb, (uint64_t)timeout_ms, 0);
    *out = w;
    return 0;
}

void
process_wait_cancel(struct process_waiter *w)
{
    if (w)
        waiter_end(w, NULL, false);
}

/* ---- signal and delete ------------------------------------------------------ */

enum proc_op { PROC_SIGNAL, PROC_DELETE };

struct proc_job {
    struct svc_call call;
    process_done_cb cb;
    void *arg;
    enum proc_op op;
    struct ctr_target t;
    int sig;
    int rc;
    struct err err;
};

static void
proc_work(void *ctx)
{
    struct proc_job *j = ctx;
    if (j->op == PROC_SIGNAL)
        j->rc =
            j->t.drv->proc_signal(j->t.drv_ctx, j->t.handle, j->t.dir, j->t.id, j->sig, &j->err);
    else
        j->rc = j->t.drv->proc_remove(j->t.drv_ctx, j->t.handle, j->t.dir, j->t.id, &j->err);
}

static void
proc_done(void *ctx, bool cancelled)
{
    struct proc_job *j = ctx;
    if (cancelled && j->rc == 0)
        j->rc = err_set(&j->err, ECANCELED, "process %s: the daemon is shutting down", j->t.id);
    if (j->op == PROC_DELETE && (j->rc == 0 || j->rc == -ENOENT)) {
        struct ctr_proc *pr = j->t.c->registered ? container_proc_find(j->t.c, j->t.id) : NULL;
        if (pr)
            container_proc_remove(j->t.c, pr);
        j->rc = 0;
    }
    if (!j->call.detached)
        j->cb(j->arg, j->rc < 0 ? &j->err : NULL);
    ctr_target_clear(&j->t);
    free(j);
}

static int
proc_submit(struct daemon *d, const char *handle, const char *id, enum proc_op op, int sig,
            process_done_cb cb, void *arg, struct svc_call **call, struct err *err)
{
    struct container *c = NULL;
    struct ctr_proc *pr = NULL;
    int ret = process_lookup(d, handle, id, &c, &pr, err);
    if (ret < 0)
        return ret;
    if (op == PROC_SIGNAL && pr->exited)
        return err_set(err, ERR_CONFLICT, "process %s: exited", pr->id);
    if (op == PROC_DELETE && !pr->exited)
        return err_set(err, ERR_CONFLICT, "process %s: still running; signal it first", pr->id);
    struct proc_job *j = calloc(1, sizeof(*j));
    if (!j || ctr_target_init(&j->t, c, pr->id) < 0) {
        free(j);
        return err_set(err, ENOMEM, "process %s: out of memory", id);
    }
    j->op = op;
    j->cb = cb;
    j->arg = arg;
    j->sig = sig;
    ret = job_submit(d->jobs, op == PROC_SIGNAL ? "process.signal" : "process.delete", proc_work,
                     proc_done, j);
    if (ret < 0) {
        ctr_target_clear(&j->t);
        free(j);
        return err_set(err, ECANCELED, "process %s: cannot start the job: %s", id, strerror(-ret));
    }
    svc_call_give(&j->call, call);
    return 0;
}

int
process_signal_number(const char *name)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {{"TERM", SIGTERM}, {"KILL", SIGKILL}, {"INT", SIGINT},    {"HUP", SIGHUP},
                 {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},  {"STOP", SIGSTOP},
                 {"CONT", SIGCONT}, {"ALRM", SIGALRM}, {"WINCH", SIGWINCH}};
    if (strncmp(name, "SIG", 3) == 0)
        name += 3;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(names[i].name, name) == 0)
            return names[i].sig;
    return -1;
}

int
process_signal(struct daemon *d, const char *handle, const char *id, int sig, process_done_cb cb,
               void *arg, struct svc_call **call, struct err *err)
{
    if (sig < 1 || sig > 64)
        return err_set(err, EINVAL, "signal %d: expected 1 to 64", sig);
    return proc_submit(d, handle, id, PROC_SIGNAL, sig, cb, arg, call, err);
}

int
process_delete(struct daemon *d, const char *handle, const char *id, process_done_cb cb, void *arg,
               struct svc_call **call, struct err *err)
{
    return proc_submit(d, handle, id, PROC_DELETE, 0, cb, arg, call, err);
}
