/*
 * Pulls through berth's Docker API (POST /images/create) with the real
 * clients, against Debian's docker-registry on loopback with the Docker
 * suites' busybox pushed into it by skopeo (tests/fixtures/pullfix.h,
 * regfix.h, harness_docker.h): `docker pull` by tag, then up to date,
 * and by digest; a docker.io name through --registry-mirror; platform=
 * from an index; the engine's message stream as it is sent (Pulling
 * from, per-layer states with short ids and byte counts, Digest,
 * Status); `docker run --rm` of an image it does not have (create, 404,
 * pull, create); docker-py's images.pull; a missing image and an
 * unreachable registry failing with a readable message, a plain error
 * before the stream; a corrupted blob, the stream's last line
 * (errorDetail); Basic auth from the client's config.json
 * (X-Registry-Auth) and bad headers refused; an identitytoken exchanged
 * at a token service; a client that hangs up mid-pull detaching, and a
 * second pull joining with nothing fetched twice; one that hangs up
 * before anything was sent, its pull cancelled after the grace. Skipped
 * (77) without the registry tools, a docker CLI or a runtime.
 */
#include <poll.h>
#include <sys/utsname.h>

#include "tests/fixtures/pullfix.h"

#include "harness_containers.h"
#include "harness_docker.h"

static struct dk_client clis[DK_MAX_CLIENTS];
static size_t nclis;

static void
setup(void)
{
    ctr_require_runtime();
    nclis = dk_clis(clis);
    dk_busybox_archive(); /* built once, here, for every test */
}

/* skopeo copy of the Docker suites' busybox (a docker save archive) to repo_tag. */
static void
push_busybox(const struct pf_env *e, const char *repo_tag, const char *creds)
{
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof(cmd),
             "skopeo copy -q --dest-tls-verify=false %s%s docker-archive:'%s' docker://%s/%s "
             ">/dev/null 2>&1",
             creds ? "--dest-creds " : "", creds ? creds : "", dk_busybox_archive(), e->reg.host,
             repo_tag);
    ck_assert_msg(system(cmd) == 0, "skopeo push of busybox to %s/%s failed", e->reg.host,
                  repo_tag);
}

/* A registry on loopback holding the Docker suites' busybox as repo_tag. */
static void
busybox_env(struct pf_env *e, const char *repo_tag)
{
    pf_init(e);
    pf_registry(e, NULL);
    push_busybox(e, repo_tag, NULL);
}

/*
 * berthd with its Docker API on a unix socket, --insecure-registry for
 * the registry (or its proxy) and short registry timeouts (loopback),
 * flags and environment ("NAME=VALUE") added (NULL or NULL-terminated).
 */
static void
start_env(struct pf_env *e, const char *const *flags, const char *const *env)
{
    memset(&e->b, 0, sizeof(e->b));
    harness_mkdtemp(e->b.tmp, sizeof(e->b.tmp));
    static char listen[PATH_MAX + 16], host[64];
    snprintf(listen, sizeof(listen), "unix://%s/docker.sock", e->b.tmp);
    snprintf(host, sizeof(host), "%s", pf_host(e));
    struct berthd_opts o = {
        .env = {"no_proxy=127.0.0.1,localhost", "NO_PROXY=127.0.0.1,localhost", PF_FAST_TIMEOUTS}};
    int n = 0;
    o.args[n++] = "--docker-listen";
    o.args[n++] = listen;
    o.args[n++] = "--insecure-registry";
    o.args[n++] = host;
    for (const char *const *f = flags; f && *f && n < HARNESS_MAX_ARGS - 1; f++)
        o.args[n++] = *f;
    int m = 3;
    for (const char *const *v = env; v && *v && m < 15; v++)
        o.env[m++] = *v;
    berthd_start(&e->b, &o);
    ck_assert_msg(e->b.docker_sock[0], "berthd did not log its Docker API endpoint");
}

static void
start(struct pf_env *e, const char *const *flags)
{
    start_env(e, flags, NULL);
}

/* After the test's last berthd_finish: the registry, its helpers and the work directory go. */
static void
finish(struct pf_env *e)
{
    rf_kill_all();
    fx_remove_tree(e->work);
}

/* POST /images/create through the Docker API, with one more header (or NULL). */
static void
create(const struct pf_env *e, const char *query, const char *header, struct hresp *r)
{
    char path[1024];
    snprintf(path, sizeof(path), "/images/create?%s", query);
    const char *headers[] = {header, NULL};
    http_do(&e->b,
            &(struct hreq){.method = "POST",
                           .path = path,
                           .docker = true,
                           .headers = header ? headers : NULL,
                           .timeout_ms = 60000},
            r);
}

