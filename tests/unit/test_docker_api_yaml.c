/*
 * docker-api.yaml and the Docker API's routing table (api/docker/routes.c)
 * describe the same subset, as test_openapi.c checks openapi.yaml and /v1.
 */
#include <check.h>

#include "api/docker/docker.h"
#include "testutil.h"

START_TEST(docker_api_yaml_and_docker_routes_list_the_same_operations)
{
    tu_check_openapi_routes("docker-api.yaml", docker_routes, docker_routes_count, NULL);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("docker_api_yaml");
    TCase *tc = tcase_create("docker_api_yaml");
    tcase_add_test(tc, docker_api_yaml_and_docker_routes_list_the_same_operations);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
