/*
 * runtime/hcs/doc_request: modify requests, process parameters, process
 * modifications, signals and queries against the golden files, and their
 * refusals.
 */
#include "runtime/hcs/doc_request.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "hcs_golden.h"
#include "runtime/hcs/props.h"
#include "runtime/hcs/winpath.h"

#define TOP "6ba9cac1-7086-5ee9-a197-c465d3f50ad7"
#define BASE "02740e08-d1d3-5715-9c08-c255eab4ca01"
#define SNAP "C:\\ProgramData\\berth\\snapshots\\"

START_TEST(vsmb_requests_match_golden)
{
    struct err err = {0};
    golden_check(hcs_req_vsmb_add("l0", SNAP "base", HCS_VSMB_LAYER, &err), "vsmb_add_layer.json");
    golden_check(hcs_req_vsmb_add("v0", "C:\\ProgramData\\berth\\volumes\\cache\\data",
                                  HCS_VSMB_VOLUME_RO, &err),
                 "vsmb_add_volume_ro.json");
    golden_check(hcs_req_vsmb_add("v1", "C:\\ProgramData\\berth\\volumes\\out\\data",
                                  HCS_VSMB_VOLUME_RW, &err),
                 "vsmb_add_volume_rw.json");
    golden_check(hcs_req_vsmb_remove("v0", "C:\\ProgramData\\berth\\volumes\\cache\\data", &err),
                 "vsmb_remove.json");
}
END_TEST

START_TEST(scsi_requests_match_golden)
{
    struct err err = {0};
    golden_check(hcs_req_scsi_add(1, "C:\\ProgramData\\berth\\containers\\build-42\\sandbox.vhdx",
                                  "C:\\c\\1", &err),
                 "scsi_add.json");
    golden_check(hcs_req_scsi_remove(1, "C:\\c\\1", &err), "scsi_remove.json");
}
END_TEST

START_TEST(combined_layers_match_golden_without_filter_type)
{
    struct err err = {0};
    struct hcs_layer layers[] = {{TOP, HCS_VSMB_GUEST_PREFIX "l1"},
                                 {BASE, HCS_VSMB_GUEST_PREFIX "l0"}};
    json_object *add = hcs_req_combined_layers_add("C:\\c\\1", layers, 2, &err);
    ck_assert_ptr_nonnull(add);
    char *s = hcs_doc_string(add);
    /* Windows Server 2022's inbox GCS refuses the field outright. */
    ck_assert_ptr_null(strstr(s, "FilterType"));
    free(s);
    golden_check(add, "combined_layers_add.json");
    golden_check(hcs_req_combined_layers_remove("C:\\c\\1", &err), "combined_layers_remove.json");
}
END_TEST

START_TEST(modify_requests_refuse_bad_input)
{
    struct err err = {0};
    ck_assert_ptr_null(hcs_req_vsmb_add("l 0", SNAP "base", HCS_VSMB_LAYER, &err));
    ck_assert_int_eq(err.code, EINVAL);
    ck_assert_ptr_null(hcs_req_vsmb_add("l0", "base", HCS_VSMB_LAYER, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "base is not a host path"));
    ck_assert_ptr_null(hcs_req_vsmb_add("l0", SNAP "base", (enum hcs_vsmb_kind)7, &err));
    ck_assert_ptr_null(hcs_req_scsi_add(0, "C:\\x.vhdx", "C:\\c\\1", &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "lun 0 is the vm's scratch"));
    ck_assert_ptr_null(hcs_req_scsi_add(64, "C:\\x.vhdx", "C:\\c\\1", &err));
    ck_assert_ptr_null(hcs_req_scsi_add(1, "C:\\x.vhdx", "C:\\", &err));
    ck_assert_ptr_null(hcs_req_scsi_add(1, "x.vhdx", "C:\\c\\1", &err));
    ck_assert_ptr_null(hcs_req_scsi_remove(1, "c\\1", &err));
    struct hcs_layer host[] = {{BASE, SNAP "base"}};
    ck_assert_ptr_null(hcs_req_combined_layers_add("C:\\c\\1", host, 1, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "wants a guid and a vsmb path"));
    ck_assert_ptr_null(hcs_req_combined_layers_add("C:\\c\\1", host, 0, &err));
    ck_assert_ptr_null(hcs_req_combined_layers_remove("C:", &err));
    ck_assert_int_eq(err.code, EINVAL);
}
END_TEST

START_TEST(process_parameters_match_golden)
{
    struct err err = {0};
    char cwd[64];
    ck_assert_int_eq(hcs_path_to_windows("/tmp/build", cwd, sizeof(cwd), &err), 0);
    char *argv[] = {"cmd.exe", "/c", "echo hi", "C:\\Program Files\\x\\", "say \"hi\"", "", NULL};
    /* Path is replaced by PATH (names are case-insensitive), EMPTY= unsets. */
    char *env[] = {"Path=C:\\old", "FOO=bar", "EMPTY=", "PATH=C:\\Windows\\system32;C:\\Windows",
                   NULL};
    struct hcs_process_doc p = {
        .argv = argv,
        .env = env,
        .cwd = cwd,
        .stdin_pipe = true,
        .stdout_pipe = true,
        .stderr_pipe = true,
    };
    golden_check(hcs_doc_process(&p, &err), "process.json");
}
END_TEST

