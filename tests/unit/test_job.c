/*
 * The job queue: work runs off the loop and done on it, counters, cancel
 * at shutdown, and a job whose client went away (its weak reference was
 * cleared) completing without touching freed memory. Every loop test
 * closes its handles and checks that uv_loop_close returns 0.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#ifndef _WIN32 /* thread priorities by nice value: Linux only */
#include <sys/resource.h>
#endif
#include <unistd.h>

#include "common/os.h"
#include "daemon/job.h"

struct probe {
    pthread_t loop_thread;
    pthread_t work_thread;
    atomic_int worked;
    int done_calls;
    bool cancelled;
    struct job_queue *q;
    unsigned running_seen;
    void **client; /* weak reference to a "client" that may go away */
    int delivered;
    useconds_t sleep_us;
};

static void
probe_work(void *ctx)
{
    struct probe *p = ctx;
    p->work_thread = pthread_self();
    if (p->sleep_us)
        usleep(p->sleep_us);
    atomic_fetch_add(&p->worked, 1);
}

static void
probe_done(void *ctx, bool cancelled)
{
    struct probe *p = ctx;
    ck_assert(pthread_equal(pthread_self(), p->loop_thread));
    p->done_calls++;
    p->cancelled = cancelled;
    if (p->client && *p->client)
        p->delivered++;
}

START_TEST(job_runs_work_on_pool_and_done_on_loop)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct job_queue *q = job_queue_new(&loop);
    /* Slow enough that it is still queued or running when counted. */
    struct probe p = {.loop_thread = pthread_self(), .sleep_us = 200000};
    ck_assert_int_eq(job_submit(q, "test", probe_work, probe_done, &p), 0);
    ck_assert_uint_eq(job_queue_queued(q) + job_queue_running(q), 1);
    ck_assert(!job_queue_idle(q));
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(atomic_load(&p.worked), 1);
    ck_assert_int_eq(p.done_calls, 1);
    ck_assert(!p.cancelled);
    ck_assert(!pthread_equal(p.work_thread, p.loop_thread));
    ck_assert(job_queue_idle(q));
    ck_assert_uint_eq(job_queue_completed(q), 1);
    ck_assert_uint_eq(job_queue_queued(q), 0);
    ck_assert_uint_eq(job_queue_running(q), 0);
    job_queue_free(q);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

START_TEST(job_shutdown_cancels_queued_and_refuses_new)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct job_queue *q = job_queue_new(&loop);
    /* More slow jobs than pool threads, so some are still queued. */
    enum { N = 12 };
    struct probe p[N];
    for (int i = 0; i < N; i++) {
        p[i] = (struct probe){.loop_thread = pthread_self(), .sleep_us = 200000};
        ck_assert_int_eq(job_submit(q, "slow", probe_work, probe_done, &p[i]), 0);
    }
    usleep(50000);
    job_queue_shutdown(q);
    struct probe late = {.loop_thread = pthread_self()};
    ck_assert_int_eq(job_submit(q, "late", probe_work, probe_done, &late), -ECANCELED);
    uv_run(&loop, UV_RUN_DEFAULT);
    int cancelled = 0, ran = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(p[i].done_calls, 1);
        if (p[i].cancelled) {
            cancelled++;
            ck_assert_int_eq(atomic_load(&p[i].worked), 0);
        } else {
            ran++;
            ck_assert_int_eq(atomic_load(&p[i].worked), 1);
        }
    }
    ck_assert_int_gt(cancelled, 0);
    ck_assert_int_gt(ran, 0);
    ck_assert_int_eq(late.done_calls, 0);
    ck_assert(job_queue_idle(q));
    job_queue_free(q);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

struct client {
    int alive;
};

static void
disconnect_cb(uv_timer_t *t)
{
    /* The client goes away while the job runs: what the request's
     * completion does with its weak reference. */
    void **ref = t->data;
    free(*ref);
    *ref = NULL;
    uv_close((uv_handle_t *)t, NULL);
}

