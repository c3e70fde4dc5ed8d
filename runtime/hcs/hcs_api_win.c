/*
 * computecore.dll through LoadLibraryExW and GetProcAddress, one
 * synchronous wrapper per call (hcs_api.h). Windows only. Every function
 * blocks on HCS; pool threads. The event trampolines run on HCS threads
 * and only convert EventData to UTF-8 for the caller's callback.
 *
 * The function pointer types come from mingw-w64's computecore.h
 * (__typeof__ of each declaration), so a signature that does not match
 * the header does not compile; nothing links against computecore.lib.
 */
#include "runtime/hcs/hcs_api.h"

#include <windows.h>

#include <computecore.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/winutil.h"
#include "runtime/hcs/doc_request.h"
#include "runtime/hcs/doc_system.h"
#include "runtime/hcs/hresult.h"

/* Every export berth calls: a missing one makes the DLL unusable. */
#define HCS_FUNCS(X)                                                                               \
    X(HcsCreateOperation)                                                                          \
    X(HcsCloseOperation)                                                                           \
    X(HcsWaitForOperationResult)                                                                   \
    X(HcsWaitForOperationResultAndProcessInfo)                                                     \
    X(HcsCancelOperation)                                                                          \
    X(HcsCreateComputeSystem)                                                                      \
    X(HcsOpenComputeSystem)                                                                        \
    X(HcsStartComputeSystem)                                                                       \
    X(HcsShutDownComputeSystem)                                                                    \
    X(HcsTerminateComputeSystem)                                                                   \
    X(HcsCloseComputeSystem)                                                                       \
    X(HcsGetComputeSystemProperties)                                                               \
    X(HcsModifyComputeSystem)                                                                      \
    X(HcsSetComputeSystemCallback)                                                                 \
    X(HcsCreateProcess)                                                                            \
    X(HcsOpenProcess)                                                                              \
    X(HcsSignalProcess)                                                                            \
    X(HcsTerminateProcess)                                                                         \
    X(HcsCloseProcess)                                                                             \
    X(HcsGetProcessInfo)                                                                           \
    X(HcsModifyProcess)                                                                            \
    X(HcsSetProcessCallback)                                                                       \
    X(HcsGetServiceProperties)                                                                     \
    X(HcsGrantVmAccess)

struct hcs_api {
    HMODULE dll;
#define HCS_FIELD(name) __typeof__(&name) name;
    HCS_FUNCS(HCS_FIELD)
#undef HCS_FIELD
};

struct hcs_system {
    struct hcs_api *api;
    HCS_SYSTEM h;
    char *id;
    hcs_event_cb cb;
    void *cb_arg;
};

struct hcs_process {
    struct hcs_system *sys;
    HCS_PROCESS h;
    uint32_t pid;
    hcs_event_cb cb;
    void *cb_arg;
};

/* ---- text ---- */

/* UTF-8 to a new UTF-16 string; NULL stays NULL. *ok false on bad UTF-8 or no memory. */
static wchar_t *
wide(const char *s, bool *ok)
{
    *ok = true;
    if (!s)
        return NULL;
    wchar_t *w = win_wide(s);
    *ok = w != NULL;
    return w;
}

/* UTF-16 to a new UTF-8 string; NULL stays NULL (and on no memory). */
static char *
narrow(const wchar_t *w)
{
    if (!w)
        return NULL;
    int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
    char *s = n > 0 ? malloc((size_t)n) : NULL;
    if (s && WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL) != n) {
        free(s);
        s = NULL;
    }
    return s;
}

/* A string computecore allocated (LocalFree), as UTF-8 (caller frees), and freed. */
static char *
take_result(PWSTR doc)
{
    char *s = narrow(doc);
    if (doc)
        LocalFree(doc);
    return s;
}

/* FormatMessageW's text for hr, from the DLL's message table or the system's. */
static char *
system_text(HMODULE dll, HRESULT hr)
{
    wchar_t *buf = NULL;
    DWORD flags = FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM |
                  FORMAT_MESSAGE_IGNORE_INSERTS | (dll ? FORMAT_MESSAGE_FROM_HMODULE : 0);
    DWORD n = FormatMessageW(flags, dll, (DWORD)hr, 0, (LPWSTR)&buf, 0, NULL);
    if (n == 0 && dll)
        n = FormatMessageW(flags & ~(DWORD)FORMAT_MESSAGE_FROM_HMODULE, NULL, (DWORD)hr, 0,
                           (LPWSTR)&buf, 0, NULL);
    /* A Win32 error as an HRESULT: the system table knows it by its code. */
    if (n == 0 && HRESULT_FACILITY(hr) == FACILITY_WIN32)
        n = FormatMessageW(flags & ~(DWORD)FORMAT_MESSAGE_FROM_HMODULE, NULL,
                           (DWORD)HRESULT_CODE(hr), 0, (LPWSTR)&buf, 0, NULL);
    char *s = n ? narrow(buf) : NULL;
    if (buf)
        LocalFree(buf);
    return s;
}

