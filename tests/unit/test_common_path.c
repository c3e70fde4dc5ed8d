/* Lexical path normalisation (common/path.c): every spelling of a path has one normal form. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/path.h"

static void
expect(const char *in, bool keep_dotdot, const char *want)
{
    char *got = path_normalise(in, keep_dotdot);
    ck_assert_msg(got, "normalise %s: NULL", in);
    ck_assert_msg(strcmp(got, want) == 0, "normalise %s: got %s, want %s", in, got, want);
    free(got);
}

START_TEST(normalise_collapses_slashes_dots_and_trailing_slashes)
{
    expect("/", false, "/");
    expect("//", false, "/");
    expect("/./", false, "/");
    expect("/.berth", false, "/.berth");
    expect("//.berth", false, "/.berth");
    expect("/./.berth", false, "/.berth");
    expect("/.berth/", false, "/.berth");
    expect("/.berth//procs/./x/", false, "/.berth/procs/x");
    expect("///a////b///", false, "/a/b");
    /* Names that only look like dots are names. */
    expect("/.../..a/a../.x", false, "/.../..a/a../.x");
}
END_TEST

START_TEST(normalise_resolves_dotdot_without_climbing_above_root)
{
    expect("/.berth/../.berth", false, "/.berth");
    expect("/a/b/../../c", false, "/c");
    expect("/../../x", false, "/x");
    expect("/a/..", false, "/");
    expect("/a/../", false, "/");
}
END_TEST

START_TEST(normalise_keeps_dotdot_when_asked)
{
    expect("/a/../b/", true, "/a/../b");
    expect("//..//x/.", true, "/../x");
}
END_TEST

START_TEST(normalise_refuses_relative_and_null_paths)
{
    errno = 0;
    ck_assert_ptr_null(path_normalise("relative/x", false));
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_ptr_null(path_normalise("", false));
    ck_assert_ptr_null(path_normalise(NULL, false));
}
END_TEST

START_TEST(dotdot_is_found_only_as_a_whole_component)
{
    ck_assert(path_has_dotdot("/a/../b"));
    ck_assert(path_has_dotdot("/.."));
    ck_assert(path_has_dotdot("/a/.."));
    ck_assert(!path_has_dotdot("/a/..b/c.."));
    ck_assert(!path_has_dotdot("/..."));
}
END_TEST

START_TEST(within_matches_whole_components)
{
    ck_assert(path_is_within("/.berth", "/.berth"));
    ck_assert(path_is_within("/.berth/procs", "/.berth"));
    ck_assert(!path_is_within("/.berth-init", "/.berth"));
    ck_assert(!path_is_within("/.ber", "/.berth"));
    ck_assert(path_is_within("/anything", "/"));
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("common_path");
    TCase *tc = tcase_create("path");
    tcase_add_test(tc, normalise_collapses_slashes_dots_and_trailing_slashes);
    tcase_add_test(tc, normalise_resolves_dotdot_without_climbing_above_root);
    tcase_add_test(tc, normalise_keeps_dotdot_when_asked);
    tcase_add_test(tc, normalise_refuses_relative_and_null_paths);
    tcase_add_test(tc, dotdot_is_found_only_as_a_whole_component);
    tcase_add_test(tc, within_matches_whole_components);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
