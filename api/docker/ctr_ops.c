/*
 * The Docker API's container operations: start, stop, restart, kill and
 * wait (the main-process service, daemon/svc_main.h), delete (the
 * container service; with v=1 its anonymous volumes after it, through the
 * volume service) and stats (the container service's usage). Loop thread.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "api/docker/docker.h"
#include "api/request.h"
#include "api/stream.h"
#include "common/clock.h"
#include "daemon/daemon.h"
#include "daemon/svc_containers.h"
#include "daemon/svc_main.h"
#include "daemon/svc_processes.h"
#include "daemon/svc_volumes.h"

#define ANON_LABEL "com.docker.volume.anonymous"

/* 204, or 304 (no body) when there was nothing to do, or the error. */
static void
done_cb(void *arg, const struct err *err)
{
    struct api_req *req = arg;
    api_req_call_done(req);
    if (err && err->code == EALREADY)
        api_reply_text(req, 304, "text/plain", "", 0);
    else if (err)
        api_reply_err(req, err);
    else
        api_reply_text(req, 204, "text/plain", "", 0);
    api_req_resume(req);
}

static void
wait_or_done(struct api_req *req, int rc, struct svc_call *call, const struct err *err)
{
    if (rc == -EALREADY)
        api_reply_text(req, 304, "text/plain", "", 0);
    else
        api_req_wait_or_fail(req, rc, call, err);
}

/* ?t= (seconds; -1 and absent: the container's own timeout). */
static bool
query_timeout(struct api_req *req, int64_t *t)
{
    struct err err = {0};
    *t = -1;
    if (docker_query_int(req, "t", -1, 3600, t, &err) < 0) {
        api_reply_err(req, &err);
        return false;
    }
    return true;
}

/* ?signal= by name or number; 0 when absent. */
static bool
query_signal(struct api_req *req, int *sig)
{
    const char *s = api_req_query(req, "signal");
    *sig = 0;
    if (!s || !*s)
        return true;
    char *end = NULL;
    long n = strtol(s, &end, 10);
    *sig = end != s && !*end ? (int)n : process_signal_number(s);
    if (*sig < 1 || *sig > 64) {
        api_reply_fail(req, EINVAL, "Invalid signal: %.40s", s);
        return false;
    }
    return true;
}

/*
 * A program that cannot start, in the engine's words (docker_start_failure):
 * the docker CLI prints it and exits 127 on "executable file not found" or
 * "no such file or directory", 126 on "permission denied".
 */
static void
start_done_cb(void *arg, const struct err *err)
{
    struct api_req *req = arg;
    if (err && err->code == ERR_INVALID_CONTENT) {
        char msg[ERR_MSG_MAX + 128];
        docker_start_message(err->msg, msg, sizeof(msg));
        api_req_call_done(req);
        api_reply_fail(req, EINVAL, "%s", msg);
        api_req_resume(req);
        return;
    }
    done_cb(arg, err);
}

void
docker_container_start(struct api_req *req)
{
    struct container *c = docker_ctr_param(req);
    if (!c)
        return;
    struct err err = {0};
    struct svc_call *call = NULL;
    int rc = container_start(api_daemon(req->api), c->p->handle, start_done_cb, req, &call, &err);
    wait_or_done(req, rc, call, &err);
}

void
docker_container_stop(struct api_req *req)
{
    int64_t t;
    int sig;
    struct container *c = docker_ctr_param(req);
    if (!c || !query_timeout(req, &t) || !query_signal(req, &sig))
        return;
    struct err err = {0};
    struct svc_call *call = NULL;
    int rc = container_stop(api_daemon(req->api), c->p->handle, sig, t, done_cb, req, &call, &err);
    wait_or_done(req, rc, call, &err);
}

void
docker_container_restart(struct api_req *req)
{
    int64_t t;
    struct container *c = docker_ctr_param(req);
    if (!c || !query_timeout(req, &t))
        return;
    struct err err = {0};
    struct svc_call *call = NULL;
    int rc = container_restart(api_daemon(req->api), c->p->handle, t, done_cb, req, &call, &err);
    api_req_wait_or_fail(req, rc, call, &err);
}

