/*
 * Which Windows layer format berthd uses (--layer-format auto|wcifs|cimfs|blockcim)
 * and the rule that decides "auto": CimFS where the host build supports
 * it for containers and cimfs.dll loads, WCIFS otherwise. Builds that
 * support it (hcsshim's pkg/cimfs, see
 * ../shared/research/windows-hcs.md section 3): 26100 and later, and
 * 20348 from revision 2031 on. An explicit cimfs on a host that cannot
 * is a start-up error naming what is missing.
 *
 * blockcim (single-file block CIMs and a merged CIM per chain) needs
 * build 27766 or later, hcsshim's gate (pkg/cimfs/cimfs.go:
 * IsBlockCimSupported, and IsMergedCimMountSupported uses the same one),
 * and cimfs.dll's block exports (store/cimfs_api.h). auto never picks
 * it: that gate's own comment says no official build has block CIM
 * support yet (the number is an Insider build's), and hcsshim only
 * writes block CIMs when its caller asks for them; forked CIMs are what
 * released builds support.
 *
 * Pure and portable (the rule is tested on Linux and under Wine); the
 * Windows start-up asks the build and loads the DLL, then calls this.
 * Any thread.
 */
#ifndef BERTH_STORE_CIM_FORMAT_H
#define BERTH_STORE_CIM_FORMAT_H

#include <stdbool.h>

#include "common/err.h"

enum layer_format {
    LAYER_FORMAT_AUTO,
    LAYER_FORMAT_WCIFS,
    LAYER_FORMAT_CIMFS,
    LAYER_FORMAT_BLOCKCIM,
};

#define CIM_BUILD_MIN 26100u        /* every build from here on */
#define CIM_BUILD_LTSC2022 20348u   /* ... and this one ... */
#define CIM_LTSC2022_REVISION 2031u /* ... from this revision on */
#define CIM_BLOCK_BUILD_MIN 27766u  /* block and merged CIMs */

/* "auto", "wcifs", "cimfs", "blockcim" into *out; -EINVAL for anything else. */
int layer_format_parse(const char *s, enum layer_format *out);
/* "auto", "wcifs", "cimfs", "blockcim". */
const char *layer_format_name(enum layer_format f);

/* Does Windows build.revision support CimFS layers for containers? */
bool cim_host_supported(unsigned build, unsigned revision);
/* Does Windows build support block CIMs and merged CIM mounts? */
bool cim_block_host_supported(unsigned build);

/*
 * The format to use, into *out (never AUTO): requested, on a host of
 * build.revision where cimfs.dll loaded (dll_loaded) or did not (dll_why
 * says why; may be NULL). wcifs is always possible here (computestorage
 * is the hcs driver's own requirement); cimfs when requested on a host
 * that cannot is ERR_UNAVAILABLE with a message naming the build or the
 * DLL's failure. For blockcim, dll_loaded says whether cimfs.dll loaded
 * with every block export, and dll_why why not.
 */
int layer_format_choose(enum layer_format requested, unsigned build, unsigned revision,
                        bool dll_loaded, const char *dll_why, enum layer_format *out,
                        struct err *err);

#endif