/* Sets err for a failed call: hresult.h's message with FormatMessageW's text. */
static int
fail(struct hcs_api *api, struct err *err, HRESULT hr, const char *result, const char *what,
     const char *id)
{
    char *text = system_text(api ? api->dll : NULL, hr);
    int r =
        hcs_err_set(err, (uint32_t)hr, text, result, "%s%s%s", what, id ? " " : "", id ? id : "");
    free(text);
    return r;
}

/* ---- loading ---- */

static const struct {
    const char *name;
    size_t offset;
} hcs_exports[] = {
#define HCS_EXPORT(name) {#name, offsetof(struct hcs_api, name)},
    HCS_FUNCS(HCS_EXPORT)
#undef HCS_EXPORT
};

static HMODULE
load_dll(const char *path, DWORD *error, struct err *err)
{
    if (!path) {
        HMODULE m = LoadLibraryExW(L"computecore.dll", NULL, LOAD_LIBRARY_SEARCH_SYSTEM32);
        *error = m ? 0 : GetLastError();
        return m;
    }
    char *p = strdup(path);
    if (!p) {
        err_set(err, ENOMEM, "computecore.dll: out of memory");
        return NULL;
    }
    for (char *c = p; *c; c++)
        if (*c == '/')
            *c = '\\';
    bool ok;
    wchar_t *w = wide(p, &ok);
    free(p);
    if (!ok) {
        err_set(err, EINVAL, "computecore.dll: path %.200s is not UTF-8", path);
        return NULL;
    }
    /* The DLL's own directory is searched for what it imports. */
    HMODULE m = LoadLibraryExW(w, NULL, LOAD_WITH_ALTERED_SEARCH_PATH);
    *error = m ? 0 : GetLastError();
    free(w);
    return m;
}

int
hcs_api_open(const char *dll_path, struct hcs_api **out, struct err *err)
{
#ifdef BERTH_TEST_HOOKS
    if (!dll_path) {
        const char *env = getenv("BERTH_TEST_HCS_DLL");
        if (env && *env)
            dll_path = env;
    }
#else
    if (dll_path)
        return err_set(err, EINVAL,
                       "computecore.dll: a path (%.200s) is honoured in test builds only",
                       dll_path);
#endif
    struct hcs_api *api = calloc(1, sizeof(*api));
    if (!api)
        return err_set(err, ENOMEM, "computecore.dll: out of memory");
    DWORD error = 0;
    struct err lerr = {0};
    api->dll = load_dll(dll_path, &error, &lerr);
    if (!api->dll) {
        free(api);
        if (lerr.code)
            return err_set(err, lerr.code, "%s", lerr.msg);
        if (error == ERROR_MOD_NOT_FOUND || error == ERROR_FILE_NOT_FOUND ||
            error == ERROR_PATH_NOT_FOUND)
            return err_set(err, ERR_UNAVAILABLE,
                           "computecore.dll not found%s%s (error %lu): this Windows has no Host "
                           "Compute Service; it needs Windows Server 2019 or Windows 10 1809 or "
                           "later with the Containers feature",
                           dll_path ? " at " : "", dll_path ? dll_path : "", (unsigned long)error);
        return err_set(err, ERR_UNAVAILABLE, "computecore.dll%s%s: cannot be loaded (error %lu)",
                       dll_path ? " at " : "", dll_path ? dll_path : "", (unsigned long)error);
    }
    for (size_t i = 0; i < sizeof(hcs_exports) / sizeof(hcs_exports[0]); i++) {
        FARPROC f = GetProcAddress(api->dll, hcs_exports[i].name);
        if (!f) {
            FreeLibrary(api->dll);
            free(api);
            return err_set(err, ERR_UNAVAILABLE,
                           "computecore.dll%s%s has no %s: it needs Windows Server 2019 or "
                           "Windows 10 1809 or later",
                           dll_path ? " at " : "", dll_path ? dll_path : "", hcs_exports[i].name);
        }
        memcpy((char *)api + hcs_exports[i].offset, &f, sizeof(f));
    }
    *out = api;
    return 0;
}

