/*
 * Containers against a real berthd and runc, on a busybox image built
 * here with umoci (or a raw busybox directory): validation, the image's
 * /etc, security defaults, memory and pids limits, what a delete and a
 * failed create leave behind (nothing), eight containers at once each
 * running a process "task", property filters, a missing runtime, a
 * kill -9 of the daemon while a process runs, and the cgroup parent a
 * stopped daemon leaves (none, unless a container still runs in it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "harness_containers.h"

static void
start_with_image(struct berthd *b)
{
    ctr_require_runtime();
    berthd_start(b, NULL);
    ctr_import_busybox(b, "busybox");
}

/* Nothing of handle is left: no mount, no directory, no runtime state, no cgroup. */
static void
assert_nothing_left(const struct berthd *b, const char *handle)
{
    ck_assert_msg(ctr_sh("grep -q ' %s/' /proc/self/mountinfo", b->root) != 0,
                  "a mount under %s is left", b->root);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/containers/%s", b->root, handle);
    ck_assert_msg(access(path, F_OK) != 0, "%s is left", path);
    const char *ids =
        ctr_sh_out("runc --root '%s/runtime/runc' list -q 2>/dev/null | tr '\\n' ' '", b->root);
    ck_assert_msg(strstr(ids, handle) == NULL, "runc still lists %s", handle);
    const char *cg = ctr_sh_out("find /sys/fs/cgroup -maxdepth 8 -type d -name '%s' 2>/dev/null | "
                                "head -1",
                                handle);
    ck_assert_msg(cg[0] == '\0', "cgroup %s is left", cg);
    /* The directory, renamed at the delete, goes in a job after the answer. */
    ck_assert_msg(wait_container_trash_gone(b, 30000), "a renamed directory is left: %s",
                  ctr_sh_out("ls -a %s/containers | tr '\\n' ' '", b->root));
}

