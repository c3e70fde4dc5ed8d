/*
 * A process's log (daemon/proc_logs.h) streamed as a request's reply,
 * with back-pressure: the next batch is asked for once the client took
 * the last. Shared by the /v1 output route (raw bytes) and the Docker
 * API's logs (the engine's multiplexed frames). Loop thread.
 */
#ifndef BERTH_API_LOGS_STREAM_H
#define BERTH_API_LOGS_STREAM_H

#include <stdbool.h>

#include "api/request.h"
#include "daemon/proc_logs.h"

enum api_logs_framing {
    API_LOGS_RAW,    /* the bytes as written (application/octet-stream) */
    API_LOGS_DOCKER, /* one frame per piece: stream, 0, 0, 0, length big-endian */
};

/*
 * Opens the log of process id in container handle and makes it req's
 * reply; with timestamps each line begins with the time it was written
 * and a space. On failure nothing is started: err is set for the
 * caller's reply.
 */
int api_logs_stream(struct api_req *req, const char *handle, const char *id,
                    const struct proc_logs_opts *o, bool timestamps, enum api_logs_framing framing,
                    struct err *err);

#endif
