/*
 * Fault injection over berthd's start-up on a store with something in it
 * (an image, a volume with files, a running container with a finished
 * process): opening the store, its crash clean-up, the metadata and the
 * containers' records. berthd-fault is started with BERTH_FAULT=KIND:N
 * for each call of each kind that a start makes. Whatever fails, the
 * daemon must either come up (healthy, or degraded with a reason) or exit
 * with an error line and a non-zero status, never crash or hang; and the
 * next start without a fault must find everything as it was: the image
 * whole, the volume's files, the container running (a new process runs
 * in it) with its process's exit code, and nothing leaked.
 *
 * Then the same over starts that have a crash to clean up after: the
 * daemon SIGKILLed itself (berthd-fault's "kill" fault) mid-way through a
 * volume upload's merge (a journal to roll back), a container create
 * (a record that says "creating") and a layout import (temporaries, a
 * half-unpacked snapshot). The crashed root is kept and put back before
 * each start under a fault; the next start without one must finish the
 * clean-up (the volume as before the upload, no container, no image, no
 * temporary), and the operation must then work.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/fault/fault_suite.h"
#include "tests/fixtures/imgfix.h"

#define CTR "sc"
/* A start costs more than most operations, and its calls are alike (the
 * store's directories, its records read back): few points per kind in
 * the quick walk. */
#define QUICK_POINTS 4

static char *volume_before;

static char *
volume_tree(const struct berthd *b)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/volumes/sv/fs/data", b->root);
    return fault_tree(dir);
}

enum start_outcome { START_LISTENING, START_EXITED, START_HUNG };

/*
 * Starts berthd-fault on b's root with BERTH_FAULT=spec and waits (20 s)
 * until it listens or exits. Unlike berthd_start, an exit is an answer.
 */
static enum start_outcome
start_armed(struct berthd *b, const char *spec)
{
    static char env[128];
    snprintf(env, sizeof(env), "BERTH_FAULT=%s", spec);
    snprintf(b->log_path, sizeof(b->log_path), "%s/berthd.log", b->tmp);
    int logfd = open(b->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ck_assert_int_ge(logfd, 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(logfd, STDERR_FILENO);
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, STDIN_FILENO);
        dup2(devnull, STDOUT_FILENO);
        putenv(env);
        execl(harness_berthd_path(), harness_berthd_path(), "--listen", "127.0.0.1:0", "--root",
              b->root, (char *)NULL);
        _exit(127);
    }
    close(logfd);
    b->pid = pid;
    b->port = 0;
    double deadline = now_ms() + 20000;
    while (now_ms() < deadline) {
        char *log = berthd_log(b);
        const char *p = strstr(log, "listening on http://127.0.0.1:");
        if (p)
            b->port = (unsigned)strtoul(p + strlen("listening on http://127.0.0.1:"), NULL, 10);
        free(log);
        if (b->port) {
            snprintf(b->base_url, sizeof(b->base_url), "http://127.0.0.1:%u", b->port);
            return START_LISTENING;
        }
        if (!berthd_alive(b))
            return START_EXITED;
        sleep_ms(20);
    }
    berthd_kill(b);
    return START_HUNG;
}