void
hcs_api_free(struct hcs_api *api)
{
    if (!api)
        return;
    FreeLibrary(api->dll);
    free(api);
}

/* ---- operations ---- */

/*
 * Waits for op. On HCS_E_OPERATION_TIMEOUT the operation is cancelled and
 * given HCS_CANCEL_GRACE_MS to end; if it still runs, it is left open
 * (closing an operation in flight crashed computecore for hcsshim) and
 * *leaked is set so the caller does not close it either.
 */
static HRESULT
op_wait(struct hcs_api *api, HCS_OPERATION op, DWORD timeout, HCS_PROCESS_INFORMATION *pi,
        char **result, bool *leaked)
{
    PWSTR doc = NULL;
    *leaked = false;
    HRESULT hr = pi ? api->HcsWaitForOperationResultAndProcessInfo(op, timeout, pi, &doc)
                    : api->HcsWaitForOperationResult(op, timeout, &doc);
    if ((uint32_t)hr == HCS_HR_OPERATION_TIMEOUT) {
        if (doc)
            LocalFree(doc);
        doc = NULL;
        api->HcsCancelOperation(op);
        PWSTR late = NULL;
        HRESULT end = api->HcsWaitForOperationResult(op, HCS_CANCEL_GRACE_MS, &late);
        if (late)
            LocalFree(late);
        if ((uint32_t)end == HCS_HR_OPERATION_TIMEOUT)
            *leaked = true;
    }
    char *s = take_result(doc);
    if (result)
        *result = s;
    else
        free(s);
    return hr;
}

/* One operation: make it, let submit use it, wait, close it. */
struct op_call {
    struct hcs_api *api;
    DWORD timeout;
    HCS_PROCESS_INFORMATION *pi;
    char *result; /* the result document (UTF-8), owned */
};

static HRESULT
op_begin(struct op_call *c, HCS_OPERATION *op)
{
    *op = c->api->HcsCreateOperation(NULL, NULL);
    return *op ? S_OK : E_OUTOFMEMORY;
}

static HRESULT
op_finish(struct op_call *c, HCS_OPERATION op, HRESULT submitted)
{
    HRESULT hr = submitted;
    bool leaked = false;
    if (SUCCEEDED(hr))
        hr = op_wait(c->api, op, c->timeout, c->pi, &c->result, &leaked);
    if (!leaked)
        c->api->HcsCloseOperation(op);
    return hr;
}

/* ---- service ---- */

/* HcsGetServiceProperties(query); label names the query in messages. */
static int
service_properties(struct hcs_api *api, const char *query, const char *label, char **result,
                   struct err *err)
{
    bool ok;
    wchar_t *wq = wide(query, &ok);
    if (!ok || !query)
        return err_set(err, EINVAL, "HcsGetServiceProperties: the query is not UTF-8");
    PWSTR doc = NULL;
    HRESULT hr = api->HcsGetServiceProperties(wq, &doc);
    free(wq);
    char *s = take_result(doc);
    if (FAILED(hr)) {
        int r = fail(api, err, hr, s, "HcsGetServiceProperties", label);
        free(s);
        return r;
    }
    if (!s)
        return err_set(err, EIO, "HcsGetServiceProperties %s: no answer", label);
    *result = s;
    return 0;
}

int
hcs_service_properties(struct hcs_api *api, const char *query, char **result, struct err *err)
{
    return service_properties(api, query, query, result, err);
}

int
hcs_grant_vm_access(struct hcs_api *api, const char *vm_id, const char *path, struct err *err)
{
    bool ok_id, ok_path;
    wchar_t *wid = wide(vm_id, &ok_id), *wp = wide(path, &ok_path);
    HRESULT hr = ok_id && ok_path && vm_id && path ? api->HcsGrantVmAccess(wid, wp) : E_INVALIDARG;
    free(wid);
    free(wp);
    if (hr == E_INVALIDARG && !(ok_id && ok_path && vm_id && path))
        return err_set(err, EINVAL, "HcsGrantVmAccess: the vm id or path is not UTF-8");
    return FAILED(hr) ? fail(api, err, hr, NULL, "HcsGrantVmAccess", path) : 0;
}

