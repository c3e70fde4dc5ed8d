/*
 * The crash campaign's checks after each restart (see crash_campaign.h):
 *
 * - acknowledged work is there: every image import, volume, upload,
 *   container and process start that was answered is listed (and every
 *   acknowledged delete stays deleted: a name never comes back);
 * - everything listed is whole and usable: each image is got by name and
 *   runs a container whose root filesystem has what its layers hold; each
 *   volume streams out a tar of exactly the acknowledged uploads (an
 *   upload cut by the kill: all of it or none); each container answers,
 *   runs a process, reports the exit code and output of every process it
 *   acknowledged, and (some of them, seeded) deletes;
 * - nothing leaked, right after the restart and again after these checks
 *   (the mounts, loop devices, cgroups, runc state, directories and
 *   processes that crash_leaks.c looks at), and after a garbage
 *   collection exactly the blobs and snapshots the listed images reach.
 *
 * Runs on the campaign's main thread, between rounds (no worker runs).
 */
#include "tests/api/crash_campaign.h"

#include <ctype.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/api/harness_containers.h"

struct vctx {
    struct cc_campaign *c;
    char *why;
    size_t len;
    bool failed;
    uint64_t rng;
    json_object *images; /* GET /v1/images, kept for the GC check */
    struct cc_names containers, volumes;
};

__attribute__((format(printf, 2, 3))) static bool
vfail(struct vctx *v, const char *fmt, ...)
{
    if (!v->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(v->why, v->len, fmt, ap);
        va_end(ap);
        v->failed = true;
    }
    return false;
}

static bool
is_hex64(const char *s)
{
    if (strlen(s) != 64)
        return false;
    for (; *s; s++)
        if (!isxdigit((unsigned char)*s) || isupper((unsigned char)*s))
            return false;
    return true;
}

static bool
get_json(struct vctx *v, const char *path, long want, struct hresp *r)
{
    http_do(&v->c->b, &(struct hreq){.method = "GET", .path = path, .timeout_ms = 30000}, r);
    if (r->status != want || (want == 200 && !r->json))
        return vfail(v, "GET %s: HTTP %ld (want %ld): %.1000s", path, r->status, want, r->body);
    return true;
}

/* ---- what is listed ----------------------------------------------------------------------------
 */

static bool
list_all(struct vctx *v)
{
    struct hresp r;
    json_object_put(v->images);
    v->images = NULL;
    if (!get_json(v, "/v1/images", 200, &r))
        return hresp_free(&r), false;
    v->images = json_object_get(json_at(r.json, "images"));
    hresp_free(&r);
    v->containers.n = v->volumes.n = 0;
    if (!get_json(v, "/v1/containers", 200, &r))
        return hresp_free(&r), false;
    json_object *a = json_at(r.json, "containers");
    for (size_t i = 0; a && i < json_object_array_length(a); i++)
        cc_names_add(&v->containers,
                     json_object_get_string(json_at(json_object_array_get_idx(a, i), "handle")));
    hresp_free(&r);
    if (!get_json(v, "/v1/volumes", 200, &r))
        return hresp_free(&r), false;
    a = json_at(r.json, "volumes");
    for (size_t i = 0; a && i < json_object_array_length(a); i++)
        cc_names_add(&v->volumes,
                     json_object_get_string(json_at(json_object_array_get_idx(a, i), "handle")));
    hresp_free(&r);
    return v->images != NULL;
}

/* The worker a name belongs to (w<N>-...), or NULL. */
static struct cc_worker *
owner(struct cc_campaign *c, const char *name)
{
    int id = -1;
    if (sscanf(name, "w%d-", &id) != 1 || id < 0 || id >= c->workers)
        return NULL;
    return &c->w[id];
}

/* ---- images
 * -------------------------------------------------------------------------------------- */

