/*
 * The bounded pipe between the loop and a job: flow control both ways,
 * end of stream, abort, and clean release (uv_loop_close returns 0).
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#ifndef _WIN32
#include <sys/mman.h>
#endif
#include <time.h>
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

static void
count_cb(void *ctx)
{
    ++*(int *)ctx;
}

START_TEST(bpipe_reads_wake_the_uploader_once_it_asked_and_half_the_ring_is_free)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    int notifies = 0;
    struct bpipe *p = bpipe_new(&loop, 4096, count_cb, &notifies);
    ck_assert_ptr_nonnull(p);
    char buf[4096];
    memset(buf, 'x', sizeof(buf));
    /* A read while the uploader never fell short wakes nobody. */
    ck_assert_uint_eq(bpipe_write_nb(p, buf, 100), 100);
    ck_assert_int_eq(bpipe_read(p, buf, 100), 100);
    uv_run(&loop, UV_RUN_NOWAIT);
    ck_assert_int_eq(notifies, 0);
    /* Full, and a write that fell short: the uploader waits for room. */
    ck_assert_uint_eq(bpipe_write_nb(p, buf, 4096), 4096);
    ck_assert_uint_eq(bpipe_write_nb(p, buf, 1), 0);
    ck_assert_int_eq(bpipe_read(p, buf, 1000), 1000); /* 1000 free: not yet */
    uv_run(&loop, UV_RUN_NOWAIT);
    ck_assert_int_eq(notifies, 0);
    ck_assert_int_eq(bpipe_read(p, buf, 1100), 1100); /* 2100 free: half */
    uv_run(&loop, UV_RUN_NOWAIT);
    ck_assert_int_eq(notifies, 1);
    ck_assert_int_eq(bpipe_read(p, buf, 1996), 1996); /* once per ask */
    uv_run(&loop, UV_RUN_NOWAIT);
    ck_assert_int_eq(notifies, 1);
    bpipe_close_write(p);
    bpipe_release_job(p);
    bpipe_release_loop(p);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

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

/* A download whose job writes in place (bpipe_reserve + bpipe_commit)
 * between small copied writes, as the tar writer does with file data
 * between headers: the loop must read one unbroken sequence, across the
 * ring's wrap, with the job held back while the ring is full. */
struct ordered {
    struct bpipe *p;
    unsigned char expect;
    size_t got;
    bool eof, corrupt;
};

static void
ordered_cb(void *ctx)
{
    struct ordered *o = ctx;
    char buf[211];
    size_t n;
    while ((n = bpipe_read_nb(o->p, buf, sizeof(buf), &o->eof)) > 0) {
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)buf[i] != o->expect++)
                o->corrupt = true;
        o->got += n;
    }
}

static void *
inplace_writer_main(void *arg)
{
    struct bpipe *p = arg;
    unsigned char next = 0;
    for (int i = 0; i < 400; i++) {
        char head[7];
        for (size_t k = 0; k < sizeof(head); k++)
            head[k] = (char)next++;
        if (bpipe_write(p, head, sizeof(head)) < 0)
            return NULL;
        size_t left = 500 + (size_t)(i % 7) * 333;
        while (left > 0) {
            void *buf;
            size_t len;
            if (bpipe_reserve(p, left, &buf, &len) < 0)
                return NULL;
            if (len == 0)
                return NULL;                                /* never: reserve waits for room */
            size_t fill = len > 3 && i % 2 ? len - 3 : len; /* a short read now and then */
            for (size_t k = 0; k < fill; k++)
                ((unsigned char *)buf)[k] = next++;
            bpipe_commit(p, fill);
            left -= fill;
        }
    }
    bpipe_close_job(p);
    return NULL;
}

START_TEST(bpipe_in_place_writes_keep_order_across_the_wrap)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct ordered o = {0};
    o.p = bpipe_new(&loop, 3001, ordered_cb, &o);
    pthread_t t;
    pthread_create(&t, NULL, inplace_writer_main, o.p);
    while (!o.eof)
        uv_run(&loop, UV_RUN_ONCE);
    pthread_join(t, NULL);
    size_t want = 0;
    for (int i = 0; i < 400; i++)
        want += 7 + 500 + (size_t)(i % 7) * 333;
    ck_assert_uint_eq(o.got, want);
    ck_assert(!o.corrupt);
    bpipe_release_job(o.p);
    bpipe_release_loop(o.p);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

