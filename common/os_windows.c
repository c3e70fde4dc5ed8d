/*
 * common/os.h on Windows: BCryptGenRandom, the thread's priority, the
 * process's working set, handles and times, %ProgramData%, CreateProcessW
 * for a quiet child, LoadLibraryExW for a probe, the service control
 * manager, and the libc functions mingw-w64 lacks. Any thread, unless
 * said otherwise.
 */
#include "common/os.h"

#include <winsock2.h>
#include <windows.h>

#include <bcrypt.h>
#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <psapi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/winutil.h"

/* ---- libc ---------------------------------------------------------------- */

char *
strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *d = malloc(len + 1);
    if (!d)
        return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *
strchrnul(const char *s, int c)
{
    while (*s && *s != (char)c)
        s++;
    return (char *)s;
}

void
explicit_bzero(void *p, size_t n)
{
    SecureZeroMemory(p, n);
}

void *
memmem(const void *hay, size_t hlen, const void *needle, size_t nlen)
{
    const char *h = hay;
    if (nlen == 0)
        return (void *)h;
    for (size_t i = 0; nlen <= hlen && i <= hlen - nlen; i++)
        if (h[i] == *(const char *)needle && memcmp(h + i, needle, nlen) == 0)
            return (void *)(h + i);
    return NULL;
}

/* ---- the process and its threads --------------------------------------------- */

int
os_random_bytes(void *buf, size_t n)
{
    if (n > ULONG_MAX)
        return -EINVAL;
    NTSTATUS st = BCryptGenRandom(NULL, buf, (ULONG)n, BCRYPT_USE_SYSTEM_PREFERRED_RNG);
    return st == 0 ? 0 : -EIO;
}

long
os_thread_id(void)
{
    return (long)GetCurrentThreadId();
}

long
os_pid(void)
{
    return (long)GetCurrentProcessId();
}

int
os_thread_lower_priority(int nice)
{
    (void)nice;
    if (!SetThreadPriority(GetCurrentThread(), THREAD_PRIORITY_BELOW_NORMAL))
        return -win_errno(GetLastError());
    return 0;
}

int
os_thread_restore_priority(void)
{
    if (!SetThreadPriority(GetCurrentThread(), THREAD_PRIORITY_NORMAL))
        return -win_errno(GetLastError());
    return 0;
}

const char *
os_signal_name(int sig)
{
    switch (sig) {
    case SIGINT:
        return "Interrupt (Ctrl-C)";
    case SIGBREAK:
        return "Break (Ctrl-Break)";
    case SIGTERM:
        return "Terminated";
    case SIGHUP:
        return "Hangup (console closed)";
    default: {
        static _Thread_local char buf[32];
        snprintf(buf, sizeof(buf), "Signal %d", sig);
        return buf;
    }
    }
}

int
os_setenv(const char *name, const char *value)
{
    return _putenv_s(name, value) == 0 ? 0 : -EINVAL;
}

static double
filetime_s(FILETIME ft)
{
    ULARGE_INTEGER u = {.LowPart = ft.dwLowDateTime, .HighPart = ft.dwHighDateTime};
    return (double)u.QuadPart / 1e7;
}

int
os_usage_read(struct os_usage *out, struct err *err)
{
    HANDLE self = GetCurrentProcess();
    PROCESS_MEMORY_COUNTERS mc = {.cb = sizeof(mc)};
    if (!K32GetProcessMemoryInfo(self, &mc, sizeof(mc)))
        return err_set(err, EIO, "process memory: error %lu", (unsigned long)GetLastError());
    DWORD handles = 0;
    GetProcessHandleCount(self, &handles);
    FILETIME created, exited, kernel, user;
    double cpu = 0;
    if (GetProcessTimes(self, &created, &exited, &kernel, &user))
        cpu = filetime_s(kernel) + filetime_s(user);
    out->rss_bytes = mc.WorkingSetSize;
    out->open_fds = handles;
    out->cpu_seconds = cpu;
    return 0;
}

/* ---- paths and defaults ---------------------------------------------------- */

bool
os_is_superuser(void)
{
    return false;
}

