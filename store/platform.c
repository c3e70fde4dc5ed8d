/*
 * Platforms and the platform check. Pure functions on caller-owned
 * structs, any thread; nothing here touches the system (what the host is
 * comes from platform_host.c, or from the hcs driver on Windows).
 *
 * The Windows rules are Microsoft's version compatibility matrix as
 * containerd's platform matcher applies it
 * (../shared/research/windows-hcs.md section 4), and what the Windows
 * containerd runtime for Concourse found on real hosts
 * (seeds/windows-containerd-runtime-pr.txt):
 *
 * - process isolation shares the host kernel. Before Windows Server 2022
 *   (build 20348) the image must be the host's build exactly; from 20348
 *   on, builds keep a stable ABI back to the previous LTSC release, so a
 *   host runs images from the latest LTSC build older than itself (but
 *   never below 20348) up to its own: Server 2022 runs 20348 only, Server
 *   2025 (26100) runs 20348 to 26100, Windows 11 (22621) runs 20348 to
 *   22621. The seed saw ltsc2019 and ltsc2025 images refused on a Server
 *   2022 host ("snapshotter windows does not support platform").
 * - hyperv isolation boots the image's own kernel in a utility VM: the
 *   host's build or older ones (a Server 2022 host ran an ltsc2019 image
 *   that way), never newer. The seed saw an ltsc2025 image start under
 *   hyperv on Server 2022 too, but the matrix documents no newer image
 *   under hyperv and its author advises not to rely on it; neither do we.
 */
#include "store/platform.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies src into a fixed field; false when it does not fit. */
static bool
field_set(char *dst, size_t size, const char *src, size_t len)
{
    if (len >= size)
        return false;
    memcpy(dst, src, len);
    dst[len] = '\0';
    return true;
}

void
oci_platform_normalize(struct oci_platform *p)
{
    if (strcmp(p->architecture, "arm64") == 0 && p->variant[0] == '\0')
        strcpy(p->variant, "v8");
    else if (strcmp(p->architecture, "arm") == 0 && p->variant[0] == '\0')
        strcpy(p->variant, "v7");
    else if (strcmp(p->architecture, "amd64") == 0 && strcmp(p->variant, "v1") == 0)
        p->variant[0] = '\0';
}

bool
oci_platform_match(const struct oci_platform *want, const struct oci_platform *have)
{
    struct oci_platform w = *want;
    struct oci_platform h = *have;
    oci_platform_normalize(&w);
    oci_platform_normalize(&h);
    return strcmp(w.os, h.os) == 0 && strcmp(w.architecture, h.architecture) == 0 &&
           strcmp(w.variant, h.variant) == 0;
}

/* Appends s at *o, bytes outside printable ASCII and backslashes as \xNN,
 * never past size - 1: platforms come from hostile documents and end up
 * in messages. */
static void
format_part(char *buf, size_t size, size_t *o, const char *s)
{
    for (; *s && *o + 1 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            buf[(*o)++] = (char)c;
        } else {
            if (*o + 5 > size)
                break;
            *o += (size_t)snprintf(buf + *o, size - *o, "\\x%02x", c);
        }
    }
    buf[*o] = '\0';
}

char *
oci_platform_format(const struct oci_platform *p, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    size_t o = 0;
    buf[0] = '\0';
    format_part(buf, size, &o, p->os[0] ? p->os : "unknown");
    format_part(buf, size, &o, "/");
    format_part(buf, size, &o, p->architecture[0] ? p->architecture : "unknown");
    if (p->variant[0]) {
        format_part(buf, size, &o, "/");
        format_part(buf, size, &o, p->variant);
    }
    if (p->os_version[0]) {
        format_part(buf, size, &o, " ");
        format_part(buf, size, &o, p->os_version);
    }
    return buf;
}

