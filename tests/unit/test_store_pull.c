/*
 * Registry pulls into the store (store/pull*.c, store/registry*.c) against
 * a real distribution registry on loopback (Debian's docker-registry),
 * with images pushed by skopeo, a token service and a misbehaving front
 * written in Python (tests/fixtures), TLS with a CA made by openssl, and
 * the registry's own storage written over or stopped for the failures.
 * Skipped (77) when docker-registry or skopeo is missing.
 */
#include <check.h>
#include <dirent.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/log.h"
#include "store/gc.h"
#include "store/image_build.h"
#include "store/oci.h"
#include "store/pull.h"
#include "store/registry.h"
#include "tests/fixtures/regfix.h"
#include "tests/unit/testutil.h"

#define USER "puller"
#define PASS "s3cret-Pa55word-XYZ"
#define USERPASS USER ":" PASS

static char fxdir[PATH_MAX]; /* images made once per run */
static char *work;           /* per test */
static char root[PATH_MAX + 16];
static char berth_log[PATH_MAX + 16];
static int saved_stderr = -1;
static struct store *st;
static struct registry_client *rc;
static struct rf_registry reg;
static struct rf_helper proxy, tokens;

/* ---- fixtures -------------------------------------------------------------- */

static void
build_images(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(fxdir, sizeof(fxdir), "%s/berth-pullfx-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(fxdir));
    ck_assert_int_eq(
        tu_sh("%s/tests/fixtures/make-images.sh '%s' big >/dev/null", BERTH_SOURCE_DIR, fxdir), 0);
}

static void
remove_images(void)
{
    tu_sh("rm -rf '%s'", fxdir);
}

static const char *
fx(const char *name)
{
    static char bufs[4][PATH_MAX + 64];
    static int slot;
    char *p = bufs[slot++ % 4];
    snprintf(p, PATH_MAX + 64, "%s/%s", fxdir, name);
    return p;
}

static void
setup(void)
{
    work = tu_tmpdir("pull");
    snprintf(root, sizeof(root), "%s/root", work);
    snprintf(berth_log, sizeof(berth_log), "%s/berth.log", work);
    /* Everything the store logs goes to a file the tests read for secrets. */
    fflush(stderr);
    saved_stderr = dup(2);
    int fd = open(berth_log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    dup2(fd, 2);
    close(fd);
    log_setup(LOG_DEBUG, LOG_FORMAT_TEXT);
    struct err err = {0};
    ck_assert_msg(store_open(root, &(struct store_opts){.max_unpacks = 4}, &st, &err) == 0, "%s",
                  err.msg);
}

static void
teardown(void)
{
    registry_client_free(rc);
    rc = NULL;
    store_close(st);
    st = NULL;
    rf_kill_all();
    if (saved_stderr >= 0) {
        fflush(stderr);
        dup2(saved_stderr, 2);
        close(saved_stderr);
        saved_stderr = -1;
    }
    tu_sh("rm -rf '%s'", work);
    free(work);
}

/* A client for loopback servers: short timeouts, quick retries. */
struct client_cfg {
    const char *insecure[4];
    struct registry_ca cas[2];
    size_t n_cas;
    struct registry_mirror mirrors[2];
    size_t n_mirrors;
    const char *auth_file;
};

static void
make_client(const struct client_cfg *cfg)
{
    size_t n_insecure = 0;
    while (n_insecure < 4 && cfg->insecure[n_insecure])
        n_insecure++;
    struct registry_opts o = {.auth_file = cfg->auth_file,
                              .cas = cfg->cas,
                              .n_cas = cfg->n_cas,
                              .insecure = cfg->insecure,
                              .n_insecure = n_insecure,
                              .mirrors = cfg->mirrors,
                              .n_mirrors = cfg->n_mirrors,
                              .connect_timeout_ms = 2000,
                              .low_speed_time_s = 2,
                              .doc_timeout_ms = 10000,
                              .max_attempts = 2,
                              .backoff_ms = 50};
    struct err err = {0};
    registry_client_free(rc);
    rc = registry_client_new(&o, &err);
    ck_assert_msg(rc != NULL, "%s", err.msg);
}

static void
start_registry(const struct rf_registry_opts *o)
{
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/registry", work);
    ck_assert(rf_registry_start(&reg, dir, o));
}

static void
push(const char *layout, const char *ref, const char *repo_tag, const char *creds)
{
    ck_assert_msg(rf_push(&reg, fx(layout), ref, repo_tag, creds, strcmp(layout, "multi") == 0) ==
                      0,
                  "skopeo push of %s to %s failed", layout, reg.host);
}

/* A front (regproxy.py) for the registry with extra arguments. */
static void
start_proxy(const char *const *extra)
{
    char up[16];
    snprintf(up, sizeof(up), "%d", reg.port);
    const char *args[24] = {"--upstream", up};
    size_t n = 2;
    for (const char *const *a = extra; a && *a && n < 23; a++)
        args[n++] = *a;
    ck_assert(rf_helper_start(&proxy, work, "regproxy", args));
}

static const char *
proxy_host(void)
{
    static char h[64];
    snprintf(h, sizeof(h), "127.0.0.1:%d", proxy.port);
    return h;
}

/* ---- progress -------------------------------------------------------------- */

struct recorder {
    pthread_mutex_t mu;
    char lines[1024][200];
    int n;
    int cancel;            /* the pull's cancel flag */
    bool cancel_on_bytes;  /* set cancel once a layer's download passed */
    pid_t stop_on_bytes;   /* SIGSTOP this process once a layer's download passed */
    int64_t bytes_trigger; /* ... this many bytes (-1: as it starts) */
    bool triggered;
};

static struct recorder rec;

static void
rec_cb(void *ctx, const struct import_event *ev)
{
    struct recorder *r = ctx;
    pthread_mutex_lock(&r->mu);
    if (r->n < 1024)
        snprintf(r->lines[r->n++], 200, "%s %s %u %lld/%lld", ev->step,
                 ev->status ? ev->status : "", ev->index, (long long)ev->done,
                 (long long)ev->total);
    bool fire = !r->triggered && strcmp(ev->step, "layer") == 0 &&
                strcmp(ev->status, "downloading") == 0 && ev->done > r->bytes_trigger;
    if (fire && r->cancel_on_bytes) {
        r->triggered = true;
        __atomic_store_n(&r->cancel, 1, __ATOMIC_SEQ_CST);
    }
    if (fire && r->stop_on_bytes > 0) {
        r->triggered = true;
        kill(r->stop_on_bytes, SIGSTOP);
    }
    pthread_mutex_unlock(&r->mu);
}

static void
rec_reset(void)
{
    pthread_mutex_destroy(&rec.mu);
    memset(&rec, 0, sizeof(rec));
    pthread_mutex_init(&rec.mu, NULL);
}

/* Index of the first event line starting with prefix, or -1. */
static int
rec_find(const char *prefix)
{
    for (int i = 0; i < rec.n; i++)
        if (strncmp(rec.lines[i], prefix, strlen(prefix)) == 0)
            return i;
    return -1;
}

/* ---- pulling ---------------------------------------------------------------- */

struct pull_args {
    const char *host, *repo, *tag, *digest, *name;
    const struct registry_creds *creds;
    const struct oci_platform *platform;
    unsigned parallel;
};

static int
pull(const struct pull_args *a, struct meta_image **img, struct err *err)
{
    rec_reset();
    struct pull_request req = {.registry = a->host ? a->host : reg.host,
                               .repository = a->repo,
                               .tag = a->tag,
                               .digest = a->digest,
                               .name = a->name,
                               .platform = a->platform,
                               .creds = a->creds,
                               .progress = rec_cb,
                               .progress_ctx = &rec,
                               .cancel = &rec.cancel};
    bool created = false;
    *img = NULL;
    return image_pull(st, rc, &req, a->parallel ? a->parallel : 3, img, &created, err);
}

static void
pull_ok(const struct pull_args *a, struct meta_image **img)
{
    struct err err = {0};
    int r = pull(a, img, &err);
    ck_assert_msg(r == 0, "pull %s/%s: %s", a->host ? a->host : reg.host, a->repo, err.msg);
}

/* The first manifest digest of a fixture layout's index.json. */
static void
layout_manifest(const char *layout, char out[DIGEST_STR_LEN])
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/index.json", fx(layout));
    json_object *j = json_object_from_file(path);
    json_object *m = json_object_array_get_idx(json_object_object_get(j, "manifests"), 0);
    snprintf(out, DIGEST_STR_LEN, "%s",
             json_object_get_string(json_object_object_get(m, "digest")));
    json_object_put(j);
}

/* Layer i's digest of a fixture layout's (first) manifest. */
static void
layout_layer(const char *layout, int i, char out[DIGEST_STR_LEN])
{
    char md[DIGEST_STR_LEN], path[PATH_MAX + 128];
    layout_manifest(layout, md);
    snprintf(path, sizeof(path), "%s/blobs/sha256/%s", fx(layout), md + 7);
    json_object *j = json_object_from_file(path);
    json_object *l = json_object_array_get_idx(json_object_object_get(j, "layers"), i);
    snprintf(out, DIGEST_STR_LEN, "%s",
             json_object_get_string(json_object_object_get(l, "digest")));
    json_object_put(j);
}

/* Final snapshots (64-hex names) in the store. */
static int
snapshot_count(void)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/snapshots", root);
    int n = 0;
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strlen(de->d_name) == 64)
            n++;
    if (d)
        closedir(d);
    return n;
}

