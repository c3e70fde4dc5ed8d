/* Loop lag measurement with a repeating timer; loop thread only. */
#include "daemon/lag.h"

#define WINDOW_TICKS 10

static void
tick_cb(uv_timer_t *t)
{
    struct lag_monitor *m = t->data;
    uint64_t now = uv_hrtime();
    double lag = now > m->expected_ns ? (double)(now - m->expected_ns) / 1e6 : 0.0;
    m->last_ms = lag;
    if (lag > m->window_max_ms)
        m->window_max_ms = lag;
    if (++m->ticks_in_window >= WINDOW_TICKS) {
        m->reported_ms = m->window_max_ms;
        m->window_max_ms = 0;
        m->ticks_in_window = 0;
    }
    if (m->observe)
        m->observe(m->observe_ctx, lag);
    m->expected_ns = now + m->interval_ms * 1000000ull;
}

int
lag_monitor_start(uv_loop_t *loop, struct lag_monitor *m, uint64_t interval_ms)
{
    int rc = uv_timer_init(loop, &m->timer);
    if (rc < 0)
        return rc;
    m->timer.data = m;
    m->interval_ms = interval_ms;
    m->expected_ns = uv_hrtime() + interval_ms * 1000000ull;
    /* Keeps the loop alive only while something else does. */
    uv_unref((uv_handle_t *)&m->timer);
    return uv_timer_start(&m->timer, tick_cb, interval_ms, interval_ms);
}

double
lag_monitor_ms(const struct lag_monitor *m)
{
    double cur = m->window_max_ms > m->reported_ms ? m->window_max_ms : m->reported_ms;
    /* A loop blocked right now has not ticked: count how overdue it is. */
    uint64_t now = uv_hrtime();
    if (now > m->expected_ns) {
        double overdue = (double)(now - m->expected_ns) / 1e6;
        if (overdue > cur)
            cur = overdue;
    }
    return cur;
}

void
lag_monitor_close(struct lag_monitor *m, uv_close_cb cb)
{
    uv_timer_stop(&m->timer);
    uv_close((uv_handle_t *)&m->timer, cb);
}
