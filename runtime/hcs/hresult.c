/*
 * The HRESULT table and the messages of failed HCS calls. Pure; any
 * thread. The descriptions are ours, written from the meaning Microsoft's
 * HCS reference gives each code; on Windows the system's own text
 * (FormatMessageW) takes precedence.
 */
#include "runtime/hcs/hresult.h"

#include <json-c/json.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "jsonutil/jsonutil.h"

static const struct hcs_hresult_info hresults[] = {
    /* Host Compute Service (FACILITY_COMPUTE, 0x037). */
    {0x80370100u, "HCS_E_TERMINATED_DURING_START", EIO,
     "the compute system exited while it was starting"},
    {0x80370101u, "HCS_E_IMAGE_MISMATCH", ERR_INVALID_CONTENT,
     "the operating system of the container does not match the operating system of the host"},
    /* 409, as the create of a hyperv container on a host without Hyper-V. */
    {0x80370102u, "HCS_E_HYPERV_NOT_INSTALLED", ERR_CONFLICT,
     "the virtual machine could not be started because a required feature is not installed"},
    {0x80370105u, "HCS_E_INVALID_STATE", ERR_CONFLICT,
     "the call is not valid in the current state of the compute system"},
    {0x80370106u, "HCS_E_UNEXPECTED_EXIT", EIO, "the compute system exited unexpectedly"},
    {0x80370107u, "HCS_E_TERMINATED", EIO, "the compute system was terminated"},
    {0x80370108u, "HCS_E_CONNECT_FAILED", EIO, "could not connect to the compute system"},
    {0x80370109u, "HCS_E_CONNECTION_TIMEOUT", ETIMEDOUT,
     "timed out connecting to the compute system"},
    {0x8037010Au, "HCS_E_CONNECTION_CLOSED", EIO,
     "the connection with the compute system was closed"},
    {0x8037010Bu, "HCS_E_UNKNOWN_MESSAGE", EIO,
     "the host compute service received a message it does not know"},
    {0x8037010Cu, "HCS_E_UNSUPPORTED_PROTOCOL_VERSION", EIO,
     "the compute system speaks a protocol version the host compute service does not"},
    {0x8037010Du, "HCS_E_INVALID_JSON", EIO, "the JSON document is invalid"},
    {0x8037010Eu, "HCS_E_SYSTEM_NOT_FOUND", ENOENT, "no compute system has that id"},
    {0x8037010Fu, "HCS_E_SYSTEM_ALREADY_EXISTS", EEXIST, "a compute system with that id exists"},
    {0x80370110u, "HCS_E_SYSTEM_ALREADY_STOPPED", ESRCH, "the compute system has already stopped"},
    {0x80370111u, "HCS_E_PROTOCOL_ERROR", EIO, "a protocol error with the compute system"},
    {0x80370112u, "HCS_E_INVALID_LAYER", ERR_INVALID_CONTENT,
     "a layer of the container's storage is invalid"},
    {0x80370113u, "HCS_E_WINDOWS_INSIDER_REQUIRED", ERR_UNAVAILABLE,
     "this needs a Windows Insider build"},
    {0x80370114u, "HCS_E_SERVICE_NOT_AVAILABLE", ERR_UNAVAILABLE,
     "the operation could not start because a required feature is not installed"},
    {0x80370115u, "HCS_E_OPERATION_NOT_STARTED", EIO,
     "the operation was not passed to any call yet"},
    {0x80370116u, "HCS_E_OPERATION_ALREADY_STARTED", EIO, "the operation is already in use"},
    {0x80370117u, "HCS_E_OPERATION_PENDING", EIO, "the operation has not completed"},
    {0x80370118u, "HCS_E_OPERATION_TIMEOUT", ETIMEDOUT,
     "the operation did not complete in the time allowed"},
    {0x80370119u, "HCS_E_OPERATION_SYSTEM_CALLBACK_ALREADY_SET", EIO,
     "an event callback for operations is set, so an operation may not have its own"},
    {0x8037011Au, "HCS_E_OPERATION_RESULT_ALLOCATION_FAILED", ENOMEM,
     "the result of the operation could not be allocated"},
    {0x8037011Bu, "HCS_E_ACCESS_DENIED", EACCES,
     "access denied: run as an administrator or a member of Hyper-V Administrators"},
    {0x8037011Cu, "HCS_E_GUEST_CRITICAL_ERROR", EIO,
     "the guest of the compute system reported a critical error"},
    {0x8037011Du, "HCS_E_PROCESS_INFO_NOT_AVAILABLE", EIO,
     "the process information is not available"},
    {0x8037011Eu, "HCS_E_SERVICE_DISCONNECT", ERR_UNAVAILABLE,
     "the connection to the host compute service was lost"},
    {0x8037011Fu, "HCS_E_PROCESS_ALREADY_STOPPED", ESRCH, "the process has already stopped"},
    {0x80370120u, "HCS_E_SYSTEM_NOT_CONFIGURED_FOR_OPERATION", EIO,
     "the compute system is not configured for that operation"},
    {0x80370121u, "HCS_E_OPERATION_ALREADY_CANCELLED", EIO, "the operation was already cancelled"},

    /* Generic COM codes HCS returns. */
    {0x8000FFFFu, "E_UNEXPECTED", EIO, "catastrophic failure"},
    {0x80004005u, "E_FAIL", EIO, "unspecified error"},
    {0x80004001u, "E_NOTIMPL", ENOTSUP, "not implemented"},
    {0x80070005u, "E_ACCESSDENIED", EACCES, "access is denied (is the daemon elevated?)"},
    {0x80070006u, "E_HANDLE", EBADF, "the handle is invalid"},
    {0x8007000Eu, "E_OUTOFMEMORY", ENOMEM, "not enough memory"},
    {0x80070057u, "E_INVALIDARG", EIO, "an argument is invalid"},

    /* Win32 errors as HRESULT_FROM_WIN32. */
    {0x80070002u, "ERROR_FILE_NOT_FOUND", ENOENT, "the system cannot find the file specified"},
    {0x80070003u, "ERROR_PATH_NOT_FOUND", ENOENT, "the system cannot find the path specified"},
    {0x80070008u, "ERROR_NOT_ENOUGH_MEMORY", ENOMEM, "not enough memory"},
    {0x80070015u, "ERROR_NOT_READY", EAGAIN, "the device is not ready"},
    {0x80070020u, "ERROR_SHARING_VIOLATION", EBUSY, "the file is in use by another process"},
    {0x80070032u, "ERROR_NOT_SUPPORTED", ENOTSUP, "the request is not supported"},
    {0x8007006Du, "ERROR_BROKEN_PIPE", EPIPE, "the pipe has been ended"},
    {0x80070070u, "ERROR_DISK_FULL", ENOSPC, "there is not enough space on the disk"},
    {0x8007007Eu, "ERROR_MOD_NOT_FOUND", ENOENT, "the specified module could not be found"},
    {0x800700B7u, "ERROR_ALREADY_EXISTS", EEXIST, "the file already exists"},
    {0x8007048Fu, "ERROR_DEVICE_NOT_CONNECTED", EAGAIN, "the device is not connected"},
    {0x80070490u, "ERROR_NOT_FOUND", ENOENT, "element not found"},
    {0x800705AAu, "ERROR_NO_SYSTEM_RESOURCES", ENOMEM,
     "insufficient system resources exist to complete the requested service"},
    {0x800705AFu, "ERROR_COMMITMENT_LIMIT", ENOSPC,
     "the paging file is too small for this operation to complete"},
    {0x800705B4u, "ERROR_TIMEOUT", ETIMEDOUT, "the operation returned because the timeout expired"},
    {0x80070718u, "ERROR_NOT_ENOUGH_QUOTA", ENOMEM,
     "not enough quota is available to process this command"},
};

