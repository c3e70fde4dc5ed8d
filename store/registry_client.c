/*
 * The registry client and its repositories: the client made once from
 * the daemon's flags (CAs, insecure hosts, mirrors, the auth file), and a
 * repository's endpoints (its mirrors, then the origin) with the
 * credentials each uses; the names a reference may give (host,
 * repository, tag) checked first. See registry.h. Pool threads (and the
 * loop at start-up, for the client); blocking only to read the auth
 * file.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "store/registry_int.h"

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
