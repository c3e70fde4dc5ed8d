/*
 * berthd-fault's SQLite half (see fault_wrap.c): a VFS that wraps the
 * default one and is registered as the new default before main() runs, so
 * meta.db's file steps can fail without a change to store/: xWrite and
 * xTruncate (sqlwrite: SQLITE_IOERR_WRITE/_TRUNCATE, SQLITE_FULL with
 * ENOSPC), xSync (sqlsync: SQLITE_IOERR_FSYNC), xRead (sqlread:
 * SQLITE_IOERR_READ), xLock and taking an xShmLock (sqllock: SQLITE_BUSY,
 * which SQLite's busy handler retries). Everything else is passed through.
 * Runs on whichever thread SQLite calls it from.
 */
#include "tests/fault/fault_wrap.h"

#include <errno.h>
#include <sqlite3.h>
#include <stddef.h>

static sqlite3_vfs *real_vfs;
static sqlite3_vfs fault_vfs;

/* Our file, with the real VFS's file right after it (szOsFile covers both). */
struct fault_file {
    sqlite3_file base;
    sqlite3_file *real;
};

static sqlite3_file *
real_of(sqlite3_file *f)
{
    return ((struct fault_file *)f)->real;
}

static int
sql_fault(enum fault_kind k, int code, sqlite3_file *f, const char *call)
{
    int e;
    if (!fault_hit(k, &e))
        return SQLITE_OK;
    fault_report(k, e, "sqlite %s", call);
    if (k == FAULT_SQLWRITE && e == ENOSPC)
        return SQLITE_FULL;
    return code;
}

static int
ff_close(sqlite3_file *f)
{
    return real_of(f)->pMethods->xClose(real_of(f));
}

static int
ff_read(sqlite3_file *f, void *buf, int amt, sqlite3_int64 off)
{
    int rc = sql_fault(FAULT_SQLREAD, SQLITE_IOERR_READ, f, "xRead");
    return rc ? rc : real_of(f)->pMethods->xRead(real_of(f), buf, amt, off);
}

static int
ff_write(sqlite3_file *f, const void *buf, int amt, sqlite3_int64 off)
{
    int rc = sql_fault(FAULT_SQLWRITE, SQLITE_IOERR_WRITE, f, "xWrite");
    return rc ? rc : real_of(f)->pMethods->xWrite(real_of(f), buf, amt, off);
}

static int
ff_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    int rc = sql_fault(FAULT_SQLWRITE, SQLITE_IOERR_TRUNCATE, f, "xTruncate");
    return rc ? rc : real_of(f)->pMethods->xTruncate(real_of(f), size);
}

static int
ff_sync(sqlite3_file *f, int flags)
{
    int rc = sql_fault(FAULT_SQLSYNC, SQLITE_IOERR_FSYNC, f, "xSync");
    return rc ? rc : real_of(f)->pMethods->xSync(real_of(f), flags);
}

static int
ff_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    return real_of(f)->pMethods->xFileSize(real_of(f), size);
}

static int
ff_lock(sqlite3_file *f, int level)
{
    int rc = sql_fault(FAULT_SQLLOCK, SQLITE_BUSY, f, "xLock");
    return rc ? rc : real_of(f)->pMethods->xLock(real_of(f), level);
}

static int
ff_unlock(sqlite3_file *f, int level)
{
    return real_of(f)->pMethods->xUnlock(real_of(f), level);
}

static int
ff_check_reserved(sqlite3_file *f, int *out)
{
    return real_of(f)->pMethods->xCheckReservedLock(real_of(f), out);
}

static int
ff_file_control(sqlite3_file *f, int op, void *arg)
{
    return real_of(f)->pMethods->xFileControl(real_of(f), op, arg);
}

static int
ff_sector_size(sqlite3_file *f)
{
    return real_of(f)->pMethods->xSectorSize(real_of(f));
}

static int
ff_device_characteristics(sqlite3_file *f)
{
    return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f));
}

static int
ff_shm_map(sqlite3_file *f, int page, int size, int extend, void volatile **out)
{
    return real_of(f)->pMethods->xShmMap(real_of(f), page, size, extend, out);
}

static int
ff_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
    /* Only taking a lock can be refused; letting one go always works. */
    if (flags & SQLITE_SHM_LOCK) {
        int rc = sql_fault(FAULT_SQLLOCK, SQLITE_BUSY, f, "xShmLock");
        if (rc)
            return rc;
    }
    return real_of(f)->pMethods->xShmLock(real_of(f), offset, n, flags);
}

static void
ff_shm_barrier(sqlite3_file *f)
{
    real_of(f)->pMethods->xShmBarrier(real_of(f));
}

