/*
 * What the real docker CLIs (every one this machine has) show and exit
 * with when a container or an exec cannot do what was asked, as the
 * engine has them: a run whose program is not there (exit 127, the
 * engine's "executable file not found", the container left created with
 * that exit code, or removed with --rm instead of a run that never
 * ends), an exec into a container that does not run (409 "is not
 * running"), an exec whose program is not there or cannot be run (126,
 * 127, the message on the terminal), a create whose error names the
 * container once, and a failed start's ExitCode and Error that a restart
 * of berthd keeps (unless a later run replaced them, or one is alive).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/*
 * The engine removes an auto-remove container whose program could not
 * start before it answers the start, and docker 20.10's CLI relies on
 * it: its attach's cancel also cancels its wait for the removal, so it
 * exits at the start's answer. berth answered first and removed after,
 * so a `docker ps -a` right after the CLI listed the container (the
 * sanitized CI run: 1 left, want 0). No wait here at all.
 */
START_TEST(docker_a_failed_start_of_an_auto_remove_container_is_answered_once_it_is_gone)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    for (int round = 0; round < 5; round++) {
        char *id = dk_ok(&b, cl, 0, "\"$D\" create --rm busybox nosuchprog");
        ctr_track(&b, id);
        char *out = NULL;
        int st = dk_run(&b, cl, &out,
                        "curl -s -o /dev/null -w '%%{http_code}' --unix-socket '%s' -X POST "
                        "'http://d/v1.44/containers/%s/start'; echo; "
                        "curl -s --unix-socket '%s' 'http://d/v1.44/containers/json?all=1'",
                        b.docker_sock, id, b.docker_sock);
        ck_assert_msg(st == 0, "curl: %d: %s", st, out);
        out[strcspn(out, "]") + (strchr(out, ']') ? 1 : 0)] = '\0';
        ck_assert_msg(strcmp(out, "400\n[]") == 0,
                      "round %d: the start's answer, then the list of containers: %s (want 400, "
                      "then none: removed before the start was answered)",
                      round, out);
        free(out);
        free(id);
    }
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

/* State.Status, ExitCode and Error of container name, on one line (caller frees). */
static char *
state_line(const struct berthd *b, const struct dk_client *cl, const char *name)
{
    return dk_ok(b, cl, 0,
                 "\"$D\" inspect --format '{{.State.Status}} {{.State.ExitCode}} {{.State.Error}}' "
                 "%s",
                 name);
}

/* A raw start of container name (the CLI hides the status): "<body> <status>" (caller frees). */
static char *
raw_start(const struct berthd *b, const struct dk_client *cl, const char *name)
{
    return dk_ok(b, cl, 0,
                 "curl -s -w ' %%{http_code}' --unix-socket '%s' -X POST "
                 "'http://d/v1.44/containers/%s/start' | tr -d '\\n'",
                 b->docker_sock, name);
}

/* The failed start's record of container name in b's store, into path. */
static void
failure_record(const struct berthd *b, const char *name, char *path, size_t len)
{
    char *id = dk_ok(b, &clis[0], 0, "\"$D\" inspect --format '{{.Id}}' %s", name);
    snprintf(path, len, "%s/containers/%s/main-start-failure.json", b->root, id);
    free(id);
}

/* Each case once: a failed start (a first one, and one after a run), one
 * that a later run replaced, and records that berthd did not write as
 * they are, which it ignores. */
