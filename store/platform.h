/*
 * Platforms: what an image was built for (os, architecture, variant,
 * os.version), what this host is, and the one check that decides whether
 * an image can run here and under which isolation.
 *
 * Everything here is pure computation on caller-owned structs (only
 * host_platform() and host_caps_detect(), in platform_host.c, ask the
 * kernel), so it is safe from any thread and platform_check() can be
 * tested with made-up hosts.
 */
#ifndef BERTH_STORE_PLATFORM_H
#define BERTH_STORE_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

#define OCI_PLATFORM_NAME_MAX 32
#define OCI_PLATFORM_VERSION_MAX 64

/*
 * A platform as the OCI image spec writes it, in GOOS/GOARCH names
 * ("linux", "amd64", "arm64" + "v8"). Fixed-size fields, so the struct is
 * copied by value into jobs and needs no free. Empty strings mean absent.
 * os.features and features are not kept: nothing here decides on them.
 */
struct oci_platform {
    char os[OCI_PLATFORM_NAME_MAX];
    char architecture[OCI_PLATFORM_NAME_MAX];
    char variant[OCI_PLATFORM_NAME_MAX];
    /* Windows: "10.0.20348.2655"; the third component is the build. */
    char os_version[OCI_PLATFORM_VERSION_MAX];
};

/*
 * Isolation modes are bits, so a host lists the modes it offers as a
 * mask. ISOLATION_ANY asks "could any mode this host offers run it?".
 */
enum isolation_mode {
    ISOLATION_PROCESS = 1 << 0, /* shares the host kernel (namespaces, Windows silos) */
    ISOLATION_HYPERV = 1 << 1,  /* a utility VM per container, running the image's kernel */
    ISOLATION_ANY = ISOLATION_PROCESS | ISOLATION_HYPERV,
};

/* What a host can run: its own platform and the isolation modes it offers. */
struct host_caps {
    struct oci_platform platform;
    unsigned isolations; /* mask of enum isolation_mode bits */
};

/* The outcome of platform_check(). */
enum platform_verdict {
    PLATFORM_REFUSED = 0,  /* cannot run here; err says why */
    PLATFORM_RUNS_PROCESS, /* runs under process isolation */
    PLATFORM_RUNS_HYPERV,  /* runs under hyperv isolation (only, when ISOLATION_ANY was asked) */
};

/*
 * Parses "os/arch[/variant]" as the API's ?platform= carries it, e.g.
 * "linux/arm64/v8". Components are lowercase [a-z0-9._-]; common aliases
 * are normalised (x86_64 -> amd64, aarch64 -> arm64, i386/i686 -> 386,
 * armhf -> arm/v7, armel -> arm/v6) and defaults filled in as
 * oci_platform_normalize() does. Bad input fails with EINVAL (a 400).
 */
int oci_platform_parse(const char *s, struct oci_platform *out, struct err *err);

/*
 * Fills in the defaults that make two spellings of one platform compare
 * equal: arm64 without variant is arm64/v8, arm without variant is
 * arm/v7, amd64/v1 is plain amd64.
 */
void oci_platform_normalize(struct oci_platform *p);

/*
 * True when an image for have would be picked for want: same os and
 * architecture, and the same variant once both are normalised. os_version
 * is not compared (platform_check() decides on Windows builds).
 */
bool oci_platform_match(const struct oci_platform *want, const struct oci_platform *have);

/*
 * Writes "os/arch[/variant][ os.version]" into buf (always NUL-terminated,
 * truncated to size), bytes outside printable ASCII and backslashes as
 * \xNN: it is for messages, and platforms come from hostile documents.
 * Returns buf, so it can be used inside a printf.
 */
char *oci_platform_format(const struct oci_platform *p, char *buf, size_t size);

/*
 * The platform of this host in GOARCH names, from uname(2): x86_64 ->
 * amd64, aarch64 -> arm64/v8, armv7l -> arm/v7, armv6l -> arm/v6, i686 ->
 * 386, ppc64le, s390x, riscv64; os "linux". An unknown machine fails with
 * ERR_UNAVAILABLE. (On Windows the hcs driver reads the OS build and
 * fills host_caps with host_caps_windows().)
 */
int host_platform(struct oci_platform *out, struct err *err);

/* host_platform() plus the isolation modes offered: on Linux, process only. */
int host_caps_detect(struct host_caps *out, struct err *err);

/*
 * Compares two Windows os.version strings ("10.0.20348[.2655]") by major,
 * minor and build, ignoring the revision: *cmp < 0, 0 or > 0 as a is older
 * than, the same build as, or newer than b. False (and *cmp untouched)
 * when either is not a Windows version.
 */
bool windows_version_compare(const char *a, const char *b, int *cmp);

/*
 * The host_caps of a Windows host, from what the hcs driver reads of it:
 * the version numbers (RtlGetNtVersionNumbers: 10, 0, 20348, 2655), its
 * GOARCH architecture, and the isolation modes its detection found
 * usable. os_version becomes "10.0.20348.2655". EINVAL for a bad
 * architecture, a build of 0 or an isolation mask that is not a set of
 * modes.
 */
int host_caps_windows(const char *architecture, unsigned major, unsigned minor, unsigned build,
                      unsigned revision, unsigned isolations, struct host_caps *out,
                      struct err *err);

/* Parses "process" or "hyperv" (EINVAL otherwise). */
int isolation_mode_parse(const char *s, enum isolation_mode *out, struct err *err);

/* "process", "hyperv" or "any"; a static string. */
const char *isolation_mode_name(enum isolation_mode mode);

/*
 * Decides whether an image built for image can run on host under
 * isolation (one mode, at container create) or under any mode the host
 * offers (ISOLATION_ANY, at import). The rules:
 *
 * - os and architecture must be equal, and the variants equal after
 *   normalisation. Strict on purpose: an amd64 host does not take 386
 *   images, an arm/v7 host does not take arm/v6 images.
 * - Windows images need a build (the third component of os.version), and
 *   major and minor must be the host's. Process isolation shares the host
 *   kernel: before build 20348 it runs the host's build only; from 20348
 *   on, builds from the newest stable LTSC build older than the host
 *   (20348 at least) up to the host's own (Server 2022 runs 20348 only,
 *   Server 2025 runs 20348 to 26100). Hyperv isolation boots the image's
 *   kernel in a VM and runs the host's build or older ones, never newer.
 * - At ISOLATION_ANY, process is preferred; an image only hyperv can run
 *   is accepted when the host offers hyperv.
 *
 * Returns the isolation the image runs under, or PLATFORM_REFUSED with
 * err set to ERR_INVALID_CONTENT ("image is windows/amd64 10.0.17763; this
 * host runs linux/amd64 with process isolation"). A host os_version that
 * is not a Windows version, or an isolation value outside the enum, is a
 * caller bug: EINVAL.
 */
enum platform_verdict platform_check(const struct oci_platform *image, const struct host_caps *host,
                                     enum isolation_mode isolation, struct err *err);

#endif