/* Makes the store: image, volume with files, container with a finished process. */
static void
populate(struct berthd *b)
{
    struct hresp r;
    fx_import_layout(b, "?name=base:1", fx_path("base"), NULL, &r);
    ck_assert_msg(r.status == 201, "import: %ld %s", r.status, r.body);
    hresp_free(&r);
    fault_http(b, "POST", "/v1/volumes", "{\"handle\":\"sv\"}", &r);
    ck_assert_msg(r.status == 201, "volume: %ld %s", r.status, r.body);
    hresp_free(&r);
    struct fx_buf t = {0};
    fx_tar_add(&t, "d/", '5', NULL, NULL, 0, 0755);
    fx_tar_file(&t, "d/f", "volume file\n");
    fx_tar_end(&t);
    http_do(b,
            &(struct hreq){.method = "PUT",
                           .path = "/v1/volumes/sv/files?path=/",
                           .body = t.data,
                           .body_len = t.len,
                           .headers = (const char *[]){"Expect:", NULL},
                           .timeout_ms = 30000},
            &r);
    ck_assert_msg(r.status == 200, "upload: %ld %s", r.status, r.body);
    hresp_free(&r);
    free(t.data);
    volume_before = volume_tree(b);
    ctr_track(b, CTR);
    ctr_create(b,
               "{\"handle\":\"" CTR "\",\"image\":\"base:1\","
               "\"mounts\":[{\"volume\":\"sv\",\"target\":\"/mnt/v\"}]}",
               &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(proc_run_sh(b, CTR, "p1", "exit 7", NULL), 7);
}

/* Everything populate made is there and works, and nothing leaked. */
static void
assert_whole(struct berthd *b, const char *what)
{
    fault_check_store(b, what);
    struct hresp r;
    http_get(b, "/v1/images/base:1", &r);
    fault_check(b, what, r.status == 200, "image base: %ld %.300s", r.status, r.body);
    hresp_free(&r);
    char *now = volume_tree(b);
    fault_check(b, what, strcmp(now, volume_before) == 0, "volume sv changed:\n%s\nwas:\n%s", now,
                volume_before);
    free(now);
    http_get(b, "/v1/containers/" CTR, &r);
    json_object *st = json_at(r.json, "state");
    fault_check(b, what,
                r.status == 200 && st && strcmp(json_object_get_string(st), "running") == 0,
                "container %s: %ld %.300s", CTR, r.status, r.body);
    hresp_free(&r);
    http_get(b, "/v1/containers/" CTR "/processes/p1", &r);
    json_object *code = json_at(r.json, "exit_code");
    fault_check(b, what, r.status == 200 && code && json_object_get_int(code) == 7,
                "process p1: %ld %.300s", r.status, r.body);
    hresp_free(&r);
    static unsigned seq;
    char id[32], *out = NULL;
    snprintf(id, sizeof(id), "q%u", ++seq);
    int ec = proc_run_sh(b, CTR, id, "cat /mnt/v/d/f", &out);
    fault_check(b, what, ec == 0 && strcmp(out, "volume file\n") == 0,
                "a process after the restart: exit %d, output %s", ec, out);
    free(out);
}

/* The daemon ended its run under a fault: cleanly, or with an error it states. */
static void
check_exit(struct berthd *b, const char *what)
{
    int st = b->wait_status;
    char *log = berthd_log(b);
    fault_check(b, what, !WIFSIGNALED(st), "berthd-fault died of signal %d at start-up",
                WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    fault_check(b, what,
                !WIFEXITED(st) || WEXITSTATUS(st) == 0 || strstr(log, "berthd: ") ||
                    strstr(log, " error "),
                "berthd-fault exited %d at start-up without saying why", WEXITSTATUS(st));
    free(log);
}

START_TEST(every_failed_step_of_a_start_leaves_the_store_whole_for_the_next)
{
    ctr_require_runtime();
    if (!fault_point_wanted("start", NULL, 0))
        return;
    struct berthd b = {0};
    fault_berthd_start(&b, NULL);
    populate(&b);
    ck_assert_int_eq(berthd_term(&b, 20000), 0);

    /* Counting: a start with nothing armed, up to its first idle moment. */
    fault_berthd_start(&b, NULL);
    ck_assert(wait_health_int(&b, "jobs.running", 0, 10000));
    struct fault_counts c;
    fault_counts_get(&b, &c);
    assert_whole(&b, "start (counting run)");
    ck_assert_int_eq(berthd_term(&b, 20000), 0);
    fprintf(stderr, "fault walk start: calls:");
    for (int k = 0; k < FAULT_KINDS; k++)
        fprintf(stderr, " %s=%lu", fault_kind_names[k], c.calls[k]);
    fprintf(stderr, "\n");

    unsigned walked = 0;
    for (int k = 0; k < FAULT_KINDS; k++) {
        unsigned long points[512];
        size_t np =
            fault_walk_points(c.calls[k], false, fault_quick_points(k, QUICK_POINTS), points, 512);
        unsigned up = 0, exited = 0;
        for (size_t i = 0; i < np; i++) {
            char spec[64], what[256];
            snprintf(spec, sizeof(spec), "%s:%lu", fault_kind_names[k], points[i]);
            snprintf(what, sizeof(what), "start %s", spec);
            if (!fault_point_wanted("start", fault_kind_names[k], points[i]))
                continue;
            walked++;
            enum start_outcome o = start_armed(&b, spec);
            fault_check(&b, what, o != START_HUNG, "berthd-fault neither listened nor exited");
            if (o == START_LISTENING) {
                up++;
                /* Up: healthy, or degraded with a reason; then a clean stop. */
                struct hresp r;
                http_get(&b, "/v1/health", &r);
                fault_check(&b, what,
                            r.status == 200 || (r.status == 503 && json_at(r.json, "reason")),
                            "/v1/health: %ld %.300s", r.status, r.body);
                hresp_free(&r);
                int st = berthd_term(&b, 20000);
                fault_check(&b, what, st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                            "no clean stop after a start under the fault: 0x%x", st);
            } else if (o == START_EXITED) {
                exited++;
                check_exit(&b, what);
            }
            /* The next start, with nothing armed, finds everything. */
            char next[300];
            snprintf(next, sizeof(next), "%s, then a start without it", what);
            fault_berthd_start(&b, NULL);
            assert_whole(&b, next);
            ck_assert_int_eq(berthd_term(&b, 20000), 0);
        }
        if (np)
            fprintf(stderr, "fault walk start %s: %zu of %lu calls (%u came up, %u exited)\n",
                    fault_kind_names[k], np, c.calls[k], up, exited);
    }
    fault_checks_done("start");
    ck_assert(walked > 0 || fault_walk_filtered());
    fault_berthd_start(&b, NULL);
    ctr_delete(&b, CTR);
    berthd_finish(&b);
    free(volume_before);
}
END_TEST

/* ---- starts after a crash ------------------------------------------------------------ */

struct scenario {
    const char *name;
    /* Whether the crash is made again for every point instead of its root
     * being copied back: a merge journal names inodes, which a copy changes. */
    bool recrash;
    /* Brings b (running) to the moment of the crash and crashes it. */
    void (*crash)(struct berthd *b);
    /* After a start without a fault: the crash cleaned up, and the operation works. */
    void (*recovered)(struct berthd *b, const char *what);
};

static struct fx_buf tar_a, tar_b;

static void
put(struct berthd *b, const char *vol, const struct fx_buf *t, struct hresp *r)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/volumes/%s/files?path=/", vol);
    http_do(b,
            &(struct hreq){.method = "PUT",
                           .path = path,
                           .body = t->data,
                           .body_len = t->len,
                           .headers = (const char *[]){"Expect:", NULL},
                           .timeout_ms = 30000},
            r);
}

/* Arms spec and runs op; whether the daemon killed itself there (else op ran to the end). */
static bool
crash_during(struct berthd *b, const char *spec, void (*op)(struct berthd *b))
{
    fault_arm(b, spec);
    op(b);
    double deadline = now_ms() + 2000;
    while (berthd_alive(b) && now_ms() < deadline)
        sleep_ms(10);
    if (berthd_alive(b)) {
        fault_reset(b);
        return false;
    }
    ck_assert_msg(WIFSIGNALED(b->wait_status) && WTERMSIG(b->wait_status) == SIGKILL,
                  "berthd-fault ended with status 0x%x, not the kill at %s", b->wait_status, spec);
    return true;
}

static void
upload_b(struct berthd *b)
{
    struct hresp r;
    put(b, "rv", &tar_b, &r);
    hresp_free(&r);
}

static bool
has_journal(const struct berthd *b)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof(cmd), "ls -A '%s/volumes/rv/fs' | grep -q 'journal$'", b->root);
    return ctr_sh("%s", cmd) == 0;
}

