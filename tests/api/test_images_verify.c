/*
 * /v1/images refusing bad images: every verification case (digest, size,
 * missing blob, digest syntax, malformed and oversized documents, media
 * types, diff_ids, platforms), secure extraction (paths and links that
 * leave the snapshot), a layout index naming a path outside blobs/, and
 * truncated and garbage uploads. Each refusal must be 422 (400 for a body
 * that is not a tar at all may also do) with a message naming the blob,
 * and leave nothing: no image listed, <root>/tmp empty, no new file in
 * content/ or snapshots/, and nothing written outside the store (a
 * sentinel directory next to the layout, and the whole test directory,
 * unchanged).
 */
#include <ctype.h>
#include <sys/xattr.h>

#include "tests/fixtures/imgfix.h"

/* Markers for refuse_layout: the message must name the config or the
 * manifest, whose digests are only known once the layout is written. */
static const char NAME_CONFIG[] = "<config>";
static const char NAME_MANIFEST[] = "<manifest>";

/* The state a refused import must leave as it found. */
struct before {
    int images;
    char *content, *snapshots, *outside;
};

static const char *const outside_skip[] = {"root", "berthd.log", NULL};

static void
sentinel_make(const struct berthd *b)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/sentinel", b->tmp);
    fx_mkdirs(p);
    snprintf(p, sizeof(p), "%s/sentinel/victim", b->tmp);
    fx_write_file(p, "original\n", 9);
}

static void
take_before(const struct berthd *b, struct before *s)
{
    s->images = fx_image_count(b);
    s->content = fx_names(fx_root_path(b, "content/sha256"));
    s->snapshots = fx_names(fx_root_path(b, "snapshots"));
    s->outside = fx_tree(b->tmp, outside_skip);
}

static void
assert_nothing_left(struct berthd *b, struct before *s)
{
    ck_assert_msg(berthd_alive(b), "berthd died");
    ck_assert_int_eq(fx_image_count(b), s->images);
    ck_assert_msg(fx_wait_tmp_empty(b, 3000), "<root>/tmp is not empty: %s",
                  fx_names(fx_root_path(b, "tmp")));
    char *c = fx_names(fx_root_path(b, "content/sha256"));
    char *sn = fx_names(fx_root_path(b, "snapshots"));
    char *out = fx_tree(b->tmp, outside_skip);
    ck_assert_msg(strcmp(c, s->content) == 0, "content/ changed:\n%s\nwas:\n%s", c, s->content);
    ck_assert_msg(strcmp(sn, s->snapshots) == 0, "snapshots/ changed:\n%s\nwas:\n%s", sn,
                  s->snapshots);
    ck_assert_msg(strcmp(out, s->outside) == 0, "written outside the store:\n%s\nwas:\n%s", out,
                  s->outside);
    char victim[PATH_MAX + 32];
    snprintf(victim, sizeof(victim), "%s/sentinel/victim", b->tmp);
    char *v = fx_read_file(victim, NULL);
    ck_assert_msg(v && strcmp(v, "original\n") == 0, "the sentinel file changed: %s", v);
    struct stat st;
    ck_assert_msg(stat("/etc/berth-test-escape", &st) < 0, "/etc/berth-test-escape was written");
    free(v);
    free(c);
    free(sn);
    free(out);
    free(s->content);
    free(s->snapshots);
    free(s->outside);
}

/* A 422 with an {"error"} body whose message contains substr. */
static void
assert_refused(const struct hresp *r, const char *substr)
{
    const char *code = json_object_get_string(json_at(r->json, "error.code"));
    const char *msg = json_object_get_string(json_at(r->json, "error.message"));
    ck_assert_msg(r->status == 422, "status %ld, expected 422: %s", r->status, r->body);
    ck_assert_msg(code &&
                      (strcmp(code, "invalid_content") == 0 || strcmp(code, "not_supported") == 0),
                  "error code: %s", r->body);
    ck_assert_msg(msg && (!substr || strstr(msg, substr)), "message does not name \"%s\": %s",
                  substr ? substr : "", r->body);
}

/* Starts berthd with the base image stored (so content/ and snapshots/
 * are not empty) and a sentinel next to the layouts. */
static void
start_with_base(struct berthd *b)
{
    memset(b, 0, sizeof(*b));
    berthd_start(b, NULL);
    struct hresp r;
    fx_import_layout(b, NULL, fx_path("base"), NULL, &r);
    ck_assert_msg(r.status == 201, "base import: %ld %s", r.status, r.body);
    hresp_free(&r);
    sentinel_make(b);
}

/*
 * Writes the layout s to <tmp>/L, imports it from the directory and as an
 * upload of its tar, and checks both are refused naming substr (NULL:
 * the first layer's digest) and leave nothing. The tar is written into
 * the test directory before the state is taken.
 */
static void
refuse_layout(struct fx_layout *s, const char *substr, const char *upload_substr)
{
    struct berthd b;
    start_with_base(&b);
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/L", b.tmp);
    fx_write_layout(dir, s);
    struct fx_buf tar = {0};
    fx_tar_dir(&tar, dir);
    if (!substr)
        substr = s->layer_digests[0];
    else if (substr == NAME_CONFIG)
        substr = s->config_digest;
    else if (substr == NAME_MANIFEST)
        substr = s->manifest_digest;
    struct before st;
    take_before(&b, &st);
    struct hresp r;
    fx_import_layout(&b, NULL, dir, NULL, &r);
    assert_refused(&r, substr);
    hresp_free(&r);
    assert_nothing_left(&b, &st);

    take_before(&b, &st);
    struct fx_src src = {.data = tar.data, .len = tar.len};
    fx_post(&b, "/v1/images", "application/x-tar", NULL, &src, false, 30000, &r);
    assert_refused(&r, upload_substr ? upload_substr : substr);
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    free(tar.data);
    berthd_finish(&b);
}

