/*
 * Fuzzes the route-specific parsers of the /v1 JSON request bodies
 * (api/bodies.h): container create, process start, signal, image prune,
 * volume create, volume patch and the image import's source. fuzz_json covers the shared parsing
 * step under them; this target covers what each route makes of the
 * parsed object.
 *
 * Input: one byte that picks the parser (its value modulo the number of
 * parsers), then the request body as the access handler buffers it.
 * Checked, for every parser:
 * - a refusal is EINVAL (or ENOMEM) with a message that starts "request
 *   body" or names a field ("field \"...\": ..."), and leaves the output
 *   cleared (nothing to free: the leak checker sees the rest);
 * - the same body parsed again gives the same answer;
 * - what is accepted is within what the parser documents: a handle of at
 *   most 128 bytes, an absolute rootfs directory, mounts with a target,
 *   a CPU quota within its range, arguments only when given, a signal
 *   of 1 to 64, prune figures of -1 (absent) or more, volume properties
 *   within the limit with a value except in a patch, a patch TTL of -1 or
 *   more, an image source of exactly one kind (a path only with a
 *   volume, credentials only for a registry, never a token with a
 *   password).
 */
#include "fuzz/fuzz.h"

#include <errno.h>
#include <stdbool.h>

#include "api/bodies.h"

enum which { CREATE, PROCESS, SIGNAL, PRUNE, VOLUME_CREATE, VOLUME_PATCH, IMAGE, NPARSERS };

static void
check_refusal(int rc, const struct err *err, const char *body)
{
    FUZZ_CHECK(rc == -EINVAL || rc == -ENOMEM, "refusal %d (%s) for %s", rc, err->msg, body);
    FUZZ_CHECK(strncmp(err->msg, "request body", 12) == 0 || strstr(err->msg, "field \""),
               "a refusal that names no field: \"%s\" for %s", err->msg, body);
}

static int
run_create(const char *body, size_t len)
{
    struct ctr_params *p = NULL;
    char *isolation = NULL;
    struct err err = {0};
    int rc = api_body_container_create(body, len, &p, &isolation, &err);
    if (rc < 0) {
        check_refusal(rc, &err, body);
        FUZZ_CHECK(!isolation, "a refusal left an isolation behind");
        return rc;
    }
    size_t hl = strlen(p->handle);
    FUZZ_CHECK(hl <= CTR_HANDLE_MAX, "handle of %zu bytes", hl);
    FUZZ_CHECK(!p->rootfs_dir || p->rootfs_dir[0] == '/', "rootfs %s is not absolute",
               p->rootfs_dir);
    for (size_t i = 0; i < p->nmounts; i++)
        FUZZ_CHECK(p->mounts[i].target, "mount %zu without a target", i);
    FUZZ_CHECK(p->limits.cpu_quota_pct <= 100000, "cpu quota %u", p->limits.cpu_quota_pct);
    ctr_params_free(p);
    free(isolation);
    return 0;
}

static int
run_process(const char *body, size_t len)
{
    struct api_body_process b;
    struct err err = {0};
    int rc = api_body_process(body, len, &b, &err);
    if (rc < 0) {
        check_refusal(rc, &err, body);
        FUZZ_CHECK(!b.json && !b.argv && !b.env, "a refusal left the body behind");
        return rc;
    }
    FUZZ_CHECK(!b.spec.args || b.spec.has_args, "arguments that were not given");
    api_body_process_clear(&b);
    return 0;
}

static int
run_signal(const char *body, size_t len)
{
    int sig = 0;
    struct err err = {0};
    int rc = api_body_signal(body, len, &sig, &err);
    if (rc < 0) {
        check_refusal(rc, &err, body);
        return rc;
    }
    FUZZ_CHECK(sig >= 1 && sig <= 64, "signal %d accepted", sig);
    return 0;
}

static int
run_prune(const char *body, size_t len)
{
    int64_t unused = 0, keep = 0;
    struct err err = {0};
    int rc = api_body_prune(body, len, &unused, &keep, &err);
    if (rc < 0) {
        check_refusal(rc, &err, body);
        return rc;
    }
    FUZZ_CHECK(unused >= -1 && keep >= -1, "prune %lld %lld accepted", (long long)unused,
               (long long)keep);
    return 0;
}

static int
run_volume(const char *body, size_t len, bool patch)
{
    static struct api_body_volume b; /* large: not on libFuzzer's stack */
    struct err err = {0};
    int rc = api_body_volume(body, len, patch, &b, &err);
    if (rc < 0) {
        check_refusal(rc, &err, body);
        FUZZ_CHECK(!b.json, "a refusal left the body behind");
        return rc;
    }
    FUZZ_CHECK(b.nprops <= VOL_PROPS_MAX, "%zu properties", b.nprops);
    FUZZ_CHECK(b.opts.props == b.props && b.opts.n_props == b.nprops, "options not filled");
    for (size_t i = 0; i < b.nprops; i++) {
        FUZZ_CHECK(b.props[i].key, "property %zu without a key", i);
        FUZZ_CHECK(patch || b.props[i].value, "property %s without a value", b.props[i].key);
    }
    FUZZ_CHECK(!patch || b.opts.ttl_s >= -1, "patch ttl %lld", (long long)b.opts.ttl_s);
    api_body_volume_clear(&b);
    return 0;
}

static int
run_image(const char *body, size_t len)
{
    struct api_body_image b;
    struct err err = {0};
    int rc = api_body_image(body, len, &b, &err);
    if (rc < 0) {
        check_refusal(rc, &err, body);
        FUZZ_CHECK(!b.json && !b.source.creds, "a refusal left the body behind");
        return rc;
    }
    const struct image_source *o = &b.source;
    FUZZ_CHECK(!!o->layout_dir + !!o->volume + !!o->registry == 1, "a source of %d kinds",
               !!o->layout_dir + !!o->volume + !!o->registry);
    FUZZ_CHECK(!o->volume_path || o->volume, "a path without a volume");
    FUZZ_CHECK(!o->creds || (o->registry && o->creds == &b.creds),
               "credentials without a registry");
    FUZZ_CHECK(!o->creds || !o->creds->token || (!o->creds->username && !o->creds->password),
               "a token with a username or password");
    FUZZ_CHECK(!o->upload, "an upload from a JSON body");
    api_body_image_clear(&b);
    return 0;
}

static int
run(enum which w, const char *body, size_t len)
{
    switch (w) {
    case CREATE:
        return run_create(body, len);
    case PROCESS:
        return run_process(body, len);
    case SIGNAL:
        return run_signal(body, len);
    case PRUNE:
        return run_prune(body, len);
    case VOLUME_CREATE:
        return run_volume(body, len, false);
    case VOLUME_PATCH:
        return run_volume(body, len, true);
    case IMAGE:
        return run_image(body, len);
    case NPARSERS:
        break;
    }
    abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum which w = (enum which)(data[0] % NPARSERS);
    /* As the access handler keeps it: the bytes, NUL-terminated past the end. */
    char *body = fuzz_strndup(data + 1, size - 1);
    int first = run(w, body, size - 1);
    int again = run(w, body, size - 1);
    FUZZ_CHECK(first == again, "parser %d answered %d, then %d", (int)w, first, again);
    free(body);
    return 0;
}
