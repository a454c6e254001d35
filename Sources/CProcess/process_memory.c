#include "process_memory.h"

#include <malloc.h>

void tlsaudit_release_free_memory(void) {
    malloc_trim(0);
}
