/* Runtime usability probe, run on the monitor thread. */
#include "daemon/runtime_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/os.h"
#include "runtime/driver.h"

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
    return os_find_program(name);
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
    if (strcmp(p->runtime, "hcs") == 0) {
        /* No driver: the lookup's reason ("computecore.dll not found"),
         * which the container routes answer with too. */
        if (!rt_driver_lookup(p->runtime, err))
            return -err->code;
        return 0;
    }
    char *bin = runtime_find_binary(p->oci_runtime);
    if (!bin)
        return err_set(err, ENOENT,
                       "runtime oci: OCI runtime %s not found (install runc, or "
                       "point --oci-runtime at one)",
                       p->oci_runtime);
    char *argv[] = {bin, "--version", NULL};
    int status = 0;
    int rc = os_run_quiet(argv, &status, err);
    if (rc < 0) {
        err_wrap(err, "runtime oci");
        free(bin);
        return rc;
    }
    if (status != 0) {
        err_set(err, EIO, "runtime oci: %s --version failed (exit status %d)", bin, status);
        free(bin);
        return -EIO;
    }
    free(bin);
    return 0;
}
