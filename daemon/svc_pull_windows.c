/*
 * Registry pulls on Windows: not built (store/pull.c and the registry
 * client need libcurl, which is not among the Windows dependencies; see
 * cmake/windows.cmake). A pull is refused with that reason; everything
 * else about images works as on Linux. Loop thread.
 */
#include "daemon/svc_pull.h"

#include <stdlib.h>

struct image_pulls {
    int unused;
};

int
image_pulls_new(struct daemon *d, struct image_pulls **out, struct err *err)
{
    (void)d;
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : err_set(err, ENOMEM, "registry pulls: out of memory");
}

void
image_pulls_shutdown(struct image_pulls *ps)
{
    (void)ps;
}

void
image_pulls_free(struct image_pulls *ps)
{
    free(ps);
}

int
pull_join(struct daemon *d, const struct image_source *o, image_loaded_cb done, void *arg,
          struct pull_waiter **out, struct err *err)
{
    (void)d;
    (void)done;
    (void)arg;
    *out = NULL;
    return err_set(err, ENOTSUP,
                   "pull %s: registry pulls are not built into berthd.exe yet (libcurl is not "
                   "among its dependencies); import the image as an upload or a layout",
                   o->registry ? o->registry : "");
}

void
pull_waiter_detach(struct pull_waiter *w)
{
    (void)w;
}
