/*
 * The hcs driver (runtime/driver.h): a container is an HCS compute
 * system made through computecore.dll (hcs_api.h), with process isolation
 * (a Windows Server container on the host's kernel) or hyperv (the same
 * container hosted in a utility VM of its own, sized by sizing.h and
 * admitted against the host's commit by admit.h first). Processes and
 * their output records are driver_proc_win.c's.
 *
 * Ownership: before a compute system is created, its record is written
 * under <state_root>/hcs/<handle> (system id, utility VM id, isolation,
 * the container's dir). A daemon that died after that but before the
 * create finds a record without a system and cleans it; one that died
 * later reopens the system (HcsOpenComputeSystem) and its processes at
 * open. Systems are made with ShouldTerminateOnLastHandleClosed false
 * so that they outlive the daemon. System ids carry a random part, so
 * two daemons on one host (two store roots) never collide.
 *
 * Every operation blocks on HCS: pool threads only. The context is shared
 * by pool threads (driver_int.h says what its mutex guards); HCS's event
 * callbacks run on HCS's threads and only mark a container stopped or a
 * process exited, under that mutex. Windows only.
 */
#include "runtime/hcs/driver.h"

#include <windows.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/strv.h"
#include "common/winutil.h"
#include "runtime/hcs/doc_nic.h"
#include "runtime/hcs/doc_request.h"
#include "runtime/hcs/doc_system.h"
#include "runtime/hcs/driver_int.h"
#include "runtime/hcs/guid.h"
#include "runtime/hcs/host.h"
#include "runtime/hcs/winpath.h"

/* Where the utility VM mounts the container's scratch disk, and its LUN. */
#define HCS_GUEST_ROOT "C:\\c\\1"
#define HCS_SCRATCH_LUN 1

static const char *const hcs_isolations[] = {"process", "hyperv", NULL};

static char *
join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s\\%s", a, b);
    return s;
}

/* ---- the container list ---- */

struct hcs_dctr *
hcs_dctr_get(struct hcs_drv *drv, const char *handle)
{
    pthread_mutex_lock(&drv->mu);
    struct hcs_dctr *c = drv->ctrs;
    while (c && strcmp(c->handle, handle) != 0)
        c = c->next;
    if (c)
        c->refs++;
    pthread_mutex_unlock(&drv->mu);
    return c;
}

static void
dctr_free(struct hcs_dctr *c)
{
    while (c->procs) {
        struct hcs_dproc *p = c->procs;
        c->procs = p->next;
        hcs_dproc_free(p);
    }
    hcs_system_close(c->sys);
    hcs_system_close(c->vm);
    free(c->handle);
    free(c->dir);
    free(c);
}

void
hcs_dctr_put(struct hcs_drv *drv, struct hcs_dctr *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&drv->mu);
    bool last = --c->refs == 0;
    pthread_mutex_unlock(&drv->mu);
    if (last)
        dctr_free(c);
}

/* Takes c out of the list (the list's reference stays with the caller). */
static bool
dctr_unlink(struct hcs_drv *drv, struct hcs_dctr *c)
{
    pthread_mutex_lock(&drv->mu);
    bool found = false;
    for (struct hcs_dctr **pp = &drv->ctrs; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            found = true;
            break;
        }
    pthread_mutex_unlock(&drv->mu);
    return found;
}

static void
system_event_cb(void *arg, const struct hcs_event *ev)
{
    struct hcs_dctr *c = arg;
    if (ev->type != HCS_EVENT_SYSTEM_EXITED)
        return;
    pthread_mutex_lock(&c->drv->mu);
    /* CREATED: its create still runs (the daemon takes the news when it ends). */
    bool was_running = c->status == RT_CONTAINER_RUNNING || c->status == RT_CONTAINER_CREATED;
    c->status = RT_CONTAINER_STOPPED;
    void (*cb)(void *, const char *) = c->drv->stop_cb;
    void *cb_arg = c->drv->stop_arg;
    pthread_mutex_unlock(&c->drv->mu);
    /* A delete's own shutdown goes this way too: the daemon knows it is deleting. */
    if (was_running && cb)
        cb(cb_arg, c->handle);
}

/* ---- records ---- */

static char *
record_path(struct hcs_drv *drv, const char *handle)
{
    return join(drv->records, handle);
}

static int
record_write(struct hcs_drv *drv, const struct hcs_dctr *c, struct err *err)
{
    cleanup_free char *path = record_path(drv, c->handle);
    if (!path)
        return err_set(err, ENOMEM, "record of %s: out of memory", c->handle);
    size_t n = strlen(c->dir) + 2 * HCS_SYSTEM_ID_MAX + 64 + 2 * HCS_GUID_SIZE + 24;
    cleanup_free char *text = malloc(n);
    if (!text)
        return err_set(err, ENOMEM, "record of %s: out of memory", c->handle);
    int len = snprintf(text, n, "%s\n%s\n%s\n%s\n", c->sys_id, c->vm_id[0] ? c->vm_id : "-",
                       c->hyperv ? "hyperv" : "process", c->dir);
    /* The utility VM's adapter, once it is being given one: a successor removes it. */
    if (c->nic_ep[0])
        snprintf(text + len, n - (size_t)len, "nic %s %s %s\n", c->nic_ep, c->nic_ns, c->nic_mac);
    return hcs_file_replace(path, text, err);
}

