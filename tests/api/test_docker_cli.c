/*
 * The real docker CLIs against berth's Docker API (every CLI this machine
 * has: the one on PATH, 28.x here, and Debian's 20.10), over the unix
 * socket and loopback TCP: version, load of a docker save and of an OCI
 * archive, images and inspect, run -d, ps with a label filter, stop of a
 * process that ignores TERM, rm -f, wait, start again, volumes with the
 * data read back through /v1, limits in the cgroup, the missing image's
 * failed pull, and --rm. (docker run without -d attaches: the streams
 * part adds attach, and its tests with it.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness_containers.h"
#include "harness_docker.h"

static struct dk_client clis[DK_MAX_CLIENTS];
static size_t nclis;

static void
setup(void)
{
    ctr_require_runtime();
    nclis = dk_clis(clis);
}

/* docker version over the endpoint b serves: the server is berth at API 1.44. */
static void
check_version(const struct berthd *b)
{
    for (size_t i = 0; i < nclis; i++) {
        char *out = NULL;
        int st = dk_run(b, &clis[i], &out,
                        "\"$D\" version --format '{{.Server.Version}} {{.Server.APIVersion}} "
                        "{{.Server.MinAPIVersion}} {{.Server.Os}}'");
        ck_assert_msg(st == 0, "docker %s version: %d\n%s", clis[i].version, st, out);
        ck_assert_msg(dk_contains(out, BERTH_VERSION " 1.44 1.24 linux"), "docker %s: %s",
                      clis[i].version, out);
        free(out);
    }
}

START_TEST(docker_version_over_the_unix_socket_and_tcp)
{
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    check_version(&b);
    berthd_finish(&b);
    struct berthd t = {0};
    dk_start(&t, true, NULL);
    check_version(&t);
    berthd_finish(&t);
}
END_TEST

START_TEST(docker_load_of_a_save_archive_and_an_oci_archive_then_images_and_inspect)
{
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        dk_start(&b, i % 2 == 1, NULL);
        const struct dk_client *cl = &clis[i];
        free(dk_ok(&b, cl, 0, "\"$D\" load -i '%s' | grep -q 'Loaded image: busybox:latest'",
                   dk_busybox_archive()));
        free(dk_ok(&b, cl, 0, "\"$D\" load -i '%s' | grep -q 'Loaded image: ocibox:1'",
                   dk_oci_archive()));
        char *out = NULL;
        ck_assert_int_eq(dk_run(&b, cl, &out, "\"$D\" images --format '{{.Repository}}:{{.Tag}}'"),
                         0);
        ck_assert_msg(dk_contains(out, "busybox:latest") && dk_contains(out, "ocibox:1"), "%s",
                      out);
        free(out);
        char *cfg = dk_ok(&b, cl, 0,
                          "\"$D\" inspect --format '{{.Os}} {{.Architecture}} {{json .Config.Cmd}} "
                          "{{index .RepoTags 0}} {{len .RootFS.Layers}}' busybox");
        ck_assert_msg(dk_contains(cfg, "linux") && dk_contains(cfg, "[\"sh\"] busybox:latest 1"),
                      "%s", cfg);
        free(cfg);
        /* Both have the one config: the engine's image ID is the config digest. */
        char *id1 = dk_ok(&b, cl, 0, "\"$D\" inspect --format '{{.Id}}' busybox");
        char *id2 = dk_ok(&b, cl, 0, "\"$D\" inspect --format '{{.Id}}' ocibox:1");
        ck_assert_str_eq(id1, id2);
        ck_assert_int_eq(strncmp(id1, "sha256:", 7), 0);
        /* An image is found by its id (prefix) too, and tagged and removed by name. */
        free(dk_ok(&b, cl, 0, "\"$D\" tag %.19s mine/box:2 && \"$D\" image inspect mine/box:2",
                   id1));
        free(dk_ok(&b, cl, 0, "\"$D\" rmi mine/box:2 | grep -q 'Untagged: mine/box:2'"));
        free(id1);
        free(id2);
        berthd_finish(&b);
    }
}
END_TEST

