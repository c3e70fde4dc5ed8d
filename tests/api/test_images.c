/*
 * /v1/images against a real berthd: importing real images (umoci layouts
 * by directory and by upload, plain, gzip and zstd; a docker save
 * archive from skopeo), the image record, re-imports that do no work,
 * naming, lookup, delete, prune and the files it frees, NDJSON progress,
 * single flight for simultaneous imports, and images surviving a
 * restart. The images are built once per run by
 * tests/fixtures/make-images.sh into a temporary directory.
 */
#include <ctype.h>
#include <regex.h>
#include <sys/wait.h>

#include "tests/fixtures/imgfix.h"

/* ---- helpers ----------------------------------------------------------------- */

/* The manifest digest that a fixture layout's index.json names. */
static void
layout_manifest_digest(const char *dir, char out[72])
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/index.json", dir);
    json_object *idx = json_object_from_file(path);
    ck_assert_ptr_nonnull(idx);
    json_object *m = json_object_array_get_idx(json_at(idx, "manifests"), 0);
    snprintf(out, 72, "%s", json_object_get_string(json_at(m, "digest")));
    json_object_put(idx);
}

static bool
is_digest(json_object *o)
{
    if (!o || !json_object_is_type(o, json_type_string))
        return false;
    const char *s = json_object_get_string(o);
    if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != 71)
        return false;
    for (const char *p = s + 7; *p; p++)
        if (!isxdigit((unsigned char)*p) || isupper((unsigned char)*p))
            return false;
    return true;
}

static bool
is_int(json_object *o)
{
    return o && json_object_is_type(o, json_type_int);
}

