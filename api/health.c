/*
 * GET /v1/health and GET /v1/metrics. Health answers from state the loop
 * already has (the monitor thread's latest probe results, the lag
 * monitor, the job counters), so it never waits on the pool or the disk;
 * metrics asks the daemon for its gauges (daemon/status.h), whose store
 * counts take one short job. Loop thread.
 */
#include "api/handlers.h"

#include <stdio.h>
#include <stdlib.h>

#include "api/api.h"
#include "jsonutil/jsonutil.h"
#include "api/metrics.h"
#include "api/request.h"
#include "daemon/daemon.h"
#include "daemon/status.h"
#include "daemon/svc_containers.h"

void
health_get(struct api_req *req)
{
    struct daemon *d = api_daemon(req->api);
    struct monitor_snapshot snap;
    monitor_read(d->monitor, &snap);

    json_object *reasons = json_object_new_array();
    if (!snap.root_writable)
        json_object_array_add(reasons, json_object_new_string(snap.root_error));
    else if (daemon_storage_problem(d))
        json_object_array_add(reasons, json_object_new_string(daemon_storage_problem(d)));
    if (!snap.runtime_usable)
        json_object_array_add(reasons, json_object_new_string(snap.runtime_error));
    /* The network: off (--network none) is no fault; until the start-up
     * reconciliation has set it up and the probe has run, it is not usable
     * yet but not broken either (creates wait for the setup). */
    bool net_off = d->cfg->network_disabled;
    bool net_probed = d->net_reconciled && snap.network_probed;
    bool net_usable = net_off || (net_probed && snap.network_usable);
    if (!net_off && net_probed && !snap.network_usable) {
        char why[ERR_MSG_MAX + 16];
        snprintf(why, sizeof(why), "network: %s", snap.network_error);
        json_object_array_add(reasons, json_object_new_string(why));
    }
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
    if (!snap.runtime_usable) {
        json_object_object_add(rt, "error", json_object_new_string(snap.runtime_error));
        json_object_object_add(rt, "reason", json_object_new_string(snap.runtime_error));
    }
    struct ctr_isolation iso[4];
    size_t niso = containers_isolations(d, iso, 4);
    if (niso) {
        json_object *isos = json_object_new_object();
        for (size_t i = 0; i < niso; i++) {
            json_object *m = json_object_new_object();
            json_object_object_add(m, "usable", json_object_new_boolean(iso[i].usable));
            if (!iso[i].usable)
                json_object_object_add(m, "reason", json_object_new_string(iso[i].reason));
            json_object_object_add(isos, iso[i].mode, m);
        }
        json_object_object_add(rt, "isolations", isos);
    }
    json_object_object_add(body, "runtime", rt);

    json_object *net = json_object_new_object();
    json_object_object_add(net, "usable", json_object_new_boolean(net_usable));
    if (net_off)
        json_object_object_add(net, "disabled", json_object_new_boolean(true));
    else if (!net_probed)
        json_object_object_add(net, "reason",
                               json_object_new_string("the network is being set up (start-up)"));
    else if (!net_usable)
        json_object_object_add(net, "reason", json_object_new_string(snap.network_error));
    json_object_object_add(body, "network", net);

    json_object *store = json_object_new_object();
    json_object_object_add(store, "root", json_object_new_string(d->cfg->root));
    json_object_object_add(store, "writable", json_object_new_boolean(snap.root_writable));
    json_object_object_add(store, "free_bytes",
                           json_object_new_int64((int64_t)snap.root_free_bytes));
    if (d->cfg->layer_format_used)
        json_object_object_add(store, "layer_format",
                               json_object_new_string(d->cfg->layer_format_used));
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

static void
stats_cb(void *arg, const struct err *err, const struct daemon_gauge *g, size_t n)
{
    struct api_req *req = arg;
    if (api_req_call_failed(req, err))
        return;
    size_t len = 0;
    char *text = metrics_render(api_metrics(req->api), g, n, &len);
    struct MHD_Response *resp =
        text ? MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!resp) {
        free(text);
        api_reply_fail(req, ENOMEM, "render metrics: out of memory");
        api_req_resume(req);
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8");
    api_reply_response(req, 200, resp);
    api_req_resume(req);
}

void
metrics_get(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    if (daemon_stats(api_daemon(req->api), api_connections(req->api), stats_cb, req, &call, &err) <
        0) {
        api_reply_err(req, &err);
        return;
    }
    api_req_wait_call(req, call);
}