START_TEST(docker_run_detached_ps_by_label_stop_honours_t_and_rm_f)
{
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        dk_start(&b, i % 2 == 1, NULL);
        const struct dk_client *cl = &clis[i];
        dk_load_busybox(&b);
        char *id = dk_ok(&b, cl, 0, "\"$D\" run -d --label ci.job=%zu busybox sleep 300", i);
        ck_assert_uint_eq(strlen(id), 64);
        ctr_track(&b, id);
        char *ps = dk_ok(&b, cl, 0,
                         "\"$D\" ps -a --no-trunc --filter label=ci.job=%zu --format "
                         "'{{.ID}} {{.Status}}'",
                         i);
        ck_assert_msg(strncmp(ps, id, 64) == 0 && dk_contains(ps, " Up "), "%s", ps);
        free(ps);
        char *none = dk_ok(&b, cl, 0, "\"$D\" ps -aq --filter label=ci.job=other | wc -l");
        ck_assert_str_eq(none, "0");
        free(none);
        /* A process that ignores TERM: stop -t 2 KILLs it after 2 s. */
        char *tid = dk_ok(
            &b, cl, 0, "\"$D\" run -d busybox sh -c 'trap \"\" TERM; while :; do sleep 1; done'");
        ctr_track(&b, tid);
        sleep_ms(500);
        double t0 = now_ms();
        free(dk_ok(&b, cl, 0, "\"$D\" stop -t 2 %s", tid));
        double took = now_ms() - t0;
        ck_assert_msg(took >= 1900 && took < 8000, "stop -t 2 took %.0f ms", took);
        char *st = dk_ok(&b, cl, 0,
                         "\"$D\" inspect --format '{{.State.Status}} {{.State.ExitCode}}' %s", tid);
        ck_assert_str_eq(st, "exited 137");
        free(st);
        /* sleep takes TERM: the default stop is quick, 143. */
        free(dk_ok(&b, cl, 0, "\"$D\" stop %s", id));
        st = dk_ok(&b, cl, 0, "\"$D\" inspect --format '{{.State.ExitCode}}' %s", id);
        ck_assert_str_eq(st, "143");
        free(st);
        /* rm -f of a running one. */
        free(dk_ok(&b, cl, 0, "\"$D\" start %s", id));
        char *out = NULL;
        ck_assert_int_ne(dk_run(&b, cl, &out, "\"$D\" rm %s", id), 0);
        ck_assert_msg(dk_contains(out, "cannot remove a running container"), "%s", out);
        free(out);
        free(dk_ok(&b, cl, 0, "\"$D\" rm -f %s %s", id, tid));
        char *left = dk_ok(&b, cl, 0, "\"$D\" ps -aq | wc -l");
        ck_assert_str_eq(left, "0");
        free(left);
        free(id);
        free(tid);
        berthd_finish(&b);
    }
}
END_TEST

START_TEST(docker_wait_gives_the_exit_code_and_start_runs_the_command_again)
{
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        dk_start(&b, i % 2 == 0, NULL);
        const struct dk_client *cl = &clis[i];
        dk_load_busybox(&b);
        char *id = dk_ok(
            &b, cl, 0, "\"$D\" run -d -v runs:/runs busybox sh -c 'echo run >> /runs/log; exit 3'");
        ctr_track(&b, id);
        char *code = dk_ok(&b, cl, 3, "\"$D\" wait %s; exit $(\"$D\" wait %s)", id, id);
        free(code);
        /* GitLab Runner starts the same container again for each stage. */
        free(dk_ok(&b, cl, 0, "\"$D\" start %s && \"$D\" wait %s", id, id));
        struct hresp r;
        http_get(&b, "/v1/volumes/runs/files?path=/log", &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_msg(r.body_len > 512 && memmem(r.body, r.body_len, "run\nrun\n", 8),
                      "the volume's log has not two runs");
        hresp_free(&r);
        free(dk_ok(&b, cl, 0, "\"$D\" rm %s", id));
        free(id);
        berthd_finish(&b);
    }
}
END_TEST

