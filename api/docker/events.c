/*
 * GET /events: the container events (daemon/ctr_events.h) as the engine
 * streams them, one JSON object each, for as long as the client stays
 * (or until ?until=): the history first when ?since= asks for it, then
 * each event as it happens, filtered by type, event, container, image
 * and label. Loop thread.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/docker/docker.h"
#include "api/request.h"
#include "api/stream.h"
#include "common/clock.h"
#include "daemon/ctr_events.h"
#include "daemon/daemon.h"
#include "daemon/svc_containers.h"

struct events_ctx {
    struct api_req *req;
    struct containers *reg;
    struct ctr_sub sub;
    bool subscribed;
    struct api_stream *stream;
    json_object *filters;
    int64_t until_ns; /* INT64_MAX: none */
    uv_timer_t *until_timer;
};

static void
timer_free_cb(uv_handle_t *h)
{
    free(h);
}

static void
events_free(void *ctx)
{
    struct events_ctx *ec = ctx;
    if (ec->subscribed)
        ctr_events_unsubscribe(ec->reg, &ec->sub);
    if (ec->until_timer) {
        uv_timer_stop(ec->until_timer);
        uv_close((uv_handle_t *)ec->until_timer, timer_free_cb);
    }
    api_stream_release(ec->stream);
    json_object_put(ec->filters);
    free(ec);
}

/* "1700000000", "1700000000.5" (unix seconds) as ns; -1 when it is not one. */
static int64_t
parse_time(const char *s)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < 0 || v > 1e11)
        return -1;
    return (int64_t)(v * 1e9);
}

static bool
matches(struct events_ctx *ec, const struct ctr_change *ev)
{
    json_object *f = ec->filters, *v;
    if (!ev->has_main)
        return false; /* a /v1 container: not one the Docker API shows */
    if ((v = docker_filter_values(f, "type"))) {
        bool any = false;
        for (size_t i = 0; i < json_object_array_length(v); i++)
            any |=
                strcmp(json_object_get_string(json_object_array_get_idx(v, i)), "container") == 0;
        if (!any)
            return false;
    }
    const char *action = ctr_change_name(ev->kind);
    v = docker_filter_values(f, "event");
    if (!v)
        v = docker_filter_values(f, "status");
    if (v) {
        bool any = false;
        for (size_t i = 0; i < json_object_array_length(v); i++)
            any |= strcmp(json_object_get_string(json_object_array_get_idx(v, i)), action) == 0;
        if (!any)
            return false;
    }
    if ((v = docker_filter_values(f, "container"))) {
        bool any = false;
        for (size_t i = 0; i < json_object_array_length(v); i++) {
            const char *want = json_object_get_string(json_object_array_get_idx(v, i));
            any |= strncmp(ev->handle, want, strlen(want)) == 0 ||
                   (ev->name && strcmp(ev->name, want[0] == '/' ? want + 1 : want) == 0);
        }
        if (!any)
            return false;
    }
    if ((v = docker_filter_values(f, "image"))) {
        bool any = false;
        for (size_t i = 0; i < json_object_array_length(v); i++)
            any |= ev->image &&
                   strcmp(ev->image, json_object_get_string(json_object_array_get_idx(v, i))) == 0;
        if (!any)
            return false;
    }
    if ((v = docker_filter_values(f, "label")) &&
        !docker_labels_match(v, ev->label_keys, ev->label_values, ev->nlabels))
        return false;
    return true;
}

