/*
 * runtime/hcs/sizing: utility VM sizes from limits and flags, memory caps
 * and CPU limits scaled to the processors a container has.
 */
#include "runtime/hcs/sizing.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024ull * 1024ull)

struct size_case {
    const char *what;
    struct hcs_uvm_config cfg;
    uint64_t limit;
    uint32_t host_lps;
    uint32_t vm_mb, cpus, task_mb;
};

static const struct size_case size_cases[] = {
    {"no limit: the defaults", {0}, 0, 16, 1024, 2, 0},
    {"no limit: the flags", {2048, 4, 0}, 0, 16, 2048, 4, 0},
    {"flag memory is rounded up to even", {2047, 0, 0}, 0, 16, 2048, 2, 0},
    /* The seed's 256 MB limit: the task keeps all of it. */
    {"256 MiB limit", {0}, 256 * MIB, 16, 512, 2, 256},
    {"limit replaces the memory flag", {4096, 0, 0}, 256 * MIB, 16, 512, 2, 256},
    {"a limit in bytes rounds up to MB", {0}, 255 * MIB + 1, 16, 512, 2, 256},
    {"odd MB rounds the vm up to even", {0}, 257 * MIB, 16, 514, 2, 257},
    {"one byte", {0}, 1, 16, 258, 2, 1},
    {"8 GiB limit", {0}, 8192 * MIB, 16, 8448, 2, 8192},
    {"own guest overhead", {0, 0, 512}, 1024 * MIB, 16, 1536, 2, 1024},
    {"cpus capped at the host", {0, 8, 0}, 0, 4, 1024, 4, 0},
    {"default 2 on a single-processor host", {0}, 0, 1, 1024, 1, 0},
    {"unknown host processors: no cap", {0, 8, 0}, 0, 0, 1024, 8, 0},
};

START_TEST(uvm_sizes)
{
    const struct size_case *c = &size_cases[_i];
    struct err err = {0};
    struct hcs_uvm_size s;
    ck_assert_msg(hcs_uvm_size(&c->cfg, c->limit, c->host_lps, &s, &err) == 0, "%s: %s", c->what,
                  err.msg);
    ck_assert_msg(s.memory_mb == c->vm_mb, "%s: vm %u MB, want %u", c->what, s.memory_mb, c->vm_mb);
    ck_assert_msg(s.processors == c->cpus, "%s: %u cpus, want %u", c->what, s.processors, c->cpus);
    ck_assert_msg(s.task_memory_mb == c->task_mb, "%s: task %u MB, want %u", c->what,
                  s.task_memory_mb, c->task_mb);
    ck_assert_int_eq(s.memory_mb % 2, 0);
    /* The task gets what it asked for, the guest its overhead besides. */
    if (c->limit)
        ck_assert_uint_ge((uint64_t)s.memory_mb * MIB,
                          c->limit + (uint64_t)(c->cfg.guest_overhead_mb
                                                    ? c->cfg.guest_overhead_mb
                                                    : HCS_UVM_GUEST_OVERHEAD_MB) *
                                         MIB);
}
END_TEST

START_TEST(uvm_sizes_out_of_range_are_refused)
{
    struct err err = {0};
    struct hcs_uvm_size s;
    struct hcs_uvm_config small = {100, 0, 0};
    ck_assert_int_eq(hcs_uvm_size(&small, 0, 4, &s, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "memory 100 MB: out of range"));
    struct hcs_uvm_config cpus = {0, 5000, 0};
    ck_assert_int_eq(hcs_uvm_size(&cpus, 0, 4, &s, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "processors 5000"));
    ck_assert_int_eq(hcs_uvm_size(NULL, (uint64_t)HCS_UVM_MAX_MEMORY_MB * MIB, 4, &s, &err),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "would be larger than"));
    ck_assert_int_eq(hcs_uvm_size(NULL, UINT64_MAX, 4, &s, &err), -EINVAL);
}
END_TEST

START_TEST(memory_mb_rounds_up)
{
    ck_assert_uint_eq(hcs_memory_mb(0), 0);
    ck_assert_uint_eq(hcs_memory_mb(1), 1);
    ck_assert_uint_eq(hcs_memory_mb(MIB), 1);
    ck_assert_uint_eq(hcs_memory_mb(MIB + 1), 2);
    ck_assert_uint_eq(hcs_memory_mb(256 * MIB), 256);
}
END_TEST

struct cpu_case {
    uint64_t shares;
    uint32_t quota_pct, processors;
    uint32_t maximum, weight;
};

static const struct cpu_case cpu_cases[] = {
    {0, 0, 4, 0, 0},         /* no limit */
    {0, 150, 4, 3750, 0},    /* 1.5 of 4 host processors */
    {0, 150, 2, 7500, 0},    /* the same 1.5 of a 2-processor VM */
    {0, 150, 1, 10000, 0},   /* more than there is: all of it */
    {0, 100, 3, 3334, 0},    /* rounded up */
    {0, 1, 64, 2, 0},        /* never 0, which would mean no limit */
    {1024, 0, 4, 0, 100},    /* the default weight is HCS's default */
    {2, 0, 4, 0, 1},         /* the smallest weight is 1 */
    {512, 0, 4, 0, 50},      /* half */
    {262144, 0, 4, 0, 10000} /* cgroup's maximum: HCS's */
};

START_TEST(cpu_limits_scale_to_processors)
{
    const struct cpu_case *c = &cpu_cases[_i];
    struct err err = {0};
    struct hcs_processor p;
    ck_assert_int_eq(hcs_cpu_limits(c->shares, c->quota_pct, c->processors, &p, &err), 0);
    ck_assert_uint_eq(p.count, 0);
    ck_assert_uint_eq(p.maximum, c->maximum);
    ck_assert_uint_eq(p.weight, c->weight);
}
END_TEST

START_TEST(cpu_limits_refuse_what_hcs_cannot_say)
{
    struct err err = {0};
    struct hcs_processor p;
    ck_assert_int_eq(hcs_cpu_limits(1024, 150, 4, &p, &err), -ENOTSUP);
    ck_assert_ptr_nonnull(strstr(err.msg, "cpu shares (1024) and a cpu quota (150%)"));
    ck_assert_int_eq(hcs_cpu_limits(0, 150, 0, &p, &err), -EINVAL);
    ck_assert_int_eq(hcs_cpu_limits(UINT64_MAX, 0, 4, &p, &err), 0);
    ck_assert_uint_eq(p.weight, 10000);
}
END_TEST

static Suite *
sizing_suite(void)
{
    Suite *s = suite_create("runtime_hcs_sizing");
    TCase *tc = tcase_create("sizing");
    tcase_add_loop_test(tc, uvm_sizes, 0, (int)(sizeof(size_cases) / sizeof(size_cases[0])));
    tcase_add_test(tc, uvm_sizes_out_of_range_are_refused);
    tcase_add_test(tc, memory_mb_rounds_up);
    tcase_add_loop_test(tc, cpu_limits_scale_to_processors, 0,
                        (int)(sizeof(cpu_cases) / sizeof(cpu_cases[0])));
    tcase_add_test(tc, cpu_limits_refuse_what_hcs_cannot_say);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(sizing_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
