/*
 * The smaller HCS documents: modify requests that add a hyperv
 * container's storage to its utility VM (HcsModifyComputeSystem), the
 * ProcessParameters of HcsCreateProcess, the options of HcsSignalProcess
 * and HcsModifyProcess, and property queries. Field names as
 * ../shared/research/windows-hcs.md sections 1b, 1c and 2 give them; the
 * golden files in tests/unit/golden/hcs/ show each one.
 *
 * Pure json-c construction with validation (EINVAL naming the value, or
 * ENOTSUP for a signal Windows has no counterpart of). Any thread.
 */
#ifndef BERTH_RUNTIME_HCS_DOC_REQUEST_H
#define BERTH_RUNTIME_HCS_DOC_REQUEST_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "runtime/hcs/doc_system.h"

/* ---- modify requests for a utility VM ---- */

/* {"ResourceType": rtype, "RequestType": type, "Settings": settings}, taking settings. */
json_object *hcs_guest_request(const char *rtype, const char *type, json_object *settings);

/* What a VSMB share carries, which decides its options. */
enum hcs_vsmb_kind {
    HCS_VSMB_LAYER,     /* an image layer: read-only, cached, backup privilege */
    HCS_VSMB_VOLUME_RO, /* a read-only volume: read-only, cached */
    HCS_VSMB_VOLUME_RW, /* a writable volume: no options */
};

/*
 * Adds the host folder host_path to the VM as VSMB share name
 * (ResourcePath VirtualMachine/Devices/VirtualSmb/Shares). The container
 * then sees it at hcs_vsmb_guest_path(name).
 */
json_object *hcs_req_vsmb_add(const char *name, const char *host_path, enum hcs_vsmb_kind kind,
                              struct err *err);
json_object *hcs_req_vsmb_remove(const char *name, const char *host_path, struct err *err);

/*
 * Attaches the VHD vhd_path at SCSI controller 0, lun (1..63: 0 is the VM's
 * own scratch), and asks the guest to mount it at guest_path (a
 * MappedVirtualDisk guest request).
 */
json_object *hcs_req_scsi_add(unsigned lun, const char *vhd_path, const char *guest_path,
                              struct err *err);
json_object *hcs_req_scsi_remove(unsigned lun, const char *guest_path, struct err *err);

/*
 * Asks the guest to union layers (topmost first; paths are VSMB paths)
 * over the container root root_path (where the scratch disk is mounted):
 * a CombinedLayers guest request. No FilterType: the inbox GCS of Windows
 * Server 2022 parses strictly and refuses it with HCS_E_INVALID_JSON.
 */
json_object *hcs_req_combined_layers_add(const char *root_path, const struct hcs_layer *layers,
                                         size_t nlayers, struct err *err);
json_object *hcs_req_combined_layers_remove(const char *root_path, struct err *err);

/* ---- processes ---- */

#define HCS_DEFAULT_USER "ContainerUser"

struct hcs_process_doc {
    char *const *argv; /* NULL-terminated, the program first; escaped into CommandLine */
    char *const *env;  /* NULL-terminated "NAME=value", or NULL */
    const char *cwd;   /* WorkingDirectory, a path in the container (C:\...); NULL: omitted */
    const char *user;  /* NULL: HCS_DEFAULT_USER */
    bool stdin_pipe, stdout_pipe, stderr_pipe; /* CreateStd{In,Out,Err}Pipe */
    bool emulate_console;                      /* a pseudo console; stderr then goes to stdout */
    uint16_t console_height, console_width;    /* ConsoleSize with a console; 0: omitted */
};

/*
 * The ProcessParameters. Environment is a map: Windows names are
 * case-insensitive, so a later PATH replaces an earlier Path; an empty
 * value removes the name (as hcsshim drops them, and as setting a Windows
 * variable to "" unsets it). An entry without '=' or with an empty name is
 * EINVAL.
 */
json_object *hcs_doc_process(const struct hcs_process_doc *p, struct err *err);

/* HcsModifyProcess: {"Operation":"CloseHandle","CloseHandle":{"Handle":"StdIn"}}. */
json_object *hcs_doc_process_close_stdin(void);

/* HcsModifyProcess: {"Operation":"ConsoleSize","ConsoleSize":{"Height":h,"Width":w}}. */
json_object *hcs_doc_process_console_size(uint16_t height, uint16_t width, struct err *err);

/* Signal numbers as the API takes them (Linux's), whatever the build's signal.h says. */
#define HCS_SIGHUP 1
#define HCS_SIGINT 2
#define HCS_SIGQUIT 3
#define HCS_SIGKILL 9
#define HCS_SIGTERM 15

/*
 * What a POSIX signal is on Windows: *name is the HcsSignalProcess signal
 * (TERM CtrlShutdown, INT CtrlC, QUIT CtrlBreak, HUP CtrlClose), or NULL
 * for KILL, which is HcsTerminateProcess. ENOTSUP for any other signal.
 */
int hcs_signal_from_posix(int sig, const char **name, struct err *err);

/* {"Signal":"CtrlShutdown"}: EINVAL unless name is one of the five HCS signals. */
json_object *hcs_doc_signal(const char *name, struct err *err);

/* ---- property queries ---- */

/* {"PropertyTypes":[types...]} for a NULL-terminated list. */
json_object *hcs_doc_query(const char *const *types);

#endif
