/*
 * /v1/containers/{handle}/processes: start (a job asks the container's
 * init), list, get, wait (no pool thread: the request waits on the
 * process's exit event and a timer), stdout and stderr (read with
 * uv_fs_read from the files the init writes; ?follow=1 waits for the
 * file's change events), stdin (the streamed body written to the FIFO
 * through a uv_pipe_t, one chunk in flight) and signal. Loop thread,
 * except the *_work functions.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "api/api.h"
#include "api/containers.h"
#include "api/handlers.h"
#include "jsonutil/jsonutil.h"
#include "api/request.h"
#include "api/stream.h"
#include "common/log.h"
#include "daemon/daemon.h"

#define OUTPUT_CHUNK (64 * 1024)
#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

int api_parse_env(json_object *arr, const char *where, char ***out, struct err *err);
void api_random_id(char *out, const char *prefix);

static int64_t
now_unix_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static void
strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* ---- start ------------------------------------------------------------------ */

struct spawn_job {
    struct api_req *req; /* weak */
    struct container *c; /* a reference */
    const struct rt_driver *drv;
    void *drv_ctx;
    char handle[CTR_HANDLE_MAX + 1];
    char *dir;
    char id[CTR_ID_MAX + 1];
    char *path;
    char **argv, **env;
    char *cwd, *user;
    bool stdin;
    struct rt_proc_status st;
    int rc;
    struct err err;
};

static void
spawn_job_free(struct spawn_job *j)
{
    free(j->dir);
    free(j->path);
    strv_free(j->argv);
    strv_free(j->env);
    free(j->cwd);
    free(j->user);
    free(j);
}

static void
spawn_work(void *ctx)
{
    struct spawn_job *j = ctx;
    struct rt_proc_spec spec = {.id = j->id,
                                .path = j->path,
                                .argv = j->argv,
                                .env = j->env,
                                .dir = j->cwd,
                                .stdin = j->stdin};
    if (j->user) {
        j->rc = containers_resolve_user(j->dir, j->user, &spec.uid, &spec.gid, &j->err);
        if (j->rc < 0)
            return;
    }
    j->rc = j->drv->proc_spawn(j->drv_ctx, j->handle, j->dir, &spec, &j->st, &j->err);
}

static void
spawn_done(void *ctx, bool cancelled)
{
    struct spawn_job *j = ctx;
    struct container *c = j->c;
    c->spawning--;
    if (cancelled && j->rc == 0)
        j->rc = err_set(&j->err, ECANCELED, "start process %s: the daemon is shutting down", j->id);
    struct ctr_proc *pr = NULL;
    if (c->registered && (j->rc == 0 || j->rc == -ENOEXEC) && !container_proc_find(c, j->id))
        pr = container_proc_add(c, j->id, j->stdin, &j->st, now_unix_ms());
    if (j->rc == -ENOEXEC) {
        /* It never ran; its record says why (exit code 127). */
        j->err.code = ERR_INVALID_CONTENT;
        if (pr)
            pr->finished_at = pr->started_at;
    }
    if (j->req) {
        j->req->weak_ref = NULL;
        if (j->rc < 0) {
            api_reply_err(j->req, &j->err);
        } else {
            json_object *o = json_object_new_object();
            json_object_object_add(o, "id", json_object_new_string(j->id));
            json_object_object_add(o, "state", json_object_new_string("running"));
            json_object_object_add(o, "pid", json_object_new_int(j->st.pid));
            api_reply_json(j->req, 201, o);
        }
        api_req_resume(j->req);
    }
    container_unref(c);
    spawn_job_free(j);
}

/* The container's environment with the process's on top (same names replaced). */
static char **
merge_env(char *const *base, char *const *over)
{
    size_t nb = 0, no = 0;
    while (base && base[nb])
        nb++;
    while (over && over[no])
        no++;
    char **env = calloc(nb + no + 2, sizeof(char *));
    if (!env)
        return NULL;
    size_t n = 0;
    bool have_path = false;
    for (size_t i = 0; i < nb; i++) {
        size_t klen = strcspn(base[i], "=");
        bool replaced = false;
        for (size_t k = 0; k < no && !replaced; k++)
            replaced = strncmp(over[k], base[i], klen + 1) == 0;
        if (!replaced)
            env[n++] = strdup(base[i]);
    }
    for (size_t k = 0; k < no; k++)
        env[n++] = strdup(over[k]);
    for (size_t i = 0; i < n; i++)
        have_path |= env[i] && strncmp(env[i], "PATH=", 5) == 0;
    if (!have_path)
        env[n++] = strdup(DEFAULT_PATH);
    for (size_t i = 0; i < n; i++) {
        if (!env[i]) {
            strv_free(env);
            return NULL;
        }
    }
    return env;
}