char *
os_default_root(void)
{
    wchar_t buf[MAX_PATH];
    DWORD n = GetEnvironmentVariableW(L"ProgramData", buf, MAX_PATH);
    char *base = n > 0 && n < MAX_PATH ? win_utf8(buf) : strdup("C:\\ProgramData");
    char *out = NULL;
    if (base && asprintf(&out, "%s\\berth", base) < 0)
        out = NULL;
    free(base);
    return out;
}

const char *
os_default_runtime(void)
{
    return "hcs";
}

bool
os_path_is_absolute(const char *p)
{
    if (!p)
        return false;
    if (((p[0] >= 'A' && p[0] <= 'Z') || (p[0] >= 'a' && p[0] <= 'z')) && p[1] == ':' &&
        (p[2] == '\\' || p[2] == '/'))
        return true;
    /* \\server\share, \\?\..., and a path rooted on the current drive
     * ("/tmp/x": what a Linux caller of berthd.exe under Wine hands it). */
    return p[0] == '\\' || p[0] == '/';
}

int
os_path_absolute(const char *path, char **out, struct err *err)
{
    if (!os_path_is_absolute(path))
        return err_set(err, EINVAL, "%s: must be an absolute path", path ? path : "");
    int e = 0;
    wchar_t *lp = win_long_path(path, &e);
    if (!lp)
        return err_errno(err, -e, "%s", path);
    /* Back from \\?\ to the plain form, with '/' as the store joins. */
    const wchar_t *p = lp + 4;
    wchar_t *plain = NULL;
    if (wcsncmp(p, L"UNC\\", 4) == 0) {
        plain = malloc((wcslen(p) + 2) * sizeof(wchar_t));
        if (plain) {
            plain[0] = L'\\';
            wcscpy(plain + 1, p + 3); /* "\" + "\server\share" */
        }
    } else {
        plain = _wcsdup(p);
    }
    free(lp);
    char *s = plain ? win_utf8(plain) : NULL;
    free(plain);
    if (!s)
        return err_set(err, ENOMEM, "out of memory");
    for (char *c = s; *c; c++)
        if (*c == '\\')
            *c = '/';
    size_t n = strlen(s);
    while (n > 3 && s[n - 1] == '/')
        s[--n] = '\0';
    *out = s;
    return 0;
}

static bool
file_exists(const wchar_t *w)
{
    DWORD a = GetFileAttributesW(w);
    return a != INVALID_FILE_ATTRIBUTES && !(a & FILE_ATTRIBUTE_DIRECTORY);
}

char *
os_find_program(const char *name)
{
    wchar_t *w = win_wide(name);
    if (!w)
        return NULL;
    bool has_ext =
        strrchr(name, '.') > strrchr(name, '/') && strrchr(name, '.') > strrchr(name, '\\');
    char *found = NULL;
    if (strchr(name, '/') || strchr(name, '\\')) {
        if (file_exists(w))
            found = strdup(name);
        free(w);
        return found;
    }
    free(w);
    const char *path = getenv("PATH");
    char *copy = strdup(path ? path : "");
    char *save = NULL;
    for (char *dir = copy ? strtok_r(copy, ";", &save) : NULL; dir && !found;
         dir = strtok_r(NULL, ";", &save)) {
        for (int ext = 0; ext < (has_ext ? 1 : 2) && !found; ext++) {
            char *cand = NULL;
            if (asprintf(&cand, "%s\\%s%s", dir, name, ext ? ".exe" : "") < 0)
                continue;
            wchar_t *wc = win_wide(cand);
            if (wc && file_exists(wc))
                found = cand;
            else
                free(cand);
            free(wc);
        }
    }
    free(copy);
    return found;
}

/* Appends arg quoted as CommandLineToArgvW reads it back. */
static void
quote_arg(wchar_t *out, size_t *o, const wchar_t *arg)
{
    bool plain = arg[0] && !wcspbrk(arg, L" \t\n\v\"");
    if (plain) {
        wcscpy(out + *o, arg);
        *o += wcslen(arg);
        return;
    }
    out[(*o)++] = L'"';
    for (const wchar_t *p = arg;; p++) {
        size_t slashes = 0;
        while (*p == L'\\') {
            p++;
            slashes++;
        }
        if (!*p) {
            for (size_t i = 0; i < slashes * 2; i++)
                out[(*o)++] = L'\\';
            break;
        }
        if (*p == L'"') {
            for (size_t i = 0; i < slashes * 2 + 1; i++)
                out[(*o)++] = L'\\';
        } else {
            for (size_t i = 0; i < slashes; i++)
                out[(*o)++] = L'\\';
        }
        out[(*o)++] = *p;
    }
    out[(*o)++] = L'"';
}

