/*
 * store/platform: parsing "os/arch[/variant]", matching, and
 * platform_check() against a table of made-up Linux and Windows hosts.
 */
#include "store/platform.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(platform_parse_accepts_and_normalises)
{
    static const struct {
        const char *in, *os, *arch, *variant;
    } cases[] = {
        {"linux/amd64", "linux", "amd64", ""},      {"linux/arm64", "linux", "arm64", "v8"},
        {"linux/arm64/v8", "linux", "arm64", "v8"}, {"linux/arm", "linux", "arm", "v7"},
        {"linux/arm/v6", "linux", "arm", "v6"},     {"linux/x86_64", "linux", "amd64", ""},
        {"linux/aarch64", "linux", "arm64", "v8"},  {"linux/i686", "linux", "386", ""},
        {"linux/armhf", "linux", "arm", "v7"},      {"linux/armel", "linux", "arm", "v6"},
        {"linux/amd64/v1", "linux", "amd64", ""},   {"linux/amd64/v3", "linux", "amd64", "v3"},
        {"windows/amd64", "windows", "amd64", ""},  {"linux/ppc64le", "linux", "ppc64le", ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct oci_platform p;
        struct err err = {0};
        memset(&p, 'x', sizeof(p));
        ck_assert_msg(oci_platform_parse(cases[i].in, &p, &err) == 0, "%s: %s", cases[i].in,
                      err.msg);
        ck_assert_str_eq(p.os, cases[i].os);
        ck_assert_str_eq(p.architecture, cases[i].arch);
        ck_assert_str_eq(p.variant, cases[i].variant);
        ck_assert_str_eq(p.os_version, "");
    }
}
END_TEST

START_TEST(platform_parse_rejects_bad_input)
{
    static const char *bad[] = {
        "",
        "linux",
        "linux/",
        "/amd64",
        "linux//v8",
        "Linux/amd64",
        "linux/amd64/v8/x",
        "linux/amd 64",
        "linux/amd64/",
        "linux/a\"b",
        "linux/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct oci_platform p = {0};
        struct err err = {0};
        ck_assert_msg(oci_platform_parse(bad[i], &p, &err) == -EINVAL, "\"%s\" was accepted",
                      bad[i]);
        ck_assert_int_eq(err.code, EINVAL);
        ck_assert_msg(strstr(err.msg, "platform"), "%s", err.msg);
    }
    struct err err = {0};
    struct oci_platform p = {0};
    ck_assert_int_eq(oci_platform_parse(NULL, &p, &err), -EINVAL);
}
END_TEST

START_TEST(platform_match_uses_default_variants)
{
    struct oci_platform arm64 = {.os = "linux", .architecture = "arm64"};
    struct oci_platform arm64v8 = {.os = "linux", .architecture = "arm64", .variant = "v8"};
    struct oci_platform arm = {.os = "linux", .architecture = "arm"};
    struct oci_platform armv7 = {.os = "linux", .architecture = "arm", .variant = "v7"};
    struct oci_platform armv6 = {.os = "linux", .architecture = "arm", .variant = "v6"};
    struct oci_platform amd64 = {.os = "linux", .architecture = "amd64"};
    struct oci_platform i386 = {.os = "linux", .architecture = "386"};
    ck_assert(oci_platform_match(&arm64, &arm64v8));
    ck_assert(oci_platform_match(&arm64v8, &arm64));
    ck_assert(oci_platform_match(&arm, &armv7));
    ck_assert(!oci_platform_match(&arm, &armv6));
    ck_assert(!oci_platform_match(&amd64, &i386));
    ck_assert(!oci_platform_match(&amd64, &arm64));
}
END_TEST

START_TEST(isolation_mode_parse_names_modes)
{
    enum isolation_mode m;
    struct err err = {0};
    ck_assert_int_eq(isolation_mode_parse("process", &m, &err), 0);
    ck_assert_int_eq(m, ISOLATION_PROCESS);
    ck_assert_int_eq(isolation_mode_parse("hyperv", &m, &err), 0);
    ck_assert_int_eq(m, ISOLATION_HYPERV);
    ck_assert_int_eq(isolation_mode_parse("vm", &m, &err), -EINVAL);
    ck_assert_str_eq(isolation_mode_name(ISOLATION_HYPERV), "hyperv");
}
END_TEST

START_TEST(windows_version_compare_uses_the_build)
{
    int c = 99;
    ck_assert(windows_version_compare("10.0.17763.6054", "10.0.20348.1", &c));
    ck_assert_int_lt(c, 0);
    ck_assert(windows_version_compare("10.0.20348.9999", "10.0.20348.1", &c));
    ck_assert_int_eq(c, 0);
    ck_assert(windows_version_compare("10.0.26100", "10.0.20348.1", &c));
    ck_assert_int_gt(c, 0);
    ck_assert(!windows_version_compare("10.0", "10.0.20348", &c));
    ck_assert(!windows_version_compare("10.0.x", "10.0.20348", &c));
    ck_assert(!windows_version_compare("10.0.20348.", "10.0.20348", &c));
    ck_assert(!windows_version_compare("", "10.0.20348", &c));
}
END_TEST

/* ---- platform_check table ---- */

#define LINUX_AMD64                                                                                \
    {                                                                                              \
        .os = "linux", .architecture = "amd64"                                                     \
    }
#define WS2019 "10.0.17763.6054"
#define WS2022 "10.0.20348.2655"
#define WS2025 "10.0.26100.1742"
#define WIN(v)                                                                                     \
    {                                                                                              \
        .os = "windows", .architecture = "amd64", .os_version = v                                  \
    }

struct check_case {
    const char *what;
    struct oci_platform image;
    struct host_caps host;
    enum isolation_mode isolation;
    enum platform_verdict want;
    const char *msg; /* substring of the refusal message */
};

static const struct check_case check_cases[] = {
    /* A Linux host: process isolation only, strict architecture. */
    {"linux image on linux host",
     LINUX_AMD64,
     {LINUX_AMD64, ISOLATION_PROCESS},
     ISOLATION_ANY,
     PLATFORM_RUNS_PROCESS,
     NULL},
    {"linux image, process asked",
     LINUX_AMD64,
     {LINUX_AMD64, ISOLATION_PROCESS},
     ISOLATION_PROCESS,
     PLATFORM_RUNS_PROCESS,
     NULL},
    {"hyperv asked on linux host",
     LINUX_AMD64,
     {LINUX_AMD64, ISOLATION_PROCESS},
     ISOLATION_HYPERV,
     PLATFORM_REFUSED,
     "image is linux/amd64; this host runs linux/amd64 with process isolation; hyperv isolation "
     "was asked for"},
    {"386 image on amd64 host",
     {.os = "linux", .architecture = "386"},
     {LINUX_AMD64, ISOLATION_PROCESS},
     ISOLATION_ANY,
     PLATFORM_REFUSED,
     "image is linux/386; this host runs linux/amd64 with process isolation"},
    {"arm64 image on amd64 host",
     {.os = "linux", .architecture = "arm64"},
     {LINUX_AMD64, ISOLATION_PROCESS},
     ISOLATION_ANY,
     PLATFORM_REFUSED,
     "image is linux/arm64; this host runs linux/amd64"},
    {"arm64 image without variant on arm64/v8 host",
     {.os = "linux", .architecture = "arm64"},
     {{.os = "linux", .architecture = "arm64", .variant = "v8"}, ISOLATION_PROCESS},
     ISOLATION_ANY,
     PLATFORM_RUNS_PROCESS,
     NULL},
    {"arm/v6 image on arm/v7 host",
     {.os = "linux", .architecture = "arm", .variant = "v6"},
     {{.os = "linux", .architecture = "arm", .variant = "v7"}, ISOLATION_PROCESS},
     ISOLATION_ANY,
     PLATFORM_REFUSED,
     "image is linux/arm/v6; this host runs linux/arm/v7"},
    {"windows image on linux host",
     WIN("10.0.17763"),
     {LINUX_AMD64, ISOLATION_PROCESS},
     ISOLATION_ANY,
     PLATFORM_REFUSED,
     "image is windows/amd64 10.0.17763; this host runs linux/amd64 with process isolation"},
    {"linux image on windows host",
     LINUX_AMD64,
     {WIN(WS2022), ISOLATION_ANY},
     ISOLATION_ANY,
     PLATFORM_REFUSED,
     "image is linux/amd64; this host runs windows/amd64 " WS2022},

    /* A Windows Server 2022 host with process isolation only. */
    {"same build, process host",
     WIN(WS2022),
     {WIN(WS2022), ISOLATION_PROCESS},
     ISOLATION_ANY,
     PLATFORM_RUNS_PROCESS,
     NULL},
    {"same build other revision, process",
     WIN("10.0.20348.1"),
     {WIN(WS2022), ISOLATION_PROCESS},
     ISOLATION_PROCESS,
     PLATFORM_RUNS_PROCESS,
     NULL},
    {"older build, process host",
     WIN(WS2019),
     {WIN(WS2022), ISOLATION_PROCESS},
     ISOLATION_ANY,
     PLATFORM_REFUSED,
     "image is windows/amd64 " WS2019 "; this host runs windows/amd64 " WS2022
     " with process isolation (build 20348 only)"},
    {"newer build, process host",
     WIN(WS2025),
     {WIN(WS2022), ISOLATION_PROCESS},
     ISOLATION_ANY,
     PLATFORM_REFUSED,
     "image is windows/amd64 " WS2025},
    {"no os.version, process host",
     {.os = "windows", .architecture = "amd64"},
     {WIN(WS2022), ISOLATION_PROCESS},
     ISOLATION_ANY,
     PLATFORM_REFUSED,
     "image is windows/amd64 (it has no os.version, so its windows build is unknown)"},
    {"garbage os.version",
     WIN("ltsc2022"),
     {WIN(WS2022), ISOLATION_PROCESS},
     ISOLATION_ANY,
     PLATFORM_REFUSED,
     "(its os.version is not a windows version)"},
    {"hyperv asked on process-only windows host",
     WIN(WS2022),
     {WIN(WS2022), ISOLATION_PROCESS},
     ISOLATION_HYPERV,
     PLATFORM_REFUSED,
     "hyperv isolation was asked for"},

    /* A Windows Server 2022 host with process and hyperv isolation. */
    {"same build, both, any",
     WIN(WS2022),
     {WIN(WS2022), ISOLATION_ANY},
     ISOLATION_ANY,
     PLATFORM_RUNS_PROCESS,
     NULL},
    {"same build, both, hyperv asked",
     WIN(WS2022),
     {WIN(WS2022), ISOLATION_ANY},
     ISOLATION_HYPERV,
     PLATFORM_RUNS_HYPERV,
     NULL},
    {"older build, both, any",
     WIN(WS2019),
     {WIN(WS2022), ISOLATION_ANY},
     ISOLATION_ANY,
     PLATFORM_RUNS_HYPERV,
     NULL},
    {"older build, both, hyperv asked",
     WIN(WS2019),
     {WIN(WS2022), ISOLATION_ANY},
     ISOLATION_HYPERV,
     PLATFORM_RUNS_HYPERV,
     NULL},
    {"older build, both, process asked",
     WIN(WS2019),
     {WIN(WS2022), ISOLATION_ANY},
     ISOLATION_PROCESS,
     PLATFORM_REFUSED,
     "with process isolation (build 20348 only) and hyperv isolation (build 20348 or older); "
     "process isolation was asked for"},
    {"newer build, both, any",
     WIN(WS2025),
     {WIN(WS2022), ISOLATION_ANY},
     ISOLATION_ANY,
     PLATFORM_REFUSED,
     "image is windows/amd64 " WS2025 "; this host runs windows/amd64 " WS2022},
    {"newer build, both, hyperv asked",
     WIN(WS2025),
     {WIN(WS2022), ISOLATION_ANY},
     ISOLATION_HYPERV,
     PLATFORM_REFUSED,
     "hyperv isolation (build 20348 or older)"},
    {"arm64 windows image on amd64 windows host",
     {.os = "windows", .architecture = "arm64", .os_version = WS2022},
     {WIN(WS2022), ISOLATION_ANY},
     ISOLATION_ANY,
     PLATFORM_REFUSED,
     "image is windows/arm64 " WS2022 "; this host runs windows/amd64"},

    /* A Windows Server 2025 host: process isolation runs 20348 to 26100. */
    {"ws2022 image, process on a ws2025 host",
     WIN(WS2022),
     {WIN(WS2025), ISOLATION_ANY},
     ISOLATION_PROCESS,
     PLATFORM_RUNS_PROCESS,
     NULL},
    {"23H2 image, process on a ws2025 host",
     WIN("10.0.25398.1"),
     {WIN(WS2025), ISOLATION_PROCESS},
     ISOLATION_ANY,
     PLATFORM_RUNS_PROCESS,
     NULL},
    {"ws2019 image, process on a ws2025 host",
     WIN(WS2019),
     {WIN(WS2025), ISOLATION_ANY},
     ISOLATION_PROCESS,
     PLATFORM_REFUSED,
     "this host runs windows/amd64 " WS2025 " with process isolation (builds 20348 to 26100) and "
     "hyperv isolation (build 26100 or older); process isolation was asked for"},
    {"ws2019 image, any on a ws2025 host: hyperv",
     WIN(WS2019),
     {WIN(WS2025), ISOLATION_ANY},
     ISOLATION_ANY,
     PLATFORM_RUNS_HYPERV,
     NULL},
    {"ws2016 image, hyperv on a ws2025 host",
     WIN("10.0.14393.7000"),
     {WIN(WS2025), ISOLATION_ANY},
     ISOLATION_HYPERV,
     PLATFORM_RUNS_HYPERV,
     NULL},
    {"a newer build than ws2025 on a ws2025 host",
     WIN("10.0.26200.1"),
     {WIN(WS2025), ISOLATION_ANY},
     ISOLATION_ANY,
     PLATFORM_REFUSED,
     "with process isolation (builds 20348 to 26100)"},
    /* Windows 11 22H2 runs Server 2022 images with process isolation. */
    {"ws2022 image on windows 11",
     WIN(WS2022),
     {WIN("10.0.22621.4317"), ISOLATION_PROCESS},
     ISOLATION_PROCESS,
     PLATFORM_RUNS_PROCESS,
     NULL},
    {"ws2019 image on windows 11, process",
     WIN(WS2019),
     {WIN("10.0.22621.4317"), ISOLATION_PROCESS},
     ISOLATION_ANY,
     PLATFORM_REFUSED,
     "(builds 20348 to 22621)"},
    /* A host after Server 2025: the floor moves up to 26100. */
    {"ws2022 image, process on a post-2025 host",
     WIN(WS2022),
     {WIN("10.0.27766.1"), ISOLATION_PROCESS},
     ISOLATION_ANY,
     PLATFORM_REFUSED,
     "(builds 26100 to 27766)"},
    {"ws2025 image, process on a post-2025 host",
     WIN(WS2025),
     {WIN("10.0.27766.1"), ISOLATION_PROCESS},
     ISOLATION_ANY,
     PLATFORM_RUNS_PROCESS,
     NULL},
    /* Before Server 2022 the build must match exactly. */
    {"ws2019 image on a ws2019 host",
     WIN("10.0.17763.1"),
     {WIN(WS2019), ISOLATION_PROCESS},
     ISOLATION_PROCESS,
     PLATFORM_RUNS_PROCESS,
     NULL},
    {"ws2016 image, process on a ws2019 host",
     WIN("10.0.14393.1"),
     {WIN(WS2019), ISOLATION_ANY},
     ISOLATION_PROCESS,
     PLATFORM_REFUSED,
     "with process isolation (build 17763 only) and hyperv isolation (build 17763 or older)"},
    {"another major version, process",
     WIN("6.3.20348.1"),
     {WIN(WS2022), ISOLATION_ANY},
     ISOLATION_PROCESS,
     PLATFORM_REFUSED,
     "image is windows/amd64 6.3.20348.1"},

    /* A Windows host offering hyperv only. */
    {"older build, hyperv-only host",
     WIN(WS2019),
     {WIN(WS2022), ISOLATION_HYPERV},
     ISOLATION_ANY,
     PLATFORM_RUNS_HYPERV,
     NULL},
    {"same build, hyperv-only host",
     WIN(WS2022),
     {WIN(WS2022), ISOLATION_HYPERV},
     ISOLATION_ANY,
     PLATFORM_RUNS_HYPERV,
     NULL},
    {"process asked, hyperv-only host",
     WIN(WS2022),
     {WIN(WS2022), ISOLATION_HYPERV},
     ISOLATION_PROCESS,
     PLATFORM_REFUSED,
     "this host runs windows/amd64 " WS2022 " with hyperv isolation (build 20348 or older); "
     "process isolation was asked for"},
};

START_TEST(platform_check_table)
{
    const struct check_case *c = &check_cases[_i];
    struct err err = {0};
    enum platform_verdict v = platform_check(&c->image, &c->host, c->isolation, &err);
    ck_assert_msg(v == c->want, "%s: verdict %d, want %d (%s)", c->what, v, c->want, err.msg);
    if (c->want == PLATFORM_REFUSED) {
        ck_assert_int_eq(err.code, ERR_INVALID_CONTENT);
        ck_assert_msg(strstr(err.msg, c->msg), "%s: message \"%s\" lacks \"%s\"", c->what, err.msg,
                      c->msg);
    } else {
        ck_assert_msg(err.code == 0, "%s: err set on success: %s", c->what, err.msg);
    }
}
END_TEST

START_TEST(platform_check_rejects_caller_bugs)
{
    struct err err = {0};
    struct oci_platform img = LINUX_AMD64;
    struct host_caps host = {LINUX_AMD64, ISOLATION_PROCESS};
    ck_assert_int_eq(platform_check(&img, &host, (enum isolation_mode)0, &err), PLATFORM_REFUSED);
    ck_assert_int_eq(err.code, EINVAL);
    struct host_caps none = {LINUX_AMD64, 0};
    ck_assert_int_eq(platform_check(&img, &none, ISOLATION_ANY, &err), PLATFORM_REFUSED);
    ck_assert_int_eq(err.code, EINVAL);
    struct host_caps badwin = {WIN("2022"), ISOLATION_PROCESS};
    struct oci_platform wimg = WIN(WS2022);
    ck_assert_int_eq(platform_check(&wimg, &badwin, ISOLATION_ANY, &err), PLATFORM_REFUSED);
    ck_assert_int_eq(err.code, EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "host os_version \"2022\""));
}
END_TEST

