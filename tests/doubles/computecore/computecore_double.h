/*
 * A TEST DOUBLE of computecore.dll, the Host Compute Service's API, for
 * berth's Wine suites: it is not HCS and runs no container. It exports
 * the functions berth calls with the signatures of mingw-w64's
 * computecore.h (the definitions include that header, so a mismatch
 * does not compile), keeps compute systems and processes in memory, runs
 * every operation on a thread of its own after a short delay, fires the
 * system and process callbacks, and hands out real pipe HANDLEs for a
 * process's stdio. It is built as computecore.dll beside the test
 * executables (tests load it by path: see runtime/hcs/hcs_api.h).
 *
 * The double pins itself in memory at first use, as the real service
 * outlives any one client: systems created without
 * ShouldTerminateOnLastHandleClosed survive hcs_api_free() and a later
 * HcsOpenComputeSystem finds them (the restart tests rely on it).
 *
 * Controlled through the environment, read at every call:
 *
 *   BERTH_HCS_DOUBLE_DIR    a directory: every document received is
 *                           written there as NNNN-<Function>.json, and
 *                           calls.log gets "NNNN <Function> <id>" per call
 *   BERTH_HCS_DOUBLE_STATE  a directory standing in for the service's own
 *                           memory across client processes (the double lives
 *                           in its client's process, HCS does not): a system
 *                           started without ShouldTerminateOnLastHandleClosed
 *                           is written there as <id> until it stops, and
 *                           HcsOpenComputeSystem in a later process finds it
 *                           running, with none of its processes (they were
 *                           threads of the process that ended)
 *   BERTH_HCS_DOUBLE_LPS    logical processors ProcessorTopology reports (4)
 *   BERTH_HCS_DOUBLE_DELAY_MS  delay before an operation completes (5)
 *   BERTH_HCS_DOUBLE_FAIL   comma-separated failures, the way real hosts fail:
 *     no-hyperv     ProcessorTopology fails with E_UNEXPECTED ("Catastrophic
 *                   failure") and starting a VirtualMachine with
 *                   HCS_E_HYPERV_NOT_INSTALLED (a host with only the
 *                   Containers feature)
 *     no-service    every service query fails with HCS_E_SERVICE_NOT_AVAILABLE
 *     schema-2.0    Basic reports schema 2.0 only (a host older than 1809)
 *     commit-limit  starting a VirtualMachine fails with ERROR_COMMITMENT_LIMIT,
 *                   "The paging file is too small for this operation to complete"
 *     die-after-ms=N  a started system exits unexpectedly N ms later
 *     die-at-start  a start succeeds, but the system's exit event comes first
 *     start-hangs   a start never completes until cancelled
 *     start-fails   starting a container (not a VirtualMachine) fails with
 *                   HCS_E_INVALID_STATE: a create that fails in HCS itself
 *     create-process-quirk  HcsCreateProcess's operation fails with
 *                   E_INVALIDARG though the process runs (Server 2022's quirk)
 *
 * A process runs a script, its command line split with CommandLineToArgvW
 * (argv[0], the program, is ignored), one step after another:
 *
 *   out TEXT       writes TEXT to stdout        err TEXT   to stderr
 *   outn N         writes N bytes ('x') to stdout
 *   echo           copies stdin to stdout until stdin ends
 *   args A B ...   writes each following argument and "\n" to stdout (the rest
 *                  of the line is consumed)
 *   env NAME       writes NAME's value from Environment and "\n"
 *   cwd            writes WorkingDirectory and "\n"
 *   user           writes User and "\n"
 *   sleep MS       waits MS milliseconds
 *   wait           waits until a signal or termination
 *   ignore-signals signals are acknowledged and otherwise ignored
 *   crash          its compute system exits unexpectedly (as die-after-ms, at once)
 *   exit N         exits with code N (after the last step: 0)
 *
 * A signal (HcsSignalProcess) ends the process with STATUS_CONTROL_C_EXIT
 * (0xC000013A) unless it ignores signals; HcsTerminateProcess, and
 * HcsTerminateComputeSystem for every process in it, ends it with 1;
 * HcsShutDownComputeSystem with 0xC000013A. Stdin reaches end of file when
 * the caller has closed its handle and asked HcsModifyProcess to close
 * StdIn (the double keeps its own copy of each caller end so that
 * HcsGetProcessInfo can hand out fresh duplicates, as HCS does).
 */
#ifndef BERTH_TESTS_DOUBLES_COMPUTECORE_DOUBLE_H
#define BERTH_TESTS_DOUBLES_COMPUTECORE_DOUBLE_H

#include <windows.h>

#include <computecore.h>
#include <json-c/json.h>
#include <stdbool.h>

/*
 * The HCS_E_* HRESULTs the double returns (Microsoft's HCSHResult
 * reference), defined here because mingw-w64's winerror.h has none, and
 * on purpose not taken from runtime/hcs/hresult.h, the code under test.
 */
#ifndef HCS_E_INVALID_STATE
#define HCS_E_HYPERV_NOT_INSTALLED ((HRESULT)0x80370102L)
#define HCS_E_INVALID_STATE ((HRESULT)0x80370105L)
#define HCS_E_UNEXPECTED_EXIT ((HRESULT)0x80370106L)
#define HCS_E_INVALID_JSON ((HRESULT)0x8037010DL)
#define HCS_E_SYSTEM_NOT_FOUND ((HRESULT)0x8037010EL)
#define HCS_E_SYSTEM_ALREADY_EXISTS ((HRESULT)0x8037010FL)
#define HCS_E_SYSTEM_ALREADY_STOPPED ((HRESULT)0x80370110L)
#define HCS_E_SERVICE_NOT_AVAILABLE ((HRESULT)0x80370114L)
#define HCS_E_OPERATION_NOT_STARTED ((HRESULT)0x80370115L)
#define HCS_E_OPERATION_ALREADY_STARTED ((HRESULT)0x80370116L)
#define HCS_E_OPERATION_PENDING ((HRESULT)0x80370117L)
#define HCS_E_OPERATION_TIMEOUT ((HRESULT)0x80370118L)
#define HCS_E_PROCESS_ALREADY_STOPPED ((HRESULT)0x8037011FL)
#endif