static struct fx_buf simple;

static void
setup_simple(void)
{
    memset(&simple, 0, sizeof(simple));
    fx_simple_layer(&simple, "motd\n");
}

static void
teardown_simple(void)
{
    free(simple.data);
}

/* ---- blobs ------------------------------------------------------------------------ */

START_TEST(layer_digest_mismatch_is_422_naming_the_blob)
{
    struct fx_layout s = {.layers = {&simple}, .corrupt_layer = true};
    refuse_layout(&s, NULL, NULL);
}
END_TEST

START_TEST(config_digest_mismatch_is_422_naming_the_blob)
{
    struct fx_layout s = {.layers = {&simple}, .corrupt_config = true};
    refuse_layout(&s, NAME_CONFIG, NULL);
}
END_TEST

START_TEST(layer_size_larger_than_declared_is_422)
{
    struct fx_layout s = {.layers = {&simple}, .layer_size_delta = -1};
    refuse_layout(&s, NULL, NULL);
}
END_TEST

START_TEST(layer_size_smaller_than_declared_is_422)
{
    struct fx_layout s = {.layers = {&simple}, .layer_size_delta = 1};
    refuse_layout(&s, NULL, NULL);
}
END_TEST

START_TEST(missing_layer_blob_is_422_naming_the_blob)
{
    struct fx_layout s = {.layers = {&simple}, .omit_layer = true};
    refuse_layout(&s, NULL, NULL);
}
END_TEST