static const char *const fixture_checks[CC_FIX_COUNT] = {
    [CC_FIX_BASE] = "test -f /etc/passwd && test -x /bin/busybox && exit 7",
    [CC_FIX_CHILD] = "read x < /app/hello.txt && test \"$x\" = \"child layer\" && "
                     "test -x /bin/busybox && ! test -e /etc/passwd && exit 7",
    [CC_FIX_TAR] = "test -f /etc/passwd && test -x /bin/busybox && exit 7",
    [CC_FIX_DOCKER] = "test -f /etc/passwd && test -x /bin/busybox && exit 7",
};

/* Runs sh -c script as process id in handle; its exit code and stdout. */
static bool
run_sh(struct vctx *v, const char *handle, const char *id, const char *script, int *code,
       char **out)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_string(id));
    json_object_object_add(o, "path", json_object_new_string("sh"));
    json_object *args = json_object_new_array();
    json_object_array_add(args, json_object_new_string("-c"));
    json_object_array_add(args, json_object_new_string(script));
    json_object_object_add(o, "args", args);
    char path[512];
    snprintf(path, sizeof(path), "/v1/containers/%s/processes", handle);
    struct hresp r;
    http_do(&v->c->b,
            &(struct hreq){.method = "POST",
                           .path = path,
                           .body = json_object_to_json_string(o),
                           .timeout_ms = 30000},
            &r);
    json_object_put(o);
    bool ok = r.status == 201 || vfail(v, "run in %s: HTTP %ld: %s", handle, r.status, r.body);
    hresp_free(&r);
    if (!ok)
        return false;
    snprintf(path, sizeof(path), "/v1/containers/%s/processes/%s/wait?timeout=20", handle, id);
    if (!get_json(v, path, 200, &r))
        return hresp_free(&r), false;
    *code = json_object_get_int(json_at(r.json, "exit_code"));
    hresp_free(&r);
    if (out) {
        snprintf(path, sizeof(path), "/v1/containers/%s/processes/%s/stdout", handle, id);
        http_get(&v->c->b, path, &r);
        *out = r.status == 200 ? strdup(r.body) : NULL;
        ok = r.status == 200 || vfail(v, "GET %s: HTTP %ld", path, r.status);
        hresp_free(&r);
    }
    return ok;
}

static bool
delete_container(struct vctx *v, const char *handle)
{
    char path[512];
    snprintf(path, sizeof(path), "/v1/containers/%s", handle);
    struct hresp r;
    http_do(&v->c->b, &(struct hreq){.method = "DELETE", .path = path, .timeout_ms = 60000}, &r);
    bool ok = r.status == 204 || vfail(v, "delete %s: HTTP %ld: %s", handle, r.status, r.body);
    hresp_free(&r);
    if (ok) {
        http_get(&v->c->b, path, &r);
        ok = r.status == 404 || vfail(v, "%s deleted (204) but GET says %ld", handle, r.status);
        hresp_free(&r);
    }
    return ok;
}

static struct cc_image *
find_image(struct cc_campaign *c, const char *name)
{
    struct cc_worker *w = owner(c, name);
    for (int i = 0; w && i < CC_IMAGES; i++)
        if (w->images[i].p != CC_ABSENT && strcmp(w->images[i].name, name) == 0)
            return &w->images[i];
    return NULL;
}

