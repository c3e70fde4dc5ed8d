/*
 * The crash campaign's workload (see crash_campaign.h): each worker
 * thread runs a seeded mix of image imports (layouts by path, tar
 * streams plain, gzip, zstd and docker save archives, some throttled so
 * the kill lands mid-stream, some with NDJSON progress), image deletes,
 * container creates (some mounting a volume, some with a disk limit),
 * process runs (waited for, or left running across the kill), container
 * deletes, volume creates and copy-on-write children, tar uploads and
 * downloads, volume deletes and garbage collections, one request after
 * the other, until the main thread kills the daemon. It writes down what
 * the daemon acknowledged; a reply that breaks the API's promises (a
 * 5xx, a wrong exit code, a download that does not match the uploads) is
 * a failure of the round.
 *
 * Runs on the worker threads; the model of a worker is its own.
 */
#include "tests/api/crash_campaign.h"

#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/api/harness_containers.h"

/* ---- randomness and file contents ---------------------------------------------------------- */

uint64_t
cc_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int
cc_between(uint64_t *state, int lo, int hi)
{
    return lo + (int)(cc_rand(state) % (uint64_t)(hi - lo + 1));
}

void
cc_fill(uint64_t key, char *out, size_t size)
{
    uint64_t s = key;
    for (size_t i = 0; i < size; i += 8) {
        uint64_t v = cc_rand(&s);
        memcpy(out + i, &v, size - i < 8 ? size - i : 8);
    }
}

void
cc_files_merge(struct cc_files *dst, const struct cc_files *src)
{
    for (int i = 0; i < src->n; i++) {
        int j;
        for (j = 0; j < dst->n; j++)
            if (strcmp(dst->f[j].path, src->f[i].path) == 0)
                break;
        if (j == dst->n) {
            if (dst->n == CC_FILES)
                continue; /* cannot happen: uploads only write CC_FILES paths */
            dst->n++;
        }
        dst->f[j] = src->f[i];
    }
}

/* ---- requests -------------------------------------------------------------------------------- */

struct cc_src {
    const char *data;
    size_t len, off, chunk;
    long delay_us;
};

static size_t
src_read_cb(char *buf, size_t size, size_t nitems, void *ud)
{
    struct cc_src *s = ud;
    size_t n = size * nitems;
    if (s->chunk && n > s->chunk)
        n = s->chunk;
    if (n > s->len - s->off)
        n = s->len - s->off;
    if (s->delay_us && s->off > 0)
        usleep((useconds_t)s->delay_us);
    memcpy(buf, s->data + s->off, n);
    s->off += n;
    return n;
}

struct cc_sink {
    char *data;
    size_t len, cap;
};

/* Grows by doubling: a tar of megabytes comes in 16 KiB pieces, and a
 * sanitizer's realloc copies every time. */
static size_t
sink_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct cc_sink *g = ud;
    size_t n = size * nmemb;
    if (g->len + n + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 16384;
        while (cap < g->len + n + 1)
            cap *= 2;
        char *d = realloc(g->data, cap);
        if (!d)
            return 0;
        g->data = d;
        g->cap = cap;
    }
    memcpy(g->data + g->len, ptr, n);
    g->len += n;
    g->data[g->len] = '\0';
    return n;
}