/* A Docker error before any stream: the status and {"message"} containing want. */
static void
check_plain_error(const struct hresp *r, long status, const char *want)
{
    ck_assert_msg(r->status == status, "status %ld, want %ld: %s", r->status, status, r->body);
    ck_assert_msg(r->json && json_object_object_length(r->json) == 1, "body: %s", r->body);
    const char *msg = json_object_get_string(json_at(r->json, "message"));
    ck_assert_msg(msg && strstr(msg, want), "message %s, want %s", msg ? msg : "(none)", want);
}

/* The stream's lines ("\r\n"-separated JSON objects) as an array; every line must parse. */
static json_object *
stream_lines(const char *body)
{
    json_object *arr = json_object_new_array();
    const char *p = body;
    while (p && *p) {
        size_t n = strcspn(p, "\r\n");
        if (n) {
            char *line = strndup(p, n);
            json_object *o = json_tokener_parse(line);
            ck_assert_msg(o && json_object_is_type(o, json_type_object), "line: %s", line);
            json_object_array_add(arr, o);
            free(line);
        }
        p += n;
        p += strspn(p, "\r\n");
    }
    return arr;
}

static const char *
str_at(json_object *o, const char *key)
{
    json_object *v = json_at(o, key);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
}

/* Index of the first line with status (and id, unless NULL) at or after from; -1 if none. */
static int
find_line(json_object *lines, int from, const char *status, const char *id)
{
    for (size_t i = (size_t)from; i < json_object_array_length(lines); i++) {
        json_object *l = json_object_array_get_idx(lines, i);
        if (strcmp(str_at(l, "status"), status) == 0 && (!id || strcmp(str_at(l, "id"), id) == 0))
            return (int)i;
    }
    return -1;
}

/* ---- docker pull ---------------------------------------------------------------- */

START_TEST(docker_pull_by_tag_then_again_up_to_date_and_the_image_is_listed)
{
    struct pf_env e;
    busybox_env(&e, "busybox:1.36");
    for (size_t i = 0; i < nclis; i++) {
        start(&e, NULL);
        const struct dk_client *cl = &clis[i];
        char *out = NULL;
        int st = dk_run(&e.b, cl, &out, "\"$D\" pull %s/busybox:1.36", e.reg.host);
        ck_assert_msg(st == 0, "docker %s pull: %d\n%s", cl->version, st, out);
        char want[256];
        snprintf(want, sizeof(want), "Status: Downloaded newer image for %s/busybox:1.36",
                 e.reg.host);
        ck_assert_msg(dk_contains(out, "1.36: Pulling from busybox") &&
                          dk_contains(out, ": Pull complete") &&
                          dk_contains(out, "Digest: sha256:") && dk_contains(out, want),
                      "docker %s pull:\n%s", cl->version, out);
        free(out);
        st = dk_run(&e.b, cl, &out, "\"$D\" pull %s/busybox:1.36", e.reg.host);
        snprintf(want, sizeof(want), "Status: Image is up to date for %s/busybox:1.36", e.reg.host);
        ck_assert_msg(st == 0 && dk_contains(out, want), "docker %s pull again: %d\n%s",
                      cl->version, st, out);
        free(out);
        char *tags = dk_ok(&e.b, cl, 0, "\"$D\" images --format '{{.Repository}}:{{.Tag}}'");
        snprintf(want, sizeof(want), "%s/busybox:1.36", e.reg.host);
        ck_assert_str_eq(tags, want);
        free(tags);
        /* It runs as a loaded image does. */
        char *hi = dk_ok(&e.b, cl, 0, "\"$D\" run --rm %s/busybox:1.36 echo hi", e.reg.host);
        ck_assert_str_eq(hi, "hi");
        free(hi);
        berthd_finish(&e.b);
    }
    finish(&e);
}
END_TEST

START_TEST(docker_pull_of_a_docker_io_name_through_a_mirror_speaks_as_the_engine)
{
    struct pf_env e;
    busybox_env(&e, "library/busybox:1.36");
    char url[80];
    snprintf(url, sizeof(url), "http://%s", e.reg.host);
    /* Should the mirror fail, docker.io itself would be tried: a proxy
     * that is a dead loopback port keeps that attempt on this machine. */
    start_env(
        &e, (const char *[]){"--registry-mirror", url, NULL},
        (const char *[]){"https_proxy=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9", NULL});
    for (size_t i = 0; i < nclis; i++) {
        const struct dk_client *cl = &clis[i];
        char *out = NULL;
        int st = dk_run(&e.b, cl, &out,
                        "\"$D\" pull busybox:1.36 && \"$D\" run --rm busybox:1.36 "
                        "echo hi && \"$D\" rmi busybox:1.36");
        ck_assert_msg(st == 0 && dk_contains(out, "1.36: Pulling from library/busybox\n") &&
                          dk_contains(out, "Status: Downloaded newer image for busybox:1.36\n") &&
                          dk_contains(out, "\nhi\n") && dk_contains(out, "Untagged: busybox:1.36"),
                      "docker %s:\n%s", cl->version, out);
        free(out);
    }
    berthd_finish(&e.b);
    finish(&e);
}
END_TEST

