/*
 * Processes against a real berthd and runc, in busybox containers built
 * here: stdout, stderr and exit codes; stdin round trips; following live
 * output; late attach after the exit; signals; wait timeouts; the IDs'
 * rules. Every container is deleted by the test, and the harness's
 * safety net removes any a failed test left.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "harness_containers.h"

static void
start(struct berthd *b, const char *handle)
{
    ctr_require_runtime();
    berthd_start(b, NULL);
    ctr_create_raw(b, handle);
}

START_TEST(process_stdout_stderr_and_exit_code)
{
    struct berthd b = {0};
    start(&b, "p-basic");
    proc_start(&b, "p-basic",
               "{\"id\":\"task\",\"path\":\"sh\",\"args\":[\"-c\",\"echo out; echo err >&2; exit "
               "3\"],\"env\":[\"X=1\"]}");
    ck_assert_int_eq(proc_wait(&b, "p-basic", "task"), 3);
    char *out = proc_output(&b, "p-basic", "task", "stdout", "");
    char *err = proc_output(&b, "p-basic", "task", "stderr", "");
    ck_assert_str_eq(out, "out\n");
    ck_assert_str_eq(err, "err\n");
    free(out);
    free(err);
    /* env, dir and a user name from the image's /etc/passwd */
    proc_start(&b, "p-basic",
               "{\"id\":\"env\",\"path\":\"sh\",\"args\":[\"-c\",\"echo $X $(pwd) $(id -u)\"],"
               "\"env\":[\"X=hello\"],\"dir\":\"/tmp\",\"user\":\"nobody\"}");
    ck_assert_int_eq(proc_wait(&b, "p-basic", "env"), 0);
    out = proc_output(&b, "p-basic", "env", "stdout", "");
    ck_assert_str_eq(out, "hello /tmp 65534\n");
    free(out);

    struct hresp r;
    http_get(&b, "/v1/containers/p-basic/processes/task", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "state")), "exited");
    ck_assert_int_eq(json_object_get_int(json_at(r.json, "exit_code")), 3);
    ck_assert_ptr_nonnull(json_at(r.json, "started_at"));
    ck_assert_ptr_nonnull(json_at(r.json, "finished_at"));
    hresp_free(&r);
    http_get(&b, "/v1/containers/p-basic/processes", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "processes")), 2);
    hresp_free(&r);
    ctr_delete(&b, "p-basic");
    berthd_finish(&b);
}
END_TEST