void
cc_request(const struct berthd *b, const char *method, const char *path, const char *ctype,
           const char *accept, const char *body, size_t len, size_t chunk, long delay_us,
           long timeout_ms, struct hresp *out)
{
    memset(out, 0, sizeof(*out));
    CURL *c = curl_easy_init();
    if (!c) {
        out->body = strdup("");
        out->headers = strdup("");
        return;
    }
    char url[1024], h[256];
    snprintf(url, sizeof(url), "%s%s", b->base_url, path);
    struct curl_slist *list = curl_slist_append(NULL, "Expect:");
    if (ctype) {
        snprintf(h, sizeof(h), "Content-Type: %s", ctype);
        list = curl_slist_append(list, h);
    }
    if (accept) {
        snprintf(h, sizeof(h), "Accept: %s", accept);
        list = curl_slist_append(list, h);
    }
    struct cc_src src = {.data = body, .len = len, .chunk = chunk, .delay_us = delay_us};
    struct cc_sink sink = {0}, hdrs = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, src_read_cb);
        curl_easy_setopt(c, CURLOPT_READDATA, &src);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, sink_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &hdrs);
    out->curl_code = (int)curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_easy_getinfo(c, CURLINFO_TOTAL_TIME, &out->total_s);
    curl_slist_free_all(list);
    curl_easy_cleanup(c);
    out->body = sink.data ? sink.data : strdup("");
    out->body_len = sink.len;
    out->headers = hdrs.data ? hdrs.data : strdup("");
    if (out->body_len && out->body[0] == '{') {
        json_tokener *tok = json_tokener_new();
        out->json = json_tokener_parse_ex(tok, out->body, (int)out->body_len);
        if (json_tokener_get_error(tok) != json_tokener_success) {
            json_object_put(out->json);
            out->json = NULL;
        }
        json_tokener_free(tok);
    }
}

/* ---- outcomes -------------------------------------------------------------------------------- */

__attribute__((format(printf, 2, 3))) static void
wfail(struct cc_worker *w, const char *fmt, ...)
{
    if (w->failure[0])
        return;
    int n = snprintf(w->failure, sizeof(w->failure), "worker %d: ", w->id);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->failure + n, sizeof(w->failure) - (size_t)n, fmt, ap);
    va_end(ap);
}

/*
 * 1: the daemon answered (whole), 0: the kill cut the request (the
 * object it was about is MAYBE), -1: no answer while the daemon was meant
 * to be up (a failure, recorded).
 */
static int
answered(struct cc_worker *w, const struct hresp *r, const char *what)
{
    if (r->status != 0 && r->curl_code == CURLE_OK)
        return 1;
    if (atomic_load(&w->c->killed))
        return 0;
    wfail(w, "%s: no whole answer (HTTP %ld, curl %d) from a daemon that was not killed", what,
          r->status, r->curl_code);
    return -1;
}

static void
unexpected(struct cc_worker *w, const char *what, const struct hresp *r)
{
    wfail(w, "%s: HTTP %ld: %.1500s", what, r->status, r->body);
}

const char *const cc_op_names[] = {"import",     "image-delete", "create",    "run",    "start",
                                   "delete",     "vol-create",   "vol-child", "tar-in", "tar-out",
                                   "vol-delete", "gc",           NULL};

int
cc_op_index(const char *name)
{
    for (int i = 0; cc_op_names[i]; i++)
        if (strcmp(cc_op_names[i], name) == 0)
            return i;
    return -1;
}

/* ---- images ------------------------------------------------------------------------------------
 */

/* The image's digest must be the fixture's, learned from its first import. */
static void
check_digest(struct cc_worker *w, int fix, json_object *image, const char *what)
{
    const char *d = json_object_get_string(json_at(image, "digest"));
    if (!d || strncmp(d, "sha256:", 7) != 0) {
        wfail(w, "%s: no digest in %s", what, json_object_to_json_string(image));
        return;
    }
    struct cc_campaign *c = w->c;
    pthread_mutex_lock(&c->mu);
    if (!c->digest[fix][0])
        snprintf(c->digest[fix], sizeof(c->digest[fix]), "%s", d);
    bool same = strcmp(c->digest[fix], d) == 0;
    pthread_mutex_unlock(&c->mu);
    if (!same)
        wfail(w, "%s: digest %s, but this image was %s before", what, d, c->digest[fix]);
}

static int
live_images(const struct cc_worker *w)
{
    int n = 0;
    for (int i = 0; i < CC_IMAGES; i++)
        n += w->images[i].p != CC_ABSENT;
    return n;
}