START_TEST(the_pull_stream_is_the_engines_messages_with_short_layer_ids_and_byte_counts)
{
    struct pf_env e;
    busybox_env(&e, "busybox:1.36");
    start(&e, NULL);
    char query[256];
    snprintf(query, sizeof(query), "fromImage=%s/busybox&tag=1.36", e.reg.host);
    struct hresp r;
    create(&e, query, NULL, &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    char ct[128];
    ck_assert_msg(hresp_header(&r, "Content-Type", ct, sizeof(ct)) &&
                      strcmp(ct, "application/json") == 0,
                  "%s", r.headers);
    json_object *lines = stream_lines(r.body);
    json_object *first = json_object_array_get_idx(lines, 0);
    ck_assert_str_eq(str_at(first, "status"), "Pulling from busybox");
    ck_assert_str_eq(str_at(first, "id"), "1.36");
    /* The one layer: its short id is 12 hex digits of its digest. */
    struct hresp img;
    char path[256];
    snprintf(path, sizeof(path), "/v1/images/%s/busybox:1.36", e.reg.host);
    http_get(&e.b, path, &img);
    ck_assert_int_eq(img.status, 200);
    const char *layer = str_at(json_object_array_get_idx(json_at(img.json, "layers"), 0), "digest");
    char id[13];
    snprintf(id, sizeof(id), "%s", layer + 7);
    int fs = find_line(lines, 1, "Pulling fs layer", id);
    int dl = find_line(lines, 1, "Downloading", id);
    int done = find_line(lines, 1, "Download complete", id);
    int complete = find_line(lines, 1, "Pull complete", id);
    ck_assert_msg(fs > 0 && dl > fs && done > dl && complete > done,
                  "layer %s: fs %d, downloading %d, complete %d, pull complete %d\n%s", id, fs, dl,
                  done, complete, r.body);
    /* Every Downloading line counts bytes of the layer's size; the last reaches it. */
    int64_t size = json_object_get_int64(
        json_at(json_object_array_get_idx(json_at(img.json, "layers"), 0), "size"));
    int64_t last = -1;
    for (int i = dl; i < done; i++) {
        json_object *l = json_object_array_get_idx(lines, (size_t)i);
        if (strcmp(str_at(l, "status"), "Downloading") != 0)
            continue;
        ck_assert_int_eq(json_object_get_int64(json_at(l, "progressDetail.total")), size);
        last = json_object_get_int64(json_at(l, "progressDetail.current"));
        ck_assert_int_le(last, size);
    }
    ck_assert_int_eq(last, size);
    size_t n = json_object_array_length(lines);
    char want[256];
    snprintf(want, sizeof(want), "Digest: %s", str_at(img.json, "digest"));
    ck_assert_str_eq(str_at(json_object_array_get_idx(lines, n - 2), "status"), want);
    snprintf(want, sizeof(want), "Status: Downloaded newer image for %s/busybox:1.36", e.reg.host);
    ck_assert_str_eq(str_at(json_object_array_get_idx(lines, n - 1), "status"), want);
    /* Written as the engine writes it: "/" unescaped, a line a "\r\n". */
    char raw[600];
    snprintf(raw, sizeof(raw), "{\"status\":\"%s\"}\r\n", want);
    ck_assert_msg(dk_contains(r.body, raw), "%s", r.body);
    hresp_free(&img);
    json_object_put(lines);
    hresp_free(&r);
    /* fromImage=name:tag, no tag: the same image, up to date, and only the
     * first line, the digest and the status. */
    snprintf(query, sizeof(query), "fromImage=%s/busybox:1.36", e.reg.host);
    create(&e, query, NULL, &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    lines = stream_lines(r.body);
    n = json_object_array_length(lines);
    ck_assert_str_eq(str_at(json_object_array_get_idx(lines, 0), "status"), "Pulling from busybox");
    snprintf(want, sizeof(want), "Status: Image is up to date for %s/busybox:1.36", e.reg.host);
    ck_assert_str_eq(str_at(json_object_array_get_idx(lines, n - 1), "status"), want);
    ck_assert_int_eq(find_line(lines, 0, "Downloading", NULL), -1);
    json_object_put(lines);
    hresp_free(&r);
    /* Bad input is a 400 before anything starts. */
    create(&e, "tag=1", NULL, &r);
    check_plain_error(&r, 400, "fromImage: required");
    hresp_free(&r);
    create(&e, "fromImage=Bad/UPPER&tag=1", NULL, &r);
    check_plain_error(&r, 400, "Bad/UPPER");
    hresp_free(&r);
    snprintf(query, sizeof(query), "fromImage=%s/busybox&tag=1.36&platform=linux/", e.reg.host);
    create(&e, query, NULL, &r);
    check_plain_error(&r, 400, "platform linux/");
    hresp_free(&r);
    create(&e, "fromSrc=-", NULL, &r);
    check_plain_error(&r, 400, "fromSrc");
    hresp_free(&r);
    berthd_finish(&e.b);
    finish(&e);
}
END_TEST

START_TEST(a_pull_by_digest_and_a_platform_from_an_index)
{
    struct pf_env e;
    busybox_env(&e, "busybox:1.36");
    pf_push(&e, "multi", "test/multi:1", NULL);
    start(&e, NULL);
    /* By digest, as the docker CLI sends it (tag=sha256:...): named by it. */
    char digest[128], query[512], want[512];
    snprintf(query, sizeof(query),
             "curl -sfI -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' "
             "http://%s/v2/busybox/manifests/1.36 | tr -d '\\r' | "
             "sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: //p'",
             e.reg.host);
    FILE *p = popen(query, "r");
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(fgets(digest, sizeof(digest), p));
    pclose(p);
    digest[strcspn(digest, "\n")] = '\0';
    for (size_t i = 0; i < nclis; i++) {
        char *out = NULL;
        int st = dk_run(&e.b, &clis[i], &out, "\"$D\" pull %s/busybox@%s", e.reg.host, digest);
        snprintf(want, sizeof(want), "Status: %s for %s/busybox@%s",
                 i == 0 ? "Downloaded newer image" : "Image is up to date", e.reg.host, digest);
        ck_assert_msg(st == 0 && dk_contains(out, want), "docker %s pull by digest: %d\n%s",
                      clis[i].version, st, out);
        snprintf(want, sizeof(want), "%s: Pulling from busybox", digest);
        ck_assert_msg(dk_contains(out, want), "docker %s:\n%s", clis[i].version, out);
        free(out);
    }
    /* An index: the platform asked for is the one pulled (base is the
     * host's entry), and one it does not have is refused naming it. */
    struct utsname u;
    uname(&u);
    const char *host = strcmp(u.machine, "aarch64") == 0 ? "linux/arm64" : "linux/amd64";
    snprintf(query, sizeof(query), "fromImage=%s/test/multi&tag=1&platform=%s", e.reg.host, host);
    struct hresp r;
    create(&e, query, NULL, &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    pf_manifest("base", digest);
    snprintf(want, sizeof(want), "Digest: %s", digest);
    ck_assert_msg(dk_contains(r.body, want), "%s", r.body);
    hresp_free(&r);
    snprintf(query, sizeof(query), "fromImage=%s/test/multi&tag=1&platform=linux/s390x",
             e.reg.host);
    create(&e, query, NULL, &r);
    check_plain_error(&r, 400, "s390x");
    hresp_free(&r);
    berthd_finish(&e.b);
    finish(&e);
}
END_TEST

START_TEST(docker_run_of_an_image_it_does_not_have_pulls_it_then_runs_it)
{
    struct pf_env e;
    busybox_env(&e, "busybox:latest");
    for (size_t i = 0; i < nclis; i++) {
        start(&e, NULL);
        const struct dk_client *cl = &clis[i];
        char *out = NULL;
        int st = dk_run(&e.b, cl, &out, "\"$D\" run --rm %s/busybox echo hi", e.reg.host);
        dk_track_all(&e.b);
        ck_assert_msg(st == 0, "docker %s run: %d\n%s", cl->version, st, out);
        char want[256];
        snprintf(want, sizeof(want), "Unable to find image '%s/busybox:latest' locally",
                 e.reg.host);
        ck_assert_msg(dk_contains(out, want) && dk_contains(out, "Pull complete") &&
                          dk_contains(out, "\nhi\n"),
                      "docker %s run:\n%s", cl->version, out);
        free(out);
        berthd_finish(&e.b);
    }
    finish(&e);
}
END_TEST

START_TEST(a_missing_image_and_an_unreachable_registry_fail_with_a_readable_message)
{
    struct pf_env e;
    busybox_env(&e, "busybox:1.36");
    start(&e, NULL);
    int port = rf_free_port();
    for (size_t i = 0; i < nclis; i++) {
        const struct dk_client *cl = &clis[i];
        char *out = NULL;
        int st = dk_run(&e.b, cl, &out, "\"$D\" pull %s/busybox:nosuch", e.reg.host);
        ck_assert_msg(st == 1 && dk_contains(out, "Error response from daemon: ") &&
                          dk_contains(out, "MANIFEST_UNKNOWN"),
                      "docker %s pull of a missing tag: %d\n%s", cl->version, st, out);
        free(out);
        st = dk_run(&e.b, cl, &out, "\"$D\" run --rm %s/nosuch/image:1 true", e.reg.host);
        ck_assert_msg(st == 125 && dk_contains(out, "Error response from daemon: ") &&
                          dk_contains(out, "nosuch/image"),
                      "docker %s run of a missing image: %d\n%s", cl->version, st, out);
        free(out);
        st = dk_run(&e.b, cl, &out, "\"$D\" pull 127.0.0.1:%d/busybox:1", port);
        char host[64];
        snprintf(host, sizeof(host), "127.0.0.1:%d", port);
        ck_assert_msg(st == 1 && dk_contains(out, "Error response from daemon: ") &&
                          dk_contains(out, host),
                      "docker %s pull from nowhere: %d\n%s", cl->version, st, out);
        free(out);
    }
    /* As the engine does: a plain error, with its status, when nothing was streamed yet. */
    char query[256];
    snprintf(query, sizeof(query), "fromImage=%s/busybox&tag=nosuch", e.reg.host);
    struct hresp r;
    create(&e, query, NULL, &r);
    check_plain_error(&r, 404, "MANIFEST_UNKNOWN");
    hresp_free(&r);
    snprintf(query, sizeof(query), "fromImage=127.0.0.1:%d/busybox&tag=1", port);
    create(&e, query, NULL, &r);
    char host[64];
    snprintf(host, sizeof(host), "registry 127.0.0.1:%d: ", port);
    check_plain_error(&r, 500, host);
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&e.b), 0);
    berthd_finish(&e.b);
    finish(&e);
}
END_TEST

/* The digest of layer 0 of repo:tag as the registry serves it. */
static void
registry_layer(const struct pf_env *e, const char *repo, const char *tag, char out[72])
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "curl -sf -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' -H "
             "'Accept: application/vnd.oci.image.manifest.v1+json' http://%s/v2/%s/manifests/%s | "
             "python3 -c 'import json,sys; print(json.load(sys.stdin)[\"layers\"][0][\"digest\"])'",
             e->reg.host, repo, tag);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char line[128] = "";
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), p));
    pclose(p);
    line[strcspn(line, "\n")] = '\0';
    snprintf(out, 72, "%s", line);
    ck_assert_int_eq(strncmp(out, "sha256:", 7), 0);
}

