/*
 * The registry client's reads: manifests (by tag or digest, checked
 * against the digest asked for, Docker schema 1 refused) and blobs
 * (checked against their descriptor's size as they stream, resumed with a
 * Range request where a transfer broke). Each goes through the request
 * loop of registry_exchange.c. See registry.h. Pool threads; blocking.
 */
#include "store/registry.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "store/oci.h"
#include "store/registry_int.h"

#define MT_DOCKER_SCHEMA1 "application/vnd.docker.distribution.manifest.v1+json"
#define MT_DOCKER_SCHEMA1_SIGNED "application/vnd.docker.distribution.manifest.v1+prettyjws"

static const char manifest_accept[] = "Accept: " OCI_MT_INDEX ", " OCI_MT_MANIFEST
                                      ", " DOCKER_MT_MANIFEST_LIST ", " DOCKER_MT_MANIFEST;

struct registry_blob {
    struct registry_repo *r;
    char digest[DIGEST_STR_LEN];
    int64_t size;
    int64_t offset; /* bytes handed out */
    struct reg_stream *s;
    unsigned resumes;
};

/* ---- manifests ---------------------------------------------------------- */

void
registry_manifest_clear(struct registry_manifest *m)
{
    if (!m)
        return;
    free(m->body);
    free(m->media_type);
    memset(m, 0, sizeof(*m));
}

static bool
is_schema1(const char *media_type, const char *body, size_t len)
{
    if (media_type && (strcmp(media_type, MT_DOCKER_SCHEMA1) == 0 ||
                       strcmp(media_type, MT_DOCKER_SCHEMA1_SIGNED) == 0))
        return true;
    json_tokener *tok = json_tokener_new();
    json_object *root = tok ? json_tokener_parse_ex(tok, body, (int)len) : NULL;
    if (tok)
        json_tokener_free(tok);
    json_object *v = NULL;
    bool one = root && json_object_object_get_ex(root, "schemaVersion", &v) &&
               json_object_is_type(v, json_type_int) && json_object_get_int(v) == 1;
    json_object_put(root);
    return one;
}

int
registry_manifest_get(struct registry_repo *r, const char *reference, struct registry_manifest *out,
                      struct err *err)
{
    memset(out, 0, sizeof(*out));
    bool by_digest = strncmp(reference, "sha256:", 7) == 0;
    if (by_digest ? !digest_valid(reference) : !registry_tag_valid(reference))
        return err_set(err, EINVAL, "%s %s: not a valid %s", r->name, reference,
                       by_digest ? "digest (sha256:<64 lowercase hex>)" : "tag");
    char what[600];
    snprintf(what, sizeof(what), "manifest %s%s%s", r->repository, by_digest ? "@" : ":",
             reference);
    cleanup_free char *path = NULL;
    if (asprintf(&path, "/manifests/%s", reference) < 0)
        return err_set(err, ENOMEM, "out of memory");
    struct exchange x = {
        .method = "GET", .path = path, .accept = manifest_accept, .doc = true, .what = what};
    struct reg_stream *s = NULL;
    int rc = registry_exchange(r, &x, &s, err);
    if (rc < 0)
        return rc;
    const char *ct = reg_stream_resp(s)->content_type;
    if (ct)
        out->media_type = strndup(ct, strcspn(ct, "; "));
    rc = reg_stream_read_all(s, OCI_DOC_MAX, &out->body, &out->len, err);
    reg_stream_close(s);
    if (rc == -EFBIG)
        rc = err_set(err, ERR_INVALID_CONTENT, "%s from %s: over the limit of %d bytes", what,
                     r->host, OCI_DOC_MAX);
    if (rc < 0) {
        registry_manifest_clear(out);
        return rc;
    }
    if (digest_of(out->body, out->len, out->digest) < 0) {
        registry_manifest_clear(out);
        return err_set(err, ENOMEM, "out of memory");
    }
    if (by_digest && strcmp(out->digest, reference) != 0) {
        rc = err_set(err, ERR_INVALID_CONTENT, "%s from %s: the content's digest is %s", what,
                     r->host, out->digest);
        registry_manifest_clear(out);
        return rc;
    }
    if (is_schema1(out->media_type, out->body, out->len)) {
        registry_manifest_clear(out);
        return err_set(err, ENOTSUP,
                       "%s from %s is a Docker schema 1 manifest, which berth does not pull "
                       "(deprecated; push the image again with a current tool)",
                       what, r->host);
    }
    return 0;
}

/* ---- blobs -------------------------------------------------------------- */

