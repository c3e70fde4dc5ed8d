/*
 * Fuzzes the platform matcher (store/platform.c) and the index selection
 * that uses it (oci_select_manifest in store/oci_select.c).
 *
 * Input: up to four lines.
 *   1, 2  platform strings as ?platform= carries them (oci_platform_parse)
 *   3     an image's platform as a document may give it, raw bytes:
 *         "os arch variant os.version" (fields split on spaces)
 *   4     a host: "os arch variant os.version isolation-mask"
 * Checked:
 * - a parsed platform is normalised, of [a-z0-9._-], and formats and
 *   parses back to itself; a refusal is EINVAL with a message;
 * - matching is reflexive, symmetric and blind to normalisation;
 * - Windows version comparison is reflexive and antisymmetric;
 * - platform_check's verdict follows its rules (same os/arch/variant;
 *   Windows builds: process the host's only before 20348, from the
 *   previous stable LTSC (20348, 26100) up to the host's from then on,
 *   hyperv the host's or older;
 *   only modes both asked and offered), and a refusal's message is
 *   printable;
 * - a selection from an index of these platforms picks an entry that
 *   matches what was asked.
 */
#include "fuzz/fuzz.h"

#include "store/oci.h"
#include "store/platform.h"

#define DIGEST "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* Copies at most size - 1 bytes of [s, s + len) into dst. */
static void
field_copy(char *dst, size_t size, const char *s, size_t len)
{
    if (len >= size)
        len = size - 1;
    memcpy(dst, s, len);
    dst[len] = '\0';
}

/* Splits line on spaces into the fields of p; returns what follows them. */
static const char *
raw_platform(const char *line, struct oci_platform *p)
{
    char *fields[4] = {p->os, p->architecture, p->variant, p->os_version};
    size_t sizes[4] = {sizeof(p->os), sizeof(p->architecture), sizeof(p->variant),
                       sizeof(p->os_version)};
    memset(p, 0, sizeof(*p));
    const char *c = line;
    for (int i = 0; i < 4; i++) {
        size_t n = strcspn(c, " ");
        field_copy(fields[i], sizes[i], c, n);
        c += n;
        if (*c == ' ')
            c++;
    }
    return c;
}

static bool
same(const struct oci_platform *a, const struct oci_platform *b)
{
    return strcmp(a->os, b->os) == 0 && strcmp(a->architecture, b->architecture) == 0 &&
           strcmp(a->variant, b->variant) == 0 && strcmp(a->os_version, b->os_version) == 0;
}

static bool
component_ok(const char *s)
{
    return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == strlen(s);
}

static void
check_parse(const char *s, struct oci_platform *out, bool *ok)
{
    struct err err = {0};
    struct oci_platform p;
    memset(&p, 0x5a, sizeof(p));
    int r = oci_platform_parse(s, &p, &err);
    *ok = r == 0;
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL && err.code == EINVAL && err.msg[0], "parse %s: %d", s, r);
        return;
    }
    FUZZ_CHECK(p.os[0] && p.architecture[0] && !p.os_version[0], "parse %s: fields", s);
    FUZZ_CHECK(component_ok(p.os) && component_ok(p.architecture) && component_ok(p.variant),
               "parse %s: a component outside [a-z0-9._-]", s);
    struct oci_platform n = p;
    oci_platform_normalize(&n);
    FUZZ_CHECK(same(&n, &p), "parse %s: not normalised", s);

    char text[256];
    oci_platform_format(&p, text, sizeof(text));
    struct oci_platform again;
    r = oci_platform_parse(text, &again, &err);
    FUZZ_CHECK(r == 0 && same(&again, &p), "%s formats as %s, which parses %s", s, text,
               r == 0 ? "differently" : err.msg);
    *out = p;
}

static void
check_match(const struct oci_platform *a, const struct oci_platform *b)
{
    FUZZ_CHECK(oci_platform_match(a, a), "match is not reflexive");
    FUZZ_CHECK(oci_platform_match(a, b) == oci_platform_match(b, a), "match is not symmetric");
    struct oci_platform na = *a;
    oci_platform_normalize(&na);
    FUZZ_CHECK(oci_platform_match(&na, b) == oci_platform_match(a, b),
               "match depends on normalisation");
    struct oci_platform nn = na;
    oci_platform_normalize(&nn);
    FUZZ_CHECK(same(&nn, &na), "normalize is not idempotent");
}

static void
check_versions(const char *a, const char *b)
{
    int ab = 7, ba = 7, aa = 7;
    bool okab = windows_version_compare(a, b, &ab);
    bool okba = windows_version_compare(b, a, &ba);
    FUZZ_CHECK(okab == okba, "compare(%s, %s) parses one way only", a, b);
    if (okab)
        FUZZ_CHECK((ab > 0) - (ab < 0) == -((ba > 0) - (ba < 0)),
                   "compare(%s, %s) = %d but compare back = %d", a, b, ab, ba);
    if (windows_version_compare(a, a, &aa))
        FUZZ_CHECK(aa == 0, "compare(%s, itself) = %d", a, aa);
    else
        FUZZ_CHECK(!okab, "%s is a version only next to %s", a, b);
}

