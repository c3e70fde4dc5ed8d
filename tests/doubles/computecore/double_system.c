/*
 * TEST DOUBLE of computecore.dll (see computecore_double.h): compute
 * systems, from create to close, and the events of their exit. Not HCS.
 * Exports run on the caller's thread, their operations on threads of the
 * double (computecore_double.c); all state is under the double's lock.
 */
#include "computecore_double.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct dsys *systems;

static struct dsys *
dsys_find(const char *id)
{
    for (struct dsys *s = systems; s; s = s->next)
        if (s->registered && _stricmp(s->id, id) == 0)
            return s;
    return NULL;
}

static void
dsys_unregister(struct dsys *s)
{
    if (!s->registered)
        return;
    s->registered = false;
    for (struct dsys **p = &systems; *p; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            break;
        }
    }
    dbl_system_release(s);
}

void
dbl_system_release(struct dsys *s)
{
    if (InterlockedDecrement(&s->refs) != 0)
        return;
    for (struct dproc *p = s->procs, *next; p; p = next) {
        next = p->next;
        dbl_process_release(p);
    }
    free(s->id);
    free(s->owner);
    free(s->hosting_id);
    free(s);
}

/* ---- what outlives the client process (BERTH_HCS_DOUBLE_STATE) ---- */

/* The state file of id, or false when there is no state directory. */
static bool
kept_path(const char *id, char *path, size_t size)
{
    char dir[MAX_PATH];
    if (!dbl_env("BERTH_HCS_DOUBLE_STATE", dir, sizeof(dir)))
        return false;
    snprintf(path, size, "%s\\%s", dir, id);
    return true;
}

/* Writes s as running ("vm owner hosting"); lock held. */
static void
kept_write(const struct dsys *s)
{
    char path[MAX_PATH + 256];
    if (s->terminate_on_close || !kept_path(s->id, path, sizeof(path)))
        return;
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    fprintf(f, "%d %s %s\n", s->vm ? 1 : 0, s->owner ? s->owner : "-",
            s->hosting_id ? s->hosting_id : "-");
    fclose(f);
}

static void
kept_remove(const char *id)
{
    char path[MAX_PATH + 256];
    if (kept_path(id, path, sizeof(path)))
        DeleteFileA(path);
}

/* A system an earlier client process left running, registered again; lock held. */
static struct dsys *
kept_load(const char *id)
{
    char path[MAX_PATH + 256], owner[128], hosting[256];
    int vm = 0;
    if (!kept_path(id, path, sizeof(path)))
        return NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    int n = fscanf(f, "%d %127s %255s", &vm, owner, hosting);
    fclose(f);
    if (n != 3)
        return NULL;
    struct dsys *s = calloc(1, sizeof(*s));
    s->refs = 1; /* the list's */
    s->id = strdup(id);
    s->owner = strcmp(owner, "-") == 0 ? NULL : strdup(owner);
    s->hosting_id = strcmp(hosting, "-") == 0 ? NULL : strdup(hosting);
    s->vm = vm != 0;
    s->state = DSYS_RUNNING;
    s->started = GetTickCount64();
    s->registered = true;
    s->next = systems;
    systems = s;
    return s;
}

static HCS_SYSTEM
handle_new(struct dsys *s)
{
    struct dsys_handle *h = calloc(1, sizeof(*h));
    h->sys = s;
    InterlockedIncrement(&s->refs);
    dbl_lock();
    h->h.next = s->handles;
    s->handles = &h->h;
    s->nhandles++;
    dbl_unlock();
    return (HCS_SYSTEM)h;
}

static struct dsys *
sys_of(HCS_SYSTEM h)
{
    return h ? ((struct dsys_handle *)h)->sys : NULL;
}

/*
 * Stops s: every process ends with code, the state is STOPPED, the exit
 * event goes out, and hosted systems of a VM die with it. Lock not held.
 */