/* Exit codes the double's processes end with. */
#define DBL_EXIT_CTRL_C 0xC000013Au
#define DBL_EXIT_TERMINATED 1u

/* ---- the one lock and its condition (computecore_double.c) ---- */
void dbl_lock(void);
void dbl_unlock(void);
/* Waits on the condition for at most ms (INFINITE allowed); the lock is held. */
bool dbl_wait(DWORD ms);
void dbl_broadcast(void);

/* ---- environment ---- */
/* The variable's value in buf (size bytes); false when unset, empty or too long. */
bool dbl_env(const char *name, char *buf, DWORD size);
bool dbl_fail(const char *mode);
long dbl_fail_value(const char *mode, long dflt);

/* ---- text ---- */
char *dbl_narrow(const wchar_t *w);
/* A LocalAlloc'ed UTF-16 copy of s, as computecore returns strings. */
wchar_t *dbl_local_wide(const char *s);

/* ---- recording ---- */
void dbl_record(const char *fn, const char *id, const char *doc);

/* ---- threads ---- */
void dbl_spawn(DWORD(WINAPI *fn)(void *), void *arg);
/* Pins the DLL in memory for good, once: the service outlives its clients. */
void dbl_pin(void);

/* ---- operations ---- */
enum dop_state { DOP_NEW, DOP_RUNNING, DOP_DONE };

struct dsys;
struct dproc;

struct dop {
    LONG refs;
    enum dop_state state;
    HRESULT hr;
    char *result; /* UTF-8 result document or NULL */
    HCS_PROCESS_INFORMATION pi;
    bool has_pi;
    bool cancelled;
    HCS_OPERATION_COMPLETION cb;
    void *ctx;
    struct dsys *sys;
    struct dproc *proc;
    char *arg; /* the call's document, UTF-8 */
    /* A failure found in the call itself, for the operation to report. */
    HRESULT early_hr;
    char *early_result;
};

/* Marks a new operation in use by a call (false when it was used before). */
bool dbl_op_use(struct dop *op, struct dsys *sys, struct dproc *proc, const wchar_t *arg);

/* Runs work(op) on a thread of its own after the configured delay. */
void dbl_op_run(struct dop *op, void (*work)(struct dop *));
/* Completes op (under no lock); result is copied. Fires the operation callback. */
void dbl_op_complete(struct dop *op, HRESULT hr, const char *result,
                     const HCS_PROCESS_INFORMATION *pi);

/* ---- systems ---- */
enum dsys_state { DSYS_CREATED, DSYS_RUNNING, DSYS_STOPPED };

struct dhandle {
    HCS_EVENT_CALLBACK cb;
    void *ctx;
    int inflight;
    bool closing;
    struct dhandle *next;
};

struct dsys_handle {
    struct dhandle h; /* first: the callback part */
    struct dsys *sys;
};

struct dsys {
    LONG refs;
    char *id;
    char *owner;
    char *hosting_id; /* a hosted container's utility VM, or NULL */
    enum dsys_state state;
    bool vm;
    bool terminate_on_close;
    bool registered;
    int nhandles;
    struct dhandle *handles; /* struct dsys_handle */
    struct dproc *procs;
    ULONGLONG started;
    struct dsys *next;
};

/* Drops a reference; the last frees the system and its processes. */
void dbl_system_release(struct dsys *s);
/* Makes s exit unexpectedly, from a thread of its own (any caller, lock not held). */
void dbl_system_die(struct dsys *s);

/* Fires an event to every handle's callback; call without the lock. */
void dbl_fire(struct dhandle **list, HCS_EVENT_TYPE type, const char *data);
/* Unregisters a callback handle, waiting for its callbacks to return; lock held. */
void dbl_handle_drain(struct dhandle **list, struct dhandle *h);

/* ---- processes (double_process.c) ---- */
enum dproc_state { DPROC_RUNNING, DPROC_EXITED };

struct dproc_handle {
    struct dhandle h;
    struct dproc *proc;
};

struct dproc {
    LONG refs;
    struct dsys *sys;
    DWORD pid;
    enum dproc_state state;
    DWORD exit_code;
    /* The double's ends. */
    HANDLE in_r, out_w, err_w;
    /* Copies of the caller's ends, for HcsGetProcessInfo. */
    HANDLE in_w_keep, out_r_keep, err_r_keep;
    HANDLE signal_event; /* auto-reset: a signal arrived */
    HANDLE kill_event;   /* manual-reset: end now with kill_code */
    DWORD kill_code;
    bool ignore_signals;
    wchar_t **argv;
    int argc;
    char *cwd, *user;
    json_object *env;
    struct dhandle *handles; /* struct dproc_handle */
    struct dproc *next;
};

/* Parses params and starts the process in s (lock not held). HRESULT and result on failure. */
HRESULT dbl_process_start(struct dsys *s, const char *params, struct dproc **out, char **result);
/* Fresh duplicates of the caller's stdio ends. */
void dbl_process_info(struct dproc *p, HCS_PROCESS_INFORMATION *pi);
/* Asks the process to end with code and waits until it has (lock not held). */
void dbl_process_kill(struct dproc *p, DWORD code);
void dbl_process_release(struct dproc *p);

#endif
