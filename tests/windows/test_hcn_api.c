/*
 * runtime/hcs/hcn_api_win.c against the TEST DOUBLE of computenetwork.dll
 * (tests/doubles/computenetwork/): the NAT network made once and found by
 * name after (and one of that name with another pool refused), a
 * container's endpoint and namespace made, joined and taken away (twice
 * is fine), a failed create that leaves nothing in HNS, and a missing
 * DLL. The double is not HNS: these show what berth sends and how it
 * cleans up, not that a real host accepts it.
 */
#include "runtime/hcs/hcn_api.h"

#include <windows.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../unit/hcs_golden.h"

static char dbl_path[MAX_PATH + 32];
static char rec_dir[MAX_PATH + 64];
static struct hcn_api *api;
static void(WINAPI *counts)(int *, int *, int *);

static void
setup(void)
{
    static int n;
    char exe[MAX_PATH];
    GetModuleFileNameA(NULL, exe, sizeof(exe));
    char *slash = strrchr(exe, '\\');
    if (slash)
        *slash = '\0';
    snprintf(dbl_path, sizeof(dbl_path), "%s\\hcn-double\\computenetwork.dll", exe);
    char tmp[MAX_PATH];
    GetTempPathA(sizeof(tmp), tmp);
    snprintf(rec_dir, sizeof(rec_dir), "%sberth-hcn-%lu-%d", tmp, GetCurrentProcessId(), ++n);
    CreateDirectoryA(rec_dir, NULL);
    SetEnvironmentVariableA("BERTH_HCN_DOUBLE_DIR", rec_dir);
    SetEnvironmentVariableA("BERTH_HCN_DOUBLE_FAIL", NULL);
    struct err err = {0};
    ck_assert_msg(hcn_api_open(dbl_path, &api, &err) == 0, "%s", err.msg);
    HMODULE m = GetModuleHandleA("computenetwork.dll");
    ck_assert_ptr_nonnull(m);
    counts = (void(WINAPI *)(int *, int *, int *))(void *)GetProcAddress(m, "HcnDoubleCounts");
    ck_assert_ptr_nonnull(counts);
}

static void
teardown(void)
{
    hcn_api_free(api);
    api = NULL;
    char pat[MAX_PATH + 80];
    snprintf(pat, sizeof(pat), "%s\\*", rec_dir);
    WIN32_FIND_DATAA fd;
    HANDLE f = FindFirstFileA(pat, &fd);
    if (f != INVALID_HANDLE_VALUE) {
        do {
            char p[MAX_PATH * 2];
            snprintf(p, sizeof(p), "%s\\%s", rec_dir, fd.cFileName);
            DeleteFileA(p);
        } while (FindNextFileA(f, &fd));
        FindClose(f);
    }
    RemoveDirectoryA(rec_dir);
}

/* The calls the double logged, function names only, space-separated. */
static char *
calls(void)
{
    static char out[4096];
    out[0] = '\0';
    char path[MAX_PATH * 2];
    snprintf(path, sizeof(path), "%s\\calls.log", rec_dir);
    FILE *log = fopen(path, "rb");
    if (!log)
        return out;
    char line[256], name[128];
    while (fgets(line, sizeof(line), log)) {
        if (sscanf(line, "%*u %127s", name) == 1) {
            strncat(out, name, sizeof(out) - strlen(out) - 2);
            strcat(out, " ");
        }
    }
    fclose(log);
    return out;
}

/* The document of the first call of fn, parsed; NULL when none. */
static json_object *
recorded(const char *fn)
{
    char path[MAX_PATH * 2];
    snprintf(path, sizeof(path), "%s\\calls.log", rec_dir);
    FILE *log = fopen(path, "rb");
    if (!log)
        return NULL;
    char line[256], name[128];
    unsigned seq = 0, s;
    while (fgets(line, sizeof(line), log)) {
        if (sscanf(line, "%u %127s", &s, name) == 2 && strcmp(name, fn) == 0) {
            seq = s;
            break;
        }
    }
    fclose(log);
    if (!seq)
        return NULL;
    snprintf(path, sizeof(path), "%s\\%04u-%s.json", rec_dir, seq, fn);
    return json_object_from_file(path);
}

static const char *const dns[] = {"10.0.0.53", "8.8.8.8"};

