#include "process_memory.h"

#include <malloc.h>

void tlsaudit_release_free_memory(void) {
    malloc_trim(0);
}

void tlsaudit_set_mmap_threshold(int bytes) {
    mallopt(M_MMAP_THRESHOLD, bytes);
}

void tlsaudit_set_top_pad(int bytes) {
    mallopt(M_TOP_PAD, bytes);
}