START_TEST(container_create_validates_its_request)
{
    struct berthd b = {0};
    start_with_image(&b);
    struct hresp r;
    ctr_create(&b, "{\"handle\":\".dot\",\"image\":\"busybox\"}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "handle");
    hresp_free(&r);
    char long_handle[160];
    memset(long_handle, 'a', 129);
    long_handle[129] = '\0';
    char body[512];
    snprintf(body, sizeof(body), "{\"handle\":\"%s\",\"image\":\"busybox\"}", long_handle);
    ctr_create(&b, body, &r);
    ck_assert_error_reply(&r, 400, "bad_request", "handle");
    hresp_free(&r);
    ctr_create(&b, "{\"image\":\"busybox\",\"rootfs\":\"raw:///tmp\"}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "rootfs");
    hresp_free(&r);
    ctr_create(&b, "{\"image\":\"busybox\",\"limits\":{\"memory_bytes\":100}}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "limits.memory_bytes");
    hresp_free(&r);
    ctr_create(&b, "{\"image\":\"busybox\",\"limits\":{\"cpu_shares\":1}}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "limits.cpu_shares");
    hresp_free(&r);
    ctr_create(&b, "{\"image\":\"busybox\",\"limits\":{\"pids\":\"x\"}}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "limits.pids");
    hresp_free(&r);
    ctr_create(&b, "{\"image\":\"busybox\",\"isolation\":\"hyperv\"}", &r);
    ck_assert_error_reply(&r, 422, "invalid_content", "process");
    hresp_free(&r);
    ctr_create(&b, "{\"image\":\"nosuchimage\"}", &r);
    ck_assert_error_reply(&r, 404, "not_found", "nosuchimage");
    hresp_free(&r);
    ctr_create(&b, "{\"image\":\"busybox\",\"env\":[\"NOEQUALS\"]}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "env[0]");
    hresp_free(&r);
    ctr_create(&b, "{\"image\":\"busybox\",\"surprise\":1}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "surprise");
    hresp_free(&r);

    /* A generated handle; then a taken one. */
    ctr_create(&b, "{\"image\":\"busybox\",\"isolation\":\"process\"}", &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    char handle[160];
    snprintf(handle, sizeof(handle), "%s", json_object_get_string(json_at(r.json, "handle")));
    ck_assert(strlen(handle) > 0);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "state")), "running");
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "isolation")), "process");
    hresp_free(&r);
    snprintf(body, sizeof(body), "{\"handle\":\"%s\",\"image\":\"busybox\"}", handle);
    ctr_create(&b, body, &r);
    ck_assert_error_reply(&r, 409, "conflict", handle);
    hresp_free(&r);
    ctr_delete(&b, handle);
    berthd_finish(&b);
}
END_TEST

START_TEST(container_sees_the_images_etc_and_holds_the_image)
{
    struct berthd b = {0};
    start_with_image(&b);
    struct hresp r;
    ctr_create(&b,
               "{\"handle\":\"c-etc\",\"image\":\"busybox\",\"env\":[\"GREETING=hi\"],"
               "\"working_dir\":\"/tmp\",\"limits\":{\"cpu_shares\":512,\"cpu_quota_pct\":50}}",
               &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "image")), "busybox");
    ck_assert_int_eq(json_object_get_int(json_at(r.json, "limits.cpu_shares")), 512);
    hresp_free(&r);
    char *out = NULL;
    ck_assert_int_eq(proc_run_sh(&b, "c-etc", "task",
                                 "cat /etc/berth-marker; echo $GREETING $(pwd); "
                                 "[ -e /etc/debian_version ] && echo host-etc; "
                                 "touch /etc/written && echo ok",
                                 &out),
                     0);
    ck_assert_str_eq(out, "image-etc\nhi /tmp\nok\n");
    free(out);
    /* The writable layer is the container's own: the image's snapshot is untouched. */
    ck_assert(ctr_sh("find '%s/snapshots' -name written | grep -q .", b.root) != 0);

    /* The image is in use: deleting it is refused until the container goes. */
    http_do(&b, &(struct hreq){.method = "DELETE", .path = "/v1/images/busybox"}, &r);
    ck_assert_error_reply(&r, 409, "conflict", NULL);
    hresp_free(&r);
    http_get(&b, "/v1/containers/c-etc", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(json_object_get_int64(json_at(r.json, "usage.memory_bytes")) > 0, "%s", r.body);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "processes")), 1);
    hresp_free(&r);
    ctr_delete(&b, "c-etc");
    http_do(&b, &(struct hreq){.method = "DELETE", .path = "/v1/images/busybox"}, &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(container_has_the_security_defaults)
{
    struct berthd b = {0};
    ctr_require_runtime();
    berthd_start(&b, NULL);
    ctr_create_raw(&b, "c-sec");
    char *out = NULL;
    /* A network namespace of its own: only lo, and berthd's API on the
     * host's loopback is out of reach (it would give a container root on
     * the host). */
    char script[512];
    snprintf(script, sizeof(script),
             "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ','; echo; "
             "wget -q -T 2 -O- http://127.0.0.1:%u/v1/health >/dev/null 2>&1 && echo api-reached; "
             "true",
             b.port);
    ck_assert_int_eq(proc_run_sh(&b, "c-sec", "net", script, &out), 0);
    ck_assert_msg(strncmp(out, "lo,\n", 4) == 0, "interfaces inside: %s", out);
    ck_assert_msg(strstr(out, "api-reached") == NULL, "the API is reachable from inside: %s", out);
    free(out);
    out = NULL;
    ck_assert_int_eq(
        proc_run_sh(&b, "c-sec", "task",
                    "echo x > /proc/sys/kernel/hostname 2>/dev/null && echo procsys-writable; "
                    "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\\t' ' '; "
                    "hostname; ls /dev | tr '\\n' ' '; echo; echo $$",
                    &out),
        0);
    ck_assert_msg(strstr(out, "procsys-writable") == NULL, "%s", out);
    ck_assert_msg(strstr(out, "NoNewPrivs: 1"), "%s", out);
    ck_assert_msg(strstr(out, "Seccomp: 2"), "%s", out);
    const char *cap = strstr(out, "CapEff: ");
    ck_assert_ptr_nonnull(cap);
    unsigned long long caps = strtoull(cap + 8, NULL, 16);
    ck_assert_msg(!(caps & (1ULL << 21)), "CAP_SYS_ADMIN is effective: %s", out);
    ck_assert_msg(!(caps & (1ULL << 25)), "CAP_SYS_TIME is effective: %s", out);
    ck_assert_msg(strstr(out, "c-sec\n"), "hostname is not the handle: %s", out);
    ck_assert_msg(strstr(out, "sda") == NULL, "/dev is not minimal: %s", out);
    free(out);
    ctr_delete(&b, "c-sec");
    berthd_finish(&b);
}
END_TEST

START_TEST(container_memory_and_pids_limits_hold)
{
    struct berthd b = {0};
    ctr_require_runtime();
    berthd_start(&b, NULL);
    char body[PATH_MAX + 256];
    snprintf(body, sizeof(body),
             "{\"handle\":\"c-lim\",\"rootfs\":\"%s\",\"limits\":{\"memory_bytes\":67108864,"
             "\"pids\":16}}",
             ctr_busybox_raw());
    struct hresp r;
    ctr_create(&b, body, &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    hresp_free(&r);
    /* dd with a 200 MiB buffer under 64 MiB is OOM-killed: 137. */
    proc_start(&b, "c-lim",
               "{\"id\":\"dd\",\"path\":\"dd\",\"args\":[\"if=/dev/zero\",\"of=/dev/null\","
               "\"bs=200M\",\"count=1\"]}");
    ck_assert_int_eq(proc_wait(&b, "c-lim", "dd"), 137);
    /* 40 sleeps under a limit of 16 processes: forks fail. */
    char *out = NULL;
    int ec = proc_run_sh(&b, "c-lim", "forks",
                         "n=0; for i in $(seq 40); do sleep 3 & n=$((n+1)); done 2>/dev/null; "
                         "echo started; kill $(jobs -p) 2>/dev/null; true",
                         &out);
    free(out);
    char *err = proc_output(&b, "c-lim", "forks", "stderr", "");
    ck_assert_msg(strstr(err, "fork") || ec != 0, "no fork failed under pids 16: %s", err);
    free(err);
    ctr_delete(&b, "c-lim");
    berthd_finish(&b);
}
END_TEST

START_TEST(container_delete_leaves_nothing_behind)
{
    struct berthd b = {0};
    start_with_image(&b);
    char handle[64], body[256], path[128];
    snprintf(handle, sizeof(handle), "c-del-%d", (int)getpid());
    snprintf(body, sizeof(body),
             "{\"handle\":\"%s\",\"image\":\"busybox\",\"grace_time_s\":1,"
             "\"limits\":{\"memory_bytes\":134217728}}",
             handle);
    struct hresp r;
    ctr_create(&b, body, &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    hresp_free(&r);
    /* One process that ignores TERM: the delete KILLs it after the grace time. */
    proc_start(&b, handle,
               "{\"id\":\"stubborn\",\"path\":\"sh\",\"args\":[\"-c\",\"trap '' TERM; while "
               "true; do sleep 0.1; done\"]}");
    proc_start(&b, handle, "{\"id\":\"sleeper\",\"path\":\"sleep\",\"args\":[\"60\"]}");
    const char *cg = ctr_sh_out("find /sys/fs/cgroup/memory -type d -name '%s' | head -1", handle);
    ck_assert_msg(cg[0] != '\0', "no memory cgroup for %s", handle);
    snprintf(path, sizeof(path), "/v1/containers/%s", handle);
    double t0 = now_ms();
    http_do(&b, &(struct hreq){.method = "DELETE", .path = path, .timeout_ms = 30000}, &r);
    ck_assert_msg(r.status == 204, "%ld %s", r.status, r.body);
    double took = now_ms() - t0;
    ck_assert_msg(took >= 900 && took < 8000, "delete took %.0f ms with a grace of 1 s", took);
    hresp_free(&r);
    assert_nothing_left(&b, handle);
    http_do(&b, &(struct hreq){.method = "DELETE", .path = path}, &r);
    ck_assert_error_reply(&r, 404, "not_found", handle);
    hresp_free(&r);
    http_get(&b, path, &r);
    ck_assert_int_eq(r.status, 404);
    hresp_free(&r);
    /* The image was released. */
    http_do(&b, &(struct hreq){.method = "DELETE", .path = "/v1/images/busybox"}, &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(container_failed_create_leaves_nothing_behind)
{
    struct berthd b = {0};
    start_with_image(&b);
    /* The bind mount's source is missing: the driver refuses it (422) after the
     * overlay is mounted, so the undo has a mount, an image use and a record to undo. */
    char handle[64], body[512];
    snprintf(handle, sizeof(handle), "c-fail-%d", (int)getpid());
    snprintf(body, sizeof(body),
             "{\"handle\":\"%s\",\"image\":\"busybox\",\"mounts\":[{\"host_path\":"
             "\"/nonexistent/berth-test-dir\",\"target\":\"/data\"}]}",
             handle);
    struct hresp r;
    ctr_track(&b, handle);
    ctr_create(&b, body, &r);
    ck_assert_error_reply(&r, 422, "invalid_content", "/nonexistent/berth-test-dir");
    hresp_free(&r);
    assert_nothing_left(&b, handle);
    http_get(&b, "/v1/containers", &r);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "containers")), 0);
    hresp_free(&r);
    /* The image use was undone too. */
    http_do(&b, &(struct hreq){.method = "DELETE", .path = "/v1/images/busybox"}, &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    hresp_free(&r);
    /* The handle can be used again. */
    ctr_create_raw(&b, handle);
    ctr_delete(&b, handle);
    berthd_finish(&b);
}
END_TEST

/* Outlives the background requests that point at it. */
static const char *const json_headers[] = {"Content-Type: application/json", NULL};

START_TEST(container_eight_at_once_each_run_task)
{
    struct berthd b = {0};
    start_with_image(&b);
    enum { N = 8 };
    struct bg_req reqs[N];
    char bodies[N][256], handles[N][32], paths[N][128];
    for (int i = 0; i < N; i++) {
        snprintf(handles[i], sizeof(handles[i]), "c-par-%d", i);
        ctr_track(&b, handles[i]);
        snprintf(bodies[i], sizeof(bodies[i]), "{\"handle\":\"%s\",\"image\":\"busybox\"}",
                 handles[i]);
        bg_start(&reqs[i], &b,
                 &(struct hreq){.method = "POST",
                                .path = "/v1/containers",
                                .body = bodies[i],
                                .headers = json_headers,
                                .timeout_ms = 60000});
    }
    for (int i = 0; i < N; i++) {
        bg_join(&reqs[i]);
        ck_assert_msg(reqs[i].resp.status == 201, "%s: %ld %s", handles[i], reqs[i].resp.status,
                      reqs[i].resp.body);
        hresp_free(&reqs[i].resp);
    }
    for (int i = 0; i < N; i++) {
        snprintf(paths[i], sizeof(paths[i]), "/v1/containers/%s/processes", handles[i]);
        snprintf(bodies[i], sizeof(bodies[i]),
                 "{\"id\":\"task\",\"path\":\"sh\",\"args\":[\"-c\",\"echo %s; hostname >&2\"]}",
                 handles[i]);
        bg_start(&reqs[i], &b,
                 &(struct hreq){.method = "POST",
                                .path = paths[i],
                                .body = bodies[i],
                                .headers = json_headers,
                                .timeout_ms = 30000});
    }
    for (int i = 0; i < N; i++) {
        bg_join(&reqs[i]);
        ck_assert_msg(reqs[i].resp.status == 201, "%s: %ld %s", handles[i], reqs[i].resp.status,
                      reqs[i].resp.body);
        hresp_free(&reqs[i].resp);
    }
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(proc_wait(&b, handles[i], "task"), 0);
        char *out = proc_output(&b, handles[i], "task", "stdout", "");
        char *err = proc_output(&b, handles[i], "task", "stderr", "");
        char want[64];
        snprintf(want, sizeof(want), "%s\n", handles[i]);
        ck_assert_str_eq(out, want);
        ck_assert_str_eq(err, want);
        free(out);
        free(err);
    }
    for (int i = 0; i < N; i++)
        ctr_delete(&b, handles[i]);
    berthd_finish(&b);
}
END_TEST

START_TEST(two_daemons_give_the_same_handle_different_cgroups)
{
    struct berthd a = {0}, b = {0};
    ctr_require_runtime();
    berthd_start(&a, NULL);
    berthd_start(&b, NULL);
    ctr_create_raw(&a, "c-same");
    ctr_create_raw(&b, "c-same");
    char *out_a = NULL, *out_b = NULL;
    ck_assert_int_eq(proc_run_sh(&a, "c-same", "cg", "grep -m1 memory /proc/self/cgroup", &out_a),
                     0);
    ck_assert_int_eq(proc_run_sh(&b, "c-same", "cg", "grep -m1 memory /proc/self/cgroup", &out_b),
                     0);
    ck_assert_msg(strstr(out_a, "c-same") && strstr(out_b, "c-same"), "%s / %s", out_a, out_b);
    ck_assert_msg(strcmp(out_a, out_b) != 0, "both containers are in cgroup %s", out_a);
    free(out_a);
    free(out_b);
    ctr_delete(&a, "c-same");
    ctr_delete(&b, "c-same");
    berthd_finish(&a);
    berthd_finish(&b);
}
END_TEST

/* Once its containers are deleted and it stopped, a daemon leaves no
 * cgroup of its own (berth-<hash of its root>) in any hierarchy. */
START_TEST(no_cgroup_is_left_after_the_last_container_and_the_daemon)
{
    struct berthd b = {0};
    ctr_require_runtime();
    berthd_start(&b, NULL);
    ctr_create_raw(&b, "c-cg1");
    ctr_create_raw(&b, "c-cg2");
    char parent[64];
    snprintf(parent, sizeof(parent), "berth-%.12s",
             ctr_sh_out("printf %%s '%s' | sha256sum", b.root));
    const char *found = ctr_sh_out(
        "find /sys/fs/cgroup -maxdepth 4 -type d -name '%s' 2>/dev/null | wc -l", parent);
    ck_assert_msg(atoi(found) > 0, "no %s cgroup while containers run", parent);
    ctr_delete(&b, "c-cg1");
    ctr_delete(&b, "c-cg2");
    berthd_finish(&b);
    found = ctr_sh_out("find /sys/fs/cgroup -maxdepth 4 -type d -name '%s' 2>/dev/null", parent);
    ck_assert_msg(found[0] == '\0', "left behind: %s", found);
}
END_TEST

START_TEST(container_list_filters_by_property)
{
    struct berthd b = {0};
    ctr_require_runtime();
    berthd_start(&b, NULL);
    char body[PATH_MAX + 256];
    struct hresp r;
    const char *props[] = {"{\"team\":\"a\",\"kind\":\"build\"}",
                           "{\"team\":\"b\",\"kind\":\"build\"}"};
    for (int i = 0; i < 2; i++) {
        snprintf(body, sizeof(body),
                 "{\"handle\":\"c-prop-%d\",\"rootfs\":\"%s\",\"properties\":%s}", i,
                 ctr_busybox_raw(), props[i]);
        ctr_create(&b, body, &r);
        ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
        hresp_free(&r);
    }
    http_get(&b, "/v1/containers?property.kind=build", &r);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "containers")), 2);
    hresp_free(&r);
    http_get(&b, "/v1/containers?property.kind=build&property.team=b", &r);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "containers")), 1);
    ck_assert_str_eq(json_object_get_string(json_object_object_get(
                         json_object_array_get_idx(json_at(r.json, "containers"), 0), "handle")),
                     "c-prop-1");
    hresp_free(&r);
    http_get(&b, "/v1/containers?property.team=c", &r);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "containers")), 0);
    hresp_free(&r);
    ctr_delete(&b, "c-prop-0");
    ctr_delete(&b, "c-prop-1");
    berthd_finish(&b);
}
END_TEST