static bool
is_time(json_object *o)
{
    if (!o || !json_object_is_type(o, json_type_string))
        return false;
    regex_t re;
    regcomp(&re, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?Z$",
            REG_EXTENDED | REG_NOSUB);
    bool ok = regexec(&re, json_object_get_string(o), 0, NULL, 0) == 0;
    regfree(&re);
    return ok;
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

/* Checks every member of an image record, and its digest and layer count. */
static void
assert_image_record(json_object *img, const char *digest, size_t n_layers)
{
    const char *text = json_object_to_json_string(img);
    ck_assert_msg(img && json_object_is_type(img, json_type_object), "not an object: %s", text);
    ck_assert_msg(is_digest(json_at(img, "digest")), "digest: %s", text);
    if (digest)
        ck_assert_str_eq(json_object_get_string(json_at(img, "digest")), digest);
    json_object *names = json_at(img, "names");
    ck_assert_msg(names && json_object_is_type(names, json_type_array), "names: %s", text);
    for (size_t i = 0; i < json_object_array_length(names); i++)
        ck_assert(json_object_is_type(json_object_array_get_idx(names, i), json_type_string));
    json_object *p = json_at(img, "platform");
    ck_assert_msg(p && json_object_is_type(p, json_type_object), "platform: %s", text);
    ck_assert_str_eq(json_object_get_string(json_at(p, "os")), "linux");
    ck_assert_str_eq(json_object_get_string(json_at(p, "architecture")), "amd64");
    ck_assert_msg(is_digest(json_at(img, "config_digest")), "config_digest: %s", text);
    json_object *layers = json_at(img, "layers");
    ck_assert_msg(layers && json_object_is_type(layers, json_type_array), "layers: %s", text);
    ck_assert_uint_eq(json_object_array_length(layers), n_layers);
    int64_t layer_bytes = 0;
    for (size_t i = 0; i < n_layers; i++) {
        json_object *l = json_object_array_get_idx(layers, i);
        ck_assert_msg(is_digest(json_at(l, "digest")) && is_digest(json_at(l, "diff_id")) &&
                          is_digest(json_at(l, "chain_id")) && is_int(json_at(l, "size")) &&
                          json_object_get_int64(json_at(l, "size")) > 0,
                      "layer %zu: %s", i, text);
        layer_bytes += json_object_get_int64(json_at(l, "size"));
        if (i == 0)
            ck_assert_str_eq(json_object_get_string(json_at(l, "chain_id")),
                             json_object_get_string(json_at(l, "diff_id")));
    }
    ck_assert_msg(is_int(json_at(img, "size_bytes")) &&
                      json_object_get_int64(json_at(img, "size_bytes")) >= layer_bytes,
                  "size_bytes: %s", text);
    ck_assert_msg(is_int(json_at(img, "unpacked_bytes")) &&
                      json_object_get_int64(json_at(img, "unpacked_bytes")) > 0,
                  "unpacked_bytes: %s", text);
    ck_assert_msg(is_time(json_at(img, "created_at")), "created_at: %s", text);
    ck_assert_msg(is_time(json_at(img, "last_used_at")), "last_used_at: %s", text);
    ck_assert_msg(is_int(json_at(img, "containers")) &&
                      json_object_get_int64(json_at(img, "containers")) == 0,
                  "containers: %s", text);
}

/* Parses an NDJSON body into its lines (each must be a JSON object); the
 * array is returned (caller puts). */
static json_object *
ndjson_lines(const struct hresp *r)
{
    json_object *arr = json_object_new_array();
    const char *p = r->body;
    while (*p) {
        const char *nl = strchr(p, '\n');
        ck_assert_msg(nl, "NDJSON line without a newline at the end: %s", p);
        json_tokener *tok = json_tokener_new();
        json_object *o = json_tokener_parse_ex(tok, p, (int)(nl - p));
        ck_assert_msg(json_tokener_get_error(tok) == json_tokener_success && o &&
                          json_object_is_type(o, json_type_object),
                      "NDJSON line is not a JSON object: %.*s", (int)(nl - p), p);
        json_tokener_free(tok);
        json_object_array_add(arr, o);
        p = nl + 1;
    }
    return arr;
}

/* How many lines have step and status (status NULL: any). */
static int
count_steps(json_object *lines, const char *step, const char *status)
{
    int n = 0;
    for (size_t i = 0; i < json_object_array_length(lines); i++) {
        json_object *l = json_object_array_get_idx(lines, i);
        json_object *s = json_at(l, "step"), *st = json_at(l, "status");
        if (s && strcmp(json_object_get_string(s), step) == 0 &&
            (!status || (st && json_object_is_type(st, json_type_string) &&
                         strcmp(json_object_get_string(st), status) == 0)))
            n++;
    }
    return n;
}

/* The last line, which must be {"step":"done","status":want,"image":{...}}. */
static json_object *
ndjson_done(json_object *lines, int want_status)
{
    size_t n = json_object_array_length(lines);
    ck_assert_msg(n > 0, "no NDJSON lines");
    json_object *last = json_object_array_get_idx(lines, n - 1);
    const char *text = json_object_to_json_string(last);
    ck_assert_msg(strcmp(json_object_get_string(json_at(last, "step")), "done") == 0,
                  "last line is not step done: %s", text);
    ck_assert_msg(json_object_get_int(json_at(last, "status")) == want_status,
                  "done status, expected %d: %s", want_status, text);
    return json_at(last, "image");
}

static void
copy_tree(const char *from, const char *to)
{
    char cmd[PATH_MAX * 3];
    snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s'", from, to);
    ck_assert_int_eq(system(cmd), 0);
}

static void
start(struct berthd *b)
{
    memset(b, 0, sizeof(*b));
    berthd_start(b, NULL);
}

/* Imports a fixture layout by directory and asserts the status. */
static void
import_ok(struct berthd *b, const char *layout, long status, struct hresp *r)
{
    fx_import_layout(b, NULL, layout, NULL, r);
    ck_assert_msg(r->status == status, "import %s: status %ld, expected %ld: %s", layout, r->status,
                  status, r->body);
}

/* ---- import from a layout directory ------------------------------------------------ */

START_TEST(import_layout_dir_answers_201_with_the_full_image_record)
{
    struct berthd b;
    start(&b);
    char digest[72];
    layout_manifest_digest(fx_path("base"), digest);
    struct hresp r;
    import_ok(&b, fx_path("base"), 201, &r);
    char ct[128];
    ck_assert_ptr_nonnull(hresp_header(&r, "Content-Type", ct, sizeof(ct)));
    ck_assert_msg(strncmp(ct, "application/json", 16) == 0, "Content-Type %s", ct);
    assert_image_record(r.json, digest, 1);
    /* The layout's ref.name "base" is a bare tag (as umoci and skopeo write
     * it), not a repository: without ?name= it is stored under localhost/. */
    ck_assert_msg(has_name(r.json, "localhost/base:latest"),
                  "the layout's bare ref.name is not under localhost/: %s", r.body);
    /* The stored files: the manifest, config and layer blobs, one snapshot. */
    char *content = fx_names(fx_root_path(&b, "content/sha256"));
    ck_assert_msg(strstr(content, digest + 7), "manifest not in content/: %s", content);
    ck_assert_msg(strstr(content, json_object_get_string(json_at(r.json, "config_digest")) + 7),
                  "config not in content/");
    const char *chain = json_object_get_string(
        json_at(json_object_array_get_idx(json_at(r.json, "layers"), 0), "chain_id"));
    char snap[PATH_MAX];
    snprintf(snap, sizeof(snap), "snapshots/%s", chain + 7);
    struct stat st;
    ck_assert_msg(stat(fx_root_path(&b, snap), &st) == 0, "no snapshot %s", snap);
    /* And it is the busybox rootfs. */
    snprintf(snap, sizeof(snap), "snapshots/%s/fs/bin/busybox", chain + 7);
    ck_assert_msg(stat(fx_root_path(&b, snap), &st) == 0 && st.st_size > 100000,
                  "busybox not unpacked at %s", snap);
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "tmp"), NULL), 0);
    free(content);
    hresp_free(&r);
    /* Listed. */
    http_get(&b, "/v1/images", &r);
    ck_assert_int_eq(r.status, 200);
    json_object *imgs = json_at(r.json, "images");
    ck_assert_uint_eq(json_object_array_length(imgs), 1);
    assert_image_record(json_object_array_get_idx(imgs, 0), digest, 1);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(reimport_layout_answers_200_same_record_quickly_without_unpacking)
{
    struct berthd b;
    start(&b);
    struct hresp r1, r2;
    import_ok(&b, fx_path("child"), 201, &r1);
    static const char *const skip[] = {"meta.db", "meta.db-wal", "meta.db-shm", "tmp", NULL};
    char *before = fx_tree(b.root, skip);
    fx_import_layout(&b, NULL, fx_path("child"), "application/x-ndjson", &r2);
    ck_assert_int_eq(r2.status, 200);
    json_object *lines = ndjson_lines(&r2);
    json_object *img = ndjson_done(lines, 200);
    ck_assert_int_eq(count_steps(lines, "layer", "unpacking"), 0);
    ck_assert_int_eq(count_steps(lines, "layer", "unpacked"), 0);
    ck_assert_int_eq(count_steps(lines, "blob", "stored"), 0);
    assert_image_record(img, json_object_get_string(json_at(r1.json, "digest")), 2);
    ck_assert_str_eq(json_object_to_json_string(json_at(img, "layers")),
                     json_object_to_json_string(json_at(r1.json, "layers")));
    ck_assert_str_eq(json_object_get_string(json_at(img, "created_at")),
                     json_object_get_string(json_at(r1.json, "created_at")));
    /* Not one file of the store was written again (same inodes, mtimes). */
    char *after = fx_tree(b.root, skip);
    ck_assert_str_eq(before, after);
    free(after);
    json_object_put(lines);
    hresp_free(&r2);
    /* And without NDJSON: 200, fast (the goal is 20 ms; allow slow CI). */
    fx_import_layout(&b, NULL, fx_path("child"), NULL, &r2);
    ck_assert_int_eq(r2.status, 200);
    assert_image_record(r2.json, json_object_get_string(json_at(r1.json, "digest")), 2);
    ck_assert_msg(r2.total_s < 0.5, "warm re-import took %.3f s", r2.total_s);
    after = fx_tree(b.root, skip);
    ck_assert_str_eq(before, after);
    free(after);
    free(before);
    hresp_free(&r1);
    hresp_free(&r2);
    ck_assert_int_eq(fx_image_count(&b), 1);
    berthd_finish(&b);
}
END_TEST

