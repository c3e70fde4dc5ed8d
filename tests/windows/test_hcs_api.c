/*
 * runtime/hcs/hcs_api_win.c under Wine, against the TEST DOUBLE of
 * computecore.dll (tests/doubles/computecore/): loading (and the refusals
 * when the DLL is missing or too old), detection, compute systems and
 * processes from create to close with real pipe stdio, signals, exit
 * codes, events, restart recovery, and the failures real hosts have (no
 * Hyper-V, commit limit, a dying system, old schema, timeouts, the Server
 * 2022 create-process quirk). The double records every document it gets;
 * the tests compare them with the golden files the Linux suites use.
 */
#include "runtime/hcs/hcs_api.h"

#include <windows.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/hcs_golden.h"
#include "hcs_double_log.h"
#include "runtime/hcs/cmdline.h"
#include "runtime/hcs/doc_request.h"
#include "runtime/hcs/doc_system.h"
#include "runtime/hcs/hresult.h"
#include "runtime/hcs/props.h"

#define T 10000 /* ms: an operation of the double takes a few */

/* ---- fixture: the double's path, a fresh record directory, no failures ---- */

static char exe_dir[MAX_PATH];
static char dbl_path[MAX_PATH + 32];
static char rec_dir[MAX_PATH + 64];
static struct hcs_api *api;

static void
paths_init(void)
{
    if (exe_dir[0])
        return;
    GetModuleFileNameA(NULL, exe_dir, sizeof(exe_dir));
    char *slash = strrchr(exe_dir, '\\');
    if (slash)
        *slash = '\0';
    snprintf(dbl_path, sizeof(dbl_path), "%s\\computecore.dll", exe_dir);
}

static void
setup(void)
{
    static int n;
    paths_init();
    char tmp[MAX_PATH];
    GetTempPathA(sizeof(tmp), tmp);
    snprintf(rec_dir, sizeof(rec_dir), "%sberth-hcs-%lu-%d", tmp, GetCurrentProcessId(), ++n);
    CreateDirectoryA(rec_dir, NULL);
    SetEnvironmentVariableA("BERTH_HCS_DOUBLE_DIR", rec_dir);
    SetEnvironmentVariableA("BERTH_HCS_DOUBLE_FAIL", NULL);
    SetEnvironmentVariableA("BERTH_HCS_DOUBLE_LPS", NULL);
    SetEnvironmentVariableA("BERTH_TEST_HCS_DLL", NULL);
    struct err err = {0};
    ck_assert_msg(hcs_api_open(dbl_path, &api, &err) == 0, "%s", err.msg);
}

static void
teardown(void)
{
    hcs_api_free(api);
    api = NULL;
    char pat[MAX_PATH + 80];
    snprintf(pat, sizeof(pat), "%s\\*", rec_dir);
    WIN32_FIND_DATAA fd;
    HANDLE f = FindFirstFileA(pat, &fd);
    if (f != INVALID_HANDLE_VALUE) {
        do {
            char p[MAX_PATH * 2];
            snprintf(p, sizeof(p), "%s\\%s", rec_dir, fd.cFileName);
            DeleteFileA(p);
        } while (FindNextFileA(f, &fd));
        FindClose(f);
    }
    RemoveDirectoryA(rec_dir);
}

static void
fail_mode(const char *modes)
{
    SetEnvironmentVariableA("BERTH_HCS_DOUBLE_FAIL", modes);
}

static json_object *
recorded(const char *fn, int nth)
{
    return hcs_log_recorded(rec_dir, fn, nth);
}

static int
called(const char *fn)
{
    return hcs_log_called(rec_dir, fn);
}

/* ---- events: the callbacks push, the test waits ---- */

struct evq {
    CRITICAL_SECTION cs;
    CONDITION_VARIABLE cv;
    int n;
    uint32_t type[16];
    char *data[16];
};

static void
evq_init(struct evq *q)
{
    memset(q, 0, sizeof(*q));
    InitializeCriticalSection(&q->cs);
    InitializeConditionVariable(&q->cv);
}

static void
evq_free(struct evq *q)
{
    for (int i = 0; i < q->n; i++)
        free(q->data[i]);
    DeleteCriticalSection(&q->cs);
}

/* An HCS thread: copy and wake, nothing else (as the driver's uv_async_send). */
static void
evq_push(void *arg, const struct hcs_event *ev)
{
    struct evq *q = arg;
    EnterCriticalSection(&q->cs);
    if (q->n < 16) {
        q->type[q->n] = ev->type;
        q->data[q->n] = ev->data ? strdup(ev->data) : NULL;
        q->n++;
    }
    WakeAllConditionVariable(&q->cv);
    LeaveCriticalSection(&q->cs);
}

/* The data of the first event of type, waiting up to 10 s; NULL if none came. */
static const char *
evq_wait(struct evq *q, uint32_t type)
{
    ULONGLONG end = GetTickCount64() + T;
    const char *found = NULL;
    EnterCriticalSection(&q->cs);
    for (;;) {
        for (int i = 0; i < q->n && !found; i++)
            if (q->type[i] == type)
                found = q->data[i] ? q->data[i] : "";
        ULONGLONG now = GetTickCount64();
        if (found || now >= end)
            break;
        SleepConditionVariableCS(&q->cv, &q->cs, (DWORD)(end - now));
    }
    LeaveCriticalSection(&q->cs);
    return found;
}

