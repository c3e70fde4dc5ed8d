/*
 * berthd.exe under Wine with --runtime hcs against the TEST DOUBLE of
 * computecore.dll (tests/doubles/computecore/: not HCS, it runs no
 * container; its processes run little scripts and write real pipes),
 * driven over HTTP from the Linux side: health's runtime.isolations with
 * and without Hyper-V, a container from a raw:// rootfs with a
 * percent-encoded Windows path, a process's output replayed and
 * followed, a signal and the exit code it gives, stdin, two processes
 * named task at once, a volume as a mapped directory, the delete, a
 * hyperv container sized from its limit, its layers shared over VSMB
 * and its scratch attached by SCSI (never on the host), a base layer
 * without a utility VM refused, admission's 507 against the
 * host's commit, the 409 of a host without Hyper-V, and restarts of
 * berthd.exe.
 *
 * The double is loaded through BERTH_TEST_HCS_DLL (honoured by test
 * builds only, runtime/hcs/hcs_api.h); it records every call and
 * document in BERTH_HCS_DOUBLE_DIR, which the tests read. A container's
 * scratch VHDX and its WCIFS filter are made through the TEST DOUBLES of
 * computestorage.dll and virtdisk.dll (BERTH_TEST_HCS_STORAGE_DLL,
 * BERTH_TEST_VIRTDISK_DLL), which log to one directory of their own
 * (storage-rec): the mount, its undo at the delete, and the undo after
 * berthd.exe is killed half-way through a delete. Networks go through
 * the TEST DOUBLE of computenetwork.dll (BERTH_TEST_HCN_DLL, logging to
 * hcn-rec): a container's endpoint, namespace and ports, the compute
 * system's Networking.Namespace, their deletion at the delete, after a
 * create that fails in HCS or in HNS, and at a restart after a kill.
 *
 * scripts/build-windows.sh runs it through the Windows build's CTest
 * with BERTH_TEST_BERTHD, BERTH_TEST_WINE, BERTH_TEST_HCS_DOUBLE and
 * BERTH_TEST_HCN_DOUBLE (the doubles' paths) set (cmake/windows.cmake). Without them it skips (77).
 */
#include <check.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/api/harness.h"
#include "tests/fixtures/imgfix.h"

/* What one daemon of these tests was started with. */
struct hcsd {
    struct berthd b;
    char dll[PATH_MAX + 8];
    char rec[PATH_MAX + 16]; /* BERTH_HCS_DOUBLE_DIR, a Linux path */
    char rootfs[PATH_MAX + 16];
    char raw[PATH_MAX * 3]; /* raw:/// and rootfs as Windows names it, percent-encoded */
    bool keep;              /* BERTH_HCS_DOUBLE_STATE: systems outlive berthd.exe's process */
    char state[PATH_MAX + 16];
    char storage[PATH_MAX + 16]; /* the storage doubles' log, a Linux path */
    bool net;                    /* a network (the HCN double), not --network none */
    const char *hcn_fail;        /* BERTH_HCN_DOUBLE_FAIL */
    char hcn[PATH_MAX + 16];     /* the HCN double's log, a Linux path */
    char env[14][PATH_MAX * 2];
};

/* "raw:///" and the Windows path of dir, every byte outside [A-Za-z0-9._-] escaped. */
static void
raw_uri(const char *dir, char *out, size_t len)
{
    char win[PATH_MAX + 8];
    harness_wine_path(dir, win, sizeof(win));
    size_t n = (size_t)snprintf(out, len, "raw:///");
    for (const unsigned char *s = (const unsigned char *)win; *s && n + 4 < len; s++) {
        if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
            *s == '.' || *s == '_' || *s == '-')
            out[n++] = (char)*s;
        else
            n += (size_t)snprintf(out + n, len - n, "%%%02X", *s);
    }
    out[n] = '\0';
}

/*
 * Starts berthd.exe with --runtime hcs on the doubles; fail is
 * BERTH_HCS_DOUBLE_FAIL (NULL: none). A daemon restarted on the same h
 * keeps its root and recordings (h->b.tmp set).
 */
static void
hcsd_start(struct hcsd *h, const char *fail)
{
    const char *dbl = getenv("BERTH_TEST_HCS_DOUBLE");
    ck_assert_msg(dbl && *dbl, "BERTH_TEST_HCS_DOUBLE is not set");
    if (!h->b.tmp[0])
        harness_mkdtemp(h->b.tmp, sizeof(h->b.tmp));
    harness_wine_path(dbl, h->dll, sizeof(h->dll));
    snprintf(h->rec, sizeof(h->rec), "%s/hcs-rec", h->b.tmp);
    snprintf(h->rootfs, sizeof(h->rootfs), "%s/rootfs", h->b.tmp);
    mkdir(h->rec, 0700);
    mkdir(h->rootfs, 0700);
    /* A base layer with a utility VM: the template its import made. */
    char uvm[PATH_MAX + 48];
    snprintf(uvm, sizeof(uvm), "%s/UtilityVM", h->rootfs);
    mkdir(uvm, 0700);
    snprintf(uvm, sizeof(uvm), "%s/UtilityVM/SystemTemplate.vhdx", h->rootfs);
    fx_write_file(uvm, "template", 8);
    raw_uri(h->rootfs, h->raw, sizeof(h->raw));
    char rec_win[PATH_MAX + 24];
    harness_wine_path(h->rec, rec_win, sizeof(rec_win));
    struct berthd_opts o = {.args = {"--runtime", "hcs", NULL}};
    if (h->net)
        o = (struct berthd_opts){.args = {"--runtime", "hcs", "--network-name", "berthw",
                                          "--network-pool", "10.66.0.0/24", NULL}};
    size_t n = 0;
    snprintf(h->env[n], sizeof(h->env[n]), "BERTH_TEST_HCS_DLL=%s", h->dll);
    o.env[n] = h->env[n], n++;
    snprintf(h->env[n], sizeof(h->env[n]), "BERTH_HCS_DOUBLE_DIR=%s", rec_win);
    o.env[n] = h->env[n], n++;
    snprintf(h->env[n], sizeof(h->env[n]), "BERTH_HCS_DOUBLE_FAIL=%s", fail ? fail : "");
    o.env[n] = h->env[n], n++;
    if (h->keep) {
        snprintf(h->state, sizeof(h->state), "%s/hcs-state", h->b.tmp);
        mkdir(h->state, 0700);
        char state_win[PATH_MAX + 24];
        harness_wine_path(h->state, state_win, sizeof(state_win));
        snprintf(h->env[n], sizeof(h->env[n]), "BERTH_HCS_DOUBLE_STATE=%s", state_win);
        o.env[n] = h->env[n], n++;
    }
    const char *sdbl = getenv("BERTH_TEST_HCS_STORAGE_DOUBLE");
    const char *vdbl = getenv("BERTH_TEST_VIRTDISK_DOUBLE");
    ck_assert_msg(sdbl && *sdbl && vdbl && *vdbl,
                  "BERTH_TEST_HCS_STORAGE_DOUBLE or BERTH_TEST_VIRTDISK_DOUBLE is not set");
    snprintf(h->storage, sizeof(h->storage), "%s/storage-rec", h->b.tmp);
    mkdir(h->storage, 0700);
    char win[PATH_MAX + 24];
    harness_wine_path(sdbl, win, sizeof(win));
    snprintf(h->env[n], sizeof(h->env[n]), "BERTH_TEST_HCS_STORAGE_DLL=%s", win);
    o.env[n] = h->env[n], n++;
    harness_wine_path(vdbl, win, sizeof(win));
    snprintf(h->env[n], sizeof(h->env[n]), "BERTH_TEST_VIRTDISK_DLL=%s", win);
    o.env[n] = h->env[n], n++;
    harness_wine_path(h->storage, win, sizeof(win));
    snprintf(h->env[n], sizeof(h->env[n]), "BERTH_HCS_STORAGE_DOUBLE_DIR=%s", win);
    o.env[n] = h->env[n], n++;
    snprintf(h->env[n], sizeof(h->env[n]), "BERTH_VIRTDISK_DOUBLE_DIR=%s", win);
    o.env[n] = h->env[n], n++;
    /* The HCN double: every daemon can load it; only h->net ones have a network. */
    const char *ndbl = getenv("BERTH_TEST_HCN_DOUBLE");
    ck_assert_msg(ndbl && *ndbl, "BERTH_TEST_HCN_DOUBLE is not set");
    harness_wine_path(ndbl, win, sizeof(win));
    snprintf(h->env[n], sizeof(h->env[n]), "BERTH_TEST_HCN_DLL=%s", win);
    o.env[n] = h->env[n], n++;
    snprintf(h->hcn, sizeof(h->hcn), "%s/hcn-rec", h->b.tmp);
    mkdir(h->hcn, 0700);
    harness_wine_path(h->hcn, win, sizeof(win));
    snprintf(h->env[n], sizeof(h->env[n]), "BERTH_HCN_DOUBLE_DIR=%s", win);
    o.env[n] = h->env[n], n++;
    snprintf(h->env[n], sizeof(h->env[n]), "BERTH_HCN_DOUBLE_FAIL=%s",
             h->hcn_fail ? h->hcn_fail : "");
    o.env[n] = h->env[n], n++;
    berthd_start(&h->b, &o);
}