static int
dir_count(const char *sub)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/%s", root, sub);
    int n = 0;
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.')
            n++;
    if (d)
        closedir(d);
    return n;
}

static int
image_count(void)
{
    struct meta_image **imgs = NULL;
    size_t n = 0;
    struct err err = {0};
    ck_assert_int_eq(meta_image_list(st->meta, &imgs, &n, &err), 0);
    meta_image_list_free(imgs, n);
    return (int)n;
}

/* Nothing of a failed pull is left: no image, snapshot, staged or stored blob. */
static void
assert_nothing_stored(void)
{
    ck_assert_int_eq(image_count(), 0);
    ck_assert_int_eq(snapshot_count(), 0);
    ck_assert_int_eq(dir_count("tmp"), 0);
    struct gc_result gr = {0};
    struct err err = {0};
    ck_assert_int_eq(gc_run(st->blobs, st->meta, st->root, &gr, &err), 0);
    ck_assert_int_eq(dir_count("content/sha256"), 0);
}

static bool
snapshot_has(const struct meta_image *img, size_t layer, const char *rel)
{
    char path[PATH_MAX + 256];
    snprintf(path, sizeof(path), "%s/snapshots/%s/fs/%s", root, img->layers[layer].chain_id + 7,
             rel);
    struct stat sb;
    return lstat(path, &sb) == 0;
}

static void
assert_no_secret_in(const char *msg)
{
    ck_assert_msg(!strstr(msg, PASS), "the password leaked: %s", msg);
    char *b64 = registry_base64_encode(USERPASS, strlen(USERPASS));
    ck_assert_msg(!strstr(msg, b64), "the Basic credentials leaked: %s", msg);
    free(b64);
}

static void
assert_no_secret_logged(void)
{
    fflush(stderr);
    ck_assert_msg(!rf_file_contains(berth_log, PASS), "the password is in the log");
    char *b64 = registry_base64_encode(USERPASS, strlen(USERPASS));
    ck_assert_msg(!rf_file_contains(berth_log, b64), "the Basic credentials are in the log");
    free(b64);
}

/* ---- plain registry ---------------------------------------------------------- */

START_TEST(pull_by_tag_stores_the_image_and_its_snapshot)
{
    start_registry(NULL);
    push("base", "base", "test/base:1", NULL);
    make_client(&(struct client_cfg){.insecure = {reg.host}});
    struct meta_image *img = NULL;
    char name[128];
    snprintf(name, sizeof(name), "%s/test/base:1", reg.host);
    pull_ok(&(struct pull_args){.repo = "test/base", .tag = "1", .name = name}, &img);
    char want[DIGEST_STR_LEN];
    layout_manifest("base", want);
    ck_assert_str_eq(img->digest, want);
    ck_assert_int_eq(img->n_names, 1);
    ck_assert_str_eq(img->names[0], name);
    ck_assert_int_eq(img->n_layers, 1);
    ck_assert(snapshot_has(img, 0, "bin/busybox"));
    ck_assert(snapshot_has(img, 0, "etc/passwd"));
    /* manifest, config, layer */
    ck_assert_int_eq(dir_count("content/sha256"), 3);
    ck_assert_int_ge(rec_find("manifest resolved"), 0);
    ck_assert_int_ge(rec_find("layer downloading 1"), 0);
    ck_assert_int_ge(rec_find("layer unpacked 1"), 0);
    ck_assert_int_ge(rec_find("image created"), 0);
    meta_image_free(img);
}
END_TEST

START_TEST(pull_by_digest_checks_the_manifest_digest)
{
    start_registry(NULL);
    push("base", "base", "test/base:1", NULL);
    make_client(&(struct client_cfg){.insecure = {reg.host}});
    char want[DIGEST_STR_LEN];
    layout_manifest("base", want);
    struct meta_image *img = NULL;
    pull_ok(&(struct pull_args){.repo = "test/base", .digest = want}, &img);
    ck_assert_str_eq(img->digest, want);
    meta_image_free(img);
    /* A digest the registry does not have. */
    struct err err = {0};
    char other[DIGEST_STR_LEN];
    layout_manifest("other", other);
    ck_assert_int_lt(pull(&(struct pull_args){.repo = "test/base", .digest = other}, &img, &err),
                     0);
    ck_assert_int_eq(err.code, ENOENT);
    ck_assert_msg(strstr(err.msg, "MANIFEST_UNKNOWN") && strstr(err.msg, reg.host), "%s", err.msg);
}
END_TEST

START_TEST(a_stored_image_costs_one_manifest_request)
{
    start_registry(NULL);
    push("base", "base", "test/base:1", NULL);
    start_proxy(NULL);
    make_client(&(struct client_cfg){.insecure = {proxy_host()}});
    struct meta_image *img = NULL;
    pull_ok(&(struct pull_args){.host = proxy_host(), .repo = "test/base", .tag = "1"}, &img);
    meta_image_free(img);
    int first = rf_count_lines(proxy.log, "front GET");
    ck_assert_int_eq(first, 3); /* manifest, config, layer */
    rf_write(proxy.log, "");
    pull_ok(&(struct pull_args){.host = proxy_host(), .repo = "test/base", .tag = "1"}, &img);
    ck_assert_int_eq(rf_count_lines(proxy.log, "front"), 1);
    ck_assert_int_eq(rf_count_lines(proxy.log, "front GET /v2/test/base/manifests/1 200"), 1);
    ck_assert_int_ge(rec_find("image present"), 0);
    char digest[DIGEST_STR_LEN];
    snprintf(digest, sizeof(digest), "%s", img->digest);
    meta_image_free(img);
    /* By digest, a stored manifest needs no request at all. */
    rf_write(proxy.log, "");
    pull_ok(&(struct pull_args){.host = proxy_host(), .repo = "test/base", .digest = digest}, &img);
    ck_assert_int_eq(rf_count_lines(proxy.log, "front"), 0);
    meta_image_free(img);
}
END_TEST