static void
op_import(struct cc_worker *w)
{
    struct cc_campaign *c = w->c;
    struct cc_image *im = NULL;
    for (int i = 0; i < CC_IMAGES && !im; i++)
        if (w->images[i].p == CC_ABSENT)
            im = &w->images[i];
    im->fix = cc_between(&w->rng, 0, CC_FIX_COUNT - 1);
    snprintf(im->name, sizeof(im->name), "w%d-i%u:t", w->id, w->serial++);
    im->p = CC_MAYBE;
    bool ndjson = cc_between(&w->rng, 0, 2) == 0;
    char path[256], what[128];
    snprintf(path, sizeof(path), "/v1/images?name=%s", im->name);
    snprintf(what, sizeof(what), "import %s (fixture %d%s)", im->name, im->fix,
             ndjson ? ", ndjson" : "");
    struct hresp r;
    const char *accept = ndjson ? "application/x-ndjson" : NULL;
    if (im->fix == CC_FIX_BASE || im->fix == CC_FIX_CHILD) {
        char body[PATH_MAX + 64];
        snprintf(body, sizeof(body), "{\"source\":{\"layout\":\"%s/%s\"}}", c->fixtures,
                 im->fix == CC_FIX_BASE ? "base" : "child");
        cc_request(&c->b, "POST", path, "application/json", accept, body, strlen(body), 0, 0, 60000,
                   &r);
    } else {
        const char *data = c->blob[im->fix];
        size_t len = c->blob_len[im->fix];
        int enc = im->fix == CC_FIX_TAR ? cc_between(&w->rng, 0, 2) : 0;
        if (enc == 1)
            data = c->gz, len = c->gz_len;
        else if (enc == 2)
            data = c->zst, len = c->zst_len;
        /* Some uploads are slow, so that the kill finds them mid-stream. */
        bool slow = cc_between(&w->rng, 0, 2) == 0;
        cc_request(&c->b, "POST", path, "application/x-tar", accept, data, len, 65536,
                   slow ? 4000 : 0, 60000, &r);
    }
    int a = answered(w, &r, what);
    if (a > 0) {
        json_object *image = r.json;
        long status = r.status;
        json_object *last = NULL;
        if (ndjson && r.status == 200) {
            /* The last line says how it ended. */
            char *end = r.body + r.body_len;
            while (end > r.body && end[-1] == '\n')
                *--end = '\0';
            char *line = strrchr(r.body, '\n');
            last = json_tokener_parse(line ? line + 1 : r.body);
            const char *step = json_object_get_string(json_at(last, "step"));
            status = step && strcmp(step, "done") == 0
                         ? json_object_get_int(json_at(last, "status"))
                         : 0;
            image = json_at(last, "image");
        }
        if (status == 201 || status == 200) {
            check_digest(w, im->fix, image, what);
            im->p = CC_PRESENT;
        } else {
            unexpected(w, what, &r);
        }
        json_object_put(last);
    }
    hresp_free(&r);
}

static void
op_image_delete(struct cc_worker *w, struct cc_image *im)
{
    char path[256], what[128];
    snprintf(path, sizeof(path), "/v1/images/%s", im->name);
    snprintf(what, sizeof(what), "delete image %s", im->name);
    im->p = CC_MAYBE;
    struct hresp r;
    cc_request(&w->c->b, "DELETE", path, NULL, NULL, NULL, 0, 0, 0, 60000, &r);
    if (answered(w, &r, what) > 0) {
        if (r.status == 200)
            im->p = CC_ABSENT;
        else if (r.status == 409 && strstr(r.body, "in use"))
            im->p = CC_PRESENT; /* a container uses it and this was its last name */
        else
            unexpected(w, what, &r);
    }
    hresp_free(&r);
}

/* ---- containers and processes ---------------------------------------------------------------- */

static int
live_containers(const struct cc_worker *w)
{
    int n = 0;
    for (int i = 0; i < CC_CONTAINERS; i++)
        n += w->containers[i].p != CC_ABSENT;
    return n;
}