const struct hcs_hresult_info *
hcs_hresult_lookup(uint32_t hr)
{
    /* The NTSTATUS spelling of an HCS code: severity 3 and the customer
     * bit clear, same facility and code. */
    if ((hr & 0xFFFF0000u) == 0xC0370000u)
        hr = 0x80370000u | (hr & 0xFFFFu);
    for (size_t i = 0; i < sizeof(hresults) / sizeof(hresults[0]); i++) {
        if (hresults[i].code == hr)
            return &hresults[i];
    }
    return NULL;
}

int
hcs_hresult_errno(uint32_t hr)
{
    if (!HCS_HR_FAILED(hr))
        return 0;
    const struct hcs_hresult_info *h = hcs_hresult_lookup(hr);
    return h ? h->errnum : EIO;
}

char *
hcs_hresult_name(uint32_t hr, char *buf, size_t size)
{
    const struct hcs_hresult_info *h = hcs_hresult_lookup(hr);
    if (h)
        snprintf(buf, size, "%s (0x%08X)", h->name, (unsigned)hr);
    else
        snprintf(buf, size, "0x%08X", (unsigned)hr);
    return buf;
}

/* Appends "; s" (or s, when buf is empty) to buf, keeping it NUL-terminated. */
static void
append(char *buf, size_t size, size_t *len, const char *s)
{
    if (!s || !*s || *len + 1 >= size)
        return;
    int n = snprintf(buf + *len, size - *len, "%s%s", *len ? "; " : "", s);
    if (n < 0)
        return;
    *len += (size_t)n < size - *len ? (size_t)n : size - *len - 1;
}

