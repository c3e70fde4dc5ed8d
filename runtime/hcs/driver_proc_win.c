/*
 * The hcs driver's processes: HcsCreateProcess with the process document
 * (doc_request.h), and the durable records the daemon reads as on Linux
 * (layout in driver_int.h): stdout and stderr files that any number of
 * readers replay and follow, a pid record, an exit record.
 *
 * HCS hands back pipe HANDLEs for a process's stdio. A drain thread per
 * process (the driver's own, as the Linux init is the container's) copies
 * stdout and stderr into the files, keeps at most max_output_bytes of the
 * two together and terminates the process past that, and writes the exit
 * record once both pipes ended and HCS's exit event came. It polls the
 * pipes (PeekNamedPipe, a few ms apart when idle) rather than blocking in
 * ReadFile, so that closing the driver (a restart of the daemon) can stop
 * it at once without CancelSynchronousIo, and without ending the process:
 * the next open re-attaches (HcsOpenProcess, fresh stdio handles from
 * HcsGetProcessInfo) and the files go on where they stopped.
 *
 * The exit event runs on an HCS thread: it only sets the exit fields
 * under the driver's mutex. Every other function here blocks (HCS, the
 * disk): pool threads. Windows only.
 */
#include <windows.h>

#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/strv.h"
#include "common/winutil.h"
#include "runtime/hcs/doc_request.h"
#include "runtime/hcs/driver_int.h"
#include "runtime/hcs/winpath.h"

#define DRAIN_IDLE_MS 5
#define DRAIN_CHUNK 65536
/* A re-attached process whose pipes ended without an exit event (it
 * exited while the daemon was away: HCS does not replay events). */
#define REATTACH_EXIT_WAIT_MS 2000
#define EXIT_CTRL_C 0xC000013Au

static int64_t
now_ms(void)
{
    FILETIME ft;
    GetSystemTimeAsFileTime(&ft);
    ULARGE_INTEGER u = {.LowPart = ft.dwLowDateTime, .HighPart = ft.dwHighDateTime};
    return (int64_t)((u.QuadPart - 116444736000000000ULL) / 10000ULL);
}

static char *
procs_dir(const char *dir)
{
    size_t n = strlen(dir) + 16;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s\\hcs-procs", dir);
    return s;
}

static char *
proc_file(const char *dir, const char *id, const char *name)
{
    size_t n = strlen(dir) + strlen(id) + (name ? strlen(name) : 0) + 20;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, name ? "%s\\hcs-procs\\%s\\%s" : "%s\\hcs-procs\\%s", dir, id, name);
    return s;
}

static bool
file_exists(const char *path)
{
    cleanup_free wchar_t *w = win_wide(path);
    return w && GetFileAttributesW(w) != INVALID_FILE_ATTRIBUTES;
}

