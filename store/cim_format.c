/*
 * The --layer-format rule (cim_format.h). Pure; any thread.
 */
#include "store/cim_format.h"

#include <errno.h>
#include <string.h>

int
layer_format_parse(const char *s, enum layer_format *out)
{
    static const enum layer_format all[] = {LAYER_FORMAT_AUTO, LAYER_FORMAT_WCIFS,
                                            LAYER_FORMAT_CIMFS, LAYER_FORMAT_BLOCKCIM};
    for (size_t i = 0; s && i < sizeof(all) / sizeof(all[0]); i++)
        if (strcmp(s, layer_format_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    return -EINVAL;
}

const char *
layer_format_name(enum layer_format f)
{
    switch (f) {
    case LAYER_FORMAT_WCIFS:
        return "wcifs";
    case LAYER_FORMAT_CIMFS:
        return "cimfs";
    case LAYER_FORMAT_BLOCKCIM:
        return "blockcim";
    case LAYER_FORMAT_AUTO:
        break;
    }
    return "auto";
}

bool
cim_host_supported(unsigned build, unsigned revision)
{
    return build >= CIM_BUILD_MIN ||
           (build == CIM_BUILD_LTSC2022 && revision >= CIM_LTSC2022_REVISION);
}

bool
cim_block_host_supported(unsigned build)
{
    return build >= CIM_BLOCK_BUILD_MIN;
}

int
layer_format_choose(enum layer_format requested, unsigned build, unsigned revision, bool dll_loaded,
                    const char *dll_why, enum layer_format *out, struct err *err)
{
    bool host = cim_host_supported(build, revision);
    switch (requested) {
    case LAYER_FORMAT_WCIFS:
        *out = LAYER_FORMAT_WCIFS;
        return 0;
    case LAYER_FORMAT_AUTO:
        *out = host && dll_loaded ? LAYER_FORMAT_CIMFS : LAYER_FORMAT_WCIFS;
        return 0;
    case LAYER_FORMAT_CIMFS:
        if (!host)
            return err_set(err, ERR_UNAVAILABLE,
                           "--layer-format cimfs: Windows build %u.%u has no CimFS for "
                           "containers (it needs build %u or later, or %u from revision %u on); "
                           "use wcifs or auto",
                           build, revision, CIM_BUILD_MIN, CIM_BUILD_LTSC2022,
                           CIM_LTSC2022_REVISION);
        if (!dll_loaded)
            return err_set(err, ERR_UNAVAILABLE, "--layer-format cimfs: %s",
                           dll_why && *dll_why ? dll_why : "cimfs.dll cannot be loaded");
        *out = LAYER_FORMAT_CIMFS;
        return 0;
    case LAYER_FORMAT_BLOCKCIM:
        if (!cim_block_host_supported(build))
            return err_set(err, ERR_UNAVAILABLE,
                           "--layer-format blockcim: Windows build %u.%u has no block or merged "
                           "CIMs (hcsshim's gate is build %u or later); use cimfs, wcifs or auto",
                           build, revision, CIM_BLOCK_BUILD_MIN);
        if (!dll_loaded)
            return err_set(err, ERR_UNAVAILABLE, "--layer-format blockcim: %s",
                           dll_why && *dll_why ? dll_why : "cimfs.dll cannot be loaded");
        *out = LAYER_FORMAT_BLOCKCIM;
        return 0;
    }
    return err_set(err, EINVAL, "--layer-format: unknown format %d", (int)requested);
}
