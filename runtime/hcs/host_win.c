/*
 * The host's commit, version and berth's named pipes (host.h). Windows
 * only; any thread.
 */
#include "runtime/hcs/host.h"

#include <windows.h>

#include <psapi.h>
#include <sddl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/hcs/guid.h"

int
hcs_host_commit(void *arg, struct hcs_commit_info *out, struct err *err)
{
    (void)arg;
    PERFORMANCE_INFORMATION pi;
    memset(&pi, 0, sizeof(pi));
    pi.cb = sizeof(pi);
    if (!GetPerformanceInfo(&pi, sizeof(pi)))
        return err_set(err, EIO, "GetPerformanceInfo: error %lu", (unsigned long)GetLastError());
    out->commit_limit = pi.CommitLimit;
    out->commit_total = pi.CommitTotal;
    out->page_size = pi.PageSize;
    return 0;
}

typedef void(WINAPI *rtl_get_nt_version_numbers_fn)(DWORD *, DWORD *, DWORD *);

int
hcs_host_version(unsigned *major, unsigned *minor, unsigned *build, unsigned *revision,
                 struct err *err)
{
    HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
    FARPROC f = ntdll ? GetProcAddress(ntdll, "RtlGetNtVersionNumbers") : NULL;
    if (!f)
        return err_set(err, ERR_UNAVAILABLE,
                       "windows version: ntdll has no "
                       "RtlGetNtVersionNumbers");
    rtl_get_nt_version_numbers_fn fn;
    memcpy(&fn, &f, sizeof(fn));
    DWORD ma = 0, mi = 0, bu = 0;
    fn(&ma, &mi, &bu);
    /* The top bits of the build say whether it is a checked build. */
    *major = ma;
    *minor = mi;
    *build = bu & 0xffff;
    DWORD ubr = 0, size = sizeof(ubr);
    if (RegGetValueW(HKEY_LOCAL_MACHINE, L"SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion", L"UBR",
                     RRF_RT_REG_DWORD, NULL, &ubr, &size) != ERROR_SUCCESS)
        ubr = 0;
    *revision = ubr;
    return 0;
}

int
hcs_pipe_create_named(const char *name, bool inbound, void **pipe, struct err *err)
{
    wchar_t wname[HCS_PIPE_NAME_SIZE];
    if (!name || MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, name, -1, wname,
                                     HCS_PIPE_NAME_SIZE) <= 0)
        return err_set(err, EINVAL, "pipe %.80s: not a pipe name", name ? name : "(null)");
    /* Only SYSTEM and Administrators, not the default's read access for
     * Everyone: a task's output is its own. */
    PSECURITY_DESCRIPTOR sd = NULL;
    if (!ConvertStringSecurityDescriptorToSecurityDescriptorW(L"D:P(A;;GA;;;SY)(A;;GA;;;BA)",
                                                              SDDL_REVISION_1, &sd, NULL))
        return err_set(err, EIO, "pipe %s: security descriptor: error %lu", name,
                       (unsigned long)GetLastError());
    SECURITY_ATTRIBUTES sa = {sizeof(sa), sd, FALSE};
    DWORD mode = (inbound ? PIPE_ACCESS_INBOUND : PIPE_ACCESS_OUTBOUND) |
                 FILE_FLAG_FIRST_PIPE_INSTANCE | FILE_FLAG_OVERLAPPED;
    HANDLE h = CreateNamedPipeW(
        wname, mode, PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
        1, 65536, 65536, 0, &sa);
    DWORD e = h == INVALID_HANDLE_VALUE ? GetLastError() : 0;
    LocalFree(sd);
    if (h == INVALID_HANDLE_VALUE) {
        /* First-instance-only: a name someone holds is "access denied". */
        if (e == ERROR_ACCESS_DENIED || e == ERROR_PIPE_BUSY || e == ERROR_ALREADY_EXISTS)
            return err_set(err, EEXIST, "pipe %s: the name is taken (error %lu)", name,
                           (unsigned long)e);
        return err_set(err, EIO, "pipe %s: CreateNamedPipeW: error %lu", name, (unsigned long)e);
    }
    *pipe = h;
    return 0;
}

int
hcs_pipe_create(const char *handle, const char *id, enum hcs_stdio_stream stream, void **pipe,
                char name_out[HCS_PIPE_NAME_SIZE], struct err *err)
{
    int r = -EEXIST;
    for (int attempt = 0; attempt < 4; attempt++) {
        uint8_t random[HCS_PIPE_RANDOM_BYTES];
        if ((r = hcs_random_bytes(random, sizeof(random), err)) < 0)
            return r;
        if ((r = hcs_pipe_name(handle, id, stream, random, name_out, err)) < 0)
            return r;
        r = hcs_pipe_create_named(name_out, stream != HCS_STDIN, pipe, err);
        if (r != -EEXIST)
            return r;
    }
    return err_wrap(err, "pipe for %s/%s: four random names were taken", handle, id);
}
