/*
 * The Docker API's system routes: HEAD|GET /_ping, GET /version and GET
 * /info, answered as the engine answers them, from what the daemon knows
 * of itself and of the host (uname, sysinfo, read once) and, for /info's
 * counts, the container registry and the image service. Loop thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "api/docker/docker.h"
#include "api/request.h"
#include "common/clock.h"
#include "daemon/containers.h"
#include "daemon/daemon.h"
#include "daemon/svc_images.h"
#include "daemon/svc_main.h"

/* What the host is, read once: none of it changes while berthd runs. */
struct host_facts {
    char kernel[128];
    char machine[64]; /* uname: "x86_64" */
    char goarch[16];  /* the engine's name for it: "amd64" */
    char hostname[256];
    char os_name[128]; /* /etc/os-release PRETTY_NAME */
    long ncpu;
    uint64_t mem_total;
    bool cgroup2;
};

static const struct host_facts *
host_facts(void)
{
    static struct host_facts h;
    static bool done;
    if (done)
        return &h;
    done = true;
    struct utsname u;
    if (uname(&u) == 0) {
        snprintf(h.kernel, sizeof(h.kernel), "%s", u.release);
        snprintf(h.machine, sizeof(h.machine), "%s", u.machine);
        snprintf(h.hostname, sizeof(h.hostname), "%s", u.nodename);
    }
    static const struct {
        const char *uname, *go;
    } arch[] = {{"x86_64", "amd64"}, {"aarch64", "arm64"},   {"armv7l", "arm"},     {"i686", "386"},
                {"s390x", "s390x"},  {"ppc64le", "ppc64le"}, {"riscv64", "riscv64"}};
    snprintf(h.goarch, sizeof(h.goarch), "%s", h.machine);
    for (size_t i = 0; i < sizeof(arch) / sizeof(arch[0]); i++)
        if (strcmp(arch[i].uname, h.machine) == 0)
            snprintf(h.goarch, sizeof(h.goarch), "%s", arch[i].go);
    h.ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    struct sysinfo si;
    if (sysinfo(&si) == 0)
        h.mem_total = (uint64_t)si.totalram * si.mem_unit;
    struct stat st;
    h.cgroup2 = stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0;
    snprintf(h.os_name, sizeof(h.os_name), "Linux");
    FILE *f = fopen("/etc/os-release", "r");
    char line[256];
    while (f && fgets(line, sizeof(line), f)) {
        if (strncmp(line, "PRETTY_NAME=", 12) != 0)
            continue;
        char *v = line + 12;
        v[strcspn(v, "\n")] = '\0';
        if (*v == '"') {
            v++;
            v[strcspn(v, "\"")] = '\0';
        }
        snprintf(h.os_name, sizeof(h.os_name), "%s", v);
    }
    if (f)
        fclose(f);
    return &h;
}

void
docker_ping(struct api_req *req)
{
    bool head = strcmp(req->method, "HEAD") == 0;
    /* The engine sends HEAD an empty body: Content-Length 0. */
    api_reply_text(req, 200, "text/plain; charset=utf-8", head ? "" : "OK", head ? 0 : 2);
    if (req->response) {
        MHD_add_response_header(req->response, "Cache-Control",
                                "no-cache, no-store, must-revalidate");
        MHD_add_response_header(req->response, "Pragma", "no-cache");
        MHD_add_response_header(req->response, "Swarm", "inactive");
    }
}

static void
add_str(json_object *o, const char *k, const char *v)
{
    json_object_object_add(o, k, json_object_new_string(v));
}