START_TEST(a_failure_after_the_stream_started_is_its_last_line_and_nothing_is_stored)
{
    struct pf_env e;
    busybox_env(&e, "busybox:1.36");
    /* The layer's blob, one byte changed near its end, in the registry's storage. */
    char layer[72];
    registry_layer(&e, "busybox", "1.36", layer);
    ck_assert(rf_corrupt_blob(&e.reg, layer));
    start(&e, NULL);
    char query[256];
    snprintf(query, sizeof(query), "fromImage=%s/busybox&tag=1.36", e.reg.host);
    struct hresp r;
    create(&e, query, NULL, &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    json_object *lines = stream_lines(r.body);
    json_object *last = json_object_array_get_idx(lines, json_object_array_length(lines) - 1);
    const char *msg = str_at(json_at(last, "errorDetail"), "message");
    ck_assert_msg(dk_contains(msg, layer) && strcmp(msg, str_at(last, "error")) == 0 &&
                      json_object_object_length(last) == 2,
                  "last line: %s", json_object_to_json_string(last));
    json_object_put(lines);
    hresp_free(&r);
    for (size_t i = 0; i < nclis; i++) {
        char *out = NULL;
        int st = dk_run(&e.b, &clis[i], &out, "\"$D\" pull %s/busybox:1.36", e.reg.host);
        ck_assert_msg(st == 1 && dk_contains(out, layer) && !dk_contains(out, "Status: "),
                      "docker %s pull of a corrupted blob: %d\n%s", clis[i].version, st, out);
        free(out);
    }
    ck_assert_int_eq(fx_image_count(&e.b), 0);
    berthd_finish(&e.b);
    finish(&e);
}
END_TEST

/* ---- credentials ---------------------------------------------------------------- */

/* base64url of text, as the docker CLI encodes X-Registry-Auth (static buffer). */
static const char *
b64url(const char *text)
{
    static char out[1024];
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "printf '%%s' '%s' | base64 -w0 | tr '+/' '-_'", text);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    out[0] = '\0';
    ck_assert_ptr_nonnull(fgets(out, sizeof(out), p));
    pclose(p);
    return out;
}

