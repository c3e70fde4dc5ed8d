/*
 * TEST DOUBLE of computecore.dll (see computecore_double.h): the lock,
 * the environment, recording, operations, callbacks and service
 * properties (systems are in double_system.c, processes in
 * double_process.c). Not HCS. Any thread: one
 * SRW lock guards all of the double's state and one condition variable
 * wakes whoever waits on it; callbacks run with the lock released.
 */
#include "computecore_double.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lock, condition, environment, text ---- */

static SRWLOCK lock = SRWLOCK_INIT;
static CONDITION_VARIABLE cond = CONDITION_VARIABLE_INIT;

void
dbl_lock(void)
{
    AcquireSRWLockExclusive(&lock);
}

void
dbl_unlock(void)
{
    ReleaseSRWLockExclusive(&lock);
}

bool
dbl_wait(DWORD ms)
{
    return SleepConditionVariableSRW(&cond, &lock, ms, 0) != 0;
}

void
dbl_broadcast(void)
{
    WakeAllConditionVariable(&cond);
}

bool
dbl_env(const char *name, char *buf, DWORD size)
{
    DWORD n = GetEnvironmentVariableA(name, buf, size);
    return n > 0 && n < size;
}
#define env_get dbl_env

/* The value of mode in BERTH_HCS_DOUBLE_FAIL ("mode" or "mode=N"), or NULL. */
static const char *
fail_find(const char *mode, char *buf, DWORD size)
{
    if (!env_get("BERTH_HCS_DOUBLE_FAIL", buf, size))
        return NULL;
    size_t len = strlen(mode);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (strncmp(tok, mode, len) == 0 && (tok[len] == '\0' || tok[len] == '='))
            return tok + len;
    }
    return NULL;
}

bool
dbl_fail(const char *mode)
{
    char buf[512];
    return fail_find(mode, buf, sizeof(buf)) != NULL;
}

long
dbl_fail_value(const char *mode, long dflt)
{
    char buf[512];
    const char *v = fail_find(mode, buf, sizeof(buf));
    return v && *v == '=' ? strtol(v + 1, NULL, 10) : dflt;
}

static DWORD
env_num(const char *name, DWORD dflt)
{
    char buf[32];
    return env_get(name, buf, sizeof(buf)) ? (DWORD)strtoul(buf, NULL, 10) : dflt;
}

char *
dbl_narrow(const wchar_t *w)
{
    if (!w)
        return NULL;
    int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
    char *s = malloc(n > 0 ? (size_t)n : 1);
    if (n <= 0 || WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL) != n)
        s[0] = '\0';
    return s;
}

wchar_t *
dbl_local_wide(const char *s)
{
    if (!s)
        return NULL;
    int n = MultiByteToWideChar(CP_UTF8, 0, s, -1, NULL, 0);
    wchar_t *w = LocalAlloc(LMEM_FIXED, (size_t)(n > 0 ? n : 1) * sizeof(wchar_t));
    if (n <= 0 || MultiByteToWideChar(CP_UTF8, 0, s, -1, w, n) != n)
        w[0] = 0;
    return w;
}

/* ---- recording ---- */

static LONG record_seq;
static INIT_ONCE record_once = INIT_ONCE_STATIC_INIT;

/* A process after another one (a restarted daemon) numbers on from the log's last call,
 * so that its documents do not overwrite the earlier process's. */
static BOOL CALLBACK
record_seq_init(PINIT_ONCE once, void *dir, void **ctx)
{
    (void)once, (void)ctx;
    char path[MAX_PATH + 64], line[512];
    snprintf(path, sizeof(path), "%s\\calls.log", (const char *)dir);
    FILE *log = fopen(path, "rb");
    long last = 0;
    while (log && fgets(line, sizeof(line), log))
        last = atol(line) > last ? atol(line) : last;
    if (log)
        fclose(log);
    record_seq = (LONG)last;
    return TRUE;
}

