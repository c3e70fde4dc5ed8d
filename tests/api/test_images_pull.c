/*
 * POST /v1/images with a registry source, against a real distribution
 * registry on loopback (Debian's docker-registry, images pushed by
 * skopeo, tests/fixtures/regfix.h): by tag and by digest, the second pull
 * of a stored image (one manifest request, counted by regproxy.py), the
 * NDJSON progress lines, Docker schema 2 manifests and zstd and
 * uncompressed layers, multi-platform indexes and "platform", Basic
 * auth from --registry-auth and from the request, Bearer tokens from a
 * token server, TLS with --registry-ca, --insecure-registry,
 * --pull-parallel (blob GETs in flight counted by the proxy), a docker.io
 * mirror, and the errors (400 for bad input, 401, 404, 422, 502) with no
 * secret in any error body or in the daemon's log. Skipped (77) when the
 * registry tools are missing.
 */
#include <sys/utsname.h>

#include "tests/fixtures/pullfix.h"

static const struct pf_env *current;

static void
assert_status(const struct hresp *r, long want)
{
    if (r->status == want)
        return;
    char *log = current ? berthd_log(&current->b) : NULL;
    size_t n = log ? strlen(log) : 0;
    ck_abort_msg("status %ld (curl %d), expected %ld: %s\n--- log tail:\n%s", r->status,
                 r->curl_code, want, r->body, log ? log + (n > 3000 ? n - 3000 : 0) : "");
}

static bool
has_name(json_object *img, const char *name)
{
    json_object *names = json_at(img, "names");
    for (size_t i = 0; names && i < json_object_array_length(names); i++)
        if (strcmp(json_object_get_string(json_object_array_get_idx(names, i)), name) == 0)
            return true;
    return false;
}

/* ---- by tag, by digest, warm ------------------------------------------------ */

START_TEST(pull_by_tag_stores_the_image_and_a_second_pull_makes_one_manifest_request)
{
    struct pf_env e;
    pf_init(&e);
    current = &e;
    pf_registry(&e, NULL);
    pf_push(&e, "child", "test/child:1", NULL);
    pf_proxy(&e, NULL);
    pf_start(&e, NULL, NULL, false);
    struct hresp r;
    pf_pull(&e, pf_ref(&e, "test/child:1"), NULL, &r);
    assert_status(&r, 201);
    char want[72];
    pf_manifest("child", want);
    ck_assert_str_eq(pf_str(r.json, "digest"), want);
    ck_assert_msg(has_name(r.json, pf_ref(&e, "test/child:1")), "names: %s", r.body);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "layers")), 2);
    /* The layers are unpacked: the snapshot of the top one has the file. */
    json_object *top = json_object_array_get_idx(json_at(r.json, "layers"), 1);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "snapshots/%s/fs/app/hello.txt", pf_str(top, "chain_id") + 7);
    struct stat sb;
    ck_assert_msg(stat(fx_root_path(&e.b, path), &sb) == 0, "no %s", path);
    hresp_free(&r);
    /* manifest, config, two layers */
    ck_assert_int_eq(rf_count_lines(e.proxy.log, "front GET"), 4);
    /* Stored: one manifest request and an answer at once. The 50 ms goal
     * is bench/pull.sh's; here a bound only a download would pass (0.5 s
     * was missed at a load of 30 on 2 cores). */
    rf_write(e.proxy.log, "");
    pf_pull(&e, pf_ref(&e, "test/child:1"), NULL, &r);
    assert_status(&r, 200);
    ck_assert_str_eq(pf_str(r.json, "digest"), want);
    ck_assert_int_eq(rf_count_lines(e.proxy.log, "front"), 1);
    ck_assert_int_eq(rf_count_lines(e.proxy.log, "front GET /v2/test/child/manifests/1 200"), 1);
    ck_assert_msg(r.total_s < 3.0, "a warm pull took %.3f s", r.total_s);
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&e.b), 1);
    pf_finish(&e);
}
END_TEST