/* One property type's answer for detection. */
static void
probe(struct hcs_api *api, const char *type, struct hcs_probe_answer *a, char **owned)
{
    const char *types[] = {type, NULL};
    json_object *q = hcs_doc_query(types);
    char *query = hcs_doc_string(q);
    json_object_put(q);
    memset(a, 0, sizeof(*a));
    *owned = NULL;
    if (!query) {
        a->rc = err_set(&a->err, ENOMEM, "hcs service properties: out of memory");
        return;
    }
    a->rc = service_properties(api, query, type, owned, &a->err);
    a->json = *owned;
    free(query);
}

void
hcs_detect(const char *dll_path, struct hcs_caps *caps)
{
    struct hcs_api *api = NULL;
    struct hcs_probe_answer basic = {0}, topo = {0};
    char *b = NULL, *t = NULL;
    basic.rc = hcs_api_open(dll_path, &api, &basic.err);
    if (basic.rc == 0) {
        probe(api, HCS_PROP_BASIC, &basic, &b);
        probe(api, HCS_PROP_PROCESSOR_TOPOLOGY, &topo, &t);
    } else {
        topo = basic;
    }
    hcs_caps_evaluate(&basic, &topo, caps);
    free(b);
    free(t);
    hcs_api_free(api);
}

/* ---- systems ---- */

static void CALLBACK
system_event_trampoline(HCS_EVENT *ev, void *ctx)
{
    struct hcs_system *s = ctx;
    char *data = narrow(ev->EventData);
    struct hcs_event e = {(uint32_t)ev->Type, data};
    if (s->cb)
        s->cb(s->cb_arg, &e);
    free(data);
}

static struct hcs_system *
system_new(struct hcs_api *api, const char *id)
{
    struct hcs_system *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->id = strdup(id);
    if (!s->id) {
        free(s);
        return NULL;
    }
    s->api = api;
    return s;
}

static void
system_free(struct hcs_system *s)
{
    if (s) {
        free(s->id);
        free(s);
    }
}

int
hcs_system_create(struct hcs_api *api, const char *id, const char *config, uint32_t timeout_ms,
                  struct hcs_system **out, struct err *err)
{
    bool ok1, ok2;
    wchar_t *wid = wide(id, &ok1);
    wchar_t *wcfg = wide(config, &ok2);
    struct hcs_system *s = ok1 && ok2 && id && config ? system_new(api, id) : NULL;
    if (!s) {
        free(wid);
        free(wcfg);
        return err_set(err, ok1 && ok2 ? ENOMEM : EINVAL, "create compute system %.128s: %s",
                       id ? id : "(null)", ok1 && ok2 ? "out of memory" : "not UTF-8");
    }
    struct op_call c = {api, timeout_ms, NULL, NULL};
    HCS_OPERATION op;
    HRESULT hr = op_begin(&c, &op);
    if (SUCCEEDED(hr)) {
        HCS_SYSTEM h = NULL;
        hr = op_finish(&c, op, api->HcsCreateComputeSystem(wid, wcfg, op, NULL, &h));
        s->h = h;
    }
    free(wid);
    free(wcfg);
    if (FAILED(hr)) {
        int r = fail(api, err, hr, c.result, "create compute system", id);
        free(c.result);
        if (s->h)
            api->HcsCloseComputeSystem(s->h);
        system_free(s);
        return r;
    }
    free(c.result);
    *out = s;
    return 0;
}

int
hcs_system_open(struct hcs_api *api, const char *id, struct hcs_system **out, struct err *err)
{
    bool ok;
    wchar_t *wid = wide(id, &ok);
    struct hcs_system *s = ok && id ? system_new(api, id) : NULL;
    if (!s) {
        free(wid);
        return err_set(err, ok ? ENOMEM : EINVAL, "open compute system %.128s: %s",
                       id ? id : "(null)", ok ? "out of memory" : "not UTF-8");
    }
    HRESULT hr = api->HcsOpenComputeSystem(wid, GENERIC_ALL, &s->h);
    free(wid);
    if (FAILED(hr)) {
        int r = fail(api, err, hr, NULL, "open compute system", id);
        system_free(s);
        return r;
    }
    *out = s;
    return 0;
}

