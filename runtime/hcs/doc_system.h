/*
 * The compute system documents of HCS schema 2.1 that HcsCreateComputeSystem
 * takes: a process-isolated container, the utility VM of a hyperv
 * container, and the container hosted in that VM. Field names and nesting
 * are those of Microsoft's schema reference as hcsshim fills them
 * (../shared/research/windows-hcs.md section 1, with the sources); the
 * golden files in tests/unit/golden/hcs/ show each document whole.
 *
 * The builders are pure: they validate their input (EINVAL naming the
 * value: these are the driver's arguments, so a failure is a bug or a
 * bad path that got past the API), build a json-c object, and touch
 * nothing else. Any thread.
 *
 * ShouldTerminateOnLastHandleClosed is the caller's choice: hcsshim sets
 * it because its shim owns each container's life, while berth's containers
 * outlive a restart of the daemon (it opens them again with
 * HcsOpenComputeSystem), so the driver passes false.
 */
#ifndef BERTH_RUNTIME_HCS_DOC_SYSTEM_H
#define BERTH_RUNTIME_HCS_DOC_SYSTEM_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "runtime/hcs/sizing.h"

#define HCS_SCHEMA_MAJOR 2
#define HCS_SCHEMA_MINOR 1
#define HCS_OWNER "berth"

/* How the utility VM sees a VSMB share: this prefix, then the share's name. */
#define HCS_VSMB_GUEST_PREFIX "\\\\?\\VMSMB\\VSMB-{dcc079ae-60ba-4d07-847c-3493609c0870}\\"
/* The share that carries the utility VM's own OS (the base layer's UtilityVM\Files). */
#define HCS_VSMB_OS_SHARE "os"
/* The first SCSI controller of a utility VM; WCOW uses only this one. */
#define HCS_SCSI_CONTROLLER0 "df6d0690-79e5-55b6-a5ec-c1e2f77f580a"
/* The boot file UEFI loads from the os share. */
#define HCS_UVM_BOOT_PATH "\\EFI\\Microsoft\\Boot\\bootmgfw.efi"

/* A read-only image layer: its GUID and where it is (host or guest path). */
struct hcs_layer {
    const char *id;
    const char *path;
};

/* A directory of the host (or, hosted, of the VM) seen inside the container. */
struct hcs_mapped_dir {
    const char *host_path;
    const char *container_path; /* "C:\tmp\build\in" (hcs_path_to_windows()) */
    bool readonly;
};

/*
 * A container, for hcs_doc_container() (process isolation: host paths)
 * and hcs_doc_hosted_container() (hyperv: paths inside the utility VM).
 */
struct hcs_container_doc {
    const char *owner; /* NULL: HCS_OWNER */
    bool terminate_on_last_handle_closed;
    const char *hostname; /* GuestOs.HostName; NULL: left to HCS */
    /* Storage.Layers, topmost first and the base layer last. Process: host
     * folders (C:\...); hosted: VSMB paths (hcs_vsmb_guest_path()). */
    const struct hcs_layer *layers;
    size_t nlayers;
    /* Storage.Path. Process: the mounted scratch volume, \\?\Volume{GUID}\
     * (a trailing backslash is added when missing); hosted: the container's
     * root in the VM where CombinedLayers put it ("C:\c\1"). */
    const char *scratch_path;
    /* MappedDirectories. Process: host folders; hosted: VSMB paths. */
    const struct hcs_mapped_dir *mounts;
    size_t nmounts;
    const char *network_namespace;  /* Networking.Namespace, an HCN GUID; NULL: none */
    struct hcs_processor processor; /* at most one field set; all 0: no Processor */
    uint64_t memory_mb;             /* Memory.SizeInMB (the job object's cap); 0: none */
};

/* The ComputeSystem of a process-isolated container. New object (caller puts) or NULL + err. */
json_object *hcs_doc_container(const struct hcs_container_doc *c, struct err *err);

/*
 * The ComputeSystem of a container hosted in the utility VM uvm_id
 * (HostingSystemId + HostedSystem). New object or NULL + err.
 */
json_object *hcs_doc_hosted_container(const struct hcs_container_doc *c, const char *uvm_id,
                                      struct err *err);

/* A utility VM booted from the base layer's UtilityVM\Files over VSMB (VmbFs). */
struct hcs_uvm_doc {
    const char *owner; /* NULL: HCS_OWNER */
    bool terminate_on_last_handle_closed;
    uint32_t memory_mb;        /* even, from hcs_uvm_size() */
    uint32_t processors;       /* >= 1 */
    const char *os_files_path; /* <base layer>\UtilityVM\Files, shared as "os" */
    const char *scratch_vhd;   /* the VM's scratch, <dir>\vm\sandbox.vhdx, at SCSI 0:0 */
};

/* The ComputeSystem of a utility VM. New object or NULL + err. */
json_object *hcs_doc_uvm(const struct hcs_uvm_doc *u, struct err *err);

/*
 * VSMB share options for image content (the os share and the layers):
 * ReadOnly, ShareRead, CacheIo, PseudoOplocks and TakeBackupPrivilege (a
 * layer's files keep their own ACLs; backup privilege reads them all).
 * A new object.
 */
json_object *hcs_doc_vsmb_readonly_options(void);

/* {"Major":2,"Minor":1}: a new object. */
json_object *hcs_doc_schema_version(void);

/*
 * The document as HCS gets it: compact JSON without escaped slashes.
 * A new string (caller frees), or NULL when out of memory.
 */
char *hcs_doc_string(json_object *doc);

/*
 * Writes the guest path of VSMB share name (HCS_VSMB_GUEST_PREFIX + name)
 * into out. EINVAL unless name is 1-64 of [A-Za-z0-9_-] or it does not fit.
 */
int hcs_vsmb_guest_path(const char *name, char *out, size_t size, struct err *err);

/* Is s a VSMB guest path (HCS_VSMB_GUEST_PREFIX and a valid share name, optionally a subpath)? */
bool hcs_is_vsmb_guest_path(const char *s);

/* Is s a volume GUID path, \\?\Volume{GUID} with or without the trailing backslash? */
bool hcs_is_volume_guid_path(const char *s);

#endif
