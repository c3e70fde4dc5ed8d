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

struct store;
struct containers;
struct volume_ttl;
struct image_pulls;
struct net;

struct daemon {
    uv_loop_t *loop;
    const struct config *cfg;
    struct job_queue *jobs;
    struct lag_monitor lag;
    struct monitor *monitor;
    int64_t started_at;  /* unix seconds */
    uint64_t started_hr; /* uv_hrtime at start */
    bool shutting_down;

    /* The store, opened at start-up; NULL when it could not be opened, in
     * which case store_error says why and the routes that need it answer
     * 503 with that message. */
    struct store *store;
    char store_error[512];
    /* Containers and their runtime driver (daemon/containers.h); NULL when
     * the store could not be opened. */
    struct containers *containers;
    /* The volume TTL timer (daemon/volume_ttl.h); NULL without a store. */
    struct volume_ttl *volume_ttl;
    /* Registry pulls and their client (daemon/svc_pull.h), made at start. */
    struct image_pulls *pulls;
    /* The network service (daemon/net.h), made before the loop runs (also
     * with --network none: containers then get a namespace with lo only). */
    struct net *net;
    /* The start-up reconciliation of the network has finished (health
     * says the network is being set up until then). */
    bool net_reconciled;
};

/* Seconds since the daemon started. */
double daemon_uptime_s(const struct daemon *d);

#endif
