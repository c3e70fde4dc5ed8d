/*
 * OCI image documents and docker-save manifests: parsing, validation,
 * manifest selection from an index, and the synthetic manifest that gives
 * a docker-save image its digest.
 *
 * Input is untrusted bytes (an image layout or a `docker save` archive a
 * client uploaded), at most OCI_DOC_MAX long. Every document that is not
 * what the specs allow fails with ERR_INVALID_CONTENT and a message that
 * names the blob (its digest or archive path), the field and the
 * offending value, e.g.
 *   manifest sha256:ab12...: layers[2].digest "sha256:XYZ" is not sha256:<64 lowercase hex>
 * Results are plain C structs (no json-c objects escape), owned by the
 * caller and freed with the matching _free (NULL is a no-op).
 *
 * Synchronous, no I/O of its own, no shared state: safe from any thread.
 */
#ifndef BERTH_STORE_OCI_H
#define BERTH_STORE_OCI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "store/platform.h"

/*
 * The most layers one container can stack: an overlay option string of
 * /proc/self/fd/N lower directories must fit in a page (mount(2)), which
 * holds some 210 with four-digit descriptors. Images with more are
 * refused at import (oci_manifest_parse) rather than stored and never runnable.
 */
#define OCI_LAYERS_MAX 200

/* The largest JSON document accepted (index, manifest, config, manifest.json). */
#define OCI_DOC_MAX (4 << 20)

/* "sha256:" + 64 hex + NUL. */
#define OCI_DIGEST_MAX 72

/* How many index levels oci_index_resolve() follows below the top one. */
#define OCI_INDEX_NEST_MAX 2

#define OCI_MT_INDEX "application/vnd.oci.image.index.v1+json"
#define OCI_MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define OCI_MT_CONFIG "application/vnd.oci.image.config.v1+json"
#define OCI_MT_LAYER_TAR "application/vnd.oci.image.layer.v1.tar"
#define OCI_MT_LAYER_GZIP "application/vnd.oci.image.layer.v1.tar+gzip"
#define OCI_MT_LAYER_ZSTD "application/vnd.oci.image.layer.v1.tar+zstd"
#define DOCKER_MT_MANIFEST_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define DOCKER_MT_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define DOCKER_MT_CONFIG "application/vnd.docker.container.image.v1+json"
#define DOCKER_MT_LAYER_GZIP "application/vnd.docker.image.rootfs.diff.tar.gzip"

/* The annotation that names a manifest in an image layout's index.json. */
#define OCI_ANNOTATION_REF_NAME "org.opencontainers.image.ref.name"
#define OCI_ANNOTATION_CONTAINERD_NAME "io.containerd.image.name"

/*
 * A content descriptor. digest is always a valid "sha256:<64 hex>" (other
 * algorithms are refused), size >= 0, media_type a non-empty string.
 * Embedded in the structs below; its strings are freed with them.
 */
struct oci_descriptor {
    char *media_type;
    char digest[OCI_DIGEST_MAX];
    int64_t size;
    bool has_platform;
    struct oci_platform platform; /* valid when has_platform */
    char *ref_name;               /* the ref.name annotation, or NULL */
};

/* An image index, a docker manifest list, or an image layout's index.json. */
struct oci_index {
    char *media_type; /* NULL when the document has none (allowed for OCI) */
    struct oci_descriptor *manifests;
    size_t n_manifests;
};

enum oci_layer_compression {
    OCI_LAYER_TAR,
    OCI_LAYER_GZIP,
    OCI_LAYER_ZSTD,
};

struct oci_layer {
    struct oci_descriptor desc;
    enum oci_layer_compression compression;
    /*
     * A nondistributable (OCI) or foreign (docker) layer: registries and
     * archives may leave it out (Windows base layers); fetching it from
     * its urls is not ours to do, so the importer must find it present.
     */
    bool nondistributable;
};

/* An image manifest: OCI v1 or docker v2 schema 2. */
struct oci_manifest {
    char *media_type; /* NULL when an OCI manifest has none */
    struct oci_descriptor config;
    struct oci_layer *layers;
    size_t n_layers;
};

