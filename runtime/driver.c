/* The driver registry and helpers shared by every driver. Any thread. */
#include "runtime/driver.h"

#include <string.h>

#include "common/os.h"

extern const struct rt_driver rt_oci_driver;

const struct rt_driver *
rt_driver_lookup(const char *name, struct err *err)
{
    if (!name || strcmp(name, "oci") == 0)
        return &rt_oci_driver;
    if (strcmp(name, "hcs") == 0) {
        /* Where HCS itself is missing (Wine has none), that is the reason,
         * and it outlasts the driver's arrival (the next issue). */
        int r = os_library_probe("computecore.dll", err);
        if (r == -ENOTSUP)
            err_set(err, ERR_UNAVAILABLE,
                    "runtime hcs: only available on Windows (Host Compute Service)");
        else if (r < 0)
            err->code = ERR_UNAVAILABLE;
        else
            err_set(err, ERR_UNAVAILABLE,
                    "runtime hcs: computecore.dll is here, but this berthd has no hcs driver yet");
        return NULL;
    }
    if (strcmp(name, "host") == 0) {
        err_set(err, ERR_UNAVAILABLE,
                "runtime host: not available in this build (no host "
                "driver yet)");
        return NULL;
    }
    err_set(err, EINVAL, "runtime %s: unknown (choose oci)", name);
    return NULL;
}

static bool
name_valid(const char *id, size_t max)
{
    if (!id)
        return false;
    size_t n = strlen(id);
    if (n == 0 || n > max || id[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

bool
rt_id_valid(const char *id)
{
    return name_valid(id, 64);
}

bool
rt_handle_valid(const char *handle)
{
    return name_valid(handle, 128);
}