static bool
check_images(struct vctx *v)
{
    struct cc_campaign *c = v->c;
    struct cc_names listed = {0};
    for (size_t i = 0; i < json_object_array_length(v->images); i++) {
        json_object *im = json_object_array_get_idx(v->images, i);
        const char *digest = json_object_get_string(json_at(im, "digest"));
        json_object *nm = json_at(im, "names");
        const char *first = NULL;
        int fix = -1;
        for (size_t k = 0; nm && k < json_object_array_length(nm); k++) {
            const char *name = json_object_get_string(json_object_array_get_idx(nm, k));
            struct cc_image *m = find_image(c, name);
            if (!m)
                return vfail(v, "image %s is listed (as %s) but was never imported or was deleted",
                             name, digest);
            if (!c->digest[m->fix][0])
                snprintf(c->digest[m->fix], sizeof(c->digest[m->fix]), "%s", digest);
            if (strcmp(c->digest[m->fix], digest) != 0)
                return vfail(v, "image %s is listed as %s, but its import gave %s", name, digest,
                             c->digest[m->fix]);
            m->p = CC_PRESENT;
            cc_names_add(&listed, name);
            if (!first)
                first = name, fix = m->fix;
        }
        if (!first)
            return vfail(v, "image %s is listed without a name: %s", digest,
                         json_object_to_json_string(im));
        /* Whole and usable: got by name, and a container on it runs. */
        char path[512], handle[64], id[32];
        snprintf(path, sizeof(path), "/v1/images/%s", first);
        struct hresp r;
        if (!get_json(v, path, 200, &r))
            return hresp_free(&r), false;
        bool same = strcmp(json_object_get_string(json_at(r.json, "digest")), digest) == 0;
        hresp_free(&r);
        if (!same)
            return vfail(v, "GET %s is not the listed %s", path, digest);
        snprintf(handle, sizeof(handle), "vfy-%d-%zu", c->round, i);
        snprintf(id, sizeof(id), "check");
        char body[512];
        snprintf(body, sizeof(body), "{\"handle\":\"%s\",\"image\":\"%s\"}", handle, first);
        ctr_track(&c->b, handle);
        http_post_json(&c->b, "/v1/containers", body, &r);
        bool created = r.status == 201 || vfail(v, "image %s (%s): a container on it: HTTP %ld: %s",
                                                first, digest, r.status, r.body);
        hresp_free(&r);
        if (!created)
            return false;
        int code = -1;
        if (!run_sh(v, handle, id, fixture_checks[fix], &code, NULL))
            return false;
        if (code != 7)
            return vfail(v,
                         "image %s (%s): its root filesystem is not what its layers hold (%s: "
                         "exit %d)",
                         first, digest, fixture_checks[fix], code);
        if (!delete_container(v, handle))
            return false;
    }
    for (int wi = 0; wi < c->workers; wi++)
        for (int i = 0; i < CC_IMAGES; i++) {
            struct cc_image *m = &c->w[wi].images[i];
            if (m->p == CC_ABSENT || cc_names_has(&listed, m->name))
                continue;
            if (m->p == CC_PRESENT)
                return vfail(v, "image %s was imported (acknowledged) but is not listed", m->name);
            m->p = CC_ABSENT;
        }
    return true;
}

/* ---- volumes
 * ------------------------------------------------------------------------------------- */

static struct cc_volume *
find_volume(struct cc_campaign *c, const char *handle)
{
    struct cc_worker *w = owner(c, handle);
    for (int i = 0; w && i < CC_VOLUMES; i++)
        if (w->volumes[i].p != CC_ABSENT && strcmp(w->volumes[i].handle, handle) == 0)
            return &w->volumes[i];
    return NULL;
}

static bool
check_volumes(struct vctx *v)
{
    struct cc_campaign *c = v->c;
    for (int i = 0; i < v->volumes.n; i++) {
        const char *h = v->volumes.v[i];
        struct cc_volume *m = find_volume(c, h);
        if (!m)
            return vfail(v, "volume %s is listed but was never created or was deleted", h);
        char path[512];
        snprintf(path, sizeof(path), "/v1/volumes/%s", h);
        struct hresp r;
        if (!get_json(v, path, 200, &r))
            return hresp_free(&r), false;
        const char *parent = json_object_get_string(json_at(r.json, "parent"));
        bool same = strcmp(parent ? parent : "", m->parent) == 0;
        hresp_free(&r);
        if (!same)
            return vfail(v, "volume %s: parent %s, want %s", h, parent ? parent : "(none)",
                         m->parent[0] ? m->parent : "(none)");
        snprintf(path, sizeof(path), "/v1/volumes/%s/files?path=/", h);
        cc_request(&c->b, "GET", path, NULL, NULL, NULL, 0, 0, 0, 60000, &r);
        if (r.status != 200 || r.curl_code != 0) {
            vfail(v, "GET %s: HTTP %ld (curl %d): %.500s", path, r.status, r.curl_code, r.body);
            return hresp_free(&r), false;
        }
        char why_old[512], why_new[512];
        bool ok = true;
        if (cc_tar_matches(r.body, r.body_len, &m->files, why_old, sizeof(why_old))) {
            /* The acknowledged uploads, and none of the one the kill cut. */
        } else if (m->pending) {
            struct cc_files merged = m->files;
            cc_files_merge(&merged, &m->pending_files);
            if (cc_tar_matches(r.body, r.body_len, &merged, why_new, sizeof(why_new)))
                m->files = merged;
            else
                ok = vfail(v,
                           "volume %s holds neither its acknowledged uploads (%s) nor those "
                           "and the one the kill cut (%s)",
                           h, why_old, why_new);
        } else {
            ok = vfail(v, "volume %s is not what its acknowledged uploads wrote: %s", h, why_old);
        }
        hresp_free(&r);
        if (!ok)
            return false;
        m->pending = false;
        m->p = CC_PRESENT;
    }
    for (int wi = 0; wi < c->workers; wi++)
        for (int i = 0; i < CC_VOLUMES; i++) {
            struct cc_volume *m = &c->w[wi].volumes[i];
            if (m->p == CC_ABSENT || cc_names_has(&v->volumes, m->handle))
                continue;
            if (m->p == CC_PRESENT)
                return vfail(v, "volume %s was created (acknowledged) but is not listed",
                             m->handle);
            m->p = CC_ABSENT;
        }
    return true;
}