void
docker_version(struct api_req *req)
{
    const struct host_facts *h = host_facts();
    json_object *o = json_object_new_object();
    json_object *platform = json_object_new_object();
    add_str(platform, "Name", "berth");
    json_object_object_add(o, "Platform", platform);
    json_object *engine = json_object_new_object();
    add_str(engine, "Name", "Engine");
    add_str(engine, "Version", BERTH_VERSION);
    json_object *details = json_object_new_object();
    add_str(details, "ApiVersion", DOCKER_API_VERSION);
    add_str(details, "MinAPIVersion", "1.24");
    add_str(details, "Os", "linux");
    add_str(details, "Arch", h->goarch);
    add_str(details, "KernelVersion", h->kernel);
    add_str(details, "Experimental", "false");
    add_str(details, "GitCommit", "berth");
    add_str(details, "GoVersion", "none (berth is C)");
    add_str(details, "BuildTime", __DATE__ " " __TIME__);
    json_object_object_add(engine, "Details", details);
    json_object *components = json_object_new_array();
    json_object_array_add(components, engine);
    json_object_object_add(o, "Components", components);
    add_str(o, "Version", BERTH_VERSION);
    add_str(o, "ApiVersion", DOCKER_API_VERSION);
    add_str(o, "MinAPIVersion", "1.24");
    /* Not Go, and no git commit of the engine's: berth says what it is. */
    add_str(o, "GitCommit", "berth");
    add_str(o, "GoVersion", "none (berth is C)");
    add_str(o, "Os", "linux");
    add_str(o, "Arch", h->goarch);
    add_str(o, "KernelVersion", h->kernel);
    add_str(o, "BuildTime", __DATE__ " " __TIME__);
    api_reply_json(req, 200, o);
}

/* ---- info --------------------------------------------------------------- */

static json_object *
str_array(const char *const *v)
{
    json_object *a = json_object_new_array();
    for (size_t i = 0; v[i]; i++)
        json_object_array_add(a, json_object_new_string(v[i]));
    return a;
}

