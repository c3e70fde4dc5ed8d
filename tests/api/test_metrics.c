/*
 * GET /v1/metrics: Prometheus text exposition format, a request counter
 * that counts, histograms whose buckets are cumulative, and the loop lag
 * and job gauges.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/api/harness.h"

/* The value of the sample line that starts with exactly prefix (name and
 * labels), or -1 when there is none. */
static double
sample(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *line = text; line && *line;) {
        if (strncmp(line, prefix, n) == 0 && line[n] == ' ')
            return strtod(line + n + 1, NULL);
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return -1;
}

/* Every sample line's metric family has a "# TYPE" line before it, and
 * every value parses as a number. */
static void
check_format(const char *text)
{
    char types[64][128];
    int ntypes = 0;
    for (const char *line = text; *line;) {
        size_t len = strcspn(line, "\n");
        ck_assert_msg(line[len] == '\n', "the last line has no newline");
        char buf[1024];
        snprintf(buf, sizeof(buf), "%.*s", (int)len, line);
        if (strncmp(buf, "# TYPE ", 7) == 0) {
            char name[128], kind[32];
            ck_assert_msg(sscanf(buf + 7, "%127s %31s", name, kind) == 2, "bad TYPE: %s", buf);
            ck_assert_msg(!strcmp(kind, "counter") || !strcmp(kind, "gauge") ||
                              !strcmp(kind, "histogram"),
                          "unknown type: %s", buf);
            ck_assert(ntypes < 64);
            snprintf(types[ntypes++], sizeof(types[0]), "%s", name);
        } else if (buf[0] != '#' && buf[0]) {
            size_t nlen = strcspn(buf, "{ ");
            bool declared = false;
            for (int i = 0; i < ntypes && !declared; i++) {
                size_t tl = strlen(types[i]);
                declared = (nlen == tl || (nlen > tl && buf[tl] == '_')) &&
                           strncmp(buf, types[i], tl) == 0;
            }
            ck_assert_msg(declared, "sample without a # TYPE before it: %s", buf);
            const char *v = strrchr(buf, ' ');
            ck_assert_msg(v, "sample without a value: %s", buf);
            char *end;
            strtod(v + 1, &end);
            ck_assert_msg(*end == '\0' && end != v + 1, "value is not a number: %s", buf);
        }
        line += len + 1;
    }
}

static char *
get_metrics(struct berthd *b)
{
    struct hresp r;
    http_get(b, "/v1/metrics", &r);
    ck_assert_msg(r.status == 200, "metrics: %ld %s", r.status, r.body);
    char ct[128];
    ck_assert_msg(hresp_header(&r, "Content-Type", ct, sizeof(ct)) &&
                      strncmp(ct, "text/plain", 10) == 0,
                  "metrics Content-Type: %s", ct);
    char *text = strdup(r.body);
    hresp_free(&r);
    return text;
}