START_TEST(network_is_created_once_then_found_by_name)
{
    struct err err = {0};
    struct hcn_network_doc doc = {"berth0", "10.88.0.0/16", "10.88.0.1", dns, 2};
    char id[HCS_GUID_SIZE], again[HCS_GUID_SIZE];
    bool created = false;
    ck_assert_msg(hcn_network_ensure(api, &doc, id, &created, &err) == 0, "%s", err.msg);
    ck_assert(created);
    /* What the double got is the golden document. */
    golden_check(recorded("HcnCreateNetwork"), "hcn_network_nat.json");
    ck_assert_msg(hcn_network_ensure(api, &doc, again, &created, &err) == 0, "%s", err.msg);
    ck_assert(!created);
    ck_assert_str_eq(id, again);
    /* Found, then checked against doc (its properties, as hcsshim asks for them). */
    ck_assert_str_eq(calls(), "HcnEnumerateNetworks HcnCreateNetwork HcnEnumerateNetworks "
                              "HcnOpenNetwork HcnQueryNetworkProperties ");
    /* The same name with another pool is not adopted, and stays. */
    struct hcn_network_doc other = {"berth0", "10.99.0.0/16", "10.99.0.1", NULL, 0};
    ck_assert_int_eq(hcn_network_ensure(api, &other, again, &created, &err), -EEXIST);
    ck_assert(!created);
    ck_assert_str_eq(again, "");
    ck_assert_msg(strstr(err.msg, "hcn network berth0 has the subnet 10.88.0.0/16 and gateway "
                                  "10.88.0.1, not --network-pool 10.99.0.0/16"),
                  "%s", err.msg);
    int nets, eps, nss;
    counts(&nets, &eps, &nss);
    ck_assert_int_eq(nets, 1);
    ck_assert_int_eq(hcn_network_delete(api, id, &err), 0);
    ck_assert_int_eq(hcn_network_delete(api, id, &err), 0); /* already gone */
}
END_TEST

/* A network found by name whose properties HNS will not give, gives too many of or gives not as
 * UTF-16 is not adopted, and the error says which. */
START_TEST(a_properties_answer_refused_says_why)
{
    struct err err = {0};
    struct hcn_network_doc doc = {"berth3", "10.91.0.0/16", "10.91.0.1", NULL, 0};
    char id[HCS_GUID_SIZE];
    bool created;
    ck_assert_msg(hcn_network_ensure(api, &doc, id, &created, &err) == 0, "%s", err.msg);
    const char *modes[] = {"query-network", "query-network-long", "query-network-utf16"};
    const char *why[] = {"The network's properties cannot be read",
                         "HNS answered more than 262144 characters",
                         "HNS's answer is not valid UTF-16"};
    for (int i = 0; i < 3; i++) {
        SetEnvironmentVariableA("BERTH_HCN_DOUBLE_FAIL", modes[i]);
        char again[HCS_GUID_SIZE];
        memset(&err, 0, sizeof(err));
        ck_assert_int_lt(hcn_network_ensure(api, &doc, again, &created, &err), 0);
        ck_assert_msg(strstr(err.msg, why[i]), "%s: %s", modes[i], err.msg);
        ck_assert_msg(strstr(err.msg, "hcn network berth3"), "%s: %s", modes[i], err.msg);
    }
    SetEnvironmentVariableA("BERTH_HCN_DOUBLE_FAIL", NULL);
    ck_assert_int_eq(hcn_network_delete(api, id, &err), 0);
}
END_TEST