/*
 * An image configuration: its platform, its layers' diff IDs, and the run
 * defaults a container starts from. String vectors are NULL-terminated
 * and counted; a field the config does not have is NULL with count 0.
 */
struct oci_config {
    struct oci_platform platform;
    char (*diff_ids)[OCI_DIGEST_MAX];
    size_t n_diff_ids;
    char **env;
    size_t n_env;
    char **entrypoint;
    size_t n_entrypoint;
    char **cmd;
    size_t n_cmd;
    char *working_dir;    /* NULL when absent or empty */
    char *user;           /* NULL when absent or empty */
    char **exposed_ports; /* "80/tcp"...: the keys of ExposedPorts */
    size_t n_exposed_ports;
    char **label_keys, **label_values; /* Labels, in document order */
    size_t n_labels;
};

/* One image of a `docker save` archive's manifest.json. */
struct docker_image {
    char *config;     /* archive path of the config JSON */
    char **repo_tags; /* NULL-terminated; may be empty (an untagged image) */
    size_t n_repo_tags;
    char **layers; /* archive paths of the layer tars, base first */
    size_t n_layers;
};

struct docker_manifest {
    struct docker_image *images;
    size_t n_images;
};

/* A layer as the synthetic manifest of a docker-save image lists it. */
struct oci_layer_ref {
    char digest[OCI_DIGEST_MAX]; /* of the layer blob as stored */
    int64_t size;
    enum oci_layer_compression compression;
};

/*
 * Parses an image index (OCI index, docker manifest list, or a layout's
 * index.json) from buf. name identifies the blob in messages (a digest or
 * "index.json"). schemaVersion must be 2; mediaType, when present, must
 * be an index type; every descriptor is validated. The manifests' own
 * media types are kept as they are (an index may list artifacts), and
 * oci_select_manifest() skips what is not an image.
 * On success *out is a new index the caller frees with oci_index_free().
 */
int oci_index_parse(const char *buf, size_t len, const char *name, struct oci_index **out,
                    struct err *err);
/* Frees idx and everything in it; NULL is a no-op. */
void oci_index_free(struct oci_index *idx);

/*
 * Parses an image manifest (OCI v1 or docker v2 schema 2). The config
 * must be an image config (OCI or docker media type) and every layer one
 * of the known layer media types; unknown ones are refused by name.
 * *out is new; free it with oci_manifest_free().
 */
int oci_manifest_parse(const char *buf, size_t len, const char *name, struct oci_manifest **out,
                       struct err *err);
/* Frees m and everything in it; NULL is a no-op. */
void oci_manifest_free(struct oci_manifest *m);

/*
 * Parses an image configuration (OCI or docker): os, architecture,
 * variant, os.version, rootfs (type "layers", diff_ids) and from "config"
 * Env, Entrypoint, Cmd, WorkingDir and User (null counts as absent).
 * *out is new; free it with oci_config_free().
 */
int oci_config_parse(const char *buf, size_t len, const char *name, struct oci_config **out,
                     struct err *err);
/* Frees c and everything in it; NULL is a no-op. */
void oci_config_free(struct oci_config *c);

/* Checks an image layout's `oci-layout` file: imageLayoutVersion "1.0.0". */
int oci_layout_check(const char *buf, size_t len, const char *name, struct err *err);

/*
 * Checks that a manifest and its config describe the same image: as many
 * layers as diff IDs. name is the manifest's digest, for the message.
 */
int oci_image_check_consistent(const struct oci_manifest *m, const struct oci_config *c,
                               const char *name, struct err *err);