START_TEST(uppercase_hex_digest_is_422)
{
    struct fx_layout probe = {.layers = {&simple}};
    char tmp[PATH_MAX];
    harness_mkdtemp(tmp, sizeof(tmp));
    fx_write_layout(tmp, &probe);
    fx_remove_tree(tmp);
    char upper[72];
    snprintf(upper, sizeof(upper), "%s", probe.layer_digests[0]);
    for (char *p = upper + 7; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    struct fx_layout s = {.layers = {&simple}, .layer_digest = upper};
    refuse_layout(&s, upper + 7 + 0, NULL);
}
END_TEST

START_TEST(malformed_digests_are_422)
{
    static const char *const bad[] = {
        "sha256:abc",
        "sha512:0000000000000000000000000000000000000000000000000000000000000000",
        "sha256:000000000000000000000000000000000000000000000000000000000000000g",
        "sha256:0000000000000000000000000000000000000000000000000000000000000000/../x",
        "0000000000000000000000000000000000000000000000000000000000000000",
        NULL};
    for (int i = 0; bad[i]; i++) {
        struct fx_layout s = {.layers = {&simple}, .layer_digest = bad[i]};
        refuse_layout(&s, bad[i], NULL);
    }
}
END_TEST

/* ---- documents ----------------------------------------------------------------- */

START_TEST(malformed_manifest_json_is_422_naming_the_manifest)
{
    struct fx_layout s = {.layers = {&simple},
                          .manifest_raw = "{\"schemaVersion\":2,\"config\":{\"digest\": [}"};
    struct berthd b;
    start_with_base(&b);
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/L", b.tmp);
    fx_write_layout(dir, &s);
    struct before st;
    take_before(&b, &st);
    struct hresp r;
    fx_import_layout(&b, NULL, dir, NULL, &r);
    assert_refused(&r, s.manifest_digest);
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    berthd_finish(&b);
}
END_TEST

START_TEST(manifest_declared_over_4mib_is_422_before_reading_it)
{
    struct fx_layout s = {.layers = {&simple}, .manifest_size = 5 << 20};
    struct berthd b;
    start_with_base(&b);
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/L", b.tmp);
    fx_write_layout(dir, &s);
    struct before st;
    take_before(&b, &st);
    struct hresp r;
    fx_import_layout(&b, NULL, dir, NULL, &r);
    assert_refused(&r, s.manifest_digest);
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    berthd_finish(&b);
}
END_TEST

START_TEST(config_declared_over_4mib_is_422)
{
    struct fx_layout s = {.layers = {&simple}, .config_size = 5 << 20};
    struct berthd b;
    start_with_base(&b);
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/L", b.tmp);
    fx_write_layout(dir, &s);
    struct before st;
    take_before(&b, &st);
    struct hresp r;
    fx_import_layout(&b, NULL, dir, NULL, &r);
    assert_refused(&r, s.config_digest);
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    berthd_finish(&b);
}
END_TEST

START_TEST(config_really_over_4mib_is_422)
{
    struct fx_layout s = {.layers = {&simple}, .config_pad = 5 << 20};
    struct berthd b;
    start_with_base(&b);
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/L", b.tmp);
    fx_write_layout(dir, &s);
    struct before st;
    take_before(&b, &st);
    struct hresp r;
    fx_import_layout(&b, NULL, dir, NULL, &r);
    assert_refused(&r, s.config_digest);
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    berthd_finish(&b);
}
END_TEST

START_TEST(unknown_layer_media_type_is_422)
{
    struct fx_layout s = {.layers = {&simple},
                          .layer_media_type = "application/vnd.example.layer.v1.tar+lz4"};
    /* The manifest is the blob at fault; its message names the type. */
    refuse_layout(&s, NAME_MANIFEST, NULL);
}
END_TEST

START_TEST(diff_id_mismatch_is_422)
{
    struct fx_layout s = {
        .layers = {&simple},
        .diff_id = "sha256:1111111111111111111111111111111111111111111111111111111111111111"};
    refuse_layout(&s, NULL, NULL);
}
END_TEST

START_TEST(index_naming_a_path_outside_blobs_is_422)
{
    static const char *const bad[] = {"sha256:../../etc/passwd", "sha256:../../../sentinel/victim",
                                      NULL};
    for (int i = 0; bad[i]; i++) {
        struct fx_layout s = {.layers = {&simple}, .index_digest = bad[i]};
        struct berthd b;
        start_with_base(&b);
        char dir[PATH_MAX + 16];
        snprintf(dir, sizeof(dir), "%s/L", b.tmp);
        fx_write_layout(dir, &s);
        struct before st;
        take_before(&b, &st);
        struct hresp r;
        fx_import_layout(&b, NULL, dir, NULL, &r);
        assert_refused(&r, bad[i]);
        hresp_free(&r);
        assert_nothing_left(&b, &st);
        berthd_finish(&b);
    }
}
END_TEST

/* ---- platform ---------------------------------------------------------------------- */

START_TEST(arm64_image_is_422_before_unpacking)
{
    struct fx_layout s = {.layers = {&simple}, .arch = "arm64"};
    refuse_layout(&s, "arm64", NULL);
}
END_TEST

START_TEST(windows_image_is_422_before_unpacking)
{
    struct fx_layout s = {.layers = {&simple}, .os = "windows", .os_version = "10.0.17763.1457"};
    refuse_layout(&s, "windows", NULL);
}
END_TEST

START_TEST(platform_query_arm64_on_an_amd64_image_is_422)
{
    struct berthd b;
    memset(&b, 0, sizeof(b));
    berthd_start(&b, NULL);
    sentinel_make(&b);
    struct before st;
    take_before(&b, &st);
    struct hresp r;
    fx_import_layout(&b, "?platform=linux/arm64", fx_path("base"), NULL, &r);
    assert_refused(&r, "arm64");
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    take_before(&b, &st);
    fx_upload_file(&b, "?platform=linux/arm64", fx_path("base.tar.gz"), NULL, &r);
    assert_refused(&r, "arm64");
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    berthd_finish(&b);
}
END_TEST

/* ---- secure extraction --------------------------------------------------------------- */

/* The sentinel directory's absolute path, known before the daemon starts
 * only through the test directory: layers are written after start. */
static char sentinel_abs[PATH_MAX];

static void
refuse_escape(void (*build)(struct fx_buf *l1, struct fx_buf *l2))
{
    struct berthd b;
    start_with_base(&b);
    snprintf(sentinel_abs, sizeof(sentinel_abs), "%s/sentinel", b.tmp);
    struct fx_buf l1 = {0}, l2 = {0};
    build(&l1, &l2);
    struct fx_layout s = {.layers = {&l1, l2.len ? &l2 : NULL}};
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/L", b.tmp);
    fx_write_layout(dir, &s);
    struct fx_buf tar = {0};
    fx_tar_dir(&tar, dir);
    struct before st;
    take_before(&b, &st);
    struct hresp r;
    fx_import_layout(&b, NULL, dir, NULL, &r);
    assert_refused(&r, NULL);
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    take_before(&b, &st);
    struct fx_src src = {.data = tar.data, .len = tar.len};
    fx_post(&b, "/v1/images", "application/x-tar", NULL, &src, false, 30000, &r);
    assert_refused(&r, NULL);
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    free(tar.data);
    free(l1.data);
    free(l2.data);
    berthd_finish(&b);
}

static void
build_dotdot(struct fx_buf *l1, struct fx_buf *l2)
{
    (void)l2;
    fx_tar_file(l1, "ok", "fine\n");
    fx_tar_file(l1, "../x", "escaped\n");
    fx_tar_end(l1);
}

static void
build_deep_dotdot(struct fx_buf *l1, struct fx_buf *l2)
{
    (void)l2;
    fx_tar_file(l1, "a/../../../../../../../../../../../../sentinel/victim", "pwned\n");
    fx_tar_end(l1);
}

static void
build_absolute(struct fx_buf *l1, struct fx_buf *l2)
{
    (void)l2;
    char p[PATH_MAX + 16];
    snprintf(p, sizeof(p), "%s/victim", sentinel_abs);
    fx_tar_file(l1, p, "pwned\n");
    fx_tar_file(l1, "/etc/berth-test-escape", "pwned\n");
    fx_tar_end(l1);
}

static void
build_symlink_then_through(struct fx_buf *l1, struct fx_buf *l2)
{
    (void)l2;
    fx_tar_add(l1, "a", '2', sentinel_abs, NULL, 0, 0777);
    fx_tar_file(l1, "a/x", "pwned\n");
    fx_tar_end(l1);
}

static void
build_relative_symlink_then_through(struct fx_buf *l1, struct fx_buf *l2)
{
    (void)l2;
    fx_tar_add(l1, "a", '2', "../../../../../../../../../../../../../..", NULL, 0, 0777);
    char p[PATH_MAX + 16];
    snprintf(p, sizeof(p), "a%s/victim", sentinel_abs);
    fx_tar_file(l1, p, "pwned\n");
    fx_tar_end(l1);
}

static void
build_symlink_in_earlier_layer(struct fx_buf *l1, struct fx_buf *l2)
{
    fx_tar_add(l1, "a", '2', sentinel_abs, NULL, 0, 0777);
    fx_tar_end(l1);
    fx_tar_file(l2, "a/victim", "pwned\n");
    fx_tar_end(l2);
}

static void
build_hardlink_outside(struct fx_buf *l1, struct fx_buf *l2)
{
    (void)l2;
    fx_tar_add(l1, "h", '1', "../../x", NULL, 0, 0644);
    fx_tar_end(l1);
}

static void
build_hardlink_absolute_then_write(struct fx_buf *l1, struct fx_buf *l2)
{
    (void)l2;
    char p[PATH_MAX + 16];
    snprintf(p, sizeof(p), "%s/victim", sentinel_abs);
    fx_tar_add(l1, "h", '1', p, NULL, 0, 0644);
    fx_tar_file(l1, "h", "pwned\n");
    fx_tar_end(l1);
}

static void
build_hardlink_through_symlink(struct fx_buf *l1, struct fx_buf *l2)
{
    (void)l2;
    fx_tar_add(l1, "s", '2', sentinel_abs, NULL, 0, 0777);
    fx_tar_add(l1, "h", '1', "s/victim", NULL, 0, 0644);
    fx_tar_end(l1);
}

START_TEST(layer_entry_with_dotdot_is_422)
{
    refuse_escape(build_dotdot);
}
END_TEST

START_TEST(layer_entry_climbing_out_through_a_directory_is_422)
{
    refuse_escape(build_deep_dotdot);
}
END_TEST

START_TEST(layer_entry_with_absolute_path_is_422)
{
    refuse_escape(build_absolute);
}
END_TEST

START_TEST(layer_entry_through_an_absolute_symlink_is_422)
{
    refuse_escape(build_symlink_then_through);
}
END_TEST

START_TEST(layer_entry_through_a_relative_symlink_climbing_out_is_422)
{
    refuse_escape(build_relative_symlink_then_through);
}
END_TEST

START_TEST(layer_entry_through_a_symlink_of_an_earlier_layer_is_422)
{
    refuse_escape(build_symlink_in_earlier_layer);
}
END_TEST

START_TEST(snapshot_left_by_a_refused_import_is_collected)
{
    /* Layer 1 (a symlink) is fine and unpacked; layer 2 is refused. If
     * layer 1's snapshot stays, garbage collection must at least take it. */
    struct berthd b;
    start_with_base(&b);
    snprintf(sentinel_abs, sizeof(sentinel_abs), "%s/sentinel", b.tmp);
    struct fx_buf l1 = {0}, l2 = {0};
    build_symlink_in_earlier_layer(&l1, &l2);
    struct fx_layout s = {.layers = {&l1, &l2}};
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/L", b.tmp);
    fx_write_layout(dir, &s);
    char *before = fx_names(fx_root_path(&b, "snapshots"));
    struct hresp r;
    fx_import_layout(&b, NULL, dir, NULL, &r);
    assert_refused(&r, NULL);
    hresp_free(&r);
    http_post_json(&b, "/v1/images/prune", "{\"keep_bytes\": 1000000000000}", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(json_object_array_length(json_at(r.json, "removed")), 0);
    hresp_free(&r);
    char *after = fx_names(fx_root_path(&b, "snapshots"));
    ck_assert_msg(strcmp(before, after) == 0, "snapshots after gc:\n%s\nbefore the import:\n%s",
                  after, before);
    free(before);
    free(after);
    free(l1.data);
    free(l2.data);
    ck_assert_int_eq(fx_image_count(&b), 1);
    berthd_finish(&b);
}
END_TEST

START_TEST(hard_link_to_a_target_outside_is_422)
{
    refuse_escape(build_hardlink_outside);
}
END_TEST

START_TEST(hard_link_to_an_absolute_path_then_overwritten_is_422)
{
    refuse_escape(build_hardlink_absolute_then_write);
}
END_TEST

START_TEST(hard_link_through_a_symlink_is_422)
{
    refuse_escape(build_hardlink_through_symlink);
}
END_TEST

/* ---- long paths, odd whiteouts, long names (issue 8) ----------------------------------- */

/* The daemon's start-up directory, fresh and empty for each test that
 * checks nothing lands there. */
static char startdir[PATH_MAX];

static void
start_in_fresh_dir(struct berthd *b)
{
    memset(b, 0, sizeof(*b));
    harness_mkdtemp(startdir, sizeof(startdir));
    struct berthd_opts o = {.cwd = startdir};
    berthd_start(b, &o);
}

static void
end_in_fresh_dir(struct berthd *b)
{
    berthd_finish(b);
    rmdir(startdir);
}

/* The daemon's working directory now (caller frees). */
static char *
daemon_cwd(const struct berthd *b)
{
    char link[64], *out = calloc(1, PATH_MAX + 1);
    snprintf(link, sizeof(link), "/proc/%d/cwd", (int)b->pid);
    ck_assert_int_gt(readlink(link, out, PATH_MAX), 0);
    return out;
}

/* The working directory is still the start-up directory, and nothing
 * was written there. */
static void
assert_cwd_untouched(const struct berthd *b)
{
    char *cwd = daemon_cwd(b);
    ck_assert_msg(strcmp(cwd, startdir) == 0, "berthd's cwd moved to %s", cwd);
    free(cwd);
    ck_assert_msg(fx_count_entries(startdir, NULL) == 0, "written into the start-up directory: %s",
                  fx_names(startdir));
}

/* Every stored snapshot's tree, one listing (caller frees). */
static char *
snapshot_trees(const struct berthd *b)
{
    char *names = fx_names(fx_root_path(b, "snapshots"));
    struct fx_buf out = {0};
    fx_buf_add(&out, "", 0);
    for (char *save = NULL, *n = strtok_r(names, "\n", &save); n; n = strtok_r(NULL, "\n", &save)) {
        char dir[PATH_MAX + 128];
        snprintf(dir, sizeof(dir), "%s/snapshots/%s", b->root, n);
        char *t = fx_tree(dir, NULL);
        fx_buf_add(&out, n, strlen(n));
        fx_buf_add(&out, ":\n", 2);
        fx_buf_add(&out, t, strlen(t));
        free(t);
    }
    free(names);
    return out.data;
}

/* A layer: "<c>-marker", then n files whose names are len bytes long,
 * under directories of 200 times c. */
static void
build_deep_layer(struct fx_buf *l, char c, size_t len, int n)
{
    char marker[16];
    snprintf(marker, sizeof(marker), "%c-marker", c);
    fx_tar_file(l, marker, "marker\n");
    for (int i = 0; i < n; i++) {
        char leaf[32];
        snprintf(leaf, sizeof(leaf), "%c-%03d", c, i);
        char *name = fx_deep_name(c, len, leaf);
        fx_tar_add_long(l, name, '0', NULL, "deep\n", 5, 0644);
        free(name);
    }
    fx_tar_end(l);
}

START_TEST(layer_entry_reaching_path_max_is_422_and_moves_no_cwd)
{
    struct berthd b;
    start_in_fresh_dir(&b);
    struct hresp r;
    fx_import_layout(&b, NULL, fx_path("base"), NULL, &r);
    ck_assert_msg(r.status == 201, "base import: %ld %s", r.status, r.body);
    hresp_free(&r);
    sentinel_make(&b);
    char *trees = snapshot_trees(&b);
    /* 4,049 bytes under a snapshot directory reach PATH_MAX: libarchive
     * used to chdir() the daemon down the tree to write them. */
    struct fx_buf l1 = {0};
    build_deep_layer(&l1, 'p', 4049, 20);
    struct fx_layout s = {.layers = {&l1}};
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/L", b.tmp);
    fx_write_layout(dir, &s);
    struct fx_buf tar = {0};
    fx_tar_dir(&tar, dir);
    struct before st;
    take_before(&b, &st);
    fx_import_layout(&b, NULL, dir, NULL, &r);
    assert_refused(&r, "PATH_MAX");
    ck_assert_msg(strstr(json_object_get_string(json_at(r.json, "error.message")), "pppp"),
                  "the message does not name the entry: %s", r.body);
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    take_before(&b, &st);
    struct fx_src src = {.data = tar.data, .len = tar.len};
    fx_post(&b, "/v1/images", "application/x-tar", NULL, &src, false, 30000, &r);
    assert_refused(&r, "PATH_MAX");
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    assert_cwd_untouched(&b);
    char *after = snapshot_trees(&b);
    ck_assert_msg(strcmp(trees, after) == 0, "the stored snapshot changed:\n%s\nwas:\n%s", after,
                  trees);
    free(after);
    free(trees);
    free(tar.data);
    free(l1.data);
    end_in_fresh_dir(&b);
}
END_TEST

/* Imports the layouts at dirs[0] and dirs[1] at the same time. */
static void
import_two_at_once(struct berthd *b, char dirs[2][PATH_MAX + 16], struct hresp out[2])
{
    struct bg_req bg[2];
    char *bodies[2];
    for (int i = 0; i < 2; i++) {
        ck_assert(asprintf(&bodies[i], "{\"source\":{\"layout\":\"%s\"}}", dirs[i]) > 0);
        bg_start(
            &bg[i], b,
            &(struct hreq){
                .method = "POST", .path = "/v1/images", .body = bodies[i], .timeout_ms = 60000});
    }
    for (int i = 0; i < 2; i++) {
        bg_join(&bg[i]);
        out[i] = bg[i].resp;
        free(bodies[i]);
    }
}

START_TEST(concurrent_imports_with_deep_names_write_only_their_own_snapshots)
{
    struct berthd b;
    start_in_fresh_dir(&b);
    sentinel_make(&b);
    const char letters[2] = {'a', 'b'};
    /* Past PATH_MAX under the snapshot: both refused, neither wrote. */
    struct fx_buf l[2] = {{0}};
    char dirs[2][PATH_MAX + 16];
    for (int i = 0; i < 2; i++) {
        build_deep_layer(&l[i], letters[i], 4049, 30);
        struct fx_layout s = {.layers = {&l[i]}, .ref_name = i ? "b" : "a"};
        snprintf(dirs[i], sizeof(dirs[i]), "%s/L%c", b.tmp, letters[i]);
        fx_write_layout(dirs[i], &s);
        free(l[i].data);
        l[i] = (struct fx_buf){0};
    }
    struct before st;
    take_before(&b, &st);
    struct hresp r[2];
    import_two_at_once(&b, dirs, r);
    for (int i = 0; i < 2; i++) {
        assert_refused(&r[i], "PATH_MAX");
        hresp_free(&r[i]);
    }
    assert_nothing_left(&b, &st);
    assert_cwd_untouched(&b);

    /* Deep, but inside PATH_MAX: both stored, each with its own files. */
    size_t len = PATH_MAX - strlen(b.root) - 200;
    for (int i = 0; i < 2; i++) {
        build_deep_layer(&l[i], letters[i], len, 30);
        struct fx_layout s = {.layers = {&l[i]}, .ref_name = i ? "b" : "a"};
        snprintf(dirs[i], sizeof(dirs[i]), "%s/M%c", b.tmp, letters[i]);
        fx_write_layout(dirs[i], &s);
        free(l[i].data);
    }
    import_two_at_once(&b, dirs, r);
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(r[i].status == 201, "import %c: %ld %s", letters[i], r[i].status, r[i].body);
        hresp_free(&r[i]);
    }
    char *names = fx_names(fx_root_path(&b, "snapshots"));
    int seen = 0;
    for (char *save = NULL, *n = strtok_r(names, "\n", &save); n; n = strtok_r(NULL, "\n", &save)) {
        char dir[PATH_MAX + 128];
        snprintf(dir, sizeof(dir), "%s/snapshots/%s/fs", b.root, n);
        char *t = fx_tree(dir, NULL);
        bool a = strstr(t, "a-marker") != NULL, bb = strstr(t, "b-marker") != NULL;
        ck_assert_msg(a != bb, "snapshot %s holds %s markers:\n%.2000s", n, a ? "both" : "no", t);
        char own = a ? 'a' : 'b', other = a ? 'b' : 'a';
        char pat[16];
        snprintf(pat, sizeof(pat), "/%c-0", other);
        ck_assert_msg(!strstr(t, pat), "snapshot of %c holds files of %c", own, other);
        int files = 0;
        snprintf(pat, sizeof(pat), "/%c-0", own);
        for (const char *p = t; (p = strstr(p, pat)); p++)
            files++;
        ck_assert_msg(files == 30, "snapshot of %c holds %d of its 30 deep files", own, files);
        seen |= a ? 1 : 2;
        free(t);
    }
    ck_assert_int_eq(seen, 3);
    free(names);
    assert_cwd_untouched(&b);
    end_in_fresh_dir(&b);
}
END_TEST

static void
build_whiteout_dotdot(struct fx_buf *l1, struct fx_buf *l2)
{
    (void)l2;
    fx_tar_file(l1, "ok", "fine\n");
    fx_tar_file(l1, ".wh...", "");
    fx_tar_end(l1);
}

static void
build_whiteout_dotdot_below(struct fx_buf *l1, struct fx_buf *l2)
{
    (void)l2;
    fx_tar_add(l1, "etc/", '5', NULL, NULL, 0, 0755);
    fx_tar_file(l1, "etc/.wh...", "");
    fx_tar_end(l1);
}

static void
build_whiteout_dot(struct fx_buf *l1, struct fx_buf *l2)
{
    (void)l2;
    fx_tar_add(l1, "etc/", '5', NULL, NULL, 0, 0755);
    fx_tar_file(l1, "etc/.wh..", "");
    fx_tar_end(l1);
}

static bool
has_opaque(const char *path)
{
    char v[4];
    return lgetxattr(path, "trusted.overlay.opaque", v, sizeof(v)) >= 0;
}

static void
refuse_whiteout(void (*build)(struct fx_buf *, struct fx_buf *))
{
    struct berthd b;
    start_with_base(&b);
    struct fx_buf l1 = {0}, l2 = {0};
    build(&l1, &l2);
    struct fx_layout s = {.layers = {&l1}};
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/L", b.tmp);
    fx_write_layout(dir, &s);
    struct before st;
    take_before(&b, &st);
    struct hresp r;
    fx_import_layout(&b, NULL, dir, NULL, &r);
    assert_refused(&r, "whiteout");
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    /* Above the layer's root: the snapshots directory and the store. */
    ck_assert(!has_opaque(fx_root_path(&b, "snapshots")));
    ck_assert(!has_opaque(b.root));
    char *names = fx_names(fx_root_path(&b, "snapshots"));
    for (char *save = NULL, *n = strtok_r(names, "\n", &save); n; n = strtok_r(NULL, "\n", &save)) {
        char p[PATH_MAX + 128];
        snprintf(p, sizeof(p), "%s/snapshots/%s", b.root, n);
        ck_assert_msg(!has_opaque(p), "%s became opaque", p);
        snprintf(p, sizeof(p), "%s/snapshots/%s/fs", b.root, n);
        ck_assert_msg(!has_opaque(p), "%s became opaque", p);
    }
    free(names);
    free(l1.data);
    berthd_finish(&b);
}

START_TEST(whiteout_named_dotdot_is_422)
{
    refuse_whiteout(build_whiteout_dotdot);
}
END_TEST

START_TEST(whiteout_named_dotdot_below_the_root_is_422)
{
    refuse_whiteout(build_whiteout_dotdot_below);
}
END_TEST

START_TEST(whiteout_named_dot_is_422)
{
    refuse_whiteout(build_whiteout_dot);
}
END_TEST

static void
build_long_component(struct fx_buf *l1, struct fx_buf *l2)
{
    (void)l2;
    char name[400];
    memset(name, 'n', 300);
    snprintf(name + 300, sizeof(name) - 300, "/x");
    fx_tar_add_long(l1, name, '0', NULL, "x\n", 2, 0644);
    fx_tar_end(l1);
}

START_TEST(layer_entry_with_a_component_over_name_max_is_422)
{
    /* ENAMETOOLONG from the filesystem used to answer 500. */
    struct berthd b;
    start_with_base(&b);
    struct fx_buf l1 = {0}, l2 = {0};
    build_long_component(&l1, &l2);
    struct fx_layout s = {.layers = {&l1}};
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/L", b.tmp);
    fx_write_layout(dir, &s);
    struct before st;
    take_before(&b, &st);
    struct hresp r;
    fx_import_layout(&b, NULL, dir, NULL, &r);
    assert_refused(&r, "NAME_MAX");
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    free(l1.data);
    berthd_finish(&b);
}
END_TEST

START_TEST(image_with_more_layers_than_a_mount_can_stack_is_422)
{
    /* Stored, it could never run: the overlay mount fails with E2BIG,
     * which used to answer 500 at container create. */
    enum { N = 260 };
    struct fx_buf *ls = calloc(N, sizeof(*ls));
    const struct fx_buf **lp = calloc(N + 1, sizeof(*lp));
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof(name), "f%03d", i);
        fx_tar_file(&ls[i], name, name);
        fx_tar_end(&ls[i]);
        lp[i] = &ls[i];
    }
    struct fx_layout s = {.layer_list = lp};
    struct berthd b;
    start_with_base(&b);
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/L", b.tmp);
    fx_write_layout(dir, &s);
    struct before st;
    take_before(&b, &st);
    struct hresp r;
    fx_import_layout(&b, NULL, dir, NULL, &r);
    assert_refused(&r, "260 layers");
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    for (int i = 0; i < N; i++)
        free(ls[i].data);
    free(ls);
    free(lp);
    berthd_finish(&b);
}
END_TEST

