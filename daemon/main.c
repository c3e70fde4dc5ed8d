/*
 * berthd: parse the configuration, size the thread pool, open the store,
 * start the API on one libuv loop, and on a stop (SIGTERM or SIGINT on
 * Linux; Ctrl-C, Ctrl-Break or the service control manager's stop on
 * Windows) shut down in order (stop accepting, cancel queued jobs, let
 * running ones finish, answer what is still suspended with 503, close
 * every handle) and exit 0.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "api/api.h"
#include "api/http.h"
#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/os.h"
#include "common/osfs.h"
#include "daemon/config.h"
#include "daemon/containers.h"
#include "daemon/daemon.h"
#include "daemon/net.h"
#include "daemon/layer_format.h"
#include "daemon/runtime_probe.h"
#include "daemon/svc_containers.h"
#include "daemon/svc_images.h"
#include "daemon/svc_main.h"
#include "daemon/svc_pull.h"
#include "daemon/volume_ttl.h"
#include "store/store.h"

#define STOP_SIGNALS_MAX 4

/* How often the shutdown waits check whether the running jobs are done. */
#define SHUTDOWN_POLL_MS 20

struct berthd {
    struct daemon d;
    struct config cfg;
    struct api *api;
    uv_signal_t signals[STOP_SIGNALS_MAX];
    size_t n_signals;
    uv_timer_t shutdown_timer;
    int signals_seen;
    /* The service control manager's stop, from its thread: stop_async
     * wakes the loop once it exists (stop_ready), guarded by stop_mu. */
    uv_async_t stop_async;
    pthread_mutex_t stop_mu;
    bool stop_ready, stop_asked;
    struct net_probe *net_probe; /* the monitor's, once the network is reconciled */
};

static void
handle_closed_cb(uv_handle_t *h)
{
    (void)h;
}

static void
api_stopped_cb(void *arg)
{
    struct berthd *b = arg;
    b->api = NULL;
    containers_close(b->d.containers); /* they keep running; only our watches close */
    volume_ttl_stop(&b->d);
    uv_close((uv_handle_t *)&b->shutdown_timer, handle_closed_cb);
    for (size_t i = 0; i < b->n_signals; i++)
        uv_close((uv_handle_t *)&b->signals[i], handle_closed_cb);
    pthread_mutex_lock(&b->stop_mu);
    b->stop_ready = false;
    pthread_mutex_unlock(&b->stop_mu);
    uv_close((uv_handle_t *)&b->stop_async, handle_closed_cb);
    lag_monitor_close(&b->d.lag, handle_closed_cb);
}

static void
shutdown_poll_cb(uv_timer_t *t)
{
    struct berthd *b = t->data;
    /* The network's plugins are children, not jobs: a create waiting on
     * ADD ends (and undoes itself) before the connections close. */
    if (!job_queue_idle(b->d.jobs) || !net_idle(b->d.net))
        return;
    uv_timer_stop(t);
    log_info("all jobs finished; closing connections");
    api_finish_shutdown(b->api, api_stopped_cb, b);
}

/* A stop: the first begins the shutdown, later ones only say what it waits for. */
static void
stop_begin(struct berthd *b, const char *why)
{
    if (b->signals_seen++ > 0) {
        log_warn("%s again: still waiting for %u running jobs to finish", why,
                 job_queue_running(b->d.jobs));
        return;
    }
    log_info("%s: shutting down (%u jobs running, %u queued)", why, job_queue_running(b->d.jobs),
             job_queue_queued(b->d.jobs));
    b->d.shutting_down = true;
    api_begin_shutdown(b->api);
    containers_shutdown(b->d.containers);
    image_pulls_shutdown(b->d.pulls);
    net_shutdown(b->d.net);
    job_queue_shutdown(b->d.jobs);
    uv_timer_start(&b->shutdown_timer, shutdown_poll_cb, 0, SHUTDOWN_POLL_MS);
}

