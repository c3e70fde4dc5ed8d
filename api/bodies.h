/*
 * The JSON request bodies of /v1 as plain C parameters. Each parser
 * takes the body's bytes as the client sent them and either fills its
 * output or refuses with EINVAL and a message that names the field (the
 * caller answers 400), leaving nothing allocated. They are defined
 * beside the handlers that call them and declared here for the fuzz
 * target (fuzz/fuzz_bodies.c). No MHD, no daemon state: any thread.
 */
#ifndef BERTH_API_BODIES_H
#define BERTH_API_BODIES_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "daemon/containers.h"
#include "daemon/svc_images.h"
#include "daemon/svc_processes.h"
#include "daemon/svc_volumes.h"
#include "store/registry_auth.h"

/* The body as one JSON object (allow_empty: no body is an empty object);
 * a refusal's message starts "request body". */
int api_body_json(const char *body, size_t len, bool allow_empty, json_object **out,
                  struct err *err);

/* POST /v1/containers: the create parameters and the isolation asked for
 * (NULL when none); the caller frees both. */
int api_body_container_create(const char *body, size_t len, struct ctr_params **out,
                              char **isolation, struct err *err);

/* POST /v1/containers/{handle}/processes. The spec's strings point into
 * the body's parsed JSON, kept in the struct until api_body_process_clear. */
struct api_body_process {
    struct process_spec spec;
    json_object *json;
    char **argv, **env;
};
int api_body_process(const char *body, size_t len, struct api_body_process *out, struct err *err);
void api_body_process_clear(struct api_body_process *b);

/* POST .../processes/{id}/signal: the signal number, 1 to 64. */
int api_body_signal(const char *body, size_t len, int *sig, struct err *err);

/* POST /v1/images with a JSON body: the source (exactly one of layout,
 * volume with an optional path, registry), the platform asked for (NULL:
 * the host's, checked when the import begins) and the registry
 * credentials (source.creds points at creds when "auth" was given).
 * Strings point into the parsed JSON, kept until api_body_image_clear. */
struct api_body_image {
    struct image_source source;
    struct registry_creds creds;
    const char *platform;
    json_object *json;
};
int api_body_image(const char *body, size_t len, struct api_body_image *out, struct err *err);
void api_body_image_clear(struct api_body_image *b);

/* POST /v1/images/prune: -1 for a field not given. */
int api_body_prune(const char *body, size_t len, int64_t *unused_for_s, int64_t *keep_bytes,
                   struct err *err);

/* POST /v1/volumes (patch false; an empty body is a volume with defaults)
 * and PATCH /v1/volumes/{handle} (patch true: properties may be null, to
 * remove them; ttl_s -1 when not given). The options' strings point into
 * the parsed JSON, kept until api_body_volume_clear. */
struct api_body_volume {
    struct volume_create_opts opts;
    struct volume_prop props[VOL_PROPS_MAX + 1];
    size_t nprops;
    json_object *json;
};
int api_body_volume(const char *body, size_t len, bool patch, struct api_body_volume *out,
                    struct err *err);
void api_body_volume_clear(struct api_body_volume *b);

#endif