START_TEST(docker_failed_start_survives_a_restart_of_berthd)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    static const char *const names[] = {"fresh", "ranbefore", "fixed", "garbled", "huge", "fifo"};
    enum { NNAMES = sizeof(names) / sizeof(names[0]), NKEPT = 3 };
    free(dk_ok(&b, cl, 0, "\"$D\" create --name fresh busybox nosuchprog"));
    /* Its first run removes its own program: the second start cannot run it. */
    free(dk_ok(&b, cl, 0, "\"$D\" create --name ranbefore busybox /bin/rm /bin/rm"));
    free(dk_ok(&b, cl, 0, "\"$D\" start ranbefore && \"$D\" wait ranbefore"));
    /* Its program is put in after its failed start. */
    free(dk_ok(&b, cl, 0, "\"$D\" create --name fixed busybox /bin/later"));
    for (size_t i = NKEPT; i < NNAMES; i++)
        free(dk_ok(&b, cl, 0, "\"$D\" create --name %s busybox nosuchprog", names[i]));
    dk_track_all(&b);
    char *out = raw_start(&b, cl, "fresh");
    ck_assert_msg(dk_contains(out, "executable file not found in $PATH") &&
                      dk_contains(out, "} 400"),
                  "%s", out);
    free(out);
    out = raw_start(&b, cl, "ranbefore");
    ck_assert_msg(dk_contains(out, "stat /bin/rm: no such file or directory") &&
                      dk_contains(out, "} 400"),
                  "%s", out);
    free(out);
    for (size_t i = 2; i < NNAMES; i++)
        free(raw_start(&b, cl, names[i]));
    char paths[NNAMES][PATH_MAX + 128];
    for (size_t i = 0; i < NNAMES; i++)
        failure_record(&b, names[i], paths[i], sizeof(paths[i]));
    ck_assert_msg(access(paths[2], F_OK) == 0, "fixed: no record of its failed start");
    free(dk_ok(&b, cl, 0,
               "printf '#!/bin/sh\\nexit 3\\n' > '%s/later' && chmod 755 '%s/later' && "
               "\"$D\" cp '%s/later' fixed:/bin/later && \"$D\" start fixed && \"$D\" wait fixed",
               b.tmp, b.tmp, b.tmp));
    ck_assert_msg(access(paths[2], F_OK) != 0, "fixed: the record of its failed start is left");
    char *before[NNAMES];
    for (size_t i = 0; i < NNAMES; i++)
        before[i] = state_line(&b, cl, names[i]);
    ck_assert_msg(strncmp(before[0], "created 127 ", 12) == 0 &&
                      dk_contains(before[0], "failed to create task") &&
                      dk_contains(before[0], "executable file not found"),
                  "%s", before[0]);
    ck_assert_msg(strncmp(before[1], "exited 127 ", 11) == 0 &&
                      dk_contains(before[1], "stat /bin/rm: no such file or directory"),
                  "%s", before[1]);
    ck_assert_str_eq(before[2], "exited 3 ");

    berthd_stop(&b);
    /* A failure older than fixed's run (a removal a power loss undid). */
    ck_assert_int_eq(ctr_sh("cp '%s' '%s'", paths[0], paths[2]), 0);
    /* What berthd did not write: not JSON, too large, a FIFO (a read would block). */
    ck_assert_int_eq(ctr_sh("printf '{\"exit_code\":127,' > '%s'", paths[3]), 0);
    ck_assert_int_eq(ctr_sh("head -c 100000 /dev/zero | tr '\\0' ' ' > '%s'", paths[4]), 0);
    ck_assert_int_eq(unlink(paths[5]), 0);
    ck_assert_int_eq(mkfifo(paths[5], 0600), 0);
    dk_start(&b, false, NULL);

    for (size_t i = 0; i < NKEPT; i++) {
        char *after = state_line(&b, cl, names[i]);
        ck_assert_msg(strcmp(after, before[i]) == 0, "%s: before the restart \"%s\", after \"%s\"",
                      names[i], before[i], after);
        free(after);
    }
    /* The others loaded, their records ignored, each with a log line. */
    for (size_t i = NKEPT; i < NNAMES; i++) {
        char *after = state_line(&b, cl, names[i]);
        ck_assert_msg(strcmp(after, "created 0 ") == 0, "%s: %s", names[i], after);
        free(after);
    }
    char *log = berthd_log(&b);
    ck_assert_msg(count(log, "start failure record in ") == 3 && count(log, "; ignored\n") == 3,
                  "%s", log);
    free(log);
    for (size_t i = 0; i < NNAMES; i++) {
        free(before[i]);
        free(dk_ok(&b, cl, 0, "\"$D\" rm -f %s", names[i]));
    }
    berthd_finish(&b);
}
END_TEST

/* Writes text as the failed start's record of container name in b's store. */
static void
put_failure_record(const struct berthd *b, const char *name, const char *text)
{
    char path[PATH_MAX + 128];
    failure_record(b, name, path, sizeof(path));
    FILE *f = fopen(path, "w");
    ck_assert_msg(f, "%s: cannot write %s", name, path);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

/*
 * A failed start's record beside a main run that is alive: the start's
 * job runs the program before it removes the record, and berthd killed
 * between the two leaves it. Its time (the year 2100: a clock that
 * stepped back since) says nothing: the run wins, by its number (the
 * record's is that of the run, or an earlier one) or by being alive (a
 * record without a number, or one ahead of every run). An auto-remove
 * container is not removed for it.
 */
START_TEST(docker_failed_start_record_beside_a_live_run_is_ignored_after_a_kill)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    static const struct {
        const char *name, *rm, *run;
    } cases[] = {
        {"unnumbered", "", ""},
        {"unnumbered_rm", "--rm", ""},
        {"numbered_rm", "--rm", ",\"run\":1"},
        {"ahead_rm", "--rm", ",\"run\":9"},
    };
    enum { NCASES = sizeof(cases) / sizeof(cases[0]) };
    for (size_t i = 0; i < NCASES; i++)
        free(dk_ok(&b, cl, 0, "\"$D\" run -d %s --name %s busybox sleep 1000", cases[i].rm,
                   cases[i].name));
    dk_track_all(&b);
    for (size_t i = 0; i < NCASES; i++) {
        char text[256];
        snprintf(text, sizeof(text),
                 "{\"exit_code\":127,\"error\":\"exec: \\\"gone\\\": executable file not "
                 "found in $PATH\",\"at_ms\":4102444800000%s}",
                 cases[i].run);
        put_failure_record(&b, cases[i].name, text);
    }
    berthd_kill(&b);
    dk_start(&b, false, NULL);

    char *ps =
        dk_ok(&b, cl, 0, "\"$D\" ps -a --format '{{.Names}} {{.State}}' | sort | tr '\\n' ,");
    ck_assert_msg(strcmp(ps, "ahead_rm running,numbered_rm running,unnumbered running,"
                             "unnumbered_rm running,") == 0,
                  "%s", ps);
    free(ps);
    for (size_t i = 0; i < NCASES; i++) {
        char *after = state_line(&b, cl, cases[i].name);
        ck_assert_msg(strcmp(after, "running 0 ") == 0, "%s: %s", cases[i].name, after);
        free(after);
        free(dk_ok(&b, cl, 0, "\"$D\" rm -f %s", cases[i].name));
    }
    berthd_finish(&b);
}
END_TEST