void
docker_container_kill(struct api_req *req)
{
    int sig;
    struct container *c = docker_ctr_param(req);
    if (!c || !query_signal(req, &sig))
        return;
    struct err err = {0};
    struct svc_call *call = NULL;
    int rc = container_kill(api_daemon(req->api), c->p->handle, sig ? sig : SIGKILL, done_cb, req,
                            &call, &err);
    if (rc == -ERR_CONFLICT) {
        api_reply_fail(req, ERR_CONFLICT, "Cannot kill container: %s: container %s is not running",
                       api_req_param(req, "id"), c->p->handle);
        return;
    }
    api_req_wait_or_fail(req, rc, call, &err);
}

/* ---- wait ---------------------------------------------------------------------- */

struct wait_ctx {
    struct api_req *req;
    struct container_waiter *w;
    struct api_stream *stream;
};

static void
wait_free(void *ctx)
{
    struct wait_ctx *wc = ctx;
    container_wait_cancel(wc->w);
    api_stream_release(wc->stream);
    free(wc);
}

static void
waited_cb(void *arg, const struct err *err, int exit_code)
{
    struct wait_ctx *wc = arg;
    wc->w = NULL;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "StatusCode", json_object_new_int(exit_code));
    json_object *e = NULL;
    if (err) {
        e = json_object_new_object();
        json_object_object_add(e, "Message", json_object_new_string(err->msg));
    }
    json_object_object_add(o, "Error", e);
    size_t len = 0;
    const char *text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
    api_stream_write(wc->stream, text, len);
    api_stream_write(wc->stream, "\n", 1);
    json_object_put(o);
    api_stream_end(wc->stream);
}

void
docker_container_wait(struct api_req *req)
{
    struct container *c = docker_ctr_param(req);
    if (!c)
        return;
    const char *cond = api_req_query(req, "condition");
    enum container_wait_cond wcond = CTR_WAIT_NOT_RUNNING;
    if (cond && *cond && strcmp(cond, "not-running") != 0) {
        if (strcmp(cond, "next-exit") == 0) {
            wcond = CTR_WAIT_NEXT_EXIT;
        } else if (strcmp(cond, "removed") == 0) {
            wcond = CTR_WAIT_REMOVED;
        } else {
            api_reply_fail(req, EINVAL, "invalid condition: \"%.40s\"", cond);
            return;
        }
    }
    struct wait_ctx *wc = calloc(1, sizeof(*wc));
    if (!wc) {
        api_reply_fail(req, ENOMEM, "out of memory");
        return;
    }
    wc->req = req;
    struct err err = {0};
    if (container_wait(api_daemon(req->api), c->p->handle, wcond, waited_cb, wc, &wc->w, &err) <
        0) {
        free(wc);
        api_reply_err(req, &err);
        return;
    }
    req->ctx = wc;
    req->ctx_free = wait_free;
    /* The status line and headers now, the body when the condition is met:
     * clients wait for the headers to know the wait is in place. */
    wc->stream = api_stream_start(req, 200, "application/json");
}

/* ---- delete ------------------------------------------------------------------------- */

struct delete_ctx {
    struct api_req *req;
    char **volumes; /* mounted volumes, to remove after it when anonymous (v=1) */
    size_t n, next;
};

static void
delete_ctx_free(void *ctx)
{
    struct delete_ctx *dc = ctx;
    for (size_t i = 0; i < dc->n; i++)
        free(dc->volumes[i]);
    free(dc->volumes);
    free(dc);
}

static void next_volume(struct delete_ctx *dc);

static void
volume_deleted_cb(void *arg, const struct err *err, char *const *deleted, size_t n)
{
    struct delete_ctx *dc = arg;
    api_req_call_done(dc->req);
    dc->next++;
    next_volume(dc);
}

