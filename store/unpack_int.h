/*
 * What store/unpack.c (the streams, hashing and the pass over the tar)
 * and store/unpack_tree.c (berth's own writer of the entries, below the
 * target through common/rootdir.h only) share. Not for other modules.
 * One struct unpack per call of layer_unpack, on one pool thread.
 */
#ifndef BERTH_STORE_UNPACK_INT_H
#define BERTH_STORE_UNPACK_INT_H

#include <archive.h>
#include <archive_entry.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "common/err.h"
#include "store/digest.h"
#include "store/unpack.h"

#define WHITEOUT_PREFIX ".wh."
#define WHITEOUT_OPAQUE ".wh..wh..opq"
#define OVERLAY_OPAQUE_XATTR "trusted.overlay.opaque"
#define OVERLAY_XATTR_PREFIX "trusted.overlay."

/* A directory's mode and times, set once every entry is in (a later
 * entry inside it would change its mtime; a mode without u+wx would keep
 * an unprivileged writer out). */
struct unpack_fixup {
    char *rel;
    size_t seq; /* entry order: a later entry of the same name wins */
    mode_t mode;
    struct timespec ts[2];
    void *acl_access, *acl_default; /* xattr values, or NULL */
    size_t acl_access_len, acl_default_len;
};

/* What an entry and its archive are called in errors: a layer's, or a
 * plain tar's (volume and container uploads: no_whiteouts). */
#define UNPACK_ENTRY(u) ((u)->opts->no_whiteouts ? "tar entry" : "layer entry")
#define UNPACK_ARCHIVE(u) ((u)->opts->no_whiteouts ? "tar" : "layer")
/* The bytes as the client sent them (perhaps compressed), and the tar
 * stream inside: a layer's blob and tar, or a plain upload and its tar. */
#define UNPACK_BLOB(u) ((u)->opts->no_whiteouts ? "upload" : "layer blob")
#define UNPACK_TAR(u) ((u)->opts->no_whiteouts ? "tar" : "layer tar")

struct unpack {
    const struct unpack_input *in;
    const struct unpack_opts *opts;
    struct err *err;

    /* --- streams (unpack.c) --- */
    struct sha256 *zhash; /* compressed bytes */
    struct sha256 *thash; /* tar stream */
    uint64_t zsize;
    uint64_t tsize;
    unsigned char *zbuf;
    unsigned char *tbuf;
    int read_errno; /* why a read callback failed */
    bool decompress_failed;
    char decompress_msg[256];
    struct archive *outer;
    struct archive *inner;
    uint64_t last_progress;
    struct unpack_result *res;

    /* --- the tree (unpack_tree.c) --- */
    int root_fd;
    const char *shown_dir; /* where the entries will be seen: the PATH_MAX check */
    size_t shown_len;
    size_t nlowers;
    int *lower_fds;
    /* The parent directory of the previous entry, kept open: consecutive
     * entries of one directory cost no lookup. cur_fd is root_fd when cur
     * is "" (not owned then). rows[d * nlowers + i]: lower i takes part
     * in the merged view at depth d of cur (d = 0 is the root). */
    char *cur;
    size_t cur_len, cur_cap;
    size_t cur_depth;
    int cur_fd;
    bool *rows;
    size_t rows_levels;
    /* The directory entry made last, still open: the next entry's parent
     * is usually that directory. */
    char *hint;
    int hint_fd;
    struct unpack_fixup *fix;
    size_t nfix, capfix;
    int umask;        /* the process's, read once; -1 when unknown */
    bool warned_meta; /* one warning per unpack for metadata that did not stick */
};

/* Reads the next data block of the current entry (libarchive's
 * read_data_block): 1 with a block, 0 at its end, or -errno with u->err
 * set naming rel. */
int unpack_data_block(struct unpack *u, const char *rel, const void **buf, size_t *size,
                      int64_t *off);

/*
 * Cleans a tar name into a relative path without "." components or
 * repeated slashes ("" for the root). Returns NULL with *why set for an
 * absolute name or a ".." component, or on OOM (*why NULL).
 */
char *unpack_path_clean(const char *name, const char **why);

/* How much of a hostile name a message quotes, and the buffer for it. */
#define UNPACK_QUOTE_MAX 120
#define UNPACK_QUOTE_BUF (UNPACK_QUOTE_MAX + 4)
/* name, or its first UNPACK_QUOTE_MAX bytes and "..." in buf. */
const char *unpack_quote(const char *name, char buf[UNPACK_QUOTE_BUF]);

/*
 * unpack_acl.c: the entry's POSIX.1e ACL of type (ARCHIVE_ENTRY_ACL_TYPE_
 * ACCESS or _DEFAULT) as a system.posix_acl_* xattr value (*out, caller
 * frees), or *out NULL when it has none beyond its mode. 0 or -ENOMEM.
 */
int unpack_acl_xattr(struct archive_entry *e, int type, void **out, size_t *out_len);

/* The tree's parts share these (unpack_tree.c: errors, the walk). */
/* An errno from the filesystem about entry rel, as u->err; returns -code. */
int tree_fail(struct unpack *u, const char *rel, const char *what, int neg);
/* Content refused: ERR_INVALID_CONTENT about entry rel. */
int tree_refuse(struct unpack *u, const char *rel, const char *why);
/* Metadata that did not stick: a warning, once per unpack, then debug. */
void tree_meta_warn(struct unpack *u, const char *rel, const char *what, int neg);
/* Closes the directory entry made last (u->hint). */
void tree_hint_drop(struct unpack *u);
/* Back to the root, no descriptor of the walk kept. */
void tree_forget(struct unpack *u);
/* Opens (or reuses) the parent of rel, its first plen bytes, into *pfd. */
int tree_parent(struct unpack *u, const char *rel, size_t plen, int *pfd);
/* The length of rel's parent part, given its last component name. */
size_t tree_parent_len(const char *rel, const char *name);
/* Clears name in dir for a new entry (see its definition). */
int tree_make_room(struct unpack *u, int dir, const char *name, const char *rel, bool new_dir,
                   bool *keep, bool *was_wh);

/* unpack_meta.c: the entries' metadata. */
void tree_entry_xattrs(struct unpack *u, struct archive_entry *e, int fd, int dir, const char *name,
                       const char *rel);
int tree_meta_file(struct unpack *u, struct archive_entry *e, int fd, const char *rel);
void tree_meta_named(struct unpack *u, struct archive_entry *e, int dir, const char *name,
                     const char *rel, bool symlink);
/* Keeps a directory's mode, ACLs and times for tree_finish. */
int tree_fixup_add(struct unpack *u, struct archive_entry *e, const char *rel);

/* unpack_tree.c: opens the target and the lowers; 0 or -errno. */
int tree_open(struct unpack *u);
/* Writes one entry, its name cleaned into rel (not the root). */
int tree_entry(struct unpack *u, struct archive_entry *e, const char *rel);
/* Applies the directories' modes and times. */
int tree_finish(struct unpack *u);
void tree_close(struct unpack *u);

#endif
