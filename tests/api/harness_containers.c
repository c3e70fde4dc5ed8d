/* Container helpers for the API suites; see harness_containers.h. */
#include "harness_containers.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static char base_dir[PATH_MAX];
static char rootfs_dir[PATH_MAX];
static char raw_uri[PATH_MAX + 16];
static char layout_dir[PATH_MAX];

#define MAX_TRACKED 64
static struct {
    char root[PATH_MAX];
    char handle[129];
} tracked[MAX_TRACKED];
static size_t ntracked;
static bool atexit_set;
/* The tracking file shared with the suite's parent process (ctr_add_fixture). */
static char track_file[PATH_MAX];

int
ctr_sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return st == 0 ? 0 : (st < 0 ? -1 : (WIFEXITED(st) ? WEXITSTATUS(st) : 128));
}

const char *
ctr_sh_out(const char *fmt, ...)
{
    static char line[4096];
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    line[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p)
        return line;
    if (!fgets(line, sizeof(line), p))
        line[0] = '\0';
    pclose(p);
    line[strcspn(line, "\n")] = '\0';
    return line;
}

static void
cleanup_at_exit(void)
{
    /* Only the handles this process created, newest first. */
    for (size_t i = ntracked; i-- > 0;) {
        ctr_sh("runc --root '%s/runtime/runc' delete --force '%s' >/dev/null 2>&1", tracked[i].root,
               tracked[i].handle);
        ctr_sh("umount -l '%s/containers/%s/rootfs' >/dev/null 2>&1", tracked[i].root,
               tracked[i].handle);
        ctr_sh("umount -l '%s/network/netns/%s' >/dev/null 2>&1", tracked[i].root,
               tracked[i].handle);
    }
    if (base_dir[0])
        ctr_sh("rm -rf '%s'", base_dir);
}

/*
 * Check ends a failed test's process with _exit, so atexit never runs
 * there: every container is also written to a file that the suite's
 * parent reads after the last test (an unchecked fixture's teardown),
 * with the PID of the daemon that runs it, to kill it if still there.
 */
static void
fixture_setup(void)
{
    char dir[PATH_MAX];
    harness_mkdtemp(dir, sizeof(dir));
    snprintf(track_file, sizeof(track_file), "%s/tracked", dir);
}

static void
fixture_teardown(void)
{
    FILE *f = fopen(track_file, "r");
    char line[PATH_MAX + 256];
    while (f && fgets(line, sizeof(line), f)) {
        int pid = 0;
        char root[PATH_MAX], handle[160];
        if (sscanf(line, "%d %4095s %159s", &pid, root, handle) != 3)
            continue;
        char comm[64] = "";
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/comm", pid);
        FILE *c = fopen(path, "r");
        if (c) {
            if (!fgets(comm, sizeof(comm), c))
                comm[0] = '\0';
            fclose(c);
        }
        /* Only a daemon this suite started, still running on that root. */
        if (pid > 0 && strncmp(comm, "berthd", 6) == 0 &&
            ctr_sh("tr '\\0' ' ' < /proc/%d/cmdline | grep -qF -- '%s'", pid, root) == 0)
            kill(pid, SIGKILL);
        ctr_sh("runc --root '%s/runtime/runc' delete --force '%s' >/dev/null 2>&1", root, handle);
        ctr_sh("umount -l '%s/containers/%s/rootfs' >/dev/null 2>&1", root, handle);
        ctr_sh("umount -l '%s/network/netns/%s' >/dev/null 2>&1", root, handle);
    }
    /* Only once every container is gone: a root holds the runtime state of all its containers. */
    if (f)
        rewind(f);
    while (f && fgets(line, sizeof(line), f)) {
        int pid = 0;
        char root[PATH_MAX], handle[160];
        if (sscanf(line, "%d %4095s %159s", &pid, root, handle) != 3)
            continue;
        const char *slash = strrchr(root, '/');
        if (slash && strcmp(slash, "/root") == 0 && strstr(root, "/berth-api-")) {
            /* Its daemons are dead: what else they left, cgroups included. */
            harness_remove_leftovers(root);
            ctr_sh("d='%s'; grep -q \" $d/\" /proc/self/mountinfo || rm -rf \"${d%%/root}\"", root);
        }
    }
    if (f)
        fclose(f);
    char *slash = strrchr(track_file, '/');
    if (slash) {
        *slash = '\0';
        ctr_sh("rm -rf '%s'", track_file);
    }
}

