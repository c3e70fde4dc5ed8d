/*
 * /v1/images when things go wrong mid-import: berthd killed with
 * SIGKILL during a big upload and during a layout import's unpack, then
 * started again on the same root (no image listed, <root>/tmp empty, no
 * snapshots/tmp-*, and importing again works); a client that disconnects
 * mid-upload (the daemon stays healthy and frees everything); SIGTERM
 * during an import (a clean stop, nothing half-done after a restart).
 * The big image (one ~50 MB layer of random bytes) is built once per run
 * by tests/fixtures/make-images.sh.
 */
#include <sys/wait.h>

#include "tests/fixtures/imgfix.h"

struct upload_thread {
    pthread_t t;
    const struct berthd *b;
    struct fx_src src;
    struct hresp resp;
};

static void *
upload_main(void *arg)
{
    struct upload_thread *u = arg;
    fx_post(u->b, "/v1/images", "application/x-tar", NULL, &u->src, false, 120000, &u->resp);
    return NULL;
}

/* Bytes in regular files under dir (recursive). */
static int64_t fx_du_total;
static int
du_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)path;
    (void)ftw;
    if (flag == FTW_F)
        fx_du_total += st->st_size;
    return 0;
}

static int64_t
du(const char *dir)
{
    fx_du_total = 0;
    nftw(dir, du_cb, 16, FTW_PHYS);
    return fx_du_total;
}

/* After a crash and a restart: nothing half-done, and importing works. */
static void
assert_clean_after_restart(struct berthd *b, int images)
{
    berthd_start(b, NULL);
    ck_assert_int_eq(fx_image_count(b), images);
    ck_assert_msg(fx_count_entries(fx_root_path(b, "tmp"), NULL) == 0,
                  "<root>/tmp not emptied at start-up: %s", fx_names(fx_root_path(b, "tmp")));
    ck_assert_msg(fx_count_entries(fx_root_path(b, "snapshots"), "tmp-") == 0,
                  "snapshots/tmp-* left: %s", fx_names(fx_root_path(b, "snapshots")));
    /* No committed snapshot without an image either, once GC ran. */
    struct hresp r;
    fx_import_layout(b, NULL, fx_path("big"), "application/x-ndjson", &r);
    ck_assert_msg(r.status == 200 && strstr(r.body, "\"step\":\"done\"") &&
                      strstr(r.body, images ? "\"status\":200" : "\"status\":201"),
                  "import after the crash: %ld %.2000s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(b), 1);
    ck_assert_int_eq(fx_count_entries(fx_root_path(b, "tmp"), NULL), 0);
    ck_assert_int_eq(fx_count_entries(fx_root_path(b, "snapshots"), NULL), 1);
    berthd_finish(b);
}

/* What a crash during a prune left (a blob nothing references) goes at
 * the next start, in a job: health answers at once meanwhile. */
START_TEST(garbage_left_by_a_crash_is_collected_at_start_up)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    ck_assert_int_eq(berthd_term(&b, 10000), 0);
    char blob[PATH_MAX + 128];
    snprintf(blob, sizeof(blob), "%s/content/sha256/%064d", b.root, 7);
    fx_write_file(blob, "left by a prune that crashed", 28);
    double t0 = now_ms();
    berthd_start(&b, NULL);
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_msg(now_ms() - t0 < 15000, "ready after %.0f ms", now_ms() - t0);
    bool gone = false;
    for (int i = 0; i < 600 && !gone; i++) {
        gone = access(blob, F_OK) != 0;
        if (!gone)
            sleep_ms(50);
    }
    ck_assert_msg(gone, "the orphan blob %s is still there", blob);
    berthd_finish(&b);
}
END_TEST

START_TEST(kill9_during_a_big_upload_leaves_nothing_and_importing_again_works)
{
    struct berthd b;
    memset(&b, 0, sizeof(b));
    berthd_start(&b, NULL);
    size_t len = 0;
    char *data = fx_read_file(fx_path("big.tar"), &len);
    ck_assert_ptr_nonnull(data);
    struct upload_thread u = {.b = &b,
                              .src = {.data = data, .len = len, .chunk = 65536, .delay_us = 2000}};
    ck_assert_int_eq(pthread_create(&u.t, NULL, upload_main, &u), 0);
    /* Wait until the daemon has written a good part of it into tmp/. */
    double deadline = now_ms() + 60000;
    while (du(fx_root_path(&b, "tmp")) < (8 << 20) && now_ms() < deadline)
        sleep_ms(20);
    ck_assert_msg(du(fx_root_path(&b, "tmp")) >= (8 << 20), "the upload never reached tmp/");
    ck_assert_msg(u.src.sent < len, "the upload finished before the kill");
    berthd_kill(&b);
    pthread_join(u.t, NULL);
    ck_assert_msg(u.resp.status == 0, "a reply came from a killed daemon: %ld", u.resp.status);
    hresp_free(&u.resp);
    free(data);
    assert_clean_after_restart(&b, 0);
}
END_TEST