/*
 * Picks one entry of idx (named name in messages: its digest, or
 * "index.json"), one level deep:
 *
 * - With ref_name, only entries whose ref.name annotation equals it are
 *   candidates (none: ERR_INVALID_CONTENT listing the names offered).
 * - Only image manifests and indexes are candidates (artifacts and
 *   attestations are skipped).
 * - A single candidate without a platform is taken as it is: the config
 *   decides later (umoci, skopeo and buildx layouts look like this).
 * - Otherwise the candidates whose platform matches want
 *   (oci_platform_match: arm64 means arm64/v8, arm means arm/v7). Among
 *   several Windows matches, one of want->os_version's build wins, else
 *   the newest build older than it (hyperv can run that), else the first.
 * - want NULL: a single candidate is taken; several are ambiguous.
 *
 * No match fails with ERR_INVALID_CONTENT listing the platforms the index
 * offers. *out points into idx (borrowed, valid while idx lives). The
 * chosen entry may itself be an index: see oci_index_resolve().
 */
int oci_select_manifest(const struct oci_index *idx, const struct oci_platform *want,
                        const char *ref_name, const char *name, const struct oci_descriptor **out,
                        struct err *err);

/* True for the OCI index and docker manifest list media types. */
bool oci_media_type_is_index(const char *media_type);
/* True for the OCI manifest and docker v2 schema 2 manifest media types. */
bool oci_media_type_is_manifest(const char *media_type);

/*
 * Reads the blob digest (at most OCI_DOC_MAX bytes, already checked
 * against its digest) into a new buffer the caller frees. Used by
 * oci_index_resolve() to follow nested indexes. May block.
 */
typedef int (*oci_blob_read_cb)(void *ctx, const char *digest, char **buf, size_t *len,
                                struct err *err);

/*
 * Selects from idx as oci_select_manifest() does (ref_name applies to the
 * top level only) and, while the choice is itself an index, reads it with
 * read_cb and selects again by platform, following at most
 * OCI_INDEX_NEST_MAX nested indexes (a layout's index.json pointing at a
 * multi-platform index is one). Deeper nesting fails with
 * ERR_INVALID_CONTENT. On success *out is a deep copy of the manifest's
 * descriptor that the caller releases with oci_descriptor_clear().
 * Blocks when read_cb does.
 */
int oci_index_resolve(const struct oci_index *idx, const struct oci_platform *want,
                      const char *ref_name, const char *name, oci_blob_read_cb read_cb, void *ctx,
                      struct oci_descriptor *out, struct err *err);

/* Copies src into dst (deep; dst must be empty). 0 or -ENOMEM. */
int oci_descriptor_copy(struct oci_descriptor *dst, const struct oci_descriptor *src,
                        struct err *err);
/* Frees the strings of an embedded descriptor and zeroes it; NULL is a no-op. */
void oci_descriptor_clear(struct oci_descriptor *d);

/*
 * Parses a `docker save` archive's manifest.json (name: its archive path,
 * for messages): an array of {Config, RepoTags, Layers}. Paths must be
 * relative and canonical: not absolute, no empty, "." or ".." component,
 * no NUL. *out is new; free it with docker_manifest_free().
 */
int docker_manifest_parse(const char *buf, size_t len, const char *name,
                          struct docker_manifest **out, struct err *err);
/* Frees m and everything in it; NULL is a no-op. */
void docker_manifest_free(struct docker_manifest *m);

/*
 * Synthesises the manifest of a docker-save image, so that it has a
 * digest as a pulled image does. The media types are OCI's
 * (OCI_MT_MANIFEST, OCI_MT_CONFIG, and OCI_MT_LAYER_TAR / _GZIP / _ZSTD by
 * each layer's compression): docker v2 schema 2 has no official type for
 * the uncompressed tars that `docker save` writes. The bytes are
 * canonical (no whitespace, fixed key order: schemaVersion, mediaType,
 * config, layers; mediaType, digest, size in each descriptor), so the
 * same image always gets the same digest.
 * On success *out_json is a new NUL-terminated buffer of *out_len bytes
 * (caller frees) and out_digest its sha256 digest.
 */
int oci_manifest_synthesize(const char *config_digest, int64_t config_size,
                            const struct oci_layer_ref *layers, size_t n_layers, char **out_json,
                            size_t *out_len, char out_digest[OCI_DIGEST_MAX], struct err *err);

#endif
