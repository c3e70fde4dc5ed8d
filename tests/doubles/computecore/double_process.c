/*
 * TEST DOUBLE of computecore.dll (see computecore_double.h): scripted
 * processes with real pipe stdio. Not HCS. Each process runs its script
 * on a thread of its own; the exports run on the caller's thread and
 * their operations on threads of the double.
 */
#include "computecore_double.h"

#include <shellapi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static LONG next_pid = 1000;

void
dbl_process_release(struct dproc *p)
{
    if (InterlockedDecrement(&p->refs) != 0)
        return;
    HANDLE hs[] = {p->in_r,       p->out_w,      p->err_w,        p->in_w_keep,
                   p->out_r_keep, p->err_r_keep, p->signal_event, p->kill_event};
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
        if (hs[i])
            CloseHandle(hs[i]);
    if (p->argv)
        LocalFree(p->argv);
    json_object_put(p->env);
    free(p->cwd);
    free(p->user);
    free(p);
}

/* ---- the script ---- */

static void
put(HANDLE h, const char *s, size_t len)
{
    while (h && len) {
        DWORD n = 0;
        if (!WriteFile(h, s, (DWORD)(len > 65536 ? 65536 : len), &n, NULL))
            return;
        s += n;
        len -= n;
    }
}

static void
put_line(HANDLE h, const char *s)
{
    put(h, s ? s : "", s ? strlen(s) : 0);
    put(h, "\n", 1);
}

static void
put_wide(HANDLE h, const wchar_t *w, bool newline)
{
    char *s = dbl_narrow(w);
    put(h, s, strlen(s));
    if (newline)
        put(h, "\n", 1);
    free(s);
}

/*
 * Waits up to ms for a kill or a signal. True (and *code) when the process
 * must end; signals it ignores are swallowed.
 */
static bool
wait_point(struct dproc *p, DWORD ms, DWORD *code)
{
    ULONGLONG end = GetTickCount64() + ms;
    for (;;) {
        DWORD left = ms;
        if (ms != INFINITE) {
            ULONGLONG now = GetTickCount64();
            left = now >= end ? 0 : (DWORD)(end - now);
        }
        HANDLE evs[] = {p->kill_event, p->signal_event};
        DWORD w = WaitForMultipleObjects(2, evs, FALSE, left);
        if (w == WAIT_OBJECT_0) {
            dbl_lock();
            *code = p->kill_code;
            dbl_unlock();
            return true;
        }
        if (w == WAIT_OBJECT_0 + 1) {
            dbl_lock();
            bool ignore = p->ignore_signals;
            dbl_unlock();
            if (!ignore) {
                *code = DBL_EXIT_CTRL_C;
                return true;
            }
            continue;
        }
        return false;
    }
}

/* Copies stdin to stdout until stdin ends (or the process must end). */
static bool
echo(struct dproc *p, DWORD *code)
{
    char buf[4096];
    for (;;) {
        if (wait_point(p, 0, code))
            return true;
        DWORD avail = 0;
        if (!p->in_r || !PeekNamedPipe(p->in_r, NULL, 0, NULL, &avail, NULL))
            return false; /* end of file */
        if (avail == 0) {
            if (wait_point(p, 5, code))
                return true;
            continue;
        }
        DWORD n = 0;
        if (!ReadFile(p->in_r, buf, avail < sizeof(buf) ? avail : sizeof(buf), &n, NULL) || !n)
            return false;
        put(p->out_w, buf, n);
    }
}

static const char *
env_lookup(struct dproc *p, const char *name)
{
    json_object_object_foreach(p->env, k, v)
    {
        if (_stricmp(k, name) == 0)
            return json_object_get_string(v);
    }
    return "";
}

static bool
is(const wchar_t *a, const wchar_t *b)
{
    return wcscmp(a, b) == 0;
}

