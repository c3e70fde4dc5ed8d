/*
 * What the parts of the registry client share: the client, a repository
 * and its endpoints, and one exchange (a request to a repository). The
 * client and repositories are registry_client.c's, the request loop
 * registry_exchange.c's, manifests and blobs registry.c's. Not for other
 * modules. Pool threads; blocking.
 */
#ifndef BERTH_STORE_REGISTRY_INT_H
#define BERTH_STORE_REGISTRY_INT_H

#include <ctype.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/err.h"
#include "store/registry.h"
#include "store/registry_http.h"

#define ERROR_BODY_MAX (64 * 1024)
#define TOKEN_BODY_MAX (1 << 20)
#define REDIRECTS_MAX 5
#define RETRY_AFTER_MAX_S 10
#define AUTH_ROUNDS_MAX 2

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

/* One request to a repository (registry_exchange). */
struct exchange {
    const char *method;
    const char *path;   /* after /v2/<repo> */
    const char *accept; /* a whole "Accept: ..." line, or NULL */
    int64_t range_from;
    bool doc;         /* a document: bounded in time as a whole */
    const char *what; /* "manifest library/x:1", for messages */
};

static inline void
wipe_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

static inline char *
lower_dup(const char *s)
{
    char *d = strdup(s);
    for (char *p = d; p && *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return d;
}

static inline bool
host_in(char *const *list, size_t n, const char *host)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(list[i], host) == 0)
            return true;
    return false;
}

/* Sleeps ms, waking every 50 ms to look at the cancel flag. */
int registry_backoff_sleep(struct registry_repo *r, unsigned ms, struct err *err);

/* The request loop: attempts with backoff, endpoints in order, each with
 * its authentication rounds and redirects. On success *out is the open
 * answer (2xx), which the caller closes. */
int registry_exchange(struct registry_repo *r, const struct exchange *x, struct reg_stream **out,
                      struct err *err);

#endif