START_TEST(container_attach_and_detach_leave_nothing)
{
    struct err err = {0};
    struct hcn_network_doc doc = {"berth1", "10.89.0.0/16", "10.89.0.1", NULL, 0};
    char net[HCS_GUID_SIZE];
    bool created;
    ck_assert_msg(hcn_network_ensure(api, &doc, net, &created, &err) == 0, "%s", err.msg);
    struct hcn_port ports[] = {{"tcp", 8080, 80, NULL}};
    struct hcn_endpoint_doc ep = {.container = "build-42",
                                  .network_id = net,
                                  .gateway = "10.89.0.1",
                                  .ports = ports,
                                  .nports = 1};
    struct hcn_attachment a = {{0}};
    int nets, eps, nss;
    ck_assert_msg(hcn_container_attach(api, &ep, &a, &err) == 0, "%s", err.msg);
    ck_assert(hcs_guid_valid(a.endpoint_id) && hcs_guid_valid(a.namespace_id));
    /* The MAC HNS assigned, from the endpoint's properties (the double's: 00-15-5D-<id>). */
    char mac[HCN_MAC_SIZE];
    snprintf(mac, sizeof(mac), "00-15-5D-%.2s-%.2s-%.2s", a.endpoint_id, a.endpoint_id + 2,
             a.endpoint_id + 4);
    ck_assert_msg(strcasecmp(a.mac, mac) == 0, "mac %s, want %s", a.mac, mac);
    counts(&nets, &eps, &nss);
    ck_assert_int_eq(eps, 1);
    ck_assert_int_eq(nss, 1);
    json_object *sent = recorded("HcnCreateEndpoint"), *name;
    ck_assert_ptr_nonnull(sent);
    ck_assert(json_object_object_get_ex(sent, "Name", &name));
    ck_assert_str_eq(json_object_get_string(name), "build-42-ep");
    json_object_put(sent);
    golden_check(recorded("HcnCreateNamespace"), "hcn_namespace.json");

    ck_assert_msg(hcn_container_detach(api, &a, &err) == 0, "%s", err.msg);
    counts(&nets, &eps, &nss);
    ck_assert_int_eq(eps, 0);
    ck_assert_int_eq(nss, 0);
    /* A second detach (a delete retried after a crash) finds nothing and is fine. */
    ck_assert_msg(hcn_container_detach(api, &a, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(hcn_network_delete(api, net, &err), 0);
}
END_TEST

START_TEST(failed_create_removes_what_it_made)
{
    struct err err = {0};
    struct hcn_network_doc doc = {"berth2", "10.90.0.0/16", "10.90.0.1", NULL, 0};
    char net[HCS_GUID_SIZE];
    bool created;
    ck_assert_msg(hcn_network_ensure(api, &doc, net, &created, &err) == 0, "%s", err.msg);
    struct hcn_endpoint_doc ep = {.container = "c-fail", .network_id = net};
    const char *modes[] = {"modify-namespace", "create-namespace",    "create-endpoint",
                           "query-endpoint",   "query-endpoint-long", "query-endpoint-utf16"};
    const char *why[] = {"add endpoint to hcn namespace",
                         "create the hcn namespace of container c-fail",
                         "create the hcn endpoint of container c-fail",
                         "query the hcn endpoint of container c-fail",
                         "hcn endpoint properties: HNS answered more than 262144 characters",
                         "hcn endpoint properties: HNS's answer is not valid UTF-16"};
    for (int i = 0; i < 6; i++) {
        SetEnvironmentVariableA("BERTH_HCN_DOUBLE_FAIL", modes[i]);
        struct hcn_attachment a = {{0}};
        memset(&err, 0, sizeof(err));
        ck_assert_int_lt(hcn_container_attach(api, &ep, &a, &err), 0);
        ck_assert_msg(strstr(err.msg, why[i]), "%s: %s", modes[i], err.msg);
        int nets, eps, nss;
        counts(&nets, &eps, &nss);
        ck_assert_msg(eps == 0 && nss == 0, "%s left %d endpoints and %d namespaces", modes[i], eps,
                      nss);
    }
    ck_assert_ptr_nonnull(strstr(calls(), "HcnDeleteNamespace HcnDeleteEndpoint"));
    SetEnvironmentVariableA("BERTH_HCN_DOUBLE_FAIL", NULL);
    ck_assert_int_eq(hcn_network_delete(api, net, &err), 0);
}
END_TEST

START_TEST(missing_dll_is_unavailable)
{
    struct hcn_api *none = NULL;
    struct err err = {0};
    ck_assert_int_eq(hcn_api_open("C:\\nowhere\\computenetwork.dll", &none, &err),
                     -ERR_UNAVAILABLE);
    ck_assert_ptr_nonnull(strstr(err.msg, "computenetwork.dll at C:\\nowhere"));
}
END_TEST

static Suite *
hcn_suite(void)
{
    Suite *s = suite_create("hcn_api");
    TCase *tc = tcase_create("hcn_api");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, network_is_created_once_then_found_by_name);
    tcase_add_test(tc, a_properties_answer_refused_says_why);
    tcase_add_test(tc, container_attach_and_detach_leave_nothing);
    tcase_add_test(tc, failed_create_removes_what_it_made);
    tcase_add_test(tc, missing_dll_is_unavailable);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(hcn_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