void
ctr_add_fixture(TCase *tc)
{
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
}

void
ctr_track(const struct berthd *b, const char *handle)
{
    if (track_file[0]) {
        FILE *f = fopen(track_file, "a");
        if (f) {
            fprintf(f, "%d %s %s\n", (int)b->pid, b->root, handle);
            fclose(f);
        }
    }
    if (!atexit_set) {
        atexit(cleanup_at_exit);
        atexit_set = true;
    }
    for (size_t i = 0; i < ntracked; i++)
        if (strcmp(tracked[i].root, b->root) == 0 && strcmp(tracked[i].handle, handle) == 0)
            return;
    if (ntracked < MAX_TRACKED) {
        snprintf(tracked[ntracked].root, sizeof(tracked[ntracked].root), "%s", b->root);
        snprintf(tracked[ntracked].handle, sizeof(tracked[ntracked].handle), "%s", handle);
        ntracked++;
    }
}

void
ctr_require_runtime(void)
{
    if (geteuid() != 0 || ctr_sh("command -v runc >/dev/null") != 0 ||
        access("/bin/busybox", X_OK) != 0) {
        fprintf(stderr, "skipped: needs root, runc and busybox-static\n");
        exit(77);
    }
}

static void
ensure_base(void)
{
    if (base_dir[0])
        return;
    harness_mkdtemp(base_dir, sizeof(base_dir));
    if (!atexit_set) {
        atexit(cleanup_at_exit);
        atexit_set = true;
    }
}

const char *
ctr_busybox_rootfs(void)
{
    if (rootfs_dir[0])
        return rootfs_dir;
    ensure_base();
    snprintf(rootfs_dir, sizeof(rootfs_dir), "%s/rootfs", base_dir);
    ck_assert_int_eq(ctr_sh("set -e; d='%s'; mkdir -p $d/bin $d/etc $d/tmp $d/root $d/proc $d/sys "
                            "$d/dev; cp /bin/busybox $d/bin/; for a in $(/bin/busybox --list); do "
                            "[ $a = busybox ] || ln -s busybox $d/bin/$a; done; "
                            "printf 'root:x:0:0:root:/root:/bin/sh\\nnobody:x:65534:65534:nobody:"
                            "/:/bin/sh\\n' > $d/etc/passwd; echo image-etc > $d/etc/berth-marker",
                            rootfs_dir),
                     0);
    snprintf(raw_uri, sizeof(raw_uri), "raw://%s", rootfs_dir);
    return rootfs_dir;
}

const char *
ctr_busybox_raw(void)
{
    ctr_busybox_rootfs();
    return raw_uri;
}

const char *
ctr_busybox_layout(void)
{
    if (layout_dir[0])
        return layout_dir;
    if (ctr_sh("command -v umoci >/dev/null") != 0) {
        fprintf(stderr, "skipped: needs umoci\n");
        exit(77);
    }
    const char *rootfs = ctr_busybox_rootfs();
    snprintf(layout_dir, sizeof(layout_dir), "%s/layout", base_dir);
    /* umoci insert writes truncated tars in this version: unpack, copy, repack. */
    ck_assert_int_eq(ctr_sh("set -e; cd '%s'; umoci init --layout layout >/dev/null; "
                            "umoci new --image layout:latest >/dev/null; "
                            "umoci unpack --image layout:latest bundle >/dev/null 2>&1; "
                            "cp -a '%s'/. bundle/rootfs/; "
                            "umoci repack --image layout:latest bundle >/dev/null; rm -rf bundle",
                            base_dir, rootfs),
                     0);
    return layout_dir;
}

