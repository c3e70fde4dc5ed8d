/*
 * What the real docker CLIs (every one this machine has) show and exit
 * with when a container or an exec cannot do what was asked, as the
 * engine has them: a run whose program is not there (exit 127, the
 * engine's "executable file not found", the container left created with
 * that exit code, or removed with --rm instead of a run that never
 * ends), an exec into a container that does not run (409 "is not
 * running"), an exec whose program is not there or cannot be run (126,
 * 127, the message on the terminal), and a create whose error names the
 * container once.
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

/* How many times sub is in s. */
static unsigned
count(const char *s, const char *sub)
{
    unsigned n = 0;
    for (const char *p = s; (p = strstr(p, sub)); p += strlen(sub))
        n++;
    return n;
}

START_TEST(docker_run_rm_of_a_missing_program_says_so_exits_127_and_removes_it)
{
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        dk_start(&b, i % 2 == 1, NULL);
        const struct dk_client *cl = &clis[i];
        dk_load_busybox(&b);
        /* --rm: the CLI waits for the removal after the failed start. */
        double t0 = now_ms();
        char *out = NULL;
        int st = dk_run(&b, cl, &out, "\"$D\" run --rm --name gone busybox nosuchprog");
        dk_track_all(&b);
        ck_assert_msg(st == 127, "docker %s: exit %d after %.0f ms: %s", cl->version, st,
                      now_ms() - t0, out);
        ck_assert_msg(dk_contains(out, "exec: \"nosuchprog\": executable file not found in $PATH"),
                      "docker %s: %s", cl->version, out);
        free(out);
        char *left = dk_ok(&b, cl, 0, "\"$D\" ps -aq | wc -l");
        ck_assert_str_eq(left, "0");
        free(left);
        /* Without --rm it stays created, with the exit code the CLI gave. */
        st = dk_run(&b, cl, &out, "\"$D\" run --name kept busybox /no/such/prog");
        dk_track_all(&b);
        ck_assert_msg(st == 127 && dk_contains(out, "exec: \"/no/such/prog\": stat /no/such/prog: "
                                                    "no such file or directory"),
                      "docker %s: exit %d: %s", cl->version, st, out);
        free(out);
        char *state = dk_ok(&b, cl, 0,
                            "\"$D\" inspect --format '{{.State.Status}} {{.State.ExitCode}}' kept");
        ck_assert_str_eq(state, "created 127");
        free(state);
        /* And why, in State.Error, as the engine keeps it. */
        char *why = dk_ok(&b, cl, 0, "\"$D\" inspect --format '{{.State.Error}}' kept");
        ck_assert_msg(dk_contains(why, "stat /no/such/prog: no such file or directory") &&
                          dk_contains(why, "failed to create task"),
                      "docker %s: %s", cl->version, why);
        free(why);
        /* A program that is there but cannot be run: 126. */
        st = dk_run(&b, cl, &out, "\"$D\" run --rm busybox /etc");
        dk_track_all(&b);
        ck_assert_msg(st == 126 && dk_contains(out, "exec: \"/etc\": permission denied"),
                      "docker %s: exit %d: %s", cl->version, st, out);
        free(out);
        left = dk_ok(&b, cl, 0, "\"$D\" ps -aq | wc -l");
        ck_assert_str_eq(left, "1");
        free(left);
        free(dk_ok(&b, cl, 0, "\"$D\" rm kept"));
        berthd_finish(&b);
    }
}
END_TEST

/* The raw start answer and the waits an auto-remove container's failed start ends. */
START_TEST(docker_failed_start_is_400_and_ends_the_waits_of_an_auto_remove_container)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    char *id = dk_ok(&b, cl, 0, "\"$D\" create --rm busybox nosuchprog");
    ctr_track(&b, id);
    /* Both waits in place before the start, as docker run puts its own. */
    char *out = NULL;
    int st = dk_run(&b, cl, &out,
                    "curl -s --unix-socket '%s' -X POST 'http://d/v1.44/containers/%s/wait?"
                    "condition=removed' > '%s/removed' & "
                    "curl -s --unix-socket '%s' -X POST 'http://d/v1.44/containers/%s/wait?"
                    "condition=next-exit' > '%s/next' & sleep 0.5; "
                    "curl -s -o '%s/start' -w '%%{http_code}' --unix-socket '%s' -X POST "
                    "'http://d/v1.44/containers/%s/start'; echo; wait; cat '%s/removed' '%s/next' "
                    "'%s/start'",
                    b.docker_sock, id, b.tmp, b.docker_sock, id, b.tmp, b.tmp, b.docker_sock, id,
                    b.tmp, b.tmp, b.tmp);
    ck_assert_msg(st == 0, "curl: %d: %s", st, out);
    ck_assert_msg(strncmp(out, "400\n", 4) == 0, "%s", out);
    ck_assert_msg(count(out, "\"StatusCode\":127") == 2, "both waits end with 127: %s", out);
    ck_assert_msg(dk_contains(out, "executable file not found"), "%s", out);
    free(out);
    char *left = dk_ok(&b, cl, 0, "\"$D\" ps -aq | wc -l");
    ck_assert_str_eq(left, "0");
    free(left);
    free(id);
    berthd_finish(&b);
}
END_TEST

