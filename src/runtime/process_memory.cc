#include "runtime/process_memory.h"

#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace horovod {

bool KeepFreedMemory() {
#if defined(__GLIBC__)
  // No block through its own mmap (those are unmapped on free), and no
  // trimming of the heap's top back to the kernel.
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
#else
  return false;
#endif
}

}  // namespace horovod