static int
ff_shm_unmap(sqlite3_file *f, int del)
{
    return real_of(f)->pMethods->xShmUnmap(real_of(f), del);
}

static int
ff_fetch(sqlite3_file *f, sqlite3_int64 off, int amt, void **out)
{
    return real_of(f)->pMethods->xFetch(real_of(f), off, amt, out);
}

static int
ff_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    return real_of(f)->pMethods->xUnfetch(real_of(f), off, p);
}

static const sqlite3_io_methods ff_methods = {
    .iVersion = 3,
    .xClose = ff_close,
    .xRead = ff_read,
    .xWrite = ff_write,
    .xTruncate = ff_truncate,
    .xSync = ff_sync,
    .xFileSize = ff_file_size,
    .xLock = ff_lock,
    .xUnlock = ff_unlock,
    .xCheckReservedLock = ff_check_reserved,
    .xFileControl = ff_file_control,
    .xSectorSize = ff_sector_size,
    .xDeviceCharacteristics = ff_device_characteristics,
    .xShmMap = ff_shm_map,
    .xShmLock = ff_shm_lock,
    .xShmBarrier = ff_shm_barrier,
    .xShmUnmap = ff_shm_unmap,
    .xFetch = ff_fetch,
    .xUnfetch = ff_unfetch,
};

static int
fv_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out_flags)
{
    struct fault_file *ff = (struct fault_file *)f;
    ff->real = (sqlite3_file *)(ff + 1);
    int rc = real_vfs->xOpen(real_vfs, name, ff->real, flags, out_flags);
    /* SQLite calls xClose only when pMethods is set; the real file needs
     * it whenever its own open set its methods. */
    ff->base.pMethods = ff->real->pMethods ? &ff_methods : NULL;
    return rc;
}

static int
fv_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
    return real_vfs->xDelete(real_vfs, name, sync_dir);
}

static int
fv_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
    return real_vfs->xAccess(real_vfs, name, flags, out);
}

static int
fv_full_pathname(sqlite3_vfs *vfs, const char *name, int len, char *out)
{
    return real_vfs->xFullPathname(real_vfs, name, len, out);
}

static void *
fv_dlopen(sqlite3_vfs *vfs, const char *name)
{
    return real_vfs->xDlOpen(real_vfs, name);
}

static void
fv_dlerror(sqlite3_vfs *vfs, int len, char *out)
{
    real_vfs->xDlError(real_vfs, len, out);
}

static void (*fv_dlsym(sqlite3_vfs *vfs, void *h, const char *sym))(void)
{
    return real_vfs->xDlSym(real_vfs, h, sym);
}

static void
fv_dlclose(sqlite3_vfs *vfs, void *h)
{
    real_vfs->xDlClose(real_vfs, h);
}

static int
fv_randomness(sqlite3_vfs *vfs, int len, char *out)
{
    return real_vfs->xRandomness(real_vfs, len, out);
}

static int
fv_sleep(sqlite3_vfs *vfs, int us)
{
    return real_vfs->xSleep(real_vfs, us);
}

static int
fv_current_time(sqlite3_vfs *vfs, double *out)
{
    return real_vfs->xCurrentTime(real_vfs, out);
}

static int
fv_last_error(sqlite3_vfs *vfs, int len, char *out)
{
    return real_vfs->xGetLastError ? real_vfs->xGetLastError(real_vfs, len, out) : 0;
}

static int
fv_current_time64(sqlite3_vfs *vfs, sqlite3_int64 *out)
{
    return real_vfs->xCurrentTimeInt64(real_vfs, out);
}

int
fault_vfs_install(void)
{
    if (sqlite3_initialize() != SQLITE_OK || !(real_vfs = sqlite3_vfs_find(NULL)))
        return -1;
    fault_vfs = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)sizeof(struct fault_file) + real_vfs->szOsFile,
        .mxPathname = real_vfs->mxPathname,
        .zName = "berth-fault",
        .xOpen = fv_open,
        .xDelete = fv_delete,
        .xAccess = fv_access,
        .xFullPathname = fv_full_pathname,
        .xDlOpen = fv_dlopen,
        .xDlError = fv_dlerror,
        .xDlSym = fv_dlsym,
        .xDlClose = fv_dlclose,
        .xRandomness = fv_randomness,
        .xSleep = fv_sleep,
        .xCurrentTime = fv_current_time,
        .xGetLastError = fv_last_error,
        .xCurrentTimeInt64 = fv_current_time64,
    };
    return sqlite3_vfs_register(&fault_vfs, 1) == SQLITE_OK ? 0 : -1;
}
