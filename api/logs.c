/*
 * GET /v1/containers/{handle}/processes/{id}/output: a process's stdout
 * and stderr together, in the order they were written, as raw bytes;
 * with ?timestamps=1 each line begins with the time it was written. The
 * query picks the streams (stdout, stderr), the lines (since, until,
 * tail) and follow. Parses, and streams the log service's answer
 * (api/logs_stream.h). Loop thread.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/handlers.h"
#include "api/logs_stream.h"
#include "api/logtime.h"
#include "api/request.h"
#include "api/stream.h"
#include "daemon/proc_logs.h"

/* since, until and tail from the query, as the log service takes them. */
static int
logs_query(struct api_req *req, struct proc_logs_opts *o, struct err *err)
{
    *o = (struct proc_logs_opts){.out = api_req_query_flag(req, "stdout", true),
                                 .err = api_req_query_flag(req, "stderr", true),
                                 .tail = -1,
                                 .follow = api_req_query_flag(req, "follow", false)};
    const char *v;
    if ((v = api_req_query(req, "since")) && api_logtime_parse("since", v, &o->since_ns, err) < 0)
        return -EINVAL;
    if ((v = api_req_query(req, "until")) && api_logtime_parse("until", v, &o->until_ns, err) < 0)
        return -EINVAL;
    if ((v = api_req_query(req, "tail")) && strcmp(v, "all") != 0 &&
        api_req_query_count(req, "tail", "a number of lines (or all)", &o->tail, err) < 0)
        return -EINVAL;
    if (!o->out && !o->err)
        return err_set(err, EINVAL, "stdout=0 and stderr=0: at least one stream is needed");
    return 0;
}

void
processes_output(struct api_req *req)
{
    struct err err = {0};
    struct proc_logs_opts o;
    if (logs_query(req, &o, &err) < 0 ||
        api_logs_stream(req, api_req_param(req, "handle"), api_req_param(req, "id"), &o,
                        api_req_query_flag(req, "timestamps", false), API_LOGS_RAW, &err) < 0)
        api_reply_err(req, &err);
}
