/*
 * Benchmark-only routes, compiled with -DBERTH_BENCH_ROUTES=ON (never in
 * the default build). POST /v1/debug/hash {"bytes": N} hashes N bytes of
 * generated data with SHA-256 on a pool thread: a CPU-heavy job that lets
 * bench/api.sh saturate the pool and show that health still answers at
 * once, because the loop never waits on the pool. Loop thread, except the
 * work function.
 */
#ifdef BERTH_BENCH_ROUTES

#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/handlers.h"
#include "jsonutil/jsonutil.h"
#include "api/request.h"
#include "daemon/daemon.h"
#include "store/digest.h"

#define BENCH_HASH_MAX (int64_t)(64LL << 30)

struct hash_job {
    struct api_req *req; /* weak: NULL once the client is gone */
    int64_t bytes;
    char digest[DIGEST_STR_LEN];
    double seconds;
};

static void
hash_work(void *ctx)
{
    struct hash_job *job = ctx;
    static char block[1 << 16];
    for (size_t i = 0; i < sizeof(block); i++)
        block[i] = (char)(i * 31 + 7);
    uint64_t start = uv_hrtime();
    struct sha256 *h = sha256_new();
    for (int64_t left = job->bytes; left > 0; left -= (int64_t)sizeof(block))
        sha256_update(h, block, left < (int64_t)sizeof(block) ? (size_t)left : sizeof(block));
    sha256_final(h, job->digest);
    sha256_free(h);
    job->seconds = (double)(uv_hrtime() - start) / 1e9;
}

static void
hash_done(void *ctx, bool cancelled)
{
    struct hash_job *job = ctx;
    struct api_req *req = job->req;
    if (req) {
        req->weak_ref = NULL;
        if (cancelled) {
            api_reply_fail(req, ECANCELED, "the daemon is shutting down");
        } else {
            json_object *body = json_object_new_object();
            json_object_object_add(body, "digest", json_object_new_string(job->digest));
            json_object_object_add(body, "bytes", json_object_new_int64(job->bytes));
            json_object_object_add(body, "seconds", jsonutil_new_double3(job->seconds));
            api_reply_json(req, 200, body);
        }
        api_req_resume(req);
    }
    free(job);
}

void
bench_hash_post(struct api_req *req)
{
    struct err err = {0};
    json_object *body = NULL;
    static const char *const fields[] = {"bytes", NULL};
    int64_t bytes = 0;
    if (api_req_body_json(req, false, &body, &err) < 0 ||
        jsonutil_check_fields(body, "", fields, &err) < 0 ||
        jsonutil_get_int64(body, "", "bytes", true, &bytes, &err) < 0) {
        json_object_put(body);
        api_reply_err(req, &err);
        return;
    }
    json_object_put(body);
    if (bytes < 0 || bytes > BENCH_HASH_MAX) {
        api_reply_fail(req, EINVAL, "field \"bytes\": must be from 0 to %lld",
                       (long long)BENCH_HASH_MAX);
        return;
    }
    struct hash_job *job = calloc(1, sizeof(*job));
    if (!job) {
        api_reply_fail(req, ENOMEM, "out of memory");
        return;
    }
    job->bytes = bytes;
    if (api_req_run_job(req, &job->req, "debug.hash", hash_work, hash_done, job) < 0)
        free(job);
}

#endif