/* "nic <endpoint> <namespace> <mac>": the adapter given to c's utility VM. */
static bool
nic_parse(const char *line, struct hcs_dctr *c)
{
    char ep[40], ns[40], mac[20], end;
    if (sscanf(line, "nic %39s %39s %19s %c", ep, ns, mac, &end) != 3 || !hcs_guid_valid(ep) ||
        !hcs_guid_valid(ns) || strlen(mac) != sizeof(c->nic_mac) - 1)
        return false;
    snprintf(c->nic_ep, sizeof(c->nic_ep), "%s", ep);
    snprintf(c->nic_ns, sizeof(c->nic_ns), "%s", ns);
    snprintf(c->nic_mac, sizeof(c->nic_mac), "%s", mac);
    return true;
}

static int
record_read(struct hcs_drv *drv, const char *handle, struct hcs_dctr **out, struct err *err)
{
    cleanup_free char *path = record_path(drv, handle);
    cleanup_free char *text = NULL;
    if (!path)
        return err_set(err, ENOMEM, "record of %s: out of memory", handle);
    int ret = hcs_file_read(path, 4 * 4096, &text, err);
    if (ret < 0)
        return ret;
    char *line[5] = {0};
    char *save = NULL, *s = text;
    for (int i = 0; i < 5; i++, s = NULL)
        line[i] = strtok_r(s, "\r\n", &save);
    if (!line[3] || strlen(line[0]) >= HCS_SYSTEM_ID_MAX || strlen(line[1]) >= HCS_SYSTEM_ID_MAX)
        return err_set(err, EIO, "record of %s: not a record of the hcs driver", handle);
    struct hcs_dctr *c = calloc(1, sizeof(*c));
    if (!c || !(c->handle = strdup(handle)) || !(c->dir = strdup(line[3]))) {
        if (c)
            free(c->handle);
        free(c);
        return err_set(err, ENOMEM, "record of %s: out of memory", handle);
    }
    snprintf(c->sys_id, sizeof(c->sys_id), "%s", line[0]);
    snprintf(c->vm_id, sizeof(c->vm_id), "%s", strcmp(line[1], "-") == 0 ? "" : line[1]);
    c->hyperv = strcmp(line[2], "hyperv") == 0;
    if (line[4] && !nic_parse(line[4], c))
        log_warn("hcs: record of %s: %.80s: not the utility vm's adapter; ignored", handle,
                 line[4]);
    c->drv = drv;
    c->refs = 1;
    *out = c;
    return 0;
}

static void
record_remove(struct hcs_drv *drv, const char *handle)
{
    cleanup_free char *path = record_path(drv, handle);
    cleanup_free wchar_t *wp = path ? win_wide(path) : NULL;
    if (wp)
        DeleteFileW(wp);
}

/* The handles of every record (caller frees with strv_free). */
static int
records_list(struct hcs_drv *drv, char ***out, struct err *err)
{
    cleanup_free char *pat = join(drv->records, "*");
    char **v = calloc(1, sizeof(char *));
    size_t n = 0;
    if (!pat || !v) {
        free(v);
        return err_set(err, ENOMEM, "list containers: out of memory");
    }
    WIN32_FIND_DATAA fd;
    HANDLE f = FindFirstFileA(pat, &fd);
    if (f != INVALID_HANDLE_VALUE) {
        do {
            if (!(fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) &&
                rt_handle_valid(fd.cFileName) && strv_push(&v, &n, fd.cFileName) < 0) {
                FindClose(f);
                strv_free(v);
                return err_set(err, ENOMEM, "list containers: out of memory");
            }
        } while (FindNextFileA(f, &fd));
        FindClose(f);
    }
    *out = v;
    return 0;
}

/* ---- open, close, probe ---- */

static void
hcs_close(void *p)
{
    struct hcs_drv *drv = p;
    if (!drv)
        return;
    pthread_mutex_lock(&drv->mu);
    drv->stop_cb = NULL;
    pthread_mutex_unlock(&drv->mu);
    /* Systems keep running (they outlive the daemon); only our handles go. */
    while (drv->ctrs) {
        struct hcs_dctr *c = drv->ctrs;
        drv->ctrs = c->next;
        hcs_dctr_put(drv, c);
    }
    hcs_admit_free(drv->admit);
    hcs_api_free(drv->api);
    pthread_mutex_destroy(&drv->mu);
    free(drv->state_root);
    free(drv->records);
    free(drv);
}

/* Reopens the system of a record, and its processes; a system HCS no longer has stays stopped. */
static void
reattach(struct hcs_drv *drv, struct hcs_dctr *c)
{
    struct err err = {0};
    c->status = RT_CONTAINER_STOPPED;
    if (c->vm_id[0] && hcs_system_open(drv->api, c->vm_id, &c->vm, &err) < 0)
        log_warn("hcs: container %s: utility vm %s: %s", c->handle, c->vm_id, err.msg);
    if (hcs_system_open(drv->api, c->sys_id, &c->sys, &err) < 0) {
        log_warn("hcs: container %s: %s (it is reported stopped)", c->handle, err.msg);
        return;
    }
    if (hcs_system_set_callback(c->sys, system_event_cb, c, &err) < 0)
        log_warn("hcs: container %s: %s", c->handle, err.msg);
    char *props = NULL;
    /* A system that answers a Statistics query runs; one that stopped
     * while we were away answers with an error. */
    if (hcs_system_properties(c->sys, "{\"PropertyTypes\":[\"Statistics\"]}", &props, &err) == 0)
        c->status = RT_CONTAINER_RUNNING;
    free(props);
    hcs_dproc_reattach(drv, c);
}