/* A pull by digest answered from the store holds the image from its
 * look-up to its answer: a prune in between (the image has no users)
 * neither removes its record nor lets GC take its snapshot. */
START_TEST(a_prune_between_a_stored_digest_lookup_and_its_answer_keeps_the_image)
{
    start_registry(NULL);
    push("base", "base", "test/base:1", NULL);
    make_client(&(struct client_cfg){.insecure = {reg.host}});
    struct meta_image *img = NULL;
    pull_ok(&(struct pull_args){.repo = "test/base", .tag = "1"}, &img);
    char digest[DIGEST_STR_LEN];
    snprintf(digest, sizeof(digest), "%s", img->digest);
    meta_image_free(img);
    rec_reset();
    struct pull_request req = {.registry = reg.host,
                               .repository = "test/base",
                               .digest = digest,
                               .progress = rec_cb,
                               .progress_ctx = &rec};
    struct pull_plan *p = NULL;
    struct err err = {0};
    ck_assert_msg(pull_plan_new(st, rc, &req, &p, &err) == 0, "%s", err.msg);
    ck_assert(pull_plan_stored(p));
    char **removed = NULL;
    size_t n_removed = 0;
    ck_assert_msg(meta_prune_images(st->meta, -1, -1, 0, &removed, &n_removed, &err) == 0, "%s",
                  err.msg);
    for (size_t i = 0; i < n_removed; i++)
        free(removed[i]);
    free(removed);
    ck_assert_msg(n_removed == 0, "the prune removed the image a pull is answering with");
    struct gc_result gr = {0};
    ck_assert_int_eq(gc_run(st->blobs, st->meta, st->root, &gr, &err), 0);
    bool created = true;
    ck_assert_msg(pull_plan_commit(p, &img, &created, &err) == 0, "%s", err.msg);
    ck_assert(!created);
    pull_plan_free(p);
    ck_assert_str_eq(img->digest, digest);
    ck_assert(snapshot_has(img, 0, "bin/busybox"));
    meta_image_free(img);
    /* The lease went with the plan: now the prune takes it. */
    ck_assert_int_eq(meta_prune_images(st->meta, -1, -1, 0, &removed, &n_removed, &err), 0);
    for (size_t i = 0; i < n_removed; i++)
        free(removed[i]);
    free(removed);
    ck_assert_int_eq(n_removed, 1);
}
END_TEST

/* Deletes ref (the image goes with its last name) and runs GC. */
static void
delete_and_collect(const char *ref)
{
    struct err err = {0};
    bool removed = false;
    ck_assert_msg(meta_image_delete(st->meta, ref, NULL, &removed, &err) == 0, "%s", err.msg);
    ck_assert_msg(removed, "deleting %s left the image", ref);
    struct gc_result gr = {0};
    ck_assert_msg(gc_run(st->blobs, st->meta, st->root, &gr, &err) == 0, "%s", err.msg);
}

/* Pulls test/base:1 into the store; *digest is its manifest digest. */
static void
pull_base(char digest[DIGEST_STR_LEN])
{
    start_registry(NULL);
    push("base", "base", "test/base:1", NULL);
    make_client(&(struct client_cfg){.insecure = {reg.host}});
    struct meta_image *img = NULL;
    pull_ok(&(struct pull_args){.repo = "test/base", .tag = "1"}, &img);
    snprintf(digest, DIGEST_STR_LEN, "%s", img->digest);
    meta_image_free(img);
}

/* The delete of the image's last name is no prune: the image goes at
 * once. GC after it took the snapshot while the answer recorded the
 * image again, so the pull said 200 for an image whose rootfs was gone
 * (the crash campaign's "mount overlay of 1 layers: No such file"). */
START_TEST(a_delete_between_a_stored_digest_lookup_and_its_answer_leaves_a_whole_image)
{
    char digest[DIGEST_STR_LEN];
    pull_base(digest);
    struct pull_request req = {.registry = reg.host, .repository = "test/base", .digest = digest};
    struct pull_plan *p = NULL;
    struct err err = {0};
    ck_assert_msg(pull_plan_new(st, rc, &req, &p, &err) == 0, "%s", err.msg);
    ck_assert(pull_plan_stored(p));
    delete_and_collect(digest);
    struct meta_image *img = NULL;
    bool created = true;
    ck_assert_msg(pull_plan_commit(p, &img, &created, &err) == 0, "%s", err.msg);
    pull_plan_free(p);
    ck_assert_str_eq(img->digest, digest);
    ck_assert_msg(snapshot_has(img, 0, "bin/busybox"),
                  "the pull answered with an image whose snapshot GC removed");
    meta_image_free(img);
}
END_TEST

/* The same hold as an import of stored bytes uses it: between the look-up
 * and the answer the image loses its last name and GC runs; the answer
 * records it whole. And an image deleted before it is held is not
 * stored: the caller builds it again rather than recording a copy. */
