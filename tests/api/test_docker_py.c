/*
 * docker-py against berth's Docker API: every docker-py on this machine
 * (Debian's python3-docker 5.0.3 under /usr/bin/python3, and the one of
 * the python3 on PATH when it differs), over the unix socket and loopback
 * TCP, runs the flows of tests/fixtures/docker_py_flows.py: ping, version
 * negotiation and info; load, inspect, tag, remove and a failed pull;
 * create, start, wait, list by label, start again, stop of a process that
 * ignores TERM, two runs at once; the low-level APIClient's create with
 * HostConfig limits, a volume bind and AutoRemove, wait for "removed",
 * volumes, and the events of a container's life; containers.run's output,
 * a GitLab-Runner-like attach (OpenStdin, StdinOnce, a script on stdin,
 * half-close, frames, wait), logs with timestamps and exec.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness_containers.h"
#include "harness_docker.h"

static struct dk_client pys[DK_MAX_CLIENTS];
static size_t npys;

static void
setup(void)
{
    ctr_require_runtime();
    npys = dk_pythons(pys);
}

/* Runs one flow with every docker-py, alternating the unix socket and TCP. */
static void
run_flow(const char *flow)
{
    for (size_t i = 0; i < npys; i++) {
        for (int tcp = 0; tcp < 2; tcp++) {
            struct berthd b = {0};
            dk_start(&b, tcp == 1, NULL);
            char *out = NULL;
            int st =
                dk_run(&b, &pys[i], &out, "\"$D\" '%s/tests/fixtures/docker_py_flows.py' %s '%s'",
                       BERTH_SOURCE_DIR, flow, dk_busybox_archive());
            dk_track_all(&b);
            ck_assert_msg(st == 0 && strstr(out, "ok "), "docker-py %s over %s, flow %s: %d\n%s",
                          pys[i].version, tcp ? "tcp" : "unix", flow, st, out);
            free(out);
            berthd_finish(&b);
        }
    }
}

START_TEST(docker_py_ping_version_negotiation_and_info)
{
    run_flow("system");
}
END_TEST

START_TEST(docker_py_load_inspect_tag_remove_and_a_failed_pull)
{
    run_flow("images");
}
END_TEST

START_TEST(docker_py_create_start_wait_list_stop_and_two_runs_at_once)
{
    run_flow("containers");
}
END_TEST

START_TEST(docker_py_low_level_limits_autoremove_volumes_and_events)
{
    run_flow("lowlevel");
}
END_TEST

START_TEST(docker_py_run_output_gitlab_like_attach_logs_and_exec)
{
    run_flow("streams");
}
END_TEST

static Suite *
docker_py_suite(void)
{
    Suite *s = suite_create("api_docker_py");
    TCase *tc = tcase_create("docker_py");
    tcase_set_timeout(tc, 400);
    tcase_add_unchecked_fixture(tc, setup, NULL);
    ctr_add_fixture(tc);
    tcase_add_test(tc, docker_py_ping_version_negotiation_and_info);
    tcase_add_test(tc, docker_py_load_inspect_tag_remove_and_a_failed_pull);
    tcase_add_test(tc, docker_py_create_start_wait_list_stop_and_two_runs_at_once);
    tcase_add_test(tc, docker_py_low_level_limits_autoremove_volumes_and_events);
    tcase_add_test(tc, docker_py_run_output_gitlab_like_attach_logs_and_exec);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(docker_py_suite());
}