static DWORD
run_script(struct dproc *p)
{
    DWORD code = 0;
    wchar_t **argv = p->argv;
    int argc = p->argc;
    for (int i = 1; i < argc; i++) {
        const wchar_t *c = argv[i];
        const wchar_t *a = i + 1 < argc ? argv[i + 1] : NULL;
        if (is(c, L"out") && a) {
            put_wide(p->out_w, a, false);
            i++;
        } else if (is(c, L"err") && a) {
            put_wide(p->err_w, a, false);
            i++;
        } else if (is(c, L"outn") && a) {
            long n = wcstol(a, NULL, 10);
            static char xs[4096];
            memset(xs, 'x', sizeof(xs));
            for (; n > 0; n -= (long)sizeof(xs))
                put(p->out_w, xs, n < (long)sizeof(xs) ? (size_t)n : sizeof(xs));
            i++;
        } else if (is(c, L"echo")) {
            if (echo(p, &code))
                return code;
        } else if (is(c, L"args")) {
            for (i++; i < argc; i++)
                put_wide(p->out_w, argv[i], true);
        } else if (is(c, L"env") && a) {
            char *name = dbl_narrow(a);
            put_line(p->out_w, env_lookup(p, name));
            free(name);
            i++;
        } else if (is(c, L"cwd")) {
            put_line(p->out_w, p->cwd);
        } else if (is(c, L"user")) {
            put_line(p->out_w, p->user);
        } else if (is(c, L"sleep") && a) {
            if (wait_point(p, (DWORD)wcstoul(a, NULL, 10), &code))
                return code;
            i++;
        } else if (is(c, L"wait")) {
            if (wait_point(p, INFINITE, &code))
                return code;
        } else if (is(c, L"ignore-signals")) {
            dbl_lock();
            p->ignore_signals = true;
            dbl_unlock();
        } else if (is(c, L"crash")) {
            /* The system dies under the process, which waits to be ended with it. */
            dbl_system_die(p->sys);
            if (wait_point(p, INFINITE, &code))
                return code;
        } else if (is(c, L"exit") && a) {
            return (DWORD)wcstoul(a, NULL, 10);
        } else {
            put(p->err_w, "double: unknown step\n", 21);
            return 2;
        }
        if (wait_point(p, 0, &code))
            return code;
    }
    return 0;
}

static DWORD WINAPI
process_main(void *arg)
{
    struct dproc *p = arg;
    DWORD code = run_script(p);
    dbl_lock();
    p->state = DPROC_EXITED;
    p->exit_code = code;
    HANDLE ends[] = {p->in_r, p->out_w, p->err_w};
    p->in_r = p->out_w = p->err_w = NULL;
    dbl_broadcast();
    dbl_unlock();
    /* The output ends close first, so readers see end of file before the event. */
    for (int i = 0; i < 3; i++)
        if (ends[i])
            CloseHandle(ends[i]);
    char data[160];
    snprintf(data, sizeof(data),
             "{\"ProcessId\":%lu,\"Exited\":true,\"ExitCode\":%lu,\"LastWaitResult\":0}",
             (unsigned long)p->pid, (unsigned long)code);
    dbl_fire(&p->handles, HcsEventProcessExited, data);
    dbl_process_release(p);
    return 0;
}

/* ---- starting ---- */

static bool
get_bool(json_object *o, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

static char *
get_str(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return strdup(json_object_get_string(v));
}

static char *
invalid(const char *why)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "Error", json_object_new_int((int32_t)HCS_E_INVALID_JSON));
    json_object_object_add(o, "ErrorMessage",
                           json_object_new_string("The JSON document is invalid."));
    json_object *evs = json_object_new_array();
    json_object *e = json_object_new_object();
    json_object_object_add(e, "Message", json_object_new_string(why));
    json_object_array_add(evs, e);
    json_object_object_add(o, "ErrorEvents", evs);
    char *s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
    return s;
}