static void
dsys_stop(struct dsys *s, const char *exit_type, HRESULT status, DWORD code)
{
    dbl_lock();
    if (s->state == DSYS_STOPPED) {
        dbl_unlock();
        return;
    }
    struct dproc *procs[256];
    int n = 0;
    for (struct dproc *p = s->procs; p && n < 256; p = p->next) {
        InterlockedIncrement(&p->refs);
        procs[n++] = p;
    }
    dbl_unlock();
    for (int i = 0; i < n; i++) {
        dbl_process_kill(procs[i], code);
        dbl_process_release(procs[i]);
    }
    dbl_lock();
    s->state = DSYS_STOPPED;
    kept_remove(s->id);
    struct dsys *hosted[64];
    int nh = 0;
    for (struct dsys *o = systems; o && nh < 64; o = o->next) {
        if (o->hosting_id && _stricmp(o->hosting_id, s->id) == 0 && o->state != DSYS_STOPPED) {
            InterlockedIncrement(&o->refs);
            hosted[nh++] = o;
        }
    }
    dbl_broadcast();
    dbl_unlock();
    char data[128];
    snprintf(data, sizeof(data), "{\"Status\":%ld,\"ExitType\":\"%s\"}", (long)status, exit_type);
    dbl_fire(&s->handles, HcsEventSystemExited, data);
    for (int i = 0; i < nh; i++) {
        dsys_stop(hosted[i], "UnexpectedExit", HCS_E_UNEXPECTED_EXIT, DBL_EXIT_TERMINATED);
        dbl_system_release(hosted[i]);
    }
    dbl_lock();
    if (s->nhandles == 0)
        dsys_unregister(s);
    dbl_unlock();
}

static char *
result_error(HRESULT hr, const char *message, const char *event)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "Error", json_object_new_int((int32_t)hr));
    json_object_object_add(o, "ErrorMessage", json_object_new_string(message));
    json_object *evs = json_object_new_array();
    if (event) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "Message", json_object_new_string(event));
        json_object_object_add(e, "Provider", json_object_new_string("computecore test double"));
        json_object_array_add(evs, e);
    }
    json_object_object_add(o, "ErrorEvents", evs);
    char *s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
    return s;
}

static void
complete_error(struct dop *op, HRESULT hr, const char *message, const char *event)
{
    char *r = result_error(hr, message, event);
    dbl_op_complete(op, hr, r, NULL);
    free(r);
}

static void
create_work(struct dop *op)
{
    struct dsys *s = op->sys;
    json_object *doc = json_tokener_parse(op->arg ? op->arg : "");
    json_object *v, *sv;
    char event[256];
    if (!doc || !json_object_is_type(doc, json_type_object)) {
        complete_error(op, HCS_E_INVALID_JSON, "The JSON document is invalid.",
                       "the configuration is not a JSON object");
        goto out;
    }
    if (!json_object_object_get_ex(doc, "SchemaVersion", &sv) ||
        !json_object_object_get_ex(sv, "Major", &v) || json_object_get_int(v) != 2) {
        complete_error(op, HCS_E_INVALID_JSON, "The JSON document is invalid.",
                       "SchemaVersion is missing or not 2.x");
        goto out;
    }
    bool has_ctr = json_object_object_get_ex(doc, "Container", NULL);
    bool has_vm = json_object_object_get_ex(doc, "VirtualMachine", NULL);
    bool has_hosted = json_object_object_get_ex(doc, "HostedSystem", NULL);
    if (has_ctr + has_vm + has_hosted != 1) {
        complete_error(op, HCS_E_INVALID_JSON, "The JSON document is invalid.",
                       "want exactly one of Container, VirtualMachine, HostedSystem");
        goto out;
    }
    dbl_lock();
    s->vm = has_vm;
    if (json_object_object_get_ex(doc, "ShouldTerminateOnLastHandleClosed", &v))
        s->terminate_on_close = json_object_get_boolean(v);
    if (json_object_object_get_ex(doc, "Owner", &v))
        s->owner = strdup(json_object_get_string(v));
    if (has_hosted) {
        const char *host =
            json_object_object_get_ex(doc, "HostingSystemId", &v) ? json_object_get_string(v) : "";
        struct dsys *vm = dsys_find(host);
        if (!vm || !vm->vm || vm->state != DSYS_RUNNING) {
            dbl_unlock();
            snprintf(event, sizeof(event), "hosting system '%s' is not a running vm", host);
            complete_error(op, HCS_E_SYSTEM_NOT_FOUND,
                           "A virtual machine or container with the "
                           "specified identifier does not exist.",
                           event);
            goto out;
        }
        s->hosting_id = strdup(host);
    }
    if (dsys_find(s->id)) {
        dbl_unlock();
        complete_error(op, HCS_E_SYSTEM_ALREADY_EXISTS,
                       "A virtual machine or container with the specified identifier already "
                       "exists.",
                       NULL);
        goto out;
    }
    s->registered = true;
    InterlockedIncrement(&s->refs);
    s->next = systems;
    systems = s;
    dbl_unlock();
    dbl_op_complete(op, S_OK, NULL, NULL);
out:
    json_object_put(doc);
}