START_TEST(basic_auth_from_the_clients_config_reaches_the_registry_and_bad_headers_are_400)
{
    struct pf_env e;
    pf_init(&e);
    char htpasswd[PATH_MAX + 16], cmd[PATH_MAX + 128];
    snprintf(htpasswd, sizeof(htpasswd), "%s/htpasswd", e.work);
    snprintf(cmd, sizeof(cmd), "htpasswd -Bbc '%s' %s %s >/dev/null 2>&1", htpasswd, PF_USER,
             PF_PASS);
    ck_assert_int_eq(system(cmd), 0);
    pf_registry(&e, &(struct rf_registry_opts){.htpasswd = htpasswd});
    push_busybox(&e, "busybox:1.36", PF_USERPASS);
    for (size_t i = 0; i < nclis; i++) {
        start(&e, NULL);
        const struct dk_client *cl = &clis[i];
        /* No credentials: the registry's refusal, naming it, as the
         * engine words it (and never a prompt for a login). */
        char *out = NULL;
        int st = dk_run(&e.b, cl, &out, "\"$D\" pull %s/busybox:1.36", e.reg.host);
        ck_assert_msg(st == 1 && dk_contains(out, "pull access denied for ") &&
                          dk_contains(out, e.reg.host) && !dk_contains(out, "Username"),
                      "docker %s pull: %d\n%s", cl->version, st, out);
        free(out);
        /* The client's own config.json: it sends them in X-Registry-Auth. */
        char dir[PATH_MAX + 32], doc[512];
        snprintf(dir, sizeof(dir), "%s/docker-config", e.b.tmp);
        mkdir(dir, 0700);
        snprintf(dir, sizeof(dir), "%s/docker-config/config.json", e.b.tmp);
        snprintf(doc, sizeof(doc), "{\"auths\":{\"%s\":{\"auth\":\"%s\"}}}", e.reg.host,
                 PF_USERPASS_B64);
        rf_write(dir, doc);
        st = dk_run(&e.b, cl, &out, "\"$D\" pull %s/busybox:1.36", e.reg.host);
        ck_assert_msg(st == 0 && dk_contains(out, "Downloaded newer image"),
                      "docker %s pull: %d\n%s", cl->version, st, out);
        free(out);
        pf_assert_no_secret_logged(&e);
        berthd_finish(&e.b);
    }
    start(&e, NULL);
    char query[256], hdr[1200];
    snprintf(query, sizeof(query), "fromImage=%s/busybox&tag=1.36", e.reg.host);
    struct hresp r;
    /* Wrong password: 404 before any stream, as the engine answers a
     * registry's denial, and no secret in it. */
    snprintf(hdr, sizeof(hdr), "X-Registry-Auth: %s",
             b64url("{\"username\":\"" PF_USER "\",\"password\":\"no-" PF_PASS "\"}"));
    create(&e, query, hdr, &r);
    check_plain_error(&r, 404, "pull access denied for ");
    ck_assert_msg(dk_contains(r.body, e.reg.host), "%s", r.body);
    pf_assert_no_secret("an error body", r.body);
    hresp_free(&r);
    /* Not base64, not JSON, a password alone: 400 naming the header. */
    create(&e, query, "X-Registry-Auth: %%%", &r);
    check_plain_error(&r, 400, "invalid X-Registry-Auth header");
    hresp_free(&r);
    snprintf(hdr, sizeof(hdr), "X-Registry-Auth: %s", b64url("[1,2]"));
    create(&e, query, hdr, &r);
    check_plain_error(&r, 400, "invalid X-Registry-Auth header: not a JSON object");
    hresp_free(&r);
    snprintf(hdr, sizeof(hdr), "X-Registry-Auth: %s", b64url("{\"password\":\"" PF_PASS "\"}"));
    create(&e, query, hdr, &r);
    check_plain_error(&r, 400, "a password without a username");
    pf_assert_no_secret("an error body", r.body);
    hresp_free(&r);
    /* "auth" (base64 user:password) as config.json has it: 200. */
    snprintf(hdr, sizeof(hdr), "X-Registry-Auth: %s",
             b64url("{\"auth\":\"" PF_USERPASS_B64 "\",\"serveraddress\":\"x\"}"));
    create(&e, query, hdr, &r);
    ck_assert_msg(r.status == 200 && dk_contains(r.body, "Downloaded newer image"), "%ld %s",
                  r.status, r.body);
    pf_assert_no_secret("an answer", r.body);
    hresp_free(&r);
    pf_assert_no_secret_logged(&e);
    berthd_finish(&e.b);
    finish(&e);
}
END_TEST