START_TEST(metrics_text_format_declares_every_family)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    /* Start-up's own job (the garbage collection) ends first. */
    ck_assert(wait_health_int(&b, "jobs.running", 0, 10000));
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    char build_info[128];
    snprintf(build_info, sizeof(build_info), "berth_build_info{version=\"%s\"}",
             json_object_get_string(json_at(r.json, "version")));
    hresp_free(&r);
    char *text = get_metrics(&b);
    check_format(text);
    static const char *const families[] = {
        "# TYPE berth_http_requests_total counter",
        "# TYPE berth_http_request_duration_seconds histogram",
        "# TYPE berth_loop_lag_seconds histogram",
        "# TYPE berth_jobs_queued gauge",
        "# TYPE berth_jobs_running gauge",
        "# TYPE berth_build_info gauge",
        "# TYPE berth_containers gauge",
        "# TYPE berth_processes_running gauge",
        "# TYPE berth_images gauge",
        "# TYPE berth_volumes gauge",
        "# TYPE process_resident_memory_bytes gauge",
        "# TYPE process_open_fds gauge",
        "# TYPE process_cpu_seconds_total counter",
        NULL,
    };
    for (const char *const *f = families; *f; f++)
        ck_assert_msg(strstr(text, *f), "no \"%s\" in:\n%s", *f, text);
    /* The lag histogram says it all: no gauge of the same thing beside it. */
    ck_assert_msg(!strstr(text, "berth_loop_lag_ms"), "a duplicate lag gauge:\n%s", text);
    ck_assert_msg(sample(text, build_info) == 1, "no build info:\n%s", text);
    ck_assert_msg(sample(text, "berth_images") == 0 && sample(text, "berth_volumes") == 0 &&
                      sample(text, "berth_containers") == 0 &&
                      sample(text, "berth_processes_running") == 0,
                  "counts not 0 on an empty store:\n%s", text);
    ck_assert_msg(sample(text, "process_resident_memory_bytes") > 1e6 &&
                      sample(text, "process_open_fds") >= 3,
                  "process collector:\n%s", text);
    /* The daemon's own jobs (the volume TTL sweep, start-up's GC) may be
     * out when the first sample is taken on a loaded machine: the gauges
     * must come down to 0 once it is idle, within a few seconds. */
    double queued = -1, running = -1;
    for (int i = 0; i < 100; i++) {
        queued = sample(text, "berth_jobs_queued");
        running = sample(text, "berth_jobs_running");
        if (queued == 0 && running == 0)
            break;
        free(text);
        sleep_ms(100);
        text = get_metrics(&b);
    }
    ck_assert_msg(queued == 0, "berth_jobs_queued is %g, not 0 when idle", queued);
    ck_assert_msg(running == 0, "berth_jobs_running is %g, not 0 when idle", running);
    /* Shortest forms (the unit suite checks the renderer): whole numbers bare. */
    ck_assert_msg(strstr(text, "\nberth_jobs_queued 0\n") && strstr(text, "\nberth_images 0\n"),
                  "not in their shortest form:\n%s", text);
    free(text);
    berthd_finish(&b);
}
END_TEST

START_TEST(metrics_request_counter_grows_with_requests)
{
    struct berthd b = {0};
    berthd_start(&b, &(struct berthd_opts){.args = {"--runtime", "host"}});
    static const char key[] =
        "berth_http_requests_total{route=\"/v1/health\",method=\"GET\",status=\"200\"}";
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    hresp_free(&r);
    char *before = get_metrics(&b);
    double n0 = sample(before, key);
    ck_assert_msg(n0 == 1, "after one health request the counter is %g:\n%s", n0, before);
    for (int i = 0; i < 5; i++) {
        http_get(&b, "/v1/health", &r);
        hresp_free(&r);
    }
    http_get(&b, "/v1/nowhere", &r);
    hresp_free(&r);
    char *after = get_metrics(&b);
    ck_assert_msg(sample(after, key) == n0 + 5, "counter %g after 5 more requests (was %g)",
                  sample(after, key), n0);
    /* Unknown paths share one series rather than one per path. */
    ck_assert_msg(sample(after, "berth_http_requests_total{route=\"unmatched\",method=\"GET\","
                                "status=\"404\"}") == 1,
                  "no unmatched 404 series:\n%s", after);
    ck_assert_msg(!strstr(after, "/v1/nowhere"), "a raw path became a label:\n%s", after);
    /* A 405 counts under the route whose path it matched. */
    http_do(&b, &(struct hreq){.method = "PUT", .path = "/v1/health"}, &r);
    ck_assert_int_eq(r.status, 405);
    hresp_free(&r);
    char *after405 = get_metrics(&b);
    ck_assert_msg(sample(after405, "berth_http_requests_total{route=\"/v1/health\",method=\"PUT\","
                                   "status=\"405\"}") == 1,
                  "the 405 is not under its route:\n%s", after405);
    free(after405);
    /* The metrics request before this one was counted too. */
    ck_assert_msg(sample(after, "berth_http_requests_total{route=\"/v1/metrics\",method=\"GET\","
                                "status=\"200\"}") >= 1,
                  "metrics requests not counted:\n%s", after);
    free(before);
    free(after);
    berthd_finish(&b);
}
END_TEST

