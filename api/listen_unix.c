/* Listening unix sockets (api/listen_unix.h). Start-up and shutdown, on the loop thread. */
#include "api/listen_unix.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"

#define LISTEN_BACKLOG 128

/* Whether a daemon answers on the socket at path. */
static bool
someone_listens(const struct sockaddr_un *sa)
{
    cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    return connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 || errno == EAGAIN;
}

/* The directory of path, made 0755 when missing. */
static int
make_parent(const char *path, struct err *err)
{
    char dir[sizeof(((struct listen_unix *)0)->path)];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    struct stat st;
    if (stat(dir, &st) == 0)
        return S_ISDIR(st.st_mode) ? 0
                                   : err_set(err, ENOTDIR,
                                             "socket directory %s: not a "
                                             "directory",
                                             dir);
    return fs_mkdir_p(dir, 0755, err);
}

int
listen_unix_open(const char *path, const char *group, struct listen_unix *out, struct err *err)
{
    memset(out, 0, sizeof(*out));
    out->fd = -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path) || path[0] != '/')
        return err_set(err, EINVAL, "socket %s: not an absolute path under 108 bytes", path);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    snprintf(out->path, sizeof(out->path), "%s", path);
    int ret = make_parent(path, err);
    if (ret < 0)
        return ret;
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return err_set(err, EEXIST, "socket %s: something that is not a socket is there", path);
        if (someone_listens(&sa))
            return err_set(err, EADDRINUSE, "socket %s: another daemon serves it", path);
        /* A daemon that died left it: nobody answers on it any more. */
        if (unlink(path) < 0 && errno != ENOENT)
            return err_errno(err, errno, "socket %s: remove the stale one", path);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return err_errno(err, errno, "socket %s", path);
    /* Created 0600 (by the umask) and opened up once its owner is right. */
    mode_t old = umask(0177);
    int rc = bind(fd, (const struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (rc < 0) {
        ret = err_errno(err, errno, "socket %s: bind", path);
        close(fd);
        return ret;
    }
    struct group *gr = group ? getgrnam(group) : NULL;
    gid_t gid = gr ? gr->gr_gid : getegid();
    if ((geteuid() == 0 && chown(path, 0, gid) < 0) || chmod(path, 0660) < 0 ||
        listen(fd, LISTEN_BACKLOG) < 0 || lstat(path, &st) < 0) {
        ret = err_errno(err, errno, "socket %s: set up", path);
        close(fd);
        unlink(path);
        return ret;
    }
    out->fd = fd;
    out->dev = st.st_dev;
    out->ino = st.st_ino;
    out->group = gr ? group : NULL;
    return 0;
}

void
listen_unix_remove(const struct listen_unix *l)
{
    struct stat st;
    if (l->path[0] && lstat(l->path, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
        unlink(l->path);
}