/* ---- containers
 * ---------------------------------------------------------------------------------- */

static struct cc_container *
find_container(struct cc_campaign *c, const char *handle)
{
    struct cc_worker *w = owner(c, handle);
    for (int i = 0; w && i < CC_CONTAINERS; i++)
        if (w->containers[i].p != CC_ABSENT && strcmp(w->containers[i].handle, handle) == 0)
            return &w->containers[i];
    return NULL;
}

static bool
check_procs(struct vctx *v, struct cc_container *m, json_object *listed)
{
    char path[512];
    struct hresp r;
    for (size_t k = 0; listed && k < json_object_array_length(listed); k++) {
        const char *id =
            json_object_get_string(json_at(json_object_array_get_idx(listed, k), "id"));
        bool known = false;
        for (int i = 0; i < m->nprocs && !known; i++)
            known = strcmp(m->procs[i].id, id) == 0;
        if (!known)
            return vfail(v, "container %s lists process %s, which was never started", m->handle,
                         id);
    }
    int kept = 0;
    for (int i = 0; i < m->nprocs; i++) {
        struct cc_proc *p = &m->procs[i];
        snprintf(path, sizeof(path), "/v1/containers/%s/processes/%s", m->handle, p->id);
        http_get(&v->c->b, path, &r);
        long st = r.status;
        hresp_free(&r);
        if (st == 404 && p->p == CC_MAYBE)
            continue; /* its start was cut by the kill before it was made */
        if (st != 200)
            return vfail(v, "process %s of %s (started: %s): GET says %ld", p->id, m->handle,
                         p->p == CC_PRESENT ? "acknowledged" : "cut by the kill", st);
        snprintf(path, sizeof(path), "/v1/containers/%s/processes/%s/wait?timeout=20", m->handle,
                 p->id);
        if (!get_json(v, path, 200, &r))
            return hresp_free(&r), false;
        hresp_free(&r);
        snprintf(path, sizeof(path), "/v1/containers/%s/processes/%s", m->handle, p->id);
        if (!get_json(v, path, 200, &r))
            return hresp_free(&r), false;
        json_object *jcode = json_at(r.json, "exit_code");
        int code = jcode ? json_object_get_int(jcode) : -1;
        const char *error = json_object_get_string(json_at(r.json, "error"));
        char got[512];
        snprintf(got, sizeof(got), "%.400s", r.body);
        bool never_ran = (p->never_ran || p->p == CC_MAYBE) && code == 127 && error &&
                         strstr(error, "not started");
        bool termed = code == 128 + SIGTERM && m->delete_cut;
        hresp_free(&r);
        if (code != p->code && !never_ran && !termed)
            return vfail(v, "process %s of %s (start %s): %s, want exit code %d", p->id, m->handle,
                         p->p == CC_PRESENT ? "acknowledged" : "cut by the kill", got, p->code);
        if (termed && code != p->code) {
            /* Known finding: a delete TERMs the processes before it writes
             * "deleting" in the record, so a kill in its grace time leaves
             * the container listed and running with its processes killed. */
            v->c->known_term_before_delete++;
            fprintf(stderr,
                    "  known finding (delete TERMs before its record says deleting): %s of %s "
                    "exited %d after a delete cut by the kill; the container is still listed\n",
                    p->id, m->handle, code);
            if (v->c->strict)
                return vfail(v,
                             "process %s of %s exited %d (TERM) after a delete that the kill "
                             "cut, and the container is still listed and running",
                             p->id, m->handle, code);
        }
        snprintf(path, sizeof(path), "/v1/containers/%s/processes/%s/stdout", m->handle, p->id);
        http_get(&v->c->b, path, &r);
        char want[64];
        snprintf(want, sizeof(want), "tok-%s\n", p->id);
        bool right = never_ran ? (r.status == 200 && r.body[0] == '\0') || r.status == 404
                               : r.status == 200 &&
                                     (strcmp(r.body, want) == 0 || (termed && r.body[0] == '\0'));
        snprintf(got, sizeof(got), "%ld %.200s", r.status, r.body);
        hresp_free(&r);
        if (!right)
            return vfail(v, "process %s of %s: stdout %s, want %s", p->id, m->handle, got,
                         never_ran ? "nothing (it never ran)" : want);
        /* From now on it must keep reporting what it reported now. */
        if (never_ran)
            p->never_ran = true, p->code = 127;
        else if (termed)
            p->code = code;
        p->p = CC_PRESENT;
        m->procs[kept++] = *p;
    }
    m->nprocs = kept;
    return true;
}