static void
op_create(struct cc_worker *w, struct cc_image *im)
{
    struct cc_container *ct = NULL;
    for (int i = 0; i < CC_CONTAINERS && !ct; i++)
        if (w->containers[i].p == CC_ABSENT)
            ct = &w->containers[i];
    memset(ct, 0, sizeof(*ct));
    snprintf(ct->handle, sizeof(ct->handle), "w%d-c%u", w->id, w->serial++);
    ct->fix = im->fix;
    /* Half of them mount a volume; a few have a disk limit. */
    int vi = cc_between(&w->rng, 0, 2 * CC_VOLUMES - 1);
    if (vi < CC_VOLUMES && w->volumes[vi].p == CC_PRESENT)
        memcpy(ct->volume, w->volumes[vi].handle, sizeof(ct->volume));
    ct->disk = cc_between(&w->rng, 0, 3) == 0;
    char body[1024], what[128];
    int n =
        snprintf(body, sizeof(body), "{\"handle\":\"%s\",\"image\":\"%s\"", ct->handle, im->name);
    if (ct->volume[0])
        n += snprintf(body + n, sizeof(body) - (size_t)n,
                      ",\"mounts\":[{\"volume\":\"%s\",\"target\":\"/mnt/v\",\"readonly\":true}]",
                      ct->volume);
    if (ct->disk)
        n += snprintf(body + n, sizeof(body) - (size_t)n, ",\"limits\":{\"disk_bytes\":%d}",
                      16 << 20);
    snprintf(body + n, sizeof(body) - (size_t)n, "}");
    snprintf(what, sizeof(what), "create %s", body);
    ct->p = CC_MAYBE;
    ctr_track(&w->c->b, ct->handle);
    struct hresp r;
    cc_request(&w->c->b, "POST", "/v1/containers", "application/json", NULL, body, strlen(body), 0,
               0, 60000, &r);
    if (answered(w, &r, what) > 0) {
        if (r.status == 201)
            ct->p = CC_PRESENT;
        else
            unexpected(w, what, &r);
    }
    hresp_free(&r);
}

/* Starts sh -c "echo tok-<id>; [sleep]; exit <code>"; waits for it when wait. */
static void
op_run(struct cc_worker *w, struct cc_container *ct, bool wait)
{
    struct cc_proc *pr = &ct->procs[ct->nprocs++];
    snprintf(pr->id, sizeof(pr->id), "p%u", w->serial++);
    pr->code = cc_between(&w->rng, 0, 120);
    pr->never_ran = false;
    pr->p = CC_MAYBE;
    char body[512], path[256], what[256];
    if (wait)
        snprintf(body, sizeof(body),
                 "{\"id\":\"%s\",\"path\":\"sh\",\"args\":[\"-c\",\"echo tok-%s; exit %d\"]}",
                 pr->id, pr->id, pr->code);
    else
        snprintf(body, sizeof(body),
                 "{\"id\":\"%s\",\"path\":\"sh\",\"args\":[\"-c\",\"echo tok-%s; /bin/busybox "
                 "sleep 0.%d; exit %d\"]}",
                 pr->id, pr->id, cc_between(&w->rng, 1, 9), pr->code);
    snprintf(path, sizeof(path), "/v1/containers/%s/processes", ct->handle);
    snprintf(what, sizeof(what), "start %s in %s", pr->id, ct->handle);
    struct hresp r;
    cc_request(&w->c->b, "POST", path, "application/json", NULL, body, strlen(body), 0, 0, 30000,
               &r);
    int a = answered(w, &r, what);
    if (a > 0 && r.status != 201)
        unexpected(w, what, &r);
    hresp_free(&r);
    if (a <= 0 || w->failure[0])
        return;
    pr->p = CC_PRESENT;
    if (!wait)
        return;
    snprintf(path, sizeof(path), "/v1/containers/%s/processes/%s/wait?timeout=20", ct->handle,
             pr->id);
    snprintf(what, sizeof(what), "wait %s in %s", pr->id, ct->handle);
    cc_request(&w->c->b, "GET", path, NULL, NULL, NULL, 0, 0, 0, 30000, &r);
    if (answered(w, &r, what) > 0) {
        json_object *code = json_at(r.json, "exit_code");
        if (r.status != 200 || !code)
            unexpected(w, what, &r);
        else if (json_object_get_int(code) != pr->code)
            wfail(w, "%s: exit code %d, want %d", what, json_object_get_int(code), pr->code);
    }
    hresp_free(&r);
}

