/*
 * cimfs.dll (the Composite Image File System), loaded at run time through
 * common/windll.h as every run-time DLL of berth is: an .exe that
 * imported it would not start where it is absent, Wine included, and it
 * exists only from Windows 10 2004 (build 19041) on. It lives in store/,
 * beside its only callers (store/ may not depend on runtime/, STYLE.md):
 * the table below is every export berth calls; store/cim_writer_windows.c
 * writes layers into CIMs with it, store/layer_cimfs_windows.c mounts
 * them, and daemon/layer_format_windows.c loads it to decide
 * --layer-format auto.
 *
 * mingw-w64 ships no cimfs.h, so the types are declared here, as
 * Microsoft's reference for cimfs.h gives them (learn.microsoft.com,
 * windows/win32/api/cimfs/: CIMFS_FILE_METADATA, CIM_MOUNT_IMAGE_FLAGS,
 * CimCreateImage, CimCloseImage, CimCommitImage, CimCreateFile,
 * CimWriteStream, CimCloseStream, CimCreateAlternateStream,
 * CimCreateHardLink, CimDeletePath, CimMountImage, CimDismountImage).
 * Every function but the two closes returns an HRESULT.
 *
 * Block CIMs (one image in one file, or on a block device) and merged
 * CIMs come from later builds, so their exports (CIMFS_BLOCK_FUNCS) are
 * looked up apart, after the table above loaded: a cimfs.dll without
 * them still serves forked CIMs, and block_why says which one is
 * missing (the block fields are then all NULL). Their signatures and
 * flag values are hcsshim's (internal/winapi/cimfs/cimfs.go: CimCreateImage2
 * with flags, CimTombstoneFile, CimAddFsToMergedImage2 with flags,
 * CimMergeMountImage of a CIMFS_IMAGE_PATH array; pkg/cimfs/cimfs.go:
 * the CimCreateFlag*, CimMergeFlag* and CimMount* values;
 * internal/winapi/types/cimfs.go: CimFsImagePath {ImageDir, ImageName}).
 *
 * Test builds (BERTH_TEST_HOOKS) can load the TEST DOUBLE in
 * tests/doubles/cimfs/: cimfs_api_open() with a path, or with NULL and
 * BERTH_TEST_CIMFS_DLL set to one. Other builds load only
 * %SystemRoot%\System32\cimfs.dll and refuse a path. cimfs_api_default()
 * is the process's one loaded copy, for code that has no handle to pass
 * (the layer mounts). The implementation, cimfs_api_windows.c, is built
 * only for Windows. Any thread.
 */
#ifndef BERTH_STORE_CIMFS_API_H
#define BERTH_STORE_CIMFS_API_H

#include "common/err.h"

#ifdef _WIN32
#include <windows.h>

typedef struct CIMFS_IMAGE_HANDLE__ *CIMFS_IMAGE_HANDLE;
typedef struct CIMFS_STREAM_HANDLE__ *CIMFS_STREAM_HANDLE;

typedef struct _CIMFS_FILE_METADATA {
    UINT32 Attributes;
    INT64 FileSize;
    LARGE_INTEGER CreationTime;
    LARGE_INTEGER LastWriteTime;
    LARGE_INTEGER ChangeTime;
    LARGE_INTEGER LastAccessTime;
    const void *SecurityDescriptorBuffer;
    UINT32 SecurityDescriptorSize;
    const void *ReparseDataBuffer;
    UINT32 ReparseDataSize;
    const void *EaBuffer;
    UINT32 EaBufferSize;
} CIMFS_FILE_METADATA;

typedef enum CIM_MOUNT_IMAGE_FLAGS {
    CIM_MOUNT_IMAGE_NONE = 0x00000000,
    CIM_MOUNT_CHILD_ONLY = 0x00000001,
} CIM_MOUNT_IMAGE_FLAGS;

