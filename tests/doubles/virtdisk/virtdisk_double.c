/*
 * A TEST DOUBLE of virtdisk.dll for berth's Wine suites (Wine's own
 * virtdisk.dll implements none of this): it is not a VHDX driver. A
 * "virtual disk" is a plain file, its handle a file handle open for
 * reading and writing (so the computestorage double can "format" it),
 * and being attached is a mark beside it, <file>.double-attached, which
 * outlives the process as a permanently attached disk outlives its
 * attacher. Signatures are mingw-w64's virtdisk.h (included).
 *
 *   CreateVirtualDisk  creates the file (ERROR_FILE_EXISTS if there is one);
 *                      the VHDX type and a Version 2 size are required, or
 *                      a Version 2 ParentPath (a differencing disk: the
 *                      parent must exist, and the file holds
 *                      "parent=<ParentPath>" for a test to read)
 *   OpenVirtualDisk    opens it (ERROR_FILE_NOT_FOUND if there is none)
 *   AttachVirtualDisk  needs NO_DRIVE_LETTER and PERMANENT_LIFETIME;
 *                      attaching twice is ERROR_SHARING_VIOLATION
 *   DetachVirtualDisk  removes the mark; none is ERROR_NOT_READY
 *
 * Controlled as the computestorage double is (and sharing its log when
 * both are pointed at one directory): BERTH_VIRTDISK_DOUBLE_DIR gets
 * calls.log ("NNNN <Function> <path>"), and BERTH_VIRTDISK_DOUBLE_FAIL or
 * the first line of <dir>\fail lists functions that fail
 * (ERROR_INVALID_PARAMETER) and stall:<Function> to block one.
 */
#include <windows.h>

#include <initguid.h>
#include <virtdisk.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* virtdisk.h declares its functions dllimport; here they are defined. */
#pragma GCC diagnostic ignored "-Wattributes"

static SRWLOCK lock = SRWLOCK_INIT;

static bool
env_get(const char *name, char *buf, DWORD size)
{
    DWORD n = GetEnvironmentVariableA(name, buf, size);
    return n > 0 && n < size;
}

static bool
asked(const char *what)
{
    char env[512] = "", dir[MAX_PATH], file[512] = "", buf[1100];
    env_get("BERTH_VIRTDISK_DOUBLE_FAIL", env, sizeof(env));
    if (env_get("BERTH_VIRTDISK_DOUBLE_DIR", dir, sizeof(dir))) {
        char path[MAX_PATH + 16];
        snprintf(path, sizeof(path), "%s\\fail", dir);
        FILE *f = fopen(path, "rb");
        if (f) {
            if (!fgets(file, sizeof(file), f))
                file[0] = '\0';
            fclose(f);
            file[strcspn(file, "\r\n")] = '\0';
        }
    }
    snprintf(buf, sizeof(buf), "%s,%s", env, file);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (strcmp(t, what) == 0)
            return true;
    return false;
}

static bool
failing(const char *fn)
{
    char stall[128];
    snprintf(stall, sizeof(stall), "stall:%s", fn);
    while (asked(stall))
        Sleep(20);
    return asked(fn);
}

static void
record(const char *fn, PCWSTR path)
{
    char dir[MAX_PATH];
    if (!env_get("BERTH_VIRTDISK_DOUBLE_DIR", dir, sizeof(dir)))
        return;
    AcquireSRWLockExclusive(&lock);
    char file[MAX_PATH + 64];
    snprintf(file, sizeof(file), "%s\\calls.log", dir);
    unsigned n = 1;
    FILE *f = fopen(file, "rb");
    if (f) {
        int c;
        while ((c = fgetc(f)) != EOF)
            n += c == '\n';
        fclose(f);
    }
    char p[MAX_PATH * 3] = "-";
    if (path && *path)
        WideCharToMultiByte(CP_UTF8, 0, path, -1, p, sizeof(p), NULL, NULL);
    FILE *log = fopen(file, "ab");
    if (log) {
        fprintf(log, "%04u %s %s\n", n, fn, p);
        fclose(log);
    }
    ReleaseSRWLockExclusive(&lock);
}

/* <file of h>.double-attached */
static bool
mark_of(HANDLE h, wchar_t *out, size_t size)
{
    DWORD n = GetFinalPathNameByHandleW(h, out, (DWORD)size - 20, FILE_NAME_NORMALIZED);
    if (n == 0 || n >= size - 20)
        return false;
    wcscat(out, L".double-attached");
    return true;
}

static bool
vhdx(PVIRTUAL_STORAGE_TYPE t)
{
    return t && t->DeviceId == VIRTUAL_STORAGE_TYPE_DEVICE_VHDX;
}