START_TEST(a_held_stored_image_keeps_its_snapshots_through_a_delete_and_gc)
{
    char digest[DIGEST_STR_LEN];
    pull_base(digest);
    struct image_build b;
    struct err err = {0};
    ck_assert_msg(image_build_begin(&b, st, &err) == 0, "%s", err.msg);
    snprintf(b.manifest_digest, sizeof(b.manifest_digest), "%s", digest);
    struct meta_image *stored = NULL;
    ck_assert_int_eq(image_build_hold_stored(&b, digest, &stored, &err), 1);
    delete_and_collect(digest);
    struct meta_image *img = NULL;
    ck_assert_msg(image_build_answer_stored(&b, stored, "test/again:1", &img, &err) == 0, "%s",
                  err.msg);
    ck_assert_msg(snapshot_has(img, 0, "bin/busybox"),
                  "the answer recorded an image whose snapshot GC removed");
    ck_assert_int_eq((int)img->n_names, 1);
    meta_image_free(img);
    image_build_end(&b, false);

    /* Gone before the hold: not stored, and nothing recorded. */
    delete_and_collect(digest);
    ck_assert_msg(image_build_begin(&b, st, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(image_build_hold_stored(&b, digest, &stored, &err), 0);
    ck_assert_ptr_null(stored);
    image_build_end(&b, false);
    int64_t n = -1;
    ck_assert_msg(meta_image_count(st->meta, &n, &err) == 0, "%s", err.msg);
    ck_assert_int_eq((int)n, 0);
}
END_TEST

START_TEST(an_index_gives_the_manifest_of_this_host)
{
    start_registry(NULL);
    push("multi", "multi", "test/multi:1", NULL);
    make_client(&(struct client_cfg){.insecure = {reg.host}});
    struct meta_image *img = NULL;
    pull_ok(&(struct pull_args){.repo = "test/multi", .tag = "1"}, &img);
    char want[DIGEST_STR_LEN];
    layout_manifest("base", want); /* the host's entry is base */
    ck_assert_str_eq(img->digest, want);
    ck_assert_str_eq(img->platform.architecture, st->host.platform.architecture);
    meta_image_free(img);
    /* Asking for the other entry's platform gets it, and the one platform
     * check refuses it before any layer is fetched. */
    struct oci_platform foreign = {.os = "linux"};
    snprintf(foreign.architecture, sizeof(foreign.architecture), "%s",
             strcmp(st->host.platform.architecture, "arm64") == 0 ? "amd64" : "arm64");
    oci_platform_normalize(&foreign);
    struct err err = {0};
    ck_assert_int_lt(
        pull(&(struct pull_args){.repo = "test/multi", .tag = "1", .platform = &foreign}, &img,
             &err),
        0);
    ck_assert_int_eq(err.code, ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, "this host runs"), "%s", err.msg);
    ck_assert_int_eq(rec_find("layer"), -1);
    ck_assert_int_eq(image_count(), 1);
}
END_TEST

START_TEST(layers_fetched_out_of_order_unpack_in_order)
{
    start_registry(NULL);
    push("child", "child", "test/child:1", NULL);
    make_client(&(struct client_cfg){.insecure = {reg.host}});
    rec_reset();
    struct pull_request req = {.registry = reg.host,
                               .repository = "test/child",
                               .tag = "1",
                               .progress = rec_cb,
                               .progress_ctx = &rec};
    struct pull_plan *p = NULL;
    struct err err = {0};
    ck_assert_msg(pull_plan_new(st, rc, &req, &p, &err) == 0, "%s", err.msg);
    ck_assert(!pull_plan_stored(p));
    ck_assert_int_eq(pull_plan_layer_count(p), 2);
    ck_assert_int_gt(pull_plan_download_bytes(p), 0);
    /* The upper layer first: only downloaded, its lower is not there yet. */
    ck_assert_msg(pull_plan_layer(p, 1, &err) == 0, "%s", err.msg);
    ck_assert_int_ge(rec_find("layer downloaded 2"), 0);
    ck_assert_int_eq(rec_find("layer unpack"), -1);
    /* The base layer in one pass, then the upper one from its staged blob. */
    ck_assert_msg(pull_plan_layer(p, 0, &err) == 0, "%s", err.msg);
    int u1 = rec_find("layer unpacked 1"), s2 = rec_find("layer unpacking 2"),
        u2 = rec_find("layer unpacked 2");
    ck_assert_int_ge(u1, 0);
    ck_assert_int_gt(s2, u1);
    ck_assert_int_gt(u2, s2);
    ck_assert_int_lt(pull_plan_layer(p, 1, &err), 0); /* once per layer */
    struct meta_image *img = NULL;
    bool created = false;
    ck_assert_msg(pull_plan_commit(p, &img, &created, &err) == 0, "%s", err.msg);
    ck_assert(created);
    pull_plan_free(p);
    ck_assert_int_eq(img->n_layers, 2);
    ck_assert(snapshot_has(img, 1, "app/hello.txt"));
    /* The child layer's whiteout of /etc/passwd, in the overlay format. */
    char path[PATH_MAX + 256];
    snprintf(path, sizeof(path), "%s/snapshots/%s/fs/etc/passwd", root,
             img->layers[1].chain_id + 7);
    struct stat sb;
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert(S_ISCHR(sb.st_mode) && sb.st_rdev == makedev(0, 0));
    meta_image_free(img);
}
END_TEST

START_TEST(parallel_layers_and_stored_blobs_are_not_downloaded_again)
{
    start_registry(NULL);
    push("base", "base", "test/base:1", NULL);
    push("child", "child", "test/child:1", NULL);
    start_proxy(NULL);
    make_client(&(struct client_cfg){.insecure = {proxy_host()}});
    struct meta_image *img = NULL;
    pull_ok(&(struct pull_args){.host = proxy_host(), .repo = "test/base", .tag = "1"}, &img);
    meta_image_free(img);
    char shared[DIGEST_STR_LEN], mine[DIGEST_STR_LEN], path[256];
    layout_layer("child", 0, shared);
    layout_layer("child", 1, mine);
    rf_write(proxy.log, "");
    pull_ok(
        &(struct pull_args){.host = proxy_host(), .repo = "test/child", .tag = "1", .parallel = 3},
        &img);
    ck_assert_int_eq(img->n_layers, 2);
    snprintf(path, sizeof(path), "GET /v2/test/child/blobs/%s", shared);
    ck_assert_int_eq(rf_count_lines(proxy.log, path), 0);
    snprintf(path, sizeof(path), "GET /v2/test/child/blobs/%s", mine);
    ck_assert_int_eq(rf_count_lines(proxy.log, path), 1);
    ck_assert_int_ge(rec_find("layer cached 1"), 0);
    ck_assert_int_eq(image_count(), 2);
    meta_image_free(img);
}
END_TEST

START_TEST(unknown_tags_and_silent_registries_fail_clearly)
{
    start_registry(NULL);
    push("base", "base", "test/base:1", NULL);
    int dead = rf_free_port();
    char dead_host[64];
    snprintf(dead_host, sizeof(dead_host), "127.0.0.1:%d", dead);
    make_client(&(struct client_cfg){.insecure = {reg.host, dead_host}});
    struct meta_image *img = NULL;
    struct err err = {0};
    ck_assert_int_lt(pull(&(struct pull_args){.repo = "test/base", .tag = "nope"}, &img, &err), 0);
    ck_assert_int_eq(err.code, ENOENT);
    ck_assert_msg(strstr(err.msg, "MANIFEST_UNKNOWN") && strstr(err.msg, "test/base:nope"), "%s",
                  err.msg);
    memset(&err, 0, sizeof(err));
    ck_assert_int_lt(
        pull(&(struct pull_args){.host = dead_host, .repo = "test/base", .tag = "1"}, &img, &err),
        0);
    ck_assert_int_eq(err.code, ERR_BAD_GATEWAY);
    ck_assert_msg(strstr(err.msg, dead_host), "%s", err.msg);
    memset(&err, 0, sizeof(err));
    ck_assert_int_lt(pull(&(struct pull_args){.repo = "Test/../x", .tag = "1"}, &img, &err), 0);
    ck_assert_int_eq(err.code, EINVAL);
    assert_nothing_stored();
}
END_TEST

START_TEST(a_corrupted_blob_is_refused_and_nothing_is_stored)
{
    start_registry(NULL);
    push("base", "base", "test/base:1", NULL);
    make_client(&(struct client_cfg){.insecure = {reg.host}});
    char layer[DIGEST_STR_LEN];
    layout_layer("base", 0, layer);
    /* Same size, one byte different, near the end (past the gzip header). */
    ck_assert(rf_corrupt_blob(&reg, layer));
    struct meta_image *img = NULL;
    struct err err = {0};
    ck_assert_int_lt(pull(&(struct pull_args){.repo = "test/base", .tag = "1"}, &img, &err), 0);
    ck_assert_int_eq(err.code, ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, layer), "%s", err.msg);
    assert_nothing_stored();
}
END_TEST

