/*
 * The daemon's loop-owned state: the loop, the configuration, the job
 * queue, the lag monitor and the health probes, and (as the later layers
 * arrive) the store and the runtime driver. One instance, created in main
 * and handed to the API. Loop thread only, except where noted.
 */
#ifndef BERTH_DAEMON_DAEMON_H
#define BERTH_DAEMON_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/config.h"
#include "daemon/job.h"
#include "daemon/lag.h"
#include "daemon/monitor.h"

struct daemon {
    uv_loop_t *loop;
    const struct config *cfg;
    struct job_queue *jobs;
    struct lag_monitor lag;
    struct monitor *monitor;
    int64_t started_at;   /* unix seconds */
    uint64_t started_hr;  /* uv_hrtime at start */
    bool shutting_down;
};

/* Seconds since the daemon started. */
double daemon_uptime_s(const struct daemon *d);

#endif