static int
hcs_open(const struct rt_config *cfg, void **out, struct err *err)
{
    if (!cfg || !cfg->state_root || !cfg->state_root[0])
        return err_set(err, EINVAL, "hcs runtime: a state root is needed");
    bool hyperv = false;
    if (cfg->isolation && strcmp(cfg->isolation, "hyperv") == 0)
        hyperv = true;
    else if (cfg->isolation && strcmp(cfg->isolation, "process") != 0)
        return err_set(err, EINVAL, "hcs runtime: isolation %s: want process or hyperv",
                       cfg->isolation);
    struct hcs_uvm_config uvm = {.memory_mb = cfg->hyperv_memory_mb, .cpus = cfg->hyperv_cpus};
    struct hcs_uvm_size size;
    if (hcs_uvm_size(&uvm, 0, 0, &size, err) < 0)
        return err_wrap(err, "hcs runtime");
    struct hcs_drv *drv = calloc(1, sizeof(*drv));
    if (!drv)
        return err_set(err, ENOMEM, "hcs runtime: out of memory");
    pthread_mutex_init(&drv->mu, NULL);
    drv->uvm = uvm;
    drv->default_hyperv = hyperv;
    drv->max_output_bytes = cfg->max_output_bytes;
    drv->state_root = strdup(cfg->state_root);
    drv->records = join(cfg->state_root, "hcs");
    drv->admit = hcs_admit_new(hcs_host_commit, NULL);
    if (!drv->state_root || !drv->records || !drv->admit) {
        hcs_close(drv);
        return err_set(err, ENOMEM, "hcs runtime: out of memory");
    }
    int ret = hcs_mkdir(drv->state_root, err);
    if (ret == 0)
        ret = hcs_mkdir(drv->records, err);
    if (ret < 0) {
        hcs_close(drv);
        return err_wrap(err, "hcs runtime");
    }
    /* computecore.dll missing or HCS not answering does not stop the
     * daemon: probe() reports it and each operation fails with it. */
    hcs_detect(NULL, &drv->caps);
    drv->usable = hcs_api_open(NULL, &drv->api, &drv->unusable) == 0 &&
                  (drv->caps.process_usable || drv->caps.hyperv_usable);
    if (drv->api && !drv->usable)
        err_set(&drv->unusable, ERR_UNAVAILABLE, "runtime hcs: %s", drv->caps.process_reason);
    if (drv->usable) {
        char **handles = NULL;
        struct err lerr = {0};
        if (records_list(drv, &handles, &lerr) < 0)
            log_warn("hcs: %s", lerr.msg);
        for (size_t i = 0; handles && handles[i]; i++) {
            struct hcs_dctr *c = NULL;
            if (record_read(drv, handles[i], &c, &lerr) < 0) {
                log_warn("hcs: %s; removing it", lerr.msg);
                record_remove(drv, handles[i]);
                continue;
            }
            reattach(drv, c);
            c->next = drv->ctrs;
            drv->ctrs = c;
        }
        strv_free(handles);
    }
    *out = drv;
    return 0;
}

static int
check_usable(struct hcs_drv *drv, struct err *err)
{
    if (drv->usable)
        return 0;
    err_copy(err, &drv->unusable);
    if (err->code != ERR_UNAVAILABLE && err->code != ENOMEM)
        err->code = ERR_UNAVAILABLE;
    return -err->code;
}

static int
hcs_probe(void *p, struct err *err)
{
    return check_usable(p, err);
}

void
hcs_driver_caps(void *ctx, struct hcs_caps *out)
{
    struct hcs_drv *drv = ctx;
    *out = drv->caps;
}

void
hcs_driver_set_commit_reader(void *ctx, hcs_commit_read_fn read, void *arg)
{
    struct hcs_drv *drv = ctx;
    struct hcs_admit *a = hcs_admit_new(read, arg);
    if (!a)
        return;
    hcs_admit_free(drv->admit);
    drv->admit = a;
}

/* ---- create ---- */

/* A container being made: what the documents point at. */
struct build {
    struct hcs_layer *layers;
    char (*layer_ids)[HCS_GUID_SIZE];
    char (*layer_paths)[HCS_PATH_MAX + 1];
    char (*guest_paths)[160];
    size_t nlayers;
    struct hcs_mapped_dir *mounts;
    char (*mount_src)[HCS_PATH_MAX + 1];
    char (*mount_dst)[HCS_PATH_MAX + 1];
    size_t nmounts;
};

static void
build_free(struct build *b)
{
    free(b->layers);
    free(b->layer_ids);
    free(b->layer_paths);
    free(b->guest_paths);
    free(b->mounts);
    free(b->mount_src);
    free(b->mount_dst);
}