START_TEST(an_identitytoken_in_x_registry_auth_is_exchanged_at_the_token_service)
{
    struct pf_env e;
    pf_init(&e);
    char cert[PATH_MAX + 16], realm[128], token_host[64];
    struct rf_helper tokens;
    pf_token_server(&e, (const char *[]){"--refresh-token", "refresh-" PF_PASS, NULL}, &tokens,
                    cert, realm, token_host);
    pf_registry(&e, &(struct rf_registry_opts){.token_realm = realm, .token_cert = cert});
    push_busybox(&e, "busybox:1.36", PF_USERPASS);
    start(&e, (const char *[]){"--insecure-registry", token_host, NULL});
    char query[256], hdr[1200];
    snprintf(query, sizeof(query), "fromImage=%s/busybox&tag=1.36", e.reg.host);
    struct hresp r;
    /* A wrong one: the token service refuses it, a plain error before any stream. */
    snprintf(hdr, sizeof(hdr), "X-Registry-Auth: %s",
             b64url("{\"identitytoken\":\"wrong\",\"username\":\"<token>\"}"));
    create(&e, query, hdr, &r);
    check_plain_error(&r, 404, "pull access denied for ");
    ck_assert_msg(rf_count_lines(tokens.log, "REFUSED bad refresh token") == 1, "%s", r.body);
    hresp_free(&r);
    /* The right one: exchanged (a POST grant), then the pull. */
    snprintf(hdr, sizeof(hdr), "X-Registry-Auth: %s",
             b64url("{\"identitytoken\":\"refresh-" PF_PASS "\"}"));
    create(&e, query, hdr, &r);
    ck_assert_msg(r.status == 200 && dk_contains(r.body, "Downloaded newer image"), "%ld %s",
                  r.status, r.body);
    hresp_free(&r);
    ck_assert_int_ge(rf_count_lines(tokens.log, "ISSUED repository:busybox:pull "), 1);
    char *log = berthd_log(&e.b);
    ck_assert_msg(!dk_contains(log, "refresh-" PF_PASS), "the identity token is in the log");
    free(log);
    berthd_finish(&e.b);
    finish(&e);
}
END_TEST

