/*
 * Hostile images against the container runtime: layers whose /dev, /proc,
 * /etc, mount target parents or mount targets are symlinks to directories
 * of the host. runc's own set-up of /dev follows such a symlink from the
 * host's root (it deleted and replaced a host `ptmx` and made `fd`,
 * `stdin`, ... there), so every mount target must be made a real directory
 * or file inside the rootfs before the runtime starts. After create, run
 * and delete, the host directory must be exactly as it was, and the
 * container must work with a real /dev. Also: the reserved mount targets
 * of berth, written in every other spelling, are refused.
 *
 * The images are built here: busybox-static and the hostile entries in one
 * tar layer of an OCI layout (tests/fixtures/imgfix.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "harness_containers.h"
#include "tests/fixtures/imgfix.h"

/* A host directory an image points at, with files runc would touch. */
static void
make_host_dir(const char *dir)
{
    fx_mkdirs(dir);
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/ptmx", dir);
    fx_write_file(p, "host ptmx\n", 10);
    snprintf(p, sizeof(p), "%s/keep", dir);
    fx_write_file(p, "host file\n", 10);
    snprintf(p, sizeof(p), "%s/sub", dir);
    fx_mkdirs(p);
}

/* The listing of dir with the content of its regular files (caller frees). */
static char *
host_state(const char *dir)
{
    char *tree = fx_tree(dir, NULL);
    char *out = NULL;
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/ptmx", dir);
    char *ptmx = fx_read_file(p, NULL);
    snprintf(p, sizeof(p), "%s/keep", dir);
    char *keep = fx_read_file(p, NULL);
    ck_assert(asprintf(&out, "%s--\nptmx: %s\nkeep: %s", tree, ptmx ? ptmx : "(none)",
                       keep ? keep : "(none)") > 0);
    free(tree);
    free(ptmx);
    free(keep);
    return out;
}

/* One hostile entry of the layer: a symlink (link set) or a directory. */
struct entry {
    const char *name;
    const char *link; /* "%s" is replaced by the host directory */
};

/*
 * Writes a layout of busybox (every applet linked) plus entries into
 * dir and imports it as name.
 */
static void
import_hostile(const struct berthd *b, const char *dir, const char *name,
               const struct entry *entries, const char *host)
{
    struct fx_buf t = {0};
    fx_tar_add(&t, "bin/", '5', NULL, NULL, 0, 0755);
    size_t len = 0;
    char *bb = fx_read_file("/bin/busybox", &len);
    ck_assert_ptr_nonnull(bb);
    fx_tar_add(&t, "bin/busybox", '0', NULL, bb, len, 0755);
    free(bb);
    FILE *p = popen("/bin/busybox --list", "r");
    ck_assert_ptr_nonnull(p);
    char applet[128];
    while (fgets(applet, sizeof(applet), p)) {
        applet[strcspn(applet, "\n")] = '\0';
        if (!applet[0] || strcmp(applet, "busybox") == 0)
            continue;
        char n[160];
        snprintf(n, sizeof(n), "bin/%s", applet);
        fx_tar_add(&t, n, '2', "busybox", NULL, 0, 0777);
    }
    pclose(p);
    fx_tar_add(&t, "tmp/", '5', NULL, NULL, 0, 01777);
    for (const struct entry *e = entries; e && e->name; e++) {
        if (!e->link) {
            fx_tar_add(&t, e->name, '5', NULL, NULL, 0, 0755);
            continue;
        }
        char target[PATH_MAX];
        const char *at = strstr(e->link, "%s");
        if (at)
            snprintf(target, sizeof(target), "%.*s%s%s", (int)(at - e->link), e->link, host,
                     at + 2);
        else
            snprintf(target, sizeof(target), "%s", e->link);
        fx_tar_add(&t, e->name, '2', target, NULL, 0, 0777);
    }
    fx_tar_end(&t);
    struct fx_layout s = {.layers = {&t}, .ref_name = name};
    fx_write_layout(dir, &s);
    free(t.data);
    char q[128];
    snprintf(q, sizeof(q), "?name=%s:latest", name); /* its ref.name is a bare tag */
    struct hresp r;
    fx_import_layout(b, q, dir, NULL, &r);
    ck_assert_msg(r.status == 201, "import %s: %ld %s", name, r.status, r.body);
    hresp_free(&r);
}

