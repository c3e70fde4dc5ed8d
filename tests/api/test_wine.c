/*
 * berthd.exe under Wine, driven over HTTP from the Linux side: --version,
 * health and metrics, the runtime's absence (Wine has no computecore.dll),
 * image imports (an upload and a layout directory) with their
 * verification and the Windows platform check, and a volume's tar round
 * trip with a copy-on-write child, and --service under sc.exe. Every
 * test ends with a Ctrl-C (SIGINT, which Wine delivers as the console's
 * Ctrl-C) and checks the clean exit.
 *
 * It needs berthd.exe and Wine, so it is not part of the Linux suite:
 * scripts/build-windows.sh runs it through the Windows build's CTest with
 * BERTH_TEST_BERTHD (berthd.exe) and BERTH_TEST_WINE (wine64) set
 * (cmake/windows.cmake). Without them it skips (77) and says why.
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/api/harness.h"
#include "tests/api/wine_image.h"
#include "tests/fixtures/imgfix.h"

static int
sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(version_prints_and_exits_0)
{
    const char *args[] = {"--version", NULL};
    char *out = NULL, *err = NULL;
    int st = berthd_run(args, NULL, 60000, &out, &err);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d, stderr %s", st, err);
    ck_assert_msg(strncmp(out, "berthd 0.", 9) == 0, "stdout: %s", out);
    free(out);
    free(err);
}
END_TEST

START_TEST(health_says_hcs_is_missing_and_metrics_count_it)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    /* Degraded, not failed: images and volumes work without a runtime. */
    ck_assert_msg(r.status == 503, "health: %ld %s", r.status, r.body);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "status")), "degraded");
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "runtime.name")), "hcs");
    ck_assert(!json_object_get_boolean(json_at(r.json, "runtime.usable")));
    /* The hcs driver's own reason: the load's error and what HCS needs follow. */
    const char *reason = json_object_get_string(json_at(r.json, "runtime.reason"));
    ck_assert_msg(reason && strncmp(reason, "computecore.dll not found", 25) == 0, "reason %s",
                  reason);
    ck_assert(json_object_get_boolean(json_at(r.json, "store.writable")));
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "store.layer_format")), "wcifs");
    /* The root as Windows names it: the Linux path on Wine's drive Z:. */
    const char *root = json_object_get_string(json_at(r.json, "store.root"));
    ck_assert_msg(root && strncmp(root, "Z:/", 3) == 0 && strstr(root, b.root + 1), "root %s",
                  root);
    hresp_free(&r);

    http_get(&b, "/v1/metrics", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(strstr(r.body, "berth_http_requests_total{route=\"/v1/health\",method=\"GET\","
                                 "status=\"503\"} 1"),
                  "metrics: %s", r.body);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

/*
 * The hcs driver opens where computecore.dll is missing, unusable (health
 * says why): the container routes answer as on a Linux host whose runc is
 * missing, a list with nothing in it and a create that fails on what it
 * names first, never a 500.
 */
START_TEST(container_routes_answer_without_hcs)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    struct hresp r;
    http_get(&b, "/v1/containers", &r);
    ck_assert_msg(r.status == 200, "list: %ld %s", r.status, r.body);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "containers")), 0);
    hresp_free(&r);
    http_post_json(&b, "/v1/containers", "{\"image\": \"x\"}", &r);
    ck_assert_msg(r.status == 404 || r.status == 503, "create: %ld %s", r.status, r.body);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

/* How many times the computestorage double saw fn (its calls.log in rec). */
static int
storage_calls(const char *rec, const char *fn)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/calls.log", rec);
    size_t len = 0;
    char *log = fx_read_file(path, &len);
    int n = 0;
    char pat[96];
    snprintf(pat, sizeof(pat), " %s ", fn);
    for (char *p = log; p && (p = strstr(p, pat)) != NULL; p++)
        n++;
    free(log);
    return n;
}

