/*
 * store/registry_auth.c: WWW-Authenticate challenges, base64, Docker
 * config.json credentials, token service answers, the token cache, and
 * that no secret ever shows in a message or a cache key.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/registry.h"
#include "store/registry_auth.h"
#include "tests/unit/testutil.h"

START_TEST(a_bearer_challenge_gives_realm_service_and_scope)
{
    struct registry_challenge c;
    struct err err = {0};
    ck_assert_int_eq(registry_challenge_parse(
                         "Bearer realm=\"https://auth.example/token\",service=\"reg.example\","
                         "scope=\"repository:library/busybox:pull\"",
                         &c, &err),
                     0);
    ck_assert_int_eq(c.scheme, REGISTRY_AUTH_BEARER);
    ck_assert_str_eq(c.realm, "https://auth.example/token");
    ck_assert_str_eq(c.service, "reg.example");
    ck_assert_str_eq(c.scope, "repository:library/busybox:pull");
    registry_challenge_clear(&c);
    /* Quoted strings with escapes and commas, tokens unquoted, odd spacing. */
    ck_assert_int_eq(registry_challenge_parse("bearer  realm = \"https://a/t?x=1,2\" , "
                                              "service=plain, scope=\"a\\\"b\"",
                                              &c, &err),
                     0);
    ck_assert_str_eq(c.realm, "https://a/t?x=1,2");
    ck_assert_str_eq(c.service, "plain");
    ck_assert_str_eq(c.scope, "a\"b");
    registry_challenge_clear(&c);
}
END_TEST

START_TEST(bearer_wins_over_basic_and_a_realmless_bearer_is_refused)
{
    struct registry_challenge c;
    struct err err = {0};
    ck_assert_int_eq(
        registry_challenge_parse(
            "Basic realm=\"Registry\", Bearer realm=\"https://a/t\",service=\"s\"", &c, &err),
        0);
    ck_assert_int_eq(c.scheme, REGISTRY_AUTH_BEARER);
    ck_assert_str_eq(c.realm, "https://a/t");
    registry_challenge_clear(&c);
    ck_assert_int_eq(registry_challenge_parse("Basic realm=\"Registry Realm\"", &c, &err), 0);
    ck_assert_int_eq(c.scheme, REGISTRY_AUTH_BASIC);
    ck_assert_str_eq(c.realm, "Registry Realm");
    registry_challenge_clear(&c);
    ck_assert_int_eq(registry_challenge_parse("Bearer service=\"s\"", &c, &err), -EINVAL);
    ck_assert_int_eq(registry_challenge_parse("Negotiate abc", &c, &err), -EINVAL);
    ck_assert_int_eq(registry_challenge_parse(NULL, &c, &err), -EINVAL);
    ck_assert_int_eq(registry_challenge_parse("Bearer realm=\"unterminated", &c, &err), -EINVAL);
}
END_TEST

START_TEST(base64_round_trips_and_refuses_garbage)
{
    const char *cases[] = {"", "a", "ab", "abc", "user:pa:ss", "\xff\x00\x10"};
    size_t lens[] = {0, 1, 2, 3, 10, 3};
    for (size_t i = 0; i < 6; i++) {
        char *e = registry_base64_encode(cases[i], lens[i]);
        size_t n = 99;
        char *d = registry_base64_decode(e, &n);
        ck_assert_ptr_nonnull(d);
        ck_assert_uint_eq(n, lens[i]);
        ck_assert(memcmp(d, cases[i], n) == 0);
        free(e);
        free(d);
    }
    char *e = registry_base64_encode("user:pass", 9);
    ck_assert_str_eq(e, "dXNlcjpwYXNz");
    free(e);
    ck_assert_ptr_null(registry_base64_decode("ab$d", NULL));
    ck_assert_ptr_null(registry_base64_decode("abcde", NULL));
}
END_TEST

START_TEST(a_config_file_gives_credentials_per_registry)
{
    char *auth = registry_base64_encode("hub-user:hub:pass", 17);
    char *doc = NULL;
    ck_assert_int_gt(
        asprintf(&doc,
                 "{\"auths\":{\"https://index.docker.io/v1/\":{\"auth\":\"%s\"},"
                 "\"Registry.Example:5000\":{\"username\":\"u\",\"password\":\"p\"},"
                 "\"id.example\":{\"identitytoken\":\"refresh-me\"}},\"credsStore\":\"desktop\"}",
                 auth),
        0);
    free(auth);
    struct registry_auth_file *f = NULL;
    struct err err = {0};
    ck_assert_msg(registry_auth_file_parse(doc, strlen(doc), "config.json", &f, &err) == 0, "%s",
                  err.msg);
    free(doc);
    struct registry_creds c = {0};
    ck_assert(registry_auth_file_lookup(f, "docker.io", &c));
    ck_assert_str_eq(c.username, "hub-user");
    ck_assert_str_eq(c.password, "hub:pass"); /* split at the first colon */
    ck_assert(registry_auth_file_lookup(f, "registry-1.docker.io", &c));
    ck_assert(registry_auth_file_lookup(f, "registry.example:5000", &c));
    ck_assert_str_eq(c.username, "u");
    ck_assert(registry_auth_file_lookup(f, "id.example", &c));
    ck_assert_str_eq(c.identity_token, "refresh-me");
    ck_assert_ptr_null(c.username);
    ck_assert(!registry_auth_file_lookup(f, "registry.example", &c));
    registry_auth_file_free(f);
}
END_TEST

