/*
 * Prometheus metrics: request counts by route, method and status, a
 * request duration histogram by route, a loop lag histogram, and the
 * daemon's gauges read at scrape time (daemon/status.h). Loop thread.
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

struct daemon_gauge;

/* Renders the text exposition format, the daemon's gauges after the
 * API's own series, into a new buffer (caller frees). Numbers are
 * printed in their shortest form that reads back the same. */
char *metrics_render(const struct metrics *m, const struct daemon_gauge *extra, size_t n_extra,
                     size_t *len);

/* v in the shortest form that reads back as v ("0.1", "3", "1e+20"); buf of 32. */
const char *metrics_number(double v, char buf[32]);

#endif