/* The document of the first call of fn the double logged (caller frees), or NULL. */
static char *
storage_doc(const char *rec, const char *fn)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/calls.log", rec);
    size_t len = 0;
    char *log = fx_read_file(path, &len);
    unsigned seq = 0;
    for (char *line = log ? strtok(log, "\n") : NULL; line && !seq; line = strtok(NULL, "\n")) {
        unsigned s;
        char name[64];
        if (sscanf(line, "%u %63s", &s, name) == 2 && strcmp(name, fn) == 0)
            seq = s;
    }
    free(log);
    if (!seq)
        return NULL;
    snprintf(path, sizeof(path), "%s/%04u-%s.json", rec, seq, fn);
    return fx_read_file(path, &len);
}

/*
 * berthd.exe imports a Windows image's layers through computestorage.dll
 * and (a base layer's blank VHDXs) virtdisk.dll: here the TEST DOUBLEs
 * (tests/doubles/, loaded through BERTH_TEST_HCS_STORAGE_DLL and
 * BERTH_TEST_VIRTDISK_DLL), which log every call in rec.
 */
static void
start_with_storage_double(struct berthd *b, char *rec, size_t rec_len, char env[4][PATH_MAX * 2])
{
    const char *dbl = getenv("BERTH_TEST_HCS_STORAGE_DOUBLE");
    const char *vdbl = getenv("BERTH_TEST_VIRTDISK_DOUBLE");
    ck_assert_msg(dbl && *dbl && vdbl && *vdbl,
                  "BERTH_TEST_HCS_STORAGE_DOUBLE or BERTH_TEST_VIRTDISK_DOUBLE is not set");
    harness_mkdtemp(b->tmp, sizeof(b->tmp));
    snprintf(rec, rec_len, "%s/storage-rec", b->tmp);
    mkdir(rec, 0700);
    char win[PATH_MAX + 8];
    harness_wine_path(dbl, win, sizeof(win));
    snprintf(env[0], PATH_MAX * 2, "BERTH_TEST_HCS_STORAGE_DLL=%s", win);
    harness_wine_path(rec, win, sizeof(win));
    snprintf(env[1], PATH_MAX * 2, "BERTH_HCS_STORAGE_DOUBLE_DIR=%s", win);
    snprintf(env[3], PATH_MAX * 2, "BERTH_VIRTDISK_DOUBLE_DIR=%s", win);
    harness_wine_path(vdbl, win, sizeof(win));
    snprintf(env[2], PATH_MAX * 2, "BERTH_TEST_VIRTDISK_DLL=%s", win);
    struct berthd_opts o = {.env = {env[0], env[1], env[2], env[3], NULL}};
    berthd_start(b, &o);
}

