/*
 * The one table from error codes (common/err.h) to HTTP statuses and the
 * /v1 API's error code strings. Every error reply goes through it; only
 * protocol errors (405, 413, 414, 431) are answered with their status by
 * hand. Pure; any thread.
 */
#include "api/request.h"

#include <errno.h>

#include "common/os.h"

static const struct {
    int code;
    unsigned status;
    const char *str;
} err_status_map[] = {
    {EINVAL, 400, "bad_request"},
    {ERR_UNAUTHORIZED, 401, "unauthorized"},
    {ENOENT, 404, "not_found"},
    {ERR_DEADLINE, 408, "timeout"},
    {EEXIST, 409, "conflict"},
    {ERR_CONFLICT, 409, "conflict"},
    {EBUSY, 409, "conflict"},
    {EFBIG, 413, "payload_too_large"},
    {ERR_MEDIA_TYPE, 415, "unsupported_media_type"},
    {ERR_INVALID_CONTENT, 422, "invalid_content"},
    {ENAMETOOLONG, 422, "invalid_content"},
    {ENOTSUP, 422, "not_supported"},
    /* A server-side wait that ran out (the runtime did not answer). */
    {ETIMEDOUT, 503, "timeout"},
    {ERR_UNAVAILABLE, 503, "unavailable"},
    {ECANCELED, 503, "unavailable"},
    {ERR_BAD_GATEWAY, 502, "bad_gateway"},
    {ERR_GATEWAY_TIMEOUT, 504, "gateway_timeout"},
    {ENOSPC, 507, "insufficient_storage"},
    {EDQUOT, 507, "insufficient_storage"},
};

unsigned
api_err_status(int code, const char **code_str)
{
    for (size_t i = 0; i < sizeof(err_status_map) / sizeof(err_status_map[0]); i++) {
        if (err_status_map[i].code == code) {
            if (code_str)
                *code_str = err_status_map[i].str;
            return err_status_map[i].status;
        }
    }
    if (code_str)
        *code_str = "internal";
    return 500;
}

unsigned
api_err_status_at(size_t i, const char **code_str)
{
    if (i >= sizeof(err_status_map) / sizeof(err_status_map[0]))
        return 0;
    *code_str = err_status_map[i].str;
    return err_status_map[i].status;
}
