/*
 * Registry credentials: config.json, base64, challenges, token answers
 * and the token cache. See registry_auth.h. Any thread.
 */
#include "store/registry_auth.h"

#include <ctype.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "store/digest.h"

#define AUTH_FILE_MAX (1 << 20)
#define TOKEN_CACHE_MAX 64

bool
registry_creds_empty(const struct registry_creds *c)
{
    return !c || (!(c->username && *c->username) && !(c->password && *c->password) &&
                  !(c->token && *c->token) && !(c->identity_token && *c->identity_token));
}

void
registry_creds_id(const struct registry_creds *c, char out[72])
{
    if (registry_creds_empty(c)) {
        snprintf(out, 72, "anonymous");
        return;
    }
    struct sha256 *h = sha256_new();
    if (!h) {
        snprintf(out, 72, "unhashable");
        return;
    }
    const char *parts[4] = {c->username, c->password, c->token, c->identity_token};
    for (int i = 0; i < 4; i++) {
        const char *p = parts[i] ? parts[i] : "";
        sha256_update(h, p, strlen(p) + 1); /* the NUL separates the parts */
    }
    char d[DIGEST_STR_LEN];
    sha256_final(h, d);
    sha256_free(h);
    snprintf(out, 72, "%s", d + DIGEST_PREFIX_LEN);
}

/* ---- base64 ------------------------------------------------------------- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *
registry_base64_encode(const void *data, size_t len)
{
    const unsigned char *p = data;
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < len ? p[i + 2] : 0);
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < len ? b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? b64[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

char *
registry_base64_decode(const char *s, size_t *len)
{
    size_t n = strlen(s);
    while (n && s[n - 1] == '=')
        n--;
    if (n % 4 == 1)
        return NULL;
    char *out = malloc(n * 3 / 4 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        const char *pos = s[i] ? strchr(b64, s[i]) : NULL;
        if (!pos) {
            free(out);
            return NULL;
        }
        acc = acc << 6 | (unsigned)(pos - b64);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[o] = '\0';
    if (len)
        *len = o;
    return out;
}

/* ---- config.json -------------------------------------------------------- */

struct auth_entry {
    char *host;
    char *username, *password, *identity_token, *token;
};

struct registry_auth_file {
    struct auth_entry *entries;
    size_t n;
};

char *
registry_auth_host_key(const char *key)
{
    const char *p = key;
    const char *scheme = strstr(p, "://");
    if (scheme)
        p = scheme + 3;
    size_t n = strcspn(p, "/");
    char *host = strndup(p, n);
    if (!host)
        return NULL;
    for (char *c = host; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    if (strcmp(host, "index.docker.io") == 0 || strcmp(host, "registry-1.docker.io") == 0 ||
        strcmp(host, "registry.hub.docker.com") == 0) {
        free(host);
        host = strdup("docker.io");
    }
    return host;
}

static char *
json_str_dup(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    const char *s = json_object_get_string(v);
    return *s ? strdup(s) : NULL;
}

static void
entry_clear(struct auth_entry *e)
{
    free(e->host);
    free(e->username);
    /* Secrets are wiped before they go back to the allocator. */
    if (e->password)
        explicit_bzero(e->password, strlen(e->password));
    free(e->password);
    if (e->identity_token)
        explicit_bzero(e->identity_token, strlen(e->identity_token));
    free(e->identity_token);
    if (e->token)
        explicit_bzero(e->token, strlen(e->token));
    free(e->token);
}

void
registry_auth_file_free(struct registry_auth_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++)
        entry_clear(&f->entries[i]);
    free(f->entries);
    free(f);
}

