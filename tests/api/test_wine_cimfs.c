/*
 * berthd.exe under Wine with --runtime hcs and --layer-format: what
 * start-up makes of it and /v1/health reports as store.layer_format.
 * auto on Wine's own build is wcifs; with the build a test build may be
 * told (BERTH_TEST_WINDOWS_BUILD) and the TEST DOUBLE of cimfs.dll
 * (tests/doubles/cimfs/, through BERTH_TEST_CIMFS_DLL) it is cimfs, and
 * wcifs again when the DLL does not load; an explicit cimfs where the
 * build or the DLL is missing stops the start with one line naming why.
 * The double is not CimFS: these show the choice, not a real mount.
 *
 * With cimfs in use, an image's container goes through CimFS: its layers
 * written into forked CIMs from the image store at the first container
 * (the next one writes none), the top-most CIM mounted, a scratch VHDX
 * with the UnionFS filter over it (the storage doubles of
 * computestorage.dll and virtdisk.dll), the container document given the
 * one CIM volume as its layer and the scratch's volume as its storage;
 * the delete undoes it, and a berthd.exe killed in the middle of a
 * delete leaves a journal entry that the next one finishes at start-up.
 *
 * scripts/build-windows.sh runs it through the Windows build's CTest
 * with BERTH_TEST_BERTHD, BERTH_TEST_WINE, BERTH_TEST_HCS_DOUBLE and
 * BERTH_TEST_CIMFS_DOUBLE set (cmake/windows.cmake). Without them it
 * skips (77).
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/api/harness.h"
#include "tests/api/wine_image.h"

struct env {
    char v[4][PATH_MAX * 2];
    const char *list[5];
};

/* The doubles' DLLs (Windows paths), the build to report (NULL: Wine's own),
 * and the cimfs.dll to load (NULL: the double). */
static void
env_fill(struct env *e, const char *build, const char *cimfs_dll)
{
    char hcs[PATH_MAX + 8], cim[PATH_MAX + 8];
    harness_wine_path(getenv("BERTH_TEST_HCS_DOUBLE"), hcs, sizeof(hcs));
    harness_wine_path(getenv("BERTH_TEST_CIMFS_DOUBLE"), cim, sizeof(cim));
    size_t n = 0;
    snprintf(e->v[n], sizeof(e->v[n]), "BERTH_TEST_HCS_DLL=%s", hcs);
    e->list[n] = e->v[n], n++;
    snprintf(e->v[n], sizeof(e->v[n]), "BERTH_TEST_CIMFS_DLL=%s", cimfs_dll ? cimfs_dll : cim);
    e->list[n] = e->v[n], n++;
    if (build) {
        snprintf(e->v[n], sizeof(e->v[n]), "BERTH_TEST_WINDOWS_BUILD=%s", build);
        e->list[n] = e->v[n], n++;
    }
    e->list[n] = NULL;
}

/* store.layer_format of a berthd.exe started with args and e. */
static void
check_format(const char *const *args, struct env *e, const char *want)
{
    struct berthd b = {0};
    struct berthd_opts o = {0};
    for (size_t i = 0; args[i]; i++)
        o.args[i] = args[i];
    for (size_t i = 0; e->list[i]; i++)
        o.env[i] = e->list[i];
    berthd_start(&b, &o);
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    ck_assert_msg(r.status == 200 || r.status == 503, "status %ld", r.status);
    const char *got = json_object_get_string(json_at(r.json, "store.layer_format"));
    ck_assert_msg(got && strcmp(got, want) == 0, "layer_format %s, want %s: %s",
                  got ? got : "(none)", want, r.body);
    hresp_free(&r);
    berthd_finish(&b);
}

START_TEST(auto_on_wines_own_build_is_wcifs)
{
    struct env e;
    env_fill(&e, NULL, NULL);
    check_format((const char *[]){"--runtime", "hcs", NULL}, &e, "wcifs");
}
END_TEST

START_TEST(auto_where_the_build_and_cimfs_dll_have_it_is_cimfs)
{
    struct env e;
    env_fill(&e, "26100.1", NULL);
    check_format((const char *[]){"--runtime", "hcs", NULL}, &e, "cimfs");
    env_fill(&e, "20348.2031", NULL);
    check_format((const char *[]){"--runtime", "hcs", "--layer-format", "auto", NULL}, &e, "cimfs");
}
END_TEST

