/*
 * The registry client: the OCI distribution protocol's read side (GET of
 * manifests and blobs) over HTTPS or, for hosts marked insecure, plain
 * HTTP, with the registry's authentication (anonymous, Basic, Bearer
 * tokens from the WWW-Authenticate challenge), mirrors tried before the
 * origin, redirects to blob storage followed without the registry's
 * credentials, timeouts, and retries with backoff on 429, 5xx and broken
 * connections (a blob resumes where it broke, with a Range request).
 *
 * A registry_client is made once from the daemon's flags and shared by
 * every pull; a registry_repo is one pull's view of one repository (its
 * endpoints, credentials and auth state), used by several threads at
 * once (one per layer). Both are thread-safe.
 *
 * Errors (struct err codes, for the API's one table):
 *   ERR_UNAUTHORIZED    401/403, or credentials the registry needs and
 *                       we lack (names the registry)
 *   ENOENT              manifest unknown (404)
 *   ENOTSUP             what berth does not pull (Docker schema 1)
 *   ERR_INVALID_CONTENT content that does not match its digest or size
 *   ERR_BAD_GATEWAY     a registry that fails or answers nonsense (names the host)
 *   ERR_GATEWAY_TIMEOUT a registry that does not answer (names the host)
 *   ECANCELED           the cancel callback said stop
 *   EINVAL              a malformed host, repository, tag or digest
 * Messages carry the registry's own error ("MANIFEST_UNKNOWN: manifest
 * unknown"), never a credential or an Authorization header.
 *
 * Blocking: pool threads only. Nothing here knows of libuv.
 */
#ifndef BERTH_STORE_REGISTRY_H
#define BERTH_STORE_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "store/digest.h"
#include "store/registry_auth.h"

/* Polled while waiting on the network: non-zero stops the work (ECANCELED). */
typedef int (*registry_cancel_fn)(void *ctx);

/* A private CA for one registry host ("host[:port]"): a PEM file. */
struct registry_ca {
    const char *host;
    const char *file;
};

/* A mirror of one registry ("docker.io"): "https://mirror.example[:port][/path]". */
struct registry_mirror {
    const char *host;
    const char *url;
};

/* The client's configuration; strings are copied. Zero values mean the defaults. */
struct registry_opts {
    const char *auth_file; /* a Docker config.json, or NULL */
    const struct registry_ca *cas;
    size_t n_cas;
    const char *const *insecure; /* hosts spoken to over plain HTTP */
    size_t n_insecure;
    const struct registry_mirror *mirrors; /* tried in order, then the origin */
    size_t n_mirrors;
    unsigned connect_timeout_ms; /* 0: 15 s */
    unsigned low_speed_time_s;   /* no byte for this long ends a transfer; 0: 30 s */
    unsigned doc_timeout_ms;     /* a whole manifest or token exchange; 0: 60 s */
    unsigned max_attempts;       /* per request, on retryable failures; 0: 4 */
    unsigned backoff_ms;         /* before the first retry, doubled each time; 0: 500 ms */
};

struct registry_client;
struct registry_repo;
struct registry_blob;

/* Makes a client (reads auth_file now). NULL with err set on a bad option
 * or an unreadable auth file. */
struct registry_client *registry_client_new(const struct registry_opts *opts, struct err *err);
void registry_client_free(struct registry_client *c);

/*
 * Opens repository ("library/busybox", lowercase path components) of the
 * registry host ("docker.io", "127.0.0.1:5000"). creds (copied) are used
 * for the origin instead of the auth file's entry; NULL: the auth file's.
 * A mirror only ever gets the auth file's credentials for its own host.
 * cancel (may be NULL) is polled during every exchange. No request is
 * made yet. Free with registry_repo_close.
 */
struct registry_repo *registry_repo_open(struct registry_client *c, const char *host,
                                         const char *repository, const struct registry_creds *creds,
                                         registry_cancel_fn cancel, void *cancel_ctx,
                                         struct err *err);
void registry_repo_close(struct registry_repo *r);

/* "host/repository", for messages (owned by r). */
const char *registry_repo_name(const struct registry_repo *r);

/* A manifest or index as served. */
struct registry_manifest {
    char *body; /* NUL-terminated */
    size_t len;
    char *media_type; /* Content-Type without parameters, or NULL */
    char digest[DIGEST_STR_LEN];
};
void registry_manifest_clear(struct registry_manifest *m);

/*
 * GETs the manifest named by reference (a tag, or a digest that the body
 * is then checked against) with the Accept types of the OCI index and
 * manifest and Docker's manifest list and schema 2, at most OCI_DOC_MAX
 * bytes. out->digest is the sha256 of the body (never the server's
 * word). A Docker schema 1 manifest fails with ENOTSUP. Blocks.
 */
int registry_manifest_get(struct registry_repo *r, const char *reference,
                          struct registry_manifest *out, struct err *err);

/*
 * Starts a GET of blob digest of size bytes (-1: unknown). The bytes are
 * not verified here (the caller's blob writer or unpacker does), but no
 * more than size bytes are handed out, and a transfer that breaks is
 * resumed where it broke. Free with registry_blob_close. Blocks.
 */
int registry_blob_open(struct registry_repo *r, const char *digest, int64_t size,
                       struct registry_blob **out, struct err *err);

/* Reads the next bytes of the blob: > 0, 0 at its end, or a negative
 * errno with err set. Blocks. */
ssize_t registry_blob_read(struct registry_blob *b, void *buf, size_t len, struct err *err);

/* Bytes handed out so far. */
int64_t registry_blob_offset(const struct registry_blob *b);

void registry_blob_close(struct registry_blob *b);

/* True for a repository name distribution accepts: path components of
 * [a-z0-9] separated by '.', '_', '__' or dashes, joined by '/'. */
bool registry_repository_valid(const char *repository);
/* True for a tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}. */
bool registry_tag_valid(const char *tag);

#endif
