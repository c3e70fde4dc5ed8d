/*
 * runtime/hcs/props: the answers of HcsGetServiceProperties and
 * HcsGetComputeSystemProperties, the exit events, and the detection
 * verdict for /v1/health from good, old and Hyper-V-less hosts.
 */
#include "runtime/hcs/props.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/hcs/hresult.h"

#define BASIC_21                                                                                   \
    "{\"Properties\":[{\"SupportedSchemaVersions\":[{\"Major\":1,\"Minor\":0},{\"Major\":2,"       \
    "\"Minor\":1}]}]}"
#define BASIC_25 "{\"Properties\":[{\"SupportedSchemaVersions\":[{\"Major\":2,\"Minor\":5}]}]}"
#define BASIC_20                                                                                   \
    "{\"Properties\":[{\"SupportedSchemaVersions\":[{\"Major\":1,\"Minor\":0},{\"Major\":2,"       \
    "\"Minor\":0}]}]}"
#define TOPO_8                                                                                     \
    "{\"Properties\":[{\"LogicalProcessorCount\":8,\"LogicalProcessors\":[{\"LpIndex\":0,"         \
    "\"NodeNumber\":0,\"PackageId\":0,\"CoreId\":0,\"RootVpIndex\":-1}]}]}"

START_TEST(schema_versions_give_the_highest_2_minor)
{
    struct err err = {0};
    int minor = 99;
    ck_assert_int_eq(hcs_props_schema_minor(BASIC_21, &minor, &err), 0);
    ck_assert_int_eq(minor, 1);
    ck_assert_int_eq(hcs_props_schema_minor(BASIC_25, &minor, &err), 0);
    ck_assert_int_eq(minor, 5);
    ck_assert_int_eq(hcs_props_schema_minor(BASIC_20, &minor, &err), 0);
    ck_assert_int_eq(minor, 0);
    ck_assert_int_eq(
        hcs_props_schema_minor("{\"Properties\":[{\"SupportedSchemaVersions\":[{"
                               "\"Major\":1,\"Minor\":9},{\"Major\":3,\"Minor\":0}]}]}",
                               &minor, &err),
        0);
    ck_assert_int_eq(minor, -1);
}
END_TEST

START_TEST(odd_service_answers_are_eio)
{
    static const char *bad[] = {
        NULL,
        "",
        "[]",
        "{}",
        "{\"Properties\":{}}",
        "{\"Properties\":[]}",
        "{\"Properties\":[1]}",
        "{\"Properties\":[{}]}",
        "{\"Properties\":[{\"SupportedSchemaVersions\":{}}]}",
        "{\"Properties\":[{\"SupportedSchemaVersions\":[3]}]}",
        "{\"Properties\":[{\"SupportedSchemaVersions\":[{\"Major\":\"2\",\"Minor\":1}]}]}",
        "{\"Properties\":[{\"SupportedSchemaVersions\":[{\"Major\":2,\"Minor\":-1}]}]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct err err = {0};
        int minor = 42;
        ck_assert_msg(hcs_props_schema_minor(bad[i], &minor, &err) == -EIO, "%s accepted",
                      bad[i] ? bad[i] : "NULL");
        ck_assert_int_eq(minor, 42);
        ck_assert_ptr_nonnull(strstr(err.msg, "Basic"));
    }
}
END_TEST

START_TEST(processor_topology_gives_the_lp_count)
{
    struct err err = {0};
    uint32_t n = 0;
    ck_assert_int_eq(hcs_props_lp_count(TOPO_8, &n, &err), 0);
    ck_assert_uint_eq(n, 8);
    ck_assert_int_eq(
        hcs_props_lp_count("{\"Properties\":[{\"LogicalProcessorCount\":0}]}", &n, &err), -EIO);
    ck_assert_int_eq(hcs_props_lp_count("{\"Properties\":[{\"LogicalProcessors\":[]}]}", &n, &err),
                     -EIO);
    ck_assert_ptr_nonnull(strstr(err.msg, "no LogicalProcessorCount"));
    ck_assert_int_eq(
        hcs_props_lp_count("{\"Properties\":[{\"LogicalProcessorCount\":1.5}]}", &n, &err), -EIO);
}
END_TEST

