/*
 * Volume uploads are all or nothing (issue 8, hole 6): berthd killed
 * (-9) at every step of an upload's merge, and at spread points of a
 * large one into a copy-on-write child, is restarted and must show the
 * old tree, or the new one once the merge committed; hundreds of uploads
 * racing to one path are each applied whole or refused. The kill points
 * come from the test build's BERTH_TEST_MERGE_KILL (store/volume_merge.c).
 */
#include <check.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/api/harness.h"

static int
sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void
create(struct berthd *b, const char *body, long want)
{
    struct hresp r;
    http_post_json(b, "/v1/volumes", body, &r);
    ck_assert_msg(r.status == want, "create %s: %ld %s", body, r.status, r.body);
    hresp_free(&r);
}

/* PUT a tar file; returns the status. */
static long
put_tar(struct berthd *b, const char *vol, const char *path, const char *file, const char *enc)
{
    char out[64];
    snprintf(out, sizeof(out), "%s/put.status", b->tmp);
    sh("curl -s -o %s/put.body -w '%%{http_code}' -X PUT --data-binary @%s %s%s%s "
       "'%s/v1/volumes/%s/files?path=%s' > %s",
       b->tmp, file, enc ? "-H 'Content-Encoding: " : "", enc ? enc : "", enc ? "'" : "",
       b->base_url, vol, path, out);
    FILE *f = fopen(out, "r");
    long st = 0;
    if (f) {
        if (fscanf(f, "%ld", &st) != 1)
            st = 0;
        fclose(f);
    }
    return st;
}

/* A fingerprint of a volume's tree (names, types, modes, contents, and
 * sizes but of directories, which ext4 never shrinks). */
static char *
fingerprint(struct berthd *b, const char *vol)
{
    char dir[PATH_MAX + 64];
    snprintf(dir, sizeof(dir), "%s/volumes/%s/fs/data", b->root, vol);
    return harness_tree_print(dir);
}

/* ---- all or nothing (issue 8, hole 6) ----------------------------------------------- */

/*
 * The old tree, written straight into data/, and a tar that changes it
 * in every way a merge can: files replaced and added inside a merged
 * directory whose mode changes, a file replaced by a directory and the
 * other way round, a symlink replaced by a file, a new directory.
 */
static void
old_tree(const char *data, int files)
{
    ck_assert_int_eq(sh("cd %s && mkdir -p d y && chmod 0755 d && for i in $(seq 1 %d); do "
                        "echo old $i > d/f$i; done && echo old x > x && echo old inner > y/inner "
                        "&& echo keep > keep && ln -s d l",
                        data, files),
                     0);
}

static void
new_tar(const char *tmp, const char *file, int files)
{
    ck_assert_int_eq(sh("rm -rf %s/new && mkdir -p %s/new/d %s/new/x %s/new/z && cd %s/new && "
                        "chmod 0700 d && for i in $(seq 1 %d); do echo new $i > d/f$i; "
                        "echo new $i > d/n$i; done && echo in > x/in && echo new y > y && "
                        "echo a > z/a && echo new l > l && tar -cf %s .",
                        tmp, tmp, tmp, tmp, tmp, files, file),
                     0);
}

/* The fingerprint of old, and of new merged over old, made with tar -x. */
static void
expected_prints(struct berthd *b, const char *tar, int files, char **old, char **merged)
{
    ck_assert_int_eq(
        sh("rm -rf %s/volumes/expect && mkdir -p %s/volumes/expect/fs/data", b->root, b->root), 0);
    char data[PATH_MAX + 64];
    snprintf(data, sizeof(data), "%s/volumes/expect/fs/data", b->root);
    old_tree(data, files);
    *old = fingerprint(b, "expect");
    /* What tar -x over the old tree gives: entries of another type go. */
    ck_assert_int_eq(sh("cd %s && rm -rf x y l && tar -xf %s && chmod 0700 d", data, tar), 0);
    *merged = fingerprint(b, "expect");
    ck_assert_int_eq(sh("rm -rf %s/volumes/expect", b->root), 0);
    ck_assert_str_ne(*old, *merged);
}

