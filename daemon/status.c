/*
 * The daemon's report on itself (daemon/status.h): loop-owned figures are
 * read on the loop, the store's counts and the process's usage
 * (common/os.h) in a short job.
 * Loop thread, except stats_work.
 */
#include "daemon/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/os.h"
#include "daemon/daemon.h"
#include "daemon/svc_containers.h"
#include "store/store.h"
#include "store/volume_meta.h"

const char *
daemon_storage_problem(const struct daemon *d)
{
    return d->store ? NULL : d->store_error;
}

struct stats_job {
    struct svc_call call;
    daemon_stats_cb cb;
    void *arg;
    struct daemon *d;
    struct store *st;
    struct daemon_gauge g[DAEMON_GAUGES_MAX];
    size_t n;
    /* filled by the job */
    int64_t images, volumes;
    double rss_bytes, open_fds, cpu_s;
};

static void
gauge(struct stats_job *j, const char *name, const char *type, const char *help, double v)
{
    if (j->n < DAEMON_GAUGES_MAX)
        j->g[j->n++] = (struct daemon_gauge){.name = name, .type = type, .help = help, .value = v};
}

/* The process collector's figures, as Prometheus clients name them
 * (on Windows: the working set, handles and process times). */
static void
read_self(struct stats_job *j)
{
    struct os_usage u = {0};
    struct err err = {0};
    if (os_usage_read(&u, &err) < 0)
        return;
    j->cpu_s = u.cpu_seconds;
    j->rss_bytes = (double)u.rss_bytes;
    j->open_fds = (double)u.open_fds;
}

static void
stats_work(void *ctx)
{
    struct stats_job *j = ctx;
    struct err err = {0};
    if (j->st && meta_image_count(j->st->meta, &j->images, &err) < 0)
        j->images = 0;
    if (j->st && vmeta_count(j->st->meta, &j->volumes, &err) < 0)
        j->volumes = 0;
    read_self(j);
}

static void
stats_done(void *ctx, bool cancelled)
{
    struct stats_job *j = ctx;
    gauge(j, "berth_images", "gauge", "Images stored.", (double)j->images);
    gauge(j, "berth_volumes", "gauge", "Volumes.", (double)j->volumes);
    gauge(j, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
          j->rss_bytes);
    gauge(j, "process_open_fds", "gauge", "Number of open file descriptors.", j->open_fds);
    gauge(j, "process_cpu_seconds_total", "counter",
          "Total user and system CPU time spent in seconds.", j->cpu_s);
    struct err err;
    if (cancelled)
        err_set(&err, ECANCELED, "metrics: the daemon is shutting down");
    if (!j->call.detached)
        j->cb(j->arg, cancelled ? &err : NULL, j->g, j->n);
    free(j);
}

int
daemon_stats(struct daemon *d, unsigned connections, daemon_stats_cb cb, void *arg,
             struct svc_call **call, struct err *err)
{
    struct stats_job *j = calloc(1, sizeof(*j));
    if (!j)
        return err_set(err, ENOMEM, "metrics: out of memory");
    j->cb = cb;
    j->arg = arg;
    j->d = d;
    j->st = d->store;
    struct monitor_snapshot snap;
    monitor_read(d->monitor, &snap);
    unsigned ctrs = 0, running = 0;
    struct containers *reg = d->containers;
    for (struct container *c = reg ? reg->list : NULL; c; c = c->next) {
        ctrs += container_listed(c);
        running += container_procs_running(c);
    }
    /* The version is a label of its own gauge, as Prometheus has it. */
    j->g[j->n++] = (struct daemon_gauge){.name = "berth_build_info",
                                         .type = "gauge",
                                         .help = "The berthd build: its version as a label.",
                                         .labels = "{version=\"" BERTH_VERSION "\"}",
                                         .value = 1};
    gauge(j, "berth_uptime_seconds", "gauge", "Seconds since berthd started.", daemon_uptime_s(d));
    gauge(j, "berth_jobs_queued", "gauge", "Jobs waiting for a pool thread.",
          (double)job_queue_queued(d->jobs));
    gauge(j, "berth_jobs_running", "gauge", "Jobs running on pool threads.",
          (double)job_queue_running(d->jobs));
    gauge(j, "berth_jobs_completed_total", "counter", "Jobs finished since start.",
          (double)job_queue_completed(d->jobs));
    gauge(j, "berth_http_connections", "gauge", "Open HTTP connections.", (double)connections);
    gauge(j, "berth_store_free_bytes", "gauge", "Free bytes on the store's filesystem.",
          (double)snap.root_free_bytes);
    gauge(j, "berth_store_writable", "gauge", "1 when the store root is writable.",
          snap.root_writable ? 1.0 : 0.0);
    gauge(j, "berth_runtime_usable", "gauge", "1 when the runtime driver is usable.",
          snap.runtime_usable ? 1.0 : 0.0);
    gauge(j, "berth_containers", "gauge", "Containers (creating ones not counted).", (double)ctrs);
    gauge(j, "berth_processes_running", "gauge", "Processes running in containers.",
          (double)running);
    int ret = job_submit(d->jobs, "metrics", stats_work, stats_done, j);
    if (ret < 0) {
        free(j);
        return err_set(err, ECANCELED, "metrics: cannot start the job: %s", strerror(-ret));
    }
    svc_call_give(&j->call, call);
    return 0;
}