/* ---- docker-py ---------------------------------------------------------------- */

START_TEST(docker_py_images_pull_returns_the_image_and_a_missing_one_raises)
{
    struct dk_client pys[DK_MAX_CLIENTS];
    size_t npys = dk_pythons(pys);
    struct pf_env e;
    busybox_env(&e, "busybox:1.36");
    for (size_t i = 0; i < npys; i++) {
        start(&e, NULL);
        char *out = NULL;
        int st = dk_run(&e.b, &pys[i], &out,
                        "REGISTRY=%s \"$D\" '%s/tests/fixtures/docker_py_flows.py' pull '%s'",
                        e.reg.host, BERTH_SOURCE_DIR, dk_busybox_archive());
        dk_track_all(&e.b);
        ck_assert_msg(st == 0 && dk_contains(out, "ok pull"), "docker-py %s: %d\n%s",
                      pys[i].version, st, out);
        free(out);
        berthd_finish(&e.b);
    }
    finish(&e);
}
END_TEST

/* ---- hanging up --------------------------------------------------------------- */

/* Reads from fd until needle shows up; false on timeout or EOF. */
static bool
read_until(int fd, char *buf, size_t cap, const char *needle, int timeout_ms)
{
    size_t got = 0;
    double deadline = now_ms() + timeout_ms;
    while (now_ms() < deadline && got + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 200) <= 0)
            continue;
        ssize_t n = read(fd, buf + got, cap - got - 1);
        if (n <= 0)
            return false;
        got += (size_t)n;
        buf[got] = '\0';
        if (strstr(buf, needle))
            return true;
    }
    return false;
}