START_TEST(process_ids_and_errors)
{
    struct berthd b = {0};
    start(&b, "p-ids");
    proc_start(&b, "p-ids", "{\"id\":\"task\",\"path\":\"sleep\",\"args\":[\"30\"]}");
    struct hresp r;
    http_post_json(&b, "/v1/containers/p-ids/processes", "{\"id\":\"task\",\"path\":\"true\"}", &r);
    ck_assert_error_reply(&r, 409, "conflict", "task");
    hresp_free(&r);
    http_post_json(&b, "/v1/containers/p-ids/processes", "{\"id\":\".bad\",\"path\":\"true\"}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "id");
    hresp_free(&r);
    http_post_json(&b, "/v1/containers/p-ids/processes", "{\"path\":\"/no/such/program\"}", &r);
    ck_assert_error_reply(&r, 422, "invalid_content", "/no/such/program");
    hresp_free(&r);
    http_post_json(&b, "/v1/containers/p-ids/processes", "{\"path\":\"true\",\"user\":\"nosuch\"}",
                   &r);
    ck_assert_error_reply(&r, 422, "invalid_content", "nosuch");
    hresp_free(&r);
    http_get(&b, "/v1/containers/p-ids/processes/nosuch", &r);
    ck_assert_error_reply(&r, 404, "not_found", "nosuch");
    hresp_free(&r);
    http_get(&b, "/v1/containers/nosuch/processes", &r);
    ck_assert_error_reply(&r, 404, "not_found", "nosuch");
    hresp_free(&r);
    /* A generated ID. */
    http_post_json(&b, "/v1/containers/p-ids/processes", "{\"path\":\"true\"}", &r);
    ck_assert_int_eq(r.status, 201);
    ck_assert(strlen(json_object_get_string(json_at(r.json, "id"))) > 0);
    hresp_free(&r);
    /* wait with a timeout */
    double t0 = now_ms();
    http_get(&b, "/v1/containers/p-ids/processes/task/wait?timeout=0.3", &r);
    ck_assert_error_reply(&r, 408, "timeout", NULL);
    ck_assert(now_ms() - t0 >= 250);
    hresp_free(&r);
    ctr_delete(&b, "p-ids");
    berthd_finish(&b);
}
END_TEST

/* A start that fails keeps nothing: 422, and the id is free again at once. */
START_TEST(a_failed_start_leaves_no_record)
{
    struct berthd b = {0};
    start(&b, "p-fail");
    const char *bodies[] = {
        "{\"id\":\"again\",\"path\":\"/no/such/program\"}",
        "{\"id\":\"again\",\"path\":\"true\",\"dir\":\"/no/such/dir\"}",
        "{\"id\":\"again\",\"path\":\"true\",\"user\":\"nosuch\"}",
        NULL,
    };
    struct hresp r;
    for (const char *const *body = bodies; *body; body++) {
        http_post_json(&b, "/v1/containers/p-fail/processes", *body, &r);
        ck_assert_msg(r.status == 422, "%s: %ld %s", *body, r.status, r.body);
        hresp_free(&r);
        http_get(&b, "/v1/containers/p-fail/processes/again", &r);
        ck_assert_msg(r.status == 404, "%s left a record: %ld %s", *body, r.status, r.body);
        hresp_free(&r);
    }
    http_get(&b, "/v1/containers/p-fail/processes", &r);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "processes")), 0);
    hresp_free(&r);
    proc_start(&b, "p-fail", "{\"id\":\"again\",\"path\":\"true\"}");
    ck_assert_int_eq(proc_wait(&b, "p-fail", "again"), 0);
    ctr_delete(&b, "p-fail");
    berthd_finish(&b);
}
END_TEST

/* DELETE of a process: 409 while it runs, then its record and output go. */
START_TEST(delete_removes_an_exited_process_and_lists_are_oldest_first)
{
    struct berthd b = {0};
    start(&b, "p-del");
    /* Ids out of alphabetical order: the list keeps the order of starts. */
    proc_start(&b, "p-del", "{\"id\":\"zz\",\"path\":\"sh\",\"args\":[\"-c\",\"echo z\"]}");
    proc_start(&b, "p-del", "{\"id\":\"aa\",\"path\":\"sleep\",\"args\":[\"30\"]}");
    proc_start(&b, "p-del", "{\"id\":\"mm\",\"path\":\"true\"}");
    struct hresp r;
    http_get(&b, "/v1/containers/p-del/processes", &r);
    json_object *list = json_at(r.json, "processes");
    ck_assert_int_eq(json_object_array_length(list), 3);
    const char *want[] = {"zz", "aa", "mm"};
    for (size_t i = 0; i < 3; i++)
        ck_assert_str_eq(json_object_get_string(json_at(json_object_array_get_idx(list, i), "id")),
                         want[i]);
    hresp_free(&r);
    ck_assert_int_eq(proc_wait(&b, "p-del", "zz"), 0);
    http_do(&b, &(struct hreq){.method = "DELETE", .path = "/v1/containers/p-del/processes/aa"},
            &r);
    ck_assert_error_reply(&r, 409, "conflict", "aa");
    hresp_free(&r);
    http_do(&b, &(struct hreq){.method = "DELETE", .path = "/v1/containers/p-del/processes/zz"},
            &r);
    ck_assert_msg(r.status == 204, "%ld %s", r.status, r.body);
    hresp_free(&r);
    http_get(&b, "/v1/containers/p-del/processes/zz", &r);
    ck_assert_int_eq(r.status, 404);
    hresp_free(&r);
    http_get(&b, "/v1/containers/p-del/processes/zz/stdout", &r);
    ck_assert_int_eq(r.status, 404);
    hresp_free(&r);
    http_do(&b, &(struct hreq){.method = "DELETE", .path = "/v1/containers/p-del/processes/zz"},
            &r);
    ck_assert_int_eq(r.status, 404);
    hresp_free(&r);
    /* The id is free again, and the record is gone from disk too. */
    proc_start(&b, "p-del", "{\"id\":\"zz\",\"path\":\"sh\",\"args\":[\"-c\",\"echo again\"]}");
    ck_assert_int_eq(proc_wait(&b, "p-del", "zz"), 0);
    char *out = proc_output(&b, "p-del", "zz", "stdout", "");
    ck_assert_str_eq(out, "again\n");
    free(out);
    ctr_delete(&b, "p-del");
    berthd_finish(&b);
}
END_TEST