START_TEST(statistics_give_cpu_and_memory)
{
    struct err err = {0};
    struct hcs_stats s;
    ck_assert_int_eq(
        hcs_props_statistics("{\"Id\":\"b\",\"Statistics\":{\"Timestamp\":\"2026-01-01T00:00:00Z\","
                             "\"Uptime100ns\":5,\"Processor\":{\"TotalRuntime100ns\":123,"
                             "\"RuntimeUser100ns\":100,\"RuntimeKernel100ns\":23},\"Memory\":{"
                             "\"MemoryUsageCommitBytes\":4096,\"MemoryUsageCommitPeakBytes\":8192,"
                             "\"MemoryUsagePrivateWorkingSetBytes\":2048}}}",
                             &s, &err),
        0);
    ck_assert_uint_eq(s.cpu_ns, 12300);
    ck_assert_uint_eq(s.memory_commit_bytes, 4096);
    ck_assert_uint_eq(s.memory_private_ws_bytes, 2048);
    ck_assert_int_eq(hcs_props_statistics("{\"Statistics\":{}}", &s, &err), 0);
    ck_assert_uint_eq(s.cpu_ns, 0);
    ck_assert_int_eq(hcs_props_statistics("{}", &s, &err), -EIO);
    ck_assert_int_eq(hcs_props_statistics("{\"Statistics\":{\"Memory\":{"
                                          "\"MemoryUsageCommitBytes\":-1}}}",
                                          &s, &err),
                     -EIO);
}
END_TEST

START_TEST(exit_events_parse)
{
    struct err err = {0};
    struct hcs_system_exit se;
    ck_assert_int_eq(
        hcs_event_system_exit("{\"Status\":0,\"ExitType\":\"GracefulExit\"}", &se, &err), 0);
    ck_assert_uint_eq(se.status, 0);
    ck_assert_str_eq(se.exit_type, "GracefulExit");
    /* HRESULTs come signed. */
    ck_assert_int_eq(hcs_event_system_exit("{\"Status\":-2143878906,\"ExitType\":"
                                           "\"UnexpectedExit\"}",
                                           &se, &err),
                     0);
    ck_assert_uint_eq(se.status, HCS_HR_UNEXPECTED_EXIT);
    ck_assert_int_eq(hcs_event_system_exit("nope", &se, &err), -EIO);

    struct hcs_process_exit pe;
    ck_assert_int_eq(hcs_event_process_exit("{\"ProcessId\":4242,\"Exited\":true,\"ExitCode\":3,"
                                            "\"LastWaitResult\":0}",
                                            &pe, &err),
                     0);
    ck_assert_uint_eq(pe.pid, 4242);
    ck_assert(pe.exited);
    ck_assert_uint_eq(pe.exit_code, 3);
    ck_assert_uint_eq(pe.last_wait_result, 0);
    /* STATUS_CONTROL_C_EXIT, unsigned as Windows exit codes are. */
    ck_assert_int_eq(hcs_event_process_exit("{\"ProcessId\":1,\"Exited\":true,\"ExitCode\":"
                                            "3221225786}",
                                            &pe, &err),
                     0);
    ck_assert_uint_eq(pe.exit_code, 0xC000013Au);
    ck_assert_int_eq(hcs_event_process_exit("{\"Exited\":1}", &pe, &err), -EIO);
    ck_assert_int_eq(hcs_event_process_exit("{\"ExitCode\":\"3\"}", &pe, &err), -EIO);
}
END_TEST

static struct hcs_probe_answer
ok(const char *json)
{
    struct hcs_probe_answer a = {0, {0}, json};
    return a;
}

static struct hcs_probe_answer
failed(uint32_t hr, const char *what)
{
    struct hcs_probe_answer a = {0};
    a.rc = hcs_err_set(&a.err, hr, NULL, NULL, "hcs service properties (%s)", what);
    return a;
}