static void
send_event(struct events_ctx *ec, const struct ctr_change *ev)
{
    if (!matches(ec, ev) || ev->time_ns > ec->until_ns)
        return;
    const char *action = ctr_change_name(ev->kind);
    json_object *attrs = json_object_new_object();
    for (size_t i = 0; i < ev->nlabels; i++)
        json_object_object_add(attrs, ev->label_keys[i],
                               json_object_new_string(ev->label_values[i]));
    json_object_object_add(attrs, "image", json_object_new_string(ev->image ? ev->image : ""));
    json_object_object_add(attrs, "name", json_object_new_string(ev->name ? ev->name : ev->handle));
    char num[16];
    if (ev->kind == CTR_CHANGE_DIE) {
        snprintf(num, sizeof(num), "%d", ev->exit_code);
        json_object_object_add(attrs, "exitCode", json_object_new_string(num));
    }
    if (ev->kind == CTR_CHANGE_KILL) {
        snprintf(num, sizeof(num), "%d", ev->signal);
        json_object_object_add(attrs, "signal", json_object_new_string(num));
    }
    json_object *actor = json_object_new_object();
    json_object_object_add(actor, "ID", json_object_new_string(ev->handle));
    json_object_object_add(actor, "Attributes", attrs);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "status", json_object_new_string(action));
    json_object_object_add(o, "id", json_object_new_string(ev->handle));
    json_object_object_add(o, "from", json_object_new_string(ev->image ? ev->image : ""));
    json_object_object_add(o, "Type", json_object_new_string("container"));
    json_object_object_add(o, "Action", json_object_new_string(action));
    json_object_object_add(o, "Actor", actor);
    json_object_object_add(o, "scope", json_object_new_string("local"));
    json_object_object_add(o, "time", json_object_new_int64(ev->time_ns / 1000000000));
    json_object_object_add(o, "timeNano", json_object_new_int64(ev->time_ns));
    size_t len = 0;
    const char *text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
    api_stream_write(ec->stream, text, len);
    api_stream_write(ec->stream, "\n", 1);
    json_object_put(o);
}

static void
replay_cb(void *arg, const struct ctr_change *ev)
{
    send_event(arg, ev);
}

static void
live_cb(struct ctr_sub *s, const struct ctr_change *ev, struct container *c)
{
    struct events_ctx *ec = s->ctx;
    if (api_stream_gone(ec->stream))
        return; /* the request's completion unsubscribes */
    send_event(ec, ev);
}

static void
until_cb(uv_timer_t *t)
{
    struct events_ctx *ec = t->data;
    if (ec->subscribed) {
        ctr_events_unsubscribe(ec->reg, &ec->sub);
        ec->subscribed = false;
    }
    api_stream_end(ec->stream);
}

void
docker_events(struct api_req *req)
{
    static const char *const known[] = {"type",  "event", "status", "container",
                                        "image", "label", NULL};
    struct containers *reg = NULL;
    struct err err = {0};
    if (containers_registry(api_daemon(req->api), &reg, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    const char *since = api_req_query(req, "since");
    const char *until = api_req_query(req, "until");
    int64_t since_ns = since && *since ? parse_time(since) : 0;
    int64_t until_ns = until && *until ? parse_time(until) : INT64_MAX;
    if (since_ns < 0 || until_ns < 0) {
        api_reply_fail(req, EINVAL, "since/until: %.40s is not a unix timestamp",
                       since_ns < 0 ? since : until);
        return;
    }
    json_object *filters = docker_filters(req, known);
    if (!filters)
        return;
    struct events_ctx *ec = calloc(1, sizeof(*ec));
    if (!ec) {
        json_object_put(filters);
        api_reply_fail(req, ENOMEM, "out of memory");
        return;
    }
    ec->req = req;
    ec->reg = reg;
    ec->filters = filters;
    ec->until_ns = until_ns;
    ec->sub.fn = live_cb;
    ec->sub.ctx = ec;
    req->ctx = ec;
    req->ctx_free = events_free;
    ec->stream = api_stream_start(req, 200, "application/json");
    if (!ec->stream)
        return;
    if (since)
        ctr_events_replay(reg, since_ns, until_ns, replay_cb, ec);
    int64_t now_ns = clock_unix_ms() * 1000000;
    if (until_ns <= now_ns) {
        api_stream_end(ec->stream);
        return;
    }
    ctr_events_subscribe(reg, &ec->sub);
    ec->subscribed = true;
    if (until_ns != INT64_MAX && (ec->until_timer = malloc(sizeof(*ec->until_timer)))) {
        uv_timer_init(api_daemon(req->api)->loop, ec->until_timer);
        ec->until_timer->data = ec;
        uv_timer_start(ec->until_timer, until_cb, (uint64_t)((until_ns - now_ns) / 1000000) + 1, 0);
    }
}