/*
 * Creates a container of the image with an optional host_path mount at
 * target, runs check in it (it must exit 0), deletes it, and asserts that
 * host is as it was before.
 */
static void
run_hostile(const char *name, const struct entry *entries, const char *mount_target,
            const char *check)
{
    ctr_require_runtime();
    struct berthd b = {0};
    berthd_start(&b, NULL);
    char host[PATH_MAX], layout[PATH_MAX], vol[PATH_MAX];
    snprintf(host, sizeof(host), "%s/hostdir", b.tmp);
    snprintf(layout, sizeof(layout), "%s/layout", b.tmp);
    snprintf(vol, sizeof(vol), "%s/vol", b.tmp);
    make_host_dir(host);
    fx_mkdirs(vol);
    char marker[PATH_MAX + 16];
    snprintf(marker, sizeof(marker), "%s/marker", vol);
    fx_write_file(marker, "from the volume\n", 16);
    char *before = host_state(host);
    import_hostile(&b, layout, name, entries, host);

    char body[PATH_MAX * 2];
    if (mount_target)
        snprintf(body, sizeof(body),
                 "{\"handle\":\"%s\",\"image\":\"%s\",\"mounts\":[{\"host_path\":\"%s\","
                 "\"target\":\"%s\"}]}",
                 name, name, vol, mount_target);
    else
        snprintf(body, sizeof(body), "{\"handle\":\"%s\",\"image\":\"%s\"}", name, name);
    struct hresp r;
    ctr_create(&b, body, &r);
    ck_assert_msg(r.status == 201, "create %s: %ld %s", name, r.status, r.body);
    hresp_free(&r);
    char *out = NULL;
    int code = proc_run_sh(&b, name, "check", check, &out);
    char *err = proc_output(&b, name, "check", "stderr", "");
    ctr_delete(&b, name);
    char *after = host_state(host);
    ck_assert_msg(strcmp(before, after) == 0,
                  "%s: the host directory changed:\nbefore:\n%s\nafter:\n%s", name, before, after);
    ck_assert_msg(code == 0, "%s: the check in the container exited %d: %s%s", name, code, out,
                  err);
    free(out);
    free(err);
    free(before);
    free(after);
    berthd_finish(&b);
}

/* The container's /dev is runc's: a tmpfs with device nodes and its links. */
#define DEV_IS_REAL                                                                                \
    "set -e -x; [ -d /dev ] && [ ! -L /dev ]; grep -q '^tmpfs /dev tmpfs' /proc/mounts; "          \
    "[ -c /dev/null ]; [ -e /dev/ptmx ]; [ -L /dev/fd ]; [ -d /dev/pts ]; "                        \
    "grep -q ' /dev/shm tmpfs' /proc/mounts; echo hi > /dev/null; "

START_TEST(dev_symlink_to_a_host_dir_leaves_the_host_dir_alone)
{
    const struct entry e[] = {{"dev", "%s"}, {NULL, NULL}};
    run_hostile("h-dev", e, NULL, DEV_IS_REAL "true");
}
END_TEST

START_TEST(relative_dev_symlink_that_climbs_stays_in_the_rootfs)
{
    /* ../../../.. from the rootfs leads to the host's / when followed outside. */
    const struct entry e[] = {{"dev", "../../../../../../../../..%s"}, {NULL, NULL}};
    run_hostile("h-devrel", e, NULL, DEV_IS_REAL "true");
}
END_TEST

START_TEST(proc_and_sys_symlinks_to_a_host_dir_leave_it_alone)
{
    const struct entry e[] = {{"proc", "%s"}, {"sys", "%s/sub"}, {NULL, NULL}};
    run_hostile("h-proc", e, NULL,
                "set -e; [ ! -L /proc ]; [ -r /proc/self/status ]; [ ! -L /sys ]; "
                "grep -q '^proc /proc proc' /proc/mounts; grep -q ' /sys sysfs' /proc/mounts");
}
END_TEST