static void
check_verdict(const struct oci_platform *img, const struct host_caps *host, int iso)
{
    struct err err = {0};
    enum platform_verdict v = platform_check(img, host, (enum isolation_mode)iso, &err);
    bool iso_ok = iso == ISOLATION_PROCESS || iso == ISOLATION_HYPERV || iso == ISOLATION_ANY;
    bool mask_ok = (host->isolations & ISOLATION_ANY) && !(host->isolations & ~ISOLATION_ANY);
    struct oci_platform hp = host->platform;
    oci_platform_normalize(&hp);
    bool windows = strcmp(hp.os, "windows") == 0;
    int cmp = 0;
    bool host_ver = windows_version_compare(hp.os_version, hp.os_version, &cmp);
    if (!iso_ok || !mask_ok || (windows && !host_ver)) {
        FUZZ_CHECK(v == PLATFORM_REFUSED && err.code == EINVAL, "caller bug not refused");
        return;
    }
    bool can_p = false, can_h = false;
    if (oci_platform_match(img, &host->platform)) {
        if (!windows) {
            can_p = can_h = true;
        } else if (windows_version_compare(img->os_version, hp.os_version, &cmp)) {
            unsigned long im = 0, in = 0, ib = 0, hm = 0, hn = 0, hb = 0;
            sscanf(img->os_version, "%lu.%lu.%lu", &im, &in, &ib);
            sscanf(hp.os_version, "%lu.%lu.%lu", &hm, &hn, &hb);
            unsigned long floor = hb < 20348 ? hb : hb > 26100 ? 26100 : 20348;
            can_p = im == hm && in == hn && ib >= floor && ib <= hb;
            can_h = cmp <= 0;
        }
    }
    can_p = can_p && (host->isolations & ISOLATION_PROCESS) && (iso & ISOLATION_PROCESS);
    can_h = can_h && (host->isolations & ISOLATION_HYPERV) && (iso & ISOLATION_HYPERV);
    enum platform_verdict want = can_p   ? PLATFORM_RUNS_PROCESS
                                 : can_h ? PLATFORM_RUNS_HYPERV
                                         : PLATFORM_REFUSED;
    FUZZ_CHECK(v == want, "verdict %d, want %d", (int)v, (int)want);
    if (v == PLATFORM_REFUSED) {
        FUZZ_CHECK(err.code == ERR_INVALID_CONTENT && err.msg[0], "refusal without a message");
        FUZZ_CHECK(fuzz_printable(err.msg), "refusal message with raw bytes: %s", err.msg);
    } else {
        FUZZ_CHECK(err.code == 0, "accepted with an error set");
    }
}

static void
check_select(const struct oci_platform *plats, size_t n, const struct oci_platform *want)
{
    struct oci_descriptor d[4];
    memset(d, 0, sizeof(d));
    char mt[] = OCI_MT_MANIFEST;
    for (size_t i = 0; i < n; i++) {
        d[i].media_type = mt;
        memcpy(d[i].digest, DIGEST, sizeof(DIGEST));
        d[i].size = (int64_t)i;
        d[i].has_platform = true;
        d[i].platform = plats[i];
    }
    struct oci_index idx = {.manifests = d, .n_manifests = n};
    const struct oci_descriptor *pick = NULL;
    struct err err = {0};
    int r = oci_select_manifest(&idx, want, NULL, "index.json", &pick, &err);
    bool any = false;
    for (size_t i = 0; i < n; i++)
        any |= oci_platform_match(want, &plats[i]);
    FUZZ_CHECK((r == 0) == any, "select: %d, a match %s", r, any ? "exists" : "does not exist");
    if (r == 0)
        FUZZ_CHECK(oci_platform_match(want, &pick->platform), "selected a platform not asked for");
    else
        FUZZ_CHECK(err.code == ERR_INVALID_CONTENT && fuzz_printable(err.msg), "select refusal: %s",
                   err.msg);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = fuzz_strndup(data, size);
    char *lines[4] = {"", "", "", ""};
    char *c = in;
    for (int i = 0; i < 4 && c; i++) {
        lines[i] = c;
        c = strchr(c, '\n');
        if (c)
            *c++ = '\0';
    }

    struct oci_platform a = {0}, b = {0}, img, hostp;
    bool a_ok, b_ok;
    check_parse(lines[0], &a, &a_ok);
    check_parse(lines[1], &b, &b_ok);
    raw_platform(lines[2], &img);
    const char *mask = raw_platform(lines[3], &hostp);
    struct host_caps host = {.platform = hostp,
                             .isolations = (unsigned)(mask[0] ? (unsigned char)mask[0] % 8 : 1)};

    check_match(&a, &b);
    check_match(&img, &hostp);
    check_match(&img, &a);
    check_versions(img.os_version, hostp.os_version);
    check_versions(lines[0], lines[1]);
    for (int iso = 0; iso <= 4; iso++)
        check_verdict(&img, &host, iso);

    char small[12];
    memset(small, 'x', sizeof(small));
    oci_platform_format(&img, small, sizeof(small) - 1);
    FUZZ_CHECK(small[sizeof(small) - 1] == 'x' && memchr(small, '\0', sizeof(small) - 1),
               "format overran or did not terminate its buffer");
    FUZZ_CHECK(fuzz_printable(small), "format left raw bytes: %s", small);

    struct oci_platform plats[3] = {img, hostp, b};
    check_select(plats, b_ok ? 3 : 2, a_ok ? &a : &img);

    enum isolation_mode mode;
    struct err err = {0};
    if (isolation_mode_parse(lines[1], &mode, &err) == 0)
        FUZZ_CHECK(strcmp(isolation_mode_name(mode), lines[1]) == 0, "isolation %s", lines[1]);
    free(in);
    return 0;
}