START_TEST(reimport_layout_reads_no_stored_blob)
{
    /* After the first import, the layout's layer blob is replaced by
     * garbage of the same size: a re-import that read it would fail. */
    struct berthd b;
    start(&b);
    char copy[PATH_MAX + 16];
    snprintf(copy, sizeof(copy), "%s/base", b.tmp);
    copy_tree(fx_path("base"), copy);
    struct hresp r;
    import_ok(&b, copy, 201, &r);
    const char *layer = json_object_get_string(
        json_at(json_object_array_get_idx(json_at(r.json, "layers"), 0), "digest"));
    char path[PATH_MAX];
    fx_blob_path(copy, layer, path, sizeof(path));
    size_t len = 0;
    char *data = fx_read_file(path, &len);
    memset(data, 'z', len);
    fx_write_file(path, data, len);
    free(data);
    hresp_free(&r);
    import_ok(&b, copy, 200, &r);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(import_shares_base_layer_snapshots_between_images)
{
    struct berthd b;
    start(&b);
    struct hresp r1, r2;
    import_ok(&b, fx_path("base"), 201, &r1);
    fx_import_layout(&b, NULL, fx_path("child"), "application/x-ndjson", &r2);
    ck_assert_int_eq(r2.status, 200); /* an NDJSON stream always answers 200 */
    json_object *lines = ndjson_lines(&r2);
    json_object *img = ndjson_done(lines, 201);
    assert_image_record(img, NULL, 2);
    ck_assert_msg(count_steps(lines, "layer", "cached") == 1 &&
                      count_steps(lines, "layer", "unpacked") == 1,
                  "expected one cached and one unpacked layer: %s", r2.body);
    ck_assert_str_eq(json_object_get_string(
                         json_at(json_object_array_get_idx(json_at(img, "layers"), 0), "chain_id")),
                     json_object_get_string(json_at(
                         json_object_array_get_idx(json_at(r1.json, "layers"), 0), "chain_id")));
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "snapshots"), NULL), 2);
    /* The child's whiteout of /etc/passwd lives in its own snapshot; the
     * base snapshot still has the file. */
    const char *base_chain = json_object_get_string(
        json_at(json_object_array_get_idx(json_at(r1.json, "layers"), 0), "chain_id"));
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "snapshots/%s/fs/etc/passwd", base_chain + 7);
    struct stat st;
    ck_assert_msg(stat(fx_root_path(&b, p), &st) == 0, "base snapshot lost /etc/passwd");
    json_object_put(lines);
    hresp_free(&r1);
    hresp_free(&r2);
    ck_assert_int_eq(fx_image_count(&b), 2);
    berthd_finish(&b);
}
END_TEST

/* ---- import by upload ------------------------------------------------------------ */

static void
upload_then_reupload(const char *file)
{
    struct berthd b;
    start(&b);
    char digest[72];
    layout_manifest_digest(fx_path("base"), digest);
    struct hresp r;
    fx_upload_file(&b, NULL, fx_path(file), NULL, &r);
    ck_assert_msg(r.status == 201, "upload %s: %ld %s", file, r.status, r.body);
    assert_image_record(r.json, digest, 1);
    ck_assert(has_name(r.json, "localhost/base:latest"));
    hresp_free(&r);
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "tmp"), NULL), 0);
    static const char *const skip[] = {"meta.db", "meta.db-wal", "meta.db-shm", "tmp", NULL};
    char *before = fx_tree(b.root, skip);
    fx_upload_file(&b, NULL, fx_path(file), "application/x-ndjson", &r);
    ck_assert_int_eq(r.status, 200);
    json_object *lines = ndjson_lines(&r);
    assert_image_record(ndjson_done(lines, 200), digest, 1);
    ck_assert_msg(count_steps(lines, "blob", "stored") == 0 &&
                      count_steps(lines, "layer", "unpacking") == 0,
                  "a stored blob was written or unpacked again: %s", r.body);
    char *after = fx_tree(b.root, skip);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    json_object_put(lines);
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&b), 1);
    berthd_finish(&b);
}

START_TEST(upload_layout_tar_answers_201_then_200)
{
    upload_then_reupload("base.tar");
}
END_TEST

START_TEST(upload_layout_tar_gz_detected_from_bytes)
{
    upload_then_reupload("base.tar.gz");
}
END_TEST

START_TEST(upload_layout_tar_zst_detected_from_bytes)
{
    upload_then_reupload("base.tar.zst");
}
END_TEST

START_TEST(upload_chunked_without_content_length_imports)
{
    struct berthd b;
    start(&b);
    size_t len = 0;
    char *data = fx_read_file(fx_path("base.tar.gz"), &len);
    struct fx_src src = {.data = data, .len = len, .chunk = 7000};
    struct hresp r;
    fx_post(&b, "/v1/images", "application/x-tar", NULL, &src, true, 60000, &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    assert_image_record(r.json, NULL, 1);
    hresp_free(&r);
    free(data);
    berthd_finish(&b);
}
END_TEST

START_TEST(upload_docker_archive_imports_with_its_tag_and_shares_the_snapshot)
{
    struct berthd b;
    start(&b);
    struct hresp r1, r2;
    import_ok(&b, fx_path("base"), 201, &r1);
    fx_upload_file(&b, NULL, fx_path("docker.tar"), NULL, &r2);
    ck_assert_msg(r2.status == 201, "docker archive: %ld %s", r2.status, r2.body);
    assert_image_record(r2.json, NULL, 1);
    ck_assert_msg(has_name(r2.json, "repo/dock:1") || has_name(r2.json, "docker.io/repo/dock:1"),
                  "the archive's RepoTags are not its names: %s", r2.body);
    /* Same rootfs as the layout: same diff_id, same chain, one snapshot. */
    const char *c1 = json_object_get_string(
        json_at(json_object_array_get_idx(json_at(r1.json, "layers"), 0), "chain_id"));
    const char *c2 = json_object_get_string(
        json_at(json_object_array_get_idx(json_at(r2.json, "layers"), 0), "chain_id"));
    ck_assert_str_eq(c1, c2);
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "snapshots"), NULL), 1);
    ck_assert_int_eq(fx_image_count(&b), 2);
    hresp_free(&r1);
    hresp_free(&r2);
    /* Again: 200. */
    fx_upload_file(&b, NULL, fx_path("docker.tar"), NULL, &r2);
    ck_assert_msg(r2.status == 200, "docker archive again: %ld %s", r2.status, r2.body);
    hresp_free(&r2);
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "tmp"), NULL), 0);
    berthd_finish(&b);
}
END_TEST