START_TEST(a_schema1_manifest_and_a_foreign_layer_are_refused)
{
    start_registry(NULL);
    push("base", "base", "test/base:1", NULL);
    char s1[PATH_MAX + 32], fl[PATH_MAX + 32], spec1[PATH_MAX * 2], spec2[PATH_MAX * 2];
    snprintf(s1, sizeof(s1), "%s/schema1.json", work);
    rf_write(s1, "{\"schemaVersion\":1,\"name\":\"test/base\",\"tag\":\"old\",\"architecture\":"
                 "\"amd64\",\"fsLayers\":[],\"history\":[]}");
    /* base's config, and one foreign layer that no registry serves. */
    char md[DIGEST_STR_LEN], path[PATH_MAX + 128];
    layout_manifest("base", md);
    snprintf(path, sizeof(path), "%s/blobs/sha256/%s", fx("base"), md + 7);
    json_object *m = json_object_from_file(path);
    json_object *cfg = json_object_object_get(m, "config");
    char *doc = NULL;
    ck_assert_int_gt(
        asprintf(&doc,
                 "{\"schemaVersion\":2,\"mediaType\":\"%s\",\"config\":{\"mediaType\":\"%s\","
                 "\"digest\":\"%s\",\"size\":%lld},\"layers\":[{\"mediaType\":\"application/"
                 "vnd.docker.image.rootfs.foreign.diff.tar.gzip\",\"digest\":\"sha256:%064d\","
                 "\"size\":10,\"urls\":[\"https://example.invalid/l\"]}]}",
                 DOCKER_MT_MANIFEST, DOCKER_MT_CONFIG,
                 json_object_get_string(json_object_object_get(cfg, "digest")),
                 (long long)json_object_get_int64(json_object_object_get(cfg, "size")), 1),
        0);
    json_object_put(m);
    snprintf(fl, sizeof(fl), "%s/foreign.json", work);
    rf_write(fl, doc);
    free(doc);
    snprintf(spec1, sizeof(spec1), "/v2/test/base/manifests/old=%s=%s", s1,
             "application/vnd.docker.distribution.manifest.v1+prettyjws");
    snprintf(spec2, sizeof(spec2), "/v2/test/base/manifests/foreign=%s=%s", fl, DOCKER_MT_MANIFEST);
    start_proxy((const char *[]){"--serve", spec1, "--serve", spec2, NULL});
    make_client(&(struct client_cfg){.insecure = {proxy_host()}});
    struct meta_image *img = NULL;
    struct err err = {0};
    ck_assert_int_lt(
        pull(&(struct pull_args){.host = proxy_host(), .repo = "test/base", .tag = "old"}, &img,
             &err),
        0);
    ck_assert_int_eq(err.code, ENOTSUP);
    ck_assert_msg(strstr(err.msg, "schema 1"), "%s", err.msg);
    memset(&err, 0, sizeof(err));
    ck_assert_int_lt(
        pull(&(struct pull_args){.host = proxy_host(), .repo = "test/base", .tag = "foreign"}, &img,
             &err),
        0);
    ck_assert_int_eq(err.code, ENOTSUP);
    ck_assert_msg(strstr(err.msg, "foreign"), "%s", err.msg);
    assert_nothing_stored();
}
END_TEST

/* ---- failures in flight -------------------------------------------------------- */

START_TEST(a_connection_cut_mid_blob_resumes_where_it_broke)
{
    start_registry(NULL);
    push("other", "other", "test/other:1", NULL);
    start_proxy((const char *[]){"--cut-after", "100000", "--cut-times", "1", NULL});
    make_client(&(struct client_cfg){.insecure = {proxy_host()}});
    struct meta_image *img = NULL;
    pull_ok(&(struct pull_args){.host = proxy_host(), .repo = "test/other", .tag = "1"}, &img);
    ck_assert_int_eq(rf_count_lines(proxy.log, "CUT"), 1);
    ck_assert_int_ge(rf_count_lines(proxy.log, " 206 "), 1);
    ck_assert(snapshot_has(img, 0, "data/blob.bin"));
    meta_image_free(img);
}
END_TEST

START_TEST(a_connection_cut_every_time_fails_cleanly)
{
    start_registry(NULL);
    push("other", "other", "test/other:1", NULL);
    start_proxy((const char *[]){"--cut-after", "100000", NULL});
    make_client(&(struct client_cfg){.insecure = {proxy_host()}});
    struct meta_image *img = NULL;
    struct err err = {0};
    ck_assert_int_lt(
        pull(&(struct pull_args){.host = proxy_host(), .repo = "test/other", .tag = "1"}, &img,
             &err),
        0);
    ck_assert_int_eq(err.code, ERR_BAD_GATEWAY);
    ck_assert_msg(strstr(err.msg, proxy_host()), "%s", err.msg);
    assert_nothing_stored();
}
END_TEST

START_TEST(a_registry_that_stops_answering_mid_blob_times_out_cleanly)
{
    start_registry(NULL);
    push("big", "big", "test/big:1", NULL);
    make_client(&(struct client_cfg){.insecure = {reg.host}});
    struct meta_image *img = NULL;
    struct err err = {0};
    rec_reset();
    /* Stopped as soon as the layer's headers are in: most of its 50 MB is
     * still to come, whatever the speed of this machine. */
    rec.stop_on_bytes = reg.pid;
    rec.bytes_trigger = -1;
    struct pull_request req = {.registry = reg.host,
                               .repository = "test/big",
                               .tag = "1",
                               .progress = rec_cb,
                               .progress_ctx = &rec};
    bool created = false;
    double t0 = rf_now_ms();
    int r = image_pull(st, rc, &req, 1, &img, &created, &err);
    double took = rf_now_ms() - t0;
    kill(reg.pid, SIGCONT);
    ck_assert_msg(rec.triggered, "the registry was never stopped");
    ck_assert_int_lt(r, 0);
    ck_assert_msg(err.code == ERR_GATEWAY_TIMEOUT, "%d %s", err.code, err.msg);
    ck_assert_msg(strstr(err.msg, reg.host), "%s", err.msg);
    ck_assert_msg(took < 30000, "took %.0f ms", took);
    assert_nothing_stored();
}
END_TEST

START_TEST(cancel_stops_a_pull_and_leaves_nothing)
{
    start_registry(NULL);
    push("big", "big", "test/big:1", NULL);
    make_client(&(struct client_cfg){.insecure = {reg.host}});
    rec_reset();
    rec.cancel_on_bytes = true;
    rec.bytes_trigger = -1;
    struct pull_request req = {.registry = reg.host,
                               .repository = "test/big",
                               .tag = "1",
                               .progress = rec_cb,
                               .progress_ctx = &rec,
                               .cancel = &rec.cancel};
    struct meta_image *img = NULL;
    struct err err = {0};
    bool created = false;
    ck_assert_int_lt(image_pull(st, rc, &req, 2, &img, &created, &err), 0);
    ck_assert_msg(err.code == ECANCELED, "%d %s", err.code, err.msg);
    assert_nothing_stored();
}
END_TEST

/* Marks a file once the first layer bytes are in, then slows down so the
 * parent can kill this process mid-blob. */
static void
marker_cb(void *ctx, const struct import_event *ev)
{
    if (strcmp(ev->step, "layer") == 0 && strcmp(ev->status, "downloading") == 0 && ev->done > 0) {
        rf_write(ctx, "1");
        rf_sleep_ms(200);
    }
}