int
hcs_system_set_callback(struct hcs_system *sys, hcs_event_cb cb, void *arg, struct err *err)
{
    sys->cb = cb;
    sys->cb_arg = arg;
    HRESULT hr = sys->api->HcsSetComputeSystemCallback(sys->h, HcsEventOptionNone, sys,
                                                       system_event_trampoline);
    if (FAILED(hr))
        return fail(sys->api, err, hr, NULL, "set the callback of compute system", sys->id);
    return 0;
}

/* Start, shutdown, terminate: (system, operation, options) calls. */
typedef HRESULT(WINAPI *system_op_fn)(HCS_SYSTEM, HCS_OPERATION, PCWSTR);

static int
system_op(struct hcs_system *sys, system_op_fn fn, uint32_t timeout_ms, const char *what,
          uint32_t ok_too, struct err *err)
{
    struct op_call c = {sys->api, timeout_ms, NULL, NULL};
    HCS_OPERATION op;
    HRESULT hr = op_begin(&c, &op);
    if (SUCCEEDED(hr))
        hr = op_finish(&c, op, fn(sys->h, op, NULL));
    int r = 0;
    if (FAILED(hr) && (!ok_too || (uint32_t)hr != ok_too))
        r = fail(sys->api, err, hr, c.result, what, sys->id);
    free(c.result);
    return r;
}

int
hcs_system_start(struct hcs_system *sys, uint32_t timeout_ms, struct err *err)
{
    return system_op(sys, sys->api->HcsStartComputeSystem, timeout_ms, "start compute system", 0,
                     err);
}

int
hcs_system_shutdown(struct hcs_system *sys, uint32_t timeout_ms, struct err *err)
{
    return system_op(sys, sys->api->HcsShutDownComputeSystem, timeout_ms,
                     "shut down compute system", 0, err);
}

int
hcs_system_terminate(struct hcs_system *sys, uint32_t timeout_ms, struct err *err)
{
    return system_op(sys, sys->api->HcsTerminateComputeSystem, timeout_ms,
                     "terminate compute system", HCS_HR_SYSTEM_ALREADY_STOPPED, err);
}

int
hcs_system_properties(struct hcs_system *sys, const char *query, char **result, struct err *err)
{
    bool ok;
    wchar_t *wq = wide(query, &ok);
    if (!ok)
        return err_set(err, EINVAL, "properties of compute system %s: the query is not UTF-8",
                       sys->id);
    struct op_call c = {sys->api, HCS_TIMEOUT_INFINITE, NULL, NULL};
    HCS_OPERATION op;
    HRESULT hr = op_begin(&c, &op);
    if (SUCCEEDED(hr))
        hr = op_finish(&c, op, sys->api->HcsGetComputeSystemProperties(sys->h, op, wq));
    free(wq);
    if (FAILED(hr)) {
        int r = fail(sys->api, err, hr, c.result, "properties of compute system", sys->id);
        free(c.result);
        return r;
    }
    if (!c.result)
        return err_set(err, EIO, "properties of compute system %s: no answer", sys->id);
    *result = c.result;
    return 0;
}

int
hcs_system_modify(struct hcs_system *sys, const char *settings, uint32_t timeout_ms,
                  struct err *err)
{
    bool ok;
    wchar_t *ws = wide(settings, &ok);
    if (!ok || !settings)
        return err_set(err, EINVAL, "modify compute system %s: the settings are not UTF-8",
                       sys->id);
    struct op_call c = {sys->api, timeout_ms, NULL, NULL};
    HCS_OPERATION op;
    HRESULT hr = op_begin(&c, &op);
    if (SUCCEEDED(hr))
        hr = op_finish(&c, op, sys->api->HcsModifyComputeSystem(sys->h, op, ws, NULL));
    free(ws);
    int r = 0;
    if (FAILED(hr))
        r = fail(sys->api, err, hr, c.result, "modify compute system", sys->id);
    free(c.result);
    return r;
}

void
hcs_system_close(struct hcs_system *sys)
{
    if (!sys)
        return;
    if (sys->h)
        sys->api->HcsCloseComputeSystem(sys->h);
    system_free(sys);
}

const char *
hcs_system_id(const struct hcs_system *sys)
{
    return sys->id;
}

/* ---- processes ---- */

static void CALLBACK
process_event_trampoline(HCS_EVENT *ev, void *ctx)
{
    struct hcs_process *p = ctx;
    char *data = narrow(ev->EventData);
    struct hcs_event e = {(uint32_t)ev->Type, data};
    if (p->cb)
        p->cb(p->cb_arg, &e);
    free(data);
}