START_TEST(imports_check_digests_and_the_windows_build)
{
    struct berthd b = {0};
    char rec[PATH_MAX + 32], env[4][PATH_MAX * 2];
    start_with_storage_double(&b, rec, sizeof(rec), env);
    char dir[PATH_MAX + 32];
    struct hresp r;

    /* A Linux image is refused, and the refusal names the host. */
    snprintf(dir, sizeof(dir), "%s/linux", b.tmp);
    make_layout(dir, "linux", NULL, "lin", false, false, false);
    upload_layout(&b, dir, NULL, &r);
    ck_assert_error_reply(&r, 422, "invalid_content", "this host runs windows/amd64");
    char host[64];
    host_build_from(&r, host, sizeof(host));
    hresp_free(&r);

    /* A Windows image of another build: no process isolation across
     * builds before 20348, none for a newer image ever. */
    snprintf(dir, sizeof(dir), "%s/newer", b.tmp);
    make_layout(dir, "windows", "10.0.99999.1", "newer", false, false, false);
    upload_layout(&b, dir, NULL, &r);
    ck_assert_error_reply(&r, 422, "invalid_content", "10.0.99999");
    hresp_free(&r);

    /* A corrupt layer of the right build: the digest check refuses it. */
    char osv[80];
    snprintf(osv, sizeof(osv), "%s.1", host);
    snprintf(dir, sizeof(dir), "%s/corrupt", b.tmp);
    make_layout(dir, "windows", osv, "corrupt", true, false, false);
    upload_layout(&b, dir, NULL, &r);
    ck_assert_msg(r.status == 422, "corrupt layer: %ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&b), 0);

    /* Nothing of them reached the platform's layer writer. */
    ck_assert_int_eq(storage_calls(rec, "HcsImportLayer"), 0);
    ck_assert_int_eq(storage_calls(rec, "HcsSetupBaseOSLayer"), 0);

    /* A hostile name in a Windows layer: refused, naming it, nothing kept,
     * and the layer beneath it (set up already) collected again. */
    snprintf(dir, sizeof(dir), "%s/hostile", b.tmp);
    make_layout(dir, "windows", osv, "hostile", false, true, true);
    upload_layout(&b, dir, NULL, &r);
    ck_assert_error_reply(&r, 422, "invalid_content", "escape.txt");
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&b), 0);
    ck_assert_int_eq(storage_calls(rec, "HcsImportLayer"), 0);

    /* The host's own build, as an upload and as a layout directory: a
     * base layer and a child, the base set up in place, the child
     * imported with the base as its parent. */
    snprintf(dir, sizeof(dir), "%s/good", b.tmp);
    make_layout(dir, "windows", osv, "good", false, true, false);
    int setups = storage_calls(rec, "HcsSetupBaseOSLayer");
    upload_layout(&b, dir, "?name=win/up:1", &r);
    ck_assert_msg(r.status == 201, "upload: %ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(storage_calls(rec, "HcsSetupBaseOSLayer"), setups + 1);
    /* Its blank VHDXs too: blank-base.vhdx formatted, blank.vhdx over it. */
    ck_assert_int_eq(storage_calls(rec, "HcsFormatWritableLayerVhd"), setups + 1);
    ck_assert_int_eq(storage_calls(rec, "HcsImportLayer"), 1);
    /* LayerData names one parent, the base layer's snapshot folder. */
    char *doc = storage_doc(rec, "HcsImportLayer");
    int ids = 0;
    for (char *p = doc; p && (p = strstr(p, "\"Id\"")) != NULL; p++)
        ids++;
    ck_assert_msg(doc && strstr(doc, "\"SchemaVersion\":{\"Major\":2") &&
                      strstr(doc, "snapshots") && ids == 1,
                  "LayerData: %s", doc ? doc : "(none)");
    free(doc);
    fx_import_layout(&b, "?name=win/dir:1", dir, NULL, &r);
    ck_assert_msg(r.status == 201 || r.status == 200, "layout: %ld %s", r.status, r.body);
    hresp_free(&r);
    /* Its layers were stored already: nothing imported twice. */
    ck_assert_int_eq(storage_calls(rec, "HcsImportLayer"), 1);

    http_get(&b, "/v1/images/win/up:1", &r);
    ck_assert_msg(r.status == 200, "get: %ld %s", r.status, r.body);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "platform.os")), "windows");
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "platform.os_version")), osv);
    hresp_free(&r);
    /* One image by two names: the layout directory held the same one. */
    http_get(&b, "/v1/images/win/dir:1", &r);
    ck_assert_msg(r.status == 200, "get: %ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(fx_image_count(&b), 1);
    berthd_finish(&b);
}
END_TEST

/* PUT a tar file into a volume; returns the status. */
static long
put_tar(struct berthd *b, const char *vol, const char *file)
{
    char cmd[PATH_MAX * 3];
    snprintf(cmd, sizeof(cmd),
             "curl -s -o /dev/null -w '%%{http_code}' -X PUT --data-binary @%s "
             "'%s/v1/volumes/%s/files?path=/'",
             file, b->base_url, vol);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    long st = 0;
    if (fscanf(p, "%ld", &st) != 1)
        st = 0;
    pclose(p);
    return st;
}

/* GETs a volume's tree into dir (made) with tar; 0 on success. */
static int
get_tree(struct berthd *b, const char *vol, const char *dir)
{
    return sh("mkdir -p %s && curl -sf '%s/v1/volumes/%s/files?path=/' | tar -C %s -xf -", dir,
              b->base_url, vol, dir);
}

