/*
 * The Docker API's streams with the real clients (every docker CLI this
 * machine has, and docker-py): docker logs of a finished container with
 * stdout and stderr in the order written, one stream, --tail, -t and
 * --since; docker logs -f that ends with the container; docker-py's
 * containers.run, which reads the output through the logs route.
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

/* Runs a command expected to succeed; its whole output (caller frees). */
static char *
dk_all(const struct berthd *b, const struct dk_client *cl, const char *cmd)
{
    char *out = NULL;
    int st = dk_run(b, cl, &out, "%s", cmd);
    ck_assert_msg(st == 0, "docker %s: %s: %d\n%s", cl->version, cmd, st, out);
    return out;
}

START_TEST(docker_logs_give_stdout_and_stderr_in_the_order_written)
{
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        dk_start(&b, i % 2 == 1, NULL);
        const struct dk_client *cl = &clis[i];
        dk_load_busybox(&b);
        char *id = dk_ok(&b, cl, 0,
                         "\"$D\" run -d busybox sh -c 'echo a; sleep 0.3; echo b >&2; sleep 0.3; "
                         "echo c'");
        ctr_track(&b, id);
        free(dk_ok(&b, cl, 0, "\"$D\" wait %s", id));
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "\"$D\" logs %s 2>&1", id);
        char *out = dk_all(&b, cl, cmd);
        ck_assert_msg(strcmp(out, "a\nb\nc\n") == 0, "docker %s logs: %s", cl->version, out);
        free(out);
        snprintf(cmd, sizeof(cmd), "\"$D\" logs %s 2>/dev/null", id);
        out = dk_all(&b, cl, cmd);
        ck_assert_str_eq(out, "a\nc\n");
        free(out);
        snprintf(cmd, sizeof(cmd), "\"$D\" logs %s 2>&1 >/dev/null", id);
        out = dk_all(&b, cl, cmd);
        ck_assert_str_eq(out, "b\n");
        free(out);
        snprintf(cmd, sizeof(cmd), "\"$D\" logs --tail 2 %s 2>&1", id);
        out = dk_all(&b, cl, cmd);
        ck_assert_str_eq(out, "b\nc\n");
        free(out);
        /* -t: each line after its time; --since that time gives it and what follows. */
        snprintf(cmd, sizeof(cmd), "\"$D\" logs -t %s 2>&1 | sed -n 2p | cut -d' ' -f1", id);
        char *t2 = dk_all(&b, cl, cmd);
        ck_assert_msg(strlen(t2) == 31 && t2[4] == '-' && t2[10] == 'T' && t2[29] == 'Z', "%s", t2);
        t2[30] = '\0';
        snprintf(cmd, sizeof(cmd), "\"$D\" logs --since %s %s 2>&1", t2, id);
        out = dk_all(&b, cl, cmd);
        ck_assert_msg(strcmp(out, "b\nc\n") == 0, "docker %s logs --since %s: %s", cl->version, t2,
                      out);
        free(out);
        free(t2);
        free(dk_ok(&b, cl, 0, "\"$D\" rm %s", id));
        free(id);
        berthd_finish(&b);
    }
}
END_TEST

START_TEST(docker_logs_follow_ends_with_the_container)
{
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        dk_start(&b, i % 2 == 0, NULL);
        const struct dk_client *cl = &clis[i];
        dk_load_busybox(&b);
        char *id = dk_ok(&b, cl, 0, "\"$D\" run -d busybox sh -c 'echo x; sleep 1; echo y'");
        ctr_track(&b, id);
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "\"$D\" logs -f %s 2>&1", id);
        double t0 = now_ms();
        char *out = dk_all(&b, cl, cmd);
        ck_assert_str_eq(out, "x\ny\n");
        ck_assert_msg(now_ms() - t0 >= 500, "logs -f returned before the container ended");
        free(out);
        free(dk_ok(&b, cl, 0, "\"$D\" rm -f %s", id));
        free(id);
        berthd_finish(&b);
    }
}
END_TEST