HRESULT WINAPI
HcsCreateComputeSystem(PCWSTR id, PCWSTR configuration, HCS_OPERATION operation,
                       const SECURITY_DESCRIPTOR *securityDescriptor, HCS_SYSTEM *computeSystem)
{
    (void)securityDescriptor;
    dbl_pin();
    if (!id || !configuration || !operation || !computeSystem)
        return E_INVALIDARG;
    struct dsys *s = calloc(1, sizeof(*s));
    s->refs = 1;
    s->id = dbl_narrow(id);
    s->state = DSYS_CREATED;
    struct dop *op = (struct dop *)operation;
    if (!dbl_op_use(op, s, NULL, configuration)) {
        dbl_system_release(s);
        return HCS_E_OPERATION_ALREADY_STARTED;
    }
    dbl_record("HcsCreateComputeSystem", s->id, op->arg);
    *computeSystem = handle_new(s);
    dbl_system_release(s); /* the handle and the operation hold it now */
    dbl_op_run(op, create_work);
    return S_OK;
}

HRESULT WINAPI
HcsOpenComputeSystem(PCWSTR id, DWORD requestedAccess, HCS_SYSTEM *computeSystem)
{
    (void)requestedAccess;
    dbl_pin();
    char *id8 = dbl_narrow(id);
    dbl_record("HcsOpenComputeSystem", id8, NULL);
    dbl_lock();
    struct dsys *s = id8 ? dsys_find(id8) : NULL;
    if (!s && id8)
        s = kept_load(id8);
    if (s)
        InterlockedIncrement(&s->refs);
    dbl_unlock();
    free(id8);
    if (!s)
        return HCS_E_SYSTEM_NOT_FOUND;
    *computeSystem = handle_new(s);
    dbl_system_release(s);
    return S_OK;
}

void WINAPI
HcsCloseComputeSystem(HCS_SYSTEM computeSystem)
{
    struct dsys_handle *h = (struct dsys_handle *)computeSystem;
    if (!h)
        return;
    struct dsys *s = h->sys;
    dbl_record("HcsCloseComputeSystem", s->id, NULL);
    dbl_lock();
    dbl_handle_drain(&s->handles, &h->h);
    bool last = --s->nhandles == 0;
    bool kill = last && s->terminate_on_close && s->registered && s->state != DSYS_STOPPED;
    if (last && s->state == DSYS_STOPPED)
        dsys_unregister(s);
    if (last && !s->registered && s->state == DSYS_CREATED)
        s->state = DSYS_STOPPED; /* its create failed */
    dbl_unlock();
    free(h);
    if (kill)
        dsys_stop(s, "ForcedExit", S_OK, DBL_EXIT_TERMINATED);
    dbl_system_release(s);
}

struct death {
    struct dsys *sys;
    long ms;
};

