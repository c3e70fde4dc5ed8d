/* Prometheus counters and histograms kept on the loop thread. */
#include "api/metrics.h"

#include "daemon/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double duration_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                          0.1,    0.25,  0.5,    1,     2.5,  5,     10};
#define N_DURATION (sizeof(duration_buckets) / sizeof(duration_buckets[0]))

static const double lag_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1};
#define N_LAG (sizeof(lag_buckets) / sizeof(lag_buckets[0]))

struct request_series {
    char method[16];
    char route[96];
    unsigned status;
    uint64_t count;
};

struct duration_series {
    char route[96];
    uint64_t buckets[N_DURATION];
    uint64_t count;
    double sum;
};

struct metrics {
    struct request_series *req;
    size_t n_req, cap_req;
    struct duration_series *dur;
    size_t n_dur, cap_dur;
    uint64_t lag_buckets[N_LAG];
    uint64_t lag_count;
    double lag_sum;
};

struct metrics *
metrics_new(void)
{
    return calloc(1, sizeof(struct metrics));
}

void
metrics_free(struct metrics *m)
{
    if (!m)
        return;
    free(m->req);
    free(m->dur);
    free(m);
}

static void *
grow(void *arr, size_t *cap, size_t elem)
{
    size_t ncap = *cap ? *cap * 2 : 16;
    void *n = realloc(arr, ncap * elem);
    if (n)
        *cap = ncap;
    return n;
}

void
metrics_observe_request(struct metrics *m, const char *method, const char *route, unsigned status,
                        double seconds)
{
    struct request_series *rs = NULL;
    for (size_t i = 0; i < m->n_req; i++) {
        if (m->req[i].status == status && strcmp(m->req[i].method, method) == 0 &&
            strcmp(m->req[i].route, route) == 0) {
            rs = &m->req[i];
            break;
        }
    }
    if (!rs) {
        if (m->n_req == m->cap_req) {
            void *n = grow(m->req, &m->cap_req, sizeof(*m->req));
            if (!n)
                return;
            m->req = n;
        }
        rs = &m->req[m->n_req++];
        memset(rs, 0, sizeof(*rs));
        snprintf(rs->method, sizeof(rs->method), "%s", method);
        snprintf(rs->route, sizeof(rs->route), "%s", route);
        rs->status = status;
    }
    rs->count++;

    struct duration_series *ds = NULL;
    for (size_t i = 0; i < m->n_dur; i++) {
        if (strcmp(m->dur[i].route, route) == 0) {
            ds = &m->dur[i];
            break;
        }
    }
    if (!ds) {
        if (m->n_dur == m->cap_dur) {
            void *n = grow(m->dur, &m->cap_dur, sizeof(*m->dur));
            if (!n)
                return;
            m->dur = n;
        }
        ds = &m->dur[m->n_dur++];
        memset(ds, 0, sizeof(*ds));
        snprintf(ds->route, sizeof(ds->route), "%s", route);
    }
    for (size_t b = 0; b < N_DURATION; b++)
        if (seconds <= duration_buckets[b])
            ds->buckets[b]++;
    ds->count++;
    ds->sum += seconds;
}

void
metrics_observe_lag(struct metrics *m, double lag_ms)
{
    double s = lag_ms / 1000.0;
    for (size_t b = 0; b < N_LAG; b++)
        if (s <= lag_buckets[b])
            m->lag_buckets[b]++;
    m->lag_count++;
    m->lag_sum += s;
}

struct buf {
    char *data;
    size_t len, cap;
    int failed;
};

static void BERTH_FORMAT(2, 3) bprintf(struct buf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t ncap = (b->cap + (size_t)n) * 2;
        char *nd = realloc(b->data, ncap);
        if (!nd) {
            b->failed = 1;
            return;
        }
        b->data = nd;
        b->cap = ncap;
    }
}

const char *
metrics_number(double v, char buf[32])
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, 32, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return buf;
    }
    return buf;
}

char *
metrics_render(const struct metrics *m, const struct daemon_gauge *extra, size_t n_extra,
               size_t *len)
{
    struct buf b = {.cap = 4096};
    char num[32];
    b.data = malloc(b.cap);
    if (!b.data)
        return NULL;
    b.data[0] = '\0';

    bprintf(&b, "# HELP berth_http_requests_total HTTP requests answered, by route, method and "
                "status.\n# TYPE berth_http_requests_total counter\n");
    for (size_t i = 0; i < m->n_req; i++)
        bprintf(&b, "berth_http_requests_total{route=\"%s\",method=\"%s\",status=\"%u\"} %llu\n",
                m->req[i].route, m->req[i].method, m->req[i].status,
                (unsigned long long)m->req[i].count);

    bprintf(&b, "# HELP berth_http_request_duration_seconds Time from the request's first byte "
                "to its completion, by route.\n"
                "# TYPE berth_http_request_duration_seconds histogram\n");
    for (size_t i = 0; i < m->n_dur; i++) {
        const struct duration_series *ds = &m->dur[i];
        for (size_t k = 0; k < N_DURATION; k++)
            bprintf(&b, "berth_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                    ds->route, duration_buckets[k], (unsigned long long)ds->buckets[k]);
        bprintf(&b, "berth_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
                ds->route, (unsigned long long)ds->count);
        bprintf(&b, "berth_http_request_duration_seconds_sum{route=\"%s\"} %s\n", ds->route,
                metrics_number(ds->sum, num));
        bprintf(&b, "berth_http_request_duration_seconds_count{route=\"%s\"} %llu\n", ds->route,
                (unsigned long long)ds->count);
    }

    bprintf(&b, "# HELP berth_loop_lag_seconds How late the loop's lag timer fired.\n"
                "# TYPE berth_loop_lag_seconds histogram\n");
    for (size_t k = 0; k < N_LAG; k++)
        bprintf(&b, "berth_loop_lag_seconds_bucket{le=\"%g\"} %llu\n", lag_buckets[k],
                (unsigned long long)m->lag_buckets[k]);
    bprintf(&b, "berth_loop_lag_seconds_bucket{le=\"+Inf\"} %llu\n",
            (unsigned long long)m->lag_count);
    bprintf(&b, "berth_loop_lag_seconds_sum %s\n", metrics_number(m->lag_sum, num));
    bprintf(&b, "berth_loop_lag_seconds_count %llu\n", (unsigned long long)m->lag_count);

    for (size_t i = 0; i < n_extra; i++)
        bprintf(&b, "# HELP %s %s\n# TYPE %s %s\n%s%s %s\n", extra[i].name, extra[i].help,
                extra[i].name, extra[i].type, extra[i].name, extra[i].labels ? extra[i].labels : "",
                metrics_number(extra[i].value, num));

    if (b.failed) {
        free(b.data);
        return NULL;
    }
    *len = b.len;
    return b.data;
}