static int
blob_exchange(struct registry_blob *b, struct err *err)
{
    char what[600];
    snprintf(what, sizeof(what), "blob %s of %s", b->digest, b->r->repository);
    cleanup_free char *path = NULL;
    if (asprintf(&path, "/blobs/%s", b->digest) < 0)
        return err_set(err, ENOMEM, "out of memory");
    struct exchange x = {
        .method = "GET", .path = path, .range_from = b->offset, .doc = false, .what = what};
    int rc = registry_exchange(b->r, &x, &b->s, err);
    if (rc == -ENOENT) /* the registry's manifest names it: its fault */
        err->code = ERR_BAD_GATEWAY, rc = -ERR_BAD_GATEWAY;
    if (rc < 0)
        return rc;
    /* A length that is not the descriptor's is the wrong blob, whatever its
     * bytes: refused before they are read (a shorter one would otherwise
     * look like a cut connection and be resumed past its end). */
    const struct reg_http_resp *resp = reg_stream_resp(b->s);
    int64_t served = (resp->status == 206 ? b->offset : 0) + resp->content_length;
    if (b->size >= 0 && resp->content_length >= 0 && served != b->size) {
        reg_stream_close(b->s); /* resp goes with it */
        b->s = NULL;
        return err_set(err, ERR_INVALID_CONTENT,
                       "blob %s: registry %s serves %lld bytes, its descriptor says %lld",
                       b->digest, b->r->host, (long long)served, (long long)b->size);
    }
    if (b->offset == 0)
        return 0;
    /* A resumed transfer: 206 from where we were, or 200 from the start. */
    int64_t skip = 0;
    if (resp->status == 206) {
        if (resp->range_start != b->offset) {
            reg_stream_close(b->s);
            b->s = NULL;
            return err_set(err, ERR_BAD_GATEWAY,
                           "registry %s: resumed blob %s at byte %lld, "
                           "not %lld",
                           b->r->host, b->digest, (long long)resp->range_start,
                           (long long)b->offset);
        }
    } else {
        skip = b->offset;
    }
    char buf[16384];
    while (skip > 0) {
        ssize_t n = reg_stream_read(b->s, buf,
                                    skip < (int64_t)sizeof(buf) ? (size_t)skip : sizeof(buf), err);
        if (n <= 0) {
            reg_stream_close(b->s);
            b->s = NULL;
            return n < 0 ? (int)n
                         : err_set(err, ERR_BAD_GATEWAY, "registry %s: blob %s ended early",
                                   b->r->host, b->digest);
        }
        skip -= n;
    }
    return 0;
}

int
registry_blob_open(struct registry_repo *r, const char *digest, int64_t size,
                   struct registry_blob **out, struct err *err)
{
    if (!digest_valid(digest))
        return err_set(err, EINVAL, "blob %s: not a valid digest", digest);
    struct registry_blob *b = calloc(1, sizeof(*b));
    if (!b)
        return err_set(err, ENOMEM, "out of memory");
    b->r = r;
    b->size = size;
    snprintf(b->digest, sizeof(b->digest), "%s", digest);
    int rc = blob_exchange(b, err);
    if (rc < 0) {
        free(b);
        return rc;
    }
    *out = b;
    return 0;
}

ssize_t
registry_blob_read(struct registry_blob *b, void *buf, size_t len, struct err *err)
{
    for (;;) {
        if (!b->s) {
            int rc = blob_exchange(b, err);
            if (rc < 0)
                return rc;
        }
        if (b->size >= 0 && b->offset >= b->size) {
            /* All bytes are in: anything more is not this blob. */
            char extra;
            ssize_t n = reg_stream_read(b->s, &extra, 1, err);
            if (n <= 0)
                return n;
            return err_set(err, ERR_INVALID_CONTENT,
                           "blob %s: registry %s sent more than the %lld bytes its descriptor "
                           "says",
                           b->digest, b->r->host, (long long)b->size);
        }
        size_t want = len;
        if (b->size >= 0 && (int64_t)want > b->size - b->offset)
            want = (size_t)(b->size - b->offset);
        struct err rerr = {0};
        ssize_t n = reg_stream_read(b->s, buf, want, &rerr);
        if (n > 0) {
            b->offset += n;
            return n;
        }
        bool early = n == 0 && b->size >= 0 && b->offset < b->size;
        if (n == 0 && !early)
            return 0;
        bool can_retry = early || (n < 0 && reg_stream_retryable(b->s));
        reg_stream_close(b->s);
        b->s = NULL;
        if (early)
            err_set(&rerr, ERR_BAD_GATEWAY, "registry %s: blob %s ended after %lld of %lld bytes",
                    b->r->host, b->digest, (long long)b->offset, (long long)b->size);
        if (!can_retry || b->resumes + 1 >= b->r->c->max_attempts) {
            err_copy(err, &rerr);
            return -rerr.code;
        }
        b->resumes++;
        log_info("registry: %s; resuming at byte %lld (attempt %u of %u)", rerr.msg,
                 (long long)b->offset, b->resumes + 1, b->r->c->max_attempts);
        int rc = registry_backoff_sleep(b->r, b->r->c->backoff_ms << (b->resumes - 1), err);
        if (rc < 0)
            return rc;
    }
}

int64_t
registry_blob_offset(const struct registry_blob *b)
{
    return b->offset;
}

void
registry_blob_close(struct registry_blob *b)
{
    if (!b)
        return;
    reg_stream_close(b->s);
    free(b);
}