/* How many times a double logging to dir saw fn (its calls.log: "NNNN <Function> <id>"). */
static int
log_count(const char *dir, const char *fn)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/calls.log", dir);
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

/* How many times the computecore double saw fn. */
static int
called(const struct hcsd *h, const char *fn)
{
    return log_count(h->rec, fn);
}

/* How many times the storage doubles saw fn (their shared calls.log). */
static int
storage_called(const struct hcsd *h, const char *fn)
{
    return log_count(h->storage, fn);
}

/* How many times the HCN double saw fn. */
static int
hcn_called(const struct hcsd *h, const char *fn)
{
    return log_count(h->hcn, fn);
}

/* Does the container's rootfs entry exist in the mount journal? */
static bool
journaled(const struct hcsd *h, const char *handle)
{
    char path[PATH_MAX + 96];
    snprintf(path, sizeof(path), "%s/mounts/container.%s.rootfs.mnt", h->b.root, handle);
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* The k-th (from 1) document the double received through fn, parsed. */
static json_object *
recorded(const struct hcsd *h, const char *fn, int k)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/calls.log", h->rec);
    size_t len = 0;
    char *log = fx_read_file(path, &len);
    ck_assert_msg(log, "no %s", path);
    int seen = 0;
    json_object *doc = NULL;
    for (char *line = strtok(log, "\n"); line && !doc; line = strtok(NULL, "\n")) {
        char num[16], name[64];
        if (sscanf(line, "%15s %63s", num, name) == 2 && strcmp(name, fn) == 0 && ++seen == k) {
            char file[PATH_MAX + 128];
            snprintf(file, sizeof(file), "%s/%s-%s.json", h->rec, num, fn);
            size_t dlen = 0;
            char *text = fx_read_file(file, &dlen);
            ck_assert_msg(text, "no %s", file);
            doc = json_tokener_parse(text);
            free(text);
        }
    }
    free(log);
    ck_assert_msg(doc, "%s: no document %d", fn, k);
    return doc;
}

static void
create(const struct hcsd *h, const char *handle, const char *extra, struct hresp *r)
{
    char body[PATH_MAX * 4];
    snprintf(body, sizeof(body), "{\"handle\":\"%s\",\"rootfs\":\"%s\"%s%s}", handle, h->raw,
             extra ? "," : "", extra ? extra : "");
    http_do(&h->b,
            &(struct hreq){
                .method = "POST", .path = "/v1/containers", .body = body, .timeout_ms = 60000},
            r);
}

/* A process-isolated container from the raw rootfs, 201. */
static void
create_ok(const struct hcsd *h, const char *handle)
{
    struct hresp r;
    create(h, handle, NULL, &r);
    ck_assert_msg(r.status == 201, "create %s: %ld %s", handle, r.status, r.body);
    hresp_free(&r);
}

static void
delete_ctr(const struct hcsd *h, const char *handle)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/containers/%s", handle);
    struct hresp r;
    http_do(&h->b, &(struct hreq){.method = "DELETE", .path = path, .timeout_ms = 60000}, &r);
    ck_assert_msg(r.status == 204, "delete %s: %ld %s", handle, r.status, r.body);
    hresp_free(&r);
}

/* The container is gone from the API. */
static void
ctr_gone(const struct hcsd *h, const char *handle)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/containers/%s", handle);
    struct hresp r;
    http_get(&h->b, path, &r);
    ck_assert_msg(r.status == 404, "%s: %ld %s", handle, r.status, r.body);
    hresp_free(&r);
}

static void
spawn(const struct hcsd *h, const char *handle, const char *id, const char *args)
{
    char path[256], body[1024];
    snprintf(path, sizeof(path), "/v1/containers/%s/processes", handle);
    snprintf(body, sizeof(body), "{\"id\":\"%s\",\"path\":\"prog.exe\",\"args\":[%s]}", id, args);
    struct hresp r;
    http_do(&h->b,
            &(struct hreq){.method = "POST", .path = path, .body = body, .timeout_ms = 60000}, &r);
    ck_assert_msg(r.status == 201, "spawn %s/%s: %ld %s", handle, id, r.status, r.body);
    hresp_free(&r);
}

/* GET of a process ("") or its sub-resource (stdout, wait?...), its body copied (caller frees). */
static char *
proc_get(const struct hcsd *h, const char *handle, const char *id, const char *what, long *status)
{
    char path[512];
    snprintf(path, sizeof(path), "/v1/containers/%s/processes/%s%s%s", handle, id,
             what[0] ? "/" : "", what);
    struct hresp r;
    http_do(&h->b, &(struct hreq){.method = "GET", .path = path, .timeout_ms = 60000}, &r);
    *status = r.status;
    char *body = strdup(r.body ? r.body : "");
    hresp_free(&r);
    return body;
}

static int
wait_exit(const struct hcsd *h, const char *handle, const char *id)
{
    long st = 0;
    char *body = proc_get(h, handle, id, "wait?timeout=60", &st);
    json_object *o = json_tokener_parse(body);
    ck_assert_msg(st == 200 && o, "wait %s/%s: %ld %s", handle, id, st, body);
    int code = json_object_get_int(json_object_object_get(o, "exit_code"));
    json_object_put(o);
    free(body);
    return code;
}

/* Polls the replay of stdout until it is want (30 s at most). */
static void
wait_stdout(const struct hcsd *h, const char *handle, const char *id, const char *want)
{
    char *out = NULL;
    long st = 0;
    double deadline = now_ms() + 30000;
    do {
        free(out);
        out = proc_get(h, handle, id, "stdout", &st);
        if (st == 200 && strcmp(out, want) == 0)
            break;
        sleep_ms(100);
    } while (now_ms() < deadline);
    ck_assert_msg(st == 200 && strcmp(out, want) == 0, "stdout of %s/%s: %ld \"%s\", want \"%s\"",
                  handle, id, st, out, want);
    free(out);
}

/* Did the HCN double see fn with id ("NNNN <fn> <id>")? */
static bool
hcn_called_with(const struct hcsd *h, const char *fn, const char *id)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/calls.log", h->hcn);
    size_t len = 0;
    char *log = fx_read_file(path, &len);
    char pat[160];
    snprintf(pat, sizeof(pat), " %s %s\n", fn, id);
    bool found = log && strstr(log, pat);
    free(log);
    return found;
}

/* The id of the k-th (from 1) call of fn the HCN double logged, into out. */
static void
hcn_id(const struct hcsd *h, const char *fn, int k, char *out, size_t len)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/calls.log", h->hcn);
    size_t n = 0;
    char *log = fx_read_file(path, &n);
    ck_assert_msg(log, "no %s", path);
    int seen = 0;
    out[0] = '\0';
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
        char num[16], name[64], id[64];
        if (sscanf(line, "%15s %63s %63s", num, name, id) == 3 && strcmp(name, fn) == 0 &&
            ++seen == k) {
            snprintf(out, len, "%s", id);
            break;
        }
    }
    free(log);
    ck_assert_msg(out[0], "%s: no call %d", fn, k);
}

/* Polls /v1/health until the boolean at dotted is want (30 s at most). */
static bool
wait_health_bool(const struct hcsd *h, const char *dotted, bool want)
{
    double deadline = now_ms() + 30000;
    do {
        struct hresp r;
        http_get(&h->b, "/v1/health", &r);
        json_object *v = r.json ? json_at(r.json, dotted) : NULL;
        bool ok = v && json_object_get_boolean(v) == want;
        hresp_free(&r);
        if (ok)
            return true;
        sleep_ms(200);
    } while (now_ms() < deadline);
    return false;
}

/* Does the container's network record exist (<root>/network/hcn/<handle>)? */
static bool
net_recorded(const struct hcsd *h, const char *handle)
{
    char path[PATH_MAX + 96];
    snprintf(path, sizeof(path), "%s/network/hcn/%s", h->b.root, handle);
    struct stat sb;
    return stat(path, &sb) == 0;
}

static const char *
str_at(json_object *o, const char *dotted)
{
    return json_object_get_string(json_at(o, dotted));
}

/* ---- the tests ---- */