void
processes_post(struct api_req *req)
{
    struct container *c = api_container_lookup(req);
    if (!c)
        return;
    static const char *const fields[] = {"id", "path", "args", "env", "dir", "user", "stdin", NULL};
    struct err err = {0};
    json_object *body = NULL, *args = NULL, *env = NULL;
    const char *id = NULL, *path = NULL, *dir = NULL, *user = NULL;
    bool want_stdin = false;
    char **penv = NULL;
    int rc = 0;
    if (api_req_body_json(req, false, &body, &err) < 0 ||
        jsonutil_check_fields(body, "", fields, &err) < 0 ||
        jsonutil_get_string(body, "", "id", false, &id, &err) < 0 ||
        jsonutil_get_string(body, "", "path", true, &path, &err) < 0 ||
        jsonutil_get_array(body, "", "args", false, &args, &err) < 0 ||
        jsonutil_get_array(body, "", "env", false, &env, &err) < 0 ||
        jsonutil_get_string(body, "", "dir", false, &dir, &err) < 0 ||
        jsonutil_get_string(body, "", "user", false, &user, &err) < 0 ||
        jsonutil_get_bool(body, "", "stdin", false, &want_stdin, &err) < 0)
        rc = -1;
    if (rc == 0 && id && !rt_id_valid(id))
        rc = err_set(&err, EINVAL,
                     "field \"id\": %.80s is not 1 to 64 characters of [A-Za-z0-9_.-] not "
                     "starting with a dot",
                     id);
    if (rc == 0 && (!*path || strlen(path) > 4096 || strchr(path, '\n')))
        rc = err_set(&err, EINVAL, "field \"path\": expected a program path or name");
    if (rc == 0 && dir && dir[0] != '/')
        rc = err_set(&err, EINVAL, "field \"dir\": %.200s is not an absolute path", dir);
    if (rc == 0 && user && (!*user || strlen(user) > 256))
        rc = err_set(&err, EINVAL, "field \"user\": expected uid[:gid] or a name");
    size_t nargs = args ? json_object_array_length(args) : 0;
    if (rc == 0 && nargs > 65536)
        rc = err_set(&err, EINVAL, "field \"args\": more than 65536 entries");
    for (size_t i = 0; rc == 0 && i < nargs; i++)
        if (!json_object_is_type(json_object_array_get_idx(args, i), json_type_string))
            rc = err_set(&err, EINVAL, "field \"args[%zu]\": expected a string, got %s", i,
                         jsonutil_type_article(json_object_array_get_idx(args, i)));
    if (rc == 0 && env)
        rc = api_parse_env(env, "env", &penv, &err);
    if (rc == 0 && c->state != CTR_RUNNING)
        rc = err_set(&err, ERR_CONFLICT, "container %s: %s, not running", c->p->handle,
                     ctr_state_name(c->state));
    char genid[CTR_ID_MAX + 1];
    if (rc == 0 && !id) {
        api_random_id(genid, "p-");
        id = genid;
    }
    if (rc == 0 && container_proc_find(c, id))
        rc = err_set(&err, ERR_CONFLICT, "process %s in container %s: the id is taken", id,
                     c->p->handle);
    struct spawn_job *j = rc == 0 ? calloc(1, sizeof(*j)) : NULL;
    if (rc == 0 && j) {
        j->dir = strdup(c->dir);
        j->path = strdup(path);
        j->argv = calloc(nargs + 2, sizeof(char *));
        if (j->argv) {
            j->argv[0] = strdup(path);
            for (size_t i = 0; i < nargs; i++)
                j->argv[i + 1] = strdup(json_object_get_string(json_object_array_get_idx(args, i)));
        }
        j->env = merge_env(c->p->env, penv);
        j->cwd = strdup(dir ? dir : (c->p->working_dir ? c->p->working_dir : "/"));
        j->user = user ? strdup(user) : NULL;
        if (!j->dir || !j->path || !j->argv || !j->env || !j->cwd || (user && !j->user))
            rc = err_set(&err, ENOMEM, "out of memory");
        for (size_t i = 0; rc == 0 && i <= nargs; i++)
            if (!j->argv[i])
                rc = err_set(&err, ENOMEM, "out of memory");
    } else if (rc == 0) {
        rc = err_set(&err, ENOMEM, "out of memory");
    }
    strv_free(penv);
    if (rc < 0) {
        json_object_put(body);
        if (j)
            spawn_job_free(j);
        api_reply_err(req, &err);
        return;
    }
    snprintf(j->id, sizeof(j->id), "%s", id);
    json_object_put(body);
    j->c = c;
    j->drv = c->reg->drv;
    j->drv_ctx = c->reg->drv_ctx;
    snprintf(j->handle, sizeof(j->handle), "%s", c->p->handle);
    j->stdin = want_stdin;
    container_ref(c);
    c->spawning++;
    if (api_req_run_job(req, &j->req, "process.start", spawn_work, spawn_done, j) < 0) {
        c->spawning--;
        container_unref(c);
        spawn_job_free(j);
    }
}

