/*
 * Fault injection over a container create and a container delete, with
 * real runc, on berthd-fault (see tests/fault/fault_suite.h). The
 * container runs the busybox image from tests/fixtures with a volume
 * mounted. Every fsync, rename, write, mount, unmount and SQLite step
 * berthd itself makes is failed in turn (runc's own steps are another
 * program's and are not reached). After a failed create nothing of the
 * container is left (no record, mount, cgroup, runc state or directory;
 * the image and volume have no user); after a failed delete the container
 * is still listed and whole enough to be deleted again; either way the
 * operation works when tried again, and a created container runs a
 * process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fault/fault_suite.h"
#include "tests/fixtures/imgfix.h"

#define CTR "fc"
#define CREATE_BODY                                                                                \
    "{\"handle\":\"" CTR "\",\"image\":\"base:1\","                                                \
    "\"mounts\":[{\"volume\":\"cv\",\"target\":\"/mnt/v\"}]"
/* A writable layer of 64 MiB: a project quota, or (ext4 without prjquota,
 * tmpfs) a sparse ext4 image on a loop device, with its own mount. */
static const char *const bodies[] = {
    CREATE_BODY "}",
    CREATE_BODY ",\"limits\":{\"disk_bytes\":67108864}}",
};

static long
ctr_status(struct berthd *b)
{
    struct hresp r;
    http_get(b, "/v1/containers/" CTR, &r);
    long st = r.status;
    hresp_free(&r);
    return st;
}

/* The number of containers GET path says use it ("containers" of an image or volume). */
static int64_t
users_of(struct berthd *b, const char *path)
{
    struct hresp r;
    http_get(b, path, &r);
    ck_assert_msg(r.status == 200, "GET %s: %ld %s", path, r.status, r.body);
    json_object *n = json_at(r.json, "containers");
    int64_t users = n ? json_object_get_int64(n) : -1;
    hresp_free(&r);
    return users;
}

static void
no_users(struct berthd *b, const char *what)
{
    fault_check(b, what, users_of(b, "/v1/images/base:1") == 0, "image base still has users");
    fault_check(b, what, users_of(b, "/v1/volumes/cv") == 0, "volume cv still has users");
}

static void
create_run(struct berthd *b, void *ctx, struct hresp *r)
{
    ctr_create(b, ctx, r);
}

static void
ctr_gone(struct berthd *b, void *ctx, const char *what)
{
    fault_check(b, what, ctr_status(b) == 404, "container %s is listed (GET %ld)", CTR,
                ctr_status(b));
    no_users(b, what);
}

/* Created and usable: listed running, with its users, and a process runs in it. */
static void
ctr_works(struct berthd *b, void *ctx, const char *what)
{
    struct hresp r;
    http_get(b, "/v1/containers/" CTR, &r);
    json_object *st = json_at(r.json, "state");
    fault_check(b, what,
                r.status == 200 && st && strcmp(json_object_get_string(st), "running") == 0,
                "container %s: %ld %.300s", CTR, r.status, r.body);
    hresp_free(&r);
    fault_check(b, what, users_of(b, "/v1/images/base:1") == 1, "image base has no user");
    fault_check(b, what, users_of(b, "/v1/volumes/cv") == 1, "volume cv has no user");
    static unsigned seq;
    char body[256];
    snprintf(body, sizeof(body),
             "{\"id\":\"p%u\",\"path\":\"sh\",\"args\":[\"-c\","
             "\"echo ok > /mnt/v/probe && cat /mnt/v/probe\"]}",
             ++seq);
    http_post_json(b, "/v1/containers/" CTR "/processes", body, &r);
    long st_code = r.status;
    fault_check(b, what, st_code == 201, "a process in the container: %ld %.300s", r.status,
                r.body);
    hresp_free(&r);
    if (st_code != 201)
        return;
    char id[32];
    snprintf(id, sizeof(id), "p%u", seq);
    int code = proc_wait(b, CTR, id);
    char *out = proc_output(b, CTR, id, "stdout", "");
    fault_check(b, what, code == 0 && strcmp(out, "ok\n") == 0,
                "a process in the container: exit %d, output %s", code, out);
    free(out);
}

static void
ctr_delete_checked(struct berthd *b, void *ctx)
{
    ctr_delete(b, CTR);
}

static void
ctr_setup_none(struct berthd *b, void *ctx)
{
}

static void
ctr_setup_created(struct berthd *b, void *ctx)
{
    struct hresp r;
    ctr_create(b, ctx, &r);
    ck_assert_msg(r.status == 201, "create %s: %ld %s", CTR, r.status, r.body);
    hresp_free(&r);
}

static void
delete_run(struct berthd *b, void *ctx, struct hresp *r)
{
    fault_http(b, "DELETE", "/v1/containers/" CTR, NULL, r);
}

static void
delete_failed(struct berthd *b, void *ctx, const char *what)
{
    fault_check(b, what, ctr_status(b) == 200,
                "a failed delete left %s unlisted (GET %ld): the retry cannot succeed", CTR,
                ctr_status(b));
}

static void
start(struct berthd *b)
{
    ctr_require_runtime();
    fault_berthd_start(b, NULL);
    struct hresp r;
    fx_import_layout(b, "?name=base:1", fx_path("base"), NULL, &r);
    ck_assert_msg(r.status == 201, "import base: %ld %s", r.status, r.body);
    hresp_free(&r);
    fault_http(b, "POST", "/v1/volumes", "{\"handle\":\"cv\"}", &r);
    ck_assert_msg(r.status == 201, "create volume: %ld %s", r.status, r.body);
    hresp_free(&r);
    ctr_track(b, CTR);
}

START_TEST(every_failed_step_of_a_container_create_leaves_nothing_and_the_retry_works)
{
    struct berthd b = {0};
    start(&b);
    struct fault_op op = {.name = _i ? "container-create-disk" : "container-create",
                          .ctx = (void *)bodies[_i],
                          .setup = ctr_setup_none,
                          .run = create_run,
                          .ok_status = {201},
                          .check_failed = ctr_gone,
                          .check_done = ctr_works,
                          .teardown = ctr_delete_checked};
    ck_assert(fault_walk(&b, &op) > 0 || fault_walk_filtered());
    berthd_finish(&b);
}
END_TEST

START_TEST(every_failed_step_of_a_container_delete_keeps_it_deletable)
{
    struct berthd b = {0};
    start(&b);
    struct fault_op op = {.name = _i ? "container-delete-disk" : "container-delete",
                          .ctx = (void *)bodies[_i],
                          .setup = ctr_setup_created,
                          .run = delete_run,
                          .ok_status = {204},
                          .check_failed = delete_failed,
                          .check_done = ctr_gone};
    ck_assert(fault_walk(&b, &op) > 0 || fault_walk_filtered());
    berthd_finish(&b);
}
END_TEST

static Suite *
fault_containers_suite(void)
{
    Suite *s = suite_create("api_fault_containers");
    TCase *tc = tcase_create("walk");
    tcase_set_timeout(tc, fault_walk_timeout(600));
    ctr_add_fixture(tc);
    /* _i 0: a plain writable layer; 1: one bounded by limits.disk_bytes. */
    tcase_add_loop_test(
        tc, every_failed_step_of_a_container_create_leaves_nothing_and_the_retry_works, 0, 2);
    tcase_add_loop_test(tc, every_failed_step_of_a_container_delete_keeps_it_deletable, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    fault_suite_init();
    if (!fx_build(false)) {
        fx_cleanup();
        return 1;
    }
    int rc = harness_run_suite(fault_containers_suite());
    fx_cleanup();
    return rc;
}
