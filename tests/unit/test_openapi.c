/*
 * openapi.yaml and the routing table describe the same API: every route
 * is documented and every documented path and method is routed. The
 * benchmark-only /v1/debug routes are exempt.
 */
#include <check.h>

#include "api/api.h"
#include "testutil.h"

START_TEST(openapi_and_routes_list_the_same_operations)
{
    tu_check_openapi_routes("openapi.yaml", api_routes, api_routes_count, "/v1/debug/");
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("openapi");
    TCase *tc = tcase_create("openapi");
    tcase_add_test(tc, openapi_and_routes_list_the_same_operations);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
