/*
 * What a container can take from the host's disk: the output a process
 * writes (--max-output-bytes: past the cap the process is killed, the
 * files keep exactly the first bytes, the record says so) and what it
 * writes into its own filesystem (limits.disk_bytes: a sized writable
 * layer, full at the limit, gone with the container). Real containers
 * writing with dd and seq, against a real berthd and runc.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "harness_containers.h"

#define CAP (64 * 1024)

static void
start(struct berthd *b, const char *const *extra)
{
    ctr_require_runtime();
    struct berthd_opts o = {0};
    for (size_t i = 0; extra && extra[i] && i < HARNESS_MAX_ARGS - 1; i++)
        o.args[i] = extra[i];
    berthd_start(b, &o);
}

static json_object *
proc_record(const struct berthd *b, const char *handle, const char *id, struct hresp *r)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/containers/%s/processes/%s", handle, id);
    http_get(b, path, r);
    ck_assert_msg(r->status == 200, "GET %s: %ld %s", path, r->status, r->body);
    return r->json;
}

START_TEST(output_past_the_cap_is_cut_and_the_process_stopped)
{
    struct berthd b = {0};
    start(&b, (const char *[]){"--max-output-bytes", "64K", NULL});
    ctr_create_raw(&b, "chatty");
    /* About three times the cap, on stdout, then a marker that must never come. */
    int code = proc_run_sh(&b, "chatty", "seq", "seq 1 36000; echo never-reached", NULL);
    ck_assert_int_eq(code, 137);
    struct hresp r;
    json_object *rec = proc_record(&b, "chatty", "seq", &r);
    ck_assert_msg(json_object_get_boolean(json_at(rec, "output_truncated")), "%s", r.body);
    ck_assert_int_eq(json_object_get_int(json_at(rec, "signal")), 9);
    hresp_free(&r);
    /* A reader gets exactly the first CAP bytes of what seq wrote. */
    char *out = proc_output(&b, "chatty", "seq", "stdout", "");
    ck_assert_int_eq(strlen(out), CAP);
    FILE *p = popen("seq 1 36000 | head -c 65536", "r");
    char *want = calloc(1, CAP + 1);
    ck_assert_int_eq(fread(want, 1, CAP, p), CAP);
    pclose(p);
    ck_assert_msg(memcmp(out, want, CAP) == 0, "the kept output is not the first %d bytes", CAP);
    ck_assert_ptr_null(strstr(out, "never-reached"));
    free(want);
    free(out);
    /* An offset is one in the whole output. */
    char *tail = proc_output(&b, "chatty", "seq", "stdout", "?offset=65530");
    ck_assert_int_eq(strlen(tail), 6);
    free(tail);
    /* On the host, the files are no larger than the cap. */
    char path[PATH_MAX + 128];
    snprintf(path, sizeof(path), "%s/containers/chatty/state/procs/seq/stdout", b.root);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_le(st.st_size, CAP);
    /* Under the cap, stdout and stderr together, nothing is cut. */
    char *small = NULL;
    code = proc_run_sh(&b, "chatty", "small", "seq 1 4000; seq 1 4000 >&2", &small);
    ck_assert_int_eq(code, 0);
    ck_assert_int_eq(strlen(small), 18893);
    free(small);
    rec = proc_record(&b, "chatty", "small", &r);
    ck_assert(!json_object_get_boolean(json_at(rec, "output_truncated")));
    hresp_free(&r);
    ctr_delete(&b, "chatty");
    berthd_finish(&b);
}
END_TEST

START_TEST(output_cap_counts_stdout_and_stderr_together)
{
    struct berthd b = {0};
    start(&b, (const char *[]){"--max-output-bytes", "64K", NULL});
    ctr_create_raw(&b, "both");
    /* 40 kB to each: neither alone reaches the cap, both together do. */
    int code = proc_run_sh(&b, "both", "two",
                           "head -c 40000 /dev/zero; head -c 40000 /dev/zero >&2; sleep 5", NULL);
    ck_assert_int_eq(code, 137);
    struct hresp r;
    json_object *rec = proc_record(&b, "both", "two", &r);
    ck_assert(json_object_get_boolean(json_at(rec, "output_truncated")));
    hresp_free(&r);
    char path[PATH_MAX + 128];
    struct stat so, se;
    snprintf(path, sizeof(path), "%s/containers/both/state/procs/two/stdout", b.root);
    ck_assert_int_eq(stat(path, &so), 0);
    snprintf(path, sizeof(path), "%s/containers/both/state/procs/two/stderr", b.root);
    ck_assert_int_eq(stat(path, &se), 0);
    ck_assert_int_eq(so.st_size, 40000);
    ck_assert_int_eq(se.st_size, CAP - 40000);
    ctr_delete(&b, "both");
    berthd_finish(&b);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("containers_limits");
    TCase *out = tcase_create("output");
    tcase_set_timeout(out, 120);
    ctr_add_fixture(out);
    tcase_add_test(out, output_past_the_cap_is_cut_and_the_process_stopped);
    tcase_add_test(out, output_cap_counts_stdout_and_stderr_together);
    suite_add_tcase(s, out);
    return s;
}

int
main(void)
{
    return harness_run_suite(suite());
}