/* ---- pipes ---- */

static char *
read_all(void *h)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 1024 > cap)
            buf = realloc(buf, cap *= 2);
        DWORD n = 0;
        if (!ReadFile(h, buf + len, (DWORD)(cap - len - 1), &n, NULL) || n == 0)
            break;
        len += n;
    }
    buf[len] = '\0';
    return buf;
}

static void
write_all(void *h, const char *s)
{
    DWORD n = 0;
    ck_assert(WriteFile(h, s, (DWORD)strlen(s), &n, NULL));
    ck_assert_int_eq(n, strlen(s));
}

/* ---- building documents as the driver will ---- */

#define TOP "6ba9cac1-7086-5ee9-a197-c465d3f50ad7"
#define BASE "02740e08-d1d3-5715-9c08-c255eab4ca01"
#define VOLUME "\\\\?\\Volume{baac0fd5-16b7-405b-9621-112aa8e3d973}\\"

static char *
container_doc(bool terminate_on_close)
{
    struct err err = {0};
    struct hcs_layer layers[] = {{BASE, "C:\\ProgramData\\berth\\snapshots\\base"}};
    struct hcs_container_doc c = {
        .terminate_on_last_handle_closed = terminate_on_close,
        .layers = layers,
        .nlayers = 1,
        .scratch_path = VOLUME,
    };
    json_object *doc = hcs_doc_container(&c, &err);
    ck_assert_msg(doc, "%s", err.msg);
    char *s = hcs_doc_string(doc);
    json_object_put(doc);
    return s;
}

static char *
uvm_doc(void)
{
    struct err err = {0};
    struct hcs_uvm_doc u = {
        .memory_mb = 1024,
        .processors = 2,
        .os_files_path = "C:\\ProgramData\\berth\\snapshots\\base\\UtilityVM\\Files",
        .scratch_vhd = "C:\\ProgramData\\berth\\containers\\b\\vm\\sandbox.vhdx",
    };
    json_object *doc = hcs_doc_uvm(&u, &err);
    ck_assert_msg(doc, "%s", err.msg);
    char *s = hcs_doc_string(doc);
    json_object_put(doc);
    return s;
}

/* Parameters of a scripted process: argv[0] is the program, the rest the script. */
static char *
process_doc(char *const *argv, char *const *env, const char *cwd, bool in)
{
    struct err err = {0};
    struct hcs_process_doc p = {
        .argv = argv,
        .env = env,
        .cwd = cwd,
        .stdin_pipe = in,
        .stdout_pipe = true,
        .stderr_pipe = true,
    };
    json_object *doc = hcs_doc_process(&p, &err);
    ck_assert_msg(doc, "%s", err.msg);
    char *s = hcs_doc_string(doc);
    json_object_put(doc);
    return s;
}

/* A started container with an event queue. */
static struct hcs_system *
container_up(const char *id, struct evq *q, bool terminate_on_close)
{
    struct err err = {0};
    struct hcs_system *sys = NULL;
    char *doc = container_doc(terminate_on_close);
    ck_assert_msg(hcs_system_create(api, id, doc, T, &sys, &err) == 0, "%s", err.msg);
    free(doc);
    if (q)
        ck_assert_int_eq(hcs_system_set_callback(sys, evq_push, q, &err), 0);
    ck_assert_msg(hcs_system_start(sys, T, &err) == 0, "%s", err.msg);
    return sys;
}

static void
container_down(struct hcs_system *sys)
{
    struct err err = {0};
    ck_assert_msg(hcs_system_terminate(sys, T, &err) == 0, "%s", err.msg);
    hcs_system_close(sys);
}

/* ---- loading ---- */

/*
 * In a process of its own (this executable with --probe-system-dll): here
 * the double is loaded already, and a loaded module answers a load by
 * its name whatever the search flags say.
 */
static int
probe_system_dll(void)
{
    struct err err = {0};
    struct hcs_api *a = NULL;
    int r = hcs_api_open(NULL, &a, &err);
    printf("open %d %s\n", r, err.msg);
    struct hcs_caps caps;
    hcs_detect(NULL, &caps);
    printf("process %d %s\nhyperv %d %s\n", caps.process_usable, caps.process_reason,
           caps.hyperv_usable, caps.hyperv_reason);
    fflush(stdout);
    return r == -ERR_UNAVAILABLE ? 0 : 1;
}

