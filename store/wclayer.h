/*
 * Windows layer tars, parsed and validated portably: the tars that
 * `docker save` of a Windows image holds and hcsshim's ociwclayer writes
 * (go-winio's backuptar records), before any of it reaches the
 * platform's layer writer (computestorage.dll's HcsImportLayer on
 * Windows, which keeps descriptors, attributes and hives).
 *
 * What is accepted, and what each entry becomes (struct wcl_entry):
 * - names only under Files/, Hives/ and UtilityVM/ (the roots themselves
 *   too), '/'-separated, with "./" prefixes and repeated or trailing
 *   slashes folded; never absolute ("/x", "C:x"), never a "." or ".."
 *   component, no backslash, no character NTFS refuses (< > " | ? * and
 *   controls), no component ending in '.' or ' ' (Win32 would strip it,
 *   so two names would be one), no device name (CON, NUL, COM1...), valid
 *   UTF-8, components of at most 255 bytes, paths of at most
 *   WCL_PATH_MAX;
 * - "name:stream" as the alternate data stream of the entry just before
 *   it (the only place a ':' may be);
 * - regular files, directories, symlinks (reparse points; with
 *   MSWINDOWS.mountpoint a junction), their targets inside the layer's
 *   Files/ or UtilityVM/Files/ (wclayer_reparse.h), and hard links to a file listed
 *   earlier in the same layer; ".wh.<name>" under Files/ as a whiteout of
 *   a lower layer's entry (the opaque marker is refused: Windows layers
 *   have none); Hives/ holds only the registry deltas
 *   (<Hive>_Delta, wcl_hive);
 * - PAX records: MSWINDOWS.rawsd (base64 of a self-relative security
 *   descriptor, its SIDs and ACLs walked and bounded), MSWINDOWS.sd (the
 *   legacy SDDL form, printable ASCII), MSWINDOWS.fileattr (decimal, its
 *   directory bit agreeing with the entry's type), MSWINDOWS.xattr.<name>
 *   (base64), MSWINDOWS.mountpoint (symlinks only) and
 *   LIBARCHIVE.creationtime ("seconds[.fraction]"); other records are
 *   ignored.
 *
 * Names that differ only in case are one name on NTFS: the later entry
 * replaces the earlier (entry->replaces), as the seed's import does; a
 * file over a directory, or the reverse, is refused. When the earlier one
 * was read-only (FILE_ATTRIBUTE_READONLY) creating the later one fails
 * with a permission error: then, and only then, wclayer_import makes the
 * earlier one writable through the sink and creates the entry again.
 *
 * Everything refused is ERR_INVALID_CONTENT naming the entry. Blocking as
 * the read callback is; pool threads.
 */
#ifndef BERTH_STORE_WCLAYER_H
#define BERTH_STORE_WCLAYER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "store/wintar.h"

#define WCL_PATH_MAX 4096
#define WCL_COMPONENT_MAX 255
/* A decoded security descriptor or extended attribute value. */
#define WCL_BLOB_MAX 65536

#define WCL_ATTR_READONLY 0x1u
#define WCL_ATTR_DIRECTORY 0x10u
#define WCL_ATTR_REPARSE_POINT 0x400u

enum wcl_root {
    WCL_ROOT_FILES,
    WCL_ROOT_HIVES,
    WCL_ROOT_UTILITYVM,
};

enum wcl_kind {
    WCL_DIR,
    WCL_FILE,
    WCL_STREAM,   /* an alternate data stream of the entry before it */
    WCL_SYMLINK,  /* a reparse point: target as written, mount_point for a junction */
    WCL_HARDLINK, /* target: the normalized path of the earlier file */
    WCL_WHITEOUT, /* path: the lower layer's entry that this layer removes */
};

/* The registry hives a layer may carry a delta of, as Hives/<name>_Delta. */
enum wcl_hive {
    WCL_HIVE_DEFAULTUSER,
    WCL_HIVE_SAM,
    WCL_HIVE_SECURITY,
    WCL_HIVE_SOFTWARE,
    WCL_HIVE_SYSTEM,
    WCL_HIVES
};

/* "DefaultUser", "Sam", ...; NULL past WCL_HIVES. */
const char *wcl_hive_name(enum wcl_hive h);

/* One entry as the sink sees it; its pointers are valid during the call only. */
struct wcl_entry {
    enum wcl_kind kind;
    enum wcl_root root;
    const char *path;   /* normalized: "Files/Windows/System32/x.dll" */
    const char *target; /* SYMLINK, HARDLINK; NULL otherwise */
    bool mount_point;
    uint64_t size; /* FILE, STREAM: the bytes the data callback gets */
    int64_t mtime;
    bool has_attributes;
    uint32_t attributes;
    bool has_creation_time;
    int64_t creation_sec;
    uint32_t creation_nsec;
    const unsigned char *sd; /* MSWINDOWS.rawsd decoded; NULL when absent */
    size_t sd_len;
    const char *sddl; /* MSWINDOWS.sd; NULL when absent */
    size_t neas;      /* MSWINDOWS.xattr.* records */
    bool replaces;    /* an earlier entry of this layer has this name, in another case or not */
    bool replaces_readonly; /* ... and it was a read-only file */
    const char *replaced;   /* that earlier entry's path; NULL unless replaces */
};

/*
 * Where the entries go (a staging writer on Windows, a recorder in the
 * tests). entry creates one (FILE and STREAM: then data gets its bytes, in
 * order, and once more with len 0 at the end); -EACCES from it for an
 * entry that replaces a read-only one makes wclayer_import call
 * make_writable(path of the earlier entry) and entry again, once.
 */
struct wcl_sink {
    int (*entry)(void *ctx, const struct wcl_entry *e, struct err *err);
    int (*data)(void *ctx, const void *buf, size_t len, struct err *err);
    int (*make_writable)(void *ctx, const char *path, struct err *err);
    void *ctx;
};

/* What one layer held. */
struct wcl_layer_info {
    uint64_t entries;
    uint64_t bytes; /* of files and streams */
    unsigned hives; /* bit (1 << wcl_hive) per delta in Hives/ */
    bool utility_vm;
    unsigned case_collisions;
    unsigned readonly_retries; /* entries created again after make_writable */
};

/* Reads a whole layer tar from read(ctx), validating it, into sink. */
int wclayer_import(wtar_read_fn read, void *ctx, const struct wcl_sink *sink,
                   struct wcl_layer_info *info, struct err *err);

/*
 * The order in which hive deltas are applied, per hive: the indices of the
 * layers (of n, bottom first) that carry one, bottom first, so that each
 * layer's delta goes on top of those below it. layers[h] has count[h]
 * entries (h a wcl_hive); wcl_hive_plan_close frees them.
 */
struct wcl_hive_plan {
    size_t count[WCL_HIVES];
    size_t *layers[WCL_HIVES];
};
int wcl_hive_plan_build(const struct wcl_layer_info *layers, size_t n, struct wcl_hive_plan *out,
                        struct err *err);
void wcl_hive_plan_close(struct wcl_hive_plan *p);

/*
 * Validates a self-relative SECURITY_DESCRIPTOR (revision 1, offsets
 * inside it, SIDs of at most 15 sub-authorities, ACLs whose ACEs fill
 * them exactly). 0, or -EINVAL with a reason in why.
 */
int wcl_sd_check(const unsigned char *sd, size_t len, const char **why);

/* Strict base64 (RFC 4648, padded) into a new buffer; -EINVAL when not. */
int wcl_base64_decode(const char *s, size_t len, unsigned char **out, size_t *outlen);

#endif
