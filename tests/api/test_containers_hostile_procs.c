/*
 * Hostile processes against the container runtime: what a process of one
 * container (root in it, default capabilities and seccomp) can plant for
 * the next container or do to its own container's init.
 *
 *   - Volumes outlive containers and are shared between them, so their
 *     content is the processes'. A mount nested in another mount's target
 *     is resolved by the runtime inside that mount, not in the image: a
 *     symlink a process left in the outer volume led runc's mount of the
 *     inner one onto the container's root, and runc's /dev set-up then
 *     followed the inner volume's `dev` symlink on the host (it removed
 *     and replaced a host `ptmx` and made `fd`, `stdin`... there).
 *   - The init is not dumpable, but prlimit(2) only asks for the same
 *     credentials: a root process set the init's RLIMIT_FSIZE to 0, after
 *     which no output, pid or exit record of any process could be
 *     written (other processes' exits were lost and every spawn timed
 *     out).
 *
 * After each attack the host directory is exactly as it was and the
 * daemon answers with a 4xx, never a 500.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "harness_containers.h"
#include "tests/fixtures/imgfix.h"

/* A host directory with files runc's /dev set-up would touch. */
static void
make_host_dir(const char *dir)
{
    fx_mkdirs(dir);
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/ptmx", dir);
    fx_write_file(p, "host ptmx\n", 10);
    snprintf(p, sizeof(p), "%s/keep", dir);
    fx_write_file(p, "host file\n", 10);
}

static void
volume_create(const struct berthd *b, const char *handle)
{
    char body[128];
    snprintf(body, sizeof(body), "{\"handle\":\"%s\"}", handle);
    struct hresp r;
    http_post_json(b, "/v1/volumes", body, &r);
    ck_assert_msg(r.status == 201, "create volume %s: %ld %s", handle, r.status, r.body);
    hresp_free(&r);
}

/*
 * A container that mounts the volumes "outer" at /o and "inner" at /i and
 * plants, as its processes could: outer/nest -> /, and in inner a `dev`
 * symlink to the host directory plus the path "nest" leading back to its
 * own root, which is what runc needs to go on after mounting it on /.
 */
static void
plant_symlinks(const struct berthd *b, const char *host)
{
    volume_create(b, "outer");
    volume_create(b, "inner");
    char body[PATH_MAX + 512];
    snprintf(body, sizeof(body),
             "{\"handle\":\"planter\",\"rootfs\":\"%s\",\"mounts\":["
             "{\"volume\":\"outer\",\"target\":\"/o\"},{\"volume\":\"inner\",\"target\":\"/i\"}]}",
             ctr_busybox_raw());
    struct hresp r;
    ctr_create(b, body, &r);
    ck_assert_msg(r.status == 201, "create planter: %ld %s", r.status, r.body);
    hresp_free(&r);
    char script[PATH_MAX + 256];
    snprintf(script, sizeof(script),
             "set -e; ln -s / /o/nest; mkdir -p /i/o /i/dev2; ln -s / /i/o/nest; "
             "ln -s %s /i/dev; ln -s /o/nest /o/link",
             host);
    char *out = NULL;
    int code = proc_run_sh(b, "planter", "plant", script, &out);
    ck_assert_msg(code == 0, "plant: %d %s", code, out);
    free(out);
    ctr_delete(b, "planter");
}