START_TEST(docker_exec_into_a_container_that_does_not_run_is_409_not_running)
{
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        dk_start(&b, i % 2 == 0, NULL);
        const struct dk_client *cl = &clis[i];
        dk_load_busybox(&b);
        char *done = dk_ok(&b, cl, 0, "\"$D\" run -d busybox true");
        ctr_track(&b, done);
        free(dk_ok(&b, cl, 0, "\"$D\" wait %s", done));
        char *made = dk_ok(&b, cl, 0, "\"$D\" create busybox sleep 300");
        ctr_track(&b, made);
        const char *ids[] = {done, made};
        for (size_t k = 0; k < 2; k++) {
            char *out = NULL;
            int st = dk_run(&b, cl, &out, "\"$D\" exec %s sh -c 'echo ran'", ids[k]);
            char want[128];
            snprintf(want, sizeof(want), "container %s is not running", ids[k]);
            ck_assert_msg(st != 0 && dk_contains(out, want) && !dk_contains(out, "ran"),
                          "docker %s: exec in %s: %d: %s", cl->version, ids[k], st, out);
            free(out);
        }
        /* The status, through the raw API. */
        char *code = dk_ok(&b, cl, 0,
                           "curl -s -o /dev/null -w '%%{http_code}' %s -X POST -H "
                           "'Content-Type: application/json' -d '{\"Cmd\":[\"true\"]}' "
                           "\"http://%s/v1.44/containers/%s/exec\"",
                           b.docker_sock[0] ? "--unix-socket \"${DOCKER_HOST#unix://}\"" : "",
                           b.docker_sock[0] ? "d" : "${DOCKER_HOST#tcp://}", made);
        ck_assert_str_eq(code, "409");
        free(code);
        /* Once it runs, exec works. */
        free(dk_ok(&b, cl, 0, "\"$D\" start %s && \"$D\" exec %s true", made, made));
        free(dk_ok(&b, cl, 0, "\"$D\" rm -f %s %s", done, made));
        free(done);
        free(made);
        berthd_finish(&b);
    }
}
END_TEST

START_TEST(docker_exec_of_a_missing_program_shows_why_and_exits_127)
{
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        dk_start(&b, i % 2 == 1, NULL);
        const struct dk_client *cl = &clis[i];
        dk_load_busybox(&b);
        char *id = dk_ok(&b, cl, 0, "\"$D\" run -d busybox sleep 300");
        ctr_track(&b, id);
        char *out = NULL;
        int st = dk_run(&b, cl, &out, "\"$D\" exec %s nosuchprog", id);
        ck_assert_msg(st == 127 &&
                          dk_contains(out, "exec: \"nosuchprog\": executable file not "
                                           "found in $PATH") &&
                          !dk_contains(out, "unable to upgrade"),
                      "docker %s: exit %d: %s", cl->version, st, out);
        free(out);
        st = dk_run(&b, cl, &out, "\"$D\" exec %s /etc", id);
        ck_assert_msg(st == 126 && dk_contains(out, "exec: \"/etc\": permission denied"),
                      "docker %s: exit %d: %s", cl->version, st, out);
        free(out);
        /* Detached: the start's answer is the error. */
        st = dk_run(&b, cl, &out, "\"$D\" exec -d %s nosuchprog", id);
        ck_assert_msg(st != 0 && dk_contains(out, "executable file not found"),
                      "docker %s: exit %d: %s", cl->version, st, out);
        free(out);
        /* The container runs on, and exec works in it. */
        free(dk_ok(&b, cl, 0, "\"$D\" exec %s true", id));
        free(dk_ok(&b, cl, 0, "\"$D\" rm -f %s", id));
        free(id);
        berthd_finish(&b);
    }
}
END_TEST

START_TEST(docker_create_error_names_the_container_once)
{
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        dk_start(&b, false, NULL);
        const struct dk_client *cl = &clis[i];
        dk_load_busybox(&b);
        char missing[PATH_MAX];
        snprintf(missing, sizeof(missing), "%s/not-there", b.tmp);
        char *out = NULL;
        int st =
            dk_run(&b, cl, &out, "\"$D\" create --name x1 -v '%s':/data busybox true", missing);
        dk_track_all(&b);
        ck_assert_msg(st != 0 && dk_contains(out, "mount source"), "docker %s: %d: %s", cl->version,
                      st, out);
        ck_assert_msg(count(out, "create container ") == 1, "docker %s: the prefix twice: %s",
                      cl->version, out);
        free(out);
        char *left = dk_ok(&b, cl, 0, "\"$D\" ps -aq | wc -l");
        ck_assert_str_eq(left, "0");
        free(left);
        berthd_finish(&b);
    }
}
END_TEST

static Suite *
docker_run_errors_suite(void)
{
    Suite *s = suite_create("api_docker_run_errors");
    TCase *tc = tcase_create("docker_run_errors");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, setup, NULL);
    ctr_add_fixture(tc);
    tcase_add_test(tc, docker_run_rm_of_a_missing_program_says_so_exits_127_and_removes_it);
    tcase_add_test(tc, docker_failed_start_is_400_and_ends_the_waits_of_an_auto_remove_container);
    tcase_add_test(tc, docker_exec_into_a_container_that_does_not_run_is_409_not_running);
    tcase_add_test(tc, docker_exec_of_a_missing_program_shows_why_and_exits_127);
    tcase_add_test(tc, docker_create_error_names_the_container_once);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(docker_run_errors_suite());
}