START_TEST(a_pull_killed_mid_blob_leaves_a_store_that_pulls_again)
{
    start_registry(NULL);
    push("big", "big", "test/big:1", NULL);
    char marker[PATH_MAX + 32];
    snprintf(marker, sizeof(marker), "%s/marker", work);
    store_close(st);
    st = NULL;
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        struct err err = {0};
        struct store *cst = NULL;
        if (store_open(root, &(struct store_opts){.max_unpacks = 2}, &cst, &err) < 0)
            _exit(2);
        make_client(&(struct client_cfg){.insecure = {reg.host}});
        struct pull_request req = {.registry = reg.host,
                                   .repository = "test/big",
                                   .tag = "1",
                                   .progress = marker_cb,
                                   .progress_ctx = marker};
        struct meta_image *img = NULL;
        bool created = false;
        image_pull(cst, rc, &req, 1, &img, &created, &err);
        _exit(3); /* not reached before the kill */
    }
    double deadline = rf_now_ms() + 30000;
    while (access(marker, F_OK) != 0 && rf_now_ms() < deadline)
        rf_sleep_ms(10);
    ck_assert_int_eq(access(marker, F_OK), 0);
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    ck_assert(WIFSIGNALED(status));
    ck_assert_int_gt(dir_count("tmp"), 0); /* the staging it died with */
    /* Opening the store clears what the dead pull left; the pull works. */
    struct err err = {0};
    ck_assert_msg(store_open(root, &(struct store_opts){.max_unpacks = 2}, &st, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(dir_count("tmp"), 0);
    ck_assert_int_eq(snapshot_count(), 0);
    make_client(&(struct client_cfg){.insecure = {reg.host}});
    struct meta_image *img = NULL;
    pull_ok(&(struct pull_args){.repo = "test/big", .tag = "1"}, &img);
    ck_assert(snapshot_has(img, 0, "data/random.bin"));
    meta_image_free(img);
    ck_assert_int_eq(snapshot_count(), 1);
    ck_assert_int_eq(dir_count("tmp"), 0);
}
END_TEST

START_TEST(retries_on_503_and_429)
{
    start_registry(NULL);
    push("base", "base", "test/base:1", NULL);
    start_proxy((const char *[]){"--fail-first", "1", "--fail-status", "503", NULL});
    make_client(&(struct client_cfg){.insecure = {proxy_host()}});
    struct meta_image *img = NULL;
    pull_ok(&(struct pull_args){.host = proxy_host(), .repo = "test/base", .tag = "1"}, &img);
    ck_assert_int_eq(rf_count_lines(proxy.log, "manifests/1 503"), 1);
    ck_assert_int_eq(rf_count_lines(proxy.log, "manifests/1 200"), 1);
    meta_image_free(img);
    rf_helper_stop(&proxy);
    /* Past the attempts: the registry's own message, naming the host. */
    start_proxy((const char *[]){"--fail-first", "5", "--fail-status", "429", NULL});
    make_client(&(struct client_cfg){.insecure = {proxy_host()}});
    struct err err = {0};
    ck_assert_int_lt(
        pull(&(struct pull_args){.host = proxy_host(), .repo = "test/child", .tag = "1"}, &img,
             &err),
        0);
    ck_assert_int_eq(err.code, ERR_BAD_GATEWAY);
    ck_assert_msg(strstr(err.msg, "429") && strstr(err.msg, "UNAVAILABLE") &&
                      strstr(err.msg, proxy_host()),
                  "%s", err.msg);
    ck_assert_int_eq(rf_count_lines(proxy.log, " 429 "), 2);
}
END_TEST

/* ---- mirrors and redirects ----------------------------------------------------- */

START_TEST(a_mirror_is_tried_first_and_the_origin_after)
{
    start_registry(NULL);
    push("base", "base", "test/base:1", NULL);
    int dead = rf_free_port();
    char dead_host[64], dead_url[80], reg_url[80];
    snprintf(dead_host, sizeof(dead_host), "127.0.0.1:%d", dead);
    snprintf(dead_url, sizeof(dead_url), "http://%s", dead_host);
    snprintf(reg_url, sizeof(reg_url), "http://%s/", reg.host);
    /* The origin is down; its mirror has the image. */
    make_client(&(struct client_cfg){
        .insecure = {dead_host}, .mirrors = {{.host = dead_host, .url = reg_url}}, .n_mirrors = 1});
    struct meta_image *img = NULL;
    pull_ok(&(struct pull_args){.host = dead_host, .repo = "test/base", .tag = "1"}, &img);
    meta_image_free(img);
    /* The mirror is down; the origin has it. */
    tu_sh("rm -rf '%s'", root);
    store_close(st);
    struct err err = {0};
    ck_assert_int_eq(store_open(root, &(struct store_opts){.max_unpacks = 2}, &st, &err), 0);
    make_client(&(struct client_cfg){
        .insecure = {reg.host}, .mirrors = {{.host = reg.host, .url = dead_url}}, .n_mirrors = 1});
    pull_ok(&(struct pull_args){.repo = "test/base", .tag = "1"}, &img);
    meta_image_free(img);
    fflush(stderr);
    ck_assert(rf_file_contains(berth_log, "mirror"));
}
END_TEST

/* ---- authentication -------------------------------------------------------------- */

static void
start_basic_registry(void)
{
    char htpasswd[PATH_MAX + 32];
    snprintf(htpasswd, sizeof(htpasswd), "%s/htpasswd", work);
    ck_assert_int_eq(tu_sh("htpasswd -Bbc '%s' %s %s >/dev/null 2>&1", htpasswd, USER, PASS), 0);
    start_registry(&(struct rf_registry_opts){.htpasswd = htpasswd});
    push("base", "base", "test/base:1", USERPASS);
}

START_TEST(basic_auth_with_request_credentials_and_never_a_secret_in_errors)
{
    start_basic_registry();
    make_client(&(struct client_cfg){.insecure = {reg.host}});
    struct meta_image *img = NULL;
    struct err err = {0};
    ck_assert_int_lt(pull(&(struct pull_args){.repo = "test/base", .tag = "1"}, &img, &err), 0);
    ck_assert_int_eq(err.code, ERR_UNAUTHORIZED);
    ck_assert_msg(strstr(err.msg, reg.host), "%s", err.msg);
    struct registry_creds bad = {.username = USER, .password = "wrong-" PASS};
    memset(&err, 0, sizeof(err));
    ck_assert_int_lt(
        pull(&(struct pull_args){.repo = "test/base", .tag = "1", .creds = &bad}, &img, &err), 0);
    ck_assert_int_eq(err.code, ERR_UNAUTHORIZED);
    ck_assert_msg(strstr(err.msg, reg.host), "%s", err.msg);
    assert_no_secret_in(err.msg);
    struct registry_creds good = {.username = USER, .password = PASS};
    pull_ok(&(struct pull_args){.repo = "test/base", .tag = "1", .creds = &good}, &img);
    meta_image_free(img);
    assert_no_secret_logged();
}
END_TEST

START_TEST(basic_auth_from_a_docker_config_file)
{
    start_basic_registry();
    char path[PATH_MAX + 32], doc[512];
    snprintf(path, sizeof(path), "%s/config.json", work);
    char *b64 = registry_base64_encode(USERPASS, strlen(USERPASS));
    snprintf(doc, sizeof(doc), "{\"auths\":{\"http://%s/v1/\":{\"auth\":\"%s\"}}}", reg.host, b64);
    free(b64);
    rf_write(path, doc);
    make_client(&(struct client_cfg){.insecure = {reg.host}, .auth_file = path});
    struct meta_image *img = NULL;
    pull_ok(&(struct pull_args){.repo = "test/base", .tag = "1"}, &img);
    meta_image_free(img);
    assert_no_secret_logged();
}
END_TEST

START_TEST(redirects_to_blob_storage_get_no_credentials)
{
    start_basic_registry();
    start_proxy((const char *[]){"--redirect-blobs", "--upstream-auth", USERPASS, NULL});
    make_client(&(struct client_cfg){.insecure = {proxy_host()}});
    struct registry_creds good = {.username = USER, .password = PASS};
    struct meta_image *img = NULL;
    pull_ok(
        &(struct pull_args){.host = proxy_host(), .repo = "test/base", .tag = "1", .creds = &good},
        &img);
    meta_image_free(img);
    ck_assert_int_ge(rf_count_lines(proxy.log, "front GET /v2/test/base/manifests/1 200 auth=yes"),
                     1);
    ck_assert_int_ge(rf_count_lines(proxy.log, " 307 auth=yes"), 2); /* config, layer */
    ck_assert_int_eq(rf_count_lines(proxy.log, "storage GET"), 2);
    ck_assert_int_eq(rf_count_lines(proxy.log, "storage GET /v2/test/base/blobs/"), 2);
    /* The registry's credentials never went to the storage origin. */
    ck_assert_int_eq(rf_count_lines2(proxy.log, "storage", "auth=yes"), 0);
}
END_TEST

/* A token service and a registry that takes its tokens. */
static void
start_token_registry(const char *const *extra)
{
    char key[PATH_MAX + 32], cert[PATH_MAX + 32];
    snprintf(key, sizeof(key), "%s/token.key", work);
    snprintf(cert, sizeof(cert), "%s/token.crt", work);
    ck_assert_int_eq(tu_sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout '%s' -out '%s' "
                           "-subj /CN=berth-token -days 2 >/dev/null 2>&1",
                           key, cert),
                     0);
    const char *args[16] = {"--key", key, "--cert", cert, "--issuer", RF_TOKEN_ISSUER};
    size_t n = 6;
    for (const char *const *a = extra; a && *a && n < 15; a++)
        args[n++] = *a;
    ck_assert(rf_helper_start(&tokens, work, "tokenserver", args));
    char realm[128];
    snprintf(realm, sizeof(realm), "http://127.0.0.1:%d/token", tokens.port);
    start_registry(&(struct rf_registry_opts){.token_realm = realm, .token_cert = cert});
    push("child", "child", "test/child:1", USERPASS);
    rf_write(tokens.log, "");
}

