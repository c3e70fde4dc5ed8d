/*
 * runtime/hcs/admit: commit admission of utility VMs against made-up
 * hosts, the ledger of VMs still starting, and concurrent admissions on
 * threads (pthreads here, winpthreads under Wine).
 */
#include "runtime/hcs/admit.h"

#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024ull * 1024ull)
#define PAGE 4096ull
#define PAGES(mb) ((uint64_t)(mb)*MIB / PAGE)

START_TEST(overhead_follows_the_seed_measurements)
{
    /* The seed measured 159 MB beyond a 1024 MB VM and 222 MB beyond 8192. */
    ck_assert_uint_eq(hcs_admit_overhead_mb(1024), 176);
    ck_assert_uint_eq(hcs_admit_overhead_mb(8192), 288);
    ck_assert_uint_ge(hcs_admit_overhead_mb(1024), 159);
    ck_assert_uint_ge(hcs_admit_overhead_mb(8192), 222);
    ck_assert_uint_eq(hcs_admit_overhead_mb(1), 161);
}
END_TEST

START_TEST(check_fits_exactly_and_not_a_byte_more)
{
    struct err err = {0};
    /* 1024 MB VM + 176 MB overhead = 1200 MB needed. */
    struct hcs_commit_info ci = {PAGES(10000), PAGES(8800), PAGE};
    ck_assert_int_eq(hcs_admit_check(&ci, 0, 1024, &err), 0);
    ci.commit_total += 1;
    ck_assert_int_eq(hcs_admit_check(&ci, 0, 1024, &err), -ENOSPC);
    ck_assert_int_eq(err.code, ENOSPC);
    /* The same room, but some of it promised to a VM still booting. */
    struct hcs_commit_info room = {PAGES(10000), PAGES(7000), PAGE};
    ck_assert_int_eq(hcs_admit_check(&room, 1800 * MIB, 1024, &err), 0);
    ck_assert_int_eq(hcs_admit_check(&room, 1801 * MIB, 1024, &err), -ENOSPC);
}
END_TEST

START_TEST(refusal_names_the_numbers_and_the_vm_size)
{
    struct err err = {0};
    struct hcs_commit_info ci = {PAGES(16384), PAGES(15484), PAGE};
    ck_assert_int_eq(hcs_admit_check(&ci, 512 * MIB, 1280, &err), -ENOSPC);
    ck_assert_str_eq(err.msg, "not enough memory commit for a 1280 MB utility vm (+ 180 MB "
                              "overhead): the host has 900 MB available (CommitLimit 16384 MB - "
                              "CommitTotal 15484 MB), 512 MB of it promised to vms still starting");
    /* A host over its limit has nothing available, not a wrapped-around amount. */
    struct hcs_commit_info over = {PAGES(1000), PAGES(2000), PAGE};
    ck_assert_int_eq(hcs_admit_check(&over, 0, 2, &err), -ENOSPC);
    ck_assert_ptr_nonnull(strstr(err.msg, "the host has 0 MB available"));
    struct hcs_commit_info nopage = {1, 0, 0};
    ck_assert_int_eq(hcs_admit_check(&nopage, 0, 2, &err), -EINVAL);
}
END_TEST

/* A host whose commit the test changes; the reader counts its calls. */
struct fake_host {
    pthread_mutex_t lock;
    struct hcs_commit_info ci;
    int reads;
    int fail;
};

static int
fake_read(void *arg, struct hcs_commit_info *out, struct err *err)
{
    struct fake_host *h = arg;
    pthread_mutex_lock(&h->lock);
    h->reads++;
    *out = h->ci;
    int fail = h->fail;
    pthread_mutex_unlock(&h->lock);
    if (fail)
        return err_set(err, EACCES, "GetPerformanceInfo: access is denied");
    return 0;
}

START_TEST(ledger_counts_vms_still_starting)
{
    struct err err = {0};
    /* Room for one 1024 MB VM (1200 MB with overhead), not two. */
    struct fake_host h = {PTHREAD_MUTEX_INITIALIZER, {PAGES(20000), PAGES(18000), PAGE}, 0, 0};
    struct hcs_admit *a = hcs_admit_new(fake_read, &h);
    ck_assert_ptr_nonnull(a);
    uint64_t t1 = 0, t2 = 0;
    ck_assert_int_eq(hcs_admit_reserve(a, 1024, &t1, &err), 0);
    ck_assert_uint_eq(hcs_admit_promised_bytes(a), 1200 * MIB);
    /* The first is still booting: CommitTotal does not show it yet. */
    ck_assert_int_eq(hcs_admit_reserve(a, 1024, &t2, &err), -ENOSPC);
    ck_assert_ptr_nonnull(strstr(err.msg, "1200 MB of it promised to vms still starting"));
    /* It started: its commit is the host's now, the promise is gone. */
    h.ci.commit_total += PAGES(1200);
    hcs_admit_commit(a, t1);
    ck_assert_uint_eq(hcs_admit_promised_bytes(a), 0);
    ck_assert_uint_eq(hcs_admit_running(a), 1);
    ck_assert_int_eq(hcs_admit_reserve(a, 1024, &t2, &err), -ENOSPC);
    ck_assert_ptr_nonnull(strstr(err.msg, "0 MB of it promised"));
    /* It stopped and gave its commit back. */
    h.ci.commit_total -= PAGES(1200);
    hcs_admit_release(a, t1);
    ck_assert_uint_eq(hcs_admit_running(a), 0);
    ck_assert_int_eq(hcs_admit_reserve(a, 1024, &t2, &err), 0);
    ck_assert_uint_ne(t1, t2);
    /* A VM that failed to start releases its promise. */
    hcs_admit_release(a, t2);
    ck_assert_uint_eq(hcs_admit_promised_bytes(a), 0);
    hcs_admit_release(a, 999); /* unknown: ignored */
    hcs_admit_commit(a, 999);
    ck_assert_int_eq(h.reads, 4);
    hcs_admit_free(a);
    hcs_admit_free(NULL);
}
END_TEST

