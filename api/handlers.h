/*
 * Every route handler, one group per file (health.c, images.c, ...).
 * They run on the loop thread: validate, then reply or start a job.
 */
#ifndef BERTH_API_HANDLERS_H
#define BERTH_API_HANDLERS_H

#include "api/router.h"

struct api_req;

/* health.c */
void health_get(struct api_req *req);
void metrics_get(struct api_req *req);

/* images.c */
enum body_mode images_post_begin(struct api_req *req);
enum body_mode images_post_sniff(struct api_req *req, const char *data, size_t len);
void images_post(struct api_req *req);
void images_list(struct api_req *req);
void images_get(struct api_req *req);
void images_delete(struct api_req *req);
void images_prune(struct api_req *req);

/* containers.c */
void containers_post(struct api_req *req);
void containers_list(struct api_req *req);
void containers_get(struct api_req *req);
void containers_delete(struct api_req *req);

/* processes.c */
void processes_post(struct api_req *req);
void processes_list(struct api_req *req);
void processes_get(struct api_req *req);
void processes_wait(struct api_req *req);
void processes_stdout(struct api_req *req);
void processes_stderr(struct api_req *req);
void processes_output(struct api_req *req);
enum body_mode processes_stdin_begin(struct api_req *req);
void processes_stdin(struct api_req *req);
void processes_signal(struct api_req *req);
void processes_delete(struct api_req *req);

/* volumes.c */
void volumes_create(struct api_req *req);
void volumes_list(struct api_req *req);
void volumes_get(struct api_req *req);
void volumes_patch(struct api_req *req);
void volumes_delete(struct api_req *req);
enum body_mode volumes_files_put_begin(struct api_req *req);
void volumes_files_put(struct api_req *req);
void volumes_files_get(struct api_req *req);

#ifdef BERTH_BENCH_ROUTES
/* bench.c: benchmark-only routes, compiled with -DBERTH_BENCH_ROUTES=ON */
void bench_hash_post(struct api_req *req);
/* bench_hijack.c: a hijacked connection that echoes (api/hijack.c's tests) */
void bench_echo_upgrade_post(struct api_req *req);
#endif

#endif