static DWORD WINAPI
death_main(void *p)
{
    struct death *d = p;
    Sleep((DWORD)d->ms);
    dsys_stop(d->sys, "UnexpectedExit", HCS_E_UNEXPECTED_EXIT, DBL_EXIT_TERMINATED);
    dbl_system_release(d->sys);
    free(d);
    return 0;
}

void
dbl_system_die(struct dsys *s)
{
    struct death *d = malloc(sizeof(*d));
    d->sys = s;
    d->ms = 0;
    InterlockedIncrement(&s->refs);
    dbl_spawn(death_main, d);
}

static void
start_work(struct dop *op)
{
    struct dsys *s = op->sys;
    char event[256];
    dbl_lock();
    bool refused = !s->registered || s->state != DSYS_CREATED;
    if (!refused && !s->vm && dbl_fail("start-fails")) {
        s->state = DSYS_STOPPED;
        refused = true;
    }
    if (refused) {
        dbl_unlock();
        complete_error(op, HCS_E_INVALID_STATE,
                       "A virtual machine or container is not in a valid state to complete the "
                       "requested operation.",
                       NULL);
        return;
    }
    if (dbl_fail("start-hangs")) {
        while (!op->cancelled)
            dbl_wait(INFINITE);
        dbl_unlock();
        dbl_op_complete(op, HRESULT_FROM_WIN32(ERROR_CANCELLED), NULL, NULL);
        return;
    }
    if (s->vm && dbl_fail("no-hyperv")) {
        s->state = DSYS_STOPPED;
        dbl_unlock();
        snprintf(event, sizeof(event), "'%s' failed to start: the hypervisor is not running",
                 s->id);
        complete_error(op, HCS_E_HYPERV_NOT_INSTALLED,
                       "The virtual machine could not be started because a required feature is "
                       "not installed.",
                       event);
        return;
    }
    if (s->vm && dbl_fail("commit-limit")) {
        s->state = DSYS_STOPPED;
        dbl_unlock();
        snprintf(event, sizeof(event),
                 "'%s' could not initialize memory: the paging file is too small (0x800705AF)",
                 s->id);
        complete_error(op, HRESULT_FROM_WIN32(ERROR_COMMITMENT_LIMIT),
                       "The paging file is too small for this operation to complete.", event);
        return;
    }
    s->state = DSYS_RUNNING;
    s->started = GetTickCount64();
    if (dbl_fail("die-at-start")) {
        /* Its exit event comes before the start's own answer, which is success. */
        dbl_unlock();
        dsys_stop(s, "UnexpectedExit", HCS_E_UNEXPECTED_EXIT, DBL_EXIT_TERMINATED);
        dbl_op_complete(op, S_OK, NULL, NULL);
        return;
    }
    kept_write(s);
    long die = dbl_fail_value("die-after-ms", -1);
    if (die >= 0) {
        struct death *d = malloc(sizeof(*d));
        d->sys = s;
        d->ms = die;
        InterlockedIncrement(&s->refs);
        dbl_spawn(death_main, d);
    }
    dbl_unlock();
    dbl_op_complete(op, S_OK, NULL, NULL);
}

HRESULT WINAPI
HcsStartComputeSystem(HCS_SYSTEM computeSystem, HCS_OPERATION operation, PCWSTR options)
{
    struct dsys *s = sys_of(computeSystem);
    if (!s || !operation)
        return E_INVALIDARG;
    if (!dbl_op_use((struct dop *)operation, s, NULL, options))
        return HCS_E_OPERATION_ALREADY_STARTED;
    dbl_record("HcsStartComputeSystem", s->id, ((struct dop *)operation)->arg);
    dbl_op_run((struct dop *)operation, start_work);
    return S_OK;
}

