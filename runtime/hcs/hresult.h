/*
 * HRESULTs that computecore.dll returns: a table of the HCS_E_* codes and
 * the Win32 and COM codes HCS passes on, each with its name, the errno
 * value berth reports it as (so the API's one error-to-status table
 * applies), and a short description of our own for hosts where the
 * system's message table has none (Wine, or a Windows without the
 * Containers feature). FormatMessageW is the Windows file's job
 * (hcs_api_win.c); it hands the text here.
 *
 * Pure; any thread. Codes from Microsoft's HCS reference (HCSHResult) and
 * winerror.h; see ../shared/research/windows-hcs.md section 2.
 */
#ifndef BERTH_RUNTIME_HCS_HRESULT_H
#define BERTH_RUNTIME_HCS_HRESULT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* The ones the driver tests for by value. */
#define HCS_HR_E_UNEXPECTED 0x8000FFFFu
#define HCS_HR_E_ACCESSDENIED 0x80070005u
#define HCS_HR_E_INVALIDARG 0x80070057u
#define HCS_HR_ERROR_COMMITMENT_LIMIT 0x800705AFu /* HRESULT_FROM_WIN32(1455) */
#define HCS_HR_IMAGE_MISMATCH 0x80370101u
#define HCS_HR_HYPERV_NOT_INSTALLED 0x80370102u
#define HCS_HR_INVALID_STATE 0x80370105u
#define HCS_HR_UNEXPECTED_EXIT 0x80370106u
#define HCS_HR_INVALID_JSON 0x8037010Du
#define HCS_HR_SYSTEM_NOT_FOUND 0x8037010Eu
#define HCS_HR_SYSTEM_ALREADY_EXISTS 0x8037010Fu
#define HCS_HR_SYSTEM_ALREADY_STOPPED 0x80370110u
#define HCS_HR_SERVICE_NOT_AVAILABLE 0x80370114u
#define HCS_HR_OPERATION_NOT_STARTED 0x80370115u
#define HCS_HR_OPERATION_PENDING 0x80370117u
#define HCS_HR_OPERATION_TIMEOUT 0x80370118u
#define HCS_HR_ACCESS_DENIED 0x8037011Bu
#define HCS_HR_PROCESS_ALREADY_STOPPED 0x8037011Fu

/* Did the HRESULT fail (severity bit set)? */
#define HCS_HR_FAILED(hr) (((uint32_t)(hr)&0x80000000u) != 0)

struct hcs_hresult_info {
    uint32_t code;
    const char *name; /* "HCS_E_HYPERV_NOT_INSTALLED" */
    int errnum;       /* errno or berth code it is reported as */
    const char *text; /* what it means, lowercase, no final period */
};

/*
 * The table entry for hr, or NULL. The NTSTATUS twins of the HCS codes
 * (0xC037xxxx, as older results and the docs spell HCS_E_IMAGE_MISMATCH)
 * find the entry of their 0x8037xxxx code.
 */
const struct hcs_hresult_info *hcs_hresult_lookup(uint32_t hr);

/*
 * What hr is reported as: 0 for a success code, the table's errno for a
 * known failure, EIO for any other. ERROR_COMMITMENT_LIMIT is ENOSPC
 * (507): the host is out of memory commit, as it is out of storage.
 * Codes that say berth sent HCS something it refused (HCS_E_INVALID_JSON,
 * E_INVALIDARG) are EIO, never EINVAL: the caller's request was fine,
 * our document was not.
 */
int hcs_hresult_errno(uint32_t hr);

/* "HCS_E_HYPERV_NOT_INSTALLED (0x80370102)", or "0x80370102" when unknown. Returns buf. */
char *hcs_hresult_name(uint32_t hr, char *buf, size_t size);

/*
 * Sets err for a failed HCS call: the message is "<what>: <name>: <text>"
 * followed by what the operation's result document says ("; hcs says:
 * <ErrorMessage>; <event message>..."; the raw document, cut short, when
 * it is not a ResultError), and the code is hcs_hresult_errno(hr).
 * system_text is FormatMessageW's text (UTF-8, trailing newline and
 * period trimmed here); NULL or empty uses the table's text. result_json
 * may be NULL. Returns -code.
 */
int hcs_err_set(struct err *err, uint32_t hr, const char *system_text, const char *result_json,
                const char *fmt, ...) __attribute__((format(gnu_printf, 5, 6)));

/*
 * Writes a one-line summary of an HCS ResultError document
 * ({"Error", "ErrorMessage", "ErrorEvents": [{"Message", ...}]}) into
 * buf: the ErrorMessage and each event's Message, "; "-separated, with
 * skip (usually the system text already in the message) left out. Empty
 * when there is nothing to add. Returns buf.
 */
char *hcs_result_summary(const char *result_json, const char *skip, char *buf, size_t size);

#endif