static int
parse_entry(const char *name, const char *key, json_object *v, struct auth_entry *e,
            struct err *err)
{
    if (!json_object_is_type(v, json_type_object))
        return err_set(err, EINVAL, "%s: auths.%s: not an object", name, key);
    if (!(e->host = registry_auth_host_key(key)))
        return err_set(err, ENOMEM, "out of memory");
    cleanup_free char *auth = json_str_dup(v, "auth");
    if (auth) {
        size_t len = 0;
        char *plain = registry_base64_decode(auth, &len);
        explicit_bzero(auth, strlen(auth));
        char *colon = plain ? memchr(plain, ':', len) : NULL;
        if (!colon || memchr(plain, '\0', len)) {
            if (plain) {
                explicit_bzero(plain, len);
                free(plain);
            }
            return err_set(err, EINVAL, "%s: auths.%s.auth: not the base64 of user:password", name,
                           key);
        }
        *colon = '\0';
        e->username = strdup(plain);
        e->password = strdup(colon + 1);
        explicit_bzero(plain, len);
        free(plain);
        if (!e->username || !e->password)
            return err_set(err, ENOMEM, "out of memory");
    } else {
        e->username = json_str_dup(v, "username");
        e->password = json_str_dup(v, "password");
    }
    e->identity_token = json_str_dup(v, "identitytoken");
    e->token = json_str_dup(v, "registrytoken");
    return 0;
}