START_TEST(upload_with_unsupported_content_type_is_415)
{
    struct berthd b;
    start(&b);
    struct fx_src src = {.data = "hello", .len = 5};
    struct hresp r;
    fx_post(&b, "/v1/images", "text/plain", NULL, &src, false, 10000, &r);
    ck_assert_error_reply(&r, 415, "unsupported_media_type", NULL);
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&b), 0);
    berthd_finish(&b);
}
END_TEST

/* curl -d and --data-binary without -H send application/x-www-form-urlencoded:
 * POST /v1/images then reads the body's first byte, as it does with no
 * Content-Type at all: '{' is a JSON source, anything else an image tar.
 * An empty body says what to send. */
START_TEST(form_or_no_content_type_is_sniffed_from_the_first_byte)
{
    struct berthd b;
    start(&b);
    char cmd[PATH_MAX * 4];
    /* JSON with curl -d, as a user types it. */
    snprintf(cmd, sizeof(cmd),
             "curl -s -o %s/body -w '%%{http_code}' -d '  {\"source\": {\"layout\": \"%s\"}}' "
             "'%s/v1/images?name=sniffed:json' | grep -qx 201",
             b.tmp, fx_path("base"), b.base_url);
    ck_assert_msg(system(cmd) == 0, "curl -d JSON: %s", cmd);
    /* A tar with curl --data-binary and no -H. */
    snprintf(cmd, sizeof(cmd),
             "curl -s -o %s/body -w '%%{http_code}' -H 'Expect:' --data-binary @%s "
             "'%s/v1/images?name=sniffed:tar' | grep -qx 201",
             b.tmp, fx_path("docker.tar"), b.base_url);
    ck_assert_msg(system(cmd) == 0, "curl --data-binary tar: %s", cmd);
    struct hresp r;
    http_get(&b, "/v1/images/sniffed:json", &r);
    ck_assert_int_eq(r.status, 200);
    hresp_free(&r);
    http_get(&b, "/v1/images/sniffed:tar", &r);
    ck_assert_int_eq(r.status, 200);
    hresp_free(&r);
    /* Malformed JSON sent so is named as JSON, not as a broken tar. */
    struct fx_src bad = {.data = "{\"source\": ", .len = 11};
    fx_post(&b, "/v1/images", "application/x-www-form-urlencoded", NULL, &bad, false, 10000, &r);
    ck_assert_error_reply(&r, 400, "bad_request", "malformed JSON");
    hresp_free(&r);
    /* Empty, with no Content-Type. */
    http_do(
        &b,
        &(struct hreq){
            .method = "POST", .path = "/v1/images", .body = "", .body_len = 0, .content_type = ""},
        &r);
    ck_assert_error_reply(&r, 400, "bad_request", "the body is empty");
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&b), 2);
    berthd_finish(&b);
}
END_TEST

/* ---- names and lookup ---------------------------------------------------------------- */

START_TEST(name_query_names_the_image_and_get_finds_it_by_name_digest_and_prefix)
{
    struct berthd b;
    start(&b);
    struct hresp r;
    fx_import_layout(&b, "?name=team-app:v2", fx_path("base"), NULL, &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    ck_assert_msg(has_name(r.json, "team-app:v2"), "?name= not applied: %s", r.body);
    char digest[72];
    snprintf(digest, sizeof(digest), "%s", json_object_get_string(json_at(r.json, "digest")));
    hresp_free(&r);

    char path[256];
    const char *refs[] = {"team-app:v2", digest, NULL, NULL};
    char prefix[16];
    snprintf(prefix, sizeof(prefix), "%.12s", digest + 7);
    refs[2] = prefix;
    for (int i = 0; refs[i]; i++) {
        snprintf(path, sizeof(path), "/v1/images/%s", refs[i]);
        http_get(&b, path, &r);
        ck_assert_msg(r.status == 200, "GET %s: %ld %s", path, r.status, r.body);
        assert_image_record(r.json, digest, 1);
        hresp_free(&r);
    }
    /* Fewer than 12 hex digits is not a digest prefix. */
    snprintf(path, sizeof(path), "/v1/images/%.11s", digest + 7);
    http_get(&b, path, &r);
    ck_assert_msg(r.status != 200, "an 11-digit prefix found the image");
    hresp_free(&r);
    /* A second name by re-import: 200 and both names. */
    fx_import_layout(&b, "?name=other:1", fx_path("base"), NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(has_name(r.json, "other:1") && has_name(r.json, "team-app:v2"));
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&b), 1);
    berthd_finish(&b);
}
END_TEST

START_TEST(bad_name_or_platform_query_is_400)
{
    struct berthd b;
    start(&b);
    struct hresp r;
    fx_import_layout(&b, "?name=-bad", fx_path("base"), NULL, &r);
    ck_assert_error_reply(&r, 400, "bad_request", "name");
    hresp_free(&r);
    fx_import_layout(&b, "?platform=nonsense", fx_path("base"), NULL, &r);
    ck_assert_error_reply(&r, 400, "bad_request", "platform");
    hresp_free(&r);
    http_post_json(&b, "/v1/images", "{\"source\":{\"layout\":\"relative/dir\"}}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "absolute");
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&b), 0);
    berthd_finish(&b);
}
END_TEST

