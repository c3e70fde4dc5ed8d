/*
 * Background health probes. Checking that the store root is writable and
 * how much space it has, or whether the OCI runtime answers, waits on the
 * disk or on a child process, and the health endpoint must answer within
 * milliseconds even when every pool thread is busy. So one dedicated
 * thread (not a pool thread, which could be saturated by unpacks) runs the
 * probes every second and publishes the results; the loop only reads the
 * latest snapshot under a mutex.
 */
#ifndef BERTH_DAEMON_MONITOR_H
#define BERTH_DAEMON_MONITOR_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

/* A probe of something else the daemon needs (the runtime driver, say).
 * Runs on the monitor thread; returns 0 when usable, or fills err. */
typedef int (*monitor_probe_fn)(void *ctx, struct err *err);

struct monitor_snapshot {
    bool probed; /* false until the first round finished */
    bool root_writable;
    uint64_t root_free_bytes;
    char root_error[ERR_MSG_MAX];
    bool runtime_usable;
    char runtime_error[ERR_MSG_MAX];
    bool network_probed; /* the network probe is set and has run */
    bool network_usable;
    char network_error[ERR_MSG_MAX];
};

struct monitor;

/* Starts the thread; the first round runs before this returns, so the
 * first health answer already has real figures. */
int monitor_start(const char *store_root, monitor_probe_fn runtime_probe, void *probe_ctx,
                  unsigned interval_ms, struct monitor **out, struct err *err);
/*
 * Sets the second probe, the network's (daemon/net.h's net_probe_run
 * behind a monitor_probe_fn), and asks for a round now. Until it is set
 * the snapshot's network_probed is false. ctx must outlive monitor_stop.
 * Any thread.
 */
void monitor_set_network_probe(struct monitor *m, monitor_probe_fn probe, void *ctx);
/* Copies the latest results. Any thread; never blocks on a probe. */
void monitor_read(struct monitor *m, struct monitor_snapshot *out);
/* Asks for a new round now (after a change the health answer should see). */
void monitor_poke(struct monitor *m);
/* Stops and joins the thread, frees m. NULL is a no-op. */
void monitor_stop(struct monitor *m);

#endif