/* For each histogram series in text: buckets non-decreasing in "le" order,
 * "+Inf" equal to _count. Returns how many series it checked. */
static int
check_histograms(const char *text, const char *family)
{
    int series = 0;
    char bucket_prefix[160];
    snprintf(bucket_prefix, sizeof(bucket_prefix), "%s_bucket{", family);
    double prev = -1;
    char prev_labels[512] = "";
    for (const char *line = text; *line;) {
        size_t len = strcspn(line, "\n");
        char buf[1024];
        snprintf(buf, sizeof(buf), "%.*s", (int)len, line);
        line += len + (line[len] ? 1 : 0);
        if (strncmp(buf, bucket_prefix, strlen(bucket_prefix)) != 0)
            continue;
        /* The labels other than le identify the series. */
        char labels[512];
        const char *le = strstr(buf, "le=\"");
        ck_assert_msg(le, "bucket without le: %s", buf);
        snprintf(labels, sizeof(labels), "%.*s", (int)(le - buf), buf);
        double v = strtod(strrchr(buf, ' ') + 1, NULL);
        if (strcmp(labels, prev_labels) != 0) {
            snprintf(prev_labels, sizeof(prev_labels), "%s", labels);
            prev = -1;
        }
        ck_assert_msg(v >= prev, "bucket count decreases: %s (previous %g)", buf, prev);
        prev = v;
        if (strncmp(le, "le=\"+Inf\"", 9) == 0) {
            /* _count with the same labels (without le). */
            char count_key[600];
            const char *open = strchr(labels, '{');
            size_t lab_len = strlen(open + 1);
            if (lab_len > 0 && open[lab_len] == ',')
                lab_len--; /* drop the comma before le */
            if (lab_len > 0)
                snprintf(count_key, sizeof(count_key), "%s_count{%.*s}", family, (int)lab_len,
                         open + 1);
            else
                snprintf(count_key, sizeof(count_key), "%s_count", family);
            double count = sample(text, count_key);
            ck_assert_msg(count == v, "%s is %g but +Inf bucket is %g", count_key, count, v);
            series++;
        }
    }
    return series;
}

START_TEST(metrics_histogram_buckets_are_cumulative)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    for (int i = 0; i < 20; i++) {
        struct hresp r;
        http_get(&b, i % 3 ? "/v1/health" : "/v1/missing", &r);
        hresp_free(&r);
    }
    sleep_ms(300); /* a few lag ticks */
    char *text = get_metrics(&b);
    int n = check_histograms(text, "berth_http_request_duration_seconds");
    ck_assert_msg(n >= 2, "expected at least 2 duration series, found %d:\n%s", n, text);
    ck_assert_msg(check_histograms(text, "berth_loop_lag_seconds") == 1, "no lag histogram");
    ck_assert_msg(sample(text, "berth_loop_lag_seconds_count") > 0, "lag never observed");
    ck_assert_msg(sample(text, "berth_http_request_duration_seconds_count{route=\"/v1/health\"}") ==
                      13,
                  "13 health requests were made:\n%s", text);
    free(text);
    berthd_finish(&b);
}
END_TEST

static Suite *
metrics_suite(void)
{
    Suite *s = suite_create("api_metrics");
    TCase *tc = tcase_create("metrics");
    tcase_add_test(tc, metrics_text_format_declares_every_family);
    tcase_add_test(tc, metrics_request_counter_grows_with_requests);
    tcase_add_test(tc, metrics_histogram_buckets_are_cumulative);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(metrics_suite());
}
