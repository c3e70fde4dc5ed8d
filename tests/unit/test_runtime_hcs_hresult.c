/*
 * runtime/hcs/hresult: the HRESULT table, what each is reported as, and
 * the messages of failed HCS calls with the operation's result document.
 */
#include "runtime/hcs/hresult.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(table_names_hcs_and_win32_codes)
{
    static const struct {
        uint32_t hr;
        const char *name;
        int errnum;
    } cases[] = {
        {0x80370102u, "HCS_E_HYPERV_NOT_INSTALLED", ERR_CONFLICT},
        {0x80370101u, "HCS_E_IMAGE_MISMATCH", ERR_INVALID_CONTENT},
        {0x8037010Du, "HCS_E_INVALID_JSON", EIO},
        {0x8037010Eu, "HCS_E_SYSTEM_NOT_FOUND", ENOENT},
        {0x8037010Fu, "HCS_E_SYSTEM_ALREADY_EXISTS", EEXIST},
        {0x80370114u, "HCS_E_SERVICE_NOT_AVAILABLE", ERR_UNAVAILABLE},
        {0x80370118u, "HCS_E_OPERATION_TIMEOUT", ETIMEDOUT},
        {0x8037011Bu, "HCS_E_ACCESS_DENIED", EACCES},
        {0x8037011Fu, "HCS_E_PROCESS_ALREADY_STOPPED", ESRCH},
        {0x800705AFu, "ERROR_COMMITMENT_LIMIT", ENOSPC},
        {0x8000FFFFu, "E_UNEXPECTED", EIO},
        {0x80070005u, "E_ACCESSDENIED", EACCES},
        {0x80070057u, "E_INVALIDARG", EIO},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct hcs_hresult_info *h = hcs_hresult_lookup(cases[i].hr);
        ck_assert_msg(h, "0x%08x not in the table", (unsigned)cases[i].hr);
        ck_assert_str_eq(h->name, cases[i].name);
        ck_assert_int_eq(hcs_hresult_errno(cases[i].hr), cases[i].errnum);
        ck_assert(h->text && *h->text);
    }
}
END_TEST

START_TEST(ntstatus_twins_find_their_hcs_code)
{
    /* The docs spell the image mismatch 0xc0370101. */
    const struct hcs_hresult_info *h = hcs_hresult_lookup(0xC0370101u);
    ck_assert_ptr_nonnull(h);
    ck_assert_str_eq(h->name, "HCS_E_IMAGE_MISMATCH");
    char buf[96];
    ck_assert_str_eq(hcs_hresult_name(0xC0370101u, buf, sizeof(buf)),
                     "HCS_E_IMAGE_MISMATCH (0xC0370101)");
}
END_TEST

START_TEST(unknown_and_success_codes)
{
    char buf[96];
    ck_assert_ptr_null(hcs_hresult_lookup(0x80371234u));
    ck_assert_int_eq(hcs_hresult_errno(0x80371234u), EIO);
    ck_assert_int_eq(hcs_hresult_errno(0), 0);
    ck_assert_int_eq(hcs_hresult_errno(1), 0); /* S_FALSE */
    ck_assert_str_eq(hcs_hresult_name(0x80371234u, buf, sizeof(buf)), "0x80371234");
    ck_assert_str_eq(hcs_hresult_name(0x80370102u, buf, sizeof(buf)),
                     "HCS_E_HYPERV_NOT_INSTALLED (0x80370102)");
}
END_TEST

START_TEST(err_message_prefers_the_system_text_and_adds_the_result)
{
    struct err err = {0};
    const char *result = "{\"Error\":-2147023441,\"ErrorMessage\":\"The paging file is too small "
                         "for this operation to complete.\",\"ErrorEvents\":[{\"Message\":\"'b-1' "
                         "failed to start.\",\"Provider\":\"x\"},{\"Message\":\"worker: not "
                         "enough memory\"}]}";
    int r = hcs_err_set(&err, 0x800705AFu,
                        "The paging file is too small for this operation to "
                        "complete.\r\n",
                        result, "start utility vm %s", "b-1-vm");
    ck_assert_int_eq(r, -ENOSPC);
    ck_assert_int_eq(err.code, ENOSPC);
    /* The ErrorMessage repeats the system text, so it is not said twice. */
    ck_assert_str_eq(err.msg, "start utility vm b-1-vm: ERROR_COMMITMENT_LIMIT (0x800705AF): The "
                              "paging file is too small for this operation to complete; hcs says: "
                              "'b-1' failed to start.; worker: not enough memory");
}
END_TEST

START_TEST(err_message_uses_the_table_without_system_text)
{
    struct err err = {0};
    hcs_err_set(&err, 0x8000FFFFu, NULL, NULL, "hcs service properties %s", "ProcessorTopology");
    ck_assert_int_eq(err.code, EIO);
    ck_assert_str_eq(err.msg, "hcs service properties ProcessorTopology: E_UNEXPECTED "
                              "(0x8000FFFF): catastrophic failure");
    hcs_err_set(&err, 0x80371234u, "", NULL, "x");
    ck_assert_str_eq(err.msg, "x: 0x80371234");
    ck_assert_int_eq(err.code, EIO);
    /* A success code passed as a failure is still a failure. */
    ck_assert_int_eq(hcs_err_set(&err, 0, NULL, NULL, "y"), -EIO);
}
END_TEST

START_TEST(result_summary_handles_odd_documents)
{
    char buf[128];
    ck_assert_str_eq(hcs_result_summary(NULL, NULL, buf, sizeof(buf)), "");
    ck_assert_str_eq(hcs_result_summary("", NULL, buf, sizeof(buf)), "");
    ck_assert_str_eq(hcs_result_summary("not json", NULL, buf, sizeof(buf)), "not json");
    ck_assert_str_eq(hcs_result_summary("{\"Error\":1}", NULL, buf, sizeof(buf)), "");
    ck_assert_str_eq(
        hcs_result_summary("{\"ErrorMessage\":7,\"ErrorEvents\":{}}", NULL, buf, sizeof(buf)), "");
    ck_assert_str_eq(
        hcs_result_summary("{\"ErrorEvents\":[1,{\"Message\":\"m\"}]}", NULL, buf, sizeof(buf)),
        "m");
    /* Cut to the buffer, still terminated. */
    char small[8];
    hcs_result_summary("{\"ErrorMessage\":\"0123456789\"}", NULL, small, sizeof(small));
    ck_assert_int_eq(strlen(small), 7);
}
END_TEST

static Suite *
hresult_suite(void)
{
    Suite *s = suite_create("runtime_hcs_hresult");
    TCase *tc = tcase_create("hresult");
    tcase_add_test(tc, table_names_hcs_and_win32_codes);
    tcase_add_test(tc, ntstatus_twins_find_their_hcs_code);
    tcase_add_test(tc, unknown_and_success_codes);
    tcase_add_test(tc, err_message_prefers_the_system_text_and_adds_the_result);
    tcase_add_test(tc, err_message_uses_the_table_without_system_text);
    tcase_add_test(tc, result_summary_handles_odd_documents);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(hresult_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
