/*
 * The Docker API's exec: POST /containers/{id}/exec makes an instance
 * (daemon/svc_exec.h), POST /exec/{id}/start runs it, detached (200) or
 * on the hijacked connection (as attach: output out in frames, stdin in,
 * the client's half-close closing it; daemon/ctr_attach.h), and GET
 * /exec/{id}/json tells whether it runs and its exit code. Parses, calls
 * the services, renders; the hijacked stream is attach.c's. Loop thread.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/docker/docker.h"
#include "api/request.h"
#include "common/strv.h"
#include "daemon/containers.h"
#include "daemon/svc_exec.h"
#include "jsonutil/jsonutil.h"

void
docker_exec_create(struct api_req *req)
{
    struct container *c = docker_ctr_param(req);
    if (!c)
        return;
    json_object *body = NULL;
    struct err err = {0};
    char **argv = NULL, **env = NULL;
    const char *dir = NULL, *user = NULL;
    bool in = false, out = false, errs = false, tty = false, priv = false;
    json_object *v = NULL;
    int ret = api_req_body_json(req, false, &body, &err);
    if (ret == 0 && (!jsonutil_lookup(body, "Cmd", &v) || !json_object_is_type(v, json_type_array)))
        ret = err_set(&err, EINVAL, "No exec command specified");
    if (ret == 0)
        ret = jsonutil_strv(v, "Cmd", 65536, &argv, &err);
    if (ret == 0 && jsonutil_lookup(body, "Env", &v) && !json_object_is_type(v, json_type_null))
        ret = jsonutil_strv(v, "Env", 4096, &env, &err);
    if (ret == 0 && (jsonutil_get_string(body, "", "WorkingDir", false, &dir, &err) < 0 ||
                     jsonutil_get_string(body, "", "User", false, &user, &err) < 0 ||
                     jsonutil_get_bool(body, "", "AttachStdin", false, &in, &err) < 0 ||
                     jsonutil_get_bool(body, "", "AttachStdout", false, &out, &err) < 0 ||
                     jsonutil_get_bool(body, "", "AttachStderr", false, &errs, &err) < 0 ||
                     jsonutil_get_bool(body, "", "Tty", false, &tty, &err) < 0 ||
                     jsonutil_get_bool(body, "", "Privileged", false, &priv, &err) < 0))
        ret = -EINVAL;
    if (ret == 0 && strv_len(argv) == 0)
        ret = err_set(&err, EINVAL, "No exec command specified");
    if (ret == 0 && tty)
        ret = err_set(&err, EINVAL, "Tty: a terminal for an exec is not supported by this host");
    if (ret == 0 && priv)
        ret = err_set(&err, EINVAL, "Privileged: not supported by this host");
    struct ctr_exec_spec s = {.argv = argv,
                              .env = env,
                              .dir = dir && *dir ? dir : NULL,
                              .user = user && *user ? user : NULL,
                              .in = in,
                              .out = out,
                              .err = errs};
    struct ctr_exec *x = NULL;
    if (ret == 0)
        ret = container_exec_create(api_daemon(req->api), c->p->handle, &s, &x, &err);
    strv_free(argv);
    strv_free(env);
    json_object_put(body);
    if (ret < 0) {
        api_reply_err(req, &err);
        return;
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "Id", json_object_new_string(x->id));
    api_reply_json(req, 201, o);
}

/* The {id} instance, or NULL after replying 404 / 400. */
static struct ctr_exec *
exec_param(struct api_req *req)
{
    struct ctr_exec *x = NULL;
    struct err err = {0};
    if (container_exec_find(api_daemon(req->api), api_req_param(req, "id"), &x, &err) < 0) {
        api_reply_err(req, &err);
        return NULL;
    }
    return x;
}

struct exec_start {
    struct api_req *req;
    char id[CTR_EXEC_ID_LEN + 1];
    bool detach;
};

