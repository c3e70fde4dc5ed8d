/*
 * The volume service: create (with copy-on-write children), list with
 * property filters, get, patch, delete, and tar streams in (an upload the
 * caller writes through a bounded pipe) and out (a job writing the tar
 * into a bounded pipe the caller drains as fast as its client reads).
 * TTLs are kept by daemon/volume_ttl.c. See daemon/svc.h for the calling
 * convention. Loop thread only.
 */
#ifndef BERTH_DAEMON_SVC_VOLUMES_H
#define BERTH_DAEMON_SVC_VOLUMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "daemon/svc.h"
#include "store/volume.h"
#include "store/volume_meta.h"

struct daemon;
struct bpipe;
struct rootfs_stat;
struct rootfs_tar_in_opts;

#define VOL_PROPS_MAX 256

/* A volume as callers see it; valid during the callback. */
struct vol_info {
    const struct volume_rec *rec;
    const char *path; /* its data on the host */
    int64_t size_bytes;
};

typedef void (*vol_cb)(void *arg, const struct err *err, const struct vol_info *v);
typedef void (*vol_list_cb)(void *arg, const struct err *err, const struct vol_info *vs, size_t n);
typedef void (*vol_delete_cb)(void *arg, const struct err *err, char *const *deleted, size_t n);

/* Creates a volume (o's strings are copied). EINVAL at once for a bad
 * handle, parent, property or ttl. */
int vol_create(struct daemon *d, const struct volume_create_opts *o, vol_cb cb, void *arg,
               struct svc_call **call, struct err *err);
int vol_get(struct daemon *d, const char *handle, vol_cb cb, void *arg, struct svc_call **call,
            struct err *err);
/* Sets (value) or removes (value NULL) properties; ttl_s -1 leaves the TTL. */
int vol_patch(struct daemon *d, const char *handle, const struct volume_prop *props, size_t n,
              int64_t ttl_s, vol_cb cb, void *arg, struct svc_call **call, struct err *err);
/* The volumes whose properties include every one of filters. */
int vol_list(struct daemon *d, const struct volume_prop *filters, size_t n, vol_list_cb cb,
             void *arg, struct svc_call **call, struct err *err);
int vol_delete(struct daemon *d, const char *handle, bool force, vol_delete_cb cb, void *arg,
               struct svc_call **call, struct err *err);

/* ---- tar streams ------------------------------------------------------------ */

struct volume_stream_in;
typedef void (*volume_stream_in_cb)(void *arg, const struct err *err,
                                    const struct volume_tar_in_result *res);
/*
 * Extracts a tar stream the caller writes through volume_stream_in_pipe
 * into the volume at path (volume_path_clean's form), all or nothing.
 * encoding is "gzip", "zstd" or NULL; room runs when the pipe has room
 * again. The caller lets go with volume_stream_in_detach.
 */
int volume_stream_in(struct daemon *d, const char *handle, const char *path, const char *encoding,
                     void (*room)(void *arg), volume_stream_in_cb done, void *arg,
                     struct volume_stream_in **out, struct err *err);
struct bpipe *volume_stream_in_pipe(struct volume_stream_in *op);
void volume_stream_in_detach(struct volume_stream_in *op);

/*
 * Where a stream works: a volume, or a container's mounted root
 * filesystem (store/rootfs_tar.h), which daemon/svc_archive.c names after
 * checking the container. release (may be NULL) runs on the loop with
 * release_arg when the stream's op goes, from the moment the call
 * succeeded: the container's reference.
 */
struct volume_stream_where {
    const char *handle; /* a volume's, or NULL with rootfs */
    const char *rootfs; /* its host path; path is then the container's */
    const char *top;    /* downloads from rootfs: the name of its root (store/rootfs_tar.h) */
    bool no_dir_nondir; /* uploads into rootfs: Docker's noOverwriteDirNonDir */
    /* Uploads into rootfs: runs in the job, before the extraction, with
     * release_arg, to fill in what only a job may read (the owner of
     * copyUIDGID, from the container's /etc/passwd). May be NULL. */
    int (*prepare)(void *arg, struct rootfs_tar_in_opts *o, struct err *err);
    /* Uploads into rootfs: runs in the job after the extraction (whether
     * it worked or not) when prepare succeeded. May be NULL. */
    void (*finish)(void *arg);
    void (*release)(void *arg);
    void *release_arg;
};
/* volume_stream_in on w. */
int volume_stream_in_at(struct daemon *d, const struct volume_stream_where *w, const char *path,
                        const char *encoding, void (*room)(void *arg), volume_stream_in_cb done,
                        void *arg, struct volume_stream_in **out, struct err *err);

struct volume_stream_out;
/*
 * Writes a tar of path in the volume for the caller to read with
 * volume_stream_out_read. notify runs whenever there is something to
 * look at: the path was found (volume_stream_out_ready), bytes came, or
 * the job ended (volume_stream_out_result).
 */
int volume_stream_out(struct daemon *d, const char *handle, const char *path,
                      enum volume_compression comp, void (*notify)(void *arg), void *arg,
                      struct volume_stream_out **out, struct err *err);
/* volume_stream_out on w. */
int volume_stream_out_at(struct daemon *d, const struct volume_stream_where *w, const char *path,
                         enum volume_compression comp, void (*notify)(void *arg), void *arg,
                         struct volume_stream_out **out, struct err *err);
/* A rootfs stream's stat of its path, once ready (else NULL). */
const struct rootfs_stat *volume_stream_out_stat(const struct volume_stream_out *op);
/* The path was found and the tar's bytes follow. */
bool volume_stream_out_ready(const struct volume_stream_out *op);
/* Takes up to len bytes now; *eof once the job ended and all was read. */
size_t volume_stream_out_read(struct volume_stream_out *op, void *buf, size_t len, bool *eof);
/* Bytes in the pipe. */
size_t volume_stream_out_buffered(struct volume_stream_out *op);
/* Whether the job ended, and its error (NULL when it went well). */
bool volume_stream_out_result(const struct volume_stream_out *op, const struct err **err);
/* Stops the job at its next write (it then ends with an error). */
void volume_stream_out_cancel(struct volume_stream_out *op);
/* The caller is gone: the job stops at its next write, no notify runs. */
void volume_stream_out_detach(struct volume_stream_out *op);

#endif