static int
build_prepare(const struct rt_container_spec *spec, struct build *b, struct err *err)
{
    /* A raw rootfs is the container's one layer folder (rootfs_normalise). */
    char *const raw[] = {(char *)spec->rootfs, NULL};
    char *const *layers = spec->layers ? spec->layers : spec->rootfs ? raw : NULL;
    b->nlayers = layers ? strv_len(layers) : 0;
    if (b->nlayers == 0)
        return err_set(err, EINVAL,
                       "container %s: the hcs runtime needs the image's layer folders or a raw "
                       "rootfs (none given)",
                       spec->handle);
    b->nmounts = spec->nmounts;
    size_t nm = b->nmounts ? b->nmounts : 1;
    b->layers = calloc(b->nlayers, sizeof(*b->layers));
    b->layer_ids = calloc(b->nlayers, sizeof(*b->layer_ids));
    b->layer_paths = calloc(b->nlayers, sizeof(*b->layer_paths));
    b->guest_paths = calloc(b->nlayers + nm, sizeof(*b->guest_paths));
    b->mounts = calloc(nm, sizeof(*b->mounts));
    b->mount_src = calloc(nm, sizeof(*b->mount_src));
    b->mount_dst = calloc(nm, sizeof(*b->mount_dst));
    if (!b->layers || !b->layer_ids || !b->layer_paths || !b->guest_paths || !b->mounts ||
        !b->mount_src || !b->mount_dst)
        return err_set(err, ENOMEM, "container %s: out of memory", spec->handle);
    for (size_t i = 0; i < b->nlayers; i++) {
        /* A CimFS layer is the mounted CIM's volume, \\?\Volume{GUID}\, as it is. */
        int ret = 0;
        if (hcs_is_volume_guid_path(layers[i]))
            snprintf(b->layer_paths[i], HCS_PATH_MAX + 1, "%s", layers[i]);
        else
            ret = hcs_path_to_windows(layers[i], b->layer_paths[i], HCS_PATH_MAX + 1, err);
        if (ret < 0)
            return err_wrap(err, "container %s: layer %zu", spec->handle, i);
        const char *name = strrchr(b->layer_paths[i], '\\');
        if (spec->layers && spec->layer_ids && spec->layer_ids[i] &&
            hcs_guid_valid(spec->layer_ids[i]))
            snprintf(b->layer_ids[i], HCS_GUID_SIZE, "%s", spec->layer_ids[i]);
        else if ((ret = hcs_guid_layer(name ? name + 1 : b->layer_paths[i], b->layer_ids[i], err)) <
                 0)
            return ret;
        b->layers[i] = (struct hcs_layer){b->layer_ids[i], b->layer_paths[i]};
    }
    for (size_t i = 0; i < b->nmounts; i++) {
        const struct rt_mount *m = &spec->mounts[i];
        int ret = hcs_path_to_windows(m->source, b->mount_src[i], HCS_PATH_MAX + 1, err);
        if (ret == 0)
            ret = hcs_path_to_windows(m->target, b->mount_dst[i], HCS_PATH_MAX + 1, err);
        if (ret < 0)
            return err_wrap(err, "container %s: mount %zu", spec->handle, i);
        b->mounts[i] = (struct hcs_mapped_dir){b->mount_src[i], b->mount_dst[i], m->readonly};
    }
    return 0;
}

/* Fills the fields of the container document common to both isolations. */
static int
container_doc_fill(const struct rt_container_spec *spec, uint32_t processors,
                   struct hcs_container_doc *d, char *hostname, struct err *err)
{
    snprintf(hostname, 64, "%.63s", spec->hostname ? spec->hostname : spec->handle);
    d->hostname = hostname;
    d->memory_mb = hcs_memory_mb(spec->limits.memory_bytes);
    if (processors == 0)
        processors = 1;
    int ret = hcs_cpu_limits(spec->limits.cpu_shares, spec->limits.cpu_quota_pct, processors,
                             &d->processor, err);
    return ret < 0 ? err_wrap(err, "container %s", spec->handle) : 0;
}

static int
system_make(struct hcs_drv *drv, const char *id, json_object *doc, struct hcs_system **out,
            struct err *err)
{
    cleanup_free char *s = doc ? hcs_doc_string(doc) : NULL;
    json_object_put(doc);
    if (!s)
        return err->code ? -err->code
                         : err_set(err, ENOMEM, "compute system %s: out of memory", id);
    return hcs_system_create(drv->api, id, s, HCS_OP_TIMEOUT_MS, out, err);
}

static int
vm_modify(struct hcs_dctr *c, json_object *req, struct err *err)
{
    if (!req)
        return -err->code;
    cleanup_free char *s = hcs_doc_string(req);
    json_object_put(req);
    if (!s)
        return err_set(err, ENOMEM, "utility vm of %s: out of memory", c->handle);
    return hcs_system_modify(c->vm, s, HCS_OP_TIMEOUT_MS, err);
}

/*
 * The container's writable layer: what the daemon mounted (spec->scratch:
 * the scratch VHDX's volume under process isolation, the VHDX itself
 * under hyperv; store/layer_wcifs_windows.c). NULL with err set when
 * there is none.
 */