int
os_run_quiet(char *const *argv, int *status, struct err *err)
{
    size_t cap = 1;
    wchar_t *wargs[64];
    size_t n = 0;
    for (; argv[n] && n < 64; n++) {
        wargs[n] = win_wide(argv[n]);
        if (!wargs[n]) {
            for (size_t i = 0; i < n; i++)
                free(wargs[i]);
            return err_set(err, EINVAL, "run %s: not UTF-8", argv[0]);
        }
        cap += wcslen(wargs[n]) * 2 + 3;
    }
    wchar_t *cmd = malloc(cap * sizeof(wchar_t));
    size_t o = 0;
    for (size_t i = 0; cmd && i < n; i++) {
        if (i)
            cmd[o++] = L' ';
        quote_arg(cmd, &o, wargs[i]);
    }
    if (cmd)
        cmd[o] = L'\0';
    SECURITY_ATTRIBUTES sa = {sizeof(sa), NULL, TRUE};
    HANDLE nul = CreateFileW(L"NUL", GENERIC_READ | GENERIC_WRITE,
                             FILE_SHARE_READ | FILE_SHARE_WRITE, &sa, OPEN_EXISTING, 0, NULL);
    STARTUPINFOW si = {.cb = sizeof(si),
                       .dwFlags = STARTF_USESTDHANDLES,
                       .hStdInput = nul,
                       .hStdOutput = nul,
                       .hStdError = nul};
    PROCESS_INFORMATION pi;
    BOOL ok = cmd && CreateProcessW(wargs[0], cmd, NULL, NULL, TRUE, CREATE_NO_WINDOW, NULL, NULL,
                                    &si, &pi);
    DWORD e = GetLastError();
    if (nul != INVALID_HANDLE_VALUE)
        CloseHandle(nul);
    free(cmd);
    for (size_t i = 0; i < n; i++)
        free(wargs[i]);
    if (!ok)
        return err_set(err, win_errno(e), "run %s: CreateProcess: error %lu", argv[0],
                       (unsigned long)e);
    WaitForSingleObject(pi.hProcess, INFINITE);
    DWORD code = 1;
    GetExitCodeProcess(pi.hProcess, &code);
    CloseHandle(pi.hProcess);
    CloseHandle(pi.hThread);
    *status = (int)code;
    return 0;
}

int
os_pidfd_open(long pid)
{
    (void)pid;
    return -ENOSYS;
}

typedef void(WINAPI *nt_version_fn)(DWORD *, DWORD *, DWORD *);

int
os_windows_version(unsigned v[4], struct err *err)
{
    FARPROC f = GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "RtlGetNtVersionNumbers");
    if (!f)
        return err_set(err, ERR_UNAVAILABLE,
                       "windows version: ntdll has no RtlGetNtVersionNumbers");
    nt_version_fn fn;
    memcpy(&fn, &f, sizeof(fn));
    DWORD major = 0, minor = 0, build = 0;
    fn(&major, &minor, &build);
    DWORD ubr = 0, size = sizeof(ubr);
    if (RegGetValueW(HKEY_LOCAL_MACHINE, L"SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion", L"UBR",
                     RRF_RT_REG_DWORD, NULL, &ubr, &size) != ERROR_SUCCESS)
        ubr = 0;
    v[0] = major;
    v[1] = minor;
    v[2] = build & 0xffff; /* the top bits flag a checked build */
    v[3] = ubr;
    return 0;
}

