/*
 * The one place that builds replies and error bodies (statuses for
 * errors come from api/err_status.c). Loop thread.
 */
#include "api/request.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/front.h"
#include "common/log.h"

/* The request's front end; the /v1 API for a request MHD refused early. */
static const struct api_front *
front_of(const struct api_req *req)
{
    return req->front ? req->front : &api_front_v1;
}

void
api_reply_response(struct api_req *req, unsigned status, struct MHD_Response *resp)
{
    if (req->response) {
        log_warn("%s %s: second reply dropped (status %u)", req->method, req->path, status);
        MHD_destroy_response(resp);
        return;
    }
    if (front_of(req)->decorate)
        front_of(req)->decorate(resp);
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
api_reply_json_resume(struct api_req *req, unsigned status, json_object *body)
{
    api_reply_json(req, status, body);
    api_req_resume(req);
}

void
api_reply_error(struct api_req *req, unsigned status, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_object *body = front_of(req)->err_body(status, code, msg);
    /* The request log line carries the code, and for 5xx the message:
     * one line per error. */
    if (!req->response) {
        snprintf(req->err_code, sizeof(req->err_code), "%s", code);
        free(req->err_msg);
        req->err_msg = status >= 500 ? strdup(msg) : NULL;
    }
    api_reply_json(req, status, body);
}

json_object *
api_v1_error_body(unsigned status, const char *code, const char *msg)
{
    json_object *inner = json_object_new_object();
    json_object_object_add(inner, "code", json_object_new_string(code));
    json_object_object_add(inner, "message", json_object_new_string(msg));
    json_object *body = json_object_new_object();
    json_object_object_add(body, "error", inner);
    return body;
}

void
api_reply_fail(struct api_req *req, int code, const char *fmt, ...)
{
    struct err err = {.code = code};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err.msg, sizeof(err.msg), fmt, ap);
    va_end(ap);
    api_reply_err(req, &err);
}

void
api_reply_err_resume(struct api_req *req, const struct err *err)
{
    api_reply_err(req, err);
    api_req_resume(req);
}

void
api_reply_err(struct api_req *req, const struct err *err)
{
    const char *code = NULL;
    unsigned status = front_of(req)->err_status(err->code, &code);
    api_reply_error(req, status, code, "%s", err->msg[0] ? err->msg : "internal error");
}