START_TEST(get_unknown_image_is_404)
{
    struct berthd b;
    start(&b);
    struct hresp r;
    const char *paths[] = {"/v1/images/nosuch:tag",
                           "/v1/images/sha256:"
                           "0000000000000000000000000000000000000000000000000000000000000000",
                           "/v1/images/0123456789ab", NULL};
    for (int i = 0; paths[i]; i++) {
        http_get(&b, paths[i], &r);
        ck_assert_error_reply(&r, 404, "not_found", NULL);
        hresp_free(&r);
        http_do(&b, &(struct hreq){.method = "DELETE", .path = paths[i]}, &r);
        ck_assert_error_reply(&r, 404, "not_found", NULL);
        hresp_free(&r);
    }
    berthd_finish(&b);
}
END_TEST

START_TEST(get_and_delete_find_an_image_by_a_name_with_slashes)
{
    /* Real names have slashes (docker archives give docker.io/repo/x:1):
     * GET and DELETE must reach them, as /v1/images/a/b:1 or with %2F. */
    struct berthd b;
    start(&b);
    struct hresp r;
    fx_import_layout(&b, "?name=example.org/team/app:v2", fx_path("base"), NULL, &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    ck_assert(has_name(r.json, "example.org/team/app:v2"));
    hresp_free(&r);
    http_get(&b, "/v1/images/example.org/team/app:v2", &r);
    long plain = r.status;
    hresp_free(&r);
    http_get(&b, "/v1/images/example.org%2Fteam%2Fapp:v2", &r);
    long encoded = r.status;
    ck_assert_msg(plain == 200 || encoded == 200,
                  "GET by a name with slashes: %ld as is, %ld with %%2F: %s", plain, encoded,
                  r.body);
    hresp_free(&r);
    http_do(&b,
            &(struct hreq){.method = "DELETE",
                           .path = plain == 200 ? "/v1/images/example.org/team/app:v2"
                                                : "/v1/images/example.org%2Fteam%2Fapp:v2"},
            &r);
    ck_assert_msg(r.status == 200, "DELETE by a name with slashes: %ld %s", r.status, r.body);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

/* ---- delete and prune ------------------------------------------------------------------ */

START_TEST(delete_name_keeps_the_image_delete_digest_removes_it_and_its_files)
{
    struct berthd b;
    start(&b);
    struct hresp r;
    import_ok(&b, fx_path("base"), 201, &r);
    hresp_free(&r);
    fx_import_layout(&b, "?name=keep:1", fx_path("base"), NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(has_name(r.json, "keep:1") && has_name(r.json, "localhost/base:latest"));
    char digest[72];
    snprintf(digest, sizeof(digest), "%s", json_object_get_string(json_at(r.json, "digest")));
    hresp_free(&r);
    ck_assert(fx_count_entries(fx_root_path(&b, "content/sha256"), NULL) >= 3);
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "snapshots"), NULL), 1);

    http_do(&b, &(struct hreq){.method = "DELETE", .path = "/v1/images/keep:1"}, &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    ck_assert(!json_object_get_boolean(json_at(r.json, "image_removed")));
    hresp_free(&r);
    http_get(&b, "/v1/images/keep:1", &r);
    ck_assert_int_eq(r.status, 404);
    hresp_free(&r);
    http_get(&b, "/v1/images/base", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(!has_name(r.json, "keep:1") && has_name(r.json, "localhost/base:latest"));
    hresp_free(&r);
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "snapshots"), NULL), 1);

    char path[128];
    snprintf(path, sizeof(path), "/v1/images/%s", digest);
    http_do(&b, &(struct hreq){.method = "DELETE", .path = path}, &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    ck_assert(json_object_get_boolean(json_at(r.json, "image_removed")));
    ck_assert_msg(json_object_get_int64(json_at(r.json, "freed_bytes")) > 1000000,
                  "freed_bytes: %s", r.body);
    hresp_free(&r);
    http_get(&b, path, &r);
    ck_assert_int_eq(r.status, 404);
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&b), 0);
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "content/sha256"), NULL), 0);
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "snapshots"), NULL), 0);
    /* Importing again works and unpacks again. */
    import_ok(&b, fx_path("base"), 201, &r);
    hresp_free(&r);
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "snapshots"), NULL), 1);
    berthd_finish(&b);
}
END_TEST

START_TEST(prune_with_empty_body_removes_every_unused_image_and_its_files)
{
    struct berthd b;
    start(&b);
    struct hresp r;
    const char *layouts[] = {"base", "child", "other"};
    for (int i = 0; i < 3; i++) {
        import_ok(&b, fx_path(layouts[i]), 201, &r);
        hresp_free(&r);
    }
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "snapshots"), NULL), 3);
    http_post_json(&b, "/v1/images/prune", "{}", &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    json_object *removed = json_at(r.json, "removed");
    ck_assert_msg(removed && json_object_array_length(removed) == 3, "removed: %s", r.body);
    ck_assert_msg(is_int(json_at(r.json, "freed_bytes")) &&
                      json_object_get_int64(json_at(r.json, "freed_bytes")) > 1000000,
                  "freed_bytes: %s", r.body);
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&b), 0);
    char *c = fx_names(fx_root_path(&b, "content/sha256"));
    char *s = fx_names(fx_root_path(&b, "snapshots"));
    ck_assert_msg(!*c, "blobs left in content/: %s", c);
    ck_assert_msg(!*s, "snapshots left: %s", s);
    free(c);
    free(s);
    /* No body at all means the same. */
    http_do(&b, &(struct hreq){.method = "POST", .path = "/v1/images/prune"}, &r);
    ck_assert_msg(r.status == 200, "prune without a body: %ld %s", r.status, r.body);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

/* The files an image owns alone: its snapshot dir names and blob names. */
static void
image_files(json_object *img, char *chain, size_t len, char *layer, size_t llen)
{
    json_object *l = json_object_array_get_idx(json_at(img, "layers"), 0);
    snprintf(chain, len, "%s", json_object_get_string(json_at(l, "chain_id")) + 7);
    snprintf(layer, llen, "%s", json_object_get_string(json_at(l, "digest")) + 7);
}