START_TEST(missing_dll_says_computecore_not_found)
{
    /* Wine's System32 has no computecore.dll, like a Windows without HCS,
     * and the double beside the executable must not be found instead. */
    char cmd[MAX_PATH * 2];
    GetModuleFileNameA(NULL, cmd, MAX_PATH);
    strcat(cmd, " --probe-system-dll");
    SECURITY_ATTRIBUTES sa = {sizeof(sa), NULL, TRUE};
    HANDLE r, w;
    ck_assert(CreatePipe(&r, &w, &sa, 0));
    SetHandleInformation(r, HANDLE_FLAG_INHERIT, 0);
    STARTUPINFOA si = {sizeof(si)};
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdOutput = w;
    si.hStdError = w;
    si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
    PROCESS_INFORMATION pi;
    SetEnvironmentVariableA("BERTH_TEST_HCS_DLL", NULL);
    ck_assert(CreateProcessA(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi));
    CloseHandle(w);
    char *out = read_all(r);
    CloseHandle(r);
    WaitForSingleObject(pi.hProcess, T);
    DWORD code = 99;
    GetExitCodeProcess(pi.hProcess, &code);
    CloseHandle(pi.hProcess);
    CloseHandle(pi.hThread);
    ck_assert_msg(code == 0, "probe: exit %lu: %s", code, out);
    ck_assert_msg(strstr(out, "computecore.dll not found"), "%s", out);
    ck_assert_msg(strstr(out, "Containers feature"), "%s", out);
    ck_assert_msg(strstr(out, "process 0 the Host Compute Service is not usable (computecore.dll "
                              "not found"),
                  "%s", out);
    ck_assert_msg(strstr(out, "hyperv 0 Hyper-V is not available on this host"), "%s", out);
    free(out);

    /* A path to no DLL says where it looked. */
    struct err err = {0};
    struct hcs_api *a = NULL;
    char nowhere[MAX_PATH + 64];
    snprintf(nowhere, sizeof(nowhere), "%s\\nowhere\\computecore.dll", exe_dir);
    ck_assert_int_eq(hcs_api_open(nowhere, &a, &err), -ERR_UNAVAILABLE);
    ck_assert_ptr_nonnull(strstr(err.msg, "computecore.dll not found at "));
}
END_TEST

START_TEST(dll_without_an_export_is_refused)
{
    struct err err = {0};
    struct hcs_api *a = NULL;
    char old[MAX_PATH + 64];
    snprintf(old, sizeof(old), "%s\\hcs-double-1709\\computecore.dll", exe_dir);
    ck_assert_int_eq(hcs_api_open(old, &a, &err), -ERR_UNAVAILABLE);
    ck_assert_ptr_nonnull(strstr(err.msg, "has no HcsSetProcessCallback"));
}
END_TEST

START_TEST(test_builds_take_the_dll_from_the_environment)
{
    struct err err = {0};
    struct hcs_api *a = NULL;
    SetEnvironmentVariableA("BERTH_TEST_HCS_DLL", dbl_path);
    /* The CRT's copy of the environment is what getenv reads. */
    char env[MAX_PATH + 64];
    snprintf(env, sizeof(env), "BERTH_TEST_HCS_DLL=%s", dbl_path);
    _putenv(env);
    ck_assert_msg(hcs_api_open(NULL, &a, &err) == 0, "%s", err.msg);
    hcs_api_free(a);
    _putenv("BERTH_TEST_HCS_DLL=");
}
END_TEST

/* ---- detection ---- */

START_TEST(detection_finds_schema_and_processors)
{
    SetEnvironmentVariableA("BERTH_HCS_DOUBLE_LPS", "6");
    struct hcs_caps caps;
    hcs_detect(dbl_path, &caps);
    ck_assert_msg(caps.process_usable, "%s", caps.process_reason);
    ck_assert_msg(caps.hyperv_usable, "%s", caps.hyperv_reason);
    ck_assert_int_eq(caps.schema_minor, 5);
    ck_assert_uint_eq(caps.lp_count, 6);
    golden_check(recorded("HcsGetServiceProperties", 1), "query_basic.json");
    golden_check(recorded("HcsGetServiceProperties", 2), "query_processor_topology.json");
}
END_TEST

START_TEST(detection_without_hyperv_reports_the_catastrophic_failure)
{
    fail_mode("no-hyperv");
    struct hcs_caps caps;
    hcs_detect(dbl_path, &caps);
    ck_assert(caps.process_usable);
    ck_assert(!caps.hyperv_usable);
    ck_assert_ptr_nonnull(strstr(caps.hyperv_reason, "Hyper-V is not available on this host ("));
    ck_assert_msg(strstr(caps.hyperv_reason, "Hyper-V is not available on this host "
                                             "(HcsGetServiceProperties ProcessorTopology: "
                                             "E_UNEXPECTED (0x8000FFFF): "),
                  "%s", caps.hyperv_reason);
    /* FormatMessageW's text: "Catastrophic failure" (Wine has it too). */
    ck_assert_msg(strstr(caps.hyperv_reason, "Catastrophic failure") ||
                      strstr(caps.hyperv_reason, "catastrophic failure"),
                  "%s", caps.hyperv_reason);
}
END_TEST

