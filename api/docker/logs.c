/*
 * GET /containers/{id}/logs: the main process's output (its latest run)
 * as the engine gives it to a non-TTY container's readers, in the
 * multiplexed framing: one frame per line (or part of a long one), an
 * 8-byte header (1 stdout or 2 stderr, three zeros, the length
 * big-endian) and the bytes, with ?timestamps=1 the line's time first.
 * The lines, their order and times, since, until, tail and follow are the
 * log service's (daemon/proc_logs.h); this file parses and frames. The
 * next batch is asked for once the client took the last. Loop thread.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/docker/docker.h"
#include "api/logs_stream.h"
#include "api/logtime.h"
#include "api/request.h"
#include "api/stream.h"
#include "daemon/containers.h"
#include "daemon/proc_logs.h"

/* The engine's query: since and until unix seconds ("0": none), tail N or "all". */
static int
dlogs_query(struct api_req *req, struct proc_logs_opts *o, struct err *err)
{
    *o = (struct proc_logs_opts){.out = docker_query_bool(req, "stdout", false),
                                 .err = docker_query_bool(req, "stderr", false),
                                 .tail = -1,
                                 .follow = docker_query_bool(req, "follow", false)};
    if (!o->out && !o->err)
        return err_set(err, EINVAL, "Bad parameters: you must choose at least one stream");
    const char *v;
    if ((v = api_req_query(req, "since")) && *v &&
        api_logtime_parse("since", v, &o->since_ns, err) < 0)
        return -EINVAL;
    if ((v = api_req_query(req, "until")) && *v &&
        api_logtime_parse("until", v, &o->until_ns, err) < 0)
        return -EINVAL;
    if ((v = api_req_query(req, "tail")) && *v && strcmp(v, "all") != 0 &&
        docker_query_int(req, "tail", 0, INT64_MAX, &o->tail, err) < 0)
        return -EINVAL;
    return 0;
}

void
docker_container_logs(struct api_req *req)
{
    struct container *c = docker_ctr_param(req);
    if (!c)
        return;
    struct err err = {0};
    struct proc_logs_opts o;
    if (dlogs_query(req, &o, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    if (c->p->main && c->p->main->tty) {
        api_reply_fail(req, EINVAL, "logs of a TTY container are not supported by this host");
        return;
    }
    if (!c->main_proc) {
        /* Never started: nothing written yet. */
        api_reply_text(req, 200, "application/vnd.docker.multiplexed-stream", "", 0);
        return;
    }
    if (api_logs_stream(req, c->p->handle, c->main_proc->id, &o,
                        docker_query_bool(req, "timestamps", false), API_LOGS_DOCKER, &err) < 0)
        api_reply_err(req, &err);
}