void
dbl_record(const char *fn, const char *id, const char *doc)
{
    char dir[MAX_PATH];
    if (!env_get("BERTH_HCS_DOUBLE_DIR", dir, sizeof(dir)))
        return;
    InitOnceExecuteOnce(&record_once, record_seq_init, dir, NULL);
    LONG seq = InterlockedIncrement(&record_seq);
    char path[MAX_PATH + 64];
    if (doc) {
        snprintf(path, sizeof(path), "%s\\%04ld-%s.json", dir, (long)seq, fn);
        FILE *f = fopen(path, "wb");
        if (f) {
            fputs(doc, f);
            fclose(f);
        }
    }
    snprintf(path, sizeof(path), "%s\\calls.log", dir);
    FILE *log = fopen(path, "ab");
    if (log) {
        fprintf(log, "%04ld %s %s\n", (long)seq, fn, id ? id : "-");
        fclose(log);
    }
}

/* ---- threads ---- */

struct spawn {
    DWORD(WINAPI *fn)(void *);
    void *arg;
};

static DWORD WINAPI
spawn_main(void *p)
{
    struct spawn s = *(struct spawn *)p;
    free(p);
    return s.fn(s.arg);
}

void
dbl_spawn(DWORD(WINAPI *fn)(void *), void *arg)
{
    struct spawn *s = malloc(sizeof(*s));
    s->fn = fn;
    s->arg = arg;
    HANDLE t = CreateThread(NULL, 0, spawn_main, s, 0, NULL);
    if (t)
        CloseHandle(t);
    else
        free(s);
}

/* Like the service, the double outlives its clients: pinned at first use. */
void
dbl_pin(void)
{
    static LONG pinned;
    HMODULE self;
    if (InterlockedExchange(&pinned, 1) == 0)
        GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_PIN,
                           (LPCWSTR)(void *)dbl_pin, &self);
}

/* ---- operations ---- */

static void
op_release(struct dop *op)
{
    if (InterlockedDecrement(&op->refs) != 0)
        return;
    if (op->has_pi) {
        HANDLE h[] = {op->pi.StdInput, op->pi.StdOutput, op->pi.StdError};
        for (int i = 0; i < 3; i++)
            if (h[i])
                CloseHandle(h[i]);
    }
    if (op->sys)
        dbl_system_release(op->sys);
    if (op->proc)
        dbl_process_release(op->proc);
    free(op->result);
    free(op->arg);
    free(op->early_result);
    free(op);
}

bool
dbl_op_use(struct dop *op, struct dsys *sys, struct dproc *proc, const wchar_t *arg)
{
    dbl_lock();
    bool fresh = op->state == DOP_NEW;
    if (fresh) {
        op->state = DOP_RUNNING;
        if (sys) {
            InterlockedIncrement(&sys->refs);
            op->sys = sys;
        }
        if (proc) {
            InterlockedIncrement(&proc->refs);
            op->proc = proc;
        }
        op->arg = dbl_narrow(arg);
    }
    dbl_unlock();
    return fresh;
}

struct op_thread {
    struct dop *op;
    void (*work)(struct dop *);
};

static DWORD WINAPI
op_thread_main(void *p)
{
    struct op_thread t = *(struct op_thread *)p;
    free(p);
    Sleep(env_num("BERTH_HCS_DOUBLE_DELAY_MS", 5));
    t.work(t.op);
    op_release(t.op);
    return 0;
}

void
dbl_op_run(struct dop *op, void (*work)(struct dop *))
{
    struct op_thread *t = malloc(sizeof(*t));
    InterlockedIncrement(&op->refs);
    t->op = op;
    t->work = work;
    dbl_spawn(op_thread_main, t);
}

void
dbl_op_complete(struct dop *op, HRESULT hr, const char *result, const HCS_PROCESS_INFORMATION *pi)
{
    dbl_lock();
    op->hr = hr;
    op->result = result ? strdup(result) : NULL;
    if (pi) {
        op->pi = *pi;
        op->has_pi = true;
    }
    op->state = DOP_DONE;
    HCS_OPERATION_COMPLETION cb = op->cb;
    void *ctx = op->ctx;
    dbl_broadcast();
    dbl_unlock();
    if (cb)
        cb((HCS_OPERATION)op, ctx);
}

HCS_OPERATION WINAPI
HcsCreateOperation(const void *context, HCS_OPERATION_COMPLETION callback)
{
    dbl_pin();
    struct dop *op = calloc(1, sizeof(*op));
    if (!op)
        return NULL;
    op->refs = 1;
    op->cb = callback;
    op->ctx = (void *)context;
    return (HCS_OPERATION)op;
}