#define CIMFS_FUNCS(X)                                                                             \
    X(HRESULT, CimCreateImage,                                                                     \
      (PCWSTR imageContainingPath, PCWSTR existingImageName, PCWSTR newImageName,                  \
       CIMFS_IMAGE_HANDLE * cimImageHandle))                                                       \
    X(void, CimCloseImage, (CIMFS_IMAGE_HANDLE cimImageHandle))                                    \
    X(HRESULT, CimCommitImage, (CIMFS_IMAGE_HANDLE cimImageHandle))                                \
    X(HRESULT, CimCreateFile,                                                                      \
      (CIMFS_IMAGE_HANDLE cimImageHandle, PCWSTR imageRelativePath,                                \
       const CIMFS_FILE_METADATA *fileMetadata, CIMFS_STREAM_HANDLE *cimStreamHandle))             \
    X(HRESULT, CimWriteStream,                                                                     \
      (CIMFS_STREAM_HANDLE cimStreamHandle, const void *buffer, UINT32 bufferSize))                \
    X(void, CimCloseStream, (CIMFS_STREAM_HANDLE cimStreamHandle))                                 \
    X(HRESULT, CimCreateAlternateStream,                                                           \
      (CIMFS_IMAGE_HANDLE cimImageHandle, PCWSTR imageRelativePath, UINT64 size,                   \
       CIMFS_STREAM_HANDLE * cimStreamHandle))                                                     \
    X(HRESULT, CimCreateHardLink,                                                                  \
      (CIMFS_IMAGE_HANDLE cimImageHandle, PCWSTR imageRelativePath,                                \
       PCWSTR existingImageRelativePath))                                                          \
    X(HRESULT, CimDeletePath, (CIMFS_IMAGE_HANDLE cimImageHandle, PCWSTR imageRelativePath))       \
    X(HRESULT, CimMountImage,                                                                      \
      (PCWSTR imageContainingPath, PCWSTR imageName, CIM_MOUNT_IMAGE_FLAGS mountImageFlags,        \
       const GUID *volumeId))                                                                      \
    X(HRESULT, CimDismountImage, (const GUID *volumeId))

/* hcsshim pkg/cimfs/cimfs.go's values. */
#define CIMFS_CREATE_BLOCK_DEVICE 0x4u /* CimCreateFlagBlockDeviceCim */
#define CIMFS_CREATE_SINGLE_FILE 0x8u  /* CimCreateFlagSingleFileCim */
#define CIMFS_CREATE_CONSISTENT 0x10u  /* CimCreateFlagConsistentCim */
#define CIMFS_MERGE_SINGLE_FILE 0x1u   /* CimMergeFlagSingleFile */
#define CIMFS_MOUNT_SINGLE_FILE 0x20u  /* CimMountSingleFileCim */

/* One CIM of a merged mount: the block file (single-file CIM) and the
 * image's name inside it. */
typedef struct _CIMFS_IMAGE_PATH {
    PCWSTR ImageDir;
    PCWSTR ImageName;
} CIMFS_IMAGE_PATH;

#define CIMFS_BLOCK_FUNCS(X)                                                                       \
    X(HRESULT, CimCreateImage2,                                                                    \
      (PCWSTR imageContainingPath, UINT32 flags, PCWSTR existingImageName, PCWSTR newImageName,    \
       CIMFS_IMAGE_HANDLE * cimImageHandle))                                                       \
    X(HRESULT, CimTombstoneFile, (CIMFS_IMAGE_HANDLE cimImageHandle, PCWSTR imageRelativePath))    \
    X(HRESULT, CimAddFsToMergedImage2,                                                             \
      (CIMFS_IMAGE_HANDLE cimImageHandle, PCWSTR cimPath, UINT32 flags))                           \
    X(HRESULT, CimMergeMountImage,                                                                 \
      (UINT32 numCimPaths, const CIMFS_IMAGE_PATH *backingImagePaths, UINT32 flags,                \
       const GUID *volumeId))

struct cimfs_api {
    HMODULE dll;
#define CIMFS_FIELD(ret, name, args) ret(WINAPI *name) args;
    CIMFS_FUNCS(CIMFS_FIELD)
    CIMFS_BLOCK_FUNCS(CIMFS_FIELD)
#undef CIMFS_FIELD
    char block_why[160]; /* "" when every block export is there */
};
#else
struct cimfs_api;
#endif

/* ERR_UNAVAILABLE naming what is missing when the DLL or an export is absent. */
int cimfs_api_open(const char *dll_path, struct cimfs_api **out, struct err *err);
void cimfs_api_free(struct cimfs_api *api);

/*
 * Has api every block CIM export? When not, ERR_UNAVAILABLE in err
 * naming the missing one (err may be NULL). Returns 0 or that error.
 */
int cimfs_api_block(const struct cimfs_api *api, struct err *err);

/*
 * The process's copy, loaded at the first call (cimfs_api_open(NULL)) and
 * kept; a failure is remembered and returned again, with its message.
 */
int cimfs_api_default(struct cimfs_api **out, struct err *err);

#ifdef _WIN32
/*
 * err for a failed cimfs.dll call: the formatted context, then the
 * system's text for hr and the code ("mount cim X: Access is denied
 * (0x80070005)"), as the errno store/wcstorage.h's wcs_hresult_errno
 * gives hr. Returns -code.
 */
int cimfs_err_set(struct err *err, HRESULT hr, const char *fmt, ...)
    __attribute__((format(gnu_printf, 3, 4)));
#endif

#endif