START_TEST(upload_killed_at_every_step_of_its_merge_is_old_or_new_after_restart)
{
    enum { FILES = 10 };
    char root[PATH_MAX];
    struct berthd b = {0};
    berthd_start(&b, NULL);
    snprintf(root, sizeof(root), "%s", b.root);
    char tar[PATH_MAX + 16];
    snprintf(tar, sizeof(tar), "%s/new.tar", b.tmp);
    new_tar(b.tmp, tar, FILES);
    char *old = NULL, *merged = NULL;
    expected_prints(&b, tar, FILES, &old, &merged);
    ck_assert_int_eq(berthd_term(&b, 10000), 0);

    /* Step N of the merge, for every N until the upload gets through:
     * the daemon dies there; restarted, the volume is the old tree until
     * the commit, the new one after it. */
    bool committed = false;
    int n;
    for (n = 0; n < 4 * FILES + 20; n++) {
        char env[64], handle[32], body[64];
        snprintf(env, sizeof(env), "BERTH_TEST_MERGE_KILL=%d", n);
        snprintf(handle, sizeof(handle), "k%d", n);
        snprintf(body, sizeof(body), "{\"handle\": \"%s\"}", handle);
        struct berthd_opts o = {.root = root, .env = {env, NULL}};
        berthd_start(&b, &o);
        create(&b, body, 201);
        char data[PATH_MAX + 64];
        snprintf(data, sizeof(data), "%s/volumes/%s/fs/data", root, handle);
        old_tree(data, FILES);
        long st = put_tar(&b, handle, "/", tar, NULL);
        bool killed = false;
        for (int i = 0; i < 100 && (killed = !berthd_alive(&b)) == false; i++)
            sleep_ms(50);
        if (!killed) {
            /* Past every kill point: the upload went through. */
            ck_assert_int_eq(st, 200);
            char *now = fingerprint(&b, handle);
            ck_assert_str_eq(now, merged);
            free(now);
            berthd_finish(&b);
            break;
        }
        berthd_start(&b, &(struct berthd_opts){.root = root});
        char *now = fingerprint(&b, handle);
        bool is_old = strcmp(now, old) == 0, is_new = strcmp(now, merged) == 0;
        ck_assert_msg(is_old || is_new, "killed at step %d: the volume is neither old nor new", n);
        ck_assert_msg(!committed || is_new, "killed at step %d: old again after a commit", n);
        committed = is_new;
        free(now);
        ck_assert_int_eq(sh("! ls -d %s/volumes/%s/fs/.staging-* 2>/dev/null", root, handle), 0);
        /* And the same upload now goes through. */
        ck_assert_int_eq(put_tar(&b, handle, "/", tar, NULL), 200);
        now = fingerprint(&b, handle);
        ck_assert_str_eq(now, merged);
        free(now);
        ck_assert_int_eq(berthd_term(&b, 10000), 0);
    }
    ck_assert_msg(committed, "no kill point after the commit");
    ck_assert_msg(n > 2 * FILES, "only %d kill points: the merge has fewer steps than entries", n);
    free(old), free(merged);
}
END_TEST

START_TEST(large_upload_into_a_child_killed_in_its_merge_is_old_or_new_after_restart)
{
    enum { FILES = 500 };
    char root[PATH_MAX];
    struct berthd b = {0};
    berthd_start(&b, NULL);
    snprintf(root, sizeof(root), "%s", b.root);
    char tar[PATH_MAX + 16];
    snprintf(tar, sizeof(tar), "%s/new.tar", b.tmp);
    new_tar(b.tmp, tar, FILES);
    char *old = NULL, *merged = NULL;
    expected_prints(&b, tar, FILES, &old, &merged);
    ck_assert_int_eq(berthd_term(&b, 10000), 0);
    /* The merge has 2 * FILES + 5 steps (FILES exchanges and FILES moves in
     * d, x, y, l exchanged, z moved, d's metadata); at 2 * FILES + 5 all
     * are done but not committed, 2 * FILES + 6 is after the commit. */
    const int points[] = {0, FILES / 2, 2 * FILES - 1, 2 * FILES + 5, 2 * FILES + 6};
    for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++) {
        char env[64], handle[32], body[64];
        snprintf(env, sizeof(env), "BERTH_TEST_MERGE_KILL=%d", points[i]);
        /* Into a copy-on-write child: every step is on an overlay whose
         * lower layer holds the old tree (exchanges copy entries up). */
        char parent[32];
        snprintf(parent, sizeof(parent), "pbig%zu", i);
        snprintf(handle, sizeof(handle), "big%zu", i);
        snprintf(body, sizeof(body), "{\"handle\": \"%s\"}", parent);
        berthd_start(&b, &(struct berthd_opts){.root = root, .env = {env, NULL}});
        create(&b, body, 201);
        char data[PATH_MAX + 64];
        snprintf(data, sizeof(data), "%s/volumes/%s/fs/data", root, parent);
        old_tree(data, FILES);
        snprintf(body, sizeof(body), "{\"handle\": \"%s\", \"parent\": \"%s\"}", handle, parent);
        create(&b, body, 201);
        put_tar(&b, handle, "/", tar, NULL);
        bool killed = false;
        for (int k = 0; k < 200 && !(killed = !berthd_alive(&b)); k++)
            sleep_ms(50);
        ck_assert_msg(killed, "not killed at step %d", points[i]);
        berthd_start(&b, &(struct berthd_opts){.root = root});
        char *now = fingerprint(&b, handle);
        if (points[i] <= 2 * FILES + 5)
            ck_assert_msg(strcmp(now, old) == 0, "killed at step %d: not the old tree", points[i]);
        else
            ck_assert_msg(strcmp(now, merged) == 0, "killed after the commit: not the new tree");
        free(now);
        now = fingerprint(&b, parent);
        ck_assert_msg(strcmp(now, old) == 0, "the parent changed");
        free(now);
        ck_assert_int_eq(berthd_term(&b, 10000), 0);
    }
    free(old), free(merged);
}
END_TEST