static const char *
token_host(void)
{
    static char h[64];
    snprintf(h, sizeof(h), "127.0.0.1:%d", tokens.port);
    return h;
}

/* No token the service issued is in the berth log. */
static void
assert_no_token_logged(void)
{
    fflush(stderr);
    FILE *f = fopen(tokens.log, "r");
    ck_assert_ptr_nonnull(f);
    char line[16384];
    while (fgets(line, sizeof(line), f)) {
        char *tok = strrchr(line, ' ');
        if (strncmp(line, "ISSUED", 6) != 0 || !tok)
            continue;
        tok[strcspn(tok, "\n")] = '\0';
        ck_assert_msg(!rf_file_contains(berth_log, tok + 1), "a token is in the log");
    }
    fclose(f);
}

START_TEST(bearer_tokens_are_fetched_once_per_scope)
{
    start_token_registry((const char *[]){"--user", USERPASS, NULL});
    make_client(&(struct client_cfg){.insecure = {reg.host, token_host()}});
    struct registry_creds good = {.username = USER, .password = PASS};
    struct meta_image *img = NULL;
    pull_ok(&(struct pull_args){.repo = "test/child", .tag = "1", .creds = &good}, &img);
    ck_assert_int_eq(img->n_layers, 2);
    meta_image_free(img);
    ck_assert_int_eq(rf_count_lines(tokens.log, "ISSUED repository:test/child:pull "), 1);
    /* Wrong credentials: the token service refuses, named, no secret shown. */
    struct registry_creds bad = {.username = USER, .password = "no-" PASS};
    struct err err = {0};
    ck_assert_int_lt(
        pull(&(struct pull_args){.repo = "test/child", .tag = "2", .creds = &bad}, &img, &err), 0);
    ck_assert_int_eq(err.code, ERR_UNAUTHORIZED);
    ck_assert_msg(strstr(err.msg, reg.host) && strstr(err.msg, token_host()), "%s", err.msg);
    assert_no_secret_in(err.msg);
    assert_no_secret_logged();
    assert_no_token_logged();
}
END_TEST

