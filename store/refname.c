/* Image reference names (store/refname.h). */
#include "store/refname.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"

#define REF_MAX 255
#define TAG_MAX 128

static bool
is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* path-component: [a-z0-9]+ ((\.|_|__|-+)[a-z0-9]+)* */
static bool
path_component_ok(const char *s, size_t n)
{
    if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (is_lower_alnum(s[i]))
            continue;
        size_t j = i;
        while (j < n && !is_lower_alnum(s[j]))
            j++;
        size_t sep = j - i;
        bool dashes = true;
        for (size_t k = i; k < j; k++)
            dashes &= s[k] == '-';
        if (!(dashes || (sep == 1 && (s[i] == '.' || s[i] == '_')) ||
              (sep == 2 && s[i] == '_' && s[i + 1] == '_')))
            return false;
        i = j - 1;
    }
    return true;
}

/* domain: components of [A-Za-z0-9-] joined by '.', then an optional :port. */
static bool
domain_ok(const char *s, size_t n)
{
    const char *colon = memchr(s, ':', n);
    size_t host = colon ? (size_t)(colon - s) : n;
    if (host == 0)
        return false;
    for (size_t i = 0, start = 0; i <= host; i++) {
        if (i < host && s[i] != '.') {
            if (!isalnum((unsigned char)s[i]) && s[i] != '-')
                return false;
            continue;
        }
        if (i == start || s[start] == '-' || s[i - 1] == '-')
            return false;
        start = i + 1;
    }
    if (colon) {
        if (colon + 1 == s + n)
            return false;
        for (const char *p = colon + 1; p < s + n; p++)
            if (!isdigit((unsigned char)*p))
                return false;
    }
    return true;
}

/* tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127} */
static bool
tag_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > TAG_MAX || !(isalnum((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i]))
            return false;
    return true;
}

static bool
digest_ok(const char *s)
{
    if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != 71)
        return false;
    for (const char *p = s + 7; *p; p++)
        if (!isxdigit((unsigned char)*p) || isupper((unsigned char)*p))
            return false;
    return true;
}

/* 12 or more lowercase hex digits alone, or "sha256:...": a digest, not a name. */
static bool
reads_as_digest(const char *s)
{
    if (strncmp(s, "sha256:", 7) == 0)
        return true;
    size_t n = strlen(s);
    if (n < 12)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return false;
    return true;
}

bool
image_ref_is_bare_tag(const char *s)
{
    return s && !strchr(s, '/') && !strchr(s, ':') && !strchr(s, '@') && tag_ok(s);
}

bool
image_ref_has_tag(const char *ref)
{
    const char *slash = strrchr(ref, '/');
    const char *last = slash ? slash + 1 : ref;
    return strchr(ref, '@') || strchr(last, ':');
}

int
image_ref_normalize(const char *ref, char **out, struct err *err)
{
    size_t len = ref ? strlen(ref) : 0;
    if (len == 0 || len > REF_MAX)
        return err_set(err, EINVAL, "name %.80s: expected 1 to %d characters", ref ? ref : "",
                       REF_MAX);
    if (reads_as_digest(ref))
        return err_set(err, EINVAL, "name %.80s: reads as a digest, not a name", ref);
    cleanup_free char *buf = strdup(ref);
    if (!buf)
        return err_set(err, ENOMEM, "name: out of memory");
    char *digest = strchr(buf, '@');
    if (digest) {
        *digest++ = '\0';
        if (!digest_ok(digest))
            return err_set(err, EINVAL, "name %.80s: %.80s is not a sha256 digest", ref, digest);
    }
    char *slash = strrchr(buf, '/');
    char *tag = strchr(slash ? slash + 1 : buf, ':');
    if (tag) {
        *tag++ = '\0';
        if (!tag_ok(tag))
            return err_set(err, EINVAL,
                           "name %.80s: tag %.80s is not 1 to 128 of [A-Za-z0-9_.-] starting "
                           "with a letter, digit or '_'",
                           ref, tag);
    }
    /* The first component is a registry when it has a '.' or a port, or is localhost. */
    const char *domain = NULL;
    char *path = buf;
    char *first_slash = strchr(buf, '/');
    if (first_slash) {
        size_t dn = (size_t)(first_slash - buf);
        if (memchr(buf, '.', dn) || memchr(buf, ':', dn) ||
            (dn == 9 && strncmp(buf, "localhost", 9) == 0)) {
            *first_slash = '\0';
            domain = buf;
            path = first_slash + 1;
            if (!domain_ok(domain, dn))
                return err_set(err, EINVAL, "name %.80s: %s is not a registry host[:port]", ref,
                               domain);
        }
    }
    for (char *p = path;;) {
        char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (!path_component_ok(p, n)) {
            bool upper = false;
            for (size_t i = 0; i < n; i++)
                upper |= isupper((unsigned char)p[i]);
            return err_set(err, EINVAL, "name %.80s: %s", ref,
                           upper ? "a repository name must be lowercase"
                                 : "expected lowercase components of [a-z0-9] joined by '.', "
                                   "'_', '__' or '-', separated by '/'");
        }
        if (!e)
            break;
        p = e + 1;
    }
    if (!domain || strcmp(domain, "index.docker.io") == 0)
        domain = "docker.io";
    bool official = strcmp(domain, "docker.io") == 0 && !strchr(path, '/');
    int n = asprintf(out, "%s/%s%s%s%s%s%s", domain, official ? "library/" : "", path,
                     tag || !digest ? ":" : "", tag ? tag : (digest ? "" : "latest"),
                     digest ? "@" : "", digest ? digest : "");
    if (n < 0)
        return err_set(err, ENOMEM, "name: out of memory");
    if ((size_t)n > REF_MAX) {
        free(*out);
        *out = NULL;
        return err_set(err, EINVAL, "name %.80s: longer than %d characters in full", ref, REF_MAX);
    }
    return 0;
}

