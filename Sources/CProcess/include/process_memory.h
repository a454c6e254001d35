#ifndef TLSAUDIT_PROCESS_MEMORY_H
#define TLSAUDIT_PROCESS_MEMORY_H

/// Hands the whole free pages of every malloc arena back to the system (glibc's malloc_trim):
/// what a burst of short-lived buffers left in the middle of an arena stops counting as resident.
void tlsaudit_release_free_memory(void);

#endif