START_TEST(health_shows_both_isolations_usable_on_the_double)
{
    struct hcsd h = {0};
    hcsd_start(&h, NULL);
    struct hresp r;
    http_get(&h.b, "/v1/health", &r);
    ck_assert_msg(r.json, "health: %ld %s", r.status, r.body);
    ck_assert_str_eq(str_at(r.json, "runtime.name"), "hcs");
    ck_assert_msg(json_object_get_boolean(json_at(r.json, "runtime.usable")), "%s", r.body);
    ck_assert(json_object_get_boolean(json_at(r.json, "runtime.isolations.process.usable")));
    ck_assert(json_object_get_boolean(json_at(r.json, "runtime.isolations.hyperv.usable")));
    ck_assert_ptr_null(json_at(r.json, "runtime.isolations.hyperv.reason"));
    hresp_free(&r);
    ck_assert_int_ge(called(&h, "HcsGetServiceProperties"), 2);
    berthd_finish(&h.b);
}
END_TEST

START_TEST(a_raw_rootfs_container_runs_a_process_that_is_signalled_and_deleted)
{
    struct hcsd h = {0};
    hcsd_start(&h, NULL);
    struct hresp r;
    create(&h, "w1", NULL, &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    ck_assert_str_eq(str_at(r.json, "isolation"), "process");
    hresp_free(&r);
    /* The raw rootfs is the container's layer, the scratch its storage. */
    json_object *doc = recorded(&h, "HcsCreateComputeSystem", 1);
    char win[PATH_MAX + 8];
    harness_wine_path(h.rootfs, win, sizeof(win));
    json_object *layers = json_at(doc, "Container.Storage.Layers");
    ck_assert_int_eq(json_object_array_length(layers), 1);
    ck_assert_str_eq(json_object_get_string(
                         json_object_object_get(json_object_array_get_idx(layers, 0), "Path")),
                     win);
    /* The scratch VHDX's volume (the double's stand-in for one). */
    const char *vol = str_at(doc, "Container.Storage.Path");
    ck_assert_msg(vol && strncmp(vol, "\\\\?\\Volume{", 11) == 0, "Storage.Path %s", vol);
    ck_assert_str_eq(str_at(doc, "Owner"), "berth");
    json_object_put(doc);
    http_get(&h.b, "/v1/containers/w1", &r);
    ck_assert_msg(r.status == 200, "get: %ld %s", r.status, r.body);
    ck_assert_str_eq(str_at(r.json, "state"), "running");
    hresp_free(&r);

    /* Output, then a wait for a signal. */
    spawn(&h, "w1", "task", "\"out\",\"hello\",\"err\",\"oops\",\"wait\"");
    wait_stdout(&h, "w1", "task", "hello");
    struct bg_req follow;
    bg_start(&follow, &h.b,
             &(struct hreq){.method = "GET",
                            .path = "/v1/containers/w1/processes/task/stdout?follow=1",
                            .timeout_ms = 60000});
    long st = 0;
    char *errs = proc_get(&h, "w1", "task", "stderr", &st);
    ck_assert_msg(st == 200 && strcmp(errs, "oops") == 0, "stderr: %ld %s", st, errs);
    free(errs);
    http_post_json(&h.b, "/v1/containers/w1/processes/task/signal", "{\"signal\":\"TERM\"}", &r);
    ck_assert_msg(r.status == 200, "signal: %ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(wait_exit(&h, "w1", "task"), 128 + 15);
    bg_join(&follow);
    ck_assert_msg(follow.resp.status == 200 && strcmp(follow.resp.body, "hello") == 0,
                  "follow: %ld \"%s\"", follow.resp.status, follow.resp.body);
    hresp_free(&follow.resp);
    json_object *sig = recorded(&h, "HcsSignalProcess", 1);
    ck_assert_str_eq(str_at(sig, "Signal"), "CtrlShutdown");
    json_object_put(sig);

    /* An exit code of its own; an argument with a space reached the
     * double whole (the command line escaped by Windows rules). */
    spawn(&h, "w1", "second", "\"out\",\"two words\",\"exit\",\"3\"");
    ck_assert_int_eq(wait_exit(&h, "w1", "second"), 3);
    wait_stdout(&h, "w1", "second", "two words");
    json_object *p = recorded(&h, "HcsCreateProcess", 2);
    ck_assert_msg(strstr(str_at(p, "CommandLine"), "\"two words\""), "%s",
                  str_at(p, "CommandLine"));
    json_object_put(p);

    /* Stdin streamed in: its end is the end of the process's input. */
    http_post_json(&h.b, "/v1/containers/w1/processes",
                   "{\"id\":\"cat\",\"path\":\"prog.exe\",\"args\":[\"echo\"],\"stdin\":true}", &r);
    ck_assert_msg(r.status == 201, "spawn cat: %ld %s", r.status, r.body);
    hresp_free(&r);
    http_do(&h.b,
            &(struct hreq){.method = "PUT",
                           .path = "/v1/containers/w1/processes/cat/stdin",
                           .body = "ping\npong\n",
                           .content_type = "application/octet-stream",
                           .timeout_ms = 60000},
            &r);
    ck_assert_msg(r.status == 200, "stdin: %ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(wait_exit(&h, "w1", "cat"), 0);
    wait_stdout(&h, "w1", "cat", "ping\npong\n");

    delete_ctr(&h, "w1");
    ck_assert_int_ge(called(&h, "HcsTerminateComputeSystem"), 1);
    ck_assert_int_ge(called(&h, "HcsCloseComputeSystem"), 1);
    ctr_gone(&h, "w1");
    berthd_finish(&h.b);
}
END_TEST

/* Concourse names every task's process "task": two containers run theirs at once. */
START_TEST(two_containers_run_a_process_named_task_at_once)
{
    struct hcsd h = {0};
    hcsd_start(&h, NULL);
    const char *handles[] = {"ta", "tb"};
    for (int i = 0; i < 2; i++)
        create_ok(&h, handles[i]);
    spawn(&h, "ta", "task", "\"out\",\"from a\",\"sleep\",\"300\"");
    spawn(&h, "tb", "task", "\"out\",\"from b\",\"sleep\",\"300\"");
    ck_assert_int_eq(wait_exit(&h, "ta", "task"), 0);
    ck_assert_int_eq(wait_exit(&h, "tb", "task"), 0);
    wait_stdout(&h, "ta", "task", "from a");
    wait_stdout(&h, "tb", "task", "from b");
    for (int i = 0; i < 2; i++)
        delete_ctr(&h, handles[i]);
    berthd_finish(&h.b);
}
END_TEST

/* Polls GET of the container until its state is stopped (30 s at most). */
static void
wait_stopped(const struct hcsd *h, const char *handle)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/containers/%s", handle);
    struct hresp r = {0};
    double deadline = now_ms() + 30000;
    const char *state = NULL;
    do {
        hresp_free(&r);
        sleep_ms(100);
        http_get(&h->b, path, &r);
        state = r.json ? str_at(r.json, "state") : NULL;
    } while (!(state && strcmp(state, "stopped") == 0) && now_ms() < deadline);
    ck_assert_msg(state && strcmp(state, "stopped") == 0, "%s: %ld %s", handle, r.status, r.body);
    hresp_free(&r);
}

/* A compute system that dies under its container: HCS's exit event reaches the API. */
START_TEST(a_system_that_dies_is_reported_stopped)
{
    struct hcsd h = {0};
    hcsd_start(&h, NULL);
    create_ok(&h, "dies");
    spawn(&h, "dies", "task", "\"out\",\"working\",\"wait\"");
    wait_stdout(&h, "dies", "task", "working");
    spawn(&h, "dies", "boom", "\"crash\"");
    wait_stopped(&h, "dies");
    struct hresp r;
    /* Its processes ended with it, with the codes the runtime recorded. */
    ck_assert_int_eq(wait_exit(&h, "dies", "task"), 1);
    http_post_json(&h.b, "/v1/containers/dies/processes",
                   "{\"id\":\"late\",\"path\":\"prog.exe\",\"args\":[]}", &r);
    ck_assert_msg(r.status == 409 || r.status == 503, "spawn in a stopped container: %ld %s",
                  r.status, r.body);
    hresp_free(&r);
    delete_ctr(&h, "dies");
    berthd_finish(&h.b);
}
END_TEST

/* One that dies as it starts, while berth's create still runs, is stopped all the same. */
START_TEST(a_system_that_dies_during_the_create_is_reported_stopped)
{
    struct hcsd h = {0};
    hcsd_start(&h, "die-at-start");
    create_ok(&h, "early");
    wait_stopped(&h, "early");
    delete_ctr(&h, "early");
    berthd_finish(&h.b);
}
END_TEST

/* A volume is a mapped directory, at the caller's POSIX target made a C:\ path. */
START_TEST(a_volume_mount_is_a_mapped_directory)
{
    struct hcsd h = {0};
    hcsd_start(&h, NULL);
    struct hresp r;
    http_post_json(&h.b, "/v1/volumes", "{\"handle\":\"cache\"}", &r);
    ck_assert_msg(r.status == 201, "volume: %ld %s", r.status, r.body);
    hresp_free(&r);
    create(&h, "vm1",
           "\"mounts\":[{\"volume\":\"cache\",\"target\":\"/tmp/build/in\",\"readonly\":true}]",
           &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    hresp_free(&r);
    json_object *doc = recorded(&h, "HcsCreateComputeSystem", 1);
    json_object *mds = json_at(doc, "Container.MappedDirectories");
    ck_assert_msg(mds && json_object_array_length(mds) == 1, "%s", json_object_to_json_string(doc));
    json_object *md = json_object_array_get_idx(mds, 0);
    ck_assert_str_eq(json_object_get_string(json_object_object_get(md, "ContainerPath")),
                     "C:\\tmp\\build\\in");
    ck_assert(json_object_get_boolean(json_object_object_get(md, "ReadOnly")));
    const char *host = json_object_get_string(json_object_object_get(md, "HostPath"));
    ck_assert_msg(host && strncmp(host, "Z:\\", 3) == 0 && strstr(host, "cache"), "host %s", host);
    json_object_put(doc);
    delete_ctr(&h, "vm1");
    berthd_finish(&h.b);
}
END_TEST

/*
 * A raw rootfs's container gets a scratch VHDX that berth makes (created,
 * attached, formatted, initialized, filtered; journaled), and the delete
 * takes it away again (filter and disk detached, the entry removed).
 */
START_TEST(a_raw_rootfs_gets_a_scratch_that_the_delete_takes_away)
{
    struct hcsd h = {0};
    hcsd_start(&h, NULL);
    create_ok(&h, "sc");
    ck_assert_int_eq(storage_called(&h, "CreateVirtualDisk"), 1);
    ck_assert_int_eq(storage_called(&h, "AttachVirtualDisk"), 1);
    ck_assert_int_eq(storage_called(&h, "HcsFormatWritableLayerVhd"), 1);
    ck_assert_int_eq(storage_called(&h, "HcsInitializeWritableLayer"), 1);
    ck_assert_int_eq(storage_called(&h, "HcsAttachLayerStorageFilter"), 1);
    ck_assert(journaled(&h, "sc"));
    delete_ctr(&h, "sc");
    ck_assert_int_eq(storage_called(&h, "HcsDetachLayerStorageFilter"), 1);
    ck_assert_int_eq(storage_called(&h, "DetachVirtualDisk"), 1);
    ck_assert(!journaled(&h, "sc"));
    /* A POSIX path is no Windows directory. */
    struct hresp r;
    http_post_json(&h.b, "/v1/containers", "{\"rootfs\":\"raw:///tmp/x\"}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "is not a windows path");
    hresp_free(&r);
    berthd_finish(&h.b);
}
END_TEST

/*
 * berthd.exe killed in the middle of a delete, its filter detach stalled
 * by the storage double (a control file), leaves the mount and its
 * journal entry: the next berthd.exe finishes the delete at start-up,
 * detaching the filter and the disk, and removes the entry.
 */
START_TEST(a_berthd_killed_between_mount_and_entry_removal_is_cleaned_up_at_restart)
{
    struct hcsd h = {0};
    hcsd_start(&h, NULL);
    create_ok(&h, "crash");
    ck_assert(journaled(&h, "crash"));
    char ctl[PATH_MAX + 32];
    snprintf(ctl, sizeof(ctl), "%s/fail", h.storage);
    FILE *f = fopen(ctl, "w");
    ck_assert_ptr_nonnull(f);
    fputs("stall:HcsDetachLayerStorageFilter\n", f);
    fclose(f);
    struct bg_req del;
    bg_start(
        &del, &h.b,
        &(struct hreq){.method = "DELETE", .path = "/v1/containers/crash", .timeout_ms = 60000});
    /* The delete reaches the stalled detach, and berthd.exe dies there. */
    for (int i = 0; i < 300 && storage_called(&h, "HcsDetachLayerStorageFilter") == 0; i++)
        usleep(50 * 1000);
    ck_assert_int_eq(storage_called(&h, "HcsDetachLayerStorageFilter"), 1);
    berthd_kill(&h.b);
    bg_join(&del);
    hresp_free(&del.resp);
    ck_assert(journaled(&h, "crash"));
    ck_assert_int_eq(storage_called(&h, "DetachVirtualDisk"), 0);

    /* The stall released, a new berthd.exe finishes what the dead one left. */
    ck_assert_int_eq(unlink(ctl), 0);
    hcsd_start(&h, NULL);
    for (int i = 0; i < 300 && journaled(&h, "crash"); i++)
        usleep(50 * 1000);
    ck_assert(!journaled(&h, "crash"));
    ck_assert_int_eq(storage_called(&h, "HcsDetachLayerStorageFilter"), 2);
    ck_assert_int_eq(storage_called(&h, "DetachVirtualDisk"), 1);
    ctr_gone(&h, "crash");
    berthd_finish(&h.b);
}
END_TEST

START_TEST(a_hyperv_container_gets_a_vm_sized_from_its_limit)
{
    struct hcsd h = {0};
    hcsd_start(&h, NULL);
    struct hresp r;
    create(&h, "hv", "\"isolation\":\"hyperv\",\"limits\":{\"memory_bytes\":268435456}", &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    ck_assert_str_eq(str_at(r.json, "isolation"), "hyperv");
    hresp_free(&r);
    /* The task's 256 MB plus the guest's own 256. */
    json_object *vm = recorded(&h, "HcsCreateComputeSystem", 1);
    ck_assert_int_eq(
        json_object_get_int(json_at(vm, "VirtualMachine.ComputeTopology.Memory.SizeInMB")), 512);
    json_object_put(vm);
    json_object *ctr = recorded(&h, "HcsCreateComputeSystem", 2);
    ck_assert_int_eq(json_object_get_int(json_at(ctr, "HostedSystem.Container.Memory.SizeInMB")),
                     256);
    json_object_put(ctr);
    spawn(&h, "hv", "task", "\"out\",\"in a vm\"");
    ck_assert_int_eq(wait_exit(&h, "hv", "task"), 0);
    wait_stdout(&h, "hv", "task", "in a vm");
    delete_ctr(&h, "hv");
    ck_assert_int_eq(called(&h, "HcsTerminateComputeSystem"), 2);

    /* Past the host's commit (Wine's GetPerformanceInfo: this machine's): 507, and nothing
     * made. The largest VM berth sizes, 1 TiB (a task of 1 TiB - 256 MB), so that no CI
     * machine has the commit for it. */
    create(&h, "huge", "\"isolation\":\"hyperv\",\"limits\":{\"memory_bytes\":1099243192320}", &r);
    ck_assert_error_reply(&r, 507, "insufficient_storage",
                          "not enough memory commit for a 1048576 MB utility vm");
    ck_assert_msg(strstr(r.body, "CommitLimit") && strstr(r.body, "CommitTotal"), "%s", r.body);
    hresp_free(&r);
    ck_assert_int_eq(called(&h, "HcsCreateComputeSystem"), 2);
    ctr_gone(&h, "huge");
    berthd_finish(&h.b);
}
END_TEST

/* The n-th (from 1) HcsModifyComputeSystem document whose ResourcePath starts with prefix. */
static json_object *
modify_doc(const struct hcsd *h, const char *prefix, int n)
{
    int total = called(h, "HcsModifyComputeSystem");
    for (int k = 1; k <= total; k++) {
        json_object *d = recorded(h, "HcsModifyComputeSystem", k);
        const char *rp = str_at(d, "ResourcePath");
        if (rp && strncmp(rp, prefix, strlen(prefix)) == 0 && --n == 0)
            return d;
        json_object_put(d);
    }
    ck_abort_msg("no HcsModifyComputeSystem of %s", prefix);
    return NULL;
}

static bool
ends_with(const char *s, const char *suffix)
{
    size_t a = s ? strlen(s) : 0, b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/*
 * hyperv: the scratch VHDX is made and formatted on the host but never
 * attached there (a VHDX cannot be attached on the host and in a VM at
 * once); the utility VM gets it by SCSI and the layer folder by a
 * read-only VSMB share, and the container inside it is given the VSMB
 * path and the VM's root; the VM's own scratch is copied from the base
 * layer's template. The delete has nothing on the host to detach.
 */
START_TEST(a_hyperv_container_gets_its_layers_by_vsmb_and_its_scratch_by_scsi)
{
    struct hcsd h = {0};
    hcsd_start(&h, NULL);
    struct hresp r;
    create(&h, "hvs", "\"isolation\":\"hyperv\"", &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(storage_called(&h, "CreateVirtualDisk"), 1);
    ck_assert_int_eq(storage_called(&h, "HcsFormatWritableLayerVhd"), 1);
    ck_assert_int_eq(storage_called(&h, "AttachVirtualDisk"), 0);
    ck_assert_int_eq(storage_called(&h, "HcsGetLayerVhdMountPath"), 0);
    ck_assert_int_eq(storage_called(&h, "HcsInitializeWritableLayer"), 0);
    ck_assert_int_eq(storage_called(&h, "HcsAttachLayerStorageFilter"), 0);
    ck_assert(journaled(&h, "hvs"));

    /* The VM boots from the template's copy at SCSI 0:0. */
    json_object *vm = recorded(&h, "HcsCreateComputeSystem", 1);
    const char *vmscratch = str_at(
        vm, "VirtualMachine.Devices.Scsi.df6d0690-79e5-55b6-a5ec-c1e2f77f580a.Attachments.0.Path");
    ck_assert_msg(ends_with(vmscratch, "\\hvs\\vm\\sandbox.vhdx"), "%s", vmscratch);
    char copy[PATH_MAX + 64];
    snprintf(copy, sizeof(copy), "%s/containers/hvs/vm/sandbox.vhdx", h.b.root);
    size_t len = 0;
    char *text = fx_read_file(copy, &len);
    ck_assert_msg(text && len == 8 && memcmp(text, "template", 8) == 0, "%s", copy);
    free(text);
    json_object_put(vm);
    /* The VM may open both disks (granted before it is made). */
    ck_assert_int_eq(called(&h, "HcsGrantVmAccess"), 2);
    json_object *g = recorded(&h, "HcsGrantVmAccess", 2);
    ck_assert_msg(ends_with(str_at(g, "FilePath"), "\\hvs\\scratch\\sandbox.vhdx"), "%s",
                  str_at(g, "FilePath"));
    json_object_put(g);

    /* The layer folder: a read-only share. */
    json_object *share = modify_doc(&h, "VirtualMachine/Devices/VirtualSmb/Shares", 1);
    ck_assert_str_eq(str_at(share, "RequestType"), "Add");
    char rootfs_win[PATH_MAX + 16];
    harness_wine_path(h.rootfs, rootfs_win, sizeof(rootfs_win));
    ck_assert_msg(strcasecmp(str_at(share, "Settings.Path"), rootfs_win) == 0, "%s",
                  str_at(share, "Settings.Path"));
    ck_assert(json_object_get_boolean(json_at(share, "Settings.Options.ReadOnly")));
    char name[72];
    snprintf(name, sizeof(name), "%s", str_at(share, "Settings.Name"));
    json_object_put(share);

    /* The container's scratch: SCSI LUN 1, mounted at the VM's root for the container. */
    json_object *scsi = modify_doc(&h, "VirtualMachine/Devices/Scsi/", 1);
    ck_assert_str_eq(str_at(scsi, "Settings.Type"), "VirtualDisk");
    ck_assert_msg(ends_with(str_at(scsi, "Settings.Path"), "\\hvs\\scratch\\sandbox.vhdx"), "%s",
                  str_at(scsi, "Settings.Path"));
    ck_assert_str_eq(str_at(scsi, "GuestRequest.ResourceType"), "MappedVirtualDisk");
    ck_assert_str_eq(str_at(scsi, "GuestRequest.Settings.ContainerPath"), "C:\\c\\1");
    json_object_put(scsi);

    /* The container in the VM sees the share and the VM's root. */
    json_object *ctr = recorded(&h, "HcsCreateComputeSystem", 2);
    json_object *layers = json_at(ctr, "HostedSystem.Container.Storage.Layers");
    ck_assert_int_eq(json_object_array_length(layers), 1);
    const char *lpath = json_object_get_string(
        json_object_object_get(json_object_array_get_idx(layers, 0), "Path"));
    char want[128];
    snprintf(want, sizeof(want), "\\\\?\\VMSMB\\VSMB-{dcc079ae-60ba-4d07-847c-3493609c0870}\\%s",
             name);
    ck_assert_str_eq(lpath, want);
    ck_assert_str_eq(str_at(ctr, "HostedSystem.Container.Storage.Path"), "C:\\c\\1");
    json_object_put(ctr);

    delete_ctr(&h, "hvs");
    ck_assert(!journaled(&h, "hvs"));
    ck_assert_int_eq(storage_called(&h, "DetachVirtualDisk"), 0);
    ck_assert_int_eq(storage_called(&h, "HcsDetachLayerStorageFilter"), 0);
    berthd_finish(&h.b);
}
END_TEST

/* A base layer without a utility VM cannot boot one: 422, and nothing made. */
START_TEST(a_hyperv_container_on_a_base_layer_without_a_utility_vm_is_refused)
{
    struct hcsd h = {0};
    hcsd_start(&h, NULL);
    char tmpl[PATH_MAX + 48];
    snprintf(tmpl, sizeof(tmpl), "%s/UtilityVM/SystemTemplate.vhdx", h.rootfs);
    ck_assert_int_eq(unlink(tmpl), 0);
    struct hresp r;
    create(&h, "novm", "\"isolation\":\"hyperv\"", &r);
    ck_assert_error_reply(&r, 422, "invalid_content", "has no UtilityVM\\SystemTemplate.vhdx");
    hresp_free(&r);
    ck_assert_int_eq(called(&h, "HcsCreateComputeSystem"), 0);
    ck_assert(!journaled(&h, "novm"));
    ctr_gone(&h, "novm");
    berthd_finish(&h.b);
}
END_TEST

START_TEST(a_host_without_hyperv_says_so_in_health_and_refuses_hyperv_with_409)
{
    struct hcsd h = {0};
    hcsd_start(&h, "no-hyperv");
    struct hresp r;
    http_get(&h.b, "/v1/health", &r);
    ck_assert_msg(r.json, "health: %ld %s", r.status, r.body);
    ck_assert(json_object_get_boolean(json_at(r.json, "runtime.usable")));
    ck_assert(json_object_get_boolean(json_at(r.json, "runtime.isolations.process.usable")));
    ck_assert(!json_object_get_boolean(json_at(r.json, "runtime.isolations.hyperv.usable")));
    const char *why = str_at(r.json, "runtime.isolations.hyperv.reason");
    ck_assert_msg(why && strstr(why, "Hyper-V is not available on this host (") &&
                      strstr(why, "catastrophic failure"),
                  "reason: %s", why);
    hresp_free(&r);
    create(&h, "hv", "\"isolation\":\"hyperv\"", &r);
    ck_assert_error_reply(&r, 409, "conflict", "Hyper-V is not available on this host (");
    hresp_free(&r);
    ck_assert_int_eq(called(&h, "HcsCreateComputeSystem"), 0);
    /* Process isolation still works. */
    create_ok(&h, "argon");
    delete_ctr(&h, "argon");
    berthd_finish(&h.b);
}
END_TEST

/*
 * The double lives in berthd.exe's process, so its compute systems end
 * with it, as a host's do when it reboots: the restarted daemon tries to
 * reopen the system it owns (HcsOpenComputeSystem), finds it gone,
 * reports the container stopped, and a delete cleans it up; a record of
 * a system no container of the daemon's claims is removed at start.
 */
START_TEST(a_restarted_berthd_reopens_what_it_owns_and_cleans_up_the_rest)
{
    struct hcsd h = {0};
    hcsd_start(&h, NULL);
    struct hresp r;
    create_ok(&h, "keep");
    spawn(&h, "keep", "task", "\"out\",\"before\",\"wait\"");
    wait_stdout(&h, "keep", "task", "before");
    /* Stopped, not finished: the root and the recordings stay for the restart. */
    int ws = berthd_term(&h.b, 60000);
    ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "stop: status %d", ws);

    /* An ownership record of a container the daemon has no record of. */
    char ghost[PATH_MAX + 64];
    snprintf(ghost, sizeof(ghost), "%s/runtime/hcs/ghost", h.b.root);
    FILE *f = fopen(ghost, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "berth-ghost-00000000\n-\nprocess\nZ:\\nowhere\\ghost\n");
    fclose(f);
    int opens = called(&h, "HcsOpenComputeSystem");

    hcsd_start(&h, NULL);
    ck_assert_int_ge(called(&h, "HcsOpenComputeSystem"), opens + 1);
    struct stat sb;
    ck_assert_msg(stat(ghost, &sb) != 0, "the ghost's record is still there");
    http_get(&h.b, "/v1/containers/keep", &r);
    ck_assert_msg(r.status == 200, "get: %ld %s", r.status, r.body);
    ck_assert_str_eq(str_at(r.json, "state"), "stopped");
    hresp_free(&r);
    /* Its output stayed; the exit code is not invented. */
    long st = 0;
    char *out = proc_get(&h, "keep", "task", "stdout", &st);
    ck_assert_msg(st == 200 && strcmp(out, "before") == 0, "stdout: %ld %s", st, out);
    free(out);
    delete_ctr(&h, "keep");
    char rec[PATH_MAX + 64];
    snprintf(rec, sizeof(rec), "%s/runtime/hcs/keep", h.b.root);
    ck_assert_msg(stat(rec, &sb) != 0, "keep's record is still there");
    berthd_finish(&h.b);
}
END_TEST

/*
 * With BERTH_HCS_DOUBLE_STATE the double keeps a started system across
 * berthd.exe's processes, as the service does (its processes, threads of
 * the process that ended, do not survive): the restarted daemon reopens
 * the system and goes on using it.
 */
START_TEST(a_restarted_berthd_reattaches_to_a_system_that_outlived_it)
{
    struct hcsd h = {.keep = true};
    hcsd_start(&h, NULL);
    struct hresp r;
    create_ok(&h, "live");
    spawn(&h, "live", "task", "\"out\",\"before\",\"wait\"");
    wait_stdout(&h, "live", "task", "before");
    int ws = berthd_term(&h.b, 60000);
    ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "stop: status %d", ws);

    hcsd_start(&h, NULL);
    http_get(&h.b, "/v1/containers/live", &r);
    ck_assert_msg(r.status == 200, "get: %ld %s", r.status, r.body);
    ck_assert_str_eq(str_at(r.json, "state"), "running");
    hresp_free(&r);
    /* The process did not outlive the old daemon's double: no exit code is invented. */
    ck_assert_int_eq(wait_exit(&h, "live", "task"), 255);
    long st = 0;
    char *body = proc_get(&h, "live", "task", "", &st);
    ck_assert_msg(st == 200 && strstr(body, "exit code is lost"), "process: %ld %s", st, body);
    free(body);
    char *out = proc_get(&h, "live", "task", "stdout", &st);
    ck_assert_msg(st == 200 && strcmp(out, "before") == 0, "stdout: %ld %s", st, out);
    free(out);
    /* The reopened system runs new processes. */
    spawn(&h, "live", "after", "\"out\",\"again\",\"exit\",\"5\"");
    ck_assert_int_eq(wait_exit(&h, "live", "after"), 5);
    wait_stdout(&h, "live", "after", "again");
    delete_ctr(&h, "live");
    char kept[PATH_MAX + 64];
    snprintf(kept, sizeof(kept), "%s/runtime/hcs/live", h.b.root);
    struct stat sb;
    ck_assert_msg(stat(kept, &sb) != 0, "live's record is still there");
    berthd_finish(&h.b);
}
END_TEST

/* ---- networks: the HCN double ---- */

/*
 * A container with a network: an address from --network-pool, its ports
 * forwarded by the endpoint's PortMapping policies (a host port 0 chosen),
 * the endpoint added to a namespace of its own, which the compute system
 * names in Networking.Namespace; the delete takes both away.
 */
START_TEST(a_container_with_a_network_gets_an_hcn_endpoint_namespace_and_ports)
{
    struct hcsd h = {.net = true};
    hcsd_start(&h, NULL);
    struct hresp r;
    ck_assert_msg(wait_health_bool(&h, "network.usable", true), "the network is not usable");
    create(&h, "n1",
           "\"network\":{\"ports\":[{\"host\":0,\"container\":80},"
           "{\"host\":18090,\"container\":53,\"protocol\":\"udp\"}]}",
           &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    ck_assert_str_eq(str_at(r.json, "network.ip"), "10.66.0.2");
    ck_assert_int_eq(json_object_get_int(json_at(r.json, "network.prefix")), 24);
    ck_assert_str_eq(str_at(r.json, "network.gateway"), "10.66.0.1");
    json_object *ports = json_at(r.json, "network.ports");
    ck_assert_int_eq(json_object_array_length(ports), 2);
    int chosen =
        json_object_get_int(json_object_object_get(json_object_array_get_idx(ports, 0), "host"));
    ck_assert_int_ne(chosen, 0);
    hresp_free(&r);
    ck_assert_int_eq(hcn_called(&h, "HcnCreateNetwork"), 1);
    ck_assert_int_eq(hcn_called(&h, "HcnCreateEndpoint"), 1);
    ck_assert_int_eq(hcn_called(&h, "HcnCreateNamespace"), 1);
    ck_assert_int_eq(hcn_called(&h, "HcnModifyNamespace"), 1);
    ck_assert(net_recorded(&h, "n1"));
    char ep[64], ns[64];
    hcn_id(&h, "HcnCreateEndpoint", 1, ep, sizeof(ep));
    hcn_id(&h, "HcnCreateNamespace", 1, ns, sizeof(ns));
    /* The compute system joins the namespace. */
    json_object *doc = recorded(&h, "HcsCreateComputeSystem", 1);
    ck_assert_str_eq(str_at(doc, "Container.Networking.Namespace"), ns);
    json_object_put(doc);
    /* The endpoint's NAT: the chosen port to 80, 18090 to 53/udp. */
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/calls.log", h.hcn);
    size_t len = 0;
    char *log = fx_read_file(path, &len);
    char num[16] = "";
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"))
        if (strstr(line, " HcnCreateEndpoint "))
            sscanf(line, "%15s", num);
    free(log);
    snprintf(path, sizeof(path), "%s/%s-HcnCreateEndpoint.json", h.hcn, num);
    char *text = fx_read_file(path, &len);
    json_object *epd = text ? json_tokener_parse(text) : NULL;
    free(text);
    ck_assert_msg(epd, "no endpoint document %s", path);
    json_object *pols = json_object_object_get(epd, "Policies");
    ck_assert_int_eq(json_object_array_length(pols), 2);
    json_object *s0 = json_object_object_get(json_object_array_get_idx(pols, 0), "Settings");
    ck_assert_int_eq(json_object_get_int(json_object_object_get(s0, "ExternalPort")), chosen);
    ck_assert_int_eq(json_object_get_int(json_object_object_get(s0, "InternalPort")), 80);
    json_object *s1 = json_object_object_get(json_object_array_get_idx(pols, 1), "Settings");
    ck_assert_int_eq(json_object_get_int(json_object_object_get(s1, "Protocol")), 17);
    json_object_put(epd);
    /* GET says the same. */
    http_get(&h.b, "/v1/containers/n1", &r);
    ck_assert_str_eq(str_at(r.json, "network.ip"), "10.66.0.2");
    hresp_free(&r);
    /* A second container's port 18090/udp is the first one's: 409, nothing made. */
    create(&h, "n2",
           "\"network\":{\"ports\":[{\"host\":18090,\"container\":1,"
           "\"protocol\":\"udp\"}]}",
           &r);
    ck_assert_error_reply(&r, 409, "conflict", "18090/udp");
    hresp_free(&r);
    ck_assert_int_eq(hcn_called(&h, "HcnCreateEndpoint"), 1);
    /* A loopback-only one gets none. */
    create(&h, "lo", "\"network\":{\"disabled\":true}", &r);
    ck_assert_msg(r.status == 201, "create lo: %ld %s", r.status, r.body);
    ck_assert(json_object_get_boolean(json_at(r.json, "network.disabled")));
    hresp_free(&r);
    ck_assert_int_eq(hcn_called(&h, "HcnCreateEndpoint"), 1);
    doc = recorded(&h, "HcsCreateComputeSystem", 2);
    ck_assert_ptr_null(json_at(doc, "Container.Networking"));
    json_object_put(doc);

    delete_ctr(&h, "n1");
    delete_ctr(&h, "lo");
    ck_assert(hcn_called_with(&h, "HcnDeleteEndpoint", ep));
    ck_assert(hcn_called_with(&h, "HcnDeleteNamespace", ns));
    ck_assert(!net_recorded(&h, "n1"));
    ck_assert(!net_recorded(&h, "lo"));
    berthd_finish(&h.b);
}
END_TEST

/*
 * The n-th (from 1) computecore call of fn whose document has want at
 * dotted (NULL: any document), parsed; *seq is its number in calls.log
 * (the order of the calls). NULL when there is none.
 */
static json_object *
call_find(const struct hcsd *h, const char *fn, const char *dotted, const char *want, int n,
          int *seq)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/calls.log", h->rec);
    size_t len = 0;
    char *log = fx_read_file(path, &len);
    ck_assert_msg(log, "no %s", path);
    json_object *found = NULL;
    for (char *line = strtok(log, "\n"); line && !found; line = strtok(NULL, "\n")) {
        char num[16], name[64];
        if (sscanf(line, "%15s %63s", num, name) != 2 || strcmp(name, fn) != 0)
            continue;
        char file[PATH_MAX + 128];
        snprintf(file, sizeof(file), "%s/%s-%s.json", h->rec, num, fn);
        size_t dlen = 0;
        char *text = fx_read_file(file, &dlen);
        json_object *d = text ? json_tokener_parse(text) : NULL;
        free(text);
        const char *v = d && dotted ? str_at(d, dotted) : NULL;
        if (d && (!dotted || (v && strcmp(v, want) == 0)) && --n == 0) {
            found = d;
            *seq = atoi(num);
        } else {
            json_object_put(d);
        }
    }
    free(log);
    return found;
}

/*
 * hyperv with a network: after the utility VM starts and before the
 * container in it is made, the VM's guest gets the HCN namespace, the
 * endpoint's adapter is announced (pre-add) and added as
 * VirtualMachine/Devices/NetworkAdapters/<endpoint> with the MAC HNS gave
 * it, and the hosted container joins the namespace. The delete removes
 * the adapter and the namespace from the VM before the VM goes; a
 * loopback-only hyperv container's VM gets no adapter.
 */
START_TEST(a_hyperv_container_with_a_network_gives_its_vm_the_endpoints_adapter)
{
    struct hcsd h = {.net = true};
    hcsd_start(&h, NULL);
    struct hresp r;
    ck_assert_msg(wait_health_bool(&h, "network.usable", true), "the network is not usable");
    create(&h, "hn", "\"isolation\":\"hyperv\"", &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    ck_assert_str_eq(str_at(r.json, "network.ip"), "10.66.0.2");
    hresp_free(&r);
    char ep[64], ns[64], nicpath[128], mac[32];
    hcn_id(&h, "HcnCreateEndpoint", 1, ep, sizeof(ep));
    hcn_id(&h, "HcnCreateNamespace", 1, ns, sizeof(ns));
    ck_assert_int_eq(hcn_called(&h, "HcnQueryEndpointProperties"), 1);
    /* The double's MAC: 00-15-5D and the endpoint id's first three bytes. */
    snprintf(mac, sizeof(mac), "00-15-5D-%.2s-%.2s-%.2s", ep, ep + 2, ep + 4);
    for (char *c = mac; *c; c++)
        *c = (char)toupper((unsigned char)*c);
    snprintf(nicpath, sizeof(nicpath), "VirtualMachine/Devices/NetworkAdapters/%s", ep);

    int s_vm = 0, s_ns = 0, s_pre = 0, s_nic = 0, s_ctr = 0;
    json_object *vm = call_find(&h, "HcsCreateComputeSystem", NULL, NULL, 1, &s_vm);
    json_object *nsd = call_find(&h, "HcsModifyComputeSystem", "GuestRequest.ResourceType",
                                 "NetworkNamespace", 1, &s_ns);
    json_object *pre = call_find(&h, "HcsModifyComputeSystem", "GuestRequest.Settings.RequestType",
                                 "PreAdd", 1, &s_pre);
    json_object *nic = call_find(&h, "HcsModifyComputeSystem", "ResourcePath", nicpath, 1, &s_nic);
    json_object *ctr = call_find(&h, "HcsCreateComputeSystem", NULL, NULL, 2, &s_ctr);
    ck_assert_msg(vm && nsd && pre && nic && ctr, "vm %p namespace %p pre-add %p adapter %p ctr %p",
                  (void *)vm, (void *)nsd, (void *)pre, (void *)nic, (void *)ctr);
    ck_assert_msg(s_vm < s_ns && s_ns < s_pre && s_pre < s_nic && s_nic < s_ctr,
                  "order: vm %d namespace %d pre-add %d adapter %d container %d", s_vm, s_ns, s_pre,
                  s_nic, s_ctr);
    ck_assert_str_eq(str_at(nsd, "GuestRequest.RequestType"), "Add");
    ck_assert_str_eq(str_at(nsd, "GuestRequest.Settings.Id"), ns);
    ck_assert_str_eq(str_at(pre, "GuestRequest.Settings.AdapterId"), ep);
    ck_assert_str_eq(str_at(pre, "GuestRequest.Settings.Settings.MacAddress"), mac);
    ck_assert_str_eq(str_at(pre, "GuestRequest.Settings.Settings.IPAddress"), "10.66.0.2");
    ck_assert_str_eq(str_at(nic, "RequestType"), "Add");
    ck_assert_str_eq(str_at(nic, "Settings.EndpointId"), ep);
    ck_assert_str_eq(str_at(nic, "Settings.MacAddress"), mac);
    ck_assert_str_eq(str_at(nic, "GuestRequest.ResourceType"), "Network");
    ck_assert_str_eq(str_at(ctr, "HostedSystem.Container.Networking.Namespace"), ns);
    json_object_put(vm);
    json_object_put(nsd);
    json_object_put(pre);
    json_object_put(nic);
    json_object_put(ctr);

    /* Loopback only: the VM gets no adapter. */
    create(&h, "hlo", "\"isolation\":\"hyperv\",\"network\":{\"disabled\":true}", &r);
    ck_assert_msg(r.status == 201, "create hlo: %ld %s", r.status, r.body);
    hresp_free(&r);
    int s = 0;
    ck_assert_ptr_null(
        call_find(&h, "HcsModifyComputeSystem", "GuestRequest.ResourceType", "Network", 3, &s));
    ck_assert_ptr_null(call_find(&h, "HcsModifyComputeSystem", "GuestRequest.ResourceType",
                                 "NetworkNamespace", 2, &s));
    json_object *lo = call_find(&h, "HcsCreateComputeSystem", NULL, NULL, 4, &s);
    ck_assert_ptr_nonnull(lo);
    ck_assert_ptr_null(json_at(lo, "HostedSystem.Container.Networking"));
    json_object_put(lo);

    delete_ctr(&h, "hn");
    json_object *rm = call_find(&h, "HcsModifyComputeSystem", "ResourcePath", nicpath, 2, &s);
    ck_assert_ptr_nonnull(rm);
    ck_assert_str_eq(str_at(rm, "RequestType"), "Remove");
    ck_assert_str_eq(str_at(rm, "Settings.EndpointId"), ep);
    json_object_put(rm);
    json_object *nsr = call_find(&h, "HcsModifyComputeSystem", "GuestRequest.ResourceType",
                                 "NetworkNamespace", 2, &s);
    ck_assert_ptr_nonnull(nsr);
    ck_assert_str_eq(str_at(nsr, "GuestRequest.RequestType"), "Remove");
    json_object_put(nsr);
    ck_assert(hcn_called_with(&h, "HcnDeleteEndpoint", ep));
    delete_ctr(&h, "hlo");
    berthd_finish(&h.b);
}
END_TEST

/* The sequence number of the computecore double's last call of fn (0: none). */
static int
last_seq(const struct hcsd *h, const char *fn)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/calls.log", h->rec);
    size_t len = 0;
    char *log = fx_read_file(path, &len);
    int last = 0;
    for (char *line = log ? strtok(log, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        char num[16], name[64];
        if (sscanf(line, "%15s %63s", num, name) == 2 && strcmp(name, fn) == 0)
            last = atoi(num);
    }
    free(log);
    return last;
}

/*
 * berthd.exe killed while a hyperv container with a network runs, its
 * utility VM kept by the double (BERTH_HCS_DOUBLE_STATE) as the service
 * keeps it: the successor's delete removes the adapter and the namespace
 * it gave the VM (by the ownership record, which names them), before the
 * VM goes, and leaves no record.
 */
START_TEST(a_killed_berthd_s_successor_removes_the_adapter_it_gave_a_utility_vm)
{
    struct hcsd h = {.net = true, .keep = true};
    hcsd_start(&h, NULL);
    struct hresp r;
    ck_assert_msg(wait_health_bool(&h, "network.usable", true), "the network is not usable");
    create(&h, "hk", "\"isolation\":\"hyperv\"", &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    hresp_free(&r);
    char ep[64], ns[64], nicpath[128];
    hcn_id(&h, "HcnCreateEndpoint", 1, ep, sizeof(ep));
    hcn_id(&h, "HcnCreateNamespace", 1, ns, sizeof(ns));
    snprintf(nicpath, sizeof(nicpath), "VirtualMachine/Devices/NetworkAdapters/%s", ep);
    int s = 0;
    json_object *add = call_find(&h, "HcsModifyComputeSystem", "ResourcePath", nicpath, 1, &s);
    ck_assert_ptr_nonnull(add);
    json_object_put(add);
    berthd_kill(&h.b);

    hcsd_start(&h, NULL);
    ck_assert_msg(wait_health_bool(&h, "network.usable", true), "the network is not usable");
    http_get(&h.b, "/v1/containers/hk", &r);
    ck_assert_msg(r.status == 200, "get: %ld %s", r.status, r.body);
    ck_assert_str_eq(str_at(r.json, "state"), "running");
    hresp_free(&r);
    int terminates = called(&h, "HcsTerminateComputeSystem");
    delete_ctr(&h, "hk");
    int s_rm = 0, s_nsr = 0, s_end = 0;
    json_object *rm = call_find(&h, "HcsModifyComputeSystem", "ResourcePath", nicpath, 2, &s_rm);
    ck_assert_msg(rm, "the restarted daemon's delete did not remove the vm's adapter %s", ep);
    ck_assert_str_eq(str_at(rm, "RequestType"), "Remove");
    ck_assert_str_eq(str_at(rm, "Settings.EndpointId"), ep);
    json_object_put(rm);
    json_object *nsr = call_find(&h, "HcsModifyComputeSystem", "GuestRequest.ResourceType",
                                 "NetworkNamespace", 2, &s_nsr);
    ck_assert_msg(nsr, "the restarted daemon's delete did not remove the vm's namespace");
    ck_assert_str_eq(str_at(nsr, "GuestRequest.RequestType"), "Remove");
    ck_assert_str_eq(str_at(nsr, "GuestRequest.Settings.Id"), ns);
    json_object_put(nsr);
    /* Both before the VM is terminated (the container's system, then the VM). */
    ck_assert_int_eq(called(&h, "HcsTerminateComputeSystem"), terminates + 2);
    s_end = last_seq(&h, "HcsTerminateComputeSystem");
    ck_assert_msg(s_rm < s_end && s_nsr < s_end, "adapter %d namespace %d vm terminated %d", s_rm,
                  s_nsr, s_end);
    ck_assert(!net_recorded(&h, "hk"));
    char kept[PATH_MAX + 64];
    snprintf(kept, sizeof(kept), "%s/runtime/hcs/hk", h.b.root);
    struct stat sb;
    ck_assert_msg(stat(kept, &sb) != 0, "hk's record is still there");
    ctr_gone(&h, "hk");
    berthd_finish(&h.b);
}
END_TEST

/* When the compute system does not start, the create fails and its network goes. */
START_TEST(a_create_that_fails_in_hcs_deletes_its_namespace_and_endpoint)
{
    struct hcsd h = {.net = true};
    hcsd_start(&h, "start-fails");
    struct hresp r;
    create(&h, "bad", NULL, &r);
    ck_assert_msg(r.status >= 400, "create: %ld %s", r.status, r.body);
    hresp_free(&r);
    ck_assert_int_eq(hcn_called(&h, "HcnCreateNamespace"), 1);
    char ep[64], ns[64];
    hcn_id(&h, "HcnCreateEndpoint", 1, ep, sizeof(ep));
    hcn_id(&h, "HcnCreateNamespace", 1, ns, sizeof(ns));
    ck_assert(hcn_called_with(&h, "HcnDeleteNamespace", ns));
    ck_assert(hcn_called_with(&h, "HcnDeleteEndpoint", ep));
    ck_assert(!net_recorded(&h, "bad"));
    ctr_gone(&h, "bad");
    berthd_finish(&h.b);
}
END_TEST

/* A failure in HNS itself: the create fails naming it, and nothing stays. */
START_TEST(a_create_whose_namespace_fails_in_hns_fails_and_leaves_nothing)
{
    struct hcsd h = {.net = true, .hcn_fail = "create-namespace"};
    hcsd_start(&h, NULL);
    struct hresp r;
    create(&h, "nons", NULL, &r);
    ck_assert_msg(r.status >= 500 && strstr(r.body, "namespace"), "create: %ld %s", r.status,
                  r.body);
    hresp_free(&r);
    char ep[64];
    hcn_id(&h, "HcnCreateEndpoint", 1, ep, sizeof(ep));
    ck_assert(hcn_called_with(&h, "HcnDeleteEndpoint", ep));
    ck_assert_int_eq(called(&h, "HcsCreateComputeSystem"), 0);
    ck_assert(!net_recorded(&h, "nons"));
    ctr_gone(&h, "nons");
    berthd_finish(&h.b);
}
END_TEST

/*
 * berthd.exe killed with a container's network recorded, and a record of
 * a network whose container never came to be (a kill between the record
 * and the endpoint): the restart keeps the live container's network and
 * deletes the other's endpoint and namespace, by the ids its record names.
 */
START_TEST(a_killed_berthd_keeps_live_networks_and_deletes_recorded_leftovers_at_restart)
{
    struct hcsd h = {.net = true};
    hcsd_start(&h, NULL);
    struct hresp r;
    create_ok(&h, "keep");
    char ep[64], ns[64];
    hcn_id(&h, "HcnCreateEndpoint", 1, ep, sizeof(ep));
    hcn_id(&h, "HcnCreateNamespace", 1, ns, sizeof(ns));
    berthd_kill(&h.b);
    ck_assert(net_recorded(&h, "keep"));
    static const char ghost_ep[] = "0b5e0e57-0000-4000-8000-00000000e001";
    static const char ghost_ns[] = "0b5e0e57-0000-4000-8000-00000000a001";
    char ghost[PATH_MAX + 64];
    snprintf(ghost, sizeof(ghost), "%s/network/hcn/ghost", h.b.root);
    FILE *f = fopen(ghost, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "{\"handle\":\"ghost\",\"state\":\"attaching\",\"disabled\":false,"
            "\"endpoint\":\"%s\",\"namespace\":\"%s\",\"ip\":\"10.66.0.3\","
            "\"prefix\":24,\"gateway\":\"10.66.0.1\",\"ports\":[]}",
            ghost_ep, ghost_ns);
    fclose(f);

    hcsd_start(&h, NULL);
    ck_assert_msg(wait_health_bool(&h, "network.usable", true), "the network is not usable");
    ck_assert(hcn_called_with(&h, "HcnDeleteNamespace", ghost_ns));
    ck_assert(hcn_called_with(&h, "HcnDeleteEndpoint", ghost_ep));
    ck_assert(!net_recorded(&h, "ghost"));
    ck_assert(!hcn_called_with(&h, "HcnDeleteNamespace", ns));
    http_get(&h.b, "/v1/containers/keep", &r);
    ck_assert_msg(r.status == 200, "get: %ld %s", r.status, r.body);
    ck_assert_str_eq(str_at(r.json, "network.ip"), "10.66.0.2");
    hresp_free(&r);
    delete_ctr(&h, "keep");
    ck_assert(hcn_called_with(&h, "HcnDeleteNamespace", ns));
    ck_assert(hcn_called_with(&h, "HcnDeleteEndpoint", ep));
    ck_assert(!net_recorded(&h, "keep"));
    berthd_finish(&h.b);
}
END_TEST

int
main(void)
{
    if (!harness_wine() || !getenv("BERTH_TEST_HCS_DOUBLE")) {
        fprintf(stderr, "test_wine_hcs: BERTH_TEST_WINE or BERTH_TEST_HCS_DOUBLE is not set; "
                        "scripts/build-windows.sh runs this suite against berthd.exe under Wine\n");
        return 77;
    }
    Suite *s = suite_create("wine_hcs");
    TCase *tc = tcase_create("berthd.exe --runtime hcs");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, health_shows_both_isolations_usable_on_the_double);
    tcase_add_test(tc, a_raw_rootfs_container_runs_a_process_that_is_signalled_and_deleted);
    tcase_add_test(tc, two_containers_run_a_process_named_task_at_once);
    tcase_add_test(tc, a_system_that_dies_is_reported_stopped);
    tcase_add_test(tc, a_system_that_dies_during_the_create_is_reported_stopped);
    tcase_add_test(tc, a_volume_mount_is_a_mapped_directory);
    tcase_add_test(tc, a_raw_rootfs_gets_a_scratch_that_the_delete_takes_away);
    tcase_add_test(tc, a_berthd_killed_between_mount_and_entry_removal_is_cleaned_up_at_restart);
    tcase_add_test(tc, a_hyperv_container_gets_a_vm_sized_from_its_limit);
    tcase_add_test(tc, a_hyperv_container_gets_its_layers_by_vsmb_and_its_scratch_by_scsi);
    tcase_add_test(tc, a_hyperv_container_on_a_base_layer_without_a_utility_vm_is_refused);
    tcase_add_test(tc, a_host_without_hyperv_says_so_in_health_and_refuses_hyperv_with_409);
    tcase_add_test(tc, a_restarted_berthd_reopens_what_it_owns_and_cleans_up_the_rest);
    tcase_add_test(tc, a_restarted_berthd_reattaches_to_a_system_that_outlived_it);
    tcase_add_test(tc, a_container_with_a_network_gets_an_hcn_endpoint_namespace_and_ports);
    tcase_add_test(tc, a_hyperv_container_with_a_network_gives_its_vm_the_endpoints_adapter);
    tcase_add_test(tc, a_killed_berthd_s_successor_removes_the_adapter_it_gave_a_utility_vm);
    tcase_add_test(tc, a_create_that_fails_in_hcs_deletes_its_namespace_and_endpoint);
    tcase_add_test(tc, a_create_whose_namespace_fails_in_hns_fails_and_leaves_nothing);
    tcase_add_test(tc,
                   a_killed_berthd_keeps_live_networks_and_deletes_recorded_leftovers_at_restart);
    suite_add_tcase(s, tc);
    return harness_run_suite(s);
}