char *
image_ref_familiar(const char *canonical)
{
    const char *lib = "docker.io/library/", *hub = "docker.io/";
    if (strncmp(canonical, lib, strlen(lib)) == 0 && !strchr(canonical + strlen(lib), '/'))
        return strdup(canonical + strlen(lib));
    if (strncmp(canonical, hub, strlen(hub)) == 0)
        return strdup(canonical + strlen(hub));
    return strdup(canonical);
}

/* Every name ref may mean, in the order tried: the canonical form, then
 * for a single word the localhost/ form a bare layout tag is stored under,
 * then the text as given (names stored before normalisation). */
static size_t
candidates(const char *ref, char *out[3])
{
    size_t n = 0;
    struct err ignored;
    if (image_ref_normalize(ref, &out[n], &ignored) == 0)
        n++;
    /* Only a valid name can have been stored: localhost/Nope:latest
     * never was, and naming it to the client would only confuse. */
    cleanup_free char *local = NULL;
    if (image_ref_is_bare_tag(ref) && asprintf(&local, "localhost/%s:latest", ref) >= 0 &&
        image_ref_normalize(local, &out[n], &ignored) == 0)
        n++;
    bool seen = false;
    for (size_t i = 0; i < n; i++)
        seen |= strcmp(out[i], ref) == 0;
    if (!seen && (out[n] = strdup(ref)))
        n++;
    return n;
}

int
image_ref_resolve(struct meta *m, const char *ref, char **stored, struct err *err)
{
    /* Digests and prefixes exactly as given. */
    struct meta_image *img = NULL;
    if (reads_as_digest(ref)) {
        int ret = meta_image_get(m, ref, &img, err);
        meta_image_free(img);
        if (ret < 0)
            return ret;
        return (*stored = strdup(ref)) ? 0 : err_set(err, ENOMEM, "out of memory");
    }
    char *cand[3] = {0};
    size_t n = candidates(ref, cand);
    int ret = -ENOENT;
    for (size_t i = 0; i < n && ret == -ENOENT; i++) {
        struct err e = {0};
        img = NULL;
        ret = meta_image_get(m, cand[i], &img, &e);
        meta_image_free(img);
        if (ret == 0) {
            *stored = cand[i];
            cand[i] = NULL;
        } else if (ret != -ENOENT) {
            err_copy(err, &e);
        }
    }
    if (ret == -ENOENT) {
        /* What was looked up, in the client's words: the forms the name
         * stands for, or why the text is no name at all. */
        char tried[400] = "";
        for (size_t i = 0; i < n; i++)
            if (strcmp(cand[i], ref) != 0)
                snprintf(tried + strlen(tried), sizeof(tried) - strlen(tried), "%s%s",
                         tried[0] ? ", " : "", cand[i]);
        struct err why = {0};
        char *canon = NULL;
        if (image_ref_normalize(ref, &canon, &why) < 0) {
            const char *reason = strstr(why.msg, ": ");
            err_set(err, ENOENT,
                    "image %s: not found (no image has that name or ID; as a name it is "
                    "invalid: %s)",
                    ref, reason ? reason + 2 : why.msg);
        } else if (tried[0])
            err_set(err, ENOENT, "image %s: not found (tried %s)", ref, tried);
        else
            err_set(err, ENOENT, "image %s: not found", ref);
        free(canon);
    }
    for (size_t i = 0; i < n; i++)
        free(cand[i]);
    return ret;
}

int
image_ref_lookup(struct meta *m, const char *ref, struct meta_image **out, struct err *err)
{
    cleanup_free char *stored = NULL;
    int ret = image_ref_resolve(m, ref, &stored, err);
    return ret < 0 ? ret : meta_image_get(m, stored, out, err);
}
