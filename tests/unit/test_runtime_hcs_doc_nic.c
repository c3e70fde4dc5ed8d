/*
 * runtime/hcs/doc_nic: a utility VM's network namespace and adapter
 * requests against the golden files (tests/unit/golden/hcs/nic_*.json),
 * and the refusal of every bad value, named in the message.
 */
#include "runtime/hcs/doc_nic.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "hcs_golden.h"

#define EP "4f1c2d3e-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
#define NS "7b2a9c4d-1e3f-4a5b-9c8d-6e7f8a9b0c1d"
#define MAC "00-15-5D-4F-1C-2D"

static const struct hcs_nic nic = {EP, NS, MAC, "10.88.0.5", 16, "10.88.0.1"};

START_TEST(requests_match_golden)
{
    struct err err = {0};
    golden_check(hcs_req_netns_add(&nic, &err), "nic_netns_add.json");
    golden_check(hcs_req_netns_remove(&nic, &err), "nic_netns_remove.json");
    golden_check(hcs_req_nic_preadd(&nic, &err), "nic_preadd.json");
    golden_check(hcs_req_nic_add(&nic, &err), "nic_add.json");
    golden_check(hcs_req_nic_remove(&nic, &err), "nic_remove.json");
}
END_TEST

START_TEST(preadd_without_address_omits_it)
{
    struct err err = {0};
    struct hcs_nic n = {EP, NS, "00:15:5d:4f:1c:2d", NULL, 0, ""};
    json_object *o = hcs_req_nic_preadd(&n, &err);
    ck_assert_ptr_nonnull(o);
    json_object *g, *s, *ep, *v;
    ck_assert(json_object_object_get_ex(o, "GuestRequest", &g));
    ck_assert(json_object_object_get_ex(g, "Settings", &s));
    ck_assert(json_object_object_get_ex(s, "Settings", &ep));
    ck_assert(!json_object_object_get_ex(ep, "IPAddress", &v));
    ck_assert(!json_object_object_get_ex(ep, "PrefixLength", &v));
    ck_assert(!json_object_object_get_ex(ep, "GatewayAddress", &v));
    ck_assert(json_object_object_get_ex(ep, "MacAddress", &v));
    ck_assert_str_eq(json_object_get_string(v), "00:15:5d:4f:1c:2d");
    json_object_put(o);
}
END_TEST

START_TEST(bad_values_are_refused_naming_them)
{
    const struct {
        struct hcs_nic n;
        const char *why;
    } bad[] = {
        {{NULL, NS, MAC, NULL, 0, NULL}, "endpoint (null)"},
        {{"not-a-guid", NS, MAC, NULL, 0, NULL}, "endpoint not-a-guid"},
        {{EP, NULL, MAC, NULL, 0, NULL}, "namespace (null)"},
        {{EP, "x", MAC, NULL, 0, NULL}, "namespace x"},
        {{EP, NS, NULL, NULL, 0, NULL}, "mac (null)"},
        {{EP, NS, "", NULL, 0, NULL}, "mac  is not"},
        {{EP, NS, "00-15-5D-4F-1C", NULL, 0, NULL}, "mac 00-15-5D-4F-1C "},
        {{EP, NS, "00-15-5D-4F-1C-2G", NULL, 0, NULL}, "mac 00-15-5D-4F-1C-2G"},
        {{EP, NS, "00-15-5D-4F-1C-2D-", NULL, 0, NULL}, "mac 00-15-5D-4F-1C-2D-"},
        {{EP, NS, "00.15.5D.4F.1C.2D", NULL, 0, NULL}, "mac 00.15.5D.4F.1C.2D"},
    };
    json_object *(*const build[])(const struct hcs_nic *, struct err *) = {
        hcs_req_netns_add, hcs_req_netns_remove, hcs_req_nic_preadd, hcs_req_nic_add,
        hcs_req_nic_remove};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        for (size_t k = 0; k < sizeof(build) / sizeof(build[0]); k++) {
            struct err err = {0};
            ck_assert_ptr_null(build[k](&bad[i].n, &err));
            ck_assert_int_eq(err.code, EINVAL);
            ck_assert_msg(strstr(err.msg, bad[i].why), "%zu/%zu: %s", i, k, err.msg);
        }
    struct err err = {0};
    ck_assert_ptr_null(hcs_req_nic_add(NULL, &err));
    ck_assert_int_eq(err.code, EINVAL);
}
END_TEST

static Suite *
doc_nic_suite(void)
{
    Suite *s = suite_create("runtime_hcs_doc_nic");
    TCase *tc = tcase_create("doc_nic");
    tcase_add_test(tc, requests_match_golden);
    tcase_add_test(tc, preadd_without_address_omits_it);
    tcase_add_test(tc, bad_values_are_refused_naming_them);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(doc_nic_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