START_TEST(pull_by_digest_names_the_image_by_its_digest_reference)
{
    struct pf_env e;
    pf_init(&e);
    current = &e;
    pf_registry(&e, NULL);
    pf_push(&e, "base", "test/base:1", NULL);
    pf_proxy(&e, NULL);
    pf_start(&e, NULL, NULL, false);
    char want[72], ref[256];
    pf_manifest("base", want);
    snprintf(ref, sizeof(ref), "%s/test/base@%s", pf_host(&e), want);
    struct hresp r;
    pf_pull(&e, ref, NULL, &r);
    assert_status(&r, 201);
    ck_assert_str_eq(pf_str(r.json, "digest"), want);
    ck_assert_msg(has_name(r.json, ref), "names: %s", r.body);
    hresp_free(&r);
    /* Looked up by that name. */
    char path[400];
    snprintf(path, sizeof(path), "/v1/images/%s", ref);
    http_get(&e.b, path, &r);
    assert_status(&r, 200);
    hresp_free(&r);
    /* By the digest of a stored manifest: no request at all. */
    rf_write(e.proxy.log, "");
    pf_pull(&e, ref, NULL, &r);
    assert_status(&r, 200);
    ck_assert_int_eq(rf_count_lines(e.proxy.log, "front"), 0);
    hresp_free(&r);
    /* A digest the registry does not have: 404 with its own message. */
    char other[72];
    pf_manifest("other", other);
    snprintf(ref, sizeof(ref), "%s/test/base@%s", pf_host(&e), other);
    pf_pull(&e, ref, NULL, &r);
    ck_assert_error_reply(&r, 404, "not_found", "MANIFEST_UNKNOWN");
    hresp_free(&r);
    pf_finish(&e);
}
END_TEST

/* ---- progress --------------------------------------------------------------- */

START_TEST(progress_lines_per_layer_end_like_an_upload_import)
{
    struct pf_env e;
    pf_init(&e);
    current = &e;
    pf_registry(&e, NULL);
    pf_push(&e, "child", "test/child:1", NULL);
    pf_start(&e, NULL, NULL, false);
    char *body = pf_body(pf_ref(&e, "test/child:1"), NULL);
    struct pf_stream s;
    pf_stream(&e, body, NULL, NULL, &s);
    ck_assert_int_eq(s.status, 200);
    ck_assert_int_eq(pf_count(&s, "manifest", "resolved"), 1);
    /* Every layer: waiting, downloading with bytes and total, downloaded,
     * unpacked, in that order; each line names it by index and digest. */
    for (int layer = 1; layer <= 2; layer++) {
        int waiting = -1, downloading = -1, downloaded = -1, unpacked = -1;
        for (size_t i = 0; i < json_object_array_length(s.lines); i++) {
            json_object *l = json_object_array_get_idx(s.lines, i);
            if (strcmp(pf_str(l, "step"), "layer") != 0 ||
                json_object_get_int(json_at(l, "layer")) != layer)
                continue;
            const char *st = pf_str(l, "status");
            ck_assert_msg(json_at(l, "bytes") && json_at(l, "total") && json_at(l, "layers") &&
                              strncmp(pf_str(l, "digest"), "sha256:", 7) == 0,
                          "layer line without layer, bytes, total, digest: %s",
                          json_object_to_json_string(l));
            if (strcmp(st, "waiting") == 0 && waiting < 0)
                waiting = (int)i;
            if (strcmp(st, "downloading") == 0 && downloading < 0)
                downloading = (int)i;
            if (strcmp(st, "downloaded") == 0)
                downloaded = (int)i;
            if (strcmp(st, "unpacked") == 0)
                unpacked = (int)i;
        }
        ck_assert_msg(waiting >= 0 && downloading > waiting && downloaded > downloading &&
                          unpacked > downloaded,
                      "layer %d: waiting %d, downloading %d, downloaded %d, unpacked %d", layer,
                      waiting, downloading, downloaded, unpacked);
    }
    /* The last line as an upload import's: done, 201, the image record. */
    json_object *last = pf_last(&s);
    ck_assert_str_eq(pf_str(last, "step"), "done");
    ck_assert_int_eq(json_object_get_int(json_at(last, "status")), 201);
    char want[72];
    pf_manifest("child", want);
    ck_assert_str_eq(pf_str(json_at(last, "image"), "digest"), want);
    pf_stream_free(&s);
    /* Again: stored, so the stream is the image's step and done 200. */
    pf_stream(&e, body, NULL, NULL, &s);
    ck_assert_int_eq(pf_count(&s, "layer", NULL), 0);
    ck_assert_int_eq(pf_count(&s, "image", "present"), 1);
    ck_assert_int_eq(json_object_get_int(json_at(pf_last(&s), "status")), 200);
    pf_stream_free(&s);
    free(body);
    pf_finish(&e);
}
END_TEST

