/*
 * Loop lag: a repeating timer that measures how late it fires. If the
 * loop is blocked for 40 ms, the next tick is 40 ms late, which is what
 * the health endpoint reports as loop.lag_ms. Loop thread only.
 */
#ifndef BERTH_DAEMON_LAG_H
#define BERTH_DAEMON_LAG_H

#include <uv.h>

struct lag_monitor {
    uv_timer_t timer;
    uint64_t interval_ms;
    uint64_t expected_ns; /* hrtime at which the next tick is due */
    double last_ms;       /* lag of the latest tick */
    double window_max_ms; /* worst lag over the current window */
    double reported_ms;   /* worst lag over the previous full window */
    unsigned ticks_in_window;
    void (*observe)(void *ctx, double lag_ms); /* optional, e.g. a metrics histogram */
    void *observe_ctx;
};

/* Starts ticking every interval_ms. */
int lag_monitor_start(uv_loop_t *loop, struct lag_monitor *m, uint64_t interval_ms);
/* The worst lag seen over the last second or so, in milliseconds. */
double lag_monitor_ms(const struct lag_monitor *m);
/* Stops and closes the timer; cb (may be NULL) runs when it is closed. */
void lag_monitor_close(struct lag_monitor *m, uv_close_cb cb);

#endif