START_TEST(prune_keep_bytes_removes_least_recently_used_first)
{
    struct berthd b;
    start(&b);
    struct hresp ro, rb;
    import_ok(&b, fx_path("other"), 201, &ro);
    sleep_ms(1100); /* last_used_at has whole seconds */
    import_ok(&b, fx_path("base"), 201, &rb);
    int64_t base_bytes = json_object_get_int64(json_at(rb.json, "size_bytes")) +
                         json_object_get_int64(json_at(rb.json, "unpacked_bytes"));
    char chain_o[80], layer_o[80], chain_b[80], layer_b[80];
    image_files(ro.json, chain_o, sizeof(chain_o), layer_o, sizeof(layer_o));
    image_files(rb.json, chain_b, sizeof(chain_b), layer_b, sizeof(layer_b));
    char body[128];
    snprintf(body, sizeof(body), "{\"keep_bytes\": %lld}", (long long)base_bytes);
    struct hresp r;
    http_post_json(&b, "/v1/images/prune", body, &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    json_object *removed = json_at(r.json, "removed");
    ck_assert_msg(removed && json_object_array_length(removed) == 1 &&
                      strcmp(json_object_get_string(json_object_array_get_idx(removed, 0)),
                             json_object_get_string(json_at(ro.json, "digest"))) == 0,
                  "expected only the older image removed: %s", r.body);
    hresp_free(&r);
    char *c = fx_names(fx_root_path(&b, "content/sha256"));
    char *s = fx_names(fx_root_path(&b, "snapshots"));
    ck_assert_msg(!strstr(c, layer_o) && !strstr(s, chain_o), "the pruned image's files remain");
    ck_assert_msg(strstr(c, layer_b) && strstr(s, chain_b), "the kept image's files are gone");
    free(c);
    free(s);
    ck_assert_int_eq(fx_image_count(&b), 1);
    http_get(&b, "/v1/images/base", &r);
    ck_assert_int_eq(r.status, 200);
    hresp_free(&r);
    hresp_free(&ro);
    hresp_free(&rb);
    berthd_finish(&b);
}
END_TEST

START_TEST(prune_unused_for_s_removes_only_images_unused_that_long)
{
    struct berthd b;
    start(&b);
    struct hresp ro, rb, r;
    import_ok(&b, fx_path("other"), 201, &ro);
    sleep_ms(3200);
    import_ok(&b, fx_path("base"), 201, &rb);
    http_post_json(&b, "/v1/images/prune", "{\"unused_for_s\": 2}", &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    json_object *removed = json_at(r.json, "removed");
    ck_assert_msg(removed && json_object_array_length(removed) == 1 &&
                      strcmp(json_object_get_string(json_object_array_get_idx(removed, 0)),
                             json_object_get_string(json_at(ro.json, "digest"))) == 0,
                  "expected only the old image removed: %s", r.body);
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&b), 1);
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "snapshots"), NULL), 1);
    /* A large window removes nothing. */
    http_post_json(&b, "/v1/images/prune", "{\"unused_for_s\": 3600}", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(json_object_array_length(json_at(r.json, "removed")), 0);
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&b), 1);
    /* Bad bodies. */
    http_post_json(&b, "/v1/images/prune", "{\"unused_for_s\": -1}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "unused_for_s");
    hresp_free(&r);
    http_post_json(&b, "/v1/images/prune", "{\"keep\": 1}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", NULL);
    hresp_free(&r);
    hresp_free(&ro);
    hresp_free(&rb);
    berthd_finish(&b);
}
END_TEST

/* ---- progress ---------------------------------------------------------------------- */

