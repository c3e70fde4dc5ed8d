/*
 * Registry credentials and what is done with them, short of HTTP (which
 * is registry.c's): Docker's config.json (`auths.<host>.auth`, the
 * base64 of user:password, or an identitytoken), WWW-Authenticate
 * challenges (Basic, Bearer with realm, service and scope), token
 * service answers, and the cache of Bearer tokens per scope.
 *
 * Secrets never leave these structs except as an Authorization header:
 * no message, log line or cache key holds one (a cache key names
 * credentials by a digest of them).
 *
 * Pure computation except registry_auth_file_load (reads the file). Thread-safe:
 * the token cache has its own lock; the rest is per caller.
 */
#ifndef BERTH_STORE_REGISTRY_AUTH_H
#define BERTH_STORE_REGISTRY_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/*
 * Credentials for one registry. Borrowed strings, any of them NULL:
 * - username + password: HTTP Basic, or sent to a token service;
 * - token: a registry (Bearer) token used as it is, for every request;
 * - identity_token: an OAuth2 refresh token (config.json's
 *   identitytoken) exchanged at the token service for access tokens.
 */
struct registry_creds {
    const char *username;
    const char *password;
    const char *token;
    const char *identity_token;
};

/* True when c holds nothing to authenticate with. */
bool registry_creds_empty(const struct registry_creds *c);

/* A digest naming the credentials (never their content) in cache keys:
 * 64 hex digits, or "anonymous". */
void registry_creds_id(const struct registry_creds *c, char out[72]);

/* ---- Docker config.json ------------------------------------------------- */

struct registry_auth_file;

/*
 * Reads a Docker config.json: every `auths` entry with an `auth` (base64
 * of user:password), `username` + `password`, `identitytoken` or
 * `registrytoken`. Keys are normalised like Docker's: a scheme and a path
 * are dropped, and index.docker.io / registry-1.docker.io are docker.io.
 * credsStore and credHelpers are not supported and are ignored (one
 * warning line). A malformed file fails with EINVAL naming the file and
 * the entry, never its secrets. *out: registry_auth_file_free.
 */
int registry_auth_file_load(const char *path, struct registry_auth_file **out, struct err *err);
/* As registry_auth_file_load, from a buffer; name is used in messages. */
int registry_auth_file_parse(const char *buf, size_t len, const char *name,
                             struct registry_auth_file **out, struct err *err);
void registry_auth_file_free(struct registry_auth_file *f);

/* The credentials for host ("docker.io", "127.0.0.1:5000"); false when the
 * file has none. *out borrows from f. */
bool registry_auth_file_lookup(const struct registry_auth_file *f, const char *host,
                               struct registry_creds *out);

/* Normalises a config.json key or a registry name to the host it names
 * (caller frees); NULL on OOM. */
char *registry_auth_host_key(const char *key);

/* ---- base64 ------------------------------------------------------------- */

/* Standard base64 with padding (caller frees); NULL on OOM. */
char *registry_base64_encode(const void *data, size_t len);
/* Decodes standard base64 (padding optional); NULL when invalid or OOM.
 * *len gets the decoded length; the result is NUL-terminated. */
char *registry_base64_decode(const char *s, size_t *len);

/* ---- challenges --------------------------------------------------------- */

enum registry_scheme { REGISTRY_AUTH_NONE, REGISTRY_AUTH_BASIC, REGISTRY_AUTH_BEARER };

struct registry_challenge {
    enum registry_scheme scheme;
    char *realm;   /* Bearer: the token service URL; Basic: the realm name */
    char *service; /* may be NULL */
    char *scope;   /* may be NULL */
};

/*
 * Parses a WWW-Authenticate value (RFC 7235 auth-params, quoted strings
 * with backslash escapes). Of several challenges, Bearer wins over Basic.
 * EINVAL for a header that names neither, or a Bearer without a realm.
 */
int registry_challenge_parse(const char *header, struct registry_challenge *out, struct err *err);
void registry_challenge_clear(struct registry_challenge *c);

/* ---- token service answers ---------------------------------------------- */

/*
 * Parses a token service answer: `token` (or `access_token`) and
 * `expires_in` (seconds; absent or under 60 means 60, as the
 * distribution spec says). *token is new (caller frees). EINVAL for an
 * answer without a token.
 */
int registry_token_parse(const char *buf, size_t len, char **token, int64_t *expires_in,
                         struct err *err);

/* ---- the token cache ---------------------------------------------------- */

struct registry_token_cache;

struct registry_token_cache *registry_token_cache_new(void);
void registry_token_cache_free(struct registry_token_cache *c);

/* The cached token for realm, service, scope and credentials, if it is
 * still good at now (monotonic seconds); new string or NULL. */
char *registry_token_cache_get(struct registry_token_cache *c, const char *realm,
                               const char *service, const char *scope, const char *creds_id,
                               int64_t now);
/* Caches a token until expires_at (monotonic seconds). */
void registry_token_cache_put(struct registry_token_cache *c, const char *realm,
                              const char *service, const char *scope, const char *creds_id,
                              const char *token, int64_t expires_at);
/* Forgets token (a registry refused it before it said it would expire). */
void registry_token_cache_drop(struct registry_token_cache *c, const char *token);

#endif
