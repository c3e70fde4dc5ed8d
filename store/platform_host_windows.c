/*
 * host_platform() and host_caps_detect() on Windows: os "windows", the
 * machine's architecture (GetNativeSystemInfo: amd64, arm64/v8, 386) and
 * os_version "major.minor.build.revision" from the kernel
 * (common/os.h). Isolation: process, as on Linux, until the hcs driver
 * says what HCS offers (hyperv where Hyper-V is there). Any thread.
 */
#include "store/platform.h"

#include <windows.h>

#include <stdio.h>
#include <string.h>

#include "common/os.h"

int
host_platform(struct oci_platform *out, struct err *err)
{
    SYSTEM_INFO si;
    GetNativeSystemInfo(&si);
    struct oci_platform p = {0};
    strcpy(p.os, "windows");
    switch (si.wProcessorArchitecture) {
    case PROCESSOR_ARCHITECTURE_AMD64:
        strcpy(p.architecture, "amd64");
        break;
    case PROCESSOR_ARCHITECTURE_ARM64:
        strcpy(p.architecture, "arm64");
        strcpy(p.variant, "v8");
        break;
    case PROCESSOR_ARCHITECTURE_INTEL:
        strcpy(p.architecture, "386");
        break;
    default:
        return err_set(err, ERR_UNAVAILABLE, "host platform: unknown processor architecture %u",
                       (unsigned)si.wProcessorArchitecture);
    }
    unsigned v[4];
    int r = os_windows_version(v, err);
    if (r < 0)
        return r;
    snprintf(p.os_version, sizeof(p.os_version), "%u.%u.%u.%u", v[0], v[1], v[2], v[3]);
    *out = p;
    return 0;
}

int
host_caps_detect(struct host_caps *out, struct err *err)
{
    struct host_caps caps = {0};
    int r = host_platform(&caps.platform, err);
    if (r < 0)
        return r;
    caps.isolations = ISOLATION_PROCESS;
    *out = caps;
    return 0;
}
