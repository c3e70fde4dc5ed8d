/*
 * What this host is: host_platform() and host_caps_detect(), declared in
 * store/platform.h. The one part of the platform code that asks the
 * system (uname(2)), kept apart from the pure matching in platform.c so
 * that a Windows build can bring its own (the OS build number, the
 * isolation modes HCS offers) beside this one. Any thread.
 */
#include "store/platform.h"

#include <errno.h>
#include <string.h>
#include <sys/utsname.h>

/* uname(2) machine names and the GOARCH architecture and variant they run. */
struct machine_map {
    const char *machine;
    const char *arch;
    const char *variant;
};

static const struct machine_map machines[] = {
    {"x86_64", "amd64", ""},
    {"aarch64", "arm64", "v8"},
    {"arm64", "arm64", "v8"},
    {"armv8l", "arm", "v7"},
    {"armv7l", "arm", "v7"},
    {"armv6l", "arm", "v6"},
    {"armv5tel", "arm", "v5"},
    {"i386", "386", ""},
    {"i486", "386", ""},
    {"i586", "386", ""},
    {"i686", "386", ""},
    {"ppc64le", "ppc64le", ""},
    {"ppc64", "ppc64", ""},
    {"s390x", "s390x", ""},
    {"riscv64", "riscv64", ""},
    {"mips64", "mips64", ""},
    {"loongarch64", "loong64", ""},
};

int
host_platform(struct oci_platform *out, struct err *err)
{
    struct utsname u;
    if (uname(&u) < 0)
        return err_errno(err, errno, "uname");
    for (size_t i = 0; i < sizeof(machines) / sizeof(machines[0]); i++) {
        if (strcmp(u.machine, machines[i].machine) == 0) {
            struct oci_platform p = {0};
            strcpy(p.os, "linux");
            strcpy(p.architecture, machines[i].arch);
            strcpy(p.variant, machines[i].variant);
            *out = p;
            return 0;
        }
    }
    return err_set(err, ERR_UNAVAILABLE, "host platform: unknown machine \"%.64s\"", u.machine);
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