START_TEST(job_whose_client_disconnected_completes_safely)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct job_queue *q = job_queue_new(&loop);
    void *client = calloc(1, sizeof(struct client));
    struct probe p = {.loop_thread = pthread_self(), .sleep_us = 100000, .client = &client};
    ck_assert_int_eq(job_submit(q, "orphan", probe_work, probe_done, &p), 0);
    uv_timer_t t;
    uv_timer_init(&loop, &t);
    t.data = &client;
    uv_timer_start(&t, disconnect_cb, 10, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(p.done_calls, 1);
    ck_assert_int_eq(p.delivered, 0); /* nothing delivered to the freed client */
    ck_assert_ptr_null(client);
    job_queue_free(q);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

static atomic_int long_running_now, long_running_max;

static void
long_work(void *ctx)
{
    struct probe *p = ctx;
    int now = atomic_fetch_add(&long_running_now, 1) + 1;
    int seen = atomic_load(&long_running_max);
    while (now > seen && !atomic_compare_exchange_weak(&long_running_max, &seen, now))
        ;
    usleep(p->sleep_us);
    atomic_fetch_sub(&long_running_now, 1);
    atomic_fetch_add(&p->worked, 1);
}

START_TEST(job_long_jobs_are_capped_and_leave_threads_for_short_ones)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct job_queue *q = job_queue_new(&loop);
    job_queue_set_long_max(q, 2);
    atomic_store(&long_running_now, 0);
    atomic_store(&long_running_max, 0);
    enum { N = 6 };
    struct probe p[N];
    for (int i = 0; i < N; i++) {
        p[i] = (struct probe){.loop_thread = pthread_self(), .sleep_us = 100000};
        ck_assert_int_eq(job_submit_long(q, "long", long_work, probe_done, &p[i]), 0);
    }
    /* Waiting long jobs count as queued, and the queue is not idle. */
    ck_assert_uint_eq(job_queue_queued(q) + job_queue_running(q), N);
    /* A short job submitted now runs at once, beside the two long ones. */
    struct probe quick = {.loop_thread = pthread_self()};
    ck_assert_int_eq(job_submit(q, "short", probe_work, probe_done, &quick), 0);
    uint64_t t0 = uv_hrtime();
    while (quick.done_calls == 0)
        uv_run(&loop, UV_RUN_ONCE);
    ck_assert_msg(uv_hrtime() - t0 < 90000000ull, "the short job waited for the long ones");
    uv_run(&loop, UV_RUN_DEFAULT);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(p[i].done_calls, 1);
        ck_assert(!p[i].cancelled);
    }
    ck_assert_int_eq(atomic_load(&long_running_max), 2);
    ck_assert(job_queue_idle(q));
    job_queue_free(q);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

START_TEST(job_shutdown_cancels_long_jobs_waiting_for_a_slot)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct job_queue *q = job_queue_new(&loop);
    job_queue_set_long_max(q, 1);
    struct probe a = {.loop_thread = pthread_self(), .sleep_us = 100000};
    struct probe b = {.loop_thread = pthread_self(), .sleep_us = 100000};
    ck_assert_int_eq(job_submit_long(q, "long", probe_work, probe_done, &a), 0);
    ck_assert_int_eq(job_submit_long(q, "long", probe_work, probe_done, &b), 0);
    job_queue_shutdown(q);
    ck_assert_int_eq(b.done_calls, 1); /* ended at once, never ran */
    ck_assert(b.cancelled);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(a.done_calls, 1);
    ck_assert_int_eq(atomic_load(&b.worked), 0);
    ck_assert(job_queue_idle(q));
    job_queue_free(q);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

#ifndef _WIN32
struct nice_probe {
    pid_t tid;
    int nice;
    int nice_after; /* the same thread's, read on the loop once it is done */
};

static void
nice_work(void *ctx)
{
    struct nice_probe *n = ctx;
    n->tid = gettid();
    errno = 0;
    n->nice = getpriority(PRIO_PROCESS, (id_t)n->tid);
    ck_assert_int_eq(errno, 0);
}

static void
nice_done(void *ctx, bool cancelled)
{
    struct nice_probe *n = ctx;
    ck_assert(!cancelled);
    n->nice_after = getpriority(PRIO_PROCESS, (id_t)n->tid);
}