START_TEST(a_bad_config_file_is_named_without_its_secrets)
{
    /* base64 of "nocolon-s3cret": no user:password separator. */
    char *auth = registry_base64_encode("nocolon-s3cret", 14);
    char *doc = NULL;
    ck_assert_int_gt(asprintf(&doc, "{\"auths\":{\"r.example\":{\"auth\":\"%s\"}}}", auth), 0);
    struct registry_auth_file *f = NULL;
    struct err err = {0};
    ck_assert_int_eq(registry_auth_file_parse(doc, strlen(doc), "/etc/berth/auth.json", &f, &err),
                     -EINVAL);
    ck_assert_msg(strstr(err.msg, "/etc/berth/auth.json") && strstr(err.msg, "r.example"), "%s",
                  err.msg);
    ck_assert_msg(!strstr(err.msg, "s3cret") && !strstr(err.msg, auth), "%s", err.msg);
    free(doc);
    free(auth);
    ck_assert_int_eq(registry_auth_file_parse("[1]", 3, "x.json", &f, &err), -EINVAL);
    ck_assert_int_eq(registry_auth_file_parse("{\"auths\":[]}", 12, "x.json", &f, &err), -EINVAL);
    struct err lerr = {0};
    ck_assert_int_lt(registry_auth_file_load("/nonexistent/berth-auth.json", &f, &lerr), 0);
    ck_assert_msg(strstr(lerr.msg, "/nonexistent/berth-auth.json"), "%s", lerr.msg);
}
END_TEST

START_TEST(token_answers_and_their_lifetimes)
{
    char *tok = NULL;
    int64_t exp = 0;
    struct err err = {0};
    const char *a = "{\"token\":\"T1\",\"expires_in\":300}";
    ck_assert_int_eq(registry_token_parse(a, strlen(a), &tok, &exp, &err), 0);
    ck_assert_str_eq(tok, "T1");
    ck_assert_int_eq(exp, 300);
    free(tok);
    /* access_token (OAuth2), no or too short expires_in: 60 s. */
    const char *b = "{\"access_token\":\"T2\",\"expires_in\":5}";
    ck_assert_int_eq(registry_token_parse(b, strlen(b), &tok, &exp, &err), 0);
    ck_assert_str_eq(tok, "T2");
    ck_assert_int_eq(exp, 60);
    free(tok);
    const char *c = "{\"expires_in\":5}";
    ck_assert_int_eq(registry_token_parse(c, strlen(c), &tok, &exp, &err), -EINVAL);
    ck_assert_int_eq(registry_token_parse("<html>", 6, &tok, &exp, &err), -EINVAL);
}
END_TEST

START_TEST(the_token_cache_keys_by_scope_and_credentials_until_expiry)
{
    struct registry_token_cache *c = registry_token_cache_new();
    char id_a[72], id_b[72], id_anon[72];
    struct registry_creds a = {.username = "u", .password = "pw-one"};
    struct registry_creds b = {.username = "u", .password = "pw-two"};
    registry_creds_id(&a, id_a);
    registry_creds_id(&b, id_b);
    registry_creds_id(NULL, id_anon);
    ck_assert_str_ne(id_a, id_b);
    ck_assert_str_eq(id_anon, "anonymous");
    ck_assert(!strstr(id_a, "pw-one"));
    registry_token_cache_put(c, "https://a/t", "s", "repository:x:pull", id_a, "TOKEN-A", 100);
    char *t = registry_token_cache_get(c, "https://a/t", "s", "repository:x:pull", id_a, 50);
    ck_assert_str_eq(t, "TOKEN-A");
    free(t);
    /* Another password, scope or service: not that token. */
    ck_assert_ptr_null(
        registry_token_cache_get(c, "https://a/t", "s", "repository:x:pull", id_b, 50));
    ck_assert_ptr_null(
        registry_token_cache_get(c, "https://a/t", "s", "repository:y:pull", id_a, 50));
    ck_assert_ptr_null(
        registry_token_cache_get(c, "https://a/t", "s2", "repository:x:pull", id_a, 50));
    /* Expired. */
    ck_assert_ptr_null(
        registry_token_cache_get(c, "https://a/t", "s", "repository:x:pull", id_a, 100));
    /* Dropped when a registry refuses it early. */
    registry_token_cache_put(c, "https://a/t", "s", "repository:x:pull", id_a, "TOKEN-B", 1000);
    registry_token_cache_drop(c, "TOKEN-B");
    ck_assert_ptr_null(
        registry_token_cache_get(c, "https://a/t", "s", "repository:x:pull", id_a, 50));
    /* More scopes than slots: the cache stays bounded and keeps working. */
    for (int i = 0; i < 200; i++) {
        char scope[64];
        snprintf(scope, sizeof(scope), "repository:r%d:pull", i);
        registry_token_cache_put(c, "https://a/t", "s", scope, id_a, "T", 1000 + i);
    }
    t = registry_token_cache_get(c, "https://a/t", "s", "repository:r199:pull", id_a, 50);
    ck_assert_str_eq(t, "T");
    free(t);
    registry_token_cache_free(c);
}
END_TEST