static void
op_container_delete(struct cc_worker *w, struct cc_container *ct)
{
    char path[256], what[128];
    snprintf(path, sizeof(path), "/v1/containers/%s", ct->handle);
    snprintf(what, sizeof(what), "delete container %s", ct->handle);
    ct->p = CC_MAYBE;
    ct->delete_cut = true; /* until it is answered */
    struct hresp r;
    cc_request(&w->c->b, "DELETE", path, NULL, NULL, NULL, 0, 0, 0, 60000, &r);
    if (answered(w, &r, what) > 0) {
        ct->delete_cut = false;
        if (r.status == 204)
            ct->p = CC_ABSENT;
        else
            unexpected(w, what, &r);
    }
    hresp_free(&r);
}

/* ---- volumes -----------------------------------------------------------------------------------
 */

static struct cc_volume *
free_volume(struct cc_worker *w)
{
    for (int i = 0; i < CC_VOLUMES; i++)
        if (w->volumes[i].p == CC_ABSENT)
            return &w->volumes[i];
    return NULL;
}

static void
op_volume_create(struct cc_worker *w, struct cc_volume *v, const struct cc_volume *parent)
{
    memset(v, 0, sizeof(*v));
    snprintf(v->handle, sizeof(v->handle), "w%d-v%u", w->id, w->serial++);
    char body[256], what[300];
    if (parent) {
        snprintf(v->parent, sizeof(v->parent), "%s", parent->handle);
        v->files = parent->files; /* a child starts as its parent's copy */
        snprintf(body, sizeof(body), "{\"handle\":\"%s\",\"parent\":\"%s\"}", v->handle,
                 parent->handle);
    } else {
        snprintf(body, sizeof(body), "{\"handle\":\"%s\"}", v->handle);
    }
    snprintf(what, sizeof(what), "create volume %s", body);
    v->p = CC_MAYBE;
    struct hresp r;
    cc_request(&w->c->b, "POST", "/v1/volumes", "application/json", NULL, body, strlen(body), 0, 0,
               60000, &r);
    if (answered(w, &r, what) > 0) {
        if (r.status == 201)
            v->p = CC_PRESENT;
        else if (parent && r.status == 409 && strstr(r.body, "mounted"))
            v->p = CC_ABSENT; /* the parent is mounted by a container */
        else
            unexpected(w, what, &r);
    }
    hresp_free(&r);
}

/* A ustar stream of the upload, built in memory. */
struct tarbuf {
    char *data;
    size_t len, cap;
};

static void
tar_reserve(struct tarbuf *t, size_t more)
{
    if (t->len + more > t->cap) {
        t->cap = (t->len + more) * 2;
        t->data = realloc(t->data, t->cap);
        if (!t->data)
            abort();
    }
}

/* One entry: a directory ('5') or a file ('0') of cc_fill(key, size). */
static void
tar_add(struct tarbuf *t, const char *name, char type, uint64_t key, size_t size)
{
    size_t padded = (size + 511) & ~(size_t)511;
    tar_reserve(t, 512 + padded);
    char *h = t->data + t->len;
    memset(h, 0, 512);
    memcpy(h, name, strlen(name));
    snprintf(h + 100, 8, "%07o", type == '5' ? 0755 : 0644);
    snprintf(h + 108, 8, "%07o", 0);
    snprintf(h + 116, 8, "%07o", 0);
    snprintf(h + 124, 12, "%011lo", (unsigned long)size);
    snprintf(h + 136, 12, "%011lo", 1700000000UL);
    memset(h + 148, ' ', 8);
    h[156] = type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += (unsigned char)h[i];
    snprintf(h + 148, 8, "%06o", sum);
    t->len += 512;
    cc_fill(key, t->data + t->len, size);
    memset(t->data + t->len + size, 0, padded - size);
    t->len += padded;
}