void WINAPI
HcsCloseOperation(HCS_OPERATION operation)
{
    if (operation)
        op_release((struct dop *)operation);
}

HRESULT WINAPI
HcsCancelOperation(HCS_OPERATION operation)
{
    struct dop *op = (struct dop *)operation;
    dbl_lock();
    op->cancelled = true;
    dbl_broadcast();
    dbl_unlock();
    return S_OK;
}

/* Waits for op to be done (lock held); false on timeout. */
static bool
op_wait_done(struct dop *op, DWORD timeout)
{
    ULONGLONG end = GetTickCount64() + timeout;
    while (op->state != DOP_DONE) {
        DWORD left = INFINITE;
        if (timeout != INFINITE) {
            ULONGLONG now = GetTickCount64();
            if (now >= end)
                return false;
            left = (DWORD)(end - now);
        }
        dbl_wait(left);
    }
    return true;
}

static HRESULT
op_result(struct dop *op, DWORD timeout, HCS_PROCESS_INFORMATION *pi, PWSTR *doc)
{
    if (doc)
        *doc = NULL;
    dbl_lock();
    if (op->state == DOP_NEW) {
        dbl_unlock();
        return HCS_E_OPERATION_NOT_STARTED;
    }
    if (!op_wait_done(op, timeout)) {
        dbl_unlock();
        return HCS_E_OPERATION_TIMEOUT;
    }
    if (doc)
        *doc = dbl_local_wide(op->result);
    if (pi) {
        /* The handles go to the first caller that asks. */
        memset(pi, 0, sizeof(*pi));
        if (op->has_pi) {
            *pi = op->pi;
            op->has_pi = false;
        }
    }
    HRESULT hr = op->hr;
    dbl_unlock();
    return hr;
}

HRESULT WINAPI
HcsWaitForOperationResult(HCS_OPERATION operation, DWORD timeoutMs, PWSTR *resultDocument)
{
    return op_result((struct dop *)operation, timeoutMs, NULL, resultDocument);
}

HRESULT WINAPI
HcsWaitForOperationResultAndProcessInfo(HCS_OPERATION operation, DWORD timeoutMs,
                                        HCS_PROCESS_INFORMATION *processInformation,
                                        PWSTR *resultDocument)
{
    return op_result((struct dop *)operation, timeoutMs, processInformation, resultDocument);
}

HRESULT WINAPI
HcsGetOperationResult(HCS_OPERATION operation, PWSTR *resultDocument)
{
    HRESULT hr = op_result((struct dop *)operation, 0, NULL, resultDocument);
    return hr == HCS_E_OPERATION_TIMEOUT ? HCS_E_OPERATION_PENDING : hr;
}

HRESULT WINAPI
HcsGetOperationResultAndProcessInfo(HCS_OPERATION operation,
                                    HCS_PROCESS_INFORMATION *processInformation,
                                    PWSTR *resultDocument)
{
    HRESULT hr = op_result((struct dop *)operation, 0, processInformation, resultDocument);
    return hr == HCS_E_OPERATION_TIMEOUT ? HCS_E_OPERATION_PENDING : hr;
}

/* ---- callbacks ---- */

void
dbl_fire(struct dhandle **list, HCS_EVENT_TYPE type, const char *data)
{
    enum { MAX = 64 };
    struct dhandle *to[MAX];
    int n = 0;
    dbl_lock();
    for (struct dhandle *h = *list; h && n < MAX; h = h->next) {
        if (h->cb && !h->closing) {
            h->inflight++;
            to[n++] = h;
        }
    }
    dbl_unlock();
    wchar_t *w = dbl_local_wide(data);
    for (int i = 0; i < n; i++) {
        HCS_EVENT ev = {type, w, NULL};
        to[i]->cb(&ev, to[i]->ctx);
    }
    if (w)
        LocalFree(w);
    dbl_lock();
    for (int i = 0; i < n; i++)
        to[i]->inflight--;
    dbl_broadcast();
    dbl_unlock();
}

void
dbl_handle_drain(struct dhandle **list, struct dhandle *h)
{
    h->closing = true;
    while (h->inflight > 0)
        dbl_wait(INFINITE);
    for (struct dhandle **p = list; *p; p = &(*p)->next) {
        if (*p == h) {
            *p = h->next;
            break;
        }
    }
}

