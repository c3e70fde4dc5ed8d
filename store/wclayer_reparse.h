/*
 * The reparse points of a Windows layer tar (symlinks, and junctions:
 * MSWINDOWS.mountpoint): which targets a layer may hold, and the
 * REPARSE_DATA_BUFFER that writes one, byte for byte as go-winio's
 * EncodeReparsePoint makes it (hcsshim's layer writer uses that).
 *
 * Targets: a Windows image names its own files as C:\... (the
 * container's system drive is the layer's Files\; a utility VM's is
 * UtilityVM\Files\), so absolute targets on C: are taken, as are rooted
 * (\Windows) and \\?\C:\ ones, and relative ones resolved from the
 * link's folder. Nothing may lead out: ".." above the root, another
 * drive, a share (\\server\...), a device or volume (\\.\, \\?\Volume,
 * \??\UNC), a drive-relative "C:x", or a ':' inside a name is refused.
 * A junction's target must be absolute (NTFS resolves mount points by
 * their NT path only). go-winio itself encodes any target; berth keeps
 * its rule that nothing in a layer leads out of it.
 *
 * Pure functions: any thread, no I/O, Linux and Windows.
 */
#ifndef BERTH_STORE_WCLAYER_REPARSE_H
#define BERTH_STORE_WCLAYER_REPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "store/wclayer.h"

#define WCL_REPARSE_TAG_MOUNT_POINT 0xA0000003u
#define WCL_REPARSE_TAG_SYMLINK 0xA000000Cu
#define WCL_SYMLINK_FLAG_RELATIVE 1u
/* MAXIMUM_REPARSE_DATA_BUFFER_SIZE */
#define WCL_REPARSE_MAX (16 * 1024)

/*
 * Checks the target of the reparse point at path (normalized, in root),
 * a junction when mount_point. ERR_INVALID_CONTENT naming the entry, the
 * target and why.
 */
int wcl_reparse_check(const char *path, enum wcl_root root, const char *target, bool mount_point,
                      struct err *err);

/*
 * The REPARSE_DATA_BUFFER of target (a checked one) into buf (cap bytes),
 * its length in *len: the NT substitute name (\??\C:\... for an absolute
 * target, the target itself for a relative one) and the target as the
 * print name, UTF-16LE, no terminators, '/' written as '\'.
 */
int wcl_reparse_encode(const char *target, bool mount_point, unsigned char *buf, size_t cap,
                       size_t *len, struct err *err);

#endif