static void
op_tar_in(struct cc_worker *w, struct cc_volume *v)
{
    /* 1 to 6 files of the CC_FILES paths d<0-2>/f<0-7>; a few large. */
    struct cc_files up = {0};
    int nfiles = cc_between(&w->rng, 1, 6);
    for (int k = 0; k < nfiles; k++) {
        struct cc_file f;
        int i = cc_between(&w->rng, 0, CC_FILES - 1);
        snprintf(f.path, sizeof(f.path), "d%d/f%d", i / 8, i % 8);
        f.key = cc_rand(&w->rng);
        f.size = cc_between(&w->rng, 0, 9) == 0 ? (uint32_t)cc_between(&w->rng, 128 << 10, 3 << 19)
                                                : (uint32_t)cc_between(&w->rng, 0, 4000);
        struct cc_files one = {.n = 1};
        one.f[0] = f;
        cc_files_merge(&up, &one);
    }
    struct tarbuf t = {0};
    for (int d = 0; d < 3; d++) {
        bool used = false;
        for (int k = 0; k < up.n; k++)
            used |= up.f[k].path[1] == '0' + d;
        if (!used)
            continue;
        /* The directory first, then its files. */
        char dir[8];
        snprintf(dir, sizeof(dir), "d%d/", d);
        tar_add(&t, dir, '5', 0, 0);
        for (int k = 0; k < up.n; k++)
            if (up.f[k].path[1] == '0' + d)
                tar_add(&t, up.f[k].path, '0', up.f[k].key, up.f[k].size);
    }
    tar_reserve(&t, 1024);
    memset(t.data + t.len, 0, 1024);
    t.len += 1024;
    v->pending = true;
    v->pending_files = up;
    char path[256], what[128];
    snprintf(path, sizeof(path), "/v1/volumes/%s/files?path=/", v->handle);
    snprintf(what, sizeof(what), "upload %d files (%zu bytes) into %s", up.n, t.len, v->handle);
    bool slow = cc_between(&w->rng, 0, 2) == 0;
    struct hresp r;
    cc_request(&w->c->b, "PUT", path, "application/x-tar", NULL, t.data, t.len, 65536,
               slow ? 3000 : 0, 60000, &r);
    if (answered(w, &r, what) > 0) {
        json_object *bytes = json_at(r.json, "tar_bytes");
        if (r.status != 200 || !bytes) {
            unexpected(w, what, &r);
        } else if ((size_t)json_object_get_int64(bytes) != t.len) {
            wfail(w, "%s: tar_bytes %lld", what, (long long)json_object_get_int64(bytes));
        } else {
            cc_files_merge(&v->files, &up);
            v->pending = false;
        }
    }
    hresp_free(&r);
    free(t.data);
}

static void
op_tar_out(struct cc_worker *w, struct cc_volume *v)
{
    char path[256], what[128];
    snprintf(path, sizeof(path), "/v1/volumes/%s/files?path=/", v->handle);
    snprintf(what, sizeof(what), "download %s", v->handle);
    struct hresp r;
    cc_request(&w->c->b, "GET", path, NULL, NULL, NULL, 0, 0, 0, 60000, &r);
    if (answered(w, &r, what) > 0) {
        char why[512];
        if (r.status != 200)
            unexpected(w, what, &r);
        else if (!cc_tar_matches(r.body, r.body_len, &v->files, why, sizeof(why)))
            wfail(w, "%s: not what the acknowledged uploads wrote: %s", what, why);
    }
    hresp_free(&r);
}

static void
op_volume_delete(struct cc_worker *w, struct cc_volume *v)
{
    char path[256], what[128];
    snprintf(path, sizeof(path), "/v1/volumes/%s", v->handle);
    snprintf(what, sizeof(what), "delete volume %s", v->handle);
    v->p = CC_MAYBE;
    struct hresp r;
    cc_request(&w->c->b, "DELETE", path, NULL, NULL, NULL, 0, 0, 0, 60000, &r);
    if (answered(w, &r, what) > 0) {
        if (r.status == 200)
            v->p = CC_ABSENT;
        else if (r.status == 409 && (strstr(r.body, "mounted") || strstr(r.body, "child")))
            v->p = CC_PRESENT;
        else
            unexpected(w, what, &r);
    }
    hresp_free(&r);
}

