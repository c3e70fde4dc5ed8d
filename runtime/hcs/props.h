/*
 * What HCS answers: the service properties berth detects the host with
 * (Basic's SupportedSchemaVersions, ProcessorTopology's logical processor
 * count), a compute system's Statistics, the EventData of the exit
 * events, and the verdict of start-up detection that /v1/health shows as
 * runtime.isolations.
 *
 * Parsers of strings that come from computecore.dll (or its test double):
 * they check types and fail with EIO naming the field when HCS answered
 * something else. Pure; any thread.
 */
#ifndef BERTH_RUNTIME_HCS_PROPS_H
#define BERTH_RUNTIME_HCS_PROPS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

/* The PropertyTypes berth asks for. */
#define HCS_PROP_BASIC "Basic"
#define HCS_PROP_PROCESSOR_TOPOLOGY "ProcessorTopology"
#define HCS_PROP_STATISTICS "Statistics"

/*
 * From HcsGetServiceProperties(["Basic"]), {"Properties":[{
 * "SupportedSchemaVersions":[{"Major":2,"Minor":N},...]}]}: the highest
 * Minor of a Major 2 entry (an entry 2.N means 2.0 to 2.N), or -1 when
 * there is none. EIO when the document is not that shape.
 */
int hcs_props_schema_minor(const char *json, int *minor, struct err *err);

/*
 * From HcsGetServiceProperties(["ProcessorTopology"]), {"Properties":[{
 * "LogicalProcessorCount":N,"LogicalProcessors":[...]}]}: N. EIO when the
 * document is not that shape or N is 0.
 */
int hcs_props_lp_count(const char *json, uint32_t *count, struct err *err);

/* A compute system's Statistics (HcsGetComputeSystemProperties(["Statistics"])). */
struct hcs_stats {
    uint64_t cpu_ns;                  /* Processor.TotalRuntime100ns, in ns */
    uint64_t memory_commit_bytes;     /* Memory.MemoryUsageCommitBytes */
    uint64_t memory_private_ws_bytes; /* Memory.MemoryUsagePrivateWorkingSetBytes */
};

/* Parses {"Statistics":{...}}; absent numbers are 0. EIO when Statistics is missing. */
int hcs_props_statistics(const char *json, struct hcs_stats *out, struct err *err);

/* HcsEventSystemExited's EventData: {"Status": HRESULT, "ExitType": "..."}. */
struct hcs_system_exit {
    uint32_t status;    /* S_OK for a clean exit */
    char exit_type[32]; /* GracefulExit, ForcedExit, UnexpectedExit, Unknown; "" if absent */
};
int hcs_event_system_exit(const char *json, struct hcs_system_exit *out, struct err *err);

/* HcsEventProcessExited's EventData: ProcessStatus. */
struct hcs_process_exit {
    uint32_t pid;
    bool exited;
    uint32_t exit_code;        /* valid when last_wait_result is 0 */
    uint32_t last_wait_result; /* an HRESULT */
};
int hcs_event_process_exit(const char *json, struct hcs_process_exit *out, struct err *err);

/* ---- start-up detection ---- */

/* One HcsGetServiceProperties call: its outcome (rc < 0: err says why) and its answer. */
struct hcs_probe_answer {
    int rc;
    struct err err;
    const char *json;
};

/* What /v1/health shows as runtime.isolations, and what creates are checked against. */
struct hcs_caps {
    bool process_usable;
    char process_reason[ERR_MSG_MAX]; /* why not; "" when usable */
    bool hyperv_usable;
    char hyperv_reason[ERR_MSG_MAX]; /* "Hyper-V is not available on this host (...)" */
    int schema_minor;                /* highest 2.N supported; -1 unknown */
    uint32_t lp_count;               /* host logical processors; 0 unknown */
};

/*
 * The verdict from the Basic and ProcessorTopology answers (basic.rc < 0
 * also covers computecore.dll missing: its err says so):
 *   - process isolation needs Basic to answer with schema 2.1 or later;
 *   - hyperv needs that and ProcessorTopology to answer with a processor
 *     count. Without Hyper-V, HCS fails that query (E_UNEXPECTED,
 *     "Catastrophic failure", on the seed's hosts), which is why the
 *     seed's containers failed with "hcs::GetServiceProperties:
 *     Catastrophic failure"; here it is the reason hyperv is unusable,
 *     "Hyper-V is not available on this host (<what HCS said>)", and a
 *     hyperv create is refused with it (409).
 */
void hcs_caps_evaluate(const struct hcs_probe_answer *basic, const struct hcs_probe_answer *topo,
                       struct hcs_caps *out);

#endif