static const char *
scratch_of(const struct rt_container_spec *spec, bool hyperv, struct err *err)
{
    if (spec->scratch && spec->scratch[0])
        return spec->scratch;
    if (!spec->layers && !spec->rootfs)
        return ""; /* no layers either: refused by name further on */
    err_set(err, ENOTSUP,
            "container %s: no writable layer (%s) was mounted for it: the daemon mounts one "
            "through computestorage.dll for every container",
            spec->handle, hyperv ? "a scratch .vhdx" : "a mounted scratch volume");
    return NULL;
}

/*
 * The utility VM's own scratch, vhd (<dir>\vm\sandbox.vhdx), copied from
 * the template the base layer's import made (<base>\UtilityVM\
 * SystemTemplate.vhdx, store/wclayer_uvm.h), as hcsshim makes a VM's
 * scratch. A base layer without one carries no utility VM: that image
 * runs under process isolation only.
 */
static int
uvm_scratch_make(const char *handle, const char *base, const char *dir, const char *vhd,
                 struct err *err)
{
    char tmpl[HCS_PATH_MAX + 1], vmdir[HCS_PATH_MAX + 1];
    if (snprintf(tmpl, sizeof(tmpl), "%s\\UtilityVM\\SystemTemplate.vhdx", base) >=
            (int)sizeof(tmpl) ||
        snprintf(vmdir, sizeof(vmdir), "%s\\vm", dir) >= (int)sizeof(vmdir))
        return err_set(err, EINVAL, "container %s: base layer path too long", handle);
    int ret = hcs_mkdir(vmdir, err);
    cleanup_free wchar_t *wt = win_wide(tmpl);
    cleanup_free wchar_t *wv = win_wide(vhd);
    if (ret == 0 && (!wt || !wv))
        ret = err_set(err, ENOMEM, "container %s: out of memory", handle);
    if (ret == 0 && !CopyFileW(wt, wv, FALSE)) {
        DWORD e = GetLastError();
        if (e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND)
            return err_set(err, ERR_INVALID_CONTENT,
                           "container %s: hyperv: the base layer %.200s has no "
                           "UtilityVM\\SystemTemplate.vhdx (an image without a utility vm runs "
                           "under process isolation only)",
                           handle, base);
        return err_set(err, EIO, "container %s: copy %.200s to %.200s: error %lu", handle, tmpl,
                       vhd, (unsigned long)e);
    }
    return ret;
}

/*
 * The container's HCN endpoint as the utility VM's network adapter, as
 * hcsshim gives a Windows utility VM one: the namespace to the guest, the
 * adapter announced (pre-add), then added; the hosted container joins
 * the namespace. Without a network (loopback only) nothing is sent.
 */
static int
vm_nic_add(struct hcs_dctr *c, const struct rt_container_spec *spec, struct hcs_container_doc *d,
           struct err *err)
{
    const struct rt_net_adapter *a = spec->net_adapter;
    if (!a || !spec->netns_path)
        return 0;
    struct hcs_nic n = {.endpoint_id = a->endpoint_id,
                        .namespace_id = spec->netns_path,
                        .mac = a->mac,
                        .ip = a->ip,
                        .prefix = a->prefix,
                        .gateway = a->gateway};
    /* Recorded before the VM has any of it: a daemon killed from here on
     * leaves a record its successor's delete removes the adapter by. */
    snprintf(c->nic_ep, sizeof(c->nic_ep), "%s", a->endpoint_id);
    snprintf(c->nic_ns, sizeof(c->nic_ns), "%s", spec->netns_path);
    snprintf(c->nic_mac, sizeof(c->nic_mac), "%s", a->mac);
    int ret = record_write(c->drv, c, err);
    if (ret == 0)
        ret = vm_modify(c, hcs_req_netns_add(&n, err), err);
    if (ret == 0)
        ret = vm_modify(c, hcs_req_nic_preadd(&n, err), err);
    if (ret == 0)
        ret = vm_modify(c, hcs_req_nic_add(&n, err), err);
    if (ret < 0) {
        c->nic_ep[0] = '\0'; /* the undo terminates the VM, adapter and all */
        return err_wrap(err, "container %s: the utility vm's network adapter", spec->handle);
    }
    d->network_namespace = spec->netns_path;
    return 0;
}

/* Takes the adapter away before the VM goes (logged: the VM's end removes it anyway). */
static void
vm_nic_remove(struct hcs_dctr *c)
{
    if (!c->vm || !c->nic_ep[0])
        return;
    struct hcs_nic n = {.endpoint_id = c->nic_ep, .namespace_id = c->nic_ns, .mac = c->nic_mac};
    struct err e = {0};
    if (vm_modify(c, hcs_req_nic_remove(&n, &e), &e) < 0 ||
        vm_modify(c, hcs_req_netns_remove(&n, &e), &e) < 0)
        log_info("hcs: container %s: remove the utility vm's network adapter: %s", c->handle,
                 e.msg);
    c->nic_ep[0] = '\0';
}

