/* Unit tests for store/digest.c: validation, streaming SHA-256, chain IDs.
 * The cross-check against sha256sum is in test_store_tools.c. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/digest.h"

#define D_A "sha256:ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"
#define D_B "sha256:3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d"
#define D_C "sha256:2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6"

START_TEST(digest_valid_accepts_only_lowercase_sha256)
{
    ck_assert(digest_valid(D_A));
    ck_assert(!digest_valid(NULL));
    ck_assert(!digest_valid(""));
    ck_assert(!digest_valid("sha256:"));
    /* 63 digits, 65 digits, uppercase, other algorithm, path tricks */
    ck_assert(
        !digest_valid("sha256:ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48b"));
    ck_assert(!digest_valid(D_A "0"));
    ck_assert(
        !digest_valid("sha256:CA978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"));
    ck_assert(
        !digest_valid("sha512:ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"));
    ck_assert(!digest_valid("sha256:../../../../etc/passwd"));
    ck_assert(!digest_valid("ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"));
}
END_TEST

START_TEST(digest_hex_points_past_prefix)
{
    ck_assert_str_eq(digest_hex(D_A),
                     "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb");
    ck_assert_ptr_eq(digest_hex(D_A), D_A + 7);
    ck_assert_ptr_null(digest_hex("sha256:xyz"));
}
END_TEST

START_TEST(sha256_streaming_matches_known_values)
{
    char out[DIGEST_STR_LEN];
    struct sha256 *h = sha256_new();
    ck_assert_ptr_nonnull(h);
    sha256_update(h, "a", 1);
    sha256_update(h, "", 0);
    sha256_update(h, "bc", 2);
    sha256_final(h, out);
    sha256_free(h);
    ck_assert_str_eq(out,
                     "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ck_assert_int_eq(digest_of("", 0, out), 0);
    ck_assert_str_eq(out,
                     "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    ck_assert(digest_valid(out));
    sha256_free(NULL);
}
END_TEST

START_TEST(chain_id_matches_known_value)
{
    struct err err = {0};
    char c1[DIGEST_STR_LEN], c2[DIGEST_STR_LEN], c3[DIGEST_STR_LEN];
    ck_assert_int_eq(digest_chain_id(NULL, D_A, c1, &err), 0);
    ck_assert_str_eq(c1, D_A);
    /* printf '%s' 'sha256:ca97... sha256:3e23...' | sha256sum */
    ck_assert_int_eq(digest_chain_id(c1, D_B, c2, &err), 0);
    ck_assert_str_eq(c2, "sha256:51c0c8ace48498d6f5fee6b0592cc06f2da0f3cbe09c5a34a97dce85c3889676");
    ck_assert_int_eq(digest_chain_id(c2, D_C, c3, &err), 0);
    ck_assert_str_eq(c3, "sha256:2fce7f8ce91bcf0a1428b36e1024639fdbd9469eea762dba98aa749631885106");
}
END_TEST

START_TEST(chain_id_rejects_invalid_digests)
{
    struct err err = {0};
    char out[DIGEST_STR_LEN];
    ck_assert_int_eq(digest_chain_id(NULL, "sha256:nothex", out, &err), -EINVAL);
    ck_assert_int_eq(err.code, EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "sha256:nothex"));
    ck_assert_int_eq(digest_chain_id("bogus", D_A, out, &err), -EINVAL);
}
END_TEST

static Suite *
digest_suite(void)
{
    Suite *s = suite_create("store_digest");
    TCase *tc = tcase_create("digest");
    tcase_add_test(tc, digest_valid_accepts_only_lowercase_sha256);
    tcase_add_test(tc, digest_hex_points_past_prefix);
    tcase_add_test(tc, sha256_streaming_matches_known_values);
    tcase_add_test(tc, chain_id_matches_known_value);
    tcase_add_test(tc, chain_id_rejects_invalid_digests);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(digest_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