static void
stop_work(struct dop *op, bool graceful)
{
    struct dsys *s = op->sys;
    dbl_lock();
    enum dsys_state st = s->state;
    bool reg = s->registered;
    dbl_unlock();
    if (!reg || st == DSYS_STOPPED) {
        complete_error(op, HCS_E_SYSTEM_ALREADY_STOPPED,
                       "The virtual machine or container with the specified identifier is not "
                       "running.",
                       NULL);
        return;
    }
    if (graceful && st != DSYS_RUNNING) {
        complete_error(op, HCS_E_INVALID_STATE,
                       "A virtual machine or container is not in a valid state to complete the "
                       "requested operation.",
                       NULL);
        return;
    }
    if (graceful)
        dsys_stop(s, "GracefulExit", S_OK, DBL_EXIT_CTRL_C);
    else
        dsys_stop(s, "ForcedExit", S_OK, DBL_EXIT_TERMINATED);
    dbl_op_complete(op, S_OK, NULL, NULL);
}

static void
shutdown_work(struct dop *op)
{
    stop_work(op, true);
}

static void
terminate_work(struct dop *op)
{
    stop_work(op, false);
}

HRESULT WINAPI
HcsShutDownComputeSystem(HCS_SYSTEM computeSystem, HCS_OPERATION operation, PCWSTR options)
{
    struct dsys *s = sys_of(computeSystem);
    if (!s || !operation)
        return E_INVALIDARG;
    if (!dbl_op_use((struct dop *)operation, s, NULL, options))
        return HCS_E_OPERATION_ALREADY_STARTED;
    dbl_record("HcsShutDownComputeSystem", s->id, ((struct dop *)operation)->arg);
    dbl_op_run((struct dop *)operation, shutdown_work);
    return S_OK;
}

HRESULT WINAPI
HcsTerminateComputeSystem(HCS_SYSTEM computeSystem, HCS_OPERATION operation, PCWSTR options)
{
    struct dsys *s = sys_of(computeSystem);
    if (!s || !operation)
        return E_INVALIDARG;
    if (!dbl_op_use((struct dop *)operation, s, NULL, options))
        return HCS_E_OPERATION_ALREADY_STARTED;
    dbl_record("HcsTerminateComputeSystem", s->id, ((struct dop *)operation)->arg);
    dbl_op_run((struct dop *)operation, terminate_work);
    return S_OK;
}

static const char *
state_name(enum dsys_state st)
{
    return st == DSYS_RUNNING ? "Running" : st == DSYS_CREATED ? "Created" : "Stopped";
}

static void
properties_work(struct dop *op)
{
    struct dsys *s = op->sys;
    json_object *q = op->arg && *op->arg ? json_tokener_parse(op->arg) : NULL;
    if (op->arg && *op->arg && !q) {
        complete_error(op, HCS_E_INVALID_JSON, "The JSON document is invalid.", "the query");
        return;
    }
    bool stats = false;
    json_object *types;
    if (q && json_object_object_get_ex(q, "PropertyTypes", &types)) {
        for (size_t i = 0; i < json_object_array_length(types); i++)
            if (strcmp(json_object_get_string(json_object_array_get_idx(types, i)), "Statistics") ==
                0)
                stats = true;
    }
    json_object_put(q);
    dbl_lock();
    json_object *o = json_object_new_object();
    json_object_object_add(o, "Id", json_object_new_string(s->id));
    json_object_object_add(o, "SystemType",
                           json_object_new_string(s->vm ? "VirtualMachine" : "Container"));
    json_object_object_add(o, "Owner", json_object_new_string(s->owner ? s->owner : ""));
    json_object_object_add(o, "State", json_object_new_string(state_name(s->state)));
    json_object_object_add(o, "Stopped", json_object_new_boolean(s->state == DSYS_STOPPED));
    if (stats) {
        uint64_t up = s->state == DSYS_RUNNING ? (GetTickCount64() - s->started) * 10000 : 0;
        json_object *st = json_object_new_object();
        json_object_object_add(st, "Uptime100ns", json_object_new_int64((int64_t)up));
        json_object *pr = json_object_new_object();
        json_object_object_add(pr, "TotalRuntime100ns", json_object_new_int64((int64_t)up / 2));
        json_object_object_add(st, "Processor", pr);
        json_object *mem = json_object_new_object();
        json_object_object_add(mem, "MemoryUsageCommitBytes", json_object_new_int64(64 << 20));
        json_object_object_add(mem, "MemoryUsagePrivateWorkingSetBytes",
                               json_object_new_int64(32 << 20));
        json_object_object_add(st, "Memory", mem);
        json_object_object_add(o, "Statistics", st);
    }
    dbl_unlock();
    dbl_op_complete(op, S_OK, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), NULL);
    json_object_put(o);
}