START_TEST(detection_on_an_old_or_absent_service)
{
    struct hcs_caps caps;
    fail_mode("schema-2.0");
    hcs_detect(dbl_path, &caps);
    ck_assert(!caps.process_usable);
    ck_assert_ptr_nonnull(strstr(caps.process_reason, "schema 2.0 at most"));
    fail_mode("no-service");
    hcs_detect(dbl_path, &caps);
    ck_assert(!caps.process_usable);
    ck_assert_ptr_nonnull(strstr(caps.process_reason, "HCS_E_SERVICE_NOT_AVAILABLE (0x80370114)"));
}
END_TEST

/* ---- containers and processes ---- */

START_TEST(container_runs_a_process_and_reports_its_exit)
{
    struct err err = {0};
    struct evq sq, pq;
    evq_init(&sq);
    evq_init(&pq);
    struct hcs_system *sys = container_up("berth-life", &sq, false);
    ck_assert_str_eq(hcs_system_id(sys), "berth-life");

    /* The double got exactly the document the builder made. */
    json_object *got = recorded("HcsCreateComputeSystem", 1);
    ck_assert_ptr_nonnull(got);
    char *want = container_doc(false);
    json_object *w = json_tokener_parse(want);
    ck_assert(json_object_equal(got, w));
    json_object_put(w);
    json_object_put(got);
    free(want);

    char *argv[] = {"prog.exe", "out", "hello", "err", "oops", "exit", "3", NULL};
    char *params = process_doc(argv, NULL, NULL, false);
    struct hcs_process *p = NULL;
    struct hcs_stdio io = {0};
    ck_assert_msg(hcs_process_create(sys, params, T, evq_push, &pq, &p, &io, &err) == 0, "%s",
                  err.msg);
    free(params);
    ck_assert_ptr_null(io.std_in);
    ck_assert_ptr_nonnull(io.std_out);
    ck_assert_ptr_nonnull(io.std_err);
    ck_assert_uint_eq(io.pid, hcs_process_pid(p));
    char *out = read_all(io.std_out);
    char *errs = read_all(io.std_err);
    ck_assert_str_eq(out, "hello");
    ck_assert_str_eq(errs, "oops");
    free(out);
    free(errs);
    const char *exit = evq_wait(&pq, HCS_EVENT_PROCESS_EXITED);
    ck_assert_ptr_nonnull(exit);
    struct hcs_process_exit pe;
    ck_assert_int_eq(hcs_event_process_exit(exit, &pe, &err), 0);
    ck_assert(pe.exited);
    ck_assert_uint_eq(pe.exit_code, 3);
    ck_assert_uint_eq(pe.pid, io.pid);
    hcs_stdio_close(&io);
    hcs_process_close(p);

    /* Statistics come back through the properties query. */
    const char *types[] = {HCS_PROP_STATISTICS, NULL};
    json_object *q = hcs_doc_query(types);
    char *query = hcs_doc_string(q);
    json_object_put(q);
    char *props = NULL;
    ck_assert_int_eq(hcs_system_properties(sys, query, &props, &err), 0);
    struct hcs_stats st;
    ck_assert_int_eq(hcs_props_statistics(props, &st, &err), 0);
    ck_assert_uint_gt(st.memory_commit_bytes, 0);
    free(props);
    free(query);

    ck_assert_msg(hcs_system_shutdown(sys, T, &err) == 0, "%s", err.msg);
    const char *sx = evq_wait(&sq, HCS_EVENT_SYSTEM_EXITED);
    ck_assert_ptr_nonnull(sx);
    struct hcs_system_exit se;
    ck_assert_int_eq(hcs_event_system_exit(sx, &se, &err), 0);
    ck_assert_str_eq(se.exit_type, "GracefulExit");
    ck_assert_uint_eq(se.status, 0);
    hcs_system_close(sys);
    evq_free(&sq);
    evq_free(&pq);
}
END_TEST

START_TEST(stdin_reaches_the_process_and_ends_with_close_handle)
{
    struct err err = {0};
    struct hcs_system *sys = container_up("berth-echo", NULL, false);
    char *argv[] = {"prog.exe", "echo", NULL};
    char *params = process_doc(argv, NULL, NULL, true);
    struct hcs_process *p = NULL;
    struct hcs_stdio io = {0};
    ck_assert_int_eq(hcs_process_create(sys, params, T, NULL, NULL, &p, &io, &err), 0);
    free(params);
    ck_assert_ptr_nonnull(io.std_in);
    write_all(io.std_in, "line one\nline two\n");
    CloseHandle(io.std_in);
    io.std_in = NULL;
    json_object *close = hcs_doc_process_close_stdin();
    char *cs = hcs_doc_string(close);
    json_object_put(close);
    ck_assert_int_eq(hcs_process_modify(p, cs, &err), 0);
    free(cs);
    golden_check(recorded("HcsModifyProcess", 1), "process_close_stdin.json");
    char *out = read_all(io.std_out);
    ck_assert_str_eq(out, "line one\nline two\n");
    free(out);
    hcs_stdio_close(&io);
    hcs_process_close(p);
    container_down(sys);
}
END_TEST