/* ---- list and get ----------------------------------------------------------- */

void
processes_list(struct api_req *req)
{
    struct container *c = api_container_lookup(req);
    if (!c)
        return;
    json_object *arr = json_object_new_array();
    for (const struct ctr_proc *pr = c->procs; pr; pr = pr->next)
        json_object_array_add(arr, api_proc_to_json(pr));
    json_object *body = json_object_new_object();
    json_object_object_add(body, "processes", arr);
    api_reply_json(req, 200, body);
}

void
processes_get(struct api_req *req)
{
    struct container *c = api_container_lookup(req);
    struct ctr_proc *pr = c ? api_proc_lookup(req, c) : NULL;
    if (pr)
        api_reply_json(req, 200, api_proc_to_json(pr));
}

/* ---- wait ------------------------------------------------------------------- */

struct waiter {
    struct api_req *req;
    struct container *c; /* a reference */
    struct ctr_proc *pr; /* NULL once unlinked */
    struct ctr_listener lis;
    uv_timer_t timer;
    bool timer_on;
};

static void
reply_exit(struct api_req *req, const struct ctr_proc *pr)
{
    if (pr->lost) {
        api_reply_error(req, 409, "conflict", "process %s: %s", pr->id, pr->error);
        return;
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "exit_code", json_object_new_int(pr->exit_code));
    api_reply_json(req, 200, o);
}

static void
waiter_timer_closed_cb(uv_handle_t *h)
{
    struct waiter *w = h->data;
    container_unref(w->c);
    free(w);
}

/* Ends the wait: unlinks it and (after the timer closed) frees it. */
static void
waiter_free(void *ctx)
{
    struct waiter *w = ctx;
    if (w->pr)
        ctr_unlisten(w->pr, &w->lis);
    w->pr = NULL;
    if (w->req) {
        w->req->ctx = NULL;
        w->req->ctx_free = NULL;
        w->req->on_shutdown = NULL;
    }
    w->req = NULL;
    uv_close((uv_handle_t *)&w->timer, waiter_timer_closed_cb);
}

static void
waiter_event(struct ctr_listener *l, enum ctr_event ev)
{
    struct waiter *w = l->ctx;
    if (ev != CTR_EV_EXIT && ev != CTR_EV_GONE)
        return;
    struct api_req *req = w->req;
    if (ev == CTR_EV_EXIT)
        reply_exit(req, w->pr);
    else
        api_reply_error(req, 409, "conflict", "process %s: its container was deleted", w->pr->id);
    waiter_free(w);
    api_req_resume(req);
}

static void
waiter_timeout_cb(uv_timer_t *t)
{
    struct waiter *w = t->data;
    struct api_req *req = w->req;
    if (!req)
        return;
    api_reply_error(req, 408, "timeout", "process %s: still running after the timeout",
                    w->pr ? w->pr->id : "");
    waiter_free(w);
    api_req_resume(req);
}

static void
waiter_on_shutdown(struct api_req *req)
{
    struct waiter *w = req->ctx;
    if (!w)
        return;
    api_reply_error(req, 503, "unavailable", "the daemon is shutting down");
    waiter_free(w);
    api_req_resume(req);
}