START_TEST(ledger_wraps_reader_errors)
{
    struct err err = {0};
    struct fake_host h = {PTHREAD_MUTEX_INITIALIZER, {PAGES(20000), 0, PAGE}, 0, 1};
    struct hcs_admit *a = hcs_admit_new(fake_read, &h);
    uint64_t t;
    ck_assert_int_eq(hcs_admit_reserve(a, 1024, &t, &err), -EACCES);
    ck_assert_str_eq(err.msg, "commit admission: reading the host's commit: GetPerformanceInfo: "
                              "access is denied");
    ck_assert_uint_eq(hcs_admit_promised_bytes(a), 0);
    hcs_admit_free(a);
}
END_TEST

START_TEST(seed_host_refuses_the_fourth_8_gb_vm)
{
    /* The seed's 16 GB host ran three 8192 MB VMs (8414 MB committed
     * each) and failed the fourth with "The paging file is too small". */
    struct err err = {0};
    struct fake_host h = {
        PTHREAD_MUTEX_INITIALIZER, {PAGES(28 * 1024), PAGES(3 * 8414), PAGE}, 0, 0};
    struct hcs_admit *a = hcs_admit_new(fake_read, &h);
    uint64_t t;
    ck_assert_int_eq(hcs_admit_reserve(a, 8192, &t, &err), -ENOSPC);
    ck_assert_ptr_nonnull(strstr(err.msg, "for a 8192 MB utility vm (+ 288 MB overhead)"));
    ck_assert_ptr_nonnull(strstr(err.msg, "CommitLimit 28672 MB - CommitTotal 25242 MB"));
    hcs_admit_free(a);
}
END_TEST

struct racer {
    struct hcs_admit *a;
    pthread_barrier_t *go;
    int rc;
};

static void *
racer_run(void *arg)
{
    struct racer *r = arg;
    struct err err = {0};
    uint64_t t;
    pthread_barrier_wait(r->go);
    r->rc = hcs_admit_reserve(r->a, 1024, &t, &err);
    return NULL;
}

START_TEST(concurrent_admissions_never_overcommit)
{
    enum { N = 8 };
    /* Room for three 1200 MB promises: 3600 MB, and 1199 to spare. */
    struct fake_host h = {
        PTHREAD_MUTEX_INITIALIZER, {PAGES(10000), PAGES(10000 - 4799), PAGE}, 0, 0};
    struct hcs_admit *a = hcs_admit_new(fake_read, &h);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, N);
    pthread_t th[N];
    struct racer r[N];
    for (int i = 0; i < N; i++) {
        r[i] = (struct racer){a, &go, 1};
        ck_assert_int_eq(pthread_create(&th[i], NULL, racer_run, &r[i]), 0);
    }
    int ok = 0, full = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ok += r[i].rc == 0;
        full += r[i].rc == -ENOSPC;
    }
    pthread_barrier_destroy(&go);
    ck_assert_int_eq(ok, 3);
    ck_assert_int_eq(full, N - 3);
    ck_assert_uint_eq(hcs_admit_promised_bytes(a), 3 * 1200 * MIB);
    hcs_admit_free(a);
}
END_TEST

static Suite *
admit_suite(void)
{
    Suite *s = suite_create("runtime_hcs_admit");
    TCase *tc = tcase_create("admit");
    tcase_add_test(tc, overhead_follows_the_seed_measurements);
    tcase_add_test(tc, check_fits_exactly_and_not_a_byte_more);
    tcase_add_test(tc, refusal_names_the_numbers_and_the_vm_size);
    tcase_add_test(tc, ledger_counts_vms_still_starting);
    tcase_add_test(tc, ledger_wraps_reader_errors);
    tcase_add_test(tc, seed_host_refuses_the_fourth_8_gb_vm);
    tcase_add_test(tc, concurrent_admissions_never_overcommit);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(admit_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