START_TEST(docker_volumes_and_data_read_back_through_v1)
{
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        dk_start(&b, false, NULL);
        const struct dk_client *cl = &clis[i];
        dk_load_busybox(&b);
        free(dk_ok(&b, cl, 0, "\"$D\" volume create --label owner=ci cache"));
        char *ls =
            dk_ok(&b, cl, 0, "\"$D\" volume ls --filter label=owner=ci --format '{{.Name}}'");
        ck_assert_str_eq(ls, "cache");
        free(ls);
        char *id = dk_ok(&b, cl, 0,
                         "\"$D\" run -d -v cache:/data busybox sh -c 'echo from-docker > /data/f'");
        ctr_track(&b, id);
        free(dk_ok(&b, cl, 0, "\"$D\" wait %s", id));
        /* The same volume through /v1: its tar has the file. */
        struct hresp r;
        http_get(&b, "/v1/volumes/cache", &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_str_eq(json_object_get_string(json_at(r.json, "properties.owner")), "ci");
        hresp_free(&r);
        http_get(&b, "/v1/volumes/cache/files?path=/f", &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_msg(r.body_len > 512 && memmem(r.body, r.body_len, "from-docker\n", 12), "tar");
        hresp_free(&r);
        char *out = NULL;
        ck_assert_int_ne(dk_run(&b, cl, &out, "\"$D\" volume rm cache"), 0);
        ck_assert_msg(dk_contains(out, "in use"), "%s", out);
        free(out);
        free(dk_ok(&b, cl, 0, "\"$D\" rm %s && \"$D\" volume rm cache", id));
        char *none = dk_ok(&b, cl, 0, "\"$D\" volume ls -q | wc -l");
        ck_assert_str_eq(none, "0");
        free(none);
        free(id);
        berthd_finish(&b);
    }
}
END_TEST

START_TEST(docker_memory_and_pids_limits_reach_the_cgroup)
{
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        dk_start(&b, false, NULL);
        const struct dk_client *cl = &clis[i];
        dk_load_busybox(&b);
        char *id = dk_ok(&b, cl, 0, "\"$D\" run -d --memory 64m --pids-limit 40 busybox sleep 300");
        ctr_track(&b, id);
        /* The container's cgroup on the host (v1 or v2): cgroupsPath ends in its id.
         * Other daemons' cgroups come and go meanwhile: find's complaints are not output. */
        static const char cg[] = "find /sys/fs/cgroup -path '*/%s/*' \\( -name %s -o -name %s \\) "
                                 "2>/dev/null | head -1 | xargs cat";
        char *mem = dk_ok(&b, cl, 0, cg, id, "memory.limit_in_bytes", "memory.max");
        ck_assert_str_eq(mem, "67108864");
        free(mem);
        char *pids = dk_ok(&b, cl, 0, cg, id, "pids.max", "pids.max");
        ck_assert_str_eq(pids, "40");
        free(pids);
        char *hc = dk_ok(
            &b, cl, 0,
            "\"$D\" inspect --format '{{.HostConfig.Memory}} {{.HostConfig.PidsLimit}}' %s", id);
        ck_assert_str_eq(hc, "67108864 40");
        free(hc);
        char *stats = dk_ok(&b, cl, 0, "\"$D\" stats --no-stream --format '{{.MemUsage}}' %s", id);
        ck_assert_msg(dk_contains(stats, "64MiB"), "%s", stats);
        free(stats);
        /* One the OOM killer ends says so in State.OOMKilled; the sleeper does not. */
        char *hog = dk_ok(&b, cl, 0,
                          "\"$D\" run -d --memory 32m busybox sh -c "
                          "'dd if=/dev/zero bs=1M 2>/dev/null | tail'");
        ctr_track(&b, hog);
        char *code = dk_ok(&b, cl, 0, "\"$D\" wait %s", hog);
        ck_assert_str_eq(code, "137");
        free(code);
        static const char st[] =
            "\"$D\" inspect --format '{{.State.OOMKilled}} {{.State.ExitCode}}' %s";
        char *oom = dk_ok(&b, cl, 0, st, hog);
        ck_assert_str_eq(oom, "true 137");
        free(oom);
        oom = dk_ok(&b, cl, 0, st, id);
        ck_assert_str_eq(oom, "false 0");
        free(oom);
        free(dk_ok(&b, cl, 0, "\"$D\" rm -f %s", hog));
        free(hog);
        free(dk_ok(&b, cl, 0, "\"$D\" rm -f %s", id));
        free(id);
        berthd_finish(&b);
    }
}
END_TEST

START_TEST(docker_run_of_a_missing_image_fails_with_the_pulls_message)
{
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    for (size_t i = 0; i < nclis; i++) {
        /* Created, 404, pulled from a registry that is not there (the pulls
         * that work are tests/api/test_docker_pull.c's). */
        char *out = NULL;
        int st = dk_run(&b, &clis[i], &out, "\"$D\" run -d 127.0.0.1:1/nosuch/image:1 true");
        ck_assert_int_eq(st, 125);
        ck_assert_msg(
            dk_contains(out, "Unable to find image '127.0.0.1:1/nosuch/image:1' locally") &&
                dk_contains(out, "Error response from daemon: pull "
                                 "127.0.0.1:1/nosuch/image:1: registry 127.0.0.1:1: "),
            "docker %s: %s", clis[i].version, out);
        free(out);
        /* A command berth does not serve says so, not "page not found". */
        st = dk_run(&b, &clis[i], &out, "\"$D\" pause x");
        ck_assert_int_ne(st, 0);
        ck_assert_msg(dk_contains(out, "berth does not implement docker pause "
                                       "(POST /containers/{id}/pause)"),
                      "docker %s: %s", clis[i].version, out);
        free(out);
    }
    berthd_finish(&b);
}
END_TEST