/* Is s (trimmed of spaces, newlines and a final period) the same text as t? */
static bool
same_text(const char *s, const char *t)
{
    if (!s || !t)
        return false;
    size_t ls = strlen(s);
    size_t lt = strlen(t);
    while (ls && strchr(" \r\n.", s[ls - 1]))
        ls--;
    while (lt && strchr(" \r\n.", t[lt - 1]))
        lt--;
    return ls == lt && strncasecmp(s, t, ls) == 0;
}

char *
hcs_result_summary(const char *result_json, const char *skip, char *buf, size_t size)
{
    size_t len = 0;
    if (size == 0)
        return buf;
    buf[0] = '\0';
    if (!result_json || !*result_json)
        return buf;
    json_object *doc = NULL;
    if (jsonutil_parse(result_json, strlen(result_json), &doc, NULL) < 0 ||
        !json_object_is_type(doc, json_type_object)) {
        /* Not a ResultError: the text itself, cut short, says the most. */
        char raw[200];
        snprintf(raw, sizeof(raw), "%s", result_json);
        append(buf, size, &len, raw);
        json_object_put(doc);
        return buf;
    }
    json_object *v;
    if (json_object_object_get_ex(doc, "ErrorMessage", &v) &&
        json_object_is_type(v, json_type_string) && !same_text(json_object_get_string(v), skip))
        append(buf, size, &len, json_object_get_string(v));
    if (json_object_object_get_ex(doc, "ErrorEvents", &v) &&
        json_object_is_type(v, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(v); i++) {
            json_object *ev = json_object_array_get_idx(v, i);
            json_object *m;
            if (json_object_is_type(ev, json_type_object) &&
                json_object_object_get_ex(ev, "Message", &m) &&
                json_object_is_type(m, json_type_string) &&
                !same_text(json_object_get_string(m), skip))
                append(buf, size, &len, json_object_get_string(m));
        }
    }
    json_object_put(doc);
    return buf;
}

int
hcs_err_set(struct err *err, uint32_t hr, const char *system_text, const char *result_json,
            const char *fmt, ...)
{
    int code = hcs_hresult_errno(hr);
    if (code == 0)
        code = EIO; /* a "failure" with a success code is still a failure */
    if (!err)
        return -code;

    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);

    const struct hcs_hresult_info *h = hcs_hresult_lookup(hr);
    char text[256] = "";
    if (system_text && *system_text)
        snprintf(text, sizeof(text), "%s", system_text);
    else if (h)
        snprintf(text, sizeof(text), "%s", h->text);
    size_t tl = strlen(text);
    while (tl && strchr(" \r\n.", text[tl - 1]))
        text[--tl] = '\0';

    char name[96];
    char summary[320];
    hcs_hresult_name(hr, name, sizeof(name));
    hcs_result_summary(result_json, text, summary, sizeof(summary));
    return err_set(err, code, "%s: %s%s%s%s%s", what, name, tl ? ": " : "", text,
                   summary[0] ? "; hcs says: " : "", summary);
}
