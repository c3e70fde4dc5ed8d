/*
 * What the daemon reports about itself, for every front end: why the
 * store is unusable (if it is), and the gauges a metrics scrape shows
 * (uptime, jobs, lag, store, runtime, containers, processes, images,
 * volumes, and the process collector's memory, fds and CPU). The counts
 * the store and /proc hold are read by a job. Loop thread only.
 */
#ifndef BERTH_DAEMON_STATUS_H
#define BERTH_DAEMON_STATUS_H

#include <stddef.h>

#include "common/err.h"
#include "daemon/svc.h"

struct daemon;

/* Why the store cannot be used, or NULL when it can. */
const char *daemon_storage_problem(const struct daemon *d);

/* One gauge or counter as of the scrape. labels: "{k=\"v\"}" or NULL. */
struct daemon_gauge {
    const char *name;
    const char *type; /* "gauge" or "counter" */
    const char *help;
    const char *labels;
    double value;
};

#define DAEMON_GAUGES_MAX 24

typedef void (*daemon_stats_cb)(void *arg, const struct err *err, const struct daemon_gauge *g,
                                size_t n);
/* Collects every gauge; connections is the front end's own count. */
int daemon_stats(struct daemon *d, unsigned connections, daemon_stats_cb cb, void *arg,
                 struct svc_call **call, struct err *err);

#endif