START_TEST(docker_run_rm_removes_the_container_after_it_exits)
{
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        dk_start(&b, false, NULL);
        const struct dk_client *cl = &clis[i];
        dk_load_busybox(&b);
        char *id = dk_ok(&b, cl, 0, "\"$D\" run -d --rm --name gone busybox sh -c 'sleep 1'");
        ctr_track(&b, id);
        /* Either the wait sees it go, or it was gone already. */
        char *out = NULL;
        dk_run(&b, cl, &out, "\"$D\" wait gone");
        free(out);
        double deadline = now_ms() + 10000;
        char *n = NULL;
        while (now_ms() < deadline) {
            free(n);
            n = dk_ok(&b, cl, 0, "\"$D\" ps -aq | wc -l");
            if (strcmp(n, "0") == 0)
                break;
            sleep_ms(100);
        }
        ck_assert_str_eq(n, "0");
        free(n);
        free(id);
        berthd_finish(&b);
    }
}
END_TEST

START_TEST(docker_metadata_survives_a_restart_of_berthd)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    char *id = dk_ok(&b, cl, 0,
                     "\"$D\" create --name keeper --label k=v -e X=1 -w /tmp --stop-timeout 7 "
                     "busybox sh -c 'exit 9'");
    ctr_track(&b, id);
    free(dk_ok(&b, cl, 9, "\"$D\" start %s && exit $(\"$D\" wait %s)", id, id));
    const char *fmt = "{{.Name}} {{.State.Status}} {{.State.ExitCode}} {{.Config.Labels.k}} "
                      "{{.Config.WorkingDir}} {{.Config.StopTimeout}} {{json .Config.Cmd}}";
    char *before = dk_ok(&b, cl, 0, "\"$D\" inspect --format '%s' keeper", fmt);
    ck_assert_str_eq(before, "/keeper exited 9 v /tmp 7 [\"sh\",\"-c\",\"exit 9\"]");
    char *started = dk_ok(&b, cl, 0,
                          "\"$D\" inspect --format '{{.State.StartedAt}} {{.State.FinishedAt}}' "
                          "keeper");
    ck_assert_int_eq(berthd_term(&b, 10000), 0);
    struct berthd again = {0};
    memcpy(again.tmp, b.tmp, sizeof(b.tmp));
    dk_start(&again, false, NULL);
    char *after = dk_ok(&again, cl, 0, "\"$D\" inspect --format '%s' keeper", fmt);
    ck_assert_str_eq(after, before);
    char *started2 = dk_ok(&again, cl, 0,
                           "\"$D\" inspect --format '{{.State.StartedAt}} {{.State.FinishedAt}}' "
                           "%.12s",
                           id);
    ck_assert_str_eq(started2, started);
    /* And it runs again after the restart. */
    free(dk_ok(&again, cl, 9, "\"$D\" start keeper && exit $(\"$D\" wait keeper)"));
    free(dk_ok(&again, cl, 0, "\"$D\" rm keeper"));
    free(before);
    free(after);
    free(started);
    free(started2);
    free(id);
    berthd_finish(&again);
}
END_TEST

START_TEST(docker_events_show_the_container_life)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    char *since = dk_ok(&b, cl, 0, "date +%%s");
    char *id = dk_ok(&b, cl, 0, "\"$D\" run -d busybox true");
    ctr_track(&b, id);
    free(dk_ok(&b, cl, 0, "\"$D\" wait %s && \"$D\" rm %s", id, id));
    char *until = dk_ok(&b, cl, 0, "expr $(date +%%s) + 1");
    char *ev = NULL;
    ck_assert_int_eq(dk_run(&b, cl, &ev,
                            "\"$D\" events --since %s --until %s --filter container=%s "
                            "--format '{{.Action}}' | tr '\\n' ' '",
                            since, until, id),
                     0);
    ck_assert_msg(dk_contains(ev, "create start die destroy"), "events: %s", ev);
    free(ev);
    free(since);
    free(until);
    free(id);
    berthd_finish(&b);
}
END_TEST

static Suite *
docker_cli_suite(void)
{
    Suite *s = suite_create("api_docker_cli");
    TCase *tc = tcase_create("docker_cli");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, setup, NULL);
    ctr_add_fixture(tc);
    tcase_add_test(tc, docker_version_over_the_unix_socket_and_tcp);
    tcase_add_test(tc, docker_load_of_a_save_archive_and_an_oci_archive_then_images_and_inspect);
    tcase_add_test(tc, docker_run_detached_ps_by_label_stop_honours_t_and_rm_f);
    tcase_add_test(tc, docker_wait_gives_the_exit_code_and_start_runs_the_command_again);
    tcase_add_test(tc, docker_volumes_and_data_read_back_through_v1);
    tcase_add_test(tc, docker_memory_and_pids_limits_reach_the_cgroup);
    tcase_add_test(tc, docker_run_of_a_missing_image_fails_with_the_pulls_message);
    tcase_add_test(tc, docker_run_rm_removes_the_container_after_it_exits);
    tcase_add_test(tc, docker_metadata_survives_a_restart_of_berthd);
    tcase_add_test(tc, docker_events_show_the_container_life);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(docker_cli_suite());
}