START_TEST(detection_on_a_host_with_hyperv)
{
    struct hcs_probe_answer b = ok(BASIC_21), t = ok(TOPO_8);
    struct hcs_caps c;
    hcs_caps_evaluate(&b, &t, &c);
    ck_assert(c.process_usable);
    ck_assert(c.hyperv_usable);
    ck_assert_str_eq(c.process_reason, "");
    ck_assert_str_eq(c.hyperv_reason, "");
    ck_assert_int_eq(c.schema_minor, 1);
    ck_assert_uint_eq(c.lp_count, 8);
}
END_TEST

START_TEST(detection_without_hyperv_names_the_catastrophic_failure)
{
    struct hcs_probe_answer b = ok(BASIC_21);
    struct hcs_probe_answer t = failed(HCS_HR_E_UNEXPECTED, "ProcessorTopology");
    struct hcs_caps c;
    hcs_caps_evaluate(&b, &t, &c);
    ck_assert(c.process_usable);
    ck_assert(!c.hyperv_usable);
    ck_assert_str_eq(c.hyperv_reason, "Hyper-V is not available on this host (hcs service "
                                      "properties (ProcessorTopology): E_UNEXPECTED "
                                      "(0x8000FFFF): catastrophic failure)");
    ck_assert_uint_eq(c.lp_count, 0);
}
END_TEST

START_TEST(detection_on_an_old_host_refuses_both)
{
    struct hcs_probe_answer b = ok(BASIC_20), t = ok(TOPO_8);
    struct hcs_caps c;
    hcs_caps_evaluate(&b, &t, &c);
    ck_assert(!c.process_usable);
    ck_assert(!c.hyperv_usable);
    ck_assert_ptr_nonnull(strstr(c.process_reason, "supports schema 2.0 at most; berth needs "
                                                   "schema 2.1 or later"));
    ck_assert_ptr_nonnull(strstr(c.hyperv_reason, "Hyper-V is not available on this host (the "
                                                  "Host Compute Service supports schema 2.0"));
    ck_assert_int_eq(c.schema_minor, 0);
}
END_TEST

START_TEST(detection_without_hcs_says_why)
{
    struct hcs_probe_answer b = {0};
    b.rc = err_set(&b.err, ERR_UNAVAILABLE, "computecore.dll not found");
    struct hcs_probe_answer t = b;
    struct hcs_caps c;
    hcs_caps_evaluate(&b, &t, &c);
    ck_assert(!c.process_usable);
    ck_assert_str_eq(c.process_reason,
                     "the Host Compute Service is not usable (computecore.dll not found)");
    ck_assert(!c.hyperv_usable);

    struct hcs_probe_answer svc = failed(HCS_HR_SERVICE_NOT_AVAILABLE, "Basic");
    hcs_caps_evaluate(&svc, &t, &c);
    ck_assert_ptr_nonnull(strstr(c.process_reason, "HCS_E_SERVICE_NOT_AVAILABLE"));

    struct hcs_probe_answer odd = ok("{\"Properties\":[]}");
    hcs_caps_evaluate(&odd, &t, &c);
    ck_assert(!c.process_usable);
    ck_assert_ptr_nonnull(strstr(c.process_reason, "answered its properties query oddly"));

    struct hcs_probe_answer good = ok(BASIC_21), badtopo = ok("{\"Properties\":[{}]}");
    hcs_caps_evaluate(&good, &badtopo, &c);
    ck_assert(c.process_usable);
    ck_assert(!c.hyperv_usable);
    ck_assert_ptr_nonnull(strstr(c.hyperv_reason, "no LogicalProcessorCount"));
}
END_TEST

static Suite *
props_suite(void)
{
    Suite *s = suite_create("runtime_hcs_props");
    TCase *tc = tcase_create("props");
    tcase_add_test(tc, schema_versions_give_the_highest_2_minor);
    tcase_add_test(tc, odd_service_answers_are_eio);
    tcase_add_test(tc, processor_topology_gives_the_lp_count);
    tcase_add_test(tc, statistics_give_cpu_and_memory);
    tcase_add_test(tc, exit_events_parse);
    tcase_add_test(tc, detection_on_a_host_with_hyperv);
    tcase_add_test(tc, detection_without_hyperv_names_the_catastrophic_failure);
    tcase_add_test(tc, detection_on_an_old_host_refuses_both);
    tcase_add_test(tc, detection_without_hcs_says_why);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(props_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