START_TEST(kill9_during_a_layout_unpack_leaves_nothing_and_importing_again_works)
{
    struct berthd b;
    memset(&b, 0, sizeof(b));
    berthd_start(&b, NULL);
    char body[PATH_MAX + 64];
    snprintf(body, sizeof(body), "{\"source\":{\"layout\":\"%s\"}}", fx_path("big"));
    struct bg_req bg;
    bg_start(
        &bg, &b,
        &(struct hreq){.method = "POST", .path = "/v1/images", .body = body, .timeout_ms = 60000});
    /* The unpack is under way when its snapshots/tmp-* directory exists
     * and holds some of the 50 MB file. */
    double deadline = now_ms() + 60000;
    bool seen = false;
    while (!seen && now_ms() < deadline) {
        if (fx_count_entries(fx_root_path(&b, "snapshots"), "tmp-") > 0 &&
            du(fx_root_path(&b, "snapshots")) > (4 << 20))
            seen = true;
        else
            sleep_ms(2);
    }
    berthd_kill(&b);
    bg_join(&bg);
    ck_assert_msg(seen, "never saw the unpack in progress (reply %ld %s)", bg.resp.status,
                  bg.resp.body);
    ck_assert_int_eq(bg.resp.status, 0);
    hresp_free(&bg.resp);
    assert_clean_after_restart(&b, 0);
}
END_TEST

START_TEST(client_disconnecting_mid_upload_leaves_the_daemon_healthy_and_frees_everything)
{
    struct berthd b;
    memset(&b, 0, sizeof(b));
    berthd_start(&b, NULL);
    size_t len = 0;
    char *data = fx_read_file(fx_path("big.tar"), &len);
    for (int round = 0; round < 3; round++) {
        /* Abort after 5, 20 and 40 MB. */
        size_t cut = (size_t)(round == 0 ? 5 : round == 1 ? 20 : 40) << 20;
        struct fx_src src = {.data = data, .len = len, .abort_after = cut};
        struct hresp r;
        fx_post(&b, "/v1/images", "application/x-tar", NULL, &src, false, 60000, &r);
        ck_assert_msg(r.curl_code == CURLE_ABORTED_BY_CALLBACK, "round %d: curl code %d", round,
                      r.curl_code);
        hresp_free(&r);
        bool empty = fx_wait_tmp_empty(&b, 5000);
        if (!empty) {
            /* Say whether it is late or never: wait longer, then report. */
            bool later = fx_wait_tmp_empty(&b, 20000);
            struct hresp h;
            http_get(&b, "/v1/health", &h);
            ck_abort_msg(
                "health: %s\nround %d (abort after %zu bytes): <root>/tmp not emptied within 5 s "
                "(%s after 25 s): %s\nlog:\n%s",
                h.body, round, cut, later ? "emptied" : "still not empty",
                fx_names(fx_root_path(&b, "tmp")), berthd_log(&b));
        }
        ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "snapshots"), "tmp-"), 0);
        ck_assert(berthd_alive(&b));
        http_get(&b, "/v1/health", &r);
        ck_assert_int_eq(r.status, 200);
        hresp_free(&r);
        ck_assert_int_eq(fx_image_count(&b), 0);
    }
    /* Importing the same image afterwards works, and a full upload too. */
    struct fx_src src = {.data = data, .len = len};
    struct hresp r;
    fx_post(&b, "/v1/images", "application/x-tar", NULL, &src, false, 120000, &r);
    ck_assert_msg(r.status == 201, "full upload after the aborted ones: %ld %s", r.status, r.body);
    hresp_free(&r);
    free(data);
    ck_assert_int_eq(fx_image_count(&b), 1);
    ck_assert(fx_wait_tmp_empty(&b, 2000));
    berthd_finish(&b);
}
END_TEST

START_TEST(sigterm_during_an_upload_stops_cleanly_and_leaves_nothing)
{
    struct berthd b;
    memset(&b, 0, sizeof(b));
    berthd_start(&b, NULL);
    size_t len = 0;
    char *data = fx_read_file(fx_path("big.tar"), &len);
    struct upload_thread u = {.b = &b,
                              .src = {.data = data, .len = len, .chunk = 65536, .delay_us = 2000}};
    ck_assert_int_eq(pthread_create(&u.t, NULL, upload_main, &u), 0);
    double deadline = now_ms() + 60000;
    while (du(fx_root_path(&b, "tmp")) < (4 << 20) && now_ms() < deadline)
        sleep_ms(20);
    int st = berthd_term(&b, 20000);
    pthread_join(u.t, NULL);
    ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "berthd did not stop cleanly during an upload: status 0x%x", st);
    /* Either the import was cut short (no reply, or 503) or the daemon
     * let it finish before stopping (201); never half of it. */
    ck_assert_msg(u.resp.status == 0 || u.resp.status == 503 || u.resp.status == 201,
                  "reply during shutdown: %ld %s", u.resp.status, u.resp.body);
    int images = u.resp.status == 201 ? 1 : 0;
    hresp_free(&u.resp);
    free(data);
    assert_clean_after_restart(&b, images);
}
END_TEST

static Suite *
crash_suite(void)
{
    Suite *s = suite_create("api_images_crash");
    TCase *tc = tcase_create("crash");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, garbage_left_by_a_crash_is_collected_at_start_up);
    tcase_add_test(tc, kill9_during_a_big_upload_leaves_nothing_and_importing_again_works);
    tcase_add_test(tc, kill9_during_a_layout_unpack_leaves_nothing_and_importing_again_works);
    tcase_add_test(tc,
                   client_disconnecting_mid_upload_leaves_the_daemon_healthy_and_frees_everything);
    tcase_add_test(tc, sigterm_during_an_upload_stops_cleanly_and_leaves_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    if (!fx_build(true)) {
        fx_cleanup();
        return 1;
    }
    int rc = harness_run_suite(crash_suite());
    fx_cleanup();
    return rc;
}
