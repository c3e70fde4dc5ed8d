/*
 * /v1/containers/{handle}/processes: start, list, get, wait, stdout and
 * stderr (replay, ?follow=1), stdin (the streamed body, one piece in
 * flight), signal and delete. Each handler parses the request, calls one
 * process service (daemon/svc_processes.h, proc_output.h, proc_stdin.h)
 * and renders what it reports; a request that goes away detaches or
 * releases what it holds, and the work of others goes on. Loop thread.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/bodies.h"
#include "api/containers.h"
#include "api/handlers.h"
#include "api/request.h"
#include "api/stream.h"
#include "common/strv.h"
#include "daemon/daemon.h"
#include "daemon/proc_output.h"
#include "daemon/proc_stdin.h"
#include "daemon/svc_containers.h"
#include "daemon/svc_processes.h"
#include "jsonutil/jsonutil.h"

/* A wait answers within a week at most. */
#define WAIT_MAX_S (86400.0 * 7)

static struct daemon *
daemon_of(struct api_req *req)
{
    return api_daemon(req->api);
}

static void
reply_shutdown(struct api_req *req)
{
    api_reply_fail(req, ECANCELED, "the daemon is shutting down");
}

/* ---- start, list, get, delete ----------------------------------------------- */

static void
started_cb(void *arg, const struct err *err, struct ctr_proc *pr)
{
    struct api_req *req = arg;
    if (api_req_call_failed(req, err))
        return;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_string(pr->id));
    json_object_object_add(o, "state", json_object_new_string("running"));
    json_object_object_add(o, "pid", json_object_new_int(pr->pid));
    api_reply_json_resume(req, 201, o);
}

void
api_body_process_clear(struct api_body_process *b)
{
    json_object_put(b->json);
    strv_free(b->argv);
    strv_free(b->env);
    memset(b, 0, sizeof(*b));
}

int
api_body_process(const char *text, size_t len, struct api_body_process *out, struct err *err)
{
    static const char *const fields[] = {"id", "path", "args", "env", "dir", "user", "stdin", NULL};
    json_object *args = NULL, *env = NULL;
    struct process_spec *o = &out->spec;
    int has_args = 0;
    memset(out, 0, sizeof(*out));
    if (api_body_json(text, len, false, &out->json, err) < 0 ||
        jsonutil_check_fields(out->json, "", fields, err) < 0 ||
        jsonutil_get_string(out->json, "", "id", false, &o->id, err) < 0 ||
        jsonutil_get_string(out->json, "", "path", false, &o->path, err) < 0 ||
        (has_args = jsonutil_get_array(out->json, "", "args", false, &args, err)) < 0 ||
        jsonutil_get_array(out->json, "", "env", false, &env, err) < 0 ||
        jsonutil_get_string(out->json, "", "dir", false, &o->dir, err) < 0 ||
        jsonutil_get_string(out->json, "", "user", false, &o->user, err) < 0 ||
        jsonutil_get_bool(out->json, "", "stdin", false, &o->has_stdin, err) < 0 ||
        (args && api_parse_strv(args, "args", &out->argv, err) < 0) ||
        (env && api_parse_strv(env, "env", &out->env, err) < 0)) {
        api_body_process_clear(out);
        return -EINVAL;
    }
    o->args = out->argv;
    o->has_args = has_args == 1;
    o->env = out->env;
    return 0;
}