static bool
check_containers(struct vctx *v)
{
    struct cc_campaign *c = v->c;
    struct cc_names listed = v->containers;
    for (int i = 0; i < listed.n; i++) {
        const char *h = listed.v[i];
        struct cc_container *m = find_container(c, h);
        if (!m)
            return vfail(v, "container %s is listed but was never created or was deleted", h);
        char path[512];
        snprintf(path, sizeof(path), "/v1/containers/%s", h);
        struct hresp r;
        if (!get_json(v, path, 200, &r))
            return hresp_free(&r), false;
        const char *state = json_object_get_string(json_at(r.json, "state"));
        char st[32];
        snprintf(st, sizeof(st), "%s", state ? state : "(none)");
        bool ok = check_procs(v, m, json_at(r.json, "processes"));
        hresp_free(&r);
        if (!ok)
            return false;
        if (strcmp(st, "running") != 0)
            return vfail(v, "container %s is %s after the restart, want running", h, st);
        if (m->volume[0] && !cc_names_has(&v->volumes, m->volume))
            return vfail(v, "container %s mounts volume %s, which is not listed", h, m->volume);
        /* It runs a new process. */
        if (m->nprocs < CC_PROCS) {
            struct cc_proc *p = &m->procs[m->nprocs];
            snprintf(p->id, sizeof(p->id), "r%d", c->round);
            p->code = 5 + c->round % 50;
            char script[128], *out = NULL;
            snprintf(script, sizeof(script), "echo tok-%s; exit %d", p->id, p->code);
            int code = -1;
            if (!run_sh(v, h, p->id, script, &code, &out))
                return free(out), false;
            char want[64];
            snprintf(want, sizeof(want), "tok-%s\n", p->id);
            ok = code == p->code && out && strcmp(out, want) == 0;
            free(out);
            if (!ok)
                return vfail(v, "container %s: a new process exited %d (want %d)", h, code,
                             p->code);
            p->p = CC_PRESENT;
            m->nprocs++;
        }
        m->p = CC_PRESENT;
        m->delete_cut = false;
        /* A third of them go, and those that are full. */
        if (m->nprocs >= CC_PROCS - 1 || cc_between(&v->rng, 0, 2) == 0) {
            if (!delete_container(v, h))
                return false;
            m->p = CC_ABSENT;
            cc_names_remove(&v->containers, h);
        }
    }
    for (int wi = 0; wi < c->workers; wi++)
        for (int i = 0; i < CC_CONTAINERS; i++) {
            struct cc_container *m = &c->w[wi].containers[i];
            if (m->p == CC_ABSENT || cc_names_has(&listed, m->handle))
                continue;
            if (m->p == CC_PRESENT)
                return vfail(v, "container %s was created (acknowledged) but is not listed",
                             m->handle);
            m->p = CC_ABSENT;
        }
    return true;
}

