/*
 * The registry client: endpoints (mirrors, then the origin), the request
 * loop with authentication, redirects and retries, and manifest and blob
 * reads on top of it. See registry.h. Pool threads; blocking.
 *
 * One request goes like this: for each attempt (backoff between them,
 * Retry-After honoured up to a cap), for each endpoint starting at the
 * one that last worked, send it with the endpoint's current
 * Authorization; a 401 updates the endpoint's challenge (and drops a
 * token the registry no longer takes) and sends it again, at most twice;
 * a redirect is followed by hand, without the Authorization header once
 * the origin (scheme, host, port) differs, and never from https down to
 * http. A mirror's failure of any kind moves on to the next endpoint; the
 * origin's failure is final unless it is worth another attempt.
 */
#include "store/registry.h"

#include <ctype.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "store/oci.h"
#include "store/registry_http.h"

#define ERROR_BODY_MAX (64 * 1024)
#define TOKEN_BODY_MAX (1 << 20)
#define REDIRECTS_MAX 5
#define RETRY_AFTER_MAX_S 10
#define AUTH_ROUNDS_MAX 2

#define MT_DOCKER_SCHEMA1 "application/vnd.docker.distribution.manifest.v1+json"
#define MT_DOCKER_SCHEMA1_SIGNED "application/vnd.docker.distribution.manifest.v1+prettyjws"

static const char manifest_accept[] = "Accept: " OCI_MT_INDEX ", " OCI_MT_MANIFEST
                                      ", " DOCKER_MT_MANIFEST_LIST ", " DOCKER_MT_MANIFEST;

struct registry_client {
    struct reg_http *http;
    struct registry_auth_file *auth;
    struct registry_token_cache *tokens;
    char **ca_hosts, **ca_files;
    size_t n_cas;
    char **insecure;
    size_t n_insecure;
    char **mirror_hosts, **mirror_urls;
    size_t n_mirrors;
    unsigned connect_timeout_ms, low_speed_time_s, doc_timeout_ms, max_attempts, backoff_ms;
};

/* One place a repository is read from: a mirror or the origin. */
struct endpoint {
    char *base;   /* "https://host[:port][/prefix]", no trailing slash */
    char *host;   /* host[:port]: messages, CA and auth file look-ups */
    char *origin; /* scheme://host:port, to tell a cross-origin redirect */
    bool mirror;
    struct registry_creds creds; /* borrowed from the repo or the auth file */
    char creds_id[72];
    /* Auth state, under the repo's mutex. */
    struct registry_challenge ch;
};

struct registry_repo {
    struct registry_client *c;
    char *host, *repository, *name;
    char *scope; /* repository:<name>:pull */
    struct endpoint *eps;
    size_t n_eps;
    size_t preferred;
    pthread_mutex_t mu;
    struct reg_cancel cancel;
    /* Copies of per-request credentials. */
    char *user, *pass, *token, *idtoken;
};

struct registry_blob {
    struct registry_repo *r;
    char digest[DIGEST_STR_LEN];
    int64_t size;
    int64_t offset; /* bytes handed out */
    struct reg_stream *s;
    unsigned resumes;
};

/* ---- small helpers ------------------------------------------------------ */

static int64_t
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec;
}

static bool
cancelled(const struct registry_repo *r)
{
    return r->cancel.fn && r->cancel.fn(r->cancel.ctx);
}

/* Sleeps ms, waking every 50 ms to look at the cancel flag. */
static int
backoff_sleep(struct registry_repo *r, unsigned ms, struct err *err)
{
    while (ms > 0) {
        if (cancelled(r))
            return err_set(err, ECANCELED, "pull from %s: cancelled", r->name);
        unsigned step = ms < 50 ? ms : 50;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)step * 1000000L};
        nanosleep(&ts, NULL);
        ms -= step;
    }
    return 0;
}

static void
wipe_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

static char *
lower_dup(const char *s)
{
    char *d = strdup(s);
    for (char *p = d; p && *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return d;
}

static bool
host_in(char *const *list, size_t n, const char *host)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(list[i], host) == 0)
            return true;
    return false;
}

static const char *
ca_for(const struct registry_client *c, const char *host)
{
    for (size_t i = 0; i < c->n_cas; i++)
        if (strcasecmp(c->ca_hosts[i], host) == 0)
            return c->ca_files[i];
    return NULL;
}

/* A host as a reference writes it: name or [v6] and an optional port. */
static bool
host_valid(const char *h)
{
    size_t n = strlen(h);
    if (n == 0 || n > 255)
        return false;
    for (const char *p = h; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr(".-:[]_", *p))
            return false;
    return true;
}

bool
registry_repository_valid(const char *repo)
{
    size_t n = strlen(repo);
    if (n == 0 || n > 255)
        return false;
    const char *p = repo;
    for (;;) {
        /* component: [a-z0-9]+ ((\.|_|__|-+)[a-z0-9]+)* */
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p)))
            return false;
        while (islower((unsigned char)*p) || isdigit((unsigned char)*p))
            p++;
        while (*p == '.' || *p == '_' || *p == '-') {
            if (*p == '.')
                p++;
            else if (*p == '_')
                p += p[1] == '_' ? 2 : 1;
            else
                while (*p == '-')
                    p++;
            if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p)))
                return false;
            while (islower((unsigned char)*p) || isdigit((unsigned char)*p))
                p++;
        }
        if (*p == '\0')
            return true;
        if (*p != '/')
            return false;
        p++;
    }
}