void
processes_post(struct api_req *req)
{
    struct err err = {0};
    struct api_body_process b;
    struct svc_call *call = NULL;
    if (api_body_process(req->body, req->body_len, &b, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    int rc = process_start(daemon_of(req), api_req_param(req, "handle"), &b.spec, started_cb, req,
                           &call, &err);
    api_body_process_clear(&b);
    if (rc < 0) {
        api_reply_err(req, &err);
        return;
    }
    api_req_wait_call(req, call);
}

void
processes_list(struct api_req *req)
{
    struct container *c = NULL;
    struct err err = {0};
    if (container_lookup(daemon_of(req), api_req_param(req, "handle"), &c, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
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
    struct container *c = NULL;
    struct ctr_proc *pr = NULL;
    struct err err = {0};
    if (process_lookup(daemon_of(req), api_req_param(req, "handle"), api_req_param(req, "id"), &c,
                       &pr, &err) < 0)
        api_reply_err(req, &err);
    else
        api_reply_json(req, 200, api_proc_to_json(pr));
}

void
processes_delete(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    if (process_delete(daemon_of(req), api_req_param(req, "handle"), api_req_param(req, "id"),
                       api_reply_204_cb, req, &call, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    api_req_wait_call(req, call);
}

/* ---- wait ------------------------------------------------------------------- */

static void
waited_cb(void *arg, const struct err *err, const struct ctr_proc *pr)
{
    struct api_req *req = arg;
    req->ctx = NULL;
    req->ctx_free = NULL;
    req->on_shutdown = NULL;
    if (err) {
        api_reply_err(req, err);
    } else {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "exit_code", json_object_new_int(pr->exit_code));
        api_reply_json(req, 200, o);
    }
    api_req_resume(req);
}

static void
wait_req_free(void *ctx)
{
    process_wait_cancel(ctx);
}

static void
wait_on_shutdown(struct api_req *req)
{
    struct process_waiter *w = req->ctx;
    req->ctx = NULL;
    req->ctx_free = NULL;
    process_wait_cancel(w);
    reply_shutdown(req);
    api_req_resume(req);
}

void
processes_wait(struct api_req *req)
{
    struct err err = {0};
    int64_t timeout_ms = -1;
    struct process_waiter *w = NULL;
    if (api_req_query_seconds(req, "timeout", WAIT_MAX_S, &timeout_ms, &err) < 0 ||
        process_wait(daemon_of(req), api_req_param(req, "handle"), api_req_param(req, "id"),
                     timeout_ms, waited_cb, req, &w, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    req->ctx = w;
    req->ctx_free = wait_req_free;
    req->on_shutdown = wait_on_shutdown;
    api_req_suspend(req);
}

/* ---- stdout and stderr ------------------------------------------------------ */

/* A reply streaming a process's output: the reader gives a chunk, the
 * stream sends it, and only once the client took it the next is asked. */
struct out_reply {
    struct api_req *req;
    struct api_stream *stream;
    struct proc_output *o;
};

static void
out_reply_free(void *ctx)
{
    struct out_reply *r = ctx;
    process_output_close(r->o);
    api_stream_release(r->stream);
    free(r);
}

static void
out_drained(void *ctx)
{
    struct out_reply *r = ctx;
    if (r->o)
        process_output_next(r->o);
}

static void
out_data(void *arg, const char *data, size_t len)
{
    struct out_reply *r = arg;
    if (len == 0) {
        api_stream_end(r->stream);
        process_output_close(r->o);
        r->o = NULL;
        return;
    }
    api_stream_write(r->stream, data, len); /* the next chunk when drained */
}

static void
out_opened(void *arg, const struct err *err, struct proc_output *o)
{
    struct out_reply *r = arg;
    struct api_req *req = r->req;
    if (api_req_call_failed(req, err))
        return;
    r->o = o;
    r->stream = api_stream_start(req, 200, "application/octet-stream");
    if (!r->stream) {
        api_req_resume(req);
        return; /* freed with the request */
    }
    api_stream_on_drained(r->stream, out_drained, r);
    process_output_next(o);
}

static void
output_get(struct api_req *req, enum proc_stream which)
{
    struct err err = {0};
    int64_t offset = 0;
    struct svc_call *call = NULL;
    struct out_reply *r = calloc(1, sizeof(*r));
    if (!r) {
        api_reply_fail(req, ENOMEM, "out of memory");
        return;
    }
    r->req = req;
    if (api_req_query_offset(req, "offset", &offset, &err) < 0 ||
        process_output_open(daemon_of(req), api_req_param(req, "handle"), api_req_param(req, "id"),
                            which, offset, api_req_query_flag(req, "follow", false), out_opened,
                            out_data, r, &call, &err) < 0) {
        free(r);
        api_reply_err(req, &err);
        return;
    }
    req->ctx = r;
    req->ctx_free = out_reply_free;
    api_req_wait_call(req, call);
}

void
processes_stdout(struct api_req *req)
{
    output_get(req, PROC_STDOUT);
}

void
processes_stderr(struct api_req *req)
{
    output_get(req, PROC_STDERR);
}

/* ---- stdin ------------------------------------------------------------------ */

/*
 * A stdin upload: each piece of the body is written to the process's
 * stdin, one write in flight with the connection suspended meanwhile; the
 * end of the body closes it (and, unless ?close=0, the process's end, so
 * it reads EOF), then the reply goes.
 */
struct stdin_up {
    struct api_req *req;
    struct proc_stdin *s;
    bool close_after;
    bool opened, writing, eof, finishing, answered;
    struct err err;
    bool failed;
};

static void
stdin_answer(struct stdin_up *u)
{
    if (u->answered)
        return;
    u->answered = true;
    struct api_req *req = u->req;
    if (u->failed) {
        api_reply_err(req, &u->err);
    } else {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "bytes_written",
                               json_object_new_int64((int64_t)process_stdin_written(u->s)));
        json_object_object_add(o, "closed", json_object_new_boolean(u->close_after));
        api_reply_json(req, 200, o);
    }
    api_req_resume(req);
}

static void
stdin_fail(struct stdin_up *u, const struct err *err)
{
    if (!u->failed)
        err_copy(&u->err, err);
    u->failed = true;
}

static void
stdin_closed_cb(void *arg, const struct err *err)
{
    stdin_answer(arg);
}

/* The body ended (or a write failed): close, then answer. */
static void
stdin_finish(struct stdin_up *u)
{
    if (u->finishing || u->writing)
        return;
    u->finishing = true;
    struct err err = {0};
    if (!u->opened ||
        process_stdin_close(u->s, u->close_after && !u->failed, stdin_closed_cb, &err) < 0) {
        if (u->opened)
            stdin_fail(u, &err);
        stdin_answer(u);
    }
}

static void
stdin_written_cb(void *arg, const struct err *err)
{
    struct stdin_up *u = arg;
    u->writing = false;
    if (err)
        stdin_fail(u, err);
    if (u->failed || u->eof)
        stdin_finish(u);
    else
        api_req_resume(u->req); /* the next piece */
}

static void
stdin_opened_cb(void *arg, const struct err *err)
{
    struct stdin_up *u = arg;
    if (err) {
        stdin_fail(u, err);
        stdin_answer(u);
        return;
    }
    u->opened = true;
    if (u->eof)
        stdin_finish(u);
    else
        api_req_resume(u->req); /* the body's pieces come now */
}

static size_t
stdin_data(struct api_req *req, const char *data, size_t len)
{
    struct stdin_up *u = req->ctx;
    if (!u || u->failed || u->finishing)
        return len; /* answered: read and drop the rest */
    if (len == 0) {
        u->eof = true;
        if (u->opened && !u->writing)
            stdin_finish(u);
        if (!req->response)
            api_req_suspend(req);
        return 0;
    }
    if (!u->opened || u->writing) {
        api_req_suspend(req);
        return 0;
    }
    struct err err = {0};
    if (process_stdin_write(u->s, data, len, stdin_written_cb, &err) < 0) {
        stdin_fail(u, &err);
        stdin_finish(u);
        return len;
    }
    u->writing = true;
    api_req_suspend(req);
    return len;
}

static void
stdin_up_free(void *ctx)
{
    struct stdin_up *u = ctx;
    process_stdin_release(u->s);
    free(u);
}

static void
stdin_on_shutdown(struct api_req *req)
{
    struct stdin_up *u = req->ctx;
    if (!u || u->answered)
        return;
    struct err err;
    err_set(&err, ECANCELED, "the daemon is shutting down");
    stdin_fail(u, &err);
    if (!u->writing)
        stdin_answer(u);
}

enum body_mode
processes_stdin_begin(struct api_req *req)
{
    struct stdin_up *u = calloc(1, sizeof(*u));
    if (!u) {
        api_reply_fail(req, ENOMEM, "out of memory");
        return BODY_NONE;
    }
    struct err err = {0};
    u->req = req;
    u->close_after = api_req_query_flag(req, "close", true);
    if (process_stdin_open(daemon_of(req), api_req_param(req, "handle"), api_req_param(req, "id"),
                           stdin_opened_cb, u, &u->s, &err) < 0) {
        free(u);
        api_reply_err(req, &err);
        return BODY_NONE;
    }
    req->ctx = u;
    req->ctx_free = stdin_up_free;
    req->on_shutdown = stdin_on_shutdown;
    req->stream_data = stdin_data;
    return BODY_STREAM;
}

void
processes_stdin(struct api_req *req)
{
    /* Everything happens in processes_stdin_begin and stdin_data. */
}

/* ---- signal ----------------------------------------------------------------- */

static void
signalled_cb(void *arg, const struct err *err)
{
    struct api_req *req = arg;
    if (api_req_call_failed(req, err))
        return;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_string(api_req_param(req, "id")));
    json_object_object_add(o, "signal", json_object_new_int((int)(intptr_t)req->ctx));
    api_reply_json_resume(req, 200, o);
}

static int
signal_of(json_object *v)
{
    int64_t n = 0;
    if (jsonutil_int64_of(v, &n))
        return n >= 1 && n <= 64 ? (int)n : -1;
    if (!json_object_is_type(v, json_type_string))
        return -1;
    return process_signal_number(json_object_get_string(v));
}

int
api_body_signal(const char *text, size_t len, int *sig, struct err *err)
{
    static const char *const fields[] = {"signal", NULL};
    json_object *body = NULL, *v = NULL;
    if (api_body_json(text, len, false, &body, err) < 0 ||
        jsonutil_check_fields(body, "", fields, err) < 0) {
        json_object_put(body);
        return -EINVAL;
    }
    *sig = json_object_object_get_ex(body, "signal", &v) ? signal_of(v) : -1;
    json_object_put(body);
    if (*sig < 0)
        return err_set(err, EINVAL,
                       "field \"signal\": expected TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP, "
                       "CONT, ALRM, WINCH or a number 1 to 64");
    return 0;
}

void
processes_signal(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    int sig = -1;
    if (api_body_signal(req->body, req->body_len, &sig, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    if (process_signal(daemon_of(req), api_req_param(req, "handle"), api_req_param(req, "id"), sig,
                       signalled_cb, req, &call, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    req->ctx = (void *)(intptr_t)sig; /* for the reply */
    api_req_wait_call(req, call);
}