/* Boots the utility VM of c and gives it the container's storage; fills d for the hosted doc. */
static int
vm_up(struct hcs_drv *drv, struct hcs_dctr *c, const struct rt_container_spec *spec,
      const char *scratch, struct build *b, struct hcs_container_doc *d, char *hostname,
      struct err *err)
{
    struct hcs_uvm_size size;
    int ret = hcs_uvm_size(&drv->uvm, spec->limits.memory_bytes, drv->caps.lp_count, &size, err);
    if (ret < 0)
        return err_wrap(err, "container %s", spec->handle);
    ret = hcs_admit_reserve(drv->admit, size.memory_mb, &c->ticket, err);
    if (ret < 0)
        return ret; /* the message names the VM and the numbers; the daemon adds the handle */
    c->admitted = true;
    char os_files[HCS_PATH_MAX + 1], vhd[HCS_PATH_MAX + 1], dir[HCS_PATH_MAX + 1];
    const char *base = b->layer_paths[b->nlayers - 1];
    if (snprintf(os_files, sizeof(os_files), "%s\\UtilityVM\\Files", base) >= (int)sizeof(os_files))
        return err_set(err, EINVAL, "container %s: base layer path too long", spec->handle);
    if ((ret = hcs_path_to_windows(spec->dir, dir, sizeof(dir), err)) < 0)
        return err_wrap(err, "container %s: its directory", spec->handle);
    snprintf(vhd, sizeof(vhd), "%s\\vm\\sandbox.vhdx", dir);
    if (!scratch[0])
        return err_set(err, EINVAL, "container %s: hyperv needs a scratch .vhdx", spec->handle);
    if ((ret = uvm_scratch_make(spec->handle, base, dir, vhd, err)) < 0)
        return ret;
    /* The VM's worker opens both disks, as hcsshim grants it before it attaches them. */
    if ((ret = hcs_grant_vm_access(drv->api, c->vm_id, vhd, err)) < 0 ||
        (ret = hcs_grant_vm_access(drv->api, c->vm_id, scratch, err)) < 0)
        return err_wrap(err, "container %s", spec->handle);
    struct hcs_uvm_doc u = {.memory_mb = size.memory_mb,
                            .processors = size.processors,
                            .os_files_path = os_files,
                            .scratch_vhd = vhd};
    ret = system_make(drv, c->vm_id, hcs_doc_uvm(&u, err), &c->vm, err);
    if (ret == 0)
        ret = hcs_system_start(c->vm, HCS_OP_TIMEOUT_MS, err);
    if (ret < 0)
        return ret;
    hcs_admit_commit(drv->admit, c->ticket);
    /* The layers as VSMB shares, base first (l0), then the scratch and their union. */
    for (size_t i = 0; i < b->nlayers && ret == 0; i++) {
        size_t k = b->nlayers - 1 - i;
        char share[16];
        snprintf(share, sizeof(share), "l%zu", i);
        ret = vm_modify(c, hcs_req_vsmb_add(share, b->layer_paths[k], HCS_VSMB_LAYER, err), err);
        if (ret == 0)
            ret = hcs_vsmb_guest_path(share, b->guest_paths[k], sizeof(b->guest_paths[k]), err);
        b->layers[k].path = b->guest_paths[k];
    }
    if (ret == 0)
        ret = vm_modify(c, hcs_req_scsi_add(HCS_SCRATCH_LUN, scratch, HCS_GUEST_ROOT, err), err);
    if (ret == 0)
        ret = vm_modify(c, hcs_req_combined_layers_add(HCS_GUEST_ROOT, b->layers, b->nlayers, err),
                        err);
    for (size_t i = 0; i < b->nmounts && ret == 0; i++) {
        char share[16];
        snprintf(share, sizeof(share), "m%zu", i);
        char *guest = b->guest_paths[b->nlayers + i];
        ret = vm_modify(
            c,
            hcs_req_vsmb_add(share, b->mount_src[i],
                             b->mounts[i].readonly ? HCS_VSMB_VOLUME_RO : HCS_VSMB_VOLUME_RW, err),
            err);
        if (ret == 0)
            ret = hcs_vsmb_guest_path(share, guest, 160, err);
        b->mounts[i].host_path = guest;
    }
    if (ret == 0)
        ret = vm_nic_add(c, spec, d, err);
    if (ret < 0)
        return ret;
    d->scratch_path = HCS_GUEST_ROOT;
    ret = container_doc_fill(spec, size.processors, d, hostname, err);
    d->memory_mb = size.task_memory_mb;
    return ret;
}

/* Undoes a create that failed part-way: systems terminated and closed, promise and record gone. */
static void
create_undo(struct hcs_drv *drv, struct hcs_dctr *c)
{
    struct err ignored = {0};
    if (c->sys && hcs_system_terminate(c->sys, HCS_OP_TIMEOUT_MS, &ignored) < 0)
        log_warn("hcs: undo create of %s: %s", c->handle, ignored.msg);
    if (c->vm && hcs_system_terminate(c->vm, HCS_OP_TIMEOUT_MS, &ignored) < 0)
        log_warn("hcs: undo create of %s: %s", c->handle, ignored.msg);
    hcs_system_close(c->sys);
    hcs_system_close(c->vm);
    c->sys = c->vm = NULL;
    if (c->admitted)
        hcs_admit_release(drv->admit, c->ticket);
    c->admitted = false;
    record_remove(drv, c->handle);
}

