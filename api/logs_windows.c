/*
 * GET /v1/containers/{handle}/processes/{id}/output on Windows: the
 * chunk records it reads are the Linux init's (runtime/outrec.c); the hcs
 * driver keeps none yet, so the route answers 501 saying so, and
 * /stdout and /stderr give the output. Loop thread.
 */
#include "api/handlers.h"
#include "api/request.h"

void
processes_output(struct api_req *req)
{
    api_reply_fail(req, ENOTSUP,
                   "the interleaved output needs chunk records, which the hcs driver does not keep "
                   "yet: read /stdout and /stderr");
}