/* The monitor's network probe: a monitor_probe_fn over net_probe_run. */
static int
net_probe_fn(void *ctx, struct err *err)
{
    struct net_health h;
    net_probe_run(ctx, &h);
    if (h.usable)
        return 0;
    return err_set(err, ERR_UNAVAILABLE, "%s", h.reason);
}

static void
net_reconciled_cb(void *arg, const struct net_reconcile_stats *st, const struct err *err)
{
    struct berthd *b = arg;
    (void)st; /* the network logged them */
    if (err)
        log_error("network: start-up reconciliation: %s", err->msg);
    b->d.net_reconciled = true;
    if (b->cfg.network_disabled || b->d.shutting_down)
        return;
    /* Made now: it copies the rules with the API's port. */
    b->net_probe = net_probe_new(b->d.net);
    if (b->net_probe)
        monitor_set_network_probe(b->d.monitor, net_probe_fn, b->net_probe);
    else
        log_error("network: health probe: out of memory");
}

/* Gives the network the API's address and the containers that exist. */
static void
net_start(struct berthd *b)
{
    struct daemon *d = &b->d;
    net_set_api(d->net, b->cfg.listen_host, api_port(b->api));
    size_t n = d->containers ? d->containers->count : 0, k = 0;
    const char **live = calloc(n + 1, sizeof(char *));
    struct err err = {0};
    if (!live) {
        log_error("network: out of memory");
        return;
    }
    for (struct container *c = d->containers ? d->containers->list : NULL; c && k < n; c = c->next)
        live[k++] = c->p->handle;
    if (net_reconcile(d->net, live, k, net_reconciled_cb, b, &err) < 0) {
        log_error("network: start-up reconciliation: %s", err.msg);
        d->net_reconciled = true;
    }
    free(live);
}

/*
 * Every connection is a descriptor, and so are the store's files, the
 * processes' pipes and the pool's work: a soft limit of 1024 (a login
 * shell's default) would refuse connections well before --max-connections.
 * The soft limit is raised to what the connections need plus room for the
 * rest, never past the hard limit. Children (runc, the containers' init,
 * CNI plugins) inherit it, as they would under a service manager's
 * LimitNOFILE. Windows has no such limit (common/os.h).
 */
static void
raise_open_files_limit(unsigned max_connections)
{
    uint64_t want = (uint64_t)max_connections + HTTP_RESERVE_CONNECTIONS + 1024, have = 0;
    if (os_open_files_raise(want, &have) == -EMFILE)
        log_warn("open files: the limit is %llu, %u connections need about %llu: raise the hard "
                 "limit (ulimit -Hn) or lower --max-connections",
                 (unsigned long long)have, max_connections, (unsigned long long)want);
}

static void
signal_cb(uv_signal_t *s, int signum)
{
    stop_begin(s->data, os_signal_name(signum));
}

static void
stop_async_cb(uv_async_t *a)
{
    stop_begin(a->data, "service stop");
}

/* os_service_run's stop, on the service control manager's thread. */
static void
service_stop(void *arg)
{
    struct berthd *b = arg;
    pthread_mutex_lock(&b->stop_mu);
    b->stop_asked = true;
    if (b->stop_ready)
        uv_async_send(&b->stop_async);
    pthread_mutex_unlock(&b->stop_mu);
}

/* Sizes libuv's pool; must run before anything touches the pool. */
static void
size_thread_pool(unsigned threads)
{
    char buf[16];
    snprintf(buf, sizeof(buf), "%u", threads);
    os_setenv("UV_THREADPOOL_SIZE", buf);
}

static int berthd_run(void *arg);

int
main(int argc, char **argv)
{
    static struct berthd b;
    struct err err = {0};
    int rc = config_parse(&b.cfg, argc, argv, &err);
    if (rc < 0) {
        fprintf(stderr, "berthd: %s\n", err.msg);
        config_close(&b.cfg);
        return 2;
    }
    if (rc == CONFIG_EXIT_OK) {
        config_close(&b.cfg);
        return 0;
    }
    pthread_mutex_init(&b.stop_mu, NULL);
    if (b.cfg.service) {
        rc = os_service_run(berthd_run, service_stop, &b, &err);
        if (rc < 0) {
            fprintf(stderr, "berthd: --service: %s\n", err.msg);
            rc = 2;
        }
    } else {
        rc = berthd_run(&b);
    }
    config_close(&b.cfg);
    return rc;
}