/* ---- bad uploads --------------------------------------------------------------------- */

static void
refuse_upload(const char *data, size_t len, const char *what)
{
    struct berthd b;
    start_with_base(&b);
    struct before st;
    take_before(&b, &st);
    struct fx_src src = {.data = data, .len = len};
    struct hresp r;
    fx_post(&b, "/v1/images", "application/x-tar", NULL, &src, false, 30000, &r);
    ck_assert_msg(r.status == 422 || r.status == 400, "%s: %ld %s", what, r.status, r.body);
    ck_assert_msg(json_at(r.json, "error.message"), "%s: no error body: %s", what, r.body);
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    /* And the daemon still imports. */
    fx_upload_file(&b, "?name=after:1", fx_path("base.tar"), NULL, &r);
    ck_assert_msg(r.status == 200, "re-upload after a refused upload: %ld %s", r.status, r.body);
    hresp_free(&r);
    berthd_finish(&b);
}

START_TEST(truncated_tar_upload_is_refused_and_leaves_nothing)
{
    size_t len = 0;
    char *data = fx_read_file(fx_path("base.tar"), &len);
    /* Half-way through the layer blob, and inside the last member (the
     * zero blocks after it are padding a reader may do without). */
    refuse_upload(data, len / 2, "half a tar");
    size_t end = len;
    while (end > 0 && data[end - 1] == '\0')
        end--;
    refuse_upload(data, end - 10, "a tar cut inside its last member");
    free(data);
}
END_TEST

