/*
 * daemon/layer_format.h on Windows: the host's build from the kernel
 * (common/os.h) and cimfs.dll loaded (store/cimfs_api.h, the
 * process's one copy, which the CimFS mounts use later) decide
 * --layer-format auto; an explicit cimfs where either is missing stops
 * the start, as an explicit blockcim does below build 27766 or without
 * cimfs.dll's block exports (store/cimfs_api.h: cimfs_api_block). Test builds take the build from
 * BERTH_TEST_WINDOWS_BUILD
 * ("26100.1"), since Wine reports a Windows 10 build. Main, before the
 * loop.
 */
#include "daemon/layer_format.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/os.h"
#include "store/cimfs_api.h"

int
layer_format_resolve(struct config *cfg, struct err *err)
{
    unsigned v[4] = {0};
    int r = os_windows_version(v, err);
    if (r < 0)
        return err_wrap(err, "--layer-format");
#ifdef BERTH_TEST_HOOKS
    const char *fake = getenv("BERTH_TEST_WINDOWS_BUILD");
    if (fake && *fake && sscanf(fake, "%u.%u", &v[2], &v[3]) != 2)
        return err_set(err, EINVAL, "BERTH_TEST_WINDOWS_BUILD %s: expected BUILD.REVISION", fake);
#endif
    struct cimfs_api *api = NULL;
    struct err dll = {0};
    bool loaded = cfg->layer_format != LAYER_FORMAT_WCIFS && cimfs_api_default(&api, &dll) == 0;
    /* blockcim needs the block exports too, which an older cimfs.dll lacks. */
    if (loaded && cfg->layer_format == LAYER_FORMAT_BLOCKCIM)
        loaded = cimfs_api_block(api, &dll) == 0;
    enum layer_format f;
    if ((r = layer_format_choose(cfg->layer_format, v[2], v[3], loaded, dll.msg, &f, err)) < 0)
        return r;
    cfg->layer_format_used = layer_format_name(f);
    if (cfg->layer_format == LAYER_FORMAT_AUTO)
        log_info("layer format %s (--layer-format auto on build %u.%u%s%s)", cfg->layer_format_used,
                 v[2], v[3], loaded ? "" : "; ", loaded ? "" : dll.msg);
    return 0;
}