static void
op_gc(struct cc_worker *w)
{
    static const char body[] = "{\"unused_for_s\":1000000000}";
    struct hresp r;
    cc_request(&w->c->b, "POST", "/v1/images/prune", "application/json", NULL, body, strlen(body),
               0, 0, 60000, &r);
    if (answered(w, &r, "gc") > 0 && r.status != 200)
        unexpected(w, "gc", &r);
    hresp_free(&r);
}

/* ---- the loop -----------------------------------------------------------------------------------
 */

/* A random element of those for which ok says yes, or NULL. */
#define PICK(w, arr, n, cond)                                                                      \
    ({                                                                                             \
        __typeof__(&(arr)[0]) pick_ = NULL;                                                        \
        int seen_ = 0;                                                                             \
        for (int i_ = 0; i_ < (n); i_++) {                                                         \
            __typeof__(&(arr)[0]) e = &(arr)[i_];                                                  \
            if ((cond) && cc_between(&(w)->rng, 0, seen_++) == 0)                                  \
                pick_ = e;                                                                         \
        }                                                                                          \
        pick_;                                                                                     \
    })

/* One operation, drawn until one can run; false when none could. */
static bool
step(struct cc_worker *w)
{
    static const int weights[] = {3, 2, 3, 3, 2, 2, 2, 1, 4, 2, 1, 1};
    int total = 0;
    for (size_t i = 0; i < sizeof(weights) / sizeof(weights[0]); i++)
        total += weights[i];
    for (int tries = 0; tries < 50; tries++) {
        int x = cc_between(&w->rng, 0, total - 1), op = 0;
        while (x >= weights[op])
            x -= weights[op++];
        const char *name = cc_op_names[op];
        struct cc_image *im = PICK(w, w->images, CC_IMAGES, e->p == CC_PRESENT);
        struct cc_container *ct =
            PICK(w, w->containers, CC_CONTAINERS, e->p == CC_PRESENT && e->nprocs < CC_PROCS);
        struct cc_container *anyct = PICK(w, w->containers, CC_CONTAINERS, e->p == CC_PRESENT);
        struct cc_volume *v = PICK(w, w->volumes, CC_VOLUMES, e->p == CC_PRESENT && !e->pending);
        struct cc_volume *fv = free_volume(w);
        atomic_store(&w->in_flight, name);
        switch (op) {
        case 0:
            if (live_images(w) == CC_IMAGES)
                continue;
            op_import(w);
            break;
        case 1:
            if (!im)
                continue;
            op_image_delete(w, im);
            break;
        case 2:
            if (!im || live_containers(w) == CC_CONTAINERS)
                continue;
            op_create(w, im);
            break;
        case 3:
        case 4:
            if (!ct)
                continue;
            op_run(w, ct, op == 3);
            break;
        case 5:
            if (!anyct)
                continue;
            op_container_delete(w, anyct);
            break;
        case 6:
        case 7:
            if (!fv || (op == 7 && !v))
                continue;
            op_volume_create(w, fv, op == 7 ? v : NULL);
            break;
        case 8:
        case 9:
            if (!v)
                continue;
            if (op == 8)
                op_tar_in(w, v);
            else
                op_tar_out(w, v);
            break;
        case 10:
            if (!v)
                continue;
            op_volume_delete(w, v);
            break;
        default:
            op_gc(w);
            break;
        }
        atomic_store(&w->in_flight, NULL);
        return true;
    }
    atomic_store(&w->in_flight, NULL);
    return false;
}

void *
cc_worker_main(void *arg)
{
    struct cc_worker *w = arg;
    w->ops = 0;
    while (!atomic_load(&w->c->killed) && !w->failure[0]) {
        if (!step(w))
            break;
        if (!atomic_load(&w->c->killed))
            w->ops++;
    }
    return NULL;
}