/* Volume rv, made afresh with tar A in it. */
static void
volume_fresh(struct berthd *b)
{
    struct hresp r;
    fault_http(b, "DELETE", "/v1/volumes/rv", NULL, &r);
    hresp_free(&r);
    fault_http(b, "POST", "/v1/volumes", "{\"handle\":\"rv\"}", &r);
    ck_assert_msg(r.status == 201, "create rv: %ld %s", r.status, r.body);
    hresp_free(&r);
    put(b, "rv", &tar_a, &r);
    ck_assert_msg(r.status == 200, "upload A: %ld %s", r.status, r.body);
    hresp_free(&r);
}

static unsigned long volume_kill_at; /* found by the first crash, reused by the others */

static void
volume_crash(struct berthd *b)
{
    if (volume_kill_at) {
        volume_fresh(b);
        char spec[32];
        snprintf(spec, sizeof(spec), "rename:%lu:kill", volume_kill_at);
        ck_assert_msg(crash_during(b, spec, upload_b), "no kill at %s", spec);
        ck_assert_msg(has_journal(b), "the kill at %s left no journal this time", spec);
        return;
    }
    volume_fresh(b);
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/volumes/rv/fs/data", b->root);
    free(volume_before);
    volume_before = fault_tree(dir);
    /* How many renames the upload makes: the journal's own, then the
     * merge's steps. Killed at the last step that leaves a journal, the
     * start has the most to undo. */
    fault_reset(b);
    upload_b(b);
    struct fault_counts c;
    fault_counts_get(b, &c);
    for (unsigned long n = c.calls[FAULT_RENAME]; n >= 2; n--) {
        volume_fresh(b);
        char spec[32];
        snprintf(spec, sizeof(spec), "rename:%lu:kill", n);
        ck_assert_msg(crash_during(b, spec, upload_b), "no kill at %s", spec);
        if (has_journal(b)) {
            volume_kill_at = n;
            fprintf(stderr, "fault walk recover-volume-upload: killed at rename %lu of %lu\n", n,
                    c.calls[FAULT_RENAME]);
            return;
        }
        fault_berthd_start(b, NULL);
    }
    ck_abort_msg("no rename of the upload left a merge journal");
}

