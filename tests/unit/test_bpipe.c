/*
 * The bounded pipe between the loop and a job: flow control both ways,
 * end of stream, abort, and clean release (uv_loop_close returns 0).
 */
#include <check.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "daemon/bpipe.h"

struct reader {
    struct bpipe *p;
    size_t total;
    ssize_t last;
    unsigned char expect;
    bool corrupt;
};

static void *
reader_main(void *arg)
{
    struct reader *r = arg;
    char buf[777];
    for (;;) {
        ssize_t n = bpipe_read(r->p, buf, sizeof(buf));
        r->last = n;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++)
            if ((unsigned char)buf[i] != r->expect++)
                r->corrupt = true;
        r->total += (size_t)n;
    }
    return NULL;
}

struct upload {
    struct bpipe *p;
    size_t sent, target;
    int notifies;
    unsigned char next;
};

static void
pump(struct upload *u)
{
    char chunk[1000];
    while (u->sent < u->target) {
        size_t want = u->target - u->sent < sizeof(chunk) ? u->target - u->sent : sizeof(chunk);
        for (size_t i = 0; i < want; i++)
            chunk[i] = (char)(u->next + i);
        size_t took = bpipe_write_nb(u->p, chunk, want);
        u->next += (unsigned char)took;
        u->sent += took;
        if (took < want)
            return; /* full: wait for the notify, as a suspended connection would */
    }
    bpipe_close_write(u->p);
}

static void
room_cb(void *ctx)
{
    struct upload *u = ctx;
    u->notifies++;
    if (u->sent < u->target)
        pump(u);
}

START_TEST(bpipe_upload_flows_with_back_pressure_and_ends)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct upload u = {.target = 1 << 20};
    u.p = bpipe_new(&loop, 4096, room_cb, &u);
    ck_assert_ptr_nonnull(u.p);
    struct reader r = {.p = u.p};
    pthread_t t;
    pthread_create(&t, NULL, reader_main, &r);
    pump(&u);
    ck_assert_uint_le(bpipe_buffered(u.p), 4096); /* never more than capacity */
    /* The loop only until everything is written: after that the reader
     * drains without it. (Waiting in the loop for the reader's last read
     * could block for good: nothing wakes the loop once the pipe is closed.) */
    while (u.sent < u.target)
        uv_run(&loop, UV_RUN_ONCE);
    pthread_join(t, NULL);
    ck_assert_uint_eq(r.total, u.target);
    ck_assert_int_eq(r.last, 0);
    ck_assert(!r.corrupt);
    ck_assert_int_gt(u.notifies, 0);
    bpipe_release_job(u.p);
    bpipe_release_loop(u.p);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

static void
noop_cb(void *ctx)
{
    (void)ctx;
}

START_TEST(bpipe_abort_wakes_a_blocked_reader)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct bpipe *p = bpipe_new(&loop, 1024, noop_cb, NULL);
    struct reader r = {.p = p};
    pthread_t t;
    pthread_create(&t, NULL, reader_main, &r);
    usleep(50000);
    bpipe_abort(p, ECANCELED);
    pthread_join(t, NULL);
    ck_assert_int_eq(r.last, -ECANCELED);
    ck_assert_int_eq(bpipe_aborted(p), ECANCELED);
    ck_assert_uint_eq(bpipe_write_nb(p, "x", 1), 0);
    bpipe_release_loop(p);
    bpipe_release_job(p);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

struct download {
    struct bpipe *p;
    size_t got;
    bool eof;
};

static void
data_cb(void *ctx)
{
    struct download *d = ctx;
    char buf[300];
    size_t n;
    while ((n = bpipe_read_nb(d->p, buf, sizeof(buf), &d->eof)) > 0)
        d->got += n;
}

static void *
writer_main(void *arg)
{
    struct bpipe *p = arg;
    char buf[5000];
    memset(buf, 'z', sizeof(buf));
    for (int i = 0; i < 100; i++)
        if (bpipe_write(p, buf, sizeof(buf)) < 0)
            return NULL;
    bpipe_close_job(p);
    return NULL;
}

START_TEST(bpipe_download_blocks_the_job_until_the_loop_reads)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct download d = {0};
    d.p = bpipe_new(&loop, 2048, data_cb, &d);
    pthread_t t;
    pthread_create(&t, NULL, writer_main, d.p);
    while (!d.eof)
        uv_run(&loop, UV_RUN_ONCE);
    pthread_join(t, NULL);
    ck_assert_uint_eq(d.got, 500000);
    bpipe_release_job(d.p);
    bpipe_release_loop(d.p);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("bpipe");
    TCase *tc = tcase_create("bpipe");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, bpipe_upload_flows_with_back_pressure_and_ends);
    tcase_add_test(tc, bpipe_abort_wakes_a_blocked_reader);
    tcase_add_test(tc, bpipe_download_blocks_the_job_until_the_loop_reads);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