bool
registry_tag_valid(const char *tag)
{
    size_t n = strlen(tag);
    if (n == 0 || n > 128 || !(isalnum((unsigned char)tag[0]) || tag[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!isalnum((unsigned char)tag[i]) && !strchr("_.-", tag[i]))
            return false;
    return true;
}

/*
 * The registry's own words from an error body: distribution's
 * {"errors":[{"code","message"}]}, up to three of them, else the start of
 * the body as text (printable characters only).
 */
static void
registry_message(const char *body, size_t len, char *out, size_t size)
{
    out[0] = '\0';
    if (!body || len == 0)
        return;
    json_tokener *tok = json_tokener_new();
    json_object *root = tok ? json_tokener_parse_ex(tok, body, (int)len) : NULL;
    if (tok)
        json_tokener_free(tok);
    json_object *errs = NULL;
    if (root && json_object_object_get_ex(root, "errors", &errs) &&
        json_object_is_type(errs, json_type_array)) {
        size_t o = 0;
        size_t n = json_object_array_length(errs);
        for (size_t i = 0; i < n && i < 3 && o < size; i++) {
            json_object *e = json_object_array_get_idx(errs, i), *code = NULL, *msg = NULL;
            json_object_object_get_ex(e, "code", &code);
            json_object_object_get_ex(e, "message", &msg);
            int w = snprintf(out + o, size - o, "%s%s%s%s", i ? "; " : "",
                             code ? json_object_get_string(code) : "", code && msg ? ": " : "",
                             msg ? json_object_get_string(msg) : "");
            if (w < 0)
                break;
            o += (size_t)w;
        }
    }
    json_object_put(root);
    if (out[0])
        return;
    size_t o = 0;
    for (size_t i = 0; i < len && o + 1 < size && o < 200; i++) {
        unsigned char ch = (unsigned char)body[i];
        if (ch == '\n' || ch == '\r')
            break;
        out[o++] = isprint(ch) ? (char)ch : '?';
    }
    out[o] = '\0';
}

/* Reads what is left of an error answer into msg (never fails). */
static void
stream_message(struct reg_stream *s, char *msg, size_t size)
{
    char *body = NULL;
    size_t len = 0;
    struct err ignored = {0};
    msg[0] = '\0';
    if (reg_stream_read_all(s, ERROR_BODY_MAX, &body, &len, &ignored) == 0)
        registry_message(body, len, msg, size);
    free(body);
}

/* ---- the client --------------------------------------------------------- */

static void
strv_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

void
registry_client_free(struct registry_client *c)
{
    if (!c)
        return;
    reg_http_free(c->http);
    registry_auth_file_free(c->auth);
    registry_token_cache_free(c->tokens);
    strv_free(c->ca_hosts, c->n_cas);
    strv_free(c->ca_files, c->n_cas);
    strv_free(c->insecure, c->n_insecure);
    strv_free(c->mirror_hosts, c->n_mirrors);
    strv_free(c->mirror_urls, c->n_mirrors);
    free(c);
}

/* Checks a mirror URL: http(s), a host, no credentials, query or fragment. */
static int
mirror_check(const char *url, struct err *err)
{
    char *origin = NULL;
    if (reg_url_origin(url, &origin, NULL) < 0)
        return err_set(err, EINVAL, "registry mirror %s: not an http or https URL", url);
    free(origin);
    const char *after = strstr(url, "://") + 3;
    size_t auth_end = strcspn(after, "/");
    if (memchr(after, '@', auth_end) || strpbrk(url, "?#"))
        return err_set(err, EINVAL,
                       "registry mirror %s: must not carry credentials, a query or a fragment "
                       "(put credentials in the auth file)",
                       url);
    return 0;
}

struct registry_client *
registry_client_new(const struct registry_opts *o, struct err *err)
{
    struct registry_client *c = calloc(1, sizeof(*c));
    if (!c) {
        err_set(err, ENOMEM, "out of memory");
        return NULL;
    }
    c->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : 15000;
    c->low_speed_time_s = o->low_speed_time_s ? o->low_speed_time_s : 30;
    c->doc_timeout_ms = o->doc_timeout_ms ? o->doc_timeout_ms : 60000;
    c->max_attempts = o->max_attempts ? o->max_attempts : 4;
    c->backoff_ms = o->backoff_ms ? o->backoff_ms : 500;
    if (!(c->http = reg_http_new(err)))
        goto fail;
    if (!(c->tokens = registry_token_cache_new())) {
        err_set(err, ENOMEM, "out of memory");
        goto fail;
    }
    if (o->auth_file && registry_auth_file_load(o->auth_file, &c->auth, err) < 0)
        goto fail;
    c->ca_hosts = calloc(o->n_cas + 1, sizeof(char *));
    c->ca_files = calloc(o->n_cas + 1, sizeof(char *));
    c->insecure = calloc(o->n_insecure + 1, sizeof(char *));
    c->mirror_hosts = calloc(o->n_mirrors + 1, sizeof(char *));
    c->mirror_urls = calloc(o->n_mirrors + 1, sizeof(char *));
    if (!c->ca_hosts || !c->ca_files || !c->insecure || !c->mirror_hosts || !c->mirror_urls) {
        err_set(err, ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < o->n_cas; i++, c->n_cas++) {
        if (!host_valid(o->cas[i].host)) {
            err_set(err, EINVAL, "registry CA: %s is not a host[:port]", o->cas[i].host);
            goto fail;
        }
        c->ca_hosts[i] = lower_dup(o->cas[i].host);
        c->ca_files[i] = strdup(o->cas[i].file);
    }
    for (size_t i = 0; i < o->n_insecure; i++, c->n_insecure++) {
        if (!host_valid(o->insecure[i])) {
            err_set(err, EINVAL, "insecure registry: %s is not a host[:port]", o->insecure[i]);
            goto fail;
        }
        c->insecure[i] = lower_dup(o->insecure[i]);
    }
    for (size_t i = 0; i < o->n_mirrors; i++, c->n_mirrors++) {
        if (mirror_check(o->mirrors[i].url, err) < 0)
            goto fail;
        c->mirror_hosts[i] = registry_auth_host_key(o->mirrors[i].host);
        c->mirror_urls[i] = strdup(o->mirrors[i].url);
        size_t n = strlen(c->mirror_urls[i]);
        while (n && c->mirror_urls[i][n - 1] == '/')
            c->mirror_urls[i][--n] = '\0';
    }
    return c;
fail:
    registry_client_free(c);
    return NULL;
}

/* ---- repositories ------------------------------------------------------- */

static int
endpoint_init(struct registry_repo *r, struct endpoint *ep, const char *base, bool mirror,
              struct err *err)
{
    ep->mirror = mirror;
    if (!(ep->base = strdup(base)) || reg_url_origin(base, &ep->origin, &ep->host) < 0)
        return err_set(err, ENOMEM, "out of memory");
    char *lh = lower_dup(ep->host);
    free(ep->host);
    ep->host = lh;
    if (!mirror && (r->user || r->pass || r->token || r->idtoken)) {
        ep->creds = (struct registry_creds){.username = r->user,
                                            .password = r->pass,
                                            .token = r->token,
                                            .identity_token = r->idtoken};
    } else {
        /* The origin's auth file entry is under the registry's name
         * (docker.io), a mirror's under its own host. */
        registry_auth_file_lookup(r->c->auth, mirror ? ep->host : r->host, &ep->creds);
    }
    registry_creds_id(&ep->creds, ep->creds_id);
    return 0;
}

struct registry_repo *
registry_repo_open(struct registry_client *c, const char *host, const char *repository,
                   const struct registry_creds *creds, registry_cancel_fn cancel, void *cancel_ctx,
                   struct err *err)
{
    if (!host_valid(host)) {
        err_set(err, EINVAL, "registry %s: not a host[:port]", host);
        return NULL;
    }
    if (!registry_repository_valid(repository)) {
        err_set(err, EINVAL,
                "repository %s: expected lowercase path components of [a-z0-9._-] joined by /",
                repository);
        return NULL;
    }
    /* Declared before the first goto: a jump into the scope of a cleanup
     * variable would free whatever the stack held there. */
    cleanup_free char *origin = NULL;
    struct registry_repo *r = calloc(1, sizeof(*r));
    if (!r) {
        err_set(err, ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&r->mu, NULL);
    r->c = c;
    r->cancel = (struct reg_cancel){.fn = cancel, .ctx = cancel_ctx};
    if (!(r->host = registry_auth_host_key(host)) || !(r->repository = strdup(repository)) ||
        asprintf(&r->name, "%s/%s", r->host, repository) < 0 ||
        asprintf(&r->scope, "repository:%s:pull", repository) < 0) {
        err_set(err, ENOMEM, "out of memory");
        goto fail;
    }
    if (creds && !registry_creds_empty(creds)) {
        if ((creds->username && !(r->user = strdup(creds->username))) ||
            (creds->password && !(r->pass = strdup(creds->password))) ||
            (creds->token && !(r->token = strdup(creds->token))) ||
            (creds->identity_token && !(r->idtoken = strdup(creds->identity_token)))) {
            err_set(err, ENOMEM, "out of memory");
            goto fail;
        }
    }
    size_t n_mirrors = 0;
    for (size_t i = 0; i < c->n_mirrors; i++)
        if (strcmp(c->mirror_hosts[i], r->host) == 0)
            n_mirrors++;
    if (!(r->eps = calloc(n_mirrors + 1, sizeof(*r->eps)))) {
        err_set(err, ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < c->n_mirrors; i++)
        if (strcmp(c->mirror_hosts[i], r->host) == 0 &&
            endpoint_init(r, &r->eps[r->n_eps++], c->mirror_urls[i], true, err) < 0)
            goto fail;
    /* docker.io's API lives at registry-1.docker.io. */
    const char *api_host = strcmp(r->host, "docker.io") == 0 ? "registry-1.docker.io" : host;
    if (asprintf(&origin, "%s://%s", host_in(c->insecure, c->n_insecure, host) ? "http" : "https",
                 api_host) < 0) {
        err_set(err, ENOMEM, "out of memory");
        goto fail;
    }
    if (endpoint_init(r, &r->eps[r->n_eps++], origin, false, err) < 0)
        goto fail;
    return r;
fail:
    registry_repo_close(r);
    return NULL;
}

void
registry_repo_close(struct registry_repo *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_eps; i++) {
        free(r->eps[i].base);
        free(r->eps[i].host);
        free(r->eps[i].origin);
        registry_challenge_clear(&r->eps[i].ch);
    }
    free(r->eps);
    free(r->host);
    free(r->repository);
    free(r->name);
    free(r->scope);
    free(r->user);
    wipe_free(r->pass);
    wipe_free(r->token);
    wipe_free(r->idtoken);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

const char *
registry_repo_name(const struct registry_repo *r)
{
    return r->name;
}

/* ---- one exchange ------------------------------------------------------- */

struct exchange {
    const char *method;
    const char *path;   /* after /v2/<repo> */
    const char *accept; /* a whole "Accept: ..." line, or NULL */
    int64_t range_from;
    bool doc;         /* a document: bounded in time as a whole */
    const char *what; /* "manifest library/x:1", for messages */
};

static struct reg_http_req
base_req(struct registry_repo *r, const char *url, bool doc)
{
    return (struct reg_http_req){.method = "GET",
                                 .url = url,
                                 .connect_timeout_ms = r->c->connect_timeout_ms,
                                 .low_speed_time_s = r->c->low_speed_time_s,
                                 .total_timeout_ms = doc ? r->c->doc_timeout_ms : 0,
                                 .cancel = r->cancel};
}

/*
 * Opens url, following redirects by hand: the Authorization line goes to
 * the first origin only, and a hop from https to http is refused.
 */
static int
open_following(struct registry_repo *r, struct endpoint *ep, const char *url, const char *authz,
               const struct exchange *x, struct reg_stream **out, bool *can_retry, struct err *err)
{
    cleanup_free char *cur = strdup(url);
    if (!cur)
        return err_set(err, ENOMEM, "out of memory");
    bool send_auth = true;
    bool was_https = strncmp(cur, "https:", 6) == 0;
    for (int hop = 0; hop <= REDIRECTS_MAX; hop++) {
        cleanup_free char *origin = NULL, *host = NULL;
        if (reg_url_origin(cur, &origin, &host) < 0)
            return err_set(err, ERR_BAD_GATEWAY, "registry %s: redirected to an unusable URL",
                           ep->host);
        if (strcmp(origin, ep->origin) != 0)
            send_auth = false;
        const char *headers[3] = {NULL, NULL, NULL};
        size_t nh = 0;
        if (x->accept)
            headers[nh++] = x->accept;
        if (authz && send_auth)
            headers[nh++] = authz;
        struct reg_http_req q = base_req(r, cur, x->doc);
        q.method = x->method;
        q.headers = headers;
        q.range_from = x->range_from;
        cleanup_free char *lhost = lower_dup(host);
        q.ca_file = lhost ? ca_for(r->c, lhost) : NULL;
        char label[300];
        snprintf(label, sizeof(label), "registry %s", hop == 0 ? ep->host : host);
        log_debug("registry: %s %s%s", x->method, cur, hop ? " (redirected)" : "");
        struct reg_stream *s = NULL;
        int rc = reg_stream_open(r->c->http, &q, label, &s, can_retry, err);
        if (rc < 0)
            return rc;
        const struct reg_http_resp *resp = reg_stream_resp(s);
        long st = resp->status;
        if ((st == 301 || st == 302 || st == 303 || st == 307 || st == 308) && resp->location) {
            char *next = reg_url_resolve(cur, resp->location);
            reg_stream_close(s);
            if (!next)
                return err_set(err, ERR_BAD_GATEWAY, "registry %s: redirected to an unusable URL",
                               ep->host);
            if (was_https && strncmp(next, "https:", 6) != 0) {
                free(next);
                return err_set(err, ERR_BAD_GATEWAY,
                               "registry %s: redirected %s to a plain http URL; refused", ep->host,
                               x->what);
            }
            free(cur);
            cur = next;
            continue;
        }
        *out = s;
        return 0;
    }
    return err_set(err, ERR_BAD_GATEWAY, "registry %s: more than %d redirects for %s", ep->host,
                   REDIRECTS_MAX, x->what);
}

/* Gets a token from the challenge's realm for this repository's scope. */
static int
token_fetch(struct registry_repo *r, struct endpoint *ep, const struct registry_challenge *ch,
            char **token, struct err *err, bool *can_retry)
{
    cleanup_free char *origin = NULL, *host = NULL;
    if (reg_url_origin(ch->realm, &origin, &host) < 0)
        return err_set(err, ERR_BAD_GATEWAY,
                       "registry %s: its token service realm is not an http(s) URL", ep->host);
    cleanup_free char *lhost = lower_dup(host);
    bool plain = strncmp(origin, "http:", 5) == 0;
    bool have_secret = ep->creds.password || ep->creds.identity_token;
    if (plain && have_secret && !host_in(r->c->insecure, r->c->n_insecure, lhost))
        return err_set(err, ERR_UNAUTHORIZED,
                       "registry %s: its token service %s is plain http; credentials are not sent "
                       "there unless it is marked insecure",
                       ep->host, lhost);
    cleanup_free char *service = ch->service ? reg_url_escape(ch->service) : NULL;
    cleanup_free char *scope = reg_url_escape(r->scope);
    cleanup_free char *url = NULL;
    cleanup_free char *post = NULL;
    cleanup_free char *authz = NULL;
    const char *headers[3] = {NULL, NULL, NULL};
    struct reg_http_req q = base_req(r, NULL, true);
    if (ep->creds.identity_token) {
        /* An OAuth2 refresh token: exchanged with a form POST. */
        cleanup_free char *refresh = reg_url_escape(ep->creds.identity_token);
        if (!refresh || !scope || asprintf(&url, "%s", ch->realm) < 0 ||
            asprintf(
                &post,
                "grant_type=refresh_token&client_id=berth&service=%s&scope=%s&refresh_token=%s",
                service ? service : "", scope, refresh) < 0) {
            if (refresh)
                explicit_bzero(refresh, strlen(refresh));
            return err_set(err, ENOMEM, "out of memory");
        }
        explicit_bzero(refresh, strlen(refresh));
        q.method = "POST";
        q.post_body = post;
        headers[0] = "Content-Type: application/x-www-form-urlencoded";
    } else {
        if (!scope || asprintf(&url, "%s%s%s%s%sscope=%s", ch->realm,
                               strchr(ch->realm, '?') ? "&" : "?", service ? "service=" : "",
                               service ? service : "", service ? "&" : "", scope) < 0)
            return err_set(err, ENOMEM, "out of memory");
        if (ep->creds.username && ep->creds.password) {
            cleanup_free char *pair = NULL;
            if (asprintf(&pair, "%s:%s", ep->creds.username, ep->creds.password) < 0)
                return err_set(err, ENOMEM, "out of memory");
            cleanup_free char *b = registry_base64_encode(pair, strlen(pair));
            explicit_bzero(pair, strlen(pair));
            if (!b || asprintf(&authz, "Authorization: Basic %s", b) < 0)
                return err_set(err, ENOMEM, "out of memory");
            explicit_bzero(b, strlen(b));
            headers[0] = authz;
        }
    }
    q.url = url;
    q.headers = headers;
    q.ca_file = lhost ? ca_for(r->c, lhost) : NULL;
    char label[300];
    snprintf(label, sizeof(label), "token service %s", lhost ? lhost : "?");
    log_debug("registry: token for %s from %s", r->scope, lhost ? lhost : "?");
    struct reg_stream *s = NULL;
    int rc = reg_stream_open(r->c->http, &q, label, &s, can_retry, err);
    if (post)
        explicit_bzero(post, strlen(post));
    if (authz)
        explicit_bzero(authz, strlen(authz));
    if (rc < 0)
        return err_wrap(err, "registry %s: token", ep->host);
    long st = reg_stream_resp(s)->status;
    if (st != 200) {
        char msg[300];
        stream_message(s, msg, sizeof(msg));
        reg_stream_close(s);
        if (st == 401 || st == 403)
            return err_set(
                err, ERR_UNAUTHORIZED,
                "registry %s: unauthorized: its token service %s refused %s%s%s", ep->host, lhost,
                registry_creds_empty(&ep->creds) ? "anonymous access" : "the credentials",
                msg[0] ? ": " : "", msg);
        *can_retry = st == 429 || st >= 500;
        return err_set(err, ERR_BAD_GATEWAY, "token service %s answered %ld%s%s", lhost, st,
                       msg[0] ? ": " : "", msg);
    }
    char *body = NULL;
    size_t len = 0;
    rc = reg_stream_read_all(s, TOKEN_BODY_MAX, &body, &len, err);
    reg_stream_close(s);
    if (rc < 0)
        return err_wrap(err, "token service %s", lhost);
    int64_t expires_in = 60;
    rc = registry_token_parse(body, len, token, &expires_in, err);
    explicit_bzero(body, len);
    free(body);
    if (rc < 0)
        return err_set(err, ERR_BAD_GATEWAY, "token service %s: %s", lhost, err->msg);
    /* A few seconds early, so a token is not sent as it expires. */
    int64_t margin = expires_in > 20 ? 5 : 0;
    registry_token_cache_put(r->c->tokens, ch->realm, ch->service, r->scope, ep->creds_id, *token,
                             now_s() + expires_in - margin);
    return 0;
}

/*
 * The Authorization line for ep now, or NULL for none. *used_token gets
 * the Bearer token sent (to drop it if the registry refuses it).
 */
static int
authorization(struct registry_repo *r, struct endpoint *ep, char **line, char **used_token,
              bool *can_retry, struct err *err)
{
    *line = NULL;
    *used_token = NULL;
    if (ep->creds.token)
        return asprintf(line, "Authorization: Bearer %s", ep->creds.token) < 0
                   ? err_set(err, ENOMEM, "out of memory")
                   : 0;
    struct registry_challenge ch = {0};
    pthread_mutex_lock(&r->mu);
    ch.scheme = ep->ch.scheme;
    bool oom = (ep->ch.realm && !(ch.realm = strdup(ep->ch.realm))) ||
               (ep->ch.service && !(ch.service = strdup(ep->ch.service)));
    pthread_mutex_unlock(&r->mu);
    int rc = 0;
    if (oom) {
        rc = err_set(err, ENOMEM, "out of memory");
    } else if (ch.scheme == REGISTRY_AUTH_BASIC && ep->creds.username && ep->creds.password) {
        cleanup_free char *pair = NULL;
        if (asprintf(&pair, "%s:%s", ep->creds.username, ep->creds.password) < 0) {
            rc = err_set(err, ENOMEM, "out of memory");
        } else {
            cleanup_free char *b = registry_base64_encode(pair, strlen(pair));
            explicit_bzero(pair, strlen(pair));
            if (!b || asprintf(line, "Authorization: Basic %s", b) < 0)
                rc = err_set(err, ENOMEM, "out of memory");
            if (b)
                explicit_bzero(b, strlen(b));
        }
    } else if (ch.scheme == REGISTRY_AUTH_BEARER) {
        char *tok = registry_token_cache_get(r->c->tokens, ch.realm, ch.service, r->scope,
                                             ep->creds_id, now_s());
        if (!tok)
            rc = token_fetch(r, ep, &ch, &tok, err, can_retry);
        if (rc == 0 && asprintf(line, "Authorization: Bearer %s", tok) < 0)
            rc = err_set(err, ENOMEM, "out of memory");
        if (rc == 0)
            *used_token = tok;
        else
            wipe_free(tok);
    }
    registry_challenge_clear(&ch);
    return rc;
}

/* One endpoint: the request with authentication rounds. */
static int
exchange_endpoint(struct registry_repo *r, struct endpoint *ep, const struct exchange *x,
                  struct reg_stream **out, bool *can_retry, long *retry_after, struct err *err)
{
    cleanup_free char *url = NULL;
    if (asprintf(&url, "%s/v2/%s%s", ep->base, r->repository, x->path) < 0)
        return err_set(err, ENOMEM, "out of memory");
    for (int round = 0;; round++) {
        *can_retry = false;
        char *authz = NULL, *used = NULL;
        int rc = authorization(r, ep, &authz, &used, can_retry, err);
        if (rc < 0)
            return rc;
        struct reg_stream *s = NULL;
        rc = open_following(r, ep, url, authz, x, &s, can_retry, err);
        wipe_free(authz);
        if (rc < 0) {
            wipe_free(used);
            return rc;
        }
        const struct reg_http_resp *resp = reg_stream_resp(s);
        long st = resp->status;
        if (st >= 200 && st < 300) {
            wipe_free(used);
            *out = s;
            return 0;
        }
        if (st == 401 && round < AUTH_ROUNDS_MAX && !ep->creds.token) {
            struct registry_challenge ch = {0};
            struct err cerr = {0};
            bool parsed = registry_challenge_parse(resp->www_authenticate, &ch, &cerr) == 0;
            if (used) /* refused before it said it would expire */
                registry_token_cache_drop(r->c->tokens, used);
            wipe_free(used);
            if (parsed && !(ch.scheme == REGISTRY_AUTH_BASIC &&
                            !(ep->creds.username && ep->creds.password))) {
                pthread_mutex_lock(&r->mu);
                registry_challenge_clear(&ep->ch);
                ep->ch = ch;
                pthread_mutex_unlock(&r->mu);
                reg_stream_close(s);
                continue;
            }
            registry_challenge_clear(&ch);
        }
        wipe_free(used);
        char msg[300];
        stream_message(s, msg, sizeof(msg));
        *retry_after = resp->retry_after_s;
        reg_stream_close(s);
        const char *sep = msg[0] ? ": " : "";
        if (st == 401 || st == 403)
            return err_set(err, ERR_UNAUTHORIZED, "registry %s: unauthorized to pull %s%s%s%s",
                           ep->host, r->repository,
                           registry_creds_empty(&ep->creds) ? " anonymously" : "", sep, msg);
        if (st == 404)
            return err_set(err, ENOENT, "%s: not found on registry %s%s%s", x->what, ep->host, sep,
                           msg);
        *can_retry = st == 429 || st >= 500;
        return err_set(err, ERR_BAD_GATEWAY, "registry %s answered %ld to %s %s%s%s", ep->host, st,
                       x->method, x->what, sep, msg);
    }
}

/* The request loop: attempts with backoff, endpoints in order. */
static int
exchange(struct registry_repo *r, const struct exchange *x, struct reg_stream **out,
         struct err *err)
{
    unsigned delay = r->c->backoff_ms;
    for (unsigned attempt = 1;; attempt++) {
        pthread_mutex_lock(&r->mu);
        size_t start = r->preferred;
        pthread_mutex_unlock(&r->mu);
        bool can_retry = false;
        long retry_after = -1;
        int rc = 0;
        for (size_t k = 0; k < r->n_eps; k++) {
            size_t i = (start + k) % r->n_eps;
            struct endpoint *ep = &r->eps[i];
            bool retry_ep = false;
            long ra = -1;
            rc = exchange_endpoint(r, ep, x, out, &retry_ep, &ra, err);
            if (rc == 0) {
                pthread_mutex_lock(&r->mu);
                r->preferred = i;
                pthread_mutex_unlock(&r->mu);
                return 0;
            }
            if (rc == -ECANCELED)
                return rc;
            if (ep->mirror && k + 1 < r->n_eps) {
                log_info("registry: mirror %s failed for %s (%s); trying the next", ep->host,
                         x->what, err->msg);
                continue;
            }
            can_retry = retry_ep;
            retry_after = ra;
        }
        if (!can_retry || attempt >= r->c->max_attempts)
            return rc;
        unsigned wait = delay;
        if (retry_after >= 0)
            wait = (unsigned)(retry_after > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : retry_after) *
                   1000U;
        log_info("registry: %s (attempt %u of %u; again in %u ms)", err->msg, attempt,
                 r->c->max_attempts, wait);
        if ((rc = backoff_sleep(r, wait, err)) < 0)
            return rc;
        delay *= 2;
    }
}

/* ---- manifests ---------------------------------------------------------- */

void
registry_manifest_clear(struct registry_manifest *m)
{
    if (!m)
        return;
    free(m->body);
    free(m->media_type);
    memset(m, 0, sizeof(*m));
}

static bool
is_schema1(const char *media_type, const char *body, size_t len)
{
    if (media_type && (strcmp(media_type, MT_DOCKER_SCHEMA1) == 0 ||
                       strcmp(media_type, MT_DOCKER_SCHEMA1_SIGNED) == 0))
        return true;
    json_tokener *tok = json_tokener_new();
    json_object *root = tok ? json_tokener_parse_ex(tok, body, (int)len) : NULL;
    if (tok)
        json_tokener_free(tok);
    json_object *v = NULL;
    bool one = root && json_object_object_get_ex(root, "schemaVersion", &v) &&
               json_object_is_type(v, json_type_int) && json_object_get_int(v) == 1;
    json_object_put(root);
    return one;
}

int
registry_manifest_get(struct registry_repo *r, const char *reference, struct registry_manifest *out,
                      struct err *err)
{
    memset(out, 0, sizeof(*out));
    bool by_digest = strncmp(reference, "sha256:", 7) == 0;
    if (by_digest ? !digest_valid(reference) : !registry_tag_valid(reference))
        return err_set(err, EINVAL, "%s %s: not a valid %s", r->name, reference,
                       by_digest ? "digest (sha256:<64 lowercase hex>)" : "tag");
    char what[600];
    snprintf(what, sizeof(what), "manifest %s%s%s", r->repository, by_digest ? "@" : ":",
             reference);
    cleanup_free char *path = NULL;
    if (asprintf(&path, "/manifests/%s", reference) < 0)
        return err_set(err, ENOMEM, "out of memory");
    struct exchange x = {
        .method = "GET", .path = path, .accept = manifest_accept, .doc = true, .what = what};
    struct reg_stream *s = NULL;
    int rc = exchange(r, &x, &s, err);
    if (rc < 0)
        return rc;
    const char *ct = reg_stream_resp(s)->content_type;
    if (ct)
        out->media_type = strndup(ct, strcspn(ct, "; "));
    rc = reg_stream_read_all(s, OCI_DOC_MAX, &out->body, &out->len, err);
    reg_stream_close(s);
    if (rc == -EFBIG)
        rc = err_set(err, ERR_INVALID_CONTENT, "%s from %s: over the limit of %d bytes", what,
                     r->host, OCI_DOC_MAX);
    if (rc < 0) {
        registry_manifest_clear(out);
        return rc;
    }
    if (digest_of(out->body, out->len, out->digest) < 0) {
        registry_manifest_clear(out);
        return err_set(err, ENOMEM, "out of memory");
    }
    if (by_digest && strcmp(out->digest, reference) != 0) {
        rc = err_set(err, ERR_INVALID_CONTENT, "%s from %s: the content's digest is %s", what,
                     r->host, out->digest);
        registry_manifest_clear(out);
        return rc;
    }
    if (is_schema1(out->media_type, out->body, out->len)) {
        registry_manifest_clear(out);
        return err_set(err, ENOTSUP,
                       "%s from %s is a Docker schema 1 manifest, which berth does not pull "
                       "(deprecated; push the image again with a current tool)",
                       what, r->host);
    }
    return 0;
}

/* ---- blobs -------------------------------------------------------------- */

static int
blob_exchange(struct registry_blob *b, struct err *err)
{
    char what[600];
    snprintf(what, sizeof(what), "blob %s of %s", b->digest, b->r->repository);
    cleanup_free char *path = NULL;
    if (asprintf(&path, "/blobs/%s", b->digest) < 0)
        return err_set(err, ENOMEM, "out of memory");
    struct exchange x = {
        .method = "GET", .path = path, .range_from = b->offset, .doc = false, .what = what};
    int rc = exchange(b->r, &x, &b->s, err);
    if (rc == -ENOENT) /* the registry's manifest names it: its fault */
        err->code = ERR_BAD_GATEWAY, rc = -ERR_BAD_GATEWAY;
    if (rc < 0)
        return rc;
    /* A length that is not the descriptor's is the wrong blob, whatever its
     * bytes: refused before they are read (a shorter one would otherwise
     * look like a cut connection and be resumed past its end). */
    const struct reg_http_resp *resp = reg_stream_resp(b->s);
    int64_t served = (resp->status == 206 ? b->offset : 0) + resp->content_length;
    if (b->size >= 0 && resp->content_length >= 0 && served != b->size) {
        reg_stream_close(b->s); /* resp goes with it */
        b->s = NULL;
        return err_set(err, ERR_INVALID_CONTENT,
                       "blob %s: registry %s serves %lld bytes, its descriptor says %lld",
                       b->digest, b->r->host, (long long)served, (long long)b->size);
    }
    if (b->offset == 0)
        return 0;
    /* A resumed transfer: 206 from where we were, or 200 from the start. */
    int64_t skip = 0;
    if (resp->status == 206) {
        if (resp->range_start != b->offset) {
            reg_stream_close(b->s);
            b->s = NULL;
            return err_set(err, ERR_BAD_GATEWAY,
                           "registry %s: resumed blob %s at byte %lld, "
                           "not %lld",
                           b->r->host, b->digest, (long long)resp->range_start,
                           (long long)b->offset);
        }
    } else {
        skip = b->offset;
    }
    char buf[16384];
    while (skip > 0) {
        ssize_t n = reg_stream_read(b->s, buf,
                                    skip < (int64_t)sizeof(buf) ? (size_t)skip : sizeof(buf), err);
        if (n <= 0) {
            reg_stream_close(b->s);
            b->s = NULL;
            return n < 0 ? (int)n
                         : err_set(err, ERR_BAD_GATEWAY, "registry %s: blob %s ended early",
                                   b->r->host, b->digest);
        }
        skip -= n;
    }
    return 0;
}

int
registry_blob_open(struct registry_repo *r, const char *digest, int64_t size,
                   struct registry_blob **out, struct err *err)
{
    if (!digest_valid(digest))
        return err_set(err, EINVAL, "blob %s: not a valid digest", digest);
    struct registry_blob *b = calloc(1, sizeof(*b));
    if (!b)
        return err_set(err, ENOMEM, "out of memory");
    b->r = r;
    b->size = size;
    snprintf(b->digest, sizeof(b->digest), "%s", digest);
    int rc = blob_exchange(b, err);
    if (rc < 0) {
        free(b);
        return rc;
    }
    *out = b;
    return 0;
}

ssize_t
registry_blob_read(struct registry_blob *b, void *buf, size_t len, struct err *err)
{
    for (;;) {
        if (!b->s) {
            int rc = blob_exchange(b, err);
            if (rc < 0)
                return rc;
        }
        if (b->size >= 0 && b->offset >= b->size) {
            /* All bytes are in: anything more is not this blob. */
            char extra;
            ssize_t n = reg_stream_read(b->s, &extra, 1, err);
            if (n <= 0)
                return n;
            return err_set(err, ERR_INVALID_CONTENT,
                           "blob %s: registry %s sent more than the %lld bytes its descriptor "
                           "says",
                           b->digest, b->r->host, (long long)b->size);
        }
        size_t want = len;
        if (b->size >= 0 && (int64_t)want > b->size - b->offset)
            want = (size_t)(b->size - b->offset);
        struct err rerr = {0};
        ssize_t n = reg_stream_read(b->s, buf, want, &rerr);
        if (n > 0) {
            b->offset += n;
            return n;
        }
        bool early = n == 0 && b->size >= 0 && b->offset < b->size;
        if (n == 0 && !early)
            return 0;
        bool can_retry = early || (n < 0 && reg_stream_retryable(b->s));
        reg_stream_close(b->s);
        b->s = NULL;
        if (early)
            err_set(&rerr, ERR_BAD_GATEWAY, "registry %s: blob %s ended after %lld of %lld bytes",
                    b->r->host, b->digest, (long long)b->offset, (long long)b->size);
        if (!can_retry || b->resumes + 1 >= b->r->c->max_attempts) {
            err_copy(err, &rerr);
            return -rerr.code;
        }
        b->resumes++;
        log_info("registry: %s; resuming at byte %lld (attempt %u of %u)", rerr.msg,
                 (long long)b->offset, b->resumes + 1, b->r->c->max_attempts);
        int rc = backoff_sleep(b->r, b->r->c->backoff_ms << (b->resumes - 1), err);
        if (rc < 0)
            return rc;
    }
}

int64_t
registry_blob_offset(const struct registry_blob *b)
{
    return b->offset;
}

void
registry_blob_close(struct registry_blob *b)
{
    if (!b)
        return;
    reg_stream_close(b->s);
    free(b);
}