START_TEST(container_mounts_volumes_and_host_paths)
{
    struct berthd b = {0};
    ctr_require_runtime();
    berthd_start(&b, NULL);
    struct hresp r;
    http_post_json(&b, "/v1/volumes", "{\"handle\":\"cvol\"}", &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    hresp_free(&r);
    char hostdir[PATH_MAX + 8], body[3 * PATH_MAX];
    snprintf(hostdir, sizeof(hostdir), "%s/hostdir", b.tmp);
    ck_assert_int_eq(ctr_sh("mkdir -p '%s' && echo from-host > '%s/h'", hostdir, hostdir), 0);
    snprintf(body, sizeof(body),
             "{\"handle\":\"c-mnt\",\"rootfs\":\"%s\",\"mounts\":[{\"volume\":\"cvol\","
             "\"target\":\"/data\"},{\"volume\":\"cvol\",\"target\":\"/ro\",\"readonly\":true},"
             "{\"host_path\":\"%s\",\"target\":\"/host\",\"readonly\":true}]}",
             ctr_busybox_raw(), hostdir);
    ctr_create(&b, body, &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    hresp_free(&r);
    char *out = NULL;
    proc_run_sh(
        &b, "c-mnt", "task",
        "echo hello > /data/f; cat /ro/f /host/h; echo x > /ro/g 2>/dev/null || echo ro-ok; "
        "echo x > /host/g 2>/dev/null || echo host-ro-ok",
        &out);
    ck_assert_str_eq(out, "hello\nfrom-host\nro-ok\nhost-ro-ok\n");
    free(out);
    /* What the process wrote is streamed out of the volume through the API. */
    ck_assert_int_eq(ctr_sh("curl -sf '%s/v1/volumes/cvol/files?path=/f' | tar -xOf - f | "
                            "grep -qx hello",
                            b.base_url),
                     0);
    /* The volume knows it is mounted. */
    http_do(&b, &(struct hreq){.method = "DELETE", .path = "/v1/volumes/cvol"}, &r);
    ck_assert_error_reply(&r, 409, "conflict", NULL);
    hresp_free(&r);
    ctr_create(
        &b, "{\"rootfs\":\"raw:///tmp\",\"mounts\":[{\"volume\":\"nosuchvol\",\"target\":\"/x\"}]}",
        &r);
    ck_assert_error_reply(&r, 404, "not_found", "nosuchvol");
    hresp_free(&r);
    ctr_delete(&b, "c-mnt");
    http_do(&b, &(struct hreq){.method = "DELETE", .path = "/v1/volumes/cvol"}, &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(container_runtime_missing_is_503_with_its_error)
{
    struct berthd b = {0};
    ctr_require_runtime();
    berthd_start(&b, &(struct berthd_opts){.args = {"--oci-runtime", "/nonexistent/runc"}});
    char body[PATH_MAX + 64];
    snprintf(body, sizeof(body), "{\"rootfs\":\"%s\"}", ctr_busybox_raw());
    struct hresp r;
    ctr_create(&b, body, &r);
    ck_assert_error_reply(&r, 503, "unavailable", "/nonexistent/runc");
    hresp_free(&r);
    ck_assert(ctr_sh("grep -q ' %s/' /proc/self/mountinfo", b.root) != 0);
    berthd_finish(&b);
}
END_TEST

START_TEST(container_survives_kill_9_of_the_daemon)
{
    struct berthd b1 = {0}, b2 = {0};
    start_with_image(&b1);
    struct hresp r;
    ctr_create(&b1, "{\"handle\":\"c-restart\",\"image\":\"busybox\"}", &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    hresp_free(&r);
    proc_start(&b1, "c-restart",
               "{\"id\":\"task\",\"path\":\"sh\",\"args\":[\"-c\",\"for i in $(seq 1 12); do "
               "echo line$i; sleep 0.25; done; exit 5\"]}");
    proc_start(&b1, "c-restart",
               "{\"id\":\"short\",\"path\":\"sh\",\"args\":[\"-c\",\"sleep 0.6; exit 4\"]}");
    sleep_ms(400);
    berthd_kill(&b1);
    sleep_ms(700); /* "short" exits while the daemon is down */
    char root[PATH_MAX];
    snprintf(root, sizeof(root), "%s", b1.root);
    berthd_start(&b2, &(struct berthd_opts){.root = root});
    ctr_track(&b2, "c-restart");
    http_get(&b2, "/v1/containers/c-restart", &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "state")), "running");
    hresp_free(&r);
    http_get(&b2, "/v1/containers/c-restart/processes/task", &r);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "state")), "running");
    hresp_free(&r);
    http_get(&b2, "/v1/containers/c-restart/processes/short", &r);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "state")), "exited");
    ck_assert_int_eq(json_object_get_int(json_at(r.json, "exit_code")), 4);
    hresp_free(&r);
    /* Output written before and after the restart, followed to the end. */
    char *out = proc_output(&b2, "c-restart", "task", "stdout", "?follow=1");
    ck_assert_str_eq(out, "line1\nline2\nline3\nline4\nline5\nline6\nline7\nline8\nline9\nline10\n"
                          "line11\nline12\n");
    free(out);
    ck_assert_int_eq(proc_wait(&b2, "c-restart", "task"), 5);
    ctr_delete(&b2, "c-restart");
    berthd_finish(&b2);
    berthd_cleanup(&b1);
}
END_TEST