/* Query arguments that are not what they say are 400, never clamped or waited on. */
START_TEST(bad_timeouts_and_offsets_are_400)
{
    struct berthd b = {0};
    start(&b, "p-query");
    proc_start(&b, "p-query", "{\"id\":\"s\",\"path\":\"sleep\",\"args\":[\"30\"]}");
    const char *queries[] = {
        "wait?timeout=nan",
        "wait?timeout=inf",
        "wait?timeout=-1",
        "wait?timeout=1x",
        "wait?timeout=1e9",
        "stdout?offset=99999999999999999999",
        "stdout?offset=-1",
        "stdout?offset=abc",
        "stderr?offset=18446744073709551616",
        NULL,
    };
    for (const char *const *q = queries; *q; q++) {
        char path[256];
        snprintf(path, sizeof(path), "/v1/containers/p-query/processes/s/%s", *q);
        struct hresp r;
        double t0 = now_ms();
        http_do(&b, &(struct hreq){.method = "GET", .path = path, .timeout_ms = 5000}, &r);
        ck_assert_msg(r.status == 400, "%s: %ld %s", *q, r.status, r.body);
        ck_assert_msg(now_ms() - t0 < 2000, "%s took %.0f ms", *q, now_ms() - t0);
        hresp_free(&r);
    }
    ctr_delete(&b, "p-query");
    berthd_finish(&b);
}
END_TEST

