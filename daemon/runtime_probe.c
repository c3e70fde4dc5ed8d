/* Runtime usability probe, run on the monitor thread. */
#include "daemon/runtime_probe.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/driver.h"

extern char **environ;

struct runtime_probe {
    char *runtime;
    char *oci_runtime;
    const struct rt_driver *drv; /* when set, its probe decides */
    void *drv_ctx;
};

void
runtime_probe_set_driver(struct runtime_probe *p, const struct rt_driver *drv, void *ctx)
{
    if (!p)
        return;
    p->drv = drv;
    p->drv_ctx = ctx;
}

struct runtime_probe *
runtime_probe_new(const struct config *cfg)
{
    struct runtime_probe *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->runtime = strdup(cfg->runtime);
    p->oci_runtime = strdup(cfg->oci_runtime ? cfg->oci_runtime : "runc");
    return p;
}

void
runtime_probe_free(struct runtime_probe *p)
{
    if (!p)
        return;
    free(p->runtime);
    free(p->oci_runtime);
    free(p);
}

char *
runtime_find_binary(const char *name)
{
    if (strchr(name, '/'))
        return access(name, X_OK) == 0 ? strdup(name) : NULL;
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    char *copy = strdup(path);
    if (!copy)
        return NULL;
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        char *cand = NULL;
        if (asprintf(&cand, "%s/%s", dir, name) < 0)
            continue;
        if (access(cand, X_OK) == 0) {
            free(copy);
            return cand;
        }
        free(cand);
    }
    free(copy);
    return NULL;
}

int
runtime_probe_run(void *probe, struct err *err)
{
    struct runtime_probe *p = probe;
    if (!p)
        return err_set(err, ENOMEM, "runtime probe: out of memory");
    if (strcmp(p->runtime, "host") == 0)
        return 0;
    if (p->drv && p->drv->probe)
        return p->drv->probe(p->drv_ctx, err);
    if (strcmp(p->runtime, "hcs") == 0)
        return err_set(err, ENOTSUP,
                       "runtime hcs: the Host Compute Service exists only on Windows; use "
                       "--runtime oci on Linux");
    char *bin = runtime_find_binary(p->oci_runtime);
    if (!bin)
        return err_set(err, ENOENT,
                       "runtime oci: OCI runtime %s not found (install runc, or "
                       "point --oci-runtime at one)",
                       p->oci_runtime);
    char *argv[] = {bin, "--version", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        err_errno(err, rc, "runtime oci: run %s --version", bin);
        free(bin);
        return -rc;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        err_set(err, EIO, "runtime oci: %s --version failed (status %d)", bin, status);
        free(bin);
        return -EIO;
    }
    free(bin);
    return 0;
}