static void
volume_got_cb(void *arg, const struct err *err, const struct vol_info *v)
{
    struct delete_ctx *dc = arg;
    struct api_req *req = dc->req;
    api_req_call_done(req);
    bool anon = false;
    for (size_t i = 0; !err && i < v->rec->n_props; i++)
        anon |= strcmp(v->rec->props[i].key, ANON_LABEL) == 0;
    struct err e = {0};
    struct svc_call *call = NULL;
    if (anon && vol_delete(api_daemon(req->api), dc->volumes[dc->next], false, volume_deleted_cb,
                           dc, &call, &e) == 0) {
        api_req_wait_call(req, call);
        return;
    }
    dc->next++;
    next_volume(dc);
}

/* The container is gone; its anonymous volumes go after it, one by one. */
static void
next_volume(struct delete_ctx *dc)
{
    struct api_req *req = dc->req;
    while (dc->next < dc->n) {
        struct err err = {0};
        struct svc_call *call = NULL;
        if (vol_get(api_daemon(req->api), dc->volumes[dc->next], volume_got_cb, dc, &call, &err) ==
            0) {
            api_req_wait_call(req, call);
            return;
        }
        dc->next++;
    }
    api_reply_text(req, 204, "text/plain", "", 0);
    api_req_resume(req);
}

static void
ctr_deleted_cb(void *arg, const struct err *err)
{
    struct delete_ctx *dc = arg;
    if (api_req_call_failed(dc->req, err))
        return;
    next_volume(dc);
}

void
docker_container_delete(struct api_req *req)
{
    struct container *c = docker_ctr_param(req);
    if (!c)
        return;
    bool force = docker_query_bool(req, "force", false);
    if (container_main_running(c) && !force) {
        api_reply_fail(req, ERR_CONFLICT,
                       "You cannot remove a running container %s. Stop the container before "
                       "attempting removal or force remove",
                       c->p->handle);
        return;
    }
    if (c->state == CTR_DELETING) {
        api_reply_fail(req, ERR_CONFLICT, "removal of container %s is already in progress",
                       c->p->handle);
        return;
    }
    struct delete_ctx *dc = calloc(1, sizeof(*dc));
    if (!dc) {
        api_reply_fail(req, ENOMEM, "out of memory");
        return;
    }
    dc->req = req;
    req->ctx = dc;
    req->ctx_free = delete_ctx_free;
    const struct ctr_params *p = c->p;
    if (docker_query_bool(req, "v", false) && p->nmounts) {
        dc->volumes = calloc(p->nmounts, sizeof(char *));
        for (size_t i = 0; dc->volumes && i < p->nmounts; i++)
            if (p->mount_volumes && p->mount_volumes[i] &&
                (dc->volumes[dc->n] = strdup(p->mount_volumes[i])))
                dc->n++;
    }
    struct err err = {0};
    struct svc_call *call = NULL;
    /* The engine kills at once: SIGKILL, no grace. */
    int rc =
        container_delete_grace(api_daemon(req->api), p->handle, 0, ctr_deleted_cb, dc, &call, &err);
    api_req_wait_or_fail(req, rc, call, &err);
}

/* ---- stats ------------------------------------------------------------------------- */

/* The host's CPU time so far, in ns (the engine's system_cpu_usage), from /proc/stat. */
static uint64_t
system_cpu_ns(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                       &v[4], &v[5], &v[6], &v[7])
              : 0;
    if (f)
        fclose(f);
    uint64_t ticks = 0;
    for (int i = 0; i < n && i < 8; i++)
        ticks += v[i];
    long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? ticks * (1000000000ULL / (uint64_t)hz) : 0;
}