START_TEST(auto_falls_back_to_wcifs_when_cimfs_dll_does_not_load_or_the_build_is_older)
{
    struct env e;
    env_fill(&e, "26100.1", "Z:\\nonexistent\\cimfs.dll");
    check_format((const char *[]){"--runtime", "hcs", NULL}, &e, "wcifs");
    env_fill(&e, "20348.2030", NULL);
    check_format((const char *[]){"--runtime", "hcs", NULL}, &e, "wcifs");
}
END_TEST

START_TEST(an_explicit_wcifs_is_kept_where_cimfs_could_run)
{
    struct env e;
    env_fill(&e, "26100.1", NULL);
    check_format((const char *[]){"--runtime", "hcs", "--layer-format", "wcifs", NULL}, &e,
                 "wcifs");
}
END_TEST

START_TEST(an_explicit_cimfs_the_host_cannot_run_stops_the_start_naming_why)
{
    static const struct {
        const char *build, *dll, *mention;
    } cases[] = {
        {"20348.2030", NULL, "--layer-format cimfs: Windows build 20348.2030 has no CimFS"},
        {NULL, NULL, "has no CimFS for containers"},
        {"26100.1", "Z:\\nonexistent\\cimfs.dll", "--layer-format cimfs: cimfs.dll at"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct env e;
        env_fill(&e, cases[i].build, cases[i].dll);
        char *out, *err;
        int st = berthd_run((const char *[]){"--runtime", "hcs", "--layer-format", "cimfs", NULL},
                            e.list, 60000, &out, &err);
        ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2,
                      "case %zu: status 0x%x, stderr: %s", i, st, err);
        ck_assert_msg(strstr(err, "berthd: ") && strstr(err, cases[i].mention),
                      "case %zu: stderr does not say %s: %s", i, cases[i].mention, err);
        free(out);
        free(err);
    }
    /* The same flag on a host that has it starts. */
    struct env e;
    env_fill(&e, "26100.1", NULL);
    check_format((const char *[]){"--runtime", "hcs", "--layer-format", "cimfs", NULL}, &e,
                 "cimfs");
}
END_TEST

/* ---- image containers on CimFS ---- */

/* One berthd.exe on the doubles with cimfs in use, and where the doubles log. */
struct cimd {
    struct berthd b;
    const char *format; /* --layer-format: NULL is cimfs */
    char cimrec[PATH_MAX + 16], storage[PATH_MAX + 16], hcsrec[PATH_MAX + 16];
    char env[10][PATH_MAX * 2];
};

static void
cimd_env(struct cimd *c, size_t *n, const char *name, const char *path)
{
    char win[PATH_MAX + 8];
    harness_wine_path(path, win, sizeof(win));
    snprintf(c->env[*n], sizeof(c->env[*n]), "%s=%s", name, win);
    (*n)++;
}

/* Starts (or, with c->b.tmp set, restarts on the same root) berthd.exe. */
static void
cimd_start(struct cimd *c)
{
    const char *sdbl = getenv("BERTH_TEST_HCS_STORAGE_DOUBLE");
    const char *vdbl = getenv("BERTH_TEST_VIRTDISK_DOUBLE");
    ck_assert_msg(sdbl && *sdbl && vdbl && *vdbl,
                  "BERTH_TEST_HCS_STORAGE_DOUBLE or BERTH_TEST_VIRTDISK_DOUBLE is not set");
    if (!c->b.tmp[0])
        harness_mkdtemp(c->b.tmp, sizeof(c->b.tmp));
    snprintf(c->cimrec, sizeof(c->cimrec), "%s/cimfs-rec", c->b.tmp);
    snprintf(c->storage, sizeof(c->storage), "%s/storage-rec", c->b.tmp);
    snprintf(c->hcsrec, sizeof(c->hcsrec), "%s/hcs-rec", c->b.tmp);
    mkdir(c->cimrec, 0700);
    mkdir(c->storage, 0700);
    mkdir(c->hcsrec, 0700);
    size_t n = 0;
    cimd_env(c, &n, "BERTH_TEST_HCS_DLL", getenv("BERTH_TEST_HCS_DOUBLE"));
    cimd_env(c, &n, "BERTH_TEST_CIMFS_DLL", getenv("BERTH_TEST_CIMFS_DOUBLE"));
    cimd_env(c, &n, "BERTH_TEST_HCS_STORAGE_DLL", sdbl);
    cimd_env(c, &n, "BERTH_TEST_VIRTDISK_DLL", vdbl);
    cimd_env(c, &n, "BERTH_CIMFS_DOUBLE_DIR", c->cimrec);
    cimd_env(c, &n, "BERTH_HCS_STORAGE_DOUBLE_DIR", c->storage);
    cimd_env(c, &n, "BERTH_VIRTDISK_DOUBLE_DIR", c->storage);
    cimd_env(c, &n, "BERTH_HCS_DOUBLE_DIR", c->hcsrec);
    bool block = c->format && strcmp(c->format, "blockcim") == 0;
    snprintf(c->env[n++], sizeof(c->env[0]), "BERTH_TEST_WINDOWS_BUILD=%s",
             block ? "27766.1" : "26100.1");
    struct berthd_opts o = {
        .args = {"--runtime", "hcs", "--layer-format", c->format ? c->format : "cimfs", NULL}};
    for (size_t i = 0; i < n; i++)
        o.env[i] = c->env[i];
    berthd_start(&c->b, &o);
}