START_TEST(truncated_gzip_upload_is_refused_and_leaves_nothing)
{
    size_t len = 0;
    char *data = fx_read_file(fx_path("base.tar.gz"), &len);
    refuse_upload(data, len * 2 / 3, "two thirds of a tar.gz");
    free(data);
}
END_TEST

START_TEST(garbage_upload_is_refused_and_leaves_nothing)
{
    size_t len = 300000;
    char *data = malloc(len);
    unsigned x = 12345;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245 + 12345;
        data[i] = (char)(x >> 16);
    }
    refuse_upload(data, len, "random bytes");
    refuse_upload("not a tar", 9, "a short text");
    /* A valid tar with no image in it. */
    struct fx_buf t = {0};
    fx_tar_file(&t, "readme", "nothing here\n");
    fx_tar_end(&t);
    refuse_upload(t.data, t.len, "a tar without an image");
    free(t.data);
    free(data);
}
END_TEST

START_TEST(docker_archive_with_escaping_layer_path_is_422)
{
    struct fx_buf t = {0};
    fx_tar_file(&t, "manifest.json",
                "[{\"Config\":\"../../etc/passwd\",\"RepoTags\":[\"evil:1\"],"
                "\"Layers\":[\"../../../etc/shadow\"]}]");
    fx_tar_end(&t);
    struct berthd b;
    start_with_base(&b);
    struct before st;
    take_before(&b, &st);
    struct fx_src src = {.data = t.data, .len = t.len};
    struct hresp r;
    fx_post(&b, "/v1/images", "application/x-tar", NULL, &src, false, 30000, &r);
    assert_refused(&r, "..");
    hresp_free(&r);
    assert_nothing_left(&b, &st);
    free(t.data);
    berthd_finish(&b);
}
END_TEST