START_TEST(dev_shm_symlink_to_root_is_replaced)
{
    const struct entry e[] = {{"dev/", NULL}, {"dev/shm", "/"}, {"dev/pts", "%s"}, {NULL, NULL}};
    run_hostile("h-shm", e, NULL, DEV_IS_REAL "[ ! -L /dev/shm ]; touch /dev/shm/x");
}
END_TEST

START_TEST(etc_symlink_to_a_host_dir_with_a_volume_below_it)
{
    /* The volume shows where the container looks (/etc/foo), and nothing
     * is made on the host below the directory /etc points at. */
    const struct entry e[] = {{"etc", "%s"}, {NULL, NULL}};
    run_hostile("h-etc", e, "/etc/foo", "set -e; grep -q 'from the volume' /etc/foo/marker");
}
END_TEST

START_TEST(symlinked_volume_target_parent_resolves_inside_the_rootfs)
{
    const struct entry e[] = {{"data", "%s/sub"}, {NULL, NULL}};
    run_hostile("h-parent", e, "/data/vol/in",
                "set -e; grep -q 'from the volume' /data/vol/in/marker");
}
END_TEST

START_TEST(symlinked_volume_target_is_replaced_by_a_directory)
{
    const struct entry e[] = {{"mnt", "%s"}, {NULL, NULL}};
    run_hostile("h-target", e, "/mnt",
                "set -e; [ ! -L /mnt ]; grep -q 'from the volume' /mnt/marker");
}
END_TEST

START_TEST(symlinked_init_target_is_replaced_by_a_file)
{
    const struct entry e[] = {{".berth-init", "%s/keep"}, {NULL, NULL}};
    run_hostile("h-init", e, NULL, "set -e; [ ! -L /.berth-init ]; [ -f /.berth-init ]");
}
END_TEST

/* A target of the wrong type, that cannot be replaced safely, or that the
 * image's symlinks lead somewhere no target may be: 422, nothing left. */
START_TEST(targets_of_the_wrong_type_or_leading_to_reserved_places_are_refused)
{
    ctr_require_runtime();
    struct berthd b = {0};
    berthd_start(&b, NULL);
    char layout[PATH_MAX], vol[PATH_MAX];
    snprintf(layout, sizeof(layout), "%s/layout", b.tmp);
    snprintf(vol, sizeof(vol), "%s/vol", b.tmp);
    fx_mkdirs(vol);
    struct fx_buf t = {0};
    fx_tar_add(&t, "bin/", '5', NULL, NULL, 0, 0755);
    fx_tar_file(&t, "opt", "a regular file\n");
    fx_tar_add(&t, "etc", '2', "/opt", NULL, 0, 0777);
    fx_tar_add(&t, "pp", '2', "/proc", NULL, 0, 0777);
    fx_tar_add(&t, "up", '2', "/", NULL, 0, 0777);
    fx_tar_end(&t);
    struct fx_layout s = {.layers = {&t}, .ref_name = "fileimg"};
    fx_write_layout(layout, &s);
    free(t.data);
    struct hresp r;
    fx_import_layout(&b, "?name=fileimg:latest", layout, NULL, &r);
    ck_assert_msg(r.status == 201, "import: %ld %s", r.status, r.body);
    hresp_free(&r);
    /* The last two lead, through the image's symlinks, to /proc/x and /dev. */
    const char *targets[] = {"/opt", "/opt/x", "/etc/x", "/pp/x", "/up/dev", NULL};
    for (size_t i = 0; targets[i]; i++) {
        char body[PATH_MAX * 2];
        snprintf(body, sizeof(body),
                 "{\"handle\":\"f%zu\",\"image\":\"fileimg\",\"mounts\":[{\"host_path\":\"%s\","
                 "\"target\":\"%s\"}]}",
                 i, vol, targets[i]);
        ctr_create(&b, body, &r);
        ck_assert_error_reply(&r, 422, "invalid_content", targets[i]);
        hresp_free(&r);
        char dir[PATH_MAX + 32];
        snprintf(dir, sizeof(dir), "%s/containers/f%zu", b.root, i);
        ck_assert_msg(access(dir, F_OK) != 0, "%s is left after a refused create", dir);
    }
    ck_assert_msg(ctr_sh("grep -q ' %s/' /proc/self/mountinfo", b.root) != 0,
                  "a mount is left under %s", b.root);
    berthd_finish(&b);
}
END_TEST