HRESULT
dbl_process_start(struct dsys *s, const char *params, struct dproc **out, char **result)
{
    json_object *doc = params ? json_tokener_parse(params) : NULL;
    json_object *v;
    if (!doc || !json_object_is_type(doc, json_type_object) ||
        !json_object_object_get_ex(doc, "CommandLine", &v) ||
        !json_object_is_type(v, json_type_string)) {
        json_object_put(doc);
        *result = invalid("ProcessParameters without a CommandLine");
        return HCS_E_INVALID_JSON;
    }
    json_object *env = NULL;
    if (json_object_object_get_ex(doc, "Environment", &env) &&
        !json_object_is_type(env, json_type_object)) {
        json_object_put(doc);
        *result = invalid("Environment is not a map");
        return HCS_E_INVALID_JSON;
    }
    struct dproc *p = calloc(1, sizeof(*p));
    p->refs = 1;
    p->sys = s;
    p->env = env ? json_object_get(env) : json_object_new_object();
    p->cwd = get_str(doc, "WorkingDirectory");
    p->user = get_str(doc, "User");
    int n = MultiByteToWideChar(CP_UTF8, 0, json_object_get_string(v), -1, NULL, 0);
    wchar_t *wcmd = malloc((size_t)n * sizeof(wchar_t));
    MultiByteToWideChar(CP_UTF8, 0, json_object_get_string(v), -1, wcmd, n);
    p->argv = CommandLineToArgvW(wcmd, &p->argc);
    free(wcmd);
    if (get_bool(doc, "CreateStdInPipe"))
        CreatePipe(&p->in_r, &p->in_w_keep, NULL, 65536);
    if (get_bool(doc, "CreateStdOutPipe"))
        CreatePipe(&p->out_r_keep, &p->out_w, NULL, 65536);
    if (get_bool(doc, "CreateStdErrPipe"))
        CreatePipe(&p->err_r_keep, &p->err_w, NULL, 65536);
    json_object_put(doc);
    p->signal_event = CreateEventW(NULL, FALSE, FALSE, NULL);
    p->kill_event = CreateEventW(NULL, TRUE, FALSE, NULL);

    dbl_lock();
    if (!s->registered || s->state != DSYS_RUNNING) {
        dbl_unlock();
        dbl_process_release(p);
        *result = NULL;
        return HCS_E_INVALID_STATE;
    }
    p->pid = (DWORD)InterlockedIncrement(&next_pid);
    p->next = s->procs; /* the system's list holds the first reference */
    s->procs = p;
    dbl_unlock();
    *out = p;
    return S_OK;
}

/* Runs the script: as in HCS, the process starts as part of its create operation. */
static void
process_run(struct dproc *p)
{
    InterlockedIncrement(&p->refs); /* the script's thread */
    dbl_spawn(process_main, p);
}

static HANDLE
dup(HANDLE h)
{
    HANDLE d = NULL;
    if (h && !DuplicateHandle(GetCurrentProcess(), h, GetCurrentProcess(), &d, 0, FALSE,
                              DUPLICATE_SAME_ACCESS))
        d = NULL;
    return d;
}

void
dbl_process_info(struct dproc *p, HCS_PROCESS_INFORMATION *pi)
{
    dbl_lock();
    memset(pi, 0, sizeof(*pi));
    pi->ProcessId = p->pid;
    pi->StdInput = dup(p->in_w_keep);
    pi->StdOutput = dup(p->out_r_keep);
    pi->StdError = dup(p->err_r_keep);
    dbl_unlock();
}

void
dbl_process_kill(struct dproc *p, DWORD code)
{
    dbl_lock();
    if (p->state != DPROC_EXITED) {
        p->kill_code = code;
        SetEvent(p->kill_event);
        while (p->state != DPROC_EXITED)
            dbl_wait(INFINITE);
    }
    dbl_unlock();
}

/* ---- exports ---- */

static HCS_PROCESS
proc_handle_new(struct dproc *p)
{
    struct dproc_handle *h = calloc(1, sizeof(*h));
    h->proc = p;
    InterlockedIncrement(&p->refs);
    dbl_lock();
    h->h.next = p->handles;
    p->handles = &h->h;
    dbl_unlock();
    return (HCS_PROCESS)h;
}

static struct dproc *
proc_of(HCS_PROCESS h)
{
    return h ? ((struct dproc_handle *)h)->proc : NULL;
}

static struct dsys *
system_of(HCS_SYSTEM h)
{
    return h ? ((struct dsys_handle *)h)->sys : NULL;
}

static void
create_process_work(struct dop *op)
{
    if (!op->proc) {
        dbl_op_complete(op, op->early_hr, op->early_result, NULL);
        return;
    }
    process_run(op->proc);
    if (dbl_fail("create-process-quirk")) {
        dbl_op_complete(op, E_INVALIDARG, NULL, NULL);
        return;
    }
    HCS_PROCESS_INFORMATION pi;
    dbl_process_info(op->proc, &pi);
    dbl_op_complete(op, S_OK, NULL, &pi);
}