/* The daemon from its configuration to its exit code. */
static int
berthd_run(void *arg)
{
    struct berthd *b = arg;
    struct err err = {0};
    int rc;
    if (b->cfg.service) {
        /* A service has no console: its log goes to <root>/berthd.log. */
        cleanup_free char *log_path = fs_path_join(b->cfg.root, "berthd.log");
        int fd = log_path && fs_mkdir_p(b->cfg.root, 0700, &err) == 0
                     ? osfs_open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0600)
                     : -1;
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
    }
    log_setup(b->cfg.log_level, b->cfg.log_format);
    /* The loop logs every request: it must never wait on stderr. */
    if ((rc = log_writer_start()) < 0 && rc != -ENOSYS)
        log_warn("log writer thread: %s; records are written directly", strerror(-rc));
    os_process_setup();
    raise_open_files_limit(b->cfg.max_connections);
    size_thread_pool(b->cfg.pool_threads);

    /* --layer-format auto is decided now, and a cimfs the host cannot
     * run is a bad flag. */
    if (layer_format_resolve(&b->cfg, &err) < 0) {
        fprintf(stderr, "berthd: %s\n", err.msg);
        return 2; /* main closes the configuration */
    }

    /* The registry client, shared by every pull, reads --registry-auth
     * now: a file it cannot use is a bad flag. */
    b->d.cfg = &b->cfg;
    if (image_pulls_new(&b->d, &b->d.pulls, &err) < 0) {
        fprintf(stderr, "berthd: %s\n", err.msg);
        return 2; /* main closes the configuration */
    }

    /* A root that cannot be made is reported by health as degraded, and
     * every request that needs the store fails with a clear message. */
    if (fs_mkdir_p(b->cfg.root, 0700, &err) < 0)
        log_error("store root: %s", err.msg);

    uv_loop_t loop;
    if ((rc = uv_loop_init(&loop)) < 0) {
        log_error("start the event loop: %s", uv_strerror(rc));
        return 1;
    }
    struct daemon *d = &b->d;
    d->loop = &loop;
    d->cfg = &b->cfg;
    d->started_at = (int64_t)time(NULL);
    d->started_hr = uv_hrtime();
    d->jobs = job_queue_new(&loop);
    if (!d->jobs) {
        log_error("out of memory");
        return 1;
    }
    job_queue_set_nice(d->jobs, (int)b->cfg.pool_nice);
    lag_monitor_start(&loop, &d->lag, 100);

    /* Opening the store cleans up after a crash (temporaries, half-built
     * snapshots, leases); it blocks, but the loop does not run yet. */
    unsigned pool = b->cfg.pool_threads;
    /* Jobs that run at a client's pace (imports, volume streams) may hold
     * all but one pool thread: short jobs always find one. */
    job_queue_set_long_max(d->jobs, pool > 2 ? pool - 1 : 1);
    struct store_opts sopts = {.max_unpacks = pool > 3 ? pool - 2 : 1,
                               .allow_device_nodes = b->cfg.store_device_nodes};
    struct err serr = {0};
    if (store_open(b->cfg.root, &sopts, &d->store, &serr) < 0) {
        snprintf(d->store_error, sizeof(d->store_error), "%s", serr.msg);
        log_error("%s", serr.msg);
    }

    /* Containers come back from their records (blocking, before the loop
     * runs); those whose init died are reported stopped. */
    if (containers_open(d, &d->containers, &serr) < 0)
        log_error("containers: %s", serr.msg);

    /* The network reads the host's resolv.conf and the operator's list
     * here; its host side is made once the loop runs (net_start). */
    int exit_code = 0;
    struct runtime_probe *probe = NULL;
    cleanup_free char *net_dir = fs_path_join(b->cfg.root, "network");
    struct net_opts nopts = {.state_dir = net_dir,
                             .disabled = b->cfg.network_disabled,
                             .name = b->cfg.network_name,
                             .pool = b->cfg.network_pool,
                             .gateway = b->cfg.network_gateway,
                             .dns = (const char *const *)b->cfg.dns,
                             .cni_config_dir = b->cfg.cni_config};
    if (!net_dir || net_new(&loop, d->jobs, &nopts, &d->net, &err) < 0) {
        if (!net_dir)
            err_set(&err, ENOMEM, "network: out of memory");
        log_error("%s", err.msg);
        fprintf(stderr, "berthd: %s\n", err.msg);
        containers_close(d->containers);
        lag_monitor_close(&d->lag, handle_closed_cb);
        uv_run(&loop, UV_RUN_DEFAULT);
        exit_code = 2;
        goto teardown;
    }

    probe = runtime_probe_new(&b->cfg);
    if (d->containers && d->containers->drv)
        runtime_probe_set_driver(probe, d->containers->drv, d->containers->drv_ctx);
    if (monitor_start(b->cfg.root, runtime_probe_run, probe, 1000, &d->monitor, &err) < 0 ||
        api_start(d, &b->api, &err) < 0) {
        /* Cannot serve (the address is taken, say): undo what started, so
         * the exit is as clean as after a shutdown. */
        log_error("%s", err.msg);
        fprintf(stderr, "berthd: %s\n", err.msg);
        containers_close(d->containers);
        lag_monitor_close(&d->lag, handle_closed_cb);
        uv_run(&loop, UV_RUN_DEFAULT);
        exit_code = 1;
        goto teardown;
    }
    /* The handlers are in place before the line that tells the world we
     * listen: a SIGTERM sent the moment it appears is a clean shutdown. */
    size_t nsig = 0;
    const int *sigs = os_stop_signals(&nsig);
    for (size_t i = 0; i < nsig && i < STOP_SIGNALS_MAX; i++) {
        uv_signal_init(&loop, &b->signals[i]);
        b->signals[i].data = b;
        uv_signal_start(&b->signals[i], signal_cb, sigs[i]);
        b->n_signals++;
    }
    uv_async_init(&loop, &b->stop_async, stop_async_cb);
    b->stop_async.data = b;
    pthread_mutex_lock(&b->stop_mu);
    b->stop_ready = true;
    if (b->stop_asked)
        uv_async_send(&b->stop_async);
    pthread_mutex_unlock(&b->stop_mu);
    uv_timer_init(&loop, &b->shutdown_timer);
    b->shutdown_timer.data = b;

    log_info("berthd %s listening on http://%s%s%s:%u (root %s, runtime %s, %u pool threads)",
             BERTH_VERSION, strchr(b->cfg.listen_host, ':') ? "[" : "", b->cfg.listen_host,
             strchr(b->cfg.listen_host, ':') ? "]" : "", api_port(b->api), b->cfg.root,
             b->cfg.runtime, b->cfg.pool_threads);

    /* Auto-remove containers whose main process exited while berthd was down. */
    containers_main_resume(d);
    net_start(b);
    if (volume_ttl_start(d) < 0)
        log_error("volume TTLs: out of memory");
    /* What a crash during a prune left goes now, in a job: health is
     * ready at once. */
    images_gc_start(d);

    uv_run(&loop, UV_RUN_DEFAULT);

teardown:
    monitor_stop(d->monitor);
    net_probe_free(b->net_probe);
    net_free(d->net);
    containers_free(d->containers);
    image_pulls_free(d->pulls);
    store_close(d->store);
    runtime_probe_free(probe);
    job_queue_free(d->jobs);
    rc = uv_loop_close(&loop);
    if (rc != 0) {
        log_error("event loop closed with handles still open: %s", uv_strerror(rc));
        exit_code = 1;
    } else if (exit_code == 0) {
        log_info("stopped");
    }
    log_writer_stop();
    return exit_code;
}