START_TEST(process_gets_its_arguments_environment_and_directory)
{
    struct err err = {0};
    struct hcs_system *sys = container_up("berth-params", NULL, false);
    /* Arguments that need the Windows quoting rules to survive. */
    char *argv[] = {"C:\\Program Files\\x\\prog.exe",
                    "env",
                    "Foo",
                    "cwd",
                    "user",
                    "args",
                    "a b",
                    "say \"hi\"",
                    "C:\\dir with space\\",
                    "",
                    "back\\\\slash",
                    NULL};
    char *env[] = {"FOO=bar baz", "EMPTY=", NULL};
    char *params = process_doc(argv, env, "C:\\tmp\\build", false);
    struct hcs_process *p = NULL;
    struct hcs_stdio io = {0};
    ck_assert_int_eq(hcs_process_create(sys, params, T, NULL, NULL, &p, &io, &err), 0);
    free(params);
    char *out = read_all(io.std_out);
    ck_assert_str_eq(out, "bar baz\nC:\\tmp\\build\nContainerUser\na b\nsay \"hi\"\n"
                          "C:\\dir with space\\\n\nback\\\\slash\n");
    free(out);
    hcs_stdio_close(&io);
    hcs_process_close(p);
    container_down(sys);
}
END_TEST

START_TEST(signals_end_a_process_unless_it_ignores_them)
{
    struct err err = {0};
    struct hcs_system *sys = container_up("berth-signal", NULL, false);
    struct evq q;
    evq_init(&q);
    char *argv[] = {"prog.exe", "out", "ready", "wait", NULL};
    char *params = process_doc(argv, NULL, NULL, false);
    struct hcs_process *p = NULL;
    struct hcs_stdio io = {0};
    ck_assert_int_eq(hcs_process_create(sys, params, T, evq_push, &q, &p, &io, &err), 0);
    char buf[8] = {0};
    DWORD n = 0;
    ck_assert(ReadFile(io.std_out, buf, 5, &n, NULL));
    const char *name = NULL;
    ck_assert_int_eq(hcs_signal_from_posix(HCS_SIGTERM, &name, &err), 0);
    json_object *sig = hcs_doc_signal(name, &err);
    char *ss = hcs_doc_string(sig);
    json_object_put(sig);
    ck_assert_int_eq(hcs_process_signal(p, ss, T, &err), 0);
    golden_check(recorded("HcsSignalProcess", 1), "signal_ctrlshutdown.json");
    struct hcs_process_exit pe;
    const char *ev = evq_wait(&q, HCS_EVENT_PROCESS_EXITED);
    ck_assert_ptr_nonnull(ev);
    ck_assert_int_eq(hcs_event_process_exit(ev, &pe, &err), 0);
    ck_assert_uint_eq(pe.exit_code, 0xC000013Au); /* STATUS_CONTROL_C_EXIT */
    /* Signalling it again: it is gone. */
    ck_assert_int_eq(hcs_process_signal(p, ss, T, &err), -ESRCH);
    ck_assert_ptr_nonnull(strstr(err.msg, "HCS_E_PROCESS_ALREADY_STOPPED"));
    hcs_stdio_close(&io);
    hcs_process_close(p);
    evq_free(&q);
    free(params);

    /* One that ignores signals runs on until it is terminated. */
    evq_init(&q);
    char *stubborn[] = {"prog.exe", "ignore-signals", "wait", NULL};
    params = process_doc(stubborn, NULL, NULL, false);
    ck_assert_int_eq(hcs_process_create(sys, params, T, evq_push, &q, &p, &io, &err), 0);
    free(params);
    Sleep(50);
    ck_assert_int_eq(hcs_process_signal(p, ss, T, &err), 0);
    Sleep(100);
    EnterCriticalSection(&q.cs);
    ck_assert_int_eq(q.n, 0);
    LeaveCriticalSection(&q.cs);
    ck_assert_int_eq(hcs_process_terminate(p, T, &err), 0);
    ev = evq_wait(&q, HCS_EVENT_PROCESS_EXITED);
    ck_assert_ptr_nonnull(ev);
    ck_assert_int_eq(hcs_event_process_exit(ev, &pe, &err), 0);
    ck_assert_uint_eq(pe.exit_code, 1);
    /* Terminating what is gone is success. */
    ck_assert_int_eq(hcs_process_terminate(p, T, &err), 0);
    free(ss);
    hcs_stdio_close(&io);
    hcs_process_close(p);
    evq_free(&q);
    container_down(sys);
}
END_TEST