/* The directories holding handle's cgroups, space-separated (static). */
static const char *
cgroup_parents_of(const char *handle)
{
    return ctr_sh_out("find /sys/fs/cgroup -maxdepth 8 -type d -name '%s' -printf '%%h ' "
                      "2>/dev/null",
                      handle);
}

/* runc makes the parent of the containers' cgroups (one per store root)
 * and removes only the containers' own: the daemon removes the parent when
 * it stops, unless a container that keeps running is still in it. */
START_TEST(daemon_stop_removes_its_empty_cgroup_parent)
{
    struct berthd b1 = {0}, b2 = {0};
    ctr_require_runtime();
    berthd_start(&b1, NULL);
    char handle[64];
    snprintf(handle, sizeof(handle), "c-parent-%d", (int)getpid());
    ctr_create_raw(&b1, handle);
    char parents[4096];
    snprintf(parents, sizeof(parents), "%s", cgroup_parents_of(handle));
    ck_assert_msg(parents[0] != '\0', "no cgroup directory named %s", handle);
    int status = berthd_term(&b1, 10000);
    ck_assert_msg(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "berthd ended with wait status 0x%x", status);
    ck_assert_msg(ctr_sh("for d in %s; do [ -d \"$d/%s\" ] || exit 1; done", parents, handle) == 0,
                  "the running container lost a cgroup in %s", parents);

    char root[PATH_MAX];
    snprintf(root, sizeof(root), "%s", b1.root);
    berthd_start(&b2, &(struct berthd_opts){.root = root});
    ctr_track(&b2, handle);
    ctr_delete(&b2, handle);
    berthd_finish(&b2);
    ck_assert_msg(ctr_sh("for d in %s; do [ -d \"$d\" ] && exit 1; done; exit 0", parents) == 0,
                  "a cgroup parent is left: %s", parents);
    berthd_cleanup(&b1);
}
END_TEST