/* ---- access to a VM's files ---- */

/*
 * HcsGrantVmAccess: recorded as {"VmId":..,"FilePath":..} with the VM's
 * id; the file must exist (ERROR_FILE_NOT_FOUND), as the real call sets
 * an ACE on it. The double keeps no ACLs.
 */
HRESULT WINAPI
HcsGrantVmAccess(PCWSTR vmId, PCWSTR filePath)
{
    dbl_pin();
    char *id = dbl_narrow(vmId), *path = dbl_narrow(filePath);
    json_object *d = json_object_new_object();
    json_object_object_add(d, "VmId", json_object_new_string(id ? id : ""));
    json_object_object_add(d, "FilePath", json_object_new_string(path ? path : ""));
    dbl_record("HcsGrantVmAccess", id, json_object_to_json_string_ext(d, JSON_C_TO_STRING_PLAIN));
    json_object_put(d);
    free(id);
    free(path);
    if (!vmId || !filePath || !vmId[0])
        return E_INVALIDARG;
    return GetFileAttributesW(filePath) == INVALID_FILE_ATTRIBUTES
               ? HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND)
               : S_OK;
}

/* ---- service properties ---- */

HRESULT WINAPI
HcsGetServiceProperties(PCWSTR propertyQuery, PWSTR *result)
{
    dbl_pin();
    *result = NULL;
    char *q8 = dbl_narrow(propertyQuery);
    dbl_record("HcsGetServiceProperties", "-", q8);
    json_object *q = q8 ? json_tokener_parse(q8) : NULL;
    free(q8);
    json_object *types;
    if (!q || !json_object_object_get_ex(q, "PropertyTypes", &types) ||
        !json_object_is_type(types, json_type_array)) {
        json_object_put(q);
        return HCS_E_INVALID_JSON;
    }
    if (dbl_fail("no-service")) {
        json_object_put(q);
        return HCS_E_SERVICE_NOT_AVAILABLE;
    }
    json_object *props = json_object_new_array();
    HRESULT hr = S_OK;
    for (size_t i = 0; i < json_object_array_length(types) && SUCCEEDED(hr); i++) {
        const char *t = json_object_get_string(json_object_array_get_idx(types, i));
        json_object *p = json_object_new_object();
        if (strcmp(t, "Basic") == 0) {
            json_object *vers = json_object_new_array();
            json_object *v1 = json_object_new_object();
            json_object_object_add(v1, "Major", json_object_new_int(1));
            json_object_object_add(v1, "Minor", json_object_new_int(0));
            json_object_array_add(vers, v1);
            json_object *v2 = json_object_new_object();
            json_object_object_add(v2, "Major", json_object_new_int(2));
            json_object_object_add(v2, "Minor",
                                   json_object_new_int(dbl_fail("schema-2.0") ? 0 : 5));
            json_object_array_add(vers, v2);
            json_object_object_add(p, "SupportedSchemaVersions", vers);
        } else if (strcmp(t, "ProcessorTopology") == 0) {
            if (dbl_fail("no-hyperv")) {
                hr = E_UNEXPECTED;
            } else {
                DWORD n = env_num("BERTH_HCS_DOUBLE_LPS", 4);
                json_object_object_add(p, "LogicalProcessorCount", json_object_new_int((int)n));
                json_object *lps = json_object_new_array();
                for (DWORD k = 0; k < n; k++) {
                    json_object *lp = json_object_new_object();
                    json_object_object_add(lp, "LpIndex", json_object_new_int((int)k));
                    json_object_object_add(lp, "NodeNumber", json_object_new_int(0));
                    json_object_object_add(lp, "PackageId", json_object_new_int(0));
                    json_object_object_add(lp, "CoreId", json_object_new_int((int)k));
                    json_object_object_add(lp, "RootVpIndex", json_object_new_int(-1));
                    json_object_array_add(lps, lp);
                }
                json_object_object_add(p, "LogicalProcessors", lps);
            }
        } else {
            hr = E_INVALIDARG;
        }
        json_object_array_add(props, p);
    }
    json_object_put(q);
    if (SUCCEEDED(hr)) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "Properties", props);
        *result = dbl_local_wide(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
    } else {
        json_object_put(props);
    }
    return hr;
}