START_TEST(host_caps_windows_fills_the_build)
{
    struct err err = {0};
    struct host_caps c;
    ck_assert_int_eq(host_caps_windows("amd64", 10, 0, 20348, 2655, ISOLATION_ANY, &c, &err), 0);
    ck_assert_str_eq(c.platform.os, "windows");
    ck_assert_str_eq(c.platform.architecture, "amd64");
    ck_assert_str_eq(c.platform.os_version, "10.0.20348.2655");
    ck_assert_uint_eq(c.isolations, ISOLATION_ANY);
    struct oci_platform ltsc2019 = WIN(WS2019);
    ck_assert_int_eq(platform_check(&ltsc2019, &c, ISOLATION_ANY, &err), PLATFORM_RUNS_HYPERV);
    ck_assert_int_eq(host_caps_windows("arm64", 10, 0, 26100, 1, ISOLATION_PROCESS, &c, &err), 0);
    ck_assert_str_eq(c.platform.variant, "v8");
    ck_assert_int_eq(host_caps_windows("AMD64", 10, 0, 1, 0, ISOLATION_ANY, &c, &err), -EINVAL);
    ck_assert_int_eq(host_caps_windows("amd64", 10, 0, 0, 0, ISOLATION_ANY, &c, &err), -EINVAL);
    ck_assert_int_eq(host_caps_windows("amd64", 10, 0, 1, 0, 0, &c, &err), -EINVAL);
    ck_assert_int_eq(host_caps_windows("amd64", 10, 0, 1, 0, 8, &c, &err), -EINVAL);
}
END_TEST

static Suite *
platform_suite(void)
{
    Suite *s = suite_create("store_platform");
    TCase *tc = tcase_create("platform");
    tcase_add_test(tc, platform_parse_accepts_and_normalises);
    tcase_add_test(tc, platform_parse_rejects_bad_input);
    tcase_add_test(tc, platform_match_uses_default_variants);
    tcase_add_test(tc, isolation_mode_parse_names_modes);
    tcase_add_test(tc, windows_version_compare_uses_the_build);
    tcase_add_loop_test(tc, platform_check_table, 0,
                        (int)(sizeof(check_cases) / sizeof(check_cases[0])));
    tcase_add_test(tc, platform_check_rejects_caller_bugs);
    tcase_add_test(tc, host_caps_windows_fills_the_build);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(platform_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