static void
exec_started(void *arg, const struct err *err, struct ctr_proc *pr)
{
    struct exec_start *es = arg;
    struct api_req *req = es->req;
    bool detach = es->detach;
    char id[CTR_EXEC_ID_LEN + 1];
    memcpy(id, es->id, sizeof(id));
    free(es);
    req->ctx = NULL;
    struct ctr_exec *x = NULL;
    struct err e = {0};
    if (err && err->code == ERR_INVALID_CONTENT &&
        container_exec_find(api_daemon(req->api), id, &x, &e) == 0) {
        /* Its program could not start: as the engine, the instance's exit
         * code says so and the message is the stream's only output (the
         * answer, when detached), which the docker CLI prints before it
         * exits with that code. */
        api_req_call_done(req);
        container_exec_start_failed(x, err);
        char why[ERR_MSG_MAX], msg[ERR_MSG_MAX + 128];
        docker_start_failure(err->msg, why, sizeof(why));
        snprintf(msg, sizeof(msg),
                 "OCI runtime exec failed: exec failed: unable to start container process: %s: "
                 "unknown",
                 why);
        if (detach || docker_hijack_message(req, msg, &e) < 0) {
            api_reply_fail(req, EINVAL, "%s", msg);
            api_req_resume(req);
        }
        return;
    }
    if (api_req_call_failed(req, err))
        return;
    if (detach) {
        api_reply_text(req, 200, "text/plain", "", 0);
        api_req_resume(req);
        return;
    }
    if (container_exec_find(api_daemon(req->api), id, &x, &e) < 0 ||
        docker_attach_hijack(req, x->handle, x->proc_id, x->in, x->out, x->err, &e) < 0) {
        api_reply_err(req, &e);
        api_req_resume(req);
    }
}

void
docker_exec_start(struct api_req *req)
{
    struct ctr_exec *x = exec_param(req);
    if (!x)
        return;
    json_object *body = NULL;
    struct err err = {0};
    bool detach = false, tty = false;
    if (api_req_body_json(req, true, &body, &err) < 0 ||
        jsonutil_get_bool(body, "", "Detach", false, &detach, &err) < 0 ||
        jsonutil_get_bool(body, "", "Tty", false, &tty, &err) < 0) {
        json_object_put(body);
        api_reply_err(req, &err);
        return;
    }
    json_object_put(body);
    if (tty) {
        api_reply_fail(req, EINVAL, "Tty: a terminal for an exec is not supported by this host");
        return;
    }
    struct exec_start *es = calloc(1, sizeof(*es));
    if (!es) {
        api_reply_fail(req, ENOMEM, "out of memory");
        return;
    }
    es->req = req;
    es->detach = detach;
    memcpy(es->id, x->id, sizeof(es->id));
    struct svc_call *call = NULL;
    int rc = container_exec_start(api_daemon(req->api), x, exec_started, es, &call, &err);
    if (rc < 0) {
        free(es);
        api_reply_err(req, &err);
        return;
    }
    req->ctx = es;
    req->ctx_free = free;
    api_req_wait_call(req, call);
}

void
docker_exec_inspect(struct api_req *req)
{
    struct ctr_exec *x = exec_param(req);
    if (!x)
        return;
    struct ctr_proc *pr = container_exec_proc(api_daemon(req->api), x);
    bool running = pr && !pr->exited;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "ID", json_object_new_string(x->id));
    json_object_object_add(o, "ContainerID", json_object_new_string(x->handle));
    json_object_object_add(o, "Running", json_object_new_boolean(running));
    json_object_object_add(o, "ExitCode",
                           x->start_failed    ? json_object_new_int(x->start_failed)
                           : pr && pr->exited ? json_object_new_int(pr->exit_code)
                                              : NULL);
    json_object_object_add(o, "Pid", json_object_new_int(pr ? (int)pr->pid : 0));
    json_object_object_add(o, "OpenStdin", json_object_new_boolean(x->in));
    json_object_object_add(o, "OpenStdout", json_object_new_boolean(x->out));
    json_object_object_add(o, "OpenStderr", json_object_new_boolean(x->err));
    json_object_object_add(o, "CanRemove", json_object_new_boolean(false));
    json_object_object_add(o, "DetachKeys", json_object_new_string(""));
    json_object *pc = json_object_new_object();
    json_object_object_add(pc, "tty", json_object_new_boolean(false));
    json_object_object_add(pc, "privileged", json_object_new_boolean(false));
    json_object_object_add(pc, "entrypoint", json_object_new_string(x->argv[0]));
    json_object_object_add(pc, "arguments", docker_strv(x->argv + 1, false));
    json_object_object_add(pc, "user", json_object_new_string(x->user ? x->user : ""));
    json_object_object_add(o, "ProcessConfig", pc);
    api_reply_json(req, 200, o);
}
