/*
 * GET /v1/health and GET /v1/metrics. Both answer from state the loop
 * already has (the monitor thread's latest probe results, the lag
 * monitor, the job counters), so they never wait on the pool or the disk.
 * Loop thread.
 */
#include "api/handlers.h"

#include <stdlib.h>

#include "api/api.h"
#include "jsonutil/jsonutil.h"
#include "api/metrics.h"
#include "api/request.h"
#include "daemon/daemon.h"

void
health_get(struct api_req *req)
{
    struct daemon *d = api_daemon(req->api);
    struct monitor_snapshot snap;
    monitor_read(d->monitor, &snap);

    json_object *reasons = json_object_new_array();
    if (!snap.store_writable)
        json_object_array_add(reasons, json_object_new_string(snap.store_error));
    else if (!d->store)
        json_object_array_add(reasons, json_object_new_string(d->store_error));
    if (!snap.runtime_usable)
        json_object_array_add(reasons, json_object_new_string(snap.runtime_error));
    if (d->shutting_down)
        json_object_array_add(reasons, json_object_new_string("the daemon is shutting down"));
    bool ok = json_object_array_length(reasons) == 0;

    json_object *body = json_object_new_object();
    json_object_object_add(body, "status", json_object_new_string(ok ? "ok" : "degraded"));
    if (!ok) {
        json_object_object_add(
            body, "reason",
            json_object_new_string(json_object_get_string(json_object_array_get_idx(reasons, 0))));
        json_object_object_add(body, "reasons", reasons);
    } else {
        json_object_put(reasons);
    }
    json_object_object_add(body, "version", json_object_new_string(BERTH_VERSION));
    json_object_object_add(body, "uptime_s", jsonutil_new_double3(daemon_uptime_s(d)));

    json_object *rt = json_object_new_object();
    json_object_object_add(rt, "name", json_object_new_string(d->cfg->runtime));
    json_object_object_add(rt, "usable", json_object_new_boolean(snap.runtime_usable));
    if (!snap.runtime_usable)
        json_object_object_add(rt, "error", json_object_new_string(snap.runtime_error));
    json_object_object_add(body, "runtime", rt);

    json_object *store = json_object_new_object();
    json_object_object_add(store, "root", json_object_new_string(d->cfg->root));
    json_object_object_add(store, "writable", json_object_new_boolean(snap.store_writable));
    json_object_object_add(store, "free_bytes",
                           json_object_new_int64((int64_t)snap.store_free_bytes));
    json_object_object_add(body, "store", store);

    json_object *loop = json_object_new_object();
    json_object_object_add(loop, "lag_ms", jsonutil_new_double3(lag_monitor_ms(&d->lag)));
    json_object_object_add(body, "loop", loop);

    json_object *jobs = json_object_new_object();
    json_object_object_add(jobs, "queued", json_object_new_int64(job_queue_queued(d->jobs)));
    json_object_object_add(jobs, "running", json_object_new_int64(job_queue_running(d->jobs)));
    json_object_object_add(body, "jobs", jobs);

    json_object *http = json_object_new_object();
    json_object_object_add(http, "connections", json_object_new_int64(api_connections(req->api)));
    json_object_object_add(body, "http", http);

    api_reply_json(req, ok ? 200 : 503, body);
}

void
metrics_get(struct api_req *req)
{
    struct daemon *d = api_daemon(req->api);
    struct monitor_snapshot snap;
    monitor_read(d->monitor, &snap);
    struct metrics_extra extra[] = {
        {"berth_uptime_seconds", "gauge", "Seconds since berthd started.", daemon_uptime_s(d)},
        {"berth_jobs_queued", "gauge", "Jobs waiting for a pool thread.",
         (double)job_queue_queued(d->jobs)},
        {"berth_jobs_running", "gauge", "Jobs running on pool threads.",
         (double)job_queue_running(d->jobs)},
        {"berth_jobs_completed_total", "counter", "Jobs finished since start.",
         (double)job_queue_completed(d->jobs)},
        {"berth_http_connections", "gauge", "Open HTTP connections.",
         (double)api_connections(req->api)},
        {"berth_loop_lag_ms", "gauge", "Worst loop lag over the last second, in milliseconds.",
         lag_monitor_ms(&d->lag)},
        {"berth_store_free_bytes", "gauge", "Free bytes on the store's filesystem.",
         (double)snap.store_free_bytes},
        {"berth_store_writable", "gauge", "1 when the store root is writable.",
         snap.store_writable ? 1.0 : 0.0},
        {"berth_runtime_usable", "gauge", "1 when the runtime driver is usable.",
         snap.runtime_usable ? 1.0 : 0.0},
    };
    size_t len = 0;
    char *text =
        metrics_render(api_metrics(req->api), extra, sizeof(extra) / sizeof(extra[0]), &len);
    if (!text) {
        api_reply_error(req, 500, "internal", "render metrics: out of memory");
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8");
    api_reply_response(req, 200, resp);
}
