/*
 * computecore.dll, the Host Compute Service's API, loaded at run time
 * (LoadLibraryExW + GetProcAddress: an .exe that imported it would not
 * even start where HCS is absent, Wine included), with one synchronous
 * wrapper per call: each creates an operation, makes the call, waits for
 * the operation's result, closes the operation. A failure's HRESULT is
 * decoded with FormatMessageW and comes back in err with the operation's
 * JSON error result (hresult.h), its code mapped to an errno.
 *
 * Every call here blocks until HCS answers (or the timeout passes): call
 * them from pool threads, never from the loop. Event callbacks
 * (hcs_system_set_callback(), hcs_process_set_callback()) run on HCS's
 * own threads; the driver hands what they say to the loop with
 * uv_async_send and touches nothing else there. The handles are safe to
 * use from several threads, but a handle must not be closed while another
 * thread is in a call on it.
 *
 * This header has no Windows types (HANDLEs are void *), so portable code
 * can name them; the implementation, hcs_api_win.c, is built only for
 * Windows.
 *
 * Test builds (BERTH_TEST_HOOKS) can load another computecore.dll, the
 * test double in tests/doubles/computecore/: hcs_api_open() with a path,
 * or with NULL and the environment variable BERTH_TEST_HCS_DLL set to
 * one. Other builds load only %SystemRoot%\System32\computecore.dll
 * (LOAD_LIBRARY_SEARCH_SYSTEM32, which would never find a DLL placed
 * beside the executable) and refuse a path.
 */
#ifndef BERTH_RUNTIME_HCS_HCS_API_H
#define BERTH_RUNTIME_HCS_HCS_API_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "runtime/hcs/props.h"

struct hcs_api;     /* the loaded DLL */
struct hcs_system;  /* an HCS_SYSTEM handle */
struct hcs_process; /* an HCS_PROCESS handle */

#define HCS_TIMEOUT_INFINITE 0xFFFFFFFFu
/* After a timeout the operation is cancelled and given this long to end. */
#define HCS_CANCEL_GRACE_MS 5000u

/* HCS_EVENT_TYPE values the driver acts on. */
enum hcs_event_type {
    HCS_EVENT_SYSTEM_EXITED = 0x00000001,
    HCS_EVENT_SYSTEM_CRASH_INITIATED = 0x00000002,
    HCS_EVENT_SYSTEM_CRASH_REPORT = 0x00000003,
    HCS_EVENT_GUEST_CONNECTION_CLOSED = 0x00000006,
    HCS_EVENT_PROCESS_EXITED = 0x00010000,
    HCS_EVENT_SERVICE_DISCONNECT = 0x02000000,
};

struct hcs_event {
    uint32_t type;    /* enum hcs_event_type, or another HCS_EVENT_TYPE */
    const char *data; /* EventData as UTF-8, or NULL; valid during the callback only */
};

/* Runs on an HCS thread. HcsClose* waits for a running callback, so arg
 * stays valid until the close returns. */
typedef void (*hcs_event_cb)(void *arg, const struct hcs_event *ev);

/* A process's stdio: pipe HANDLEs the caller owns (CloseHandle), NULL when not asked for. */
struct hcs_stdio {
    uint32_t pid;
    void *std_in;  /* write end */
    void *std_out; /* read end */
    void *std_err; /* read end */
};

/*
 * Loads computecore.dll and every function berth uses. dll_path is for
 * test builds only (see above); NULL is the system's. ERR_UNAVAILABLE
 * "computecore.dll not found ..." when it is missing, "computecore.dll
 * has no HcsXxx ..." when it is too old; EINVAL for a path outside test
 * builds.
 */
int hcs_api_open(const char *dll_path, struct hcs_api **out, struct err *err);
/* Unloads it; NULL is a no-op. Every system and process must be closed first. */
void hcs_api_free(struct hcs_api *api);

/* HcsGetServiceProperties(query): the answer (caller frees). */
int hcs_service_properties(struct hcs_api *api, const char *query, char **result, struct err *err);

/* HcsGrantVmAccess(vm_id, path): the VM's worker may open the file (a VHDX it attaches). */
int hcs_grant_vm_access(struct hcs_api *api, const char *vm_id, const char *path, struct err *err);

