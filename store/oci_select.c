/*
 * Choosing an image from an OCI index: by ref name, then by platform
 * (for Windows, the build that suits the host best), following nested
 * indexes to a bounded depth; a no-match message says what the index
 * offers. Runs on pool threads during an import or a pull; pure functions
 * of their input and the blob reader.
 */
#include "store/oci.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "jsonutil/doc.h"
#include "jsonutil/jsonutil.h"
#include "store/oci_int.h"

/* ---- selection ---------------------------------------------------------- */

static bool
entry_is_image(const struct oci_descriptor *e, const char *ref_name)
{
    if (!oci_media_type_is_manifest(e->media_type) && !oci_media_type_is_index(e->media_type))
        return false;
    return !ref_name || (e->ref_name && strcmp(e->ref_name, ref_name) == 0);
}

/* Appends ", <what>" (or "<what>" first) to a message list, silently truncating. */
static void
list_append(char *buf, size_t size, const char *what)
{
    size_t used = strlen(buf);
    if (used + 1 < size)
        snprintf(buf + used, size - used, "%s%s", used ? ", " : "", what);
}

/* What idx offers, for a no-match message: platforms, or ref names with by_name. */
static void
offers_describe(const struct oci_index *idx, bool by_name, char *buf, size_t size)
{
    char one[200];
    char q[JSONUTIL_QUOTE_MAX];
    buf[0] = '\0';
    for (size_t i = 0; i < idx->n_manifests; i++) {
        const struct oci_descriptor *e = &idx->manifests[i];
        if (!entry_is_image(e, NULL))
            continue;
        if (by_name) {
            if (!e->ref_name)
                continue;
            jsonutil_quote(q, e->ref_name, strlen(e->ref_name));
            list_append(buf, size, q);
            continue;
        }
        if (e->has_platform)
            oci_platform_format(&e->platform, one, sizeof(one));
        else
            snprintf(one, sizeof(one), "no platform");
        list_append(buf, size, one);
    }
    if (!buf[0])
        snprintf(buf, size, "nothing");
}

/*
 * Among Windows matches, the one whose build suits want best: its own
 * build, else the newest older one, else the first. Returns an index
 * into cand.
 */
static size_t
windows_pick(const struct oci_descriptor *const *cand, size_t n, const struct oci_platform *want)
{
    size_t best = 0;
    bool best_older = false;
    for (size_t i = 0; i < n; i++) {
        int c;
        if (!windows_version_compare(cand[i]->platform.os_version, want->os_version, &c))
            continue;
        if (c == 0)
            return i;
        if (c < 0) {
            int nb;
            if (!best_older || (windows_version_compare(cand[i]->platform.os_version,
                                                        cand[best]->platform.os_version, &nb) &&
                                nb > 0)) {
                best = i;
                best_older = true;
            }
        }
    }
    return best;
}

int
oci_select_manifest(const struct oci_index *idx, const struct oci_platform *want,
                    const char *ref_name, const char *name, const struct oci_descriptor **out,
                    struct err *err)
{
    struct jsonutil_doc d = {"index", name, err};
    const struct oci_descriptor *single = NULL;
    size_t n_cand = 0;
    char offers[320];
    char q[JSONUTIL_QUOTE_MAX];

    for (size_t i = 0; i < idx->n_manifests; i++) {
        if (entry_is_image(&idx->manifests[i], ref_name)) {
            single = &idx->manifests[i];
            n_cand++;
        }
    }
    if (n_cand == 0) {
        offers_describe(idx, ref_name != NULL, offers, sizeof(offers));
        if (ref_name)
            return jsonutil_doc_fail(&d, "no image named %s; it offers %s",
                                     jsonutil_quote(q, ref_name, strlen(ref_name)), offers);
        return jsonutil_doc_fail(&d, "lists no image manifest");
    }
    if (n_cand == 1 && (!single->has_platform || !want)) {
        *out = single;
        return 0;
    }
    if (!want)
        return jsonutil_doc_fail(&d, "lists %zu images; a platform is needed to choose one",
                                 n_cand);

    const struct oci_descriptor **match = calloc(n_cand, sizeof(*match));
    size_t n_match = 0;
    if (!match)
        return jsonutil_doc_nomem(&d);
    for (size_t i = 0; i < idx->n_manifests; i++) {
        const struct oci_descriptor *e = &idx->manifests[i];
        if (entry_is_image(e, ref_name) && e->has_platform &&
            oci_platform_match(want, &e->platform))
            match[n_match++] = e;
    }
    if (n_match == 0) {
        char w[200];
        free(match);
        offers_describe(idx, false, offers, sizeof(offers));
        return jsonutil_doc_fail(&d, "no image for %s; it offers %s",
                                 oci_platform_format(want, w, sizeof(w)), offers);
    }
    size_t pick = 0;
    if (strcmp(want->os, "windows") == 0 && want->os_version[0])
        pick = windows_pick(match, n_match, want);
    *out = match[pick];
    free(match);
    return 0;
}

int
oci_index_resolve(const struct oci_index *idx, const struct oci_platform *want,
                  const char *ref_name, const char *name, oci_blob_read_cb read_cb, void *ctx,
                  struct oci_descriptor *out, struct err *err)
{
    __attribute__((cleanup(oci_index_freep))) struct oci_index *owned = NULL;
    char owned_name[OCI_DIGEST_MAX];
    const struct oci_index *cur = idx;
    const char *cur_name = name;

    for (int depth = 0;; depth++) {
        const struct oci_descriptor *e;
        int r = oci_select_manifest(cur, want, depth == 0 ? ref_name : NULL, cur_name, &e, err);
        if (r < 0)
            return r;
        if (!oci_media_type_is_index(e->media_type))
            return oci_descriptor_copy(out, e, err);

        struct jsonutil_doc d = {"index", cur_name, err};
        if (depth == OCI_INDEX_NEST_MAX)
            return jsonutil_doc_fail(&d, "entry %s is an index nested more than %d deep", e->digest,
                                     OCI_INDEX_NEST_MAX);
        if (e->size > OCI_DOC_MAX)
            return jsonutil_doc_fail(
                &d, "entry %s is an index of %lld bytes, more than the %d byte limit", e->digest,
                (long long)e->size, OCI_DOC_MAX);

        char digest[OCI_DIGEST_MAX];
        cleanup_free char *buf = NULL;
        size_t len = 0;
        int64_t size = e->size;
        memcpy(digest, e->digest, sizeof(digest));
        if ((r = read_cb(ctx, digest, &buf, &len, err)) < 0)
            return r;
        if ((int64_t)len != size)
            return jsonutil_doc_fail(&d, "entry %s says %lld bytes, the blob has %zu", digest,
                                     (long long)size, len);
        struct oci_index *next = NULL;
        if ((r = oci_index_parse(buf, len, digest, &next, err)) < 0)
            return r;
        oci_index_free(owned);
        owned = next;
        memcpy(owned_name, digest, sizeof(owned_name));
        cur = owned;
        cur_name = owned_name;
    }
}