/* ---- garbage collection ------------------------------------------------------------------------
 */

static void
add_hex(struct cc_names *s, const char *digest)
{
    if (digest && strncmp(digest, "sha256:", 7) == 0)
        cc_names_add(s, digest + 7);
}

static bool
check_gc(struct vctx *v)
{
    struct cc_campaign *c = v->c;
    struct hresp r;
    http_do(&c->b,
            &(struct hreq){.method = "POST",
                           .path = "/v1/images/prune",
                           .body = "{\"unused_for_s\":1000000000}",
                           .timeout_ms = 60000},
            &r);
    bool ok = r.status == 200 || vfail(v, "gc: HTTP %ld: %s", r.status, r.body);
    hresp_free(&r);
    if (!ok)
        return false;
    struct cc_names blobs = {0}, chains = {0}, have;
    for (size_t i = 0; i < json_object_array_length(v->images); i++) {
        json_object *im = json_object_array_get_idx(v->images, i);
        add_hex(&blobs, json_object_get_string(json_at(im, "digest")));
        add_hex(&blobs, json_object_get_string(json_at(im, "config_digest")));
        json_object *layers = json_at(im, "layers");
        for (size_t k = 0; layers && k < json_object_array_length(layers); k++) {
            json_object *l = json_object_array_get_idx(layers, k);
            add_hex(&blobs, json_object_get_string(json_at(l, "digest")));
            add_hex(&chains, json_object_get_string(json_at(l, "chain_id")));
        }
    }
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/content/sha256", c->root);
    cc_dir_names(p, NULL, &have);
    for (int i = 0; i < have.n; i++)
        if (!cc_names_has(&blobs, have.v[i]))
            return vfail(v, "after a GC: blob %s/%s%s, which no listed image reaches", p, have.v[i],
                         is_hex64(have.v[i]) ? "" : " (a temporary)");
    for (int i = 0; i < blobs.n; i++)
        if (!cc_names_has(&have, blobs.v[i]))
            return vfail(v, "blob sha256:%s of a listed image is missing", blobs.v[i]);
    snprintf(p, sizeof(p), "%s/snapshots", c->root);
    cc_dir_names(p, NULL, &have);
    for (int i = 0; i < have.n; i++)
        if (!cc_names_has(&chains, have.v[i]))
            return vfail(v, "after a GC: snapshot %s/%s, which no listed image reaches", p,
                         have.v[i]);
    for (int i = 0; i < chains.n; i++)
        if (!cc_names_has(&have, chains.v[i]))
            return vfail(v, "snapshot sha256:%s of a listed image is missing", chains.v[i]);
    return true;
}

static bool
leaks(struct vctx *v, const char *when)
{
    if (cc_check_leaks(v->c, &v->containers, &v->volumes, when, v->why, v->len))
        return true;
    v->failed = true;
    return false;
}

/* ---- the whole check
 * ------------------------------------------------------------------------------ */

static bool
health_ok(struct vctx *v)
{
    struct hresp r;
    for (int i = 0; i < 100; i++) {
        http_get(&v->c->b, "/v1/health", &r);
        bool ok = r.status == 200;
        hresp_free(&r);
        if (ok)
            return true;
        sleep_ms(100);
    }
    return vfail(v, "/v1/health is not 200 10 s after the restart");
}