START_TEST(processes_are_reopened_by_pid_and_give_fresh_stdio)
{
    struct err err = {0};
    struct hcs_system *sys = container_up("berth-reopen", NULL, false);
    char *argv[] = {"prog.exe", "wait", NULL};
    char *params = process_doc(argv, NULL, NULL, true);
    struct hcs_process *p = NULL;
    struct hcs_stdio io = {0};
    ck_assert_int_eq(hcs_process_create(sys, params, T, NULL, NULL, &p, &io, &err), 0);
    free(params);
    struct hcs_process *again = NULL;
    ck_assert_int_eq(hcs_process_open(sys, io.pid, &again, &err), 0);
    struct evq q;
    evq_init(&q);
    ck_assert_int_eq(hcs_process_set_callback(again, evq_push, &q, &err), 0);
    struct hcs_stdio io2 = {0};
    ck_assert_int_eq(hcs_process_info(again, &io2, &err), 0);
    ck_assert_ptr_nonnull(io2.std_out);
    ck_assert_ptr_ne(io2.std_out, io.std_out);
    ck_assert_uint_eq(io2.pid, io.pid);
    ck_assert_int_eq(hcs_process_terminate(again, T, &err), 0);
    ck_assert_ptr_nonnull(evq_wait(&q, HCS_EVENT_PROCESS_EXITED));
    evq_free(&q);
    struct hcs_process *none = NULL;
    ck_assert_int_eq(hcs_process_open(sys, 424242, &none, &err), -ENOENT);
    hcs_stdio_close(&io2);
    hcs_stdio_close(&io);
    hcs_process_close(again);
    hcs_process_close(p);
    container_down(sys);
}
END_TEST

START_TEST(create_process_quirk_is_recovered)
{
    struct err err = {0};
    struct hcs_system *sys = container_up("berth-quirk", NULL, false);
    fail_mode("create-process-quirk");
    char *argv[] = {"prog.exe", "out", "still here", NULL};
    char *params = process_doc(argv, NULL, NULL, false);
    struct hcs_process *p = NULL;
    struct hcs_stdio io = {0};
    ck_assert_msg(hcs_process_create(sys, params, T, NULL, NULL, &p, &io, &err) == 0, "%s",
                  err.msg);
    free(params);
    /* The create's wait failed; the information came from HcsGetProcessInfo. */
    ck_assert_int_eq(called("HcsGetProcessInfo"), 1);
    char *out = read_all(io.std_out);
    ck_assert_str_eq(out, "still here");
    free(out);
    hcs_stdio_close(&io);
    hcs_process_close(p);
    fail_mode(NULL);
    container_down(sys);
}
END_TEST

/* ---- systems: ids, restart, documents HCS refuses ---- */

START_TEST(systems_outlive_their_handles_and_are_reopened)
{
    struct err err = {0};
    struct hcs_system *sys = container_up("berth-survivor", NULL, false);
    char *argv[] = {"prog.exe", "wait", NULL};
    char *params = process_doc(argv, NULL, NULL, false);
    struct hcs_process *p = NULL;
    struct hcs_stdio io = {0};
    ck_assert_int_eq(hcs_process_create(sys, params, T, NULL, NULL, &p, &io, &err), 0);
    free(params);
    uint32_t pid = io.pid;
    hcs_stdio_close(&io);
    hcs_process_close(p);
    hcs_system_close(sys);
    /* The daemon restarts: a new load of the DLL, the same service. */
    hcs_api_free(api);
    ck_assert_int_eq(hcs_api_open(dbl_path, &api, &err), 0);
    ck_assert_msg(hcs_system_open(api, "berth-survivor", &sys, &err) == 0, "%s", err.msg);
    char *props = NULL;
    ck_assert_int_eq(hcs_system_properties(sys, "{}", &props, &err), 0);
    ck_assert_ptr_nonnull(strstr(props, "\"State\":\"Running\""));
    free(props);
    ck_assert_int_eq(hcs_process_open(sys, pid, &p, &err), 0);
    ck_assert_int_eq(hcs_process_terminate(p, T, &err), 0);
    hcs_process_close(p);
    container_down(sys);
    /* Terminated and closed: gone. */
    ck_assert_int_eq(hcs_system_open(api, "berth-survivor", &sys, &err), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err.msg, "HCS_E_SYSTEM_NOT_FOUND"));
}
END_TEST

START_TEST(terminate_on_last_handle_closed_takes_the_system_along)
{
    struct err err = {0};
    struct hcs_system *sys = container_up("berth-tied", NULL, true);
    hcs_system_close(sys);
    ck_assert_int_eq(hcs_system_open(api, "berth-tied", &sys, &err), -ENOENT);
}
END_TEST

START_TEST(duplicate_ids_and_bad_documents_are_refused)
{
    struct err err = {0};
    struct hcs_system *sys = container_up("berth-dup", NULL, false);
    struct hcs_system *other = NULL;
    char *doc = container_doc(false);
    ck_assert_int_eq(hcs_system_create(api, "berth-dup", doc, T, &other, &err), -EEXIST);
    ck_assert_ptr_nonnull(strstr(err.msg, "create compute system berth-dup: "
                                          "HCS_E_SYSTEM_ALREADY_EXISTS (0x8037010F)"));
    free(doc);
    ck_assert_int_eq(hcs_system_create(api, "berth-bad", "{\"Owner\":", T, &other, &err), -EIO);
    ck_assert_ptr_nonnull(strstr(err.msg, "HCS_E_INVALID_JSON"));
    ck_assert_ptr_nonnull(strstr(err.msg, "hcs says: "));
    /* A process in a system that is not running. */
    ck_assert_int_eq(hcs_system_terminate(sys, T, &err), 0);
    char *argv[] = {"prog.exe", NULL};
    char *params = process_doc(argv, NULL, NULL, false);
    struct hcs_process *p = NULL;
    struct hcs_stdio io = {0};
    ck_assert_int_eq(hcs_process_create(sys, params, T, NULL, NULL, &p, &io, &err), -ERR_CONFLICT);
    ck_assert_ptr_nonnull(strstr(err.msg, "HCS_E_INVALID_STATE"));
    free(params);
    /* Terminating what has stopped is success. */
    ck_assert_int_eq(hcs_system_terminate(sys, T, &err), 0);
    hcs_system_close(sys);
}
END_TEST