/* How many lines of the log in dir hold what. */
static int
log_count(const char *dir, const char *what)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/calls.log", dir);
    size_t len = 0;
    char *log = fx_read_file(path, &len);
    int n = 0;
    for (char *p = log; p && (p = strstr(p, what)) != NULL; p++)
        n++;
    free(log);
    return n;
}

/* How many names not starting with '.' <dir>/<sub> holds. */
static int
dir_count(const char *dir, const char *sub)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/%s", dir, sub);
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* How many CIMs the cimfs.dll double has mounted now. */
static int
cims_mounted(const struct cimd *c)
{
    return dir_count(c->cimrec, "mounts");
}

/* How many files <root>/cims holds. */
static int
cims_files(const struct cimd *c)
{
    return dir_count(c->b.root, "cims");
}

static bool
cimd_journaled(const struct cimd *c, const char *handle)
{
    char path[PATH_MAX + 96];
    snprintf(path, sizeof(path), "%s/mounts/container.%s.rootfs.mnt", c->b.root, handle);
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Imports a Windows image of the host's build as win/cim:1. */
static void
import_image(struct cimd *c)
{
    char dir[PATH_MAX + 32], host[64], osv[80];
    struct hresp r;
    snprintf(dir, sizeof(dir), "%s/linux", c->b.tmp);
    make_layout(dir, "linux", NULL, "lin", false, false, false);
    upload_layout(&c->b, dir, NULL, &r);
    host_build_from(&r, host, sizeof(host));
    hresp_free(&r);
    snprintf(osv, sizeof(osv), "%s.1", host);
    snprintf(dir, sizeof(dir), "%s/good", c->b.tmp);
    make_layout(dir, "windows", osv, "good", false, true, false);
    upload_layout(&c->b, dir, "?name=win/cim:1", &r);
    ck_assert_msg(r.status == 201, "upload: %ld %s", r.status, r.body);
    hresp_free(&r);
}

static void
cimd_create(struct cimd *c, const char *handle)
{
    char body[256];
    snprintf(body, sizeof(body), "{\"handle\":\"%s\",\"image\":\"win/cim:1\"}", handle);
    struct hresp r;
    http_do(&c->b,
            &(struct hreq){
                .method = "POST", .path = "/v1/containers", .body = body, .timeout_ms = 60000},
            &r);
    ck_assert_msg(r.status == 201, "create %s: %ld %s", handle, r.status, r.body);
    hresp_free(&r);
}

/* The first HcsCreateComputeSystem document the computecore double recorded. */
static json_object *
create_doc(const struct cimd *c)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/calls.log", c->hcsrec);
    size_t len = 0;
    char *log = fx_read_file(path, &len);
    json_object *doc = NULL;
    for (char *line = log ? strtok(log, "\n") : NULL; line && !doc; line = strtok(NULL, "\n")) {
        char num[16], name[64];
        if (sscanf(line, "%15s %63s", num, name) == 2 &&
            strcmp(name, "HcsCreateComputeSystem") == 0) {
            snprintf(path, sizeof(path), "%s/%s-%s.json", c->hcsrec, num, name);
            char *text = fx_read_file(path, &len);
            doc = text ? json_tokener_parse(text) : NULL;
            free(text);
        }
    }
    free(log);
    ck_assert_msg(doc, "no HcsCreateComputeSystem document in %s", c->hcsrec);
    return doc;
}

