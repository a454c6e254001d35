#ifndef TLSAUDIT_PROCESS_MEMORY_H
#define TLSAUDIT_PROCESS_MEMORY_H

/// Hands the whole free pages of every malloc arena back to the system (glibc's malloc_trim):
/// what a burst of short-lived buffers left in the middle of an arena stops counting as resident.
void tlsaudit_release_free_memory(void);

/// Serves every allocation of `bytes` or more with its own mapping, returned to the system when
/// freed (glibc's M_MMAP_THRESHOLD, which otherwise rises after the first such free and lets
/// large short-lived buffers settle in the arenas).
void tlsaudit_set_mmap_threshold(int bytes);

/// Grows each malloc heap by at least `bytes` more than an allocation lacks (glibc's M_TOP_PAD;
/// a thread's heap otherwise grows one page, and one mprotect(2), at a time).
void tlsaudit_set_top_pad(int bytes);

#endif