START_TEST(process_parameters_with_console_match_golden)
{
    struct err err = {0};
    char *argv[] = {"C:\\Program Files\\PowerShell\\pwsh.exe", "-NoLogo", NULL};
    struct hcs_process_doc p = {
        .argv = argv,
        .user = "ContainerAdministrator",
        .stdin_pipe = true,
        .stdout_pipe = true,
        .emulate_console = true,
        .console_height = 25,
        .console_width = 80,
    };
    golden_check(hcs_doc_process(&p, &err), "process_console.json");
}
END_TEST

START_TEST(process_parameters_refuse_bad_input)
{
    struct err err = {0};
    char *argv[] = {"cmd.exe", NULL};
    char *quoted[] = {"a\"b.exe", NULL};
    char *noeq[] = {"FOO", NULL};
    char *noname[] = {"=C:=C:\\", NULL};
    struct hcs_process_doc p = {.argv = quoted};
    ck_assert_ptr_null(hcs_doc_process(&p, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "has a '\"'"));
    p.argv = NULL;
    ck_assert_ptr_null(hcs_doc_process(&p, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "no program"));
    p.argv = argv;
    p.env = noeq;
    ck_assert_ptr_null(hcs_doc_process(&p, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "environment entry FOO"));
    p.env = noname;
    ck_assert_ptr_null(hcs_doc_process(&p, &err));
    p.env = NULL;
    p.cwd = "/tmp/build";
    ck_assert_ptr_null(hcs_doc_process(&p, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "working directory /tmp/build"));
    p.cwd = NULL;
    p.user = "a\nb";
    ck_assert_ptr_null(hcs_doc_process(&p, &err));
    p.user = NULL;
    p.emulate_console = true;
    p.console_height = 25;
    ck_assert_ptr_null(hcs_doc_process(&p, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "console size 25x0"));
    ck_assert_int_eq(err.code, EINVAL);
}
END_TEST

START_TEST(process_modifications_match_golden)
{
    struct err err = {0};
    golden_check(hcs_doc_process_close_stdin(), "process_close_stdin.json");
    golden_check(hcs_doc_process_console_size(40, 120, &err), "process_console_size.json");
    ck_assert_ptr_null(hcs_doc_process_console_size(0, 120, &err));
}
END_TEST

START_TEST(signals_map_to_windows_console_events)
{
    struct err err = {0};
    const char *name = "x";
    static const struct {
        int sig;
        const char *name;
    } map[] = {{HCS_SIGTERM, "CtrlShutdown"},
               {HCS_SIGINT, "CtrlC"},
               {HCS_SIGQUIT, "CtrlBreak"},
               {HCS_SIGHUP, "CtrlClose"},
               {HCS_SIGKILL, NULL}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        ck_assert_int_eq(hcs_signal_from_posix(map[i].sig, &name, &err), 0);
        if (map[i].name)
            ck_assert_str_eq(name, map[i].name);
        else
            ck_assert_ptr_null(name); /* KILL is HcsTerminateProcess */
    }
    ck_assert_int_eq(hcs_signal_from_posix(10, &name, &err), -ENOTSUP);
    ck_assert_ptr_nonnull(strstr(err.msg, "signal 10"));
    ck_assert_int_eq(hcs_signal_from_posix(19, &name, &err), -ENOTSUP);

    ck_assert_int_eq(hcs_signal_from_posix(HCS_SIGTERM, &name, &err), 0);
    golden_check(hcs_doc_signal(name, &err), "signal_ctrlshutdown.json");
    ck_assert_ptr_null(hcs_doc_signal("SIGTERM", &err));
    ck_assert_ptr_null(hcs_doc_signal(NULL, &err));
    json_object *logoff = hcs_doc_signal("CtrlLogOff", &err);
    ck_assert_ptr_nonnull(logoff);
    json_object_put(logoff);
}
END_TEST

START_TEST(queries_match_golden)
{
    const char *basic[] = {HCS_PROP_BASIC, NULL};
    const char *topo[] = {HCS_PROP_PROCESSOR_TOPOLOGY, NULL};
    const char *stats[] = {HCS_PROP_STATISTICS, NULL};
    golden_check(hcs_doc_query(basic), "query_basic.json");
    golden_check(hcs_doc_query(topo), "query_processor_topology.json");
    golden_check(hcs_doc_query(stats), "query_statistics.json");
}
END_TEST

static Suite *
doc_request_suite(void)
{
    Suite *s = suite_create("runtime_hcs_doc_request");
    TCase *tc = tcase_create("doc_request");
    tcase_add_test(tc, vsmb_requests_match_golden);
    tcase_add_test(tc, scsi_requests_match_golden);
    tcase_add_test(tc, combined_layers_match_golden_without_filter_type);
    tcase_add_test(tc, modify_requests_refuse_bad_input);
    tcase_add_test(tc, process_parameters_match_golden);
    tcase_add_test(tc, process_parameters_with_console_match_golden);
    tcase_add_test(tc, process_parameters_refuse_bad_input);
    tcase_add_test(tc, process_modifications_match_golden);
    tcase_add_test(tc, signals_map_to_windows_console_events);
    tcase_add_test(tc, queries_match_golden);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(doc_request_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