int
registry_auth_file_parse(const char *buf, size_t len, const char *name,
                         struct registry_auth_file **out, struct err *err)
{
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return err_set(err, ENOMEM, "out of memory");
    json_object *root = json_tokener_parse_ex(tok, buf, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    json_tokener_free(tok);
    if (jerr != json_tokener_success || !json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        return err_set(err, EINVAL, "%s: not a JSON object", name);
    }
    struct registry_auth_file *f = calloc(1, sizeof(*f));
    int rc = 0;
    if (!f) {
        rc = err_set(err, ENOMEM, "out of memory");
        goto out;
    }
    json_object *v;
    if ((json_object_object_get_ex(root, "credsStore", &v) && v) ||
        (json_object_object_get_ex(root, "credHelpers", &v) && v))
        log_warn("%s: credsStore and credHelpers are not supported; only auths entries are used",
                 name);
    json_object *auths;
    if (!json_object_object_get_ex(root, "auths", &auths) || !auths)
        goto out;
    if (!json_object_is_type(auths, json_type_object)) {
        rc = err_set(err, EINVAL, "%s: auths: not an object", name);
        goto out;
    }
    size_t n = (size_t)json_object_object_length(auths);
    if (!(f->entries = calloc(n + 1, sizeof(*f->entries)))) {
        rc = err_set(err, ENOMEM, "out of memory");
        goto out;
    }
    json_object_object_foreach(auths, key, val)
    {
        if ((rc = parse_entry(name, key, val, &f->entries[f->n], err)) < 0) {
            entry_clear(&f->entries[f->n]);
            goto out;
        }
        f->n++;
    }
out:
    json_object_put(root);
    if (rc < 0) {
        registry_auth_file_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

int
registry_auth_file_load(const char *path, struct registry_auth_file **out, struct err *err)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = fs_read_file(path, AUTH_FILE_MAX, &buf, &len, err);
    if (rc < 0)
        return err_wrap(err, "registry auth file %s", path);
    rc = registry_auth_file_parse(buf, len, path, out, err);
    explicit_bzero(buf, len);
    free(buf);
    return rc;
}

bool
registry_auth_file_lookup(const struct registry_auth_file *f, const char *host,
                          struct registry_creds *out)
{
    if (!f)
        return false;
    cleanup_free char *key = registry_auth_host_key(host);
    if (!key)
        return false;
    for (size_t i = 0; i < f->n; i++) {
        const struct auth_entry *e = &f->entries[i];
        if (strcmp(e->host, key) != 0)
            continue;
        *out = (struct registry_creds){.username = e->username,
                                       .password = e->password,
                                       .token = e->token,
                                       .identity_token = e->identity_token};
        return true;
    }
    return false;
}

/* ---- challenges --------------------------------------------------------- */

void
registry_challenge_clear(struct registry_challenge *c)
{
    if (!c)
        return;
    free(c->realm);
    free(c->service);
    free(c->scope);
    memset(c, 0, sizeof(*c));
}

static const char *
skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Reads a token (letters, digits and RFC 7230 tchar) into a new string. */
static char *
read_token(const char **pp)
{
    const char *p = *pp;
    const char *start = p;
    while (*p && (isalnum((unsigned char)*p) || strchr("!#$%&'*+-.^_`|~", *p)))
        p++;
    *pp = p;
    return p > start ? strndup(start, (size_t)(p - start)) : NULL;
}

/* Reads a quoted string with backslash escapes (or a bare token). */
static char *
read_value(const char **pp)
{
    const char *p = *pp;
    if (*p != '"')
        return read_token(pp);
    p++;
    size_t cap = strlen(p) + 1, o = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    while (*p && *p != '"') {
        if (*p == '\\' && p[1])
            p++;
        out[o++] = *p++;
    }
    if (*p != '"') {
        free(out);
        return NULL;
    }
    out[o] = '\0';
    *pp = p + 1;
    return out;
}

/* Parses the auth-params after a scheme into c, up to the next scheme. */
static void
parse_params(const char **pp, struct registry_challenge *c)
{
    const char *p = *pp;
    for (;;) {
        p = skip_ws(p);
        while (*p == ',')
            p = skip_ws(p + 1);
        const char *mark = p;
        cleanup_free char *name = read_token(&p);
        if (!name)
            break;
        p = skip_ws(p);
        if (*p != '=') { /* the next challenge's scheme */
            p = mark;
            break;
        }
        p = skip_ws(p + 1);
        char *value = read_value(&p);
        if (!value)
            break;
        char **slot = NULL;
        if (strcasecmp(name, "realm") == 0)
            slot = &c->realm;
        else if (strcasecmp(name, "service") == 0)
            slot = &c->service;
        else if (strcasecmp(name, "scope") == 0)
            slot = &c->scope;
        if (slot && !*slot)
            *slot = value;
        else
            free(value);
    }
    *pp = p;
}

int
registry_challenge_parse(const char *header, struct registry_challenge *out, struct err *err)
{
    memset(out, 0, sizeof(*out));
    const char *p = header ? header : "";
    struct registry_challenge basic = {0};
    while (*(p = skip_ws(p))) {
        while (*p == ',')
            p = skip_ws(p + 1);
        cleanup_free char *scheme = read_token(&p);
        if (!scheme)
            break;
        struct registry_challenge c = {0};
        parse_params(&p, &c);
        if (strcasecmp(scheme, "Bearer") == 0 && out->scheme == REGISTRY_AUTH_NONE && c.realm) {
            c.scheme = REGISTRY_AUTH_BEARER;
            *out = c;
        } else if (strcasecmp(scheme, "Basic") == 0 && basic.scheme == REGISTRY_AUTH_NONE) {
            c.scheme = REGISTRY_AUTH_BASIC;
            basic = c;
        } else {
            registry_challenge_clear(&c);
        }
    }
    if (out->scheme == REGISTRY_AUTH_BEARER) {
        registry_challenge_clear(&basic);
        return 0;
    }
    if (basic.scheme == REGISTRY_AUTH_BASIC) {
        *out = basic;
        return 0;
    }
    return err_set(err, EINVAL, "WWW-Authenticate names no Basic or Bearer challenge with a realm");
}

/* ---- token answers ------------------------------------------------------ */

int
registry_token_parse(const char *buf, size_t len, char **token, int64_t *expires_in,
                     struct err *err)
{
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return err_set(err, ENOMEM, "out of memory");
    json_object *root = json_tokener_parse_ex(tok, buf, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    json_tokener_free(tok);
    int rc = 0;
    if (jerr != json_tokener_success || !json_object_is_type(root, json_type_object)) {
        rc = err_set(err, EINVAL, "the answer is not a JSON object");
        goto out;
    }
    char *t = json_str_dup(root, "token");
    if (!t)
        t = json_str_dup(root, "access_token");
    if (!t) {
        rc = err_set(err, EINVAL, "the answer has no token");
        goto out;
    }
    int64_t exp = 60;
    json_object *v;
    if (json_object_object_get_ex(root, "expires_in", &v) && json_object_is_type(v, json_type_int))
        exp = json_object_get_int64(v);
    *expires_in = exp < 60 ? 60 : exp;
    *token = t;
out:
    json_object_put(root);
    return rc;
}

/* ---- the token cache ---------------------------------------------------- */

struct token_entry {
    char *key; /* realm \n service \n scope \n creds_id */
    char *token;
    int64_t expires_at;
};

struct registry_token_cache {
    pthread_mutex_t mu;
    struct token_entry e[TOKEN_CACHE_MAX];
};

struct registry_token_cache *
registry_token_cache_new(void)
{
    struct registry_token_cache *c = calloc(1, sizeof(*c));
    if (c)
        pthread_mutex_init(&c->mu, NULL);
    return c;
}

static void
token_entry_clear(struct token_entry *e)
{
    free(e->key);
    if (e->token)
        explicit_bzero(e->token, strlen(e->token));
    free(e->token);
    memset(e, 0, sizeof(*e));
}

void
registry_token_cache_free(struct registry_token_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < TOKEN_CACHE_MAX; i++)
        token_entry_clear(&c->e[i]);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static char *
cache_key(const char *realm, const char *service, const char *scope, const char *creds_id)
{
    char *k = NULL;
    if (asprintf(&k, "%s\n%s\n%s\n%s", realm ? realm : "", service ? service : "",
                 scope ? scope : "", creds_id ? creds_id : "") < 0)
        return NULL;
    return k;
}

char *
registry_token_cache_get(struct registry_token_cache *c, const char *realm, const char *service,
                         const char *scope, const char *creds_id, int64_t now)
{
    cleanup_free char *key = cache_key(realm, service, scope, creds_id);
    if (!key)
        return NULL;
    char *res = NULL;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < TOKEN_CACHE_MAX; i++) {
        struct token_entry *e = &c->e[i];
        if (!e->key || strcmp(e->key, key) != 0)
            continue;
        if (e->expires_at > now)
            res = strdup(e->token);
        else
            token_entry_clear(e);
        break;
    }
    pthread_mutex_unlock(&c->mu);
    return res;
}

void
registry_token_cache_put(struct registry_token_cache *c, const char *realm, const char *service,
                         const char *scope, const char *creds_id, const char *token,
                         int64_t expires_at)
{
    char *key = cache_key(realm, service, scope, creds_id);
    char *t = strdup(token);
    if (!key || !t) {
        free(key);
        free(t);
        return;
    }
    pthread_mutex_lock(&c->mu);
    /* The same key, else a free slot, else the one that expires first. */
    int slot = -1;
    for (int i = 0; i < TOKEN_CACHE_MAX && slot < 0; i++)
        if (c->e[i].key && strcmp(c->e[i].key, key) == 0)
            slot = i;
    for (int i = 0; i < TOKEN_CACHE_MAX && slot < 0; i++)
        if (!c->e[i].key)
            slot = i;
    if (slot < 0) {
        slot = 0;
        for (int i = 1; i < TOKEN_CACHE_MAX; i++)
            if (c->e[i].expires_at < c->e[slot].expires_at)
                slot = i;
    }
    token_entry_clear(&c->e[slot]);
    c->e[slot] = (struct token_entry){.key = key, .token = t, .expires_at = expires_at};
    pthread_mutex_unlock(&c->mu);
}

void
registry_token_cache_drop(struct registry_token_cache *c, const char *token)
{
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < TOKEN_CACHE_MAX; i++)
        if (c->e[i].token && strcmp(c->e[i].token, token) == 0)
            token_entry_clear(&c->e[i]);
    pthread_mutex_unlock(&c->mu);
}
