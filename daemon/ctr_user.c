/*
 * Users inside a container: "uid[:gid]", "name", "name:group" or
 * "uid:group" resolved against the image's /etc/passwd and /etc/group,
 * read inside the container's rootfs (rootdir_open_in_root: the image's
 * symlinks never lead to the host's files), and the user's
 * home directory for HOME. Pool threads (it reads the disk).
 */
#include "daemon/containers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/os.h"
#include "common/rootdir.h"

#define ENTRIES_MAX 100000

static int
parse_u32(const char *s, size_t len, uint32_t *out)
{
    if (len == 0 || len > 10)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > UINT32_MAX - 1)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* Opens etc/<name> of the rootfs as a regular file, or NULL. */
static FILE *
open_etc(int rfd, const char *name)
{
    char rel[32];
    snprintf(rel, sizeof(rel), "etc/%s", name);
    /* The container can replace the file with a FIFO, which must not
     * block this job (the open does not wait); only a regular file is read. */
    int fd = rootdir_open_in_root(rfd, rel);
    if (fd < 0)
        return NULL;
    struct os_stat st;
    FILE *f = rootdir_stat(fd, "", &st) == 0 && S_ISREG(st.st_mode) ? fdopen(fd, "r") : NULL;
    if (!f)
        close(fd);
    return f;
}

/*
 * Finds the entry whose field 0 is name (or, with by_id, whose field 2 is
 * id) in a passwd- or group-style file; copies fields 2, 3 and 5.
 */
struct etc_entry {
    uint32_t id, gid;
    char home[1024];
};

static bool
etc_find(FILE *f, const char *name, bool by_id, uint32_t id, struct etc_entry *out)
{
    char line[2048];
    size_t lines = 0;
    while (fgets(line, sizeof(line), f) && lines++ < ENTRIES_MAX) {
        line[strcspn(line, "\n")] = '\0';
        char *fields[7] = {0};
        char *p = line;
        for (int i = 0; i < 7 && p; i++) {
            fields[i] = p;
            p = strchr(p, ':');
            if (p)
                *p++ = '\0';
        }
        uint32_t eid, egid = 0;
        if (!fields[0] || !fields[2] || parse_u32(fields[2], strlen(fields[2]), &eid) < 0)
            continue;
        if (fields[3])
            parse_u32(fields[3], strlen(fields[3]), &egid);
        if (by_id ? eid != id : strcmp(fields[0], name) != 0)
            continue;
        out->id = eid;
        out->gid = egid;
        snprintf(out->home, sizeof(out->home), "%s", fields[5] ? fields[5] : "");
        return true;
    }
    return false;
}

int
containers_resolve_user(const char *dir, const char *user, uint32_t *uid, uint32_t *gid,
                        char **home, struct err *err)
{
    *home = NULL;
    const char *colon = strchr(user, ':');
    size_t ulen = colon ? (size_t)(colon - user) : strlen(user);
    const char *group = colon ? colon + 1 : NULL;
    if (ulen == 0 || (group && !*group) || (group && strchr(group, ':')))
        return err_set(err, EINVAL, "field \"user\": %s: expected uid[:gid] or a name", user);
    cleanup_free char *uname = strndup(user, ulen);
    cleanup_free char *root = fs_path_join(dir, "rootfs");
    if (!uname || !root)
        return err_set(err, ENOMEM, "user %s: out of memory", user);
    cleanup_close int rfd = rootdir_open(root);
    /* No rootfs directory: the driver keeps the container's files itself
     * (hcs: layer folders and a scratch volume), so there is no /etc/passwd
     * to read and only a numeric user resolves. */
    if (rfd < 0 && rfd != -ENOENT)
        return err_errno(err, -rfd, "user %s: open the container's rootfs", user);

    bool numeric = parse_u32(uname, ulen, uid) == 0;
    struct etc_entry pw = {0};
    cleanup_fclose FILE *passwd = rfd >= 0 ? open_etc(rfd, "passwd") : NULL;
    bool found = passwd && etc_find(passwd, uname, numeric, numeric ? *uid : 0, &pw);
    if (!numeric && !passwd)
        return err_set(err, ERR_INVALID_CONTENT, "user %s: the image has no /etc/passwd", user);
    if (!numeric && !found)
        return err_set(err, ERR_INVALID_CONTENT, "user %s: not in the image's /etc/passwd", user);
    if (found) {
        *uid = pw.id;
        *gid = pw.gid;
        if (pw.home[0] && !(*home = strdup(pw.home)))
            return err_set(err, ENOMEM, "user %s: out of memory", user);
    } else {
        *gid = 0; /* a bare uid without an entry: group 0, as Docker does */
    }
    if (!group)
        return 0;
    if (parse_u32(group, strlen(group), gid) == 0)
        return 0;
    cleanup_fclose FILE *groups = rfd >= 0 ? open_etc(rfd, "group") : NULL;
    struct etc_entry gr = {0};
    if (!groups || !etc_find(groups, group, false, 0, &gr)) {
        free(*home);
        *home = NULL;
        return err_set(err, ERR_INVALID_CONTENT,
                       "user %s: group %s is not in the image's /etc/group", user, group);
    }
    *gid = gr.id;
    return 0;
}
