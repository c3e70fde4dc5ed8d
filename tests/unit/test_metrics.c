/* Metric values in the text format: the shortest form that reads back the same. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "api/metrics.h"

START_TEST(numbers_print_in_their_shortest_exact_form)
{
    static const struct {
        double v;
        const char *text;
    } cases[] = {
        {0, "0"},
        {1, "1"},
        {0.1, "0.1"},
        {0.25, "0.25"},
        {1e20, "1e+20"},
        {123456789, "123456789"},
        {-2.5, "-2.5"},
        {9007199254740992.0, "9007199254740992"},
        {0.1 + 0.2, "0.30000000000000004"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[32];
        ck_assert_str_eq(metrics_number(cases[i].v, buf), cases[i].text);
        ck_assert(strtod(buf, NULL) == cases[i].v);
    }
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");
    tcase_add_test(tc, numbers_print_in_their_shortest_exact_form);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