static json_object *
info_json(struct daemon *d, size_t images)
{
    const struct host_facts *h = host_facts();
    unsigned total = 0, running = 0, stopped = 0;
    for (struct container *c = d->containers ? d->containers->list : NULL; c; c = c->next) {
        if (!docker_ctr_visible(c))
            continue;
        total++;
        if (container_main_running(c))
            running++;
        else
            stopped++;
    }
    json_object *o = json_object_new_object();
    add_str(o, "ID", "berth");
    json_object_object_add(o, "Containers", json_object_new_int(total));
    json_object_object_add(o, "ContainersRunning", json_object_new_int(running));
    json_object_object_add(o, "ContainersPaused", json_object_new_int(0));
    json_object_object_add(o, "ContainersStopped", json_object_new_int(stopped));
    json_object_object_add(o, "Images", json_object_new_int64((int64_t)images));
    add_str(o, "Driver", "overlay2");
    json_object *ds = json_object_new_array();
    json_object *row = json_object_new_array();
    json_object_array_add(row, json_object_new_string("Backing Filesystem"));
    json_object_array_add(row, json_object_new_string("berth snapshots"));
    json_object_array_add(ds, row);
    json_object_object_add(o, "DriverStatus", ds);
    json_object *plugins = json_object_new_object();
    json_object_object_add(plugins, "Volume", str_array((const char *[]){"local", NULL}));
    json_object_object_add(plugins, "Network", str_array((const char *[]){"bridge", "null", NULL}));
    json_object_object_add(plugins, "Authorization", NULL);
    json_object_object_add(plugins, "Log", str_array((const char *[]){"json-file", NULL}));
    json_object_object_add(o, "Plugins", plugins);
    static const char *const yes[] = {
        "MemoryLimit", "CpuCfsPeriod",   "CpuCfsQuota",        "CPUShares",
        "PidsLimit",   "IPv4Forwarding", "LiveRestoreEnabled", NULL};
    static const char *const no[] = {"SwapLimit",         "KernelMemory",
                                     "KernelMemoryTCP",   "CPUSet",
                                     "OomKillDisable",    "BridgeNfIptables",
                                     "BridgeNfIp6tables", "Debug",
                                     "ExperimentalBuild", NULL};
    for (size_t i = 0; yes[i]; i++)
        json_object_object_add(o, yes[i], json_object_new_boolean(true));
    for (size_t i = 0; no[i]; i++)
        json_object_object_add(o, no[i], json_object_new_boolean(false));
    json_object_object_add(o, "NFd", json_object_new_int(0));
    json_object_object_add(o, "NGoroutines", json_object_new_int(0));
    json_object_object_add(o, "SystemTime", docker_time_ms(clock_unix_ms()));
    add_str(o, "LoggingDriver", "json-file");
    add_str(o, "CgroupDriver", "cgroupfs");
    add_str(o, "CgroupVersion", h->cgroup2 ? "2" : "1");
    json_object_object_add(o, "NEventsListener", json_object_new_int(0));
    add_str(o, "KernelVersion", h->kernel);
    add_str(o, "OperatingSystem", h->os_name);
    add_str(o, "OSVersion", "");
    add_str(o, "OSType", "linux");
    add_str(o, "Architecture", h->machine);
    add_str(o, "IndexServerAddress", "https://index.docker.io/v1/");
    json_object *reg = json_object_new_object();
    json_object_object_add(reg, "InsecureRegistryCIDRs", json_object_new_array());
    json_object_object_add(reg, "IndexConfigs", json_object_new_object());
    json_object_object_add(reg, "Mirrors", json_object_new_array());
    json_object_object_add(o, "RegistryConfig", reg);
    json_object_object_add(o, "NCPU", json_object_new_int64(h->ncpu));
    json_object_object_add(o, "MemTotal", json_object_new_int64((int64_t)h->mem_total));
    add_str(o, "DockerRootDir", d->cfg->root);
    add_str(o, "HttpProxy", "");
    add_str(o, "HttpsProxy", "");
    add_str(o, "NoProxy", "");
    add_str(o, "Name", h->hostname);
    json_object_object_add(o, "Labels", json_object_new_array());
    add_str(o, "ServerVersion", BERTH_VERSION);
    json_object *runtimes = json_object_new_object();
    json_object *runc = json_object_new_object();
    add_str(runc, "path", d->cfg->oci_runtime ? d->cfg->oci_runtime : "runc");
    json_object_object_add(runtimes, "runc", runc);
    json_object_object_add(o, "Runtimes", runtimes);
    add_str(o, "DefaultRuntime", "runc");
    json_object *swarm = json_object_new_object();
    add_str(swarm, "NodeID", "");
    add_str(swarm, "NodeAddr", "");
    add_str(swarm, "LocalNodeState", "inactive");
    json_object_object_add(swarm, "ControlAvailable", json_object_new_boolean(false));
    add_str(swarm, "Error", "");
    json_object_object_add(swarm, "RemoteManagers", NULL);
    json_object_object_add(o, "Swarm", swarm);
    add_str(o, "Isolation", "");
    add_str(o, "InitBinary", "berth-init");
    static const char *const commits[] = {"ContainerdCommit", "RuncCommit", "InitCommit", NULL};
    for (size_t i = 0; commits[i]; i++) {
        json_object *c = json_object_new_object();
        add_str(c, "ID", "");
        add_str(c, "Expected", "");
        json_object_object_add(o, commits[i], c);
    }
    json_object_object_add(o, "SecurityOptions",
                           str_array((const char *[]){"name=seccomp,profile=builtin",
                                                      "name=no-new-privileges", NULL}));
    json_object_object_add(o, "Warnings", json_object_new_array());
    return o;
}

static void
info_images_cb(void *arg, const struct err *err, struct meta_image *const *imgs, size_t n)
{
    struct api_req *req = arg;
    if (api_req_call_failed(req, err))
        return;
    api_reply_json_resume(req, 200, info_json(api_daemon(req->api), n));
}

void
docker_info(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    int rc = image_list(api_daemon(req->api), info_images_cb, req, &call, &err);
    api_req_wait_or_fail(req, rc, call, &err);
}