void
processes_wait(struct api_req *req)
{
    struct container *c = api_container_lookup(req);
    struct ctr_proc *pr = c ? api_proc_lookup(req, c) : NULL;
    if (!pr)
        return;
    const char *t = api_req_query(req, "timeout");
    double timeout_s = -1;
    if (t) {
        char *end;
        timeout_s = strtod(t, &end);
        if (end == t || *end || timeout_s < 0 || timeout_s > 86400 * 7) {
            api_reply_error(req, 400, "bad_request",
                            "query \"timeout\": %.40s is not a number of seconds (0 to 604800)", t);
            return;
        }
    }
    if (pr->exited) {
        reply_exit(req, pr);
        return;
    }
    if (timeout_s == 0) {
        api_reply_error(req, 408, "timeout", "process %s: still running", pr->id);
        return;
    }
    struct waiter *w = calloc(1, sizeof(*w));
    if (!w) {
        api_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    w->req = req;
    w->c = c;
    container_ref(c);
    w->pr = pr;
    w->lis.fn = waiter_event;
    w->lis.ctx = w;
    ctr_listen(pr, &w->lis);
    uv_timer_init(api_daemon(req->api)->loop, &w->timer);
    w->timer.data = w;
    if (timeout_s > 0)
        uv_timer_start(&w->timer, waiter_timeout_cb, (uint64_t)(timeout_s * 1000), 0);
    req->ctx = w;
    req->ctx_free = waiter_free;
    req->on_shutdown = waiter_on_shutdown;
    api_req_suspend(req);
}

/* ---- stdout and stderr ------------------------------------------------------ */

struct out_open_job {
    struct api_req *req; /* weak */
    struct container *c; /* a reference */
    const struct rt_driver *drv;
    void *drv_ctx;
    char handle[CTR_HANDLE_MAX + 1];
    char id[CTR_ID_MAX + 1];
    char *dir;
    int which;
    int fd;
    struct err err;
    int64_t offset;
    bool follow;
};

/*
 * One reader of a process's output. It reads the file from offset with
 * uv_fs_read, one chunk in flight, the next only when the client took
 * the last; at the end of the file it ends the reply, or with follow
 * waits for the file's change event or the process's exit (then reads
 * to the end once more, so nothing written before the exit is missed).
 */
struct out_reader {
    struct api_req *req; /* NULL once the request went away */
    struct api_stream *stream;
    struct container *c; /* a reference */
    struct ctr_proc *pr; /* NULL once unlinked */
    struct ctr_listener lis;
    int which;
    uv_file fd;
    int64_t offset;
    bool follow;
    bool reading, want_drain, waiting;
    bool event_during_read; /* new output or an exit came while a read ran */
    bool exited_at_read;    /* the process had exited when this read started */
    bool done;
    uv_fs_t fsreq;
    char buf[OUTPUT_CHUNK];
};

static void reader_read(struct out_reader *r);

static void
reader_close_fd(struct out_reader *r)
{
    if (r->fd >= 0) {
        uv_fs_t creq;
        /* close(2) of a regular file does not wait on the disk. */
        uv_fs_close(NULL, &creq, r->fd, NULL);
        uv_fs_req_cleanup(&creq);
        r->fd = -1;
    }
}

static void
reader_maybe_free(struct out_reader *r)
{
    if (r->req || r->reading)
        return;
    if (r->pr)
        ctr_unlisten(r->pr, &r->lis);
    r->pr = NULL;
    reader_close_fd(r);
    api_stream_release(r->stream);
    container_unref(r->c);
    free(r);
}

static void
reader_end(struct out_reader *r)
{
    if (r->done)
        return;
    r->done = true;
    if (r->pr)
        ctr_unlisten(r->pr, &r->lis);
    r->pr = NULL;
    if (r->stream)
        api_stream_end(r->stream);
}

static void
reader_drained(void *ctx)
{
    struct out_reader *r = ctx;
    if (!r->want_drain)
        return;
    r->want_drain = false;
    reader_read(r);
}

static void
read_cb(uv_fs_t *fsreq)
{
    struct out_reader *r = fsreq->data;
    ssize_t n = fsreq->result;
    uv_fs_req_cleanup(fsreq);
    r->reading = false;
    if (!r->req || r->done || api_stream_gone(r->stream)) {
        reader_maybe_free(r);
        return;
    }
    if (n < 0) {
        log_warn("read output of a process: %s", uv_strerror((int)n));
        reader_end(r);
        return;
    }
    if (n > 0) {
        r->offset += n;
        r->want_drain = true;
        api_stream_write(r->stream, r->buf, (size_t)n);
        return; /* the next read when the client took it (reader_drained) */
    }
    /* The end of what is written so far. */
    if (!r->follow || r->exited_at_read || !r->pr) {
        reader_end(r);
        return;
    }
    if (r->event_during_read) {
        /* Output or the exit came while this read ran: it may have missed
         * them, so look again rather than wait for an event already seen. */
        reader_read(r);
        return;
    }
    r->waiting = true;
}

static void
reader_read(struct out_reader *r)
{
    if (r->reading || r->done)
        return;
    r->waiting = false;
    r->event_during_read = false;
    r->exited_at_read = !r->pr || r->pr->exited;
    r->reading = true;
    r->fsreq.data = r;
    uv_buf_t b = uv_buf_init(r->buf, sizeof(r->buf));
    int rc = uv_fs_read(r->c->reg->d->loop, &r->fsreq, r->fd, &b, 1, r->offset, read_cb);
    if (rc < 0) {
        r->reading = false;
        reader_end(r);
    }
}

static void
reader_event(struct ctr_listener *l, enum ctr_event ev)
{
    struct out_reader *r = l->ctx;
    bool mine = (ev == CTR_EV_STDOUT && r->which == 0) || (ev == CTR_EV_STDERR && r->which == 1);
    if (ev == CTR_EV_GONE) {
        ctr_unlisten(r->pr, &r->lis);
        r->pr = NULL;
    }
    if (!mine && ev != CTR_EV_EXIT && ev != CTR_EV_GONE)
        return;
    if (r->waiting)
        reader_read(r);
    else if (r->reading)
        r->event_during_read = true;
}

static void
reader_req_free(void *ctx)
{
    struct out_reader *r = ctx;
    r->req = NULL;
    reader_maybe_free(r);
}

static void
out_open_work(void *ctx)
{
    struct out_open_job *j = ctx;
    j->fd = j->drv->proc_output_open(j->drv_ctx, j->handle, j->dir, j->id, j->which, &j->err);
}

static void
out_open_done(void *ctx, bool cancelled)
{
    struct out_open_job *j = ctx;
    struct api_req *req = j->req;
    struct ctr_proc *pr = j->c->registered ? container_proc_find(j->c, j->id) : NULL;
    if (cancelled && j->fd >= 0) {
        close(j->fd);
        j->fd = -ECANCELED;
        err_set(&j->err, ECANCELED, "the daemon is shutting down");
    }
    if (!req || j->fd < 0 || !pr) {
        if (j->fd >= 0)
            close(j->fd);
        if (req) {
            req->weak_ref = NULL;
            if (j->fd < 0)
                api_reply_err(req, &j->err);
            else
                api_reply_error(req, 404, "not_found", "process %s: not found", j->id);
            api_req_resume(req);
        }
        container_unref(j->c);
        free(j->dir);
        free(j);
        return;
    }
    req->weak_ref = NULL;
    struct out_reader *r = calloc(1, sizeof(*r));
    if (!r) {
        close(j->fd);
        api_reply_error(req, 500, "internal", "out of memory");
        api_req_resume(req);
        container_unref(j->c);
        free(j->dir);
        free(j);
        return;
    }
    r->req = req;
    r->c = j->c; /* the job's reference moves to the reader */
    r->pr = pr;
    r->which = j->which;
    r->fd = j->fd;
    r->offset = j->offset;
    r->follow = j->follow;
    r->lis.fn = reader_event;
    r->lis.ctx = r;
    free(j->dir);
    free(j);
    req->ctx = r;
    req->ctx_free = reader_req_free;
    r->stream = api_stream_start(req, 200, "application/octet-stream");
    if (!r->stream) {
        api_req_resume(req);
        return; /* freed with the request */
    }
    api_stream_on_drained(r->stream, reader_drained, r);
    ctr_listen(pr, &r->lis);
    reader_read(r);
}

static void
output_get(struct api_req *req, int which)
{
    struct container *c = api_container_lookup(req);
    struct ctr_proc *pr = c ? api_proc_lookup(req, c) : NULL;
    if (!pr)
        return;
    const char *off = api_req_query(req, "offset");
    const char *follow = api_req_query(req, "follow");
    int64_t offset = 0;
    if (off) {
        char *end;
        long long v = strtoll(off, &end, 10);
        if (end == off || *end || v < 0) {
            api_reply_error(req, 400, "bad_request", "query \"offset\": %.40s is not a byte offset",
                            off);
            return;
        }
        offset = v;
    }
    struct out_open_job *j = calloc(1, sizeof(*j));
    if (!j || !(j->dir = strdup(c->dir))) {
        free(j);
        api_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    j->c = c;
    container_ref(c);
    j->drv = c->reg->drv;
    j->drv_ctx = c->reg->drv_ctx;
    snprintf(j->handle, sizeof(j->handle), "%s", c->p->handle);
    snprintf(j->id, sizeof(j->id), "%s", pr->id);
    j->which = which;
    j->offset = offset;
    j->follow = follow && strcmp(follow, "0") != 0 && strcmp(follow, "false") != 0;
    if (api_req_run_job(req, &j->req, "process.output", out_open_work, out_open_done, j) < 0) {
        container_unref(c);
        free(j->dir);
        free(j);
    }
}

void
processes_stdout(struct api_req *req)
{
    output_get(req, 0);
}

void
processes_stderr(struct api_req *req)
{
    output_get(req, 1);
}

/* ---- stdin ------------------------------------------------------------------ */

/*
 * A stdin upload: the FIFO is opened by a job, then each piece of the
 * body is written through a uv_pipe_t, one write in flight, the
 * connection suspended meanwhile. The end of the body closes our end and
 * (unless ?close=0) asks the init to drop its own, so the process reads
 * EOF.
 */
struct stdin_op {
    struct api_req *req; /* NULL once the request went away */
    struct container *c; /* a reference */
    const struct rt_driver *drv;
    void *drv_ctx;
    char handle[CTR_HANDLE_MAX + 1];
    char id[CTR_ID_MAX + 1];
    char *dir;
    bool close_after;
    int fd; /* from the open job */
    struct err err;
    int rc;
    bool opened, open_failed, writing, pipe_open, finishing, job_running;
    bool eof; /* the whole body arrived */
    uv_pipe_t pipe;
    uv_write_t wreq;
    char *wbuf;
    uint64_t written;
};

static void
stdin_op_free(struct stdin_op *op)
{
    if (op->req || op->job_running || op->writing || op->pipe_open)
        return;
    container_unref(op->c);
    free(op->dir);
    free(op->wbuf);
    free(op);
}

static void
stdin_pipe_closed_cb(uv_handle_t *h)
{
    struct stdin_op *op = h->data;
    op->pipe_open = false;
    stdin_op_free(op);
}

static void
stdin_close_pipe(struct stdin_op *op)
{
    if (op->opened && op->pipe_open && !uv_is_closing((uv_handle_t *)&op->pipe))
        uv_close((uv_handle_t *)&op->pipe, stdin_pipe_closed_cb);
}

static void
stdin_req_free(void *ctx)
{
    struct stdin_op *op = ctx;
    op->req = NULL;
    stdin_close_pipe(op);
    stdin_op_free(op);
}

static void
stdin_reply(struct stdin_op *op)
{
    if (!op->req || op->req->response)
        return;
    if (op->rc < 0) {
        api_reply_err(op->req, &op->err);
    } else {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "bytes_written", json_object_new_int64((int64_t)op->written));
        json_object_object_add(o, "closed", json_object_new_boolean(op->close_after));
        api_reply_json(op->req, 200, o);
    }
    api_req_resume(op->req);
}

static void
stdin_open_work(void *ctx)
{
    struct stdin_op *op = ctx;
    op->fd = op->drv->proc_stdin_open(op->drv_ctx, op->handle, op->dir, op->id, &op->err);
}

static void
stdin_close_work(void *ctx)
{
    struct stdin_op *op = ctx;
    struct err err = {0};
    if (op->drv->proc_stdin_close(op->drv_ctx, op->handle, op->dir, op->id, &err) < 0 &&
        op->rc == 0 && err.code != ERR_UNAVAILABLE)
        log_info("close stdin of %s: %s", op->id, err.msg);
}

static void
stdin_close_done(void *ctx, bool cancelled)
{
    struct stdin_op *op = ctx;
    op->job_running = false;
    stdin_reply(op);
    stdin_op_free(op);
}

/* The body ended (or failed): close our end, maybe the init's, and answer. */
static void
stdin_finish(struct stdin_op *op)
{
    if (op->finishing || op->writing)
        return;
    op->finishing = true;
    stdin_close_pipe(op);
    if (op->close_after && op->rc == 0) {
        op->job_running = true;
        if (job_submit(op->c->reg->d->jobs, "process.stdin.close", stdin_close_work,
                       stdin_close_done, op) == 0)
            return;
        op->job_running = false;
    }
    stdin_reply(op);
}

static void
stdin_open_done(void *ctx, bool cancelled)
{
    struct stdin_op *op = ctx;
    op->job_running = false;
    if (cancelled && op->fd >= 0) {
        close(op->fd);
        op->fd = -1;
        err_set(&op->err, ECANCELED, "the daemon is shutting down");
    }
    if (op->fd < 0) {
        op->open_failed = true;
        op->rc = -op->err.code;
    } else {
        uv_pipe_init(op->c->reg->d->loop, &op->pipe, 0);
        op->pipe.data = op;
        op->pipe_open = true;
        op->opened = true;
        int rc = uv_pipe_open(&op->pipe, op->fd);
        if (rc < 0) {
            close(op->fd);
            op->rc = err_set(&op->err, EIO, "stdin of %s: %s", op->id, uv_strerror(rc));
        }
    }
    if (!op->req) {
        stdin_close_pipe(op);
        stdin_op_free(op);
        return;
    }
    if (op->rc < 0) {
        stdin_reply(op);
        return;
    }
    if (op->eof)
        stdin_finish(op);
    else
        api_req_resume(op->req); /* the body's pieces come now */
}

static void
stdin_write_cb(uv_write_t *w, int status)
{
    struct stdin_op *op = w->data;
    op->writing = false;
    free(op->wbuf);
    op->wbuf = NULL;
    if (status < 0 && op->rc == 0)
        op->rc = err_set(
            &op->err, status == UV_EPIPE ? ERR_CONFLICT : EIO, "stdin of process %s: %s", op->id,
            status == UV_EPIPE ? "the process closed it or exited" : uv_strerror(status));
    if (!op->req) {
        stdin_close_pipe(op);
        stdin_op_free(op);
        return;
    }
    if (op->rc < 0) {
        stdin_finish(op);
        return;
    }
    if (op->eof)
        stdin_finish(op);
    else
        api_req_resume(op->req);
}

static size_t
stdin_data(struct api_req *req, const char *data, size_t len)
{
    struct stdin_op *op = req->ctx;
    if (!op)
        return len;
    if (op->rc < 0 || op->finishing)
        return len; /* answered: read and drop the rest */
    if (len == 0) {
        op->eof = true;
        if (op->opened && !op->writing)
            stdin_finish(op);
        if (!req->response)
            api_req_suspend(req);
        return 0;
    }
    if (!op->opened || op->writing) {
        api_req_suspend(req);
        return 0;
    }
    op->wbuf = malloc(len);
    if (!op->wbuf) {
        op->rc = err_set(&op->err, ENOMEM, "stdin: out of memory");
        stdin_reply(op);
        return len;
    }
    memcpy(op->wbuf, data, len);
    uv_buf_t b = uv_buf_init(op->wbuf, (unsigned)len);
    op->wreq.data = op;
    int rc = uv_write(&op->wreq, (uv_stream_t *)&op->pipe, &b, 1, stdin_write_cb);
    if (rc < 0) {
        free(op->wbuf);
        op->wbuf = NULL;
        op->rc = err_set(&op->err, rc == UV_EPIPE ? ERR_CONFLICT : EIO, "stdin of process %s: %s",
                         op->id, uv_strerror(rc));
        stdin_finish(op);
        return len;
    }
    op->writing = true;
    op->written += len;
    api_req_suspend(req);
    return len;
}

static void
stdin_on_shutdown(struct api_req *req)
{
    struct stdin_op *op = req->ctx;
    if (!op || op->req->response)
        return;
    op->rc = err_set(&op->err, ECANCELED, "the daemon is shutting down");
    if (!op->writing && !op->job_running) {
        stdin_close_pipe(op);
        stdin_reply(op);
    }
}

enum body_mode
processes_stdin_begin(struct api_req *req)
{
    struct container *c = api_container_lookup(req);
    struct ctr_proc *pr = c ? api_proc_lookup(req, c) : NULL;
    if (!pr)
        return BODY_NONE;
    if (!pr->has_stdin || pr->exited) {
        api_reply_error(req, 409, "conflict", "stdin of process %s: %s", pr->id,
                        pr->exited ? "the process exited"
                                   : "the process was started without "
                                     "\"stdin\": true");
        return BODY_NONE;
    }
    const char *cl = api_req_query(req, "close");
    struct stdin_op *op = calloc(1, sizeof(*op));
    if (!op || !(op->dir = strdup(c->dir))) {
        free(op);
        api_reply_error(req, 500, "internal", "out of memory");
        return BODY_NONE;
    }
    op->req = req;
    op->c = c;
    container_ref(c);
    op->drv = c->reg->drv;
    op->drv_ctx = c->reg->drv_ctx;
    op->fd = -1;
    snprintf(op->handle, sizeof(op->handle), "%s", c->p->handle);
    snprintf(op->id, sizeof(op->id), "%s", pr->id);
    op->close_after = !(cl && (strcmp(cl, "0") == 0 || strcmp(cl, "false") == 0));
    req->ctx = op;
    req->ctx_free = stdin_req_free;
    req->on_shutdown = stdin_on_shutdown;
    req->stream_data = stdin_data;
    op->job_running = true;
    int rc = job_submit(api_daemon(req->api)->jobs, "process.stdin.open", stdin_open_work,
                        stdin_open_done, op);
    if (rc < 0) {
        op->job_running = false;
        op->rc = err_set(&op->err, ECANCELED, "cannot start the job: %s", strerror(-rc));
        stdin_reply(op);
    }
    return BODY_STREAM;
}

void
processes_stdin(struct api_req *req)
{
    /* Everything happens in processes_stdin_begin and stdin_data. */
}

/* ---- signal ----------------------------------------------------------------- */

struct signal_job {
    struct api_req *req; /* weak */
    struct container *c; /* a reference */
    const struct rt_driver *drv;
    void *drv_ctx;
    char handle[CTR_HANDLE_MAX + 1];
    char id[CTR_ID_MAX + 1];
    char *dir;
    int sig;
    int rc;
    struct err err;
};

static void
signal_work(void *ctx)
{
    struct signal_job *j = ctx;
    j->rc = j->drv->proc_signal(j->drv_ctx, j->handle, j->dir, j->id, j->sig, &j->err);
}

static void
signal_done(void *ctx, bool cancelled)
{
    struct signal_job *j = ctx;
    if (j->req) {
        j->req->weak_ref = NULL;
        if (cancelled)
            api_reply_error(j->req, 503, "unavailable", "the daemon is shutting down");
        else if (j->rc < 0)
            api_reply_err(j->req, &j->err);
        else {
            json_object *o = json_object_new_object();
            json_object_object_add(o, "id", json_object_new_string(j->id));
            json_object_object_add(o, "signal", json_object_new_int(j->sig));
            api_reply_json(j->req, 200, o);
        }
        api_req_resume(j->req);
    }
    container_unref(j->c);
    free(j->dir);
    free(j);
}

static int
signal_parse(json_object *v)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {{"TERM", SIGTERM}, {"KILL", SIGKILL}, {"INT", SIGINT},    {"HUP", SIGHUP},
                 {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},  {"STOP", SIGSTOP},
                 {"CONT", SIGCONT}, {"ALRM", SIGALRM}, {"WINCH", SIGWINCH}};
    if (json_object_is_type(v, json_type_int)) {
        int64_t n = json_object_get_int64(v);
        return n >= 1 && n <= 64 ? (int)n : -1;
    }
    if (!json_object_is_type(v, json_type_string))
        return -1;
    const char *s = json_object_get_string(v);
    if (strncmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(names[i].name, s) == 0)
            return names[i].sig;
    return -1;
}