START_TEST(a_system_that_dies_reports_an_unexpected_exit)
{
    struct err err = {0};
    struct evq sq, pq;
    evq_init(&sq);
    evq_init(&pq);
    fail_mode("die-after-ms=200");
    struct hcs_system *sys = container_up("berth-dies", &sq, false);
    fail_mode(NULL);
    char *argv[] = {"prog.exe", "wait", NULL};
    char *params = process_doc(argv, NULL, NULL, false);
    struct hcs_process *p = NULL;
    struct hcs_stdio io = {0};
    ck_assert_int_eq(hcs_process_create(sys, params, T, evq_push, &pq, &p, &io, &err), 0);
    free(params);
    const char *sx = evq_wait(&sq, HCS_EVENT_SYSTEM_EXITED);
    ck_assert_ptr_nonnull(sx);
    struct hcs_system_exit se;
    ck_assert_int_eq(hcs_event_system_exit(sx, &se, &err), 0);
    ck_assert_str_eq(se.exit_type, "UnexpectedExit");
    ck_assert_uint_eq(se.status, HCS_HR_UNEXPECTED_EXIT);
    ck_assert_ptr_nonnull(evq_wait(&pq, HCS_EVENT_PROCESS_EXITED));
    hcs_stdio_close(&io);
    hcs_process_close(p);
    hcs_system_close(sys);
    evq_free(&sq);
    evq_free(&pq);
}
END_TEST

START_TEST(a_start_that_hangs_times_out_and_is_cancelled)
{
    struct err err = {0};
    struct hcs_system *sys = NULL;
    char *doc = container_doc(true);
    ck_assert_int_eq(hcs_system_create(api, "berth-hang", doc, T, &sys, &err), 0);
    free(doc);
    fail_mode("start-hangs");
    ULONGLONG t0 = GetTickCount64();
    ck_assert_int_eq(hcs_system_start(sys, 300, &err), -ETIMEDOUT);
    ck_assert_uint_ge(GetTickCount64() - t0, 250);
    ck_assert_ptr_nonnull(strstr(err.msg, "start compute system berth-hang: "
                                          "HCS_E_OPERATION_TIMEOUT"));
    fail_mode(NULL);
    hcs_system_close(sys);
}
END_TEST

/* ---- hyperv ---- */

START_TEST(utility_vm_takes_its_storage_and_hosts_a_container)
{
    struct err err = {0};
    struct hcs_system *vm = NULL;
    char *doc = uvm_doc();
    ck_assert_int_eq(hcs_system_create(api, "berth-h-vm", doc, T, &vm, &err), 0);
    free(doc);
    ck_assert_msg(hcs_system_start(vm, T, &err) == 0, "%s", err.msg);

    struct hcs_layer layers[] = {{TOP, HCS_VSMB_GUEST_PREFIX "l1"},
                                 {BASE, HCS_VSMB_GUEST_PREFIX "l0"}};
    json_object *reqs[] = {
        hcs_req_vsmb_add("l0", "C:\\ProgramData\\berth\\snapshots\\base", HCS_VSMB_LAYER, &err),
        hcs_req_scsi_add(1, "C:\\ProgramData\\berth\\containers\\build-42\\sandbox.vhdx",
                         "C:\\c\\1", &err),
        hcs_req_combined_layers_add("C:\\c\\1", layers, 2, &err),
    };
    for (size_t i = 0; i < 3; i++) {
        char *s = hcs_doc_string(reqs[i]);
        ck_assert_msg(hcs_system_modify(vm, s, T, &err) == 0, "%s", err.msg);
        free(s);
        json_object_put(reqs[i]);
    }
    /* What the inbox GCS of Server 2022 refuses, the double refuses. */
    ck_assert_int_eq(hcs_system_modify(vm,
                                       "{\"GuestRequest\":{\"ResourceType\":\"CombinedLayers\","
                                       "\"RequestType\":\"Add\",\"Settings\":{"
                                       "\"ContainerRootPath\":\"C:\\\\c\\\\1\",\"FilterType\":"
                                       "\"WCIFS\"}}}",
                                       T, &err),
                     -EIO);
    ck_assert_ptr_nonnull(strstr(err.msg, "unknown field FilterType"));

    struct hcs_container_doc c = {
        .layers = layers, .nlayers = 2, .scratch_path = "C:\\c\\1", .memory_mb = 256};
    json_object *hosted = hcs_doc_hosted_container(&c, "berth-h-vm", &err);
    char *hs = hcs_doc_string(hosted);
    json_object_put(hosted);
    struct hcs_system *ctr = NULL;
    ck_assert_msg(hcs_system_create(api, "berth-h", hs, T, &ctr, &err) == 0, "%s", err.msg);
    free(hs);
    struct evq q;
    evq_init(&q);
    ck_assert_int_eq(hcs_system_set_callback(ctr, evq_push, &q, &err), 0);
    ck_assert_int_eq(hcs_system_start(ctr, T, &err), 0);
    /* The VM goes, the container with it. */
    ck_assert_int_eq(hcs_system_terminate(vm, T, &err), 0);
    ck_assert_ptr_nonnull(evq_wait(&q, HCS_EVENT_SYSTEM_EXITED));
    hcs_system_close(ctr);
    hcs_system_close(vm);
    evq_free(&q);
    /* The VM got exactly the requests of the golden files. */
    golden_check(recorded("HcsModifyComputeSystem", 1), "vsmb_add_layer.json");
    golden_check(recorded("HcsModifyComputeSystem", 2), "scsi_add.json");
    golden_check(recorded("HcsModifyComputeSystem", 3), "combined_layers_add.json");
}
END_TEST