/*
 * Start-up detection: loads the DLL (dll_path as hcs_api_open()), asks
 * Basic and ProcessorTopology, and fills caps (props.h). Never fails:
 * what went wrong is the reason in caps.
 */
void hcs_detect(const char *dll_path, struct hcs_caps *caps);

/* ---- compute systems ---- */

/* HcsCreateComputeSystem(id, config) and its wait. */
int hcs_system_create(struct hcs_api *api, const char *id, const char *config, uint32_t timeout_ms,
                      struct hcs_system **out, struct err *err);
/* HcsOpenComputeSystem(id): ENOENT when HCS has no such system. */
int hcs_system_open(struct hcs_api *api, const char *id, struct hcs_system **out, struct err *err);
/* HcsSetComputeSystemCallback: events go to cb(arg). Set it before start. */
int hcs_system_set_callback(struct hcs_system *sys, hcs_event_cb cb, void *arg, struct err *err);
int hcs_system_start(struct hcs_system *sys, uint32_t timeout_ms, struct err *err);
/* Graceful shutdown; the exit comes as HCS_EVENT_SYSTEM_EXITED. */
int hcs_system_shutdown(struct hcs_system *sys, uint32_t timeout_ms, struct err *err);
/* Terminate; a system already stopped is success. */
int hcs_system_terminate(struct hcs_system *sys, uint32_t timeout_ms, struct err *err);
/* HcsGetComputeSystemProperties(query): the answer (caller frees). */
int hcs_system_properties(struct hcs_system *sys, const char *query, char **result,
                          struct err *err);
/* HcsModifyComputeSystem(settings). */
int hcs_system_modify(struct hcs_system *sys, const char *settings, uint32_t timeout_ms,
                      struct err *err);
/* HcsCloseComputeSystem: unregisters the callback (waiting for a running one); NULL no-op. */
void hcs_system_close(struct hcs_system *sys);
const char *hcs_system_id(const struct hcs_system *sys);

/* ---- processes ---- */

/*
 * HcsCreateProcess(params) and its wait for the process information. The
 * process's events go to cb(arg) (NULL: none), registered before the wait
 * so that an exit that comes at once is not missed (HCS does not replay
 * events). When the wait fails although HCS handed back a process handle
 * (Windows Server 2022 completes it synchronously and reports
 * E_INVALIDARG), the process information is asked again with
 * HcsGetProcessInfo, as hcsshim does.
 */
int hcs_process_create(struct hcs_system *sys, const char *params, uint32_t timeout_ms,
                       hcs_event_cb cb, void *arg, struct hcs_process **out,
                       struct hcs_stdio *stdio, struct err *err);
/* HcsOpenProcess(pid) on sys. */
int hcs_process_open(struct hcs_system *sys, uint32_t pid, struct hcs_process **out,
                     struct err *err);
/*
 * HcsSetProcessCallback on a process opened again: an exit before this
 * call sends no event, so the caller asks the process's state after it.
 */
int hcs_process_set_callback(struct hcs_process *proc, hcs_event_cb cb, void *arg, struct err *err);
/* HcsSignalProcess(options), options from hcs_doc_signal(). ESRCH when it has exited. */
int hcs_process_signal(struct hcs_process *proc, const char *options, uint32_t timeout_ms,
                       struct err *err);
/* HcsTerminateProcess; a process already gone is success. */
int hcs_process_terminate(struct hcs_process *proc, uint32_t timeout_ms, struct err *err);
/* HcsGetProcessInfo: fresh stdio handles of the process (caller owns them). */
int hcs_process_info(struct hcs_process *proc, struct hcs_stdio *stdio, struct err *err);
/* HcsModifyProcess(settings), e.g. hcs_doc_process_close_stdin(). */
int hcs_process_modify(struct hcs_process *proc, const char *settings, struct err *err);
/* HcsCloseProcess; NULL no-op. */
void hcs_process_close(struct hcs_process *proc);
uint32_t hcs_process_pid(const struct hcs_process *proc);

/* Closes the HANDLEs of stdio that are set and clears them. */
void hcs_stdio_close(struct hcs_stdio *stdio);

#endif