static HANDLE
file_append(const char *path)
{
    cleanup_free wchar_t *w = win_wide(path);
    if (!w)
        return INVALID_HANDLE_VALUE;
    return CreateFileW(w, FILE_APPEND_DATA, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                       NULL, OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
}

/* The process of id in c's list (no reference: c's list holds it while c lives). */
static struct hcs_dproc *
dproc_find(struct hcs_drv *drv, struct hcs_dctr *c, const char *id)
{
    pthread_mutex_lock(&drv->mu);
    struct hcs_dproc *p = c->procs;
    while (p && strcmp(p->id, id) != 0)
        p = p->next;
    pthread_mutex_unlock(&drv->mu);
    return p;
}

/* ---- the exit event and the drain thread ---- */

void
hcs_dproc_event_cb(void *arg, const struct hcs_event *ev)
{
    struct hcs_dproc *p = arg;
    if (ev->type != HCS_EVENT_PROCESS_EXITED)
        return;
    struct hcs_process_exit pe = {0};
    struct err err = {0};
    if (!ev->data || hcs_event_process_exit(ev->data, &pe, &err) < 0)
        pe.exit_code = 255;
    pthread_mutex_lock(&p->drv->mu);
    p->exited = true;
    p->exit_code = pe.exit_code;
    pthread_mutex_unlock(&p->drv->mu);
}

static int
exit_record_write(struct hcs_dproc *p, int code, int sig, const char *note)
{
    size_t n = strlen(p->pdir) + 8;
    cleanup_free char *path = malloc(n);
    if (!path)
        return -ENOMEM;
    snprintf(path, n, "%s\\exit", p->pdir);
    char text[400];
    snprintf(text, sizeof(text), "%d %d %d %lld\n%s\n", code, sig, p->truncated ? 1 : 0,
             (long long)now_ms(), note ? note : "");
    struct err err = {0};
    int ret = hcs_file_replace(path, text, &err);
    if (ret < 0)
        log_warn("hcs: process %s: exit record: %s", p->id, err.msg);
    return ret;
}

/* Copies what stream h has now into f; false when h ended (closed, set NULL). */
static bool
drain_one(struct hcs_dproc *p, void **h, HANDLE f, char *buf, bool *progress)
{
    DWORD avail = 0;
    if (!PeekNamedPipe(*h, NULL, 0, NULL, &avail, NULL)) {
        CloseHandle(*h);
        *h = NULL;
        return false;
    }
    if (avail == 0)
        return true;
    DWORD n = 0;
    if (!ReadFile(*h, buf, avail < DRAIN_CHUNK ? avail : DRAIN_CHUNK, &n, NULL) || n == 0)
        return true;
    *progress = true;
    DWORD keep = n;
    if (p->cap && p->written + n > p->cap) {
        keep = (DWORD)(p->cap - p->written);
        if (!p->truncated) {
            p->truncated = true;
            struct err err = {0};
            pthread_mutex_lock(&p->drv->mu);
            p->sent_signal = 9;
            pthread_mutex_unlock(&p->drv->mu);
            if (hcs_process_terminate(p->proc, HCS_OP_TIMEOUT_MS, &err) < 0)
                log_warn("hcs: process %s past its output cap: %s", p->id, err.msg);
        }
    }
    DWORD w = 0;
    if (keep && f != INVALID_HANDLE_VALUE)
        WriteFile(f, buf, keep, &w, NULL);
    p->written += keep;
    return true;
}

static DWORD WINAPI
drain_main(void *arg)
{
    struct hcs_dproc *p = arg;
    char *buf = malloc(DRAIN_CHUNK);
    size_t n = strlen(p->pdir) + 8;
    char *path = malloc(n);
    HANDLE f[2] = {INVALID_HANDLE_VALUE, INVALID_HANDLE_VALUE};
    for (int i = 0; path && i < 2; i++) {
        snprintf(path, n, "%s\\%s", p->pdir, i ? "stderr" : "stdout");
        f[i] = file_append(path);
    }
    free(path);
    while (buf && (p->io.std_out || p->io.std_err) && !p->stop) {
        bool progress = false;
        if (p->io.std_out)
            drain_one(p, &p->io.std_out, f[0], buf, &progress);
        if (p->io.std_err)
            drain_one(p, &p->io.std_err, f[1], buf, &progress);
        if (!progress)
            Sleep(DRAIN_IDLE_MS);
    }
    for (int i = 0; i < 2; i++)
        if (f[i] != INVALID_HANDLE_VALUE)
            CloseHandle(f[i]);
    free(buf);
    /* Both pipes ended: the exit event follows (or came already). */
    int64_t waited = 0;
    bool exited = false;
    while (!p->stop) {
        pthread_mutex_lock(&p->drv->mu);
        exited = p->exited;
        pthread_mutex_unlock(&p->drv->mu);
        if (exited)
            break;
        if (p->reattached && waited >= REATTACH_EXIT_WAIT_MS) {
            exit_record_write(p, 255, 0,
                              "exited while berthd was not running: its exit code is lost");
            return 0;
        }
        Sleep(DRAIN_IDLE_MS);
        waited += DRAIN_IDLE_MS;
    }
    if (!exited)
        return 0; /* stopped: the next open re-attaches */
    pthread_mutex_lock(&p->drv->mu);
    uint32_t code = p->exit_code;
    int sig = p->sent_signal;
    pthread_mutex_unlock(&p->drv->mu);
    if (p->truncated || sig == 9)
        exit_record_write(p, 128 + 9, 9, NULL);
    else if (sig && code == EXIT_CTRL_C)
        exit_record_write(p, 128 + sig, sig, NULL);
    else
        exit_record_write(p, (int)code, 0, NULL);
    return 0;
}

int
hcs_dproc_follow(struct hcs_dproc *p, struct err *err)
{
    p->thread = CreateThread(NULL, 0, drain_main, p, 0, NULL);
    if (!p->thread)
        return err_set(err, EAGAIN, "process %s: cannot start its drain thread (Windows error %lu)",
                       p->id, (unsigned long)GetLastError());
    return 0;
}

void
hcs_dproc_free(struct hcs_dproc *p)
{
    if (!p)
        return;
    InterlockedExchange((volatile LONG *)&p->stop, 1);
    if (p->thread) {
        WaitForSingleObject(p->thread, INFINITE);
        CloseHandle(p->thread);
    }
    hcs_process_close(p->proc); /* waits for a running callback */
    hcs_stdio_close(&p->io);
    free(p->id);
    free(p->pdir);
    free(p);
}

static struct hcs_dproc *
dproc_new(struct hcs_drv *drv, const char *dir, const char *id)
{
    struct hcs_dproc *p = calloc(1, sizeof(*p));
    if (!p || !(p->id = strdup(id)) || !(p->pdir = proc_file(dir, id, NULL))) {
        if (p)
            free(p->id);
        free(p);
        return NULL;
    }
    p->drv = drv;
    return p;
}

static void
dproc_link(struct hcs_drv *drv, struct hcs_dctr *c, struct hcs_dproc *p)
{
    pthread_mutex_lock(&drv->mu);
    p->next = c->procs;
    c->procs = p;
    pthread_mutex_unlock(&drv->mu);
}

/* ---- records ---- */

struct pid_rec {
    uint32_t pid;
    long long started_ms;
    int has_stdin;
};

static int
pid_read(const char *dir, const char *id, struct pid_rec *out, struct err *err)
{
    cleanup_free char *path = proc_file(dir, id, "pid");
    cleanup_free char *text = NULL;
    if (!path)
        return err_set(err, ENOMEM, "process %s: out of memory", id);
    int ret = hcs_file_read(path, 128, &text, err);
    if (ret < 0)
        return ret;
    unsigned long pid = 0;
    if (sscanf(text, "%lu %lld %d", &pid, &out->started_ms, &out->has_stdin) != 3)
        return err_set(err, EIO, "process %s: pid record %.40s is not valid", id, text);
    out->pid = (uint32_t)pid;
    return 0;
}

struct exit_rec {
    int code, sig, truncated;
    long long finished_ms;
    char note[256];
};

static int
exit_read(const char *dir, const char *id, struct exit_rec *out, struct err *err)
{
    cleanup_free char *path = proc_file(dir, id, "exit");
    cleanup_free char *text = NULL;
    if (!path)
        return err_set(err, ENOMEM, "process %s: out of memory", id);
    int ret = hcs_file_read(path, 600, &text, err);
    if (ret < 0)
        return ret;
    int used = 0;
    if (sscanf(text, "%d %d %d %lld%n", &out->code, &out->sig, &out->truncated, &out->finished_ms,
               &used) != 4)
        return err_set(err, EIO, "process %s: exit record %.40s is not valid", id, text);
    const char *note = text + used;
    while (*note == '\n' || *note == '\r')
        note++;
    snprintf(out->note, sizeof(out->note), "%.*s", (int)strcspn(note, "\r\n"), note);
    return 0;
}

/* ---- spawn ---- */

static int
spawn_files(const char *dir, const char *id, struct err *err)
{
    cleanup_free char *procs = procs_dir(dir);
    cleanup_free char *pdir = proc_file(dir, id, NULL);
    if (!procs || !pdir)
        return err_set(err, ENOMEM, "process %s: out of memory", id);
    int ret = hcs_mkdir(procs, err);
    if (ret == 0)
        ret = hcs_mkdir(pdir, err);
    for (int i = 0; ret == 0 && i < 2; i++) {
        cleanup_free char *path = proc_file(dir, id, i ? "stderr" : "stdout");
        HANDLE f = path ? file_append(path) : INVALID_HANDLE_VALUE;
        if (f == INVALID_HANDLE_VALUE)
            ret = err_set(err, EIO, "process %s: cannot create its output files", id);
        else
            CloseHandle(f);
    }
    return ret;
}

int
hcs_proc_spawn(void *ctx, const char *handle, const char *dir, const struct rt_proc_spec *spec,
               struct rt_proc_status *out, struct err *err)
{
    struct hcs_drv *drv = ctx;
    memset(out, 0, sizeof(*out));
    if (!rt_id_valid(spec->id))
        return err_set(err, EINVAL, "process id %.80s: invalid", spec->id ? spec->id : "(null)");
    struct hcs_dctr *c = hcs_dctr_get(drv, handle);
    if (!c)
        return err_set(err, ERR_UNAVAILABLE, "start process %s: container %s is not running",
                       spec->id, handle);
    int ret = 0;
    struct hcs_dproc *p = NULL;
    cleanup_free char *pdir = proc_file(dir, spec->id, NULL);
    cleanup_free char *params = NULL;
    cleanup_free char *pid_path = proc_file(dir, spec->id, "pid");
    if (!pdir || !pid_path) {
        ret = err_set(err, ENOMEM, "start process %s: out of memory", spec->id);
        goto out;
    }
    pthread_mutex_lock(&drv->mu);
    bool running = c->sys && c->status == RT_CONTAINER_RUNNING;
    pthread_mutex_unlock(&drv->mu);
    if (!running) {
        ret = err_set(err, ERR_UNAVAILABLE, "start process %s: container %s is not running",
                      spec->id, handle);
        goto out;
    }
    if (dproc_find(drv, c, spec->id) || file_exists(pdir)) {
        ret = err_set(err, ERR_CONFLICT, "start process %s: the id is in use in %s", spec->id,
                      handle);
        goto out;
    }
    char cwd[HCS_PATH_MAX + 1];
    char *const one[] = {(char *)spec->path, NULL};
    if ((ret = hcs_path_to_windows(spec->dir ? spec->dir : "/", cwd, sizeof(cwd), err)) < 0) {
        err_wrap(err, "start process %s: its directory", spec->id);
        goto out;
    }
    struct hcs_process_doc pd = {.argv = spec->argv ? spec->argv : one,
                                 .env = spec->env,
                                 .cwd = cwd,
                                 .stdin_pipe = spec->has_stdin,
                                 .stdout_pipe = true,
                                 .stderr_pipe = true};
    json_object *doc = hcs_doc_process(&pd, err);
    if (!doc || !(params = hcs_doc_string(doc))) {
        json_object_put(doc);
        ret = doc ? err_set(err, ENOMEM, "start process %s: out of memory", spec->id) : -err->code;
        goto out;
    }
    json_object_put(doc);
    if (!(p = dproc_new(drv, dir, spec->id))) {
        ret = err_set(err, ENOMEM, "start process %s: out of memory", spec->id);
        goto out;
    }
    p->has_stdin = spec->has_stdin;
    p->cap = spec->max_output_bytes ? spec->max_output_bytes : drv->max_output_bytes;
    if ((ret = spawn_files(dir, spec->id, err)) < 0)
        goto undo;
    ret = hcs_process_create(c->sys, params, HCS_OP_TIMEOUT_MS, hcs_dproc_event_cb, p, &p->proc,
                             &p->io, err);
    if (ret < 0) {
        /* It never ran: no record stays, as on Linux (422 upstream). */
        snprintf(out->error, sizeof(out->error), "%s", err->msg);
        out->exited = true;
        out->exit_code = 127;
        err_wrap(err, "start process %s", spec->id);
        if (err->code != ENOMEM && err->code != ERR_UNAVAILABLE)
            err->code = ENOEXEC;
        ret = -err->code;
        goto undo;
    }
    char rec[80];
    snprintf(rec, sizeof(rec), "%lu %lld %d\n", (unsigned long)p->io.pid, (long long)now_ms(),
             spec->has_stdin ? 1 : 0);
    if (hcs_file_replace(pid_path, rec, err) < 0 || hcs_dproc_follow(p, err) < 0) {
        struct err ignored = {0};
        hcs_process_terminate(p->proc, HCS_OP_TIMEOUT_MS, &ignored);
        ret = -(err->code ? err->code : ENOMEM);
        goto undo;
    }
    out->started = true;
    out->pid = (pid_t)p->io.pid;
    dproc_link(drv, c, p);
    p = NULL;
    goto out;
undo:
    hcs_dproc_free(p);
    p = NULL;
    {
        struct err ignored = {0};
        hcs_rmdir_files(pdir, &ignored);
    }
out:
    hcs_dctr_put(drv, c);
    return ret;
}

/* ---- re-attach ---- */

void
hcs_dproc_reattach(struct hcs_drv *drv, struct hcs_dctr *c)
{
    cleanup_free char *procs = procs_dir(c->dir);
    size_t n = procs ? strlen(procs) + 4 : 0;
    cleanup_free char *pat = procs ? malloc(n) : NULL;
    if (!pat)
        return;
    snprintf(pat, n, "%s\\*", procs);
    WIN32_FIND_DATAA fd;
    HANDLE f = FindFirstFileA(pat, &fd);
    if (f == INVALID_HANDLE_VALUE)
        return;
    do {
        const char *id = fd.cFileName;
        if (!(fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) || !rt_id_valid(id))
            continue;
        struct err err = {0};
        struct pid_rec pr;
        struct exit_rec er;
        if (exit_read(c->dir, id, &er, &err) == 0)
            continue; /* settled */
        struct hcs_dproc *p = dproc_new(drv, c->dir, id);
        if (!p)
            continue;
        if (pid_read(c->dir, id, &pr, &err) < 0) {
            /* A daemon that died between the directory and the pid record:
             * nothing will ever start it (as the oci driver settles them). */
            exit_record_write(p, 127, 0,
                              "not started: its spawn was cut short (the daemon stopped)");
            hcs_dproc_free(p);
            continue;
        }
        p->has_stdin = pr.has_stdin != 0;
        p->reattached = true;
        p->cap = drv->max_output_bytes;
        int ret = c->sys ? hcs_process_open(c->sys, pr.pid, &p->proc, &err)
                         : err_set(&err, ENOENT, "its container stopped");
        if (ret == 0)
            ret = hcs_process_set_callback(p->proc, hcs_dproc_event_cb, p, &err);
        if (ret == 0)
            ret = hcs_process_info(p->proc, &p->io, &err);
        if (ret < 0) {
            log_info("hcs: process %s in %s: gone while berthd was away (%s)", id, c->handle,
                     err.msg);
            exit_record_write(p, 255, 0,
                              "exited while berthd was not running: its exit code is "
                              "lost");
            hcs_dproc_free(p);
            continue;
        }
        if (!p->has_stdin && p->io.std_in) {
            CloseHandle(p->io.std_in);
            p->io.std_in = NULL;
        }
        /* What the files hold counts against the cap. */
        for (int i = 0; i < 2; i++) {
            cleanup_free char *path = proc_file(c->dir, id, i ? "stderr" : "stdout");
            cleanup_free wchar_t *w = path ? win_wide(path) : NULL;
            WIN32_FILE_ATTRIBUTE_DATA a;
            if (w && GetFileAttributesExW(w, GetFileExInfoStandard, &a))
                p->written += ((uint64_t)a.nFileSizeHigh << 32) | a.nFileSizeLow;
        }
        if (hcs_dproc_follow(p, &err) < 0) {
            log_warn("hcs: %s", err.msg);
            hcs_dproc_free(p);
            continue;
        }
        dproc_link(drv, c, p);
        log_info("hcs: process %s in %s re-attached (pid %lu)", id, c->handle,
                 (unsigned long)pr.pid);
    } while (FindNextFileA(f, &fd));
    FindClose(f);
}

/* ---- signal, status ---- */

int
hcs_proc_signal(void *ctx, const char *handle, const char *dir, const char *id, int sig,
                struct err *err)
{
    struct hcs_drv *drv = ctx;
    const char *name = NULL;
    int ret = hcs_signal_from_posix(sig, &name, err);
    if (ret < 0)
        return err_wrap(err, "signal process %s", id);
    struct hcs_dctr *c = hcs_dctr_get(drv, handle);
    struct hcs_dproc *p = c ? dproc_find(drv, c, id) : NULL;
    bool exited = true;
    if (p) {
        pthread_mutex_lock(&drv->mu);
        exited = p->exited;
        if (!exited)
            p->sent_signal = sig;
        pthread_mutex_unlock(&drv->mu);
    }
    if (exited) {
        hcs_dctr_put(drv, c);
        cleanup_free char *pdir = proc_file(dir, id, NULL);
        if (pdir && !file_exists(pdir))
            return err_set(err, ENOENT, "signal process %s: no such process", id);
        return err_set(err, ESRCH, "signal process %s: it has exited", id);
    }
    if (!name) {
        ret = hcs_process_terminate(p->proc, HCS_OP_TIMEOUT_MS, err);
    } else {
        json_object *doc = hcs_doc_signal(name, err);
        cleanup_free char *opts = doc ? hcs_doc_string(doc) : NULL;
        json_object_put(doc);
        ret = opts ? hcs_process_signal(p->proc, opts, HCS_OP_TIMEOUT_MS, err)
                   : err_set(err, ENOMEM, "signal process %s: out of memory", id);
    }
    hcs_dctr_put(drv, c);
    return ret < 0 ? err_wrap(err, "signal process %s", id) : 0;
}

int
hcs_proc_status(void *ctx, const char *handle, const char *dir, const char *id,
                struct rt_proc_status *out, struct err *err)
{
    (void)ctx;
    (void)handle;
    memset(out, 0, sizeof(*out));
    cleanup_free char *pdir = proc_file(dir, id, NULL);
    if (!pdir)
        return err_set(err, ENOMEM, "process %s: out of memory", id);
    if (!file_exists(pdir))
        return err_set(err, ENOENT, "process %s: no such process", id);
    struct pid_rec pr;
    struct err e = {0};
    if (pid_read(dir, id, &pr, &e) == 0) {
        out->started = true;
        out->pid = (pid_t)pr.pid;
    }
    struct exit_rec er;
    if (exit_read(dir, id, &er, &e) == 0) {
        out->exited = true;
        out->exit_code = er.code;
        out->signal = er.sig;
        out->output_truncated = er.truncated != 0;
        snprintf(out->error, sizeof(out->error), "%s", er.note);
    }
    return 0;
}

/* ---- output, stdin ---- */

int
hcs_proc_output_open(void *ctx, const char *handle, const char *dir, const char *id, int which,
                     struct err *err)
{
    (void)ctx;
    (void)handle;
    cleanup_free char *path = proc_file(dir, id, which ? "stderr" : "stdout");
    cleanup_free wchar_t *w = path ? win_wide(path) : NULL;
    if (!w)
        return err_set(err, ENOMEM, "output of %s: out of memory", id);
    HANDLE h = CreateFileW(w, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                           NULL, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    if (h == INVALID_HANDLE_VALUE)
        return GetLastError() == ERROR_FILE_NOT_FOUND || GetLastError() == ERROR_PATH_NOT_FOUND
                   ? err_set(err, ENOENT, "output of %s: none yet", id)
                   : err_set(err, EIO, "output of %s: Windows error %lu", id,
                             (unsigned long)GetLastError());
    int fd = _open_osfhandle((intptr_t)h, _O_RDONLY | _O_BINARY);
    if (fd < 0) {
        CloseHandle(h);
        return err_set(err, EMFILE, "output of %s: no file descriptor", id);
    }
    return fd;
}

int
hcs_proc_stdin_open(void *ctx, const char *handle, const char *dir, const char *id, struct err *err)
{
    struct hcs_drv *drv = ctx;
    (void)dir;
    struct hcs_dctr *c = hcs_dctr_get(drv, handle);
    struct hcs_dproc *p = c ? dproc_find(drv, c, id) : NULL;
    HANDLE dup = NULL;
    int ret = 0;
    if (!p || !p->io.std_in)
        ret = err_set(err, ENOENT, "stdin of %s: none (not asked for, closed or exited)", id);
    else if (!DuplicateHandle(GetCurrentProcess(), p->io.std_in, GetCurrentProcess(), &dup, 0,
                              FALSE, DUPLICATE_SAME_ACCESS))
        ret =
            err_set(err, EIO, "stdin of %s: Windows error %lu", id, (unsigned long)GetLastError());
    hcs_dctr_put(drv, c);
    if (ret < 0)
        return ret;
    int fd = _open_osfhandle((intptr_t)dup, _O_WRONLY | _O_BINARY);
    if (fd < 0) {
        CloseHandle(dup);
        return err_set(err, EMFILE, "stdin of %s: no file descriptor", id);
    }
    return fd;
}

int
hcs_proc_stdin_close(void *ctx, const char *handle, const char *dir, const char *id,
                     struct err *err)
{
    struct hcs_drv *drv = ctx;
    (void)dir;
    struct hcs_dctr *c = hcs_dctr_get(drv, handle);
    struct hcs_dproc *p = c ? dproc_find(drv, c, id) : NULL;
    int ret = 0;
    if (p && p->io.std_in) {
        CloseHandle(p->io.std_in);
        p->io.std_in = NULL;
        json_object *doc = hcs_doc_process_close_stdin();
        cleanup_free char *s = doc ? hcs_doc_string(doc) : NULL;
        json_object_put(doc);
        ret = s ? hcs_process_modify(p->proc, s, err) : err_set(err, ENOMEM, "out of memory");
        if (ret == -ESRCH)
            ret = 0; /* it has exited: nothing to tell */
    }
    hcs_dctr_put(drv, c);
    return ret < 0 ? err_wrap(err, "close stdin of %s", id) : 0;
}

/* ---- the layout, for the daemon ---- */

char *
hcs_proc_watch_dir(void *ctx, const char *handle, const char *dir, const char *id)
{
    (void)ctx;
    (void)handle;
    return proc_file(dir, id, NULL);
}

enum rt_proc_change
hcs_proc_change(const char *filename)
{
    if (!filename)
        return RT_PROC_CHANGE_NONE;
    if (strcmp(filename, "stdout") == 0)
        return RT_PROC_CHANGE_STDOUT;
    if (strcmp(filename, "stderr") == 0)
        return RT_PROC_CHANGE_STDERR;
    if (strcmp(filename, "pid") == 0 || strcmp(filename, "exit") == 0)
        return RT_PROC_CHANGE_STATUS;
    return RT_PROC_CHANGE_NONE;
}

int
hcs_proc_list(void *ctx, const char *handle, const char *dir, char ***ids, struct err *err)
{
    (void)ctx;
    (void)handle;
    cleanup_free char *procs = procs_dir(dir);
    size_t n = procs ? strlen(procs) + 4 : 0, len = 0;
    cleanup_free char *pat = procs ? malloc(n) : NULL;
    char **v = calloc(1, sizeof(char *));
    if (!pat || !v) {
        free(v);
        return err_set(err, ENOMEM, "list processes: out of memory");
    }
    snprintf(pat, n, "%s\\*", procs);
    WIN32_FIND_DATAA fd;
    HANDLE f = FindFirstFileA(pat, &fd);
    if (f != INVALID_HANDLE_VALUE) {
        do {
            if ((fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) && rt_id_valid(fd.cFileName) &&
                strv_push(&v, &len, fd.cFileName) < 0) {
                FindClose(f);
                strv_free(v);
                return err_set(err, ENOMEM, "list processes: out of memory");
            }
        } while (FindNextFileA(f, &fd));
        FindClose(f);
    }
    *ids = v;
    return 0;
}

int
hcs_proc_times(void *ctx, const char *handle, const char *dir, const char *id,
               struct rt_proc_times *out, struct err *err)
{
    (void)ctx;
    (void)handle;
    memset(out, 0, sizeof(*out));
    struct pid_rec pr;
    int ret = pid_read(dir, id, &pr, err);
    if (ret < 0)
        return ret;
    out->started_ms = pr.started_ms;
    out->has_stdin = pr.has_stdin != 0;
    struct exit_rec er;
    struct err e = {0};
    if (exit_read(dir, id, &er, &e) == 0)
        out->finished_ms = er.finished_ms;
    return 0;
}

int
hcs_proc_remove(void *ctx, const char *handle, const char *dir, const char *id, struct err *err)
{
    struct hcs_drv *drv = ctx;
    cleanup_free char *pdir = proc_file(dir, id, NULL);
    if (!pdir)
        return err_set(err, ENOMEM, "remove process %s: out of memory", id);
    struct hcs_dctr *c = hcs_dctr_get(drv, handle);
    struct hcs_dproc *p = c ? dproc_find(drv, c, id) : NULL;
    if (p) {
        cleanup_free char *exit_path = proc_file(dir, id, "exit");
        if (!exit_path || !file_exists(exit_path)) {
            hcs_dctr_put(drv, c);
            return err_set(err, ERR_CONFLICT, "remove process %s: it is running", id);
        }
        pthread_mutex_lock(&drv->mu);
        for (struct hcs_dproc **pp = &c->procs; *pp; pp = &(*pp)->next)
            if (*pp == p) {
                *pp = p->next;
                break;
            }
        pthread_mutex_unlock(&drv->mu);
        hcs_dproc_free(p);
    }
    hcs_dctr_put(drv, c);
    if (!file_exists(pdir))
        return err_set(err, ENOENT, "remove process %s: no such process", id);
    return hcs_rmdir_files(pdir, err);
}