/*
 * Not-running waits sent, a few milliseconds apart, while a start of
 * container id runs, in 5 rounds of 25: "<round>.<wait>:<its body>" lines;
 * a wait that got no answer within 5 s has none (caller frees).
 */
static char *
waits_during_starts(const struct berthd *b, const char *id)
{
    char *out = NULL;
    int st = dk_run(b, &clis[0], &out,
                    "U='http://d/v1.44/containers/%s'; for r in 1 2 3 4 5; do "
                    "curl -s -o /dev/null --unix-socket '%s' -X POST \"$U/start\" & "
                    "for i in $(seq 1 25); do curl -s -m 5 -o \"%s/w$r.$i\" --unix-socket '%s' "
                    "-X POST \"$U/wait?condition=not-running\" & sleep 0.005; done; wait; done; "
                    "for f in '%s'/w*; do echo \"${f##*/w}:$(cat \"$f\")\"; done",
                    id, b->docker_sock, b->tmp, b->docker_sock, b->tmp);
    ck_assert_msg(st == 0, "sh: %d: %s", st, out);
    return out;
}

/* As the engine, which answers them once the start let go of the container. */
START_TEST(docker_not_running_wait_during_a_start_ends_with_it_or_follows_its_run)
{
    const struct dk_client *cl = &clis[0];
    struct berthd b = {0};
    dk_start(&b, false, NULL);
    dk_load_busybox(&b);
    /* A start that fails: each wait is answered with its 127 (the first
     * start made it the container's, for the waits that come before one). */
    char *id = dk_ok(&b, cl, 0, "\"$D\" create busybox nosuchprog");
    ctr_track(&b, id);
    free(raw_start(&b, cl, id));
    char *out = waits_during_starts(&b, id);
    unsigned failed = count(out, ":{\"StatusCode\":127");
    ck_assert_msg(failed == 125, "%u of 125 waits answered: %.900s", failed, out);
    free(out);
    free(dk_ok(&b, cl, 0, "\"$D\" rm %s", id));
    free(id);
    /* A start that runs: the waits that came during it follow its run. */
    ck_assert_int_eq(ctr_sh("rm -f '%s'/w*", b.tmp), 0);
    id = dk_ok(&b, cl, 0, "\"$D\" create busybox sh -c 'sleep 0.3; exit 3'");
    ctr_track(&b, id);
    out = waits_during_starts(&b, id);
    unsigned ran = count(out, ":{\"StatusCode\":3");
    unsigned before = count(out, ":{\"StatusCode\":0");
    ck_assert_msg(ran > 0 && ran + before == 125, "%u waits followed a run, %u came before: %.900s",
                  ran, before, out);
    free(out);
    free(dk_ok(&b, cl, 0, "\"$D\" rm %s", id));
    free(id);
    berthd_finish(&b);
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
    tcase_add_test(tc,
                   docker_a_failed_start_of_an_auto_remove_container_is_answered_once_it_is_gone);
    tcase_add_test(tc, docker_not_running_wait_during_a_start_ends_with_it_or_follows_its_run);
    tcase_add_test(tc, docker_exec_into_a_container_that_does_not_run_is_409_not_running);
    tcase_add_test(tc, docker_exec_of_a_missing_program_shows_why_and_exits_127);
    tcase_add_test(tc, docker_create_error_names_the_container_once);
    tcase_add_test(tc, docker_failed_start_survives_a_restart_of_berthd);
    tcase_add_test(tc, docker_failed_start_record_beside_a_live_run_is_ignored_after_a_kill);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(docker_run_errors_suite());
}