START_TEST(job_prompt_jobs_run_at_the_daemons_priority_others_below_it_and_threads_rest_at_it)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct job_queue *q = job_queue_new(&loop);
    errno = 0;
    int daemon_nice = getpriority(PRIO_PROCESS, (id_t)getpid());
    ck_assert_int_eq(errno, 0);
    if (daemon_nice > 0) {
        job_queue_free(q);
        ck_assert_int_eq(uv_loop_close(&loop), 0);
        return; /* already niced: the pool's +10 cannot be told apart */
    }
    struct nice_probe prompt = {0}, plain = {0};
    ck_assert_int_eq(job_submit_prompt(q, "prompt", nice_work, nice_done, &prompt), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(job_submit(q, "plain", nice_work, nice_done, &plain), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(prompt.nice, daemon_nice);
    ck_assert_int_eq(plain.nice, 10);
    /* Between jobs a thread waits at the daemon's priority, so that a
     * prompt job is not first woken at the pool's +10. */
    ck_assert_int_eq(prompt.nice_after, daemon_nice);
    ck_assert_int_eq(plain.nice_after, daemon_nice);
    job_queue_free(q);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

/* Runs one plain and one prompt job on a queue set to nice; returns the
 * daemon's nice value, or -1 when the test cannot tell (already niced). */
static int
run_with_pool_nice(int nice, struct nice_probe *plain, struct nice_probe *prompt)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct job_queue *q = job_queue_new(&loop);
    job_queue_set_nice(q, nice);
    errno = 0;
    int daemon_nice = getpriority(PRIO_PROCESS, (id_t)getpid());
    ck_assert_int_eq(errno, 0);
    if (daemon_nice == 0) {
        ck_assert_int_eq(job_submit(q, "plain", nice_work, nice_done, plain), 0);
        uv_run(&loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(job_submit_prompt(q, "prompt", nice_work, nice_done, prompt), 0);
        uv_run(&loop, UV_RUN_DEFAULT);
    }
    job_queue_free(q);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    return daemon_nice == 0 ? 0 : -1;
}

START_TEST(job_pool_nice_sets_the_nice_value_of_plain_jobs)
{
    struct nice_probe plain = {0}, prompt = {0};
    if (run_with_pool_nice(15, &plain, &prompt) < 0)
        return;
    ck_assert_int_eq(plain.nice, 15);
    ck_assert_int_eq(prompt.nice, 0);
    /* Both rest at the daemon's priority between jobs. */
    ck_assert_int_eq(plain.nice_after, 0);
    ck_assert_int_eq(prompt.nice_after, 0);
}
END_TEST

START_TEST(job_pool_nice_zero_leaves_plain_jobs_at_the_daemons_priority)
{
    /* Pool threads niced by an earlier test go back up: that needs root. */
    if (geteuid() != 0)
        return;
    struct nice_probe plain = {0}, prompt = {0};
    if (run_with_pool_nice(0, &plain, &prompt) < 0)
        return;
    ck_assert_int_eq(plain.nice, 0);
    ck_assert_int_eq(plain.nice_after, 0);
    ck_assert_int_eq(prompt.nice, 0);
    ck_assert_int_eq(prompt.nice_after, 0);
}
END_TEST
#endif

int
main(void)
{
    os_setenv("UV_THREADPOOL_SIZE", "4");
    Suite *s = suite_create("job");
    TCase *tc = tcase_create("job");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, job_runs_work_on_pool_and_done_on_loop);
    tcase_add_test(tc, job_shutdown_cancels_queued_and_refuses_new);
    tcase_add_test(tc, job_whose_client_disconnected_completes_safely);
    tcase_add_test(tc, job_long_jobs_are_capped_and_leave_threads_for_short_ones);
    tcase_add_test(tc, job_shutdown_cancels_long_jobs_waiting_for_a_slot);
#ifndef _WIN32
    tcase_add_test(
        tc, job_prompt_jobs_run_at_the_daemons_priority_others_below_it_and_threads_rest_at_it);
    tcase_add_test(tc, job_pool_nice_sets_the_nice_value_of_plain_jobs);
    tcase_add_test(tc, job_pool_nice_zero_leaves_plain_jobs_at_the_daemons_priority);
#endif
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    /* Loop tests share the process-wide pool; no fork per test needed. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