/* The mount sets that nest "inner" in "outer", each a way runc would resolve through outer. */
START_TEST(a_mount_nested_in_a_volume_cannot_be_led_out_by_the_volumes_symlinks)
{
    ctr_require_runtime();
    struct berthd b = {0};
    berthd_start(&b, NULL);
    char host[PATH_MAX];
    snprintf(host, sizeof(host), "%s/hostdir", b.tmp);
    make_host_dir(host);
    char *before = fx_tree(host, NULL);
    plant_symlinks(&b, host);

    struct {
        const char *mounts;
        long status;
        const char *says;
    } cases[] = {
        /* Named inside the outer target: refused as it stands. */
        {"{\"volume\":\"outer\",\"target\":\"/o\"},{\"volume\":\"inner\",\"target\":\"/o/nest\"}",
         400, "/o/nest"},
        {"{\"volume\":\"outer\",\"target\":\"/o\"},"
         "{\"volume\":\"inner\",\"target\":\"/o/link/x\"}",
         400, "/o/link/x"},
        /* Below /dev, which the walk of the image leaves to the runtime. */
        {"{\"volume\":\"outer\",\"target\":\"/dev/o\"},"
         "{\"volume\":\"inner\",\"target\":\"/dev/o/nest\"}",
         400, "/dev/o/nest"},
        /* Led into the outer target by a symlink of the image (/bin/x -> /o). */
        {"{\"volume\":\"outer\",\"target\":\"/o\"},"
         "{\"volume\":\"inner\",\"target\":\"/lnk/nest\"}",
         422, "/lnk/nest"},
        {NULL, 0, NULL},
    };
    /* The image for the last case: busybox plus lnk -> /o. */
    char rootfs[PATH_MAX];
    snprintf(rootfs, sizeof(rootfs), "%s/lnkroot", b.tmp);
    ck_assert_int_eq(
        ctr_sh("cp -a '%s' '%s' && ln -s /o '%s/lnk'", ctr_busybox_rootfs(), rootfs, rootfs), 0);
    for (size_t i = 0; cases[i].mounts; i++) {
        char body[PATH_MAX + 512];
        snprintf(body, sizeof(body),
                 "{\"handle\":\"nest%zu\",\"rootfs\":\"raw://%s\",\"mounts\":[%s]}", i, rootfs,
                 cases[i].mounts);
        struct hresp r;
        ctr_create(&b, body, &r);
        if (r.status == 201) {
            char handle[32];
            snprintf(handle, sizeof(handle), "nest%zu", i);
            ctr_delete(&b, handle);
        }
        char *after = fx_tree(host, NULL);
        ck_assert_msg(strcmp(before, after) == 0,
                      "case %zu: the host directory changed:\nbefore:\n%s\nafter:\n%s", i, before,
                      after);
        free(after);
        ck_assert_error_reply(&r, cases[i].status,
                              cases[i].status == 400 ? "bad_request" : "invalid_content",
                              cases[i].says);
        hresp_free(&r);
        char dir[PATH_MAX + 32];
        snprintf(dir, sizeof(dir), "%s/containers/nest%zu", b.root, i);
        ck_assert_msg(access(dir, F_OK) != 0, "%s is left after a refused create", dir);
    }
    ck_assert_msg(ctr_sh("grep -q ' %s/' /proc/self/mountinfo", b.root) != 0,
                  "a mount is left under %s", b.root);
    /* Mounts side by side, and one stacked on another, still work. */
    char body[PATH_MAX + 512];
    snprintf(body, sizeof(body),
             "{\"handle\":\"side\",\"rootfs\":\"%s\",\"mounts\":["
             "{\"volume\":\"outer\",\"target\":\"/o\"},{\"volume\":\"inner\",\"target\":\"/i\"},"
             "{\"volume\":\"inner\",\"target\":\"/o\"}]}",
             ctr_busybox_raw());
    struct hresp r;
    ctr_create(&b, body, &r);
    ck_assert_msg(r.status == 201, "create side: %ld %s", r.status, r.body);
    hresp_free(&r);
    char *out = NULL;
    int code = proc_run_sh(&b, "side", "look",
                           "set -e; [ -L /o/dev ]; [ -L /i/dev ]; [ -d /dev/pts ]", &out);
    ck_assert_msg(code == 0, "look: %d %s", code, out);
    free(out);
    ctr_delete(&b, "side");
    char *after = fx_tree(host, NULL);
    ck_assert_str_eq(before, after);
    free(after);
    free(before);
    berthd_finish(&b);
}
END_TEST

/* busybox plus the hostile tool at /bin/hostile, under b's temporary directory; caller frees. */
static char *
hostile_raw(const struct berthd *b)
{
    char *uri = NULL;
    ck_assert(asprintf(&uri, "raw://%s/hostile-root", b->tmp) > 0);
    ck_assert_int_eq(ctr_sh("cp -a '%s' '%s' && cp '%s' '%s/bin/hostile'", ctr_busybox_rootfs(),
                            uri + strlen("raw://"), HOSTILE_TOOL_PATH, uri + strlen("raw://")),
                     0);
    return uri;
}

/*
 * prlimit(2) on another process needs only the same real, effective and
 * saved IDs, not ptrace access: a root process set the init's
 * RLIMIT_FSIZE to 0, and from then on the init could write no output, no
 * pid and no exit record for any process (the others' exits were lost
 * and each later spawn timed out); RLIMIT_NOFILE stopped every spawn, and
 * RLIMIT_CPU would have the kernel kill the init outright.
 */
