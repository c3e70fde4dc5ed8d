/*
 * Prometheus metrics: request counts by route, method and status, a
 * request duration histogram by route, a loop lag histogram, and gauges
 * read at scrape time (jobs, connections, uptime, store). Loop thread.
 */
#ifndef BERTH_API_METRICS_H
#define BERTH_API_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct metrics;

struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);

/* Counts one finished request; route is the pattern ("/v1/images/{ref}")
 * or "unmatched". */
void metrics_observe_request(struct metrics *m, const char *method, const char *route,
                             unsigned status, double seconds);
/* Records one loop lag measurement. */
void metrics_observe_lag(struct metrics *m, double lag_ms);

/* A gauge or counter whose value is known only at scrape time. */
struct metrics_extra {
    const char *name;
    const char *type; /* "gauge" or "counter" */
    const char *help;
    double value;
};

/* Renders the text exposition format into a new buffer (caller frees). */
char *metrics_render(const struct metrics *m, const struct metrics_extra *extra, size_t n_extra,
                     size_t *len);

#endif
