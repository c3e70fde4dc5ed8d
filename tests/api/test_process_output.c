/*
 * A process's stdout and stderr together, through the chunk index the
 * init keeps beside the output files (GET .../processes/{id}/output),
 * against a real berthd and runc: both streams in the order written,
 * lines with their times, tail and since, follow, output that forges an
 * index entry, and the index kept within the output cap while every byte
 * is still given. The stdout and stderr routes on the same records are
 * proven by test_processes and test_containers_limits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "harness_containers.h"

static void
start(struct berthd *b, const char *handle, const char *const *args)
{
    ctr_require_runtime();
    struct berthd_opts o = {0};
    for (size_t i = 0; args && args[i]; i++)
        o.args[i] = args[i];
    berthd_start(b, &o);
    ctr_create_raw(b, handle);
}

static char *
output(const struct berthd *b, const char *handle, const char *id, const char *query)
{
    char path[512];
    snprintf(path, sizeof(path), "/v1/containers/%s/processes/%s/output%s", handle, id, query);
    struct hresp r;
    http_get(b, path, &r);
    ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body);
    char *body = r.body;
    r.body = NULL;
    hresp_free(&r);
    return body;
}

/* "2026-12-01T23:19:55.123456789Z" as unix ns, or -1. */
static long long
parse_time(const char *s)
{
    struct tm tm = {0};
    long nsec = 0;
    int n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%9ldZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &nsec, &n) != 7 ||
        n != 30)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (long long)timegm(&tm) * 1000000000LL + nsec;
}

/*
 * Writes each line it reads on stdin ("o LINE" or "e LINE") to stdout or
 * stderr. The test sends a line only once the one before is in the
 * output, so the order of the writes, and of the init's reads, is set by
 * the test and not by how the machine schedules the init.
 */
#define ECHOER "while read s l; do case $s in o) echo $l;; e) echo $l >&2;; esac; done"

/* Sends line to the echoer's stdin (closing it after when last), then
 * waits until the output is want. */
static void
echo_line(const struct berthd *b, const char *handle, const char *id, const char *line, bool last,
          const char *want)
{
    char path[512];
    snprintf(path, sizeof(path), "/v1/containers/%s/processes/%s/stdin%s", handle, id,
             last ? "" : "?close=0");
    struct hresp r;
    http_do(b, &(struct hreq){.method = "PUT", .path = path, .body = line}, &r);
    ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body);
    hresp_free(&r);
    double deadline = now_ms() + 30000;
    for (;;) {
        char *all = output(b, handle, id, "");
        bool done = strcmp(all, want) == 0;
        ck_assert_msg(done || strncmp(all, want, strlen(all)) == 0, "output %s, want %s", all,
                      want);
        free(all);
        if (done)
            return;
        ck_assert_msg(now_ms() < deadline, "the output is not %s after 30 s", want);
        sleep_ms(10);
    }
}