HRESULT WINAPI
HcsCreateProcess(HCS_SYSTEM computeSystem, PCWSTR processParameters, HCS_OPERATION operation,
                 const SECURITY_DESCRIPTOR *securityDescriptor, HCS_PROCESS *process)
{
    (void)securityDescriptor;
    struct dsys *s = system_of(computeSystem);
    struct dop *op = (struct dop *)operation;
    if (!s || !op || !process)
        return E_INVALIDARG;
    *process = NULL;
    if (!dbl_op_use(op, s, NULL, processParameters))
        return HCS_E_OPERATION_ALREADY_STARTED;
    dbl_record("HcsCreateProcess", s->id, op->arg);
    struct dproc *p = NULL;
    char *result = NULL;
    HRESULT hr = dbl_process_start(s, op->arg, &p, &result);
    if (FAILED(hr)) {
        op->early_hr = hr;
        op->early_result = result;
    } else {
        op->proc = p;
        InterlockedIncrement(&p->refs);
        *process = proc_handle_new(p);
    }
    dbl_op_run(op, create_process_work);
    return S_OK;
}

HRESULT WINAPI
HcsOpenProcess(HCS_SYSTEM computeSystem, DWORD processId, DWORD requestedAccess,
               HCS_PROCESS *process)
{
    (void)requestedAccess;
    struct dsys *s = system_of(computeSystem);
    if (!s || !process)
        return E_INVALIDARG;
    char id[32];
    snprintf(id, sizeof(id), "%lu", (unsigned long)processId);
    dbl_record("HcsOpenProcess", id, NULL);
    dbl_lock();
    struct dproc *p = s->procs;
    while (p && p->pid != processId)
        p = p->next;
    if (p)
        InterlockedIncrement(&p->refs);
    dbl_unlock();
    if (!p)
        return HRESULT_FROM_WIN32(ERROR_NOT_FOUND);
    *process = proc_handle_new(p);
    dbl_process_release(p);
    return S_OK;
}

void WINAPI
HcsCloseProcess(HCS_PROCESS process)
{
    struct dproc_handle *h = (struct dproc_handle *)process;
    if (!h)
        return;
    struct dproc *p = h->proc;
    dbl_lock();
    dbl_handle_drain(&p->handles, &h->h);
    dbl_unlock();
    free(h);
    dbl_process_release(p);
}

static bool
exited(struct dproc *p)
{
    dbl_lock();
    bool e = p->state == DPROC_EXITED;
    dbl_unlock();
    return e;
}

static void
complete_stopped(struct dop *op)
{
    dbl_op_complete(op, HCS_E_PROCESS_ALREADY_STOPPED, NULL, NULL);
}

static void
signal_work(struct dop *op)
{
    static const char *const names[] = {"CtrlC", "CtrlBreak", "CtrlClose", "CtrlLogOff",
                                        "CtrlShutdown"};
    json_object *doc = op->arg ? json_tokener_parse(op->arg) : NULL;
    json_object *v;
    bool valid = false;
    if (doc && json_object_object_get_ex(doc, "Signal", &v))
        for (size_t i = 0; i < 5; i++)
            valid = valid || strcmp(json_object_get_string(v), names[i]) == 0;
    json_object_put(doc);
    if (!valid) {
        char *r = invalid("SignalProcessOptions without a known Signal");
        dbl_op_complete(op, HCS_E_INVALID_JSON, r, NULL);
        free(r);
        return;
    }
    if (exited(op->proc)) {
        complete_stopped(op);
        return;
    }
    SetEvent(op->proc->signal_event);
    dbl_op_complete(op, S_OK, NULL, NULL);
}

HRESULT WINAPI
HcsSignalProcess(HCS_PROCESS process, HCS_OPERATION operation, PCWSTR options)
{
    struct dproc *p = proc_of(process);
    if (!p || !operation)
        return E_INVALIDARG;
    if (!dbl_op_use((struct dop *)operation, NULL, p, options))
        return HCS_E_OPERATION_ALREADY_STARTED;
    dbl_record("HcsSignalProcess", NULL, ((struct dop *)operation)->arg);
    dbl_op_run((struct dop *)operation, signal_work);
    return S_OK;
}

static void
terminate_work(struct dop *op)
{
    if (exited(op->proc)) {
        complete_stopped(op);
        return;
    }
    dbl_process_kill(op->proc, DBL_EXIT_TERMINATED);
    dbl_op_complete(op, S_OK, NULL, NULL);
}