START_TEST(a_process_cannot_change_the_inits_limits)
{
    ctr_require_runtime();
    struct berthd b = {0};
    berthd_start(&b, NULL);
    char *raw = hostile_raw(&b);
    char body[PATH_MAX + 128];
    snprintf(body, sizeof(body), "{\"handle\":\"lim\",\"rootfs\":\"%s\"}", raw);
    struct hresp r;
    ctr_create(&b, body, &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    hresp_free(&r);
    proc_start(&b, "lim",
               "{\"id\":\"victim\",\"path\":\"sh\",\"args\":[\"-c\",\"sleep 1; echo victim; "
               "exit 7\"]}");
    char *out = NULL;
    int code = proc_run_sh(&b, "lim", "attacker",
                           "sleep 0.2; hostile prlimit 1 nofile 4; hostile prlimit 1 cpu 1; "
                           "hostile prlimit 1 fsize 0",
                           &out);
    ck_assert_int_eq(code, 0);
    const char *tries[] = {"prlimit 1 nofile: Operation not permitted",
                           "prlimit 1 cpu: Operation not permitted",
                           "prlimit 1 fsize: Operation not permitted", NULL};
    for (size_t i = 0; tries[i]; i++)
        ck_assert_msg(strstr(out, tries[i]), "expected \"%s\" from the attacker: %s", tries[i],
                      out);
    free(out);
    /* The other process's exit and output are recorded, and spawns work. */
    ck_assert_int_eq(proc_wait(&b, "lim", "victim"), 7);
    char *victim = proc_output(&b, "lim", "victim", "stdout", "");
    ck_assert_str_eq(victim, "victim\n");
    free(victim);
    ck_assert_int_eq(proc_run_sh(&b, "lim", "after", "echo fine", &out), 0);
    ck_assert_str_eq(out, "fine\n");
    free(out);
    ctr_delete(&b, "lim");
    free(raw);
    berthd_finish(&b);
}
END_TEST

/*
 * A project quota (limits.disk_bytes on a filesystem with quotas) counts
 * files by their project ID, and root in a container could move its files
 * to project 0 with FS_IOC_FSSETXATTR (overlayfs passes it to the upper
 * layer; the kernel refuses it only in a user namespace). The seccomp
 * profile refuses that request, also with bits above 32 set, which the
 * kernel drops; other ioctls (the shell's terminal queries) still work.
 */
START_TEST(a_process_cannot_move_its_files_out_of_the_quota_project)
{
    ctr_require_runtime();
    struct berthd b = {0};
    berthd_start(&b, NULL);
    char *raw = hostile_raw(&b);
    char body[PATH_MAX + 128];
    snprintf(body, sizeof(body), "{\"handle\":\"pq\",\"rootfs\":\"%s\"}", raw);
    struct hresp r;
    ctr_create(&b, body, &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    hresp_free(&r);
    char *out = NULL;
    int code = proc_run_sh(&b, "pq", "attacker",
                           "echo x > /tmp/f; hostile projid /tmp/f 0; "
                           "[ -t 0 ] || echo not-a-tty",
                           &out);
    ck_assert_int_eq(code, 0);
    ck_assert_msg(strstr(out, "projid: Operation not permitted\n"), "%s", out);
    ck_assert_msg(strstr(out, "projid-hi: Operation not permitted\n"), "%s", out);
    ck_assert_msg(strstr(out, "not-a-tty\n"), "other ioctls: %s", out);
    free(out);
    ctr_delete(&b, "pq");
    free(raw);
    berthd_finish(&b);
}
END_TEST

/* An inotify watch for opens of path (a host path); returns the inotify fd. */
static int
watch_opens(const char *path)
{
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    ck_assert_int_ge(in, 0);
    ck_assert_msg(inotify_add_watch(in, path, IN_OPEN) >= 0, "watch %s: %s", path, strerror(errno));
    return in;
}

/* How many opens the watch saw (an O_PATH open, which calls no driver, is none). */
static int
opens_seen(int in)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int opens = 0;
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        for (char *q = buf; q < buf + n;) {
            struct inotify_event *e = (struct inotify_event *)q;
            opens += (e->mask & IN_OPEN) != 0;
            q += sizeof(*e) + e->len;
        }
    close(in);
    return opens;
}

/*
 * A container's root may make device nodes anywhere (the device cgroup
 * allows mknod of every device, only opening them inside is refused), and
 * the daemon, root on the host outside any device cgroup, opened the ones
 * it was given: an /etc/passwd the container replaced with a device node
 * was opened when a process was started with a user name. Opening is
 * what arms a watchdog (the host reboots when nobody feeds it), rewinds a
 * tape or raises a serial line; the null device here only shows that the
 * open happened. The daemon must look before it opens (O_PATH, fstat).
 */
START_TEST(the_daemon_never_opens_a_device_node_the_container_made_for_etc_passwd)
{
    ctr_require_runtime();
    struct berthd b = {0};
    berthd_start(&b, NULL);
    ctr_create_raw(&b, "devpw");
    char *out = NULL;
    ck_assert_int_eq(
        proc_run_sh(&b, "devpw", "mk", "rm -f /etc/passwd && mknod /etc/passwd c 1 3", &out), 0);
    free(out);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/containers/devpw/rootfs/etc/passwd", b.root);
    struct stat st;
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert(S_ISCHR(st.st_mode));
    int in = watch_opens(path);
    struct hresp r;
    http_post_json(&b, "/v1/containers/devpw/processes",
                   "{\"id\":\"u\",\"path\":\"/bin/true\",\"user\":\"nobody\"}", &r);
    ck_assert_error_reply(&r, 422, "invalid_content", "/etc/passwd");
    hresp_free(&r);
    ck_assert_msg(opens_seen(in) == 0, "the daemon opened the device node at %s", path);
    ctr_delete(&b, "devpw");
    berthd_finish(&b);
}
END_TEST

/* The same for a layout a task wrote into a volume and the daemon imports. */
START_TEST(the_daemon_never_opens_a_device_node_in_a_layout_it_imports_from_a_volume)
{
    ctr_require_runtime();
    struct berthd b = {0};
    berthd_start(&b, NULL);
    volume_create(&b, "lay");
    char body[PATH_MAX + 256];
    snprintf(body, sizeof(body),
             "{\"handle\":\"layw\",\"rootfs\":\"%s\",\"mounts\":[{\"volume\":\"lay\","
             "\"target\":\"/out\"}]}",
             ctr_busybox_raw());
    struct hresp r;
    ctr_create(&b, body, &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    hresp_free(&r);
    char *out = NULL;
    ck_assert_int_eq(proc_run_sh(&b, "layw", "mk",
                                 "set -e; mkdir -p /out/img/blobs/sha256; "
                                 "echo '{\"imageLayoutVersion\":\"1.0.0\"}' > /out/img/oci-layout; "
                                 "mknod /out/img/index.json c 1 3",
                                 &out),
                     0);
    free(out);
    http_get(&b, "/v1/volumes/lay", &r);
    ck_assert_int_eq(r.status, 200);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/img/index.json",
             json_object_get_string(json_at(r.json, "path")));
    hresp_free(&r);
    int in = watch_opens(path);
    http_post_json(&b, "/v1/images", "{\"source\":{\"volume\":\"lay\",\"path\":\"/img\"}}", &r);
    ck_assert_msg(r.status >= 400 && r.status < 500, "import: %ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_msg(opens_seen(in) == 0, "the daemon opened the device node at %s", path);
    ctr_delete(&b, "layw");
    berthd_finish(&b);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("containers_hostile_procs");
    TCase *tc = tcase_create("volumes");
    tcase_set_timeout(tc, 180);
    ctr_add_fixture(tc);
    tcase_add_test(tc, a_mount_nested_in_a_volume_cannot_be_led_out_by_the_volumes_symlinks);
    suite_add_tcase(s, tc);
    TCase *it = tcase_create("init");
    tcase_set_timeout(it, 120);
    ctr_add_fixture(it);
    tcase_add_test(it, a_process_cannot_change_the_inits_limits);
    tcase_add_test(it, a_process_cannot_move_its_files_out_of_the_quota_project);
    suite_add_tcase(s, it);
    TCase *dv = tcase_create("devices");
    tcase_set_timeout(dv, 120);
    ctr_add_fixture(dv);
    tcase_add_test(dv, the_daemon_never_opens_a_device_node_the_container_made_for_etc_passwd);
    tcase_add_test(dv, the_daemon_never_opens_a_device_node_in_a_layout_it_imports_from_a_volume);
    suite_add_tcase(s, dv);
    return s;
}

int
main(void)
{
    return harness_run_suite(suite());
}