/* One component of "os/arch/variant": lowercase letters, digits, '.', '_', '-'. */
static bool
component_valid(const char *s, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(islower(c) || isdigit(c) || c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

struct arch_alias {
    const char *name;
    const char *arch;
    const char *variant; /* NULL: keep what the input said */
};

/* Spellings that uname, Debian and Docker users write for GOARCH names. */
static const struct arch_alias arch_aliases[] = {
    {"x86_64", "amd64", NULL}, {"x86-64", "amd64", NULL}, {"aarch64", "arm64", NULL},
    {"i386", "386", NULL},     {"i686", "386", NULL},     {"armhf", "arm", "v7"},
    {"armel", "arm", "v6"},
};

int
oci_platform_parse(const char *s, struct oci_platform *out, struct err *err)
{
    struct oci_platform p = {0};
    const char *parts[3] = {0};
    size_t lens[3] = {0};
    size_t n = 0;

    if (!s || !*s)
        return err_set(err, EINVAL, "platform is empty, want os/arch[/variant]");
    for (const char *c = s;;) {
        const char *slash = strchr(c, '/');
        size_t len = slash ? (size_t)(slash - c) : strlen(c);
        if (n == 3)
            return err_set(err, EINVAL, "platform \"%.64s\" has more than three components", s);
        if (!component_valid(c, len))
            return err_set(err, EINVAL,
                           "platform \"%.64s\": component %zu is empty or not [a-z0-9._-], "
                           "want os/arch[/variant]",
                           s, n + 1);
        parts[n] = c;
        lens[n] = len;
        n++;
        if (!slash)
            break;
        c = slash + 1;
    }
    if (n < 2)
        return err_set(err, EINVAL,
                       "platform \"%.64s\" has no architecture, want os/arch[/variant]", s);
    if (!field_set(p.os, sizeof(p.os), parts[0], lens[0]) ||
        !field_set(p.architecture, sizeof(p.architecture), parts[1], lens[1]) ||
        (n == 3 && !field_set(p.variant, sizeof(p.variant), parts[2], lens[2])))
        return err_set(err, EINVAL, "platform \"%.64s\": a component is longer than %d bytes", s,
                       OCI_PLATFORM_NAME_MAX - 1);
    for (size_t i = 0; i < sizeof(arch_aliases) / sizeof(arch_aliases[0]); i++) {
        const struct arch_alias *a = &arch_aliases[i];
        if (strcmp(p.architecture, a->name) == 0) {
            strcpy(p.architecture, a->arch);
            if (a->variant && p.variant[0] == '\0')
                strcpy(p.variant, a->variant);
            break;
        }
    }
    oci_platform_normalize(&p);
    *out = p;
    return 0;
}

int
host_caps_windows(const char *architecture, unsigned major, unsigned minor, unsigned build,
                  unsigned revision, unsigned isolations, struct host_caps *out, struct err *err)
{
    if (!architecture || !component_valid(architecture, strlen(architecture)) ||
        strlen(architecture) >= OCI_PLATFORM_NAME_MAX)
        return err_set(err, EINVAL, "windows host: architecture \"%.32s\" is not valid",
                       architecture ? architecture : "");
    if ((isolations & ISOLATION_ANY) == 0 || (isolations & ~(unsigned)ISOLATION_ANY))
        return err_set(err, EINVAL, "windows host: isolation mask %#x is not a set of modes",
                       isolations);
    if (build == 0)
        return err_set(err, EINVAL, "windows host: build 0");
    struct host_caps c = {{{0}}};
    strcpy(c.platform.os, "windows");
    strcpy(c.platform.architecture, architecture);
    snprintf(c.platform.os_version, sizeof(c.platform.os_version), "%u.%u.%u.%u", major, minor,
             build, revision);
    oci_platform_normalize(&c.platform);
    c.isolations = isolations;
    *out = c;
    return 0;
}

int
isolation_mode_parse(const char *s, enum isolation_mode *out, struct err *err)
{
    if (s && strcmp(s, "process") == 0)
        *out = ISOLATION_PROCESS;
    else if (s && strcmp(s, "hyperv") == 0)
        *out = ISOLATION_HYPERV;
    else
        return err_set(err, EINVAL, "isolation \"%.32s\": want process or hyperv", s ? s : "");
    return 0;
}

const char *
isolation_mode_name(enum isolation_mode mode)
{
    switch (mode) {
    case ISOLATION_PROCESS:
        return "process";
    case ISOLATION_HYPERV:
        return "hyperv";
    case ISOLATION_ANY:
        return "any";
    }
    return "unknown";
}

/*
 * The version triple of a Windows os.version, "10.0.20348[.2655]": major,
 * minor and build. The revision (fourth component) is a monthly patch
 * level and never decides compatibility.
 */
struct win_build {
    unsigned long part[3];
};

static bool
win_build_parse(const char *s, struct win_build *out)
{
    const char *c = s;
    for (int i = 0; i < 3; i++) {
        if (!isdigit((unsigned char)*c))
            return false;
        char *end;
        errno = 0;
        unsigned long v = strtoul(c, &end, 10);
        if (errno || end - c > 9)
            return false;
        out->part[i] = v;
        c = end;
        if (i < 2) {
            if (*c != '.')
                return false;
            c++;
        }
    }
    if (*c == '\0')
        return true;
    if (*c != '.' || !isdigit((unsigned char)c[1]))
        return false;
    for (c++; *c; c++)
        if (!isdigit((unsigned char)*c))
            return false;
    return true;
}

/* <0, 0, >0 as a is older than, the same build as, or newer than b. */
static int
win_build_cmp(const struct win_build *a, const struct win_build *b)
{
    for (int i = 0; i < 3; i++) {
        if (a->part[i] != b->part[i])
            return a->part[i] < b->part[i] ? -1 : 1;
    }
    return 0;
}

bool
windows_version_compare(const char *a, const char *b, int *cmp)
{
    struct win_build wa;
    struct win_build wb;
    if (!win_build_parse(a, &wa) || !win_build_parse(b, &wb))
        return false;
    *cmp = win_build_cmp(&wa, &wb);
    return true;
}

/* Windows Server 2022: from this build on, containers keep a stable ABI. */
#define WIN_BUILD_LTSC2022 20348ul

/* The LTSC builds with that ABI, ascending: Server 2022 and Server 2025. */
static const unsigned long win_stable_ltsc[] = {WIN_BUILD_LTSC2022, 26100ul};

/*
 * The oldest image build a host of build hb runs under process isolation:
 * its own before Server 2022; else the newest stable LTSC build strictly
 * older than the host, or 20348 itself.
 */
static unsigned long
win_process_floor(const struct win_build *hb)
{
    unsigned long host = hb->part[2];
    if (host < WIN_BUILD_LTSC2022)
        return host;
    unsigned long floor = WIN_BUILD_LTSC2022;
    for (size_t i = sizeof(win_stable_ltsc) / sizeof(win_stable_ltsc[0]); i-- > 0;) {
        if (host > win_stable_ltsc[i]) {
            floor = win_stable_ltsc[i];
            break;
        }
    }
    return floor;
}

/* Can a host of build hb run an image of build ib under process isolation? */
static bool
win_process_compatible(const struct win_build *hb, const struct win_build *ib)
{
    if (ib->part[0] != hb->part[0] || ib->part[1] != hb->part[1])
        return false;
    return ib->part[2] >= win_process_floor(hb) && ib->part[2] <= hb->part[2];
}

/*
 * "windows/amd64 10.0.26100 with process isolation (builds 20348 to
 * 26100) and hyperv isolation (build 26100 or older)": what the host runs,
 * for the refusal message.
 */
static void
host_describe(const struct host_caps *host, bool windows, const struct win_build *hb, char *buf,
              size_t size)
{
    char plat[160];
    char proc[48] = "";
    char hyperv[48] = "";
    oci_platform_format(&host->platform, plat, sizeof(plat));
    if (windows) {
        unsigned long floor = win_process_floor(hb);
        if (floor == hb->part[2])
            snprintf(proc, sizeof(proc), " (build %lu only)", hb->part[2]);
        else
            snprintf(proc, sizeof(proc), " (builds %lu to %lu)", floor, hb->part[2]);
        snprintf(hyperv, sizeof(hyperv), " (build %lu or older)", hb->part[2]);
    }
    bool p = host->isolations & ISOLATION_PROCESS;
    bool h = host->isolations & ISOLATION_HYPERV;
    snprintf(buf, size, "%s with %s%s%s%s%s", plat, p ? "process isolation" : "", p ? proc : "",
             p && h ? " and " : "", h ? "hyperv isolation" : "", h ? hyperv : "");
}

enum platform_verdict
platform_check(const struct oci_platform *image, const struct host_caps *host,
               enum isolation_mode isolation, struct err *err)
{
    if (isolation != ISOLATION_PROCESS && isolation != ISOLATION_HYPERV &&
        isolation != ISOLATION_ANY) {
        err_set(err, EINVAL, "platform check: isolation %d is not a mode", (int)isolation);
        return PLATFORM_REFUSED;
    }
    if ((host->isolations & ISOLATION_ANY) == 0 || (host->isolations & ~(unsigned)ISOLATION_ANY)) {
        err_set(err, EINVAL, "platform check: host isolation mask %#x is not a set of modes",
                host->isolations);
        return PLATFORM_REFUSED;
    }

    struct oci_platform img = *image;
    struct oci_platform hp = host->platform;
    oci_platform_normalize(&img);
    oci_platform_normalize(&hp);
    bool windows = strcmp(hp.os, "windows") == 0;
    struct win_build hb = {{0}};
    if (windows && !win_build_parse(hp.os_version, &hb)) {
        err_set(err, EINVAL, "platform check: host os_version \"%.64s\" is not a windows version",
                hp.os_version);
        return PLATFORM_REFUSED;
    }

    bool can_process = false;
    bool can_hyperv = false;
    const char *why = "";
    if (!oci_platform_match(&img, &hp)) {
        why = "";
    } else if (!windows) {
        can_process = true;
        can_hyperv = true;
    } else {
        struct win_build ib;
        if (!win_build_parse(img.os_version, &ib)) {
            why = img.os_version[0] ? " (its os.version is not a windows version)"
                                    : " (it has no os.version, so its windows build is unknown)";
        } else {
            can_process = win_process_compatible(&hb, &ib);
            can_hyperv = win_build_cmp(&ib, &hb) <= 0;
        }
    }
    can_process =
        can_process && (host->isolations & ISOLATION_PROCESS) && (isolation & ISOLATION_PROCESS);
    can_hyperv =
        can_hyperv && (host->isolations & ISOLATION_HYPERV) && (isolation & ISOLATION_HYPERV);
    if (can_process)
        return PLATFORM_RUNS_PROCESS;
    if (can_hyperv)
        return PLATFORM_RUNS_HYPERV;

    char img_desc[160];
    char host_desc[320];
    char asked[64] = "";
    oci_platform_format(image, img_desc, sizeof(img_desc));
    host_describe(host, windows, &hb, host_desc, sizeof(host_desc));
    if (isolation != ISOLATION_ANY)
        snprintf(asked, sizeof(asked), "; %s isolation was asked for",
                 isolation_mode_name(isolation));
    err_set(err, ERR_INVALID_CONTENT, "image is %s%s; this host runs %s%s", img_desc, why,
            host_desc, asked);
    return PLATFORM_REFUSED;
}
