/*
 * The registry client's request loop: one exchange with a repository,
 * with authentication (Basic, Bearer tokens from the challenge's token
 * service), redirects and retries, over the repository's endpoints
 * (mirrors, then the origin). registry.c reads manifests and blobs on
 * top of it. Pool threads; blocking.
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
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "store/registry_int.h"

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
int
registry_backoff_sleep(struct registry_repo *r, unsigned ms, struct err *err)
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

static const char *
ca_for(const struct registry_client *c, const char *host)
{
    for (size_t i = 0; i < c->n_cas; i++)
        if (strcasecmp(c->ca_hosts[i], host) == 0)
            return c->ca_files[i];
    return NULL;
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
int
registry_exchange(struct registry_repo *r, const struct exchange *x, struct reg_stream **out,
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
        if ((rc = registry_backoff_sleep(r, wait, err)) < 0)
            return rc;
        delay *= 2;
    }
}