START_TEST(bpipe_reserve_fails_once_aborted)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct bpipe *p = bpipe_new(&loop, 64, noop_cb, NULL);
    void *buf;
    size_t len;
    ck_assert_int_eq(bpipe_reserve(p, 1000, &buf, &len), 0);
    ck_assert_uint_eq(len, 64);
    bpipe_abort(p, EPIPE);
    ck_assert_int_eq(bpipe_reserve(p, 10, &buf, &len), -EPIPE);
    bpipe_commit(p, 10); /* after an abort: nothing becomes readable */
    ck_assert_uint_eq(bpipe_buffered(p), 0);
    bpipe_release_loop(p);
    bpipe_release_job(p);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

#ifndef _WIN32 /* a SIGSEGV trap on an mmap'd page: POSIX only */
/* The job's copy out of the pipe is held up (its buffer faults, and the
 * fault handler sleeps: a pool thread preempted mid-copy) while the
 * loop writes the next piece of an upload and asks whether the pipe was
 * aborted: neither may wait for that copy. */
static char *trap;
static size_t trap_len;

static void
trap_handler(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    char *a = si->si_addr;
    if (a < trap || a >= trap + trap_len) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    struct timespec ts = {1, 0};
    nanosleep(&ts, NULL);
    mprotect(trap, trap_len, PROT_READ | PROT_WRITE);
}

struct held_reader {
    struct bpipe *p;
    ssize_t n;
};

static void *
held_reader_main(void *arg)
{
    struct held_reader *r = arg;
    r->n = bpipe_read(r->p, trap, trap_len);
    return NULL;
}

static double
mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(bpipe_loop_side_never_waits_for_the_jobs_copy)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct bpipe *p = bpipe_new(&loop, 65536, noop_cb, NULL);
    trap_len = 16384;
    trap = mmap(NULL, trap_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(trap, MAP_FAILED);
    struct sigaction sa = {.sa_sigaction = trap_handler, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    ck_assert_int_eq(sigaction(SIGSEGV, &sa, NULL), 0);
    char data[8192];
    memset(data, 'u', sizeof(data));
    ck_assert_uint_eq(bpipe_write_nb(p, data, sizeof(data)), sizeof(data));
    struct held_reader r = {.p = p};
    pthread_t t;
    pthread_create(&t, NULL, held_reader_main, &r);
    usleep(200000); /* the reader is in its copy, held for 1 s */
    double t0 = mono_s();
    ck_assert_int_eq(bpipe_aborted(p), 0);
    ck_assert_uint_eq(bpipe_write_nb(p, data, 100), 100);
    double waited = mono_s() - t0;
    pthread_join(t, NULL);
    ck_assert_int_eq(r.n, (ssize_t)sizeof(data));
    ck_assert_int_eq(trap[0], 'u');
    ck_assert_uint_eq(bpipe_buffered(p), 100);
    /* Under the lock, the copy kept the loop for the rest of the second. */
    ck_assert_msg(waited < 0.5, "the loop waited %.3f s for the job's copy", waited);
    munmap(trap, trap_len);
    bpipe_release_loop(p);
    bpipe_release_job(p);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST
#endif

int
main(void)
{
    Suite *s = suite_create("bpipe");
    TCase *tc = tcase_create("bpipe");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, bpipe_upload_flows_with_back_pressure_and_ends);
    tcase_add_test(tc, bpipe_reads_wake_the_uploader_once_it_asked_and_half_the_ring_is_free);
    tcase_add_test(tc, bpipe_abort_wakes_a_blocked_reader);
    tcase_add_test(tc, bpipe_download_blocks_the_job_until_the_loop_reads);
    tcase_add_test(tc, bpipe_in_place_writes_keep_order_across_the_wrap);
    tcase_add_test(tc, bpipe_reserve_fails_once_aborted);

#ifndef _WIN32
    tcase_add_test(tc, bpipe_loop_side_never_waits_for_the_jobs_copy);
#endif
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