START_TEST(a_bearer_token_that_expires_mid_pull_is_fetched_again)
{
    char short_file[PATH_MAX + 32];
    snprintf(short_file, sizeof(short_file), "%s/short", work);
    start_token_registry((const char *[]){"--user", USERPASS, "--short-file", short_file, NULL});
    make_client(&(struct client_cfg){.insecure = {reg.host, token_host()}});
    rf_write(short_file, "1");
    struct registry_creds good = {.username = USER, .password = PASS};
    struct pull_request req = {
        .registry = reg.host, .repository = "test/child", .tag = "1", .creds = &good};
    struct pull_plan *p = NULL;
    struct err err = {0};
    ck_assert_msg(pull_plan_new(st, rc, &req, &p, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(rf_count_lines(tokens.log, "ISSUED"), 1);
    rf_sleep_ms(4500); /* the registry no longer takes it; we think it good */
    for (size_t i = 0; i < pull_plan_layer_count(p); i++)
        ck_assert_msg(pull_plan_layer(p, i, &err) == 0, "%s", err.msg);
    struct meta_image *img = NULL;
    bool created = false;
    ck_assert_msg(pull_plan_commit(p, &img, &created, &err) == 0, "%s", err.msg);
    pull_plan_free(p);
    meta_image_free(img);
    ck_assert_int_eq(rf_count_lines(tokens.log, "ISSUED"), 2);
    assert_no_token_logged();
}
END_TEST

START_TEST(an_identity_token_from_the_config_file_is_exchanged)
{
    start_token_registry(
        (const char *[]){"--user", USERPASS, "--refresh-token", "refresh-" PASS, NULL});
    char path[PATH_MAX + 32], doc[512];
    snprintf(path, sizeof(path), "%s/config.json", work);
    snprintf(doc, sizeof(doc), "{\"auths\":{\"%s\":{\"identitytoken\":\"refresh-%s\"}}}", reg.host,
             PASS);
    rf_write(path, doc);
    make_client(&(struct client_cfg){.insecure = {reg.host, token_host()}, .auth_file = path});
    struct meta_image *img = NULL;
    pull_ok(&(struct pull_args){.repo = "test/child", .tag = "1"}, &img);
    meta_image_free(img);
    ck_assert_int_eq(rf_count_lines(tokens.log, "ISSUED"), 1);
    assert_no_secret_logged();
    assert_no_token_logged();
}
END_TEST

/* ---- TLS ---------------------------------------------------------------------------- */

START_TEST(tls_with_a_private_ca)
{
    char ca_key[PATH_MAX + 32], ca[PATH_MAX + 32], key[PATH_MAX + 32], csr[PATH_MAX + 32],
        crt[PATH_MAX + 32], ext[PATH_MAX + 32];
    snprintf(ca_key, sizeof(ca_key), "%s/ca.key", work);
    snprintf(ca, sizeof(ca), "%s/ca.crt", work);
    snprintf(key, sizeof(key), "%s/srv.key", work);
    snprintf(csr, sizeof(csr), "%s/srv.csr", work);
    snprintf(crt, sizeof(crt), "%s/srv.crt", work);
    snprintf(ext, sizeof(ext), "%s/srv.ext", work);
    rf_write(ext, "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n");
    ck_assert_int_eq(tu_sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout '%s' -out '%s' "
                           "-subj /CN=berth-test-ca -days 2 >/dev/null 2>&1 && "
                           "openssl req -newkey rsa:2048 -nodes -keyout '%s' -out '%s' "
                           "-subj /CN=127.0.0.1 >/dev/null 2>&1 && "
                           "openssl x509 -req -in '%s' -CA '%s' -CAkey '%s' -CAcreateserial "
                           "-out '%s' -days 2 -extfile '%s' >/dev/null 2>&1",
                           ca_key, ca, key, csr, csr, ca, ca_key, crt, ext),
                     0);
    start_registry(&(struct rf_registry_opts){.tls_cert = crt, .tls_key = key});
    push("base", "base", "test/base:1", NULL);
    /* Without the CA: refused, not retried, naming the host. */
    make_client(&(struct client_cfg){.insecure = {NULL}});
    struct meta_image *img = NULL;
    struct err err = {0};
    ck_assert_int_lt(pull(&(struct pull_args){.repo = "test/base", .tag = "1"}, &img, &err), 0);
    ck_assert_int_eq(err.code, ERR_BAD_GATEWAY);
    ck_assert_msg(strstr(err.msg, reg.host) && strstr(err.msg, "certificate"), "%s", err.msg);
    make_client(&(struct client_cfg){.cas = {{.host = reg.host, .file = ca}}, .n_cas = 1});
    pull_ok(&(struct pull_args){.repo = "test/base", .tag = "1"}, &img);
    meta_image_free(img);
}
END_TEST

START_TEST(no_wait_fails_at_once_naming_who_holds_the_manifest)
{
    start_registry(NULL);
    push("base", "base", "test/base:1", NULL);
    make_client(&(struct client_cfg){.insecure = {reg.host}});
    char digest[DIGEST_STR_LEN];
    layout_manifest("base", digest);
    static const int holder_tag = 1, my_tag = 2;
    const void *held_by = NULL;
    ck_assert_int_eq(store_inflight_try_begin(st, digest, &holder_tag, NULL), 0);
    ck_assert_int_eq(store_inflight_try_begin(st, digest, &my_tag, &held_by), -EALREADY);
    ck_assert_ptr_eq(held_by, &holder_tag);
    /* By tag (after the manifest request) and by digest (before any). */
    for (int by_digest = 0; by_digest < 2; by_digest++) {
        held_by = NULL;
        struct pull_request req = {.registry = reg.host,
                                   .repository = "test/base",
                                   .tag = by_digest ? NULL : "1",
                                   .digest = by_digest ? digest : NULL,
                                   .no_wait = true,
                                   .owner = &my_tag,
                                   .busy_owner = &held_by};
        struct pull_plan *p = NULL;
        struct err err = {0};
        ck_assert_int_eq(pull_plan_new(st, rc, &req, &p, &err), -EALREADY);
        ck_assert_ptr_eq(held_by, &holder_tag);
        ck_assert_msg(strstr(err.msg, digest), "%s", err.msg);
    }
    store_inflight_end(st, digest);
    /* Free again: the plan holds it, tagged as ours. */
    struct pull_request req = {.registry = reg.host,
                               .repository = "test/base",
                               .tag = "1",
                               .no_wait = true,
                               .owner = &my_tag,
                               .busy_owner = &held_by};
    struct pull_plan *p = NULL;
    struct err err = {0};
    ck_assert_msg(pull_plan_new(st, rc, &req, &p, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(pull_plan_layer_count(p), 1);
    int64_t size = 0;
    char layer[DIGEST_STR_LEN];
    layout_layer("base", 0, layer);
    ck_assert_str_eq(pull_plan_layer_digest(p, 0, &size), layer);
    ck_assert_int_gt(size, 0);
    ck_assert_int_eq(store_inflight_try_begin(st, digest, &holder_tag, &held_by), -EALREADY);
    ck_assert_ptr_eq(held_by, &my_tag);
    pull_plan_free(p);
    ck_assert_int_eq(store_inflight_try_begin(st, digest, &holder_tag, NULL), 0);
    store_inflight_end(st, digest);
    assert_nothing_stored();
}
END_TEST

static Suite *
pull_suite(void)
{
    Suite *s = suite_create("store_pull");
    TCase *tc = tcase_create("registry");
    tcase_add_unchecked_fixture(tc, build_images, remove_images);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pull_by_tag_stores_the_image_and_its_snapshot);
    tcase_add_test(tc, pull_by_digest_checks_the_manifest_digest);
    tcase_add_test(tc, a_stored_image_costs_one_manifest_request);
    tcase_add_test(tc, a_prune_between_a_stored_digest_lookup_and_its_answer_keeps_the_image);
    tcase_add_test(tc, a_delete_between_a_stored_digest_lookup_and_its_answer_leaves_a_whole_image);
    tcase_add_test(tc, a_held_stored_image_keeps_its_snapshots_through_a_delete_and_gc);
    tcase_add_test(tc, an_index_gives_the_manifest_of_this_host);
    tcase_add_test(tc, layers_fetched_out_of_order_unpack_in_order);
    tcase_add_test(tc, parallel_layers_and_stored_blobs_are_not_downloaded_again);
    tcase_add_test(tc, unknown_tags_and_silent_registries_fail_clearly);
    tcase_add_test(tc, a_corrupted_blob_is_refused_and_nothing_is_stored);
    tcase_add_test(tc, a_schema1_manifest_and_a_foreign_layer_are_refused);
    tcase_add_test(tc, a_connection_cut_mid_blob_resumes_where_it_broke);
    tcase_add_test(tc, a_connection_cut_every_time_fails_cleanly);
    tcase_add_test(tc, a_registry_that_stops_answering_mid_blob_times_out_cleanly);
    tcase_add_test(tc, cancel_stops_a_pull_and_leaves_nothing);
    tcase_add_test(tc, a_pull_killed_mid_blob_leaves_a_store_that_pulls_again);
    tcase_add_test(tc, retries_on_503_and_429);
    tcase_add_test(tc, a_mirror_is_tried_first_and_the_origin_after);
    tcase_add_test(tc, basic_auth_with_request_credentials_and_never_a_secret_in_errors);
    tcase_add_test(tc, basic_auth_from_a_docker_config_file);
    tcase_add_test(tc, redirects_to_blob_storage_get_no_credentials);
    tcase_add_test(tc, bearer_tokens_are_fetched_once_per_scope);
    tcase_add_test(tc, a_bearer_token_that_expires_mid_pull_is_fetched_again);
    tcase_add_test(tc, an_identity_token_from_the_config_file_is_exchanged);
    tcase_add_test(tc, tls_with_a_private_ca);
    tcase_add_test(tc, no_wait_fails_at_once_naming_who_holds_the_manifest);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    if (access("/usr/bin/docker-registry", X_OK) != 0 || system("command -v skopeo >/dev/null") ||
        system("command -v htpasswd >/dev/null") || system("command -v openssl >/dev/null")) {
        fprintf(stderr, "store_pull: docker-registry, skopeo, htpasswd or openssl missing; "
                        "skipped (scripts/deps.sh installs them)\n");
        return 77;
    }
    SRunner *sr = srunner_create(pull_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