START_TEST(output_gives_both_streams_in_the_order_written)
{
    struct berthd b = {0};
    start(&b, "po-order", NULL);
    double t0 = (double)time(NULL);
    proc_start(&b, "po-order",
               "{\"id\":\"t\",\"path\":\"sh\",\"stdin\":true,\"args\":[\"-c\",\"" ECHOER "\"]}");
    echo_line(&b, "po-order", "t", "o o1\n", false, "o1\n");
    echo_line(&b, "po-order", "t", "e e1\n", false, "o1\ne1\n");
    echo_line(&b, "po-order", "t", "o o2\n", false, "o1\ne1\no2\n");
    echo_line(&b, "po-order", "t", "e e2\n", true, "o1\ne1\no2\ne2\n");
    ck_assert_int_eq(proc_wait(&b, "po-order", "t"), 0);
    double t1 = (double)time(NULL) + 1;
    char *all = output(&b, "po-order", "t", "");
    ck_assert_str_eq(all, "o1\ne1\no2\ne2\n");
    free(all);
    /* The byte routes read the same records as before. */
    char *out = proc_output(&b, "po-order", "t", "stdout", "");
    ck_assert_str_eq(out, "o1\no2\n");
    free(out);
    out = proc_output(&b, "po-order", "t", "stderr", "?offset=3");
    ck_assert_str_eq(out, "e2\n");
    free(out);
    out = output(&b, "po-order", "t", "?stdout=0");
    ck_assert_str_eq(out, "e1\ne2\n");
    free(out);

    /* Each line's time, in order, within the run: a line was written only
     * once the one before it was read, so each time is later. */
    char *ts = output(&b, "po-order", "t", "?timestamps=1");
    const char *want[] = {"o1", "e1", "o2", "e2"};
    long long times[4];
    char *line = ts;
    for (int i = 0; i < 4; i++) {
        char *nl = strchr(line, '\n');
        ck_assert_msg(nl && nl - line == 33, "line %d of %s", i, ts);
        *nl = '\0';
        times[i] = parse_time(line);
        ck_assert_msg(times[i] > 0, "%s", line);
        ck_assert_str_eq(line + 31, want[i]);
        ck_assert(times[i] >= (long long)(t0 * 1e9) && times[i] <= (long long)(t1 * 1e9));
        if (i > 0)
            ck_assert_msg(times[i] > times[i - 1], "%lld %lld", times[i - 1], times[i]);
        line = nl + 1;
    }
    free(ts);

    /* since: from the third line's time on; until: up to the second's. */
    char q[128];
    snprintf(q, sizeof(q), "?since=%lld.%09lld", times[2] / 1000000000, times[2] % 1000000000);
    out = output(&b, "po-order", "t", q);
    ck_assert_str_eq(out, "o2\ne2\n");
    free(out);
    snprintf(q, sizeof(q), "?until=%lld.%09lld", times[1] / 1000000000, times[1] % 1000000000);
    out = output(&b, "po-order", "t", q);
    ck_assert_str_eq(out, "o1\ne1\n");
    free(out);
    out = output(&b, "po-order", "t", "?tail=3");
    ck_assert_str_eq(out, "e1\no2\ne2\n");
    free(out);
    out = output(&b, "po-order", "t", "?tail=1&stderr=0");
    ck_assert_str_eq(out, "o2\n");
    free(out);
    out = output(&b, "po-order", "t", "?tail=0");
    ck_assert_str_eq(out, "");
    free(out);

    struct hresp r;
    /* Each bad query is 400 naming the parameter and what it takes, in
     * the client's terms (tail counts lines, not bytes). */
    static const struct {
        const char *q, *msg;
    } bad[] = {
        {"?since=yesterday",
         "query \\\"since\\\": yesterday is not unix seconds, such as 1700000000.5"},
        {"?until=1.0000000001",
         "query \\\"until\\\": 1.0000000001 has more than nine digits after the point"},
        {"?until=99999999999999999999",
         "query \\\"until\\\": 99999999999999999999 is out of range"},
        {"?tail=-1", "query \\\"tail\\\": -1 is not a number of lines (or all)"},
        {"?tail=abc", "query \\\"tail\\\": abc is not a number of lines (or all)"},
        {"?stdout=0&stderr=0", "at least one stream is needed"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char path[256];
        snprintf(path, sizeof(path), "/v1/containers/po-order/processes/t/output%s", bad[i].q);
        http_get(&b, path, &r);
        ck_assert_msg(r.status == 400 && strstr(r.body, bad[i].msg), "%s: %ld %s", bad[i].q,
                      r.status, r.body);
        hresp_free(&r);
    }
    http_get(&b, "/v1/containers/po-order/processes/nosuch/output", &r);
    ck_assert_error_reply(&r, 404, "not_found", "nosuch");
    hresp_free(&r);
    ctr_delete(&b, "po-order");
    berthd_finish(&b);
}
END_TEST

START_TEST(follow_streams_lines_until_the_exit)
{
    struct berthd b = {0};
    start(&b, "po-follow", NULL);
    proc_start(&b, "po-follow",
               "{\"id\":\"t\",\"path\":\"sh\",\"args\":[\"-c\",\"echo a; sleep 1; echo b >&2; "
               "sleep 0.3; echo c\"]}");
    double t0 = now_ms();
    struct hresp r;
    struct hreq req = {.method = "GET",
                       .path = "/v1/containers/po-follow/processes/t/output?follow=1&timestamps=1",
                       .timeout_ms = 20000};
    http_do(&b, &req, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(now_ms() - t0 >= 1000, "returned before the process ended");
    ck_assert_int_eq(r.body_len, 3 * 33);
    ck_assert(strncmp(r.body + 31, "a\n", 2) == 0);
    ck_assert(strncmp(r.body + 33 + 31, "b\n", 2) == 0);
    ck_assert(strncmp(r.body + 66 + 31, "c\n", 2) == 0);
    hresp_free(&r);
    ctr_delete(&b, "po-follow");
    berthd_finish(&b);
}
END_TEST

/* The entry format (runtime/outrec.h), written out here on its own. */
static unsigned
crc32(const unsigned char *p, size_t n)
{
    unsigned crc = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

START_TEST(output_that_forges_an_entry_is_given_as_it_was_written)
{
    struct berthd b = {0};
    start(&b, "po-forge", NULL);
    /* A well-formed entry saying stderr holds 5 bytes at 0, written to stdout. */
    unsigned char e[32] = {'B', 'O', 'C', '1', 1};
    e[24] = 5;
    unsigned crc = crc32(e, 28);
    for (int i = 0; i < 4; i++)
        e[28 + i] = (unsigned char)(crc >> (8 * i));
    char esc[32 * 5 + 1] = "";
    for (int i = 0; i < 32; i++)
        snprintf(esc + strlen(esc), 6, "\\\\%03o", e[i]);
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"id\":\"t\",\"path\":\"sh\",\"args\":[\"-c\",\"printf '%s'; sleep 0.2; printf "
             "'%s'; sleep 0.2; echo x >&2\"]}",
             esc, esc);
    proc_start(&b, "po-forge", body);
    ck_assert_int_eq(proc_wait(&b, "po-forge", "t"), 0);
    struct hresp r;
    http_get(&b, "/v1/containers/po-forge/processes/t/output", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(r.body_len, 32 * 2 + 2);
    ck_assert(memcmp(r.body, e, 32) == 0 && memcmp(r.body + 32, e, 32) == 0);
    ck_assert(memcmp(r.body + 64, "x\n", 2) == 0);
    hresp_free(&r);
    char *err = proc_output(&b, "po-forge", "t", "stderr", "");
    ck_assert_str_eq(err, "x\n");
    free(err);
    ctr_delete(&b, "po-forge");
    berthd_finish(&b);
}
END_TEST

START_TEST(the_index_stays_within_the_cap_and_every_byte_is_given)
{
    struct berthd b = {0};
    start(&b, "po-cap", (const char *[]){"--max-output-bytes", "4K", NULL});
    /* A write per byte, each one read on its own (the next process starts
     * after it): an entry per write would be 32 times the output. */
    proc_start(&b, "po-cap",
               "{\"id\":\"t\",\"path\":\"sh\",\"args\":[\"-c\",\"i=0; while [ $i -lt 400 ]; do "
               "dd if=/dev/zero bs=1 count=1 2>/dev/null; usleep 1000; i=$((i+1)); done; echo; "
               "echo end >&2\"]}");
    ck_assert_int_eq(proc_wait(&b, "po-cap", "t"), 0);
    struct hresp r;
    http_get(&b, "/v1/containers/po-cap/processes/t/output", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(r.body_len, 401 + 4);
    for (int i = 0; i < 400; i++)
        ck_assert_msg(r.body[i] == 0, "byte %d: %d", i, r.body[i]);
    ck_assert_str_eq(r.body + 400, "\nend\n");
    hresp_free(&r);
    const char *size = ctr_sh_out("stat -c %%s $(find %s -path '*/procs/t/chunks')", b.root);
    ck_assert_msg(atol(size) > 0 && atol(size) <= 4 * 1024, "chunks: %s bytes", size);
    ctr_delete(&b, "po-cap");
    berthd_finish(&b);
}
END_TEST

static Suite *
output_suite(void)
{
    Suite *s = suite_create("api_process_output");
    TCase *tc = tcase_create("output");
    ctr_add_fixture(tc);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, output_gives_both_streams_in_the_order_written);
    tcase_add_test(tc, follow_streams_lines_until_the_exit);
    tcase_add_test(tc, output_that_forges_an_entry_is_given_as_it_was_written);
    tcase_add_test(tc, the_index_stays_within_the_cap_and_every_byte_is_given);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(output_suite());
}