/* ---- media types -------------------------------------------------------------- */

/* The manifest the registry itself serves for repo:tag, as text. */
static char *
registry_manifest(const struct pf_env *e, const char *repo_tag)
{
    char cmd[512];
    const char *colon = strrchr(repo_tag, ':');
    snprintf(cmd, sizeof(cmd),
             "curl -sf -H 'Accept: application/vnd.oci.image.manifest.v1+json' -H 'Accept: "
             "application/vnd.docker.distribution.manifest.v2+json' http://%s/v2/%.*s/manifests/%s",
             e->reg.host, (int)(colon - repo_tag), repo_tag, colon + 1);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, p);
    buf[n] = '\0';
    ck_assert_int_eq(pclose(p), 0);
    return buf;
}

START_TEST(docker_schema2_zstd_and_uncompressed_layers_are_pulled_and_unpacked)
{
    struct pf_env e;
    pf_init(&e);
    current = &e;
    pf_registry(&e, NULL);
    /* zstd first: skopeo would reuse the gzip blobs of an earlier push. */
    pf_push_flags(&e, "child", "test/zstd:1", "--dest-compress-format zstd");
    pf_push_flags(&e, "child", "test/v2s2:1", "--format v2s2");
    pf_push_flags(&e, "plain", "test/plain:1", "--preserve-digests");
    pf_start(&e, NULL, NULL, false);
    static const struct {
        const char *repo_tag, *manifest_type, *layer_type;
    } cases[] = {
        {"test/v2s2:1", "\"application/vnd.docker.distribution.manifest.v2+json\"",
         "\"application/vnd.docker.image.rootfs.diff.tar.gzip\""},
        {"test/zstd:1", NULL, "\"application/vnd.oci.image.layer.v1.tar+zstd\""},
        {"test/plain:1", NULL, "\"application/vnd.oci.image.layer.v1.tar\""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        /* The registry serves what the case is about, not gzip OCI again. */
        char *m = registry_manifest(&e, cases[i].repo_tag);
        ck_assert_msg(!cases[i].manifest_type || strstr(m, cases[i].manifest_type), "%s: %s",
                      cases[i].repo_tag, m);
        ck_assert_msg(strstr(m, cases[i].layer_type) && !strstr(m, "tar+gzip"), "%s: %s",
                      cases[i].repo_tag, m);
        free(m);
        struct hresp r;
        pf_pull(&e, pf_ref(&e, cases[i].repo_tag), NULL, &r);
        assert_status(&r, 201);
        ck_assert_int_eq(json_object_array_length(json_at(r.json, "layers")), 2);
        /* Unpacked from these blobs: each case starts without snapshots. */
        json_object *top = json_object_array_get_idx(json_at(r.json, "layers"), 1);
        char path[PATH_MAX], text[64] = "";
        snprintf(path, sizeof(path), "snapshots/%s/fs/app/hello.txt", pf_str(top, "chain_id") + 7);
        FILE *f = fopen(fx_root_path(&e.b, path), "r");
        ck_assert_msg(f, "%s: no %s", cases[i].repo_tag, path);
        ck_assert_ptr_nonnull(fgets(text, sizeof(text), f));
        fclose(f);
        ck_assert_str_eq(text, "child layer\n");
        char del[128];
        snprintf(del, sizeof(del), "/v1/images/%s", pf_str(r.json, "digest"));
        hresp_free(&r);
        http_do(&e.b, &(struct hreq){.method = "DELETE", .path = del}, &r);
        assert_status(&r, 200);
        hresp_free(&r);
        struct stat sb;
        ck_assert_msg(stat(fx_root_path(&e.b, path), &sb) != 0, "%s kept after its delete", path);
    }
    pf_finish(&e);
}
END_TEST

/* ---- platforms ---------------------------------------------------------------- */

START_TEST(an_index_gives_the_host_platform_and_platform_picks_another)
{
    struct pf_env e;
    pf_init(&e);
    current = &e;
    pf_registry(&e, NULL);
    pf_push(&e, "multi", "test/multi:1", NULL);
    pf_proxy(&e, NULL);
    pf_start(&e, NULL, NULL, false);
    struct hresp r;
    pf_pull(&e, pf_ref(&e, "test/multi:1"), NULL, &r);
    assert_status(&r, 201);
    char want[72];
    pf_manifest("base", want); /* the host's entry of the index is base */
    ck_assert_str_eq(pf_str(r.json, "digest"), want);
    hresp_free(&r);
    /* The other entry, asked for: picked, then refused by the platform
     * check before any layer is fetched (nothing else runs here). */
    struct utsname u;
    uname(&u);
    const char *foreign = strcmp(u.machine, "aarch64") == 0 ? "linux/amd64" : "linux/arm64";
    char extra[64];
    snprintf(extra, sizeof(extra), ",\"platform\":\"%s\"", foreign);
    rf_write(e.proxy.log, "");
    pf_pull(&e, pf_ref(&e, "test/multi:1"), extra, &r);
    ck_assert_error_reply(&r, 422, "invalid_content", "this host runs");
    ck_assert_msg(strstr(r.body, foreign + 6), "the message does not name %s: %s", foreign, r.body);
    ck_assert_int_eq(rf_count_lines(e.proxy.log, "/blobs/"), 1); /* its config only */
    hresp_free(&r);
    /* A platform the index does not have. */
    pf_pull(&e, pf_ref(&e, "test/multi:1"), ",\"platform\":\"linux/s390x\"", &r);
    ck_assert_error_reply(&r, 422, "invalid_content", "s390x");
    hresp_free(&r);
    /* A malformed one, and one given twice. */
    pf_pull(&e, pf_ref(&e, "test/multi:1"), ",\"platform\":\"Linux/AMD64!\"", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "platform");
    hresp_free(&r);
    char *body = pf_body(pf_ref(&e, "test/multi:1"), ",\"platform\":\"linux/amd64\"");
    http_do(
        &e.b,
        &(struct hreq){.method = "POST", .path = "/v1/images?platform=linux/amd64", .body = body},
        &r);
    ck_assert_error_reply(&r, 400, "bad_request", "not both");
    hresp_free(&r);
    free(body);
    ck_assert_int_eq(fx_image_count(&e.b), 1);
    pf_finish(&e);
}
END_TEST

/* ---- authentication ------------------------------------------------------------ */

static void
basic_registry(struct pf_env *e)
{
    char htpasswd[PATH_MAX + 16];
    snprintf(htpasswd, sizeof(htpasswd), "%s/htpasswd", e->work);
    char cmd[PATH_MAX + 128];
    snprintf(cmd, sizeof(cmd), "htpasswd -Bbc '%s' %s %s >/dev/null 2>&1", htpasswd, PF_USER,
             PF_PASS);
    ck_assert_int_eq(system(cmd), 0);
    pf_registry(e, &(struct rf_registry_opts){.htpasswd = htpasswd});
    pf_push(e, "base", "test/base:1", PF_USERPASS);
}

START_TEST(basic_auth_from_registry_auth_and_from_the_request_never_shows_a_secret)
{
    struct pf_env e;
    pf_init(&e);
    current = &e;
    basic_registry(&e);
    /* From --registry-auth (Docker's config.json). */
    char cfg[PATH_MAX + 16], doc[512];
    snprintf(cfg, sizeof(cfg), "%s/config.json", e.work);
    snprintf(doc, sizeof(doc), "{\"auths\":{\"%s\":{\"auth\":\"%s\"}}}", e.reg.host,
             PF_USERPASS_B64);
    rf_write(cfg, doc);
    pf_start(&e, (const char *[]){"--registry-auth", cfg, NULL}, NULL, false);
    struct hresp r;
    pf_pull(&e, pf_ref(&e, "test/base:1"), NULL, &r);
    assert_status(&r, 201);
    hresp_free(&r);
    pf_assert_no_secret_logged(&e);
    berthd_finish(&e.b);
    /* Without it: 401 naming the registry; with wrong credentials in the
     * request: 401; with the right ones: 201. No secret in any answer. */
    pf_start(&e, NULL, NULL, false);
    pf_pull(&e, pf_ref(&e, "test/base:1"), NULL, &r);
    ck_assert_error_reply(&r, 401, "unauthorized", e.reg.host);
    hresp_free(&r);
    pf_pull(&e, pf_ref(&e, "test/base:1"),
            ",\"auth\":{\"username\":\"" PF_USER "\",\"password\":\"no-" PF_PASS "\"}", &r);
    ck_assert_error_reply(&r, 401, "unauthorized", e.reg.host);
    pf_assert_no_secret("an error body", r.body);
    hresp_free(&r);
    /* Malformed auth: 400 naming the field, never its value. */
    pf_pull(&e, pf_ref(&e, "test/base:1"), ",\"auth\":{\"password\":\"" PF_PASS "\"}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "auth");
    pf_assert_no_secret("an error body", r.body);
    hresp_free(&r);
    pf_pull(&e, pf_ref(&e, "test/base:1"),
            ",\"auth\":{\"username\":7,\"password\":\"" PF_PASS "\"}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "auth.username");
    pf_assert_no_secret("an error body", r.body);
    hresp_free(&r);
    pf_pull(&e, pf_ref(&e, "test/base:1"),
            ",\"auth\":{\"username\":\"" PF_USER "\",\"password\":\"" PF_PASS "\",\"pin\":1}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "auth.pin");
    pf_assert_no_secret("an error body", r.body);
    hresp_free(&r);
    pf_pull(&e, pf_ref(&e, "test/base:1"),
            ",\"auth\":{\"username\":\"" PF_USER "\",\"password\":\"" PF_PASS "\"}", &r);
    assert_status(&r, 201);
    pf_assert_no_secret("an answer", r.body);
    hresp_free(&r);
    pf_assert_no_secret_logged(&e);
    pf_finish(&e);
}
END_TEST

START_TEST(bearer_tokens_from_a_token_server_and_a_token_in_the_request)
{
    struct pf_env e;
    pf_init(&e);
    current = &e;
    char cert[PATH_MAX + 16], realm[128], token_host[64], cmd[PATH_MAX * 3];
    struct rf_helper tokens;
    pf_token_server(&e, NULL, &tokens, cert, realm, token_host);
    pf_registry(&e, &(struct rf_registry_opts){.token_realm = realm, .token_cert = cert});
    pf_push(&e, "child", "test/child:1", PF_USERPASS);
    rf_write(tokens.log, "");
    pf_start(&e, (const char *[]){"--insecure-registry", token_host, NULL}, NULL, false);
    struct hresp r;
    /* Anonymous: the token service refuses, 401 naming both. */
    pf_pull(&e, pf_ref(&e, "test/child:1"), NULL, &r);
    ck_assert_error_reply(&r, 401, "unauthorized", e.reg.host);
    hresp_free(&r);
    pf_pull(&e, pf_ref(&e, "test/child:1"),
            ",\"auth\":{\"username\":\"" PF_USER "\",\"password\":\"" PF_PASS "\"}", &r);
    assert_status(&r, 201);
    char del[128];
    snprintf(del, sizeof(del), "/v1/images/%s", pf_str(r.json, "digest"));
    hresp_free(&r);
    ck_assert_int_eq(rf_count_lines(tokens.log, "ISSUED repository:test/child:pull "), 1);
    /* A registry token the caller got itself, sent as it is. */
    snprintf(cmd, sizeof(cmd),
             "curl -sf -u %s 'http://%s/token?service=%s&scope=repository:test/child:pull' | "
             "python3 -c 'import json,sys; print(json.load(sys.stdin)[\"token\"])'",
             PF_USERPASS, token_host, RF_TOKEN_SERVICE);
    FILE *p = popen(cmd, "r");
    char token[8192] = "";
    ck_assert_ptr_nonnull(fgets(token, sizeof(token), p));
    pclose(p);
    token[strcspn(token, "\n")] = '\0';
    ck_assert_int_gt(strlen(token), 20);
    /* Gone from the store, so the token has to fetch every blob again. */
    http_do(&e.b, &(struct hreq){.method = "DELETE", .path = del}, &r);
    assert_status(&r, 200);
    hresp_free(&r);
    char extra[9000];
    snprintf(extra, sizeof(extra), ",\"auth\":{\"token\":\"%s\"}", token);
    pf_pull(&e, pf_ref(&e, "test/child:1"), extra, &r);
    ck_assert_msg(r.status == 201, "a pull with a token: %ld %s", r.status, r.body);
    hresp_free(&r);
    char *log = berthd_log(&e.b);
    ck_assert_msg(!strstr(log, token), "the token is in the log");
    free(log);
    pf_assert_no_secret_logged(&e);
    pf_finish(&e);
}
END_TEST

/* ---- transport ------------------------------------------------------------------ */

START_TEST(tls_with_registry_ca_and_plain_http_only_with_insecure_registry)
{
    struct pf_env e;
    pf_init(&e);
    current = &e;
    char ca_key[PATH_MAX + 16], ca[PATH_MAX + 16], key[PATH_MAX + 16], csr[PATH_MAX + 16],
        crt[PATH_MAX + 16], ext[PATH_MAX + 16], cmd[PATH_MAX * 12];
    snprintf(ca_key, sizeof(ca_key), "%s/ca.key", e.work);
    snprintf(ca, sizeof(ca), "%s/ca.crt", e.work);
    snprintf(key, sizeof(key), "%s/srv.key", e.work);
    snprintf(csr, sizeof(csr), "%s/srv.csr", e.work);
    snprintf(crt, sizeof(crt), "%s/srv.crt", e.work);
    snprintf(ext, sizeof(ext), "%s/srv.ext", e.work);
    rf_write(ext, "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n");
    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 -newkey rsa:2048 -nodes -keyout '%s' -out '%s' -subj "
             "/CN=berth-test-ca -days 2 >/dev/null 2>&1 && openssl req -newkey rsa:2048 -nodes "
             "-keyout '%s' -out '%s' -subj /CN=127.0.0.1 >/dev/null 2>&1 && openssl x509 -req "
             "-in '%s' -CA '%s' -CAkey '%s' -CAcreateserial -out '%s' -days 2 -extfile '%s' "
             ">/dev/null 2>&1",
             ca_key, ca, key, csr, csr, ca, ca_key, crt, ext);
    ck_assert_int_eq(system(cmd), 0);
    pf_registry(&e, &(struct rf_registry_opts){.tls_cert = crt, .tls_key = key});
    pf_push(&e, "base", "test/base:1", NULL);
    /* HTTPS against the system CAs: refused, naming the host. */
    pf_start(&e, NULL, (const char *[]){PF_FAST_TIMEOUTS, NULL}, true);
    struct hresp r;
    pf_pull(&e, pf_ref(&e, "test/base:1"), NULL, &r);
    ck_assert_error_reply(&r, 502, "bad_gateway", e.reg.host);
    ck_assert_msg(strstr(r.body, "certificate"), "%s", r.body);
    hresp_free(&r);
    berthd_finish(&e.b);
    /* With its CA. */
    char flag[PATH_MAX + 80];
    snprintf(flag, sizeof(flag), "%s=%s", e.reg.host, ca);
    pf_start(&e, (const char *[]){"--registry-ca", flag, NULL}, NULL, true);
    pf_pull(&e, pf_ref(&e, "test/base:1"), NULL, &r);
    assert_status(&r, 201);
    hresp_free(&r);
    berthd_finish(&e.b);
    rf_registry_stop(&e.reg);
    /* A plain HTTP registry: not without --insecure-registry. */
    pf_registry(&e, NULL);
    pf_push(&e, "base", "test/base:1", NULL);
    pf_start(&e, NULL, (const char *[]){PF_FAST_TIMEOUTS, NULL}, true);
    pf_pull(&e, pf_ref(&e, "test/base:1"), NULL, &r);
    ck_assert_error_reply(&r, 502, "bad_gateway", e.reg.host);
    hresp_free(&r);
    berthd_finish(&e.b);
    pf_start(&e, NULL, NULL, false);
    pf_pull(&e, pf_ref(&e, "test/base:1"), NULL, &r);
    assert_status(&r, 201);
    hresp_free(&r);
    pf_finish(&e);
}
END_TEST

/* The most blob GETs the proxy answered at once. */
static int
max_inflight(const struct pf_env *e)
{
    int most = 0;
    for (int n = 1; n <= 8; n++) {
        char needle[32];
        snprintf(needle, sizeof(needle), "INFLIGHT %d\n", n);
        if (rf_count_lines(e->proxy.log, needle) > 0)
            most = n;
    }
    return most;
}

START_TEST(pull_parallel_bounds_the_layer_downloads_in_flight)
{
    struct pf_env e;
    pf_init(&e);
    current = &e;
    pf_registry(&e, NULL);
    pf_push(&e, "child", "test/child:1", NULL);
    /* Every blob GET is held 2 s: child's two layer GETs overlap, in
     * whichever order their jobs start, unless only one may run. */
    pf_proxy(&e, (const char *[]){"--blob-delay", "2000", NULL});
    static const struct {
        const char *parallel;
        int want;
    } cases[] = {{"1", 1}, {NULL, 2}};
    for (size_t i = 0; i < 2; i++) {
        rf_write(e.proxy.log, "");
        pf_start(&e, (const char *[]){cases[i].parallel ? "--pull-parallel" : NULL, "1", NULL},
                 NULL, false);
        struct hresp r;
        pf_pull(&e, pf_ref(&e, "test/child:1"), NULL, &r);
        assert_status(&r, 201);
        hresp_free(&r);
        /* config, then both layers */
        ck_assert_int_eq(rf_count_lines(e.proxy.log, "INFLIGHT"), 3);
        ck_assert_msg(max_inflight(&e) == cases[i].want,
                      "--pull-parallel %s: %d blob downloads at once, expected %d",
                      cases[i].parallel ? cases[i].parallel : "(default 3)", max_inflight(&e),
                      cases[i].want);
        if (i == 0)
            berthd_finish(&e.b);
    }
    pf_finish(&e);
}
END_TEST

START_TEST(a_mirror_of_docker_io_is_pulled_through)
{
    struct pf_env e;
    pf_init(&e);
    current = &e;
    pf_registry(&e, NULL);
    pf_push(&e, "base", "library/base:1", NULL);
    pf_proxy(&e, NULL);
    char url[80];
    snprintf(url, sizeof(url), "http://%s", pf_host(&e));
    /* Should the mirror fail, the origin would be tried: a proxy that is a
     * dead loopback port keeps that attempt on this machine. */
    pf_start(&e, (const char *[]){"--registry-mirror", url, NULL},
             (const char *[]){"https_proxy=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9",
                              "no_proxy=127.0.0.1", "NO_PROXY=127.0.0.1", NULL},
             true);
    struct hresp r;
    pf_pull(&e, "base:1", NULL, &r);
    assert_status(&r, 201);
    ck_assert_msg(has_name(r.json, "base:1"), "names: %s", r.body);
    ck_assert_msg(
        json_object_get_string(json_object_array_get_idx(json_at(r.json, "references"), 0)),
        "no references");
    ck_assert_str_eq(
        json_object_get_string(json_object_array_get_idx(json_at(r.json, "references"), 0)),
        "docker.io/library/base:1");
    hresp_free(&r);
    ck_assert_int_eq(rf_count_lines(e.proxy.log, "front GET /v2/library/base/manifests/1 200"), 1);
    ck_assert_int_eq(rf_count_lines(e.proxy.log, "front GET"), 3);
    pf_finish(&e);
}
END_TEST

/* ---- errors --------------------------------------------------------------------- */

START_TEST(bad_references_are_400_and_what_berth_does_not_pull_is_422)
{
    struct pf_env e;
    pf_init(&e);
    current = &e;
    pf_registry(&e, NULL);
    pf_push(&e, "base", "test/base:1", NULL);
    /* A schema 1 manifest, and a manifest with a foreign layer, served by the proxy. */
    char s1[PATH_MAX + 16], fl[PATH_MAX + 16], spec1[PATH_MAX + 64], spec2[PATH_MAX + 64];
    snprintf(s1, sizeof(s1), "%s/schema1.json", e.work);
    rf_write(s1, "{\"schemaVersion\":1,\"name\":\"test/base\",\"tag\":\"old\",\"architecture\":"
                 "\"amd64\",\"fsLayers\":[],\"history\":[]}");
    char md[72], path[PATH_MAX + 128];
    pf_manifest("base", md);
    snprintf(path, sizeof(path), "%s/blobs/sha256/%s", fx_path("base"), md + 7);
    json_object *m = json_object_from_file(path);
    json_object *layers = json_object_new_array();
    json_object *l = json_object_new_object();
    json_object_object_add(
        l, "mediaType",
        json_object_new_string("application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"));
    json_object_object_add(l, "digest",
                           json_object_new_string("sha256:"
                                                  "0000000000000000000000000000000000"
                                                  "000000000000000000000000000000"));
    json_object_object_add(l, "size", json_object_new_int(100));
    json_object_array_add(layers, l);
    json_object_object_add(m, "layers", layers);
    snprintf(fl, sizeof(fl), "%s/foreign.json", e.work);
    rf_write(fl, json_object_to_json_string_ext(m, JSON_C_TO_STRING_PLAIN));
    json_object_put(m);
    snprintf(spec1, sizeof(spec1), "/v2/test/base/manifests/old=%s=application/json", s1);
    snprintf(spec2, sizeof(spec2),
             "/v2/test/base/manifests/foreign=%s=application/vnd.oci.image.manifest.v1+json", fl);
    pf_proxy(&e, (const char *[]){"--serve", spec1, "--serve", spec2, NULL});
    int dead = rf_free_port();
    char dead_host[64], dead_ref[128];
    snprintf(dead_host, sizeof(dead_host), "127.0.0.1:%d", dead);
    snprintf(dead_ref, sizeof(dead_ref), "%s/test/base:1", dead_host);
    pf_start(&e, (const char *[]){"--insecure-registry", dead_host, NULL},
             (const char *[]){PF_FAST_TIMEOUTS, NULL}, false);
    struct hresp r;
    static const char *const bad[] = {
        "Test/Upper:1", "a b", "sha256:0123456789abcdef", "x:", "0123456789abcdef0123", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pf_pull(&e, bad[i], NULL, &r);
        ck_assert_error_reply(&r, 400, "bad_request", "source.registry");
        hresp_free(&r);
    }
    /* Fields that do not go with a pull. */
    char *body = pf_body(pf_ref(&e, "test/base:1"), NULL);
    http_do(&e.b, &(struct hreq){.method = "POST", .path = "/v1/images?name=x:1", .body = body},
            &r);
    ck_assert_error_reply(&r, 400, "bad_request", "name");
    hresp_free(&r);
    free(body);
    http_post_json(&e.b, "/v1/images", "{\"source\":{\"registry\":\"a/b:1\",\"layout\":\"/x\"}}",
                   &r);
    ck_assert_error_reply(&r, 400, "bad_request", "source");
    hresp_free(&r);
    http_post_json(&e.b, "/v1/images",
                   "{\"source\":{\"layout\":\"/x\"},\"auth\":{\"token\":\"t\"}}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "auth");
    hresp_free(&r);
    /* What the registry says. */
    pf_pull(&e, pf_ref(&e, "test/base:nope"), NULL, &r);
    ck_assert_error_reply(&r, 404, "not_found", "MANIFEST_UNKNOWN");
    hresp_free(&r);
    pf_pull(&e, pf_ref(&e, "test/base:old"), NULL, &r);
    ck_assert_error_reply(&r, 422, "not_supported", "schema 1");
    hresp_free(&r);
    pf_pull(&e, pf_ref(&e, "test/base:foreign"), NULL, &r);
    ck_assert_error_reply(&r, 422, "not_supported", "foreign");
    hresp_free(&r);
    /* Nothing listens there: 502 naming the host. */
    pf_pull(&e, dead_ref, NULL, &r);
    ck_assert_error_reply(&r, 502, "bad_gateway", dead_host);
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&e.b), 0);
    pf_finish(&e);
}
END_TEST

static Suite *
pull_suite(void)
{
    Suite *s = suite_create("api_images_pull");
    TCase *tc = tcase_create("pull");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, pull_by_tag_stores_the_image_and_a_second_pull_makes_one_manifest_request);
    tcase_add_test(tc, pull_by_digest_names_the_image_by_its_digest_reference);
    tcase_add_test(tc, progress_lines_per_layer_end_like_an_upload_import);
    tcase_add_test(tc, docker_schema2_zstd_and_uncompressed_layers_are_pulled_and_unpacked);
    tcase_add_test(tc, an_index_gives_the_host_platform_and_platform_picks_another);
    tcase_add_test(tc, basic_auth_from_registry_auth_and_from_the_request_never_shows_a_secret);
    tcase_add_test(tc, bearer_tokens_from_a_token_server_and_a_token_in_the_request);
    tcase_add_test(tc, tls_with_registry_ca_and_plain_http_only_with_insecure_registry);
    tcase_add_test(tc, pull_parallel_bounds_the_layer_downloads_in_flight);
    tcase_add_test(tc, a_mirror_of_docker_io_is_pulled_through);
    tcase_add_test(tc, bad_references_are_400_and_what_berth_does_not_pull_is_422);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    if (!pf_tools_present("api_images_pull"))
        return 77;
    if (!fx_build(false)) {
        fx_cleanup();
        return 1;
    }
    int rc = harness_run_suite(pull_suite());
    fx_cleanup();
    return rc;
}