static void
volume_recovered(struct berthd *b, const char *what)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/volumes/rv/fs/data", b->root);
    char *now = fault_tree(dir);
    fault_check(b, what, strcmp(now, volume_before) == 0,
                "the interrupted upload was not rolled back:\n%s\nbefore it:\n%s", now,
                volume_before);
    free(now);
    struct hresp r;
    put(b, "rv", &tar_b, &r);
    fault_check(b, what, r.status == 200, "the upload again: %ld %.300s", r.status, r.body);
    hresp_free(&r);
}

static void
create_rc(struct berthd *b)
{
    struct hresp r;
    ctr_create(b,
               "{\"handle\":\"rc\",\"image\":\"base:1\","
               "\"mounts\":[{\"volume\":\"cv\",\"target\":\"/mnt/v\"}]}",
               &r);
    hresp_free(&r);
}

static void
create_crash(struct berthd *b)
{
    struct hresp r;
    fx_import_layout(b, "?name=base:1", fx_path("base"), NULL, &r);
    ck_assert_int_eq(r.status, 201);
    hresp_free(&r);
    fault_http(b, "POST", "/v1/volumes", "{\"handle\":\"cv\"}", &r);
    ck_assert_int_eq(r.status, 201);
    hresp_free(&r);
    ctr_track(b, "rc");
    /* At the rootfs's overlay mount: the record says "creating", the image
     * and the volume have a user, nothing is mounted yet. */
    ck_assert(crash_during(b, "mount:1:kill", create_rc));
}

static void
create_recovered(struct berthd *b, const char *what)
{
    struct hresp r;
    http_get(b, "/v1/containers/rc", &r);
    fault_check(b, what, r.status == 404, "the interrupted container is listed: %ld %.300s",
                r.status, r.body);
    hresp_free(&r);
    http_get(b, "/v1/images/base:1", &r);
    json_object *n = json_at(r.json, "containers");
    fault_check(b, what, r.status == 200 && n && json_object_get_int(n) == 0,
                "image base after the undo: %ld %.300s", r.status, r.body);
    hresp_free(&r);
    http_get(b, "/v1/volumes/cv", &r);
    n = json_at(r.json, "containers");
    fault_check(b, what, r.status == 200 && n && json_object_get_int(n) == 0,
                "volume cv after the undo: %ld %.300s", r.status, r.body);
    hresp_free(&r);
    create_rc(b);
    http_get(b, "/v1/containers/rc", &r);
    long st = r.status;
    fault_check(b, what, st == 200, "the create again: %ld %.300s", r.status, r.body);
    hresp_free(&r);
    if (st == 200)
        ctr_delete(b, "rc");
}

static void
import_child(struct berthd *b)
{
    struct hresp r;
    fx_import_layout(b, "?name=child:1", fx_path("child"), NULL, &r);
    hresp_free(&r);
}

static void
import_crash(struct berthd *b)
{
    /* Mid-way through the first layer's busybox. */
    ck_assert(crash_during(b, "write:12:kill", import_child));
}

static void
import_recovered(struct berthd *b, const char *what)
{
    fault_check(b, what, fx_image_count(b) == 0, "an image is listed after the crash");
    struct hresp r;
    fx_import_layout(b, "?name=child:1", fx_path("child"), NULL, &r);
    fault_check(b, what, r.status == 201, "the import again: %ld %.300s", r.status, r.body);
    hresp_free(&r);
}

static const struct scenario scenarios[] = {
    {"recover-volume-upload", true, volume_crash, volume_recovered},
    {"recover-container-create", false, create_crash, create_recovered},
    {"recover-import", false, import_crash, import_recovered},
};

/* Puts the crashed root back (the daemon is not running; nothing is mounted there). */
static void
restore(const struct berthd *b, const char *saved)
{
    ck_assert_int_eq(ctr_sh("rm -rf '%s' && cp -a '%s' '%s'", b->root, saved, b->root), 0);
}