START_TEST(mounts_a_crash_left_are_undone_at_restart)
{
    /* kill -9 leaves a container whose record is then unreadable, and a
     * journaled overlay whose container never existed: the next daemon
     * undoes both mounts, and its journal is empty afterwards. The lost
     * container's network namespace (a bind mount, even with --network
     * none) is the network's to release, in its start-up reconciliation,
     * which runs after the daemon listens: the mounts are looked at once
     * it is done (before, CI saw the namespace still mounted). */
    struct berthd b1 = {0}, b2 = {0};
    start_with_image(&b1);
    struct hresp r;
    ctr_create(&b1, "{\"handle\":\"c-lost\",\"image\":\"busybox\"}", &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    hresp_free(&r);
    berthd_kill(&b1);
    char root[PATH_MAX];
    snprintf(root, sizeof(root), "%s", b1.root);
    ck_assert_int_eq(ctr_sh("ls %s/mounts/container.c-lost.rootfs.mnt >/dev/null", root), 0);
    ck_assert_int_eq(ctr_sh("grep -q ' %s/network/netns/c-lost ' /proc/self/mountinfo", root), 0);
    ck_assert_int_eq(ctr_sh("echo garbage > %s/containers/c-lost/container.json", root), 0);
    ck_assert_int_eq(ctr_sh("cd %s && mkdir -p ghost/l ghost/u ghost/w ghost/m && mount -t overlay "
                            "overlay -o lowerdir=ghost/l,upperdir=ghost/u,workdir=ghost/w ghost/m",
                            root),
                     0);
    char entry[PATH_MAX + 256];
    int n = snprintf(entry, sizeof(entry),
                     "berth-mount 1\nowner container:ghost\nkind overlay\nf target=%s/ghost/m\n"
                     "f rootfs=%s/ghost/m\n",
                     root, root);
    /* The checksum line the journal writes: the CRC-32 of the text before it. The
     * entry is written beside the store (its own root), never to a shared /tmp name. */
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof(tmp), "%s/ghost/entry", root);
    FILE *f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    fwrite(entry, 1, (size_t)n, f);
    fclose(f);
    ck_assert_int_eq(ctr_sh("cd %s/mounts && { cat ../ghost/entry; printf 'sum %%s\\n' "
                            "\"$(python3 -c 'import sys,zlib; print(\"%%08x\" %% "
                            "zlib.crc32(open(\"../ghost/entry\",\"rb\").read()))')\"; } "
                            "> container.ghost.rootfs.mnt && rm ../ghost/entry",
                            root),
                     0);
    ck_assert_int_eq(ctr_sh("grep -q ' %s/ghost/m ' /proc/self/mountinfo", root), 0);
    snprintf(b1.mount, sizeof(b1.mount), "%s/ghost/m", root); /* unmounted should the test fail */

    berthd_start(&b2, &(struct berthd_opts){.root = root});
    ck_assert_msg(berthd_wait_log(&b2, "net: reconciled:", 10000),
                  "the network's start-up reconciliation did not end");
    ck_assert_msg(ctr_sh("grep -q ' %s/' /proc/self/mountinfo", root) != 0,
                  "a mount under %s is left after the restart: %s", root,
                  ctr_sh_out("grep ' %s/' /proc/self/mountinfo | cut -d' ' -f5", root));
    ck_assert_int_eq(ctr_sh("test -z \"$(ls -A %s/mounts)\"", root), 0);
    http_get(&b2, "/v1/containers/c-lost", &r);
    ck_assert_int_eq(r.status, 404);
    hresp_free(&r);
    char *log = berthd_log(&b2);
    ck_assert_ptr_nonnull(strstr(log, "undid container.ghost.rootfs (overlay)"));
    ck_assert_ptr_nonnull(strstr(log, "net: reconciled: 0 kept, 1 released"));
    free(log);
    berthd_finish(&b2);
    berthd_cleanup(&b1);
}
END_TEST