/*
 * The working directory is made by runc inside the container, where a
 * symlink of the image that leads nowhere (or a file in the way) failed
 * the create with a runtime error (500). It is walked like a mount target
 * (its symlinks followed as inside the container, never replaced): made
 * where missing, 422 when the image has the wrong type there, and never
 * made on the host.
 */
START_TEST(a_working_dir_through_the_images_symlinks_is_made_inside_the_rootfs)
{
    ctr_require_runtime();
    struct berthd b = {0};
    berthd_start(&b, NULL);
    char rootfs[PATH_MAX], host[PATH_MAX];
    snprintf(rootfs, sizeof(rootfs), "%s/wdroot", b.tmp);
    snprintf(host, sizeof(host), "%s/host-wd", b.tmp);
    ck_assert_int_eq(ctr_sh("cp -a '%s' '%s' && ln -s '%s' '%s/work' && echo f > '%s/opt'",
                            ctr_busybox_rootfs(), rootfs, host, rootfs, rootfs),
                     0);
    char body[PATH_MAX * 2];
    snprintf(body, sizeof(body),
             "{\"handle\":\"wd\",\"rootfs\":\"raw://%s\",\"working_dir\":\"/work/sub\"}", rootfs);
    struct hresp r;
    ctr_create(&b, body, &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    hresp_free(&r);
    char *out = NULL;
    ck_assert_int_eq(proc_run_sh(&b, "wd", "pwd", "pwd -P; [ -L /work ]", &out), 0);
    char want[PATH_MAX + 8];
    snprintf(want, sizeof(want), "%s/sub\n", host);
    ck_assert_str_eq(out, want);
    free(out);
    ctr_delete(&b, "wd");
    ck_assert_msg(access(host, F_OK) != 0, "%s was made on the host", host);
    /* A regular file where a directory is needed. */
    snprintf(body, sizeof(body),
             "{\"handle\":\"wdf\",\"rootfs\":\"raw://%s\",\"working_dir\":\"/opt/x\"}", rootfs);
    ctr_create(&b, body, &r);
    ck_assert_error_reply(&r, 422, "invalid_content", "/opt");
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

/* //.berth, /./.berth, /.berth/../.berth, trailing slashes: all are /.berth. */
START_TEST(reserved_targets_in_other_spellings_are_refused)
{
    ctr_require_runtime();
    struct berthd b = {0};
    berthd_start(&b, NULL);
    char vol[PATH_MAX];
    snprintf(vol, sizeof(vol), "%s/vol", b.tmp);
    fx_mkdirs(vol);
    const char *targets[] = {"//.berth",
                             "/./.berth",
                             "//.berth-init",
                             "/.berth/",
                             "/.berth//procs",
                             "/.berth-init/",
                             "/./.berth-init",
                             "/.berth/./procs/",
                             "//dev",
                             "/proc/",
                             NULL};
    for (size_t i = 0; targets[i]; i++) {
        char body[PATH_MAX * 2];
        snprintf(body, sizeof(body),
                 "{\"handle\":\"r%zu\",\"rootfs\":\"%s\",\"mounts\":[{\"host_path\":\"%s\","
                 "\"target\":\"%s\"}]}",
                 i, ctr_busybox_raw(), vol, targets[i]);
        struct hresp r;
        ctr_create(&b, body, &r);
        ck_assert_msg(r.status == 400, "target %s: %ld %s", targets[i], r.status, r.body);
        ck_assert_error_reply(&r, 400, "bad_request", "reserved");
        hresp_free(&r);
    }
    /* With "..", a target is refused before any comparison. */
    const char *climbing[] = {"/.berth/../.berth", "/x/../.berth-init", NULL};
    for (size_t i = 0; climbing[i]; i++) {
        char body[PATH_MAX * 2];
        snprintf(body, sizeof(body),
                 "{\"handle\":\"d%zu\",\"rootfs\":\"%s\",\"mounts\":[{\"host_path\":\"%s\","
                 "\"target\":\"%s\"}]}",
                 i, ctr_busybox_raw(), vol, climbing[i]);
        struct hresp r;
        ctr_create(&b, body, &r);
        ck_assert_error_reply(&r, 400, "bad_request", climbing[i]);
        hresp_free(&r);
    }
    berthd_finish(&b);
}
END_TEST

/* A target is stored and shown in its normal form. */
START_TEST(mount_targets_are_stored_normalised)
{
    ctr_require_runtime();
    struct berthd b = {0};
    berthd_start(&b, NULL);
    char vol[PATH_MAX];
    snprintf(vol, sizeof(vol), "%s/vol", b.tmp);
    fx_mkdirs(vol);
    char body[PATH_MAX * 2];
    snprintf(body, sizeof(body),
             "{\"handle\":\"norm\",\"rootfs\":\"%s\",\"mounts\":[{\"host_path\":\"%s\","
             "\"target\":\"//srv/./data//in/\"}]}",
             ctr_busybox_raw(), vol);
    struct hresp r;
    ctr_create(&b, body, &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    json_object *m = json_object_array_get_idx(json_at(r.json, "mounts"), 0);
    ck_assert_str_eq(json_object_get_string(json_at(m, "target")), "/srv/data/in");
    hresp_free(&r);
    ctr_delete(&b, "norm");
    berthd_finish(&b);
}
END_TEST

/*
 * The processes' output files and records live in the state directory on
 * the host: a process that could reach them would write past the output
 * cap and fill the host's disk. Neither a path nor the init's fds lead
 * there (the init is not dumpable).
 */
START_TEST(the_state_directory_is_out_of_the_containers_reach)
{
    ctr_require_runtime();
    struct berthd b = {0};
    berthd_start(&b, NULL);
    ctr_create_raw(&b, "reach");
    char *out = NULL;
    int code = proc_run_sh(&b, "reach", "probe",
                           "[ -e /.berth/procs ] && exit 10; "
                           "readlink /proc/1/fd/3 && exit 11; "
                           "echo x >> /proc/1/fd/1 2>/dev/null && exit 12; "
                           "ls /proc/1/fd/3/ >/dev/null 2>&1 && exit 13; "
                           "find / -xdev -path '*/procs/probe/*' 2>/dev/null | grep . && exit 14; "
                           "echo unreachable",
                           &out);
    ck_assert_msg(code == 0 && strstr(out, "unreachable"), "probe exited %d: %s", code, out);
    free(out);
    /* The daemon still reads them. */
    char *again = proc_output(&b, "reach", "probe", "stdout", "");
    ck_assert_str_eq(again, "unreachable\n");
    free(again);
    ctr_delete(&b, "reach");
    berthd_finish(&b);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("containers_hostile");
    TCase *tc = tcase_create("symlinks");
    tcase_set_timeout(tc, 120);
    ctr_add_fixture(tc);
    tcase_add_test(tc, dev_symlink_to_a_host_dir_leaves_the_host_dir_alone);
    tcase_add_test(tc, relative_dev_symlink_that_climbs_stays_in_the_rootfs);
    tcase_add_test(tc, proc_and_sys_symlinks_to_a_host_dir_leave_it_alone);
    tcase_add_test(tc, dev_shm_symlink_to_root_is_replaced);
    tcase_add_test(tc, etc_symlink_to_a_host_dir_with_a_volume_below_it);
    tcase_add_test(tc, symlinked_volume_target_parent_resolves_inside_the_rootfs);
    tcase_add_test(tc, symlinked_volume_target_is_replaced_by_a_directory);
    tcase_add_test(tc, symlinked_init_target_is_replaced_by_a_file);
    tcase_add_test(tc, targets_of_the_wrong_type_or_leading_to_reserved_places_are_refused);
    tcase_add_test(tc, the_state_directory_is_out_of_the_containers_reach);
    tcase_add_test(tc, a_working_dir_through_the_images_symlinks_is_made_inside_the_rootfs);
    suite_add_tcase(s, tc);
    TCase *rt = tcase_create("reserved");
    tcase_set_timeout(rt, 120);
    ctr_add_fixture(rt);
    tcase_add_test(rt, reserved_targets_in_other_spellings_are_refused);
    tcase_add_test(rt, mount_targets_are_stored_normalised);
    suite_add_tcase(s, rt);
    return s;
}

int
main(void)
{
    return harness_run_suite(suite());
}
