/*
 * Paths for Windows containers. Callers speak POSIX ("/tmp/build/x", what
 * Concourse's web node sends for every mount, working directory and
 * output path); a Windows container wants "C:\tmp\build\x". A rootfs on
 * the host comes as a raw:// URI whose Windows path is percent-encoded.
 *
 * Everything here is string work on UTF-8 text, in one normal form: an
 * upper-case drive letter, "\" between components, no "." component, no
 * trailing "\" except on the drive's root ("C:\"). Nothing is looked up on
 * disk. Any thread.
 *
 * Refused, with EINVAL naming the path and the reason, because Windows
 * would read them differently from what the caller meant or because they
 * could leave the place they name:
 *   - a ".." component, in either separator ("/a/../b", "/a\..\b");
 *   - relative paths, drive-relative ones ("C:x", "C:" alone, which mean
 *     "the current directory of drive C"), paths rooted without a drive
 *     ("\x"), UNC and device paths ("\\server\share", "\\?\...", "\\.\...");
 *   - components Windows rewrites or treats as devices: a trailing "." or
 *     space (stripped by Win32), one of <>:"|?* or a control character
 *     (":" also names an alternate data stream), a reserved device name
 *     (CON, PRN, AUX, NUL, COM1-9, LPT1-9, with or without an extension);
 *   - a component over 255 bytes, or a result that does not fit.
 */
#ifndef BERTH_RUNTIME_HCS_WINPATH_H
#define BERTH_RUNTIME_HCS_WINPATH_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

/* Longest path accepted (bytes of UTF-8, NUL excluded), as on Linux. */
#define HCS_PATH_MAX 4095

/*
 * Converts a POSIX absolute path ("/tmp/build/x", on drive C:) or a
 * drive-absolute Windows path ("D:/x", "d:\x\") into the normal form in
 * out (size bytes). "/" is "C:\". EINVAL as above.
 */
int hcs_path_to_windows(const char *path, char *out, size_t size, struct err *err);

/* Is s a drive-absolute Windows path already in the normal form? */
bool hcs_path_is_windows(const char *s);

/*
 * Decodes a rootfs URI "raw:///<percent-encoded Windows path>", e.g.
 * "raw:///C%3A%5Cworker%5Cvolumes%5Clive%5Cabc%5Cvolume", into the normal
 * form of that path in out. The path must be drive-absolute (a POSIX
 * path names no directory on a Windows host); the unencoded spelling
 * "raw:///C:/worker/volumes" is accepted too. EINVAL for another scheme,
 * a missing third slash, a bad or NUL (%00) escape, or a path refused as
 * above.
 */
int hcs_path_from_raw_uri(const char *uri, char *out, size_t size, struct err *err);

/*
 * The same for a URI's path once decoded ("/C:\\dir", or "C:/dir"): one
 * leading "/" before the drive is dropped, and the rest must be
 * drive-absolute and pass the rules above. EINVAL naming path otherwise.
 */
int hcs_path_from_raw_path(const char *path, char *out, size_t size, struct err *err);

#endif