void
ctr_import_busybox(const struct berthd *b, const char *name)
{
    char path[256], body[PATH_MAX + 64];
    snprintf(path, sizeof(path), "/v1/images?name=%s", name);
    snprintf(body, sizeof(body), "{\"source\":{\"layout\":\"%s\"}}", ctr_busybox_layout());
    struct hresp r;
    http_do(b,
            &(struct hreq){.method = "POST",
                           .path = path,
                           .body = body,
                           .headers = (const char *[]){"Content-Type: application/json", NULL},
                           .timeout_ms = 60000},
            &r);
    ck_assert_msg(r.status == 201 || r.status == 200, "import: %ld %s", r.status, r.body);
    hresp_free(&r);
}

void
ctr_create(const struct berthd *b, const char *body, struct hresp *out)
{
    http_do(b,
            &(struct hreq){.method = "POST",
                           .path = "/v1/containers",
                           .body = body,
                           .headers = (const char *[]){"Content-Type: application/json", NULL},
                           .timeout_ms = 60000},
            out);
    json_object *h = out->json ? json_at(out->json, "handle") : NULL;
    if (out->status == 201 && h)
        ctr_track(b, json_object_get_string(h));
}

void
ctr_create_raw(const struct berthd *b, const char *handle)
{
    char body[PATH_MAX + 256];
    snprintf(body, sizeof(body), "{\"handle\":\"%s\",\"rootfs\":\"%s\"}", handle,
             ctr_busybox_raw());
    ctr_track(b, handle);
    struct hresp r;
    ctr_create(b, body, &r);
    ck_assert_msg(r.status == 201, "create %s: %ld %s", handle, r.status, r.body);
    hresp_free(&r);
}

void
ctr_delete(const struct berthd *b, const char *handle)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/containers/%s", handle);
    struct hresp r;
    http_do(b, &(struct hreq){.method = "DELETE", .path = path, .timeout_ms = 60000}, &r);
    ck_assert_msg(r.status == 204, "delete %s: %ld %s", handle, r.status, r.body);
    hresp_free(&r);
}

void
proc_start(const struct berthd *b, const char *handle, const char *body)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/containers/%s/processes", handle);
    struct hresp r;
    http_post_json(b, path, body, &r);
    ck_assert_msg(r.status == 201, "start in %s: %ld %s", handle, r.status, r.body);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "state")), "running");
    ck_assert(json_object_get_int(json_at(r.json, "pid")) > 0);
    hresp_free(&r);
}

int
proc_wait(const struct berthd *b, const char *handle, const char *id)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/containers/%s/processes/%s/wait?timeout=20", handle, id);
    struct hresp r;
    http_do(b, &(struct hreq){.method = "GET", .path = path, .timeout_ms = 30000}, &r);
    ck_assert_msg(r.status == 200, "wait %s/%s: %ld %s", handle, id, r.status, r.body);
    json_object *code = json_at(r.json, "exit_code");
    ck_assert_ptr_nonnull(code);
    int ec = json_object_get_int(code);
    hresp_free(&r);
    return ec;
}

char *
proc_output(const struct berthd *b, const char *handle, const char *id, const char *which,
            const char *query)
{
    char path[512];
    snprintf(path, sizeof(path), "/v1/containers/%s/processes/%s/%s%s", handle, id, which, query);
    struct hresp r;
    http_do(b, &(struct hreq){.method = "GET", .path = path, .timeout_ms = 30000}, &r);
    ck_assert_msg(r.status == 200, "%s of %s/%s: %ld %s", which, handle, id, r.status, r.body);
    char *out = r.body;
    r.body = NULL;
    hresp_free(&r);
    return out ? out : strdup("");
}

int
proc_run_sh(const struct berthd *b, const char *handle, const char *id, const char *script,
            char **out)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_string(id));
    json_object_object_add(o, "path", json_object_new_string("sh"));
    json_object *args = json_object_new_array();
    json_object_array_add(args, json_object_new_string("-c"));
    json_object_array_add(args, json_object_new_string(script));
    json_object_object_add(o, "args", args);
    proc_start(b, handle, json_object_to_json_string(o));
    json_object_put(o);
    int ec = proc_wait(b, handle, id);
    if (out)
        *out = proc_output(b, handle, id, "stdout", "");
    return ec;
}