static void
stdio_from(const HCS_PROCESS_INFORMATION *pi, struct hcs_stdio *stdio)
{
    stdio->pid = pi->ProcessId;
    stdio->std_in = pi->StdInput;
    stdio->std_out = pi->StdOutput;
    stdio->std_err = pi->StdError;
}

/* HcsGetProcessInfo and its wait: the process information again. */
static HRESULT
process_info(struct hcs_process *p, HCS_PROCESS_INFORMATION *pi, char **result)
{
    struct op_call c = {p->sys->api, HCS_TIMEOUT_INFINITE, pi, NULL};
    HCS_OPERATION op;
    HRESULT hr = op_begin(&c, &op);
    if (SUCCEEDED(hr))
        hr = op_finish(&c, op, p->sys->api->HcsGetProcessInfo(p->h, op));
    *result = c.result;
    return hr;
}

int
hcs_process_create(struct hcs_system *sys, const char *params, uint32_t timeout_ms, hcs_event_cb cb,
                   void *arg, struct hcs_process **out, struct hcs_stdio *stdio, struct err *err)
{
    struct hcs_api *api = sys->api;
    bool ok;
    wchar_t *wp = wide(params, &ok);
    if (!ok || !params)
        return err_set(err, EINVAL, "create process in %s: the parameters are not UTF-8", sys->id);
    struct hcs_process *p = calloc(1, sizeof(*p));
    if (!p) {
        free(wp);
        return err_set(err, ENOMEM, "create process in %s: out of memory", sys->id);
    }
    p->sys = sys;
    p->cb = cb;
    p->cb_arg = arg;
    HCS_PROCESS_INFORMATION pi = {0};
    struct op_call c = {api, timeout_ms, &pi, NULL};
    HCS_OPERATION op;
    HRESULT submitted = E_FAIL;
    HRESULT hr = op_begin(&c, &op);
    if (SUCCEEDED(hr)) {
        submitted = api->HcsCreateProcess(sys->h, wp, op, NULL, &p->h);
        /* Registered before the wait, so an exit that comes quickly is not lost. */
        if (SUCCEEDED(submitted) && p->h && cb) {
            HRESULT chr =
                api->HcsSetProcessCallback(p->h, HcsEventOptionNone, p, process_event_trampoline);
            if (FAILED(chr))
                submitted = chr;
        }
        hr = op_finish(&c, op, submitted);
    }
    free(wp);
    if (FAILED(hr) && SUCCEEDED(submitted) && p->h) {
        /* The Server 2022 quirk: the process exists, the wait said otherwise. */
        char *again = NULL;
        memset(&pi, 0, sizeof(pi));
        if (SUCCEEDED(process_info(p, &pi, &again)))
            hr = S_OK;
        free(again);
    }
    if (FAILED(hr)) {
        int r = fail(api, err, hr, c.result, "create process in", sys->id);
        free(c.result);
        if (p->h)
            api->HcsCloseProcess(p->h);
        free(p);
        return r;
    }
    free(c.result);
    p->pid = pi.ProcessId;
    stdio_from(&pi, stdio);
    *out = p;
    return 0;
}

int
hcs_process_open(struct hcs_system *sys, uint32_t pid, struct hcs_process **out, struct err *err)
{
    struct hcs_process *p = calloc(1, sizeof(*p));
    if (!p)
        return err_set(err, ENOMEM, "open process %u in %s: out of memory", (unsigned)pid, sys->id);
    p->sys = sys;
    p->pid = pid;
    HRESULT hr = sys->api->HcsOpenProcess(sys->h, pid, GENERIC_ALL, &p->h);
    if (FAILED(hr)) {
        char what[64];
        snprintf(what, sizeof(what), "open process %u in", (unsigned)pid);
        int r = fail(sys->api, err, hr, NULL, what, sys->id);
        free(p);
        return r;
    }
    *out = p;
    return 0;
}

int
hcs_process_set_callback(struct hcs_process *proc, hcs_event_cb cb, void *arg, struct err *err)
{
    proc->cb = cb;
    proc->cb_arg = arg;
    HRESULT hr = proc->sys->api->HcsSetProcessCallback(proc->h, HcsEventOptionNone, proc,
                                                       process_event_trampoline);
    if (FAILED(hr)) {
        char what[64];
        snprintf(what, sizeof(what), "set the callback of process %u in", (unsigned)proc->pid);
        return fail(proc->sys->api, err, hr, NULL, what, proc->sys->id);
    }
    return 0;
}