int
os_library_probe(const char *dll, struct err *err)
{
    wchar_t *w = win_wide(dll);
    if (!w)
        return err_set(err, EINVAL, "%s: not a library name", dll);
    HMODULE m = LoadLibraryExW(w, NULL, LOAD_LIBRARY_SEARCH_SYSTEM32);
    DWORD e = GetLastError();
    free(w);
    if (m) {
        FreeLibrary(m);
        return 0;
    }
    if (e == ERROR_MOD_NOT_FOUND)
        return err_set(err, ERR_UNAVAILABLE, "%s not found", dll);
    return err_set(err, ERR_UNAVAILABLE, "%s cannot be loaded (error %lu)", dll, (unsigned long)e);
}

/* ---- signals and the service control manager ----------------------------- */

const int *
os_stop_signals(size_t *n)
{
    static const int sigs[] = {SIGINT, SIGBREAK};
    *n = sizeof(sigs) / sizeof(sigs[0]);
    return sigs;
}

int
os_open_files_raise(uint64_t want, uint64_t *have)
{
    *have = want;
    return 0;
}

void
os_process_setup(void)
{
    _setmode(2, _O_BINARY);
}

/* The service's one instance: the control manager calls its functions
 * with no argument of ours. */
static struct {
    int (*run)(void *arg);
    void (*stop)(void *arg);
    void *arg;
    int code;
    SERVICE_STATUS_HANDLE handle;
    SERVICE_STATUS status;
} service;

static void
service_report(DWORD state, DWORD wait_hint_ms)
{
    service.status.dwServiceType = SERVICE_WIN32_OWN_PROCESS;
    service.status.dwCurrentState = state;
    service.status.dwControlsAccepted =
        state == SERVICE_RUNNING ? SERVICE_ACCEPT_STOP | SERVICE_ACCEPT_SHUTDOWN : 0;
    service.status.dwWin32ExitCode =
        state == SERVICE_STOPPED && service.code ? ERROR_SERVICE_SPECIFIC_ERROR : NO_ERROR;
    service.status.dwServiceSpecificExitCode = (DWORD)service.code;
    service.status.dwWaitHint = wait_hint_ms;
    if (state == SERVICE_RUNNING || state == SERVICE_STOPPED)
        service.status.dwCheckPoint = 0;
    else
        service.status.dwCheckPoint++;
    SetServiceStatus(service.handle, &service.status);
}

/* On the control manager's thread. */
static DWORD WINAPI
service_control(DWORD control, DWORD type, LPVOID data, LPVOID ctx)
{
    (void)type;
    (void)data;
    (void)ctx;
    switch (control) {
    case SERVICE_CONTROL_STOP:
    case SERVICE_CONTROL_SHUTDOWN:
        /* Running jobs finish first: ask for time, then wake the loop. */
        service_report(SERVICE_STOP_PENDING, 30000);
        service.stop(service.arg);
        return NO_ERROR;
    case SERVICE_CONTROL_INTERROGATE:
        return NO_ERROR;
    default:
        return ERROR_CALL_NOT_IMPLEMENTED;
    }
}

static void WINAPI
service_main(DWORD argc, LPWSTR *argv)
{
    (void)argc;
    (void)argv;
    service.handle = RegisterServiceCtrlHandlerExW(L"berthd", service_control, NULL);
    if (!service.handle) {
        service.code = 1;
        return;
    }
    service_report(SERVICE_START_PENDING, 30000);
    /* The daemon reports itself running by listening; the manager is told
     * now, and told of the stop when run returns. */
    service_report(SERVICE_RUNNING, 0);
    service.code = service.run(service.arg);
    service_report(SERVICE_STOPPED, 0);
}

int
os_service_run(int (*run)(void *arg), void (*stop)(void *arg), void *arg, struct err *err)
{
    service.run = run;
    service.stop = stop;
    service.arg = arg;
    SERVICE_TABLE_ENTRYW table[] = {{(LPWSTR)L"berthd", service_main}, {NULL, NULL}};
    if (!StartServiceCtrlDispatcherW(table)) {
        DWORD e = GetLastError();
        if (e == ERROR_FAILED_SERVICE_CONTROLLER_CONNECT)
            return err_set(err, EINVAL,
                           "not started by the service control manager (create the service with "
                           "sc.exe create, and start it with sc.exe start)");
        return err_set(err, EIO, "StartServiceCtrlDispatcher: error %lu", (unsigned long)e);
    }
    return service.code;
}