void
processes_signal(struct api_req *req)
{
    struct container *c = api_container_lookup(req);
    struct ctr_proc *pr = c ? api_proc_lookup(req, c) : NULL;
    if (!pr)
        return;
    static const char *const fields[] = {"signal", NULL};
    struct err err = {0};
    json_object *body = NULL, *v = NULL;
    if (api_req_body_json(req, false, &body, &err) < 0 ||
        jsonutil_check_fields(body, "", fields, &err) < 0) {
        json_object_put(body);
        api_reply_err(req, &err);
        return;
    }
    int sig = json_object_object_get_ex(body, "signal", &v) ? signal_parse(v) : -1;
    json_object_put(body);
    if (sig < 0) {
        api_reply_error(req, 400, "bad_request",
                        "field \"signal\": expected TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP, "
                        "CONT, ALRM, WINCH or a number 1 to 64");
        return;
    }
    if (pr->exited) {
        api_reply_error(req, 409, "conflict", "process %s: exited", pr->id);
        return;
    }
    struct signal_job *j = calloc(1, sizeof(*j));
    if (!j || !(j->dir = strdup(c->dir))) {
        free(j);
        api_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    j->c = c;
    container_ref(c);
    j->drv = c->reg->drv;
    j->drv_ctx = c->reg->drv_ctx;
    snprintf(j->handle, sizeof(j->handle), "%s", c->p->handle);
    snprintf(j->id, sizeof(j->id), "%s", pr->id);
    j->sig = sig;
    if (api_req_run_job(req, &j->req, "process.signal", signal_work, signal_done, j) < 0) {
        container_unref(c);
        free(j->dir);
        free(j);
    }
}