/*
 * manifest.json naming a config or a layer the archive lacks: the import
 * gave up through a goto into the scope of a cleanup variable and freed
 * whatever the stack held (clang refuses to compile that; gcc did).
 */
START_TEST(docker_archive_naming_a_member_it_lacks_is_422)
{
    struct berthd b;
    start_with_base(&b);
    const char *cases[][2] = {
        {"[{\"Config\":\"nope.json\",\"RepoTags\":[\"x:1\"],\"Layers\":[\"l.tar\"]}]",
         "config nope.json is not in the archive"},
        {"[{\"Config\":\"c.json\",\"RepoTags\":[\"x:1\"],\"Layers\":[\"gone.tar\"]}]",
         "layer gone.tar is not in the archive"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fx_buf t = {0};
        fx_tar_file(&t, "c.json", "{}");
        fx_tar_file(&t, "manifest.json", cases[i][0]);
        fx_tar_end(&t);
        struct before st;
        take_before(&b, &st);
        struct fx_src src = {.data = t.data, .len = t.len};
        struct hresp r;
        fx_post(&b, "/v1/images", "application/x-tar", NULL, &src, false, 30000, &r);
        assert_refused(&r, cases[i][1]);
        hresp_free(&r);
        assert_nothing_left(&b, &st);
        free(t.data);
    }
    berthd_finish(&b);
}
END_TEST

static Suite *
verify_suite(void)
{
    Suite *s = suite_create("api_images_verify");
    TCase *tc = tcase_create("verify");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup_simple, teardown_simple);
    tcase_add_test(tc, layer_digest_mismatch_is_422_naming_the_blob);
    tcase_add_test(tc, config_digest_mismatch_is_422_naming_the_blob);
    tcase_add_test(tc, layer_size_larger_than_declared_is_422);
    tcase_add_test(tc, layer_size_smaller_than_declared_is_422);
    tcase_add_test(tc, missing_layer_blob_is_422_naming_the_blob);
    tcase_add_test(tc, uppercase_hex_digest_is_422);
    tcase_add_test(tc, malformed_digests_are_422);
    tcase_add_test(tc, malformed_manifest_json_is_422_naming_the_manifest);
    tcase_add_test(tc, manifest_declared_over_4mib_is_422_before_reading_it);
    tcase_add_test(tc, config_declared_over_4mib_is_422);
    tcase_add_test(tc, config_really_over_4mib_is_422);
    tcase_add_test(tc, unknown_layer_media_type_is_422);
    tcase_add_test(tc, diff_id_mismatch_is_422);
    tcase_add_test(tc, index_naming_a_path_outside_blobs_is_422);
    tcase_add_test(tc, arm64_image_is_422_before_unpacking);
    tcase_add_test(tc, windows_image_is_422_before_unpacking);
    tcase_add_test(tc, platform_query_arm64_on_an_amd64_image_is_422);
    tcase_add_test(tc, layer_entry_with_dotdot_is_422);
    tcase_add_test(tc, layer_entry_climbing_out_through_a_directory_is_422);
    tcase_add_test(tc, layer_entry_with_absolute_path_is_422);
    tcase_add_test(tc, layer_entry_through_an_absolute_symlink_is_422);
    tcase_add_test(tc, layer_entry_through_a_relative_symlink_climbing_out_is_422);
    tcase_add_test(tc, layer_entry_through_a_symlink_of_an_earlier_layer_is_422);
    tcase_add_test(tc, snapshot_left_by_a_refused_import_is_collected);
    tcase_add_test(tc, hard_link_to_a_target_outside_is_422);
    tcase_add_test(tc, hard_link_to_an_absolute_path_then_overwritten_is_422);
    tcase_add_test(tc, hard_link_through_a_symlink_is_422);
    tcase_add_test(tc, layer_entry_reaching_path_max_is_422_and_moves_no_cwd);
    tcase_add_test(tc, concurrent_imports_with_deep_names_write_only_their_own_snapshots);
    tcase_add_test(tc, whiteout_named_dotdot_is_422);
    tcase_add_test(tc, whiteout_named_dotdot_below_the_root_is_422);
    tcase_add_test(tc, whiteout_named_dot_is_422);
    tcase_add_test(tc, layer_entry_with_a_component_over_name_max_is_422);
    tcase_add_test(tc, image_with_more_layers_than_a_mount_can_stack_is_422);
    tcase_add_test(tc, truncated_tar_upload_is_refused_and_leaves_nothing);
    tcase_add_test(tc, truncated_gzip_upload_is_refused_and_leaves_nothing);
    tcase_add_test(tc, garbage_upload_is_refused_and_leaves_nothing);
    tcase_add_test(tc, docker_archive_with_escaping_layer_path_is_422);
    tcase_add_test(tc, docker_archive_naming_a_member_it_lacks_is_422);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    if (!fx_build(false)) {
        fx_cleanup();
        return 1;
    }
    int rc = harness_run_suite(verify_suite());
    fx_cleanup();
    return rc;
}
