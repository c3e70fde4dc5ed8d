/*
 * The container archive service, docker cp's three steps on a container's
 * root filesystem: the stat of a path, a tar of it (a stream the caller
 * drains, as a volume's download), and a tar extracted under a directory
 * (a stream the caller feeds, as a volume's upload), for a container that
 * is created, running or stopped (its rootfs is mounted from its create to
 * its delete). The streams are daemon/svc_volumes.h's, pointed at the
 * rootfs, or at the volume or host directory mounted where the path lies
 * (a tmpfs mount: ENOTSUP); paths, their resolution and the checks are
 * store/rootfs_tar.h's.
 * A stream holds a reference on the container until it ends. See
 * daemon/svc.h for the calling convention. Loop thread only.
 */
#ifndef BERTH_DAEMON_SVC_ARCHIVE_H
#define BERTH_DAEMON_SVC_ARCHIVE_H

#include <stdbool.h>

#include "common/err.h"
#include "daemon/svc.h"
#include "daemon/svc_volumes.h"
#include "store/rootfs_tar.h"

struct daemon;

typedef void (*ctr_archive_stat_cb)(void *arg, const struct err *err, const struct rootfs_stat *st);

/* The stat of path in container handle (ENOENT: the container, or the path). */
int container_archive_stat(struct daemon *d, const char *handle, const char *path,
                           ctr_archive_stat_cb cb, void *arg, struct svc_call **call,
                           struct err *err);

/* A tar of path, read as volume_stream_out's (volume_stream_out_stat tells its stat). */
int container_archive_get(struct daemon *d, const char *handle, const char *path,
                          void (*notify)(void *arg), void *arg, struct volume_stream_out **out,
                          struct err *err);

/*
 * Extracts the tar the caller writes (as volume_stream_in's) under the
 * directory path. EROFS for a read-only root filesystem or mount. With
 * copy_uid_gid and a container whose User (its own, else its image's) is
 * set, that user owns every entry (resolved in the container's
 * /etc/passwd by the job; an unknown name fails the upload).
 */
int container_archive_put(struct daemon *d, const char *handle, const char *path,
                          bool no_dir_nondir, bool copy_uid_gid, void (*room)(void *arg),
                          volume_stream_in_cb done, void *arg, struct volume_stream_in **out,
                          struct err *err);

#endif
