/*
 * The one place that builds replies and error bodies, and maps error
 * codes to HTTP statuses. Loop thread.
 */
#include "api/request.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

unsigned
api_err_status(int code, const char **code_str)
{
    static const struct {
        int code;
        unsigned status;
        const char *str;
    } map[] = {
        {EINVAL, 400, "bad_request"},
        {ENOENT, 404, "not_found"},
        {EEXIST, 409, "conflict"},
        {ERR_CONFLICT, 409, "conflict"},
        {EBUSY, 409, "conflict"},
        /* A server-side wait that ran out (the runtime did not answer); the
         * routes that time out on the client's behalf answer 408 themselves. */
        {ETIMEDOUT, 503, "timeout"},
        {EFBIG, 413, "payload_too_large"},
        {ERR_INVALID_CONTENT, 422, "invalid_content"},
        {ENOTSUP, 422, "not_supported"},
        {ERR_UNAVAILABLE, 503, "unavailable"},
        {ECANCELED, 503, "unavailable"},
        {ENOSPC, 507, "insufficient_storage"},
        {EDQUOT, 507, "insufficient_storage"},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (map[i].code == code) {
            if (code_str)
                *code_str = map[i].str;
            return map[i].status;
        }
    }
    if (code_str)
        *code_str = "internal";
    return 500;
}

void
api_reply_response(struct api_req *req, unsigned status, struct MHD_Response *resp)
{
    if (req->response) {
        log_warn("%s %s: second reply dropped (status %u)", req->method, req->path, status);
        MHD_destroy_response(resp);
        return;
    }
    req->response = resp;
    req->status = status;
}

void
api_reply_text(struct api_req *req, unsigned status, const char *content_type, const char *text,
               size_t len)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    api_reply_response(req, status, resp);
}

void
api_reply_json(struct api_req *req, unsigned status, json_object *body)
{
    size_t len = 0;
    const char *text = json_object_to_json_string_length(
        body, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    /* A trailing newline keeps curl output readable in a terminal. */
    struct MHD_Response *resp = NULL;
    char *copy = malloc(len + 1);
    if (copy) {
        memcpy(copy, text, len);
        copy[len] = '\n';
        resp = MHD_create_response_from_buffer(len + 1, copy, MHD_RESPMEM_MUST_FREE);
        if (!resp)
            free(copy);
    }
    json_object_put(body);
    if (!resp)
        return;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    api_reply_response(req, status, resp);
}

void
api_reply_error(struct api_req *req, unsigned status, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_object *inner = json_object_new_object();
    json_object_object_add(inner, "code", json_object_new_string(code));
    json_object_object_add(inner, "message", json_object_new_string(msg));
    json_object *body = json_object_new_object();
    json_object_object_add(body, "error", inner);
    if (status >= 500)
        log_warn("%s %s: %u %s", req->method, req->path, status, msg);
    api_reply_json(req, status, body);
}

void
api_reply_err(struct api_req *req, const struct err *err)
{
    const char *code = NULL;
    unsigned status = api_err_status(err->code, &code);
    api_reply_error(req, status, code, "%s", err->msg[0] ? err->msg : "internal error");
}
