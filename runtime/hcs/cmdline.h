/*
 * The command line of a Windows process. HCS takes one string
 * (ProcessParameters.CommandLine), which the program in the container
 * splits again with the C runtime's rules, the rules of
 * CommandLineToArgvW. This builds that string from an argv so that the
 * split gives back exactly the argv:
 *
 *   - argv[0], the program, is split differently: up to the next quote if
 *     it starts with one, else up to the first space or tab, and a
 *     backslash is never an escape in it. So it is quoted when it has a
 *     space or a tab or is empty, and refused when it has a '"' (no file
 *     name can).
 *   - Every other argument is left alone unless it is empty or has a
 *     space, a tab, a newline or a '"'; then it is quoted, each '"' is
 *     written as \", a run of backslashes before a '"' (or before the
 *     closing quote) is doubled, and other backslashes stay as they are.
 *
 * cmd.exe /c has rules of its own for what follows /c; they are the
 * caller's to respect. Pure; any thread.
 */
#ifndef BERTH_RUNTIME_HCS_CMDLINE_H
#define BERTH_RUNTIME_HCS_CMDLINE_H

#include <stddef.h>

#include "common/err.h"

/* Longest command line Windows' CreateProcess takes, in UTF-16 units. */
#define HCS_CMDLINE_MAX 32767

/*
 * Builds the command line of the NULL-terminated argv (argv[0] first) into
 * a new string (caller frees). EINVAL when argv is empty, argv[0] has a
 * '"', or the result is longer than HCS_CMDLINE_MAX bytes; ENOMEM.
 */
int hcs_cmdline_build(char *const *argv, char **out, struct err *err);

#endif