START_TEST(every_failed_step_of_a_recovery_leaves_it_to_the_next_start)
{
    ctr_require_runtime();
    if (tar_a.len == 0) {
        fx_tar_add(&tar_a, "a/", '5', NULL, NULL, 0, 0755);
        fx_tar_file(&tar_a, "a/one", "one\n");
        fx_tar_file(&tar_a, "a/two", "two\n");
        fx_tar_file(&tar_a, "top", "top\n");
        fx_tar_end(&tar_a);
        fx_tar_add(&tar_b, "a/", '5', NULL, NULL, 0, 0700);
        fx_tar_file(&tar_b, "a/one", "one, replaced\n");
        fx_tar_file(&tar_b, "a/two", "two, replaced\n");
        fx_tar_add(&tar_b, "a/three/", '5', NULL, NULL, 0, 0755);
        fx_tar_file(&tar_b, "a/three/x", "new\n");
        fx_tar_file(&tar_b, "top", "top, replaced\n");
        fx_tar_end(&tar_b);
    }
    const struct scenario *sc = &scenarios[_i];
    if (!fault_point_wanted(sc->name, NULL, 0))
        return;
    struct berthd b = {0};
    fault_berthd_start(&b, NULL);
    sc->crash(&b);
    char saved[PATH_MAX + 16];
    snprintf(saved, sizeof(saved), "%s/crashed", b.tmp);
    ck_assert_int_eq(ctr_sh("cp -a '%s' '%s'", b.root, saved), 0);

    /* Counting: the recovering start with nothing armed. */
    char what[256];
    snprintf(what, sizeof(what), "%s (counting run)", sc->name);
    fault_berthd_start(&b, NULL);
    ck_assert(wait_health_int(&b, "jobs.running", 0, 10000));
    struct fault_counts c;
    fault_counts_get(&b, &c);
    sc->recovered(&b, what);
    fault_check_store(&b, what);
    ck_assert_int_eq(berthd_term(&b, 20000), 0);
    fprintf(stderr, "fault walk %s: calls:", sc->name);
    for (int k = 0; k < FAULT_KINDS; k++)
        fprintf(stderr, " %s=%lu", fault_kind_names[k], c.calls[k]);
    fprintf(stderr, "\n");

    for (int k = 0; k < FAULT_KINDS; k++) {
        unsigned long points[512];
        size_t np =
            fault_walk_points(c.calls[k], false, fault_quick_points(k, QUICK_POINTS), points, 512);
        unsigned up = 0, exited = 0, here = 0;
        for (size_t i = 0; i < np; i++) {
            if (!fault_point_wanted(sc->name, fault_kind_names[k], points[i]))
                continue;
            here++;
            char spec[64];
            snprintf(spec, sizeof(spec), "%s:%lu", fault_kind_names[k], points[i]);
            snprintf(what, sizeof(what), "%s %s", sc->name, spec);
            if (sc->recrash) {
                fault_berthd_start(&b, NULL);
                sc->crash(&b);
            } else {
                restore(&b, saved);
            }
            enum start_outcome o = start_armed(&b, spec);
            fault_check(&b, what, o != START_HUNG, "berthd-fault neither listened nor exited");
            if (o == START_LISTENING) {
                up++;
                ck_assert(wait_health_int(&b, "jobs.running", 0, 10000));
                int st = berthd_term(&b, 20000);
                fault_check(&b, what, st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                            "no clean stop after a recovery under the fault: 0x%x", st);
            } else if (o == START_EXITED) {
                exited++;
                check_exit(&b, what);
            }
            char next[300];
            snprintf(next, sizeof(next), "%s, then a start without it", what);
            fault_berthd_start(&b, NULL);
            ck_assert(wait_health_int(&b, "jobs.running", 0, 10000));
            sc->recovered(&b, next);
            fault_check_store(&b, next);
            ck_assert_int_eq(berthd_term(&b, 20000), 0);
        }
        if (here)
            fprintf(stderr, "fault walk %s %s: %u of %lu calls (%u came up, %u exited)\n", sc->name,
                    fault_kind_names[k], here, c.calls[k], up, exited);
    }
    fault_checks_done(sc->name);
    fault_berthd_start(&b, NULL);
    berthd_finish(&b);
}
END_TEST

static Suite *
fault_start_suite(void)
{
    Suite *s = suite_create("api_fault_start");
    TCase *tc = tcase_create("walk");
    tcase_set_timeout(tc, fault_walk_timeout(600));
    ctr_add_fixture(tc);
    tcase_add_test(tc, every_failed_step_of_a_start_leaves_the_store_whole_for_the_next);
    tcase_add_loop_test(tc, every_failed_step_of_a_recovery_leaves_it_to_the_next_start, 0,
                        sizeof(scenarios) / sizeof(scenarios[0]));
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
    int rc = harness_run_suite(fault_start_suite());
    fx_cleanup();
    return rc;
}