START_TEST(a_client_that_hangs_up_mid_pull_detaches_and_the_next_pull_joins_it)
{
    struct pf_env e;
    busybox_env(&e, "busybox:1.36");
    /* The layer comes at 200 kB/s: the pull lasts seconds. */
    pf_proxy(&e, (const char *[]){"--rate", "200000", NULL});
    start(&e, NULL);
    int fd = dk_connect(&e.b);
    ck_assert_int_ge(fd, 0);
    char req[512];
    int len = snprintf(req, sizeof(req),
                       "POST /v1.44/images/create?fromImage=%s/busybox&tag=1.36 HTTP/1.1\r\n"
                       "Host: docker\r\nContent-Length: 0\r\n\r\n",
                       pf_host(&e));
    ck_assert_int_eq(write(fd, req, (size_t)len), len);
    char buf[16384];
    ck_assert_msg(read_until(fd, buf, sizeof(buf), "\"Downloading\"", 30000), "no progress: %s",
                  buf);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "%s", buf);
    close(fd);
    /* Again, as a client that retries: it joins the pull and gets its end. */
    char query[256];
    snprintf(query, sizeof(query), "fromImage=%s/busybox&tag=1.36", pf_host(&e));
    struct hresp r;
    create(&e, query, NULL, &r);
    ck_assert_msg(r.status == 200 && dk_contains(r.body, "Status: Downloaded newer image"),
                  "%ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&e.b), 1);
    /* One GET of the layer blob: nothing was fetched twice. */
    ck_assert_int_eq(rf_count_lines2(e.proxy.log, "front GET /v2/busybox/blobs/", " 200 auth="), 2);
    char *log = berthd_log(&e.b);
    ck_assert_msg(!dk_contains(log, "cancelled"), "cancelled although a caller came back:\n%s",
                  log);
    free(log);
    berthd_finish(&e.b);
    finish(&e);
}
END_TEST

START_TEST(a_client_that_hangs_up_before_anything_was_sent_stops_waiting)
{
    struct pf_env e;
    busybox_env(&e, "busybox:1.36");
    pf_proxy(&e, NULL);
    start_env(&e, NULL, (const char *[]){"BERTH_TEST_PULL_GRACE_MS=1000", NULL});
    /* The registry stops answering: the manifest request hangs, nothing is
     * streamed, and the client gives up. The daemon sees the hang-up on
     * the idle socket and drops its interest, so the pull nobody waits for
     * is cancelled after its grace. */
    kill(e.proxy.pid, SIGSTOP);
    char query[256];
    snprintf(query, sizeof(query), "/images/create?fromImage=%s/busybox&tag=1.36", pf_host(&e));
    struct hresp r;
    http_do(&e.b,
            &(struct hreq){.method = "POST", .path = query, .docker = true, .timeout_ms = 1000},
            &r);
    ck_assert_int_eq(r.status, 0);
    hresp_free(&r);
    double deadline = now_ms() + 10000;
    while (rf_count_lines(e.b.log_path, "cancelled: no caller has waited for it") < 1 &&
           now_ms() < deadline)
        sleep_ms(50);
    kill(e.proxy.pid, SIGCONT);
    ck_assert_msg(rf_count_lines(e.b.log_path, "cancelled: no caller has waited for it") == 1,
                  "the pull of a client that hung up was not cancelled");
    ck_assert(wait_health_int(&e.b, "jobs.running", 0, 10000));
    pf_assert_nothing_stored(&e);
    berthd_finish(&e.b);
    finish(&e);
}
END_TEST

static Suite *
docker_pull_suite(void)
{
    Suite *s = suite_create("api_docker_pull");
    TCase *tc = tcase_create("pull");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, setup, NULL);
    ctr_add_fixture(tc);
    tcase_add_test(tc, docker_pull_by_tag_then_again_up_to_date_and_the_image_is_listed);
    tcase_add_test(tc, docker_pull_of_a_docker_io_name_through_a_mirror_speaks_as_the_engine);
    tcase_add_test(tc,
                   the_pull_stream_is_the_engines_messages_with_short_layer_ids_and_byte_counts);
    tcase_add_test(tc, a_pull_by_digest_and_a_platform_from_an_index);
    tcase_add_test(tc, docker_run_of_an_image_it_does_not_have_pulls_it_then_runs_it);
    tcase_add_test(tc, a_missing_image_and_an_unreachable_registry_fail_with_a_readable_message);
    tcase_add_test(tc, a_failure_after_the_stream_started_is_its_last_line_and_nothing_is_stored);
    tcase_add_test(tc,
                   basic_auth_from_the_clients_config_reaches_the_registry_and_bad_headers_are_400);
    tcase_add_test(tc, an_identitytoken_in_x_registry_auth_is_exchanged_at_the_token_service);
    tcase_add_test(tc, docker_py_images_pull_returns_the_image_and_a_missing_one_raises);
    tcase_add_test(tc, a_client_that_hangs_up_mid_pull_detaches_and_the_next_pull_joins_it);
    tcase_add_test(tc, a_client_that_hangs_up_before_anything_was_sent_stops_waiting);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    if (!pf_tools_present("api_docker_pull"))
        return 77;
    if (!fx_build(false)) {
        fx_cleanup();
        return 1;
    }
    int rc = harness_run_suite(docker_pull_suite());
    fx_cleanup();
    return rc;
}