START_TEST(racing_uploads_to_one_path_are_each_whole_or_refused)
{
    enum { N = 300 };
    struct berthd b = {0};
    berthd_start(&b, NULL);
    create(&b, "{\"handle\": \"race\"}", 201);
    /* Upload i: f0..f9 all saying i, and a marker of its own. */
    ck_assert_int_eq(sh("mkdir -p %s/race && cd %s/race && python3 -c \"import tarfile, io\n"
                        "for k in range(%d):\n"
                        "  t=tarfile.open('%%d.tar' %% k,'w')\n"
                        "  for n in ['f%%d' %% j for j in range(10)] + ['m%%d' %% k]:\n"
                        "    d=(str(k)+'\\\\n').encode(); i=tarfile.TarInfo('sub/'+n); "
                        "i.size=len(d); t.addfile(i, io.BytesIO(d))\n"
                        "  t.close()\"",
                        b.tmp, b.tmp, N),
                     0);
    ck_assert_int_eq(sh("cd %s/race && seq 0 %d | xargs -P %d -I{} sh -c \"curl -s -o {}.body "
                        "-w '%%{http_code}' -X PUT -H 'Expect:' --data-binary @{}.tar "
                        "'%s/v1/volumes/race/files?path=/dst' > {}.status\"",
                        b.tmp, N - 1, N, b.base_url),
                     0);
    char data[PATH_MAX + 64];
    snprintf(data, sizeof(data), "%s/volumes/race/fs/data/dst/sub", b.root);
    int ok = 0, refused = 0;
    for (int k = 0; k < N; k++) {
        char p[PATH_MAX + 64];
        snprintf(p, sizeof(p), "%s/race/%d.status", b.tmp, k);
        FILE *f = fopen(p, "r");
        long st = 0;
        ck_assert_ptr_nonnull(f);
        if (fscanf(f, "%ld", &st) != 1)
            st = 0;
        fclose(f);
        snprintf(p, sizeof(p), "%s/m%d", data, k);
        bool marked = access(p, F_OK) == 0;
        if (st == 200) {
            ok++;
            ck_assert_msg(marked, "upload %d answered 200 but its marker is missing", k);
        } else {
            refused++;
            ck_assert_msg(!marked, "upload %d answered %ld but its marker landed", k, st);
            ck_assert_msg(st >= 400 && st < 600, "upload %d: status %ld", k, st);
            ck_assert_int_eq(sh("grep -q '\"error\"' %s/race/%d.body", b.tmp, k), 0);
        }
    }
    /* The files are all from one upload: the last merged. */
    ck_assert_int_eq(sh("cd %s && test $(cat f0 f1 f2 f3 f4 f5 f6 f7 f8 f9 | sort -u | wc -l) = 1 "
                        "&& test -e m$(cat f0)",
                        data),
                     0);
    ck_assert_int_eq(sh("! ls -d %s/volumes/race/fs/.staging-* 2>/dev/null", b.root), 0);
    fprintf(stderr, "racing uploads: %d applied, %d refused\n", ok, refused);
    ck_assert_int_gt(ok, 0);
    berthd_finish(&b);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("volumes_crash");
    TCase *tc = tcase_create("volumes_crash");
    tcase_set_timeout(tc, 400);
    tcase_add_test(tc, upload_killed_at_every_step_of_its_merge_is_old_or_new_after_restart);
    tcase_add_test(tc, large_upload_into_a_child_killed_in_its_merge_is_old_or_new_after_restart);
    tcase_add_test(tc, racing_uploads_to_one_path_are_each_whole_or_refused);
    suite_add_tcase(s, tc);
    return harness_run_suite(s);
}