START_TEST(ndjson_progress_lines_parse_and_end_with_done_and_the_record)
{
    struct berthd b;
    start(&b);
    struct hresp r;
    fx_upload_file(&b, NULL, fx_path("base.tar.gz"), "application/x-ndjson", &r);
    ck_assert_int_eq(r.status, 200);
    char ct[128];
    ck_assert_ptr_nonnull(hresp_header(&r, "Content-Type", ct, sizeof(ct)));
    ck_assert_msg(strncmp(ct, "application/x-ndjson", 20) == 0, "Content-Type %s", ct);
    json_object *lines = ndjson_lines(&r);
    ck_assert_msg(json_object_array_length(lines) >= 3, "too few progress lines: %s", r.body);
    for (size_t i = 0; i + 1 < json_object_array_length(lines); i++) {
        json_object *l = json_object_array_get_idx(lines, i);
        ck_assert_msg(json_at(l, "step") &&
                          json_object_is_type(json_at(l, "step"), json_type_string) &&
                          is_int(json_at(l, "done")),
                      "progress line without step/done: %s", json_object_to_json_string(l));
    }
    ck_assert_msg(count_steps(lines, "blob", NULL) >= 3, "no blob lines: %s", r.body);
    ck_assert_msg(count_steps(lines, "layer", "unpacked") == 1, "no layer line: %s", r.body);
    assert_image_record(ndjson_done(lines, 201), NULL, 1);
    json_object_put(lines);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

/* Lines from before the body ended are kept for the stream, not
 * dropped: the upload holds its last bytes back for a while, by which
 * time every blob is stored (the stream opens only once the body is
 * complete; before, those lines were lost and a client saw none). */
START_TEST(ndjson_lines_from_before_the_body_ended_are_all_sent)
{
    struct berthd b;
    start(&b);
    size_t len = 0;
    char *data = fx_read_file(fx_path("base.tar"), &len);
    ck_assert_ptr_nonnull(data);
    /* Held at index.json's header: the blobs (the layer first) are all in. */
    size_t hold = 0;
    for (size_t off = 0; off + 512 <= len && !hold; off += 512)
        if (strcmp(data + off, "./index.json") == 0)
            hold = off;
    ck_assert_uint_gt(hold, 0);
    struct fx_src src = {.data = data, .len = len, .hold_at = hold, .hold_ms = 1500};
    struct hresp r;
    fx_post(&b, "/v1/images", "application/x-tar", "application/x-ndjson", &src, false, 60000, &r);
    ck_assert_int_eq(r.status, 200);
    json_object *lines = ndjson_lines(&r);
    ck_assert_msg(count_steps(lines, "blob", "stored") >= 3, "blob lines lost: %s", r.body);
    ck_assert_msg(count_steps(lines, "layer", "unpacked") == 1, "no layer line: %s", r.body);
    assert_image_record(ndjson_done(lines, 201), NULL, 1);
    json_object_put(lines);
    hresp_free(&r);
    free(data);
    berthd_finish(&b);
}
END_TEST

START_TEST(ndjson_progress_ends_with_an_error_line_on_a_bad_image)
{
    struct berthd b;
    start(&b);
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/bad", b.tmp);
    struct fx_buf layer = {0};
    fx_simple_layer(&layer, "x");
    struct fx_layout s = {.layers = {&layer}, .corrupt_layer = true};
    fx_write_layout(dir, &s);
    struct hresp r;
    fx_import_layout(&b, NULL, dir, "application/x-ndjson", &r);
    ck_assert_int_eq(r.status, 200);
    json_object *lines = ndjson_lines(&r);
    size_t n = json_object_array_length(lines);
    json_object *last = json_object_array_get_idx(lines, n - 1);
    ck_assert_msg(
        strcmp(json_object_get_string(json_at(last, "step")), "error") == 0 &&
            json_object_get_int(json_at(last, "status")) == 422 &&
            strcmp(json_object_get_string(json_at(last, "error.code")), "invalid_content") == 0 &&
            strstr(json_object_get_string(json_at(last, "error.message")), s.layer_digests[0]),
        "last line: %s", json_object_to_json_string(last));
    json_object_put(lines);
    hresp_free(&r);
    free(layer.data);
    ck_assert_int_eq(fx_image_count(&b), 0);
    ck_assert(fx_wait_tmp_empty(&b, 2000));
    berthd_finish(&b);
}
END_TEST

/* ---- concurrency and restart --------------------------------------------------------------- */

START_TEST(four_simultaneous_imports_of_one_layout_give_one_image_and_one_unpack)
{
    struct berthd b;
    start(&b);
    static const char *const hdrs[] = {"Accept: application/x-ndjson", NULL};
    char body[PATH_MAX + 64];
    snprintf(body, sizeof(body), "{\"source\":{\"layout\":\"%s\"}}", fx_path("child"));
    struct bg_req bg[4];
    for (int i = 0; i < 4; i++)
        bg_start(&bg[i], &b,
                 &(struct hreq){.method = "POST",
                                .path = "/v1/images",
                                .body = body,
                                .headers = hdrs,
                                .timeout_ms = 60000});
    int created = 0, present = 0, unpacks = 0;
    const char *digest = NULL;
    for (int i = 0; i < 4; i++) {
        bg_join(&bg[i]);
        ck_assert_msg(bg[i].resp.status == 200, "request %d: %ld %s", i, bg[i].resp.status,
                      bg[i].resp.body);
        json_object *lines = ndjson_lines(&bg[i].resp);
        size_t n = json_object_array_length(lines);
        json_object *last = json_object_array_get_idx(lines, n - 1);
        int st = json_object_get_int(json_at(last, "status"));
        ck_assert_msg(strcmp(json_object_get_string(json_at(last, "step")), "done") == 0,
                      "request %d: %s", i, bg[i].resp.body);
        created += st == 201;
        present += st == 200;
        unpacks += count_steps(lines, "layer", "unpacked");
        const char *d = json_object_get_string(json_at(last, "image.digest"));
        if (!digest)
            digest = strdup(d);
        else
            ck_assert_str_eq(digest, d);
        json_object_put(lines);
    }
    ck_assert_msg(created == 1 && present == 3, "%d created, %d already present", created, present);
    ck_assert_msg(unpacks == 2, "%d layer unpacks for a two-layer image imported 4 times", unpacks);
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "snapshots"), NULL), 2);
    ck_assert_int_eq(fx_image_count(&b), 1);
    for (int i = 0; i < 4; i++)
        hresp_free(&bg[i].resp);
    free((char *)digest);
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "tmp"), NULL), 0);
    berthd_finish(&b);
}
END_TEST

START_TEST(four_simultaneous_uploads_of_one_image_give_one_image)
{
    struct berthd b;
    start(&b);
    size_t len = 0;
    char *data = fx_read_file(fx_path("base.tar.zst"), &len);
    struct hresp r[4];
    pid_t kids[4];
    /* Four client processes, so the uploads really overlap. */
    char out[4][PATH_MAX + 32];
    for (int i = 0; i < 4; i++) {
        snprintf(out[i], sizeof(out[i]), "%s/resp%d", b.tmp, i);
        kids[i] = fork();
        ck_assert(kids[i] >= 0);
        if (kids[i] == 0) {
            struct fx_src src = {.data = data, .len = len, .chunk = 32768};
            fx_post(&b, "/v1/images", "application/x-tar", NULL, &src, false, 60000, &r[i]);
            FILE *f = fopen(out[i], "w");
            fprintf(f, "%ld\n%s", r[i].status, r[i].body);
            fclose(f);
            _exit(0);
        }
    }
    int created = 0, present = 0;
    for (int i = 0; i < 4; i++) {
        int st;
        waitpid(kids[i], &st, 0);
        char *text = fx_read_file(out[i], NULL);
        ck_assert_ptr_nonnull(text);
        long status = strtol(text, NULL, 10);
        created += status == 201;
        present += status == 200;
        ck_assert_msg(status == 200 || status == 201, "upload %d: %s", i, text);
        free(text);
    }
    free(data);
    ck_assert_msg(created == 1 && present == 3, "%d created, %d present", created, present);
    ck_assert_int_eq(fx_image_count(&b), 1);
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "snapshots"), NULL), 1);
    ck_assert(fx_wait_tmp_empty(&b, 2000));
    berthd_finish(&b);
}
END_TEST

/*
 * Uploads and prunes at once: a prune never removes an image an import in
 * flight has committed or found stored but not yet answered with (it used
 * to, between the commit and the read back: the upload was answered
 * `404 image sha256:...: not found`). Four clients upload the docker
 * archive and the layout tar over and over while a fifth prunes in a loop;
 * every upload must answer 200 or 201 with its image.
 */
