/*
 * The oci driver's name on Windows, where there is no runc and no Linux
 * namespaces: opening it says so, so --runtime oci is refused with a
 * reason (health and the container routes report it) instead of a
 * missing symbol.
 */
#include "runtime/driver.h"

#include <errno.h>

static int
oci_open(const struct rt_config *cfg, void **ctx, struct err *err)
{
    (void)cfg;
    (void)ctx;
    return err_set(err, ERR_UNAVAILABLE,
                   "runtime oci: runc and Linux namespaces, Linux only; on Windows use --runtime "
                   "hcs");
}

const struct rt_driver rt_oci_driver = {.name = "oci", .open = oci_open};