START_TEST(volume_tar_round_trip_and_a_copied_child)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    struct hresp r;
    http_post_json(&b, "/v1/volumes", "{\"handle\": \"wv\"}", &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    hresp_free(&r);

    ck_assert_int_eq(sh("mkdir -p %s/src/d/e && for i in $(seq 1 50); do echo file $i > "
                        "%s/src/d/f$i; done && echo deep > %s/src/d/e/deep && "
                        "head -c 300000 /dev/urandom > %s/src/big",
                        b.tmp, b.tmp, b.tmp, b.tmp),
                     0);
    /* Past MAX_PATH (260): the volume's own path plus these 400 bytes
     * needs the \\?\ form at the OS boundary. */
    char deep[512] = "";
    for (int i = 0; i < 6; i++)
        snprintf(deep + strlen(deep), sizeof(deep) - strlen(deep), "/%s%d",
                 "a-rather-long-directory-name-to-pass-max-path-quickly-xxxxxx", i);
    ck_assert_int_eq(sh("mkdir -p %s/src%s && echo long > %s/src%s/leaf && "
                        "tar -C %s/src -cf %s/in.tar .",
                        b.tmp, deep, b.tmp, deep, b.tmp, b.tmp),
                     0);
    char tarp[PATH_MAX + 16];
    snprintf(tarp, sizeof(tarp), "%s/in.tar", b.tmp);
    ck_assert_int_eq(put_tar(&b, "wv", tarp), 200);
    char out[PATH_MAX + 16];
    snprintf(out, sizeof(out), "%s/out", b.tmp);
    ck_assert_int_eq(get_tree(&b, "wv", out), 0);
    ck_assert_int_eq(sh("diff -r %s/src %s", b.tmp, out), 0);

    /* A hostile tar is refused and changes nothing. */
    ck_assert_int_eq(sh("python3 -c \"import tarfile, io; t = tarfile.open('%s/bad.tar', 'w'); "
                        "i = tarfile.TarInfo('../escape'); i.size = 1; "
                        "t.addfile(i, io.BytesIO(b'x')); t.close()\"",
                        b.tmp),
                     0);
    snprintf(tarp, sizeof(tarp), "%s/bad.tar", b.tmp);
    long st = put_tar(&b, "wv", tarp);
    ck_assert_msg(st >= 400 && st < 500, "hostile tar: %ld", st);
    ck_assert_int_eq(sh("test ! -e %s/volumes/escape && test ! -e %s/escape", b.root, b.root), 0);
    snprintf(out, sizeof(out), "%s/out2", b.tmp);
    ck_assert_int_eq(get_tree(&b, "wv", out), 0);
    ck_assert_int_eq(sh("diff -r %s/src %s", b.tmp, out), 0);

    /* The child is a copy: it starts with the parent's files, and
     * neither sees the other's later writes. */
    http_post_json(&b, "/v1/volumes", "{\"handle\": \"wc\", \"parent\": \"wv\"}", &r);
    ck_assert_msg(r.status == 201, "child: %ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(sh("mkdir -p %s/more && echo child > %s/more/only-child && "
                        "tar -C %s/more -cf %s/more.tar .",
                        b.tmp, b.tmp, b.tmp, b.tmp),
                     0);
    snprintf(tarp, sizeof(tarp), "%s/more.tar", b.tmp);
    ck_assert_int_eq(put_tar(&b, "wc", tarp), 200);
    snprintf(out, sizeof(out), "%s/child", b.tmp);
    ck_assert_int_eq(get_tree(&b, "wc", out), 0);
    ck_assert_int_eq(sh("diff -r %s/src/d %s/d && cmp %s/src/big %s/big && grep -qx child "
                        "%s/only-child",
                        b.tmp, out, b.tmp, out, out),
                     0);
    snprintf(out, sizeof(out), "%s/parent", b.tmp);
    ck_assert_int_eq(get_tree(&b, "wv", out), 0);
    ck_assert_int_eq(sh("diff -r %s/src %s", b.tmp, out), 0);

    http_do(&b, &(struct hreq){.method = "DELETE", .path = "/v1/volumes/wv?force=1"}, &r);
    ck_assert_msg(r.status == 200, "delete: %ld %s", r.status, r.body);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