static int
hcs_container_create(void *p, const struct rt_container_spec *spec, struct err *err)
{
    struct hcs_drv *drv = p;
    int ret = check_usable(drv, err);
    if (ret < 0)
        return ret;
    if (!rt_handle_valid(spec->handle))
        return err_set(err, EINVAL, "container handle %s: invalid (1-128 of [A-Za-z0-9_.-])",
                       spec->handle ? spec->handle : "(null)");
    if (!spec->dir || !spec->dir[0])
        return err_set(err, EINVAL, "container %s: no directory", spec->handle);
    bool hyperv = drv->default_hyperv;
    if (spec->isolation && strcmp(spec->isolation, "hyperv") == 0)
        hyperv = true;
    else if (spec->isolation && strcmp(spec->isolation, "process") == 0)
        hyperv = false;
    else if (spec->isolation)
        return err_set(err, EINVAL, "container %s: isolation %.32s: want process or hyperv",
                       spec->handle, spec->isolation);
    if (hyperv && !drv->caps.hyperv_usable)
        return err_set(err, ERR_CONFLICT, "container %s: %s", spec->handle,
                       drv->caps.hyperv_reason);
    if (!hyperv && !drv->caps.process_usable)
        return err_set(err, ERR_UNAVAILABLE, "container %s: process isolation: %s", spec->handle,
                       drv->caps.process_reason);
    struct hcs_dctr *old = hcs_dctr_get(drv, spec->handle);
    if (old) {
        hcs_dctr_put(drv, old);
        return err_set(err, ERR_CONFLICT, "container %s: exists", spec->handle);
    }
    struct build b = {0};
    struct hcs_container_doc d = {.owner = HCS_OWNER};
    char hostname[64];
    struct hcs_dctr *c = calloc(1, sizeof(*c));
    if (!c || !(c->handle = strdup(spec->handle)) || !(c->dir = strdup(spec->dir))) {
        if (c)
            free(c->handle);
        free(c);
        return err_set(err, ENOMEM, "container %s: out of memory", spec->handle);
    }
    c->refs = 1;
    c->drv = drv;
    c->hyperv = hyperv;
    c->status = RT_CONTAINER_CREATED;
    uint8_t rnd[4];
    if ((ret = hcs_random_bytes(rnd, sizeof(rnd), err)) < 0)
        goto fail;
    snprintf(c->sys_id, sizeof(c->sys_id), "berth-%s-%02x%02x%02x%02x", spec->handle, rnd[0],
             rnd[1], rnd[2], rnd[3]);
    if (hyperv)
        snprintf(c->vm_id, sizeof(c->vm_id), "%s-vm", c->sys_id);
    const char *scratch = scratch_of(spec, hyperv, err);
    if (!scratch) {
        ret = -err->code;
        goto fail;
    }
    if ((ret = build_prepare(spec, &b, err)) < 0)
        goto fail;
    d.layers = b.layers;
    d.nlayers = b.nlayers;
    d.mounts = b.mounts;
    d.nmounts = b.nmounts;
    /* The daemon's HCN namespace (daemon/net.h's netns_path on Windows);
     * under hyperv once the utility VM has the endpoint's adapter (vm_nic_add). */
    d.network_namespace = hyperv ? NULL : spec->netns_path;
    /* The record first: a daemon killed from here on finds what to clean. */
    if ((ret = record_write(drv, c, err)) < 0)
        goto fail;
    json_object *doc;
    if (hyperv) {
        if ((ret = vm_up(drv, c, spec, scratch, &b, &d, hostname, err)) < 0)
            goto undo;
        doc = hcs_doc_hosted_container(&d, c->vm_id, err);
    } else {
        d.scratch_path = scratch;
        if ((ret = container_doc_fill(spec, drv->caps.lp_count, &d, hostname, err)) < 0)
            goto undo;
        doc = hcs_doc_container(&d, err);
    }
    if (!doc) {
        ret = -err->code;
        err_wrap(err, "container %s", spec->handle);
        goto undo;
    }
    if ((ret = system_make(drv, c->sys_id, doc, &c->sys, err)) < 0 ||
        (ret = hcs_system_set_callback(c->sys, system_event_cb, c, err)) < 0 ||
        (ret = hcs_system_start(c->sys, HCS_OP_TIMEOUT_MS, err)) < 0)
        goto undo;
    build_free(&b);
    pthread_mutex_lock(&drv->mu);
    if (c->status == RT_CONTAINER_CREATED) /* not stopped by an event already */
        c->status = RT_CONTAINER_RUNNING;
    c->next = drv->ctrs;
    drv->ctrs = c;
    pthread_mutex_unlock(&drv->mu);
    return 0;
undo:
    create_undo(drv, c);
fail:
    build_free(&b);
    dctr_free(c);
    return ret;
}

/* ---- delete, state, stats, list ---- */

