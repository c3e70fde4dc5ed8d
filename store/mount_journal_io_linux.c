/*
 * store/mount_journal_io.h on Linux: open(2), write(2), rename(2), and no
 * fsync. What an entry names on Linux (an overlay mount) dies with the
 * machine, so an entry needs to outlive a crash of the daemon, which the
 * page cache gives, not a power loss: after one, a missing entry names
 * nothing that is left, and an empty one (a rename that reached the disk
 * before the data) is removed at the replay. Each sync here was a wait
 * for the root disk in every container's create (two) and delete (one).
 * Blocking; any thread.
 */
#include "store/mount_journal_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/strv.h"

static char *
join(const char *dir, const char *name)
{
    return fs_path_join(dir, name);
}

int
mj_io_mkdir(const char *dir)
{
    struct err err = {0};
    return fs_mkdir_p(dir, 0700, &err) < 0 ? -err.code : 0;
}

int
mj_io_write_atomic(const char *dir, const char *tmp, const char *name, const void *data, size_t len)
{
    char *tp = join(dir, tmp), *np = join(dir, name);
    int r = 0;
    int fd = -1;
    if (!tp || !np)
        r = -ENOMEM;
    if (r == 0 && (fd = open(tp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0)
        r = -errno;
    for (size_t off = 0; r == 0 && off < len;) {
        ssize_t w = write(fd, (const char *)data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            r = -errno;
        else
            off += (size_t)w;
    }
    if (fd >= 0 && close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tp, np) < 0)
        r = -errno;
    if (r < 0 && fd >= 0)
        unlink(tp);
    free(tp);
    free(np);
    return r;
}

int
mj_io_read(const char *dir, const char *name, size_t max, char **out, size_t *len)
{
    char *p = join(dir, name);
    if (!p)
        return -ENOMEM;
    struct err err = {0};
    int r = fs_read_file(p, max, out, len, &err);
    free(p);
    return r < 0 ? -err.code : 0;
}

int
mj_io_remove(const char *dir, const char *name)
{
    char *p = join(dir, name);
    if (!p)
        return -ENOMEM;
    int r = unlink(p) < 0 ? -errno : 0;
    free(p);
    return r == -ENOENT ? 0 : r;
}

int
mj_io_rename(const char *dir, const char *from, const char *to)
{
    char *f = join(dir, from), *t = join(dir, to);
    int r = !f || !t ? -ENOMEM : rename(f, t) < 0 ? -errno : 0;
    free(f);
    free(t);
    return r;
}

int
mj_io_list(const char *dir, char ***names)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    char **v = calloc(1, sizeof(char *));
    size_t n = 0;
    struct dirent *e;
    int r = v ? 0 : -ENOMEM;
    while (r == 0) {
        errno = 0;
        if (!(e = readdir(d))) {
            r = errno ? -errno : 0;
            break;
        }
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            r = strv_push(&v, &n, e->d_name);
    }
    closedir(d);
    if (r < 0) {
        strv_free(v);
        return r;
    }
    *names = v;
    return 0;
}

unsigned long
mj_io_unique(void)
{
    static atomic_ulong seq;
    return ((unsigned long)getpid() << 20) ^ (atomic_fetch_add(&seq, 1) + 1);
}
