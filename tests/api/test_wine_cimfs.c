/*
 * berthd.exe under Wine with --runtime hcs and --layer-format: what
 * start-up makes of it and /v1/health reports as store.layer_format.
 * auto on Wine's own build is wcifs; with the build a test build may be
 * told (BERTH_TEST_WINDOWS_BUILD) and the TEST DOUBLE of cimfs.dll
 * (tests/doubles/cimfs/, through BERTH_TEST_CIMFS_DLL) it is cimfs, and
 * wcifs again when the DLL does not load; an explicit cimfs where the
 * build or the DLL is missing stops the start with one line naming why.
 * The double is not CimFS: these show the choice, not a real mount.
 *
 * scripts/build-windows.sh runs it through the Windows build's CTest
 * with BERTH_TEST_BERTHD, BERTH_TEST_WINE, BERTH_TEST_HCS_DOUBLE and
 * BERTH_TEST_CIMFS_DOUBLE set (cmake/windows.cmake). Without them it
 * skips (77).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/api/harness.h"

struct env {
    char v[4][PATH_MAX * 2];
    const char *list[5];
};

/* The doubles' DLLs (Windows paths), the build to report (NULL: Wine's own),
 * and the cimfs.dll to load (NULL: the double). */
static void
env_fill(struct env *e, const char *build, const char *cimfs_dll)
{
    char hcs[PATH_MAX + 8], cim[PATH_MAX + 8];
    harness_wine_path(getenv("BERTH_TEST_HCS_DOUBLE"), hcs, sizeof(hcs));
    harness_wine_path(getenv("BERTH_TEST_CIMFS_DOUBLE"), cim, sizeof(cim));
    size_t n = 0;
    snprintf(e->v[n], sizeof(e->v[n]), "BERTH_TEST_HCS_DLL=%s", hcs);
    e->list[n] = e->v[n], n++;
    snprintf(e->v[n], sizeof(e->v[n]), "BERTH_TEST_CIMFS_DLL=%s", cimfs_dll ? cimfs_dll : cim);
    e->list[n] = e->v[n], n++;
    if (build) {
        snprintf(e->v[n], sizeof(e->v[n]), "BERTH_TEST_WINDOWS_BUILD=%s", build);
        e->list[n] = e->v[n], n++;
    }
    e->list[n] = NULL;
}

/* store.layer_format of a berthd.exe started with args and e. */
static void
check_format(const char *const *args, struct env *e, const char *want)
{
    struct berthd b = {0};
    struct berthd_opts o = {0};
    for (size_t i = 0; args[i]; i++)
        o.args[i] = args[i];
    for (size_t i = 0; e->list[i]; i++)
        o.env[i] = e->list[i];
    berthd_start(&b, &o);
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    ck_assert_msg(r.status == 200 || r.status == 503, "status %ld", r.status);
    const char *got = json_object_get_string(json_at(r.json, "store.layer_format"));
    ck_assert_msg(got && strcmp(got, want) == 0, "layer_format %s, want %s: %s",
                  got ? got : "(none)", want, r.body);
    hresp_free(&r);
    berthd_finish(&b);
}

START_TEST(auto_on_wines_own_build_is_wcifs)
{
    struct env e;
    env_fill(&e, NULL, NULL);
    check_format((const char *[]){"--runtime", "hcs", NULL}, &e, "wcifs");
}
END_TEST

START_TEST(auto_where_the_build_and_cimfs_dll_have_it_is_cimfs)
{
    struct env e;
    env_fill(&e, "26100.1", NULL);
    check_format((const char *[]){"--runtime", "hcs", NULL}, &e, "cimfs");
    env_fill(&e, "20348.2031", NULL);
    check_format((const char *[]){"--runtime", "hcs", "--layer-format", "auto", NULL}, &e, "cimfs");
}
END_TEST

START_TEST(auto_falls_back_to_wcifs_when_cimfs_dll_does_not_load_or_the_build_is_older)
{
    struct env e;
    env_fill(&e, "26100.1", "Z:\\nonexistent\\cimfs.dll");
    check_format((const char *[]){"--runtime", "hcs", NULL}, &e, "wcifs");
    env_fill(&e, "20348.2030", NULL);
    check_format((const char *[]){"--runtime", "hcs", NULL}, &e, "wcifs");
}
END_TEST

START_TEST(an_explicit_wcifs_is_kept_where_cimfs_could_run)
{
    struct env e;
    env_fill(&e, "26100.1", NULL);
    check_format((const char *[]){"--runtime", "hcs", "--layer-format", "wcifs", NULL}, &e,
                 "wcifs");
}
END_TEST

START_TEST(an_explicit_cimfs_the_host_cannot_run_stops_the_start_naming_why)
{
    static const struct {
        const char *build, *dll, *mention;
    } cases[] = {
        {"20348.2030", NULL, "--layer-format cimfs: Windows build 20348.2030 has no CimFS"},
        {NULL, NULL, "has no CimFS for containers"},
        {"26100.1", "Z:\\nonexistent\\cimfs.dll", "--layer-format cimfs: cimfs.dll at"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct env e;
        env_fill(&e, cases[i].build, cases[i].dll);
        char *out, *err;
        int st = berthd_run((const char *[]){"--runtime", "hcs", "--layer-format", "cimfs", NULL},
                            e.list, 60000, &out, &err);
        ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2,
                      "case %zu: status 0x%x, stderr: %s", i, st, err);
        ck_assert_msg(strstr(err, "berthd: ") && strstr(err, cases[i].mention),
                      "case %zu: stderr does not say %s: %s", i, cases[i].mention, err);
        free(out);
        free(err);
    }
    /* The same flag on a host that has it starts. */
    struct env e;
    env_fill(&e, "26100.1", NULL);
    check_format((const char *[]){"--runtime", "hcs", "--layer-format", "cimfs", NULL}, &e,
                 "cimfs");
}
END_TEST

int
main(void)
{
    if (!harness_wine() || !getenv("BERTH_TEST_HCS_DOUBLE") || !getenv("BERTH_TEST_CIMFS_DOUBLE")) {
        fprintf(stderr, "test_wine_cimfs: BERTH_TEST_WINE, BERTH_TEST_HCS_DOUBLE or "
                        "BERTH_TEST_CIMFS_DOUBLE is not set; scripts/build-windows.sh runs this "
                        "suite against berthd.exe under Wine\n");
        return 77;
    }
    Suite *s = suite_create("wine_cimfs");
    TCase *tc = tcase_create("berthd.exe --layer-format");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, auto_on_wines_own_build_is_wcifs);
    tcase_add_test(tc, auto_where_the_build_and_cimfs_dll_have_it_is_cimfs);
    tcase_add_test(tc, auto_falls_back_to_wcifs_when_cimfs_dll_does_not_load_or_the_build_is_older);
    tcase_add_test(tc, an_explicit_wcifs_is_kept_where_cimfs_could_run);
    tcase_add_test(tc, an_explicit_cimfs_the_host_cannot_run_stops_the_start_naming_why);
    suite_add_tcase(s, tc);
    return harness_run_suite(s);
}
