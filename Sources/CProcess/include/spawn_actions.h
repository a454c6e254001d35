#ifndef TLSAUDIT_SPAWN_ACTIONS_H
#define TLSAUDIT_SPAWN_ACTIONS_H

#include <spawn.h>

/// Adds to `actions` the closing of every descriptor from `lowest` up in the child (glibc's
/// posix_spawn_file_actions_addclosefrom_np, which Swift's Glibc module does not export).
int tlsaudit_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest);

/// Adds to `actions` a change of the child's working directory to `path` (glibc's
/// posix_spawn_file_actions_addchdir_np): the parent's own directory is left alone.
int tlsaudit_spawn_change_directory(posix_spawn_file_actions_t *actions, const char *path);

#endif