START_TEST(an_image_use_whose_record_a_power_loss_took_is_dropped)
{
    /* A create's "creating" record is written unsynced (the image use it
     * guards is reconciled instead): a power loss during the create can
     * leave the image use committed and no container directory. Here the
     * daemon is killed and what a power loss takes with it is taken by
     * hand (the overlay, the directory); the next start-up drops the use,
     * so the image can be deleted, and leaves nothing of the container. */
    struct berthd b1 = {0}, b2 = {0};
    start_with_image(&b1);
    struct hresp r;
    ctr_create(&b1, "{\"handle\":\"c-pl\",\"image\":\"busybox\"}", &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    hresp_free(&r);
    berthd_kill(&b1);
    char root[PATH_MAX];
    snprintf(root, sizeof(root), "%s", b1.root);
    ck_assert_int_eq(
        ctr_sh("umount -l %s/containers/c-pl/rootfs && rm -rf %s/containers/c-pl", root, root), 0);
    berthd_start(&b2, &(struct berthd_opts){.root = root});
    ck_assert_msg(berthd_wait_log(&b2, "net: reconciled:", 10000),
                  "the network's start-up reconciliation did not end");
    char *log = berthd_log(&b2);
    ck_assert_msg(strstr(log, "1 image user without a container dropped"), "%s", log);
    free(log);
    http_do(&b2, &(struct hreq){.method = "DELETE", .path = "/v1/images/busybox"}, &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    hresp_free(&r);
    assert_nothing_left(&b2, "c-pl");
    berthd_finish(&b2);
    berthd_cleanup(&b1);
}
END_TEST

START_TEST(a_renamed_directory_a_crash_left_is_removed_at_start_up)
{
    /* The delete renames a container's directory and answers; a job
     * removes the tree. A daemon killed in between leaves the tree, with
     * files and directories a container wrote, for the next start-up. */
    struct berthd b1 = {0}, b2 = {0};
    ctr_require_runtime();
    berthd_start(&b1, NULL);
    ck_assert_int_eq(berthd_term(&b1, 10000), 0);
    char root[PATH_MAX], trash[PATH_MAX + 64];
    snprintf(root, sizeof(root), "%s", b1.root);
    snprintf(trash, sizeof(trash), "%s/containers/.removing-gone.7", root);
    ck_assert_int_eq(
        ctr_sh("mkdir -p %s/scratch/upper/a/b && echo x > %s/scratch/upper/a/b/f", trash, trash),
        0);
    berthd_start(&b2, &(struct berthd_opts){.root = root});
    ck_assert_msg(access(trash, F_OK) != 0, "%s is left after the restart", trash);
    berthd_finish(&b2);
    berthd_cleanup(&b1);
}
END_TEST

static Suite *
containers_suite(void)
{
    Suite *s = suite_create("api_containers");
    TCase *tc = tcase_create("containers");
    ctr_add_fixture(tc);
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, container_create_validates_its_request);
    tcase_add_test(tc, container_sees_the_images_etc_and_holds_the_image);
    tcase_add_test(tc, container_has_the_security_defaults);
    tcase_add_test(tc, container_memory_and_pids_limits_hold);
    tcase_add_test(tc, container_delete_leaves_nothing_behind);
    tcase_add_test(tc, container_failed_create_leaves_nothing_behind);
    tcase_add_test(tc, container_eight_at_once_each_run_task);
    tcase_add_test(tc, container_list_filters_by_property);
    tcase_add_test(tc, container_mounts_volumes_and_host_paths);
    tcase_add_test(tc, container_runtime_missing_is_503_with_its_error);
    tcase_add_test(tc, container_survives_kill_9_of_the_daemon);
    tcase_add_test(tc, mounts_a_crash_left_are_undone_at_restart);
    tcase_add_test(tc, a_renamed_directory_a_crash_left_is_removed_at_start_up);
    tcase_add_test(tc, an_image_use_whose_record_a_power_loss_took_is_dropped);
    tcase_add_test(tc, two_daemons_give_the_same_handle_different_cgroups);
    tcase_add_test(tc, daemon_stop_removes_its_empty_cgroup_parent);
    tcase_add_test(tc, no_cgroup_is_left_after_the_last_container_and_the_daemon);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(containers_suite());
}