START_TEST(uploads_racing_prunes_are_each_answered_with_their_image)
{
    enum { CLIENTS = 4, ROUNDS = 30 };
    struct berthd b;
    start(&b);
    char cmd[PATH_MAX * 4];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' || exit 1; rm -f stop; "
             "(while [ ! -e stop ]; do curl -s -o /dev/null -X POST -d '{}' "
             "'%s/v1/images/prune'; done) & prune=$!; "
             "pids=; for c in $(seq 1 %d); do (for i in $(seq 1 %d); do "
             "if [ $(((c + i) %% 2)) = 0 ]; then f='%s'; else f='%s'; fi; "
             "curl -s -o body.$c.$i -w '%%{http_code}\\n' -X POST -H 'Expect:' "
             "-H 'Content-Type: application/x-tar' --data-binary @$f '%s/v1/images' "
             ">> codes.$c; done) & pids=\"$pids $!\"; done; wait $pids; touch stop; wait $prune",
             b.tmp, b.base_url, CLIENTS, ROUNDS, fx_path("docker.tar"), fx_path("base.tar.zst"),
             b.base_url);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && cat codes.* | wc -l | tr -d ' '; cat codes.* | grep -cv '^20[01]$'; "
             "grep -h error body.* | head -3",
             b.tmp);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char out[4096] = "";
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    pclose(p);
    int total = 0, bad = -1;
    ck_assert_int_eq(sscanf(out, "%d %d", &total, &bad), 2);
    ck_assert_msg(total == CLIENTS * ROUNDS, "%d answers of %d: %s", total, CLIENTS * ROUNDS, out);
    ck_assert_msg(bad == 0, "%d of %d uploads failed while prunes ran: %s", bad, total, out);
    berthd_finish(&b);
}
END_TEST

START_TEST(stored_images_survive_a_restart)
{
    struct berthd b;
    start(&b);
    struct hresp r1, r2;
    fx_import_layout(&b, "?name=survivor:1", fx_path("child"), NULL, &r1);
    ck_assert_int_eq(r1.status, 201);
    ck_assert_int_eq(berthd_term(&b, 10000), 0);
    berthd_start(&b, NULL); /* same tmp, same root */
    http_get(&b, "/v1/images/survivor:1", &r2);
    ck_assert_msg(r2.status == 200, "after restart: %ld %s", r2.status, r2.body);
    ck_assert_str_eq(json_object_to_json_string(json_at(r2.json, "layers")),
                     json_object_to_json_string(json_at(r1.json, "layers")));
    ck_assert_str_eq(json_object_get_string(json_at(r2.json, "digest")),
                     json_object_get_string(json_at(r1.json, "digest")));
    hresp_free(&r2);
    ck_assert_int_eq(fx_image_count(&b), 1);
    /* The re-import after a restart is still a no-op. */
    fx_import_layout(&b, NULL, fx_path("child"), NULL, &r2);
    ck_assert_int_eq(r2.status, 200);
    hresp_free(&r2);
    hresp_free(&r1);
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "snapshots"), NULL), 2);
    berthd_finish(&b);
}
END_TEST

static Suite *
images_suite(void)
{
    Suite *s = suite_create("api_images");
    TCase *tc = tcase_create("images");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, import_layout_dir_answers_201_with_the_full_image_record);
    tcase_add_test(tc, reimport_layout_answers_200_same_record_quickly_without_unpacking);
    tcase_add_test(tc, reimport_layout_reads_no_stored_blob);
    tcase_add_test(tc, import_shares_base_layer_snapshots_between_images);
    tcase_add_test(tc, upload_layout_tar_answers_201_then_200);
    tcase_add_test(tc, upload_layout_tar_gz_detected_from_bytes);
    tcase_add_test(tc, upload_layout_tar_zst_detected_from_bytes);
    tcase_add_test(tc, upload_chunked_without_content_length_imports);
    tcase_add_test(tc, upload_docker_archive_imports_with_its_tag_and_shares_the_snapshot);
    tcase_add_test(tc, upload_with_unsupported_content_type_is_415);
    tcase_add_test(tc, form_or_no_content_type_is_sniffed_from_the_first_byte);
    tcase_add_test(tc, name_query_names_the_image_and_get_finds_it_by_name_digest_and_prefix);
    tcase_add_test(tc, get_and_delete_find_an_image_by_a_name_with_slashes);
    tcase_add_test(tc, bad_name_or_platform_query_is_400);
    tcase_add_test(tc, get_unknown_image_is_404);
    tcase_add_test(tc, delete_name_keeps_the_image_delete_digest_removes_it_and_its_files);
    tcase_add_test(tc, prune_with_empty_body_removes_every_unused_image_and_its_files);
    tcase_add_test(tc, prune_keep_bytes_removes_least_recently_used_first);
    tcase_add_test(tc, prune_unused_for_s_removes_only_images_unused_that_long);
    tcase_add_test(tc, ndjson_progress_lines_parse_and_end_with_done_and_the_record);
    tcase_add_test(tc, ndjson_lines_from_before_the_body_ended_are_all_sent);
    tcase_add_test(tc, ndjson_progress_ends_with_an_error_line_on_a_bad_image);
    tcase_add_test(tc, four_simultaneous_imports_of_one_layout_give_one_image_and_one_unpack);
    tcase_add_test(tc, four_simultaneous_uploads_of_one_image_give_one_image);
    tcase_add_test(tc, stored_images_survive_a_restart);
    suite_add_tcase(s, tc);
    TCase *race = tcase_create("prune_race");
    tcase_set_timeout(race, 300);
    tcase_add_test(race, uploads_racing_prunes_are_each_answered_with_their_image);
    suite_add_tcase(s, race);
    return s;
}

int
main(void)
{
    if (!fx_build(false)) {
        fx_cleanup();
        return 1;
    }
    int rc = harness_run_suite(images_suite());
    fx_cleanup();
    return rc;
}
