/*
 * Path strings in their normal form, so that two spellings of one path
 * ("//.berth", "/./.berth/", "/.berth") compare equal. Pure string work:
 * nothing is looked up on disk, so symlinks are not resolved (use a
 * directory fd walk for that). Any thread.
 */
#ifndef BERTH_COMMON_PATH_H
#define BERTH_COMMON_PATH_H

#include <stdbool.h>

/*
 * The normal form of an absolute path: exactly one '/' between
 * components, no "." component, no trailing '/' ("/" stays "/"). A ".."
 * component is kept when keep_dotdot (the caller refuses or resolves it
 * itself), otherwise it removes the component before it, never climbing
 * above "/" (correct only when no component before it is a symlink).
 * Returns a new string (caller frees), or NULL with errno EINVAL when
 * path is NULL or not absolute, ENOMEM when out of memory.
 */
char *path_normalise(const char *path, bool keep_dotdot);

/* Does the absolute path have a ".." component? */
bool path_has_dotdot(const char *path);

/* Is path (normal form) equal to prefix (normal form) or below it? */
bool path_is_within(const char *path, const char *prefix);

#endif