START_TEST(names_that_could_leave_the_url_path_are_refused)
{
    ck_assert(registry_repository_valid("library/busybox"));
    ck_assert(registry_repository_valid("a/b-c/d__e.f"));
    ck_assert(registry_repository_valid("x"));
    ck_assert(!registry_repository_valid(""));
    ck_assert(!registry_repository_valid("Library/busybox"));
    ck_assert(!registry_repository_valid("a/../b"));
    ck_assert(!registry_repository_valid("a//b"));
    ck_assert(!registry_repository_valid("a/b/"));
    ck_assert(!registry_repository_valid("a?b"));
    ck_assert(!registry_repository_valid("a/b#c"));
    ck_assert(!registry_repository_valid("-a"));
    ck_assert(registry_tag_valid("1.36"));
    ck_assert(registry_tag_valid("_x-Y.z"));
    ck_assert(!registry_tag_valid(".x"));
    ck_assert(!registry_tag_valid("a/b"));
    ck_assert(!registry_tag_valid("a?b"));
    char long_tag[200];
    memset(long_tag, 'a', 129);
    long_tag[129] = '\0';
    ck_assert(!registry_tag_valid(long_tag));
}
END_TEST

START_TEST(client_options_are_checked)
{
    struct err err = {0};
    struct registry_mirror bad_mirror = {.host = "docker.io", .url = "https://u:p@mirror.example"};
    struct registry_opts o = {.mirrors = &bad_mirror, .n_mirrors = 1};
    ck_assert_ptr_null(registry_client_new(&o, &err));
    ck_assert_int_eq(err.code, EINVAL);
    ck_assert_msg(!strstr(err.msg, "u:p@") || strstr(err.msg, "credentials"), "%s", err.msg);
    struct registry_mirror ftp = {.host = "docker.io", .url = "ftp://mirror.example"};
    o.mirrors = &ftp;
    ck_assert_ptr_null(registry_client_new(&o, &err));
    const char *insecure[] = {"bad host"};
    struct registry_opts o2 = {.insecure = insecure, .n_insecure = 1};
    ck_assert_ptr_null(registry_client_new(&o2, &err));
    ck_assert_msg(strstr(err.msg, "bad host"), "%s", err.msg);
    struct registry_mirror good = {.host = "docker.io", .url = "https://mirror.example/"};
    struct registry_opts o3 = {.mirrors = &good, .n_mirrors = 1};
    struct registry_client *c = registry_client_new(&o3, &err);
    ck_assert_ptr_nonnull(c);
    struct registry_repo *r =
        registry_repo_open(c, "docker.io", "Library/x", NULL, NULL, NULL, &err);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(err.code, EINVAL);
    r = registry_repo_open(c, "docker.io", "library/busybox", NULL, NULL, NULL, &err);
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(registry_repo_name(r), "docker.io/library/busybox");
    struct registry_manifest m;
    ck_assert_int_eq(registry_manifest_get(r, "bad/tag", &m, &err), -EINVAL);
    ck_assert_int_eq(registry_manifest_get(r, "sha256:xyz", &m, &err), -EINVAL);
    registry_repo_close(r);
    registry_client_free(c);
}
END_TEST

static Suite *
auth_suite(void)
{
    Suite *s = suite_create("store_registry_auth");
    TCase *tc = tcase_create("auth");
    tcase_add_test(tc, a_bearer_challenge_gives_realm_service_and_scope);
    tcase_add_test(tc, bearer_wins_over_basic_and_a_realmless_bearer_is_refused);
    tcase_add_test(tc, base64_round_trips_and_refuses_garbage);
    tcase_add_test(tc, a_config_file_gives_credentials_per_registry);
    tcase_add_test(tc, a_bad_config_file_is_named_without_its_secrets);
    tcase_add_test(tc, token_answers_and_their_lifetimes);
    tcase_add_test(tc, the_token_cache_keys_by_scope_and_credentials_until_expiry);
    tcase_add_test(tc, names_that_could_leave_the_url_path_are_refused);
    tcase_add_test(tc, client_options_are_checked);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(auth_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