/* Signal and terminate: (process, operation, options) calls. */
typedef HRESULT(WINAPI *process_op_fn)(HCS_PROCESS, HCS_OPERATION, PCWSTR);

static int
process_op(struct hcs_process *proc, process_op_fn fn, const char *options, uint32_t timeout_ms,
           const char *verb, bool gone_is_ok, struct err *err)
{
    struct hcs_api *api = proc->sys->api;
    bool ok;
    wchar_t *wo = wide(options, &ok);
    if (!ok)
        return err_set(err, EINVAL, "%s process %u: the options are not UTF-8", verb,
                       (unsigned)proc->pid);
    struct op_call c = {api, timeout_ms, NULL, NULL};
    HCS_OPERATION op;
    HRESULT hr = op_begin(&c, &op);
    if (SUCCEEDED(hr))
        hr = op_finish(&c, op, fn(proc->h, op, wo));
    free(wo);
    int r = 0;
    /* A process already gone: HCS says so, or (terminating it) denies access. */
    bool gone = (uint32_t)hr == HCS_HR_PROCESS_ALREADY_STOPPED ||
                (gone_is_ok && (uint32_t)hr == HCS_HR_E_ACCESSDENIED);
    if (FAILED(hr) && !(gone_is_ok && gone)) {
        char what[64];
        snprintf(what, sizeof(what), "%s process %u in", verb, (unsigned)proc->pid);
        r = fail(api, err, hr, c.result, what, proc->sys->id);
        if (gone)
            err->code = ESRCH;
    }
    free(c.result);
    return r;
}

int
hcs_process_signal(struct hcs_process *proc, const char *options, uint32_t timeout_ms,
                   struct err *err)
{
    return process_op(proc, proc->sys->api->HcsSignalProcess, options, timeout_ms, "signal", false,
                      err);
}

int
hcs_process_terminate(struct hcs_process *proc, uint32_t timeout_ms, struct err *err)
{
    return process_op(proc, proc->sys->api->HcsTerminateProcess, NULL, timeout_ms, "terminate",
                      true, err);
}

int
hcs_process_info(struct hcs_process *proc, struct hcs_stdio *stdio, struct err *err)
{
    HCS_PROCESS_INFORMATION pi = {0};
    char *result = NULL;
    HRESULT hr = process_info(proc, &pi, &result);
    if (FAILED(hr)) {
        char what[64];
        snprintf(what, sizeof(what), "information of process %u in", (unsigned)proc->pid);
        int r = fail(proc->sys->api, err, hr, result, what, proc->sys->id);
        free(result);
        return r;
    }
    free(result);
    stdio_from(&pi, stdio);
    return 0;
}

int
hcs_process_modify(struct hcs_process *proc, const char *settings, struct err *err)
{
    struct hcs_api *api = proc->sys->api;
    bool ok;
    wchar_t *ws = wide(settings, &ok);
    if (!ok || !settings)
        return err_set(err, EINVAL, "modify process %u: the settings are not UTF-8",
                       (unsigned)proc->pid);
    struct op_call c = {api, HCS_TIMEOUT_INFINITE, NULL, NULL};
    HCS_OPERATION op;
    HRESULT hr = op_begin(&c, &op);
    if (SUCCEEDED(hr))
        hr = op_finish(&c, op, api->HcsModifyProcess(proc->h, op, ws));
    free(ws);
    int r = 0;
    if (FAILED(hr)) {
        char what[64];
        snprintf(what, sizeof(what), "modify process %u in", (unsigned)proc->pid);
        r = fail(api, err, hr, c.result, what, proc->sys->id);
    }
    free(c.result);
    return r;
}

void
hcs_process_close(struct hcs_process *proc)
{
    if (!proc)
        return;
    if (proc->h)
        proc->sys->api->HcsCloseProcess(proc->h);
    free(proc);
}

uint32_t
hcs_process_pid(const struct hcs_process *proc)
{
    return proc->pid;
}

void
hcs_stdio_close(struct hcs_stdio *stdio)
{
    void **h[] = {&stdio->std_in, &stdio->std_out, &stdio->std_err};
    for (size_t i = 0; i < 3; i++) {
        if (*h[i] && *h[i] != INVALID_HANDLE_VALUE)
            CloseHandle(*h[i]);
        *h[i] = NULL;
    }
}