START_TEST(docker_run_attaches_prints_the_output_and_exits_with_the_code)
{
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        dk_start(&b, i % 2 == 1, NULL);
        const struct dk_client *cl = &clis[i];
        dk_load_busybox(&b);
        char *out = dk_all(&b, cl, "\"$D\" run --rm busybox echo hi");
        ck_assert_msg(strcmp(out, "hi\n") == 0, "docker %s run: %s", cl->version, out);
        free(out);
        out = NULL;
        int st = dk_run(&b, cl, &out, "\"$D\" run --rm busybox sh -c 'echo o; echo e >&2; exit 3'");
        ck_assert_msg(st == 3, "docker %s run: exit %d: %s", cl->version, st, out);
        ck_assert_msg(strcmp(out, "o\ne\n") == 0, "docker %s run: %s", cl->version, out);
        free(out);
        /* --hostname names the container everywhere: its UTS name, and the
         * /etc/hostname and /etc/hosts berth writes (the merge of the network
         * and the Docker API once gave the network the handle instead). */
        out = dk_all(&b, cl,
                     "\"$D\" run --rm --hostname web busybox sh -c 'hostname; cat /etc/hostname; "
                     "grep -c web /etc/hosts'");
        ck_assert_msg(strcmp(out, "web\nweb\n1\n") == 0, "docker %s run --hostname: %s",
                      cl->version, out);
        free(out);
        /* Stdin piped in: the container reads it to its end. */
        out = dk_all(&b, cl,
                     "printf 'line1\\nline2\\n' | \"$D\" run -i --rm busybox sh -c 'cat; echo "
                     "done'");
        ck_assert_msg(strcmp(out, "line1\nline2\ndone\n") == 0, "docker %s run -i: %s", cl->version,
                      out);
        free(out);
        /* Two at once with the same command do not collide. */
        out = dk_all(&b, cl,
                     "t=$(mktemp -d); ( \"$D\" run --rm busybox echo same > $t/a & \"$D\" run "
                     "--rm busybox echo same > $t/b; wait ); cat $t/a $t/b; rm -r $t");
        ck_assert_msg(strcmp(out, "same\nsame\n") == 0, "docker %s: %s", cl->version, out);
        free(out);
        char *left = dk_ok(&b, cl, 0, "\"$D\" ps -aq | wc -l");
        ck_assert_str_eq(left, "0");
        free(left);
        berthd_finish(&b);
    }
}
END_TEST

START_TEST(docker_exec_runs_in_the_container_with_its_exit_code_and_stdin)
{
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        dk_start(&b, i % 2 == 0, NULL);
        const struct dk_client *cl = &clis[i];
        dk_load_busybox(&b);
        char *id = dk_ok(&b, cl, 0, "\"$D\" run -d busybox sh -c 'echo ready > /tmp/m; sleep 300'");
        ctr_track(&b, id);
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "\"$D\" exec %s sh -c 'cat /tmp/m; echo e >&2; exit 5'", id);
        char *out = NULL;
        int st = dk_run(&b, cl, &out, "%s", cmd);
        ck_assert_msg(st == 5, "docker %s exec: exit %d: %s", cl->version, st, out);
        ck_assert_msg(strcmp(out, "ready\ne\n") == 0, "docker %s exec: %s", cl->version, out);
        free(out);
        snprintf(cmd, sizeof(cmd), "printf 'abc' | \"$D\" exec -i %s sh -c 'cat; echo .'", id);
        out = dk_all(&b, cl, cmd);
        ck_assert_msg(strcmp(out, "abc.\n") == 0, "docker %s exec -i: %s", cl->version, out);
        free(out);
        /* -d: started, and its work seen afterwards. */
        free(dk_ok(&b, cl, 0, "\"$D\" exec -d %s sh -c 'echo later > /tmp/d'", id));
        snprintf(cmd, sizeof(cmd),
                 "for n in 1 2 3 4 5 6 7 8 9 10; do \"$D\" exec %s cat /tmp/d 2>/dev/null && "
                 "break; sleep 0.2; done",
                 id);
        out = dk_all(&b, cl, cmd);
        ck_assert_str_eq(out, "later\n");
        free(out);
        free(dk_ok(&b, cl, 0, "\"$D\" rm -f %s", id));
        free(id);
        berthd_finish(&b);
    }
}
END_TEST

START_TEST(docker_py_containers_run_returns_the_output)
{
    struct dk_client py[DK_MAX_CLIENTS];
    size_t npy = dk_pythons(py);
    for (size_t i = 0; i < npy; i++) {
        struct berthd b = {0};
        dk_start(&b, false, NULL);
        dk_load_busybox(&b);
        char *out = dk_all(&b, &py[i],
                           "\"$D\" -c 'import docker; c = docker.from_env(); "
                           "print(repr(c.containers.run(\"busybox\", \"echo hi\", remove=True)))'");
        ck_assert_msg(strcmp(out, "b'hi\\n'\n") == 0, "docker-py %s: %s", py[i].version, out);
        free(out);
        dk_track_all(&b);
        berthd_finish(&b);
    }
}
END_TEST

static Suite *
docker_streams_suite(void)
{
    Suite *s = suite_create("api_docker_streams");
    TCase *tc = tcase_create("docker_streams");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, setup, NULL);
    ctr_add_fixture(tc);
    tcase_add_test(tc, docker_logs_give_stdout_and_stderr_in_the_order_written);
    tcase_add_test(tc, docker_logs_follow_ends_with_the_container);
    tcase_add_test(tc, docker_run_attaches_prints_the_output_and_exits_with_the_code);
    tcase_add_test(tc, docker_exec_runs_in_the_container_with_its_exit_code_and_stdin);
    tcase_add_test(tc, docker_py_containers_run_returns_the_output);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(docker_streams_suite());
}