static int
hcs_container_delete(void *p, const char *handle, const char *dir, struct err *err)
{
    struct hcs_drv *drv = p;
    (void)dir;
    int ret = check_usable(drv, err);
    if (ret < 0)
        return ret;
    struct hcs_dctr *c = hcs_dctr_get(drv, handle);
    if (!c) {
        record_remove(drv, handle); /* a record whose system was never made */
        return 0;
    }
    struct err e = {0};
    if (c->sys) {
        /* Shut down with grace, then terminate what did not stop. */
        if (c->status == RT_CONTAINER_RUNNING &&
            hcs_system_shutdown(c->sys, HCS_SHUTDOWN_GRACE_MS, &e) < 0)
            log_info("hcs: container %s: shutdown: %s; terminating", handle, e.msg);
        if ((ret = hcs_system_terminate(c->sys, HCS_OP_TIMEOUT_MS, err)) < 0 && ret != -ESRCH &&
            ret != -ENOENT) {
            hcs_dctr_put(drv, c);
            return err_wrap(err, "delete container %s", handle);
        }
    }
    vm_nic_remove(c);
    if (c->vm && (ret = hcs_system_terminate(c->vm, HCS_OP_TIMEOUT_MS, err)) < 0 && ret != -ESRCH &&
        ret != -ENOENT) {
        hcs_dctr_put(drv, c);
        return err_wrap(err, "delete container %s: its utility vm", handle);
    }
    if (c->admitted)
        hcs_admit_release(drv->admit, c->ticket);
    c->admitted = false;
    pthread_mutex_lock(&drv->mu);
    c->status = RT_CONTAINER_STOPPED;
    pthread_mutex_unlock(&drv->mu);
    record_remove(drv, handle);
    if (dctr_unlink(drv, c))
        hcs_dctr_put(drv, c); /* the list's reference */
    hcs_dctr_put(drv, c);
    return 0;
}

static int
hcs_container_state(void *p, const char *handle, struct rt_container_state *out, struct err *err)
{
    struct hcs_drv *drv = p;
    int ret = check_usable(drv, err);
    if (ret < 0)
        return ret;
    *out = (struct rt_container_state){.status = RT_CONTAINER_UNKNOWN};
    struct hcs_dctr *c = hcs_dctr_get(drv, handle);
    if (!c)
        return err_set(err, ENOENT, "container %s: no such compute system", handle);
    pthread_mutex_lock(&drv->mu);
    out->status = c->status;
    pthread_mutex_unlock(&drv->mu);
    hcs_dctr_put(drv, c);
    return 0;
}

static int
hcs_stats(void *p, const char *handle, struct rt_stats *out, struct err *err)
{
    struct hcs_drv *drv = p;
    int ret = check_usable(drv, err);
    if (ret < 0)
        return ret;
    struct hcs_dctr *c = hcs_dctr_get(drv, handle);
    if (!c || !c->sys) {
        hcs_dctr_put(drv, c);
        return err_set(err, ERR_CONFLICT, "stats of container %s: not running", handle);
    }
    char *props = NULL;
    ret = hcs_system_properties(c->sys, "{\"PropertyTypes\":[\"Statistics\"]}", &props, err);
    hcs_dctr_put(drv, c);
    struct hcs_stats st = {0};
    if (ret == 0)
        ret = hcs_props_statistics(props, &st, err);
    free(props);
    if (ret < 0)
        return err_wrap(err, "stats of container %s", handle);
    out->memory_bytes = st.memory_commit_bytes;
    out->cpu_ns = st.cpu_ns;
    return 0;
}

static int
hcs_isolation_usable(void *p, const char *mode, struct err *err)
{
    struct hcs_drv *drv = p;
    if (!drv->api)
        return check_usable(drv, err);
    if (strcmp(mode, "process") == 0)
        return drv->caps.process_usable
                   ? 0
                   : err_set(err, ERR_UNAVAILABLE, "%s", drv->caps.process_reason);
    if (strcmp(mode, "hyperv") == 0)
        return drv->caps.hyperv_usable ? 0
                                       : err_set(err, ERR_CONFLICT, "%s", drv->caps.hyperv_reason);
    return err_set(err, EINVAL, "isolation %.32s: want process or hyperv", mode);
}

static void
hcs_set_stop_cb(void *p, void (*cb)(void *arg, const char *handle), void *arg)
{
    struct hcs_drv *drv = p;
    pthread_mutex_lock(&drv->mu);
    drv->stop_cb = cb;
    drv->stop_arg = arg;
    pthread_mutex_unlock(&drv->mu);
}

static int
hcs_container_list(void *p, char ***handles, struct err *err)
{
    struct hcs_drv *drv = p;
    return records_list(drv, handles, err);
}

const struct rt_driver rt_hcs_driver = {
    .name = "hcs",
    .isolation = hcs_isolations,
    .open = hcs_open,
    .close = hcs_close,
    .probe = hcs_probe,
    .container_create = hcs_container_create,
    .container_delete = hcs_container_delete,
    .container_state = hcs_container_state,
    .stats = hcs_stats,
    .proc_spawn = hcs_proc_spawn,
    .proc_signal = hcs_proc_signal,
    .proc_status = hcs_proc_status,
    .proc_output_open = hcs_proc_output_open,
    .proc_stdin_open = hcs_proc_stdin_open,
    .proc_stdin_close = hcs_proc_stdin_close,
    .proc_watch_dir = hcs_proc_watch_dir,
    .proc_change = hcs_proc_change,
    .proc_list = hcs_proc_list,
    .proc_times = hcs_proc_times,
    .proc_remove = hcs_proc_remove,
    .container_list = hcs_container_list,
    .isolation_usable = hcs_isolation_usable,
    .rootfs_normalise = hcs_path_from_raw_path,
    .set_stop_cb = hcs_set_stop_cb,
};
