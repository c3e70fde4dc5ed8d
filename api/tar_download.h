/*
 * A service's tar stream (daemon/svc_volumes.h's volume_stream_out: a
 * volume's files, a container's archive) sent as a request's reply: the
 * request waits, suspended, until the job found its path (or failed:
 * the error is the reply), then the tar goes out as a streamed 200 body,
 * moved from the service's pipe as fast as the client reads it. A job
 * that fails part-way cuts the transfer (api_stream_fail). Shared by
 * api/volumes.c and api/docker/archive.c. Loop thread.
 */
#ifndef BERTH_API_TAR_DOWNLOAD_H
#define BERTH_API_TAR_DOWNLOAD_H

#include "common/err.h"
#include "daemon/svc_volumes.h"

struct api_req;
struct api_tar_dl;

struct api_tar_dl_hooks {
    /* The reply is about to start (req->response exists): add headers. May be NULL. */
    void (*started)(struct api_req *req, struct volume_stream_out *op);
    /* The job failed before its first byte: reply. NULL: api_reply_err_resume. */
    void (*failed)(struct api_req *req, const struct err *err);
};

/* The reply's state, made before the service call (its notify argument);
 * NULL on out of memory. comp is announced as the Content-Encoding. */
struct api_tar_dl *api_tar_dl_new(struct api_req *req, enum volume_compression comp,
                                  const struct api_tar_dl_hooks *hooks);
/* The notify callback to give the service, with d as its argument. */
void api_tar_dl_notify(void *d);
/* The service call succeeded with op: req owns d from here and waits. */
void api_tar_dl_wait(struct api_tar_dl *d, struct volume_stream_out *op);
/* The service call failed: d goes (the caller replies). */
void api_tar_dl_free(struct api_tar_dl *d);

#endif