START_TEST(utility_vm_without_hyperv_is_a_conflict)
{
    struct err err = {0};
    fail_mode("no-hyperv");
    struct hcs_system *vm = NULL;
    char *doc = uvm_doc();
    ck_assert_int_eq(hcs_system_create(api, "berth-nohv", doc, T, &vm, &err), 0);
    free(doc);
    ck_assert_int_eq(hcs_system_start(vm, T, &err), -ERR_CONFLICT);
    ck_assert_ptr_nonnull(strstr(err.msg, "start compute system berth-nohv: "
                                          "HCS_E_HYPERV_NOT_INSTALLED (0x80370102)"));
    ck_assert_ptr_nonnull(strstr(err.msg, "hypervisor is not running"));
    hcs_system_close(vm);
    /* A process-isolated container still runs. */
    struct hcs_system *sys = container_up("berth-nohv-argon", NULL, false);
    container_down(sys);
}
END_TEST

START_TEST(utility_vm_past_the_commit_limit_is_507)
{
    struct err err = {0};
    fail_mode("commit-limit");
    struct hcs_system *vm = NULL;
    char *doc = uvm_doc();
    ck_assert_int_eq(hcs_system_create(api, "berth-commit", doc, T, &vm, &err), 0);
    free(doc);
    ck_assert_int_eq(hcs_system_start(vm, T, &err), -ENOSPC);
    ck_assert_ptr_nonnull(strstr(err.msg, "ERROR_COMMITMENT_LIMIT (0x800705AF)"));
    ck_assert_msg(strstr(err.msg, "paging file is too small"), "%s", err.msg);
    ck_assert_ptr_nonnull(strstr(err.msg, "could not initialize memory"));
    hcs_system_close(vm);
}
END_TEST

static Suite *
api_suite(void)
{
    Suite *s = suite_create("hcs_api");
    TCase *load = tcase_create("load");
    tcase_add_checked_fixture(load, setup, teardown);
    tcase_add_test(load, missing_dll_says_computecore_not_found);
    tcase_add_test(load, dll_without_an_export_is_refused);
    tcase_add_test(load, test_builds_take_the_dll_from_the_environment);
    tcase_add_test(load, detection_finds_schema_and_processors);
    tcase_add_test(load, detection_without_hyperv_reports_the_catastrophic_failure);
    tcase_add_test(load, detection_on_an_old_or_absent_service);
    suite_add_tcase(s, load);

    TCase *run = tcase_create("run");
    tcase_add_checked_fixture(run, setup, teardown);
    tcase_add_test(run, container_runs_a_process_and_reports_its_exit);
    tcase_add_test(run, stdin_reaches_the_process_and_ends_with_close_handle);
    tcase_add_test(run, process_gets_its_arguments_environment_and_directory);
    tcase_add_test(run, signals_end_a_process_unless_it_ignores_them);
    tcase_add_test(run, processes_are_reopened_by_pid_and_give_fresh_stdio);
    tcase_add_test(run, create_process_quirk_is_recovered);
    tcase_add_test(run, systems_outlive_their_handles_and_are_reopened);
    tcase_add_test(run, terminate_on_last_handle_closed_takes_the_system_along);
    tcase_add_test(run, duplicate_ids_and_bad_documents_are_refused);
    tcase_add_test(run, a_system_that_dies_reports_an_unexpected_exit);
    tcase_add_test(run, a_start_that_hangs_times_out_and_is_cancelled);
    suite_add_tcase(s, run);

    TCase *hv = tcase_create("hyperv");
    tcase_add_checked_fixture(hv, setup, teardown);
    tcase_add_test(hv, utility_vm_takes_its_storage_and_hosts_a_container);
    tcase_add_test(hv, utility_vm_without_hyperv_is_a_conflict);
    tcase_add_test(hv, utility_vm_past_the_commit_limit_is_507);
    suite_add_tcase(s, hv);
    return s;
}

int
main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--probe-system-dll") == 0)
        return probe_system_dll();
    SRunner *sr = srunner_create(api_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