HRESULT WINAPI
HcsTerminateProcess(HCS_PROCESS process, HCS_OPERATION operation, PCWSTR options)
{
    struct dproc *p = proc_of(process);
    if (!p || !operation)
        return E_INVALIDARG;
    if (!dbl_op_use((struct dop *)operation, NULL, p, options))
        return HCS_E_OPERATION_ALREADY_STARTED;
    dbl_record("HcsTerminateProcess", NULL, ((struct dop *)operation)->arg);
    dbl_op_run((struct dop *)operation, terminate_work);
    return S_OK;
}

static void
info_work(struct dop *op)
{
    HCS_PROCESS_INFORMATION pi;
    dbl_process_info(op->proc, &pi);
    dbl_op_complete(op, S_OK, NULL, &pi);
}

HRESULT WINAPI
HcsGetProcessInfo(HCS_PROCESS process, HCS_OPERATION operation)
{
    struct dproc *p = proc_of(process);
    if (!p || !operation)
        return E_INVALIDARG;
    if (!dbl_op_use((struct dop *)operation, NULL, p, NULL))
        return HCS_E_OPERATION_ALREADY_STARTED;
    dbl_record("HcsGetProcessInfo", NULL, NULL);
    dbl_op_run((struct dop *)operation, info_work);
    return S_OK;
}

static void
close_keep(HANDLE *h)
{
    if (*h) {
        CloseHandle(*h);
        *h = NULL;
    }
}

static void
modify_work(struct dop *op)
{
    struct dproc *p = op->proc;
    json_object *doc = op->arg ? json_tokener_parse(op->arg) : NULL;
    json_object *o, *c, *h;
    const char *what = NULL;
    if (doc && json_object_object_get_ex(doc, "Operation", &o)) {
        const char *opn = json_object_get_string(o);
        if (strcmp(opn, "CloseHandle") == 0 && json_object_object_get_ex(doc, "CloseHandle", &c) &&
            json_object_object_get_ex(c, "Handle", &h))
            what = json_object_get_string(h);
        else if (strcmp(opn, "ConsoleSize") == 0 &&
                 json_object_object_get_ex(doc, "ConsoleSize", NULL))
            what = "";
    }
    bool known = what && (!*what || !strcmp(what, "StdIn") || !strcmp(what, "StdOut") ||
                          !strcmp(what, "StdErr") || !strcmp(what, "All"));
    if (known && *what) {
        dbl_lock();
        if (!strcmp(what, "StdIn") || !strcmp(what, "All"))
            close_keep(&p->in_w_keep);
        if (!strcmp(what, "StdOut") || !strcmp(what, "All"))
            close_keep(&p->out_r_keep);
        if (!strcmp(what, "StdErr") || !strcmp(what, "All"))
            close_keep(&p->err_r_keep);
        dbl_unlock();
    }
    json_object_put(doc);
    if (!known) {
        char *r = invalid("ProcessModifyRequest with no known Operation");
        dbl_op_complete(op, HCS_E_INVALID_JSON, r, NULL);
        free(r);
        return;
    }
    dbl_op_complete(op, S_OK, NULL, NULL);
}

HRESULT WINAPI
HcsModifyProcess(HCS_PROCESS process, HCS_OPERATION operation, PCWSTR settings)
{
    struct dproc *p = proc_of(process);
    if (!p || !operation)
        return E_INVALIDARG;
    if (!dbl_op_use((struct dop *)operation, NULL, p, settings))
        return HCS_E_OPERATION_ALREADY_STARTED;
    dbl_record("HcsModifyProcess", NULL, ((struct dop *)operation)->arg);
    dbl_op_run((struct dop *)operation, modify_work);
    return S_OK;
}

HRESULT WINAPI
HcsSetProcessCallback(HCS_PROCESS process, HCS_EVENT_OPTIONS callbackOptions, void *context,
                      HCS_EVENT_CALLBACK callback)
{
    (void)callbackOptions;
    struct dproc_handle *h = (struct dproc_handle *)process;
    if (!h)
        return E_INVALIDARG;
    dbl_lock();
    h->h.cb = callback;
    h->h.ctx = context;
    dbl_unlock();
    return S_OK;
}
