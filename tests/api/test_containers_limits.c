/*
 * What a container can take from the host's disk: the output a process
 * writes (--max-output-bytes: past the cap the process is killed, the
 * files keep exactly the first bytes, the record says so) and what it
 * writes into its own filesystem (limits.disk_bytes: a sized writable
 * layer, full at the limit, gone with the container). Real containers
 * writing with dd and seq, against a real berthd and runc.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "harness_containers.h"

#define CAP (64 * 1024)

/* Entries in root/sub, -1 when it cannot be read. */
static int
count_entries(const char *root, const char *sub)
{
    return atoi(ctr_sh_out("ls -A '%s/%s' 2>/dev/null | wc -l", root, sub));
}

static void
start(struct berthd *b, const char *const *extra)
{
    ctr_require_runtime();
    struct berthd_opts o = {0};
    for (size_t i = 0; extra && extra[i] && i < HARNESS_MAX_ARGS - 1; i++)
        o.args[i] = extra[i];
    berthd_start(b, &o);
}

static json_object *
proc_record(const struct berthd *b, const char *handle, const char *id, struct hresp *r)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/containers/%s/processes/%s", handle, id);
    http_get(b, path, r);
    ck_assert_msg(r->status == 200, "GET %s: %ld %s", path, r->status, r->body);
    return r->json;
}

/* A process the OOM killer ended says so (oom_killed, as Docker's
 * State.OOMKilled), beside its exit 137; one killed with SIGKILL by the
 * client, one that exits, and one started after the OOM kill do not, and
 * the verdict stays what it was. */