/* A free loopback port (the kernel's pick, released again). */
static unsigned
free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* The service's state from sc query: 1 stopped, 4 running, 0 unknown. */
static int
service_state(const char *name)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "'%s' sc query %s 2>/dev/null | tr -d '\\r' | "
             "sed -n 's/^ *STATE *: *\\([0-9]*\\).*/\\1/p'",
             harness_wine(), name);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    int st = 0;
    if (fscanf(p, "%d", &st) != 1)
        st = 0;
    pclose(p);
    return st;
}

START_TEST(service_starts_serves_and_stops_under_sc)
{
    /* Wine ends services when its last ordinary process exits (a Windows
     * host does not): a daemon of the harness's keeps one running. */
    struct berthd keep = {0};
    berthd_start(&keep, NULL);

    char name[64], exe[PATH_MAX + 8], root[PATH_MAX + 32], wroot[PATH_MAX + 40];
    snprintf(name, sizeof(name), "berth-test-%ld", (long)getpid());
    harness_wine_path(harness_berthd_path(), exe, sizeof(exe));
    snprintf(root, sizeof(root), "%s/svcroot", keep.tmp);
    harness_wine_path(root, wroot, sizeof(wroot));
    unsigned port = free_port();
    ck_assert_int_eq(sh("'%s' sc create %s binpath= '%s --service --root %s --listen "
                        "127.0.0.1:%u' >/dev/null",
                        harness_wine(), name, exe, wroot, port),
                     0);
    ck_assert_int_eq(sh("'%s' sc start %s >/dev/null", harness_wine(), name), 0);

    struct berthd svc = {.port = port};
    snprintf(svc.base_url, sizeof(svc.base_url), "http://127.0.0.1:%u", port);
    struct hresp r = {0};
    double deadline = now_ms() + 60000;
    do {
        hresp_free(&r);
        sleep_ms(200);
        http_do(&svc, &(struct hreq){.method = "GET", .path = "/v1/health", .timeout_ms = 2000},
                &r);
    } while (r.status == 0 && now_ms() < deadline);
    ck_assert_msg(r.status == 503, "health of the service: %ld %s", r.status, r.body);
    /* The hcs driver's own reason: the load's error and what HCS needs follow. */
    const char *reason = json_object_get_string(json_at(r.json, "runtime.reason"));
    ck_assert_msg(reason && strncmp(reason, "computecore.dll not found", 25) == 0, "reason %s",
                  reason);
    hresp_free(&r);

    /* The control manager's stop is the orderly shutdown. */
    ck_assert_int_eq(sh("'%s' sc stop %s >/dev/null", harness_wine(), name), 0);
    deadline = now_ms() + 30000;
    while (service_state(name) != 1 && now_ms() < deadline)
        sleep_ms(200);
    int state = service_state(name);
    sh("'%s' sc delete %s >/dev/null", harness_wine(), name);
    ck_assert_msg(state == 1, "service state %d after sc stop", state);
    char logp[PATH_MAX + 48];
    snprintf(logp, sizeof(logp), "%s/berthd.log", root);
    size_t len = 0;
    char *log = fx_read_file(logp, &len);
    ck_assert_msg(log && strstr(log, "service stop: shutting down") && strstr(log, "stopped"),
                  "service log: %s", log ? log : "(none)");
    free(log);
    berthd_finish(&keep);
}
END_TEST

int
main(void)
{
    if (!harness_wine()) {
        fprintf(stderr, "test_wine: BERTH_TEST_WINE is not set; scripts/build-windows.sh runs "
                        "this suite against berthd.exe under Wine\n");
        return 77;
    }
    Suite *s = suite_create("wine");
    TCase *tc = tcase_create("berthd.exe");
    /* Wine's start-ups and its slower file calls. */
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, version_prints_and_exits_0);
    tcase_add_test(tc, health_says_hcs_is_missing_and_metrics_count_it);
    tcase_add_test(tc, container_routes_answer_without_hcs);
    tcase_add_test(tc, imports_check_digests_and_the_windows_build);
    tcase_add_test(tc, volume_tar_round_trip_and_a_copied_child);
    tcase_add_test(tc, service_starts_serves_and_stops_under_sc);
    suite_add_tcase(s, tc);
    return harness_run_suite(s);
}