DWORD WINAPI
CreateVirtualDisk(PVIRTUAL_STORAGE_TYPE VirtualStorageType, PCWSTR Path,
                  VIRTUAL_DISK_ACCESS_MASK VirtualDiskAccessMask,
                  PSECURITY_DESCRIPTOR SecurityDescriptor, CREATE_VIRTUAL_DISK_FLAG Flags,
                  ULONG ProviderSpecificFlags, PCREATE_VIRTUAL_DISK_PARAMETERS Parameters,
                  LPOVERLAPPED Overlapped, PHANDLE Handle)
{
    (void)VirtualDiskAccessMask, (void)SecurityDescriptor, (void)Flags, (void)ProviderSpecificFlags,
        (void)Overlapped;
    record("CreateVirtualDisk", Path);
    if (failing("CreateVirtualDisk"))
        return ERROR_INVALID_PARAMETER;
    PCWSTR parent = Parameters && Parameters->Version == CREATE_VIRTUAL_DISK_VERSION_2
                        ? Parameters->Version2.ParentPath
                        : NULL;
    if (!vhdx(VirtualStorageType) || !Path || !Handle || !Parameters ||
        Parameters->Version != CREATE_VIRTUAL_DISK_VERSION_2 ||
        (Parameters->Version2.MaximumSize == 0 && !parent))
        return ERROR_INVALID_PARAMETER;
    if (parent && GetFileAttributesW(parent) == INVALID_FILE_ATTRIBUTES)
        return ERROR_FILE_NOT_FOUND;
    HANDLE h = CreateFileW(Path, GENERIC_READ | GENERIC_WRITE,
                           FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, CREATE_NEW,
                           0, NULL);
    if (h == INVALID_HANDLE_VALUE)
        return GetLastError();
    if (parent) {
        char line[MAX_PATH * 3 + 16];
        int n = snprintf(line, sizeof(line), "parent=%ls", parent);
        DWORD w = 0;
        if (n < 0 || (size_t)n >= sizeof(line) || !WriteFile(h, line, (DWORD)n, &w, NULL)) {
            CloseHandle(h);
            DeleteFileW(Path);
            return ERROR_INVALID_PARAMETER;
        }
    }
    *Handle = h;
    return ERROR_SUCCESS;
}

DWORD WINAPI
OpenVirtualDisk(PVIRTUAL_STORAGE_TYPE VirtualStorageType, PCWSTR Path,
                VIRTUAL_DISK_ACCESS_MASK VirtualDiskAccessMask, OPEN_VIRTUAL_DISK_FLAG Flags,
                POPEN_VIRTUAL_DISK_PARAMETERS Parameters, PHANDLE Handle)
{
    (void)VirtualDiskAccessMask, (void)Flags, (void)Parameters;
    record("OpenVirtualDisk", Path);
    if (failing("OpenVirtualDisk"))
        return ERROR_INVALID_PARAMETER;
    if (!vhdx(VirtualStorageType) || !Path || !Handle)
        return ERROR_INVALID_PARAMETER;
    HANDLE h = CreateFileW(Path, GENERIC_READ | GENERIC_WRITE,
                           FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                           OPEN_EXISTING, 0, NULL);
    if (h == INVALID_HANDLE_VALUE)
        return GetLastError();
    *Handle = h;
    return ERROR_SUCCESS;
}

DWORD WINAPI
AttachVirtualDisk(HANDLE VirtualDiskHandle, PSECURITY_DESCRIPTOR SecurityDescriptor,
                  ATTACH_VIRTUAL_DISK_FLAG Flags, ULONG ProviderSpecificFlags,
                  PATTACH_VIRTUAL_DISK_PARAMETERS Parameters, LPOVERLAPPED Overlapped)
{
    (void)SecurityDescriptor, (void)ProviderSpecificFlags, (void)Parameters, (void)Overlapped;
    wchar_t mark[MAX_PATH * 2];
    bool have = mark_of(VirtualDiskHandle, mark, MAX_PATH * 2);
    record("AttachVirtualDisk", have ? mark : NULL);
    if (failing("AttachVirtualDisk"))
        return ERROR_INVALID_PARAMETER;
    if (!have || !(Flags & ATTACH_VIRTUAL_DISK_FLAG_NO_DRIVE_LETTER) ||
        !(Flags & ATTACH_VIRTUAL_DISK_FLAG_PERMANENT_LIFETIME))
        return ERROR_INVALID_PARAMETER;
    HANDLE m = CreateFileW(mark, GENERIC_WRITE, 0, NULL, CREATE_NEW, 0, NULL);
    if (m == INVALID_HANDLE_VALUE)
        return GetLastError() == ERROR_FILE_EXISTS ? ERROR_SHARING_VIOLATION : GetLastError();
    CloseHandle(m);
    return ERROR_SUCCESS;
}

DWORD WINAPI
DetachVirtualDisk(HANDLE VirtualDiskHandle, DETACH_VIRTUAL_DISK_FLAG Flags,
                  ULONG ProviderSpecificFlags)
{
    (void)Flags, (void)ProviderSpecificFlags;
    wchar_t mark[MAX_PATH * 2];
    bool have = mark_of(VirtualDiskHandle, mark, MAX_PATH * 2);
    record("DetachVirtualDisk", have ? mark : NULL);
    if (failing("DetachVirtualDisk"))
        return ERROR_INVALID_PARAMETER;
    if (!have)
        return ERROR_INVALID_HANDLE;
    return DeleteFileW(mark) ? ERROR_SUCCESS : ERROR_NOT_READY;
}
