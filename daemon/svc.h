/*
 * What every service in daemon/ shares. A service is the one place where
 * containers, processes, images or volumes are created, run, streamed and
 * deleted; front ends (the /v1 API, later the Docker API) parse a
 * request, call one service with plain C arguments and a completion
 * callback, and render what it reports. Services know nothing of HTTP or
 * JSON, and never which front end called them.
 *
 * The calling convention, as libuv's uv_fs_*: a call returns 0 and its
 * callback runs later, on the loop, exactly once; or it returns a negative
 * errno with err set (a bad argument, an unknown handle, a conflict with
 * the current state) and the callback never runs. The callback never runs
 * inside the call, so the caller cannot tell work done at once from work
 * done on the pool.
 *
 * A caller that goes away (its client disconnected) drops its interest
 * with svc_call_detach: the work goes on to its end, for the sake of
 * everyone else, and only the callback is not run. A call's svc_call is
 * valid until its callback ran or it was detached.
 *
 * Errors carry their meaning in err.code (common/err.h): each front end
 * maps codes to its own statuses. Loop thread only.
 */
#ifndef BERTH_DAEMON_SVC_H
#define BERTH_DAEMON_SVC_H

#include <stdbool.h>

struct svc_call {
    bool detached;
};

/* The caller is gone: the callback will not run. NULL is a no-op. */
static inline void
svc_call_detach(struct svc_call *call)
{
    if (call)
        call->detached = true;
}

/* Stores call in *out when the caller wants a handle on it. */
static inline void
svc_call_give(struct svc_call *call, struct svc_call **out)
{
    call->detached = false;
    if (out)
        *out = call;
}

#endif
