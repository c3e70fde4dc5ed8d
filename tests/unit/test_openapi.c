/*
 * openapi.yaml and the routing table describe the same API: every route
 * is documented and every documented path and method is routed. The
 * benchmark-only /v1/debug routes are exempt.
 */
#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

struct op {
    char method[16];
    char path[256];
};

static size_t
load_ops(struct op *ops, size_t max)
{
    FILE *f = fopen(BERTH_SOURCE_DIR "/openapi.yaml", "r");
    ck_assert_msg(f != NULL, "open openapi.yaml");
    char line[1024];
    bool in_paths = false;
    char cur[256] = "";
    size_t n = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "paths:", 6) == 0) {
            in_paths = true;
            continue;
        }
        if (in_paths && line[0] != ' ' && line[0] != '\n' && line[0] != '#')
            break; /* the next top-level key */
        if (!in_paths)
            continue;
        if (strncmp(line, "  /", 3) == 0) {
            char *colon = strrchr(line, ':');
            ck_assert_ptr_nonnull(colon);
            *colon = '\0';
            snprintf(cur, sizeof(cur), "%s", line + 2);
            continue;
        }
        static const char *const methods[] = {"get", "post", "put", "delete", "patch", NULL};
        for (const char *const *m = methods; *m; m++) {
            char want[32];
            snprintf(want, sizeof(want), "    %s:", *m);
            if (strncmp(line, want, strlen(want)) == 0) {
                ck_assert_uint_lt(n, max);
                for (size_t i = 0; (*m)[i]; i++)
                    ops[n].method[i] = (char)toupper((unsigned char)(*m)[i]);
                ops[n].method[strlen(*m)] = '\0';
                snprintf(ops[n].path, sizeof(ops[n].path), "%s", cur);
                n++;
            }
        }
    }
    fclose(f);
    return n;
}

START_TEST(every_route_is_in_openapi)
{
    struct op ops[256];
    size_t n = load_ops(ops, 256);
    ck_assert_uint_gt(n, 0);
    for (size_t i = 0; i < api_routes_count; i++) {
        if (strncmp(api_routes[i].pattern, "/v1/debug/", 10) == 0)
            continue;
        bool found = false;
        for (size_t k = 0; k < n; k++)
            if (strcmp(ops[k].method, api_routes[i].method) == 0 &&
                strcmp(ops[k].path, api_routes[i].pattern) == 0)
                found = true;
        ck_assert_msg(found, "route %s %s is not in openapi.yaml", api_routes[i].method,
                      api_routes[i].pattern);
    }
}
END_TEST

START_TEST(every_openapi_operation_is_routed)
{
    struct op ops[256];
    size_t n = load_ops(ops, 256);
    for (size_t k = 0; k < n; k++) {
        bool found = false;
        for (size_t i = 0; i < api_routes_count; i++)
            if (strcmp(ops[k].method, api_routes[i].method) == 0 &&
                strcmp(ops[k].path, api_routes[i].pattern) == 0)
                found = true;
        ck_assert_msg(found, "openapi.yaml documents %s %s, which is not routed", ops[k].method,
                      ops[k].path);
    }
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("openapi");
    TCase *tc = tcase_create("openapi");
    tcase_add_test(tc, every_route_is_in_openapi);
    tcase_add_test(tc, every_openapi_operation_is_routed);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