START_TEST(a_process_killed_by_the_oom_killer_says_so)
{
    struct berthd b = {0};
    start(&b, NULL);
    char body[PATH_MAX + 256];
    snprintf(body, sizeof(body),
             "{\"handle\":\"c-oom\",\"rootfs\":\"%s\",\"limits\":{\"memory_bytes\":33554432}}",
             ctr_busybox_raw());
    struct hresp r;
    ctr_create(&b, body, &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    hresp_free(&r);
    /* A sleeper that lives through the OOM kill, killed by us later. */
    proc_start(&b, "c-oom", "{\"id\":\"nap\",\"path\":\"sleep\",\"args\":[\"30\"]}");
    /* tail keeps every line of an endless one: it grows past 32 MiB. */
    int code = proc_run_sh(&b, "c-oom", "hog", "dd if=/dev/zero bs=1M 2>/dev/null | tail", NULL);
    ck_assert_int_eq(code, 137);
    json_object *rec = proc_record(&b, "c-oom", "hog", &r);
    ck_assert_msg(json_object_get_boolean(json_at(rec, "oom_killed")), "%s", r.body);
    ck_assert_int_eq(json_object_get_int(json_at(rec, "exit_code")), 137);
    hresp_free(&r);

    /* Killed by the client: SIGKILL too, but no OOM kill since it
     * started... */
    proc_start(&b, "c-oom", "{\"id\":\"late\",\"path\":\"sleep\",\"args\":[\"30\"]}");
    http_post_json(&b, "/v1/containers/c-oom/processes/late/signal", "{\"signal\":\"KILL\"}", &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(proc_wait(&b, "c-oom", "late"), 137);
    rec = proc_record(&b, "c-oom", "late", &r);
    ck_assert_msg(!json_object_get_boolean(json_at(rec, "oom_killed")), "%s", r.body);
    hresp_free(&r);
    /* ...and an ordinary exit. */
    ck_assert_int_eq(proc_run_sh(&b, "c-oom", "ok", "exit 3", NULL), 3);
    rec = proc_record(&b, "c-oom", "ok", &r);
    ck_assert_msg(!json_object_get_boolean(json_at(rec, "oom_killed")), "%s", r.body);
    hresp_free(&r);
    /* The hog's verdict is kept. */
    rec = proc_record(&b, "c-oom", "hog", &r);
    ck_assert_msg(json_object_get_boolean(json_at(rec, "oom_killed")), "%s", r.body);
    hresp_free(&r);
    ctr_delete(&b, "c-oom");
    berthd_finish(&b);
}
END_TEST

START_TEST(output_past_the_cap_is_cut_and_the_process_stopped)
{
    struct berthd b = {0};
    start(&b, (const char *[]){"--max-output-bytes", "64K", NULL});
    ctr_create_raw(&b, "chatty");
    /* About three times the cap, on stdout, then a marker that must never come. */
    int code = proc_run_sh(&b, "chatty", "seq", "seq 1 36000; echo never-reached", NULL);
    ck_assert_int_eq(code, 137);
    struct hresp r;
    json_object *rec = proc_record(&b, "chatty", "seq", &r);
    ck_assert_msg(json_object_get_boolean(json_at(rec, "output_truncated")), "%s", r.body);
    ck_assert_int_eq(json_object_get_int(json_at(rec, "signal")), 9);
    hresp_free(&r);
    /* A reader gets exactly the first CAP bytes of what seq wrote. */
    char *out = proc_output(&b, "chatty", "seq", "stdout", "");
    ck_assert_int_eq(strlen(out), CAP);
    FILE *p = popen("seq 1 36000 | head -c 65536", "r");
    char *want = calloc(1, CAP + 1);
    ck_assert_int_eq(fread(want, 1, CAP, p), CAP);
    pclose(p);
    ck_assert_msg(memcmp(out, want, CAP) == 0, "the kept output is not the first %d bytes", CAP);
    ck_assert_ptr_null(strstr(out, "never-reached"));
    free(want);
    free(out);
    /* An offset is one in the whole output. */
    char *tail = proc_output(&b, "chatty", "seq", "stdout", "?offset=65530");
    ck_assert_int_eq(strlen(tail), 6);
    free(tail);
    /* On the host, the files are no larger than the cap. */
    char path[PATH_MAX + 128];
    snprintf(path, sizeof(path), "%s/containers/chatty/state/procs/seq/stdout", b.root);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_le(st.st_size, CAP);
    /* Under the cap, stdout and stderr together, nothing is cut. */
    char *small = NULL;
    code = proc_run_sh(&b, "chatty", "small", "seq 1 4000; seq 1 4000 >&2", &small);
    ck_assert_int_eq(code, 0);
    ck_assert_int_eq(strlen(small), 18893);
    free(small);
    rec = proc_record(&b, "chatty", "small", &r);
    ck_assert(!json_object_get_boolean(json_at(rec, "output_truncated")));
    hresp_free(&r);
    ctr_delete(&b, "chatty");
    berthd_finish(&b);
}
END_TEST

START_TEST(output_cap_counts_stdout_and_stderr_together)
{
    struct berthd b = {0};
    start(&b, (const char *[]){"--max-output-bytes", "64K", NULL});
    ctr_create_raw(&b, "both");
    /* 40 kB to each: neither alone reaches the cap, both together do. */
    int code = proc_run_sh(&b, "both", "two",
                           "head -c 40000 /dev/zero; head -c 40000 /dev/zero >&2; sleep 5", NULL);
    ck_assert_int_eq(code, 137);
    struct hresp r;
    json_object *rec = proc_record(&b, "both", "two", &r);
    ck_assert(json_object_get_boolean(json_at(rec, "output_truncated")));
    hresp_free(&r);
    char path[PATH_MAX + 128];
    struct stat so, se;
    snprintf(path, sizeof(path), "%s/containers/both/state/procs/two/stdout", b.root);
    ck_assert_int_eq(stat(path, &so), 0);
    snprintf(path, sizeof(path), "%s/containers/both/state/procs/two/stderr", b.root);
    ck_assert_int_eq(stat(path, &se), 0);
    ck_assert_int_eq(so.st_size, 40000);
    ck_assert_int_eq(se.st_size, CAP - 40000);
    ctr_delete(&b, "both");
    berthd_finish(&b);
}
END_TEST

/* ---- limits.disk_bytes ------------------------------------------------------- */

#define DISK (32ull << 20)

/* Kilobytes used under dir on the host, skipping nothing (du -sk -x). */
static long long
du_kb(const char *dir)
{
    return atoll(ctr_sh_out("du -skx '%s' | cut -f1", dir));
}

static void
create_with_disk(const struct berthd *b, const char *handle, unsigned long long bytes)
{
    char body[PATH_MAX + 256];
    snprintf(body, sizeof(body),
             "{\"handle\":\"%s\",\"rootfs\":\"%s\",\"limits\":{\"disk_bytes\":%llu}}", handle,
             ctr_busybox_raw(), bytes);
    struct hresp r;
    ctr_create(b, body, &r);
    ck_assert_msg(r.status == 201, "create %s: %ld %s", handle, r.status, r.body);
    ck_assert_int_eq(json_object_get_int64(json_at(r.json, "limits.disk_bytes")), (int64_t)bytes);
    hresp_free(&r);
}

/* Writes 100 MiB in the container: it must fail at the limit. Returns its stderr. */
static char *
write_past_the_limit(const struct berthd *b, const char *handle, const char *id)
{
    int code = proc_run_sh(b, handle, id,
                           "dd if=/dev/zero of=/big bs=1M count=100; rc=$?; sync; exit $rc", NULL);
    char *err = proc_output(b, handle, id, "stderr", "");
    ck_assert_msg(code != 0, "dd of 100 MiB under a %llu-byte layer succeeded: %s", DISK, err);
    return err;
}

START_TEST(disk_limit_fails_writes_at_the_limit_and_delete_removes_it_all)
{
    struct berthd b = {0};
    start(&b, NULL);
    long long before = du_kb(b.root);
    create_with_disk(&b, "disk", DISK);
    char img[PATH_MAX + 64];
    snprintf(img, sizeof(img), "%s/containers/disk/scratch.img", b.root);
    char dev[64];
    snprintf(dev, sizeof(dev), "%s", ctr_sh_out("losetup -j '%s' | cut -d: -f1", img));
    ck_assert_msg(dev[0], "no loop device holds %s", img);
    char *err = write_past_the_limit(&b, "disk", "dd");
    ck_assert_msg(strstr(err, "No space left on device"), "%s", err);
    free(err);
    /* The host paid at most the limit for it, plus the container's few small files. */
    struct stat st;
    ck_assert_int_eq(stat(img, &st), 0);
    ck_assert_int_le((long long)st.st_blocks * 512, (long long)DISK);
    long long grew = du_kb(b.root) - before;
    ck_assert_msg(grew * 1024 <= (long long)DISK + (2 << 20),
                  "the store grew by %lld KiB for a %llu-byte layer", grew, DISK);
    /* The container still works, and frees space when it deletes. */
    char *out = NULL;
    ck_assert_int_eq(
        proc_run_sh(&b, "disk", "rm", "rm /big && echo x > /small && cat /small", &out), 0);
    ck_assert_str_eq(out, "x\n");
    free(out);
    ctr_delete(&b, "disk");
    ck_assert_msg(access(img, F_OK) != 0, "%s is left", img);
    ck_assert_msg(ctr_sh("losetup -a | grep -q '%s'", img) != 0, "a loop device still holds %s",
                  img);
    ck_assert_msg(ctr_sh("grep -q ' %s/' /proc/self/mountinfo", b.root) != 0,
                  "a mount is left under %s", b.root);
    berthd_finish(&b);
}
END_TEST

START_TEST(disk_limit_is_validated_and_shown)
{
    struct berthd b = {0};
    start(&b, NULL);
    const char *bad[] = {"1000", "-1", "16777215", "\"big\"", NULL};
    for (size_t i = 0; bad[i]; i++) {
        char body[PATH_MAX + 256];
        snprintf(body, sizeof(body), "{\"rootfs\":\"%s\",\"limits\":{\"disk_bytes\":%s}}",
                 ctr_busybox_raw(), bad[i]);
        struct hresp r;
        ctr_create(&b, body, &r);
        ck_assert_error_reply(&r, 400, "bad_request", "limits.disk_bytes");
        hresp_free(&r);
    }
    ck_assert_int_eq(count_entries(b.root, "containers"), 0);
    /* 0 is no limit: a plain writable layer. */
    create_with_disk(&b, "nolimit", 0);
    char img[PATH_MAX + 64];
    snprintf(img, sizeof(img), "%s/containers/nolimit/scratch.img", b.root);
    ck_assert(access(img, F_OK) != 0);
    struct hresp r;
    http_get(&b, "/v1/containers/nolimit", &r);
    ck_assert_int_eq(json_object_get_int64(json_at(r.json, "limits.disk_bytes")), 0);
    hresp_free(&r);
    ctr_delete(&b, "nolimit");
    berthd_finish(&b);
}
END_TEST

/* A daemon killed while a bounded container runs: it comes back, and its delete cleans up. */
START_TEST(disk_limit_survives_a_daemon_restart_and_is_released)
{
    struct berthd b1 = {0}, b2 = {0};
    start(&b1, NULL);
    create_with_disk(&b1, "kept", DISK);
    char img[PATH_MAX + 64];
    snprintf(img, sizeof(img), "%s/containers/kept/scratch.img", b1.root);
    berthd_kill(&b1);
    char root[PATH_MAX];
    snprintf(root, sizeof(root), "%s", b1.root);
    berthd_start(&b2, &(struct berthd_opts){.root = root});
    ctr_track(&b2, "kept");
    char *err = write_past_the_limit(&b2, "kept", "dd");
    ck_assert_msg(strstr(err, "No space left on device"), "%s", err);
    free(err);
    ctr_delete(&b2, "kept");
    ck_assert_msg(access(img, F_OK) != 0, "%s is left", img);
    ck_assert_msg(ctr_sh("losetup -a | grep -q '%s'", img) != 0, "a loop device still holds %s",
                  img);
    berthd_finish(&b2);
    berthd_cleanup(&b1);
}
END_TEST

/*
 * Where the store's filesystem has project quotas, they bound the layer
 * instead of an image. An ext4 image with the quota and project features,
 * loop-mounted with prjquota, is such a filesystem, if this kernel can
 * mount it (it needs CONFIG_QUOTA and CONFIG_QFMT_V2); if not, the case is
 * skipped, saying why.
 */
START_TEST(disk_limit_uses_a_project_quota_where_the_filesystem_has_them)
{
    ctr_require_runtime();
    char tmp[PATH_MAX], fsimg[PATH_MAX + 16], mnt[PATH_MAX + 16];
    harness_mkdtemp(tmp, sizeof(tmp));
    snprintf(fsimg, sizeof(fsimg), "%s/fs.img", tmp);
    snprintf(mnt, sizeof(mnt), "%s/mnt", tmp);
    if (ctr_sh("command -v mkfs.ext4 >/dev/null && truncate -s 512M '%s' && "
               "mkfs.ext4 -q -F -O quota,project '%s' && mkdir -p '%s'",
               fsimg, fsimg, mnt) != 0) {
        fprintf(stderr, "skipped the project quota case: mkfs.ext4 -O quota,project failed\n");
        ctr_sh("rm -rf '%s'", tmp);
        return;
    }
    if (ctr_sh("mount -o loop,prjquota '%s' '%s' 2>/dev/null", fsimg, mnt) != 0) {
        const char *why = ctr_sh_out("dmesg 2>/dev/null | grep -i 'quota' | tail -1");
        fprintf(stderr,
                "skipped the project quota case: this kernel cannot mount ext4 with prjquota "
                "(%s)\n",
                why[0] ? why : "mount failed; no reason in dmesg");
        ctr_sh("rm -rf '%s'", tmp);
        return;
    }
    struct berthd b = {0};
    snprintf(b.tmp, sizeof(b.tmp), "%s", tmp);
    snprintf(b.mount, sizeof(b.mount), "%s", mnt);
    char root[PATH_MAX + 16];
    snprintf(root, sizeof(root), "%s/root", mnt);
    berthd_start(&b, &(struct berthd_opts){.root = root});
    create_with_disk(&b, "quota", DISK);
    char img[PATH_MAX + 64];
    snprintf(img, sizeof(img), "%s/containers/quota/scratch.img", root);
    ck_assert_msg(access(img, F_OK) != 0, "an image was made although the filesystem has quotas");
    char *err = write_past_the_limit(&b, "quota", "dd");
    ck_assert_msg(strstr(err, "quota") || strstr(err, "No space"), "%s", err);
    free(err);
    ck_assert_msg(du_kb(root) * 1024 <= (long long)DISK + (4 << 20),
                  "the store grew past the limit");
    ctr_delete(&b, "quota");
    berthd_finish(&b);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("containers_limits");
    TCase *out = tcase_create("output");
    tcase_set_timeout(out, 120);
    ctr_add_fixture(out);
    tcase_add_test(out, output_past_the_cap_is_cut_and_the_process_stopped);
    tcase_add_test(out, a_process_killed_by_the_oom_killer_says_so);
    tcase_add_test(out, output_cap_counts_stdout_and_stderr_together);
    suite_add_tcase(s, out);
    TCase *disk = tcase_create("disk");
    tcase_set_timeout(disk, 180);
    ctr_add_fixture(disk);
    tcase_add_test(disk, disk_limit_fails_writes_at_the_limit_and_delete_removes_it_all);
    tcase_add_test(disk, disk_limit_is_validated_and_shown);
    tcase_add_test(disk, disk_limit_survives_a_daemon_restart_and_is_released);
    tcase_add_test(disk, disk_limit_uses_a_project_quota_where_the_filesystem_has_them);
    suite_add_tcase(s, disk);
    return s;
}

int
main(void)
{
    return harness_run_suite(suite());
}