bool
cc_verify(struct cc_campaign *c, char *why, size_t len)
{
    struct vctx *v = calloc(1, sizeof(*v));
    v->c = c;
    v->why = why;
    v->len = len;
    v->rng = c->seed ^ (0x5bd1e995ULL * (uint64_t)(c->round + 1));
    bool ok = health_ok(v) && list_all(v);
    if (ok) {
        c->listed_images = (int)json_object_array_length(v->images);
        c->listed_volumes = v->volumes.n;
        c->listed_containers = v->containers.n;
    }
    double t[8];
    t[0] = now_ms();
    ok = ok && leaks(v, "after the restart");
    t[1] = now_ms();
    ok = ok && check_images(v);
    t[2] = now_ms();
    ok = ok && check_volumes(v);
    t[3] = now_ms();
    ok = ok && check_containers(v);
    t[4] = now_ms();
    ok = ok && check_gc(v) && list_all(v);
    t[5] = now_ms();
    ok = ok && leaks(v, "after the checks");
    t[6] = now_ms();
    if (getenv("BERTH_CRASH_TIMES"))
        fprintf(stderr,
                "  check: leaks %.0f, images %.0f, volumes %.0f, containers %.0f, gc %.0f, "
                "leaks %.0f ms\n",
                t[1] - t[0], t[2] - t[1], t[3] - t[2], t[4] - t[3], t[5] - t[4], t[6] - t[5]);
    json_object_put(v->images);
    free(v);
    return ok;
}

bool
cc_verify_empty(struct cc_campaign *c, char *why, size_t len)
{
    struct vctx *v = calloc(1, sizeof(*v));
    v->c = c;
    v->why = why;
    v->len = len;
    bool ok = list_all(v);
    for (int i = 0; ok && i < v->containers.n; i++)
        ok = delete_container(v, v->containers.v[i]);
    for (int i = 0; ok && i < v->volumes.n; i++) {
        char path[512];
        snprintf(path, sizeof(path), "/v1/volumes/%s?force=1", v->volumes.v[i]);
        struct hresp r;
        http_do(&c->b, &(struct hreq){.method = "DELETE", .path = path, .timeout_ms = 60000}, &r);
        /* A parent's forced delete takes its children: 404 for them later. */
        ok = r.status == 200 || r.status == 404 ||
             vfail(v, "delete volume %s: HTTP %ld: %s", v->volumes.v[i], r.status, r.body);
        hresp_free(&r);
    }
    for (size_t i = 0; ok && i < json_object_array_length(v->images); i++) {
        json_object *nm = json_at(json_object_array_get_idx(v->images, i), "names");
        for (size_t k = 0; ok && nm && k < json_object_array_length(nm); k++) {
            char path[512];
            snprintf(path, sizeof(path), "/v1/images/%s",
                     json_object_get_string(json_object_array_get_idx(nm, k)));
            struct hresp r;
            http_do(&c->b, &(struct hreq){.method = "DELETE", .path = path, .timeout_ms = 60000},
                    &r);
            ok = r.status == 200 || vfail(v, "DELETE %s: HTTP %ld: %s", path, r.status, r.body);
            hresp_free(&r);
        }
    }
    ok = ok && list_all(v);
    if (ok && (json_object_array_length(v->images) || v->containers.n || v->volumes.n))
        ok = vfail(v,
                   "still listed after deleting everything: %zu images, %d containers, %d "
                   "volumes",
                   json_object_array_length(v->images), v->containers.n, v->volumes.n);
    ok = ok && check_gc(v) && leaks(v, "after deleting everything");
    /* A deleted container's directory goes in a job after its 204. */
    ok = ok && (wait_container_trash_gone(&c->b, 30000) ||
                vfail(v, "after deleting everything: a renamed container directory is left"));
    struct cc_names n;
    const char *const dirs[] = {"content/sha256", "snapshots",    "containers",
                                "volumes",        "runtime/runc", NULL};
    for (int i = 0; ok && dirs[i]; i++) {
        char p[PATH_MAX + 64];
        snprintf(p, sizeof(p), "%s/%s", c->root, dirs[i]);
        cc_dir_names(p, NULL, &n);
        if (n.n)
            ok = vfail(v, "after deleting everything: %s/%s left", p, n.v[0]);
    }
    json_object_put(v->images);
    free(v);
    return ok;
}
