/*
 * Registry blobs downloaded into a pull's staging, with progress events
 * for layers, verified by the blob writer; the reader is also what
 * unpacks a layer in the same pass (pull_layers.c). Pool threads;
 * blocking on the network and on disk.
 */
#include "store/pull_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/osfs.h"
#include "store/image_build.h"
#include "store/oci.h"
#include "store/refname.h"

#define READ_CHUNK (256 * 1024)
#define PROGRESS_MS 250

ssize_t
pull_net_read_cb(void *ctx, void *buf, size_t len)
{
    struct net_source *s = ctx;
    ssize_t n = registry_blob_read(s->blob, buf, len, &s->err);
    if (n < 0) {
        s->failed = true;
        return n;
    }
    if (s->layer != (size_t)-1) {
        int64_t t = pull_now_ms();
        if (n == 0 || t - s->last_ms >= PROGRESS_MS) {
            s->last_ms = t;
            pull_emit_layer(s->p, s->layer, "downloading", registry_blob_offset(s->blob));
        }
    }
    return n;
}

/* Downloads blob desc into staging, verified by the blob writer. */
int
pull_download(struct pull_plan *p, const struct oci_descriptor *desc, size_t layer, int64_t max,
              struct err *err)
{
    struct net_source src = {.p = p, .layer = layer, .last_ms = pull_now_ms()};
    int rc = registry_blob_open(p->repo, desc->digest, desc->size, &src.blob, err);
    if (rc < 0)
        return rc;
    struct blob_writer *w =
        blob_writer_new(p->st->blobs, p->b.staging, desc->digest, desc->size, max, err);
    cleanup_free char *buf = w ? malloc(READ_CHUNK) : NULL;
    if (!w || !buf) {
        blob_writer_abort(w);
        registry_blob_close(src.blob);
        return w ? err_set(err, ENOMEM, "out of memory") : -err->code;
    }
    for (;;) {
        ssize_t n = pull_net_read_cb(&src, buf, READ_CHUNK);
        if (n < 0) {
            err_copy(err, &src.err);
            rc = (int)n;
            break;
        }
        if (n == 0) {
            rc = blob_writer_finish(w, NULL, NULL, err);
            w = NULL;
            break;
        }
        if ((rc = blob_writer_write(w, buf, (size_t)n, err)) < 0)
            break;
    }
    blob_writer_abort(w);
    registry_blob_close(src.blob);
    return rc;
}
