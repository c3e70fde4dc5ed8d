/*
 * The image service: import (a tar stream the caller writes through a
 * bounded pipe, a layout directory on the host, a layout inside a
 * volume, or a pull from a registry) with progress events, list, get,
 * delete, prune, and the
 * store's size policy (--store-max-bytes) and garbage collection. See
 * daemon/svc.h for the calling convention. Loop thread only.
 */
#ifndef BERTH_DAEMON_SVC_IMAGES_H
#define BERTH_DAEMON_SVC_IMAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "daemon/svc.h"
#include "store/digest.h"
#include "store/gc.h"
#include "store/meta.h"
#include "store/oci.h"
#include "store/platform.h"

struct daemon;
struct bpipe;
struct image_load;
struct registry_creds;

/*
 * One step of an import, as plain values (a copy of the store's event).
 *
 * An upload or layout: steps "blob" (stored, present), "layer"
 * (unpacking, unpacked, cached) and "image" (created, present).
 *
 * A pull: step "manifest" status "resolved" (digest: the manifest picked
 * for the platform), then for each layer (index, count, digest, total:
 * its compressed size) the states
 *     waiting -> downloading -> downloaded -> [unpacking ->] unpacked
 *     or cached (its blob and snapshot were stored already)
 * where "downloading" repeats with done = bytes so far (at most every
 * 250 ms for the whole pull, and once at the end of each layer),
 * "unpacking" comes only for a layer unpacked from its downloaded blob
 * after the layers below it were done (otherwise it is unpacked while it
 * downloads), and a caller that joins a running pull first gets each
 * layer's latest state; then step "image" status "created" or "present".
 * Docker's progress maps one to one: waiting "Pulling fs layer",
 * downloading "Downloading", downloaded "Download complete", unpacking
 * "Extracting", unpacked "Pull complete", cached "Already exists".
 */
struct image_progress {
    char step[16];   /* "manifest", "blob", "layer", "image" */
    char status[16]; /* see above, or "" */
    char digest[DIGEST_STR_LEN];
    char chain_id[DIGEST_STR_LEN]; /* layers only, else "" */
    int64_t done, total;           /* bytes; total -1 when unknown */
    unsigned index, count;         /* layers: 1-based position and how many; else 0 */
};

struct image_source {
    const char *layout_dir;  /* a layout directory on the host, or */
    const char *volume;      /* a layout inside this volume, at */
    const char *volume_path; /* this path in it ("/" when NULL), or */
    bool upload;             /* a tar stream written through image_load_pipe, or */
    const char *registry;    /* a reference to pull ("busybox:1.36", "h:5000/a@sha256:..") */
    const struct registry_creds *creds; /* a pull's credentials (copied); NULL: --registry-auth's */
    const char *name; /* the name to give it (distribution reference); not for pulls */
    const struct oci_platform *platform; /* NULL: this host's */
    /* Progress events (may be NULL): dropped rather than waited for when
     * the caller does not keep up. */
    void (*progress)(void *arg, const struct image_progress *ev);
    /* The upload pipe has room again (uploads only). */
    void (*room)(void *arg);
};

typedef void (*image_loaded_cb)(void *arg, const struct err *err, const struct meta_image *img,
                                bool created);

/*
 * Starts an import (as a long job, daemon/job.h). *out is its handle at
 * once: the caller writes an upload through image_load_pipe and lets
 * go with image_load_detach, after which no callback runs; done runs
 * once, with the stored image and whether it is new, or the error.
 *
 * A registry source joins the pull of the same reference, platform and
 * credentials if one runs (every caller gets its answer and its progress)
 * and is named by its canonical reference. Its errors: EINVAL for a bad
 * reference or credentials, ERR_UNAUTHORIZED (the registry refused),
 * ENOENT (no such manifest), ERR_INVALID_CONTENT (a digest or platform
 * mismatch), ENOTSUP (schema 1, a foreign layer), ERR_BAD_GATEWAY and
 * ERR_GATEWAY_TIMEOUT (the registry failed or did not answer), ECANCELED
 * (shutdown). A pull whose last caller detached goes on for a grace
 * period, then is cancelled (daemon/svc_pull.h).
 */
int image_import(struct daemon *d, const struct image_source *o, image_loaded_cb done, void *arg,
                 struct image_load **out, struct err *err);
/* The pipe an upload is written into (bpipe_write_nb, bpipe_close_write). */
struct bpipe *image_load_pipe(struct image_load *op);
/* The caller is gone: an upload still coming is refused, no callback runs. */
void image_load_detach(struct image_load *op);

typedef void (*image_list_cb)(void *arg, const struct err *err, struct meta_image *const *imgs,
                              size_t n);
int image_list(struct daemon *d, image_list_cb cb, void *arg, struct svc_call **call,
               struct err *err);

/*
 * Looks ref up: a digest, a digest prefix, or a name normalised by the
 * distribution reference grammar ("busybox" is docker.io/library/busybox:latest);
 * ENOENT names every form tried.
 */
typedef void (*image_get_cb)(void *arg, const struct err *err, const struct meta_image *img,
                             const struct oci_config *cfg);
int image_get(struct daemon *d, const char *ref, image_get_cb cb, void *arg, struct svc_call **call,
              struct err *err);

struct image_delete_result {
    char digest[DIGEST_STR_LEN];
    bool image_removed; /* false: only the name went */
    const char *name_removed;
    struct gc_result gc;
};
typedef void (*image_delete_cb)(void *arg, const struct err *err,
                                const struct image_delete_result *res);
int image_delete(struct daemon *d, const char *ref, image_delete_cb cb, void *arg,
                 struct svc_call **call, struct err *err);

/* unused_for_s and keep_bytes: -1 for no such rule. */
typedef void (*image_prune_cb)(void *arg, const struct err *err, char *const *removed, size_t n,
                               const struct gc_result *gc);
int image_prune(struct daemon *d, int64_t unused_for_s, int64_t keep_bytes, image_prune_cb cb,
                void *arg, struct svc_call **call, struct err *err);

/*
 * Collects garbage once in a job, without delaying anything (start-up:
 * what a crash during a prune left goes at once). 0 or -errno.
 */
int images_gc_start(struct daemon *d);

#endif