START_TEST(an_image_container_runs_on_its_cims_with_a_scratch_over_them)
{
    struct cimd c = {0};
    cimd_start(&c);
    import_image(&c);
    cimd_create(&c, "cim1");
    /* Two layers, two CIMs (the child forked from the base), one mount. */
    ck_assert_int_eq(log_count(c.cimrec, "CimCreateImage "), 2);
    ck_assert_int_eq(log_count(c.cimrec, "CimCommitImage"), 2);
    ck_assert_int_eq(log_count(c.cimrec, "CimMountImage "), 1);
    ck_assert_int_eq(cims_mounted(&c), 1);
    ck_assert_int_eq(log_count(c.storage, " HcsAttachOverlayFilter "), 1);
    ck_assert_int_eq(log_count(c.storage, " HcsAttachLayerStorageFilter "), 0);
    ck_assert(cimd_journaled(&c, "cim1"));
    /* The container document: the CIM volume as its one layer, the scratch as its storage. */
    json_object *doc = create_doc(&c);
    json_object *layers = json_at(doc, "Container.Storage.Layers");
    ck_assert_msg(layers && json_object_array_length(layers) == 1, "%s",
                  json_object_to_json_string(doc));
    const char *lp = json_object_get_string(
        json_object_object_get(json_object_array_get_idx(layers, 0), "Path"));
    const char *sp = json_object_get_string(json_at(doc, "Container.Storage.Path"));
    ck_assert_msg(lp && sp && strncmp(lp, "\\\\?\\Volume{", 11) == 0 &&
                      strncmp(sp, "\\\\?\\Volume{", 11) == 0 && strcmp(lp, sp) != 0,
                  "layer %s, storage %s", lp ? lp : "-", sp ? sp : "-");
    json_object_put(doc);

    /* The next container of the image writes no CIM again. */
    cimd_create(&c, "cim2");
    ck_assert_int_eq(log_count(c.cimrec, "CimCreateImage "), 2);
    ck_assert_int_eq(cims_mounted(&c), 2);
    /* The delete undoes it: the filter, the disk, the CIM, the entry. */
    struct hresp r;
    http_do(&c.b,
            &(struct hreq){.method = "DELETE", .path = "/v1/containers/cim1", .timeout_ms = 60000},
            &r);
    ck_assert_msg(r.status == 204, "delete: %ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(log_count(c.storage, " HcsDetachOverlayFilter "), 1);
    ck_assert_int_eq(log_count(c.cimrec, "CimDismountImage "), 1);
    ck_assert_int_eq(cims_mounted(&c), 1);
    ck_assert(!cimd_journaled(&c, "cim1"));
    /* With no container left, the image's delete takes its CIMs along
     * (the gc: the .cim, its record, its region and object ID files). */
    http_do(&c.b,
            &(struct hreq){.method = "DELETE", .path = "/v1/containers/cim2", .timeout_ms = 60000},
            &r);
    ck_assert_msg(r.status == 204, "delete: %ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_gt(cims_files(&c), 0);
    http_do(&c.b,
            &(struct hreq){.method = "DELETE", .path = "/v1/images/win/cim:1", .timeout_ms = 60000},
            &r);
    ck_assert_msg(r.status == 200, "delete image: %ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(cims_files(&c), 0);
    berthd_finish(&c.b);
}
END_TEST

/* The volume GUID of the first line of the cimfs.dll double's log holding what. */
static void
logged_volume(const struct cimd *c, const char *what, char *out, size_t len)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/calls.log", c->cimrec);
    size_t n = 0;
    char *log = fx_read_file(path, &n);
    const char *at = log ? strstr(log, what) : NULL;
    const char *v = at ? strstr(at, "volume=") : NULL;
    ck_assert_msg(v, "no %s in the cimfs.dll double's log: %s", what, log ? log : "(none)");
    snprintf(out, len, "%.36s", v + 7);
    free(log);
}

START_TEST(blockcim_mounts_a_two_layer_images_merged_cim_and_its_document_names_that_volume)
{
    /* Below hcsshim's gate, or on a cimfs.dll without the exports, the start stops. */
    struct env e;
    env_fill(&e, "26100.1", NULL);
    char *out, *err;
    int st = berthd_run((const char *[]){"--runtime", "hcs", "--layer-format", "blockcim", NULL},
                        e.list, 60000, &out, &err);
    ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 &&
                      strstr(err, "--layer-format blockcim: Windows build 26100.1 has no block"),
                  "status 0x%x, stderr: %s", st, err);
    free(out);
    free(err);
    env_fill(&e, "27766.1", NULL);
    check_format((const char *[]){"--runtime", "hcs", "--layer-format", "blockcim", NULL}, &e,
                 "blockcim");

    struct cimd c = {.format = "blockcim"};
    cimd_start(&c);
    import_image(&c);
    cimd_create(&c, "blk1");
    /* Two layers, two block CIMs and their merge; one merged mount. */
    ck_assert_int_eq(log_count(c.cimrec, "CimCreateImage2 "), 3);
    ck_assert_int_eq(log_count(c.cimrec, "CimCreateImage "), 0);
    ck_assert_int_eq(log_count(c.cimrec, "CimAddFsToMergedImage2 "), 2);
    ck_assert_int_eq(log_count(c.cimrec, "CimMergeMountImage n=3 "), 1);
    ck_assert_int_eq(cims_mounted(&c), 1);
    ck_assert_int_eq(dir_count(c.b.root, "cims"), 0);
    ck_assert_int_eq(dir_count(c.b.root, "block-cims"), 5); /* 2 .cim, 2 .own, the merged */
    ck_assert_int_eq(log_count(c.storage, " HcsAttachOverlayFilter "), 1);
    /* The container document's one layer is the merged volume. */
    char guid[40], want[64];
    logged_volume(&c, "CimMergeMountImage", guid, sizeof(guid));
    snprintf(want, sizeof(want), "\\\\?\\Volume{%s}\\", guid);
    json_object *doc = create_doc(&c);
    json_object *layers = json_at(doc, "Container.Storage.Layers");
    ck_assert_msg(layers && json_object_array_length(layers) == 1, "%s",
                  json_object_to_json_string(doc));
    const char *lp = json_object_get_string(
        json_object_object_get(json_object_array_get_idx(layers, 0), "Path"));
    ck_assert_msg(lp && strcmp(lp, want) == 0, "layer %s, want %s", lp ? lp : "-", want);
    json_object_put(doc);
    /* A second container of the image reuses the merged CIM. */
    cimd_create(&c, "blk2");
    ck_assert_int_eq(log_count(c.cimrec, "CimCreateImage2 "), 3);
    ck_assert_int_eq(log_count(c.cimrec, "CimMergeMountImage n=3 "), 2);
    /* Deletes dismount; with no container left the image's delete takes
     * the block CIMs and the merged one along. */
    struct hresp r;
    const char *paths[] = {"/v1/containers/blk1", "/v1/containers/blk2"};
    for (int i = 0; i < 2; i++) {
        http_do(&c.b, &(struct hreq){.method = "DELETE", .path = paths[i], .timeout_ms = 60000},
                &r);
        ck_assert_msg(r.status == 204, "delete: %ld %s", r.status, r.body);
        hresp_free(&r);
    }
    ck_assert_int_eq(log_count(c.cimrec, "CimDismountImage "), 2);
    ck_assert_int_eq(cims_mounted(&c), 0);
    ck_assert_int_eq(dir_count(c.b.root, "block-cims"), 5);
    http_do(&c.b,
            &(struct hreq){.method = "DELETE", .path = "/v1/images/win/cim:1", .timeout_ms = 60000},
            &r);
    ck_assert_msg(r.status == 200, "delete image: %ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(dir_count(c.b.root, "block-cims"), 0);
    berthd_finish(&c.b);
}
END_TEST

/*
 * berthd.exe killed in the middle of a delete (the filter's detach stalled
 * by the storage double) leaves the CIM mounted and the entry journaled;
 * the next berthd.exe finishes the delete at start-up: the filter and the
 * disk detached, the CIM dismounted, the entry gone.
 */
static void
killed_in_a_delete(const char *format)
{
    struct cimd c = {.format = format};
    cimd_start(&c);
    import_image(&c);
    cimd_create(&c, "crash");
    ck_assert(cimd_journaled(&c, "crash"));
    bool block = format && strcmp(format, "blockcim") == 0;
    ck_assert_int_eq(log_count(c.cimrec, "CimMergeMountImage "), block ? 1 : 0);
    char ctl[PATH_MAX + 32];
    snprintf(ctl, sizeof(ctl), "%s/fail", c.storage);
    FILE *f = fopen(ctl, "w");
    ck_assert_ptr_nonnull(f);
    fputs("stall:HcsDetachOverlayFilter\n", f);
    fclose(f);
    struct bg_req del;
    bg_start(
        &del, &c.b,
        &(struct hreq){.method = "DELETE", .path = "/v1/containers/crash", .timeout_ms = 60000});
    for (int i = 0; i < 300 && log_count(c.storage, " HcsDetachOverlayFilter ") == 0; i++)
        usleep(50 * 1000);
    ck_assert_int_eq(log_count(c.storage, " HcsDetachOverlayFilter "), 1);
    berthd_kill(&c.b);
    bg_join(&del);
    hresp_free(&del.resp);
    ck_assert(cimd_journaled(&c, "crash"));
    ck_assert_int_eq(cims_mounted(&c), 1);
    ck_assert_int_eq(log_count(c.cimrec, "CimDismountImage "), 0);

    ck_assert_int_eq(unlink(ctl), 0);
    cimd_start(&c);
    for (int i = 0; i < 300 && cimd_journaled(&c, "crash"); i++)
        usleep(50 * 1000);
    ck_assert(!cimd_journaled(&c, "crash"));
    ck_assert_int_eq(log_count(c.storage, " HcsDetachOverlayFilter "), 2);
    ck_assert_int_eq(log_count(c.storage, " DetachVirtualDisk "), 1);
    ck_assert_int_eq(log_count(c.cimrec, "CimDismountImage "), 1);
    ck_assert_int_eq(cims_mounted(&c), 0);
    struct hresp r;
    http_get(&c.b, "/v1/containers/crash", &r);
    ck_assert_msg(r.status == 404, "crash: %ld %s", r.status, r.body);
    hresp_free(&r);
    berthd_finish(&c.b);
}

START_TEST(a_berthd_killed_between_mount_and_entry_removal_dismounts_at_restart)
{
    killed_in_a_delete("cimfs");
}
END_TEST

/* The same with a merged block CIM mounted: the replay dismounts its volume. */
START_TEST(a_berthd_killed_in_a_blockcim_delete_dismounts_the_merged_volume_at_restart)
{
    killed_in_a_delete("blockcim");
}
END_TEST

int
main(void)
{
    if (!harness_wine() || !getenv("BERTH_TEST_HCS_DOUBLE") || !getenv("BERTH_TEST_CIMFS_DOUBLE")) {
        fprintf(stderr, "test_wine_cimfs: BERTH_TEST_WINE, BERTH_TEST_HCS_DOUBLE or "
                        "BERTH_TEST_CIMFS_DOUBLE is not set; scripts/build-windows.sh runs this "
                        "suite against berthd.exe under Wine\n");
        return 77;
    }
    Suite *s = suite_create("wine_cimfs");
    TCase *tc = tcase_create("berthd.exe --layer-format");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, auto_on_wines_own_build_is_wcifs);
    tcase_add_test(tc, auto_where_the_build_and_cimfs_dll_have_it_is_cimfs);
    tcase_add_test(tc, auto_falls_back_to_wcifs_when_cimfs_dll_does_not_load_or_the_build_is_older);
    tcase_add_test(tc, an_explicit_wcifs_is_kept_where_cimfs_could_run);
    tcase_add_test(tc, an_explicit_cimfs_the_host_cannot_run_stops_the_start_naming_why);
    tcase_add_test(tc, an_image_container_runs_on_its_cims_with_a_scratch_over_them);
    tcase_add_test(tc, a_berthd_killed_between_mount_and_entry_removal_dismounts_at_restart);
    tcase_add_test(
        tc, blockcim_mounts_a_two_layer_images_merged_cim_and_its_document_names_that_volume);
    tcase_add_test(tc, a_berthd_killed_in_a_blockcim_delete_dismounts_the_merged_volume_at_restart);
    suite_add_tcase(s, tc);
    return harness_run_suite(s);
}