HRESULT WINAPI
HcsGetComputeSystemProperties(HCS_SYSTEM computeSystem, HCS_OPERATION operation,
                              PCWSTR propertyQuery)
{
    struct dsys *s = sys_of(computeSystem);
    if (!s || !operation)
        return E_INVALIDARG;
    if (!dbl_op_use((struct dop *)operation, s, NULL, propertyQuery))
        return HCS_E_OPERATION_ALREADY_STARTED;
    dbl_record("HcsGetComputeSystemProperties", s->id, ((struct dop *)operation)->arg);
    dbl_op_run((struct dop *)operation, properties_work);
    return S_OK;
}

static void
modify_work(struct dop *op)
{
    struct dsys *s = op->sys;
    json_object *doc = json_tokener_parse(op->arg ? op->arg : "");
    json_object *g, *v, *set;
    if (!doc || !json_object_is_type(doc, json_type_object) ||
        (!json_object_object_get_ex(doc, "ResourcePath", NULL) &&
         !json_object_object_get_ex(doc, "GuestRequest", NULL))) {
        complete_error(op, HCS_E_INVALID_JSON, "The JSON document is invalid.",
                       "want a ModifySettingRequest");
        json_object_put(doc);
        return;
    }
    /* The inbox GCS of Windows Server 2022 parses strictly. */
    if (json_object_object_get_ex(doc, "GuestRequest", &g) &&
        json_object_object_get_ex(g, "ResourceType", &v) &&
        strcmp(json_object_get_string(v), "CombinedLayers") == 0 &&
        json_object_object_get_ex(g, "Settings", &set) &&
        json_object_object_get_ex(set, "FilterType", NULL)) {
        complete_error(op, HCS_E_INVALID_JSON, "The JSON document is invalid.",
                       "CombinedLayers: unknown field FilterType");
        json_object_put(doc);
        return;
    }
    json_object_put(doc);
    dbl_lock();
    bool running = s->registered && s->state == DSYS_RUNNING;
    dbl_unlock();
    if (!running) {
        complete_error(op, HCS_E_INVALID_STATE,
                       "A virtual machine or container is not in a valid state to complete the "
                       "requested operation.",
                       NULL);
        return;
    }
    dbl_op_complete(op, S_OK, NULL, NULL);
}

HRESULT WINAPI
HcsModifyComputeSystem(HCS_SYSTEM computeSystem, HCS_OPERATION operation, PCWSTR configuration,
                       HANDLE identity)
{
    (void)identity;
    struct dsys *s = sys_of(computeSystem);
    if (!s || !operation || !configuration)
        return E_INVALIDARG;
    if (!dbl_op_use((struct dop *)operation, s, NULL, configuration))
        return HCS_E_OPERATION_ALREADY_STARTED;
    dbl_record("HcsModifyComputeSystem", s->id, ((struct dop *)operation)->arg);
    dbl_op_run((struct dop *)operation, modify_work);
    return S_OK;
}

HRESULT WINAPI
HcsSetComputeSystemCallback(HCS_SYSTEM computeSystem, HCS_EVENT_OPTIONS callbackOptions,
                            const void *context, HCS_EVENT_CALLBACK callback)
{
    (void)callbackOptions;
    struct dsys_handle *h = (struct dsys_handle *)computeSystem;
    if (!h)
        return E_INVALIDARG;
    dbl_lock();
    h->h.cb = callback;
    h->h.ctx = (void *)context;
    dbl_unlock();
    return S_OK;
}