static json_object *
cpu_json(uint64_t total_ns, uint64_t system_ns)
{
    json_object *cpu = json_object_new_object();
    json_object *use = json_object_new_object();
    json_object_object_add(use, "total_usage", json_object_new_int64((int64_t)total_ns));
    json_object_object_add(use, "usage_in_kernelmode", json_object_new_int64(0));
    json_object_object_add(use, "usage_in_usermode", json_object_new_int64(0));
    json_object_object_add(cpu, "cpu_usage", use);
    json_object_object_add(cpu, "system_cpu_usage", json_object_new_int64((int64_t)system_ns));
    json_object_object_add(cpu, "online_cpus",
                           json_object_new_int64(sysconf(_SC_NPROCESSORS_ONLN)));
    json_object *thr = json_object_new_object();
    json_object_object_add(thr, "periods", json_object_new_int(0));
    json_object_object_add(thr, "throttled_periods", json_object_new_int(0));
    json_object_object_add(thr, "throttled_time", json_object_new_int(0));
    json_object_object_add(cpu, "throttling_data", thr);
    return cpu;
}

static json_object *
stats_json(const struct container *c, const struct ctr_usage *u)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "read", docker_time_ms(clock_unix_ms()));
    json_object_object_add(o, "preread", docker_time_ms(0));
    json_object *pids = json_object_new_object();
    json_object_object_add(
        pids, "current",
        json_object_new_int(container_main_running(c) ? (int)container_procs_running(c) : 0));
    if (c->p->limits.pids)
        json_object_object_add(pids, "limit", json_object_new_int64(c->p->limits.pids));
    json_object_object_add(o, "pids_stats", pids);
    json_object *blkio = json_object_new_object();
    static const char *const bl[] = {
        "io_service_bytes_recursive", "io_serviced_recursive",  "io_queue_recursive",
        "io_service_time_recursive",  "io_wait_time_recursive", "io_merged_recursive",
        "io_time_recursive",          "sectors_recursive",      NULL};
    for (size_t i = 0; bl[i]; i++)
        json_object_object_add(blkio, bl[i], NULL);
    json_object_object_add(o, "blkio_stats", blkio);
    json_object_object_add(o, "num_procs", json_object_new_int(0));
    json_object_object_add(o, "storage_stats", json_object_new_object());
    json_object_object_add(o, "cpu_stats", cpu_json(u ? u->cpu_ns : 0, system_cpu_ns()));
    json_object_object_add(o, "precpu_stats", cpu_json(0, 0));
    json_object *mem = json_object_new_object();
    json_object_object_add(mem, "usage", json_object_new_int64(u ? (int64_t)u->memory_bytes : 0));
    json_object_object_add(mem, "stats", json_object_new_object());
    uint64_t limit = c->p->limits.memory_bytes;
    if (!limit) {
        long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
        limit = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;
    }
    json_object_object_add(mem, "limit", json_object_new_int64((int64_t)limit));
    json_object_object_add(o, "memory_stats", mem);
    char name[CTR_HANDLE_MAX + 2];
    snprintf(name, sizeof(name), "/%s", c->p->name ? c->p->name : c->p->handle);
    json_object_object_add(o, "name", json_object_new_string(name));
    json_object_object_add(o, "id", json_object_new_string(c->p->handle));
    json_object_object_add(o, "networks", json_object_new_object());
    return o;
}

static void
stats_cb(void *arg, const struct err *err, struct container *c, const struct ctr_usage *usage)
{
    struct api_req *req = arg;
    if (api_req_call_failed(req, err))
        return;
    api_reply_json_resume(req, 200, stats_json(c, usage));
}

void
docker_container_stats(struct api_req *req)
{
    struct container *c = docker_ctr_param(req);
    if (!c)
        return;
    if (docker_query_bool(req, "stream", true)) {
        api_reply_fail(req, EINVAL,
                       "streamed stats are not supported by this host: ask with "
                       "stream=0 (docker stats --no-stream)");
        return;
    }
    /* A container whose main process does not run uses nothing, as the engine says. */
    if (!container_main_running(c)) {
        api_reply_json(req, 200, stats_json(c, NULL));
        return;
    }
    struct err err = {0};
    struct svc_call *call = NULL;
    int rc = container_stats(api_daemon(req->api), c->p->handle, stats_cb, req, &call, &err);
    api_req_wait_or_fail(req, rc, call, &err);
}