START_TEST(process_stdin_round_trip)
{
    struct berthd b = {0};
    start(&b, "p-stdin");
    proc_start(&b, "p-stdin", "{\"id\":\"cat\",\"path\":\"cat\",\"stdin\":true}");
    size_t len = 3 * 1024 * 1024 + 17;
    char *data = malloc(len);
    for (size_t i = 0; i < len; i++)
        data[i] = (char)(i * 7 + i / 4096);
    struct hresp r;
    http_do(&b,
            &(struct hreq){.method = "PUT",
                           .path = "/v1/containers/p-stdin/processes/cat/stdin?close=0",
                           .body = data,
                           .body_len = len / 2,
                           .chunked = true,
                           .timeout_ms = 30000},
            &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    ck_assert_int_eq(json_object_get_int64(json_at(r.json, "bytes_written")), (int64_t)(len / 2));
    hresp_free(&r);
    http_do(&b,
            &(struct hreq){.method = "PUT",
                           .path = "/v1/containers/p-stdin/processes/cat/stdin",
                           .body = data + len / 2,
                           .body_len = len - len / 2,
                           .timeout_ms = 30000},
            &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(proc_wait(&b, "p-stdin", "cat"), 0);
    char path[128] = "/v1/containers/p-stdin/processes/cat/stdout";
    http_do(&b, &(struct hreq){.method = "GET", .path = path, .timeout_ms = 30000}, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.body_len, len);
    ck_assert(memcmp(r.body, data, len) == 0);
    hresp_free(&r);
    /* A process without stdin, and one that exited, refuse it. */
    http_do(&b,
            &(struct hreq){
                .method = "PUT", .path = "/v1/containers/p-stdin/processes/cat/stdin", .body = "x"},
            &r);
    ck_assert_error_reply(&r, 409, "conflict", NULL);
    hresp_free(&r);
    free(data);
    ctr_delete(&b, "p-stdin");
    berthd_finish(&b);
}
END_TEST

START_TEST(process_follow_live_and_late_attach)
{
    struct berthd b = {0};
    start(&b, "p-follow");
    proc_start(&b, "p-follow",
               "{\"id\":\"task\",\"path\":\"sh\",\"args\":[\"-c\",\"for i in 1 2 3 4 5; do echo "
               "line$i; sleep 0.2; done; echo bye >&2\"]}");
    /* Two followers at once, attached while it runs. */
    struct bg_req f1, f2;
    struct hreq fr = {.method = "GET",
                      .path = "/v1/containers/p-follow/processes/task/stdout?follow=1",
                      .timeout_ms = 20000};
    bg_start(&f1, &b, &fr);
    sleep_ms(300);
    bg_start(&f2, &b, &fr);
    bg_join(&f1);
    bg_join(&f2);
    const char *want = "line1\nline2\nline3\nline4\nline5\n";
    ck_assert_int_eq(f1.resp.status, 200);
    ck_assert_str_eq(f1.resp.body, want);
    ck_assert_str_eq(f2.resp.body, want);
    ck_assert_msg(f1.resp.total_s >= 0.6, "the follow ended early (%.3f s)", f1.resp.total_s);
    hresp_free(&f1.resp);
    hresp_free(&f2.resp);
    ck_assert_int_eq(proc_wait(&b, "p-follow", "task"), 0);
    /* Late attach: the same bytes, from an offset, follow ends at once. */
    char *out = proc_output(&b, "p-follow", "task", "stdout", "?follow=1");
    ck_assert_str_eq(out, want);
    free(out);
    out = proc_output(&b, "p-follow", "task", "stdout", "?offset=6");
    ck_assert_str_eq(out, want + 6);
    free(out);
    out = proc_output(&b, "p-follow", "task", "stderr", "");
    ck_assert_str_eq(out, "bye\n");
    free(out);
    ctr_delete(&b, "p-follow");
    berthd_finish(&b);
}
END_TEST

START_TEST(process_signals_give_128_plus_n)
{
    struct berthd b = {0};
    start(&b, "p-sig");
    proc_start(&b, "p-sig", "{\"id\":\"k\",\"path\":\"sleep\",\"args\":[\"60\"]}");
    proc_start(&b, "p-sig", "{\"id\":\"t\",\"path\":\"sleep\",\"args\":[\"60\"]}");
    struct hresp r;
    http_post_json(&b, "/v1/containers/p-sig/processes/k/signal", "{\"signal\":\"KILL\"}", &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    hresp_free(&r);
    http_post_json(&b, "/v1/containers/p-sig/processes/t/signal", "{\"signal\":15}", &r);
    ck_assert_int_eq(r.status, 200);
    hresp_free(&r);
    ck_assert_int_eq(proc_wait(&b, "p-sig", "k"), 137);
    ck_assert_int_eq(proc_wait(&b, "p-sig", "t"), 143);
    http_post_json(&b, "/v1/containers/p-sig/processes/t/signal", "{\"signal\":\"TERM\"}", &r);
    ck_assert_error_reply(&r, 409, "conflict", NULL);
    hresp_free(&r);
    http_post_json(&b, "/v1/containers/p-sig/processes/t/signal", "{\"signal\":\"BOGUS\"}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "signal");
    hresp_free(&r);
    ctr_delete(&b, "p-sig");
    berthd_finish(&b);
}
END_TEST

START_TEST(shutdown_with_a_live_follower_exits_cleanly)
{
    struct berthd b = {0};
    ctr_require_runtime();
    berthd_start(&b, NULL);
    ctr_create_raw(&b, "p-follow-stop");
    proc_start(&b, "p-follow-stop",
               "{\"id\": \"chatty\", \"path\": \"sh\", \"args\": [\"-c\", "
               "\"while true; do echo line; usleep 2000; done\"]}");
    /* A client follows the live output while the daemon is told to stop:
     * the stream must end and the daemon exit 0, not abort with a
     * suspended connection. */
    struct bg_req bg;
    bg_start(&bg, &b,
             &(struct hreq){.method = "GET",
                            .path = "/v1/containers/p-follow-stop/processes/chatty/stdout?follow=1",
                            .timeout_ms = 20000});
    sleep_ms(700);
    int st = berthd_term(&b, 15000);
    bg_join(&bg);
    ck_assert_msg(st == 0, "berthd exit status %d after SIGTERM with a follower", st);
    ck_assert_msg(bg.resp.body_len > 0, "the follower got nothing");
    hresp_free(&bg.resp);
    /* The container outlived the daemon: start one on the same root to
     * delete it. */
    struct berthd b2 = {0};
    char root[PATH_MAX];
    snprintf(root, sizeof(root), "%s", b.root);
    berthd_start(&b2, &(struct berthd_opts){.root = root});
    ctr_delete(&b2, "p-follow-stop");
    berthd_finish(&b2);
    berthd_cleanup(&b);
}
END_TEST

START_TEST(a_container_whose_init_dies_is_noticed_at_once)
{
    struct berthd b = {0};
    ctr_require_runtime();
    berthd_start(&b, NULL);
    ctr_create_raw(&b, "p-dies");
    proc_start(&b, "p-dies", "{\"id\": \"long\", \"path\": \"sleep\", \"args\": [\"600\"]}");
    /* Kill the container's init from the host, as an OOM kill of the
     * whole container or an admin would. */
    const char *pid = ctr_sh_out("runc --root '%s/runtime/runc' state p-dies | "
                                 "sed -n 's/.*\"pid\": *\\([0-9]*\\).*/\\1/p'",
                                 b.root);
    ck_assert_msg(atoi(pid) > 1, "init pid: '%s'", pid);
    ck_assert_int_eq(kill(atoi(pid), SIGKILL), 0);
    /* A waiter learns it without waiting out its timeout, and without a
     * GET of the container first. */
    double t0 = now_ms();
    struct hresp r;
    http_get(&b, "/v1/containers/p-dies/processes/long/wait?timeout=20", &r);
    double ms = now_ms() - t0;
    ck_assert_msg(r.status == 409, "wait: %ld %s", r.status, r.body);
    ck_assert_msg(ms < 5000, "the wait took %.0f ms", ms);
    hresp_free(&r);
    http_get(&b, "/v1/containers/p-dies", &r);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "state")), "stopped");
    hresp_free(&r);
    ctr_delete(&b, "p-dies");
    berthd_finish(&b);
}
END_TEST

static Suite *
processes_suite(void)
{
    Suite *s = suite_create("api_processes");
    TCase *tc = tcase_create("processes");
    ctr_add_fixture(tc);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_container_whose_init_dies_is_noticed_at_once);
    tcase_add_test(tc, shutdown_with_a_live_follower_exits_cleanly);
    tcase_add_test(tc, process_stdout_stderr_and_exit_code);
    tcase_add_test(tc, process_ids_and_errors);
    tcase_add_test(tc, a_failed_start_leaves_no_record);
    tcase_add_test(tc, delete_removes_an_exited_process_and_lists_are_oldest_first);
    tcase_add_test(tc, bad_timeouts_and_offsets_are_400);
    tcase_add_test(tc, process_stdin_round_trip);
    tcase_add_test(tc, process_follow_live_and_late_attach);
    tcase_add_test(tc, process_signals_give_128_plus_n);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(processes_suite());
}
